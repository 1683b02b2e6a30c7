/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The library's own CPU per data-channel message, the transport left out
 * (suite 2 of docs/benchmarks.md; bench/data/bench.py drives it).
 *
 *   data-cpu --dir send|recv --size short|4k [--batches B] [--batch N]
 *            [--only CONFIG]
 *
 * The same message, three ways:
 *   floor      the envelope's bytes, encoded beforehand, handed to the
 *              channel (send) / reported by plain webrtcbin's channel
 *              (receive): what plain webrtcbin costs an application here
 *   json-glib  plain webrtcbin with json-glib doing the same JSON work: the
 *              envelope {"topic", "data"} built and serialized (send), or
 *              parsed and its members checked (receive): the honest baseline
 *   legba      legba_room_send_json() down to the hand-over to the channel
 *              (send), and from SCTP to LegbaRoom::data-received (receive):
 *              the real LegbaRoom code, with one participant whose channels
 *              are open
 * and, on receive only:
 *   legba-burst    legba with the messages of a batch arriving before the
 *                  room's main context runs (it reports them in one
 *                  dispatch, as it does when they come faster than that)
 *   json-glib-hop  json-glib with the hand-over LegbaRoom does: each
 *                  message's text copied from webrtcbin's thread onto the
 *                  application's main context and parsed there, as the
 *                  room reports messages on its context
 *   legba-sync     legba with the application handling messages on the
 *                  thread they arrive on (LegbaRoom::sync-data-received)
 *                  alone: no hand-over to the room's context
 *
 * The transport is left out on both sides. Sending, the room hands each
 * message to sink_send() (legba_room_data_set_send_func) instead of
 * webrtcbin's SCTP encoder, and the floor and json-glib configurations
 * call the same function, which copies the message's bytes once, as
 * webrtcbin does when it takes a message. Receiving starts where SCTP
 * hands a message over: a buffer with its receive meta, made before the
 * batch is timed, pushed on the channel's stream (a pad named as
 * sctpdec's), as sctpdec 1.22 does. For plain webrtcbin the stream is
 * linked to an appsink that does what its data channel's does (the text
 * copied out, a task on webrtcbin's thread that emits on-message-string
 * under the connection's lock); for Legba it is linked the same way, and
 * the room's tap (legba-room-tap.c), on the stream since it was added,
 * takes the messages before that appsink, after the channel's DCEP open.
 * The tasks of "webrtcbin's thread" and the room's reports both run on
 * this thread's context, which the thread holds throughout
 * (g_main_context_acquire), as a running main loop does: a hand-over made
 * on it then needs no wakeup, whichever way it is made, and the thread
 * switch a real hand-over also costs is counted for no configuration.
 *
 * Each batch of N messages is timed on the thread's CPU clock
 * (CLOCK_THREAD_CPUTIME_ID: time the scheduler gives to other processes
 * is not counted), and the configurations alternate batch by batch
 * (A B C, C B A, ...) after one warm-up batch each. Prints one JSON line:
 * ns per message, per batch, per configuration.
 *
 * Under callgrind (--only CONFIG --batches 1) only measured_batch() is
 * meant to be counted: valgrind --tool=callgrind --collect-atstart=no
 * --toggle-collect=measured_batch.
 */
#include <legba/legba.h>
#include <legba/room/legba-room-data-private.h>
#include <gst/app/app.h>
#include <gst/sctp/sctpreceivemeta.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define TOPIC "pose"
#define SINK_MAX (64 * 1024)

typedef enum
{
  FLOOR,
  JSON_GLIB,
  LEGBA,
  LEGBA_BURST,
  JSON_HOP,
  LEGBA_SYNC,
  N_CONFIGS
} Config;

static const char *config_names[N_CONFIGS] = {
  "floor", "json-glib", "legba", "legba-burst", "json-glib-hop", "legba-sync"
};

/* what the transport would take */
static char sink_copy[SINK_MAX];
static guint64 sink_msgs;
static guint64 sink_bytes;

/* what the application got */
static guint64 app_msgs;
static guint64 app_bytes;

static gboolean receiving;

static struct
{
  GstElement *pipeline;
  GstElement *webrtcbin;        /* makes the plain channels */
  LegbaRoom *room;
  LegbaParticipant *participant;
  LegbaPeer *peer;
  GstWebRTCDataChannel *floor, *json, *hop, *legba[2];
  gulong handlers[2];           /* data-received, sync-data-received */
  JsonParser *parser;
  JsonNode *data;
  char *text;                   /* the envelope, as Legba writes it */
  /* receive: where SCTP hands each channel's messages over */
  GstElement *sctp;             /* a pipeline: the pads' elements, the
                                 * channels' appsinks */
  GstPad *stream[N_CONFIGS];    /* by config: the channel's stream */
  GMutex pc_lock;               /* stands for webrtcbin's */
  guint on_message_string;      /* the channels' signal */
  GstBuffer **arrived;          /* the batch's messages, as SCTP gives
                                 * them: made before the batch is timed */
} b;

/* RFC 8831 §8 */
#define PPID_DCEP 50
#define PPID_STRING 51

G_GNUC_NO_INLINE static gboolean
sink_send (GstWebRTCDataChannel * channel, const char *text, GBytes * bytes,
    GError ** error)
{
  const void *data;
  gsize size;

  if (text != NULL) {
    size = strlen (text);
    data = text;
  } else {
    data = g_bytes_get_data (bytes, &size);
  }
  memcpy (sink_copy, data, MIN (size, SINK_MAX));
  sink_msgs++;
  sink_bytes += size;
  return TRUE;
}

/* the application's handler: the same for every configuration */
G_GNUC_NO_INLINE static void
app_data (const char *topic, JsonNode * data)
{
  app_msgs++;
  app_bytes += topic != NULL && data != NULL;
}

G_GNUC_NO_INLINE static void
app_text (const char *text)
{
  app_msgs++;
  app_bytes += strlen (text);
}

/* ---- the three configurations, one message each ---- */

static void
send_floor (void)
{
  sink_send (b.floor, b.text, NULL, NULL);
}

static void
send_json (void)
{
  JsonObject *object = json_object_new ();
  JsonNode *root;
  char *text;

  json_object_set_string_member (object, "topic", TOPIC);
  json_object_set_member (object, "data", json_node_ref (b.data));
  root = json_node_init_object (json_node_alloc (), object);
  json_object_unref (object);
  text = json_to_string (root, FALSE);
  sink_send (b.json, text, NULL, NULL);
  g_free (text);
  json_node_unref (root);
}

static void
send_legba (void)
{
  GError *error = NULL;

  if (!legba_room_send_json (b.room, b.data, TOPIC,
          LEGBA_RELIABILITY_RELIABLE, NULL, &error))
    g_error ("send_json: %s", error->message);
}

static void
on_floor_string (GstWebRTCDataChannel * channel, const char *str, gpointer u)
{
  app_text (str);
}

static void
parse_and_report (const char *str)
{
  JsonNode *root, *data, *topic;
  JsonObject *object;

  if (!json_parser_load_from_data (b.parser, str, -1, NULL))
    return;
  root = json_parser_get_root (b.parser);
  object = root && JSON_NODE_HOLDS_OBJECT (root) ?
      json_node_get_object (root) : NULL;
  data = object ? json_object_get_member (object, "data") : NULL;
  topic = object ? json_object_get_member (object, "topic") : NULL;
  if (data == NULL || (topic != NULL &&
          json_node_get_value_type (topic) != G_TYPE_STRING))
    return;
  app_data (topic ? json_node_get_string (topic) : NULL, data);
}

static void
on_json_string (GstWebRTCDataChannel * channel, const char *str, gpointer u)
{
  parse_and_report (str);
}

static gboolean
hop_parse (gpointer text)
{
  parse_and_report (text);
  return G_SOURCE_REMOVE;
}

/* as an application that reports messages on its main context, as the
 * room does: a copy of the text handed over, parsed there */
static void
on_hop_string (GstWebRTCDataChannel * channel, const char *str, gpointer u)
{
  GSource *source = g_idle_source_new ();

  g_source_set_callback (source, hop_parse, g_strdup (str), g_free);
  g_source_attach (source, NULL);
  g_source_unref (source);
}

static void
on_data_received (LegbaRoom * room, LegbaParticipant * from,
    const char *topic, JsonNode * data, gpointer u)
{
  app_data (topic, data);
}

/* the room's handlers: those of legba-sync in its batches, the other */
static void
handle_sync (gboolean sync)
{
  if (sync) {
    g_signal_handler_block (b.room, b.handlers[0]);
    g_signal_handler_unblock (b.room, b.handlers[1]);
    legba_room_enable_sync_data_emission (b.room);
  } else {
    legba_room_disable_sync_data_emission (b.room);
    g_signal_handler_block (b.room, b.handlers[1]);
    g_signal_handler_unblock (b.room, b.handlers[0]);
  }
}

/* until the room (or the context standing for webrtcbin's thread)
 * reported everything it was handed */
static void
dispatch_until (guint64 msgs)
{
  while (app_msgs < msgs)
    g_main_context_iteration (NULL, TRUE);
}

/* A message as SCTP hands it over (sctpdec 1.22: the bytes wrapped in a
 * buffer, with its receive meta), pushed on the channel's stream. */
static void
arrive (Config config, guint i)
{
  gst_pad_push (b.stream[config], g_steal_pointer (&b.arrived[i]));
}

static void
recv_one (Config config, guint i)
{
  guint64 before = app_msgs;

  arrive (config, i);
  dispatch_until (before + 1);
}

static void
run_batch (gboolean send, Config config, guint n)
{
  guint64 before = app_msgs;

  if (config == LEGBA_SYNC)
    handle_sync (TRUE);
  for (guint i = 0; i < n; i++) {
    if (!send) {
      /* legba-burst and legba-sync: no dispatch per message */
      if (config == LEGBA_BURST || config == LEGBA_SYNC)
        arrive (config, i);
      else
        recv_one (config, i);
      continue;
    }
    switch (config) {
      case FLOOR:
        send_floor ();
        break;
      case JSON_GLIB:
        send_json ();
        break;
      case LEGBA:
        send_legba ();
        break;
      default:
        g_assert_not_reached ();
    }
  }
  if (config == LEGBA_BURST)
    dispatch_until (before + n);
  if (config == LEGBA_SYNC) {
    if (app_msgs != before + n)
      g_error ("legba-sync: %" G_GUINT64_FORMAT " of %u messages reported",
          app_msgs - before, n);
    handle_sync (FALSE);
  }
}

/* callgrind counts this one (--toggle-collect=measured_batch) */
G_GNUC_NO_INLINE void measured_batch (gboolean send, Config config, guint n);

G_GNUC_NO_INLINE void
measured_batch (gboolean send, Config config, guint n)
{
  run_batch (send, config, n);
}

static gint64
thread_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
  return (gint64) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- receive: a channel's stream, as SCTP hands it over ---- */

/* What webrtcbin 1.22 does with each message of a channel's stream: its
 * appsink takes the buffer (sctpdec's pad is linked to it), the text is
 * copied out, and a task on webrtcbin's thread (an idle source on its
 * context, run under the connection's lock) emits on-message-string. The
 * task runs on this thread's context here, as the room's does. */
typedef struct
{
  GstWebRTCDataChannel *channel;
  char *text;
} Task;

static void
task_free (gpointer data)
{
  Task *t = data;

  g_free (t->text);
  g_object_unref (t->channel);
  g_free (t);
}

static gboolean
task_emit (gpointer data)
{
  Task *t = data;

  g_mutex_lock (&b.pc_lock);
  g_signal_emit (t->channel, b.on_message_string, 0, t->text);
  g_mutex_unlock (&b.pc_lock);
  return G_SOURCE_REMOVE;
}

static GstFlowReturn
plain_sample (GstAppSink * sink, gpointer channel)
{
  GstSample *sample = gst_app_sink_pull_sample (sink);
  GstBuffer *buffer = gst_sample_get_buffer (sample);
  GstSctpReceiveMeta *meta = gst_sctp_buffer_get_receive_meta (buffer);
  GstMapInfo map;
  GSource *source;
  Task *t;

  if (meta == NULL || meta->ppid != PPID_STRING ||
      !gst_buffer_map (buffer, &map, GST_MAP_READ))
    g_error ("a message webrtcbin would not take");
  t = g_new (Task, 1);
  t->channel = g_object_ref (channel);
  t->text = g_strndup ((const char *) map.data, map.size);
  gst_buffer_unmap (buffer, &map);
  gst_sample_unref (sample);
  source = g_idle_source_new ();
  g_source_set_callback (source, task_emit, t, task_free);
  g_source_attach (source, NULL);
  g_source_unref (source);
  return GST_FLOW_OK;
}

/* the DCEP open of the room's stream: the room takes the rest */
static GstFlowReturn
drop_sample (GstAppSink * sink, gpointer unused)
{
  gst_sample_unref (gst_app_sink_pull_sample (sink));
  return GST_FLOW_OK;
}

static GstBuffer *
sctp_buffer (const void *data, gsize size, guint32 ppid)
{
  GstBuffer *buffer = gst_buffer_new_wrapped (g_memdup2 (data, size), size);

  gst_sctp_buffer_add_receive_meta (buffer, ppid);
  return buffer;
}

/* stream @id of @parent, linked to an appsink that webrtcbin would have
 * made for its channel */
static GstPad *
stream_new (GstElement * parent, guint id, GstAppSinkCallbacks * callbacks,
    gpointer channel)
{
  g_autofree char *name = g_strdup_printf ("src_%u", id);
  GstPad *pad = gst_pad_new (name, GST_PAD_SRC);
  GstElement *sink = gst_element_factory_make ("appsink", NULL);
  g_autoptr (GstPad) sinkpad = NULL;
  g_autoptr (GstCaps) caps = gst_caps_new_any ();
  GstSegment segment;

  g_object_set (sink, "sync", FALSE, "async", FALSE, "caps", caps, NULL);
  gst_app_sink_set_callbacks (GST_APP_SINK (sink), callbacks, channel, NULL);
  gst_bin_add (GST_BIN (b.sctp), sink);
  gst_element_sync_state_with_parent (sink);
  /* a plain GstBin takes any pad: the room's tap sees it added */
  gst_element_add_pad (parent, pad);
  gst_pad_set_active (pad, TRUE);
  sinkpad = gst_element_get_static_pad (sink, "sink");
  if (gst_pad_link (pad, sinkpad) != GST_PAD_LINK_OK)
    g_error ("could not link stream %u", id);
  gst_pad_push_event (pad, gst_event_new_stream_start (name));
  gst_segment_init (&segment, GST_FORMAT_TIME);
  gst_pad_push_event (pad, gst_event_new_segment (&segment));
  return pad;
}

static void
streams_setup (void)
{
  static GstAppSinkCallbacks plain = {.new_sample = plain_sample };
  static GstAppSinkCallbacks dcep = {.new_sample = drop_sample };
  /* RFC 8832 §5.1: DATA_CHANNEL_OPEN, reliable, label "legba" */
  static const guint8 open[] = {
    0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00,
    'l', 'e', 'g', 'b', 'a'
  };
  GstElement *plain_dec = gst_bin_new ("sctpdec-plain");
  GstElement *dec = gst_bin_new ("sctpdec");

  g_mutex_init (&b.pc_lock);
  b.on_message_string = g_signal_lookup ("on-message-string",
      GST_TYPE_WEBRTC_DATA_CHANNEL);
  b.sctp = gst_pipeline_new ("sctp");
  gst_bin_add_many (GST_BIN (b.sctp), plain_dec, dec, NULL);
  if (gst_element_set_state (b.sctp, GST_STATE_PLAYING) ==
      GST_STATE_CHANGE_FAILURE)
    g_error ("the streams' pipeline does not start");
  /* as the room's peer connection does when webrtcbin adds its sctpdec */
  legba_peer_tap_decoder (b.peer, dec);
  b.stream[FLOOR] = stream_new (plain_dec, 1, &plain, b.floor);
  b.stream[JSON_GLIB] = stream_new (plain_dec, 3, &plain, b.json);
  b.stream[JSON_HOP] = stream_new (plain_dec, 5, &plain, b.hop);
  b.stream[LEGBA] = stream_new (dec, 1, &dcep, NULL);
  b.stream[LEGBA_BURST] = b.stream[LEGBA_SYNC] = b.stream[LEGBA];
  gst_pad_push (b.stream[LEGBA], sctp_buffer (open, sizeof open, PPID_DCEP));
}

static void
streams_teardown (void)
{
  gst_element_set_state (b.sctp, GST_STATE_NULL);
  gst_clear_object (&b.sctp);
  g_mutex_clear (&b.pc_lock);
}

/* the next batch's messages, as SCTP gives them (not timed) */
static void
arrivals (guint n)
{
  gsize size = strlen (b.text);

  for (guint i = 0; i < n; i++)
    b.arrived[i] = sctp_buffer (b.text, size, PPID_STRING);
}

/* ---- the room, with one participant whose channels are open ---- */

static GstWebRTCDataChannel *
plain_channel (const char *label)
{
  GstWebRTCDataChannel *channel = NULL;

  g_signal_emit_by_name (b.webrtcbin, "create-data-channel", label, NULL,
      &channel);
  if (channel == NULL)
    g_error ("webrtcbin made no data channel");
  return channel;
}

static void
setup (void)
{
  LegbaSignalClient *client;
  GError *error = NULL;

  b.pipeline = gst_pipeline_new ("bench");
  b.webrtcbin = gst_element_factory_make ("webrtcbin", NULL);
  if (b.webrtcbin == NULL)
    g_error ("no webrtcbin");
  gst_bin_add (GST_BIN (b.pipeline), b.webrtcbin);
  gst_element_set_state (b.pipeline, GST_STATE_READY);
  b.floor = plain_channel ("floor");
  b.json = plain_channel ("json");
  b.hop = plain_channel ("hop");
  b.legba[0] = plain_channel (LEGBA_ROOM_CHANNEL_RELIABLE);
  b.legba[1] = plain_channel (LEGBA_ROOM_CHANNEL_LOSSY);
  g_signal_connect (b.floor, "on-message-string",
      G_CALLBACK (on_floor_string), NULL);
  g_signal_connect (b.json, "on-message-string",
      G_CALLBACK (on_json_string), NULL);
  g_signal_connect (b.hop, "on-message-string",
      G_CALLBACK (on_hop_string), NULL);
  b.parser = json_parser_new_immutable ();

  /* never connected: the participant below is added by hand */
  client = legba_signal_client_new ("ws://127.0.0.1:9/", "bench");
  b.room = legba_room_new (LEGBA_SIGNALLER (client), GST_BIN (b.pipeline));
  g_object_unref (client);
  g_object_set (b.room, "room", "bench", "identity", "a", NULL);
  b.handlers[0] = g_signal_connect (b.room, "data-received",
      G_CALLBACK (on_data_received), NULL);
  b.handlers[1] = g_signal_connect (b.room, "sync-data-received",
      G_CALLBACK (on_data_received), NULL);
  g_signal_handler_block (b.room, b.handlers[1]);
  legba_room_data_set_send_func (sink_send);

  legba_room_core_member_added (b.room->core, "b-1", NULL,
      g_get_monotonic_time ());
  b.participant = g_object_ref (legba_room_find_participant (b.room, "b-1"));
  b.peer = legba_peer_new (b.room, b.participant, "bench-pc",
      LEGBA_PEER_OFFERER, &legba_room_peer_events, &error);
  if (b.peer == NULL)
    g_error ("peer: %s", error->message);
  legba_clear_source (&b.peer->connect_timeout);
  b.participant->peer = b.peer;
  g_hash_table_insert (b.room->peers, b.peer->pc, b.peer);
  legba_room_core_attach (b.room->core, "b-1", b.peer->pc);
  for (guint i = 0; i < 2; i++) {
    b.peer->channels[i] = g_object_ref (b.legba[i]);
    b.peer->channel_open[i] = TRUE;
    legba_peer_data_watch_channel (b.peer, b.legba[i]);
  }
  b.peer->connected = TRUE;
  legba_room_peer_events.connected (b.peer);
  /* the room's own first message (its mute state) */
  while (g_main_context_iteration (NULL, FALSE));
  if (receiving)
    streams_setup ();
}

static void
teardown (void)
{
  if (receiving)
    streams_teardown ();

  /* closes the peer connection and unlists the participant */
  legba_room_core_leave (b.room->core, FALSE);
  g_clear_object (&b.participant);
  while (g_main_context_iteration (NULL, FALSE));
  legba_room_data_set_send_func (NULL);
  g_clear_object (&b.room);
  gst_element_set_state (b.pipeline, GST_STATE_NULL);
  g_clear_object (&b.floor);
  g_clear_object (&b.json);
  g_clear_object (&b.hop);
  g_clear_object (&b.legba[0]);
  g_clear_object (&b.legba[1]);
  gst_clear_object (&b.pipeline);
  g_clear_object (&b.parser);
  json_node_unref (b.data);
  g_free (b.text);
}

/* short: ~50 bytes of JSON; 4k: an object of 4 KiB */
static void
make_message (gboolean large)
{
  GString *s = g_string_new (NULL);
  JsonObject *envelope;
  JsonNode *root;

  if (!large) {
    g_string_append (s, "{\"x\":12.5,\"y\":-3.25,\"id\":\"sensor-7\","
        "\"ok\":true}");
  } else {
    g_string_append (s, "{\"samples\":[");
    for (guint i = 0; s->len < 4096 - 48; i++)
      g_string_append_printf (s, "%s{\"t\":%u,\"v\":%u.25,\"tag\":\"s%03u\"}",
          i ? "," : "", 1000 + i, i * 7 % 1000, i);
    g_string_append (s, "],\"unit\":\"mV\"}");
  }
  b.data = json_from_string (s->str, NULL);
  g_assert (b.data != NULL);
  g_string_free (s, TRUE);
  envelope = json_object_new ();
  json_object_set_string_member (envelope, "topic", TOPIC);
  json_object_set_member (envelope, "data", json_node_ref (b.data));
  root = json_node_init_object (json_node_alloc (), envelope);
  json_object_unref (envelope);
  b.text = json_to_string (root, FALSE);
  json_node_unref (root);
}

int
main (int argc, char **argv)
{
  char *dir = NULL, *size = NULL, *only = NULL;
  guint batches = 20, batch = 1000;
  GOptionEntry entries[] = {
    {"dir", 0, 0, G_OPTION_ARG_STRING, &dir, "send or recv", "DIR"},
    {"size", 0, 0, G_OPTION_ARG_STRING, &size, "short or 4k", "SIZE"},
    {"batches", 0, 0, G_OPTION_ARG_INT, &batches, "batches a config", "B"},
    {"batch", 0, 0, G_OPTION_ARG_INT, &batch, "messages a batch", "N"},
    {"only", 0, 0, G_OPTION_ARG_STRING, &only, "one configuration", "C"},
    {NULL}
  };
  GOptionContext *ctx = g_option_context_new ("- data-channel CPU");
  GError *error = NULL;
  Config configs[N_CONFIGS];
  guint n_configs = 0;
  GArray *ns[N_CONFIGS];
  GString *out;
  gboolean send;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_add_group (ctx, gst_init_get_option_group ());
  if (!g_option_context_parse (ctx, &argc, &argv, &error)) {
    g_printerr ("%s\n", error->message);
    return 2;
  }
  g_option_context_free (ctx);
  if (g_strcmp0 (dir, "send") != 0 && g_strcmp0 (dir, "recv") != 0) {
    g_printerr ("--dir send|recv\n");
    return 2;
  }
  if (g_strcmp0 (size, "short") != 0 && g_strcmp0 (size, "4k") != 0) {
    g_printerr ("--size short|4k\n");
    return 2;
  }
  if (batches == 0 || batch == 0) {
    g_printerr ("--batches and --batch must be positive\n");
    return 2;
  }
  send = strcmp (dir, "send") == 0;
  receiving = !send;
  for (guint c = 0; c < N_CONFIGS; c++) {
    if ((c == LEGBA_BURST || c == JSON_HOP || c == LEGBA_SYNC) && send)
      continue;
    if (only == NULL || strcmp (only, config_names[c]) == 0)
      configs[n_configs++] = c;
  }
  if (n_configs == 0) {
    g_printerr ("--only floor|json-glib|legba, or on recv legba-burst, "
        "json-glib-hop or legba-sync\n");
    return 2;
  }

  make_message (strcmp (size, "4k") == 0);
  g_main_context_acquire (NULL);
  setup ();

  for (guint c = 0; c < N_CONFIGS; c++)
    ns[c] = g_array_new (FALSE, FALSE, sizeof (double));
  b.arrived = g_new0 (GstBuffer *, batch);
  /* one warm-up batch each, not counted */
  for (guint i = 0; i < n_configs; i++) {
    if (receiving)
      arrivals (batch);
    run_batch (send, configs[i], batch);
  }
  for (guint r = 0; r < batches; r++) {
    for (guint i = 0; i < n_configs; i++) {
      Config c = configs[r % 2 ? n_configs - 1 - i : i];
      gint64 t0;
      double v;

      if (receiving)
        arrivals (batch);
      t0 = thread_ns ();
      measured_batch (send, c, batch);
      v = (double) (thread_ns () - t0) / batch;
      g_array_append_val (ns[c], v);
    }
  }

  out = g_string_new (NULL);
  g_string_append_printf (out, "{\"dir\": \"%s\", \"size\": \"%s\", "
      "\"data_bytes\": %zu, \"wire_bytes\": %zu, \"batch\": %u, "
      "\"batches\": %u, \"sink_msgs\": %" G_GUINT64_FORMAT
      ", \"app_msgs\": %" G_GUINT64_FORMAT ", \"ns_per_msg\": {", dir, size,
      strlen (b.text) - strlen ("{\"topic\":\"" TOPIC "\",\"data\":}"),
      strlen (b.text), batch, batches, sink_msgs, app_msgs);
  for (guint i = 0; i < n_configs; i++) {
    Config c = configs[i];

    g_string_append_printf (out, "%s\"%s\": [", i ? ", " : "", config_names[c]);
    for (guint k = 0; k < ns[c]->len; k++)
      g_string_append_printf (out, "%s%.1f", k ? ", " : "",
          g_array_index (ns[c], double, k));
    g_string_append (out, "]");
  }
  g_string_append (out, "}}");
  puts (out->str);
  g_string_free (out, TRUE);
  for (guint c = 0; c < N_CONFIGS; c++)
    g_array_unref (ns[c]);
  teardown ();
  g_free (b.arrived);
  g_main_context_release (NULL);
  g_free (dir);
  g_free (size);
  g_free (only);
  return 0;
}
