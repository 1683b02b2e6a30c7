/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaCall, the sending side and the call's run: the pipeline built
 * from the configuration (the local video and audio sources, their
 * encoders and the tracks given to the room), its bus, the local
 * counters and the stats tick, legba_call_start() and legba_call_stop().
 */
#include <legba/call/legba-call-private.h>

#include <string.h>
#include <sys/resource.h>

GST_DEBUG_CATEGORY_EXTERN (legba_call_debug);
#define GST_CAT_DEFAULT legba_call_debug

void
legba_call_teardown (LegbaCall * self)
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
  g_clear_object (&self->audio_encoder);
  g_clear_object (&self->compositor);
  g_clear_object (&self->pipeline);
  g_clear_object (&self->client);
  legba_call_release_display (self);
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

  /* a received stream's jitter buffer changed its latency
   * (LegbaRoom:max-latency): the synced displays wait as much more */
  if (GST_MESSAGE_TYPE (message) == GST_MESSAGE_LATENCY &&
      self->pipeline != NULL) {
    gst_bin_recalculate_latency (GST_BIN (self->pipeline));
    return G_SOURCE_CONTINUE;
  }
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
  legba_call_fail (self, error);
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

/* `legba-packet-loss` (upstream, custom, from the room): the highest
 * loss the receivers of the audio report, in percent; opusenc sizes its
 * in-band FEC for it. Runs on the thread that pushed the event (the
 * room's context); opusenc takes the property while it runs. */
static GstPadProbeReturn
on_packet_loss (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  GstElement *enc = data;
  const GstStructure *s =
      gst_event_get_structure (GST_PAD_PROBE_INFO_EVENT (info));
  guint percentage;

  if (GST_EVENT_TYPE (GST_PAD_PROBE_INFO_EVENT (info)) !=
      GST_EVENT_CUSTOM_UPSTREAM || s == NULL ||
      !gst_structure_has_name (s, "legba-packet-loss") ||
      !gst_structure_get_uint (s, "percentage", &percentage))
    return GST_PAD_PROBE_OK;
  g_object_set (enc, "packet-loss-percentage", (gint) MIN (percentage, 100),
      NULL);
  /* taken here: the room need not send it again */
  gst_event_unref (GST_PAD_PROBE_INFO_EVENT (info));
  return GST_PAD_PROBE_HANDLED;
}

static void
follow_packet_loss (LegbaCall * self, GstElement * bin)
{
  GstPad *src;

  self->audio_encoder = gst_bin_get_by_name (GST_BIN (bin), "enc");
  src = gst_element_get_static_pad (self->audio_encoder, "src");
  gst_pad_add_probe (src, GST_PAD_PROBE_TYPE_EVENT_UPSTREAM, on_packet_loss,
      self->audio_encoder, NULL);
  gst_object_unref (src);
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
  else
    follow_packet_loss (self, bin);
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

/* Opus for a voice, mono, as libwebrtc sends it: 32 kbit/s, half of
 * opusenc's default, which at a 300 kbit/s bottleneck would take a
 * third of the link from the video. In-band FEC on: each packet carries
 * a coarser copy of the one before, as much as the loss that the room
 * reports asks (packet-loss-percentage, follow_packet_loss()). */
#define AUDIO_BITRATE 32000

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
      "opusenc name=enc bitrate=%d inband-fec=true",
      self->audio ==
      LEGBA_CALL_AUDIO_TEST ?
      "audiotestsrc is-live=true wave=sine volume=0.2 samplesperbuffer=960" :
      "autoaudiosrc", self->muted[LEGBA_TRACK_KIND_AUDIO] ? "true" : "false",
      AUDIO_BITRATE);
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
  legba_call_emit_stats_updated (self);
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
 * Threads an encoder names otherwise are not counted), and with audio,
 * `audio-packet-loss-percentage` (int, what the Opus encoder's in-band
 * FEC is sized for: the highest loss the receivers of the audio report,
 * smoothed; 0 without congestion control, docs/congestion-control.md).
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
  if (self->audio_encoder != NULL) {
    gint percentage = 0;

    g_object_get (self->audio_encoder, "packet-loss-percentage", &percentage,
        NULL);
    gst_structure_set (s, "audio-packet-loss-percentage", G_TYPE_INT,
        percentage, NULL);
  }
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
      legba_call_set_state (self, LEGBA_CALL_STATE_IN_CALL);
    } else {
      GError *e = g_error_new (LEGBA_CALL_ERROR, from_room_error (error),
          "%s", error->message);

      legba_call_fail (self, e);
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
    legba_call_teardown (self);
    return FALSE;
  }
  self->last_stats_time = g_get_monotonic_time ();
  self->last_cpu_us = cpu_time_us ();
  if (self->stats_interval > 0) {
    self->stats_source = g_timeout_source_new (self->stats_interval);
    g_source_set_callback (self->stats_source, on_stats_tick, self, NULL);
    g_source_attach (self->stats_source, self->context);
  }
  legba_call_set_state (self, LEGBA_CALL_STATE_STARTING);
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
  legba_call_teardown (self);
  legba_call_set_state (self, LEGBA_CALL_STATE_STOPPED);
}
