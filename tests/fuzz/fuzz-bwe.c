/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * libFuzzer target: LegbaBwe (docs/congestion-control.md) fed arbitrary
 * feedback. The input is 12 bytes of configuration (min, start and max
 * bits per second, 32 bits each, little-endian), then records of 16 bytes
 * (RECORD), by the low two bits of their first byte:
 *
 *   0  a packet for the current report: sequence number (bytes 1-2), send
 *      time advanced by bytes 3-4 (signed) x 100 us, arrival time the send
 *      time plus bytes 5-8 (signed) us, size (bytes 9-10); flags (byte
 *      11): 1 lost, 2 arrival moved by bytes 12-15 (signed) << 20 us,
 *      4 send time replaced by bytes 12-15 (signed) << 24 us
 *   1  the report goes to the estimator, bytes 1-2 ms later
 *   2  a tick, the clock moved by bytes 1-2 (signed) ms
 *   3  a round trip of bytes 5-8 (signed) us; with flag 1, a ceiling of
 *      bytes 12-15 bits per second
 *
 * What must hold, or the target aborts: after every call the target is
 * within [min, max] as the estimator clamps them (min at least 1, max at
 * least min).
 */
#include <legba/room/legba-bwe.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG 12
#define RECORD 16
#define MAX_REPORT 512

typedef struct
{
  LegbaBwe *bwe;
  guint min;
  guint max;
  gint64 now;
  gint64 send;
  LegbaBwePacket report[MAX_REPORT];
  guint n;
} Harness;

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

static guint32
u32 (const uint8_t * p)
{
  return p[0] | p[1] << 8 | p[2] << 16 | (guint32) p[3] << 24;
}

static guint16
u16 (const uint8_t * p)
{
  return p[0] | p[1] << 8;
}

static void
check (Harness * h)
{
  guint target = legba_bwe_target (h->bwe);
  LegbaBweState state;

  legba_bwe_get_state (h->bwe, &state);
  if (target < h->min || target > h->max || state.target_bps != target)
    abort ();
}

static void
flush (Harness * h)
{
  legba_bwe_on_feedback (h->bwe, h->report, h->n, h->now);
  h->n = 0;
  check (h);
}

static void
packet (Harness * h, const uint8_t * r)
{
  LegbaBwePacket *p = &h->report[h->n++];
  gint64 raw = (gint32) u32 (r + 12);

  h->send += (gint16) u16 (r + 3) * 100;
  p->seq = u16 (r + 1);
  p->send_us = r[11] & 4 ? raw * ((gint64) 1 << 24) : h->send;
  p->arrival_us = p->send_us + (gint32) u32 (r + 5);
  if (r[11] & 2)
    p->arrival_us += raw * ((gint64) 1 << 20);
  if (r[11] & 1)
    p->arrival_us = LEGBA_BWE_LOST;
  p->size = u16 (r + 9);
  if (h->n == MAX_REPORT)
    flush (h);
}

static void
record (Harness * h, const uint8_t * r)
{
  switch (r[0] & 3) {
    case 0:
      packet (h, r);
      break;
    case 1:
      h->now += u16 (r + 1) * G_TIME_SPAN_MILLISECOND;
      flush (h);
      break;
    case 2:
      h->now += (gint16) u16 (r + 1) * G_TIME_SPAN_MILLISECOND;
      legba_bwe_on_tick (h->bwe, h->now);
      check (h);
      break;
    case 3:
      legba_bwe_on_rtt (h->bwe, (gint32) u32 (r + 5), h->now);
      if (r[11] & 1) {
        legba_bwe_set_max (h->bwe, u32 (r + 12));
        h->max = MAX (u32 (r + 12), h->min);
      }
      check (h);
      break;
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  LegbaBweConfig config;
  Harness h;

  if (size < CONFIG)
    return 0;
  memset (&h, 0, sizeof h);
  config.min_bps = u32 (data);
  config.start_bps = u32 (data + 4);
  config.max_bps = u32 (data + 8);
  h.min = MAX (config.min_bps, 1);
  h.max = MAX (config.max_bps, h.min);
  h.bwe = legba_bwe_new (&config);
  check (&h);
  for (size_t at = CONFIG; at + RECORD <= size; at += RECORD)
    record (&h, data + at);
  flush (&h);
  legba_bwe_free (h.bwe);
  return 0;
}
