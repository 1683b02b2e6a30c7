/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The benchmarks' Legba peer: a LegbaServer embedded in this process on
 * 127.0.0.1 and pairs of LegbaRooms (each with its own pipeline and
 * LegbaSignalClient) that meet in a room of their own. Same modes and
 * JSON as bench/peers/webrtcbin-peer.c, where Legba has them:
 *
 *   legba-peer setup [--iterations N]
 *   legba-peer pairs [--count N] [--seconds S]
 *
 * A pair is set up when each room lists the other participant as
 * connected: its peer connection is up and both of its data channels are
 * open. Unlike the other peers, the offer, answer and candidates go
 * through the signalling server (WebSocket, loopback): that is part of
 * what a room costs. ICE: the rooms' defaults for a loopback server (host
 * candidates on 127.0.0.1, no STUN server).
 */
#include <legba/legba.h>
#include <sys/resource.h>
#include <dirent.h>
#include <string.h>
#include <stdio.h>

#define APP_ID "bench"
#define APP_KEY "bench-key"
#define APP_SECRET "bench-secret"

typedef struct
{
  GstElement *pipeline;
  LegbaRoom *room;
  gboolean connected;           /* the other participant is connected */
  gboolean failed;
} Side;

typedef struct
{
  Side s[2];
} Pair;

static char *server_url;

static double
now_ms (void)
{
  return g_get_monotonic_time () / 1000.0;
}

static void
on_participant_state (LegbaParticipant * lp, GParamSpec * pspec, Side * side)
{
  LegbaParticipantState state = legba_participant_get_state (lp);

  if (state == LEGBA_PARTICIPANT_STATE_CONNECTED)
    side->connected = TRUE;
  else if (state == LEGBA_PARTICIPANT_STATE_FAILED)
    side->failed = TRUE;
}

static void
on_participant_joined (LegbaRoom * room, LegbaParticipant * lp, Side * side)
{
  g_signal_connect (lp, "notify::state", G_CALLBACK (on_participant_state),
      side);
  on_participant_state (lp, NULL, side);
}

static void
on_room_error (LegbaRoom * room, GError * error, Side * side)
{
  g_printerr ("room error: %s\n", error->message);
}

static void
side_start (Side * side, const char *room_name, const char *identity)
{
  LegbaSignalClient *client = legba_signal_client_new (server_url, APP_KEY);

  g_object_set (client, "app-secret", APP_SECRET, NULL);
  side->pipeline = gst_pipeline_new (identity);
  side->room = legba_room_new (LEGBA_SIGNALLER (client),
      GST_BIN (side->pipeline));
  g_object_unref (client);
  g_object_set (side->room, "room", room_name, "identity", identity, NULL);
  g_signal_connect (side->room, "participant-joined",
      G_CALLBACK (on_participant_joined), side);
  g_signal_connect (side->room, "error", G_CALLBACK (on_room_error), side);
  gst_element_set_state (side->pipeline, GST_STATE_PLAYING);
  legba_room_connect_async (side->room, NULL, NULL, NULL);
}

static void
side_stop (Side * side)
{
  legba_room_disconnect (side->room);
  gst_element_set_state (side->pipeline, GST_STATE_NULL);
  g_clear_object (&side->room);
  gst_clear_object (&side->pipeline);
}

static Pair *
pair_new (guint n)
{
  Pair *p = g_new0 (Pair, 1);
  char room[32], a[32], b[32];

  g_snprintf (room, sizeof room, "bench-%u", n);
  g_snprintf (a, sizeof a, "a%u", n);
  g_snprintf (b, sizeof b, "b%u", n);
  side_start (&p->s[0], room, a);
  side_start (&p->s[1], room, b);
  return p;
}

static gboolean
timed_out (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

static gboolean
pair_wait (Pair * p, guint seconds)
{
  gboolean expired = FALSE;
  guint id = g_timeout_add_seconds (seconds, timed_out, &expired);

  while (!(p->s[0].connected && p->s[1].connected) && !expired &&
      !p->s[0].failed && !p->s[1].failed)
    g_main_context_iteration (NULL, TRUE);
  if (!expired)
    g_source_remove (id);
  return p->s[0].connected && p->s[1].connected;
}

static void
pair_free (Pair * p)
{
  side_stop (&p->s[0]);
  side_stop (&p->s[1]);
  /* let the rooms finish leaving */
  while (g_main_context_iteration (NULL, FALSE));
  g_free (p);
}

static double
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

static guint
count_dir (const char *path)
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

static int
mode_setup (guint iterations)
{
  GString *out = g_string_new ("{\"peer\": \"legba\", \"mode\": \"setup\", "
      "\"setup_ms\": [");
  guint failed = 0, ok = 0;

  for (guint i = 0; i < iterations; i++) {
    double t0 = now_ms ();
    Pair *p = pair_new (i);

    if (pair_wait (p, 30)) {
      g_string_append_printf (out, "%s%.4f", ok ? ", " : "", now_ms () - t0);
      ok++;
    } else {
      failed++;
    }
    pair_free (p);
  }
  g_string_append_printf (out, "], \"failed\": %u}", failed);
  puts (out->str);
  g_string_free (out, TRUE);
  return ok ? 0 : 1;
}

static int
mode_pairs (guint count, double seconds)
{
  GPtrArray *pairs = g_ptr_array_new ();
  double rss0 = rss_kib (), t0 = now_ms ();
  guint fds0 = count_dir ("/proc/self/fd");
  guint threads0 = count_dir ("/proc/self/task");
  guint connected = 0;
  const char *stop = "count";

  for (guint i = 0; i < count; i++) {
    Pair *p = pair_new (i);

    g_ptr_array_add (pairs, p);
    if (!pair_wait (p, 30)) {
      stop = "a pair did not connect within 30 s";
      break;
    }
    connected++;
    if (now_ms () - t0 > seconds * 1000) {
      stop = "time bound";
      break;
    }
  }
  printf ("{\"peer\": \"legba\", \"mode\": \"pairs\", \"asked\": %u, "
      "\"connected\": %u, \"stopped\": \"%s\", \"seconds\": %.2f, "
      "\"rss_kib_per_pair\": %.1f, \"fds_per_pair\": %.2f, "
      "\"threads_per_pair\": %.2f, \"includes\": \"two signalling clients "
      "and their server-side sockets per pair\"}\n", count, connected, stop,
      (now_ms () - t0) / 1000,
      connected ? (rss_kib () - rss0) / connected : 0.0,
      connected ? (double) (count_dir ("/proc/self/fd") - fds0) / connected :
      0.0, connected ? (double) (count_dir ("/proc/self/task") -
          threads0) / connected : 0.0);
  for (guint i = 0; i < pairs->len; i++)
    pair_free (pairs->pdata[i]);
  g_ptr_array_unref (pairs);
  return connected ? 0 : 1;
}

int
main (int argc, char **argv)
{
  guint iterations = 10, count = 100;
  double seconds = 120;
  GOptionEntry entries[] = {
    {"iterations", 0, 0, G_OPTION_ARG_INT, &iterations, "setup: pairs", "N"},
    {"count", 0, 0, G_OPTION_ARG_INT, &count, "pairs: pairs", "N"},
    {"seconds", 0, 0, G_OPTION_ARG_DOUBLE, &seconds, "pairs: bound", "S"},
    {NULL}
  };
  GOptionContext *ctx = g_option_context_new ("setup|pairs");
  GError *error = NULL;
  LegbaServer *server;
  int rc;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_add_group (ctx, gst_init_get_option_group ());
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || argc != 2) {
    g_printerr ("%s\n", error ? error->message : "give one mode");
    return 2;
  }
  g_option_context_free (ctx);
  server = legba_server_new ();
  g_object_set (server, "max-connections", 0, NULL);
  if (!legba_server_add_app (server, APP_ID, APP_KEY, APP_SECRET, &error) ||
      !legba_server_listen (server, "127.0.0.1", 0, &error)) {
    g_printerr ("server: %s\n", error->message);
    return 1;
  }
  server_url = legba_server_get_url (server);
  if (strcmp (argv[1], "setup") == 0)
    rc = mode_setup (iterations);
  else if (strcmp (argv[1], "pairs") == 0)
    rc = mode_pairs (count, seconds);
  else {
    g_printerr ("unknown mode %s\n", argv[1]);
    rc = 2;
  }
  legba_server_shutdown (server);
  g_object_unref (server);
  g_free (server_url);
  return rc;
}
