/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Server hooks: the signals of LegbaServer an application embedding it
 * connects to (a client event it may answer, let through or refuse;
 * subscriptions; closed connections), over the hub's hooks, and the
 * LegbaClientEvent its client-event handlers get (docs/server.md,
 * "Server hooks").
 */

#define LEGBA_SERVER_INTERNALS
#include <legba/server/legba-server-private.h>
#include <legba/server/legba-client-event.h>

struct _LegbaClientEvent
{
  GObject parent;

  GWeakRef server;
  char *app_id;
  char *socket_id;
  char *channel;
  char *name;
  char *data;
  char *user_id;
  LegbaServer *emitter;         /* during its client-event emission */
  gboolean refused;
  char *refusal;
};

G_DEFINE_FINAL_TYPE (LegbaClientEvent, legba_client_event, G_TYPE_OBJECT);

enum
{
  SIGNAL_CLIENT_EVENT,
  SIGNAL_SUBSCRIBED,
  SIGNAL_UNSUBSCRIBED,
  SIGNAL_CONNECTION_CLOSED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

/* ---- LegbaClientEvent ---- */

static void
legba_client_event_finalize (GObject * object)
{
  LegbaClientEvent *self = LEGBA_CLIENT_EVENT (object);

  g_weak_ref_clear (&self->server);
  g_free (self->app_id);
  g_free (self->socket_id);
  g_free (self->channel);
  g_free (self->name);
  g_free (self->data);
  g_free (self->user_id);
  g_free (self->refusal);
  G_OBJECT_CLASS (legba_client_event_parent_class)->finalize (object);
}

static void
legba_client_event_class_init (LegbaClientEventClass * klass)
{
  G_OBJECT_CLASS (klass)->finalize = legba_client_event_finalize;
}

static void
legba_client_event_init (LegbaClientEvent * self)
{
  g_weak_ref_init (&self->server, NULL);
}

/**
 * legba_client_event_get_app_id:
 * @event: a #LegbaClientEvent
 *
 * The app of the socket that sent the event.
 *
 * Returns: the id of the app whose socket sent the event
 */
const char *
legba_client_event_get_app_id (LegbaClientEvent * event)
{
  g_return_val_if_fail (LEGBA_IS_CLIENT_EVENT (event), NULL);
  return event->app_id;
}

/**
 * legba_client_event_get_socket_id:
 * @event: a #LegbaClientEvent
 *
 * The socket that sent the event.
 *
 * Returns: the Pusher socket id of the sender
 */
const char *
legba_client_event_get_socket_id (LegbaClientEvent * event)
{
  g_return_val_if_fail (LEGBA_IS_CLIENT_EVENT (event), NULL);
  return event->socket_id;
}

/**
 * legba_client_event_get_channel:
 * @event: a #LegbaClientEvent
 *
 * The channel the event was sent on.
 *
 * Returns: the channel the event was sent on (a private or presence one)
 */
const char *
legba_client_event_get_channel (LegbaClientEvent * event)
{
  g_return_val_if_fail (LEGBA_IS_CLIENT_EVENT (event), NULL);
  return event->channel;
}

/**
 * legba_client_event_get_name:
 * @event: a #LegbaClientEvent
 *
 * The event's name.
 *
 * Returns: the event's name, `client-` and at most 200 bytes in all
 */
const char *
legba_client_event_get_name (LegbaClientEvent * event)
{
  g_return_val_if_fail (LEGBA_IS_CLIENT_EVENT (event), NULL);
  return event->name;
}

/**
 * legba_client_event_get_data:
 * @event: a #LegbaClientEvent
 *
 * The event's `data` as the client wrote it: JSON text (a string
 * `"..."` when the client sent a string, as pusher-js does with an
 * object it serialized; an object `{...}` when it sent one), within
 * `max-event-bytes`.
 *
 * Returns: (nullable): its JSON text, %NULL when the frame had no `data`
 */
const char *
legba_client_event_get_data (LegbaClientEvent * event)
{
  g_return_val_if_fail (LEGBA_IS_CLIENT_EVENT (event), NULL);
  return event->data;
}

/**
 * legba_client_event_get_user_id:
 * @event: a #LegbaClientEvent
 *
 * Who sent the event, on a presence channel.
 *
 * Returns: (nullable): the sender's user id on a presence channel (the
 *   `user_id` its subscribers receive with the event), else %NULL
 */
const char *
legba_client_event_get_user_id (LegbaClientEvent * event)
{
  g_return_val_if_fail (LEGBA_IS_CLIENT_EVENT (event), NULL);
  return event->user_id;
}

/**
 * legba_client_event_reply:
 * @event: a #LegbaClientEvent
 * @name: the name of the event sent back (pusher-js calls the handlers
 *   bound to it on the channel: `channel.bind(name, ...)`)
 * @data: (nullable): its data, sent as a JSON string (as Pusher servers
 *   send data); %NULL sends an empty string
 *
 * Sends `{"event": name, "channel": channel, "data": data}` to the
 * sender of @event alone, on the channel it sent @event on. A handler may
 * reply during its #LegbaServer::client-event emission (the reply goes
 * before any relay of the event) or later, from the server's main context,
 * on a reference it kept, as long as the socket is open.
 *
 * Returns: %TRUE when the reply was queued to the socket; %FALSE when the
 *   socket is closed or closing, or the server is gone
 */
gboolean
legba_client_event_reply (LegbaClientEvent * event, const char *name,
    const char *data)
{
  g_autoptr (LegbaServer) server = NULL;
  LegbaHubApp *app;

  g_return_val_if_fail (LEGBA_IS_CLIENT_EVENT (event), FALSE);
  g_return_val_if_fail (name != NULL && *name != '\0', FALSE);

  server = g_weak_ref_get (&event->server);
  if (server == NULL)
    return FALSE;
  app = legba_hub_find_app_by_id (server->hub, event->app_id);
  return app != NULL && legba_hub_send_to_socket (server->hub, app,
      event->socket_id, event->channel, name, data);
}

/**
 * legba_client_event_refuse:
 * @event: a #LegbaClientEvent
 * @message: (nullable): what the sender reads, at most 256 bytes are
 *   kept; %NULL for a default message
 *
 * Refuses @event: nobody gets it, and the sender gets `pusher:error` with
 * code 4303 and @message (its socket stays open). Only from a
 * #LegbaServer::client-event handler, during the emission; no later
 * handler runs.
 */
void
legba_client_event_refuse (LegbaClientEvent * event, const char *message)
{
  g_return_if_fail (LEGBA_IS_CLIENT_EVENT (event));
  g_return_if_fail (event->emitter != NULL);

  event->refused = TRUE;
  g_free (event->refusal);
  event->refusal = g_strdup (message);
  g_signal_stop_emission (event->emitter, signals[SIGNAL_CLIENT_EVENT], 0);
}

/* ---- The hub's hooks, as signals ---- */

static LegbaHubHookVerdict
legba_server_hook_client_event (LegbaHubConn * conn, const char *channel,
    const char *name, const char *data, const char *user_id, char **message,
    gpointer user_data)
{
  LegbaServer *self = user_data;
  g_autoptr (LegbaClientEvent) event = NULL;
  gboolean handled = FALSE;

  if (!g_signal_has_handler_pending (self, signals[SIGNAL_CLIENT_EVENT], 0,
          FALSE))
    return LEGBA_HUB_HOOK_RELAY;

  event = g_object_new (LEGBA_TYPE_CLIENT_EVENT, NULL);
  g_weak_ref_set (&event->server, self);
  event->app_id = g_strdup (legba_hub_app_get_id (legba_hub_conn_get_app
          (conn)));
  event->socket_id = g_strdup (legba_hub_conn_get_socket_id (conn));
  event->channel = g_strdup (channel);
  event->name = g_strdup (name);
  event->data = g_strdup (data);
  event->user_id = g_strdup (user_id);

  event->emitter = g_object_ref (self);
  g_signal_emit (self, signals[SIGNAL_CLIENT_EVENT], 0, event, &handled);
  g_clear_object (&event->emitter);

  if (event->refused) {
    *message = g_steal_pointer (&event->refusal);
    return LEGBA_HUB_HOOK_REFUSED;
  }
  return handled ? LEGBA_HUB_HOOK_HANDLED : LEGBA_HUB_HOOK_RELAY;
}

static void
legba_server_hook_subscribed (LegbaHubConn * conn, const char *channel,
    const char *user_id, gboolean subscribed, gpointer user_data)
{
  LegbaServer *self = user_data;
  guint signal = signals[subscribed ? SIGNAL_SUBSCRIBED : SIGNAL_UNSUBSCRIBED];

  if (!g_signal_has_handler_pending (self, signal, 0, FALSE))
    return;
  g_object_ref (self);
  g_signal_emit (self, signal, 0,
      legba_hub_app_get_id (legba_hub_conn_get_app (conn)),
      legba_hub_conn_get_socket_id (conn), channel, user_id);
  g_object_unref (self);
}

static void
legba_server_hook_closed (LegbaHubConn * conn, gpointer user_data)
{
  LegbaServer *self = user_data;
  g_auto (GStrv) channels = NULL;

  if (!g_signal_has_handler_pending (self,
          signals[SIGNAL_CONNECTION_CLOSED], 0, FALSE))
    return;
  channels = legba_hub_conn_dup_channels (conn);
  g_object_ref (self);
  g_signal_emit (self, signals[SIGNAL_CONNECTION_CLOSED], 0,
      legba_hub_app_get_id (legba_hub_conn_get_app (conn)),
      legba_hub_conn_get_socket_id (conn), legba_hub_conn_get_user_id (conn),
      channels);
  g_object_unref (self);
}

const LegbaHubHooks legba_server_hooks = {
  .client_event = legba_server_hook_client_event,
  .subscribed = legba_server_hook_subscribed,
  .closed = legba_server_hook_closed,
};

#define STRING (G_TYPE_STRING | G_SIGNAL_TYPE_STATIC_SCOPE)

void
legba_server_install_signals (GObjectClass * klass)
{
  GType type = G_OBJECT_CLASS_TYPE (klass);

  /**
   * LegbaServer::client-event:
   * @server: the #LegbaServer
   * @event: the client event
   *
   * A socket of the server sent a client event that passed every check
   * (it joined the channel, a private or presence one, within
   * `max-event-bytes` and `client-events-per-second`), and is about to be
   * relayed to the channel's other subscribers. A handler may answer the
   * sender (legba_client_event_reply()), refuse the event
   * (legba_client_event_refuse(): not relayed, the sender gets
   * `pusher:error` 4303), or neither.
   *
   * Handlers run one after the other until one returns %TRUE or refuses;
   * the event is relayed unless one did. Client events of the other
   * instances of a cluster (`redis-url`) reach their own server's
   * handlers, not this one's.
   *
   * Threads: emitted on the thread of the server's main context (the
   * thread-default one when the server was made), from inside its
   * handling of the client's frame: no other socket is served until the
   * handlers return, so they return quickly and leave slow work to
   * later, replying then on a reference to @event they keep. A handler
   * may call @event's methods and any #LegbaServer function but
   * legba_server_shutdown() (defer that one with g_idle_add()). Without
   * a handler connected, the server makes no #LegbaClientEvent and the
   * event costs nothing more.
   *
   * Returns: %TRUE when the event was handled and must not be relayed,
   *   %FALSE to let it go on (to the next handler, then to the channel)
   */
  signals[SIGNAL_CLIENT_EVENT] = g_signal_new ("client-event", type,
      G_SIGNAL_RUN_LAST, 0, g_signal_accumulator_true_handled, NULL, NULL,
      G_TYPE_BOOLEAN, 1, LEGBA_TYPE_CLIENT_EVENT);

  /**
   * LegbaServer::subscribed:
   * @server: the #LegbaServer
   * @app_id: the socket's app
   * @socket_id: the socket's Pusher socket id
   * @channel: the channel it joined
   * @user_id: (nullable): on a presence channel the member's user id,
   *   else the user the socket signed in as (`pusher:signin`), else %NULL
   *
   * A socket of the server joined a channel: emitted once its
   * `pusher_internal:subscription_succeeded` is sent (a repeated
   * subscription to a channel it is in emits nothing). Same threads and
   * calls as #LegbaServer::client-event.
   */
  signals[SIGNAL_SUBSCRIBED] = g_signal_new ("subscribed", type,
      G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 4, STRING, STRING,
      STRING, STRING);

  /**
   * LegbaServer::unsubscribed:
   * @server: the #LegbaServer
   * @app_id: the socket's app
   * @socket_id: the socket's Pusher socket id
   * @channel: the channel it left
   * @user_id: (nullable): as in #LegbaServer::subscribed
   *
   * A socket of the server left a channel with `pusher:unsubscribe`. A
   * socket that closes leaves its channels without this signal:
   * #LegbaServer::connection-closed lists them. Same threads and calls as
   * #LegbaServer::client-event.
   */
  signals[SIGNAL_UNSUBSCRIBED] = g_signal_new ("unsubscribed", type,
      G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 4, STRING, STRING,
      STRING, STRING);

  /**
   * LegbaServer::connection-closed:
   * @server: the #LegbaServer
   * @app_id: the socket's app
   * @socket_id: the socket's Pusher socket id
   * @user_id: (nullable): the user it signed in as (`pusher:signin`), or
   *   %NULL
   * @channels: (array zero-terminated=1): the channels it was still in,
   *   sorted; it leaves them after the handlers return
   *
   * A socket of the server is closed, whichever side closed it (the
   * server's shutdown included); emitted before its channels and
   * presence memberships go. Sockets still open when the server is
   * disposed go without it: call legba_server_shutdown() first. Same
   * threads and calls as #LegbaServer::client-event.
   */
  signals[SIGNAL_CONNECTION_CLOSED] = g_signal_new ("connection-closed",
      type, G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 4, STRING,
      STRING, STRING, G_TYPE_STRV | G_SIGNAL_TYPE_STATIC_SCOPE);
}
