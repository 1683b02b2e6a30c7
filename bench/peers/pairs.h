/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The pairs mode of the C peers: as many pairs as asked for, or as fit,
 * in one process, each kept up; then one line of JSON with what a pair
 * costs (RSS, heap, file descriptors, threads, and where the descriptors
 * and threads go: census.h). Each peer says how it makes, waits for and
 * frees a pair; the measuring and the result line are the same for all.
 */
#ifndef LEGBA_BENCH_PAIRS_H
#define LEGBA_BENCH_PAIRS_H

#include <gst/gst.h>

/* makes pair number @index; its pipeline, whose bus messages are
 * dropped, in @pipeline */
typedef gpointer (*PairsNewFunc) (guint index, GstElement ** pipeline);

/* TRUE once the pair is connected, FALSE if not within @seconds */
typedef gboolean (*PairsWaitFunc) (gpointer pair, guint seconds);

typedef struct
{
  const char *peer;             /* the result's "peer" */
  const char *includes;         /* (nullable) the result's "includes": what
                                 * a pair holds beside its two peers */
  gboolean no_teardown;         /* end the process with its pairs up */
  PairsNewFunc pair_new;
  PairsWaitFunc pair_wait;
  GDestroyNotify pair_free;
} PairsPeer;

/* Sets up to @count pairs, for at most @seconds, and prints the result.
 * 0 if a pair connected, else 1. */
int pairs_run (const PairsPeer * peer, guint count, double seconds);

#endif
