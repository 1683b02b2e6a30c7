/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaPlayout: the jitter buffer's latency from what it saw
 * (legba-playout.h).
 */
#include <legba/room/legba-playout.h>

void
legba_playout_init (LegbaPlayout * playout, guint floor_ms, guint ceiling_ms)
{
  *playout = (LegbaPlayout) {
  .floor_ms = floor_ms,.ceiling_ms = MAX (floor_ms, ceiling_ms),.latency_ms =
        floor_ms,};
}

/* What the measured retransmission round trip needs, or 0. */
static guint
needed (const LegbaPlayoutStats * stats)
{
  if (stats->rtx_rtt_ns == 0)
    return 0;
  return (stats->rtx_rtt_ns * 5 / 4 + 2 * stats->jitter_ns) / G_GUINT64_CONSTANT
      (1000000) + LEGBA_PLAYOUT_MARGIN_MS;
}

/* Returns the latency the jitter buffer should have now, in ms. */
guint
legba_playout_update (LegbaPlayout * playout, const LegbaPlayoutStats * stats,
    gint64 now_us)
{
  guint need = needed (stats), target = playout->latency_ms;
  gboolean late;

  /* the first update takes the counts as they are */
  late = playout->started && stats->late > playout->late &&
      stats->lost > playout->lost;
  playout->late = stats->late;
  playout->lost = stats->lost;
  if (!playout->started) {
    playout->started = TRUE;
    playout->risen_at = now_us;
  }
  if (playout->ceiling_ms <= playout->floor_ms)
    return playout->latency_ms;
  if (late)
    target = MAX (target, playout->latency_ms + playout->latency_ms / 2);
  target = MAX (target, need);
  if (target > playout->latency_ms) {
    playout->latency_ms = MIN (target, playout->ceiling_ms);
    playout->risen_at = now_us;
  } else if (now_us - playout->risen_at >= LEGBA_PLAYOUT_CALM_US) {
    guint lower = playout->latency_ms - playout->latency_ms / 20;

    playout->latency_ms = MAX (playout->floor_ms, MAX (need, lower));
  }
  return playout->latency_ms;
}
