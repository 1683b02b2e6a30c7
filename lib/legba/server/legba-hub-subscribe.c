/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub: a connection's subscriptions, and pusher:subscribe and
 * pusher:unsubscribe (authorization, presence data, the limits, the
 * answers), for legba-hub.c's state machine.
 */
#include <legba/server/legba-hub-private.h>

#include <legba/common/legba-auth.h>
#include <legba/common/legba-json.h>

#include <string.h>

/* ---- A connection's subscriptions ---- */

Subscription *
hub_conn_sub_lookup (LegbaHubConn * conn, const char *name)
{
  if (conn->first_sub != NULL &&
      strcmp (conn->first_sub->channel->name, name) == 0)
    return conn->first_sub;
  return conn->more_subs ? g_hash_table_lookup (conn->more_subs, name) : NULL;
}

/* sub's channel is not among conn's subscriptions yet. */
static void
conn_sub_add (LegbaHubConn * conn, Subscription * sub)
{
  conn->n_subs++;
  if (conn->first_sub == NULL) {
    conn->first_sub = sub;
    return;
  }
  if (conn->more_subs == NULL)
    conn->more_subs = g_hash_table_new (g_str_hash, g_str_equal);
  g_hash_table_insert (conn->more_subs, sub->channel->name, sub);
}

static void
conn_sub_remove (LegbaHubConn * conn, Subscription * sub)
{
  conn->n_subs--;
  if (conn->first_sub == sub)
    conn->first_sub = NULL;
  else if (conn->more_subs != NULL)
    g_hash_table_remove (conn->more_subs, sub->channel->name);
}

/* A new array of conn's subscriptions, to go through while they change. */
GPtrArray *
hub_conn_subs_list (LegbaHubConn * conn)
{
  GPtrArray *subs = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer sub;

  if (conn->first_sub != NULL)
    g_ptr_array_add (subs, conn->first_sub);
  if (conn->more_subs != NULL) {
    g_hash_table_iter_init (&iter, conn->more_subs);
    while (g_hash_table_iter_next (&iter, NULL, &sub))
      g_ptr_array_add (subs, sub);
  }
  return subs;
}

void
hub_subscription_remove (LegbaHub * hub, Subscription * sub)
{
  LegbaHubConn *conn = sub->conn;
  LegbaHubApp *app = conn->app;
  Channel *channel = sub->channel;
  Member *member = sub->member;
  GPtrArray *subs = channel->subscriptions;

  conn_sub_remove (conn, sub);
  g_ptr_array_remove_index_fast (subs, sub->index);
  if (sub->index < subs->len)
    ((Subscription *) subs->pdata[sub->index])->index = sub->index;
  hub->n_subscriptions--;
  g_free (sub);

  if (hub->cluster.subscriptions != NULL)
    hub->cluster.subscriptions (app, channel->name, subs->len,
        hub->cluster_data);
  hub_count_changed (app, channel);
  if (member != NULL && --member->n_subscriptions == 0) {
    if (hub->cluster.member != NULL)
      hub->cluster.member (app, channel->name, member->user_id, NULL, FALSE,
          hub->cluster_data);
    if (hub->gate.left != NULL)
      hub->gate.left (app, channel->name, member->user_id, hub->gate_data);
    if (member->n_remote == 0)
      hub_presence_member_left (hub, app, channel, member);
  }
  hub_channel_release (hub, app, channel);
}

/* ---- Subscriptions (pusher:subscribe, pusher:unsubscribe) ---- */

/* The data of a pusher: event: an object, or a string holding one (servers
 * and clients differ in what they send). */
JsonObject *
hub_frame_get_data (JsonObject * frame, JsonNode ** owned)
{
  JsonNode *node = json_object_get_member (frame, "data");
  g_autofree char *error = NULL;
  const char *text;

  if (node != NULL && JSON_NODE_HOLDS_OBJECT (node))
    return json_node_get_object (node);
  text = legba_json_object_get_string (frame, "data");
  if (text == NULL)
    return NULL;
  *owned = legba_json_parse_strict (text, strlen (text), NULL, NULL, &error);
  if (*owned == NULL || !JSON_NODE_HOLDS_OBJECT (*owned))
    return NULL;
  return json_node_get_object (*owned);
}

/* Pusher protocol 7: a refused subscription is answered with
 * pusher:subscription_error on that channel (pusher-js emits it on the
 * channel object), data {"type", "error", "status"}; nothing else is sent
 * to the channel. */
void
hub_conn_subscription_error (LegbaHub * hub, LegbaHubConn * conn,
    const char *channel, const char *type, guint status,
    const char *format, ...)
{
  g_autofree char *message = NULL;
  g_autoptr (GString) data = g_string_new ("{\"type\":");
  g_autoptr (GBytes) frame = NULL;
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  legba_json_append_string (data, type);
  g_string_append (data, ",\"error\":");
  legba_json_append_string (data, message);
  g_string_append_printf (data, ",\"status\":%u}", status);
  frame = hub_frame_new ("pusher:subscription_error", channel, data->str);
  hub->counters.subscription_errors++;
  hub_conn_send (hub, conn, frame);
}

/* The room channels of docs/room-protocol.md §2 */
#define ROOM_CHANNEL_PREFIX "presence-legba."

/* Pusher protocol 7: pusher_internal:subscription_succeeded, data "{}" or
 * for presence {"presence": {"ids", "hash", "count"}}, ids in join order.
 * A member of a room channel (its presence authorized, user_id its
 * participant id) also gets "ice_servers" when TURN is configured: it
 * goes to this connection only, never to a public or private channel's
 * subscriber. */
static void
conn_subscription_succeeded (LegbaHub * hub, LegbaHubConn * conn,
    Channel * channel, const char *user_id)
{
  g_autoptr (GString) data = NULL;
  g_autoptr (GBytes) frame = NULL;
  GList *l;

  if (channel->kind != CHANNEL_PRESENCE) {
    data = g_string_new ("{}");
  } else {
    data = g_string_new ("{\"presence\":{\"ids\":[");
    for (l = channel->member_order.head; l != NULL; l = l->next) {
      if (l != channel->member_order.head)
        g_string_append_c (data, ',');
      legba_json_append_string (data, ((Member *) l->data)->user_id);
    }
    g_string_append (data, "],\"hash\":{");
    for (l = channel->member_order.head; l != NULL; l = l->next) {
      Member *member = l->data;

      if (l != channel->member_order.head)
        g_string_append_c (data, ',');
      legba_json_append_string (data, member->user_id);
      g_string_append_c (data, ':');
      g_string_append (data, member->user_info ? member->user_info : "null");
    }
    g_string_append_printf (data, "},\"count\":%u}",
        channel->member_order.length);
    if (user_id != NULL && hub->turn_urls != NULL &&
        g_str_has_prefix (channel->name, ROOM_CHANNEL_PREFIX)) {
      g_string_append (data, ",\"ice_servers\":");
      legba_hub_append_ice_servers (hub, data, user_id,
          g_get_real_time () / G_USEC_PER_SEC);
    }
    g_string_append_c (data, '}');
  }
  frame =
      hub_frame_new ("pusher_internal:subscription_succeeded", channel->name,
      data->str);
  hub_conn_send (hub, conn, frame);
}

/* Pusher protocol 7 presence channel_data: {"user_id": string or number,
 * "user_info": any (optional)}. A numeric id is kept as written. Returns
 * NULL, or the subscription_error type with *why set. */
static const char *
presence_data_parse (const char *text, gsize max_info_bytes, char **user_id,
    char **user_info, char **why)
{
  static const char *const keys[] = { "user_id", "user_info", NULL };
  LegbaJsonSpan spans[2] = { {NULL, 0}, {NULL, 0} };
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *error = NULL;
  JsonNode *id = NULL;
  GType type = G_TYPE_INVALID;

  root = legba_json_parse_strict (text, strlen (text), keys, spans, &error);
  if (root != NULL && JSON_NODE_HOLDS_OBJECT (root))
    id = json_object_get_member (json_node_get_object (root), "user_id");
  if (id != NULL && JSON_NODE_HOLDS_VALUE (id))
    type = json_node_get_value_type (id);

  if (type == G_TYPE_STRING && *json_node_get_string (id) != '\0') {
    *user_id = g_strdup (json_node_get_string (id));
  } else if ((type == G_TYPE_INT64 || type == G_TYPE_DOUBLE) && spans[0].start) {
    *user_id = g_strndup (spans[0].start, spans[0].len);
  } else {
    *why = g_strdup ("channel_data must be a JSON object with a \"user_id\" "
        "(a non-empty string or a number)");
    return "InvalidChannelData";
  }
  if (spans[1].start != NULL) {
    if (max_info_bytes > 0 && spans[1].len > max_info_bytes) {
      *why = g_strdup_printf ("user_info is %" G_GSIZE_FORMAT " bytes, over "
          "the limit of %" G_GSIZE_FORMAT, spans[1].len, max_info_bytes);
      g_clear_pointer (user_id, g_free);
      return "LimitReached";
    }
    *user_info = g_strndup (spans[1].start, spans[1].len);
  }
  return NULL;
}

/* Checks auth (and presence channel_data) of a private or presence
 * subscription; on failure sends the subscription_error. */
static gboolean
subscribe_authorize (LegbaHub * hub, LegbaHubConn * conn, JsonObject * data,
    const char *name, char **user_id, char **user_info)
{
  LegbaHubApp *app = conn->app;
  gboolean presence = hub_channel_kind (name) == CHANNEL_PRESENCE;
  const char *auth = legba_json_object_get_string (data, "auth");
  const char *channel_data =
      legba_json_object_get_string (data, "channel_data");
  g_autofree char *why = NULL;
  const char *type;

  if (presence && channel_data == NULL) {
    hub_conn_subscription_error (hub, conn, name, "InvalidChannelData", 400,
        "Presence channels need \"channel_data\", a JSON string");
    return FALSE;
  }
  if (auth == NULL) {
    hub_conn_subscription_error (hub, conn, name, "AuthError", 401,
        "Private and presence channels need \"auth\"");
    return FALSE;
  }
  if (!legba_auth_channel_check (app->key, app->secret, conn->socket_id, name,
          presence ? channel_data : NULL, auth)) {
    hub_conn_subscription_error (hub, conn, name, "AuthError", 401,
        "Invalid signature for this socket_id and channel");
    return FALSE;
  }
  if (!presence)
    return TRUE;
  type = presence_data_parse (channel_data, app->limits.max_user_info_bytes,
      user_id, user_info, &why);
  if (type != NULL) {
    hub_conn_subscription_error (hub, conn, name, type, 400, "%s", why);
    return FALSE;
  }
  return TRUE;
}

/* Pusher protocol 7: pusher_internal:member_added to the channel's other
 * subscribers when a user's first connection (in the cluster) joins. */
void
hub_presence_member_joined (LegbaHub * hub, LegbaHubApp * app,
    Channel * channel, Member * member, LegbaHubConn * except)
{
  g_autoptr (GString) data = g_string_new ("{\"user_id\":");
  g_autoptr (GBytes) frame = NULL;

  legba_json_append_string (data, member->user_id);
  if (member->user_info != NULL) {
    g_string_append (data, ",\"user_info\":");
    g_string_append (data, member->user_info);
  }
  g_string_append_c (data, '}');
  if (hub->observer.member != NULL)
    hub->observer.member (app, channel->name, member->user_id, TRUE,
        hub->observer_data);
  frame =
      hub_frame_new ("pusher_internal:member_added", channel->name, data->str);
  hub_deliver (hub, app, channel->name, frame, except);
}

/* FALSE, with the subscription_error sent, when user_id would be one
 * member too many in the presence channel name. */
static gboolean
presence_has_room (LegbaHub * hub, LegbaHubConn * conn, const char *name,
    const char *user_id, Member ** member)
{
  guint cap = conn->app->limits.max_presence_members;
  Channel *channel = g_hash_table_lookup (conn->app->channels, name);

  *member = NULL;
  if (user_id == NULL || channel == NULL)
    return TRUE;
  *member = g_hash_table_lookup (channel->members, user_id);
  if (*member == NULL && cap > 0 && channel->member_order.length >= cap) {
    hub_conn_subscription_error (hub, conn, name, "LimitReached", 403,
        "Presence channel is full (%u members)", cap);
    return FALSE;
  }
  return TRUE;
}

gboolean
hub_subscription_add (LegbaHub * hub, LegbaHubConn * conn, const char *name,
    char **user_id, char **user_info, GBytes * first)
{
  LegbaHubApp *app = conn->app;
  Channel *channel;
  Member *member = NULL;
  gboolean joined = FALSE;
  Subscription *sub;

  if (!presence_has_room (hub, conn, name, *user_id, &member))
    return FALSE;
  channel = hub_channel_get (app, name);
  sub = g_new0 (Subscription, 1);
  sub->conn = conn;
  sub->channel = channel;
  sub->index = channel->subscriptions->len;
  g_ptr_array_add (channel->subscriptions, sub);
  conn_sub_add (conn, sub);
  hub->n_subscriptions++;

  if (*user_id != NULL) {
    if (member == NULL) {
      member = hub_member_add (channel, g_steal_pointer (user_id),
          g_steal_pointer (user_info));
      joined = TRUE;
    }
    /* The user's first connection here: the other instances learn of it,
     * with the user_info this connection brought. */
    if (member->n_subscriptions++ == 0 && hub->cluster.member != NULL)
      hub->cluster.member (app, name, member->user_id,
          *user_info ? *user_info : member->user_info, TRUE, hub->cluster_data);
    sub->member = member;
  }
  if (hub->cluster.subscriptions != NULL)
    hub->cluster.subscriptions (app, name, channel->subscriptions->len,
        hub->cluster_data);
  hub_count_changed (app, channel);
  hub_channel_release (hub, app, channel);
  if (joined)
    hub_presence_member_joined (hub, app, channel, member, conn);
  if (first != NULL)
    hub_conn_send (hub, conn, first);
  conn_subscription_succeeded (hub, conn, channel,
      member ? member->user_id : NULL);
  if (hub->hooks.subscribed != NULL)
    hub_hook_subscribed (hub, conn, name, member ? member->user_id : NULL,
        TRUE);
  /* Pusher: the cached event (or pusher:cache_miss) comes right after. */
  hub_cache_subscribed (hub, conn, channel);
  return TRUE;
}

/* Pusher protocol 7 user authentication: once signed in, pusher-js
 * subscribes to the user's own "#server-to-user-ID" (with an empty auth)
 * and waits for its pusher_internal:subscription_succeeded. The user's
 * events reach the connection through its sign-in whether it subscribes
 * or not, so this holds no subscription; any other socket is refused. */
static void
subscribe_server_to_user (LegbaHub * hub, LegbaHubConn * conn, const char *name)
{
  g_autoptr (GBytes) frame = NULL;

  if (conn->user_id == NULL ||
      strcmp (name + strlen (SERVER_TO_USER_PREFIX), conn->user_id) != 0) {
    hub_conn_subscription_error (hub, conn, name, "InvalidChannel", 403,
        SERVER_TO_USER_PREFIX "ID is the channel of the connections signed "
        "in as ID");
    return;
  }
  frame = hub_frame_new ("pusher_internal:subscription_succeeded", name, "{}");
  hub_conn_send (hub, conn, frame);
}

void
hub_handle_subscribe (LegbaHub * hub, LegbaHubConn * conn, JsonObject * frame)
{
  guint max_length = conn->app->limits.max_channel_name_length;
  guint max_channels = conn->app->limits.max_channels_per_socket;
  g_autoptr (JsonNode) owned = NULL;
  g_autofree char *user_id = NULL;
  g_autofree char *user_info = NULL;
  JsonObject *data = hub_frame_get_data (frame, &owned);
  const char *name =
      data ? legba_json_object_get_string (data, "channel") : NULL;
  Subscription *sub;

  if (data == NULL) {
    hub_conn_error (hub, conn, LEGBA_PUSHER_GENERIC,
        "pusher:subscribe needs data {\"channel\": ...}");
    return;
  }
  if (name == NULL) {
    hub_conn_error (hub, conn, LEGBA_PUSHER_GENERIC,
        "pusher:subscribe needs a string \"channel\"");
    return;
  }
  if (g_str_has_prefix (name, SERVER_TO_USER_PREFIX)) {
    subscribe_server_to_user (hub, conn, name);
    return;
  }
  if (!hub_channel_name_valid (name, max_length)) {
    hub_conn_subscription_error (hub, conn, name, "InvalidChannel", 400,
        "Channel names are 1 to %u of A-Z a-z 0-9 _ - = @ , . ;", max_length);
    return;
  }

  /* Subscribing again changes nothing; the socket is already authorized. */
  sub = hub_conn_sub_lookup (conn, name);
  if (sub != NULL) {
    conn_subscription_succeeded (hub, conn, sub->channel,
        sub->member ? sub->member->user_id : NULL);
    return;
  }
  /* Each subscription holds memory on the server: a socket may be in
   * max_channels_per_socket channels at once, and is refused another as a
   * full presence channel refuses a member. */
  if (max_channels > 0 && conn->n_subs >= max_channels) {
    hub->counters.channel_limit_refusals++;
    hub_conn_subscription_error (hub, conn, name, "LimitReached", 403,
        "A socket may be subscribed to %u channels at once", max_channels);
    return;
  }
  if (hub_channel_kind (name) != CHANNEL_PUBLIC &&
      !subscribe_authorize (hub, conn, data, name, &user_id, &user_info))
    return;
  if (user_id != NULL) {
    Member *member;

    if (!presence_has_room (hub, conn, name, user_id, &member) ||
        hub_gate_hold (hub, conn, name, &user_id, &user_info))
      return;
  }
  hub_subscription_add (hub, conn, name, &user_id, &user_info, NULL);
}

/* Pusher protocol 7: pusher:unsubscribe {channel}; unknown channels are
 * ignored, as Pusher does. */
void
hub_handle_unsubscribe (LegbaHub * hub, LegbaHubConn * conn, JsonObject * frame)
{
  g_autoptr (JsonNode) owned = NULL;
  JsonObject *data = hub_frame_get_data (frame, &owned);
  const char *name =
      data ? legba_json_object_get_string (data, "channel") : NULL;
  Subscription *sub;

  if (name == NULL) {
    hub_conn_error (hub, conn, LEGBA_PUSHER_GENERIC,
        "pusher:unsubscribe needs data {\"channel\": \"...\"}");
    return;
  }
  hub_gate_forget (conn, name);
  sub = hub_conn_sub_lookup (conn, name);
  if (sub == NULL)
    return;
  if (hub->hooks.subscribed != NULL) {
    g_autofree char *member_id = sub->member ?
        g_strdup (sub->member->user_id) : NULL;

    hub_subscription_remove (hub, sub);
    hub_hook_subscribed (hub, conn, name, member_id, FALSE);
  } else {
    hub_subscription_remove (hub, sub);
  }
}
