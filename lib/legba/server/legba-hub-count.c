/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub: Pusher's subscription counting. For an app that enables it,
 * the subscribers of a channel other than a presence channel are told how
 * many connections (in the cluster) are subscribed to it whenever that
 * changes, with pusher_internal:subscription_count {"subscription_count":
 * N}, which pusher-js emits on the channel as pusher:subscription_count.
 * Changes are gathered and sent at the hub's tick, about once a second: a
 * channel whose subscribers come and go gets one event a second at most,
 * with the count of the moment, never one per join or leave. The hub's
 * observer hears of the same changes at the same time (the
 * subscription_count webhook), a vacated channel's too, with 0.
 */
#include <legba/server/legba-hub-private.h>

void
hub_count_changed (LegbaHubApp * app, Channel * channel)
{
  if (app->count_changed == NULL || channel->kind == CHANNEL_PRESENCE)
    return;
  if (!g_hash_table_contains (app->count_changed, channel->name))
    g_hash_table_add (app->count_changed, g_strdup (channel->name));
}

static void
count_send (LegbaHub * hub, LegbaHubApp * app, const char *name)
{
  Channel *channel = g_hash_table_lookup (app->channels, name);
  g_autofree char *data = NULL;
  g_autoptr (GBytes) frame = NULL;
  guint count = 0;

  if (channel != NULL)
    count = channel->subscriptions->len + channel->n_remote_subscriptions;
  if (hub->observer.subscription_count != NULL)
    hub->observer.subscription_count (app, name, count, hub->observer_data);
  if (channel == NULL || channel->subscriptions->len == 0)
    return;
  data = g_strdup_printf ("{\"subscription_count\":%u}", count);
  frame = hub_frame_new ("pusher_internal:subscription_count", name, data);
  hub_deliver (hub, app, name, frame, NULL);
}

void
hub_count_flush (LegbaHub * hub)
{
  GHashTableIter apps;
  gpointer app;

  g_hash_table_iter_init (&apps, hub->apps_by_id);
  while (g_hash_table_iter_next (&apps, NULL, &app)) {
    GHashTable *changed = ((LegbaHubApp *) app)->count_changed;
    GHashTableIter names;
    gpointer name;

    if (changed == NULL || g_hash_table_size (changed) == 0)
      continue;
    g_hash_table_iter_init (&names, changed);
    while (g_hash_table_iter_next (&names, &name, NULL))
      count_send (hub, app, name);
    g_hash_table_remove_all (changed);
  }
}

void
legba_hub_app_set_subscription_count (LegbaHubApp * app, gboolean enabled)
{
  g_return_if_fail (app != NULL);

  if (!enabled)
    g_clear_pointer (&app->count_changed, g_hash_table_unref);
  else if (app->count_changed == NULL)
    app->count_changed = g_hash_table_new_full (g_str_hash, g_str_equal,
        g_free, NULL);
}

gboolean
legba_hub_app_get_subscription_count (LegbaHubApp * app)
{
  g_return_val_if_fail (app != NULL, FALSE);
  return app->count_changed != NULL;
}
