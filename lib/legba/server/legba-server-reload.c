/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-server's configuration read again while it runs (SIGHUP,
 * docs/server.md): the file is loaded whole into a server of its own that
 * never listens, and what may change at runtime, the apps and the limits
 * (the server's and each app's own), is carried over from it.
 */
#define LEGBA_SERVER_INTERNALS
#include <legba/server/legba-server-private.h>

/* Set when the server starts (sockets, TLS, the relay) or kept by the
 * sockets already open: a reload only says that the file differs. */
static const char *const start_only[] = {
  "listen-address", "listen-port", "metrics-address", "metrics-port",
  "metrics-token", "allowed-origins", "compression", "redis-url",
  "instance-id", "redis-prefix", "redis-retention", "redis-instance-ttl",
  "turn-urls", "turn-secret", "turn-ttl", NULL
};

static void
reload_report_start_only (LegbaServer * self, LegbaServer * file)
{
  for (guint i = 0; start_only[i] != NULL; i++) {
    GParamSpec *pspec = g_object_class_find_property (G_OBJECT_GET_CLASS
        (self), start_only[i]);
    g_auto (GValue) now = G_VALUE_INIT;
    g_auto (GValue) wanted = G_VALUE_INIT;

    g_value_init (&now, pspec->value_type);
    g_value_init (&wanted, pspec->value_type);
    g_object_get_property (G_OBJECT (self), start_only[i], &now);
    g_object_get_property (G_OBJECT (file), start_only[i], &wanted);
    /* The file left it out (the default), or has what is in force. */
    if (g_param_value_defaults (pspec, &wanted) ||
        g_param_values_cmp (pspec, &now, &wanted) == 0)
      continue;
    legba_server_log (G_LOG_LEVEL_MESSAGE, "config-reload-ignored",
        "PROPERTY", start_only[i], "REASON", "applies at the next start", NULL);
  }
  if (file->certificate != NULL)
    legba_server_log (G_LOG_LEVEL_MESSAGE, "config-reload-ignored",
        "PROPERTY", "tls-cert", "REASON", "read at start only", NULL);
}

static LegbaPendingApp *
reload_find (GPtrArray * apps, const char *id)
{
  for (guint i = 0; i < apps->len; i++) {
    LegbaPendingApp *app = g_ptr_array_index (apps, i);

    if (g_str_equal (app->id, id))
      return app;
  }
  return NULL;
}

static void
reload_log_app (const char *id, const char *change)
{
  legba_server_log (G_LOG_LEVEL_MESSAGE, "config-reload-app", "APP_ID", id,
      "CHANGE", change, NULL);
}

/* The file's apps must not take the id or key of the one kept. */
static gboolean
reload_check_apps (LegbaServer * self, const char *path, GPtrArray * apps,
    const char *keep_app_id, GError ** error)
{
  LegbaHubApp *kept = legba_hub_find_app_by_id (self->hub, keep_app_id);

  for (guint i = 0; kept != NULL && i < apps->len; i++) {
    LegbaPendingApp *app = g_ptr_array_index (apps, i);

    if (g_str_equal (app->id, keep_app_id) ||
        g_str_equal (app->key, legba_hub_app_get_key (kept))) {
      g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
          "%s: app %s: its %s is the command line's app's", path, app->id,
          g_str_equal (app->id, keep_app_id) ? "id" : "key");
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean
reload_was_running (GPtrArray * running, const char *id)
{
  for (guint i = 0; i < running->len; i++) {
    if (g_str_equal (legba_hub_app_get_id (running->pdata[i]), id))
      return TRUE;
  }
  return FALSE;
}

/* Removed apps and apps with a new key go first, so that a key can move
 * from one app to another. */
static void
reload_apps (LegbaServer * self, GPtrArray * apps, const char *keep_app_id)
{
  g_autoptr (GPtrArray) running = legba_hub_get_apps (self->hub);

  for (guint i = 0; i < running->len; i++) {
    LegbaHubApp *app = g_ptr_array_index (running, i);
    const char *id = legba_hub_app_get_id (app);
    LegbaPendingApp *wanted = reload_find (apps, id);

    if (keep_app_id != NULL && g_str_equal (id, keep_app_id))
      continue;
    if (wanted == NULL ||
        !g_str_equal (wanted->key, legba_hub_app_get_key (app))) {
      reload_log_app (id, wanted ? "new-key" : "removed");
      legba_hub_remove_app (self->hub, app);
    } else if (!g_str_equal (wanted->secret, legba_hub_app_get_secret (app))) {
      reload_log_app (id, "new-secret");
      legba_hub_app_set_secret (app, wanted->secret);
    }
  }

  for (guint i = 0; i < apps->len; i++) {
    LegbaPendingApp *app = g_ptr_array_index (apps, i);
    g_autoptr (GError) error = NULL;

    if (legba_hub_find_app_by_id (self->hub, app->id) != NULL)
      continue;
    /* Checked before: ids and keys are unique in the file and not the
     * kept app's, and the others are gone. */
    if (!legba_hub_add_app (self->hub, app->id, app->key, app->secret, &error))
      g_warning ("app %s: %s", app->id, error->message);
    else if (!reload_was_running (running, app->id))
      reload_log_app (app->id, "added");
  }
}

gboolean
legba_server_reload_config (LegbaServer * server, const char *path,
    const char *keep_app_id, GError ** error)
{
  g_autoptr (LegbaServer) file = NULL;
  g_auto (GStrv) changed = NULL;
  const char *const *limits = legba_server_get_limit_names ();

  g_return_val_if_fail (LEGBA_IS_SERVER (server), FALSE);
  g_return_val_if_fail (server->started, FALSE);
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  file = legba_server_new ();
  if (!legba_server_load_config (file, path, error) ||
      !reload_check_apps (server, path, file->pending_apps, keep_app_id, error))
    return FALSE;

  reload_report_start_only (server, file);
  /* The apps' own limits, as the file has them */
  changed = legba_server_take_app_limits (server, file, keep_app_id);
  /* Every limit, the file's or its default, for every app at once. */
  for (guint i = 0; limits[i] != NULL; i++) {
    g_auto (GValue) value = G_VALUE_INIT;

    g_value_init (&value, G_TYPE_UINT);
    g_object_get_property (G_OBJECT (file), limits[i], &value);
    g_object_set_property (G_OBJECT (server), limits[i], &value);
  }
  /* Apps that stay and have new limits of their own (an app added has
   * its limits with it) */
  for (guint i = 0; changed[i] != NULL; i++) {
    if (legba_hub_find_app_by_id (server->hub, changed[i]) == NULL)
      changed[i][0] = '\0';
  }
  reload_apps (server, file->pending_apps, keep_app_id);
  legba_server_apply_app_limits (server);
  for (guint i = 0; changed[i] != NULL; i++) {
    if (changed[i][0] != '\0' &&
        legba_hub_find_app_by_id (server->hub, changed[i]) != NULL)
      reload_log_app (changed[i], "limits");
  }
  return TRUE;
}
