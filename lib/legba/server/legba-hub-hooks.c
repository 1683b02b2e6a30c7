/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub's hooks: what an application embedding the server hears of its
 * connections (a client event it may answer or refuse, subscriptions, a
 * closed connection) and the sending it may do from there
 * (docs/server.md, "Server hooks").
 */
#include <legba/server/legba-hub-private.h>

#include <string.h>

/* What the sender of a refused client event reads when the hook gives no
 * message of its own; a hook's message is cut to this many bytes. */
#define DEFAULT_REFUSAL "Client event refused by the server"
#define MAX_REFUSAL_BYTES 256

void
legba_hub_set_hooks (LegbaHub * hub, const LegbaHubHooks * hooks,
    gpointer user_data)
{
  g_return_if_fail (hub != NULL);

  memset (&hub->hooks, 0, sizeof hub->hooks);
  hub->hooks_data = NULL;
  if (hooks != NULL) {
    hub->hooks = *hooks;
    hub->hooks_data = user_data;
  }
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

char **
legba_hub_conn_dup_channels (LegbaHubConn * conn)
{
  g_autoptr (GPtrArray) subs = NULL;
  GPtrArray *names;

  g_return_val_if_fail (conn != NULL, NULL);

  subs = hub_conn_subs_list (conn);
  names = g_ptr_array_new_full (subs->len + 1, NULL);
  for (guint i = 0; i < subs->len; i++)
    g_ptr_array_add (names,
        g_strdup (((Subscription *) subs->pdata[i])->channel->name));
  g_ptr_array_sort (names, compare_names);
  g_ptr_array_add (names, NULL);
  return (char **) g_ptr_array_free (names, FALSE);
}

gboolean
legba_hub_send_to_socket (LegbaHub * hub, LegbaHubApp * app,
    const char *socket_id, const char *channel, const char *event,
    const char *data)
{
  g_autoptr (GBytes) frame = NULL;
  LegbaHubConn *conn;

  g_return_val_if_fail (hub != NULL, FALSE);
  g_return_val_if_fail (app != NULL, FALSE);
  g_return_val_if_fail (socket_id != NULL, FALSE);
  g_return_val_if_fail (event != NULL, FALSE);

  conn = g_hash_table_lookup (hub->conns_by_socket_id, socket_id);
  if (conn == NULL || conn->app != app || conn->closing)
    return FALSE;
  frame = hub_frame_new (event, channel, data ? data : "");
  hub_enter (hub);
  hub_conn_send (hub, conn, frame);
  hub_leave (hub);
  return TRUE;
}

gboolean
hub_hook_client_event (LegbaHub * hub, LegbaHubConn * conn,
    const char *channel, const char *event, const LegbaJsonSpan * data,
    const char *user_id)
{
  g_autofree char *text = data->start ? g_strndup (data->start, data->len) :
      NULL;
  g_autofree char *message = NULL;
  LegbaHubHookVerdict verdict;

  verdict = hub->hooks.client_event (conn, channel, event, text, user_id,
      &message, hub->hooks_data);
  if (verdict == LEGBA_HUB_HOOK_REFUSED) {
    /* The application's words, bounded and made valid UTF-8 */
    g_autofree char *valid = message ?
        g_utf8_make_valid (message, MIN (strlen (message),
            MAX_REFUSAL_BYTES)) : NULL;

    hub_conn_error (hub, conn, LEGBA_PUSHER_CLIENT_EVENT_REFUSED, "%s",
        valid && *valid ? valid : DEFAULT_REFUSAL);
  }
  return verdict == LEGBA_HUB_HOOK_RELAY;
}

void
hub_hook_subscribed (LegbaHub * hub, LegbaHubConn * conn,
    const char *channel, const char *member_id, gboolean subscribed)
{
  hub->hooks.subscribed (conn, channel, member_id ? member_id : conn->user_id,
      subscribed, hub->hooks_data);
}
