/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub's subscription counting: pusher_internal:subscription_count to
 * the subscribers of a channel whose count changed, at the next tick, for
 * apps that enable it; the cluster's count; never on presence channels.
 */
#include "hub-fixture.h"

/* The count in the client's next pusher_internal:subscription_count. */
static gint64
expect_count (Client * c, const char *channel)
{
  g_autoptr (JsonNode) data = client_expect (c,
      "pusher_internal:subscription_count", channel);

  g_assert_true (JSON_NODE_HOLDS_OBJECT (data));
  g_assert_cmpuint (json_object_get_size (json_node_get_object (data)), ==, 1);
  return data_int (data, "subscription_count");
}

static Fixture *
counting_fixture (void)
{
  Fixture *f = fixture_new (NULL);

  g_assert_false (legba_hub_app_get_subscription_count (f->app));
  legba_hub_app_set_subscription_count (f->app, TRUE);
  g_assert_true (legba_hub_app_get_subscription_count (f->app));
  return f;
}

/* Every subscriber gets the count once the tick comes, the new one too;
 * joins and leaves between two ticks make one event, with the count of
 * the tick. */
static void
test_count_changes (void)
{
  g_autoptr (Fixture) f = counting_fixture ();
  Client *a = client_open (f);
  Client *b = client_open (f);
  Client *c = client_open (f);

  client_subscribe (a, "news");
  client_expect_nothing (a);
  legba_hub_tick (f->hub);
  g_assert_cmpint (expect_count (a, "news"), ==, 1);
  legba_hub_tick (f->hub);
  client_expect_nothing (a);

  client_subscribe (b, "news");
  client_subscribe (c, "news");
  legba_hub_tick (f->hub);
  g_assert_cmpint (expect_count (a, "news"), ==, 3);
  g_assert_cmpint (expect_count (b, "news"), ==, 3);
  g_assert_cmpint (expect_count (c, "news"), ==, 3);
  client_expect_nothing (a);

  client_send (c, "{\"event\":\"pusher:unsubscribe\",\"data\":"
      "{\"channel\":\"news\"}}");
  client_report_closed (b);
  legba_hub_tick (f->hub);
  g_assert_cmpint (expect_count (a, "news"), ==, 1);
  client_expect_nothing (c);

  /* a subscription that changes nothing sends nothing */
  client_subscribe (a, "news");
  legba_hub_tick (f->hub);
  client_expect_nothing (a);
}

/* Public, private and encrypted channels are counted; presence channels,
 * which have their members, are not. */
static void
test_count_kinds (void)
{
  g_autoptr (Fixture) f = counting_fixture ();
  Client *a = client_open (f);
  Client *b = client_open (f);

  client_subscribe_private (a, "private-desk");
  client_subscribe_private (a, "private-encrypted-vault");
  client_join (a, "presence-room", "ann");
  client_join (b, "presence-room", "ben");
  client_skip (a, "pusher_internal:member_added", "presence-room");
  legba_hub_tick (f->hub);
  g_assert_cmpint (expect_count (a, "private-desk"), ==, 1);
  g_assert_cmpint (expect_count (a, "private-encrypted-vault"), ==, 1);
  client_expect_nothing (a);
  client_expect_nothing (b);
}

/* Off (the default) or turned off: nothing is sent. */
static void
test_count_disabled (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *a = client_open (f);
  Client *b = client_open (f);

  client_subscribe (a, "news");
  client_subscribe (b, "news");
  legba_hub_tick (f->hub);
  client_expect_nothing (a);

  legba_hub_app_set_subscription_count (f->app, TRUE);
  client_report_closed (b);
  legba_hub_app_set_subscription_count (f->app, FALSE);
  legba_hub_tick (f->hub);
  client_expect_nothing (a);
}

/* With other instances, the count is the cluster's, and their changes
 * reach this instance's subscribers. */
static void
test_count_cluster (void)
{
  g_autoptr (Fixture) f = counting_fixture ();
  Client *a = client_open (f);

  client_subscribe (a, "news");
  legba_hub_cluster_subscriptions (f->hub, f->app, "news", 4);
  legba_hub_tick (f->hub);
  g_assert_cmpint (expect_count (a, "news"), ==, 5);
  legba_hub_cluster_subscriptions (f->hub, f->app, "news", -2);
  legba_hub_tick (f->hub);
  g_assert_cmpint (expect_count (a, "news"), ==, 3);

  /* a channel with no subscriber here has nobody to tell */
  legba_hub_cluster_subscriptions (f->hub, f->app, "elsewhere", 2);
  legba_hub_tick (f->hub);
  client_expect_nothing (a);
  legba_hub_cluster_subscriptions (f->hub, f->app, "presence-far", 2);
  legba_hub_tick (f->hub);
  client_expect_nothing (a);
}

/* A vacated channel is forgotten with its pending count. */
static void
test_count_vacated (void)
{
  g_autoptr (Fixture) f = counting_fixture ();
  Client *a = client_open (f);
  Client *b = client_open (f);
  LegbaHubChannelInfo info;

  client_subscribe (a, "gone");
  client_subscribe (b, "other");
  client_report_closed (a);
  g_assert_false (legba_hub_get_channel (f->hub, f->app, "gone", &info));
  legba_hub_tick (f->hub);
  g_assert_cmpint (expect_count (b, "other"), ==, 1);
  client_expect_nothing (b);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/hub/subscription-count/changes", test_count_changes);
  g_test_add_func ("/hub/subscription-count/kinds", test_count_kinds);
  g_test_add_func ("/hub/subscription-count/disabled", test_count_disabled);
  g_test_add_func ("/hub/subscription-count/cluster", test_count_cluster);
  g_test_add_func ("/hub/subscription-count/vacated", test_count_vacated);
  return g_test_run ();
}
