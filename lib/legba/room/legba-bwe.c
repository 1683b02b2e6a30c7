/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaBwe (legba-bwe.h): checks and orders the feedback, hands it to the
 * parts (legba-bwe-private.h), takes the smaller of the delay-based
 * estimate and the loss-based bound within [min, max], and falls back
 * when feedback stops (docs/congestion-control.md).
 */
#include <legba/room/legba-bwe-private.h>

#include <math.h>
#include <stdlib.h>

/* No clock of a sane caller is this far from 0 (36,000 years): anything
 * past it is refused before it could overflow a difference. */
#define TIME_LIMIT ((gint64) 1 << 60)
#define MAX_SIZE 65535
#define RTT_DEFAULT_US (200 * LEGBA_BWE_MS)
#define RTT_MAX_US (3 * LEGBA_BWE_S)
#define INTERVAL_DEFAULT_US (100 * LEGBA_BWE_MS)
#define INTERVAL_MIN_US (25 * LEGBA_BWE_MS)
#define INTERVAL_MAX_US (1 * LEGBA_BWE_S)
/* Without feedback for 2 intervals and a round trip the estimate holds;
 * HOLD_US later it falls by FALLBACK per second, to min. */
#define HOLD_US (1 * LEGBA_BWE_S)
#define FALLBACK 0.8
/* A queue this long, for this long, and not draining, is overuse even
 * when it no longer grows (a full drop-tail queue holds its delay flat). */
#define STANDING_US (100 * LEGBA_BWE_MS)
#define STANDING_TIME_US (500 * LEGBA_BWE_MS)
#define STANDING_GIVE_UP_US (3 * LEGBA_BWE_S)
/* A decrease for a standing queue shows within a round trip and
 * STANDING_DRAIN_TIME_US: a queue of ours is then this much shorter. */
#define STANDING_DRAIN_US (20 * LEGBA_BWE_MS)
#define STANDING_DRAIN_TIME_US (300 * LEGBA_BWE_MS)

typedef struct
{
  gint64 seq;
  gint64 send_us;
  gint64 arrival_us;
  guint size;
  gboolean after_gap;           /* a sequence number before it was never reported */
} Received;

struct _LegbaBwe
{
  gdouble min;
  gdouble max;
  LegbaBweTrendline trendline;
  LegbaBweOveruse overuse;
  LegbaBweAcked acked;
  LegbaBweAimd aimd;
  LegbaBweLoss loss;
  guint target;
  guint untracked_bps;          /* sent without sequence numbers */

  LegbaBweSeen seen;
  gint64 report_first;          /* the lowest new sequence number of a report */
  GArray *received;             /* Received, scratch */

  gint64 rtt_us;
  gboolean have_time;
  gint64 now;                   /* the latest now_us */
  gint64 last_feedback;         /* or the first now_us */
  gint64 last_tick;
  gint64 interval_us;
  gboolean missing;
  gboolean standing;
  gint64 standing_since;
  gboolean standing_cut;        /* the rule decreased in this queue */
  gint64 standing_cut_at;
  gint64 standing_cut_queue;    /* the queueing delay then */
};

static void
update_target (LegbaBwe * bwe)
{
  gdouble t = MIN (bwe->aimd.rate, bwe->loss.bound);

  bwe->target = (guint) CLAMP (t, bwe->min, bwe->max);
}

LegbaBwe *
legba_bwe_new (const LegbaBweConfig * config)
{
  LegbaBwe *bwe;

  g_return_val_if_fail (config != NULL, NULL);

  bwe = g_new0 (LegbaBwe, 1);
  bwe->min = MAX (config->min_bps, 1);
  bwe->max = MAX (config->max_bps, bwe->min);
  legba_bwe_trendline_reset (&bwe->trendline);
  legba_bwe_overuse_init (&bwe->overuse);
  legba_bwe_acked_init (&bwe->acked);
  legba_bwe_aimd_init (&bwe->aimd, CLAMP (config->start_bps, bwe->min,
          bwe->max), bwe->min, bwe->max);
  legba_bwe_loss_init (&bwe->loss, bwe->min, bwe->max);
  bwe->received = g_array_new (FALSE, FALSE, sizeof (Received));
  bwe->rtt_us = RTT_DEFAULT_US;
  bwe->interval_us = INTERVAL_DEFAULT_US;
  update_target (bwe);
  return bwe;
}

void
legba_bwe_free (LegbaBwe * bwe)
{
  if (bwe == NULL)
    return;
  g_array_unref (bwe->received);
  g_free (bwe);
}

void
legba_bwe_set_max (LegbaBwe * bwe, guint max_bps)
{
  g_return_if_fail (bwe != NULL);

  bwe->max = MAX (max_bps, bwe->min);
  legba_bwe_aimd_set_max (&bwe->aimd, bwe->max);
  legba_bwe_loss_set_max (&bwe->loss, bwe->max);
  update_target (bwe);
}

void
legba_bwe_set_untracked (LegbaBwe * bwe, guint bps)
{
  g_return_if_fail (bwe != NULL);

  bwe->untracked_bps = bps;
}

/* What the link carried: the acknowledged packets, and beside them what
 * carries no sequence number (0 while the acknowledged rate is unknown). */
static guint
with_untracked (const LegbaBwe * bwe, guint acked_bps)
{
  if (acked_bps == 0)
    return 0;
  return (guint) MIN ((guint64) acked_bps + bwe->untracked_bps, G_MAXUINT);
}

/* The first call starts the clock the missing feedback is timed by. */
static void
touch (LegbaBwe * bwe, gint64 now_us)
{
  if (!bwe->have_time) {
    bwe->have_time = TRUE;
    bwe->last_feedback = bwe->last_tick = now_us;
  }
  bwe->now = now_us;
}

/* Records one reported packet; returns its change to the lost count
 * (-1: it was reported lost before and has arrived since), and counts it
 * in *expected when it is new. A received packet goes to bwe->received. */
static gint
take_packet (LegbaBwe * bwe, const LegbaBwePacket * p, guint * expected)
{
  gboolean lost = p->arrival_us == LEGBA_BWE_LOST;
  LegbaBweSeenNews news;
  gint64 seq;
  Received r;

  if (p->send_us < 0 || p->send_us > TIME_LIMIT ||
      (!lost && ABS (p->arrival_us) > TIME_LIMIT))
    return 0;
  news = legba_bwe_seen_take (&bwe->seen, p->seq, lost, &seq);
  if (news == LEGBA_BWE_SEEN_OLD)
    return 0;
  r.seq = seq;
  r.send_us = p->send_us;
  r.arrival_us = p->arrival_us;
  r.size = MIN (p->size, MAX_SIZE);
  r.after_gap = FALSE;
  if (news == LEGBA_BWE_SEEN_RECOVERED) {
    g_array_append_val (bwe->received, r);
    return -1;
  }
  bwe->report_first = MIN (bwe->report_first, seq);
  (*expected)++;
  if (lost)
    return 1;
  g_array_append_val (bwe->received, r);
  return 0;
}

/* Sequence numbers between the last report's and this one's were in no
 * report (one was lost): the acknowledged bitrate must not count the
 * time they took as time the link carried nothing. Marks the first
 * packet sent after them. */
static void
mark_gap (LegbaBwe * bwe)
{
  Received *first = NULL;

  for (guint i = 0; i < bwe->received->len; i++) {
    Received *r = &g_array_index (bwe->received, Received, i);

    if (first == NULL || r->seq < first->seq)
      first = r;
  }
  if (first != NULL)
    first->after_gap = TRUE;
}

static gint
compare_arrival (gconstpointer a, gconstpointer b)
{
  const Received *ra = a, *rb = b;

  if (ra->arrival_us != rb->arrival_us)
    return ra->arrival_us < rb->arrival_us ? -1 : 1;
  return ra->seq < rb->seq ? -1 : ra->seq > rb->seq;
}

/* The received packets of a report, in arrival order, through the
 * acknowledged bitrate and the delay trend. Returns the detector's
 * reading: overusing if any group of the report was. */
static LegbaBweUsage
take_delays (LegbaBwe * bwe)
{
  LegbaBweUsage usage = bwe->overuse.usage, u;
  gboolean overused = FALSE;

  g_array_sort (bwe->received, compare_arrival);
  for (guint i = 0; i < bwe->received->len; i++) {
    const Received *r = &g_array_index (bwe->received, Received, i);
    LegbaBweDelta delta;

    legba_bwe_acked_add (&bwe->acked, r->arrival_us, r->size, r->after_gap);
    if (!legba_bwe_trendline_add (&bwe->trendline, r->send_us,
            r->arrival_us, &delta))
      continue;
    u = legba_bwe_overuse_detect (&bwe->overuse, bwe->trendline.trend,
        bwe->trendline.num_deltas, &delta);
    overused |= u == LEGBA_BWE_USAGE_OVERUSING;
    usage = u;
  }
  return overused ? LEGBA_BWE_USAGE_OVERUSING : usage;
}

/* The gradient sees a queue grow, not one that stands full: a queue of
 * STANDING_US over the base delay for STANDING_TIME_US, not draining, with
 * the link's rate measured, is overuse too, once. A queue of ours is
 * shorter by STANDING_DRAIN_US a round trip and STANDING_DRAIN_TIME_US
 * after that decrease (it put the rate under what the link carries); one
 * that is not, or that still stands STANDING_GIVE_UP_US after it began,
 * is not ours (the receiver's clock stepped, or another flow keeps it
 * full, as BBR refills the queue it drains every 10 s), and the delay now
 * becomes the base. */
static gboolean
queue_stands (LegbaBwe * bwe, guint acked, gint64 now_us)
{
  if (bwe->trendline.queue_us <= STANDING_US || acked == 0) {
    bwe->standing = FALSE;
    return FALSE;
  }
  if (!bwe->standing) {
    bwe->standing = TRUE;
    bwe->standing_cut = FALSE;
    bwe->standing_since = now_us;
  }
  if (now_us - bwe->standing_since >= STANDING_GIVE_UP_US ||
      (bwe->standing_cut &&
          now_us - bwe->standing_cut_at >= bwe->rtt_us +
          STANDING_DRAIN_TIME_US &&
          bwe->trendline.queue_us >
          bwe->standing_cut_queue - STANDING_DRAIN_US)) {
    legba_bwe_trendline_rebase (&bwe->trendline);
    bwe->standing = FALSE;
    return FALSE;
  }
  return !bwe->standing_cut &&
      now_us - bwe->standing_since >= STANDING_TIME_US &&
      bwe->trendline.trend >= 0;
}

static void
feedback_came (LegbaBwe * bwe, gint64 now_us)
{
  gint64 sample = CLAMP (now_us - bwe->last_feedback, 0, INTERVAL_MAX_US);

  bwe->interval_us = (4 * bwe->interval_us + sample) / 5;
  bwe->interval_us = CLAMP (bwe->interval_us, INTERVAL_MIN_US, INTERVAL_MAX_US);
  bwe->last_feedback = now_us;
  bwe->missing = FALSE;
}

void
legba_bwe_on_feedback (LegbaBwe * bwe, const LegbaBwePacket * packets,
    guint n, gint64 now_us)
{
  guint expected = 0;
  gint lost = 0;
  gboolean standing;
  LegbaBweUsage usage;
  LegbaBweSignals in;
  gint64 highest;

  g_return_if_fail (bwe != NULL);
  g_return_if_fail (packets != NULL || n == 0);

  touch (bwe, now_us);
  g_array_set_size (bwe->received, 0);
  highest = bwe->seen.have_seq ? bwe->seen.highest : -1;
  bwe->report_first = G_MAXINT64;
  for (guint i = 0; i < n; i++)
    lost += take_packet (bwe, &packets[i], &expected);
  if (highest >= 0 && bwe->report_first > highest + 1)
    mark_gap (bwe);
  /* a report of nothing new says nothing of the link */
  if (expected == 0 && bwe->received->len == 0)
    return;

  feedback_came (bwe, now_us);
  usage = take_delays (bwe);
  in.acked_bps = with_untracked (bwe, legba_bwe_acked_bps (&bwe->acked));
  standing = queue_stands (bwe, in.acked_bps, now_us);
  if (standing)
    usage = LEGBA_BWE_USAGE_OVERUSING;
  in.usage = usage;
  in.recent_bps = with_untracked (bwe,
      legba_bwe_acked_recent_bps (&bwe->acked));
  in.loss = bwe->loss.fraction;
  in.rtt_us = bwe->rtt_us;
  in.queue_us = bwe->trendline.queue_us;
  legba_bwe_aimd_update (&bwe->aimd, &in, now_us);
  if (standing && bwe->aimd.state == LEGBA_BWE_RATE_DECREASE &&
      bwe->aimd.last_decrease == now_us) {
    bwe->standing_cut = TRUE;
    bwe->standing_cut_at = now_us;
    bwe->standing_cut_queue = bwe->trendline.queue_us;
  }
  legba_bwe_loss_count (&bwe->loss, expected, lost);
  legba_bwe_loss_update (&bwe->loss, MIN (bwe->aimd.rate, bwe->loss.bound),
      now_us);
  update_target (bwe);
}

void
legba_bwe_on_rtt (LegbaBwe * bwe, gint64 rtt_us, gint64 now_us)
{
  g_return_if_fail (bwe != NULL);

  touch (bwe, now_us);
  bwe->rtt_us = CLAMP (rtt_us, 0, RTT_MAX_US);
}

static gint64
feedback_timeout (const LegbaBwe * bwe)
{
  return 2 * bwe->interval_us + bwe->rtt_us;
}

void
legba_bwe_on_tick (LegbaBwe * bwe, gint64 now_us)
{
  gint64 age, dt;

  g_return_if_fail (bwe != NULL);

  touch (bwe, now_us);
  dt = CLAMP (now_us - bwe->last_tick, 0, LEGBA_BWE_S);
  bwe->last_tick = now_us;
  age = now_us - bwe->last_feedback;
  bwe->missing = age > feedback_timeout (bwe);
  if (bwe->missing && age > feedback_timeout (bwe) + HOLD_US) {
    legba_bwe_aimd_fallback (&bwe->aimd, pow (FALLBACK,
            dt / (gdouble) LEGBA_BWE_S), now_us);
    update_target (bwe);
  }
}

/**
 * legba_bwe_probe:
 * @bwe: a #LegbaBwe
 *
 * What the sender should put on the link, with padding where its media
 * falls short, so that a link that shrank is seen to have grown back even
 * when the encoder makes less than the target: for a while after the
 * link shrank, the target or, if more, a little over the capacity the
 * link showed since (the target still climbs towards it); while the
 * rate recovers and ramps on from there, the target; and only as long as
 * no queue builds. Never over the loss-based bound or the ceiling, and
 * 0 otherwise.
 *
 * Returns: bits per second, or 0
 */
guint
legba_bwe_probe (LegbaBwe * bwe)
{
  gdouble probe;

  g_return_val_if_fail (bwe != NULL, 0);

  probe = legba_bwe_aimd_probe (&bwe->aimd);
  if (probe <= 0)
    return 0;
  return (guint) CLAMP (MIN (probe, bwe->loss.bound), bwe->target, bwe->max);
}

guint
legba_bwe_target (LegbaBwe * bwe)
{
  g_return_val_if_fail (bwe != NULL, 0);

  return bwe->target;
}

void
legba_bwe_get_state (LegbaBwe * bwe, LegbaBweState * state)
{
  g_return_if_fail (bwe != NULL);
  g_return_if_fail (state != NULL);

  state->target_bps = bwe->target;
  state->delay_bps = (guint) bwe->aimd.rate;
  state->loss_bps = (guint) bwe->loss.bound;
  state->acked_bps = with_untracked (bwe, legba_bwe_acked_bps (&bwe->acked));
  state->trend = bwe->trendline.trend;
  state->modified_trend = bwe->overuse.modified_trend;
  state->threshold = bwe->overuse.threshold;
  state->queue_delay_us = bwe->trendline.queue_us;
  state->usage = bwe->overuse.usage;
  state->rate_state = bwe->aimd.state;
  state->loss_fraction = bwe->loss.fraction;
  state->feedback_age_us = MAX (bwe->now - bwe->last_feedback, 0);
  state->feedback_missing = bwe->missing;
}

const char *
legba_bwe_usage_name (LegbaBweUsage usage)
{
  switch (usage) {
    case LEGBA_BWE_USAGE_NORMAL:
      return "normal";
    case LEGBA_BWE_USAGE_OVERUSING:
      return "overusing";
    case LEGBA_BWE_USAGE_UNDERUSING:
      return "underusing";
  }
  return "unknown";
}

const char *
legba_bwe_rate_state_name (LegbaBweRateState state)
{
  switch (state) {
    case LEGBA_BWE_RATE_HOLD:
      return "hold";
    case LEGBA_BWE_RATE_INCREASE:
      return "increase";
    case LEGBA_BWE_RATE_DECREASE:
      return "decrease";
  }
  return "unknown";
}
