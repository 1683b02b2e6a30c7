/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaRelay: cache channels shared by the instances (docs/scale-out.md,
 * "Cache channels"). The instance that publishes an event on a cache
 * channel stores its frame in PREFIXcache:APP:CHANNEL with SET ... PX TTL,
 * and deletes the key when it evicts the entry; every instance also keeps
 * the events it reads from the stream in its own cache, so a key is read
 * (GET and PTTL, pipelined) only by a subscriber that finds nothing in its
 * instance's cache, such as one on an instance started after the publish.
 */
#include <legba/server/legba-relay-private.h>

#include <string.h>

struct _RelayLookup
{
  LegbaRelay *relay;
  char *app;
  char *channel;
  char *socket_id;
  guint64 token;
  GBytes *frame;                /* the GET's answer, until PTTL's */
  gboolean answered;
};

/* PREFIXcache:APP:CHANNEL: channel names hold no ':', so the last one
 * ends the app id. */
static char *
cache_key (LegbaRelay * relay, LegbaHubApp * app, const char *channel)
{
  return g_strconcat (relay->key_prefix, "cache:",
      legba_hub_app_get_id (app), ":", channel, NULL);
}

void
relay_cache_store (LegbaHubApp * app, const char *channel, GBytes * frame,
    guint64 ttl_ms, gpointer user_data)
{
  LegbaRelay *relay = user_data;
  g_autofree char *key = NULL;
  g_autofree char *ttl = NULL;
  const char *argv[5];
  size_t argvlen[5];
  gsize len;

  if (relay->phase != PHASE_UP)
    return;
  key = cache_key (relay, app, channel);
  if (frame == NULL) {
    legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, NULL, NULL,
        "DEL", key, NULL);
    return;
  }
  ttl = g_strdup_printf ("%" G_GUINT64_FORMAT, MAX (ttl_ms, 1));
  argv[0] = "SET";
  argv[1] = key;
  argv[2] = g_bytes_get_data (frame, &len);
  argvlen[2] = len;
  argv[3] = "PX";
  argv[4] = ttl;
  argvlen[0] = 3;
  argvlen[1] = strlen (key);
  argvlen[3] = 2;
  argvlen[4] = strlen (ttl);
  if (argv[2] == NULL)
    argv[2] = "";
  legba_redis_command (relay->cmd, COMMAND_TIMEOUT_MS, NULL, NULL, NULL, 5,
      argv, argvlen);
}

static void
lookup_free (RelayLookup * lookup)
{
  g_clear_pointer (&lookup->frame, g_bytes_unref);
  g_free (lookup->app);
  g_free (lookup->channel);
  g_free (lookup->socket_id);
  g_free (lookup);
}

static void
lookup_answer (RelayLookup * lookup, GBytes * frame, guint64 ttl_ms)
{
  LegbaRelay *relay = lookup->relay;
  LegbaHubApp *app = legba_hub_find_app_by_id (relay->hub, lookup->app);

  lookup->answered = TRUE;
  if (app != NULL)
    legba_hub_cluster_cache_found (relay->hub, app, lookup->channel,
        lookup->socket_id, lookup->token, frame, ttl_ms);
}

/* GET: a frame as instances write them (a JSON object's text), or nil. */
static void
on_get (LegbaRedis * redis, redisReply * reply, gpointer user_data)
{
  RelayLookup *lookup = user_data;

  if (reply->type != REDIS_REPLY_STRING)
    return;
  if (reply->len < 2 || reply->str[0] != '{' ||
      reply->str[reply->len - 1] != '}' ||
      !g_utf8_validate (reply->str, reply->len, NULL)) {
    lookup->relay->counters.invalid++;
    return;
  }
  lookup->frame = g_bytes_new (reply->str, reply->len);
}

/* PTTL, after the GET: the milliseconds the frame has left. */
static void
on_pttl (LegbaRedis * redis, redisReply * reply, gpointer user_data)
{
  RelayLookup *lookup = user_data;
  guint64 ttl_ms = reply->type == REDIS_REPLY_INTEGER &&
      reply->integer > 0 ? (guint64) reply->integer : 0;

  lookup_answer (lookup, ttl_ms > 0 ? lookup->frame : NULL, ttl_ms);
}

/* Answers (a miss) what Redis will not answer any more, from the main
 * loop: the connection may be dropping it from inside a hub callback. */
static gboolean
on_unanswered (gpointer user_data)
{
  LegbaRelay *relay = user_data;
  RelayLookup *lookup;

  g_clear_pointer (&relay->cache_idle, g_source_unref);
  while ((lookup = g_queue_pop_head (&relay->cache_unanswered)) != NULL) {
    lookup_answer (lookup, NULL, 0);
    lookup_free (lookup);
  }
  return G_SOURCE_REMOVE;
}

static void
on_lookup_done (gpointer user_data)
{
  RelayLookup *lookup = user_data;
  LegbaRelay *relay = lookup->relay;

  if (lookup->answered) {
    lookup_free (lookup);
    return;
  }
  g_queue_push_tail (&relay->cache_unanswered, lookup);
  if (relay->cache_idle == NULL) {
    relay->cache_idle = g_idle_source_new ();
    g_source_set_callback (relay->cache_idle, on_unanswered, relay, NULL);
    g_source_attach (relay->cache_idle, relay->context);
  }
}

gboolean
relay_cache_lookup (LegbaHubApp * app, const char *channel,
    const char *socket_id, guint64 token, gpointer user_data)
{
  LegbaRelay *relay = user_data;
  g_autofree char *key = NULL;
  RelayLookup *lookup;

  if (relay->phase != PHASE_UP)
    return FALSE;
  key = cache_key (relay, app, channel);
  lookup = g_new0 (RelayLookup, 1);
  lookup->relay = relay;
  lookup->app = g_strdup (legba_hub_app_get_id (app));
  lookup->channel = g_strdup (channel);
  lookup->socket_id = g_strdup (socket_id);
  lookup->token = token;
  legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, on_get,
      lookup, "GET", key, NULL);
  /* Its destroy runs last, answered or not. */
  legba_redis_command (relay->cmd, COMMAND_TIMEOUT_MS, on_pttl, lookup,
      on_lookup_done, 2, (const char *[]) {
        "PTTL", key
      }, NULL);
  return TRUE;
}

/* For legba_relay_free(): nothing is answered any more. */
void
relay_cache_clear (LegbaRelay * relay)
{
  if (relay->cache_idle != NULL)
    g_source_destroy (relay->cache_idle);
  g_clear_pointer (&relay->cache_idle, g_source_unref);
  g_queue_clear_full (&relay->cache_unanswered, (GDestroyNotify) lookup_free);
}
