/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-server's configuration file: a GKeyFile with the groups [server],
 * [limits], [redis], [turn], [webhooks], [sfu] and one [app NAME] per app
 * (docs/server.md,
 * docs/scale-out.md). The whole file is
 * checked before anything is applied, and unknown groups and keys are
 * errors, so that a typo does not silently leave a default in force.
 */
#include <legba/server/legba-server-private.h>
#include <legba/server/legba-relay.h>
#include <legba/common/legba-turn.h>
#include <legba/server/legba-sfu.h>

#include <string.h>

typedef struct
{
  const char *path;
  GKeyFile *file;

  /* What the file sets, applied once all of it is valid. */
  GPtrArray *names;             /* property names */
  GArray *values;               /* GValue, one per name */
  char *tls_cert;
  char *tls_key;
  GPtrArray *apps;              /* char *[5], see APP_GROUP */
  GPtrArray *webhooks;          /* GStrv {app id, spec} */
  GPtrArray *app_limits;        /* GStrv {app id, limit, value} */
  LegbaWebhookSettings webhook_settings;
} LegbaConfig;

static void
legba_config_clear (LegbaConfig * config)
{
  g_ptr_array_unref (config->names);
  g_array_unref (config->values);
  g_free (config->tls_cert);
  g_free (config->tls_key);
  g_ptr_array_unref (config->apps);
  g_ptr_array_unref (config->webhooks);
  g_ptr_array_unref (config->app_limits);
}

/* The values of an [app NAME] group: id, key, secret, then the group,
 * then "true" when it counts subscriptions (NULL otherwise), its topology
 * and its SFU room prefixes (comma-separated), NULL when not given. */
#define APP_GROUP 3
#define APP_COUNTING 4
#define APP_TOPOLOGY 5
#define APP_PREFIXES 6
#define APP_N_FIELDS 7

static void
legba_config_app_free (gpointer data)
{
  char **app = data;
  guint i;

  for (i = 0; i < APP_N_FIELDS; i++)
    g_free (app[i]);
  g_free (app);
}

/* Sets error to "FILE: [GROUP] KEY: WHAT" and returns FALSE. */
static gboolean
legba_config_fail (LegbaConfig * config, const char *group, const char *key,
    GError ** error, const char *what)
{
  if (key != NULL)
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "%s: [%s] %s: %s", config->path, group, key, what);
  else
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "%s: [%s]: %s", config->path, group, what);
  return FALSE;
}

static void
legba_config_set (LegbaConfig * config, const char *property, GValue * value)
{
  g_ptr_array_add (config->names, (gpointer) property);
  g_array_append_vals (config->values, value, 1);
}

static gboolean
legba_config_uint (LegbaConfig * config, const char *group, const char *key,
    const char *property, guint min, guint max, GError ** error)
{
  g_autofree char *raw = g_key_file_get_value (config->file, group, key,
      NULL);
  g_autofree char *text = g_strstrip (g_strdup (raw ? raw : ""));
  GValue value = G_VALUE_INIT;
  guint64 number;

  if (!g_ascii_string_to_unsigned (text, 10, min, max, &number, NULL)) {
    g_autofree char *what = g_strdup_printf ("'%s' is not a whole number "
        "from %u to %u", text, min, max);

    return legba_config_fail (config, group, key, error, what);
  }
  g_value_init (&value, G_TYPE_UINT);
  g_value_set_uint (&value, (guint) number);
  legba_config_set (config, property, &value);
  return TRUE;
}

static gboolean
legba_config_string (LegbaConfig * config, const char *group,
    const char *key, const char *property, GError ** error)
{
  g_autoptr (GError) local_error = NULL;
  g_autofree char *text = g_key_file_get_string (config->file, group, key,
      &local_error);
  GValue value = G_VALUE_INIT;

  if (text == NULL)
    return legba_config_fail (config, group, key, error, local_error->message);
  if (*g_strstrip (text) == '\0')
    return legba_config_fail (config, group, key, error, "empty value");
  g_value_init (&value, G_TYPE_STRING);
  g_value_take_string (&value, g_steal_pointer (&text));
  legba_config_set (config, property, &value);
  return TRUE;
}

/* "a;b" (GKeyFile lists) or "a, b"; "*" allows any origin. */
static gboolean
legba_config_origins (LegbaConfig * config, const char *group,
    const char *key, GError ** error)
{
  g_autofree char *text = g_key_file_get_string (config->file, group, key,
      NULL);
  g_auto (GStrv) parts = g_strsplit_set (text ? text : "", ";,", -1);
  g_autoptr (GStrvBuilder) origins = g_strv_builder_new ();
  GValue value = G_VALUE_INIT;
  gboolean any = FALSE, none = TRUE;
  char **p;

  for (p = parts; *p != NULL; p++) {
    g_strstrip (*p);
    if (**p == '\0')
      continue;
    none = FALSE;
    if (g_str_equal (*p, "*"))
      any = TRUE;
    g_strv_builder_add (origins, *p);
  }
  if (none)
    return legba_config_fail (config, group, key, error,
        "no origin given (use * to allow any)");

  g_value_init (&value, G_TYPE_STRV);
  if (!any)
    g_value_take_boxed (&value, g_strv_builder_end (origins));
  legba_config_set (config, "allowed-origins", &value);
  return TRUE;
}

static char *
legba_config_path (LegbaConfig * config, const char *group, const char *key)
{
  g_autofree char *text = g_key_file_get_string (config->file, group, key,
      NULL);
  g_autofree char *dir = NULL;

  if (text == NULL || *g_strstrip (text) == '\0')
    return NULL;
  if (g_path_is_absolute (text))
    return g_steal_pointer (&text);
  /* Relative paths are relative to the configuration file. */
  dir = g_path_get_dirname (config->path);
  return g_build_filename (dir, text, NULL);
}

static gboolean
legba_config_server_key (LegbaConfig * config, const char *group,
    const char *key, GError ** error)
{
  if (g_str_equal (key, "bind"))
    return legba_config_string (config, group, key, "listen-address", error);
  if (g_str_equal (key, "port"))
    return legba_config_uint (config, group, key, "listen-port", 0, 65535,
        error);
  if (g_str_equal (key, "metrics-bind"))
    return legba_config_string (config, group, key, "metrics-address", error);
  if (g_str_equal (key, "metrics-port"))
    return legba_config_uint (config, group, key, "metrics-port", 0, 65535,
        error);
  if (g_str_equal (key, "metrics-token"))
    return legba_config_string (config, group, key, "metrics-token", error);
  if (g_str_equal (key, "allowed-origins"))
    return legba_config_origins (config, group, key, error);
  if (g_str_equal (key, "compression")) {
    g_autoptr (GError) local_error = NULL;
    gboolean on = g_key_file_get_boolean (config->file, group, key,
        &local_error);
    GValue value = G_VALUE_INIT;

    if (local_error != NULL)
      return legba_config_fail (config, group, key, error,
          "not a boolean (true or false)");
    g_value_init (&value, G_TYPE_BOOLEAN);
    g_value_set_boolean (&value, on);
    legba_config_set (config, "compression", &value);
    return TRUE;
  }
  if (g_str_equal (key, "tls-cert")) {
    g_free (config->tls_cert);
    config->tls_cert = legba_config_path (config, group, key);
    return config->tls_cert != NULL ||
        legba_config_fail (config, group, key, error, "empty value");
  }
  if (g_str_equal (key, "tls-key")) {
    g_free (config->tls_key);
    config->tls_key = legba_config_path (config, group, key);
    return config->tls_key != NULL ||
        legba_config_fail (config, group, key, error, "empty value");
  }
  return legba_config_fail (config, group, key, error, "unknown key");
}

/* [redis]: the cluster (docs/scale-out.md). */
static gboolean
legba_config_redis_key (LegbaConfig * config, const char *group,
    const char *key, GError ** error)
{
  if (g_str_equal (key, "url")) {
    g_autofree char *url = g_key_file_get_string (config->file, group, key,
        NULL);
    g_autoptr (GError) local_error = NULL;
    LegbaRedisAddress address;

    if (url == NULL || !legba_redis_address_parse (g_strstrip (url),
            &address, &local_error))
      return legba_config_fail (config, group, key, error, local_error ?
          local_error->message : "empty value");
    legba_redis_address_clear (&address);
    return legba_config_string (config, group, key, "redis-url", error);
  }
  if (g_str_equal (key, "instance-id")) {
    g_autofree char *id = g_key_file_get_string (config->file, group, key,
        NULL);

    if (id == NULL || !legba_relay_instance_id_is_valid (g_strstrip (id)))
      return legba_config_fail (config, group, key, error,
          "1 to 64 of A-Z a-z 0-9 . _ - :");
    return legba_config_string (config, group, key, "instance-id", error);
  }
  if (g_str_equal (key, "prefix"))
    return legba_config_string (config, group, key, "redis-prefix", error);
  if (g_str_equal (key, "retention"))
    return legba_config_uint (config, group, key, "redis-retention",
        LEGBA_RELAY_MIN_RETENTION, G_MAXINT, error);
  if (g_str_equal (key, "instance-ttl"))
    return legba_config_uint (config, group, key, "redis-instance-ttl",
        LEGBA_RELAY_MIN_INSTANCE_TTL, 3600, error);
  return legba_config_fail (config, group, key, error, "unknown key");
}

/* [turn] urls: "a;b" (GKeyFile lists) or "a, b", each a turn: or turns:
 * URL. */
static gboolean
legba_config_turn_urls (LegbaConfig * config, const char *group,
    const char *key, GError ** error)
{
  g_autofree char *text = g_key_file_get_string (config->file, group, key,
      NULL);
  g_auto (GStrv) parts = g_strsplit_set (text ? text : "", ";,", -1);
  g_autoptr (GStrvBuilder) urls = g_strv_builder_new ();
  GValue value = G_VALUE_INIT;
  gboolean none = TRUE;

  for (char **p = parts; *p != NULL; p++) {
    g_autoptr (GError) local_error = NULL;

    g_strstrip (*p);
    if (**p == '\0')
      continue;
    if (!legba_turn_url_check (*p, &local_error))
      return legba_config_fail (config, group, key, error,
          local_error->message);
    none = FALSE;
    g_strv_builder_add (urls, *p);
  }
  if (none)
    return legba_config_fail (config, group, key, error, "no URL given");
  g_value_init (&value, G_TYPE_STRV);
  g_value_take_boxed (&value, g_strv_builder_end (urls));
  legba_config_set (config, "turn-urls", &value);
  return TRUE;
}

/* [turn]: credentials for room members (docs/server.md). */
static gboolean
legba_config_turn (LegbaConfig * config, const char *group, GError ** error)
{
  g_auto (GStrv) keys = g_key_file_get_keys (config->file, group, NULL, NULL);
  gboolean urls = FALSE, secret = FALSE;

  for (char **key = keys; key && *key; key++) {
    gboolean ok;

    if (g_str_equal (*key, "urls")) {
      ok = legba_config_turn_urls (config, group, *key, error);
      urls = TRUE;
    } else if (g_str_equal (*key, "secret")) {
      ok = legba_config_string (config, group, *key, "turn-secret", error);
      secret = TRUE;
    } else if (g_str_equal (*key, "ttl")) {
      ok = legba_config_uint (config, group, *key, "turn-ttl", 60, G_MAXINT,
          error);
    } else {
      ok = legba_config_fail (config, group, *key, error, "unknown key");
    }
    if (!ok)
      return FALSE;
  }
  if (urls != secret)
    return legba_config_fail (config, group, urls ? "secret" : "urls", error,
        "urls and secret go together");
  return TRUE;
}

static gboolean
legba_config_limits (LegbaConfig * config, const char *group,
    GObjectClass * klass, GError ** error)
{
  g_auto (GStrv) keys = g_key_file_get_keys (config->file, group, NULL, NULL);
  const char *const *names = legba_server_get_limit_names ();
  char **key;

  for (key = keys; key && *key; key++) {
    GParamSpecUInt *pspec;

    if (!g_strv_contains (names, *key))
      return legba_config_fail (config, group, *key, error, "unknown limit");
    pspec = G_PARAM_SPEC_UINT (g_object_class_find_property (klass, *key));
    if (!legba_config_uint (config, group, *key,
            g_param_spec_get_name (G_PARAM_SPEC (pspec)), pspec->minimum,
            pspec->maximum, error))
      return FALSE;
  }
  return TRUE;
}

/* [webhooks]: what every webhook shares (docs/server.md, "Webhooks"). */
static gboolean
legba_config_webhooks (LegbaConfig * config, const char *group, GError ** error)
{
  static const struct
  {
    const char *key;
    gsize offset;
    guint min, max;
  } keys[] = {
    {"batch-ms", G_STRUCT_OFFSET (LegbaWebhookSettings, batch_ms), 0, 10000},
    {"delay-ms", G_STRUCT_OFFSET (LegbaWebhookSettings, delay_ms), 0, 60000},
    {"timeout", G_STRUCT_OFFSET (LegbaWebhookSettings, timeout_s), 1, 300},
    {"max-queued", G_STRUCT_OFFSET (LegbaWebhookSettings, max_queued), 1,
        10000000},
    {"backoff-ms", G_STRUCT_OFFSET (LegbaWebhookSettings, backoff_ms), 1,
        LEGBA_WEBHOOK_MAX_BACKOFF_MS},
    {"retry", G_STRUCT_OFFSET (LegbaWebhookSettings, retry_s), 0, 86400},
  };
  g_auto (GStrv) names = g_key_file_get_keys (config->file, group, NULL, NULL);

  for (char **name = names; name && *name; name++) {
    g_autofree char *raw = g_key_file_get_value (config->file, group, *name,
        NULL);
    guint64 number;
    guint i;

    for (i = 0; i < G_N_ELEMENTS (keys); i++)
      if (g_str_equal (*name, keys[i].key))
        break;
    if (i == G_N_ELEMENTS (keys))
      return legba_config_fail (config, group, *name, error, "unknown key "
          "(batch-ms, delay-ms, timeout, max-queued, backoff-ms, retry)");
    if (!g_ascii_string_to_unsigned (g_strstrip (raw), 10, keys[i].min,
            keys[i].max, &number, NULL)) {
      g_autofree char *what = g_strdup_printf ("'%s' is not a whole number "
          "from %u to %u", raw, keys[i].min, keys[i].max);

      return legba_config_fail (config, group, *name, error, what);
    }
    G_STRUCT_MEMBER (guint, &config->webhook_settings, keys[i].offset) =
        (guint) number;
  }
  return TRUE;
}

/* An app's webhooks: "URL EVENT,...; URL EVENT,..." */
static gboolean
legba_config_app_webhooks (LegbaConfig * config, const char *group,
    const char *app_id, GError ** error)
{
  g_auto (GStrv) specs = g_key_file_get_string_list (config->file, group,
      "webhooks", NULL, NULL);
  gboolean none = TRUE;

  for (char **spec = specs; spec && *spec; spec++) {
    g_autoptr (GError) local_error = NULL;
    char **hook;

    if (*g_strstrip (*spec) == '\0')
      continue;
    if (!legba_webhook_spec_parse (*spec, NULL, NULL, &local_error))
      return legba_config_fail (config, group, "webhooks", error,
          local_error->message);
    hook = g_new0 (char *, 3);
    hook[0] = g_strdup (app_id);
    hook[1] = g_strdup (*spec);
    g_ptr_array_add (config->webhooks, hook);
    none = FALSE;
  }
  if (none)
    return legba_config_fail (config, group, "webhooks", error,
        "no webhook given (URL EVENT,...; ...)");
  return TRUE;
}

/* An app's own limits: any limit of [limits] but those that apply before
 * a connection's app is known. */
static gboolean
legba_config_app_limits (LegbaConfig * config, const char *group,
    const char *app_id, GError ** error)
{
  g_auto (GStrv) keys = g_key_file_get_keys (config->file, group, NULL, NULL);
  GObjectClass *klass = g_type_class_peek (LEGBA_TYPE_SERVER);

  for (char **key = keys; key && *key; key++) {
    g_autofree char *raw = NULL;
    GParamSpecUInt *pspec;
    guint64 number;
    char **limit;

    if (!g_strv_contains (legba_server_get_limit_names (), *key))
      continue;
    if (legba_server_app_limit_index (*key) < 0)
      return legba_config_fail (config, group, *key, error, "applies to "
          "connections before their app is known: set it in [limits]");
    pspec = G_PARAM_SPEC_UINT (g_object_class_find_property (klass, *key));
    raw = g_key_file_get_value (config->file, group, *key, NULL);
    if (!g_ascii_string_to_unsigned (g_strstrip (raw), 10, pspec->minimum,
            pspec->maximum, &number, NULL)) {
      g_autofree char *what = g_strdup_printf ("'%s' is not a whole number "
          "from %u to %u", raw, pspec->minimum, pspec->maximum);

      return legba_config_fail (config, group, *key, error, what);
    }
    limit = g_new0 (char *, 4);
    limit[0] = g_strdup (app_id);
    limit[1] = g_strdup (*key);
    limit[2] = g_strdup_printf ("%" G_GUINT64_FORMAT, number);
    g_ptr_array_add (config->app_limits, limit);
  }
  return TRUE;
}

/* [app NAME] subscription-count: true or false. */
static gboolean
legba_config_app_counting (LegbaConfig * config, const char *group,
    const char *key, char **app, GError ** error)
{
  g_autoptr (GError) local_error = NULL;
  gboolean on = g_key_file_get_boolean (config->file, group, key,
      &local_error);

  if (local_error != NULL)
    return legba_config_fail (config, group, key, error,
        "not a boolean (true or false)");
  app[APP_COUNTING] = on ? g_strdup ("true") : NULL;
  return TRUE;
}

/* A list "a;b" (GKeyFile lists) or "a, b", none empty; NULL with error
 * set when nothing is given. */
static char **
legba_config_list (LegbaConfig * config, const char *group, const char *key)
{
  g_autofree char *text = g_key_file_get_string (config->file, group, key,
      NULL);
  g_auto (GStrv) parts = g_strsplit_set (text ? text : "", ";,", -1);
  g_autoptr (GStrvBuilder) items = g_strv_builder_new ();
  gboolean none = TRUE;

  for (char **p = parts; *p != NULL; p++) {
    g_strstrip (*p);
    if (**p == '\0')
      continue;
    none = FALSE;
    g_strv_builder_add (items, *p);
  }
  return none ? NULL : g_strv_builder_end (items);
}

/* [sfu] and [app NAME]: topology = mesh|sfu|auto[:N], sfu-prefixes = a, b. */
static gboolean
legba_config_topology_value (LegbaConfig * config, const char *group,
    const char *key, char **topology, char ***prefixes, GError ** error)
{
  g_autoptr (GError) local_error = NULL;
  LegbaTopology parsed;

  if (g_str_equal (key, "topology")) {
    *topology = g_key_file_get_string (config->file, group, key, NULL);
    if (*topology == NULL ||
        !legba_topology_parse (g_strstrip (*topology), &parsed, &local_error))
      return legba_config_fail (config, group, key, error, local_error ?
          local_error->message : "not a string");
    return TRUE;
  }
  *prefixes = legba_config_list (config, group, key);
  if (*prefixes == NULL)
    return legba_config_fail (config, group, key, error, "no prefix given");
  if (!legba_sfu_prefixes_check ((const char *const *) *prefixes, &local_error)) {
    g_clear_pointer (prefixes, g_strfreev);
    return legba_config_fail (config, group, key, error, local_error->message);
  }
  return TRUE;
}

static gboolean
legba_config_app_topology (LegbaConfig * config, const char *group,
    const char *key, char **app, GError ** error)
{
  g_auto (GStrv) prefixes = NULL;

  if (!legba_config_topology_value (config, group, key, &app[APP_TOPOLOGY],
          &prefixes, error))
    return FALSE;
  if (prefixes != NULL)
    app[APP_PREFIXES] = g_strjoinv (",", prefixes);
  return TRUE;
}

/* [sfu] janus-url, janus-ws-url: lists of http(s):// and ws(s):// URLs. */
static gboolean
legba_config_sfu_urls (LegbaConfig * config, const char *group,
    const char *key, GError ** error)
{
  gboolean ws = g_str_equal (key, "janus-ws-url");
  char **urls = legba_config_list (config, group, key);
  GValue value = G_VALUE_INIT;

  if (urls == NULL)
    return legba_config_fail (config, group, key, error, "no URL given");
  for (char **p = urls; *p != NULL; p++) {
    g_autoptr (GError) local_error = NULL;

    if (!legba_sfu_url_check (*p, ws, &local_error)) {
      g_strfreev (urls);
      return legba_config_fail (config, group, key, error,
          local_error->message);
    }
  }
  g_value_init (&value, G_TYPE_STRV);
  g_value_take_boxed (&value, urls);
  legba_config_set (config, ws ? "sfu-janus-ws-urls" : "sfu-janus-urls",
      &value);
  return TRUE;
}

/* [sfu]: SFU rooms on Janus (docs/server.md). */
static gboolean
legba_config_sfu (LegbaConfig * config, const char *group, GError ** error)
{
  g_auto (GStrv) keys = g_key_file_get_keys (config->file, group, NULL, NULL);
  guint n_urls = 0, n_ws = 0;

  for (char **key = keys; key && *key; key++) {
    g_autofree char *topology = NULL;
    char **prefixes = NULL;
    GValue value = G_VALUE_INIT;
    gboolean ok;

    if (g_str_equal (*key, "janus-url") || g_str_equal (*key, "janus-ws-url")) {
      g_auto (GStrv) urls = legba_config_list (config, group, *key);

      if (g_str_equal (*key, "janus-url"))
        n_urls = urls ? g_strv_length (urls) : 0;
      else
        n_ws = urls ? g_strv_length (urls) : 0;
      ok = legba_config_sfu_urls (config, group, *key, error);
    } else if (g_str_equal (*key, "api-secret")) {
      ok = legba_config_string (config, group, *key, "sfu-api-secret", error);
    } else if (g_str_equal (*key, "admin-key")) {
      ok = legba_config_string (config, group, *key, "sfu-admin-key", error);
    } else if (g_str_equal (*key, "topology")
        || g_str_equal (*key, "sfu-prefixes")) {
      ok = legba_config_topology_value (config, group, *key, &topology,
          &prefixes, error);
      if (ok && topology != NULL) {
        g_value_init (&value, G_TYPE_STRING);
        g_value_take_string (&value, g_steal_pointer (&topology));
        legba_config_set (config, "sfu-topology", &value);
      } else if (ok) {
        g_value_init (&value, G_TYPE_STRV);
        g_value_take_boxed (&value, prefixes);
        legba_config_set (config, "sfu-prefixes", &value);
      }
    } else {
      return legba_config_fail (config, group, *key, error, "unknown key "
          "(expected janus-url, janus-ws-url, api-secret, admin-key, "
          "topology, sfu-prefixes)");
    }
    if (!ok)
      return FALSE;
  }
  if (n_urls != n_ws)
    return legba_config_fail (config, group, n_urls < n_ws ? "janus-url" :
        "janus-ws-url", error, "janus-url and janus-ws-url name the same "
        "Janus instances, in the same order: give as many of each");
  return TRUE;
}

static gboolean
legba_config_app (LegbaConfig * config, const char *group, GError ** error)
{
  static const char *const fields[] = { "id", "key", "secret", NULL };
  g_auto (GStrv) keys = g_key_file_get_keys (config->file, group, NULL, NULL);
  char **app = g_new0 (char *, APP_N_FIELDS);
  char **key;
  guint i;

  app[APP_GROUP] = g_strdup (group);
  g_ptr_array_add (config->apps, app);
  for (key = keys; key && *key; key++) {
    if (g_str_equal (*key, "subscription-count")) {
      if (!legba_config_app_counting (config, group, *key, app, error))
        return FALSE;
    } else if (g_str_equal (*key, "topology")
        || g_str_equal (*key, "sfu-prefixes")) {
      if (!legba_config_app_topology (config, group, *key, app, error))
        return FALSE;
    } else if (!g_strv_contains (fields, *key)
        && !g_str_equal (*key, "webhooks")
        && !g_strv_contains (legba_server_get_limit_names (), *key)) {
      return legba_config_fail (config, group, *key, error, "unknown key "
          "(an app has id, key, secret, webhooks, subscription-count, "
          "topology, sfu-prefixes and limits)");
    }
  }
  for (i = 0; fields[i] != NULL; i++) {
    app[i] = g_key_file_get_string (config->file, group, fields[i], NULL);
    /* The default configuration leaves the secret to the operator. */
    if (i == 2 && app[i] != NULL && *g_strstrip (app[i]) == '\0')
      return legba_config_fail (config, group, fields[i], error,
          "not set yet: set it to a long random string known only to the "
          "app's backend (openssl rand -hex 32)");
    if (app[i] == NULL || *g_strstrip (app[i]) == '\0')
      return legba_config_fail (config, group, fields[i], error,
          "missing or empty");
  }
  for (i = 0; i + 1 < config->apps->len; i++) {
    char **other = g_ptr_array_index (config->apps, i);

    g_autofree char *what = g_strdup_printf ("already the %s of [%s]",
        g_str_equal (other[0], app[0]) ? "id" : "key", other[APP_GROUP]);

    if (g_str_equal (other[0], app[0]))
      return legba_config_fail (config, group, "id", error, what);
    if (g_str_equal (other[1], app[1]))
      return legba_config_fail (config, group, "key", error, what);
  }
  if (!legba_config_app_limits (config, group, app[0], error))
    return FALSE;
  if (g_key_file_has_key (config->file, group, "webhooks", NULL))
    return legba_config_app_webhooks (config, group, app[0], error);
  return TRUE;
}

static gboolean
legba_config_read (LegbaConfig * config, GError ** error)
{
  g_auto (GStrv) groups = g_key_file_get_groups (config->file, NULL);
  g_autoptr (GTypeClass) klass = g_type_class_ref (LEGBA_TYPE_SERVER);
  char **group;

  for (group = groups; *group != NULL; group++) {
    if (g_str_equal (*group, "server")) {
      g_auto (GStrv) keys = g_key_file_get_keys (config->file, *group, NULL,
          NULL);
      char **key;

      for (key = keys; key && *key; key++) {
        if (!legba_config_server_key (config, *group, *key, error))
          return FALSE;
      }
    } else if (g_str_equal (*group, "limits")) {
      if (!legba_config_limits (config, *group, G_OBJECT_CLASS (klass), error))
        return FALSE;
    } else if (g_str_equal (*group, "redis")) {
      g_auto (GStrv) keys = g_key_file_get_keys (config->file, *group, NULL,
          NULL);

      for (char **key = keys; key && *key; key++) {
        if (!legba_config_redis_key (config, *group, *key, error))
          return FALSE;
      }
    } else if (g_str_equal (*group, "turn")) {
      if (!legba_config_turn (config, *group, error))
        return FALSE;
    } else if (g_str_equal (*group, "webhooks")) {
      if (!legba_config_webhooks (config, *group, error))
        return FALSE;
    } else if (g_str_equal (*group, "sfu")) {
      if (!legba_config_sfu (config, *group, error))
        return FALSE;
    } else if (g_str_has_prefix (*group, "app ") && (*group)[4] != '\0') {
      if (!legba_config_app (config, *group, error))
        return FALSE;
    } else {
      return legba_config_fail (config, *group, NULL, error,
          "unknown group (expected server, limits, redis, turn, webhooks, "
          "sfu or \"app NAME\")");
    }
  }

  if ((config->tls_cert == NULL) != (config->tls_key == NULL))
    return legba_config_fail (config, "server",
        config->tls_cert ? "tls-key" : "tls-cert", error,
        "tls-cert and tls-key go together");
  if (config->tls_cert != NULL) {
    g_autoptr (GError) local_error = NULL;
    g_autoptr (GTlsCertificate) certificate =
        g_tls_certificate_new_from_files (config->tls_cert, config->tls_key,
        &local_error);

    if (certificate == NULL) {
      g_autofree char *what = g_strdup_printf ("%s with key %s: %s",
          config->tls_cert, config->tls_key, local_error->message);

      return legba_config_fail (config, "server", "tls-cert", error, what);
    }
  }
  return TRUE;
}

static gboolean
legba_config_apply (LegbaConfig * config, LegbaServer * server, GError ** error)
{
  guint i;

  g_object_setv (G_OBJECT (server), config->names->len,
      (const char **) config->names->pdata,
      (const GValue *) config->values->data);

  if (config->tls_cert != NULL) {
    g_autoptr (GError) local_error = NULL;

    if (!legba_server_set_tls_files (server, config->tls_cert,
            config->tls_key, &local_error))
      return legba_config_fail (config, "server", "tls-cert", error,
          local_error->message);
  }

  for (i = 0; i < config->apps->len; i++) {
    char **app = g_ptr_array_index (config->apps, i);
    g_autoptr (GError) local_error = NULL;

    if (!legba_server_add_app (server, app[0], app[1], app[2], &local_error) ||
        (app[APP_COUNTING] != NULL &&
            !legba_server_set_app_subscription_count (server, app[0], TRUE,
                &local_error)))
      return legba_config_fail (config, app[APP_GROUP], NULL, error,
          local_error->message);
    if (app[APP_TOPOLOGY] != NULL || app[APP_PREFIXES] != NULL) {
      g_auto (GStrv) prefixes = app[APP_PREFIXES] ?
          g_strsplit (app[APP_PREFIXES], ",", -1) : NULL;

      legba_server_set_app_topology (server, app[0], app[APP_TOPOLOGY],
          (const char *const *) prefixes);
    }
  }
  for (i = 0; i < config->app_limits->len; i++) {
    char **limit = g_ptr_array_index (config->app_limits, i);
    g_autoptr (GError) local_error = NULL;

    if (!legba_server_set_app_limit (server, limit[0], limit[1],
            (guint) g_ascii_strtoull (limit[2], NULL, 10), &local_error)) {
      g_propagate_error (error, g_steal_pointer (&local_error));
      return FALSE;
    }
  }
  legba_server_set_webhook_settings (server, &config->webhook_settings);
  for (i = 0; i < config->webhooks->len; i++) {
    char **hook = g_ptr_array_index (config->webhooks, i);

    if (!legba_server_add_webhook (server, hook[0], hook[1], error))
      return FALSE;
  }
  return TRUE;
}

/**
 * legba_server_load_config:
 * @server: a #LegbaServer
 * @path: the configuration file
 * @error: return location for a #GError
 *
 * Configures @server from a key file: `[server]` (bind, port, tls-cert,
 * tls-key, allowed-origins, compression, metrics-bind, metrics-port,
 * metrics-token), `[limits]` (each limit by its property name), `[redis]`
 * (url, instance-id, prefix, retention, instance-ttl), `[turn]` (urls,
 * secret, ttl: TURN credentials for room members), `[webhooks]`
 * (batch-ms, delay-ms, timeout, max-queued, backoff-ms, retry) and one
 * `[app NAME]` group per app (id, key, secret, webhooks,
 * subscription-count, and the app's own value of any limit but the four
 * that apply before a connection's app is known). Relative paths are taken
 * from the file's directory. Nothing is applied unless the whole file is
 * valid; errors (%LEGBA_SERVER_ERROR_CONFIG) name the file, group and key.
 *
 * Returns: %TRUE on success
 */
gboolean
legba_server_load_config (LegbaServer * server, const char *path,
    GError ** error)
{
  g_autoptr (GKeyFile) file = g_key_file_new ();
  g_autoptr (GError) local_error = NULL;
  LegbaConfig config = { 0, };
  gboolean ok;

  g_return_val_if_fail (LEGBA_IS_SERVER (server), FALSE);
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (!g_key_file_load_from_file (file, path, G_KEY_FILE_NONE, &local_error)) {
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "%s: %s", path, local_error->message);
    return FALSE;
  }

  config.path = path;
  config.file = file;
  config.names = g_ptr_array_new ();
  config.values = g_array_new (FALSE, TRUE, sizeof (GValue));
  g_array_set_clear_func (config.values, (GDestroyNotify) g_value_unset);
  config.apps = g_ptr_array_new_with_free_func (legba_config_app_free);
  config.webhooks = g_ptr_array_new_with_free_func ((GDestroyNotify)
      g_strfreev);
  config.app_limits = g_ptr_array_new_with_free_func ((GDestroyNotify)
      g_strfreev);
  legba_webhook_settings_init_defaults (&config.webhook_settings);

  ok = legba_config_read (&config, error) &&
      legba_config_apply (&config, server, error);
  legba_config_clear (&config);
  return ok;
}
