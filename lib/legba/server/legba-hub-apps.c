/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The hub's apps changed while it runs (legba-server's configuration
 * reload, docs/server.md): listed, removed with their connections, given
 * a new secret or new limits.
 */
#include <legba/server/legba-hub-private.h>

GPtrArray *
legba_hub_get_apps (LegbaHub * hub)
{
  GPtrArray *apps;
  GHashTableIter iter;
  gpointer app;

  g_return_val_if_fail (hub != NULL, NULL);
  apps = g_ptr_array_sized_new (g_hash_table_size (hub->apps_by_id));
  g_hash_table_iter_init (&iter, hub->apps_by_id);
  while (g_hash_table_iter_next (&iter, NULL, &app))
    g_ptr_array_add (apps, app);
  return apps;
}

void
legba_hub_remove_app (LegbaHub * hub, LegbaHubApp * app)
{
  g_return_if_fail (hub != NULL);
  g_return_if_fail (app != NULL);
  g_return_if_fail (g_hash_table_lookup (hub->apps_by_id, app->id) == app);

  g_hash_table_remove (hub->apps_by_key, app->key);
  g_hash_table_steal (hub->apps_by_id, app->id);
  /* Its connections are torn down later and still point at it. */
  g_ptr_array_add (hub->retired_apps, app);

  /* Pusher protocol 7: 4001, the app does not exist (any more): the
   * client does not reconnect unchanged. */
  hub_enter (hub);
  for (guint i = 0; i < hub->conns->len; i++) {
    LegbaHubConn *conn = hub->conns->pdata[i];

    if (conn->app != app || conn->closing)
      continue;
    hub_conn_error (hub, conn, LEGBA_PUSHER_APP_NOT_FOUND,
        "App %s was removed", app->key);
    hub_conn_close (hub, conn, LEGBA_PUSHER_APP_NOT_FOUND, "App removed");
  }
  hub_leave (hub);
}

void
legba_hub_app_set_secret (LegbaHubApp * app, const char *secret)
{
  g_return_if_fail (app != NULL);
  g_return_if_fail (secret != NULL && *secret != '\0');

  g_free (app->secret);
  app->secret = g_strdup (secret);
}

void
legba_hub_app_set_limits (LegbaHubApp * app, const LegbaLimits * limits)
{
  g_return_if_fail (app != NULL);
  g_return_if_fail (limits != NULL);

  app->limits = *limits;
}
