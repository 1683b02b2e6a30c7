/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaRtxPolicy: see legba-rtx-policy.h.
 */
#include <legba/room/legba-rtx-policy.h>

/* Before the first RTCP report gives a round trip. */
#define DEFAULT_RTT_US (100 * G_TIME_SPAN_MILLISECOND)
/* A round trip shorter than this is taken as this: requests for one loss
 * come in bursts this close (one per NACK of a frame's packets). */
#define MIN_RTT_US (10 * G_TIME_SPAN_MILLISECOND)
/* A receiver that still asks for a packet wants it: a Legba receiver
 * stops asking once its jitter buffer has played past it, Chromium's
 * waits for a frame's missing packets for seconds before it asks for a
 * key frame. So the bound is a second, as long as libwebrtc keeps sent
 * packets for (plus the round trip), against a receiver that asks for
 * packets long gone. */
#define DEFAULT_MAX_AGE_US (1000 * G_TIME_SPAN_MILLISECOND)
#define DEFAULT_SHARE 0.25
/* Before the estimator gives a target. */
#define DEFAULT_TARGET 300000
/* The budget a burst of losses may spend at once. */
#define BUDGET_WINDOW_US (500 * G_TIME_SPAN_MILLISECOND)

typedef struct
{
  gint64 sent_us;               /* 0: free */
  gint64 resent_us;             /* 0: not yet */
  guint32 size;
  guint16 seqnum;
} Entry;

struct _LegbaRtxPolicy
{
  Entry entries[LEGBA_RTX_HISTORY];
  gint64 rtt_us;
  gint64 max_age_us;
  gdouble share;
  guint target;
  gdouble budget;               /* bytes */
  gint64 budget_at;
  LegbaRtxCounts counts;
};

LegbaRtxPolicy *
legba_rtx_policy_new (void)
{
  LegbaRtxPolicy *policy = g_new0 (LegbaRtxPolicy, 1);

  policy->rtt_us = DEFAULT_RTT_US;
  policy->max_age_us = DEFAULT_MAX_AGE_US;
  policy->share = DEFAULT_SHARE;
  policy->target = DEFAULT_TARGET;
  return policy;
}

void
legba_rtx_policy_free (LegbaRtxPolicy * policy)
{
  g_free (policy);
}

static gdouble
budget_rate (LegbaRtxPolicy * policy)
{
  return policy->share * policy->target / 8.0 / G_USEC_PER_SEC;
}

static void
refill (LegbaRtxPolicy * policy, gint64 now_us)
{
  gdouble cap = budget_rate (policy) * BUDGET_WINDOW_US;

  if (policy->budget_at == 0) {
    policy->budget = cap;
  } else if (now_us > policy->budget_at) {
    policy->budget += budget_rate (policy) * (now_us - policy->budget_at);
  }
  policy->budget = MIN (policy->budget, cap);
  policy->budget_at = MAX (policy->budget_at, now_us);
}

void
legba_rtx_policy_packet_sent (LegbaRtxPolicy * policy, guint16 seqnum,
    guint size, gint64 now_us)
{
  Entry *entry = &policy->entries[seqnum % LEGBA_RTX_HISTORY];

  entry->seqnum = seqnum;
  entry->sent_us = MAX (now_us, 1);
  entry->resent_us = 0;
  entry->size = size;
}

static LegbaRtxVerdict
judge (LegbaRtxPolicy * policy, guint16 seqnum, gint64 now_us, guint * copies)
{
  Entry *entry = &policy->entries[seqnum % LEGBA_RTX_HISTORY];
  gint64 rtt = MAX (policy->rtt_us, MIN_RTT_US);

  if (entry->sent_us == 0 || entry->seqnum != seqnum || entry->sent_us > now_us)
    return LEGBA_RTX_UNKNOWN;
  if (now_us - entry->sent_us > policy->max_age_us + rtt)
    return LEGBA_RTX_TOO_OLD;
  if (entry->resent_us != 0 && now_us - entry->resent_us < rtt)
    return LEGBA_RTX_RECENT;
  refill (policy, now_us);
  if (policy->budget < entry->size)
    return LEGBA_RTX_OVER_BUDGET;
  /* asked for again two round trips after its copy left: not a request
   * that crossed the copy on its way, or one the bottleneck's queue
   * delayed, but a copy (or a request) lost */
  *copies = entry->resent_us != 0 && now_us - entry->resent_us >= 2 * rtt
      && policy->budget >= 2.0 * entry->size ? 2 : 1;
  policy->budget -= *copies * (gdouble) entry->size;
  entry->resent_us = MAX (now_us, 1);
  return LEGBA_RTX_SEND;
}

/**
 * legba_rtx_policy_request:
 * @policy: the policy
 * @seqnum: the packet asked for
 * @now_us: the time
 * @copies: (out) (optional): with LEGBA_RTX_SEND, how many copies to send
 *   (2 for a packet sent again two round trips ago or more, else 1),
 *   else 0
 *
 * Returns: whether the request is answered, or why not
 */
LegbaRtxVerdict
legba_rtx_policy_request (LegbaRtxPolicy * policy, guint16 seqnum,
    gint64 now_us, guint * copies)
{
  guint n = 0;
  LegbaRtxVerdict verdict = judge (policy, seqnum, now_us, &n);

  if (copies != NULL)
    *copies = n;
  policy->counts.requests++;
  switch (verdict) {
    case LEGBA_RTX_SEND:
      policy->counts.sent++;
      if (n == 2)
        policy->counts.sent_twice++;
      break;
    case LEGBA_RTX_UNKNOWN:
      policy->counts.unknown++;
      break;
    case LEGBA_RTX_TOO_OLD:
      policy->counts.too_old++;
      break;
    case LEGBA_RTX_RECENT:
      policy->counts.recent++;
      break;
    case LEGBA_RTX_OVER_BUDGET:
      policy->counts.over_budget++;
      break;
  }
  return verdict;
}

void
legba_rtx_policy_set_rtt (LegbaRtxPolicy * policy, gint64 rtt_us)
{
  if (rtt_us > 0)
    policy->rtt_us = MIN (rtt_us, 10 * G_USEC_PER_SEC);
}

void
legba_rtx_policy_set_target (LegbaRtxPolicy * policy, guint bitrate)
{
  if (bitrate > 0)
    policy->target = bitrate;
}

void
legba_rtx_policy_set_max_age (LegbaRtxPolicy * policy, gint64 age_us)
{
  policy->max_age_us = CLAMP (age_us, 0, 10 * G_USEC_PER_SEC);
}

void
legba_rtx_policy_set_share (LegbaRtxPolicy * policy, gdouble share)
{
  policy->share = CLAMP (share, 0.0, 1.0);
}

void
legba_rtx_policy_get_counts (LegbaRtxPolicy * policy, LegbaRtxCounts * counts)
{
  *counts = policy->counts;
}
