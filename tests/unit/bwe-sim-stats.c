/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What a simulated call's samples say (bwe-sim.h).
 */
#include "bwe-sim.h"

/* The smallest and largest of the target's means over each second from
 * from_us: an encoder follows its target over about that long. */
void
bwe_sim_target_range (BweSim * s, gint64 from_us, gint64 to_us, guint * min,
    guint * max)
{
  const GArray *samples = bwe_sim_get_samples (s);

  *min = G_MAXUINT;
  *max = 0;
  for (gint64 t = from_us; t + G_USEC_PER_SEC <= to_us; t += G_USEC_PER_SEC) {
    guint64 sum = 0, n = 0;

    for (guint i = 0; i < samples->len; i++) {
      const BweSimSample *x = &g_array_index (samples, BweSimSample, i);

      if (x->t >= t && x->t < t + G_USEC_PER_SEC) {
        sum += x->target;
        n++;
      }
    }
    if (n == 0)
      continue;
    *min = MIN (*min, sum / n);
    *max = MAX (*max, sum / n);
  }
}

guint
bwe_sim_target_mean (BweSim * s, gint64 from_us, gint64 to_us)
{
  const GArray *samples = bwe_sim_get_samples (s);
  guint64 sum = 0, n = 0;

  for (guint i = 0; i < samples->len; i++) {
    const BweSimSample *x = &g_array_index (samples, BweSimSample, i);

    if (x->t >= from_us && x->t < to_us) {
      sum += x->target;
      n++;
    }
  }
  return n ? sum / n : 0;
}

static gint
compare_gint64 (gconstpointer a, gconstpointer b)
{
  gint64 x = *(const gint64 *) a, y = *(const gint64 *) b;

  return x < y ? -1 : x > y;
}

gint64
bwe_sim_queue_percentile (BweSim * s, gint64 from_us, gint64 to_us, gdouble p)
{
  const GArray *samples = bwe_sim_get_samples (s);
  g_autoptr (GArray) q = g_array_new (FALSE, FALSE, sizeof (gint64));

  for (guint i = 0; i < samples->len; i++) {
    const BweSimSample *x = &g_array_index (samples, BweSimSample, i);

    if (x->t >= from_us && x->t < to_us)
      g_array_append_val (q, x->queue_us);
  }
  if (q->len == 0)
    return -1;
  g_array_sort (q, compare_gint64);
  return g_array_index (q, gint64, MIN ((guint) (p * q->len), q->len - 1));
}

static gint64
first (BweSim * s, gint64 from_us, gboolean (*test) (const BweSimSample *,
        gint64), gint64 value)
{
  const GArray *samples = bwe_sim_get_samples (s);

  for (guint i = 0; i < samples->len; i++) {
    const BweSimSample *x = &g_array_index (samples, BweSimSample, i);

    if (x->t >= from_us && test (x, value))
      return x->t;
  }
  return -1;
}

static gboolean
target_below (const BweSimSample * x, gint64 v)
{
  return x->target < v;
}

static gboolean
target_above (const BweSimSample * x, gint64 v)
{
  return x->target >= v;
}

static gboolean
queue_below (const BweSimSample * x, gint64 v)
{
  return x->queue_us < v;
}

gint64
bwe_sim_first_target_below (BweSim * s, gint64 from_us, guint bps)
{
  return first (s, from_us, target_below, bps);
}

gint64
bwe_sim_first_target_above (BweSim * s, gint64 from_us, guint bps)
{
  return first (s, from_us, target_above, bps);
}

gint64
bwe_sim_first_queue_below (BweSim * s, gint64 from_us, gint64 us)
{
  return first (s, from_us, queue_below, us);
}

void
bwe_sim_delivered (BweSim * s, gint64 from_us, gint64 to_us, guint * call_bps,
    guint * tcp_bps)
{
  const GArray *samples = bwe_sim_get_samples (s);
  const BweSimSample *first = NULL, *last = NULL;

  *call_bps = *tcp_bps = 0;
  for (guint i = 0; i < samples->len; i++) {
    const BweSimSample *x = &g_array_index (samples, BweSimSample, i);

    if (x->t < from_us || x->t >= to_us)
      continue;
    if (first == NULL)
      first = x;
    last = x;
  }
  if (first == NULL || last->t <= first->t)
    return;
  *call_bps = (last->call_bytes - first->call_bytes) * 8 * G_USEC_PER_SEC /
      (last->t - first->t);
  *tcp_bps = (last->tcp_bytes - first->tcp_bytes) * 8 * G_USEC_PER_SEC /
      (last->t - first->t);
}
