/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The LegbaHub unit tests' fixture (see hub-fixture.h).
 */
#include "hub-fixture.h"

/* ---- Fake transport and clock ---- */

void
client_report_closed (Client * c)
{
  LegbaHubConn *conn = c->conn;

  c->conn = NULL;
  legba_hub_conn_closed (c->f->hub, conn);
}

/* Every frame the hub sends must be strict JSON with a string "event"; all
 * server frames but pusher:error and relayed client events carry their
 * data as a JSON string (holding JSON for the protocol's own events). */
static void
fake_send (gpointer handle, GBytes * frame, gpointer user_data)
{
  Client *c = handle;
  gsize len;
  const char *text = g_bytes_get_data (frame, &len);
  g_autofree char *error = NULL;
  JsonNode *root = legba_json_parse_strict (text, len, NULL, NULL, &error);
  JsonObject *obj;
  const char *event;
  JsonNode *data;

  if (root == NULL)
    g_error ("hub sent invalid JSON (%s): %.*s", error, (int) len, text);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (root));
  obj = json_node_get_object (root);
  event = legba_json_object_get_string (obj, "event");
  g_assert_nonnull (event);
  data = json_object_get_member (obj, "data");
  if (data != NULL && !g_str_equal (event, "pusher:error") &&
      !g_str_has_prefix (event, "client-")) {
    const char *s = legba_json_object_get_string (obj, "data");
    g_autoptr (JsonNode) inner = NULL;

    g_assert_nonnull (s);
    if (g_str_has_prefix (event, "pusher")) {
      inner = legba_json_parse_strict (s, strlen (s), NULL, NULL, NULL);
      g_assert_nonnull (inner);
    }
  }
  /* Nothing follows a close. */
  g_assert_false (c->close_requested);

  g_queue_push_tail (&c->frames, root);
  g_ptr_array_add (c->bytes, g_bytes_ref (frame));
  if (c->close_on_send && c->conn != NULL)
    client_report_closed (c);
}

static void
fake_close (gpointer handle, guint16 code, const char *reason,
    gpointer user_data)
{
  Client *c = handle;
  Fixture *f = user_data;

  g_assert_false (c->close_requested);
  g_assert_nonnull (reason);
  g_assert_cmpuint (strlen (reason), <=, 123);
  c->close_requested = TRUE;
  c->close_code = code;
  c->close_reason = g_strdup (reason);
  if (f->close_now && c->conn != NULL)
    client_report_closed (c);
}

const LegbaHubTransport fake_transport = { fake_send, fake_close };

static gint64
fake_now (gpointer user_data)
{
  return ((Fixture *) user_data)->now;
}

void
client_free (Client * c)
{
  g_queue_clear_full (&c->frames, (GDestroyNotify) json_node_unref);
  g_ptr_array_unref (c->bytes);
  g_free (c->socket_id);
  g_free (c->close_reason);
  g_free (c);
}

/* A hub with app APP_ID/KEY/SECRET under limits (NULL: the defaults). */
Fixture *
fixture_new (const LegbaLimits * limits)
{
  Fixture *f = g_new0 (Fixture, 1);
  g_autoptr (GError) error = NULL;

  f->hub = legba_hub_new (&fake_transport, f);
  f->now = 1000 * G_USEC_PER_SEC;
  legba_hub_set_clock (f->hub, fake_now, f);
  if (limits != NULL)
    legba_hub_set_limits (f->hub, limits);
  g_assert_true (legba_hub_add_app (f->hub, APP_ID, KEY, SECRET, &error));
  g_assert_no_error (error);
  f->app = legba_hub_find_app_by_id (f->hub, APP_ID);
  g_assert_nonnull (f->app);
  f->clients = g_ptr_array_new_with_free_func ((GDestroyNotify) client_free);
  return f;
}

/* Reports every connection closed, as a transport does on shutdown, then
 * frees the hub. */
void
fixture_free (Fixture * f)
{
  f->close_now = FALSE;
  for (guint i = 0; i < f->clients->len; i++) {
    Client *c = f->clients->pdata[i];

    c->close_on_send = FALSE;
    if (c->conn != NULL)
      client_report_closed (c);
  }
  g_assert_cmpuint (legba_hub_get_connection_count (f->hub), ==, 0);
  g_assert_cmpuint (legba_hub_get_subscription_count (f->hub), ==, 0);
  legba_hub_free (f->hub);
  g_ptr_array_unref (f->clients);
  g_free (f);
}

LegbaLimits
default_limits (void)
{
  LegbaLimits limits;

  legba_limits_init_defaults (&limits);
  return limits;
}

/* ---- Clients ---- */

Client *
client_open_full (Fixture * f, const char *key, const char *protocol)
{
  Client *c = g_new0 (Client, 1);

  c->f = f;
  g_queue_init (&c->frames);
  c->bytes = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_ptr_array_add (f->clients, c);
  c->conn = legba_hub_open (f->hub, key, protocol, c);
  return c;
}

/* Pops the next frame, checks its event and (unless NULL) channel. */
JsonNode *
client_pop (Client * c, const char *event, const char *channel)
{
  JsonNode *frame = g_queue_pop_head (&c->frames);
  JsonObject *obj;

  if (frame == NULL)
    g_error ("no frame received, expected %s", event);
  obj = json_node_get_object (frame);
  if (g_strcmp0 (legba_json_object_get_string (obj, "event"), event) != 0) {
    g_autofree char *text = json_to_string (frame, FALSE);

    g_error ("expected %s, received %s", event, text);
  }
  if (channel != NULL)
    g_assert_cmpstr (legba_json_object_get_string (obj, "channel"), ==,
        channel);
  return frame;
}

/* Pops the next frame as client_pop() does and returns its data, decoded
 * from the JSON string servers send (or as it is when not a string). */
JsonNode *
client_expect (Client * c, const char *event, const char *channel)
{
  g_autoptr (JsonNode) frame = client_pop (c, event, channel);
  JsonObject *obj = json_node_get_object (frame);
  const char *text = legba_json_object_get_string (obj, "data");

  if (text != NULL)
    return legba_json_parse_strict (text, strlen (text), NULL, NULL, NULL);
  g_assert_true (json_object_has_member (obj, "data"));
  return json_node_copy (json_object_get_member (obj, "data"));
}

void
client_skip (Client * c, const char *event, const char *channel)
{
  json_node_unref (client_pop (c, event, channel));
}

void
client_drop_frames (Client * c)
{
  g_queue_clear_full (&c->frames, (GDestroyNotify) json_node_unref);
}

void
client_expect_nothing (Client * c)
{
  if (c->frames.length > 0) {
    g_autofree char *text = json_to_string (c->frames.head->data, FALSE);

    g_error ("unexpected frame %s", text);
  }
}

/* Pusher protocol 7: pusher:error data is an object {code, message}. */
void
client_expect_error (Client * c, guint code)
{
  g_autoptr (JsonNode) frame = client_pop (c, "pusher:error", NULL);
  JsonObject *obj = json_node_get_object (frame);
  JsonNode *data = json_object_get_member (obj, "data");

  g_assert_nonnull (data);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (data));
  obj = json_node_get_object (data);
  g_assert_cmpint (json_object_get_int_member_with_default (obj, "code", 0),
      ==, code);
  g_assert_cmpstr (legba_json_object_get_string (obj, "message"), !=, "");
  g_assert_nonnull (legba_json_object_get_string (obj, "message"));
}

void
client_expect_closed (Client * c, guint16 code)
{
  g_assert_true (c->close_requested);
  g_assert_cmpuint (c->close_code, ==, code);
}

Client *
client_open (Fixture * f)
{
  Client *c = client_open_full (f, KEY, "7");
  g_autoptr (JsonNode) data = NULL;

  g_assert_nonnull (c->conn);
  data = client_expect (c, "pusher:connection_established", NULL);
  c->socket_id = g_strdup (legba_json_object_get_string
      (json_node_get_object (data), "socket_id"));
  g_assert_cmpstr (c->socket_id, ==, legba_hub_conn_get_socket_id (c->conn));
  return c;
}

void
client_send (Client * c, const char *text)
{
  legba_hub_receive (c->f->hub, c->conn, text, strlen (text));
}

/* {"event": event, "data": {key: value, ...}} with string values,
 * arguments in pairs ending with NULL. */
char *
build_frame (const char *event, const char *first_key, ...)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonNode) root = NULL;
  const char *key;
  va_list args;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "event");
  json_builder_add_string_value (b, event);
  json_builder_set_member_name (b, "data");
  json_builder_begin_object (b);
  va_start (args, first_key);
  for (key = first_key; key != NULL; key = va_arg (args, const char *))
  {
    const char *value = va_arg (args, const char *);

    json_builder_set_member_name (b, key);
    json_builder_add_string_value (b, value);
  }
  va_end (args);
  json_builder_end_object (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  return json_to_string (root, FALSE);
}

/* The same frame with its data object replaced by a string holding it. */
char *
frame_with_string_data (const char *text)
{
  g_autoptr (JsonNode) root = json_from_string (text, NULL);
  JsonObject *obj = json_node_get_object (root);
  g_autofree char *data = json_to_string (json_object_get_member (obj,
          "data"), FALSE);

  json_object_set_string_member (obj, "data", data);
  return json_to_string (root, FALSE);
}

void
client_send_subscribe (Client * c, const char *channel)
{
  g_autofree char *frame = build_frame ("pusher:subscribe", "channel",
      channel, NULL);

  client_send (c, frame);
}

void
client_subscribe (Client * c, const char *channel)
{
  g_autoptr (JsonNode) data = NULL;

  client_send_subscribe (c, channel);
  data = client_expect (c, "pusher_internal:subscription_succeeded", channel);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (data));
}

void
client_subscribe_private (Client * c, const char *channel)
{
  g_autofree char *auth = legba_auth_channel_sign (KEY, SECRET, c->socket_id,
      channel, NULL);
  g_autofree char *frame = build_frame ("pusher:subscribe", "channel",
      channel, "auth", auth, NULL);
  g_autoptr (JsonNode) data = NULL;

  client_send (c, frame);
  data = client_expect (c, "pusher_internal:subscription_succeeded", channel);
}

/* Sends a correctly signed presence subscription with this channel_data. */
void
client_send_presence (Client * c, const char *channel, const char *channel_data)
{
  g_autofree char *auth = legba_auth_channel_sign (KEY, SECRET, c->socket_id,
      channel, channel_data);
  g_autofree char *frame = build_frame ("pusher:subscribe", "channel",
      channel, "auth", auth, "channel_data", channel_data, NULL);

  client_send (c, frame);
}

/* Joins a presence channel as user_id with user_info {"name": user_id};
 * returns the presence object of subscription_succeeded. */
JsonNode *
client_join_presence (Client * c, const char *channel, const char *user_id)
{
  g_autofree char *channel_data = g_strdup_printf ("{\"user_id\":\"%s\","
      "\"user_info\":{\"name\":\"%s\"}}", user_id, user_id);
  g_autoptr (JsonNode) data = NULL;
  JsonNode *presence;

  client_send_presence (c, channel, channel_data);
  data = client_expect (c, "pusher_internal:subscription_succeeded", channel);
  presence = json_object_get_member (json_node_get_object (data), "presence");
  g_assert_nonnull (presence);
  return json_node_copy (presence);
}

void
client_join (Client * c, const char *channel, const char *user_id)
{
  json_node_unref (client_join_presence (c, channel, user_id));
}

void
client_signin (Client * c, const char *user_id)
{
  g_autofree char *user_data = g_strdup_printf ("{\"id\":\"%s\"}", user_id);
  g_autofree char *auth = legba_auth_user_sign (KEY, SECRET, c->socket_id,
      user_data);
  g_autofree char *frame = build_frame ("pusher:signin", "auth", auth,
      "user_data", user_data, NULL);
  g_autoptr (JsonNode) data = NULL;

  client_send (c, frame);
  data = client_expect (c, "pusher:signin_success", NULL);
  g_assert_cmpstr (legba_json_object_get_string (json_node_get_object (data),
          "user_data"), ==, user_data);
  g_assert_cmpstr (legba_hub_conn_get_user_id (c->conn), ==, user_id);
}

/* The (presence or error) object data's member name as a string. */
const char *
data_string (JsonNode * data, const char *name)
{
  return legba_json_object_get_string (json_node_get_object (data), name);
}

gint64
data_int (JsonNode * data, const char *name)
{
  return json_object_get_int_member_with_default (json_node_get_object
      (data), name, -1);
}

/* The ids array of a presence object, joined with ",". */
char *
presence_ids (JsonNode * presence)
{
  JsonObject *obj = json_node_get_object (presence);
  JsonArray *ids = json_object_get_array_member (obj, "ids");
  g_autoptr (GString) out = g_string_new (NULL);

  for (guint i = 0; i < json_array_get_length (ids); i++)
    g_string_append_printf (out, "%s%s", i ? "," : "",
        json_array_get_string_element (ids, i));
  g_assert_cmpint (json_object_get_int_member (obj, "count"), ==,
      json_array_get_length (ids));
  g_assert_cmpuint (json_object_get_size (json_object_get_object_member (obj,
              "hash")), ==, json_array_get_length (ids));
  return g_string_free (g_steal_pointer (&out), FALSE);
}

char *
users_joined (Fixture * f, const char *channel)
{
  g_autoptr (GPtrArray) users = legba_hub_get_users (f->hub, f->app, channel);

  if (users == NULL)
    return NULL;
  g_ptr_array_add (users, NULL);
  return g_strjoinv (",", (char **) users->pdata);
}

gboolean
publish (Fixture * f, const char *channel, const char *event,
    const char *data, const char *except, GError ** error)
{
  const char *channels[] = { channel, NULL };

  return legba_hub_publish (f->hub, f->app, channels, event, data, except,
      error);
}

/* The subscription_error, checked; nothing else sent. */
void
client_expect_refused (Client * c, const char *channel, const char *type,
    gint status)
{
  g_autoptr (JsonNode) data = client_expect (c, "pusher:subscription_error",
      channel);

  g_assert_cmpstr (data_string (data, "type"), ==, type);
  g_assert_cmpint (data_int (data, "status"), ==, status);
  g_assert_nonnull (data_string (data, "error"));
  client_expect_nothing (c);
}

void
add_table_tests (const char *prefix, gconstpointer table, gsize size,
    guint n, GTestDataFunc func)
{
  for (guint i = 0; i < n; i++) {
    g_autofree char *path = g_strdup_printf ("%s/%u", prefix, i);

    g_test_add_data_func (path, (const char *) table + i * size, func);
  }
}
