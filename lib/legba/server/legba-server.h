/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * LegbaServer:
 *
 * The Pusher Channels protocol 7 signalling server (WebSocket and HTTP
 * API) on libsoup 3, embeddable in any program.
 *
 * #LegbaServer is the signalling server of Legba rooms: the Pusher
 * Channels protocol 7 over WebSocket at `/app/APP_KEY?protocol=7`, the
 * Pusher HTTP API under `/apps/`, join tokens at `/apps/ID/auth`, `GET
 * /up` and `GET /metrics`. The protocol lives in a state machine without
 * I/O (the hub); this object is its transport: it accepts sockets, hands
 * frames to the hub, bounds what each socket may hold, and serves HTTP.
 *
 * |[<!-- language="C" -->
 * g_autoptr (LegbaServer) server = legba_server_new ();
 * legba_server_add_app (server, "1", "app-key", "app-secret", &error);
 * legba_server_listen (server, "127.0.0.1", 0, &error);
 * g_print ("ws://127.0.0.1:%u/app/app-key?protocol=7\n",
 *     legba_server_get_port (server));
 * ]|
 *
 * ## Threads
 *
 * A #LegbaServer runs on the thread-default #GMainContext current when it
 * is created; call it only from that context's thread, and run that
 * context (a #GMainLoop) for it to serve.
 */
#pragma once

#if !defined(LEGBA_INSIDE) && !defined(LEGBA_COMPILATION)
#error "Only <legba/server/server.h> can be included directly."
#endif

#include <glib-object.h>
#include <legba/legba-api.h>

G_BEGIN_DECLS

#define LEGBA_TYPE_SERVER (legba_server_get_type ())
LEGBA_API
G_DECLARE_FINAL_TYPE (LegbaServer, legba_server, LEGBA, SERVER, GObject)

/**
 * LEGBA_SERVER_ERROR:
 *
 * Error domain of #LegbaServer. Errors in this domain are from the
 * #LegbaServerError enumeration.
 */
#define LEGBA_SERVER_ERROR (legba_server_error_quark ())
LEGBA_API
GQuark legba_server_error_quark (void);

/**
 * LegbaServerError:
 * @LEGBA_SERVER_ERROR_CONFIG: the configuration is invalid
 * @LEGBA_SERVER_ERROR_LISTEN: the server could not listen
 * @LEGBA_SERVER_ERROR_TLS: the TLS certificate or key could not be loaded
 *
 * Errors of #LegbaServer.
 */
typedef enum
{
  LEGBA_SERVER_ERROR_CONFIG,
  LEGBA_SERVER_ERROR_LISTEN,
  LEGBA_SERVER_ERROR_TLS,
} LegbaServerError;

LEGBA_API
LegbaServer *legba_server_new (void);

LEGBA_API
gboolean legba_server_add_app (LegbaServer * server, const char *id,
    const char *key, const char *secret, GError ** error);

LEGBA_API
gboolean legba_server_set_app_subscription_count (LegbaServer * server,
    const char *id, gboolean enabled, GError ** error);

LEGBA_API
gboolean legba_server_set_app_limit (LegbaServer * server, const char *id,
    const char *name, guint value, GError ** error);

LEGBA_API
gboolean legba_server_load_config (LegbaServer * server, const char *path,
    GError ** error);

LEGBA_API
gboolean legba_server_set_tls_files (LegbaServer * server,
    const char *cert_file, const char *key_file, GError ** error);

LEGBA_API
gboolean legba_server_listen (LegbaServer * server, const char *address,
    guint port, GError ** error);

LEGBA_API
gboolean legba_server_start (LegbaServer * server, GError ** error);

LEGBA_API
guint legba_server_get_port (LegbaServer * server);

LEGBA_API
char *legba_server_get_url (LegbaServer * server);

LEGBA_API
gboolean legba_server_listen_metrics (LegbaServer * server,
    const char *address, guint port, GError ** error);

LEGBA_API
guint legba_server_get_metrics_port (LegbaServer * server);

LEGBA_API
guint legba_server_get_connection_count (LegbaServer * server);

LEGBA_API
void legba_server_shutdown (LegbaServer * server);

G_END_DECLS
