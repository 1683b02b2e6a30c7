/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaPeerSender: the last element of a peer connection's send path
 * before its RTP session (webrtcbin's aux sender, after rtprtxsend), where
 * every RTP packet of the connection passes and where the session's
 * feedback comes back up (docs/congestion-control.md):
 *
 * - transport-wide feedback (the RTPTWCCPackets event of rtpsession)
 *   feeds the bandwidth estimator (legba-bwe.h), whose target caps
 *   the pacing rate; its video share, what the audio and the
 *   retransmissions leave (legba-send-rates.h), is reported through the
 *   target function;
 * - retransmission requests (GstRTPRetransmissionRequest) pass on to
 *   rtprtxsend only when LegbaRtxPolicy answers them;
 * - the loss on the way to the receiver, from its feedback and its
 *   report blocks; a change of it is reported through the target
 *   function too;
 * - packets leave paced: at most LEGBA_PACING_FACTOR times the target,
 *   audio at once, retransmissions before video. Video whose encoder
 *   does not follow the target (legba_peer_sender_set_video_steered())
 *   leaves as it comes: it still spends the budget the retransmissions
 *   wait for.
 *
 * Threads: packets arrive on the streaming threads of the connection's
 * branches and of rtprtxsend; they leave on the sender's own task; the
 * feedback comes on the RTP session's threads. Everything is under the
 * object's lock; the target function is called without it, from the
 * thread that brought the feedback or the task.
 */
#pragma once

#include <gst/gst.h>

G_BEGIN_DECLS

#define LEGBA_PACING_FACTOR 2.5

#define LEGBA_TYPE_PEER_SENDER (legba_peer_sender_get_type ())
G_DECLARE_FINAL_TYPE (LegbaPeerSender, legba_peer_sender, LEGBA, PEER_SENDER,
    GstElement)

typedef void (*LegbaPeerSenderTargetFunc) (guint bitrate, gpointer data);

GstElement *legba_peer_sender_new (guint start_bitrate, guint max_bitrate);

void legba_peer_sender_set_target_func (LegbaPeerSender * self,
    LegbaPeerSenderTargetFunc func, gpointer data, GDestroyNotify notify);
void legba_peer_sender_set_audio_ssrc (LegbaPeerSender * self, guint32 ssrc);
void legba_peer_sender_set_video_steered (LegbaPeerSender * self,
    gboolean steered);

guint legba_peer_sender_get_target (LegbaPeerSender * self);
guint legba_peer_sender_get_video_target (LegbaPeerSender * self);
gint legba_peer_sender_get_loss_percentage (LegbaPeerSender * self);
GstStructure *legba_peer_sender_get_stats (LegbaPeerSender * self);

G_END_DECLS
