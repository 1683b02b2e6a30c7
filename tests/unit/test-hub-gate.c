/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The hub's gate (what SFU rooms use): a presence subscription it holds is
 * neither a member nor answered until the gate accepts it (then
 * member_added to the others, and to that socket only the gate's event
 * then subscription_succeeded) or refuses it (a subscription_error, no member); a
 * connection that closes or unsubscribes meanwhile is forgotten; the gate
 * hears of members leaving and of the channel vacated; it reads the
 * members of the whole cluster, and its notices go to the relay and come
 * from it.
 */
#include "hub-fixture.h"

#define HELD "presence-legba.held"

typedef struct
{
  GPtrArray *admitted;          /* "socket_id user_id user_info" */
  GPtrArray *left;              /* "channel user_id" */
  GPtrArray *vacated;           /* channel */
  GPtrArray *notices;           /* channel */
  GPtrArray *remote;            /* "channel user_id": joined elsewhere */
} Gate;

static gboolean
gate_admit (LegbaHubApp * app, const char *channel, const char *socket_id,
    const char *user_id, const char *user_info, gpointer user_data)
{
  Gate *gate = user_data;

  if (strcmp (channel, HELD) != 0)
    return FALSE;
  g_ptr_array_add (gate->admitted, g_strdup_printf ("%s %s %s", socket_id,
          user_id, user_info ? user_info : "(null)"));
  return TRUE;
}

static void
gate_left (LegbaHubApp * app, const char *channel, const char *user_id,
    gpointer user_data)
{
  Gate *gate = user_data;

  g_ptr_array_add (gate->left, g_strdup_printf ("%s %s", channel, user_id));
}

static void
gate_vacated (LegbaHubApp * app, const char *channel, gpointer user_data)
{
  Gate *gate = user_data;

  g_ptr_array_add (gate->vacated, g_strdup (channel));
}

static void
gate_notice (LegbaHubApp * app, const char *channel, gpointer user_data)
{
  Gate *gate = user_data;

  g_ptr_array_add (gate->notices, g_strdup (channel));
}

static void
gate_remote_joined (LegbaHubApp * app, const char *channel,
    const char *user_id, gpointer user_data)
{
  Gate *gate = user_data;

  g_ptr_array_add (gate->remote, g_strdup_printf ("%s %s", channel, user_id));
}

static const LegbaHubGate gate_callbacks = {
  gate_admit, gate_left, gate_vacated, gate_notice, gate_remote_joined
};

static Gate *
gate_install (Fixture * f)
{
  Gate *gate = g_new0 (Gate, 1);

  gate->admitted = g_ptr_array_new_with_free_func (g_free);
  gate->left = g_ptr_array_new_with_free_func (g_free);
  gate->vacated = g_ptr_array_new_with_free_func (g_free);
  gate->notices = g_ptr_array_new_with_free_func (g_free);
  gate->remote = g_ptr_array_new_with_free_func (g_free);
  legba_hub_set_gate (f->hub, &gate_callbacks, gate);
  return gate;
}

static void
gate_free (Gate * gate)
{
  g_ptr_array_unref (gate->admitted);
  g_ptr_array_unref (gate->left);
  g_ptr_array_unref (gate->vacated);
  g_ptr_array_unref (gate->notices);
  g_ptr_array_unref (gate->remote);
  g_free (gate);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Gate, gate_free);

static void
send_join (Client * c, const char *channel, const char *user_id)
{
  g_autofree char *channel_data = g_strdup_printf ("{\"user_id\":\"%s\","
      "\"user_info\":{\"protocol\":\"legba-room/2\"}}", user_id);

  client_send_presence (c, channel, channel_data);
}

/* Joins HELD through the gate, accepted at once. */
static void
join_held (Fixture * f, Client * c, const char *user_id)
{
  send_join (c, HELD, user_id);
  g_assert_true (legba_hub_gate_accept (f->hub, c->socket_id, HELD, NULL,
          NULL));
  client_skip (c, "pusher_internal:subscription_succeeded", HELD);
  client_expect_nothing (c);
}

static void
test_accept (void)
{
  /* Freed after the hub, which may still tell it of members leaving */
  g_autoptr (Gate) gate = NULL;
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *a, *b;
  g_autofree char *expected = NULL;
  g_autofree char *users = NULL;
  g_autoptr (JsonNode) data = NULL;
  g_autoptr (JsonNode) event = NULL;

  gate = gate_install (f);
  a = client_open (f);
  b = client_open (f);
  send_join (a, HELD, "alice");
  g_assert_cmpuint (gate->admitted->len, ==, 1);
  expected = g_strdup_printf ("%s alice {\"protocol\":\"legba-room/2\"}",
      a->socket_id);
  g_assert_cmpstr (gate->admitted->pdata[0], ==, expected);
  g_clear_pointer (&expected, g_free);
  client_expect_nothing (a);
  g_assert_null (users_joined (f, HELD));
  g_assert_true (legba_hub_gate_accept (f->hub, a->socket_id, HELD, NULL,
          NULL));
  client_skip (a, "pusher_internal:subscription_succeeded", HELD);

  send_join (b, HELD, "bob");
  g_assert_cmpuint (gate->admitted->len, ==, 2);
  /* Held: neither answered nor a member. */
  client_expect_nothing (b);
  client_expect_nothing (a);
  users = users_joined (f, HELD);
  g_assert_cmpstr (users, ==, "alice");
  g_clear_pointer (&users, g_free);

  g_assert_true (legba_hub_gate_accept (f->hub, b->socket_id, HELD,
          "legba:topology", "{\"topology\":\"sfu\"}"));
  /* The gate's event first: the member knows the room before its
   * members. */
  event = client_expect (b, "legba:topology", HELD);
  g_assert_cmpstr (data_string (event, "topology"), ==, "sfu");
  data = client_expect (b, "pusher_internal:subscription_succeeded", HELD);
  client_expect_nothing (b);
  /* The others see a member, never the gate's event. */
  client_skip (a, "pusher_internal:member_added", HELD);
  client_expect_nothing (a);
  users = users_joined (f, HELD);
  g_assert_cmpstr (users, ==, "alice,bob");

  /* Answered once: a second answer finds nothing. */
  g_assert_false (legba_hub_gate_accept (f->hub, b->socket_id, HELD, NULL,
          NULL));
  g_assert_false (legba_hub_gate_refuse (f->hub, b->socket_id, HELD, "X",
          400, "no"));
  client_expect_nothing (b);
}

static void
test_refuse (void)
{
  /* Freed after the hub, which may still tell it of members leaving */
  g_autoptr (Gate) gate = NULL;
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *a, *b;
  g_autofree char *users = NULL;

  gate = gate_install (f);
  a = client_open (f);
  b = client_open (f);
  join_held (f, a, "alice");
  send_join (b, HELD, "bob");
  g_assert_true (legba_hub_gate_refuse (f->hub, b->socket_id, HELD,
          "LegbaTopology", 400, "not for you"));
  client_expect_refused (b, HELD, "LegbaTopology", 400);
  client_expect_nothing (a);
  users = users_joined (f, HELD);
  g_assert_cmpstr (users, ==, "alice");
  /* It may ask again. */
  send_join (b, HELD, "bob");
  g_assert_cmpuint (gate->admitted->len, ==, 3);
}

/* A connection gone, or its subscription withdrawn, while held: the
 * answer finds nothing and sends nothing. */
static void
test_forgotten (void)
{
  /* Freed after the hub, which may still tell it of members leaving */
  g_autoptr (Gate) gate = NULL;
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *a, *b;
  g_autofree char *socket_a = NULL;
  g_autofree char *frame = NULL;

  gate = gate_install (f);
  a = client_open (f);
  b = client_open (f);
  socket_a = g_strdup (a->socket_id);
  send_join (a, HELD, "alice");
  send_join (b, HELD, "bob");
  /* Asked again while held: one answer is for both. */
  send_join (b, HELD, "bob");
  g_assert_cmpuint (gate->admitted->len, ==, 2);

  client_report_closed (a);
  g_assert_false (legba_hub_gate_accept (f->hub, socket_a, HELD, NULL, NULL));

  frame = build_frame ("pusher:unsubscribe", "channel", HELD, NULL);
  client_send (b, frame);
  g_assert_false (legba_hub_gate_accept (f->hub, b->socket_id, HELD, NULL,
          NULL));
  g_assert_false (legba_hub_gate_refuse (f->hub, b->socket_id, HELD, "X",
          400, "no"));
  client_expect_nothing (b);
  g_assert_null (users_joined (f, HELD));
  g_assert_cmpuint (gate->vacated->len, ==, 0);
}

static void
test_left_and_vacated (void)
{
  /* Freed after the hub, which may still tell it of members leaving */
  g_autoptr (Gate) gate = NULL;
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *a, *a2, *b;

  gate = gate_install (f);
  a = client_open (f);
  a2 = client_open (f);
  b = client_open (f);
  join_held (f, a, "alice");
  join_held (f, a2, "alice");
  join_held (f, b, "bob");
  client_drop_frames (a);
  client_drop_frames (a2);

  /* One of alice's two sockets: she stays. */
  client_report_closed (a);
  g_assert_cmpuint (gate->left->len, ==, 0);
  client_report_closed (a2);
  g_assert_cmpuint (gate->left->len, ==, 1);
  g_assert_cmpstr (gate->left->pdata[0], ==, HELD " alice");
  g_assert_cmpuint (gate->vacated->len, ==, 0);
  client_report_closed (b);
  g_assert_cmpuint (gate->left->len, ==, 2);
  g_assert_cmpuint (gate->vacated->len, ==, 1);
  g_assert_cmpstr (gate->vacated->pdata[0], ==, HELD);
}

/* Channels the gate lets through, and a full channel, which refuses
 * before the gate is asked. */
static void
test_passed_and_full (void)
{
  LegbaLimits limits = default_limits ();
  g_autoptr (Gate) gate = NULL;
  g_autoptr (Fixture) f = NULL;
  Client *a, *b;

  limits.max_presence_members = 1;
  f = fixture_new (&limits);
  gate = gate_install (f);
  a = client_open (f);
  b = client_open (f);
  client_join (a, "presence-legba.mesh", "alice");
  g_assert_cmpuint (gate->admitted->len, ==, 0);

  join_held (f, a, "alice");
  send_join (b, HELD, "bob");
  client_expect_refused (b, HELD, "LimitReached", 403);
  g_assert_cmpuint (gate->admitted->len, ==, 1);
}

static void
list_member (const char *socket_id, const char *user_id,
    const char *user_info, gpointer user_data)
{
  g_ptr_array_add (user_data, g_strdup_printf ("%s %s %s", socket_id,
          user_id, user_info ? user_info : "(null)"));
}

/* The sockets subscribed to a presence channel, each with its member (what
 * an auto room's move to the SFU tells): not a subscription still held,
 * nor another channel's. */
static void
test_member_sockets (void)
{
  g_autoptr (Gate) gate = NULL;
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (GPtrArray) listed = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *a_line = NULL;
  g_autofree char *a2_line = NULL;
  Client *a, *a2, *b, *c;

  gate = gate_install (f);
  a = client_open (f);
  a2 = client_open (f);
  b = client_open (f);
  c = client_open (f);
  join_held (f, a, "alice");
  join_held (f, a2, "alice");
  send_join (b, HELD, "bob");
  client_join (c, "presence-legba.other", "carol");
  legba_hub_foreach_member_socket (f->hub, f->app, HELD, list_member, listed);
  g_ptr_array_sort (listed, (GCompareFunc) g_strcmp0);
  a_line = g_strdup_printf ("%s alice {\"protocol\":\"legba-room/2\"}",
      a->socket_id);
  a2_line = g_strdup_printf ("%s alice {\"protocol\":\"legba-room/2\"}",
      a2->socket_id);
  g_assert_cmpuint (listed->len, ==, 2);
  g_assert_true (g_ptr_array_find_with_equal_func (listed, a_line,
          g_str_equal, NULL));
  g_assert_true (g_ptr_array_find_with_equal_func (listed, a2_line,
          g_str_equal, NULL));
  /* the held one once accepted */
  g_assert_true (legba_hub_gate_accept (f->hub, b->socket_id, HELD, NULL,
          NULL));
  g_ptr_array_set_size (listed, 0);
  legba_hub_foreach_member_socket (f->hub, f->app, HELD, list_member, listed);
  g_assert_cmpuint (listed->len, ==, 3);
  g_ptr_array_set_size (listed, 0);
  legba_hub_foreach_member_socket (f->hub, f->app, "presence-legba.none",
      list_member, listed);
  g_assert_cmpuint (listed->len, ==, 0);
}

static void
list_cluster_member (const char *user_id, const char *user_info,
    gpointer user_data)
{
  g_ptr_array_add (user_data, g_strdup_printf ("%s %s", user_id,
          user_info ? user_info : "(null)"));
}

static char *
cluster_members (Fixture * f, const char *channel)
{
  g_autoptr (GPtrArray) listed = g_ptr_array_new_with_free_func (g_free);

  legba_hub_foreach_member (f->hub, f->app, channel, list_cluster_member,
      listed);
  g_ptr_array_add (listed, NULL);
  return g_strjoinv (",", (char **) listed->pdata);
}

/* The members of the whole cluster (an auto room's size), in join order:
 * those of other instances too, each user once, not a subscription the
 * gate still holds. */
static void
test_cluster_members (void)
{
  g_autoptr (Gate) gate = NULL;
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autofree char *first = NULL;
  g_autofree char *all = NULL;
  g_autofree char *after = NULL;
  g_autofree char *none = NULL;
  Client *a, *a2, *b;

  gate = gate_install (f);
  a = client_open (f);
  a2 = client_open (f);
  b = client_open (f);
  join_held (f, a, "alice");
  legba_hub_cluster_member (f->hub, f->app, HELD, "remote", "{\"n\":1}", TRUE);
  /* a second instance with the same user: still one member */
  legba_hub_cluster_member (f->hub, f->app, HELD, "remote", "{\"n\":1}", TRUE);
  join_held (f, a2, "alice");
  send_join (b, HELD, "bob");
  first = cluster_members (f, HELD);
  g_assert_cmpstr (first, ==, "alice {\"protocol\":\"legba-room/2\"},"
      "remote {\"n\":1}");
  g_assert_true (legba_hub_gate_accept (f->hub, b->socket_id, HELD, NULL,
          NULL));
  legba_hub_cluster_member (f->hub, f->app, HELD, "far", NULL, TRUE);
  all = cluster_members (f, HELD);
  g_assert_cmpstr (all, ==, "alice {\"protocol\":\"legba-room/2\"},"
      "remote {\"n\":1},bob {\"protocol\":\"legba-room/2\"},far (null)");
  legba_hub_cluster_member (f->hub, f->app, HELD, "remote", NULL, FALSE);
  legba_hub_cluster_member (f->hub, f->app, HELD, "remote", NULL, FALSE);
  after = cluster_members (f, HELD);
  g_assert_cmpstr (after, ==, "alice {\"protocol\":\"legba-room/2\"},"
      "bob {\"protocol\":\"legba-room/2\"},far (null)");
  none = cluster_members (f, "presence-legba.none");
  g_assert_cmpstr (none, ==, "");
}

/* The gate hears of a user joining through another instance when it
 * joins the cluster (again once it left it): not of a second instance
 * having it, nor of a member of this one. */
static void
test_remote_joined (void)
{
  g_autoptr (Gate) gate = NULL;
  g_autoptr (Fixture) f = fixture_new (NULL);
  Client *a;

  gate = gate_install (f);
  a = client_open (f);
  join_held (f, a, "alice");
  legba_hub_cluster_member (f->hub, f->app, HELD, "remote", NULL, TRUE);
  legba_hub_cluster_member (f->hub, f->app, HELD, "remote", NULL, TRUE);
  /* alice through another instance too */
  legba_hub_cluster_member (f->hub, f->app, HELD, "alice", NULL, TRUE);
  g_assert_cmpuint (gate->remote->len, ==, 1);
  g_assert_cmpstr (gate->remote->pdata[0], ==, HELD " remote");
  legba_hub_cluster_member (f->hub, f->app, HELD, "remote", NULL, FALSE);
  legba_hub_cluster_member (f->hub, f->app, HELD, "remote", NULL, FALSE);
  legba_hub_cluster_member (f->hub, f->app, HELD, "remote", NULL, TRUE);
  g_assert_cmpuint (gate->remote->len, ==, 2);
  g_assert_cmpstr (gate->remote->pdata[1], ==, HELD " remote");
}

typedef struct
{
  GPtrArray *sent;              /* "APP_ID CHANNEL" */
} Relay;

static void
relay_gate_notice (LegbaHubApp * app, const char *channel, gpointer user_data)
{
  Relay *relay = user_data;

  g_ptr_array_add (relay->sent, g_strdup_printf ("%s %s",
          legba_hub_app_get_id (app), channel));
}

/* A gate's notice goes to the relay (nothing without one); one from
 * another instance, to the gate. */
static void
test_notices (void)
{
  g_autoptr (Gate) gate = NULL;
  g_autoptr (Fixture) f = fixture_new (NULL);
  LegbaHubCluster cluster = { 0, };
  Relay relay = { g_ptr_array_new_with_free_func (g_free) };

  gate = gate_install (f);
  legba_hub_gate_notify (f->hub, f->app, HELD);
  cluster.gate_notice = relay_gate_notice;
  legba_hub_set_cluster (f->hub, &cluster, &relay);
  legba_hub_gate_notify (f->hub, f->app, HELD);
  g_assert_cmpuint (relay.sent->len, ==, 1);
  g_assert_cmpstr (relay.sent->pdata[0], ==, APP_ID " " HELD);
  g_assert_cmpuint (gate->notices->len, ==, 0);

  legba_hub_cluster_gate_notice (f->hub, f->app, HELD);
  g_assert_cmpuint (gate->notices->len, ==, 1);
  g_assert_cmpstr (gate->notices->pdata[0], ==, HELD);
  /* not sent back to the relay */
  g_assert_cmpuint (relay.sent->len, ==, 1);
  legba_hub_set_cluster (f->hub, NULL, NULL);
  g_ptr_array_unref (relay.sent);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/hub-gate/accept", test_accept);
  g_test_add_func ("/hub-gate/refuse", test_refuse);
  g_test_add_func ("/hub-gate/forgotten", test_forgotten);
  g_test_add_func ("/hub-gate/left-and-vacated", test_left_and_vacated);
  g_test_add_func ("/hub-gate/passed-and-full", test_passed_and_full);
  g_test_add_func ("/hub-gate/member-sockets", test_member_sockets);
  g_test_add_func ("/hub-gate/cluster-members", test_cluster_members);
  g_test_add_func ("/hub-gate/notices", test_notices);
  g_test_add_func ("/hub-gate/remote-joined", test_remote_joined);
  return g_test_run ();
}
