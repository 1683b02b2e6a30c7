/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What the LegbaSignalClient tests share (signal-test.c).
 */
#pragma once

#include <legba/legba.h>
#include <legba/server/server.h>

#include <libsoup/soup.h>

#define APP_ID "1"
#define APP_KEY "test-key"
#define APP_SECRET "test-secret"
#define ROOM "test-room"
#define CHANNEL "presence-legba." ROOM
/* generous: the suite also runs under AddressSanitizer on a busy machine */
#define WAIT_MS 20000
/* reconnection backoff of the clients under test, in milliseconds */
#define BACKOFF_MIN 20
#define BACKOFF_MAX 100

/* ---- Waiting: every wait has a deadline and a reason ---- */

GSource *deadline_new (guint ms, gboolean * expired);
void deadline_free (GSource * source);

#define WAIT_FOR(expr, reason) G_STMT_START { \
    gboolean expired_; \
    GSource *deadline_ = deadline_new (WAIT_MS, &expired_); \
    while (!(expr) && !expired_) \
      g_main_context_iteration (NULL, TRUE); \
    deadline_free (deadline_); \
    if (!(expr)) \
      g_error ("Timed out after %d ms waiting for %s", WAIT_MS, reason); \
  } G_STMT_END

/* Runs the main loop for ms: only to show that something does NOT happen
 * within a bound (ten times the longest backoff step). */
void run_for (guint ms);

/* ---- The server: LegbaServer on 127.0.0.1, an ephemeral port ---- */

typedef struct
{
  LegbaServer *server;
  guint port;
  char *url;
} Fixture;

void start_server (Fixture * f, guint port, guint max_event_bytes);
/* Adds the test app to f->server, made and configured by the caller, and
 * listens on port (0: any). */
void fixture_listen (Fixture * f, guint port);
void stop_server (Fixture * f);
/* data: the server's max-event-bytes, 0 for its default */
void fixture_setup (Fixture * f, gconstpointer data);
void fixture_teardown (Fixture * f, gconstpointer data);

#define ADD(path, func, data) \
  g_test_add ("/signal-client/" path, Fixture, GUINT_TO_POINTER (data), \
      fixture_setup, func, fixture_teardown)

/* ---- Peers: a LegbaSignalClient and what it reported ---- */

typedef struct
{
  char *from;
  JsonObject *signal;
  gint64 time;
} Received;

typedef struct
{
  LegbaSignalClient *client;
  LegbaSignaller *signaller;
  char *identity;
  char *id;
  GHashTable *members;          /* id -> LegbaSignalMember */
  guint joined;
  guint member_joined;
  guint member_left;
  GPtrArray *received;          /* Received */
  GPtrArray *errors;            /* GError */
  GArray *states;               /* LegbaSignallerState, every change */
  GPtrArray *events;            /* "name data" strings */
} Peer;

Peer *peer_new_with_key (Fixture * f, const char *identity,
    const char *app_key);
/* a peer that signs its subscription with the app secret */
Peer *peer_new (Fixture * f, const char *identity);
void peer_free (Peer * p);
void peer_join (Peer * p);
void peer_join_and_wait (Peer * p);
void peer_send (Peer * from, Peer * to, const char *type, const char *pc,
    const char *sdp, gint64 seq);
Received *peer_received (Peer * p, guint i);
gboolean peer_knows (Peer * p, Peer * other);
void assert_no_errors (Peer * p);
void assert_failed (Peer * p, int code);
gboolean only_connect_errors (Peer * p);
gboolean went_through (Peer * p, LegbaSignallerState state);

/* ---- Helpers ---- */

char *json_quote (const char *s);
void fixture_publish_event (Fixture * f, const char *name, const char *data);
/* A SoupServer on 127.0.0.1, an ephemeral port (returned in port). */
SoupServer *test_server_new (guint * port);
void stop_pool_threads (void);
