/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The parts of LegbaBwe (legba-bwe.c), each in a file of its own and each
 * a plain struct the estimator embeds: the sequence numbers reported
 * (legba-bwe-seen.c), the trendline over arrival-time
 * groups (legba-bwe-trendline.c), the overuse detector
 * (legba-bwe-overuse.c), the acknowledged bitrate (legba-bwe-acked.c), the
 * AIMD rate control (legba-bwe-aimd.c) and the loss-based bound
 * (legba-bwe-loss.c). Rates are in bits per second, times in
 * microseconds; docs/congestion-control.md gives the constants and why.
 */
#pragma once

#include <legba/room/legba-bwe.h>

G_BEGIN_DECLS

#define LEGBA_BWE_MS ((gint64) 1000)
#define LEGBA_BWE_S ((gint64) 1000000)

/* Packets sent within this of a group's first are one group. */
#define LEGBA_BWE_GROUP_US (5 * LEGBA_BWE_MS)
/* A delay variation or clock jump this large is no queue: start over. */
#define LEGBA_BWE_JUMP_US (3 * LEGBA_BWE_S)
#define LEGBA_BWE_TREND_WINDOW 20
/* sequence numbers remembered, to tell a repeated report from a new one */
#define LEGBA_BWE_SEEN 4096
#define LEGBA_BWE_BASE_BUCKETS 10

typedef enum
{
  LEGBA_BWE_SEEN_OLD,           /* reported already, or too old */
  LEGBA_BWE_SEEN_NEW,
  LEGBA_BWE_SEEN_RECOVERED,     /* reported lost before, received now */
} LegbaBweSeenNews;

typedef struct
{
  gint64 seq;
  guint8 state;
} LegbaBweSeenEntry;

typedef struct
{
  gboolean have_seq;
  gint64 highest;               /* unwrapped */
  LegbaBweSeenEntry entries[LEGBA_BWE_SEEN];
} LegbaBweSeen;

LegbaBweSeenNews legba_bwe_seen_take (LegbaBweSeen * s, guint seq,
    gboolean lost, gint64 * unwrapped);

typedef struct
{
  gboolean valid;
  gint64 first_send;
  gint64 last_send;
  gint64 first_arrival;
  gint64 last_arrival;
} LegbaBweGroup;

typedef struct
{
  LegbaBweGroup current;
  LegbaBweGroup previous;
  guint reversed;               /* groups in a row that arrived earlier */

  gboolean have_origin;
  gint64 origin_arrival;        /* x = 0 of the regression */
  gdouble accumulated_ms;
  gdouble smoothed_ms;
  gdouble x[LEGBA_BWE_TREND_WINDOW];
  gdouble y[LEGBA_BWE_TREND_WINDOW];
  guint count;                  /* points in x, y (a ring) */
  guint head;
  guint num_deltas;
  gdouble trend;

  /* the smallest one-way delay (arrival - send, the clocks' offset
   * included) of each of the last LEGBA_BWE_BASE_BUCKETS seconds */
  gint64 base[LEGBA_BWE_BASE_BUCKETS];
  guint n_base;
  gint64 bucket_start;          /* arrival time */
  gint64 last_delay;
  gint64 queue_us;              /* the last group's delay over the base */
} LegbaBweTrendline;

/* A group completed: what the detector needs. */
typedef struct
{
  gdouble send_delta_ms;
  gint64 arrival_us;
} LegbaBweDelta;

void legba_bwe_trendline_reset (LegbaBweTrendline * t);
gboolean legba_bwe_trendline_add (LegbaBweTrendline * t, gint64 send_us,
    gint64 arrival_us, LegbaBweDelta * delta);
void legba_bwe_trendline_rebase (LegbaBweTrendline * t);

typedef struct
{
  gdouble threshold;
  gboolean have_update;
  gint64 last_update;           /* arrival time, receiver's clock */
  gdouble time_over_using;      /* ms, < 0 when not over */
  guint overuse_count;
  gdouble prev_trend;
  gdouble modified_trend;
  LegbaBweUsage usage;
} LegbaBweOveruse;

void legba_bwe_overuse_init (LegbaBweOveruse * o);
LegbaBweUsage legba_bwe_overuse_detect (LegbaBweOveruse * o, gdouble trend,
    guint num_deltas, const LegbaBweDelta * delta);

#define LEGBA_BWE_ACKED_RING 4096
#define LEGBA_BWE_ACKED_HOLES 16

typedef struct
{
  gint64 arrival;
  guint size;
} LegbaBweAckedPacket;

typedef struct
{
  /* the packets of the last second of arrival time, a ring */
  LegbaBweAckedPacket ring[LEGBA_BWE_ACKED_RING];
  guint head;
  guint count;
  guint64 bytes;
  gint64 start;                 /* the first arrival since a reset */
  /* spans whose packets no report covered (a report was lost) */
  gint64 holes[LEGBA_BWE_ACKED_HOLES][2];
  guint n_holes;
  /* short windows, for a fall of the link */
  gint64 window_start;
  guint64 window_bytes;
  gdouble windows_kbps[3];      /* the last three */
  guint n_windows;
} LegbaBweAcked;

void legba_bwe_acked_init (LegbaBweAcked * a);
void legba_bwe_acked_add (LegbaBweAcked * a, gint64 arrival_us, guint size,
    gboolean after_gap);
guint legba_bwe_acked_bps (const LegbaBweAcked * a);
guint legba_bwe_acked_recent_bps (const LegbaBweAcked * a);

typedef struct
{
  gdouble rate;
  gdouble min_rate;
  gdouble max_rate;
  LegbaBweRateState state;
  gint64 last_change;           /* now_us of the last update */
  gint64 last_decrease;
  gint64 ramp_since;             /* the increase without a capacity began */
  gboolean have_change;
  gboolean have_decrease;
  gboolean overusing;            /* since the last decrease */
  /* the link capacity: a running mean of the acknowledged bitrate at
   * overuse, kbit/s, and its normalised variance */
  gboolean have_capacity;
  gdouble capacity_kbps;
  gdouble deviation;
  gboolean above;               /* the acknowledged bitrate over the bound */
  gint64 above_since;
  guint below;                  /* overuses in a row under the bound */
  /* the capacity the link had before it shrank, kbit/s (0: none), and,
   * once it has grown back past the estimate of the dip, the rate the
   * recovery ramps to at RAMP_RECOVER, bit/s (0: none) */
  gdouble prior_kbps;
  gint64 shrunk_at;             /* when the link was seen to shrink */
  gboolean probing;             /* the last update asked for padding */
  gdouble recover_to;
  gboolean recovering;           /* since recovered_at, until an overuse */
  gint64 recovered_at;
  gdouble peak_bps;             /* the highest acknowledged bitrate, fading */
} LegbaBweAimd;

void legba_bwe_aimd_init (LegbaBweAimd * r, gdouble start, gdouble min,
    gdouble max);
/* What a feedback report tells the rate control. */
typedef struct
{
  LegbaBweUsage usage;
  guint acked_bps;              /* 0 while unknown */
  guint recent_bps;             /* legba_bwe_acked_recent_bps() */
  gdouble loss;                 /* the last loss fraction */
  gint64 rtt_us;
  gint64 queue_us;              /* the queueing delay, the trendline's */
} LegbaBweSignals;

void legba_bwe_aimd_update (LegbaBweAimd * r, const LegbaBweSignals * in,
    gint64 now_us);
void legba_bwe_aimd_fallback (LegbaBweAimd * r, gdouble factor,
    gint64 now_us);
void legba_bwe_aimd_set_max (LegbaBweAimd * r, gdouble max);
gdouble legba_bwe_aimd_probe (const LegbaBweAimd * r);

typedef struct
{
  gdouble bound;
  gdouble min_rate;
  gdouble max_rate;
  gboolean have_interval;
  gint64 interval_start;        /* now_us */
  guint expected;
  guint lost;
  gdouble fraction;
  gint64 last_update;
} LegbaBweLoss;

void legba_bwe_loss_init (LegbaBweLoss * l, gdouble min, gdouble max);
void legba_bwe_loss_count (LegbaBweLoss * l, guint expected, gint lost);
void legba_bwe_loss_update (LegbaBweLoss * l, gdouble target, gint64 now_us);
void legba_bwe_loss_set_max (LegbaBweLoss * l, gdouble max);

G_END_DECLS
