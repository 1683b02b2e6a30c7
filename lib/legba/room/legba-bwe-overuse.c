/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The overuse detector (draft-ietf-rmcat-gcc-02 §5.4 and §5.5, with
 * libwebrtc's gains for the trendline): the trend, scaled by how many
 * delay variations it rests on, against an adaptive threshold. The
 * threshold follows the scaled trend, slowly up and faster down, so that
 * a flow sharing the link with TCP is not starved by a fixed threshold
 * that TCP's queue keeps crossing, while jitter alone does not read as
 * overuse.
 */
#include <legba/room/legba-bwe-private.h>

#include <math.h>

#define TREND_GAIN 4.0
#define MAX_DELTAS 60
#define THRESHOLD_START 12.5
#define THRESHOLD_MIN 6.0
#define THRESHOLD_MAX 600.0
#define K_UP 0.0087
#define K_DOWN 0.039
/* A trend this far past the threshold is a spike, not noise: it does not
 * move the threshold. */
#define MAX_ADAPT_OFFSET 15.0
#define MAX_ADAPT_STEP_MS 100.0
/* Over the threshold this long (ms) and more than once, with the trend
 * not falling: overusing. */
#define OVERUSE_TIME_MS 10.0

void
legba_bwe_overuse_init (LegbaBweOveruse * o)
{
  o->threshold = THRESHOLD_START;
  o->have_update = FALSE;
  o->last_update = 0;
  o->time_over_using = -1;
  o->overuse_count = 0;
  o->prev_trend = 0;
  o->modified_trend = 0;
  o->usage = LEGBA_BWE_USAGE_NORMAL;
}

static void
threshold_update (LegbaBweOveruse * o, gdouble modified, gint64 now_us)
{
  gdouble dt_ms, k;

  if (!o->have_update) {
    o->have_update = TRUE;
    o->last_update = now_us;
  }
  if (fabs (modified) > o->threshold + MAX_ADAPT_OFFSET) {
    o->last_update = now_us;
    return;
  }
  k = fabs (modified) < o->threshold ? K_DOWN : K_UP;
  dt_ms = CLAMP ((now_us - o->last_update) / 1000.0, 0, MAX_ADAPT_STEP_MS);
  o->threshold += k * (fabs (modified) - o->threshold) * dt_ms;
  o->threshold = CLAMP (o->threshold, THRESHOLD_MIN, THRESHOLD_MAX);
  o->last_update = now_us;
}

LegbaBweUsage
legba_bwe_overuse_detect (LegbaBweOveruse * o, gdouble trend,
    guint num_deltas, const LegbaBweDelta * delta)
{
  gdouble modified;

  if (num_deltas < 2 || !isfinite (trend))
    return o->usage;
  modified = MIN (num_deltas, MAX_DELTAS) * trend * TREND_GAIN;
  o->modified_trend = modified;
  if (modified > o->threshold) {
    if (o->time_over_using < 0)
      o->time_over_using = delta->send_delta_ms / 2;
    else
      o->time_over_using += delta->send_delta_ms;
    o->overuse_count++;
    if (o->time_over_using > OVERUSE_TIME_MS && o->overuse_count > 1 &&
        trend >= o->prev_trend) {
      o->time_over_using = 0;
      o->overuse_count = 0;
      o->usage = LEGBA_BWE_USAGE_OVERUSING;
    }
  } else if (modified < -o->threshold) {
    o->time_over_using = -1;
    o->overuse_count = 0;
    o->usage = LEGBA_BWE_USAGE_UNDERUSING;
  } else {
    o->time_over_using = -1;
    o->overuse_count = 0;
    o->usage = LEGBA_BWE_USAGE_NORMAL;
  }
  o->prev_trend = trend;
  threshold_update (o, modified, delta->arrival_us);
  return o->usage;
}
