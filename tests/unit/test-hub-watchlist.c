/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub's watchlist events: a user signed in with a "watchlist" gets
 * the watched users online at once, then online and offline as their
 * first connection signs in and their last one goes, here or on another
 * instance; watchlists that are not lists of user ids, or too long, are
 * refused.
 */
#include "hub-fixture.h"

static void
signin_with (Client * c, const char *user_data)
{
  g_autofree char *auth = legba_auth_user_sign (KEY, SECRET, c->socket_id,
      user_data);
  g_autofree char *frame = build_frame ("pusher:signin", "auth", auth,
      "user_data", user_data, NULL);

  client_send (c, frame);
}

/* "online a,b" for the next watchlist event, which has one entry. */
static char *
expect_watch (Client * c)
{
  g_autoptr (JsonNode) data = client_expect (c,
      "pusher_internal:watchlist_events", NULL);
  JsonArray *events = json_object_get_array_member (json_node_get_object
      (data), "events");
  JsonObject *event;
  JsonArray *ids;
  GString *out;

  g_assert_cmpuint (json_array_get_length (events), ==, 1);
  event = json_array_get_object_element (events, 0);
  ids = json_object_get_array_member (event, "user_ids");
  out = g_string_new (json_object_get_string_member (event, "name"));
  for (guint i = 0; i < json_array_get_length (ids); i++) {
    g_string_append_c (out, i == 0 ? ' ' : ',');
    g_string_append (out, json_array_get_string_element (ids, i));
  }
  return g_string_free (out, FALSE);
}

#define assert_watch(c, expected) G_STMT_START { \
    g_autofree char *got_ = expect_watch (c); \
    g_assert_cmpstr (got_, ==, (expected)); \
  } G_STMT_END

static void
test_online_offline (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *bob = client_open (f);
  Client *alice = client_open (f);
  Client *carol, *carol2;

  client_signin (bob, "bob");
  signin_with (alice, "{\"id\":\"alice\",\"watchlist\":[\"bob\",\"carol\","
      "\"bob\"]}");
  client_skip (alice, "pusher:signin_success", NULL);
  assert_watch (alice, "online bob");
  client_expect_nothing (alice);

  /* carol's first connection: online; her second: nothing. */
  carol = client_open (f);
  client_signin (carol, "carol");
  assert_watch (alice, "online carol");
  carol2 = client_open (f);
  client_signin (carol2, "carol");
  client_expect_nothing (alice);
  client_report_closed (carol);
  client_expect_nothing (alice);
  client_report_closed (carol2);
  assert_watch (alice, "offline carol");
  client_report_closed (bob);
  assert_watch (alice, "offline bob");
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->watchlist_events, ==, 4);

  /* Signed in without a watchlist: nothing. */
  bob = client_open (f);
  signin_with (bob, "{\"id\":\"bob\",\"watchlist\":null}");
  client_skip (bob, "pusher:signin_success", NULL);
  client_expect_nothing (bob);
  assert_watch (alice, "online bob");
}

/* A user on another instance counts as online until its last instance
 * lets go; one here too keeps it online. */
static void
test_remote_users (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *alice = client_open (f);
  Client *bob;

  signin_with (alice, "{\"id\":\"alice\",\"watchlist\":[\"bob\"]}");
  client_skip (alice, "pusher:signin_success", NULL);
  legba_hub_cluster_member (f->hub, f->app, LEGBA_HUB_USERS_CHANNEL, "bob",
      NULL, TRUE);
  assert_watch (alice, "online bob");
  legba_hub_cluster_member (f->hub, f->app, LEGBA_HUB_USERS_CHANNEL, "bob",
      NULL, TRUE);
  bob = client_open (f);
  client_signin (bob, "bob");
  legba_hub_cluster_member (f->hub, f->app, LEGBA_HUB_USERS_CHANNEL, "bob",
      NULL, FALSE);
  legba_hub_cluster_member (f->hub, f->app, LEGBA_HUB_USERS_CHANNEL, "bob",
      NULL, FALSE);
  client_expect_nothing (alice);
  client_report_closed (bob);
  assert_watch (alice, "offline bob");
  /* An absent with nothing present is ignored. */
  legba_hub_cluster_member (f->hub, f->app, LEGBA_HUB_USERS_CHANNEL, "bob",
      NULL, FALSE);
  client_expect_nothing (alice);
}

typedef struct
{
  const char *user_data;
  const char *message;          /* in the pusher:error */
} BadWatchlist;

static const BadWatchlist bad_watchlists[] = {
  {"{\"id\":\"a\",\"watchlist\":\"bob\"}", "must be an array"},
  {"{\"id\":\"a\",\"watchlist\":{\"bob\":1}}", "must be an array"},
  {"{\"id\":\"a\",\"watchlist\":[\"bob\",7]}", "item 1 is not"},
  {"{\"id\":\"a\",\"watchlist\":[\"\"]}", "item 0 is not"},
  {"{\"id\":\"a\",\"watchlist\":[null]}", "item 0 is not"},
  {"{\"id\":\"a\",\"watchlist\":[\"a\",\"b\",\"c\",\"d\"]}",
      "has 4 user ids, over the limit of 3"},
};

static void
test_bad_watchlist (gconstpointer data)
{
  const BadWatchlist *bad = data;
  LegbaLimits limits = default_limits ();
  g_autoptr (Fixture) f = NULL;
  g_autoptr (JsonNode) error = NULL;
  Client *c, *other;

  limits.max_watchlist_users = 3;
  f = fixture_new (&limits);
  other = client_open (f);
  client_signin (other, "other");
  c = client_open (f);
  signin_with (c, bad->user_data);
  error = client_expect (c, "pusher:error", NULL);
  g_assert_cmpint (data_int (error, "code"), ==, LEGBA_PUSHER_UNAUTHORIZED);
  g_assert_nonnull (strstr (data_string (error, "message"), bad->message));
  g_assert_true (c->close_requested);
  g_assert_null (legba_hub_conn_get_user_id (c->conn));
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->watchlist_refusals, ==, 1);
  client_expect_nothing (other);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/hub/watchlist/online-offline", test_online_offline);
  g_test_add_func ("/hub/watchlist/remote-users", test_remote_users);
  for (guint i = 0; i < G_N_ELEMENTS (bad_watchlists); i++) {
    g_autofree char *path = g_strdup_printf ("/hub/watchlist/bad/%u", i);

    g_test_add_data_func (path, &bad_watchlists[i], test_bad_watchlist);
  }
  return g_test_run ();
}
