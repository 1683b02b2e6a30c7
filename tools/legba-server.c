/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-server: the Pusher protocol 7 signalling server of Legba rooms,
 * configured by flags and/or a configuration file (docs/server.md).
 */
#include <legba/server/server.h>

#include <legba/server/legba-server-private.h>
#include <legba/server/legba-relay.h>
#include <legba/common/legba-turn.h>
#include <legba/server/legba-sfu.h>

#include <errno.h>
#include <glib-unix.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#ifdef LEGBA_HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

#define EXIT_USAGE 2

/* After the close frames, how long the server may take to see every
 * socket closed; LegbaServer tears sockets down after 2 s itself. */
#define SHUTDOWN_TIMEOUT_S 10

static char *opt_config;
static char *opt_bind;
static char *opt_port;
static char *opt_app_id;
static char *opt_app_key;
static char *opt_app_secret;
static char **opt_webhooks;
static gboolean opt_subscription_count;
static char *opt_tls_cert;
static char *opt_tls_key;
static char *opt_metrics_bind;
static char *opt_metrics_port;
static char *opt_metrics_token;
static char *opt_web_dir;
static char *opt_pusher_js_dir;
static char *opt_allowed_origins;
static gboolean opt_compression;
static char *opt_redis;
static char *opt_instance_id;
static char *opt_redis_prefix;
static char *opt_redis_retention;
static char *opt_redis_instance_ttl;
static char **opt_turn_urls;
static char *opt_turn_secret;
static char *opt_turn_ttl;
static char **opt_janus_urls;
static char **opt_janus_ws_urls;
static char *opt_janus_api_secret;
static char *opt_janus_admin_key;
static char *opt_topology;
static char *opt_sfu_prefixes;
static char *opt_limits[32];

static const GOptionEntry entries[] = {
  {"config", 'c', 0, G_OPTION_ARG_FILENAME, &opt_config,
      "Configuration file ([server], [limits], [app NAME] groups); "
        "flags override it", "FILE"},
  {"bind", 'b', 0, G_OPTION_ARG_STRING, &opt_bind,
      "IP address to listen on (default: 127.0.0.1)", "ADDR"},
  {"port", 'p', 0, G_OPTION_ARG_STRING, &opt_port,
      "TCP port to listen on, 0 for any free one (default: 6001)", "N"},
  {"app-id", 0, 0, G_OPTION_ARG_STRING, &opt_app_id,
      "Id of an app (with --app-key and --app-secret)", "ID"},
  {"app-key", 0, 0, G_OPTION_ARG_STRING, &opt_app_key,
      "Key of that app, the WebSocket path /app/KEY", "KEY"},
  {"app-secret", 0, 0, G_OPTION_ARG_STRING, &opt_app_secret,
      "Secret of that app (prefer a configuration file: other users can "
        "read command lines)", "SECRET"},
  {"webhook", 0, 0, G_OPTION_ARG_STRING_ARRAY, &opt_webhooks,
      "A webhook of that app: its URL, then the events it wants, "
        "comma-separated: channel_occupied, channel_vacated, member_added, "
        "member_removed, client_event (repeatable)", "'URL EVENTS'"},
  {"subscription-count", 0, 0, G_OPTION_ARG_NONE, &opt_subscription_count,
      "Count that app's subscriptions: pusher:subscription_count to the "
        "subscribers of its channels (presence channels aside)", NULL},
  {"tls-cert", 0, 0, G_OPTION_ARG_FILENAME, &opt_tls_cert,
      "PEM certificate (chain) for https:// and wss:// (with --tls-key; "
        "default: plain HTTP)", "FILE"},
  {"tls-key", 0, 0, G_OPTION_ARG_FILENAME, &opt_tls_key,
      "PEM private key of --tls-cert", "FILE"},
  {"metrics-bind", 0, 0, G_OPTION_ARG_STRING, &opt_metrics_bind,
        "Serve /metrics on a listener of its own at this address, and no "
        "longer on the main one (default: /metrics on the main listener)",
      "ADDR"},
  {"metrics-port", 0, 0, G_OPTION_ARG_STRING, &opt_metrics_port,
      "Port of that listener, 0 for any free one (default: 6002; alone, "
        "implies --metrics-bind=127.0.0.1)", "N"},
  {"web-dir", 0, 0, G_OPTION_ARG_FILENAME, &opt_web_dir,
      "Serve the demo page's files from DIR at /demo/", "DIR"},
  {"pusher-js-dir", 0, 0, G_OPTION_ARG_FILENAME, &opt_pusher_js_dir,
      "Serve DIR/pusher.min.js (pusher-js's dist/web) at /demo/", "DIR"},
  {"metrics-token", 0, 0, G_OPTION_ARG_STRING, &opt_metrics_token,
        "Require 'Authorization: Bearer TOKEN' on /metrics (default: none)",
      "TOKEN"},
  {"allowed-origins", 0, 0, G_OPTION_ARG_STRING, &opt_allowed_origins,
      "Comma-separated origins whose pages may connect and call the HTTP "
        "API, or * (default: *)", "LIST"},
  {"compression", 0, 0, G_OPTION_ARG_NONE, &opt_compression,
      "Accept permessage-deflate (default: off)", NULL},
  {"redis", 0, 0, G_OPTION_ARG_STRING, &opt_redis,
      "Share rooms with the other instances using this Redis: "
        "redis://[:PASSWORD@]HOST[:PORT][/DB] or unix://[:PASSWORD@]/PATH "
        "(default: none, a single instance)", "URL"},
  {"instance-id", 0, 0, G_OPTION_ARG_STRING, &opt_instance_id,
      "Id of this instance in the cluster, unique (default: host name "
        "and process id)", "ID"},
  {"redis-prefix", 0, 0, G_OPTION_ARG_STRING, &opt_redis_prefix,
      "Prefix of the cluster's Redis keys, so that clusters can share a "
        "Redis (default: " LEGBA_RELAY_DEFAULT_PREFIX ")", "PREFIX"},
  {"redis-retention", 0, 0, G_OPTION_ARG_STRING, &opt_redis_retention,
      "Entries the Redis stream keeps for instances catching up (default: "
        G_STRINGIFY (LEGBA_RELAY_DEFAULT_RETENTION) ")", "N"},
  {"redis-instance-ttl", 0, 0, G_OPTION_ARG_STRING, &opt_redis_instance_ttl,
      "Seconds before the members of an instance that stopped answering "
        "are removed (default: "
        G_STRINGIFY (LEGBA_RELAY_DEFAULT_INSTANCE_TTL) ")", "S"},
  {"turn-url", 0, 0, G_OPTION_ARG_STRING_ARRAY, &opt_turn_urls,
        "A TURN server room members get credentials for (repeatable; with "
        "--turn-secret): turn:HOST[:PORT][?transport=udp|tcp] or turns:...",
      "URL"},
  {"turn-secret", 0, 0, G_OPTION_ARG_STRING, &opt_turn_secret,
      "Secret shared with the TURN servers (coturn's static-auth-secret; "
        "prefer a configuration file)", "SECRET"},
  {"turn-ttl", 0, 0, G_OPTION_ARG_STRING, &opt_turn_ttl,
      "Seconds the TURN credentials stay valid (default: "
        G_STRINGIFY (LEGBA_TURN_DEFAULT_TTL) ")", "S"},
  {"janus-url", 0, 0, G_OPTION_ARG_STRING_ARRAY, &opt_janus_urls,
      "HTTP API of a Janus instance for SFU rooms (repeatable; with "
        "--janus-ws-url): http://HOST:PORT/janus", "URL"},
  {"janus-ws-url", 0, 0, G_OPTION_ARG_STRING_ARRAY, &opt_janus_ws_urls,
      "WebSocket API of that Janus instance as members reach it "
        "(repeatable, same order): ws://HOST:PORT/", "URL"},
  {"janus-api-secret", 0, 0, G_OPTION_ARG_STRING, &opt_janus_api_secret,
      "Janus's api_secret, for the server's requests only (prefer a "
        "configuration file)", "SECRET"},
  {"janus-admin-key", 0, 0, G_OPTION_ARG_STRING, &opt_janus_admin_key,
      "The admin_key of Janus's VideoRoom plugin, to create rooms", "KEY"},
  {"topology", 0, 0, G_OPTION_ARG_STRING, &opt_topology,
      "Topology of rooms: mesh (default), sfu, or auto (mesh up to 4 "
        "members, then SFU; auto:N for N)", "mesh|sfu|auto[:N]"},
  {"sfu-prefixes", 0, 0, G_OPTION_ARG_STRING, &opt_sfu_prefixes,
      "Comma-separated room-name prefixes of SFU rooms", "LIST"},
  G_OPTION_ENTRY_NULL
};

static int
usage_error (const char *message)
{
  g_printerr ("%s: %s\nTry '%s --help' for more information.\n",
      g_get_prgname (), message, g_get_prgname ());
  return EXIT_USAGE;
}

/* One --NAME=N flag per limit, documented from the property. */
static GOptionEntry *
limit_entries (GObjectClass * klass)
{
  const char *const *names = legba_server_get_limit_names ();
  guint n = g_strv_length ((char **) names), i;
  GOptionEntry *limits = g_new0 (GOptionEntry, n + 1);

  g_assert (n < G_N_ELEMENTS (opt_limits));
  for (i = 0; i < n; i++) {
    GParamSpecUInt *pspec = G_PARAM_SPEC_UINT (g_object_class_find_property
        (klass, names[i]));

    limits[i].long_name = names[i];
    limits[i].arg = G_OPTION_ARG_STRING;
    limits[i].arg_data = &opt_limits[i];
    limits[i].description = g_strdup_printf ("%s (default: %u)",
        g_param_spec_get_blurb (G_PARAM_SPEC (pspec)), pspec->default_value);
    limits[i].arg_description = "N";
  }
  return limits;
}

static void
limit_entries_free (GOptionEntry * limits)
{
  GOptionEntry *e;

  for (e = limits; e->long_name != NULL; e++)
    g_free ((char *) e->description);
  g_free (limits);
}

static gboolean
parse_uint (const char *flag, const char *text, guint min, guint max,
    guint * value, GError ** error)
{
  guint64 number;

  if (!g_ascii_string_to_unsigned (text, 10, min, max, &number, NULL)) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
        "--%s: '%s' is not a whole number from %u to %u", flag, text, min, max);
    return FALSE;
  }
  *value = number;
  return TRUE;
}

static gboolean
apply_uint_flag (LegbaServer * server, const char *flag,
    const char *property, const char *text, GError ** error)
{
  GParamSpecUInt *pspec;
  guint value;

  if (text == NULL)
    return TRUE;
  pspec = G_PARAM_SPEC_UINT (g_object_class_find_property
      (G_OBJECT_GET_CLASS (server), property));
  if (!parse_uint (flag, text, pspec->minimum, pspec->maximum, &value, error))
    return FALSE;
  g_object_set (server, property, value, NULL);
  return TRUE;
}

/* The cluster (docs/scale-out.md). */
static gboolean
apply_redis_flags (LegbaServer * server, GError ** error)
{
  g_autofree char *url = NULL;

  if (opt_redis != NULL) {
    LegbaRedisAddress address;

    if (!legba_redis_address_parse (opt_redis, &address, error))
      return FALSE;
    legba_redis_address_clear (&address);
    g_object_set (server, "redis-url", opt_redis, NULL);
  }
  if (opt_instance_id != NULL) {
    if (!legba_relay_instance_id_is_valid (opt_instance_id)) {
      g_set_error_literal (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
          "--instance-id: use 1 to 64 of A-Z a-z 0-9 . _ - :");
      return FALSE;
    }
    g_object_set (server, "instance-id", opt_instance_id, NULL);
  }
  if (opt_redis_prefix != NULL)
    g_object_set (server, "redis-prefix", opt_redis_prefix, NULL);
  if (!apply_uint_flag (server, "redis-retention", "redis-retention",
          opt_redis_retention, error) ||
      !apply_uint_flag (server, "redis-instance-ttl", "redis-instance-ttl",
          opt_redis_instance_ttl, error))
    return FALSE;

  g_object_get (server, "redis-url", &url, NULL);
  if (url == NULL && (opt_instance_id || opt_redis_prefix ||
          opt_redis_retention || opt_redis_instance_ttl)) {
    g_set_error_literal (error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
        "--instance-id and --redis-* need --redis (or [redis] url)");
    return FALSE;
  }
  return TRUE;
}

static gboolean
check_sfu_urls (char **urls, gboolean ws, GError ** error)
{
  for (guint i = 0; urls != NULL && urls[i] != NULL; i++) {
    g_autoptr (GError) local_error = NULL;

    if (!legba_sfu_url_check (urls[i], ws, &local_error)) {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
          "--janus-%surl: %s", ws ? "ws-" : "", local_error->message);
      return FALSE;
    }
  }
  return TRUE;
}

/* SFU rooms on Janus (docs/server.md). */
static gboolean
apply_sfu_flags (LegbaServer * server, GError ** error)
{
  g_auto (GStrv) urls = NULL;
  g_auto (GStrv) ws_urls = NULL;
  g_auto (GStrv) prefixes = NULL;
  g_autofree char *topology = NULL;
  g_autoptr (GError) local_error = NULL;
  LegbaTopology parsed;

  if (!check_sfu_urls (opt_janus_urls, FALSE, error) ||
      !check_sfu_urls (opt_janus_ws_urls, TRUE, error))
    return FALSE;
  if (opt_topology != NULL &&
      !legba_topology_parse (opt_topology, &parsed, &local_error)) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
        "--topology: %s", local_error->message);
    return FALSE;
  }
  if (opt_sfu_prefixes != NULL) {
    prefixes = g_strsplit (opt_sfu_prefixes, ",", -1);
    for (char **p = prefixes; *p != NULL; p++)
      g_strstrip (*p);
    if (!legba_sfu_prefixes_check ((const char *const *) prefixes,
            &local_error)) {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
          "--sfu-prefixes: %s", local_error->message);
      return FALSE;
    }
    g_object_set (server, "sfu-prefixes", prefixes, NULL);
  }
  if (opt_janus_urls != NULL)
    g_object_set (server, "sfu-janus-urls", opt_janus_urls, NULL);
  if (opt_janus_ws_urls != NULL)
    g_object_set (server, "sfu-janus-ws-urls", opt_janus_ws_urls, NULL);
  if (opt_janus_api_secret != NULL)
    g_object_set (server, "sfu-api-secret", opt_janus_api_secret, NULL);
  if (opt_janus_admin_key != NULL)
    g_object_set (server, "sfu-admin-key", opt_janus_admin_key, NULL);
  if (opt_topology != NULL)
    g_object_set (server, "sfu-topology", opt_topology, NULL);

  g_object_get (server, "sfu-janus-urls", &urls, "sfu-janus-ws-urls",
      &ws_urls, "sfu-topology", &topology, NULL);
  if ((urls ? g_strv_length (urls) : 0) !=
      (ws_urls ? g_strv_length (ws_urls) : 0)) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
        "--janus-url and --janus-ws-url (or [sfu] janus-url and "
        "janus-ws-url) name the same Janus instances: give as many of each");
    return FALSE;
  }
  if (urls == NULL && ((topology != NULL && g_strcmp0 (topology, "mesh") != 0)
          || opt_sfu_prefixes != NULL)) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
        "SFU rooms need a Janus: give --janus-url and --janus-ws-url (or "
        "[sfu] janus-url and janus-ws-url)");
    return FALSE;
  }
  return TRUE;
}

/* TURN credentials for room members (docs/server.md). */
static gboolean
apply_turn_flags (LegbaServer * server, GError ** error)
{
  g_auto (GStrv) urls = NULL;
  g_autofree char *secret = NULL;

  for (guint i = 0; opt_turn_urls != NULL && opt_turn_urls[i] != NULL; i++) {
    g_autoptr (GError) local_error = NULL;

    if (!legba_turn_url_check (opt_turn_urls[i], &local_error)) {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
          "--turn-url: %s", local_error->message);
      return FALSE;
    }
  }
  if (opt_turn_urls != NULL)
    g_object_set (server, "turn-urls", opt_turn_urls, NULL);
  if (opt_turn_secret != NULL)
    g_object_set (server, "turn-secret", opt_turn_secret, NULL);
  if (!apply_uint_flag (server, "turn-ttl", "turn-ttl", opt_turn_ttl, error))
    return FALSE;

  g_object_get (server, "turn-urls", &urls, "turn-secret", &secret, NULL);
  if ((urls == NULL) != (secret == NULL) || (opt_turn_ttl && urls == NULL)) {
    g_set_error_literal (error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
        "--turn-url and --turn-secret go together (or [turn] urls and "
        "secret), and --turn-ttl needs them");
    return FALSE;
  }
  return TRUE;
}

/* Flags override the configuration file, after a reload too. */
static gboolean
apply_limit_flags (LegbaServer * server, GError ** error)
{
  const char *const *limits = legba_server_get_limit_names ();

  for (guint i = 0; limits[i] != NULL; i++) {
    if (!apply_uint_flag (server, limits[i], limits[i], opt_limits[i], error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
apply_flags (LegbaServer * server, GError ** error)
{
  g_autofree char *metrics_bind = NULL;

  if (opt_bind != NULL)
    g_object_set (server, "listen-address", opt_bind, NULL);
  if (!apply_uint_flag (server, "port", "listen-port", opt_port, error))
    return FALSE;

  g_object_get (server, "metrics-address", &metrics_bind, NULL);
  if (opt_metrics_bind != NULL)
    g_object_set (server, "metrics-address", opt_metrics_bind, NULL);
  else if (opt_metrics_port != NULL && metrics_bind == NULL)
    g_object_set (server, "metrics-address", "127.0.0.1", NULL);
  if (!apply_uint_flag (server, "metrics-port", "metrics-port",
          opt_metrics_port, error))
    return FALSE;
  if (opt_metrics_token != NULL)
    g_object_set (server, "metrics-token", opt_metrics_token, NULL);
  g_object_set (server, "web-dir", opt_web_dir, "pusher-js-dir",
      opt_pusher_js_dir, NULL);

  if (opt_allowed_origins != NULL) {
    g_auto (GStrv) origins = g_strsplit (opt_allowed_origins, ",", -1);
    char **o;

    for (o = origins; *o != NULL; o++)
      g_strstrip (*o);
    g_object_set (server, "allowed-origins",
        g_strv_contains ((const char *const *) origins, "*") ? NULL : origins,
        NULL);
  }
  if (opt_compression)
    g_object_set (server, "compression", TRUE, NULL);
  return apply_redis_flags (server, error) &&
      apply_turn_flags (server, error) && apply_sfu_flags (server, error) &&
      apply_limit_flags (server, error);
}

static gboolean
apply_app_and_tls (LegbaServer * server, GError ** error)
{
  if (opt_app_id || opt_app_key || opt_app_secret) {
    if (!opt_app_id || !opt_app_key || !opt_app_secret) {
      g_set_error_literal (error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
          "--app-id, --app-key and --app-secret go together");
      return FALSE;
    }
    if (!legba_server_add_app (server, opt_app_id, opt_app_key,
            opt_app_secret, error))
      return FALSE;
    if (opt_subscription_count &&
        !legba_server_set_app_subscription_count (server, opt_app_id, TRUE,
            error))
      return FALSE;
  } else if (opt_subscription_count) {
    g_set_error_literal (error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
        "--subscription-count goes with --app-id");
    return FALSE;
  }
  for (char **hook = opt_webhooks; hook && *hook; hook++) {
    if (opt_app_id == NULL) {
      g_set_error_literal (error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
          "--webhook goes with --app-id");
      return FALSE;
    }
    if (!legba_server_add_webhook (server, opt_app_id, *hook, error))
      return FALSE;
  }

  if (opt_tls_cert || opt_tls_key) {
    if (!opt_tls_cert || !opt_tls_key) {
      g_set_error_literal (error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
          "--tls-cert and --tls-key go together");
      return FALSE;
    }
    if (!legba_server_set_tls_files (server, opt_tls_cert, opt_tls_key, error))
      return FALSE;
  }
  return TRUE;
}

/* Tells the service manager about the server's state (sd_notify(3):
 * READY=1, STOPPING=1, STATUS=...) when it started the server with
 * NOTIFY_SOCKET set, as systemd does for Type=notify units; without
 * libsystemd, nothing. */
static void
notify_manager (const char *format, ...)
G_GNUC_PRINTF (1, 2);

     static void notify_manager (const char *format, ...)
{
#ifdef LEGBA_HAVE_LIBSYSTEMD
  g_autofree char *state = NULL;
  va_list args;
  int ret;

  va_start (args, format);
  state = g_strdup_vprintf (format, args);
  va_end (args);
  ret = sd_notify (0, state);
  if (ret < 0)
    g_printerr ("%s: cannot notify the service manager: %s\n",
        g_get_prgname (), g_strerror (-ret));
#endif
}

typedef struct
{
  LegbaServer *server;
  GMainLoop *loop;
  gboolean started;
  guint timeout;
} Shutdown;

static void
on_connection_count (LegbaServer * server, GParamSpec * pspec,
    gpointer user_data)
{
  Shutdown *shutdown = user_data;

  if (legba_server_get_connection_count (server) == 0)
    g_main_loop_quit (shutdown->loop);
}

static gboolean
on_shutdown_timeout (gpointer user_data)
{
  Shutdown *shutdown = user_data;

  shutdown->timeout = 0;
  g_printerr ("%s: %u sockets still open after %d s, exiting\n",
      g_get_prgname (), legba_server_get_connection_count (shutdown->server),
      SHUTDOWN_TIMEOUT_S);
  g_main_loop_quit (shutdown->loop);
  return G_SOURCE_REMOVE;
}

/* SIGTERM, SIGINT: close every socket with 4200 (clients reconnect at
 * once, to another instance), then exit once they are closed. */
static gboolean
on_signal (gpointer user_data)
{
  Shutdown *shutdown = user_data;

  if (shutdown->started)
    return G_SOURCE_CONTINUE;
  shutdown->started = TRUE;
  notify_manager ("STOPPING=1\nSTATUS=Closing %u sockets with 4200",
      legba_server_get_connection_count (shutdown->server));
  legba_server_shutdown (shutdown->server);
  if (legba_server_get_connection_count (shutdown->server) == 0) {
    g_main_loop_quit (shutdown->loop);
    return G_SOURCE_CONTINUE;
  }
  g_signal_connect (shutdown->server, "notify::connection-count",
      G_CALLBACK (on_connection_count), shutdown);
  shutdown->timeout = g_timeout_add_seconds (SHUTDOWN_TIMEOUT_S,
      on_shutdown_timeout, shutdown);
  return G_SOURCE_CONTINUE;
}

/* SIGHUP: the configuration file again, what of it can change while the
 * server runs (legba_server_reload_config()); on an error, the
 * configuration in force stays whole. */
static gboolean
on_reload (gpointer user_data)
{
  Shutdown *shutdown = user_data;
  g_autoptr (GError) error = NULL;

  if (shutdown->started)
    return G_SOURCE_CONTINUE;
  if (opt_config == NULL) {
    g_printerr ("%s: SIGHUP: no --config to read again\n", g_get_prgname ());
    return G_SOURCE_CONTINUE;
  }
  notify_manager ("RELOADING=1\nSTATUS=Reading %s again", opt_config);
  if (legba_server_reload_config (shutdown->server, opt_config, opt_app_id,
          &error) && apply_limit_flags (shutdown->server, &error)) {
    g_printerr ("%s: %s read again\n", g_get_prgname (), opt_config);
    notify_manager ("READY=1\nSTATUS=Listening on port %u, %s read again",
        legba_server_get_port (shutdown->server), opt_config);
  } else {
    g_printerr ("%s: %s; the configuration in force stays\n",
        g_get_prgname (), error->message);
    notify_manager ("READY=1\nSTATUS=Listening on port %u, %s not read "
        "again: %s", legba_server_get_port (shutdown->server), opt_config,
        error->message);
  }
  return G_SOURCE_CONTINUE;
}

static int
run (LegbaServer * server)
{
  g_autoptr (GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_autofree char *address = NULL;
  Shutdown shutdown = { server, loop, FALSE, 0 };
  guint term, intr, hup;

  /* Handlers first: whoever reads the line may signal at once. */
  term = g_unix_signal_add (SIGTERM, on_signal, &shutdown);
  intr = g_unix_signal_add (SIGINT, on_signal, &shutdown);
  hup = g_unix_signal_add (SIGHUP, on_reload, &shutdown);

  g_object_get (server, "listen-address", &address, NULL);
  g_print ("legba-server listening on %s%s%s:%u\n",
      strchr (address, ':') ? "[" : "", address,
      strchr (address, ':') ? "]" : "", legba_server_get_port (server));
  fflush (stdout);
  notify_manager ("READY=1\nSTATUS=Listening on %s%s%s:%u",
      strchr (address, ':') ? "[" : "", address,
      strchr (address, ':') ? "]" : "", legba_server_get_port (server));
  if (legba_server_get_metrics_port (server) != 0)
    g_printerr ("legba-server: /metrics on port %u\n",
        legba_server_get_metrics_port (server));

  g_main_loop_run (loop);
  g_source_remove (term);
  g_source_remove (intr);
  g_source_remove (hup);
  if (shutdown.timeout != 0)
    g_source_remove (shutdown.timeout);
  g_signal_handlers_disconnect_by_data (server, &shutdown);
  return EXIT_SUCCESS;
}

/* Every socket is a descriptor, and the soft limit a service usually
 * starts with (1024) would stop the server near a thousand clients: the
 * soft limit is raised to the hard one, which the administrator sets
 * (systemd's LimitNOFILE=, ulimit -Hn). The library leaves the process's
 * limits alone: they are the embedding program's. */
static void
raise_descriptor_limit (void)
{
  struct rlimit limit;

  if (getrlimit (RLIMIT_NOFILE, &limit) != 0 ||
      limit.rlim_cur >= limit.rlim_max)
    return;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit (RLIMIT_NOFILE, &limit) != 0)
    g_printerr ("%s: cannot raise the descriptor limit to %llu: %s\n",
        g_get_prgname (), (unsigned long long) limit.rlim_max,
        g_strerror (errno));
}

/* Whether G_MESSAGES_DEBUG asked for libsoup's debug messages. */
static gboolean soup_debug;

/* libsoup writes debug messages for every WebSocket frame it reads, and
 * GLib's default handler looks G_MESSAGES_DEBUG up in the environment
 * for each one before dropping it; the server looks once. */
static void
on_soup_debug (const char *domain, GLogLevelFlags level, const char *message,
    gpointer unused)
{
  if (soup_debug)
    g_log_default_handler (domain, level, message, NULL);
}

static void
watch_soup_debug (void)
{
  const char *wanted = g_getenv ("G_MESSAGES_DEBUG");

  /* as GLib's default handler reads it */
  soup_debug = wanted != NULL && (strcmp (wanted, "all") == 0 ||
      strstr (wanted, "libsoup") != NULL);
  g_log_set_handler ("libsoup", G_LOG_LEVEL_DEBUG, on_soup_debug, NULL);
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (LegbaServer) server = NULL;
  GOptionEntry *limits;

  g_log_writer_default_set_use_stderr (TRUE);
  watch_soup_debug ();
  raise_descriptor_limit ();
  server = legba_server_new ();

  context = g_option_context_new ("- Pusher protocol 7 signalling server");
  g_option_context_add_main_entries (context, entries, NULL);
  limits = limit_entries (G_OBJECT_GET_CLASS (server));
  g_option_context_add_main_entries (context, limits, NULL);
  g_option_context_set_summary (context,
      "Serves Legba rooms: WebSocket clients at /app/APP_KEY?protocol=7,\n"
      "the Pusher HTTP API and join tokens under /apps/APP_ID/, GET /up\n"
      "and GET /metrics. Prints one line, 'legba-server listening on\n"
      "ADDR:PORT', once it listens; SIGTERM or SIGINT closes every socket\n"
      "with 4200 (clients reconnect) and exits; SIGHUP reads the\n"
      "configuration file again (its apps and limits).");
  g_option_context_set_description (context,
      "At least one app is needed, from --app-* or a configuration file.\n"
      "Logs go to stderr; G_MESSAGES_DEBUG=Legba adds a line per\n"
      "connection and HTTP API call. See docs/server.md, and\n"
      "docs/scale-out.md for several instances sharing rooms (--redis).\n"
      "\n"
      "Exit status: 0 after a shutdown on a signal, 1 when the server cannot\n"
      "start (configuration, TLS, listening), 2 on a usage error.\n");

  if (!g_option_context_parse (context, &argc, &argv, &error)) {
    limit_entries_free (limits);
    return usage_error (error->message);
  }
  limit_entries_free (limits);
  if (argc > 1)
    return usage_error ("unexpected argument");

  if (opt_config != NULL && !legba_server_load_config (server, opt_config,
          &error)) {
    g_printerr ("%s: %s\n", g_get_prgname (), error->message);
    return EXIT_FAILURE;
  }
  if (!apply_flags (server, &error))
    return usage_error (error->message);
  if (!apply_app_and_tls (server, &error)) {
    if (error->domain == G_OPTION_ERROR)
      return usage_error (error->message);
    g_printerr ("%s: %s\n", g_get_prgname (), error->message);
    return EXIT_FAILURE;
  }
  if (!legba_server_start (server, &error)) {
    g_printerr ("%s: %s%s\n", g_get_prgname (), error->message,
        g_error_matches (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG)
        ? " (give --app-id, --app-key and --app-secret, or --config)" : "");
    return EXIT_FAILURE;
  }

  return run (server);
}
