/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Pixel timestamps: the code's layout and bits are described in
 * legba-stamp.h.
 */
#include "legba-stamp.h"

#include <string.h>

/* Levels of the two kinds of cell, 8 bits (video range for Y'CbCr, full
 * range for R'G'B'), and the least difference between the two cells of a
 * pair that still reads as a bit, on the 16-bit scale. */
#define YUV_BRIGHT 235
#define YUV_DARK 16
#define RGB_BRIGHT 255
#define RGB_DARK 0
#define NEUTRAL 128
#define MIN_CONTRAST (40 * 257)

/* Lines are unpacked and packed over the code's width rounded up to a
 * multiple of every pixel group GStreamer packs (2, 3, 4 and 6 pixels;
 * tiles are packed in part as pairs), so that no group is cut in two, or
 * over the whole line when that is shorter. */
#define LINE_GROUP 12

/* The automatic cell side: one 16x16 macroblock of H.264 and VP8, so that
 * every macroblock of the code is flat and costs a starved encoder the
 * fewest bits (larger cells, which straddle macroblocks, fail more often
 * at 200 kbit/s in 1080p). */
#define AUTO_CELL 16

guint32
legba_stamp_now_us (void)
{
  /* g_get_monotonic_time() reads CLOCK_MONOTONIC on Linux: one clock for
   * every process of the host. */
  return (guint32) g_get_monotonic_time ();
}

/**
 * legba_stamp_caps:
 *
 * Returns: (transfer full): the caps of legbastamp's and legbastampcheck's
 *   pads: every raw video format in system memory, I420 and NV12 (what
 *   encoders take) first
 */
GstCaps *
legba_stamp_caps (void)
{
  const GstVideoFormat first[] = { GST_VIDEO_FORMAT_I420,
    GST_VIDEO_FORMAT_NV12
  };
  const GstVideoFormat *formats;
  GValue list = G_VALUE_INIT;
  GValue v = G_VALUE_INIT;
  GstCaps *caps;
  guint n;

  g_value_init (&list, GST_TYPE_LIST);
  g_value_init (&v, G_TYPE_STRING);
  for (guint i = 0; i < G_N_ELEMENTS (first); i++) {
    g_value_set_static_string (&v, gst_video_format_to_string (first[i]));
    gst_value_list_append_value (&list, &v);
  }
  formats = gst_video_formats_raw (&n);
  for (guint i = 0; i < n; i++) {
    if (formats[i] == first[0] || formats[i] == first[1])
      continue;
    g_value_set_static_string (&v, gst_video_format_to_string (formats[i]));
    gst_value_list_append_value (&list, &v);
  }
  caps = gst_caps_from_string ("video/x-raw, width=(int)[1, max], "
      "height=(int)[1, max], framerate=(fraction)[0/1, max]");
  gst_caps_set_value (caps, "format", &list);
  g_value_unset (&v);
  g_value_unset (&list);
  return caps;
}

/* The side of one cell for a frame of width x height when the band is
 * band_height pixels high (0: automatic); 0 when the code does not fit. */
guint
legba_stamp_cell_for_band (guint width, guint height, guint band_height)
{
  guint cell;

  cell = band_height == 0 ? AUTO_CELL : band_height / LEGBA_STAMP_ROWS;
  cell = MAX (cell, LEGBA_STAMP_MIN_CELL);
  cell = MIN (cell, width / LEGBA_STAMP_COLUMNS);
  cell = MIN (cell, height / LEGBA_STAMP_ROWS);
  return cell >= LEGBA_STAMP_MIN_CELL ? cell : 0;
}

/* ---- the bits ---- */

/* CRC-16/CCITT-FALSE: polynomial 0x1021, initial value 0xffff. */
static guint16
crc16 (const guint8 * data, gsize len)
{
  guint16 crc = 0xffff;

  for (gsize i = 0; i < len; i++) {
    crc ^= (guint16) data[i] << 8;
    for (int b = 0; b < 8; b++)
      crc = crc & 0x8000 ? (guint16) (crc << 1) ^ 0x1021 : (guint16) (crc << 1);
  }
  return crc;
}

void
legba_stamp_code_to_bits (const LegbaStampCode * code,
    guint8 bits[LEGBA_STAMP_BITS])
{
  guint8 bytes[LEGBA_STAMP_BITS / 8];
  guint16 check;

  GST_WRITE_UINT32_BE (bytes, code->time_us);
  GST_WRITE_UINT16_BE (bytes + 4, code->counter);
  check = crc16 (bytes, 6);
  GST_WRITE_UINT16_BE (bytes + 6, check);
  for (guint i = 0; i < LEGBA_STAMP_BITS; i++)
    bits[i] = (bytes[i / 8] >> (7 - i % 8)) & 1;
}

gboolean
legba_stamp_code_from_bits (const guint8 bits[LEGBA_STAMP_BITS],
    LegbaStampCode * code)
{
  guint8 bytes[LEGBA_STAMP_BITS / 8] = { 0 };

  for (guint i = 0; i < LEGBA_STAMP_BITS; i++)
    bytes[i / 8] |= (bits[i] & 1) << (7 - i % 8);
  if (crc16 (bytes, 6) != GST_READ_UINT16_BE (bytes + 6))
    return FALSE;
  code->time_us = GST_READ_UINT32_BE (bytes);
  code->counter = GST_READ_UINT16_BE (bytes + 4);
  return TRUE;
}

/* ---- the layout in a frame ---- */

struct _LegbaStampLayout
{
  const GstVideoFormatInfo *finfo;
  GstVideoPackFlags flags;
  GstVideoChromaSite chroma_site;
  guint cell;
  guint line_width;             /* pixels unpacked and packed per line */
  gboolean wide;                /* unpacked to 16 bits a component */
  gboolean rgb;                 /* unpacked to ARGB rather than AYUV */
  guint8 *line;                 /* one unpacked line */
  guint8 *code;                 /* one unpacked line of a row of cells */
};

/**
 * legba_stamp_layout_new:
 * @info: the frames' format and size
 * @band_height: height of the band carrying the code, in pixels; 0 for
 *   64 (cells of 16 pixels)
 *
 * Returns: (transfer full) (nullable): the layout of the code in frames of
 *   @info, or %NULL when they are too small to carry it or their format
 *   cannot be packed
 */
LegbaStampLayout *
legba_stamp_layout_new (const GstVideoInfo * info, guint band_height)
{
  const GstVideoFormatInfo *finfo;
  LegbaStampLayout *layout;
  guint cell;

  g_return_val_if_fail (info != NULL && info->finfo != NULL, NULL);
  finfo = info->finfo;

  if (finfo->unpack_func == NULL || finfo->pack_func == NULL
      || finfo->pack_lines != 1)
    return NULL;
  cell = legba_stamp_cell_for_band (GST_VIDEO_INFO_WIDTH (info),
      GST_VIDEO_INFO_HEIGHT (info), band_height);
  if (cell == 0)
    return NULL;

  layout = g_new0 (LegbaStampLayout, 1);
  layout->finfo = finfo;
  layout->cell = cell;
  layout->line_width = MIN ((guint) GST_VIDEO_INFO_WIDTH (info),
      (cell * LEGBA_STAMP_COLUMNS + LINE_GROUP - 1) / LINE_GROUP * LINE_GROUP);
  /* GStreamer 1.22 gives odd-width UYVP a stride that ends inside its last
   * pair of pixels, which its packer writes whole: stop short of it (the
   * code is an even number of pixels wide) */
  if (finfo->format == GST_VIDEO_FORMAT_UYVP && (layout->line_width & 1))
    layout->line_width--;
  layout->chroma_site = GST_VIDEO_INFO_CHROMA_SITE (info);
  if (GST_VIDEO_INFO_INTERLACE_MODE (info) ==
      GST_VIDEO_INTERLACE_MODE_INTERLEAVED
      || GST_VIDEO_INFO_INTERLACE_MODE (info) == GST_VIDEO_INTERLACE_MODE_MIXED)
    layout->flags = GST_VIDEO_PACK_FLAG_INTERLACED;
  layout->wide = GST_VIDEO_FORMAT_INFO_DEPTH (gst_video_format_get_info
      (finfo->unpack_format), 0) > 8;
  layout->rgb = finfo->unpack_format == GST_VIDEO_FORMAT_ARGB
      || finfo->unpack_format == GST_VIDEO_FORMAT_ARGB64;
  /* Some unpackers write whole pixel groups past the width they are
   * given: room for one more group. */
  layout->line = g_malloc0 ((layout->line_width + LINE_GROUP) * 8);
  layout->code = g_malloc0 (cell * LEGBA_STAMP_COLUMNS * 8);
  return layout;
}

void
legba_stamp_layout_free (LegbaStampLayout * layout)
{
  if (layout == NULL)
    return;
  g_free (layout->line);
  g_free (layout->code);
  g_free (layout);
}

guint
legba_stamp_layout_get_cell (const LegbaStampLayout * layout)
{
  return layout->cell;
}

static void
unpack_line (LegbaStampLayout * layout, const GstVideoFrame * frame, guint y)
{
  layout->finfo->unpack_func (layout->finfo, layout->flags, layout->line,
      frame->data, frame->info.stride, 0, y, layout->line_width);
}

/* Sets pixels [x0, x1) of the unpacked code line to a bright or a dark
 * cell. */
static void
fill_cell (LegbaStampLayout * layout, guint x0, guint x1, gboolean bright)
{
  guint16 c[4];

  c[0] = 0xffff;
  if (layout->rgb) {
    c[1] = c[2] = c[3] = (bright ? RGB_BRIGHT : RGB_DARK) * 257;
  } else {
    c[1] = (bright ? YUV_BRIGHT : YUV_DARK) * 257;
    c[2] = c[3] = NEUTRAL << 8;
  }

  if (layout->wide) {
    guint16 *p = (guint16 *) layout->code;

    for (guint x = x0; x < x1; x++)
      memcpy (p + 4 * x, c, sizeof (c));
  } else {
    guint8 *p = layout->code;
    guint8 b[4] = { c[0] >> 8, c[1] >> 8, c[2] >> 8, c[3] >> 8 };

    for (guint x = x0; x < x1; x++)
      memcpy (p + 4 * x, b, sizeof (b));
  }
}

/**
 * legba_stamp_layout_write:
 * @layout: the layout for @frame's format and size
 * @frame: a frame mapped for writing
 * @code: what to write
 *
 * Writes @code into the top-left corner of @frame; the rest of the frame
 * is left as it was.
 */
void
legba_stamp_layout_write (LegbaStampLayout * layout, GstVideoFrame * frame,
    const LegbaStampCode * code)
{
  guint8 bits[LEGBA_STAMP_BITS];
  guint cell = layout->cell;

  gsize code_bytes = cell * LEGBA_STAMP_COLUMNS * (layout->wide ? 8 : 4);

  legba_stamp_code_to_bits (code, bits);
  for (guint row = 0; row < LEGBA_STAMP_ROWS; row++) {
    for (guint col = 0; col < LEGBA_STAMP_COLUMNS; col++) {
      guint bit = bits[row * LEGBA_STAMP_COLUMNS / 2 + col / 2];

      /* a 1 is bright then dark, a 0 dark then bright */
      fill_cell (layout, col * cell, (col + 1) * cell, bit ^ (col & 1));
    }
    for (guint y = row * cell; y < (row + 1) * cell; y++) {
      /* the pixels right of the code share packing groups with it */
      unpack_line (layout, frame, y);
      memcpy (layout->line, layout->code, code_bytes);
      layout->finfo->pack_func (layout->finfo, layout->flags, layout->line,
          0, frame->data, frame->info.stride, layout->chroma_site, y,
          layout->line_width);
    }
  }
}

/* The sum of the luma of pixels [x0, x1) of the unpacked line, on the
 * 16-bit scale (R'G'B' weighted as BT.601 does). */
static guint64
sum_luma (LegbaStampLayout * layout, guint x0, guint x1)
{
  guint64 sum = 0;

  for (guint x = x0; x < x1; x++) {
    guint a, b, c, y;

    if (layout->wide) {
      const guint16 *p = (const guint16 *) layout->line + 4 * x;

      a = p[1];
      b = p[2];
      c = p[3];
    } else {
      const guint8 *p = layout->line + 4 * x;

      a = p[1] * 257;
      b = p[2] * 257;
      c = p[3] * 257;
    }
    y = layout->rgb ? (77 * a + 150 * b + 29 * c) >> 8 : a;
    sum += y;
  }
  return sum;
}

/**
 * legba_stamp_layout_read:
 * @layout: the layout for @frame's format and size
 * @frame: a frame mapped for reading
 * @code: (out): where to put the code read
 *
 * Returns: %LEGBA_STAMP_READ_OK when @frame carries a code whose check
 *   value is right (then @code holds it)
 */
LegbaStampReadResult
legba_stamp_layout_read (LegbaStampLayout * layout,
    const GstVideoFrame * frame, LegbaStampCode * code)
{
  guint64 sums[LEGBA_STAMP_ROWS * LEGBA_STAMP_COLUMNS] = { 0 };
  guint8 bits[LEGBA_STAMP_BITS];
  guint cell = layout->cell;
  guint margin = cell / 4;

  /* only the inner half of each cell: its edges are what codecs blur */
  for (guint row = 0; row < LEGBA_STAMP_ROWS; row++) {
    for (guint y = row * cell + margin; y < (row + 1) * cell - margin; y++) {
      unpack_line (layout, frame, y);
      for (guint col = 0; col < LEGBA_STAMP_COLUMNS; col++)
        sums[row * LEGBA_STAMP_COLUMNS + col] += sum_luma (layout,
            col * cell + margin, (col + 1) * cell - margin);
    }
  }

  for (guint i = 0; i < LEGBA_STAMP_BITS; i++) {
    guint64 first = sums[2 * i], second = sums[2 * i + 1];
    guint64 inner = cell - 2 * margin;
    guint64 diff = first > second ? first - second : second - first;

    if (diff < MIN_CONTRAST * inner * inner)
      return LEGBA_STAMP_READ_NO_CODE;
    bits[i] = first > second;
  }
  return legba_stamp_code_from_bits (bits, code) ? LEGBA_STAMP_READ_OK :
      LEGBA_STAMP_READ_BAD_CHECK;
}

/* ---- statistics ---- */

struct _LegbaStampStats
{
  gboolean started;
  gint64 min_ext, max_ext;      /* extended counters seen, lowest and highest */
  guint first_counter;
  guint64 frames, valid, failed, lost, duplicated, reordered;
  guint8 seen[65536 / 8];       /* by counter: within 32,768 of max_ext */
  GArray *latencies;            /* guint32 microseconds, first sightings */
  GArray *scratch;
};

LegbaStampStats *
legba_stamp_stats_new (void)
{
  LegbaStampStats *stats = g_new0 (LegbaStampStats, 1);

  stats->latencies = g_array_new (FALSE, FALSE, sizeof (guint32));
  stats->scratch = g_array_new (FALSE, FALSE, sizeof (guint32));
  return stats;
}

void
legba_stamp_stats_free (LegbaStampStats * stats)
{
  if (stats == NULL)
    return;
  g_array_unref (stats->latencies);
  g_array_unref (stats->scratch);
  g_free (stats);
}

static gboolean
seen_get (LegbaStampStats * stats, gint64 ext)
{
  guint16 i = (guint16) ext;

  return (stats->seen[i / 8] >> (i % 8)) & 1;
}

static void
seen_set (LegbaStampStats * stats, gint64 ext, gboolean value)
{
  guint16 i = (guint16) ext;

  if (value)
    stats->seen[i / 8] |= 1 << (i % 8);
  else
    stats->seen[i / 8] &= ~(1 << (i % 8));
}

static void
seen_clear_range (LegbaStampStats * stats, gint64 from, gint64 to)
{
  for (gint64 e = from; e < to; e++)
    seen_set (stats, e, FALSE);
}

/**
 * legba_stamp_stats_add:
 * @stats: the statistics
 * @counter: the counter of a frame whose code passed its check
 * @latency_us: now minus the time in its code
 *
 * Counts one valid frame. Counters are extended past their 16 bits the way
 * RTP sequence numbers are (RFC 3550 A.1): a frame more than 32,767
 * counters away from the highest seen is taken for the nearer wrap.
 * A frame's latency is kept the first time it is seen only: a duplicate
 * shows an old picture again and its age says nothing about the path.
 *
 * Returns: how the frame stands to the ones seen before it
 */
LegbaStampFrameKind
legba_stamp_stats_add (LegbaStampStats * stats, guint16 counter,
    guint32 latency_us)
{
  gint16 delta;
  gint64 ext;

  stats->frames++;
  stats->valid++;
  if (!stats->started) {
    stats->started = TRUE;
    stats->first_counter = counter;
    stats->min_ext = stats->max_ext = counter;
    memset (stats->seen, 0, sizeof (stats->seen));
    seen_set (stats, counter, TRUE);
    g_array_append_val (stats->latencies, latency_us);
    return LEGBA_STAMP_FRAME_NEW;
  }

  delta = (gint16) (guint16) (counter - (guint16) stats->max_ext);
  ext = stats->max_ext + delta;
  if (delta > 0) {
    seen_clear_range (stats, stats->max_ext + 1, ext);
    stats->lost += delta - 1;
    stats->max_ext = ext;
    seen_set (stats, ext, TRUE);
    g_array_append_val (stats->latencies, latency_us);
    return LEGBA_STAMP_FRAME_NEW;
  }
  if (ext >= stats->min_ext && seen_get (stats, ext)) {
    stats->duplicated++;
    return LEGBA_STAMP_FRAME_DUPLICATE;
  }
  if (ext < stats->min_ext) {
    /* older than the first frame seen: what lies between is missing */
    seen_clear_range (stats, ext + 1, stats->min_ext);
    stats->lost += stats->min_ext - ext - 1;
    stats->min_ext = ext;
  } else {
    stats->lost--;
  }
  stats->reordered++;
  seen_set (stats, ext, TRUE);
  g_array_append_val (stats->latencies, latency_us);
  return LEGBA_STAMP_FRAME_REORDERED;
}

void
legba_stamp_stats_add_failed (LegbaStampStats * stats)
{
  stats->frames++;
  stats->failed++;
}

/* The k-th smallest of a[0..n-1] (Hoare's selection); reorders a. */
static guint32
select_kth (guint32 * a, gssize n, gssize k)
{
  gssize lo = 0, hi = n - 1;

  while (lo < hi) {
    guint32 pivot = a[lo + (hi - lo) / 2];
    gssize i = lo, j = hi;

    while (i <= j) {
      while (a[i] < pivot)
        i++;
      while (a[j] > pivot)
        j--;
      if (i <= j) {
        guint32 t = a[i];

        a[i++] = a[j];
        a[j--] = t;
      }
    }
    if (k <= j)
      hi = j;
    else if (k >= i)
      lo = i;
    else
      break;
  }
  return a[k];
}

/* Nearest rank: the smallest sample with at least percent % of them at or
 * below it. */
static gdouble
percentile_ms (GArray * scratch, guint percent)
{
  gssize n = scratch->len;
  gssize k = (gssize) ((percent * (guint64) n + 99) / 100) - 1;

  k = CLAMP (k, 0, n - 1);
  return select_kth ((guint32 *) scratch->data, n, k) / 1000.0;
}

/**
 * legba_stamp_stats_summarize:
 * @stats: the statistics
 * @summary: (out caller-allocates): the counts and latency figures so far
 */
void
legba_stamp_stats_summarize (LegbaStampStats * stats,
    LegbaStampSummary * summary)
{
  const guint32 *l = (const guint32 *) stats->latencies->data;
  guint n = stats->latencies->len;
  guint64 total = 0;
  guint32 min = G_MAXUINT32, max = 0;

  memset (summary, 0, sizeof (*summary));
  summary->frames = stats->frames;
  summary->valid = stats->valid;
  summary->failed = stats->failed;
  summary->lost = stats->lost;
  summary->duplicated = stats->duplicated;
  summary->reordered = stats->reordered;
  summary->first_counter = stats->first_counter;
  summary->n = n;
  if (n == 0) {
    summary->p50_ms = summary->p95_ms = summary->p99_ms = -1;
    summary->min_ms = summary->max_ms = summary->mean_ms = -1;
    return;
  }

  for (guint i = 0; i < n; i++) {
    total += l[i];
    min = MIN (min, l[i]);
    max = MAX (max, l[i]);
  }
  summary->min_ms = min / 1000.0;
  summary->max_ms = max / 1000.0;
  summary->mean_ms = (gdouble) total / n / 1000.0;

  g_array_set_size (stats->scratch, n);
  memcpy (stats->scratch->data, l, n * sizeof (guint32));
  summary->p50_ms = percentile_ms (stats->scratch, 50);
  summary->p95_ms = percentile_ms (stats->scratch, 95);
  summary->p99_ms = percentile_ms (stats->scratch, 99);
}

/**
 * legba_stamp_stats_get_latencies:
 * @stats: the statistics
 * @n: (out): how many
 *
 * Returns: (transfer none) (array length=n): every latency kept, in
 *   microseconds, in the order the frames arrived
 */
const guint32 *
legba_stamp_stats_get_latencies (LegbaStampStats * stats, guint * n)
{
  *n = stats->latencies->len;
  return (const guint32 *) stats->latencies->data;
}
