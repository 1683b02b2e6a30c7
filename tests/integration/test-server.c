/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaServer in-process on 127.0.0.1 port 0, driven over real sockets:
 * libsoup's WebSocket client for well-behaved clients, raw TCP sockets for
 * the ones that misbehave (oversize frames, a reader that never drains, a
 * client stopped with SIGSTOP), and signed HTTP requests for the API. The
 * server and the clients share this thread's main context, so every wait
 * runs it until a condition holds, with a timeout and a reason.
 */
#include <legba/server/server.h>

#include <legba/common/legba-auth.h>
#include <legba/server/legba-server-private.h>
#include "legba-test.h"

#include <glib-unix.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define APP_ID "1"
#define APP_KEY "app-key"
#define APP_SECRET "app-secret"
#define WS_PATH "/app/" APP_KEY "?protocol=7"
#define WAIT_S 10

/* ---- Waiting ---- */

static gboolean
on_wait_timeout (gpointer user_data)
{
  *(gboolean *) user_data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Runs the main context until expr holds (evaluated once per wake-up, so
 * it may take what it finds); fails the test after timeout_s. */
#define WAIT_UNTIL(expr, timeout_s, reason) G_STMT_START { \
    gboolean timed_out_ = FALSE, held_; \
    guint timer_ = g_timeout_add_seconds ((timeout_s), on_wait_timeout, \
        &timed_out_); \
    while (!(held_ = (expr)) && !timed_out_) \
      g_main_context_iteration (NULL, TRUE); \
    if (!timed_out_) \
      g_source_remove (timer_); \
    if (!held_) \
      g_error ("timed out after %d s waiting for %s", (timeout_s), \
          (reason)); \
  } G_STMT_END

/* Runs whatever is ready, without blocking. */
static void
drain_main_context (void)
{
  while (g_main_context_iteration (NULL, FALSE));
}

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
  g_assert_no_error (error);
  g_assert_true (legba_server_listen (server, "127.0.0.1", 0, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (legba_server_get_port (server), >, 0);
  return server;
}

static void
server_free (LegbaServer * server)
{
  legba_server_shutdown (server);
  WAIT_UNTIL (legba_server_get_connection_count (server) == 0, WAIT_S,
      "every socket to close on shutdown");
  g_object_unref (server);
  drain_main_context ();
}

static LegbaHubApp *
server_app (LegbaServer * server)
{
  return legba_hub_find_app_by_id (legba_server_get_hub (server), APP_ID);
}

static void
server_publish (LegbaServer * server, const char *channel, const char *event,
    const char *data)
{
  const char *channels[] = { channel, NULL };
  g_autoptr (GError) error = NULL;

  g_assert_true (legba_hub_publish (legba_server_get_hub (server),
          server_app (server), channels, event, data, NULL, &error));
  g_assert_no_error (error);
}

/* ---- Frames ---- */

static JsonObject *
parse_object (const char *text, gsize len)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonNode *root;

  if (!json_parser_load_from_data (parser, text, len, NULL))
    return NULL;
  root = json_parser_get_root (parser);
  if (!JSON_NODE_HOLDS_OBJECT (root))
    return NULL;
  return json_object_ref (json_node_get_object (root));
}

/* A frame's data, sent as an object or as a string holding one. */
static JsonObject *
frame_data (JsonObject * frame)
{
  JsonNode *data = json_object_get_member (frame, "data");

  g_assert_nonnull (data);
  if (JSON_NODE_HOLDS_OBJECT (data))
    return json_object_ref (json_node_get_object (data));
  g_assert_true (JSON_NODE_HOLDS_VALUE (data));
  return parse_object (json_node_get_string (data), -1);
}

static const char *
frame_event (JsonObject * frame)
{
  return json_object_get_string_member_with_default (frame, "event", "");
}

static gint64
frame_error_code (JsonObject * frame)
{
  g_autoptr (JsonObject) data = frame_data (frame);

  g_assert_cmpstr (frame_event (frame), ==, "pusher:error");
  return json_object_get_int_member_with_default (data, "code", -1);
}

/* ---- libsoup WebSocket clients ---- */

typedef struct
{
  SoupWebsocketConnection *ws;
  GError *error;
  gboolean done;
  GPtrArray *frames;            /* JsonObject, in arrival order */
  guint next;                   /* first frame not yet taken */
  gboolean closed;
  gushort close_code;
  char *socket_id;
} WsClient;

static void
ws_on_message (SoupWebsocketConnection * ws, gint type, GBytes * message,
    gpointer user_data)
{
  WsClient *client = user_data;
  gsize len;
  const char *text = g_bytes_get_data (message, &len);
  JsonObject *frame = parse_object (text, len);

  g_assert_nonnull (frame);
  g_ptr_array_add (client->frames, frame);
  /* As pusher-js does: answer the server's pings. */
  if (g_str_equal (frame_event (frame), "pusher:ping"))
    soup_websocket_connection_send_text (ws,
        "{\"event\":\"pusher:pong\",\"data\":{}}");
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

/* Connects to path (with its query); NULL and error set when the
 * handshake fails. */
static WsClient *
ws_client_try (SoupSession * session, const char *base, const char *path,
    const char *origin)
{
  g_autoptr (SoupSession) own = session ? g_object_ref (session) :
      soup_session_new ();
  g_autofree char *url = g_strconcat (base, path, NULL);
  g_autoptr (SoupMessage) msg = soup_message_new ("GET", url);
  WsClient *client = g_new0 (WsClient, 1);

  client->frames = g_ptr_array_new_with_free_func ((GDestroyNotify)
      json_object_unref);
  soup_session_websocket_connect_async (own, msg, origin, NULL,
      G_PRIORITY_DEFAULT, NULL, ws_on_connected, client);
  WAIT_UNTIL (client->done, WAIT_S, "the WebSocket handshake");
  return client;
}

static char *
ws_base (LegbaServer * server)
{
  return g_strdup_printf ("ws://127.0.0.1:%u", legba_server_get_port (server));
}

/* Waits for the next frame with this event, skipping others; returns it
 * (owned by the client). */
static JsonObject *
ws_client_next (WsClient * client, const char *event)
{
  for (;;) {
    while (client->next < client->frames->len) {
      JsonObject *frame = client->frames->pdata[client->next++];

      if (g_str_equal (frame_event (frame), event))
        return frame;
    }
    WAIT_UNTIL (client->next < client->frames->len || client->closed, WAIT_S,
        event);
    if (client->next >= client->frames->len)
      g_error ("closed (code %u) while waiting for %s", client->close_code,
          event);
  }
}

static WsClient *
ws_client_new_full (SoupSession * session, const char *base)
{
  WsClient *client = ws_client_try (session, base, WS_PATH, NULL);
  g_autoptr (JsonObject) data = NULL;

  g_assert_no_error (client->error);
  data = frame_data (ws_client_next (client, "pusher:connection_established"));
  client->socket_id = g_strdup (json_object_get_string_member (data,
          "socket_id"));
  return client;
}

static WsClient *
ws_client_new (LegbaServer * server)
{
  g_autofree char *base = ws_base (server);

  return ws_client_new_full (NULL, base);
}

static void
ws_client_send (WsClient * client, const char *text)
{
  soup_websocket_connection_send_text (client->ws, text);
}

static void
ws_client_subscribe (WsClient * client, const char *channel)
{
  g_autofree char *frame = NULL;
  JsonObject *ok;

  if (g_str_has_prefix (channel, "private-")) {
    g_autofree char *auth = legba_auth_channel_sign (APP_KEY, APP_SECRET,
        client->socket_id, channel, NULL);

    frame = g_strdup_printf ("{\"event\":\"pusher:subscribe\",\"data\":"
        "{\"channel\":\"%s\",\"auth\":\"%s\"}}", channel, auth);
  } else {
    frame = g_strdup_printf ("{\"event\":\"pusher:subscribe\",\"data\":"
        "{\"channel\":\"%s\"}}", channel);
  }
  ws_client_send (client, frame);
  ok = ws_client_next (client, "pusher_internal:subscription_succeeded");
  g_assert_cmpstr (json_object_get_string_member (ok, "channel"), ==, channel);
}

/* A ping answered proves the socket is still served. */
static void
ws_client_assert_alive (WsClient * client)
{
  g_assert_false (client->closed);
  ws_client_send (client, "{\"event\":\"pusher:ping\",\"data\":{}}");
  ws_client_next (client, "pusher:pong");
}

static void
ws_client_free (WsClient * client)
{
  if (client->ws != NULL) {
    if (soup_websocket_connection_get_state (client->ws) ==
        SOUP_WEBSOCKET_STATE_OPEN)
      soup_websocket_connection_close (client->ws, SOUP_WEBSOCKET_CLOSE_NORMAL,
          NULL);
    WAIT_UNTIL (client->closed, WAIT_S, "the client socket to close");
    g_signal_handlers_disconnect_by_data (client->ws, client);
    g_object_unref (client->ws);
  }
  g_clear_error (&client->error);
  g_ptr_array_unref (client->frames);
  g_free (client->socket_id);
  g_free (client);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (WsClient, ws_client_free);

/* ---- Raw TCP clients ---- */

typedef struct
{
  GSocket *socket;
  GSource *source;
  GByteArray *in;
  gboolean eof;
  GError *error;                /* the read that ended the stream */
} RawClient;

static gboolean
raw_on_readable (GSocket * socket, GIOCondition condition, gpointer user_data)
{
  RawClient *raw = user_data;
  char buffer[16384];

  for (;;) {
    g_autoptr (GError) error = NULL;
    gssize n = g_socket_receive_with_blocking (socket, buffer, sizeof buffer,
        FALSE, NULL, &error);

    if (n > 0) {
      g_byte_array_append (raw->in, (guint8 *) buffer, n);
      continue;
    }
    if (n < 0 && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
      return G_SOURCE_CONTINUE;
    raw->eof = TRUE;
    raw->error = g_steal_pointer (&error);
    g_clear_pointer (&raw->source, g_source_unref);
    return G_SOURCE_REMOVE;
  }
}

static void
raw_start_reading (RawClient * raw)
{
  raw->source = g_socket_create_source (raw->socket, G_IO_IN | G_IO_HUP |
      G_IO_ERR, NULL);
  g_source_set_callback (raw->source, (GSourceFunc) G_CALLBACK
      (raw_on_readable), raw, NULL);
  g_source_attach (raw->source, NULL);
}

static void
raw_stop_reading (RawClient * raw)
{
  if (raw->source == NULL)
    return;
  g_source_destroy (raw->source);
  g_clear_pointer (&raw->source, g_source_unref);
}

/* Sends all of data, running the main context while the socket is full;
 * FALSE when the server closed the connection first. */
static gboolean
raw_write (RawClient * raw, const void *data, gsize len)
{
  const guint8 *p = data;
  gint64 deadline = g_get_monotonic_time () + WAIT_S * G_USEC_PER_SEC;

  while (len > 0) {
    g_autoptr (GError) error = NULL;
    gssize n = g_socket_send_with_blocking (raw->socket, (const char *) p, len,
        FALSE, NULL, &error);

    if (n > 0) {
      p += n;
      len -= n;
    } else if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK)) {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_main_context_iteration (NULL, FALSE);
    } else {
      return FALSE;
    }
  }
  return TRUE;
}

static RawClient *
raw_connect (LegbaServer * server, int rcvbuf)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GInetAddress) loopback =
      g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) address =
      g_inet_socket_address_new (loopback, legba_server_get_port (server));
  RawClient *raw = g_new0 (RawClient, 1);

  raw->in = g_byte_array_new ();
  raw->socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM,
      G_SOCKET_PROTOCOL_TCP, &error);
  g_assert_no_error (error);
  if (rcvbuf > 0)
    g_assert_true (g_socket_set_option (raw->socket, SOL_SOCKET, SO_RCVBUF,
            rcvbuf, &error));
  /* The kernel completes the TCP handshake from the listen backlog. */
  g_assert_true (g_socket_connect (raw->socket, address, NULL, &error));
  g_assert_no_error (error);
  g_socket_set_blocking (raw->socket, FALSE);
  return raw;
}

static const char *
raw_find (RawClient * raw, const char *needle)
{
  if (raw->in->len == 0)
    return NULL;
  return g_strstr_len ((const char *) raw->in->data, raw->in->len, needle);
}

/* Upgrades to WebSocket at path (RFC 6455 §4.1); returns the response
 * status line. */
static char *
raw_handshake_then (RawClient * raw, const char *path, const char *origin,
    GByteArray * after)
{
  g_autofree char *request = g_strdup_printf ("GET %s HTTP/1.1\r\n"
      "Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
      "Sec-WebSocket-Version: 13\r\n%s%s%s\r\n", path,
      origin ? "Origin: " : "", origin ? origin : "", origin ? "\r\n" : "");
  const char *end;
  char *status;

  g_autoptr (GByteArray) wire = g_byte_array_new ();

  /* Whatever follows the request goes in the same write. */
  g_byte_array_append (wire, (const guint8 *) request, strlen (request));
  if (after != NULL)
    g_byte_array_append (wire, after->data, after->len);
  g_assert_true (raw_write (raw, wire->data, wire->len));
  raw_start_reading (raw);
  WAIT_UNTIL (raw_find (raw, "\r\n\r\n") != NULL || raw->eof, WAIT_S,
      "the handshake response");
  end = raw_find (raw, "\r\n\r\n");
  g_assert_nonnull (end);
  status = g_strndup ((const char *) raw->in->data,
      strcspn ((const char *) raw->in->data, "\r"));
  g_byte_array_remove_range (raw->in, 0,
      end + 4 - (const char *) raw->in->data);
  return status;
}

static char *
raw_handshake (RawClient * raw, const char *path, const char *origin)
{
  return raw_handshake_then (raw, path, origin, NULL);
}

/* Appends a client frame (RFC 6455 §5.2): masked, as clients must. */
static void
raw_frame_append (GByteArray * frame, guint8 first, const void *payload,
    gsize len)
{
  static const guint8 mask[4] = { 0x37, 0xfa, 0x21, 0x3d };
  guint8 header[10];
  gsize header_len, i;

  header[0] = first;
  if (len < 126) {
    header[1] = 0x80 | len;
    header_len = 2;
  } else if (len < 65536) {
    header[1] = 0x80 | 126;
    header[2] = len >> 8;
    header[3] = len & 0xff;
    header_len = 4;
  } else {
    header[1] = 0x80 | 127;
    for (i = 0; i < 8; i++)
      header[2 + i] = ((guint64) len >> (8 * (7 - i))) & 0xff;
    header_len = 10;
  }
  g_byte_array_append (frame, header, header_len);
  g_byte_array_append (frame, mask, 4);
  for (i = 0; i < len; i++) {
    guint8 b = ((const guint8 *) payload)[i] ^ mask[i % 4];

    g_byte_array_append (frame, &b, 1);
  }
}

static gboolean
raw_send_frame (RawClient * raw, guint8 first, const void *payload, gsize len)
{
  g_autoptr (GByteArray) frame = g_byte_array_sized_new (len + 14);

  raw_frame_append (frame, first, payload, len);
  return raw_write (raw, frame->data, frame->len);
}

/* Takes one whole server frame off the input, if there is one. */
static gboolean
raw_take_frame (RawClient * raw, guint8 * opcode, GBytes ** payload)
{
  const guint8 *d = raw->in->data;
  gsize at = 2, len;

  if (raw->in->len < 2)
    return FALSE;
  len = d[1] & 0x7f;
  if (len == 126) {
    if (raw->in->len < 4)
      return FALSE;
    len = (d[2] << 8) | d[3];
    at = 4;
  } else if (len == 127) {
    guint i;

    if (raw->in->len < 10)
      return FALSE;
    for (len = 0, i = 2; i < 10; i++)
      len = (len << 8) | d[i];
    at = 10;
  }
  if (raw->in->len < at + len)
    return FALSE;
  *opcode = d[0] & 0x0f;
  *payload = g_bytes_new (d + at, len);
  g_byte_array_remove_range (raw->in, 0, at + len);
  return TRUE;
}

static GBytes *
raw_next_frame (RawClient * raw, guint8 expected_opcode)
{
  GBytes *payload = NULL;
  guint8 opcode = 0;

  WAIT_UNTIL (raw_take_frame (raw, &opcode, &payload) || raw->eof, WAIT_S,
      "a frame from the server");
  if (payload == NULL && !raw_take_frame (raw, &opcode, &payload))
    g_error ("the server closed the connection instead of sending a frame");
  g_assert_cmpuint (opcode, ==, expected_opcode);
  return payload;
}

static JsonObject *
raw_next_json (RawClient * raw)
{
  g_autoptr (GBytes) payload = raw_next_frame (raw, 0x1);
  gsize len;
  const char *text = g_bytes_get_data (payload, &len);
  JsonObject *frame = parse_object (text, len);

  g_assert_nonnull (frame);
  return frame;
}

/* Reads the close frame (RFC 6455 §5.5.1) and returns its code. */
static guint
raw_next_close (RawClient * raw)
{
  g_autoptr (GBytes) payload = raw_next_frame (raw, 0x8);
  gsize len;
  const guint8 *d = g_bytes_get_data (payload, &len);

  g_assert_cmpuint (len, >=, 2);
  return (d[0] << 8) | d[1];
}

static RawClient *
raw_client_new (LegbaServer * server, int rcvbuf)
{
  RawClient *raw = raw_connect (server, rcvbuf);
  g_autofree char *status = raw_handshake (raw, WS_PATH, NULL);
  g_autoptr (JsonObject) established = NULL;

  g_assert_cmpstr (status, ==, "HTTP/1.1 101 Switching Protocols");
  established = raw_next_json (raw);
  g_assert_cmpstr (frame_event (established), ==,
      "pusher:connection_established");
  return raw;
}

static void
raw_client_free (RawClient * raw)
{
  raw_stop_reading (raw);
  g_socket_close (raw->socket, NULL);
  g_object_unref (raw->socket);
  g_byte_array_unref (raw->in);
  g_clear_error (&raw->error);
  g_free (raw);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (RawClient, raw_client_free);

/* ---- HTTP ---- */

typedef struct
{
  gboolean done;
  GBytes *body;
  GError *error;
} HttpResult;

static void
http_on_read (GObject * source, GAsyncResult * result, gpointer user_data)
{
  HttpResult *http = user_data;

  http->body = soup_session_send_and_read_finish (SOUP_SESSION (source),
      result, &http->error);
  http->done = TRUE;
}

/* Sends msg and returns the status; *body (if given) gets the body. */
static guint
http_send (SoupSession * session, SoupMessage * msg, char **body)
{
  HttpResult http = { 0, };
  gsize len;
  const char *data;

  soup_session_send_and_read_async (session, msg, G_PRIORITY_DEFAULT, NULL,
      http_on_read, &http);
  WAIT_UNTIL (http.done, WAIT_S, "an HTTP response");
  g_assert_no_error (http.error);
  data = g_bytes_get_data (http.body, &len);
  if (body != NULL)
    *body = g_strndup (data, len);
  g_bytes_unref (http.body);
  return soup_message_get_status (msg);
}

static char *
http_url (LegbaServer * server, const char *path)
{
  return g_strdup_printf ("http://127.0.0.1:%u%s",
      legba_server_get_port (server), path);
}

static guint
http_get (SoupSession * session, const char *url, const char *authorization,
    char **body)
{
  g_autoptr (SoupMessage) msg = soup_message_new ("GET", url);

  if (authorization != NULL)
    soup_message_headers_replace (soup_message_get_request_headers (msg),
        "Authorization", authorization);
  return http_send (session, msg, body);
}

typedef enum
{
  SIGN_OK,
  SIGN_FORGED,
  SIGN_STALE,
  SIGN_WRONG_MD5,
} SignMode;

/* A Pusher HTTP API request, signed per auth_version 1.0 (or not quite). */
static SoupMessage *
api_message (LegbaServer * server, const char *method, const char *path,
    const char *body, SignMode mode)
{
  g_autoptr (GHashTable) params = g_hash_table_new (g_str_hash, g_str_equal);
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;
  g_autofree char *timestamp = g_strdup_printf ("%" G_GINT64_FORMAT,
      mode == SIGN_STALE ? now - 3600 : now);
  g_autofree char *md5 = g_compute_checksum_for_string (G_CHECKSUM_MD5,
      mode == SIGN_WRONG_MD5 ? "something else" : body ? body : "", -1);
  g_autofree char *to_sign = NULL;
  g_autofree char *signature = NULL;
  g_autofree char *url = NULL;
  SoupMessage *msg;

  g_hash_table_insert (params, "auth_key", APP_KEY);
  g_hash_table_insert (params, "auth_timestamp", timestamp);
  g_hash_table_insert (params, "auth_version", "1.0");
  if (body != NULL)
    g_hash_table_insert (params, "body_md5", md5);
  to_sign = legba_auth_http_string_to_sign (method, path, params);
  signature = legba_auth_hmac_hex (mode == SIGN_FORGED ? "not-the-secret" :
      APP_SECRET, to_sign, -1);

  url = g_strdup_printf ("http://127.0.0.1:%u%s?auth_key=%s&auth_timestamp=%s"
      "&auth_version=1.0%s%s&auth_signature=%s",
      legba_server_get_port (server), path, APP_KEY, timestamp,
      body ? "&body_md5=" : "", body ? md5 : "", signature);
  msg = soup_message_new (method, url);
  if (body != NULL) {
    g_autoptr (GBytes) bytes = g_bytes_new (body, strlen (body));

    soup_message_set_request_body_from_bytes (msg, "application/json", bytes);
  }
  return msg;
}

/* ---- Connecting ---- */

static void
test_connection_established (void)
{
  LegbaServer *server = server_new ("activity-timeout", 42, NULL);
  g_autofree char *base = ws_base (server);
  g_autoptr (WsClient) client = ws_client_try (NULL, base, WS_PATH, NULL);
  g_autoptr (JsonObject) data = NULL;
  g_autoptr (GRegex) socket_id = g_regex_new ("^[0-9]+\\.[0-9]+$", 0, 0, NULL);
  JsonObject *frame;

  g_assert_no_error (client->error);
  frame = ws_client_next (client, "pusher:connection_established");
  g_assert_true (JSON_NODE_HOLDS_VALUE (json_object_get_member (frame,
              "data")));
  data = frame_data (frame);
  g_assert_true (g_regex_match (socket_id, json_object_get_string_member
          (data, "socket_id"), 0, NULL));
  g_assert_cmpint (json_object_get_int_member (data, "activity_timeout"), ==,
      42);
  g_assert_cmpuint (legba_server_get_connection_count (server), ==, 1);

  g_clear_pointer (&client, ws_client_free);
  WAIT_UNTIL (legba_server_get_connection_count (server) == 0, WAIT_S,
      "the server to see the client leave");
  server_free (server);
}

static void
test_refused_key (void)
{
  LegbaServer *server = server_new (NULL);
  g_autofree char *base = ws_base (server);
  g_autoptr (WsClient) client = ws_client_try (NULL, base,
      "/app/no-such-key?protocol=7", NULL);

  g_assert_no_error (client->error);
  g_assert_cmpint (frame_error_code (ws_client_next (client, "pusher:error")),
      ==, 4001);
  WAIT_UNTIL (client->closed, WAIT_S, "the refused socket to close");
  g_assert_cmpuint (client->close_code, ==, 4001);

  g_clear_pointer (&client, ws_client_free);
  server_free (server);
}

static void
test_missing_protocol (void)
{
  LegbaServer *server = server_new (NULL);
  g_autofree char *base = ws_base (server);
  g_autoptr (WsClient) client = ws_client_try (NULL, base, "/app/" APP_KEY,
      NULL);

  g_assert_no_error (client->error);
  g_assert_cmpint (frame_error_code (ws_client_next (client, "pusher:error")),
      ==, 4008);
  WAIT_UNTIL (client->closed, WAIT_S, "the refused socket to close");
  g_assert_cmpuint (client->close_code, ==, 4008);

  g_clear_pointer (&client, ws_client_free);
  server_free (server);
}

/* permessage-deflate (RFC 7692) only when the server is asked to. */
static void
test_compression (void)
{
  LegbaServer *plain = server_new (NULL);
  LegbaServer *deflate = server_new ("compression", TRUE, NULL);
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autofree char *plain_base = ws_base (plain);
  g_autofree char *deflate_base = ws_base (deflate);
  g_autoptr (WsClient) a = NULL;
  g_autoptr (WsClient) b = NULL;
  g_autofree char *data = g_strnfill (4000, 'c');

  /* The client offers permessage-deflate to both. */
  soup_session_add_feature_by_type (session,
      SOUP_TYPE_WEBSOCKET_EXTENSION_MANAGER);
  a = ws_client_new_full (session, plain_base);
  b = ws_client_new_full (session, deflate_base);
  g_assert_null (soup_websocket_connection_get_extensions (a->ws));
  g_assert_nonnull (soup_websocket_connection_get_extensions (b->ws));

  ws_client_subscribe (b, "news");
  server_publish (deflate, "news", "blob", data);
  ws_client_next (b, "blob");
  ws_client_assert_alive (b);

  g_clear_pointer (&a, ws_client_free);
  g_clear_pointer (&b, ws_client_free);
  server_free (plain);
  server_free (deflate);
}

static void
test_not_websocket (void)
{
  LegbaServer *server = server_new (NULL);
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autofree char *url = http_url (server, WS_PATH);
  g_autofree char *other = http_url (server, "/nothing/here");

  g_assert_cmpuint (http_get (session, url, NULL, NULL), ==,
      SOUP_STATUS_BAD_REQUEST);
  g_assert_cmpuint (http_get (session, other, NULL, NULL), ==,
      SOUP_STATUS_NOT_FOUND);
  g_assert_cmpuint (legba_server_get_connection_count (server), ==, 0);
  server_free (server);
}

/* ---- Bad input ---- */

static void
test_bad_frames (void)
{
  static const char *const frames[] = {
    "this is not JSON",
    "{\"event\": 5, \"data\": {}}",
    "{\"event\": \"no-such-event\", \"data\": {}}",
    "{\"event\": \"pusher:subscribe\"}",
    "[\"pusher:ping\"]",
  };
  LegbaServer *server = server_new (NULL);
  g_autoptr (WsClient) bad = ws_client_new (server);
  g_autoptr (WsClient) neighbour = ws_client_new (server);
  guint i;

  ws_client_subscribe (neighbour, "news");
  for (i = 0; i < G_N_ELEMENTS (frames); i++) {
    g_test_message ("frame: %s", frames[i]);
    ws_client_send (bad, frames[i]);
    g_assert_cmpint (frame_error_code (ws_client_next (bad, "pusher:error")),
        ==, 4300);
  }
  soup_websocket_connection_send_binary (bad->ws, "\x01\x02", 2);
  g_assert_cmpint (frame_error_code (ws_client_next (bad, "pusher:error")),
      ==, 4300);

  /* Errors, not closes: both sockets are still served. */
  ws_client_assert_alive (bad);
  server_publish (server, "news", "headline", "{\"n\":1}");
  g_assert_cmpstr (json_object_get_string_member (ws_client_next (neighbour,
              "headline"), "channel"), ==, "news");
  ws_client_assert_alive (neighbour);

  g_clear_pointer (&bad, ws_client_free);
  g_clear_pointer (&neighbour, ws_client_free);
  server_free (server);
}

static void
raw_expect_pongs (RawClient * raw, guint n)
{
  guint i;

  for (i = 0; i < n; i++) {
    g_autoptr (JsonObject) frame = raw_next_json (raw);

    g_assert_cmpstr (frame_event (frame), ==, "pusher:pong");
  }
}

/* Input as the wire brings it: frames in the same segment as the
 * handshake (read ahead by the HTTP layer, more than one read's worth,
 * the last one cut short), many frames in one write, and frames cut
 * across writes. Every frame is answered, in order. */
static void
test_input_batches (void)
{
  LegbaServer *server = server_new (NULL);
  g_autoptr (WsClient) other = ws_client_new (server);
  g_autoptr (RawClient) raw = raw_connect (server, 0);
  g_autoptr (GByteArray) first = g_byte_array_new ();
  g_autoptr (GByteArray) batch = g_byte_array_new ();
  g_autoptr (JsonObject) established = NULL;
  g_autofree char *pad = g_strnfill (300, 'p');
  g_autofree char *ping =
      g_strdup_printf ("{\"event\":\"pusher:ping\",\"data\":{\"pad\":\"%s\"}}",
      pad);
  g_autofree char *status = NULL;
  gsize half;
  guint i;

  /* 20 frames of about 350 bytes: several reads, the last one short. */
  for (i = 0; i < 20; i++)
    raw_frame_append (batch, 0x81, ping, strlen (ping));

  /* 30 frames and a half (some 10.5 KB) right behind the request: more
   * than the HTTP layer reads ahead, which is more than one read. */
  half = batch->len / 2 + batch->len / 40;
  g_byte_array_append (first, batch->data, batch->len);
  g_byte_array_append (first, batch->data, half);
  status = raw_handshake_then (raw, WS_PATH, NULL, first);
  g_assert_cmpstr (status, ==, "HTTP/1.1 101 Switching Protocols");
  established = raw_next_json (raw);
  g_assert_cmpstr (frame_event (established), ==,
      "pusher:connection_established");
  raw_expect_pongs (raw, 20 + half / (batch->len / 20));
  g_assert_true (raw_write (raw, batch->data + half, batch->len - half));
  raw_expect_pongs (raw, 20 - half / (batch->len / 20));

  g_assert_true (raw_write (raw, batch->data, batch->len));
  raw_expect_pongs (raw, 20);

  /* The same bytes again, cut inside a frame: the server reads the first
   * part (its answers to the whole frames before the cut come back)
   * before the rest is written. */
  half = batch->len / 2;
  g_assert_true (raw_write (raw, batch->data, half));
  raw_expect_pongs (raw, half / (batch->len / 20));
  ws_client_assert_alive (other);
  g_assert_true (raw_write (raw, batch->data + half, batch->len - half));
  raw_expect_pongs (raw, 20 - half / (batch->len / 20));

  g_clear_pointer (&raw, raw_client_free);
  g_clear_pointer (&other, ws_client_free);
  server_free (server);
}

/* Appends a pusher:subscribe to a public channel as one text frame, or
 * as two fragments with a WebSocket ping between them (RFC 6455 §5.4). */
static void
raw_subscribe_append (GByteArray * wire, const char *channel,
    gboolean fragmented)
{
  g_autofree char *text =
      g_strdup_printf ("{\"event\":\"pusher:subscribe\",\"data\":"
      "{\"channel\":\"%s\"}}", channel);
  gsize len = strlen (text);

  if (!fragmented) {
    raw_frame_append (wire, 0x81, text, len);
    return;
  }
  raw_frame_append (wire, 0x01, text, len / 2);
  raw_frame_append (wire, 0x89, "in", 2);
  raw_frame_append (wire, 0x80, text + len / 2, len - len / 2);
}

static void
raw_expect_subscribed (RawClient * raw, const char *channel)
{
  g_autoptr (JsonObject) frame = raw_next_json (raw);

  g_assert_cmpstr (frame_event (frame), ==,
      "pusher_internal:subscription_succeeded");
  g_assert_cmpstr (json_object_get_string_member (frame, "channel"), ==,
      channel);
}

static void
raw_expect_ws_pong (RawClient * raw, const char *payload)
{
  g_autoptr (GBytes) pong = raw_next_frame (raw, 0xa);
  gsize len;
  const char *data = g_bytes_get_data (pong, &len);

  g_assert_cmpmem (data, len, payload, strlen (payload));
}

/* Writes wire in pieces of 1 to 7 bytes, letting the server read after
 * each: every frame is cut at most of its bytes. Each piece is sent at
 * once (no Nagle delay), so the server reads them one by one. FALSE when
 * the server closed the connection first. */
static gboolean
raw_write_in_pieces (RawClient * raw, GByteArray * wire)
{
  gsize at = 0, piece = 1;

  g_assert_true (g_socket_set_option (raw->socket, IPPROTO_TCP, TCP_NODELAY,
          1, NULL));

  while (at < wire->len) {
    gsize n = MIN (piece, wire->len - at);

    if (!raw_write (raw, wire->data + at, n))
      return FALSE;
    at += n;
    piece = piece % 7 + 1;
    while (g_main_context_iteration (NULL, FALSE));
  }
  return TRUE;
}

/* Whole text frames, WebSocket pings, and fragmented messages with a
 * ping inside, in one write and then cut into small pieces: each is
 * answered, in the order it came. */
static void
test_mixed_frames (void)
{
  LegbaServer *server = server_new (NULL);
  g_autoptr (RawClient) raw = raw_client_new (server, 0);
  guint round;

  for (round = 0; round < 2; round++) {
    g_autoptr (GByteArray) wire = g_byte_array_new ();
    char channel[32];
    guint i;

    for (i = 0; i < 6; i++) {
      g_snprintf (channel, sizeof channel, "mixed-%u-%u", round, i);
      raw_subscribe_append (wire, channel, i % 3 == 2);
      if (i % 2 == 1)
        raw_frame_append (wire, 0x89, "ws", 2);
    }
    if (round == 0)
      g_assert_true (raw_write (raw, wire->data, wire->len));
    else
      g_assert_true (raw_write_in_pieces (raw, wire));

    for (i = 0; i < 6; i++) {
      g_snprintf (channel, sizeof channel, "mixed-%u-%u", round, i);
      if (i % 3 == 2)
        raw_expect_ws_pong (raw, "in");
      raw_expect_subscribed (raw, channel);
      if (i % 2 == 1)
        raw_expect_ws_pong (raw, "ws");
    }
  }

  g_clear_pointer (&raw, raw_client_free);
  server_free (server);
}

/* What is not a whole, masked, valid text frame is refused as RFC 6455
 * says, after the frames before it were answered; nothing after a close
 * frame is. A length written in more bytes than it needs is refused too
 * (§5.2: "the minimal number of bytes MUST be used"). */
static void
test_invalid_frames (void)
{
  static const struct
  {
    guint8 first;
    const char *payload;
    gboolean unmasked;
    guint code;
    gboolean long_form;
  } cases[] = {
    {0x81, "{\"event\":\"pusher:ping\",\"data\":\"\xff\xfe\"}", FALSE, 1007},
    {0x81, "{\"event\":\"pusher:ping\",\"data\":{}}", TRUE, 1002},
    {0xc1, "{\"event\":\"pusher:ping\",\"data\":{}}", FALSE, 1002},
    {0x83, "{}", FALSE, 1002},
    {0x88, "\x03\xe8", FALSE, 1000},
    {0x81, "{\"event\":\"pusher:ping\",\"data\":{}}", FALSE, 1002, TRUE},
  };
  LegbaServer *server = server_new (NULL);
  g_autoptr (WsClient) neighbour = ws_client_new (server);
  guint i;

  for (i = 0; i < 2 * G_N_ELEMENTS (cases); i++) {
    g_autoptr (RawClient) raw = raw_client_new (server, 0);
    g_autoptr (GByteArray) wire = g_byte_array_new ();
    gboolean pieces = i >= G_N_ELEMENTS (cases);
    guint c = i % G_N_ELEMENTS (cases);
    gsize len = strlen (cases[c].payload);

    g_test_message ("first byte 0x%02x%s%s%s", cases[c].first,
        cases[c].unmasked ? ", unmasked" : "",
        cases[c].long_form ? ", 16-bit length" : "",
        pieces ? ", in pieces" : "");
    raw_subscribe_append (wire, "before", FALSE);
    if (cases[c].long_form) {
      /* Masked with a zero mask: the payload goes as it is. */
      guint8 header[8] = { cases[c].first, 0x80 | 126, 0, len };

      g_byte_array_append (wire, header, sizeof header);
      g_byte_array_append (wire, (const guint8 *) cases[c].payload, len);
    } else if (cases[c].unmasked) {
      guint8 header[2] = { cases[c].first, len };

      g_byte_array_append (wire, header, 2);
      g_byte_array_append (wire, (const guint8 *) cases[c].payload, len);
    } else {
      raw_frame_append (wire, cases[c].first, cases[c].payload, len);
    }
    raw_subscribe_append (wire, "after", FALSE);
    /* The server may close before the last piece. */
    if (pieces)
      raw_write_in_pieces (raw, wire);
    else
      g_assert_true (raw_write (raw, wire->data, wire->len));

    raw_expect_subscribed (raw, "before");
    g_assert_cmpuint (raw_next_close (raw), ==, cases[c].code);
    WAIT_UNTIL (raw->eof, WAIT_S, "the server to close the socket");
    g_assert_cmpuint (raw->in->len, ==, 0);
  }

  /* A data frame inside a fragmented message. */
  {
    g_autoptr (RawClient) raw = raw_client_new (server, 0);
    g_autoptr (GByteArray) wire = g_byte_array_new ();

    raw_frame_append (wire, 0x01, "{\"event\":", 9);
    raw_subscribe_append (wire, "inside", FALSE);
    raw_write_in_pieces (raw, wire);
    g_assert_cmpuint (raw_next_close (raw), ==, 1002);
    WAIT_UNTIL (raw->eof, WAIT_S, "the server to close the socket");
    g_assert_cmpuint (raw->in->len, ==, 0);
  }

  WAIT_UNTIL (legba_server_get_connection_count (server) == 1, WAIT_S,
      "the server to drop the refused sockets");
  ws_client_assert_alive (neighbour);
  g_clear_pointer (&neighbour, ws_client_free);
  server_free (server);
}

/* Over max-frame-bytes: close 1009, whether the message comes as one
 * frame or as fragments (RFC 6455 §5.4) that only add up to too much. */
static void
test_oversize_frames (void)
{
  LegbaServer *server = server_new ("max-frame-bytes", 1024, NULL);
  g_autoptr (WsClient) neighbour = ws_client_new (server);
  g_autoptr (RawClient) whole = raw_client_new (server, 0);
  g_autoptr (RawClient) pieces = raw_client_new (server, 0);
  g_autofree char *big = g_strnfill (4096, 'x');
  g_autofree char *piece = g_strnfill (600, 'y');

  ws_client_subscribe (neighbour, "news");

  raw_send_frame (whole, 0x81, big, strlen (big));
  g_assert_cmpuint (raw_next_close (whole), ==, 1009);
  WAIT_UNTIL (whole->eof, WAIT_S, "the oversize socket to close");

  g_assert_true (raw_send_frame (pieces, 0x01, piece, strlen (piece)));
  raw_send_frame (pieces, 0x00, piece, strlen (piece));
  g_assert_cmpuint (raw_next_close (pieces), ==, 1009);
  WAIT_UNTIL (pieces->eof, WAIT_S, "the fragmented socket to close");

  WAIT_UNTIL (legba_server_get_connection_count (server) == 1, WAIT_S,
      "the server to drop both oversize sockets");
  server_publish (server, "news", "headline", "{\"n\":2}");
  ws_client_next (neighbour, "headline");
  ws_client_assert_alive (neighbour);

  g_clear_pointer (&neighbour, ws_client_free);
  server_free (server);
}

/* A message at the bound is fine: the bound is inclusive. */
static void
test_frame_at_limit (void)
{
  LegbaServer *server = server_new ("max-frame-bytes", 1024, NULL);
  g_autoptr (RawClient) raw = raw_client_new (server, 0);
  const char *head = "{\"event\":\"pusher:ping\",\"data\":{\"pad\":\"";
  const char *tail = "\"}}";
  g_autofree char *padding = g_strnfill (1024 - strlen (head) - strlen (tail),
      'p');
  g_autofree char *frame = g_strconcat (head, padding, tail, NULL);
  g_autoptr (JsonObject) pong = NULL;

  g_assert_cmpuint (strlen (frame), ==, 1024);
  g_assert_true (raw_send_frame (raw, 0x81, frame, strlen (frame)));
  pong = raw_next_json (raw);
  g_assert_cmpstr (frame_event (pong), ==, "pusher:pong");

  g_clear_pointer (&raw, raw_client_free);
  server_free (server);
}

static void
test_client_event_flood (void)
{
  LegbaServer *server = server_new ("client-events-per-second", 5, NULL);
  g_autoptr (WsClient) flooder = ws_client_new (server);
  g_autoptr (WsClient) other = ws_client_new (server);
  guint i;

  ws_client_subscribe (flooder, "private-room");
  ws_client_subscribe (other, "private-room");
  for (i = 0; i < 50; i++)
    ws_client_send (flooder, "{\"event\":\"client-chat\","
        "\"channel\":\"private-room\",\"data\":{\"text\":\"hi\"}}");

  g_assert_cmpint (frame_error_code (ws_client_next (flooder,
              "pusher:error")), ==, 4301);
  /* The other socket got what was under the limit, and is served. */
  ws_client_next (other, "client-chat");
  ws_client_assert_alive (other);
  ws_client_send (other, "{\"event\":\"client-chat\","
      "\"channel\":\"private-room\",\"data\":{\"text\":\"still here\"}}");
  ws_client_next (flooder, "client-chat");

  g_clear_pointer (&flooder, ws_client_free);
  g_clear_pointer (&other, ws_client_free);
  server_free (server);
}

/* ---- Stalled peers ---- */

/* A client that completed the handshake and was then stopped: it never
 * answers the server's ping, so the server closes it once
 * activity-timeout and pong-timeout have passed. The child uses raw system
 * calls only (it was forked from a threaded process). */
static gboolean
on_child_ready (gint fd, GIOCondition condition, gpointer user_data)
{
  *(gboolean *) user_data = TRUE;
  return G_SOURCE_REMOVE;
}

static pid_t
spawn_stopped_client (guint port)
{
  static const char request[] = "GET " WS_PATH " HTTP/1.1\r\n"
      "Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
      "Sec-WebSocket-Version: 13\r\n\r\n";
  struct sockaddr_in sin = { 0, };
  gboolean ready = FALSE;
  int pipe_fds[2];
  char byte;
  pid_t pid;

  sin.sin_family = AF_INET;
  sin.sin_port = g_htons (port);
  sin.sin_addr.s_addr = g_htonl (0x7f000001);
  g_assert_cmpint (pipe (pipe_fds), ==, 0);

  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0) {
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    char buffer[512];

    close (pipe_fds[0]);
    if (fd < 0 || connect (fd, (struct sockaddr *) &sin, sizeof sin) != 0 ||
        write (fd, request, sizeof request - 1) != sizeof request - 1 ||
        read (fd, buffer, sizeof buffer) <= 0)
      _exit (1);
    /* Handshake answered: tell the parent, then wait to be stopped. */
    if (write (pipe_fds[1], "r", 1) != 1)
      _exit (1);
    for (;;)
      pause ();
  }

  /* The server answers the handshake on this thread: wait in the loop. */
  close (pipe_fds[1]);
  g_unix_fd_add (pipe_fds[0], G_IO_IN | G_IO_HUP, on_child_ready, &ready);
  WAIT_UNTIL (ready, WAIT_S, "the child's handshake");
  g_assert_cmpint (read (pipe_fds[0], &byte, 1), ==, 1);
  close (pipe_fds[0]);
  g_assert_cmpint (kill (pid, SIGSTOP), ==, 0);
  return pid;
}

static void
test_half_open (void)
{
  LegbaServer *server = server_new ("activity-timeout", 1, "pong-timeout", 1,
      NULL);
  LegbaHub *hub = legba_server_get_hub (server);
  g_autoptr (WsClient) live = ws_client_new (server);
  pid_t child;
  int status;

  child = spawn_stopped_client (legba_server_get_port (server));
  g_assert_cmpuint (legba_hub_get_connection_count (hub), ==, 2);

  /* Ping after 1 s of silence, 4201 after 1 s more; the server then stops
   * waiting for the stopped client's close frame after 4 s. */
  WAIT_UNTIL (legba_hub_get_counters (hub)->errors[201] == 1, WAIT_S,
      "the stopped client to be closed with 4201");
  WAIT_UNTIL (legba_hub_get_connection_count (hub) == 1, WAIT_S,
      "the hub to forget the stopped client");
  WAIT_UNTIL (legba_server_get_connection_count (server) == 1, WAIT_S,
      "the stopped client's socket to be torn down");

  /* The live client was pinged too, answered, and is kept. */
  ws_client_next (live, "pusher:ping");
  ws_client_assert_alive (live);
  g_assert_cmpuint (legba_hub_get_counters (hub)->errors[201], ==, 1);

  g_assert_cmpint (kill (child, SIGKILL), ==, 0);
  g_assert_cmpint (waitpid (child, &status, 0), ==, child);
  g_clear_pointer (&live, ws_client_free);
  server_free (server);
}

/* A socket whose reader never reads: its queue grows until it passes
 * max-queued-bytes, and the server tears it down; the other subscriber
 * gets every event. */
static void
test_slow_reader (void)
{
  LegbaServer *server = server_new ("max-queued-bytes", 64 * 1024, NULL);
  g_autoptr (WsClient) reader = ws_client_new (server);
  g_autoptr (RawClient) stalled = raw_client_new (server, 4096);
  g_autofree char *data = g_strnfill (8000, 'z');
  guint sent = 0, received = 0, i;
  g_autoptr (GBytes) payload = NULL;
  g_autoptr (JsonObject) ok = NULL;
  const char *subscribe =
      "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"big\"}}";

  ws_client_subscribe (reader, "big");
  g_assert_true (raw_send_frame (stalled, 0x81, subscribe, strlen (subscribe)));
  ok = raw_next_json (stalled);
  g_assert_cmpstr (frame_event (ok), ==,
      "pusher_internal:subscription_succeeded");
  raw_stop_reading (stalled);

  /* Bounded: 16 MB in all, far more than socket buffers and the bound. */
  while (legba_server_get_connection_count (server) == 2 && sent < 2000) {
    server_publish (server, "big", "blob", data);
    sent++;
    drain_main_context ();
  }
  g_assert_cmpuint (legba_server_get_connection_count (server), ==, 1);
  g_test_message ("stalled socket torn down after %u events", sent);

  WAIT_UNTIL (reader->frames->len - reader->next >= sent, WAIT_S,
      "the reader to get every event");
  for (i = reader->next; i < reader->frames->len; i++)
    received += g_str_equal (frame_event (reader->frames->pdata[i]), "blob");
  g_assert_cmpuint (received, ==, sent);
  ws_client_assert_alive (reader);

  /* The stalled peer sees its connection reset, not a clean close. */
  raw_start_reading (stalled);
  WAIT_UNTIL (stalled->eof, WAIT_S, "the stalled socket to see the end");

  g_clear_pointer (&reader, ws_client_free);
  g_clear_pointer (&stalled, raw_client_free);
  server_free (server);
}

static void
publish_seq (LegbaServer * server, guint seq, const char *padding)
{
  g_autofree char *data = g_strdup_printf ("{\"seq\":%u,\"pad\":\"%s\"}",
      seq, padding);

  server_publish (server, "seq", "numbered", data);
}

/* The next text frame, counting the pongs (RFC 6455 §5.5.3) before it
 * that answer "p1". */
static JsonObject *
raw_next_json_counting_pongs (RawClient * raw, guint * pongs)
{
  for (;;) {
    g_autoptr (GBytes) payload = NULL;
    guint8 opcode = 0;
    gsize len;
    const char *text;

    WAIT_UNTIL (raw_take_frame (raw, &opcode, &payload) || raw->eof, WAIT_S,
        "a frame from the server");
    g_assert_nonnull (payload);
    text = g_bytes_get_data (payload, &len);
    if (opcode == 0xa) {
      g_assert_cmpmem (text, len, "p1", 2);
      (*pongs)++;
      continue;
    }
    g_assert_cmpuint (opcode, ==, 0x1);
    return parse_object (text, len);
  }
}

/* A socket whose reader pauses: the events the socket cannot take wait
 * in the server, in order, with the server's answer to a pusher:ping
 * among them where it was asked, and the pong libsoup owes the peer for
 * a WebSocket ping goes out between two frames, never inside one. Once
 * the reader reads again, events published meanwhile go behind those
 * still waiting; the reader gets every frame whole and in order, and the
 * connection lives on with nothing left queued. */
static void
test_queued_order (void)
{
  LegbaServer *server = server_new ("max-queued-bytes", 16 * 1024 * 1024,
      NULL);
  g_autoptr (RawClient) raw = raw_client_new (server, 4096);
  g_autofree char *padding = g_strnfill (4000, 'q');
  g_autoptr (JsonObject) ok = NULL;
  g_autoptr (JsonObject) last = NULL;
  const char *subscribe =
      "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"seq\"}}";
  const char *ping = "{\"event\":\"pusher:ping\",\"data\":{}}";
  guint sent = 0, before_ping, pongs = 0, i;

  g_assert_true (raw_send_frame (raw, 0x81, subscribe, strlen (subscribe)));
  ok = raw_next_json (raw);
  g_assert_cmpstr (frame_event (ok), ==,
      "pusher_internal:subscription_succeeded");
  raw_stop_reading (raw);

  /* Until the socket's buffers are full and the server holds 1 MiB of
   * events (bounded: 16 MB in all). */
  while (legba_server_get_queued_bytes (server) < 1024 * 1024 && sent < 4000) {
    publish_seq (server, sent++, padding);
    drain_main_context ();
  }
  g_assert_cmpuint (legba_server_get_queued_bytes (server), >=, 1024 * 1024);
  before_ping = sent;

  /* A WebSocket ping, which libsoup answers itself, and a pusher:ping,
   * which the server answers in turn with its events. */
  g_assert_true (raw_send_frame (raw, 0x89, "p1", 2));
  g_assert_true (raw_send_frame (raw, 0x81, ping, strlen (ping)));
  WAIT_UNTIL (legba_hub_get_counters (legba_server_get_hub
          (server))->messages_in >= 2, WAIT_S, "the server to read the pings");
  g_assert_cmpuint (legba_server_get_queued_bytes (server), >, 0);
  for (i = 0; i < 20; i++)
    publish_seq (server, sent++, padding);
  g_assert_cmpuint (legba_server_get_connection_count (server), ==, 1);

  /* More events while the reader catches up: the socket takes some
   * again while earlier events still wait, and the new ones go behind
   * them. */
  raw_start_reading (raw);
  for (i = 0; i < 200; i++) {
    publish_seq (server, sent++, padding);
    g_main_context_iteration (NULL, FALSE);
  }
  for (i = 0; i < sent; i++) {
    g_autoptr (JsonObject) frame = NULL;
    g_autoptr (JsonObject) data = NULL;

    if (i == before_ping) {
      g_autoptr (JsonObject) pong = raw_next_json_counting_pongs (raw, &pongs);

      g_assert_cmpstr (frame_event (pong), ==, "pusher:pong");
    }
    frame = raw_next_json_counting_pongs (raw, &pongs);
    g_assert_cmpstr (frame_event (frame), ==, "numbered");
    data = frame_data (frame);
    g_assert_cmpint (json_object_get_int_member (data, "seq"), ==, i);
    g_assert_cmpuint (strlen (json_object_get_string_member (data, "pad")),
        ==, 4000);
  }
  WAIT_UNTIL (legba_server_get_queued_bytes (server) == 0, WAIT_S,
      "the server to have written everything");

  /* The connection lives on; libsoup's pong came once. */
  g_assert_true (raw_send_frame (raw, 0x81, ping, strlen (ping)));
  last = raw_next_json_counting_pongs (raw, &pongs);
  g_assert_cmpstr (frame_event (last), ==, "pusher:pong");
  g_assert_cmpuint (pongs, ==, 1);
  g_assert_false (raw->eof);

  g_clear_pointer (&raw, raw_client_free);
  server_free (server);
}

/* ---- Many sockets ---- */

#define MANY_SOCKETS 40         /* more than one poll bucket */

static gint64
frame_seq (JsonObject * frame)
{
  g_autoptr (JsonObject) data = frame_data (frame);

  return json_object_get_int_member_with_default (data, "seq", -1);
}

/* Every event of this name the client got, in order, carries the
 * sequence numbers 0, 1, 2... count - 1. */
static void
assert_sequence (WsClient * client, const char *event, guint count)
{
  guint i, seen = 0;

  for (i = 0; i < client->frames->len; i++) {
    JsonObject *frame = client->frames->pdata[i];

    if (!g_str_equal (frame_event (frame), event))
      continue;
    g_assert_cmpint (frame_seq (frame), ==, seen);
    seen++;
  }
  g_assert_cmpuint (seen, ==, count);
}

static guint
count_event (WsClient * client, const char *event)
{
  guint i, n = 0;

  for (i = 0; i < client->frames->len; i++)
    n += g_str_equal (frame_event (client->frames->pdata[i]), event);
  return n;
}

static gboolean
all_have (GPtrArray * clients, guint from, const char *event, guint count)
{
  guint i;

  for (i = from; i < clients->len; i++)
    if (count_event (clients->pdata[i], event) < count)
      return FALSE;
  return TRUE;
}

/* Sockets spread over several poll buckets: a broadcast reaches every one
 * in publish order while a reader that never drains (in one of the
 * buckets) is torn down, and a stream of client events from one socket
 * reaches all the others in the order sent. */
static void
test_many_sockets (void)
{
  LegbaServer *server = server_new ("max-queued-bytes", 64 * 1024,
      "client-events-per-second", 0, "max-event-bytes", 65536, NULL);
  g_autoptr (GPtrArray) clients =
      g_ptr_array_new_with_free_func ((GDestroyNotify) ws_client_free);
  g_autoptr (RawClient) stalled = NULL;
  g_autoptr (JsonObject) ok = NULL;
  g_autofree char *pad = g_strnfill (60000, 'z');
  const char *subscribe =
      "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"fan\"}}";
  guint i, sent = 0, torn_down_at = 0;

  for (i = 0; i < MANY_SOCKETS; i++) {
    WsClient *client = ws_client_new (server);

    g_ptr_array_add (clients, client);
    ws_client_subscribe (client, "fan");
    ws_client_subscribe (client, "private-chat");
    if (i == MANY_SOCKETS / 2) {
      stalled = raw_client_new (server, 4096);
      g_assert_true (raw_send_frame (stalled, 0x81, subscribe,
              strlen (subscribe)));
      ok = raw_next_json (stalled);
      g_assert_cmpstr (frame_event (ok), ==,
          "pusher_internal:subscription_succeeded");
      raw_stop_reading (stalled);
    }
  }
  g_assert_cmpuint (legba_server_get_connection_count (server), ==,
      MANY_SOCKETS + 1);

  /* Until the stalled socket is torn down (bounded: 1000 events of 60 KB
   * are far more than socket buffers and its 64 KB bound), and a few
   * more. */
  for (sent = 0; sent < 1000 && (torn_down_at == 0 ||
          sent < torn_down_at + 10); sent++) {
    g_autofree char *data = g_strdup_printf ("{\"seq\":%u,\"pad\":\"%s\"}",
        sent, pad);

    server_publish (server, "fan", "numbered", data);
    drain_main_context ();
    if (torn_down_at == 0 &&
        legba_server_get_connection_count (server) == MANY_SOCKETS)
      torn_down_at = sent + 1;
  }
  g_assert_cmpuint (torn_down_at, >, 0);
  g_test_message ("stalled socket torn down after %u events", torn_down_at);
  WAIT_UNTIL (all_have (clients, 0, "numbered", sent), WAIT_S,
      "every socket to get every event");
  for (i = 0; i < clients->len; i++)
    assert_sequence (clients->pdata[i], "numbered", sent);

  /* Client events from one socket, in the order sent, to all the others
   * and never back to the sender. */
  for (i = 0; i < 50; i++) {
    g_autofree char *frame = g_strdup_printf ("{\"event\":\"client-n\","
        "\"channel\":\"private-chat\",\"data\":{\"seq\":%u}}", i);

    ws_client_send (clients->pdata[0], frame);
  }
  WAIT_UNTIL (all_have (clients, 1, "client-n", 50), WAIT_S,
      "every other socket to get every client event");
  for (i = 1; i < clients->len; i++)
    assert_sequence (clients->pdata[i], "client-n", 50);
  ws_client_assert_alive (clients->pdata[0]);
  g_assert_cmpuint (count_event (clients->pdata[0], "client-n"), ==, 0);

  g_clear_pointer (&clients, g_ptr_array_unref);
  g_clear_pointer (&stalled, raw_client_free);
  server_free (server);
}

/* ---- HTTP ---- */

static void
test_http_api_auth (void)
{
  LegbaServer *server = server_new (NULL);
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autoptr (WsClient) client = ws_client_new (server);
  const char *body = "{\"name\":\"headline\",\"channel\":\"news\","
      "\"data\":\"{\\\"n\\\":3}\"}";
  static const SignMode bad[] = { SIGN_FORGED, SIGN_STALE, SIGN_WRONG_MD5 };
  guint i;

  ws_client_subscribe (client, "news");
  for (i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr (SoupMessage) msg = api_message (server, "POST",
        "/apps/" APP_ID "/events", body, bad[i]);
    g_autofree char *response = NULL;
    g_autoptr (JsonObject) error = NULL;

    g_assert_cmpuint (http_send (session, msg, &response), ==, 401);
    g_assert_cmpstr (soup_message_headers_get_content_type
        (soup_message_get_response_headers (msg), NULL), ==,
        "application/json");
    error = parse_object (response, -1);
    g_assert_nonnull (error);
    g_assert_true (json_object_has_member (error, "error"));
  }

  {
    g_autoptr (SoupMessage) msg = api_message (server, "POST",
        "/apps/" APP_ID "/events", body, SIGN_OK);

    g_assert_cmpuint (http_send (session, msg, NULL), ==, 200);
  }
  /* Only the signed request reached the channel. */
  ws_client_next (client, "headline");
  ws_client_assert_alive (client);
  for (i = client->next; i < client->frames->len; i++)
    g_assert_cmpstr (frame_event (client->frames->pdata[i]), !=, "headline");

  g_clear_pointer (&client, ws_client_free);
  server_free (server);
}

static void
test_request_too_large (void)
{
  LegbaServer *server = server_new ("max-request-bytes", 4096, NULL);
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autofree char *big = g_strnfill (10000, 'b');
  g_autoptr (SoupMessage) msg = api_message (server, "POST",
      "/apps/" APP_ID "/events", big, SIGN_OK);
  g_autofree char *url = http_url (server, "/up");

  g_assert_cmpuint (http_send (session, msg, NULL), ==, 413);
  g_assert_cmpuint (http_get (session, url, NULL, NULL), ==, 200);
  server_free (server);
}

static void
test_up (void)
{
  LegbaServer *server = server_new (NULL);
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autofree char *url = http_url (server, "/up");
  g_autofree char *body = NULL;
  g_autoptr (SoupMessage) post = soup_message_new ("POST", url);

  g_assert_cmpuint (http_get (session, url, NULL, &body), ==, 200);
  g_assert_cmpstr (body, ==, "OK\n");
  g_assert_cmpuint (http_send (session, post, NULL), ==, 405);
  server_free (server);
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

/* HTTP clients that come, are answered and go, the connection idle when
 * they close it, as HTTP API clients do: the server lets go of every
 * connection (it keeps no descriptor, or socket in CLOSE_WAIT). */
static void
test_closed_connections (void)
{
  LegbaServer *server = server_new (NULL);
  static const char request[] = "GET /up HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  guint before, i;

  drain_main_context ();
  before = count_descriptors ();
  for (i = 0; i < 5; i++) {
    RawClient *raw = raw_connect (server, 0);

    raw_start_reading (raw);
    g_assert_true (raw_write (raw, request, sizeof request - 1));
    WAIT_UNTIL (raw_find (raw, "\r\n\r\nOK\n") != NULL || raw->eof, WAIT_S,
        "the answer to GET /up");
    g_assert_nonnull (raw_find (raw, "\r\n\r\nOK\n"));
    raw_client_free (raw);
  }
  WAIT_UNTIL (count_descriptors () == before, WAIT_S,
      "the server to close the connections its clients closed");
  server_free (server);
}

static void
assert_metric (const char *text, const char *line)
{
  g_autofree char *needle = g_strconcat ("\n", line, "\n", NULL);

  if (strstr (text, needle) == NULL)
    g_error ("metric line '%s' not in:\n%s", line, text);
}

static void
test_metrics (void)
{
  LegbaServer *server = server_new (NULL);
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autoptr (WsClient) client = ws_client_new (server);
  g_autofree char *url = http_url (server, "/metrics");
  g_autofree char *up = http_url (server, "/up");
  g_autofree char *text = NULL;
  g_autofree char *again = NULL;

  ws_client_subscribe (client, "news");
  ws_client_send (client, "not JSON");
  ws_client_next (client, "pusher:error");
  g_assert_cmpuint (http_get (session, up, NULL, NULL), ==, 200);

  g_assert_cmpuint (http_get (session, url, NULL, &text), ==, 200);
  assert_metric (text, "# TYPE legba_connections gauge");
  assert_metric (text, "legba_connections 1");
  assert_metric (text, "legba_subscriptions 1");
  assert_metric (text, "legba_errors_total{code=\"4300\"} 1");
  assert_metric (text,
      "legba_http_requests_total{route=\"/up\",status=\"200\"} 1");
  assert_metric (text,
      "legba_http_requests_total{route=\"/app/:key\"," "status=\"101\"} 1");
  assert_metric (text, "legba_queue_overflow_closes_total 0");

  /* With a token, only its bearer may read. */
  g_object_set (server, "metrics-token", "s3cret", NULL);
  g_assert_cmpuint (http_get (session, url, NULL, NULL), ==, 401);
  g_assert_cmpuint (http_get (session, url, "Bearer nope", NULL), ==, 401);
  g_assert_cmpuint (http_get (session, url, "Bearer s3cret", &again), ==, 200);
  assert_metric (again, "legba_connections 1");

  g_clear_pointer (&client, ws_client_free);
  server_free (server);
}

static void
test_metrics_listener (void)
{
  LegbaServer *server = server_new ("metrics-token", "t0ken", NULL);
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autoptr (GError) error = NULL;
  g_autofree char *main_url = http_url (server, "/metrics");
  g_autofree char *metrics_url = NULL;
  g_autofree char *text = NULL;

  g_assert_true (legba_server_listen_metrics (server, "127.0.0.1", 0, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (legba_server_get_metrics_port (server), >, 0);
  g_assert_cmpuint (legba_server_get_metrics_port (server), !=,
      legba_server_get_port (server));
  metrics_url = g_strdup_printf ("http://127.0.0.1:%u/metrics",
      legba_server_get_metrics_port (server));

  g_assert_cmpuint (http_get (session, main_url, "Bearer t0ken", NULL), ==,
      404);
  g_assert_cmpuint (http_get (session, metrics_url, NULL, NULL), ==, 401);
  g_assert_cmpuint (http_get (session, metrics_url, "Bearer t0ken", &text),
      ==, 200);
  assert_metric (text, "legba_connections 0");
  server_free (server);
}

static void
test_cors (void)
{
  const char *origins[] = { "https://app.example", NULL };
  LegbaServer *server = server_new ("allowed-origins", origins, NULL);
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autofree char *url = http_url (server, "/apps/" APP_ID "/events");
  g_autofree char *base = ws_base (server);
  g_autoptr (SoupMessage) preflight = soup_message_new ("OPTIONS", url);
  g_autoptr (SoupMessage) refused = soup_message_new ("OPTIONS", url);
  g_autoptr (WsClient) stranger = NULL;
  g_autoptr (WsClient) friend = NULL;
  SoupMessageHeaders *headers;

  headers = soup_message_get_request_headers (preflight);
  soup_message_headers_replace (headers, "Origin", "https://app.example");
  soup_message_headers_replace (headers, "Access-Control-Request-Method",
      "POST");
  soup_message_headers_replace (headers, "Access-Control-Request-Headers",
      "authorization, content-type");
  g_assert_cmpuint (http_send (session, preflight, NULL), ==, 204);
  headers = soup_message_get_response_headers (preflight);
  g_assert_cmpstr (soup_message_headers_get_one (headers,
          "Access-Control-Allow-Origin"), ==, "https://app.example");
  g_assert_nonnull (strstr (soup_message_headers_get_one (headers,
              "Access-Control-Allow-Methods"), "POST"));
  g_assert_cmpstr (soup_message_headers_get_one (headers,
          "Access-Control-Allow-Headers"), ==, "authorization, content-type");

  soup_message_headers_replace (soup_message_get_request_headers (refused),
      "Origin", "https://evil.example");
  g_assert_cmpuint (http_send (session, refused, NULL), ==, 403);
  g_assert_null (soup_message_headers_get_one
      (soup_message_get_response_headers (refused),
          "Access-Control-Allow-Origin"));

  /* The same origins guard the WebSocket. */
  stranger = ws_client_try (NULL, base, WS_PATH, "https://evil.example");
  g_assert_nonnull (stranger->error);
  g_assert_cmpuint (legba_server_get_connection_count (server), ==, 0);
  friend = ws_client_try (NULL, base, WS_PATH, "https://app.example");
  g_assert_no_error (friend->error);
  ws_client_next (friend, "pusher:connection_established");

  g_clear_pointer (&friend, ws_client_free);
  server_free (server);
}

/* ---- TLS ---- */

static void
test_tls (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("legba-tls-XXXXXX", &error);
  g_autofree char *cert = NULL;
  g_autofree char *key = NULL;
  g_autofree char *up = NULL;
  g_autofree char *base = NULL;
  g_autofree char *url = NULL;
  g_autoptr (GTlsDatabase) database = NULL;
  g_autoptr (SoupSession) session = NULL;
  g_autoptr (WsClient) client = NULL;
  LegbaServer *server;

  g_assert_no_error (error);
  if (!legba_test_make_certificate (dir, &cert, &key)) {
    g_test_skip ("openssl is not installed");
    g_rmdir (dir);
    return;
  }

  server = legba_server_new ();
  g_assert_true (legba_server_add_app (server, APP_ID, APP_KEY, APP_SECRET,
          &error));
  g_assert_true (legba_server_set_tls_files (server, cert, key, &error));
  g_assert_no_error (error);
  g_assert_true (legba_server_listen (server, "127.0.0.1", 0, &error));
  g_assert_no_error (error);
  url = legba_server_get_url (server);
  g_assert_true (g_str_has_prefix (url, "https://127.0.0.1:"));

  database = g_tls_file_database_new (cert, &error);
  g_assert_no_error (error);
  session = soup_session_new ();
  soup_session_set_tls_database (session, database);

  up = g_strdup_printf ("https://127.0.0.1:%u/up",
      legba_server_get_port (server));
  g_assert_cmpuint (http_get (session, up, NULL, NULL), ==, 200);
  base = g_strdup_printf ("wss://127.0.0.1:%u", legba_server_get_port (server));
  client = ws_client_new_full (session, base);
  ws_client_subscribe (client, "news");
  server_publish (server, "news", "headline", "{\"tls\":true}");
  ws_client_next (client, "headline");

  /* A client that does not trust the certificate is refused. */
  {
    g_autoptr (SoupSession) untrusting = soup_session_new ();
    g_autoptr (SoupMessage) msg = soup_message_new ("GET", up);
    HttpResult http = { 0, };

    soup_session_send_and_read_async (untrusting, msg, G_PRIORITY_DEFAULT,
        NULL, http_on_read, &http);
    WAIT_UNTIL (http.done, WAIT_S, "the untrusting client to give up");
    g_assert_error (http.error, G_TLS_ERROR, G_TLS_ERROR_BAD_CERTIFICATE);
    g_clear_error (&http.error);
  }

  g_clear_pointer (&client, ws_client_free);
  server_free (server);
  g_remove (cert);
  g_remove (key);
  g_rmdir (dir);
}

static void
test_tls_bad_files (void)
{
  g_autoptr (LegbaServer) server = legba_server_new ();
  g_autoptr (GError) error = NULL;

  g_assert_false (legba_server_set_tls_files (server, "/nonexistent/cert.pem",
          "/nonexistent/key.pem", &error));
  g_assert_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_TLS);
  g_assert_nonnull (strstr (error->message, "/nonexistent/cert.pem"));
}

/* ---- Shutdown ---- */

static void
test_shutdown (void)
{
  LegbaServer *server = server_new (NULL);
  g_autoptr (WsClient) a = ws_client_new (server);
  g_autoptr (WsClient) b = ws_client_new (server);
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autofree char *base = ws_base (server);
  g_autoptr (WsClient) late = NULL;

  ws_client_subscribe (b, "news");
  legba_server_shutdown (server);
  WAIT_UNTIL (a->closed && b->closed, WAIT_S, "clients to be closed");
  g_assert_cmpuint (a->close_code, ==, 4200);
  g_assert_cmpuint (b->close_code, ==, 4200);
  WAIT_UNTIL (legba_server_get_connection_count (server) == 0, WAIT_S,
      "the server to let go of every socket");

  /* Nothing listens any more. */
  late = ws_client_try (session, base, WS_PATH, NULL);
  g_assert_nonnull (late->error);

  g_clear_pointer (&a, ws_client_free);
  g_clear_pointer (&b, ws_client_free);
  server_free (server);
}

static void
test_listen_errors (void)
{
  LegbaServer *first = server_new (NULL);
  g_autoptr (LegbaServer) second = legba_server_new ();
  g_autoptr (LegbaServer) empty = legba_server_new ();
  g_autoptr (GError) error = NULL;

  g_assert_false (legba_server_start (empty, &error));
  g_assert_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG);
  g_clear_error (&error);
  g_assert_false (legba_server_listen (second, "not-an-address", 0, &error));
  g_assert_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_LISTEN);
  g_clear_error (&error);
  g_assert_false (legba_server_listen (second, "127.0.0.1",
          legba_server_get_port (first), &error));
  g_assert_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_LISTEN);
  server_free (first);
}

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

/* GnuTLS handshakes ran in GTask worker threads, which stay idle for a
 * while; LeakSanitizer (GCC 12) crashes reading their dynamic TLS at exit,
 * so they are ended first. */
static void
stop_pool_threads (void)
{
  gint64 deadline = g_get_monotonic_time () + WAIT_S * G_USEC_PER_SEC;

  g_thread_pool_set_max_unused_threads (0);
  while (count_pool_threads () > 0 && g_get_monotonic_time () < deadline) {
    g_thread_pool_stop_unused_threads ();
    g_usleep (1000);
  }
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/server/ws/connection-established",
      test_connection_established);
  g_test_add_func ("/server/ws/refused-key", test_refused_key);
  g_test_add_func ("/server/ws/missing-protocol", test_missing_protocol);
  g_test_add_func ("/server/ws/not-websocket", test_not_websocket);
  g_test_add_func ("/server/ws/compression", test_compression);
  g_test_add_func ("/server/ws/input-batches", test_input_batches);
  g_test_add_func ("/server/bad-input/frames", test_bad_frames);
  g_test_add_func ("/server/ws/mixed-frames", test_mixed_frames);
  g_test_add_func ("/server/bad-input/invalid-frames", test_invalid_frames);
  g_test_add_func ("/server/bad-input/oversize-frames", test_oversize_frames);
  g_test_add_func ("/server/bad-input/frame-at-limit", test_frame_at_limit);
  g_test_add_func ("/server/bad-input/client-event-flood",
      test_client_event_flood);
  g_test_add_func ("/server/stalled/half-open", test_half_open);
  g_test_add_func ("/server/stalled/slow-reader", test_slow_reader);
  g_test_add_func ("/server/stalled/queued-order", test_queued_order);
  g_test_add_func ("/server/scale/many-sockets", test_many_sockets);
  g_test_add_func ("/server/http/api-auth", test_http_api_auth);
  g_test_add_func ("/server/http/request-too-large", test_request_too_large);
  g_test_add_func ("/server/http/up", test_up);
  g_test_add_func ("/server/http/closed-connections", test_closed_connections);
  g_test_add_func ("/server/http/metrics", test_metrics);
  g_test_add_func ("/server/http/metrics-listener", test_metrics_listener);
  g_test_add_func ("/server/http/cors", test_cors);
  g_test_add_func ("/server/tls/https-wss", test_tls);
  g_test_add_func ("/server/tls/bad-files", test_tls_bad_files);
  g_test_add_func ("/server/shutdown", test_shutdown);
  g_test_add_func ("/server/listen-errors", test_listen_errors);

  status = g_test_run ();
  stop_pool_threads ();
  return status;
}
