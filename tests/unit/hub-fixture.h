/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The LegbaHub unit tests' fixture: a hub with one app, a fake transport
 * recording every frame and close per connection (checking that each frame
 * is strict JSON of the protocol's shape), a fake clock, and clients that
 * speak Pusher protocol 7 through it.
 */
#pragma once

#include <legba/common/legba-auth.h>
#include <legba/server/legba-hub.h>
#include <legba/common/legba-json.h>

#include <string.h>

G_BEGIN_DECLS

#define APP_ID "1"
#define KEY "app-key"
#define SECRET "app-secret"

typedef struct _Fixture Fixture;

typedef struct
{
  Fixture *f;
  LegbaHubConn *conn;           /* NULL once reported closed */
  char *socket_id;
  GQueue frames;                /* JsonNode * received, oldest first */
  GPtrArray *bytes;             /* GBytes * received, as handed over */
  gboolean close_requested;
  guint16 close_code;
  char *close_reason;
  gboolean close_on_send;       /* report closed from inside send */
} Client;

struct _Fixture
{
  LegbaHub *hub;
  LegbaHubApp *app;
  gint64 now;
  GPtrArray *clients;
  gboolean close_now;           /* report closes from inside close */
};

/* Sends to and closes Client handles; user_data is the Fixture. */
extern const LegbaHubTransport fake_transport;

/* ---- The hub ---- */

/* A hub with app APP_ID/KEY/SECRET under limits (NULL: the defaults). */
Fixture *fixture_new (const LegbaLimits * limits);
/* Reports every connection closed, as a transport does on shutdown, then
 * frees the hub. */
void fixture_free (Fixture * f);
LegbaLimits default_limits (void);

/* ---- Clients: opening, sending, closing ---- */

/* Opens a WebSocket at /app/key?protocol=protocol; c->conn is NULL when
 * refused. */
Client *client_open_full (Fixture * f, const char *key,
    const char *protocol);
/* Opens on the app with protocol 7 and reads connection_established. */
Client *client_open (Fixture * f);
/* The transport reports c closed. */
void client_report_closed (Client * c);
/* Frees what the fixture recorded for c (fixture_free() does it). */
void client_free (Client * c);
void client_send (Client * c, const char *text);

/* {"event": event, "data": {key: value, ...}} with string values,
 * arguments in pairs ending with NULL. */
char *build_frame (const char *event, const char *first_key, ...);
/* The same frame with its data object replaced by a string holding it. */
char *frame_with_string_data (const char *text);

/* ---- Clients: what they received ---- */

/* Pops the next frame, checks its event and (unless NULL) channel. */
JsonNode *client_pop (Client * c, const char *event, const char *channel);
/* Pops the next frame as client_pop() does and returns its data, decoded
 * from the JSON string servers send (or as it is when not a string). */
JsonNode *client_expect (Client * c, const char *event, const char *channel);
/* Pops the next frame as client_pop() does and drops it. */
void client_skip (Client * c, const char *event, const char *channel);
void client_drop_frames (Client * c);
void client_expect_nothing (Client * c);
/* Pusher protocol 7: pusher:error data is an object {code, message}. */
void client_expect_error (Client * c, guint code);
void client_expect_closed (Client * c, guint16 code);
/* The subscription_error, checked; nothing else sent. */
void client_expect_refused (Client * c, const char *channel,
    const char *type, gint status);

/* The object data's member name, as a string or an integer. */
const char *data_string (JsonNode * data, const char *name);
gint64 data_int (JsonNode * data, const char *name);

/* ---- Channels and users ---- */

void client_send_subscribe (Client * c, const char *channel);
/* Subscribes and checks subscription_succeeded. */
void client_subscribe (Client * c, const char *channel);
void client_subscribe_private (Client * c, const char *channel);
/* Sends a correctly signed presence subscription with this channel_data. */
void client_send_presence (Client * c, const char *channel,
    const char *channel_data);
/* Joins a presence channel as user_id with user_info {"name": user_id};
 * returns the presence object of subscription_succeeded. */
JsonNode *client_join_presence (Client * c, const char *channel,
    const char *user_id);
/* The same, checking subscription_succeeded only. */
void client_join (Client * c, const char *channel, const char *user_id);
/* Signs in as user_id and checks signin_success. */
void client_signin (Client * c, const char *user_id);

/* The ids array of a presence object, joined with ",". */
char *presence_ids (JsonNode * presence);
/* legba_hub_get_users() joined with ",", or NULL. */
char *users_joined (Fixture * f, const char *channel);
/* legba_hub_publish() to one channel. */
gboolean publish (Fixture * f, const char *channel, const char *event,
    const char *data, const char *except, GError ** error);

/* Registers func once per element of a table, as PREFIX/INDEX. */
void add_table_tests (const char *prefix, gconstpointer table, gsize size,
    guint n, GTestDataFunc func);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Fixture, fixture_free);

#define ADD_TABLE(prefix, table, func) \
  add_table_tests (prefix, table, sizeof (table[0]), G_N_ELEMENTS (table), \
      func)

G_END_DECLS
