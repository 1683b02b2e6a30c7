/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaPeerSender: see legba-peer-sender.h. This file is the element: its
 * pads, the queues and the pacing task; the feedback it takes from the
 * RTP session is in legba-peer-sender-feedback.c.
 */
#include <legba/room/legba-peer-sender-private.h>

GST_DEBUG_CATEGORY (legba_sender_debug);
#define GST_CAT_DEFAULT legba_sender_debug

/* The pacer may save up this much sending time while idle: a packet or
 * two, never a burst. */
#define BURST_US (5 * G_TIME_SPAN_MILLISECOND)
/* What the queue may hold, in time at the pacing rate, before the rate
 * rises to send it within that time (a target that fell while frames of
 * the old rate were queued). */
#define QUEUE_LIMIT_US (500 * G_TIME_SPAN_MILLISECOND)
/* The most that video whose encoder ignores the target may take from
 * the budget beyond what it holds: a packet. */
#define UNSTEERED_DEBT 1500
/* Past this many queued packets the branches wait (a receiver that stops
 * taking anything). */
#define QUEUE_MAX_PACKETS 4096

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS ("application/x-rtp"));
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS ("application/x-rtp"));

G_DEFINE_TYPE (LegbaPeerSender, legba_peer_sender, GST_TYPE_ELEMENT);

/* ---- Queues ---- */

static void
clear_queues (LegbaPeerSender * self)
{
  for (guint i = 0; i < G_N_ELEMENTS (self->queues); i++)
    g_queue_clear_full (&self->queues[i],
        (GDestroyNotify) gst_mini_object_unref);
  self->queued_bytes = 0;
  self->queued_packets = 0;
}

/* The lane of an RTP packet, by its SSRC and payload type; a packet too
 * short to be one goes with the video. Called with the lock. */
static LegbaSenderLane
lane_of (LegbaPeerSender * self, GstBuffer * buffer)
{
  guint8 header[12];

  if (gst_buffer_extract (buffer, 0, header, 12) < 12)
    return LEGBA_SENDER_LANE_VIDEO;
  if (self->audio_ssrc != 0 && GST_READ_UINT32_BE (header + 8) ==
      self->audio_ssrc)
    return LEGBA_SENDER_LANE_AUDIO;
  if (legba_peer_sender_is_rtx_pt (self, header[1] & 0x7f))
    return LEGBA_SENDER_LANE_RTX;
  return LEGBA_SENDER_LANE_VIDEO;
}

/* Called with the lock. */
static void
enqueue_buffer (LegbaPeerSender * self, GstBuffer * buffer)
{
  LegbaSenderLane lane = lane_of (self, buffer);

  g_queue_push_tail (&self->queues[lane], buffer);
  self->queued_bytes += gst_buffer_get_size (buffer);
  self->queued_packets++;
  g_cond_signal (&self->cond);
}

static GstFlowReturn
wait_room (LegbaPeerSender * self)
{
  while (self->srcresult == GST_FLOW_OK &&
      self->queued_packets >= QUEUE_MAX_PACKETS)
    g_cond_wait (&self->cond, &self->lock);
  return self->srcresult;
}

static GstFlowReturn
chain (GstPad * pad, GstObject * parent, GstBuffer * buffer)
{
  LegbaPeerSender *self = LEGBA_PEER_SENDER (parent);
  GstFlowReturn ret;

  g_mutex_lock (&self->lock);
  ret = wait_room (self);
  if (ret == GST_FLOW_OK)
    enqueue_buffer (self, buffer);
  else
    gst_buffer_unref (buffer);
  g_mutex_unlock (&self->lock);
  return ret;
}

static GstFlowReturn
chain_list (GstPad * pad, GstObject * parent, GstBufferList * list)
{
  LegbaPeerSender *self = LEGBA_PEER_SENDER (parent);
  GstFlowReturn ret;
  guint n = gst_buffer_list_length (list);

  g_mutex_lock (&self->lock);
  ret = wait_room (self);
  for (guint i = 0; ret == GST_FLOW_OK && i < n; i++)
    enqueue_buffer (self, gst_buffer_ref (gst_buffer_list_get (list, i)));
  g_mutex_unlock (&self->lock);
  gst_buffer_list_unref (list);
  return ret;
}

static gboolean
sink_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  LegbaPeerSender *self = LEGBA_PEER_SENDER (parent);

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_FLUSH_START:
      g_mutex_lock (&self->lock);
      self->srcresult = GST_FLOW_FLUSHING;
      clear_queues (self);
      g_cond_broadcast (&self->cond);
      g_mutex_unlock (&self->lock);
      gst_pad_push_event (self->srcpad, event);
      gst_pad_pause_task (self->srcpad);
      return TRUE;
    case GST_EVENT_FLUSH_STOP:
      gst_pad_push_event (self->srcpad, event);
      g_mutex_lock (&self->lock);
      self->srcresult = GST_FLOW_OK;
      g_mutex_unlock (&self->lock);
      gst_pad_start_task (self->srcpad, legba_peer_sender_loop, self, NULL);
      return TRUE;
    default:
      break;
  }
  if (!GST_EVENT_IS_SERIALIZED (event))
    return gst_pad_push_event (self->srcpad, event);
  g_mutex_lock (&self->lock);
  if (self->srcresult != GST_FLOW_OK) {
    g_mutex_unlock (&self->lock);
    gst_event_unref (event);
    return FALSE;
  }
  g_queue_push_tail (&self->queues[LEGBA_SENDER_LANE_VIDEO], event);
  g_cond_signal (&self->cond);
  g_mutex_unlock (&self->lock);
  return TRUE;
}

/* ---- Pacing ---- */

/* The rate packets leave at, in bytes per microsecond: the target times
 * the pacing factor, higher when the queue would take longer than
 * QUEUE_LIMIT_US. Called with the lock. */
static gdouble
pacing_rate (LegbaPeerSender * self, gint64 now)
{
  gdouble rate = legba_peer_sender_pacing_factor (self, now) * self->target /
      8.0 / G_USEC_PER_SEC;
  gdouble drain = (gdouble) self->queued_bytes / QUEUE_LIMIT_US;

  return MAX (rate, drain);
}

static void
refill (LegbaPeerSender * self, gint64 now)
{
  gdouble rate = pacing_rate (self, now);

  if (self->budget_at != 0 && now > self->budget_at)
    self->budget += rate * (now - self->budget_at);
  self->budget = MIN (self->budget, rate * BURST_US + 1500);
  self->budget_at = now;
}

/* The next item to send and its lane, or NULL with *wait_until set when
 * the budget holds video back. Audio and the events go at once;
 * retransmissions before video, both within the budget. Called with the
 * lock. */
static GstMiniObject *
next_item (LegbaPeerSender * self, gint64 now, gint64 * wait_until,
    LegbaSenderLane * lane)
{
  GQueue *video = &self->queues[LEGBA_SENDER_LANE_VIDEO];
  GQueue *rtx = &self->queues[LEGBA_SENDER_LANE_RTX];
  GQueue *audio = &self->queues[LEGBA_SENDER_LANE_AUDIO];
  GstMiniObject *head = g_queue_peek_head (video);
  GQueue *from;

  if (head != NULL && GST_IS_EVENT (head))
    return g_queue_pop_head (video);
  if (self->started && !g_queue_is_empty (audio))
    from = audio;
  else if (!g_queue_is_empty (rtx))
    from = rtx;
  else if (head != NULL)
    from = video;
  else
    return NULL;
  refill (self, now);
  /* a receiver that sent no feedback past the start gives no estimate to
   * pace by (nor to hold the encoder back by:
   * legba_peer_sender_get_target()); in the start the start estimate is
   * paced by; video whose encoder ignores the estimate would only wait in
   * this queue instead of the bottleneck's */
  if (from != audio && self->budget < 0 && (self->feedback_reports > 0 ||
          legba_peer_sender_in_start (self, now)) && !(from == video
          && self->video_unsteered)) {
    *wait_until = now + (gint64) (-self->budget / pacing_rate (self, now)) + 1;
    return NULL;
  }
  head = g_queue_pop_head (from);
  *lane = from - self->queues;
  self->budget -= gst_buffer_get_size (GST_BUFFER (head));
  /* such video spends no more than the budget has, so the retransmissions
   * get their turn between its frames */
  if (from == video && self->video_unsteered)
    self->budget = MAX (self->budget, -(gdouble) UNSTEERED_DEBT);
  self->queued_bytes -= gst_buffer_get_size (GST_BUFFER (head));
  self->queued_packets--;
  return head;
}

static void
pause_task (LegbaPeerSender * self, GstFlowReturn ret)
{
  GST_DEBUG_OBJECT (self, "pausing: %s", gst_flow_get_name (ret));
  g_mutex_lock (&self->lock);
  if (self->srcresult == GST_FLOW_OK)
    self->srcresult = ret;
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  gst_pad_pause_task (self->srcpad);
}

/* The first packet went through: the transport is open (webrtcbin holds
 * RTP until its DTLS handshake is done). The start counts from now. */
static void
transport_opened (LegbaPeerSender * self)
{
  self->opened = TRUE;
  g_mutex_lock (&self->lock);
  self->first_sent_at = g_get_monotonic_time ();
  g_mutex_unlock (&self->lock);
}

static void
push_item (LegbaPeerSender * self, GstMiniObject * item, LegbaSenderLane lane)
{
  GstFlowReturn ret = GST_FLOW_OK;

  if (GST_IS_EVENT (item)) {
    GstEventType type = GST_EVENT_TYPE (item);

    gst_pad_push_event (self->srcpad, GST_EVENT (item));
    if (type == GST_EVENT_SEGMENT)
      self->started = TRUE;
    if (type == GST_EVENT_EOS)
      ret = GST_FLOW_EOS;
  } else {
    legba_peer_sender_record_sent (self, GST_BUFFER (item), lane);
    ret = gst_pad_push (self->srcpad, GST_BUFFER (item));
    if (!self->opened && ret == GST_FLOW_OK)
      transport_opened (self);
  }
  if (ret != GST_FLOW_OK)
    pause_task (self, ret);
}

void
legba_peer_sender_loop (gpointer data)
{
  LegbaPeerSender *self = data;
  GstMiniObject *item = NULL;
  LegbaSenderLane lane = LEGBA_SENDER_LANE_VIDEO;
  gint64 wait_until = 0;

  g_mutex_lock (&self->lock);
  while (self->srcresult == GST_FLOW_OK && item == NULL) {
    gint64 now = g_get_monotonic_time ();

    wait_until = 0;
    item = next_item (self, now, &wait_until, &lane);
    if (item != NULL)
      break;
    if (now >= self->tick_at)
      break;
    g_cond_wait_until (&self->cond, &self->lock, wait_until ? MIN (wait_until,
            self->tick_at) : self->tick_at);
  }
  if (self->srcresult != GST_FLOW_OK) {
    GstFlowReturn ret = self->srcresult;

    g_mutex_unlock (&self->lock);
    if (item != NULL)
      gst_mini_object_unref (item);
    pause_task (self, ret);
    return;
  }
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  if (item != NULL)
    push_item (self, item, lane);
  else
    legba_peer_sender_tick (self, g_get_monotonic_time ());
}

/* ---- Element ---- */

static gboolean
src_activate_mode (GstPad * pad, GstObject * parent, GstPadMode mode,
    gboolean active)
{
  LegbaPeerSender *self = LEGBA_PEER_SENDER (parent);

  if (mode != GST_PAD_MODE_PUSH)
    return FALSE;
  g_mutex_lock (&self->lock);
  self->srcresult = active ? GST_FLOW_OK : GST_FLOW_FLUSHING;
  if (!active)
    clear_queues (self);
  self->started = FALSE;
  self->opened = FALSE;
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  if (active)
    return gst_pad_start_task (pad, legba_peer_sender_loop, self, NULL);
  return gst_pad_stop_task (pad);
}

static void
legba_peer_sender_finalize (GObject * object)
{
  LegbaPeerSender *self = LEGBA_PEER_SENDER (object);

  clear_queues (self);
  legba_peer_sender_feedback_clear (self);
  if (self->target_notify != NULL)
    self->target_notify (self->target_data);
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->cond);
  G_OBJECT_CLASS (legba_peer_sender_parent_class)->finalize (object);
}

static void
legba_peer_sender_class_init (LegbaPeerSenderClass * klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);

  object_class->finalize = legba_peer_sender_finalize;
  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class,
      "Legba peer sender", "Network/RTP",
      "Paces a peer connection's RTP packets at its estimated bandwidth and "
      "answers its retransmission requests within a budget",
      "Legba developers");
  GST_DEBUG_CATEGORY_INIT (legba_sender_debug, "legbasender", 0,
      "Legba's pacing, bandwidth estimation and retransmission policy");
}

static void
legba_peer_sender_init (LegbaPeerSender * self)
{
  self->sinkpad = gst_pad_new_from_static_template (&sink_template, "sink");
  gst_pad_set_chain_function (self->sinkpad, chain);
  gst_pad_set_chain_list_function (self->sinkpad, chain_list);
  gst_pad_set_event_function (self->sinkpad, sink_event);
  GST_PAD_SET_PROXY_CAPS (self->sinkpad);
  GST_PAD_SET_PROXY_ALLOCATION (self->sinkpad);
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);
  self->srcpad = gst_pad_new_from_static_template (&src_template, "src");
  gst_pad_set_activatemode_function (self->srcpad, src_activate_mode);
  gst_pad_set_event_function (self->srcpad, legba_peer_sender_src_event);
  GST_PAD_SET_PROXY_CAPS (self->srcpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);
  g_mutex_init (&self->lock);
  g_cond_init (&self->cond);
  self->srcresult = GST_FLOW_FLUSHING;
}

GstElement *
legba_peer_sender_new (guint start_bitrate, guint max_bitrate)
{
  LegbaPeerSender *self = g_object_new (LEGBA_TYPE_PEER_SENDER, NULL);

  legba_peer_sender_feedback_init (self, start_bitrate, max_bitrate);
  return GST_ELEMENT (self);
}

void
legba_peer_sender_set_target_func (LegbaPeerSender * self,
    LegbaPeerSenderTargetFunc func, gpointer data, GDestroyNotify notify)
{
  g_mutex_lock (&self->lock);
  if (self->target_notify != NULL)
    self->target_notify (self->target_data);
  self->target_func = func;
  self->target_data = data;
  self->target_notify = notify;
  g_mutex_unlock (&self->lock);
}

void
legba_peer_sender_set_audio_ssrc (LegbaPeerSender * self, guint32 ssrc)
{
  g_mutex_lock (&self->lock);
  self->audio_ssrc = ssrc;
  g_mutex_unlock (&self->lock);
}

/* Whether the video's encoder follows the target (the room's
 * `legba-target-bitrate` event was taken upstream); TRUE until set. Video
 * that does not is not held back to the pacing rate. */
void
legba_peer_sender_set_video_steered (LegbaPeerSender * self, gboolean steered)
{
  g_mutex_lock (&self->lock);
  self->video_unsteered = !steered;
  g_cond_signal (&self->cond);
  g_mutex_unlock (&self->lock);
}
