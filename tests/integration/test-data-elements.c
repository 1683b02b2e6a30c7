/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legbadatasink and legbadatasrc with legbaroom (the plugin, through the
 * installed interface only) through legba-server (in-process, 127.0.0.1,
 * port 0): order and topics from one pipeline to another, sending from
 * the streaming thread, a source nobody sends to, one stalled recipient,
 * and a gst-launch-1.0 line.
 */
#include "room-data-test.h"

#include <legba-test.h>

#include <gst/app/app.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <sys/prctl.h>

/* ---- The elements ---- */

typedef struct
{
  GstElement *pipeline;
  GPtrArray *warnings;          /* char*, from the bus */
  GMutex lock;
  GCond cond;                   /* a buffer came */
  GPtrArray *buffers;           /* (lock) GstBuffer from the appsink */
} Launch;

static gboolean
on_launch_bus (GstBus * bus, GstMessage * message, gpointer data)
{
  Launch *l = data;
  g_autoptr (GError) error = NULL;
  g_autofree char *debug = NULL;

  if (GST_MESSAGE_TYPE (message) == GST_MESSAGE_ERROR) {
    gst_message_parse_error (message, &error, &debug);
    g_error ("pipeline error from %s: %s (%s)",
        GST_OBJECT_NAME (GST_MESSAGE_SRC (message)), error->message, debug);
  } else if (GST_MESSAGE_TYPE (message) == GST_MESSAGE_WARNING) {
    gst_message_parse_warning (message, &error, &debug);
    g_test_message ("warning from %s: %s", GST_OBJECT_NAME
        (GST_MESSAGE_SRC (message)), error->message);
    g_ptr_array_add (l->warnings, g_strdup (error->message));
  }
  return G_SOURCE_CONTINUE;
}

static GstFlowReturn
on_new_sample (GstAppSink * sink, gpointer data)
{
  Launch *l = data;
  GstSample *sample = gst_app_sink_pull_sample (sink);

  g_mutex_lock (&l->lock);
  g_ptr_array_add (l->buffers, gst_buffer_ref (gst_sample_get_buffer (sample)));
  g_cond_broadcast (&l->cond);
  g_mutex_unlock (&l->lock);
  gst_sample_unref (sample);
  return GST_FLOW_OK;
}

/* A pipeline with a legbaroom named r for the fixture's server; %s in
 * tail is the room's identity. */
static Launch *
launch_new (Fixture * f, const char *identity, const char *tail)
{
  Launch *l = g_new0 (Launch, 1);
  g_autofree char *desc = g_strdup_printf ("legbaroom name=r server-url=%s "
      "app-key=" APP_KEY " app-secret=" APP_SECRET " room=" ROOM
      " identity=%s %s", f->url, identity, tail);
  g_autoptr (GError) error = NULL;
  g_autoptr (GstBus) bus = NULL;
  g_autoptr (GstElement) sink = NULL;

  l->warnings = g_ptr_array_new_with_free_func (g_free);
  l->buffers = g_ptr_array_new_with_free_func
      ((GDestroyNotify) gst_buffer_unref);
  g_mutex_init (&l->lock);
  g_cond_init (&l->cond);
  l->pipeline = gst_parse_launch (desc, &error);
  g_assert_no_error (error);
  bus = gst_element_get_bus (l->pipeline);
  gst_bus_add_watch (bus, on_launch_bus, l);
  sink = gst_bin_get_by_name (GST_BIN (l->pipeline), "out");
  if (sink != NULL) {
    GstAppSinkCallbacks callbacks = { NULL, NULL, on_new_sample, };

    gst_app_sink_set_callbacks (GST_APP_SINK (sink), &callbacks, l, NULL);
  }
  g_assert_cmpint (gst_element_set_state (l->pipeline, GST_STATE_PLAYING),
      !=, GST_STATE_CHANGE_FAILURE);
  return l;
}

static void
launch_free (Launch * l)
{
  g_autoptr (GstBus) bus = gst_element_get_bus (l->pipeline);

  gst_element_set_state (l->pipeline, GST_STATE_NULL);
  gst_bus_remove_watch (bus);
  gst_object_unref (l->pipeline);
  g_ptr_array_unref (l->warnings);
  g_ptr_array_unref (l->buffers);
  g_mutex_clear (&l->lock);
  g_cond_clear (&l->cond);
  g_free (l);
}

static guint
launch_buffers (Launch * l)
{
  return locked_len (&l->lock, l->buffers);
}

static GstElement *
launch_get (Launch * l, const char *name)
{
  GstElement *e = gst_bin_get_by_name (GST_BIN (l->pipeline), name);

  g_assert_nonnull (e);
  return e;
}

static void
push_json (GstElement * appsrc, const char *json, const char *topic)
{
  GstBuffer *buffer = gst_buffer_new_memdup (json, strlen (json));

  if (topic != NULL)
    legba_buffer_add_data_meta (buffer, NULL, topic,
        LEGBA_RELIABILITY_RELIABLE, NULL);
  g_assert_cmpint (gst_app_src_push_buffer (GST_APP_SRC (appsrc), buffer),
      ==, GST_FLOW_OK);
}

/* legbadatasink in alice's pipeline to legbadatasrc in bob's: order,
 * topics (a meta overrides the sink's), sender and channel in the meta,
 * timestamps, and buffers held until a recipient is there. */
static void
test_elements (Fixture * f, gconstpointer unused)
{
  Launch *a = launch_new (f, "alice", "appsrc name=in format=time "
      "caps=application/json ! legbadatasink room-element=r topic=sensor "
      "min-recipients=1");
  g_autoptr (GstElement) in = launch_get (a, "in");
  Launch *b;

  for (guint i = 0; i < 20; i++) {
    g_autofree char *json = g_strdup_printf ("{\"n\":%u}", i);

    push_json (in, json, i == 5 ? "override" : NULL);
  }
  b = launch_new (f, "bob", "legbadatasrc room-element=r from=alice "
      "! appsink name=out sync=false");
  ROOM_WAIT_FOR (launch_buffers (b) == 20, "bob's legbadatasrc to push the "
      "20 messages held for him");
  for (guint i = 0; i < 20; i++) {
    GstBuffer *buffer = b->buffers->pdata[i];
    LegbaDataMeta *meta = legba_buffer_get_data_meta (buffer);
    g_autofree char *json = g_strdup_printf ("{\"n\":%u}", i);
    GstMapInfo map;

    g_assert_true (gst_buffer_map (buffer, &map, GST_MAP_READ));
    g_assert_cmpmem (map.data, map.size, json, strlen (json));
    gst_buffer_unmap (buffer, &map);
    g_assert_nonnull (meta);
    g_assert_true (g_str_has_prefix (meta->participant_id, "alice-"));
    g_assert_cmpstr (meta->topic, ==, i == 5 ? "override" : "sensor");
    g_assert_cmpint (meta->reliability, ==, LEGBA_RELIABILITY_RELIABLE);
    g_assert_true (GST_BUFFER_PTS_IS_VALID (buffer));
  }
  g_assert_cmpuint (a->warnings->len + b->warnings->len, ==, 0);
  launch_free (b);
  launch_free (a);
}

/* waits for the appsink's nth buffer without running the main context */
static gboolean
wait_buffers_off_context (Launch * l, guint n)
{
  gint64 deadline = g_get_monotonic_time () +
      ROOM_WAIT_MS * G_TIME_SPAN_MILLISECOND;
  gboolean ok = TRUE;

  g_mutex_lock (&l->lock);
  while (l->buffers->len < n && ok)
    ok = g_cond_wait_until (&l->cond, &l->lock, deadline);
  ok = l->buffers->len >= n;
  g_mutex_unlock (&l->lock);
  return ok;
}

#define OFF_CONTEXT 50

/* Keeps the threads of rooms' contexts inside a callback until released,
 * as an application's long callback does. */
typedef struct
{
  GMutex lock;
  GCond cond;
  guint held;
  gboolean released;
} Hold;

static gboolean
hold_context (gpointer data)
{
  Hold *h = data;
  gint64 deadline = g_get_monotonic_time () +
      2 * ROOM_WAIT_MS * G_TIME_SPAN_MILLISECOND;

  g_mutex_lock (&h->lock);
  h->held++;
  g_cond_broadcast (&h->cond);
  while (!h->released && g_cond_wait_until (&h->cond, &h->lock, deadline));
  g_mutex_unlock (&h->lock);
  return G_SOURCE_REMOVE;
}

static GMainContext *
launch_room_context (Launch * l)
{
  g_autoptr (GstElement) r = launch_get (l, "r");
  g_autoptr (LegbaRoom) room = NULL;

  g_object_get (r, "legba-room", &room, NULL);
  return legba_room_get_main_context (room);
}

/* legbadatasink sends from its streaming thread and legbadatasrc takes
 * messages on the thread they arrive on: a stream goes from one pipeline
 * to the other while the threads of both rooms are busy in a callback
 * of their own contexts. */
static void
test_element_off_context (Fixture * f, gconstpointer unused)
{
  Launch *a = launch_new (f, "alice", "appsrc name=in format=time "
      "caps=application/json ! legbadatasink name=sink room-element=r "
      "topic=sensor min-recipients=1");
  Launch *b = launch_new (f, "bob", "legbadatasrc room-element=r from=alice "
      "! appsink name=out sync=false");
  g_autoptr (GstElement) in = launch_get (a, "in");
  g_autoptr (GstElement) sink = launch_get (a, "sink");
  Hold h = { 0, };
  guint64 sent = 0;
  gboolean all;

  g_mutex_init (&h.lock);
  g_cond_init (&h.cond);
  push_json (in, "{\"n\":0}", NULL);
  ROOM_WAIT_FOR (launch_buffers (b) == 1, "the first message at bob");
  g_main_context_invoke (launch_room_context (a), hold_context, &h);
  g_main_context_invoke (launch_room_context (b), hold_context, &h);
  g_mutex_lock (&h.lock);
  while (h.held < 2)
    g_cond_wait (&h.cond, &h.lock);
  g_mutex_unlock (&h.lock);
  for (guint i = 1; i <= OFF_CONTEXT; i++) {
    g_autofree char *json = g_strdup_printf ("{\"n\":%u}", i);

    push_json (in, json, NULL);
  }
  all = wait_buffers_off_context (b, OFF_CONTEXT + 1);
  g_mutex_lock (&h.lock);
  h.released = TRUE;
  g_cond_broadcast (&h.cond);
  g_mutex_unlock (&h.lock);
  g_assert_true (all);
  for (guint i = 0; i <= OFF_CONTEXT; i++) {
    GstBuffer *buffer = b->buffers->pdata[i];
    g_autofree char *json = g_strdup_printf ("{\"n\":%u}", i);
    GstMapInfo map;

    g_assert_true (gst_buffer_map (buffer, &map, GST_MAP_READ));
    g_assert_cmpmem (map.data, map.size, json, strlen (json));
    gst_buffer_unmap (buffer, &map);
  }
  g_object_get (sink, "sent", &sent, NULL);
  g_assert_cmpuint (sent, ==, OFF_CONTEXT + 1);
  g_assert_cmpuint (a->warnings->len + b->warnings->len, ==, 0);
  launch_free (b);
  launch_free (a);
  g_mutex_clear (&h.lock);
  g_cond_clear (&h.cond);
}

static void
assert_playing (GstElement * element)
{
  GstState state = GST_STATE_VOID_PENDING;

  g_assert_cmpint (gst_element_get_state (element, &state, NULL,
          ROOM_WAIT_MS * GST_MSECOND), ==, GST_STATE_CHANGE_SUCCESS);
  g_assert_cmpint (state, ==, GST_STATE_PLAYING);
}

/* A legbadatasrc nobody sends to does not hold the pipeline: it reaches
 * PLAYING and its other branch runs (its sink is not kept prerolled in
 * PAUSED). */
static void
test_element_quiet (Fixture * f, gconstpointer unused)
{
  Launch *l = launch_new (f, "quiet", "legbadatasrc room-element=r "
      "! fakesink name=behind videotestsrc num-buffers=3 "
      "! appsink name=out sync=false");
  g_autoptr (GstElement) behind = launch_get (l, "behind");

  ROOM_WAIT_FOR (launch_buffers (l) == 3, "the other branch's 3 buffers");
  assert_playing (l->pipeline);
  assert_playing (behind);
  g_assert_cmpuint (l->warnings->len, ==, 0);
  launch_free (l);
}

/* legbadatasink with one stalled recipient: bob keeps receiving; after
 * its timeout the sink names carol in a warning and goes on. */
static void
test_element_stalled (Fixture * f, gconstpointer unused)
{
  Launch *a = launch_new (f, "alice", "appsrc name=in format=time "
      "caps=application/json ! legbadatasink name=sink room-element=r "
      "topic=bulk timeout=300 min-recipients=2");
  g_autoptr (GstElement) in = launch_get (a, "in");
  g_autoptr (GstElement) sink = launch_get (a, "sink");
  Data *b = data_new (f, "bob"), *c = data_new (f, "carol");
  Data *all[] = { b, c };
  g_autofree char *filler = g_malloc (CHUNK + 3);
  gint stalled = 1;
  guint64 not_delivered = 0, sent = 0;
  guint pushed = 0;

  connect_all (all, 2);
  filler[0] = '"';
  memset (filler + 1, 'x', CHUNK);
  filler[CHUNK + 1] = '"';
  filler[CHUNK + 2] = '\0';
  /* one message through to both first: everyone is connected */
  push_json (in, "\"hello\"", NULL);
  pushed++;
  ROOM_WAIT_FOR (b->got->len == 1 && c->got->len == 1, "the first message");
  stall_input (c->p, &stalled);
  while (a->warnings->len == 0) {
    g_assert_cmpuint (pushed, <, 2000);
    push_json (in, filler, NULL);
    pushed++;
    ROOM_WAIT_FOR (b->got->len == pushed || a->warnings->len > 0,
        "bob to receive while carol is stalled");
  }
  ROOM_WAIT_FOR (b->got->len == pushed, "bob to receive every message");
  g_assert_nonnull (strstr (a->warnings->pdata[0], id_of (c)));
  g_assert_null (strstr (a->warnings->pdata[0], id_of (b)));
  /* the buffer after the refused one may have left for bob before the
   * warning came: one warning per message carol did not take */
  ROOM_WAIT_FOR ((g_object_get (sink, "not-delivered", &not_delivered,
              "sent", &sent, NULL), sent + not_delivered == pushed &&
          a->warnings->len == not_delivered), "the sink to be done");
  g_assert_cmpuint (not_delivered, >=, 1);
  g_atomic_int_set (&stalled, 0);
  ROOM_WAIT_FOR (c->got->len == pushed - not_delivered, "carol to get all "
      "but the messages she could not take");
  for (guint i = 0; i < 2; i++)
    assert_no_room_errors (all[i]->p);
  launch_free (a);
  free_all (all, 2);
}

static void
on_exited (GObject * source, GAsyncResult * result, gpointer data)
{
  g_autoptr (GError) error = NULL;

  g_subprocess_wait_finish (G_SUBPROCESS (source), result, &error);
  g_assert_no_error (error);
  *(gboolean *) data = TRUE;
}

static GSubprocess *
gst_launch (Fixture * f, const char *identity, const char *tail,
    gboolean * exited)
{
  g_autofree char *line = g_strdup_printf ("gst-launch-1.0 -q legbaroom "
      "name=r server-url=%s app-key=" APP_KEY " app-secret=" APP_SECRET
      " room=" ROOM " identity=%s %s", f->url, identity, tail);
  g_auto (GStrv) argv = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocessLauncher) launcher =
      g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  GSubprocess *process;

  g_assert_true (g_shell_parse_argv (line, NULL, &argv, &error));
  /* a test that fails leaves no process behind */
  legba_test_launcher_die_with_parent (launcher);
  process = g_subprocess_launcher_spawnv (launcher,
      (const char *const *) argv, &error);
  g_assert_no_error (error);
  g_subprocess_wait_async (process, NULL, on_exited, exited);
  return process;
}

static gboolean
got_files (const char *dir, guint n)
{
  for (guint i = 0; i < n; i++) {
    g_autofree char *path = g_strdup_printf ("%s/got-%05u.json", dir, i);
    g_autofree char *text = NULL;

    /* multifilesink writes each file whole, under a temporary name it
     * then renames */
    if (!g_file_get_contents (path, &text, NULL, NULL))
      return FALSE;
  }
  return TRUE;
}

/* The launch lines of docs/data.md, with gst-launch-1.0 itself: three
 * readings, one JSON file each, from one process to another. */
static void
test_gst_launch (Fixture * f, gconstpointer unused)
{
  g_autofree char *dir = g_dir_make_tmp ("legba-data-XXXXXX", NULL);
  g_autofree char *tail = NULL;
  g_autoptr (GSubprocess) logger = NULL;
  g_autoptr (GSubprocess) sensor = NULL;
  gboolean logger_done = FALSE, sensor_done = FALSE;

  /* gst-launch-1.0 is not instrumented: it cannot load a plugin built
   * with AddressSanitizer */
  if (LEGBA_BUILD_SANITIZED) {
    g_test_skip ("gst-launch-1.0 cannot load a sanitized plugin");
    g_rmdir (dir);
    return;
  }
  g_assert_nonnull (dir);
  for (guint i = 0; i < 3; i++) {
    g_autofree char *path = g_strdup_printf ("%s/reading-%05u.json", dir, i);
    g_autofree char *json = g_strdup_printf ("{\"celsius\":%u.5}", 20 + i);

    g_assert_true (g_file_set_contents (path, json, -1, NULL));
  }
  tail = g_strdup_printf ("legbadatasrc room-element=r topic=sensor "
      "num-buffers=3 ! multifilesink location=%s/got-%%05d.json", dir);
  logger = gst_launch (f, "logger", tail, &logger_done);
  g_free (tail);
  tail = g_strdup_printf ("multifilesrc location=%s/reading-%%05d.json "
      "! application/json ! legbadatasink room-element=r topic=sensor "
      "min-recipients=1", dir);
  sensor = gst_launch (f, "sensor", tail, &sensor_done);
  /* a pipeline with a legbaroom runs until interrupted, as a call does */
  ROOM_WAIT_FOR (got_files (dir, 3) || logger_done || sensor_done,
      "the logger to write 3 messages");
  g_assert_false (logger_done || sensor_done);
  g_subprocess_send_signal (logger, SIGINT);
  g_subprocess_send_signal (sensor, SIGINT);
  ROOM_WAIT_FOR (logger_done && sensor_done, "both gst-launch-1.0 to end");
  g_assert_true (g_subprocess_get_successful (logger));
  g_assert_true (g_subprocess_get_successful (sensor));
  for (guint i = 0; i < 3; i++) {
    g_autofree char *path = g_strdup_printf ("%s/got-%05u.json", dir, i);
    g_autofree char *sent = g_strdup_printf ("%s/reading-%05u.json", dir, i);
    g_autofree char *json = g_strdup_printf ("{\"celsius\":%u.5}", 20 + i);
    g_autofree char *text = NULL;

    g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
    g_assert_cmpstr (text, ==, json);
    g_unlink (path);
    g_unlink (sent);
  }
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  room_test_init (&argc, &argv);

#define ADD_DATA(path, func) \
  g_test_add ("/room/data/" path, Fixture, NULL, fixture_setup, func, \
      fixture_teardown)
  ADD_DATA ("elements", test_elements);
  ADD_DATA ("element-stalled", test_element_stalled);
  ADD_DATA ("element-quiet", test_element_quiet);
  ADD_DATA ("element-off-context", test_element_off_context);
  ADD_DATA ("gst-launch", test_gst_launch);
  return g_test_run ();
}
