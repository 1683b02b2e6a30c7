/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * auto rooms at the gate (docs/server.md, "SFU rooms"), without a Janus:
 * a room is a mesh, its members answered at once and told no topology,
 * while it has at most N members; the member that would make it N + 1 is
 * held while the room moves to the SFU; a member without legba-room/2
 * keeps it a mesh. The members counted are the room's whole presence,
 * those of a cluster's other instances included. (The move itself, with a
 * real Janus, and a Janus that cannot be reached:
 * tests/integration/test-room-sfu-auto.c; across two servers sharing a
 * Redis, its /room/sfu-auto/cluster.)
 */
#include "hub-fixture.h"

#include <legba/server/legba-sfu.h>

#define ROOM "presence-legba.room"

/* An SFU coordinator whose rooms are auto:max, on a Janus that these
 * tests never reach. */
static LegbaSfu *
sfu_new (Fixture * f, guint max)
{
  const char *urls[] = { "http://127.0.0.1:9/janus", NULL };
  const char *ws_urls[] = { "ws://127.0.0.1:9/", NULL };
  LegbaSfuSettings settings = { 0, };

  settings.janus_urls = urls;
  settings.janus_ws_urls = ws_urls;
  settings.rule.topology = LEGBA_TOPOLOGY_AUTO;
  settings.rule.auto_max = max;
  return legba_sfu_new (f->hub, &settings);
}

/* Joins ROOM saying legba-room/2 (or nothing of the protocol). */
static void
send_join (Client * c, const char *user_id, gboolean v2)
{
  g_autofree char *channel_data = g_strdup_printf ("{\"user_id\":\"%s\","
      "\"user_info\":{%s}}", user_id,
      v2 ? "\"protocol\":\"legba-room/2\"" : "");

  client_send_presence (c, ROOM, channel_data);
}

/* Joined at once, told no topology: a mesh. */
static void
expect_mesh (Client * c)
{
  client_skip (c, "pusher_internal:subscription_succeeded", ROOM);
  client_expect_nothing (c);
}

static void
test_mesh_up_to_n (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  LegbaSfu *sfu = sfu_new (f, 2);
  Client *a = client_open (f);
  Client *b = client_open (f);
  Client *b2 = client_open (f);
  Client *c = client_open (f);

  send_join (a, "alice", TRUE);
  expect_mesh (a);
  send_join (b, "bob", TRUE);
  expect_mesh (b);
  /* a second socket of a member makes no new member */
  send_join (b2, "bob", TRUE);
  expect_mesh (b2);
  client_drop_frames (a);
  client_drop_frames (b);
  /* the third: held while the room moves (here, for ever) */
  send_join (c, "carol", TRUE);
  client_expect_nothing (c);
  client_expect_nothing (a);
  legba_sfu_free (sfu);
}

static void
test_old_client (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  LegbaSfu *sfu = sfu_new (f, 1);
  Client *a = client_open (f);
  Client *b = client_open (f);
  Client *c = client_open (f);

  send_join (a, "alice", TRUE);
  expect_mesh (a);
  /* past the size, but bob cannot join an SFU room */
  send_join (b, "bob", FALSE);
  expect_mesh (b);
  /* and while he is in it, nobody moves it */
  send_join (c, "carol", TRUE);
  expect_mesh (c);
  legba_sfu_free (sfu);
}

/* Another instance's members count: with auto:2, alice here and bob
 * there, carol is the third. */
static void
test_cluster_count (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  LegbaSfu *sfu = sfu_new (f, 2);
  Client *a = client_open (f);
  Client *c = client_open (f);

  send_join (a, "alice", TRUE);
  expect_mesh (a);
  legba_hub_cluster_member (f->hub, f->app, ROOM, "bob",
      "{\"protocol\":\"legba-room/2\"}", TRUE);
  client_skip (a, "pusher_internal:member_added", ROOM);
  send_join (c, "carol", TRUE);
  client_expect_nothing (c);
  client_expect_nothing (a);
  legba_sfu_free (sfu);
}

/* A member on another instance without legba-room/2 keeps the room a
 * mesh too. */
static void
test_cluster_old_client (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  LegbaSfu *sfu = sfu_new (f, 1);
  Client *a = client_open (f);
  Client *c = client_open (f);

  legba_hub_cluster_member (f->hub, f->app, ROOM, "bob", "{}", TRUE);
  send_join (a, "alice", TRUE);
  expect_mesh (a);
  client_drop_frames (a);
  send_join (c, "carol", TRUE);
  expect_mesh (c);
  legba_sfu_free (sfu);
}

/* Whether the SFU's metrics have line. */
static gboolean
metrics_have (LegbaSfu * sfu, const char *line)
{
  g_autoptr (GString) out = g_string_new ("\n");
  g_autofree char *wanted = g_strdup_printf ("\n%s\n", line);

  legba_sfu_render_metrics (sfu, out);
  return strstr (out->str, wanted) != NULL;
}

static gboolean
deadline_reached (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Iterates the main context until the SFU's metrics have line, for at
 * most 10 s (its Janus refuses connections: it answers at once). */
static void
wait_metrics (LegbaSfu * sfu, const char *line)
{
  gboolean expired = FALSE;
  guint timer = g_timeout_add_seconds (10, deadline_reached, &expired);

  while (!metrics_have (sfu, line) && !expired)
    g_main_context_iteration (NULL, TRUE);
  if (!expired)
    g_source_remove (timer);
  g_assert_true (metrics_have (sfu, line));
}

/* alice and bob here, then carol through another instance, which counted
 * the room without one of them (both joining at the same moment): the
 * room, past its size, moves all the same, from here (its Janus cannot be
 * reached: it stays a mesh, and says so). A member of another instance
 * that does not speak legba-room/2 moves nothing. */
static void
test_cluster_late_count (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  LegbaSfu *sfu = sfu_new (f, 2);
  Client *a = client_open (f);
  Client *b = client_open (f);

  send_join (a, "alice", TRUE);
  expect_mesh (a);
  send_join (b, "bob", TRUE);
  expect_mesh (b);
  client_drop_frames (a);
  g_assert_true (metrics_have (sfu, "legba_sfu_auto_stays_mesh_total"
          "{reason=\"sfu-unavailable\"} 0"));
  legba_hub_cluster_member (f->hub, f->app, ROOM, "carol",
      "{\"protocol\":\"legba-room/2\"}", TRUE);
  wait_metrics (sfu, "legba_sfu_auto_stays_mesh_total"
      "{reason=\"sfu-unavailable\"} 1");
  client_skip (a, "pusher_internal:member_added", ROOM);
  client_expect_nothing (a);

  legba_hub_cluster_member (f->hub, f->app, ROOM, "dave", "{}", TRUE);
  client_skip (a, "pusher_internal:member_added", ROOM);
  g_assert_true (metrics_have (sfu, "legba_sfu_auto_stays_mesh_total"
          "{reason=\"sfu-unavailable\"} 1"));
  g_assert_true (metrics_have (sfu, "legba_sfu_auto_stays_mesh_total"
          "{reason=\"old-client\"} 0"));
  legba_sfu_free (sfu);
}

static void
test_parse (void)
{
  LegbaTopology topology;
  guint max = 99;
  g_autoptr (GError) error = NULL;

  g_assert_true (legba_topology_parse_full ("auto", &topology, &max, NULL));
  g_assert_cmpint (topology, ==, LEGBA_TOPOLOGY_AUTO);
  g_assert_cmpuint (max, ==, 4);
  g_assert_true (legba_topology_parse_full ("auto:1000", &topology, &max,
          NULL));
  g_assert_cmpuint (max, ==, 1000);
  g_assert_true (legba_topology_parse_full ("sfu", &topology, &max, NULL));
  g_assert_cmpint (topology, ==, LEGBA_TOPOLOGY_SFU);
  g_assert_cmpuint (max, ==, 0);
  for (guint i = 0; i < 6; i++) {
    const char *bad[] = { "auto:0", "auto:1001", "auto:", "auto:+2",
      "auto:2x", "automatic"
    };

    g_assert_false (legba_topology_parse_full (bad[i], &topology, &max,
            &error));
    g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT);
    g_clear_error (&error);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/hub-sfu-auto/mesh-up-to-n", test_mesh_up_to_n);
  g_test_add_func ("/hub-sfu-auto/old-client", test_old_client);
  g_test_add_func ("/hub-sfu-auto/cluster-count", test_cluster_count);
  g_test_add_func ("/hub-sfu-auto/cluster-old-client", test_cluster_old_client);
  g_test_add_func ("/hub-sfu-auto/cluster-late-count", test_cluster_late_count);
  g_test_add_func ("/hub-sfu-auto/parse", test_parse);
  return g_test_run ();
}
