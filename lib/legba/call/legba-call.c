/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */

/**
 * SECTION:legba-call
 * @title: LegbaCall
 * @short_description: a whole call pipeline for one participant
 *
 * A #LegbaCall builds and runs one participant's call: a video source
 * (test pattern, camera, file or an element of the application's), an
 * audio source (test tone or microphone), `legbavideoenc` and `opusenc`,
 * a #LegbaRoom, and for each remote participant a decoder (`decodebin`,
 * hardware decoders first by rank) and a display: one window each, one
 * composited grid re-tiled as people join and leave, application sinks,
 * or none.
 *
 * |[<!-- language="C" -->
 * LegbaCall *call = legba_call_new ("ws://127.0.0.1:6001", "demo", "alice");
 *
 * g_object_set (call, "app-key", "KEY", "token", token, "app-id", "1",
 *     "display", LEGBA_CALL_DISPLAY_GRID, NULL);
 * g_signal_connect (call, "error", G_CALLBACK (on_error), loop);
 * if (!legba_call_start (call, &error))
 *   g_printerr ("%s\n", error->message);
 * g_main_loop_run (loop);
 * ]|
 *
 * Errors found before anything runs (a missing setting, no camera, an
 * unreadable file, a missing element) are returned by legba_call_start();
 * the others (server unreachable, credentials refused, no encoder that
 * works) end the call and are emitted by #LegbaCall::error, and the state
 * becomes %LEGBA_CALL_STATE_FAILED. Nothing waits forever: joining fails
 * at the first failed attempt to reach the server.
 */
#include <legba/call/legba-call-private.h>

#include <gst/video/video.h>
#include <string.h>
#include <sys/resource.h>

GST_DEBUG_CATEGORY (legba_call_debug);
#define GST_CAT_DEFAULT legba_call_debug

#define DEFAULT_BITRATE 600000
#define DEFAULT_WIDTH 640
#define DEFAULT_HEIGHT 360
#define DEFAULT_FRAMERATE 30
#define DEFAULT_GRID_WIDTH 1280
#define DEFAULT_GRID_HEIGHT 720
#define DEFAULT_STATS_INTERVAL 1000

GQuark
legba_call_error_quark (void)
{
  return g_quark_from_static_string ("legba-call-error-quark");
}

G_DEFINE_ENUM_TYPE (LegbaCallVideo, legba_call_video,
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_VIDEO_NONE, "none"),
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_VIDEO_TEST, "test"),
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_VIDEO_CAMERA, "camera"),
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_VIDEO_FILE, "file"),
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_VIDEO_ELEMENT, "element"));

G_DEFINE_ENUM_TYPE (LegbaCallAudio, legba_call_audio,
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_AUDIO_NONE, "none"),
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_AUDIO_TEST, "test"),
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_AUDIO_MIC, "mic"));

G_DEFINE_ENUM_TYPE (LegbaCallDisplay, legba_call_display,
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_DISPLAY_NONE, "none"),
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_DISPLAY_WINDOW, "window"),
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_DISPLAY_GRID, "grid"),
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_DISPLAY_APPSINK, "appsink"));

G_DEFINE_ENUM_TYPE (LegbaCallState, legba_call_state,
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_STATE_STOPPED, "stopped"),
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_STATE_STARTING, "starting"),
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_STATE_IN_CALL, "in-call"),
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_STATE_FAILED, "failed"));

G_DEFINE_FINAL_TYPE (LegbaCall, legba_call, G_TYPE_OBJECT);

enum
{
  PROP_0,
  PROP_SERVER_URL,
  PROP_APP_KEY,
  PROP_APP_SECRET,
  PROP_APP_ID,
  PROP_TOKEN,
  PROP_AUTH_URL,
  PROP_ROOM,
  PROP_IDENTITY,
  PROP_DISPLAY_NAME,
  PROP_VIDEO,
  PROP_VIDEO_FILE,
  PROP_VIDEO_ELEMENT,
  PROP_AUDIO,
  PROP_CODEC,
  PROP_ENCODER_PREFER,
  PROP_ENCODER_FACTORY,
  PROP_ENCODER_PROOF_TIMEOUT,
  PROP_BITRATE,
  PROP_WIDTH,
  PROP_HEIGHT,
  PROP_FRAMERATE,
  PROP_DISPLAY,
  PROP_GRID_WIDTH,
  PROP_GRID_HEIGHT,
  PROP_GRID_SINK,
  PROP_PLAY_AUDIO,
  PROP_MEASURE_LATENCY,
  PROP_STATS_INTERVAL,
  PROP_STATE,
  N_PROPERTIES
};

static GParamSpec *properties[N_PROPERTIES];

enum
{
  SIGNAL_ERROR,
  SIGNAL_WARNING,
  SIGNAL_PARTICIPANT_JOINED,
  SIGNAL_PARTICIPANT_LEFT,
  SIGNAL_VIDEO_SINK_ADDED,
  SIGNAL_STATS_UPDATED,
  SIGNAL_DATA_RECEIVED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

/* ---- Strings ---- */

static gboolean
enum_from_nick (GType type, const char *name, gint * value)
{
  GEnumClass *klass = g_type_class_ref (type);
  GEnumValue *v = name ? g_enum_get_value_by_nick (klass, name) : NULL;

  if (v != NULL)
    *value = v->value;
  g_type_class_unref (klass);
  return v != NULL;
}

/**
 * legba_call_video_from_string:
 * @name: `none`, `test`, `camera`, `file` or `element`
 * @video: (out): the source
 *
 * Returns: %TRUE when @name names a #LegbaCallVideo
 */
gboolean
legba_call_video_from_string (const char *name, LegbaCallVideo * video)
{
  return enum_from_nick (LEGBA_TYPE_CALL_VIDEO, name, (gint *) video);
}

/**
 * legba_call_audio_from_string:
 * @name: `none`, `test` or `mic`
 * @audio: (out): the source
 *
 * Returns: %TRUE when @name names a #LegbaCallAudio
 */
gboolean
legba_call_audio_from_string (const char *name, LegbaCallAudio * audio)
{
  return enum_from_nick (LEGBA_TYPE_CALL_AUDIO, name, (gint *) audio);
}

/**
 * legba_call_display_from_string:
 * @name: `none`, `window`, `grid` or `appsink`
 * @display: (out): the display mode
 *
 * Returns: %TRUE when @name names a #LegbaCallDisplay
 */
gboolean
legba_call_display_from_string (const char *name, LegbaCallDisplay * display)
{
  return enum_from_nick (LEGBA_TYPE_CALL_DISPLAY, name, (gint *) display);
}

/* ---- State and errors ---- */

static void
set_state (LegbaCall * self, LegbaCallState state)
{
  if (self->state == state)
    return;
  self->state = state;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATE]);
}

void
legba_call_emit_warning (LegbaCall * self, GError * error)
{
  g_signal_emit (self, signals[SIGNAL_WARNING], 0, error);
}

void
legba_call_emit_video_sink (LegbaCall * self, LegbaParticipant * participant,
    GstElement * sink)
{
  g_signal_emit (self, signals[SIGNAL_VIDEO_SINK_ADDED], 0, participant, sink);
}

void
legba_call_emit_data (LegbaCall * self, LegbaParticipant * participant,
    const char *topic, JsonNode * data)
{
  g_signal_emit (self, signals[SIGNAL_DATA_RECEIVED], 0, participant, topic,
      data);
}

void
legba_call_notify_participant (LegbaCall * self,
    LegbaParticipant * participant, gboolean joined)
{
  g_signal_emit (self, signals[joined ? SIGNAL_PARTICIPANT_JOINED :
          SIGNAL_PARTICIPANT_LEFT], 0, participant);
}

static void
teardown (LegbaCall * self)
{
  self->generation++;
  if (self->cancellable != NULL) {
    g_cancellable_cancel (self->cancellable);
    g_clear_object (&self->cancellable);
  }
  if (self->stats_source != NULL) {
    g_source_destroy (self->stats_source);
    g_clear_pointer (&self->stats_source, g_source_unref);
  }
  if (self->room != NULL) {
    legba_room_disconnect (self->room);
    g_signal_handlers_disconnect_by_data (self->room, self);
  }
  g_clear_pointer (&self->file, legba_call_file_free);
  if (self->pipeline != NULL) {
    legba_call_remove_tracks (self);
    gst_element_set_state (self->pipeline, GST_STATE_NULL);
  }
  g_clear_object (&self->room);
  if (self->bus_source != NULL) {
    g_source_destroy (self->bus_source);
    g_clear_pointer (&self->bus_source, g_source_unref);
  }
  g_clear_object (&self->valves[0]);
  g_clear_object (&self->valves[1]);
  g_clear_pointer (&self->track_cpu[0], legba_track_cpu_free);
  g_clear_pointer (&self->track_cpu[1], legba_track_cpu_free);
  g_clear_object (&self->encoder);
  g_clear_object (&self->compositor);
  g_clear_object (&self->pipeline);
  g_clear_object (&self->client);
  legba_call_release_display (self);
}

/* Ends the call on an error: the pipeline is stopped and the room left
 * before the error is emitted. */
static void
fail (LegbaCall * self, GError * error)
{
  if (self->state != LEGBA_CALL_STATE_STARTING &&
      self->state != LEGBA_CALL_STATE_IN_CALL)
    return;
  g_object_ref (self);
  GST_WARNING ("call failed: %s", error->message);
  teardown (self);
  set_state (self, LEGBA_CALL_STATE_FAILED);
  g_signal_emit (self, signals[SIGNAL_ERROR], 0, error);
  g_object_unref (self);
}

void
legba_call_fail (LegbaCall * self, GError * error)
{
  fail (self, error);
}

static LegbaCallError
from_room_error (const GError * error)
{
  if (error->domain != LEGBA_ROOM_ERROR)
    return LEGBA_CALL_ERROR_FAILED;
  switch (error->code) {
    case LEGBA_ROOM_ERROR_UNREACHABLE:
      return LEGBA_CALL_ERROR_UNREACHABLE;
    case LEGBA_ROOM_ERROR_REFUSED:
      return LEGBA_CALL_ERROR_REFUSED;
    case LEGBA_ROOM_ERROR_FULL:
      return LEGBA_CALL_ERROR_FULL;
    case LEGBA_ROOM_ERROR_MISSING_PLUGIN:
      return LEGBA_CALL_ERROR_MISSING_PLUGIN;
    case LEGBA_ROOM_ERROR_INVALID:
      return LEGBA_CALL_ERROR_INVALID;
    default:
      return LEGBA_CALL_ERROR_FAILED;
  }
}

/* ---- The bus ---- */

static gboolean
inside (GstObject * object, GstElement * element)
{
  return element != NULL && (object == GST_OBJECT (element) ||
      gst_object_has_as_ancestor (object, GST_OBJECT (element)));
}

static gboolean
on_bus_message (GstBus * bus, GstMessage * message, gpointer data)
{
  LegbaCall *self = data;
  g_autoptr (GError) gerror = NULL;
  g_autofree char *debug = NULL;
  GError *error;
  GstObject *src = GST_MESSAGE_SRC (message);
  LegbaCallError code = LEGBA_CALL_ERROR_FAILED;

  if (GST_MESSAGE_TYPE (message) != GST_MESSAGE_ERROR)
    return G_SOURCE_CONTINUE;
  gst_message_parse_error (message, &gerror, &debug);
  GST_WARNING_OBJECT (src, "%s (%s)", gerror->message, debug);
  /* a remote participant's decoder or display: that track only */
  for (guint i = 0; i < self->order->len; i++) {
    LegbaCallRemote *r = self->order->pdata[i];

    if (inside (src, r->bins[0]) || inside (src, r->bins[1])) {
      error = g_error_new (LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_FAILED,
          "Cannot show %s's %s: %s", r->identity,
          inside (src, r->bins[0]) ? "video" : "audio", gerror->message);
      legba_call_emit_warning (self, error);
      g_error_free (error);
      return G_SOURCE_CONTINUE;
    }
  }
  if (inside (src, self->encoder))
    code = LEGBA_CALL_ERROR_NO_ENCODER;
  else if (self->video == LEGBA_CALL_VIDEO_CAMERA &&
      gerror->domain == GST_RESOURCE_ERROR &&
      g_str_has_prefix (GST_OBJECT_NAME (src), "legba-camera"))
    code = LEGBA_CALL_ERROR_NO_CAMERA;
  error = g_error_new (LEGBA_CALL_ERROR, code, "%s: %s",
      GST_OBJECT_NAME (src), gerror->message);
  fail (self, error);
  g_error_free (error);
  return G_SOURCE_CONTINUE;
}

/* ---- Sources ---- */

static gboolean
have_device (const char *klass)
{
  GstDeviceMonitor *monitor = gst_device_monitor_new ();
  GList *devices;
  gboolean found;

  gst_device_monitor_add_filter (monitor, klass, NULL);
  devices = gst_device_monitor_get_devices (monitor);
  found = devices != NULL;
  g_list_free_full (devices, gst_object_unref);
  gst_object_unref (monitor);
  return found;
}

static gboolean
need_factory (const char *name, const char *package, GError ** error)
{
  GstElementFactory *f = gst_element_factory_find (name);

  if (f != NULL) {
    gst_object_unref (f);
    return TRUE;
  }
  g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_MISSING_PLUGIN,
      "The GStreamer element %s is not installed (%s)", name, package);
  return FALSE;
}

static char *
video_source_description (LegbaCall * self, GError ** error)
{
  switch (self->video) {
    case LEGBA_CALL_VIDEO_TEST:
      return g_strdup ("videotestsrc is-live=true pattern=ball");
    case LEGBA_CALL_VIDEO_CAMERA:{
      gboolean v4l2 = need_factory ("v4l2src", "", NULL);

      if (!have_device ("Video/Source")) {
        g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_NO_CAMERA,
            "No camera found (no video capture device is present)");
        return NULL;
      }
      return g_strdup_printf ("%s name=legba-camera ! videoconvert ! "
          "videoscale ! videorate", v4l2 ? "v4l2src" : "autovideosrc");
    }
    case LEGBA_CALL_VIDEO_FILE:
      if (self->video_file == NULL ||
          !g_file_test (self->video_file, G_FILE_TEST_IS_REGULAR)) {
        g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_INVALID,
            "Video file %s cannot be read",
            self->video_file ? self->video_file : "(none given)");
        return NULL;
      }
      /* frames from the file's player (legba-call-file.c) */
      return g_strdup_printf ("appsrc name=legba-file is-live=true "
          "format=time do-timestamp=true max-buffers=2 leaky-type=downstream "
          "caps=\"video/x-raw,format=I420,width=%u,height=%u,"
          "framerate=%u/1,pixel-aspect-ratio=1/1\"", self->width,
          self->height, self->framerate);
    case LEGBA_CALL_VIDEO_ELEMENT:
      if (self->video_element == NULL) {
        g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_INVALID,
            "Video source \"element\" without a video-element");
        return NULL;
      }
      return g_strdup ("videoconvert name=first ! videoscale ! videorate");
    default:
      g_assert_not_reached ();
  }
}

static GstPadProbeReturn
count_sent (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  LegbaCall *self = g_object_get_data (G_OBJECT (pad), "legba-call");
  LegbaTrackKind kind = GPOINTER_TO_UINT (data);

  g_mutex_lock (&self->lock);
  self->sent_buffers[kind]++;
  self->sent_bytes[kind] += gst_buffer_get_size (GST_PAD_PROBE_INFO_BUFFER
      (info));
  g_mutex_unlock (&self->lock);
  return GST_PAD_PROBE_OK;
}

static GstPadProbeReturn
note_encoder_thread (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  legba_track_cpu_note_thread (data);
  return GST_PAD_PROBE_OK;
}

void
legba_call_ghost (GstElement * bin, const char *element, const char *pad)
{
  GstElement *e = gst_bin_get_by_name (GST_BIN (bin), element);
  GstPad *target = gst_element_get_static_pad (e, pad);

  gst_element_add_pad (bin, gst_ghost_pad_new (pad, target));
  gst_object_unref (target);
  gst_object_unref (e);
}

static gboolean
add_track (LegbaCall * self, LegbaTrackKind kind, const char *desc,
    GstElement * upstream, GError ** error)
{
  /* no ghost pads found by gst_parse: it looks inside legbavideoenc too */
  GstElement *bin = gst_parse_bin_from_description (desc, FALSE, error);
  GstPad *src, *sink;
  GstPadLinkReturn ret;

  if (bin == NULL) {
    GError *e = *error;

    *error = g_error_new (LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_MISSING_PLUGIN,
        "Cannot build the %s source: %s",
        kind == LEGBA_TRACK_KIND_VIDEO ? "video" : "audio", e->message);
    g_error_free (e);
    return FALSE;
  }
  legba_call_ghost (bin, "enc", "src");
  {
    GstElement *enc = gst_bin_get_by_name (GST_BIN (bin), "enc");
    GstPad *in = gst_element_get_static_pad (enc, "sink");

    self->track_cpu[kind] = legba_track_cpu_new ();
    gst_pad_add_probe (in, GST_PAD_PROBE_TYPE_BUFFER, note_encoder_thread,
        self->track_cpu[kind], NULL);
    gst_object_unref (in);
    gst_object_unref (enc);
  }
  if (upstream != NULL)
    legba_call_ghost (bin, "first", "sink");
  gst_bin_add (GST_BIN (self->pipeline), bin);
  if (upstream != NULL) {
    gst_bin_add (GST_BIN (self->pipeline), gst_object_ref (upstream));
    if (!gst_element_link (upstream, bin)) {
      g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_INVALID,
          "The video-element %s has no raw video source pad that links",
          GST_OBJECT_NAME (upstream));
      return FALSE;
    }
  }
  self->valves[kind] = gst_bin_get_by_name (GST_BIN (bin), "valve");
  if (kind == LEGBA_TRACK_KIND_VIDEO)
    self->encoder = gst_bin_get_by_name (GST_BIN (bin), "enc");
  sink = legba_room_add_track (self->room, kind, error);
  if (sink == NULL)
    return FALSE;
  src = gst_element_get_static_pad (bin, "src");
  g_object_set_data (G_OBJECT (src), "legba-call", self);
  gst_pad_add_probe (src, GST_PAD_PROBE_TYPE_BUFFER, count_sent,
      GUINT_TO_POINTER (kind), NULL);
  ret = gst_pad_link (src, sink);
  gst_object_unref (src);
  gst_object_unref (sink);
  if (ret != GST_PAD_LINK_OK) {
    g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_FAILED,
        "Cannot link the %s track to the room: %s",
        kind == LEGBA_TRACK_KIND_VIDEO ? "video" : "audio",
        gst_pad_link_get_name (ret));
    return FALSE;
  }
  return TRUE;
}

static gboolean
build_video (LegbaCall * self, GError ** error)
{
  g_autofree char *source = NULL;
  g_autofree char *desc = NULL;
  GEnumClass *codecs = g_type_class_ref (LEGBA_TYPE_VIDEO_CODEC);
  GEnumClass *prefers = g_type_class_ref (LEGBA_TYPE_ENCODER_PREFER);
  gboolean ok;

  if (!need_factory ("legbavideoenc", "Legba's GStreamer plugin: install "
          "it or add its directory to GST_PLUGIN_PATH", error))
    return FALSE;
  if (self->measure_latency && !need_factory ("legbastamp",
          "Legba's GStreamer plugin", error))
    return FALSE;
  source = video_source_description (self, error);
  if (source == NULL)
    return FALSE;
  desc = g_strdup_printf ("%s ! video/x-raw,format=I420,width=%u,height=%u,"
      "framerate=%u/1 ! valve name=valve drop=%s ! %s"
      "legbavideoenc name=enc codec=%s prefer=%s proof-timeout=%u "
      "bitrate=%u%s%s",
      source, self->width, self->height, self->framerate,
      self->muted[LEGBA_TRACK_KIND_VIDEO] ? "true" : "false",
      self->measure_latency ? "legbastamp ! " : "",
      g_enum_get_value (codecs, self->codec)->value_nick,
      g_enum_get_value (prefers, self->encoder_prefer)->value_nick,
      self->proof_timeout, self->bitrate,
      self->encoder_factory ? " encoder-factory=" : "",
      self->encoder_factory ? self->encoder_factory : "");
  g_type_class_unref (codecs);
  g_type_class_unref (prefers);
  ok = add_track (self, LEGBA_TRACK_KIND_VIDEO, desc,
      self->video == LEGBA_CALL_VIDEO_ELEMENT ? self->video_element : NULL,
      error);
  if (ok && self->video == LEGBA_CALL_VIDEO_FILE) {
    GstElement *appsrc = gst_bin_get_by_name (GST_BIN (self->pipeline),
        "legba-file");

    self->file = legba_call_file_new (self, self->video_file, appsrc,
        self->width, self->height, self->framerate, self->context, error);
    gst_object_unref (appsrc);
    ok = self->file != NULL;
  }
  return ok;
}

static gboolean
build_audio (LegbaCall * self, GError ** error)
{
  g_autofree char *desc = NULL;

  if (!need_factory ("opusenc", "gst-plugins-base", error))
    return FALSE;
  if (self->audio == LEGBA_CALL_AUDIO_MIC && !have_device ("Audio/Source")) {
    g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_NO_MICROPHONE,
        "No microphone found (no audio capture device is present)");
    return FALSE;
  }
  desc = g_strdup_printf ("%s ! audioconvert ! audioresample ! "
      "audio/x-raw,rate=48000,channels=1 ! valve name=valve drop=%s ! "
      "opusenc name=enc", self->audio == LEGBA_CALL_AUDIO_TEST ?
      "audiotestsrc is-live=true wave=sine volume=0.2 samplesperbuffer=960"
      : "autoaudiosrc", self->muted[LEGBA_TRACK_KIND_AUDIO] ? "true" : "false");
  return add_track (self, LEGBA_TRACK_KIND_AUDIO, desc, NULL, error);
}

/* ---- Stats ---- */

static gint64
cpu_time_us (void)
{
  struct rusage u;

  getrusage (RUSAGE_SELF, &u);
  return (gint64) (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * G_USEC_PER_SEC +
      u.ru_utime.tv_usec + u.ru_stime.tv_usec;
}

static gboolean
on_stats_tick (gpointer data)
{
  LegbaCall *self = data;
  gint64 now = g_get_monotonic_time (), cpu = cpu_time_us ();
  gdouble seconds = (now - self->last_stats_time) / 1e6;
  gboolean sampled[2];
  guint64 used[2];

  if (seconds <= 0)
    return G_SOURCE_CONTINUE;
  legba_track_cpu_sample (self->track_cpu, 2, sampled, used);
  g_mutex_lock (&self->lock);
  for (guint k = 0; k < 2; k++) {
    self->sent_bitrate[k] = (self->sent_bytes[k] -
        self->last_sent_bytes[k]) * 8 / seconds;
    self->last_sent_bytes[k] = self->sent_bytes[k];
    if (sampled[k])
      self->track_cpu_percent[k] = used[k] / 1e7 / seconds;
  }
  g_mutex_unlock (&self->lock);
  self->cpu_percent = (cpu - self->last_cpu_us) / 1e4 / seconds;
  self->last_cpu_us = cpu;
  self->last_stats_time = now;
  legba_call_update_remote_stats (self, seconds);
  g_signal_emit (self, signals[SIGNAL_STATS_UPDATED], 0);
  return G_SOURCE_CONTINUE;
}

/**
 * legba_call_get_local_stats:
 * @self: a #LegbaCall
 *
 * What this participant sends: `encoder` (string, the video encoder
 * factory in use; absent before it is chosen or without video),
 * `video-bitrate` and `audio-bitrate` (double, bit/s over the last stats
 * interval), `video-frames-sent` and `audio-buffers-sent` (guint64,
 * encoded buffers given to the room), `video-muted`, `audio-muted`
 * (boolean), `cpu` (double, the CPU time of the whole process, user and
 * system, over the last interval, in percent of one core: encoding,
 * decoding, the network and whatever else the process does), and, on
 * Linux, `video-cpu` and `audio-cpu` (double, the same for one local
 * track: its streaming thread, which runs the source, the conversion and
 * the encoder, and the threads named as that thread is, which is how an
 * encoder's own threads such as x264's are found; absent until the
 * track's first buffer reached its encoder and one interval has passed.
 * Threads an encoder names otherwise are not counted).
 *
 * Returns: (transfer full): the counters
 */
GstStructure *
legba_call_get_local_stats (LegbaCall * self)
{
  GstStructure *s;

  g_return_val_if_fail (LEGBA_IS_CALL (self), NULL);
  g_mutex_lock (&self->lock);
  s = gst_structure_new ("legba-local-stats",
      "video-bitrate", G_TYPE_DOUBLE, self->sent_bitrate[0],
      "audio-bitrate", G_TYPE_DOUBLE, self->sent_bitrate[1],
      "video-frames-sent", G_TYPE_UINT64, self->sent_buffers[0],
      "audio-buffers-sent", G_TYPE_UINT64, self->sent_buffers[1],
      "video-muted", G_TYPE_BOOLEAN, self->muted[0],
      "audio-muted", G_TYPE_BOOLEAN, self->muted[1],
      "cpu", G_TYPE_DOUBLE, self->cpu_percent, NULL);
  if (self->track_cpu_percent[0] >= 0)
    gst_structure_set (s, "video-cpu", G_TYPE_DOUBLE,
        self->track_cpu_percent[0], NULL);
  if (self->track_cpu_percent[1] >= 0)
    gst_structure_set (s, "audio-cpu", G_TYPE_DOUBLE,
        self->track_cpu_percent[1], NULL);
  g_mutex_unlock (&self->lock);
  if (self->encoder != NULL) {
    g_autofree char *factory = NULL;

    g_object_get (self->encoder, "current-encoder", &factory, NULL);
    if (factory != NULL)
      gst_structure_set (s, "encoder", G_TYPE_STRING, factory, NULL);
  }
  return s;
}

/* ---- Start and stop ---- */

typedef struct
{
  LegbaCall *call;
  guint generation;
} Connecting;

static void
on_connected (GObject * object, GAsyncResult * result, gpointer data)
{
  Connecting *c = data;
  LegbaCall *self = c->call;
  g_autoptr (GError) error = NULL;
  gboolean ok = legba_room_connect_finish (LEGBA_ROOM (object), result,
      &error);

  if (c->generation == self->generation) {
    if (ok) {
      set_state (self, LEGBA_CALL_STATE_IN_CALL);
    } else {
      GError *e = g_error_new (LEGBA_CALL_ERROR, from_room_error (error),
          "%s", error->message);

      fail (self, e);
      g_error_free (e);
    }
  }
  g_object_unref (self);
  g_free (c);
}

static gboolean
check_config (LegbaCall * self, GError ** error)
{
  const char *missing = self->server_url == NULL ? "server URL" :
      self->room_name == NULL ? "room" : self->identity == NULL ? "identity" :
      self->app_key == NULL ? "app key" : NULL;

  if (missing != NULL) {
    g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_INVALID,
        "No %s given", missing);
    return FALSE;
  }
  if (!g_str_has_prefix (self->server_url, "ws://") &&
      !g_str_has_prefix (self->server_url, "wss://") &&
      !g_str_has_prefix (self->server_url, "http://") &&
      !g_str_has_prefix (self->server_url, "https://")) {
    g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_INVALID,
        "Server URL %s is not a ws://, wss://, http:// or https:// URL",
        self->server_url);
    return FALSE;
  }
  if (self->app_secret == NULL && self->token == NULL && self->auth_url == NULL) {
    g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_INVALID,
        "No way to authenticate: give a token, an app secret or an auth URL");
    return FALSE;
  }
  if (self->token != NULL && self->app_id == NULL && self->auth_url == NULL) {
    g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_INVALID,
        "A token needs the app id (or the auth URL) to be used");
    return FALSE;
  }
  /* autovideosink with no display left to try ends on sinks that crash
   * the process (DirectFB's) */
  if ((self->display == LEGBA_CALL_DISPLAY_WINDOW ||
          (self->display == LEGBA_CALL_DISPLAY_GRID && self->grid_sink == NULL))
      && g_getenv ("DISPLAY") == NULL && g_getenv ("WAYLAND_DISPLAY") == NULL) {
    g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_NO_DISPLAY,
        "No display to show the %s on (neither DISPLAY nor WAYLAND_DISPLAY "
        "is set)", self->display == LEGBA_CALL_DISPLAY_GRID ? "grid" :
        "windows");
    return FALSE;
  }
  if (self->video == LEGBA_CALL_VIDEO_NONE &&
      self->audio == LEGBA_CALL_AUDIO_NONE)
    GST_INFO ("%s publishes nothing: receive only", self->identity);
  return TRUE;
}

static gboolean
build (LegbaCall * self, GError ** error)
{
  g_autoptr (GstBus) bus = NULL;

  self->pipeline = gst_pipeline_new (self->identity);
  gst_object_ref_sink (self->pipeline);
  bus = gst_element_get_bus (self->pipeline);
  self->bus_source = gst_bus_create_watch (bus);
  g_source_set_callback (self->bus_source, G_SOURCE_FUNC (on_bus_message),
      self, NULL);
  g_source_attach (self->bus_source, self->context);
  self->client = legba_signal_client_new (self->server_url, self->app_key);
  g_object_set (self->client, "app-secret", self->app_secret,
      "app-id", self->app_id, "token", self->token,
      "auth-url", self->auth_url, NULL);
  self->room = legba_room_new (LEGBA_SIGNALLER (self->client),
      GST_BIN (self->pipeline));
  g_object_set (self->room, "room", self->room_name,
      "identity", self->identity, "display-name", self->display_name,
      "stats-interval", self->stats_interval, NULL);
  legba_call_connect_room (self);
  if (self->muted[0] || self->muted[1])
    legba_room_set_muted (self->room, self->muted[LEGBA_TRACK_KIND_AUDIO],
        self->muted[LEGBA_TRACK_KIND_VIDEO]);
  if (self->video != LEGBA_CALL_VIDEO_NONE && !build_video (self, error))
    return FALSE;
  if (self->audio != LEGBA_CALL_AUDIO_NONE && !build_audio (self, error))
    return FALSE;
  if (!legba_call_hold_display (self, error))
    return FALSE;
  if (self->display == LEGBA_CALL_DISPLAY_GRID &&
      !legba_call_build_grid (self, error))
    return FALSE;
  if (gst_element_set_state (self->pipeline, GST_STATE_PLAYING) ==
      GST_STATE_CHANGE_FAILURE) {
    g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_FAILED,
        "The call pipeline could not start");
    return FALSE;
  }
  if (self->file != NULL && !legba_call_file_play (self->file, error))
    return FALSE;
  return TRUE;
}

/**
 * legba_call_start:
 * @self: a #LegbaCall
 * @error: (nullable): where to put what is wrong with the configuration
 *
 * Builds the pipeline, starts it and joins the room. Returns at once:
 * #LegbaCall:state becomes %LEGBA_CALL_STATE_IN_CALL when the room is
 * joined, or %LEGBA_CALL_STATE_FAILED with #LegbaCall::error. A call that
 * was stopped or failed can be started again.
 *
 * Returns: %TRUE when the call is starting; %FALSE with @error when the
 *   configuration cannot work (%LEGBA_CALL_ERROR_INVALID,
 *   %LEGBA_CALL_ERROR_NO_CAMERA, %LEGBA_CALL_ERROR_NO_MICROPHONE,
 *   %LEGBA_CALL_ERROR_NO_DISPLAY, %LEGBA_CALL_ERROR_MISSING_PLUGIN)
 */
gboolean
legba_call_start (LegbaCall * self, GError ** error)
{
  Connecting *c;

  g_return_val_if_fail (LEGBA_IS_CALL (self), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);
  if (self->state == LEGBA_CALL_STATE_STARTING ||
      self->state == LEGBA_CALL_STATE_IN_CALL) {
    g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_INVALID,
        "The call is already started");
    return FALSE;
  }
  if (!check_config (self, error))
    return FALSE;
  /* the process's one-time work, while the pipeline is built */
  legba_room_prepare ();
  g_mutex_lock (&self->lock);
  g_hash_table_remove_all (self->remotes);
  g_ptr_array_set_size (self->order, 0);
  memset (self->sent_bytes, 0, sizeof self->sent_bytes);
  memset (self->sent_buffers, 0, sizeof self->sent_buffers);
  memset (self->last_sent_bytes, 0, sizeof self->last_sent_bytes);
  memset (self->sent_bitrate, 0, sizeof self->sent_bitrate);
  self->track_cpu_percent[0] = self->track_cpu_percent[1] = -1;
  g_mutex_unlock (&self->lock);
  if (!build (self, error)) {
    teardown (self);
    return FALSE;
  }
  self->last_stats_time = g_get_monotonic_time ();
  self->last_cpu_us = cpu_time_us ();
  if (self->stats_interval > 0) {
    self->stats_source = g_timeout_source_new (self->stats_interval);
    g_source_set_callback (self->stats_source, on_stats_tick, self, NULL);
    g_source_attach (self->stats_source, self->context);
  }
  set_state (self, LEGBA_CALL_STATE_STARTING);
  self->cancellable = g_cancellable_new ();
  c = g_new0 (Connecting, 1);
  c->call = g_object_ref (self);
  c->generation = self->generation;
  legba_room_connect_async (self->room, self->cancellable, on_connected, c);
  return TRUE;
}

/**
 * legba_call_stop:
 * @self: a #LegbaCall
 *
 * Leaves the room and stops the pipeline. The counters stay readable
 * until the next legba_call_start().
 */
void
legba_call_stop (LegbaCall * self)
{
  g_return_if_fail (LEGBA_IS_CALL (self));
  legba_call_update_remote_stats (self, 0);
  teardown (self);
  set_state (self, LEGBA_CALL_STATE_STOPPED);
}

/* ---- Accessors ---- */

/**
 * legba_call_new:
 * @server_url: the signalling server's `ws://` or `wss://` URL
 * @room: the room's name
 * @identity: this participant's identity
 *
 * Creates a call; set the authentication (#LegbaCall:app-key and one of
 * #LegbaCall:token, #LegbaCall:app-secret, #LegbaCall:auth-url) and the
 * sources before legba_call_start().
 *
 * Returns: (transfer full): a new #LegbaCall
 */
LegbaCall *
legba_call_new (const char *server_url, const char *room, const char *identity)
{
  return g_object_new (LEGBA_TYPE_CALL, "server-url", server_url,
      "room", room, "identity", identity, NULL);
}

/**
 * legba_call_get_state:
 * @self: a #LegbaCall
 *
 * Returns: the call's #LegbaCall:state
 */
LegbaCallState
legba_call_get_state (LegbaCall * self)
{
  g_return_val_if_fail (LEGBA_IS_CALL (self), LEGBA_CALL_STATE_STOPPED);
  return self->state;
}

/**
 * legba_call_get_room:
 * @self: a #LegbaCall
 *
 * The room of the running call, for its participants and data. A new
 * room is made by each legba_call_start().
 *
 * Returns: (transfer none) (nullable): the room, or %NULL when the call is
 *   not running
 */
LegbaRoom *
legba_call_get_room (LegbaCall * self)
{
  g_return_val_if_fail (LEGBA_IS_CALL (self), NULL);
  return self->room;
}

/**
 * legba_call_get_pipeline:
 * @self: a #LegbaCall
 *
 * Returns: (transfer none) (nullable): the running call's pipeline, or
 *   %NULL when the call is not running
 */
GstPipeline *
legba_call_get_pipeline (LegbaCall * self)
{
  g_return_val_if_fail (LEGBA_IS_CALL (self), NULL);
  return self->pipeline ? GST_PIPELINE (self->pipeline) : NULL;
}

static void
set_muted (LegbaCall * self, LegbaTrackKind kind, gboolean muted)
{
  muted = !!muted;
  if (self->muted[kind] == muted)
    return;
  self->muted[kind] = muted;
  if (self->valves[kind] != NULL)
    g_object_set (self->valves[kind], "drop", muted, NULL);
  if (self->room != NULL)
    legba_room_set_muted (self->room, self->muted[LEGBA_TRACK_KIND_AUDIO],
        self->muted[LEGBA_TRACK_KIND_VIDEO]);
  if (!muted && kind == LEGBA_TRACK_KIND_VIDEO && self->encoder != NULL) {
    /* receivers need a key frame to show the video again */
    GstPad *src = gst_element_get_static_pad (self->encoder, "src");

    gst_pad_send_event (src,
        gst_video_event_new_upstream_force_key_unit (GST_CLOCK_TIME_NONE,
            TRUE, 0));
    gst_object_unref (src);
  }
}

/**
 * legba_call_set_audio_muted:
 * @self: a #LegbaCall
 * @muted: %TRUE to stop sending audio
 *
 * Mutes or unmutes the microphone (or test tone): while muted no audio is
 * sent, and the other participants are told (the `legba.mute` topic,
 * docs/room-protocol.md §6). Kept across legba_call_start().
 */
void
legba_call_set_audio_muted (LegbaCall * self, gboolean muted)
{
  g_return_if_fail (LEGBA_IS_CALL (self));
  set_muted (self, LEGBA_TRACK_KIND_AUDIO, muted);
}

/**
 * legba_call_get_audio_muted:
 * @self: a #LegbaCall
 *
 * Returns: whether audio is muted
 */
gboolean
legba_call_get_audio_muted (LegbaCall * self)
{
  g_return_val_if_fail (LEGBA_IS_CALL (self), FALSE);
  return self->muted[LEGBA_TRACK_KIND_AUDIO];
}

/**
 * legba_call_set_video_muted:
 * @self: a #LegbaCall
 * @muted: %TRUE to stop sending video
 *
 * Mutes or unmutes the video: while muted no video is sent, and the other
 * participants are told (the `legba.mute` topic); on unmuting a key frame
 * is sent first so that receivers show it at once. Kept across
 * legba_call_start().
 */
void
legba_call_set_video_muted (LegbaCall * self, gboolean muted)
{
  g_return_if_fail (LEGBA_IS_CALL (self));
  set_muted (self, LEGBA_TRACK_KIND_VIDEO, muted);
}

/**
 * legba_call_get_video_muted:
 * @self: a #LegbaCall
 *
 * Returns: whether video is muted
 */
gboolean
legba_call_get_video_muted (LegbaCall * self)
{
  g_return_val_if_fail (LEGBA_IS_CALL (self), FALSE);
  return self->muted[LEGBA_TRACK_KIND_VIDEO];
}

/* ---- GObject ---- */

static char **
string_slot (LegbaCall * self, guint prop_id)
{
  switch (prop_id) {
    case PROP_SERVER_URL:
      return &self->server_url;
    case PROP_APP_KEY:
      return &self->app_key;
    case PROP_APP_SECRET:
      return &self->app_secret;
    case PROP_APP_ID:
      return &self->app_id;
    case PROP_TOKEN:
      return &self->token;
    case PROP_AUTH_URL:
      return &self->auth_url;
    case PROP_ROOM:
      return &self->room_name;
    case PROP_IDENTITY:
      return &self->identity;
    case PROP_DISPLAY_NAME:
      return &self->display_name;
    case PROP_VIDEO_FILE:
      return &self->video_file;
    case PROP_ENCODER_FACTORY:
      return &self->encoder_factory;
    default:
      return NULL;
  }
}

static guint *
uint_slot (LegbaCall * self, guint prop_id)
{
  switch (prop_id) {
    case PROP_BITRATE:
      return &self->bitrate;
    case PROP_ENCODER_PROOF_TIMEOUT:
      return &self->proof_timeout;
    case PROP_WIDTH:
      return &self->width;
    case PROP_HEIGHT:
      return &self->height;
    case PROP_FRAMERATE:
      return &self->framerate;
    case PROP_GRID_WIDTH:
      return &self->grid_width;
    case PROP_GRID_HEIGHT:
      return &self->grid_height;
    case PROP_STATS_INTERVAL:
      return &self->stats_interval;
    default:
      return NULL;
  }
}

static void
legba_call_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  LegbaCall *self = LEGBA_CALL (object);
  char **s = string_slot (self, prop_id);
  guint *u = uint_slot (self, prop_id);

  if (s != NULL) {
    g_free (*s);
    *s = g_value_dup_string (value);
  } else if (u != NULL) {
    *u = g_value_get_uint (value);
  } else {
    switch (prop_id) {
      case PROP_VIDEO:
        self->video = g_value_get_enum (value);
        break;
      case PROP_VIDEO_ELEMENT:
        g_clear_object (&self->video_element);
        self->video_element = g_value_get_object (value);
        if (self->video_element != NULL)
          gst_object_ref_sink (self->video_element);
        break;
      case PROP_AUDIO:
        self->audio = g_value_get_enum (value);
        break;
      case PROP_CODEC:
        self->codec = g_value_get_enum (value);
        break;
      case PROP_ENCODER_PREFER:
        self->encoder_prefer = g_value_get_enum (value);
        break;
      case PROP_DISPLAY:
        self->display = g_value_get_enum (value);
        break;
      case PROP_GRID_SINK:
        g_clear_object (&self->grid_sink);
        self->grid_sink = g_value_get_object (value);
        if (self->grid_sink != NULL)
          gst_object_ref_sink (self->grid_sink);
        break;
      case PROP_PLAY_AUDIO:
        self->play_audio = g_value_get_boolean (value);
        break;
      case PROP_MEASURE_LATENCY:
        self->measure_latency = g_value_get_boolean (value);
        break;
      default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
  }
}

static void
legba_call_get_property (GObject * object, guint prop_id, GValue * value,
    GParamSpec * pspec)
{
  LegbaCall *self = LEGBA_CALL (object);
  char **s = string_slot (self, prop_id);
  guint *u = uint_slot (self, prop_id);

  if (s != NULL) {
    g_value_set_string (value, *s);
  } else if (u != NULL) {
    g_value_set_uint (value, *u);
  } else {
    switch (prop_id) {
      case PROP_VIDEO:
        g_value_set_enum (value, self->video);
        break;
      case PROP_VIDEO_ELEMENT:
        g_value_set_object (value, self->video_element);
        break;
      case PROP_AUDIO:
        g_value_set_enum (value, self->audio);
        break;
      case PROP_CODEC:
        g_value_set_enum (value, self->codec);
        break;
      case PROP_ENCODER_PREFER:
        g_value_set_enum (value, self->encoder_prefer);
        break;
      case PROP_DISPLAY:
        g_value_set_enum (value, self->display);
        break;
      case PROP_GRID_SINK:
        g_value_set_object (value, self->grid_sink);
        break;
      case PROP_PLAY_AUDIO:
        g_value_set_boolean (value, self->play_audio);
        break;
      case PROP_MEASURE_LATENCY:
        g_value_set_boolean (value, self->measure_latency);
        break;
      case PROP_STATE:
        g_value_set_enum (value, self->state);
        break;
      default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
  }
}

static void
legba_call_dispose (GObject * object)
{
  LegbaCall *self = LEGBA_CALL (object);

  teardown (self);
  g_clear_object (&self->video_element);
  g_clear_object (&self->grid_sink);
  G_OBJECT_CLASS (legba_call_parent_class)->dispose (object);
}

static void
legba_call_finalize (GObject * object)
{
  LegbaCall *self = LEGBA_CALL (object);

  for (guint p = PROP_SERVER_URL; p < N_PROPERTIES; p++) {
    char **s = string_slot (self, p);

    if (s != NULL)
      g_free (*s);
  }
  g_ptr_array_unref (self->order);
  g_hash_table_unref (self->remotes);
  g_mutex_clear (&self->lock);
  g_main_context_unref (self->context);
  G_OBJECT_CLASS (legba_call_parent_class)->finalize (object);
}

#define RW (G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS)

static GParamSpec *
string_prop (const char *name, const char *nick, const char *blurb)
{
  return g_param_spec_string (name, nick, blurb, NULL, RW);
}

static GParamSpec *
uint_prop (const char *name, const char *nick, const char *blurb, guint min,
    guint max, guint def)
{
  return g_param_spec_uint (name, nick, blurb, min, max, def, RW);
}

/* The settings of the call's signal client and room, by property id */
static const char *const setting_names[] = {
  [PROP_SERVER_URL] = "server-url",
  [PROP_APP_KEY] = "app-key",
  [PROP_APP_SECRET] = "app-secret",
  [PROP_APP_ID] = "app-id",
  [PROP_TOKEN] = "token",
  [PROP_AUTH_URL] = "auth-url",
  [PROP_ROOM] = "room",
  [PROP_IDENTITY] = "identity",
  [PROP_DISPLAY_NAME] = "display-name",
};

/* A string setting declared by source_type: the call's property has its
 * nick, blurb and default. */
static GParamSpec *
setting_prop (GType source_type, const char *name)
{
  GObjectClass *source = g_type_class_ref (source_type);
  GParamSpec *pspec = g_object_class_find_property (source, name);
  GParamSpec *copy;

  g_assert (G_IS_PARAM_SPEC_STRING (pspec));
  copy = g_param_spec_string (name, g_param_spec_get_nick (pspec),
      g_param_spec_get_blurb (pspec),
      G_PARAM_SPEC_STRING (pspec)->default_value, G_PARAM_READWRITE);
  g_type_class_unref (source);
  return copy;
}

static void
legba_call_class_init (LegbaCallClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);

  gobject_class->set_property = legba_call_set_property;
  gobject_class->get_property = legba_call_get_property;
  gobject_class->dispose = legba_call_dispose;
  gobject_class->finalize = legba_call_finalize;

  /**
   * LegbaCall:server-url:
   *
   * #LegbaSignalClient:server-url, for the call's signal client.
   */
  /**
   * LegbaCall:app-key:
   *
   * #LegbaSignalClient:app-key.
   */
  /**
   * LegbaCall:app-secret:
   *
   * #LegbaSignalClient:app-secret.
   */
  /**
   * LegbaCall:app-id:
   *
   * #LegbaSignalClient:app-id.
   */
  /**
   * LegbaCall:token:
   *
   * #LegbaSignalClient:token.
   */
  /**
   * LegbaCall:auth-url:
   *
   * #LegbaSignalClient:auth-url.
   */
  for (guint p = PROP_SERVER_URL; p <= PROP_AUTH_URL; p++)
    properties[p] = setting_prop (LEGBA_TYPE_SIGNAL_CLIENT, setting_names[p]);
  /**
   * LegbaCall:room:
   *
   * #LegbaRoom:room, for the call's room.
   */
  /**
   * LegbaCall:identity:
   *
   * #LegbaRoom:identity.
   */
  /**
   * LegbaCall:display-name:
   *
   * #LegbaRoom:display-name.
   */
  for (guint p = PROP_ROOM; p <= PROP_DISPLAY_NAME; p++)
    properties[p] = setting_prop (LEGBA_TYPE_ROOM, setting_names[p]);
  /**
   * LegbaCall:video:
   *
   * What is published as video.
   */
  properties[PROP_VIDEO] = g_param_spec_enum ("video", "Video",
      "What is published as video", LEGBA_TYPE_CALL_VIDEO,
      LEGBA_CALL_VIDEO_TEST, RW);
  /**
   * LegbaCall:video-file:
   *
   * The file whose video is published with %LEGBA_CALL_VIDEO_FILE.
   */
  properties[PROP_VIDEO_FILE] = string_prop ("video-file", "Video file",
      "The file whose video is published (video=file)");
  /**
   * LegbaCall:video-element:
   *
   * An element of the application's whose source pad gives raw video,
   * published with %LEGBA_CALL_VIDEO_ELEMENT.
   */
  properties[PROP_VIDEO_ELEMENT] = g_param_spec_object ("video-element",
      "Video element", "An element giving raw video (video=element)",
      GST_TYPE_ELEMENT, RW);
  /**
   * LegbaCall:audio:
   *
   * What is published as audio.
   */
  properties[PROP_AUDIO] = g_param_spec_enum ("audio", "Audio",
      "What is published as audio", LEGBA_TYPE_CALL_AUDIO,
      LEGBA_CALL_AUDIO_TEST, RW);
  /**
   * LegbaCall:codec:
   *
   * The video codec published: H.264 or VP8 (one codec per room).
   */
  properties[PROP_CODEC] = g_param_spec_enum ("codec", "Codec",
      "The video codec published (h264 or vp8)", LEGBA_TYPE_VIDEO_CODEC,
      LEGBA_VIDEO_CODEC_H264, RW);
  /**
   * LegbaCall:encoder-prefer:
   *
   * Hardware or software video encoders (legbavideoenc's `prefer`).
   */
  properties[PROP_ENCODER_PREFER] = g_param_spec_enum ("encoder-prefer",
      "Encoder preference", "Hardware or software video encoders",
      LEGBA_TYPE_ENCODER_PREFER, LEGBA_ENCODER_PREFER_AUTO, RW);
  /**
   * LegbaCall:encoder-factory:
   *
   * Use only this video encoder factory (still proved to work).
   */
  properties[PROP_ENCODER_FACTORY] = string_prop ("encoder-factory",
      "Encoder factory", "Use only this video encoder factory");
  /**
   * LegbaCall:encoder-proof-timeout:
   *
   * Milliseconds one encoder may take to prove it works (legbavideoenc's
   * `proof-timeout`); raise it on slow or heavily loaded machines.
   */
  properties[PROP_ENCODER_PROOF_TIMEOUT] = uint_prop ("encoder-proof-timeout",
      "Encoder proof timeout", "Milliseconds one encoder may take to prove "
      "it works", 1, G_MAXUINT, LEGBA_ENCODER_DEFAULT_PROOF_TIMEOUT_MS);
  /**
   * LegbaCall:bitrate:
   *
   * The video bitrate in bit/s.
   */
  properties[PROP_BITRATE] = uint_prop ("bitrate", "Bitrate",
      "The video bitrate in bit/s", 10000, G_MAXUINT, DEFAULT_BITRATE);
  /**
   * LegbaCall:width:
   *
   * The width of the video sent.
   */
  properties[PROP_WIDTH] = uint_prop ("width", "Width",
      "The width of the video sent", 16, 7680, DEFAULT_WIDTH);
  /**
   * LegbaCall:height:
   *
   * The height of the video sent.
   */
  properties[PROP_HEIGHT] = uint_prop ("height", "Height",
      "The height of the video sent", 16, 4320, DEFAULT_HEIGHT);
  /**
   * LegbaCall:framerate:
   *
   * Frames per second of the video sent.
   */
  properties[PROP_FRAMERATE] = uint_prop ("framerate", "Frame rate",
      "Frames per second of the video sent", 1, 120, DEFAULT_FRAMERATE);
  /**
   * LegbaCall:display:
   *
   * How received video is shown.
   */
  properties[PROP_DISPLAY] = g_param_spec_enum ("display", "Display",
      "How received video is shown", LEGBA_TYPE_CALL_DISPLAY,
      LEGBA_CALL_DISPLAY_NONE, RW);
  /**
   * LegbaCall:grid-width:
   *
   * The width of the grid's picture.
   */
  properties[PROP_GRID_WIDTH] = uint_prop ("grid-width", "Grid width",
      "The width of the grid's picture", 16, 7680, DEFAULT_GRID_WIDTH);
  /**
   * LegbaCall:grid-height:
   *
   * The height of the grid's picture.
   */
  properties[PROP_GRID_HEIGHT] = uint_prop ("grid-height", "Grid height",
      "The height of the grid's picture", 16, 4320, DEFAULT_GRID_HEIGHT);
  /**
   * LegbaCall:grid-sink:
   *
   * The sink the grid is shown with; `autovideosink` when %NULL.
   */
  properties[PROP_GRID_SINK] = g_param_spec_object ("grid-sink", "Grid sink",
      "The sink showing the grid (autovideosink when none)",
      GST_TYPE_ELEMENT, RW);
  /**
   * LegbaCall:play-audio:
   *
   * Whether received audio is played (display window or grid only).
   */
  properties[PROP_PLAY_AUDIO] = g_param_spec_boolean ("play-audio",
      "Play audio", "Play received audio (display window or grid)", TRUE, RW);
  /**
   * LegbaCall:measure-latency:
   *
   * Stamps each video frame sent with `legbastamp` and reads the stamps of
   * the frames received with `legbastampcheck`, for glass-to-glass
   * latency between participants on one host (docs/instruments.md).
   */
  properties[PROP_MEASURE_LATENCY] = g_param_spec_boolean ("measure-latency",
      "Measure latency", "Stamp frames sent and read the stamps received "
      "(participants on one host)", FALSE, RW);
  /**
   * LegbaCall:stats-interval:
   *
   * Milliseconds between two refreshes of the counters
   * (#LegbaCall::stats-updated); 0 for none.
   */
  properties[PROP_STATS_INTERVAL] = uint_prop ("stats-interval",
      "Stats interval", "Milliseconds between two stats refreshes", 0,
      G_MAXUINT, DEFAULT_STATS_INTERVAL);
  /**
   * LegbaCall:state:
   *
   * Where the call stands.
   */
  properties[PROP_STATE] = g_param_spec_enum ("state", "State",
      "Where the call stands", LEGBA_TYPE_CALL_STATE,
      LEGBA_CALL_STATE_STOPPED, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS |
      G_PARAM_EXPLICIT_NOTIFY);
  g_object_class_install_properties (gobject_class, N_PROPERTIES, properties);

  /**
   * LegbaCall::error:
   * @self: the call
   * @error: what ended the call, in the %LEGBA_CALL_ERROR domain
   *
   * The call failed: the room was left and the pipeline stopped.
   */
  signals[SIGNAL_ERROR] = g_signal_new ("error", G_TYPE_FROM_CLASS (klass),
      G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_ERROR);
  /**
   * LegbaCall::warning:
   * @self: the call
   * @error: the problem
   *
   * A problem the call carries on after: one participant's track that
   * cannot be decoded or shown, a peer connection that could not be made,
   * the signalling connection being made again.
   */
  signals[SIGNAL_WARNING] = g_signal_new ("warning",
      G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
      G_TYPE_NONE, 1, G_TYPE_ERROR);
  /**
   * LegbaCall::participant-joined:
   * @self: the call
   * @participant: the remote participant
   *
   * A remote participant is in the room.
   */
  signals[SIGNAL_PARTICIPANT_JOINED] = g_signal_new ("participant-joined",
      G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
      G_TYPE_NONE, 1, LEGBA_TYPE_PARTICIPANT);
  /**
   * LegbaCall::participant-left:
   * @self: the call
   * @participant: the remote participant
   *
   * A remote participant left (its tracks were removed first).
   */
  signals[SIGNAL_PARTICIPANT_LEFT] = g_signal_new ("participant-left",
      G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
      G_TYPE_NONE, 1, LEGBA_TYPE_PARTICIPANT);
  /**
   * LegbaCall::video-sink-added:
   * @self: the call
   * @participant: the remote participant
   * @sink: its `appsink`, in the call's pipeline
   *
   * With %LEGBA_CALL_DISPLAY_APPSINK: a remote participant's decoded video
   * arrives at @sink. Pull samples from it or connect to its signals.
   */
  signals[SIGNAL_VIDEO_SINK_ADDED] = g_signal_new ("video-sink-added",
      G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
      G_TYPE_NONE, 2, LEGBA_TYPE_PARTICIPANT, GST_TYPE_ELEMENT);
  /**
   * LegbaCall::stats-updated:
   * @self: the call
   *
   * The counters were refreshed (every #LegbaCall:stats-interval).
   */
  signals[SIGNAL_STATS_UPDATED] = g_signal_new ("stats-updated",
      G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
      G_TYPE_NONE, 0);
  /**
   * LegbaCall::data-received:
   * @self: the call
   * @participant: the sender
   * @topic: (nullable): the message's topic
   * @data: (transfer none): the message; valid during the emission only
   *
   * A JSON message arrived over the room's data channels (the room's
   * #LegbaRoom::data-received, kept across legba_call_start()). Send with
   * legba_room_send_json() on legba_call_get_room().
   */
  signals[SIGNAL_DATA_RECEIVED] = g_signal_new ("data-received",
      G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
      G_TYPE_NONE, 3, LEGBA_TYPE_PARTICIPANT,
      G_TYPE_STRING | G_SIGNAL_TYPE_STATIC_SCOPE,
      JSON_TYPE_NODE | G_SIGNAL_TYPE_STATIC_SCOPE);

  GST_DEBUG_CATEGORY_INIT (legba_call_debug, "legbacall", 0, "LegbaCall");
}

static void
legba_call_init (LegbaCall * self)
{
  self->context = g_main_context_ref_thread_default ();
  self->video = LEGBA_CALL_VIDEO_TEST;
  self->audio = LEGBA_CALL_AUDIO_TEST;
  self->bitrate = DEFAULT_BITRATE;
  self->proof_timeout = LEGBA_ENCODER_DEFAULT_PROOF_TIMEOUT_MS;
  self->width = DEFAULT_WIDTH;
  self->height = DEFAULT_HEIGHT;
  self->framerate = DEFAULT_FRAMERATE;
  self->grid_width = DEFAULT_GRID_WIDTH;
  self->grid_height = DEFAULT_GRID_HEIGHT;
  self->play_audio = TRUE;
  self->stats_interval = DEFAULT_STATS_INTERVAL;
  self->remotes = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
      legba_call_remote_free);
  self->order = g_ptr_array_new ();
  g_mutex_init (&self->lock);
}
