/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaBwe (docs/congestion-control.md) against feedback that is wrong:
 * absurd times, reordered, repeated and unknown packets, random reports.
 * The clean stream is bwe-feed.h's.
 */
#include "bwe-feed.h"

static void
test_clean (void)
{
  Feed f;

  feed_init (&f);
  feed_run (&f, 20 * S, NULL);
  g_assert_cmpuint (legba_bwe_target (f.bwe), ==, MAX_BPS);
  g_assert_cmpfloat (feed_state (&f).loss_fraction, ==, 0);
  g_assert_false (feed_state (&f).feedback_missing);
  feed_clear (&f);
}

/* The receiver's clock jumps 3 hours ahead or back at each report. The
 * acknowledged bitrate starts over at a jump: it never takes the jump for
 * time the link carried nothing. */
static void
jump_hours (Feed * f, LegbaBwePacket * p, guint * n)
{
  gint64 jump = (f->now / REPORT_US % 3 - 1) * 3 * 3600 * S;
  guint acked = feed_state (f).acked_bps;

  g_assert_true (acked == 0 || acked > 1500000);

  for (guint i = 0; i < *n; i++)
    p[i].arrival_us += jump;
}

static void
random_times (Feed * f, LegbaBwePacket * p, guint * n)
{
  for (guint i = 0; i < *n; i++)
    p[i].arrival_us = g_rand_int_range (f->rand, -1000000, 1000000) * S;
}

/* Arrival times that jump by hours, forwards and back, or are random:
 * the estimate stays within bounds, and clean feedback afterwards takes
 * it back up (near the stream's own rate, had it overused). */
static void
check_absurd (Spoil spoil)
{
  Feed f;

  feed_init (&f);
  feed_run (&f, 10 * S, NULL);
  feed_run (&f, 20 * S, spoil);
  feed_run (&f, 20 * S, NULL);
  g_assert_cmpuint (legba_bwe_target (f.bwe), >=, 0.95 * MAX_BPS);
  feed_clear (&f);
}

static void
test_absurd_jumps (void)
{
  check_absurd (jump_hours);
}

static void
test_absurd_random (void)
{
  check_absurd (random_times);
}

static void
reverse (Feed * f, LegbaBwePacket * p, guint * n)
{
  for (guint i = 0; i < *n / 2; i++) {
    LegbaBwePacket t = p[i];

    p[i] = p[*n - 1 - i];
    p[*n - 1 - i] = t;
  }
}

/* Each packet of the report twice, and the report's first half again. */
static void
duplicate (Feed * f, LegbaBwePacket * p, guint * n)
{
  guint m = *n;

  for (guint i = 0; i < m; i++)
    p[m + i] = p[i];
  for (guint i = 0; i < m / 2; i++)
    p[2 * m + i] = p[i];
  *n = 2 * m + m / 2;
}

/* Reordered or repeated packets are neither congestion nor loss, and a
 * repeat is not counted twice in the acknowledged bitrate. */
static void
check_harmless (Spoil spoil)
{
  Feed f;
  LegbaBweState s;

  feed_init (&f);
  feed_run (&f, 20 * S, spoil);
  s = feed_state (&f);
  g_assert_cmpuint (s.target_bps, ==, MAX_BPS);
  g_assert_cmpfloat (s.loss_fraction, ==, 0);
  /* 1,200 bytes every 5 ms */
  g_assert_cmpuint (s.acked_bps, >=, 1900000);
  g_assert_cmpuint (s.acked_bps, <=, 1940000);
  feed_clear (&f);
}

static void
test_reordered (void)
{
  check_harmless (reverse);
}

static void
test_duplicated (void)
{
  check_harmless (duplicate);
}

/* A tenth of the packets reported lost, then received in the next
 * report: no loss in the end. */
static void
late (Feed * f, LegbaBwePacket * p, guint * n)
{
  guint m = *n;

  for (guint i = 0; i < m; i += 10) {
    p[*n] = p[i];
    p[*n].seq = (p[i].seq - PER_REPORT) & 0xffff;
    p[*n].send_us -= REPORT_US;
    p[*n].arrival_us -= REPORT_US;
    (*n)++;
    p[i].arrival_us = LEGBA_BWE_LOST;
  }
}

static void
test_lost_then_received (void)
{
  Feed f;

  feed_init (&f);
  feed_run (&f, 20 * S, late);
  g_assert_cmpfloat (feed_state (&f).loss_fraction, <, 0.02);
  g_assert_cmpuint (legba_bwe_target (f.bwe), ==, MAX_BPS);
  feed_clear (&f);
}

/* Packets the sender has no record of, and sequence numbers from
 * nowhere, beside the real ones. */
static void
unknown (Feed * f, LegbaBwePacket * p, guint * n)
{
  for (guint i = 0; i < PER_REPORT; i++) {
    p[*n + i] = p[i];
    p[*n + i].seq = g_rand_int (f->rand);
    p[*n + i].send_us = i % 2 ? -1 : (gint64) g_rand_int (f->rand);
    p[*n + i].size = g_rand_int (f->rand);
  }
  *n += PER_REPORT;
}

static void
test_unknown_packets (void)
{
  Feed f;

  feed_init (&f);
  feed_run (&f, 30 * S, unknown);
  check_bounds (&f);
  g_assert_cmpuint (legba_bwe_target (f.bwe), >=, START_BPS);
  feed_clear (&f);
}

static void
test_garbage (void)
{
  LegbaBweConfig config = { 0, 0, 0 };
  g_autoptr (LegbaBwe) zero = legba_bwe_new (&config);
  Feed f;

  g_assert_cmpuint (legba_bwe_target (zero), ==, 1);
  feed_init (&f);
  for (guint r = 0; r < 20000; r++) {
    LegbaBwePacket p[16];
    guint n = g_rand_int_range (f.rand, 0, G_N_ELEMENTS (p) + 1);

    for (guint i = 0; i < n; i++) {
      p[i].seq = g_rand_int (f.rand);
      p[i].send_us = ((gint64) g_rand_int (f.rand) << g_rand_int_range (f.rand,
              0, 29)) - G_MAXINT32;
      p[i].arrival_us = g_rand_boolean (f.rand) ? LEGBA_BWE_LOST :
          ((gint64) g_rand_int (f.rand) << g_rand_int_range (f.rand, 0, 29)) -
          ((gint64) 1 << 59);
      p[i].size = g_rand_int (f.rand);
    }
    f.now += g_rand_int_range (f.rand, -10, 200) * MS;
    legba_bwe_on_feedback (f.bwe, p, n, f.now);
    if (r % 7 == 0)
      legba_bwe_on_rtt (f.bwe, (gint64) g_rand_int (f.rand) - G_MAXINT32,
          f.now);
    legba_bwe_on_tick (f.bwe, f.now);
    check_bounds (&f);
  }
  feed_clear (&f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/bwe/input/clean", test_clean);
  g_test_add_func ("/bwe/input/absurd-jumps", test_absurd_jumps);
  g_test_add_func ("/bwe/input/absurd-random", test_absurd_random);
  g_test_add_func ("/bwe/input/reordered", test_reordered);
  g_test_add_func ("/bwe/input/duplicated", test_duplicated);
  g_test_add_func ("/bwe/input/lost-then-received", test_lost_then_received);
  g_test_add_func ("/bwe/input/unknown-packets", test_unknown_packets);
  g_test_add_func ("/bwe/input/garbage", test_garbage);
  return g_test_run ();
}
