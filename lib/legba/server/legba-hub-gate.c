/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub: the gate, which may hold an authorized presence subscription
 * until it has done what the subscription needs elsewhere (an SFU room
 * made on its SFU, the member's credentials added there), then completes
 * or refuses it; what the gate reads of a presence channel's members; and
 * the notices a cluster's gates send each other through the relay.
 */
#include <legba/server/legba-hub-private.h>

#include <string.h>

typedef struct
{
  char *user_id;
  char *user_info;
} HeldSubscription;

static void
held_subscription_free (gpointer data)
{
  HeldSubscription *held = data;

  g_free (held->user_id);
  g_free (held->user_info);
  g_free (held);
}

void
legba_hub_set_gate (LegbaHub * hub, const LegbaHubGate * gate,
    gpointer user_data)
{
  g_return_if_fail (hub != NULL);

  if (gate != NULL)
    hub->gate = *gate;
  else
    memset (&hub->gate, 0, sizeof hub->gate);
  hub->gate_data = user_data;
}

gboolean
hub_gate_hold (LegbaHub * hub, LegbaHubConn * conn, const char *name,
    char **user_id, char **user_info)
{
  HeldSubscription *held;

  if (hub->gate.admit == NULL)
    return FALSE;
  /* Asked again while held: the first answer is for both. */
  if (conn->held != NULL && g_hash_table_contains (conn->held, name))
    return TRUE;
  if (!hub->gate.admit (conn->app, name, conn->socket_id, *user_id,
          *user_info, hub->gate_data))
    return FALSE;
  held = g_new0 (HeldSubscription, 1);
  held->user_id = g_steal_pointer (user_id);
  held->user_info = g_steal_pointer (user_info);
  if (conn->held == NULL)
    conn->held = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
        held_subscription_free);
  g_hash_table_insert (conn->held, g_strdup (name), held);
  return TRUE;
}

void
hub_gate_forget (LegbaHubConn * conn, const char *name)
{
  if (conn->held == NULL)
    return;
  if (name != NULL)
    g_hash_table_remove (conn->held, name);
  if (name == NULL || g_hash_table_size (conn->held) == 0)
    g_clear_pointer (&conn->held, g_hash_table_unref);
}

/* The connection socket_id and, stolen from its table, its held
 * subscription to channel; NULL when either is gone. */
static HeldSubscription *
gate_take (LegbaHub * hub, const char *socket_id, const char *channel,
    LegbaHubConn ** conn)
{
  gpointer key = NULL, held = NULL;

  *conn = g_hash_table_lookup (hub->conns_by_socket_id, socket_id);
  if (*conn == NULL || (*conn)->closing || (*conn)->held == NULL ||
      !g_hash_table_steal_extended ((*conn)->held, channel, &key, &held))
    return NULL;
  g_free (key);
  hub_gate_forget (*conn, channel);
  return held;
}

gboolean
legba_hub_gate_accept (LegbaHub * hub, const char *socket_id,
    const char *channel, const char *event, const char *data)
{
  LegbaHubConn *conn;
  HeldSubscription *held;
  g_autoptr (GBytes) frame = NULL;
  gboolean ok;

  g_return_val_if_fail (hub != NULL, FALSE);
  g_return_val_if_fail (socket_id != NULL, FALSE);
  g_return_val_if_fail (channel != NULL, FALSE);
  g_return_val_if_fail (event == NULL || data != NULL, FALSE);

  held = gate_take (hub, socket_id, channel, &conn);
  if (held == NULL)
    return FALSE;
  if (event != NULL)
    frame = hub_frame_new (event, channel, data);
  hub_enter (hub);
  ok = hub_subscription_add (hub, conn, channel, &held->user_id,
      &held->user_info, frame);
  hub_leave (hub);
  held_subscription_free (held);
  return ok;
}

gboolean
legba_hub_gate_refuse (LegbaHub * hub, const char *socket_id,
    const char *channel, const char *type, guint status, const char *error)
{
  LegbaHubConn *conn;
  HeldSubscription *held;

  g_return_val_if_fail (hub != NULL, FALSE);
  g_return_val_if_fail (socket_id != NULL, FALSE);
  g_return_val_if_fail (channel != NULL, FALSE);
  g_return_val_if_fail (type != NULL && error != NULL, FALSE);

  held = gate_take (hub, socket_id, channel, &conn);
  if (held == NULL)
    return FALSE;
  hub_enter (hub);
  hub_conn_subscription_error (hub, conn, channel, type, status, "%s", error);
  hub_leave (hub);
  held_subscription_free (held);
  return TRUE;
}

void
legba_hub_foreach_member_socket (LegbaHub * hub, LegbaHubApp * app,
    const char *channel, LegbaHubMemberSocketFunc func, gpointer user_data)
{
  Channel *ch;

  g_return_if_fail (hub != NULL);
  g_return_if_fail (app != NULL);
  g_return_if_fail (channel != NULL);
  g_return_if_fail (func != NULL);

  ch = g_hash_table_lookup (app->channels, channel);
  if (ch == NULL || ch->kind != CHANNEL_PRESENCE)
    return;
  for (guint i = 0; i < ch->subscriptions->len; i++) {
    Subscription *sub = ch->subscriptions->pdata[i];

    if (sub->member != NULL && !sub->conn->closing)
      func (sub->conn->socket_id, sub->member->user_id,
          sub->member->user_info, user_data);
  }
}

void
legba_hub_foreach_member (LegbaHub * hub, LegbaHubApp * app,
    const char *channel, LegbaHubMemberFunc func, gpointer user_data)
{
  Channel *ch;

  g_return_if_fail (hub != NULL);
  g_return_if_fail (app != NULL);
  g_return_if_fail (channel != NULL);
  g_return_if_fail (func != NULL);

  ch = g_hash_table_lookup (app->channels, channel);
  if (ch == NULL || ch->kind != CHANNEL_PRESENCE)
    return;
  for (GList * l = ch->member_order.head; l != NULL; l = l->next) {
    Member *member = l->data;

    func (member->user_id, member->user_info, user_data);
  }
}

void
legba_hub_gate_notify (LegbaHub * hub, LegbaHubApp * app, const char *channel)
{
  g_return_if_fail (hub != NULL);
  g_return_if_fail (app != NULL);
  g_return_if_fail (channel != NULL);

  if (hub->cluster.gate_notice != NULL)
    hub->cluster.gate_notice (app, channel, hub->cluster_data);
}

void
legba_hub_cluster_gate_notice (LegbaHub * hub, LegbaHubApp * app,
    const char *channel)
{
  g_return_if_fail (hub != NULL);
  g_return_if_fail (app != NULL);
  g_return_if_fail (channel != NULL);

  if (hub->gate.notice != NULL)
    hub->gate.notice (app, channel, hub->gate_data);
}
