/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * An SFU room on a Janus 1.1 VideoRoom (docs/rooms.md, "SFU rooms";
 * docs/room-protocol.md §8). Over one LegbaJanus session:
 *
 * - a publisher handle joins the VideoRoom (`ptype` publisher, `display`
 *   the local participant id, the room's `pin`, this participant's
 *   `token`). Its joined reply and its events list the other
 *   publishers, and say when one leaves. Once the participant has
 *   something to send (a local track, or a message to everyone), it
 *   publishes the local tracks and the `legba` data channel through one
 *   webrtcbin, a LegbaPeer that offers as in the mesh: Janus answers,
 *   candidates are trickled. Until then it only receives: a viewer costs
 *   Janus one connection per publisher it receives, none of its own.
 * - each other publisher's feed is received through a subscriber handle
 *   of its own (`ptype` subscriber, `streams` [{feed}]): Janus offers,
 *   a receive-only LegbaPeer answers, `start`. That peer is the
 *   participant's connection (`participant->peer`), so its pads, stats
 *   and data carry the participant's id as in the mesh. A feed is
 *   matched to a participant by its `display`; one whose participant the
 *   presence channel does not list yet waits for it.
 *
 * Data to everyone goes over the publisher's channel, which Janus relays
 * to every subscriber; data to named recipients is refused
 * (legba_room_data_use_sfu()).
 *
 * The room moves (docs/room-protocol.md §8): a `legba:topology` naming
 * another Janus or VideoRoom replaces the client by one for the new
 * room. A session that dies once it was up (its WebSocket closed, Janus
 * timed it out) closes its connections and opens a new one to the same
 * Janus, which joins the same VideoRoom as the same participant, again
 * after RETRY_FIRST_MS, doubling up to RETRY_MAX_MS, while it fails: its
 * Janus may be fine and only this participant's connection to it gone,
 * which no `legba:topology` follows. A topology naming another place
 * that comes meanwhile wins, as always; the failure is reported only
 * when neither has brought the room back within MOVE_WAIT_S.
 *
 * Threads: the room's main context, as everything of the room's.
 */
#include <legba/room/legba-room-data-private.h>
#include <legba/room/legba-room-janus.h>
#include <legba/common/legba-json.h>

#define VIDEOROOM "janus.plugin.videoroom"
#define PUBLISHER_PC "sfu-publisher"
/* How long a room whose SFU session died waits for the server to say
 * where the room was made again: the server notices a dead Janus within
 * seconds (docs/server.md, SFU rooms). */
#define MOVE_WAIT_S 15
/* A session lost is opened again after RETRY_FIRST_MS, and after twice
 * as long each time it fails again, at most RETRY_MAX_MS; an attempt
 * that has not joined within ATTEMPT_S failed. */
#define RETRY_FIRST_MS 250
#define RETRY_MAX_MS 4000
#define ATTEMPT_S 5

typedef struct
{
  LegbaSfuClient *client;
  guint64 id;                   /* Janus's feed id */
  char *display;                /* the publisher's participant id */
  guint64 handle;               /* its subscriber handle, 0 until attached */
  LegbaParticipant *participant;        /* owned, once listed */
  LegbaPeer *peer;              /* owned: the subscriber connection */
  char *offer;                  /* Janus's offer, until answered */
} Feed;

struct _LegbaSfuClient
{
  LegbaRoom *room;              /* unowned: the room owns the client */
  LegbaRoomSfu sfu;             /* copies */
  LegbaJanus *janus;
  guint64 publisher_handle;
  LegbaParticipant *local;      /* the publisher connection's own */
  LegbaPeer *publisher;         /* owned */
  gboolean joined;              /* the publisher handle is in the room */
  gboolean publish;             /* something to send: publish once joined */
  gboolean published;           /* the publisher connection was made */
  GHashTable *feeds;            /* feed id (guint64 *) -> Feed */
  GSource *move_wait;           /* the session died: until it is back */
  GSource *retry;               /* the next attempt, or its deadline */
  guint attempts;               /* since the session was lost */
  gint64 lost_at;               /* monotonic */
  gboolean gave_up;             /* the loss was reported: no more attempts */
  int lost_code;
  char *lost_why;
};

static const LegbaJanusEvents janus_events;

static void subscribe (LegbaSfuClient * self, guint64 id, const char *display);
static void session_lost (LegbaSfuClient * self, int code, const char *why);

static void
report (LegbaSfuClient * self, LegbaRoomError code, const char *format, ...)
G_GNUC_PRINTF (3, 4);

     static void
         report (LegbaSfuClient * self, LegbaRoomError code, const char *format,
    ...)
{
  va_list args;
  g_autofree char *message = NULL;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  legba_room_report (self->room, code, "%s", message);
}

/* ---- Peer connections ---- */

static void
close_peer (LegbaSfuClient * self, LegbaPeer ** peer)
{
  LegbaPeer *p = g_steal_pointer (peer);

  if (p == NULL)
    return;
  if (p->participant->peer == p) {
    p->participant->peer = NULL;
    legba_peer_unref (p);
  }
  g_hash_table_remove (self->room->peers, p->pc);
  legba_peer_close (p);
  legba_peer_unref (p);
  legba_room_congestion_update (self->room);
}

static LegbaPeer *
open_peer (LegbaSfuClient * self, LegbaParticipant * p, const char *pc,
    LegbaPeerRole role, const LegbaPeerEvents * events)
{
  g_autoptr (GError) error = NULL;
  LegbaPeer *peer = legba_peer_new_full (self->room, p, pc, role,
      LEGBA_PEER_SFU, events, &error);

  if (peer == NULL) {
    report (self, error->code, "%s", error->message);
    return NULL;
  }
  g_hash_table_insert (self->room->peers, peer->pc, peer);
  return peer;
}

/* §4's candidates signal, trickled one by one (the Janus API, trickle) */
static void
trickle (LegbaSfuClient * self, guint64 handle, JsonObject * signal)
{
  JsonNode *node = json_object_get_member (signal, "candidates");
  JsonArray *candidates = node && JSON_NODE_HOLDS_ARRAY (node) ?
      json_node_get_array (node) : NULL;

  for (guint i = 0; candidates && i < json_array_get_length (candidates); i++) {
    JsonNode *c = json_array_get_element (candidates, i);

    if (JSON_NODE_HOLDS_OBJECT (c))
      legba_janus_trickle (self->janus, handle,
          json_object_ref (json_node_get_object (c)));
  }
  if (json_object_get_boolean_member_with_default (signal, "end", FALSE))
    legba_janus_trickle (self->janus, handle, NULL);
}

static const char *
jsep_sdp (JsonObject * jsep, const char *type)
{
  if (jsep == NULL || g_strcmp0 (json_object_get_string_member_with_default
          (jsep, "type", NULL), type) != 0)
    return NULL;
  return json_object_get_string_member_with_default (jsep, "sdp", NULL);
}

static JsonObject *
reply_data (JsonObject * reply, JsonObject ** jsep)
{
  JsonNode *node = json_object_get_member (reply, "plugindata");
  JsonObject *plugindata = node && JSON_NODE_HOLDS_OBJECT (node) ?
      json_node_get_object (node) : NULL;

  node = json_object_get_member (reply, "jsep");
  if (jsep != NULL)
    *jsep = node && JSON_NODE_HOLDS_OBJECT (node) ?
        json_node_get_object (node) : NULL;
  node = plugindata ? json_object_get_member (plugindata, "data") : NULL;
  return node && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) :
      NULL;
}

/* The VideoRoom's error in a reply's data, NULL when none. */
static const char *
videoroom_error (JsonObject * data)
{
  if (data == NULL)
    return "no plugin data";
  return json_object_get_string_member_with_default (data, "error", NULL);
}

static guint64
id_of (JsonObject * object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_INT64)
    return 0;
  return (guint64) json_node_get_int (node);
}

static JsonObject *
join_body (LegbaSfuClient * self, const char *ptype)
{
  JsonObject *body = json_object_new ();

  json_object_set_string_member (body, "request", "join");
  json_object_set_string_member (body, "ptype", ptype);
  json_object_set_int_member (body, "room", (gint64) self->sfu.room);
  if (self->sfu.pin != NULL)
    json_object_set_string_member (body, "pin", self->sfu.pin);
  if (self->sfu.token != NULL)
    json_object_set_string_member (body, "token", self->sfu.token);
  return body;
}

/* ---- Feeds: receiving the other publishers ---- */

static void
feed_free (gpointer data)
{
  Feed *f = data;

  close_peer (f->client, &f->peer);
  if (f->handle != 0)
    legba_janus_detach (f->client->janus, f->handle);
  g_clear_object (&f->participant);
  g_free (f->display);
  g_free (f->offer);
  g_free (f);
}

static Feed *
feed_by_handle (LegbaSfuClient * self, guint64 handle)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->feeds);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    if (((Feed *) value)->handle == handle)
      return value;
  return NULL;
}

static Feed *
feed_by_peer (LegbaSfuClient * self, LegbaPeer * peer)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->feeds);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    if (((Feed *) value)->peer == peer)
      return value;
  return NULL;
}

static void answer_feed (LegbaSfuClient * self, Feed * f);

static void
unsubscribe (LegbaSfuClient * self, guint64 id)
{
  GHashTableIter iter;
  gpointer value;

  if (!g_hash_table_remove (self->feeds, &id))
    return;
  GST_INFO ("room %s: feed %" G_GUINT64_FORMAT " is gone",
      self->room->room_name, id);
  /* a later feed of the same participant waited for this one */
  g_hash_table_iter_init (&iter, self->feeds);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    answer_feed (self, value);
}

static void
subscriber_connected (LegbaPeer * peer)
{
  if (peer->participant->peer != peer)
    return;
  legba_participant_set_state (peer->participant,
      LEGBA_PARTICIPANT_STATE_CONNECTED);
}

static void
subscriber_reliable_open (LegbaPeer * peer)
{
  if (peer->participant->peer == peer)
    legba_room_switch_subscribed (peer->room, peer);
}

static void
subscriber_failed (LegbaPeer * peer, const char *why)
{
  LegbaSfuClient *self = peer->room->sfu;
  Feed *f = self ? feed_by_peer (self, peer) : NULL;

  if (f == NULL)
    return;
  legba_participant_set_state (peer->participant,
      LEGBA_PARTICIPANT_STATE_FAILED);
  report (self, LEGBA_ROOM_ERROR_PEER, "Could not receive participant %s "
      "from the SFU: %s", f->display, why);
  close_peer (self, &f->peer);
}

static void
on_started (guint64 handle, JsonObject * reply, const GError * error,
    gpointer user_data)
{
  LegbaSfuClient *self = user_data;
  const char *why = error ? error->message : videoroom_error (reply_data
      (reply, NULL));

  if (why != NULL && feed_by_handle (self, handle) != NULL)
    report (self, LEGBA_ROOM_ERROR_PEER, "The SFU did not start a feed: %s",
        why);
}

static void
subscriber_send_signal (LegbaPeer * peer, JsonObject * signal)
{
  LegbaSfuClient *self = peer->room->sfu;
  Feed *f = self ? feed_by_peer (self, peer) : NULL;
  const char *type = legba_json_object_get_string (signal, "type");
  JsonObject *body;

  if (f == NULL || type == NULL)
    return;
  if (strcmp (type, "answer") == 0) {
    body = json_object_new ();
    json_object_set_string_member (body, "request", "start");
    legba_janus_message (self->janus, f->handle, body, "answer",
        legba_json_object_get_string (signal, "sdp"), on_started, self);
  } else if (strcmp (type, "candidates") == 0) {
    trickle (self, f->handle, signal);
  }
}

/* A participant's stats are its subscriber connection's, with the
 * sending figures of the publisher connection (the estimate, the pacer,
 * the retransmissions towards Janus): what this participant sends
 * reaches every other through it. */
static void
peer_stats (LegbaPeer * peer, GstStructure * summary)
{
  LegbaSfuClient *self = peer->room->sfu;

  if (peer->participant->peer != peer) {
    gst_structure_free (summary);
    return;
  }
  if (self != NULL && self->publisher != NULL && self->publisher != peer)
    legba_peer_congestion_add_stats (self->publisher, summary);
  legba_participant_take_stats (peer->participant, summary);
}

static void
peer_lossy_open (LegbaPeer * peer)
{
}

static void
peer_error (LegbaPeer * peer, const GError * error)
{
  legba_room_report (peer->room, error->code, "%s", error->message);
}

static const LegbaPeerEvents subscriber_events = {
  .connected = subscriber_connected,
  .failed = subscriber_failed,
  .send_signal = subscriber_send_signal,
  .lossy_open = peer_lossy_open,
  .stats = peer_stats,
  .error = peer_error,
  .reliable_open = subscriber_reliable_open,
};

/* The feed's offer came and its participant is listed: answer. */
static void
answer_feed (LegbaSfuClient * self, Feed * f)
{
  g_autofree char *pc = NULL;
  g_autofree char *offer = NULL;

  if (f->offer == NULL || f->participant == NULL || f->peer != NULL)
    return;
  if (f->participant->peer != NULL) {
    /* its former feed, which Janus has not said gone yet (a publisher
     * that joined again): answered once that one goes */
    GST_INFO ("room %s: participant %s has a connection already",
        self->room->room_name, f->display);
    return;
  }
  offer = g_steal_pointer (&f->offer);
  pc = g_strdup_printf ("sfu-feed-%" G_GUINT64_FORMAT, f->id);
  f->peer = open_peer (self, f->participant, pc, LEGBA_PEER_ANSWERER,
      &subscriber_events);
  if (f->peer == NULL)
    return;
  f->participant->peer = legba_peer_ref (f->peer);
  legba_participant_set_state (f->participant,
      LEGBA_PARTICIPANT_STATE_CONNECTING);
  GST_INFO ("room %s: receiving %s from the SFU (feed %" G_GUINT64_FORMAT
      ")", self->room->room_name, f->display, f->id);
  legba_room_switch_feed (self->room, f->peer, offer);
  legba_peer_handle_offer (f->peer, offer);
}

static void
on_subscribed (guint64 handle, JsonObject * reply, const GError * error,
    gpointer user_data)
{
  LegbaSfuClient *self = user_data;
  Feed *f = feed_by_handle (self, handle);
  JsonObject *jsep = NULL;
  JsonObject *data = reply ? reply_data (reply, &jsep) : NULL;
  const char *why = error ? error->message : videoroom_error (data);
  const char *sdp = jsep_sdp (jsep, "offer");

  if (f == NULL)
    return;
  if (why == NULL && sdp == NULL)
    why = "no offer";
  if (why != NULL) {
    report (self, LEGBA_ROOM_ERROR_PEER, "Could not subscribe to %s: %s",
        f->display, why);
    return;
  }
  f->offer = g_strdup (sdp);
  answer_feed (self, f);
}

/* handle: the feed's id (the attach's tag) */
static void
on_subscriber_attached (guint64 feed_id, JsonObject * reply,
    const GError * error, gpointer user_data)
{
  LegbaSfuClient *self = user_data;
  JsonNode *node = reply ? json_object_get_member (reply, "data") : NULL;
  Feed *f = g_hash_table_lookup (self->feeds, &feed_id);
  guint64 handle;
  JsonObject *body;
  JsonArray *streams;
  JsonObject *stream;

  if (error != NULL || node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    return;
  handle = id_of (json_node_get_object (node), "id");
  if (f == NULL) {
    /* gone meanwhile */
    if (handle != 0)
      legba_janus_detach (self->janus, handle);
    return;
  }
  f->handle = handle;
  body = join_body (self, "subscriber");
  streams = json_array_new ();
  stream = json_object_new ();
  json_object_set_int_member (stream, "feed", (gint64) f->id);
  json_array_add_object_element (streams, stream);
  json_object_set_array_member (body, "streams", streams);
  legba_janus_message (self->janus, f->handle, body, NULL, NULL,
      on_subscribed, self);
}

static void
subscribe (LegbaSfuClient * self, guint64 id, const char *display)
{
  Feed *f;
  guint64 *key;

  if (id == 0 || display == NULL || g_hash_table_contains (self->feeds, &id)
      || g_strcmp0 (display, self->room->participant_id) == 0)
    return;
  f = g_new0 (Feed, 1);
  f->client = self;
  f->id = id;
  f->display = g_strdup (display);
  f->participant = legba_room_find_participant (self->room, display);
  if (f->participant != NULL)
    g_object_ref (f->participant);
  key = g_new (guint64, 1);
  *key = id;
  g_hash_table_insert (self->feeds, key, f);
  GST_INFO ("room %s: subscribing to %s (feed %" G_GUINT64_FORMAT ")",
      self->room->room_name, display, id);
  legba_janus_attach (self->janus, VIDEOROOM, id, on_subscriber_attached, self);
}

/* A VideoRoom `publishers` list: each one is subscribed to. */
static void
subscribe_all (LegbaSfuClient * self, JsonObject * data)
{
  JsonNode *node = json_object_get_member (data, "publishers");
  JsonArray *publishers = node && JSON_NODE_HOLDS_ARRAY (node) ?
      json_node_get_array (node) : NULL;

  for (guint i = 0; publishers && i < json_array_get_length (publishers); i++) {
    JsonNode *p = json_array_get_element (publishers, i);

    if (JSON_NODE_HOLDS_OBJECT (p))
      subscribe (self, id_of (json_node_get_object (p), "id"),
          json_object_get_string_member_with_default (json_node_get_object
              (p), "display", NULL));
  }
}

/* ---- Publishing ---- */

static void
on_published (guint64 handle, JsonObject * reply, const GError * error,
    gpointer user_data)
{
  LegbaSfuClient *self = user_data;
  JsonObject *jsep = NULL;
  JsonObject *data = reply ? reply_data (reply, &jsep) : NULL;
  const char *why = error ? error->message : videoroom_error (data);
  const char *sdp = jsep_sdp (jsep, "answer");

  if (self->publisher == NULL)
    return;
  if (why == NULL && sdp == NULL)
    why = "no answer";
  if (why != NULL) {
    report (self, LEGBA_ROOM_ERROR_PEER, "The SFU refused to take the "
        "participant's tracks: %s", why);
    return;
  }
  legba_peer_handle_answer (self->publisher, sdp);
}

static void
publisher_connected (LegbaPeer * peer)
{
  LegbaSfuClient *self = peer->room->sfu;

  if (self == NULL || self->publisher != peer)
    return;
  GST_INFO ("room %s: publishing to the SFU", self->room->room_name);
  if (!legba_room_switch_hold (self->room, peer))
    legba_room_data_peer_connected (self->room, peer);
}

static void
publisher_failed (LegbaPeer * peer, const char *why)
{
  LegbaSfuClient *self = peer->room->sfu;

  if (self == NULL || self->publisher != peer)
    return;
  report (self, LEGBA_ROOM_ERROR_PEER, "Could not publish to the SFU: %s", why);
  close_peer (self, &self->publisher);
}

static void
publisher_send_signal (LegbaPeer * peer, JsonObject * signal)
{
  LegbaSfuClient *self = peer->room->sfu;
  const char *type = legba_json_object_get_string (signal, "type");
  JsonObject *body;

  if (self == NULL || self->publisher != peer || type == NULL)
    return;
  if (strcmp (type, "offer") == 0) {
    body = json_object_new ();
    json_object_set_string_member (body, "request", "publish");
    legba_janus_message (self->janus, self->publisher_handle, body, "offer",
        legba_json_object_get_string (signal, "sdp"), on_published, self);
  } else if (strcmp (type, "candidates") == 0) {
    trickle (self, self->publisher_handle, signal);
  }
}

static void
publisher_lossy_open (LegbaPeer * peer)
{
  legba_room_data_lossy_open (peer->room, peer);
}

static const LegbaPeerEvents publisher_events = {
  .connected = publisher_connected,
  .failed = publisher_failed,
  .send_signal = publisher_send_signal,
  .lossy_open = publisher_lossy_open,
  .stats = peer_stats,
  .error = peer_error,
};

static gboolean
has_local_track (LegbaRoom * room)
{
  gboolean has;

  g_mutex_lock (&room->lock);
  has = room->tracks[LEGBA_TRACK_KIND_VIDEO] != NULL ||
      room->tracks[LEGBA_TRACK_KIND_AUDIO] != NULL;
  g_mutex_unlock (&room->lock);
  return has;
}

/* Once joined and with something to send, once per session: what it
 * publishes is decided then (nothing is renegotiated). */
static void
publish (LegbaSfuClient * self)
{
  if (!self->joined || !self->publish || self->published)
    return;
  self->published = TRUE;
  self->publisher = open_peer (self, self->local, PUBLISHER_PC,
      LEGBA_PEER_OFFERER, &publisher_events);
  if (self->publisher == NULL)
    return;
  self->local->peer = legba_peer_ref (self->publisher);
  legba_peer_start (self->publisher);
}

static void
on_joined (guint64 handle, JsonObject * reply, const GError * error,
    gpointer user_data)
{
  LegbaSfuClient *self = user_data;
  JsonObject *data = reply ? reply_data (reply, NULL) : NULL;
  const char *why = error ? error->message : videoroom_error (data);

  if (why == NULL && g_strcmp0 (json_object_get_string_member_with_default
          (data, "videoroom", NULL), "joined") != 0)
    why = "an unexpected reply to join";
  if (why != NULL && (self->move_wait != NULL || self->gave_up)) {
    /* rejoining: Janus may not have let the former session go yet, or
     * a new token is on its way (once given up, the loss was reported) */
    session_lost (self, LEGBA_ROOM_ERROR_REFUSED, why);
    return;
  }
  if (why != NULL) {
    report (self, LEGBA_ROOM_ERROR_REFUSED, "The SFU refused the "
        "participant: %s", why);
    return;
  }
  GST_INFO ("room %s: joined the SFU's room %" G_GUINT64_FORMAT " as feed %"
      G_GUINT64_FORMAT, self->room->room_name, self->sfu.room,
      id_of (data, "id"));
  if (self->move_wait != NULL) {
    GST_INFO ("room %s: the SFU session is back after %" G_GINT64_FORMAT
        " ms, %u attempts", self->room->room_name,
        (g_get_monotonic_time () - self->lost_at) / 1000, self->attempts);
    legba_clear_source (&self->move_wait);
    legba_clear_source (&self->retry);
    self->attempts = 0;
  }
  self->gave_up = FALSE;
  self->joined = TRUE;
  subscribe_all (self, data);
  if (has_local_track (self->room))
    self->publish = TRUE;
  if (!self->publish)
    GST_INFO ("room %s: nothing to send yet: receiving only",
        self->room->room_name);
  publish (self);
}

static void
on_publisher_attached (guint64 handle, JsonObject * reply,
    const GError * error, gpointer user_data)
{
  LegbaSfuClient *self = user_data;
  JsonNode *node = reply ? json_object_get_member (reply, "data") : NULL;
  JsonObject *body;

  if (error != NULL || node == NULL || !JSON_NODE_HOLDS_OBJECT (node)) {
    if (self->move_wait != NULL || self->gave_up)
      session_lost (self, LEGBA_ROOM_ERROR_UNREACHABLE, error ?
          error->message : "Janus attached no handle");
    return;
  }
  self->publisher_handle = id_of (json_node_get_object (node), "id");
  body = join_body (self, "publisher");
  json_object_set_string_member (body, "display", self->room->participant_id);
  legba_janus_message (self->janus, self->publisher_handle, body, NULL, NULL,
      on_joined, self);
}

/* ---- The session's events ---- */

static void
janus_ready (gpointer user_data)
{
  LegbaSfuClient *self = user_data;

  legba_janus_attach (self->janus, VIDEOROOM, 0, on_publisher_attached, self);
}

/* The VideoRoom's events on the publisher handle (publishers, leaving,
 * unpublished) and Janus's renegotiations on a subscriber's. */
static void
janus_event (guint64 handle, JsonObject * data, JsonObject * jsep,
    gpointer user_data)
{
  LegbaSfuClient *self = user_data;
  guint64 gone;

  if (handle != self->publisher_handle) {
    GST_DEBUG ("room %s: an event of subscriber handle %" G_GUINT64_FORMAT,
        self->room->room_name, handle);
    return;
  }
  subscribe_all (self, data);
  if ((gone = id_of (data, "unpublished")) != 0 ||
      (gone = id_of (data, "leaving")) != 0)
    unsubscribe (self, gone);
}

static void
janus_hangup (guint64 handle, const char *reason, gpointer user_data)
{
  LegbaSfuClient *self = user_data;

  GST_INFO ("room %s: Janus hung up handle %" G_GUINT64_FORMAT ": %s",
      self->room->room_name, handle, reason);
}

/* Every connection through the session goes, with its pads; the
 * participants received are connecting again. */
static void
drop_connections (LegbaSfuClient * self)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->feeds);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    Feed *f = value;

    if (f->peer != NULL)
      legba_participant_set_state (f->participant,
          LEGBA_PARTICIPANT_STATE_CONNECTING);
  }
  g_hash_table_remove_all (self->feeds);
  close_peer (self, &self->publisher);
}

static gboolean
move_wait_expired (gpointer user_data)
{
  LegbaSfuClient *self = user_data;

  g_clear_pointer (&self->move_wait, g_source_unref);
  legba_clear_source (&self->retry);
  self->gave_up = TRUE;
  report (self, self->lost_code, "The SFU session failed, could not be "
      "opened again and the room was not made again elsewhere within %u s: "
      "%s", MOVE_WAIT_S, self->lost_why);
  return G_SOURCE_REMOVE;
}

static gboolean
attempt_expired (gpointer user_data)
{
  LegbaSfuClient *self = user_data;

  g_clear_pointer (&self->retry, g_source_unref);
  session_lost (self, LEGBA_ROOM_ERROR_UNREACHABLE, "Janus did not let the "
      "participant join again in time");
  return G_SOURCE_REMOVE;
}

/* A new session on the same Janus, for the same VideoRoom: janus_ready
 * joins it as before. */
static gboolean
retry_session (gpointer user_data)
{
  LegbaSfuClient *self = user_data;

  g_clear_pointer (&self->retry, g_source_unref);
  GST_INFO ("room %s: opening the SFU session again (attempt %u)",
      self->room->room_name, self->attempts);
  legba_janus_free (self->janus);
  self->janus = legba_janus_new (self->sfu.url, self->sfu.token,
      &janus_events, self);
  self->retry = g_timeout_source_new_seconds (ATTEMPT_S);
  g_source_set_callback (self->retry, attempt_expired, self, NULL);
  g_source_attach (self->retry, g_main_context_get_thread_default ());
  return G_SOURCE_REMOVE;
}

/* The session, or an attempt to open it again, is gone: its connections
 * close and the next attempt is due after a back-off. The session
 * itself is freed by that attempt, outside the callback of its own that
 * got here. */
static void
session_lost (LegbaSfuClient * self, int code, const char *why)
{
  guint delay = RETRY_MAX_MS;

  if (self->gave_up)
    return;
  if (self->published) {
    /* the messages queued for the closed publisher connection may be
     * lost (docs/rooms.md); later ones wait for the next */
    legba_room_data_use_sfu (self->room, NULL);
    legba_room_data_use_sfu (self->room, self->local);
  }
  drop_connections (self);
  self->publisher_handle = 0;
  self->joined = FALSE;
  self->published = FALSE;
  /* what is reported if it does not come back: the first loss's code
   * (a refusal of a later attempt is not the cause), the last why */
  g_free (self->lost_why);
  self->lost_why = g_strdup (why);
  if (self->move_wait == NULL) {
    self->lost_code = code;
    self->lost_at = g_get_monotonic_time ();
    /* to the millisecond: a second timer may fire up to a second early */
    self->move_wait = g_timeout_source_new (MOVE_WAIT_S * 1000);
    g_source_set_callback (self->move_wait, move_wait_expired, self, NULL);
    g_source_attach (self->move_wait, g_main_context_get_thread_default ());
  }
  if (self->attempts < 5)
    delay = MIN (RETRY_FIRST_MS << self->attempts, RETRY_MAX_MS);
  self->attempts++;
  legba_clear_source (&self->retry);
  self->retry = g_timeout_source_new (delay);
  g_source_set_callback (self->retry, retry_session, self, NULL);
  g_source_attach (self->retry, g_main_context_get_thread_default ());
}

static void
janus_failed (int code, const char *why, gpointer user_data)
{
  LegbaSfuClient *self = user_data;

  if (self->gave_up) {
    /* an attempt still under way when the loss was reported */
    drop_connections (self);
    return;
  }
  if (self->publisher_handle == 0 && self->move_wait == NULL) {
    report (self, code, "The SFU session failed: %s", why);
    return;
  }
  /* Either only this participant's connection to its Janus went, and a
   * new session joins again, or its Janus died, and the server makes the
   * room again on another and says so with a new legba:topology. */
  GST_WARNING ("room %s: the SFU session failed (%s); opening it again, "
      "unless the room is made again elsewhere", self->room->room_name, why);
  session_lost (self, code, why);
}

static const LegbaJanusEvents janus_events = {
  .ready = janus_ready,
  .event = janus_event,
  .hangup = janus_hangup,
  .failed = janus_failed,
};

/* ---- The room's ---- */

/* docs/room-protocol.md §8: the server tells each member of an
 * SFU room, just before it joined, where its SFU is; whoever publishes
 * the event on the room's channel, the room takes it once per join. */
static void
on_event_received (LegbaSignaller * signaller, const char *event,
    JsonNode * data, LegbaRoom * self)
{
  g_autoptr (LegbaRoomSfu) sfu = NULL;
  g_autofree char *why = NULL;

  if (strcmp (event, LEGBA_ROOM_TOPOLOGY_EVENT) != 0)
    return;
  if (!legba_room_core_parse_topology (data, &sfu, &why)) {
    legba_room_report (self, LEGBA_ROOM_ERROR_SIGNALLING, "Ignoring a "
        "malformed %s event: %s", event, why);
    return;
  }
  /* An SFU room's members get it just before they are in the room (the
   * room core then makes no mesh connection), an auto room's while in it. */
  if (self->state != LEGBA_ROOM_STATE_CONNECTING &&
      self->state != LEGBA_ROOM_STATE_CONNECTED &&
      self->state != LEGBA_ROOM_STATE_RECONNECTING) {
    GST_INFO ("room %s: a topology event outside the room, ignored",
        self->room_name);
    return;
  }
  if (sfu != NULL && self->sfu != NULL &&
      !legba_sfu_client_is_for (self->sfu, sfu)) {
    GST_INFO ("room %s: the room moved to Janus %s (room %" G_GUINT64_FORMAT
        ")", self->room_name, sfu->url, sfu->room);
    drop_connections (self->sfu);
    legba_sfu_client_free (self->sfu);
    self->sfu = legba_sfu_client_new (self, sfu);
    return;
  }
  if (sfu != NULL && self->sfu != NULL) {
    /* The same room: a later subscription's (a reconnection's), whose
     * token replaces the one the server took back. */
    legba_sfu_client_set_token (self->sfu, sfu->token);
    return;
  }
  if (sfu == NULL || self->sfu != NULL) {
    GST_DEBUG ("room %s: topology %s, nothing changes", self->room_name,
        sfu ? "sfu" : "mesh");
    return;
  }
  legba_room_switch_begin (self);
  legba_room_core_use_sfu (self->core);
  self->sfu = legba_sfu_client_new (self, sfu);
}

gulong
legba_room_sfu_watch_topology (LegbaRoom * room)
{
  return g_signal_connect (room->signaller, "event-received",
      G_CALLBACK (on_event_received), room);
}

LegbaSfuClient *
legba_sfu_client_new (LegbaRoom * room, const LegbaRoomSfu * sfu)
{
  LegbaSfuClient *self = g_new0 (LegbaSfuClient, 1);

  self->room = room;
  self->sfu.url = g_strdup (sfu->url);
  self->sfu.room = sfu->room;
  self->sfu.pin = g_strdup (sfu->pin);
  self->sfu.token = g_strdup (sfu->token);
  self->feeds = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free,
      feed_free);
  self->local = legba_participant_new (room->participant_id, NULL);
  legba_room_data_use_sfu (room, self->local);
  GST_INFO ("room %s: an SFU room, on Janus at %s (room %" G_GUINT64_FORMAT
      ")", room->room_name, sfu->url, sfu->room);
  self->janus = legba_janus_new (sfu->url, sfu->token, &janus_events, self);
  return self;
}

/* The same Janus and VideoRoom: the topology of a later subscription
 * (a reconnection's), nothing that moves the room. */
gboolean
legba_sfu_client_is_for (LegbaSfuClient * self, const LegbaRoomSfu * sfu)
{
  return self->sfu.room == sfu->room && g_strcmp0 (self->sfu.url,
      sfu->url) == 0;
}

void
legba_sfu_client_set_token (LegbaSfuClient * self, const char *token)
{
  if (g_strcmp0 (self->sfu.token, token) == 0)
    return;
  GST_INFO ("room %s: a new SFU token", self->room->room_name);
  g_free (self->sfu.token);
  self->sfu.token = g_strdup (token);
  legba_janus_set_token (self->janus, token);
}

void
legba_sfu_client_free (LegbaSfuClient * self)
{
  if (self == NULL)
    return;
  legba_clear_source (&self->move_wait);
  legba_clear_source (&self->retry);
  g_free (self->lost_why);
  g_hash_table_remove_all (self->feeds);
  close_peer (self, &self->publisher);
  legba_room_data_use_sfu (self->room, NULL);
  legba_janus_free (self->janus);
  g_hash_table_unref (self->feeds);
  g_clear_object (&self->local);
  g_free (self->sfu.url);
  g_free (self->sfu.pin);
  g_free (self->sfu.token);
  g_free (self);
}

void
legba_room_sfu_publish (LegbaRoom * room)
{
  LegbaSfuClient *self = room->sfu;

  if (self == NULL)
    return;
  self->publish = TRUE;
  publish (self);
}

void
legba_sfu_client_participant_joined (LegbaSfuClient * self,
    LegbaParticipant * p)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->feeds);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    Feed *f = value;

    if (f->participant == NULL && strcmp (f->display, p->id) == 0) {
      f->participant = g_object_ref (p);
      answer_feed (self, f);
      return;
    }
  }
}

void
legba_sfu_client_participant_left (LegbaSfuClient * self, LegbaParticipant * p)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->feeds);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    if (((Feed *) value)->participant == p) {
      g_hash_table_iter_remove (&iter);
      return;
    }
}
