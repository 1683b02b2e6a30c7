/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#include <legba/server/legba-metrics.h>

#include <legba/legba-version.h>
#include <stdlib.h>
#include <string.h>

struct _LegbaMetrics
{
  GHashTable *http;             /* "route\nstatus" -> guint64 * */
  GHashTable *closes;           /* close code -> guint64 (as pointer) */
  guint64 queue_overflows;
  guint64 origin_refused;
  guint64 accept[LEGBA_ACCEPT_N_EVENTS];
  guint64 control_floods;
  guint64 inflate_limits;
};

LegbaMetrics *
legba_metrics_new (void)
{
  LegbaMetrics *metrics = g_new0 (LegbaMetrics, 1);

  metrics->http = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      g_free);
  metrics->closes = g_hash_table_new (NULL, NULL);
  return metrics;
}

void
legba_metrics_free (LegbaMetrics * metrics)
{
  if (metrics == NULL)
    return;
  g_hash_table_unref (metrics->http);
  g_hash_table_unref (metrics->closes);
  g_free (metrics);
}

static const char *
legba_metrics_apps_route (char **seg, guint n)
{
  /* seg: "", "apps", ID, ... */
  if (n == 4 && g_str_equal (seg[3], "events"))
    return "/apps/:id/events";
  if (n == 4 && g_str_equal (seg[3], "batch_events"))
    return "/apps/:id/batch_events";
  if (n == 4 && g_str_equal (seg[3], "channels"))
    return "/apps/:id/channels";
  if (n == 5 && g_str_equal (seg[3], "channels"))
    return "/apps/:id/channels/:name";
  if (n == 6 && g_str_equal (seg[3], "channels") &&
      g_str_equal (seg[5], "users"))
    return "/apps/:id/channels/:name/users";
  if (n >= 6 && g_str_equal (seg[3], "users") &&
      g_str_equal (seg[n - 1], "terminate_connections"))
    return "/apps/:id/users/:user_id/terminate_connections";
  if (n == 4 && g_str_equal (seg[3], "auth"))
    return "/apps/:id/auth";
  return "/apps/other";
}

const char *
legba_metrics_route (const char *path)
{
  g_auto (GStrv) seg = NULL;
  guint n;

  if (path == NULL)
    return "other";
  if (g_str_equal (path, "/up"))
    return "/up";
  if (g_str_equal (path, "/metrics"))
    return "/metrics";

  seg = g_strsplit (path, "/", 0);
  n = g_strv_length (seg);
  if (n == 3 && g_str_equal (seg[1], "app"))
    return "/app/:key";
  if (n >= 3 && g_str_equal (seg[1], "apps"))
    return legba_metrics_apps_route (seg, n);
  return "other";
}

void
legba_metrics_count_http (LegbaMetrics * metrics, const char *route,
    guint status)
{
  char *key = g_strdup_printf ("%s\n%u", route, status);
  guint64 *count = g_hash_table_lookup (metrics->http, key);

  if (count == NULL) {
    count = g_new0 (guint64, 1);
    g_hash_table_insert (metrics->http, key, count);
  } else {
    g_free (key);
  }
  (*count)++;
}

void
legba_metrics_count_close (LegbaMetrics * metrics, guint16 code)
{
  gpointer key = GUINT_TO_POINTER ((guint) code);
  gsize count = GPOINTER_TO_SIZE (g_hash_table_lookup (metrics->closes, key));

  g_hash_table_insert (metrics->closes, key, GSIZE_TO_POINTER (count + 1));
}

void
legba_metrics_count_queue_overflow (LegbaMetrics * metrics)
{
  metrics->queue_overflows++;
}

void
legba_metrics_count_accept (LegbaMetrics * metrics, LegbaAcceptEvent event)
{
  g_return_if_fail (event < LEGBA_ACCEPT_N_EVENTS);

  metrics->accept[event]++;
}

void
legba_metrics_count_origin_refused (LegbaMetrics * metrics)
{
  metrics->origin_refused++;
}

void
legba_metrics_count_control_flood (LegbaMetrics * metrics)
{
  metrics->control_floods++;
}

void
legba_metrics_count_inflate_limit (LegbaMetrics * metrics)
{
  metrics->inflate_limits++;
}

static void
legba_metrics_header (GString * out, const char *name, const char *type,
    const char *help)
{
  g_string_append_printf (out, "# HELP %s %s\n# TYPE %s %s\n", name, help,
      name, type);
}

static void
legba_metrics_value (GString * out, const char *name, const char *type,
    const char *help, guint64 value)
{
  legba_metrics_header (out, name, type, help);
  g_string_append_printf (out, "%s %" G_GUINT64_FORMAT "\n", name, value);
}

static void
legba_metrics_render_accept (LegbaMetrics * metrics,
    const LegbaMetricsGauges * gauges, GString * out)
{
  const guint64 *a = metrics->accept;

  legba_metrics_value (out, "legba_pending_connections", "gauge",
      "Connections accepted and not yet WebSockets nor answered.",
      gauges->pending_connections);
  legba_metrics_header (out, "legba_connections_refused_total", "counter",
      "Connections closed as soon as accepted, by reason.");
  g_string_append_printf (out, "legba_connections_refused_total"
      "{reason=\"descriptors\"} %" G_GUINT64_FORMAT "\n"
      "legba_connections_refused_total{reason=\"max-pending-per-address\"} %"
      G_GUINT64_FORMAT "\n", a[LEGBA_ACCEPT_REFUSED_DESCRIPTORS],
      a[LEGBA_ACCEPT_REFUSED_PER_ADDRESS]);
  legba_metrics_header (out, "legba_accept_paused_total", "counter",
      "Times accepting paused, by reason.");
  g_string_append_printf (out, "legba_accept_paused_total"
      "{reason=\"max-pending-connections\"} %" G_GUINT64_FORMAT "\n"
      "legba_accept_paused_total{reason=\"accept-error\"} %"
      G_GUINT64_FORMAT "\n", a[LEGBA_ACCEPT_PAUSED_PENDING],
      a[LEGBA_ACCEPT_PAUSED_ERROR]);
  legba_metrics_value (out, "legba_handshake_timeouts_total", "counter",
      "Connections shut down at handshake-timeout.",
      a[LEGBA_ACCEPT_HANDSHAKE_TIMEOUT]);
}

static gint
legba_metrics_compare_codes (gconstpointer a, gconstpointer b)
{
  guint x = GPOINTER_TO_UINT (a), y = GPOINTER_TO_UINT (b);

  return x < y ? -1 : x > y;
}

static gint
legba_metrics_compare_keys (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

static void
legba_metrics_render_errors (LegbaMetrics * metrics, LegbaHub * hub,
    GString * out)
{
  const LegbaHubCounters *counters = legba_hub_get_counters (hub);
  g_autoptr (GList) codes = g_hash_table_get_keys (metrics->closes);
  guint i;

  legba_metrics_header (out, "legba_errors_total", "counter",
      "Errors sent to clients (pusher:error or close), by code.");
  codes = g_list_sort (codes, legba_metrics_compare_codes);
  for (GList * l = codes; l != NULL; l = l->next) {
    gsize count = GPOINTER_TO_SIZE (g_hash_table_lookup (metrics->closes,
            l->data));

    g_string_append_printf (out, "legba_errors_total{code=\"%u\"} %"
        G_GSIZE_FORMAT "\n", GPOINTER_TO_UINT (l->data), count);
  }
  for (i = 0; i < G_N_ELEMENTS (counters->errors); i++) {
    if (counters->errors[i] == 0)
      continue;
    g_string_append_printf (out, "legba_errors_total{code=\"%u\"} %"
        G_GUINT64_FORMAT "\n", 4000 + i, counters->errors[i]);
  }
}

static void
legba_metrics_render_http (LegbaMetrics * metrics, GString * out)
{
  g_autofree gpointer *keys = NULL;
  guint n, i;

  legba_metrics_header (out, "legba_http_requests_total", "counter",
      "HTTP requests answered, by route and status.");
  keys = g_hash_table_get_keys_as_array (metrics->http, &n);
  qsort (keys, n, sizeof (gpointer), legba_metrics_compare_keys);
  for (i = 0; i < n; i++) {
    const char *key = keys[i];
    const char *nl = strchr (key, '\n');
    guint64 *count = g_hash_table_lookup (metrics->http, key);

    g_string_append_printf (out,
        "legba_http_requests_total{route=\"%.*s\",status=\"%s\"} %"
        G_GUINT64_FORMAT "\n", (int) (nl - key), key, nl + 1, *count);
  }
}

static void
legba_metrics_render_cache (LegbaHub * hub, GString * out)
{
  const LegbaHubCounters *c = legba_hub_get_counters (hub);
  guint channels;
  guint64 bytes;

  legba_hub_get_cache_usage (hub, &channels, &bytes);
  legba_metrics_value (out, "legba_cache_channels", "gauge",
      "Cache channels with an event kept, all apps.", channels);
  legba_metrics_value (out, "legba_cache_bytes", "gauge",
      "Bytes of the events kept for cache channels, all apps.", bytes);
  legba_metrics_value (out, "legba_cache_hits_total", "counter",
      "New subscribers of a cache channel sent its cached event.",
      c->cache_hits);
  legba_metrics_value (out, "legba_cache_misses_total", "counter",
      "New subscribers of a cache channel sent pusher:cache_miss.",
      c->cache_misses);
  legba_metrics_value (out, "legba_cache_expired_total", "counter",
      "Cached events dropped at cache-ttl.", c->cache_expired);
  legba_metrics_header (out, "legba_cache_evicted_total", "counter",
      "Cached events dropped, oldest first, to stay within an app's bound.");
  g_string_append_printf (out, "legba_cache_evicted_total{bound=\"channels\"} %"
      G_GUINT64_FORMAT "\n", c->cache_evicted_channels);
  g_string_append_printf (out, "legba_cache_evicted_total{bound=\"bytes\"} %"
      G_GUINT64_FORMAT "\n", c->cache_evicted_bytes);
  legba_metrics_value (out, "legba_cache_refused_total", "counter",
      "Events not cached for being larger than max-cache-bytes alone.",
      c->cache_refused);
}

char *
legba_metrics_render (LegbaMetrics * metrics, LegbaHub * hub,
    const LegbaMetricsGauges * gauges)
{
  const LegbaHubCounters *c = legba_hub_get_counters (hub);
  GString *out = g_string_sized_new (4096);

  legba_metrics_header (out, "legba_info", "gauge",
      "Version of the legba-server answering.");
  g_string_append_printf (out, "legba_info{version=\"%s\"} 1\n", LEGBA_VERSION);
  legba_metrics_value (out, "legba_connections", "gauge",
      "WebSocket connections open in the hub.",
      legba_hub_get_connection_count (hub));
  legba_metrics_value (out, "legba_connections_total", "counter",
      "WebSocket connections accepted by the hub.", c->connections_total);
  legba_metrics_value (out, "legba_sockets", "gauge",
      "WebSocket sockets open, closing ones included.", gauges->sockets);
  legba_metrics_value (out, "legba_subscriptions", "gauge",
      "Channel subscriptions.", legba_hub_get_subscription_count (hub));
  legba_metrics_value (out, "legba_messages_in_total", "counter",
      "WebSocket messages received.", c->messages_in);
  legba_metrics_value (out, "legba_messages_out_total", "counter",
      "WebSocket messages sent.", c->messages_out);
  legba_metrics_value (out, "legba_bytes_in_total", "counter",
      "Bytes of WebSocket messages received.", c->bytes_in);
  legba_metrics_value (out, "legba_bytes_out_total", "counter",
      "Bytes of WebSocket messages sent.", c->bytes_out);
  legba_metrics_value (out, "legba_socket_written_bytes_total", "counter",
      "Bytes written to WebSocket sockets, framing included.",
      gauges->written_bytes);
  legba_metrics_value (out, "legba_queued_bytes", "gauge",
      "Bytes of messages waiting to be written, all sockets.",
      gauges->queued_bytes);
  legba_metrics_value (out, "legba_client_events_total", "counter",
      "Client events relayed.", c->client_events);
  legba_metrics_value (out, "legba_api_events_total", "counter",
      "Events published through the HTTP API.", c->api_events);
  legba_metrics_value (out, "legba_subscription_errors_total", "counter",
      "Subscriptions refused (pusher:subscription_error).",
      c->subscription_errors);
  legba_metrics_value (out, "legba_channel_limit_refusals_total", "counter",
      "Subscriptions refused for max-channels-per-socket.",
      c->channel_limit_refusals);
  legba_metrics_render_cache (hub, out);
  legba_metrics_value (out, "legba_watchlist_events_total", "counter",
      "Watchlist events (pusher_internal:watchlist_events) sent.",
      c->watchlist_events);
  legba_metrics_value (out, "legba_watchlist_refusals_total", "counter",
      "Sign-ins refused for their watchlist (not an array of user ids, "
      "over max-watchlist-users).", c->watchlist_refusals);
  legba_metrics_value (out, "legba_queue_overflow_closes_total", "counter",
      "Sockets torn down for going over max-queued-bytes.",
      metrics->queue_overflows);
  legba_metrics_value (out, "legba_origin_refused_total", "counter",
      "WebSocket handshakes refused for their Origin.",
      metrics->origin_refused);
  legba_metrics_render_accept (metrics, gauges, out);
  legba_metrics_value (out, "legba_control_flood_closes_total", "counter",
      "Sockets closed (1008) for going over control-frames-per-second.",
      metrics->control_floods);
  legba_metrics_value (out, "legba_inflate_limit_closes_total", "counter",
      "Sockets closed (1009) for a compressed message that inflated over "
      "max-frame-bytes.", metrics->inflate_limits);
  legba_metrics_render_errors (metrics, hub, out);
  legba_metrics_render_http (metrics, out);

  return g_string_free (out, FALSE);
}
