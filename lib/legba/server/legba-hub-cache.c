/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub: Pusher's cache channels (docs/server.md, "Cache channels").
 * The last event delivered to a cache channel (an HTTP API event or a
 * client event) is kept, as the frame its subscribers got, for cache_ttl
 * seconds; a new subscriber gets it right after its
 * pusher_internal:subscription_succeeded, or pusher:cache_miss when there
 * is none (and the observer's cache_miss, for the webhook). Each app keeps
 * at most max_cache_channels entries and max_cache_bytes of frames; past
 * either the oldest stored go first. With a relay, the event an instance
 * publishes is also stored in the cluster (cache_store), and a subscriber
 * that finds nothing here waits for the relay to look there
 * (cache_lookup, legba_hub_cluster_cache_found()).
 */
#include <legba/server/legba-hub-private.h>

#include <string.h>

typedef struct
{
  GList link;                   /* in app->cache_order; data: self */
  char *channel;
  GBytes *frame;
  gint64 expires_at;            /* hub clock */
  guint64 stamp;                /* hub->cache_stamp when stored */
  gboolean origin;              /* published here: the relay stored it */
} CacheEntry;

/* Pusher: the cache- prefix, alone or after private-, private-encrypted-
 * or presence-. */
gboolean
hub_channel_is_cache (const char *name)
{
  static const char *const prefixes[] = { "cache-", "private-cache-",
    "private-encrypted-cache-", "presence-cache-"
  };

  for (guint i = 0; i < G_N_ELEMENTS (prefixes); i++)
    if (g_str_has_prefix (name, prefixes[i]))
      return TRUE;
  return FALSE;
}

static void
entry_free (CacheEntry * entry)
{
  g_bytes_unref (entry->frame);
  g_free (entry->channel);
  g_free (entry);
}

void
hub_cache_init (LegbaHubApp * app)
{
  app->cache = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
      (GDestroyNotify) entry_free);
  g_queue_init (&app->cache_order);
}

void
hub_cache_clear (LegbaHubApp * app)
{
  /* the links are the entries' own: freed with them */
  g_clear_pointer (&app->cache, g_hash_table_unref);
  g_queue_init (&app->cache_order);
  app->cache_bytes = 0;
}

static void
entry_remove (LegbaHubApp * app, CacheEntry * entry)
{
  g_queue_unlink (&app->cache_order, &entry->link);
  app->cache_bytes -= g_bytes_get_size (entry->frame);
  g_hash_table_remove (app->cache, entry->channel);
}

/* Within the app's bounds again: the oldest entries go. An entry this
 * instance stored in the cluster goes there too. */
static void
cache_evict (LegbaHub * hub, LegbaHubApp * app)
{
  const LegbaLimits *limits = &app->limits;

  for (;;) {
    gboolean over_channels = limits->max_cache_channels > 0 &&
        app->cache_order.length > limits->max_cache_channels;
    gboolean over_bytes = limits->max_cache_bytes > 0 &&
        app->cache_bytes > limits->max_cache_bytes;
    CacheEntry *oldest;

    if (!over_channels && !over_bytes)
      return;
    oldest = app->cache_order.head->data;
    if (over_channels)
      hub->counters.cache_evicted_channels++;
    else
      hub->counters.cache_evicted_bytes++;
    if (oldest->origin && hub->cluster.cache_store != NULL)
      hub->cluster.cache_store (app, oldest->channel, NULL, 0,
          hub->cluster_data);
    entry_remove (app, oldest);
  }
}

static void
cache_put (LegbaHub * hub, LegbaHubApp * app, const char *channel,
    GBytes * frame, gboolean origin, gint64 expires_at)
{
  CacheEntry *entry = g_hash_table_lookup (app->cache, channel);
  gsize max_bytes = app->limits.max_cache_bytes;

  if (entry != NULL)
    entry_remove (app, entry);
  /* An event larger than the whole bound is not kept: caching it would
   * evict everything else, then itself. */
  if (max_bytes > 0 && g_bytes_get_size (frame) > max_bytes) {
    hub->counters.cache_refused++;
    return;
  }
  entry = g_new0 (CacheEntry, 1);
  entry->link.data = entry;
  entry->channel = g_strdup (channel);
  entry->frame = g_bytes_ref (frame);
  entry->expires_at = expires_at;
  entry->stamp = ++hub->cache_stamp;
  entry->origin = origin;
  g_hash_table_insert (app->cache, entry->channel, entry);
  g_queue_push_tail_link (&app->cache_order, &entry->link);
  app->cache_bytes += g_bytes_get_size (frame);
  cache_evict (hub, app);
}

void
hub_cache_store (LegbaHub * hub, LegbaHubApp * app, const char *channel,
    GBytes * frame, gboolean origin)
{
  guint64 ttl_ms = (guint64) app->limits.cache_ttl * 1000;

  if (app->cache == NULL || !hub_channel_is_cache (channel))
    return;
  cache_put (hub, app, channel, frame, origin,
      hub_now (hub) + (gint64) ttl_ms * 1000);
  /* An event not kept leaves no older one behind in the cluster either. */
  if (origin && hub->cluster.cache_store != NULL)
    hub->cluster.cache_store (app, channel,
        g_hash_table_contains (app->cache, channel) ? frame : NULL, ttl_ms,
        hub->cluster_data);
}

/* The entry of channel, if any and still in time. */
static CacheEntry *
cache_lookup (LegbaHub * hub, LegbaHubApp * app, const char *channel)
{
  CacheEntry *entry = g_hash_table_lookup (app->cache, channel);

  if (entry != NULL && entry->expires_at <= hub_now (hub)) {
    hub->counters.cache_expired++;
    entry_remove (app, entry);
    return NULL;
  }
  return entry;
}

/* Pusher: {"event":"pusher:cache_miss","channel":...}, without data. */
static void
cache_miss (LegbaHub * hub, LegbaHubConn * conn, const char *channel)
{
  g_autoptr (GBytes) frame = hub_frame_new ("pusher:cache_miss", channel, NULL);

  hub->counters.cache_misses++;
  hub_conn_send (hub, conn, frame);
  if (hub->observer.cache_miss != NULL)
    hub->observer.cache_miss (conn->app, channel, hub->observer_data);
}

void
hub_cache_subscribed (LegbaHub * hub, LegbaHubConn * conn, Channel * channel)
{
  LegbaHubApp *app = conn->app;
  CacheEntry *entry;

  if (app->cache == NULL || !hub_channel_is_cache (channel->name))
    return;
  entry = cache_lookup (hub, app, channel->name);
  if (entry != NULL) {
    hub->counters.cache_hits++;
    hub_conn_send (hub, conn, entry->frame);
    return;
  }
  if (hub->cluster.cache_lookup != NULL &&
      hub->cluster.cache_lookup (app, channel->name, conn->socket_id,
          hub->cache_stamp, hub->cluster_data))
    return;
  cache_miss (hub, conn, channel->name);
}

void
legba_hub_cluster_cache_found (LegbaHub * hub, LegbaHubApp * app,
    const char *channel, const char *socket_id, guint64 token,
    GBytes * frame, guint64 ttl_ms)
{
  LegbaHubConn *conn;
  CacheEntry *entry;

  g_return_if_fail (hub != NULL);
  g_return_if_fail (app != NULL);
  g_return_if_fail (channel != NULL && socket_id != NULL);

  conn = g_hash_table_lookup (hub->conns_by_socket_id, socket_id);
  if (conn == NULL || conn->closing || conn->app != app ||
      hub_conn_sub_lookup (conn, channel) == NULL || app->cache == NULL)
    return;
  hub_enter (hub);
  entry = cache_lookup (hub, app, channel);
  if (entry != NULL && entry->stamp > token) {
    /* Stored since the subscription: the subscriber got it live. */
  } else if (frame != NULL && ttl_ms > 0) {
    hub->counters.cache_hits++;
    cache_put (hub, app, channel, frame, FALSE,
        hub_now (hub) + (gint64) MIN (ttl_ms, G_MAXINT64 / 2000) * 1000);
    hub_conn_send (hub, conn, frame);
  } else {
    cache_miss (hub, conn, channel);
  }
  hub_leave (hub);
}

void
hub_cache_expire (LegbaHub * hub)
{
  gint64 now = hub_now (hub);
  GHashTableIter apps;
  gpointer value;

  g_hash_table_iter_init (&apps, hub->apps_by_id);
  while (g_hash_table_iter_next (&apps, NULL, &value)) {
    LegbaHubApp *app = value;
    GList *l = app->cache_order.head;

    while (l != NULL) {
      CacheEntry *entry = l->data;

      l = l->next;
      if (entry->expires_at <= now) {
        hub->counters.cache_expired++;
        entry_remove (app, entry);
      }
    }
    /* A reload may have lowered the bounds. */
    cache_evict (hub, app);
  }
}

void
legba_hub_get_cache_usage (LegbaHub * hub, guint * channels, guint64 * bytes)
{
  GHashTableIter apps;
  gpointer value;
  guint n = 0;
  guint64 total = 0;

  g_return_if_fail (hub != NULL);

  g_hash_table_iter_init (&apps, hub->apps_by_id);
  while (g_hash_table_iter_next (&apps, NULL, &value)) {
    LegbaHubApp *app = value;

    n += app->cache_order.length;
    total += app->cache_bytes;
  }
  if (channels != NULL)
    *channels = n;
  if (bytes != NULL)
    *bytes = total;
}
