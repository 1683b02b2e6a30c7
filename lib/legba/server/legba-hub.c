/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub: the Pusher Channels protocol 7 state machine of legba-server:
 * connections, frames, subscriptions, presence, client events, sign-in and
 * housekeeping. Subscribing and unsubscribing are in legba-hub-subscribe.c,
 * the server-side operations in legba-hub-api.c.
 *
 * Frames from clients are read as strict JSON (legba-json.h); frames to
 * clients are written here, once per broadcast, and the same GBytes goes to
 * every recipient, because fan-out is the hot path: per recipient the hub
 * only calls transport->send.
 *
 * Every delivery to a channel (client events, HTTP API events, presence
 * changes, server-to-user events) goes through hub_deliver(). With a relay
 * between server instances (legba_hub_set_cluster()), the events this
 * instance originates also go to hub_relay_event(), presence channels
 * count the members other instances have (Member.n_remote), and a channel
 * lives as long as anyone in the cluster is in it (hub_channel_release()).
 *
 * The transport may call legba_hub_conn_closed() from inside its send or
 * close callback: the hub then finishes what it is doing first and tears the
 * connection down when it returns to the transport (hub_leave()), so no list
 * changes under an iteration.
 */
#include <legba/server/legba-hub-private.h>

#include <legba/common/legba-auth.h>
#include <legba/common/legba-json.h>
#include <legba/common/legba-turn.h>

#include <string.h>

GQuark
legba_hub_error_quark (void)
{
  return g_quark_from_static_string ("legba-hub-error-quark");
}

void
legba_limits_init_defaults (LegbaLimits * limits)
{
  g_return_if_fail (limits != NULL);

  limits->max_connections = 0;
  limits->max_event_bytes = 10240;
  limits->client_events_per_second = 10;
  limits->max_presence_members = 100;
  limits->max_channels_per_socket = 100;
  limits->max_user_info_bytes = 1024;
  limits->max_channel_name_length = 164;
  limits->max_frame_bytes = 262144;
  limits->max_queued_bytes = 4 * 1024 * 1024;
  limits->control_frames_per_second = 10;
  limits->activity_timeout = 120;
  limits->pong_timeout = 30;
  limits->signin_timeout = 0;
  limits->api_requests_per_second = 1000;
  limits->cache_ttl = 1800;
  limits->max_cache_channels = 10000;
  limits->max_cache_bytes = 16 * 1024 * 1024;
  limits->max_watchlist_users = 100;
}

/* ---- Frames to clients ---- */

/* Pusher protocol 7 frame: {"event": ..., "channel": ..., "data": ...}. */
static GString *
frame_begin (const char *event, const char *channel)
{
  GString *frame = g_string_sized_new (128);

  g_string_append (frame, "{\"event\":");
  legba_json_append_string (frame, event);
  if (channel) {
    g_string_append (frame, ",\"channel\":");
    legba_json_append_string (frame, channel);
  }
  return frame;
}

/* Servers send data as a JSON-encoded string. */
static void
frame_add_data (GString * frame, const char *data)
{
  g_string_append (frame, ",\"data\":");
  legba_json_append_string (frame, data);
}

static GBytes *
frame_end (GString * frame)
{
  g_string_append_c (frame, '}');
  return g_string_free_to_bytes (frame);
}

GBytes *
hub_frame_new (const char *event, const char *channel, const char *data)
{
  GString *frame = frame_begin (event, channel);

  if (data != NULL)
    frame_add_data (frame, data);
  return frame_end (frame);
}

/* ---- Sending and closing ---- */

gint64
hub_now (LegbaHub * hub)
{
  return hub->now (hub->now_data);
}

void
hub_count_error (LegbaHub * hub, guint code)
{
  if (code >= 4000 && code < 4000 + G_N_ELEMENTS (hub->counters.errors))
    hub->counters.errors[code - 4000]++;
}

static void
hub_send (LegbaHub * hub, gpointer handle, GBytes * frame)
{
  hub->transport.send (handle, frame, hub->user_data);
  hub->counters.messages_out++;
  hub->counters.bytes_out += g_bytes_get_size (frame);
}

void
hub_conn_send (LegbaHub * hub, LegbaHubConn * conn, GBytes * frame)
{
  if (!conn->closing)
    hub_send (hub, conn->handle, frame);
}

/* Pusher protocol 7: unlike other server frames, pusher:error carries its
 * data as an object {"code", "message"}. */
static GBytes *
error_frame_new (guint code, const char *message)
{
  GString *frame = frame_begin ("pusher:error", NULL);

  g_string_append_printf (frame, ",\"data\":{\"code\":%u,\"message\":", code);
  legba_json_append_string (frame, message);
  g_string_append_c (frame, '}');
  return frame_end (frame);
}

void
hub_conn_error (LegbaHub * hub, LegbaHubConn * conn, guint code,
    const char *format, ...)
{
  g_autofree char *message = NULL;
  g_autoptr (GBytes) frame = NULL;
  va_list args;

  if (conn->closing)
    return;
  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  frame = error_frame_new (code, message);
  hub_count_error (hub, code);
  hub_conn_send (hub, conn, frame);
}

/* reason: short, a WebSocket close reason holds 123 bytes. */
void
hub_conn_close (LegbaHub * hub, LegbaHubConn * conn, guint16 code,
    const char *reason)
{
  if (conn->closing)
    return;
  conn->closing = TRUE;
  hub->transport.close (conn->handle, code, reason, hub->user_data);
}

/* pusher:error, then a close with the same code (counted once). */
static void
conn_fail (LegbaHub * hub, LegbaHubConn * conn, guint16 code,
    const char *message)
{
  hub_conn_error (hub, conn, code, "%s", message);
  hub_conn_close (hub, conn, code, message);
}

static void conn_destroy (LegbaHub * hub, LegbaHubConn * conn);

/* Every entry point that may reach the transport's callbacks runs between
 * hub_enter() and hub_leave(). */
void
hub_enter (LegbaHub * hub)
{
  hub->depth++;
}

/* Back to the transport: tear down the connections it reported closed
 * meanwhile (their presence departures may close nothing else, but any
 * connection closed on the way is torn down too). */
void
hub_leave (LegbaHub * hub)
{
  g_assert (hub->depth > 0);
  if (hub->depth == 1) {
    while (hub->closed_later->len > 0) {
      LegbaHubConn *conn = g_ptr_array_steal_index (hub->closed_later,
          hub->closed_later->len - 1);

      conn_destroy (hub, conn);
    }
  }
  hub->depth--;
}

/* ---- Apps, channels, members ---- */

ChannelKind
hub_channel_kind (const char *name)
{
  if (g_str_has_prefix (name, "private-encrypted-"))
    return CHANNEL_ENCRYPTED;
  if (g_str_has_prefix (name, "private-"))
    return CHANNEL_PRIVATE;
  if (g_str_has_prefix (name, "presence-"))
    return CHANNEL_PRESENCE;
  return CHANNEL_PUBLIC;
}

/* Pusher: channel names are [A-Za-z0-9_\-=@,.;]+ (164 characters at most
 * by default). */
gboolean
hub_channel_name_valid (const char *name, guint max_length)
{
  gsize len = 0;

  for (const char *p = name; *p; p++, len++)
    if (!g_ascii_isalnum (*p) && strchr ("_-=@,.;", *p) == NULL)
      return FALSE;
  return len > 0 && (max_length == 0 || len <= max_length);
}

static void
member_free (Member * member)
{
  g_free (member->user_id);
  g_free (member->user_info);
  g_free (member);
}

static Channel *
channel_new (const char *name)
{
  Channel *channel = g_new0 (Channel, 1);

  channel->name = g_strdup (name);
  channel->kind = hub_channel_kind (name);
  channel->subscriptions = g_ptr_array_new ();
  if (channel->kind == CHANNEL_PRESENCE) {
    channel->members = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
        (GDestroyNotify) member_free);
    g_queue_init (&channel->member_order);
  }
  return channel;
}

static void
channel_free (Channel * channel)
{
  g_ptr_array_unref (channel->subscriptions);
  g_clear_pointer (&channel->members, g_hash_table_unref);
  g_free (channel->name);
  g_free (channel);
}

/* Nobody here or on another instance: the channel is not occupied. */
static gboolean
channel_vacant (Channel * channel)
{
  return channel->subscriptions->len == 0 &&
      channel->n_remote_subscriptions == 0 &&
      (channel->members == NULL || g_hash_table_size (channel->members) == 0);
}

Channel *
hub_channel_get (LegbaHubApp * app, const char *name)
{
  Channel *channel = g_hash_table_lookup (app->channels, name);

  if (channel == NULL) {
    channel = channel_new (name);
    g_hash_table_insert (app->channels, channel->name, channel);
  }
  return channel;
}

void
hub_channel_release (LegbaHub * hub, LegbaHubApp * app, Channel * channel)
{
  gboolean vacant = channel_vacant (channel);

  if (vacant == channel->occupied && hub->observer.channel != NULL)
    hub->observer.channel (app, channel->name, !vacant, hub->observer_data);
  if (vacant && channel->occupied && hub->gate.vacated != NULL)
    hub->gate.vacated (app, channel->name, hub->gate_data);
  channel->occupied = !vacant;
  if (vacant)
    g_hash_table_remove (app->channels, channel->name);
}

Member *
hub_member_add (Channel * channel, char *user_id, char *user_info)
{
  Member *member = g_new0 (Member, 1);

  member->link.data = member;
  member->user_id = user_id;
  member->user_info = user_info;
  g_hash_table_insert (channel->members, member->user_id, member);
  g_queue_push_tail_link (&channel->member_order, &member->link);
  return member;
}

void
hub_relay_event (LegbaHub * hub, LegbaHubApp * app, const char *channel,
    GBytes * frame, const char *except_socket_id)
{
  if (hub->cluster.event != NULL)
    hub->cluster.event (app, channel, frame, except_socket_id,
        hub->cluster_data);
}

static void
app_free (LegbaHubApp * app)
{
  g_hash_table_unref (app->channels);
  g_hash_table_unref (app->users);
  g_clear_pointer (&app->count_changed, g_hash_table_unref);
  hub_cache_clear (app);
  hub_watchlist_clear (app);
  g_free (app->id);
  g_free (app->key);
  g_free (app->secret);
  g_free (app);
}

/* Every delivery to a channel goes through here: to its subscribers, or
 * for "#server-to-user-ID" to the connections signed in as ID. The frame is
 * serialized once; per recipient only transport->send runs. Returns the
 * number of recipients. */
guint
hub_deliver (LegbaHub * hub, LegbaHubApp * app,
    const char *channel_name, GBytes * frame, LegbaHubConn * except)
{
  guint n = 0;

  if (g_str_has_prefix (channel_name, SERVER_TO_USER_PREFIX)) {
    GPtrArray *conns = g_hash_table_lookup (app->users,
        channel_name + strlen (SERVER_TO_USER_PREFIX));

    for (guint i = 0; conns && i < conns->len; i++) {
      LegbaHubConn *conn = conns->pdata[i];

      if (conn == except || conn->closing)
        continue;
      hub->transport.send (conn->handle, frame, hub->user_data);
      n++;
    }
  } else {
    Channel *channel = g_hash_table_lookup (app->channels, channel_name);
    GPtrArray *subs = channel ? channel->subscriptions : NULL;

    for (guint i = 0; subs && i < subs->len; i++) {
      LegbaHubConn *conn = ((Subscription *) subs->pdata[i])->conn;

      if (conn == except || conn->closing)
        continue;
      hub->transport.send (conn->handle, frame, hub->user_data);
      n++;
    }
  }
  hub->counters.messages_out += n;
  hub->counters.bytes_out += g_bytes_get_size (frame) * (guint64) n;
  return n;
}

/* Pusher protocol 7: pusher_internal:member_removed, sent when the user's
 * last connection (in the cluster) leaves the channel. */
void
hub_presence_member_left (LegbaHub * hub, LegbaHubApp * app,
    Channel * channel, Member * member)
{
  g_queue_unlink (&channel->member_order, &member->link);
  if (hub->observer.member != NULL)
    hub->observer.member (app, channel->name, member->user_id, FALSE,
        hub->observer_data);
  if (channel->subscriptions->len > 0) {
    g_autoptr (GString) data = g_string_new ("{\"user_id\":");
    g_autoptr (GBytes) frame = NULL;

    legba_json_append_string (data, member->user_id);
    g_string_append_c (data, '}');
    frame = hub_frame_new ("pusher_internal:member_removed", channel->name,
        data->str);
    hub_deliver (hub, app, channel->name, frame, NULL);
  }
  g_hash_table_remove (channel->members, member->user_id);
}

/* ---- Connections ---- */

/* The user's first connection here: the user may come online. */
static void
conn_bind_user (LegbaHub * hub, LegbaHubConn * conn, const char *user_id)
{
  GPtrArray *conns = g_hash_table_lookup (conn->app->users, user_id);
  gboolean first = conns == NULL;

  if (first) {
    conns = g_ptr_array_new ();
    g_hash_table_insert (conn->app->users, g_strdup (user_id), conns);
  }
  conn->user_id = g_strdup (user_id);
  conn->user_index = conns->len;
  g_ptr_array_add (conns, conn);
  if (first)
    hub_user_local (hub, conn->app, user_id, TRUE);
}

/* The user's last connection here: the user may go offline. */
static void
conn_unbind_user (LegbaHub * hub, LegbaHubConn * conn)
{
  g_autofree char *user_id = NULL;
  GPtrArray *conns;

  hub_watchlist_detach (conn);
  if (conn->user_id == NULL)
    return;
  user_id = g_steal_pointer (&conn->user_id);
  conns = g_hash_table_lookup (conn->app->users, user_id);
  g_ptr_array_remove_index_fast (conns, conn->user_index);
  if (conn->user_index < conns->len)
    ((LegbaHubConn *) conns->pdata[conn->user_index])->user_index =
        conn->user_index;
  if (conns->len == 0) {
    g_hash_table_remove (conn->app->users, user_id);
    hub_user_local (hub, conn->app, user_id, FALSE);
  }
}

static LegbaHubConn *
conn_new (LegbaHub * hub, LegbaHubApp * app, gpointer handle)
{
  LegbaHubConn *conn = g_new0 (LegbaHubConn, 1);

  conn->app = app;
  conn->handle = handle;
  /* Pusher: the socket_id is two positive integers, unique per server. */
  do {
    g_free (conn->socket_id);
    conn->socket_id = g_strdup_printf ("%d.%d",
        g_random_int_range (1, G_MAXINT32), g_random_int_range (1, G_MAXINT32));
  } while (g_hash_table_contains (hub->conns_by_socket_id, conn->socket_id));
  conn->opened_at = conn->last_activity = hub_now (hub);

  conn->index = hub->conns->len;
  g_ptr_array_add (hub->conns, conn);
  g_hash_table_insert (hub->conns_by_socket_id, conn->socket_id, conn);
  app->n_connections++;
  hub->counters.connections_total++;
  return conn;
}

static void
conn_free (LegbaHubConn * conn)
{
  g_clear_pointer (&conn->more_subs, g_hash_table_unref);
  hub_gate_forget (conn, NULL);
  g_free (conn->socket_id);
  g_free (conn->user_id);
  g_strfreev (conn->watchlist);
  g_free (conn);
}

/* Unsubscribes conn everywhere (with presence departures) and frees it. */
static void
conn_destroy (LegbaHub * hub, LegbaHubConn * conn)
{
  g_autoptr (GPtrArray) subs = NULL;

  /* The application hears of it while the connection is whole. */
  if (hub->hooks.closed != NULL)
    hub->hooks.closed (conn, hub->hooks_data);
  subs = hub_conn_subs_list (conn);
  g_ptr_array_remove_index_fast (hub->conns, conn->index);
  if (conn->index < hub->conns->len)
    ((LegbaHubConn *) hub->conns->pdata[conn->index])->index = conn->index;
  g_hash_table_remove (hub->conns_by_socket_id, conn->socket_id);
  conn->app->n_connections--;
  conn_unbind_user (hub, conn);

  for (guint i = 0; i < subs->len; i++)
    hub_subscription_remove (hub, subs->pdata[i]);
  conn_free (conn);
}

/* ---- Client events and user sign-in ---- */

/* Pusher protocol 7 client events: only on private and presence channels
 * the sender has joined (not private-encrypted ones, whose data the server
 * cannot check), relayed to the other subscribers with "data" exactly as the
 * sender wrote it and, on presence channels, the sender's "user_id". */
static void
handle_client_event (LegbaHub * hub, LegbaHubConn * conn, const char *event,
    const char *name, const LegbaJsonSpan * data)
{
  const LegbaLimits *limits = &conn->app->limits;
  g_autoptr (GBytes) bytes = NULL;
  Subscription *sub;
  GString *out;
  gint64 now;

  if (name == NULL) {
    hub_conn_error (hub, conn, LEGBA_PUSHER_GENERIC,
        "Client events need a string \"channel\"");
    return;
  }
  if (strlen (event) > MAX_EVENT_NAME_LENGTH) {
    hub_conn_error (hub, conn, LEGBA_PUSHER_OVER_LIMIT,
        "Event names are at most %u bytes", MAX_EVENT_NAME_LENGTH);
    return;
  }
  sub = hub_conn_sub_lookup (conn, name);
  if (sub == NULL) {
    hub_conn_error (hub, conn, LEGBA_PUSHER_CLIENT_EVENT_REFUSED,
        "Client event rejected: not subscribed to the channel");
    return;
  }
  if (sub->channel->kind == CHANNEL_PUBLIC) {
    hub_conn_error (hub, conn, LEGBA_PUSHER_CLIENT_EVENT_REFUSED,
        "Client events are only supported on private and presence channels");
    return;
  }
  if (sub->channel->kind == CHANNEL_ENCRYPTED) {
    hub_conn_error (hub, conn, LEGBA_PUSHER_CLIENT_EVENT_REFUSED,
        "Client events are not supported on private-encrypted channels");
    return;
  }
  if (limits->max_event_bytes > 0 && data->len > limits->max_event_bytes) {
    hub_conn_error (hub, conn, LEGBA_PUSHER_OVER_LIMIT,
        "Client event data is %" G_GSIZE_FORMAT " bytes, over the limit of %"
        G_GSIZE_FORMAT, data->len, limits->max_event_bytes);
    return;
  }

  /* Pusher: client events per second per socket, counted in one-second
   * windows; over the limit the event is dropped, the socket kept. */
  now = hub_now (hub);
  if (now - conn->rate_window_start >= G_USEC_PER_SEC) {
    conn->rate_window_start = now;
    conn->rate_count = 0;
  }
  if (limits->client_events_per_second > 0 &&
      ++conn->rate_count > limits->client_events_per_second) {
    hub_conn_error (hub, conn, LEGBA_PUSHER_RATE_LIMITED,
        "Client event rejected due to rate limit");
    return;
  }
  if (hub->hooks.client_event != NULL &&
      !hub_hook_client_event (hub, conn, name, event, data,
          sub->member ? sub->member->user_id : NULL))
    return;

  out = frame_begin (event, name);
  if (data->start != NULL) {
    g_string_append (out, ",\"data\":");
    g_string_append_len (out, data->start, data->len);
  }
  if (sub->member != NULL) {
    g_string_append (out, ",\"user_id\":");
    legba_json_append_string (out, sub->member->user_id);
  }
  bytes = frame_end (out);
  hub->counters.client_events++;
  if (hub->observer.client_event != NULL) {
    g_autofree char *text = data->start ?
        g_strndup (data->start, data->len) : NULL;

    hub->observer.client_event (conn->app, name, event, text,
        conn->socket_id, sub->member ? sub->member->user_id : NULL,
        hub->observer_data);
  }
  /* The relay first: the other instances fan out while this one does. */
  hub_relay_event (hub, conn->app, name, bytes, NULL);
  hub_cache_store (hub, conn->app, name, bytes, TRUE);
  hub_deliver (hub, conn->app, name, bytes, conn);
}

/* Pusher protocol 7 user authentication: pusher:signin {auth, user_data},
 * auth signing "socket_id::user::user_data", user_data a JSON object with a
 * string "id" and, optionally, a "watchlist" of user ids. Success:
 * pusher:signin_success {user_data}; the connection then receives the
 * user's "#server-to-user-ID" events and its watchlist events. Any failure
 * is pusher:error 4009 and a close with 4009. */
static void
handle_signin (LegbaHub * hub, LegbaHubConn * conn, JsonObject * frame)
{
  LegbaHubApp *app = conn->app;
  g_autoptr (JsonNode) owned = NULL;
  g_autoptr (JsonNode) user = NULL;
  g_autoptr (GString) data = NULL;
  g_autoptr (GBytes) bytes = NULL;
  g_autofree char *error = NULL;
  g_autofree char *why = NULL;
  g_auto (GStrv) watchlist = NULL;
  JsonObject *signin = hub_frame_get_data (frame, &owned);
  const char *auth =
      signin ? legba_json_object_get_string (signin, "auth") : NULL;
  const char *user_data =
      signin ? legba_json_object_get_string (signin, "user_data") : NULL;
  const char *id = NULL;

  if (auth == NULL || user_data == NULL) {
    conn_fail (hub, conn, LEGBA_PUSHER_UNAUTHORIZED,
        "pusher:signin needs data {\"auth\", \"user_data\"}");
    return;
  }
  if (!legba_auth_user_check (app->key, app->secret, conn->socket_id,
          user_data, auth)) {
    conn_fail (hub, conn, LEGBA_PUSHER_UNAUTHORIZED,
        "Invalid signature for this socket_id and user_data");
    return;
  }
  user =
      legba_json_parse_strict (user_data, strlen (user_data), NULL, NULL,
      &error);
  if (user != NULL && JSON_NODE_HOLDS_OBJECT (user))
    id = legba_json_object_get_string (json_node_get_object (user), "id");
  if (id == NULL || *id == '\0') {
    conn_fail (hub, conn, LEGBA_PUSHER_UNAUTHORIZED,
        "user_data must be a JSON object with a string \"id\"");
    return;
  }
  if (!hub_watchlist_parse (json_node_get_object (user),
          app->limits.max_watchlist_users, &watchlist, &why)) {
    hub->counters.watchlist_refusals++;
    conn_fail (hub, conn, LEGBA_PUSHER_UNAUTHORIZED, why);
    return;
  }

  conn_unbind_user (hub, conn);
  conn_bind_user (hub, conn, id);
  data = g_string_new ("{\"user_data\":");
  legba_json_append_string (data, user_data);
  g_string_append_c (data, '}');
  bytes = hub_frame_new ("pusher:signin_success", NULL, data->str);
  hub_conn_send (hub, conn, bytes);
  hub_watchlist_attach (hub, conn, g_steal_pointer (&watchlist));
}

/* ---- Frames from clients ---- */

/* The members conn_handle_frame() reads from the frame's text itself. */
enum
{
  FRAME_DATA,
  FRAME_EVENT,
  FRAME_CHANNEL,
  N_FRAME_SPANS
};

/* The frames that come most, client events and pings, are handled from
 * the text's checked spans when their event and channel are plain
 * strings; json-glib builds a tree for the others (and for these when
 * written with escapes), which the same checks then pass again. */
static gboolean
conn_handle_plain_frame (LegbaHub * hub, LegbaHubConn * conn,
    const LegbaJsonSpan * spans)
{
  /* longer ones take the tree's way, and its errors */
  char event[MAX_EVENT_NAME_LENGTH + 1];
  char name[256];

  if (!legba_json_span_get_plain_string (&spans[FRAME_EVENT], event,
          sizeof event))
    return FALSE;
  if (g_str_equal (event, "pusher:ping")) {
    hub_conn_send (hub, conn, hub->pong_frame);
    return TRUE;
  }
  if (!g_str_has_prefix (event, "client-") ||
      !legba_json_span_get_plain_string (&spans[FRAME_CHANNEL], name,
          sizeof name))
    return FALSE;
  handle_client_event (hub, conn, event, name, &spans[FRAME_DATA]);
  return TRUE;
}

static void
conn_handle_frame (LegbaHub * hub, LegbaHubConn * conn, const char *text,
    gsize len)
{
  static const char *const keys[] = { "data", "event", "channel", NULL };
  gsize max_bytes = conn->app->limits.max_frame_bytes;
  LegbaJsonSpan spans[N_FRAME_SPANS];
  const LegbaJsonSpan *data = &spans[FRAME_DATA];
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *error = NULL;
  JsonObject *frame;
  const char *event;

  if (max_bytes > 0 && len > max_bytes) {
    hub_conn_error (hub, conn, LEGBA_PUSHER_OVER_LIMIT,
        "Frame of %" G_GSIZE_FORMAT " bytes is over the limit of %"
        G_GSIZE_FORMAT, len, max_bytes);
    return;
  }
  if (!legba_json_check_strict (text, len, keys, spans, &error)) {
    hub_conn_error (hub, conn, LEGBA_PUSHER_GENERIC, "Bad frame: %s", error);
    return;
  }
  if (conn_handle_plain_frame (hub, conn, spans))
    return;
  root = legba_json_parse_strict (text, len, keys, spans, &error);
  if (root == NULL) {
    hub_conn_error (hub, conn, LEGBA_PUSHER_GENERIC, "Bad frame: %s", error);
    return;
  }
  if (!JSON_NODE_HOLDS_OBJECT (root)) {
    hub_conn_error (hub, conn, LEGBA_PUSHER_GENERIC,
        "A frame must be a JSON object");
    return;
  }
  frame = json_node_get_object (root);
  event = legba_json_object_get_string (frame, "event");
  if (event == NULL) {
    hub_conn_error (hub, conn, LEGBA_PUSHER_GENERIC,
        "A frame needs a string \"event\"");
    return;
  }

  if (g_str_equal (event, "pusher:ping"))
    hub_conn_send (hub, conn, hub->pong_frame);
  else if (g_str_equal (event, "pusher:pong"))
    return;                     /* conn_touch() cleared the pending ping */
  else if (g_str_equal (event, "pusher:subscribe"))
    hub_handle_subscribe (hub, conn, frame);
  else if (g_str_equal (event, "pusher:unsubscribe"))
    hub_handle_unsubscribe (hub, conn, frame);
  else if (g_str_equal (event, "pusher:signin"))
    handle_signin (hub, conn, frame);
  else if (g_str_has_prefix (event, "client-"))
    handle_client_event (hub, conn, event,
        legba_json_object_get_string (frame, "channel"), data);
  else
    hub_conn_error (hub, conn, LEGBA_PUSHER_GENERIC, "Unknown event \"%.64s\": "
        "clients send pusher: protocol events and client- events", event);
}

/* Any frame from the client shows it is alive. */
static void
conn_touch (LegbaHub * hub, LegbaHubConn * conn)
{
  conn->last_activity = hub_now (hub);
  conn->ping_pending = FALSE;
}

void
legba_hub_receive (LegbaHub * hub, LegbaHubConn * conn, const char *text,
    gsize len)
{
  g_return_if_fail (hub != NULL);
  g_return_if_fail (conn != NULL);
  g_return_if_fail (text != NULL || len == 0);

  hub->counters.messages_in++;
  hub->counters.bytes_in += len;
  if (conn->closing)
    return;
  conn_touch (hub, conn);
  hub_enter (hub);
  conn_handle_frame (hub, conn, text ? text : "", len);
  hub_leave (hub);
}

void
legba_hub_receive_binary (LegbaHub * hub, LegbaHubConn * conn)
{
  g_return_if_fail (hub != NULL);
  g_return_if_fail (conn != NULL);

  hub->counters.messages_in++;
  if (conn->closing)
    return;
  conn_touch (hub, conn);
  hub_enter (hub);
  hub_conn_error (hub, conn, LEGBA_PUSHER_GENERIC,
      "Binary frames are not supported: send JSON text frames");
  hub_leave (hub);
}

/* ---- Connections: open, close, housekeeping ---- */

/* Refuses a WebSocket before it becomes a connection: pusher:error, then a
 * close with the same code. */
static void
hub_refuse (LegbaHub * hub, gpointer handle, guint16 code, const char *message)
{
  g_autoptr (GBytes) frame = error_frame_new (code, message);

  hub_count_error (hub, code);
  hub_send (hub, handle, frame);
  hub->transport.close (handle, code, message, hub->user_data);
}

/* Pusher protocol 7: pusher:connection_established, data {"socket_id",
 * "activity_timeout"}, plus the client event limits of
 * docs/room-protocol.md §4. */
static void
conn_send_established (LegbaHub * hub, LegbaHubConn * conn)
{
  const LegbaLimits *limits = &conn->app->limits;
  g_autofree char *data = NULL;
  g_autoptr (GBytes) frame = NULL;

  data = g_strdup_printf ("{\"socket_id\":\"%s\",\"activity_timeout\":%u,"
      "\"limits\":{\"client_event_bytes\":%" G_GSIZE_FORMAT ","
      "\"client_events_per_second\":%u}}", conn->socket_id,
      limits->activity_timeout, limits->max_event_bytes,
      limits->client_events_per_second);
  frame = hub_frame_new ("pusher:connection_established", NULL, data);
  hub_conn_send (hub, conn, frame);
}

LegbaHubConn *
legba_hub_open (LegbaHub * hub, const char *app_key, const char *protocol,
    gpointer handle)
{
  LegbaHubApp *app;
  LegbaHubConn *conn = NULL;
  guint64 version = 0;

  g_return_val_if_fail (hub != NULL, NULL);

  app = app_key ? g_hash_table_lookup (hub->apps_by_key, app_key) : NULL;
  hub_enter (hub);
  if (app == NULL) {
    hub_refuse (hub, handle, LEGBA_PUSHER_APP_NOT_FOUND,
        "Application does not exist");
  } else if (protocol == NULL) {
    hub_refuse (hub, handle, LEGBA_PUSHER_NO_PROTOCOL,
        "No protocol version given (use ?protocol=7)");
  } else if (!g_ascii_string_to_unsigned (protocol, 10, 0, G_MAXUINT,
          &version, NULL)) {
    hub_refuse (hub, handle, LEGBA_PUSHER_INVALID_VERSION,
        "Invalid protocol version (use ?protocol=7)");
  } else if (version < 5 || version > 7) {
    /* Protocols 5 to 7 share the frames this hub speaks. */
    hub_refuse (hub, handle, LEGBA_PUSHER_UNSUPPORTED_PROTOCOL,
        "Unsupported protocol version (use ?protocol=7)");
  } else if (app->limits.max_connections > 0 &&
      app->n_connections >= app->limits.max_connections) {
    hub_refuse (hub, handle, LEGBA_PUSHER_OVER_CONNECTION_QUOTA,
        "Over the connection quota of this application");
  } else {
    conn = conn_new (hub, app, handle);
    conn_send_established (hub, conn);
  }
  hub_leave (hub);
  return conn;
}

void
legba_hub_conn_closed (LegbaHub * hub, LegbaHubConn * conn)
{
  g_return_if_fail (hub != NULL);
  g_return_if_fail (conn != NULL);
  g_return_if_fail (!conn->closed);

  conn->closed = TRUE;
  conn->closing = TRUE;
  hub_enter (hub);
  g_ptr_array_add (hub->closed_later, conn);
  hub_leave (hub);
}

const char *
legba_hub_conn_get_socket_id (LegbaHubConn * conn)
{
  g_return_val_if_fail (conn != NULL, NULL);
  return conn->socket_id;
}

gpointer
legba_hub_conn_get_handle (LegbaHubConn * conn)
{
  g_return_val_if_fail (conn != NULL, NULL);
  return conn->handle;
}

LegbaHubApp *
legba_hub_conn_get_app (LegbaHubConn * conn)
{
  g_return_val_if_fail (conn != NULL, NULL);
  return conn->app;
}

const char *
legba_hub_conn_get_user_id (LegbaHubConn * conn)
{
  g_return_val_if_fail (conn != NULL, NULL);
  return conn->user_id;
}

/* Pusher protocol 7: the server pings a connection silent for
 * activity_timeout and closes it with 4201 when no frame comes back within
 * pong_timeout; with signin_timeout set, connections not signed in by then
 * are closed with 4009. */
static void
conn_tick (LegbaHub * hub, LegbaHubConn * conn, gint64 now)
{
  const LegbaLimits *limits = &conn->app->limits;

  if (limits->signin_timeout > 0 && conn->user_id == NULL &&
      now - conn->opened_at >=
      (gint64) limits->signin_timeout * G_USEC_PER_SEC) {
    conn_fail (hub, conn, LEGBA_PUSHER_UNAUTHORIZED,
        "Not signed in within the sign-in timeout");
  } else if (conn->ping_pending) {
    if (now - conn->ping_sent_at >=
        (gint64) limits->pong_timeout * G_USEC_PER_SEC) {
      hub_count_error (hub, LEGBA_PUSHER_PONG_NOT_RECEIVED);
      hub_conn_close (hub, conn, LEGBA_PUSHER_PONG_NOT_RECEIVED,
          "Pong reply not received");
    }
  } else if (limits->activity_timeout > 0 && now - conn->last_activity >=
      (gint64) limits->activity_timeout * G_USEC_PER_SEC) {
    conn->ping_pending = TRUE;
    conn->ping_sent_at = now;
    hub_conn_send (hub, conn, hub->ping_frame);
  }
}

void
legba_hub_tick (LegbaHub * hub)
{
  gint64 now;

  g_return_if_fail (hub != NULL);

  now = hub_now (hub);
  hub_enter (hub);
  for (guint i = 0; i < hub->conns->len; i++) {
    LegbaHubConn *conn = hub->conns->pdata[i];

    if (!conn->closing)
      conn_tick (hub, conn, now);
  }
  hub_count_flush (hub);
  hub_cache_expire (hub);
  hub_leave (hub);
}

void
legba_hub_close_all (LegbaHub * hub, guint16 code, const char *reason)
{
  g_return_if_fail (hub != NULL);

  hub_enter (hub);
  for (guint i = 0; i < hub->conns->len; i++)
    hub_conn_close (hub, hub->conns->pdata[i], code, reason ? reason : "");
  hub_leave (hub);
}

/* ---- The hub and its apps ---- */

static gint64
default_now (gpointer user_data)
{
  return g_get_monotonic_time ();
}

LegbaHub *
legba_hub_new (const LegbaHubTransport * transport, gpointer user_data)
{
  LegbaHub *hub;

  g_return_val_if_fail (transport != NULL, NULL);
  g_return_val_if_fail (transport->send != NULL, NULL);
  g_return_val_if_fail (transport->close != NULL, NULL);

  hub = g_new0 (LegbaHub, 1);
  hub->transport = *transport;
  hub->user_data = user_data;
  legba_limits_init_defaults (&hub->limits);
  hub->apps_by_id = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
      (GDestroyNotify) app_free);
  hub->retired_apps = g_ptr_array_new_with_free_func ((GDestroyNotify)
      app_free);
  hub->apps_by_key = g_hash_table_new (g_str_hash, g_str_equal);
  hub->conns = g_ptr_array_new ();
  hub->conns_by_socket_id = g_hash_table_new (g_str_hash, g_str_equal);
  hub->now = default_now;
  hub->ping_frame = hub_frame_new ("pusher:ping", NULL, "{}");
  hub->pong_frame = hub_frame_new ("pusher:pong", NULL, "{}");
  hub->closed_later = g_ptr_array_new ();
  return hub;
}

void
legba_hub_free (LegbaHub * hub)
{
  g_return_if_fail (hub != NULL);
  g_return_if_fail (hub->depth == 0);

  for (guint i = 0; i < hub->conns->len; i++) {
    LegbaHubConn *conn = hub->conns->pdata[i];
    g_autoptr (GPtrArray) subs = hub_conn_subs_list (conn);

    for (guint k = 0; k < subs->len; k++)
      g_free (subs->pdata[k]);
    conn_free (conn);
  }
  g_ptr_array_unref (hub->conns);
  g_ptr_array_unref (hub->closed_later);
  g_hash_table_unref (hub->conns_by_socket_id);
  g_hash_table_unref (hub->apps_by_key);
  g_hash_table_unref (hub->apps_by_id);
  g_ptr_array_unref (hub->retired_apps);
  g_bytes_unref (hub->ping_frame);
  g_bytes_unref (hub->pong_frame);
  g_strfreev (hub->turn_urls);
  g_free (hub->turn_secret);
  g_free (hub);
}

void
legba_hub_set_turn (LegbaHub * hub, const char *const *urls,
    const char *secret, guint ttl_s)
{
  g_return_if_fail (hub != NULL);

  g_clear_pointer (&hub->turn_urls, g_strfreev);
  g_clear_pointer (&hub->turn_secret, g_free);
  hub->turn_ttl = ttl_s;
  if (urls == NULL || urls[0] == NULL || secret == NULL || *secret == '\0')
    return;
  hub->turn_urls = g_strdupv ((char **) urls);
  hub->turn_secret = g_strdup (secret);
}

gboolean
legba_hub_append_ice_servers (LegbaHub * hub, GString * out,
    const char *user_id, gint64 now_s)
{
  g_return_val_if_fail (hub != NULL, FALSE);
  g_return_val_if_fail (out != NULL && user_id != NULL, FALSE);

  if (hub->turn_urls == NULL)
    return FALSE;
  legba_turn_append_ice_servers (out, (const char *const *) hub->turn_urls,
      hub->turn_secret, hub->turn_ttl, user_id, now_s);
  return TRUE;
}

void
legba_hub_set_limits (LegbaHub * hub, const LegbaLimits * limits)
{
  g_return_if_fail (hub != NULL);
  g_return_if_fail (limits != NULL);
  hub->limits = *limits;
}

const LegbaLimits *
legba_hub_get_limits (LegbaHub * hub)
{
  g_return_val_if_fail (hub != NULL, NULL);
  return &hub->limits;
}

gboolean
legba_hub_add_app (LegbaHub * hub, const char *id, const char *key,
    const char *secret, GError ** error)
{
  LegbaHubApp *app;

  g_return_val_if_fail (hub != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (id == NULL || *id == '\0' || key == NULL || *key == '\0' ||
      secret == NULL || *secret == '\0') {
    g_set_error_literal (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_INVALID,
        "An app needs a non-empty id, key and secret");
    return FALSE;
  }
  if (g_hash_table_contains (hub->apps_by_id, id)) {
    g_set_error (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_EXISTS,
        "App id %s is already taken", id);
    return FALSE;
  }
  if (g_hash_table_contains (hub->apps_by_key, key)) {
    g_set_error (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_EXISTS,
        "App key %s is already taken", key);
    return FALSE;
  }

  app = g_new0 (LegbaHubApp, 1);
  app->id = g_strdup (id);
  app->key = g_strdup (key);
  app->secret = g_strdup (secret);
  app->limits = hub->limits;
  app->channels = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
      (GDestroyNotify) channel_free);
  app->users = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      (GDestroyNotify) g_ptr_array_unref);
  hub_cache_init (app);
  hub_watchlist_init (app);
  g_hash_table_insert (hub->apps_by_id, app->id, app);
  g_hash_table_insert (hub->apps_by_key, app->key, app);
  return TRUE;
}

LegbaHubApp *
legba_hub_find_app_by_id (LegbaHub * hub, const char *id)
{
  g_return_val_if_fail (hub != NULL, NULL);
  return id ? g_hash_table_lookup (hub->apps_by_id, id) : NULL;
}

LegbaHubApp *
legba_hub_find_app_by_key (LegbaHub * hub, const char *key)
{
  g_return_val_if_fail (hub != NULL, NULL);
  return key ? g_hash_table_lookup (hub->apps_by_key, key) : NULL;
}

const char *
legba_hub_app_get_id (LegbaHubApp * app)
{
  g_return_val_if_fail (app != NULL, NULL);
  return app->id;
}

const char *
legba_hub_app_get_key (LegbaHubApp * app)
{
  g_return_val_if_fail (app != NULL, NULL);
  return app->key;
}

const char *
legba_hub_app_get_secret (LegbaHubApp * app)
{
  g_return_val_if_fail (app != NULL, NULL);
  return app->secret;
}

const LegbaLimits *
legba_hub_app_get_limits (LegbaHubApp * app)
{
  g_return_val_if_fail (app != NULL, NULL);
  return &app->limits;
}

guint
legba_hub_app_get_connection_count (LegbaHubApp * app)
{
  g_return_val_if_fail (app != NULL, 0);
  return app->n_connections;
}

void
legba_hub_set_clock (LegbaHub * hub, gint64 (*now) (gpointer),
    gpointer user_data)
{
  g_return_if_fail (hub != NULL);
  hub->now = now ? now : default_now;
  hub->now_data = now ? user_data : NULL;
}

const LegbaHubCounters *
legba_hub_get_counters (LegbaHub * hub)
{
  g_return_val_if_fail (hub != NULL, NULL);
  return &hub->counters;
}

guint
legba_hub_get_connection_count (LegbaHub * hub)
{
  g_return_val_if_fail (hub != NULL, 0);
  return hub->conns->len;
}

guint
legba_hub_get_subscription_count (LegbaHub * hub)
{
  g_return_val_if_fail (hub != NULL, 0);
  return hub->n_subscriptions;
}
