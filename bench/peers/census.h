/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Where a process's file descriptors and threads go, for the pairs mode of
 * the C peers: open files by kind and threads by name, taken from /proc,
 * so the difference between two counts says what each pair adds.
 *
 * A descriptor's kind is what /proc/self/fd/N links to: a socket is named
 * by its protocol (udp, tcp, unix, netlink, from the tables of /proc/self/net; tcp
 * with its state, listening or established), an
 * anonymous inode by its type (eventfd, timerfd, eventpoll), a pipe as
 * "pipe", a file by its path. A thread's kind is its name
 * (/proc/self/task/T/comm) with every run of digits folded to "#" and,
 * after a numbered element's name, the pad's name left out, so
 * "nicesrc12:src" counts as "nicesrc#:".
 *
 * Also the process's clock, CPU time and memory, as every mode of the C
 * peers reads them, the pairs mode's bus messages dropped, and the mesh
 * mode's count of what its encoder puts out.
 */
#ifndef LEGBA_BENCH_CENSUS_H
#define LEGBA_BENCH_CENSUS_H

#include <glib.h>
#include <gst/gst.h>

typedef struct
{
  GHashTable *fds;              /* kind -> count */
  GHashTable *threads;          /* folded name -> count */
} Census;

void census_take (Census * c);
void census_clear (Census * c);

/* Ends a pairs result: the census (when a pair connected) and the closing
 * brace, printed as one line; frees @out and the two censuses. */
void census_print_result (GString * out, Census * before, Census * first,
    guint connected);

/* ---- Room for one more pair ---- */

typedef struct
{
  guint pairs;                  /* connected so far */
  guint fds0, threads0, maps0;  /* before the first pair */
  guint skip;                   /* pairs before the next count */
} CensusHeadroom;

/* Raises the open-files soft limit to the hard limit. */
void census_raise_fd_limit (void);

/* the entries of a folder of /proc, as /proc/self/fd */
guint census_count_entries (const char *path);

void census_headroom_init (CensusHeadroom * h);

/* NULL when one more pair fits in this process and on this machine, else
 * why not (a static string) */
const char *census_no_room (CensusHeadroom * h);

/* ---- The process's clock, CPU time and memory ---- */

double now_ms (void);
double cpu_s (void);
double rss_kib (void);

/* malloc's bytes in use, every arena, mmapped blocks included */
double heap_kib (void);

/* "name": [values] (doubles) in JSON */
void print_series (GString * out, const char *name, GArray * values);

/* The pairs mode's pipelines drop their bus messages (those queued so far
 * and those to come). */
void census_drop_bus_messages (GstElement * pipeline);

/* counts what the encoder named "enc" in line puts out; the counts, of
 * every encoder counted so far, are read with the two functions after */
void census_count_encoder (GstElement * line);
gint census_encoded_frames (void);
gint census_encoded_key_frames (void);

/* The bulk mode's result line, alike for every peer (bench/suites.py
 * reads it). */
void print_bulk (const char *peer, guint64 sent, guint64 received,
    gsize size, double ms, double cpu, gboolean complete);

#endif
