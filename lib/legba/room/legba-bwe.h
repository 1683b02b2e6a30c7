/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaBwe: a send-side bandwidth estimator after Google Congestion
 * Control (draft-ietf-rmcat-gcc-02 and libwebrtc's GoogCC), fed by
 * transport-wide congestion control feedback
 * (draft-holmer-rmcat-transport-wide-cc-extensions-01), without any I/O:
 * docs/congestion-control.md.
 *
 * Inputs: the feedback reports (each packet's transport-wide sequence
 * number, the time the sender sent it, the time the receiver got it or
 * LEGBA_BWE_LOST, its size), the round-trip time when RTCP measures it,
 * and a tick every 25 to 100 ms whether feedback came or not. Output:
 * the target bitrate, in bits per second, always within [min, max].
 *
 * Sequence numbers: pass them as on the wire (16 bits; higher bits are
 * ignored). The estimator unwraps them itself, against the highest it has
 * seen, so reports may come reordered, repeat a packet (a packet first
 * reported lost and later received counts as received) or skip some.
 *
 * Time: every call takes `now_us`, the caller's monotonic time in
 * microseconds (g_get_monotonic_time() or a GstClock's time / 1000). A
 * packet's `send_us` is on the sender's clock and `arrival_us` on the
 * receiver's; only differences within each clock are used, so their
 * origins do not matter. `send_us` should be when the packet left the
 * pacer: time a packet waits in the sender's own queue would otherwise
 * read as queueing in the network.
 *
 * Sizes: the bytes the link carries for the packet, as far as the caller
 * knows (the RTP packet and its UDP, IP and SRTP overhead): the target is
 * a rate on the wire, of which the encoder gets what the audio and the
 * overhead leave.
 *
 * Untracked traffic: a stream of the connection whose packets carry no
 * transport-wide sequence number (an audio stream without the extension)
 * shares the link all the same. legba_bwe_set_untracked() gives its rate
 * on the wire, bit/s; it is added to the acknowledged bitrate, so that a
 * decrease is to what the whole connection carried and the target stays
 * a rate for all of it.
 *
 * Threads: an estimator belongs to one thread at a time; nothing locks.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* arrival_us of a packet the receiver reported lost */
#define LEGBA_BWE_LOST G_MININT64

typedef struct _LegbaBwe LegbaBwe;

/* One packet of a feedback report. send_us < 0: the sender has no record
 * of the packet (it is ignored). */
typedef struct
{
  guint seq;
  gint64 send_us;
  gint64 arrival_us;
  guint size;
} LegbaBwePacket;

/* Bits per second; 0 < min_bps <= start_bps <= max_bps (clamped so). */
typedef struct
{
  guint min_bps;
  guint start_bps;
  guint max_bps;
} LegbaBweConfig;

/* The delay detector's reading of the last delay trend. */
typedef enum
{
  LEGBA_BWE_USAGE_NORMAL,
  LEGBA_BWE_USAGE_OVERUSING,
  LEGBA_BWE_USAGE_UNDERUSING,
} LegbaBweUsage;

/* What the rate control last did. */
typedef enum
{
  LEGBA_BWE_RATE_HOLD,
  LEGBA_BWE_RATE_INCREASE,
  LEGBA_BWE_RATE_DECREASE,
} LegbaBweRateState;

typedef struct
{
  guint target_bps;
  guint delay_bps;              /* the delay-based estimate */
  guint loss_bps;               /* the loss-based bound */
  guint acked_bps;              /* 0 until measured */
  gdouble trend;                /* the slope of the queueing delay */
  gdouble modified_trend;       /* what the detector compares, in ms */
  gdouble threshold;            /* the detector's threshold, in ms */
  gint64 queue_delay_us;        /* one-way delay over the lowest of 10 s */
  LegbaBweUsage usage;
  LegbaBweRateState rate_state;
  gdouble loss_fraction;        /* over the last loss interval, 0..1 */
  gint64 feedback_age_us;       /* since the last report (or creation) */
  gboolean feedback_missing;
} LegbaBweState;

LegbaBwe *legba_bwe_new (const LegbaBweConfig * config);
void legba_bwe_free (LegbaBwe * bwe);
void legba_bwe_set_max (LegbaBwe * bwe, guint max_bps);
void legba_bwe_set_untracked (LegbaBwe * bwe, guint bps);
void legba_bwe_on_feedback (LegbaBwe * bwe, const LegbaBwePacket * packets,
    guint n, gint64 now_us);
void legba_bwe_on_rtt (LegbaBwe * bwe, gint64 rtt_us, gint64 now_us);
void legba_bwe_on_tick (LegbaBwe * bwe, gint64 now_us);
guint legba_bwe_target (LegbaBwe * bwe);
guint legba_bwe_probe (LegbaBwe * bwe);
void legba_bwe_get_state (LegbaBwe * bwe, LegbaBweState * state);
const char *legba_bwe_usage_name (LegbaBweUsage usage);
const char *legba_bwe_rate_state_name (LegbaBweRateState state);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (LegbaBwe, legba_bwe_free)

G_END_DECLS
