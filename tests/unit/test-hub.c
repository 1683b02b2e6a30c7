/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub, the Pusher protocol 7 state machine: connections, ping and
 * pong, subscriptions, bad input and closing, through the fake transport and
 * clock of hub-fixture.h.
 */
#include "hub-fixture.h"

/* ---- Limits, apps, connection establishment ---- */

static void
test_limits_defaults (void)
{
  LegbaLimits limits;

  memset (&limits, 0xff, sizeof limits);
  legba_limits_init_defaults (&limits);
  g_assert_cmpuint (limits.max_connections, ==, 0);
  g_assert_cmpuint (limits.max_event_bytes, ==, 10240);
  g_assert_cmpuint (limits.client_events_per_second, ==, 10);
  g_assert_cmpuint (limits.max_presence_members, ==, 100);
  g_assert_cmpuint (limits.max_channels_per_socket, ==, 100);
  g_assert_cmpuint (limits.max_user_info_bytes, ==, 1024);
  g_assert_cmpuint (limits.max_channel_name_length, ==, 164);
  g_assert_cmpuint (limits.max_frame_bytes, ==, 262144);
  g_assert_cmpuint (limits.max_queued_bytes, ==, 4 * 1024 * 1024);
  g_assert_cmpuint (limits.activity_timeout, ==, 120);
  g_assert_cmpuint (limits.pong_timeout, ==, 30);
  g_assert_cmpuint (limits.signin_timeout, ==, 0);
}

static void
test_app_add (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (GError) error = NULL;
  LegbaLimits limits = default_limits ();
  g_autoptr (JsonNode) data = NULL;
  LegbaHubApp *app;
  Client *a, *b;

  g_assert_true (f->app == legba_hub_find_app_by_key (f->hub, KEY));
  g_assert_cmpstr (legba_hub_app_get_id (f->app), ==, APP_ID);
  g_assert_cmpstr (legba_hub_app_get_key (f->app), ==, KEY);
  g_assert_cmpstr (legba_hub_app_get_secret (f->app), ==, SECRET);
  g_assert_null (legba_hub_find_app_by_id (f->hub, "2"));
  g_assert_null (legba_hub_find_app_by_key (f->hub, "other"));

  g_assert_false (legba_hub_add_app (f->hub, APP_ID, "k2", "s", &error));
  g_assert_error (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_EXISTS);
  g_clear_error (&error);
  g_assert_false (legba_hub_add_app (f->hub, "2", KEY, "s", &error));
  g_assert_error (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_EXISTS);
  g_clear_error (&error);
  g_assert_false (legba_hub_add_app (f->hub, "2", "k2", "", &error));
  g_assert_error (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_INVALID);
  g_clear_error (&error);

  /* Limits apply to apps added afterwards. */
  limits.activity_timeout = 7;
  legba_hub_set_limits (f->hub, &limits);
  g_assert_cmpuint (legba_hub_get_limits (f->hub)->activity_timeout, ==, 7);
  g_assert_true (legba_hub_add_app (f->hub, "2", "k2", "s2", &error));
  g_assert_no_error (error);
  app = legba_hub_find_app_by_key (f->hub, "k2");
  g_assert_nonnull (app);

  a = client_open (f);
  b = client_open_full (f, "k2", "7");
  data = client_expect (b, "pusher:connection_established", NULL);
  g_assert_cmpint (data_int (data, "activity_timeout"), ==, 7);
  g_assert_true (legba_hub_conn_get_app (b->conn) == app);
  g_assert_true (legba_hub_conn_get_app (a->conn) == f->app);
  g_assert_true (legba_hub_conn_get_handle (b->conn) == b);
  g_assert_cmpuint (legba_hub_app_get_connection_count (app), ==, 1);
  g_assert_cmpuint (legba_hub_app_get_connection_count (f->app), ==, 1);
}

static gboolean
socket_id_is_valid (const char *id)
{
  return g_regex_match_simple ("^[1-9][0-9]*\\.[1-9][0-9]*$", id, 0, 0);
}

/* Pusher protocol 7: connection_established data is a JSON string of
 * {socket_id, activity_timeout}, plus Legba's advertised limits. */
static void
test_open_established (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (GHashTable) ids = g_hash_table_new (g_str_hash, g_str_equal);
  Client *c = client_open_full (f, KEY, "7");
  g_autoptr (JsonNode) frame = client_pop (c, "pusher:connection_established",
      NULL);
  const char *text = legba_json_object_get_string (json_node_get_object
      (frame), "data");
  g_autoptr (JsonNode) data = NULL;
  JsonObject *limits;

  g_assert_nonnull (text);
  data = legba_json_parse_strict (text, strlen (text), NULL, NULL, NULL);
  g_assert_true (socket_id_is_valid (data_string (data, "socket_id")));
  g_assert_cmpint (data_int (data, "activity_timeout"), ==, 120);
  limits = json_object_get_object_member (json_node_get_object (data),
      "limits");
  g_assert_cmpint (json_object_get_int_member (limits, "client_event_bytes"),
      ==, 10240);
  g_assert_cmpint (json_object_get_int_member (limits,
          "client_events_per_second"), ==, 10);
  g_assert_false (json_object_has_member (json_node_get_object (frame),
          "channel"));
  g_assert_cmpuint (legba_hub_get_connection_count (f->hub), ==, 1);
  g_assert_null (legba_hub_conn_get_user_id (c->conn));

  for (guint i = 0; i < 200; i++) {
    Client *other = client_open (f);

    g_assert_true (socket_id_is_valid (other->socket_id));
    g_assert_true (g_hash_table_add (ids, other->socket_id));
  }
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->connections_total, ==,
      201);
}

typedef struct
{
  const char *key;
  const char *protocol;
  guint code;
} OpenRefusal;

static const OpenRefusal open_refusals[] = {
  {"unknown-key", "7", LEGBA_PUSHER_APP_NOT_FOUND},
  {NULL, "7", LEGBA_PUSHER_APP_NOT_FOUND},
  {KEY, NULL, LEGBA_PUSHER_NO_PROTOCOL},
  {KEY, "", LEGBA_PUSHER_INVALID_VERSION},
  {KEY, "seven", LEGBA_PUSHER_INVALID_VERSION},
  {KEY, "-7", LEGBA_PUSHER_INVALID_VERSION},
  {KEY, "7a", LEGBA_PUSHER_INVALID_VERSION},
  {KEY, "99999999999999999999", LEGBA_PUSHER_INVALID_VERSION},
  {KEY, "4", LEGBA_PUSHER_UNSUPPORTED_PROTOCOL},
  {KEY, "8", LEGBA_PUSHER_UNSUPPORTED_PROTOCOL},
};

/* A refused WebSocket gets pusher:error and a close with the same code. */
static void
test_open_refused (gconstpointer data)
{
  const OpenRefusal *refusal = data;
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open_full (f, refusal->key, refusal->protocol);

  g_assert_null (c->conn);
  client_expect_error (c, refusal->code);
  client_expect_nothing (c);
  client_expect_closed (c, refusal->code);
  g_assert_cmpuint (legba_hub_get_connection_count (f->hub), ==, 0);
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->errors[refusal->code -
          4000], ==, 1);
}

static void
test_open_protocol_versions (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);

  for (guint v = 5; v <= 7; v++) {
    g_autofree char *protocol = g_strdup_printf ("%u", v);
    Client *c = client_open_full (f, KEY, protocol);
    g_autoptr (JsonNode) data = NULL;

    g_assert_nonnull (c->conn);
    data = client_expect (c, "pusher:connection_established", NULL);
  }
}

static void
test_open_over_quota (void)
{
  LegbaLimits limits = default_limits ();
  g_autoptr (Fixture) f = NULL;
  Client *a, *c;

  limits.max_connections = 2;
  f = fixture_new (&limits);
  a = client_open (f);
  client_open (f);
  c = client_open_full (f, KEY, "7");
  g_assert_null (c->conn);
  client_expect_error (c, LEGBA_PUSHER_OVER_CONNECTION_QUOTA);
  client_expect_closed (c, LEGBA_PUSHER_OVER_CONNECTION_QUOTA);

  client_report_closed (a);
  g_assert_cmpuint (legba_hub_app_get_connection_count (f->app), ==, 1);
  client_open (f);
}

/* ---- Ping, pong, activity ---- */

static void
test_ping_client (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  g_autoptr (JsonNode) frame = NULL;

  client_send (c, "{\"event\":\"pusher:ping\",\"data\":{}}");
  frame = client_pop (c, "pusher:pong", NULL);
  g_assert_cmpstr (legba_json_object_get_string (json_node_get_object (frame),
          "data"), ==, "{}");
  client_send (c, "{\"event\":\"pusher:ping\"}");
  g_clear_pointer (&frame, json_node_unref);
  frame = client_pop (c, "pusher:pong", NULL);
  client_expect_nothing (c);
}

static void
test_ping_server (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  g_autoptr (JsonNode) data = NULL;

  f->now += 119 * G_USEC_PER_SEC;
  legba_hub_tick (f->hub);
  client_expect_nothing (c);

  f->now += G_USEC_PER_SEC;
  legba_hub_tick (f->hub);
  data = client_expect (c, "pusher:ping", NULL);
  f->now += 10 * G_USEC_PER_SEC;
  legba_hub_tick (f->hub);
  client_expect_nothing (c);

  /* The pong clears the pending ping: the next comes after a new idle
   * activity_timeout. */
  client_send (c, "{\"event\":\"pusher:pong\",\"data\":{}}");
  client_expect_nothing (c);
  f->now += 119 * G_USEC_PER_SEC;
  legba_hub_tick (f->hub);
  client_expect_nothing (c);
  g_assert_false (c->close_requested);
  f->now += G_USEC_PER_SEC;
  legba_hub_tick (f->hub);
  g_clear_pointer (&data, json_node_unref);
  data = client_expect (c, "pusher:ping", NULL);
}

static void
test_ping_pong_timeout (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *idle = client_open (f);
  Client *busy = client_open (f);
  g_autoptr (JsonNode) ping = NULL;

  f->now += 120 * G_USEC_PER_SEC;
  client_send (busy, "{\"event\":\"pusher:ping\"}");
  legba_hub_tick (f->hub);
  ping = client_expect (idle, "pusher:ping", NULL);

  f->now += 29 * G_USEC_PER_SEC;
  legba_hub_tick (f->hub);
  g_assert_false (idle->close_requested);
  f->now += G_USEC_PER_SEC;
  legba_hub_tick (f->hub);
  client_expect_closed (idle, LEGBA_PUSHER_PONG_NOT_RECEIVED);
  client_expect_nothing (idle);
  g_assert_false (busy->close_requested);
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->errors[201], ==, 1);

  /* Frames that arrive after the close are ignored. */
  client_send (idle, "{\"event\":\"pusher:ping\"}");
  client_expect_nothing (idle);
}

/* Any frame counts as activity, even one the hub refuses. */
static void
test_ping_any_frame_is_activity (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  g_autoptr (JsonNode) ping = NULL;

  f->now += 120 * G_USEC_PER_SEC;
  legba_hub_tick (f->hub);
  ping = client_expect (c, "pusher:ping", NULL);
  client_send (c, "not json");
  client_expect_error (c, LEGBA_PUSHER_GENERIC);
  f->now += 30 * G_USEC_PER_SEC;
  legba_hub_tick (f->hub);
  g_assert_false (c->close_requested);
  client_expect_nothing (c);

  f->now += 90 * G_USEC_PER_SEC;
  legba_hub_receive_binary (f->hub, c->conn);
  client_expect_error (c, LEGBA_PUSHER_GENERIC);
  f->now += 60 * G_USEC_PER_SEC;
  legba_hub_tick (f->hub);
  client_expect_nothing (c);
}

/* ---- Subscriptions ---- */

static void
test_subscribe_public (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  g_autoptr (JsonNode) frame = NULL;
  LegbaHubChannelInfo info;

  client_send_subscribe (c, "room");
  frame = client_pop (c, "pusher_internal:subscription_succeeded", "room");
  g_assert_cmpstr (legba_json_object_get_string (json_node_get_object (frame),
          "data"), ==, "{}");
  client_expect_nothing (c);
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 1);
  g_assert_true (legba_hub_get_channel (f->hub, f->app, "room", &info));
  g_assert_cmpuint (info.subscription_count, ==, 1);
  g_assert_cmpuint (info.user_count, ==, 0);
}

/* Pusher clients differ: data as an object or as a string holding one. */
static void
test_subscribe_data_string (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  g_autoptr (JsonNode) data = NULL;

  client_send (c, "{\"event\":\"pusher:subscribe\","
      "\"data\":\"{\\\"channel\\\":\\\"room\\\"}\"}");
  data = client_expect (c, "pusher_internal:subscription_succeeded", "room");
}

static void
test_subscribe_twice (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);

  client_subscribe (c, "room");
  client_subscribe (c, "room");
  client_subscribe_private (c, "private-room");
  client_subscribe_private (c, "private-room");
  client_expect_nothing (c);
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 2);
  client_send (c, "{\"event\":\"pusher:unsubscribe\","
      "\"data\":{\"channel\":\"room\"}}");
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 1);
}

static void
test_subscribe_private (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);

  client_subscribe_private (c, "private-room");
  client_subscribe_private (c, "private-encrypted-room");
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 2);
}

static void
test_subscribe_private_refused (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  Client *other = client_open (f);
  g_autofree char *other_auth = legba_auth_channel_sign (KEY, SECRET,
      other->socket_id, "private-room", NULL);
  g_autofree char *wrong_secret = legba_auth_channel_sign (KEY, "nope",
      c->socket_id, "private-room", NULL);
  g_autofree char *wrong_channel = legba_auth_channel_sign (KEY, SECRET,
      c->socket_id, "private-other", NULL);
  const char *auths[] = { other_auth, wrong_secret, wrong_channel, "",
    "app-key:", "garbage"
  };

  for (guint i = 0; i < G_N_ELEMENTS (auths); i++) {
    g_autofree char *frame = build_frame ("pusher:subscribe", "channel",
        "private-room", "auth", auths[i], NULL);

    client_send (c, frame);
    client_expect_refused (c, "private-room", "AuthError", 401);
  }
  client_send_subscribe (c, "private-room");
  client_expect_refused (c, "private-room", "AuthError", 401);
  client_send_subscribe (c, "private-encrypted-room");
  client_expect_refused (c, "private-encrypted-room", "AuthError", 401);
  client_send (c, "{\"event\":\"pusher:subscribe\",\"data\":"
      "{\"channel\":\"private-room\",\"auth\":42}}");
  client_expect_refused (c, "private-room", "AuthError", 401);

  /* A refused channel gets nothing. */
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 0);
  g_assert_true (publish (f, "private-room", "ev", "{}", NULL, NULL));
  client_expect_nothing (c);
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->subscription_errors, ==,
      G_N_ELEMENTS (auths) + 3);
  g_assert_false (c->close_requested);
}

static void
test_subscribe_bad_name (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  g_autofree char *longest = g_strnfill (164, 'a');
  g_autofree char *too_long = g_strnfill (165, 'a');
  const char *bad[] = { "", "a b", "a#b", "caf\xc3\xa9", "a/b", "a:b",
    too_long
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    client_send_subscribe (c, bad[i]);
    client_expect_refused (c, bad[i], "InvalidChannel", 400);
    g_assert_false (legba_hub_channel_name_is_valid (f->hub, bad[i]));
  }
  client_subscribe (c, longest);
  client_subscribe (c, "A-Za-z0-9_-=@,.;");
  g_assert_true (legba_hub_channel_name_is_valid (f->hub, longest));
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 2);
}

/* "#server-to-user-ID" is the channel of the connections signed in as ID:
 * pusher-js subscribes to it after pusher:signin and is answered, anyone
 * else is refused; either way it holds no subscription. */
static void
test_subscribe_server_to_user (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  Client *anonymous = client_open (f);
  Client *alice = client_open (f);
  g_autoptr (JsonNode) data = NULL;

  client_send_subscribe (c, "#server-to-user-bob");
  client_expect_refused (c, "#server-to-user-bob", "InvalidChannel", 403);
  client_signin (c, "bob");
  client_send_subscribe (c, "#server-to-user-bob");
  data = client_expect (c, "pusher_internal:subscription_succeeded",
      "#server-to-user-bob");
  g_assert_true (JSON_NODE_HOLDS_OBJECT (data));
  g_assert_cmpuint (json_object_get_size (json_node_get_object (data)), ==, 0);
  client_send_subscribe (c, "#server-to-user-bo");
  client_expect_refused (c, "#server-to-user-bo", "InvalidChannel", 403);
  client_send_subscribe (c, "#server-to-user-bobby");
  client_expect_refused (c, "#server-to-user-bobby", "InvalidChannel", 403);

  client_send_subscribe (anonymous, "#server-to-user-bob");
  client_expect_refused (anonymous, "#server-to-user-bob", "InvalidChannel",
      403);
  client_signin (alice, "alice");
  client_send_subscribe (alice, "#server-to-user-bob");
  client_expect_refused (alice, "#server-to-user-bob", "InvalidChannel", 403);

  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 0);
  g_assert_cmpuint (legba_hub_send_to_user (f->hub, f->app, "bob", "ev",
          "{}"), ==, 1);
  json_node_unref (client_expect (c, "ev", "#server-to-user-bob"));
  client_expect_nothing (anonymous);
  client_expect_nothing (alice);
  client_expect_nothing (c);
}

static const char *const subscribe_bad_frames[] = {
  "{\"event\":\"pusher:subscribe\"}",
  "{\"event\":\"pusher:subscribe\",\"data\":null}",
  "{\"event\":\"pusher:subscribe\",\"data\":42}",
  "{\"event\":\"pusher:subscribe\",\"data\":[\"room\"]}",
  "{\"event\":\"pusher:subscribe\",\"data\":\"room\"}",
  "{\"event\":\"pusher:subscribe\",\"data\":\"[1]\"}",
  "{\"event\":\"pusher:subscribe\",\"data\":{}}",
  "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":5}}",
  "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":null}}",
  "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":[\"room\"]}}",
  "{\"event\":\"pusher:unsubscribe\"}",
  "{\"event\":\"pusher:unsubscribe\",\"data\":{\"channel\":true}}",
};

/* Without usable data there is no channel to answer on: pusher:error. */
static void
test_subscribe_bad_data (gconstpointer data)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  Client *other = client_open (f);

  client_subscribe (other, "room");
  client_send (c, data);
  client_expect_error (c, LEGBA_PUSHER_GENERIC);
  client_expect_nothing (c);
  client_expect_nothing (other);
  g_assert_false (c->close_requested);
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 1);
  client_subscribe (c, "room");
}

static void
test_unsubscribe (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  LegbaHubChannelInfo info;

  client_subscribe (c, "room");
  client_subscribe (c, "hall");
  client_send (c, "{\"event\":\"pusher:unsubscribe\","
      "\"data\":{\"channel\":\"room\"}}");
  client_send (c, "{\"event\":\"pusher:unsubscribe\","
      "\"data\":\"{\\\"channel\\\":\\\"hall\\\"}\"}");
  client_send (c, "{\"event\":\"pusher:unsubscribe\","
      "\"data\":{\"channel\":\"never-joined\"}}");
  client_expect_nothing (c);
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 0);
  g_assert_false (legba_hub_get_channel (f->hub, f->app, "room", &info));
  g_assert_cmpstr (info.name, ==, "room");
  g_assert_cmpuint (info.subscription_count, ==, 0);
  g_assert_true (publish (f, "room", "ev", "{}", NULL, NULL));
  client_expect_nothing (c);
}

/* A socket on several channels: each one reaches it, the one it left does
 * not, joining again changes nothing, and closing it leaves every channel
 * it was on. */
static void
test_subscribe_many (void)
{
  static const char *const names[] = { "c0", "c1", "c2", "c3", "c4" };
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  LegbaHubChannelInfo info;

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    client_subscribe (c, names[i]);
  client_send (c, "{\"event\":\"pusher:unsubscribe\","
      "\"data\":{\"channel\":\"c0\"}}");
  client_subscribe (c, "c5");
  client_subscribe (c, "c3");
  client_subscribe (c, "c5");
  client_expect_nothing (c);
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 5);
  g_assert_false (legba_hub_get_channel (f->hub, f->app, "c0", &info));
  g_assert_true (publish (f, "c0", "ev", "{}", NULL, NULL));
  client_expect_nothing (c);
  for (guint i = 1; i <= 5; i++) {
    g_autofree char *name = g_strdup_printf ("c%u", i);
    g_autoptr (JsonNode) frame = NULL;

    g_assert_true (legba_hub_get_channel (f->hub, f->app, name, &info));
    g_assert_cmpuint (info.subscription_count, ==, 1);
    g_assert_true (publish (f, name, "ev", "{}", NULL, NULL));
    frame = client_pop (c, "ev", name);
    client_expect_nothing (c);
  }

  client_report_closed (c);
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 0);
  for (guint i = 1; i <= 5; i++) {
    g_autofree char *name = g_strdup_printf ("c%u", i);

    g_assert_false (legba_hub_get_channel (f->hub, f->app, name, &info));
  }
}

/* max_channels_per_socket bounds the channels of one socket, whatever
 * their kind; the next subscription is refused as a full presence channel
 * refuses a member, and the socket, its channels and others are kept. */
static void
test_subscribe_channel_limit (void)
{
  LegbaLimits limits = default_limits ();
  g_autoptr (Fixture) f = NULL;
  const LegbaHubCounters *counters;
  g_autoptr (JsonNode) frame = NULL;
  Client *c, *other;

  limits.max_channels_per_socket = 3;
  f = fixture_new (&limits);
  counters = legba_hub_get_counters (f->hub);
  c = client_open (f);
  other = client_open (f);
  client_subscribe (c, "c0");
  client_subscribe_private (c, "private-c1");
  client_join (c, "presence-c2", "alice");

  client_send_subscribe (c, "c3");
  client_expect_refused (c, "c3", "LimitReached", 403);
  client_send_presence (c, "presence-c3", "{\"user_id\":\"alice\"}");
  client_expect_refused (c, "presence-c3", "LimitReached", 403);
  g_assert_cmpuint (counters->channel_limit_refusals, ==, 2);
  g_assert_cmpuint (counters->subscription_errors, ==, 2);
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 3);
  g_assert_false (c->close_requested);

  /* Subscribing again to a channel it is in takes no more room. */
  client_subscribe (c, "c0");
  /* A refused channel gets nothing; the others still work. */
  g_assert_true (publish (f, "c3", "ev", "{}", NULL, NULL));
  client_expect_nothing (c);
  g_assert_true (publish (f, "private-c1", "ev", "{}", NULL, NULL));
  frame = client_pop (c, "ev", "private-c1");

  /* Another socket has a bound of its own. */
  for (guint i = 0; i < 3; i++) {
    g_autofree char *name = g_strdup_printf ("c%u", i + 1);

    client_subscribe (other, name);
  }

  /* Leaving a channel makes room for one more. */
  client_send (c, "{\"event\":\"pusher:unsubscribe\","
      "\"data\":{\"channel\":\"c0\"}}");
  client_subscribe (c, "c3");
  client_send_subscribe (c, "c4");
  client_expect_refused (c, "c4", "LimitReached", 403);
  g_assert_cmpuint (counters->channel_limit_refusals, ==, 3);
  client_expect_nothing (other);
}

/* By default a socket is in 100 channels at most; 0 lifts the bound. */
static void
test_subscribe_channel_limit_default (void)
{
  LegbaLimits limits = default_limits ();
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (Fixture) unbounded = NULL;
  Client *c = client_open (f);
  Client *u;

  for (guint i = 0; i < 100; i++) {
    g_autofree char *name = g_strdup_printf ("c%u", i);

    client_subscribe (c, name);
  }
  client_send_subscribe (c, "c100");
  client_expect_refused (c, "c100", "LimitReached", 403);

  limits.max_channels_per_socket = 0;
  unbounded = fixture_new (&limits);
  u = client_open (unbounded);
  for (guint i = 0; i < 150; i++) {
    g_autofree char *name = g_strdup_printf ("c%u", i);

    client_subscribe (u, name);
  }
  g_assert_cmpuint (legba_hub_get_subscription_count (unbounded->hub), ==, 150);
}

/* ---- Bad input: a clear pusher:error, no close, no effect on others ---- */

typedef struct
{
  const char *text;
  gssize len;                   /* -1: strlen */
  guint code;
} BadFrame;

static const BadFrame bad_frames[] = {
  {"not json", -1, LEGBA_PUSHER_GENERIC},
  {"", -1, LEGBA_PUSHER_GENERIC},
  {"{\"event\":\"pusher:ping\"", -1, LEGBA_PUSHER_GENERIC},
  {"{\"event\":\"pusher:ping\"} {}", -1, LEGBA_PUSHER_GENERIC},
  {"{'event':'pusher:ping'}", -1, LEGBA_PUSHER_GENERIC},
  {"/* c */ {\"event\":\"pusher:ping\"}", -1, LEGBA_PUSHER_GENERIC},
  {"{\"event\":\"pusher:ping\",\"data\":0x10}", -1, LEGBA_PUSHER_GENERIC},
  {"{\"event\":\"pusher:ping\",}", -1, LEGBA_PUSHER_GENERIC},
  {"[1]", -1, LEGBA_PUSHER_GENERIC},
  {"\"pusher:ping\"", -1, LEGBA_PUSHER_GENERIC},
  {"42", -1, LEGBA_PUSHER_GENERIC},
  {"null", -1, LEGBA_PUSHER_GENERIC},
  {"{}", -1, LEGBA_PUSHER_GENERIC},
  {"{\"event\":5}", -1, LEGBA_PUSHER_GENERIC},
  {"{\"event\":null}", -1, LEGBA_PUSHER_GENERIC},
  {"{\"event\":[\"pusher:ping\"]}", -1, LEGBA_PUSHER_GENERIC},
  {"{\"event\":\"pusher:unknown\"}", -1, LEGBA_PUSHER_GENERIC},
  {"{\"event\":\"pusher_internal:member_added\"}", -1, LEGBA_PUSHER_GENERIC},
  {"{\"event\":\"hello\"}", -1, LEGBA_PUSHER_GENERIC},
  {"{\"event\":\"pusher:ping\",\"x\":\"\xff\xfe\"}", -1, LEGBA_PUSHER_GENERIC},
  {"{\"event\":\"pusher:ping\"}\0", 24, LEGBA_PUSHER_GENERIC},
  {"{\"event\":\"pusher:p\\u0000ing\"}", -1, LEGBA_PUSHER_GENERIC},
  {"{\"event\":\"client-\\ud800\"}", -1, LEGBA_PUSHER_GENERIC},
  {"{\"event\":\"pusher:ping\",\"data\":\"\x01\"}", -1, LEGBA_PUSHER_GENERIC},
};

static void
check_bad_frame (const char *text, gsize len, guint code)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  Client *other = client_open (f);
  g_autoptr (JsonNode) pong = NULL;

  client_subscribe (c, "room");
  client_subscribe (other, "room");
  legba_hub_receive (f->hub, c->conn, text, len);
  client_expect_error (c, code);
  client_expect_nothing (c);
  client_expect_nothing (other);
  g_assert_false (c->close_requested);
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 2);
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->errors[code - 4000], ==,
      1);

  /* The connection still works. */
  client_send (c, "{\"event\":\"pusher:ping\"}");
  pong = client_pop (c, "pusher:pong", NULL);
}

static void
test_bad_frame (gconstpointer data)
{
  const BadFrame *bad = data;

  check_bad_frame (bad->text, bad->len < 0 ? strlen (bad->text) :
      (gsize) bad->len, bad->code);
}

static void
test_bad_frame_oversize (void)
{
  g_autofree char *padding = g_strnfill (262144, ' ');
  g_autofree char *text = g_strconcat ("{\"event\":\"pusher:ping\"}",
      padding, NULL);

  check_bad_frame (text, strlen (text), LEGBA_PUSHER_OVER_LIMIT);
}

/* json-glib alone would recurse until the stack overflows. */
static void
test_bad_frame_deep_nesting (void)
{
  g_autofree char *open = g_strnfill (200000, '[');
  g_autofree char *text = g_strconcat ("{\"event\":\"client-x\","
      "\"data\":", open, NULL);

  check_bad_frame (text, strlen (text), LEGBA_PUSHER_GENERIC);
}

/* {"event":"pusher:ping","data":[[...]]} nested depth levels in all. */
static char *
nested_ping (guint depth)
{
  g_autofree char *open = g_strnfill (depth - 1, '[');
  g_autofree char *close = g_strnfill (depth - 1, ']');

  return g_strconcat ("{\"event\":\"pusher:ping\",\"data\":", open, close,
      "}", NULL);
}

static void
test_bad_frame_depth_bound (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  g_autofree char *deepest = nested_ping (LEGBA_JSON_MAX_DEPTH);
  g_autofree char *too_deep = nested_ping (LEGBA_JSON_MAX_DEPTH + 1);
  g_autoptr (JsonNode) pong = NULL;

  client_send (c, deepest);
  pong = client_pop (c, "pusher:pong", NULL);
  client_send (c, too_deep);
  client_expect_error (c, LEGBA_PUSHER_GENERIC);
}

static void
test_bad_frame_binary (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  Client *other = client_open (f);

  client_subscribe (other, "room");
  legba_hub_receive_binary (f->hub, c->conn);
  client_expect_error (c, LEGBA_PUSHER_GENERIC);
  client_expect_nothing (other);
  g_assert_false (c->close_requested);
}

/* ---- Closing ---- */

static void
test_close_all (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *clients[3];

  for (guint i = 0; i < G_N_ELEMENTS (clients); i++) {
    clients[i] = client_open (f);
    client_subscribe (clients[i], "room");
  }
  legba_hub_close_all (f->hub, LEGBA_PUSHER_RECONNECT, "Server shutting down");
  for (guint i = 0; i < G_N_ELEMENTS (clients); i++) {
    client_expect_closed (clients[i], LEGBA_PUSHER_RECONNECT);
    client_expect_nothing (clients[i]);
  }
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->errors[200], ==, 0);
  g_assert_true (publish (f, "room", "ev", "{}", NULL, NULL));
  for (guint i = 0; i < G_N_ELEMENTS (clients); i++)
    client_expect_nothing (clients[i]);
}

/* A transport may report a connection closed from inside its close
 * callback: the hub finishes its pass over the connections first. */
static void
test_close_reported_at_once (void)
{
  LegbaLimits limits = default_limits ();
  g_autoptr (Fixture) f = NULL;
  Client *clients[4];
  Client *late;
  g_autofree char *users = NULL;

  limits.signin_timeout = 200;
  f = fixture_new (&limits);
  f->close_now = TRUE;
  for (guint i = 0; i < G_N_ELEMENTS (clients); i++) {
    g_autofree char *name = g_strdup_printf ("user%u", i);

    clients[i] = client_open (f);
    client_join (clients[i], "presence-room", name);
    client_signin (clients[i], name);
    client_drop_frames (clients[i]);
  }

  /* Three go silent and time out in one tick; the fourth stays. */
  f->now += 120 * G_USEC_PER_SEC;
  client_send (clients[3], "{\"event\":\"pusher:ping\"}");
  legba_hub_tick (f->hub);
  f->now += 30 * G_USEC_PER_SEC;
  client_send (clients[3], "{\"event\":\"pusher:ping\"}");
  legba_hub_tick (f->hub);
  for (guint i = 0; i < 3; i++) {
    client_expect_closed (clients[i], LEGBA_PUSHER_PONG_NOT_RECEIVED);
    g_assert_null (clients[i]->conn);
  }
  g_assert_cmpuint (legba_hub_get_connection_count (f->hub), ==, 1);
  users = users_joined (f, "presence-room");
  g_assert_cmpstr (users, ==, "user3");

  /* A failed sign-in closes from inside the frame's handling. */
  late = client_open (f);
  client_send (late, "{\"event\":\"pusher:signin\",\"data\":{}}");
  client_expect_error (late, LEGBA_PUSHER_UNAUTHORIZED);
  g_assert_null (late->conn);
  g_assert_cmpuint (legba_hub_terminate_user (f->hub, f->app, "user3"), ==, 1);
  g_assert_cmpuint (legba_hub_get_connection_count (f->hub), ==, 0);
}

/* A transport may also report a close from inside send (a socket whose
 * queue overflowed): the fan-out goes on to the other recipients. */
static void
test_close_reported_in_send (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *clients[5];
  g_autofree char *users = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (clients); i++) {
    g_autofree char *name = g_strdup_printf ("user%u", i);

    clients[i] = client_open (f);
    client_join (clients[i], "presence-room", name);
  }
  for (guint i = 0; i < G_N_ELEMENTS (clients); i++)
    client_drop_frames (clients[i]);
  clients[0]->close_on_send = TRUE;
  clients[2]->close_on_send = TRUE;

  g_assert_true (publish (f, "presence-room", "ev", "{}", NULL, NULL));
  for (guint i = 0; i < G_N_ELEMENTS (clients); i++)
    client_skip (clients[i], "ev", "presence-room");
  /* The survivors hear both departures. */
  for (guint i = 0; i < G_N_ELEMENTS (clients); i++) {
    if (i == 0 || i == 2) {
      g_assert_null (clients[i]->conn);
      client_expect_nothing (clients[i]);
      continue;
    }
    for (guint n = 0; n < 2; n++)
      client_skip (clients[i], "pusher_internal:member_removed",
          "presence-room");
    client_expect_nothing (clients[i]);
  }
  users = users_joined (f, "presence-room");
  g_assert_cmpstr (users, ==, "user1,user3,user4");
}

/* Freeing the hub with connections left (a server shut down without a
 * clean close) frees everything. */
static void
test_close_free_with_connections (void)
{
  g_autoptr (GPtrArray) clients = g_ptr_array_new_with_free_func
      ((GDestroyNotify) client_free);
  Fixture f = { NULL, NULL, 0, clients, FALSE };

  f.hub = legba_hub_new (&fake_transport, &f);
  g_assert_true (legba_hub_add_app (f.hub, APP_ID, KEY, SECRET, NULL));
  f.app = legba_hub_find_app_by_id (f.hub, APP_ID);
  for (guint i = 0; i < 3; i++) {
    g_autofree char *name = g_strdup_printf ("user%u", i);
    Client *c = client_open (&f);

    client_join (c, "presence-room", name);
    client_subscribe (c, "room");
    client_signin (c, name);
  }
  legba_hub_free (f.hub);
}

static void
test_counters (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  const LegbaHubCounters *counters = legba_hub_get_counters (f->hub);
  Client *a = client_open (f);
  Client *b = client_open (f);
  const char *ping = "{\"event\":\"pusher:ping\"}";
  guint64 in = counters->messages_in, bytes_in = counters->bytes_in;
  guint64 out = counters->messages_out, bytes_out = counters->bytes_out;
  g_autoptr (JsonNode) pong = NULL;

  g_assert_cmpuint (counters->connections_total, ==, 2);
  g_assert_cmpuint (counters->messages_out, ==, 2);
  client_send (a, ping);
  pong = client_pop (a, "pusher:pong", NULL);
  g_assert_cmpuint (counters->messages_in, ==, in + 1);
  g_assert_cmpuint (counters->bytes_in, ==, bytes_in + strlen (ping));
  g_assert_cmpuint (counters->messages_out, ==, out + 1);
  g_assert_cmpuint (counters->bytes_out, ==, bytes_out +
      g_bytes_get_size (a->bytes->pdata[a->bytes->len - 1]));

  client_send (b, "nope");
  client_expect_error (b, LEGBA_PUSHER_GENERIC);
  legba_hub_receive_binary (f->hub, b->conn);
  client_expect_error (b, LEGBA_PUSHER_GENERIC);
  g_assert_cmpuint (counters->errors[300], ==, 2);
  g_assert_cmpuint (counters->messages_in, ==, in + 3);

  client_subscribe (a, "room");
  client_subscribe (b, "room");
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 2);
  client_report_closed (a);
  g_assert_cmpuint (legba_hub_get_connection_count (f->hub), ==, 1);
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 1);
  g_assert_cmpuint (counters->connections_total, ==, 2);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/hub/limits/defaults", test_limits_defaults);
  g_test_add_func ("/hub/app/add", test_app_add);
  g_test_add_func ("/hub/open/established", test_open_established);
  ADD_TABLE ("/hub/open/refused", open_refusals, test_open_refused);
  g_test_add_func ("/hub/open/protocol-versions", test_open_protocol_versions);
  g_test_add_func ("/hub/open/over-quota", test_open_over_quota);
  g_test_add_func ("/hub/ping/client", test_ping_client);
  g_test_add_func ("/hub/ping/server", test_ping_server);
  g_test_add_func ("/hub/ping/pong-timeout", test_ping_pong_timeout);
  g_test_add_func ("/hub/ping/any-frame-is-activity",
      test_ping_any_frame_is_activity);
  g_test_add_func ("/hub/subscribe/public", test_subscribe_public);
  g_test_add_func ("/hub/subscribe/data-string", test_subscribe_data_string);
  g_test_add_func ("/hub/subscribe/twice", test_subscribe_twice);
  g_test_add_func ("/hub/subscribe/private", test_subscribe_private);
  g_test_add_func ("/hub/subscribe/private-refused",
      test_subscribe_private_refused);
  g_test_add_func ("/hub/subscribe/bad-name", test_subscribe_bad_name);
  g_test_add_func ("/hub/subscribe/server-to-user",
      test_subscribe_server_to_user);
  ADD_TABLE ("/hub/subscribe/bad-data", subscribe_bad_frames,
      test_subscribe_bad_data);
  g_test_add_func ("/hub/unsubscribe/basic", test_unsubscribe);
  g_test_add_func ("/hub/subscribe/many", test_subscribe_many);
  g_test_add_func ("/hub/subscribe/channel-limit",
      test_subscribe_channel_limit);
  g_test_add_func ("/hub/subscribe/channel-limit-default",
      test_subscribe_channel_limit_default);
  ADD_TABLE ("/hub/bad-frame/table", bad_frames, test_bad_frame);
  g_test_add_func ("/hub/bad-frame/oversize", test_bad_frame_oversize);
  g_test_add_func ("/hub/bad-frame/deep-nesting", test_bad_frame_deep_nesting);
  g_test_add_func ("/hub/bad-frame/depth-bound", test_bad_frame_depth_bound);
  g_test_add_func ("/hub/bad-frame/binary", test_bad_frame_binary);
  g_test_add_func ("/hub/close/all", test_close_all);
  g_test_add_func ("/hub/close/reported-at-once", test_close_reported_at_once);
  g_test_add_func ("/hub/close/reported-in-send", test_close_reported_in_send);
  g_test_add_func ("/hub/close/free-with-connections",
      test_close_free_with_connections);
  g_test_add_func ("/hub/counters", test_counters);

  return g_test_run ();
}
