/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaClientEvent: a client event that reached a #LegbaServer, as its
 * #LegbaServer::client-event handlers see it.
 *
 * Threads: on the thread of the server's main context only, as the server.
 */
#pragma once

#if !defined(LEGBA_INSIDE) && !defined(LEGBA_COMPILATION)
#error "Only <legba/server/server.h> can be included directly."
#endif

#include <glib-object.h>
#include <legba/legba-api.h>

G_BEGIN_DECLS

/**
 * LegbaClientEvent:
 *
 * A client event that reached a #LegbaServer, as its
 * #LegbaServer::client-event handlers see it.
 *
 * A #LegbaClientEvent is what a #LegbaServer::client-event handler gets:
 * a client event (`client-NAME`, Pusher protocol 7) one of the server's
 * sockets sent on a private or presence channel it joined, once every
 * check passed (subscription, channel kind, `max-event-bytes`,
 * `client-events-per-second`), before it is relayed.
 *
 * The handler may answer the sender alone with legba_client_event_reply()
 * (then, or later on a reference it keeps), refuse the event with
 * legba_client_event_refuse() (the sender gets `pusher:error` 4303 and
 * nobody the event), or let it be relayed to the channel as usual.
 *
 * |[<!-- language="C" -->
 * static gboolean
 * on_client_event (LegbaServer * server, LegbaClientEvent * event,
 *     gpointer user_data)
 * {
 *   if (!g_str_equal (legba_client_event_get_name (event), "client-ask"))
 *     return FALSE;                // relayed as usual
 *   legba_client_event_reply (event, "answer", "{\"ok\":true}");
 *   return TRUE;                   // handled: not relayed
 * }
 *
 * g_signal_connect (server, "client-event", G_CALLBACK (on_client_event),
 *     NULL);
 * ]|
 *
 * ## Threads
 *
 * On the thread of the server's main context only, as the server.
 */
#define LEGBA_TYPE_CLIENT_EVENT (legba_client_event_get_type ())
LEGBA_API
G_DECLARE_FINAL_TYPE (LegbaClientEvent, legba_client_event, LEGBA,
    CLIENT_EVENT, GObject)

LEGBA_API
const char *legba_client_event_get_app_id (LegbaClientEvent * event);

LEGBA_API
const char *legba_client_event_get_socket_id (LegbaClientEvent * event);

LEGBA_API
const char *legba_client_event_get_channel (LegbaClientEvent * event);

LEGBA_API
const char *legba_client_event_get_name (LegbaClientEvent * event);

LEGBA_API
const char *legba_client_event_get_data (LegbaClientEvent * event);

LEGBA_API
const char *legba_client_event_get_user_id (LegbaClientEvent * event);

LEGBA_API
gboolean legba_client_event_reply (LegbaClientEvent * event,
    const char *name, const char *data);

LEGBA_API
void legba_client_event_refuse (LegbaClientEvent * event,
    const char *message);

G_END_DECLS
