/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaSignalClient's insides, shared by legba-signal-client.c (the
 * object, the room and the send queue) and legba-signal-connection.c (one
 * Pusher protocol 7 connection: handshake, auth, frames, reconnection).
 * Everything here runs on the client's main context.
 */
#pragma once

#include <legba/signal/legba-signal-client.h>
#include <legba/signal/legba-signal-codec.h>

#include <libsoup/soup.h>

G_BEGIN_DECLS

#define LEGBA_SIGNAL_CLIENT_NAME "legba-gst"

/* One WebSocket connection attempt, from connect to close. */
typedef struct
{
  GCancellable *cancellable;    /* WebSocket handshake and auth request */
  SoupWebsocketConnection *ws;
  char *socket_id;
  gboolean subscribed;
  guint activity_ms;
  gint64 last_received;
  int error_code;               /* the last pusher:error code, 0 if none */
  char *error_message;
  GSource *connect_timer;
  GSource *activity_timer;
  GSource *pong_timer;
  GSource *pace_timer;
} LegbaSignalConnection;

struct _LegbaSignalClient
{
  GObject parent;

  GMainContext *context;

  /* configuration */
  char *server_url;
  char *app_key;
  char *app_id;
  char *app_secret;
  char *auth_url;
  char *token;
  char *ca_file;
  GHashTable *auth_params;
  GHashTable *auth_headers;
  guint connect_timeout;        /* all durations in milliseconds */
  guint activity_timeout;
  guint pong_timeout;
  guint reconnect_delay_min;
  guint reconnect_delay_max;
  guint client_event_bytes;
  guint client_events_per_second;

  SoupSession *session;

  /* the room, from join to leave */
  LegbaSignallerState state;
  gboolean in_room;
  gboolean was_joined;
  char *channel;
  char *participant_id;
  char *identity;
  char *display_name;
  GHashTable *members;          /* id -> LegbaSignalMember */
  guint attempt;                /* consecutive failed connections */
  guint64 next_part_id;
  /* docs/room-protocol.md §4, advertised or ours */
  gsize event_bytes;
  guint events_per_window;
  GQueue queue;                 /* Outgoing signals, in send order */
  GArray *sent_times;           /* monotonic µs of recent client events */
  LegbaSignalReassembler *reassembler;
  GSource *expire_timer;
  GSource *reconnect_timer;

  LegbaSignalConnection *conn;
  GPtrArray *closing;           /* WebSockets closing gracefully */
};

static inline void
legba_signal_timer_clear (GSource ** slot)
{
  if (*slot == NULL)
    return;
  g_source_destroy (*slot);
  g_clear_pointer (slot, g_source_unref);
}

/* (Re)starts the timer in *slot on the client's context; func gets the
 * client and must clear *slot (g_source_unref) when it returns REMOVE. */
static inline void
legba_signal_timer_start (LegbaSignalClient * self, GSource ** slot,
    guint ms, GSourceFunc func)
{
  legba_signal_timer_clear (slot);
  *slot = g_timeout_source_new (ms);
  g_source_set_callback (*slot, func, self, NULL);
  g_source_attach (*slot, self->context);
}

/* legba-signal-client.c */
void legba_signal_client_set_state (LegbaSignalClient * self,
    LegbaSignallerState state);
void legba_signal_client_emit_error (LegbaSignalClient * self, int code,
    const char *format, ...) G_GNUC_PRINTF (3, 4);
void legba_signal_client_fail (LegbaSignalClient * self, int code,
    const char *message);
void legba_signal_client_pump (LegbaSignalClient * self);

/* legba-signal-connection.c */
char *legba_signal_client_websocket_url (LegbaSignalClient * self);

/* Is url's host a loopback address (127.0.0.0/8, ::1 or localhost)? */
gboolean legba_url_is_loopback (const char *url);
void legba_signal_client_start_connection (LegbaSignalClient * self);
void legba_signal_client_drop_connection (LegbaSignalClient * self,
    gushort code);
void legba_signal_client_send_text (LegbaSignalClient * self,
    const char *text);
void legba_signal_client_send_event (LegbaSignalClient * self,
    const char *event, JsonObject * data);

G_END_DECLS
