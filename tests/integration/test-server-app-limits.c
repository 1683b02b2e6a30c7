/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Limits per app: an app's own values from the configuration file, over
 * the server's, read again as SIGHUP does; and the HTTP API's rate per
 * app, where one app's flood gets 429 with Retry-After and another's
 * requests all go through. LegbaServer in-process on 127.0.0.1 port 0,
 * with libsoup's WebSocket and HTTP clients; every wait runs this
 * thread's main context until a condition holds, with a timeout.
 */
#include <legba/server/server.h>

#include <legba/common/legba-auth.h>
#include <legba/server/legba-server-private.h>
#include "legba-test.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <string.h>

#define WAIT_S 10
#define WAIT_UNTIL LEGBA_TEST_WAIT_UNTIL

static void
server_free (LegbaServer * server)
{
  legba_server_shutdown (server);
  WAIT_UNTIL (legba_server_get_connection_count (server) == 0, WAIT_S,
      "every socket to close on shutdown");
  g_object_unref (server);
  while (g_main_context_iteration (NULL, FALSE));
}

static const LegbaLimits *
app_limits (LegbaServer * server, const char *id)
{
  LegbaHubApp *app = legba_hub_find_app_by_id (legba_server_get_hub (server),
      id);

  g_assert_nonnull (app);
  return legba_hub_app_get_limits (app);
}

static guint64
metric (LegbaServer * server, const char *series)
{
  g_autofree char *text = legba_server_render_metrics (server);
  g_autofree char *needle = g_strconcat ("\n", series, " ", NULL);
  const char *line = strstr (text, needle);

  return line ? g_ascii_strtoull (line + strlen (needle), NULL, 10) : 0;
}

/* ---- WebSocket clients ---- */

typedef struct
{
  SoupWebsocketConnection *ws;
  gboolean done;
  GError *error;
  GPtrArray *texts;             /* char *, every frame received */
  gboolean closed;
  gushort close_code;
} WsClient;

static void
ws_on_message (SoupWebsocketConnection * ws, gint type, GBytes * message,
    gpointer user_data)
{
  gsize len;
  const char *text = g_bytes_get_data (message, &len);

  g_ptr_array_add (((WsClient *) user_data)->texts, g_strndup (text, len));
}

static void
ws_on_closed (SoupWebsocketConnection * ws, gpointer user_data)
{
  WsClient *client = user_data;

  client->closed = TRUE;
  client->close_code = soup_websocket_connection_get_close_code (ws);
}

static void
ws_on_connected (GObject * source, GAsyncResult * result, gpointer user_data)
{
  WsClient *client = user_data;

  client->ws = soup_session_websocket_connect_finish (SOUP_SESSION (source),
      result, &client->error);
  client->done = TRUE;
  if (client->ws == NULL)
    return;
  g_signal_connect (client->ws, "message", G_CALLBACK (ws_on_message), client);
  g_signal_connect (client->ws, "closed", G_CALLBACK (ws_on_closed), client);
}

/* How many frames hold needle. */
static guint
ws_client_count (WsClient * client, const char *needle)
{
  guint n = 0;

  for (guint i = 0; i < client->texts->len; i++)
    n += strstr (client->texts->pdata[i], needle) != NULL;
  return n;
}

static WsClient *
ws_client_new (LegbaServer * server, const char *key)
{
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autofree char *url = g_strdup_printf ("ws://127.0.0.1:%u/app/%s"
      "?protocol=7", legba_server_get_port (server), key);
  g_autoptr (SoupMessage) msg = soup_message_new ("GET", url);
  WsClient *client = g_new0 (WsClient, 1);

  client->texts = g_ptr_array_new_with_free_func (g_free);
  soup_session_websocket_connect_async (session, msg, NULL, NULL,
      G_PRIORITY_DEFAULT, NULL, ws_on_connected, client);
  WAIT_UNTIL (client->done, WAIT_S, "the WebSocket handshake");
  g_assert_no_error (client->error);
  WAIT_UNTIL (client->texts->len > 0 || client->closed, WAIT_S,
      "the server's first frame");
  return client;
}

static void
ws_client_free (WsClient * client)
{
  if (soup_websocket_connection_get_state (client->ws) ==
      SOUP_WEBSOCKET_STATE_OPEN)
    soup_websocket_connection_close (client->ws, SOUP_WEBSOCKET_CLOSE_NORMAL,
        NULL);
  WAIT_UNTIL (client->closed, WAIT_S, "the client socket to close");
  g_signal_handlers_disconnect_by_data (client->ws, client);
  g_object_unref (client->ws);
  g_ptr_array_unref (client->texts);
  g_free (client);
}

/* ---- Configuration ---- */

/* "APP_ID CHANGE" of every config-reload-app line logged. */
static GPtrArray *reload_log;

static GLogWriterOutput
log_writer (GLogLevelFlags level, const GLogField * fields, gsize n_fields,
    gpointer user_data)
{
  const char *event = NULL, *app_id = NULL, *change = NULL;

  for (gsize i = 0; i < n_fields; i++) {
    if (g_str_equal (fields[i].key, "LEGBA_EVENT"))
      event = fields[i].value;
    else if (g_str_equal (fields[i].key, "APP_ID"))
      app_id = fields[i].value;
    else if (g_str_equal (fields[i].key, "CHANGE"))
      change = fields[i].value;
  }
  if (reload_log != NULL && g_strcmp0 (event, "config-reload-app") == 0)
    g_ptr_array_add (reload_log, g_strdup_printf ("%s %s", app_id, change));
  return g_log_writer_default (level, fields, n_fields, user_data);
}

static char *
write_config (const char *dir, const char *text)
{
  char *path = g_build_filename (dir, "legba.conf", NULL);
  g_autoptr (GError) error = NULL;

  g_assert_true (g_file_set_contents (path, text, -1, &error));
  return path;
}

#define APPS \
  "[app a]\nid = a\nkey = key-a\nsecret = secret-a\n" \
  "[app b]\nid = b\nkey = key-b\nsecret = secret-b\n"

/* An app's own values over the server's, from the file; read again, as
 * SIGHUP does, without dropping a socket of an app that stays. */
static void
test_config (void)
{
  g_autofree char *dir = g_dir_make_tmp ("legba-app-limits-XXXXXX", NULL);
  g_autofree char *path = write_config (dir,
      "[limits]\nclient-events-per-second = 20\n"
      APPS "client-events-per-second = 3\nmax-connections = 1\n"
      "api-requests-per-second = 7\nmax-frame-bytes = 4096\n");
  g_autoptr (GError) error = NULL;
  LegbaServer *server = legba_server_new ();
  WsClient *b1, *b2, *b3;

  g_assert_true (legba_server_load_config (server, path, &error));
  g_assert_no_error (error);
  g_assert_true (legba_server_listen (server, "127.0.0.1", 0, &error));
  g_assert_cmpuint (app_limits (server, "a")->client_events_per_second, ==, 20);
  g_assert_cmpuint (app_limits (server, "a")->max_connections, ==, 0);
  g_assert_cmpuint (app_limits (server, "b")->client_events_per_second, ==, 3);
  g_assert_cmpuint (app_limits (server, "b")->max_connections, ==, 1);
  g_assert_cmpuint (app_limits (server, "b")->api_requests_per_second, ==, 7);
  g_assert_cmpuint (app_limits (server, "b")->max_frame_bytes, ==, 4096);
  g_assert_cmpuint (app_limits (server, "a")->api_requests_per_second, ==,
      1000);

  /* b's one connection; a second is refused with 4004, a's are not */
  b1 = ws_client_new (server, "key-b");
  g_assert_nonnull (strstr (b1->texts->pdata[0], "connection_established"));
  g_assert_nonnull (strstr (b1->texts->pdata[0],
          "client_events_per_second\\\":3"));
  b2 = ws_client_new (server, "key-b");
  WAIT_UNTIL (b2->closed, WAIT_S, "the second socket of b to be closed");
  g_assert_cmpuint (b2->close_code, ==, 4004);
  ws_client_free (b2);

  /* Read again: b's own max-connections goes, its others stay; the
   * server's client-events-per-second changes under a's */
  g_free (path);
  path = write_config (dir, "[limits]\nclient-events-per-second = 30\n"
      APPS "client-events-per-second = 4\n");
  reload_log = g_ptr_array_new_with_free_func (g_free);
  g_assert_true (legba_server_reload_config (server, path, NULL, &error));
  g_assert_no_error (error);
  /* b's own limits changed, a's did not (the server's did) */
  g_assert_cmpuint (reload_log->len, ==, 1);
  g_assert_cmpstr (reload_log->pdata[0], ==, "b limits");
  g_clear_pointer (&reload_log, g_ptr_array_unref);
  g_assert_cmpuint (app_limits (server, "a")->client_events_per_second, ==, 30);
  g_assert_cmpuint (app_limits (server, "b")->client_events_per_second, ==, 4);
  g_assert_cmpuint (app_limits (server, "b")->max_connections, ==, 0);
  g_assert_cmpuint (app_limits (server, "b")->api_requests_per_second, ==,
      1000);
  b3 = ws_client_new (server, "key-b");
  g_assert_nonnull (strstr (b3->texts->pdata[0], "connection_established"));
  g_assert_false (b1->closed);
  g_assert_cmpuint (legba_server_get_connection_count (server), ==, 2);

  ws_client_free (b1);
  ws_client_free (b3);
  server_free (server);
  g_unlink (path);
  g_rmdir (dir);
}

static void
assert_config_error (const char *text, const char *message)
{
  g_autofree char *dir = g_dir_make_tmp ("legba-app-limits-XXXXXX", NULL);
  g_autofree char *path = write_config (dir, text);
  g_autoptr (GError) error = NULL;
  g_autoptr (LegbaServer) server = legba_server_new ();

  g_assert_false (legba_server_load_config (server, path, &error));
  g_assert_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG);
  if (strstr (error->message, message) == NULL)
    g_error ("'%s' does not say '%s'", error->message, message);
  g_unlink (path);
  g_rmdir (dir);
}

static void
test_config_errors (void)
{
  g_autoptr (LegbaServer) server = legba_server_new ();
  g_autoptr (GError) error = NULL;

  assert_config_error (APPS "max-request-bytes = 5000\n",
      "[app b] max-request-bytes: applies to connections before their app "
      "is known: set it in [limits]");
  assert_config_error (APPS "max-frame-bytes = 12\n",
      "[app b] max-frame-bytes: '12' is not a whole number from 128 to");
  assert_config_error (APPS "max-conections = 5\n",
      "[app b] max-conections: unknown key");
  assert_config_error (APPS "max-connections = many\n",
      "[app b] max-connections: 'many' is not a whole number");

  /* The same through the API */
  g_assert_true (legba_server_add_app (server, "a", "key-a", "secret-a",
          &error));
  g_assert_false (legba_server_set_app_limit (server, "nope",
          "max-connections", 1, &error));
  g_assert_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG);
  g_clear_error (&error);
  g_assert_false (legba_server_set_app_limit (server, "a",
          "handshake-timeout", 1, &error));
  g_assert_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG);
  g_clear_error (&error);
  g_assert_false (legba_server_set_app_limit (server, "a", "bogus", 1, &error));
  g_assert_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG);
}

/* ---- The HTTP API's rate ---- */

typedef struct
{
  guint sent;
  guint answered;
  guint ok;
  guint limited;
  gboolean retry_after_ok;      /* every 429 had a Retry-After of 1 s+ */
} Tally;

typedef struct
{
  Tally *tally;
  SoupMessage *msg;
} Request;

static void
on_answer (GObject * source, GAsyncResult * result, gpointer user_data)
{
  Request *req = user_data;
  g_autoptr (GBytes) body = soup_session_send_and_read_finish (SOUP_SESSION
      (source), result, NULL);
  guint status = soup_message_get_status (req->msg);

  req->tally->answered++;
  if (status == 200) {
    req->tally->ok++;
  } else if (status == 429) {
    const char *retry = soup_message_headers_get_one
        (soup_message_get_response_headers (req->msg), "Retry-After");

    req->tally->limited++;
    if (retry == NULL || g_ascii_strtoull (retry, NULL, 10) < 1)
      req->tally->retry_after_ok = FALSE;
  } else {
    g_error ("HTTP API answered %u", status);
  }
  g_object_unref (req->msg);
  g_free (req);
}

/* A signed POST /apps/ID/events of event to channel (Pusher HTTP API,
 * auth_version 1.0), sent without waiting. */
static void
publish (SoupSession * session, LegbaServer * server, const char *id,
    const char *key, const char *secret, const char *channel,
    const char *event, Tally * tally)
{
  g_autofree char *path = g_strdup_printf ("/apps/%s/events", id);
  g_autofree char *body = g_strdup_printf ("{\"name\":\"%s\",\"channels\":"
      "[\"%s\"],\"data\":\"{}\"}", event, channel);
  g_autofree char *md5 = g_compute_checksum_for_string (G_CHECKSUM_MD5, body,
      -1);
  g_autofree char *timestamp = g_strdup_printf ("%" G_GINT64_FORMAT,
      g_get_real_time () / G_USEC_PER_SEC);
  g_autoptr (GHashTable) params = g_hash_table_new (g_str_hash, g_str_equal);
  g_autofree char *to_sign = NULL;
  g_autofree char *signature = NULL;
  g_autofree char *url = NULL;
  g_autoptr (GBytes) bytes = g_bytes_new (body, strlen (body));
  Request *req = g_new0 (Request, 1);

  g_hash_table_insert (params, "auth_key", (gpointer) key);
  g_hash_table_insert (params, "auth_timestamp", timestamp);
  g_hash_table_insert (params, "auth_version", "1.0");
  g_hash_table_insert (params, "body_md5", md5);
  to_sign = legba_auth_http_string_to_sign ("POST", path, params);
  signature = legba_auth_hmac_hex (secret, to_sign, -1);
  url = g_strdup_printf ("http://127.0.0.1:%u%s?auth_key=%s&auth_timestamp=%s"
      "&auth_version=1.0&body_md5=%s&auth_signature=%s",
      legba_server_get_port (server), path, key, timestamp, md5, signature);

  req->tally = tally;
  req->msg = soup_message_new ("POST", url);
  soup_message_set_request_body_from_bytes (req->msg, "application/json",
      bytes);
  tally->sent++;
  soup_session_send_and_read_async (session, req->msg, G_PRIORITY_DEFAULT,
      NULL, on_answer, req);
}

#define FLOOD 300
#define B_EVENTS 30
#define A_RATE 20

/* App a floods the HTTP API over its api-requests-per-second while app b
 * publishes: a gets 429 with Retry-After (counted in /metrics), b never,
 * and b's subscriber gets every one of b's events. */
static void
test_api_flood (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (SoupSession) a_session = soup_session_new_with_options
      ("max-conns", 64, "max-conns-per-host", 64, NULL);
  g_autoptr (SoupSession) b_session = soup_session_new ();
  LegbaServer *server = legba_server_new ();
  Tally a = { 0, }, b = { 0, };
  WsClient *listener;
  gint64 start;

  a.retry_after_ok = b.retry_after_ok = TRUE;
  g_assert_true (legba_server_add_app (server, "a", "key-a", "secret-a",
          &error));
  g_assert_true (legba_server_add_app (server, "b", "key-b", "secret-b",
          &error));
  g_assert_true (legba_server_set_app_limit (server, "a",
          "api-requests-per-second", A_RATE, &error));
  g_assert_true (legba_server_listen (server, "127.0.0.1", 0, &error));
  g_assert_no_error (error);

  listener = ws_client_new (server, "key-b");
  soup_websocket_connection_send_text (listener->ws,
      "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"news\"}}");
  WAIT_UNTIL (ws_client_count (listener, "subscription_succeeded") == 1,
      WAIT_S, "the subscription");

  /* a's flood all at once, b's events one after the other meanwhile */
  start = g_get_monotonic_time ();
  for (guint i = 0; i < FLOOD; i++)
    publish (a_session, server, "a", "key-a", "secret-a", "flood", "spam", &a);
  for (guint i = 0; i < B_EVENTS; i++) {
    publish (b_session, server, "b", "key-b", "secret-b", "news", "story", &b);
    WAIT_UNTIL (b.answered == b.sent, WAIT_S, "b's request to be answered");
  }
  WAIT_UNTIL (a.answered == FLOOD, WAIT_S * 3, "a's flood to be answered");

  g_test_message ("a: %u served, %u refused in %.2f s; b: %u served",
      a.ok, a.limited, (g_get_monotonic_time () - start) / 1e6, b.ok);
  g_assert_cmpuint (b.ok, ==, B_EVENTS);
  g_assert_cmpuint (b.limited, ==, 0);
  WAIT_UNTIL (ws_client_count (listener, "\"story\"") == B_EVENTS, WAIT_S,
      "every event of b at its subscriber");

  /* a: its burst and what came back meanwhile went through, the rest got
   * 429 with a Retry-After */
  g_assert_cmpuint (a.limited, >, 0);
  g_assert_cmpuint (a.ok, >=, A_RATE);
  g_assert_cmpuint (a.ok, <=, A_RATE + A_RATE *
      ((g_get_monotonic_time () - start) / G_USEC_PER_SEC + 1));
  g_assert_true (a.retry_after_ok);
  g_assert_cmpuint (metric (server, "legba_api_rate_limited_total{app=\"a\"}"),
      ==, a.limited);
  g_assert_cmpuint (metric (server, "legba_api_rate_limited_total{app=\"b\"}"),
      ==, 0);
  g_assert_cmpuint (metric (server, "legba_http_requests_total{route="
          "\"/apps/:id/events\",status=\"429\"}"), ==, a.limited);

  /* Tokens come back: a is served again */
  a.answered = a.sent = a.ok = 0;
  while (a.ok == 0) {
    publish (a_session, server, "a", "key-a", "secret-a", "flood", "spam", &a);
    WAIT_UNTIL (a.answered == a.sent, WAIT_S, "a's request to be answered");
    if (a.ok == 0)
      legba_test_iterate_for (50);
    g_assert_cmpuint (a.sent, <, 100);
  }

  ws_client_free (listener);
  server_free (server);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_log_set_writer_func (log_writer, NULL, NULL);

  g_test_add_func ("/server/app-limits/config", test_config);
  g_test_add_func ("/server/app-limits/config-errors", test_config_errors);
  g_test_add_func ("/server/app-limits/api-flood", test_api_flood);
  return g_test_run ();
}
