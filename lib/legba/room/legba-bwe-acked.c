/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The acknowledged bitrate: what the receiver got, by its own arrival
 * times, so that past a bottleneck it is the bottleneck's rate. The
 * estimate is the bytes that arrived in the last WINDOW_US, over that
 * time: long enough that neither the quantisation of packets into short
 * windows (a packet is a tenth of 150 ms at 1 Mbit/s) nor jitter moves it
 * by more than a few percent, for the AIMD's decrease to BETA times it and
 * the link capacity's bounds. A link that falls shows sooner in short
 * windows: legba_bwe_acked_recent_bps() takes their median when it is far
 * below the estimate.
 */
#include <legba/room/legba-bwe-private.h>

#include <string.h>

#define WINDOW_US (1 * LEGBA_BWE_S)
/* no estimate before this much arrival time */
#define FIRST_US (500 * LEGBA_BWE_MS)
#define SHORT_US (150 * LEGBA_BWE_MS)
/* the short windows' median under this times the estimate: a fall */
#define FALL 0.7
/* A packet that arrives this long before the newest: the receiver's clock
 * went back, start over (less: a late packet, counted as the newest).
 * This long after: its clock jumped, or the sender paused; start over
 * too, rather than count the jump as time the link carried nothing. */
#define JUMP_US (1 * LEGBA_BWE_S)

void
legba_bwe_acked_init (LegbaBweAcked * a)
{
  a->head = a->count = 0;
  a->bytes = 0;
  a->start = 0;
  a->n_holes = 0;
  a->window_start = 0;
  a->window_bytes = 0;
  a->n_windows = 0;
}

static const LegbaBweAckedPacket *
newest (const LegbaBweAcked * a)
{
  return &a->ring[(a->head + a->count - 1) % LEGBA_BWE_ACKED_RING];
}

static void
short_window (LegbaBweAcked * a, gint64 arrival_us, guint size,
    gboolean after_gap)
{
  gint64 end = a->window_start + SHORT_US;

  if (after_gap) {
    /* the window lacks what the lost report had: start over */
    a->n_windows = 0;
    a->window_start = arrival_us;
    a->window_bytes = size;
    return;
  }
  if (arrival_us < end) {
    a->window_bytes += size;
    return;
  }
  a->windows_kbps[2] = a->windows_kbps[1];
  a->windows_kbps[1] = a->windows_kbps[0];
  a->windows_kbps[0] = a->window_bytes * 8.0 * 1000.0 / SHORT_US;
  a->n_windows = MIN (a->n_windows + 1, 3);
  /* windows follow each other; after a gap, the next starts here */
  a->window_start = arrival_us < end + SHORT_US ? end : arrival_us;
  a->window_bytes = size;
}

static void
hole_add (LegbaBweAcked * a, gint64 from, gint64 to)
{
  if (a->n_holes == LEGBA_BWE_ACKED_HOLES) {
    memmove (a->holes[0], a->holes[1], sizeof a->holes[0] * (a->n_holes - 1));
    a->n_holes--;
  }
  a->holes[a->n_holes][0] = from;
  a->holes[a->n_holes][1] = to;
  a->n_holes++;
}

/* Adds a received packet; after_gap: packets sent before it and after
 * the one added last were in no report. */
void
legba_bwe_acked_add (LegbaBweAcked * a, gint64 arrival_us, guint size,
    gboolean after_gap)
{
  LegbaBweAckedPacket *p;

  if (a->count > 0 && (newest (a)->arrival - arrival_us > JUMP_US ||
          arrival_us - newest (a)->arrival > JUMP_US))
    legba_bwe_acked_init (a);
  if (a->count == 0) {
    a->start = a->window_start = arrival_us;
    a->window_bytes = 0;
  } else {
    arrival_us = MAX (arrival_us, newest (a)->arrival);
    if (after_gap)
      hole_add (a, newest (a)->arrival, arrival_us);
  }
  while (a->n_holes > 0 && a->holes[0][1] <= arrival_us - WINDOW_US) {
    memmove (a->holes[0], a->holes[1], sizeof a->holes[0] * (a->n_holes - 1));
    a->n_holes--;
  }
  while (a->count > 0 && (a->count == LEGBA_BWE_ACKED_RING ||
          a->ring[a->head].arrival <= arrival_us - WINDOW_US)) {
    a->bytes -= a->ring[a->head].size;
    a->head = (a->head + 1) % LEGBA_BWE_ACKED_RING;
    a->count--;
  }
  p = &a->ring[(a->head + a->count) % LEGBA_BWE_ACKED_RING];
  p->arrival = arrival_us;
  p->size = size;
  a->count++;
  a->bytes += size;
  short_window (a, arrival_us, size, after_gap);
}

/* How much of the time since from the holes take. */
static gint64
holes_within (const LegbaBweAcked * a, gint64 from)
{
  gint64 sum = 0;

  for (guint i = 0; i < a->n_holes; i++)
    sum += MAX (0, a->holes[i][1] - MAX (a->holes[i][0], from));
  return sum;
}

guint
legba_bwe_acked_bps (const LegbaBweAcked * a)
{
  gint64 span, covered;

  if (a->count == 0)
    return 0;
  span = MIN (newest (a)->arrival - a->start, WINDOW_US);
  if (span < FIRST_US)
    return 0;
  /* a full ring holds less than the window */
  if (a->count == LEGBA_BWE_ACKED_RING)
    span = MAX (newest (a)->arrival - a->ring[a->head].arrival, 1);
  covered = span - holes_within (a, newest (a)->arrival - span);
  if (covered < FIRST_US / 2)
    return 0;
  return (guint) MIN (a->bytes * 8.0 * LEGBA_BWE_S / covered, G_MAXUINT);
}

/* What the link carries now, for a decrease: the estimate, or the median
 * of the last three short windows when it is far below it (the link fell:
 * while a queue builds the bottleneck sends back to back, so short
 * windows measure it well, where the estimate lags a second). A lost
 * report leaves a hole in them: then the estimate. */
guint
legba_bwe_acked_recent_bps (const LegbaBweAcked * a)
{
  const gdouble *w = a->windows_kbps;
  gdouble estimate = legba_bwe_acked_bps (a), median;

  if (estimate == 0 || a->n_windows < 3)
    return estimate;
  median = MAX (MIN (w[0], w[1]), MIN (MAX (w[0], w[1]), w[2])) * 1000.0;
  return median < FALL * estimate ? (guint) median : (guint) estimate;
}
