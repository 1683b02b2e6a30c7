/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Limits per app (docs/server.md, "Limits per app"): an app's own values
 * of the limits, over the server's, and the HTTP API's request rate of
 * each app, a token bucket answered 429 with Retry-After when empty, so
 * that one app's flood does not starve the others.
 */
#define LEGBA_SERVER_INTERNALS
#include <legba/server/legba-server-private.h>

#include <string.h>

/* An app's own values of some limits. */
typedef struct
{
  guint64 set;                  /* bit i: limit i is the app's own */
  LegbaLimits values;
} LegbaAppLimits;

/* The HTTP API requests an app may still make at once: refilled at
 * api-requests-per-second, up to as many. */
typedef struct
{
  double tokens;
  gint64 refilled_at;           /* monotonic, microseconds */
} LegbaApiBucket;

void
legba_server_init_app_limits (LegbaServer * self)
{
  g_assert (legba_server_n_app_limits () <= 64);
  self->app_limits = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      g_free);
  self->api_buckets = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  self->api_refused = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      g_free);
}

void
legba_server_finalize_app_limits (LegbaServer * self)
{
  g_hash_table_unref (self->app_limits);
  g_hash_table_unref (self->api_buckets);
  g_hash_table_unref (self->api_refused);
}

/* The server's limits, with the app's own values over them. */
static void
legba_server_limits_of (LegbaServer * self, const char *app_id,
    LegbaLimits * limits)
{
  LegbaAppLimits *own = g_hash_table_lookup (self->app_limits, app_id);

  *limits = self->limits;
  for (guint i = 0; own != NULL && i < legba_server_n_app_limits (); i++) {
    if (own->set & (G_GUINT64_CONSTANT (1) << i))
      legba_server_app_limit_set (limits, i,
          legba_server_app_limit_get (&own->values, i));
  }
}

void
legba_server_apply_app_limits (LegbaServer * self)
{
  g_autoptr (GPtrArray) apps = legba_hub_get_apps (self->hub);

  for (guint i = 0; i < apps->len; i++) {
    LegbaLimits limits;

    legba_server_limits_of (self, legba_hub_app_get_id (apps->pdata[i]),
        &limits);
    legba_hub_app_set_limits (apps->pdata[i], &limits);
  }
}

const LegbaLimits *
legba_server_limits_for_key (LegbaServer * self, const char *app_key)
{
  LegbaHubApp *app = app_key ? legba_hub_find_app_by_key (self->hub,
      app_key) : NULL;

  return app ? legba_hub_app_get_limits (app) : &self->limits;
}

static gboolean
legba_server_has_app (LegbaServer * self, const char *id)
{
  for (guint i = 0; i < self->pending_apps->len; i++) {
    if (g_str_equal (((LegbaPendingApp *) self->pending_apps->pdata[i])->id,
            id))
      return TRUE;
  }
  return legba_hub_find_app_by_id (self->hub, id) != NULL;
}

/**
 * legba_server_set_app_limit:
 * @server: a #LegbaServer
 * @id: the id of an app added with legba_server_add_app()
 * @name: the name of a limit property (`max-connections`,
 *   `client-events-per-second`, `api-requests-per-second`, ...)
 * @value: the app's value, within the property's bounds
 * @error: return location for a #GError
 *
 * Gives the app a value of its own for a limit, in place of the server's
 * property of that name, from now on: its sockets already open included,
 * but for the bounds a socket takes when it opens (`max-frame-bytes`,
 * `max-queued-bytes`, `control-frames-per-second`). Every limit can be
 * set so but the four that apply before a connection's app is known
 * (`max-request-bytes`, `handshake-timeout`, `max-pending-connections`,
 * `max-pending-per-address`). Fails (%LEGBA_SERVER_ERROR_CONFIG) on an
 * unknown app or limit, one of those four, or a value out of bounds.
 *
 * Returns: %TRUE on success
 */
gboolean
legba_server_set_app_limit (LegbaServer * server, const char *id,
    const char *name, guint value, GError ** error)
{
  int index;
  GParamSpecUInt *pspec;
  LegbaAppLimits *own;

  g_return_val_if_fail (LEGBA_IS_SERVER (server), FALSE);
  g_return_val_if_fail (id != NULL && name != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  index = legba_server_app_limit_index (name);
  if (index < 0) {
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        g_strv_contains (legba_server_get_limit_names (), name) ?
        "%s applies to connections before their app is known: set it for "
        "the whole server" : "%s: unknown limit", name);
    return FALSE;
  }
  pspec = G_PARAM_SPEC_UINT (g_object_class_find_property (G_OBJECT_GET_CLASS
          (server), name));
  if (value < pspec->minimum) {
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "%s: %u is below its minimum, %u", name, value, pspec->minimum);
    return FALSE;
  }
  if (!legba_server_has_app (server, id)) {
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "no app with id %s", id);
    return FALSE;
  }

  own = g_hash_table_lookup (server->app_limits, id);
  if (own == NULL) {
    own = g_new0 (LegbaAppLimits, 1);
    g_hash_table_insert (server->app_limits, g_strdup (id), own);
  }
  own->set |= G_GUINT64_CONSTANT (1) << index;
  legba_server_app_limit_set (&own->values, index, value);
  if (server->started)
    legba_server_apply_app_limits (server);
  return TRUE;
}

static gboolean
legba_app_limits_equal (const LegbaAppLimits * a, const LegbaAppLimits * b)
{
  if (a == NULL || b == NULL)
    return a == b;
  if (a->set != b->set)
    return FALSE;
  for (guint i = 0; i < legba_server_n_app_limits (); i++) {
    if ((a->set & (G_GUINT64_CONSTANT (1) << i)) &&
        legba_server_app_limit_get (&a->values, i) !=
        legba_server_app_limit_get (&b->values, i))
      return FALSE;
  }
  return TRUE;
}

char **
legba_server_take_app_limits (LegbaServer * self, LegbaServer * other,
    const char *keep_app_id)
{
  g_autoptr (GHashTable) old = self->app_limits;
  g_autoptr (GStrvBuilder) changed = g_strv_builder_new ();
  LegbaAppLimits *kept = NULL;
  GHashTableIter iter;
  gpointer id, own;

  self->app_limits = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      g_free);
  if (keep_app_id != NULL &&
      g_hash_table_steal_extended (old, keep_app_id, NULL, (gpointer *) & kept))
    g_hash_table_insert (self->app_limits, g_strdup (keep_app_id), kept);

  g_hash_table_iter_init (&iter, other->app_limits);
  while (g_hash_table_iter_next (&iter, &id, &own)) {
    if (keep_app_id != NULL && g_str_equal (id, keep_app_id))
      continue;
    g_hash_table_insert (self->app_limits, g_strdup (id),
        g_memdup2 (own, sizeof (LegbaAppLimits)));
    if (!legba_app_limits_equal (own, g_hash_table_lookup (old, id)))
      g_strv_builder_add (changed, id);
  }
  /* Apps that had values of their own and have none now */
  g_hash_table_iter_init (&iter, old);
  while (g_hash_table_iter_next (&iter, &id, NULL)) {
    if (!g_hash_table_contains (self->app_limits, id))
      g_strv_builder_add (changed, id);
  }
  return g_strv_builder_end (changed);
}

/* ---- The HTTP API's rate ---- */

/* The app of a path /apps/ID/..., when there is one. */
static LegbaHubApp *
legba_server_api_app (LegbaServer * self, const char *path)
{
  g_autofree char *id = NULL;
  const char *rest, *slash;

  if (path == NULL || !g_str_has_prefix (path, "/apps/"))
    return NULL;
  rest = path + strlen ("/apps/");
  slash = strchr (rest, '/');
  id = slash ? g_strndup (rest, slash - rest) : g_strdup (rest);
  return legba_hub_find_app_by_id (self->hub, id);
}

static void
legba_server_api_count_refused (LegbaServer * self, const char *app_id)
{
  guint64 *count = g_hash_table_lookup (self->api_refused, app_id);

  if (count == NULL) {
    count = g_new0 (guint64, 1);
    g_hash_table_insert (self->api_refused, g_strdup (app_id), count);
  }
  (*count)++;
}

gboolean
legba_server_api_admit (LegbaServer * self, SoupServerMessage * msg,
    const char *path)
{
  LegbaHubApp *app = legba_server_api_app (self, path);
  LegbaApiBucket *bucket;
  g_autofree char *retry_s = NULL;
  g_autofree char *error = NULL;
  double rate, wait;
  guint wait_s;
  gint64 now;

  if (app == NULL)
    return TRUE;
  rate = legba_hub_app_get_limits (app)->api_requests_per_second;
  if (rate == 0)
    return TRUE;

  /* A token bucket: as many tokens as a second's requests at most,
   * refilled at rate. */
  now = g_get_monotonic_time ();
  bucket = g_hash_table_lookup (self->api_buckets, app);
  if (bucket == NULL) {
    bucket = g_new0 (LegbaApiBucket, 1);
    bucket->tokens = rate;
    bucket->refilled_at = now;
    g_hash_table_insert (self->api_buckets, app, bucket);
  }
  bucket->tokens = MIN (rate, bucket->tokens +
      (double) (now - bucket->refilled_at) * rate / G_USEC_PER_SEC);
  bucket->refilled_at = now;
  if (bucket->tokens >= 1) {
    bucket->tokens -= 1;
    return TRUE;
  }

  /* RFC 6585 §4: 429, and RFC 9110 §10.2.3: Retry-After in whole seconds,
   * when the next token comes. */
  wait = (1 - bucket->tokens) / rate;
  wait_s = (guint) MIN (wait, 3600);
  if (wait_s < wait || wait_s == 0)
    wait_s++;
  retry_s = g_strdup_printf ("%u", wait_s);
  soup_message_headers_replace (soup_server_message_get_response_headers
      (msg), "Retry-After", retry_s);
  error = g_strdup_printf ("Too many requests: app %s may make %u HTTP API "
      "requests a second", legba_hub_app_get_id (app), (guint) rate);
  /* (libsoup 3.2 has no SOUP_STATUS_ name for it) */
  legba_server_respond_error (msg, 429, error);
  legba_server_api_count_refused (self, legba_hub_app_get_id (app));
  legba_server_log (G_LOG_LEVEL_INFO, "http-rate-limited", "APP_ID",
      legba_hub_app_get_id (app), "RETRY_AFTER", retry_s, NULL);
  return FALSE;
}

void
legba_server_render_api_metrics (LegbaServer * self, GString * out)
{
  g_autoptr (GList) ids = g_hash_table_get_keys (self->api_refused);

  g_string_append (out, "# HELP legba_api_rate_limited_total HTTP API "
      "requests answered 429, per app, for its api-requests-per-second.\n"
      "# TYPE legba_api_rate_limited_total counter\n");
  ids = g_list_sort (ids, (GCompareFunc) strcmp);
  for (GList * l = ids; l != NULL; l = l->next) {
    g_autofree char *id = g_strescape (l->data, NULL);

    g_string_append_printf (out, "legba_api_rate_limited_total{app=\"%s\"} %"
        G_GUINT64_FORMAT "\n", id,
        *(guint64 *) g_hash_table_lookup (self->api_refused, l->data));
  }
}
