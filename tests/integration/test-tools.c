/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The built tools as a user runs them (paths in LEGBA_SERVER and
 * LEGBA_TOKEN): legba-server's command line, configuration file, errors
 * and signals, and a legba-token join token accepted by the server.
 */
#include <legba/server/server.h>

#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <legba-test.h>
#include <libsoup/soup.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define WAIT_S 10


/* ---- A running legba-server ---- */

typedef struct
{
  LegbaTestProcess p;
  guint port;
} Server;

/* Starts legba-server with args (NULL-terminated) and checks that its
 * first line is the listening line. */
static Server *
server_start (const char *first_arg, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GRegex) regex = g_regex_new
      ("^legba-server listening on 127\\.0\\.0\\.1:[0-9]+$", 0, 0, NULL);
  Server *server = g_new0 (Server, 1);
  const char *arg;
  va_list ap;

  g_ptr_array_add (argv, (gpointer) legba_test_tool_path ("LEGBA_SERVER"));
  va_start (ap, first_arg);
  for (arg = first_arg; arg != NULL; arg = va_arg (ap, const char *))
      g_ptr_array_add (argv, (gpointer) arg);
  va_end (ap);
  g_ptr_array_add (argv, NULL);

  legba_test_process_start (&server->p, (const char *const *) argv->pdata,
      NULL, WAIT_S);
  if (!g_regex_match (regex, server->p.line, 0, NULL))
    g_error ("unexpected first line: %s", server->p.line);
  server->port = legba_test_server_port (&server->p);
  return server;
}

/* SIGTERM, then the exit status, which must be 0. */
static void
server_stop (Server * server)
{
  g_autofree char *rest = NULL;
  gsize len = 0;

  legba_test_process_signal (&server->p, SIGTERM, WAIT_S);
  g_assert_true (g_subprocess_get_if_exited (server->p.process));
  g_assert_cmpint (g_subprocess_get_exit_status (server->p.process), ==, 0);

  /* The listening line was the only one on stdout. */
  rest = g_data_input_stream_read_upto (server->p.out, "", 0, &len, NULL, NULL);
  g_assert_cmpuint (len, ==, 0);

  legba_test_process_clear (&server->p);
  g_free (server);
}

/* Runs legba-server with args to completion; returns its exit status. */
static int
run_server (const char *const *args, char **err)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autofree char *out = NULL;

  g_ptr_array_add (argv, (gpointer) legba_test_tool_path ("LEGBA_SERVER"));
  for (; *args != NULL; args++)
    g_ptr_array_add (argv, (gpointer) * args);
  g_ptr_array_add (argv, NULL);
  return legba_test_run ((const char *const *) argv->pdata, &out, err);
}

/* ---- Clients ---- */

typedef struct
{
  gboolean done;
  SoupWebsocketConnection *ws;
  GError *error;
  GPtrArray *frames;            /* JsonObject */
  gboolean closed;
  gushort close_code;
} Client;

static void
client_on_message (SoupWebsocketConnection * ws, gint type, GBytes * message,
    gpointer user_data)
{
  Client *client = user_data;
  g_autoptr (JsonParser) parser = json_parser_new ();
  gsize len;
  const char *text = g_bytes_get_data (message, &len);

  g_assert_true (json_parser_load_from_data (parser, text, len, NULL));
  g_ptr_array_add (client->frames,
      json_object_ref (json_node_get_object (json_parser_get_root (parser))));
}

static void
client_on_closed (SoupWebsocketConnection * ws, gpointer user_data)
{
  Client *client = user_data;

  client->closed = TRUE;
  client->close_code = soup_websocket_connection_get_close_code (ws);
}

static void
client_on_connected (GObject * source, GAsyncResult * result,
    gpointer user_data)
{
  Client *client = user_data;

  client->ws = soup_session_websocket_connect_finish (SOUP_SESSION (source),
      result, &client->error);
  client->done = TRUE;
  if (client->ws == NULL)
    return;
  g_signal_connect (client->ws, "message", G_CALLBACK (client_on_message),
      client);
  g_signal_connect (client->ws, "closed", G_CALLBACK (client_on_closed),
      client);
}

static JsonObject *
frame_data (JsonObject * frame)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  const char *data = json_object_get_string_member (frame, "data");

  g_assert_true (json_parser_load_from_data (parser, data, -1, NULL));
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

static JsonObject *
client_wait (Client * client, const char *event)
{
  guint i = 0;

  for (;;) {
    for (; i < client->frames->len; i++) {
      JsonObject *frame = client->frames->pdata[i];

      if (g_strcmp0 (json_object_get_string_member (frame, "event"), event)
          == 0)
        return frame;
    }
    LEGBA_TEST_WAIT_UNTIL (i < client->frames->len
        || client->closed, WAIT_S, event);
    if (i >= client->frames->len)
      g_error ("closed (%u) while waiting for %s", client->close_code, event);
  }
}

/* Connects to /app/KEY?protocol=7 and returns the connection data. */
static Client *
client_connect (Server * server, const char *key, JsonObject ** established)
{
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autofree char *url = g_strdup_printf
      ("ws://127.0.0.1:%u/app/%s?protocol=7", server->port, key);
  g_autoptr (SoupMessage) msg = soup_message_new ("GET", url);
  Client *client = g_new0 (Client, 1);

  client->frames = g_ptr_array_new_with_free_func ((GDestroyNotify)
      json_object_unref);
  soup_session_websocket_connect_async (session, msg, NULL, NULL,
      G_PRIORITY_DEFAULT, NULL, client_on_connected, client);
  LEGBA_TEST_WAIT_UNTIL (client->done, WAIT_S, "the WebSocket handshake");
  g_assert_no_error (client->error);
  *established = frame_data (client_wait (client,
          "pusher:connection_established"));
  return client;
}

static void
client_free (Client * client)
{
  if (client->ws != NULL) {
    if (soup_websocket_connection_get_state (client->ws) ==
        SOUP_WEBSOCKET_STATE_OPEN)
      soup_websocket_connection_close (client->ws, SOUP_WEBSOCKET_CLOSE_NORMAL,
          NULL);
    LEGBA_TEST_WAIT_UNTIL (client->closed, WAIT_S, "the client to close");
    g_signal_handlers_disconnect_by_data (client->ws, client);
    g_object_unref (client->ws);
  }
  g_ptr_array_unref (client->frames);
  g_clear_error (&client->error);
  g_free (client);
}

typedef struct
{
  gboolean done;
  GBytes *body;
} Response;

static void
on_response (GObject * source, GAsyncResult * result, gpointer user_data)
{
  Response *response = user_data;

  response->body = soup_session_send_and_read_finish (SOUP_SESSION (source),
      result, NULL);
  response->done = TRUE;
}

static guint
http_send (SoupMessage * msg, char **body)
{
  g_autoptr (SoupSession) session = soup_session_new ();
  Response response = { 0, };

  soup_session_send_and_read_async (session, msg, G_PRIORITY_DEFAULT, NULL,
      on_response, &response);
  LEGBA_TEST_WAIT_UNTIL (response.done, WAIT_S, "an HTTP response");
  g_assert_nonnull (response.body);
  if (body != NULL)
    *body = g_strndup (g_bytes_get_data (response.body, NULL),
        g_bytes_get_size (response.body));
  g_bytes_unref (response.body);
  return soup_message_get_status (msg);
}

static char *
write_file (const char *dir, const char *name, const char *contents)
{
  g_autoptr (GError) error = NULL;
  char *path = g_build_filename (dir, name, NULL);

  g_assert_true (g_file_set_contents (path, contents, -1, &error));
  g_assert_no_error (error);
  return path;
}

/* ---- Tests ---- */

static void
test_listen_line (void)
{
  Server *server = server_start ("--port", "0", "--app-id", "1",
      "--app-key", "key", "--app-secret", "secret", NULL);
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/up",
      server->port);
  g_autoptr (SoupMessage) msg = soup_message_new ("GET", url);
  g_autofree char *body = NULL;

  g_assert_cmpuint (http_send (msg, &body), ==, 200);
  g_assert_cmpstr (body, ==, "OK\n");
  server_stop (server);
}

static void
test_config_two_apps (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("legba-tools-XXXXXX", &error);
  g_autofree char *config = NULL;
  Server *server;
  Client *one, *two;
  g_autoptr (JsonObject) one_data = NULL;
  g_autoptr (JsonObject) two_data = NULL;

  g_assert_no_error (error);
  config = write_file (dir, "legba.conf",
      "[server]\nbind = 127.0.0.1\nport = 6001\n\n"
      "[limits]\nactivity-timeout = 30\nclient-events-per-second = 20\n\n"
      "[app first]\nid = 1\nkey = key-one\nsecret = secret-one\n\n"
      "[app second]\nid = 2\nkey = key-two\nsecret = secret-two\n");

  /* Flags override the file: port 0 and another activity timeout. */
  server = server_start ("--config", config, "--port", "0",
      "--activity-timeout", "45", NULL);
  one = client_connect (server, "key-one", &one_data);
  two = client_connect (server, "key-two", &two_data);
  g_assert_cmpint (json_object_get_int_member (one_data, "activity_timeout"),
      ==, 45);
  g_assert_cmpint (json_object_get_int_member (two_data, "activity_timeout"),
      ==, 45);
  g_assert_cmpint (json_object_get_int_member (json_object_get_object_member
          (one_data, "limits"), "client_events_per_second"), ==, 20);

  client_free (one);
  client_free (two);
  server_stop (server);
  g_remove (config);
  g_rmdir (dir);
}

/* legba-server with these args exits with `expected` and says `message`
 * on stderr. */
static void
assert_fails (int expected, const char *message, const char *first_arg, ...)
{
  g_autoptr (GPtrArray) args = g_ptr_array_new ();
  g_autofree char *err = NULL;
  const char *arg;
  int status;
  va_list ap;

  va_start (ap, first_arg);
  for (arg = first_arg; arg != NULL; arg = va_arg (ap, const char *))
      g_ptr_array_add (args, (gpointer) arg);
  va_end (ap);
  g_ptr_array_add (args, NULL);

  status = run_server ((const char *const *) args->pdata, &err);
  g_test_message ("stderr: %s", err);
  g_assert_cmpint (status, ==, expected);
  if (strstr (err, message) == NULL)
    g_error ("expected '%s' in stderr:\n%s", message, err);
}

static void
test_bad_flags (void)
{
  assert_fails (2, "--port: 'http' is not a whole number", "--port", "http",
      "--app-id", "1", "--app-key", "k", "--app-secret", "s", NULL);
  assert_fails (2, "--app-id, --app-key and --app-secret go together",
      "--port", "0", "--app-id", "1", NULL);
  assert_fails (2, "--tls-cert and --tls-key go together", "--port", "0",
      "--app-id", "1", "--app-key", "k", "--app-secret", "s", "--tls-cert",
      "/nonexistent.pem", NULL);
  assert_fails (2, "Unknown option --no-such-flag", "--no-such-flag", NULL);
  assert_fails (2, "--subscription-count goes with --app-id", "--port", "0",
      "--subscription-count", NULL);
  assert_fails (2, "--max-queued-bytes", "--port", "0", "--app-id", "1",
      "--app-key", "k", "--app-secret", "s", "--max-queued-bytes", "10", NULL);
  assert_fails (1, "no app is configured", "--port", "0", NULL);
  assert_fails (1, "cannot listen on 'nowhere': not an IP address", "--bind",
      "nowhere", "--port", "0", "--app-id", "1", "--app-key", "k",
      "--app-secret", "s", NULL);
  assert_fails (1, "TLS certificate", "--port", "0", "--app-id", "1",
      "--app-key", "k", "--app-secret", "s", "--tls-cert", "/nonexistent.pem",
      "--tls-key", "/nonexistent.key", NULL);
}

static void
test_bad_config (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("legba-tools-XXXXXX", &error);
  g_autofree char *typo = NULL;
  g_autofree char *value = NULL;
  g_autofree char *app = NULL;
  g_autofree char *missing = NULL;
  g_autofree char *counting = NULL;
  g_autofree char *expected = NULL;

  g_assert_no_error (error);
  typo = write_file (dir, "typo.conf", "[limits]\nmax-conections = 10\n");
  value = write_file (dir, "value.conf", "[server]\nport = lots\n");
  app = write_file (dir, "app.conf", "[app only]\nid = 1\nkey = k\n");
  missing = g_build_filename (dir, "missing.conf", NULL);
  counting = write_file (dir, "counting.conf", "[app one]\nid = 1\nkey = k\n"
      "secret = s\nsubscription-count = often\n");

  expected = g_strdup_printf ("%s: [limits] max-conections: unknown limit",
      typo);
  assert_fails (1, expected, "--config", typo, NULL);
  g_free (expected);
  expected = g_strdup_printf ("%s: [server] port: 'lots' is not a whole "
      "number", value);
  assert_fails (1, expected, "--config", value, NULL);
  g_free (expected);
  expected = g_strdup_printf ("%s: [app only] secret: missing or empty", app);
  assert_fails (1, expected, "--config", app, NULL);
  assert_fails (1, missing, "--config", missing, NULL);
  g_free (expected);
  expected = g_strdup_printf ("%s: [app one] subscription-count: not a "
      "boolean (true or false)", counting);
  assert_fails (1, expected, "--config", counting, NULL);

  g_remove (counting);
  g_remove (typo);
  g_remove (value);
  g_remove (app);
  g_rmdir (dir);
}

static void
test_help (void)
{
  static const char *const flags[] = {
    "--config=FILE", "--bind=ADDR", "--port=N", "--app-id=ID",
    "--app-key=KEY", "--app-secret=SECRET", "--subscription-count",
    "--tls-cert=FILE",
    "--tls-key=FILE", "--metrics-bind=ADDR", "--metrics-port=N",
    "--metrics-token=TOKEN", "--allowed-origins=LIST", "--compression",
    "--max-connections=N", "--max-event-bytes=N",
    "--client-events-per-second=N", "--max-presence-members=N",
    "--max-channels-per-socket=N",
    "--max-user-info-bytes=N", "--max-channel-name-length=N",
    "--max-frame-bytes=N", "--max-queued-bytes=N",
    "--control-frames-per-second=N", "--activity-timeout=N",
    "--pong-timeout=N", "--signin-timeout=N", "--max-request-bytes=N",
    "--cache-ttl=N", "--max-cache-channels=N", "--max-cache-bytes=N",
    "--max-watchlist-users=N", "default: 1800",
    "--turn-url=URL", "--turn-secret=SECRET", "--turn-ttl=S",
    "--janus-url=URL", "--janus-ws-url=URL", "--janus-api-secret=SECRET",
    "--janus-admin-key=KEY", "--topology=mesh|sfu|auto[:N]",
    "--sfu-prefixes=LIST",
    "default: 127.0.0.1", "default: 6001", "default: 10240",
    "default: 164",
  };
  g_autoptr (GSubprocess) process = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *out = NULL;
  guint i;

  process = g_subprocess_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE, &error,
      legba_test_tool_path ("LEGBA_SERVER"), "--help", NULL);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_communicate_utf8 (process, NULL, NULL, &out,
          NULL, &error));
  g_assert_true (g_subprocess_get_successful (process));
  for (i = 0; i < G_N_ELEMENTS (flags); i++) {
    if (strstr (out, flags[i]) == NULL)
      g_error ("--help does not mention %s:\n%s", flags[i], out);
  }
}

static void
test_sigterm (void)
{
  Server *server = server_start ("--port", "0", "--app-id", "1",
      "--app-key", "key", "--app-secret", "secret", NULL);
  g_autoptr (JsonObject) data = NULL;
  Client *client = client_connect (server, "key", &data);

  g_subprocess_send_signal (server->p.process, SIGTERM);
  LEGBA_TEST_WAIT_UNTIL (client->closed, WAIT_S,
      "the client to be closed on SIGTERM");
  g_assert_cmpuint (client->close_code, ==, 4200);
  LEGBA_TEST_WAIT_UNTIL (server->p.exited, WAIT_S, "legba-server to exit");
  g_assert_true (g_subprocess_get_if_exited (server->p.process));
  g_assert_cmpint (g_subprocess_get_exit_status (server->p.process), ==, 0);

  client_free (client);
  legba_test_process_clear (&server->p);
  g_free (server);
}

/* libsoup's debug messages (several for every frame it reads) are
 * dropped unless G_MESSAGES_DEBUG names libsoup, as GLib does. */
static void
test_soup_debug (void)
{
  for (guint named = 0; named < 2; named++) {
    g_autoptr (GSubprocessLauncher) launcher =
        g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE);
    g_autofree char *dir = g_dir_make_tmp ("legba-debug-XXXXXX", NULL);
    g_autofree char *path = NULL;
    g_autofree char *err = NULL;
    g_autoptr (JsonObject) data = NULL;
    const char *argv[] = { legba_test_tool_path ("LEGBA_SERVER"), "--port",
      "0", "--app-id", "1", "--app-key", "key", "--app-secret", "secret",
      NULL
    };
    Server *server = g_new0 (Server, 1);
    Client *client;

    g_assert_nonnull (dir);
    path = g_build_filename (dir, "stderr", NULL);
    g_subprocess_launcher_setenv (launcher, "G_MESSAGES_DEBUG",
        named ? "Legba libsoup" : "Legba", TRUE);
    g_subprocess_launcher_set_stderr_file_path (launcher, path);
    legba_test_process_start_with (&server->p, launcher, argv, NULL, WAIT_S);
    server->port = legba_test_server_port (&server->p);
    /* a frame read: pusher:connection_established answers the upgrade,
     * then the client's subscribe is read */
    client = client_connect (server, "key", &data);
    client_free (client);
    server_stop (server);
    g_assert_true (g_file_get_contents (path, &err, NULL, NULL));
    /* the server's own lines come either way */
    g_assert_nonnull (strstr (err, "Legba-INFO"));
    if (named)
      g_assert_nonnull (strstr (err, "libsoup-DEBUG"));
    else
      g_assert_null (strstr (err, "libsoup-DEBUG"));
    g_unlink (path);
    g_rmdir (dir);
  }
}

static guint
count_descriptors (void)
{
  g_autoptr (GDir) dir = g_dir_open ("/proc/self/fd", 0, NULL);
  guint n = 0;

  g_assert_nonnull (dir);
  while (g_dir_read_name (dir) != NULL)
    n++;
  return n;
}

#define LIMIT_CLIENTS 60

/* legba-server raises its soft descriptor limit to the hard one: started
 * with a soft limit of a few descriptors more than this process uses
 * (some 20 in all), it holds far more WebSockets than that. */
static void
test_descriptor_limit (void)
{
  g_autoptr (GPtrArray) clients =
      g_ptr_array_new_with_free_func ((GDestroyNotify) client_free);
  struct rlimit saved, low;
  Server *server;

  g_assert_cmpint (getrlimit (RLIMIT_NOFILE, &saved), ==, 0);
  low = saved;
  low.rlim_cur = count_descriptors () + 16;
  g_assert_cmpuint (low.rlim_cur + LIMIT_CLIENTS, <, saved.rlim_max);
  g_assert_cmpint (setrlimit (RLIMIT_NOFILE, &low), ==, 0);
  server = server_start ("--port", "0", "--app-id", "1", "--app-key", "key",
      "--app-secret", "secret", NULL);
  g_assert_cmpint (setrlimit (RLIMIT_NOFILE, &saved), ==, 0);

  for (guint i = 0; i < LIMIT_CLIENTS; i++) {
    g_autoptr (JsonObject) data = NULL;

    g_ptr_array_add (clients, client_connect (server, "key", &data));
  }
  g_clear_pointer (&clients, g_ptr_array_unref);
  server_stop (server);
}

/* A supervisor may signal as soon as it reads the line. */
static void
test_sigterm_at_once (void)
{
  server_stop (server_start ("--port", "0", "--app-id", "1", "--app-key",
          "key", "--app-secret", "secret", NULL));
}

static char *
mint_token (const char *secret, const char *room, const char *identity)
{
  g_autofree char *out = NULL;

  g_assert_cmpint (legba_test_run_tool ("LEGBA_TOKEN", &out, NULL,
          "--secret", secret, "--room", room, "--identity", identity,
          "--name", "Alice", NULL), ==, 0);
  return g_strdup (g_strstrip (out));
}

/* legba-token's token, traded at POST /apps/ID/auth for the presence
 * authorization, lets the client join the room. */
static void
test_join_token (void)
{
  Server *server = server_start ("--port", "0", "--app-id", "7",
      "--app-key", "key", "--app-secret", "secret", NULL);
  g_autofree char *token = mint_token ("secret", "standup", "alice");
  g_autofree char *forged = mint_token ("not-the-secret", "standup", "alice");
  g_autoptr (JsonObject) data = NULL;
  Client *client = client_connect (server, "key", &data);
  const char *socket_id = json_object_get_string_member (data, "socket_id");
  const char *channel = "presence-legba.standup";
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/apps/7/auth",
      server->port);
  g_autofree char *form = soup_form_encode ("socket_id", socket_id,
      "channel_name", channel, "suffix", "k3x9q2", NULL);
  g_autoptr (SoupMessage) bad = soup_message_new ("POST", url);
  g_autoptr (SoupMessage) good = soup_message_new ("POST", url);
  g_autoptr (GBytes) body = g_bytes_new (form, strlen (form));
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autofree char *bearer = g_strconcat ("Bearer ", forged, NULL);
  g_autofree char *answer = NULL;
  g_autofree char *frame = NULL;
  g_autoptr (JsonObject) members = NULL;
  JsonObject *auth;

  soup_message_headers_replace (soup_message_get_request_headers (bad),
      "Authorization", bearer);
  soup_message_set_request_body_from_bytes (bad,
      "application/x-www-form-urlencoded", body);
  g_assert_cmpuint (http_send (bad, NULL), ==, 401);

  g_free (bearer);
  bearer = g_strconcat ("Bearer ", token, NULL);
  soup_message_headers_replace (soup_message_get_request_headers (good),
      "Authorization", bearer);
  soup_message_set_request_body_from_bytes (good,
      "application/x-www-form-urlencoded", body);
  g_assert_cmpuint (http_send (good, &answer), ==, 200);
  g_assert_true (json_parser_load_from_data (parser, answer, -1, NULL));
  auth = json_node_get_object (json_parser_get_root (parser));

  /* Pusher protocol 7: channel_data goes as the string the signer
   * signed. */
  {
    g_autoptr (JsonBuilder) builder = json_builder_new ();
    g_autoptr (JsonNode) root = NULL;

    json_builder_begin_object (builder);
    json_builder_set_member_name (builder, "event");
    json_builder_add_string_value (builder, "pusher:subscribe");
    json_builder_set_member_name (builder, "data");
    json_builder_begin_object (builder);
    json_builder_set_member_name (builder, "channel");
    json_builder_add_string_value (builder, channel);
    json_builder_set_member_name (builder, "auth");
    json_builder_add_string_value (builder,
        json_object_get_string_member (auth, "auth"));
    json_builder_set_member_name (builder, "channel_data");
    json_builder_add_string_value (builder,
        json_object_get_string_member (auth, "channel_data"));
    json_builder_end_object (builder);
    json_builder_end_object (builder);
    root = json_builder_get_root (builder);
    frame = json_to_string (root, FALSE);
  }
  soup_websocket_connection_send_text (client->ws, frame);
  members = frame_data (client_wait (client,
          "pusher_internal:subscription_succeeded"));
  g_assert_cmpint (json_object_get_int_member (json_object_get_object_member
          (members, "presence"), "count"), ==, 1);
  g_assert_true (json_object_has_member (json_object_get_object_member
          (json_object_get_object_member (members, "presence"), "hash"),
          "alice-k3x9q2"));

  client_free (client);
  server_stop (server);
}

/* ---- TURN credentials ---- */

/* POST /apps/1/auth with a join token (secret "secret") for alice in
 * room r; the answer. */
static JsonObject *
room_auth (Server * server)
{
  g_autofree char *token = mint_token ("secret", "r", "alice");
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/apps/1/auth",
      server->port);
  g_autoptr (SoupMessage) msg = soup_message_new ("POST", url);
  const char *form = "socket_id=1.2&channel_name=presence-legba.r"
      "&suffix=k3x9q2";
  g_autoptr (GBytes) body = g_bytes_new_static (form, strlen (form));
  g_autofree char *bearer = g_strconcat ("Bearer ", token, NULL);
  g_autofree char *answer = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();

  soup_message_headers_replace (soup_message_get_request_headers (msg),
      "Authorization", bearer);
  soup_message_set_request_body_from_bytes (msg,
      "application/x-www-form-urlencoded", body);
  g_assert_cmpuint (http_send (msg, &answer), ==, 200);
  g_assert_true (json_parser_load_from_data (parser, answer, -1, NULL));
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

/* The answer holds credentials for alice-k3x9q2 on urls, valid for ttl
 * seconds from about now, made with secret (TURN REST: base64 (HMAC-SHA1
 * (secret, "EXPIRY:USER")), computed here with GLib's HMAC). */
static void
assert_turn_credentials (JsonObject * answer, const char *const *urls,
    const char *secret, guint ttl)
{
  JsonArray *servers = json_object_get_array_member (answer, "ice_servers");
  JsonObject *server = json_array_get_object_element (servers, 0);
  JsonArray *list = json_object_get_array_member (server, "urls");
  const char *username = json_object_get_string_member (server, "username");
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;
  gint64 expiry = g_ascii_strtoll (username, NULL, 10);
  g_autoptr (GHmac) hmac = g_hmac_new (G_CHECKSUM_SHA1,
      (const guchar *) secret, strlen (secret));
  guint8 digest[20];
  gsize len = sizeof digest;
  g_autofree char *credential = NULL;

  g_assert_cmpuint (json_array_get_length (servers), ==, 1);
  g_assert_cmpuint (json_array_get_length (list), ==,
      g_strv_length ((char **) urls));
  for (guint i = 0; urls[i] != NULL; i++)
    g_assert_cmpstr (json_array_get_string_element (list, i), ==, urls[i]);
  g_assert_cmpstr (strchr (username, ':'), ==, ":alice-k3x9q2");
  /* the server's clock read a moment ago */
  g_assert_cmpint (expiry, <=, now + ttl);
  g_assert_cmpint (expiry, >=, now + ttl - WAIT_S);
  g_hmac_update (hmac, (const guchar *) username, -1);
  g_hmac_get_digest (hmac, digest, &len);
  credential = g_base64_encode (digest, len);
  g_assert_cmpstr (json_object_get_string_member (server, "credential"), ==,
      credential);
}

static void
test_turn_flags (void)
{
  static const char *const urls[] = { "turn:127.0.0.1:3478",
    "turns:turn.example?transport=tcp", NULL
  };
  Server *server = server_start ("--port", "0", "--app-id", "1",
      "--app-key", "key", "--app-secret", "secret", "--turn-url", urls[0],
      "--turn-url", urls[1], "--turn-secret", "turn-secret", "--turn-ttl",
      "120", NULL);
  g_autoptr (JsonObject) answer = room_auth (server);

  assert_turn_credentials (answer, urls, "turn-secret", 120);
  server_stop (server);
}

static void
test_turn_config (void)
{
  static const char *const urls[] = { "turn:127.0.0.1:3478",
    "turn:[::1]:3478", NULL
  };
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("legba-tools-XXXXXX", &error);
  g_autofree char *config = NULL;
  g_autoptr (JsonObject) answer = NULL;
  Server *server;

  g_assert_no_error (error);
  config = write_file (dir, "legba.conf",
      "[turn]\nurls = turn:127.0.0.1:3478, turn:[::1]:3478\n"
      "secret = from-the-file\nttl = 300\n\n"
      "[app main]\nid = 1\nkey = key\nsecret = secret\n");
  server = server_start ("--config", config, "--port", "0", NULL);
  answer = room_auth (server);
  assert_turn_credentials (answer, urls, "from-the-file", 300);
  server_stop (server);

  /* The flags override the file */
  server = server_start ("--config", config, "--port", "0", "--turn-ttl",
      "600", NULL);
  g_clear_pointer (&answer, json_object_unref);
  answer = room_auth (server);
  assert_turn_credentials (answer, urls, "from-the-file", 600);
  server_stop (server);
  g_remove (config);
  g_rmdir (dir);
}

static void
test_turn_errors (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("legba-tools-XXXXXX", &error);
  g_autofree char *alone = NULL;
  g_autofree char *bad_url = NULL;
  g_autofree char *expected = NULL;

  g_assert_no_error (error);
  assert_fails (2, "--turn-url: 'stun:127.0.0.1' is not a turn: or turns: "
      "URL", "--port", "0", "--app-id", "1", "--app-key", "k",
      "--app-secret", "s", "--turn-url", "stun:127.0.0.1", "--turn-secret",
      "t", NULL);
  assert_fails (2, "--turn-url and --turn-secret go together", "--port", "0",
      "--app-id", "1", "--app-key", "k", "--app-secret", "s", "--turn-url",
      "turn:127.0.0.1", NULL);
  assert_fails (2, "--turn-url and --turn-secret go together", "--port", "0",
      "--app-id", "1", "--app-key", "k", "--app-secret", "s",
      "--turn-secret", "t", NULL);
  assert_fails (2, "--turn-ttl: '10' is not a whole number from 60",
      "--port", "0", "--app-id", "1", "--app-key", "k", "--app-secret", "s",
      "--turn-url", "turn:127.0.0.1", "--turn-secret", "t", "--turn-ttl",
      "10", NULL);

  alone = write_file (dir, "alone.conf", "[turn]\nurls = turn:127.0.0.1\n");
  bad_url = write_file (dir, "url.conf",
      "[turn]\nurls = turn://127.0.0.1:3478\nsecret = t\n");
  expected = g_strdup_printf ("%s: [turn] secret: urls and secret go "
      "together", alone);
  assert_fails (1, expected, "--config", alone, NULL);
  g_free (expected);
  expected = g_strdup_printf ("%s: [turn] urls: 'turn://127.0.0.1:3478'",
      bad_url);
  assert_fails (1, expected, "--config", bad_url, NULL);
  g_remove (alone);
  g_remove (bad_url);
  g_rmdir (dir);
}

/* SFU rooms (docs/server.md): malformed Janus URLs, topologies and
 * prefixes, and SFU rooms without a Janus, stop the server at start with a
 * message naming them. */
static void
test_sfu_errors (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("legba-tools-XXXXXX", &error);
  g_autofree char *uneven = NULL;
  g_autofree char *topology = NULL;
  g_autofree char *prefix = NULL;
  g_autofree char *key = NULL;
  g_autofree char *expected = NULL;

  g_assert_no_error (error);
  assert_fails (2, "--janus-url: \"ftp://127.0.0.1\" is not an http:// or "
      "https:// URL", "--port", "0", "--app-id", "1", "--app-key", "k",
      "--app-secret", "s", "--janus-url", "ftp://127.0.0.1", "--janus-ws-url",
      "ws://127.0.0.1:8188/", NULL);
  assert_fails (2, "--janus-ws-url: \"http://127.0.0.1:8188/\" is not a "
      "ws:// or wss:// URL", "--port", "0", "--app-id", "1", "--app-key",
      "k", "--app-secret", "s", "--janus-url", "http://127.0.0.1:8088/janus",
      "--janus-ws-url", "http://127.0.0.1:8188/", NULL);
  assert_fails (2, "--janus-url and --janus-ws-url (or [sfu] janus-url and "
      "janus-ws-url) name the same Janus instances", "--port", "0",
      "--app-id", "1", "--app-key", "k", "--app-secret", "s", "--janus-url",
      "http://127.0.0.1:8088/janus", NULL);
  assert_fails (2, "--topology: \"star\" is not a topology (mesh, sfu, auto "
      "or auto:N with N from 1 to 1000)",
      "--port", "0", "--app-id", "1", "--app-key", "k", "--app-secret", "s",
      "--topology", "star", NULL);
  assert_fails (2, "SFU rooms need a Janus", "--port", "0", "--app-id", "1",
      "--app-key", "k", "--app-secret", "s", "--sfu-prefixes", "class-", NULL);
  assert_fails (2, "SFU rooms need a Janus", "--port", "0", "--app-id", "1",
      "--app-key", "k", "--app-secret", "s", "--topology", "auto:3", NULL);
  assert_fails (2, "--sfu-prefixes: \"cl ass\" is not a room-name prefix",
      "--port", "0", "--app-id", "1", "--app-key", "k", "--app-secret", "s",
      "--sfu-prefixes", "cl ass", NULL);

  uneven = write_file (dir, "uneven.conf", "[sfu]\njanus-url = "
      "http://a:8088/janus; http://b:8088/janus\njanus-ws-url = ws://a/\n");
  topology = write_file (dir, "topology.conf", "[app one]\nid = 1\n"
      "key = k\nsecret = s\ntopology = auto:0\n");
  prefix = write_file (dir, "prefix.conf", "[sfu]\nsfu-prefixes = ok-, "
      "not/ok\n");
  key = write_file (dir, "key.conf", "[sfu]\njanus = http://a/janus\n");
  expected = g_strdup_printf ("%s: [sfu] janus-ws-url: janus-url and "
      "janus-ws-url name the same Janus instances", uneven);
  assert_fails (1, expected, "--config", uneven, NULL);
  g_free (expected);
  expected = g_strdup_printf ("%s: [app one] topology: \"auto:0\" is not a "
      "topology (mesh, sfu, auto or auto:N with N from 1 to 1000)", topology);
  assert_fails (1, expected, "--config", topology, NULL);
  g_free (expected);
  expected = g_strdup_printf ("%s: [sfu] sfu-prefixes: \"not/ok\" is not a "
      "room-name prefix", prefix);
  assert_fails (1, expected, "--config", prefix, NULL);
  g_free (expected);
  expected = g_strdup_printf ("%s: [sfu] janus: unknown key", key);
  assert_fails (1, expected, "--config", key, NULL);
  g_remove (uneven);
  g_remove (topology);
  g_remove (prefix);
  g_remove (key);
  g_rmdir (dir);
}

/* Webhooks (docs/server.md): a bad URL or event name stops the server at
 * start, naming the app, the webhook and what is wrong. */
static void
test_webhook_errors (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("legba-tools-XXXXXX", &error);
  g_autofree char *event = NULL;
  g_autofree char *empty = NULL;
  g_autofree char *key = NULL;
  g_autofree char *value = NULL;
  g_autofree char *expected = NULL;

  g_assert_no_error (error);
  assert_fails (1, "app 1: webhook 'ftp://127.0.0.1/ client_event': the URL "
      "is not http:// or https://", "--port", "0", "--app-id", "1",
      "--app-key", "k", "--app-secret", "s", "--webhook",
      "ftp://127.0.0.1/ client_event", NULL);
  assert_fails (1, "unknown event 'member_add'", "--port", "0", "--app-id",
      "1", "--app-key", "k", "--app-secret", "s", "--webhook",
      "http://127.0.0.1/hook member_add", NULL);
  assert_fails (1, "no event given after the URL", "--port", "0", "--app-id",
      "1", "--app-key", "k", "--app-secret", "s", "--webhook",
      "http://127.0.0.1/hook", NULL);

  event = write_file (dir, "event.conf", "[app a]\nid = 1\nkey = k\n"
      "secret = s\nwebhooks = http://127.0.0.1/a client_event; "
      "http://127.0.0.1/b channel_occupied,bogus\n");
  empty = write_file (dir, "empty.conf", "[app a]\nid = 1\nkey = k\n"
      "secret = s\nwebhooks = ;\n");
  key = write_file (dir, "key.conf", "[webhooks]\nbatch = 10\n");
  value = write_file (dir, "value.conf", "[webhooks]\ntimeout = 0\n");
  expected = g_strdup_printf ("%s: [app a] webhooks: webhook "
      "'http://127.0.0.1/b channel_occupied,bogus': unknown event 'bogus'",
      event);
  assert_fails (1, expected, "--config", event, NULL);
  g_free (expected);
  expected = g_strdup_printf ("%s: [app a] webhooks: no webhook given", empty);
  assert_fails (1, expected, "--config", empty, NULL);
  g_free (expected);
  expected = g_strdup_printf ("%s: [webhooks] batch: unknown key", key);
  assert_fails (1, expected, "--config", key, NULL);
  g_free (expected);
  expected = g_strdup_printf ("%s: [webhooks] timeout: '0' is not a whole "
      "number from 1 to 300", value);
  assert_fails (1, expected, "--config", value, NULL);
  g_remove (event);
  g_remove (empty);
  g_remove (key);
  g_remove (value);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/tools/server/listen-line", test_listen_line);
  g_test_add_func ("/tools/server/config-two-apps", test_config_two_apps);
  g_test_add_func ("/tools/server/bad-flags", test_bad_flags);
  g_test_add_func ("/tools/server/bad-config", test_bad_config);
  g_test_add_func ("/tools/server/help", test_help);
  g_test_add_func ("/tools/server/sigterm", test_sigterm);
  g_test_add_func ("/tools/server/sigterm-at-once", test_sigterm_at_once);
  g_test_add_func ("/tools/server/soup-debug", test_soup_debug);
  g_test_add_func ("/tools/server/descriptor-limit", test_descriptor_limit);
  g_test_add_func ("/tools/token/join", test_join_token);
  g_test_add_func ("/tools/server/turn-flags", test_turn_flags);
  g_test_add_func ("/tools/server/turn-config", test_turn_config);
  g_test_add_func ("/tools/server/turn-errors", test_turn_errors);
  g_test_add_func ("/tools/server/sfu-errors", test_sfu_errors);
  g_test_add_func ("/tools/server/webhook-errors", test_webhook_errors);

  return g_test_run ();
}
