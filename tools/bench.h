/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-bench's measuring parts: CPU time of the process and of each of
 * its threads, CPU time of each element (a GStreamer tracer), and the
 * conditions of a run (docs/benchmarks.md, "Runs": every result records
 * its conditions).
 */
#pragma once

#include <gst/gst.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* ---- CPU time ---- */

typedef struct
{
  gint64 wall_us;               /* CLOCK_MONOTONIC */
  gint64 user_us;               /* getrusage (RUSAGE_SELF) */
  gint64 system_us;
  GHashTable *threads;          /* tid -> BenchThread, threads alive */
} BenchCpu;

typedef struct
{
  char *name;
  gint64 cpu_ns;
} BenchThread;

void bench_cpu_take (BenchCpu * cpu);
void bench_cpu_name_this_thread (const char *task);
void bench_cpu_clear (BenchCpu * cpu);

/* Adds to builder (inside an array) one object per thread that ran
 * between start and end: tid, name (the kernel's, 15 characters, which
 * threads a library starts inherit from the thread starting them), task
 * (the GStreamer streaming task the thread runs, when it runs one),
 * cpu_ms and cpu_ms_per_frame, the busiest first; the CPU time of threads
 * that ended in between, which only the process total shows, as one
 * entry named "(ended threads)". With process, each entry says which
 * process it is ("send", "recv"). */
void bench_cpu_add_threads (JsonBuilder * builder, const BenchCpu * start,
    const BenchCpu * end, guint64 frames, const char *process);

/* ---- CPU time per element ---- */

typedef struct
{
  char *name;
  char *factory;
  gint64 cpu_ns;
} BenchElementCpu;

void bench_tracer_install (void);
void bench_tracer_open (void);
GPtrArray *bench_tracer_close (void);

/* ---- conditions ---- */

typedef struct _BenchConditions BenchConditions;

BenchConditions *bench_conditions_start (int argc, char **argv);
void bench_conditions_end (BenchConditions * conditions);
void bench_conditions_exclude_pid (BenchConditions * conditions, GPid pid);
void bench_conditions_add (BenchConditions * conditions,
    JsonBuilder * builder);
void bench_conditions_print (BenchConditions * conditions);
void bench_conditions_free (BenchConditions * conditions);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BenchConditions, bench_conditions_free)

G_END_DECLS
