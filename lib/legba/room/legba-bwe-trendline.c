/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The delay trend (draft-ietf-rmcat-gcc-02 §5.2, with libwebrtc's
 * trendline filter in place of the draft's Kalman filter): packets are
 * grouped by send time (a burst of LEGBA_BWE_GROUP_US), each group
 * compared with the one before it gives a delay variation (how much
 * longer the group took to arrive than to be sent), the accumulated
 * variation is smoothed, and the slope of a least-squares line through
 * its last LEGBA_BWE_TREND_WINDOW points is the trend: positive while a
 * queue grows.
 */
#include <legba/room/legba-bwe-private.h>

#include <math.h>
#include <string.h>

#define SMOOTHING 0.9
/* A packet that arrives within this of its group's last, sooner than its
 * send time says, came in a burst (a queue emptying): same group. */
#define BURST_US (5 * LEGBA_BWE_MS)
#define MAX_BURST_US (100 * LEGBA_BWE_MS)
/* Groups arriving before their predecessor this many times in a row:
 * the receiver's clock went back. */
#define MAX_REVERSED 3

void
legba_bwe_trendline_reset (LegbaBweTrendline * t)
{
  memset (t, 0, sizeof *t);
}

static void
group_start (LegbaBweGroup * g, gint64 send_us, gint64 arrival_us)
{
  g->valid = TRUE;
  g->first_send = g->last_send = send_us;
  g->first_arrival = g->last_arrival = arrival_us;
}

static gboolean
in_burst (const LegbaBweGroup * g, gint64 send_us, gint64 arrival_us)
{
  gint64 arrival_delta = arrival_us - g->last_arrival;
  gint64 send_delta = send_us - g->last_send;

  if (send_delta == 0)
    return TRUE;
  return arrival_delta - send_delta < 0 && arrival_delta <= BURST_US &&
      arrival_us - g->first_arrival < MAX_BURST_US;
}

/* The slope of the least-squares line through the window, or the last
 * one when the points are all at one x. */
static gdouble
regression (const LegbaBweTrendline * t)
{
  gdouble mx = 0, my = 0, num = 0, den = 0;

  for (guint i = 0; i < t->count; i++) {
    mx += t->x[i];
    my += t->y[i];
  }
  mx /= t->count;
  my /= t->count;
  for (guint i = 0; i < t->count; i++) {
    num += (t->x[i] - mx) * (t->y[i] - my);
    den += (t->x[i] - mx) * (t->x[i] - mx);
  }
  return den > 0 ? num / den : t->trend;
}

static void
trend_update (LegbaBweTrendline * t, gdouble delay_ms, gint64 arrival_us)
{
  if (!t->have_origin) {
    t->have_origin = TRUE;
    t->origin_arrival = arrival_us;
  }
  if (t->num_deltas < G_MAXUINT16)
    t->num_deltas++;
  t->accumulated_ms += delay_ms;
  t->smoothed_ms = SMOOTHING * t->smoothed_ms +
      (1 - SMOOTHING) * t->accumulated_ms;

  t->x[t->head] = (arrival_us - t->origin_arrival) / 1000.0;
  t->y[t->head] = t->smoothed_ms;
  t->head = (t->head + 1) % LEGBA_BWE_TREND_WINDOW;
  if (t->count < LEGBA_BWE_TREND_WINDOW)
    t->count++;
  if (t->count == LEGBA_BWE_TREND_WINDOW)
    t->trend = regression (t);
}

/* The queueing delay: the group's one-way delay over the smallest of the
 * last LEGBA_BWE_BASE_BUCKETS seconds. A queue that stands longer than
 * that becomes the base. */
static void
base_update (LegbaBweTrendline * t, const LegbaBweGroup * g)
{
  gint64 delay = g->last_arrival - g->last_send, base = delay;

  if (t->n_base == 0 || g->last_arrival - t->bucket_start >= LEGBA_BWE_S) {
    memmove (&t->base[1], &t->base[0],
        sizeof t->base[0] * (LEGBA_BWE_BASE_BUCKETS - 1));
    t->n_base = MIN (t->n_base + 1, LEGBA_BWE_BASE_BUCKETS);
    t->base[0] = delay;
    t->bucket_start = g->last_arrival;
  }
  t->base[0] = MIN (t->base[0], delay);
  for (guint i = 0; i < t->n_base; i++)
    base = MIN (base, t->base[i]);
  t->queue_us = delay - base;
  t->last_delay = delay;
}

/* The delay now is the base: what stood was no queue of ours. */
void
legba_bwe_trendline_rebase (LegbaBweTrendline * t)
{
  for (guint i = 0; i < t->n_base; i++)
    t->base[i] = t->last_delay;
  t->queue_us = 0;
}

/* The current group is complete: compares it with the previous one.
 * Returns TRUE with *delta filled when that gave a delay variation. */
static gboolean
group_complete (LegbaBweTrendline * t, LegbaBweDelta * delta)
{
  const LegbaBweGroup *cur = &t->current, *prev = &t->previous;
  gint64 send_delta, arrival_delta;

  if (!prev->valid)
    return FALSE;
  send_delta = cur->last_send - prev->last_send;
  arrival_delta = cur->last_arrival - prev->last_arrival;
  if (arrival_delta < 0) {
    if (++t->reversed >= MAX_REVERSED)
      legba_bwe_trendline_reset (t);
    return FALSE;
  }
  t->reversed = 0;
  if (ABS (arrival_delta - send_delta) >= LEGBA_BWE_JUMP_US) {
    legba_bwe_trendline_reset (t);
    return FALSE;
  }
  base_update (t, cur);
  delta->send_delta_ms = send_delta / 1000.0;
  delta->arrival_us = cur->last_arrival;
  trend_update (t, (arrival_delta - send_delta) / 1000.0, cur->last_arrival);
  return TRUE;
}

/* Adds one received packet; packets are added in the order they
 * arrived. Returns TRUE when a group completed and gave a delay
 * variation: then *delta says when and how far apart the groups were
 * sent, and t->trend is up to date. */
gboolean
legba_bwe_trendline_add (LegbaBweTrendline * t, gint64 send_us,
    gint64 arrival_us, LegbaBweDelta * delta)
{
  LegbaBweGroup *cur = &t->current;
  gboolean done = FALSE;

  if (!cur->valid) {
    group_start (cur, send_us, arrival_us);
    return FALSE;
  }
  if (send_us < cur->first_send) {
    /* sent before the group: reordered, unless the sender's clock jumped */
    if (cur->first_send - send_us >= LEGBA_BWE_JUMP_US) {
      legba_bwe_trendline_reset (t);
      group_start (&t->current, send_us, arrival_us);
    }
    return FALSE;
  }
  if (send_us - cur->first_send <= LEGBA_BWE_GROUP_US ||
      in_burst (cur, send_us, arrival_us)) {
    cur->last_send = MAX (cur->last_send, send_us);
    cur->last_arrival = MAX (cur->last_arrival, arrival_us);
    return FALSE;
  }
  done = group_complete (t, delta);
  t->previous = t->current;
  group_start (&t->current, send_us, arrival_us);
  return done;
}
