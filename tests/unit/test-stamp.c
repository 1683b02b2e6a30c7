/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Pixel timestamps without a pipeline (legba-stamp.h): the bits and their
 * check value, the code in every raw format at odd sizes and with padded
 * strides, frames that must not read, and the checker's counts and
 * percentiles.
 */

#include "legba-stamp.h"

#include <string.h>

/* ---- bits ---- */

static void
test_bits_roundtrip (void)
{
  const LegbaStampCode codes[] = {
    {0, 0}, {0xffffffff, 0xffff}, {0x12345678, 0x9abc}, {1, 65535},
  };

  for (guint i = 0; i < G_N_ELEMENTS (codes); i++) {
    guint8 bits[LEGBA_STAMP_BITS];
    LegbaStampCode back = { 0, 0 };

    legba_stamp_code_to_bits (&codes[i], bits);
    g_assert_true (legba_stamp_code_from_bits (bits, &back));
    g_assert_cmpuint (back.time_us, ==, codes[i].time_us);
    g_assert_cmpuint (back.counter, ==, codes[i].counter);
  }
}

/* Any one bit wrong, in the data or in the check value, fails the check. */
static void
test_bits_single_error (void)
{
  LegbaStampCode code = { 0xdeadbeef, 4242 }, back;
  guint8 bits[LEGBA_STAMP_BITS];

  legba_stamp_code_to_bits (&code, bits);
  for (guint i = 0; i < LEGBA_STAMP_BITS; i++) {
    bits[i] ^= 1;
    g_assert_false (legba_stamp_code_from_bits (bits, &back));
    bits[i] ^= 1;
  }
}

/* ---- geometry ---- */

static void
test_cell_geometry (void)
{
  /* 16-pixel cells (one macroblock) by default, whatever the height */
  g_assert_cmpuint (legba_stamp_cell_for_band (640, 360, 0), ==, 16);
  g_assert_cmpuint (legba_stamp_cell_for_band (1920, 1080, 0), ==, 16);
  g_assert_cmpuint (legba_stamp_cell_for_band (3840, 2160, 0), ==, 16);
  /* an explicit band: 4 rows */
  g_assert_cmpuint (legba_stamp_cell_for_band (1920, 1080, 128), ==, 32);
  g_assert_cmpuint (legba_stamp_cell_for_band (1920, 1080, 33), ==, 8);
  /* clamped to the frame: 32 columns across, 4 rows down */
  g_assert_cmpuint (legba_stamp_cell_for_band (320, 240, 0), ==, 10);
  g_assert_cmpuint (legba_stamp_cell_for_band (641, 20, 0), ==, 5);
  g_assert_cmpuint (legba_stamp_cell_for_band (64, 8, 0), ==, 2);
  /* too small to carry the code */
  g_assert_cmpuint (legba_stamp_cell_for_band (63, 360, 0), ==, 0);
  g_assert_cmpuint (legba_stamp_cell_for_band (640, 7, 0), ==, 0);
}

/* ---- frames ---- */

typedef struct
{
  GstVideoInfo info;            /* what the stamp sees */
  GstVideoInfo full;            /* the same memory, padding included */
  GstBuffer *buffer;
} TestFrame;

/* Rewrites every line of the full frame as the format's packer writes
 * it: random bits where a format has unused ones would not round-trip. */
static void
canonicalize (GstVideoInfo * full, GstBuffer * buffer)
{
  const GstVideoFormatInfo *finfo = full->finfo;
  guint8 *line = g_malloc ((full->width + 64) * 8);
  GstVideoFrame frame;

  g_assert_true (gst_video_frame_map (&frame, full, buffer, GST_MAP_READWRITE));
  for (gint y = 0; y < full->height; y++) {
    finfo->unpack_func (finfo, GST_VIDEO_PACK_FLAG_NONE, line, frame.data,
        frame.info.stride, 0, y, full->width);
    finfo->pack_func (finfo, GST_VIDEO_PACK_FLAG_NONE, line, 0, frame.data,
        frame.info.stride, full->chroma_site, y, full->width);
  }
  gst_video_frame_unmap (&frame);
  g_free (line);
}

/* A frame of random pixels (from the standard palette for paletted
 * formats); with pad, padded on the right and at the bottom and with
 * strides aligned to 64 bytes, as a GstVideoInfo with larger strides. */
static gboolean
test_frame_init (TestFrame * f, GstVideoFormat format, guint width,
    guint height, gboolean pad, GRand * rand)
{
  GstMapInfo map;

  if (!gst_video_info_set_format (&f->info, format, width, height))
    return FALSE;
  f->full = f->info;
  if (pad) {
    GstVideoAlignment align;

    gst_video_alignment_reset (&align);
    align.padding_right = 19;
    align.padding_bottom = 3;
    for (guint i = 0; i < GST_VIDEO_MAX_PLANES; i++)
      align.stride_align[i] = 63;
    if (!gst_video_info_align (&f->info, &align))
      return FALSE;
    f->full = f->info;
    f->full.width += align.padding_right;
    f->full.height += align.padding_bottom;
  }

  f->buffer = gst_buffer_new_allocate (NULL, f->info.size, NULL);
  gst_buffer_map (f->buffer, &map, GST_MAP_WRITE);
  for (gsize i = 0; i < map.size; i++)
    map.data[i] = g_rand_int (rand);
  if (GST_VIDEO_FORMAT_INFO_HAS_PALETTE (f->info.finfo)) {
    gsize size;
    gconstpointer palette = gst_video_format_get_palette (format, &size);

    memcpy (map.data + f->info.offset[1], palette, size);
  }
  gst_buffer_unmap (f->buffer, &map);
  canonicalize (&f->full, f->buffer);
  return TRUE;
}

static void
test_frame_clear (TestFrame * f)
{
  gst_clear_buffer (&f->buffer);
}

/* Every pixel of the full frame (padding included), unpacked to AYUV64 or
 * ARGB64 (AYUV or ARGB widened), one line after the other. */
static guint16 *
unpack_all (TestFrame * f)
{
  const GstVideoFormatInfo *finfo = f->full.finfo;
  const GstVideoFormatInfo *uinfo =
      gst_video_format_get_info (finfo->unpack_format);
  gboolean wide = GST_VIDEO_FORMAT_INFO_DEPTH (uinfo, 0) > 8;
  guint w = f->full.width, h = f->full.height;
  guint16 *all = g_new (guint16, (gsize) w * h * 4);
  guint8 *line = g_malloc ((w + 64) * 8);
  GstVideoFrame frame;

  g_assert_true (gst_video_frame_map (&frame, &f->full, f->buffer,
          GST_MAP_READ));
  for (guint y = 0; y < h; y++) {
    finfo->unpack_func (finfo, GST_VIDEO_PACK_FLAG_NONE, line, frame.data,
        frame.info.stride, 0, y, w);
    for (guint i = 0; i < w * 4; i++)
      all[(gsize) y * w * 4 + i] = wide ? ((guint16 *) line)[i] : line[i] * 257;
  }
  gst_video_frame_unmap (&frame);
  g_free (line);
  return all;
}

static void
stamp (TestFrame * f, LegbaStampLayout * layout, const LegbaStampCode * code)
{
  GstVideoFrame frame;

  g_assert_true (gst_video_frame_map (&frame, &f->info, f->buffer,
          GST_MAP_READWRITE));
  legba_stamp_layout_write (layout, &frame, code);
  gst_video_frame_unmap (&frame);
}

static LegbaStampReadResult
read_code (TestFrame * f, LegbaStampLayout * layout, LegbaStampCode * code)
{
  LegbaStampReadResult result;
  GstVideoFrame frame;

  g_assert_true (gst_video_frame_map (&frame, &f->info, f->buffer,
          GST_MAP_READ));
  result = legba_stamp_layout_read (layout, &frame, code);
  gst_video_frame_unmap (&frame);
  return result;
}

/* Writes a code into a random frame and reads it back; every pixel
 * outside the code (and the chroma groups it shares) is as it was. */
static void
check_format (GstVideoFormat format, guint width, guint height,
    gboolean pad, GRand * rand)
{
  const char *name = gst_video_format_to_string (format);
  g_autoptr (LegbaStampLayout) layout = NULL;
  g_autofree guint16 *before = NULL;
  g_autofree guint16 *after = NULL;
  LegbaStampCode code = { g_rand_int (rand), g_rand_int (rand) }, back;
  TestFrame f = { 0 };
  guint cell, code_w, code_h, w, h;

  if (!test_frame_init (&f, format, width, height, pad, rand))
    g_error ("%s: no %ux%u layout%s", name, width, height,
        pad ? " with padding" : "");
  layout = legba_stamp_layout_new (&f.info, 0);
  g_assert_nonnull (layout);
  cell = legba_stamp_layout_get_cell (layout);
  /* a multiple of every chroma subsampling: no chroma sample is shared
   * between the code and the rest of the frame */
  g_assert_cmpuint (cell, ==, 16);
  code_w = cell * LEGBA_STAMP_COLUMNS;
  code_h = cell * LEGBA_STAMP_ROWS;

  before = unpack_all (&f);
  stamp (&f, layout, &code);
  after = unpack_all (&f);

  if (read_code (&f, layout, &back) != LEGBA_STAMP_READ_OK)
    g_error ("%s %ux%u%s: the code does not read back", name, width, height,
        pad ? " padded" : "");
  g_assert_cmpuint (back.time_us, ==, code.time_us);
  g_assert_cmpuint (back.counter, ==, code.counter);

  w = f.full.width;
  h = f.full.height;
  for (guint y = 0; y < h; y++) {
    for (guint x = 0; x < w; x++) {
      const guint16 *b = before + ((gsize) y * w + x) * 4;
      const guint16 *a = after + ((gsize) y * w + x) * 4;

      if (y < code_h && x < code_w)
        continue;
      /* GStreamer 1.22 packs odd-width UYVP lines one byte pair into the
       * next line: the last pixel above a line of the code shares it */
      if (format == GST_VIDEO_FORMAT_UYVP && x == w - 1 && (w & 1)
          && y < code_h)
        continue;
      if (memcmp (b, a, 8) != 0)
        g_error ("%s %ux%u%s: pixel %u,%u outside the code changed from "
            "%04x %04x %04x %04x to %04x %04x %04x %04x", name, width,
            height, pad ? " padded" : "", x, y, b[0], b[1], b[2], b[3], a[0],
            a[1], a[2], a[3]);
    }
  }
  test_frame_clear (&f);
}

static void
test_formats (gconstpointer data)
{
  gboolean pad = GPOINTER_TO_INT (data);
  g_autoptr (GRand) rand = g_rand_new_with_seed (7);
  const GstVideoFormat *formats;
  guint n;

  formats = gst_video_formats_raw (&n);
  g_assert_cmpuint (n, >, 90);
  for (guint i = 0; i < n; i++) {
    /* lines packed in part, and whole (the code is 512 pixels wide) */
    check_format (formats[i], 641, 69, pad, rand);
    check_format (formats[i], 523, 67, pad, rand);
  }
}

/* I420 frames (unpadded) for the tests below. */
static void
i420_frame (TestFrame * f, guint width, guint height, guint8 luma)
{
  g_autoptr (GRand) rand = g_rand_new_with_seed (1);
  GstMapInfo map;

  g_assert_true (test_frame_init (f, GST_VIDEO_FORMAT_I420, width, height,
          FALSE, rand));
  gst_buffer_map (f->buffer, &map, GST_MAP_WRITE);
  memset (map.data, luma, f->info.offset[1]);
  memset (map.data + f->info.offset[1], 128, map.size - f->info.offset[1]);
  gst_buffer_unmap (f->buffer, &map);
}

/* Applies y' = (y - 128) * num / den + 128 + offset to the luma plane. */
static void
adjust_luma (TestFrame * f, int num, int den, int offset)
{
  GstMapInfo map;

  gst_buffer_map (f->buffer, &map, GST_MAP_READWRITE);
  for (gsize i = 0; i < f->info.offset[1]; i++) {
    int y = ((int) map.data[i] - 128) * num / den + 128 + offset;

    map.data[i] = CLAMP (y, 0, 255);
  }
  gst_buffer_unmap (f->buffer, &map);
}

static void
test_read_blank (void)
{
  g_autoptr (LegbaStampLayout) layout = NULL;
  LegbaStampCode code;
  TestFrame f = { 0 };

  i420_frame (&f, 640, 360, 128);
  layout = legba_stamp_layout_new (&f.info, 0);
  g_assert_cmpint (read_code (&f, layout, &code), ==, LEGBA_STAMP_READ_NO_CODE);
  test_frame_clear (&f);
}

/* Noise has contrast everywhere; its cells must still fail the check. */
static void
test_read_noise (void)
{
  g_autoptr (GRand) rand = g_rand_new_with_seed (3);
  guint ok = 0, bad_check = 0;

  for (guint i = 0; i < 200; i++) {
    g_autoptr (LegbaStampLayout) layout = NULL;
    LegbaStampCode code;
    TestFrame f = { 0 };

    /* 128x16: cells of 4 pixels, sampled 2x2, so pairs of cells often
     * differ enough to read as bits */
    g_assert_true (test_frame_init (&f, GST_VIDEO_FORMAT_GRAY8, 128, 16,
            FALSE, rand));
    layout = legba_stamp_layout_new (&f.info, 0);
    switch (read_code (&f, layout, &code)) {
      case LEGBA_STAMP_READ_OK:
        ok++;
        break;
      case LEGBA_STAMP_READ_BAD_CHECK:
        bad_check++;
        break;
      case LEGBA_STAMP_READ_NO_CODE:
        break;
    }
    test_frame_clear (&f);
  }
  g_assert_cmpuint (ok, ==, 0);
  g_assert_cmpuint (bad_check, <, 200);
}

/* Lossy paths shift and squeeze levels: the pairs still read. */
static void
test_read_levels (void)
{
  g_autoptr (LegbaStampLayout) layout = NULL;
  LegbaStampCode code = { 123456789, 321 }, back;
  TestFrame f = { 0 };

  i420_frame (&f, 640, 360, 60);
  layout = legba_stamp_layout_new (&f.info, 0);
  stamp (&f, layout, &code);
  adjust_luma (&f, 1, 3, 40);
  g_assert_cmpint (read_code (&f, layout, &back), ==, LEGBA_STAMP_READ_OK);
  g_assert_cmpuint (back.time_us, ==, code.time_us);
  g_assert_cmpuint (back.counter, ==, code.counter);
  /* squeezed to nothing: no code, not a guess */
  adjust_luma (&f, 1, 20, 0);
  g_assert_cmpint (read_code (&f, layout, &back), ==, LEGBA_STAMP_READ_NO_CODE);
  test_frame_clear (&f);
}

/* Swapping one pair of cells flips one bit: the check value catches it. */
static void
test_read_damaged (void)
{
  g_autoptr (LegbaStampLayout) layout = NULL;
  LegbaStampCode code = { 987654321, 7 }, back;
  TestFrame f = { 0 };
  GstMapInfo map;
  guint cell, stride;

  i420_frame (&f, 640, 360, 128);
  layout = legba_stamp_layout_new (&f.info, 0);
  cell = legba_stamp_layout_get_cell (layout);
  stride = f.info.stride[0];
  stamp (&f, layout, &code);
  g_assert_cmpint (read_code (&f, layout, &back), ==, LEGBA_STAMP_READ_OK);

  /* the pair of bit 37: row 2, columns 10 and 11 */
  gst_buffer_map (f.buffer, &map, GST_MAP_READWRITE);
  for (guint y = 2 * cell; y < 3 * cell; y++) {
    guint8 *p = map.data + y * stride + 10 * cell;

    for (guint x = 0; x < cell; x++) {
      guint8 t = p[x];

      p[x] = p[x + cell];
      p[x + cell] = t;
    }
  }
  gst_buffer_unmap (f.buffer, &map);
  g_assert_cmpint (read_code (&f, layout, &back), ==,
      LEGBA_STAMP_READ_BAD_CHECK);
  test_frame_clear (&f);
}

static void
test_layout_too_small (void)
{
  GstVideoInfo info;

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_I420, 62, 360);
  g_assert_null (legba_stamp_layout_new (&info, 0));
  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_I420, 640, 6);
  g_assert_null (legba_stamp_layout_new (&info, 0));
}

/* ---- statistics ---- */

static void
assert_counts (LegbaStampStats * stats, guint64 valid, guint64 failed,
    guint64 lost, guint64 duplicated, guint64 reordered)
{
  LegbaStampSummary s;

  legba_stamp_stats_summarize (stats, &s);
  g_assert_cmpuint (s.frames, ==, valid + failed);
  g_assert_cmpuint (s.valid, ==, valid);
  g_assert_cmpuint (s.failed, ==, failed);
  g_assert_cmpuint (s.lost, ==, lost);
  g_assert_cmpuint (s.duplicated, ==, duplicated);
  g_assert_cmpuint (s.reordered, ==, reordered);
}

static void
test_stats_order (void)
{
  g_autoptr (LegbaStampStats) stats = legba_stamp_stats_new ();
  LegbaStampSummary s;

  g_assert_cmpint (legba_stamp_stats_add (stats, 10, 1000), ==,
      LEGBA_STAMP_FRAME_NEW);
  g_assert_cmpint (legba_stamp_stats_add (stats, 11, 1000), ==,
      LEGBA_STAMP_FRAME_NEW);
  /* 12 and 13 missing */
  g_assert_cmpint (legba_stamp_stats_add (stats, 14, 1000), ==,
      LEGBA_STAMP_FRAME_NEW);
  assert_counts (stats, 3, 0, 2, 0, 0);
  /* 13 arrives late: no longer lost */
  g_assert_cmpint (legba_stamp_stats_add (stats, 13, 5000), ==,
      LEGBA_STAMP_FRAME_REORDERED);
  assert_counts (stats, 4, 0, 1, 0, 1);
  /* shown again: counted, no latency kept */
  g_assert_cmpint (legba_stamp_stats_add (stats, 14, 90000), ==,
      LEGBA_STAMP_FRAME_DUPLICATE);
  g_assert_cmpint (legba_stamp_stats_add (stats, 13, 90000), ==,
      LEGBA_STAMP_FRAME_DUPLICATE);
  legba_stamp_stats_add_failed (stats);
  assert_counts (stats, 6, 1, 1, 2, 1);
  /* older than the first: what lies between is missing */
  g_assert_cmpint (legba_stamp_stats_add (stats, 7, 1000), ==,
      LEGBA_STAMP_FRAME_REORDERED);
  assert_counts (stats, 7, 1, 3, 2, 2);

  legba_stamp_stats_summarize (stats, &s);
  g_assert_cmpuint (s.first_counter, ==, 10);
  g_assert_cmpuint (s.n, ==, 5);
  g_assert_cmpfloat (s.max_ms, ==, 5.0);
}

/* The 16-bit counter wraps; counters are extended as RTP's are. */
static void
test_stats_wrap (void)
{
  g_autoptr (LegbaStampStats) stats = legba_stamp_stats_new ();

  for (guint i = 65530; i < 65536 + 70000; i++) {
    if (i == 65537)
      continue;                 /* lost, across the wrap */
    g_assert_cmpint (legba_stamp_stats_add (stats, (guint16) i, 100), ==,
        LEGBA_STAMP_FRAME_NEW);
  }
  assert_counts (stats, 70005, 0, 1, 0, 0);
  /* the newest frame's neighbour again, 70,000 frames on */
  g_assert_cmpint (legba_stamp_stats_add (stats, (guint16) (65536 + 69999),
          100), ==, LEGBA_STAMP_FRAME_DUPLICATE);
  g_assert_cmpint (legba_stamp_stats_add (stats, (guint16) (65536 + 70000),
          100), ==, LEGBA_STAMP_FRAME_NEW);
}

static void
test_stats_percentiles (void)
{
  g_autoptr (LegbaStampStats) stats = legba_stamp_stats_new ();
  LegbaStampSummary s;
  const guint32 *latencies;
  guint n;

  legba_stamp_stats_summarize (stats, &s);
  g_assert_cmpuint (s.n, ==, 0);
  g_assert_cmpfloat (s.p50_ms, ==, -1);

  /* 1..100 ms, shuffled */
  for (guint i = 0; i < 100; i++)
    legba_stamp_stats_add (stats, i, ((i * 37) % 100 + 1) * 1000);
  legba_stamp_stats_summarize (stats, &s);
  g_assert_cmpuint (s.n, ==, 100);
  g_assert_cmpfloat (s.p50_ms, ==, 50);
  g_assert_cmpfloat (s.p95_ms, ==, 95);
  g_assert_cmpfloat (s.p99_ms, ==, 99);
  g_assert_cmpfloat (s.min_ms, ==, 1);
  g_assert_cmpfloat (s.max_ms, ==, 100);
  g_assert_cmpfloat (s.mean_ms, ==, 50.5);
  /* the series keeps arrival order */
  latencies = legba_stamp_stats_get_latencies (stats, &n);
  g_assert_cmpuint (n, ==, 100);
  g_assert_cmpuint (latencies[1], ==, 38000);

  /* one more, far out: nearest rank of 101 samples */
  legba_stamp_stats_add (stats, 100, 1000000);
  legba_stamp_stats_summarize (stats, &s);
  g_assert_cmpfloat (s.p50_ms, ==, 51);
  g_assert_cmpfloat (s.p99_ms, ==, 100);
  g_assert_cmpfloat (s.max_ms, ==, 1000);
}

static void
test_stats_one_sample (void)
{
  g_autoptr (LegbaStampStats) stats = legba_stamp_stats_new ();
  LegbaStampSummary s;

  legba_stamp_stats_add (stats, 0, 2500);
  legba_stamp_stats_summarize (stats, &s);
  g_assert_cmpfloat (s.p50_ms, ==, 2.5);
  g_assert_cmpfloat (s.p99_ms, ==, 2.5);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/stamp/bits/roundtrip", test_bits_roundtrip);
  g_test_add_func ("/stamp/bits/single-error", test_bits_single_error);
  g_test_add_func ("/stamp/cell/geometry", test_cell_geometry);
  g_test_add_data_func ("/stamp/formats/odd-size", GINT_TO_POINTER (FALSE),
      test_formats);
  g_test_add_data_func ("/stamp/formats/padded-strides",
      GINT_TO_POINTER (TRUE), test_formats);
  g_test_add_func ("/stamp/read/blank", test_read_blank);
  g_test_add_func ("/stamp/read/noise", test_read_noise);
  g_test_add_func ("/stamp/read/levels", test_read_levels);
  g_test_add_func ("/stamp/read/damaged", test_read_damaged);
  g_test_add_func ("/stamp/layout/too-small", test_layout_too_small);
  g_test_add_func ("/stamp/stats/order", test_stats_order);
  g_test_add_func ("/stamp/stats/wrap", test_stats_wrap);
  g_test_add_func ("/stamp/stats/percentiles", test_stats_percentiles);
  g_test_add_func ("/stamp/stats/one-sample", test_stats_one_sample);
  return g_test_run ();
}
