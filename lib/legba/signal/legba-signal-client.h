/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaSignalClient: a #LegbaSignaller over the Pusher Channels protocol 7.
 *
 * Threads: a LegbaSignalClient runs on the thread-default GMainContext of
 * the thread that first joins a room with it
 * (g_main_context_get_thread_default() at its first legba_signaller_join();
 * it may be made and configured on another thread before that). Use it
 * with a GMainLoop running that context: its
 * network I/O and timers are attached there, its signals and property
 * notifications are emitted there, and its methods must be called from
 * the thread that runs it.
 */
#pragma once

#if !defined(LEGBA_INSIDE) && !defined(LEGBA_COMPILATION)
#error "Only <legba/legba.h> can be included directly."
#endif

#include <legba/legba-api.h>
#include <legba/signal/legba-signaller.h>

G_BEGIN_DECLS

#define LEGBA_TYPE_SIGNAL_CLIENT (legba_signal_client_get_type ())
LEGBA_API
G_DECLARE_FINAL_TYPE (LegbaSignalClient, legba_signal_client, LEGBA,
    SIGNAL_CLIENT, GObject)

LEGBA_API
LegbaSignalClient *legba_signal_client_new (const char *server_url,
    const char *app_key);

LEGBA_API
void legba_signal_client_add_auth_param (LegbaSignalClient * self,
    const char *name, const char *value);
LEGBA_API
void legba_signal_client_add_auth_header (LegbaSignalClient * self,
    const char *name, const char *value);

LEGBA_API
const char *legba_signal_client_get_socket_id (LegbaSignalClient * self);

G_END_DECLS
