/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaSignalClient's connection: one Pusher protocol 7 WebSocket at a
 * time, its authentication, the frames it receives, and what happens when
 * it ends (reconnection with backoff, or failure).
 */
#include <legba/signal/legba-signal-client-private.h>

#include <legba/common/legba-auth.h>
#include <legba/common/legba-json.h>
#include <legba/common/legba-turn.h>
#include <legba/legba-version.h>

#include <string.h>

#define CHANNEL_PREFIX "presence-legba."
#define SIGNAL_EVENT "client-legba-signal"
#define MAX_INCOMING_PAYLOAD (4 * 1024 * 1024)

/* What to do after a connection ends. Pusher protocol 7 close codes:
 * 4000–4099 do not reconnect, 4100–4199 back off, 4200–4299 at once. */
typedef enum
{
  RETRY_NOW,
  RETRY_BACKOFF,
  RETRY_NEVER,
} Retry;

/* JSON from the network goes through the strict reader of legba-json.h:
 * json-glib alone has no nesting bound. */
static JsonNode *
parse_json (const char *text, gsize len)
{
  g_autofree char *message = NULL;
  JsonNode *node;

  if (text == NULL)
    return NULL;
  node = legba_json_parse_strict (text, len, NULL, NULL, &message);

  if (node == NULL)
    g_debug ("Invalid JSON: %s", message);
  return node;
}

static JsonNode *
parse_string (const char *text)
{
  return parse_json (text, strlen (text));
}

static gint64
object_get_int (JsonObject * object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_INT64)
    return 0;
  return json_node_get_int (node);
}

/* Pusher protocol 7: servers send `data` as a JSON-encoded string, some
 * relay client events as objects (docs/room-protocol.md §1). Returns the value,
 * or NULL when absent or a string that does not parse. */
static JsonNode *
frame_get_data (JsonObject * frame)
{
  JsonNode *node = json_object_get_member (frame, "data");

  if (node == NULL)
    return NULL;
  if (JSON_NODE_HOLDS_VALUE (node) &&
      json_node_get_value_type (node) == G_TYPE_STRING)
    return parse_string (json_node_get_string (node));
  return json_node_copy (node);
}

static JsonObject *
frame_get_data_object (JsonObject * frame)
{
  g_autoptr (JsonNode) data = frame_get_data (frame);

  if (data == NULL || !JSON_NODE_HOLDS_OBJECT (data))
    return NULL;
  return json_object_ref (json_node_get_object (data));
}

/* The server URL (ws, wss, http or https, with an optional path prefix)
 * with path appended, as a WebSocket or an HTTP URL. NULL when the URL is
 * not one of those. */
static char *
server_url_with_path (const char *server_url, gboolean websocket,
    const char *path, const char *query)
{
  g_autoptr (GUri) uri = NULL;
  g_autofree char *full_path = NULL;
  const char *scheme, *base;
  gboolean secure;
  gsize len;

  if (server_url == NULL)
    return NULL;
  uri = g_uri_parse (server_url, G_URI_FLAGS_ENCODED, NULL);
  if (uri == NULL || g_uri_get_host (uri) == NULL)
    return NULL;
  scheme = g_uri_get_scheme (uri);
  if (g_ascii_strcasecmp (scheme, "wss") == 0 ||
      g_ascii_strcasecmp (scheme, "https") == 0)
    secure = TRUE;
  else if (g_ascii_strcasecmp (scheme, "ws") == 0 ||
      g_ascii_strcasecmp (scheme, "http") == 0)
    secure = FALSE;
  else
    return NULL;
  base = g_uri_get_path (uri);
  len = strlen (base);
  while (len > 0 && base[len - 1] == '/')
    len--;
  full_path = g_strdup_printf ("%.*s%s", (int) len, base, path);
  if (websocket)
    scheme = secure ? "wss" : "ws";
  else
    scheme = secure ? "https" : "http";
  return g_uri_join (G_URI_FLAGS_ENCODED, scheme, NULL, g_uri_get_host (uri),
      g_uri_get_port (uri), full_path, query, NULL);
}

/* Pusher protocol 7: ws[s]://HOST:PORT/app/KEY?protocol=7&client=&version= */
char *
legba_signal_client_websocket_url (LegbaSignalClient * self)
{
  g_autofree char *key = NULL;
  g_autofree char *path = NULL;

  if (self->app_key == NULL || self->app_key[0] == '\0')
    return NULL;
  key = g_uri_escape_string (self->app_key, NULL, FALSE);
  path = g_strconcat ("/app/", key, NULL);
  return server_url_with_path (self->server_url, TRUE, path,
      "protocol=7&client=" LEGBA_SIGNAL_CLIENT_NAME "&version=" LEGBA_VERSION);
}

/* ---- Connections ---- */

void
legba_signal_client_send_text (LegbaSignalClient * self, const char *text)
{
  LegbaSignalConnection *conn = self->conn;

  if (conn == NULL || conn->ws == NULL ||
      soup_websocket_connection_get_state (conn->ws) !=
      SOUP_WEBSOCKET_STATE_OPEN)
    return;
  soup_websocket_connection_send_text (conn->ws, text);
}

void
legba_signal_client_send_event (LegbaSignalClient * self, const char *event,
    JsonObject * data)
{
  g_autoptr (JsonObject) frame = json_object_new ();
  g_autofree char *text = NULL;

  json_object_set_string_member (frame, "event", event);
  json_object_set_object_member (frame, "data",
      data ? json_object_ref (data) : json_object_new ());
  text = legba_json_object_to_string (frame, NULL);
  legba_signal_client_send_text (self, text);
}

static void
on_closing_ws_closed (SoupWebsocketConnection * ws, gpointer user_data)
{
  LegbaSignalClient *self = user_data;

  g_signal_handlers_disconnect_by_data (ws, self);
  /* libsoup holds the WebSocket while it emits "closed" */
  g_ptr_array_remove_fast (self->closing, ws);
}

/* Ends the current connection: an open WebSocket is closed with `code`
 * and kept until the server answers (or libsoup gives up), so the close
 * handshake completes; nothing of it reaches the client any more. */
void
legba_signal_client_drop_connection (LegbaSignalClient * self, gushort code)
{
  LegbaSignalConnection *conn = g_steal_pointer (&self->conn);

  if (conn == NULL)
    return;
  g_cancellable_cancel (conn->cancellable);
  g_object_unref (conn->cancellable);
  legba_signal_timer_clear (&conn->connect_timer);
  legba_signal_timer_clear (&conn->activity_timer);
  legba_signal_timer_clear (&conn->pong_timer);
  legba_signal_timer_clear (&conn->pace_timer);
  if (conn->ws) {
    g_signal_handlers_disconnect_by_data (conn->ws, self);
    if (soup_websocket_connection_get_state (conn->ws) ==
        SOUP_WEBSOCKET_STATE_OPEN) {
      g_ptr_array_add (self->closing, g_object_ref (conn->ws));
      g_signal_connect (conn->ws, "closed",
          G_CALLBACK (on_closing_ws_closed), self);
      soup_websocket_connection_close (conn->ws, code, NULL);
    }
    g_object_unref (conn->ws);
  }
  if (conn->socket_id != NULL)
    g_object_notify (G_OBJECT (self), "socket-id");
  g_free (conn->socket_id);
  g_free (conn->error_message);
  g_free (conn);
}

static guint
backoff_delay (LegbaSignalClient * self)
{
  guint64 delay = self->reconnect_delay_min;
  guint i;

  for (i = 0; i < self->attempt && delay < self->reconnect_delay_max; i++)
    delay *= 2;
  delay = MIN (delay, self->reconnect_delay_max);
  /* jitter: between half and all of the delay, so clients that lost the
   * same server do not come back in step */
  return delay / 2 + g_random_int_range (0, delay / 2 + 1);
}

static gboolean
on_reconnect_timer (gpointer user_data)
{
  LegbaSignalClient *self = user_data;

  g_clear_pointer (&self->reconnect_timer, g_source_unref);
  legba_signal_client_start_connection (self);
  return G_SOURCE_REMOVE;
}

/* The current connection failed or ended: reconnect as `retry` says. */
static void
reconnect (LegbaSignalClient * self, Retry retry)
{
  guint delay;

  legba_signal_client_drop_connection (self, SOUP_WEBSOCKET_CLOSE_NORMAL);
  if (!self->in_room)
    return;
  delay = retry == RETRY_NOW && self->attempt == 0 ? 0 : backoff_delay (self);
  self->attempt++;
  g_debug ("Reconnecting in %u ms (attempt %u)", delay, self->attempt);
  legba_signal_timer_start (self, &self->reconnect_timer, delay,
      on_reconnect_timer);
  legba_signal_client_set_state (self,
      self->was_joined ? LEGBA_SIGNALLER_STATE_RECONNECTING :
      LEGBA_SIGNALLER_STATE_CONNECTING);
}

/* A connection attempt failed in a way worth retrying; error is reported
 * (not fatal) unless NULL. */
static void
retry_after_error (LegbaSignalClient * self, Retry retry, const char *message)
{
  g_object_ref (self);
  if (message)
    legba_signal_client_emit_error (self, LEGBA_SIGNAL_ERROR_CONNECT, "%s",
        message);
  if (self->in_room && self->conn != NULL)
    reconnect (self, retry);
  g_object_unref (self);
}

static Retry
classify_close (int code)
{
  if (code >= 4000 && code <= 4099)
    return RETRY_NEVER;
  if (code >= 4100 && code <= 4199)
    return RETRY_BACKOFF;
  if (code >= 4200 && code <= 4299)
    return RETRY_NOW;
  return RETRY_BACKOFF;
}

static void
on_ws_closed (SoupWebsocketConnection * ws, gpointer user_data)
{
  LegbaSignalClient *self = user_data;
  LegbaSignalConnection *conn = self->conn;
  int code = soup_websocket_connection_get_close_code (ws);
  const char *reason = soup_websocket_connection_get_close_data (ws);
  g_autofree char *message = NULL;

  /* A server may send pusher:error with the code and then close without
   * one (or with 1000): the pusher:error code tells what to do. */
  if ((code < 4000 || code > 4999) && conn->error_code != 0)
    code = conn->error_code;
  if (conn->error_message != NULL && (reason == NULL || reason[0] == '\0'))
    reason = conn->error_message;
  message = g_strdup_printf ("The server closed the connection (%d%s%s)",
      code, reason && reason[0] ? ": " : "", reason ? reason : "");

  switch (classify_close (code)) {
    case RETRY_NEVER:
      legba_signal_client_fail (self, LEGBA_SIGNAL_ERROR_REFUSED, message);
      break;
    case RETRY_NOW:
      g_info ("%s; reconnecting", message);
      retry_after_error (self, RETRY_NOW, NULL);
      break;
    case RETRY_BACKOFF:
      retry_after_error (self, RETRY_BACKOFF, message);
      break;
  }
}

static void
on_ws_error (SoupWebsocketConnection * ws, GError * error, gpointer user_data)
{
  g_info ("WebSocket error: %s", error->message);
}

static gboolean
on_pong_timeout (gpointer user_data)
{
  LegbaSignalClient *self = user_data;

  g_clear_pointer (&self->conn->pong_timer, g_source_unref);
  /* Pusher protocol 7: no pong within the pong timeout, reconnect */
  retry_after_error (self, RETRY_NOW, "No answer to pusher:ping from the "
      "server");
  return G_SOURCE_REMOVE;
}

static gboolean
on_activity_timeout (gpointer user_data)
{
  LegbaSignalClient *self = user_data;
  LegbaSignalConnection *conn = self->conn;
  gint64 idle_ms = (g_get_monotonic_time () - conn->last_received) / 1000;

  g_clear_pointer (&conn->activity_timer, g_source_unref);
  if (idle_ms < conn->activity_ms) {
    legba_signal_timer_start (self, &conn->activity_timer,
        conn->activity_ms - idle_ms, on_activity_timeout);
    return G_SOURCE_REMOVE;
  }
  /* Pusher protocol 7: after activity_timeout of silence the client
   * pings; anything the server sends proves the connection alive. */
  legba_signal_client_send_event (self, "pusher:ping", NULL);
  legba_signal_timer_start (self, &conn->pong_timer, self->pong_timeout,
      on_pong_timeout);
  return G_SOURCE_REMOVE;
}

static gboolean
on_connect_timeout (gpointer user_data)
{
  LegbaSignalClient *self = user_data;

  g_clear_pointer (&self->conn->connect_timer, g_source_unref);
  retry_after_error (self, RETRY_BACKOFF, "Timed out joining the room");
  return G_SOURCE_REMOVE;
}

/* ---- Authentication and subscription ---- */

/* docs/room-protocol.md §2: the presence channel_data of the local
 * participant */
static char *
make_channel_data (LegbaSignalClient * self)
{
  g_autoptr (JsonObject) user_info = json_object_new ();
  g_autoptr (JsonObject) channel_data = json_object_new ();

  json_object_set_string_member (user_info, "identity", self->identity);
  json_object_set_string_member (user_info, "name", self->display_name);
  json_object_set_string_member (user_info, "protocol", LEGBA_ROOM_PROTOCOL);
  json_object_set_string_member (channel_data, "user_id", self->participant_id);
  json_object_set_object_member (channel_data, "user_info",
      g_steal_pointer (&user_info));
  return legba_json_object_to_string (channel_data, NULL);
}

static void
subscribe (LegbaSignalClient * self, const char *auth, const char *channel_data)
{
  g_autoptr (JsonObject) data = json_object_new ();

  json_object_set_string_member (data, "auth", auth);
  json_object_set_string_member (data, "channel_data", channel_data);
  json_object_set_string_member (data, "channel", self->channel);
  legba_signal_client_send_event (self, "pusher:subscribe", data);
}

static const char *
participant_suffix (LegbaSignalClient * self)
{
  return self->participant_id + strlen (self->identity) + 1;
}

static char *
auth_endpoint (LegbaSignalClient * self)
{
  g_autofree char *app_id = NULL;
  g_autofree char *path = NULL;

  if (self->auth_url != NULL)
    return g_strdup (self->auth_url);

  /* legba-server's join-token endpoint, beside the WebSocket endpoint */
  app_id = g_uri_escape_string (self->app_id, NULL, FALSE);
  path = g_strdup_printf ("/apps/%s/auth", app_id);
  return server_url_with_path (self->server_url, FALSE, path, NULL);
}

/* The authorizer must vouch for our own participant id (§2). */
static gboolean
check_channel_data (LegbaSignalClient * self, const char *channel_data)
{
  g_autoptr (JsonNode) node = parse_string (channel_data);
  const char *user_id = NULL;

  if (node && JSON_NODE_HOLDS_OBJECT (node))
    user_id =
        legba_json_object_get_string (json_node_get_object (node), "user_id");
  if (g_strcmp0 (user_id, self->participant_id) == 0)
    return TRUE;

  legba_signal_client_fail (self, LEGBA_SIGNAL_ERROR_AUTH, user_id ?
      "The auth endpoint vouched for another participant id" :
      "The auth endpoint answered without a presence user_id");
  return FALSE;
}

static void
take_auth_answer (LegbaSignalClient * self, GBytes * body)
{
  gsize len;
  const char *text = g_bytes_get_data (body, &len);
  g_autoptr (JsonNode) root = parse_json (text, len);
  g_autofree char *channel_data = NULL;
  JsonNode *cd;
  JsonObject *answer;
  const char *auth;

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    legba_signal_client_fail (self, LEGBA_SIGNAL_ERROR_AUTH,
        "The auth endpoint answered something other than a JSON object");
    return;
  }
  answer = json_node_get_object (root);
  auth = legba_json_object_get_string (answer, "auth");
  cd = json_object_get_member (answer, "channel_data");
  /* pusher-js passes channel_data on as it came; it should be a string */
  if (cd && JSON_NODE_HOLDS_VALUE (cd) &&
      json_node_get_value_type (cd) == G_TYPE_STRING)
    channel_data = g_strdup (json_node_get_string (cd));
  else if (cd && JSON_NODE_HOLDS_OBJECT (cd))
    channel_data = legba_json_object_to_string (json_node_get_object (cd),
        NULL);
  if (auth == NULL || channel_data == NULL) {
    legba_signal_client_fail (self, LEGBA_SIGNAL_ERROR_AUTH,
        "The auth endpoint answered without auth and channel_data");
    return;
  }
  if (check_channel_data (self, channel_data))
    subscribe (self, auth, channel_data);
}

static void
on_auth_answer (GObject * source, GAsyncResult * result, gpointer user_data)
{
  LegbaSignalClient *self;
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) body = NULL;
  g_autofree char *message = NULL;
  SoupMessage *msg;
  guint status;

  body = soup_session_send_and_read_finish (SOUP_SESSION (source), result,
      &error);
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  self = user_data;
  if (body == NULL) {
    message = g_strdup_printf ("The auth endpoint is unreachable: %s",
        error->message);
    retry_after_error (self, RETRY_BACKOFF, message);
    return;
  }
  msg = soup_session_get_async_result_message (SOUP_SESSION (source), result);
  status = soup_message_get_status (msg);
  if (SOUP_STATUS_IS_SUCCESSFUL (status)) {
    take_auth_answer (self, body);
  } else if (SOUP_STATUS_IS_CLIENT_ERROR (status) &&
      status != SOUP_STATUS_REQUEST_TIMEOUT && status != 429) {
    /* 401, 403: this participant may not join; asking again won't help
     * (408 and 429 Too Many Requests are retried like a 5xx) */
    message = g_strdup_printf ("The auth endpoint refused to admit the "
        "participant (HTTP %u %s)", status,
        soup_message_get_reason_phrase (msg));
    legba_signal_client_fail (self, LEGBA_SIGNAL_ERROR_AUTH, message);
  } else {
    message = g_strdup_printf ("The auth endpoint failed (HTTP %u %s)",
        status, soup_message_get_reason_phrase (msg));
    retry_after_error (self, RETRY_BACKOFF, message);
  }
}

static void
add_form_field (gpointer key, gpointer value, gpointer user_data)
{
  g_hash_table_insert (user_data, key, value);
}

static void
add_header (gpointer key, gpointer value, gpointer user_data)
{
  soup_message_headers_replace (user_data, key, value);
}

/* pusher-js's channel authorization: a form POST of socket_id and
 * channel_name (and the app's own parameters); legba-server's join-token
 * endpoint also takes the participant's suffix, the room protocol it
 * speaks and a bearer token. */
static void
request_auth (LegbaSignalClient * self)
{
  g_autoptr (GHashTable) form = g_hash_table_new (g_str_hash, g_str_equal);
  g_autofree char *url = auth_endpoint (self);
  g_autofree char *bearer = NULL;
  SoupMessageHeaders *headers;
  g_autoptr (SoupMessage) msg = NULL;

  g_hash_table_foreach (self->auth_params, add_form_field, form);
  g_hash_table_insert (form, "socket_id", self->conn->socket_id);
  g_hash_table_insert (form, "channel_name", self->channel);
  g_hash_table_insert (form, "suffix", (gpointer) participant_suffix (self));
  /* what user_info names (docs/room-protocol.md §8): SFU rooms need 2 */
  g_hash_table_insert (form, "protocol", (gpointer) LEGBA_ROOM_PROTOCOL);
  if (url)
    msg = soup_message_new_from_encoded_form ("POST", url,
        soup_form_encode_hash (form));
  if (msg == NULL) {
    legba_signal_client_fail (self, LEGBA_SIGNAL_ERROR_INVALID,
        "Invalid auth endpoint URL");
    return;
  }
  headers = soup_message_get_request_headers (msg);
  soup_message_headers_replace (headers, "Accept", "application/json");
  g_hash_table_foreach (self->auth_headers, add_header, headers);
  if (self->token) {
    bearer = g_strconcat ("Bearer ", self->token, NULL);
    soup_message_headers_replace (headers, "Authorization", bearer);
  }
  g_main_context_push_thread_default (self->context);
  soup_session_send_and_read_async (self->session, msg, G_PRIORITY_DEFAULT,
      self->conn->cancellable, on_auth_answer, self);
  g_main_context_pop_thread_default (self->context);
}

static void
authenticate (LegbaSignalClient * self)
{
  g_autofree char *channel_data = NULL;
  g_autofree char *auth = NULL;

  if (self->token || self->auth_url) {
    request_auth (self);
    return;
  }
  channel_data = make_channel_data (self);
  auth = legba_auth_channel_sign (self->app_key, self->app_secret,
      self->conn->socket_id, self->channel, channel_data);
  subscribe (self, auth, channel_data);
}

/* ---- Incoming frames ---- */

static void
on_connection_established (LegbaSignalClient * self, JsonObject * frame)
{
  LegbaSignalConnection *conn = self->conn;
  g_autoptr (JsonObject) data = frame_get_data_object (frame);
  const char *socket_id;
  JsonNode *limits;
  gint64 v;

  if (conn->socket_id != NULL)
    return;
  socket_id = data ? legba_json_object_get_string (data, "socket_id") : NULL;
  if (socket_id == NULL) {
    retry_after_error (self, RETRY_BACKOFF,
        "The server sent a malformed pusher:connection_established");
    return;
  }
  conn->socket_id = g_strdup (socket_id);
  v = object_get_int (data, "activity_timeout");
  if (v > 0)
    conn->activity_ms = MIN ((gint64) self->activity_timeout, v * 1000);
  /* docs/room-protocol.md §4: advertised limits replace ours, higher or
   * lower */
  limits = json_object_get_member (data, "limits");
  if (limits && JSON_NODE_HOLDS_OBJECT (limits)) {
    v = object_get_int (json_node_get_object (limits), "client_event_bytes");
    if (v > 0)
      self->event_bytes = v;
    v = object_get_int (json_node_get_object (limits),
        "client_events_per_second");
    if (v > 0)
      self->events_per_window = MIN (v, G_MAXUINT);
  }
  g_object_notify (G_OBJECT (self), "socket-id");
  if (self->conn == conn)
    authenticate (self);
}

static void
on_pusher_error (LegbaSignalClient * self, JsonObject * frame)
{
  LegbaSignalConnection *conn = self->conn;
  g_autoptr (JsonObject) data = frame_get_data_object (frame);
  const char *message =
      data ? legba_json_object_get_string (data, "message") : NULL;
  gint64 code = data ? object_get_int (data, "code") : 0;

  if (message == NULL)
    message = "no message";
  /* Pusher protocol 7: 4000–4299 come with a close, which decides what
   * happens next; the others report a refused message. */
  if (code >= 4000 && code < 4300) {
    conn->error_code = code;
    g_free (conn->error_message);
    conn->error_message = g_strdup (message);
    return;
  }
  legba_signal_client_emit_error (self, LEGBA_SIGNAL_ERROR_SERVER,
      "The server reported an error (%" G_GINT64_FORMAT ": %s)", code, message);
}

static void
on_subscription_error (LegbaSignalClient * self, JsonObject * frame)
{
  g_autoptr (JsonNode) data = frame_get_data (frame);
  g_autofree char *message = NULL;
  const char *detail = NULL;

  if (data && JSON_NODE_HOLDS_OBJECT (data))
    detail =
        legba_json_object_get_string (json_node_get_object (data), "error");
  else if (data && JSON_NODE_HOLDS_VALUE (data)
      && json_node_get_value_type (data) == G_TYPE_STRING)
    detail = json_node_get_string (data);
  message = g_strdup_printf ("The server refused to admit the participant "
      "to %s%s%s", self->channel, detail ? ": " : "", detail ? detail : "");
  legba_signal_client_fail (self, LEGBA_SIGNAL_ERROR_AUTH, message);
}

static LegbaSignalMember *
member_from_json (const char *id, JsonNode * user_info)
{
  return legba_signal_member_new (id, user_info &&
      JSON_NODE_HOLDS_OBJECT (user_info) ?
      json_node_get_object (user_info) : NULL);
}

/* Pusher protocol 7 presence: {"presence": {"ids", "hash", "count"}} */
static GHashTable *
parse_presence (LegbaSignalClient * self, JsonObject * frame)
{
  g_autoptr (JsonObject) data = frame_get_data_object (frame);
  GHashTable *members = g_hash_table_new_full (g_str_hash, g_str_equal,
      NULL, (GDestroyNotify) legba_signal_member_unref);
  JsonNode *presence = data ? json_object_get_member (data, "presence") : NULL;
  JsonObject *hash = NULL;
  JsonObjectIter iter;
  const char *id;
  JsonNode *info;

  if (presence && JSON_NODE_HOLDS_OBJECT (presence)) {
    JsonNode *node = json_object_get_member (json_node_get_object (presence),
        "hash");

    if (node && JSON_NODE_HOLDS_OBJECT (node))
      hash = json_node_get_object (node);
  }
  if (hash == NULL) {
    g_message ("Subscription without a presence member list; assuming "
        "an empty room");
    return members;
  }
  json_object_iter_init_ordered (&iter, hash);
  while (json_object_iter_next_ordered (&iter, &id, &info)) {
    LegbaSignalMember *member;

    if (g_str_equal (id, self->participant_id))
      continue;
    member = member_from_json (id, info);
    g_hash_table_insert (members, (gpointer) legba_signal_member_get_id
        (member), member);
  }
  return members;
}

/* legba-server's "ice_servers" beside "presence" (docs/server.md): TURN
 * credentials for this participant. FALSE when a handler replaced the
 * connection. */
static gboolean
emit_ice_servers (LegbaSignalClient * self, JsonObject * frame)
{
  LegbaSignalConnection *conn = self->conn;
  g_autoptr (JsonObject) data = frame_get_data_object (frame);
  JsonNode *servers = data ? json_object_get_member (data, "ice_servers") :
      NULL;
  g_auto (GStrv) uris = NULL;

  if (servers == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (servers)) {
    g_message ("Ignoring ice_servers that are not an array");
    return TRUE;
  }
  uris = legba_turn_uris_from_ice_servers (json_node_get_array (servers));
  g_signal_emit_by_name (self, "ice-servers", uris);
  return self->conn == conn;
}

static void
on_subscription_succeeded (LegbaSignalClient * self, JsonObject * frame)
{
  LegbaSignalConnection *conn = self->conn;
  g_autoptr (GHashTable) old = self->members;
  g_autoptr (GPtrArray) list = g_ptr_array_new_with_free_func ((GDestroyNotify)
      legba_signal_member_unref);
  GHashTableIter iter;
  LegbaSignalMember *member;

  if (conn->subscribed)
    return;
  if (!emit_ice_servers (self, frame))
    return;
  self->members = parse_presence (self, frame);
  conn->subscribed = TRUE;
  self->attempt = 0;
  legba_signal_timer_clear (&conn->connect_timer);
  self->was_joined = TRUE;

  /* After a reconnection: whoever left meanwhile is gone */
  g_hash_table_iter_init (&iter, old);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) & member)) {
    if (g_hash_table_contains (self->members,
            legba_signal_member_get_id (member)))
      continue;
    g_signal_emit_by_name (self, "member-left", member);
    if (self->conn != conn)
      return;
  }
  g_hash_table_iter_init (&iter, self->members);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) & member))
    g_ptr_array_add (list, legba_signal_member_ref (member));
  legba_signal_client_set_state (self, LEGBA_SIGNALLER_STATE_CONNECTED);
  if (self->conn != conn)
    return;
  g_signal_emit_by_name (self, "joined", list);
  if (self->conn == conn)
    legba_signal_client_pump (self);
}

static void
on_member_added (LegbaSignalClient * self, JsonObject * frame)
{
  g_autoptr (JsonObject) data = frame_get_data_object (frame);
  const char *id = data ? legba_json_object_get_string (data, "user_id") : NULL;
  LegbaSignalMember *member;

  if (id == NULL) {
    g_message ("Dropping a member_added without a user_id");
    return;
  }
  if (g_str_equal (id, self->participant_id))
    return;
  /* Pusher counts a user on several connections once */
  if (g_hash_table_contains (self->members, id))
    return;
  member = member_from_json (id, json_object_get_member (data, "user_info"));
  g_hash_table_insert (self->members,
      (gpointer) legba_signal_member_get_id (member), member);
  g_signal_emit_by_name (self, "member-joined", member);
}

static void
on_member_removed (LegbaSignalClient * self, JsonObject * frame)
{
  g_autoptr (JsonObject) data = frame_get_data_object (frame);
  const char *id = data ? legba_json_object_get_string (data, "user_id") : NULL;
  g_autoptr (LegbaSignalMember) member = NULL;

  if (id == NULL || !g_hash_table_steal_extended (self->members, id, NULL,
          (gpointer *) & member))
    return;
  g_signal_emit_by_name (self, "member-left", member);
}

static gboolean
on_expire_timer (gpointer user_data)
{
  LegbaSignalClient *self = user_data;

  if (legba_signal_reassembler_expire (self->reassembler,
          g_get_monotonic_time ()) > 0)
    return G_SOURCE_CONTINUE;
  g_clear_pointer (&self->expire_timer, g_source_unref);
  return G_SOURCE_REMOVE;
}

/* docs/room-protocol.md §4: a receiver drops a message unless `from` equals
 * the server-added user_id, ignores what is addressed to others, and
 * reassembles `part` messages by (from, id). */
static void
on_signal (LegbaSignalClient * self, JsonObject * frame)
{
  g_autoptr (JsonObject) signal = frame_get_data_object (frame);
  g_autoptr (GError) error = NULL;
  const char *user_id = legba_json_object_get_string (frame, "user_id");
  const char *to, *from;

  if (signal == NULL) {
    g_message ("Dropping a signal from %s: data is not a JSON object",
        user_id ? user_id : "an unknown sender");
    return;
  }
  /* addressed to someone else: not ours to judge */
  to = legba_json_object_get_string (signal, "to");
  if (to != NULL && !g_str_equal (to, self->participant_id))
    return;
  if (!legba_signal_check (signal, &error)) {
    g_message ("Dropping a malformed signal from %s: %s",
        user_id ? user_id : "an unknown sender", error->message);
    return;
  }
  from = legba_json_object_get_string (signal, "from");
  if (user_id == NULL || !g_str_equal (from, user_id) ||
      g_str_equal (from, self->participant_id)) {
    g_message ("Dropping a signal whose from \"%s\" is not its sender "
        "\"%s\"", from, user_id ? user_id : "(none)");
    return;
  }
  if (g_str_equal (legba_json_object_get_string (signal, "type"), "part")) {
    JsonObject *whole = legba_signal_reassembler_add (self->reassembler,
        signal, g_get_monotonic_time (), &error);

    if (self->expire_timer == NULL)
      legba_signal_timer_start (self, &self->expire_timer, 1000,
          on_expire_timer);
    if (whole == NULL) {
      if (error)
        g_message ("Dropping a part of a signal from %s: %s", from,
            error->message);
      return;
    }
    json_object_unref (signal);
    signal = whole;
    from = legba_json_object_get_string (signal, "from");
  }
  g_signal_emit_by_name (self, "signal-received", from, signal);
}

/* docs/room-protocol.md §7: an event the application's backend published */
static void
on_server_event (LegbaSignalClient * self, const char *event,
    JsonObject * frame)
{
  JsonNode *data = json_object_get_member (frame, "data");
  g_autoptr (JsonNode) value = NULL;

  if (data && JSON_NODE_HOLDS_VALUE (data) &&
      json_node_get_value_type (data) == G_TYPE_STRING)
    value = parse_string (json_node_get_string (data));
  if (value == NULL)
    value = data ? json_node_copy (data) : json_node_new (JSON_NODE_NULL);
  g_signal_emit_by_name (self, "event-received", event, value);
}

static void
handle_frame (LegbaSignalClient * self, JsonObject * frame)
{
  const char *event = legba_json_object_get_string (frame, "event");
  const char *channel = legba_json_object_get_string (frame, "channel");
  gboolean ours = self->conn->socket_id != NULL &&
      g_strcmp0 (channel, self->channel) == 0;

  if (event == NULL)
    return;
  if (g_str_equal (event, "pusher:connection_established"))
    on_connection_established (self, frame);
  else if (g_str_equal (event, "pusher:error"))
    on_pusher_error (self, frame);
  else if (g_str_equal (event, "pusher:ping"))
    legba_signal_client_send_event (self, "pusher:pong", NULL);
  else if (!ours)
    g_debug ("Ignoring %s on %s", event, channel ? channel : "no channel");
  else if (g_str_equal (event, "pusher_internal:subscription_succeeded"))
    on_subscription_succeeded (self, frame);
  else if (g_str_equal (event, "pusher:subscription_error"))
    on_subscription_error (self, frame);
  else if (!self->conn->subscribed && (g_str_has_prefix (event, "client-")
          || g_str_has_prefix (event, "pusher")))
    g_debug ("Ignoring %s before the subscription", event);
  else if (!self->conn->subscribed)
    /* docs/room-protocol.md §8: the server's word to this socket alone
     * (an SFU room's topology) comes before subscription_succeeded */
    on_server_event (self, event, frame);
  else if (g_str_equal (event, "pusher_internal:member_added"))
    on_member_added (self, frame);
  else if (g_str_equal (event, "pusher_internal:member_removed"))
    on_member_removed (self, frame);
  else if (g_str_equal (event, SIGNAL_EVENT))
    on_signal (self, frame);
  else if (!g_str_has_prefix (event, "client-") &&
      !g_str_has_prefix (event, "pusher"))
    on_server_event (self, event, frame);
}

static void
on_ws_message (SoupWebsocketConnection * ws, SoupWebsocketDataType type,
    GBytes * message, gpointer user_data)
{
  LegbaSignalClient *self = user_data;
  LegbaSignalConnection *conn = self->conn;
  g_autoptr (JsonNode) root = NULL;
  const char *text;
  gsize len;

  /* Pusher protocol 7: any message proves the connection alive */
  conn->last_received = g_get_monotonic_time ();
  legba_signal_timer_clear (&conn->pong_timer);
  if (conn->activity_timer == NULL)
    legba_signal_timer_start (self, &conn->activity_timer, conn->activity_ms,
        on_activity_timeout);

  text = g_bytes_get_data (message, &len);
  if (type == SOUP_WEBSOCKET_DATA_TEXT)
    root = parse_json (text, len);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    g_message ("Ignoring a frame that is not a JSON object");
    return;
  }
  g_object_ref (self);
  handle_frame (self, json_node_get_object (root));
  g_object_unref (self);
}

static void
on_ws_connected (GObject * source, GAsyncResult * result, gpointer user_data)
{
  LegbaSignalClient *self;
  LegbaSignalConnection *conn;
  g_autoptr (GError) error = NULL;
  g_autofree char *message = NULL;
  SoupWebsocketConnection *ws;

  ws = soup_session_websocket_connect_finish (SOUP_SESSION (source), result,
      &error);
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  self = user_data;
  conn = self->conn;
  if (ws == NULL) {
    message = g_strdup_printf ("Could not connect to %s: %s",
        self->server_url, error->message);
    retry_after_error (self, RETRY_BACKOFF, message);
    return;
  }
  conn->ws = ws;
  conn->last_received = g_get_monotonic_time ();
  soup_websocket_connection_set_max_incoming_payload_size (ws,
      MAX_INCOMING_PAYLOAD);
  g_signal_connect (ws, "message", G_CALLBACK (on_ws_message), self);
  g_signal_connect (ws, "closed", G_CALLBACK (on_ws_closed), self);
  g_signal_connect (ws, "error", G_CALLBACK (on_ws_error), self);
}

void
legba_signal_client_start_connection (LegbaSignalClient * self)
{
  LegbaSignalConnection *conn = g_new0 (LegbaSignalConnection, 1);
  g_autofree char *url = legba_signal_client_websocket_url (self);
  g_autoptr (SoupMessage) msg = NULL;

  conn->cancellable = g_cancellable_new ();
  conn->activity_ms = self->activity_timeout;
  self->conn = conn;
  self->event_bytes = self->client_event_bytes;
  self->events_per_window = self->client_events_per_second;
  if (url == NULL || (msg = soup_message_new ("GET", url)) == NULL) {
    legba_signal_client_fail (self, LEGBA_SIGNAL_ERROR_INVALID,
        "Invalid server URL or app key");
    return;
  }
  g_debug ("Connecting to %s", url);
  legba_signal_timer_start (self, &conn->connect_timer, self->connect_timeout,
      on_connect_timeout);
  g_main_context_push_thread_default (self->context);
  soup_session_websocket_connect_async (self->session, msg, NULL, NULL,
      G_PRIORITY_DEFAULT, conn->cancellable, on_ws_connected, self);
  g_main_context_pop_thread_default (self->context);
}
