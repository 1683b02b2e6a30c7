/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The LegbaServer object: its properties and the table of its limits,
 * the structured log, and its making and unmaking. Its WebSockets are in
 * legba-server-ws.c, its listeners, apps and shutdown in
 * legba-server-listen.c, its HTTP side in legba-server-http.c.
 */

#define LEGBA_SERVER_INTERNALS
#include <legba/server/legba-server-private.h>

#include <legba/server/legba-poll-group.h>
#include <legba/server/legba-ws-deflate.h>
#include <legba/server/legba-ws-stream.h>
#include <legba/common/legba-turn.h>
#include <legba/server/legba-sfu.h>

#include <legba/legba-version.h>
#include <libsoup/soup.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_MAX_REQUEST_BYTES (1024 * 1024)
/* A TLS handshake and a request of max-request-bytes on a slow link fit
 * in it; a client that sends its headers a byte at a time does not. */
#define DEFAULT_HANDSHAKE_TIMEOUT 10
#define DEFAULT_MAX_PENDING_CONNECTIONS 1024
#define DEFAULT_MAX_PENDING_PER_ADDRESS 0
#define DEFAULT_LISTEN_ADDRESS "127.0.0.1"
#define DEFAULT_LISTEN_PORT 6001
#define DEFAULT_METRICS_PORT 6002

/* WebSockets per poll bucket (legba-poll-group.h): a wakeup serves the
 * sources of this many sockets, whatever the server holds in all. */
#define POLL_BUCKET_SIZE 32

typedef struct
{
  const char *name;
  const char *blurb;
  gsize offset;                 /* in LegbaLimits */
  gboolean is_size;             /* a gsize field, else a guint */
  guint min;
} LegbaLimitSpec;

#define LIMIT(field, size, min, name, blurb) \
  { name, blurb, G_STRUCT_OFFSET (LegbaLimits, field), size, min }

/* The limits, installed from limit_specs below; docs/server.md, "Limits",
 * says why each default. */
/**
 * LegbaServer:max-connections:
 *
 * WebSocket connections one app may hold; 0 (the default) sets no limit. A
 * socket over it gets `pusher:error` 4004 and is closed.
 */
/**
 * LegbaServer:max-event-bytes:
 *
 * Bytes of one event's `data`, from a client or from the HTTP API (10240 by
 * default, as Pusher documents; 0: no limit). A client event over it gets
 * `pusher:error` 4302, an HTTP API request 413.
 */
/**
 * LegbaServer:client-events-per-second:
 *
 * Client events one socket may send per second (10 by default, Pusher's; 0:
 * no limit). An event over it is dropped with `pusher:error` 4301; the
 * socket stays.
 */
/**
 * LegbaServer:max-presence-members:
 *
 * Members of one presence channel (100 by default, Pusher's limit; 0: no
 * limit). A subscription over it gets `pusher:subscription_error`.
 */
/**
 * LegbaServer:max-channels-per-socket:
 *
 * Channels one socket may be subscribed to at once (100 by default; 0: no
 * limit). A subscription over it gets `pusher:subscription_error`
 * (`LimitReached`).
 */
/**
 * LegbaServer:max-user-info-bytes:
 *
 * Bytes of one presence member's `user_info`, serialized (1024 by default,
 * Pusher's limit; 0: no limit).
 */
/**
 * LegbaServer:max-channel-name-length:
 *
 * Characters of a channel name (164 by default, Pusher's limit, which a
 * room's channel fits; 0: no limit).
 */
/**
 * LegbaServer:max-frame-bytes:
 *
 * Bytes of one incoming WebSocket message, all its fragments together, and
 * what a compressed one inflates to (262144 by default, at least 128). A
 * socket that sends a larger one is closed with 1009, from the frame's
 * header, before its payload is read.
 */
/**
 * LegbaServer:max-queued-bytes:
 *
 * Bytes waiting to be written to one socket (4 MiB by default, at least
 * 4096): a socket that does not read what it is sent is torn down when a
 * frame would take it over this bound, so that one stalled client never
 * holds the server's memory.
 */
/**
 * LegbaServer:control-frames-per-second:
 *
 * WebSocket control frames (pings, pongs, close) one socket may send in any
 * one-second window (10 by default; 0: no limit); a socket over it is
 * closed with 1008.
 */
/**
 * LegbaServer:activity-timeout:
 *
 * Seconds of silence before the server sends `pusher:ping` to a client (120
 * by default, Pusher's); advertised to clients, which ping after as long.
 */
/**
 * LegbaServer:pong-timeout:
 *
 * Seconds a pinged client has to answer with `pusher:pong` (30 by default)
 * before it is closed with 4201.
 */
/**
 * LegbaServer:signin-timeout:
 *
 * Seconds a client has to sign in with `pusher:signin` before it is closed
 * with 4009; 0 (the default) makes signing in optional.
 */

/**
 * LegbaServer:api-requests-per-second:
 *
 * HTTP API requests one app may make per second, in bursts of as many
 * (1000 by default; 0 sets no limit). A request over it is answered 429
 * with `Retry-After` and counted in `/metrics`.
 */
/**
 * LegbaServer:cache-ttl:
 *
 * Seconds the last event of a cache channel is kept for new subscribers
 * (1800 by default, at least 1).
 */
/**
 * LegbaServer:max-cache-channels:
 *
 * Cache channels whose last event one app keeps (10000 by default; 0 sets
 * no limit); past it the oldest entries go, counted in `/metrics`.
 */
/**
 * LegbaServer:max-cache-bytes:
 *
 * Bytes of cached events one app keeps (16 MiB by default; 0 sets no
 * limit); past it the oldest entries go, counted in `/metrics`.
 */
/**
 * LegbaServer:max-watchlist-users:
 *
 * Users a signed-in user's `watchlist` may name (100 by default, as
 * Pusher); a longer one refuses the sign-in with `pusher:error` 4009.
 */

/* 0 means no limit where the hub allows it; the transport's own bounds
 * (frames, queues) and the timeouts always hold. */
static const LegbaLimitSpec limit_specs[] = {
  LIMIT (max_connections, FALSE, 0, "max-connections",
      "WebSocket connections per app (0: no limit)"),
  LIMIT (max_event_bytes, TRUE, 0, "max-event-bytes",
      "Bytes of one event's data, from a client or the HTTP API "
      "(0: no limit)"),
  LIMIT (client_events_per_second, FALSE, 0, "client-events-per-second",
      "Client events one socket may send per second (0: no limit)"),
  LIMIT (max_presence_members, FALSE, 0, "max-presence-members",
      "Members of one presence channel (0: no limit)"),
  LIMIT (max_channels_per_socket, FALSE, 0, "max-channels-per-socket",
      "Channels one socket may be subscribed to at once (0: no limit)"),
  LIMIT (max_user_info_bytes, TRUE, 0, "max-user-info-bytes",
      "Bytes of one presence member's user_info (0: no limit)"),
  LIMIT (max_channel_name_length, FALSE, 0, "max-channel-name-length",
      "Characters of a channel name (0: no limit)"),
  LIMIT (max_frame_bytes, TRUE, 128, "max-frame-bytes",
      "Bytes of one incoming WebSocket message"),
  LIMIT (max_queued_bytes, TRUE, 4096, "max-queued-bytes",
      "Bytes waiting to be written to one socket before it is torn down"),
  LIMIT (control_frames_per_second, FALSE, 0, "control-frames-per-second",
      "WebSocket control frames (pings, pongs) one socket may send per "
      "second before it is closed with 1008 (0: no limit)"),
  LIMIT (activity_timeout, FALSE, 1, "activity-timeout",
      "Seconds of silence before the server pings a client"),
  LIMIT (pong_timeout, FALSE, 1, "pong-timeout",
      "Seconds a client has to answer a ping"),
  LIMIT (signin_timeout, FALSE, 0, "signin-timeout",
      "Seconds a client has to sign in (0: signing in is optional)"),
  LIMIT (api_requests_per_second, FALSE, 0, "api-requests-per-second",
      "HTTP API requests one app may make per second, in bursts of as "
      "many; more are answered 429 (0: no limit)"),
  LIMIT (cache_ttl, FALSE, 1, "cache-ttl",
      "Seconds the last event of a cache channel is kept for new "
      "subscribers"),
  LIMIT (max_cache_channels, FALSE, 0, "max-cache-channels",
      "Cache channels whose last event one app keeps; past it the oldest "
      "go (0: no limit)"),
  LIMIT (max_cache_bytes, TRUE, 0, "max-cache-bytes",
      "Bytes of cached events one app keeps; past it the oldest go "
      "(0: no limit)"),
  LIMIT (max_watchlist_users, FALSE, 0, "max-watchlist-users",
      "User ids in a signed-in user's watchlist; a longer one is refused "
      "(0: no limit)"),
};

#undef LIMIT

enum
{
  PROP_0,
  PROP_MAX_REQUEST_BYTES,
  PROP_HANDSHAKE_TIMEOUT,
  PROP_MAX_PENDING_CONNECTIONS,
  PROP_MAX_PENDING_PER_ADDRESS,
  PROP_ALLOWED_ORIGINS,
  PROP_COMPRESSION,
  PROP_METRICS_TOKEN,
  PROP_WEB_DIR,
  PROP_PUSHER_JS_DIR,
  PROP_LISTEN_ADDRESS,
  PROP_LISTEN_PORT,
  PROP_METRICS_ADDRESS,
  PROP_METRICS_PORT,
  PROP_REDIS_URL,
  PROP_INSTANCE_ID,
  PROP_REDIS_PREFIX,
  PROP_REDIS_RETENTION,
  PROP_REDIS_INSTANCE_TTL,
  PROP_TURN_URLS,
  PROP_TURN_SECRET,
  PROP_TURN_TTL,
  PROP_SFU_JANUS_URLS,
  PROP_SFU_JANUS_WS_URLS,
  PROP_SFU_API_SECRET,
  PROP_SFU_ADMIN_KEY,
  PROP_SFU_TOPOLOGY,
  PROP_SFU_PREFIXES,
  PROP_CONNECTION_COUNT,
  PROP_LIMIT_FIRST,
  N_PROPS = PROP_LIMIT_FIRST + G_N_ELEMENTS (limit_specs)
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (LegbaServer, legba_server, G_TYPE_OBJECT);

/**
 * legba_server_error_quark:
 *
 * Gets the error domain of #LegbaServer, %LEGBA_SERVER_ERROR: its errors are
 * from the #LegbaServerError enumeration.
 *
 * Returns: the domain's #GQuark
 */
GQuark
legba_server_error_quark (void)
{
  return g_quark_from_static_string ("legba-server-error-quark");
}

/* ---- Logging ---- */

static const char *
legba_log_priority (GLogLevelFlags level)
{
  if (level & G_LOG_LEVEL_ERROR)
    return "3";
  if (level & (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    return "4";
  if (level & G_LOG_LEVEL_MESSAGE)
    return "5";
  if (level & G_LOG_LEVEL_INFO)
    return "6";
  return "7";
}

static void
legba_log_append_value (GString * message, const char *value)
{
  if (*value != '\0' && strpbrk (value, " \"=\\\n\t") == NULL) {
    g_string_append (message, value);
  } else {
    g_autofree char *escaped = g_strescape (value, NULL);

    g_string_append_printf (message, "\"%s\"", escaped);
  }
}

static void
legba_log_add (GLogField * fields, gsize * n, const char *key,
    const char *value)
{
  fields[*n].key = key;
  fields[*n].value = value;
  fields[*n].length = -1;
  (*n)++;
}

void
legba_server_log (GLogLevelFlags level, const char *event, ...)
{
  GLogField fields[20];
  gsize n = 0;
  g_autoptr (GString) message = NULL;
  va_list ap;
  const char *key;

  /* Lines at the info level are dropped unless G_MESSAGES_DEBUG asks for
   * them: do not even format them then. */
  if (g_log_writer_default_would_drop (level, G_LOG_DOMAIN))
    return;
  message = g_string_new (event);

  legba_log_add (fields, &n, "GLIB_DOMAIN", G_LOG_DOMAIN);
  legba_log_add (fields, &n, "PRIORITY", legba_log_priority (level));
  legba_log_add (fields, &n, "LEGBA_EVENT", event);

  va_start (ap, event);
  while ((key = va_arg (ap, const char *)) != NULL)
  {
    const char *value = va_arg (ap, const char *);
    g_autofree char *lower = NULL;

    if (value == NULL || n >= G_N_ELEMENTS (fields) - 1)
      continue;
    legba_log_add (fields, &n, key, value);
    lower = g_ascii_strdown (key, -1);
    g_string_append_printf (message, " %s=", lower);
    legba_log_append_value (message, value);
  }
  va_end (ap);

  legba_log_add (fields, &n, "MESSAGE", message->str);
  g_log_structured_array (level, fields, n);
}

/* ---- Limits ---- */

static guint
legba_limit_get (const LegbaLimits * limits, const LegbaLimitSpec * spec)
{
  const char *p = (const char *) limits + spec->offset;

  if (spec->is_size)
    return (guint) MIN (*(const gsize *) p, (gsize) G_MAXUINT);
  return *(const guint *) p;
}

static void
legba_limit_set (LegbaLimits * limits, const LegbaLimitSpec * spec, guint value)
{
  char *p = (char *) limits + spec->offset;

  if (spec->is_size)
    *(gsize *) p = value;
  else
    *(guint *) p = value;
}

int
legba_server_app_limit_index (const char *name)
{
  for (guint i = 0; i < G_N_ELEMENTS (limit_specs); i++) {
    if (g_str_equal (limit_specs[i].name, name))
      return (int) i;
  }
  return -1;
}

guint
legba_server_n_app_limits (void)
{
  return G_N_ELEMENTS (limit_specs);
}

void
legba_server_app_limit_set (LegbaLimits * limits, guint index, guint value)
{
  g_return_if_fail (index < G_N_ELEMENTS (limit_specs));
  legba_limit_set (limits, &limit_specs[index], value);
}

guint
legba_server_app_limit_get (const LegbaLimits * limits, guint index)
{
  g_return_val_if_fail (index < G_N_ELEMENTS (limit_specs), 0);
  return legba_limit_get (limits, &limit_specs[index]);
}

const char *const *
legba_server_get_limit_names (void)
{
  static const char *const transport[] = { "max-request-bytes",
    "handshake-timeout", "max-pending-connections",
    "max-pending-per-address"
  };
  static const char *names[G_N_ELEMENTS (limit_specs) +
      G_N_ELEMENTS (transport) + 1];

  if (names[0] == NULL) {
    guint i;

    for (i = 0; i < G_N_ELEMENTS (limit_specs); i++)
      names[i] = limit_specs[i].name;
    for (guint j = 0; j < G_N_ELEMENTS (transport); j++)
      names[i + j] = transport[j];
  }
  return names;
}

/* ---- GObject ---- */

void
legba_server_notify_connection_count (LegbaServer * self)
{
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_CONNECTION_COUNT]);
}

static gboolean
legba_server_tick (gpointer user_data)
{
  LegbaServer *self = user_data;

  legba_hub_tick (self->hub);
  return G_SOURCE_CONTINUE;
}

static void
legba_server_apply_turn (LegbaServer * self)
{
  legba_hub_set_turn (self->hub, (const char *const *) self->turn_urls,
      self->turn_secret, self->turn_ttl);
}

/* Bad URLs are refused whole: a server must not hand out a list that
 * browsers reject. legba-server and the configuration file report them
 * as errors before they get here. */
static void
legba_server_set_turn_urls (LegbaServer * self, const char *const *urls)
{
  for (guint i = 0; urls != NULL && urls[i] != NULL; i++) {
    g_autoptr (GError) error = NULL;

    if (!legba_turn_url_check (urls[i], &error)) {
      g_warning ("turn-urls: %s; no TURN server is handed out", error->message);
      urls = NULL;
      break;
    }
  }
  g_strfreev (self->turn_urls);
  self->turn_urls = urls && urls[0] ? g_strdupv ((char **) urls) : NULL;
  legba_server_apply_turn (self);
}

static void
legba_server_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  LegbaServer *self = LEGBA_SERVER (object);

  if (prop_id >= PROP_LIMIT_FIRST && prop_id < N_PROPS) {
    legba_limit_set (&self->limits, &limit_specs[prop_id - PROP_LIMIT_FIRST],
        g_value_get_uint (value));
    legba_hub_set_limits (self->hub, &self->limits);
    /* Once started, at once for every app (a configuration reload), but
     * where an app has a value of its own. */
    if (self->started)
      legba_server_apply_app_limits (self);
    return;
  }

  switch (prop_id) {
    case PROP_MAX_REQUEST_BYTES:
      self->max_request_bytes = g_value_get_uint (value);
      break;
    case PROP_HANDSHAKE_TIMEOUT:
      self->handshake_timeout = g_value_get_uint (value);
      break;
    case PROP_MAX_PENDING_CONNECTIONS:
      self->max_pending_connections = g_value_get_uint (value);
      break;
    case PROP_MAX_PENDING_PER_ADDRESS:
      self->max_pending_per_address = g_value_get_uint (value);
      break;
    case PROP_ALLOWED_ORIGINS:
      g_strfreev (self->allowed_origins);
      self->allowed_origins = g_value_dup_boxed (value);
      break;
    case PROP_COMPRESSION:
      self->compression = g_value_get_boolean (value);
      break;
    case PROP_METRICS_TOKEN:
      g_free (self->metrics_token);
      self->metrics_token = g_value_dup_string (value);
      break;
    case PROP_WEB_DIR:
      g_free (self->web_dir);
      self->web_dir = g_value_dup_string (value);
      break;
    case PROP_PUSHER_JS_DIR:
      g_free (self->pusher_js_dir);
      self->pusher_js_dir = g_value_dup_string (value);
      break;
    case PROP_LISTEN_ADDRESS:
      g_free (self->listen_address);
      self->listen_address = g_value_dup_string (value);
      if (self->listen_address == NULL)
        self->listen_address = g_strdup (DEFAULT_LISTEN_ADDRESS);
      break;
    case PROP_LISTEN_PORT:
      self->listen_port = g_value_get_uint (value);
      break;
    case PROP_METRICS_ADDRESS:
      g_free (self->metrics_address);
      self->metrics_address = g_value_dup_string (value);
      break;
    case PROP_METRICS_PORT:
      self->metrics_port = g_value_get_uint (value);
      break;
    case PROP_REDIS_URL:
      g_free (self->redis_url);
      self->redis_url = g_value_dup_string (value);
      break;
    case PROP_INSTANCE_ID:
      g_free (self->instance_id);
      self->instance_id = g_value_dup_string (value);
      break;
    case PROP_REDIS_PREFIX:
      g_free (self->redis_prefix);
      self->redis_prefix = g_value_dup_string (value);
      if (self->redis_prefix == NULL)
        self->redis_prefix = g_strdup (LEGBA_RELAY_DEFAULT_PREFIX);
      break;
    case PROP_REDIS_RETENTION:
      self->redis_retention = g_value_get_uint (value);
      break;
    case PROP_REDIS_INSTANCE_TTL:
      self->redis_instance_ttl = g_value_get_uint (value);
      break;
    case PROP_TURN_URLS:
      legba_server_set_turn_urls (self, g_value_get_boxed (value));
      break;
    case PROP_TURN_SECRET:
      g_free (self->turn_secret);
      self->turn_secret = g_value_dup_string (value);
      legba_server_apply_turn (self);
      break;
    case PROP_TURN_TTL:
      self->turn_ttl = g_value_get_uint (value);
      legba_server_apply_turn (self);
      break;
    case PROP_SFU_JANUS_URLS:
      g_strfreev (self->sfu_janus_urls);
      self->sfu_janus_urls = g_value_dup_boxed (value);
      break;
    case PROP_SFU_JANUS_WS_URLS:
      g_strfreev (self->sfu_janus_ws_urls);
      self->sfu_janus_ws_urls = g_value_dup_boxed (value);
      break;
    case PROP_SFU_API_SECRET:
      g_free (self->sfu_api_secret);
      self->sfu_api_secret = g_value_dup_string (value);
      break;
    case PROP_SFU_ADMIN_KEY:
      g_free (self->sfu_admin_key);
      self->sfu_admin_key = g_value_dup_string (value);
      break;
    case PROP_SFU_TOPOLOGY:
      g_free (self->sfu_topology);
      self->sfu_topology = g_value_dup_string (value);
      break;
    case PROP_SFU_PREFIXES:
      g_strfreev (self->sfu_prefixes);
      self->sfu_prefixes = g_value_dup_boxed (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static void
legba_server_get_property (GObject * object, guint prop_id, GValue * value,
    GParamSpec * pspec)
{
  LegbaServer *self = LEGBA_SERVER (object);

  if (prop_id >= PROP_LIMIT_FIRST && prop_id < N_PROPS) {
    g_value_set_uint (value, legba_limit_get (&self->limits,
            &limit_specs[prop_id - PROP_LIMIT_FIRST]));
    return;
  }

  switch (prop_id) {
    case PROP_MAX_REQUEST_BYTES:
      g_value_set_uint (value, self->max_request_bytes);
      break;
    case PROP_HANDSHAKE_TIMEOUT:
      g_value_set_uint (value, self->handshake_timeout);
      break;
    case PROP_MAX_PENDING_CONNECTIONS:
      g_value_set_uint (value, self->max_pending_connections);
      break;
    case PROP_MAX_PENDING_PER_ADDRESS:
      g_value_set_uint (value, self->max_pending_per_address);
      break;
    case PROP_ALLOWED_ORIGINS:
      g_value_set_boxed (value, self->allowed_origins);
      break;
    case PROP_COMPRESSION:
      g_value_set_boolean (value, self->compression);
      break;
    case PROP_METRICS_TOKEN:
      g_value_set_string (value, self->metrics_token);
      break;
    case PROP_WEB_DIR:
      g_value_set_string (value, self->web_dir);
      break;
    case PROP_PUSHER_JS_DIR:
      g_value_set_string (value, self->pusher_js_dir);
      break;
    case PROP_LISTEN_ADDRESS:
      g_value_set_string (value, self->listen_address);
      break;
    case PROP_LISTEN_PORT:
      g_value_set_uint (value, self->listen_port);
      break;
    case PROP_METRICS_ADDRESS:
      g_value_set_string (value, self->metrics_address);
      break;
    case PROP_METRICS_PORT:
      g_value_set_uint (value, self->metrics_port);
      break;
    case PROP_REDIS_URL:
      g_value_set_string (value, self->redis_url);
      break;
    case PROP_INSTANCE_ID:
      g_value_set_string (value, self->instance_id);
      break;
    case PROP_REDIS_PREFIX:
      g_value_set_string (value, self->redis_prefix);
      break;
    case PROP_REDIS_RETENTION:
      g_value_set_uint (value, self->redis_retention);
      break;
    case PROP_REDIS_INSTANCE_TTL:
      g_value_set_uint (value, self->redis_instance_ttl);
      break;
    case PROP_TURN_URLS:
      g_value_set_boxed (value, self->turn_urls);
      break;
    case PROP_TURN_SECRET:
      g_value_set_string (value, self->turn_secret);
      break;
    case PROP_TURN_TTL:
      g_value_set_uint (value, self->turn_ttl);
      break;
    case PROP_SFU_JANUS_URLS:
      g_value_set_boxed (value, self->sfu_janus_urls);
      break;
    case PROP_SFU_JANUS_WS_URLS:
      g_value_set_boxed (value, self->sfu_janus_ws_urls);
      break;
    case PROP_SFU_API_SECRET:
      g_value_set_string (value, self->sfu_api_secret);
      break;
    case PROP_SFU_ADMIN_KEY:
      g_value_set_string (value, self->sfu_admin_key);
      break;
    case PROP_SFU_TOPOLOGY:
      g_value_set_string (value, self->sfu_topology);
      break;
    case PROP_SFU_PREFIXES:
      g_value_set_boxed (value, self->sfu_prefixes);
      break;
    case PROP_CONNECTION_COUNT:
      g_value_set_uint (value, g_hash_table_size (self->conns));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static void
legba_server_dispose (GObject * object)
{
  LegbaServer *self = LEGBA_SERVER (object);
  GHashTableIter iter;
  gpointer key;

  /* Sockets torn down here go without connection-closed. */
  legba_hub_set_hooks (self->hub, NULL, NULL);
  /* What the shutdown itself vacates is not sent. */
  g_clear_pointer (&self->webhooks, legba_webhooks_free);
  if (self->tick != NULL) {
    g_source_destroy (self->tick);
    g_clear_pointer (&self->tick, g_source_unref);
  }
  if (self->shutdown_timer != NULL) {
    g_source_destroy (self->shutdown_timer);
    g_clear_pointer (&self->shutdown_timer, g_source_unref);
  }
  /* Accepting stops before libsoup closes the listening sockets; the
   * connections still pending end as libsoup lets go of them. */
  legba_acceptor_stop (self->acceptor);
  legba_acceptor_stop (self->metrics_acceptor);
  if (self->soup != NULL)
    soup_server_disconnect (self->soup);
  if (self->metrics_soup != NULL)
    soup_server_disconnect (self->metrics_soup);
  g_clear_pointer (&self->acceptor, legba_acceptor_free);
  g_clear_pointer (&self->metrics_acceptor, legba_acceptor_free);
  if (self->relay != NULL) {
    legba_relay_leave (self->relay);
    g_clear_pointer (&self->relay, legba_relay_free);
  }

  /* Sockets still open: the hub forgets them first (so nothing is sent
   * to a socket being dropped), then they are torn down. */
  g_hash_table_iter_init (&iter, self->conns);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    ((LegbaServerConn *) key)->closing = TRUE;
  g_hash_table_iter_init (&iter, self->conns);
  while (g_hash_table_iter_next (&iter, &key, NULL)) {
    LegbaServerConn *conn = key;

    legba_server_conn_release (conn);
    legba_ws_stream_abort (conn->stream);
  }
  g_hash_table_remove_all (self->conns);
  g_clear_pointer (&self->poll_group, legba_poll_group_free);

  g_clear_object (&self->soup);
  g_clear_object (&self->metrics_soup);
  G_OBJECT_CLASS (legba_server_parent_class)->dispose (object);
}

static void
legba_server_finalize (GObject * object)
{
  LegbaServer *self = LEGBA_SERVER (object);

  if (self->reserve_fd >= 0)
    close (self->reserve_fd);
  g_hash_table_unref (self->conns);
  g_ptr_array_unref (self->ws_handlers);
  g_clear_pointer (&self->ws_uri, g_uri_unref);
  g_clear_pointer (&self->sfu, legba_sfu_free);
  g_clear_pointer (&self->hub, legba_hub_free);
  legba_metrics_free (self->metrics);
  g_ptr_array_unref (self->pending_apps);
  g_ptr_array_unref (self->pending_webhooks);
  g_ptr_array_unref (self->extension_types);
  g_clear_object (&self->certificate);
  g_strfreev (self->allowed_origins);
  g_free (self->metrics_token);
  g_free (self->web_dir);
  g_free (self->pusher_js_dir);
  g_free (self->listen_address);
  g_free (self->metrics_address);
  g_free (self->url_host);
  g_free (self->redis_url);
  g_free (self->instance_id);
  g_free (self->redis_prefix);
  g_strfreev (self->turn_urls);
  g_free (self->turn_secret);
  legba_server_finalize_app_limits (self);
  g_strfreev (self->sfu_janus_urls);
  g_strfreev (self->sfu_janus_ws_urls);
  g_free (self->sfu_api_secret);
  g_free (self->sfu_admin_key);
  g_free (self->sfu_topology);
  g_strfreev (self->sfu_prefixes);
  g_clear_pointer (&self->sfu_app_rules, g_hash_table_unref);
  g_main_context_unref (self->context);
  G_OBJECT_CLASS (legba_server_parent_class)->finalize (object);
}

static void
legba_server_install_limits (GObjectClass * object_class)
{
  LegbaLimits defaults;
  guint i;

  legba_limits_init_defaults (&defaults);
  for (i = 0; i < G_N_ELEMENTS (limit_specs); i++) {
    const LegbaLimitSpec *spec = &limit_specs[i];
    guint def = legba_limit_get (&defaults, spec);

    properties[PROP_LIMIT_FIRST + i] = g_param_spec_uint (spec->name, NULL,
        spec->blurb, MIN (spec->min, def), G_MAXUINT, def,
        G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  }
}

/* The bounds on connections in their handshake (legba-server-accept.c,
 * docs/server.md "Limits and abuse"). */
static void
legba_server_install_pending_limits (void)
{
  /**
   * LegbaServer:handshake-timeout:
   *
   * Seconds a new connection has to be done with its TLS handshake and its
   * HTTP request (headers and body, then the answer or the upgrade to
   * WebSocket); past it the connection is shut down. A connection kept
   * alive has as long again for each next request.
   */
  properties[PROP_HANDSHAKE_TIMEOUT] = g_param_spec_uint ("handshake-timeout",
      NULL, "Seconds a new connection has for its TLS handshake and HTTP "
      "request", 1, 3600, DEFAULT_HANDSHAKE_TIMEOUT,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:max-pending-connections:
   *
   * Connections accepted and not yet WebSockets nor answered, per listener
   * (the main one, the /metrics one); at the bound the server stops
   * accepting until one of them ends, and new connections wait in the
   * kernel's backlog. 0: no bound.
   */
  properties[PROP_MAX_PENDING_CONNECTIONS] =
      g_param_spec_uint ("max-pending-connections", NULL,
      "Connections in their handshake at once; more wait to be accepted "
      "(0: no limit)", 0, G_MAXUINT, DEFAULT_MAX_PENDING_CONNECTIONS,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:max-pending-per-address:
   *
   * Connections from one source address (an IPv4 address, an IPv6 /64)
   * accepted and not yet WebSockets nor answered; a new one past it is
   * closed as soon as accepted. 0 (the default): no bound, as behind a
   * reverse proxy (every client has the proxy's address) or a large NAT,
   * where a burst of handshakes from one address is legitimate; set it
   * when clients connect directly.
   */
  properties[PROP_MAX_PENDING_PER_ADDRESS] =
      g_param_spec_uint ("max-pending-per-address", NULL,
      "Connections in their handshake from one address; more are refused "
      "(0: no limit)", 0, G_MAXUINT, DEFAULT_MAX_PENDING_PER_ADDRESS,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
}

static void
legba_server_class_init (LegbaServerClass * klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->set_property = legba_server_set_property;
  object_class->get_property = legba_server_get_property;
  object_class->dispose = legba_server_dispose;
  object_class->finalize = legba_server_finalize;

  /* The limits (max-connections, max-event-bytes, ...): see limit_specs
   * and docs/server.md for what each bounds and why its default. */
  legba_server_install_limits (object_class);
  legba_server_install_pending_limits ();
  legba_server_install_signals (object_class);

  /**
   * LegbaServer:max-request-bytes:
   *
   * Bytes of an HTTP request body; larger ones are answered 413.
   */
  properties[PROP_MAX_REQUEST_BYTES] = g_param_spec_uint ("max-request-bytes",
      NULL, "Bytes of an HTTP request body", 1024, G_MAXUINT,
      DEFAULT_MAX_REQUEST_BYTES, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:allowed-origins:
   *
   * Origins (`https://example.com`) whose pages may open WebSockets and
   * read HTTP API responses (CORS); `*` or %NULL allows any. Requests
   * without an Origin header (programs other than browsers) are allowed.
   */
  properties[PROP_ALLOWED_ORIGINS] = g_param_spec_boxed ("allowed-origins",
      NULL, "Origins allowed (NULL: any)", G_TYPE_STRV,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:compression:
   *
   * Whether to accept permessage-deflate (RFC 7692) on new WebSockets. Off
   * by default: it costs zlib state per socket and a compression per
   * socket per broadcast.
   */
  properties[PROP_COMPRESSION] = g_param_spec_boolean ("compression", NULL,
      "Accept permessage-deflate", FALSE,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:metrics-token:
   *
   * When set, GET /metrics needs `Authorization: Bearer TOKEN`.
   */
  properties[PROP_METRICS_TOKEN] = g_param_spec_string ("metrics-token", NULL,
      "Bearer token /metrics requires (NULL: none)", NULL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:web-dir:
   *
   * The directory of the demo page: its files (`index.html`, `demo.js`,
   * `demo.css`, `room-peer.js`) are served under `/demo/`, regular files
   * only (no symbolic link, FIFO or device). %NULL serves no page.
   */
  properties[PROP_WEB_DIR] = g_param_spec_string ("web-dir", NULL,
      "Directory of the /demo page's files (NULL: no page)", NULL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:pusher-js-dir:
   *
   * The directory holding pusher-js's browser build, `pusher.min.js`
   * (`node_modules/pusher-js/dist/web`), served as `/demo/pusher.min.js`.
   */
  properties[PROP_PUSHER_JS_DIR] = g_param_spec_string ("pusher-js-dir",
      NULL, "Directory of pusher-js's pusher.min.js, for the /demo page",
      NULL, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:listen-address:
   *
   * The address legba_server_start() listens on.
   */
  properties[PROP_LISTEN_ADDRESS] = g_param_spec_string ("listen-address",
      NULL, "Address legba_server_start() listens on", DEFAULT_LISTEN_ADDRESS,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:listen-port:
   *
   * The port legba_server_start() listens on; 0 picks a free one.
   */
  properties[PROP_LISTEN_PORT] = g_param_spec_uint ("listen-port", NULL,
      "Port legba_server_start() listens on (0: any free)", 0, 65535,
      DEFAULT_LISTEN_PORT, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:metrics-address:
   *
   * When set, legba_server_start() serves /metrics on a listener of its own
   * at this address (see legba_server_listen_metrics()).
   */
  properties[PROP_METRICS_ADDRESS] = g_param_spec_string ("metrics-address",
      NULL, "Address of a separate /metrics listener (NULL: none)", NULL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:metrics-port:
   *
   * The port of the separate /metrics listener; 0 picks a free one.
   */
  properties[PROP_METRICS_PORT] = g_param_spec_uint ("metrics-port", NULL,
      "Port of the separate /metrics listener (0: any free)", 0, 65535,
      DEFAULT_METRICS_PORT, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:redis-url:
   *
   * With a Redis URL (`redis://[:PASSWORD@]HOST[:PORT][/DB]` or
   * `unix://[:PASSWORD@]/PATH[?db=N]`), this server is one instance of a
   * cluster sharing its rooms through Redis (docs/scale-out.md): events,
   * presence and channel counts reach every instance. Set before listening.
   */
  properties[PROP_REDIS_URL] = g_param_spec_string ("redis-url", NULL,
      "Redis shared by the instances of a cluster (NULL: one instance)",
      NULL, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:instance-id:
   *
   * This instance's id in the cluster, unique among the instances sharing
   * the Redis key prefix (1 to 64 of A-Z a-z 0-9 . _ - :). %NULL: the host
   * name and process id, chosen when listening starts.
   */
  properties[PROP_INSTANCE_ID] = g_param_spec_string ("instance-id", NULL,
      "Id of this instance in the cluster (NULL: host name and pid)", NULL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:redis-prefix:
   *
   * Prefix of every Redis key the cluster uses, so that several clusters
   * can share one Redis.
   */
  properties[PROP_REDIS_PREFIX] = g_param_spec_string ("redis-prefix", NULL,
      "Prefix of the cluster's Redis keys", LEGBA_RELAY_DEFAULT_PREFIX,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:redis-retention:
   *
   * Entries the cluster's Redis stream keeps (approximately, XADD MAXLEN
   * ~): an instance away from Redis catches up on at most this many.
   */
  properties[PROP_REDIS_RETENTION] = g_param_spec_uint ("redis-retention",
      NULL, "Entries kept in the cluster's Redis stream",
      LEGBA_RELAY_MIN_RETENTION, G_MAXINT, LEGBA_RELAY_DEFAULT_RETENTION,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:redis-instance-ttl:
   *
   * Seconds after which an instance that stopped renewing its heartbeat in
   * Redis is taken for dead: the others remove its members.
   */
  properties[PROP_REDIS_INSTANCE_TTL] =
      g_param_spec_uint ("redis-instance-ttl", NULL,
      "Seconds before a silent instance's members are removed",
      LEGBA_RELAY_MIN_INSTANCE_TTL, 3600, LEGBA_RELAY_DEFAULT_INSTANCE_TTL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:turn-urls:
   *
   * TURN servers (`turn:HOST[:PORT][?transport=udp|tcp]`, `turns:...`, as
   * browsers take them) sharing #LegbaServer:turn-secret with this server
   * (coturn's `use-auth-secret`). With both set, every member of a room
   * channel (`presence-legba.ROOM`) gets time-limited credentials for them
   * when its subscription succeeds, and so does every answer of the
   * join-token endpoint. A list with an invalid URL is refused whole, with
   * a warning.
   */
  properties[PROP_TURN_URLS] = g_param_spec_boxed ("turn-urls", NULL,
      "TURN servers room members get credentials for (NULL: none)",
      G_TYPE_STRV, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:turn-secret:
   *
   * The secret shared with the TURN servers (coturn's
   * `static-auth-secret`): a member's credential is base64 (HMAC-SHA1
   * (secret, "EXPIRY:PARTICIPANT_ID")).
   */
  properties[PROP_TURN_SECRET] = g_param_spec_string ("turn-secret", NULL,
      "Secret shared with the TURN servers (NULL: no credentials)", NULL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:turn-ttl:
   *
   * Seconds the TURN credentials handed out stay valid. A relayed
   * connection needs them for as long as it lasts: the TURN server checks
   * them again whenever the allocation is refreshed.
   */
  properties[PROP_TURN_TTL] = g_param_spec_uint ("turn-ttl", NULL,
      "Seconds TURN credentials stay valid", 60, G_MAXINT,
      LEGBA_TURN_DEFAULT_TTL, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:sfu-janus-urls:
   *
   * The HTTP API of each Janus instance (`http://HOST:PORT/janus`) on
   * which the server makes the VideoRooms of SFU rooms, each room on the
   * instance with the fewest rooms. Read when the server starts; goes with
   * #LegbaServer:sfu-janus-ws-urls.
   */
  properties[PROP_SFU_JANUS_URLS] = g_param_spec_boxed ("sfu-janus-urls",
      NULL, "HTTP API URLs of the Janus instances of SFU rooms (NULL: none)",
      G_TYPE_STRV, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:sfu-janus-ws-urls:
   *
   * The WebSocket API of each Janus instance, as members of SFU rooms
   * reach it (`ws://HOST:PORT/`, `wss://...`), in the order of
   * #LegbaServer:sfu-janus-urls: a member is told the one of its room's
   * instance.
   */
  properties[PROP_SFU_JANUS_WS_URLS] = g_param_spec_boxed
      ("sfu-janus-ws-urls", NULL,
      "WebSocket URLs members use, one per Janus instance (NULL: none)",
      G_TYPE_STRV, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:sfu-api-secret:
   *
   * Janus's `api_secret`, sent with the server's requests to Janus; never
   * given to members.
   */
  properties[PROP_SFU_API_SECRET] = g_param_spec_string ("sfu-api-secret",
      NULL, "Janus API secret of the server's requests (NULL: none)", NULL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:sfu-admin-key:
   *
   * The `admin_key` of Janus's VideoRoom plugin, which creating a room
   * needs when it is set there.
   */
  properties[PROP_SFU_ADMIN_KEY] = g_param_spec_string ("sfu-admin-key",
      NULL, "Janus VideoRoom admin_key for creating rooms (NULL: none)", NULL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:sfu-topology:
   *
   * The topology of the rooms of every app without one of its own:
   * `mesh` (the default), `sfu`, or `auto` (a mesh up to 4 members, moved
   * to the SFU when a fifth joins; `auto:N` for N). Read when the server
   * starts.
   */
  properties[PROP_SFU_TOPOLOGY] = g_param_spec_string ("sfu-topology",
      NULL, "Topology of rooms: mesh, sfu, auto or auto:N (NULL: mesh)", NULL,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:sfu-prefixes:
   *
   * Room-name prefixes of SFU rooms in apps without topology of their own:
   * a room whose name starts with one of them is an SFU room whatever
   * #LegbaServer:sfu-topology says.
   */
  properties[PROP_SFU_PREFIXES] = g_param_spec_boxed ("sfu-prefixes", NULL,
      "Room-name prefixes of SFU rooms (NULL: none)", G_TYPE_STRV,
      G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);

  /**
   * LegbaServer:connection-count:
   *
   * WebSocket sockets open, closing ones included; notified on change.
   */
  properties[PROP_CONNECTION_COUNT] = g_param_spec_uint ("connection-count",
      NULL, "WebSocket sockets open", 0, G_MAXUINT, 0,
      G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);

  g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
legba_server_init (LegbaServer * self)
{
  self->context = g_main_context_ref_thread_default ();
  legba_limits_init_defaults (&self->limits);
  self->hub = legba_hub_new (&legba_server_transport, self);
  legba_hub_set_limits (self->hub, &self->limits);
  legba_hub_set_hooks (self->hub, &legba_server_hooks, self);
  legba_server_init_app_limits (self);
  self->max_request_bytes = DEFAULT_MAX_REQUEST_BYTES;
  self->handshake_timeout = DEFAULT_HANDSHAKE_TIMEOUT;
  self->max_pending_connections = DEFAULT_MAX_PENDING_CONNECTIONS;
  self->max_pending_per_address = DEFAULT_MAX_PENDING_PER_ADDRESS;
  self->reserve_fd = -1;
  self->listen_address = g_strdup (DEFAULT_LISTEN_ADDRESS);
  self->listen_port = DEFAULT_LISTEN_PORT;
  self->metrics_port = DEFAULT_METRICS_PORT;
  self->redis_prefix = g_strdup (LEGBA_RELAY_DEFAULT_PREFIX);
  self->redis_retention = LEGBA_RELAY_DEFAULT_RETENTION;
  self->redis_instance_ttl = LEGBA_RELAY_DEFAULT_INSTANCE_TTL;
  self->turn_ttl = LEGBA_TURN_DEFAULT_TTL;
  self->pending_apps = g_ptr_array_new_with_free_func (legba_pending_app_free);
  self->pending_webhooks = g_ptr_array_new_with_free_func ((GDestroyNotify)
      g_strfreev);
  legba_webhook_settings_init_defaults (&self->webhook_settings);
  self->conns = g_hash_table_new_full (NULL, NULL, legba_server_conn_free,
      NULL);
  self->poll_group = legba_poll_group_new (self->context, POLL_BUCKET_SIZE);
  self->ws_handlers = g_ptr_array_new_with_free_func (legba_ws_handlers_free);
  self->metrics = legba_metrics_new ();
  self->extension_types =
      g_ptr_array_new_with_free_func ((GDestroyNotify) g_type_class_unref);
  g_ptr_array_add (self->extension_types,
      g_type_class_ref (LEGBA_TYPE_WS_DEFLATE));

  self->soup = legba_server_new_soup (self);
  self->acceptor = legba_acceptor_new (self, self->soup);
  soup_server_add_handler (self->soup, "/app/", legba_server_handle_app, self,
      NULL);
  soup_server_add_handler (self->soup, "/apps/", legba_server_handle_apps,
      self, NULL);

  self->tick = g_timeout_source_new_seconds (1);
  g_source_set_callback (self->tick, legba_server_tick, self, NULL);
  g_source_attach (self->tick, self->context);
}

/**
 * legba_server_new:
 *
 * Creates a server with the default limits and no app, on the
 * thread-default main context.
 *
 * Returns: (transfer full): a new #LegbaServer
 */
LegbaServer *
legba_server_new (void)
{
  return g_object_new (LEGBA_TYPE_SERVER, NULL);
}

LegbaHub *
legba_server_get_hub (LegbaServer * server)
{
  g_return_val_if_fail (LEGBA_IS_SERVER (server), NULL);

  return server->hub;
}
