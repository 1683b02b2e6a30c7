/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub, the Pusher protocol 7 state machine: presence, client events,
 * user sign-in and the server-side operations, through the fake transport
 * and clock of hub-fixture.h.
 */
#include "hub-fixture.h"

/* ---- Presence ---- */

static void
test_presence_subscribe (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  g_autoptr (JsonNode) presence = client_join_presence (c, "presence-room",
      "alice");
  g_autofree char *ids = presence_ids (presence);
  JsonObject *hash = json_object_get_object_member (json_node_get_object
      (presence), "hash");
  JsonObject *info = json_object_get_object_member (hash, "alice");

  g_assert_cmpstr (ids, ==, "alice");
  g_assert_cmpstr (json_object_get_string_member (info, "name"), ==, "alice");
  client_expect_nothing (c);
}

static void
test_presence_member_added (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *alice = client_open (f);
  Client *bob = client_open (f);
  g_autoptr (JsonNode) presence = NULL;
  g_autoptr (JsonNode) added = NULL;
  g_autofree char *ids = NULL;
  JsonObject *info;

  client_join (alice, "presence-room", "alice");
  presence = client_join_presence (bob, "presence-room", "bob");
  ids = presence_ids (presence);
  g_assert_cmpstr (ids, ==, "alice,bob");
  added = client_expect (alice, "pusher_internal:member_added",
      "presence-room");
  g_assert_cmpstr (data_string (added, "user_id"), ==, "bob");
  info = json_object_get_object_member (json_node_get_object (added),
      "user_info");
  g_assert_cmpstr (json_object_get_string_member (info, "name"), ==, "bob");
  client_expect_nothing (alice);
  client_expect_nothing (bob);

  /* Subscribing again announces nobody again. */
  client_join (bob, "presence-room", "bob");
  client_expect_nothing (alice);
}

static void
test_presence_member_removed (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *alice = client_open (f);
  Client *bob = client_open (f);
  Client *carol = client_open (f);
  g_autoptr (JsonNode) removed = NULL;
  g_autofree char *users = NULL;

  client_join (alice, "presence-room", "alice");
  client_join (bob, "presence-room", "bob");
  client_join (carol, "presence-room", "carol");
  client_drop_frames (alice);
  client_drop_frames (bob);

  client_send (bob, "{\"event\":\"pusher:unsubscribe\","
      "\"data\":{\"channel\":\"presence-room\"}}");
  client_expect_nothing (bob);
  removed = client_expect (alice, "pusher_internal:member_removed",
      "presence-room");
  g_assert_cmpstr (data_string (removed, "user_id"), ==, "bob");
  g_assert_false (json_object_has_member (json_node_get_object (removed),
          "user_info"));
  g_clear_pointer (&removed, json_node_unref);
  removed = client_expect (carol, "pusher_internal:member_removed",
      "presence-room");

  client_report_closed (carol);
  g_clear_pointer (&removed, json_node_unref);
  removed = client_expect (alice, "pusher_internal:member_removed",
      "presence-room");
  g_assert_cmpstr (data_string (removed, "user_id"), ==, "carol");
  client_expect_nothing (alice);
  users = users_joined (f, "presence-room");
  g_assert_cmpstr (users, ==, "alice");
}

/* A user on two sockets counts once, joins once and leaves once. */
static void
test_presence_two_sockets (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *a1 = client_open (f);
  Client *a2 = client_open (f);
  Client *bob = client_open (f);
  g_autoptr (JsonNode) presence = NULL;
  g_autoptr (JsonNode) event = NULL;
  g_autofree char *ids = NULL;
  g_autofree char *users = NULL;
  LegbaHubChannelInfo info;

  client_join (a1, "presence-room", "alice");
  client_join (bob, "presence-room", "bob");
  client_skip (a1, "pusher_internal:member_added", "presence-room");
  presence = client_join_presence (a2, "presence-room", "alice");
  ids = presence_ids (presence);
  g_assert_cmpstr (ids, ==, "alice,bob");
  client_expect_nothing (a1);
  client_expect_nothing (bob);
  g_assert_true (legba_hub_get_channel (f->hub, f->app, "presence-room",
          &info));
  g_assert_cmpuint (info.subscription_count, ==, 3);
  g_assert_cmpuint (info.user_count, ==, 2);

  client_send (a1, "{\"event\":\"pusher:unsubscribe\","
      "\"data\":{\"channel\":\"presence-room\"}}");
  client_expect_nothing (bob);
  client_expect_nothing (a2);

  client_report_closed (a2);
  event = client_expect (bob, "pusher_internal:member_removed",
      "presence-room");
  g_assert_cmpstr (data_string (event, "user_id"), ==, "alice");
  users = users_joined (f, "presence-room");
  g_assert_cmpstr (users, ==, "bob");
}

/* Pusher allows numeric user ids: kept as written, sent as strings. */
static void
test_presence_numeric_user_id (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *a = client_open (f);
  Client *b = client_open (f);
  g_autoptr (JsonNode) data = NULL;
  g_autofree char *users = NULL;

  client_join (a, "presence-room", "alice");
  client_send_presence (b, "presence-room",
      "{\"user_id\":12345678901234567890}");
  data = client_expect (b, "pusher_internal:subscription_succeeded",
      "presence-room");
  g_clear_pointer (&data, json_node_unref);
  data = client_expect (a, "pusher_internal:member_added", "presence-room");
  g_assert_cmpstr (data_string (data, "user_id"), ==, "12345678901234567890");
  g_assert_false (json_object_has_member (json_node_get_object (data),
          "user_info"));
  users = users_joined (f, "presence-room");
  g_assert_cmpstr (users, ==, "alice,12345678901234567890");
}

typedef struct
{
  const char *channel_data;
  const char *type;
} BadChannelData;

static const BadChannelData bad_channel_data[] = {
  {"not json", "InvalidChannelData"},
  {"[\"alice\"]", "InvalidChannelData"},
  {"{}", "InvalidChannelData"},
  {"{\"user_info\":{}}", "InvalidChannelData"},
  {"{\"user_id\":\"\"}", "InvalidChannelData"},
  {"{\"user_id\":null}", "InvalidChannelData"},
  {"{\"user_id\":true}", "InvalidChannelData"},
  {"{\"user_id\":{\"id\":\"alice\"}}", "InvalidChannelData"},
  {"{'user_id':'alice'}", "InvalidChannelData"},
};

/* Correctly signed, but not usable channel_data. */
static void
test_presence_bad_channel_data (gconstpointer data)
{
  const BadChannelData *bad = data;
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);

  client_send_presence (c, "presence-room", bad->channel_data);
  client_expect_refused (c, "presence-room", bad->type, 400);
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 0);
}

static void
test_presence_refused (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  const char *channel_data = "{\"user_id\":\"alice\"}";
  g_autofree char *auth = legba_auth_channel_sign (KEY, SECRET, c->socket_id,
      "presence-room", channel_data);
  g_autofree char *other = build_frame ("pusher:subscribe", "channel",
      "presence-room", "auth", auth, "channel_data",
      "{\"user_id\":\"mallory\"}", NULL);
  g_autofree char *none = build_frame ("pusher:subscribe", "channel",
      "presence-room", "auth", auth, NULL);
  g_autofree char *unsigned_data = build_frame ("pusher:subscribe", "channel",
      "presence-room", "channel_data", channel_data, NULL);

  client_send (c, other);
  client_expect_refused (c, "presence-room", "AuthError", 401);
  client_send (c, none);
  client_expect_refused (c, "presence-room", "InvalidChannelData", 400);
  client_send (c, unsigned_data);
  client_expect_refused (c, "presence-room", "AuthError", 401);
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 0);
}

static void
test_presence_user_info_limit (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  /* "x" repeated: the serialized user_info is its length plus 2 quotes. */
  g_autofree char *fits = g_strnfill (1022, 'x');
  g_autofree char *over = g_strnfill (1023, 'x');
  g_autofree char *cd_fits = g_strdup_printf ("{\"user_id\":\"a\","
      "\"user_info\":\"%s\"}", fits);
  g_autofree char *cd_over = g_strdup_printf ("{\"user_id\":\"a\","
      "\"user_info\":\"%s\"}", over);
  g_autoptr (JsonNode) data = NULL;

  client_send_presence (c, "presence-room", cd_over);
  client_expect_refused (c, "presence-room", "LimitReached", 400);
  client_send_presence (c, "presence-room", cd_fits);
  data = client_expect (c, "pusher_internal:subscription_succeeded",
      "presence-room");
}

static void
test_presence_member_cap (void)
{
  LegbaLimits limits = default_limits ();
  g_autoptr (Fixture) f = NULL;
  Client *a1, *b, *c, *a2;

  limits.max_presence_members = 2;
  f = fixture_new (&limits);
  a1 = client_open (f);
  b = client_open (f);
  c = client_open (f);
  a2 = client_open (f);
  client_join (a1, "presence-room", "alice");
  client_join (b, "presence-room", "bob");
  client_drop_frames (a1);

  client_send_presence (c, "presence-room", "{\"user_id\":\"carol\"}");
  client_expect_refused (c, "presence-room", "LimitReached", 403);
  client_expect_nothing (a1);
  client_expect_nothing (b);

  /* A user already present does not count again. */
  client_join (a2, "presence-room", "alice");
  client_send (b, "{\"event\":\"pusher:unsubscribe\","
      "\"data\":{\"channel\":\"presence-room\"}}");
  client_join (c, "presence-room", "carol");
}

static void
test_presence_join_order (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  const char *names[] = { "zed", "amy", "max", "bea" };
  Client *clients[G_N_ELEMENTS (names)];
  g_autoptr (JsonNode) last = NULL;
  g_autofree char *users = NULL;
  g_autofree char *ids = NULL;

  for (guint i = 0; i < 3; i++) {
    clients[i] = client_open (f);
    client_join (clients[i], "presence-room", names[i]);
  }
  client_report_closed (clients[1]);
  clients[3] = client_open (f);
  last = client_join_presence (clients[3], "presence-room", names[3]);
  ids = presence_ids (last);
  g_assert_cmpstr (ids, ==, "zed,max,bea");
  users = users_joined (f, "presence-room");
  g_assert_cmpstr (users, ==, "zed,max,bea");
}

/* ---- Client events ---- */

/* from sends text, a client-x event on private-room; to gets it with the
 * string data, from nothing. */
static void
assert_relayed_string (Client * from, Client * to, const char *text,
    const char *data)
{
  g_autoptr (JsonNode) frame = NULL;

  client_send (from, text);
  frame = client_pop (to, "client-x", "private-room");
  g_assert_cmpstr (legba_json_object_get_string (json_node_get_object (frame),
          "data"), ==, data);
  client_expect_nothing (from);
}

/* Relayed to the others, never to the sender; data exactly as sent. */
static void
test_client_event_relay (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *a = client_open (f);
  Client *b = client_open (f);
  Client *c = client_open (f);
  Client *outsider = client_open (f);
  const char *data = "{\"n\":1e400,\"big\":12345678901234567890,"
      "\"s\":\"caf\xc3\xa9 \\u00e9\",\"a\":[1,2.50,{}]}";
  g_autofree char *text = g_strdup_printf ("{\"event\":\"client-signal\","
      "\"channel\":\"private-room\",\"data\":%s}", data);
  g_autoptr (JsonNode) frame = NULL;
  gsize len;
  const char *sent;

  client_subscribe_private (a, "private-room");
  client_subscribe_private (b, "private-room");
  client_subscribe_private (c, "private-room");
  client_subscribe_private (outsider, "private-other");

  client_send (a, text);
  client_expect_nothing (a);
  client_expect_nothing (outsider);
  frame = client_pop (b, "client-signal", "private-room");
  g_assert_true (JSON_NODE_HOLDS_OBJECT (json_object_get_member
          (json_node_get_object (frame), "data")));
  g_assert_false (json_object_has_member (json_node_get_object (frame),
          "user_id"));
  sent = g_bytes_get_data (b->bytes->pdata[b->bytes->len - 1], &len);
  g_assert_nonnull (g_strstr_len (sent, len, data));
  g_clear_pointer (&frame, json_node_unref);
  frame = client_pop (c, "client-signal", "private-room");
  /* Serialized once: the same bytes for every recipient. */
  g_assert_true (b->bytes->pdata[b->bytes->len - 1] ==
      c->bytes->pdata[c->bytes->len - 1]);
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->client_events, ==, 1);

  /* A string stays a string. */
  assert_relayed_string (b, a, "{\"event\":\"client-x\","
      "\"channel\":\"private-room\",\"data\":\"hello\"}", "hello");
  /* Names written with escapes are the names they decode to. */
  assert_relayed_string (b, a, "{\"channel\":\"private-r\\u006fom\","
      "\"data\":\"esc\",\"event\":\"client-\\u0078\"}", "esc");
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->client_events, ==, 3);
}

/* Pusher protocol 7: on presence channels the server adds "user_id". */
static void
test_client_event_presence_user_id (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *a = client_open (f);
  Client *b = client_open (f);
  g_autoptr (JsonNode) frame = NULL;

  client_join (a, "presence-room", "alice");
  client_join (b, "presence-room", "bob");
  client_drop_frames (a);
  client_send (b, "{\"event\":\"client-signal\",\"channel\":\"presence-room\","
      "\"data\":{\"to\":\"alice\"},\"user_id\":\"mallory\"}");
  frame = client_pop (a, "client-signal", "presence-room");
  g_assert_cmpstr (legba_json_object_get_string (json_node_get_object (frame),
          "user_id"), ==, "bob");
  client_expect_nothing (b);
}

typedef struct
{
  const char *channel;          /* subscribed by the sender when private */
  const char *frame;
  guint code;
} RefusedEvent;

static const RefusedEvent refused_events[] = {
  {"room", "{\"event\":\"client-x\",\"channel\":\"room\",\"data\":{}}",
      LEGBA_PUSHER_CLIENT_EVENT_REFUSED},
  {"private-encrypted-room", "{\"event\":\"client-x\","
        "\"channel\":\"private-encrypted-room\",\"data\":{}}",
      LEGBA_PUSHER_CLIENT_EVENT_REFUSED},
  {"private-room", "{\"event\":\"client-x\",\"channel\":\"private-other\","
        "\"data\":{}}", LEGBA_PUSHER_CLIENT_EVENT_REFUSED},
  {"private-room", "{\"event\":\"client-x\",\"data\":{}}",
      LEGBA_PUSHER_GENERIC},
  {"private-room", "{\"event\":\"client-x\",\"channel\":7,\"data\":{}}",
      LEGBA_PUSHER_GENERIC},
};

static void
test_client_event_refused (gconstpointer data)
{
  const RefusedEvent *refused = data;
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *a = client_open (f);
  Client *b = client_open (f);

  if (g_str_has_prefix (refused->channel, "private-")) {
    client_subscribe_private (a, refused->channel);
    client_subscribe_private (b, refused->channel);
  } else {
    client_subscribe (a, refused->channel);
    client_subscribe (b, refused->channel);
  }
  client_send (a, refused->frame);
  client_expect_error (a, refused->code);
  client_expect_nothing (a);
  client_expect_nothing (b);
  g_assert_false (a->close_requested);
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->client_events, ==, 0);
}

static void
test_client_event_too_large (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *a = client_open (f);
  Client *b = client_open (f);
  /* data "xxx...": its serialized size is the x count plus 2 quotes. */
  g_autofree char *fits = g_strnfill (10238, 'x');
  g_autofree char *over = g_strnfill (10239, 'x');
  g_autofree char *ok = g_strdup_printf ("{\"event\":\"client-x\","
      "\"channel\":\"private-room\",\"data\":\"%s\"}", fits);
  g_autofree char *big = g_strdup_printf ("{\"event\":\"client-x\","
      "\"channel\":\"private-room\",\"data\":\"%s\"}", over);
  g_autofree char *long_name = g_strnfill (194, 'e');
  g_autofree char *named = g_strdup_printf ("{\"event\":\"client-%s\","
      "\"channel\":\"private-room\",\"data\":{}}", long_name);
  g_autoptr (JsonNode) frame = NULL;

  client_subscribe_private (a, "private-room");
  client_subscribe_private (b, "private-room");
  client_send (a, big);
  client_expect_error (a, LEGBA_PUSHER_OVER_LIMIT);
  client_expect_nothing (b);
  client_send (a, named);
  client_expect_error (a, LEGBA_PUSHER_OVER_LIMIT);
  client_expect_nothing (b);
  client_send (a, ok);
  frame = client_pop (b, "client-x", "private-room");
  client_expect_nothing (a);
  g_assert_false (a->close_requested);
}

/* Pusher: over client_events_per_second, error 4301 and the event is
 * dropped; the connection stays. */
static void
test_client_event_rate_limit (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *a = client_open (f);
  Client *b = client_open (f);
  const char *event = "{\"event\":\"client-x\",\"channel\":\"private-room\","
      "\"data\":{}}";
  gint64 window_start = f->now;
  g_autoptr (JsonNode) relayed = NULL;

  client_subscribe_private (a, "private-room");
  client_subscribe_private (b, "private-room");
  for (guint i = 0; i < 10; i++) {
    g_autoptr (JsonNode) frame = NULL;

    f->now = window_start + i * 90000;
    client_send (a, event);
    frame = client_pop (b, "client-x", "private-room");
  }
  client_send (a, event);
  client_expect_error (a, LEGBA_PUSHER_RATE_LIMITED);
  client_expect_nothing (b);
  g_assert_false (a->close_requested);
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->errors[301], ==, 1);

  /* The limit is per socket. */
  client_send (b, event);
  relayed = client_pop (a, "client-x", "private-room");

  /* A second after the window opened, a new one starts. */
  f->now = window_start + G_USEC_PER_SEC - 1;
  client_send (a, event);
  client_expect_error (a, LEGBA_PUSHER_RATE_LIMITED);
  f->now = window_start + G_USEC_PER_SEC;
  for (guint i = 0; i < 10; i++) {
    g_autoptr (JsonNode) frame = NULL;

    client_send (a, event);
    frame = client_pop (b, "client-x", "private-room");
  }
  client_send (a, event);
  client_expect_error (a, LEGBA_PUSHER_RATE_LIMITED);
  client_expect_nothing (a);
}

/* ---- User authentication ---- */

static void
test_signin (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  const char *user_data = "{\"id\":\"bob\",\"name\":\"Bob\"}";
  g_autofree char *auth = legba_auth_user_sign (KEY, SECRET, c->socket_id,
      user_data);
  g_autofree char *object = build_frame ("pusher:signin", "auth", auth,
      "user_data", user_data, NULL);
  g_autofree char *string = NULL;
  g_autoptr (JsonNode) frame = NULL;
  g_autoptr (JsonNode) data = NULL;

  /* data as a string holding the object, as some clients send it */
  string = frame_with_string_data (object);
  client_send (c, string);
  frame = client_pop (c, "pusher:signin_success", NULL);
  g_assert_false (json_object_has_member (json_node_get_object (frame),
          "channel"));
  g_queue_push_head (&c->frames, g_steal_pointer (&frame));
  data = client_expect (c, "pusher:signin_success", NULL);
  g_assert_cmpstr (data_string (data, "user_data"), ==, user_data);
  g_assert_cmpstr (legba_hub_conn_get_user_id (c->conn), ==, "bob");
  g_assert_false (c->close_requested);

  /* Signing in again as someone else moves the connection. */
  client_signin (c, "carol");
  g_assert_cmpuint (legba_hub_send_to_user (f->hub, f->app, "bob", "ev",
          "{}"), ==, 0);
  g_assert_cmpuint (legba_hub_send_to_user (f->hub, f->app, "carol", "ev",
          "{}"), ==, 1);
}

typedef struct
{
  const char *user_data;        /* signed correctly unless auth is given */
  const char *auth;
  const char *frame;            /* sent as is when given */
} BadSignin;

static const BadSignin bad_signins[] = {
  {"{\"id\":\"bob\"}", "app-key:0000", NULL},
  {"{\"id\":\"bob\"}", "", NULL},
  {"{\"name\":\"bob\"}", NULL, NULL},
  {"{\"id\":42}", NULL, NULL},
  {"{\"id\":\"\"}", NULL, NULL},
  {"[\"bob\"]", NULL, NULL},
  {"bob", NULL, NULL},
  {NULL, NULL, "{\"event\":\"pusher:signin\"}"},
  {NULL, NULL, "{\"event\":\"pusher:signin\",\"data\":{\"auth\":\"x\"}}"},
  {NULL, NULL, "{\"event\":\"pusher:signin\",\"data\":"
        "{\"auth\":\"x\",\"user_data\":{\"id\":\"bob\"}}}"},
};

/* Pusher protocol 7: a failed sign-in is pusher:error 4009 and a close. */
static void
test_signin_refused (gconstpointer data)
{
  const BadSignin *bad = data;
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  Client *other = client_open (f);
  g_autofree char *auth = NULL;
  g_autofree char *frame = NULL;

  if (bad->frame == NULL) {
    auth = bad->auth ? g_strdup (bad->auth) : legba_auth_user_sign (KEY,
        SECRET, c->socket_id, bad->user_data);
    frame = build_frame ("pusher:signin", "auth", auth, "user_data",
        bad->user_data, NULL);
  }
  client_send (c, frame ? frame : bad->frame);
  client_expect_error (c, LEGBA_PUSHER_UNAUTHORIZED);
  client_expect_nothing (c);
  client_expect_closed (c, LEGBA_PUSHER_UNAUTHORIZED);
  g_assert_null (legba_hub_conn_get_user_id (c->conn));
  client_expect_nothing (other);
  g_assert_false (other->close_requested);
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->errors[9], ==, 1);
}

static void
test_signin_timeout (void)
{
  LegbaLimits limits = default_limits ();
  g_autoptr (Fixture) f = NULL;
  Client *signed_in, *anonymous;

  limits.signin_timeout = 10;
  f = fixture_new (&limits);
  signed_in = client_open (f);
  anonymous = client_open (f);
  client_signin (signed_in, "bob");

  f->now += 9 * G_USEC_PER_SEC;
  legba_hub_tick (f->hub);
  g_assert_false (anonymous->close_requested);
  f->now += G_USEC_PER_SEC;
  legba_hub_tick (f->hub);
  client_expect_error (anonymous, LEGBA_PUSHER_UNAUTHORIZED);
  client_expect_closed (anonymous, LEGBA_PUSHER_UNAUTHORIZED);
  g_assert_false (signed_in->close_requested);
  client_expect_nothing (signed_in);
}

/* Pusher protocol 7: server-to-user events reach every connection signed
 * in as the user, on channel "#server-to-user-ID". */
static void
test_user_send (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *b1 = client_open (f);
  Client *b2 = client_open (f);
  Client *alice = client_open (f);
  Client *anonymous = client_open (f);
  g_autoptr (JsonNode) d1 = NULL, d2 = NULL;

  client_signin (b1, "bob");
  client_signin (b2, "bob");
  client_signin (alice, "alice");
  g_assert_cmpuint (legba_hub_send_to_user (f->hub, f->app, "bob",
          "notice", "{\"x\":1}"), ==, 2);
  d1 = client_expect (b1, "notice", "#server-to-user-bob");
  d2 = client_expect (b2, "notice", "#server-to-user-bob");
  g_assert_cmpint (data_int (d1, "x"), ==, 1);
  g_assert_true (b1->bytes->pdata[b1->bytes->len - 1] ==
      b2->bytes->pdata[b2->bytes->len - 1]);
  client_expect_nothing (alice);
  client_expect_nothing (anonymous);
  g_assert_cmpuint (legba_hub_send_to_user (f->hub, f->app, "nobody", "ev",
          "{}"), ==, 0);

  client_report_closed (b1);
  g_assert_cmpuint (legba_hub_send_to_user (f->hub, f->app, "bob", "ev",
          "{}"), ==, 1);
}

static void
test_user_terminate (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *b1 = client_open (f);
  Client *b2 = client_open (f);
  Client *alice = client_open (f);

  client_signin (b1, "bob");
  client_signin (b2, "bob");
  client_signin (alice, "alice");
  g_assert_cmpuint (legba_hub_terminate_user (f->hub, f->app, "bob"), ==, 2);
  client_expect_closed (b1, LEGBA_PUSHER_UNAUTHORIZED);
  client_expect_closed (b2, LEGBA_PUSHER_UNAUTHORIZED);
  g_assert_false (alice->close_requested);
  /* Closing, not yet closed: nothing more reaches them. */
  g_assert_cmpuint (legba_hub_send_to_user (f->hub, f->app, "bob", "ev",
          "{}"), ==, 0);
  g_assert_cmpuint (legba_hub_terminate_user (f->hub, f->app, "bob"), ==, 0);
  client_report_closed (b1);
  client_report_closed (b2);
  g_assert_cmpuint (legba_hub_terminate_user (f->hub, f->app, "bob"), ==, 0);
  g_assert_cmpuint (legba_hub_terminate_user (f->hub, f->app, "nobody"), ==, 0);
}

/* ---- Server side: HTTP API operations ---- */

static void
test_publish_fan_out (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (GError) error = NULL;
  const LegbaHubCounters *counters = legba_hub_get_counters (f->hub);
  g_autoptr (JsonNode) raw = NULL;
  Client *clients[5];
  GBytes *first = NULL;
  guint64 out_before;

  for (guint i = 0; i < G_N_ELEMENTS (clients); i++) {
    clients[i] = client_open (f);
    if (i < 4)
      client_subscribe (clients[i], "room");
  }
  out_before = counters->messages_out;
  g_assert_true (publish (f, "room", "news", "{\"headline\":\"hi\"}", NULL,
          &error));
  g_assert_no_error (error);
  for (guint i = 0; i < 4; i++) {
    Client *c = clients[i];
    g_autoptr (JsonNode) data = client_expect (c, "news", "room");
    GBytes *bytes = c->bytes->pdata[c->bytes->len - 1];

    g_assert_cmpstr (data_string (data, "headline"), ==, "hi");
    /* Serialized once: the same GBytes for every recipient. */
    if (first == NULL)
      first = bytes;
    g_assert_true (bytes == first);
  }
  client_expect_nothing (clients[4]);
  g_assert_cmpuint (counters->messages_out - out_before, ==, 4);
  g_assert_cmpuint (counters->api_events, ==, 1);

  /* Data that is not JSON is sent as the string it is. */
  g_assert_true (publish (f, "room", "raw", "plain \"text\"", NULL, NULL));
  raw = client_pop (clients[0], "raw", "room");
  g_assert_cmpstr (legba_json_object_get_string (json_node_get_object (raw),
          "data"), ==, "plain \"text\"");
}

static void
test_publish_except (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *a = client_open (f);
  Client *b = client_open (f);
  g_autoptr (JsonNode) data = NULL;

  client_subscribe (a, "room");
  client_subscribe (b, "room");
  g_assert_true (publish (f, "room", "ev", "{}", a->socket_id, NULL));
  client_expect_nothing (a);
  data = client_expect (b, "ev", "room");
  g_assert_true (publish (f, "room", "ev", "{}", "1.1", NULL));
  client_expect_nothing (client_open (f));
}

static void
test_publish_channels (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  const char *channels[] = { "one", "two", "empty", NULL };
  g_autoptr (JsonNode) d1 = NULL, d2 = NULL;

  client_subscribe (c, "one");
  client_subscribe (c, "two");
  g_assert_true (legba_hub_publish (f->hub, f->app, channels, "ev", "{}",
          NULL, NULL));
  d1 = client_expect (c, "ev", "one");
  d2 = client_expect (c, "ev", "two");
  client_expect_nothing (c);
}

static void
test_publish_invalid (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *c = client_open (f);
  g_autofree char *big = g_strnfill (10241, 'x');
  g_autofree char *fits = g_strnfill (10240, 'x');
  g_autofree char *long_event = g_strnfill (201, 'e');
  const char *no_channels[] = { NULL };
  const char *one_bad[] = { "room", "bad name", NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) data = NULL;

  client_subscribe (c, "room");
  g_assert_false (publish (f, "a#b", "ev", "{}", NULL, &error));
  g_assert_error (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (legba_hub_publish (f->hub, f->app, one_bad, "ev", "{}",
          NULL, &error));
  g_assert_error (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (legba_hub_publish (f->hub, f->app, no_channels, "ev", "{}",
          NULL, &error));
  g_assert_error (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (publish (f, "room", "pusher:subscribe", "{}", NULL, &error));
  g_assert_error (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (publish (f, "room", "", "{}", NULL, &error));
  g_assert_error (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (publish (f, "room", long_event, "{}", NULL, &error));
  g_assert_error (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (publish (f, "room", "ev", big, NULL, &error));
  g_assert_error (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_TOO_LARGE);
  g_clear_error (&error);
  client_expect_nothing (c);
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->api_events, ==, 0);

  g_assert_true (publish (f, "room", "ev", fits, NULL, &error));
  g_assert_no_error (error);
  data = client_expect (c, "ev", "room");
}

typedef struct
{
  GString *seen;
} ForeachData;

static void
collect_channel (const LegbaHubChannelInfo * info, gpointer user_data)
{
  GString *seen = user_data;

  g_string_append_printf (seen, "%s:%u:%u;", info->name,
      info->subscription_count, info->user_count);
}

static char *
list_channels (Fixture * f, const char *prefix)
{
  GString *seen = g_string_new (NULL);

  legba_hub_foreach_channel (f->hub, f->app, prefix, collect_channel, seen);
  return g_string_free (seen, FALSE);
}

static void
test_api_channels (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *a1 = client_open (f);
  Client *a2 = client_open (f);
  Client *b = client_open (f);
  g_autofree char *all = NULL, *presence = NULL, *none = NULL, *after = NULL;
  g_autofree char *users = NULL;
  g_autoptr (GPtrArray) public_users = NULL;
  LegbaHubChannelInfo info;

  client_join (a1, "presence-a", "alice");
  client_join (a2, "presence-a", "alice");
  client_join (b, "presence-a", "bob");
  client_drop_frames (a1);
  client_drop_frames (a2);
  client_subscribe_private (b, "private-b");
  client_subscribe (a1, "public-c");
  client_subscribe (b, "public-c");

  all = list_channels (f, NULL);
  g_assert_cmpstr (all, ==, "presence-a:3:2;private-b:1:0;public-c:2:0;");
  presence = list_channels (f, "presence-");
  g_assert_cmpstr (presence, ==, "presence-a:3:2;");
  none = list_channels (f, "nothing-");
  g_assert_cmpstr (none, ==, "");

  g_assert_true (legba_hub_get_channel (f->hub, f->app, "public-c", &info));
  g_assert_cmpstr (info.name, ==, "public-c");
  g_assert_cmpuint (info.subscription_count, ==, 2);
  g_assert_false (legba_hub_get_channel (f->hub, f->app, "public-d", &info));

  users = users_joined (f, "presence-a");
  g_assert_cmpstr (users, ==, "alice,bob");
  g_assert_null (legba_hub_get_users (f->hub, f->app, "presence-z"));
  public_users = legba_hub_get_users (f->hub, f->app, "public-c");
  g_assert_nonnull (public_users);
  g_assert_cmpuint (public_users->len, ==, 0);

  client_report_closed (b);
  after = list_channels (f, NULL);
  g_assert_cmpstr (after, ==, "presence-a:2:1;public-c:1:0;");
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 3);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/hub/presence/subscribe", test_presence_subscribe);
  g_test_add_func ("/hub/presence/member-added", test_presence_member_added);
  g_test_add_func ("/hub/presence/member-removed",
      test_presence_member_removed);
  g_test_add_func ("/hub/presence/two-sockets", test_presence_two_sockets);
  g_test_add_func ("/hub/presence/numeric-user-id",
      test_presence_numeric_user_id);
  ADD_TABLE ("/hub/presence/bad-channel-data", bad_channel_data,
      test_presence_bad_channel_data);
  g_test_add_func ("/hub/presence/refused", test_presence_refused);
  g_test_add_func ("/hub/presence/user-info-limit",
      test_presence_user_info_limit);
  g_test_add_func ("/hub/presence/member-cap", test_presence_member_cap);
  g_test_add_func ("/hub/presence/join-order", test_presence_join_order);
  g_test_add_func ("/hub/client-event/relay", test_client_event_relay);
  g_test_add_func ("/hub/client-event/presence-user-id",
      test_client_event_presence_user_id);
  ADD_TABLE ("/hub/client-event/refused", refused_events,
      test_client_event_refused);
  g_test_add_func ("/hub/client-event/too-large", test_client_event_too_large);
  g_test_add_func ("/hub/client-event/rate-limit",
      test_client_event_rate_limit);
  g_test_add_func ("/hub/signin/success", test_signin);
  ADD_TABLE ("/hub/signin/refused", bad_signins, test_signin_refused);
  g_test_add_func ("/hub/signin/timeout", test_signin_timeout);
  g_test_add_func ("/hub/user/send", test_user_send);
  g_test_add_func ("/hub/user/terminate", test_user_terminate);
  g_test_add_func ("/hub/publish/fan-out", test_publish_fan_out);
  g_test_add_func ("/hub/publish/except", test_publish_except);
  g_test_add_func ("/hub/publish/channels", test_publish_channels);
  g_test_add_func ("/hub/publish/invalid", test_publish_invalid);
  g_test_add_func ("/hub/api/channels", test_api_channels);

  return g_test_run ();
}
