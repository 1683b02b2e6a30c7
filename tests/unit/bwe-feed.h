/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A stream of transport-wide feedback reports for LegbaBwe's tests: a
 * 1,200-byte packet every 5 ms (1.92 Mbit/s) that arrives 20 ms after it
 * was sent, without a queue (the stream does not follow the target),
 * reported every 100 ms, with a tick between reports and the round trip
 * each second. A test spoils each report its own way before the estimator
 * sees it, and every target is checked within [min, max].
 */
#pragma once

#include <legba/room/legba-bwe.h>

#define MS ((gint64) 1000)
#define S ((gint64) 1000000)
#define MIN_BPS 50000
#define START_BPS 300000
#define MAX_BPS 2000000
#define PACKET_US (5 * MS)
#define REPORT_US (100 * MS)
#define PER_REPORT (REPORT_US / PACKET_US)
#define STREAM_BPS (1200 * 8 * (S / PACKET_US))

typedef struct
{
  LegbaBwe *bwe;
  gint64 now;
  guint seq;
  GRand *rand;
} Feed;

/* Changes the report p of *n packets; p has room for 4 * PER_REPORT. */
typedef void (*Spoil) (Feed * f, LegbaBwePacket * p, guint * n);

void feed_init (Feed * f);
void feed_clear (Feed * f);
void check_bounds (Feed * f);
void feed_run (Feed * f, gint64 until_us, Spoil spoil);
LegbaBweState feed_state (Feed * f);
