/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub, server side: what the Pusher HTTP API does over the hub
 * (publish, server-to-user events, terminating users, channel queries),
 * and what the relay between server instances applies (the cluster
 * entry points at the end).
 */
#include <legba/server/legba-hub-private.h>

#include <string.h>

gboolean
legba_hub_channel_name_is_valid (LegbaHub * hub, const char *name)
{
  g_return_val_if_fail (hub != NULL, FALSE);
  g_return_val_if_fail (name != NULL, FALSE);
  return hub_channel_name_valid (name, hub->limits.max_channel_name_length);
}

static gboolean
publish_check (LegbaHubApp * app, const char *const *channels,
    const char *event, const char *data, GError ** error)
{
  gsize max_bytes = app->limits.max_event_bytes;
  gsize data_len = strlen (data);

  if (channels[0] == NULL) {
    g_set_error_literal (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_INVALID,
        "No channel given");
    return FALSE;
  }
  for (guint i = 0; channels[i] != NULL; i++) {
    if (!hub_channel_name_valid (channels[i],
            app->limits.max_channel_name_length)) {
      g_set_error (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_INVALID,
          "Invalid channel name \"%.64s\"", channels[i]);
      return FALSE;
    }
  }
  if (*event == '\0' || strlen (event) > MAX_EVENT_NAME_LENGTH ||
      !g_utf8_validate (event, -1, NULL)) {
    g_set_error (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_INVALID,
        "Event names are 1 to %u bytes of UTF-8", MAX_EVENT_NAME_LENGTH);
    return FALSE;
  }
  if (g_str_has_prefix (event, "pusher")) {
    g_set_error_literal (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_INVALID,
        "Event names starting with \"pusher\" are reserved");
    return FALSE;
  }
  if (max_bytes > 0 && data_len > max_bytes) {
    g_set_error (error, LEGBA_HUB_ERROR, LEGBA_HUB_ERROR_TOO_LARGE,
        "Event data is %" G_GSIZE_FORMAT " bytes, over the limit of %"
        G_GSIZE_FORMAT, data_len, max_bytes);
    return FALSE;
  }
  return TRUE;
}

gboolean
legba_hub_publish (LegbaHub * hub, LegbaHubApp * app,
    const char *const *channels, const char *event, const char *data,
    const char *except_socket_id, GError ** error)
{
  LegbaHubConn *except = NULL;

  g_return_val_if_fail (hub != NULL, FALSE);
  g_return_val_if_fail (app != NULL, FALSE);
  g_return_val_if_fail (channels != NULL, FALSE);
  g_return_val_if_fail (event != NULL, FALSE);
  g_return_val_if_fail (data != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (!publish_check (app, channels, event, data, error))
    return FALSE;
  if (except_socket_id != NULL)
    except = g_hash_table_lookup (hub->conns_by_socket_id, except_socket_id);

  hub_enter (hub);
  for (guint i = 0; channels[i] != NULL; i++) {
    g_autoptr (GBytes) frame = hub_frame_new (event, channels[i], data);

    /* The relay first: the other instances fan out while this one does. */
    hub_relay_event (hub, app, channels[i], frame, except_socket_id);
    hub_cache_store (hub, app, channels[i], frame, TRUE);
    hub_deliver (hub, app, channels[i], frame, except);
  }
  hub->counters.api_events++;
  hub_leave (hub);
  return TRUE;
}

guint
legba_hub_send_to_user (LegbaHub * hub, LegbaHubApp * app,
    const char *user_id, const char *event, const char *data)
{
  g_autofree char *channel = NULL;
  g_autoptr (GBytes) frame = NULL;
  guint n;

  g_return_val_if_fail (hub != NULL, 0);
  g_return_val_if_fail (app != NULL, 0);
  g_return_val_if_fail (user_id != NULL, 0);
  g_return_val_if_fail (event != NULL, 0);
  g_return_val_if_fail (data != NULL, 0);

  /* With a relay the user may be signed in on another instance. */
  if (!g_hash_table_contains (app->users, user_id) &&
      hub->cluster.event == NULL)
    return 0;
  channel = g_strconcat (SERVER_TO_USER_PREFIX, user_id, NULL);
  frame = hub_frame_new (event, channel, data);
  hub_enter (hub);
  hub_relay_event (hub, app, channel, frame, NULL);
  n = hub_deliver (hub, app, channel, frame, NULL);
  hub->counters.api_events++;
  hub_leave (hub);
  return n;
}

static guint
terminate_user (LegbaHub * hub, LegbaHubApp * app, const char *user_id)
{
  GPtrArray *conns;
  guint n = 0;

  conns = g_hash_table_lookup (app->users, user_id);
  hub_enter (hub);
  for (guint i = 0; conns != NULL && i < conns->len; i++) {
    LegbaHubConn *conn = conns->pdata[i];

    if (conn->closing)
      continue;
    hub_count_error (hub, LEGBA_PUSHER_UNAUTHORIZED);
    hub_conn_close (hub, conn, LEGBA_PUSHER_UNAUTHORIZED,
        "Connections of this user were terminated");
    n++;
  }
  hub_leave (hub);
  return n;
}

guint
legba_hub_terminate_user (LegbaHub * hub, LegbaHubApp * app,
    const char *user_id)
{
  g_return_val_if_fail (hub != NULL, 0);
  g_return_val_if_fail (app != NULL, 0);
  g_return_val_if_fail (user_id != NULL, 0);

  if (hub->cluster.terminate_user != NULL)
    hub->cluster.terminate_user (app, user_id, hub->cluster_data);
  return terminate_user (hub, app, user_id);
}

static void
channel_info_fill (Channel * channel, LegbaHubChannelInfo * info)
{
  info->name = channel->name;
  info->subscription_count = channel->subscriptions->len +
      channel->n_remote_subscriptions;
  info->user_count = channel->kind == CHANNEL_PRESENCE ?
      channel->member_order.length : 0;
}

/* For g_ptr_array_sort: a and b point to Channel pointers. */
static gint
channel_compare (gconstpointer a, gconstpointer b)
{
  const Channel *channel_a = *(Channel * const *) a;
  const Channel *channel_b = *(Channel * const *) b;

  return strcmp (channel_a->name, channel_b->name);
}

void
legba_hub_foreach_channel (LegbaHub * hub, LegbaHubApp * app,
    const char *prefix, void (*func) (const LegbaHubChannelInfo * info,
        gpointer user_data), gpointer user_data)
{
  g_autoptr (GPtrArray) channels = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  g_return_if_fail (hub != NULL);
  g_return_if_fail (app != NULL);
  g_return_if_fail (func != NULL);

  g_hash_table_iter_init (&iter, app->channels);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    Channel *channel = value;

    if (prefix == NULL || g_str_has_prefix (channel->name, prefix))
      g_ptr_array_add (channels, channel);
  }
  g_ptr_array_sort (channels, channel_compare);
  for (guint i = 0; i < channels->len; i++) {
    LegbaHubChannelInfo info;

    channel_info_fill (channels->pdata[i], &info);
    func (&info, user_data);
  }
}

gboolean
legba_hub_get_channel (LegbaHub * hub, LegbaHubApp * app, const char *name,
    LegbaHubChannelInfo * info)
{
  Channel *channel;

  g_return_val_if_fail (hub != NULL, FALSE);
  g_return_val_if_fail (app != NULL, FALSE);
  g_return_val_if_fail (name != NULL, FALSE);
  g_return_val_if_fail (info != NULL, FALSE);

  channel = g_hash_table_lookup (app->channels, name);
  if (channel == NULL) {
    info->name = name;
    info->subscription_count = 0;
    info->user_count = 0;
    return FALSE;
  }
  channel_info_fill (channel, info);
  return TRUE;
}

GPtrArray *
legba_hub_get_users (LegbaHub * hub, LegbaHubApp * app, const char *name)
{
  Channel *channel;
  GPtrArray *users;

  g_return_val_if_fail (hub != NULL, NULL);
  g_return_val_if_fail (app != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);

  channel = g_hash_table_lookup (app->channels, name);
  if (channel == NULL)
    return NULL;
  users = g_ptr_array_new_with_free_func (g_free);
  if (channel->kind == CHANNEL_PRESENCE)
    for (GList * l = channel->member_order.head; l != NULL; l = l->next)
      g_ptr_array_add (users, g_strdup (((Member *) l->data)->user_id));
  return users;
}

/* ---- Observer ---- */

void
legba_hub_set_observer (LegbaHub * hub, const LegbaHubObserver * observer,
    gpointer user_data)
{
  g_return_if_fail (hub != NULL);

  memset (&hub->observer, 0, sizeof hub->observer);
  hub->observer_data = NULL;
  if (observer != NULL) {
    hub->observer = *observer;
    hub->observer_data = user_data;
  }
}

/* ---- Cluster: what other instances did ---- */

void
legba_hub_set_cluster (LegbaHub * hub, const LegbaHubCluster * cluster,
    gpointer user_data)
{
  g_return_if_fail (hub != NULL);

  memset (&hub->cluster, 0, sizeof hub->cluster);
  hub->cluster_data = NULL;
  if (cluster != NULL) {
    hub->cluster = *cluster;
    hub->cluster_data = user_data;
  }
}

guint
legba_hub_cluster_deliver (LegbaHub * hub, LegbaHubApp * app,
    const char *channel, GBytes * frame, const char *except_socket_id)
{
  LegbaHubConn *except = NULL;
  guint n;

  g_return_val_if_fail (hub != NULL, 0);
  g_return_val_if_fail (app != NULL, 0);
  g_return_val_if_fail (channel != NULL, 0);
  g_return_val_if_fail (frame != NULL, 0);

  if (except_socket_id != NULL)
    except = g_hash_table_lookup (hub->conns_by_socket_id, except_socket_id);
  hub_enter (hub);
  hub_cache_store (hub, app, channel, frame, FALSE);
  n = hub_deliver (hub, app, channel, frame, except);
  hub_leave (hub);
  return n;
}

void
legba_hub_cluster_member (LegbaHub * hub, LegbaHubApp * app,
    const char *channel_name, const char *user_id, const char *user_info,
    gboolean present)
{
  Channel *channel;
  Member *member;

  g_return_if_fail (hub != NULL);
  g_return_if_fail (app != NULL);
  g_return_if_fail (g_str_has_prefix (channel_name, "presence-") ||
      g_str_equal (channel_name, LEGBA_HUB_USERS_CHANNEL));
  g_return_if_fail (user_id != NULL);

  hub_enter (hub);
  if (g_str_equal (channel_name, LEGBA_HUB_USERS_CHANNEL)) {
    hub_user_remote (hub, app, user_id, present);
    hub_leave (hub);
    return;
  }
  channel = hub_channel_get (app, channel_name);
  member = g_hash_table_lookup (channel->members, user_id);
  if (present) {
    if (member == NULL) {
      member = hub_member_add (channel, g_strdup (user_id),
          g_strdup (user_info));
      member->n_remote = 1;
      hub_channel_release (hub, app, channel);
      hub_presence_member_joined (hub, app, channel, member, NULL);
      if (hub->gate.remote_joined != NULL)
        hub->gate.remote_joined (app, channel_name, user_id, hub->gate_data);
    } else {
      member->n_remote++;
    }
  } else if (member != NULL && member->n_remote > 0) {
    if (--member->n_remote == 0 && member->n_subscriptions == 0)
      hub_presence_member_left (hub, app, channel, member);
  }
  hub_channel_release (hub, app, channel);
  hub_leave (hub);
}

void
legba_hub_cluster_subscriptions (LegbaHub * hub, LegbaHubApp * app,
    const char *channel_name, gint delta)
{
  Channel *channel;

  g_return_if_fail (hub != NULL);
  g_return_if_fail (app != NULL);
  g_return_if_fail (channel_name != NULL);

  channel = hub_channel_get (app, channel_name);
  if (delta < 0 && (guint) - delta > channel->n_remote_subscriptions)
    channel->n_remote_subscriptions = 0;
  else
    channel->n_remote_subscriptions += delta;
  hub_count_changed (app, channel);
  hub_channel_release (hub, app, channel);
}

guint
legba_hub_cluster_terminate_user (LegbaHub * hub, LegbaHubApp * app,
    const char *user_id)
{
  g_return_val_if_fail (hub != NULL, 0);
  g_return_val_if_fail (app != NULL, 0);
  g_return_val_if_fail (user_id != NULL, 0);

  return terminate_user (hub, app, user_id);
}
