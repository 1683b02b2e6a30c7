/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The delay-based rate control (draft-ietf-rmcat-gcc-02 §5.5, libwebrtc's
 * AIMD): overuse decreases to BETA times the acknowledged bitrate,
 * underuse holds (a queue is draining), normal increases. The
 * acknowledged bitrate at each overuse feeds a running estimate of the
 * link capacity; near it the rate grows additively, about a packet per
 * response time, far below it multiplicatively. Once the acknowledged
 * bitrate passes the estimate's upper bound the link has grown: the
 * estimate is forgotten and, with none, the rate ramps at RAMP_FREE per
 * second, the fast ramp after a drop (docs/congestion-control.md). The
 * capacity a link had before it shrank is kept: once the dip's capacity
 * is carried without a queue, the link has grown back, and the rate
 * climbs at RAMP_RECOVER to near what it carried before. An encoder
 * that makes less than its target would show that late (the rate must
 * pass the dip's capacity by what the encoder leaves unused first): for
 * PROBE_US after the link shrank, and while the rate recovers, with the
 * detector normal and no queue, the sender is asked to fill the link up
 * to the rate with padding (in the dip, to PROBE_SIGMAS over the dip's
 * capacity, where the rate is not yet): the acknowledged bitrate then
 * follows the rate, and so does the recovery's bound of twice it. A
 * recovery that meets the dip's link again keeps what the link carried
 * before, for the next sign of growth.
 */
#include <legba/room/legba-bwe-private.h>

#include <math.h>

#define BETA 0.85
/* per second, below the capacity estimate; with none, from RAMP_NEAR up
 * by RAMP_GAIN a second to RAMP_FREE */
#define RAMP_NEAR 1.08
#define RAMP_GAIN 0.16
#define RAMP_FREE 1.35
/* a second decrease in one overuse waits this and a round trip */
#define EPISODE_US (300 * LEGBA_BWE_MS)
#define MIN_MULTIPLICATIVE_BPS 1000.0
#define MIN_ADDITIVE_BPS_PER_S 4000.0
#define PACKET_BITS (1200 * 8.0)
#define FPS 30.0
#define RESPONSE_EXTRA_US (100 * LEGBA_BWE_MS)
/* never above this times the acknowledged bitrate, plus CAP_EXTRA_BPS */
#define CAP_FACTOR 1.5
#define CAP_EXTRA_BPS 10000.0
/* the same while the rate recovers towards what the link carried before
 * it shrank: an encoder follows a rising target a second late, and the
 * acknowledged bitrate lags it by half its window more */
#define CAP_FACTOR_RECOVER 2.0
/* the link capacity's running mean and normalised variance */
#define CAPACITY_ALPHA 0.05
#define DEVIATION_MIN 0.4
#define DEVIATION_MAX 2.5
#define DEVIATIONS 3.0
/* The link has grown when the acknowledged bitrate stays over the upper
 * bound this long; it has shrunk when it is under the lower bound at
 * this many overuses in a row. Once is noise, with jitter. */
#define ABOVE_US (500 * LEGBA_BWE_MS)
#define BELOW_TIMES 2
/* After the link shrank: the acknowledged bitrate at the dip's capacity
 * estimate with the queue under RECOVER_QUEUE_US (a link at its capacity
 * builds one) for ABOVE_US means it has grown back; the rate then climbs
 * at RAMP_RECOVER a second up to RECOVER_SHARE of the capacity before. */
#define RECOVER_QUEUE_US (20 * LEGBA_BWE_MS)
#define RAMP_RECOVER 1.5
#define RECOVER_SHARE 0.9
/* a recovery that meets an overuse under this share of what the link
 * carried before has met the dip's link again */
#define RECOVER_MET 0.5
/* a recovery, and the ramp from where it ends, pads up to the rate (the
 * encoder may make less) until the first overuse, the user's ceiling or
 * this long */
#define RECOVER_PAD_US (10 * LEGBA_BWE_S)
/* what the link carried before it shrank: the highest acknowledged
 * bitrate, fading by this a second */
#define PEAK_DECAY 0.98
/* how long after the link shrank the sender pads up to the rate */
#define PROBE_US (30 * LEGBA_BWE_S)
/* in the dip, the padding tests the link this many deviations over the
 * dip's capacity, where the rate may still climb towards it */
#define PROBE_SIGMAS 1.5

void
legba_bwe_aimd_init (LegbaBweAimd * r, gdouble start, gdouble min, gdouble max)
{
  r->rate = start;
  r->min_rate = min;
  r->max_rate = max;
  r->state = LEGBA_BWE_RATE_HOLD;
  r->have_change = FALSE;
  r->have_decrease = FALSE;
  r->overusing = FALSE;
  r->last_change = r->last_decrease = 0;
  r->have_capacity = FALSE;
  r->capacity_kbps = 0;
  r->deviation = DEVIATION_MIN;
  r->prior_kbps = 0;
  r->recover_to = 0;
  r->recovering = FALSE;
  r->peak_bps = 0;
  r->shrunk_at = 0;
  r->probing = FALSE;
}

static gdouble
capacity_sigma (const LegbaBweAimd * r)
{
  return sqrt (r->deviation * r->capacity_kbps);
}

static gdouble
capacity_upper (const LegbaBweAimd * r)
{
  return (r->capacity_kbps + DEVIATIONS * capacity_sigma (r)) * 1000.0;
}

static gdouble
capacity_lower (const LegbaBweAimd * r)
{
  return MAX (0, r->capacity_kbps - DEVIATIONS * capacity_sigma (r)) * 1000.0;
}

static void
capacity_update (LegbaBweAimd * r, gdouble sample_bps)
{
  gdouble kbps = sample_bps / 1000.0, error;

  if (!r->have_capacity) {
    r->have_capacity = TRUE;
    r->capacity_kbps = kbps;
  } else {
    r->capacity_kbps = (1 - CAPACITY_ALPHA) * r->capacity_kbps +
        CAPACITY_ALPHA * kbps;
  }
  error = r->capacity_kbps - kbps;
  r->deviation = (1 - CAPACITY_ALPHA) * r->deviation +
      CAPACITY_ALPHA * error * error / MAX (r->capacity_kbps, 1.0);
  r->deviation = CLAMP (r->deviation, DEVIATION_MIN, DEVIATION_MAX);
}

static void
capacity_reset (LegbaBweAimd * r, gint64 now_us)
{
  r->above = FALSE;
  r->below = 0;
  r->ramp_since = now_us;
  r->have_capacity = FALSE;
  r->capacity_kbps = 0;
  r->deviation = DEVIATION_MIN;
  r->prior_kbps = 0;
  r->recover_to = 0;
  r->recovering = FALSE;
}

/* The link has grown: the capacity estimate is forgotten, and if the
 * link had more before it shrank, the rate recovers towards that; what it
 * had is kept until the recovery is through (see decrease()). */
static void
capacity_grown (LegbaBweAimd * r, gint64 now_us)
{
  gdouble prior = r->prior_kbps;

  capacity_reset (r, now_us);
  if (prior > 0) {
    r->prior_kbps = prior;
    r->recover_to = RECOVER_SHARE * prior * 1000.0;
    r->recovering = TRUE;
    r->recovered_at = now_us;
  }
}

/* A signal that the link has grown: the acknowledged bitrate over the
 * capacity estimate's upper bound; or, when the link had a higher
 * capacity before it shrank, a deviation over the estimate without a
 * queue (a link at its capacity carries no more than it, and queues). */
static gboolean
over_capacity (const LegbaBweAimd * r, const LegbaBweSignals * in)
{
  guint acked = in->acked_bps;

  if (!acked || !r->have_capacity)
    return FALSE;
  if (acked > capacity_upper (r))
    return TRUE;
  return r->prior_kbps * 1000.0 > capacity_upper (r) &&
      acked >= (r->capacity_kbps + capacity_sigma (r)) * 1000.0 &&
      in->queue_us <= RECOVER_QUEUE_US;
}

/* About one packet more per response time: a frame of the current rate
 * at FPS, split into packets of at most PACKET_BITS. */
static gdouble
additive_bps_per_s (const LegbaBweAimd * r, gint64 rtt_us)
{
  gdouble frame = r->rate / FPS;
  gdouble packets = MAX (1.0, ceil (frame / PACKET_BITS));
  gdouble response_s = (rtt_us + RESPONSE_EXTRA_US) / (gdouble) LEGBA_BWE_S;

  return MAX (MIN_ADDITIVE_BPS_PER_S, frame / packets / response_s);
}

static void
increase (LegbaBweAimd * r, const LegbaBweSignals * in, gint64 now_us)
{
  guint acked = in->acked_bps;
  gdouble dt_s = CLAMP ((now_us - r->last_change) / (gdouble) LEGBA_BWE_S,
      0, 1);
  gdouble limit, next;

  if (over_capacity (r, in)) {
    if (!r->above) {
      r->above = TRUE;
      r->above_since = now_us;
    } else if (now_us - r->above_since >= ABOVE_US) {
      capacity_grown (r, now_us);
    }
  } else {
    r->above = FALSE;
  }
  if (r->recovering && (now_us - r->recovered_at >= RECOVER_PAD_US ||
          r->rate >= r->max_rate))
    r->recovering = FALSE;
  limit = (r->recovering ? CAP_FACTOR_RECOVER : CAP_FACTOR) * acked
      + CAP_EXTRA_BPS;
  if (acked && r->rate >= limit)
    return;
  if (!acked)
    limit = G_MAXDOUBLE;
  if (r->have_capacity && r->rate >= capacity_lower (r)) {
    next = r->rate + additive_bps_per_s (r, in->rtt_us) * dt_s;
  } else {
    gdouble ramp = RAMP_NEAR;

    if (!r->have_capacity && r->recover_to > r->rate) {
      ramp = RAMP_RECOVER;
    } else if (!r->have_capacity) {
      if (r->recover_to > 0) {
        r->recover_to = 0;
        r->prior_kbps = 0;
        r->ramp_since = now_us;
      }
      ramp = MIN (RAMP_FREE, RAMP_NEAR + RAMP_GAIN *
          (now_us - r->ramp_since) / (gdouble) LEGBA_BWE_S);
    }

    next = r->rate + MAX (r->rate * (pow (ramp, dt_s) - 1),
        MIN_MULTIPLICATIVE_BPS * dt_s);
  }
  r->rate = MIN (next, limit);
}

/* Once per overuse: a decrease takes a round trip and a trend window to
 * show, and the acknowledged bitrate falls while the queue drains, so
 * decreasing again at once would go below the link. Only a link that fell
 * by half or more, or an overuse that outlasts EPISODE_US and a round
 * trip, decreases again. */
static gboolean
time_to_decrease (const LegbaBweAimd * r, guint recent, gint64 rtt_us,
    gint64 now_us)
{
  if (!r->have_decrease || !r->overusing)
    return TRUE;
  if (recent && recent < 0.5 * r->rate)
    return TRUE;
  return now_us - r->last_decrease >= rtt_us + EPISODE_US;
}

static void
decrease (LegbaBweAimd * r, guint acked, guint recent, gint64 now_us)
{
  gdouble next = BETA * r->rate;

  if (recent) {
    next = BETA * recent;
    if (next > r->rate && r->have_capacity)
      next = BETA * r->capacity_kbps * 1000.0;
  }
  /* the capacity from the smoother estimate: one window's noise would
   * move its bounds */
  if (r->recover_to > 0) {
    /* A recovery that meets a link still far under what it had before:
     * the link had not grown back (the acknowledged bitrate passed the
     * dip's estimate, which lags the link, by noise), and what it had is
     * kept for the next sign while the sender still probes for it.
     * Otherwise the link came back smaller than before. */
    if (!acked || acked >= RECOVER_MET * r->prior_kbps * 1000.0 ||
        now_us - r->shrunk_at >= PROBE_US)
      r->prior_kbps = 0;
    r->recover_to = 0;
  }
  r->recovering = FALSE;
  if (acked) {
    if (!r->have_capacity || acked >= capacity_lower (r)) {
      r->below = 0;
    } else if (++r->below >= BELOW_TIMES) {
      /* the link shrank: what it carried before is kept */
      gdouble prior = MAX (r->prior_kbps, MAX (r->capacity_kbps,
              r->peak_bps / 1000.0));

      capacity_reset (r, now_us);
      r->prior_kbps = prior;
      r->shrunk_at = now_us;
    }
    capacity_update (r, acked);
  }
  if (next < r->rate)
    r->rate = next;
  r->have_decrease = TRUE;
  r->overusing = TRUE;
  r->last_decrease = now_us;
}

/* One step of the rate control, at each feedback report. */
void
legba_bwe_aimd_update (LegbaBweAimd * r, const LegbaBweSignals * in,
    gint64 now_us)
{
  if (!r->have_change) {
    r->have_change = TRUE;
    r->last_change = now_us;
  }
  r->peak_bps = MAX (in->acked_bps, r->peak_bps * pow (PEAK_DECAY,
          CLAMP (now_us - r->last_change, 0, LEGBA_BWE_S) /
          (gdouble) LEGBA_BWE_S));
  switch (in->usage) {
    case LEGBA_BWE_USAGE_OVERUSING:
      if (time_to_decrease (r, in->recent_bps, in->rtt_us, now_us)) {
        r->state = LEGBA_BWE_RATE_DECREASE;
        decrease (r, in->acked_bps, in->recent_bps, now_us);
      }
      break;
    case LEGBA_BWE_USAGE_UNDERUSING:
      r->overusing = FALSE;
      r->state = LEGBA_BWE_RATE_HOLD;
      break;
    case LEGBA_BWE_USAGE_NORMAL:
      r->overusing = FALSE;
      if (r->state != LEGBA_BWE_RATE_INCREASE) {
        r->state = LEGBA_BWE_RATE_INCREASE;
        r->ramp_since = now_us;
      } else
        increase (r, in, now_us);
      break;
  }
  r->last_change = now_us;
  r->rate = CLAMP (r->rate, r->min_rate, r->max_rate);
  r->probing = ((r->prior_kbps > 0 && r->have_capacity &&
          r->prior_kbps * 1000.0 > capacity_upper (r) &&
          now_us - r->shrunk_at < PROBE_US) || r->recovering) &&
      in->usage == LEGBA_BWE_USAGE_NORMAL && in->queue_us <= RECOVER_QUEUE_US;
}

/* What the sender should put on the link, padding what its media leaves
 * of it, to tell whether a link that shrank has grown back: the rate
 * while it is asked for (above), else 0. */
gdouble
legba_bwe_aimd_probe (const LegbaBweAimd * r)
{
  if (!r->probing)
    return 0;
  if (r->have_capacity)
    return MAX (r->rate, (r->capacity_kbps + PROBE_SIGMAS *
            capacity_sigma (r)) * 1000.0);
  return r->rate;
}

/* Without feedback: scales the rate down, within [min, max], and forgets
 * the link capacity, which may have changed meanwhile. */
void
legba_bwe_aimd_fallback (LegbaBweAimd * r, gdouble factor, gint64 now_us)
{
  r->rate = CLAMP (r->rate * factor, r->min_rate, r->max_rate);
  capacity_reset (r, now_us);
  r->probing = FALSE;
  r->state = LEGBA_BWE_RATE_HOLD;
}

void
legba_bwe_aimd_set_max (LegbaBweAimd * r, gdouble max)
{
  r->max_rate = max;
  r->rate = CLAMP (r->rate, r->min_rate, r->max_rate);
}
