/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#include <legba/signal/legba-signal-client-private.h>

#include <legba/common/legba-json.h>
#include <legba/legba-version.h>

#define CHANNEL_PREFIX "presence-legba."
#define SIGNAL_EVENT "client-legba-signal"

#define DEFAULT_CONNECT_TIMEOUT 15000
/* pusher-js: activityTimeout 120 s, pongTimeout 30 s */
#define DEFAULT_ACTIVITY_TIMEOUT 120000
#define DEFAULT_PONG_TIMEOUT 30000
#define DEFAULT_RECONNECT_DELAY_MIN 1000
#define DEFAULT_RECONNECT_DELAY_MAX 30000

enum
{
  PROP_0,
  PROP_SERVER_URL,
  PROP_APP_KEY,
  PROP_APP_ID,
  PROP_APP_SECRET,
  PROP_AUTH_URL,
  PROP_TOKEN,
  PROP_CA_FILE,
  PROP_CONNECT_TIMEOUT,
  PROP_ACTIVITY_TIMEOUT,
  PROP_PONG_TIMEOUT,
  PROP_RECONNECT_DELAY_MIN,
  PROP_RECONNECT_DELAY_MAX,
  PROP_CLIENT_EVENT_BYTES,
  PROP_CLIENT_EVENTS_PER_SECOND,
  PROP_SOCKET_ID,
  N_PROPERTIES,
  PROP_STATE = N_PROPERTIES,
};

static GParamSpec *properties[N_PROPERTIES + 1];

/* A signal waiting in the send queue, split for a given event size. */
typedef struct
{
  JsonObject *signal;
  GPtrArray *frames;            /* "data" texts */
  gsize limit;
  guint next;
} Outgoing;

static void
outgoing_free (Outgoing * out)
{
  json_object_unref (out->signal);
  g_clear_pointer (&out->frames, g_ptr_array_unref);
  g_free (out);
}

static void legba_signal_client_signaller_init (LegbaSignallerInterface *
    iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (LegbaSignalClient, legba_signal_client,
    G_TYPE_OBJECT, G_IMPLEMENT_INTERFACE (LEGBA_TYPE_SIGNALLER,
        legba_signal_client_signaller_init));

/* ---- State and errors ---- */

void
legba_signal_client_set_state (LegbaSignalClient * self,
    LegbaSignallerState state)
{
  if (self->state == state)
    return;
  self->state = state;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATE]);
}

void
legba_signal_client_emit_error (LegbaSignalClient * self, int code,
    const char *format, ...)
{
  g_autoptr (GError) error = NULL;
  va_list args;

  va_start (args, format);
  error = g_error_new_valist (LEGBA_SIGNAL_ERROR, code, format, args);
  va_end (args);
  g_info ("Signalling error: %s", error->message);
  g_signal_emit_by_name (self, "error", error);
}

/* Leaves the room state behind: after leave() or a fatal error. */
static void
clear_room (LegbaSignalClient * self)
{
  Outgoing *out;

  self->in_room = FALSE;
  self->was_joined = FALSE;
  legba_signal_timer_clear (&self->reconnect_timer);
  legba_signal_timer_clear (&self->expire_timer);
  while ((out = g_queue_pop_head (&self->queue)))
    outgoing_free (out);
  g_array_set_size (self->sent_times, 0);
  g_clear_pointer (&self->reassembler, legba_signal_reassembler_free);
  g_hash_table_remove_all (self->members);
  g_clear_pointer (&self->channel, g_free);
  g_clear_pointer (&self->participant_id, g_free);
  g_clear_pointer (&self->identity, g_free);
  g_clear_pointer (&self->display_name, g_free);
}

void
legba_signal_client_fail (LegbaSignalClient * self, int code,
    const char *message)
{
  g_autoptr (GError) error = g_error_new_literal (LEGBA_SIGNAL_ERROR, code,
      message);

  g_object_ref (self);
  legba_signal_client_drop_connection (self, SOUP_WEBSOCKET_CLOSE_NORMAL);
  clear_room (self);
  g_info ("Signalling failed: %s", message);
  g_signal_emit_by_name (self, "error", error);
  legba_signal_client_set_state (self, LEGBA_SIGNALLER_STATE_FAILED);
  g_object_unref (self);
}

/* ---- Sending ---- */

static gboolean
split_outgoing (LegbaSignalClient * self, Outgoing * out, GError ** error)
{
  char id[24];
  GPtrArray *frames;

  g_snprintf (id, sizeof id, "%" G_GUINT64_FORMAT, ++self->next_part_id);
  frames = legba_signal_split (out->signal, id, self->event_bytes, error);
  if (frames == NULL)
    return FALSE;
  g_clear_pointer (&out->frames, g_ptr_array_unref);
  out->frames = frames;
  out->limit = self->event_bytes;
  out->next = 0;
  return TRUE;
}

static gboolean
on_pace_timer (gpointer user_data)
{
  LegbaSignalClient *self = user_data;

  g_clear_pointer (&self->conn->pace_timer, g_source_unref);
  legba_signal_client_pump (self);
  return G_SOURCE_REMOVE;
}

/* Sends the next queued part, after splitting its signal again if the
 * connection's event size is not the one it was split for. */
static void
send_next_frame (LegbaSignalClient * self, gint64 now)
{
  Outgoing *out = g_queue_peek_head (&self->queue);
  g_autoptr (GError) error = NULL;
  g_autofree char *frame = NULL;

  if (out->next == 0 && out->limit != self->event_bytes &&
      !split_outgoing (self, out, &error)) {
    g_queue_pop_head (&self->queue);
    outgoing_free (out);
    legba_signal_client_emit_error (self, LEGBA_SIGNAL_ERROR_TOO_LARGE,
        "Dropped a queued signal: %s", error->message);
    return;
  }
  /* Pusher protocol 7 client event; data as an object, as pusher-js */
  frame = g_strconcat ("{\"event\":\"" SIGNAL_EVENT "\",\"channel\":\"",
      self->channel, "\",\"data\":", out->frames->pdata[out->next++], "}",
      NULL);
  legba_signal_client_send_text (self, frame);
  g_array_append_val (self->sent_times, now);
  if (out->next == out->frames->len) {
    g_queue_pop_head (&self->queue);
    outgoing_free (out);
  }
}

/* docs/room-protocol.md §4: at most events_per_window client events in any
 * sliding window of 1.1 s; the queue waits, nothing is dropped. */
void
legba_signal_client_pump (LegbaSignalClient * self)
{
  LegbaSignalConnection *conn = self->conn;
  gint64 now = g_get_monotonic_time ();
  guint expired = 0;
  gint64 wait;

  if (conn == NULL || !conn->subscribed)
    return;
  legba_signal_timer_clear (&conn->pace_timer);
  while (expired < self->sent_times->len &&
      g_array_index (self->sent_times, gint64, expired) <=
      now - LEGBA_SIGNAL_RATE_WINDOW_US)
    expired++;
  g_array_remove_range (self->sent_times, 0, expired);

  while (!g_queue_is_empty (&self->queue) &&
      self->sent_times->len < MAX (self->events_per_window, 1)) {
    send_next_frame (self, now);
    if (self->conn != conn)
      return;
  }
  if (g_queue_is_empty (&self->queue))
    return;
  wait = g_array_index (self->sent_times, gint64, 0) +
      LEGBA_SIGNAL_RATE_WINDOW_US - now;
  legba_signal_timer_start (self, &conn->pace_timer, (wait + 999) / 1000,
      on_pace_timer);
}

static gboolean
legba_signal_client_send (LegbaSignaller * signaller, const char *to,
    JsonObject * signal, GError ** error)
{
  LegbaSignalClient *self = LEGBA_SIGNAL_CLIENT (signaller);
  Outgoing *out;
  JsonObjectIter iter;
  const char *name;
  JsonNode *node;
  JsonObject *copy;

  if (!self->in_room) {
    g_set_error_literal (error, LEGBA_SIGNAL_ERROR,
        LEGBA_SIGNAL_ERROR_NOT_JOINED, "No room joined");
    return FALSE;
  }
  copy = json_object_new ();
  json_object_set_string_member (copy, "to", to);
  json_object_set_string_member (copy, "from", self->participant_id);
  json_object_iter_init_ordered (&iter, signal);
  while (json_object_iter_next_ordered (&iter, &name, &node))
    if (!g_str_equal (name, "to") && !g_str_equal (name, "from"))
      json_object_set_member (copy, name, json_node_copy (node));

  out = g_new0 (Outgoing, 1);
  out->signal = copy;
  if (!legba_signal_check (copy, error)) {
    outgoing_free (out);
    return FALSE;
  }
  if (g_str_equal (legba_json_object_get_string (copy, "type"), "part")) {
    outgoing_free (out);
    g_set_error_literal (error, LEGBA_SIGNAL_ERROR,
        LEGBA_SIGNAL_ERROR_INVALID, "part messages are the signaller's own");
    return FALSE;
  }
  if (!split_outgoing (self, out, error)) {
    outgoing_free (out);
    return FALSE;
  }
  g_queue_push_tail (&self->queue, out);
  legba_signal_client_pump (self);
  return TRUE;
}

/* ---- Joining and leaving ---- */

gboolean
legba_url_is_loopback (const char *url)
{
  g_autoptr (GUri) uri = url ? g_uri_parse (url, G_URI_FLAGS_NONE, NULL) : NULL;
  const char *host = uri ? g_uri_get_host (uri) : NULL;
  g_autoptr (GInetAddress) address = NULL;

  if (host == NULL)
    return FALSE;
  if (g_ascii_strcasecmp (host, "localhost") == 0)
    return TRUE;
  address = g_inet_address_new_from_string (host);
  return address != NULL && g_inet_address_get_is_loopback (address);
}

/* A server on this machine is reached directly: no proxy is meant for
 * it. The system's resolver (libproxy on Debian) would send it to an
 * http_proxy all the same, and asking it costs a worker thread about
 * 2 ms of CPU per connection. */
static gboolean
needs_proxy_resolver (LegbaSignalClient * self)
{
  return !legba_url_is_loopback (self->server_url) ||
      (self->auth_url != NULL && !legba_url_is_loopback (self->auth_url));
}

static gboolean
prepare_session (LegbaSignalClient * self, GError ** error)
{
  g_autoptr (GTlsDatabase) database = NULL;

  g_clear_object (&self->session);
  if (self->ca_file) {
    database = g_tls_file_database_new (self->ca_file, error);
    if (database == NULL) {
      g_prefix_error (error, "Cannot use ca-file %s: ", self->ca_file);
      return FALSE;
    }
  }
  self->session = soup_session_new_with_options ("user-agent",
      LEGBA_SIGNAL_CLIENT_NAME "/" LEGBA_VERSION, "timeout",
      (self->connect_timeout + 999) / 1000, NULL);
  if (database)
    soup_session_set_tls_database (self->session, database);
  if (!needs_proxy_resolver (self))
    soup_session_set_proxy_resolver (self->session, NULL);
  return TRUE;
}

static gboolean
check_config (LegbaSignalClient * self, GError ** error)
{
  g_autofree char *url = legba_signal_client_websocket_url (self);
  const char *problem = NULL;
  GError *local = NULL;

  if (url == NULL)
    problem = "server-url must be a ws, wss, http or https URL and app-key "
        "must be set";
  else if (self->token && !self->auth_url && !self->app_id)
    problem = "a token needs app-id (legba-server) or auth-url";
  else if (!self->token && !self->auth_url && !self->app_secret)
    problem = "set token, auth-url or app-secret to authenticate";
  if (problem) {
    g_set_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID,
        "Cannot join: %s", problem);
    return FALSE;
  }
  /* libsoup: a session belongs to the context it was created in */
  g_main_context_push_thread_default (self->context);
  prepare_session (self, &local);
  g_main_context_pop_thread_default (self->context);
  if (local != NULL) {
    g_set_error_literal (error, LEGBA_SIGNAL_ERROR,
        LEGBA_SIGNAL_ERROR_INVALID, local->message);
    g_error_free (local);
    return FALSE;
  }
  return TRUE;
}

static gboolean
legba_signal_client_join (LegbaSignaller * signaller, const char *room,
    const char *participant_id, const char *identity,
    const char *display_name, GError ** error)
{
  LegbaSignalClient *self = LEGBA_SIGNAL_CLIENT (signaller);

  if (self->in_room) {
    g_set_error_literal (error, LEGBA_SIGNAL_ERROR,
        LEGBA_SIGNAL_ERROR_NOT_JOINED, "A room is already joined");
    return FALSE;
  }
  if (!legba_signaller_check_participant (room, participant_id, identity,
          error))
    return FALSE;
  if (display_name && !g_utf8_validate (display_name, -1, NULL)) {
    g_set_error_literal (error, LEGBA_SIGNAL_ERROR,
        LEGBA_SIGNAL_ERROR_INVALID, "The display name is not UTF-8");
    return FALSE;
  }
  if (self->context == NULL)
    self->context = g_main_context_ref_thread_default ();
  if (!check_config (self, error))
    return FALSE;

  self->in_room = TRUE;
  self->was_joined = FALSE;
  self->attempt = 0;
  self->channel = g_strconcat (CHANNEL_PREFIX, room, NULL);
  self->participant_id = g_strdup (participant_id);
  self->identity = g_strdup (identity);
  self->display_name = g_strdup (display_name ? display_name : identity);
  self->reassembler = legba_signal_reassembler_new ();
  legba_signal_client_set_state (self, LEGBA_SIGNALLER_STATE_CONNECTING);
  legba_signal_client_start_connection (self);
  return TRUE;
}

static void
legba_signal_client_leave (LegbaSignaller * signaller)
{
  LegbaSignalClient *self = LEGBA_SIGNAL_CLIENT (signaller);
  g_autoptr (JsonObject) data = NULL;

  if (self->in_room) {
    if (self->conn && self->conn->subscribed) {
      data = json_object_new ();
      json_object_set_string_member (data, "channel", self->channel);
      legba_signal_client_send_event (self, "pusher:unsubscribe", data);
    }
    legba_signal_client_drop_connection (self, SOUP_WEBSOCKET_CLOSE_NORMAL);
    clear_room (self);
  }
  legba_signal_client_set_state (self, LEGBA_SIGNALLER_STATE_DISCONNECTED);
}

static LegbaSignallerState
legba_signal_client_get_state (LegbaSignaller * signaller)
{
  return LEGBA_SIGNAL_CLIENT (signaller)->state;
}

static gboolean
legba_signal_client_is_loopback (LegbaSignaller * signaller)
{
  return legba_url_is_loopback (LEGBA_SIGNAL_CLIENT (signaller)->server_url);
}

static void
legba_signal_client_signaller_init (LegbaSignallerInterface * iface)
{
  iface->join = legba_signal_client_join;
  iface->leave = legba_signal_client_leave;
  iface->send = legba_signal_client_send;
  iface->get_state = legba_signal_client_get_state;
  iface->is_loopback = legba_signal_client_is_loopback;
}

/* ---- GObject ---- */

static void
legba_signal_client_init (LegbaSignalClient * self)
{
  self->auth_params = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      g_free);
  self->auth_headers = g_hash_table_new_full (g_str_hash, g_str_equal,
      g_free, g_free);
  self->members = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
      (GDestroyNotify) legba_signal_member_unref);
  self->sent_times = g_array_new (FALSE, FALSE, sizeof (gint64));
  self->closing = g_ptr_array_new_with_free_func (g_object_unref);
  g_queue_init (&self->queue);
  self->connect_timeout = DEFAULT_CONNECT_TIMEOUT;
  self->activity_timeout = DEFAULT_ACTIVITY_TIMEOUT;
  self->pong_timeout = DEFAULT_PONG_TIMEOUT;
  self->reconnect_delay_min = DEFAULT_RECONNECT_DELAY_MIN;
  self->reconnect_delay_max = DEFAULT_RECONNECT_DELAY_MAX;
  self->client_event_bytes = LEGBA_SIGNAL_DEFAULT_EVENT_BYTES;
  self->client_events_per_second = LEGBA_SIGNAL_DEFAULT_EVENTS_PER_WINDOW;
}

static void
legba_signal_client_dispose (GObject * object)
{
  LegbaSignalClient *self = LEGBA_SIGNAL_CLIENT (object);

  legba_signal_client_drop_connection (self, SOUP_WEBSOCKET_CLOSE_GOING_AWAY);
  clear_room (self);
  /* closing WebSockets are released now, without waiting for the peer */
  while (self->closing->len > 0) {
    g_signal_handlers_disconnect_by_data (self->closing->pdata[0], self);
    g_ptr_array_remove_index_fast (self->closing, 0);
  }
  g_clear_object (&self->session);

  G_OBJECT_CLASS (legba_signal_client_parent_class)->dispose (object);
}

static void
legba_signal_client_finalize (GObject * object)
{
  LegbaSignalClient *self = LEGBA_SIGNAL_CLIENT (object);

  g_free (self->server_url);
  g_free (self->app_key);
  g_free (self->app_id);
  g_free (self->app_secret);
  g_free (self->auth_url);
  g_free (self->token);
  g_free (self->ca_file);
  g_hash_table_unref (self->auth_params);
  g_hash_table_unref (self->auth_headers);
  g_hash_table_unref (self->members);
  g_array_unref (self->sent_times);
  g_ptr_array_unref (self->closing);
  g_clear_pointer (&self->context, g_main_context_unref);

  G_OBJECT_CLASS (legba_signal_client_parent_class)->finalize (object);
}

static char **
string_slot (LegbaSignalClient * self, guint prop_id)
{
  switch (prop_id) {
    case PROP_SERVER_URL:
      return &self->server_url;
    case PROP_APP_KEY:
      return &self->app_key;
    case PROP_APP_ID:
      return &self->app_id;
    case PROP_APP_SECRET:
      return &self->app_secret;
    case PROP_AUTH_URL:
      return &self->auth_url;
    case PROP_TOKEN:
      return &self->token;
    case PROP_CA_FILE:
      return &self->ca_file;
    default:
      return NULL;
  }
}

static guint *
uint_slot (LegbaSignalClient * self, guint prop_id)
{
  switch (prop_id) {
    case PROP_CONNECT_TIMEOUT:
      return &self->connect_timeout;
    case PROP_ACTIVITY_TIMEOUT:
      return &self->activity_timeout;
    case PROP_PONG_TIMEOUT:
      return &self->pong_timeout;
    case PROP_RECONNECT_DELAY_MIN:
      return &self->reconnect_delay_min;
    case PROP_RECONNECT_DELAY_MAX:
      return &self->reconnect_delay_max;
    case PROP_CLIENT_EVENT_BYTES:
      return &self->client_event_bytes;
    case PROP_CLIENT_EVENTS_PER_SECOND:
      return &self->client_events_per_second;
    default:
      return NULL;
  }
}

static void
legba_signal_client_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  LegbaSignalClient *self = LEGBA_SIGNAL_CLIENT (object);
  char **string = string_slot (self, prop_id);
  guint *number = uint_slot (self, prop_id);
  const char *s;

  if (string) {
    s = g_value_get_string (value);
    g_free (*string);
    *string = s && s[0] ? g_strdup (s) : NULL;
  } else if (number) {
    *number = g_value_get_uint (value);
  } else {
    G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
}

static void
legba_signal_client_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  LegbaSignalClient *self = LEGBA_SIGNAL_CLIENT (object);
  char **string = string_slot (self, prop_id);
  guint *number = uint_slot (self, prop_id);

  if (string)
    g_value_set_string (value, *string);
  else if (number)
    g_value_set_uint (value, *number);
  else if (prop_id == PROP_SOCKET_ID)
    g_value_set_string (value, legba_signal_client_get_socket_id (self));
  else if (prop_id == PROP_STATE)
    g_value_set_enum (value, self->state);
  else
    G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
}

#define STRING_PROP(name, nick, blurb) \
  g_param_spec_string (name, nick, blurb, NULL, G_PARAM_READWRITE | \
      G_PARAM_STATIC_STRINGS)
#define UINT_PROP(name, nick, blurb, min, def) \
  g_param_spec_uint (name, nick, blurb, min, G_MAXINT, def, \
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS)

static void
legba_signal_client_class_init (LegbaSignalClientClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);

  gobject_class->dispose = legba_signal_client_dispose;
  gobject_class->finalize = legba_signal_client_finalize;
  gobject_class->set_property = legba_signal_client_set_property;
  gobject_class->get_property = legba_signal_client_get_property;

  /**
   * LegbaSignalClient:server-url:
   *
   * The server: `ws://HOST:PORT` or `wss://HOST:PORT` (`http` and `https`
   * are read as `ws` and `wss`), optionally with a path prefix that the
   * Pusher path `/app/APP_KEY` is appended to.
   */
  properties[PROP_SERVER_URL] = STRING_PROP ("server-url", "Server URL",
      "Signalling server: ws://HOST:PORT or wss://HOST:PORT (legba-server or "
      "any Pusher protocol 7 server)");
  /**
   * LegbaSignalClient:app-key:
   *
   * The Pusher app key; it names the app in the WebSocket URL.
   */
  properties[PROP_APP_KEY] = STRING_PROP ("app-key", "App key",
      "The Pusher app key");
  /**
   * LegbaSignalClient:app-id:
   *
   * The app id, used with #LegbaSignalClient:token to reach legba-server's
   * `POST /apps/APP_ID/auth` at the server's address.
   */
  properties[PROP_APP_ID] = STRING_PROP ("app-id", "App id",
      "The app id: with token, locates legba-server's /apps/ID/auth");
  /**
   * LegbaSignalClient:app-secret:
   *
   * The app secret, to sign the presence subscription locally. Only for
   * programs trusted with the secret; others use a token or an auth URL.
   */
  properties[PROP_APP_SECRET] = STRING_PROP ("app-secret", "App secret",
      "The app secret, to sign the room subscription locally (programs "
      "trusted with it only; others use token or auth-url)");
  /**
   * LegbaSignalClient:auth-url:
   *
   * An authorization endpoint called as pusher-js calls it: a form POST of
   * `socket_id`, `channel_name` and `suffix` (the participant id's suffix)
   * plus the parameters of legba_signal_client_add_auth_param(), answered
   * with JSON `{"auth": ..., "channel_data": ...}` for the participant id.
   */
  properties[PROP_AUTH_URL] = STRING_PROP ("auth-url", "Auth URL",
      "The application's auth endpoint (called as pusher-js calls it), or "
      "with token, legba-server's auth URL");
  /**
   * LegbaSignalClient:token:
   *
   * A join token (legba_join_token_new()), sent as `Authorization: Bearer`
   * to #LegbaSignalClient:auth-url, or to legba-server's
   * `/apps/APP_ID/auth` when only #LegbaSignalClient:app-id is set.
   */
  properties[PROP_TOKEN] = STRING_PROP ("token", "Token",
      "A join token for this room and identity (legba-token), for the auth "
      "endpoint");
  /**
   * LegbaSignalClient:ca-file:
   *
   * A PEM file of the certificate authorities to trust for `wss://` and
   * `https://` instead of the system's, for private deployments.
   */
  properties[PROP_CA_FILE] = STRING_PROP ("ca-file", "CA file",
      "PEM file of trusted CAs instead of the system's");
  /**
   * LegbaSignalClient:connect-timeout:
   *
   * Milliseconds a connection attempt may take, from opening the
   * WebSocket to the subscription's answer, before it is retried.
   */
  properties[PROP_CONNECT_TIMEOUT] = UINT_PROP ("connect-timeout",
      "Connect timeout", "Milliseconds to join before retrying", 1,
      DEFAULT_CONNECT_TIMEOUT);
  /**
   * LegbaSignalClient:activity-timeout:
   *
   * Milliseconds of silence from the server after which the client sends
   * `pusher:ping`; a server's lower `activity_timeout` wins.
   */
  properties[PROP_ACTIVITY_TIMEOUT] = UINT_PROP ("activity-timeout",
      "Activity timeout", "Milliseconds of silence before pinging", 1,
      DEFAULT_ACTIVITY_TIMEOUT);
  /**
   * LegbaSignalClient:pong-timeout:
   *
   * Milliseconds to wait for any answer to `pusher:ping` before the
   * connection is considered lost and is replaced.
   */
  properties[PROP_PONG_TIMEOUT] = UINT_PROP ("pong-timeout", "Pong timeout",
      "Milliseconds to wait for pusher:pong", 1, DEFAULT_PONG_TIMEOUT);
  /**
   * LegbaSignalClient:reconnect-delay-min:
   *
   * Milliseconds of the first backoff step; each failed attempt doubles
   * it up to #LegbaSignalClient:reconnect-delay-max, and each delay is
   * drawn between half and all of the step (jitter).
   */
  properties[PROP_RECONNECT_DELAY_MIN] = UINT_PROP ("reconnect-delay-min",
      "Reconnect delay min", "First backoff step in milliseconds", 1,
      DEFAULT_RECONNECT_DELAY_MIN);
  /**
   * LegbaSignalClient:reconnect-delay-max:
   *
   * Milliseconds the backoff step grows to at most.
   */
  properties[PROP_RECONNECT_DELAY_MAX] = UINT_PROP ("reconnect-delay-max",
      "Reconnect delay max", "Largest backoff step in milliseconds", 1,
      DEFAULT_RECONNECT_DELAY_MAX);
  /**
   * LegbaSignalClient:client-event-bytes:
   *
   * The size limit of one client event (docs/room-protocol.md §4) assumed when
   * the server does not advertise one; larger signals are split.
   */
  properties[PROP_CLIENT_EVENT_BYTES] = UINT_PROP ("client-event-bytes",
      "Client event bytes", "Assumed client event size limit", 256,
      LEGBA_SIGNAL_DEFAULT_EVENT_BYTES);
  /**
   * LegbaSignalClient:client-events-per-second:
   *
   * The client event rate (docs/room-protocol.md §4) assumed when the server
   * does not advertise one; signals are paced to at most this many in any
   * 1.1 s.
   */
  properties[PROP_CLIENT_EVENTS_PER_SECOND] =
      UINT_PROP ("client-events-per-second", "Client events per second",
      "Assumed client event rate limit", 1,
      LEGBA_SIGNAL_DEFAULT_EVENTS_PER_WINDOW);
  /**
   * LegbaSignalClient:socket-id:
   *
   * The Pusher socket id of the current connection, or %NULL.
   */
  properties[PROP_SOCKET_ID] = g_param_spec_string ("socket-id", "Socket id",
      "Pusher socket id of the current connection", NULL,
      G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);

  g_object_class_install_properties (gobject_class, N_PROPERTIES, properties);
  g_object_class_override_property (gobject_class, PROP_STATE, "state");
  properties[PROP_STATE] = g_object_class_find_property (gobject_class,
      "state");
}

/**
 * legba_signal_client_new:
 * @server_url: the server's `ws://` or `wss://` URL
 * @app_key: the Pusher app key
 *
 * Creates a client for @server_url. Set one way to authenticate
 * (#LegbaSignalClient:token, #LegbaSignalClient:auth-url or
 * #LegbaSignalClient:app-secret) before legba_signaller_join(). The client
 * runs on the thread-default main context of the thread that first joins
 * a room with it.
 *
 * Returns: (transfer full): a new #LegbaSignalClient
 */
LegbaSignalClient *
legba_signal_client_new (const char *server_url, const char *app_key)
{
  return g_object_new (LEGBA_TYPE_SIGNAL_CLIENT, "server-url", server_url,
      "app-key", app_key, NULL);
}

/**
 * legba_signal_client_add_auth_param:
 * @self: a #LegbaSignalClient
 * @name: a form field name
 * @value: its value
 *
 * Adds a field to the form posted to the authorization endpoint (as
 * pusher-js's `auth.params`), replacing one of the same name. The fields
 * `socket_id`, `channel_name` and `suffix` are the client's own.
 */
void
legba_signal_client_add_auth_param (LegbaSignalClient * self,
    const char *name, const char *value)
{
  g_return_if_fail (LEGBA_IS_SIGNAL_CLIENT (self));
  g_return_if_fail (name != NULL && value != NULL);

  g_hash_table_replace (self->auth_params, g_strdup (name), g_strdup (value));
}

/**
 * legba_signal_client_add_auth_header:
 * @self: a #LegbaSignalClient
 * @name: an HTTP header name
 * @value: its value
 *
 * Adds a header to the requests to the authorization endpoint (as
 * pusher-js's `auth.headers`), for example a session cookie or a CSRF
 * token. With #LegbaSignalClient:token set, `Authorization` is the
 * client's own.
 */
void
legba_signal_client_add_auth_header (LegbaSignalClient * self,
    const char *name, const char *value)
{
  g_return_if_fail (LEGBA_IS_SIGNAL_CLIENT (self));
  g_return_if_fail (name != NULL && value != NULL);

  g_hash_table_replace (self->auth_headers, g_strdup (name), g_strdup (value));
}

/**
 * legba_signal_client_get_socket_id:
 * @self: a #LegbaSignalClient
 *
 * Gets the socket id the server gave the current connection (Pusher
 * protocol 7, `pusher:connection_established`).
 *
 * Returns: (transfer none) (nullable): the Pusher socket id of the
 *   current connection, or %NULL when not connected
 */
const char *
legba_signal_client_get_socket_id (LegbaSignalClient * self)
{
  g_return_val_if_fail (LEGBA_IS_SIGNAL_CLIENT (self), NULL);

  return self->conn ? self->conn->socket_id : NULL;
}
