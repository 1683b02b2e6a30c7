/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaBwe (docs/congestion-control.md) against feedback that is wrong
 * or missing: absurd times, reordered, repeated and unknown packets, empty
 * reports, a receiver that never reports or stops, heavy loss. The clean
 * stream: a 1,200-byte packet every 5 ms (1.92 Mbit/s) without a queue,
 * reported every 100 ms; each test spoils it, and checks every target.
 */
#include <legba/room/legba-bwe.h>

#define MS ((gint64) 1000)
#define S ((gint64) 1000000)
#define MIN_BPS 50000
#define START_BPS 300000
#define MAX_BPS 2000000
#define PACKET_US (5 * MS)
#define REPORT_US (100 * MS)
#define PER_REPORT (REPORT_US / PACKET_US)

typedef struct
{
  LegbaBwe *bwe;
  gint64 now;
  guint seq;
  GRand *rand;
} Feed;

typedef void (*Spoil) (Feed * f, LegbaBwePacket * p, guint * n);

static void
feed_init (Feed * f)
{
  LegbaBweConfig config = { MIN_BPS, START_BPS, MAX_BPS };

  f->bwe = legba_bwe_new (&config);
  f->now = 0;
  f->seq = 65500;
  f->rand = g_rand_new_with_seed (7);
}

static void
feed_clear (Feed * f)
{
  legba_bwe_free (f->bwe);
  g_rand_free (f->rand);
}

static void
check_bounds (Feed * f)
{
  guint target = legba_bwe_target (f->bwe);

  g_assert_cmpuint (target, >=, MIN_BPS);
  g_assert_cmpuint (target, <=, MAX_BPS);
}

/* Reports for until_us more of the clean stream, each passed through
 * spoil (when not NULL) first; ticks every 50 ms. */
static void
feed_run (Feed * f, gint64 until_us, Spoil spoil)
{
  for (gint64 end = f->now + until_us; f->now < end; f->now += REPORT_US) {
    LegbaBwePacket p[4 * PER_REPORT];
    guint n = PER_REPORT;

    for (guint i = 0; i < n; i++) {
      gint64 sent = f->now - REPORT_US + i * PACKET_US;

      p[i] = (LegbaBwePacket) {
      .seq = f->seq++ & 0xffff,.send_us = sent,.arrival_us =
            sent + 20 * MS,.size = 1200};
    }
    if (spoil)
      spoil (f, p, &n);
    legba_bwe_on_feedback (f->bwe, p, n, f->now);
    check_bounds (f);
    legba_bwe_on_tick (f->bwe, f->now + REPORT_US / 2);
    check_bounds (f);
    if (f->now % S == 0)
      legba_bwe_on_rtt (f->bwe, 40 * MS, f->now);
  }
}

static LegbaBweState
state (Feed * f)
{
  LegbaBweState s;

  legba_bwe_get_state (f->bwe, &s);
  return s;
}

/* The clean stream reaches the ceiling: what the others are held to. */
static void
test_clean (void)
{
  Feed f;

  feed_init (&f);
  feed_run (&f, 20 * S, NULL);
  g_assert_cmpuint (legba_bwe_target (f.bwe), ==, MAX_BPS);
  g_assert_cmpfloat (state (&f).loss_fraction, ==, 0);
  g_assert_false (state (&f).feedback_missing);
  feed_clear (&f);
}

static void
jump_hours (Feed * f, LegbaBwePacket * p, guint * n)
{
  gint64 jump = (f->now / REPORT_US % 3 - 1) * 3 * 3600 * S;

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
  s = state (&f);
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
  g_assert_cmpfloat (state (&f).loss_fraction, <, 0.02);
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
empty (Feed * f, LegbaBwePacket * p, guint * n)
{
  *n = 0;
}

static void
check_missing (Feed * f)
{
  LegbaBweState s = state (f);

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
  g_assert_false (state (&f).feedback_missing);
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
  g_assert_false (state (&f).feedback_missing);
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
  g_assert_cmpfloat (state (&f).loss_fraction, >, 0.15);
  g_assert_cmpuint (legba_bwe_target (f.bwe), <, 0.5 * MAX_BPS);
  g_assert_cmpuint (state (&f).loss_bps, ==, legba_bwe_target (f.bwe));
  feed_clear (&f);
}

/* Reports of random packets, times and sizes, at random times. */
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
  g_test_add_func ("/bwe/input/never", test_never);
  g_test_add_func ("/bwe/input/stops", test_stops);
  g_test_add_func ("/bwe/input/loss-bound", test_loss_bound);
  g_test_add_func ("/bwe/input/garbage", test_garbage);
  return g_test_run ();
}
