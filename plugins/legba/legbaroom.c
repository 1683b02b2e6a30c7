/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * SECTION:element-legbaroom
 * @title: legbaroom
 *
 * Makes a pipeline one participant of a Legba room: it joins the room
 * through a Pusher-protocol signalling server (legba-server, or any
 * conforming one), sends what it is given to every other participant and
 * hands out what each of them sends, over one WebRTC peer connection per
 * participant (a mesh). All the logic lives in #LegbaRoom (the
 * #GstLegbaRoom:legba-room property); the element is its plumbing.
 *
 * Request sink pads `video_%u` (H.264 byte-stream access units,
 * constrained baseline, or VP8) and `audio_%u` (Opus) take encoded
 * streams: each is encoded once upstream and sent to every participant.
 * Version 1 of the room protocol carries one video and one audio stream
 * per participant: a second request of a kind fails. Key-frame requests
 * from peers (PLI/FIR, newcomers) go upstream as force-key-unit events, at
 * most one per 100 ms (a request that comes sooner is held back until
 * then, never lost).
 *
 * Sometimes source pads `recv_video_%u` and `recv_audio_%u`, numbered in
 * arrival order, carry each participant's depayloaded encoded stream; each
 * has a `participant-id` property and is removed when the participant
 * leaves. A source pad nobody links discards its data: it never stops the
 * room or the other pads.
 *
 * The element posts element messages: `legba-participant-joined` and
 * `legba-participant-left` (fields `participant-id`, `identity`, `name`)
 * and `legba-room-state` (field `state`: disconnected, connecting,
 * connected, reconnecting, failed). Errors (server unreachable, refused
 * credentials, full room, missing webrtcbin or nice plugin) are posted as
 * GStreamer errors; problems the room recovers from (a lost signalling
 * connection, a peer that could not be reached) as warnings.
 *
 * The room runs on a thread of its own with its own GMainContext, so
 * gst-launch-1.0 and applications that never run a GLib main loop work.
 * The signals of #GstLegbaRoom:legba-room are emitted on that thread.
 *
 * The room reaches the network through #GstLegbaRoom:signaller, any
 * #LegbaSignaller: by default a #LegbaSignalClient, made with the element,
 * which speaks the Pusher protocol. Its settings are reachable from a
 * launch line as those of the element's child named `signaller`
 * (#GstChildProxy): `signaller::server-url=ws://...`. The element's own
 * `server-url`, `app-key`, `app-secret`, `app-id`, `auth-url` and `token`
 * are the same settings of the signaller under shorter names; `room`,
 * `identity`, `display-name`, `stun-server`, `turn-server`, `latency`,
 * `max-latency`, `max-participants` and `congestion-control` are
 * #LegbaRoom's, applied to the room each time the element joins. Each comes with the description, range and default of
 * the property it stands for.
 *
 * ## Example launch lines
 * A sender:
 * |[
 * gst-launch-1.0 videotestsrc is-live=true ! x264enc tune=zerolatency \
 *     ! legbaroom name=r server-url=ws://127.0.0.1:6001 app-key=KEY \
 *       app-secret=SECRET room=demo identity=alice \
 *     audiotestsrc is-live=true ! opusenc ! r.
 * ]|
 * A receiver, showing the first participant's video, with the
 * signaller's settings named through the child proxy:
 * |[
 * gst-launch-1.0 legbaroom name=r signaller::server-url=ws://127.0.0.1:6001 \
 *       signaller::app-key=KEY signaller::app-secret=SECRET room=demo \
 *       identity=bob \
 *     r. ! video/x-h264 ! decodebin ! autovideosink
 * ]|
 */
#include "legba-elements.h"
#include "legba-context-call.h"

#include <legba/legba.h>

GST_DEBUG_CATEGORY_STATIC (legba_room_element_debug);
#define GST_CAT_DEFAULT legba_room_element_debug

/* ---- The source pads: a ghost pad that names its participant ---- */

#define GST_TYPE_LEGBA_ROOM_PAD (gst_legba_room_pad_get_type ())
G_DECLARE_FINAL_TYPE (GstLegbaRoomPad, gst_legba_room_pad, GST,
    LEGBA_ROOM_PAD, GstGhostPad);

struct _GstLegbaRoomPad
{
  GstGhostPad parent;
  char *participant_id;
};

G_DEFINE_FINAL_TYPE (GstLegbaRoomPad, gst_legba_room_pad, GST_TYPE_GHOST_PAD);

enum
{
  PAD_PROP_0,
  PAD_PROP_PARTICIPANT_ID,
};

static void
gst_legba_room_pad_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstLegbaRoomPad *self = GST_LEGBA_ROOM_PAD (object);

  if (prop_id == PAD_PROP_PARTICIPANT_ID)
    g_value_set_string (value, self->participant_id);
  else
    G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
}

static void
gst_legba_room_pad_finalize (GObject * object)
{
  g_free (GST_LEGBA_ROOM_PAD (object)->participant_id);
  G_OBJECT_CLASS (gst_legba_room_pad_parent_class)->finalize (object);
}

static void
gst_legba_room_pad_class_init (GstLegbaRoomPadClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);

  gobject_class->get_property = gst_legba_room_pad_get_property;
  gobject_class->finalize = gst_legba_room_pad_finalize;
  g_object_class_install_property (gobject_class, PAD_PROP_PARTICIPANT_ID,
      g_param_spec_string ("participant-id", "Participant id",
          "The participant whose stream this pad carries (IDENTITY-SUFFIX)",
          NULL, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
}

static void
gst_legba_room_pad_init (GstLegbaRoomPad * self)
{
}

/* ---- The element ---- */

#define GST_TYPE_LEGBA_ROOM (gst_legba_room_get_type ())
G_DECLARE_FINAL_TYPE (GstLegbaRoom, gst_legba_room, GST, LEGBA_ROOM, GstBin);

/* LegbaRoom's settings: the element keeps their values and applies them
 * to its room on each join */
static const char *const room_settings[] = {
  "room", "identity", "display-name", "stun-server", "turn-server",
  "latency", "max-latency", "max-participants", "congestion-control",
};

#define N_ROOM_SETTINGS G_N_ELEMENTS (room_settings)

/* LegbaSignalClient's settings: set on and read from the signaller */
static const char *const signaller_settings[] = {
  "server-url", "app-key", "app-secret", "app-id", "auth-url", "token",
};

#define N_SIGNALLER_SETTINGS G_N_ELEMENTS (signaller_settings)

enum
{
  PROP_0,
  PROP_SIGNALLER,
  PROP_LEGBA_ROOM,
  PROP_ROOM_SETTING,
  PROP_SIGNALLER_SETTING = PROP_ROOM_SETTING + N_ROOM_SETTINGS,
  N_PROPERTIES = PROP_SIGNALLER_SETTING + N_SIGNALLER_SETTINGS
};

struct _GstLegbaRoom
{
  GstBin parent;

  /* properties (object lock) */
  LegbaSignaller *signaller;
  GValue room_values[N_ROOM_SETTINGS];

  /* the room's thread; started once, stopped when the element goes */
  GMutex thread_lock;
  GThread *thread;
  GMainContext *context;
  GMainLoop *loop;
  /* made, used and released on the room's thread */
  LegbaRoom *room;
  GHashTable *src_pads;         /* the room's track pad -> our ghost pad */
  guint recv_count[2];
  /* request pads (state lock of the element: requests and releases) */
  GstPad *sinks[2];
};

static void gst_legba_room_child_proxy_init (GstChildProxyInterface * iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (GstLegbaRoom, gst_legba_room, GST_TYPE_BIN,
    G_IMPLEMENT_INTERFACE (GST_TYPE_CHILD_PROXY,
        gst_legba_room_child_proxy_init));
GST_ELEMENT_REGISTER_DEFINE (legbaroom, "legbaroom", GST_RANK_NONE,
    GST_TYPE_LEGBA_ROOM);

static GParamSpec *properties[N_PROPERTIES];

static GstStaticPadTemplate video_sink_template =
GST_STATIC_PAD_TEMPLATE ("video_%u", GST_PAD_SINK, GST_PAD_REQUEST,
    GST_STATIC_CAPS (LEGBA_ROOM_VIDEO_CAPS));
static GstStaticPadTemplate audio_sink_template =
GST_STATIC_PAD_TEMPLATE ("audio_%u", GST_PAD_SINK, GST_PAD_REQUEST,
    GST_STATIC_CAPS (LEGBA_ROOM_AUDIO_CAPS));
static GstStaticPadTemplate video_src_template =
    GST_STATIC_PAD_TEMPLATE ("recv_video_%u", GST_PAD_SRC, GST_PAD_SOMETIMES,
    GST_STATIC_CAPS ("video/x-h264, stream-format = (string) byte-stream, "
        "alignment = (string) au; video/x-vp8"));
static GstStaticPadTemplate audio_src_template =
GST_STATIC_PAD_TEMPLATE ("recv_audio_%u", GST_PAD_SRC, GST_PAD_SOMETIMES,
    GST_STATIC_CAPS ("audio/x-opus"));

static const char *const kind_names[] = { "video", "audio" };

/* ---- Running things on the room's thread ---- */

/* Runs func (self, data) on the room's thread and waits for it. The
 * room's thread never waits for another thread, so this cannot
 * deadlock. */
static gpointer
run_on_room_thread (GstLegbaRoom * self, LegbaContextFunc func, gpointer data)
{
  return legba_context_run (self->context, self, func, data);
}

static void
post_room_error (GstLegbaRoom * self, const GError * error, gboolean fatal)
{
  if (!fatal) {
    GST_ELEMENT_WARNING (self, RESOURCE, FAILED, ("%s", error->message),
        (NULL));
    return;
  }
  switch (error->domain == LEGBA_ROOM_ERROR ? error->code : -1) {
    case LEGBA_ROOM_ERROR_UNREACHABLE:
      GST_ELEMENT_ERROR (self, RESOURCE, OPEN_READ_WRITE, ("%s",
              error->message), (NULL));
      break;
    case LEGBA_ROOM_ERROR_REFUSED:
      GST_ELEMENT_ERROR (self, RESOURCE, NOT_AUTHORIZED, ("%s",
              error->message), (NULL));
      break;
    case LEGBA_ROOM_ERROR_FULL:
      GST_ELEMENT_ERROR (self, RESOURCE, BUSY, ("%s", error->message), (NULL));
      break;
    case LEGBA_ROOM_ERROR_MISSING_PLUGIN:
      GST_ELEMENT_ERROR (self, CORE, MISSING_PLUGIN, ("%s", error->message),
          (NULL));
      break;
    case LEGBA_ROOM_ERROR_INVALID:
      GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS, ("%s", error->message),
          (NULL));
      break;
    default:
      GST_ELEMENT_ERROR (self, RESOURCE, FAILED, ("%s", error->message),
          (NULL));
  }
}

static void
post_participant (GstLegbaRoom * self, const char *name,
    LegbaParticipant * participant)
{
  GstStructure *s = gst_structure_new (name,
      "participant-id", G_TYPE_STRING, legba_participant_get_id (participant),
      "identity", G_TYPE_STRING, legba_participant_get_identity (participant),
      "name", G_TYPE_STRING, legba_participant_get_name (participant), NULL);

  gst_element_post_message (GST_ELEMENT (self),
      gst_message_new_element (GST_OBJECT (self), s));
}

/* ---- The room's signals, on its thread ---- */

static void
on_participant_joined (LegbaRoom * room, LegbaParticipant * participant,
    GstLegbaRoom * self)
{
  post_participant (self, "legba-participant-joined", participant);
}

static void
on_participant_left (LegbaRoom * room, LegbaParticipant * participant,
    GstLegbaRoom * self)
{
  post_participant (self, "legba-participant-left", participant);
}

static void
on_state (LegbaRoom * room, GParamSpec * pspec, GstLegbaRoom * self)
{
  GEnumClass *klass = g_type_class_ref (LEGBA_TYPE_ROOM_STATE);
  GEnumValue *value = g_enum_get_value (klass, legba_room_get_state (room));
  GstStructure *s = gst_structure_new ("legba-room-state", "state",
      G_TYPE_STRING, value ? value->value_nick : "unknown", NULL);

  g_type_class_unref (klass);
  gst_element_post_message (GST_ELEMENT (self),
      gst_message_new_element (GST_OBJECT (self), s));
}

static void
on_error (LegbaRoom * room, GError * error, GstLegbaRoom * self)
{
  post_room_error (self, error,
      legba_room_get_state (room) == LEGBA_ROOM_STATE_FAILED);
}

static void
on_track_added (LegbaRoom * room, LegbaParticipant * participant,
    LegbaTrackKind kind, GstPad * pad, GstLegbaRoom * self)
{
  GstElementClass *klass = GST_ELEMENT_GET_CLASS (self);
  g_autofree char *name = g_strdup_printf ("recv_%s_%u", kind_names[kind],
      self->recv_count[kind]++);
  GstPadTemplate *templ = gst_element_class_get_pad_template (klass,
      kind == LEGBA_TRACK_KIND_VIDEO ? "recv_video_%u" : "recv_audio_%u");
  GstPad *ghost = g_object_new (GST_TYPE_LEGBA_ROOM_PAD, "name", name,
      "direction", GST_PAD_SRC, "template", templ, NULL);

  GST_LEGBA_ROOM_PAD (ghost)->participant_id =
      g_strdup (legba_participant_get_id (participant));
  /* active before it is targeted: the stream is already flowing, and an
   * inactive pad would refuse its events (an error upstream) */
  gst_pad_set_active (ghost, TRUE);
  gst_ghost_pad_set_target (GST_GHOST_PAD (ghost), pad);
  g_hash_table_insert (self->src_pads, gst_object_ref (pad),
      gst_object_ref (ghost));
  GST_INFO_OBJECT (self, "%s: %s of %s", name, kind_names[kind],
      legba_participant_get_id (participant));
  gst_element_add_pad (GST_ELEMENT (self), ghost);
}

static void
on_track_removed (LegbaRoom * room, LegbaParticipant * participant,
    LegbaTrackKind kind, GstPad * pad, GstLegbaRoom * self)
{
  GstPad *ghost = g_hash_table_lookup (self->src_pads, pad);

  if (ghost == NULL)
    return;
  GST_INFO_OBJECT (self, "removing %" GST_PTR_FORMAT, ghost);
  gst_ghost_pad_set_target (GST_GHOST_PAD (ghost), NULL);
  gst_element_remove_pad (GST_ELEMENT (self), ghost);
  g_hash_table_remove (self->src_pads, pad);
}

/* ---- The room's thread ---- */

static gpointer
room_thread (gpointer data)
{
  GstLegbaRoom *self = data;

  g_main_context_push_thread_default (self->context);
  g_main_loop_run (self->loop);
  /* what the room left queued (closed sockets, idle callbacks) */
  while (g_main_context_iteration (self->context, FALSE));
  g_main_context_pop_thread_default (self->context);
  return NULL;
}

static void
new_room (GstLegbaRoom * self)
{
  LegbaSignaller *signaller;

  GST_OBJECT_LOCK (self);
  signaller = g_object_ref (self->signaller);
  GST_OBJECT_UNLOCK (self);
  self->room = legba_room_new (signaller, GST_BIN (self));
  g_object_unref (signaller);
  g_signal_connect (self->room, "participant-joined",
      G_CALLBACK (on_participant_joined), self);
  g_signal_connect (self->room, "participant-left",
      G_CALLBACK (on_participant_left), self);
  g_signal_connect (self->room, "notify::state", G_CALLBACK (on_state), self);
  g_signal_connect (self->room, "error", G_CALLBACK (on_error), self);
  g_signal_connect (self->room, "track-added", G_CALLBACK (on_track_added),
      self);
  g_signal_connect (self->room, "track-removed",
      G_CALLBACK (on_track_removed), self);
}

static gpointer
make_room (gpointer object, gpointer data)
{
  GstLegbaRoom *self = object;

  self->src_pads = g_hash_table_new_full (NULL, NULL, gst_object_unref,
      gst_object_unref);
  new_room (self);
  return NULL;
}

/* The signaller changed (the element is not joined): a room for it takes
 * the old one's place, and the request pads' tracks move to it. */
static gpointer
replace_room (gpointer object, gpointer data)
{
  GstLegbaRoom *self = object;
  LegbaRoom *old = self->room;

  g_signal_handlers_disconnect_by_data (old, self);
  legba_room_disconnect (old);
  for (LegbaTrackKind kind = 0; kind < 2; kind++) {
    if (self->sinks[kind] == NULL)
      continue;
    gst_ghost_pad_set_target (GST_GHOST_PAD (self->sinks[kind]), NULL);
    legba_room_remove_track (old, kind);
  }
  g_object_unref (old);
  new_room (self);
  for (LegbaTrackKind kind = 0; kind < 2; kind++) {
    g_autoptr (GError) error = NULL;
    g_autoptr (GstPad) target = NULL;

    if (self->sinks[kind] == NULL)
      continue;
    target = legba_room_add_track (self->room, kind, &error);
    if (target == NULL)
      GST_ELEMENT_WARNING (self, STREAM, FAILED, ("%s", error->message),
          (NULL));
    else
      gst_ghost_pad_set_target (GST_GHOST_PAD (self->sinks[kind]), target);
  }
  return NULL;
}

/* The room and its thread, made on first need. */
static void
ensure_room (GstLegbaRoom * self)
{
  g_mutex_lock (&self->thread_lock);
  if (self->thread == NULL) {
    self->context = g_main_context_new ();
    self->loop = g_main_loop_new (self->context, FALSE);
    self->thread = g_thread_new ("legbaroom", room_thread, self);
    run_on_room_thread (self, make_room, NULL);
  }
  g_mutex_unlock (&self->thread_lock);
}

static gpointer
release_room (gpointer object, gpointer data)
{
  GstLegbaRoom *self = object;

  g_signal_handlers_disconnect_by_data (self->room, self);
  legba_room_disconnect (self->room);
  g_clear_object (&self->room);
  g_clear_pointer (&self->src_pads, g_hash_table_unref);
  g_main_loop_quit (self->loop);
  return NULL;
}

static void
stop_room (GstLegbaRoom * self)
{
  if (self->thread == NULL)
    return;
  run_on_room_thread (self, release_room, NULL);
  if (g_thread_self () != self->thread)
    g_thread_join (self->thread);
  else
    g_thread_unref (self->thread);
  self->thread = NULL;
  g_clear_pointer (&self->loop, g_main_loop_unref);
  g_clear_pointer (&self->context, g_main_context_unref);
}

/* ---- Joining and leaving ---- */

static void
on_connected (GObject * object, GAsyncResult * result, gpointer data)
{
  GstLegbaRoom *self = data;
  g_autoptr (GError) error = NULL;

  if (!legba_room_connect_finish (LEGBA_ROOM (object), result, &error) &&
      !g_error_matches (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_CLOSED))
    post_room_error (self, error, TRUE);
  gst_object_unref (self);
}

static gpointer
connect_room (gpointer object, gpointer data)
{
  GstLegbaRoom *self = object;
  GValue values[N_ROOM_SETTINGS] = { G_VALUE_INIT };

  GST_OBJECT_LOCK (self);
  for (guint i = 0; i < N_ROOM_SETTINGS; i++) {
    g_value_init (&values[i], G_VALUE_TYPE (&self->room_values[i]));
    g_value_copy (&self->room_values[i], &values[i]);
  }
  GST_OBJECT_UNLOCK (self);

  g_object_setv (G_OBJECT (self->room), N_ROOM_SETTINGS,
      (const char **) room_settings, values);
  for (guint i = 0; i < N_ROOM_SETTINGS; i++)
    g_value_unset (&values[i]);
  legba_room_connect_async (self->room, NULL, on_connected,
      gst_object_ref (self));
  return NULL;
}

static gpointer
disconnect_room (gpointer object, gpointer data)
{
  GstLegbaRoom *self = object;

  legba_room_disconnect (self->room);
  return NULL;
}

/* The room's own settings; the signaller checks its own when it joins. */
static gboolean
check_settings (GstLegbaRoom * self)
{
  const char *missing = NULL;

  GST_OBJECT_LOCK (self);
  /* room and identity, the first two room settings */
  for (guint i = 0; i < 2 && missing == NULL; i++)
    if (g_value_get_string (&self->room_values[i]) == NULL)
      missing = room_settings[i];
  GST_OBJECT_UNLOCK (self);
  if (missing != NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS,
        ("legbaroom needs the %s property to join a room", missing), (NULL));
    return FALSE;
  }
  return TRUE;
}

static gboolean
check_plugins (GstLegbaRoom * self)
{
  static const char *const needed[][2] = {
    {"webrtcbin", "the webrtc plugin (gst-plugins-bad)"},
    {"nicesrc", "the nice plugin (gstreamer1.0-nice)"},
  };

  for (guint i = 0; i < G_N_ELEMENTS (needed); i++) {
    g_autoptr (GstElementFactory) factory =
        gst_element_factory_find (needed[i][0]);

    if (factory == NULL) {
      GST_ELEMENT_ERROR (self, CORE, MISSING_PLUGIN,
          ("The GStreamer element %s is missing: install %s", needed[i][0],
              needed[i][1]), (NULL));
      return FALSE;
    }
  }
  return TRUE;
}

static GstStateChangeReturn
gst_legba_room_change_state (GstElement * element, GstStateChange transition)
{
  GstLegbaRoom *self = GST_LEGBA_ROOM (element);
  GstStateChangeReturn ret;

  switch (transition) {
    case GST_STATE_CHANGE_NULL_TO_READY:
      if (!check_plugins (self))
        return GST_STATE_CHANGE_FAILURE;
      ensure_room (self);
      /* the process's one-time work, while the pipeline goes on to join */
      legba_room_prepare ();
      break;
    case GST_STATE_CHANGE_READY_TO_PAUSED:
      if (!check_settings (self))
        return GST_STATE_CHANGE_FAILURE;
      break;
    case GST_STATE_CHANGE_PAUSED_TO_READY:
      run_on_room_thread (self, disconnect_room, NULL);
      break;
    default:
      break;
  }

  ret = GST_ELEMENT_CLASS (gst_legba_room_parent_class)->change_state (element,
      transition);
  if (ret == GST_STATE_CHANGE_FAILURE)
    return ret;

  switch (transition) {
    case GST_STATE_CHANGE_READY_TO_PAUSED:
      run_on_room_thread (self, connect_room, NULL);
      /* live: what the room produces depends on others, not on preroll */
      ret = GST_STATE_CHANGE_NO_PREROLL;
      break;
    case GST_STATE_CHANGE_PLAYING_TO_PAUSED:
      ret = GST_STATE_CHANGE_NO_PREROLL;
      break;
    default:
      break;
  }
  return ret;
}

/* ---- Request pads ---- */

typedef struct
{
  LegbaTrackKind kind;
  GError *error;
} TrackRequest;

static gpointer
add_track (gpointer object, gpointer data)
{
  GstLegbaRoom *self = object;
  TrackRequest *request = data;

  return legba_room_add_track (self->room, request->kind, &request->error);
}

static gpointer
remove_track (gpointer object, gpointer data)
{
  GstLegbaRoom *self = object;

  legba_room_remove_track (self->room, GPOINTER_TO_INT (data));
  return NULL;
}

static GstPad *
gst_legba_room_request_new_pad (GstElement * element, GstPadTemplate * templ,
    const char *name, const GstCaps * caps)
{
  GstLegbaRoom *self = GST_LEGBA_ROOM (element);
  TrackRequest request = { 0, NULL };
  g_autofree char *pad_name = NULL;
  GstPad *target, *ghost;

  request.kind = g_str_has_prefix (GST_PAD_TEMPLATE_NAME_TEMPLATE (templ),
      "video") ? LEGBA_TRACK_KIND_VIDEO : LEGBA_TRACK_KIND_AUDIO;
  if (self->sinks[request.kind] != NULL) {
    GST_ELEMENT_WARNING (self, STREAM, WRONG_TYPE,
        ("legbaroom sends one %s stream per participant (room protocol "
            "version 1), and pad %s already takes it",
            kind_names[request.kind], GST_PAD_NAME (self->sinks[request.kind])),
        (NULL));
    return NULL;
  }
  ensure_room (self);
  target = run_on_room_thread (self, add_track, &request);
  if (target == NULL) {
    GST_ELEMENT_WARNING (self, STREAM, FAILED, ("%s",
            request.error->message), (NULL));
    g_clear_error (&request.error);
    return NULL;
  }
  pad_name = g_strdup_printf ("%s_0", kind_names[request.kind]);
  ghost = gst_ghost_pad_new_from_template (pad_name, target, templ);
  gst_object_unref (target);
  gst_pad_set_active (ghost, TRUE);
  self->sinks[request.kind] = ghost;
  gst_element_add_pad (element, ghost);
  return ghost;
}

static void
gst_legba_room_release_pad (GstElement * element, GstPad * pad)
{
  GstLegbaRoom *self = GST_LEGBA_ROOM (element);

  for (LegbaTrackKind kind = 0; kind < 2; kind++) {
    if (self->sinks[kind] != pad)
      continue;
    self->sinks[kind] = NULL;
    gst_ghost_pad_set_target (GST_GHOST_PAD (pad), NULL);
    gst_element_remove_pad (element, pad);
    /* when the element goes, its room went first */
    if (self->thread != NULL)
      run_on_room_thread (self, remove_track, GINT_TO_POINTER (kind));
  }
}

/* ---- The signaller ---- */

static void
set_signaller (GstLegbaRoom * self, LegbaSignaller * signaller)
{
  LegbaSignaller *old;

  if (signaller == NULL)
    signaller = LEGBA_SIGNALLER (legba_signal_client_new (NULL, NULL));
  else
    g_object_ref (signaller);
  GST_OBJECT_LOCK (self);
  if (GST_STATE (self) > GST_STATE_READY || GST_STATE_PENDING (self) >
      GST_STATE_READY) {
    GST_OBJECT_UNLOCK (self);
    g_warning ("%s: the signaller can only be changed in the NULL or READY "
        "state", GST_OBJECT_NAME (self));
    g_object_unref (signaller);
    return;
  }
  old = self->signaller;
  self->signaller = signaller;
  GST_OBJECT_UNLOCK (self);
  g_clear_object (&old);
  g_mutex_lock (&self->thread_lock);
  if (self->thread != NULL)
    run_on_room_thread (self, replace_room, NULL);
  g_mutex_unlock (&self->thread_lock);
}

static LegbaSignaller *
dup_signaller (GstLegbaRoom * self)
{
  LegbaSignaller *signaller;

  GST_OBJECT_LOCK (self);
  signaller = g_object_ref (self->signaller);
  GST_OBJECT_UNLOCK (self);
  return signaller;
}

/* A setting of LegbaSignalClient's; a signaller without it has none. */
static GParamSpec *
find_signaller_setting (GstLegbaRoom * self, LegbaSignaller * signaller,
    GParamSpec * pspec)
{
  GParamSpec *own = g_object_class_find_property (G_OBJECT_GET_CLASS
      (signaller), pspec->name);

  if (own == NULL || own->value_type != pspec->value_type) {
    GST_WARNING_OBJECT (self, "the signaller, a %s, has no %s",
        G_OBJECT_TYPE_NAME (signaller), pspec->name);
    return NULL;
  }
  return own;
}

static GstChildProxyInterface *bin_child_proxy;

/* The signaller is the child named "signaller" (as webrtcsink's); the
 * other children are the bin's */
static GObject *
gst_legba_room_get_child_by_name (GstChildProxy * proxy, const char *name)
{
  if (g_strcmp0 (name, "signaller") == 0)
    return G_OBJECT (dup_signaller (GST_LEGBA_ROOM (proxy)));
  return bin_child_proxy->get_child_by_name (proxy, name);
}

static void
gst_legba_room_child_proxy_init (GstChildProxyInterface * iface)
{
  bin_child_proxy = g_type_interface_peek_parent (iface);
  iface->get_child_by_name = gst_legba_room_get_child_by_name;
}

/* ---- GObject ---- */

static void
gst_legba_room_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstLegbaRoom *self = GST_LEGBA_ROOM (object);

  if (prop_id == PROP_SIGNALLER) {
    set_signaller (self, g_value_get_object (value));
  } else if (prop_id >= PROP_SIGNALLER_SETTING && prop_id < N_PROPERTIES) {
    g_autoptr (LegbaSignaller) signaller = dup_signaller (self);
    GParamSpec *own = find_signaller_setting (self, signaller, pspec);

    if (own != NULL)
      g_object_set_property (G_OBJECT (signaller), own->name, value);
  } else if (prop_id >= PROP_ROOM_SETTING) {
    GST_OBJECT_LOCK (self);
    g_value_copy (value, &self->room_values[prop_id - PROP_ROOM_SETTING]);
    GST_OBJECT_UNLOCK (self);
  } else {
    G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
}

static void
gst_legba_room_get_property (GObject * object, guint prop_id, GValue * value,
    GParamSpec * pspec)
{
  GstLegbaRoom *self = GST_LEGBA_ROOM (object);

  if (prop_id == PROP_SIGNALLER) {
    g_value_take_object (value, dup_signaller (self));
  } else if (prop_id == PROP_LEGBA_ROOM) {
    ensure_room (self);
    g_value_set_object (value, self->room);
  } else if (prop_id >= PROP_SIGNALLER_SETTING && prop_id < N_PROPERTIES) {
    g_autoptr (LegbaSignaller) signaller = dup_signaller (self);
    GParamSpec *own = find_signaller_setting (self, signaller, pspec);

    if (own != NULL)
      g_object_get_property (G_OBJECT (signaller), own->name, value);
    else
      g_param_value_set_default (pspec, value);
  } else if (prop_id >= PROP_ROOM_SETTING) {
    GST_OBJECT_LOCK (self);
    g_value_copy (&self->room_values[prop_id - PROP_ROOM_SETTING], value);
    GST_OBJECT_UNLOCK (self);
  } else {
    G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
}

static void
gst_legba_room_dispose (GObject * object)
{
  GstLegbaRoom *self = GST_LEGBA_ROOM (object);

  stop_room (self);
  g_clear_object (&self->signaller);
  G_OBJECT_CLASS (gst_legba_room_parent_class)->dispose (object);
}

static void
gst_legba_room_finalize (GObject * object)
{
  GstLegbaRoom *self = GST_LEGBA_ROOM (object);

  for (guint i = 0; i < N_ROOM_SETTINGS; i++)
    g_value_unset (&self->room_values[i]);
  g_mutex_clear (&self->thread_lock);
  G_OBJECT_CLASS (gst_legba_room_parent_class)->finalize (object);
}

/* A property of the element's that stands for the property source of
 * another class: same name, nick, blurb, range and default. */
static GParamSpec *
copy_pspec (GParamSpec * source, GParamFlags flags)
{
  const char *name = g_param_spec_get_name (source);
  const char *nick = g_param_spec_get_nick (source);
  const char *blurb = g_param_spec_get_blurb (source);

  if (G_IS_PARAM_SPEC_STRING (source))
    return g_param_spec_string (name, nick, blurb,
        G_PARAM_SPEC_STRING (source)->default_value, flags);
  if (G_IS_PARAM_SPEC_UINT (source)) {
    GParamSpecUInt *u = G_PARAM_SPEC_UINT (source);

    return g_param_spec_uint (name, nick, blurb, u->minimum, u->maximum,
        u->default_value, flags);
  }
  if (G_IS_PARAM_SPEC_BOOLEAN (source))
    return g_param_spec_boolean (name, nick, blurb,
        G_PARAM_SPEC_BOOLEAN (source)->default_value, flags);
  g_return_val_if_reached (NULL);
}

static void
install_copies (GObjectClass * gobject_class, GType source_type,
    const char *const *names, guint n, guint first_id)
{
  GObjectClass *source = g_type_class_ref (source_type);

  for (guint i = 0; i < n; i++) {
    GParamSpec *pspec = g_object_class_find_property (source, names[i]);

    g_assert (pspec != NULL);
    properties[first_id + i] = copy_pspec (pspec, G_PARAM_READWRITE |
        GST_PARAM_MUTABLE_READY);
  }
  g_type_class_unref (source);
}

static void
gst_legba_room_class_init (GstLegbaRoomClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);

  GST_DEBUG_CATEGORY_INIT (legba_room_element_debug, "legbaroomelement", 0,
      "legbaroom element");

  gobject_class->set_property = gst_legba_room_set_property;
  gobject_class->get_property = gst_legba_room_get_property;
  gobject_class->dispose = gst_legba_room_dispose;
  gobject_class->finalize = gst_legba_room_finalize;
  element_class->change_state = gst_legba_room_change_state;
  element_class->request_new_pad = gst_legba_room_request_new_pad;
  element_class->release_pad = gst_legba_room_release_pad;

  /**
   * GstLegbaRoom:signaller:
   *
   * How the room reaches the network: any #LegbaSignaller, by default a
   * #LegbaSignalClient made with the element (setting %NULL makes a new
   * one). The element joins from its own thread: give it a signaller
   * that runs on the context of the thread that first joins, as
   * #LegbaSignalClient does. Its settings are those of the child named
   * `signaller` (`signaller::server-url=...` on a launch line). Set it in
   * the NULL or READY state, before the signaller's settings.
   */
  properties[PROP_SIGNALLER] = g_param_spec_object ("signaller", "Signaller",
      "How the room reaches the network: any LegbaSignaller (default: a "
      "LegbaSignalClient; its settings are the child signaller's, "
      "signaller::server-url=...)", LEGBA_TYPE_SIGNALLER,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  install_copies (gobject_class, LEGBA_TYPE_ROOM, room_settings,
      N_ROOM_SETTINGS, PROP_ROOM_SETTING);
  install_copies (gobject_class, LEGBA_TYPE_SIGNAL_CLIENT,
      signaller_settings, N_SIGNALLER_SETTINGS, PROP_SIGNALLER_SETTING);
  properties[PROP_LEGBA_ROOM] = g_param_spec_object ("legba-room",
      "Legba room", "The LegbaRoom this element drives (its signals are "
      "emitted on the element's own thread)", LEGBA_TYPE_ROOM,
      G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (gobject_class, N_PROPERTIES, properties);

  gst_element_class_add_static_pad_template (element_class,
      &video_sink_template);
  gst_element_class_add_static_pad_template (element_class,
      &audio_sink_template);
  gst_element_class_add_static_pad_template_with_gtype (element_class,
      &video_src_template, GST_TYPE_LEGBA_ROOM_PAD);
  gst_element_class_add_static_pad_template_with_gtype (element_class,
      &audio_src_template, GST_TYPE_LEGBA_ROOM_PAD);
  gst_element_class_set_static_metadata (element_class, "Legba room",
      "Filter/Network/WebRTC",
      "A participant in a real-time room: sends encoded audio and video to "
      "every other participant and receives theirs (WebRTC mesh)", "Legba");
  gst_type_mark_as_plugin_api (GST_TYPE_LEGBA_ROOM_PAD, 0);
}

static void
gst_legba_room_init (GstLegbaRoom * self)
{
  for (guint i = 0; i < N_ROOM_SETTINGS; i++) {
    GParamSpec *pspec = properties[PROP_ROOM_SETTING + i];

    g_value_init (&self->room_values[i], pspec->value_type);
    g_param_value_set_default (pspec, &self->room_values[i]);
  }
  self->signaller = LEGBA_SIGNALLER (legba_signal_client_new (NULL, NULL));
  g_mutex_init (&self->thread_lock);
}
