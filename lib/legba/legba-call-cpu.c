/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The CPU time of one local track: the thread that feeds its encoder (the
 * track's streaming thread: source, conversion, encoder) and the threads
 * named as it is (an encoder's own threads, such as x264's, are started
 * from it and inherit its name), read per thread from the kernel. Linux
 * only; elsewhere no figure is given.
 */
#ifdef __linux__
#define _GNU_SOURCE
#endif
#include "legba-call-private.h"

#ifdef __linux__
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#endif

struct _LegbaTrackCpu
{
  GMutex lock;
  gint tid;                     /* (lock) the thread seen last, 0 none */
  char *name;                   /* (lock) its name */
  GHashTable *last;             /* tid -> CPU ns at the last sample */
  gboolean have_baseline;
};

LegbaTrackCpu *
legba_track_cpu_new (void)
{
  LegbaTrackCpu *cpu = g_new0 (LegbaTrackCpu, 1);

  g_mutex_init (&cpu->lock);
  cpu->last = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  return cpu;
}

void
legba_track_cpu_free (LegbaTrackCpu * cpu)
{
  if (cpu == NULL)
    return;
  g_hash_table_unref (cpu->last);
  g_free (cpu->name);
  g_mutex_clear (&cpu->lock);
  g_free (cpu);
}

/* On the thread that gives the encoder a buffer. */
void
legba_track_cpu_note_thread (LegbaTrackCpu * cpu)
{
#ifdef __linux__
  gint tid = gettid ();
  char name[16] = "";

  if (g_atomic_int_get (&cpu->tid) == tid)
    return;
  prctl (PR_GET_NAME, name);
  g_mutex_lock (&cpu->lock);
  g_atomic_int_set (&cpu->tid, tid);
  g_free (cpu->name);
  cpu->name = g_strdup (name);
  cpu->have_baseline = FALSE;
  g_mutex_unlock (&cpu->lock);
#endif
}

#ifdef __linux__
/* The CPU time of a thread of this process, as pthread_getcpuclockid()
 * names its clock (the kernel's per-thread scheduler clock). */
static gboolean
thread_cpu_ns (gint tid, guint64 * ns)
{
  clockid_t clock = (clockid_t) ((~(guint) tid) << 3) | 6;
  struct timespec ts;

  if (clock_gettime (clock, &ts) != 0)
    return FALSE;
  *ns = (guint64) ts.tv_sec * G_GUINT64_CONSTANT (1000000000) + ts.tv_nsec;
  return TRUE;
}

static gboolean
thread_named (const char *tid, const char *name)
{
  g_autofree char *path = g_strdup_printf ("/proc/self/task/%s/comm", tid);
  g_autofree char *comm = NULL;

  if (!g_file_get_contents (path, &comm, NULL, NULL))
    return FALSE;
  g_strchomp (comm);
  return g_str_equal (comm, name);
}
#endif

/* The CPU time the track's threads used since the last call, in ns.
 * FALSE while no thread is known yet, and on the first call after one is
 * (that call takes the baseline). */
gboolean
legba_track_cpu_sample (LegbaTrackCpu * cpu, guint64 * used_ns)
{
#ifdef __linux__
  g_autoptr (GHashTable) now = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  g_autofree char *name = NULL;
  GDir *dir;
  const char *entry;
  gboolean had_baseline;
  gint tid;
  guint64 used = 0;

  g_mutex_lock (&cpu->lock);
  tid = cpu->tid;
  name = g_strdup (cpu->name);
  had_baseline = cpu->have_baseline;
  cpu->have_baseline = tid != 0;
  g_mutex_unlock (&cpu->lock);
  if (tid == 0 || (dir = g_dir_open ("/proc/self/task", 0, NULL)) == NULL)
    return FALSE;
  while ((entry = g_dir_read_name (dir)) != NULL) {
    gint other = atoi (entry);
    guint64 ns, *last;

    if (other <= 0 || (other != tid && !thread_named (entry, name)) ||
        !thread_cpu_ns (other, &ns))
      continue;
    last = g_hash_table_lookup (cpu->last, GINT_TO_POINTER (other));
    /* a thread started since the last sample counts from its start */
    used += last != NULL && ns >= *last ? ns - *last : last ? 0 : ns;
    g_hash_table_insert (now, GINT_TO_POINTER (other),
        g_memdup2 (&ns, sizeof ns));
  }
  g_dir_close (dir);
  g_hash_table_unref (cpu->last);
  cpu->last = g_steal_pointer (&now);
  if (!had_baseline)
    return FALSE;
  *used_ns = used;
  return TRUE;
#else
  return FALSE;
#endif
}
