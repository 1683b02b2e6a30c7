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
#include <legba/call/legba-call-private.h>

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

/* The name of a thread of this process; NULL when it is gone. */
static char *
thread_name (const char *tid)
{
  g_autofree char *path = g_strdup_printf ("/proc/self/task/%s/comm", tid);
  char *comm = NULL;

  if (!g_file_get_contents (path, &comm, NULL, NULL))
    return NULL;
  return g_strchomp (comm);
}
#endif

/* The CPU time each track's threads used since the last call, in ns, in
 * one walk of the process's threads (each thread's name read once):
 * sampled[k] is FALSE while track k knows no thread yet, and on the first
 * call after it does (that call takes the baseline); NULL entries are
 * skipped. */
void
legba_track_cpu_sample (LegbaTrackCpu * const *cpus, guint n,
    gboolean * sampled, guint64 * used_ns)
{
#ifdef __linux__
  g_autofree gint *tids = g_new0 (gint, n);
  g_auto (GStrv) names = g_new0 (char *, n + 1);
  g_autofree GHashTable **now = g_new0 (GHashTable *, n);
  gboolean any = FALSE;
  GDir *dir;
  const char *entry;

  for (guint k = 0; k < n; k++) {
    sampled[k] = FALSE;
    used_ns[k] = 0;
    if (cpus[k] == NULL) {
      names[k] = g_strdup ("");
      continue;
    }
    g_mutex_lock (&cpus[k]->lock);
    tids[k] = cpus[k]->tid;
    names[k] = g_strdup (cpus[k]->name ? cpus[k]->name : "");
    sampled[k] = cpus[k]->have_baseline;
    cpus[k]->have_baseline = tids[k] != 0;
    g_mutex_unlock (&cpus[k]->lock);
    now[k] = g_hash_table_new_full (NULL, NULL, NULL, g_free);
    any |= tids[k] != 0;
  }
  dir = any ? g_dir_open ("/proc/self/task", 0, NULL) : NULL;
  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL) {
    gint tid = atoi (entry);
    g_autofree char *name = thread_name (entry);
    guint64 ns, *last;

    if (tid <= 0 || name == NULL || !thread_cpu_ns (tid, &ns))
      continue;
    for (guint k = 0; k < n; k++) {
      if (tids[k] == 0 || (tid != tids[k] && !g_str_equal (name, names[k])))
        continue;
      last = g_hash_table_lookup (cpus[k]->last, GINT_TO_POINTER (tid));
      /* a thread started since the last sample counts from its start */
      used_ns[k] += last == NULL ? ns : ns >= *last ? ns - *last : 0;
      g_hash_table_insert (now[k], GINT_TO_POINTER (tid),
          g_memdup2 (&ns, sizeof ns));
    }
  }
  g_clear_pointer (&dir, g_dir_close);
  for (guint k = 0; k < n; k++) {
    if (cpus[k] == NULL)
      continue;
    g_hash_table_unref (cpus[k]->last);
    cpus[k]->last = now[k];
    sampled[k] = sampled[k] && tids[k] != 0;
  }
#else
  for (guint k = 0; k < n; k++)
    sampled[k] = FALSE;
#endif
}
