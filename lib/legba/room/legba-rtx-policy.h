/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaRtxPolicy: which retransmission requests (NACKed packets) a sender
 * answers, without any I/O (docs/congestion-control.md, Retransmissions).
 *
 * It remembers when each of the last LEGBA_RTX_HISTORY media packets of
 * a stream left and when it was last sent again, and answers a request
 * only when all of these hold:
 *
 * - the packet is known: it left within the history, and not longer
 *   than the policy's max age and a round trip ago (1 s by default: a
 *   receiver that still asks wants it; this bounds one that asks for
 *   packets long gone);
 * - it was not sent again within the last round trip (a receiver asks
 *   again each round trip while the packet is missing; a copy already on
 *   its way answers those requests);
 * - the retransmission budget has room for it: retransmissions share the
 *   estimated rate with the media, at most `share` of the target over any
 *   second, so that on a full link they never crowd out what they repair.
 *
 * A packet asked for again two round trips after its copy left was lost
 * again (or the request was): that answer is two copies, when the budget
 * has room for both, so that one more loss does not cost another round
 * of asking. A request sooner than that may have crossed the copy, or
 * been delayed with it in a queue, and gets one. A receiver that does
 * not know the round trip asks every 100 ms (a Chromium receiver of a
 * Legba sender, docs/congestion-control.md), and a frame that waits for
 * two such rounds is a freeze.
 *
 * Every refusal is counted by its reason. Time is the caller's monotonic
 * clock in microseconds; nothing here reads a clock or locks.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define LEGBA_RTX_HISTORY 2048

typedef enum
{
  LEGBA_RTX_SEND,
  LEGBA_RTX_UNKNOWN,            /* never sent, or out of the history */
  LEGBA_RTX_TOO_OLD,
  LEGBA_RTX_RECENT,             /* sent again less than a round trip ago */
  LEGBA_RTX_OVER_BUDGET,
} LegbaRtxVerdict;

typedef struct
{
  guint64 requests;
  guint64 sent;
  guint64 sent_twice;           /* of sent: answered with two copies */
  guint64 unknown;
  guint64 too_old;
  guint64 recent;
  guint64 over_budget;
} LegbaRtxCounts;

typedef struct _LegbaRtxPolicy LegbaRtxPolicy;

LegbaRtxPolicy *legba_rtx_policy_new (void);
void legba_rtx_policy_free (LegbaRtxPolicy * policy);

void legba_rtx_policy_packet_sent (LegbaRtxPolicy * policy, guint16 seqnum,
    guint size, gint64 now_us);
LegbaRtxVerdict legba_rtx_policy_request (LegbaRtxPolicy * policy,
    guint16 seqnum, gint64 now_us, guint * copies);

void legba_rtx_policy_set_rtt (LegbaRtxPolicy * policy, gint64 rtt_us);
void legba_rtx_policy_set_target (LegbaRtxPolicy * policy, guint bitrate);
void legba_rtx_policy_set_max_age (LegbaRtxPolicy * policy, gint64 age_us);
void legba_rtx_policy_set_share (LegbaRtxPolicy * policy, gdouble share);

void legba_rtx_policy_get_counts (LegbaRtxPolicy * policy,
    LegbaRtxCounts * counts);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (LegbaRtxPolicy, legba_rtx_policy_free)

G_END_DECLS
