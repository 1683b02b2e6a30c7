/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-call driven as a process (the built binary, $LEGBA_CALL), against
 * legba-server in-process: two participants that exchange media and data
 * and report it as JSON (with the test pattern, a video file, a join
 * token, windows and the grid on Xvfb), and the failures it must report
 * by its exit status and a clear message.
 */
#include "signal-test.h"

#include <legba-test.h>

#include <glib/gstdio.h>
#include <signal.h>

/* the processes run on a busy machine (and under AddressSanitizer): a
 * call that must carry media lasts until the test has seen, in both
 * processes' --stats lines, everything arrive; then the test ends both
 * with SIGTERM. Nothing waits on time but the deadlines. */
#define LONG_SECONDS "600"
#define WAIT_RECEIVED_MS 180000

typedef struct
{
  GSubprocess *process;
  GDataInputStream *streams[2]; /* standard output, standard error */
  GString *text[2];
  guint open;                   /* streams not at their end yet */
  gboolean exited;
  gboolean done;
  /* once done */
  const char *out;
  const char *err;
} Run;

static void
check_done (Run * run)
{
  if (run->open > 0 || !run->exited)
    return;
  run->out = run->text[0]->str;
  run->err = run->text[1]->str;
  run->done = TRUE;
}

static void
on_line (GObject * source, GAsyncResult * result, gpointer data)
{
  Run *run = data;
  guint i = source == G_OBJECT (run->streams[0]) ? 0 : 1;
  g_autoptr (GError) error = NULL;
  char *line = g_data_input_stream_read_line_finish_utf8
      (G_DATA_INPUT_STREAM (source), result, NULL, &error);

  g_assert_no_error (error);
  if (line == NULL) {
    run->open--;
    check_done (run);
    return;
  }
  g_string_append (run->text[i], line);
  g_string_append_c (run->text[i], '\n');
  g_free (line);
  g_data_input_stream_read_line_async (run->streams[i], G_PRIORITY_DEFAULT,
      NULL, on_line, run);
}

static void
on_exited (GObject * source, GAsyncResult * result, gpointer data)
{
  Run *run = data;

  g_assert_true (g_subprocess_wait_finish (G_SUBPROCESS (source), result,
          NULL));
  run->exited = TRUE;
  check_done (run);
}

/* display: the DISPLAY the process sees (NULL: none) */
static Run *
run_startv (const char *display, const char *first, va_list args)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GSubprocessLauncher) launcher =
      g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE |
      G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr (GError) error = NULL;
  Run *run = g_new0 (Run, 1);
  const char *arg;

  g_ptr_array_add (argv, (gpointer) g_getenv ("LEGBA_CALL"));
  for (arg = first; arg != NULL; arg = va_arg (args, const char *))
      g_ptr_array_add (argv, (gpointer) arg);
  g_ptr_array_add (argv, NULL);
  legba_test_launcher_report_criticals (launcher);
  legba_test_launcher_die_with_parent (launcher);
  g_subprocess_launcher_unsetenv (launcher, "WAYLAND_DISPLAY");
  if (display != NULL)
    g_subprocess_launcher_setenv (launcher, "DISPLAY", display, TRUE);
  else
    g_subprocess_launcher_unsetenv (launcher, "DISPLAY");
  run->process = g_subprocess_launcher_spawnv (launcher,
      (const char *const *) argv->pdata, &error);
  g_assert_no_error (error);
  run->streams[0] =
      g_data_input_stream_new (g_subprocess_get_stdout_pipe (run->process));
  run->streams[1] =
      g_data_input_stream_new (g_subprocess_get_stderr_pipe (run->process));
  for (guint i = 0; i < 2; i++) {
    run->text[i] = g_string_new (NULL);
    g_data_input_stream_read_line_async (run->streams[i], G_PRIORITY_DEFAULT,
        NULL, on_line, run);
  }
  run->open = 2;
  g_subprocess_wait_async (run->process, NULL, on_exited, run);
  return run;
}

static Run *
run_start (const char *first, ...)
{
  va_list args;
  Run *run;

  va_start (args, first);
  run = run_startv (NULL, first, args);
  va_end (args);
  return run;
}

static Run *
run_start_on (const char *display, const char *first, ...)
{
  va_list args;
  Run *run;

  va_start (args, first);
  run = run_startv (display, first, args);
  va_end (args);
  return run;
}

/* waits for the process; returns its exit status */
static int
run_wait (Run * run)
{
  gboolean expired;
  GSource *deadline = deadline_new (120000, &expired);

  while (!run->done && !expired)
    g_main_context_iteration (NULL, TRUE);
  deadline_free (deadline);
  if (!run->done)
    g_error ("legba-call did not exit within 120 s");
  g_test_message ("stderr: %s", run->err);
  legba_test_assert_no_criticals (run->err);
  if (!g_subprocess_get_if_exited (run->process))
    g_error ("legba-call ended by signal %d; its standard error:\n%s",
        g_subprocess_get_term_sig (run->process), run->err);
  return g_subprocess_get_exit_status (run->process);
}

static void
run_free (Run * run)
{
  g_object_unref (run->process);
  for (guint i = 0; i < 2; i++) {
    g_object_unref (run->streams[i]);
    g_string_free (run->text[i], TRUE);
  }
  g_free (run);
}

/* Whether run's standard error shows a data message from who, and a
 * --stats line with more than min_frames video frames and some audio
 * buffers from who */
static gboolean
received_from (Run * run, const char *who, guint64 min_frames)
{
  g_autofree char *data = g_strdup_printf ("data from %s:", who);
  g_autofree char *stats = g_strdup_printf (" | %s ", who);
  const char *text = run->text[1]->str;

  if (strstr (text, data) == NULL)
    return FALSE;
  for (const char *p = strstr (text, stats); p; p = strstr (p + 1, stats)) {
    guint64 frames = 0, audio = 0;

    if (sscanf (p + strlen (stats), "%" G_GUINT64_FORMAT " frames %"
            G_GUINT64_FORMAT " audio", &frames, &audio) == 2 &&
        frames > min_frames && audio > 0)
      return TRUE;
  }
  return FALSE;
}

/* Waits until a received media and data from b and b from a (b more than
 * min_frames video frames from a), then ends both calls. */
static void
end_once_received (Run * a, const char *a_name, Run * b, const char *b_name,
    guint64 min_frames)
{
  gboolean expired;
  GSource *deadline = deadline_new (WAIT_RECEIVED_MS, &expired);

  while (!(received_from (a, b_name, 0) &&
          received_from (b, a_name, min_frames)) && !expired && !a->done &&
      !b->done)
    g_main_context_iteration (NULL, TRUE);
  deadline_free (deadline);
  if (!received_from (a, b_name, 0) || !received_from (b, a_name, min_frames))
    g_error ("%s and %s did not both receive media and data; %s:\n%s\n%s:"
        "\n%s", a_name, b_name, a_name, a->text[1]->str, b_name,
        b->text[1]->str);
  g_subprocess_send_signal (a->process, SIGTERM);
  g_subprocess_send_signal (b->process, SIGTERM);
}

/* without credentials: CALL_ARGS adds the app secret */
#define BASE_ARGS(f, identity) "--server", (f)->url, "--room", ROOM, \
    "--identity", identity, "--key", APP_KEY, \
    "--width", "160", "--height", "120", "--fps", "15", "--bitrate", "200", \
    "--encoder-proof-timeout", "30000"
#define CALL_ARGS(f, identity) BASE_ARGS (f, identity), "--secret", APP_SECRET

/* the number of video frames the report gives for its one participant */
static gint64
assert_report (const char *out, const char *identity)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) root = json_from_string (out, &error);
  JsonArray *participants;
  JsonObject *p, *o;

  g_assert_no_error (error);
  o = json_node_get_object (root);
  /* in the call, then a frame decoded: times from the process's start */
  g_assert_cmpfloat (json_object_get_double_member (o, "joined_ms"), >, 0);
  g_assert_cmpfloat (json_object_get_double_member (o, "first_video_ms"), >=,
      json_object_get_double_member (o, "joined_ms"));
  participants = json_object_get_array_member (o, "participants");
  g_assert_cmpuint (json_array_get_length (participants), ==, 1);
  p = json_array_get_object_element (participants, 0);
  g_assert_cmpstr (json_object_get_string_member (p, "identity"), ==, identity);
  g_assert_true (g_str_has_prefix (json_object_get_string_member (p, "id"),
          identity));
  g_assert_cmpint (json_object_get_int_member (p, "video_frames"), >, 0);
  g_assert_cmpint (json_object_get_int_member (p, "audio_buffers"), >, 0);
  g_assert_cmpint (json_object_get_int_member (p, "data_messages"), ==, 1);
  return json_object_get_int_member (p, "video_frames");
}

/* Ends a call between alice (a) and bob (b) once each received media and
 * data from the other (b more than min_frames video frames); both exit 0
 * and report the other. Returns the video frames bob's report gives. */
static gint64
finish_call (Run * a, Run * b, guint64 min_frames)
{
  end_once_received (a, "alice", b, "bob", min_frames);
  g_assert_cmpint (run_wait (a), ==, 0);
  g_assert_cmpint (run_wait (b), ==, 0);
  assert_report (a->out, "bob");
  return assert_report (b->out, "alice");
}

static void
test_two (Fixture * f, gconstpointer data)
{
  Run *a =
      run_start (CALL_ARGS (f, "alice"), "--duration", LONG_SECONDS, "--stats",
      "--expect-participants", "1", "--json",
      "--send-data", "{\"from\": \"alice\"}", NULL);
  Run *b =
      run_start (CALL_ARGS (f, "bob"), "--duration", LONG_SECONDS, "--stats",
      "--expect-participants", "1", "--json",
      "--send-data", "{\"from\": \"bob\"}", NULL);

  finish_call (a, b, 0);
  g_assert_nonnull (strstr (a->err, "data from bob: {\"from\":\"bob\"}"));
  g_assert_nonnull (strstr (a->err, "+ bob joined"));
  g_assert_nonnull (strstr (a->err, "stats: "));
  run_free (a);
  run_free (b);
}

/* Stamped frames read back: each report gives the glass-to-glass
 * percentiles of what it received. */
static void
test_latency (Fixture * f, gconstpointer data)
{
  const char *outs[2];
  Run *a = run_start (CALL_ARGS (f, "alice"), "--duration", LONG_SECONDS,
      "--stats", "--expect-participants", "1", "--json", "--measure-latency",
      "--send-data", "{}", NULL);
  Run *b = run_start (CALL_ARGS (f, "bob"), "--duration", LONG_SECONDS,
      "--stats", "--expect-participants", "1", "--json", "--measure-latency",
      "--send-data", "{}", NULL);

  finish_call (a, b, 30);
  outs[0] = a->out;
  outs[1] = b->out;
  for (guint i = 0; i < 2; i++) {
    g_autoptr (JsonNode) root = json_from_string (outs[i], NULL);
    JsonObject *p = json_array_get_object_element (json_object_get_array_member
        (json_node_get_object (root), "participants"), 0);

    g_assert_cmpint (json_object_get_int_member (p, "latency_frames"), >, 0);
    g_assert_cmpfloat (json_object_get_double_member (p, "latency_p50"), >=, 0);
    g_assert_cmpfloat (json_object_get_double_member (p, "latency_p95"), >=,
        json_object_get_double_member (p, "latency_p50"));
  }
  run_free (a);
  run_free (b);
}

static void
test_nobody_came (Fixture * f, gconstpointer data)
{
  Run *a = run_start (CALL_ARGS (f, "alice"), "--duration", "1",
      "--expect-participants", "1", "--audio", "none", NULL);

  g_assert_cmpint (run_wait (a), ==, 1);
  g_assert_nonnull (strstr (a->err, "came from 0 of the 1 participants"));
  run_free (a);
}

static void
test_unreachable (Fixture * f, gconstpointer data)
{
  Run *a;

  stop_server (f);
  a = run_start (CALL_ARGS (f, "alice"), "--duration", "60", NULL);
  g_assert_cmpint (run_wait (a), ==, 1);
  g_assert_nonnull (strstr (a->err, "Could not reach the signalling server"));
  run_free (a);
}

static void
test_usage (Fixture * f, gconstpointer data)
{
  Run *a = run_start (CALL_ARGS (f, "alice"), "--video", "projector", NULL);
  Run *b = run_start (CALL_ARGS (f, "bob"), "--send-data", "{oops", NULL);
  Run *c = run_start ("--room", ROOM, NULL);

  g_assert_cmpint (run_wait (a), ==, 2);
  g_assert_nonnull (strstr (a->err, "--video projector"));
  g_assert_cmpint (run_wait (b), ==, 2);
  g_assert_nonnull (strstr (b->err, "--send-data"));
  g_assert_cmpint (run_wait (c), ==, 2);
  g_assert_nonnull (strstr (c->err, "required"));
  run_free (a);
  run_free (b);
  run_free (c);
}

/* ---- --video FILE ---- */

#define FILE_FRAMES 5

/* Encodes FILE_FRAMES frames of H.264 in MP4 into dir/clip.mp4 */
static char *
encode_clip (const char *dir)
{
  g_autofree char *path = g_build_filename (dir, "clip.mp4", NULL);
  g_autofree char *desc = g_strdup_printf ("videotestsrc num-buffers=%d "
      "pattern=smpte ! video/x-raw,width=160,height=120,framerate=15/1 ! "
      "x264enc ! mp4mux ! filesink location=\"%s\"", FILE_FRAMES, path);
  g_autoptr (GError) error = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &error);
  g_autoptr (GstBus) bus = NULL;
  g_autoptr (GstMessage) message = NULL;

  g_assert_no_error (error);
  bus = gst_element_get_bus (pipeline);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  message = gst_bus_timed_pop_filtered (bus, 120 * GST_SECOND,
      GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  g_assert_nonnull (message);
  g_assert_cmpint (GST_MESSAGE_TYPE (message), ==, GST_MESSAGE_EOS);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (pipeline);
  return g_steal_pointer (&path);
}

static void
remove_dir (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL) {
    g_autofree char *path = g_build_filename (dir, name, NULL);

    g_unlink (path);
  }
  g_rmdir (dir);
}

/* alice sends a file of FILE_FRAMES frames; bob decodes more than that:
 * the file plays in a loop */
static void
test_video_file (Fixture * f, gconstpointer data)
{
  g_autofree char *dir = g_dir_make_tmp ("legba-call-XXXXXX", NULL);
  g_autofree char *clip = encode_clip (dir);
  Run *a = run_start (CALL_ARGS (f, "alice"), "--video", clip,
      "--duration", LONG_SECONDS, "--stats", "--expect-participants", "1",
      "--json",
      "--send-data", "{\"from\": \"alice\"}", NULL);
  Run *b =
      run_start (CALL_ARGS (f, "bob"), "--duration", LONG_SECONDS, "--stats",
      "--expect-participants", "1", "--json",
      "--send-data", "{\"from\": \"bob\"}", NULL);

  g_assert_cmpint (finish_call (a, b, FILE_FRAMES), >, FILE_FRAMES);
  run_free (a);
  run_free (b);
  remove_dir (dir);
}

/* a file that is not a video ends the call with the reason */
static void
test_video_file_bad (Fixture * f, gconstpointer data)
{
  g_autofree char *dir = g_dir_make_tmp ("legba-call-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "notes.txt", NULL);
  Run *a;

  g_assert_true (g_file_set_contents (path, "not a video\n", -1, NULL));
  a = run_start (CALL_ARGS (f, "alice"), "--video", path, "--duration", "60",
      NULL);
  g_assert_cmpint (run_wait (a), ==, 1);
  g_assert_nonnull (strstr (a->err, "Video file "));
  run_free (a);
  remove_dir (dir);
}

/* ---- --token ---- */

/* alice joins with a join token and no app secret */
static void
test_token (Fixture * f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *token = legba_join_token_new (APP_SECRET, ROOM, "alice",
      NULL, 600, &error);
  Run *a, *b;

  g_assert_no_error (error);
  a = run_start (BASE_ARGS (f, "alice"), "--token", token, "--app-id", APP_ID,
      "--duration", LONG_SECONDS, "--stats", "--expect-participants", "1",
      "--json", "--send-data", "{\"from\": \"alice\"}", NULL);
  b = run_start (CALL_ARGS (f, "bob"), "--duration", LONG_SECONDS, "--stats",
      "--expect-participants", "1", "--json", "--send-data",
      "{\"from\": \"bob\"}", NULL);
  finish_call (a, b, 0);
  run_free (a);
  run_free (b);
}

/* a token signed with another secret, and one for another room */
static void
test_token_refused (Fixture * f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *forged = legba_join_token_new ("not-the-secret", ROOM,
      "alice", NULL, 600, &error);
  g_autofree char *elsewhere = legba_join_token_new (APP_SECRET,
      "another-room", "bob", NULL, 600, &error);
  Run *a, *b;

  g_assert_no_error (error);
  a = run_start (BASE_ARGS (f, "alice"), "--token", forged, "--app-id",
      APP_ID, "--duration", "60", NULL);
  b = run_start (BASE_ARGS (f, "bob"), "--token", elsewhere, "--app-id",
      APP_ID, "--duration", "60", NULL);
  g_assert_cmpint (run_wait (a), ==, 1);
  g_assert_cmpint (run_wait (b), ==, 1);
  g_test_message ("forged: %s; another room: %s", a->err, b->err);
  g_assert_nonnull (strstr (a->err, "refused"));
  g_assert_nonnull (strstr (b->err, "refused"));
  run_free (a);
  run_free (b);
}

/* ---- --video camera ---- */

/* No capture device can be made here (v4l2loopback cannot be loaded in a
 * container): only the error is tested, not a working camera. */
static void
test_no_camera (Fixture * f, gconstpointer data)
{
  GstDeviceMonitor *monitor = gst_device_monitor_new ();
  GList *devices;
  Run *a;

  gst_device_monitor_add_filter (monitor, "Video/Source", NULL);
  devices = gst_device_monitor_get_devices (monitor);
  gst_object_unref (monitor);
  if (devices != NULL) {
    g_list_free_full (devices, gst_object_unref);
    g_test_skip ("this machine has a camera");
    return;
  }
  a = run_start (CALL_ARGS (f, "alice"), "--video", "camera", "--duration",
      "60", NULL);
  g_assert_cmpint (run_wait (a), ==, 1);
  g_assert_nonnull (strstr (a->err, "No camera found"));
  run_free (a);
}

/* ---- --display window and grid ---- */

typedef struct
{
  GSubprocess *process;
  char *display;
  gboolean read;
} Xvfb;

static void
on_display_read (GObject * source, GAsyncResult * result, gpointer data)
{
  Xvfb *x = data;
  g_autofree char *line = g_data_input_stream_read_line_finish_utf8
      (G_DATA_INPUT_STREAM (source), result, NULL, NULL);

  if (line != NULL)
    x->display = g_strdup_printf (":%s", g_strstrip (line));
  x->read = TRUE;
}

/* Starts Xvfb, which says its display number once it accepts clients
 * (-displayfd); FALSE when Xvfb is not installed. Without -noreset, on
 * purpose: the server resets whenever its last client leaves, as a bare X
 * server does, and the calls must hold their display through it. */
static gboolean
xvfb_start (Xvfb * x)
{
  g_autofree char *path = g_find_program_in_path ("Xvfb");
  g_autoptr (GError) error = NULL;
  g_autoptr (GDataInputStream) in = NULL;
  g_autoptr (GSubprocessLauncher) launcher = NULL;

  if (path == NULL)
    return FALSE;
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE |
      G_SUBPROCESS_FLAGS_STDERR_SILENCE);
  legba_test_launcher_die_with_parent (launcher);
  x->process = g_subprocess_launcher_spawn (launcher, &error, path,
      "-displayfd", "1", "-nolisten", "tcp", "-screen", "0", "1280x720x24",
      NULL);
  g_assert_no_error (error);
  in = g_data_input_stream_new (g_subprocess_get_stdout_pipe (x->process));
  g_data_input_stream_read_line_async (in, G_PRIORITY_DEFAULT, NULL,
      on_display_read, x);
  WAIT_FOR (x->read, "Xvfb's display number");
  g_assert_nonnull (x->display);
  return TRUE;
}

static void
xvfb_stop (Xvfb * x)
{
  g_subprocess_send_signal (x->process, SIGTERM);
  g_subprocess_wait (x->process, NULL, NULL);
  g_object_unref (x->process);
  g_free (x->display);
}

/* Windows on a virtual X server (Xvfb): alice shows bob in a window of
 * its own, bob shows alice in the grid; both decode and count frames
 * and leave cleanly. That the windows show the right pictures is not
 * checked, only that the sinks take the frames. */
static void
test_display (Fixture * f, gconstpointer data)
{
  Xvfb x = { 0, };
  Run *a, *b;

  if (!xvfb_start (&x)) {
    g_test_skip ("Xvfb is not installed (Debian package xvfb)");
    return;
  }
  a = run_start_on (x.display, CALL_ARGS (f, "alice"), "--display", "window",
      "--duration", LONG_SECONDS, "--stats", "--expect-participants", "1",
      "--json", "--send-data", "{\"from\": \"alice\"}", NULL);
  b = run_start_on (x.display, CALL_ARGS (f, "bob"), "--display", "grid",
      "--duration", LONG_SECONDS, "--stats", "--expect-participants", "1",
      "--json", "--send-data", "{\"from\": \"bob\"}", NULL);
  finish_call (a, b, 0);
  run_free (a);
  run_free (b);
  xvfb_stop (&x);
}

/* without a display, or with one that cannot be opened (no X server has
 * that number), windows are refused at once */
static void
test_no_display (Fixture * f, gconstpointer data)
{
  Run *a = run_start (CALL_ARGS (f, "alice"), "--display", "window",
      "--duration", "60", NULL);
  Run *b = run_start (CALL_ARGS (f, "bob"), "--display", "grid",
      "--duration", "60", NULL);
  Run *c = run_start_on (":65535", CALL_ARGS (f, "carol"), "--display",
      "grid", "--duration", "60", NULL);

  g_assert_cmpint (run_wait (a), ==, 1);
  g_assert_nonnull (strstr (a->err, "No display to show the windows on"));
  g_assert_cmpint (run_wait (b), ==, 1);
  g_assert_nonnull (strstr (b->err, "No display to show the grid on"));
  g_assert_cmpint (run_wait (c), ==, 1);
  g_assert_nonnull (strstr (c->err,
          "Cannot open the X display :65535 to show the grid on"));
  run_free (a);
  run_free (b);
  run_free (c);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);

#define ADD_TOOL(path, func) \
  g_test_add ("/legba-call/" path, Fixture, NULL, fixture_setup, func, \
      fixture_teardown)
  ADD_TOOL ("two", test_two);
  ADD_TOOL ("latency", test_latency);
  ADD_TOOL ("nobody-came", test_nobody_came);
  ADD_TOOL ("unreachable", test_unreachable);
  ADD_TOOL ("usage", test_usage);
  ADD_TOOL ("video-file", test_video_file);
  ADD_TOOL ("video-file-bad", test_video_file_bad);
  ADD_TOOL ("token", test_token);
  ADD_TOOL ("token-refused", test_token_refused);
  ADD_TOOL ("no-camera", test_no_camera);
  ADD_TOOL ("display", test_display);
  ADD_TOOL ("no-display", test_no_display);
  return g_test_run ();
}
