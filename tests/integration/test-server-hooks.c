/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaServer's hooks for an application embedding it (client-event,
 * subscribed, unsubscribed, connection-closed), in-process on 127.0.0.1
 * port 0, with libsoup's WebSocket client speaking Pusher protocol 7. The
 * server and the clients share this thread's main context, so every wait
 * runs it until a condition holds, with a timeout and a reason.
 */
#include <legba/server/server.h>

#include <legba/common/legba-auth.h>
#include <legba/server/legba-server-private.h>
#include "legba-test.h"

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <string.h>

#define APP_ID "1"
#define APP_KEY "app-key"
#define APP_SECRET "app-secret"
#define WS_PATH "/app/" APP_KEY "?protocol=7"
#define WAIT_S 10

#define WAIT_UNTIL LEGBA_TEST_WAIT_UNTIL

/* ---- The server ---- */

static LegbaServer *
server_new (void)
{
  g_autoptr (GError) error = NULL;
  LegbaServer *server = legba_server_new ();

  g_assert_true (legba_server_add_app (server, APP_ID, APP_KEY, APP_SECRET,
          &error));
  g_assert_true (legba_server_listen (server, "127.0.0.1", 0, &error));
  g_assert_no_error (error);
  return server;
}

static void
server_free (LegbaServer * server)
{
  legba_server_shutdown (server);
  WAIT_UNTIL (legba_server_get_connection_count (server) == 0, WAIT_S,
      "every socket to close on shutdown");
  g_object_unref (server);
  while (g_main_context_iteration (NULL, FALSE));
}

/* An event published to channel, as the HTTP API does: what a subscriber
 * got before it was sent to it before this. */
static void
server_publish (LegbaServer * server, const char *channel, const char *event)
{
  LegbaHub *hub = legba_server_get_hub (server);
  const char *channels[] = { channel, NULL };
  g_autoptr (GError) error = NULL;

  g_assert_true (legba_hub_publish (hub, legba_hub_find_app_by_id (hub,
              APP_ID), channels, event, "{}", NULL, &error));
  g_assert_no_error (error);
}

/* ---- Frames ---- */

static JsonObject *
parse_object (const char *text, gssize len)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonNode *root;

  if (!json_parser_load_from_data (parser, text, len, NULL))
    return NULL;
  root = json_parser_get_root (parser);
  if (!JSON_NODE_HOLDS_OBJECT (root))
    return NULL;
  return json_object_ref (json_node_get_object (root));
}

static const char *
frame_event (JsonObject * frame)
{
  return json_object_get_string_member_with_default (frame, "event", "");
}

/* ---- libsoup WebSocket clients ---- */

typedef struct
{
  SoupWebsocketConnection *ws;
  GError *error;
  gboolean done;
  GPtrArray *frames;            /* JsonObject, in arrival order */
  guint next;                   /* first frame not yet taken */
  gboolean closed;
  char *socket_id;
} WsClient;

static void
ws_on_message (SoupWebsocketConnection * ws, gint type, GBytes * message,
    gpointer user_data)
{
  WsClient *client = user_data;
  gsize len;
  const char *text = g_bytes_get_data (message, &len);
  JsonObject *frame = parse_object (text, len);

  g_assert_nonnull (frame);
  g_ptr_array_add (client->frames, frame);
}

static void
ws_on_closed (SoupWebsocketConnection * ws, gpointer user_data)
{
  ((WsClient *) user_data)->closed = TRUE;
}

static void
ws_on_connected (GObject * source, GAsyncResult * result, gpointer user_data)
{
  WsClient *client = user_data;

  client->ws = soup_session_websocket_connect_finish (SOUP_SESSION (source),
      result, &client->error);
  client->done = TRUE;
  if (client->ws == NULL)
    return;
  g_signal_connect (client->ws, "message", G_CALLBACK (ws_on_message), client);
  g_signal_connect (client->ws, "closed", G_CALLBACK (ws_on_closed), client);
}

/* Waits for the next frame with this event, skipping others; returns it
 * (owned by the client). */
static JsonObject *
ws_client_next (WsClient * client, const char *event)
{
  for (;;) {
    while (client->next < client->frames->len) {
      JsonObject *frame = client->frames->pdata[client->next++];

      if (g_str_equal (frame_event (frame), event))
        return frame;
    }
    WAIT_UNTIL (client->next < client->frames->len || client->closed, WAIT_S,
        event);
    if (client->next >= client->frames->len)
      g_error ("closed while waiting for %s", event);
  }
}

/* Whether a frame with this event came before the next one named
 * marker, which it waits for. */
static gboolean
ws_client_got_before (WsClient * client, const char *event, const char *marker)
{
  guint from = client->next;
  JsonObject *stop = ws_client_next (client, marker);

  for (guint i = from; client->frames->pdata[i] != stop; i++) {
    if (g_str_equal (frame_event (client->frames->pdata[i]), event))
      return TRUE;
  }
  return FALSE;
}

static WsClient *
ws_client_new (LegbaServer * server)
{
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autofree char *url = g_strdup_printf ("ws://127.0.0.1:%u" WS_PATH,
      legba_server_get_port (server));
  g_autoptr (SoupMessage) msg = soup_message_new ("GET", url);
  WsClient *client = g_new0 (WsClient, 1);
  g_autoptr (JsonObject) data = NULL;
  JsonObject *established;

  client->frames = g_ptr_array_new_with_free_func ((GDestroyNotify)
      json_object_unref);
  soup_session_websocket_connect_async (session, msg, NULL, NULL,
      G_PRIORITY_DEFAULT, NULL, ws_on_connected, client);
  WAIT_UNTIL (client->done, WAIT_S, "the WebSocket handshake");
  g_assert_no_error (client->error);
  established = ws_client_next (client, "pusher:connection_established");
  data = parse_object (json_object_get_string_member (established, "data"), -1);
  client->socket_id = g_strdup (json_object_get_string_member (data,
          "socket_id"));
  return client;
}

static void
ws_client_send (WsClient * client, const char *text)
{
  soup_websocket_connection_send_text (client->ws, text);
}

/* Subscribes to a private channel, or a presence one as user_id. */
static void
ws_client_subscribe (WsClient * client, const char *channel,
    const char *user_id)
{
  g_autofree char *channel_data = user_id ?
      g_strdup_printf ("{\"user_id\":\"%s\"}", user_id) : NULL;
  g_autofree char *auth = legba_auth_channel_sign (APP_KEY, APP_SECRET,
      client->socket_id, channel, channel_data);
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *frame = NULL;
  JsonObject *ok;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "event");
  json_builder_add_string_value (b, "pusher:subscribe");
  json_builder_set_member_name (b, "data");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "channel");
  json_builder_add_string_value (b, channel);
  json_builder_set_member_name (b, "auth");
  json_builder_add_string_value (b, auth);
  if (channel_data != NULL) {
    json_builder_set_member_name (b, "channel_data");
    json_builder_add_string_value (b, channel_data);
  }
  json_builder_end_object (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  frame = json_to_string (root, FALSE);
  ws_client_send (client, frame);
  ok = ws_client_next (client, "pusher_internal:subscription_succeeded");
  g_assert_cmpstr (json_object_get_string_member (ok, "channel"), ==, channel);
}

/* pusher:signin as user_id. */
static void
ws_client_signin (WsClient * client, const char *user_id)
{
  g_autofree char *user_data = g_strdup_printf ("{\"id\":\"%s\"}", user_id);
  g_autofree char *auth = legba_auth_user_sign (APP_KEY, APP_SECRET,
      client->socket_id, user_data);
  g_autofree char *escaped = g_strescape (user_data, NULL);
  g_autofree char *frame = g_strdup_printf ("{\"event\":\"pusher:signin\","
      "\"data\":{\"auth\":\"%s\",\"user_data\":\"%s\"}}", auth, escaped);

  ws_client_send (client, frame);
  ws_client_next (client, "pusher:signin_success");
}

static void
ws_client_free (WsClient * client)
{
  if (client->ws != NULL) {
    if (soup_websocket_connection_get_state (client->ws) ==
        SOUP_WEBSOCKET_STATE_OPEN)
      soup_websocket_connection_close (client->ws, SOUP_WEBSOCKET_CLOSE_NORMAL,
          NULL);
    WAIT_UNTIL (client->closed, WAIT_S, "the client socket to close");
    g_signal_handlers_disconnect_by_data (client->ws, client);
    g_object_unref (client->ws);
  }
  g_clear_error (&client->error);
  g_ptr_array_unref (client->frames);
  g_free (client->socket_id);
  g_free (client);
}

#define CHANNEL "private-hooks"
#define PRESENCE "presence-hooks"
#define ASK "{\"event\":\"client-ask\",\"channel\":\"%s\",\"data\":%s}"

/* Two sockets on channel: a sends, b listens. */
typedef struct
{
  LegbaServer *server;
  WsClient *a;
  WsClient *b;
  /* What the handlers saw */
  GPtrArray *seen;              /* LegbaClientEvent, owned */
  guint calls;
} Fixture;

static void
fixture_init (Fixture * f, const char *channel)
{
  gboolean presence = g_str_has_prefix (channel, "presence-");

  f->server = server_new ();
  f->a = ws_client_new (f->server);
  f->b = ws_client_new (f->server);
  ws_client_subscribe (f->a, channel, presence ? "alice" : NULL);
  ws_client_subscribe (f->b, channel, presence ? "bob" : NULL);
  f->seen = g_ptr_array_new_with_free_func (g_object_unref);
}

static void
fixture_clear (Fixture * f)
{
  ws_client_free (f->a);
  ws_client_free (f->b);
  server_free (f->server);
  g_ptr_array_unref (f->seen);
}

static void
fixture_ask (Fixture * f, const char *channel, const char *data)
{
  g_autofree char *frame = g_strdup_printf (ASK, channel, data);

  ws_client_send (f->a, frame);
}

/* ---- client-event ---- */

/* No handler: the event is relayed, and no LegbaClientEvent is made (its
 * class is never even initialized; this test runs first). */
static void
test_client_event_none (void)
{
  Fixture f = { 0, };

  fixture_init (&f, CHANNEL);
  fixture_ask (&f, CHANNEL, "{\"n\":1}");
  ws_client_next (f.b, "client-ask");
  g_assert_null (g_type_class_peek (LEGBA_TYPE_CLIENT_EVENT));
  fixture_clear (&f);
}

static gboolean
on_event_reply (LegbaServer * server, LegbaClientEvent * event,
    gpointer user_data)
{
  Fixture *f = user_data;

  f->calls++;
  g_ptr_array_add (f->seen, g_object_ref (event));
  g_assert_true (legba_client_event_reply (event, "answer", "{\"ok\":true}"));
  return TRUE;
}

/* A handler answers the sender alone; the event goes no further. */
static void
test_client_event_reply (void)
{
  Fixture f = { 0, };
  LegbaClientEvent *event;
  JsonObject *answer;
  g_autoptr (JsonObject) data = NULL;

  fixture_init (&f, CHANNEL);
  g_signal_connect (f.server, "client-event", G_CALLBACK (on_event_reply), &f);
  fixture_ask (&f, CHANNEL, "\"{\\\"q\\\":42}\"");

  answer = ws_client_next (f.a, "answer");
  g_assert_cmpstr (json_object_get_string_member (answer, "channel"), ==,
      CHANNEL);
  data = parse_object (json_object_get_string_member (answer, "data"), -1);
  g_assert_true (json_object_get_boolean_member (data, "ok"));

  g_assert_cmpuint (f.calls, ==, 1);
  event = f.seen->pdata[0];
  g_assert_cmpstr (legba_client_event_get_app_id (event), ==, APP_ID);
  g_assert_cmpstr (legba_client_event_get_socket_id (event), ==,
      f.a->socket_id);
  g_assert_cmpstr (legba_client_event_get_channel (event), ==, CHANNEL);
  g_assert_cmpstr (legba_client_event_get_name (event), ==, "client-ask");
  g_assert_cmpstr (legba_client_event_get_data (event), ==,
      "\"{\\\"q\\\":42}\"");
  g_assert_null (legba_client_event_get_user_id (event));

  /* Handled: b never got it, the marker published after it proves. */
  server_publish (f.server, CHANNEL, "marker");
  g_assert_false (ws_client_got_before (f.b, "client-ask", "marker"));

  /* A reply later, on the reference kept; none once the socket is gone. */
  g_assert_true (legba_client_event_reply (event, "later", NULL));
  ws_client_next (f.a, "later");
  ws_client_free (f.a);
  f.a = ws_client_new (f.server);
  WAIT_UNTIL (legba_server_get_connection_count (f.server) == 2, WAIT_S,
      "the first socket to be gone");
  g_assert_false (legba_client_event_reply (event, "too-late", NULL));
  fixture_clear (&f);
}

static gboolean
on_event_observe (LegbaServer * server, LegbaClientEvent * event,
    gpointer user_data)
{
  Fixture *f = user_data;

  f->calls++;
  g_ptr_array_add (f->seen, g_object_ref (event));
  return FALSE;
}

/* A handler that returns FALSE lets the event be relayed as usual, the
 * sender's user_id with it on a presence channel. */
static void
test_client_event_relay (void)
{
  Fixture f = { 0, };
  JsonObject *relayed;

  fixture_init (&f, PRESENCE);
  g_signal_connect (f.server, "client-event", G_CALLBACK (on_event_observe),
      &f);
  g_signal_connect (f.server, "client-event", G_CALLBACK (on_event_observe),
      &f);
  fixture_ask (&f, PRESENCE, "{\"n\":1}");

  relayed = ws_client_next (f.b, "client-ask");
  g_assert_cmpstr (json_object_get_string_member (relayed, "user_id"), ==,
      "alice");
  g_assert_cmpuint (f.calls, ==, 2);
  g_assert_cmpstr (legba_client_event_get_user_id (f.seen->pdata[0]), ==,
      "alice");
  g_assert_cmpstr (legba_client_event_get_data (f.seen->pdata[0]), ==,
      "{\"n\":1}");
  fixture_clear (&f);
}

static gboolean
on_event_refuse (LegbaServer * server, LegbaClientEvent * event,
    gpointer user_data)
{
  Fixture *f = user_data;

  f->calls++;
  legba_client_event_refuse (event, "not now");
  return FALSE;
}

/* A refusal: pusher:error 4303 with the handler's message to the sender,
 * the event to nobody, no later handler, the socket kept. */
static void
test_client_event_refuse (void)
{
  Fixture f = { 0, };
  g_autoptr (JsonObject) data = NULL;
  JsonObject *error;

  fixture_init (&f, CHANNEL);
  g_signal_connect (f.server, "client-event", G_CALLBACK (on_event_refuse), &f);
  g_signal_connect (f.server, "client-event", G_CALLBACK (on_event_refuse), &f);
  fixture_ask (&f, CHANNEL, "{}");

  error = ws_client_next (f.a, "pusher:error");
  data = json_object_ref (json_object_get_object_member (error, "data"));
  g_assert_cmpint (json_object_get_int_member (data, "code"), ==, 4303);
  g_assert_cmpstr (json_object_get_string_member (data, "message"), ==,
      "not now");
  g_assert_cmpuint (f.calls, ==, 1);
  server_publish (f.server, CHANNEL, "marker");
  g_assert_false (ws_client_got_before (f.b, "client-ask", "marker"));
  ws_client_next (f.a, "marker");
  g_assert_false (f.a->closed);
  fixture_clear (&f);
}

static gboolean
on_event_garbage (LegbaServer * server, LegbaClientEvent * event,
    gpointer user_data)
{
  g_autoptr (GString) message = g_string_new (NULL);

  /* What a careless application hands over: bytes that are not UTF-8,
   * and far too many of them */
  g_assert_true (legba_client_event_reply (event, "answer\xff",
          "\"quoted\" \xc3 \\ data"));
  for (guint i = 0; i < 100; i++)
    g_string_append (message, "no\xff\"");
  legba_client_event_refuse (event, message->str);
  return TRUE;
}

/* What a handler gives reaches the client as valid JSON, its refusal
 * bounded. */
static void
test_client_event_garbage (void)
{
  Fixture f = { 0, };
  g_autoptr (JsonObject) data = NULL;
  JsonObject *error;
  const char *message;

  fixture_init (&f, CHANNEL);
  g_signal_connect (f.server, "client-event", G_CALLBACK (on_event_garbage),
      &f);
  fixture_ask (&f, CHANNEL, "{}");
  /* every frame parsed as JSON on arrival (ws_on_message) */
  ws_client_next (f.a, "answer\xef\xbf\xbd");
  error = ws_client_next (f.a, "pusher:error");
  data = json_object_ref (json_object_get_object_member (error, "data"));
  g_assert_cmpint (json_object_get_int_member (data, "code"), ==, 4303);
  message = json_object_get_string_member (data, "message");
  g_assert_true (g_str_has_prefix (message, "no\xef\xbf\xbd\"no"));
  g_assert_cmpuint (strlen (message), <=, 256 + 3 * 64);
  g_assert_false (f.a->closed);
  fixture_clear (&f);
}

/* ---- subscribed, unsubscribed, connection-closed ---- */

typedef struct
{
  GPtrArray *log;               /* "signal app socket channel user" lines */
} Recorder;

static void
record (Recorder * r, const char *what, const char *app_id,
    const char *socket_id, const char *channel, const char *user_id)
{
  g_ptr_array_add (r->log, g_strdup_printf ("%s %s %s %s %s", what, app_id,
          socket_id, channel, user_id ? user_id : "-"));
}

static void
on_subscribed (LegbaServer * server, const char *app_id,
    const char *socket_id, const char *channel, const char *user_id,
    Recorder * r)
{
  record (r, "subscribed", app_id, socket_id, channel, user_id);
}

static void
on_unsubscribed (LegbaServer * server, const char *app_id,
    const char *socket_id, const char *channel, const char *user_id,
    Recorder * r)
{
  record (r, "unsubscribed", app_id, socket_id, channel, user_id);
}

static void
on_closed (LegbaServer * server, const char *app_id, const char *socket_id,
    const char *user_id, char **channels, Recorder * r)
{
  g_autofree char *joined = g_strjoinv (",", channels);

  record (r, "closed", app_id, socket_id, joined, user_id);
}

static void
assert_logged (Recorder * r, guint index, const char *what,
    const char *socket_id, const char *channel, const char *user_id)
{
  g_autofree char *want = g_strdup_printf ("%s " APP_ID " %s %s %s", what,
      socket_id, channel, user_id);

  g_assert_cmpuint (r->log->len, >, index);
  g_assert_cmpstr (r->log->pdata[index], ==, want);
}

static void
test_subscriptions (void)
{
  LegbaServer *server = server_new ();
  Recorder r = { g_ptr_array_new_with_free_func (g_free) };
  WsClient *c;

  g_signal_connect (server, "subscribed", G_CALLBACK (on_subscribed), &r);
  g_signal_connect (server, "unsubscribed", G_CALLBACK (on_unsubscribed), &r);
  c = ws_client_new (server);
  ws_client_subscribe (c, PRESENCE, "carol");
  ws_client_subscribe (c, CHANNEL, NULL);
  /* Again: already in it, nothing new */
  ws_client_subscribe (c, CHANNEL, NULL);
  ws_client_send (c, "{\"event\":\"pusher:unsubscribe\",\"data\":"
      "{\"channel\":\"" PRESENCE "\"}}");
  WAIT_UNTIL (r.log->len == 3, WAIT_S, "the unsubscription");
  assert_logged (&r, 0, "subscribed", c->socket_id, PRESENCE, "carol");
  assert_logged (&r, 1, "subscribed", c->socket_id, CHANNEL, "-");
  assert_logged (&r, 2, "unsubscribed", c->socket_id, PRESENCE, "carol");

  /* Signed in: its user on channels other than presence ones. */
  ws_client_signin (c, "dave");
  ws_client_subscribe (c, "private-other", NULL);
  assert_logged (&r, 3, "subscribed", c->socket_id, "private-other", "dave");

  /* Closing leaves its channels without unsubscribed. */
  ws_client_free (c);
  WAIT_UNTIL (legba_server_get_connection_count (server) == 0, WAIT_S,
      "the socket to close");
  g_assert_cmpuint (r.log->len, ==, 4);
  server_free (server);
  g_ptr_array_unref (r.log);
}

static void
test_connection_closed (void)
{
  LegbaServer *server = server_new ();
  Recorder r = { g_ptr_array_new_with_free_func (g_free) };
  WsClient *c = ws_client_new (server);
  WsClient *d = ws_client_new (server);
  g_autofree char *c_id = g_strdup (c->socket_id);
  g_autofree char *d_id = g_strdup (d->socket_id);

  g_signal_connect (server, "connection-closed", G_CALLBACK (on_closed), &r);
  ws_client_signin (c, "erin");
  ws_client_subscribe (c, "private-b", NULL);
  ws_client_subscribe (c, PRESENCE, "erin");
  ws_client_subscribe (c, "private-a", NULL);

  /* The client closes */
  ws_client_free (c);
  WAIT_UNTIL (r.log->len == 1, WAIT_S, "connection-closed");
  assert_logged (&r, 0, "closed", c_id,
      "presence-hooks,private-a,private-b", "erin");

  /* The server closes it, on shutdown */
  legba_server_shutdown (server);
  WAIT_UNTIL (r.log->len == 2, WAIT_S, "connection-closed on shutdown");
  assert_logged (&r, 1, "closed", d_id, "", "-");
  ws_client_free (d);
  server_free (server);
  g_ptr_array_unref (r.log);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  /* First: it checks that no client event was ever made in the process */
  g_test_add_func ("/server/hooks/no-handler", test_client_event_none);

  g_test_add_func ("/server/hooks/client-event/reply", test_client_event_reply);
  g_test_add_func ("/server/hooks/client-event/relay", test_client_event_relay);
  g_test_add_func ("/server/hooks/client-event/refuse",
      test_client_event_refuse);
  g_test_add_func ("/server/hooks/client-event/garbage",
      test_client_event_garbage);
  g_test_add_func ("/server/hooks/subscriptions", test_subscriptions);
  g_test_add_func ("/server/hooks/connection-closed", test_connection_closed);
  return g_test_run ();
}
