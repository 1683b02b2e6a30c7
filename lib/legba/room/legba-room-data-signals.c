/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The signals of a LegbaRoom's application data (data-received and its
 * sync- and bytes variants, ready-to-send, mute-changed), with
 * data-received's own marshallers.
 */
#include <legba/room/legba-room-data-shared.h>

guint data_signals[N_SIGNALS];

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
  data_signals[SIGNAL_DATA_RECEIVED] = g_signal_new ("data-received", type,
      G_SIGNAL_RUN_LAST, 0, NULL, NULL, marshal_data_received, G_TYPE_NONE,
      3, LEGBA_TYPE_PARTICIPANT | G_SIGNAL_TYPE_STATIC_SCOPE,
      G_TYPE_STRING | G_SIGNAL_TYPE_STATIC_SCOPE,
      JSON_TYPE_NODE | G_SIGNAL_TYPE_STATIC_SCOPE);
  g_signal_set_va_marshaller (data_signals[SIGNAL_DATA_RECEIVED], type,
      marshal_data_received_v);
  /**
   * LegbaRoom::bytes-received:
   * @self: the room
   * @participant: the sender
   * @bytes: the message
   *
   * A binary message arrived.
   */
  data_signals[SIGNAL_BYTES_RECEIVED] = g_signal_new ("bytes-received", type,
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
  data_signals[SIGNAL_SYNC_DATA_RECEIVED] = g_signal_new ("sync-data-received",
      type, G_SIGNAL_RUN_LAST, 0, NULL, NULL, marshal_data_received,
      G_TYPE_NONE, 3, LEGBA_TYPE_PARTICIPANT | G_SIGNAL_TYPE_STATIC_SCOPE,
      G_TYPE_STRING | G_SIGNAL_TYPE_STATIC_SCOPE,
      JSON_TYPE_NODE | G_SIGNAL_TYPE_STATIC_SCOPE);
  g_signal_set_va_marshaller (data_signals[SIGNAL_SYNC_DATA_RECEIVED], type,
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
  data_signals[SIGNAL_SYNC_BYTES_RECEIVED] =
      g_signal_new ("sync-bytes-received", type, G_SIGNAL_RUN_LAST, 0, NULL,
      NULL, NULL, G_TYPE_NONE, 2, LEGBA_TYPE_PARTICIPANT, G_TYPE_BYTES);
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
  data_signals[SIGNAL_READY_TO_SEND] = g_signal_new ("ready-to-send", type,
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
  data_signals[SIGNAL_MUTE_CHANGED] = g_signal_new ("mute-changed", type,
      G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 3,
      LEGBA_TYPE_PARTICIPANT, G_TYPE_BOOLEAN, G_TYPE_BOOLEAN);
}
