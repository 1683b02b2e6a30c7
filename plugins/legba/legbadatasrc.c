/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * SECTION:element-legbadatasrc
 * @title: legbadatasrc
 *
 * A live source of the data-channel messages the participants of a Legba
 * room send (docs/room-protocol.md §6) and of the events the application's
 * backend publishes to it (§7, from the participant `server`): one buffer
 * per message, timestamped with the pipeline clock when it arrived, with a
 * #LegbaDataMeta naming the sender, the topic and the channel.
 *
 * Its caps are what downstream takes: `application/json` (the default)
 * carries JSON messages, each buffer the message's `data` as JSON text;
 * `application/octet-stream` carries binary messages. `topic` and `from`
 * keep only some messages.
 *
 * The room is a `legbaroom` element of the same pipeline, named by
 * `room-element` (looked for in the source's bin, then in each bin above),
 * or, for applications, a #LegbaRoom set as `legba-room`.
 *
 * Until its first message it sends a gap event, so that the sinks behind
 * it preroll and the pipeline goes to PLAYING whether or not anyone sends
 * (other sinks of the pipeline are not held in PAUSED waiting for it).
 *
 * Messages wait for downstream in a queue of at most `max-buffers`; when
 * downstream is slower, the oldest are dropped, counted in `dropped`, and
 * a warning says so once. They enter the queue on the thread they arrive
 * on (#LegbaRoom::sync-data-received), without a stop on the room's
 * thread.
 *
 * ## Example launch lines
 * Every message on the topic `sensor`, one file each:
 * |[
 * gst-launch-1.0 legbaroom name=r server-url=ws://127.0.0.1:6001 \
 *       app-key=KEY app-secret=SECRET room=demo identity=logger \
 *     legbadatasrc room-element=r topic=sensor \
 *     ! multifilesink location=message-%05d.json
 * ]|
 */
#include "legba-elements.h"
#include "legbadata-common.h"
#include "legba-context-call.h"

#include <gst/base/gstpushsrc.h>

GST_DEBUG_CATEGORY_STATIC (legba_data_src_debug);
#define GST_CAT_DEFAULT legba_data_src_debug

#define DEFAULT_MAX_BUFFERS 1000

enum
{
  PROP_0,
  PROP_ROOM_ELEMENT,
  PROP_LEGBA_ROOM,
  PROP_TOPIC,
  PROP_FROM,
  PROP_MAX_BUFFERS,
  PROP_RECEIVED,
  PROP_DROPPED,
  N_PROPERTIES
};

static GParamSpec *properties[N_PROPERTIES];

#define GST_TYPE_LEGBA_DATA_SRC (gst_legba_data_src_get_type ())
G_DECLARE_FINAL_TYPE (GstLegbaDataSrc, gst_legba_data_src, GST,
    LEGBA_DATA_SRC, GstPushSrc);

struct _GstLegbaDataSrc
{
  GstPushSrc parent;

  /* properties (object lock) */
  char *room_element;
  LegbaRoom *legba_room;
  char *topic;
  char **from;
  guint max_buffers;

  /* while started */
  LegbaRoom *room;
  gulong handlers[2];           /* connected on the room's thread */
  gboolean attached;            /* (lock) between start and stop */
  GMutex lock;
  GCond cond;
  GQueue queue;                 /* (lock) GstBuffer */
  gboolean json;                /* (lock) the negotiated caps */
  gboolean flushing;            /* (lock) */
  gboolean warned;              /* (lock) */
  gboolean started;             /* streaming thread: create ran once */
  guint64 received;             /* (lock) */
  guint64 dropped;              /* (lock) */
};

G_DEFINE_FINAL_TYPE (GstLegbaDataSrc, gst_legba_data_src, GST_TYPE_PUSH_SRC);
GST_ELEMENT_REGISTER_DEFINE (legbadatasrc, "legbadatasrc", GST_RANK_NONE,
    GST_TYPE_LEGBA_DATA_SRC);

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("application/json; application/octet-stream"));

/* ---- On the threads messages arrive on ---- */

/* The room reports messages with its sync- signals, on the thread each
 * arrives on (the thread of its data channel's SCTP stream), so that a
 * message goes straight into the queue, with no hand-over to the room's
 * thread. */

static gboolean
wanted (GstLegbaDataSrc * self, LegbaParticipant * p, const char *topic)
{
  gboolean ok;

  GST_OBJECT_LOCK (self);
  ok = (self->topic == NULL || g_strcmp0 (self->topic, topic) == 0) &&
      legba_data_matches (p, self->from);
  GST_OBJECT_UNLOCK (self);
  return ok;
}

/* The running time of the pipeline now; 0 without a clock. */
static GstClockTime
running_time_now (GstLegbaDataSrc * self)
{
  g_autoptr (GstClock) clock = gst_element_get_clock (GST_ELEMENT (self));
  GstClockTime now, base;

  if (clock == NULL)
    return 0;
  now = gst_clock_get_time (clock);
  base = gst_element_get_base_time (GST_ELEMENT (self));
  return now > base ? now - base : 0;
}

static void
enqueue (GstLegbaDataSrc * self, LegbaRoom * room, LegbaParticipant * p,
    const char *topic, GstBuffer * buffer)
{
  gboolean warn = FALSE;

  legba_buffer_add_data_meta (buffer, legba_participant_get_id (p), topic,
      legba_room_get_received_reliability (room), NULL);
  g_mutex_lock (&self->lock);
  /* a handler that was running when stop() disconnected it */
  if (!self->attached) {
    g_mutex_unlock (&self->lock);
    gst_buffer_unref (buffer);
    return;
  }
  /* under the lock: messages come on several threads (a stream each), and
   * the queue's timestamps only grow */
  GST_BUFFER_PTS (buffer) = running_time_now (self);
  g_queue_push_tail (&self->queue, buffer);
  self->received++;
  while (g_queue_get_length (&self->queue) > self->max_buffers) {
    gst_buffer_unref (g_queue_pop_head (&self->queue));
    self->dropped++;
    warn = !self->warned;
    self->warned = TRUE;
  }
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  if (warn)
    GST_ELEMENT_WARNING (self, RESOURCE, READ,
        ("Downstream is slower than the messages arrive: the oldest are "
            "dropped (see the dropped property)"), (NULL));
}

static void
on_data (LegbaRoom * room, LegbaParticipant * p, const char *topic,
    JsonNode * data, GstLegbaDataSrc * self)
{
  gboolean json;
  char *text;
  gsize size;

  g_mutex_lock (&self->lock);
  json = self->json;
  g_mutex_unlock (&self->lock);
  if (!json || !wanted (self, p, topic))
    return;
  text = json_to_string (data, FALSE);
  size = strlen (text);
  enqueue (self, room, p, topic, gst_buffer_new_wrapped (text, size));
}

static void
on_bytes (LegbaRoom * room, LegbaParticipant * p, GBytes * bytes,
    GstLegbaDataSrc * self)
{
  gboolean json;

  g_mutex_lock (&self->lock);
  json = self->json;
  g_mutex_unlock (&self->lock);
  if (json || !wanted (self, p, NULL))
    return;
  enqueue (self, room, p, NULL, gst_buffer_new_wrapped_bytes (bytes));
}

static void
release_self (gpointer data, GClosure * closure)
{
  gst_object_unref (data);
}

static gpointer
connect_room (gpointer object, gpointer data)
{
  LegbaRoom *room = object;
  GstLegbaDataSrc *self = data;

  /* each handler holds the element while it may run */
  self->handlers[0] = g_signal_connect_data (room, "sync-data-received",
      G_CALLBACK (on_data), gst_object_ref (self), release_self, 0);
  self->handlers[1] = g_signal_connect_data (room, "sync-bytes-received",
      G_CALLBACK (on_bytes), gst_object_ref (self), release_self, 0);
  legba_room_enable_sync_data_emission (room);
  return NULL;
}

static gpointer
disconnect_room (gpointer object, gpointer data)
{
  LegbaRoom *room = object;
  GstLegbaDataSrc *self = data;

  if (self->handlers[0] != 0)
    legba_room_disable_sync_data_emission (room);
  g_clear_signal_handler (&self->handlers[0], room);
  g_clear_signal_handler (&self->handlers[1], room);
  return NULL;
}

/* ---- Streaming thread ---- */

/* Messages may be long in coming: a gap event at once, so that the sinks
 * behind the source preroll and the pipeline reaches PLAYING. Without it
 * a sink there stays in its asynchronous state change, and the bin holds
 * every other sink of the pipeline in PAUSED with it. The gap needs a
 * segment before it; basesrc sends its own again before the first
 * buffer. */
static void
send_gap (GstLegbaDataSrc * self)
{
  GstBaseSrc *base = GST_BASE_SRC (self);
  GstSegment segment;

  if (!gst_pad_has_current_caps (base->srcpad) &&
      !gst_base_src_negotiate (base))
    return;
  GST_OBJECT_LOCK (self);
  gst_segment_copy_into (&base->segment, &segment);
  GST_OBJECT_UNLOCK (self);
  gst_pad_push_event (base->srcpad, gst_event_new_segment (&segment));
  gst_pad_push_event (base->srcpad, gst_event_new_gap (running_time_now
          (self), GST_CLOCK_TIME_NONE));
}

static GstFlowReturn
gst_legba_data_src_create (GstPushSrc * src, GstBuffer ** buffer)
{
  GstLegbaDataSrc *self = GST_LEGBA_DATA_SRC (src);
  gboolean first = !self->started;
  gboolean waiting;

  self->started = TRUE;
  g_mutex_lock (&self->lock);
  waiting = g_queue_is_empty (&self->queue);
  g_mutex_unlock (&self->lock);
  if (first && waiting)
    send_gap (self);

  g_mutex_lock (&self->lock);
  while (!self->flushing && g_queue_is_empty (&self->queue))
    g_cond_wait (&self->cond, &self->lock);
  if (self->flushing) {
    g_mutex_unlock (&self->lock);
    return GST_FLOW_FLUSHING;
  }
  *buffer = g_queue_pop_head (&self->queue);
  g_mutex_unlock (&self->lock);
  return GST_FLOW_OK;
}

static gboolean
gst_legba_data_src_set_caps (GstBaseSrc * src, GstCaps * caps)
{
  GstLegbaDataSrc *self = GST_LEGBA_DATA_SRC (src);

  g_mutex_lock (&self->lock);
  self->json = gst_structure_has_name (gst_caps_get_structure (caps, 0),
      "application/json");
  g_mutex_unlock (&self->lock);
  return TRUE;
}

static gboolean
gst_legba_data_src_start (GstBaseSrc * src)
{
  GstLegbaDataSrc *self = GST_LEGBA_DATA_SRC (src);
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
  self->attached = TRUE;
  self->json = TRUE;
  self->warned = FALSE;
  self->started = FALSE;
  g_mutex_unlock (&self->lock);
  legba_context_run (legba_room_get_main_context (self->room),
      self->room, connect_room, self);
  return TRUE;
}

static gboolean
gst_legba_data_src_stop (GstBaseSrc * src)
{
  GstLegbaDataSrc *self = GST_LEGBA_DATA_SRC (src);

  if (self->room != NULL) {
    legba_context_run (legba_room_get_main_context (self->room),
        self->room, disconnect_room, self);
    g_clear_object (&self->room);
  }
  g_mutex_lock (&self->lock);
  self->attached = FALSE;
  g_queue_clear_full (&self->queue, (GDestroyNotify) gst_buffer_unref);
  g_mutex_unlock (&self->lock);
  return TRUE;
}

static gboolean
gst_legba_data_src_unlock (GstBaseSrc * src)
{
  GstLegbaDataSrc *self = GST_LEGBA_DATA_SRC (src);

  g_mutex_lock (&self->lock);
  self->flushing = TRUE;
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  return TRUE;
}

static gboolean
gst_legba_data_src_unlock_stop (GstBaseSrc * src)
{
  GstLegbaDataSrc *self = GST_LEGBA_DATA_SRC (src);

  g_mutex_lock (&self->lock);
  self->flushing = FALSE;
  g_mutex_unlock (&self->lock);
  return TRUE;
}

/* ---- GObject ---- */

static void
gst_legba_data_src_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstLegbaDataSrc *self = GST_LEGBA_DATA_SRC (object);

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
    case PROP_FROM:{
      const char *from = g_value_get_string (value);

      g_strfreev (self->from);
      self->from = from && from[0] ? g_strsplit (from, ",", -1) : NULL;
      break;
    }
    case PROP_MAX_BUFFERS:
      g_mutex_lock (&self->lock);
      self->max_buffers = g_value_get_uint (value);
      g_mutex_unlock (&self->lock);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_legba_data_src_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstLegbaDataSrc *self = GST_LEGBA_DATA_SRC (object);

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
    case PROP_FROM:
      g_value_take_string (value, self->from ? g_strjoinv (",", self->from) :
          NULL);
      break;
    case PROP_MAX_BUFFERS:
    case PROP_RECEIVED:
    case PROP_DROPPED:
      g_mutex_lock (&self->lock);
      if (prop_id == PROP_MAX_BUFFERS)
        g_value_set_uint (value, self->max_buffers);
      else
        g_value_set_uint64 (value, prop_id == PROP_RECEIVED ?
            self->received : self->dropped);
      g_mutex_unlock (&self->lock);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_legba_data_src_finalize (GObject * object)
{
  GstLegbaDataSrc *self = GST_LEGBA_DATA_SRC (object);

  g_free (self->room_element);
  g_clear_object (&self->legba_room);
  g_free (self->topic);
  g_strfreev (self->from);
  g_queue_clear_full (&self->queue, (GDestroyNotify) gst_buffer_unref);
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->cond);
  G_OBJECT_CLASS (gst_legba_data_src_parent_class)->finalize (object);
}

static void
gst_legba_data_src_class_init (GstLegbaDataSrcClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseSrcClass *base_class = GST_BASE_SRC_CLASS (klass);
  GstPushSrcClass *push_class = GST_PUSH_SRC_CLASS (klass);
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
      GST_PARAM_MUTABLE_READY;
  const GParamFlags rwp = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
      GST_PARAM_MUTABLE_PLAYING;
  const GParamFlags ro = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS;

  GST_DEBUG_CATEGORY_INIT (legba_data_src_debug, "legbadatasrc", 0,
      "Legba data-channel source");

  gobject_class->set_property = gst_legba_data_src_set_property;
  gobject_class->get_property = gst_legba_data_src_get_property;
  gobject_class->finalize = gst_legba_data_src_finalize;
  push_class->create = gst_legba_data_src_create;
  base_class->set_caps = gst_legba_data_src_set_caps;
  base_class->start = gst_legba_data_src_start;
  base_class->stop = gst_legba_data_src_stop;
  base_class->unlock = gst_legba_data_src_unlock;
  base_class->unlock_stop = gst_legba_data_src_unlock_stop;

  properties[PROP_ROOM_ELEMENT] = g_param_spec_string ("room-element",
      "Room element", "Name of the legbaroom element whose room's messages "
      "to receive, looked for in this element's bin and the bins above "
      "(ignored when legba-room is set)", NULL, rw);
  properties[PROP_LEGBA_ROOM] = g_param_spec_object ("legba-room",
      "Legba room", "The LegbaRoom whose messages to receive, for "
      "applications; its main context must be running", LEGBA_TYPE_ROOM, rw);
  properties[PROP_TOPIC] = g_param_spec_string ("topic", "Topic",
      "Only JSON messages on this topic (for the backend's events, the "
      "event name); all when unset", NULL, rwp);
  properties[PROP_FROM] = g_param_spec_string ("from", "From",
      "Only messages from these comma-separated participant ids or "
      "identities (server for the backend's events); all when unset", NULL,
      rwp);
  properties[PROP_MAX_BUFFERS] =
      g_param_spec_uint ("max-buffers", "Max buffers",
      "Messages waiting for downstream at most; beyond, the "
      "oldest is dropped and counted in dropped", 1, G_MAXINT,
      DEFAULT_MAX_BUFFERS, rw);
  properties[PROP_RECEIVED] =
      g_param_spec_uint64 ("received", "Received",
      "Messages taken (that passed the topic and from filters)", 0, G_MAXUINT64,
      0, ro);
  properties[PROP_DROPPED] =
      g_param_spec_uint64 ("dropped", "Dropped",
      "Messages dropped because downstream was slower than they arrived", 0,
      G_MAXUINT64, 0, ro);
  g_object_class_install_properties (gobject_class, N_PROPERTIES, properties);

  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class,
      "Legba data source", "Source/Network",
      "Pushes each data-channel message the participants of a Legba room "
      "send as a buffer", "Legba");
}

static void
gst_legba_data_src_init (GstLegbaDataSrc * self)
{
  self->max_buffers = DEFAULT_MAX_BUFFERS;
  g_mutex_init (&self->lock);
  g_cond_init (&self->cond);
  g_queue_init (&self->queue);
  gst_base_src_set_live (GST_BASE_SRC (self), TRUE);
  gst_base_src_set_format (GST_BASE_SRC (self), GST_FORMAT_TIME);
}
