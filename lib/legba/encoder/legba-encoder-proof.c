/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Running one proof: appsrc ! videoconvert ! ENCODER ! capsfilter ! appsink
 * in a pipeline of its own, one frame of the real caps pushed through, the
 * outcome classified into a LegbaEncoderError.
 */
#include <legba/encoder/legba-encoder-private.h>

#include <gst/app/app.h>
#include <gst/video/video.h>
#include <string.h>

GST_DEBUG_CATEGORY_EXTERN (legba_encoder_debug);
#define GST_CAT_DEFAULT legba_encoder_debug

/* Settings of the proof encoder: a moderate bitrate any device accepts. */
#define PROOF_BITRATE 1000000

/**
 * legba_encoder_settings_init:
 * @settings: (out caller-allocates): settings to fill
 *
 * Fills @settings with the defaults: 1 Mbit/s, no separate cap, the
 * encoder's own key-frame interval, fastest speed preset.
 */
void
legba_encoder_settings_init (LegbaEncoderSettings * settings)
{
  g_return_if_fail (settings != NULL);
  *settings = (LegbaEncoderSettings) {
  .bitrate = 1000000,.max_bitrate = 0,.keyframe_interval = 0,.speed =
        LEGBA_ENCODER_SPEED_FASTEST};
}

/**
 * legba_encoder_make:
 * @factory_name: an encoder factory
 * @settings: (nullable): the contract to apply; %NULL for the defaults
 * @error: return location for a #LEGBA_ENCODER_ERROR
 *
 * Creates an encoder and applies @settings with
 * legba_encoder_apply_settings(). A factory of no known family is created
 * unconfigured (and logged), for callers that forced it.
 *
 * Returns: (transfer floating) (nullable): the encoder, or %NULL with
 *   %LEGBA_ENCODER_ERROR_UNAVAILABLE or %LEGBA_ENCODER_ERROR_FAILED
 */
GstElement *
legba_encoder_make (const gchar * factory_name,
    const LegbaEncoderSettings * settings, GError ** error)
{
  LegbaEncoderSettings defaults;
  g_autoptr (GError) local = NULL;
  GstElement *encoder;

  g_return_val_if_fail (factory_name != NULL, NULL);

  legba_encoder_ensure_debug ();
  if (!settings) {
    legba_encoder_settings_init (&defaults);
    settings = &defaults;
  }
  encoder = gst_element_factory_make (factory_name, NULL);
  if (!encoder) {
    g_set_error (error, LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_UNAVAILABLE,
        "no element factory '%s' can be instantiated here", factory_name);
    return NULL;
  }
  if (!legba_encoder_apply_settings (encoder, settings, &local)) {
    if (!g_error_matches (local, LEGBA_ENCODER_ERROR,
            LEGBA_ENCODER_ERROR_UNKNOWN_FAMILY)) {
      gst_object_unref (gst_object_ref_sink (encoder));
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
    GST_WARNING ("%s: %s; used unconfigured", factory_name, local->message);
  }
  return encoder;
}

static gboolean
is_hardware (const gchar * factory_name)
{
  const LegbaEncoderFamily *family =
      legba_encoder_family_lookup (factory_name, NULL);

  return family && family->hardware;
}

static gboolean
mentions_session (const gchar * text)
{
  g_autofree gchar *lower = text ? g_ascii_strdown (text, -1) : NULL;

  return lower && strstr (lower, "session") != NULL;
}

/* Classifies an error message posted while proving. A hardware encoder
 * that accepted the caps in a query and then failed to configure itself
 * for them (gst-libav's OpenMAX wrapper without an OpenMAX library, VA
 * without a render node) is missing its device, not refusing the caps. */
static GError *
classify (const gchar * factory_name, GError * posted, const gchar * debug)
{
  gboolean negotiation = g_error_matches (posted, GST_CORE_ERROR,
      GST_CORE_ERROR_NEGOTIATION)
      || g_error_matches (posted, GST_STREAM_ERROR, GST_STREAM_ERROR_FORMAT)
      || (debug && strstr (debug, "not-negotiated"));
  gboolean session = mentions_session (posted->message)
      || mentions_session (debug);
  g_autofree gchar *detail = g_strdelimit (g_strdup (debug ? debug : ""),
      "\n", ' ');
  gint code;

  if (g_error_matches (posted, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_BUSY)
      || g_error_matches (posted, GST_RESOURCE_ERROR,
          GST_RESOURCE_ERROR_NO_SPACE_LEFT) || session)
    code = LEGBA_ENCODER_ERROR_SESSION_LIMIT;
  else if (posted->domain == GST_RESOURCE_ERROR
      || g_error_matches (posted, GST_LIBRARY_ERROR, GST_LIBRARY_ERROR_INIT))
    code = LEGBA_ENCODER_ERROR_NO_DEVICE;
  else if (negotiation && is_hardware (factory_name))
    return g_error_new (LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_NO_DEVICE,
        "accepted the caps in a query but could not configure itself for "
        "them (%s; %s)", posted->message, detail);
  else if (negotiation)
    code = LEGBA_ENCODER_ERROR_CAPS;
  else
    code = LEGBA_ENCODER_ERROR_FAILED;
  return g_error_new (LEGBA_ENCODER_ERROR, code, "%s (%s)", posted->message,
      detail);
}

static GError *
error_from_bus (const gchar * factory_name, GstBus * bus, gint fallback,
    const gchar * what)
{
  g_autoptr (GstMessage) msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR);
  g_autoptr (GError) posted = NULL;
  g_autofree gchar *debug = NULL;

  if (!msg)
    return g_error_new (LEGBA_ENCODER_ERROR, fallback, "%s", what);
  gst_message_parse_error (msg, &posted, &debug);
  return classify (factory_name, posted, debug);
}

/* Raw caps for the caps query: the size and rate of @raw_caps in any
 * format, since videoconvert sits in front of the encoder. */
static GstCaps *
size_caps (GstCaps * raw_caps)
{
  GstCaps *caps = gst_caps_copy (raw_caps);

  for (guint i = 0; i < gst_caps_get_size (caps); i++) {
    GstStructure *s = gst_caps_get_structure (caps, i);
    gst_structure_remove_fields (s, "format", "colorimetry", "chroma-site",
        NULL);
    gst_caps_set_features (caps, i, NULL);
  }
  return caps;
}

static GError *
check_caps (GstElement * encoder, GstCaps * raw_caps, GstCaps * output_caps)
{
  g_autoptr (GstPad) sink = gst_element_get_static_pad (encoder, "sink");
  g_autoptr (GstPad) src = gst_element_get_static_pad (encoder, "src");
  g_autoptr (GstCaps) filter = size_caps (raw_caps);
  g_autoptr (GstCaps) accepted = NULL;
  g_autoptr (GstCaps) produced = NULL;

  if (!sink || !src)
    return g_error_new (LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_FAILED,
        "not an encoder: no 'sink' and 'src' pads");
  accepted = gst_pad_query_caps (sink, filter);
  if (gst_caps_is_empty (accepted)) {
    g_autofree gchar *text = gst_caps_to_string (filter);
    return g_error_new (LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_CAPS,
        "does not accept %s", text);
  }
  produced = gst_pad_query_caps (src, output_caps);
  if (gst_caps_is_empty (produced)) {
    g_autofree gchar *text = gst_caps_to_string (output_caps);
    return g_error_new (LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_CAPS,
        "cannot produce %s", text);
  }
  return NULL;
}

/* One mid-grey frame of @raw_caps. */
static GstBuffer *
make_frame (GstCaps * raw_caps, GError ** error)
{
  GstVideoInfo info;
  GstBuffer *frame;
  GstMapInfo map;

  if (!gst_video_info_from_caps (&info, raw_caps)) {
    g_set_error (error, LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_CAPS,
        "raw caps are not fixed video caps");
    return NULL;
  }
  frame = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (&info), NULL);
  gst_buffer_map (frame, &map, GST_MAP_WRITE);
  memset (map.data, 0x80, map.size);
  gst_buffer_unmap (frame, &map);
  GST_BUFFER_PTS (frame) = 0;
  GST_BUFFER_DURATION (frame) = GST_VIDEO_INFO_FPS_N (&info) > 0 ?
      gst_util_uint64_scale_int (GST_SECOND, GST_VIDEO_INFO_FPS_D (&info),
      GST_VIDEO_INFO_FPS_N (&info)) : GST_CLOCK_TIME_NONE;
  return frame;
}

/* Waits for EOS (the frame went through) or an error, within the bound. */
static GError *
wait_for_frame (const gchar * factory_name, GstBus * bus, GstElement * sink,
    gint64 deadline)
{
  for (;;) {
    gint64 left = deadline - g_get_monotonic_time ();
    g_autoptr (GstMessage) msg = NULL;
    g_autoptr (GError) posted = NULL;
    g_autofree gchar *debug = NULL;
    g_autoptr (GstSample) sample = NULL;

    if (left <= 0)
      return g_error_new (LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_TIMED_OUT,
          "no encoded frame within the time bound");
    msg = gst_bus_timed_pop_filtered (bus, left * GST_USECOND,
        GST_MESSAGE_ERROR | GST_MESSAGE_EOS);
    if (!msg)
      continue;
    if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
      gst_message_parse_error (msg, &posted, &debug);
      return classify (factory_name, posted, debug);
    }
    sample = gst_app_sink_try_pull_sample (GST_APP_SINK (sink), 0);
    if (!sample)
      return g_error_new (LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_FAILED,
          "reached the end of the stream without an encoded frame");
    return NULL;
  }
}

static GError *
run_pipeline (const gchar * factory_name, GstElement * pipeline,
    GstElement * encoder, GstElement * src, GstElement * sink,
    GstCaps * raw_caps, GstCaps * output_caps, gint64 deadline)
{
  g_autoptr (GstBus) bus = gst_element_get_bus (pipeline);
  GstBuffer *frame;
  GError *error = NULL;

  if (gst_element_set_state (pipeline, GST_STATE_READY) ==
      GST_STATE_CHANGE_FAILURE)
    return error_from_bus (factory_name, bus, LEGBA_ENCODER_ERROR_NO_DEVICE,
        "could not open (no device or driver)");
  if ((error = check_caps (encoder, raw_caps, output_caps)))
    return error;
  frame = make_frame (raw_caps, &error);
  if (!frame)
    return error;
  if (gst_element_set_state (pipeline, GST_STATE_PLAYING) ==
      GST_STATE_CHANGE_FAILURE) {
    gst_buffer_unref (frame);
    return error_from_bus (factory_name, bus, LEGBA_ENCODER_ERROR_NO_DEVICE,
        "could not start (no device or driver)");
  }
  gst_app_src_push_buffer (GST_APP_SRC (src), frame);
  gst_app_src_end_of_stream (GST_APP_SRC (src));
  return wait_for_frame (factory_name, bus, sink, deadline);
}

/*
 * legba_encoder_run_proof:
 *
 * Runs one proof, uncached. Returns NULL when @factory_name encoded a
 * frame of @raw_caps as @output_caps within @timeout_ms, or why not.
 */
GError *
legba_encoder_run_proof (const gchar * factory_name, GstCaps * raw_caps,
    GstCaps * output_caps, guint timeout_ms)
{
  gint64 deadline =
      g_get_monotonic_time () + timeout_ms * G_TIME_SPAN_MILLISECOND;
  LegbaEncoderSettings settings;
  g_autoptr (GstElement) pipeline = NULL;
  GstElement *src, *convert, *encoder, *filter, *sink;
  GError *error = NULL;

  legba_encoder_settings_init (&settings);
  settings.bitrate = PROOF_BITRATE;
  encoder = legba_encoder_make (factory_name, &settings, &error);
  if (!encoder)
    return error;
  pipeline = gst_object_ref_sink (gst_pipeline_new ("legba-encoder-proof"));
  src = gst_element_factory_make ("appsrc", NULL);
  convert = gst_element_factory_make ("videoconvert", NULL);
  filter = gst_element_factory_make ("capsfilter", NULL);
  sink = gst_element_factory_make ("appsink", NULL);
  if (!src || !convert || !filter || !sink) {
    gst_clear_object (&src);
    gst_clear_object (&convert);
    gst_clear_object (&filter);
    gst_clear_object (&sink);
    gst_object_unref (gst_object_ref_sink (encoder));
    return g_error_new (LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_FAILED,
        "appsrc, videoconvert, capsfilter or appsink is missing");
  }
  g_object_set (src, "caps", raw_caps, "format", GST_FORMAT_TIME, NULL);
  g_object_set (filter, "caps", output_caps, NULL);
  g_object_set (sink, "sync", FALSE, "wait-on-eos", FALSE, NULL);
  gst_bin_add_many (GST_BIN (pipeline), src, convert, encoder, filter, sink,
      NULL);
  if (!gst_element_link_many (src, convert, encoder, filter, sink, NULL))
    error = g_error_new (LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_CAPS,
        "cannot link to the raw video or output caps");
  else
    error = run_pipeline (factory_name, pipeline, encoder, src, sink,
        raw_caps, output_caps, deadline);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  return error;
}
