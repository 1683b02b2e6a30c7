/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub in a cluster (docs/scale-out.md), without Redis: what the hub
 * hands the relay (LegbaHubCluster callbacks, recorded here) and what it
 * does with what other instances did (legba_hub_cluster_*), through the
 * fake transport of hub-fixture.h. Also the relay's Redis URLs and
 * instance ids.
 */
#include "hub-fixture.h"

#include <legba/server/legba-relay.h>

/* ---- A recording relay ---- */

typedef struct
{
  Fixture *f;
  GPtrArray *calls;             /* "event CHANNEL EXCEPT FRAME", ... */
} Recorder;

static void
record (Recorder * r, char *call)
{
  g_ptr_array_add (r->calls, call);
}

static void
on_event (LegbaHubApp * app, const char *channel, GBytes * frame,
    const char *except, gpointer user_data)
{
  record (user_data, g_strdup_printf ("event %s %s %.*s", channel,
          except ? except : "-", (int) g_bytes_get_size (frame),
          (const char *) g_bytes_get_data (frame, NULL)));
}

static void
on_member (LegbaHubApp * app, const char *channel, const char *user_id,
    const char *user_info, gboolean present, gpointer user_data)
{
  record (user_data, g_strdup_printf ("member %s %s %s %s", channel, user_id,
          present ? "present" : "absent", user_info ? user_info : "-"));
}

static void
on_subscriptions (LegbaHubApp * app, const char *channel, guint count,
    gpointer user_data)
{
  record (user_data, g_strdup_printf ("subscriptions %s %u", channel, count));
}

static void
on_terminate (LegbaHubApp * app, const char *user_id, gpointer user_data)
{
  record (user_data, g_strdup_printf ("terminate %s", user_id));
}

static const LegbaHubCluster recording = {
  on_event, on_member, on_subscriptions, on_terminate,
};

static Recorder *
recorder_attach (Fixture * f)
{
  Recorder *r = g_new0 (Recorder, 1);

  r->f = f;
  r->calls = g_ptr_array_new_with_free_func (g_free);
  legba_hub_set_cluster (f->hub, &recording, r);
  return r;
}

/* Detaches from the hub first: freeing the fixture closes connections. */
static void
recorder_free (Recorder * r)
{
  legba_hub_set_cluster (r->f->hub, NULL, NULL);
  g_ptr_array_unref (r->calls);
  g_free (r);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Recorder, recorder_free);

/* The calls so far, joined with "\n", and forgotten. */
static char *
recorder_take (Recorder * r)
{
  char *joined;

  g_ptr_array_add (r->calls, NULL);
  joined = g_strjoinv ("\n", (char **) r->calls->pdata);
  g_ptr_array_set_size (r->calls, 0);
  return joined;
}

#define assert_calls(r, expected) G_STMT_START { \
    g_autofree char *calls_ = recorder_take (r); \
    g_assert_cmpstr (calls_, ==, (expected)); \
  } G_STMT_END

/* ---- What the hub hands the relay ---- */

static void
test_events_relayed (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (Recorder) r = recorder_attach (f);
  g_autoptr (GError) error = NULL;
  Client *a = client_open (f);
  Client *b = client_open (f);

  client_subscribe_private (a, "private-room");
  client_subscribe_private (b, "private-room");
  client_signin (b, "bob");
  g_ptr_array_set_size (r->calls, 0);

  /* A client event: once, as the frame its local subscribers got. */
  client_send (a, "{\"event\":\"client-hi\",\"channel\":\"private-room\","
      "\"data\":{\"n\":1}}");
  client_skip (b, "client-hi", "private-room");
  assert_calls (r, "event private-room - {\"event\":\"client-hi\","
      "\"channel\":\"private-room\",\"data\":{\"n\":1}}");

  /* An HTTP API publish, with the socket_id to leave out elsewhere too. */
  g_assert_true (publish (f, "private-room", "news", "{}", "9.9", &error));
  g_assert_no_error (error);
  client_skip (a, "news", "private-room");
  client_skip (b, "news", "private-room");
  assert_calls (r, "event private-room 9.9 {\"event\":\"news\","
      "\"channel\":\"private-room\",\"data\":\"{}\"}");

  /* To a user, even one signed in on no connection here. */
  g_assert_cmpuint (legba_hub_send_to_user (f->hub, f->app, "carol", "ev",
          "{}"), ==, 0);
  assert_calls (r, "event #server-to-user-carol - {\"event\":\"ev\","
      "\"channel\":\"#server-to-user-carol\",\"data\":\"{}\"}");

  g_assert_cmpuint (legba_hub_terminate_user (f->hub, f->app, "bob"), ==, 1);
  assert_calls (r, "terminate bob");
}

static void
test_member_hooks (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (Recorder) r = recorder_attach (f);
  Client *a1 = client_open (f);
  Client *a2 = client_open (f);
  Client *plain = client_open (f);

  client_join (a1, "presence-room", "alice");
  assert_calls (r, "member presence-room alice present {\"name\":\"alice\"}\n"
      "subscriptions presence-room 1");
  /* Her second connection here: the count changes, not the membership. */
  client_join (a2, "presence-room", "alice");
  assert_calls (r, "subscriptions presence-room 2");
  client_subscribe (plain, "news");
  assert_calls (r, "subscriptions news 1");

  client_report_closed (a1);
  assert_calls (r, "subscriptions presence-room 1");
  client_report_closed (a2);
  assert_calls (r, "subscriptions presence-room 0\n"
      "member presence-room alice absent -");
  client_report_closed (plain);
  assert_calls (r, "subscriptions news 0");

  /* Without a relay, nothing is recorded. */
  legba_hub_set_cluster (f->hub, NULL, NULL);
  client_join (client_open (f), "presence-room", "bob");
  g_assert_cmpuint (r->calls->len, ==, 0);
}

/* ---- What other instances did ---- */

static void
test_remote_deliver (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (Recorder) r = recorder_attach (f);
  static const char text[] = "{\"event\":\"ev\",\"channel\":\"news\","
      "\"data\":\"{}\"}";
  g_autoptr (GBytes) frame = g_bytes_new_static (text, strlen (text));
  Client *a = client_open (f);
  Client *b = client_open (f);

  client_subscribe (a, "news");
  client_subscribe (b, "news");
  g_ptr_array_set_size (r->calls, 0);

  g_assert_cmpuint (legba_hub_cluster_deliver (f->hub, f->app, "news", frame,
          NULL), ==, 2);
  client_skip (a, "ev", "news");
  client_skip (b, "ev", "news");
  g_assert_cmpuint (legba_hub_cluster_deliver (f->hub, f->app, "news", frame,
          a->socket_id), ==, 1);
  client_expect_nothing (a);
  client_skip (b, "ev", "news");
  /* Not handed to the relay again. */
  g_assert_cmpuint (r->calls->len, ==, 0);
}

/* Members of other instances: listed, announced once per user of the
 * cluster, counted against the cap. */
static void
test_remote_members (void)
{
  LegbaLimits limits = default_limits ();
  g_autoptr (Fixture) f = NULL;
  g_autoptr (Recorder) r = NULL;
  g_autoptr (JsonNode) presence = NULL;
  g_autoptr (JsonNode) event = NULL;
  g_autofree char *ids = NULL;
  g_autofree char *users = NULL;
  LegbaHubChannelInfo info;
  Client *watcher, *bob, *full;

  limits.max_presence_members = 3;
  f = fixture_new (&limits);
  r = recorder_attach (f);
  watcher = client_open (f);
  client_join (watcher, "presence-room", "watcher");

  legba_hub_cluster_member (f->hub, f->app, "presence-room", "remote",
      "{\"name\":\"far\"}", TRUE);
  event = client_expect (watcher, "pusher_internal:member_added",
      "presence-room");
  g_assert_cmpstr (data_string (event, "user_id"), ==, "remote");
  /* The same user on a second instance: not announced again. */
  legba_hub_cluster_member (f->hub, f->app, "presence-room", "remote", NULL,
      TRUE);
  client_expect_nothing (watcher);

  /* A newcomer here sees her; bob's own join is relayed, counted once. */
  bob = client_open (f);
  presence = client_join_presence (bob, "presence-room", "bob");
  ids = presence_ids (presence);
  g_assert_cmpstr (ids, ==, "watcher,remote,bob");
  client_skip (watcher, "pusher_internal:member_added", "presence-room");
  g_assert_true (legba_hub_get_channel (f->hub, f->app, "presence-room",
          &info));
  g_assert_cmpuint (info.user_count, ==, 3);
  users = users_joined (f, "presence-room");
  g_assert_cmpstr (users, ==, "watcher,remote,bob");

  /* The cap counts the cluster's members. */
  full = client_open (f);
  client_send_presence (full, "presence-room",
      "{\"user_id\":\"late\",\"user_info\":{}}");
  client_expect_refused (full, "presence-room", "LimitReached", 403);

  /* Bob, also elsewhere: his local leave removes nothing. */
  legba_hub_cluster_member (f->hub, f->app, "presence-room", "bob", NULL, TRUE);
  client_report_closed (bob);
  client_expect_nothing (watcher);
  legba_hub_cluster_member (f->hub, f->app, "presence-room", "bob", NULL,
      FALSE);
  g_clear_pointer (&event, json_node_unref);
  event = client_expect (watcher, "pusher_internal:member_removed",
      "presence-room");
  g_assert_cmpstr (data_string (event, "user_id"), ==, "bob");

  /* The remote user leaves one instance, then the other. */
  legba_hub_cluster_member (f->hub, f->app, "presence-room", "remote", NULL,
      FALSE);
  client_expect_nothing (watcher);
  legba_hub_cluster_member (f->hub, f->app, "presence-room", "remote", NULL,
      FALSE);
  g_clear_pointer (&event, json_node_unref);
  event = client_expect (watcher, "pusher_internal:member_removed",
      "presence-room");
  g_assert_cmpstr (data_string (event, "user_id"), ==, "remote");
  /* Unbalanced: ignored. */
  legba_hub_cluster_member (f->hub, f->app, "presence-room", "remote", NULL,
      FALSE);
  client_expect_nothing (watcher);
}

/* A channel occupied only elsewhere is listed and counted; it goes when
 * nobody is left anywhere. */
static void
test_remote_subscriptions (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (GPtrArray) users = NULL;
  LegbaHubChannelInfo info;
  Client *c = client_open (f);

  legba_hub_cluster_subscriptions (f->hub, f->app, "news", 3);
  g_assert_true (legba_hub_get_channel (f->hub, f->app, "news", &info));
  g_assert_cmpuint (info.subscription_count, ==, 3);
  client_subscribe (c, "news");
  g_assert_true (legba_hub_get_channel (f->hub, f->app, "news", &info));
  g_assert_cmpuint (info.subscription_count, ==, 4);
  client_report_closed (c);
  legba_hub_cluster_subscriptions (f->hub, f->app, "news", -3);
  g_assert_false (legba_hub_get_channel (f->hub, f->app, "news", &info));

  /* A presence channel with only a remote member is occupied. */
  legba_hub_cluster_member (f->hub, f->app, "presence-far", "far", NULL, TRUE);
  g_assert_true (legba_hub_get_channel (f->hub, f->app, "presence-far", &info));
  g_assert_cmpuint (info.user_count, ==, 1);
  users = legba_hub_get_users (f->hub, f->app, "presence-far");
  g_assert_cmpuint (users->len, ==, 1);
  legba_hub_cluster_member (f->hub, f->app, "presence-far", "far", NULL, FALSE);
  g_assert_false (legba_hub_get_channel (f->hub, f->app, "presence-far",
          &info));
}

static void
test_remote_terminate (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (Recorder) r = recorder_attach (f);
  Client *b = client_open (f);

  client_signin (b, "bob");
  assert_calls (r, "member " LEGBA_HUB_USERS_CHANNEL " bob present -");
  g_assert_cmpuint (legba_hub_cluster_terminate_user (f->hub, f->app, "bob"),
      ==, 1);
  client_expect_closed (b, LEGBA_PUSHER_UNAUTHORIZED);
  g_assert_cmpuint (r->calls->len, ==, 0);
}

/* ---- Redis URLs and instance ids ---- */

typedef struct
{
  const char *url;
  const char *described;        /* NULL: refused */
  const char *password;
  const char *username;
} UrlCase;

static const UrlCase url_cases[] = {
  {"redis://127.0.0.1", "redis://127.0.0.1:6379/0", NULL, NULL},
  {"redis://127.0.0.1:7000/3", "redis://127.0.0.1:7000/3", NULL, NULL},
  {"redis://:p%40ss@localhost:6380", "redis://localhost:6380/0", "p@ss",
      NULL},
  {"redis://user:pw@[::1]:6379/1", "redis://[::1]:6379/1", "pw", "user"},
  {"unix:///run/redis.sock", "unix:///run/redis.sock", NULL, NULL},
  {"unix://:secret@/run/redis.sock?db=2", "unix:///run/redis.sock?db=2",
      "secret", NULL},
  {"http://127.0.0.1:6379", NULL},
  {"redis://", NULL},
  {"redis://host/x", NULL},
  {"redis://host:0", NULL},
  {"redis://host?db=1", NULL},
  {"redis://user@host", NULL},
  {"unix://host/path", NULL},
  {"unix://relative", NULL},
  {"unix:///run/redis.sock?timeout=1", NULL},
  {"not a url", NULL},
  {"http://:hunter2@127.0.0.1", NULL},
  {"redis://:hunter2@host/x", NULL},
};

static void
test_redis_url (gconstpointer data)
{
  const UrlCase *c = data;
  LegbaRedisAddress address;
  g_autoptr (GError) error = NULL;
  g_autofree char *described = NULL;
  gboolean ok = legba_redis_address_parse (c->url, &address, &error);

  if (c->described == NULL) {
    g_assert_false (ok);
    g_assert_nonnull (error);
    /* The message never repeats a password. */
    g_assert_null (strstr (error->message, "hunter2"));
    return;
  }
  g_assert_no_error (error);
  g_assert_true (ok);
  described = legba_redis_address_describe (&address);
  g_assert_cmpstr (described, ==, c->described);
  g_assert_cmpstr (address.password, ==, c->password);
  g_assert_cmpstr (address.username, ==, c->username);
  legba_redis_address_clear (&address);
}

static void
test_instance_id (void)
{
  g_autofree char *id = legba_relay_default_instance_id ();
  g_autofree char *long_id = g_strnfill (65, 'a');

  g_assert_true (legba_relay_instance_id_is_valid (id));
  g_assert_true (legba_relay_instance_id_is_valid ("eu-1.node:7_b"));
  g_assert_false (legba_relay_instance_id_is_valid (""));
  g_assert_false (legba_relay_instance_id_is_valid (NULL));
  g_assert_false (legba_relay_instance_id_is_valid ("a b"));
  g_assert_false (legba_relay_instance_id_is_valid ("a/b"));
  g_assert_false (legba_relay_instance_id_is_valid (long_id));
  long_id[64] = '\0';
  g_assert_true (legba_relay_instance_id_is_valid (long_id));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/hub/cluster/events-relayed", test_events_relayed);
  g_test_add_func ("/hub/cluster/member-hooks", test_member_hooks);
  g_test_add_func ("/hub/cluster/remote-deliver", test_remote_deliver);
  g_test_add_func ("/hub/cluster/remote-members", test_remote_members);
  g_test_add_func ("/hub/cluster/remote-subscriptions",
      test_remote_subscriptions);
  g_test_add_func ("/hub/cluster/remote-terminate", test_remote_terminate);
  ADD_TABLE ("/relay/redis-url", url_cases, test_redis_url);
  g_test_add_func ("/relay/instance-id", test_instance_id);
  return g_test_run ();
}
