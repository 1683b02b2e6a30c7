/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-demo: a whole call in one process. Starts legba-server on
 * 127.0.0.1 (an ephemeral port), runs three participants with test
 * sources, each sending the others video, audio and a data message, and
 * prints what each received: video frames decoded per remote
 * participant, audio buffers, data messages, and the glass-to-glass
 * latency read from the frames' pixel time stamps. Exits 0 only when
 * media and data flowed every way. With --janus-url and --janus-ws-url
 * the server makes the room an SFU room on that Janus.
 */
#include <legba/legba.h>
#include <legba/server/server.h>

#include <locale.h>
#include <stdio.h>

#include "call-plugin.h"

#define N_PARTICIPANTS 3
#define EXIT_FAILED 1
#define EXIT_USAGE 2

static gdouble opt_seconds = 5;
static gdouble opt_timeout = 90;
static gint opt_width = 640;
static gint opt_height = 360;
static gint opt_fps = 15;
static char *opt_codec = (char *) "h264";
static gint opt_proof_timeout = LEGBA_ENCODER_DEFAULT_PROOF_TIMEOUT_MS;
static char *opt_janus_url = NULL;
static char *opt_janus_ws_url = NULL;
static char *opt_janus_admin_key = NULL;

static const GOptionEntry entries[] = {
  {"seconds", 0, 0, G_OPTION_ARG_DOUBLE, &opt_seconds,
      "Run the call at least S seconds (default: 5)", "S"},
  {"timeout", 0, 0, G_OPTION_ARG_DOUBLE, &opt_timeout,
      "Give up when media and data have not flowed every way after S "
        "seconds (default: 90)", "S"},
  {"width", 0, 0, G_OPTION_ARG_INT, &opt_width,
      "Width of the video sent (default: 640)", "PIXELS"},
  {"height", 0, 0, G_OPTION_ARG_INT, &opt_height,
      "Height of the video sent (default: 360)", "PIXELS"},
  {"fps", 0, 0, G_OPTION_ARG_INT, &opt_fps,
      "Frames per second sent (default: 15)", "N"},
  {"codec", 0, 0, G_OPTION_ARG_STRING, &opt_codec,
      "h264 or vp8 (default: h264)", "CODEC"},
  {"encoder-proof-timeout", 0, 0, G_OPTION_ARG_INT, &opt_proof_timeout,
        "Milliseconds an encoder may take to prove it works (default: 5000)",
      "MS"},
  {"janus-url", 0, 0, G_OPTION_ARG_STRING, &opt_janus_url,
      "Make the room an SFU room on the Janus whose HTTP API is URL "
        "(needs --janus-ws-url)", "URL"},
  {"janus-ws-url", 0, 0, G_OPTION_ARG_STRING, &opt_janus_ws_url,
      "The same Janus's WebSocket API, as the participants reach it", "URL"},
  {"janus-admin-key", 0, 0, G_OPTION_ARG_STRING, &opt_janus_admin_key,
      "The admin_key of Janus's VideoRoom plugin, if it has one", "KEY"},
  G_OPTION_ENTRY_NULL
};

static const char *const names[N_PARTICIPANTS] = { "alice", "bob", "carol" };

typedef struct
{
  LegbaCall *calls[N_PARTICIPANTS];
  GMainLoop *loop;
  gint64 started;
  gint64 flowed;                /* when media and data first flowed every way */
  gboolean failed;
  gboolean timed_out;
  gboolean sfu;
  guint64 sent[N_PARTICIPANTS];
} Demo;

static void
on_error (LegbaCall * call, GError * error, Demo * demo)
{
  for (guint i = 0; i < N_PARTICIPANTS; i++)
    if (demo->calls[i] == call)
      g_printerr ("legba-demo: %s: %s\n", names[i], error->message);
  demo->failed = TRUE;
  g_main_loop_quit (demo->loop);
}

static void
on_warning (LegbaCall * call, GError * error, Demo * demo)
{
  g_printerr ("legba-demo: warning: %s\n", error->message);
}

/* Sends participant i's greeting, to the participants of to (NULL: to
 * everyone, at every tick until it arrived: a failure then, before the
 * room has joined, is not reported). */
static void
greet (Demo * demo, guint i, const char *const *to)
{
  LegbaRoom *room = legba_call_get_room (demo->calls[i]);
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonNode) node = NULL;
  g_autoptr (GError) error = NULL;

  if (room == NULL)
    return;
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "text");
  json_builder_add_string_value (b, "hello");
  json_builder_set_member_name (b, "from");
  json_builder_add_string_value (b, names[i]);
  json_builder_end_object (b);
  node = json_builder_get_root (b);
  if (legba_room_send_json (room, node, "chat", LEGBA_RELIABILITY_RELIABLE,
          to, &error))
    demo->sent[i]++;
  else if (to != NULL)
    g_printerr ("legba-demo: %s could not send: %s\n", names[i],
        error->message);
}

/* In a mesh room each participant greets each newcomer once (the room
 * queues the message until their data channel is open). */
static void
on_joined (LegbaCall * call, LegbaParticipant * p, Demo * demo)
{
  const char *to[] = { legba_participant_get_id (p), NULL };

  if (demo->sfu)
    return;
  for (guint i = 0; i < N_PARTICIPANTS; i++)
    if (demo->calls[i] == call)
      greet (demo, i, to);
}

static GstStructure *
received (Demo * demo, guint to, guint from)
{
  LegbaRoom *room = legba_call_get_room (demo->calls[from]);
  const char *id = room ? legba_room_get_participant_id (room) : NULL;

  return id ? legba_call_get_remote_stats (demo->calls[to], id) : NULL;
}

static guint64
u64 (const GstStructure * s, const char *name)
{
  guint64 v = 0;

  if (s != NULL)
    gst_structure_get_uint64 (s, name, &v);
  return v;
}

static gboolean
flowed (Demo * demo, guint to, guint from)
{
  g_autoptr (GstStructure) s = received (demo, to, from);

  return u64 (s, "video-frames") > 0 && u64 (s, "audio-buffers") > 0 &&
      u64 (s, "data-messages") > 0;
}

static gboolean
all_flowed (Demo * demo)
{
  for (guint i = 0; i < N_PARTICIPANTS; i++)
    for (guint j = 0; j < N_PARTICIPANTS; j++)
      if (i != j && !flowed (demo, i, j))
        return FALSE;
  return TRUE;
}

static gboolean
data_arrived (Demo * demo, guint from)
{
  for (guint j = 0; j < N_PARTICIPANTS; j++) {
    g_autoptr (GstStructure) s = NULL;

    if (j == from)
      continue;
    s = received (demo, j, from);
    if (u64 (s, "data-messages") == 0)
      return FALSE;
  }
  return TRUE;
}

/* An SFU room takes no named recipients, and Janus relays a message only
 * to the subscribers already listening: each participant sends its
 * greeting to everyone at every tick until each of the others has
 * received one. */
static void
greet_everyone (Demo * demo)
{
  for (guint i = 0; i < N_PARTICIPANTS; i++)
    if (!data_arrived (demo, i))
      greet (demo, i, NULL);
}

static gboolean
on_tick (gpointer data)
{
  Demo *demo = data;
  gint64 now = g_get_monotonic_time ();

  if (demo->sfu)
    greet_everyone (demo);
  if (demo->flowed == 0 && all_flowed (demo))
    demo->flowed = now;
  if (demo->flowed != 0 && now - demo->started >= opt_seconds * G_USEC_PER_SEC)
    g_main_loop_quit (demo->loop);
  else if (demo->flowed == 0 &&
      now - demo->started >= opt_timeout * G_USEC_PER_SEC) {
    demo->timed_out = TRUE;
    g_main_loop_quit (demo->loop);
  }
  return G_SOURCE_CONTINUE;
}

static gboolean
wake (gpointer data)
{
  return G_SOURCE_CONTINUE;
}

static void
print_latency (const GstStructure * s)
{
  gdouble p50 = -1, p95 = -1;

  gst_structure_get_double (s, "latency-p50", &p50);
  gst_structure_get_double (s, "latency-p95", &p95);
  if (p50 < 0)
    printf ("  %14s", "not measured");
  else
    printf ("  %6.1f / %5.1f", p50, p95);
}

static gboolean
report (Demo * demo)
{
  gboolean ok = TRUE;
  gdouble seconds = (g_get_monotonic_time () - demo->started) / 1e6;

  printf ("\nWhat each participant received, after %.1f s:\n\n", seconds);
  printf ("  %-8s %-8s %12s %6s %13s %9s  %s\n", "receiver", "from",
      "video frames", "fps", "audio buffers", "data msgs",
      "latency p50 / p95 ms");
  for (guint i = 0; i < N_PARTICIPANTS; i++)
    for (guint j = 0; j < N_PARTICIPANTS; j++) {
      g_autoptr (GstStructure) s = NULL;
      gdouble fps = 0;

      if (i == j)
        continue;
      s = received (demo, i, j);
      if (s != NULL)
        gst_structure_get_double (s, "fps", &fps);
      printf ("  %-8s %-8s %12" G_GUINT64_FORMAT " %6.1f %13"
          G_GUINT64_FORMAT " %9" G_GUINT64_FORMAT, names[i], names[j],
          u64 (s, "video-frames"), fps, u64 (s, "audio-buffers"),
          u64 (s, "data-messages"));
      if (s != NULL)
        print_latency (s);
      printf ("\n");
      if (!flowed (demo, i, j))
        ok = FALSE;
    }
  printf ("\n");
  for (guint i = 0; i < N_PARTICIPANTS; i++) {
    g_autoptr (GstStructure) local =
        legba_call_get_local_stats (demo->calls[i]);
    gdouble rate = 0;

    gst_structure_get_double (local, "video-bitrate", &rate);
    printf ("  %-8s sent %" G_GUINT64_FORMAT " video frames (%s, %.0f "
        "kbit/s), %" G_GUINT64_FORMAT " audio buffers, %" G_GUINT64_FORMAT
        " data messages\n", names[i], u64 (local, "video-frames-sent"),
        gst_structure_get_string (local, "encoder") ?
        gst_structure_get_string (local, "encoder") : "no encoder",
        rate / 1000, u64 (local, "audio-buffers-sent"), demo->sent[i]);
  }
  printf ("\n");
  return ok;
}

/* legba-server on 127.0.0.1, an ephemeral port, with the app "demo";
 * its rooms are SFU rooms when a Janus was given. */
static LegbaServer *
start_server (const char *secret, GError ** error)
{
  g_autoptr (LegbaServer) server = legba_server_new ();

  if (opt_janus_url != NULL) {
    const char *urls[] = { opt_janus_url, NULL };
    const char *ws_urls[] = { opt_janus_ws_url, NULL };

    g_object_set (server, "sfu-janus-urls", urls, "sfu-janus-ws-urls",
        ws_urls, "sfu-admin-key", opt_janus_admin_key, "sfu-topology", "sfu",
        NULL);
  }
  if (!legba_server_add_app (server, "demo", "demo-key", secret, error) ||
      !legba_server_listen (server, "127.0.0.1", 0, error))
    return NULL;
  return g_steal_pointer (&server);
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (LegbaServer) server = NULL;
  g_autofree char *url = NULL;
  g_autofree char *secret = NULL;
  LegbaVideoCodec codec;
  Demo demo = { 0, };
  gboolean ok = FALSE;
  guint tick;
  gint64 end;

  setlocale (LC_ALL, "");
  context = g_option_context_new ("- a three-participant Legba call in one "
      "process");
  g_option_context_add_main_entries (context, entries, NULL);
  g_option_context_add_group (context, gst_init_get_option_group ());
  g_option_context_set_description (context,
      "Starts legba-server on 127.0.0.1, runs alice, bob and carol with\n"
      "test sources in one room, and prints what each received.\n"
      "\n"
      "With --janus-url and --janus-ws-url the room is an SFU room on that\n"
      "Janus 1.1 (its VideoRoom plugin, reachable without an API secret):\n"
      "legba-server creates the VideoRoom and each participant publishes to\n"
      "it and receives the others from it. An SFU room takes no data for\n"
      "named recipients and Janus relays a message only to the subscribers\n"
      "already listening, so there each participant sends its greeting to\n"
      "everyone every 100 ms until each of the others has received one: a\n"
      "receiver may count several, and \"sent\" counts them all.\n"
      "\n"
      "Exit status: 0 when video, audio and data flowed every way, 1 when\n"
      "they did not, 2 on a usage error.\n");
  if (!g_option_context_parse (context, &argc, &argv, &error)) {
    g_printerr ("legba-demo: %s\n", error->message);
    return EXIT_USAGE;
  }
  if (!legba_video_codec_from_string (opt_codec, &codec) ||
      (codec != LEGBA_VIDEO_CODEC_H264 && codec != LEGBA_VIDEO_CODEC_VP8) ||
      opt_width < 64 || opt_height < 16 || opt_fps < 1 || opt_fps > 60 ||
      opt_proof_timeout < 1) {
    g_printerr ("legba-demo: bad --codec, --width, --height or --fps\n");
    return EXIT_USAGE;
  }
  if ((opt_janus_url == NULL) != (opt_janus_ws_url == NULL) ||
      (opt_janus_admin_key != NULL && opt_janus_url == NULL)) {
    g_printerr ("legba-demo: --janus-url and --janus-ws-url go together "
        "(--janus-admin-key with them)\n");
    return EXIT_USAGE;
  }
  demo.sfu = opt_janus_url != NULL;
  legba_call_plugin_ensure ();

  secret = g_uuid_string_random ();
  server = start_server (secret, &error);
  if (server == NULL) {
    g_printerr ("legba-demo: legba-server: %s\n", error->message);
    return EXIT_FAILED;
  }
  url = legba_server_get_url (server);
  printf ("legba-server listening on 127.0.0.1:%u (in this process)\n",
      legba_server_get_port (server));
  if (demo.sfu)
    printf ("room \"demo\" is an SFU room on the Janus at %s\n", opt_janus_url);
  printf ("alice, bob and carol join room \"demo\": %dx%d at %d fps (%s, "
      "test pattern stamped with the time), a test tone, and a data message "
      "to %s\n", opt_width, opt_height, opt_fps, opt_codec, demo.sfu ?
      "everyone, sent again until the others have it" : "each other");
  fflush (stdout);

  demo.loop = g_main_loop_new (NULL, FALSE);
  demo.started = g_get_monotonic_time ();
  for (guint i = 0; i < N_PARTICIPANTS; i++) {
    LegbaCall *call = legba_call_new (url, "demo", names[i]);

    demo.calls[i] = call;
    g_object_set (call, "app-key", "demo-key", "app-secret", secret,
        "width", opt_width, "height", opt_height, "framerate", opt_fps,
        "codec", codec, "bitrate", 500000, "measure-latency", TRUE,
        "stats-interval", 1000, "encoder-proof-timeout", opt_proof_timeout,
        NULL);
    g_signal_connect (call, "error", G_CALLBACK (on_error), &demo);
    g_signal_connect (call, "warning", G_CALLBACK (on_warning), &demo);
    g_signal_connect (call, "participant-joined", G_CALLBACK (on_joined),
        &demo);
    if (!legba_call_start (call, &error)) {
      g_printerr ("legba-demo: %s: %s\n", names[i], error->message);
      demo.failed = TRUE;
      break;
    }
  }
  tick = g_timeout_add (100, on_tick, &demo);
  if (!demo.failed)
    g_main_loop_run (demo.loop);
  g_source_remove (tick);

  if (!demo.failed) {
    ok = report (&demo);
    if (ok)
      printf ("OK: video, audio and data flowed every way between the %d "
          "participants.\n", N_PARTICIPANTS);
    else
      printf ("FAILED: %s\n", demo.timed_out ?
          "media and data did not flow every way in time (see the zeros)" :
          "media and data did not flow every way (see the zeros)");
  }
  for (guint i = 0; i < N_PARTICIPANTS; i++)
    if (demo.calls[i] != NULL) {
      legba_call_stop (demo.calls[i]);
      g_object_unref (demo.calls[i]);
    }
  legba_server_shutdown (server);
  /* let the server's closed sockets release themselves, for at most 5 s
   * (a timeout wakes the loop) */
  tick = g_timeout_add (100, wake, NULL);
  end = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
  while (legba_server_get_connection_count (server) > 0 &&
      g_get_monotonic_time () < end)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (tick);
  g_main_loop_unref (demo.loop);
  return ok ? EXIT_SUCCESS : EXIT_FAILED;
}
