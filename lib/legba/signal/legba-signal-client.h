/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * LegbaSignalClient:
 *
 * A #LegbaSignaller over the Pusher Channels protocol 7.
 *
 * #LegbaSignalClient joins a room (docs/room-protocol.md) through any server
 * that speaks the Pusher Channels protocol 7: legba-server, Pusher itself,
 * soketi or Laravel Reverb. The room `R` is the presence channel
 * `presence-legba.R`; signals are `client-legba-signal` client events.
 *
 * It authenticates the presence subscription in one of three ways, the
 * first configured one winning:
 *
 * - #LegbaSignalClient:token: a join token (legba_join_token_new()) sent as
 *   a bearer token to legba-server's `POST /apps/APP_ID/auth` (or to
 *   #LegbaSignalClient:auth-url when set);
 * - #LegbaSignalClient:auth-url: an application endpoint called as
 *   pusher-js calls it (a form POST of `socket_id` and `channel_name`,
 *   answered with JSON `{"auth", "channel_data"}`);
 * - #LegbaSignalClient:app-secret: signing locally with the app secret
 *   (trusted programs, tests).
 *
 * It keeps the room joined: pings after #LegbaSignalClient:activity-timeout
 * of silence, reconnects with exponential backoff and jitter (at once when
 * the server closes with 4200–4299, never after 4000–4099), and joins again
 * with the same participant id. It splits signals larger than the server's
 * event size into `part` messages and paces them to the server's client
 * event rate (docs/room-protocol.md §4), using the limits a server advertises.
 *
 * It connects through the system's proxy settings (GIO's default
 * #GProxyResolver), except to a server and auth endpoint on a loopback
 * address (127.0.0.0/8, `::1`, `localhost`), which it reaches directly.
 *
 * |[<!-- language="C" -->
 * LegbaSignalClient *client =
 *     legba_signal_client_new ("ws://127.0.0.1:6001", "KEY");
 *
 * g_object_set (client, "app-id", "1", "token", token, NULL);
 * room = legba_room_new (LEGBA_SIGNALLER (client), GST_BIN (pipeline));
 * ]|
 *
 * ## Threads
 *
 * A #LegbaSignalClient runs on the thread-default #GMainContext of the
 * thread that first joins a room with it (g_main_context_get_thread_default()
 * at its first legba_signaller_join(); it may be made and configured on
 * another thread before that). Use it with a #GMainLoop running that
 * context: its network I/O and timers are attached there, its signals and
 * property notifications are emitted there, and its methods must be called
 * from the thread that runs it.
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
