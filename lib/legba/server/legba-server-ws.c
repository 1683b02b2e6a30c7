/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaServer's WebSockets: the hub's transport (frames and closes to the
 * sockets, bounded queues), the sockets themselves (their handlers, the
 * bounds on what they send, their end) and the upgrade of a request on
 * /app/KEY to a WebSocket.
 */
#define LEGBA_SERVER_INTERNALS
#include <legba/server/legba-server-private.h>

#include <legba/server/legba-ws-deflate.h>

#include <string.h>

/* How long a socket closed for a message over max-frame-bytes keeps
 * reading (and dropping) what its peer still sends, so that the peer
 * reads the close frame. */
#define OVERSIZE_LINGER_MS 1000

/* How long a socket the server closes has to answer the close frame
 * before it is torn down. Under libsoup's own 5 s, whose expiry (in
 * libsoup 3.2) leaks its timer source. */
#define CLOSE_GRACE_S 4

/* Sockets sharing one group of handler closures. Each connection of a
 * closure adds an invalidation notifier to it, and a GClosure holds at
 * most 255 of them. */
#define WS_HANDLERS_USERS 128

/* ---- Hub transport: frames and closes to sockets ---- */

/* libsoup and GIO attach what a call on a socket needs (a source waiting
 * to write, a close timeout) to the thread-default context: calls on a
 * socket from outside its poll bucket run with the bucket as the
 * thread-default context. */
static void
legba_server_conn_enter (LegbaServerConn * conn)
{
  if (conn->bucket != NULL)
    g_main_context_push_thread_default (legba_poll_bucket_get_context
        (conn->bucket));
}

static void
legba_server_conn_leave (LegbaServerConn * conn, gboolean touched)
{
  if (conn->bucket == NULL)
    return;
  g_main_context_pop_thread_default (legba_poll_bucket_get_context
      (conn->bucket));
  if (touched)
    legba_poll_bucket_touch (conn->bucket);
}

void
legba_server_conn_release (LegbaServerConn * conn)
{
  LegbaHubConn *hub_conn = g_steal_pointer (&conn->hub_conn);

  if (conn->release_source != NULL) {
    g_source_destroy (conn->release_source);
    g_clear_pointer (&conn->release_source, g_source_unref);
  }
  if (hub_conn != NULL)
    legba_hub_conn_closed (conn->server->hub, hub_conn);
}

static gboolean
legba_server_conn_release_cb (gpointer user_data)
{
  legba_server_conn_release (user_data);
  return G_SOURCE_REMOVE;
}

/* The hub is told a connection is gone from the main loop, never from
 * inside one of its own callbacks. */
static void
legba_server_conn_schedule_release (LegbaServerConn * conn)
{
  if (conn->hub_conn == NULL || conn->release_source != NULL)
    return;
  conn->release_source = g_idle_source_new ();
  g_source_set_callback (conn->release_source, legba_server_conn_release_cb,
      conn, NULL);
  g_source_attach (conn->release_source, conn->server->context);
}

static void
legba_server_conn_overflow (LegbaServerConn * conn, gsize queued)
{
  LegbaServer *self = conn->server;
  g_autofree char *queued_s = g_strdup_printf ("%" G_GSIZE_FORMAT, queued);
  g_autofree char *max_s = g_strdup_printf ("%" G_GSIZE_FORMAT,
      conn->max_queued_bytes);

  conn->closing = TRUE;
  legba_metrics_count_queue_overflow (self->metrics);
  legba_server_log (G_LOG_LEVEL_MESSAGE, "ws-queue-overflow",
      "SOCKET_ID", conn->socket_id, "REMOTE", conn->remote,
      "QUEUED_BYTES", queued_s, "MAX_QUEUED_BYTES", max_s, NULL);
  /* The peer does not read: a close frame would never reach it. */
  legba_server_conn_enter (conn);
  legba_ws_stream_abort (conn->stream);
  legba_server_conn_leave (conn, TRUE);
  legba_server_conn_schedule_release (conn);
}

static void
legba_server_transport_send (gpointer handle, GBytes * frame,
    gpointer user_data)
{
  LegbaServerConn *conn = handle;
  gsize size, queued;

  if (conn->closing ||
      soup_websocket_connection_get_state (conn->ws) !=
      SOUP_WEBSOCKET_STATE_OPEN)
    return;

  /* Counted as the uncompressed frame: with permessage-deflate the bound
   * is then on what the messages would take uncompressed. */
  size = legba_ws_frame_size (g_bytes_get_size (frame));
  queued = legba_ws_stream_get_queued (conn->stream);
  if (queued > 0 && queued + size > conn->max_queued_bytes) {
    legba_server_conn_overflow (conn, queued + size);
    return;
  }
  /* Without an extension to apply, a stream over a plain socket writes
   * the frame itself: libsoup would copy the payload into a frame of its
   * own for every socket. */
  if (conn->frames_direct &&
      legba_ws_stream_send_text (conn->stream, frame, conn->bucket != NULL ?
          legba_poll_bucket_get_context (conn->bucket) : NULL)) {
    if (conn->bucket != NULL && legba_ws_stream_get_queued (conn->stream) > 0)
      legba_poll_bucket_touch (conn->bucket);
    return;
  }
  legba_ws_stream_account (conn->stream, size);
  legba_server_conn_enter (conn);
  soup_websocket_connection_send_message (conn->ws, SOUP_WEBSOCKET_DATA_TEXT,
      frame);
  /* Bytes left over: libsoup now waits for the socket to take them. */
  legba_server_conn_leave (conn, legba_ws_stream_get_queued (conn->stream) > 0);
}

static gboolean
legba_server_conn_close_timeout (gpointer user_data)
{
  LegbaServerConn *conn = user_data;

  g_clear_pointer (&conn->close_timer, g_source_unref);
  legba_server_conn_enter (conn);
  legba_ws_stream_abort (conn->stream);
  legba_server_conn_leave (conn, TRUE);
  return G_SOURCE_REMOVE;
}

void
legba_server_transport_close (gpointer handle, guint16 code,
    const char *reason, gpointer user_data)
{
  LegbaServerConn *conn = handle;
  g_autofree char *code_s = NULL;

  if (conn->closing)
    return;
  conn->closing = TRUE;
  conn->close_code = code;
  /* Whatever the peer sends from now on is libsoup's to read. */
  legba_ws_stream_set_text_func (conn->stream, NULL);

  code_s = g_strdup_printf ("%u", code);
  legba_server_log (G_LOG_LEVEL_INFO, "ws-closing",
      "SOCKET_ID", conn->socket_id, "REMOTE", conn->remote,
      "CODE", code_s, "REASON", reason, NULL);
  if (soup_websocket_connection_get_state (conn->ws) ==
      SOUP_WEBSOCKET_STATE_OPEN) {
    legba_server_conn_enter (conn);
    soup_websocket_connection_close (conn->ws, code, reason);
    legba_server_conn_leave (conn, TRUE);
    conn->close_timer = g_timeout_source_new_seconds (CLOSE_GRACE_S);
    g_source_set_callback (conn->close_timer,
        legba_server_conn_close_timeout, conn, NULL);
    g_source_attach (conn->close_timer, conn->server->context);
  }
  legba_server_conn_schedule_release (conn);
}

const LegbaHubTransport legba_server_transport = {
  legba_server_transport_send,
  legba_server_transport_close,
};

/* ---- WebSocket sockets ---- */

/* The order of LegbaWsHandlers.closures. */
static const char *const ws_signals[] = { "message", "error", "closed" };

static void legba_server_conn_message (SoupWebsocketConnection * ws,
    gint type, GBytes * message, gpointer user_data);
static void legba_server_conn_error (SoupWebsocketConnection * ws,
    GError * error, gpointer user_data);
static void legba_server_conn_closed (SoupWebsocketConnection * ws,
    gpointer user_data);

void
legba_ws_handlers_free (gpointer data)
{
  LegbaWsHandlers *handlers = data;

  for (guint i = 0; i < G_N_ELEMENTS (handlers->closures); i++)
    g_closure_unref (handlers->closures[i]);
  g_free (handlers);
}

static LegbaWsHandlers *
legba_ws_handlers_new (void)
{
  const GCallback callbacks[] = {
    G_CALLBACK (legba_server_conn_message),
    G_CALLBACK (legba_server_conn_error),
    G_CALLBACK (legba_server_conn_closed),
  };
  LegbaWsHandlers *handlers = g_new0 (LegbaWsHandlers, 1);

  G_STATIC_ASSERT (G_N_ELEMENTS (callbacks) == G_N_ELEMENTS (ws_signals));
  G_STATIC_ASSERT (G_N_ELEMENTS (handlers->closures) ==
      G_N_ELEMENTS (ws_signals));
  for (guint i = 0; i < G_N_ELEMENTS (callbacks); i++) {
    handlers->closures[i] = g_closure_ref (g_cclosure_new (callbacks[i], NULL,
            NULL));
    g_closure_sink (handlers->closures[i]);
  }
  return handlers;
}

/* Connects conn's handlers through a group of closures with room left,
 * the newest first (it is the one most likely to have some). */
static void
legba_server_connect_ws_handlers (LegbaServer * self, LegbaServerConn * conn)
{
  LegbaWsHandlers *handlers = NULL;
  guint i = self->ws_handlers->len;

  while (i > 0 && handlers == NULL) {
    LegbaWsHandlers *group = g_ptr_array_index (self->ws_handlers, --i);

    if (group->users < WS_HANDLERS_USERS)
      handlers = group;
  }
  if (handlers == NULL) {
    handlers = legba_ws_handlers_new ();
    g_ptr_array_add (self->ws_handlers, handlers);
  }
  handlers->users++;
  conn->handlers = handlers;
  for (i = 0; i < G_N_ELEMENTS (ws_signals); i++)
    g_signal_connect_closure (conn->ws, ws_signals[i], handlers->closures[i],
        FALSE);
}

static void
legba_server_release_ws_handlers (LegbaServer * self, LegbaServerConn * conn)
{
  LegbaWsHandlers *handlers = g_steal_pointer (&conn->handlers);

  for (guint i = 0; i < G_N_ELEMENTS (handlers->closures); i++)
    g_signal_handlers_disconnect_matched (conn->ws, G_SIGNAL_MATCH_CLOSURE, 0,
        0, handlers->closures[i], NULL, NULL);
  if (--handlers->users == 0)
    g_ptr_array_remove_fast (self->ws_handlers, handlers);
}

void
legba_server_conn_free (gpointer data)
{
  LegbaServerConn *conn = data;

  if (conn->release_source != NULL) {
    g_source_destroy (conn->release_source);
    g_source_unref (conn->release_source);
  }
  if (conn->close_timer != NULL) {
    g_source_destroy (conn->close_timer);
    g_source_unref (conn->close_timer);
  }
  legba_server_release_ws_handlers (conn->server, conn);
  legba_ws_stream_set_owner (conn->stream, NULL);
  g_object_unref (conn->ws);
  g_object_unref (conn->stream);
  if (conn->bucket != NULL)
    legba_poll_group_leave (conn->server->poll_group, conn->bucket);
  g_free (conn->remote);
  g_free (conn->socket_id);
  g_free (conn);
}

/* The socket a SoupWebsocketConnection handler is called for. */
static LegbaServerConn *
legba_server_conn_of (SoupWebsocketConnection * ws)
{
  return legba_ws_stream_get_owner ((LegbaWsStream *)
      soup_websocket_connection_get_io_stream (ws));
}

static void
legba_server_conn_message (SoupWebsocketConnection * ws, gint type,
    GBytes * message, gpointer user_data)
{
  LegbaServerConn *conn = legba_server_conn_of (ws);
  gsize len;
  const char *data;

  if (conn->closing || conn->hub_conn == NULL)
    return;

  if (type == SOUP_WEBSOCKET_DATA_TEXT) {
    data = g_bytes_get_data (message, &len);
    legba_hub_receive (conn->server->hub, conn->hub_conn, data ? data : "",
        len);
  } else {
    legba_hub_receive_binary (conn->server->hub, conn->hub_conn);
  }
}

/* A whole text frame the socket's stream took itself: handled as the
 * message it is, without libsoup's reading. */
static gboolean
legba_server_conn_text (gpointer owner, const char *text, gsize len)
{
  LegbaServerConn *conn = owner;

  if (conn->closing || conn->hub_conn == NULL)
    return FALSE;
  legba_hub_receive (conn->server->hub, conn->hub_conn, text, len);
  return !conn->closing && conn->hub_conn != NULL;
}

/* permessage-deflate: the socket's compressed messages stop inflating
 * at max_bytes. */
static void
legba_server_conn_bound_inflation (LegbaServerConn * conn, gsize max_bytes)
{
  GList *l;

  for (l = soup_websocket_connection_get_extensions (conn->ws); l; l = l->next)
    if (LEGBA_IS_WS_DEFLATE (l->data))
      legba_ws_deflate_set_max_message (l->data, max_bytes);
}

static gboolean
legba_server_conn_inflated_too_much (LegbaServerConn * conn)
{
  GList *l;

  for (l = soup_websocket_connection_get_extensions (conn->ws); l; l = l->next)
    if (LEGBA_IS_WS_DEFLATE (l->data) &&
        legba_ws_deflate_is_over_limit (l->data))
      return TRUE;
  return FALSE;
}

/* A bound was broken: the socket is closed with code. libsoup drops the
 * connection without a close frame when a read fails (the bounds of the
 * socket's stream), so one is written (inject); it writes its own when
 * an extension fails (a message inflated over the bound). Either way it
 * then lingers, so that the peer reads the close frame. */
static void
legba_server_conn_refuse (LegbaServerConn * conn, guint16 code,
    const char *reason, gboolean inject)
{
  if (!conn->closing) {
    conn->closing = TRUE;
    conn->close_code = code;
    legba_metrics_count_close (conn->server->metrics, code);
    if (code == SOUP_WEBSOCKET_CLOSE_POLICY_VIOLATION)
      legba_metrics_count_control_flood (conn->server->metrics);
    if (!inject)
      legba_metrics_count_inflate_limit (conn->server->metrics);
  }
  legba_ws_stream_set_text_func (conn->stream, NULL);
  if (inject)
    legba_ws_stream_inject_close (conn->stream, code, reason);
  legba_ws_stream_set_linger (conn->stream, OVERSIZE_LINGER_MS);
  legba_server_conn_schedule_release (conn);
}

static void
legba_server_conn_error (SoupWebsocketConnection * ws, GError * error,
    gpointer user_data)
{
  LegbaServerConn *conn = legba_server_conn_of (ws);

  /* RFC 6455 §7.4.1: 1009, a message too big to process; 1008, a policy
   * violation (control frames over the rate). */
  if (g_error_matches (error, SOUP_WEBSOCKET_ERROR,
          SOUP_WEBSOCKET_CLOSE_TOO_BIG) &&
      legba_server_conn_inflated_too_much (conn))
    legba_server_conn_refuse (conn, SOUP_WEBSOCKET_CLOSE_TOO_BIG, NULL, FALSE);
  else if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE) ||
      g_error_matches (error, SOUP_WEBSOCKET_ERROR,
          SOUP_WEBSOCKET_CLOSE_TOO_BIG))
    legba_server_conn_refuse (conn, SOUP_WEBSOCKET_CLOSE_TOO_BIG,
        "message too big", TRUE);
  else if (g_error_matches (error, LEGBA_WS_STREAM_ERROR,
          LEGBA_WS_STREAM_ERROR_CONTROL_FLOOD))
    legba_server_conn_refuse (conn, SOUP_WEBSOCKET_CLOSE_POLICY_VIOLATION,
        "too many control frames", TRUE);

  legba_server_log (G_LOG_LEVEL_INFO, "ws-error",
      "SOCKET_ID", conn->socket_id, "REMOTE", conn->remote,
      "ERROR", error->message, NULL);
}

static void
legba_server_conn_closed (SoupWebsocketConnection * ws, gpointer user_data)
{
  LegbaServerConn *conn = legba_server_conn_of (ws);
  LegbaServer *self = conn->server;
  g_autofree char *code_s = NULL;
  guint code = conn->close_code;

  if (code == 0)
    code = soup_websocket_connection_get_close_code (ws);
  code_s = g_strdup_printf ("%u", code);
  legba_server_log (G_LOG_LEVEL_INFO, "ws-closed",
      "SOCKET_ID", conn->socket_id, "REMOTE", conn->remote,
      "CODE", code_s, "BY", conn->close_code ? "server" : "client",
      "ABORTED", legba_ws_stream_is_aborted (conn->stream) ? "yes" : "no",
      NULL);

  conn->closing = TRUE;
  legba_server_conn_release (conn);
  self->written_closed += legba_ws_stream_get_written (conn->stream);
  g_hash_table_remove (self->conns, conn);
  legba_server_notify_connection_count (self);
}

typedef struct
{
  LegbaServer *server;
  GList *extensions;
  GSocket *socket;
  char *app_key;
  char *protocol;
  char *origin;
  char *remote;
} LegbaUpgrade;

static void
legba_upgrade_free (gpointer data, GClosure * closure)
{
  LegbaUpgrade *upgrade = data;

  g_object_unref (upgrade->server);
  g_list_free_full (upgrade->extensions, g_object_unref);
  g_clear_object (&upgrade->socket);
  g_free (upgrade->app_key);
  g_free (upgrade->protocol);
  g_free (upgrade->origin);
  g_free (upgrade->remote);
  g_free (upgrade);
}

/* The URI a socket's SoupWebsocketConnection is made with: the address of
 * the WebSocket, the request's URI without its query. A socket that came
 * through the same address as the socket before it shares that one's. */
static GUri *
legba_server_ws_uri (LegbaServer * self, GUri * request)
{
  GUri *uri = self->ws_uri;

  if (uri == NULL ||
      g_strcmp0 (g_uri_get_scheme (uri), g_uri_get_scheme (request)) != 0 ||
      g_strcmp0 (g_uri_get_host (uri), g_uri_get_host (request)) != 0 ||
      g_uri_get_port (uri) != g_uri_get_port (request) ||
      g_strcmp0 (g_uri_get_path (uri), g_uri_get_path (request)) != 0) {
    g_clear_pointer (&self->ws_uri, g_uri_unref);
    self->ws_uri = g_uri_build (g_uri_get_flags (request),
        g_uri_get_scheme (request), NULL, g_uri_get_host (request),
        g_uri_get_port (request), g_uri_get_path (request), NULL, NULL);
  }
  return self->ws_uri;
}

static LegbaServerConn *
legba_server_conn_new (LegbaServer * self, LegbaUpgrade * upgrade,
    GIOStream * base, GUri * uri)
{
  LegbaServerConn *conn = g_new0 (LegbaServerConn, 1);
  /* Its app's bounds, or the server's when no app has that key (the
   * socket is then refused at once) */
  const LegbaLimits *limits = legba_server_limits_for_key (self,
      upgrade->app_key);
  GMainContext *context = NULL;

  conn->server = self;
  conn->max_queued_bytes = limits->max_queued_bytes;
  conn->remote = g_strdup (upgrade->remote);
  conn->stream = legba_ws_stream_new (base, upgrade->socket,
      self->certificate == NULL);
  legba_ws_stream_set_max_message (conn->stream, limits->max_frame_bytes);
  legba_ws_stream_set_max_control_rate (conn->stream,
      limits->control_frames_per_second);
  /* The connection's reading, writing and timeouts go to a poll bucket
   * (libsoup keeps the thread-default context it is made in), so that no
   * wakeup walks every socket of the server. Its callbacks still run on
   * this thread, one at a time. */
  conn->bucket = legba_poll_group_join (self->poll_group,
      legba_ws_stream_get_fd (conn->stream));
  if (conn->bucket != NULL) {
    context = legba_poll_bucket_get_context (conn->bucket);
    g_main_context_push_thread_default (context);
  }
  conn->ws = soup_websocket_connection_new (G_IO_STREAM (conn->stream), uri,
      SOUP_WEBSOCKET_CONNECTION_SERVER, upgrade->origin, NULL,
      g_steal_pointer (&upgrade->extensions));
  if (context != NULL)
    g_main_context_pop_thread_default (context);
  soup_websocket_connection_set_max_incoming_payload_size (conn->ws,
      limits->max_frame_bytes);
  conn->frames_direct =
      soup_websocket_connection_get_extensions (conn->ws) == NULL;
  legba_server_conn_bound_inflation (conn, limits->max_frame_bytes);
  /* Pusher protocol 7 keeps connections alive with pusher:ping. */
  soup_websocket_connection_set_keepalive_interval (conn->ws, 0);

  legba_ws_stream_set_owner (conn->stream, conn);
  if (conn->frames_direct)
    legba_ws_stream_set_text_func (conn->stream, legba_server_conn_text);
  legba_server_connect_ws_handlers (self, conn);
  g_hash_table_add (self->conns, conn);
  return conn;
}

/* The 101 response is written: from here on the socket speaks WebSocket. */
static void
legba_server_upgrade_done (SoupServerMessage * msg, gpointer user_data)
{
  LegbaUpgrade *upgrade = user_data;
  LegbaServer *self = upgrade->server;
  GUri *uri = legba_server_ws_uri (self, soup_server_message_get_uri (msg));
  g_autoptr (GIOStream) base = NULL;
  LegbaServerConn *conn;

  g_object_ref (msg);
  legba_acceptor_upgraded (msg);
  base = soup_server_message_steal_connection (msg);
  if (base == NULL || self->shutting_down) {
    if (base != NULL)
      g_io_stream_close (base, NULL, NULL);
    g_object_unref (msg);
    return;
  }

  legba_metrics_count_http (self->metrics, "/app/:key",
      SOUP_STATUS_SWITCHING_PROTOCOLS);
  conn = legba_server_conn_new (self, upgrade, base, uri);
  conn->hub_conn = legba_hub_open (self->hub, upgrade->app_key,
      upgrade->protocol, conn);
  if (conn->hub_conn != NULL) {
    conn->socket_id = g_strdup (legba_hub_conn_get_socket_id (conn->hub_conn));
    legba_server_log (G_LOG_LEVEL_INFO, "ws-open",
        "SOCKET_ID", conn->socket_id, "REMOTE", conn->remote,
        "APP_ID", legba_hub_app_get_id (legba_hub_conn_get_app
            (conn->hub_conn)), NULL);
    if (conn->closing)
      legba_server_conn_schedule_release (conn);
  } else {
    legba_server_log (G_LOG_LEVEL_INFO, "ws-refused",
        "REMOTE", conn->remote, NULL);
  }
  legba_server_notify_connection_count (self);
  g_object_unref (msg);
}

/* ---- WebSocket upgrade ---- */

void
legba_server_handle_app (SoupServer * soup, SoupServerMessage * msg,
    const char *path, GHashTable * query, gpointer user_data)
{
  LegbaServer *self = user_data;
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  const char *key = path + strlen ("/app/");
  const char *origin = soup_message_headers_get_one (headers, "Origin");
  LegbaUpgrade *upgrade;
  GList *extensions = NULL;

  if (*key == '\0' || strchr (key, '/') != NULL) {
    legba_server_handle_default (soup, msg, path, query, user_data);
    return;
  }
  if (self->shutting_down) {
    legba_server_respond_error (msg, SOUP_STATUS_SERVICE_UNAVAILABLE,
        "shutting down");
    return;
  }
  if (!legba_server_origin_allowed (self, origin)) {
    g_autofree char *remote = legba_server_remote (msg);

    legba_metrics_count_origin_refused (self->metrics);
    legba_server_log (G_LOG_LEVEL_INFO, "ws-origin-refused",
        "REMOTE", remote, "ORIGIN", origin, NULL);
    legba_server_respond_error (msg, SOUP_STATUS_FORBIDDEN,
        "origin not allowed");
    return;
  }
  legba_server_keep_connection (msg);
  if (!soup_websocket_server_process_handshake (msg, NULL, NULL,
          self->compression ? self->extension_types : NULL, &extensions))
    return;

  upgrade = g_new0 (LegbaUpgrade, 1);
  upgrade->server = g_object_ref (self);
  upgrade->extensions = extensions;
  upgrade->socket = legba_acceptor_get_socket (msg);
  if (upgrade->socket != NULL)
    g_object_ref (upgrade->socket);
  upgrade->app_key = g_strdup (key);
  upgrade->protocol = g_strdup (query ? g_hash_table_lookup (query,
          "protocol") : NULL);
  upgrade->origin = g_strdup (origin);
  upgrade->remote = legba_server_remote (msg);
  g_signal_connect_data (msg, "wrote-informational",
      G_CALLBACK (legba_server_upgrade_done), upgrade, legba_upgrade_free, 0);
}
