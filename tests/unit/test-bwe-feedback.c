/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaBwe (docs/congestion-control.md) when feedback is missing or says
 * more than the delay trend: a receiver that never reports or stops,
 * heavy loss, a queue that builds too slowly for the trend and stands.
 * The clean stream is bwe-feed.h's.
 */
#include "bwe-feed.h"

static void
empty (Feed * f, LegbaBwePacket * p, guint * n)
{
  *n = 0;
}

static void
check_missing (Feed * f)
{
  LegbaBweState s = feed_state (f);

  g_assert_true (s.feedback_missing);
  g_assert_cmpint (s.feedback_age_us, >, 0);
}

/* A receiver that never reports, or reports nothing: the estimate holds
 * a second, then falls by a fifth a second to the floor, and says why. */
static void
test_never (void)
{
  Feed f;

  feed_init (&f);
  legba_bwe_on_tick (f.bwe, 0);
  legba_bwe_on_tick (f.bwe, 300 * MS);
  g_assert_false (feed_state (&f).feedback_missing);
  feed_run (&f, 1 * S, empty);
  check_missing (&f);
  g_assert_cmpuint (legba_bwe_target (f.bwe), ==, START_BPS);
  feed_run (&f, 2 * S, empty);
  g_assert_cmpuint (legba_bwe_target (f.bwe), <, START_BPS);
  g_assert_cmpuint (legba_bwe_target (f.bwe), >, 0.5 * START_BPS);
  feed_run (&f, 20 * S, empty);
  check_missing (&f);
  g_assert_cmpuint (legba_bwe_target (f.bwe), ==, MIN_BPS);
  feed_clear (&f);
}

/* Feedback that stops: the same; when it comes back, the flag clears
 * and the estimate climbs back. */
static void
test_stops (void)
{
  Feed f;

  feed_init (&f);
  feed_run (&f, 20 * S, NULL);
  for (gint64 end = f.now + 10 * S; f.now < end; f.now += 50 * MS) {
    legba_bwe_on_tick (f.bwe, f.now);
    check_bounds (&f);
  }
  check_missing (&f);
  g_assert_cmpuint (legba_bwe_target (f.bwe), <, 0.3 * MAX_BPS);
  feed_run (&f, 10 * S, NULL);
  g_assert_false (feed_state (&f).feedback_missing);
  g_assert_cmpuint (legba_bwe_target (f.bwe), ==, MAX_BPS);
  feed_clear (&f);
}

static guint lose_every;

static void
lose (Feed * f, LegbaBwePacket * p, guint * n)
{
  for (guint i = 0; i < *n; i += lose_every)
    p[i].arrival_us = LEGBA_BWE_LOST;
}

/* 20% loss without a queue bounds the estimate; 5% does not. */
static void
test_loss_bound (void)
{
  Feed f;

  feed_init (&f);
  feed_run (&f, 10 * S, NULL);
  lose_every = 20;
  feed_run (&f, 10 * S, lose);
  g_assert_cmpuint (legba_bwe_target (f.bwe), ==, MAX_BPS);
  lose_every = 5;
  feed_run (&f, 10 * S, lose);
  g_assert_cmpfloat (feed_state (&f).loss_fraction, >, 0.15);
  g_assert_cmpuint (legba_bwe_target (f.bwe), <, 0.5 * MAX_BPS);
  g_assert_cmpuint (feed_state (&f).loss_bps, ==, legba_bwe_target (f.bwe));
  feed_clear (&f);
}

/* Reports of random packets, times and sizes, at random times. */

/* A queue that grows by 20 ms a second from 10 s, to 180 ms: too slowly
 * for the trend (a slope of 0.02), but over 100 ms from 15 s. */
static void
slow_queue (Feed * f, LegbaBwePacket * p, guint * n)
{
  for (guint i = 0; i < *n; i++)
    p[i].arrival_us += CLAMP ((p[i].send_us - 10 * S) / 50, 0, 180 * MS);
}

/* The standing queue is overuse, once; when the decrease does not
 * shorten it within a round trip and 300 ms (the stream here does not
 * follow the target), it is not ours: it becomes the base at once, and
 * the estimate goes back up, to what the link delivers. */
static void
test_standing_queue (void)
{
  Feed f;

  feed_init (&f);
  feed_run (&f, 15 * S, slow_queue);
  g_assert_cmpuint (legba_bwe_target (f.bwe), ==, MAX_BPS);
  feed_run (&f, 1 * S, slow_queue);
  g_assert_cmpint (feed_state (&f).queue_delay_us, >, 100 * MS);
  g_assert_cmpuint (legba_bwe_target (f.bwe), <, 0.9 * MAX_BPS);
  g_assert_cmpuint (legba_bwe_target (f.bwe), >, 0.8 * MAX_BPS);
  feed_run (&f, 1 * S, slow_queue);
  g_assert_cmpint (feed_state (&f).queue_delay_us, <, 50 * MS);
  g_assert_cmpuint (legba_bwe_target (f.bwe), >, 0.8 * MAX_BPS);
  feed_run (&f, 23 * S, slow_queue);
  g_assert_cmpint (feed_state (&f).queue_delay_us, <, 10 * MS);
  g_assert_cmpuint (legba_bwe_target (f.bwe), >=, 0.95 * MAX_BPS);
  /* never more than 1.5 times what the link delivers, + 10 kbit/s */
  g_assert_cmpuint (legba_bwe_target (f.bwe), <=, 1.5 * STREAM_BPS + 10000);
  feed_clear (&f);
}

/* 8% of random loss: over 200 packets, an interval reads above 10% one
 * time in nine, which must not lower the bound. */
static void
random_loss (Feed * f, LegbaBwePacket * p, guint * n)
{
  for (guint i = 0; i < *n; i++)
    if (g_rand_double (f->rand) < 0.08)
      p[i].arrival_us = LEGBA_BWE_LOST;
}

static void
test_moderate_loss (void)
{
  Feed f;

  feed_init (&f);
  feed_run (&f, 60 * S, random_loss);
  g_assert_cmpuint (feed_state (&f).loss_bps, ==, MAX_BPS);
  g_assert_cmpuint (legba_bwe_target (f.bwe), ==, MAX_BPS);
  feed_clear (&f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/bwe/feedback/never", test_never);
  g_test_add_func ("/bwe/feedback/stops", test_stops);
  g_test_add_func ("/bwe/feedback/loss-bound", test_loss_bound);
  g_test_add_func ("/bwe/feedback/moderate-loss", test_moderate_loss);
  g_test_add_func ("/bwe/feedback/standing-queue", test_standing_queue);
  return g_test_run ();
}
