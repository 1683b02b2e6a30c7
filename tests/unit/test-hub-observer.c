/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub's observer (what the webhooks hear of): channels occupied and
 * vacated, presence members added and removed, each once per transition
 * of the whole cluster, client events, and subscription counts at the
 * tick, through a recording observer.
 */
#include "hub-fixture.h"

/* "occupied CHANNEL", "vacated CHANNEL", "added CHANNEL USER",
 * "removed CHANNEL USER", "client CHANNEL EVENT DATA SOCKET USER",
 * "count CHANNEL N". */
static void
on_channel (LegbaHubApp * app, const char *channel, gboolean occupied,
    gpointer user_data)
{
  g_ptr_array_add (user_data, g_strdup_printf ("%s %s",
          occupied ? "occupied" : "vacated", channel));
}

static void
on_member (LegbaHubApp * app, const char *channel, const char *user_id,
    gboolean added, gpointer user_data)
{
  g_ptr_array_add (user_data, g_strdup_printf ("%s %s %s",
          added ? "added" : "removed", channel, user_id));
}

static void
on_client_event (LegbaHubApp * app, const char *channel, const char *event,
    const char *data, const char *socket_id, const char *user_id,
    gpointer user_data)
{
  g_ptr_array_add (user_data, g_strdup_printf ("client %s %s %s %s %s",
          channel, event, data, socket_id ? "SOCKET" : "(null)",
          user_id ? user_id : "(null)"));
}

static void
on_subscription_count (LegbaHubApp * app, const char *channel, guint count,
    gpointer user_data)
{
  g_ptr_array_add (user_data, g_strdup_printf ("count %s %u", channel, count));
}

static const LegbaHubObserver observer = {
  on_channel, on_member, on_client_event, NULL, on_subscription_count
};

static GPtrArray *
observe (Fixture * f)
{
  GPtrArray *calls = g_ptr_array_new_with_free_func (g_free);

  legba_hub_set_observer (f->hub, &observer, calls);
  return calls;
}

/* Checks and forgets the calls recorded so far, joined with "; ". */
static void
expect_calls (GPtrArray * calls, const char *expected)
{
  g_autoptr (GString) got = g_string_new (NULL);

  for (guint i = 0; i < calls->len; i++)
    g_string_append_printf (got, "%s%s", i ? "; " : "",
        (char *) calls->pdata[i]);
  g_assert_cmpstr (got->str, ==, expected);
  g_ptr_array_set_size (calls, 0);
}

static void
test_occupied_vacated (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (GPtrArray) calls = observe (f);
  Client *a = client_open (f);
  Client *b = client_open (f);

  client_subscribe (a, "news");
  expect_calls (calls, "occupied news");
  client_subscribe (b, "news");
  expect_calls (calls, "");
  client_send (a, "{\"event\":\"pusher:unsubscribe\","
      "\"data\":{\"channel\":\"news\"}}");
  expect_calls (calls, "");
  client_report_closed (b);
  expect_calls (calls, "vacated news");
  legba_hub_set_observer (f->hub, NULL, NULL);
}

static void
test_members (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (GPtrArray) calls = observe (f);
  Client *a = client_open (f);
  Client *a2 = client_open (f);
  Client *b = client_open (f);

  client_join (a, "presence-room", "alice");
  expect_calls (calls, "occupied presence-room; added presence-room alice");
  /* Her second tab: the same member. */
  client_join (a2, "presence-room", "alice");
  expect_calls (calls, "");
  client_join (b, "presence-room", "bob");
  expect_calls (calls, "added presence-room bob");
  client_report_closed (a);
  expect_calls (calls, "");
  client_report_closed (a2);
  expect_calls (calls, "removed presence-room alice");
  client_report_closed (b);
  expect_calls (calls, "removed presence-room bob; vacated presence-room");
  legba_hub_set_observer (f->hub, NULL, NULL);
}

static void
test_client_events (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (GPtrArray) calls = observe (f);
  Client *a = client_open (f);
  Client *b = client_open (f);

  client_subscribe_private (a, "private-chat");
  client_subscribe_private (b, "private-chat");
  client_join (a, "presence-room", "alice");
  client_subscribe (a, "news");
  expect_calls (calls, "occupied private-chat; occupied presence-room; "
      "added presence-room alice; occupied news");

  client_send (a, "{\"event\":\"client-typing\",\"channel\":"
      "\"private-chat\",\"data\":{\"on\":true}}");
  expect_calls (calls, "client private-chat client-typing {\"on\":true} "
      "SOCKET (null)");
  client_send (a, "{\"event\":\"client-wave\",\"channel\":"
      "\"presence-room\",\"data\":\"hi\"}");
  expect_calls (calls, "client presence-room client-wave \"hi\" SOCKET "
      "alice");
  /* Refused client events are not observed. */
  client_send (a, "{\"event\":\"client-x\",\"channel\":\"news\","
      "\"data\":{}}");
  expect_calls (calls, "");
  legba_hub_set_observer (f->hub, NULL, NULL);
}

/* What other instances did: one call per transition of the cluster. */
static void
test_cluster (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (GPtrArray) calls = observe (f);
  Client *a = client_open (f);

  legba_hub_cluster_subscriptions (f->hub, f->app, "news", 2);
  expect_calls (calls, "occupied news");
  client_subscribe (a, "news");
  legba_hub_cluster_subscriptions (f->hub, f->app, "news", -2);
  expect_calls (calls, "");
  client_report_closed (a);
  expect_calls (calls, "vacated news");
  /* An unbalanced decrement of an unknown channel: nothing. */
  legba_hub_cluster_subscriptions (f->hub, f->app, "gone", -1);
  expect_calls (calls, "");

  legba_hub_cluster_member (f->hub, f->app, "presence-far", "far", NULL, TRUE);
  legba_hub_cluster_subscriptions (f->hub, f->app, "presence-far", 1);
  expect_calls (calls, "occupied presence-far; added presence-far far");
  legba_hub_cluster_member (f->hub, f->app, "presence-far", "far", NULL, TRUE);
  legba_hub_cluster_member (f->hub, f->app, "presence-far", "far", NULL, FALSE);
  expect_calls (calls, "");
  legba_hub_cluster_member (f->hub, f->app, "presence-far", "far", NULL, FALSE);
  expect_calls (calls, "removed presence-far far");
  legba_hub_cluster_subscriptions (f->hub, f->app, "presence-far", -1);
  expect_calls (calls, "vacated presence-far");
  legba_hub_set_observer (f->hub, NULL, NULL);
}

/* An app that counts subscriptions: the cluster's count of a channel at
 * the tick when it changed, once per tick whatever came and went, 0 once
 * vacated; presence channels and apps that do not count, never. */
static void
test_subscription_count (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (GPtrArray) calls = observe (f);
  Client *a = client_open (f);
  Client *b = client_open (f);
  Client *c = client_open (f);
  Client *d = client_open (f);

  client_subscribe (a, "news");
  legba_hub_tick (f->hub);
  expect_calls (calls, "occupied news");

  legba_hub_app_set_subscription_count (f->app, TRUE);
  client_subscribe (b, "news");
  expect_calls (calls, "");
  legba_hub_tick (f->hub);
  expect_calls (calls, "count news 2");
  legba_hub_tick (f->hub);
  expect_calls (calls, "");

  client_subscribe (c, "news");
  client_report_closed (b);
  legba_hub_cluster_subscriptions (f->hub, f->app, "news", 3);
  legba_hub_tick (f->hub);
  expect_calls (calls, "count news 5");

  client_join (d, "presence-room", "dan");
  legba_hub_cluster_subscriptions (f->hub, f->app, "news", -3);
  client_report_closed (c);
  client_report_closed (d);
  legba_hub_tick (f->hub);
  expect_calls (calls, "occupied presence-room; added presence-room dan; "
      "removed presence-room dan; vacated presence-room; count news 1");

  client_report_closed (a);
  expect_calls (calls, "vacated news");
  legba_hub_tick (f->hub);
  expect_calls (calls, "count news 0");
  legba_hub_set_observer (f->hub, NULL, NULL);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/hub/observer/occupied-vacated", test_occupied_vacated);
  g_test_add_func ("/hub/observer/members", test_members);
  g_test_add_func ("/hub/observer/client-events", test_client_events);
  g_test_add_func ("/hub/observer/cluster", test_cluster);
  g_test_add_func ("/hub/observer/subscription-count", test_subscription_count);
  return g_test_run ();
}
