/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A simulated call for LegbaBwe's tests, in simulated time (1 ms steps):
 * a sender that encodes video at the estimator's target (30 frames a
 * second, each split into packets of at most 1,200 bytes) beside an audio
 * stream of 50 packets a second, paced at 2.5 times the target; a
 * bottleneck link of a given capacity with a drop-tail queue bounded in
 * time (tc tbf's "latency"), random loss on both ways, propagation delay
 * and jitter that keeps the order; a receiver that reports every packet's
 * arrival time (transport-wide feedback) every feedback interval; and the
 * round-trip time once a second; the sender may pad up to what the
 * estimator asks it to probe with (legba_bwe_probe()); a bulk TCP flow
 * may share the bottleneck, Reno (loss-based) or BBR (v1: paced at its
 * highest measured delivery rate, a window of twice that times its
 * lowest round trip, measured again every 10 s on a drained queue).
 * Everything random comes from one seed.
 */
#pragma once

#include <legba/room/legba-bwe.h>

typedef enum
{
  BWE_SIM_TCP_NONE,
  BWE_SIM_TCP_RENO,             /* loss-based: halves its window on loss */
  BWE_SIM_TCP_BBR,              /* BBR's window: twice the link's rate
                                 * times its lowest round trip, which it
                                 * measures again every 10 s on a drained
                                 * queue; loss does not move it */
} BweSimTcp;

typedef struct
{
  guint capacity_bps;           /* 0: no bottleneck */
  gint64 queue_us;              /* the bottleneck's queue bound */
  gint64 one_way_us;            /* propagation delay, each way */
  gint64 jitter_us;             /* up to this much more delay, order kept */
  gdouble loss;                 /* random loss, 0..1, each way */
  gint64 feedback_us;           /* the receiver's feedback interval */
  gdouble encoder_share;        /* what the encoder makes of its target */
  gboolean audio_untracked;     /* audio carries no transport-wide
                                 * sequence number */
  gboolean untracked_told;      /* the estimator is told its rate */
  gint64 encoder_lag_us;        /* it follows the target with this time
                                 * constant (0: at once) */
  gboolean pads;                /* the sender pads up to legba_bwe_probe() */
  BweSimTcp tcp;                /* a bulk TCP flow sharing the bottleneck */
  gint64 tcp_from_us;           /* from then on */
  guint32 seed;
  LegbaBweConfig bwe;
} BweSimConfig;

typedef struct
{
  gint64 t;
  guint target;
  gint64 queue_us;
  LegbaBweState state;
  guint64 call_bytes;           /* delivered so far, the call's */
  guint64 tcp_bytes;            /* and the TCP flow's */
} BweSimSample;

typedef struct _BweSim BweSim;

void bwe_sim_config_init (BweSimConfig * c);
BweSim *bwe_sim_new (const BweSimConfig * c);
void bwe_sim_free (BweSim * s);
void bwe_sim_set_capacity (BweSim * s, guint bps);
void bwe_sim_set_feedback (BweSim * s, gboolean on);
void bwe_sim_run (BweSim * s, gint64 until_us);
LegbaBwe *bwe_sim_get_bwe (BweSim * s);
const GArray *bwe_sim_get_samples (BweSim * s);

/* the target's smallest and largest mean over a second, each second of
 * from_us <= t < to_us */
void bwe_sim_target_range (BweSim * s, gint64 from_us, gint64 to_us,
    guint * min, guint * max);
/* over the samples with from_us <= t < to_us */
guint bwe_sim_target_mean (BweSim * s, gint64 from_us, gint64 to_us);
gint64 bwe_sim_queue_percentile (BweSim * s, gint64 from_us, gint64 to_us,
    gdouble p);
/* the first sample at or after from_us with a target below bps, the
 * queue below us, at or above bps, or -1 */
gint64 bwe_sim_first_target_below (BweSim * s, gint64 from_us, guint bps);
gint64 bwe_sim_first_target_above (BweSim * s, gint64 from_us, guint bps);
gint64 bwe_sim_first_queue_below (BweSim * s, gint64 from_us, gint64 us);
/* what the bottleneck delivered of the call and of the TCP flow, bit/s,
 * over from_us <= t < to_us */
void bwe_sim_delivered (BweSim * s, gint64 from_us, gint64 to_us,
    guint * call_bps, guint * tcp_bps);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BweSim, bwe_sim_free)
