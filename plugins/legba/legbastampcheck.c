/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * SECTION:element-legbastampcheck
 * @title: legbastampcheck
 * @see_also: legbastamp
 *
 * Reads back the code a legbastamp wrote into each frame, after encoding,
 * transport and decoding, and measures each frame's latency: the host's
 * `CLOCK_MONOTONIC` now, minus the time in the code. It counts frames lost
 * (counters skipped), duplicated (a counter seen again: a decoder or a
 * sink repeating a picture) and reordered, and frames without a readable
 * code (damaged beyond the code's check value, or never stamped), which
 * are counted, never guessed.
 *
 * The running 50th, 95th and 99th percentiles of the latency are
 * properties. Every #GstLegbaStampCheck:interval an element message
 * `legba-stamp-stats` is posted, and at end of stream one
 * `legba-stamp-summary`, both with the fields
 *
 * - `frames`, `valid`, `failed`, `lost`, `duplicated`, `reordered`
 *   (guint64): counts so far
 * - `first-counter` (guint): the counter of the first valid frame
 * - `latency-n` (guint64): latency samples (the first sighting of each
 *   frame)
 * - `latency-p50`, `latency-p95`, `latency-p99`, `latency-min`,
 *   `latency-max`, `latency-mean` (gdouble, milliseconds): present when
 *   `latency-n` is not 0; percentiles are nearest-rank
 * - `latency-series` (GstValueArray of gdouble, milliseconds, in arrival
 *   order): in the summary, when #GstLegbaStampCheck:series is set
 *
 * Place it right after the decoder (or the last element whose delay you
 * want to count), with the same #GstLegbaStampCheck:band-height as the
 * legbastamp, scaled if the frames were scaled on the way.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 -m videotestsrc is-live=true ! video/x-raw,width=640,height=360 \
 *     ! legbastamp ! vp8enc deadline=1 target-bitrate=300000 ! vp8dec \
 *     ! legbastampcheck interval=2000000000 ! fakesink
 * ]|
 */
#include "legba-elements.h"

#include <gst/video/gstvideofilter.h>
#include "legba-stamp.h"

GST_DEBUG_CATEGORY_STATIC (legba_stamp_check_debug);
#define GST_CAT_DEFAULT legba_stamp_check_debug

#define GST_TYPE_LEGBA_STAMP_CHECK (gst_legba_stamp_check_get_type ())
G_DECLARE_FINAL_TYPE (GstLegbaStampCheck, gst_legba_stamp_check, GST,
    LEGBA_STAMP_CHECK, GstVideoFilter);

enum
{
  PROP_0,
  PROP_BAND_HEIGHT,
  PROP_INTERVAL,
  PROP_SERIES,
  PROP_LATENCY_P50,
  PROP_LATENCY_P95,
  PROP_LATENCY_P99,
  PROP_FRAMES,
  PROP_FRAMES_VALID,
  PROP_FRAMES_FAILED,
  PROP_FRAMES_LOST,
  PROP_FRAMES_DUPLICATED,
  PROP_FRAMES_REORDERED,
};

#define DEFAULT_BAND_HEIGHT 0
#define DEFAULT_INTERVAL GST_SECOND
#define DEFAULT_SERIES FALSE

struct _GstLegbaStampCheck
{
  GstVideoFilter parent;

  /* object lock */
  guint band_height;
  GstClockTime interval;
  gboolean series;
  LegbaStampStats *stats;
  gint64 last_report_us;        /* monotonic; 0 before the first frame */

  /* streaming thread */
  LegbaStampLayout *layout;
};

G_DEFINE_FINAL_TYPE (GstLegbaStampCheck, gst_legba_stamp_check,
    GST_TYPE_VIDEO_FILTER);
GST_ELEMENT_REGISTER_DEFINE (legbastampcheck, "legbastampcheck",
    GST_RANK_NONE, GST_TYPE_LEGBA_STAMP_CHECK);

/* Called with the object lock. */
static GstStructure *
make_report (GstLegbaStampCheck * self, const char *name, gboolean series)
{
  LegbaStampSummary s;
  GstStructure *report;

  legba_stamp_stats_summarize (self->stats, &s);
  report = gst_structure_new (name,
      "frames", G_TYPE_UINT64, s.frames,
      "valid", G_TYPE_UINT64, s.valid,
      "failed", G_TYPE_UINT64, s.failed,
      "lost", G_TYPE_UINT64, s.lost,
      "duplicated", G_TYPE_UINT64, s.duplicated,
      "reordered", G_TYPE_UINT64, s.reordered,
      "first-counter", G_TYPE_UINT, s.first_counter,
      "latency-n", G_TYPE_UINT64, s.n, NULL);
  if (s.n > 0)
    gst_structure_set (report,
        "latency-p50", G_TYPE_DOUBLE, s.p50_ms,
        "latency-p95", G_TYPE_DOUBLE, s.p95_ms,
        "latency-p99", G_TYPE_DOUBLE, s.p99_ms,
        "latency-min", G_TYPE_DOUBLE, s.min_ms,
        "latency-max", G_TYPE_DOUBLE, s.max_ms,
        "latency-mean", G_TYPE_DOUBLE, s.mean_ms, NULL);
  if (series) {
    GValue array = G_VALUE_INIT;
    const guint32 *latencies;
    guint n;

    latencies = legba_stamp_stats_get_latencies (self->stats, &n);
    g_value_init (&array, GST_TYPE_ARRAY);
    for (guint i = 0; i < n; i++) {
      GValue v = G_VALUE_INIT;

      g_value_init (&v, G_TYPE_DOUBLE);
      g_value_set_double (&v, latencies[i] / 1000.0);
      gst_value_array_append_and_take_value (&array, &v);
    }
    gst_structure_take_value (report, "latency-series", &array);
  }
  return report;
}

static gboolean
gst_legba_stamp_check_start (GstBaseTransform * trans)
{
  GstLegbaStampCheck *self = GST_LEGBA_STAMP_CHECK (trans);

  GST_OBJECT_LOCK (self);
  legba_stamp_stats_free (self->stats);
  self->stats = legba_stamp_stats_new ();
  self->last_report_us = 0;
  GST_OBJECT_UNLOCK (self);
  return TRUE;
}

static gboolean
gst_legba_stamp_check_stop (GstBaseTransform * trans)
{
  GstLegbaStampCheck *self = GST_LEGBA_STAMP_CHECK (trans);

  g_clear_pointer (&self->layout, legba_stamp_layout_free);
  return TRUE;
}

static gboolean
gst_legba_stamp_check_set_info (GstVideoFilter * filter, GstCaps * incaps,
    GstVideoInfo * in_info, GstCaps * outcaps, GstVideoInfo * out_info)
{
  GstLegbaStampCheck *self = GST_LEGBA_STAMP_CHECK (filter);
  guint band_height;

  GST_OBJECT_LOCK (self);
  band_height = self->band_height;
  GST_OBJECT_UNLOCK (self);

  g_clear_pointer (&self->layout, legba_stamp_layout_free);
  self->layout = legba_stamp_layout_new (in_info, band_height);
  if (self->layout == NULL)
    GST_WARNING_OBJECT (self, "frames of %dx%d cannot carry the code: "
        "every frame counts as failed", GST_VIDEO_INFO_WIDTH (in_info),
        GST_VIDEO_INFO_HEIGHT (in_info));
  return TRUE;
}

static GstFlowReturn
gst_legba_stamp_check_transform_frame_ip (GstVideoFilter * filter,
    GstVideoFrame * frame)
{
  GstLegbaStampCheck *self = GST_LEGBA_STAMP_CHECK (filter);
  guint32 now = legba_stamp_now_us ();
  LegbaStampReadResult result = LEGBA_STAMP_READ_NO_CODE;
  LegbaStampCode code = { 0, 0 };
  GstStructure *report = NULL;
  guint32 latency_us = 0;
  gint64 now_us;

  if (self->layout != NULL)
    result = legba_stamp_layout_read (self->layout, frame, &code);
  if (result == LEGBA_STAMP_READ_OK) {
    latency_us = now - code.time_us;
    /* a time ahead of now is not from this host's clock */
    if ((gint32) latency_us < 0)
      result = LEGBA_STAMP_READ_BAD_CHECK;
  }

  now_us = g_get_monotonic_time ();
  GST_OBJECT_LOCK (self);
  if (result == LEGBA_STAMP_READ_OK) {
    LegbaStampFrameKind kind;

    kind = legba_stamp_stats_add (self->stats, code.counter, latency_us);
    GST_LOG_OBJECT (self, "frame %u: %u us%s", code.counter, latency_us,
        kind == LEGBA_STAMP_FRAME_DUPLICATE ? " (duplicate)" :
        kind == LEGBA_STAMP_FRAME_REORDERED ? " (reordered)" : "");
  } else {
    legba_stamp_stats_add_failed (self->stats);
    GST_DEBUG_OBJECT (self, "frame without a readable code (%s)",
        result == LEGBA_STAMP_READ_NO_CODE ? "no contrast" : "bad check");
  }
  if (self->last_report_us == 0) {
    self->last_report_us = now_us;
  } else if (self->interval > 0
      && (guint64) (now_us - self->last_report_us) * GST_USECOND >=
      self->interval) {
    self->last_report_us = now_us;
    report = make_report (self, "legba-stamp-stats", FALSE);
  }
  GST_OBJECT_UNLOCK (self);

  if (report != NULL)
    gst_element_post_message (GST_ELEMENT (self),
        gst_message_new_element (GST_OBJECT (self), report));
  return GST_FLOW_OK;
}

static gboolean
gst_legba_stamp_check_sink_event (GstBaseTransform * trans, GstEvent * event)
{
  GstLegbaStampCheck *self = GST_LEGBA_STAMP_CHECK (trans);

  /* posted before the EOS travels on, so it reaches the bus before the
   * sinks' EOS message */
  if (GST_EVENT_TYPE (event) == GST_EVENT_EOS) {
    GstStructure *report;

    GST_OBJECT_LOCK (self);
    report = make_report (self, "legba-stamp-summary", self->series);
    GST_OBJECT_UNLOCK (self);
    gst_element_post_message (GST_ELEMENT (self),
        gst_message_new_element (GST_OBJECT (self), report));
  }
  return GST_BASE_TRANSFORM_CLASS (gst_legba_stamp_check_parent_class)
      ->sink_event (trans, event);
}

static void
gst_legba_stamp_check_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstLegbaStampCheck *self = GST_LEGBA_STAMP_CHECK (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_BAND_HEIGHT:
      self->band_height = g_value_get_uint (value);
      break;
    case PROP_INTERVAL:
      self->interval = g_value_get_uint64 (value);
      break;
    case PROP_SERIES:
      self->series = g_value_get_boolean (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_legba_stamp_check_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstLegbaStampCheck *self = GST_LEGBA_STAMP_CHECK (object);
  LegbaStampSummary s;

  GST_OBJECT_LOCK (self);
  legba_stamp_stats_summarize (self->stats, &s);
  switch (prop_id) {
    case PROP_BAND_HEIGHT:
      g_value_set_uint (value, self->band_height);
      break;
    case PROP_INTERVAL:
      g_value_set_uint64 (value, self->interval);
      break;
    case PROP_SERIES:
      g_value_set_boolean (value, self->series);
      break;
    case PROP_LATENCY_P50:
      g_value_set_double (value, s.p50_ms);
      break;
    case PROP_LATENCY_P95:
      g_value_set_double (value, s.p95_ms);
      break;
    case PROP_LATENCY_P99:
      g_value_set_double (value, s.p99_ms);
      break;
    case PROP_FRAMES:
      g_value_set_uint64 (value, s.frames);
      break;
    case PROP_FRAMES_VALID:
      g_value_set_uint64 (value, s.valid);
      break;
    case PROP_FRAMES_FAILED:
      g_value_set_uint64 (value, s.failed);
      break;
    case PROP_FRAMES_LOST:
      g_value_set_uint64 (value, s.lost);
      break;
    case PROP_FRAMES_DUPLICATED:
      g_value_set_uint64 (value, s.duplicated);
      break;
    case PROP_FRAMES_REORDERED:
      g_value_set_uint64 (value, s.reordered);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_legba_stamp_check_finalize (GObject * object)
{
  GstLegbaStampCheck *self = GST_LEGBA_STAMP_CHECK (object);

  legba_stamp_layout_free (self->layout);
  legba_stamp_stats_free (self->stats);
  G_OBJECT_CLASS (gst_legba_stamp_check_parent_class)->finalize (object);
}

static void
install_count (GObjectClass * gobject_class, guint prop_id,
    const char *name, const char *nick, const char *blurb)
{
  g_object_class_install_property (gobject_class, prop_id,
      g_param_spec_uint64 (name, nick, blurb, 0, G_MAXUINT64, 0,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
}

static void
install_percentile (GObjectClass * gobject_class, guint prop_id,
    const char *name, const char *nick, const char *blurb)
{
  g_object_class_install_property (gobject_class, prop_id,
      g_param_spec_double (name, nick, blurb, -1, G_MAXDOUBLE, -1,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
}

static void
install_properties (GObjectClass * gobject_class)
{
  g_object_class_install_property (gobject_class, PROP_BAND_HEIGHT,
      g_param_spec_uint ("band-height", "Band height",
          "Height in pixels of the band carrying the code, as set on the "
          "legbastamp (scaled if the frames were scaled since); 0 for 64, "
          "as legbastamp's default. Read when the format is set",
          0, G_MAXUINT16, DEFAULT_BAND_HEIGHT,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
          GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_INTERVAL,
      g_param_spec_uint64 ("interval", "Interval",
          "Nanoseconds between two legba-stamp-stats element messages "
          "(counted on CLOCK_MONOTONIC from the first frame, posted when a "
          "frame arrives); 0 for none",
          0, G_MAXUINT64, DEFAULT_INTERVAL,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
          GST_PARAM_MUTABLE_PLAYING));
  g_object_class_install_property (gobject_class, PROP_SERIES,
      g_param_spec_boolean ("series", "Series",
          "Add every latency sample, in arrival order, to the "
          "legba-stamp-summary message (field latency-series)",
          DEFAULT_SERIES, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
          GST_PARAM_MUTABLE_PLAYING));
  install_percentile (gobject_class, PROP_LATENCY_P50, "latency-p50",
      "Latency p50", "Median latency so far in milliseconds (nearest rank); "
      "-1 before the first valid frame");
  install_percentile (gobject_class, PROP_LATENCY_P95, "latency-p95",
      "Latency p95", "95th percentile of the latency so far in "
      "milliseconds (nearest rank); -1 before the first valid frame");
  install_percentile (gobject_class, PROP_LATENCY_P99, "latency-p99",
      "Latency p99", "99th percentile of the latency so far in "
      "milliseconds (nearest rank); -1 before the first valid frame");
  install_count (gobject_class, PROP_FRAMES, "frames", "Frames",
      "Frames looked at since the element started");
  install_count (gobject_class, PROP_FRAMES_VALID, "frames-valid",
      "Valid frames", "Frames whose code passed its check");
  install_count (gobject_class, PROP_FRAMES_FAILED, "frames-failed",
      "Failed frames", "Frames without a readable code: no code, or one "
      "that fails its check value");
  install_count (gobject_class, PROP_FRAMES_LOST, "frames-lost",
      "Lost frames", "Counters between the lowest and the highest seen "
      "that have not been seen");
  install_count (gobject_class, PROP_FRAMES_DUPLICATED, "frames-duplicated",
      "Duplicated frames", "Valid frames whose counter was seen before");
  install_count (gobject_class, PROP_FRAMES_REORDERED, "frames-reordered",
      "Reordered frames", "Frames that arrived after a frame stamped "
      "later than them");
}

static void
gst_legba_stamp_check_class_init (GstLegbaStampCheckClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS (klass);
  GstVideoFilterClass *filter_class = GST_VIDEO_FILTER_CLASS (klass);
  GstCaps *caps;

  gobject_class->set_property = gst_legba_stamp_check_set_property;
  gobject_class->get_property = gst_legba_stamp_check_get_property;
  gobject_class->finalize = gst_legba_stamp_check_finalize;
  install_properties (gobject_class);

  caps = legba_stamp_caps ();
  gst_element_class_add_pad_template (element_class,
      gst_pad_template_new ("sink", GST_PAD_SINK, GST_PAD_ALWAYS, caps));
  gst_element_class_add_pad_template (element_class,
      gst_pad_template_new ("src", GST_PAD_SRC, GST_PAD_ALWAYS, caps));
  gst_caps_unref (caps);
  gst_element_class_set_static_metadata (element_class,
      "Legba pixel timestamp check", "Filter/Video/Analyzer",
      "Reads the code legbastamp wrote and reports per-frame latency and "
      "lost, duplicated and reordered frames",
      "Legba <https://legba.invalid/>");

  trans_class->start = GST_DEBUG_FUNCPTR (gst_legba_stamp_check_start);
  trans_class->stop = GST_DEBUG_FUNCPTR (gst_legba_stamp_check_stop);
  trans_class->sink_event =
      GST_DEBUG_FUNCPTR (gst_legba_stamp_check_sink_event);
  filter_class->set_info = GST_DEBUG_FUNCPTR (gst_legba_stamp_check_set_info);
  filter_class->transform_frame_ip =
      GST_DEBUG_FUNCPTR (gst_legba_stamp_check_transform_frame_ip);

  GST_DEBUG_CATEGORY_INIT (legba_stamp_check_debug, "legbastampcheck", 0,
      "Legba pixel timestamp check");
}

static void
gst_legba_stamp_check_init (GstLegbaStampCheck * self)
{
  self->band_height = DEFAULT_BAND_HEIGHT;
  self->interval = DEFAULT_INTERVAL;
  self->series = DEFAULT_SERIES;
  self->stats = legba_stamp_stats_new ();
  /* reads only: buffers pass untouched and are never copied */
  gst_base_transform_set_passthrough (GST_BASE_TRANSFORM (self), TRUE);
  /* every frame counts: never dropped for being late */
  gst_base_transform_set_qos_enabled (GST_BASE_TRANSFORM (self), FALSE);
}
