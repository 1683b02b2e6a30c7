/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The entry of a peer's send queue (legba-room-media.c's send branch), on
 * the encoder's streaming thread; the queue outlives its pad's probes,
 * which own the gate.
 *
 * Nothing enters before the connection is up (DTLS done: webrtcbin would
 * hold the frames until then and send them all at once, stale, on a link
 * that has just opened); once it is (legba_send_gate_open), the room asks
 * the encoder for a key frame and the video starts at the first key
 * frame, so that the participant decodes from the first frame it receives
 * without asking and waiting a round trip for it.
 *
 * A frame the queue has no room for is dropped, and so is every frame
 * after it up to the next key frame: a decoder cannot use the frames that
 * refer to a lost one. The encoder is asked for a key frame (rate-limited
 * per track, legba-room-media.c's limit_key_units) when the dropping
 * starts and again once the queue has room, so that the peer's video
 * comes back soon, not at the next periodic key frame.
 */
#include <legba/room/legba-room-private.h>

#include <gst/video/video.h>

static const char *const kind_names[] = { "video", "audio" };

/* Where the frames stand, once the connection is up (the streaming
 * thread's own). */
typedef enum
{
  GATE_PASSING,
  /* dropping up to the next key frame, asked for since the queue had
   * room */
  GATE_TO_KEY_FRAME,
  /* dropping up to the next key frame, to be asked for: the queue was
   * full when it was last asked for */
  GATE_TO_KEY_FRAME_UNASKED,
} GateState;

struct _LegbaSendGate
{
  GstElement *queue;            /* unowned */
  LegbaTrackKind kind;
  gint open;                    /* (atomic) the connection is up */
  GateState state;
  guint64 dropped;
};

GstEvent *
legba_room_key_unit_event (void)
{
  return gst_video_event_new_upstream_force_key_unit (GST_CLOCK_TIME_NONE,
      TRUE, 0);
}

static void
ask_key_frame (LegbaSendGate * gate, GstPad * pad)
{
  if (gate->kind == LEGBA_TRACK_KIND_VIDEO)
    gst_pad_push_event (pad, legba_room_key_unit_event ());
}

static GstPadProbeReturn
send_gate (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  LegbaSendGate *gate = data;
  GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER (info);
  gboolean delta = GST_BUFFER_FLAG_IS_SET (buffer, GST_BUFFER_FLAG_DELTA_UNIT);
  guint64 level = 0;

  if (!g_atomic_int_get (&gate->open)) {
    gate->dropped++;
    return GST_PAD_PROBE_DROP;
  }
  g_object_get (gate->queue, "current-level-time", &level, NULL);
  if (level >= LEGBA_ROOM_SEND_QUEUE_TIME) {
    if (gate->state == GATE_PASSING) {
      GST_INFO_OBJECT (gate->queue, "%s send queue full (%" GST_TIME_FORMAT
          "): dropping up to the next key frame", kind_names[gate->kind],
          GST_TIME_ARGS (level));
      ask_key_frame (gate, pad);
    }
    gate->state = GATE_TO_KEY_FRAME_UNASKED;
    gate->dropped++;
    return GST_PAD_PROBE_DROP;
  }
  if (gate->state != GATE_PASSING && delta) {
    if (gate->state == GATE_TO_KEY_FRAME_UNASKED)
      ask_key_frame (gate, pad);
    gate->state = GATE_TO_KEY_FRAME;
    gate->dropped++;
    return GST_PAD_PROBE_DROP;
  }
  if (gate->state != GATE_PASSING)
    GST_INFO_OBJECT (gate->queue, "%s resumes after %" G_GUINT64_FORMAT
        " frames dropped", kind_names[gate->kind], gate->dropped);
  gate->state = GATE_PASSING;
  gate->dropped = 0;
  return GST_PAD_PROBE_OK;
}

/* The serialized queries that come down the track's tee, answered at the
 * entry of a peer's branch, at once. The queue behind it would keep such
 * a query until everything queued before it has left, and the data of a
 * peer that cannot send (a link that stalls) waits, or never leaves when
 * the connection goes down for good. The tee asks its branches in turn,
 * on the encoder's thread: one waiting branch would stop the encoder, and
 * the track for every participant. An encoder asks for an ALLOCATION each
 * time it negotiates again, and it does each time a branch is linked to
 * the tee: whenever a participant joins. An encoded branch needs no
 * buffers of its own (the payloader only reads), so its answer asks for
 * nothing; a DRAIN is answered as done, the peer's queued frames being
 * the peer's. */
static GstPadProbeReturn
send_query (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  switch (GST_QUERY_TYPE (GST_PAD_PROBE_INFO_QUERY (info))) {
    case GST_QUERY_ALLOCATION:
    case GST_QUERY_DRAIN:
      return GST_PAD_PROBE_HANDLED;
    default:
      return GST_PAD_PROBE_OK;
  }
}

LegbaSendGate *
legba_send_gate_attach (GstElement * queue, LegbaTrackKind kind)
{
  GstPad *sink = gst_element_get_static_pad (queue, "sink");
  LegbaSendGate *gate = g_new0 (LegbaSendGate, 1);

  gate->queue = queue;
  gate->kind = kind;
  /* closed until the connection is up; then from the first key frame,
   * the one the room asks for when it opens the gate */
  gate->state = GATE_TO_KEY_FRAME;
  gst_pad_add_probe (sink, GST_PAD_PROBE_TYPE_BUFFER, send_gate, gate, g_free);
  gst_pad_add_probe (sink, GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM |
      GST_PAD_PROBE_TYPE_PUSH, send_query, NULL, NULL);
  gst_object_unref (sink);
  return gate;
}

gboolean
legba_send_gate_open (LegbaSendGate * gate)
{
  return g_atomic_int_compare_and_exchange (&gate->open, FALSE, TRUE);
}
