/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Application data over a LegbaRoom's data channels (docs/room-protocol.md §6)
 * and the backend's events (§7).
 *
 * Sending: every participant of the room is a recipient, with an outbox
 * per channel. A message goes straight into the recipient's data channel
 * while the channel is open, nothing waits before it and webrtcbin holds
 * at most CHANNEL_HIGH_WATER unsent bytes of it (its buffered-amount);
 * otherwise it waits in the outbox, bounded by LEGBA_ROOM_DATA_QUEUE_BYTES,
 * until the channel opens or webrtcbin signals buffered-amount-low. One
 * recipient's outbox never holds another's messages back. The recipients
 * are the room's lock's (d->lock), so that any thread may send: under it
 * the room calls nothing but the data channels' own send and
 * buffered-amount (which take the channel's lock alone); what a send
 * leaves for the room's context (a queue to drain, a lossy channel to
 * make) is done there by the kick source, and signals and reports are
 * made once the lock is released.
 *
 * Receiving: the room takes its channels' messages on the thread of their
 * SCTP stream, before webrtcbin (legba-room-tap.c); a message the tap
 * leaves to webrtcbin comes from webrtcbin's on-message-string or
 * on-message-data, on its own thread (one per peer connection). Handlers
 * of the sync- signals, once enabled, get them on that thread, parsed by
 * the stream's or the channel's own parser; what the room's context has to
 * see (a message someone handles there, a reserved topic, a malformed
 * message) is queued on the peer (under its lock) and reported, in order,
 * by one dispatch per batch on the room's main context.
 */
#include <legba/room/legba-room-data-private.h>
#include <legba/common/legba-json.h>

/* Backpressure: a channel takes more while webrtcbin holds at most this
 * many unsent bytes of it, and asks for more once it is down to LOW. Two
 * to four maximal messages: enough to keep SCTP busy, little latency. */
#define CHANNEL_HIGH_WATER (256 * 1024)
#define CHANNEL_LOW_WATER (64 * 1024)

/* §6 */
#define RESERVED_PREFIX "legba."
#define MUTE_TOPIC "legba.mute"

G_DEFINE_ENUM_TYPE (LegbaReliability, legba_reliability,
    G_DEFINE_ENUM_VALUE (LEGBA_RELIABILITY_RELIABLE, "reliable"),
    G_DEFINE_ENUM_VALUE (LEGBA_RELIABILITY_LOSSY, "lossy"));

enum
{
  SIGNAL_DATA_RECEIVED,
  SIGNAL_BYTES_RECEIVED,
  SIGNAL_SYNC_DATA_RECEIVED,
  SIGNAL_SYNC_BYTES_RECEIVED,
  SIGNAL_READY_TO_SEND,
  SIGNAL_MUTE_CHANGED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

/* the channel of the message being reported on this thread, plus one */
static GPrivate receiving_key;

/* One message on the wire, shared by its recipients' outboxes. A text
 * message's bytes end with a NUL that is not part of it. */
typedef struct
{
  GBytes *bytes;
  gsize size;
  gboolean text;
} Message;

typedef struct
{
  GQueue queue;                 /* Message, in order */
  gsize bytes;
  gboolean owed;                /* a message was refused: ready-to-send due */
} Outbox;

/* What the room knows of one participant's data, by participant id, from
 * its joining to its leaving (lock: LegbaRoomData.lock). */
typedef struct
{
  char *id;
  Outbox out[2];                /* by LegbaReliability */
  /* the channels of its connected peer connection that are open, owned;
   * cleared when that connection closes */
  GstWebRTCDataChannel *ready[2];
  gboolean lossy_wanted;        /* a lossy message asked for the channel,
                                 * which is on its way */
  gboolean kicked;              /* the context has its outboxes to drain */
  guint64 max_message_size;     /* 0 until its channels open */
  guint64 sent;
  guint64 received;
  guint64 lossy_dropped;
  guint64 not_delivered;
  gboolean mute_known;
  gboolean audio_muted;
  gboolean video_muted;
} Recipient;

struct _LegbaRoomData
{
  LegbaRoom *room;
  GMutex lock;                  /* recipients, sent, lossy_dropped,
                                 * not_delivered */
  GHashTable *recipients;       /* id -> Recipient: the room's participants */
  GSource *kick;                /* on the room's context: drains the
                                 * outboxes a send kicked */
  LegbaParticipant *server;     /* §7: the sender of backend events */
  JsonParser *parser;
  GMutex generator_lock;
  JsonGenerator *generator;     /* writes the envelopes' data */
  gulong event_handler;
  gulong left_handler;
  gboolean audio_muted;
  gboolean video_muted;
  guint64 sent;
  guint64 lossy_dropped;
  guint64 not_delivered;
  guint64 received;             /* on the room's context alone, as
                                 * malformed */
  guint64 malformed;
  gint sync_enabled;            /* (atomic) */
};

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

/* ---- Messages ---- */

static Message *
message_new (GBytes * bytes, gsize size, gboolean text)
{
  Message *m = g_atomic_rc_box_new0 (Message);

  m->bytes = bytes;
  m->size = size;
  m->text = text;
  return m;
}

static void
message_clear (gpointer data)
{
  Message *m = data;

  g_bytes_unref (m->bytes);
}

static void
message_unref (gpointer data)
{
  g_atomic_rc_box_release_full (data, message_clear);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Message, message_unref);

/* §6: {"topic": T, "data": D}, T absent when NULL. Written straight into
 * one buffer by the room's generator: no intermediate strings, no
 * generator made per message. */
static Message *
envelope_new (LegbaRoomData * d, const char *topic, JsonNode * data)
{
  GString *text = g_string_sized_new (128);
  gsize size;

  g_string_append_c (text, '{');
  if (topic != NULL) {
    g_string_append (text, "\"topic\":");
    legba_json_append_string (text, topic);
    g_string_append_c (text, ',');
  }
  g_string_append (text, "\"data\":");
  g_mutex_lock (&d->generator_lock);
  json_generator_set_root (d->generator, data);
  json_generator_to_gstring (d->generator, text);
  json_generator_set_root (d->generator, NULL);
  g_mutex_unlock (&d->generator_lock);
  g_string_append_c (text, '}');
  size = text->len;
  return message_new (g_string_free_to_bytes (text), size, TRUE);
}

/* ---- Recipients ---- */

static void
outbox_clear (Outbox * o)
{
  g_queue_clear_full (&o->queue, message_unref);
  o->bytes = 0;
}

static void
recipient_free (gpointer data)
{
  Recipient *r = data;

  for (guint i = 0; i < G_N_ELEMENTS (r->out); i++) {
    outbox_clear (&r->out[i]);
    g_clear_object (&r->ready[i]);
  }
  g_free (r->id);
  g_free (r);
}

static void
set_ready (Recipient * r, LegbaReliability rel, GstWebRTCDataChannel * channel)
{
  if (channel != NULL)
    g_object_ref (channel);
  g_clear_object (&r->ready[rel]);
  r->ready[rel] = channel;
}

/* Has the room's context drain the recipient's outboxes. */
static void
kick (LegbaRoomData * d, Recipient * r)
{
  if (r->kicked)
    return;
  r->kicked = TRUE;
  g_source_set_ready_time (d->kick, 0);
}

/* The channel of a recipient that takes messages now, if any. A
 * connected participant's lossy channel is asked for the first time a
 * lossy message is for it (§6); its messages wait for it. */
static GstWebRTCDataChannel *
ready_channel (LegbaRoomData * d, Recipient * r, LegbaReliability rel)
{
  if (rel == LEGBA_RELIABILITY_LOSSY && r->ready[rel] == NULL &&
      r->ready[LEGBA_RELIABILITY_RELIABLE] != NULL && !r->lossy_wanted) {
    r->lossy_wanted = TRUE;
    kick (d, r);
  }
  return r->ready[rel];
}

static guint64
buffered_amount (GstWebRTCDataChannel * channel)
{
  guint64 amount = 0;

  g_object_get (channel, "buffered-amount", &amount, NULL);
  return amount;
}

/* NULL but in the benchmarks (legba_room_data_set_send_func) */
static LegbaRoomDataSendFunc send_func;

void
legba_room_data_set_send_func (LegbaRoomDataSendFunc func)
{
  send_func = func;
}

static gboolean
channel_send (GstWebRTCDataChannel * channel, Message * m, GError ** error)
{
  if (G_UNLIKELY (send_func != NULL))
    return send_func (channel, m->text ? g_bytes_get_data (m->bytes,
            NULL) : NULL, m->text ? NULL : m->bytes, error);
  if (m->text)
    return gst_webrtc_data_channel_send_string_full (channel,
        g_bytes_get_data (m->bytes, NULL), error);
  return gst_webrtc_data_channel_send_data_full (channel, m->bytes, error);
}

/* On the room's context: hands the recipient's waiting messages to its
 * channel while it takes them, then reports what could not go and
 * tells when a full queue has drained. */
static void
drain (LegbaRoomData * d, const char *id, LegbaReliability rel)
{
  g_autoptr (GPtrArray) dropped = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *ready_id = NULL;
  GstWebRTCDataChannel *channel;
  LegbaParticipant *p;
  Recipient *r;
  Outbox *o;

  g_mutex_lock (&d->lock);
  r = g_hash_table_lookup (d->recipients, id);
  o = r ? &r->out[rel] : NULL;
  /* nothing waits, or no channel takes it yet */
  if (o == NULL || (g_queue_is_empty (&o->queue) && !o->owed) ||
      (channel = ready_channel (d, r, rel)) == NULL) {
    g_mutex_unlock (&d->lock);
    return;
  }
  while (!g_queue_is_empty (&o->queue) &&
      buffered_amount (channel) <= CHANNEL_HIGH_WATER) {
    Message *m = g_queue_peek_head (&o->queue);
    g_autoptr (GError) error = NULL;

    if (!channel_send (channel, m, &error)) {
      if (!g_error_matches (error, GST_WEBRTC_ERROR,
              GST_WEBRTC_ERROR_TYPE_ERROR)) {
        /* the channel is closing: the messages wait for the next one */
        GST_INFO ("data for %s waits: %s", r->id, error->message);
        break;
      }
      /* larger than the peer takes, which was not known when queued */
      r->not_delivered++;
      d->not_delivered++;
      g_ptr_array_add (dropped, g_strdup_printf ("A message of %"
              G_GSIZE_FORMAT " bytes queued for participant %s is larger "
              "than it accepts (%" G_GUINT64_FORMAT " bytes); it was "
              "dropped", m->size, r->id, r->max_message_size));
    } else {
      GST_LOG ("sent %s a message of %" G_GSIZE_FORMAT " bytes that waited",
          r->id, m->size);
      r->sent++;
      d->sent++;
    }
    g_queue_pop_head (&o->queue);
    o->bytes -= m->size;
    message_unref (m);
  }
  if (g_queue_is_empty (&o->queue) && o->owed) {
    o->owed = FALSE;
    ready_id = g_strdup (r->id);
  }
  g_mutex_unlock (&d->lock);
  for (guint i = 0; i < dropped->len; i++)
    d->room->events->report (d->room, LEGBA_ROOM_ERROR_TOO_LARGE,
        dropped->pdata[i]);
  if (ready_id != NULL &&
      (p = d->room->events->find_participant (d->room, ready_id)) != NULL)
    g_signal_emit (d->room, signals[SIGNAL_READY_TO_SEND], 0, p, rel);
}

/* On the room's context: what sends left for it. */
static gboolean
kick_dispatch (GSource * source, GSourceFunc callback, gpointer data)
{
  LegbaRoomData *d = data;
  g_autoptr (GPtrArray) ids = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) lossy = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter iter;
  gpointer value;

  g_source_set_ready_time (source, -1);
  g_mutex_lock (&d->lock);
  g_hash_table_iter_init (&iter, d->recipients);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    Recipient *r = value;

    if (!r->kicked)
      continue;
    r->kicked = FALSE;
    g_ptr_array_add (ids, g_strdup (r->id));
    if (r->lossy_wanted && r->ready[LEGBA_RELIABILITY_LOSSY] == NULL)
      g_ptr_array_add (lossy, g_strdup (r->id));
  }
  g_mutex_unlock (&d->lock);
  for (guint i = 0; i < lossy->len; i++) {
    Recipient *r;

    if (d->room->events->open_lossy (d->room, lossy->pdata[i]))
      continue;
    /* none was made: the next lossy message asks again */
    g_mutex_lock (&d->lock);
    if ((r = g_hash_table_lookup (d->recipients, lossy->pdata[i])) != NULL)
      r->lossy_wanted = FALSE;
    g_mutex_unlock (&d->lock);
  }
  for (guint i = 0; i < ids->len; i++) {
    drain (d, ids->pdata[i], LEGBA_RELIABILITY_RELIABLE);
    drain (d, ids->pdata[i], LEGBA_RELIABILITY_LOSSY);
  }
  return G_SOURCE_CONTINUE;
}

static GSourceFuncs kick_funcs = {
  .dispatch = kick_dispatch,
};

/* Takes a message for one recipient: into its channel, or its outbox.
 * FALSE when a reliable message cannot be taken (outbox full). Under the
 * lock. */
static gboolean
deliver (LegbaRoomData * d, Recipient * r, LegbaReliability rel, Message * m)
{
  Outbox *o = &r->out[rel];
  GstWebRTCDataChannel *channel = ready_channel (d, r, rel);

  if (channel != NULL && g_queue_is_empty (&o->queue)) {
    if (buffered_amount (channel) <= CHANNEL_HIGH_WATER) {
      g_autoptr (GError) error = NULL;

      if (channel_send (channel, m, &error)) {
        GST_LOG ("sent %s a message of %" G_GSIZE_FORMAT " bytes", r->id,
            m->size);
        r->sent++;
        d->sent++;
        return TRUE;
      }
      GST_INFO ("data for %s waits: %s", r->id, error->message);
    } else if (rel == LEGBA_RELIABILITY_LOSSY) {
      /* latest value wins: a congested lossy channel drops */
      r->lossy_dropped++;
      d->lossy_dropped++;
      return TRUE;
    }
  }
  if (o->bytes + m->size > LEGBA_ROOM_DATA_QUEUE_BYTES) {
    if (rel == LEGBA_RELIABILITY_RELIABLE) {
      o->owed = TRUE;
      r->not_delivered++;
      d->not_delivered++;
      return FALSE;
    }
    while (!g_queue_is_empty (&o->queue) &&
        o->bytes + m->size > LEGBA_ROOM_DATA_QUEUE_BYTES) {
      Message *old = g_queue_pop_head (&o->queue);

      o->bytes -= old->size;
      message_unref (old);
      r->lossy_dropped++;
      d->lossy_dropped++;
    }
  }
  g_queue_push_tail (&o->queue, g_atomic_rc_box_acquire (m));
  o->bytes += m->size;
  if (channel != NULL)
    kick (d, r);
  return TRUE;
}

static guint64
recipient_limit (Recipient * r)
{
  return r->max_message_size > 0 ? r->max_message_size :
      LEGBA_ROOM_DEFAULT_MAX_MESSAGE_SIZE;
}

static void
append_name (GString ** list, const char *id, const char *why)
{
  if (*list == NULL)
    *list = g_string_new (NULL);
  else
    g_string_append (*list, ", ");
  g_string_append_printf (*list, "%s (%s)", id, why);
}

static gboolean
send_message (LegbaRoom * room, Message * m, LegbaReliability rel,
    const char *const *to, GError ** error)
{
  LegbaRoomData *d = room->data;
  g_autoptr (GPtrArray) targets = g_ptr_array_new ();
  g_autoptr (GString) failed = NULL;
  GHashTableIter iter;
  gpointer value;

  g_mutex_lock (&d->lock);
  if (to == NULL) {
    g_hash_table_iter_init (&iter, d->recipients);
    while (g_hash_table_iter_next (&iter, NULL, &value))
      g_ptr_array_add (targets, value);
  } else {
    for (guint i = 0; to[i] != NULL; i++) {
      Recipient *r = g_hash_table_lookup (d->recipients, to[i]);

      if (r == NULL)
        append_name (&failed, to[i], "not in the room");
      else if (!g_ptr_array_find (targets, r, NULL))
        g_ptr_array_add (targets, r);
    }
  }
  /* §6: never truncated; refused before anything leaves */
  for (guint i = 0; i < targets->len; i++) {
    Recipient *r = targets->pdata[i];

    if (m->size > recipient_limit (r)) {
      g_set_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_TOO_LARGE,
          "The message is %" G_GSIZE_FORMAT " bytes, larger than participant "
          "%s accepts (max-message-size %" G_GUINT64_FORMAT "); nothing was "
          "sent", m->size, r->id, recipient_limit (r));
      g_mutex_unlock (&d->lock);
      return FALSE;
    }
  }
  for (guint i = 0; i < targets->len; i++) {
    Recipient *r = targets->pdata[i];

    if (!deliver (d, r, rel, m))
      append_name (&failed, r->id, "its queue is full");
  }
  g_mutex_unlock (&d->lock);
  if (failed != NULL) {
    g_set_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_NOT_DELIVERED,
        "Not delivered to %s", failed->str);
    return FALSE;
  }
  return TRUE;
}

/**
 * legba_room_send_json:
 * @self: a #LegbaRoom
 * @data: the message, any JSON value (the envelope's `data`)
 * @topic: (nullable): its topic; topics starting with `legba.` are the
 *   room's own
 * @reliability: which channel carries it
 * @to: (nullable) (array zero-terminated=1): participant ids; %NULL for
 *   every participant of the room
 * @error: return location for a #GError
 *
 * Sends @data to each recipient, independently (docs/room-protocol.md §6). A
 * recipient whose channel is not open yet, or cannot take more now, keeps
 * the message in its own queue (in order, at most
 * %LEGBA_ROOM_DATA_QUEUE_BYTES per channel); one slow recipient never
 * delays the others. On the lossy channel a congested recipient drops the
 * message (counted in the stats) instead of queueing it.
 *
 * Fails with %LEGBA_ROOM_ERROR_TOO_LARGE, sending nothing, when the
 * message is larger than a recipient accepts (its SDP `max-message-size`,
 * %LEGBA_ROOM_DEFAULT_MAX_MESSAGE_SIZE when absent); with
 * %LEGBA_ROOM_ERROR_NOT_DELIVERED, naming them, when some recipients could
 * not take it (their queue is full, or they are not in the room): the
 * others got it, and #LegbaRoom::ready-to-send tells when a full queue has
 * drained; with %LEGBA_ROOM_ERROR_INVALID for a reserved topic.
 *
 * Unlike the rest of the room, this may be called from any thread (a
 * streaming thread, a handler of #LegbaRoom::sync-data-received): the
 * messages one thread sends reach each recipient in the order it sent
 * them. Signals and errors that follow from it (#LegbaRoom::ready-to-send,
 * a queued message found too large) come on the room's main context.
 *
 * Returns: %TRUE when every recipient took the message
 */
gboolean
legba_room_send_json (LegbaRoom * self, JsonNode * data, const char *topic,
    LegbaReliability reliability, const char *const *to, GError ** error)
{
  g_autoptr (Message) m = NULL;

  g_return_val_if_fail (LEGBA_IS_ROOM (self), FALSE);
  g_return_val_if_fail (data != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (topic != NULL && g_str_has_prefix (topic, RESERVED_PREFIX)) {
    g_set_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_INVALID,
        "Topic %s is reserved: topics starting with " RESERVED_PREFIX
        " are the room's own", topic);
    return FALSE;
  }
  m = envelope_new (self->data, topic, data);
  return send_message (self, m, reliability, to, error);
}

/**
 * legba_room_send_bytes:
 * @self: a #LegbaRoom
 * @bytes: the message
 * @reliability: which channel carries it
 * @to: (nullable) (array zero-terminated=1): participant ids; %NULL for
 *   every participant of the room
 * @error: return location for a #GError
 *
 * Sends @bytes as one binary message (no topic), as
 * legba_room_send_json() sends JSON, with the same queueing and errors,
 * and from any thread as well; an empty message is refused
 * (%LEGBA_ROOM_ERROR_INVALID).
 *
 * Returns: %TRUE when every recipient took the message
 */
gboolean
legba_room_send_bytes (LegbaRoom * self, GBytes * bytes,
    LegbaReliability reliability, const char *const *to, GError ** error)
{
  g_autoptr (Message) m = NULL;

  g_return_val_if_fail (LEGBA_IS_ROOM (self), FALSE);
  g_return_val_if_fail (bytes != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  /* webrtcbin 1.22 fails its SCTP association on an empty message */
  if (g_bytes_get_size (bytes) == 0) {
    g_set_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_INVALID,
        "An empty binary message cannot be sent");
    return FALSE;
  }
  m = message_new (g_bytes_ref (bytes), g_bytes_get_size (bytes), FALSE);
  return send_message (self, m, reliability, to, error);
}

/**
 * legba_room_get_max_message_size:
 * @self: a #LegbaRoom
 * @participant_id: a participant id
 *
 * Any thread, as legba_room_send_json().
 *
 * Returns: the largest message, in bytes, @participant_id accepts: what
 *   its peer connection negotiated once its channels are open, else
 *   %LEGBA_ROOM_DEFAULT_MAX_MESSAGE_SIZE
 */
gsize
legba_room_get_max_message_size (LegbaRoom * self, const char *participant_id)
{
  LegbaRoomData *d;
  Recipient *r;
  gsize limit;

  g_return_val_if_fail (LEGBA_IS_ROOM (self), 0);
  g_return_val_if_fail (participant_id != NULL, 0);

  d = self->data;
  g_mutex_lock (&d->lock);
  r = g_hash_table_lookup (d->recipients, participant_id);
  limit = r ? recipient_limit (r) : LEGBA_ROOM_DEFAULT_MAX_MESSAGE_SIZE;
  g_mutex_unlock (&d->lock);
  return limit;
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

/**
 * legba_room_get_main_context:
 * @self: a #LegbaRoom
 *
 * Returns: (transfer none): the main context the room runs on, and whose
 *   thread must call it (but for legba_room_send_json(),
 *   legba_room_send_bytes(), legba_room_get_max_message_size() and the
 *   sync emission's switches, which any thread may call)
 */
GMainContext *
legba_room_get_main_context (LegbaRoom * self)
{
  g_return_val_if_fail (LEGBA_IS_ROOM (self), NULL);

  return self->context;
}

/* ---- Mute (§6: legba.mute) ---- */

static Message *
mute_message (LegbaRoomData * d, gboolean audio, gboolean video)
{
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  JsonObject *object = json_object_new ();

  json_object_set_boolean_member (object, "audio", audio);
  json_object_set_boolean_member (object, "video", video);
  json_node_take_object (node, object);
  return envelope_new (d, MUTE_TOPIC, node);
}

/**
 * legba_room_set_muted:
 * @self: a #LegbaRoom
 * @audio: whether the local audio is muted
 * @video: whether the local video is muted
 *
 * Tells every participant, and each newcomer once its channel opens, that
 * the local participant muted or unmuted its audio or video (the reserved
 * topic `legba.mute`, docs/room-protocol.md §6). It only announces: the
 * application stops or resumes its sources itself.
 */
void
legba_room_set_muted (LegbaRoom * self, gboolean audio, gboolean video)
{
  LegbaRoomData *d;
  g_autoptr (Message) m = NULL;
  g_autoptr (GError) error = NULL;

  g_return_if_fail (LEGBA_IS_ROOM (self));

  d = self->data;
  audio = !!audio;
  video = !!video;
  if (d->audio_muted == audio && d->video_muted == video)
    return;
  d->audio_muted = audio;
  d->video_muted = video;
  m = mute_message (d, audio, video);
  if (!send_message (self, m, LEGBA_RELIABILITY_RELIABLE, NULL, &error))
    GST_WARNING ("room %s: mute state: %s", self->room_name, error->message);
}

/**
 * legba_room_get_muted:
 * @self: a #LegbaRoom
 * @audio: (out) (optional): whether the local audio is announced muted
 * @video: (out) (optional): whether the local video is announced muted
 *
 * The state legba_room_set_muted() last announced.
 */
void
legba_room_get_muted (LegbaRoom * self, gboolean * audio, gboolean * video)
{
  g_return_if_fail (LEGBA_IS_ROOM (self));

  if (audio != NULL)
    *audio = self->data->audio_muted;
  if (video != NULL)
    *video = self->data->video_muted;
}

/**
 * legba_room_get_participant_muted:
 * @self: a #LegbaRoom
 * @participant_id: a participant id
 * @audio: (out) (optional): whether it announced its audio muted
 * @video: (out) (optional): whether it announced its video muted
 *
 * Returns: %TRUE when @participant_id announced its mute state
 *   (#LegbaRoom::mute-changed); else @audio and @video are %FALSE
 */
gboolean
legba_room_get_participant_muted (LegbaRoom * self,
    const char *participant_id, gboolean * audio, gboolean * video)
{
  LegbaRoomData *d;
  Recipient *r;
  gboolean known;

  g_return_val_if_fail (LEGBA_IS_ROOM (self), FALSE);
  g_return_val_if_fail (participant_id != NULL, FALSE);

  d = self->data;
  g_mutex_lock (&d->lock);
  r = g_hash_table_lookup (d->recipients, participant_id);
  if (audio != NULL)
    *audio = r && r->audio_muted;
  if (video != NULL)
    *video = r && r->video_muted;
  known = r != NULL && r->mute_known;
  g_mutex_unlock (&d->lock);
  return known;
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
  g_signal_emit (d->room, signals[SIGNAL_MUTE_CHANGED], 0, p, audio_muted,
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

static void
handle_text (LegbaRoomData * d, LegbaParticipant * p, const char *text,
    gsize size)
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
  else if (topic_is_reserved (e.topic))
    GST_INFO ("dropping a message from %s on unknown reserved topic %s",
        p->id, e.topic);
  else
    g_signal_emit (d->room, signals[SIGNAL_DATA_RECEIVED], 0, p, e.topic,
        e.data);
  envelope_clear (&e);
}

static void
handle_incoming (LegbaRoomData * d, LegbaParticipant * p, Incoming * in)
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
    handle_text (d, p, in->text, size);
  else
    g_signal_emit (d->room, signals[SIGNAL_BYTES_RECEIVED], 0, p, in->bytes);
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
      handle_incoming (peer->room->data, peer->participant, link->data);
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
      signals[bytes ? SIGNAL_BYTES_RECEIVED : SIGNAL_DATA_RECEIVED], 0, FALSE);
  if (!later)
    g_atomic_pointer_add (&peer->data->received, 1);
  before = set_receiving (rel);
  if (bytes != NULL)
    g_signal_emit (room, signals[SIGNAL_SYNC_BYTES_RECEIVED], 0,
        peer->participant, bytes);
  else
    g_signal_emit (room, signals[SIGNAL_SYNC_DATA_RECEIVED], 0,
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
    receive (peer, text, size, bytes ? g_bytes_ref (bytes) : NULL,
        reliability);
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
channel_low (LegbaPeer * peer, gpointer data)
{
  LegbaParticipant *p = peer->participant;

  if (p->peer == peer)
    drain (peer->room->data, p->id, GPOINTER_TO_INT (data));
}

static void
on_low (GstWebRTCDataChannel * c, Watch * w)
{
  legba_peer_invoke (w->peer, channel_low, GINT_TO_POINTER (w->reliability),
      NULL);
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
  if (g_strcmp0 (label, LEGBA_ROOM_CHANNEL_RELIABLE) == 0)
    lossy = FALSE;
  else if (g_strcmp0 (label, LEGBA_ROOM_CHANNEL_LOSSY) == 0)
    lossy = TRUE;
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
    handle_incoming (room->data, l->participant, link->data);
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
static guint64
peer_received (LegbaPeer * peer)
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
      (r ? r->received : 0) + peer_received (peer),
      "data-lossy-dropped", G_TYPE_UINT64, r ? r->lossy_dropped : 0,
      "data-not-delivered", G_TYPE_UINT64, r ? r->not_delivered : 0,
      "data-queued-bytes", G_TYPE_UINT64,
      r ? (guint64) (r->out[0].bytes + r->out[1].bytes) : 0, NULL);
  g_mutex_unlock (&d->lock);
}

/* ---- Hooks of the room (legba-room.c) ---- */

/* A participant joined: a recipient of every message to the room from
 * now on. */
void
legba_room_data_participant_joined (LegbaRoom * room, LegbaParticipant * p)
{
  LegbaRoomData *d = room->data;
  Recipient *r = g_new0 (Recipient, 1);

  r->id = g_strdup (p->id);
  for (guint i = 0; i < G_N_ELEMENTS (r->out); i++)
    g_queue_init (&r->out[i].queue);
  g_mutex_lock (&d->lock);
  g_hash_table_replace (d->recipients, r->id, r);
  g_mutex_unlock (&d->lock);
}

/* The reliable channel of the participant's peer connection is open. */
void
legba_room_data_peer_connected (LegbaRoom * room, LegbaPeer * peer)
{
  LegbaRoomData *d = room->data;
  const char *id = peer->participant->id;
  g_autoptr (GObject) transport = NULL;
  g_autoptr (Message) mute = mute_message (d, d->audio_muted, d->video_muted);
  guint64 max_message_size = 0;
  Recipient *r;

  /* what webrtcbin enforces: the smaller of both SDPs' max-message-size */
  g_object_get (peer->webrtcbin, "sctp-transport", &transport, NULL);
  if (transport != NULL)
    g_object_get (transport, "max-message-size", &max_message_size, NULL);
  g_mutex_lock (&d->lock);
  if ((r = g_hash_table_lookup (d->recipients, id)) == NULL) {
    g_mutex_unlock (&d->lock);
    return;
  }
  r->max_message_size = max_message_size > 0 ? max_message_size :
      LEGBA_ROOM_DEFAULT_MAX_MESSAGE_SIZE;
  for (guint i = 0; i < G_N_ELEMENTS (r->ready); i++)
    set_ready (r, i, peer->channel_open[i] ? peer->channels[i] : NULL);
  /* §6: each newcomer learns the mute state once its channel opens */
  deliver (d, r, LEGBA_RELIABILITY_RELIABLE, mute);
  g_mutex_unlock (&d->lock);
  drain (d, id, LEGBA_RELIABILITY_RELIABLE);
  drain (d, id, LEGBA_RELIABILITY_LOSSY);
}

/* The lossy channel of a connected participant's peer connection opened,
 * made by either side: what waited for it goes. */
void
legba_room_data_lossy_open (LegbaRoom * room, LegbaPeer * peer)
{
  LegbaRoomData *d = room->data;
  Recipient *r;

  if (peer->participant->peer != peer)
    return;
  g_mutex_lock (&d->lock);
  r = g_hash_table_lookup (d->recipients, peer->participant->id);
  if (r != NULL)
    set_ready (r, LEGBA_RELIABILITY_LOSSY,
        peer->channels[LEGBA_RELIABILITY_LOSSY]);
  g_mutex_unlock (&d->lock);
  drain (d, peer->participant->id, LEGBA_RELIABILITY_LOSSY);
}

/* §7: events of the application's backend are data from `server` */
static void
on_event_received (LegbaSignaller * signaller, const char *event,
    JsonNode * data, LegbaRoom * room)
{
  LegbaRoomData *d = room->data;
  LegbaReliability before = set_receiving (LEGBA_RELIABILITY_RELIABLE);

  if (g_atomic_int_get (&d->sync_enabled))
    g_signal_emit (room, signals[SIGNAL_SYNC_DATA_RECEIVED], 0, d->server,
        event, data);
  g_signal_emit (room, signals[SIGNAL_DATA_RECEIVED], 0, d->server, event,
      data);
  set_receiving (before);
}

static void
on_participant_left (LegbaRoom * room, LegbaParticipant * p, gpointer unused)
{
  LegbaRoomData *d = room->data;
  Recipient *r;

  g_mutex_lock (&d->lock);
  r = g_hash_table_lookup (d->recipients, p->id);
  for (guint i = 0; r != NULL && i < G_N_ELEMENTS (r->out); i++) {
    guint waiting = g_queue_get_length (&r->out[i].queue);

    if (waiting > 0)
      GST_INFO ("room %s: %u messages for %s discarded: it left",
          room->room_name, waiting, p->id);
    d->not_delivered += waiting;
  }
  g_hash_table_remove (d->recipients, p->id);
  g_mutex_unlock (&d->lock);
}

LegbaRoomData *
legba_room_data_new (LegbaRoom * room)
{
  LegbaRoomData *d = g_new0 (LegbaRoomData, 1);

  d->room = room;
  g_mutex_init (&d->lock);
  g_mutex_init (&d->generator_lock);
  d->recipients = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
      recipient_free);
  d->kick = g_source_new (&kick_funcs, sizeof (GSource));
  g_source_set_callback (d->kick, NULL, d, NULL);
  g_source_set_static_name (d->kick, "legba-room-data-kick");
  g_source_attach (d->kick, room->context);
  d->server = legba_participant_new (LEGBA_ROOM_SERVER_PARTICIPANT, NULL);
  d->parser = json_parser_new_immutable ();
  d->generator = json_generator_new ();
  d->event_handler = g_signal_connect (room->signaller, "event-received",
      G_CALLBACK (on_event_received), room);
  d->left_handler = g_signal_connect (room, "participant-left",
      G_CALLBACK (on_participant_left), NULL);
  return d;
}

void
legba_room_data_dispose (LegbaRoom * room)
{
  LegbaRoomData *d = room->data;

  if (d == NULL)
    return;
  if (room->signaller != NULL)
    g_clear_signal_handler (&d->event_handler, room->signaller);
  g_clear_signal_handler (&d->left_handler, room);
  g_source_destroy (d->kick);
  g_mutex_lock (&d->lock);
  g_hash_table_remove_all (d->recipients);
  g_mutex_unlock (&d->lock);
}

void
legba_room_data_free (LegbaRoomData * d)
{
  if (d == NULL)
    return;
  g_hash_table_unref (d->recipients);
  g_source_unref (d->kick);
  g_mutex_clear (&d->lock);
  g_mutex_clear (&d->generator_lock);
  g_object_unref (d->server);
  g_object_unref (d->parser);
  g_object_unref (d->generator);
  g_free (d);
}

/**
 * legba_room_get_data_stats:
 * @self: a #LegbaRoom
 *
 * Counts of the room's application data since it was made:
 * `messages-sent` (handed to a recipient's channel, once per recipient),
 * `messages-received`, `messages-queued` (waiting now), `buffered-bytes`
 * (handed to the channels and not sent yet), `lossy-dropped`
 * (lossy messages dropped because a recipient's channel was congested or
 * its queue full), `not-delivered` (reliable messages a recipient could
 * not take, or that were waiting when it left) and `malformed` (messages
 * dropped as not §6 ones). Each participant's #LegbaParticipant:stats has
 * the same counts for it, as `data-*` fields.
 *
 * Returns: (transfer full): a `legba-data-stats` structure
 */
GstStructure *
legba_room_get_data_stats (LegbaRoom * self)
{
  LegbaRoomData *d;
  GHashTableIter iter;
  gpointer value;
  guint64 queued = 0, buffered = 0, received;
  guint64 sent, lossy_dropped, not_delivered;

  g_return_val_if_fail (LEGBA_IS_ROOM (self), NULL);

  d = self->data;
  received = d->received;
  g_mutex_lock (&d->lock);
  g_hash_table_iter_init (&iter, d->recipients);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    Recipient *r = value;

    queued += g_queue_get_length (&r->out[0].queue) +
        g_queue_get_length (&r->out[1].queue);
  }
  sent = d->sent;
  lossy_dropped = d->lossy_dropped;
  not_delivered = d->not_delivered;
  g_mutex_unlock (&d->lock);
  g_hash_table_iter_init (&iter, self->peers);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    LegbaPeer *peer = value;

    for (guint i = 0; i < G_N_ELEMENTS (peer->channels); i++)
      if (peer->channels[i] != NULL && peer->channel_open[i])
        buffered += buffered_amount (peer->channels[i]);
    received += peer_received (peer);
  }
  return gst_structure_new ("legba-data-stats",
      "messages-sent", G_TYPE_UINT64, sent,
      "messages-received", G_TYPE_UINT64, received,
      "messages-queued", G_TYPE_UINT64, queued,
      "buffered-bytes", G_TYPE_UINT64, buffered,
      "lossy-dropped", G_TYPE_UINT64, lossy_dropped,
      "not-delivered", G_TYPE_UINT64, not_delivered,
      "malformed", G_TYPE_UINT64, d->malformed, NULL);
}

/* data-received's marshallers (VOID:OBJECT,STRING,BOXED), in place of the
 * generic libffi one: the signal is emitted once per message. */
typedef void (*DataReceivedFunc) (gpointer instance, gpointer participant,
    const char *topic, gpointer data, gpointer user_data);

static void
marshal_data_received (GClosure * closure, GValue * return_value,
    guint n_param_values, const GValue * param_values,
    gpointer invocation_hint, gpointer marshal_data)
{
  GCClosure *cc = (GCClosure *) closure;
  gpointer data1, data2;
  DataReceivedFunc callback;

  g_return_if_fail (n_param_values == 4);
  if (G_CCLOSURE_SWAP_DATA (closure)) {
    data1 = closure->data;
    data2 = g_value_peek_pointer (param_values + 0);
  } else {
    data1 = g_value_peek_pointer (param_values + 0);
    data2 = closure->data;
  }
  callback = (DataReceivedFunc) (marshal_data ? marshal_data : cc->callback);
  callback (data1, g_value_get_object (param_values + 1),
      g_value_get_string (param_values + 2),
      g_value_get_boxed (param_values + 3), data2);
}

static void
marshal_data_received_v (GClosure * closure, GValue * return_value,
    gpointer instance, va_list args, gpointer marshal_data, int n_params,
    GType * param_types)
{
  GCClosure *cc = (GCClosure *) closure;
  gpointer data1, data2, participant, data;
  const char *topic;
  char *topic_copy = NULL;
  gboolean data_copied = FALSE;
  gboolean participant_ref = !(param_types[0] & G_SIGNAL_TYPE_STATIC_SCOPE);
  DataReceivedFunc callback;
  va_list copy;

  G_VA_COPY (copy, args);
  participant = va_arg (copy, gpointer);
  if (participant != NULL && participant_ref)
    g_object_ref (participant);
  topic = va_arg (copy, const char *);
  if (topic != NULL && !(param_types[1] & G_SIGNAL_TYPE_STATIC_SCOPE))
    topic = topic_copy = g_strdup (topic);
  data = va_arg (copy, gpointer);
  if (data != NULL && !(param_types[2] & G_SIGNAL_TYPE_STATIC_SCOPE)) {
    data = g_boxed_copy (param_types[2] & ~G_SIGNAL_TYPE_STATIC_SCOPE, data);
    data_copied = TRUE;
  }
  va_end (copy);
  if (G_CCLOSURE_SWAP_DATA (closure)) {
    data1 = closure->data;
    data2 = instance;
  } else {
    data1 = instance;
    data2 = closure->data;
  }
  callback = (DataReceivedFunc) (marshal_data ? marshal_data : cc->callback);
  callback (data1, participant, topic, data, data2);
  if (participant != NULL && participant_ref)
    g_object_unref (participant);
  g_free (topic_copy);
  if (data_copied)
    g_boxed_free (param_types[2] & ~G_SIGNAL_TYPE_STATIC_SCOPE, data);
}

void
legba_room_data_class_init (GObjectClass * klass)
{
  GType type = G_TYPE_FROM_CLASS (klass);

  /**
   * LegbaRoom::data-received:
   * @self: the room
   * @participant: the sender; for events of the application's backend
   *   (docs/room-protocol.md §7), a participant with the id
   *   %LEGBA_ROOM_SERVER_PARTICIPANT that is not in the list
   * @topic: (nullable): the message's topic (the event name for §7 events)
   * @data: (transfer none): the message (the envelope's `data`); valid
   *   during the emission only: copy it to keep it
   *
   * A JSON message arrived. legba_room_get_received_reliability() tells,
   * during the emission, which channel it came on.
   */
  signals[SIGNAL_DATA_RECEIVED] = g_signal_new ("data-received", type,
      G_SIGNAL_RUN_LAST, 0, NULL, NULL, marshal_data_received, G_TYPE_NONE,
      3, LEGBA_TYPE_PARTICIPANT | G_SIGNAL_TYPE_STATIC_SCOPE,
      G_TYPE_STRING | G_SIGNAL_TYPE_STATIC_SCOPE,
      JSON_TYPE_NODE | G_SIGNAL_TYPE_STATIC_SCOPE);
  g_signal_set_va_marshaller (signals[SIGNAL_DATA_RECEIVED], type,
      marshal_data_received_v);
  /**
   * LegbaRoom::bytes-received:
   * @self: the room
   * @participant: the sender
   * @bytes: the message
   *
   * A binary message arrived.
   */
  signals[SIGNAL_BYTES_RECEIVED] = g_signal_new ("bytes-received", type,
      G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 2,
      LEGBA_TYPE_PARTICIPANT, G_TYPE_BYTES);
  /**
   * LegbaRoom::sync-data-received:
   * @self: the room
   * @participant: the sender, as in #LegbaRoom::data-received
   * @topic: (nullable): the message's topic
   * @data: (transfer none): the message; valid during the emission only
   *
   * #LegbaRoom::data-received, emitted on the thread the message arrived
   * on, before it: for messages of participants, the thread of the data
   * channel's SCTP stream, which the room takes them from before
   * webrtcbin hands them to its own thread; §7 events arrive on the
   * room's main context. It is not emitted by default:
   * legba_room_enable_sync_data_emission() turns it on. A channel's
   * messages come one at a time, in order; a participant's two channels,
   * and different participants, can come at once on different threads.
   * Reserved topics and malformed messages are not emitted here; the room
   * handles them on its context as always.
   *
   * A room hands a message to its main context only when something
   * handles it there, so an application (or an element) that handles
   * messages here alone saves that hand-over: a main-loop wakeup and
   * dispatch per message, and its latency.
   *
   * The handler runs on a streaming thread of the peer connection: it
   * must not block (the channel's later messages wait behind it), must
   * not wait for the room's main context (closing a participant's peer
   * connection stops this thread from that context) and must not call
   * into the connection's webrtcbin. It may send: legba_room_send_json() and
   * legba_room_send_bytes() may be called from any thread, so a handler
   * can answer a message where it arrives. The room's other functions
   * are called on the room's context, as everywhere.
   */
  signals[SIGNAL_SYNC_DATA_RECEIVED] = g_signal_new ("sync-data-received",
      type, G_SIGNAL_RUN_LAST, 0, NULL, NULL, marshal_data_received,
      G_TYPE_NONE, 3, LEGBA_TYPE_PARTICIPANT | G_SIGNAL_TYPE_STATIC_SCOPE,
      G_TYPE_STRING | G_SIGNAL_TYPE_STATIC_SCOPE,
      JSON_TYPE_NODE | G_SIGNAL_TYPE_STATIC_SCOPE);
  g_signal_set_va_marshaller (signals[SIGNAL_SYNC_DATA_RECEIVED], type,
      marshal_data_received_v);
  /**
   * LegbaRoom::sync-bytes-received:
   * @self: the room
   * @participant: the sender
   * @bytes: the message
   *
   * #LegbaRoom::bytes-received, emitted on the thread the message arrived
   * on (its data channel's SCTP stream's) before it, as
   * #LegbaRoom::sync-data-received is for JSON, once
   * legba_room_enable_sync_data_emission() turned it on.
   */
  signals[SIGNAL_SYNC_BYTES_RECEIVED] = g_signal_new ("sync-bytes-received",
      type, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 2,
      LEGBA_TYPE_PARTICIPANT, G_TYPE_BYTES);
  /**
   * LegbaRoom::ready-to-send:
   * @self: the room
   * @participant: the recipient
   * @reliability: its channel
   *
   * A recipient that could not take a message
   * (%LEGBA_ROOM_ERROR_NOT_DELIVERED) has handed its whole queue to its
   * channel: it takes messages again.
   */
  signals[SIGNAL_READY_TO_SEND] = g_signal_new ("ready-to-send", type,
      G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 2,
      LEGBA_TYPE_PARTICIPANT, LEGBA_TYPE_RELIABILITY);
  /**
   * LegbaRoom::mute-changed:
   * @self: the room
   * @participant: who announced it
   * @audio: whether its audio is muted
   * @video: whether its video is muted
   *
   * A participant announced its mute state (`legba.mute`, docs/room-protocol.md
   * §6): when it changed, and once when its channel opened.
   */
  signals[SIGNAL_MUTE_CHANGED] = g_signal_new ("mute-changed", type,
      G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 3,
      LEGBA_TYPE_PARTICIPANT, G_TYPE_BOOLEAN, G_TYPE_BOOLEAN);
}

/* ---- LegbaDataMeta ---- */

GType
legba_data_meta_api_get_type (void)
{
  static GType type;
  static const char *tags[] = { NULL };

  if (g_once_init_enter (&type)) {
    GType t = gst_meta_api_type_register ("LegbaDataMetaAPI", tags);

    g_once_init_leave (&type, t);
  }
  return type;
}

static gboolean
data_meta_init (GstMeta * meta, gpointer params, GstBuffer * buffer)
{
  LegbaDataMeta *m = (LegbaDataMeta *) meta;

  m->participant_id = NULL;
  m->topic = NULL;
  m->reliability = LEGBA_RELIABILITY_RELIABLE;
  m->has_reliability = FALSE;
  m->to = NULL;
  return TRUE;
}

static void
data_meta_free (GstMeta * meta, GstBuffer * buffer)
{
  LegbaDataMeta *m = (LegbaDataMeta *) meta;

  g_free (m->participant_id);
  g_free (m->topic);
  g_strfreev (m->to);
}

static gboolean
data_meta_transform (GstBuffer * dest, GstMeta * meta, GstBuffer * buffer,
    GQuark type, gpointer data)
{
  LegbaDataMeta *m = (LegbaDataMeta *) meta;
  LegbaDataMeta *copy;

  if (!GST_META_TRANSFORM_IS_COPY (type))
    return FALSE;
  copy = legba_buffer_add_data_meta (dest, m->participant_id, m->topic,
      m->reliability, (const char *const *) m->to);
  copy->has_reliability = m->has_reliability;
  return TRUE;
}

const GstMetaInfo *
legba_data_meta_get_info (void)
{
  static const GstMetaInfo *info;

  if (g_once_init_enter ((GstMetaInfo **) & info)) {
    const GstMetaInfo *i = gst_meta_register (LEGBA_DATA_META_API_TYPE,
        "LegbaDataMeta", sizeof (LegbaDataMeta), data_meta_init,
        data_meta_free, data_meta_transform);

    g_once_init_leave ((GstMetaInfo **) & info, (GstMetaInfo *) i);
  }
  return info;
}

/**
 * legba_buffer_add_data_meta:
 * @buffer: a writable #GstBuffer
 * @participant_id: (nullable): the sender
 * @topic: (nullable): the topic
 * @reliability: the channel
 * @to: (nullable) (array zero-terminated=1): the recipients
 *
 * Returns: (transfer none): the #LegbaDataMeta added to @buffer
 */
LegbaDataMeta *
legba_buffer_add_data_meta (GstBuffer * buffer, const char *participant_id,
    const char *topic, LegbaReliability reliability, const char *const *to)
{
  LegbaDataMeta *m;

  g_return_val_if_fail (GST_IS_BUFFER (buffer), NULL);

  m = (LegbaDataMeta *) gst_buffer_add_meta (buffer, LEGBA_DATA_META_INFO,
      NULL);
  m->participant_id = g_strdup (participant_id);
  m->topic = g_strdup (topic);
  m->reliability = reliability;
  m->to = g_strdupv ((char **) to);
  return m;
}

/**
 * legba_buffer_get_data_meta:
 * @buffer: a #GstBuffer
 *
 * Returns: (transfer none) (nullable): the #LegbaDataMeta of @buffer
 */
LegbaDataMeta *
legba_buffer_get_data_meta (GstBuffer * buffer)
{
  return (LegbaDataMeta *) gst_buffer_get_meta (buffer,
      LEGBA_DATA_META_API_TYPE);
}
