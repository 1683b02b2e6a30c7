/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Janus's WebSocket API (the Janus 1.1 documentation, "The Janus API"
 * and "WebSockets"): every request names a `transaction`; Janus answers
 * it with "success" or "error", or, for a plugin message handled
 * asynchronously, with "ack" and later an "event" of the same
 * transaction. Events with no pending transaction belong to a handle.
 */
#include <legba/room/legba-room-janus.h>
#include <legba/room/legba-room-private.h>
#include <legba/common/legba-json.h>

#include <libsoup/soup.h>

/* the largest frame taken from Janus: an offer of many streams */
#define MAX_FRAME_BYTES (1024 * 1024)

typedef struct
{
  guint64 handle;
  LegbaJanusReply reply;
  gpointer user_data;
  gboolean acked;
  gboolean ack_answers;         /* a keepalive: "ack" is its answer */
} Pending;

struct _LegbaJanus
{
  const LegbaJanusEvents *events;
  gpointer user_data;
  char *token;
  GCancellable *cancellable;
  SoupSession *session;
  SoupWebsocketConnection *ws;
  guint64 session_id;           /* 0 until created */
  GHashTable *pending;          /* transaction -> Pending */
  guint next_transaction;
  GSource *keepalive;
  GMainContext *context;
  gboolean failed;
  /* the pending connection's hold on the session, cleared when the
   * session is freed first */
  LegbaJanus **connecting;
};

/* code: LEGBA_ROOM_ERROR_REFUSED when Janus refused the session, else
 * LEGBA_ROOM_ERROR_UNREACHABLE */
static void
fail (LegbaJanus * self, LegbaRoomError code, const char *why)
{
  GHashTableIter iter;
  gpointer value;
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) pending = g_ptr_array_new_with_free_func (g_free);

  if (self->failed)
    return;
  self->failed = TRUE;
  GST_WARNING ("janus: %s", why);
  g_hash_table_iter_init (&iter, self->pending);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    g_ptr_array_add (pending, value);
    g_hash_table_iter_steal (&iter);
  }
  error = g_error_new (LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_SIGNALLING,
      "The SFU session ended: %s", why);
  for (guint i = 0; i < pending->len; i++) {
    Pending *p = pending->pdata[i];

    p->reply (p->handle, NULL, error, p->user_data);
  }
  self->events->failed (code, why, self->user_data);
}

static void
send_request (LegbaJanus * self, JsonObject * request, Pending * pending)
{
  g_autoptr (JsonNode) node = json_node_alloc ();
  g_autofree char *transaction = g_strdup_printf ("t%u",
      ++self->next_transaction);
  g_autofree char *text = NULL;

  json_object_set_string_member (request, "transaction", transaction);
  if (self->token != NULL)
    json_object_set_string_member (request, "token", self->token);
  if (self->session_id != 0)
    json_object_set_int_member (request, "session_id",
        (gint64) self->session_id);
  json_node_init_object (node, request);
  json_object_unref (request);
  if (self->ws == NULL || self->failed ||
      soup_websocket_connection_get_state (self->ws) !=
      SOUP_WEBSOCKET_STATE_OPEN) {
    g_free (pending);
    return;
  }
  if (pending != NULL)
    g_hash_table_insert (self->pending, g_steal_pointer (&transaction),
        pending);
  text = json_to_string (node, FALSE);
  soup_websocket_connection_send_text (self->ws, text);
}

static JsonObject *
request_new (const char *janus, guint64 handle)
{
  JsonObject *request = json_object_new ();

  json_object_set_string_member (request, "janus", janus);
  if (handle != 0)
    json_object_set_int_member (request, "handle_id", (gint64) handle);
  return request;
}

static Pending *
pending_new (guint64 handle, LegbaJanusReply reply, gpointer user_data)
{
  Pending *p = g_new0 (Pending, 1);

  p->handle = handle;
  p->reply = reply;
  p->user_data = user_data;
  return p;
}

/* ---- What Janus sends ---- */

static JsonObject *
member_object (JsonObject * object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  return node && JSON_NODE_HOLDS_OBJECT (node) ?
      json_node_get_object (node) : NULL;
}

static guint64
member_id (JsonObject * object, const char *name)
{
  JsonNode *node = object ? json_object_get_member (object, name) : NULL;

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_INT64)
    return 0;
  return (guint64) json_node_get_int (node);
}

static void
on_session_created (guint64 handle, JsonObject * reply, const GError * error,
    gpointer user_data)
{
  LegbaJanus *self = user_data;
  guint64 id = member_id (member_object (reply, "data"), "id");

  if (error != NULL) {
    fail (self, LEGBA_ROOM_ERROR_REFUSED, error->message);
    return;
  }
  if (id == 0) {
    fail (self, LEGBA_ROOM_ERROR_REFUSED, "Janus created no session");
    return;
  }
  self->session_id = id;
  GST_INFO ("janus: session %" G_GUINT64_FORMAT, id);
  self->events->ready (self->user_data);
}

/* A request's answer: "success", "error", "ack" or the event after it. */
static gboolean
answer_pending (LegbaJanus * self, const char *janus, JsonObject * message)
{
  const char *transaction = json_object_get_string_member_with_default
      (message, "transaction", NULL);
  Pending *p = transaction ? g_hash_table_lookup (self->pending,
      transaction) : NULL;
  g_autoptr (GError) error = NULL;
  gpointer key = NULL;

  if (p == NULL)
    return FALSE;
  if (strcmp (janus, "ack") == 0 && !p->ack_answers) {
    p->acked = TRUE;
    return TRUE;
  }
  if (strcmp (janus, "error") == 0) {
    JsonObject *e = member_object (message, "error");

    error = g_error_new (LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_REFUSED,
        "Janus refused the request: %s (%" G_GINT64_FORMAT ")",
        e ? json_object_get_string_member_with_default (e, "reason", "") : "",
        e ? json_object_get_int_member_with_default (e, "code", 0) : 0);
  } else if (strcmp (janus, "success") != 0 && strcmp (janus, "event") != 0
      && strcmp (janus, "ack") != 0) {
    return FALSE;
  }
  g_hash_table_steal_extended (self->pending, transaction, &key, NULL);
  g_free (key);
  p->reply (p->handle, error ? NULL : message, error, p->user_data);
  g_free (p);
  return TRUE;
}

static void
handle_message (LegbaJanus * self, JsonObject * message)
{
  const char *janus = json_object_get_string_member_with_default (message,
      "janus", NULL);
  guint64 sender = member_id (message, "sender");
  JsonObject *plugindata = member_object (message, "plugindata");

  if (janus == NULL) {
    GST_INFO ("janus: dropping a message without `janus`");
    return;
  }
  if (answer_pending (self, janus, message))
    return;
  if (strcmp (janus, "event") == 0 && plugindata != NULL) {
    JsonObject *data = member_object (plugindata, "data");

    if (data != NULL)
      self->events->event (sender, data, member_object (message, "jsep"),
          self->user_data);
  } else if (strcmp (janus, "hangup") == 0) {
    self->events->hangup (sender,
        json_object_get_string_member_with_default (message, "reason", ""),
        self->user_data);
  } else if (strcmp (janus, "timeout") == 0) {
    fail (self, LEGBA_ROOM_ERROR_UNREACHABLE, "Janus timed the session out");
  } else {
    /* webrtcup, media, slowlink, detached, trickle, ack of a trickle */
    GST_DEBUG ("janus: %s for handle %" G_GUINT64_FORMAT, janus, sender);
  }
}

static void
on_ws_message (SoupWebsocketConnection * ws, gint type, GBytes * bytes,
    LegbaJanus * self)
{
  gsize size;
  const char *text = g_bytes_get_data (bytes, &size);
  g_autofree char *why = NULL;
  g_autoptr (JsonNode) root = NULL;

  if (type != SOUP_WEBSOCKET_DATA_TEXT)
    return;
  root = legba_json_parse_strict (text, size, NULL, NULL, &why);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    GST_WARNING ("janus: dropping an unreadable message: %s",
        why ? why : "not an object");
    return;
  }
  handle_message (self, json_node_get_object (root));
}

static void
on_ws_closed (SoupWebsocketConnection * ws, LegbaJanus * self)
{
  fail (self, LEGBA_ROOM_ERROR_UNREACHABLE, "the connection to Janus closed");
}

/* Janus acknowledges a keepalive of a session it knows, and answers
 * "error" (458, no such session) for one it destroyed meanwhile: timed
 * out, or destroyed through its admin API. */
static void
on_keepalive_answered (guint64 handle, JsonObject * reply,
    const GError * error, gpointer user_data)
{
  LegbaJanus *self = user_data;
  g_autofree char *why = NULL;

  if (error == NULL || error->code != LEGBA_ROOM_ERROR_REFUSED)
    return;
  why = g_strdup_printf ("Janus no longer has the session: %s", error->message);
  fail (self, LEGBA_ROOM_ERROR_UNREACHABLE, why);
}

static gboolean
send_keepalive (gpointer data)
{
  LegbaJanus *self = data;
  Pending *p;

  if (self->session_id == 0)
    return G_SOURCE_CONTINUE;
  p = pending_new (0, on_keepalive_answered, self);
  p->ack_answers = TRUE;
  send_request (self, request_new ("keepalive", 0), p);
  return G_SOURCE_CONTINUE;
}

static void
on_connected (GObject * source, GAsyncResult * result, gpointer data)
{
  g_autofree LegbaJanus **hold = data;
  LegbaJanus *self = *hold;
  g_autoptr (GError) error = NULL;
  SoupWebsocketConnection *ws =
      soup_session_websocket_connect_finish (SOUP_SESSION (source), result,
      &error);

  if (self == NULL) {
    /* the session was freed meanwhile */
    g_clear_object (&ws);
    return;
  }
  self->connecting = NULL;
  if (ws == NULL) {
    g_autofree char *why = g_strdup_printf ("could not reach Janus: %s",
        error->message);

    fail (self, LEGBA_ROOM_ERROR_UNREACHABLE, why);
    return;
  }
  self->ws = ws;
  soup_websocket_connection_set_max_incoming_payload_size (ws, MAX_FRAME_BYTES);
  soup_websocket_connection_set_keepalive_interval (ws, 0);
  g_signal_connect (ws, "message", G_CALLBACK (on_ws_message), self);
  g_signal_connect (ws, "closed", G_CALLBACK (on_ws_closed), self);
  self->keepalive = g_timeout_source_new_seconds (LEGBA_JANUS_KEEPALIVE_S);
  g_source_set_callback (self->keepalive, send_keepalive, self, NULL);
  g_source_attach (self->keepalive, self->context);
  send_request (self, request_new ("create", 0),
      pending_new (0, on_session_created, self));
}

static gboolean
invalid_url (gpointer data)
{
  LegbaJanus *self = data;

  g_clear_pointer (&self->keepalive, g_source_unref);
  fail (self, LEGBA_ROOM_ERROR_UNREACHABLE, "the SFU's url is not valid");
  return G_SOURCE_REMOVE;
}

LegbaJanus *
legba_janus_new (const char *url, const char *token,
    const LegbaJanusEvents * events, gpointer user_data)
{
  LegbaJanus *self = g_new0 (LegbaJanus, 1);
  g_autoptr (SoupMessage) msg = NULL;
  const char *protocols[] = { "janus-protocol", NULL };

  self->events = events;
  self->user_data = user_data;
  self->token = g_strdup (token);
  self->context = g_main_context_ref_thread_default ();
  self->pending = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      g_free);
  self->cancellable = g_cancellable_new ();
  self->session = soup_session_new ();
  msg = soup_message_new ("GET", url);
  if (msg == NULL) {
    /* reported from the context, once the caller holds the session */
    self->keepalive = g_idle_source_new ();
    g_source_set_callback (self->keepalive, invalid_url, self, NULL);
    g_source_attach (self->keepalive, self->context);
    return self;
  }
  self->connecting = g_new (LegbaJanus *, 1);
  *self->connecting = self;
  soup_session_websocket_connect_async (self->session, msg, NULL,
      (char **) protocols, G_PRIORITY_DEFAULT, self->cancellable,
      on_connected, self->connecting);
  return self;
}

void
legba_janus_free (LegbaJanus * self)
{
  if (self == NULL)
    return;
  if (self->connecting != NULL)
    *self->connecting = NULL;
  g_cancellable_cancel (self->cancellable);
  if (self->ws != NULL) {
    g_signal_handlers_disconnect_by_data (self->ws, self);
    if (self->session_id != 0)
      send_request (self, request_new ("destroy", 0), NULL);
    if (soup_websocket_connection_get_state (self->ws) ==
        SOUP_WEBSOCKET_STATE_OPEN)
      soup_websocket_connection_close (self->ws,
          SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
    g_clear_object (&self->ws);
  }
  legba_clear_source (&self->keepalive);
  g_clear_object (&self->session);
  g_clear_object (&self->cancellable);
  g_hash_table_unref (self->pending);
  g_main_context_unref (self->context);
  g_free (self->token);
  g_free (self);
}

void
legba_janus_set_token (LegbaJanus * self, const char *token)
{
  g_free (self->token);
  self->token = g_strdup (token);
}

void
legba_janus_attach (LegbaJanus * self, const char *plugin, guint64 tag,
    LegbaJanusReply reply, gpointer user_data)
{
  JsonObject *request = request_new ("attach", 0);

  json_object_set_string_member (request, "plugin", plugin);
  send_request (self, request, pending_new (tag, reply, user_data));
}

void
legba_janus_detach (LegbaJanus * self, guint64 handle)
{
  send_request (self, request_new ("detach", handle), NULL);
}

void
legba_janus_message (LegbaJanus * self, guint64 handle, JsonObject * body,
    const char *jsep_type, const char *sdp, LegbaJanusReply reply,
    gpointer user_data)
{
  JsonObject *request = request_new ("message", handle);

  json_object_set_object_member (request, "body", body);
  if (jsep_type != NULL) {
    JsonObject *jsep = json_object_new ();

    json_object_set_string_member (jsep, "type", jsep_type);
    json_object_set_string_member (jsep, "sdp", sdp);
    json_object_set_object_member (request, "jsep", jsep);
  }
  send_request (self, request, reply ? pending_new (handle, reply,
          user_data) : NULL);
}

void
legba_janus_trickle (LegbaJanus * self, guint64 handle, JsonObject * candidate)
{
  JsonObject *request = request_new ("trickle", handle);

  if (candidate == NULL) {
    candidate = json_object_new ();
    json_object_set_boolean_member (candidate, "completed", TRUE);
  }
  json_object_set_object_member (request, "candidate", candidate);
  send_request (self, request, NULL);
}
