/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What legba-server's own parts (config file, tools, in-process tests)
 * reach beyond the public API.
 */
#pragma once

#include <legba/server/legba-server.h>
#include <legba/server/legba-hub.h>
#include <legba/server/legba-webhooks.h>

G_BEGIN_DECLS

/* The hub behind the server. Apps added before the server listens reach
 * the hub when it starts listening. */
LegbaHub *legba_server_get_hub (LegbaServer * server);

/* The names of the properties that are limits: the keys of the config
 * file's [limits] group and the limit flags of legba-server. All are
 * unsigned integer properties. NULL-terminated. */
const char *const *legba_server_get_limit_names (void);

/* legba-server.c: the limits an app may have values of its own for, by
 * index in the table of limit properties (those the hub keeps per app:
 * all but the transport's four that apply before an app is known). */
int legba_server_app_limit_index (const char *name);
guint legba_server_n_app_limits (void);
void legba_server_app_limit_set (LegbaLimits * limits,
    guint index, guint value);
guint legba_server_app_limit_get (const LegbaLimits * limits,
    guint index);

/* Bytes waiting in the server to be written to its sockets, all sockets
 * together (the legba_queued_bytes gauge of /metrics). */
guint64 legba_server_get_queued_bytes (LegbaServer * server);

/* The text of /metrics: the transport's and hub's, then the relay's. */
char *legba_server_render_metrics (LegbaServer * self);

/* Writes one structured log line in the "Legba" domain: field LEGBA_EVENT
 * = event, then the given (FIELD, value) string pairs, NULL-terminated,
 * and a MESSAGE "event field=value ..." for plain-text readers. Values
 * must never hold secrets; NULL values are left out. */
void legba_server_log (GLogLevelFlags level, const char *event, ...)
    G_GNUC_NULL_TERMINATED;

/* Reads the configuration file at path again, as legba_server_load_config()
 * does (nothing changes unless all of it is valid), into a server that
 * listens: apps added, removed (their sockets closed with 4001), given a
 * new key (the same) or secret, and every limit as the file has it (its
 * default when the file has none). What cannot change while the server
 * runs (addresses, ports, TLS, Redis, TURN, origins, compression, the
 * metrics token) stays as it is, and a message names each the file gives
 * another value. The app whose id is keep_app_id (from legba-server's
 * flags) is left alone. */
gboolean legba_server_reload_config (LegbaServer * server, const char *path,
    const char *keep_app_id, GError ** error);
/* Adds a webhook to the app app_id: spec "URL EVENT[,EVENT...]"
 * (legba_webhook_spec_parse()). Checked at once; the app must exist when
 * the server starts listening. */
gboolean legba_server_add_webhook (LegbaServer * server, const char *app_id,
    const char *spec, GError ** error);
/* Batching, delays, bounds and retries of every webhook; before the
 * server starts listening. */
void legba_server_set_webhook_settings (LegbaServer * server,
    const LegbaWebhookSettings * settings);
/* The topology of app_id's rooms ("mesh", "sfu" or NULL: the server's)
 * and its SFU room prefixes, over the server's own; before the server
 * starts listening. */
void legba_server_set_app_topology (LegbaServer * server, const char *app_id,
    const char *topology, const char *const *prefixes);

/* ---- Internal to lib/legba/legba-server*.c ---- */
#ifdef LEGBA_SERVER_INTERNALS

#include <libsoup/soup.h>
#include <legba/server/legba-metrics.h>
#include <legba/server/legba-poll-group.h>
#include <legba/server/legba-relay.h>
#include <legba/server/legba-ws-stream.h>

typedef struct _LegbaAcceptor LegbaAcceptor;

struct _LegbaServer
{
  GObject parent;

  GMainContext *context;
  LegbaHub *hub;
  LegbaLimits limits;
  guint max_request_bytes;
  /* Connections accepted and not yet WebSockets nor answered
   * (legba-server-accept.c) */
  guint handshake_timeout;      /* seconds */
  guint max_pending_connections;        /* per listener; 0: no bound */
  guint max_pending_per_address;        /* 0: no bound */
  char **allowed_origins;       /* NULL: any */
  gboolean compression;
  char *metrics_token;
  char *web_dir;                /* the /demo page's files; NULL: no page */
  char *pusher_js_dir;          /* where /demo/pusher.min.js comes from */
  char *listen_address;
  guint listen_port;
  char *metrics_address;
  guint metrics_port;

  SoupServer *soup;
  SoupServer *metrics_soup;
  LegbaAcceptor *acceptor;      /* soup's */
  LegbaAcceptor *metrics_acceptor;
  int reserve_fd;               /* let go to refuse at the descriptor limit */
  GTlsCertificate *certificate;
  GPtrArray *extension_types;   /* permessage-deflate, when compressing */
  guint port;
  guint bound_metrics_port;
  char *url_host;

  GPtrArray *pending_apps;      /* until the first listen */
  gboolean started;
  gboolean shutting_down;

  GHashTable *conns;            /* LegbaServerConn set, owns them */
  /* The sockets' SoupWebsocketConnection handlers (message, error,
   * closed): groups of three closures, each group shared by up to
   * WS_HANDLERS_USERS sockets, which the handlers find through the
   * socket's stream, where a closure a socket would cost some 70 bytes */
  GPtrArray *ws_handlers;
  GUri *ws_uri;                 /* the WebSocket's address, for all sockets */
  struct _LegbaPollGroup *poll_group;   /* where the sockets' sources are */
  LegbaMetrics *metrics;
  guint64 written_closed;       /* bytes written by sockets now gone */

  /* Scale-out through Redis (docs/scale-out.md) */
  char *redis_url;              /* NULL: a single instance */
  char *instance_id;            /* NULL until started: a default one */
  char *redis_prefix;
  guint redis_retention;
  guint redis_instance_ttl;
  LegbaRelay *relay;

  /* Webhooks (docs/server.md) */
  LegbaWebhookSettings webhook_settings;
  GPtrArray *pending_webhooks;  /* GStrv {app id, spec}, until started */
  LegbaWebhooks *webhooks;      /* NULL: none configured */

  /* TURN credentials for room members (docs/server.md) */
  char **turn_urls;
  char *turn_secret;
  guint turn_ttl;

  /* SFU rooms on Janus (docs/server.md), read at start */
  char **sfu_janus_urls;
  char **sfu_janus_ws_urls;
  char *sfu_api_secret;
  char *sfu_admin_key;
  char *sfu_topology;
  char **sfu_prefixes;
  GHashTable *sfu_app_rules;    /* app id -> LegbaSfuRule *, or NULL */
  struct _LegbaSfu *sfu;

  GSource *tick;
  GSource *shutdown_timer;

  /* Limits per app (legba-server-app-limits.c) */
  GHashTable *app_limits;       /* app id -> LegbaAppLimits, its own values */
  GHashTable *api_buckets;      /* LegbaHubApp * -> its HTTP API tokens */
  GHashTable *api_refused;      /* app id -> guint64 *, requests refused 429 */
};

/* The closures of the handlers of LegbaServerConn.ws, in the order of
 * ws_signals, and how many sockets are connected through them. */
typedef struct
{
  GClosure *closures[3];
  guint users;
} LegbaWsHandlers;

/* One WebSocket socket. */
typedef struct
{
  /* What sending a frame reads, together */
  gboolean closing;
  gboolean frames_direct;       /* no extension: the stream may write text
                                 * frames itself */
  SoupWebsocketConnection *ws;
  LegbaWsStream *stream;
  LegbaPollBucket *bucket;      /* where its sources are; NULL: main context */
  LegbaServer *server;
  LegbaWsHandlers *handlers;    /* its handlers' closures, shared */
  LegbaHubConn *hub_conn;       /* NULL once the hub let it go */
  GSource *release_source;
  GSource *close_timer;         /* tears it down if the close goes unanswered */
  char *remote;
  char *socket_id;
  guint16 close_code;           /* what the server closed with, 0: peer */
  gsize max_queued_bytes;       /* its app's, when it opened */
} LegbaServerConn;

/* legba-server.c: LegbaServer:connection-count changed. */
G_GNUC_INTERNAL void legba_server_notify_connection_count (LegbaServer * self);

/* legba-server-ws.c: the hub's transport, the WebSocket sockets and the
 * upgrade to them. */
G_GNUC_INTERNAL extern const LegbaHubTransport legba_server_transport;
G_GNUC_INTERNAL void legba_server_handle_app (SoupServer * soup,
    SoupServerMessage * msg, const char *path, GHashTable * query,
    gpointer user_data);
G_GNUC_INTERNAL void legba_server_transport_close (gpointer handle,
    guint16 code, const char *reason, gpointer user_data);
/* Tells the hub at once that conn is gone. */
G_GNUC_INTERNAL void legba_server_conn_release (LegbaServerConn * conn);
/* The free functions of LegbaServer.conns and LegbaServer.ws_handlers. */
G_GNUC_INTERNAL void legba_server_conn_free (gpointer data);
G_GNUC_INTERNAL void legba_ws_handlers_free (gpointer data);

/* legba-server-app-limits.c: limits per app, and the HTTP API's rate. */
G_GNUC_INTERNAL void legba_server_init_app_limits (LegbaServer * self);
G_GNUC_INTERNAL void legba_server_finalize_app_limits (LegbaServer * self);
/* Gives every app of the hub the server's limits, with its own values
 * where it has some. */
G_GNUC_INTERNAL void legba_server_apply_app_limits (LegbaServer * self);
/* The limits of the app whose key is app_key (the server's without one). */
G_GNUC_INTERNAL const LegbaLimits *legba_server_limits_for_key (LegbaServer *
    self, const char *app_key);
/* Takes the apps' own limits of other (a configuration read again) in
 * place of this server's, but for the app keep_app_id; returns the ids
 * of the apps whose own limits changed (transfer full). */
G_GNUC_INTERNAL char **legba_server_take_app_limits (LegbaServer * self,
    LegbaServer * other, const char *keep_app_id);
/* Takes a token of the HTTP API bucket of the app the request at path is
 * for; FALSE when it has none left (msg is then answered 429). */
G_GNUC_INTERNAL gboolean legba_server_api_admit (LegbaServer * self,
    SoupServerMessage * msg, const char *path);
G_GNUC_INTERNAL void legba_server_render_api_metrics (LegbaServer * self,
    GString * out);

/* legba-server-hooks.c: the signals of an application embedding the
 * server, over the hub's hooks. */
G_GNUC_INTERNAL extern const LegbaHubHooks legba_server_hooks;
G_GNUC_INTERNAL void legba_server_install_signals (GObjectClass * klass);

/* legba-server-listen.c: listening, the server's gauges, apps, TLS and
 * shutdown. */
void legba_server_get_gauges (LegbaServer * self, LegbaMetricsGauges * gauges);
/* An app added before the first listen (LegbaServer.pending_apps). */
typedef struct
{
  char *id;
  char *key;
  char *secret;
  gboolean subscription_count;
} LegbaPendingApp;

/* The free function of LegbaServer.pending_apps. */
G_GNUC_INTERNAL void legba_pending_app_free (gpointer data);

/* legba-server-http.c: the HTTP side (/apps/, /up, /metrics, CORS, bounded
 * request bodies). */
SoupServer *legba_server_new_soup (LegbaServer * self);
void legba_server_handle_apps (SoupServer * soup, SoupServerMessage * msg,
    const char *path, GHashTable * query, gpointer user_data);
void legba_server_handle_default (SoupServer * soup, SoupServerMessage * msg,
    const char *path, GHashTable * query, gpointer user_data);
void legba_server_respond_error (SoupServerMessage * msg, guint status,
    const char *error);
char *legba_server_remote (SoupServerMessage * msg);
char *legba_server_address_string (GSocketAddress * address);
/* Lets the response keep its connection open, for a WebSocket upgrade:
 * with a libsoup that leaks kept-alive connections, every other response
 * closes its connection. */
void legba_server_keep_connection (SoupServerMessage * msg);
gboolean legba_server_origin_allowed (LegbaServer * self, const char *origin);

/* legba-server-accept.c: accepting connections for one SoupServer. */
LegbaAcceptor *legba_acceptor_new (LegbaServer * server, SoupServer * soup);
/* Accepts on socket, bound and listening. */
gboolean legba_acceptor_add_socket (LegbaAcceptor * acceptor,
    GSocket * socket, SoupServerListenOptions options, GError ** error);
/* Connections accepted and not yet WebSockets nor done with. */
guint legba_acceptor_get_pending (LegbaAcceptor * acceptor);
void legba_acceptor_stop (LegbaAcceptor * acceptor);
void legba_acceptor_free (LegbaAcceptor * acceptor);
/* The TCP socket under msg's connection. */
GSocket *legba_acceptor_get_socket (SoupServerMessage * msg);
/* msg's connection is now a WebSocket: it is no longer pending. */
void legba_acceptor_upgraded (SoupServerMessage * msg);
/* msg was answered: a connection kept alive has handshake-timeout again
 * for its next request. */
void legba_acceptor_request_done (SoupServerMessage * msg);
/* Answers msg at once with status and the JSON body, without reading its
 * request body, and closes the connection. FALSE when msg's connection is
 * not one the server accepted (nothing is done). */
gboolean legba_acceptor_refuse (SoupServerMessage * msg, guint status,
    const char *body);

#endif /* LEGBA_SERVER_INTERNALS */

G_END_DECLS
