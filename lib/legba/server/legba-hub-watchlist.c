/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub: watchlist events, per Pusher's user authentication
 * (docs/server.md, "Watchlist events"). A connection that signs in with
 * user_data {"watchlist": [user ids]} gets pusher_internal:watchlist_events
 * {"events": [{"name": "online" | "offline", "user_ids": [...]}]}: first
 * the watched users online at that moment, then each as it comes online
 * or goes offline. A user is online while at least one connection signed
 * in as that user exists, here (app->users) or, with a relay, on another
 * instance (app->users_remote, told through the cluster's member callbacks
 * with LEGBA_HUB_USERS_CHANNEL).
 */
#include <legba/server/legba-hub-private.h>

#include <legba/common/legba-json.h>

#include <string.h>

void
hub_watchlist_init (LegbaHubApp * app)
{
  app->watchers = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      (GDestroyNotify) g_ptr_array_unref);
  app->users_remote = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      NULL);
}

void
hub_watchlist_clear (LegbaHubApp * app)
{
  g_clear_pointer (&app->watchers, g_hash_table_unref);
  g_clear_pointer (&app->users_remote, g_hash_table_unref);
}

gboolean
hub_watchlist_parse (JsonObject * user, guint max_users, char ***list,
    char **why)
{
  JsonNode *node = json_object_get_member (user, "watchlist");
  g_autoptr (GHashTable) seen = NULL;
  g_autoptr (GPtrArray) ids = NULL;
  JsonArray *array;
  guint n;

  *list = NULL;
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (node)) {
    *why = g_strdup ("user_data's \"watchlist\" must be an array of user "
        "ids (strings)");
    return FALSE;
  }
  array = json_node_get_array (node);
  n = json_array_get_length (array);
  if (max_users > 0 && n > max_users) {
    *why = g_strdup_printf ("user_data's \"watchlist\" has %u user ids, over "
        "the limit of %u", n, max_users);
    return FALSE;
  }
  seen = g_hash_table_new (g_str_hash, g_str_equal);
  ids = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < n; i++) {
    JsonNode *item = json_array_get_element (array, i);
    const char *id = JSON_NODE_HOLDS_VALUE (item) &&
        json_node_get_value_type (item) == G_TYPE_STRING ?
        json_node_get_string (item) : NULL;

    if (id == NULL || *id == '\0') {
      *why = g_strdup_printf ("user_data's \"watchlist\" item %u is not a "
          "non-empty string", i);
      return FALSE;
    }
    if (g_hash_table_contains (seen, id))
      continue;
    g_hash_table_add (seen, (gpointer) id);
    g_ptr_array_add (ids, g_strdup (id));
  }
  g_ptr_array_add (ids, NULL);
  *list = (char **) g_ptr_array_free (g_steal_pointer (&ids), FALSE);
  return TRUE;
}

static gboolean
user_online (LegbaHubApp * app, const char *user_id)
{
  return g_hash_table_contains (app->users, user_id) ||
      g_hash_table_contains (app->users_remote, user_id);
}

/* {"events":[{"name":NAME,"user_ids":[...]}]} */
static GBytes *
watchlist_frame_new (const char *name, const char *const *user_ids)
{
  g_autoptr (GString) data = g_string_new ("{\"events\":[{\"name\":");

  legba_json_append_string (data, name);
  g_string_append (data, ",\"user_ids\":[");
  for (guint i = 0; user_ids[i] != NULL; i++) {
    if (i > 0)
      g_string_append_c (data, ',');
    legba_json_append_string (data, user_ids[i]);
  }
  g_string_append (data, "]}]}");
  return hub_frame_new ("pusher_internal:watchlist_events", NULL, data->str);
}

void
hub_watchlist_attach (LegbaHub * hub, LegbaHubConn * conn, char **list)
{
  LegbaHubApp *app = conn->app;
  g_autoptr (GPtrArray) online = g_ptr_array_new ();

  conn->watchlist = list;
  for (guint i = 0; list != NULL && list[i] != NULL; i++) {
    GPtrArray *conns = g_hash_table_lookup (app->watchers, list[i]);

    if (conns == NULL) {
      conns = g_ptr_array_new ();
      g_hash_table_insert (app->watchers, g_strdup (list[i]), conns);
    }
    g_ptr_array_add (conns, conn);
    if (user_online (app, list[i]))
      g_ptr_array_add (online, list[i]);
  }
  if (online->len > 0) {
    g_autoptr (GBytes) frame = NULL;

    g_ptr_array_add (online, NULL);
    frame = watchlist_frame_new ("online", (const char *const *) online->pdata);
    hub->counters.watchlist_events++;
    hub_conn_send (hub, conn, frame);
  }
}

void
hub_watchlist_detach (LegbaHubConn * conn)
{
  LegbaHubApp *app = conn->app;

  for (guint i = 0; conn->watchlist != NULL && conn->watchlist[i]; i++) {
    GPtrArray *conns = g_hash_table_lookup (app->watchers, conn->watchlist[i]);

    if (conns == NULL)
      continue;
    g_ptr_array_remove_fast (conns, conn);
    if (conns->len == 0)
      g_hash_table_remove (app->watchers, conn->watchlist[i]);
  }
  g_clear_pointer (&conn->watchlist, g_strfreev);
}

/* The user came online or went offline in the cluster: its watchers hear
 * of it. */
static void
watchers_tell (LegbaHub * hub, LegbaHubApp * app, const char *user_id,
    gboolean online)
{
  GPtrArray *conns = g_hash_table_lookup (app->watchers, user_id);
  const char *ids[] = { user_id, NULL };
  g_autoptr (GBytes) frame = NULL;

  if (conns == NULL)
    return;
  frame = watchlist_frame_new (online ? "online" : "offline", ids);
  for (guint i = 0; i < conns->len; i++) {
    LegbaHubConn *conn = conns->pdata[i];

    if (conn->closing)
      continue;
    hub->counters.watchlist_events++;
    hub_conn_send (hub, conn, frame);
  }
}

void
hub_user_local (LegbaHub * hub, LegbaHubApp * app, const char *user_id,
    gboolean online)
{
  if (hub->cluster.member != NULL)
    hub->cluster.member (app, LEGBA_HUB_USERS_CHANNEL, user_id, NULL, online,
        hub->cluster_data);
  if (!g_hash_table_contains (app->users_remote, user_id))
    watchers_tell (hub, app, user_id, online);
}

void
hub_user_remote (LegbaHub * hub, LegbaHubApp * app, const char *user_id,
    gboolean present)
{
  guint n = GPOINTER_TO_UINT (g_hash_table_lookup (app->users_remote,
          user_id));
  gboolean local = g_hash_table_contains (app->users, user_id);

  if (present) {
    g_hash_table_replace (app->users_remote, g_strdup (user_id),
        GUINT_TO_POINTER (n + 1));
    if (n == 0 && !local)
      watchers_tell (hub, app, user_id, TRUE);
    return;
  }
  if (n == 0)
    return;
  if (n > 1) {
    g_hash_table_replace (app->users_remote, g_strdup (user_id),
        GUINT_TO_POINTER (n - 1));
    return;
  }
  g_hash_table_remove (app->users_remote, user_id);
  if (!local)
    watchers_tell (hub, app, user_id, FALSE);
}
