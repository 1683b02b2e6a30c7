/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What the two files of LegbaPeerSender share: legba-peer-sender.c (pads,
 * queues, pacing task) and legba-peer-sender-feedback.c (the estimator,
 * the retransmission policy, the round trip, the stats).
 */
#pragma once

#include <legba/room/legba-peer-sender.h>
#include <legba/room/legba-bwe.h>
#include <legba/room/legba-rtx-policy.h>
#include <legba/room/legba-send-rates.h>

G_BEGIN_DECLS

GST_DEBUG_CATEGORY_EXTERN (legba_sender_debug);

struct _LegbaPeerSender
{
  GstElement parent;
  GstPad *sinkpad;
  GstPad *srcpad;

  GMutex lock;
  GCond cond;                   /* an item queued, room in the queue, stop */
  GQueue queues[LEGBA_SENDER_N_LANES];
  guint64 queued_bytes;
  guint queued_packets;
  GstFlowReturn srcresult;
  gboolean started;             /* a segment went downstream */
  gdouble budget;               /* bytes that may leave now */
  gint64 budget_at;
  gint64 tick_at;               /* the next legba_peer_sender_tick() */
  guint32 audio_ssrc;
  gboolean video_unsteered;     /* its encoder ignores the target */
  gboolean opened;              /* a packet went through: the transport is
                                 * open (the streaming thread's own) */

  /* legba-peer-sender-feedback.c */
#define LEGBA_SENDER_PAD_HISTORY 64
  LegbaBwe *bwe;
  guint target;                 /* bit/s, everything on the wire */
  guint video_target;           /* bit/s, the video encoder's share */
  guint reported_target;        /* what target_func last heard */
  gint64 reported_at;
  GHashTable *policies;         /* SSRC -> LegbaRtxPolicy */
  GArray *rtx_pts;              /* guint8: the retransmission payload types */
  gint64 rtx_pts_at;
  GObject *session;             /* the RTPSession, for the round trip */
  gulong rtcp_handler;          /* its on-receiving-rtcp */
  GHashTable *report_loss;      /* our media SSRC -> fraction lost + 1 */
  /* padding while the estimator probes (legba_bwe_probe()): the last
   * video packets sent, asked of rtprtxsend again */
  guint32 pad_ssrc[LEGBA_SENDER_PAD_HISTORY];
  guint16 pad_seq[LEGBA_SENDER_PAD_HISTORY];
  guint pad_head;               /* the next slot written */
  guint pad_filled;
  guint pad_next;               /* how far back the next request goes */
  gdouble pad_budget;           /* bytes the media left of the probe */
  gint64 pad_at;
  guint64 pad_requests;
  gint64 rtt_us;                /* the newest round trip, 0 until one */
  GHashTable *rtt_blocks;       /* receiver SSRC -> guint64 LSR << 32 | DLSR */
  gint64 rtt_at;
  gdouble loss;                 /* the receiver reports', smoothed, 0..1 */
  guint reported_loss;          /* percent, what target_func last heard */
  guint64 feedback_reports;
  guint64 feedback_packets;      /* packets the feedback reported, in all */
  guint64 packets_sent[LEGBA_SENDER_N_LANES];
  gint64 first_sent_at;         /* monotonic, 0 until the transport opened */
  LegbaSendRates rates;

  LegbaPeerSenderTargetFunc target_func;
  gpointer target_data;
  GDestroyNotify target_notify;
};

/* From the transport's opening, for this long: the video is held to the
 * start estimate's share until feedback comes, and packets leave at the
 * target itself (the link is not known yet). */
#define LEGBA_SENDER_START_US (3 * G_USEC_PER_SEC)

/* Whether the call is in its start (LEGBA_SENDER_START_US from the
 * transport's opening, or before it). Called with the lock. */
static inline gboolean
legba_peer_sender_in_start (LegbaPeerSender * self, gint64 now)
{
  return self->first_sent_at == 0 ||
      now - self->first_sent_at < LEGBA_SENDER_START_US;
}

/* LEGBA_PACING_FACTOR, or 1 in the start. Bursts at 2.5 times the target
 * suit a link the estimate has found; at the start the estimate is a
 * guess, and the encoder's first frames overshoot it (x264 made 377 kbit/s
 * of a 282 kbit/s target in the lab's first second): at 2.5 times a
 * 300 kbit/s link's guess, the first key frames overflowed its 200 ms
 * queue and were lost. Held to the target, the excess waits here instead,
 * where the audio passes it. Called with the lock. */
static inline gdouble
legba_peer_sender_pacing_factor (LegbaPeerSender * self, gint64 now)
{
  return legba_peer_sender_in_start (self, now) ? 1.0 : LEGBA_PACING_FACTOR;
}

void legba_peer_sender_loop (gpointer data);

void legba_peer_sender_feedback_init (LegbaPeerSender * self,
    guint start_bitrate, guint max_bitrate);
void legba_peer_sender_feedback_clear (LegbaPeerSender * self);
gboolean legba_peer_sender_src_event (GstPad * pad, GstObject * parent,
    GstEvent * event);
gboolean legba_peer_sender_is_rtx_pt (LegbaPeerSender * self, guint8 pt);
void legba_peer_sender_record_sent (LegbaPeerSender * self, GstBuffer * buffer,
    LegbaSenderLane lane);
void legba_peer_sender_tick (LegbaPeerSender * self, gint64 now);

G_END_DECLS
