/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaCall, the object: its types, properties and signals, its state and
 * how a call fails, the accessors and muting. The pipeline and the call's
 * run (local sources, encoders, tracks, the bus, the local counters,
 * legba_call_start() and legba_call_stop()) are in legba-call-pipeline.c,
 * the receiving side in legba-call-remote.c.
 */
#include <legba/call/legba-call-private.h>

#include <gst/video/video.h>

GST_DEBUG_CATEGORY (legba_call_debug);
#define GST_CAT_DEFAULT legba_call_debug

#define DEFAULT_BITRATE 600000
#define DEFAULT_WIDTH 640
#define DEFAULT_HEIGHT 360
#define DEFAULT_FRAMERATE 30
#define DEFAULT_GRID_WIDTH 1280
#define DEFAULT_GRID_HEIGHT 720
#define DEFAULT_STATS_INTERVAL 1000

/**
 * legba_call_error_quark:
 *
 * Gets the error domain of #LegbaCall, %LEGBA_CALL_ERROR: its errors are
 * from the #LegbaCallError enumeration.
 *
 * Returns: the domain's #GQuark
 */
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
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_DISPLAY_APPSINK, "appsink"),
    G_DEFINE_ENUM_VALUE (LEGBA_CALL_DISPLAY_UNDECODED, "undecoded"));

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
 * Reads the short name of a video source, as `legba-call --video` takes it.
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
 * Reads the short name of an audio source, as `legba-call --audio` takes
 * it.
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
 * Reads the short name of a display mode, as `legba-call --display` takes
 * it.
 *
 * Returns: %TRUE when @name names a #LegbaCallDisplay
 */
gboolean
legba_call_display_from_string (const char *name, LegbaCallDisplay * display)
{
  return enum_from_nick (LEGBA_TYPE_CALL_DISPLAY, name, (gint *) display);
}

/* ---- State and errors ---- */

void
legba_call_set_state (LegbaCall * self, LegbaCallState state)
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

void
legba_call_emit_stats_updated (LegbaCall * self)
{
  g_signal_emit (self, signals[SIGNAL_STATS_UPDATED], 0);
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
  legba_call_teardown (self);
  legba_call_set_state (self, LEGBA_CALL_STATE_FAILED);
  g_signal_emit (self, signals[SIGNAL_ERROR], 0, error);
  g_object_unref (self);
}

void
legba_call_fail (LegbaCall * self, GError * error)
{
  fail (self, error);
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
 * Gets the state of the call, its #LegbaCall:state property.
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
 * Gets the pipeline of the running call, to inspect it or watch its bus. A
 * new pipeline is made by each legba_call_start().
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
 * Tells whether the call's audio is muted (legba_call_set_audio_muted()).
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
 * Tells whether the call's video is muted (legba_call_set_video_muted()).
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

  legba_call_teardown (self);
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
