/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The built legba-probe (LEGBA_PROBE) against the built legba-server
 * (LEGBA_SERVER) on 127.0.0.1, port 0: every subcommand's exit status and
 * parsed output.
 */
#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <legba-test.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define APP_ID "probe-app"
#define APP_KEY "probe-key"
#define APP_SECRET "probe-secret"
#define START_TIMEOUT_S 20

static LegbaTestProcess server;
static char *server_addr;       /* HOST:PORT */

/* Runs legba-probe with the arguments that follow (NULL-terminated). The
 * probe bounds itself with --timeout. */
#define run_probe(out, err, ...) \
  legba_test_run_tool ("LEGBA_PROBE", (out), (err), __VA_ARGS__)

static char *
server_url (void)
{
  return g_strdup_printf ("ws://%s", server_addr);
}

static void
assert_stats (JsonObject * parent, const char *member, gint64 n)
{
  JsonObject *stats = json_object_get_object_member (parent, member);

  g_assert_nonnull (stats);
  g_assert_cmpint (json_object_get_int_member (stats, "n"), ==, n);
  g_assert_cmpfloat (json_object_get_double_member (stats, "p50"), >, 0);
  g_assert_cmpfloat (json_object_get_double_member (stats, "p50"), <=,
      json_object_get_double_member (stats, "p95"));
  g_assert_cmpfloat (json_object_get_double_member (stats, "p95"), <=,
      json_object_get_double_member (stats, "p99"));
}

static void
test_probe_checks (void)
{
  g_autofree char *url = server_url ();
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  int status;

  status = run_probe (&out, &err, "probe", "--url", url, "--app-id", APP_ID,
      "--app-key", APP_KEY, "--app-secret", APP_SECRET, "--timeout", "30",
      NULL);
  g_test_message ("%s%s", out, err);
  g_assert_cmpint (status, ==, 0);
  g_assert_null (strstr (out, "not ok"));
  g_assert_nonnull (strstr (out, "ok 1 - connect"));
  g_assert_nonnull (strstr (out, "HTTP API: event received"));
  g_assert_nonnull (strstr (out, "member_removed"));
  g_assert_nonnull (strstr (out, "checks passed\n"));
}

static void
test_probe_refused (void)
{
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  int status;

  /* Nothing listens on port 1: the first check fails, the probe stops
   * there and exits 1, saying so. */
  status = run_probe (&out, &err, "probe", "--url", "ws://127.0.0.1:1",
      "--app-id", APP_ID, "--app-key", APP_KEY, "--app-secret", APP_SECRET,
      "--timeout", "5", NULL);
  g_assert_cmpint (status, ==, 1);
  g_assert_nonnull (strstr (out, "not ok 1 - connect"));
  g_assert_nonnull (strstr (err, "failed"));
}

static void
test_probe_usage (void)
{
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;

  g_assert_cmpint (run_probe (&out, &err, "no-such-command", NULL), ==, 2);
  g_assert_nonnull (strstr (err, "unknown command"));
  g_assert_cmpint (run_probe (&out, &err, "probe", "--url", "ws://x:1",
          NULL), ==, 2);
  g_assert_nonnull (strstr (err, "required"));
}

/* Round trips quiet and while a client floods pings (the server closes
 * it with 1008, it connects again). */
static void
test_flood (void)
{
  g_autofree char *url = server_url ();
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *result;
  int status;

  status = run_probe (&out, &err, "flood", "--url", url, "--app-id", APP_ID,
      "--app-key", APP_KEY, "--app-secret", APP_SECRET, "--count", "20",
      "--seconds", "0", "--json", "--timeout", "60", NULL);
  g_test_message ("%s%s", out, err);
  g_assert_cmpint (status, ==, 0);
  result = legba_test_parse_object (parser, out);
  g_assert_cmpint (json_object_get_int_member (result, "flooders"), ==, 1);
  assert_stats (result, "quiet_ms", 20);
  assert_stats (result, "flood_ms", 20);
  g_assert_cmpint (json_object_get_int_member (result, "flooder_connections"),
      >=, 1);
}

static void
test_rtt (void)
{
  g_autofree char *url = server_url ();
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *result;
  int status;

  status = run_probe (&out, &err, "rtt", "--url", url, "--app-id", APP_ID,
      "--app-key", APP_KEY, "--app-secret", APP_SECRET, "--count", "20",
      "--warmup", "2", "--json", "--timeout", "60", NULL);
  g_test_message ("%s%s", out, err);
  g_assert_cmpint (status, ==, 0);
  result = legba_test_parse_object (parser, out);
  g_assert_cmpint (json_object_get_int_member (result, "count"), ==, 20);
  assert_stats (result, "ping_ms", 20);
  assert_stats (result, "relay_ms", 20);
}

static void
test_load_fanout (void)
{
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *result, *split;
  int status;

  status = run_probe (&out, &err, "load", "--targets", server_addr,
      "--connections", "200", "--events", "3", "--warmup", "1",
      "--connect-window", "16", "--app-id", APP_ID, "--app-key", APP_KEY,
      "--app-secret", APP_SECRET, "--json", "--timeout", "60", NULL);
  g_test_message ("%s%s", out, err);
  g_assert_cmpint (status, ==, 0);
  result = legba_test_parse_object (parser, out);
  g_assert_cmpint (json_object_get_int_member (result, "total"), ==, 600);
  g_assert_cmpint (json_object_get_int_member (result, "delivered"), ==, 600);
  g_assert_cmpint (json_object_get_int_member (result, "subscribed"), ==, 200);
  g_assert_cmpint (json_object_get_int_member (result, "duplicates"), ==, 0);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member
          (result, "split")), ==, 1);
  split = json_array_get_object_element (json_object_get_array_member
      (result, "split"), 0);
  g_assert_cmpstr (json_object_get_string_member (split, "target"), ==,
      server_addr);
  g_assert_cmpint (json_object_get_int_member (split, "delivered"), ==, 600);
  assert_stats (result, "latency_ms", 600);
}

/* Five round trips per pair stay under the default client-event rate. */
static void
test_load_relay (void)
{
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *result, *relay;
  int status;

  status = run_probe (&out, &err, "load", "--targets", server_addr,
      "--connections", "40", "--relay", "5", "--app-id", APP_ID,
      "--app-key", APP_KEY, "--app-secret", APP_SECRET, "--json",
      "--timeout", "60", NULL);
  g_test_message ("%s%s", out, err);
  g_assert_cmpint (status, ==, 0);
  result = legba_test_parse_object (parser, out);
  relay = json_object_get_object_member (result, "relay");
  g_assert_cmpint (json_object_get_int_member (relay, "expected"), ==,
      2 * 20 * 5);
  g_assert_cmpint (json_object_get_int_member (relay, "relayed"), ==,
      2 * 20 * 5);
  assert_stats (relay, "rtt_ms", 20 * 5);
}

/* The generator against its own minimal server: its ceiling. */
static void
test_load_self_test (void)
{
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *result;
  int status;

  status = run_probe (&out, &err, "load", "--self-test", "--connections",
      "300", "--events", "2", "--workers", "2", "--json", "--timeout", "60",
      NULL);
  g_test_message ("%s%s", out, err);
  g_assert_cmpint (status, ==, 0);
  result = legba_test_parse_object (parser, out);
  g_assert_true (json_object_get_boolean_member (result, "self_test"));
  g_assert_cmpint (json_object_get_int_member (result, "workers"), ==, 2);
  g_assert_cmpint (json_object_get_int_member (result, "delivered"), ==, 600);
  g_assert_cmpfloat (json_object_get_double_member (result,
          "fanout_frames_per_s"), >, 0);
}

/* --sync with --self-test: the probe names its server first, a live
 * process of its own that a harness can sample, then stops at each phase
 * until told to go on. */
static void
test_load_self_test_sync (void)
{
  const char *argv[] = { legba_test_tool_path ("LEGBA_PROBE"), "load",
    "--self-test", "--connections", "50", "--events", "2", "--warmup", "1",
    "--sync", "--json", "--timeout", "60", NULL
  };
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) probe = g_subprocess_newv (argv,
      G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE, &error);
  g_autoptr (GDataInputStream) out = NULL;
  g_autoptr (GString) seen = g_string_new (NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  GOutputStream *in;
  char *line;

  g_assert_no_error (error);
  out = g_data_input_stream_new (g_subprocess_get_stdout_pipe (probe));
  in = g_subprocess_get_stdin_pipe (probe);
  while ((line = g_data_input_stream_read_line (out, NULL, NULL, &error))) {
    if (line[0] == '{') {
      JsonObject *result = legba_test_parse_object (parser, line);

      g_assert_cmpint (json_object_get_int_member (result, "delivered"), ==,
          100);
      g_free (line);
      continue;
    }
    if (g_str_has_prefix (line, "self-test-server ")) {
      g_autofree char *stat_path = g_strdup_printf ("/proc/%s/stat",
          line + strlen ("self-test-server "));
      g_autofree char *stat = NULL;
      int ppid = 0;

      g_assert_true (g_file_get_contents (stat_path, &stat, NULL, NULL));
      /* "PID (COMM) STATE PPID ...": its parent is the probe */
      g_assert_nonnull (strrchr (stat, ')'));
      g_assert_cmpint (sscanf (strrchr (stat, ')'), ") %*c %d", &ppid), ==, 1);
      g_assert_cmpint (ppid, ==, atoi (g_subprocess_get_identifier (probe)));
      g_string_append (seen, "server ");
    } else {
      g_string_append_printf (seen, "%.*s ", (int) strcspn (line, " "), line);
    }
    g_free (line);
    g_assert_true (g_output_stream_write_all (in, "\n", 1, NULL, NULL, &error));
  }
  g_assert_no_error (error);
  g_assert_true (g_subprocess_wait_check (probe, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (seen->str, ==, "server subscribed warm done ");
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  if (g_getenv ("LEGBA_SERVER") == NULL || g_getenv ("LEGBA_PROBE") == NULL) {
    g_test_skip ("LEGBA_SERVER and LEGBA_PROBE must name the built tools");
    return g_test_run ();
  }
  {
    const char *server_argv[] = { legba_test_tool_path ("LEGBA_SERVER"),
      "--bind", "127.0.0.1", "--port", "0", "--app-id", APP_ID,
      "--app-key", APP_KEY, "--app-secret", APP_SECRET, NULL
    };

    legba_test_process_start (&server, server_argv,
        "legba-server listening on ", START_TIMEOUT_S);
    server_addr =
        g_strdup (server.line + strlen ("legba-server listening on "));
  }

  g_test_add_func ("/probe/probe/all-checks-pass", test_probe_checks);
  g_test_add_func ("/probe/probe/no-server", test_probe_refused);
  g_test_add_func ("/probe/usage", test_probe_usage);
  g_test_add_func ("/probe/rtt/json", test_rtt);
  g_test_add_func ("/probe/flood/json", test_flood);
  g_test_add_func ("/probe/load/fanout", test_load_fanout);
  g_test_add_func ("/probe/load/relay", test_load_relay);
  g_test_add_func ("/probe/load/self-test", test_load_self_test);
  g_test_add_func ("/probe/load/self-test-sync", test_load_self_test_sync);
  status = g_test_run ();

  legba_test_process_signal (&server, SIGTERM, START_TIMEOUT_S);
  legba_test_process_clear (&server);
  g_free (server_addr);
  return status;
}
