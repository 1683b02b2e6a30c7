/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * SECTION:element-legbadatasink
 * @title: legbadatasink
 *
 * Sends each buffer to the participants of a Legba room as one
 * data-channel message (docs/room-protocol.md §6): a sensor or metadata stream
 * into a room. With caps `application/json` a buffer holds one JSON value
 * (the message's `data`), sent with the `topic` property; with
 * `application/octet-stream` it is sent as bytes.
 *
 * The room is a `legbaroom` element of the same pipeline, named by
 * `room-element` (looked for in the sink's bin, then in each bin above),
 * or, for applications, a #LegbaRoom set as `legba-room`. Messages go to
 * the participants in the room when the buffer arrives (all of them, or
 * those `to` names) and wait in each recipient's queue while its channel
 * is not open yet. In an SFU room a message to everyone goes once, to the
 * SFU, which relays it to each participant (its queue is then the one
 * that may be full); one to named participants is refused there. A #LegbaDataMeta on a buffer overrides the topic, the
 * recipients and the reliability for that buffer.
 *
 * Messages are sent from the streaming thread (a #LegbaRoom takes sends
 * from any thread), with no stop on the room's main context.
 *
 * When a recipient cannot take more (its queue is full: a slow or stalled
 * peer), the sink blocks its streaming thread up to `timeout` for it, while
 * the others keep receiving; then it posts a warning naming the recipients
 * that did not take the message, counts it in `not-delivered` and goes on.
 *
 * At the end of the stream the sink waits, up to `timeout`, until its
 * messages have left (a recipient's queue is empty and webrtcbin sent
 * what it was given), so a pipeline may stop right after.
 *
 * `min-recipients` holds the buffers until the room lists that many
 * recipients: a stream that starts with the pipeline (a file, a sensor)
 * then reaches the first participant instead of an empty room.
 *
 * ## Example launch lines
 * Readings, one JSON value per file, to the first participant that joins
 * (and everyone there then):
 * |[
 * gst-launch-1.0 legbaroom name=r server-url=ws://127.0.0.1:6001 \
 *       app-key=KEY app-secret=SECRET room=demo identity=sensor \
 *     multifilesrc location=reading-%05d.json ! application/json \
 *     ! legbadatasink room-element=r topic=sensor min-recipients=1
 * ]|
 */
#include "legba-elements.h"
#include "legbadata-common.h"
#include "legba-context-call.h"

#include <gst/base/gstbasesink.h>

GST_DEBUG_CATEGORY_STATIC (legba_data_sink_debug);
#define GST_CAT_DEFAULT legba_data_sink_debug

#define DEFAULT_RELIABLE TRUE
#define DEFAULT_TIMEOUT 5000

enum
{
  PROP_0,
  PROP_ROOM_ELEMENT,
  PROP_LEGBA_ROOM,
  PROP_TOPIC,
  PROP_RELIABLE,
  PROP_TO,
  PROP_TIMEOUT,
  PROP_MIN_RECIPIENTS,
  PROP_SENT,
  PROP_NOT_DELIVERED,
  N_PROPERTIES
};

static GParamSpec *properties[N_PROPERTIES];

#define GST_TYPE_LEGBA_DATA_SINK (gst_legba_data_sink_get_type ())
G_DECLARE_FINAL_TYPE (GstLegbaDataSink, gst_legba_data_sink, GST,
    LEGBA_DATA_SINK, GstBaseSink);

struct _GstLegbaDataSink
{
  GstBaseSink parent;

  /* properties (object lock) */
  char *room_element;
  LegbaRoom *legba_room;
  char *topic;
  gboolean reliable;
  char **to;
  guint timeout;
  guint min_recipients;
  guint64 sent;
  guint64 not_delivered;

  /* while started */
  LegbaRoom *room;
  gboolean json;                /* the caps: JSON, else bytes */
  gulong handlers[3];           /* on the room's thread */
  GMutex lock;
  GCond cond;
  GHashTable *members;          /* (lock) the room's participants, id ->
                                 * identity, as its thread last saw them */
  guint ready_generation;       /* (lock) ready-to-send emissions and
                                 * changes of members */
  gboolean flushing;            /* (lock) */
  LegbaContextCall *call;       /* (lock) the call being waited for */
};

G_DEFINE_FINAL_TYPE (GstLegbaDataSink, gst_legba_data_sink, GST_TYPE_BASE_SINK);
GST_ELEMENT_REGISTER_DEFINE (legbadatasink, "legbadatasink", GST_RANK_NONE,
    GST_TYPE_LEGBA_DATA_SINK);

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("application/json; application/octet-stream"));

/* ---- On the room's thread ---- */

/* under the lock: wakes the streaming thread to look again */
static void
changed (GstLegbaDataSink * self)
{
  self->ready_generation++;
  g_cond_broadcast (&self->cond);
}

static void
on_ready_to_send (LegbaRoom * room, LegbaParticipant * p,
    LegbaReliability rel, GstLegbaDataSink * self)
{
  g_mutex_lock (&self->lock);
  changed (self);
  g_mutex_unlock (&self->lock);
}

static void
add_member (GstLegbaDataSink * self, LegbaParticipant * p)
{
  g_hash_table_replace (self->members,
      g_strdup (legba_participant_get_id (p)),
      g_strdup (legba_participant_get_identity (p)));
}

static void
on_joined (LegbaRoom * room, LegbaParticipant * p, GstLegbaDataSink * self)
{
  g_mutex_lock (&self->lock);
  add_member (self, p);
  changed (self);
  g_mutex_unlock (&self->lock);
}

static void
on_left (LegbaRoom * room, LegbaParticipant * p, GstLegbaDataSink * self)
{
  g_mutex_lock (&self->lock);
  g_hash_table_remove (self->members, legba_participant_get_id (p));
  changed (self);
  g_mutex_unlock (&self->lock);
}

static gpointer
connect_room (gpointer object, gpointer data)
{
  LegbaRoom *room = object;
  GstLegbaDataSink *self = data;
  GListModel *list = legba_room_get_participants (room);

  self->handlers[0] = g_signal_connect (room, "ready-to-send",
      G_CALLBACK (on_ready_to_send), self);
  self->handlers[1] = g_signal_connect (room, "participant-joined",
      G_CALLBACK (on_joined), self);
  self->handlers[2] = g_signal_connect (room, "participant-left",
      G_CALLBACK (on_left), self);
  g_mutex_lock (&self->lock);
  for (guint i = 0; i < g_list_model_get_n_items (list); i++) {
    g_autoptr (LegbaParticipant) p = g_list_model_get_item (list, i);

    add_member (self, p);
  }
  g_mutex_unlock (&self->lock);
  return NULL;
}

static gpointer
disconnect_room (gpointer object, gpointer data)
{
  LegbaRoom *room = object;
  GstLegbaDataSink *self = data;

  for (guint i = 0; i < G_N_ELEMENTS (self->handlers); i++)
    g_clear_signal_handler (&self->handlers[i], room);
  g_mutex_lock (&self->lock);
  g_hash_table_remove_all (self->members);
  g_mutex_unlock (&self->lock);
  return NULL;
}

/* ---- Streaming thread ---- */

/* A LegbaRoom is sent to from any thread: messages go from here, with no
 * stop on the room's thread. What the room's participants are, the
 * members table says. */

typedef struct
{
  GstLegbaDataSink *self;
  JsonNode *json;               /* or bytes */
  GBytes *bytes;
  const char *topic;
  LegbaReliability reliability;
  char **to;                    /* names to match; NULL: everyone */
  GPtrArray *targets;           /* participant ids still to send to */
  GPtrArray *refused;           /* out: ids whose queue was full */
  GError *error;                /* out: why the message cannot be sent */
} Send;

/* the members @to names (all with NULL), under the lock */
static guint
match_members (GstLegbaDataSink * self, char **to, GPtrArray * ids)
{
  GHashTableIter iter;
  gpointer id, identity;
  guint n = 0;

  g_hash_table_iter_init (&iter, self->members);
  while (g_hash_table_iter_next (&iter, &id, &identity)) {
    if (!legba_data_matches_id (id, identity, to))
      continue;
    n++;
    if (ids != NULL)
      g_ptr_array_add (ids, g_strdup (id));
  }
  return n;
}

/* Sends to participant id, or with id NULL to everyone at once (an SFU
 * room, where the message goes once, to the SFU). */
static void
send_one (Send * s, const char *id)
{
  const char *one[] = { id, NULL };
  const char *const *to = id != NULL ? one : NULL;
  g_autoptr (GError) error = NULL;
  gboolean ok, member;

  if (s->json != NULL)
    ok = legba_room_send_json (s->self->room, s->json, s->topic,
        s->reliability, to, &error);
  else
    ok = legba_room_send_bytes (s->self->room, s->bytes, s->reliability, to,
        &error);
  if (ok)
    return;
  if (!g_error_matches (error, LEGBA_ROOM_ERROR,
          LEGBA_ROOM_ERROR_NOT_DELIVERED)) {
    if (s->error == NULL)
      s->error = g_steal_pointer (&error);
    return;
  }
  /* its queue is full, unless it left the room meanwhile */
  g_mutex_lock (&s->self->lock);
  member = id == NULL || g_hash_table_contains (s->self->members, id);
  g_mutex_unlock (&s->self->lock);
  if (member)
    g_ptr_array_add (s->refused, g_strdup (id));
}

static void
send_to_targets (Send * s)
{
  for (guint i = 0; i < s->targets->len && s->error == NULL; i++)
    send_one (s, s->targets->pdata[i]);
}

/* Runs func on the room's thread: FALSE when flushing. */
static gboolean
run_on_room (GstLegbaDataSink * self, LegbaContextFunc func, gpointer data)
{
  LegbaContextCall *call;
  gboolean ran;

  call = legba_context_call_new (legba_room_get_main_context (self->room),
      self->room, func, data);
  g_mutex_lock (&self->lock);
  if (self->flushing)
    legba_context_call_cancel (call);
  self->call = call;
  g_mutex_unlock (&self->lock);
  ran = legba_context_call_wait (call, NULL);
  g_mutex_lock (&self->lock);
  self->call = NULL;
  g_mutex_unlock (&self->lock);
  legba_context_call_unref (call);
  return ran;
}

static char *
join_ids (GPtrArray * ids)
{
  g_ptr_array_add (ids, NULL);
  return g_strjoinv (", ", (char **) ids->pdata);
}

/* min-recipients: waits until the room lists that many recipients */
static gboolean
wait_for_recipients (GstLegbaDataSink * self, char **to, guint min)
{
  gboolean ok;
  guint n;

  g_mutex_lock (&self->lock);
  while (!self->flushing && (n = match_members (self, to, NULL)) < min) {
    GST_DEBUG_OBJECT (self, "%u of %u recipients in the room", n, min);
    g_cond_wait (&self->cond, &self->lock);
  }
  ok = !self->flushing;
  g_mutex_unlock (&self->lock);
  return ok;
}

static GstFlowReturn
send_buffer (GstLegbaDataSink * self, Send * s)
{
  gint64 deadline;
  guint generation;
  guint min, timeout;
  gboolean at_once;

  GST_OBJECT_LOCK (self);
  min = self->min_recipients;
  timeout = self->timeout;
  GST_OBJECT_UNLOCK (self);
  if (min > 0 && !wait_for_recipients (self, s->to, min))
    return GST_FLOW_FLUSHING;
  /* in an SFU room a message to everyone goes once, to the SFU, which
   * relays it to each (a message to named participants is refused) */
  at_once = s->to == NULL && legba_room_is_sfu (self->room);
  g_mutex_lock (&self->lock);
  generation = self->ready_generation;
  if (at_once)
    g_ptr_array_add (s->targets, NULL);
  else
    match_members (self, s->to, s->targets);
  g_mutex_unlock (&self->lock);
  send_to_targets (s);
  GST_DEBUG_OBJECT (self, "sent to %u recipients, %u refused%s%s",
      s->targets->len - s->refused->len, s->refused->len,
      s->error ? ": " : "", s->error ? s->error->message : "");
  deadline = g_get_monotonic_time () + timeout * G_TIME_SPAN_MILLISECOND;
  /* recipients that could not take it: wait for ready-to-send, retry */
  while (s->error == NULL && s->refused->len > 0) {
    gboolean expired = FALSE;

    g_mutex_lock (&self->lock);
    while (!self->flushing && self->ready_generation == generation && !expired)
      expired = !g_cond_wait_until (&self->cond, &self->lock, deadline);
    generation = self->ready_generation;
    if (self->flushing) {
      g_mutex_unlock (&self->lock);
      return GST_FLOW_FLUSHING;
    }
    g_mutex_unlock (&self->lock);
    if (expired)
      break;
    g_ptr_array_unref (s->targets);
    s->targets = g_steal_pointer (&s->refused);
    s->refused = g_ptr_array_new_with_free_func (g_free);
    send_to_targets (s);
  }
  if (s->error != NULL) {
    GST_ELEMENT_WARNING (self, RESOURCE, WRITE,
        ("A message could not be sent: %s", s->error->message), (NULL));
    GST_OBJECT_LOCK (self);
    self->not_delivered++;
    GST_OBJECT_UNLOCK (self);
  } else if (at_once && s->refused->len > 0) {
    GST_ELEMENT_WARNING (self, RESOURCE, WRITE,
        ("The room's SFU did not take a message within %u ms", timeout),
        ("the queue of the connection to it stayed full"));
    GST_OBJECT_LOCK (self);
    self->not_delivered++;
    GST_OBJECT_UNLOCK (self);
  } else if (s->refused->len > 0) {
    guint n = s->refused->len;
    g_autofree char *names = join_ids (s->refused);

    GST_ELEMENT_WARNING (self, RESOURCE, WRITE,
        ("Participants %s did not take a message within %u ms", names,
            timeout), ("their queues stayed full"));
    GST_OBJECT_LOCK (self);
    self->not_delivered += n;
    GST_OBJECT_UNLOCK (self);
  } else {
    GST_OBJECT_LOCK (self);
    self->sent++;
    GST_OBJECT_UNLOCK (self);
  }
  return GST_FLOW_OK;
}

static GstFlowReturn
gst_legba_data_sink_render (GstBaseSink * sink, GstBuffer * buffer)
{
  GstLegbaDataSink *self = GST_LEGBA_DATA_SINK (sink);
  LegbaDataMeta *meta = legba_buffer_get_data_meta (buffer);
  Send s = { self, };
  g_autofree char *topic = NULL;
  GstMapInfo map;
  GstFlowReturn ret;

  GST_OBJECT_LOCK (self);
  topic = g_strdup (meta && meta->topic ? meta->topic : self->topic);
  s.to = g_strdupv (meta && meta->to ? meta->to : self->to);
  s.reliability = meta && meta->has_reliability ? meta->reliability :
      self->reliable ? LEGBA_RELIABILITY_RELIABLE : LEGBA_RELIABILITY_LOSSY;
  GST_OBJECT_UNLOCK (self);
  s.topic = topic;
  if (!gst_buffer_map (buffer, &map, GST_MAP_READ)) {
    g_strfreev (s.to);
    GST_ELEMENT_ERROR (self, RESOURCE, READ, (NULL), ("cannot map a buffer"));
    return GST_FLOW_ERROR;
  }
  if (self->json) {
    g_autoptr (GError) error = NULL;

    /* json_from_string reads a NUL-terminated string */
    g_autofree char *text = g_strndup ((const char *) map.data, map.size);

    s.json = json_from_string (text, &error);
    if (s.json == NULL) {
      gst_buffer_unmap (buffer, &map);
      g_strfreev (s.to);
      GST_ELEMENT_WARNING (self, STREAM, DECODE,
          ("A buffer is not one JSON value; it was not sent"),
          ("%s", error ? error->message : "empty buffer"));
      GST_OBJECT_LOCK (self);
      self->not_delivered++;
      GST_OBJECT_UNLOCK (self);
      return GST_FLOW_OK;
    }
  } else {
    s.bytes = g_bytes_new (map.data, map.size);
  }
  gst_buffer_unmap (buffer, &map);
  s.targets = g_ptr_array_new_with_free_func (g_free);
  s.refused = g_ptr_array_new_with_free_func (g_free);
  ret = send_buffer (self, &s);
  g_ptr_array_unref (s.targets);
  g_ptr_array_unref (s.refused);
  g_clear_error (&s.error);
  g_clear_pointer (&s.json, json_node_unref);
  g_clear_pointer (&s.bytes, g_bytes_unref);
  g_strfreev (s.to);
  return ret;
}

typedef struct
{
  gboolean idle;
} Drained;

static gpointer
drained_on_room (gpointer object, gpointer data)
{
  LegbaRoom *room = object;
  g_autoptr (GstStructure) stats = legba_room_get_data_stats (room);
  guint64 queued = 0, buffered = 0;

  gst_structure_get_uint64 (stats, "messages-queued", &queued);
  gst_structure_get_uint64 (stats, "buffered-bytes", &buffered);
  ((Drained *) data)->idle = queued == 0 && buffered == 0;
  return NULL;
}

/* EOS: the messages leave before the pipeline may stop (within timeout):
 * nothing waits in a queue and webrtcbin has sent what it was given. */
static void
drain_on_eos (GstLegbaDataSink * self)
{
  Drained d = { FALSE };
  guint timeout;
  gint64 deadline;

  GST_OBJECT_LOCK (self);
  timeout = self->timeout;
  GST_OBJECT_UNLOCK (self);
  deadline = g_get_monotonic_time () + timeout * G_TIME_SPAN_MILLISECOND;

  while (run_on_room (self, drained_on_room, &d) && !d.idle) {
    gboolean flushing;

    g_mutex_lock (&self->lock);
    if (!self->flushing)
      g_cond_wait_until (&self->cond, &self->lock,
          MIN (deadline,
              g_get_monotonic_time () + 10 * G_TIME_SPAN_MILLISECOND));
    flushing = self->flushing;
    g_mutex_unlock (&self->lock);
    if (flushing || g_get_monotonic_time () >= deadline)
      break;
  }
  if (!d.idle)
    GST_ELEMENT_WARNING (self, RESOURCE, WRITE,
        ("Messages were still waiting to leave at the end of the stream"),
        ("after %u ms", timeout));
}

static gboolean
gst_legba_data_sink_event (GstBaseSink * sink, GstEvent * event)
{
  GstLegbaDataSink *self = GST_LEGBA_DATA_SINK (sink);

  if (GST_EVENT_TYPE (event) == GST_EVENT_EOS && self->room != NULL)
    drain_on_eos (self);
  return GST_BASE_SINK_CLASS (gst_legba_data_sink_parent_class)->event (sink,
      event);
}

static gboolean
gst_legba_data_sink_set_caps (GstBaseSink * sink, GstCaps * caps)
{
  GstLegbaDataSink *self = GST_LEGBA_DATA_SINK (sink);

  self->json = gst_structure_has_name (gst_caps_get_structure (caps, 0),
      "application/json");
  return TRUE;
}

static gboolean
gst_legba_data_sink_start (GstBaseSink * sink)
{
  GstLegbaDataSink *self = GST_LEGBA_DATA_SINK (sink);
  g_autoptr (GError) error = NULL;
  g_autofree char *name = NULL;
  g_autoptr (LegbaRoom) given = NULL;

  GST_OBJECT_LOCK (self);
  name = g_strdup (self->room_element);
  given = self->legba_room ? g_object_ref (self->legba_room) : NULL;
  GST_OBJECT_UNLOCK (self);
  self->room = legba_data_find_room (GST_ELEMENT (self), given, name, &error);
  if (self->room == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS, ("%s", error->message),
        (NULL));
    return FALSE;
  }
  g_mutex_lock (&self->lock);
  self->flushing = FALSE;
  g_mutex_unlock (&self->lock);
  legba_context_run (legba_room_get_main_context (self->room),
      self->room, connect_room, self);
  return TRUE;
}

static gboolean
gst_legba_data_sink_stop (GstBaseSink * sink)
{
  GstLegbaDataSink *self = GST_LEGBA_DATA_SINK (sink);

  if (self->room == NULL)
    return TRUE;
  legba_context_run (legba_room_get_main_context (self->room),
      self->room, disconnect_room, self);
  g_clear_object (&self->room);
  return TRUE;
}

static gboolean
gst_legba_data_sink_unlock (GstBaseSink * sink)
{
  GstLegbaDataSink *self = GST_LEGBA_DATA_SINK (sink);

  g_mutex_lock (&self->lock);
  self->flushing = TRUE;
  if (self->call != NULL)
    legba_context_call_cancel (self->call);
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  return TRUE;
}

static gboolean
gst_legba_data_sink_unlock_stop (GstBaseSink * sink)
{
  GstLegbaDataSink *self = GST_LEGBA_DATA_SINK (sink);

  g_mutex_lock (&self->lock);
  self->flushing = FALSE;
  g_mutex_unlock (&self->lock);
  return TRUE;
}

/* ---- GObject ---- */

static void
gst_legba_data_sink_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstLegbaDataSink *self = GST_LEGBA_DATA_SINK (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_ROOM_ELEMENT:
      g_free (self->room_element);
      self->room_element = g_value_dup_string (value);
      break;
    case PROP_LEGBA_ROOM:
      g_clear_object (&self->legba_room);
      self->legba_room = g_value_dup_object (value);
      break;
    case PROP_TOPIC:
      g_free (self->topic);
      self->topic = g_value_dup_string (value);
      break;
    case PROP_RELIABLE:
      self->reliable = g_value_get_boolean (value);
      break;
    case PROP_TO:{
      const char *to = g_value_get_string (value);

      g_strfreev (self->to);
      self->to = to && to[0] ? g_strsplit (to, ",", -1) : NULL;
      break;
    }
    case PROP_TIMEOUT:
      self->timeout = g_value_get_uint (value);
      break;
    case PROP_MIN_RECIPIENTS:
      self->min_recipients = g_value_get_uint (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_legba_data_sink_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstLegbaDataSink *self = GST_LEGBA_DATA_SINK (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_ROOM_ELEMENT:
      g_value_set_string (value, self->room_element);
      break;
    case PROP_LEGBA_ROOM:
      g_value_set_object (value, self->legba_room);
      break;
    case PROP_TOPIC:
      g_value_set_string (value, self->topic);
      break;
    case PROP_RELIABLE:
      g_value_set_boolean (value, self->reliable);
      break;
    case PROP_TO:
      g_value_take_string (value, self->to ? g_strjoinv (",", self->to) : NULL);
      break;
    case PROP_TIMEOUT:
      g_value_set_uint (value, self->timeout);
      break;
    case PROP_MIN_RECIPIENTS:
      g_value_set_uint (value, self->min_recipients);
      break;
    case PROP_SENT:
      g_value_set_uint64 (value, self->sent);
      break;
    case PROP_NOT_DELIVERED:
      g_value_set_uint64 (value, self->not_delivered);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_legba_data_sink_finalize (GObject * object)
{
  GstLegbaDataSink *self = GST_LEGBA_DATA_SINK (object);

  g_free (self->room_element);
  g_clear_object (&self->legba_room);
  g_free (self->topic);
  g_strfreev (self->to);
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->cond);
  g_hash_table_unref (self->members);
  G_OBJECT_CLASS (gst_legba_data_sink_parent_class)->finalize (object);
}

static void
gst_legba_data_sink_class_init (GstLegbaDataSinkClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseSinkClass *sink_class = GST_BASE_SINK_CLASS (klass);
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
      GST_PARAM_MUTABLE_READY;
  const GParamFlags rwp = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
      GST_PARAM_MUTABLE_PLAYING;
  const GParamFlags ro = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS;

  GST_DEBUG_CATEGORY_INIT (legba_data_sink_debug, "legbadatasink", 0,
      "Legba data-channel sink");

  gobject_class->set_property = gst_legba_data_sink_set_property;
  gobject_class->get_property = gst_legba_data_sink_get_property;
  gobject_class->finalize = gst_legba_data_sink_finalize;
  sink_class->render = gst_legba_data_sink_render;
  sink_class->set_caps = gst_legba_data_sink_set_caps;
  sink_class->event = gst_legba_data_sink_event;
  sink_class->start = gst_legba_data_sink_start;
  sink_class->stop = gst_legba_data_sink_stop;
  sink_class->unlock = gst_legba_data_sink_unlock;
  sink_class->unlock_stop = gst_legba_data_sink_unlock_stop;

  properties[PROP_ROOM_ELEMENT] = g_param_spec_string ("room-element",
      "Room element", "Name of the legbaroom element whose room the "
      "messages go to, looked for in this element's bin and the bins above "
      "(ignored when legba-room is set)", NULL, rw);
  properties[PROP_LEGBA_ROOM] = g_param_spec_object ("legba-room",
      "Legba room", "The LegbaRoom the messages go to, for applications; "
      "its main context must be running", LEGBA_TYPE_ROOM, rw);
  properties[PROP_TOPIC] = g_param_spec_string ("topic", "Topic",
      "Topic of the JSON messages (none when unset; a LegbaDataMeta on a "
      "buffer overrides it); topics starting with legba. are reserved",
      NULL, rwp);
  properties[PROP_RELIABLE] = g_param_spec_boolean ("reliable", "Reliable",
      "Send on the ordered, retransmitted channel (TRUE) or on the lossy "
      "one, where a congested recipient drops the message (FALSE)",
      DEFAULT_RELIABLE, rwp);
  properties[PROP_TO] = g_param_spec_string ("to", "To",
      "Comma-separated participant ids or identities the messages go to "
      "(everyone in the room when unset; a LegbaDataMeta overrides it)",
      NULL, rwp);
  properties[PROP_TIMEOUT] = g_param_spec_uint ("timeout", "Timeout",
      "How long a buffer waits, in milliseconds, for recipients whose "
      "queue is full before a warning names them and the message counts "
      "as not delivered to them", 0, G_MAXINT, DEFAULT_TIMEOUT, rwp);
  properties[PROP_MIN_RECIPIENTS] = g_param_spec_uint ("min-recipients",
      "Min recipients", "Hold the first and every later buffer until the "
      "room lists at least this many recipients (participants the "
      "messages are for); 0: send to whoever is there", 0, 64, 0, rwp);
  properties[PROP_SENT] = g_param_spec_uint64 ("sent", "Sent",
      "Buffers every recipient took", 0, G_MAXUINT64, 0, ro);
  properties[PROP_NOT_DELIVERED] = g_param_spec_uint64 ("not-delivered",
      "Not delivered", "Messages not delivered, once per recipient that "
      "did not take one in time (and once per buffer that could not be "
      "sent at all)", 0, G_MAXUINT64, 0, ro);
  g_object_class_install_properties (gobject_class, N_PROPERTIES, properties);

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_set_static_metadata (element_class,
      "Legba data sink", "Sink/Network",
      "Sends each buffer as a data-channel message to the participants of "
      "a Legba room", "Legba");
}

static void
gst_legba_data_sink_init (GstLegbaDataSink * self)
{
  self->reliable = DEFAULT_RELIABLE;
  self->timeout = DEFAULT_TIMEOUT;
  g_mutex_init (&self->lock);
  g_cond_init (&self->cond);
  self->members = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      g_free);
  gst_base_sink_set_sync (GST_BASE_SINK (self), FALSE);
}
