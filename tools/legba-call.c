/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-call: joins a room with a LegbaCall and reports what it receives:
 * participants as they come and go, live stats, chat, data messages; with
 * --expect-participants, whether media and data came from enough of them.
 */
#include <legba/legba.h>

#include <glib-unix.h>
#include <gio/gunixinputstream.h>
#include <locale.h>
#include <stdio.h>
#include <unistd.h>

#include "call-plugin.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define CHAT_TOPIC "chat"

static char *opt_server;
static char *opt_room;
static char *opt_identity;
static char *opt_name;
static char *opt_key;
static char *opt_secret;
static char *opt_app_id;
static char *opt_token;
static char *opt_auth_url;
static char *opt_video = (char *) "test";
static char *opt_audio = (char *) "test";
static char *opt_display = (char *) "none";
static char *opt_encoder;
static char *opt_prefer = (char *) "auto";
static char *opt_codec = (char *) "h264";
static gint opt_bitrate = 600;
static gint opt_proof_timeout = 5000;
static gint opt_width = 640;
static gint opt_height = 360;
static gint opt_fps = 30;
static gdouble opt_duration;
static gboolean opt_stats;
static gboolean opt_chat;
static char *opt_send_data;
static gint opt_expect = -1;
static gboolean opt_json;
static gboolean opt_latency;
static gboolean opt_no_cc;
static gint opt_max_participants;
static gint opt_video_fec;

static const GOptionEntry entries[] = {
  {"server", 's', 0, G_OPTION_ARG_STRING, &opt_server,
      "The signalling server's URL, ws://HOST:PORT (required)", "URL"},
  {"room", 'r', 0, G_OPTION_ARG_STRING, &opt_room,
      "The room to join (required)", "NAME"},
  {"identity", 'i', 0, G_OPTION_ARG_STRING, &opt_identity,
      "Who this participant is (required)", "ID"},
  {"name", 'n', 0, G_OPTION_ARG_STRING, &opt_name,
      "Display name (default: the identity)", "NAME"},
  {"key", 'k', 0, G_OPTION_ARG_STRING, &opt_key,
      "The app key (default: $LEGBA_APP_KEY)", "KEY"},
  {"secret", 0, 0, G_OPTION_ARG_STRING, &opt_secret,
      "The app secret (default: $LEGBA_APP_SECRET)", "SECRET"},
  {"app-id", 0, 0, G_OPTION_ARG_STRING, &opt_app_id,
      "The app id, with --token", "ID"},
  {"token", 't', 0, G_OPTION_ARG_STRING, &opt_token,
      "A join token (legba-token) for this room and identity", "TOKEN"},
  {"auth-url", 0, 0, G_OPTION_ARG_STRING, &opt_auth_url,
      "The application's authorization endpoint", "URL"},
  {"video", 0, 0, G_OPTION_ARG_STRING, &opt_video,
      "test, camera, none or a file to play (default: test)", "SOURCE"},
  {"audio", 0, 0, G_OPTION_ARG_STRING, &opt_audio,
      "test, mic or none (default: test)", "SOURCE"},
  {"display", 0, 0, G_OPTION_ARG_STRING, &opt_display,
      "window, grid, none (decode only) or undecoded (count what arrives, "
        "decode nothing) (default: none)", "MODE"},
  {"codec", 0, 0, G_OPTION_ARG_STRING, &opt_codec,
      "h264 or vp8 (default: h264)", "CODEC"},
  {"encoder", 0, 0, G_OPTION_ARG_STRING, &opt_encoder,
      "Use only this encoder factory", "FACTORY"},
  {"prefer", 0, 0, G_OPTION_ARG_STRING, &opt_prefer,
      "auto, hardware or software encoders (default: auto)", "KIND"},
  {"encoder-proof-timeout", 0, 0, G_OPTION_ARG_INT, &opt_proof_timeout,
      "Time an encoder has to prove it works, in ms (default: 5000)", "MS"},
  {"bitrate", 0, 0, G_OPTION_ARG_INT, &opt_bitrate,
      "Video bitrate in kbit/s (default: 600)", "KBPS"},
  {"width", 0, 0, G_OPTION_ARG_INT, &opt_width,
      "Width of the video sent (default: 640)", "PIXELS"},
  {"height", 0, 0, G_OPTION_ARG_INT, &opt_height,
      "Height of the video sent (default: 360)", "PIXELS"},
  {"fps", 0, 0, G_OPTION_ARG_INT, &opt_fps,
      "Frames per second sent (default: 30)", "N"},
  {"duration", 'd', 0, G_OPTION_ARG_DOUBLE, &opt_duration,
      "Leave after S seconds (default: at Ctrl-C)", "S"},
  {"stats", 0, 0, G_OPTION_ARG_NONE, &opt_stats,
      "Show live stats every second", NULL},
  {"no-congestion-control", 0, 0, G_OPTION_ARG_NONE, &opt_no_cc,
      "Send at the bitrate set, unpaced, answering every retransmission "
        "request (LegbaRoom:congestion-control off)", NULL},
  {"video-fec", 0, 0, G_OPTION_ARG_INT, &opt_video_fec,
      "Protect the video sent with RED and ULPFEC at P percent "
        "(LegbaRoom:video-fec-percentage; default: 0, none)", "P"},
  {"max-participants", 0, 0, G_OPTION_ARG_INT, &opt_max_participants,
      "Refuse to join a room that holds N participants already "
        "(LegbaRoom:max-participants; default: the room's, 6)", "N"},
  {"chat", 0, 0, G_OPTION_ARG_NONE, &opt_chat,
      "Send standard input's lines as chat messages", NULL},
  {"send-data", 0, 0, G_OPTION_ARG_STRING, &opt_send_data,
      "Send this JSON message to each participant once", "JSON"},
  {"expect-participants", 0, 0, G_OPTION_ARG_INT, &opt_expect,
      "Exit 0 only if media and data came from N others", "N"},
  {"json", 0, 0, G_OPTION_ARG_NONE, &opt_json,
      "Print what was received as one JSON object at exit", NULL},
  {"measure-latency", 0, 0, G_OPTION_ARG_NONE, &opt_latency,
      "Stamp frames and read the stamps (participants on one host)", NULL},
  G_OPTION_ENTRY_NULL
};

typedef struct
{
  LegbaCall *call;
  GMainLoop *loop;
  JsonNode *send_data;
  gboolean tty;
  gboolean progress_shown;
  gboolean failed;
  gint64 started;               /* monotonic, µs */
  gint64 joined;                /* µs after started, 0 until in the call */
  gint64 first_video;           /* µs after started, 0 until a frame */
} App;

/* Human-readable lines go to standard error with --json, so that standard
 * output holds the JSON object alone. */
static void
say (App * app, const char *format, ...)
G_GNUC_PRINTF (2, 3);

     static void say (App * app, const char *format, ...)
{
  va_list args;
  FILE *out = opt_json ? stderr : stdout;

  if (app->progress_shown) {
    fputs ("\r\033[K", stderr);
    app->progress_shown = FALSE;
  }
  va_start (args, format);
  vfprintf (out, format, args);
  va_end (args);
  fputc ('\n', out);
  fflush (out);
}

static int
usage_error (const char *message)
{
  g_printerr ("%s: %s\nTry '%s --help' for more information.\n",
      g_get_prgname (), message, g_get_prgname ());
  return EXIT_USAGE;
}

static void
on_error (LegbaCall * call, GError * error, App * app)
{
  g_printerr ("%s: %s\n", g_get_prgname (), error->message);
  app->failed = TRUE;
  g_main_loop_quit (app->loop);
}

static void
on_warning (LegbaCall * call, GError * error, App * app)
{
  g_printerr ("%s: warning: %s\n", g_get_prgname (), error->message);
}

static void
on_state (LegbaCall * call, GParamSpec * pspec, App * app)
{
  if (legba_call_get_state (call) == LEGBA_CALL_STATE_IN_CALL &&
      app->joined == 0)
    app->joined = g_get_monotonic_time () - app->started;
  if (legba_call_get_state (call) == LEGBA_CALL_STATE_IN_CALL)
    say (app, "joined room %s as %s", opt_room,
        legba_room_get_participant_id (legba_call_get_room (call)));
}

static void
send_to (App * app, JsonNode * data, const char *topic, const char *to)
{
  const char *recipients[] = { to, NULL };
  g_autoptr (GError) error = NULL;
  LegbaRoom *room = legba_call_get_room (app->call);

  if (room == NULL)
    return;
  if (!legba_room_send_json (room, data, topic, LEGBA_RELIABILITY_RELIABLE,
          to ? recipients : NULL, &error))
    g_printerr ("%s: warning: %s\n", g_get_prgname (), error->message);
}

static void
on_joined (LegbaCall * call, LegbaParticipant * p, App * app)
{
  say (app, "+ %s joined (%s)", legba_participant_get_identity (p),
      legba_participant_get_id (p));
  /* queued by the room until the peer's channel opens */
  if (app->send_data != NULL)
    send_to (app, app->send_data, NULL, legba_participant_get_id (p));
}

static void
on_left (LegbaCall * call, LegbaParticipant * p, App * app)
{
  say (app, "- %s left (%s)", legba_participant_get_identity (p),
      legba_participant_get_id (p));
}

static void
on_data (LegbaCall * call, LegbaParticipant * p, const char *topic,
    JsonNode * data, App * app)
{
  const char *who = legba_participant_get_identity (p);

  if (topic && g_str_equal (topic, CHAT_TOPIC) &&
      JSON_NODE_HOLDS_OBJECT (data) &&
      json_object_has_member (json_node_get_object (data), "text")) {
    say (app, "<%s> %s", who,
        json_object_get_string_member_with_default (json_node_get_object
            (data), "text", ""));
  } else if (topic == NULL || !g_str_has_prefix (topic, "legba.")) {
    g_autofree char *text = json_to_string (data, FALSE);

    say (app, "data from %s%s%s: %s", who, topic ? " on " : "",
        topic ? topic : "", text);
  }
}

static void
on_line_read (GObject * source, GAsyncResult * result, gpointer data)
{
  App *app = data;
  g_autoptr (GError) error = NULL;
  gsize length;
  g_autofree char *line =
      g_data_input_stream_read_line_finish_utf8 (G_DATA_INPUT_STREAM (source),
      result, &length, &error);

  if (line == NULL) {
    if (error != NULL)
      g_printerr ("%s: standard input: %s\n", g_get_prgname (), error->message);
    return;
  }
  if (line[0] != '\0') {
    g_autoptr (JsonBuilder) b = json_builder_new ();
    g_autoptr (JsonNode) node = NULL;

    json_builder_begin_object (b);
    json_builder_set_member_name (b, "text");
    json_builder_add_string_value (b, line);
    json_builder_end_object (b);
    node = json_builder_get_root (b);
    send_to (app, node, CHAT_TOPIC, NULL);
  }
  g_data_input_stream_read_line_async (G_DATA_INPUT_STREAM (source),
      G_PRIORITY_DEFAULT, NULL, on_line_read, app);
}

static guint64
field_u64 (const GstStructure * s, const char *name)
{
  guint64 v = 0;

  gst_structure_get_uint64 (s, name, &v);
  return v;
}

static gdouble
field_double (const GstStructure * s, const char *name, gdouble fallback)
{
  gdouble v = fallback;

  gst_structure_get_double (s, name, &v);
  return v;
}

static void
on_stats (LegbaCall * call, App * app)
{
  g_auto (GStrv) ids = legba_call_list_remotes (call);
  g_autoptr (GstStructure) local = legba_call_get_local_stats (call);
  GString *line = g_string_new (NULL);

  g_string_append_printf (line, "%s %.0f kbit/s",
      gst_structure_get_string (local, "encoder") ?
      gst_structure_get_string (local, "encoder") : "-",
      field_double (local, "video-bitrate", 0) / 1000);
  if (gst_structure_has_field (local, "video-cpu"))
    g_string_append_printf (line, " video cpu %.0f%%",
        field_double (local, "video-cpu", 0));
  if (gst_structure_has_field (local, "audio-cpu"))
    g_string_append_printf (line, " audio cpu %.0f%%",
        field_double (local, "audio-cpu", 0));
  g_string_append_printf (line, " process cpu %.0f%%",
      field_double (local, "cpu", 0));
  for (guint i = 0; ids[i]; i++) {
    g_autoptr (GstStructure) s = legba_call_get_remote_stats (call, ids[i]);
    gboolean present = FALSE;
    guint target = 0, video_target = 0;

    gst_structure_get_boolean (s, "present", &present);
    if (!present)
      continue;
    g_string_append_printf (line, " | %s %" G_GUINT64_FORMAT " frames %"
        G_GUINT64_FORMAT " audio %.0f fps %.0f kbit/s",
        gst_structure_get_string (s, "identity"),
        field_u64 (s, "video-frames"), field_u64 (s, "audio-buffers"),
        field_double (s, "fps", 0), field_u64 (s, "bitrate-in") / 1000.0);
    if (gst_structure_has_field (s, "round-trip-time"))
      g_string_append_printf (line, " rtt %.0f ms",
          field_double (s, "round-trip-time", 0) * 1000);
    if (gst_structure_get_uint (s, "target-bitrate", &target)) {
      gst_structure_get_uint (s, "video-target-bitrate", &video_target);
      g_string_append_printf (line, " est %.0f kbit/s video %.0f kbit/s "
          "queue %.0f ms rtx %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT,
          target / 1000.0, video_target / 1000.0,
          field_double (s, "pacing-queue-ms", 0), field_u64 (s, "rtx-sent"),
          field_u64 (s, "rtx-requests"));
    }
    if (gst_structure_has_field (s, "packets-lost")) {
      gint64 lost = 0;

      gst_structure_get_int64 (s, "packets-lost", &lost);
      g_string_append_printf (line, " lost %" G_GINT64_FORMAT, lost);
    }
  }
  if (app->tty) {
    fprintf (stderr, "\r\033[K%s", line->str);
    fflush (stderr);
    app->progress_shown = TRUE;
  } else {
    say (app, "stats: %s", line->str);
  }
  g_string_free (line, TRUE);
}

/* Notes when the first video frame from anyone is decoded, for --json. */
static gboolean
on_first_video_poll (gpointer data)
{
  App *app = data;
  g_auto (GStrv) ids = legba_call_list_remotes (app->call);

  for (guint i = 0; ids[i]; i++) {
    g_autoptr (GstStructure) s = legba_call_get_remote_stats (app->call,
        ids[i]);

    if (field_u64 (s, "video-frames") > 0) {
      app->first_video = g_get_monotonic_time () - app->started;
      return G_SOURCE_REMOVE;
    }
  }
  return G_SOURCE_CONTINUE;
}

static void
add_ms (JsonBuilder * b, const char *name, gint64 us)
{
  json_builder_set_member_name (b, name);
  if (us > 0)
    json_builder_add_double_value (b, us / 1000.0);
  else
    json_builder_add_null_value (b);
}

static gboolean
on_duration (gpointer data)
{
  g_main_loop_quit (((App *) data)->loop);
  return G_SOURCE_REMOVE;
}

static gboolean
on_signal (gpointer data)
{
  g_main_loop_quit (((App *) data)->loop);
  return G_SOURCE_CONTINUE;
}

/* Prints the JSON report and says whether enough participants sent media
 * and data. */
static gboolean
report (App * app)
{
  g_auto (GStrv) ids = legba_call_list_remotes (app->call);
  g_autoptr (JsonBuilder) b = json_builder_new ();
  guint complete = 0;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "participants");
  json_builder_begin_array (b);
  for (guint i = 0; ids[i]; i++) {
    g_autoptr (GstStructure) s =
        legba_call_get_remote_stats (app->call, ids[i]);
    gboolean has_video = FALSE, has_audio = FALSE;
    guint bits;
    guint64 video = field_u64 (s, "video-frames");
    guint64 audio = field_u64 (s, "audio-buffers");
    guint64 data = field_u64 (s, "data-messages");

    gst_structure_get_boolean (s, "video-published", &has_video);
    gst_structure_get_boolean (s, "audio-published", &has_audio);
    bits = (has_video ? 1 : 0) | (has_audio ? 2 : 0);

    if ((!(bits & 1) || video > 0) && (!(bits & 2) || audio > 0) &&
        bits != 0 && data > 0)
      complete++;
    else if (opt_expect >= 0)
      g_printerr ("%s: from %s: %" G_GUINT64_FORMAT " video frames%s, %"
          G_GUINT64_FORMAT " audio buffers%s, %" G_GUINT64_FORMAT
          " data messages\n", g_get_prgname (),
          gst_structure_get_string (s, "identity"), video,
          bits & 1 ? "" : " (publishes none)", audio,
          bits & 2 ? "" : " (publishes none)", data);
    json_builder_begin_object (b);
    json_builder_set_member_name (b, "id");
    json_builder_add_string_value (b, ids[i]);
    json_builder_set_member_name (b, "identity");
    json_builder_add_string_value (b, gst_structure_get_string (s, "identity"));
    json_builder_set_member_name (b, "video_frames");
    json_builder_add_int_value (b, video);
    json_builder_set_member_name (b, "audio_buffers");
    json_builder_add_int_value (b, audio);
    json_builder_set_member_name (b, "data_messages");
    json_builder_add_int_value (b, data);
    if (opt_latency) {
      json_builder_set_member_name (b, "latency_p50");
      json_builder_add_double_value (b, field_double (s, "latency-p50", -1));
      json_builder_set_member_name (b, "latency_p95");
      json_builder_add_double_value (b, field_double (s, "latency-p95", -1));
      json_builder_set_member_name (b, "latency_frames");
      json_builder_add_int_value (b, field_u64 (s, "latency-frames"));
    }
    json_builder_end_object (b);
  }
  json_builder_end_array (b);
  add_ms (b, "joined_ms", app->joined);
  add_ms (b, "first_video_ms", app->first_video);
  json_builder_end_object (b);
  if (opt_json) {
    g_autoptr (JsonNode) root = json_builder_get_root (b);
    g_autofree char *text = json_to_string (root, FALSE);

    printf ("%s\n", text);
    fflush (stdout);
  }
  if (opt_expect >= 0 && complete < (guint) opt_expect) {
    g_printerr ("%s: media and data came from %u of the %d participants "
        "expected\n", g_get_prgname (), complete, opt_expect);
    return FALSE;
  }
  return TRUE;
}

static gboolean
configure (App * app, GError ** error)
{
  LegbaCallVideo video;
  LegbaCallAudio audio;
  LegbaCallDisplay display;
  LegbaVideoCodec codec;
  GEnumClass *prefers = g_type_class_ref (LEGBA_TYPE_ENCODER_PREFER);
  GEnumValue *prefer = g_enum_get_value_by_nick (prefers, opt_prefer);
  const char *key = opt_key ? opt_key : g_getenv ("LEGBA_APP_KEY");
  const char *secret = opt_secret ? opt_secret : g_getenv ("LEGBA_APP_SECRET");

  g_type_class_unref (prefers);
  if (opt_server == NULL || opt_room == NULL || opt_identity == NULL) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
        "--server, --room and --identity are required");
    return FALSE;
  }
  if (key == NULL) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
        "the app key is required (--key or LEGBA_APP_KEY)");
    return FALSE;
  }
  if (!legba_call_video_from_string (opt_video, &video)) {
    if (g_file_test (opt_video, G_FILE_TEST_EXISTS)) {
      video = LEGBA_CALL_VIDEO_FILE;
    } else {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
          "--video %s: not test, camera, none or an existing file", opt_video);
      return FALSE;
    }
  }
  if (!legba_call_audio_from_string (opt_audio, &audio) ||
      !legba_call_display_from_string (opt_display, &display) ||
      display == LEGBA_CALL_DISPLAY_APPSINK ||
      !legba_video_codec_from_string (opt_codec, &codec) ||
      (codec != LEGBA_VIDEO_CODEC_H264 && codec != LEGBA_VIDEO_CODEC_VP8) ||
      prefer == NULL) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
        "unknown --audio %s, --display %s, --codec %s or --prefer %s",
        opt_audio, opt_display, opt_codec, opt_prefer);
    return FALSE;
  }
  if (opt_bitrate < 10 || opt_width < 16 || opt_height < 16 || opt_fps < 1
      || opt_fps > 120 || opt_duration < 0 || opt_proof_timeout < 1
      || opt_max_participants < 0 || opt_video_fec < 0) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
        "--bitrate, --width, --height, --fps, --duration, "
        "--encoder-proof-timeout or --max-participants out of range");
    return FALSE;
  }
  if (opt_send_data != NULL) {
    app->send_data = json_from_string (opt_send_data, error);
    if (app->send_data == NULL) {
      g_prefix_error (error, "--send-data: ");
      return FALSE;
    }
  }
  app->call = legba_call_new (opt_server, opt_room, opt_identity);
  g_object_set (app->call, "app-key", key, "app-secret",
      opt_token || opt_auth_url ? NULL : secret, "app-id", opt_app_id,
      "token", opt_token, "auth-url", opt_auth_url,
      "display-name", opt_name, "video", video, "audio", audio,
      "display", display, "codec", codec, "encoder-prefer", prefer->value,
      "encoder-factory", opt_encoder,
      "encoder-proof-timeout", (guint) opt_proof_timeout,
      "bitrate", opt_bitrate * 1000,
      "width", opt_width, "height", opt_height, "framerate", opt_fps,
      "measure-latency", opt_latency, NULL);
  if (video == LEGBA_CALL_VIDEO_FILE)
    g_object_set (app->call, "video-file", opt_video, NULL);
  return TRUE;
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GDataInputStream) input = NULL;
  App app = { 0, };
  gboolean ok;

  app.started = g_get_monotonic_time ();
  setlocale (LC_ALL, "");
  context = g_option_context_new ("- join a Legba room with audio, video "
      "and data");
  g_option_context_add_main_entries (context, entries, NULL);
  g_option_context_add_group (context, gst_init_get_option_group ());
  g_option_context_set_description (context,
      "Prints participants as they join and leave, and with --stats a line\n"
      "of live stats every second (a progress line on a terminal). With\n"
      "--expect-participants N it exits 0 only if, by the end of\n"
      "--duration, video (from those who publish it), audio and at least\n"
      "one data message came from N other participants.\n"
      "\n"
      "Exit status: 0 on success, 1 when the call failed or the expected\n"
      "media and data did not all arrive, 2 on a usage error.\n");
  if (!g_option_context_parse (context, &argc, &argv, &error))
    return usage_error (error->message);
  if (argc > 1)
    return usage_error ("unexpected argument");
  if (!configure (&app, &error))
    return usage_error (error->message);
  legba_call_plugin_ensure ();

  app.loop = g_main_loop_new (NULL, FALSE);
  app.tty = isatty (STDERR_FILENO);
  g_signal_connect (app.call, "error", G_CALLBACK (on_error), &app);
  g_signal_connect (app.call, "warning", G_CALLBACK (on_warning), &app);
  g_signal_connect (app.call, "notify::state", G_CALLBACK (on_state), &app);
  g_signal_connect (app.call, "participant-joined", G_CALLBACK (on_joined),
      &app);
  g_signal_connect (app.call, "participant-left", G_CALLBACK (on_left), &app);
  g_signal_connect (app.call, "data-received", G_CALLBACK (on_data), &app);
  if (opt_stats)
    g_signal_connect (app.call, "stats-updated", G_CALLBACK (on_stats), &app);
  g_unix_signal_add (SIGINT, on_signal, &app);
  g_unix_signal_add (SIGTERM, on_signal, &app);
  if (opt_duration > 0)
    g_timeout_add ((guint) (opt_duration * 1000), on_duration, &app);
  if (opt_json)
    g_timeout_add (10, on_first_video_poll, &app);
  if (opt_chat) {
    g_autoptr (GInputStream) in = g_unix_input_stream_new (STDIN_FILENO, FALSE);

    input = g_data_input_stream_new (in);
    g_data_input_stream_read_line_async (input, G_PRIORITY_DEFAULT, NULL,
        on_line_read, &app);
  }

  if (!legba_call_start (app.call, &error)) {
    g_printerr ("%s: %s\n", g_get_prgname (), error->message);
    app.failed = TRUE;
  } else {
    /* each start makes a new room, which makes its peer connections
     * from the main loop on */
    if (opt_no_cc)
      g_object_set (legba_call_get_room (app.call), "congestion-control",
          FALSE, NULL);
    if (opt_video_fec > 0)
      g_object_set (legba_call_get_room (app.call), "video-fec-percentage",
          (guint) MIN (opt_video_fec, 100), NULL);
    if (opt_max_participants > 0)
      g_object_set (legba_call_get_room (app.call), "max-participants",
          (guint) opt_max_participants, NULL);
    g_main_loop_run (app.loop);
  }
  legba_call_stop (app.call);
  if (app.progress_shown)
    fputs ("\n", stderr);
  ok = !app.failed && report (&app);

  g_object_unref (app.call);
  g_clear_pointer (&app.send_data, json_node_unref);
  g_main_loop_unref (app.loop);
  return ok ? EXIT_SUCCESS : EXIT_FAILED;
}
