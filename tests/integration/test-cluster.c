/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Several legba-server processes sharing rooms through one redis-server
 * (docs/scale-out.md), each started by the test on a Unix socket in a
 * directory of its own: cross-instance delivery exactly once and in each
 * publisher's order, shared presence, an instance killed with SIGKILL,
 * Redis killed and restarted mid-stream, the probes against a live
 * cluster. Clients are libsoup WebSockets in this process.
 *
 * Without redis-server installed, the test exits 77 (skipped).
 */
#include <legba/server/server.h>

#include <legba/common/legba-auth.h>

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <legba-test.h>
#include <libsoup/soup.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_S 20
/* Short, so that a dead instance goes within seconds. */
#define INSTANCE_TTL 2

static char *redis_server_path;


/* ---- Processes: redis-server and legba-server ---- */

typedef LegbaTestProcess Process;

#define process_start(p, argv, wanted) \
  legba_test_process_start ((p), (argv), (wanted), WAIT_S)
#define process_signal(p, signum) \
  legba_test_process_signal ((p), (signum), WAIT_S)
#define process_clear legba_test_process_clear

typedef struct
{
  Process p;
  char *dir;
  char *socket;
  char *url;
} Redis;

static void
redis_spawn (Redis * redis)
{
  const char *argv[] = { redis_server_path, "--port", "0", "--unixsocket",
    redis->socket, "--unixsocketperm", "700", "--save", "", "--appendonly",
    "no", "--dir", redis->dir, NULL
  };

  process_start (&redis->p, argv, "ready to accept connections");
}

static Redis *
redis_start (void)
{
  g_autoptr (GError) error = NULL;
  Redis *redis = g_new0 (Redis, 1);

  redis->dir = g_dir_make_tmp ("legba-cluster-XXXXXX", &error);
  g_assert_no_error (error);
  redis->socket = g_build_filename (redis->dir, "redis.sock", NULL);
  redis->url = g_strconcat ("unix://", redis->socket, NULL);
  redis_spawn (redis);
  return redis;
}

/* SIGKILL: Redis goes without a word, as when it crashes. */
static void
redis_kill (Redis * redis)
{
  process_signal (&redis->p, SIGKILL);
  process_clear (&redis->p);
  g_unlink (redis->socket);
}

static void
redis_free (Redis * redis)
{
  process_clear (&redis->p);
  g_unlink (redis->socket);
  g_rmdir (redis->dir);
  g_free (redis->dir);
  g_free (redis->socket);
  g_free (redis->url);
  g_free (redis);
}

typedef struct
{
  Process p;
  char *id;
  guint port;
} Server;

/* legba-server --redis URL --instance-id ID, plus extra args. */
static Server *
server_start (Redis * redis, const char *id, const char *const *extra)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  const char *colon;
  Server *server = g_new0 (Server, 1);

  server->id = g_strdup (id);
  g_ptr_array_add (argv, (gpointer) legba_test_tool_path ("LEGBA_SERVER"));
  for (const char *const *a = (const char *const[]) {
        "--port", "0", "--app-id", "1", "--app-key", "key", "--app-secret",
        "secret", "--client-events-per-second", "1000", NULL
      }; *a; a++)
    g_ptr_array_add (argv, (gpointer) * a);
  if (redis != NULL) {
    g_ptr_array_add (argv, (gpointer) "--redis-instance-ttl");
    g_ptr_array_add (argv, (gpointer) G_STRINGIFY (INSTANCE_TTL));
    g_ptr_array_add (argv, (gpointer) "--redis");
    g_ptr_array_add (argv, redis->url);
    g_ptr_array_add (argv, (gpointer) "--instance-id");
    g_ptr_array_add (argv, server->id);
  }
  for (; extra != NULL && *extra != NULL; extra++)
    g_ptr_array_add (argv, (gpointer) * extra);
  g_ptr_array_add (argv, NULL);

  process_start (&server->p, (const char *const *) argv->pdata,
      "legba-server listening on");
  colon = strrchr (server->p.line, ':');
  g_assert_nonnull (colon);
  server->port = atoi (colon + 1);
  g_assert_cmpuint (server->port, >, 0);
  return server;
}

/* SIGTERM: a clean exit, status 0. */
static void
server_stop (Server * server)
{
  process_signal (&server->p, SIGTERM);
  g_assert_true (g_subprocess_get_if_exited (server->p.process));
  g_assert_cmpint (g_subprocess_get_exit_status (server->p.process), ==, 0);
}

static void
server_free (Server * server)
{
  process_clear (&server->p);
  g_free (server->id);
  g_free (server);
}

/* ---- HTTP: the Pusher API, /metrics ---- */

static SoupSession *http;

/* query: "info" and "filter_by_prefix" values, or NULL. */
static char *
api_signed_url (Server * server, const char *method, const char *path,
    const char *body, const char *info, const char *prefix)
{
  g_autoptr (GHashTable) params = g_hash_table_new (g_str_hash, g_str_equal);
  g_autofree char *timestamp = g_strdup_printf ("%" G_GINT64_FORMAT,
      g_get_real_time () / G_USEC_PER_SEC);
  g_autofree char *md5 = body ? g_compute_checksum_for_string (G_CHECKSUM_MD5,
      body, -1) : NULL;
  g_autofree char *to_sign = NULL;
  g_autofree char *signature = NULL;

  g_hash_table_insert (params, (char *) "auth_key", (char *) "key");
  g_hash_table_insert (params, (char *) "auth_timestamp", timestamp);
  g_hash_table_insert (params, (char *) "auth_version", (char *) "1.0");
  if (md5 != NULL)
    g_hash_table_insert (params, (char *) "body_md5", md5);
  if (info != NULL)
    g_hash_table_insert (params, (char *) "info", (char *) info);
  if (prefix != NULL)
    g_hash_table_insert (params, (char *) "filter_by_prefix", (char *) prefix);
  to_sign = legba_auth_http_string_to_sign (method, path, params);
  signature = legba_auth_hmac_hex ("secret", to_sign, -1);
  return g_strdup_printf ("http://127.0.0.1:%u%s?auth_key=key&auth_timestamp="
      "%s&auth_version=1.0%s%s%s%s%s%s&auth_signature=%s", server->port, path,
      timestamp, md5 ? "&body_md5=" : "", md5 ? md5 : "",
      info ? "&info=" : "", info ? info : "",
      prefix ? "&filter_by_prefix=" : "", prefix ? prefix : "", signature);
}

/* POST /apps/1/events; returns the status. */
static guint
api_publish (Server * server, const char *channel, const char *event,
    const char *data, const char *socket_id)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *body = NULL;
  g_autofree char *url = NULL;
  g_autoptr (SoupMessage) msg = NULL;
  g_autoptr (GBytes) request = NULL;
  g_autoptr (GBytes) response = NULL;
  g_autoptr (GError) error = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, event);
  json_builder_set_member_name (b, "channel");
  json_builder_add_string_value (b, channel);
  json_builder_set_member_name (b, "data");
  json_builder_add_string_value (b, data);
  if (socket_id != NULL) {
    json_builder_set_member_name (b, "socket_id");
    json_builder_add_string_value (b, socket_id);
  }
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  body = json_to_string (root, FALSE);
  url = api_signed_url (server, "POST", "/apps/1/events", body, NULL, NULL);
  msg = soup_message_new ("POST", url);
  request = g_bytes_new (body, strlen (body));
  soup_message_set_request_body_from_bytes (msg, "application/json", request);
  response = soup_session_send_and_read (http, msg, NULL, &error);
  g_assert_no_error (error);
  return soup_message_get_status (msg);
}

static JsonObject *
api_get (Server * server, const char *path, const char *info,
    const char *prefix)
{
  g_autofree char *url = api_signed_url (server, "GET", path, NULL, info,
      prefix);
  g_autoptr (SoupMessage) msg = soup_message_new ("GET", url);
  g_autoptr (GBytes) response = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) root = NULL;

  response = soup_session_send_and_read (http, msg, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (soup_message_get_status (msg), ==, 200);
  root = json_from_string (g_bytes_get_data (response, NULL), &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (root));
  return json_object_ref (json_node_get_object (root));
}

/* For g_ptr_array_sort: a and b point to strings. */
static gint
compare_strings (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* The users of a presence channel, sorted and comma-joined. */
static char *
api_users (Server * server, const char *channel)
{
  g_autofree char *path = g_strdup_printf ("/apps/1/channels/%s/users",
      channel);
  g_autoptr (JsonObject) object = api_get (server, path, NULL, NULL);
  JsonArray *users = json_object_get_array_member (object, "users");
  g_autoptr (GPtrArray) ids = g_ptr_array_new ();
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < json_array_get_length (users); i++)
    g_ptr_array_add (ids, (gpointer) json_object_get_string_member
        (json_array_get_object_element (users, i), "id"));
  g_ptr_array_sort (ids, compare_strings);
  for (guint i = 0; i < ids->len; i++)
    g_string_append_printf (out, "%s%s", i ? "," : "",
        (const char *) ids->pdata[i]);
  return g_string_free (out, FALSE);
}

/* Polls until the instance lists exactly `want`: presence reaches the
 * other instances through Redis, a moment later. */
static void
wait_users (Server * server, const char *channel, const char *want)
{
  gint64 deadline = g_get_monotonic_time () + WAIT_S * G_USEC_PER_SEC;
  g_autofree char *got = NULL;

  while (TRUE) {
    g_free (got);
    got = api_users (server, channel);
    if (g_str_equal (got, want))
      return;
    if (g_get_monotonic_time () > deadline)
      g_error ("instance %s lists [%s], expected [%s]", server->id, got, want);
    legba_test_iterate_for (20);
  }
}

/* A sample of GET /metrics, or -1 when absent. */
static double
metric (Server * server, const char *name)
{
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/metrics",
      server->port);
  g_autoptr (SoupMessage) msg = soup_message_new ("GET", url);
  g_autoptr (GBytes) response = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *text = NULL;
  g_autofree char *needle = g_strconcat ("\n", name, " ", NULL);
  const char *found;

  response = soup_session_send_and_read (http, msg, NULL, &error);
  g_assert_no_error (error);
  text = g_strndup (g_bytes_get_data (response, NULL),
      g_bytes_get_size (response));
  found = strstr (text, needle);
  return found ? g_ascii_strtod (found + strlen (needle), NULL) : -1;
}

static void
wait_metric (Server * server, const char *name, double value)
{
  gint64 deadline = g_get_monotonic_time () + WAIT_S * G_USEC_PER_SEC;

  while (metric (server, name) != value) {
    if (g_get_monotonic_time () > deadline)
      g_error ("%s of %s stayed at %g, not %g", name, server->id,
          metric (server, name), value);
    legba_test_iterate_for (20);
  }
}

/* ---- WebSocket clients ---- */

typedef struct
{
  char *event;
  char *channel;
  char *data;                   /* the data string as received */
  char *user_id;
} Message;

static void
message_free (Message * m)
{
  g_free (m->event);
  g_free (m->channel);
  g_free (m->data);
  g_free (m->user_id);
  g_free (m);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Message, message_free);

typedef struct
{
  SoupSession *session;
  SoupWebsocketConnection *ws;
  GQueue messages;
  char *socket_id;
  gboolean failed;
  gboolean closed;
} Client;

static void
on_message (SoupWebsocketConnection * ws, gint type, GBytes * bytes,
    gpointer user_data)
{
  Client *c = user_data;
  g_autoptr (JsonNode) root = json_from_string (g_bytes_get_data (bytes,
          NULL), NULL);
  JsonObject *frame;
  JsonNode *data;
  Message *m;

  g_assert_nonnull (root);
  frame = json_node_get_object (root);
  m = g_new0 (Message, 1);
  m->event = g_strdup (json_object_get_string_member (frame, "event"));
  m->channel = g_strdup (json_object_get_string_member_with_default (frame,
          "channel", NULL));
  m->user_id = g_strdup (json_object_get_string_member_with_default (frame,
          "user_id", NULL));
  data = json_object_get_member (frame, "data");
  if (data != NULL && JSON_NODE_HOLDS_VALUE (data))
    m->data = g_strdup (json_node_get_string (data));
  else if (data != NULL)
    m->data = json_to_string (data, FALSE);
  g_queue_push_tail (&c->messages, m);
}

static void
on_closed (SoupWebsocketConnection * ws, gpointer user_data)
{
  ((Client *) user_data)->closed = TRUE;
}

static void
on_connected (GObject * source, GAsyncResult * result, gpointer user_data)
{
  Client *c = user_data;

  c->ws = soup_session_websocket_connect_finish (SOUP_SESSION (source),
      result, NULL);
  if (c->ws == NULL) {
    c->failed = TRUE;
    return;
  }
  soup_websocket_connection_set_max_incoming_payload_size (c->ws, 0);
  g_signal_connect (c->ws, "message", G_CALLBACK (on_message), c);
  g_signal_connect (c->ws, "closed", G_CALLBACK (on_closed), c);
}

static Message *
client_take (Client * c, const char *event, const char *channel)
{
  for (GList * l = c->messages.head; l != NULL; l = l->next) {
    Message *m = l->data;

    if (g_str_equal (m->event, event) &&
        (channel == NULL || g_strcmp0 (m->channel, channel) == 0)) {
      g_queue_delete_link (&c->messages, l);
      return m;
    }
  }
  return NULL;
}

static Message *
client_wait (Client * c, const char *event, const char *channel)
{
  Message *m = NULL;

  LEGBA_TEST_WAIT_UNTIL ((m =
          client_take (c, event, channel)) != NULL, WAIT_S, event);
  return m;
}

/* Drops what is queued for this event and says how many there were, after
 * handling whatever the sockets have ready. */
static guint
client_drop_all (Client * c, const char *event, const char *channel)
{
  Message *m;
  guint n = 0;

  while (g_main_context_iteration (NULL, FALSE));
  while ((m = client_take (c, event, channel)) != NULL) {
    message_free (m);
    n++;
  }
  return n;
}

static Client *
client_connect (Server * server)
{
  g_autofree char *url = g_strdup_printf ("ws://127.0.0.1:%u/app/key"
      "?protocol=7", server->port);
  g_autoptr (SoupMessage) msg = soup_message_new ("GET", url);
  g_autoptr (Message) established = NULL;
  g_autoptr (JsonNode) data = NULL;
  Client *c = g_new0 (Client, 1);

  g_queue_init (&c->messages);
  c->session = soup_session_new ();
  soup_session_websocket_connect_async (c->session, msg, NULL, NULL,
      G_PRIORITY_DEFAULT, NULL, on_connected, c);
  LEGBA_TEST_WAIT_UNTIL (c->ws != NULL
      || c->failed, WAIT_S, "a WebSocket to connect");
  g_assert_false (c->failed);
  established = client_wait (c, "pusher:connection_established", NULL);
  data = json_from_string (established->data, NULL);
  c->socket_id = g_strdup (json_object_get_string_member
      (json_node_get_object (data), "socket_id"));
  return c;
}

static void
client_send (Client * c, const char *event, const char *channel,
    const char *data)
{
  g_autofree char *text = g_strdup_printf ("{\"event\":\"%s\",\"channel\":"
      "\"%s\",\"data\":%s}", event, channel, data);

  soup_websocket_connection_send_text (c->ws, text);
}

/* Subscribes (signing private and presence channels) and returns the
 * subscription_succeeded. */
static Message *
client_subscribe (Client * c, const char *channel, const char *channel_data)
{
  g_autofree char *auth = NULL;
  g_autofree char *text = NULL;
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonNode) root = NULL;
  gboolean signed_channel = g_str_has_prefix (channel, "private-") ||
      g_str_has_prefix (channel, "presence-");

  if (signed_channel)
    auth = legba_auth_channel_sign ("key", "secret", c->socket_id, channel,
        channel_data);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "event");
  json_builder_add_string_value (b, "pusher:subscribe");
  json_builder_set_member_name (b, "data");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "channel");
  json_builder_add_string_value (b, channel);
  if (auth != NULL) {
    json_builder_set_member_name (b, "auth");
    json_builder_add_string_value (b, auth);
  }
  if (channel_data != NULL) {
    json_builder_set_member_name (b, "channel_data");
    json_builder_add_string_value (b, channel_data);
  }
  json_builder_end_object (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  text = json_to_string (root, FALSE);
  soup_websocket_connection_send_text (c->ws, text);
  return client_wait (c, "pusher_internal:subscription_succeeded", channel);
}

/* Joins a presence channel as user_id; returns the subscription_succeeded. */
static Message *
client_join (Client * c, const char *channel, const char *user_id)
{
  g_autofree char *channel_data = g_strdup_printf ("{\"user_id\":\"%s\","
      "\"user_info\":{\"name\":\"%s\"}}", user_id, user_id);

  return client_subscribe (c, channel, channel_data);
}

static void
client_free (Client * c)
{
  if (c->ws != NULL) {
    g_signal_handlers_disconnect_by_data (c->ws, c);
    if (soup_websocket_connection_get_state (c->ws) ==
        SOUP_WEBSOCKET_STATE_OPEN)
      soup_websocket_connection_close (c->ws, SOUP_WEBSOCKET_CLOSE_NORMAL,
          NULL);
    g_object_unref (c->ws);
  }
  g_queue_clear_full (&c->messages, (GDestroyNotify) message_free);
  g_object_unref (c->session);
  g_free (c->socket_id);
  g_free (c);
}

/* Closes and waits for the server's close frame. */
static void
client_close (Client * c)
{
  soup_websocket_connection_close (c->ws, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
  LEGBA_TEST_WAIT_UNTIL (c->closed, WAIT_S, "a WebSocket to close");
  client_free (c);
}

/* The user_id member of a member_added / member_removed data. */
static char *
member_id (Message * m)
{
  g_autoptr (JsonNode) data = json_from_string (m->data, NULL);

  return g_strdup (json_object_get_string_member (json_node_get_object (data),
          "user_id"));
}

static void
expect_member (Client * c, const char *event, const char *channel,
    const char *user_id)
{
  g_autoptr (Message) m = client_wait (c, event, channel);
  g_autofree char *id = member_id (m);

  g_assert_cmpstr (id, ==, user_id);
}

/* subscription_succeeded's presence count and whether it lists id. */
static gint64
presence_count (Message * succeeded, const char *id)
{
  g_autoptr (JsonNode) data = json_from_string (succeeded->data, NULL);
  JsonObject *presence = json_object_get_object_member (json_node_get_object
      (data), "presence");

  if (id != NULL)
    g_assert_true (json_object_has_member (json_object_get_object_member
            (presence, "hash"), id));
  return json_object_get_int_member (presence, "count");
}

/* ---- The cluster of a test ---- */

typedef struct
{
  Redis *redis;
  Server *servers[3];
  guint n;
} Cluster;

/* n instances, each with the extra arguments (may be NULL). */
static void
cluster_start_with (Cluster * cl, guint n, const char *const *extra)
{
  static const char *const ids[] = { "a", "b", "c" };

  cl->redis = redis_start ();
  cl->n = n;
  for (guint i = 0; i < n; i++)
    cl->servers[i] = server_start (cl->redis, ids[i], extra);
  for (guint i = 0; i < n; i++) {
    wait_metric (cl->servers[i], "legba_relay_up", 1);
    wait_metric (cl->servers[i], "legba_relay_instances", n - 1);
  }
}

static void
cluster_start (Cluster * cl, guint n)
{
  cluster_start_with (cl, n, NULL);
}

static void
cluster_stop (Cluster * cl)
{
  for (guint i = 0; i < cl->n; i++) {
    if (cl->servers[i] != NULL && !cl->servers[i]->p.exited)
      server_stop (cl->servers[i]);
    g_clear_pointer (&cl->servers[i], server_free);
  }
  g_clear_pointer (&cl->redis, redis_free);
}

/* ---- Subscription counts: the cluster's ---- */

/* Takes the pusher_internal:subscription_count events c received on
 * channel; TRUE when the latest of all it took says n. */
static gboolean
count_reached (Client * c, const char *channel, gint64 * last, gint64 n)
{
  Message *m;

  while ((m = client_take (c, "pusher_internal:subscription_count",
              channel)) != NULL) {
    g_autoptr (JsonNode) data = json_from_string (m->data, NULL);

    g_assert_nonnull (data);
    *last = json_object_get_int_member (json_node_get_object (data),
        "subscription_count");
    message_free (m);
  }
  return *last == n;
}

static void
wait_count (Client * c, const char *channel, gint64 n)
{
  gint64 last = -1;

  LEGBA_TEST_WAIT_UNTIL (count_reached (c, channel, &last, n), WAIT_S,
      "the cluster's subscription count");
}

/* With --subscription-count on every instance, each tells its own
 * subscribers the count of the cluster as it changes anywhere. */
static void
test_subscription_count (void)
{
  static const char *const counting[] = { "--subscription-count", NULL };
  Cluster cl = { 0 };
  Client *a, *b1, *b2;

  cluster_start_with (&cl, 2, counting);
  a = client_connect (cl.servers[0]);
  message_free (client_subscribe (a, "news", NULL));
  wait_count (a, "news", 1);

  b1 = client_connect (cl.servers[1]);
  b2 = client_connect (cl.servers[1]);
  message_free (client_subscribe (b1, "news", NULL));
  message_free (client_subscribe (b2, "news", NULL));
  wait_count (a, "news", 3);
  wait_count (b1, "news", 3);
  wait_count (b2, "news", 3);

  client_close (b2);
  wait_count (a, "news", 2);
  wait_count (b1, "news", 2);

  client_free (a);
  client_free (b1);
  cluster_stop (&cl);
}

/* ---- Relay: every event once, in each publisher's order ---- */

/* data {"p": publisher, "n": number}. */
static void
message_origin (Message * m, char **publisher, gint64 * n)
{
  g_autoptr (JsonNode) data = json_from_string (m->data, NULL);
  JsonObject *object = json_node_get_object (data);

  *publisher = g_strdup (json_object_get_string_member (object, "p"));
  *n = json_object_get_int_member (object, "n");
}

/* Takes events first .. first + count - 1 of each publisher off c,
 * checking each arrives once and in its publisher's order. */
static void
expect_sequences (Client * c, const char *event, const char *channel,
    const char *const *publishers, guint first, guint count)
{
  g_autoptr (GHashTable) next = g_hash_table_new (g_str_hash, g_str_equal);
  guint total = count * g_strv_length ((char **) publishers);

  for (guint i = 0; i < total; i++) {
    g_autoptr (Message) m = client_wait (c, event, channel);
    g_autofree char *publisher = NULL;
    gint64 n;

    message_origin (m, &publisher, &n);
    g_assert_true (g_strv_contains (publishers, publisher));
    g_assert_cmpint (n, ==, first +
        GPOINTER_TO_INT (g_hash_table_lookup (next, publisher)));
    g_hash_table_insert (next, (gpointer) g_intern_string (publisher),
        GINT_TO_POINTER (n - first + 1));
  }
}

/* HTTP API events through A and B and client events through C reach the
 * subscribers of all three exactly once, in each publisher's order. */
static void
test_relay_exactly_once (void)
{
  static const char *const publishers[] = { "api-a", "api-b", "client-c",
    NULL
  };
  const guint count = 60;
  Cluster cl = { 0 };
  Client *clients[6];
  Client *sender;

  cluster_start (&cl, 3);
  for (guint i = 0; i < 6; i++) {
    clients[i] = client_connect (cl.servers[i % 3]);
    message_free (client_subscribe (clients[i], "private-orders", NULL));
    message_free (client_subscribe (clients[i], "orders", NULL));
  }
  sender = client_connect (cl.servers[2]);
  message_free (client_subscribe (sender, "private-orders", NULL));

  /* Interleaved: A, B and C's socket publish turn by turn. */
  for (guint k = 0; k < count; k++) {
    g_autofree char *a = g_strdup_printf ("{\"p\":\"api-a\",\"n\":%u}", k);
    g_autofree char *b = g_strdup_printf ("{\"p\":\"api-b\",\"n\":%u}", k);
    g_autofree char *c = g_strdup_printf ("{\"p\":\"client-c\",\"n\":%u}", k);

    g_assert_cmpuint (api_publish (cl.servers[0], "private-orders",
            "client-order", a, NULL), ==, 200);
    g_assert_cmpuint (api_publish (cl.servers[1], "private-orders",
            "client-order", b, NULL), ==, 200);
    client_send (sender, "client-order", "private-orders", c);
  }
  for (guint i = 0; i < 6; i++)
    expect_sequences (clients[i], "client-order", "private-orders",
        publishers, 0, count);

  /* Then a marker through each: nothing more may have come before it. */
  g_assert_cmpuint (api_publish (cl.servers[0], "private-orders", "marker",
          "{}", NULL), ==, 200);
  g_assert_cmpuint (api_publish (cl.servers[1], "private-orders", "marker",
          "{}", NULL), ==, 200);
  client_send (sender, "client-marker", "private-orders", "{}");
  for (guint i = 0; i < 6; i++) {
    for (guint k = 0; k < 2; k++)
      message_free (client_wait (clients[i], "marker", "private-orders"));
    message_free (client_wait (clients[i], "client-marker", "private-orders"));
    g_assert_cmpuint (client_drop_all (clients[i], "client-order", NULL), ==,
        0);
  }
  /* The sender gets the API's events, and none of its own. */
  expect_sequences (sender, "client-order", "private-orders",
      (const char *const[]) { "api-a", "api-b", NULL }, 0, count);
  g_assert_cmpuint (client_drop_all (sender, "client-order", NULL), ==, 0);

  /* Pusher socket_id: the excluded socket is on A, the others get it. */
  g_assert_cmpuint (api_publish (cl.servers[1], "orders", "excluding",
          "{\"p\":\"api-b\",\"n\":0}", clients[0]->socket_id), ==, 200);
  for (guint i = 1; i < 6; i++)
    message_free (client_wait (clients[i], "excluding", "orders"));
  g_assert_cmpuint (api_publish (cl.servers[0], "orders", "marker", "{}",
          NULL), ==, 200);
  message_free (client_wait (clients[0], "marker", "orders"));
  g_assert_cmpuint (client_drop_all (clients[0], "excluding", NULL), ==, 0);

  g_assert_cmpfloat (metric (cl.servers[1], "legba_relay_duplicates_total"),
      ==, 0);
  g_assert_cmpfloat (metric (cl.servers[1], "legba_relay_lost_total"), ==, 0);
  for (guint i = 0; i < 6; i++)
    client_free (clients[i]);
  client_free (sender);
  cluster_stop (&cl);
}

/* ---- Shared presence ---- */

/* A user on two instances counts once, is added once and removed once;
 * every instance's HTTP API answers for the cluster. */
static void
test_presence_shared (void)
{
  const char *room = "presence-room";
  Cluster cl = { 0 };
  Client *watch_a, *watch_b, *twice_a, *twice_b, *mark;
  g_autoptr (Message) succeeded = NULL;
  g_autoptr (JsonObject) info = NULL;
  g_autoptr (JsonObject) listing = NULL;
  JsonObject *channels;

  cluster_start (&cl, 2);
  watch_a = client_connect (cl.servers[0]);
  message_free (client_join (watch_a, room, "watch-a"));
  wait_users (cl.servers[1], room, "watch-a");

  /* B's newcomer sees A's member; A's watcher sees B's newcomer. */
  watch_b = client_connect (cl.servers[1]);
  succeeded = client_join (watch_b, room, "watch-b");
  g_assert_cmpint (presence_count (succeeded, "watch-a"), ==, 2);
  expect_member (watch_a, "pusher_internal:member_added", room, "watch-b");

  twice_a = client_connect (cl.servers[0]);
  message_free (client_join (twice_a, room, "twice"));
  expect_member (watch_a, "pusher_internal:member_added", room, "twice");
  expect_member (watch_b, "pusher_internal:member_added", room, "twice");

  /* The same user through B: not added again (checked after a marker
   * that joins through B after it). */
  twice_b = client_connect (cl.servers[1]);
  message_free (client_join (twice_b, room, "twice"));
  mark = client_connect (cl.servers[1]);
  message_free (client_join (mark, room, "mark"));
  expect_member (watch_a, "pusher_internal:member_added", room, "mark");
  expect_member (watch_b, "pusher_internal:member_added", room, "mark");
  g_assert_cmpuint (client_drop_all (watch_a, "pusher_internal:member_added",
          NULL), ==, 0);
  g_assert_cmpuint (client_drop_all (watch_b, "pusher_internal:member_added",
          NULL), ==, 0);

  /* Both HTTP APIs: one user list, counts for the cluster. */
  for (guint i = 0; i < 2; i++) {
    wait_users (cl.servers[i], room, "mark,twice,watch-a,watch-b");
    while (TRUE) {
      g_clear_pointer (&info, json_object_unref);
      info = api_get (cl.servers[i], "/apps/1/channels/presence-room",
          "user_count,subscription_count", NULL);
      if (json_object_get_int_member (info, "subscription_count") == 5)
        break;
      legba_test_iterate_for (20);
    }
    g_assert_true (json_object_get_boolean_member (info, "occupied"));
    g_assert_cmpint (json_object_get_int_member (info, "user_count"), ==, 4);
    g_clear_pointer (&listing, json_object_unref);
    listing = api_get (cl.servers[i], "/apps/1/channels", "user_count",
        "presence-");
    channels = json_object_get_object_member (listing, "channels");
    g_assert_true (json_object_has_member (channels, room));
    g_assert_cmpint (json_object_get_int_member
        (json_object_get_object_member (channels, room), "user_count"), ==, 4);
  }

  /* Leaving A while still on B removes nothing: checked after a marker,
   * a member joining through A afterwards. */
  client_close (twice_a);
  client_close (mark);
  expect_member (watch_a, "pusher_internal:member_removed", room, "mark");
  expect_member (watch_b, "pusher_internal:member_removed", room, "mark");
  mark = client_connect (cl.servers[0]);
  message_free (client_join (mark, room, "mark-a"));
  expect_member (watch_a, "pusher_internal:member_added", room, "mark-a");
  expect_member (watch_b, "pusher_internal:member_added", room, "mark-a");
  g_assert_cmpuint (client_drop_all (watch_a,
          "pusher_internal:member_removed", NULL), ==, 0);
  g_assert_cmpuint (client_drop_all (watch_b,
          "pusher_internal:member_removed", NULL), ==, 0);

  /* Its last connection gone: removed everywhere, once. */
  client_close (twice_b);
  expect_member (watch_a, "pusher_internal:member_removed", room, "twice");
  expect_member (watch_b, "pusher_internal:member_removed", room, "twice");
  for (guint i = 0; i < 2; i++)
    wait_users (cl.servers[i], room, "mark-a,watch-a,watch-b");

  client_free (mark);
  client_free (watch_a);
  client_free (watch_b);
  cluster_stop (&cl);
}

/* ---- An instance dies ---- */

/* SIGKILL C: its members go from A and B within the heartbeat expiry,
 * announced with member_removed; a user also on A stays. */
static void
test_instance_kill (void)
{
  const char *room = "presence-kill";
  Cluster cl = { 0 };
  Client *watch_a, *watch_b, *victim, *both_a, *both_c;
  gint64 killed_at, removed_after;

  cluster_start (&cl, 3);
  watch_a = client_connect (cl.servers[0]);
  message_free (client_join (watch_a, room, "watch-a"));
  watch_b = client_connect (cl.servers[1]);
  message_free (client_join (watch_b, room, "watch-b"));
  victim = client_connect (cl.servers[2]);
  message_free (client_join (victim, room, "victim"));
  both_a = client_connect (cl.servers[0]);
  message_free (client_join (both_a, room, "both"));
  both_c = client_connect (cl.servers[2]);
  message_free (client_join (both_c, room, "both"));
  for (guint i = 0; i < 3; i++)
    wait_users (cl.servers[i], room, "both,victim,watch-a,watch-b");
  client_drop_all (watch_a, "pusher_internal:member_added", NULL);
  client_drop_all (watch_b, "pusher_internal:member_added", NULL);

  killed_at = g_get_monotonic_time ();
  process_signal (&cl.servers[2]->p, SIGKILL);
  expect_member (watch_a, "pusher_internal:member_removed", room, "victim");
  expect_member (watch_b, "pusher_internal:member_removed", room, "victim");
  removed_after = g_get_monotonic_time () - killed_at;
  g_test_message ("members of the killed instance removed after %.1f s",
      removed_after / 1e6);
  /* The heartbeat expires within the TTL, and is checked every second. */
  g_assert_cmpint (removed_after, <, (INSTANCE_TTL + 4) * G_USEC_PER_SEC);
  for (guint i = 0; i < 2; i++) {
    wait_users (cl.servers[i], room, "both,watch-a,watch-b");
    wait_metric (cl.servers[i], "legba_relay_instances", 1);
    g_assert_cmpfloat (metric (cl.servers[i],
            "legba_relay_instances_expired_total"), ==, 1);
  }
  /* "both" is still on A: never removed (both watchers removed C's
   * members together with the victim; a marker through each comes after). */
  for (guint i = 0; i < 2; i++) {
    Client *watcher = i == 0 ? watch_a : watch_b;

    g_assert_cmpuint (api_publish (cl.servers[i], room, "marker", "{}",
            NULL), ==, 200);
    message_free (client_wait (watcher, "marker", room));
    g_assert_cmpuint (client_drop_all (watcher,
            "pusher_internal:member_removed", NULL), ==, 0);
  }

  client_free (victim);
  client_free (both_c);
  client_free (both_a);
  client_free (watch_a);
  client_free (watch_b);
  cluster_stop (&cl);
}

/* SIGSTOP B for longer than the heartbeat expiry: A takes it for dead and
 * removes its members; SIGCONT: B notices, writes its state again, and
 * its members and events come back. */
static void
test_instance_stall (void)
{
  const char *room = "presence-stall";
  Cluster cl = { 0 };
  Client *watch_a, *sleeper, *sub_a;

  cluster_start (&cl, 2);
  watch_a = client_connect (cl.servers[0]);
  message_free (client_join (watch_a, room, "watch-a"));
  sub_a = client_connect (cl.servers[0]);
  message_free (client_subscribe (sub_a, "stream", NULL));
  sleeper = client_connect (cl.servers[1]);
  message_free (client_join (sleeper, room, "sleeper"));
  expect_member (watch_a, "pusher_internal:member_added", room, "sleeper");

  g_subprocess_send_signal (cl.servers[1]->p.process, SIGSTOP);
  expect_member (watch_a, "pusher_internal:member_removed", room, "sleeper");
  wait_users (cl.servers[0], room, "watch-a");

  g_subprocess_send_signal (cl.servers[1]->p.process, SIGCONT);
  expect_member (watch_a, "pusher_internal:member_added", room, "sleeper");
  wait_users (cl.servers[0], room, "sleeper,watch-a");
  wait_metric (cl.servers[0], "legba_relay_instances", 1);
  g_assert_cmpuint (api_publish (cl.servers[1], "stream", "tick",
          "{\"p\":\"api-b\",\"n\":0}", NULL), ==, 200);
  message_free (client_wait (sub_a, "tick", "stream"));
  g_assert_cmpfloat (metric (cl.servers[0], "legba_relay_lost_total"), ==, 0);

  client_free (sleeper);
  client_free (sub_a);
  client_free (watch_a);
  cluster_stop (&cl);
}

/* ---- Redis down, Redis back ---- */

static void
publish_range (Server * server, const char *channel, guint from, guint to)
{
  for (guint k = from; k < to; k++) {
    g_autofree char *data = g_strdup_printf ("{\"p\":\"api-a\",\"n\":%u}", k);

    g_assert_cmpuint (api_publish (server, channel, "tick", data, NULL), ==,
        200);
    while (g_main_context_iteration (NULL, FALSE));
  }
}

/* Two member_added (or _removed) of room, in either order. */
static void
expect_two_members (Client * c, const char *event, const char *channel,
    const char *one, const char *other)
{
  g_autoptr (Message) first = client_wait (c, event, channel);
  g_autoptr (Message) second = client_wait (c, event, channel);
  g_autofree char *a = member_id (first);
  g_autofree char *b = member_id (second);

  if (g_strcmp0 (a, one) != 0) {
    g_assert_cmpstr (a, ==, other);
    g_assert_cmpstr (b, ==, one);
  } else {
    g_assert_cmpstr (b, ==, other);
  }
}

/* Redis killed (SIGKILL) and restarted mid-stream, without persistence:
 * A serves its own sockets meanwhile (delivery and presence), both
 * instances reconnect, and B's subscribers get every event published
 * through A exactly once and in order: those Redis acknowledged and lost
 * (some of them after a presence change, while B was not reading), those
 * published while it was down, those after. Presence survives, and
 * nothing counts as lost. */
static void
test_redis_restart (void)
{
  static const char *const publisher[] = { "api-a", NULL };
  const guint before = 80, unread = 10, during = 80, after = 80;
  const char *room = "presence-steady";
  Cluster cl = { 0 };
  Client *sub_a, *sub_b[2], *steady, *watch_b, *newcomer, *early;

  cluster_start (&cl, 2);
  sub_a = client_connect (cl.servers[0]);
  message_free (client_subscribe (sub_a, "stream", NULL));
  for (guint i = 0; i < 2; i++) {
    sub_b[i] = client_connect (cl.servers[1]);
    message_free (client_subscribe (sub_b[i], "stream", NULL));
  }
  steady = client_connect (cl.servers[0]);
  message_free (client_join (steady, room, "steady"));
  /* B knows of steady before watch_b subscribes: steady is then in
   * watch_b's subscription, and any member_added it gets later is one the
   * restart made. */
  wait_users (cl.servers[1], room, "steady");
  watch_b = client_connect (cl.servers[1]);
  message_free (client_join (watch_b, room, "watch-b"));
  for (guint i = 0; i < 2; i++)
    wait_users (cl.servers[i], room, "steady,watch-b");
  expect_member (steady, "pusher_internal:member_added", room, "watch-b");

  publish_range (cl.servers[0], "stream", 0, before);

  /* B stops reading; A appends an event, a presence change and more
   * events, all acknowledged by Redis, then Redis goes. */
  g_subprocess_send_signal (cl.servers[1]->p.process, SIGSTOP);
  publish_range (cl.servers[0], "stream", before, before + 1);
  early = client_connect (cl.servers[0]);
  message_free (client_join (early, room, "early"));
  expect_member (steady, "pusher_internal:member_added", room, "early");
  publish_range (cl.servers[0], "stream", before + 1, before + unread);
  wait_metric (cl.servers[0], "legba_relay_outbox", 0);
  redis_kill (cl.redis);
  wait_metric (cl.servers[0], "legba_relay_up", 0);
  g_subprocess_send_signal (cl.servers[1]->p.process, SIGCONT);
  wait_metric (cl.servers[1], "legba_relay_up", 0);

  /* Redis down: A still delivers to its own sockets, at once, and its
   * presence still works locally. */
  publish_range (cl.servers[0], "stream", before + unread,
      before + unread + during);
  expect_sequences (sub_a, "tick", "stream", publisher, 0,
      before + unread + during);
  newcomer = client_connect (cl.servers[0]);
  message_free (client_join (newcomer, room, "newcomer"));
  expect_member (steady, "pusher_internal:member_added", room, "newcomer");

  redis_spawn (cl.redis);
  for (guint i = 0; i < 2; i++)
    wait_metric (cl.servers[i], "legba_relay_up", 1);
  publish_range (cl.servers[0], "stream", before + unread + during,
      before + unread + during + after);
  expect_sequences (sub_a, "tick", "stream", publisher,
      before + unread + during, after);
  for (guint i = 0; i < 2; i++)
    expect_sequences (sub_b[i], "tick", "stream", publisher, 0,
        before + unread + during + after);

  /* Nothing twice, after a marker through A. */
  g_assert_cmpuint (api_publish (cl.servers[0], "stream", "marker", "{}",
          NULL), ==, 200);
  for (guint i = 0; i < 2; i++) {
    message_free (client_wait (sub_b[i], "marker", "stream"));
    g_assert_cmpuint (client_drop_all (sub_b[i], "tick", NULL), ==, 0);
  }

  /* Presence came through: B learns of the two that joined while it was
   * not reading, and never removed the member that stayed on A. */
  expect_two_members (watch_b, "pusher_internal:member_added", room, "early",
      "newcomer");
  for (guint i = 0; i < 2; i++)
    wait_users (cl.servers[i], room, "early,newcomer,steady,watch-b");
  g_assert_cmpuint (client_drop_all (watch_b,
          "pusher_internal:member_removed", NULL), ==, 0);

  for (guint i = 0; i < 2; i++) {
    g_assert_cmpfloat (metric (cl.servers[i],
            "legba_relay_redis_restarts_total"), ==, 1);
    g_assert_cmpfloat (metric (cl.servers[i],
            "legba_relay_disconnects_total"), ==, 1);
  }
  g_assert_cmpfloat (metric (cl.servers[0], "legba_relay_dropped_total"), ==,
      0);
  g_assert_cmpfloat (metric (cl.servers[1], "legba_relay_lost_total"), ==, 0);

  client_free (early);
  client_free (newcomer);
  client_free (steady);
  client_free (watch_b);
  client_free (sub_a);
  for (guint i = 0; i < 2; i++)
    client_free (sub_b[i]);
  cluster_stop (&cl);
}

/* ---- legba-probe relay and presence ---- */


/* timeout: "60" for a probe that passes, a few seconds for one that
 * fails (each failing check waits until the probe's deadline). */
static int
run_probe (const char *command, const char *urls, const char *timeout,
    char **out)
{
  const char *argv[] =
      { legba_test_tool_path ("LEGBA_PROBE"), command, "--urls", urls,
    "--app-id", "1", "--app-key", "key", "--app-secret", "secret",
    "--timeout", timeout, NULL
  };
  g_autofree char *err = NULL;
  int status = legba_test_run (argv, out, &err);

  g_test_message ("legba-probe %s:\n%s%s", command, *out, err);
  return status;
}

static void
test_probes (void)
{
  Cluster cl = { 0 };
  g_autofree char *urls = NULL;
  g_autofree char *out = NULL;
  g_autofree char *broken = NULL;
  Server *lone;

  cluster_start (&cl, 3);
  urls = g_strdup_printf ("ws://127.0.0.1:%u,ws://127.0.0.1:%u,"
      "ws://127.0.0.1:%u", cl.servers[0]->port, cl.servers[1]->port,
      cl.servers[2]->port);

  g_assert_cmpint (run_probe ("relay", urls, "60", &out), ==, 0);
  g_assert_null (strstr (out, "not ok"));
  g_assert_nonnull (strstr (out, "# 10 of 10 checks passed"));
  g_clear_pointer (&out, g_free);
  g_assert_cmpint (run_probe ("presence", urls, "60", &out), ==, 0);
  g_assert_null (strstr (out, "not ok"));
  g_clear_pointer (&out, g_free);

  /* An instance outside the cluster: the probes say so. */
  lone = server_start (NULL, "lone", NULL);
  broken = g_strdup_printf ("ws://127.0.0.1:%u,ws://127.0.0.1:%u",
      cl.servers[0]->port, lone->port);
  g_assert_cmpint (run_probe ("relay", broken, "3", &out), ==, 1);
  g_assert_nonnull (strstr (out, "not ok 3 - "));
  g_clear_pointer (&out, g_free);
  g_assert_cmpint (run_probe ("presence", broken, "3", &out), ==, 1);
  server_stop (lone);
  server_free (lone);
  cluster_stop (&cl);
}

/* ---- Configuration ---- */

static void
test_config (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autofree char *config = NULL;
  g_autofree char *text = NULL;
  Redis *redis = redis_start ();
  Server *by_file, *by_flags, *other;
  const char *bad_url[] =
      { legba_test_tool_path ("LEGBA_SERVER"), "--app-id", "1",
    "--app-key", "k", "--app-secret", "s", "--redis", "http://x", NULL
  };
  const char *alone[] =
      { legba_test_tool_path ("LEGBA_SERVER"), "--app-id", "1",
    "--app-key", "k", "--app-secret", "s", "--instance-id", "x", NULL
  };
  const char *bad_key[] =
      { legba_test_tool_path ("LEGBA_SERVER"), "--config", NULL,
    NULL
  };

  g_assert_cmpint (legba_test_run (bad_url, &out, &err), ==, 2);
  g_assert_nonnull (strstr (err, "Redis URL"));
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&out, g_free);
  g_assert_cmpint (legba_test_run (alone, &out, &err), ==, 2);
  g_assert_nonnull (strstr (err, "need --redis"));
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&out, g_free);

  config = g_build_filename (redis->dir, "legba.conf", NULL);
  bad_key[2] = config;
  g_assert_true (g_file_set_contents (config, "[redis]\nurl = unix:///x\n"
          "bogus = 1\n", -1, NULL));
  g_assert_cmpint (legba_test_run (bad_key, &out, &err), ==, 1);
  g_assert_nonnull (strstr (err, "[redis] bogus: unknown key"));

  /* [redis] in a file and the same by flags make one cluster; another
   * prefix makes another one on the same Redis. */
  text = g_strdup_printf ("[redis]\nurl = %s\ninstance-id = by-file\n"
      "prefix = test:\nretention = 500\ninstance-ttl = %d\n", redis->url,
      INSTANCE_TTL);
  g_assert_true (g_file_set_contents (config, text, -1, &error));
  by_file = server_start (NULL, "by-file", (const char *const[]) {
        "--config", config, NULL
      });
  by_flags = server_start (redis, "by-flags", (const char *const[]) {
        "--redis-prefix", "test:", NULL
      });
  other = server_start (redis, "other", NULL);
  wait_metric (by_file, "legba_relay_instances", 1);
  wait_metric (by_flags, "legba_relay_instances", 1);
  wait_metric (other, "legba_relay_up", 1);
  g_assert_cmpfloat (metric (other, "legba_relay_instances"), ==, 0);

  server_stop (other);
  server_stop (by_flags);
  server_stop (by_file);
  server_free (other);
  server_free (by_flags);
  server_free (by_file);
  g_unlink (config);
  redis_free (redis);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  redis_server_path = g_find_program_in_path ("redis-server");
  if (redis_server_path == NULL) {
    g_printerr ("redis-server is not installed (scripts/setup.sh installs "
        "it): skipped\n");
    return 77;
  }
  http = soup_session_new_with_options ("timeout", WAIT_S, NULL);

  g_test_add_func ("/cluster/relay/exactly-once-in-order",
      test_relay_exactly_once);
  g_test_add_func ("/cluster/presence/shared", test_presence_shared);
  g_test_add_func ("/cluster/subscription-count", test_subscription_count);
  g_test_add_func ("/cluster/instance-kill", test_instance_kill);
  g_test_add_func ("/cluster/instance-stall", test_instance_stall);
  g_test_add_func ("/cluster/redis-restart", test_redis_restart);
  g_test_add_func ("/cluster/probes", test_probes);
  g_test_add_func ("/cluster/config", test_config);

  {
    int status = g_test_run ();

    g_object_unref (http);
    g_free (redis_server_path);
    return status;
  }
}
