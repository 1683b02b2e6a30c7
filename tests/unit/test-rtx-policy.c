/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Which retransmission requests a sender answers (LegbaRtxPolicy), with
 * the time handed in by the tests.
 */
#include <legba/room/legba-rtx-policy.h>

#define MS G_TIME_SPAN_MILLISECOND

/* One request for a packet just sent is answered; the same request again
 * within the round trip is not, and is again after it. */
static void
test_once_per_round_trip (void)
{
  g_autoptr (LegbaRtxPolicy) p = legba_rtx_policy_new ();
  gint64 t = 1000 * MS;

  legba_rtx_policy_set_rtt (p, 80 * MS);
  legba_rtx_policy_set_target (p, 2000000);
  legba_rtx_policy_packet_sent (p, 7, 1200, t);
  g_assert_cmpint (legba_rtx_policy_request (p, 7, t + 40 * MS, NULL), ==,
      LEGBA_RTX_SEND);
  g_assert_cmpint (legba_rtx_policy_request (p, 7, t + 41 * MS, NULL), ==,
      LEGBA_RTX_RECENT);
  g_assert_cmpint (legba_rtx_policy_request (p, 7, t + 110 * MS, NULL), ==,
      LEGBA_RTX_RECENT);
  g_assert_cmpint (legba_rtx_policy_request (p, 7, t + 125 * MS, NULL), ==,
      LEGBA_RTX_SEND);
}

/* Never sent, overwritten in the history, or past what the receiver can
 * still play: refused. */
static void
test_unknown_and_old (void)
{
  g_autoptr (LegbaRtxPolicy) p = legba_rtx_policy_new ();
  LegbaRtxCounts counts;
  gint64 t = 1000 * MS;

  legba_rtx_policy_set_rtt (p, 50 * MS);
  legba_rtx_policy_set_max_age (p, 200 * MS);
  legba_rtx_policy_set_target (p, 2000000);
  g_assert_cmpint (legba_rtx_policy_request (p, 1, t, NULL), ==,
      LEGBA_RTX_UNKNOWN);
  legba_rtx_policy_packet_sent (p, 1, 1000, t);
  legba_rtx_policy_packet_sent (p, 1 + LEGBA_RTX_HISTORY, 1000, t);
  g_assert_cmpint (legba_rtx_policy_request (p, 1, t + MS, NULL), ==,
      LEGBA_RTX_UNKNOWN);
  legba_rtx_policy_packet_sent (p, 2, 1000, t);
  /* max age plus a round trip */
  g_assert_cmpint (legba_rtx_policy_request (p, 2, t + 251 * MS, NULL), ==,
      LEGBA_RTX_TOO_OLD);
  legba_rtx_policy_packet_sent (p, 3, 1000, t);
  g_assert_cmpint (legba_rtx_policy_request (p, 3, t + 249 * MS, NULL), ==,
      LEGBA_RTX_SEND);
  /* a time before the packet left: not trusted */
  legba_rtx_policy_packet_sent (p, 4, 1000, t);
  g_assert_cmpint (legba_rtx_policy_request (p, 4, t - MS, NULL), ==,
      LEGBA_RTX_UNKNOWN);
  legba_rtx_policy_get_counts (p, &counts);
  g_assert_cmpuint (counts.requests, ==, 5);
  g_assert_cmpuint (counts.sent, ==, 1);
  g_assert_cmpuint (counts.unknown, ==, 3);
  g_assert_cmpuint (counts.too_old, ==, 1);
}

/* A NACK that a queue delayed is answered; the receiver asks again a
 * round trip later (the copy was lost too), and that request is answered
 * as well, though the packet left 360 ms before: a receiver still asking
 * is still waiting for it (Chromium's holds a frame's missing packets for
 * seconds, and freezes until it gets them or a key frame). Past a second
 * and the round trip, no longer. */
static void
test_late_request_repeated (void)
{
  g_autoptr (LegbaRtxPolicy) p = legba_rtx_policy_new ();
  gint64 t = 1000 * MS;

  legba_rtx_policy_set_rtt (p, 100 * MS);
  legba_rtx_policy_set_target (p, 1000000);
  legba_rtx_policy_packet_sent (p, 9, 1200, t);
  g_assert_cmpint (legba_rtx_policy_request (p, 9, t + 250 * MS, NULL), ==,
      LEGBA_RTX_SEND);
  g_assert_cmpint (legba_rtx_policy_request (p, 9, t + 360 * MS, NULL), ==,
      LEGBA_RTX_SEND);
  legba_rtx_policy_packet_sent (p, 10, 1200, t);
  g_assert_cmpint (legba_rtx_policy_request (p, 10, t + 1101 * MS, NULL), ==,
      LEGBA_RTX_TOO_OLD);
}

/* A storm: the receiver asks for every packet of a second of video, again
 * every round trip. What is answered stays within the share of the
 * target, whatever is asked. */
static void
test_budget_bounds_a_storm (void)
{
  g_autoptr (LegbaRtxPolicy) p = legba_rtx_policy_new ();
  guint target = 1000000, size = 1200;
  guint64 answered_bytes = 0;
  gint64 t0 = 1000 * MS, t;
  guint16 seq = 0;

  legba_rtx_policy_set_rtt (p, 20 * MS);
  legba_rtx_policy_set_max_age (p, 1000 * MS);
  legba_rtx_policy_set_share (p, 0.25);
  legba_rtx_policy_set_target (p, target);
  /* 10 s of 100 packets/s, each asked for five times over 100 ms */
  for (t = t0; t < t0 + 10 * G_USEC_PER_SEC; t += 10 * MS) {
    legba_rtx_policy_packet_sent (p, seq, size, t);
    for (guint back = 0; back < 5; back++) {
      guint16 asked = seq - back * 2;
      guint copies;

      if (legba_rtx_policy_request (p, asked, t + MS, &copies) ==
          LEGBA_RTX_SEND)
        answered_bytes += copies * size;
    }
    seq++;
  }
  /* 0.25 x 1 Mbit/s over 10 s, plus the 500 ms the budget may hold */
  g_assert_cmpuint (answered_bytes, <=, 0.25 * target / 8 * 10.5);
  /* and the budget is spent, not left idle */
  g_assert_cmpuint (answered_bytes, >=, 0.25 * target / 8 * 9);
}

/* A lower target lowers what retransmissions may take. */
static void
test_budget_follows_target (void)
{
  g_autoptr (LegbaRtxPolicy) p = legba_rtx_policy_new ();
  guint answered = 0;
  gint64 t = 1000 * MS;

  legba_rtx_policy_set_target (p, 100000);
  legba_rtx_policy_set_share (p, 0.5);
  legba_rtx_policy_set_max_age (p, 10 * G_USEC_PER_SEC);
  for (guint16 seq = 0; seq < 100; seq++)
    legba_rtx_policy_packet_sent (p, seq, 1000, t);
  for (guint16 seq = 0; seq < 100; seq++)
    answered +=
        legba_rtx_policy_request (p, seq, t + MS, NULL) == LEGBA_RTX_SEND;
  /* 0.5 x 100 kbit/s x 500 ms = 3125 bytes: three packets */
  g_assert_cmpuint (answered, ==, 3);
}

/* The copies a request is answered with; it must be answered. */
static guint
answered_with (LegbaRtxPolicy * p, guint16 seq, gint64 at)
{
  guint copies = 0;

  g_assert_cmpint (legba_rtx_policy_request (p, seq, at, &copies), ==,
      LEGBA_RTX_SEND);
  return copies;
}

/* A request for a packet already sent again, two round trips later, is
 * answered with two copies; one copy sooner, or when the budget holds
 * only one. */
static void
test_repeat_sent_twice (void)
{
  g_autoptr (LegbaRtxPolicy) p = legba_rtx_policy_new ();
  g_autoptr (LegbaRtxPolicy) tight = legba_rtx_policy_new ();
  LegbaRtxCounts counts;
  guint copies = 9;
  gint64 t = 1000 * MS;

  legba_rtx_policy_set_rtt (p, 20 * MS);
  legba_rtx_policy_set_target (p, 2000000);
  legba_rtx_policy_packet_sent (p, 5, 1200, t);
  g_assert_cmpuint (answered_with (p, 5, t + 5 * MS), ==, 1);
  g_assert_cmpint (legba_rtx_policy_request (p, 5, t + 10 * MS, &copies), ==,
      LEGBA_RTX_RECENT);
  g_assert_cmpuint (copies, ==, 0);
  /* a round trip and a half after the copy: one more */
  g_assert_cmpuint (answered_with (p, 5, t + 35 * MS), ==, 1);
  g_assert_cmpuint (answered_with (p, 5, t + 75 * MS), ==, 2);
  g_assert_cmpuint (answered_with (p, 5, t + 175 * MS), ==, 2);
  legba_rtx_policy_get_counts (p, &counts);
  g_assert_cmpuint (counts.sent, ==, 4);
  g_assert_cmpuint (counts.sent_twice, ==, 2);

  /* 0.25 x 40 kbit/s x 500 ms = 625 bytes: one 600-byte copy at a time */
  legba_rtx_policy_set_target (tight, 40000);
  legba_rtx_policy_packet_sent (tight, 5, 600, t);
  g_assert_cmpuint (answered_with (tight, 5, t + 5 * MS), ==, 1);
  g_assert_cmpuint (answered_with (tight, 5, t + 1000 * MS), ==, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/rtx-policy/once-per-round-trip", test_once_per_round_trip);
  g_test_add_func ("/rtx-policy/unknown-and-old", test_unknown_and_old);
  g_test_add_func ("/rtx-policy/late-request-repeated",
      test_late_request_repeated);
  g_test_add_func ("/rtx-policy/repeat-sent-twice", test_repeat_sent_twice);
  g_test_add_func ("/rtx-policy/budget-bounds-a-storm",
      test_budget_bounds_a_storm);
  g_test_add_func ("/rtx-policy/budget-follows-target",
      test_budget_follows_target);
  return g_test_run ();
}
