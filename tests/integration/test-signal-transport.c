/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * How LegbaSignalClient keeps a room joined: reconnection after a server
 * restart, pings and pongs, the Pusher close code classes and the connect
 * timeout (against a minimal Pusher server of the test's own), and wss://
 * with a private CA.
 */
#include "signal-test.h"
#include "legba-test.h"

#include <glib/gstdio.h>
#include <string.h>

/* ---- Reconnection ---- */

/* legba_server_shutdown() closes with 4200; the clients come back to a
 * new server on the same port with their participant ids. */
static void
test_reconnect (Fixture * f, gconstpointer data)
{
  Peer *a = peer_new (f, "alice");
  Peer *b = peer_new (f, "bob");
  guint port = f->port;

  peer_join_and_wait (a);
  peer_join_and_wait (b);
  WAIT_FOR (peer_knows (a, b), "alice to see bob");

  stop_server (f);
  WAIT_FOR (legba_signaller_get_state (a->signaller) ==
      LEGBA_SIGNALLER_STATE_RECONNECTING &&
      legba_signaller_get_state (b->signaller) ==
      LEGBA_SIGNALLER_STATE_RECONNECTING, "both clients to reconnect");

  start_server (f, port, 0);
  WAIT_FOR (a->joined == 2 && b->joined == 2, "both clients to join again");
  WAIT_FOR (peer_knows (a, b) && peer_knows (b, a),
      "each to list the other again, with the same id");
  g_assert_cmpint (legba_signaller_get_state (a->signaller), ==,
      LEGBA_SIGNALLER_STATE_CONNECTED);
  g_assert_true (went_through (a, LEGBA_SIGNALLER_STATE_RECONNECTING));
  peer_send (b, a, "bye", "after", NULL, 0);
  WAIT_FOR (a->received->len == 1, "a signal after the reconnection");

  /* refused connections while the port was closed are reported, not
   * fatal */
  g_assert_true (only_connect_errors (a));
  g_assert_true (only_connect_errors (b));
  peer_free (a);
  peer_free (b);
}

/* ---- Pings, against a minimal Pusher server of the test's own ---- */

typedef struct
{
  SoupServer *server;
  char *url;
  gboolean answer_pings;
  gboolean silent_first;        /* no connection_established at first */
  guint close_code;             /* close the first socket once subscribed */
  guint error_code;             /* ... after a pusher:error, with 1000 */
  guint connections;
  guint pings;
  gint64 closed_at;
  gint64 reconnected_at;
  GPtrArray *sockets;
} FakeServer;

static void
fake_send (SoupWebsocketConnection * ws, const char *frame)
{
  if (soup_websocket_connection_get_state (ws) == SOUP_WEBSOCKET_STATE_OPEN)
    soup_websocket_connection_send_text (ws, frame);
}

static void
on_fake_message (SoupWebsocketConnection * ws, int type, GBytes * message,
    FakeServer * fake)
{
  g_autoptr (JsonNode) root = json_from_string (g_bytes_get_data (message,
          NULL), NULL);
  const char *event = json_object_get_string_member (json_node_get_object
      (root), "event");

  if (g_str_equal (event, "pusher:ping")) {
    fake->pings++;
    if (fake->answer_pings)
      fake_send (ws, "{\"event\":\"pusher:pong\",\"data\":\"{}\"}");
  } else if (g_str_equal (event, "pusher:subscribe")) {
    /* data as a string, as Pusher sends it */
    fake_send (ws, "{\"event\":\"pusher_internal:subscription_succeeded\","
        "\"channel\":\"" CHANNEL "\",\"data\":\"{\\\"presence\\\":{"
        "\\\"ids\\\":[\\\"x-abcdef\\\"],\\\"hash\\\":{\\\"x-abcdef\\\":"
        "{\\\"identity\\\":\\\"x\\\"}},\\\"count\\\":1}}\"}");
    if (fake->connections == 1 && fake->error_code) {
      g_autofree char *error = g_strdup_printf ("{\"event\":\"pusher:error\","
          "\"data\":{\"code\":%u,\"message\":\"Go away\"}}",
          fake->error_code);

      fake_send (ws, error);
      soup_websocket_connection_close (ws, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
      fake->closed_at = g_get_monotonic_time ();
    } else if (fake->connections == 1 && fake->close_code) {
      soup_websocket_connection_close (ws, fake->close_code, "Bye");
      fake->closed_at = g_get_monotonic_time ();
    }
  }
}

static void
on_fake_websocket (SoupServer * server, SoupServerMessage * msg,
    const char *path, SoupWebsocketConnection * ws, gpointer user_data)
{
  FakeServer *fake = user_data;

  fake->connections++;
  if (fake->connections == 2)
    fake->reconnected_at = g_get_monotonic_time ();
  g_ptr_array_add (fake->sockets, g_object_ref (ws));
  g_signal_connect (ws, "message", G_CALLBACK (on_fake_message), fake);
  if (fake->silent_first && fake->connections == 1)
    return;
  fake_send (ws, "{\"event\":\"pusher:connection_established\",\"data\":"
      "\"{\\\"socket_id\\\":\\\"1.1\\\",\\\"activity_timeout\\\":120}\"}");
}

static FakeServer *
fake_server_new (void)
{
  FakeServer *fake = g_new0 (FakeServer, 1);
  guint port;

  fake->sockets = g_ptr_array_new_with_free_func (g_object_unref);
  fake->server = test_server_new (&port);
  soup_server_add_websocket_handler (fake->server, "/app", NULL, NULL,
      on_fake_websocket, fake, NULL);
  fake->url = g_strdup_printf ("ws://127.0.0.1:%u", port);
  return fake;
}

static void
fake_server_free (FakeServer * fake)
{
  guint i;

  for (i = 0; i < fake->sockets->len; i++)
    g_signal_handlers_disconnect_by_data (fake->sockets->pdata[i], fake);
  g_ptr_array_unref (fake->sockets);
  soup_server_disconnect (fake->server);
  g_object_unref (fake->server);
  g_free (fake->url);
  g_free (fake);
}

static Peer *
peer_new_for_fake (Fixture * f, FakeServer * fake)
{
  Peer *p = peer_new (f, "alice");

  g_object_set (p->client, "server-url", fake->url, "activity-timeout", 50,
      "pong-timeout", 100, NULL);
  return p;
}

/* Pusher protocol 7: after activity_timeout of silence the client pings;
 * a pong keeps the connection. The server's data arrives as strings. */
static void
test_ping (Fixture * f, gconstpointer data)
{
  FakeServer *fake = fake_server_new ();
  Peer *p = peer_new_for_fake (f, fake);

  fake->answer_pings = TRUE;
  peer_join_and_wait (p);
  g_assert_true (g_hash_table_contains (p->members, "x-abcdef"));
  WAIT_FOR (fake->pings >= 3, "three pings");
  g_assert_cmpuint (fake->connections, ==, 1);
  g_assert_cmpint (legba_signaller_get_state (p->signaller), ==,
      LEGBA_SIGNALLER_STATE_CONNECTED);
  assert_no_errors (p);
  peer_free (p);
  fake_server_free (fake);
}

/* No pong within pong-timeout: the connection is replaced. */
static void
test_pong_timeout (Fixture * f, gconstpointer data)
{
  FakeServer *fake = fake_server_new ();
  Peer *p = peer_new_for_fake (f, fake);

  peer_join_and_wait (p);
  WAIT_FOR (fake->connections >= 2 && p->joined >= 2,
      "a new connection after the missing pong");
  g_assert_cmpuint (fake->pings, >=, 1);
  g_assert_true (went_through (p, LEGBA_SIGNALLER_STATE_RECONNECTING));
  g_assert_cmpuint (p->errors->len, >=, 1);
  g_assert_true (only_connect_errors (p));
  peer_free (p);
  fake_server_free (fake);
}

/* Pusher protocol 7, 4200–4299: reconnect at once, whatever the backoff
 * (here a minute); not an error. */
static void
test_close_reconnect_now (Fixture * f, gconstpointer data)
{
  FakeServer *fake = fake_server_new ();
  Peer *p = peer_new_for_fake (f, fake);

  fake->answer_pings = TRUE;
  fake->close_code = 4200;
  g_object_set (p->client, "reconnect-delay-min", 60000,
      "reconnect-delay-max", 60000, NULL);
  peer_join_and_wait (p);
  WAIT_FOR (p->joined == 2, "the client to join again at once");
  g_assert_cmpuint (fake->connections, ==, 2);
  g_assert_true (went_through (p, LEGBA_SIGNALLER_STATE_RECONNECTING));
  assert_no_errors (p);
  peer_free (p);
  fake_server_free (fake);
}

/* 4100–4199: back off first (at least half the first step, for jitter). */
static void
test_close_back_off (Fixture * f, gconstpointer data)
{
  FakeServer *fake = fake_server_new ();
  Peer *p = peer_new_for_fake (f, fake);

  fake->answer_pings = TRUE;
  fake->close_code = 4100;
  g_object_set (p->client, "reconnect-delay-min", 400,
      "reconnect-delay-max", 400, NULL);
  peer_join_and_wait (p);
  WAIT_FOR (p->joined == 2, "the client to join again");
  g_assert_cmpint (fake->reconnected_at - fake->closed_at, >=,
      200 * G_TIME_SPAN_MILLISECOND);
  g_assert_cmpuint (p->errors->len, ==, 1);
  g_assert_true (only_connect_errors (p));
  peer_free (p);
  fake_server_free (fake);
}

/* A pusher:error in 4000–4099 followed by a close without that code:
 * the pusher:error decides, and it is final. */
static void
test_close_after_error (Fixture * f, gconstpointer data)
{
  FakeServer *fake = fake_server_new ();
  Peer *p = peer_new_for_fake (f, fake);

  fake->answer_pings = TRUE;
  fake->error_code = 4009;
  peer_join (p);
  assert_failed (p, LEGBA_SIGNAL_ERROR_REFUSED);
  g_assert_nonnull (strstr (((GError *) p->errors->pdata[0])->message,
          "4009: Go away"));
  /* no attempt within ten times the longest backoff step */
  run_for (10 * BACKOFF_MAX);
  g_assert_cmpuint (fake->connections, ==, 1);
  peer_free (p);
  fake_server_free (fake);
}

/* A server that never says connection_established: the attempt times out
 * and another one is made. The later attempts are answered, but on a
 * loaded machine one may still outlast the timeout: each timed-out attempt
 * is one connect error, and the last attempt joins. */
static void
test_connect_timeout (Fixture * f, gconstpointer data)
{
  FakeServer *fake = fake_server_new ();
  Peer *p = peer_new_for_fake (f, fake);

  fake->answer_pings = TRUE;
  fake->silent_first = TRUE;
  g_object_set (p->client, "connect-timeout", 1000, NULL);
  peer_join (p);
  WAIT_FOR (p->joined == 1, "a later attempt to join");
  g_assert_cmpuint (fake->connections, >=, 2);
  g_assert_cmpuint (p->errors->len, ==, fake->connections - 1);
  g_assert_true (only_connect_errors (p));
  peer_free (p);
  fake_server_free (fake);
}

/* ---- wss:// with a private CA ---- */

/* A join token over https and the room over wss, trusting the server's
 * certificate through ca-file; without it the certificate is refused and
 * the client keeps trying (not fatal). */
static void
test_wss (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("legba-signal-XXXXXX", &error);
  g_autofree char *cert = NULL;
  g_autofree char *key = NULL;
  g_autofree char *token = NULL;
  Fixture f = { NULL, };
  Peer *a, *b;

  g_assert_no_error (error);
  if (!legba_test_make_certificate (dir, &cert, &key)) {
    g_test_skip ("openssl is not installed");
    g_rmdir (dir);
    return;
  }
  f.server = legba_server_new ();
  g_assert_true (legba_server_add_app (f.server, APP_ID, APP_KEY, APP_SECRET,
          &error));
  g_assert_true (legba_server_set_tls_files (f.server, cert, key, &error));
  g_assert_true (legba_server_listen (f.server, "127.0.0.1", 0, &error));
  g_assert_no_error (error);
  f.url = legba_server_get_url (f.server);
  g_assert_true (g_str_has_prefix (f.url, "https://"));

  a = peer_new_with_key (&f, "alice", APP_KEY);
  token = legba_join_token_new (APP_SECRET, ROOM, "alice", "Alice", 60, &error);
  g_assert_no_error (error);
  g_object_set (a->client, "token", token, "app-id", APP_ID, "ca-file", cert,
      NULL);
  peer_join_and_wait (a);
  assert_no_errors (a);

  b = peer_new (&f, "bob");
  peer_join (b);
  WAIT_FOR (b->errors->len >= 1, "bob's refused certificate");
  g_assert_error ((GError *) b->errors->pdata[0], LEGBA_SIGNAL_ERROR,
      LEGBA_SIGNAL_ERROR_CONNECT);
  g_assert_cmpint (legba_signaller_get_state (b->signaller), ==,
      LEGBA_SIGNALLER_STATE_CONNECTING);
  legba_signaller_leave (b->signaller);

  peer_free (a);
  peer_free (b);
  fixture_teardown (&f, NULL);
  g_remove (cert);
  g_remove (key);
  g_rmdir (dir);
}

/* ---- main ---- */

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);

  ADD ("reconnect", test_reconnect, 0);
  ADD ("ping", test_ping, 0);
  ADD ("pong-timeout", test_pong_timeout, 0);
  ADD ("close/4200", test_close_reconnect_now, 0);
  ADD ("close/4100", test_close_back_off, 0);
  ADD ("close/error-4009", test_close_after_error, 0);
  ADD ("connect-timeout", test_connect_timeout, 0);
  g_test_add_func ("/signal-client/wss", test_wss);

  status = g_test_run ();
  stop_pool_threads ();
  return status;
}
