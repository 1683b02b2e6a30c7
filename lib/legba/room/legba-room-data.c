/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Application data over a LegbaRoom's data channels (docs/room-protocol.md §6):
 * sending, the mute state the room announces, the room's hooks (a
 * participant joined, connected or left) and the counts. Receiving and
 * the backend's events (§7) are in legba-room-data-receive.c, the signals
 * in legba-room-data-signals.c, LegbaDataMeta in legba-room-data-meta.c.
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
 */
#include <legba/room/legba-room-data-shared.h>
#include <legba/common/legba-json.h>

G_DEFINE_ENUM_TYPE (LegbaReliability, legba_reliability,
    G_DEFINE_ENUM_VALUE (LEGBA_RELIABILITY_RELIABLE, "reliable"),
    G_DEFINE_ENUM_VALUE (LEGBA_RELIABILITY_LOSSY, "lossy"));

/* One message on the wire, shared by its recipients' outboxes. A text
 * message's bytes end with a NUL that is not part of it. */
typedef struct
{
  GBytes *bytes;
  gsize size;
  gboolean text;
} Message;

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
    g_signal_emit (d->room, data_signals[SIGNAL_READY_TO_SEND], 0, p, rel);
}

void
data_channel_low (LegbaPeer * peer, gpointer data)
{
  LegbaParticipant *p = peer->participant;

  if (p->peer == peer)
    drain (peer->room->data, p->id, GPOINTER_TO_INT (data));
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
ask_publish_cb (gpointer data)
{
  LegbaRoom *room = data;

  room->events->publish (room);
  return G_SOURCE_REMOVE;
}

static gboolean
send_message (LegbaRoom * room, Message * m, LegbaReliability rel,
    const char *const *to, GError ** error)
{
  LegbaRoomData *d = room->data;
  g_autoptr (GPtrArray) targets = g_ptr_array_new ();
  g_autoptr (GString) failed = NULL;
  gboolean ask_publish = FALSE;
  GHashTableIter iter;
  gpointer value;

  g_mutex_lock (&d->lock);
  if (d->sfu_id != NULL) {
    Recipient *sfu = g_hash_table_lookup (d->recipients, d->sfu_id);

    /* docs/rooms.md, "SFU rooms": the SFU relays to every subscriber; it
     * has no way to reach some of them only */
    if (to != NULL) {
      g_set_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_INVALID,
          "Messages to named participants are not supported in an SFU "
          "room; nothing was sent");
      g_mutex_unlock (&d->lock);
      return FALSE;
    }
    if (sfu != NULL)
      g_ptr_array_add (targets, sfu);
    ask_publish = sfu != NULL && !d->sfu_asked;
  } else if (to == NULL) {
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
  if (ask_publish)
    d->sfu_asked = TRUE;
  g_mutex_unlock (&d->lock);
  /* a participant that only received until now publishes */
  if (ask_publish)
    legba_room_invoke (room, ask_publish_cb, g_object_ref (room),
        g_object_unref);
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
 * legba_room_is_sfu:
 * @self: a #LegbaRoom
 *
 * Whether the room is an SFU room (docs/rooms.md, "SFU rooms"): what
 * this participant sends goes once to the room's SFU, which relays it to
 * every other participant, and a message to named participants is
 * refused. A room learns it when it joins (an `auto` room, when it moves
 * to its SFU). Any thread, as legba_room_send_json().
 *
 * Returns: %TRUE in an SFU room
 */
gboolean
legba_room_is_sfu (LegbaRoom * self)
{
  LegbaRoomData *d;
  gboolean sfu;

  g_return_val_if_fail (LEGBA_IS_ROOM (self), FALSE);

  d = self->data;
  g_mutex_lock (&d->lock);
  sfu = d->sfu_id != NULL;
  g_mutex_unlock (&d->lock);
  return sfu;
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
 * legba_room_get_main_context:
 * @self: a #LegbaRoom
 *
 * Gets the main context the room runs on, that of the thread that created
 * it.
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
 * Gets the mute state a participant last announced on the `legba.mute`
 * topic.
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

/* ---- The move from mesh to SFU (§8: legba.sfu-probe) ---- */

gboolean
legba_room_data_send_probe (LegbaRoom * room, LegbaPeer * publisher)
{
  LegbaRoomData *d = room->data;
  GstWebRTCDataChannel *channel = publisher->channel_open[0] ?
      publisher->channels[0] : NULL;
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autoptr (Message) m = NULL;
  g_autoptr (GError) error = NULL;

  if (channel == NULL || buffered_amount (channel) > CHANNEL_HIGH_WATER)
    return FALSE;
  json_node_take_object (node, json_object_new ());
  m = envelope_new (d, SFU_PROBE_TOPIC, node);
  if (!channel_send (channel, m, &error)) {
    GST_INFO ("room %s: no probe sent: %s", room->room_name, error->message);
    return FALSE;
  }
  return TRUE;
}

/* ---- Hooks of the room (legba-room.c) ---- */

static void
add_recipient (LegbaRoomData * d, const char *id)
{
  Recipient *r = g_new0 (Recipient, 1);

  r->id = g_strdup (id);
  for (guint i = 0; i < G_N_ELEMENTS (r->out); i++)
    g_queue_init (&r->out[i].queue);
  g_mutex_lock (&d->lock);
  g_hash_table_replace (d->recipients, r->id, r);
  g_mutex_unlock (&d->lock);
}

static void remove_recipient (LegbaRoom * room, const char *id);

/* A participant joined: a recipient of every message to the room from
 * now on. */
void
legba_room_data_participant_joined (LegbaRoom * room, LegbaParticipant * p)
{
  add_recipient (room->data, p->id);
}

void
legba_room_data_use_sfu (LegbaRoom * room, LegbaParticipant * publisher)
{
  LegbaRoomData *d = room->data;
  g_autofree char *previous = NULL;

  g_mutex_lock (&d->lock);
  previous = g_steal_pointer (&d->sfu_id);
  g_mutex_unlock (&d->lock);
  if (previous != NULL)
    remove_recipient (room, previous);
  if (publisher == NULL)
    return;
  add_recipient (d, publisher->id);
  g_mutex_lock (&d->lock);
  d->sfu_id = g_strdup (publisher->id);
  d->sfu_asked = FALSE;
  g_mutex_unlock (&d->lock);
}

guint64
legba_room_data_queued (LegbaRoom * room, const char *id)
{
  LegbaRoomData *d = room->data;
  g_autoptr (GstWebRTCDataChannel) channel = NULL;
  guint64 bytes = 0, buffered = 0;
  Recipient *r;

  g_mutex_lock (&d->lock);
  r = g_hash_table_lookup (d->recipients, id);
  if (r != NULL) {
    bytes = r->out[LEGBA_RELIABILITY_RELIABLE].bytes;
    if (r->ready[LEGBA_RELIABILITY_RELIABLE] != NULL)
      channel = g_object_ref (r->ready[LEGBA_RELIABILITY_RELIABLE]);
  }
  g_mutex_unlock (&d->lock);
  if (channel != NULL)
    g_object_get (channel, "buffered-amount", &buffered, NULL);
  return bytes + buffered;
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

static void
remove_recipient (LegbaRoom * room, const char *id)
{
  LegbaRoomData *d = room->data;
  Recipient *r;

  g_mutex_lock (&d->lock);
  r = g_hash_table_lookup (d->recipients, id);
  for (guint i = 0; r != NULL && i < G_N_ELEMENTS (r->out); i++) {
    guint waiting = g_queue_get_length (&r->out[i].queue);

    if (waiting > 0)
      GST_INFO ("room %s: %u messages for %s discarded: it left",
          room->room_name, waiting, id);
    d->not_delivered += waiting;
  }
  g_hash_table_remove (d->recipients, id);
  g_mutex_unlock (&d->lock);
}

static void
on_participant_left (LegbaRoom * room, LegbaParticipant * p, gpointer unused)
{
  remove_recipient (room, p->id);
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
      G_CALLBACK (data_on_event_received), room);
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
  g_free (d->sfu_id);
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
    received += data_peer_received (peer);
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
