/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The census of a process for the C peers' pairs mode, and the clock,
 * CPU time and memory every mode reads (census.h).
 */
#include "census.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <malloc.h>
#include <stdio.h>
#include <sys/resource.h>

static void
census_add (GHashTable * table, const char *key)
{
  gpointer old = g_hash_table_lookup (table, key);

  g_hash_table_insert (table, g_strdup (key),
      GUINT_TO_POINTER (GPOINTER_TO_UINT (old) + 1));
}

/* socket inode -> protocol, from the tables of /proc/self/net */
static GHashTable *
census_socket_protocols (void)
{
  const char *tables[] = { "tcp", "tcp6", "udp", "udp6", "unix", "netlink",
    "raw", "raw6"
  };
  GHashTable *inodes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      NULL);

  for (guint t = 0; t < G_N_ELEMENTS (tables); t++) {
    g_autofree char *path = g_strdup_printf ("/proc/self/net/%s", tables[t]);
    g_autofree char *text = NULL;
    g_auto (GStrv) lines = NULL;
    /* the inode's column: 9 for tcp/udp/raw, 6 for unix, 8 for netlink */
    guint column = g_str_has_prefix (tables[t], "unix") ? 6 :
        g_str_has_prefix (tables[t], "netlink") ? 8 : 9;
    g_autofree char *bare = g_strdup (tables[t]);
    const char *protocol;

    if (g_str_has_suffix (bare, "6"))
      bare[strlen (bare) - 1] = '\0';
    protocol = g_intern_string (bare);
    if (!g_file_get_contents (path, &text, NULL, NULL))
      continue;
    lines = g_strsplit (text, "\n", -1);
    for (guint i = 1; lines[i] != NULL; i++) {
      g_auto (GStrv) cols = g_strsplit_set (g_strstrip (lines[i]), " \t", -1);
      const char *kind = protocol;
      guint k = 0;

      for (guint j = 0; cols[j] != NULL; j++) {
        if (cols[j][0] == '\0')
          continue;
        /* tcp: listening or connected, from the state column */
        if (k == 3 && strcmp (protocol, "tcp") == 0)
          kind = strcmp (cols[j], "0A") == 0 ? "tcp (listening)" :
              strcmp (cols[j], "01") == 0 ? "tcp (established)" :
              "tcp (other state)";
        if (k++ == column) {
          g_hash_table_insert (inodes, g_strdup (cols[j]), (gpointer) kind);
          break;
        }
      }
    }
  }
  return inodes;
}

static char *
census_fold_digits (const char *name)
{
  GString *out = g_string_new (NULL);
  const char *colon;

  for (const char *c = name; *c != '\0'; c++) {
    if (g_ascii_isdigit (*c)) {
      if (out->len == 0 || out->str[out->len - 1] != '#')
        g_string_append_c (out, '#');
    } else if (*c != '\n') {
      g_string_append_c (out, *c);
    }
  }
  /* the kernel keeps 15 bytes of a name: "rtprtxsend1000:src" is
   * "rtprtxsend1000:", so a numbered element's pad name is left out */
  if ((colon = strchr (out->str, ':')) != NULL &&
      memchr (out->str, '#', colon - out->str) != NULL)
    g_string_truncate (out, colon - out->str + 1);
  return g_string_free (out, FALSE);
}

void
census_take (Census * c)
{
  g_autoptr (GHashTable) inodes = census_socket_protocols ();
  DIR *d;
  struct dirent *e;

  c->fds = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  c->threads = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  if ((d = opendir ("/proc/self/fd")) != NULL) {
    int self = dirfd (d);

    while ((e = readdir (d)) != NULL) {
      char path[64], link[512];
      ssize_t n;

      if (e->d_name[0] == '.' || atoi (e->d_name) == self)
        continue;
      g_snprintf (path, sizeof path, "/proc/self/fd/%s", e->d_name);
      n = readlink (path, link, sizeof link - 1);
      if (n < 0)
        continue;
      link[n] = '\0';
      if (g_str_has_prefix (link, "socket:[")) {
        g_autofree char *inode = g_strndup (link + 8, strlen (link) - 9);
        const char *protocol = g_hash_table_lookup (inodes, inode);

        census_add (c->fds, protocol ? protocol : "socket (other)");
      } else if (g_str_has_prefix (link, "anon_inode:")) {
        const char *kind = link + 11;
        g_autofree char *bare = g_strdup (kind[0] == '[' ? kind + 1 : kind);

        if (bare[0] != '\0' && bare[strlen (bare) - 1] == ']')
          bare[strlen (bare) - 1] = '\0';
        census_add (c->fds, bare);
      } else if (g_str_has_prefix (link, "pipe:")) {
        census_add (c->fds, "pipe");
      } else {
        census_add (c->fds, link);
      }
    }
    closedir (d);
  }
  if ((d = opendir ("/proc/self/task")) != NULL) {
    while ((e = readdir (d)) != NULL) {
      g_autofree char *path = NULL, *name = NULL, *folded = NULL;

      if (e->d_name[0] == '.')
        continue;
      path = g_strdup_printf ("/proc/self/task/%s/comm", e->d_name);
      if (!g_file_get_contents (path, &name, NULL, NULL))
        continue;
      folded = census_fold_digits (name);
      census_add (c->threads, folded);
    }
    closedir (d);
  }
}

void
census_clear (Census * c)
{
  g_clear_pointer (&c->fds, g_hash_table_unref);
  g_clear_pointer (&c->threads, g_hash_table_unref);
}

static gint
census_compare_keys (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char **) a, *(const char **) b);
}

/* {"kind": (after - before) / pairs, ...}, kinds that changed, sorted */
static void
census_append_diff (GString * out, GHashTable * before, GHashTable * after,
    guint pairs)
{
  g_autoptr (GHashTable) keys = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GPtrArray) sorted = g_ptr_array_new ();
  GHashTableIter it;
  gpointer key;
  gboolean first = TRUE;

  g_hash_table_iter_init (&it, before);
  while (g_hash_table_iter_next (&it, &key, NULL))
    g_hash_table_add (keys, key);
  g_hash_table_iter_init (&it, after);
  while (g_hash_table_iter_next (&it, &key, NULL))
    g_hash_table_add (keys, key);
  g_hash_table_iter_init (&it, keys);
  while (g_hash_table_iter_next (&it, &key, NULL))
    g_ptr_array_add (sorted, key);
  g_ptr_array_sort (sorted, census_compare_keys);
  g_string_append_c (out, '{');
  for (guint i = 0; i < sorted->len; i++) {
    const char *k = sorted->pdata[i];
    gint d = (gint) GPOINTER_TO_UINT (g_hash_table_lookup (after, k)) -
        (gint) GPOINTER_TO_UINT (g_hash_table_lookup (before, k));
    g_autofree char *escaped = NULL;

    if (d == 0)
      continue;
    escaped = g_strescape (k, NULL);
    g_string_append_printf (out, "%s\"%s\": %.3f", first ? "" : ", ",
        escaped, (double) d / MAX (pairs, 1));
    first = FALSE;
  }
  g_string_append_c (out, '}');
}

/* ", \"census\": {...}": what the first pair added (with whatever the
 * process makes once, on its first pair), and what each pair after it
 * added on average */
static void
census_append_json (GString * out, Census * before, Census * first,
    Census * last, guint connected)
{
  g_string_append (out, ", \"census\": {\"first_pair\": {\"fds\": ");
  census_append_diff (out, before->fds, first->fds, 1);
  g_string_append (out, ", \"threads\": ");
  census_append_diff (out, before->threads, first->threads, 1);
  g_string_append_printf (out, "}, \"per_pair_after_first\": {\"pairs\": %u, "
      "\"fds\": ", connected > 1 ? connected - 1 : 0);
  if (connected > 1)
    census_append_diff (out, first->fds, last->fds, connected - 1);
  else
    g_string_append (out, "{}");
  g_string_append (out, ", \"threads\": ");
  if (connected > 1)
    census_append_diff (out, first->threads, last->threads, connected - 1);
  else
    g_string_append (out, "{}");
  g_string_append (out, "}}");
}

/* Ends a pairs result: the census (when a pair connected) and the closing
 * brace, printed as one line; frees @out and the two censuses. */
void
census_print_result (GString * out, Census * before, Census * first,
    guint connected)
{
  if (connected > 0) {
    Census last;

    census_take (&last);
    census_append_json (out, before, first, &last, connected);
    census_clear (&last);
  }
  g_string_append (out, "}");
  puts (out->str);
  fflush (stdout);
  g_string_free (out, TRUE);
  census_clear (before);
  census_clear (first);
}

/* ---- Room for one more pair ---- */

/* Raises the open-files soft limit to the hard limit. */
void
census_raise_fd_limit (void)
{
  struct rlimit r;

  if (getrlimit (RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit (RLIMIT_NOFILE, &r);
  }
}

guint
census_count_entries (const char *path)
{
  DIR *d = opendir (path);
  struct dirent *e;
  guint n = 0;

  if (d == NULL)
    return 0;
  while ((e = readdir (d)) != NULL)
    if (e->d_name[0] != '.')
      n++;
  closedir (d);
  return n;
}

static guint64
census_read_number (const char *path)
{
  g_autofree char *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return G_MAXUINT64;
  return g_ascii_strtoull (text, NULL, 10);
}

/* the memory mappings of this process (each thread's stack takes two) */
static guint
census_count_maps (void)
{
  FILE *f = fopen ("/proc/self/maps", "r");
  char buf[65536];
  size_t n;
  guint lines = 0;

  if (f == NULL)
    return 0;
  while ((n = fread (buf, 1, sizeof buf, f)) > 0)
    for (size_t i = 0; i < n; i++)
      lines += buf[i] == '\n';
  fclose (f);
  return lines;
}

void
census_headroom_init (CensusHeadroom * h)
{
  h->pairs = 0;
  h->fds0 = census_count_entries ("/proc/self/fd");
  h->threads0 = census_count_entries ("/proc/self/task");
  h->maps0 = census_count_maps ();
  h->skip = 0;
}

/* NULL when one more pair fits in this process and on this machine, else
 * why not (a static string). The next pair is taken to need twice what
 * the pairs so far took on average, and never less than 40 open files,
 * 60 threads and 150 mappings; a reserve is left: 64 open files, and
 * 2,000 thread ids for the rest of the machine (the kernel's pid_max and
 * threads-max count every process). A process that ran out of any of
 * these would abort inside GLib (a failed eventfd or thread), not report.
 * Counting is not free with thousands of threads (the kernel walks its
 * list of them to list /proc/self/task), so while every limit is more
 * than 64 such pairs away it counts again only every 16 pairs. */
const char *
census_no_room (CensusHeadroom * h)
{
  static char why[256];
  struct rlimit r;
  guint fds, threads, maps, need_fds, need_threads, need_maps, pairs;
  guint64 pid_max, threads_max, map_max, tasks = 0, room_pairs;
  g_autofree char *loadavg = NULL;
  const char *slash;

  if (h->skip > 0) {
    h->skip--;
    return NULL;
  }
  fds = census_count_entries ("/proc/self/fd");
  threads = census_count_entries ("/proc/self/task");
  maps = census_count_maps ();
  pairs = MAX (h->pairs, 1);
  need_fds = MAX (40, 2 * (fds - MIN (fds, h->fds0)) / pairs);
  need_threads = MAX (60, 2 * (threads - MIN (threads, h->threads0)) / pairs);
  need_maps = MAX (150, 2 * (maps - MIN (maps, h->maps0)) / pairs);
  pid_max = census_read_number ("/proc/sys/kernel/pid_max");
  threads_max = census_read_number ("/proc/sys/kernel/threads-max");
  map_max = census_read_number ("/proc/sys/vm/max_map_count");

  /* /proc/loadavg's fourth field: running/all tasks of the machine */
  if (g_file_get_contents ("/proc/loadavg", &loadavg, NULL, NULL) &&
      (slash = strchr (loadavg, '/')) != NULL)
    tasks = g_ascii_strtoull (slash + 1, NULL, 10);
  if (getrlimit (RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY &&
      fds + need_fds + 64 > r.rlim_cur) {
    g_snprintf (why, sizeof why, "open-files limit: %u open, the next pair "
        "needs about %u, limit %llu", fds, need_fds,
        (unsigned long long) r.rlim_cur);
    return why;
  }
  if (tasks + need_threads + 2000 > MIN (pid_max, threads_max)) {
    g_snprintf (why, sizeof why, "thread ids: %llu threads on the machine "
        "(%u in this process), the next pair needs about %u, pid_max %llu, "
        "threads-max %llu", (unsigned long long) tasks, threads,
        need_threads, (unsigned long long) pid_max,
        (unsigned long long) threads_max);
    return why;
  }
  if (maps + need_maps > map_max) {
    g_snprintf (why, sizeof why, "memory mappings: %u, the next pair needs "
        "about %u, vm.max_map_count %llu", maps, need_maps,
        (unsigned long long) map_max);
    return why;
  }
  /* how many more such pairs fit, the fewest over the three limits */
  room_pairs = (r.rlim_cur - MIN (r.rlim_cur, fds + 64)) / need_fds;
  room_pairs = MIN (room_pairs, (MIN (pid_max, threads_max) -
          MIN (MIN (pid_max, threads_max), tasks + 2000)) / need_threads);
  room_pairs = MIN (room_pairs, (map_max - MIN (map_max, maps)) / need_maps);
  if (room_pairs > 64)
    h->skip = 15;
  return NULL;
}

/* ---- The process's clock, CPU time and memory ---- */

double
now_ms (void)
{
  return g_get_monotonic_time () / 1000.0;
}

double
cpu_s (void)
{
  struct rusage r;

  getrusage (RUSAGE_SELF, &r);
  return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 +
      r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
}

double
rss_kib (void)
{
  char *text = NULL, *line;
  double kib = -1;

  if (!g_file_get_contents ("/proc/self/status", &text, NULL, NULL))
    return -1;
  line = strstr (text, "VmRSS:");
  if (line != NULL)
    kib = g_ascii_strtod (line + 6, NULL);
  g_free (text);
  return kib;
}

/* "name": [values] (doubles) in JSON */
void
print_series (GString * out, const char *name, GArray * values)
{
  g_string_append_printf (out, "\"%s\": [", name);
  for (guint i = 0; i < values->len; i++)
    g_string_append_printf (out, "%s%.4f", i ? ", " : "",
        g_array_index (values, double, i));
  g_string_append (out, "]");
}

/* malloc's bytes in use, every arena, mmapped blocks included */
double
heap_kib (void)
{
  struct mallinfo2 m = mallinfo2 ();

  return (m.uordblks + m.hblkhd) / 1024.0;
}

/* a sync handler that drops a message unrefs it (GstBusSyncHandler) */
static GstBusSyncReply
census_drop_message (GstBus * bus, GstMessage * message, gpointer unused)
{
  gst_message_unref (message);
  return GST_BUS_DROP;
}

/* The pairs mode's pipelines drop their bus messages (those queued so far
 * and those to come): an application reads its bus, so the messages a
 * pipeline posts while it sets up are not memory the pair keeps. */
void
census_drop_bus_messages (GstElement * pipeline)
{
  GstBus *bus = gst_element_get_bus (pipeline);
  GstMessage *message;

  gst_bus_set_sync_handler (bus, census_drop_message, NULL, NULL);
  while ((message = gst_bus_pop (bus)) != NULL)
    gst_message_unref (message);
  gst_object_unref (bus);
}

/* The mesh mode's sender: what its encoder put out, frames and key
 * frames (atomic) */
static gint encoded_frames, encoded_key_frames;

static GstPadProbeReturn
census_count_encoded (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  g_atomic_int_inc (&encoded_frames);
  if (!GST_BUFFER_FLAG_IS_SET (GST_PAD_PROBE_INFO_BUFFER (info),
          GST_BUFFER_FLAG_DELTA_UNIT))
    g_atomic_int_inc (&encoded_key_frames);
  return GST_PAD_PROBE_OK;
}

/* counts what the encoder named "enc" in line puts out */
void
census_count_encoder (GstElement * line)
{
  GstElement *enc = gst_bin_get_by_name (GST_BIN (line), "enc");
  GstPad *pad = gst_element_get_static_pad (enc, "src");

  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, census_count_encoded,
      NULL, NULL);
  gst_object_unref (pad);
  gst_object_unref (enc);
}

gint
census_encoded_frames (void)
{
  return g_atomic_int_get (&encoded_frames);
}

gint
census_encoded_key_frames (void)
{
  return g_atomic_int_get (&encoded_key_frames);
}

/* The bulk mode's result line, alike for every peer (bench/suites.py
 * reads it). */
void
print_bulk (const char *peer, guint64 sent, guint64 received, gsize size,
    double ms, double cpu, gboolean complete)
{
  printf ("{\"peer\": \"%s\", \"mode\": \"bulk\", \"bytes\": %"
      G_GUINT64_FORMAT ", \"received\": %" G_GUINT64_FORMAT
      ", \"size\": %zu, \"seconds\": %.4f, \"cpu_s\": %.4f, "
      "\"mb_per_s\": %.4f, \"cpu_s_per_mb\": %.5f, \"complete\": %s}\n",
      peer, sent, received, size, ms / 1000, cpu, sent / 1e6 / (ms / 1000),
      cpu / (sent / 1e6), complete ? "true" : "false");
}
