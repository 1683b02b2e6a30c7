/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaServer: the Pusher Channels protocol 7 signalling server (WebSocket
 * and HTTP API) on libsoup 3, embeddable in any program.
 *
 * Threads: a LegbaServer runs on the thread-default GMainContext current
 * when it is created; call it only from that context's thread, and run
 * that context (a GMainLoop) for it to serve.
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
