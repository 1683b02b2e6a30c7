/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legbastamp and legbastampcheck: every raw format videoconvert offers,
 * stamped and read back directly and across a conversion; padded strides
 * from video meta; x264 and VP8 at 200 kbit/s and more, 360p to 1080p;
 * lost, duplicated, reordered and unreadable frames; a known latency;
 * the periodic and final messages.
 */
#include <gst/check/gstcheck.h>
#include <gst/check/gstharness.h>
#include <gst/video/video.h>
#include <string.h>

#define BUS_TIMEOUT (60 * GST_SECOND)

/* ---- running a launch line ---- */

typedef struct
{
  gdouble wall_ms;              /* from PLAYING to EOS */
  GstStructure *summary;        /* legba-stamp-summary */
  guint stats_messages;         /* legba-stamp-stats */
  gboolean summary_before_eos;
  guint warnings;
} Run;

static void
run_clear (Run * run)
{
  g_clear_pointer (&run->summary, gst_structure_free);
}

/* Plays desc to its end (EOS within BUS_TIMEOUT, no error) and collects
 * the checker's messages. */
static void
run_pipeline (const char *desc, Run * run)
{
  g_autoptr (GError) error = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &error);
  GstBus *bus;
  gboolean done = FALSE;
  gint64 start;

  memset (run, 0, sizeof (*run));
  if (pipeline == NULL)
    g_error ("%s: %s", desc, error->message);
  bus = gst_element_get_bus (pipeline);
  start = g_get_monotonic_time ();
  fail_unless_equals_int (gst_element_set_state (pipeline,
          GST_STATE_PLAYING), GST_STATE_CHANGE_ASYNC);

  while (!done) {
    GstMessage *msg = gst_bus_timed_pop_filtered (bus, BUS_TIMEOUT,
        GST_MESSAGE_EOS | GST_MESSAGE_ERROR | GST_MESSAGE_ELEMENT |
        GST_MESSAGE_WARNING);
    const GstStructure *s;

    if (msg == NULL)
      g_error ("%s: no end of stream within %" GST_TIME_FORMAT, desc,
          GST_TIME_ARGS (BUS_TIMEOUT));
    switch (GST_MESSAGE_TYPE (msg)) {
      case GST_MESSAGE_ERROR:{
        g_autoptr (GError) err = NULL;
        g_autofree char *debug = NULL;

        gst_message_parse_error (msg, &err, &debug);
        g_error ("%s: %s (%s)", desc, err->message, debug);
        break;
      }
      case GST_MESSAGE_WARNING:
        run->warnings++;
        break;
      case GST_MESSAGE_ELEMENT:
        s = gst_message_get_structure (msg);
        if (gst_structure_has_name (s, "legba-stamp-summary")) {
          fail_unless (run->summary == NULL);
          run->summary = gst_structure_copy (s);
        } else if (gst_structure_has_name (s, "legba-stamp-stats")) {
          run->stats_messages++;
        }
        break;
      case GST_MESSAGE_EOS:
        run->wall_ms = (g_get_monotonic_time () - start) / 1000.0;
        run->summary_before_eos = run->summary != NULL;
        done = TRUE;
        break;
      default:
        break;
    }
    gst_message_unref (msg);
  }

  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (bus);
  gst_object_unref (pipeline);
  fail_unless (run->summary != NULL, "%s: no legba-stamp-summary", desc);
}

static guint64
summary_count (Run * run, const char *field)
{
  guint64 v = G_MAXUINT64;

  fail_unless (gst_structure_get_uint64 (run->summary, field, &v),
      "no %s in the summary", field);
  return v;
}

static gdouble
summary_ms (Run * run, const char *field)
{
  gdouble v = -1;

  fail_unless (gst_structure_get_double (run->summary, field, &v),
      "no %s in the summary", field);
  return v;
}

/* ---- every raw format ---- */

static GPtrArray *
videoconvert_formats (void)
{
  GstElementFactory *factory = gst_element_factory_find ("videoconvert");
  GPtrArray *formats = g_ptr_array_new_with_free_func (g_free);

  fail_unless (factory != NULL);
  for (const GList * l = gst_element_factory_get_static_pad_templates
      (factory); l != NULL; l = l->next) {
    GstStaticPadTemplate *tmpl = l->data;
    GstCaps *caps;
    const GValue *list;

    if (tmpl->direction != GST_PAD_SINK)
      continue;
    caps = gst_static_caps_get (&tmpl->static_caps);
    list = gst_structure_get_value (gst_caps_get_structure (caps, 0), "format");
    for (guint i = 0; i < gst_value_list_get_size (list); i++)
      g_ptr_array_add (formats,
          g_value_dup_string (gst_value_list_get_value (list, i)));
    gst_caps_unref (caps);
  }
  gst_object_unref (factory);
  return formats;
}

static void
assert_all_valid (Run * run, guint frames, const char *what)
{
  fail_unless_equals_uint64 (summary_count (run, "frames"), frames);
  if (summary_count (run, "valid") != frames)
    fail ("%s: %" G_GUINT64_FORMAT " of %u frames valid", what,
        summary_count (run, "valid"), frames);
  fail_unless_equals_uint64 (summary_count (run, "lost"), 0);
  fail_unless_equals_uint64 (summary_count (run, "duplicated"), 0);
}

/* Pushes 3 flat frames of format through a harness of desc and reads
 * them in out_format at its end: all 3 valid. */
static void
harness_format (const char *desc, const char *format, const char *out_format)
{
  GstHarness *h = gst_harness_new_parse (desc);
  GstElement *check = gst_harness_find_element (h, "legbastampcheck");
  g_autofree char *in_caps = NULL;
  g_autofree char *out_caps = NULL;
  guint64 frames = 0, valid = 0, lost = 0;
  GstVideoInfo info;
  GstCaps *caps;

  in_caps = g_strdup_printf ("video/x-raw,format=%s,width=641,height=97,"
      "framerate=30/1", format);
  out_caps = g_strdup_printf ("video/x-raw,format=%s,width=641,height=97,"
      "framerate=30/1", out_format);
  gst_harness_set_caps_str (h, in_caps, out_caps);
  caps = gst_caps_from_string (in_caps);
  fail_unless (gst_video_info_from_caps (&info, caps));
  gst_caps_unref (caps);
  for (guint i = 0; i < 3; i++) {
    GstBuffer *in = gst_harness_create_buffer (h, info.size);

    gst_buffer_memset (in, 0, 0x80 + 16 * i, info.size);
    if (GST_VIDEO_FORMAT_INFO_HAS_PALETTE (info.finfo)) {
      gsize size;
      gconstpointer palette =
          gst_video_format_get_palette (GST_VIDEO_INFO_FORMAT (&info), &size);

      gst_buffer_fill (in, info.offset[1], palette, size);
    }
    GST_BUFFER_PTS (in) = i * GST_SECOND / 30;
    fail_unless_equals_int (gst_harness_push (h, in), GST_FLOW_OK);
    gst_buffer_unref (gst_harness_pull (h));
  }
  g_object_get (check, "frames", &frames, "frames-valid", &valid,
      "frames-lost", &lost, NULL);
  if (frames != 3 || valid != 3 || lost != 0)
    fail ("%s: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " frames valid",
        in_caps, valid, frames);
  gst_object_unref (check);
  gst_harness_teardown (h);
}

/* Each format stamped at an odd size and read back in the same format;
 * every third one also read in the next format of the list after
 * videoconvert (each negotiation of videoconvert's hundred formats costs
 * a tenth of a second of CPU under AddressSanitizer). */
GST_START_TEST (test_formats)
{
  g_autoptr (GPtrArray) formats = videoconvert_formats ();

  fail_unless (formats->len > 90);
  for (guint i = 0; i < formats->len; i++) {
    const char *format = formats->pdata[i];
    const char *next = formats->pdata[(i + 1) % formats->len];

    harness_format ("legbastamp ! legbastampcheck", format, format);
    if (i % 3 == 0)
      harness_format ("legbastamp ! videoconvert ! legbastampcheck", format,
          next);
  }
}

GST_END_TEST;

/* ---- padded strides from video meta ---- */

#define PAD_W 641
#define PAD_H 361
#define PAD_SENTINEL 0x5a

/* I420 641x361 with strides of 704 and 384 bytes and 100 bytes between
 * planes, described by video meta only. */
static GstBuffer *
padded_i420 (gsize offsets[GST_VIDEO_MAX_PLANES],
    gint strides[GST_VIDEO_MAX_PLANES])
{
  GstBuffer *buffer;
  GstMapInfo map;
  gsize size;

  strides[0] = 704;
  strides[1] = strides[2] = 384;
  offsets[0] = 50;
  offsets[1] = offsets[0] + strides[0] * PAD_H + 100;
  offsets[2] = offsets[1] + strides[1] * ((PAD_H + 1) / 2) + 100;
  size = offsets[2] + strides[2] * ((PAD_H + 1) / 2) + 50;

  buffer = gst_buffer_new_allocate (NULL, size, NULL);
  gst_buffer_map (buffer, &map, GST_MAP_WRITE);
  memset (map.data, PAD_SENTINEL, size);
  for (guint p = 0; p < 3; p++) {
    guint w = p == 0 ? PAD_W : (PAD_W + 1) / 2;
    guint h = p == 0 ? PAD_H : (PAD_H + 1) / 2;

    for (guint y = 0; y < h; y++)
      memset (map.data + offsets[p] + y * strides[p], p == 0 ? 90 : 128, w);
  }
  gst_buffer_unmap (buffer, &map);
  gst_buffer_add_video_meta_full (buffer, GST_VIDEO_FRAME_FLAG_NONE,
      GST_VIDEO_FORMAT_I420, PAD_W, PAD_H, 3, offsets, strides);
  return buffer;
}

/* Every byte outside the planes' visible rows is still the sentinel. */
static void
assert_padding_untouched (GstBuffer * buffer,
    const gsize offsets[GST_VIDEO_MAX_PLANES],
    const gint strides[GST_VIDEO_MAX_PLANES])
{
  g_autofree guint8 *mask = NULL;
  GstMapInfo map;

  gst_buffer_map (buffer, &map, GST_MAP_READ);
  mask = g_malloc0 (map.size);
  for (guint p = 0; p < 3; p++) {
    guint w = p == 0 ? PAD_W : (PAD_W + 1) / 2;
    guint h = p == 0 ? PAD_H : (PAD_H + 1) / 2;

    for (guint y = 0; y < h; y++)
      memset (mask + offsets[p] + y * strides[p], 1, w);
  }
  for (gsize i = 0; i < map.size; i++)
    if (!mask[i] && map.data[i] != PAD_SENTINEL)
      fail ("padding byte %" G_GSIZE_FORMAT " written", i);
  gst_buffer_unmap (buffer, &map);
}

GST_START_TEST (test_padded_meta)
{
  GstHarness *h = gst_harness_new_parse ("legbastamp ! legbastampcheck");
  GstElement *check = gst_harness_find_element (h, "legbastampcheck");
  guint64 valid = 0, failed = 0;
  gsize offsets[GST_VIDEO_MAX_PLANES];
  gint strides[GST_VIDEO_MAX_PLANES];

  gst_harness_set_src_caps_str (h, "video/x-raw,format=I420,width=641,"
      "height=361,framerate=30/1");
  for (guint i = 0; i < 4; i++) {
    GstBuffer *in = padded_i420 (offsets, strides);
    GstBuffer *out;

    GST_BUFFER_PTS (in) = i * GST_SECOND / 30;
    fail_unless_equals_int (gst_harness_push (h, in), GST_FLOW_OK);
    out = gst_harness_pull (h);
    assert_padding_untouched (out, offsets, strides);
    gst_buffer_unref (out);
  }
  g_object_get (check, "frames-valid", &valid, "frames-failed", &failed, NULL);
  fail_unless_equals_uint64 (valid, 4);
  fail_unless_equals_uint64 (failed, 0);
  gst_object_unref (check);
  gst_harness_teardown (h);
}

GST_END_TEST;

/* ---- through encoders ---- */

static void
check_codec (const char *codec, guint width, guint height, guint kbps)
{
  g_autofree char *desc = NULL;
  const guint frames = 15;
  Run run;

  if (g_str_equal (codec, "h264"))
    desc = g_strdup_printf ("videotestsrc num-buffers=%u pattern=ball "
        "! video/x-raw,format=I420,width=%u,height=%u,framerate=30/1 "
        "! legbastamp ! x264enc bitrate=%u tune=zerolatency "
        "speed-preset=ultrafast ! avdec_h264 ! legbastampcheck ! fakesink",
        frames, width, height, kbps);
  else
    desc = g_strdup_printf ("videotestsrc num-buffers=%u pattern=ball "
        "! video/x-raw,format=I420,width=%u,height=%u,framerate=30/1 "
        "! legbastamp ! vp8enc target-bitrate=%u deadline=1 cpu-used=8 "
        "! vp8dec ! legbastampcheck ! fakesink", frames, width, height,
        kbps * 1000);
  run_pipeline (desc, &run);
  assert_all_valid (&run, frames, desc);
  fail_unless_equals_uint64 (summary_count (&run, "reordered"), 0);
  fail_unless_equals_uint64 (summary_count (&run, "latency-n"), frames);
  /* one clock, one process: no frame is older than the run */
  fail_unless (summary_ms (&run, "latency-min") >= 0);
  fail_unless (summary_ms (&run, "latency-max") <= run.wall_ms,
      "%f ms in a run of %f ms", summary_ms (&run, "latency-max"), run.wall_ms);
  fail_unless (summary_ms (&run, "latency-p50") <=
      summary_ms (&run, "latency-p95"));
  run_clear (&run);
}

GST_START_TEST (test_x264_low_bitrate)
{
  check_codec ("h264", 640, 360, 200);
  check_codec ("h264", 1280, 720, 200);
  check_codec ("h264", 1920, 1080, 200);
}

GST_END_TEST;

GST_START_TEST (test_vp8_low_bitrate)
{
  check_codec ("vp8", 640, 360, 200);
  check_codec ("vp8", 1280, 720, 200);
  check_codec ("vp8", 1920, 1080, 200);
}

GST_END_TEST;

GST_START_TEST (test_codecs_higher_bitrate)
{
  check_codec ("h264", 1280, 720, 1500);
  check_codec ("vp8", 1920, 1080, 3000);
  /* odd width: VP8 takes it, H.264 4:2:0 does not */
  check_codec ("vp8", 641, 361, 500);
}

GST_END_TEST;

/* ---- counting ---- */

static GPtrArray *
stamped_frames (guint n)
{
  GstHarness *h = gst_harness_new ("legbastamp");
  GPtrArray *frames = g_ptr_array_new_with_free_func ((GDestroyNotify)
      gst_buffer_unref);

  gst_harness_set_src_caps_str (h, "video/x-raw,format=I420,width=320,"
      "height=240,framerate=30/1");
  for (guint i = 0; i < n; i++) {
    GstBuffer *in = gst_harness_create_buffer (h, 320 * 240 * 3 / 2);

    gst_buffer_memset (in, 0, 128, 320 * 240 * 3 / 2);
    fail_unless_equals_int (gst_harness_push (h, in), GST_FLOW_OK);
    g_ptr_array_add (frames, gst_harness_pull (h));
  }
  gst_harness_teardown (h);
  return frames;
}

static guint64
get_count (GstHarness * h, const char *name)
{
  guint64 v = G_MAXUINT64;

  g_object_get (h->element, name, &v, NULL);
  return v;
}

GST_START_TEST (test_counts)
{
  g_autoptr (GPtrArray) frames = stamped_frames (6);
  GstHarness *h = gst_harness_new ("legbastampcheck");
  const guint order[] = { 0, 1, 1, 3, 2, 5 };
  GstBuffer *blank;
  gdouble p50 = 0;

  gst_harness_set_src_caps_str (h, "video/x-raw,format=I420,width=320,"
      "height=240,framerate=30/1");
  g_object_get (h->element, "latency-p50", &p50, NULL);
  fail_unless_equals_float (p50, -1);

  for (guint i = 0; i < G_N_ELEMENTS (order); i++)
    gst_harness_push (h, gst_buffer_ref (frames->pdata[order[i]]));
  blank = gst_harness_create_buffer (h, 320 * 240 * 3 / 2);
  gst_buffer_memset (blank, 0, 128, 320 * 240 * 3 / 2);
  gst_harness_push (h, blank);

  fail_unless_equals_uint64 (get_count (h, "frames"), 7);
  fail_unless_equals_uint64 (get_count (h, "frames-valid"), 6);
  fail_unless_equals_uint64 (get_count (h, "frames-failed"), 1);
  fail_unless_equals_uint64 (get_count (h, "frames-duplicated"), 1);
  fail_unless_equals_uint64 (get_count (h, "frames-reordered"), 1);
  fail_unless_equals_uint64 (get_count (h, "frames-lost"), 1);
  g_object_get (h->element, "latency-p50", &p50, NULL);
  fail_unless (p50 >= 0);
  /* frames pass untouched */
  fail_unless_equals_int (gst_harness_buffers_received (h), 7);
  gst_harness_teardown (h);
}

GST_END_TEST;

/* A frame held 50 ms between stamp and check is at least 50 ms late. */
GST_START_TEST (test_known_latency)
{
  g_autoptr (GPtrArray) frames = NULL;
  GstHarness *h = gst_harness_new ("legbastampcheck");
  gint64 stamped_by;
  gdouble p50 = 0, p99 = 0;

  frames = stamped_frames (1);
  stamped_by = g_get_monotonic_time ();
  gst_harness_set_src_caps_str (h, "video/x-raw,format=I420,width=320,"
      "height=240,framerate=30/1");
  while (g_get_monotonic_time () < stamped_by + 50000)
    g_usleep (stamped_by + 50000 - g_get_monotonic_time ());
  gst_harness_push (h, gst_buffer_ref (frames->pdata[0]));

  g_object_get (h->element, "latency-p50", &p50, "latency-p99", &p99, NULL);
  fail_unless (p50 >= 50.0, "latency %f ms", p50);
  fail_unless (p50 < 50.0 + 5000, "latency %f ms", p50);
  fail_unless_equals_float (p50, p99);
  gst_harness_teardown (h);
}

GST_END_TEST;

/* ---- messages ---- */

GST_START_TEST (test_messages)
{
  const guint frames = 10;
  gdouble p50 = -1, p99 = -1;
  const GValue *series;
  Run run;

  run_pipeline ("videotestsrc num-buffers=10 ! video/x-raw,width=320,"
      "height=240 ! legbastamp ! legbastampcheck interval=1 series=true "
      "! fakesink", &run);
  assert_all_valid (&run, frames, "messages");
  fail_unless (run.summary_before_eos);
  /* one per frame after the first, when a microsecond has passed */
  fail_unless (run.stats_messages >= 1);
  fail_unless (run.stats_messages <= frames - 1);

  series = gst_structure_get_value (run.summary, "latency-series");
  fail_unless (series != NULL && GST_VALUE_HOLDS_ARRAY (series));
  fail_unless_equals_int (gst_value_array_get_size (series), frames);
  p50 = summary_ms (&run, "latency-p50");
  p99 = summary_ms (&run, "latency-p99");
  fail_unless (p50 >= 0 && p50 <= p99);
  for (guint i = 0; i < frames; i++) {
    gdouble ms = g_value_get_double (gst_value_array_get_value (series, i));

    fail_unless (ms >= summary_ms (&run, "latency-min"));
    fail_unless (ms <= summary_ms (&run, "latency-max"));
  }
  run_clear (&run);

  /* no series unless asked */
  run_pipeline ("videotestsrc num-buffers=2 ! video/x-raw,width=320,"
      "height=240 ! legbastamp ! legbastampcheck interval=0 ! fakesink", &run);
  fail_unless (!gst_structure_has_field (run.summary, "latency-series"));
  fail_unless_equals_int (run.stats_messages, 0);
  run_clear (&run);
}

GST_END_TEST;

/* Frames too small for the code pass unstamped, with a warning; the
 * checker counts them as failed. */
GST_START_TEST (test_too_small)
{
  Run run;

  run_pipeline ("videotestsrc num-buffers=3 ! video/x-raw,width=48,"
      "height=48 ! legbastamp ! legbastampcheck ! fakesink", &run);
  fail_unless_equals_int (run.warnings, 1);
  fail_unless_equals_uint64 (summary_count (&run, "frames"), 3);
  fail_unless_equals_uint64 (summary_count (&run, "failed"), 3);
  fail_unless_equals_uint64 (summary_count (&run, "latency-n"), 0);
  fail_unless (!gst_structure_has_field (run.summary, "latency-p50"));
  run_clear (&run);
}

GST_END_TEST;

/* An explicit band: the checker reads it with the same band-height. */
GST_START_TEST (test_band_height)
{
  Run run;

  run_pipeline ("videotestsrc num-buffers=3 ! video/x-raw,width=1280,"
      "height=720 ! legbastamp band-height=128 "
      "! legbastampcheck band-height=128 ! fakesink", &run);
  assert_all_valid (&run, 3, "band-height=128");
  run_clear (&run);

  run_pipeline ("videotestsrc num-buffers=3 ! video/x-raw,width=1280,"
      "height=720 ! legbastamp band-height=128 ! legbastampcheck "
      "! fakesink", &run);
  fail_unless_equals_uint64 (summary_count (&run, "failed"), 3);
  run_clear (&run);
}

GST_END_TEST;

static Suite *
legbastamp_suite (void)
{
  Suite *s = suite_create ("legbastamp");
  TCase *tc = tcase_create ("general");

  tcase_set_timeout (tc, 300);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_formats);
  tcase_add_test (tc, test_padded_meta);
  tcase_add_test (tc, test_x264_low_bitrate);
  tcase_add_test (tc, test_vp8_low_bitrate);
  tcase_add_test (tc, test_codecs_higher_bitrate);
  tcase_add_test (tc, test_counts);
  tcase_add_test (tc, test_known_latency);
  tcase_add_test (tc, test_messages);
  tcase_add_test (tc, test_too_small);
  tcase_add_test (tc, test_band_height);
  return s;
}

GST_CHECK_MAIN (legbastamp);
