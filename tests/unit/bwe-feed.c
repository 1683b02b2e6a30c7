/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The report stream of bwe-feed.h.
 */
#include "bwe-feed.h"

void
feed_init (Feed * f)
{
  LegbaBweConfig config = { MIN_BPS, START_BPS, MAX_BPS };

  f->bwe = legba_bwe_new (&config);
  f->now = 0;
  f->seq = 65500;
  f->rand = g_rand_new_with_seed (7);
}

void
feed_clear (Feed * f)
{
  legba_bwe_free (f->bwe);
  g_rand_free (f->rand);
}

void
check_bounds (Feed * f)
{
  guint target = legba_bwe_target (f->bwe);

  g_assert_cmpuint (target, >=, MIN_BPS);
  g_assert_cmpuint (target, <=, MAX_BPS);
}

/* Reports for until_us more of the clean stream, each passed through
 * spoil (when not NULL) first; ticks every 50 ms. */
void
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

LegbaBweState
feed_state (Feed * f)
{
  LegbaBweState s;

  legba_bwe_get_state (f->bwe, &s);
  return s;
}

/* The clean stream reaches the ceiling: what the others are held to. */
