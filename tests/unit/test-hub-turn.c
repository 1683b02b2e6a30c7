/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * TURN credentials: the REST scheme's computation against known answers,
 * TURN URLs, the ice_servers legba-server hands out and who gets them
 * (room members only), and their conversion into webrtcbin URIs.
 */
#include "hub-fixture.h"
#include <legba/common/legba-turn.h>

#define TURN_SECRET "legba-test-turn-secret"
#define TURN_TTL 600

static const char *const turn_urls[] = { "turn:127.0.0.1:3478",
  "turn:turn.example?transport=tcp", NULL
};

/* ---- The computation ---- */

/* base64 (HMAC-SHA1 (secret, user name)). The expected values were
 * computed apart from this code, with Python's hmac module
 *   base64.b64encode (hmac.new (SECRET, USERNAME, hashlib.sha1).digest ())
 * and checked with OpenSSL
 *   printf '%s' USERNAME | openssl dgst -sha1 -hmac SECRET -binary | base64
 * The first is RFC 2202's HMAC-SHA1 test case 2 (digest
 * effcdf6ae5eb2fa2d27416d5f184df9c259a7c79). */
static void
test_credential_known_answers (void)
{
  static const struct
  {
    const char *secret, *username, *credential;
  } cases[] = {
    {"Jefe", "what do ya want for nothing?", "7/zfauXrL6LSdBbV8YTfnCWafHk="},
    {TURN_SECRET, "1700000000:alice-k3v9q2m1xz",
        "RyXQpSySBexK97pbgFsbDdkgJew="},
    {"north", "4102444800:bob-0123456789", "4xrEiazX2NFM5lNKyAEGxr+jqgw="},
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autofree char *credential = legba_turn_credential (cases[i].secret,
        cases[i].username);

    g_assert_cmpstr (credential, ==, cases[i].credential);
  }
}

static void
test_username (void)
{
  g_autofree char *username = legba_turn_username (1700000000,
      "alice-k3v9q2m1xz");

  g_assert_cmpstr (username, ==, "1700000000:alice-k3v9q2m1xz");
}

static void
test_url_check (void)
{
  static const char *const good[] = {
    "turn:127.0.0.1", "turn:127.0.0.1:3478", "turns:turn.example.com:443",
    "turn:turn.example?transport=udp", "turn:turn.example:80?transport=tcp",
    "turn:[::1]:3478", "turns:[2001:db8::1]",
  };
  static const char *const bad[] = {
    "", "turn:", "stun:127.0.0.1:3478", "turn://127.0.0.1:3478",
    "turn:user:pass@127.0.0.1", "turn:127.0.0.1:0", "turn:127.0.0.1:65536",
    "turn:127.0.0.1:", "turn:127.0.0.1:34x", "turn:[::1", "turn:[]:3478",
    "turn:127.0.0.1?transport=sctp", "turn:127.0.0.1/path",
    "TURN:127.0.0.1", "turn:127.0.0.1 ",
  };

  for (guint i = 0; i < G_N_ELEMENTS (good); i++) {
    g_autoptr (GError) error = NULL;

    if (!legba_turn_url_check (good[i], &error))
      g_error ("'%s' refused: %s", good[i], error->message);
  }
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr (GError) error = NULL;

    if (legba_turn_url_check (bad[i], &error))
      g_error ("'%s' accepted", bad[i]);
    g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
  }
}

/* ---- Into webrtcbin's URIs ---- */

static void
test_uris_from_ice_servers (void)
{
  g_autoptr (JsonNode) node = json_from_string ("["
      /* urls as an array, a user name and credential to escape */
      "{\"urls\":[\"turn:127.0.0.1:3478\",\"turns:[::1]?transport=tcp\","
      "\"stun:127.0.0.1:3478\"],\"username\":\"1700000000:a b\","
      "\"credential\":\"x/y+z=\"},"
      /* urls as one string, default port */
      "{\"urls\":\"turn:turn.example\",\"username\":\"u\","
      "\"credential\":\"p\"},"
      /* no credential, no urls, not an object, bad URL: skipped */
      "{\"urls\":\"turn:nocred.example\",\"username\":\"u\"},"
      "{\"username\":\"u\",\"credential\":\"p\"},"
      "42,"
      "{\"urls\":[\"turn:bad/url\",7],\"username\":\"u\",\"credential\":\"p\"}"
      "]", NULL);
  g_auto (GStrv) uris = NULL;
  g_auto (GStrv) none = legba_turn_uris_from_ice_servers (NULL);

  g_assert_nonnull (node);
  uris = legba_turn_uris_from_ice_servers (json_node_get_array (node));
  g_assert_cmpuint (g_strv_length (uris), ==, 3);
  g_assert_cmpstr (uris[0], ==,
      "turn://1700000000%3Aa%20b:x%2Fy%2Bz%3D@127.0.0.1:3478");
  g_assert_cmpstr (uris[1], ==,
      "turns://1700000000%3Aa%20b:x%2Fy%2Bz%3D@[::1]:5349?transport=tcp");
  g_assert_cmpstr (uris[2], ==, "turn://u:p@turn.example:3478");
  g_assert_nonnull (none);
  g_assert_null (none[0]);
}

/* ---- Who gets them ---- */

/* The subscription_succeeded data of a room member */
static JsonNode *
join_room (Client * c, const char *channel, const char *user_id)
{
  g_autofree char *channel_data = g_strdup_printf ("{\"user_id\":\"%s\"}",
      user_id);

  client_send_presence (c, channel, channel_data);
  return client_expect (c, "pusher_internal:subscription_succeeded", channel);
}

/* Did any frame c received mention a TURN credential? */
static gboolean
received_credentials (Client * c)
{
  for (guint i = 0; i < c->bytes->len; i++) {
    gsize size;
    const char *text = g_bytes_get_data (c->bytes->pdata[i], &size);
    g_autofree char *copy = g_strndup (text, size);

    if (strstr (copy, "ice_servers") || strstr (copy, "credential"))
      return TRUE;
  }
  return FALSE;
}

static void
check_ice_servers (JsonNode * data, const char *user_id)
{
  JsonObject *obj = json_node_get_object (data);
  JsonArray *servers = json_object_get_array_member (obj, "ice_servers");
  JsonObject *server;
  JsonArray *urls;
  const char *username, *colon;
  g_autofree char *expected = NULL;
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;
  gint64 expiry;

  /* beside the presence data pusher-js reads */
  g_assert_true (json_object_has_member (obj, "presence"));
  g_assert_cmpuint (json_array_get_length (servers), ==, 1);
  server = json_array_get_object_element (servers, 0);
  urls = json_object_get_array_member (server, "urls");
  g_assert_cmpuint (json_array_get_length (urls), ==, 2);
  g_assert_cmpstr (json_array_get_string_element (urls, 0), ==, turn_urls[0]);
  g_assert_cmpstr (json_array_get_string_element (urls, 1), ==, turn_urls[1]);

  /* EXPIRY:USER_ID, EXPIRY the ttl from now (a second's slack each way
   * for the clock turning between the hub and this check) */
  username = json_object_get_string_member (server, "username");
  colon = strchr (username, ':');
  g_assert_nonnull (colon);
  g_assert_cmpstr (colon + 1, ==, user_id);
  expiry = g_ascii_strtoll (username, NULL, 10);
  g_assert_cmpint (expiry, >=, now + TURN_TTL - 1);
  g_assert_cmpint (expiry, <=, now + TURN_TTL + 1);
  expected = legba_turn_credential (TURN_SECRET, username);
  g_assert_cmpstr (json_object_get_string_member (server, "credential"), ==,
      expected);
}

static Fixture *
turn_fixture (void)
{
  Fixture *f = fixture_new (NULL);

  legba_hub_set_turn (f->hub, turn_urls, TURN_SECRET, TURN_TTL);
  return f;
}

static void
test_room_member (void)
{
  g_autoptr (Fixture) f = turn_fixture ();
  Client *alice = client_open (f);
  Client *bob = client_open (f);
  g_autoptr (JsonNode) a = join_room (alice, "presence-legba.r",
      "alice-abc123");
  g_autoptr (JsonNode) b = join_room (bob, "presence-legba.r", "bob-def456");
  g_autoptr (JsonNode) again = NULL;

  check_ice_servers (a, "alice-abc123");
  check_ice_servers (b, "bob-def456");
  /* alice hears of bob, never of his credentials */
  client_skip (alice, "pusher_internal:member_added", "presence-legba.r");
  client_expect_nothing (alice);

  /* Subscribing again (the socket is already a member) */
  again = join_room (bob, "presence-legba.r", "bob-def456");
  check_ice_servers (again, "bob-def456");
  client_expect_nothing (alice);
}

/* Only a room member gets credentials: not a public or private channel's
 * subscriber, not another presence channel's member, not a refused
 * subscription, not a bare connection. */
static void
test_not_for_others (void)
{
  g_autoptr (Fixture) f = turn_fixture ();
  Client *c = client_open (f);
  const char *channel_data = "{\"user_id\":\"mallory-abc123\"}";
  g_autofree char *forged = legba_auth_channel_sign (KEY, "not-the-secret",
      c->socket_id, "presence-legba.r", channel_data);
  g_autofree char *frame = build_frame ("pusher:subscribe", "channel",
      "presence-legba.r", "auth", forged, "channel_data", channel_data,
      NULL);
  static const char *const others[] = { "presence-room", "presence-legbax.r" };

  client_subscribe (c, "legba.r");
  client_subscribe_private (c, "private-legba.r");
  for (guint i = 0; i < G_N_ELEMENTS (others); i++) {
    g_autoptr (JsonNode) other = join_room (c, others[i], "mallory-abc123");

    g_assert_false (json_object_has_member (json_node_get_object (other),
            "ice_servers"));
  }
  client_send (c, frame);
  client_expect_refused (c, "presence-legba.r", "AuthError", 401);
  client_expect_nothing (c);
  g_assert_false (received_credentials (c));
}

static void
test_not_configured (void)
{
  g_autoptr (Fixture) f = turn_fixture ();
  Client *c = client_open (f);
  g_autoptr (JsonNode) data = NULL;

  legba_hub_set_turn (f->hub, NULL, TURN_SECRET, TURN_TTL);
  data = join_room (c, "presence-legba.r", "alice-abc123");
  g_assert_false (json_object_has_member (json_node_get_object (data),
          "ice_servers"));
  g_assert_false (received_credentials (c));
}

static void
test_ice_servers_json (void)
{
  g_autoptr (GString) out = g_string_new (NULL);
  g_autoptr (JsonNode) node = NULL;
  JsonObject *server;

  legba_turn_append_ice_servers (out, turn_urls, TURN_SECRET, 100,
      "alice-k3v9q2m1xz", 1699999900);
  node = json_from_string (out->str, NULL);
  g_assert_nonnull (node);
  server = json_array_get_object_element (json_node_get_array (node), 0);
  g_assert_cmpstr (json_object_get_string_member (server, "username"), ==,
      "1700000000:alice-k3v9q2m1xz");
  g_assert_cmpstr (json_object_get_string_member (server, "credential"), ==,
      "RyXQpSySBexK97pbgFsbDdkgJew=");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/turn/credential/known-answers",
      test_credential_known_answers);
  g_test_add_func ("/turn/credential/username", test_username);
  g_test_add_func ("/turn/url-check", test_url_check);
  g_test_add_func ("/turn/ice-servers/json", test_ice_servers_json);
  g_test_add_func ("/turn/ice-servers/uris", test_uris_from_ice_servers);
  g_test_add_func ("/turn/hub/room-member", test_room_member);
  g_test_add_func ("/turn/hub/not-for-others", test_not_for_others);
  g_test_add_func ("/turn/hub/not-configured", test_not_configured);
  return g_test_run ();
}
