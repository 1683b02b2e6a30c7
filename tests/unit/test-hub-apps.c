/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Apps changed while the hub runs: a removed app's connections are closed
 * with 4001 and its key refused, the other apps' connections keep going;
 * a new secret and new limits apply to what comes next.
 */
#include "hub-fixture.h"

#define OTHER_ID "2"
#define OTHER_KEY "other-key"

static void
test_remove (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (GPtrArray) apps = NULL;
  const char *channels[] = { "room", NULL };
  Client *gone, *also_gone, *kept, *refused;

  g_assert_true (legba_hub_add_app (f->hub, OTHER_ID, OTHER_KEY, "s2", NULL));
  gone = client_open (f);
  also_gone = client_open (f);
  client_subscribe (gone, "room");
  client_subscribe (also_gone, "room");
  kept = client_open_full (f, OTHER_KEY, "7");
  client_skip (kept, "pusher:connection_established", NULL);
  client_subscribe (kept, "room");

  legba_hub_remove_app (f->hub, f->app);
  client_expect_error (gone, LEGBA_PUSHER_APP_NOT_FOUND);
  client_expect_closed (gone, LEGBA_PUSHER_APP_NOT_FOUND);
  client_expect_error (also_gone, LEGBA_PUSHER_APP_NOT_FOUND);
  client_expect_closed (also_gone, LEGBA_PUSHER_APP_NOT_FOUND);
  client_expect_nothing (kept);
  g_assert_false (kept->close_requested);

  /* Neither the API nor new sockets find it; the other app works on. */
  g_assert_null (legba_hub_find_app_by_id (f->hub, APP_ID));
  g_assert_null (legba_hub_find_app_by_key (f->hub, KEY));
  apps = legba_hub_get_apps (f->hub);
  g_assert_cmpuint (apps->len, ==, 1);
  refused = client_open_full (f, KEY, "7");
  g_assert_null (refused->conn);
  client_report_closed (gone);
  client_report_closed (also_gone);
  g_assert_true (legba_hub_publish (f->hub, legba_hub_find_app_by_id (f->hub,
              OTHER_ID), channels, "ev", "{}", NULL, NULL));
  client_skip (kept, "ev", "room");

  /* Its id and key are free again. */
  g_assert_true (legba_hub_add_app (f->hub, APP_ID, KEY, "new", NULL));
}

static void
test_secret_and_limits (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  LegbaLimits limits = default_limits ();
  Client *c = client_open (f);
  g_autofree char *frame = NULL, *old_auth = NULL, *new_auth = NULL;
  g_autofree char *old_frame = NULL, *new_frame = NULL;

  client_subscribe_private (c, "private-room");
  legba_hub_app_set_secret (f->app, "another-secret");
  g_assert_cmpstr (legba_hub_app_get_secret (f->app), ==, "another-secret");
  /* Signed with the old secret: refused now; with the new one, taken. */
  old_auth = legba_auth_channel_sign (KEY, SECRET, c->socket_id,
      "private-other", NULL);
  new_auth = legba_auth_channel_sign (KEY, "another-secret", c->socket_id,
      "private-other", NULL);
  old_frame = build_frame ("pusher:subscribe", "channel", "private-other",
      "auth", old_auth, NULL);
  new_frame = build_frame ("pusher:subscribe", "channel", "private-other",
      "auth", new_auth, NULL);
  client_send (c, old_frame);
  client_expect_refused (c, "private-other", "AuthError", 401);
  client_send (c, new_frame);
  client_skip (c, "pusher_internal:subscription_succeeded", "private-other");

  /* One client event a second from now on, on the socket already open. */
  limits.client_events_per_second = 1;
  legba_hub_app_set_limits (f->app, &limits);
  frame = g_strdup ("{\"event\":\"client-a\",\"channel\":\"private-room\","
      "\"data\":{}}");
  client_send (c, frame);
  client_send (c, frame);
  client_expect_error (c, 4301);
  g_assert_false (c->close_requested);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/hub/apps/remove", test_remove);
  g_test_add_func ("/hub/apps/secret-and-limits", test_secret_and_limits);
  return g_test_run ();
}
