/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * gst-peer: a GStreamer participant for the interop and process tests. It
 * runs one `legbaroom` (from GST_PLUGIN_PATH), feeds it test video (H.264
 * or VP8) and Opus audio unless told not to, decodes every received track
 * and reports on stdout, one JSON object per line:
 *
 *   {"event":"pad-added","pad":"recv_video_0","participant":"bob-k3x9q2"}
 *   {"event":"counts","pads":{"recv_video_0":{"participant":"bob-k3x9q2",
 *     "kind":"video","buffers":41}},"webrtcbins":1,"state":"playing"}
 *   {"event":"pad-removed","pad":"recv_video_0","participant":"bob-k3x9q2"}
 *   {"event":"message","name":"legba-participant-left","fields":"..."}
 *   {"event":"error","message":"...","debug":"..."}
 *
 * "buffers" counts decoded frames (video) or decoded buffers (audio): the
 * tests assert on what was decoded, never on what was sent. SIGTERM or
 * SIGINT stops the pipeline and exits 0 ({"event":"stopped"} last); a
 * GStreamer error exits 1 after reporting it.
 */

#include <glib-unix.h>
#include <gst/gst.h>
#include <json-glib/json-glib.h>
#include <legba-test.h>
#include <stdio.h>
#include <string.h>

typedef struct
{
  char *pad;
  char *participant;
  const char *kind;
  gint buffers;                 /* atomic: counted on streaming threads */
  gboolean removed;
  GstElement *queue;
  GstElement *decodebin;
  GstElement *sink;             /* set once decodebin exposed its pad */
} Track;

typedef struct
{
  GMainLoop *loop;
  GstElement *pipeline;
  GstElement *room;
  GMutex lock;
  GHashTable *tracks;           /* pad name -> Track (lock) */
  int status;
} Peer;

static char *opt_server_url;
static char *opt_app_key;
static char *opt_app_secret;
static char *opt_token;
static char *opt_auth_url;
static char *opt_room;
static char *opt_identity;
static char *opt_video = (char *) "h264";
static gboolean opt_no_audio;
static char *opt_room_props = (char *) "";
static int opt_report_ms = 200;

static GOptionEntry entries[] = {
  {"server-url", 0, 0, G_OPTION_ARG_STRING, &opt_server_url,
      "ws:// URL of the signalling server", "URL"},
  {"app-key", 0, 0, G_OPTION_ARG_STRING, &opt_app_key, "App key", "KEY"},
  {"app-secret", 0, 0, G_OPTION_ARG_STRING, &opt_app_secret,
      "App secret (signs locally; else --token)", "SECRET"},
  {"token", 0, 0, G_OPTION_ARG_STRING, &opt_token, "Join token", "TOKEN"},
  {"auth-url", 0, 0, G_OPTION_ARG_STRING, &opt_auth_url,
      "Auth endpoint (legba-server's /apps/ID/auth for a token)", "URL"},
  {"room", 0, 0, G_OPTION_ARG_STRING, &opt_room, "Room name", "ROOM"},
  {"identity", 0, 0, G_OPTION_ARG_STRING, &opt_identity, "Identity", "ID"},
  {"video", 0, 0, G_OPTION_ARG_STRING, &opt_video,
      "Video sent: h264, vp8 or none (default h264)", "CODEC"},
  {"no-audio", 0, 0, G_OPTION_ARG_NONE, &opt_no_audio, "Send no audio",
      NULL},
  {"room-props", 0, 0, G_OPTION_ARG_STRING, &opt_room_props,
      "More legbaroom properties, as in a launch line", "PROPS"},
  {"report-ms", 0, 0, G_OPTION_ARG_INT, &opt_report_ms,
      "Milliseconds between counts lines (default 200)", "MS"},
  {NULL}
};

static void
emit (JsonBuilder * b)
{
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *text = NULL;

  json_builder_end_object (b);
  root = json_builder_get_root (b);
  text = json_to_string (root, FALSE);
  fprintf (stdout, "%s\n", text);
  fflush (stdout);
}

static JsonBuilder *
event_new (const char *event)
{
  JsonBuilder *b = json_builder_new ();

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "event");
  json_builder_add_string_value (b, event);
  return b;
}

static void
emit_track_event (const char *event, Track * t)
{
  g_autoptr (JsonBuilder) b = event_new (event);

  json_builder_set_member_name (b, "pad");
  json_builder_add_string_value (b, t->pad);
  json_builder_set_member_name (b, "participant");
  json_builder_add_string_value (b, t->participant);
  json_builder_set_member_name (b, "kind");
  json_builder_add_string_value (b, t->kind);
  emit (b);
}

static void
track_free (Track * t)
{
  g_free (t->pad);
  g_free (t->participant);
  g_free (t);
}

static GstPadProbeReturn
count_buffer (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  Track *t = data;

  if (info->type & GST_PAD_PROBE_TYPE_BUFFER_LIST)
    g_atomic_int_add (&t->buffers,
        gst_buffer_list_length (GST_PAD_PROBE_INFO_BUFFER_LIST (info)));
  else
    g_atomic_int_inc (&t->buffers);
  return GST_PAD_PROBE_OK;
}

/* decodebin exposed the decoded stream: count it into a fakesink. */
static void
on_decoded_pad (GstElement * decodebin, GstPad * pad, Peer * peer)
{
  Track *t = g_object_get_data (G_OBJECT (decodebin), "track");
  GstElement *sink = gst_element_factory_make ("fakesink", NULL);
  g_autoptr (GstPad) sinkpad = NULL;

  g_object_set (sink, "sync", FALSE, "async", FALSE, NULL);
  gst_bin_add (GST_BIN (peer->pipeline), sink);
  sinkpad = gst_element_get_static_pad (sink, "sink");
  if (gst_pad_link (pad, sinkpad) != GST_PAD_LINK_OK) {
    gst_bin_remove (GST_BIN (peer->pipeline), sink);
    return;
  }
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER |
      GST_PAD_PROBE_TYPE_BUFFER_LIST, count_buffer, t, NULL);
  gst_element_sync_state_with_parent (sink);
  g_mutex_lock (&peer->lock);
  t->sink = sink;
  g_mutex_unlock (&peer->lock);
}

static char *
pad_participant (GstPad * pad)
{
  char *id = NULL;

  if (g_object_class_find_property (G_OBJECT_GET_CLASS (pad), "participant-id"))
    g_object_get (pad, "participant-id", &id, NULL);
  return id ? id : g_strdup ("");
}

/* A received track: queue ! decodebin ! fakesink, counted. */
static void
on_pad_added (GstElement * room, GstPad * pad, Peer * peer)
{
  g_autofree char *name = gst_pad_get_name (pad);
  g_autoptr (GstPad) sinkpad = NULL;
  Track *t;

  if (GST_PAD_DIRECTION (pad) != GST_PAD_SRC)
    return;
  t = g_new0 (Track, 1);
  t->pad = g_strdup (name);
  t->participant = pad_participant (pad);
  t->kind = g_str_has_prefix (name, "recv_audio") ? "audio" : "video";
  t->queue = gst_element_factory_make ("queue", NULL);
  t->decodebin = gst_element_factory_make ("decodebin", NULL);
  g_object_set_data (G_OBJECT (t->decodebin), "track", t);
  g_signal_connect (t->decodebin, "pad-added", G_CALLBACK (on_decoded_pad),
      peer);
  gst_bin_add_many (GST_BIN (peer->pipeline), t->queue, t->decodebin, NULL);
  gst_element_link (t->queue, t->decodebin);
  gst_element_sync_state_with_parent (t->decodebin);
  gst_element_sync_state_with_parent (t->queue);
  sinkpad = gst_element_get_static_pad (t->queue, "sink");
  if (gst_pad_link (pad, sinkpad) != GST_PAD_LINK_OK)
    g_printerr ("gst-peer: cannot link %s\n", name);
  g_mutex_lock (&peer->lock);
  g_hash_table_replace (peer->tracks, g_strdup (name), t);
  g_mutex_unlock (&peer->lock);
  emit_track_event ("pad-added", t);
}

typedef struct
{
  Peer *peer;
  char *pad;
} Removal;

/* On the main thread: the decoding chain of a removed pad goes away. */
static gboolean
remove_chain (gpointer data)
{
  Removal *r = data;
  Peer *peer = r->peer;
  GstElement *elements[3];
  Track *t;

  g_mutex_lock (&peer->lock);
  t = g_hash_table_lookup (peer->tracks, r->pad);
  if (!t || t->removed) {
    g_mutex_unlock (&peer->lock);
    return G_SOURCE_REMOVE;
  }
  t->removed = TRUE;
  elements[0] = t->queue;
  elements[1] = t->decodebin;
  elements[2] = t->sink;
  t->queue = t->decodebin = t->sink = NULL;
  g_mutex_unlock (&peer->lock);
  for (guint i = 0; i < G_N_ELEMENTS (elements); i++) {
    if (!elements[i])
      continue;
    gst_element_set_locked_state (elements[i], TRUE);
    gst_element_set_state (elements[i], GST_STATE_NULL);
    gst_bin_remove (GST_BIN (peer->pipeline), elements[i]);
  }
  emit_track_event ("pad-removed", t);
  return G_SOURCE_REMOVE;
}

static void
removal_free (gpointer data)
{
  Removal *r = data;

  g_free (r->pad);
  g_free (r);
}

static void
on_pad_removed (GstElement * room, GstPad * pad, Peer * peer)
{
  Removal *r;

  if (GST_PAD_DIRECTION (pad) != GST_PAD_SRC)
    return;
  r = g_new0 (Removal, 1);
  r->peer = peer;
  r->pad = gst_pad_get_name (pad);
  g_idle_add_full (G_PRIORITY_DEFAULT, remove_chain, r, removal_free);
}

static int
count_webrtcbins (GstElement * room)
{
  g_autoptr (GstIterator) it = gst_bin_iterate_recurse (GST_BIN (room));
  GValue item = G_VALUE_INIT;
  gboolean done = FALSE;
  int n = 0;

  while (!done) {
    switch (gst_iterator_next (it, &item)) {
      case GST_ITERATOR_OK:{
        GstElementFactory *f = gst_element_get_factory (g_value_get_object
            (&item));
        if (f && g_strcmp0 (GST_OBJECT_NAME (f), "webrtcbin") == 0)
          n++;
        g_value_reset (&item);
        break;
      }
      case GST_ITERATOR_RESYNC:
        gst_iterator_resync (it);
        n = 0;
        break;
      default:
        done = TRUE;
        break;
    }
  }
  g_value_unset (&item);
  return n;
}

static gboolean
report_counts (gpointer data)
{
  Peer *peer = data;
  g_autoptr (JsonBuilder) b = event_new ("counts");
  GHashTableIter iter;
  gpointer key, value;
  GstState state;

  json_builder_set_member_name (b, "pads");
  json_builder_begin_object (b);
  g_mutex_lock (&peer->lock);
  g_hash_table_iter_init (&iter, peer->tracks);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    Track *t = value;

    json_builder_set_member_name (b, key);
    json_builder_begin_object (b);
    json_builder_set_member_name (b, "participant");
    json_builder_add_string_value (b, t->participant);
    json_builder_set_member_name (b, "kind");
    json_builder_add_string_value (b, t->kind);
    json_builder_set_member_name (b, "buffers");
    json_builder_add_int_value (b, g_atomic_int_get (&t->buffers));
    json_builder_set_member_name (b, "removed");
    json_builder_add_boolean_value (b, t->removed);
    json_builder_end_object (b);
  }
  g_mutex_unlock (&peer->lock);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "webrtcbins");
  json_builder_add_int_value (b, count_webrtcbins (peer->room));
  gst_element_get_state (peer->pipeline, &state, NULL, 0);
  json_builder_set_member_name (b, "state");
  json_builder_add_string_value (b, gst_element_state_get_name (state));
  emit (b);
  return G_SOURCE_CONTINUE;
}

static gboolean
on_bus_message (GstBus * bus, GstMessage * msg, gpointer data)
{
  Peer *peer = data;

  switch (GST_MESSAGE_TYPE (msg)) {
    case GST_MESSAGE_ELEMENT:{
      const GstStructure *s = gst_message_get_structure (msg);
      g_autoptr (JsonBuilder) b = event_new ("message");
      g_autofree char *fields = s ? gst_structure_to_string (s) : NULL;

      json_builder_set_member_name (b, "source");
      json_builder_add_string_value (b, GST_MESSAGE_SRC_NAME (msg));
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, s ? gst_structure_get_name (s) : "");
      json_builder_set_member_name (b, "fields");
      json_builder_add_string_value (b, fields ? fields : "");
      emit (b);
      break;
    }
    case GST_MESSAGE_ERROR:
    case GST_MESSAGE_WARNING:{
      g_autoptr (GError) error = NULL;
      g_autofree char *debug = NULL;
      gboolean fatal = GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR;
      g_autoptr (JsonBuilder) b = event_new (fatal ? "error" : "warning");

      if (fatal)
        gst_message_parse_error (msg, &error, &debug);
      else
        gst_message_parse_warning (msg, &error, &debug);
      json_builder_set_member_name (b, "source");
      json_builder_add_string_value (b, GST_MESSAGE_SRC_NAME (msg));
      json_builder_set_member_name (b, "message");
      json_builder_add_string_value (b, error->message);
      json_builder_set_member_name (b, "debug");
      json_builder_add_string_value (b, debug ? debug : "");
      emit (b);
      if (fatal) {
        peer->status = 1;
        g_main_loop_quit (peer->loop);
      }
      break;
    }
    default:
      break;
  }
  return G_SOURCE_CONTINUE;
}

static gboolean
on_stop_signal (gpointer data)
{
  Peer *peer = data;

  g_main_loop_quit (peer->loop);
  return G_SOURCE_CONTINUE;
}

static char *
launch_line (void)
{
  GString *s = g_string_new ("legbaroom name=r");

  g_string_append_printf (s, " server-url=\"%s\" app-key=\"%s\" room=\"%s\""
      " identity=\"%s\"", opt_server_url, opt_app_key, opt_room, opt_identity);
  if (opt_token)
    g_string_append_printf (s, " token=\"%s\"", opt_token);
  if (opt_auth_url)
    g_string_append_printf (s, " auth-url=\"%s\"", opt_auth_url);
  if (opt_app_secret)
    g_string_append_printf (s, " app-secret=\"%s\"", opt_app_secret);
  g_string_append_printf (s, " %s", opt_room_props);
  if (g_strcmp0 (opt_video, "h264") == 0)
    g_string_append (s, " videotestsrc is-live=true pattern=ball"
        " ! video/x-raw,width=320,height=240,framerate=15/1"
        " ! x264enc tune=zerolatency speed-preset=ultrafast key-int-max=30"
        " bitrate=300 ! video/x-h264,profile=constrained-baseline"
        " ! r.video_0");
  else if (g_strcmp0 (opt_video, "vp8") == 0)
    g_string_append (s, " videotestsrc is-live=true pattern=ball"
        " ! video/x-raw,width=320,height=240,framerate=15/1"
        " ! vp8enc deadline=1 cpu-used=8 keyframe-max-dist=30"
        " target-bitrate=300000 ! r.video_0");
  if (!opt_no_audio)
    g_string_append (s, " audiotestsrc is-live=true wave=sine"
        " ! audio/x-raw,rate=48000,channels=1 ! opusenc ! r.audio_0");
  return g_string_free (s, FALSE);
}

static gboolean
parse_args (int *argc, char ***argv)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- legbaroom test "
      "participant");
  g_autoptr (GError) error = NULL;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_add_group (ctx, gst_init_get_option_group ());
  if (!g_option_context_parse (ctx, argc, argv, &error)) {
    g_printerr ("gst-peer: %s\n", error->message);
    return FALSE;
  }
  if (!opt_server_url || !opt_app_key || !opt_room || !opt_identity ||
      (!opt_token && !opt_app_secret)) {
    g_printerr ("gst-peer: --server-url, --app-key, --room, --identity and "
        "--token or --app-secret are required\n");
    return FALSE;
  }
  return TRUE;
}

int
main (int argc, char **argv)
{
  Peer peer = { 0 };
  g_autoptr (GError) error = NULL;
  g_autofree char *line = NULL;
  GstBus *bus;

  legba_test_tolerate_rtpsession_race ();
  if (!parse_args (&argc, &argv))
    return 2;
  line = launch_line ();
  peer.pipeline = gst_parse_launch_full (line, NULL,
      GST_PARSE_FLAG_FATAL_ERRORS, &error);
  if (!peer.pipeline) {
    g_printerr ("gst-peer: %s\n", error->message);
    return 2;
  }
  peer.room = gst_bin_get_by_name (GST_BIN (peer.pipeline), "r");
  peer.loop = g_main_loop_new (NULL, FALSE);
  g_mutex_init (&peer.lock);
  peer.tracks = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      (GDestroyNotify) track_free);
  g_signal_connect (peer.room, "pad-added", G_CALLBACK (on_pad_added), &peer);
  g_signal_connect (peer.room, "pad-removed", G_CALLBACK (on_pad_removed),
      &peer);
  bus = gst_element_get_bus (peer.pipeline);
  gst_bus_add_watch (bus, on_bus_message, &peer);
  g_unix_signal_add (SIGTERM, on_stop_signal, &peer);
  g_unix_signal_add (SIGINT, on_stop_signal, &peer);
  g_timeout_add (opt_report_ms, report_counts, &peer);

  if (gst_element_set_state (peer.pipeline, GST_STATE_PLAYING) ==
      GST_STATE_CHANGE_FAILURE)
    peer.status = 1;
  else
    g_main_loop_run (peer.loop);

  gst_element_set_state (peer.pipeline, GST_STATE_NULL);
  report_counts (&peer);
  gst_bus_remove_watch (bus);
  gst_object_unref (bus);
  gst_object_unref (peer.room);
  gst_object_unref (peer.pipeline);
  g_hash_table_unref (peer.tracks);
  g_mutex_clear (&peer.lock);
  g_main_loop_unref (peer.loop);
  fprintf (stdout, "{\"event\":\"stopped\",\"status\":%d}\n", peer.status);
  fflush (stdout);
  gst_deinit ();
  return peer.status;
}
