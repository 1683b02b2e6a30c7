/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Receiving a LegbaRoom's application data (docs/room-protocol.md §6) and
 * the backend's events (§7): the envelopes read, the sync- signals, the
 * peer connections' inboxes reported on the room's context, the data
 * channels watched and the hooks of the peer connection
 * (legba-room-peer.c, legba-room-tap.c).
 *
 * The room takes its channels' messages on the thread of their SCTP
 * stream, before webrtcbin (legba-room-tap.c); a message the tap leaves to
 * webrtcbin comes from webrtcbin's on-message-string or on-message-data,
 * on its own thread (one per peer connection). Handlers of the sync-
 * signals, once enabled, get them on that thread, parsed by the stream's
 * or the channel's own parser; what the room's context has to see (a
 * message someone handles there, a reserved topic, a malformed message) is
 * queued on the peer (under its lock) and reported, in order, by one
 * dispatch per batch on the room's main context.
 */
#include <legba/room/legba-room-data-shared.h>
#include <legba/common/legba-json.h>

/* the channel of the message being reported on this thread, plus one */
static GPrivate receiving_key;

/* A message for the room's context: one allocation, its link in the inbox
 * and, for a text message, the text (and a NUL) included. */
typedef struct
{
  GList link;                   /* data: the Incoming */
  GBytes *bytes;                /* a binary message; NULL for text */
  gsize size;
  LegbaReliability reliability;
  char text[];
} Incoming;

/* (lock: peer->lock) */
struct _LegbaPeerData
{
  GQueue inbox;                 /* Incoming */
  gboolean scheduled;           /* inbox_source is ready to empty the inbox */
  GSource *inbox_source;        /* on the room's context, until the peer
                                 * closes */
  GPtrArray *watches;           /* Watch, of the channels whose signals we
                                 * hold */
  gsize received;               /* (atomic) reported by the sync- signals
                                 * alone, not yet in the room's counts */
};

/* A data channel of the room's: its handlers' data, held by each of them.
 * Its messages come to on_string() and on_data() only when the tap left
 * them to webrtcbin (legba-room-tap.c). */
typedef struct
{
  LegbaPeer *peer;              /* owned */
  GstWebRTCDataChannel *channel;        /* owned */
  LegbaReliability reliability;
  /* the sync- signals', made on first need: used on the thread that
   * reports the channel's messages, one at a time */
  JsonParser *parser;
} Watch;

static void
watch_clear (gpointer data)
{
  Watch *w = data;

  legba_peer_unref (w->peer);
  g_object_unref (w->channel);
  g_clear_object (&w->parser);
}

static void
watch_unref (gpointer w)
{
  g_atomic_rc_box_release_full (w, watch_clear);
}

static void
watch_closure_unref (gpointer w, GClosure * closure)
{
  watch_unref (w);
}

/**
 * legba_room_get_received_reliability:
 * @self: a #LegbaRoom
 *
 * In a handler of #LegbaRoom::data-received, #LegbaRoom::bytes-received
 * or their sync- variants, on the thread that emits it: the channel the
 * message came on (§7 events count as reliable).
 *
 * Returns: the reliability of the message being reported
 */
LegbaReliability
legba_room_get_received_reliability (LegbaRoom * self)
{
  gpointer rel = g_private_get (&receiving_key);

  g_return_val_if_fail (LEGBA_IS_ROOM (self), LEGBA_RELIABILITY_RELIABLE);

  return rel ? GPOINTER_TO_INT (rel) - 1 : LEGBA_RELIABILITY_RELIABLE;
}

/**
 * legba_room_enable_sync_data_emission:
 * @self: a #LegbaRoom
 *
 * Makes the room emit #LegbaRoom::sync-data-received and
 * #LegbaRoom::sync-bytes-received, which it does not by default (as
 * GstBus's sync-message needs gst_bus_enable_sync_message_emission()): a
 * message is then parsed on the thread it arrives on. Each call needs a
 * legba_room_disable_sync_data_emission() of its own; any thread.
 */
void
legba_room_enable_sync_data_emission (LegbaRoom * self)
{
  g_return_if_fail (LEGBA_IS_ROOM (self));

  g_atomic_int_inc (&self->data->sync_enabled);
}

/**
 * legba_room_disable_sync_data_emission:
 * @self: a #LegbaRoom
 *
 * Undoes one legba_room_enable_sync_data_emission(): once every one is
 * undone, the sync- signals are no longer emitted.
 */
void
legba_room_disable_sync_data_emission (LegbaRoom * self)
{
  g_return_if_fail (LEGBA_IS_ROOM (self));
  g_return_if_fail (g_atomic_int_get (&self->data->sync_enabled) > 0);

  g_atomic_int_add (&self->data->sync_enabled, -1);
}

/* ---- Receiving ---- */

static void
report_malformed (LegbaRoomData * d, LegbaParticipant * p, const char *what)
{
  g_autofree char *message = g_strdup_printf ("Participant %s sent %s; it "
      "was dropped", p->id, what);

  d->malformed++;
  d->room->events->report (d->room, LEGBA_ROOM_ERROR_MALFORMED, message);
}

static void
handle_mute (LegbaRoomData * d, LegbaParticipant * p, JsonNode * data)
{
  JsonObject *object = JSON_NODE_HOLDS_OBJECT (data) ?
      json_node_get_object (data) : NULL;
  JsonNode *audio = object ? json_object_get_member (object, "audio") : NULL;
  JsonNode *video = object ? json_object_get_member (object, "video") : NULL;
  Recipient *r;
  gboolean audio_muted, video_muted;

  if (audio == NULL || video == NULL ||
      json_node_get_value_type (audio) != G_TYPE_BOOLEAN ||
      json_node_get_value_type (video) != G_TYPE_BOOLEAN) {
    report_malformed (d, p, "a " MUTE_TOPIC " message without booleans "
        "audio and video");
    return;
  }
  audio_muted = json_node_get_boolean (audio);
  video_muted = json_node_get_boolean (video);
  g_mutex_lock (&d->lock);
  if ((r = g_hash_table_lookup (d->recipients, p->id)) != NULL) {
    r->mute_known = TRUE;
    r->audio_muted = audio_muted;
    r->video_muted = video_muted;
  }
  g_mutex_unlock (&d->lock);
  g_signal_emit (d->room, data_signals[SIGNAL_MUTE_CHANGED], 0, p, audio_muted,
      video_muted);
}

/* LegbaRoom's reliability of the message reported on this thread, which
 * it returns to restore it afterwards (emissions can nest) */
static LegbaReliability
set_receiving (LegbaReliability rel)
{
  gpointer now = GINT_TO_POINTER (rel + 1);
  gpointer before = g_private_get (&receiving_key);

  /* mostly the same as the message before: no write */
  if (before != now)
    g_private_set (&receiving_key, now);
  return before ? GPOINTER_TO_INT (before) - 1 : LEGBA_RELIABILITY_RELIABLE;
}

/* What parse_envelope() made of a text message; the problems name it. */
static const char *const envelope_problems[] = {
  NULL,
  "a text message that is not JSON as a room reads it",
  "a message whose topic is not a string",
  "a text message that is not a {\"topic\", \"data\"} object",
};

/* A text message's envelope, as parse_envelope() read it. */
typedef struct
{
  const char *topic;            /* NULL, topic_buf or topic_owned */
  JsonNode *data;               /* the parser's */
  char *topic_owned;
  char topic_buf[64];
} Envelope;

static void
envelope_clear (Envelope * e)
{
  g_clear_pointer (&e->topic_owned, g_free);
}

static const char *const envelope_keys[] = { "topic", "data", NULL };

/* §6: a JSON object {"topic": T, "data": D}, D required, T a string,
 * absent or null. The text is checked against RFC 8259 (UTF-8, no NUL,
 * nesting bounded: legba-json.h; and integers within 64 bits, which
 * json-glib would wrap round) with the spans of its two members noted;
 * json-glib then builds D alone, from its own span, so the envelope costs
 * no tree of its own. A topic without escapes is copied as it is; one with
 * escapes is read by json-glib. Returns 0, or an index of
 * envelope_problems, with the reason the text is not JSON in @why when it
 * is given; @e->data belongs to @parser until its next load. */
static guint
parse_envelope (JsonParser * parser, const char *text, gsize size,
    Envelope * e, char **why)
{
  LegbaJsonSpan spans[2];
  const LegbaJsonSpan *topic = &spans[0], *data = &spans[1];

  e->topic = NULL;
  e->data = NULL;
  e->topic_owned = NULL;
  if (!legba_json_check_strict_full (text, size, LEGBA_JSON_CHECK_INT64,
          envelope_keys, spans, why))
    return 1;
  /* members are noted only when the text is an object */
  if (data->start == NULL)
    return 3;
  if (topic->start != NULL && topic->start[0] != 'n') {
    if (topic->start[0] != '"')
      return 2;
    if (legba_json_span_get_plain_string (topic, e->topic_buf,
            sizeof e->topic_buf)) {
      e->topic = e->topic_buf;
    } else {
      if (!json_parser_load_from_data (parser, topic->start, topic->len, NULL))
        return 1;
      e->topic = e->topic_owned =
          g_strdup (json_node_get_string (json_parser_get_root (parser)));
    }
  }
  if (!json_parser_load_from_data (parser, data->start, data->len, NULL))
    return 1;
  e->data = json_parser_get_root (parser);
  return 0;
}

static gboolean
topic_is_reserved (const char *topic)
{
  return topic != NULL && g_str_has_prefix (topic, RESERVED_PREFIX);
}

/* @via: the connection the message came on, NULL when it is closed. */
static void
handle_text (LegbaRoomData * d, LegbaParticipant * p, LegbaPeer * via,
    const char *text, gsize size)
{
  Envelope e;
  g_autofree char *why = NULL;
  guint problem = parse_envelope (d->parser, text, size, &e, &why);

  if (problem != 0) {
    g_autofree char *what = why == NULL ? NULL :
        g_strdup_printf ("%s (%s)", envelope_problems[problem], why);

    report_malformed (d, p, what ? what : envelope_problems[problem]);
  } else if (e.topic != NULL && strcmp (e.topic, MUTE_TOPIC) == 0)
    handle_mute (d, p, e.data);
  else if (e.topic != NULL && strcmp (e.topic, SFU_PROBE_TOPIC) == 0) {
    /* §8: the SFU relays p's messages to this participant */
    if (via != NULL && via->sfu_subscriber && via->participant->peer == via)
      legba_room_switch_probed (d->room, via);
  } else if (topic_is_reserved (e.topic))
    GST_INFO ("dropping a message from %s on unknown reserved topic %s",
        p->id, e.topic);
  else
    g_signal_emit (d->room, data_signals[SIGNAL_DATA_RECEIVED], 0, p, e.topic,
        e.data);
  envelope_clear (&e);
}

static void
handle_incoming (LegbaRoomData * d, LegbaParticipant * p, LegbaPeer * via,
    Incoming * in)
{
  gsize size = in->size;
  LegbaReliability before;
  Recipient *r;

  g_mutex_lock (&d->lock);
  if ((r = g_hash_table_lookup (d->recipients, p->id)) != NULL)
    r->received++;
  g_mutex_unlock (&d->lock);
  d->received++;
  GST_LOG ("a message of %" G_GSIZE_FORMAT " bytes from %s", size, p->id);
  /* §6: what we accept is what our SDP says, GStreamer's default */
  if (size > LEGBA_ROOM_DEFAULT_MAX_MESSAGE_SIZE) {
    g_autofree char *what = g_strdup_printf ("a message of %" G_GSIZE_FORMAT
        " bytes, over the limit of %d", size,
        LEGBA_ROOM_DEFAULT_MAX_MESSAGE_SIZE);

    report_malformed (d, p, what);
    return;
  }
  before = set_receiving (in->reliability);
  if (in->bytes == NULL)
    handle_text (d, p, via, in->text, size);
  else
    g_signal_emit (d->room, data_signals[SIGNAL_BYTES_RECEIVED], 0, p,
        in->bytes);
  set_receiving (before);
}

static void
incoming_free (Incoming * in)
{
  g_clear_pointer (&in->bytes, g_bytes_unref);
  g_free (in);
}

static void
inbox_clear (GQueue * inbox)
{
  GList *link;

  while ((link = g_queue_pop_head_link (inbox)) != NULL)
    incoming_free (link->data);
}

/* On the room's context. */
static gboolean
empty_inbox (gpointer data)
{
  /* a handler may close the peer and drop the room's reference */
  LegbaPeer *peer = legba_peer_ref (data);
  GQueue batch;
  GList *link;

  g_mutex_lock (&peer->lock);
  batch = peer->data->inbox;
  g_queue_init (&peer->data->inbox);
  peer->data->scheduled = FALSE;
  g_mutex_unlock (&peer->lock);
  while ((link = g_queue_pop_head_link (&batch)) != NULL) {
    /* a handler may have closed the peer or left the room */
    if (peer->room != NULL)
      handle_incoming (peer->room->data, peer->participant, peer, link->data);
    incoming_free (link->data);
  }
  legba_peer_unref (peer);
  return G_SOURCE_CONTINUE;
}

/* A source of the room's context that stays attached while the peer is
 * open: the connection's thread marks it ready when the inbox gets the first
 * message of a batch and wakes the context, so a message costs no source
 * of its own, and emptying the inbox writes nothing to the context's
 * wakeup (as g_source_set_ready_time() would). */
typedef struct
{
  GSource source;
  gint ready;                   /* atomic */
} InboxSource;

static gboolean
inbox_prepare (GSource * source, gint * timeout)
{
  *timeout = -1;
  return g_atomic_int_get (&((InboxSource *) source)->ready);
}

static gboolean
inbox_check (GSource * source)
{
  return g_atomic_int_get (&((InboxSource *) source)->ready);
}

static gboolean
inbox_dispatch (GSource * source, GSourceFunc callback, gpointer data)
{
  g_atomic_int_set (&((InboxSource *) source)->ready, FALSE);
  return callback (data);
}

static GSourceFuncs inbox_funcs = {
  .prepare = inbox_prepare,
  .check = inbox_check,
  .dispatch = inbox_dispatch,
};

static GSource *
inbox_source_new (LegbaPeer * peer)
{
  GSource *source = g_source_new (&inbox_funcs, sizeof (InboxSource));

  g_source_set_callback (source, empty_inbox, peer, NULL);
  g_source_set_static_name (source, "legba-room-inbox");
  g_source_attach (source, peer->room->context);
  return source;
}

/* On the thread the message arrived on: reports a message, JSON text or
 * @bytes, with the sync- signals when they are enabled and the message is
 * one to report, parsed by *@parser (made on first need). TRUE when
 * nothing is left for the room's context: no handler waits for it there,
 * and it is well formed and on no reserved topic. */
static gboolean
report_sync (LegbaPeer * peer, LegbaReliability rel, JsonParser ** parser,
    const char *text, gsize size, GBytes * bytes)
{
  /* valid until the peer's threads stopped, which closing the peer
   * waits for before it lets the room go */
  LegbaRoom *room = peer->room;
  LegbaReliability before;
  Envelope e = { NULL, };
  gboolean later;

  if (room == NULL || !g_atomic_int_get (&room->data->sync_enabled))
    return FALSE;
  /* over the limit, malformed or reserved (legba.mute): the room's
   * context reports it */
  if ((bytes ? g_bytes_get_size (bytes) : size) >
      LEGBA_ROOM_DEFAULT_MAX_MESSAGE_SIZE)
    return FALSE;
  if (bytes == NULL) {
    if (*parser == NULL)
      *parser = json_parser_new_immutable ();
    if (parse_envelope (*parser, text, size, &e, NULL) != 0 ||
        topic_is_reserved (e.topic)) {
      envelope_clear (&e);
      return FALSE;
    }
  }
  later = g_signal_has_handler_pending (room,
      data_signals[bytes ? SIGNAL_BYTES_RECEIVED : SIGNAL_DATA_RECEIVED], 0,
      FALSE);
  if (!later)
    g_atomic_pointer_add (&peer->data->received, 1);
  before = set_receiving (rel);
  if (bytes != NULL)
    g_signal_emit (room, data_signals[SIGNAL_SYNC_BYTES_RECEIVED], 0,
        peer->participant, bytes);
  else
    g_signal_emit (room, data_signals[SIGNAL_SYNC_DATA_RECEIVED], 0,
        peer->participant, e.topic, e.data);
  set_receiving (before);
  envelope_clear (&e);
  return !later;
}

/* On the thread the message arrived on: for the room's context, @text
 * (of @size bytes) or @bytes (taken). */
static void
receive (LegbaPeer * peer, const char *text, gsize size, GBytes * bytes,
    LegbaReliability rel)
{
  Incoming *in;
  gboolean schedule;

  if (bytes == NULL) {
    in = g_malloc (G_STRUCT_OFFSET (Incoming, text) + size + 1);
    memcpy (in->text, text, size);
    in->text[size] = '\0';
    in->size = size;
  } else {
    in = g_malloc (sizeof (Incoming));
    in->size = g_bytes_get_size (bytes);
  }
  in->link.data = in;
  in->link.prev = in->link.next = NULL;
  in->bytes = bytes;
  in->reliability = rel;
  GST_LOG ("pc %s: a message of %" G_GSIZE_FORMAT " bytes for the room's "
      "context", peer->pc, in->size);
  g_mutex_lock (&peer->lock);
  g_queue_push_tail_link (&peer->data->inbox, &in->link);
  schedule = !peer->data->scheduled;
  peer->data->scheduled = TRUE;
  /* under the lock: legba_peer_data_close() takes the source away under
   * it before destroying it */
  if (schedule && peer->data->inbox_source != NULL) {
    GMainContext *context = g_source_get_context (peer->data->inbox_source);

    g_atomic_int_set (&((InboxSource *) peer->data->inbox_source)->ready, TRUE);
    /* a thread that holds the context checks its sources before it
     * polls again */
    if (!g_main_context_is_owner (context))
      g_main_context_wakeup (context);
  }
  g_mutex_unlock (&peer->lock);
}

/* On the thread a message of the peer's arrived on, which the room takes
 * from its channel: reports it. */
void
legba_peer_data_take (LegbaPeer * peer, LegbaReliability reliability,
    JsonParser ** parser, const char *text, gsize size, GBytes * bytes)
{
  if (!report_sync (peer, reliability, parser, text, size, bytes))
    receive (peer, text, size, bytes ? g_bytes_ref (bytes) : NULL, reliability);
}

static void
on_string (GstWebRTCDataChannel * c, const char *str, Watch * w)
{
  legba_peer_data_take (w->peer, w->reliability, &w->parser, str ? str : "",
      str ? strlen (str) : 0, NULL);
}

static void
on_data (GstWebRTCDataChannel * c, GBytes * data, Watch * w)
{
  g_autoptr (GBytes) empty = data ? NULL : g_bytes_new (NULL, 0);

  legba_peer_data_take (w->peer, w->reliability, &w->parser, NULL, 0,
      data ? data : empty);
}

static void
on_low (GstWebRTCDataChannel * c, Watch * w)
{
  legba_peer_invoke (w->peer, data_channel_low,
      GINT_TO_POINTER (w->reliability), NULL);
}

/* ---- Hooks of the peer connection (legba-room-peer.c) ---- */

static void
connect_watch (Watch * w, const char *name, GCallback callback)
{
  g_signal_connect_data (w->channel, name, callback,
      g_atomic_rc_box_acquire (w), watch_closure_unref, 0);
}

/* (lock: peer->lock) Makes the peer's data, unless it is closing. */
static gboolean
open_locked (LegbaPeer * peer)
{
  if (peer->closing)
    return FALSE;
  if (peer->data == NULL) {
    peer->data = g_new0 (LegbaPeerData, 1);
    g_queue_init (&peer->data->inbox);
    peer->data->inbox_source = inbox_source_new (peer);
    peer->data->watches = g_ptr_array_new_with_free_func (watch_unref);
  }
  return TRUE;
}

/* Any thread: before a message of the peer's is taken
 * (legba_peer_data_take). FALSE when the peer is closing. */
gboolean
legba_peer_data_open (LegbaPeer * peer)
{
  gboolean open;

  g_mutex_lock (&peer->lock);
  open = open_locked (peer);
  g_mutex_unlock (&peer->lock);
  return open;
}

/* Any thread: whether the SCTP stream @stream is that of a channel the
 * room watches (one it made: a channel the other side made is known by
 * the tap from its DCEP open), and its reliability. */
gboolean
legba_peer_data_stream_reliability (LegbaPeer * peer, guint16 stream,
    LegbaReliability * reliability)
{
  g_autoptr (GPtrArray) watches = g_ptr_array_new_with_free_func (watch_unref);
  gboolean found = FALSE;

  /* the ids are read without the peer's lock: webrtcbin's */
  g_mutex_lock (&peer->lock);
  for (guint i = 0; peer->data && peer->data->watches &&
      i < peer->data->watches->len; i++)
    g_ptr_array_add (watches,
        g_atomic_rc_box_acquire (peer->data->watches->pdata[i]));
  g_mutex_unlock (&peer->lock);
  for (guint i = 0; i < watches->len && !found; i++) {
    Watch *w = watches->pdata[i];
    gint id = -1;

    g_object_get (w->channel, "id", &id, NULL);
    if (id == stream) {
      *reliability = w->reliability;
      found = TRUE;
    }
  }
  return found;
}

/* Any thread: as soon as a channel exists (webrtcbin's on-data-channel
 * comes before the channel's first message), so nothing is missed. */
void
legba_peer_data_watch_channel (LegbaPeer * peer, GstWebRTCDataChannel * channel)
{
  g_autofree char *label = NULL;
  gboolean lossy;
  Watch *w;

  g_object_get (channel, "label", &label, NULL);
  if (g_strcmp0 (label, LEGBA_ROOM_CHANNEL_LOSSY) == 0)
    lossy = TRUE;
  else if (g_strcmp0 (label, LEGBA_ROOM_CHANNEL_RELIABLE) == 0 ||
      peer->sfu_subscriber)
    lossy = FALSE;
  else
    return;
  g_object_set (channel, "buffered-amount-low-threshold",
      (guint64) CHANNEL_LOW_WATER, NULL);
  g_mutex_lock (&peer->lock);
  if (!open_locked (peer)) {
    g_mutex_unlock (&peer->lock);
    return;
  }
  w = g_atomic_rc_box_new0 (Watch);
  w->peer = legba_peer_ref (peer);
  w->channel = g_object_ref (channel);
  w->reliability = lossy ? LEGBA_RELIABILITY_LOSSY : LEGBA_RELIABILITY_RELIABLE;
  g_ptr_array_add (peer->data->watches, w);
  connect_watch (w, "on-message-string", G_CALLBACK (on_string));
  connect_watch (w, "on-message-data", G_CALLBACK (on_data));
  connect_watch (w, "on-buffered-amount-low", G_CALLBACK (on_low));
  g_mutex_unlock (&peer->lock);
}

/* The peer is closing (peer->closing is set): no message is reported
 * any more, and the channels drop the references their handlers hold. */
void
legba_peer_data_close (LegbaPeer * peer)
{
  LegbaRoomData *d = peer->room->data;
  g_autoptr (GPtrArray) watches = NULL;
  GSource *inbox_source = NULL;
  Recipient *r;

  /* nothing is sent to its channels any more, from any thread */
  g_mutex_lock (&d->lock);
  r = g_hash_table_lookup (d->recipients, peer->participant->id);
  if (r != NULL && r->ready[LEGBA_RELIABILITY_RELIABLE] != NULL &&
      r->ready[LEGBA_RELIABILITY_RELIABLE] ==
      peer->channels[LEGBA_RELIABILITY_RELIABLE]) {
    for (guint i = 0; i < G_N_ELEMENTS (r->ready); i++)
      g_clear_object (&r->ready[i]);
    r->lossy_wanted = FALSE;
  }
  g_mutex_unlock (&d->lock);
  g_mutex_lock (&peer->lock);
  if (peer->data != NULL) {
    watches = g_steal_pointer (&peer->data->watches);
    inbox_source = g_steal_pointer (&peer->data->inbox_source);
  }
  g_mutex_unlock (&peer->lock);
  for (guint i = 0; watches != NULL && i < watches->len; i++) {
    Watch *w = watches->pdata[i];

    g_signal_handlers_disconnect_by_data (w->channel, w);
  }
  legba_clear_source (&inbox_source);
}

/* What a closed peer's participant had sent and the room's context had
 * not yet reported (it arrived while the connection closed, or the
 * context ran late): reported after the closing, as if the connection
 * had lived until then, unless the room was left meanwhile (as a
 * handler that leaves stops the reports of a batch). */
typedef struct
{
  GWeakRef room;
  LegbaParticipant *participant;
  GQueue inbox;
} Leftover;

static gboolean
report_leftover (gpointer data)
{
  Leftover *l = data;
  g_autoptr (LegbaRoom) room = g_weak_ref_get (&l->room);
  GList *link;

  while (room != NULL && room->state != LEGBA_ROOM_STATE_DISCONNECTED &&
      (link = g_queue_pop_head_link (&l->inbox)) != NULL) {
    handle_incoming (room->data, l->participant, NULL, link->data);
    incoming_free (link->data);
  }
  return G_SOURCE_REMOVE;
}

static void
leftover_free (gpointer data)
{
  Leftover *l = data;

  inbox_clear (&l->inbox);
  g_object_unref (l->participant);
  g_weak_ref_clear (&l->room);
  g_free (l);
}

/* The peer's threads have stopped: what the sync- signals alone
 * reported becomes the room's, and what waited for the room's context is
 * reported on it. */
void
legba_peer_data_closed (LegbaPeer * peer)
{
  LegbaRoomData *d = peer->room->data;
  Recipient *r;
  gsize received;

  if (peer->data == NULL)
    return;
  if (!g_queue_is_empty (&peer->data->inbox)) {
    Leftover *l = g_new0 (Leftover, 1);

    g_weak_ref_init (&l->room, peer->room);
    l->participant = g_object_ref (peer->participant);
    l->inbox = peer->data->inbox;
    g_queue_init (&peer->data->inbox);
    legba_room_invoke (peer->room, report_leftover, l, leftover_free);
  }
  /* stopped: nothing adds to it any more */
  received = g_atomic_pointer_get (&peer->data->received);
  peer->data->received = 0;
  d->received += received;
  g_mutex_lock (&d->lock);
  r = g_hash_table_lookup (d->recipients, peer->participant->id);
  if (r != NULL)
    r->received += received;
  g_mutex_unlock (&d->lock);
}

void
legba_peer_data_free (LegbaPeerData * data)
{
  if (data == NULL)
    return;
  inbox_clear (&data->inbox);
  legba_clear_source (&data->inbox_source);
  g_clear_pointer (&data->watches, g_ptr_array_unref);
  g_free (data);
}

/* Messages the sync- signals alone reported on the peer's streaming
 * threads, not yet in the room's counts. */
guint64
data_peer_received (LegbaPeer * peer)
{
  return peer->data ? g_atomic_pointer_get (&peer->data->received) : 0;
}

void
legba_peer_data_add_stats (LegbaPeer * peer, GstStructure * summary)
{
  LegbaRoomData *d = peer->room->data;
  Recipient *r;

  g_mutex_lock (&d->lock);
  r = g_hash_table_lookup (d->recipients, peer->participant->id);
  gst_structure_set (summary,
      "data-messages-sent", G_TYPE_UINT64, r ? r->sent : 0,
      "data-messages-received", G_TYPE_UINT64,
      (r ? r->received : 0) + data_peer_received (peer),
      "data-lossy-dropped", G_TYPE_UINT64, r ? r->lossy_dropped : 0,
      "data-not-delivered", G_TYPE_UINT64, r ? r->not_delivered : 0,
      "data-queued-bytes", G_TYPE_UINT64,
      r ? (guint64) (r->out[0].bytes + r->out[1].bytes) : 0, NULL);
  g_mutex_unlock (&d->lock);
}

/* §7: events of the application's backend are data from `server` */
void
data_on_event_received (LegbaSignaller * signaller, const char *event,
    JsonNode * data, LegbaRoom * room)
{
  LegbaRoomData *d = room->data;
  LegbaReliability before;

  /* the room's own (docs/room-protocol.md §8), not the
   * application's */
  if (strcmp (event, LEGBA_ROOM_TOPOLOGY_EVENT) == 0)
    return;
  before = set_receiving (LEGBA_RELIABILITY_RELIABLE);

  if (g_atomic_int_get (&d->sync_enabled))
    g_signal_emit (room, data_signals[SIGNAL_SYNC_DATA_RECEIVED], 0, d->server,
        event, data);
  g_signal_emit (room, data_signals[SIGNAL_DATA_RECEIVED], 0, d->server, event,
      data);
  set_receiving (before);
}
