/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The pairs mode of the C peers (pairs.h).
 */
#include "pairs.h"

#include <unistd.h>

#include "census.h"

int
pairs_run (const PairsPeer * peer, guint count, double seconds)
{
  GPtrArray *pairs = g_ptr_array_new ();
  double rss0 = rss_kib (), heap0 = heap_kib (), heap1 = 0, t0 = now_ms ();
  guint fds0 = census_count_entries ("/proc/self/fd");
  guint threads0 = census_count_entries ("/proc/self/task");
  guint connected = 0;
  const char *stop = "count";
  Census before, first = { 0 };
  GString *out;
  g_autofree char *includes = NULL;

  CensusHeadroom room;
  const char *why;

  census_take (&before);
  census_headroom_init (&room);
  for (guint i = 0; i < count; i++) {
    GstElement *pipeline;
    gpointer p;

    if ((why = census_no_room (&room)) != NULL) {
      stop = why;
      break;
    }
    p = peer->pair_new (i, &pipeline);
    census_drop_bus_messages (pipeline);
    g_ptr_array_add (pairs, p);
    if (!peer->pair_wait (p, 30)) {
      stop = "a pair did not connect within 30 s";
      break;
    }
    connected++;
    room.pairs = connected;
    if (connected == 1) {
      heap1 = heap_kib ();
      census_take (&first);
    }
    if (now_ms () - t0 > seconds * 1000) {
      stop = "time bound";
      break;
    }
  }
  if (peer->includes != NULL)
    includes = g_strdup_printf (", \"includes\": \"%s\"", peer->includes);
  out = g_string_new (NULL);
  g_string_append_printf (out, "{\"peer\": \"%s\", \"mode\": \"pairs\", "
      "\"asked\": %u, \"connected\": %u, \"stopped\": \"%s\", "
      "\"seconds\": %.2f, \"rss_kib_per_pair\": %.1f, "
      "\"fds_per_pair\": %.2f, \"threads_per_pair\": %.2f, "
      "\"heap_kib_per_pair\": %.1f, "
      "\"heap_kib_per_pair_after_first\": %.1f%s", peer->peer, count,
      connected, stop, (now_ms () - t0) / 1000,
      connected ? (rss_kib () - rss0) / connected : 0.0,
      connected ? (double) (census_count_entries ("/proc/self/fd") -
          fds0) / connected : 0.0,
      connected ? (double) (census_count_entries ("/proc/self/task") -
          threads0) / connected : 0.0,
      connected ? (heap_kib () - heap0) / connected : 0.0,
      connected > 1 ? (heap_kib () - heap1) / (connected - 1) : 0.0,
      includes != NULL ? includes : "");
  census_print_result (out, &before, &first, connected);
  /* --no-teardown: the process ends with its pairs up (the kernel
   * closes their sockets), as stopping a thousand pairs one by one
   * takes minutes that nothing here measures */
  if (peer->no_teardown)
    _exit (connected ? 0 : 1);
  for (guint i = 0; i < pairs->len; i++)
    peer->pair_free (pairs->pdata[i]);
  g_ptr_array_unref (pairs);
  return connected ? 0 : 1;
}
