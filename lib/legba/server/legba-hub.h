/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub: the Pusher Channels protocol 7 state machine of legba-server.
 *
 * Apps, connections, channels, presence, authentication of subscriptions,
 * client events and limits, without any socket I/O: the transport hands it
 * text frames and connection events and gives it two callbacks (send a
 * frame, close a connection). Everything here runs on one thread, the one
 * that owns the hub; nothing locks.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef struct _LegbaHub LegbaHub;
typedef struct _LegbaHubApp LegbaHubApp;
typedef struct _LegbaHubConn LegbaHubConn;

/* Pusher protocol 7 error codes (pusher:error and WebSocket close codes). */
typedef enum
{
  /* 4000–4099: do not reconnect unchanged */
  LEGBA_PUSHER_SSL_ONLY = 4000,
  LEGBA_PUSHER_APP_NOT_FOUND = 4001,
  LEGBA_PUSHER_APP_DISABLED = 4003,
  LEGBA_PUSHER_OVER_CONNECTION_QUOTA = 4004,
  LEGBA_PUSHER_PATH_NOT_FOUND = 4005,
  LEGBA_PUSHER_INVALID_VERSION = 4006,
  LEGBA_PUSHER_UNSUPPORTED_PROTOCOL = 4007,
  LEGBA_PUSHER_NO_PROTOCOL = 4008,
  LEGBA_PUSHER_UNAUTHORIZED = 4009,
  /* 4100–4199: reconnect after backing off */
  LEGBA_PUSHER_OVER_CAPACITY = 4100,
  /* 4200–4299: reconnect immediately */
  LEGBA_PUSHER_RECONNECT = 4200,
  LEGBA_PUSHER_PONG_NOT_RECEIVED = 4201,
  LEGBA_PUSHER_CLOSED_INACTIVE = 4202,
  /* 4300–4399: other errors */
  LEGBA_PUSHER_GENERIC = 4300,  /* a frame the hub cannot use: bad JSON or
                                 * UTF-8, wrong field types, unknown event,
                                 * binary frame */
  LEGBA_PUSHER_RATE_LIMITED = 4301,     /* client events per second */
  /* Legba's own, in the range Pusher leaves open: */
  LEGBA_PUSHER_OVER_LIMIT = 4302,       /* frame over max_frame_bytes, client
                                         * event data over max_event_bytes,
                                         * event name over 200 bytes */
  LEGBA_PUSHER_CLIENT_EVENT_REFUSED = 4303,     /* channel not joined, public
                                                 * or private-encrypted */
} LegbaPusherCode;

/* A limit of 0 means no limit, except for the timeouts: activity_timeout 0
 * turns server pings off (pusher-js needs a non-zero value advertised, so
 * configurations should not use it), signin_timeout 0 makes sign-in
 * optional. */
typedef struct
{
  guint max_connections;              /* per app; 0: unlimited */
  gsize max_event_bytes;              /* event data, client or API */
  guint client_events_per_second;     /* per socket */
  guint max_presence_members;         /* per presence channel */
  guint max_channels_per_socket;      /* channels one connection is in */
  gsize max_user_info_bytes;          /* presence user_info, as sent */
  guint max_channel_name_length;
  gsize max_frame_bytes;              /* one incoming WebSocket message */
  gsize max_queued_bytes;             /* per socket; enforced by the transport */
  guint control_frames_per_second;    /* per socket; by the transport */
  guint activity_timeout;             /* seconds, advertised to clients */
  guint pong_timeout;                 /* seconds to answer a server ping */
  guint signin_timeout;               /* seconds; 0: user sign-in optional */
  guint api_requests_per_second;      /* HTTP API, per app; enforced by the
                                       * transport */
  guint cache_ttl;                    /* seconds a cache channel's last
                                       * event is kept */
  guint max_cache_channels;           /* cached events per app */
  gsize max_cache_bytes;              /* bytes of cached events per app */
  guint max_watchlist_users;          /* user ids in a signed-in user's
                                       * watchlist */
} LegbaLimits;

/* The defaults, stated in docs/server.md. */
void legba_limits_init_defaults (LegbaLimits * limits);

/* What the transport does for the hub. `handle` is the transport's own
 * connection object, given to legba_hub_open().
 *
 * send: queue one text frame to the connection. The hub serializes a
 *   broadcast once and passes the same GBytes to every recipient; the
 *   transport must not modify it and takes its own reference if it keeps it.
 * close: close the connection with a WebSocket close code and reason. The
 *   transport must still call legba_hub_conn_closed() once it is closed.
 *
 * Either callback may call legba_hub_conn_closed() for any connection before
 * returning (the hub defers the teardown until it returns to the
 * transport); they must not call other hub functions. */
typedef struct
{
  void (*send) (gpointer handle, GBytes * frame, gpointer user_data);
  void (*close) (gpointer handle, guint16 code, const char *reason,
      gpointer user_data);
} LegbaHubTransport;

/* Counters for /metrics; the hub only ever increments them. */
typedef struct
{
  guint64 connections_total;
  guint64 messages_in;
  guint64 messages_out;         /* frames handed to transport->send */
  guint64 bytes_in;
  guint64 bytes_out;
  guint64 client_events;        /* client events accepted and relayed */
  guint64 api_events;           /* events published through the HTTP API */
  guint64 errors[400];          /* pusher:error / close by code - 4000:
                                 * each pusher:error sent, and each close
                                 * the hub starts without one (4201 pong
                                 * timeout, 4009 terminated user);
                                 * legba_hub_close_all() is not counted */
  guint64 subscription_errors;  /* pusher:subscription_error sent */
  guint64 channel_limit_refusals;       /* of those, for
                                         * max_channels_per_socket */
  /* Cache channels: a new subscriber got the cached event (hit) or
   * pusher:cache_miss; entries dropped for their age (expired), to stay
   * within max_cache_channels (evicted_channels) or max_cache_bytes
   * (evicted_bytes), and events not kept for being larger than
   * max_cache_bytes on their own (refused) */
  guint64 cache_hits;
  guint64 cache_misses;
  guint64 cache_expired;
  guint64 cache_evicted_channels;
  guint64 cache_evicted_bytes;
  guint64 cache_refused;
  guint64 watchlist_events;     /* pusher_internal:watchlist_events sent */
  guint64 watchlist_refusals;   /* sign-ins refused for their watchlist */
} LegbaHubCounters;

LegbaHub *legba_hub_new (const LegbaHubTransport * transport,
    gpointer user_data);
/* Frees the hub and any connection left, without calling the transport. */
void legba_hub_free (LegbaHub * hub);

/* The limits apply to every app added after the call. */
void legba_hub_set_limits (LegbaHub * hub, const LegbaLimits * limits);
const LegbaLimits *legba_hub_get_limits (LegbaHub * hub);

/* TURN credentials for room members (docs/server.md, "TURN credentials"):
 * with urls (turn: or turns: URLs, legba_turn_url_check()) and a secret,
 * every subscription to a room channel ("presence-legba.ROOM") gets
 * "ice_servers" in its pusher_internal:subscription_succeeded data, with
 * a user name "EXPIRY:USER_ID" valid for ttl_s seconds and its
 * credential. NULL urls or secret: none. */
void legba_hub_set_turn (LegbaHub * hub, const char *const *urls,
    const char *secret, guint ttl_s);

/* Appends the "ice_servers" array for user_id at wall-clock time now_s
 * and returns TRUE, or returns FALSE when no TURN server is configured. */
gboolean legba_hub_append_ice_servers (LegbaHub * hub, GString * out,
    const char *user_id, gint64 now_s);

/* Returns FALSE (and sets error) when id or key is already taken, or any
 * argument is empty. */
gboolean legba_hub_add_app (LegbaHub * hub, const char *id, const char *key,
    const char *secret, GError ** error);
LegbaHubApp *legba_hub_find_app_by_id (LegbaHub * hub, const char *id);
LegbaHubApp *legba_hub_find_app_by_key (LegbaHub * hub, const char *key);
/* Every app, in no order (transfer container). */
GPtrArray *legba_hub_get_apps (LegbaHub * hub);
/* Takes app out of the hub: its id and key are free again, and every
 * connection of its is closed with pusher:error 4001 (the app does not
 * exist). app stays valid, doing nothing, until the hub is freed. */
void legba_hub_remove_app (LegbaHub * hub, LegbaHubApp * app);
/* For what the app signs and verifies from now on. */
void legba_hub_app_set_secret (LegbaHubApp * app, const char *secret);
/* For what its connections do from now on. */
void legba_hub_app_set_limits (LegbaHubApp * app, const LegbaLimits * limits);
const char *legba_hub_app_get_id (LegbaHubApp * app);
const char *legba_hub_app_get_key (LegbaHubApp * app);
const char *legba_hub_app_get_secret (LegbaHubApp * app);
const LegbaLimits *legba_hub_app_get_limits (LegbaHubApp * app);
guint legba_hub_app_get_connection_count (LegbaHubApp * app);
/* Pusher's subscription counting for the app (off by default): the
 * subscribers of its channels, presence channels aside, get
 * pusher_internal:subscription_count when their number changes, at the
 * next legba_hub_tick(). */
void legba_hub_app_set_subscription_count (LegbaHubApp * app,
    gboolean enabled);
gboolean legba_hub_app_get_subscription_count (LegbaHubApp * app);

/* Monotonic time source, in microseconds; tests replace it. Default:
 * g_get_monotonic_time. */
void legba_hub_set_clock (LegbaHub * hub, gint64 (*now) (gpointer),
    gpointer user_data);

const LegbaHubCounters *legba_hub_get_counters (LegbaHub * hub);
guint legba_hub_get_connection_count (LegbaHub * hub);
guint legba_hub_get_subscription_count (LegbaHub * hub);
/* The cached events of every app together: how many, and their bytes. */
void legba_hub_get_cache_usage (LegbaHub * hub, guint * channels,
    guint64 * bytes);

/* ---- WebSocket connections ---- */

/* A WebSocket was accepted at /app/APP_KEY with the given `protocol` query
 * value (NULL when absent). On success the hub sends
 * pusher:connection_established (with the socket_id, the activity_timeout
 * and the advertised limits of docs/room-protocol.md §4) and returns the
 * connection. Otherwise it sends pusher:error, asks the transport to close
 * with that code, and returns NULL (there is then no connection to report
 * closed). */
LegbaHubConn *legba_hub_open (LegbaHub * hub, const char *app_key,
    const char *protocol, gpointer handle);

/* One text frame from the client. Bad input gets pusher:error (and a close
 * where the protocol says so); it never affects other connections. */
void legba_hub_receive (LegbaHub * hub, LegbaHubConn * conn,
    const char *text, gsize len);

/* A binary frame from the client: refused with pusher:error. */
void legba_hub_receive_binary (LegbaHub * hub, LegbaHubConn * conn);

/* The transport closed the connection (either side). Unsubscribes it
 * everywhere (presence: member_removed when the user's last connection
 * leaves) and frees conn; conn is invalid afterwards. */
void legba_hub_conn_closed (LegbaHub * hub, LegbaHubConn * conn);

const char *legba_hub_conn_get_socket_id (LegbaHubConn * conn);
gpointer legba_hub_conn_get_handle (LegbaHubConn * conn);
LegbaHubApp *legba_hub_conn_get_app (LegbaHubConn * conn);
/* The signed-in user id (pusher:signin), or NULL. */
const char *legba_hub_conn_get_user_id (LegbaHubConn * conn);

/* Periodic housekeeping, called about once a second by the transport:
 * sends pusher:ping to connections idle for activity_timeout, closes with
 * 4201 those that did not answer within pong_timeout, and with 4009 those
 * that did not sign in within signin_timeout (when set); sends the
 * subscription counts that changed since the last tick. */
void legba_hub_tick (LegbaHub * hub);

/* Close every connection with `code` (4200 on shutdown, so clients
 * reconnect at once). */
void legba_hub_close_all (LegbaHub * hub, guint16 code, const char *reason);

/* ---- Server side (HTTP API) ---- */

/* Publish `event` with `data` (a string, sent as is) to each channel.
 * except_socket_id excludes one connection (Pusher `socket_id`), NULL for
 * none. Fails with an error (LEGBA_HUB_ERROR), sending nothing, on an empty
 * channel list, a bad channel name, an event name that is empty, over 200
 * bytes or starting with "pusher", or data over max_event_bytes
 * (LEGBA_HUB_ERROR_TOO_LARGE). */
gboolean legba_hub_publish (LegbaHub * hub, LegbaHubApp * app,
    const char *const *channels, const char *event, const char *data,
    const char *except_socket_id, GError ** error);

/* Send an event to every connection signed in as user_id (Pusher
 * "#server-to-user-USER_ID" channel). Returns the number of connections. */
guint legba_hub_send_to_user (LegbaHub * hub, LegbaHubApp * app,
    const char *user_id, const char *event, const char *data);

/* Close (4009) every connection signed in as user_id; returns how many. */
guint legba_hub_terminate_user (LegbaHub * hub, LegbaHubApp * app,
    const char *user_id);

typedef struct
{
  const char *name;
  guint subscription_count;     /* connections subscribed */
  guint user_count;             /* presence only: distinct user ids */
} LegbaHubChannelInfo;

/* Calls func for each occupied channel of app whose name starts with
 * prefix (NULL: all), in name order. With a relay (legba_hub_set_cluster())
 * the channels, counts and users below are those of the whole cluster. */
void legba_hub_foreach_channel (LegbaHub * hub, LegbaHubApp * app,
    const char *prefix, void (*func) (const LegbaHubChannelInfo * info,
        gpointer user_data), gpointer user_data);

/* FALSE when the channel is not occupied (info then has zero counts). */
gboolean legba_hub_get_channel (LegbaHub * hub, LegbaHubApp * app,
    const char *name, LegbaHubChannelInfo * info);

/* The distinct user ids of a presence channel, in join order; empty for an
 * occupied channel of another kind, NULL when the channel is not occupied.
 * Free with g_ptr_array_unref. */
GPtrArray *legba_hub_get_users (LegbaHub * hub, LegbaHubApp * app,
    const char *name);

/* Channel names per Pusher: [A-Za-z0-9_\-=@,.;]+ within max length. */
gboolean legba_hub_channel_name_is_valid (LegbaHub * hub, const char *name);

/* ---- Cluster (several server instances, docs/scale-out.md) ---- */

/* What the hub tells the relay between instances, from inside the call
 * that caused it. None of these may call back into the hub.
 *
 * event: an event this instance delivered to a channel (client event,
 *   HTTP API event, "#server-to-user-ID" event), as the frame its
 *   subscribers got; the other instances deliver it to theirs, but to the
 *   connection except_socket_id (Pusher `socket_id`, NULL for none).
 * member: the user's first connection on this instance joined a presence
 *   channel (present), or its last one here left it.
 * subscriptions: the number of this instance's subscriptions to a channel
 *   changed (0: none left).
 * terminate_user: the HTTP API terminated the user's connections.
 * cache_store: this instance stored frame as the last event of a cache
 *   channel, to be kept ttl_ms; frame NULL: the entry it stored was evicted.
 * cache_lookup: a new subscriber of a cache channel found nothing cached
 *   here. Returns FALSE when the relay cannot look, or TRUE when it will
 *   answer with legba_hub_cluster_cache_found(), giving token back.
 * gate_notice: this instance's gate has news of channel for the gates of
 *   the others (legba_hub_gate_notify()); they hear it through
 *   legba_hub_cluster_gate_notice().
 *
 * The user's first signed-in connection on this instance and its last one
 * are told through member, with LEGBA_HUB_USERS_CHANNEL as the channel. */
typedef struct
{
  void (*event) (LegbaHubApp * app, const char *channel, GBytes * frame,
      const char *except_socket_id, gpointer user_data);
  void (*member) (LegbaHubApp * app, const char *channel,
      const char *user_id, const char *user_info, gboolean present,
      gpointer user_data);
  void (*subscriptions) (LegbaHubApp * app, const char *channel, guint count,
      gpointer user_data);
  void (*terminate_user) (LegbaHubApp * app, const char *user_id,
      gpointer user_data);
  void (*cache_store) (LegbaHubApp * app, const char *channel,
      GBytes * frame, guint64 ttl_ms, gpointer user_data);
  gboolean (*cache_lookup) (LegbaHubApp * app, const char *channel,
      const char *socket_id, guint64 token, gpointer user_data);
  void (*gate_notice) (LegbaHubApp * app, const char *channel,
      gpointer user_data);
} LegbaHubCluster;

/* Not a channel: the signed-in users (pusher:signin) of an instance, as
 * member() tells them and legba_hub_cluster_member() takes them. */
#define LEGBA_HUB_USERS_CHANNEL "#users"


/* Sets (or with NULL removes) the relay's callbacks. */
void legba_hub_set_cluster (LegbaHub * hub, const LegbaHubCluster * cluster,
    gpointer user_data);

/* What other instances did, applied here without telling the relay again.
 * The relay keeps the books per instance: every member present has its
 * absent, and the subscription deltas of an instance add up to its count.
 *
 * Delivers an event another instance delivered, but to except_socket_id
 * (may be NULL); returns the recipients. */
guint legba_hub_cluster_deliver (LegbaHub * hub, LegbaHubApp * app,
    const char *channel, GBytes * frame, const char *except_socket_id);
/* One more (present) or one fewer instance has the user in a presence
 * channel; member_added / member_removed go to local subscribers when the
 * user joins or leaves the cluster as a whole. user_info: raw JSON or
 * NULL. With LEGBA_HUB_USERS_CHANNEL, one more or one fewer instance has
 * the user signed in: watchlists hear when it comes online or goes
 * offline in the cluster. */
void legba_hub_cluster_member (LegbaHub * hub, LegbaHubApp * app,
    const char *channel, const char *user_id, const char *user_info,
    gboolean present);
/* Another instance's subscriptions to a channel changed by delta. */
void legba_hub_cluster_subscriptions (LegbaHub * hub, LegbaHubApp * app,
    const char *channel, gint delta);
/* What the relay found for a cache_lookup: the frame cached in the
 * cluster and the milliseconds it has left, or NULL. The subscriber gets
 * it, or pusher:cache_miss, unless it left or got a newer event since. */
void legba_hub_cluster_cache_found (LegbaHub * hub, LegbaHubApp * app,
    const char *channel, const char *socket_id, guint64 token,
    GBytes * frame, guint64 ttl_ms);
/* Closes (4009) this instance's connections signed in as user_id. */
guint legba_hub_cluster_terminate_user (LegbaHub * hub, LegbaHubApp * app,
    const char *user_id);
/* Another instance's gate notified channel: this instance's gate hears
 * it (its notice). */
void legba_hub_cluster_gate_notice (LegbaHub * hub, LegbaHubApp * app,
    const char *channel);

/* ---- Observer (webhooks, docs/server.md) ---- */

/* What happens in the rooms that a backend may want to hear of, told from
 * inside the call that caused it. None of these may call back into the
 * hub. With a relay the channel and member transitions are those of the
 * whole cluster, as this instance sees them: every instance tells its
 * observer of each of them, whichever instance caused it.
 *
 * channel: the channel became occupied (its first subscriber in the
 *   cluster) or vacated (its last one left).
 * member: a user joined a presence channel (added: its first connection
 *   in the cluster) or left it (its last one).
 * client_event: a client event from a connection of this instance was
 *   accepted and relayed; data is its raw JSON text (NULL when absent),
 *   user_id the sender's on a presence channel, else NULL.
 * cache_miss: a connection of this instance subscribed to a cache channel
 *   that had no event cached, and was sent pusher:cache_miss.
 * subscription_count: for an app that counts subscriptions
 *   (legba_hub_app_set_subscription_count()), the number of connections
 *   of the cluster subscribed to a channel other than a presence channel
 *   changed; told from the hub's tick with the count of that moment, as
 *   pusher_internal:subscription_count (once per channel and tick at
 *   most), 0 when the channel was vacated. */
typedef struct
{
  void (*channel) (LegbaHubApp * app, const char *channel, gboolean occupied,
      gpointer user_data);
  void (*member) (LegbaHubApp * app, const char *channel,
      const char *user_id, gboolean added, gpointer user_data);
  void (*client_event) (LegbaHubApp * app, const char *channel,
      const char *event, const char *data, const char *socket_id,
      const char *user_id, gpointer user_data);
  void (*cache_miss) (LegbaHubApp * app, const char *channel,
      gpointer user_data);
  void (*subscription_count) (LegbaHubApp * app, const char *channel,
      guint count, gpointer user_data);
} LegbaHubObserver;

/* Sets (or with NULL removes) the observer's callbacks. */
void legba_hub_set_observer (LegbaHub * hub, const LegbaHubObserver * observer,
    gpointer user_data);

/* ---- Hooks (an application embedding the server, docs/server.md) ---- */

/* What a client_event hook decided. */
typedef enum
{
  LEGBA_HUB_HOOK_RELAY,         /* relayed to the channel, as without hooks */
  LEGBA_HUB_HOOK_HANDLED,       /* not relayed */
  LEGBA_HUB_HOOK_REFUSED,       /* not relayed; the sender gets
                                 * pusher:error 4303 with the hook's message */
} LegbaHubHookVerdict;

/* Unlike the observer, the hooks run for this instance's connections only
 * and may decide: told from inside the call that caused it, with the
 * connection still whole.
 *
 * client_event: a client event passed every check (subscribed, channel
 *   kind, size, rate) and is about to be relayed; data is its raw JSON
 *   text (NULL when absent), user_id the sender's on a presence channel.
 *   On LEGBA_HUB_HOOK_REFUSED the hook sets *message (owned by the hub
 *   then; NULL for a default one).
 * subscribed: conn joined channel (after its subscription_succeeded), or
 *   left it through pusher:unsubscribe; user_id is its presence member's
 *   on a presence channel, else its signed-in user, else NULL.
 * closed: conn is closed, before its subscriptions go
 *   (legba_hub_conn_dup_channels() lists them).
 *
 * A hook may send to connections (legba_hub_send_to_socket()) and read
 * them; it must not call anything else of the hub. */
typedef struct
{
  LegbaHubHookVerdict (*client_event) (LegbaHubConn * conn,
      const char *channel, const char *event, const char *data,
      const char *user_id, char **message, gpointer user_data);
  void (*subscribed) (LegbaHubConn * conn, const char *channel,
      const char *user_id, gboolean subscribed, gpointer user_data);
  void (*closed) (LegbaHubConn * conn, gpointer user_data);
} LegbaHubHooks;

/* Sets (or with NULL removes) the hooks. */
void legba_hub_set_hooks (LegbaHub * hub, const LegbaHubHooks * hooks,
    gpointer user_data);

/* The channels conn is subscribed to, sorted (transfer full). */
char **legba_hub_conn_dup_channels (LegbaHubConn * conn);

/* Sends {"event", "channel" (when not NULL), "data"} to the connection
 * socket_id of app alone, data sent as a JSON string. FALSE when there is
 * no such connection open (closed, closing, another app's). */
gboolean legba_hub_send_to_socket (LegbaHub * hub, LegbaHubApp * app,
    const char *socket_id, const char *channel, const char *event,
    const char *data);

/* ---- Gate (SFU rooms, docs/room-protocol.md §8) ---- */

/* What the hub asks of, and tells, whoever decides on presence
 * subscriptions that need more than a signature (an SFU room must exist on
 * its SFU before its members are told of it). Called from inside the call
 * that caused them; none may call back into the hub, but admit's answer
 * may come later, from the main loop.
 *
 * admit: a subscription to the presence channel was authorized (its
 *   signature, channel_data and room for one more member checked);
 *   user_info is the raw JSON (NULL when absent). FALSE lets it proceed as
 *   usual; TRUE holds it until legba_hub_gate_accept() or
 *   legba_hub_gate_refuse() answers. A held subscription of a connection
 *   that closes or unsubscribes meanwhile is forgotten, and the answer
 *   then finds nothing.
 * left: the user's last subscription on this instance to the presence
 *   channel left.
 * vacated: nobody, here or on another instance, is subscribed to the
 *   channel any more.
 * notice: another instance's gate notified channel
 *   (legba_hub_gate_notify() there); what changed is for the gates to
 *   find where they share it (an SFU room's placement in Redis).
 * remote_joined: a user joined the presence channel through another
 *   instance (its first connection in the cluster; this instance's own
 *   members come through admit). */
typedef struct
{
  gboolean (*admit) (LegbaHubApp * app, const char *channel,
      const char *socket_id, const char *user_id, const char *user_info,
      gpointer user_data);
  void (*left) (LegbaHubApp * app, const char *channel, const char *user_id,
      gpointer user_data);
  void (*vacated) (LegbaHubApp * app, const char *channel,
      gpointer user_data);
  void (*notice) (LegbaHubApp * app, const char *channel,
      gpointer user_data);
  void (*remote_joined) (LegbaHubApp * app, const char *channel,
      const char *user_id, gpointer user_data);
} LegbaHubGate;

/* Sets (or with NULL removes) the gate's callbacks. */
void legba_hub_set_gate (LegbaHub * hub, const LegbaHubGate * gate,
    gpointer user_data);

/* Completes the held subscription of socket_id to channel: the
 * subscription is made as an ungated one would be, and event (when not
 * NULL) with data, a JSON text, goes to that connection only, on the
 * channel, just before its pusher_internal:subscription_succeeded (so that
 * a client knows what the room is before it acts on the members). FALSE when nothing was held (the connection left or
 * unsubscribed) or the subscription could not be made after all (the
 * channel filled up meanwhile; it got a pusher:subscription_error). */
gboolean legba_hub_gate_accept (LegbaHub * hub, const char *socket_id,
    const char *channel, const char *event, const char *data);

/* Refuses the held subscription with pusher:subscription_error
 * {"type", "error", "status"}; FALSE when nothing was held. */
gboolean legba_hub_gate_refuse (LegbaHub * hub, const char *socket_id,
    const char *channel, const char *type, guint status, const char *error);

/* Tells the gates of the other instances, through the relay (nothing
 * without one), that channel changed for them: each hears it through its
 * notice. */
void legba_hub_gate_notify (LegbaHub * hub, LegbaHubApp * app,
    const char *channel);

typedef void (*LegbaHubMemberSocketFunc) (const char *socket_id,
    const char *user_id, const char *user_info, gpointer user_data);

/* Calls func for each connection of this instance subscribed to the
 * presence channel (not those the gate holds), with its member's user id
 * and raw user_info (NULL when absent); func must not change the
 * channel's subscriptions. */
void legba_hub_foreach_member_socket (LegbaHub * hub, LegbaHubApp * app,
    const char *channel, LegbaHubMemberSocketFunc func, gpointer user_data);

typedef void (*LegbaHubMemberFunc) (const char *user_id,
    const char *user_info, gpointer user_data);

/* Calls func for each member (distinct user id) of the presence channel
 * in the whole cluster, in join order: this instance's (but those the
 * gate holds) and, with a relay, the other instances'; user_info is the
 * raw JSON its first connection gave (NULL when absent). func must not
 * change the channel's members. */
void legba_hub_foreach_member (LegbaHub * hub, LegbaHubApp * app,
    const char *channel, LegbaHubMemberFunc func, gpointer user_data);

#define LEGBA_HUB_ERROR (legba_hub_error_quark ())
GQuark legba_hub_error_quark (void);

typedef enum
{
  LEGBA_HUB_ERROR_INVALID,      /* bad argument: names, ids, JSON */
  LEGBA_HUB_ERROR_TOO_LARGE,    /* over a size limit */
  LEGBA_HUB_ERROR_EXISTS,       /* app id or key already taken */
} LegbaHubError;

G_END_DECLS
