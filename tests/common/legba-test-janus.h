/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A Janus 1.1 for a test: its own configuration folder in a temporary
 * directory (the VideoRoom plugin and the HTTP and WebSocket transports
 * only, on free loopback ports, an API secret, token authentication and
 * a VideoRoom admin key), and the HTTP API calls a test makes as a
 * coordinator would: creating a VideoRoom, admitting a token, listing a
 * room's participants.
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef struct
{
  GSubprocess *process;
  char *dir;
  guint http_port;
  guint admin_port;
  guint ws_port;
  char *ws_url;                 /* ws://127.0.0.1:PORT/ */
  gboolean open;                /* no API secret, no token authentication */
} LegbaTestJanus;

/* The VideoRoom's admin key, which creating a room takes. */
#define LEGBA_TEST_JANUS_ADMIN_KEY "legba-test-admin-key"

/* FALSE when no janus is installed (the test then skips); fails the test
 * when one is and does not start. */
gboolean legba_test_janus_start (LegbaTestJanus * janus);
/* The same without an API secret or token authentication, as the Janus a
 * legba-server coordinates ([sfu]) runs: clients get in with its rooms'
 * pins and tokens only. */
gboolean legba_test_janus_start_open (LegbaTestJanus * janus);
void legba_test_janus_stop (LegbaTestJanus * janus);
/* Kills it (SIGKILL), keeping its folder; then starts it again on the
 * same folder and ports, without any of its rooms. */
void legba_test_janus_kill (LegbaTestJanus * janus);
void legba_test_janus_restart (LegbaTestJanus * janus);

/* A VideoRoom with pin, every token of tokens admitted (to Janus's API
 * and to the room), Opus, H.264 and VP8, transport-wide congestion
 * control; returns its id. */
guint64 legba_test_janus_create_room (LegbaTestJanus * janus,
    const char *pin, const char *const *tokens);
/* The room's `participants` (transfer full). */
JsonArray *legba_test_janus_participants (LegbaTestJanus * janus,
    guint64 room);
/* Admits token to Janus's API and to room's allowed list, or takes it
 * back from both. */
void legba_test_janus_admit (LegbaTestJanus * janus, guint64 room,
    const char *token);
void legba_test_janus_revoke (LegbaTestJanus * janus, guint64 room,
    const char *token);
/* How many VideoRooms it has, private ones included. */
guint legba_test_janus_count_rooms (LegbaTestJanus * janus);
/* Destroys, through its admin API (destroy_session), the Janus session
 * holding a VideoRoom handle of that display; FALSE when none does. The
 * session's WebSocket stays open. */
gboolean legba_test_janus_destroy_session_of (LegbaTestJanus * janus,
    const char *display);

G_END_DECLS
