/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * How long a received stream's jitter buffer waits (LegbaPlayout), from
 * counts and times handed in by the tests.
 */
#include <legba/room/legba-playout.h>

#define S G_USEC_PER_SEC
#define MS_NS G_GUINT64_CONSTANT (1000000)

/* A clean path (no loss, no retransmission) keeps the floor. */
static void
test_clean_path_keeps_floor (void)
{
  LegbaPlayout p;
  LegbaPlayoutStats st = {.jitter_ns = 2 * MS_NS };

  legba_playout_init (&p, 100, 400);
  for (gint64 t = 0; t < 60; t++)
    g_assert_cmpuint (legba_playout_update (&p, &st, t * S), ==, 100);
}

/* A measured retransmission round trip of 200 ms: the latency covers it
 * at the next update (5/4 of it, twice the jitter and the margin). */
static void
test_covers_retransmission_round_trip (void)
{
  LegbaPlayout p;
  LegbaPlayoutStats st = { 0, };

  legba_playout_init (&p, 100, 400);
  g_assert_cmpuint (legba_playout_update (&p, &st, 0), ==, 100);
  st.rtx_rtt_ns = 200 * MS_NS;
  st.jitter_ns = 5 * MS_NS;
  g_assert_cmpuint (legba_playout_update (&p, &st, 1 * S), ==,
      250 + 10 + LEGBA_PLAYOUT_MARGIN_MS);
}

/* Copies that came late after packets were given up: half again, each
 * update they keep coming, up to the ceiling. */
static void
test_late_after_loss_grows_to_ceiling (void)
{
  LegbaPlayout p;
  LegbaPlayoutStats st = { 0, };
  guint expect[] = { 150, 225, 337, 400, 400 };

  legba_playout_init (&p, 100, 400);
  legba_playout_update (&p, &st, 0);
  for (guint i = 0; i < G_N_ELEMENTS (expect); i++) {
    st.lost += 3;
    st.late += 2;
    g_assert_cmpuint (legba_playout_update (&p, &st, (i + 1) * S), ==,
        expect[i]);
  }
}

/* Late copies alone (a packet only delayed, its retransmission coming
 * after it) or lost packets alone (both copies lost) are no reason to
 * wait longer; nor are the counts the first update finds. */
static void
test_late_or_lost_alone_keeps_floor (void)
{
  LegbaPlayout p;
  LegbaPlayoutStats st = {.lost = 50,.late = 50 };

  legba_playout_init (&p, 100, 400);
  g_assert_cmpuint (legba_playout_update (&p, &st, 0), ==, 100);
  st.late += 5;
  g_assert_cmpuint (legba_playout_update (&p, &st, 1 * S), ==, 100);
  st.lost += 5;
  g_assert_cmpuint (legba_playout_update (&p, &st, 2 * S), ==, 100);
}

/* After the path calms down: nothing for 10 s, then a twentieth an
 * update, down to what the round trip still needs, never under the
 * floor. */
static void
test_falls_back_slowly (void)
{
  LegbaPlayout p;
  LegbaPlayoutStats st = { 0, };
  gint64 t = 0;
  guint latency;

  legba_playout_init (&p, 100, 400);
  legba_playout_update (&p, &st, t);
  st.lost = st.late = 10;
  g_assert_cmpuint (legba_playout_update (&p, &st, t += S), ==, 150);
  st.lost = st.late = 20;
  g_assert_cmpuint (legba_playout_update (&p, &st, t += S), ==, 225);
  for (gint i = 0; i < 9; i++)
    g_assert_cmpuint (legba_playout_update (&p, &st, t += S), ==, 225);
  latency = legba_playout_update (&p, &st, t += S);
  g_assert_cmpuint (latency, ==, 225 - 225 / 20);
  for (gint i = 0; i < 60; i++)
    latency = legba_playout_update (&p, &st, t += S);
  g_assert_cmpuint (latency, ==, 100);

  /* a round trip still measured holds it where it needs */
  legba_playout_init (&p, 100, 400);
  st = (LegbaPlayoutStats) {
  .rtx_rtt_ns = 200 * MS_NS};
  legba_playout_update (&p, &st, t = 0);
  st.lost = st.late = 10;
  legba_playout_update (&p, &st, t += S);
  legba_playout_update (&p, &st, t += S);
  g_assert_cmpuint (legba_playout_update (&p, &st, t += S), ==, 400);
  for (gint i = 0; i < 60; i++)
    latency = legba_playout_update (&p, &st, t += S);
  g_assert_cmpuint (latency, ==, 250 + LEGBA_PLAYOUT_MARGIN_MS);
}

/* A ceiling at or under the floor: the latency stays where it is. */
static void
test_fixed_when_ceiling_not_above_floor (void)
{
  LegbaPlayout p;
  LegbaPlayoutStats st = { 0, };

  legba_playout_init (&p, 100, 100);
  legba_playout_update (&p, &st, 0);
  st.rtx_rtt_ns = 300 * MS_NS;
  st.lost = st.late = 10;
  g_assert_cmpuint (legba_playout_update (&p, &st, 1 * S), ==, 100);
  legba_playout_init (&p, 200, 50);
  g_assert_cmpuint (legba_playout_update (&p, &st, 2 * S), ==, 200);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/playout/clean-path-keeps-floor",
      test_clean_path_keeps_floor);
  g_test_add_func ("/playout/covers-retransmission-round-trip",
      test_covers_retransmission_round_trip);
  g_test_add_func ("/playout/late-after-loss-grows-to-ceiling",
      test_late_after_loss_grows_to_ceiling);
  g_test_add_func ("/playout/late-or-lost-alone-keeps-floor",
      test_late_or_lost_alone_keeps_floor);
  g_test_add_func ("/playout/falls-back-slowly", test_falls_back_slowly);
  g_test_add_func ("/playout/fixed-when-ceiling-not-above-floor",
      test_fixed_when_ceiling_not_above_floor);
  return g_test_run ();
}
