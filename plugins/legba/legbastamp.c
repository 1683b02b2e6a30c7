/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * SECTION:element-legbastamp
 * @title: legbastamp
 * @see_also: legbastampcheck
 *
 * Writes the host's `CLOCK_MONOTONIC` time and a frame counter into each
 * raw video frame, as a code of large black and white cells in the
 * top-left corner that survives lossy encoding at low bitrates. A
 * legbastampcheck after the decoder reads it back and reports each
 * frame's glass-to-glass latency, and the frames lost, duplicated or
 * reordered on the way: the way Legba measures video latency
 * (docs/benchmarks.md, "Runs"). Sender and receiver must read the same
 * clock: one process, or processes on one host.
 *
 * The code is 4 rows of 32 square cells of 16 pixels (one macroblock of
 * H.264 and VP8), a band of 512x64 pixels, unless
 * #GstLegbaStamp:band-height says otherwise (give the checker the same
 * value); narrower frames get smaller cells. Every raw format GStreamer
 * can convert is supported, with any strides; the frame must be at least
 * 64x8 pixels, smaller frames pass unchanged with a warning.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 videotestsrc is-live=true ! video/x-raw,width=640,height=360 \
 *     ! legbastamp ! x264enc tune=zerolatency bitrate=300 ! avdec_h264 \
 *     ! legbastampcheck ! fakesink -m
 * ]|
 */
#include "legba-elements.h"

#include <gst/video/gstvideofilter.h>
#include "legba-stamp.h"

GST_DEBUG_CATEGORY_STATIC (legba_stamp_debug);
#define GST_CAT_DEFAULT legba_stamp_debug

#define GST_TYPE_LEGBA_STAMP (gst_legba_stamp_get_type ())
G_DECLARE_FINAL_TYPE (GstLegbaStamp, gst_legba_stamp, GST, LEGBA_STAMP,
    GstVideoFilter);

enum
{
  PROP_0,
  PROP_BAND_HEIGHT,
  PROP_FRAMES,
};

#define DEFAULT_BAND_HEIGHT 0

struct _GstLegbaStamp
{
  GstVideoFilter parent;

  /* object lock */
  guint band_height;
  guint64 frames;

  /* streaming thread */
  LegbaStampLayout *layout;
  gboolean warned;
};

G_DEFINE_FINAL_TYPE (GstLegbaStamp, gst_legba_stamp, GST_TYPE_VIDEO_FILTER);
GST_ELEMENT_REGISTER_DEFINE (legbastamp, "legbastamp", GST_RANK_NONE,
    GST_TYPE_LEGBA_STAMP);

static gboolean
gst_legba_stamp_start (GstBaseTransform * trans)
{
  GstLegbaStamp *self = GST_LEGBA_STAMP (trans);

  GST_OBJECT_LOCK (self);
  self->frames = 0;
  GST_OBJECT_UNLOCK (self);
  self->warned = FALSE;
  return TRUE;
}

static gboolean
gst_legba_stamp_stop (GstBaseTransform * trans)
{
  GstLegbaStamp *self = GST_LEGBA_STAMP (trans);

  g_clear_pointer (&self->layout, legba_stamp_layout_free);
  return TRUE;
}

static gboolean
gst_legba_stamp_set_info (GstVideoFilter * filter, GstCaps * incaps,
    GstVideoInfo * in_info, GstCaps * outcaps, GstVideoInfo * out_info)
{
  GstLegbaStamp *self = GST_LEGBA_STAMP (filter);
  guint band_height;

  GST_OBJECT_LOCK (self);
  band_height = self->band_height;
  GST_OBJECT_UNLOCK (self);

  g_clear_pointer (&self->layout, legba_stamp_layout_free);
  self->layout = legba_stamp_layout_new (in_info, band_height);
  if (self->layout == NULL && !self->warned) {
    self->warned = TRUE;
    GST_ELEMENT_WARNING (self, STREAM, FORMAT,
        ("Frames of %dx%d cannot carry the code: they pass unstamped",
            GST_VIDEO_INFO_WIDTH (in_info), GST_VIDEO_INFO_HEIGHT (in_info)),
        ("the code needs at least 64x8 pixels"));
  } else if (self->layout != NULL) {
    GST_INFO_OBJECT (self, "%s %dx%d: cells of %u pixels",
        GST_VIDEO_INFO_NAME (in_info), GST_VIDEO_INFO_WIDTH (in_info),
        GST_VIDEO_INFO_HEIGHT (in_info),
        legba_stamp_layout_get_cell (self->layout));
  }
  return TRUE;
}

static GstFlowReturn
gst_legba_stamp_transform_frame_ip (GstVideoFilter * filter,
    GstVideoFrame * frame)
{
  GstLegbaStamp *self = GST_LEGBA_STAMP (filter);
  LegbaStampCode code;
  guint64 frames;

  GST_OBJECT_LOCK (self);
  frames = self->frames++;
  GST_OBJECT_UNLOCK (self);

  if (self->layout == NULL)
    return GST_FLOW_OK;
  code.counter = (guint16) frames;
  code.time_us = legba_stamp_now_us ();
  legba_stamp_layout_write (self->layout, frame, &code);
  return GST_FLOW_OK;
}

static void
gst_legba_stamp_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstLegbaStamp *self = GST_LEGBA_STAMP (object);

  switch (prop_id) {
    case PROP_BAND_HEIGHT:
      GST_OBJECT_LOCK (self);
      self->band_height = g_value_get_uint (value);
      GST_OBJECT_UNLOCK (self);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static void
gst_legba_stamp_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstLegbaStamp *self = GST_LEGBA_STAMP (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_BAND_HEIGHT:
      g_value_set_uint (value, self->band_height);
      break;
    case PROP_FRAMES:
      g_value_set_uint64 (value, self->frames);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_legba_stamp_finalize (GObject * object)
{
  GstLegbaStamp *self = GST_LEGBA_STAMP (object);

  legba_stamp_layout_free (self->layout);
  G_OBJECT_CLASS (gst_legba_stamp_parent_class)->finalize (object);
}

static void
gst_legba_stamp_class_init (GstLegbaStampClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS (klass);
  GstVideoFilterClass *filter_class = GST_VIDEO_FILTER_CLASS (klass);
  GstCaps *caps;

  gobject_class->set_property = gst_legba_stamp_set_property;
  gobject_class->get_property = gst_legba_stamp_get_property;
  gobject_class->finalize = gst_legba_stamp_finalize;

  g_object_class_install_property (gobject_class, PROP_BAND_HEIGHT,
      g_param_spec_uint ("band-height", "Band height",
          "Height in pixels of the band in the top-left corner that carries "
          "the code (4 rows of 32 square cells, so the band is 8 times as "
          "wide as high); 0 for 64 (cells of 16 pixels, one macroblock, "
          "which survive low bitrates best). Clamped so that the code fits "
          "the frame. Read when the format is set",
          0, G_MAXUINT16, DEFAULT_BAND_HEIGHT,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
          GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_FRAMES,
      g_param_spec_uint64 ("frames", "Frames",
          "Frames stamped since the element started (the counter in the "
          "code is this number modulo 65536)",
          0, G_MAXUINT64, 0, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));

  caps = legba_stamp_caps ();
  gst_element_class_add_pad_template (element_class,
      gst_pad_template_new ("sink", GST_PAD_SINK, GST_PAD_ALWAYS, caps));
  gst_element_class_add_pad_template (element_class,
      gst_pad_template_new ("src", GST_PAD_SRC, GST_PAD_ALWAYS, caps));
  gst_caps_unref (caps);
  gst_element_class_set_static_metadata (element_class,
      "Legba pixel timestamp", "Filter/Video",
      "Writes CLOCK_MONOTONIC and a frame counter into each frame as a "
      "code that survives lossy encoding, for legbastampcheck to read back",
      "Legba <https://legba.invalid/>");

  trans_class->start = GST_DEBUG_FUNCPTR (gst_legba_stamp_start);
  trans_class->stop = GST_DEBUG_FUNCPTR (gst_legba_stamp_stop);
  filter_class->set_info = GST_DEBUG_FUNCPTR (gst_legba_stamp_set_info);
  filter_class->transform_frame_ip =
      GST_DEBUG_FUNCPTR (gst_legba_stamp_transform_frame_ip);

  GST_DEBUG_CATEGORY_INIT (legba_stamp_debug, "legbastamp", 0,
      "Legba pixel timestamps");
}

static void
gst_legba_stamp_init (GstLegbaStamp * self)
{
  self->band_height = DEFAULT_BAND_HEIGHT;
  /* every frame counts: never dropped for being late */
  gst_base_transform_set_qos_enabled (GST_BASE_TRANSFORM (self), FALSE);
}
