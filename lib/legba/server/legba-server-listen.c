/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaServer's life: listening (the main listener, the /metrics one,
 * and the relay to the other instances that starts with the first), what
 * it reports of itself (ports, URL, sockets, the gauges and text of
 * /metrics), its apps and TLS certificate, and its shutdown.
 */
#define LEGBA_SERVER_INTERNALS
#include <legba/server/legba-server-private.h>
#include <legba/server/legba-sfu.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>

/* Pending connections the kernel queues for accept(); Linux caps it at
 * net.core.somaxconn (4096 by default). */
#define LISTEN_BACKLOG 4096

/* On shutdown, how long clients have to answer the close frame before
 * their sockets are torn down. */
#define SHUTDOWN_GRACE_S 2

/* ---- Listening ---- */

static gboolean
legba_server_flush_apps (LegbaServer * self, GError ** error)
{
  guint i;

  if (self->started)
    return TRUE;
  self->started = TRUE;
  legba_hub_set_limits (self->hub, &self->limits);
  for (i = 0; i < self->pending_apps->len; i++) {
    LegbaPendingApp *app = g_ptr_array_index (self->pending_apps, i);
    g_autoptr (GError) hub_error = NULL;

    if (!legba_hub_add_app (self->hub, app->id, app->key, app->secret,
            &hub_error)) {
      g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
          "app %s: %s", app->id, hub_error->message);
      return FALSE;
    }
    legba_hub_app_set_subscription_count (legba_hub_find_app_by_id
        (self->hub, app->id), app->subscription_count);
  }
  g_ptr_array_set_size (self->pending_apps, 0);
  legba_server_apply_app_limits (self);

  for (i = 0; i < self->pending_webhooks->len; i++) {
    char **hook = g_ptr_array_index (self->pending_webhooks, i);
    g_autoptr (GError) hook_error = NULL;

    if (self->webhooks == NULL)
      self->webhooks = legba_webhooks_new (self->hub, self->context,
          &self->webhook_settings);
    if (!legba_webhooks_add (self->webhooks, hook[0], hook[1], &hook_error)) {
      g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
          "app %s: %s", hook[0], hook_error->message);
      return FALSE;
    }
  }
  g_ptr_array_set_size (self->pending_webhooks, 0);
  return TRUE;
}

gboolean
legba_server_add_webhook (LegbaServer * server, const char *app_id,
    const char *spec, GError ** error)
{
  g_autoptr (GError) local_error = NULL;
  char **hook;

  g_return_val_if_fail (LEGBA_IS_SERVER (server), FALSE);
  g_return_val_if_fail (app_id != NULL && spec != NULL, FALSE);

  if (!legba_webhook_spec_parse (spec, NULL, NULL, &local_error)) {
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "app %s: %s", app_id, local_error->message);
    return FALSE;
  }
  if (server->started) {
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "app %s: webhooks are added before the server listens", app_id);
    return FALSE;
  }
  hook = g_new0 (char *, 3);
  hook[0] = g_strdup (app_id);
  hook[1] = g_strdup (spec);
  g_ptr_array_add (server->pending_webhooks, hook);
  return TRUE;
}

void
legba_server_set_webhook_settings (LegbaServer * server,
    const LegbaWebhookSettings * settings)
{
  g_return_if_fail (LEGBA_IS_SERVER (server));
  g_return_if_fail (settings != NULL);

  server->webhook_settings = *settings;
}

static GInetAddress *
legba_server_parse_address (const char *address, GError ** error)
{
  GInetAddress *inet;

  if (g_strcmp0 (address, "localhost") == 0)
    return g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  inet = address ? g_inet_address_new_from_string (address) : NULL;
  if (inet == NULL)
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_LISTEN,
        "cannot listen on '%s': not an IP address (such as 127.0.0.1, "
        "0.0.0.0 or ::)", address ? address : "(null)");
  return inet;
}

static gboolean
relay_is_webhook_sender (gpointer relay)
{
  return legba_relay_is_webhook_sender (relay);
}

/* With a Redis URL, the relay to the other instances starts with the
 * first listener; it connects in the background (docs/scale-out.md). */
static gboolean
legba_server_start_relay (LegbaServer * self, GError ** error)
{
  LegbaRelayConfig config = { 0, };
  g_autoptr (GError) local_error = NULL;

  if (self->redis_url == NULL || self->relay != NULL)
    return TRUE;
  if (!legba_redis_address_parse (self->redis_url, &config.address,
          &local_error)) {
    g_set_error_literal (error, LEGBA_SERVER_ERROR,
        LEGBA_SERVER_ERROR_CONFIG, local_error->message);
    return FALSE;
  }
  if (self->instance_id == NULL)
    self->instance_id = legba_relay_default_instance_id ();
  if (!legba_relay_instance_id_is_valid (self->instance_id)) {
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "instance id '%s': use 1 to 64 of A-Z a-z 0-9 . _ - :",
        self->instance_id);
    legba_redis_address_clear (&config.address);
    return FALSE;
  }
  config.instance_id = self->instance_id;
  config.prefix = self->redis_prefix;
  config.retention = self->redis_retention;
  config.instance_ttl = self->redis_instance_ttl;
  self->relay = legba_relay_new (self->hub, self->context, &config);
  legba_redis_address_clear (&config.address);
  legba_relay_start (self->relay);
  if (self->webhooks != NULL)
    legba_webhooks_set_sender (self->webhooks, relay_is_webhook_sender,
        self->relay);
  return TRUE;
}

void
legba_server_set_app_topology (LegbaServer * self, const char *app_id,
    const char *topology, const char *const *prefixes)
{
  LegbaSfuRule *rule = g_new0 (LegbaSfuRule, 1);

  if (topology != NULL)
    legba_topology_parse_full (topology, &rule->topology, &rule->auto_max,
        NULL);
  rule->prefixes = g_strdupv ((char **) prefixes);
  if (self->sfu_app_rules == NULL)
    self->sfu_app_rules = g_hash_table_new_full (g_str_hash, g_str_equal,
        g_free, legba_sfu_rule_free);
  g_hash_table_insert (self->sfu_app_rules, g_strdup (app_id), rule);
}

/* SFU rooms (docs/server.md): the coordinator starts with the first
 * listener, when Janus instances are configured. */
static gboolean
legba_server_start_sfu (LegbaServer * self, GError ** error)
{
  LegbaSfuSettings settings = { 0, };
  LegbaRedisAddress redis = { 0, };
  g_autoptr (GError) local_error = NULL;
  guint n_urls = self->sfu_janus_urls ?
      g_strv_length (self->sfu_janus_urls) : 0;
  guint n_ws = self->sfu_janus_ws_urls ?
      g_strv_length (self->sfu_janus_ws_urls) : 0;
  gboolean wanted = self->sfu_app_rules != NULL ||
      (self->sfu_prefixes != NULL && self->sfu_prefixes[0] != NULL) ||
      (self->sfu_topology != NULL &&
      g_strcmp0 (self->sfu_topology, "mesh") != 0);

  if (self->sfu != NULL || (n_urls == 0 && n_ws == 0 && !wanted))
    return TRUE;
  if (n_urls == 0 || n_urls != n_ws) {
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "SFU rooms need as many Janus WebSocket URLs as Janus HTTP API URLs "
        "(%u and %u given), at least one each", n_ws, n_urls);
    return FALSE;
  }
  for (guint i = 0; i < n_urls; i++) {
    if (!legba_sfu_url_check (self->sfu_janus_urls[i], FALSE, &local_error)
        || !legba_sfu_url_check (self->sfu_janus_ws_urls[i], TRUE,
            &local_error)) {
      g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
          "SFU: %s", local_error->message);
      return FALSE;
    }
  }
  if ((self->sfu_topology != NULL &&
          !legba_topology_parse_full (self->sfu_topology,
              &settings.rule.topology, &settings.rule.auto_max,
              &local_error)) ||
      !legba_sfu_prefixes_check ((const char *const *) self->sfu_prefixes,
          &local_error)) {
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "SFU: %s", local_error->message);
    return FALSE;
  }
  settings.context = self->context;
  settings.janus_urls = (const char *const *) self->sfu_janus_urls;
  settings.janus_ws_urls = (const char *const *) self->sfu_janus_ws_urls;
  settings.api_secret = self->sfu_api_secret;
  settings.admin_key = self->sfu_admin_key;
  settings.rule.prefixes = self->sfu_prefixes;
  settings.app_rules = self->sfu_app_rules;
  /* A malformed Redis URL is the relay's error, next. */
  if (self->redis_url != NULL &&
      legba_redis_address_parse (self->redis_url, &redis, NULL)) {
    settings.redis = &redis;
    settings.redis_prefix = self->redis_prefix;
  }
  self->sfu = legba_sfu_new (self->hub, &settings);
  legba_redis_address_clear (&redis);
  return TRUE;
}

/* Listens on address:port and returns the port the socket got. The socket
 * is made here rather than by libsoup, for its backlog: a restart sends
 * every client back at once, and GLib's default backlog of 10 would drop
 * their handshakes into TCP's retransmission timeouts. The server accepts
 * its connections itself (legba-server-accept.c). */
static guint
legba_server_soup_listen (LegbaServer * self, LegbaAcceptor * acceptor,
    const char *address, guint port, SoupServerListenOptions options,
    GError ** error)
{
  g_autoptr (GInetAddress) inet = NULL;
  g_autoptr (GSocketAddress) socket_address = NULL;
  g_autoptr (GSocketAddress) local = NULL;
  g_autoptr (GSocket) socket = NULL;
  g_autoptr (GError) local_error = NULL;
  GSocketFamily family;
  gboolean ok;

  inet = legba_server_parse_address (address, error);
  if (inet == NULL)
    return 0;
  socket_address = g_inet_socket_address_new (inet, port);
  family = g_inet_address_get_family (inet);

  socket = g_socket_new (family, G_SOCKET_TYPE_STREAM,
      G_SOCKET_PROTOCOL_DEFAULT, &local_error);
  if (socket != NULL && family == G_SOCKET_FAMILY_IPV6)
    g_socket_set_option (socket, IPPROTO_IPV6, IPV6_V6ONLY, TRUE, NULL);
  if (socket != NULL)
    g_socket_set_listen_backlog (socket, LISTEN_BACKLOG);
  ok = socket != NULL &&
      g_socket_bind (socket, socket_address, TRUE, &local_error) &&
      g_socket_listen (socket, &local_error) &&
      legba_acceptor_add_socket (acceptor, socket, options, &local_error);
  if (!ok) {
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_LISTEN,
        "cannot listen on %s:%u: %s", address, port, local_error->message);
    return 0;
  }
  /* What lets a connection past the descriptor limit be refused. */
  if (self->reserve_fd < 0)
    self->reserve_fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);

  local = g_socket_get_local_address (socket, NULL);
  if (G_IS_INET_SOCKET_ADDRESS (local))
    return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (local));
  return port;
}

/**
 * legba_server_listen:
 * @server: a #LegbaServer
 * @address: an IP address (or "localhost") to listen on
 * @port: the TCP port, 0 to pick a free one (see legba_server_get_port())
 * @error: return location for a #GError
 *
 * Starts serving WebSocket and HTTP (HTTPS and WSS when a certificate is
 * set, see legba_server_set_tls_files()) on @address:@port. The first call
 * also registers the apps added so far with the limits then in force.
 *
 * Returns: %TRUE on success
 */
gboolean
legba_server_listen (LegbaServer * server, const char *address, guint port,
    GError ** error)
{
  SoupServerListenOptions options = 0;
  g_autofree char *port_s = NULL;
  guint bound;

  g_return_val_if_fail (LEGBA_IS_SERVER (server), FALSE);
  g_return_val_if_fail (address != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (server->shutting_down) {
    g_set_error_literal (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_LISTEN,
        "the server was shut down");
    return FALSE;
  }
  if (!legba_server_flush_apps (server, error) ||
      !legba_server_start_sfu (server, error) ||
      !legba_server_start_relay (server, error))
    return FALSE;
  if (server->certificate != NULL)
    options |= SOUP_SERVER_LISTEN_HTTPS;
  bound = legba_server_soup_listen (server, server->acceptor, address, port,
      options, error);
  if (bound == 0)
    return FALSE;

  if (server->port == 0) {
    server->port = bound;
    g_free (server->url_host);
    if (g_str_equal (address, "0.0.0.0") || g_str_equal (address, "localhost"))
      server->url_host = g_strdup ("127.0.0.1");
    else if (g_str_equal (address, "::"))
      server->url_host = g_strdup ("[::1]");
    else if (strchr (address, ':'))
      server->url_host = g_strdup_printf ("[%s]", address);
    else
      server->url_host = g_strdup (address);
  }
  port_s = g_strdup_printf ("%u", bound);
  legba_server_log (G_LOG_LEVEL_INFO, "listening", "ADDRESS", address,
      "PORT", port_s, "TLS", server->certificate ? "yes" : "no", NULL);
  return TRUE;
}

/**
 * legba_server_listen_metrics:
 * @server: a #LegbaServer
 * @address: an IP address (or "localhost") to serve /metrics on
 * @port: the TCP port, 0 to pick a free one
 * @error: return location for a #GError
 *
 * Serves `GET /metrics` (and `GET /up`) in plain HTTP on a listener of
 * its own, so that it can stay on a private address; /metrics is then no
 * longer served on the main listener.
 *
 * Returns: %TRUE on success
 */
gboolean
legba_server_listen_metrics (LegbaServer * server, const char *address,
    guint port, GError ** error)
{
  g_autofree char *port_s = NULL;
  guint bound;

  g_return_val_if_fail (LEGBA_IS_SERVER (server), FALSE);
  g_return_val_if_fail (address != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (server->metrics_soup == NULL) {
    server->metrics_soup = legba_server_new_soup (server);
    server->metrics_acceptor = legba_acceptor_new (server,
        server->metrics_soup);
  }
  bound = legba_server_soup_listen (server, server->metrics_acceptor,
      address, port, 0, error);
  if (bound == 0)
    return FALSE;
  if (server->bound_metrics_port == 0)
    server->bound_metrics_port = bound;
  port_s = g_strdup_printf ("%u", bound);
  legba_server_log (G_LOG_LEVEL_INFO, "metrics-listening",
      "ADDRESS", address, "PORT", port_s, NULL);
  return TRUE;
}

/**
 * legba_server_start:
 * @server: a #LegbaServer
 * @error: return location for a #GError
 *
 * Listens as configured: on #LegbaServer:listen-address and
 * #LegbaServer:listen-port, and, when #LegbaServer:metrics-address is set,
 * serves /metrics there on #LegbaServer:metrics-port. Fails when no app was
 * added.
 *
 * Returns: %TRUE on success
 */
gboolean
legba_server_start (LegbaServer * server, GError ** error)
{
  g_return_val_if_fail (LEGBA_IS_SERVER (server), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (!server->started && server->pending_apps->len == 0) {
    g_set_error_literal (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "no app is configured");
    return FALSE;
  }
  if (!legba_server_listen (server, server->listen_address,
          server->listen_port, error))
    return FALSE;
  if (server->metrics_address != NULL &&
      !legba_server_listen_metrics (server, server->metrics_address,
          server->metrics_port, error))
    return FALSE;
  return TRUE;
}

/**
 * legba_server_get_port:
 * @server: a #LegbaServer
 *
 * Gets the port the server listens on, the one legba_server_listen() bound
 * (useful with port 0).
 *
 * Returns: the port of the first listener, 0 before listening
 */
guint
legba_server_get_port (LegbaServer * server)
{
  g_return_val_if_fail (LEGBA_IS_SERVER (server), 0);

  return server->port;
}

/**
 * legba_server_get_metrics_port:
 * @server: a #LegbaServer
 *
 * Gets the port of the separate `/metrics` listener, the one
 * legba_server_listen_metrics() bound (useful with port 0).
 *
 * Returns: the port of the separate /metrics listener, 0 when there is none
 */
guint
legba_server_get_metrics_port (LegbaServer * server)
{
  g_return_val_if_fail (LEGBA_IS_SERVER (server), 0);

  return server->bound_metrics_port;
}

/**
 * legba_server_get_url:
 * @server: a #LegbaServer
 *
 * The base URL of the first listener, such as `http://127.0.0.1:6001`
 * (`https://` with TLS). WebSocket clients connect to the same host and
 * port with `ws://` (`wss://`) and the path `/app/APP_KEY?protocol=7`.
 *
 * Returns: (transfer full) (nullable): the URL, %NULL before listening
 */
char *
legba_server_get_url (LegbaServer * server)
{
  g_return_val_if_fail (LEGBA_IS_SERVER (server), NULL);

  if (server->port == 0)
    return NULL;
  return g_strdup_printf ("%s://%s:%u",
      server->certificate ? "https" : "http", server->url_host, server->port);
}

/**
 * legba_server_get_connection_count:
 * @server: a #LegbaServer
 *
 * Gets how many WebSocket connections the server holds.
 *
 * Returns: the number of WebSocket sockets open, closing ones included
 */
guint
legba_server_get_connection_count (LegbaServer * server)
{
  g_return_val_if_fail (LEGBA_IS_SERVER (server), 0);

  return g_hash_table_size (server->conns);
}

guint64
legba_server_get_queued_bytes (LegbaServer * server)
{
  LegbaMetricsGauges gauges;

  g_return_val_if_fail (LEGBA_IS_SERVER (server), 0);

  legba_server_get_gauges (server, &gauges);
  return gauges.queued_bytes;
}

void
legba_server_get_gauges (LegbaServer * self, LegbaMetricsGauges * gauges)
{
  GHashTableIter iter;
  gpointer key;

  gauges->sockets = g_hash_table_size (self->conns);
  gauges->queued_bytes = 0;
  gauges->written_bytes = self->written_closed;
  gauges->pending_connections = legba_acceptor_get_pending (self->acceptor) +
      legba_acceptor_get_pending (self->metrics_acceptor);
  g_hash_table_iter_init (&iter, self->conns);
  while (g_hash_table_iter_next (&iter, &key, NULL)) {
    LegbaServerConn *conn = key;

    gauges->queued_bytes += legba_ws_stream_get_queued (conn->stream);
    gauges->written_bytes += legba_ws_stream_get_written (conn->stream);
  }
}

char *
legba_server_render_metrics (LegbaServer * self)
{
  LegbaMetricsGauges gauges = { 0, };
  g_autofree char *text = NULL;
  GString *out;

  legba_server_get_gauges (self, &gauges);
  text = legba_metrics_render (self->metrics, self->hub, &gauges);
  out = g_string_new (text);
  if (self->relay != NULL)
    legba_relay_render_metrics (self->relay, out);
  if (self->webhooks != NULL)
    legba_webhooks_render_metrics (self->webhooks, out);
  if (self->sfu != NULL)
    legba_sfu_render_metrics (self->sfu, out);
  legba_server_render_api_metrics (self, out);
  return g_string_free (out, FALSE);
}

/* ---- Apps and TLS ---- */

void
legba_pending_app_free (gpointer data)
{
  LegbaPendingApp *app = data;

  g_free (app->id);
  g_free (app->key);
  g_free (app->secret);
  g_free (app);
}

/**
 * legba_server_add_app:
 * @server: a #LegbaServer
 * @id: the app id (HTTP API paths, /apps/ID/...)
 * @key: the app key (WebSocket path /app/KEY, signatures)
 * @secret: the app secret (signatures, join tokens)
 * @error: return location for a #GError
 *
 * Adds an app. None of the strings may be empty, and an id or key may not
 * be used twice.
 *
 * Returns: %TRUE on success
 */
gboolean
legba_server_add_app (LegbaServer * server, const char *id, const char *key,
    const char *secret, GError ** error)
{
  LegbaPendingApp *app;
  guint i;

  g_return_val_if_fail (LEGBA_IS_SERVER (server), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (id == NULL || *id == '\0' || key == NULL || *key == '\0' ||
      secret == NULL || *secret == '\0') {
    g_set_error_literal (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "an app needs a non-empty id, key and secret");
    return FALSE;
  }

  if (server->started) {
    g_autoptr (GError) hub_error = NULL;

    if (legba_hub_add_app (server->hub, id, key, secret, &hub_error)) {
      legba_server_apply_app_limits (server);
      return TRUE;
    }
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "app %s: %s", id, hub_error->message);
    return FALSE;
  }

  for (i = 0; i < server->pending_apps->len; i++) {
    LegbaPendingApp *other = g_ptr_array_index (server->pending_apps, i);

    if (g_str_equal (other->id, id) || g_str_equal (other->key, key)) {
      g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
          "app %s: its %s is already used by another app", id,
          g_str_equal (other->id, id) ? "id" : "key");
      return FALSE;
    }
  }
  app = g_new0 (LegbaPendingApp, 1);
  app->id = g_strdup (id);
  app->key = g_strdup (key);
  app->secret = g_strdup (secret);
  g_ptr_array_add (server->pending_apps, app);
  return TRUE;
}

/**
 * legba_server_set_app_subscription_count:
 * @server: a #LegbaServer
 * @id: the id of an app added with legba_server_add_app()
 * @enabled: whether to count subscriptions
 * @error: return location for a #GError
 *
 * Turns Pusher's subscription counting on or off for an app (off by
 * default): the subscribers of its channels, presence channels aside, are
 * sent `pusher_internal:subscription_count` when the number of connections
 * subscribed (across the cluster with a relay) changes, at most once a
 * second per channel. Fails when no app has that id.
 *
 * Returns: %TRUE on success
 */
gboolean
legba_server_set_app_subscription_count (LegbaServer * server,
    const char *id, gboolean enabled, GError ** error)
{
  LegbaHubApp *app;
  guint i;

  g_return_val_if_fail (LEGBA_IS_SERVER (server), FALSE);
  g_return_val_if_fail (id != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  for (i = 0; i < server->pending_apps->len; i++) {
    LegbaPendingApp *pending = g_ptr_array_index (server->pending_apps, i);

    if (g_str_equal (pending->id, id)) {
      pending->subscription_count = enabled;
      return TRUE;
    }
  }
  app = legba_hub_find_app_by_id (server->hub, id);
  if (app == NULL) {
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
        "no app with id %s", id);
    return FALSE;
  }
  legba_hub_app_set_subscription_count (app, enabled);
  return TRUE;
}

/**
 * legba_server_set_tls_files:
 * @server: a #LegbaServer
 * @cert_file: a PEM file with the certificate (and its chain)
 * @key_file: a PEM file with the private key
 * @error: return location for a #GError
 *
 * Serves HTTPS and WSS instead of HTTP and WS. Call before listening.
 *
 * Returns: %TRUE on success
 */
gboolean
legba_server_set_tls_files (LegbaServer * server, const char *cert_file,
    const char *key_file, GError ** error)
{
  g_autoptr (GError) local_error = NULL;
  GTlsCertificate *certificate;

  g_return_val_if_fail (LEGBA_IS_SERVER (server), FALSE);
  g_return_val_if_fail (cert_file != NULL && key_file != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (server->port != 0) {
    g_set_error_literal (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_TLS,
        "the TLS certificate must be set before listening");
    return FALSE;
  }
  certificate = g_tls_certificate_new_from_files (cert_file, key_file,
      &local_error);
  if (certificate == NULL) {
    g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_TLS,
        "TLS certificate %s with key %s: %s", cert_file, key_file,
        local_error->message);
    return FALSE;
  }
  g_clear_object (&server->certificate);
  server->certificate = certificate;
  soup_server_set_tls_certificate (server->soup, certificate);
  return TRUE;
}

/* ---- Shutdown ---- */

static gboolean
legba_server_shutdown_timeout (gpointer user_data)
{
  LegbaServer *self = user_data;
  GHashTableIter iter;
  gpointer key;

  g_clear_pointer (&self->shutdown_timer, g_source_unref);
  g_hash_table_iter_init (&iter, self->conns);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    legba_ws_stream_abort (((LegbaServerConn *) key)->stream);
  return G_SOURCE_REMOVE;
}

/**
 * legba_server_shutdown:
 * @server: a #LegbaServer
 *
 * Stops listening and closes every WebSocket with 4200 (Pusher protocol
 * 7: reconnect at once), so that clients move to another instance. Sockets
 * whose peer does not answer the close within 2 seconds are torn down;
 * #LegbaServer:connection-count reaches 0 once all are closed. The server
 * cannot listen again afterwards.
 */
void
legba_server_shutdown (LegbaServer * server)
{
  GHashTableIter iter;
  gpointer key;

  g_return_if_fail (LEGBA_IS_SERVER (server));

  if (server->shutting_down)
    return;
  server->shutting_down = TRUE;
  legba_server_log (G_LOG_LEVEL_INFO, "shutdown", NULL);

  legba_acceptor_stop (server->acceptor);
  legba_acceptor_stop (server->metrics_acceptor);
  soup_server_disconnect (server->soup);
  if (server->metrics_soup != NULL)
    soup_server_disconnect (server->metrics_soup);
  legba_hub_close_all (server->hub, LEGBA_PUSHER_RECONNECT,
      "server shutting down");
  /* The other instances drop this one's members at once rather than when
   * its heartbeat expires. */
  if (server->relay != NULL)
    legba_relay_leave (server->relay);

  /* Sockets the hub refused and is not closing already. */
  g_hash_table_iter_init (&iter, server->conns);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    legba_server_transport_close (key, LEGBA_PUSHER_RECONNECT,
        "server shutting down", server);

  server->shutdown_timer = g_timeout_source_new_seconds (SHUTDOWN_GRACE_S);
  g_source_set_callback (server->shutdown_timer,
      legba_server_shutdown_timeout, server, NULL);
  g_source_attach (server->shutdown_timer, server->context);
}
