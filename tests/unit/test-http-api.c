/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The Pusher HTTP API and the join-token endpoint, driven through
 * legba_http_api_handle against a real LegbaHub whose transport records
 * what it is asked to send and close.
 */
#include <legba/server/legba-http-api.h>
#include <legba/common/legba-auth.h>
#include <legba/server/legba-token.h>

#include <string.h>

#define APP_ID "1"
#define APP_KEY "app-key"
#define APP_SECRET "app-secret"
#define OTHER_ID "2"
#define OTHER_KEY "other-key"
#define OTHER_SECRET "other-secret"
#define NOW 1700000000

/* ---- A recording transport ---- */

typedef struct
{
  LegbaHubConn *conn;
  GPtrArray *frames;            /* char *, in order */
  guint16 close_code;           /* 0 while open */
} FakeConn;

typedef struct
{
  LegbaHub *hub;
  GPtrArray *conns;             /* FakeConn * */
} Fixture;

static void
fake_send (gpointer handle, GBytes * frame, gpointer user_data)
{
  FakeConn *fc = handle;
  gsize len;
  const char *data = g_bytes_get_data (frame, &len);

  g_ptr_array_add (fc->frames, g_strndup (data, len));
}

static void
fake_close (gpointer handle, guint16 code, const char *reason,
    gpointer user_data)
{
  FakeConn *fc = handle;

  fc->close_code = code;
}

static const LegbaHubTransport fake_transport = { fake_send, fake_close };

static void
fake_conn_free (FakeConn * fc)
{
  g_ptr_array_unref (fc->frames);
  g_free (fc);
}

static void
fixture_setup (Fixture * f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  f->hub = legba_hub_new (&fake_transport, f);
  f->conns = g_ptr_array_new_with_free_func ((GDestroyNotify) fake_conn_free);
  g_assert_true (legba_hub_add_app (f->hub, APP_ID, APP_KEY, APP_SECRET,
          &error));
  g_assert_true (legba_hub_add_app (f->hub, OTHER_ID, OTHER_KEY,
          OTHER_SECRET, &error));
  g_assert_no_error (error);
}

static void
fixture_teardown (Fixture * f, gconstpointer data)
{
  guint i;

  for (i = 0; i < f->conns->len; i++) {
    FakeConn *fc = g_ptr_array_index (f->conns, i);

    if (fc->conn)
      legba_hub_conn_closed (f->hub, fc->conn);
  }
  legba_hub_free (f->hub);
  g_ptr_array_unref (f->conns);
}

static FakeConn *
open_conn_app (Fixture * f, const char *key)
{
  FakeConn *fc = g_new0 (FakeConn, 1);

  fc->frames = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (f->conns, fc);
  fc->conn = legba_hub_open (f->hub, key, "7", fc);
  g_assert_nonnull (fc->conn);
  return fc;
}

static FakeConn *
open_conn (Fixture * f)
{
  return open_conn_app (f, APP_KEY);
}

static void
conn_send (Fixture * f, FakeConn * fc, const char *frame)
{
  legba_hub_receive (f->hub, fc->conn, frame, strlen (frame));
}

static JsonObject *
parse_object (const char *text)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;

  g_assert_true (json_parser_load_from_data (parser, text, -1, &error));
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)));
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

/* Frames of fc with this event (and channel, unless NULL). */
static guint
count_events (FakeConn * fc, const char *event, const char *channel)
{
  guint i, n = 0;

  for (i = 0; i < fc->frames->len; i++) {
    g_autoptr (JsonObject) frame = parse_object (g_ptr_array_index (fc->frames,
            i));

    if (g_strcmp0 (json_object_get_string_member_with_default (frame,
                "event", NULL), event) != 0)
      continue;
    if (channel && g_strcmp0 (json_object_get_string_member_with_default
            (frame, "channel", NULL), channel) != 0)
      continue;
    n++;
  }
  return n;
}

/* The data of the last frame of fc with this event. */
static char *
last_event_data (FakeConn * fc, const char *event)
{
  guint i;

  for (i = fc->frames->len; i > 0; i--) {
    g_autoptr (JsonObject) frame = parse_object (g_ptr_array_index (fc->frames,
            i - 1));

    if (g_strcmp0 (json_object_get_string_member_with_default (frame,
                "event", NULL), event) == 0)
      return g_strdup (json_object_get_string_member_with_default (frame,
              "data", NULL));
  }
  return NULL;
}

static char *
subscribe_frame (const char *channel, const char *auth,
    const char *channel_data)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "event");
  json_builder_add_string_value (b, "pusher:subscribe");
  json_builder_set_member_name (b, "data");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "channel");
  json_builder_add_string_value (b, channel);
  if (auth) {
    json_builder_set_member_name (b, "auth");
    json_builder_add_string_value (b, auth);
  }
  if (channel_data) {
    json_builder_set_member_name (b, "channel_data");
    json_builder_add_string_value (b, channel_data);
  }
  json_builder_end_object (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  return json_generator_to_data (gen, NULL);
}

/* Subscribes with a valid signature; user_id for presence channels. */
static void
subscribe (Fixture * f, FakeConn * fc, const char *channel, const char *user_id)
{
  const char *socket_id = legba_hub_conn_get_socket_id (fc->conn);
  g_autofree char *data = NULL;
  g_autofree char *auth = NULL;
  g_autofree char *frame = NULL;
  guint before = count_events (fc, "pusher_internal:subscription_succeeded",
      channel);

  if (user_id)
    data = g_strdup_printf ("{\"user_id\":\"%s\",\"user_info\":{}}", user_id);
  if (g_str_has_prefix (channel, "private-") ||
      g_str_has_prefix (channel, "presence-"))
    auth = legba_auth_channel_sign (APP_KEY, APP_SECRET, socket_id, channel,
        data);
  frame = subscribe_frame (channel, auth, data);
  conn_send (f, fc, frame);
  g_assert_cmpuint (count_events (fc, "pusher_internal:subscription_succeeded",
          channel), ==, before + 1);
}

/* Pusher protocol 7 pusher:signin with a valid signature. */
static void
sign_in (Fixture * f, FakeConn * fc, const char *user_id)
{
  const char *socket_id = legba_hub_conn_get_socket_id (fc->conn);
  g_autofree char *user_data = g_strdup_printf ("{\"id\":\"%s\"}", user_id);
  g_autofree char *auth = legba_auth_user_sign (APP_KEY, APP_SECRET,
      socket_id, user_data);
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *frame = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "event");
  json_builder_add_string_value (b, "pusher:signin");
  json_builder_set_member_name (b, "data");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "auth");
  json_builder_add_string_value (b, auth);
  json_builder_set_member_name (b, "user_data");
  json_builder_add_string_value (b, user_data);
  json_builder_end_object (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  frame = json_generator_to_data (gen, NULL);

  conn_send (f, fc, frame);
  g_assert_cmpuint (count_events (fc, "pusher:signin_success", NULL), ==, 1);
  g_assert_cmpstr (legba_hub_conn_get_user_id (fc->conn), ==, user_id);
}

/* ---- Requests ---- */

typedef struct
{
  const char *method;
  const char *path;
  const char *query;            /* "k=v&k=v", decoded, signed */
  const char *body;
  const char *authorization;
  const char *key;              /* default APP_KEY */
  const char *secret;           /* default APP_SECRET */
  gint64 signed_at;             /* default NOW */
  gboolean unsigned_request;
  const char *tamper_key;       /* set after signing */
  const char *tamper_value;
} Call;

static GHashTable *
call_params (const Call * call)
{
  GHashTable *params = g_hash_table_new_full (g_str_hash, g_str_equal,
      g_free, g_free);
  g_auto (GStrv) pairs = NULL;
  guint i;

  if (call->query) {
    pairs = g_strsplit (call->query, "&", -1);
    for (i = 0; pairs[i]; i++) {
      char *eq = strchr (pairs[i], '=');

      g_assert_nonnull (eq);
      g_hash_table_insert (params, g_strndup (pairs[i], eq - pairs[i]),
          g_strdup (eq + 1));
    }
  }
  return params;
}

/* Signs as the pusher SDK does: auth_key, auth_timestamp, auth_version,
 * body_md5 when there is a body, then auth_signature. */
static void
sign_params (const Call * call, GHashTable * params)
{
  g_autofree char *text = NULL;

  g_hash_table_insert (params, g_strdup ("auth_key"),
      g_strdup (call->key ? call->key : APP_KEY));
  g_hash_table_insert (params, g_strdup ("auth_timestamp"),
      g_strdup_printf ("%" G_GINT64_FORMAT,
          call->signed_at ? call->signed_at : NOW));
  g_hash_table_insert (params, g_strdup ("auth_version"), g_strdup ("1.0"));
  if (call->body && call->body[0])
    g_hash_table_insert (params, g_strdup ("body_md5"),
        g_compute_checksum_for_string (G_CHECKSUM_MD5, call->body, -1));
  text = legba_auth_http_string_to_sign (call->method, call->path, params);
  g_hash_table_insert (params, g_strdup ("auth_signature"),
      legba_auth_hmac_hex (call->secret ? call->secret : APP_SECRET, text, -1));
}

static JsonObject *
api_call (Fixture * f, const Call * call, guint expected_status)
{
  g_autoptr (GHashTable) params = call_params (call);
  LegbaHttpRequest request = { 0 };
  LegbaHttpResponse response = { 0 };
  JsonObject *result;

  if (!call->unsigned_request)
    sign_params (call, params);
  if (call->tamper_key)
    g_hash_table_insert (params, g_strdup (call->tamper_key),
        g_strdup (call->tamper_value));

  request.method = call->method;
  request.path = call->path;
  request.params = params;
  request.body = call->body;
  request.body_len = call->body ? strlen (call->body) : 0;
  request.authorization = call->authorization;
  request.now_s = NOW;

  legba_http_api_handle (f->hub, &request, &response);
  if (response.status != expected_status)
    g_error ("%s %s: expected %u, got %u %s", call->method, call->path,
        expected_status, response.status, response.body);
  g_assert_nonnull (response.body);
  result = parse_object (response.body);
  if (expected_status >= 400) {
    g_assert_true (json_object_has_member (result, "error"));
    g_assert_nonnull (json_object_get_string_member_with_default (result,
            "error", NULL));
  }
  legba_http_response_clear (&response);
  g_assert_null (response.body);
  return result;
}

static void
post (Fixture * f, const char *path, const char *body, guint status)
{
  Call call = {.method = "POST",.path = path,.body = body };
  g_autoptr (JsonObject) result = api_call (f, &call, status);

  if (status == 200)
    g_assert_cmpuint (json_object_get_size (result), ==, 0);
}

static JsonObject *
get (Fixture * f, const char *path, const char *query, guint status)
{
  Call call = {.method = "GET",.path = path,.query = query };

  return api_call (f, &call, status);
}

static gint64
get_int (JsonObject * obj, const char *path)
{
  g_auto (GStrv) parts = g_strsplit (path, "/", -1);
  guint i;

  for (i = 0; parts[i + 1]; i++) {
    g_assert_true (json_object_has_member (obj, parts[i]));
    obj = json_object_get_object_member (obj, parts[i]);
  }
  g_assert_true (json_object_has_member (obj, parts[i]));
  return json_object_get_int_member (obj, parts[i]);
}

/* ---- Routing and signatures ---- */

static void
test_unknown_app (Fixture * f, gconstpointer data)
{
  static const char *const paths[] = {
    "/apps/3/events", "/apps/3/auth", "/apps/3", "/apps//events",
    "/apps/3/no/such/route",
  };
  guint i;

  /* 404 before anything else: unsigned, wrong method, any route. */
  for (i = 0; i < G_N_ELEMENTS (paths); i++) {
    Call call = {.method = "PUT",.path = paths[i],.unsigned_request = TRUE };
    g_autoptr (JsonObject) result = api_call (f, &call, 404);
  }
}

static void
test_not_found (Fixture * f, gconstpointer data)
{
  static const char *const paths[] = {
    "/apps/1", "/apps/1/", "/apps/1/nothing", "/apps/1/events/",
    "/apps/1/channels/x/members", "/apps/1/users/u", "/apps/1/users/u/x",
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (paths); i++) {
    g_autoptr (JsonObject) result = get (f, paths[i], NULL, 404);
  }
  {
    Call call = {.method = "GET",.path = "/other",.unsigned_request = TRUE };
    g_autoptr (JsonObject) result = api_call (f, &call, 404);
  }
}

static void
test_method (Fixture * f, gconstpointer data)
{
  g_autoptr (JsonObject) events = get (f, "/apps/1/events", NULL, 405);
  g_autoptr (JsonObject) batch = get (f, "/apps/1/batch_events", NULL, 405);
  g_autoptr (JsonObject) term = get (f,
      "/apps/1/users/u/terminate_connections", NULL, 405);

  post (f, "/apps/1/channels", NULL, 405);
  post (f, "/apps/1/channels/x", NULL, 405);
  post (f, "/apps/1/channels/presence-x/users", NULL, 405);
}

static void
test_signature_missing (Fixture * f, gconstpointer data)
{
  Call call = {.method = "GET",.path = "/apps/1/channels",
    .unsigned_request = TRUE
  };
  g_autoptr (JsonObject) result = api_call (f, &call, 401);
}

static void
test_signature_forged (Fixture * f, gconstpointer data)
{
  const char *body = "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"d\"}";
  FakeConn *fc = open_conn (f);
  Call calls[] = {
    /* another secret, another app's key and secret */
    {.method = "POST",.path = "/apps/1/events",.body = body,
        .secret = "guess"},
    {.method = "POST",.path = "/apps/1/events",.body = body,
        .key = OTHER_KEY,.secret = OTHER_SECRET},
    /* parameters changed after signing */
    {.method = "POST",.path = "/apps/1/events",.body = body,
        .tamper_key = "auth_signature",.tamper_value = "00"},
    {.method = "POST",.path = "/apps/1/events",.body = body,
        .tamper_key = "socket_id",.tamper_value = "1.1"},
    {.method = "POST",.path = "/apps/1/events",.body = body,
        .tamper_key = "auth_version",.tamper_value = "2.0"},
    {.method = "GET",.path = "/apps/1/channels",.query = "info=x",
        .tamper_key = "filter_by_prefix",.tamper_value = "private-"},
  };
  guint i;

  subscribe (f, fc, "c", NULL);
  for (i = 0; i < G_N_ELEMENTS (calls); i++) {
    g_autoptr (JsonObject) result = api_call (f, &calls[i], 401);
  }
  g_assert_cmpuint (count_events (fc, "e", NULL), ==, 0);
}

static void
test_signature_stale (Fixture * f, gconstpointer data)
{
  const char *body = "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"d\"}";
  Call stale = {.method = "POST",.path = "/apps/1/events",.body = body,
    .signed_at = NOW - 601
  };
  Call future = {.method = "POST",.path = "/apps/1/events",.body = body,
    .signed_at = NOW + 601
  };
  Call edge = {.method = "POST",.path = "/apps/1/events",.body = body,
    .signed_at = NOW - 600
  };
  g_autoptr (JsonObject) r1 = api_call (f, &stale, 401);
  g_autoptr (JsonObject) r2 = api_call (f, &future, 401);
  g_autoptr (JsonObject) r3 = api_call (f, &edge, 200);
}

static void
test_signature_body_md5 (Fixture * f, gconstpointer data)
{
  const char *body = "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"d\"}";
  FakeConn *fc = open_conn (f);
  Call wrong = {.method = "POST",.path = "/apps/1/events",.body = body,
    .tamper_key = "body_md5",.tamper_value = "d41d8cd98f00b204e9800998ecf8427e"
  };
  g_autoptr (JsonObject) r1 = api_call (f, &wrong, 401);
  g_autoptr (GHashTable) params = g_hash_table_new_full (g_str_hash,
      g_str_equal, g_free, g_free);
  Call signed_empty = {.method = "POST",.path = "/apps/1/events" };
  LegbaHttpRequest request = { 0 };
  LegbaHttpResponse response = { 0 };

  /* Signed without a body, sent with one. */
  subscribe (f, fc, "c", NULL);
  sign_params (&signed_empty, params);
  request.method = "POST";
  request.path = "/apps/1/events";
  request.params = params;
  request.body = body;
  request.body_len = strlen (body);
  request.now_s = NOW;
  legba_http_api_handle (f->hub, &request, &response);
  g_assert_cmpuint (response.status, ==, 401);
  legba_http_response_clear (&response);

  g_assert_cmpuint (count_events (fc, "e", NULL), ==, 0);
}

/* ---- Events ---- */

static void
test_events_publish (Fixture * f, gconstpointer data)
{
  FakeConn *a = open_conn (f), *b = open_conn (f), *c = open_conn (f);
  FakeConn *other_app = open_conn_app (f, OTHER_KEY);
  g_autofree char *got = NULL;
  guint64 before = legba_hub_get_counters (f->hub)->api_events;

  subscribe (f, a, "news", NULL);
  subscribe (f, b, "private-news", NULL);
  subscribe (f, c, "sport", NULL);
  subscribe (f, other_app, "news", NULL);

  post (f, "/apps/1/events", "{\"name\":\"headline\",\"channels\":[\"news\","
      "\"private-news\"],\"data\":\"{\\\"title\\\":\\\"Hi\\\"}\"}", 200);

  g_assert_cmpuint (count_events (a, "headline", "news"), ==, 1);
  g_assert_cmpuint (count_events (b, "headline", "private-news"), ==, 1);
  g_assert_cmpuint (count_events (c, "headline", NULL), ==, 0);
  g_assert_cmpuint (count_events (other_app, "headline", NULL), ==, 0);
  got = last_event_data (a, "headline");
  g_assert_cmpstr (got, ==, "{\"title\":\"Hi\"}");
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->api_events, >, before);

  /* `channel` instead of `channels`. */
  post (f, "/apps/1/events",
      "{\"name\":\"score\",\"channel\":\"sport\",\"data\":\"1-0\"}", 200);
  g_assert_cmpuint (count_events (c, "score", "sport"), ==, 1);
  g_assert_cmpuint (count_events (a, "score", NULL), ==, 0);

  /* A channel named twice is published to once. */
  post (f, "/apps/1/events", "{\"name\":\"twice\",\"channels\":[\"news\","
      "\"news\"],\"data\":\"x\"}", 200);
  g_assert_cmpuint (count_events (a, "twice", "news"), ==, 1);
}

static void
test_events_exclude_socket (Fixture * f, gconstpointer data)
{
  FakeConn *a = open_conn (f), *b = open_conn (f);
  g_autofree char *body = NULL;

  subscribe (f, a, "room", NULL);
  subscribe (f, b, "room", NULL);
  body = g_strdup_printf ("{\"name\":\"e\",\"channel\":\"room\",\"data\":"
      "\"x\",\"socket_id\":\"%s\"}", legba_hub_conn_get_socket_id (a->conn));
  post (f, "/apps/1/events", body, 200);

  g_assert_cmpuint (count_events (a, "e", NULL), ==, 0);
  g_assert_cmpuint (count_events (b, "e", "room"), ==, 1);
}

static void
test_events_info (Fixture * f, gconstpointer data)
{
  FakeConn *a = open_conn (f), *b = open_conn (f), *c = open_conn (f);
  Call call = {.method = "POST",.path = "/apps/1/events",
    .body = "{\"name\":\"e\",\"channels\":[\"presence-r\",\"plain\"],"
        "\"data\":\"x\",\"info\":\"user_count,subscription_count\"}"
  };
  g_autoptr (JsonObject) result = NULL;
  JsonObject *plain;

  subscribe (f, a, "presence-r", "alice");
  subscribe (f, b, "presence-r", "alice");
  subscribe (f, c, "presence-r", "bob");
  subscribe (f, c, "plain", NULL);

  result = api_call (f, &call, 200);
  g_assert_cmpint (get_int (result, "channels/presence-r/user_count"), ==, 2);
  g_assert_cmpint (get_int (result,
          "channels/presence-r/subscription_count"), ==, 3);
  g_assert_cmpint (get_int (result, "channels/plain/subscription_count"), ==,
      1);
  plain = json_object_get_object_member (json_object_get_object_member
      (result, "channels"), "plain");
  g_assert_false (json_object_has_member (plain, "user_count"));
}

static void
test_events_bad_input (Fixture * f, gconstpointer data)
{
  static const char *const bodies[] = {
    "not json",
    "[]",
    "\"a string\"",
    "{}",
    "{\"channel\":\"c\",\"data\":\"x\"}",
    "{\"name\":\"\",\"channel\":\"c\",\"data\":\"x\"}",
    "{\"name\":5,\"channel\":\"c\",\"data\":\"x\"}",
    "{\"name\":\"e\",\"channel\":\"c\"}",
    "{\"name\":\"e\",\"channel\":\"c\",\"data\":{\"a\":1}}",
    "{\"name\":\"e\",\"channel\":\"c\",\"data\":null}",
    "{\"name\":\"e\",\"data\":\"x\"}",
    "{\"name\":\"e\",\"channel\":5,\"data\":\"x\"}",
    "{\"name\":\"e\",\"channels\":\"c\",\"data\":\"x\"}",
    "{\"name\":\"e\",\"channels\":[],\"data\":\"x\"}",
    "{\"name\":\"e\",\"channels\":[5],\"data\":\"x\"}",
    "{\"name\":\"e\",\"channels\":[\"c\"],\"channel\":\"c\",\"data\":\"x\"}",
    "{\"name\":\"e\",\"channel\":\"bad channel\",\"data\":\"x\"}",
    "{\"name\":\"e\",\"channel\":\"\",\"data\":\"x\"}",
    "{\"name\":\"e\",\"channels\":[\"c\",\"c/d\"],\"data\":\"x\"}",
    "{\"name\":\"e\",\"channel\":\"#server-to-user-\",\"data\":\"x\"}",
    "{\"name\":\"pusher:error\",\"channel\":\"c\",\"data\":\"x\"}",
    "{\"name\":\"pusher_internal:x\",\"channel\":\"c\",\"data\":\"x\"}",
    "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"x\",\"socket_id\":\"1\"}",
    "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"x\",\"socket_id\":\"a.b\"}",
    "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"x\",\"socket_id\":1.5}",
    "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"x\",\"info\":[]}",
    "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"x\"",
    "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"x\"}\xff",
    /* not JSON, or JSON that would not survive being forwarded */
    "{'name':'e','channel':'c','data':'x'}",
    "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"\\ud800\"}",
    "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"a\\u0000b\"}",
    "{\"name\":\"e\",\"channel\":\"c\",\"data\":\"x\"} {}",
  };
  FakeConn *fc = open_conn (f);
  g_autofree char *name201 = g_strnfill (201, 'n');
  g_autofree char *long_name = g_strdup_printf ("{\"name\":\"%s\","
      "\"channel\":\"c\",\"data\":\"x\"}", name201);
  g_autofree char *deep = NULL;
  GString *many =
      g_string_new ("{\"name\":\"e\",\"data\":\"x\",\"channels\":[");
  g_autofree char *too_many = NULL;
  GString *nest = g_string_new ("{\"name\":\"e\",\"channel\":\"c\",\"data\":"
      "\"x\",\"extra\":");
  guint i;

  subscribe (f, fc, "c", NULL);
  for (i = 0; i < G_N_ELEMENTS (bodies); i++)
    post (f, "/apps/1/events", bodies[i], 400);
  post (f, "/apps/1/events", long_name, 400);
  post (f, "/apps/1/events", NULL, 400);

  for (i = 0; i < 101; i++)
    g_string_append_printf (many, "%s\"c%u\"", i ? "," : "", i);
  g_string_append (many, "]}");
  too_many = g_string_free (many, FALSE);
  post (f, "/apps/1/events", too_many, 400);

  /* Deep nesting never reaches the recursive parser. */
  for (i = 0; i < 100000; i++)
    g_string_append_c (nest, '[');
  g_string_append_c (nest, '}');
  deep = g_string_free (nest, FALSE);
  post (f, "/apps/1/events", deep, 400);

  g_assert_cmpuint (count_events (fc, "e", NULL), ==, 0);
  g_assert_cmpuint (fc->close_code, ==, 0);
}

static void
test_events_too_large (Fixture * f, gconstpointer data)
{
  const LegbaLimits *limits = legba_hub_get_limits (f->hub);
  FakeConn *fc = open_conn (f);
  g_autofree char *fits = g_strnfill (limits->max_event_bytes, 'x');
  g_autofree char *over = g_strnfill (limits->max_event_bytes + 1, 'x');
  g_autofree char *ok_body = g_strdup_printf ("{\"name\":\"e\","
      "\"channel\":\"c\",\"data\":\"%s\"}", fits);
  g_autofree char *big_body = g_strdup_printf ("{\"name\":\"big\","
      "\"channel\":\"c\",\"data\":\"%s\"}", over);

  subscribe (f, fc, "c", NULL);
  post (f, "/apps/1/events", big_body, 413);
  g_assert_cmpuint (count_events (fc, "big", NULL), ==, 0);
  post (f, "/apps/1/events", ok_body, 200);
  g_assert_cmpuint (count_events (fc, "e", "c"), ==, 1);
}

/* The pusher SDK's sendToUser publishes to "#server-to-user-ID". */
static void
test_events_server_to_user (Fixture * f, gconstpointer data)
{
  FakeConn *a = open_conn (f), *a2 = open_conn (f), *b = open_conn (f);
  g_autofree char *got = NULL;

  sign_in (f, a, "alice");
  sign_in (f, a2, "alice");
  sign_in (f, b, "bob");

  post (f, "/apps/1/events", "{\"name\":\"hello\",\"channels\":"
      "[\"#server-to-user-alice\"],\"data\":\"hi\"}", 200);
  g_assert_cmpuint (count_events (a, "hello", NULL), ==, 1);
  g_assert_cmpuint (count_events (a2, "hello", NULL), ==, 1);
  g_assert_cmpuint (count_events (b, "hello", NULL), ==, 0);
  got = last_event_data (a, "hello");
  g_assert_cmpstr (got, ==, "hi");

  /* Nobody signed in as carol: still accepted, delivered to no one. */
  post (f, "/apps/1/events", "{\"name\":\"hello\",\"channel\":"
      "\"#server-to-user-carol\",\"data\":\"hi\"}", 200);
  g_assert_cmpuint (count_events (b, "hello", NULL), ==, 0);
}

/* ---- Batch events ---- */

static void
test_batch_publish (Fixture * f, gconstpointer data)
{
  FakeConn *a = open_conn (f), *b = open_conn (f);
  Call call = {.method = "POST",.path = "/apps/1/batch_events",
    .body = "{\"batch\":[{\"name\":\"one\",\"channel\":\"a\",\"data\":\"1\"},"
        "{\"name\":\"two\",\"channel\":\"presence-b\",\"data\":\"2\","
        "\"info\":\"user_count\"},"
        "{\"name\":\"three\",\"channel\":\"a\",\"data\":\"3\","
        "\"socket_id\":\"1.1\"}]}"
  };
  g_autoptr (JsonObject) result = NULL;
  JsonArray *infos;

  subscribe (f, a, "a", NULL);
  subscribe (f, b, "presence-b", "bob");

  post (f, "/apps/1/batch_events", "{\"batch\":[{\"name\":\"x\",\"channel\":"
      "\"a\",\"data\":\"1\"},{\"name\":\"y\",\"channel\":\"presence-b\","
      "\"data\":\"2\"}]}", 200);
  g_assert_cmpuint (count_events (a, "x", "a"), ==, 1);
  g_assert_cmpuint (count_events (b, "y", "presence-b"), ==, 1);

  /* With info: one entry per event, in order. */
  result = api_call (f, &call, 200);
  infos = json_object_get_array_member (result, "batch");
  g_assert_cmpuint (json_array_get_length (infos), ==, 3);
  g_assert_cmpuint (json_object_get_size (json_array_get_object_element
          (infos, 0)), ==, 0);
  g_assert_cmpint (json_object_get_int_member (json_array_get_object_element
          (infos, 1), "user_count"), ==, 1);
  g_assert_cmpuint (count_events (a, "one", "a"), ==, 1);
  g_assert_cmpuint (count_events (b, "two", "presence-b"), ==, 1);
  g_assert_cmpuint (count_events (a, "three", "a"), ==, 1);
}

static void
test_batch_refused (Fixture * f, gconstpointer data)
{
  static const char *const bodies[] = {
    "{}",
    "{\"batch\":{}}",
    "{\"batch\":[]}",
    "{\"batch\":[5]}",
    /* one bad event refuses the whole batch */
    "{\"batch\":[{\"name\":\"e\",\"channel\":\"c\",\"data\":\"1\"},"
        "{\"name\":\"e\",\"channel\":\"bad name\",\"data\":\"2\"}]}",
    "{\"batch\":[{\"name\":\"e\",\"channel\":\"c\",\"data\":\"1\"},"
        "{\"name\":\"e\",\"data\":\"2\"}]}",
  };
  const LegbaLimits *limits = legba_hub_get_limits (f->hub);
  FakeConn *fc = open_conn (f);
  g_autofree char *over = g_strnfill (limits->max_event_bytes + 1, 'x');
  g_autofree char *big = g_strdup_printf ("{\"batch\":[{\"name\":\"e\","
      "\"channel\":\"c\",\"data\":\"1\"},{\"name\":\"e\",\"channel\":\"c\","
      "\"data\":\"%s\"}]}", over);
  GString *eleven = g_string_new ("{\"batch\":[");
  g_autofree char *too_many = NULL;
  guint i;

  subscribe (f, fc, "c", NULL);
  for (i = 0; i < G_N_ELEMENTS (bodies); i++)
    post (f, "/apps/1/batch_events", bodies[i], 400);
  post (f, "/apps/1/batch_events", big, 413);

  for (i = 0; i < 11; i++)
    g_string_append_printf (eleven, "%s{\"name\":\"e\",\"channel\":\"c\","
        "\"data\":\"%u\"}", i ? "," : "", i);
  g_string_append (eleven, "]}");
  too_many = g_string_free (eleven, FALSE);
  post (f, "/apps/1/batch_events", too_many, 400);

  g_assert_cmpuint (count_events (fc, "e", NULL), ==, 0);
}

/* ---- Channels ---- */

static void
test_channels_list (Fixture * f, gconstpointer data)
{
  FakeConn *a = open_conn (f), *b = open_conn (f);
  g_autoptr (JsonObject) all = NULL;
  g_autoptr (JsonObject) presence = NULL;
  g_autoptr (JsonObject) counted = NULL;
  g_autoptr (JsonObject) refused = NULL;
  g_autoptr (JsonObject) refused2 = NULL;
  JsonObject *channels;

  subscribe (f, a, "public-1", NULL);
  subscribe (f, b, "public-1", NULL);
  subscribe (f, a, "private-2", NULL);
  subscribe (f, a, "presence-3", "alice");
  subscribe (f, b, "presence-3", "bob");

  all = get (f, "/apps/1/channels", NULL, 200);
  channels = json_object_get_object_member (all, "channels");
  g_assert_cmpuint (json_object_get_size (channels), ==, 3);
  g_assert_cmpuint (json_object_get_size (json_object_get_object_member
          (channels, "public-1")), ==, 0);

  presence = get (f, "/apps/1/channels",
      "filter_by_prefix=presence-&info=user_count", 200);
  channels = json_object_get_object_member (presence, "channels");
  g_assert_cmpuint (json_object_get_size (channels), ==, 1);
  g_assert_cmpint (get_int (presence, "channels/presence-3/user_count"), ==, 2);

  counted = get (f, "/apps/1/channels",
      "filter_by_prefix=public-&info=subscription_count", 200);
  g_assert_cmpint (get_int (counted, "channels/public-1/subscription_count"),
      ==, 2);
  g_assert_false (json_object_has_member (json_object_get_object_member
          (counted, "channels"), "private-2"));

  /* Pusher: user_count only when the listing is limited to presence. */
  refused = get (f, "/apps/1/channels", "info=user_count", 400);
  refused2 = get (f, "/apps/1/channels",
      "filter_by_prefix=private-&info=user_count", 400);
}

static void
test_channels_other_app (Fixture * f, gconstpointer data)
{
  FakeConn *a = open_conn (f);
  Call call = {.method = "GET",.path = "/apps/2/channels",
    .key = OTHER_KEY,.secret = OTHER_SECRET
  };
  g_autoptr (JsonObject) result = NULL;

  subscribe (f, a, "mine", NULL);
  result = api_call (f, &call, 200);
  g_assert_cmpuint (json_object_get_size (json_object_get_object_member
          (result, "channels")), ==, 0);
}

static void
test_channel_one (Fixture * f, gconstpointer data)
{
  FakeConn *a = open_conn (f), *b = open_conn (f);
  g_autoptr (JsonObject) empty = NULL;
  g_autoptr (JsonObject) plain = NULL;
  g_autoptr (JsonObject) presence = NULL;
  g_autoptr (JsonObject) refused = NULL;
  g_autoptr (JsonObject) invalid = NULL;

  subscribe (f, a, "plain", NULL);
  subscribe (f, b, "plain", NULL);
  subscribe (f, a, "presence-p", "alice");
  subscribe (f, b, "presence-p", "alice");

  empty = get (f, "/apps/1/channels/nobody-here", NULL, 200);
  g_assert_false (json_object_get_boolean_member (empty, "occupied"));
  g_assert_false (json_object_has_member (empty, "subscription_count"));

  plain = get (f, "/apps/1/channels/plain", "info=subscription_count", 200);
  g_assert_true (json_object_get_boolean_member (plain, "occupied"));
  g_assert_cmpint (get_int (plain, "subscription_count"), ==, 2);
  g_assert_false (json_object_has_member (plain, "user_count"));

  presence = get (f, "/apps/1/channels/presence-p",
      "info=user_count,subscription_count", 200);
  g_assert_true (json_object_get_boolean_member (presence, "occupied"));
  g_assert_cmpint (get_int (presence, "user_count"), ==, 1);
  g_assert_cmpint (get_int (presence, "subscription_count"), ==, 2);

  refused = get (f, "/apps/1/channels/plain", "info=user_count", 400);
  invalid = get (f, "/apps/1/channels/bad name", NULL, 400);
}

static void
test_channel_users (Fixture * f, gconstpointer data)
{
  FakeConn *a = open_conn (f), *b = open_conn (f), *c = open_conn (f);
  g_autoptr (JsonObject) users = NULL;
  g_autoptr (JsonObject) none = NULL;
  g_autoptr (JsonObject) refused = NULL;
  JsonArray *list;

  subscribe (f, a, "presence-u", "alice");
  subscribe (f, b, "presence-u", "bob");
  subscribe (f, c, "presence-u", "alice");
  subscribe (f, a, "private-u", NULL);

  users = get (f, "/apps/1/channels/presence-u/users", NULL, 200);
  list = json_object_get_array_member (users, "users");
  g_assert_cmpuint (json_array_get_length (list), ==, 2);
  g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element
          (list, 0), "id"), ==, "alice");
  g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element
          (list, 1), "id"), ==, "bob");

  none = get (f, "/apps/1/channels/presence-empty/users", NULL, 200);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (none,
              "users")), ==, 0);

  refused = get (f, "/apps/1/channels/private-u/users", NULL, 400);
}

static void
test_terminate (Fixture * f, gconstpointer data)
{
  FakeConn *a = open_conn (f), *a2 = open_conn (f), *b = open_conn (f);

  sign_in (f, a, "alice");
  sign_in (f, a2, "alice");
  sign_in (f, b, "bob");

  /* As the pusher SDK sends it: a body of "{}" with its body_md5. */
  post (f, "/apps/1/users/alice/terminate_connections", "{}", 200);
  g_assert_cmpuint (a->close_code, ==, LEGBA_PUSHER_UNAUTHORIZED);
  g_assert_cmpuint (a2->close_code, ==, LEGBA_PUSHER_UNAUTHORIZED);
  g_assert_cmpuint (b->close_code, ==, 0);

  post (f, "/apps/1/users/nobody/terminate_connections", "{}", 200);
  post (f, "/apps/1/users//terminate_connections", "{}", 400);
}

/* ---- Join tokens ---- */

static char *
token_for (const char *secret, const char *room, const char *identity)
{
  g_autoptr (GError) error = NULL;
  char *token = legba_join_token_new (secret, room, identity, "Alice A.",
      3600, &error);

  g_assert_no_error (error);
  return token;
}

static JsonObject *
auth_call (Fixture * f, const char *authorization, const char *body,
    guint status)
{
  Call call = {.method = "POST",.path = "/apps/1/auth",.body = body,
    .authorization = authorization,.unsigned_request = TRUE
  };

  return api_call (f, &call, status);
}

static void
test_auth_grants (Fixture * f, gconstpointer data)
{
  FakeConn *fc = open_conn (f);
  const char *socket_id = legba_hub_conn_get_socket_id (fc->conn);
  g_autofree char *token = token_for (APP_SECRET, "standup", "alice");
  g_autofree char *bearer = g_strconcat ("Bearer ", token, NULL);
  g_autofree char *body = NULL;
  g_autofree char *expected_auth = NULL;
  g_autofree char *frame = NULL;
  g_autoptr (JsonObject) result = NULL;
  const char *expected_data = "{\"user_id\":\"alice-abc123\",\"user_info\":"
      "{\"identity\":\"alice\",\"name\":\"Alice A.\",\"protocol\":"
      "\"legba-room/1\"}}";
  const char *auth, *channel_data;

  /* As pusher-js posts it, with its extra params. */
  body = g_strdup_printf ("socket_id=%s&channel_name=presence-legba.standup"
      "&suffix=abc123", socket_id);
  result = auth_call (f, bearer, body, 200);
  auth = json_object_get_string_member (result, "auth");
  channel_data = json_object_get_string_member (result, "channel_data");
  g_assert_cmpstr (channel_data, ==, expected_data);
  expected_auth = legba_auth_channel_sign (APP_KEY, APP_SECRET, socket_id,
      "presence-legba.standup", expected_data);
  g_assert_cmpstr (auth, ==, expected_auth);

  /* The hub accepts it for that socket. */
  frame = subscribe_frame ("presence-legba.standup", auth, channel_data);
  conn_send (f, fc, frame);
  g_assert_cmpuint (count_events (fc, "pusher_internal:subscription_succeeded",
          "presence-legba.standup"), ==, 1);
}

static void
test_auth_json_body (Fixture * f, gconstpointer data)
{
  g_autofree char *token = token_for (APP_SECRET, "r1", "bob@example.com");
  g_autofree char *bearer = g_strconcat ("bearer  ", token, NULL);
  g_autoptr (JsonObject) result = auth_call (f, bearer,
      "{\"socket_id\":\"12.34\",\"channel_name\":\"presence-legba.r1\","
      "\"suffix\":\"0123456789abcdef\"}", 200);
  g_autoptr (JsonObject) data_obj = parse_object
      (json_object_get_string_member (result, "channel_data"));
  g_autofree char *expected = legba_auth_channel_sign (APP_KEY, APP_SECRET,
      "12.34", "presence-legba.r1",
      json_object_get_string_member (result, "channel_data"));

  g_assert_cmpstr (json_object_get_string_member (data_obj, "user_id"), ==,
      "bob@example.com-0123456789abcdef");
  g_assert_cmpstr (json_object_get_string_member (result, "auth"), ==,
      expected);
}

/* With TURN configured, the answer also carries the participant's TURN
 * credentials (docs/server.md); a refused request carries none. */
static void
test_auth_ice_servers (Fixture * f, gconstpointer data)
{
  static const char *const urls[] = { "turn:turn.example:3478",
    "turns:turn.example:5349?transport=tcp", NULL
  };
  const char *body = "socket_id=1.2&channel_name=presence-legba.standup"
      "&suffix=abc123";
  g_autofree char *token = token_for (APP_SECRET, "standup", "alice");
  g_autofree char *bearer = g_strconcat ("Bearer ", token, NULL);
  g_autoptr (JsonObject) plain = auth_call (f, bearer, body, 200);
  g_autoptr (JsonObject) result = NULL;
  g_autoptr (JsonObject) refused = NULL;
  JsonArray *servers, *list;
  JsonObject *server;

  g_assert_false (json_object_has_member (plain, "ice_servers"));

  legba_hub_set_turn (f->hub, urls, "turn-secret", 600);
  result = auth_call (f, bearer, body, 200);
  servers = json_object_get_array_member (result, "ice_servers");
  g_assert_cmpuint (json_array_get_length (servers), ==, 1);
  server = json_array_get_object_element (servers, 0);
  list = json_object_get_array_member (server, "urls");
  g_assert_cmpuint (json_array_get_length (list), ==, 2);
  g_assert_cmpstr (json_array_get_string_element (list, 0), ==, urls[0]);
  g_assert_cmpstr (json_array_get_string_element (list, 1), ==, urls[1]);
  /* Valid for 600 s from the request's clock (NOW), for the participant
   * id the answer admits. The credential was computed independently:
   * printf '%s' 1700000600:alice-abc123 |
   *   openssl dgst -sha1 -hmac turn-secret -binary | base64 */
  g_assert_cmpstr (json_object_get_string_member (server, "username"), ==,
      "1700000600:alice-abc123");
  g_assert_cmpstr (json_object_get_string_member (server, "credential"), ==,
      "dVfkAHB4UPS77qppfxYUccwHd7A=");

  refused = auth_call (f, "Bearer not.a.token", body, 401);
  g_assert_false (json_object_has_member (refused, "ice_servers"));
  legba_hub_set_turn (f->hub, NULL, NULL, 0);
}

/* The participant id "server" is reserved (docs/room-protocol.md §7): an
 * identity "server" still gets a suffix. */
static void
test_auth_reserved_id (Fixture * f, gconstpointer data)
{
  g_autofree char *token = token_for (APP_SECRET, "r", "server");
  g_autofree char *bearer = g_strconcat ("Bearer ", token, NULL);
  g_autoptr (JsonObject) result = auth_call (f, bearer,
      "socket_id=1.2&channel_name=presence-legba.r&suffix=aaaaaa", 200);
  g_autoptr (JsonObject) data_obj = parse_object
      (json_object_get_string_member (result, "channel_data"));

  g_assert_cmpstr (json_object_get_string_member (data_obj, "user_id"), ==,
      "server-aaaaaa");
}

static void
test_auth_refused (Fixture * f, gconstpointer data)
{
  const char *ok_body = "socket_id=1.2&channel_name=presence-legba.r"
      "&suffix=abcdef";
  g_autofree char *token = token_for (APP_SECRET, "r", "alice");
  g_autofree char *bearer = g_strconcat ("Bearer ", token, NULL);
  g_autofree char *other_app = token_for (OTHER_SECRET, "r", "alice");
  g_autofree char *other_bearer = g_strconcat ("Bearer ", other_app, NULL);
  g_autofree char *forged = g_strconcat (bearer, "x", NULL);
  g_autofree char *expired_token = NULL;
  g_autofree char *expired = NULL;
  g_autoptr (GError) error = NULL;
  struct
  {
    const char *authorization, *body;
    guint status;
  } cases[] = {
    {NULL, ok_body, 401},
    {"", ok_body, 401},
    {"Bearer", ok_body, 401},
    {"Bearer ", ok_body, 401},
    {"Basic YWxpY2U6cGFzcw==", ok_body, 401},
    {"Bearer not.a.token", ok_body, 401},
    {other_bearer, ok_body, 401},
    {forged, ok_body, 401},
    {bearer, "socket_id=1.2&channel_name=presence-legba.other&suffix=abcdef",
        403},
    {bearer, "socket_id=1.2&channel_name=presence-r&suffix=abcdef", 403},
    {bearer, "socket_id=1.2&channel_name=private-legba.r&suffix=abcdef", 403},
    {bearer, "socket_id=1.2&suffix=abcdef", 400},
    {bearer, "socket_id=1.2&channel_name=presence-legba.r", 400},
    {bearer, "socket_id=1.2&channel_name=presence-legba.r&suffix=abcde", 400},
    {bearer, "socket_id=1.2&channel_name=presence-legba.r&suffix=ABCDEF", 400},
    {bearer, "socket_id=1.2&channel_name=presence-legba.r&suffix=abc-def",
        400},
    {bearer, "socket_id=1.2&channel_name=presence-legba.r"
          "&suffix=abcdefabcdefabcde", 400},
    {bearer, "channel_name=presence-legba.r&suffix=abcdef", 400},
    {bearer, "socket_id=12&channel_name=presence-legba.r&suffix=abcdef", 400},
    {bearer, "socket_id=1.2.3&channel_name=presence-legba.r&suffix=abcdef",
        400},
    {bearer, "socket_id=.2&channel_name=presence-legba.r&suffix=abcdef", 400},
    {bearer, "socket_id=1.2&channel_name=presence-legba.r&suffix=%zz", 400},
    {bearer, "{\"socket_id\":1.2,\"channel_name\":\"presence-legba.r\","
          "\"suffix\":\"abcdef\"}", 400},
    {bearer, "{not json", 400},
    {bearer, NULL, 400},
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autoptr (JsonObject) result = auth_call (f, cases[i].authorization,
        cases[i].body, cases[i].status);
  }

  /* A token that expired a second ago (the request's clock is NOW). */
  {
    Call call = {.method = "POST",.path = "/apps/1/auth",.body = ok_body };
    LegbaHttpRequest request = { 0 };
    LegbaHttpResponse response = { 0 };
    gint64 now = g_get_real_time () / G_USEC_PER_SEC;

    expired_token = legba_join_token_new (APP_SECRET, "r", "alice", NULL, 10,
        &error);
    g_assert_no_error (error);
    expired = g_strconcat ("Bearer ", expired_token, NULL);
    request.method = call.method;
    request.path = call.path;
    request.body = call.body;
    request.body_len = strlen (call.body);
    request.authorization = expired;
    request.now_s = now + 11;
    legba_http_api_handle (f->hub, &request, &response);
    g_assert_cmpuint (response.status, ==, 401);
    legba_http_response_clear (&response);

    request.now_s = now;
    legba_http_api_handle (f->hub, &request, &response);
    g_assert_cmpuint (response.status, ==, 200);
    legba_http_response_clear (&response);
  }

  /* Only POST. */
  {
    Call call = {.method = "GET",.path = "/apps/1/auth",
      .authorization = bearer,.unsigned_request = TRUE
    };
    g_autoptr (JsonObject) result = api_call (f, &call, 405);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

#define ADD(path, func) \
  g_test_add ("/http-api/" path, Fixture, NULL, fixture_setup, func, \
      fixture_teardown)

  ADD ("route/unknown-app", test_unknown_app);
  ADD ("route/not-found", test_not_found);
  ADD ("route/method", test_method);
  ADD ("signature/missing", test_signature_missing);
  ADD ("signature/forged", test_signature_forged);
  ADD ("signature/stale", test_signature_stale);
  ADD ("signature/body-md5", test_signature_body_md5);
  ADD ("events/publish", test_events_publish);
  ADD ("events/exclude-socket", test_events_exclude_socket);
  ADD ("events/info", test_events_info);
  ADD ("events/bad-input", test_events_bad_input);
  ADD ("events/too-large", test_events_too_large);
  ADD ("events/server-to-user", test_events_server_to_user);
  ADD ("batch/publish", test_batch_publish);
  ADD ("batch/refused", test_batch_refused);
  ADD ("channels/list", test_channels_list);
  ADD ("channels/other-app", test_channels_other_app);
  ADD ("channels/one", test_channel_one);
  ADD ("channels/users", test_channel_users);
  ADD ("users/terminate", test_terminate);
  ADD ("auth/grants", test_auth_grants);
  ADD ("auth/json-body", test_auth_json_body);
  ADD ("auth/reserved-id", test_auth_reserved_id);
  ADD ("auth/ice-servers", test_auth_ice_servers);
  ADD ("auth/refused", test_auth_refused);

#undef ADD

  return g_test_run ();
}
