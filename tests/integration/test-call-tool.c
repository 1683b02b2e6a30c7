/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-call driven as a process (the built binary, $LEGBA_CALL), against
 * legba-server in-process: two participants that exchange media and data
 * and report it as JSON, and the failures it must report by its exit
 * status and a clear message.
 */
#include "signal-test.h"

/* the processes run on a busy machine (and under AddressSanitizer): the
 * call lasts long enough for a slow setup, and nothing waits on time but
 * the processes' own --duration */
#define CALL_SECONDS "12"

typedef struct
{
  GSubprocess *process;
  char *out;
  char *err;
  gboolean done;
} Run;

static void
on_communicated (GObject * source, GAsyncResult * result, gpointer data)
{
  Run *run = data;
  g_autoptr (GError) error = NULL;

  g_subprocess_communicate_utf8_finish (G_SUBPROCESS (source), result,
      &run->out, &run->err, &error);
  g_assert_no_error (error);
  run->done = TRUE;
}

static Run *
run_start (const char *first, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  Run *run = g_new0 (Run, 1);
  const char *arg;
  va_list args;

  g_ptr_array_add (argv, (gpointer) g_getenv ("LEGBA_CALL"));
  va_start (args, first);
  for (arg = first; arg != NULL; arg = va_arg (args, const char *))
      g_ptr_array_add (argv, (gpointer) arg);
  va_end (args);
  g_ptr_array_add (argv, NULL);
  run->process = g_subprocess_newv ((const char *const *) argv->pdata,
      G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE, &error);
  g_assert_no_error (error);
  g_subprocess_communicate_utf8_async (run->process, NULL, NULL,
      on_communicated, run);
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
  g_assert_true (g_subprocess_get_if_exited (run->process));
  return g_subprocess_get_exit_status (run->process);
}

static void
run_free (Run * run)
{
  g_object_unref (run->process);
  g_free (run->out);
  g_free (run->err);
  g_free (run);
}

#define CALL_ARGS(f, identity) "--server", (f)->url, "--room", ROOM, \
    "--identity", identity, "--key", APP_KEY, "--secret", APP_SECRET, \
    "--width", "160", "--height", "120", "--fps", "15", "--bitrate", "200"

static void
assert_report (const char *out, const char *identity)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) root = json_from_string (out, &error);
  JsonArray *participants;
  JsonObject *p;

  g_assert_no_error (error);
  participants = json_object_get_array_member (json_node_get_object (root),
      "participants");
  g_assert_cmpuint (json_array_get_length (participants), ==, 1);
  p = json_array_get_object_element (participants, 0);
  g_assert_cmpstr (json_object_get_string_member (p, "identity"), ==, identity);
  g_assert_true (g_str_has_prefix (json_object_get_string_member (p, "id"),
          identity));
  g_assert_cmpint (json_object_get_int_member (p, "video_frames"), >, 0);
  g_assert_cmpint (json_object_get_int_member (p, "audio_buffers"), >, 0);
  g_assert_cmpint (json_object_get_int_member (p, "data_messages"), ==, 1);
}

static void
test_two (Fixture * f, gconstpointer data)
{
  Run *a = run_start (CALL_ARGS (f, "alice"), "--duration", CALL_SECONDS,
      "--expect-participants", "1", "--json", "--stats",
      "--send-data", "{\"from\": \"alice\"}", NULL);
  Run *b = run_start (CALL_ARGS (f, "bob"), "--duration", CALL_SECONDS,
      "--expect-participants", "1", "--json",
      "--send-data", "{\"from\": \"bob\"}", NULL);

  g_assert_cmpint (run_wait (a), ==, 0);
  g_assert_cmpint (run_wait (b), ==, 0);
  assert_report (a->out, "bob");
  assert_report (b->out, "alice");
  g_assert_nonnull (strstr (a->err, "data from bob: {\"from\":\"bob\"}"));
  g_assert_nonnull (strstr (a->err, "+ bob joined"));
  g_assert_nonnull (strstr (a->err, "stats: "));
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

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);

#define ADD_TOOL(path, func) \
  g_test_add ("/legba-call/" path, Fixture, NULL, fixture_setup, func, \
      fixture_teardown)
  ADD_TOOL ("two", test_two);
  ADD_TOOL ("nobody-came", test_nobody_came);
  ADD_TOOL ("unreachable", test_unreachable);
  ADD_TOOL ("usage", test_usage);
  return g_test_run ();
}
