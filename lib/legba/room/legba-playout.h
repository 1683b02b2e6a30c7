/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaPlayout: how long a received stream's jitter buffer waits, from
 * what the jitter buffer saw, without any I/O (docs/rooms.md, "The
 * jitter buffer on real networks").
 *
 * A jitter buffer holds the packets behind a lost one until the
 * retransmission comes or its latency passes; a retransmission that
 * comes after that is thrown away (counted late) and the picture waits
 * for the next key frame. The latency therefore has to cover the
 * retransmissions' round trip on the path, which grows with the queue at
 * a bottleneck. The playout starts at the room's latency (the floor) and:
 *
 * - rises at once to cover the measured retransmission round trip
 *   (5/4 of it, plus twice the arrival jitter and LEGBA_PLAYOUT_MARGIN_MS);
 * - rises by half when, since the last update, packets were given up
 *   as lost and packets came late (a retransmission later than the
 *   latency is not measured: coming late after a loss is the only sign
 *   of it; a late copy alone may be a retransmission of a packet that
 *   was only delayed, and lost packets alone were lost on both ways);
 * - after LEGBA_PLAYOUT_CALM_US without a rise, falls by a twentieth of
 *   itself an update towards what the round trip needs, never under the
 *   floor;
 * - never goes over the ceiling. A ceiling at or under the floor keeps
 *   the latency fixed.
 *
 * Updates are the caller's (about once a second); time is its monotonic
 * clock in microseconds.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define LEGBA_PLAYOUT_MARGIN_MS 20
#define LEGBA_PLAYOUT_CALM_US (10 * G_USEC_PER_SEC)

/* What a jitter buffer counted so far (its "stats" property). */
typedef struct
{
  guint64 lost;                 /* num-lost */
  guint64 late;                 /* num-late */
  guint64 rtx_rtt_ns;           /* rtx-rtt: 0 before a measured one */
  guint64 jitter_ns;            /* avg-jitter */
} LegbaPlayoutStats;

typedef struct
{
  guint floor_ms;
  guint ceiling_ms;
  guint latency_ms;
  guint64 lost;
  guint64 late;
  gint64 risen_at;
  gboolean started;
} LegbaPlayout;

void legba_playout_init (LegbaPlayout * playout, guint floor_ms,
    guint ceiling_ms);
guint legba_playout_update (LegbaPlayout * playout,
    const LegbaPlayoutStats * stats, gint64 now_us);

G_END_DECLS
