/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-probe's libsoup side: a Pusher protocol 7 WebSocket client driven
 * synchronously (every wait iterates the thread-default main context up to
 * a deadline), the signed Pusher HTTP API, options and statistics shared by
 * the subcommands.
 */
#include "probe.h"

#include <legba/common/legba-auth.h>
#include <libsoup/soup.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- options ---- */

static GOptionEntry common_entries[8];

GOptionEntry *
probe_common_entries (ProbeCommon * common)
{
  const GOptionEntry entries[] = {
    {"url", 0, 0, G_OPTION_ARG_STRING, &common->url,
        "WebSocket base URL of the server", "ws://HOST:PORT"},
    {"api-url", 0, 0, G_OPTION_ARG_STRING, &common->api_url,
        "HTTP API base URL (default: derived from --url)", "http://HOST:PORT"},
    {"app-id", 0, 0, G_OPTION_ARG_STRING, &common->app_id,
        "Application id", "ID"},
    {"app-key", 0, 0, G_OPTION_ARG_STRING, &common->app_key,
        "Application key", "KEY"},
    {"app-secret", 0, 0, G_OPTION_ARG_STRING, &common->app_secret,
          "Application secret (signs subscriptions and API calls locally)",
        "SECRET"},
    {"timeout", 0, 0, G_OPTION_ARG_INT, &common->timeout_s,
          "Give up after this many seconds in all (default 30; load: 120)",
        "S"},
    {"json", 0, 0, G_OPTION_ARG_NONE, &common->json,
        "Print the result as one JSON object", NULL},
    {NULL}
  };

  G_STATIC_ASSERT (G_N_ELEMENTS (entries) == G_N_ELEMENTS (common_entries));
  memcpy (common_entries, entries, sizeof (entries));
  if (common->timeout_s == 0)
    common->timeout_s = 30;
  return common_entries;
}

/* ws://H:P[/...] -> http://H:P, wss -> https */
static char *
derive_api_url (const char *url)
{
  g_autoptr (GUri) uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);
  const char *scheme;

  if (uri == NULL || g_uri_get_host (uri) == NULL)
    return NULL;
  scheme = g_uri_get_scheme (uri);
  if (g_ascii_strcasecmp (scheme, "wss") == 0)
    scheme = "https";
  else if (g_ascii_strcasecmp (scheme, "ws") == 0)
    scheme = "http";
  return g_uri_join (G_URI_FLAGS_NONE, scheme, NULL, g_uri_get_host (uri),
      g_uri_get_port (uri), "", NULL, NULL);
}

gboolean
probe_common_validate (ProbeCommon * common, gboolean need_url)
{
  if ((need_url && common->url == NULL) || common->app_id == NULL
      || common->app_key == NULL || common->app_secret == NULL) {
    g_printerr ("legba-probe: %s--app-id, --app-key and --app-secret are "
        "required\n", need_url ? "--url, " : "");
    return FALSE;
  }
  if (common->timeout_s <= 0) {
    g_printerr ("legba-probe: --timeout must be positive\n");
    return FALSE;
  }
  if (common->api_url == NULL && common->url != NULL) {
    common->api_url = derive_api_url (common->url);
    if (common->api_url == NULL) {
      g_printerr ("legba-probe: cannot parse --url %s\n", common->url);
      return FALSE;
    }
  }
  return TRUE;
}

void
probe_common_clear (ProbeCommon * common)
{
  g_clear_pointer (&common->url, g_free);
  g_clear_pointer (&common->api_url, g_free);
  g_clear_pointer (&common->app_id, g_free);
  g_clear_pointer (&common->app_key, g_free);
  g_clear_pointer (&common->app_secret, g_free);
}

gboolean
probe_parse_options (const char *command, const char *summary,
    GOptionEntry * entries, GOptionEntry * common, int *argc, char ***argv)
{
  g_autofree char *name = g_strdup_printf ("legba-probe %s", command);
  g_autoptr (GOptionContext) context = g_option_context_new (NULL);
  g_autoptr (GError) error = NULL;

  g_option_context_set_summary (context, summary);
  g_option_context_add_main_entries (context, entries, NULL);
  g_option_context_add_main_entries (context, common, NULL);
  g_set_prgname (name);
  if (!g_option_context_parse (context, argc, argv, &error)) {
    g_printerr ("legba-probe %s: %s\n", command, error->message);
    return FALSE;
  }
  if (*argc > 1) {
    g_printerr ("legba-probe %s: unexpected argument %s\n", command,
        (*argv)[1]);
    return FALSE;
  }
  return TRUE;
}

/* ---- time and statistics ---- */

gint64
probe_now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (gint64) ts.tv_sec * G_GINT64_CONSTANT (1000000000) + ts.tv_nsec;
}

double
probe_percentile (const double *sorted, gsize n, double p)
{
  gsize rank;

  if (n == 0)
    return 0;
  /* the smallest rank r with r >= p% of n */
  rank = (gsize) (p / 100.0 * n);
  if (rank < p / 100.0 * n)
    rank++;
  rank = CLAMP (rank, 1, n);
  return sorted[rank - 1];
}

static int
compare_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return (x > y) - (x < y);
}

void
probe_stats_compute (double *values, gsize n, ProbeStats * stats)
{
  memset (stats, 0, sizeof (*stats));
  if (n == 0)
    return;
  qsort (values, n, sizeof (double), compare_double);
  stats->n = n;
  stats->p50 = probe_percentile (values, n, 50);
  stats->p95 = probe_percentile (values, n, 95);
  stats->p99 = probe_percentile (values, n, 99);
  stats->max = values[n - 1];
}

/* Microsecond resolution is all a latency here carries. */
void
probe_stats_to_json (const ProbeStats * stats, GString * out)
{
  char p50[G_ASCII_DTOSTR_BUF_SIZE], p95[G_ASCII_DTOSTR_BUF_SIZE];
  char p99[G_ASCII_DTOSTR_BUF_SIZE], max[G_ASCII_DTOSTR_BUF_SIZE];

  g_string_append_printf (out, "{\"n\":%" G_GSIZE_FORMAT ",\"p50\":%s,"
      "\"p95\":%s,\"p99\":%s,\"max\":%s}", stats->n,
      g_ascii_formatd (p50, sizeof (p50), "%.3f", stats->p50),
      g_ascii_formatd (p95, sizeof (p95), "%.3f", stats->p95),
      g_ascii_formatd (p99, sizeof (p99), "%.3f", stats->p99),
      g_ascii_formatd (max, sizeof (max), "%.3f", stats->max));
}

/* ---- JSON ---- */

JsonObject *
probe_json_object_member (JsonObject * object, const char *member)
{
  JsonNode *node = json_object_get_member (object, member);

  return node != NULL && JSON_NODE_HOLDS_OBJECT (node) ?
      json_node_get_object (node) : NULL;
}

JsonArray *
probe_json_array_member (JsonObject * object, const char *member)
{
  JsonNode *node = json_object_get_member (object, member);

  return node != NULL && JSON_NODE_HOLDS_ARRAY (node) ?
      json_node_get_array (node) : NULL;
}

/* ---- main-context waits ---- */

static gboolean
wake_up (gpointer data)
{
  return G_SOURCE_REMOVE;
}

/* Runs one blocking iteration of the thread-default main context, woken
 * at the deadline at the latest. FALSE once the deadline has passed. */
static gboolean
iterate_until (gint64 deadline_ns)
{
  GMainContext *context = g_main_context_get_thread_default ();
  gint64 left = deadline_ns - probe_now_ns ();
  GSource *timeout;

  if (left <= 0)
    return FALSE;
  timeout = g_timeout_source_new ((left + 999999) / 1000000);
  g_source_set_callback (timeout, wake_up, NULL, NULL);
  g_source_attach (timeout, context);
  g_main_context_iteration (context, TRUE);
  g_source_destroy (timeout);
  g_source_unref (timeout);
  return TRUE;
}

/* ---- messages ---- */

void
probe_message_free (ProbeMessage * message)
{
  g_free (message->event);
  g_free (message->channel);
  g_free (message->user_id);
  g_clear_pointer (&message->data, json_node_unref);
  g_free (message);
}

const char *
probe_message_data_string (ProbeMessage * message, const char *member)
{
  JsonObject *object;

  if (message->data == NULL || !JSON_NODE_HOLDS_OBJECT (message->data))
    return NULL;
  object = json_node_get_object (message->data);
  return json_object_get_string_member_with_default (object, member, NULL);
}

/* Pusher protocol 7: servers send data as a JSON-encoded string; clients
 * may send it as an object. Either way the message keeps the decoded
 * value (a string that is not JSON stays a string). */
static ProbeMessage *
message_parse (const char *text, gsize len, gint64 received_ns)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (ProbeMessage) message = NULL;
  JsonObject *frame;
  JsonNode *data;

  if (!json_parser_load_from_data (parser, text, len, NULL)
      || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return NULL;
  frame = json_node_get_object (json_parser_get_root (parser));
  if (json_object_get_string_member_with_default (frame, "event", NULL) == NULL)
    return NULL;

  message = g_new0 (ProbeMessage, 1);
  message->received_ns = received_ns;
  message->event = g_strdup (json_object_get_string_member (frame, "event"));
  message->channel = g_strdup (json_object_get_string_member_with_default
      (frame, "channel", NULL));
  message->user_id = g_strdup (json_object_get_string_member_with_default
      (frame, "user_id", NULL));
  data = json_object_get_member (frame, "data");
  if (data != NULL && JSON_NODE_HOLDS_VALUE (data)
      && json_node_get_value_type (data) == G_TYPE_STRING) {
    message->data = json_from_string (json_node_get_string (data), NULL);
    if (message->data == NULL)
      message->data = json_node_copy (data);
  } else if (data != NULL) {
    message->data = json_node_copy (data);
  }
  return g_steal_pointer (&message);
}

/* ---- WebSocket client ---- */

struct _ProbeSocket
{
  SoupSession *session;
  SoupWebsocketConnection *conn;
  GQueue messages;              /* ProbeMessage, oldest first */
  GError *error;                /* connect failure, or why it closed */
  gboolean closed;
  char *socket_id;
  guint activity_timeout;
  guint client_event_rate;
};

static void
on_message (SoupWebsocketConnection * conn, SoupWebsocketDataType type,
    GBytes * bytes, gpointer user_data)
{
  ProbeSocket *socket = user_data;
  gint64 now = probe_now_ns ();
  ProbeMessage *message;
  gsize len;
  const char *text = g_bytes_get_data (bytes, &len);

  if (type != SOUP_WEBSOCKET_DATA_TEXT)
    return;
  message = message_parse (text, len, now);
  if (message == NULL)
    return;
  /* Pusher protocol 7: answer the server's keep-alive at once. */
  if (g_strcmp0 (message->event, "pusher:ping") == 0) {
    probe_socket_send (socket, "pusher:pong", NULL, NULL);
    probe_message_free (message);
    return;
  }
  g_queue_push_tail (&socket->messages, message);
}

static void
on_closed (SoupWebsocketConnection * conn, gpointer user_data)
{
  ProbeSocket *socket = user_data;

  socket->closed = TRUE;
  if (socket->error == NULL)
    socket->error = g_error_new (G_IO_ERROR, G_IO_ERROR_CLOSED,
        "the server closed the WebSocket (code %u%s%s)",
        soup_websocket_connection_get_close_code (conn),
        soup_websocket_connection_get_close_data (conn) ? ": " : "",
        soup_websocket_connection_get_close_data (conn) ?
        soup_websocket_connection_get_close_data (conn) : "");
}

static void
on_ws_error (SoupWebsocketConnection * conn, GError * error, gpointer user_data)
{
  ProbeSocket *socket = user_data;

  if (socket->error == NULL)
    socket->error = g_error_copy (error);
}

static void
on_connected (GObject * source, GAsyncResult * result, gpointer user_data)
{
  ProbeSocket *socket = user_data;
  GError *error = NULL;

  socket->conn = soup_session_websocket_connect_finish (SOUP_SESSION (source),
      result, &error);
  if (socket->conn == NULL) {
    socket->error = error;
    socket->closed = TRUE;
    return;
  }
  /* Keep-alive is the Pusher protocol's own (pusher:ping). */
  soup_websocket_connection_set_keepalive_interval (socket->conn, 0);
  soup_websocket_connection_set_max_incoming_payload_size (socket->conn,
      16 * 1024 * 1024);
  g_signal_connect (socket->conn, "message", G_CALLBACK (on_message), socket);
  g_signal_connect (socket->conn, "closed", G_CALLBACK (on_closed), socket);
  g_signal_connect (socket->conn, "error", G_CALLBACK (on_ws_error), socket);
}

static gboolean
read_established (ProbeSocket * socket, ProbeMessage * message, GError ** error)
{
  JsonObject *data, *limits;

  if (message->data == NULL || !JSON_NODE_HOLDS_OBJECT (message->data)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
        "pusher:connection_established without data");
    return FALSE;
  }
  data = json_node_get_object (message->data);
  socket->socket_id = g_strdup (json_object_get_string_member_with_default
      (data, "socket_id", NULL));
  if (socket->socket_id == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
        "pusher:connection_established without socket_id");
    return FALSE;
  }
  socket->activity_timeout =
      json_object_get_int_member_with_default (data, "activity_timeout", 0);
  limits = probe_json_object_member (data, "limits");
  if (limits != NULL)
    socket->client_event_rate = json_object_get_int_member_with_default
        (limits, "client_events_per_second", 0);
  return TRUE;
}

ProbeSocket *
probe_socket_connect (const char *url, const char *app_key,
    gint64 deadline_ns, GError ** error)
{
  g_autoptr (ProbeSocket) socket = g_new0 (ProbeSocket, 1);
  g_autoptr (ProbeMessage) established = NULL;
  g_autoptr (SoupMessage) msg = NULL;
  g_autofree char *key = g_uri_escape_string (app_key, NULL, FALSE);
  g_autofree char *base = g_strdup (url);
  g_autofree char *full = NULL;

  g_strchomp (base);
  if (g_str_has_suffix (base, "/"))
    base[strlen (base) - 1] = '\0';
  full = g_strdup_printf ("%s/app/%s?protocol=7&client=%s&version=%s",
      base, key, PROBE_CLIENT_NAME, "1.0");
  msg = soup_message_new ("GET", full);
  if (msg == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
        "invalid URL %s", full);
    return NULL;
  }
  socket->session = soup_session_new ();
  g_queue_init (&socket->messages);
  soup_session_websocket_connect_async (socket->session, msg, NULL, NULL,
      G_PRIORITY_DEFAULT, NULL, on_connected, socket);
  while (socket->conn == NULL && !socket->closed
      && iterate_until (deadline_ns));
  if (socket->conn == NULL) {
    if (socket->error != NULL)
      g_propagate_prefixed_error (error, g_steal_pointer (&socket->error),
          "connecting to %s: ", full);
    else
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
          "connecting to %s: timed out", full);
    /* The async connect may still hold the socket: let it finish. */
    while (socket->conn == NULL && !socket->closed
        && iterate_until (probe_now_ns () + G_GINT64_CONSTANT (1000000000)));
    return NULL;
  }
  established = probe_socket_wait (socket, "pusher:connection_established",
      NULL, deadline_ns, error);
  if (established == NULL || !read_established (socket, established, error))
    return NULL;
  return g_steal_pointer (&socket);
}

void
probe_socket_free (ProbeSocket * socket)
{
  if (socket->conn != NULL) {
    g_signal_handlers_disconnect_by_data (socket->conn, socket);
    if (soup_websocket_connection_get_state (socket->conn) ==
        SOUP_WEBSOCKET_STATE_OPEN)
      soup_websocket_connection_close (socket->conn,
          SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
    g_object_unref (socket->conn);
  }
  g_queue_clear_full (&socket->messages, (GDestroyNotify) probe_message_free);
  g_clear_error (&socket->error);
  g_clear_object (&socket->session);
  g_free (socket->socket_id);
  g_free (socket);
}

const char *
probe_socket_get_id (ProbeSocket * socket)
{
  return socket->socket_id;
}

guint
probe_socket_get_activity_timeout (ProbeSocket * socket)
{
  return socket->activity_timeout;
}

guint
probe_socket_get_client_event_rate (ProbeSocket * socket)
{
  return socket->client_event_rate;
}

void
probe_socket_send (ProbeSocket * socket, const char *event,
    const char *channel, JsonNode * data)
{
  g_autoptr (JsonBuilder) builder = json_builder_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *text = NULL;

  if (socket->conn == NULL || socket->closed)
    return;
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "event");
  json_builder_add_string_value (builder, event);
  if (channel != NULL) {
    json_builder_set_member_name (builder, "channel");
    json_builder_add_string_value (builder, channel);
  }
  json_builder_set_member_name (builder, "data");
  if (data != NULL) {
    json_builder_add_value (builder, json_node_copy (data));
  } else {
    json_builder_begin_object (builder);
    json_builder_end_object (builder);
  }
  json_builder_end_object (builder);
  root = json_builder_get_root (builder);
  text = json_to_string (root, FALSE);
  soup_websocket_connection_send_text (socket->conn, text);
}

static gboolean
message_matches (ProbeMessage * message, const char *event, const char *channel)
{
  return g_strcmp0 (message->event, event) == 0 && (channel == NULL
      || g_strcmp0 (message->channel, channel) == 0);
}

ProbeMessage *
probe_socket_take (ProbeSocket * socket, const char *event, const char *channel)
{
  for (GList * l = socket->messages.head; l != NULL; l = l->next) {
    ProbeMessage *message = l->data;

    if (message_matches (message, event, channel)) {
      g_queue_delete_link (&socket->messages, l);
      return message;
    }
  }
  return NULL;
}

ProbeMessage *
probe_socket_wait (ProbeSocket * socket, const char *event,
    const char *channel, gint64 deadline_ns, GError ** error)
{
  do {
    ProbeMessage *message = probe_socket_take (socket, event, channel);

    if (message != NULL)
      return message;
    if (socket->closed) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_CLOSED,
          "waiting for %s: %s", event, socket->error ?
          socket->error->message : "the WebSocket is closed");
      return NULL;
    }
  } while (iterate_until (deadline_ns));
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
      "timed out waiting for %s%s%s", event, channel ? " on " : "",
      channel ? channel : "");
  return NULL;
}

void
probe_socket_drain (ProbeSocket * socket)
{
  GMainContext *context = g_main_context_get_thread_default ();

  while (g_main_context_iteration (context, FALSE));
}

static char *
subscription_error_text (ProbeMessage * message)
{
  g_autofree char *data = NULL;

  if (message->data == NULL)
    return g_strdup (message->event);
  data = json_to_string (message->data, FALSE);
  return g_strdup_printf ("%s %s", message->event, data);
}

ProbeMessage *
probe_socket_subscribe (ProbeSocket * socket, const char *channel,
    const char *app_key, const char *app_secret, const char *channel_data,
    gint64 deadline_ns, GError ** error)
{
  g_autoptr (JsonBuilder) builder = json_builder_new ();
  g_autoptr (JsonNode) data = NULL;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "channel");
  json_builder_add_string_value (builder, channel);
  if (g_str_has_prefix (channel, "private-")
      || g_str_has_prefix (channel, "presence-")) {
    g_autofree char *auth = legba_auth_channel_sign (app_key, app_secret,
        socket->socket_id, channel, channel_data);

    json_builder_set_member_name (builder, "auth");
    json_builder_add_string_value (builder, auth);
    if (channel_data != NULL) {
      json_builder_set_member_name (builder, "channel_data");
      json_builder_add_string_value (builder, channel_data);
    }
  }
  json_builder_end_object (builder);
  data = json_builder_get_root (builder);
  probe_socket_send (socket, "pusher:subscribe", NULL, data);

  do {
    ProbeMessage *message;
    g_autoptr (ProbeMessage) refused = NULL;

    message = probe_socket_take (socket,
        "pusher_internal:subscription_succeeded", channel);
    if (message != NULL)
      return message;
    refused = probe_socket_take (socket, "pusher:subscription_error", channel);
    if (refused == NULL)
      refused = probe_socket_take (socket, "pusher:error", NULL);
    if (refused != NULL) {
      g_autofree char *text = subscription_error_text (refused);

      g_set_error (error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
          "subscribing to %s: %s", channel, text);
      return NULL;
    }
    if (socket->closed) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_CLOSED,
          "subscribing to %s: %s", channel,
          socket->error ? socket->error->message : "closed");
      return NULL;
    }
  } while (iterate_until (deadline_ns));
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
      "subscribing to %s: timed out", channel);
  return NULL;
}

void
probe_socket_close (ProbeSocket * socket, gint64 deadline_ns)
{
  if (socket->conn == NULL || socket->closed)
    return;
  if (soup_websocket_connection_get_state (socket->conn) ==
      SOUP_WEBSOCKET_STATE_OPEN)
    soup_websocket_connection_close (socket->conn,
        SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
  while (!socket->closed && iterate_until (deadline_ns));
}

/* ---- HTTP API ---- */

struct _ProbeApi
{
  SoupSession *session;
  char *base;
  char *app_id;
  char *app_key;
  char *app_secret;
};

ProbeApi *
probe_api_new (const char *api_url, const char *app_id, const char *app_key,
    const char *app_secret, guint timeout_s)
{
  ProbeApi *api = g_new0 (ProbeApi, 1);

  api->session = soup_session_new_with_options ("timeout", timeout_s,
      "idle-timeout", 60, NULL);
  api->base = g_strdup (api_url);
  if (g_str_has_suffix (api->base, "/"))
    api->base[strlen (api->base) - 1] = '\0';
  api->app_id = g_strdup (app_id);
  api->app_key = g_strdup (app_key);
  api->app_secret = g_strdup (app_secret);
  return api;
}

void
probe_api_free (ProbeApi * api)
{
  g_clear_object (&api->session);
  g_free (api->base);
  g_free (api->app_id);
  g_free (api->app_key);
  g_free (api->app_secret);
  g_free (api);
}

/* Pusher HTTP API, auth_version 1.0: sign "METHOD\nPATH\nQUERY". */
char *
probe_api_sign (const char *app_key, const char *app_secret,
    const char *method, const char *path, const char *body, gint64 now_s)
{
  g_autoptr (GHashTable) params = g_hash_table_new (g_str_hash, g_str_equal);
  g_autofree char *timestamp = g_strdup_printf ("%" G_GINT64_FORMAT, now_s);
  g_autofree char *md5 = NULL;
  g_autofree char *to_sign = NULL;
  g_autofree char *signature = NULL;
  g_autofree char *key = g_uri_escape_string (app_key, NULL, FALSE);

  g_hash_table_insert (params, (char *) "auth_key", (char *) app_key);
  g_hash_table_insert (params, (char *) "auth_timestamp", timestamp);
  g_hash_table_insert (params, (char *) "auth_version", (char *) "1.0");
  if (body != NULL) {
    md5 = g_compute_checksum_for_string (G_CHECKSUM_MD5, body, -1);
    g_hash_table_insert (params, (char *) "body_md5", md5);
  }
  to_sign = legba_auth_http_string_to_sign (method, path, params);
  signature = legba_auth_hmac_hex (app_secret, to_sign, -1);
  return g_strdup_printf ("auth_key=%s&auth_timestamp=%s&auth_version=1.0"
      "%s%s&auth_signature=%s", key, timestamp, md5 ? "&body_md5=" : "",
      md5 ? md5 : "", signature);
}

static char *
trigger_body (const char *channel, const char *event, const char *data)
{
  g_autoptr (JsonBuilder) builder = json_builder_new ();
  g_autoptr (JsonNode) root = NULL;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "name");
  json_builder_add_string_value (builder, event);
  json_builder_set_member_name (builder, "channels");
  json_builder_begin_array (builder);
  json_builder_add_string_value (builder, channel);
  json_builder_end_array (builder);
  json_builder_set_member_name (builder, "data");
  json_builder_add_string_value (builder, data);
  json_builder_end_object (builder);
  root = json_builder_get_root (builder);
  return json_to_string (root, FALSE);
}

gboolean
probe_api_trigger (ProbeApi * api, const char *channel, const char *event,
    const char *data, GError ** error)
{
  g_autofree char *id = g_uri_escape_string (api->app_id, NULL, FALSE);
  g_autofree char *path = g_strdup_printf ("/apps/%s/events", id);
  g_autofree char *body = trigger_body (channel, event, data);
  g_autofree char *query = probe_api_sign (api->app_key, api->app_secret,
      "POST", path, body, g_get_real_time () / G_USEC_PER_SEC);
  g_autofree char *url = g_strdup_printf ("%s%s?%s", api->base, path, query);
  g_autoptr (SoupMessage) msg = soup_message_new ("POST", url);
  g_autoptr (GBytes) request = NULL;
  g_autoptr (GBytes) response = NULL;
  gsize body_len;
  guint status;

  if (msg == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
        "invalid API URL %s", url);
    return FALSE;
  }
  body_len = strlen (body);
  request = g_bytes_new_take (g_steal_pointer (&body), body_len);
  soup_message_set_request_body_from_bytes (msg, "application/json", request);
  response = soup_session_send_and_read (api->session, msg, NULL, error);
  if (response == NULL) {
    g_prefix_error (error, "POST %s: ", path);
    return FALSE;
  }
  status = soup_message_get_status (msg);
  if (status != SOUP_STATUS_OK) {
    gsize len;
    const char *text = g_bytes_get_data (response, &len);

    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
        "POST %s: HTTP %u %.*s", path, status, (int) MIN (len, 200), text);
    return FALSE;
  }
  return TRUE;
}
