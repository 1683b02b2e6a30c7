/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-bench: CPU time of the process and its threads, and the
 * conditions of a run, read from the kernel (getrusage, /proc).
 */
#include "bench.h"

#include <legba/legba.h>

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

/* Another process counts as busy when it used this share of one CPU over
 * the run. */
#define BUSY_PERCENT 5.0

/* ---- /proc ---- */

static char *
read_text (const char *path)
{
  char *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  return text;
}

/* Fields 14 and 15 of /proc/.../stat (utime and stime, in clock ticks),
 * and the command name in parentheses (it may hold spaces and ')'). */
static gboolean
parse_stat (const char *stat, char **comm, gint64 * ticks)
{
  const char *open = strchr (stat, '(');
  const char *close = strrchr (stat, ')');
  g_auto (GStrv) fields = NULL;

  if (open == NULL || close == NULL || close < open)
    return FALSE;
  /* after ") ": field 3 (state) is fields[0] */
  fields = g_strsplit (close + 2, " ", 0);
  if (g_strv_length (fields) < 13)
    return FALSE;
  if (comm != NULL)
    *comm = g_strndup (open + 1, close - open - 1);
  *ticks = g_ascii_strtoll (fields[11], NULL, 10) +
      g_ascii_strtoll (fields[12], NULL, 10);
  return TRUE;
}

static gint64
ticks_to_ns (gint64 ticks)
{
  return ticks * (G_GINT64_CONSTANT (1000000000) / sysconf (_SC_CLK_TCK));
}

/* A thread's CPU time: schedstat's run time in nanoseconds where the
 * kernel keeps it, else stat's clock ticks. */
static gboolean
read_thread (const char *tid, BenchThread * thread)
{
  g_autofree char *stat_path = g_strdup_printf ("/proc/self/task/%s/stat",
      tid);
  g_autofree char *sched_path =
      g_strdup_printf ("/proc/self/task/%s/schedstat", tid);
  g_autofree char *stat = read_text (stat_path);
  g_autofree char *sched = NULL;
  char *comm = NULL;
  gint64 ticks;

  if (stat == NULL || !parse_stat (stat, &comm, &ticks))
    return FALSE;
  sched = read_text (sched_path);
  thread->name = comm;
  thread->cpu_ns = sched != NULL ? g_ascii_strtoll (sched, NULL, 10) :
      ticks_to_ns (ticks);
  return TRUE;
}

static void
bench_thread_free (gpointer data)
{
  BenchThread *thread = data;

  g_free (thread->name);
  g_free (thread);
}

static GMutex tasks_lock;
static GHashTable *tasks;       /* tid -> GStreamer task name */

/* Called from a streaming thread as it starts its task. */
void
bench_cpu_name_this_thread (const char *task)
{
  int tid = syscall (SYS_gettid);

  g_mutex_lock (&tasks_lock);
  if (tasks == NULL)
    tasks = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  g_hash_table_replace (tasks, GINT_TO_POINTER (tid), g_strdup (task));
  g_mutex_unlock (&tasks_lock);
}

static char *
task_of (int tid)
{
  char *task = NULL;

  g_mutex_lock (&tasks_lock);
  if (tasks != NULL)
    task = g_strdup (g_hash_table_lookup (tasks, GINT_TO_POINTER (tid)));
  g_mutex_unlock (&tasks_lock);
  return task;
}

void
bench_cpu_take (BenchCpu * cpu)
{
  struct rusage usage;
  g_autoptr (GDir) dir = NULL;
  const char *tid;

  memset (cpu, 0, sizeof (*cpu));
  cpu->wall_us = g_get_monotonic_time ();
  cpu->threads = g_hash_table_new_full (NULL, NULL, NULL, bench_thread_free);
  dir = g_dir_open ("/proc/self/task", 0, NULL);
  while (dir != NULL && (tid = g_dir_read_name (dir)) != NULL) {
    BenchThread thread;

    if (read_thread (tid, &thread))
      g_hash_table_insert (cpu->threads,
          GINT_TO_POINTER (atoi (tid)), g_memdup2 (&thread, sizeof (thread)));
  }
  getrusage (RUSAGE_SELF, &usage);
  cpu->user_us =
      usage.ru_utime.tv_sec * G_USEC_PER_SEC + usage.ru_utime.tv_usec;
  cpu->system_us =
      usage.ru_stime.tv_sec * G_USEC_PER_SEC + usage.ru_stime.tv_usec;
}

void
bench_cpu_clear (BenchCpu * cpu)
{
  g_clear_pointer (&cpu->threads, g_hash_table_unref);
}

typedef struct
{
  int tid;
  const char *name;
  gint64 cpu_ns;
} ThreadDelta;

static gint
by_cpu_desc (gconstpointer a, gconstpointer b)
{
  const ThreadDelta *x = a, *y = b;

  return x->cpu_ns < y->cpu_ns ? 1 : x->cpu_ns > y->cpu_ns ? -1 : 0;
}

static void
add_thread (JsonBuilder * b, int tid, const char *name, gint64 cpu_ns,
    guint64 frames, const char *process)
{
  g_autofree char *task = task_of (tid);

  json_builder_begin_object (b);
  if (process != NULL) {
    json_builder_set_member_name (b, "process");
    json_builder_add_string_value (b, process);
  }
  json_builder_set_member_name (b, "tid");
  json_builder_add_int_value (b, tid);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, name);
  json_builder_set_member_name (b, "task");
  if (task != NULL)
    json_builder_add_string_value (b, task);
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "cpu_ms");
  json_builder_add_double_value (b, cpu_ns / 1e6);
  json_builder_set_member_name (b, "cpu_ms_per_frame");
  json_builder_add_double_value (b, frames > 0 ? cpu_ns / 1e6 / frames : 0);
  json_builder_end_object (b);
}

void
bench_cpu_add_threads (JsonBuilder * builder, const BenchCpu * start,
    const BenchCpu * end, guint64 frames, const char *process)
{
  g_autoptr (GArray) deltas = g_array_new (FALSE, FALSE, sizeof (ThreadDelta));
  gint64 process_ns = (end->user_us + end->system_us - start->user_us -
      start->system_us) * 1000, listed_ns = 0;
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_iter_init (&iter, end->threads);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    const BenchThread *now = value;
    const BenchThread *then = g_hash_table_lookup (start->threads, key);
    ThreadDelta d = { GPOINTER_TO_INT (key), now->name,
      now->cpu_ns - (then != NULL ? then->cpu_ns : 0)
    };

    if (d.cpu_ns <= 0)
      continue;
    listed_ns += d.cpu_ns;
    g_array_append_val (deltas, d);
  }
  g_array_sort (deltas, by_cpu_desc);
  for (guint i = 0; i < deltas->len; i++) {
    ThreadDelta *d = &g_array_index (deltas, ThreadDelta, i);

    add_thread (builder, d->tid, d->name, d->cpu_ns, frames, process);
  }
  /* threads that ended before the end of the window (the process total
   * counts them; /proc no longer lists them); scheduler and rusage
   * accounting differ by a few ticks, so small differences are noise */
  if (process_ns - listed_ns > 20 * 1000000)
    add_thread (builder, 0, "(ended threads)", process_ns - listed_ns, frames,
        process);
}

/* ---- conditions ---- */

struct _BenchConditions
{
  char *command;
  char *date;
  gint64 start_us, end_us;
  double load_start[3], load_end[3];
  GHashTable *procs_start;      /* pid -> ticks */
  GHashTable *procs_end;
  GHashTable *comms;            /* pid -> command name */
  GHashTable *excluded;         /* pids of this run */
};

static void
scan_processes (BenchConditions * c, GHashTable * ticks_by_pid)
{
  g_autoptr (GDir) dir = g_dir_open ("/proc", 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL) {
    g_autofree char *path = NULL;
    g_autofree char *stat = NULL;
    char *comm = NULL;
    gint64 ticks;

    if (!g_ascii_isdigit (name[0]))
      continue;
    path = g_build_filename ("/proc", name, "stat", NULL);
    stat = read_text (path);
    if (stat == NULL || !parse_stat (stat, &comm, &ticks))
      continue;
    g_hash_table_insert (ticks_by_pid, GINT_TO_POINTER (atoi (name)),
        g_memdup2 (&ticks, sizeof (ticks)));
    g_hash_table_replace (c->comms, GINT_TO_POINTER (atoi (name)), comm);
  }
}

static char *
shell_join (int argc, char **argv)
{
  GString *s = g_string_new (NULL);

  for (int i = 0; i < argc; i++) {
    g_autofree char *quoted = g_shell_quote (argv[i]);
    gboolean plain = argv[i][0] != '\0'
        && strspn (argv[i], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
        "TUVWXYZ0123456789-_=.,/:+@%") == strlen (argv[i]);

    if (i > 0)
      g_string_append_c (s, ' ');
    g_string_append (s, plain ? argv[i] : quoted);
  }
  return g_string_free (s, FALSE);
}

BenchConditions *
bench_conditions_start (int argc, char **argv)
{
  BenchConditions *c = g_new0 (BenchConditions, 1);
  g_autoptr (GDateTime) now = g_date_time_new_now_utc ();

  c->command = shell_join (argc, argv);
  c->date = g_date_time_format_iso8601 (now);
  c->procs_start = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  c->procs_end = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  c->comms = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  c->excluded = g_hash_table_new (NULL, NULL);
  g_hash_table_add (c->excluded, GINT_TO_POINTER (getpid ()));
  if (getloadavg (c->load_start, 3) != 3)
    c->load_start[0] = c->load_start[1] = c->load_start[2] = -1;
  scan_processes (c, c->procs_start);
  c->start_us = g_get_monotonic_time ();
  return c;
}

void
bench_conditions_end (BenchConditions * c)
{
  c->end_us = g_get_monotonic_time ();
  if (getloadavg (c->load_end, 3) != 3)
    c->load_end[0] = c->load_end[1] = c->load_end[2] = -1;
  scan_processes (c, c->procs_end);
}

void
bench_conditions_exclude_pid (BenchConditions * c, GPid pid)
{
  g_hash_table_add (c->excluded, GINT_TO_POINTER (pid));
}

void
bench_conditions_free (BenchConditions * c)
{
  if (c == NULL)
    return;
  g_free (c->command);
  g_free (c->date);
  g_hash_table_unref (c->procs_start);
  g_hash_table_unref (c->procs_end);
  g_hash_table_unref (c->comms);
  g_hash_table_unref (c->excluded);
  g_free (c);
}

static char *
cpu_model (void)
{
  g_autofree char *info = read_text ("/proc/cpuinfo");
  g_auto (GStrv) lines = NULL;

  if (info == NULL)
    return g_strdup ("unknown");
  lines = g_strsplit (info, "\n", 0);
  for (guint i = 0; lines[i] != NULL; i++) {
    const char *colon = strchr (lines[i], ':');

    if (g_str_has_prefix (lines[i], "model name") && colon != NULL)
      return g_strstrip (g_strdup (colon + 1));
  }
  return g_strdup ("unknown");
}

static char *
kernel (void)
{
  struct utsname u;

  if (uname (&u) != 0)
    return g_strdup ("unknown");
  return g_strdup_printf ("%s %s %s %s", u.sysname, u.release, u.version,
      u.machine);
}

typedef struct
{
  int pid;
  const char *comm;
  double percent;
} Busy;

static gint
by_percent_desc (gconstpointer a, gconstpointer b)
{
  const Busy *x = a, *y = b;

  return x->percent < y->percent ? 1 : x->percent > y->percent ? -1 : 0;
}

/* Other processes that used at least BUSY_PERCENT of a CPU during the run
 * (CPU time over wall time), the busiest first. */
static GArray *
busy_processes (BenchConditions * c)
{
  GArray *busy = g_array_new (FALSE, FALSE, sizeof (Busy));
  double wall_s = (c->end_us - c->start_us) / 1e6;
  GHashTableIter iter;
  gpointer key, value;

  if (wall_s <= 0)
    return busy;
  g_hash_table_iter_init (&iter, c->procs_end);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    const gint64 *then = g_hash_table_lookup (c->procs_start, key);
    Busy b = { GPOINTER_TO_INT (key), g_hash_table_lookup (c->comms, key), 0 };

    if (g_hash_table_contains (c->excluded, key))
      continue;
    b.percent = ticks_to_ns (*(gint64 *) value - (then ? *then : 0)) / 1e9 /
        wall_s * 100;
    if (b.percent >= BUSY_PERCENT)
      g_array_append_val (busy, b);
  }
  g_array_sort (busy, by_percent_desc);
  return busy;
}

static void
add_load (JsonBuilder * b, const char *name, const double load[3])
{
  json_builder_set_member_name (b, name);
  json_builder_begin_array (b);
  for (int i = 0; i < 3; i++)
    json_builder_add_double_value (b, load[i]);
  json_builder_end_array (b);
}

static void
add_string (JsonBuilder * b, const char *name, const char *value)
{
  json_builder_set_member_name (b, name);
  json_builder_add_string_value (b, value);
}

/* Adds the member "conditions" to the object being built. */
void
bench_conditions_add (BenchConditions * c, JsonBuilder * b)
{
  g_autofree char *model = cpu_model ();
  g_autofree char *uname = kernel ();
  g_autofree char *gst = gst_version_string ();
  g_autoptr (GArray) busy = busy_processes (c);

  json_builder_set_member_name (b, "conditions");
  json_builder_begin_object (b);
  add_string (b, "date", c->date);
  add_string (b, "command", c->command);
  add_string (b, "cpu_model", model);
  json_builder_set_member_name (b, "cpu_count");
  json_builder_add_int_value (b, g_get_num_processors ());
  add_string (b, "kernel", uname);
  add_load (b, "load_average_start", c->load_start);
  add_load (b, "load_average_end", c->load_end);
  add_string (b, "gstreamer", gst);
  add_string (b, "legba_version", LEGBA_VERSION);
  add_string (b, "legba_build_type", LEGBA_BUILD_TYPE);
  json_builder_set_member_name (b, "legba_sanitized");
  json_builder_add_boolean_value (b, LEGBA_BUILD_SANITIZED);
  json_builder_set_member_name (b, "busy_processes");
  json_builder_begin_array (b);
  for (guint i = 0; i < busy->len; i++) {
    Busy *p = &g_array_index (busy, Busy, i);

    json_builder_begin_object (b);
    json_builder_set_member_name (b, "pid");
    json_builder_add_int_value (b, p->pid);
    add_string (b, "name", p->comm);
    json_builder_set_member_name (b, "cpu_percent");
    json_builder_add_double_value (b, p->percent);
    json_builder_end_object (b);
  }
  json_builder_end_array (b);
  json_builder_end_object (b);
}

void
bench_conditions_print (BenchConditions * c)
{
  g_autofree char *model = cpu_model ();
  g_autofree char *uname = kernel ();
  g_autofree char *gst = gst_version_string ();
  g_autoptr (GArray) busy = busy_processes (c);

  g_print ("conditions  %s x %u; %s\n", model, g_get_num_processors (), uname);
  g_print ("            load average %.2f %.2f %.2f at start, "
      "%.2f %.2f %.2f at end\n", c->load_start[0], c->load_start[1],
      c->load_start[2], c->load_end[0], c->load_end[1], c->load_end[2]);
  g_print ("            %s; Legba %s, %s build%s\n", gst, LEGBA_VERSION,
      LEGBA_BUILD_TYPE, LEGBA_BUILD_SANITIZED ? " with sanitizers" : "");
  for (guint i = 0; i < busy->len && i < 5; i++) {
    Busy *p = &g_array_index (busy, Busy, i);

    g_print ("            busy meanwhile: %s (pid %d) %.0f%% of a CPU\n",
        p->comm, p->pid, p->percent);
  }
  g_print ("            %s\n", c->date);
}
