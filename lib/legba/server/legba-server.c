/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */

/**
 * SECTION:legba-server
 * @title: LegbaServer
 * @short_description: Pusher protocol 7 signalling server on libsoup 3
 *
 * #LegbaServer is the signalling server of Legba rooms: the Pusher
 * Channels protocol 7 over WebSocket at `/app/APP_KEY?protocol=7`, the
 * Pusher HTTP API under `/apps/`, join tokens at `/apps/ID/auth`, `GET
 * /up` and `GET /metrics`. The protocol lives in a state machine without
 * I/O (the hub); this object is its transport: it accepts sockets, hands
 * frames to the hub, bounds what each socket may hold, and serves HTTP.
 *
 * |[<!-- language="C" -->
 * g_autoptr (LegbaServer) server = legba_server_new ();
 * legba_server_add_app (server, "1", "app-key", "app-secret", &error);
 * legba_server_listen (server, "127.0.0.1", 0, &error);
 * g_print ("ws://127.0.0.1:%u/app/app-key?protocol=7\n",
 *     legba_server_get_port (server));
 * ]|
 */

#define LEGBA_SERVER_INTERNALS
#include <legba/server/legba-server-private.h>

#include <legba/server/legba-poll-group.h>
#include <legba/server/legba-ws-deflate.h>
#include <legba/server/legba-ws-stream.h>
#include <legba/common/legba-turn.h>

#include <legba/legba-version.h>
#include <fcntl.h>
#include <libsoup/soup.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_MAX_REQUEST_BYTES (1024 * 1024)
/* A TLS handshake and a request of max-request-bytes on a slow link fit
 * in it; a client that sends its headers a byte at a time does not. */
#define DEFAULT_HANDSHAKE_TIMEOUT 10
#define DEFAULT_MAX_PENDING_CONNECTIONS 1024
#define DEFAULT_MAX_PENDING_PER_ADDRESS 0
#define DEFAULT_LISTEN_ADDRESS "127.0.0.1"
#define DEFAULT_LISTEN_PORT 6001
#define DEFAULT_METRICS_PORT 6002

/* How long a socket closed for a message over max-frame-bytes keeps
 * reading (and dropping) what its peer still sends, so that the peer
 * reads the close frame. */
#define OVERSIZE_LINGER_MS 1000

/* Pending connections the kernel queues for accept(); Linux caps it at
 * net.core.somaxconn (4096 by default). */
#define LISTEN_BACKLOG 4096

/* On shutdown, how long clients have to answer the close frame before
 * their sockets are torn down. */
#define SHUTDOWN_GRACE_S 2

/* How long a socket the server closes has to answer the close frame
 * before it is torn down. Under libsoup's own 5 s, whose expiry (in
 * libsoup 3.2) leaks its timer source. */
#define CLOSE_GRACE_S 4

/* WebSockets per poll bucket (legba-poll-group.h): a wakeup serves the
 * sources of this many sockets, whatever the server holds in all. */
#define POLL_BUCKET_SIZE 32

/* Sockets sharing one group of handler closures. Each connection of a
 * closure adds an invalidation notifier to it, and a GClosure holds at
 * most 255 of them. */
#define WS_HANDLERS_USERS 128

typedef struct
{
  const char *name;
  const char *blurb;
  gsize offset;                 /* in LegbaLimits */
  gboolean is_size;             /* a gsize field, else a guint */
  guint min;
} LegbaLimitSpec;

#define LIMIT(field, size, min, name, blurb) \
  { name, blurb, G_STRUCT_OFFSET (LegbaLimits, field), size, min }

/* 0 means no limit where the hub allows it; the transport's own bounds
 * (frames, queues) and the timeouts always hold. */
static const LegbaLimitSpec limit_specs[] = {
  LIMIT (max_connections, FALSE, 0, "max-connections",
      "WebSocket connections per app (0: no limit)"),
  LIMIT (max_event_bytes, TRUE, 0, "max-event-bytes",
      "Bytes of one event's data, from a client or the HTTP API "
      "(0: no limit)"),
  LIMIT (client_events_per_second, FALSE, 0, "client-events-per-second",
      "Client events one socket may send per second (0: no limit)"),
  LIMIT (max_presence_members, FALSE, 0, "max-presence-members",
      "Members of one presence channel (0: no limit)"),
  LIMIT (max_channels_per_socket, FALSE, 0, "max-channels-per-socket",
      "Channels one socket may be subscribed to at once (0: no limit)"),
  LIMIT (max_user_info_bytes, TRUE, 0, "max-user-info-bytes",
      "Bytes of one presence member's user_info (0: no limit)"),
  LIMIT (max_channel_name_length, FALSE, 0, "max-channel-name-length",
      "Characters of a channel name (0: no limit)"),
  LIMIT (max_frame_bytes, TRUE, 128, "max-frame-bytes",
      "Bytes of one incoming WebSocket message"),
  LIMIT (max_queued_bytes, TRUE, 4096, "max-queued-bytes",
      "Bytes waiting to be written to one socket before it is torn down"),
  LIMIT (control_frames_per_second, FALSE, 0, "control-frames-per-second",
      "WebSocket control frames (pings, pongs) one socket may send per "
      "second before it is closed with 1008 (0: no limit)"),
  LIMIT (activity_timeout, FALSE, 1, "activity-timeout",
      "Seconds of silence before the server pings a client"),
  LIMIT (pong_timeout, FALSE, 1, "pong-timeout",
      "Seconds a client has to answer a ping"),
  LIMIT (signin_timeout, FALSE, 0, "signin-timeout",
      "Seconds a client has to sign in (0: signing in is optional)"),
};

#undef LIMIT

enum
{
  PROP_0,
  PROP_MAX_REQUEST_BYTES,
  PROP_HANDSHAKE_TIMEOUT,
  PROP_MAX_PENDING_CONNECTIONS,
  PROP_MAX_PENDING_PER_ADDRESS,
  PROP_ALLOWED_ORIGINS,
  PROP_COMPRESSION,
  PROP_METRICS_TOKEN,
  PROP_WEB_DIR,
  PROP_PUSHER_JS_DIR,
  PROP_LISTEN_ADDRESS,
  PROP_LISTEN_PORT,
  PROP_METRICS_ADDRESS,
  PROP_METRICS_PORT,
  PROP_REDIS_URL,
  PROP_INSTANCE_ID,
  PROP_REDIS_PREFIX,
  PROP_REDIS_RETENTION,
  PROP_REDIS_INSTANCE_TTL,
  PROP_TURN_URLS,
  PROP_TURN_SECRET,
  PROP_TURN_TTL,
  PROP_CONNECTION_COUNT,
  PROP_LIMIT_FIRST,
  N_PROPS = PROP_LIMIT_FIRST + G_N_ELEMENTS (limit_specs)
};

static GParamSpec *properties[N_PROPS];

typedef struct
{
  char *id;
  char *key;
  char *secret;
} LegbaPendingApp;


G_DEFINE_FINAL_TYPE (LegbaServer, legba_server, G_TYPE_OBJECT);

GQuark
legba_server_error_quark (void)
{
  return g_quark_from_static_string ("legba-server-error-quark");
}

/* The closures of the handlers of LegbaServerConn.ws, in the order of
 * ws_signals, and how many sockets are connected through them. */
typedef struct
{
  GClosure *closures[3];
  guint users;
} LegbaWsHandlers;

/* One WebSocket socket. */
typedef struct
{
  /* What sending a frame reads, together */
  gboolean closing;
  gboolean frames_direct;       /* no extension: the stream may write text
                                 * frames itself */
  SoupWebsocketConnection *ws;
  LegbaWsStream *stream;
  LegbaPollBucket *bucket;      /* where its sources are; NULL: main context */
  LegbaServer *server;
  LegbaWsHandlers *handlers;    /* its handlers' closures, shared */
  LegbaHubConn *hub_conn;       /* NULL once the hub let it go */
  GSource *release_source;
  GSource *close_timer;         /* tears it down if the close goes unanswered */
  char *remote;
  char *socket_id;
  guint16 close_code;           /* what the server closed with, 0: peer */
} LegbaServerConn;

/* ---- Logging ---- */

static const char *
legba_log_priority (GLogLevelFlags level)
{
  if (level & G_LOG_LEVEL_ERROR)
    return "3";
  if (level & (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    return "4";
  if (level & G_LOG_LEVEL_MESSAGE)
    return "5";
  if (level & G_LOG_LEVEL_INFO)
    return "6";
  return "7";
}

static void
legba_log_append_value (GString * message, const char *value)
{
  if (*value != '\0' && strpbrk (value, " \"=\\\n\t") == NULL) {
    g_string_append (message, value);
  } else {
    g_autofree char *escaped = g_strescape (value, NULL);

    g_string_append_printf (message, "\"%s\"", escaped);
  }
}

static void
legba_log_add (GLogField * fields, gsize * n, const char *key,
    const char *value)
{
  fields[*n].key = key;
  fields[*n].value = value;
  fields[*n].length = -1;
  (*n)++;
}

void
legba_server_log (GLogLevelFlags level, const char *event, ...)
{
  GLogField fields[20];
  gsize n = 0;
  g_autoptr (GString) message = NULL;
  va_list ap;
  const char *key;

  /* Lines at the info level are dropped unless G_MESSAGES_DEBUG asks for
   * them: do not even format them then. */
  if (g_log_writer_default_would_drop (level, G_LOG_DOMAIN))
    return;
  message = g_string_new (event);

  legba_log_add (fields, &n, "GLIB_DOMAIN", G_LOG_DOMAIN);
  legba_log_add (fields, &n, "PRIORITY", legba_log_priority (level));
  legba_log_add (fields, &n, "LEGBA_EVENT", event);

  va_start (ap, event);
  while ((key = va_arg (ap, const char *)) != NULL)
  {
    const char *value = va_arg (ap, const char *);
    g_autofree char *lower = NULL;

    if (value == NULL || n >= G_N_ELEMENTS (fields) - 1)
      continue;
    legba_log_add (fields, &n, key, value);
    lower = g_ascii_strdown (key, -1);
    g_string_append_printf (message, " %s=", lower);
    legba_log_append_value (message, value);
  }
  va_end (ap);

  legba_log_add (fields, &n, "MESSAGE", message->str);
  g_log_structured_array (level, fields, n);
}

/* ---- Limits ---- */

static guint
legba_limit_get (const LegbaLimits * limits, const LegbaLimitSpec * spec)
{
  const char *p = (const char *) limits + spec->offset;

  if (spec->is_size)
    return (guint) MIN (*(const gsize *) p, (gsize) G_MAXUINT);
  return *(const guint *) p;
}

static void
legba_limit_set (LegbaLimits * limits, const LegbaLimitSpec * spec, guint value)
{
  char *p = (char *) limits + spec->offset;

  if (spec->is_size)
    *(gsize *) p = value;
  else
    *(guint *) p = value;
}

const char *const *
legba_server_get_limit_names (void)
{
  static const char *const transport[] = { "max-request-bytes",
    "handshake-timeout", "max-pending-connections",
    "max-pending-per-address"
  };
  static const char *names[G_N_ELEMENTS (limit_specs) +
      G_N_ELEMENTS (transport) + 1];

  if (names[0] == NULL) {
    guint i;

    for (i = 0; i < G_N_ELEMENTS (limit_specs); i++)
      names[i] = limit_specs[i].name;
    for (guint j = 0; j < G_N_ELEMENTS (transport); j++)
      names[i + j] = transport[j];
  }
  return names;
}

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

static void
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
      self->limits.max_queued_bytes);

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
  LegbaServer *self = conn->server;
  gsize size, queued;

  if (conn->closing ||
      soup_websocket_connection_get_state (conn->ws) !=
      SOUP_WEBSOCKET_STATE_OPEN)
    return;

  /* Counted as the uncompressed frame: with permessage-deflate the bound
   * is then on what the messages would take uncompressed. */
  size = legba_ws_frame_size (g_bytes_get_size (frame));
  queued = legba_ws_stream_get_queued (conn->stream);
  if (queued > 0 && queued + size > self->limits.max_queued_bytes) {
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

static void
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

static const LegbaHubTransport legba_server_transport = {
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

static void
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

static void
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
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_CONNECTION_COUNT]);
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
  GMainContext *context = NULL;

  conn->server = self;
  conn->remote = g_strdup (upgrade->remote);
  conn->stream = legba_ws_stream_new (base, upgrade->socket,
      self->certificate == NULL);
  legba_ws_stream_set_max_message (conn->stream, self->limits.max_frame_bytes);
  legba_ws_stream_set_max_control_rate (conn->stream,
      self->limits.control_frames_per_second);
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
      self->limits.max_frame_bytes);
  conn->frames_direct =
      soup_websocket_connection_get_extensions (conn->ws) == NULL;
  legba_server_conn_bound_inflation (conn, self->limits.max_frame_bytes);
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
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_CONNECTION_COUNT]);
  g_object_unref (msg);
}

/* ---- WebSocket upgrade ---- */

static void
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

/* ---- Listening ---- */

static gboolean
legba_server_flush_apps (LegbaServer * self, GError ** error)
{
  guint i;

  if (self->started)
    return TRUE;
  self->started = TRUE;
  legba_hub_set_limits (self->hub, &self->limits);
  for (i = 0; i < self->pending_apps->len; i++) {
    LegbaPendingApp *app = g_ptr_array_index (self->pending_apps, i);
    g_autoptr (GError) hub_error = NULL;

    if (!legba_hub_add_app (self->hub, app->id, app->key, app->secret,
            &hub_error)) {
      g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
          "app %s: %s", app->id, hub_error->message);
      return FALSE;
    }
  }
  g_ptr_array_set_size (self->pending_apps, 0);
  return TRUE;
}

static GInetAddress *
legba_server_parse_address (const char *address, GError ** error)
{
  GInetAddress *inet;

  if (g_strcmp0 (address, "localhost") == 0)
    return g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  inet = address ? g_inet_address_new_from_string (address) : NULL;
  if (inet == NULL)
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_LISTEN,
        "cannot listen on '%s': not an IP address (such as 127.0.0.1, "
        "0.0.0.0 or ::)", address ? address : "(null)");
  return inet;
}

/* With a Redis URL, the relay to the other instances starts with the
 * first listener; it connects in the background (docs/scale-out.md). */
static gboolean
legba_server_start_relay (LegbaServer * self, GError ** error)
{
  LegbaRelayConfig config = { 0, };
  g_autoptr (GError) local_error = NULL;

  if (self->redis_url == NULL || self->relay != NULL)
    return TRUE;
  if (!legba_redis_address_parse (self->redis_url, &config.address,
          &local_error)) {
    g_set_error_literal (error, LEGBA_SERVER_ERROR,
        LEGBA_SERVER_ERROR_CONFIG, local_error->message);
    return FALSE;
  }
  if (self->instance_id == NULL)
    self->instance_id = legba_relay_default_instance_id ();
  if (!legba_relay_instance_id_is_valid (self->instance_id)) {
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "instance id '%s': use 1 to 64 of A-Z a-z 0-9 . _ - :",
        self->instance_id);
    legba_redis_address_clear (&config.address);
    return FALSE;
  }
  config.instance_id = self->instance_id;
  config.prefix = self->redis_prefix;
  config.retention = self->redis_retention;
  config.instance_ttl = self->redis_instance_ttl;
  self->relay = legba_relay_new (self->hub, self->context, &config);
  legba_redis_address_clear (&config.address);
  legba_relay_start (self->relay);
  return TRUE;
}

/* Listens on address:port and returns the port the socket got. The socket
 * is made here rather than by libsoup, for its backlog: a restart sends
 * every client back at once, and GLib's default backlog of 10 would drop
 * their handshakes into TCP's retransmission timeouts. The server accepts
 * its connections itself (legba-server-accept.c). */
static guint
legba_server_soup_listen (LegbaServer * self, LegbaAcceptor * acceptor,
    const char *address, guint port, SoupServerListenOptions options,
    GError ** error)
{
  g_autoptr (GInetAddress) inet = NULL;
  g_autoptr (GSocketAddress) socket_address = NULL;
  g_autoptr (GSocketAddress) local = NULL;
  g_autoptr (GSocket) socket = NULL;
  g_autoptr (GError) local_error = NULL;
  GSocketFamily family;
  gboolean ok;

  inet = legba_server_parse_address (address, error);
  if (inet == NULL)
    return 0;
  socket_address = g_inet_socket_address_new (inet, port);
  family = g_inet_address_get_family (inet);

  socket = g_socket_new (family, G_SOCKET_TYPE_STREAM,
      G_SOCKET_PROTOCOL_DEFAULT, &local_error);
  if (socket != NULL && family == G_SOCKET_FAMILY_IPV6)
    g_socket_set_option (socket, IPPROTO_IPV6, IPV6_V6ONLY, TRUE, NULL);
  if (socket != NULL)
    g_socket_set_listen_backlog (socket, LISTEN_BACKLOG);
  ok = socket != NULL &&
      g_socket_bind (socket, socket_address, TRUE, &local_error) &&
      g_socket_listen (socket, &local_error) &&
      legba_acceptor_add_socket (acceptor, socket, options, &local_error);
  if (!ok) {
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_LISTEN,
        "cannot listen on %s:%u: %s", address, port, local_error->message);
    return 0;
  }
  /* What lets a connection past the descriptor limit be refused. */
  if (self->reserve_fd < 0)
    self->reserve_fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);

  local = g_socket_get_local_address (socket, NULL);
  if (G_IS_INET_SOCKET_ADDRESS (local))
    return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (local));
  return port;
}

/**
 * legba_server_listen:
 * @server: a #LegbaServer
 * @address: an IP address (or "localhost") to listen on
 * @port: the TCP port, 0 to pick a free one (see legba_server_get_port())
 * @error: return location for a #GError
 *
 * Starts serving WebSocket and HTTP (HTTPS and WSS when a certificate is
 * set, see legba_server_set_tls_files()) on @address:@port. The first call
 * also registers the apps added so far with the limits then in force.
 *
 * Returns: %TRUE on success
 */
gboolean
legba_server_listen (LegbaServer * server, const char *address, guint port,
    GError ** error)
{
  SoupServerListenOptions options = 0;
  g_autofree char *port_s = NULL;
  guint bound;

  g_return_val_if_fail (LEGBA_IS_SERVER (server), FALSE);
  g_return_val_if_fail (address != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (server->shutting_down) {
    g_set_error_literal (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_LISTEN,
        "the server was shut down");
    return FALSE;
  }
  if (!legba_server_flush_apps (server, error) ||
      !legba_server_start_relay (server, error))
    return FALSE;
  if (server->certificate != NULL)
    options |= SOUP_SERVER_LISTEN_HTTPS;
  bound = legba_server_soup_listen (server, server->acceptor, address, port,
      options, error);
  if (bound == 0)
    return FALSE;

  if (server->port == 0) {
    server->port = bound;
    g_free (server->url_host);
    if (g_str_equal (address, "0.0.0.0") || g_str_equal (address, "localhost"))
      server->url_host = g_strdup ("127.0.0.1");
    else if (g_str_equal (address, "::"))
      server->url_host = g_strdup ("[::1]");
    else if (strchr (address, ':'))
      server->url_host = g_strdup_printf ("[%s]", address);
    else
      server->url_host = g_strdup (address);
  }
  port_s = g_strdup_printf ("%u", bound);
  legba_server_log (G_LOG_LEVEL_INFO, "listening", "ADDRESS", address,
      "PORT", port_s, "TLS", server->certificate ? "yes" : "no", NULL);
  return TRUE;
}

/**
 * legba_server_listen_metrics:
 * @server: a #LegbaServer
 * @address: an IP address (or "localhost") to serve /metrics on
 * @port: the TCP port, 0 to pick a free one
 * @error: return location for a #GError
 *
 * Serves `GET /metrics` (and `GET /up`) in plain HTTP on a listener of
 * its own, so that it can stay on a private address; /metrics is then no
 * longer served on the main listener.
 *
 * Returns: %TRUE on success
 */
gboolean
legba_server_listen_metrics (LegbaServer * server, const char *address,
    guint port, GError ** error)
{
  g_autofree char *port_s = NULL;
  guint bound;

  g_return_val_if_fail (LEGBA_IS_SERVER (server), FALSE);
  g_return_val_if_fail (address != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (server->metrics_soup == NULL) {
    server->metrics_soup = legba_server_new_soup (server);
    server->metrics_acceptor = legba_acceptor_new (server,
        server->metrics_soup);
  }
  bound = legba_server_soup_listen (server, server->metrics_acceptor,
      address, port, 0, error);
  if (bound == 0)
    return FALSE;
  if (server->bound_metrics_port == 0)
    server->bound_metrics_port = bound;
  port_s = g_strdup_printf ("%u", bound);
  legba_server_log (G_LOG_LEVEL_INFO, "metrics-listening",
      "ADDRESS", address, "PORT", port_s, NULL);
  return TRUE;
}

/**
 * legba_server_start:
 * @server: a #LegbaServer
 * @error: return location for a #GError
 *
 * Listens as configured: on #LegbaServer:listen-address and
 * #LegbaServer:listen-port, and, when #LegbaServer:metrics-address is set,
 * serves /metrics there on #LegbaServer:metrics-port. Fails when no app was
 * added.
 *
 * Returns: %TRUE on success
 */
gboolean
legba_server_start (LegbaServer * server, GError ** error)
{
  g_return_val_if_fail (LEGBA_IS_SERVER (server), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (!server->started && server->pending_apps->len == 0) {
    g_set_error_literal (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "no app is configured");
    return FALSE;
  }
  if (!legba_server_listen (server, server->listen_address,
          server->listen_port, error))
    return FALSE;
  if (server->metrics_address != NULL &&
      !legba_server_listen_metrics (server, server->metrics_address,
          server->metrics_port, error))
    return FALSE;
  return TRUE;
}

/**
 * legba_server_get_port:
 * @server: a #LegbaServer
 *
 * Returns: the port of the first listener, 0 before listening
 */
guint
legba_server_get_port (LegbaServer * server)
{
  g_return_val_if_fail (LEGBA_IS_SERVER (server), 0);

  return server->port;
}

/**
 * legba_server_get_metrics_port:
 * @server: a #LegbaServer
 *
 * Returns: the port of the separate /metrics listener, 0 when there is none
 */
guint
legba_server_get_metrics_port (LegbaServer * server)
{
  g_return_val_if_fail (LEGBA_IS_SERVER (server), 0);

  return server->bound_metrics_port;
}

/**
 * legba_server_get_url:
 * @server: a #LegbaServer
 *
 * The base URL of the first listener, such as `http://127.0.0.1:6001`
 * (`https://` with TLS). WebSocket clients connect to the same host and
 * port with `ws://` (`wss://`) and the path `/app/APP_KEY?protocol=7`.
 *
 * Returns: (transfer full) (nullable): the URL, %NULL before listening
 */
char *
legba_server_get_url (LegbaServer * server)
{
  g_return_val_if_fail (LEGBA_IS_SERVER (server), NULL);

  if (server->port == 0)
    return NULL;
  return g_strdup_printf ("%s://%s:%u",
      server->certificate ? "https" : "http", server->url_host, server->port);
}

/**
 * legba_server_get_connection_count:
 * @server: a #LegbaServer
 *
 * Returns: the number of WebSocket sockets open, closing ones included
 */
guint
legba_server_get_connection_count (LegbaServer * server)
{
  g_return_val_if_fail (LEGBA_IS_SERVER (server), 0);

  return g_hash_table_size (server->conns);
}

guint64
legba_server_get_queued_bytes (LegbaServer * server)
{
  LegbaMetricsGauges gauges;

  g_return_val_if_fail (LEGBA_IS_SERVER (server), 0);

  legba_server_get_gauges (server, &gauges);
  return gauges.queued_bytes;
}

void
legba_server_get_gauges (LegbaServer * self, LegbaMetricsGauges * gauges)
{
  GHashTableIter iter;
  gpointer key;

  gauges->sockets = g_hash_table_size (self->conns);
  gauges->queued_bytes = 0;
  gauges->written_bytes = self->written_closed;
  gauges->pending_connections = legba_acceptor_get_pending (self->acceptor) +
      legba_acceptor_get_pending (self->metrics_acceptor);
  g_hash_table_iter_init (&iter, self->conns);
  while (g_hash_table_iter_next (&iter, &key, NULL)) {
    LegbaServerConn *conn = key;

    gauges->queued_bytes += legba_ws_stream_get_queued (conn->stream);
    gauges->written_bytes += legba_ws_stream_get_written (conn->stream);
  }
}

char *
legba_server_render_metrics (LegbaServer * self)
{
  LegbaMetricsGauges gauges = { 0, };
  g_autofree char *text = NULL;
  GString *out;

  legba_server_get_gauges (self, &gauges);
  text = legba_metrics_render (self->metrics, self->hub, &gauges);
  out = g_string_new (text);
  if (self->relay != NULL)
    legba_relay_render_metrics (self->relay, out);
  return g_string_free (out, FALSE);
}

/* ---- Apps and TLS ---- */

static void
legba_pending_app_free (gpointer data)
{
  LegbaPendingApp *app = data;

  g_free (app->id);
  g_free (app->key);
  g_free (app->secret);
  g_free (app);
}

/**
 * legba_server_add_app:
 * @server: a #LegbaServer
 * @id: the app id (HTTP API paths, /apps/ID/...)
 * @key: the app key (WebSocket path /app/KEY, signatures)
 * @secret: the app secret (signatures, join tokens)
 * @error: return location for a #GError
 *
 * Adds an app. None of the strings may be empty, and an id or key may not
 * be used twice.
 *
 * Returns: %TRUE on success
 */
gboolean
legba_server_add_app (LegbaServer * server, const char *id, const char *key,
    const char *secret, GError ** error)
{
  LegbaPendingApp *app;
  guint i;

  g_return_val_if_fail (LEGBA_IS_SERVER (server), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (id == NULL || *id == '\0' || key == NULL || *key == '\0' ||
      secret == NULL || *secret == '\0') {
    g_set_error_literal (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "an app needs a non-empty id, key and secret");
    return FALSE;
  }

  if (server->started) {
    g_autoptr (GError) hub_error = NULL;

    if (legba_hub_add_app (server->hub, id, key, secret, &hub_error))
      return TRUE;
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "app %s: %s", id, hub_error->message);
    return FALSE;
  }

  for (i = 0; i < server->pending_apps->len; i++) {
    LegbaPendingApp *other = g_ptr_array_index (server->pending_apps, i);

    if (g_str_equal (other->id, id) || g_str_equal (other->key, key)) {
      g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
          "app %s: its %s is already used by another app", id,
          g_str_equal (other->id, id) ? "id" : "key");
      return FALSE;
    }
  }
  app = g_new0 (LegbaPendingApp, 1);
  app->id = g_strdup (id);
  app->key = g_strdup (key);
  app->secret = g_strdup (secret);
  g_ptr_array_add (server->pending_apps, app);
  return TRUE;
}

/**
 * legba_server_set_tls_files:
 * @server: a #LegbaServer
 * @cert_file: a PEM file with the certificate (and its chain)
 * @key_file: a PEM file with the private key
 * @error: return location for a #GError
 *
 * Serves HTTPS and WSS instead of HTTP and WS. Call before listening.
 *
 * Returns: %TRUE on success
 */
gboolean
legba_server_set_tls_files (LegbaServer * server, const char *cert_file,
    const char *key_file, GError ** error)
{
  g_autoptr (GError) local_error = NULL;
  GTlsCertificate *certificate;

  g_return_val_if_fail (LEGBA_IS_SERVER (server), FALSE);
  g_return_val_if_fail (cert_file != NULL && key_file != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (server->port != 0) {
    g_set_error_literal (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_TLS,
        "the TLS certificate must be set before listening");
    return FALSE;
  }
  certificate = g_tls_certificate_new_from_files (cert_file, key_file,
      &local_error);
  if (certificate == NULL) {
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_TLS,
        "TLS certificate %s with key %s: %s", cert_file, key_file,
        local_error->message);
    return FALSE;
  }
  g_clear_object (&server->certificate);
  server->certificate = certificate;
  soup_server_set_tls_certificate (server->soup, certificate);
  return TRUE;
}

/* ---- Shutdown ---- */

static gboolean
legba_server_shutdown_timeout (gpointer user_data)
{
  LegbaServer *self = user_data;
  GHashTableIter iter;
  gpointer key;

  g_clear_pointer (&self->shutdown_timer, g_source_unref);
  g_hash_table_iter_init (&iter, self->conns);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    legba_ws_stream_abort (((LegbaServerConn *) key)->stream);
  return G_SOURCE_REMOVE;
}

/**
 * legba_server_shutdown:
 * @server: a #LegbaServer
 *
 * Stops listening and closes every WebSocket with 4200 (Pusher protocol
 * 7: reconnect at once), so that clients move to another instance. Sockets
 * whose peer does not answer the close within 2 seconds are torn down;
 * #LegbaServer:connection-count reaches 0 once all are closed. The server
 * cannot listen again afterwards.
 */
void
legba_server_shutdown (LegbaServer * server)
{
  GHashTableIter iter;
  gpointer key;

  g_return_if_fail (LEGBA_IS_SERVER (server));

  if (server->shutting_down)
    return;
  server->shutting_down = TRUE;
  legba_server_log (G_LOG_LEVEL_INFO, "shutdown", NULL);

  legba_acceptor_stop (server->acceptor);
  legba_acceptor_stop (server->metrics_acceptor);
  soup_server_disconnect (server->soup);
  if (server->metrics_soup != NULL)
    soup_server_disconnect (server->metrics_soup);
  legba_hub_close_all (server->hub, LEGBA_PUSHER_RECONNECT,
      "server shutting down");
  /* The other instances drop this one's members at once rather than when
   * its heartbeat expires. */
  if (server->relay != NULL)
    legba_relay_leave (server->relay);

  /* Sockets the hub refused and is not closing already. */
  g_hash_table_iter_init (&iter, server->conns);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    legba_server_transport_close (key, LEGBA_PUSHER_RECONNECT,
        "server shutting down", server);

  server->shutdown_timer = g_timeout_source_new_seconds (SHUTDOWN_GRACE_S);
  g_source_set_callback (server->shutdown_timer,
      legba_server_shutdown_timeout, server, NULL);
  g_source_attach (server->shutdown_timer, server->context);
}

/* ---- GObject ---- */

static gboolean
legba_server_tick (gpointer user_data)
{
  LegbaServer *self = user_data;

  legba_hub_tick (self->hub);
  return G_SOURCE_CONTINUE;
}

static void
legba_server_apply_turn (LegbaServer * self)
{
  legba_hub_set_turn (self->hub, (const char *const *) self->turn_urls,
      self->turn_secret, self->turn_ttl);
}

/* Bad URLs are refused whole: a server must not hand out a list that
 * browsers reject. legba-server and the configuration file report them
 * as errors before they get here. */
static void
legba_server_set_turn_urls (LegbaServer * self, const char *const *urls)
{
  for (guint i = 0; urls != NULL && urls[i] != NULL; i++) {
    g_autoptr (GError) error = NULL;

    if (!legba_turn_url_check (urls[i], &error)) {
      g_warning ("turn-urls: %s; no TURN server is handed out", error->message);
      urls = NULL;
      break;
    }
  }
  g_strfreev (self->turn_urls);
  self->turn_urls = urls && urls[0] ? g_strdupv ((char **) urls) : NULL;
  legba_server_apply_turn (self);
}

static void
legba_server_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  LegbaServer *self = LEGBA_SERVER (object);

  if (prop_id >= PROP_LIMIT_FIRST && prop_id < N_PROPS) {
    legba_limit_set (&self->limits, &limit_specs[prop_id - PROP_LIMIT_FIRST],
        g_value_get_uint (value));
    legba_hub_set_limits (self->hub, &self->limits);
    return;
  }

  switch (prop_id) {
    case PROP_MAX_REQUEST_BYTES:
      self->max_request_bytes = g_value_get_uint (value);
      break;
    case PROP_HANDSHAKE_TIMEOUT:
      self->handshake_timeout = g_value_get_uint (value);
      break;
    case PROP_MAX_PENDING_CONNECTIONS:
      self->max_pending_connections = g_value_get_uint (value);
      break;
    case PROP_MAX_PENDING_PER_ADDRESS:
      self->max_pending_per_address = g_value_get_uint (value);
      break;
    case PROP_ALLOWED_ORIGINS:
      g_strfreev (self->allowed_origins);
      self->allowed_origins = g_value_dup_boxed (value);
      break;
    case PROP_COMPRESSION:
      self->compression = g_value_get_boolean (value);
      break;
    case PROP_METRICS_TOKEN:
      g_free (self->metrics_token);
      self->metrics_token = g_value_dup_string (value);
      break;
    case PROP_WEB_DIR:
      g_free (self->web_dir);
      self->web_dir = g_value_dup_string (value);
      break;
    case PROP_PUSHER_JS_DIR:
      g_free (self->pusher_js_dir);
      self->pusher_js_dir = g_value_dup_string (value);
      break;
    case PROP_LISTEN_ADDRESS:
      g_free (self->listen_address);
      self->listen_address = g_value_dup_string (value);
      if (self->listen_address == NULL)
        self->listen_address = g_strdup (DEFAULT_LISTEN_ADDRESS);
      break;
    case PROP_LISTEN_PORT:
      self->listen_port = g_value_get_uint (value);
      break;
    case PROP_METRICS_ADDRESS:
      g_free (self->metrics_address);
      self->metrics_address = g_value_dup_string (value);
      break;
    case PROP_METRICS_PORT:
      self->metrics_port = g_value_get_uint (value);
      break;
    case PROP_REDIS_URL:
      g_free (self->redis_url);
      self->redis_url = g_value_dup_string (value);
      break;
    case PROP_INSTANCE_ID:
      g_free (self->instance_id);
      self->instance_id = g_value_dup_string (value);
      break;
    case PROP_REDIS_PREFIX:
      g_free (self->redis_prefix);
      self->redis_prefix = g_value_dup_string (value);
      if (self->redis_prefix == NULL)
        self->redis_prefix = g_strdup (LEGBA_RELAY_DEFAULT_PREFIX);
      break;
    case PROP_REDIS_RETENTION:
      self->redis_retention = g_value_get_uint (value);
      break;
    case PROP_REDIS_INSTANCE_TTL:
      self->redis_instance_ttl = g_value_get_uint (value);
      break;
    case PROP_TURN_URLS:
      legba_server_set_turn_urls (self, g_value_get_boxed (value));
      break;
    case PROP_TURN_SECRET:
      g_free (self->turn_secret);
      self->turn_secret = g_value_dup_string (value);
      legba_server_apply_turn (self);
      break;
    case PROP_TURN_TTL:
      self->turn_ttl = g_value_get_uint (value);
      legba_server_apply_turn (self);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static void
legba_server_get_property (GObject * object, guint prop_id, GValue * value,
    GParamSpec * pspec)
{
  LegbaServer *self = LEGBA_SERVER (object);

  if (prop_id >= PROP_LIMIT_FIRST && prop_id < N_PROPS) {
    g_value_set_uint (value, legba_limit_get (&self->limits,
            &limit_specs[prop_id - PROP_LIMIT_FIRST]));
    return;
  }

  switch (prop_id) {
    case PROP_MAX_REQUEST_BYTES:
      g_value_set_uint (value, self->max_request_bytes);
      break;
    case PROP_HANDSHAKE_TIMEOUT:
      g_value_set_uint (value, self->handshake_timeout);
      break;
    case PROP_MAX_PENDING_CONNECTIONS:
      g_value_set_uint (value, self->max_pending_connections);
      break;
    case PROP_MAX_PENDING_PER_ADDRESS:
      g_value_set_uint (value, self->max_pending_per_address);
      break;
    case PROP_ALLOWED_ORIGINS:
      g_value_set_boxed (value, self->allowed_origins);
      break;
    case PROP_COMPRESSION:
      g_value_set_boolean (value, self->compression);
      break;
    case PROP_METRICS_TOKEN:
      g_value_set_string (value, self->metrics_token);
      break;
    case PROP_WEB_DIR:
      g_value_set_string (value, self->web_dir);
      break;
    case PROP_PUSHER_JS_DIR:
      g_value_set_string (value, self->pusher_js_dir);
      break;
    case PROP_LISTEN_ADDRESS:
      g_value_set_string (value, self->listen_address);
      break;
    case PROP_LISTEN_PORT:
      g_value_set_uint (value, self->listen_port);
      break;
    case PROP_METRICS_ADDRESS:
      g_value_set_string (value, self->metrics_address);
      break;
    case PROP_METRICS_PORT:
      g_value_set_uint (value, self->metrics_port);
      break;
    case PROP_REDIS_URL:
      g_value_set_string (value, self->redis_url);
      break;
    case PROP_INSTANCE_ID:
      g_value_set_string (value, self->instance_id);
      break;
    case PROP_REDIS_PREFIX:
      g_value_set_string (value, self->redis_prefix);
      break;
    case PROP_REDIS_RETENTION:
      g_value_set_uint (value, self->redis_retention);
      break;
    case PROP_REDIS_INSTANCE_TTL:
      g_value_set_uint (value, self->redis_instance_ttl);
      break;
    case PROP_TURN_URLS:
      g_value_set_boxed (value, self->turn_urls);
      break;
    case PROP_TURN_SECRET:
      g_value_set_string (value, self->turn_secret);
      break;
    case PROP_TURN_TTL:
      g_value_set_uint (value, self->turn_ttl);
      break;
    case PROP_CONNECTION_COUNT:
      g_value_set_uint (value, g_hash_table_size (self->conns));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static void
legba_server_dispose (GObject * object)
{
  LegbaServer *self = LEGBA_SERVER (object);
  GHashTableIter iter;
  gpointer key;

  if (self->tick != NULL) {
    g_source_destroy (self->tick);
    g_clear_pointer (&self->tick, g_source_unref);
  }
  if (self->shutdown_timer != NULL) {
    g_source_destroy (self->shutdown_timer);
    g_clear_pointer (&self->shutdown_timer, g_source_unref);
  }
  /* Accepting stops before libsoup closes the listening sockets; the
   * connections still pending end as libsoup lets go of them. */
  legba_acceptor_stop (self->acceptor);
  legba_acceptor_stop (self->metrics_acceptor);
  if (self->soup != NULL)
    soup_server_disconnect (self->soup);
  if (self->metrics_soup != NULL)
    soup_server_disconnect (self->metrics_soup);
  g_clear_pointer (&self->acceptor, legba_acceptor_free);
  g_clear_pointer (&self->metrics_acceptor, legba_acceptor_free);
  if (self->relay != NULL) {
    legba_relay_leave (self->relay);
    g_clear_pointer (&self->relay, legba_relay_free);
  }

  /* Sockets still open: the hub forgets them first (so nothing is sent
   * to a socket being dropped), then they are torn down. */
  g_hash_table_iter_init (&iter, self->conns);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    ((LegbaServerConn *) key)->closing = TRUE;
  g_hash_table_iter_init (&iter, self->conns);
  while (g_hash_table_iter_next (&iter, &key, NULL)) {
    LegbaServerConn *conn = key;

    legba_server_conn_release (conn);
    legba_ws_stream_abort (conn->stream);
  }
  g_hash_table_remove_all (self->conns);
  g_clear_pointer (&self->poll_group, legba_poll_group_free);

  g_clear_object (&self->soup);
  g_clear_object (&self->metrics_soup);
  G_OBJECT_CLASS (legba_server_parent_class)->dispose (object);
}

static void
legba_server_finalize (GObject * object)
{
  LegbaServer *self = LEGBA_SERVER (object);

  if (self->reserve_fd >= 0)
    close (self->reserve_fd);
  g_hash_table_unref (self->conns);
  g_ptr_array_unref (self->ws_handlers);
  g_clear_pointer (&self->ws_uri, g_uri_unref);
  g_clear_pointer (&self->hub, legba_hub_free);
  legba_metrics_free (self->metrics);
  g_ptr_array_unref (self->pending_apps);
  g_ptr_array_unref (self->extension_types);
  g_clear_object (&self->certificate);
  g_strfreev (self->allowed_origins);
  g_free (self->metrics_token);
  g_free (self->web_dir);
  g_free (self->pusher_js_dir);
  g_free (self->listen_address);
  g_free (self->metrics_address);
  g_free (self->url_host);
  g_free (self->redis_url);
  g_free (self->instance_id);
  g_free (self->redis_prefix);
  g_strfreev (self->turn_urls);
  g_free (self->turn_secret);
  g_main_context_unref (self->context);
  G_OBJECT_CLASS (legba_server_parent_class)->finalize (object);
}

static void
legba_server_install_limits (GObjectClass * object_class)
{
  LegbaLimits defaults;
  guint i;

  legba_limits_init_defaults (&defaults);
  for (i = 0; i < G_N_ELEMENTS (limit_specs); i++) {
    const LegbaLimitSpec *spec = &limit_specs[i];
    guint def = legba_limit_get (&defaults, spec);

    properties[PROP_LIMIT_FIRST + i] = g_param_spec_uint (spec->name, NULL,
        spec->blurb, MIN (spec->min, def), G_MAXUINT, def,
        G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  }
}

/* The bounds on connections in their handshake (legba-server-accept.c,
 * docs/server.md "Limits and abuse"). */
static void
legba_server_install_pending_limits (void)
{
  /**
   * LegbaServer:handshake-timeout:
   *
   * Seconds a new connection has to be done with its TLS handshake and its
   * HTTP request (headers and body, then the answer or the upgrade to
   * WebSocket); past it the connection is shut down. A connection kept
   * alive has as long again for each next request.
   */
  properties[PROP_HANDSHAKE_TIMEOUT] = g_param_spec_uint ("handshake-timeout",
      NULL, "Seconds a new connection has for its TLS handshake and HTTP "
      "request", 1, 3600, DEFAULT_HANDSHAKE_TIMEOUT,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:max-pending-connections:
   *
   * Connections accepted and not yet WebSockets nor answered, per listener
   * (the main one, the /metrics one); at the bound the server stops
   * accepting until one of them ends, and new connections wait in the
   * kernel's backlog. 0: no bound.
   */
  properties[PROP_MAX_PENDING_CONNECTIONS] =
      g_param_spec_uint ("max-pending-connections", NULL,
      "Connections in their handshake at once; more wait to be accepted "
      "(0: no limit)", 0, G_MAXUINT, DEFAULT_MAX_PENDING_CONNECTIONS,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:max-pending-per-address:
   *
   * Connections from one source address (an IPv4 address, an IPv6 /64)
   * accepted and not yet WebSockets nor answered; a new one past it is
   * closed as soon as accepted. 0 (the default): no bound, as behind a
   * reverse proxy (every client has the proxy's address) or a large NAT,
   * where a burst of handshakes from one address is legitimate; set it
   * when clients connect directly.
   */
  properties[PROP_MAX_PENDING_PER_ADDRESS] =
      g_param_spec_uint ("max-pending-per-address", NULL,
      "Connections in their handshake from one address; more are refused "
      "(0: no limit)", 0, G_MAXUINT, DEFAULT_MAX_PENDING_PER_ADDRESS,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
}

static void
legba_server_class_init (LegbaServerClass * klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->set_property = legba_server_set_property;
  object_class->get_property = legba_server_get_property;
  object_class->dispose = legba_server_dispose;
  object_class->finalize = legba_server_finalize;

  /* The limits (max-connections, max-event-bytes, ...): see limit_specs
   * and docs/server.md for what each bounds and why its default. */
  legba_server_install_limits (object_class);
  legba_server_install_pending_limits ();

  /**
   * LegbaServer:max-request-bytes:
   *
   * Bytes of an HTTP request body; larger ones are answered 413.
   */
  properties[PROP_MAX_REQUEST_BYTES] = g_param_spec_uint ("max-request-bytes",
      NULL, "Bytes of an HTTP request body", 1024, G_MAXUINT,
      DEFAULT_MAX_REQUEST_BYTES, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:allowed-origins:
   *
   * Origins (`https://example.com`) whose pages may open WebSockets and
   * read HTTP API responses (CORS); `*` or %NULL allows any. Requests
   * without an Origin header (programs other than browsers) are allowed.
   */
  properties[PROP_ALLOWED_ORIGINS] = g_param_spec_boxed ("allowed-origins",
      NULL, "Origins allowed (NULL: any)", G_TYPE_STRV,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:compression:
   *
   * Whether to accept permessage-deflate (RFC 7692) on new WebSockets. Off
   * by default: it costs zlib state per socket and a compression per
   * socket per broadcast.
   */
  properties[PROP_COMPRESSION] = g_param_spec_boolean ("compression", NULL,
      "Accept permessage-deflate", FALSE,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:metrics-token:
   *
   * When set, GET /metrics needs `Authorization: Bearer TOKEN`.
   */
  properties[PROP_METRICS_TOKEN] = g_param_spec_string ("metrics-token", NULL,
      "Bearer token /metrics requires (NULL: none)", NULL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:web-dir:
   *
   * The directory of the demo page: its files (`index.html`, `demo.js`,
   * `demo.css`, `room-peer.js`) are served under `/demo/`, regular files
   * only (no symbolic link, FIFO or device). %NULL serves no page.
   */
  properties[PROP_WEB_DIR] = g_param_spec_string ("web-dir", NULL,
      "Directory of the /demo page's files (NULL: no page)", NULL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:pusher-js-dir:
   *
   * The directory holding pusher-js's browser build, `pusher.min.js`
   * (`node_modules/pusher-js/dist/web`), served as `/demo/pusher.min.js`.
   */
  properties[PROP_PUSHER_JS_DIR] = g_param_spec_string ("pusher-js-dir",
      NULL, "Directory of pusher-js's pusher.min.js, for the /demo page",
      NULL, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:listen-address:
   *
   * The address legba_server_start() listens on.
   */
  properties[PROP_LISTEN_ADDRESS] = g_param_spec_string ("listen-address",
      NULL, "Address legba_server_start() listens on", DEFAULT_LISTEN_ADDRESS,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:listen-port:
   *
   * The port legba_server_start() listens on; 0 picks a free one.
   */
  properties[PROP_LISTEN_PORT] = g_param_spec_uint ("listen-port", NULL,
      "Port legba_server_start() listens on (0: any free)", 0, 65535,
      DEFAULT_LISTEN_PORT, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:metrics-address:
   *
   * When set, legba_server_start() serves /metrics on a listener of its own
   * at this address (see legba_server_listen_metrics()).
   */
  properties[PROP_METRICS_ADDRESS] = g_param_spec_string ("metrics-address",
      NULL, "Address of a separate /metrics listener (NULL: none)", NULL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:metrics-port:
   *
   * The port of the separate /metrics listener; 0 picks a free one.
   */
  properties[PROP_METRICS_PORT] = g_param_spec_uint ("metrics-port", NULL,
      "Port of the separate /metrics listener (0: any free)", 0, 65535,
      DEFAULT_METRICS_PORT, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:redis-url:
   *
   * With a Redis URL (`redis://[:PASSWORD@]HOST[:PORT][/DB]` or
   * `unix://[:PASSWORD@]/PATH[?db=N]`), this server is one instance of a
   * cluster sharing its rooms through Redis (docs/scale-out.md): events,
   * presence and channel counts reach every instance. Set before listening.
   */
  properties[PROP_REDIS_URL] = g_param_spec_string ("redis-url", NULL,
      "Redis shared by the instances of a cluster (NULL: one instance)",
      NULL, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:instance-id:
   *
   * This instance's id in the cluster, unique among the instances sharing
   * the Redis key prefix (1 to 64 of A-Z a-z 0-9 . _ - :). %NULL: the host
   * name and process id, chosen when listening starts.
   */
  properties[PROP_INSTANCE_ID] = g_param_spec_string ("instance-id", NULL,
      "Id of this instance in the cluster (NULL: host name and pid)", NULL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:redis-prefix:
   *
   * Prefix of every Redis key the cluster uses, so that several clusters
   * can share one Redis.
   */
  properties[PROP_REDIS_PREFIX] = g_param_spec_string ("redis-prefix", NULL,
      "Prefix of the cluster's Redis keys", LEGBA_RELAY_DEFAULT_PREFIX,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:redis-retention:
   *
   * Entries the cluster's Redis stream keeps (approximately, XADD MAXLEN
   * ~): an instance away from Redis catches up on at most this many.
   */
  properties[PROP_REDIS_RETENTION] = g_param_spec_uint ("redis-retention",
      NULL, "Entries kept in the cluster's Redis stream",
      LEGBA_RELAY_MIN_RETENTION, G_MAXINT, LEGBA_RELAY_DEFAULT_RETENTION,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:redis-instance-ttl:
   *
   * Seconds after which an instance that stopped renewing its heartbeat in
   * Redis is taken for dead: the others remove its members.
   */
  properties[PROP_REDIS_INSTANCE_TTL] =
      g_param_spec_uint ("redis-instance-ttl", NULL,
      "Seconds before a silent instance's members are removed",
      LEGBA_RELAY_MIN_INSTANCE_TTL, 3600, LEGBA_RELAY_DEFAULT_INSTANCE_TTL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:turn-urls:
   *
   * TURN servers (`turn:HOST[:PORT][?transport=udp|tcp]`, `turns:...`, as
   * browsers take them) sharing #LegbaServer:turn-secret with this server
   * (coturn's `use-auth-secret`). With both set, every member of a room
   * channel (`presence-legba.ROOM`) gets time-limited credentials for them
   * when its subscription succeeds, and so does every answer of the
   * join-token endpoint. A list with an invalid URL is refused whole, with
   * a warning.
   */
  properties[PROP_TURN_URLS] = g_param_spec_boxed ("turn-urls", NULL,
      "TURN servers room members get credentials for (NULL: none)",
      G_TYPE_STRV, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:turn-secret:
   *
   * The secret shared with the TURN servers (coturn's
   * `static-auth-secret`): a member's credential is base64 (HMAC-SHA1
   * (secret, "EXPIRY:PARTICIPANT_ID")).
   */
  properties[PROP_TURN_SECRET] = g_param_spec_string ("turn-secret", NULL,
      "Secret shared with the TURN servers (NULL: no credentials)", NULL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:turn-ttl:
   *
   * Seconds the TURN credentials handed out stay valid. A relayed
   * connection needs them for as long as it lasts: the TURN server checks
   * them again whenever the allocation is refreshed.
   */
  properties[PROP_TURN_TTL] = g_param_spec_uint ("turn-ttl", NULL,
      "Seconds TURN credentials stay valid", 60, G_MAXINT,
      LEGBA_TURN_DEFAULT_TTL, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:connection-count:
   *
   * WebSocket sockets open, closing ones included; notified on change.
   */
  properties[PROP_CONNECTION_COUNT] = g_param_spec_uint ("connection-count",
      NULL, "WebSocket sockets open", 0, G_MAXUINT, 0,
      G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);

  g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
legba_server_init (LegbaServer * self)
{
  self->context = g_main_context_ref_thread_default ();
  legba_limits_init_defaults (&self->limits);
  self->hub = legba_hub_new (&legba_server_transport, self);
  legba_hub_set_limits (self->hub, &self->limits);
  self->max_request_bytes = DEFAULT_MAX_REQUEST_BYTES;
  self->handshake_timeout = DEFAULT_HANDSHAKE_TIMEOUT;
  self->max_pending_connections = DEFAULT_MAX_PENDING_CONNECTIONS;
  self->max_pending_per_address = DEFAULT_MAX_PENDING_PER_ADDRESS;
  self->reserve_fd = -1;
  self->listen_address = g_strdup (DEFAULT_LISTEN_ADDRESS);
  self->listen_port = DEFAULT_LISTEN_PORT;
  self->metrics_port = DEFAULT_METRICS_PORT;
  self->redis_prefix = g_strdup (LEGBA_RELAY_DEFAULT_PREFIX);
  self->redis_retention = LEGBA_RELAY_DEFAULT_RETENTION;
  self->redis_instance_ttl = LEGBA_RELAY_DEFAULT_INSTANCE_TTL;
  self->turn_ttl = LEGBA_TURN_DEFAULT_TTL;
  self->pending_apps = g_ptr_array_new_with_free_func (legba_pending_app_free);
  self->conns = g_hash_table_new_full (NULL, NULL, legba_server_conn_free,
      NULL);
  self->poll_group = legba_poll_group_new (self->context, POLL_BUCKET_SIZE);
  self->ws_handlers = g_ptr_array_new_with_free_func (legba_ws_handlers_free);
  self->metrics = legba_metrics_new ();
  self->extension_types =
      g_ptr_array_new_with_free_func ((GDestroyNotify) g_type_class_unref);
  g_ptr_array_add (self->extension_types,
      g_type_class_ref (LEGBA_TYPE_WS_DEFLATE));

  self->soup = legba_server_new_soup (self);
  self->acceptor = legba_acceptor_new (self, self->soup);
  soup_server_add_handler (self->soup, "/app/", legba_server_handle_app, self,
      NULL);
  soup_server_add_handler (self->soup, "/apps/", legba_server_handle_apps,
      self, NULL);

  self->tick = g_timeout_source_new_seconds (1);
  g_source_set_callback (self->tick, legba_server_tick, self, NULL);
  g_source_attach (self->tick, self->context);
}

/**
 * legba_server_new:
 *
 * Creates a server with the default limits and no app, on the
 * thread-default main context.
 *
 * Returns: (transfer full): a new #LegbaServer
 */
LegbaServer *
legba_server_new (void)
{
  return g_object_new (LEGBA_TYPE_SERVER, NULL);
}

LegbaHub *
legba_server_get_hub (LegbaServer * server)
{
  g_return_val_if_fail (LEGBA_IS_SERVER (server), NULL);

  return server->hub;
}
