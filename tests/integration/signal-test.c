/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What the LegbaSignalClient tests share: waiting with deadlines, an
 * in-process LegbaServer, peers that record what their client reported,
 * and small HTTP servers of the tests' own.
 */
#include "signal-test.h"

#include <legba/common/legba-auth.h>

#include <legba-test.h>

/* ---- Waiting: every wait has a deadline and a reason ---- */

static gboolean
on_deadline (gpointer user_data)
{
  *(gboolean *) user_data = TRUE;
  return G_SOURCE_REMOVE;
}

GSource *
deadline_new (guint ms, gboolean * expired)
{
  GSource *source = g_timeout_source_new (ms);

  *expired = FALSE;
  g_source_set_callback (source, on_deadline, expired, NULL);
  g_source_attach (source, NULL);
  return source;
}

void
deadline_free (GSource * source)
{
  g_source_destroy (source);
  g_source_unref (source);
}

/* Runs the main loop for ms: only to show that something does NOT happen
 * within a bound (ten times the longest backoff step). */
void
run_for (guint ms)
{
  gboolean expired;
  GSource *deadline = deadline_new (ms, &expired);

  while (!expired)
    g_main_context_iteration (NULL, TRUE);
  deadline_free (deadline);
}

/* ---- The server ---- */

void
start_server (Fixture * f, guint port, guint max_event_bytes)
{
  f->server = legba_server_new ();
  if (max_event_bytes)
    g_object_set (f->server, "max-event-bytes", max_event_bytes, NULL);
  fixture_listen (f, port);
}

void
fixture_listen (Fixture * f, guint port)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (legba_server_add_app (f->server, APP_ID, APP_KEY,
          APP_SECRET, &error));
  g_assert_no_error (error);
  g_assert_true (legba_server_listen (f->server, "127.0.0.1", port, &error));
  g_assert_no_error (error);
  f->port = legba_server_get_port (f->server);
  g_free (f->url);
  f->url = legba_server_get_url (f->server);
}

void
stop_server (Fixture * f)
{
  legba_server_shutdown (f->server);
  WAIT_FOR (legba_server_get_connection_count (f->server) == 0,
      "the server's sockets to close");
  g_clear_object (&f->server);
}

void
fixture_setup (Fixture * f, gconstpointer data)
{
  /* GLib resets the fatal handler at every test case */
  legba_test_tolerate_rtpsession_race ();
  start_server (f, 0, GPOINTER_TO_UINT (data));
}

void
fixture_teardown (Fixture * f, gconstpointer data)
{
  if (f->server)
    stop_server (f);
  g_free (f->url);
  /* let closed sockets finish releasing themselves */
  while (g_main_context_iteration (NULL, FALSE));
}

/* ---- Peers: a LegbaSignalClient and what it reported ---- */

static void
received_free (Received * r)
{
  g_free (r->from);
  json_object_unref (r->signal);
  g_free (r);
}

static void
on_joined (LegbaSignaller * s, GPtrArray * members, Peer * p)
{
  guint i;

  g_hash_table_remove_all (p->members);
  for (i = 0; i < members->len; i++) {
    LegbaSignalMember *m = members->pdata[i];

    g_assert_cmpstr (legba_signal_member_get_id (m), !=, p->id);
    g_hash_table_insert (p->members, g_strdup (legba_signal_member_get_id
            (m)), legba_signal_member_ref (m));
  }
  p->joined++;
}

static void
on_member_joined (LegbaSignaller * s, LegbaSignalMember * m, Peer * p)
{
  g_hash_table_insert (p->members, g_strdup (legba_signal_member_get_id (m)),
      legba_signal_member_ref (m));
  p->member_joined++;
}

static void
on_member_left (LegbaSignaller * s, LegbaSignalMember * m, Peer * p)
{
  g_assert_true (g_hash_table_remove (p->members,
          legba_signal_member_get_id (m)));
  p->member_left++;
}

static void
on_signal_received (LegbaSignaller * s, const char *from, JsonObject * signal,
    Peer * p)
{
  Received *r = g_new0 (Received, 1);

  g_assert_cmpstr (json_object_get_string_member (signal, "from"), ==, from);
  g_assert_cmpstr (json_object_get_string_member (signal, "to"), ==, p->id);
  r->from = g_strdup (from);
  r->signal = json_object_ref (signal);
  r->time = g_get_monotonic_time ();
  g_ptr_array_add (p->received, r);
}

static void
on_event_received (LegbaSignaller * s, const char *event, JsonNode * data,
    Peer * p)
{
  g_autofree char *text = json_to_string (data, FALSE);

  g_ptr_array_add (p->events, g_strdup_printf ("%s %s", event, text));
}

static void
on_error (LegbaSignaller * s, GError * error, Peer * p)
{
  g_test_message ("%s: error: %s", p->identity, error->message);
  g_ptr_array_add (p->errors, g_error_copy (error));
}

static void
on_state (GObject * object, GParamSpec * pspec, Peer * p)
{
  LegbaSignallerState state = legba_signaller_get_state (p->signaller);

  g_array_append_val (p->states, state);
}

Peer *
peer_new_with_key (Fixture * f, const char *identity, const char *app_key)
{
  Peer *p = g_new0 (Peer, 1);

  p->client = legba_signal_client_new (f->url, app_key);
  p->signaller = LEGBA_SIGNALLER (p->client);
  g_object_set (p->client, "reconnect-delay-min", BACKOFF_MIN,
      "reconnect-delay-max", BACKOFF_MAX, NULL);
  p->identity = g_strdup (identity);
  p->id = legba_signaller_generate_participant_id (identity);
  p->members = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      (GDestroyNotify) legba_signal_member_unref);
  p->received = g_ptr_array_new_with_free_func ((GDestroyNotify)
      received_free);
  p->errors = g_ptr_array_new_with_free_func ((GDestroyNotify) g_error_free);
  p->states = g_array_new (FALSE, FALSE, sizeof (LegbaSignallerState));
  p->events = g_ptr_array_new_with_free_func (g_free);
  g_signal_connect (p->client, "joined", G_CALLBACK (on_joined), p);
  g_signal_connect (p->client, "member-joined", G_CALLBACK (on_member_joined),
      p);
  g_signal_connect (p->client, "member-left", G_CALLBACK (on_member_left), p);
  g_signal_connect (p->client, "signal-received",
      G_CALLBACK (on_signal_received), p);
  g_signal_connect (p->client, "event-received",
      G_CALLBACK (on_event_received), p);
  g_signal_connect (p->client, "error", G_CALLBACK (on_error), p);
  g_signal_connect (p->client, "notify::state", G_CALLBACK (on_state), p);
  return p;
}

/* A peer that signs its subscription with the app secret */
Peer *
peer_new (Fixture * f, const char *identity)
{
  Peer *p = peer_new_with_key (f, identity, APP_KEY);

  g_object_set (p->client, "app-secret", APP_SECRET, NULL);
  return p;
}

void
peer_free (Peer * p)
{
  g_signal_handlers_disconnect_by_data (p->client, p);
  g_object_unref (p->client);
  g_hash_table_unref (p->members);
  g_ptr_array_unref (p->received);
  g_ptr_array_unref (p->errors);
  g_array_unref (p->states);
  g_ptr_array_unref (p->events);
  g_free (p->identity);
  g_free (p->id);
  g_free (p);
}

void
peer_join (Peer * p)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *name = g_strdup_printf ("%s Ünal", p->identity);

  g_assert_true (legba_signaller_join (p->signaller, ROOM, p->id,
          p->identity, name, &error));
  g_assert_no_error (error);
}

void
peer_join_and_wait (Peer * p)
{
  guint joined = p->joined;

  peer_join (p);
  WAIT_FOR (p->joined > joined, "the peer to join the room");
  g_assert_cmpint (legba_signaller_get_state (p->signaller), ==,
      LEGBA_SIGNALLER_STATE_CONNECTED);
}

void
peer_send (Peer * from, Peer * to, const char *type, const char *pc,
    const char *sdp, gint64 seq)
{
  g_autoptr (JsonObject) signal = json_object_new ();
  g_autoptr (GError) error = NULL;

  json_object_set_string_member (signal, "pc", pc);
  json_object_set_string_member (signal, "type", type);
  if (sdp)
    json_object_set_string_member (signal, "sdp", sdp);
  if (g_str_equal (type, "candidates")) {
    json_object_set_array_member (signal, "candidates", json_array_new ());
    json_object_set_int_member (signal, "seq", seq);
  }
  g_assert_true (legba_signaller_send (from->signaller, to->id, signal,
          &error));
  g_assert_no_error (error);
}

Received *
peer_received (Peer * p, guint i)
{
  g_assert_cmpuint (i, <, p->received->len);
  return p->received->pdata[i];
}

gboolean
peer_knows (Peer * p, Peer * other)
{
  return g_hash_table_contains (p->members, other->id);
}

void
assert_no_errors (Peer * p)
{
  guint i;

  for (i = 0; i < p->errors->len; i++)
    g_error ("%s reported: %s", p->identity,
        ((GError *) p->errors->pdata[i])->message);
}

char *
json_quote (const char *s)
{
  g_autoptr (JsonNode) node = json_node_init_string (json_node_alloc (), s);

  return json_to_string (node, FALSE);
}

/* ---- The test's own HTTP servers ---- */

/* libsoup before 3.4 keeps the reference g_socket_accept() returned to its
 * listener for ever (fixed upstream by "soup-listener: Plug a leak"), as
 * LegbaServer works around too: while the first request of a connection
 * starts, the socket is held by the connection alone, plus the listener's
 * leaked reference; drop that one, once per socket. */
static void
on_request_started (SoupServer * server, SoupServerMessage * msg,
    gpointer user_data)
{
  GSocket *socket = soup_server_message_get_socket (msg);

  if (socket == NULL || soup_get_minor_version () >= 4 ||
      g_object_get_data (G_OBJECT (socket), "test-seen") != NULL)
    return;
  g_object_set_data (G_OBJECT (socket), "test-seen", GINT_TO_POINTER (1));
  if (g_atomic_int_get (&G_OBJECT (socket)->ref_count) == 2)
    g_object_unref (socket);
}

/* A SoupServer on 127.0.0.1, an ephemeral port; returns the port. */
SoupServer *
test_server_new (guint * port)
{
  SoupServer *server = soup_server_new (NULL, NULL);
  g_autoptr (GSocketAddress) address =
      g_inet_socket_address_new_from_string ("127.0.0.1", 0);
  g_autoptr (GSocketAddress) local = NULL;
  g_autoptr (GError) error = NULL;
  GSList *listeners;

  g_signal_connect (server, "request-started",
      G_CALLBACK (on_request_started), NULL);
  g_assert_true (soup_server_listen (server, address, 0, &error));
  g_assert_no_error (error);
  /* (soup_server_get_uris() leaks an address in libsoup 3.2) */
  listeners = soup_server_get_listeners (server);
  local = g_socket_get_local_address (listeners->data, &error);
  g_assert_no_error (error);
  g_slist_free (listeners);
  *port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (local));
  return server;
}

/* ---- What peers went through ---- */

void
assert_failed (Peer * p, int code)
{
  WAIT_FOR (legba_signaller_get_state (p->signaller) ==
      LEGBA_SIGNALLER_STATE_FAILED, "the join to fail");
  g_assert_cmpuint (p->errors->len, ==, 1);
  g_assert_error ((GError *) p->errors->pdata[0], LEGBA_SIGNAL_ERROR, code);
}

gboolean
only_connect_errors (Peer * p)
{
  guint i;

  for (i = 0; i < p->errors->len; i++)
    if (!g_error_matches (p->errors->pdata[i], LEGBA_SIGNAL_ERROR,
            LEGBA_SIGNAL_ERROR_CONNECT))
      return FALSE;
  return TRUE;
}

gboolean
went_through (Peer * p, LegbaSignallerState state)
{
  guint i;

  for (i = 0; i < p->states->len; i++)
    if (g_array_index (p->states, int, i) == (int) state)
      return TRUE;
  return FALSE;
}

/* ---- Exit ---- */

static guint
count_pool_threads (void)
{
  g_autoptr (GDir) dir = g_dir_open ("/proc/self/task", 0, NULL);
  const char *tid;
  guint n = 0;

  while (dir != NULL && (tid = g_dir_read_name (dir)) != NULL) {
    g_autofree char *path = g_build_filename ("/proc/self/task", tid, "comm",
        NULL);
    g_autofree char *comm = NULL;

    if (g_file_get_contents (path, &comm, NULL, NULL) &&
        g_str_has_prefix (comm, "pool-"))
      n++;
  }
  return n;
}

/* TLS handshakes run in GTask worker threads, which stay idle for a while;
 * LeakSanitizer (GCC 12) crashes reading their dynamic TLS at exit, so
 * they are ended first. */
void
stop_pool_threads (void)
{
  gint64 deadline = g_get_monotonic_time () + WAIT_MS * 1000;

  g_thread_pool_set_max_unused_threads (0);
  while (count_pool_threads () > 0 && g_get_monotonic_time () < deadline) {
    g_thread_pool_stop_unused_threads ();
    g_usleep (1000);
  }
}

static void
on_published (GObject * source, GAsyncResult * result, gpointer user_data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) answer = soup_session_send_and_read_finish
      (SOUP_SESSION (source), result, &error);

  g_assert_no_error (error);
  *(guint *) user_data = soup_message_get_status
      (soup_session_get_async_result_message (SOUP_SESSION (source), result));
}

/* POST /apps/ID/events as the Pusher HTTP API wants it, signed: event
 * name with data (a string) on the room's channel */
void
fixture_publish_event (Fixture * f, const char *name, const char *data)
{
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autoptr (GHashTable) params = g_hash_table_new_full (g_str_hash,
      g_str_equal, NULL, g_free);
  g_autoptr (SoupMessage) msg = NULL;
  g_autoptr (GBytes) bytes = NULL;
  g_autofree char *quoted = json_quote (data);
  g_autofree char *body = g_strdup_printf ("{\"name\":\"%s\",\"channels\":"
      "[\"" CHANNEL "\"],\"data\":%s}", name, quoted);
  g_autofree char *to_sign = NULL;
  g_autofree char *signature = NULL;
  g_autofree char *url = NULL;
  const char *path = "/apps/" APP_ID "/events";
  guint status = 0;

  g_hash_table_insert (params, "auth_key", g_strdup (APP_KEY));
  g_hash_table_insert (params, "auth_timestamp", g_strdup_printf ("%"
          G_GINT64_FORMAT, g_get_real_time () / G_USEC_PER_SEC));
  g_hash_table_insert (params, "auth_version", g_strdup ("1.0"));
  g_hash_table_insert (params, "body_md5",
      g_compute_checksum_for_string (G_CHECKSUM_MD5, body, -1));
  to_sign = legba_auth_http_string_to_sign ("POST", path, params);
  signature = legba_auth_hmac_hex (APP_SECRET, to_sign, -1);
  url = g_strdup_printf ("%s%s?auth_key=%s&auth_timestamp=%s"
      "&auth_version=1.0&body_md5=%s&auth_signature=%s", f->url, path,
      APP_KEY, (char *) g_hash_table_lookup (params, "auth_timestamp"),
      (char *) g_hash_table_lookup (params, "body_md5"), signature);
  msg = soup_message_new ("POST", url);
  bytes = g_bytes_new_static (body, strlen (body));
  soup_message_set_request_body_from_bytes (msg, "application/json", bytes);
  soup_session_send_and_read_async (session, msg, G_PRIORITY_DEFAULT, NULL,
      on_published, &status);
  WAIT_FOR (status != 0, "the HTTP API's answer");
  g_assert_cmpuint (status, ==, SOUP_STATUS_OK);
}
