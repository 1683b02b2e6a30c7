/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */

#include <legba/room/legba-room-private.h>
#include <legba/room/legba-room-data-private.h>
#include <legba/common/legba-json.h>

/**
 * legba_room_error_quark:
 *
 * Gets the error domain of #LegbaRoom, %LEGBA_ROOM_ERROR: its errors are
 * from the #LegbaRoomError enumeration.
 *
 * Returns: the domain's #GQuark
 */
GQuark
legba_room_error_quark (void)
{
  return g_quark_from_static_string ("legba-room-error-quark");
}

G_DEFINE_ENUM_TYPE (LegbaRoomState, legba_room_state,
    G_DEFINE_ENUM_VALUE (LEGBA_ROOM_STATE_DISCONNECTED, "disconnected"),
    G_DEFINE_ENUM_VALUE (LEGBA_ROOM_STATE_CONNECTING, "connecting"),
    G_DEFINE_ENUM_VALUE (LEGBA_ROOM_STATE_CONNECTED, "connected"),
    G_DEFINE_ENUM_VALUE (LEGBA_ROOM_STATE_RECONNECTING, "reconnecting"),
    G_DEFINE_ENUM_VALUE (LEGBA_ROOM_STATE_FAILED, "failed"));

G_DEFINE_ENUM_TYPE (LegbaTrackKind, legba_track_kind,
    G_DEFINE_ENUM_VALUE (LEGBA_TRACK_KIND_VIDEO, "video"),
    G_DEFINE_ENUM_VALUE (LEGBA_TRACK_KIND_AUDIO, "audio"));

/* Defaults, and why (docs/rooms.md says the same). */
/* a mesh: each participant encodes once but sends one copy per peer and
 * decodes every peer; six keeps a 640x360 call within a home uplink */
#define DEFAULT_MAX_PARTICIPANTS 6
/* jitter buffer: calls want low latency; 100 ms still leaves time for one
 * retransmission on a path of up to ~80 ms round trip */
#define DEFAULT_LATENCY 100
/* and on a real path it may grow to cover the retransmissions' round
 * trip (legba-playout.h): 400 ms keeps a call conversational (ITU-T
 * G.114's bound for mouth to ear) */
#define DEFAULT_MAX_LATENCY 400
/* docs/webrtcbin.md, "Setup time": libnice paces checks at 20 ms by
 * default, three ticks of which are most of a call's setup time; 1 ms
 * brings a warm setup on loopback from ~74 ms to ~13 ms */
#define DEFAULT_STUN_PACING_TIMER 1
/* and a fast pacing timer stays hot for idle-timeout (5 s in libnice)
 * once the checks are done: ~80% of a core for 50 pairs. It is also how
 * long the controlled side waits for a nomination before declaring the
 * connection failed: 100 ms failed calls on a loaded machine (the test
 * suite under AddressSanitizer); 1 s keeps a margin and bounds the timer */
#define DEFAULT_ICE_IDLE_TIMEOUT 1000
/* ICE-TCP host candidates: each peer connection would keep a listening
 * TCP socket and its checks leave TCP connections open (about four file
 * descriptors a connection); TURN over TCP or TLS, which crosses networks
 * that block UDP, does not need them */
#define DEFAULT_ICE_TCP FALSE
#define DEFAULT_STATS_INTERVAL 1000
#define DEFAULT_CONGESTION_CONTROL TRUE
#define DEFAULT_ICE_TRANSPORT_POLICY GST_WEBRTC_ICE_TRANSPORT_POLICY_ALL

enum
{
  PROP_0,
  PROP_SIGNALLER,
  PROP_BIN,
  PROP_ROOM,
  PROP_IDENTITY,
  PROP_DISPLAY_NAME,
  PROP_PARTICIPANT_ID,
  PROP_STATE,
  PROP_MAX_PARTICIPANTS,
  PROP_LATENCY,
  PROP_MAX_LATENCY,
  PROP_STUN_SERVER,
  PROP_TURN_SERVER,
  PROP_ICE_SERVERS,
  PROP_ICE_TRANSPORT_POLICY,
  PROP_LOCAL_ADDRESSES,
  PROP_STUN_PACING_TIMER,
  PROP_ICE_IDLE_TIMEOUT,
  PROP_ICE_TCP,
  PROP_STATS_INTERVAL,
  PROP_CONGESTION_CONTROL,
  PROP_VIDEO_FEC_PERCENTAGE,
  N_PROPERTIES
};

enum
{
  SIGNAL_PARTICIPANT_JOINED,
  SIGNAL_PARTICIPANT_LEFT,
  SIGNAL_TRACK_ADDED,
  SIGNAL_TRACK_REMOVED,
  SIGNAL_ERROR,
  N_SIGNALS
};

static GParamSpec *properties[N_PROPERTIES];
static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (LegbaRoom, legba_room, G_TYPE_OBJECT);

void
legba_room_report (LegbaRoom * self, LegbaRoomError code,
    const char *format, ...)
{
  g_autoptr (GError) error = NULL;
  va_list args;

  va_start (args, format);
  error = g_error_new_valist (LEGBA_ROOM_ERROR, code, format, args);
  va_end (args);
  GST_WARNING ("room %s: %s", self->room_name, error->message);
  g_signal_emit (self, signals[SIGNAL_ERROR], 0, error);
}

static void
set_state (LegbaRoom * self, LegbaRoomState state)
{
  if (self->state == state)
    return;
  GST_INFO ("room %s: %s -> %s", self->room_name,
      legba_enum_nick (LEGBA_TYPE_ROOM_STATE, self->state),
      legba_enum_nick (LEGBA_TYPE_ROOM_STATE, state));
  self->state = state;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATE]);
}

static void
send_signal (LegbaRoom * self, LegbaPeer * peer, JsonObject * signal)
{
  g_autoptr (GError) error = NULL;

  if (legba_signaller_send (self->signaller, peer->participant->id, signal,
          &error))
    return;
  GST_WARNING ("room %s: could not send a %s to %s: %s", self->room_name,
      legba_json_object_get_string (signal, "type"),
      peer->participant->id, error->message);
}

static void
send_bye (LegbaRoom * self, LegbaPeer * peer)
{
  g_autoptr (JsonObject) bye = json_object_new ();

  json_object_set_string_member (bye, "pc", peer->pc);
  json_object_set_string_member (bye, "type", "bye");
  send_signal (self, peer, bye);
}

/* ---- What the room core asks for (legba-room-core.h) ---- */

static gpointer
core_participant_added (const char *id, gpointer member, gpointer data)
{
  LegbaRoom *self = data;
  LegbaParticipant *p = legba_participant_new (id, member);

  /* the list model owns the participant */
  g_list_store_append (self->participants, p);
  g_object_unref (p);
  legba_room_data_participant_joined (self, p);
  GST_INFO ("room %s: participant %s joined", self->room_name, id);
  g_signal_emit (self, signals[SIGNAL_PARTICIPANT_JOINED], 0, p);
  if (self->sfu != NULL)
    legba_sfu_client_participant_joined (self->sfu, p);
  return p;
}

static void
core_participant_state (gpointer handle, LegbaRoomCoreState state,
    gpointer data)
{
  legba_participant_set_state (handle, (LegbaParticipantState) state);
}

static void
core_participant_removed (gpointer handle, gpointer data)
{
  LegbaRoom *self = data;
  LegbaParticipant *p = handle;
  guint position;

  /* the list may hold the last reference */
  g_object_ref (p);
  if (self->sfu != NULL)
    legba_sfu_client_participant_left (self->sfu, p);
  legba_room_switch_participant_left (self, p);
  if (g_list_store_find (self->participants, p, &position))
    g_list_store_remove (self->participants, position);
  legba_participant_set_state (p, LEGBA_PARTICIPANT_STATE_LEFT);
  GST_INFO ("room %s: participant %s left", self->room_name, p->id);
  g_signal_emit (self, signals[SIGNAL_PARTICIPANT_LEFT], 0, p);
  g_object_unref (p);
}

static void
core_participant_failed (gpointer handle, const char *why, gpointer data)
{
  LegbaParticipant *p = handle;

  legba_room_report (data, LEGBA_ROOM_ERROR_PEER,
      "Could not connect to participant %s: %s", p->id, why);
}

static void
core_entered (gpointer data)
{
  set_state (data, LEGBA_ROOM_STATE_CONNECTED);
}

static gboolean
core_open_peer (gpointer handle, const char *pc, gboolean offerer,
    gpointer data)
{
  LegbaRoom *self = data;
  LegbaParticipant *p = handle;
  g_autoptr (GError) error = NULL;
  LegbaPeer *peer;

  peer = legba_peer_new (self, p, pc, offerer ? LEGBA_PEER_OFFERER :
      LEGBA_PEER_ANSWERER, &legba_room_peer_events, &error);
  if (peer == NULL) {
    legba_room_report (self, error->code, "%s", error->message);
    return FALSE;
  }
  p->peer = peer;
  g_hash_table_insert (self->peers, peer->pc, peer);
  return TRUE;
}

static void
core_start_peer (gpointer handle, const char *pc, const char *offer_sdp,
    gpointer data)
{
  LegbaRoom *self = data;
  LegbaParticipant *p = handle;

  if (offer_sdp == NULL) {
    GST_INFO ("room %s: offering to %s (pc %s)", self->room_name, p->id, pc);
    legba_peer_start (p->peer);
  } else {
    legba_peer_handle_offer (p->peer, offer_sdp);
  }
}

static void
core_close_peer (gpointer handle, const char *pc, gpointer data)
{
  LegbaRoom *self = data;
  LegbaParticipant *p = handle;
  LegbaPeer *peer = g_steal_pointer (&p->peer);

  if (peer == NULL)
    return;
  g_hash_table_remove (self->peers, peer->pc);
  legba_peer_close (peer);
  legba_peer_unref (peer);
  legba_room_congestion_update (self);
}

static void
core_send_bye (gpointer handle, const char *pc, gpointer data)
{
  LegbaParticipant *p = handle;

  if (p->peer != NULL)
    send_bye (data, p->peer);
}

static gboolean
core_apply_answer (gpointer handle, const char *pc, const char *sdp,
    gpointer data)
{
  LegbaParticipant *p = handle;

  return legba_peer_handle_answer (p->peer, sdp);
}

static void
core_apply_candidates (gpointer handle, const char *pc,
    JsonArray * candidates, gpointer data)
{
  LegbaParticipant *p = handle;

  legba_peer_handle_candidates (p->peer, candidates);
}

static gboolean
core_peer_is_live (gpointer handle, const char *pc, gpointer data)
{
  LegbaParticipant *p = handle;

  return p->peer != NULL && legba_peer_is_live (p->peer);
}

static gboolean
core_timer_expired (gpointer data)
{
  LegbaRoom *self = data;

  legba_clear_source (&self->core_timer);
  legba_room_core_tick (self->core, g_get_monotonic_time ());
  return G_SOURCE_REMOVE;
}

static void
core_schedule (gint64 deadline, gpointer data)
{
  LegbaRoom *self = data;
  gint64 wait;

  legba_clear_source (&self->core_timer);
  if (deadline < 0)
    return;
  wait = MAX (deadline - g_get_monotonic_time (), 0);
  self->core_timer = legba_room_timeout (self,
      (wait + G_TIME_SPAN_MILLISECOND - 1) / G_TIME_SPAN_MILLISECOND,
      core_timer_expired, self, NULL);
}

static void fail (LegbaRoom * self, LegbaRoomError code, const char *message);

static void
core_room_full (guint members, gpointer data)
{
  LegbaRoom *self = data;
  g_autofree char *message = g_strdup_printf ("Room %s is full: it "
      "holds %u participants and max-participants is %u", self->room_name,
      members, self->max_participants);

  fail (self, LEGBA_ROOM_ERROR_FULL, message);
}

static const LegbaRoomCoreActions core_actions = {
  .participant_added = core_participant_added,
  .participant_state = core_participant_state,
  .participant_removed = core_participant_removed,
  .participant_failed = core_participant_failed,
  .entered = core_entered,
  .open_peer = core_open_peer,
  .start_peer = core_start_peer,
  .close_peer = core_close_peer,
  .send_bye = core_send_bye,
  .apply_answer = core_apply_answer,
  .apply_candidates = core_apply_candidates,
  .peer_is_live = core_peer_is_live,
  .schedule = core_schedule,
  .room_full = core_room_full,
};

static void
remove_all_participants (LegbaRoom * self, gboolean say_bye)
{
  g_clear_pointer (&self->sw, legba_room_switch_free);
  g_clear_pointer (&self->sfu, legba_sfu_client_free);
  legba_room_core_leave (self->core, say_bye);
}

/* ---- What the peer connections report (LegbaPeerEvents) ---- */

static void
peer_connected (LegbaPeer * peer)
{
  LegbaRoom *self = peer->room;

  if (peer->participant->peer != peer ||
      !legba_room_core_peer_connected (self->core, peer->pc))
    return;
  legba_room_data_peer_connected (self, peer);
}

static void
peer_failed (LegbaPeer * peer, const char *why)
{
  LegbaRoom *self = peer->room;

  if (peer->participant->peer != peer)
    return;
  GST_WARNING ("room %s: peer connection %s with %s failed: %s",
      self->room_name, peer->pc, peer->participant->id, why);
  legba_room_core_peer_failed (self->core, peer->pc, why,
      g_get_monotonic_time ());
}

static void
peer_send_signal (LegbaPeer * peer, JsonObject * signal)
{
  send_signal (peer->room, peer, signal);
}

static void
peer_lossy_open (LegbaPeer * peer)
{
  legba_room_data_lossy_open (peer->room, peer);
}

static void
peer_stats (LegbaPeer * peer, GstStructure * summary)
{
  if (peer->participant->peer == peer)
    legba_participant_take_stats (peer->participant, summary);
  else
    gst_structure_free (summary);
}

static void
peer_error (LegbaPeer * peer, const GError * error)
{
  legba_room_report (peer->room, error->code, "%s", error->message);
}

const LegbaPeerEvents legba_room_peer_events = {
  .connected = peer_connected,
  .failed = peer_failed,
  .send_signal = peer_send_signal,
  .lossy_open = peer_lossy_open,
  .stats = peer_stats,
  .error = peer_error,
};

/* ---- What the media and data parts report (LegbaRoomEvents) ---- */

static void
parts_track (LegbaRoom * self, LegbaParticipant * participant,
    LegbaTrackKind kind, GstPad * pad, gboolean added)
{
  g_signal_emit (self, signals[added ? SIGNAL_TRACK_ADDED :
          SIGNAL_TRACK_REMOVED], 0, participant, kind, pad);
}

/* Peer connections that waited for the local tracks' caps negotiate. */
static void
parts_media_ready (LegbaRoom * self)
{
  GHashTableIter iter;
  gpointer peer;
  g_autoptr (GPtrArray) peers = g_ptr_array_new_with_free_func ((GDestroyNotify)
      legba_peer_unref);

  g_hash_table_iter_init (&iter, self->peers);
  while (g_hash_table_iter_next (&iter, NULL, &peer))
    g_ptr_array_add (peers, legba_peer_ref (peer));
  for (guint i = 0; i < peers->len; i++)
    if (((LegbaPeer *) peers->pdata[i])->room != NULL)
      legba_peer_media_ready (peers->pdata[i]);
}

static void
parts_report (LegbaRoom * self, LegbaRoomError code, const char *message)
{
  legba_room_report (self, code, "%s", message);
}

static gboolean
parts_open_lossy (LegbaRoom * self, const char *participant_id)
{
  LegbaParticipant *p = legba_room_find_participant (self, participant_id);
  LegbaPeer *peer = p ? p->peer : NULL;

  if (peer == NULL)
    return FALSE;
  legba_peer_open_lossy (peer);
  return peer->channels[LEGBA_RELIABILITY_LOSSY] != NULL;
}

static const LegbaRoomEvents parts_events = {
  .track = parts_track,
  .media_ready = parts_media_ready,
  .report = parts_report,
  .find_participant = legba_room_find_participant,
  .open_lossy = parts_open_lossy,
  .publish = legba_room_sfu_publish,
  .sfu_track = legba_room_switch_track,
};

/* ---- Membership (§3) ---- */

static void
complete_connect (LegbaRoom * self, GError * error)
{
  g_autoptr (GTask) task = g_steal_pointer (&self->connect_task);

  if (task == NULL) {
    if (error != NULL)
      g_error_free (error);
    return;
  }
  if (self->cancel_handler != 0)
    g_cancellable_disconnect (g_task_get_cancellable (task),
        self->cancel_handler);
  self->cancel_handler = 0;
  if (error != NULL)
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
}

static void
fail (LegbaRoom * self, LegbaRoomError code, const char *message)
{
  gboolean connecting = self->connect_task != NULL;

  GST_WARNING ("room %s: %s", self->room_name, message);
  remove_all_participants (self, TRUE);
  legba_signaller_leave (self->signaller);
  set_state (self, LEGBA_ROOM_STATE_FAILED);
  if (connecting)
    complete_connect (self, g_error_new_literal (LEGBA_ROOM_ERROR, code,
            message));
  else
    legba_room_report (self, code, "%s", message);
}

static void
on_joined (LegbaSignaller * signaller, GPtrArray * members, LegbaRoom * self)
{
  g_autofree const char **ids = g_new0 (const char *, members->len + 1);

  for (guint i = 0; i < members->len; i++)
    ids[i] = legba_signal_member_get_id (members->pdata[i]);
  if (legba_room_core_joined (self->core, ids, members->pdata, members->len,
          g_get_monotonic_time ()))
    complete_connect (self, NULL);
}

static void
on_member_joined (LegbaSignaller * signaller, LegbaSignalMember * member,
    LegbaRoom * self)
{
  legba_room_core_member_added (self->core,
      legba_signal_member_get_id (member), member, g_get_monotonic_time ());
}

static void
on_member_left (LegbaSignaller * signaller, LegbaSignalMember * member,
    LegbaRoom * self)
{
  legba_room_core_member_removed (self->core,
      legba_signal_member_get_id (member), g_get_monotonic_time ());
}

static void
on_signaller_state (LegbaSignaller * signaller, GParamSpec * pspec,
    LegbaRoom * self)
{
  LegbaSignallerState state = legba_signaller_get_state (signaller);

  if (self->state == LEGBA_ROOM_STATE_DISCONNECTED ||
      self->state == LEGBA_ROOM_STATE_FAILED)
    return;
  /* CONNECTED is reached on `joined`, with the member list in hand */
  if (state == LEGBA_SIGNALLER_STATE_RECONNECTING &&
      self->state == LEGBA_ROOM_STATE_CONNECTED)
    set_state (self, LEGBA_ROOM_STATE_RECONNECTING);
  else if (state == LEGBA_SIGNALLER_STATE_FAILED)
    fail (self, LEGBA_ROOM_ERROR_REFUSED, "The signalling server refused "
        "the participant");
}

/* TURN credentials from the signalling server: for the peer connections
 * made from now on (those running keep theirs). */
static void
on_ice_servers (LegbaSignaller * signaller, const char *const *uris,
    LegbaRoom * self)
{
  g_strfreev (self->ice_servers);
  self->ice_servers = g_strdupv ((char **) uris);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_ICE_SERVERS]);
}

static void
on_signaller_error (LegbaSignaller * signaller, GError * error,
    LegbaRoom * self)
{
  g_autofree char *message = NULL;

  if (self->state == LEGBA_ROOM_STATE_DISCONNECTED ||
      self->state == LEGBA_ROOM_STATE_FAILED)
    return;
  if (error->domain != LEGBA_SIGNAL_ERROR) {
    legba_room_report (self, LEGBA_ROOM_ERROR_SIGNALLING, "%s", error->message);
    return;
  }
  switch (error->code) {
    case LEGBA_SIGNAL_ERROR_CONNECT:
      if (self->state == LEGBA_ROOM_STATE_CONNECTING) {
        message = g_strdup_printf ("Could not reach the signalling server: "
            "%s", error->message);
        fail (self, LEGBA_ROOM_ERROR_UNREACHABLE, message);
      } else {
        legba_room_report (self, LEGBA_ROOM_ERROR_SIGNALLING,
            "Signalling connection lost, reconnecting: %s", error->message);
      }
      break;
    case LEGBA_SIGNAL_ERROR_AUTH:
    case LEGBA_SIGNAL_ERROR_REFUSED:
      message = g_strdup_printf ("The signalling server refused the "
          "participant: %s", error->message);
      fail (self, LEGBA_ROOM_ERROR_REFUSED, message);
      break;
    default:
      legba_room_report (self, LEGBA_ROOM_ERROR_SIGNALLING, "%s",
          error->message);
  }
}

/* ---- GObject ---- */

static void
legba_room_dispose (GObject * object)
{
  LegbaRoom *self = LEGBA_ROOM (object);

  if (self->signaller != NULL) {
    legba_room_disconnect (self);
    for (guint i = 0; i < G_N_ELEMENTS (self->signaller_handlers); i++)
      g_clear_signal_handler (&self->signaller_handlers[i], self->signaller);
  }
  /* what joined no room (a connection made by hand) */
  legba_room_core_leave (self->core, FALSE);
  legba_clear_source (&self->core_timer);
  legba_room_data_dispose (self);
  legba_clear_source (&self->stats_source);
  legba_room_stop_playout (self);
  for (guint i = 0; i < G_N_ELEMENTS (self->tracks); i++)
    g_clear_pointer (&self->tracks[i], legba_room_media_free_track);
  legba_room_prepare_wait ();
  g_clear_object (&self->signaller);
  if (self->bin != NULL)
    g_object_remove_weak_pointer (G_OBJECT (self->bin),
        (gpointer *) & self->bin);
  self->bin = NULL;
  G_OBJECT_CLASS (legba_room_parent_class)->dispose (object);
}

static void
legba_room_finalize (GObject * object)
{
  LegbaRoom *self = LEGBA_ROOM (object);

  g_clear_pointer (&self->data, legba_room_data_free);
  legba_room_core_free (self->core);
  g_hash_table_unref (self->peers);
  g_object_unref (self->participants);
  g_free (self->room_name);
  g_free (self->identity);
  g_free (self->display_name);
  g_free (self->participant_id);
  g_free (self->stun_server);
  g_free (self->turn_server);
  g_strfreev (self->ice_servers);
  g_strfreev (self->local_addresses);
  g_main_context_unref (self->context);
  g_mutex_clear (&self->lock);
  G_OBJECT_CLASS (legba_room_parent_class)->finalize (object);
}

static void
connect_signaller (LegbaRoom * self)
{
  gulong *h = self->signaller_handlers;

  h[0] = g_signal_connect (self->signaller, "joined",
      G_CALLBACK (on_joined), self);
  h[1] = g_signal_connect (self->signaller, "member-joined",
      G_CALLBACK (on_member_joined), self);
  h[2] = g_signal_connect (self->signaller, "member-left",
      G_CALLBACK (on_member_left), self);
  h[3] = g_signal_connect (self->signaller, "signal-received",
      G_CALLBACK (legba_room_on_signal_received), self);
  h[4] = g_signal_connect (self->signaller, "notify::state",
      G_CALLBACK (on_signaller_state), self);
  h[5] = g_signal_connect (self->signaller, "error",
      G_CALLBACK (on_signaller_error), self);
  h[6] = g_signal_connect (self->signaller, "ice-servers",
      G_CALLBACK (on_ice_servers), self);
  h[7] = legba_room_sfu_watch_topology (self);
}

static void
legba_room_constructed (GObject * object)
{
  LegbaRoom *self = LEGBA_ROOM (object);

  G_OBJECT_CLASS (legba_room_parent_class)->constructed (object);
  g_return_if_fail (self->signaller != NULL && self->bin != NULL);
  connect_signaller (self);
  self->data = legba_room_data_new (self);
}

static void
set_string (char **field, const GValue * value)
{
  g_free (*field);
  *field = g_value_dup_string (value);
}

static void
legba_room_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  LegbaRoom *self = LEGBA_ROOM (object);

  switch (prop_id) {
    case PROP_SIGNALLER:
      self->signaller = g_value_dup_object (value);
      break;
    case PROP_BIN:
      /* weak: the room's elements live in the bin, and the legbaroom
       * element (a bin) owns its room */
      self->bin = g_value_get_object (value);
      if (self->bin != NULL)
        g_object_add_weak_pointer (G_OBJECT (self->bin),
            (gpointer *) & self->bin);
      break;
    case PROP_ROOM:
      set_string (&self->room_name, value);
      break;
    case PROP_IDENTITY:
      set_string (&self->identity, value);
      break;
    case PROP_DISPLAY_NAME:
      set_string (&self->display_name, value);
      break;
    case PROP_MAX_PARTICIPANTS:
      self->max_participants = g_value_get_uint (value);
      legba_room_core_set_max_participants (self->core, self->max_participants);
      break;
    case PROP_LATENCY:
      self->latency = g_value_get_uint (value);
      break;
    case PROP_MAX_LATENCY:
      g_atomic_int_set (&self->max_latency, g_value_get_uint (value));
      break;
    case PROP_CONGESTION_CONTROL:
      self->congestion_control = g_value_get_boolean (value);
      break;
    case PROP_VIDEO_FEC_PERCENTAGE:
      self->video_fec_percentage = g_value_get_uint (value);
      break;
    case PROP_STUN_SERVER:
      set_string (&self->stun_server, value);
      break;
    case PROP_TURN_SERVER:
      set_string (&self->turn_server, value);
      break;
    case PROP_ICE_TRANSPORT_POLICY:
      self->ice_transport_policy = g_value_get_enum (value);
      break;
    case PROP_LOCAL_ADDRESSES:
      g_strfreev (self->local_addresses);
      self->local_addresses = g_value_dup_boxed (value);
      break;
    case PROP_STUN_PACING_TIMER:
      self->stun_pacing_timer = g_value_get_uint (value);
      break;
    case PROP_ICE_IDLE_TIMEOUT:
      self->ice_idle_timeout = g_value_get_uint (value);
      break;
    case PROP_ICE_TCP:
      self->ice_tcp = g_value_get_boolean (value);
      break;
    case PROP_STATS_INTERVAL:
      self->stats_interval = g_value_get_uint (value);
      legba_room_restart_stats (self);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
}

static void
legba_room_get_property (GObject * object, guint prop_id, GValue * value,
    GParamSpec * pspec)
{
  LegbaRoom *self = LEGBA_ROOM (object);

  switch (prop_id) {
    case PROP_SIGNALLER:
      g_value_set_object (value, self->signaller);
      break;
    case PROP_BIN:
      g_value_set_object (value, self->bin);
      break;
    case PROP_ROOM:
      g_value_set_string (value, self->room_name);
      break;
    case PROP_IDENTITY:
      g_value_set_string (value, self->identity);
      break;
    case PROP_DISPLAY_NAME:
      g_value_set_string (value, self->display_name);
      break;
    case PROP_PARTICIPANT_ID:
      g_value_set_string (value, self->participant_id);
      break;
    case PROP_STATE:
      g_value_set_enum (value, self->state);
      break;
    case PROP_MAX_PARTICIPANTS:
      g_value_set_uint (value, self->max_participants);
      break;
    case PROP_LATENCY:
      g_value_set_uint (value, self->latency);
      break;
    case PROP_MAX_LATENCY:
      g_value_set_uint (value, g_atomic_int_get (&self->max_latency));
      break;
    case PROP_CONGESTION_CONTROL:
      g_value_set_boolean (value, self->congestion_control);
      break;
    case PROP_VIDEO_FEC_PERCENTAGE:
      g_value_set_uint (value, self->video_fec_percentage);
      break;
    case PROP_STUN_SERVER:
      g_value_set_string (value, self->stun_server);
      break;
    case PROP_TURN_SERVER:
      g_value_set_string (value, self->turn_server);
      break;
    case PROP_ICE_SERVERS:
      g_value_set_boxed (value, self->ice_servers);
      break;
    case PROP_ICE_TRANSPORT_POLICY:
      g_value_set_enum (value, self->ice_transport_policy);
      break;
    case PROP_LOCAL_ADDRESSES:
      g_value_set_boxed (value, self->local_addresses);
      break;
    case PROP_STUN_PACING_TIMER:
      g_value_set_uint (value, self->stun_pacing_timer);
      break;
    case PROP_ICE_IDLE_TIMEOUT:
      g_value_set_uint (value, self->ice_idle_timeout);
      break;
    case PROP_ICE_TCP:
      g_value_set_boolean (value, self->ice_tcp);
      break;
    case PROP_STATS_INTERVAL:
      g_value_set_uint (value, self->stats_interval);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
}

static void
legba_room_class_init (LegbaRoomClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;
  const GParamFlags ro = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS;

  legba_room_debug_init ();

  gobject_class->constructed = legba_room_constructed;
  gobject_class->dispose = legba_room_dispose;
  gobject_class->finalize = legba_room_finalize;
  gobject_class->set_property = legba_room_set_property;
  gobject_class->get_property = legba_room_get_property;

  /**
   * LegbaRoom:signaller:
   *
   * The #LegbaSignaller through which the room reaches the network. It
   * must run on the same main context as the room.
   */
  properties[PROP_SIGNALLER] = g_param_spec_object ("signaller", "Signaller",
      "How the room reaches the network", LEGBA_TYPE_SIGNALLER,
      rw | G_PARAM_CONSTRUCT_ONLY);
  /**
   * LegbaRoom:bin:
   *
   * The #GstBin the room adds its elements to: one bin per peer
   * connection (holding its webrtcbin) and one tee per local track.
   */
  properties[PROP_BIN] = g_param_spec_object ("bin", "Bin",
      "The bin the room adds its elements to (a pipeline, or the "
      "legbaroom element)", GST_TYPE_BIN, rw | G_PARAM_CONSTRUCT_ONLY);
  /**
   * LegbaRoom:room:
   *
   * The room name (docs/room-protocol.md §2: `[A-Za-z0-9_\-=@,.;]{1,149}`).
   */
  properties[PROP_ROOM] = g_param_spec_string ("room", "Room",
      "The room to join ([A-Za-z0-9_-=@,.;], 1 to 149 characters)", NULL, rw);
  /**
   * LegbaRoom:identity:
   *
   * Who the local participant is; the participant id is the identity plus
   * a random suffix.
   */
  properties[PROP_IDENTITY] = g_param_spec_string ("identity", "Identity",
      "Who the local participant is (the participant id's prefix)", NULL, rw);
  /**
   * LegbaRoom:display-name:
   *
   * The name shown to the other participants, announced with the
   * identity when the room is joined; %NULL announces the identity.
   */
  properties[PROP_DISPLAY_NAME] = g_param_spec_string ("display-name",
      "Display name", "The name shown to the other participants (default: "
      "the identity)", NULL, rw);
  /**
   * LegbaRoom:participant-id:
   *
   * The local participant id, `IDENTITY-SUFFIX`, made by the first
   * legba_room_connect_async() and kept for the room's lifetime (across
   * signalling reconnections).
   */
  properties[PROP_PARTICIPANT_ID] = g_param_spec_string ("participant-id",
      "Participant id", "The local participant id, IDENTITY-SUFFIX", NULL, ro);
  /**
   * LegbaRoom:state:
   *
   * Where the room stands: joining, in the room, reconnecting to the
   * signalling server, failed. Notified on the room's main context.
   */
  properties[PROP_STATE] = g_param_spec_enum ("state", "State",
      "Where the room stands", LEGBA_TYPE_ROOM_STATE,
      LEGBA_ROOM_STATE_DISCONNECTED, ro | G_PARAM_EXPLICIT_NOTIFY);
  /**
   * LegbaRoom:max-participants:
   *
   * The cap, the local participant included: joining a room that already
   * holds this many fails with %LEGBA_ROOM_ERROR_FULL. In a mesh every
   * participant sends one copy of its streams per peer: beyond a few, more
   * uplink than most homes have; an SFU room of viewers may hold more.
   */
  properties[PROP_MAX_PARTICIPANTS] = g_param_spec_uint ("max-participants",
      "Max participants", "Largest room this participant joins, itself "
      "included (a mesh: every stream is sent once per peer)", 2, 1000,
      DEFAULT_MAX_PARTICIPANTS, rw);
  /**
   * LegbaRoom:latency:
   *
   * The jitter buffer of each received stream, in milliseconds. Low for
   * calls; enough for one retransmission on paths of up to ~80 ms round
   * trip. Applies to peer connections made after it is set.
   *
   * Once a stream has started (its first packets wait this long, for any
   * that come late), packets that come in order pass the jitter buffer at
   * once; it holds only those behind a lost one, for at most this long.
   * A sink that syncs to the clock adds it in full: the pipeline's
   * latency includes it, and the sink shows each frame that much after
   * the frame came in. A sink with `sync=false` shows frames as they are
   * decoded.
   */
  properties[PROP_LATENCY] = g_param_spec_uint ("latency", "Latency",
      "Jitter buffer of each received stream, in milliseconds (where it "
      "starts, and the least it is)", 0, 10000, DEFAULT_LATENCY, rw);
  /**
   * LegbaRoom:max-latency:
   *
   * The most a received stream's jitter buffer grows to, in
   * milliseconds. Each jitter buffer starts at #LegbaRoom:latency; when
   * retransmissions take longer than it on the way (their measured round
   * trip, or lost packets whose copies came too late), it grows to cover
   * them, up to this; after 10 s without growing it shrinks back slowly,
   * never under #LegbaRoom:latency. At or under #LegbaRoom:latency the
   * jitter buffer keeps that latency. Applies at once.
   *
   * Each change posts a latency message (#GST_MESSAGE_LATENCY) from the
   * jitter buffer: an application whose sinks sync to the clock calls
   * gst_bin_recalculate_latency() on its pipeline then, as gst-launch-1.0
   * and #LegbaCall do, or those sinks show the frames late.
   */
  properties[PROP_MAX_LATENCY] = g_param_spec_uint ("max-latency",
      "Max latency", "Most a received stream's jitter buffer grows to when "
      "retransmissions need it, in milliseconds (at or under latency: "
      "fixed)", 0, 10000, DEFAULT_MAX_LATENCY, rw);
  /**
   * LegbaRoom:stun-server:
   *
   * A STUN server, `stun://HOST:PORT`, for server-reflexive candidates;
   * none by default. Applies to peer connections made after it is set.
   */
  properties[PROP_STUN_SERVER] = g_param_spec_string ("stun-server",
      "STUN server", "STUN server, stun://HOST:PORT (none by default)", NULL,
      rw);
  /**
   * LegbaRoom:turn-server:
   *
   * A TURN server, `turn(s)://USER:PASSWORD@HOST:PORT`, user name and
   * password URI-escaped. When set, it is the only one the room uses: the
   * servers of #LegbaRoom:ice-servers are then left aside.
   */
  properties[PROP_TURN_SERVER] = g_param_spec_string ("turn-server",
      "TURN server", "TURN server, turn(s)://USER:PASSWORD@HOST:PORT (none "
      "by default; when set, ice-servers are not used)", NULL, rw);
  /**
   * LegbaRoom:ice-servers:
   *
   * The TURN servers, with time-limited credentials, that the signalling
   * server handed out when the room was last joined
   * (#LegbaSignaller::ice-servers; legba-server does when configured with
   * a TURN secret), as webrtcbin URIs. Every peer connection made
   * afterwards uses all of them, unless #LegbaRoom:turn-server is set.
   */
  properties[PROP_ICE_SERVERS] = g_param_spec_boxed ("ice-servers",
      "ICE servers", "TURN servers the signalling server handed out, used "
      "unless turn-server is set", G_TYPE_STRV,
      G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  /**
   * LegbaRoom:ice-transport-policy:
   *
   * Which candidates ICE may use: all of them (the default), or only
   * those relayed through the TURN server, which hides the local
   * addresses from the other participants.
   */
  properties[PROP_ICE_TRANSPORT_POLICY] =
      g_param_spec_enum ("ice-transport-policy", "ICE transport policy",
      "all: any candidate; relay: only through the TURN server",
      GST_TYPE_WEBRTC_ICE_TRANSPORT_POLICY, DEFAULT_ICE_TRANSPORT_POLICY, rw);
  /**
   * LegbaRoom:local-addresses:
   *
   * The local addresses ICE gathers candidates on. %NULL (the default):
   * libnice's own choice (every interface but loopback), or only
   * 127.0.0.1 when the signalling server is on a loopback address (a test
   * or a demo on one machine).
   */
  properties[PROP_LOCAL_ADDRESSES] = g_param_spec_boxed ("local-addresses",
      "Local addresses", "Addresses ICE gathers candidates on (default: all "
      "but loopback, or 127.0.0.1 when the server is on loopback)",
      G_TYPE_STRV, rw);
  /**
   * LegbaRoom:stun-pacing-timer:
   *
   * The interval between ICE connectivity checks, in milliseconds: 1 by
   * default, where libnice's own is 20, three ticks of which were most of
   * a call's setup time (docs/webrtcbin.md, "Setup time"). Read when a
   * peer connection is made.
   */
  properties[PROP_STUN_PACING_TIMER] = g_param_spec_uint ("stun-pacing-timer",
      "STUN pacing timer", "Interval between ICE connectivity checks, in "
      "milliseconds (libnice's default is 20)", 1, 1000,
      DEFAULT_STUN_PACING_TIMER, rw);
  /**
   * LegbaRoom:ice-idle-timeout:
   *
   * How long ICE waits, once its checks are done, before it stops its
   * timer (and fails when no pair was nominated), in milliseconds: 1000 by
   * default, where libnice's own is 5000, since a fast
   * #LegbaRoom:stun-pacing-timer keeps running that long. Read when a peer
   * connection is made.
   */
  properties[PROP_ICE_IDLE_TIMEOUT] = g_param_spec_uint ("ice-idle-timeout",
      "ICE idle timeout", "How long ICE waits, once its checks are done, "
      "before stopping its timer (and failing if nothing was nominated), in "
      "milliseconds (libnice's default is 5000)", 50, 60000,
      DEFAULT_ICE_IDLE_TIMEOUT, rw);
  /**
   * LegbaRoom:ice-tcp:
   *
   * Whether ICE gathers TCP host candidates (ICE-TCP, RFC 6544) and
   * accepts a peer's. Off by default: each peer connection would keep a
   * listening TCP socket and its checks leave TCP connections open, and
   * TURN over TCP or TLS (#LegbaRoom:turn-server, or the servers the
   * signalling server hands out), which crosses networks that block UDP,
   * works without them. Read when a peer connection is made.
   */
  properties[PROP_ICE_TCP] = g_param_spec_boolean ("ice-tcp", "ICE-TCP",
      "Gather TCP host candidates and accept a peer's (RFC 6544); TURN over "
      "TCP or TLS works without them", DEFAULT_ICE_TCP, rw);
  /**
   * LegbaRoom:stats-interval:
   *
   * How often each participant's #LegbaParticipant:stats is refreshed, in
   * milliseconds; 0 never. A refresh asks webrtcbin for its statistics
   * (`get-stats`, not cheap) once an RTP stream flows either way with the
   * participant; before that, and in rooms that only exchange data, the
   * summary comes from the room's own counters. Whole seconds are
   * refreshed on GLib's second timers, so the rooms of one main context
   * refresh in one wake-up.
   */
  properties[PROP_STATS_INTERVAL] = g_param_spec_uint ("stats-interval",
      "Stats interval", "How often each participant's stats are refreshed, "
      "in milliseconds (0: never)", 0, G_MAXINT, DEFAULT_STATS_INTERVAL, rw);
  /**
   * LegbaRoom:congestion-control:
   *
   * Whether each peer connection estimates what the network carries
   * (from the receiver's transport-wide feedback), paces its packets and
   * bounds its retransmissions, and the video encoder follows the lowest
   * estimate among the participants it sends to (legbavideoenc does;
   * docs/congestion-control.md). When off, packets leave as they come,
   * every retransmission request is answered, and the bitrate is what the
   * encoder was set to. Read when a peer connection is made.
   */
  properties[PROP_CONGESTION_CONTROL] = g_param_spec_boolean
      ("congestion-control", "Congestion control", "Estimate each "
      "connection's bandwidth, pace packets, bound retransmissions, and "
      "have the video encoder follow the lowest estimate",
      DEFAULT_CONGESTION_CONTROL, rw);
  /**
   * LegbaRoom:video-fec-percentage:
   *
   * Forward error correction on the video sent: RED with ULPFEC (RFC 2198,
   * RFC 5109) offered beside the video codec, webrtcbin's
   * `fec-percentage` of protection (0, the default: none). Measured
   * against Chromium in the network lab, and off by default for what
   * that showed (docs/congestion-control.md, "Loss"). Read when a peer
   * connection is made.
   */
  properties[PROP_VIDEO_FEC_PERCENTAGE] = g_param_spec_uint
      ("video-fec-percentage", "Video FEC percentage", "Protect the video "
      "sent with RED and ULPFEC at this percentage of FEC packets "
      "(0: no FEC)", 0, 100, 0, rw);

  g_object_class_install_properties (gobject_class, N_PROPERTIES, properties);

  /**
   * LegbaRoom::participant-joined:
   * @self: the room
   * @participant: the newcomer
   *
   * A participant is listed: it was in the room when it was joined, or
   * joined after. It is in legba_room_get_participants() already.
   */
  signals[SIGNAL_PARTICIPANT_JOINED] = g_signal_new ("participant-joined",
      G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
      G_TYPE_NONE, 1, LEGBA_TYPE_PARTICIPANT);
  /**
   * LegbaRoom::participant-left:
   * @self: the room
   * @participant: the participant that left
   *
   * A participant left the room (after the grace period when only its
   * signalling connection was gone), or the room was left. Its tracks
   * were removed first.
   */
  signals[SIGNAL_PARTICIPANT_LEFT] = g_signal_new ("participant-left",
      G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
      G_TYPE_NONE, 1, LEGBA_TYPE_PARTICIPANT);
  /**
   * LegbaRoom::track-added:
   * @self: the room
   * @participant: whose track it is
   * @kind: video or audio
   * @pad: a source pad of an element in #LegbaRoom:bin carrying the
   *   participant's depayloaded encoded stream (H.264 byte-stream access
   *   units, VP8 or Opus)
   *
   * A participant's track arrived. Link @pad in the handler to get its
   * first frames (a key frame is requested when it is linked); an unlinked
   * pad discards its data. The plugin of the decoder decodebin would
   * choose for @pad's format is loaded by then, so that making that
   * decoder here does not hold the room's context, and every other
   * participant's signalling with it, while its plugin loads.
   */
  signals[SIGNAL_TRACK_ADDED] = g_signal_new ("track-added",
      G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
      G_TYPE_NONE, 3, LEGBA_TYPE_PARTICIPANT, LEGBA_TYPE_TRACK_KIND,
      GST_TYPE_PAD);
  /**
   * LegbaRoom::track-removed:
   * @self: the room
   * @participant: whose track it was
   * @kind: video or audio
   * @pad: the pad #LegbaRoom::track-added gave; it is removed after the
   *   handlers return
   *
   * A participant's track ended (it left, or its peer connection closed).
   */
  signals[SIGNAL_TRACK_REMOVED] = g_signal_new ("track-removed",
      G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
      G_TYPE_NONE, 3, LEGBA_TYPE_PARTICIPANT, LEGBA_TYPE_TRACK_KIND,
      GST_TYPE_PAD);
  /**
   * LegbaRoom::error:
   * @self: the room
   * @error: what went wrong, in the %LEGBA_ROOM_ERROR domain
   *
   * Something the application should know about, after the room was
   * joined (errors while joining are returned by
   * legba_room_connect_finish()). When the state became
   * %LEGBA_ROOM_STATE_FAILED the room is left; otherwise it carries on.
   */
  signals[SIGNAL_ERROR] = g_signal_new ("error", G_TYPE_FROM_CLASS (klass),
      G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_ERROR);
  legba_room_data_class_init (gobject_class);
}

static void
legba_room_init (LegbaRoom * self)
{
  self->context = g_main_context_ref_thread_default ();
  self->max_participants = DEFAULT_MAX_PARTICIPANTS;
  self->latency = DEFAULT_LATENCY;
  self->max_latency = DEFAULT_MAX_LATENCY;
  self->ice_transport_policy = DEFAULT_ICE_TRANSPORT_POLICY;
  self->stun_pacing_timer = DEFAULT_STUN_PACING_TIMER;
  self->ice_idle_timeout = DEFAULT_ICE_IDLE_TIMEOUT;
  self->ice_tcp = DEFAULT_ICE_TCP;
  self->stats_interval = DEFAULT_STATS_INTERVAL;
  self->congestion_control = DEFAULT_CONGESTION_CONTROL;
  self->participants = g_list_store_new (LEGBA_TYPE_PARTICIPANT);
  self->events = &parts_events;
  self->core = legba_room_core_new (&core_actions, self);
  legba_room_core_set_max_participants (self->core, self->max_participants);
  self->peers = g_hash_table_new (g_str_hash, g_str_equal);
  g_mutex_init (&self->lock);
}

/**
 * legba_room_new:
 * @signaller: (transfer none): how the room reaches the network; it runs
 *   on the calling thread's thread-default main context, as the room will
 * @bin: (transfer none): where the room adds its elements: the pipeline
 *   the local tracks' encoders are in, or a bin inside it. The room does
 *   not keep it alive: keep it for as long as the room.
 *
 * Creates a room on the calling thread's thread-default main context. Set
 * #LegbaRoom:room and #LegbaRoom:identity, add the local tracks, then
 * legba_room_connect_async().
 *
 * Returns: (transfer full): a new #LegbaRoom
 */
LegbaRoom *
legba_room_new (LegbaSignaller * signaller, GstBin * bin)
{
  g_return_val_if_fail (LEGBA_IS_SIGNALLER (signaller), NULL);
  g_return_val_if_fail (GST_IS_BIN (bin), NULL);

  return g_object_new (LEGBA_TYPE_ROOM, "signaller", signaller, "bin", bin,
      NULL);
}

/**
 * legba_room_get_signaller:
 * @self: a #LegbaRoom
 *
 * Gets the signaller the room reaches the network through.
 *
 * Returns: (transfer none): the #LegbaRoom:signaller
 */
LegbaSignaller *
legba_room_get_signaller (LegbaRoom * self)
{
  g_return_val_if_fail (LEGBA_IS_ROOM (self), NULL);

  return self->signaller;
}

/**
 * legba_room_get_bin:
 * @self: a #LegbaRoom
 *
 * Gets the bin the room makes its peer connections in.
 *
 * Returns: (transfer none): the #LegbaRoom:bin
 */
GstBin *
legba_room_get_bin (LegbaRoom * self)
{
  g_return_val_if_fail (LEGBA_IS_ROOM (self), NULL);

  return self->bin;
}

/**
 * legba_room_get_state:
 * @self: a #LegbaRoom
 *
 * Gets the state of the room, its #LegbaRoom:state property.
 *
 * Returns: the #LegbaRoom:state
 */
LegbaRoomState
legba_room_get_state (LegbaRoom * self)
{
  g_return_val_if_fail (LEGBA_IS_ROOM (self), LEGBA_ROOM_STATE_DISCONNECTED);

  return self->state;
}

/**
 * legba_room_get_participant_id:
 * @self: a #LegbaRoom
 *
 * Gets the local participant's id in the room, chosen at the first connect
 * and kept across reconnects.
 *
 * Returns: (transfer none) (nullable): the local participant id, or %NULL
 *   before the first connect
 */
const char *
legba_room_get_participant_id (LegbaRoom * self)
{
  g_return_val_if_fail (LEGBA_IS_ROOM (self), NULL);

  return self->participant_id;
}

/**
 * legba_room_get_participants:
 * @self: a #LegbaRoom
 *
 * The other participants, in the order they were listed; watch
 * #GListModel::items-changed for arrivals and departures.
 *
 * Returns: (transfer none): a #GListModel of #LegbaParticipant
 */
GListModel *
legba_room_get_participants (LegbaRoom * self)
{
  g_return_val_if_fail (LEGBA_IS_ROOM (self), NULL);

  return G_LIST_MODEL (self->participants);
}

/**
 * legba_room_find_participant:
 * @self: a #LegbaRoom
 * @participant_id: a participant id
 *
 * Looks up one of the listed participants of the room by its participant
 * id.
 *
 * Returns: (transfer none) (nullable): the listed participant with that id
 */
LegbaParticipant *
legba_room_find_participant (LegbaRoom * self, const char *participant_id)
{
  g_return_val_if_fail (LEGBA_IS_ROOM (self), NULL);
  g_return_val_if_fail (participant_id != NULL, NULL);

  return legba_room_core_find (self->core, participant_id);
}

static gboolean
connect_cancelled (gpointer data)
{
  LegbaRoom *self = data;
  GCancellable *cancellable;

  if (self->connect_task == NULL)
    return G_SOURCE_REMOVE;
  cancellable = g_task_get_cancellable (self->connect_task);
  if (cancellable == NULL || !g_cancellable_is_cancelled (cancellable))
    return G_SOURCE_REMOVE;
  remove_all_participants (self, TRUE);
  legba_signaller_leave (self->signaller);
  set_state (self, LEGBA_ROOM_STATE_DISCONNECTED);
  legba_clear_source (&self->stats_source);
  legba_room_stop_playout (self);
  complete_connect (self, g_error_new_literal (G_IO_ERROR,
          G_IO_ERROR_CANCELLED, "Joining the room was cancelled"));
  return G_SOURCE_REMOVE;
}

static void
on_connect_cancelled (GCancellable * cancellable, LegbaRoom * self)
{
  /* emitted on the thread that cancelled: hand over to the room's */
  legba_room_invoke (self, connect_cancelled, g_object_ref (self),
      g_object_unref);
}

/**
 * legba_room_connect_async:
 * @self: a #LegbaRoom
 * @cancellable: (nullable): cancels joining (not the room once joined:
 *   use legba_room_disconnect())
 * @callback: called on the room's main context when the room is joined
 *   or joining failed
 * @user_data: for @callback
 *
 * Joins #LegbaRoom:room as #LegbaRoom:identity. The state becomes
 * %LEGBA_ROOM_STATE_CONNECTING; @callback is called once the room is
 * joined, the participants already there are listed and signals can be
 * sent (state %LEGBA_ROOM_STATE_CONNECTED), or when joining failed:
 * unknown configuration (%LEGBA_ROOM_ERROR_INVALID), the server could not
 * be reached (%LEGBA_ROOM_ERROR_UNREACHABLE: joining fails at the first
 * failed attempt, while a joined room reconnects on its own), refused
 * (%LEGBA_ROOM_ERROR_REFUSED), full (%LEGBA_ROOM_ERROR_FULL), or
 * legba_room_disconnect() was called (%LEGBA_ROOM_ERROR_CLOSED).
 */
void
legba_room_connect_async (LegbaRoom * self, GCancellable * cancellable,
    GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr (GTask) task = NULL;
  g_autoptr (GError) error = NULL;

  g_return_if_fail (LEGBA_IS_ROOM (self));

  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, legba_room_connect_async);
  if (self->state != LEGBA_ROOM_STATE_DISCONNECTED &&
      self->state != LEGBA_ROOM_STATE_FAILED) {
    g_task_return_new_error (task, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_INVALID,
        "The room is already %s", legba_enum_nick (LEGBA_TYPE_ROOM_STATE,
            self->state));
    return;
  }
  if (self->room_name == NULL || self->identity == NULL) {
    g_task_return_new_error (task, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_INVALID,
        "Set the room and the identity before connecting");
    return;
  }
  if (self->participant_id == NULL ||
      !g_str_has_prefix (self->participant_id, self->identity) ||
      self->participant_id[strlen (self->identity)] != '-') {
    g_free (self->participant_id);
    self->participant_id =
        legba_signaller_generate_participant_id (self->identity);
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_PARTICIPANT_ID]);
  }
  /* TURN credentials come with this join, when the server has any */
  if (self->ice_servers != NULL) {
    g_clear_pointer (&self->ice_servers, g_strfreev);
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_ICE_SERVERS]);
  }
  if (!legba_signaller_join (self->signaller, self->room_name,
          self->participant_id, self->identity, self->display_name, &error)) {
    g_task_return_new_error (task, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_INVALID,
        "Cannot join room %s: %s", self->room_name, error->message);
    return;
  }
  legba_room_core_set_local_id (self->core, self->participant_id);
  /* the DTLS key is made while the room is joined, not on the first
   * peer connection's path */
  legba_room_prepare ();
  self->connect_task = g_steal_pointer (&task);
  set_state (self, LEGBA_ROOM_STATE_CONNECTING);
  legba_room_restart_stats (self);
  legba_room_start_playout (self);
  if (cancellable != NULL)
    self->cancel_handler = g_cancellable_connect (cancellable,
        G_CALLBACK (on_connect_cancelled), self, NULL);
}

/**
 * legba_room_connect_finish:
 * @self: a #LegbaRoom
 * @result: the result @callback was given
 * @error: return location for a #GError
 *
 * Finishes legba_room_connect_async().
 *
 * Returns: %TRUE when the room was joined, else %FALSE with @error set
 */
gboolean
legba_room_connect_finish (LegbaRoom * self, GAsyncResult * result,
    GError ** error)
{
  g_return_val_if_fail (LEGBA_IS_ROOM (self), FALSE);
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);

  return g_task_propagate_boolean (G_TASK (result), error);
}

/**
 * legba_room_disconnect:
 * @self: a #LegbaRoom
 *
 * Leaves the room: says `bye` on every peer connection (best effort),
 * closes them, reports every participant as gone (their tracks first) and
 * leaves the signalling room. The state becomes
 * %LEGBA_ROOM_STATE_DISCONNECTED. A pending connect fails with
 * %LEGBA_ROOM_ERROR_CLOSED. Local tracks stay, for a later connect.
 */
void
legba_room_disconnect (LegbaRoom * self)
{
  g_return_if_fail (LEGBA_IS_ROOM (self));

  if (self->state == LEGBA_ROOM_STATE_DISCONNECTED)
    return;
  remove_all_participants (self, self->state != LEGBA_ROOM_STATE_FAILED);
  legba_signaller_leave (self->signaller);
  legba_clear_source (&self->stats_source);
  legba_room_stop_playout (self);
  set_state (self, LEGBA_ROOM_STATE_DISCONNECTED);
  complete_connect (self, g_error_new_literal (LEGBA_ROOM_ERROR,
          LEGBA_ROOM_ERROR_CLOSED, "The room was left before it was joined"));
}
