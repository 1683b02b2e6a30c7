/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The loss-based bound (draft-ietf-rmcat-gcc-02 §6): over each interval
 * of at least INTERVAL_US and MIN_PACKETS reported packets, a loss above
 * 10% lowers the bound to the target times (1 - loss / 2), a loss below 2%
 * lets it rise, and between them it holds. It starts at the ceiling, so
 * it only bounds once loss has been high: loss alone, below 10%, is not
 * taken for congestion (radio links and policers lose packets without a
 * queue). The intervals are long enough that 5% of random loss does not
 * read as 10% by chance; a queue that overflows is seen sooner by the
 * delay detector.
 */
#include <legba/room/legba-bwe-private.h>

#include <math.h>

#define INTERVAL_US (1 * LEGBA_BWE_S)
#define MIN_PACKETS 20
#define HIGH_LOSS 0.10
#define LOW_LOSS 0.02
/* per second while loss is low: as fast as the delay-based ramp without
 * a capacity estimate, so the bound never slows a recovery down */
#define RAMP 1.25

void
legba_bwe_loss_init (LegbaBweLoss * l, gdouble min, gdouble max)
{
  l->bound = max;
  l->min_rate = min;
  l->max_rate = max;
  l->have_interval = FALSE;
  l->interval_start = 0;
  l->expected = 0;
  l->lost = 0;
  l->fraction = 0;
  l->last_update = 0;
}

/* Counts the packets of a report: expected of them, lost lost (negative
 * when packets reported lost before arrived after all). */
void
legba_bwe_loss_count (LegbaBweLoss * l, guint expected, gint lost)
{
  l->expected = MIN ((guint64) l->expected + expected, G_MAXINT);
  if (lost < 0 && (guint) - lost > l->lost)
    l->lost = 0;
  else
    l->lost = MIN ((gint64) l->lost + lost, G_MAXINT);
}

/* Above HIGH_LOSS by two standard deviations of the measure over n
 * packets: 5% of random loss measured over 80 packets reads above 10%
 * one interval in fifty, which would otherwise cut the bound for good (the
 * loss then never falls under LOW_LOSS to lift it). */
static gboolean
clearly_high (gdouble fraction, guint n)
{
  return fraction - 2 * sqrt (fraction * (1 - fraction) / n) > HIGH_LOSS;
}

/* After each report; target is the current target. */
void
legba_bwe_loss_update (LegbaBweLoss * l, gdouble target, gint64 now_us)
{
  gdouble dt_s;

  if (!l->have_interval || now_us < l->interval_start) {
    l->have_interval = TRUE;
    l->interval_start = l->last_update = now_us;
  }
  dt_s = CLAMP ((now_us - l->last_update) / (gdouble) LEGBA_BWE_S, 0, 1);
  l->last_update = now_us;
  if (l->expected >= MIN_PACKETS && now_us - l->interval_start >= INTERVAL_US) {
    guint n = l->expected;

    l->fraction = MIN ((gdouble) l->lost / l->expected, 1.0);
    l->expected = l->lost = 0;
    l->interval_start = now_us;
    if (clearly_high (l->fraction, n))
      l->bound = MIN (l->bound, target * (1 - 0.5 * l->fraction));
  }
  if (l->fraction < LOW_LOSS)
    l->bound *= pow (RAMP, dt_s);
  l->bound = CLAMP (l->bound, l->min_rate, l->max_rate);
}

/* A bound that was not bounding (at the ceiling) follows the ceiling. */
void
legba_bwe_loss_set_max (LegbaBweLoss * l, gdouble max)
{
  if (l->bound >= l->max_rate)
    l->bound = max;
  l->max_rate = max;
  l->bound = CLAMP (l->bound, l->min_rate, l->max_rate);
}
