/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The legbaroom element: properties, request pads, and gst-launch-1.0
 * style pipelines (a sender line and a receiver line, gst_parse_launch)
 * through legba-server running in this process on 127.0.0.1, or through
 * the in-process signaller of the room tests (test-hub.h).
 */
#include <gst/check/gstcheck.h>
#include <legba/legba.h>
#include <legba/server/server.h>

#include "test-hub.h"

#define APP_ID "1"
#define APP_KEY "room-key"
#define APP_SECRET "room-secret"
#define WAIT_MS 60000

static LegbaServer *server;

static void
start_server (void)
{
  g_autoptr (GError) error = NULL;

  server = legba_server_new ();
  fail_unless (legba_server_add_app (server, APP_ID, APP_KEY, APP_SECRET,
          &error));
  fail_unless (legba_server_listen (server, "127.0.0.1", 0, &error));
}

static void
stop_server (void)
{
  legba_server_shutdown (server);
  g_clear_object (&server);
  while (g_main_context_iteration (NULL, FALSE));
}

static gboolean
on_deadline (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Runs the default main context (the server's) until cond holds; fails
 * after WAIT_MS with the reason. */
#define WAIT_FOR(cond, reason) G_STMT_START { \
    gboolean expired_ = FALSE; \
    GSource *deadline_ = g_timeout_source_new (WAIT_MS); \
    g_source_set_callback (deadline_, on_deadline, &expired_, NULL); \
    g_source_attach (deadline_, NULL); \
    while (!(cond) && !expired_) \
      g_main_context_iteration (NULL, TRUE); \
    g_source_destroy (deadline_); \
    g_source_unref (deadline_); \
    fail_unless ((cond), "timed out waiting for %s", reason); \
  } G_STMT_END

typedef struct
{
  GstElement *pipeline;
  GMutex lock;
  guint frames;
  GPtrArray *messages;          /* GstStructure names, element messages */
  GError *error;
  GError *warning;
} Line;

static gboolean
on_bus (GstBus * bus, GstMessage * message, gpointer data)
{
  Line *line = data;

  switch (GST_MESSAGE_TYPE (message)) {
    case GST_MESSAGE_ELEMENT:{
      const GstStructure *s = gst_message_get_structure (message);

      g_ptr_array_add (line->messages, g_strdup (gst_structure_get_name (s)));
      /* and "legba-room-state/STATE" */
      if (gst_structure_has_name (s, "legba-room-state"))
        g_ptr_array_add (line->messages, g_strconcat ("legba-room-state/",
                gst_structure_get_string (s, "state"), NULL));
      break;
    }
    case GST_MESSAGE_ERROR:
      if (line->error == NULL) {
        g_autofree char *debug = NULL;

        g_autofree char *path = NULL;

        gst_message_parse_error (message, &line->error, &debug);
        path = gst_object_get_path_string (GST_MESSAGE_SRC (message));
        GST_CAT_INFO (check_debug, "error from %s: %s (%s)", path,
            line->error->message, debug);
      }
      break;
    case GST_MESSAGE_WARNING:
      if (line->warning == NULL)
        gst_message_parse_warning (message, &line->warning, NULL);
      break;
    default:
      break;
  }
  return G_SOURCE_CONTINUE;
}

static GstPadProbeReturn
count_frame (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  Line *line = data;

  g_mutex_lock (&line->lock);
  line->frames++;
  g_mutex_unlock (&line->lock);
  return GST_PAD_PROBE_OK;
}

static guint
frames (Line * line)
{
  guint n;

  g_mutex_lock (&line->lock);
  n = line->frames;
  g_mutex_unlock (&line->lock);
  return n;
}

static gboolean
has_message (Line * line, const char *name)
{
  for (guint i = 0; i < line->messages->len; i++)
    if (strcmp (line->messages->pdata[i], name) == 0)
      return TRUE;
  return FALSE;
}

/* A launch line with SERVER, KEY and SECRET replaced. */
static Line *
line_new (const char *format)
{
  Line *line = g_new0 (Line, 1);
  g_autofree char *url = server ? legba_server_get_url (server) : NULL;
  g_autoptr (GString) text = g_string_new (format);
  g_autoptr (GError) error = NULL;
  GstElement *sink;
  GstBus *bus;

  if (url != NULL)
    g_string_replace (text, "SERVER", url, 0);
  g_string_replace (text, "KEY", APP_KEY, 0);
  g_string_replace (text, "SECRET", APP_SECRET, 0);
  line->pipeline = gst_parse_launch (text->str, &error);
  fail_unless (line->pipeline != NULL, "%s: %s", text->str,
      error ? error->message : "");
  if (!GST_IS_PIPELINE (line->pipeline)) {
    /* a line of one element: as gst-launch-1.0 does, put it in a pipeline */
    GstElement *pipeline = gst_pipeline_new (NULL);

    gst_bin_add (GST_BIN (pipeline), line->pipeline);
    line->pipeline = pipeline;
  }
  g_mutex_init (&line->lock);
  line->messages = g_ptr_array_new_with_free_func (g_free);
  bus = gst_element_get_bus (line->pipeline);
  gst_bus_add_watch (bus, on_bus, line);
  gst_object_unref (bus);
  sink = gst_bin_get_by_name (GST_BIN (line->pipeline), "out");
  if (sink != NULL) {
    GstPad *pad = gst_element_get_static_pad (sink, "sink");

    gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, count_frame, line, NULL);
    gst_object_unref (pad);
    gst_object_unref (sink);
  }
  return line;
}

static void
line_play (Line * line)
{
  fail_if (gst_element_set_state (line->pipeline, GST_STATE_PLAYING) ==
      GST_STATE_CHANGE_FAILURE);
}

static void
line_free (Line * line)
{
  GstBus *bus = gst_element_get_bus (line->pipeline);

  gst_element_set_state (line->pipeline, GST_STATE_NULL);
  gst_bus_remove_watch (bus);
  gst_object_unref (bus);
  gst_object_unref (line->pipeline);
  g_ptr_array_unref (line->messages);
  g_clear_error (&line->error);
  g_clear_error (&line->warning);
  g_mutex_clear (&line->lock);
  g_free (line);
}

#define ROOM_ARGS "server-url=SERVER app-key=KEY app-secret=SECRET room=demo"

#define SENDER \
  "videotestsrc is-live=true ! video/x-raw,width=160,height=120," \
  "framerate=15/1 ! x264enc tune=zerolatency speed-preset=ultrafast " \
  "key-int-max=1000 ! legbaroom name=r " ROOM_ARGS " identity=alice " \
  "audiotestsrc is-live=true ! opusenc ! r."

/* the signaller's settings as the child proxy names them */
#define SIGNALLER_ARGS "signaller::server-url=SERVER signaller::app-key=KEY " \
  "signaller::app-secret=SECRET room=demo"

#define RECEIVER \
  "legbaroom name=r " ROOM_ARGS " identity=bob " \
  "r. ! video/x-h264 ! avdec_h264 ! fakesink name=out sync=false async=false"

#define CHILD_PROXY_RECEIVER \
  "legbaroom name=r " SIGNALLER_ARGS " identity=bob " \
  "r. ! video/x-h264 ! avdec_h264 ! fakesink name=out sync=false async=false"

GST_START_TEST (test_properties)
{
  GstElement *room = gst_element_factory_make ("legbaroom", NULL);
  guint latency, max;
  char *url;

  fail_unless (room != NULL);
  g_object_get (room, "latency", &latency, "max-participants", &max,
      "server-url", &url, NULL);
  fail_unless_equals_int (latency, 100);
  fail_unless_equals_int (max, 6);
  fail_unless (url == NULL);
  g_object_set (room, "server-url", "ws://127.0.0.1:1", "room", "r1",
      "identity", "alice", "display-name", "Alice", "latency", 50, NULL);
  g_object_get (room, "server-url", &url, "latency", &latency, NULL);
  fail_unless_equals_string (url, "ws://127.0.0.1:1");
  fail_unless_equals_int (latency, 50);
  /* an SFU room of a hundred viewers and its publisher */
  g_object_set (room, "max-participants", 101, NULL);
  g_object_get (room, "max-participants", &max, NULL);
  fail_unless_equals_int (max, 101);
  g_free (url);
  gst_object_unref (room);
}

GST_END_TEST;

GST_START_TEST (test_child_proxy)
{
  GstElement *room = gst_element_factory_make ("legbaroom", NULL);
  TestHub *hub = test_hub_new ();
  TestSignaller *other = test_signaller_new (hub);
  GObject *target = NULL, *child;
  GParamSpec *pspec = NULL;
  LegbaSignaller *signaller = NULL;
  char *url = NULL, *key = NULL;

  /* the default signaller is the child named "signaller" */
  g_object_get (room, "signaller", &signaller, NULL);
  fail_unless (LEGBA_IS_SIGNAL_CLIENT (signaller));
  fail_unless (gst_child_proxy_lookup (GST_CHILD_PROXY (room),
          "signaller::server-url", &target, &pspec));
  fail_unless (target == G_OBJECT (signaller));
  fail_unless_equals_string (pspec->name, "server-url");
  g_object_unref (target);
  gst_child_proxy_set (GST_CHILD_PROXY (room), "signaller::server-url",
      "ws://127.0.0.1:1", NULL);
  /* the element's server-url is the signaller's */
  g_object_get (room, "server-url", &url, NULL);
  fail_unless_equals_string (url, "ws://127.0.0.1:1");
  g_object_set (room, "app-key", "k", NULL);
  g_object_get (signaller, "app-key", &key, NULL);
  fail_unless_equals_string (key, "k");
  g_clear_pointer (&url, g_free);
  g_clear_pointer (&key, g_free);
  g_object_unref (signaller);

  /* another signaller takes the child's place */
  g_object_set (room, "signaller", other, NULL);
  child = gst_child_proxy_get_child_by_name (GST_CHILD_PROXY (room),
      "signaller");
  fail_unless (child == G_OBJECT (other));
  g_object_unref (child);
  fail_if (gst_child_proxy_lookup (GST_CHILD_PROXY (room),
          "signaller::server-url", NULL, NULL));
  /* it has no server-url: the element's is the default */
  g_object_get (room, "server-url", &url, NULL);
  fail_unless (url == NULL);
  /* NULL: a new default signaller */
  g_object_set (room, "signaller", NULL, NULL);
  g_object_get (room, "signaller", &signaller, NULL);
  fail_unless (LEGBA_IS_SIGNAL_CLIENT (signaller));
  g_object_unref (signaller);
  gst_object_unref (room);
  g_object_unref (other);
  test_hub_free (hub);
}

GST_END_TEST;

/* copy stands for source: the same description, range and default */
static void
assert_same_setting (GParamSpec * copy, GParamSpec * source)
{
  const GValue *a = g_param_spec_get_default_value (copy);
  const GValue *b = g_param_spec_get_default_value (source);

  GST_INFO ("%s: \"%s\"", copy->name, g_param_spec_get_blurb (copy));
  fail_unless (G_PARAM_SPEC_TYPE (copy) == G_PARAM_SPEC_TYPE (source),
      "%s: not of the same type", copy->name);
  fail_unless_equals_string (g_param_spec_get_nick (copy),
      g_param_spec_get_nick (source));
  fail_unless_equals_string (g_param_spec_get_blurb (copy),
      g_param_spec_get_blurb (source));
  fail_unless (g_param_values_cmp (copy, a, b) == 0,
      "%s: the defaults differ", copy->name);
  if (G_IS_PARAM_SPEC_UINT (copy)) {
    fail_unless_equals_int (G_PARAM_SPEC_UINT (copy)->minimum,
        G_PARAM_SPEC_UINT (source)->minimum);
    fail_unless_equals_int (G_PARAM_SPEC_UINT (copy)->maximum,
        G_PARAM_SPEC_UINT (source)->maximum);
  }
}

GST_START_TEST (test_settings_declared_once)
{
  /* the element's LegbaRoom and LegbaSignalClient settings, under the
   * names launch lines, docs and examples use */
  static const char *const room_settings[] = {
    "room", "identity", "display-name", "stun-server", "turn-server",
    "latency", "max-participants",
  };
  static const char *const signaller_settings[] = {
    "server-url", "app-key", "app-secret", "app-id", "auth-url", "token",
  };
  GstElement *element = gst_element_factory_make ("legbaroom", NULL);
  GObjectClass *klass = G_OBJECT_GET_CLASS (element);
  GObjectClass *room = g_type_class_ref (LEGBA_TYPE_ROOM);
  GObjectClass *client = g_type_class_ref (LEGBA_TYPE_SIGNAL_CLIENT);

  for (guint i = 0; i < G_N_ELEMENTS (room_settings); i++)
    assert_same_setting (g_object_class_find_property (klass,
            room_settings[i]), g_object_class_find_property (room,
            room_settings[i]));
  for (guint i = 0; i < G_N_ELEMENTS (signaller_settings); i++)
    assert_same_setting (g_object_class_find_property (klass,
            signaller_settings[i]), g_object_class_find_property (client,
            signaller_settings[i]));
  g_type_class_unref (client);
  g_type_class_unref (room);
  gst_object_unref (element);
}

GST_END_TEST;

GST_START_TEST (test_request_pads)
{
  GstElement *room = gst_element_factory_make ("legbaroom", NULL);
  GstPad *video, *audio, *extra;
  LegbaRoom *lroom = NULL;

  video = gst_element_request_pad_simple (room, "video_%u");
  fail_unless (video != NULL);
  fail_unless_equals_string (GST_PAD_NAME (video), "video_0");
  audio = gst_element_request_pad_simple (room, "audio_%u");
  fail_unless (audio != NULL);
  /* version 1: one stream of each kind */
  extra = gst_element_request_pad_simple (room, "video_%u");
  fail_unless (extra == NULL);
  g_object_get (room, "legba-room", &lroom, NULL);
  fail_unless (LEGBA_IS_ROOM (lroom));
  g_object_unref (lroom);
  gst_element_release_request_pad (room, video);
  gst_object_unref (video);
  /* released: a video stream can be requested again */
  video = gst_element_request_pad_simple (room, "video_%u");
  fail_unless (video != NULL);
  gst_element_release_request_pad (room, video);
  gst_element_release_request_pad (room, audio);
  gst_object_unref (video);
  gst_object_unref (audio);
  gst_object_unref (room);
}

GST_END_TEST;

GST_START_TEST (test_launch_lines)
{
  Line *sender, *receiver;

  start_server ();
  sender = line_new (SENDER);
  /* the receiver names the signaller's settings through the child proxy */
  receiver = line_new (CHILD_PROXY_RECEIVER);
  line_play (sender);
  line_play (receiver);
  WAIT_FOR (frames (receiver) >= 10 || receiver->error || sender->error,
      "bob to decode alice's video");
  fail_unless (receiver->error == NULL, "%s", receiver->error ?
      receiver->error->message : "");
  fail_unless (sender->error == NULL, "%s", sender->error ?
      sender->error->message : "");
  fail_unless (has_message (receiver, "legba-participant-joined"));
  {
    GstElement *r = gst_bin_get_by_name (GST_BIN (receiver->pipeline), "r");
    GstPad *pad = gst_element_get_static_pad (r, "recv_video_0");
    char *id = NULL;

    fail_unless (pad != NULL);
    g_object_get (pad, "participant-id", &id, NULL);
    fail_unless (id != NULL && g_str_has_prefix (id, "alice-"));
    g_free (id);
    gst_object_unref (pad);
    gst_object_unref (r);
  }
  fail_unless (has_message (receiver, "legba-room-state"));

  /* alice leaves: bob's pads go, bob's pipeline carries on */
  line_free (sender);
  WAIT_FOR (has_message (receiver, "legba-participant-left"),
      "bob to see alice leave");
  {
    GstElement *r = gst_bin_get_by_name (GST_BIN (receiver->pipeline), "r");

    fail_unless_equals_int (GST_ELEMENT (r)->numsrcpads, 0);
    for (GList * l = GST_BIN_CHILDREN (r); l; l = l->next)
      fail_if (g_str_has_prefix (GST_OBJECT_NAME (l->data), "legba-peer-"));
    gst_object_unref (r);
  }
  fail_unless (receiver->error == NULL);
  line_free (receiver);
  stop_server ();
}

GST_END_TEST;

/* The encoder's `network-bitrate` (legbavideoenc's stats), 0 before any. */
static guint
network_bitrate (Line * line)
{
  g_autoptr (GstElement) enc =
      gst_bin_get_by_name (GST_BIN (line->pipeline), "enc");
  g_autoptr (GstStructure) stats = NULL;
  guint bitrate = 0;

  g_object_get (enc, "stats", &stats, NULL);
  if (stats != NULL)
    gst_structure_get_uint (stats, "network-bitrate", &bitrate);
  return bitrate;
}

static gboolean
wake (gpointer data)
{
  return G_SOURCE_CONTINUE;
}

/* With congestion control and no connection yet, the room holds the
 * encoder to the video's share of the start estimate (300 kbit/s, less
 * the headers of 1,200-byte packets), not the user's 2 Mbit/s: the key
 * frame the first participant to come gets fits a slow link. */
GST_START_TEST (test_start_target)
{
  Line *sender;
  guint poll;

  start_server ();
  sender = line_new ("videotestsrc is-live=true ! video/x-raw,width=160,"
      "height=120,framerate=15/1 ! legbavideoenc name=enc bitrate=2000000 ! "
      "legbaroom name=r " ROOM_ARGS " identity=alice");
  line_play (sender);
  poll = g_timeout_add (50, wake, NULL);
  WAIT_FOR (network_bitrate (sender) != 0 || sender->error != NULL,
      "the room to give the encoder a target");
  g_source_remove (poll);
  fail_unless (sender->error == NULL, "%s", sender->error ?
      sender->error->message : "");
  fail_unless_equals_int (network_bitrate (sender), 282000);
  line_free (sender);
  stop_server ();
}

GST_END_TEST;

GST_START_TEST (test_unlinked_pads)
{
  /* a receiver that links nothing and a third that links only audio:
   * unlinked pads must not stop anything */
  Line *sender, *idle, *audio_only;

  start_server ();
  sender = line_new (SENDER);
  idle = line_new ("legbaroom " ROOM_ARGS " identity=carol");
  audio_only = line_new ("legbaroom name=r " ROOM_ARGS " identity=dave "
      "r. ! audio/x-opus ! opusdec ! fakesink name=out sync=false "
      "async=false");
  line_play (sender);
  line_play (idle);
  line_play (audio_only);
  WAIT_FOR (frames (audio_only) >= 25 || audio_only->error || idle->error ||
      sender->error, "dave to decode alice's audio");
  for (guint i = 0; i < 3; i++) {
    Line *l = i == 0 ? sender : i == 1 ? idle : audio_only;

    fail_unless (l->error == NULL, "%s", l->error ? l->error->message : "");
  }
  line_free (audio_only);
  line_free (idle);
  line_free (sender);
  stop_server ();
}

GST_END_TEST;

static GstElement *
find_in_peer_bin (GstElement * room, const char *factory_name)
{
  GstIterator *it = gst_bin_iterate_recurse (GST_BIN (room));
  GValue item = G_VALUE_INIT;
  GstElement *found = NULL;

  while (found == NULL && gst_iterator_next (it, &item) == GST_ITERATOR_OK) {
    GstElement *e = g_value_get_object (&item);
    GstElementFactory *factory = gst_element_get_factory (e);

    if (factory != NULL &&
        strcmp (GST_OBJECT_NAME (factory), factory_name) == 0)
      found = gst_object_ref (e);
    g_value_reset (&item);
  }
  g_value_unset (&item);
  gst_iterator_free (it);
  return found;
}

static gboolean
has_pad (GstElement * element, const char *name)
{
  GstPad *pad = gst_element_get_static_pad (element, name);

  if (pad == NULL)
    return FALSE;
  gst_object_unref (pad);
  return TRUE;
}

GST_START_TEST (test_peer_error_contained)
{
  /* an element of bob's connection with alice fails: the pipeline gets
   * no error, and the connection is replaced (bob, the greater id,
   * offers again): alice's video comes back on a new pad */
  Line *sender, *receiver;
  GstElement *r, *nicesrc;
  GError *error;

  start_server ();
  sender = line_new (SENDER);
  receiver = line_new (RECEIVER);
  line_play (sender);
  line_play (receiver);
  WAIT_FOR (frames (receiver) >= 10 || receiver->error || sender->error,
      "bob to decode alice's video");
  r = gst_bin_get_by_name (GST_BIN (receiver->pipeline), "r");
  nicesrc = find_in_peer_bin (r, "nicesrc");
  fail_unless (nicesrc != NULL);
  error = g_error_new_literal (GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_READ,
      "forced by the test");
  gst_element_post_message (nicesrc, gst_message_new_error (GST_OBJECT
          (nicesrc), error, "test-legbaroom.c"));
  g_error_free (error);
  gst_object_unref (nicesrc);
  WAIT_FOR (has_pad (r, "recv_video_1") || receiver->error,
      "alice's video on a fresh connection");
  fail_unless (receiver->error == NULL, "%s", receiver->error ?
      receiver->error->message : "");
  fail_unless (sender->error == NULL, "%s", sender->error ?
      sender->error->message : "");
  fail_if (has_pad (r, "recv_video_0"));
  fail_if (has_message (receiver, "legba-participant-left"));
  gst_object_unref (r);
  line_free (receiver);
  line_free (sender);
  stop_server ();
}

GST_END_TEST;

typedef struct
{
  GMutex lock;
  TestHub *hub;
  GThread *joined_on;           /* the thread that saw CONNECTED */
  TestSignaller *bob;           /* a member that joins on that thread */
} Joined;

/* bob joins on the element's thread: the hub has no lock, and every
 * member of a hub runs on one context */
static gboolean
bob_joins (gpointer data)
{
  Joined *joined = data;
  g_autofree char *id = legba_signaller_generate_participant_id ("bob");
  TestSignaller *bob = test_signaller_new (joined->hub);

  g_mutex_lock (&joined->lock);
  joined->bob = bob;
  g_mutex_unlock (&joined->lock);
  fail_unless (legba_signaller_join (LEGBA_SIGNALLER (bob), "demo", id,
          "bob", NULL, NULL));
  return G_SOURCE_REMOVE;
}

static void
on_signaller_state (LegbaSignaller * signaller, GParamSpec * pspec,
    Joined * joined)
{
  gboolean first = FALSE;

  g_mutex_lock (&joined->lock);
  if (legba_signaller_get_state (signaller) == LEGBA_SIGNALLER_STATE_CONNECTED
      && joined->joined_on == NULL) {
    joined->joined_on = g_thread_self ();
    first = TRUE;
  }
  g_mutex_unlock (&joined->lock);
  if (first) {
    GSource *source = g_idle_source_new ();

    g_source_set_callback (source, bob_joins, joined, NULL);
    g_source_attach (source, g_main_context_get_thread_default ());
    g_source_unref (source);
  }
}

static GThread *
joined_on (Joined * joined)
{
  GThread *thread;

  g_mutex_lock (&joined->lock);
  thread = joined->joined_on;
  g_mutex_unlock (&joined->lock);
  return thread;
}

GST_START_TEST (test_signaller_property)
{
  /* a line with a request pad: its track moves to the room made for the
   * signaller set afterwards */
  Line *line = line_new ("audiotestsrc is-live=true ! opusenc ! "
      "legbaroom name=r room=demo identity=alice");
  GstElement *r = gst_bin_get_by_name (GST_BIN (line->pipeline), "r");
  TestHub *hub = test_hub_new ();
  TestSignaller *signaller = test_signaller_new (hub);
  Joined joined = { 0 };
  LegbaRoom *room = NULL;
  GstPad *sink, *target;

  g_mutex_init (&joined.lock);
  joined.hub = hub;
  g_signal_connect (signaller, "notify::state",
      G_CALLBACK (on_signaller_state), &joined);
  g_object_set (r, "signaller", signaller, NULL);
  g_object_get (r, "legba-room", &room, NULL);
  fail_unless (legba_room_get_signaller (room) == LEGBA_SIGNALLER (signaller));
  g_object_unref (room);
  sink = gst_element_get_static_pad (r, "audio_0");
  target = gst_ghost_pad_get_target (GST_GHOST_PAD (sink));
  fail_unless (target != NULL);
  gst_object_unref (target);
  gst_object_unref (sink);

  line_play (line);
  WAIT_FOR (has_message (line, "legba-room-state/connected") || line->error,
      "the room to join through the test signaller");
  /* the room hears of bob through it */
  WAIT_FOR (has_message (line, "legba-participant-joined") || line->error,
      "bob, joining through the test hub, to be announced");
  fail_unless (line->error == NULL, "%s", line->error ?
      line->error->message : "");
  /* joined on the element's thread, where the signaller then runs */
  fail_unless (joined_on (&joined) != NULL);
  fail_unless (joined_on (&joined) != g_thread_self ());
  line_free (line);
  /* the element left the room when it stopped */
  fail_unless_equals_int (legba_signaller_get_state (LEGBA_SIGNALLER
          (signaller)), LEGBA_SIGNALLER_STATE_DISCONNECTED);
  /* the element's thread is gone with it: bob leaves from here */
  gst_object_unref (r);
  g_signal_handlers_disconnect_by_data (signaller, &joined);
  g_object_unref (joined.bob);
  g_object_unref (signaller);
  test_hub_free (hub);
  g_mutex_clear (&joined.lock);
}

GST_END_TEST;

static void
expect_error (const char *launch, GQuark domain, int code)
{
  Line *line = line_new (launch);

  /* the state change fails, or the error comes later */
  gst_element_set_state (line->pipeline, GST_STATE_PLAYING);
  WAIT_FOR (line->error != NULL, "an error message");
  fail_unless (g_error_matches (line->error, domain, code), "got: %s",
      line->error->message);
  GST_INFO ("error as expected: %s", line->error->message);
  line_free (line);
}

GST_START_TEST (test_errors)
{
  g_autofree char *closed = NULL;
  guint port;

  start_server ();
  expect_error ("legbaroom server-url=SERVER app-key=KEY app-secret=wrong "
      "room=demo identity=eve", GST_RESOURCE_ERROR,
      GST_RESOURCE_ERROR_NOT_AUTHORIZED);
  port = legba_server_get_port (server);
  stop_server ();
  closed = g_strdup_printf ("legbaroom server-url=ws://127.0.0.1:%u "
      "app-key=k app-secret=s room=demo identity=eve", port);
  expect_error (closed, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_OPEN_READ_WRITE);
  start_server ();
  expect_error ("legbaroom app-key=KEY room=demo identity=eve",
      GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_SETTINGS);
  stop_server ();
}

GST_END_TEST;

static Suite *
legbaroom_suite (void)
{
  Suite *s = suite_create ("legbaroom");
  TCase *tc = tcase_create ("general");

  tcase_set_timeout (tc, 90);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_properties);
  tcase_add_test (tc, test_child_proxy);
  tcase_add_test (tc, test_settings_declared_once);
  tcase_add_test (tc, test_signaller_property);
  tcase_add_test (tc, test_request_pads);
  tcase_add_test (tc, test_launch_lines);
  tcase_add_test (tc, test_unlinked_pads);
  tcase_add_test (tc, test_start_target);
  tcase_add_test (tc, test_errors);
  tcase_add_test (tc, test_peer_error_contained);
  return s;
}

GST_CHECK_MAIN (legbaroom);
