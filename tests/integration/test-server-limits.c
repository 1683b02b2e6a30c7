/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaServer in-process on 127.0.0.1 port 0 against clients that abuse
 * its listener and its HTTP side, over raw TCP sockets: descriptors run
 * out, headers sent a byte at a time, idle connections past the bounds,
 * request bodies declared too large or with a length that is no number,
 * paths that are not UTF-8, requests pipelined behind a malformed one.
 * The server and the clients share this thread's main context, so every
 * wait runs it until a condition holds, with a timeout and a reason.
 */
#include <legba/server/server.h>

#include <legba/server/legba-server-private.h>
#include "legba-test.h"

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <string.h>
#include <sys/resource.h>

#define APP_ID "1"
#define APP_KEY "app-key"
#define APP_SECRET "app-secret"
#define WAIT_S 10

#define WAIT_UNTIL LEGBA_TEST_WAIT_UNTIL

/* ---- The server ---- */

static LegbaServer *
server_new (const char *first_property, ...)
{
  g_autoptr (GError) error = NULL;
  LegbaServer *server = legba_server_new ();
  va_list ap;

  va_start (ap, first_property);
  g_object_set_valist (G_OBJECT (server), first_property, ap);
  va_end (ap);
  g_assert_true (legba_server_add_app (server, APP_ID, APP_KEY, APP_SECRET,
          &error));
  g_assert_true (legba_server_listen (server, "127.0.0.1", 0, &error));
  g_assert_no_error (error);
  return server;
}

static void
server_free (LegbaServer * server)
{
  legba_server_shutdown (server);
  WAIT_UNTIL (legba_server_get_connection_count (server) == 0, WAIT_S,
      "every socket to close on shutdown");
  g_object_unref (server);
  while (g_main_context_iteration (NULL, FALSE));
}

/* The value of one line of /metrics, "name" or "name{labels}". */
static guint64
metric (LegbaServer * server, const char *series)
{
  g_autofree char *text = legba_server_render_metrics (server);
  g_autofree char *needle = g_strconcat ("\n", series, " ", NULL);
  const char *line = strstr (text, needle);

  if (line == NULL)
    g_error ("no metric %s in:\n%s", series, text);
  return g_ascii_strtoull (line + strlen (needle), NULL, 10);
}

#define PENDING "legba_pending_connections"
#define REFUSED_DESCRIPTORS \
  "legba_connections_refused_total{reason=\"descriptors\"}"
#define REFUSED_PER_ADDRESS \
  "legba_connections_refused_total{reason=\"max-pending-per-address\"}"
#define PAUSED_PENDING \
  "legba_accept_paused_total{reason=\"max-pending-connections\"}"
#define TIMEOUTS "legba_handshake_timeouts_total"

/* ---- Raw TCP clients ---- */

typedef struct
{
  GSocket *socket;
  GSource *source;
  GByteArray *in;
  gboolean eof;                 /* the server closed (or reset) */
  GSource *drip;                /* sending its request a byte at a time */
  gsize dripped;
} Peer;

static gboolean
peer_on_readable (GSocket * socket, GIOCondition condition, gpointer user_data)
{
  Peer *peer = user_data;
  char buffer[16384];

  for (;;) {
    g_autoptr (GError) error = NULL;
    gssize n = g_socket_receive_with_blocking (socket, buffer, sizeof buffer,
        FALSE, NULL, &error);

    if (n > 0) {
      g_byte_array_append (peer->in, (guint8 *) buffer, n);
      continue;
    }
    if (n < 0 && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
      return G_SOURCE_CONTINUE;
    peer->eof = TRUE;
    g_clear_pointer (&peer->source, g_source_unref);
    return G_SOURCE_REMOVE;
  }
}

static void
peer_watch (Peer * peer)
{
  g_socket_set_blocking (peer->socket, FALSE);
  peer->source = g_socket_create_source (peer->socket, G_IO_IN | G_IO_HUP |
      G_IO_ERR, NULL);
  g_source_set_callback (peer->source, (GSourceFunc) G_CALLBACK
      (peer_on_readable), peer, NULL);
  g_source_attach (peer->source, NULL);
}

/* A socket not connected yet (it holds a descriptor already). */
static Peer *
peer_new (void)
{
  g_autoptr (GError) error = NULL;
  Peer *peer = g_new0 (Peer, 1);

  peer->in = g_byte_array_new ();
  peer->socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM,
      G_SOCKET_PROTOCOL_TCP, &error);
  g_assert_no_error (error);
  return peer;
}

/* Connects from the loopback address from (127.0.0.1, 127.0.0.2...): the
 * kernel completes the TCP handshake from the listen backlog, whether the
 * server accepts or not. */
static void
peer_connect (Peer * peer, LegbaServer * server, const char *from)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GInetAddress) loopback =
      g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) address =
      g_inet_socket_address_new (loopback, legba_server_get_port (server));

  if (from != NULL) {
    g_autoptr (GSocketAddress) local =
        g_inet_socket_address_new_from_string (from, 0);

    g_assert_true (g_socket_bind (peer->socket, local, FALSE, &error));
    g_assert_no_error (error);
  }
  g_assert_true (g_socket_connect (peer->socket, address, NULL, &error));
  g_assert_no_error (error);
  peer_watch (peer);
}

static Peer *
peer_connect_new (LegbaServer * server, const char *from)
{
  Peer *peer = peer_new ();

  peer_connect (peer, server, from);
  return peer;
}

static void
peer_send (Peer * peer, const void *data, gsize len)
{
  g_autoptr (GError) error = NULL;

  g_assert_cmpint (g_socket_send (peer->socket, data, len, NULL, &error), ==,
      len);
  g_assert_no_error (error);
}

static void
peer_free (Peer * peer)
{
  if (peer->drip != NULL) {
    g_source_destroy (peer->drip);
    g_source_unref (peer->drip);
  }
  if (peer->source != NULL) {
    g_source_destroy (peer->source);
    g_source_unref (peer->source);
  }
  g_socket_close (peer->socket, NULL);
  g_object_unref (peer->socket);
  g_byte_array_unref (peer->in);
  g_free (peer);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Peer, peer_free);

/* The response once the server closed the connection: its status, and
 * its body in *body (if given). Exactly one response came. */
static guint
peer_response (Peer * peer, char **body)
{
  g_autofree char *text = NULL;
  const char *end, *next;
  guint status;

  WAIT_UNTIL (peer->eof, WAIT_S, "the response and the end of the connection");
  text = g_strndup ((const char *) peer->in->data, peer->in->len);
  g_assert_true (g_str_has_prefix (text, "HTTP/1."));
  status = g_ascii_strtoull (text + strlen ("HTTP/1.1 "), NULL, 10);
  end = strstr (text, "\r\n\r\n");
  g_assert_nonnull (end);
  next = strstr (end, "HTTP/1.");
  if (next != NULL)
    g_error ("a second response: %s", text);
  if (body != NULL)
    *body = g_strdup (end + 4);
  return status;
}

/* A JSON error body, whose "error" is returned. */
static char *
assert_json_error (const char *body)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *object;

  g_assert_true (g_utf8_validate (body, -1, NULL));
  object = legba_test_parse_object (parser, body);
  g_assert_nonnull (object);
  g_assert_true (json_object_has_member (object, "error"));
  return g_strdup (json_object_get_string_member (object, "error"));
}

static const char up_request[] = "GET /up HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

/* GET /up on a new connection from from: 200. */
static void
assert_up (LegbaServer * server, const char *from)
{
  g_autoptr (Peer) peer = peer_connect_new (server, from);
  g_autofree char *body = NULL;

  peer_send (peer, up_request, sizeof up_request - 1);
  g_assert_cmpuint (peer_response (peer, &body), ==, 200);
  g_assert_cmpstr (body, ==, "OK\n");
}

/* ---- Descriptors ---- */

static guint
count_descriptors (void)
{
  g_autoptr (GDir) dir = g_dir_open ("/proc/self/fd", 0, NULL);
  guint n = 0;

  g_assert_nonnull (dir);
  while (g_dir_read_name (dir) != NULL)
    n++;
  /* the directory's own */
  return n - 1;
}

#define FREE_DESCRIPTORS 8
#define DESCRIPTOR_PEERS 24

/* With 8 descriptors left in the process, idle connections take them
 * one by one; every connection after that is refused (closed as soon as
 * accepted, not left in the backlog) and counted, and accepting goes on.
 * Once the idle connections are gone, a client is served again. Runs in
 * a child process, whose descriptor limit it lowers. */
static void
test_descriptors (void)
{
  LegbaServer *server;
  g_autoptr (GPtrArray) peers = NULL;
  struct rlimit saved, low;
  guint i, accepted = 0;

  if (!g_test_subprocess ()) {
    g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC,
        G_TEST_SUBPROCESS_INHERIT_STDERR);
    g_test_trap_assert_passed ();
    return;
  }

  server = server_new ("max-pending-per-address", 0,
      "max-pending-connections", 0, "handshake-timeout", 600, NULL);
  /* Each client's socket exists before the limit is lowered: the server
   * alone runs out. */
  peers = g_ptr_array_new_with_free_func ((GDestroyNotify) peer_free);
  for (i = 0; i < DESCRIPTOR_PEERS; i++)
    g_ptr_array_add (peers, peer_new ());
  while (g_main_context_iteration (NULL, FALSE));
  g_assert_cmpint (getrlimit (RLIMIT_NOFILE, &saved), ==, 0);
  low = saved;
  low.rlim_cur = count_descriptors () + FREE_DESCRIPTORS;
  g_assert_cmpint (setrlimit (RLIMIT_NOFILE, &low), ==, 0);

  for (i = 0; i < peers->len && metric (server, REFUSED_DESCRIPTORS) < 2; i++) {
    Peer *peer = peers->pdata[i];
    guint64 refused = metric (server, REFUSED_DESCRIPTORS);

    peer_connect (peer, server, NULL);
    WAIT_UNTIL (metric (server, PENDING) == accepted + 1 ||
        metric (server, REFUSED_DESCRIPTORS) > refused, WAIT_S,
        "the server to accept or refuse the connection");
    if (metric (server, PENDING) == accepted + 1) {
      accepted++;
      continue;
    }
    WAIT_UNTIL (peer->eof, WAIT_S, "the refused connection to be closed");
    g_assert_cmpuint (peer->in->len, ==, 0);
  }
  g_test_message ("%u idle connections accepted, then refusals", accepted);
  g_assert_cmpuint (accepted, >, 0);
  g_assert_cmpuint (accepted, <=, FREE_DESCRIPTORS);
  g_assert_cmpuint (metric (server, REFUSED_DESCRIPTORS), ==, 2);

  /* The idle connections go: descriptors are free again. */
  g_ptr_array_set_size (peers, 0);
  WAIT_UNTIL (metric (server, PENDING) == 0, WAIT_S,
      "the server to let go of the connections closed");
  assert_up (server, NULL);

  g_assert_cmpint (setrlimit (RLIMIT_NOFILE, &saved), ==, 0);
  server_free (server);
}

/* ---- Slow and idle connections ---- */

static const char slow_request[] = "GET /up HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    "X-Slow: ";

static gboolean
peer_drip (gpointer user_data)
{
  Peer *peer = user_data;
  char byte = peer->dripped < sizeof slow_request - 1 ?
      slow_request[peer->dripped] : 'a';

  if (peer->eof || g_socket_send (peer->socket, &byte, 1, NULL, NULL) != 1) {
    g_clear_pointer (&peer->drip, g_source_unref);
    return G_SOURCE_REMOVE;
  }
  peer->dripped++;
  return G_SOURCE_CONTINUE;
}

#define SLOW_PEERS 3

/* Clients that send their headers a byte at a time, never done, are shut
 * down at handshake-timeout and counted; another client is served in the
 * meantime. */
static void
test_slow_headers (void)
{
  LegbaServer *server = server_new ("handshake-timeout", 1, NULL);
  Peer *slow[SLOW_PEERS];
  guint i;

  for (i = 0; i < SLOW_PEERS; i++) {
    slow[i] = peer_connect_new (server, NULL);
    slow[i]->drip = g_timeout_source_new (50);
    g_source_set_callback (slow[i]->drip, peer_drip, slow[i], NULL);
    g_source_attach (slow[i]->drip, NULL);
  }
  WAIT_UNTIL (slow[SLOW_PEERS - 1]->dripped > 5, WAIT_S,
      "the slow clients to start");
  assert_up (server, NULL);
  for (i = 0; i < SLOW_PEERS; i++) {
    WAIT_UNTIL (slow[i]->eof, WAIT_S, "a slow client to be shut down");
    g_assert_cmpuint (slow[i]->in->len, ==, 0);
  }
  g_assert_cmpuint (metric (server, TIMEOUTS), ==, SLOW_PEERS);
  WAIT_UNTIL (metric (server, PENDING) == 0, WAIT_S,
      "the server to let go of the slow connections");
  for (i = 0; i < SLOW_PEERS; i++)
    peer_free (slow[i]);
  server_free (server);
}

/* Past max-pending-per-address, a new connection from that address is
 * closed as soon as accepted (and counted); another address is served,
 * and so is the first once its idle connections are gone. */
static void
test_pending_per_address (void)
{
  LegbaServer *server = server_new ("max-pending-per-address", 2,
      "handshake-timeout", 600, NULL);
  g_autoptr (Peer) a = peer_connect_new (server, "127.0.0.1");
  g_autoptr (Peer) b = peer_connect_new (server, "127.0.0.1");
  g_autoptr (Peer) c = NULL;

  WAIT_UNTIL (metric (server, PENDING) == 2, WAIT_S,
      "two idle connections to be accepted");
  c = peer_connect_new (server, "127.0.0.1");
  WAIT_UNTIL (c->eof, WAIT_S, "the third connection to be refused");
  g_assert_cmpuint (c->in->len, ==, 0);
  g_assert_cmpuint (metric (server, REFUSED_PER_ADDRESS), ==, 1);

  assert_up (server, "127.0.0.2");

  g_clear_pointer (&a, peer_free);
  g_clear_pointer (&b, peer_free);
  WAIT_UNTIL (metric (server, PENDING) == 0, WAIT_S,
      "the idle connections to end");
  assert_up (server, "127.0.0.1");
  g_assert_cmpuint (metric (server, REFUSED_PER_ADDRESS), ==, 1);
  server_free (server);
}

/* At max-pending-connections the server stops accepting (counted): a new
 * client waits in the backlog and is served once a pending connection
 * ends. */
static void
test_pending_per_server (void)
{
  LegbaServer *server = server_new ("max-pending-connections", 2,
      "max-pending-per-address", 0, "handshake-timeout", 600, NULL);
  g_autoptr (Peer) a = peer_connect_new (server, NULL);
  g_autoptr (Peer) b = peer_connect_new (server, NULL);
  g_autoptr (Peer) c = NULL;
  g_autofree char *body = NULL;

  WAIT_UNTIL (metric (server, PENDING) == 2 &&
      metric (server, PAUSED_PENDING) == 1, WAIT_S,
      "two idle connections to be accepted, and accepting to pause");
  c = peer_connect_new (server, NULL);
  peer_send (c, up_request, sizeof up_request - 1);
  while (g_main_context_iteration (NULL, FALSE));
  g_assert_cmpuint (metric (server, PENDING), ==, 2);
  g_assert_cmpuint (c->in->len, ==, 0);
  g_assert_false (c->eof);

  /* c takes a's place: the bound is reached again, until c is done. */
  g_clear_pointer (&a, peer_free);
  g_assert_cmpuint (peer_response (c, &body), ==, 200);
  g_assert_cmpstr (body, ==, "OK\n");
  g_assert_cmpuint (metric (server, PAUSED_PENDING), ==, 2);
  server_free (server);
}

/* ---- Requests refused from their headers ---- */

/* A Content-Length that is no number the server can hold (negative, 2^63,
 * 2^64) is answered 400 from the headers, with no warning (fatal in
 * tests). */
static void
test_invalid_length (void)
{
  static const char *const lengths[] = { "-5", "9223372036854775808",
    "18446744073709551616"
  };
  LegbaServer *server = server_new (NULL);

  for (guint i = 0; i < G_N_ELEMENTS (lengths); i++) {
    g_autoptr (Peer) peer = peer_connect_new (server, NULL);
    g_autofree char *request = g_strdup_printf ("POST /apps/" APP_ID
        "/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %s\r\n\r\n",
        lengths[i]);
    g_autofree char *body = NULL;
    g_autofree char *error = NULL;

    peer_send (peer, request, strlen (request));
    g_assert_cmpuint (peer_response (peer, &body), ==, 400);
    error = assert_json_error (body);
    g_assert_cmpstr (error, ==, "invalid Content-Length");
  }
  WAIT_UNTIL (metric (server, PENDING) == 0, WAIT_S,
      "the refused connections to end");
  server_free (server);
}

/* A body declared over max-request-bytes is answered 413 from the
 * headers, the body never sent; a chunked one as soon as it goes over,
 * before its end. */
static void
test_declared_too_large (void)
{
  LegbaServer *server = server_new ("max-request-bytes", 4096, NULL);
  static const char declared[] = "POST /apps/" APP_ID "/events HTTP/1.1\r\n"
      "Host: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 100000\r\n\r\n";
  static const char chunked[] = "POST /apps/" APP_ID "/events HTTP/1.1\r\n"
      "Host: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n1400\r\n";
  g_autofree char *chunk = g_strnfill (0x1400, 'c');

  {
    g_autoptr (Peer) peer = peer_connect_new (server, NULL);
    g_autofree char *body = NULL;
    g_autofree char *error = NULL;

    peer_send (peer, declared, sizeof declared - 1);
    g_assert_cmpuint (peer_response (peer, &body), ==, 413);
    error = assert_json_error (body);
    g_assert_cmpstr (error, ==, "request body too large");
  }
  {
    g_autoptr (Peer) peer = peer_connect_new (server, NULL);
    g_autofree char *body = NULL;
    g_autofree char *error = NULL;

    peer_send (peer, chunked, sizeof chunked - 1);
    peer_send (peer, chunk, 0x1400);
    g_assert_cmpuint (peer_response (peer, &body), ==, 413);
    error = assert_json_error (body);
  }
  g_assert_cmpuint (metric (server, "legba_http_requests_total"
          "{route=\"/apps/:id/events\",status=\"413\"}"), ==, 2);
  assert_up (server, NULL);
  server_free (server);
}

/* An error that quotes a path that is not UTF-8 (the signature's string
 * to sign) still has a JSON body. */
static void
test_non_utf8_path (void)
{
  LegbaServer *server = server_new (NULL);
  g_autoptr (Peer) peer = peer_connect_new (server, NULL);
  g_autofree char *request = g_strdup_printf ("GET /apps/" APP_ID
      "/channels/\xff\xfe?auth_key=" APP_KEY "&auth_timestamp=%"
      G_GINT64_FORMAT "&auth_version=1.0&auth_signature=00 HTTP/1.1\r\n"
      "Host: 127.0.0.1\r\n\r\n", g_get_real_time () / G_USEC_PER_SEC);
  g_autofree char *body = NULL;
  g_autofree char *error = NULL;

  peer_send (peer, request, strlen (request));
  g_assert_cmpuint (peer_response (peer, &body), ==, 401);
  error = assert_json_error (body);
  g_assert_nonnull (strstr (error, "/channels/\xef\xbf\xbd"));
  server_free (server);
}

/* Pipelining is not supported: a request the server cannot parse is
 * answered 400 and the connection closed, so a request pipelined behind
 * it is never answered (the client sends it again on a new connection,
 * RFC 9112 §9.3.2). */
static void
test_pipelined_after_malformed (void)
{
  static const char *const malformed[] = {
    "GARBAGE\r\n\r\n",
    "GET /up HTTP/1.1\r\nHost: 127.0.0.1/x\r\n\r\n",
  };
  LegbaServer *server = server_new (NULL);

  for (guint i = 0; i < G_N_ELEMENTS (malformed); i++) {
    g_autoptr (Peer) peer = peer_connect_new (server, NULL);
    g_autofree char *wire = g_strconcat (malformed[i], up_request, NULL);
    g_autofree char *head = NULL;

    peer_send (peer, wire, strlen (wire));
    g_assert_cmpuint (peer_response (peer, NULL), ==, 400);
    head = g_strndup ((const char *) peer->in->data, peer->in->len);
    /* An HTTP/1.1 answer says the connection closes. */
    if (g_str_has_prefix (head, "HTTP/1.1 ") && (soup_get_major_version () ==
            3 && soup_get_minor_version () < 3))
      g_assert_nonnull (strstr (head, "\r\nConnection: close\r\n"));
  }
  assert_up (server, NULL);
  server_free (server);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/server/limits/descriptors", test_descriptors);
  g_test_add_func ("/server/limits/slow-headers", test_slow_headers);
  g_test_add_func ("/server/limits/pending-per-address",
      test_pending_per_address);
  g_test_add_func ("/server/limits/pending-per-server",
      test_pending_per_server);
  g_test_add_func ("/server/http/invalid-length", test_invalid_length);
  g_test_add_func ("/server/http/declared-too-large", test_declared_too_large);
  g_test_add_func ("/server/http/non-utf8-path", test_non_utf8_path);
  g_test_add_func ("/server/http/pipelined-after-malformed",
      test_pipelined_after_malformed);

  return g_test_run ();
}
