/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaSignalClient against an in-process LegbaServer on 127.0.0.1 port 0:
 * membership, signals both ways, spoofed senders, the size and rate rules
 * of docs/room-protocol.md §4, the three ways to authenticate, server events,
 * proxies.
 */
#include "signal-test.h"

#include <legba/common/legba-auth.h>
#include <legba/signal/legba-signal-codec.h>

#include <string.h>

/* ---- A raw Pusher client, to send what a LegbaSignalClient never would */

typedef struct
{
  SoupSession *session;
  SoupWebsocketConnection *ws;
  char *socket_id;
  char *user_id;
  gint64 event_bytes;
  gboolean subscribed;
  GPtrArray *signals;           /* JsonObject: client-legba-signal data */
  GPtrArray *errors;            /* JsonObject: pusher:error data */
} Raw;

static JsonObject *
frame_data_object (JsonObject * frame)
{
  JsonNode *data = json_object_get_member (frame, "data");
  g_autoptr (JsonNode) parsed = NULL;

  if (data == NULL)
    return NULL;
  if (JSON_NODE_HOLDS_VALUE (data))
    data = parsed = json_from_string (json_node_get_string (data), NULL);
  if (data == NULL || !JSON_NODE_HOLDS_OBJECT (data))
    return NULL;
  return json_object_ref (json_node_get_object (data));
}

static void
on_raw_message (SoupWebsocketConnection * ws, int type, GBytes * message,
    Raw * r)
{
  g_autoptr (JsonNode) root = json_from_string (g_bytes_get_data (message,
          NULL), NULL);
  JsonObject *frame;
  const char *event;
  JsonObject *data;

  g_assert_nonnull (root);
  frame = json_node_get_object (root);
  event = json_object_get_string_member (frame, "event");
  data = frame_data_object (frame);
  if (g_str_equal (event, "pusher:connection_established")) {
    JsonObject *limits = json_object_get_object_member (data, "limits");

    r->socket_id = g_strdup (json_object_get_string_member (data, "socket_id"));
    r->event_bytes = limits ? json_object_get_int_member (limits,
        "client_event_bytes") : 10000;
  } else if (g_str_equal (event, "pusher_internal:subscription_succeeded")) {
    r->subscribed = TRUE;
  } else if (g_str_equal (event, "client-legba-signal")) {
    g_ptr_array_add (r->signals, json_object_ref (data));
  } else if (g_str_equal (event, "pusher:error")) {
    g_ptr_array_add (r->errors, json_object_ref (data));
  }
  g_clear_pointer (&data, json_object_unref);
}

static void
on_raw_connected (GObject * source, GAsyncResult * result, gpointer user_data)
{
  Raw *r = user_data;
  g_autoptr (GError) error = NULL;

  r->ws = soup_session_websocket_connect_finish (SOUP_SESSION (source),
      result, &error);
  g_assert_no_error (error);
  g_signal_connect (r->ws, "message", G_CALLBACK (on_raw_message), r);
}

/* Joins the room as user_id, signing with the app secret. */
static Raw *
raw_join (Fixture * f, const char *user_id)
{
  Raw *r = g_new0 (Raw, 1);
  g_autofree char *url = g_strdup_printf ("ws://127.0.0.1:%u/app/" APP_KEY
      "?protocol=7", f->port);
  g_autoptr (SoupMessage) msg = soup_message_new ("GET", url);
  g_autofree char *channel_data = NULL;
  g_autofree char *quoted = NULL;
  g_autofree char *auth = NULL;
  g_autofree char *frame = NULL;

  r->session = soup_session_new ();
  r->user_id = g_strdup (user_id);
  r->signals = g_ptr_array_new_with_free_func ((GDestroyNotify)
      json_object_unref);
  r->errors = g_ptr_array_new_with_free_func ((GDestroyNotify)
      json_object_unref);
  soup_session_websocket_connect_async (r->session, msg, NULL, NULL,
      G_PRIORITY_DEFAULT, NULL, on_raw_connected, r);
  WAIT_FOR (r->socket_id != NULL, "the raw client's connection");

  channel_data = g_strdup_printf ("{\"user_id\":\"%s\",\"user_info\":"
      "{\"identity\":\"raw\",\"name\":\"Raw\",\"protocol\":\"legba-room/1\","
      "\"future\":[1,2]}}", user_id);
  auth = legba_auth_channel_sign (APP_KEY, APP_SECRET, r->socket_id, CHANNEL,
      channel_data);
  quoted = json_quote (channel_data);
  frame = g_strdup_printf ("{\"event\":\"pusher:subscribe\",\"data\":{"
      "\"channel\":\"" CHANNEL "\",\"auth\":\"%s\",\"channel_data\":%s}}",
      auth, quoted);
  soup_websocket_connection_send_text (r->ws, frame);
  WAIT_FOR (r->subscribed, "the raw client's subscription");
  return r;
}

static void
raw_send (Raw * r, const char *data)
{
  g_autofree char *frame = g_strdup_printf ("{\"event\":"
      "\"client-legba-signal\",\"channel\":\"" CHANNEL "\",\"data\":%s}",
      data);

  soup_websocket_connection_send_text (r->ws, frame);
}

static void
raw_free (Raw * r)
{
  g_signal_handlers_disconnect_by_data (r->ws, r);
  g_object_unref (r->ws);
  g_object_unref (r->session);
  g_ptr_array_unref (r->signals);
  g_ptr_array_unref (r->errors);
  g_free (r->socket_id);
  g_free (r->user_id);
  g_free (r);
}

/* ---- Membership and signals ---- */

static void
test_two_peers (Fixture * f, gconstpointer data)
{
  Peer *a = peer_new (f, "alice");
  Peer *b = peer_new (f, "bob");
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) signal = json_object_new ();
  LegbaSignalMember *m;
  Received *r;

  peer_join_and_wait (a);
  g_assert_cmpuint (g_hash_table_size (a->members), ==, 0);
  g_assert_cmpuint (a->states->len, ==, 2);
  g_assert_cmpint (g_array_index (a->states, int, 0), ==,
      LEGBA_SIGNALLER_STATE_CONNECTING);
  g_assert_cmpint (g_array_index (a->states, int, 1), ==,
      LEGBA_SIGNALLER_STATE_CONNECTED);
  g_assert_nonnull (legba_signal_client_get_socket_id (a->client));

  /* joined lists the members already there; member-joined the newcomer */
  peer_join_and_wait (b);
  m = g_hash_table_lookup (b->members, a->id);
  g_assert_nonnull (m);
  g_assert_cmpstr (legba_signal_member_get_identity (m), ==, "alice");
  g_assert_cmpstr (legba_signal_member_get_name (m), ==, "alice Ünal");
  g_assert_cmpstr (json_object_get_string_member
      (legba_signal_member_get_user_info (m), "protocol"), ==,
      LEGBA_ROOM_PROTOCOL);
  WAIT_FOR (peer_knows (a, b), "alice to see bob join");
  g_assert_cmpuint (a->member_joined, ==, 1);
  m = g_hash_table_lookup (a->members, b->id);
  g_assert_cmpstr (legba_signal_member_get_identity (m), ==, "bob");

  /* signals both ways */
  peer_send (a, b, "offer", "pc-1", "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\n", 0);
  WAIT_FOR (b->received->len == 1, "bob to receive the offer");
  r = peer_received (b, 0);
  g_assert_cmpstr (r->from, ==, a->id);
  g_assert_cmpstr (json_object_get_string_member (r->signal, "type"), ==,
      "offer");
  g_assert_cmpstr (json_object_get_string_member (r->signal, "pc"), ==, "pc-1");
  g_assert_cmpstr (json_object_get_string_member (r->signal, "sdp"), ==,
      "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\n");
  peer_send (b, a, "answer", "pc-1", "v=0\r\n", 0);
  WAIT_FOR (a->received->len == 1, "alice to receive the answer");
  g_assert_cmpstr (peer_received (a, 0)->from, ==, b->id);

  /* a signal that is not §4 is refused at send time */
  json_object_set_string_member (signal, "type", "offer");
  g_assert_false (legba_signaller_send (a->signaller, b->id, signal, &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID);
  g_clear_error (&error);

  /* leaving */
  legba_signaller_leave (b->signaller);
  g_assert_cmpint (legba_signaller_get_state (b->signaller), ==,
      LEGBA_SIGNALLER_STATE_DISCONNECTED);
  WAIT_FOR (!peer_knows (a, b), "alice to see bob leave");
  g_assert_cmpuint (a->member_left, ==, 1);
  json_object_set_string_member (signal, "pc", "pc-2");
  json_object_set_string_member (signal, "sdp", "v=0\r\n");
  g_assert_false (legba_signaller_send (b->signaller, a->id, signal, &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_NOT_JOINED);

  assert_no_errors (a);
  assert_no_errors (b);
  peer_free (a);
  peer_free (b);
}

static void
test_three_peers (Fixture * f, gconstpointer data)
{
  Peer *p[3] = { peer_new (f, "alice"), peer_new (f, "bob"),
    peer_new (f, "carol")
  };
  int i, j;

  for (i = 0; i < 3; i++)
    peer_join_and_wait (p[i]);
  for (i = 0; i < 3; i++)
    for (j = 0; j < 3; j++)
      if (i != j)
        WAIT_FOR (peer_knows (p[i], p[j]), "every peer to know the others");
  g_assert_cmpuint (g_hash_table_size (p[2]->members), ==, 2);
  g_assert_cmpuint (p[2]->joined, ==, 1);
  g_assert_cmpuint (p[0]->member_joined, ==, 2);

  /* Each signal reaches its addressee only: the others see the client
   * event (Pusher relays it to all) and ignore it. Per sender the order
   * holds, so once carol has alice's second signal, the first (to bob)
   * has passed her by. */
  peer_send (p[0], p[1], "offer", "a-b", "sdp a-b", 0);
  peer_send (p[0], p[2], "offer", "a-c", "sdp a-c", 0);
  peer_send (p[1], p[2], "offer", "b-c", "sdp b-c", 0);
  WAIT_FOR (p[1]->received->len == 1 && p[2]->received->len == 2,
      "bob's and carol's offers");
  g_assert_cmpstr (json_object_get_string_member (peer_received (p[1],
              0)->signal, "pc"), ==, "a-b");
  peer_send (p[2], p[0], "answer", "a-c", "answer a-c", 0);
  WAIT_FOR (p[0]->received->len == 1, "alice's answer");
  g_assert_cmpuint (p[1]->received->len, ==, 1);

  legba_signaller_leave (p[2]->signaller);
  WAIT_FOR (!peer_knows (p[0], p[2]) && !peer_knows (p[1], p[2]),
      "alice and bob to see carol leave");
  g_assert_true (peer_knows (p[0], p[1]));

  for (i = 0; i < 3; i++) {
    assert_no_errors (p[i]);
    peer_free (p[i]);
  }
}

/* docs/room-protocol.md §4: `from` must equal the server-added user_id;
 * malformed signals are dropped; neither disturbs the room. */
static void
test_spoofed_from (Fixture * f, gconstpointer data)
{
  Peer *a = peer_new (f, "alice");
  Peer *b = peer_new (f, "bob");
  Raw *m;
  g_autofree char *spoofed = NULL;
  g_autofree char *no_sdp = NULL;
  g_autofree char *valid = NULL;
  LegbaSignalMember *member;

  peer_join_and_wait (a);
  peer_join_and_wait (b);
  m = raw_join (f, "mallory-abcdef");
  WAIT_FOR (g_hash_table_contains (b->members, "mallory-abcdef"),
      "bob to see mallory");
  /* unknown user_info fields are kept, never an error */
  member = g_hash_table_lookup (b->members, "mallory-abcdef");
  g_assert_true (json_object_has_member (legba_signal_member_get_user_info
          (member), "future"));

  spoofed = g_strdup_printf ("{\"to\":\"%s\",\"from\":\"%s\",\"pc\":\"x\","
      "\"type\":\"bye\"}", b->id, a->id);
  no_sdp = g_strdup_printf ("{\"to\":\"%s\",\"from\":\"mallory-abcdef\","
      "\"pc\":\"x\",\"type\":\"offer\"}", b->id);
  valid = g_strdup_printf ("{\"to\":\"%s\",\"from\":\"mallory-abcdef\","
      "\"pc\":\"y\",\"type\":\"bye\"}", b->id);
  raw_send (m, spoofed);
  raw_send (m, "\"not a signal\"");
  raw_send (m, "[1,2,3]");
  raw_send (m, no_sdp);
  raw_send (m, valid);
  WAIT_FOR (b->received->len >= 1, "bob to receive mallory's valid bye");
  g_assert_cmpuint (b->received->len, ==, 1);
  g_assert_cmpstr (peer_received (b, 0)->from, ==, "mallory-abcdef");
  g_assert_cmpstr (json_object_get_string_member (peer_received (b,
              0)->signal, "pc"), ==, "y");

  /* the room is undisturbed */
  peer_send (a, b, "bye", "z", NULL, 0);
  WAIT_FOR (b->received->len == 2, "bob to receive alice's bye");
  g_assert_cmpstr (peer_received (b, 1)->from, ==, a->id);
  g_assert_cmpuint (a->received->len, ==, 0);
  g_assert_cmpint (legba_signaller_get_state (b->signaller), ==,
      LEGBA_SIGNALLER_STATE_CONNECTED);

  assert_no_errors (a);
  assert_no_errors (b);
  raw_free (m);
  peer_free (a);
  peer_free (b);
}

/* An SDP-like text of len bytes with what escaping makes interesting:
 * quotes, backslashes, CRLF, and 2- and 4-byte UTF-8 characters. */
static char *
make_big_sdp (gsize len)
{
  static const char *pieces[] = { "a=candidate:1 1 udp 2122260223 ",
    "\"q\"", "\\", "\r\n", "é", "😀", "/", "x"
  };
  GString *s = g_string_new (NULL);
  guint i = 0;

  while (s->len < len)
    g_string_append (s, pieces[i++ % G_N_ELEMENTS (pieces)]);
  return g_string_free (s, FALSE);
}

static gsize
data_size (JsonObject * data)
{
  g_autoptr (GString) text = g_string_new (NULL);
  g_autoptr (JsonNode) node = json_node_init_object (json_node_alloc (), data);

  legba_json_write (text, node);
  return text->len;
}

static void
test_chunked (Fixture * f, gconstpointer data)
{
  Peer *a = peer_new (f, "alice");
  Peer *b = peer_new (f, "bob");
  Raw *observer;
  g_autofree char *sdp = make_big_sdp (30000);
  Received *r;
  guint i, parts;

  peer_join_and_wait (a);
  peer_join_and_wait (b);
  observer = raw_join (f, "olga-abcdef");
  g_assert_cmpint (observer->event_bytes, ==, 10000);

  peer_send (a, b, "offer", "pc-big", sdp, 0);
  WAIT_FOR (b->received->len == 1, "bob to receive the large offer");
  r = peer_received (b, 0);
  g_assert_cmpstr (json_object_get_string_member (r->signal, "sdp"), ==, sdp);
  g_assert_cmpstr (json_object_get_string_member (r->signal, "pc"), ==,
      "pc-big");
  g_assert_cmpstr (json_object_get_string_member (r->signal, "type"), ==,
      "offer");

  /* what travelled: part messages, each within the limit */
  WAIT_FOR (observer->signals->len > 0 &&
      json_object_get_int_member (observer->signals->pdata[0], "parts") ==
      observer->signals->len, "the observer to see every part");
  parts = observer->signals->len;
  g_assert_cmpuint (parts, >=, 4);
  for (i = 0; i < parts; i++) {
    JsonObject *part = observer->signals->pdata[i];

    g_assert_cmpuint (data_size (part), <=, 10000);
    g_assert_cmpstr (json_object_get_string_member (part, "type"), ==, "part");
    g_assert_cmpint (json_object_get_int_member (part, "part"), ==, i);
    g_assert_cmpstr (json_object_get_string_member (part, "to"), ==, b->id);
    g_assert_cmpstr (json_object_get_string_member (part, "pc"), ==, "pc-big");
  }
  /* all but the last filled close to the limit */
  g_assert_cmpuint (data_size (observer->signals->pdata[0]), >, 9900);

  assert_no_errors (a);
  assert_no_errors (b);
  g_assert_cmpuint (observer->errors->len, ==, 0);
  raw_free (observer);
  peer_free (a);
  peer_free (b);
}

/* docs/room-protocol.md §4: a server's advertised limits replace the assumed
 * ones, lower (this server takes 3,000 bytes) or higher. */
static void
test_advertised_limits (Fixture * f, gconstpointer data)
{
  Peer *a = peer_new (f, "alice");
  Peer *b = peer_new (f, "bob");
  Raw *observer;
  g_autofree char *sdp = make_big_sdp (5000);
  guint i;

  /* alice assumes less than the server allows, bob more */
  g_object_set (a->client, "client-event-bytes", 1000, NULL);
  g_object_set (b->client, "client-event-bytes", 100000, NULL);
  peer_join_and_wait (a);
  peer_join_and_wait (b);
  observer = raw_join (f, "olga-abcdef");
  g_assert_cmpint (observer->event_bytes, ==, 3000);

  peer_send (a, b, "offer", "pc-a", sdp, 0);
  peer_send (b, a, "offer", "pc-b", sdp, 0);
  WAIT_FOR (a->received->len == 1 && b->received->len == 1,
      "both offers to arrive");
  WAIT_FOR (observer->signals->len >= 6, "the observer to see both sets");
  for (i = 0; i < observer->signals->len; i++) {
    JsonObject *part = observer->signals->pdata[i];

    g_assert_cmpuint (data_size (part), <=, 3000);
    if (json_object_get_int_member (part, "part") + 1 <
        json_object_get_int_member (part, "parts"))
      g_assert_cmpuint (data_size (part), >, 2500);
  }
  g_assert_cmpstr (json_object_get_string_member (peer_received (a,
              0)->signal, "sdp"), ==, sdp);
  g_assert_cmpstr (json_object_get_string_member (peer_received (b,
              0)->signal, "sdp"), ==, sdp);

  assert_no_errors (a);
  assert_no_errors (b);
  raw_free (observer);
  peer_free (a);
  peer_free (b);
}

/* docs/room-protocol.md §4: at most 10 client events in any 1.1 s, a queue and
 * never a drop. Signal i cannot leave before start + (i / 10) windows, and
 * it cannot arrive before it leaves: a lower bound on each arrival that
 * no delay on a loaded machine can break, and that a client sending
 * without pacing fails by whole windows. */
#define PACING_COUNT 30
#define PACING_PER_WINDOW 10

static void
test_pacing (Fixture * f, gconstpointer data)
{
  Peer *a = peer_new (f, "alice");
  Peer *b = peer_new (f, "bob");
  gint64 start;
  guint i;

  peer_join_and_wait (a);
  peer_join_and_wait (b);
  start = g_get_monotonic_time ();
  for (i = 0; i < PACING_COUNT; i++)
    peer_send (a, b, "candidates", "pc-1", NULL, i);
  /* a refusal (4301) is reported to alice, and says why */
  WAIT_FOR (b->received->len == PACING_COUNT || a->errors->len > 0,
      "all 30 signals");
  assert_no_errors (a);

  for (i = 0; i < PACING_COUNT; i++) {
    g_assert_cmpint (json_object_get_int_member (peer_received (b,
                i)->signal, "seq"), ==, i);
    g_assert_cmpint (peer_received (b, i)->time - start, >=,
        (gint64) (i / PACING_PER_WINDOW) * LEGBA_SIGNAL_RATE_WINDOW_US);
  }
  /* the server never refused one (4301 would be reported as an error) */
  assert_no_errors (a);
  assert_no_errors (b);
  peer_free (a);
  peer_free (b);
}

/* ---- Authentication ---- */

/* An application backend's channel authorization endpoint, answering as
 * a Laravel backend would (it knows the user as "carol"). */
typedef struct
{
  SoupServer *server;
  char *url;
  gboolean refuse;
  guint requests;
  char *suffix;
  char *extra_param;
  char *extra_header;
} AuthEndpoint;

static void
on_auth_request (SoupServer * server, SoupServerMessage * msg,
    const char *path, GHashTable * query, gpointer user_data)
{
  AuthEndpoint *ep = user_data;
  g_autoptr (GBytes) body = soup_message_body_flatten
      (soup_server_message_get_request_body (msg));
  g_autoptr (GHashTable) form = NULL;
  g_autofree char *text = g_strndup (g_bytes_get_data (body, NULL),
      g_bytes_get_size (body));
  g_autofree char *channel_data = NULL;
  g_autofree char *quoted = NULL;
  g_autofree char *auth = NULL;
  char *answer;
  const char *socket_id, *channel, *suffix;

  ep->requests++;
  if (ep->refuse) {
    soup_server_message_set_status (msg, SOUP_STATUS_FORBIDDEN, NULL);
    soup_server_message_set_response (msg, "application/json",
        SOUP_MEMORY_STATIC, "{\"error\":\"no\"}", 14);
    return;
  }
  form = soup_form_decode (text);
  socket_id = g_hash_table_lookup (form, "socket_id");
  channel = g_hash_table_lookup (form, "channel_name");
  suffix = g_hash_table_lookup (form, "suffix");
  g_assert_nonnull (socket_id);
  g_assert_cmpstr (channel, ==, CHANNEL);
  g_assert_nonnull (suffix);
  g_free (ep->suffix);
  ep->suffix = g_strdup (suffix);
  g_free (ep->extra_param);
  ep->extra_param = g_strdup (g_hash_table_lookup (form, "team"));
  g_free (ep->extra_header);
  ep->extra_header = g_strdup (soup_message_headers_get_one
      (soup_server_message_get_request_headers (msg), "X-CSRF-Token"));

  channel_data = g_strdup_printf ("{\"user_id\":\"carol-%s\",\"user_info\":"
      "{\"identity\":\"carol\",\"name\":\"Carol\",\"protocol\":"
      "\"legba-room/1\"}}", suffix);
  auth = legba_auth_channel_sign (APP_KEY, APP_SECRET, socket_id, channel,
      channel_data);
  quoted = json_quote (channel_data);
  answer = g_strdup_printf ("{\"auth\":\"%s\",\"channel_data\":%s}", auth,
      quoted);
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_server_message_set_response (msg, "application/json",
      SOUP_MEMORY_TAKE, answer, strlen (answer));
}

static AuthEndpoint *
auth_endpoint_new (void)
{
  AuthEndpoint *ep = g_new0 (AuthEndpoint, 1);
  guint port;

  ep->server = test_server_new (&port);
  soup_server_add_handler (ep->server, "/broadcasting/auth", on_auth_request,
      ep, NULL);
  ep->url = g_strdup_printf ("http://127.0.0.1:%u/broadcasting/auth", port);
  return ep;
}

static void
auth_endpoint_free (AuthEndpoint * ep)
{
  soup_server_disconnect (ep->server);
  g_object_unref (ep->server);
  g_free (ep->url);
  g_free (ep->suffix);
  g_free (ep->extra_param);
  g_free (ep->extra_header);
  g_free (ep);
}

static void
test_auth_endpoint (Fixture * f, gconstpointer data)
{
  AuthEndpoint *ep = auth_endpoint_new ();
  Peer *a = peer_new (f, "alice");
  Peer *c = peer_new_with_key (f, "carol", APP_KEY);
  LegbaSignalMember *m;

  g_object_set (c->client, "auth-url", ep->url, NULL);
  legba_signal_client_add_auth_param (c->client, "team", "blue");
  legba_signal_client_add_auth_header (c->client, "X-CSRF-Token", "t0k3n");
  peer_join_and_wait (a);
  peer_join_and_wait (c);
  g_assert_cmpuint (ep->requests, ==, 1);
  g_assert_true (g_str_has_suffix (c->id, ep->suffix));
  g_assert_cmpstr (ep->extra_param, ==, "blue");
  g_assert_cmpstr (ep->extra_header, ==, "t0k3n");
  WAIT_FOR (peer_knows (a, c), "alice to see carol");
  m = g_hash_table_lookup (a->members, c->id);
  g_assert_cmpstr (legba_signal_member_get_name (m), ==, "Carol");

  peer_send (c, a, "bye", "pc", NULL, 0);
  WAIT_FOR (a->received->len == 1, "carol's signal");
  g_assert_cmpstr (peer_received (a, 0)->from, ==, c->id);

  assert_no_errors (a);
  assert_no_errors (c);
  peer_free (a);
  peer_free (c);
  auth_endpoint_free (ep);
}

static void
test_auth_refused (Fixture * f, gconstpointer data)
{
  AuthEndpoint *ep = auth_endpoint_new ();
  Peer *c = peer_new_with_key (f, "carol", APP_KEY);
  g_autoptr (JsonObject) signal = json_object_new ();
  g_autoptr (GError) error = NULL;

  ep->refuse = TRUE;
  g_object_set (c->client, "auth-url", ep->url, NULL);
  peer_join (c);
  assert_failed (c, LEGBA_SIGNAL_ERROR_AUTH);
  g_assert_cmpuint (ep->requests, ==, 1);
  g_assert_cmpuint (c->joined, ==, 0);
  json_object_set_string_member (signal, "pc", "x");
  json_object_set_string_member (signal, "type", "bye");
  g_assert_false (legba_signaller_send (c->signaller, "a-abcdef", signal,
          &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_NOT_JOINED);

  /* a failed signaller may join again */
  ep->refuse = FALSE;
  g_ptr_array_set_size (c->errors, 0);
  peer_join_and_wait (c);
  assert_no_errors (c);
  peer_free (c);
  auth_endpoint_free (ep);
}

static void
test_join_token (Fixture * f, gconstpointer data)
{
  Peer *a = peer_new (f, "alice");
  Peer *d = peer_new_with_key (f, "dave", APP_KEY);
  Peer *e = peer_new_with_key (f, "eve", APP_KEY);
  g_autoptr (GError) error = NULL;
  g_autofree char *token = NULL;
  g_autofree char *wrong = NULL;
  LegbaSignalMember *m;

  token = legba_join_token_new (APP_SECRET, ROOM, "dave", "Dave D.", 60,
      &error);
  g_assert_no_error (error);
  wrong = legba_join_token_new (APP_SECRET, "another-room", "eve", "Eve", 60,
      &error);
  g_assert_no_error (error);
  g_object_set (d->client, "token", token, "app-id", APP_ID, NULL);
  g_object_set (e->client, "token", wrong, "app-id", APP_ID, NULL);

  peer_join_and_wait (a);
  peer_join_and_wait (d);
  WAIT_FOR (peer_knows (a, d), "alice to see dave");
  m = g_hash_table_lookup (a->members, d->id);
  g_assert_cmpstr (legba_signal_member_get_identity (m), ==, "dave");
  g_assert_cmpstr (legba_signal_member_get_name (m), ==, "Dave D.");
  peer_send (d, a, "bye", "pc", NULL, 0);
  WAIT_FOR (a->received->len == 1, "dave's signal");

  /* a token for another room is refused */
  peer_join (e);
  assert_failed (e, LEGBA_SIGNAL_ERROR_AUTH);
  g_assert_cmpuint (e->joined, ==, 0);
  g_assert_false (peer_knows (a, e));

  assert_no_errors (a);
  assert_no_errors (d);
  peer_free (a);
  peer_free (d);
  peer_free (e);
}

/* Pusher 4001 (unknown app key) is in 4000–4099: do not reconnect. */
static void
test_refused_key (Fixture * f, gconstpointer data)
{
  Peer *p = peer_new_with_key (f, "alice", "unknown-key");

  g_object_set (p->client, "app-secret", APP_SECRET, NULL);
  peer_join (p);
  assert_failed (p, LEGBA_SIGNAL_ERROR_REFUSED);
  g_assert_nonnull (strstr (((GError *) p->errors->pdata[0])->message, "4001"));
  g_assert_cmpuint (p->joined, ==, 0);
  /* no attempt within ten times the longest backoff step */
  run_for (10 * BACKOFF_MAX);
  g_assert_cmpuint (p->states->len, ==, 2);
  g_assert_cmpint (g_array_index (p->states, int, 1), ==,
      LEGBA_SIGNALLER_STATE_FAILED);
  g_assert_cmpuint (p->errors->len, ==, 1);
  g_assert_cmpuint (legba_server_get_connection_count (f->server), ==, 0);
  peer_free (p);
}

static void
test_bad_config (Fixture * f, gconstpointer data)
{
  g_autoptr (LegbaSignalClient) client = legba_signal_client_new (f->url,
      APP_KEY);
  g_autoptr (GError) error = NULL;
  LegbaSignaller *s = LEGBA_SIGNALLER (client);

  /* no way to authenticate */
  g_assert_false (legba_signaller_join (s, ROOM, "alice-abcdef", "alice",
          NULL, &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID);
  g_clear_error (&error);
  g_object_set (client, "app-secret", APP_SECRET, NULL);
  g_assert_false (legba_signaller_join (s, "no spaces", "alice-abcdef",
          "alice", NULL, &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (legba_signaller_join (s, ROOM, "alice-ABC", "alice", NULL,
          &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (legba_signaller_join (s, ROOM, "bob-abcdef", "alice", NULL,
          &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID);
  g_clear_error (&error);
  g_object_set (client, "server-url", "ftp://127.0.0.1/", NULL);
  g_assert_false (legba_signaller_join (s, ROOM, "alice-abcdef", "alice",
          NULL, &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID);
  g_clear_error (&error);
  g_object_set (client, "server-url", f->url, "ca-file", "/nonexistent.pem",
      NULL);
  g_assert_false (legba_signaller_join (s, ROOM, "alice-abcdef", "alice",
          NULL, &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID);
  g_assert_cmpint (legba_signaller_get_state (s), ==,
      LEGBA_SIGNALLER_STATE_DISCONNECTED);
}

/* ---- docs/room-protocol.md §7: events from the application's backend ---- */

static void
test_server_event (Fixture * f, gconstpointer data)
{
  Peer *a = peer_new (f, "alice");

  peer_join_and_wait (a);
  fixture_publish_event (f, "score", "{\"home\":2,\"away\":1}");
  fixture_publish_event (f, "notice", "plain text");
  WAIT_FOR (a->events->len == 2, "both events");
  g_assert_cmpstr (a->events->pdata[0], ==, "score {\"home\":2,\"away\":1}");
  g_assert_cmpstr (a->events->pdata[1], ==, "notice \"plain text\"");
  assert_no_errors (a);
  peer_free (a);
}

/* ---- Proxies: the system's for remote servers, none for loopback ---- */

/* A proxy that records the first line of each request and closes. */
typedef struct
{
  GSocketService *service;
  char *url;
  GPtrArray *requests;          /* char *: request lines */
} FakeProxy;

static void
on_proxy_line (GObject * source, GAsyncResult * result, gpointer data)
{
  g_autoptr (GObject) connection = data;
  FakeProxy *proxy = g_object_get_data (connection, "proxy");
  g_autofree char *line = g_data_input_stream_read_line_finish
      (G_DATA_INPUT_STREAM (source), result, NULL, NULL);

  g_ptr_array_add (proxy->requests, g_strdup (line ? line : ""));
  g_io_stream_close (G_IO_STREAM (connection), NULL, NULL);
  g_object_unref (source);
}

static gboolean
on_proxy_incoming (GSocketService * service, GSocketConnection * connection,
    GObject * source, FakeProxy * proxy)
{
  GDataInputStream *in = g_data_input_stream_new
      (g_io_stream_get_input_stream (G_IO_STREAM (connection)));

  g_object_set_data (G_OBJECT (connection), "proxy", proxy);
  g_data_input_stream_read_line_async (in, G_PRIORITY_DEFAULT, NULL,
      on_proxy_line, g_object_ref (connection));
  return TRUE;
}

static FakeProxy *
fake_proxy_new (void)
{
  FakeProxy *proxy = g_new0 (FakeProxy, 1);
  g_autoptr (GInetAddress) loopback =
      g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) address = g_inet_socket_address_new (loopback, 0);
  g_autoptr (GSocketAddress) bound = NULL;
  g_autoptr (GError) error = NULL;

  proxy->service = g_socket_service_new ();
  proxy->requests = g_ptr_array_new_with_free_func (g_free);
  g_socket_listener_add_address (G_SOCKET_LISTENER (proxy->service),
      address, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL, &bound,
      &error);
  g_assert_no_error (error);
  proxy->url = g_strdup_printf ("http://127.0.0.1:%u",
      g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound)));
  g_signal_connect (proxy->service, "incoming",
      G_CALLBACK (on_proxy_incoming), proxy);
  return proxy;
}

static void
fake_proxy_free (FakeProxy * proxy)
{
  g_socket_service_stop (proxy->service);
  g_socket_listener_close (G_SOCKET_LISTENER (proxy->service));
  g_object_unref (proxy->service);
  g_ptr_array_unref (proxy->requests);
  g_free (proxy->url);
  g_free (proxy);
}

/* Does the system's proxy resolver send url through proxy_url? */
static gboolean
resolver_proxies (const char *url, const char *proxy_url)
{
  g_auto (GStrv) proxies = g_proxy_resolver_lookup
      (g_proxy_resolver_get_default (), url, NULL, NULL);

  return proxies != NULL && g_strv_contains ((const char *const *) proxies,
      proxy_url);
}

static void
test_proxy (Fixture * f, gconstpointer data)
{
  FakeProxy *proxy = fake_proxy_new ();
  Peer *a, *remote;

  g_setenv ("http_proxy", proxy->url, TRUE);
  g_setenv ("https_proxy", proxy->url, TRUE);
  if (!resolver_proxies ("ws://legba.invalid/", proxy->url) ||
      !resolver_proxies (f->url, proxy->url)) {
    g_test_skip ("the system's proxy resolver ignores http_proxy, or "
        "already bypasses loopback addresses");
    g_unsetenv ("http_proxy");
    g_unsetenv ("https_proxy");
    fake_proxy_free (proxy);
    return;
  }

  /* a server on a loopback address is reached directly */
  a = peer_new (f, "alice");
  peer_join_and_wait (a);
  g_assert_cmpuint (proxy->requests->len, ==, 0);
  assert_no_errors (a);
  peer_free (a);

  /* any other server through the system's proxy */
  {
    Fixture other = *f;

    other.url = (char *) "ws://legba.invalid";
    remote = peer_new (&other, "bob");
  }
  g_object_set (remote->client, "reconnect-delay-min", 60000,
      "reconnect-delay-max", 60000, NULL);
  peer_join (remote);
  WAIT_FOR (proxy->requests->len >= 1, "the client to ask the proxy");
  /* (an HTTP proxy is asked for ws:// by absolute URI) */
  g_assert_true (g_str_has_prefix (proxy->requests->pdata[0],
          "GET ws://legba.invalid/app/" APP_KEY "?protocol=7"));
  legba_signaller_leave (remote->signaller);
  peer_free (remote);

  g_unsetenv ("http_proxy");
  g_unsetenv ("https_proxy");
  fake_proxy_free (proxy);
}

/* ---- Threads ---- */

typedef struct
{
  LegbaSignalClient *client;
  GMainLoop *loop;              /* the joining thread's */
  gboolean connected_there;     /* CONNECTED notified on that thread */
  GMutex lock;
  gboolean done;
} Joiner;

static void
on_joiner_state (LegbaSignaller * signaller, GParamSpec * pspec, Joiner * j)
{
  if (legba_signaller_get_state (signaller) != LEGBA_SIGNALLER_STATE_CONNECTED)
    return;
  j->connected_there =
      g_main_context_is_owner (g_main_loop_get_context (j->loop));
  g_main_loop_quit (j->loop);
}

static gboolean
on_joiner_deadline (gpointer data)
{
  g_main_loop_quit (data);
  return G_SOURCE_REMOVE;
}

static gpointer
join_on_own_context (gpointer data)
{
  Joiner *j = data;
  GMainContext *context = g_main_context_new ();
  g_autofree char *id = legba_signaller_generate_participant_id ("thread");
  g_autoptr (GError) error = NULL;
  GSource *deadline = g_timeout_source_new (WAIT_MS);
  gulong handler;

  g_main_context_push_thread_default (context);
  j->loop = g_main_loop_new (context, FALSE);
  g_source_set_callback (deadline, on_joiner_deadline, j->loop, NULL);
  g_source_attach (deadline, context);
  handler = g_signal_connect (j->client, "notify::state",
      G_CALLBACK (on_joiner_state), j);
  g_assert_true (legba_signaller_join (LEGBA_SIGNALLER (j->client), ROOM, id,
          "thread", NULL, &error));
  g_assert_no_error (error);
  g_main_loop_run (j->loop);
  g_signal_handler_disconnect (j->client, handler);
  legba_signaller_leave (LEGBA_SIGNALLER (j->client));
  g_source_destroy (deadline);
  g_source_unref (deadline);
  g_main_context_pop_thread_default (context);
  g_main_loop_unref (j->loop);
  g_main_context_unref (context);
  g_mutex_lock (&j->lock);
  j->done = TRUE;
  g_mutex_unlock (&j->lock);
  g_main_context_wakeup (NULL);
  return NULL;
}

static gboolean
joiner_done (Joiner * j)
{
  gboolean done;

  g_mutex_lock (&j->lock);
  done = j->done;
  g_mutex_unlock (&j->lock);
  return done;
}

/* A client made on one thread runs on the context of the thread that
 * joins with it (legbaroom's signaller is made with the element and
 * joined from the element's own thread). */
static void
test_joined_on_another_thread (Fixture * f, gconstpointer data)
{
  Joiner j = { 0 };
  GThread *thread;

  j.client = legba_signal_client_new (f->url, APP_KEY);
  g_object_set (j.client, "app-secret", APP_SECRET, NULL);
  g_mutex_init (&j.lock);
  thread = g_thread_new ("joiner", join_on_own_context, &j);
  /* this thread runs the server meanwhile */
  WAIT_FOR (joiner_done (&j), "the other thread to join and leave");
  g_thread_join (thread);
  g_assert_true (j.connected_there);
  g_object_unref (j.client);
  g_mutex_clear (&j.lock);
}

/* ---- main ---- */

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);

  ADD ("two-peers", test_two_peers, 0);
  ADD ("three-peers", test_three_peers, 0);
  ADD ("spoofed-from", test_spoofed_from, 0);
  ADD ("chunked", test_chunked, 10000);
  ADD ("advertised-limits", test_advertised_limits, 3000);
  ADD ("pacing", test_pacing, 0);
  ADD ("server-event", test_server_event, 0);
  ADD ("proxy", test_proxy, 0);
  ADD ("refused-key", test_refused_key, 0);
  ADD ("auth/endpoint", test_auth_endpoint, 0);
  ADD ("auth/refused", test_auth_refused, 0);
  ADD ("auth/join-token", test_join_token, 0);
  ADD ("auth/bad-config", test_bad_config, 0);
  ADD ("joined-on-another-thread", test_joined_on_another_thread, 0);

  status = g_test_run ();
  stop_pool_threads ();
  return status;
}
