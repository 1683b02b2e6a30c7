/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The built legba-bench (LEGBA_BENCH) with the built plugin: one launch
 * line, a send and a receive line in one process and in two, warm-up and
 * seconds, the JSON the suites parse, usage errors, and its refusal to
 * measure a build that is not a release build.
 */
#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <legba/legba.h>
#include <legba-test.h>
#include <string.h>

#define LIVE_SOURCE "videotestsrc is-live=true pattern=ball " \
  "! video/x-raw,format=I420,width=320,height=240,framerate=30/1 " \
  "! legbastamp "
#define ENCODE "x264enc name=enc tune=zerolatency speed-preset=ultrafast " \
  "bitrate=300 "
#define RTP_CAPS "application/x-rtp,media=video,encoding-name=H264," \
  "clock-rate=90000,payload=96"

/* Runs legba-bench with --timeout 60 and the arguments that follow. */
#define run_bench(out, err, ...) \
  legba_test_run_tool ("LEGBA_BENCH", (out), (err), "--timeout=60", \
      __VA_ARGS__)

static JsonObject *
member_object (JsonObject * o, const char *name)
{
  JsonNode *node = json_object_get_member (o, name);

  g_assert_nonnull (node);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (node));
  return json_node_get_object (node);
}

/* latency_ms: n samples, ordered percentiles within [min, max], and the
 * series they came from. */
static void
assert_latency (JsonObject * result, gint64 n)
{
  JsonObject *l = member_object (result, "latency_ms");
  JsonArray *series = json_object_get_array_member (l, "series");
  gdouble p50 = json_object_get_double_member (l, "p50");
  gdouble p95 = json_object_get_double_member (l, "p95");
  gdouble p99 = json_object_get_double_member (l, "p99");

  g_assert_cmpint (json_object_get_int_member (l, "n"), ==, n);
  g_assert_cmpuint (json_array_get_length (series), ==, n);
  g_assert_cmpfloat (json_object_get_double_member (l, "min"), >=, 0);
  g_assert_cmpfloat (json_object_get_double_member (l, "min"), <=, p50);
  g_assert_cmpfloat (p50, <=, p95);
  g_assert_cmpfloat (p95, <=, p99);
  g_assert_cmpfloat (p99, <=, json_object_get_double_member (l, "max"));
  /* one clock: a frame is never older than the run */
  g_assert_cmpfloat (json_object_get_double_member (l, "max"), <, 60000);
}

static void
assert_conditions (JsonObject * result)
{
  JsonObject *c = member_object (result, "conditions");

  g_assert_cmpstr (json_object_get_string_member (c, "cpu_model"), !=, "");
  g_assert_cmpint (json_object_get_int_member (c, "cpu_count"), >=, 1);
  g_assert_true (g_str_has_prefix (json_object_get_string_member (c,
              "kernel"), "Linux "));
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (c,
              "load_average_start")), ==, 3);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (c,
              "load_average_end")), ==, 3);
  g_assert_true (g_str_has_prefix (json_object_get_string_member (c,
              "gstreamer"), "GStreamer 1."));
  g_assert_cmpstr (json_object_get_string_member (c, "legba_build_type"), ==,
      LEGBA_BUILD_TYPE);
  g_assert_true (json_object_has_member (c, "busy_processes"));
  g_assert_nonnull (strstr (json_object_get_string_member (c, "command"),
          "legba-bench"));
}

/* The element named enc and its factory are among the elements. */
static void
assert_element (JsonObject * result, const char *name, const char *factory)
{
  JsonArray *elements = json_object_get_array_member (result, "elements");

  for (guint i = 0; i < json_array_get_length (elements); i++) {
    JsonObject *e = json_array_get_object_element (elements, i);

    if (g_str_equal (json_object_get_string_member (e, "name"), name)) {
      g_assert_cmpstr (json_object_get_string_member (e, "factory"), ==,
          factory);
      g_assert_cmpfloat (json_object_get_double_member (e, "cpu_ms"), >, 0);
      return;
    }
  }
  g_error ("no element %s in the result", name);
}

static void
test_pipeline_json (void)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  JsonObject *result, *check, *encoded;
  int status;

  status = run_bench (&out, &err, "--allow-debug", "--frames", "20",
      "--json", "videotestsrc pattern=ball ! video/x-raw,format=I420,"
      "width=320,height=240,framerate=30/1 ! legbastamp ! " ENCODE
      "! avdec_h264 ! legbastampcheck ! fakesink", NULL);
  g_test_message ("%s", err);
  g_assert_cmpint (status, ==, 0);
  result = legba_test_parse_object (parser, out);

  g_assert_cmpstr (json_object_get_string_member (result, "mode"), ==,
      "pipeline");
  g_assert_cmpint (json_object_get_int_member (result, "frames"), ==, 20);
  g_assert_cmpint (json_object_get_int_member (result, "frames_in"), ==, 20);
  g_assert_cmpint (json_object_get_int_member (result, "frames_out"), ==, 20);
  g_assert_cmpfloat (json_object_get_double_member (result,
          "cpu_ms_per_frame"), >, 0);
  g_assert_cmpfloat (json_object_get_double_member (member_object (result,
              "cpu_s"), "total"), >, 0);
  assert_latency (result, 20);
  check = member_object (result, "check");
  g_assert_cmpint (json_object_get_int_member (check, "valid"), ==, 20);
  g_assert_cmpint (json_object_get_int_member (check, "failed"), ==, 0);
  g_assert_cmpint (json_object_get_int_member (check, "lost"), ==, 0);

  /* 20 frames at 30/s: 2/3 of a second of stream */
  g_assert_cmpfloat (json_object_get_double_member (result, "bitrate_bps"),
      >, 0);
  encoded = member_object (result, "encoded");
  g_assert_cmpstr (json_object_get_string_member (encoded, "element"), ==,
      "enc");
  g_assert_cmpint (json_object_get_int_member (encoded, "buffers"), ==, 20);
  g_assert_cmpfloat_with_epsilon (json_object_get_double_member (encoded,
          "seconds"), 20 / 30.0, 0.001);

  g_assert_cmpuint (json_array_get_length (json_object_get_array_member
          (result, "threads")), >, 0);
  assert_element (result, "enc", "x264enc");
  assert_conditions (result);
}

/* The first frames go by unmeasured; their latency samples too. */
static void
test_pipeline_warmup (void)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  JsonObject *result;
  int status;

  status = run_bench (&out, &err, "--allow-debug", "--warmup", "5",
      "--frames", "10", "--json", "--no-elements",
      "videotestsrc ! video/x-raw,format=I420,width=320,height=240 "
      "! legbastamp ! legbastampcheck ! fakesink", NULL);
  g_test_message ("%s", err);
  g_assert_cmpint (status, ==, 0);
  result = legba_test_parse_object (parser, out);
  g_assert_cmpint (json_object_get_int_member (result, "warmup_frames"), ==, 5);
  g_assert_cmpint (json_object_get_int_member (result, "frames_in_total"), ==,
      15);
  g_assert_cmpint (json_object_get_int_member (result, "frames_out_total"),
      ==, 15);
  g_assert_cmpint (json_object_get_int_member (result, "frames"), ==, 10);
  assert_latency (result, 10);
  g_assert_cmpint (json_object_get_int_member (member_object (result,
              "check"), "valid"), ==, 15);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member
          (result, "elements")), ==, 0);
}

/* A live source for a second: every frame that went in came out. */
static void
test_pipeline_seconds (void)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  JsonObject *result;
  gint64 frames;
  int status;

  status = run_bench (&out, &err, "--allow-debug", "--seconds", "1",
      "--json", LIVE_SOURCE "! legbastampcheck ! fakesink", NULL);
  g_test_message ("%s", err);
  g_assert_cmpint (status, ==, 0);
  result = legba_test_parse_object (parser, out);
  frames = json_object_get_int_member (result, "frames");
  g_assert_cmpint (frames, >, 0);
  g_assert_cmpfloat (json_object_get_double_member (result, "seconds"), >=,
      1.0);
  g_assert_cmpint (json_object_get_int_member (result, "frames_out_total"),
      ==, json_object_get_int_member (result, "frames_in_total"));
  assert_latency (result, json_object_get_int_member (result,
          "frames_in_total"));
}

/* A port on 127.0.0.1 that was free a moment ago. */
static guint16
free_udp_port (void)
{
  g_autoptr (GSocket) socket = NULL;
  g_autoptr (GInetAddress) loopback = g_inet_address_new_loopback
      (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) any = g_inet_socket_address_new (loopback, 0);
  g_autoptr (GSocketAddress) bound = NULL;
  g_autoptr (GError) error = NULL;

  socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_DATAGRAM,
      G_SOCKET_PROTOCOL_UDP, &error);
  g_assert_no_error (error);
  g_socket_bind (socket, any, FALSE, &error);
  g_assert_no_error (error);
  bound = g_socket_get_local_address (socket, &error);
  g_assert_no_error (error);
  return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
}

static void
test_send_recv (gconstpointer data)
{
  gboolean processes = GPOINTER_TO_INT (data);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autofree char *send = NULL;
  g_autofree char *recv = NULL;
  JsonObject *result;
  guint16 port = free_udp_port ();
  int status;

  send = g_strdup_printf (LIVE_SOURCE "! " ENCODE "! rtph264pay "
      "config-interval=-1 ! udpsink host=127.0.0.1 port=%u", port);
  recv = g_strdup_printf ("udpsrc address=127.0.0.1 port=%u caps=\""
      RTP_CAPS "\" ! rtph264depay ! avdec_h264 ! legbastampcheck "
      "! fakesink", port);
  status = run_bench (&out, &err, "--allow-debug", "--frames", "20",
      "--json", "--send", send, "--recv", recv,
      processes ? "--processes" : NULL, NULL);
  g_test_message ("%s", err);
  g_assert_cmpint (status, ==, 0);
  result = legba_test_parse_object (parser, out);

  g_assert_cmpstr (json_object_get_string_member (result, "mode"), ==,
      processes ? "processes" : "send-recv");
  g_assert_cmpint (json_object_get_int_member (result, "frames"), ==, 20);
  g_assert_cmpint (json_object_get_int_member (result, "frames_out"), ==, 20);
  assert_latency (result, 20);
  g_assert_cmpfloat (json_object_get_double_member (result, "bitrate_bps"),
      >, 0);
  g_assert_cmpfloat (json_object_get_double_member (result,
          "cpu_ms_per_frame"), >, 0);
  assert_element (result, "enc", "x264enc");
  assert_element (result, "avdec_h264-0", "avdec_h264");
  assert_conditions (result);
  if (processes) {
    JsonObject *p = member_object (result, "processes");
    gdouble send_ms = json_object_get_double_member (member_object (p,
            "send"), "cpu_ms_per_frame");
    gdouble recv_ms = json_object_get_double_member (member_object (p,
            "recv"), "cpu_ms_per_frame");

    g_assert_cmpfloat (send_ms, >, 0);
    g_assert_cmpfloat (recv_ms, >, 0);
    g_assert_cmpfloat_with_epsilon (send_ms + recv_ms,
        json_object_get_double_member (result, "cpu_ms_per_frame"), 1e-6);
  } else {
    g_assert_false (json_object_has_member (result, "processes"));
  }
}

/* Without a stamp, a checker or an encoder: frames, CPU; the rest says
 * it was not measured. */
static void
test_no_instruments (void)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  JsonObject *result, *latency;
  int status;

  status = run_bench (&out, &err, "--allow-debug", "--frames", "10",
      "--json", "videotestsrc", "!", "fakesink", NULL);
  g_test_message ("%s", err);
  g_assert_cmpint (status, ==, 0);
  result = legba_test_parse_object (parser, out);
  g_assert_cmpint (json_object_get_int_member (result, "frames"), ==, 10);
  g_assert_cmpint (json_object_get_int_member (result, "frames_out"), ==, 10);
  latency = member_object (result, "latency_ms");
  g_assert_cmpint (json_object_get_int_member (latency, "n"), ==, 0);
  g_assert_true (json_object_get_null_member (latency, "p50"));
  g_assert_true (json_object_get_null_member (result, "check"));
  g_assert_true (json_object_get_null_member (result, "bitrate_bps"));

  /* the same in words */
  status = run_bench (&out, &err, "--allow-debug", "--frames", "10",
      "videotestsrc ! fakesink", NULL);
  g_assert_cmpint (status, ==, 0);
  g_assert_nonnull (strstr (out, "latency     not measured"));
  g_assert_nonnull (strstr (out, "bitrate     not measured"));
  g_assert_nonnull (strstr (out, "CPU "));
  g_assert_nonnull (strstr (out, "conditions  "));
}

static void
test_usage (void)
{
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;

  g_assert_cmpint (run_bench (&out, &err, "--allow-debug", NULL), ==, 2);
  g_assert_nonnull (strstr (err, "no PIPELINE"));
  g_assert_cmpint (run_bench (&out, &err, "--allow-debug", "--frames", "5",
          "--seconds", "1", "fakesrc ! fakesink", NULL), ==, 2);
  g_assert_cmpint (run_bench (&out, &err, "--allow-debug", "--send",
          "fakesrc ! fakesink", NULL), ==, 2);
  g_assert_cmpint (run_bench (&out, &err, "--allow-debug", "--processes",
          "fakesrc ! fakesink", NULL), ==, 2);
  g_assert_cmpint (run_bench (&out, &err, "--allow-debug",
          "--send", "fakesrc ! fakesink", "--recv", "fakesrc ! fakesink",
          "fakesrc ! fakesink", NULL), ==, 2);
  /* a line that does not parse, one that fails while playing */
  g_assert_cmpint (run_bench (&out, &err, "--allow-debug",
          "nosuchelement ! fakesink", NULL), ==, 1);
  g_assert_nonnull (strstr (err, "nosuchelement"));
  g_assert_cmpint (run_bench (&out, &err, "--allow-debug", "filesrc "
          "location=/nonexistent/file ! fakesink", NULL), ==, 1);
  g_assert_nonnull (strstr (err, "pipeline line"));
}

/* docs/benchmarks.md, "Runs": legba-bench refuses to measure a debug
 * build. */
static void
test_refuses_debug (void)
{
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  int status;

  status = run_bench (&out, &err, "--frames", "3", "videotestsrc "
      "! fakesink", NULL);
  if (g_str_equal (LEGBA_BUILD_TYPE, "release") && !LEGBA_BUILD_SANITIZED) {
    g_assert_cmpint (status, ==, 0);
  } else {
    g_assert_cmpint (status, ==, 3);
    g_assert_nonnull (strstr (err, "refusing to measure a " LEGBA_BUILD_TYPE
            " build"));
    g_assert_cmpstr (out, ==, "");
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/bench/pipeline/json", test_pipeline_json);
  g_test_add_func ("/bench/pipeline/warmup", test_pipeline_warmup);
  g_test_add_func ("/bench/pipeline/seconds", test_pipeline_seconds);
  g_test_add_data_func ("/bench/send-recv/one-process",
      GINT_TO_POINTER (FALSE), test_send_recv);
  g_test_add_data_func ("/bench/send-recv/two-processes",
      GINT_TO_POINTER (TRUE), test_send_recv);
  g_test_add_func ("/bench/no-instruments", test_no_instruments);
  g_test_add_func ("/bench/usage", test_usage);
  g_test_add_func ("/bench/refuses-debug", test_refuses_debug);
  return g_test_run ();
}
