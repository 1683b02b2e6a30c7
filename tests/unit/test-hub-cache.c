/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub's cache channels: the last event (HTTP API or client event)
 * replayed to a new subscriber after its subscription_succeeded, or
 * pusher:cache_miss; its TTL, the per-app bounds (oldest first), events
 * too large to keep, and the relay's lookup for an event cached elsewhere
 * in the cluster.
 */
#include "hub-fixture.h"

/* The next frame is exactly the bytes of the one delivered before. */
static void
expect_same_frame (Client * c, GBytes * expected)
{
  GBytes *got;

  g_assert_cmpuint (c->bytes->len, >, 0);
  got = c->bytes->pdata[c->bytes->len - 1];
  g_assert_true (g_bytes_equal (got, expected));
}

static void
expect_miss (Client * c, const char *channel)
{
  g_autoptr (JsonNode) frame = client_pop (c, "pusher:cache_miss", channel);

  g_assert_false (json_object_has_member (json_node_get_object (frame),
          "data"));
}

static void
test_replay_and_miss (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (GError) error = NULL;
  Client *a = client_open (f);
  Client *b = client_open (f);
  Client *c = client_open (f);
  GBytes *published;

  /* Nothing cached: a miss right after the subscription. */
  client_subscribe (a, "cache-news");
  expect_miss (a, "cache-news");
  client_expect_nothing (a);
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->cache_misses, ==, 1);

  g_assert_true (publish (f, "cache-news", "headline", "{\"n\":1}", NULL,
          &error));
  g_assert_true (publish (f, "cache-news", "headline", "{\"n\":2}", NULL,
          &error));
  published = g_bytes_ref (a->bytes->pdata[a->bytes->len - 1]);
  client_drop_frames (a);

  /* The last one, as its subscribers got it, after subscription_succeeded. */
  client_subscribe (b, "cache-news");
  {
    g_autoptr (JsonNode) data = client_expect (b, "headline", "cache-news");

    g_assert_cmpint (data_int (data, "n"), ==, 2);
  }
  expect_same_frame (b, published);
  client_expect_nothing (b);
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->cache_hits, ==, 1);

  /* Other channels are not cached. */
  g_assert_true (publish (f, "news", "headline", "{}", NULL, &error));
  client_subscribe (c, "news");
  client_expect_nothing (c);
  g_bytes_unref (published);
}

/* Client events are cached on private and presence cache channels;
 * encrypted ones refuse them and keep the ciphertext as published. */
static void
test_client_events_and_encrypted (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (GError) error = NULL;
  Client *a = client_open (f);
  Client *b = client_open (f);
  Client *c = client_open (f);
  const char *cipher = "{\"nonce\":\"bm9uY2U=\",\"ciphertext\":\"c2VjcmV0\"}";

  client_subscribe_private (a, "private-cache-chat");
  expect_miss (a, "private-cache-chat");
  client_send (a, "{\"event\":\"client-typing\",\"channel\":"
      "\"private-cache-chat\",\"data\":{\"who\":\"a\"}}");
  client_subscribe_private (b, "private-cache-chat");
  {
    g_autoptr (JsonNode) data = client_expect (b, "client-typing",
        "private-cache-chat");

    g_assert_cmpstr (data_string (data, "who"), ==, "a");
  }

  client_subscribe_private (a, "private-encrypted-cache-vault");
  expect_miss (a, "private-encrypted-cache-vault");
  client_send (a, "{\"event\":\"client-x\",\"channel\":"
      "\"private-encrypted-cache-vault\",\"data\":{}}");
  client_expect_error (a, LEGBA_PUSHER_CLIENT_EVENT_REFUSED);
  g_assert_true (publish (f, "private-encrypted-cache-vault", "secret",
          cipher, NULL, &error));
  client_subscribe_private (c, "private-encrypted-cache-vault");
  {
    g_autoptr (JsonNode) frame = client_pop (c, "secret",
        "private-encrypted-cache-vault");

    g_assert_cmpstr (legba_json_object_get_string (json_node_get_object
            (frame), "data"), ==, cipher);
  }
}

static void
test_ttl (void)
{
  LegbaLimits limits = default_limits ();
  g_autoptr (Fixture) f = NULL;
  g_autoptr (GError) error = NULL;
  Client *a, *b;

  limits.cache_ttl = 30;
  f = fixture_new (&limits);
  a = client_open (f);
  b = client_open (f);
  g_assert_true (publish (f, "cache-clock", "tick", "{}", NULL, &error));
  f->now += 29 * G_USEC_PER_SEC;
  client_subscribe (a, "cache-clock");
  client_skip (a, "tick", "cache-clock");
  f->now += 2 * G_USEC_PER_SEC;
  legba_hub_tick (f->hub);
  g_assert_cmpuint (legba_hub_get_counters (f->hub)->cache_expired, ==, 1);
  client_subscribe (b, "cache-clock");
  expect_miss (b, "cache-clock");
}

/* Past max-cache-channels or max-cache-bytes the oldest stored go; an
 * event larger than max-cache-bytes alone is not kept. */
static void
test_bounds (void)
{
  LegbaLimits limits = default_limits ();
  g_autoptr (Fixture) f = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *big = NULL;
  const LegbaHubCounters *counters;
  guint channels;
  guint64 bytes;
  Client *a;

  limits.max_cache_channels = 2;
  limits.max_cache_bytes = 400;
  f = fixture_new (&limits);
  counters = legba_hub_get_counters (f->hub);
  g_assert_true (publish (f, "cache-1", "e", "{}", NULL, &error));
  g_assert_true (publish (f, "cache-2", "e", "{}", NULL, &error));
  g_assert_true (publish (f, "cache-1", "e", "{\"again\":1}", NULL, &error));
  g_assert_true (publish (f, "cache-3", "e", "{}", NULL, &error));
  /* cache-2 was the oldest stored */
  g_assert_cmpuint (counters->cache_evicted_channels, ==, 1);
  a = client_open (f);
  client_subscribe (a, "cache-2");
  expect_miss (a, "cache-2");
  client_subscribe (a, "cache-1");
  client_skip (a, "e", "cache-1");
  client_send (a, "{\"event\":\"pusher:unsubscribe\",\"data\":"
      "{\"channel\":\"cache-1\"}}");

  /* 300 bytes of data in cache-3: cache-1 must go to make room */
  big = g_strdup_printf ("\"%0300d\"", 0);
  g_assert_true (publish (f, "cache-3", "e", big, NULL, &error));
  g_assert_cmpuint (counters->cache_evicted_bytes, ==, 1);
  g_assert_cmpuint (counters->cache_evicted_channels, ==, 1);
  client_subscribe (a, "cache-1");
  expect_miss (a, "cache-1");
  legba_hub_get_cache_usage (f->hub, &channels, &bytes);
  g_assert_cmpuint (bytes, <=, 400);

  g_free (big);
  big = g_strdup_printf ("\"%0500d\"", 0);
  g_assert_true (publish (f, "cache-huge", "e", big, NULL, &error));
  g_assert_cmpuint (counters->cache_refused, ==, 1);
  client_subscribe (a, "cache-huge");
  expect_miss (a, "cache-huge");
}

/* ---- With a relay ---- */

typedef struct
{
  GPtrArray *stores;            /* "CHANNEL FRAME|-" */
  char *lookup_socket;
  char *lookup_channel;
  guint64 token;
  gboolean answer;              /* what cache_lookup returns */
} Relay;

static void
on_store (LegbaHubApp * app, const char *channel, GBytes * frame,
    guint64 ttl_ms, gpointer user_data)
{
  Relay *r = user_data;

  g_assert_cmpuint (ttl_ms, ==, 1800 * 1000);
  g_ptr_array_add (r->stores, frame ? g_strdup_printf ("%s %.*s", channel,
          (int) g_bytes_get_size (frame),
          (const char *) g_bytes_get_data (frame, NULL)) :
      g_strdup_printf ("%s -", channel));
}

static gboolean
on_lookup (LegbaHubApp * app, const char *channel, const char *socket_id,
    guint64 token, gpointer user_data)
{
  Relay *r = user_data;

  g_free (r->lookup_socket);
  g_free (r->lookup_channel);
  r->lookup_socket = g_strdup (socket_id);
  r->lookup_channel = g_strdup (channel);
  r->token = token;
  return r->answer;
}

static const LegbaHubCluster relay_callbacks = {
  .cache_store = on_store,
  .cache_lookup = on_lookup,
};

static void
test_cluster (void)
{
  g_autoptr (Fixture) f = fixture_new (NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) remote = NULL;
  Relay r = { g_ptr_array_new_with_free_func (g_free), NULL, NULL, 0, TRUE };
  Client *a, *b, *c;
  const char *frame = "{\"event\":\"e\",\"channel\":\"cache-x\","
      "\"data\":\"{\\\"from\\\":\\\"redis\\\"}\"}";

  legba_hub_set_cluster (f->hub, &relay_callbacks, &r);
  /* Published here: stored in the cluster, as delivered. */
  g_assert_true (publish (f, "cache-here", "e", "{}", NULL, &error));
  g_assert_cmpuint (r.stores->len, ==, 1);
  g_assert_cmpstr (r.stores->pdata[0], ==,
      "cache-here {\"event\":\"e\",\"channel\":\"cache-here\",\"data\":\"{}\"}");
  /* Delivered from another instance: kept here, not stored again. */
  remote = g_bytes_new_static (frame, strlen (frame));
  legba_hub_cluster_deliver (f->hub, f->app, "cache-y", remote, NULL);
  g_assert_cmpuint (r.stores->len, ==, 1);
  a = client_open (f);
  client_subscribe (a, "cache-y");
  client_skip (a, "e", "cache-x");
  g_assert_null (r.lookup_socket);

  /* Nothing here: the relay looks, and its answer is replayed. */
  b = client_open (f);
  client_subscribe (b, "cache-x");
  client_expect_nothing (b);
  g_assert_cmpstr (r.lookup_socket, ==, b->socket_id);
  legba_hub_cluster_cache_found (f->hub, f->app, "cache-x", b->socket_id,
      r.token, remote, 5000);
  expect_same_frame (b, remote);
  client_skip (b, "e", "cache-x");
  /* ... and kept for the next subscriber. */
  c = client_open (f);
  client_subscribe (c, "cache-x");
  client_skip (c, "e", "cache-x");

  /* An event delivered before the answer came: the subscriber had it. */
  client_subscribe (c, "cache-z");
  g_assert_cmpstr (r.lookup_channel, ==, "cache-z");
  g_assert_true (publish (f, "cache-z", "live", "{}", NULL, &error));
  client_skip (c, "live", "cache-z");
  legba_hub_cluster_cache_found (f->hub, f->app, "cache-z", c->socket_id,
      r.token, remote, 5000);
  client_expect_nothing (c);

  /* Found nothing: a miss. */
  client_subscribe (c, "cache-w");
  legba_hub_cluster_cache_found (f->hub, f->app, "cache-w", c->socket_id,
      r.token, NULL, 0);
  expect_miss (c, "cache-w");

  /* The relay cannot look: a miss at once. */
  r.answer = FALSE;
  client_subscribe (c, "cache-v");
  expect_miss (c, "cache-v");
  /* An answer for a socket gone or unsubscribed does nothing. */
  legba_hub_cluster_cache_found (f->hub, f->app, "cache-q", c->socket_id,
      r.token, remote, 5000);
  legba_hub_cluster_cache_found (f->hub, f->app, "cache-q", "1.2",
      r.token, remote, 5000);
  client_expect_nothing (c);

  legba_hub_set_cluster (f->hub, NULL, NULL);
  g_ptr_array_unref (r.stores);
  g_free (r.lookup_socket);
  g_free (r.lookup_channel);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/hub/cache/replay-and-miss", test_replay_and_miss);
  g_test_add_func ("/hub/cache/client-events-and-encrypted",
      test_client_events_and_encrypted);
  g_test_add_func ("/hub/cache/ttl", test_ttl);
  g_test_add_func ("/hub/cache/bounds", test_bounds);
  g_test_add_func ("/hub/cache/cluster", test_cluster);
  return g_test_run ();
}
