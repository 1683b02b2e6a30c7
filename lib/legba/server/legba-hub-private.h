/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub internals shared by legba-hub.c (the protocol state machine),
 * legba-hub-subscribe.c (subscriptions), legba-hub-count.c (subscription
 * counting), legba-hub-cache.c (cache channels), legba-hub-watchlist.c
 * (watchlist events) and legba-hub-api.c (the server-side operations the
 * HTTP API calls). Nothing else includes this header.
 */
#pragma once

#include <legba/server/legba-hub.h>
#include <legba/common/legba-json.h>

G_BEGIN_DECLS

/* Pusher: event names are at most 200 characters. */
#define MAX_EVENT_NAME_LENGTH 200
/* Pusher protocol 7 user authentication: the channel of a signed-in user. */
#define SERVER_TO_USER_PREFIX "#server-to-user-"

typedef enum
{
  CHANNEL_PUBLIC,
  CHANNEL_PRIVATE,
  CHANNEL_ENCRYPTED,
  CHANNEL_PRESENCE,
} ChannelKind;

typedef struct _Channel Channel;
typedef struct _Member Member;
typedef struct _Subscription Subscription;

/* A distinct user of a presence channel, however many of its connections
 * are subscribed. */
struct _Member
{
  GList link;                   /* in Channel.member_order; data: self */
  char *user_id;
  char *user_info;              /* raw JSON text, or NULL when absent */
  guint n_subscriptions;        /* this instance's connections */
  guint n_remote;               /* other instances that have the user here */
};

struct _Channel
{
  char *name;
  ChannelKind kind;
  GPtrArray *subscriptions;     /* Subscription *, each knows its index */
  GHashTable *members;          /* presence: user_id -> Member * (owned) */
  GQueue member_order;          /* presence: Members in join order */
  guint n_remote_subscriptions; /* subscriptions on other instances */
  gboolean occupied;            /* the observer was told so */
};

struct _Subscription
{
  LegbaHubConn *conn;
  Channel *channel;
  guint index;                  /* in channel->subscriptions */
  Member *member;               /* presence channels */
};

struct _LegbaHubConn
{
  /* What a broadcast reads of every recipient, together */
  gpointer handle;
  gboolean closing;             /* asked the transport to close */
  LegbaHubApp *app;
  char *socket_id;
  guint index;                  /* in hub->conns */
  /* Its subscriptions by channel name: the first inline, the others in a
   * table made when there are two (most sockets are on one channel, and a
   * table is some 300 bytes a socket) */
  Subscription *first_sub;
  GHashTable *more_subs;        /* channel name -> Subscription *, or NULL */
  guint n_subs;                 /* first_sub and more_subs together */
  char *user_id;                /* pusher:signin */
  guint user_index;             /* in the app's array for user_id */
  char **watchlist;             /* the user's watchlist, or NULL */
  gint64 opened_at;
  gint64 last_activity;
  gboolean ping_pending;        /* a server pusher:ping is unanswered */
  gint64 ping_sent_at;
  gint64 rate_window_start;
  guint rate_count;
  gboolean closed;              /* the transport reported it closed */
  /* Subscriptions the gate holds: channel name -> HeldSubscription;
   * NULL when none */
  GHashTable *held;
};

struct _LegbaHubApp
{
  char *id;
  char *key;
  char *secret;
  LegbaLimits limits;
  GHashTable *channels;         /* name -> Channel * (owned) */
  GHashTable *users;            /* signed-in user id -> GPtrArray of conns */
  guint n_connections;
  /* Subscription counting enabled: the names (owned) of the channels
   * whose count changed since the last tick; NULL when disabled */
  GHashTable *count_changed;
  /* Cache channels: name -> CacheEntry (owned), oldest stored first in
   * cache_order */
  GHashTable *cache;
  GQueue cache_order;
  gsize cache_bytes;
  /* Watchlists: watched user id -> GPtrArray of the conns watching it;
   * signed-in user id -> other instances that have it (pointer) */
  GHashTable *watchers;
  GHashTable *users_remote;
};

struct _LegbaHub
{
  LegbaHubTransport transport;
  gpointer user_data;
  LegbaLimits limits;
  GHashTable *apps_by_id;       /* owns the apps */
  GHashTable *apps_by_key;
  GPtrArray *retired_apps;      /* removed, owned: conns may point at them */
  GPtrArray *conns;             /* LegbaHubConn *, each knows its index */
  GHashTable *conns_by_socket_id;
  gint64 (*now) (gpointer);
  gpointer now_data;
  LegbaHubCounters counters;
  guint n_subscriptions;
  GBytes *ping_frame;
  GBytes *pong_frame;
  guint depth;                  /* nesting of calls from the transport */
  GPtrArray *closed_later;      /* conns closed while depth > 0 */
  LegbaHubCluster cluster;      /* all NULL without a relay */
  gpointer cluster_data;
  LegbaHubObserver observer;    /* all NULL without one */
  gpointer observer_data;
  LegbaHubHooks hooks;          /* all NULL without them */
  gpointer hooks_data;
  LegbaHubGate gate;            /* all NULL without one */
  gpointer gate_data;
  char **turn_urls;             /* NULL: no TURN credentials handed out */
  char *turn_secret;
  guint turn_ttl;
  guint64 cache_stamp;          /* cache entries stored so far */
};

/* Pusher protocol 7 frame {"event", "channel" (when not NULL), "data"
 * (when not NULL)}, data sent as a JSON string, as servers do. */
G_GNUC_INTERNAL GBytes *hub_frame_new (const char *event, const char *channel,
    const char *data);

/* Sends frame to every connection of channel (or, for "#server-to-user-ID",
 * signed in as ID) but except; returns how many. Every delivery goes through
 * here. */
G_GNUC_INTERNAL guint hub_deliver (LegbaHub * hub, LegbaHubApp * app,
    const char *channel, GBytes * frame, LegbaHubConn * except);

/* Around every entry point that may reach the transport's callbacks. */
G_GNUC_INTERNAL void hub_enter (LegbaHub * hub);
G_GNUC_INTERNAL gint64 hub_now (LegbaHub * hub);
G_GNUC_INTERNAL void hub_leave (LegbaHub * hub);

/* ---- Cluster: channels and members shared with other instances ---- */

/* Hands an event this instance originates to the relay, if any. */
G_GNUC_INTERNAL void hub_relay_event (LegbaHub * hub, LegbaHubApp * app,
    const char *channel, GBytes * frame, const char *except_socket_id);

/* The channel, created when absent. */
G_GNUC_INTERNAL Channel *hub_channel_get (LegbaHubApp * app,
    const char *name);
/* Tells the observer when the channel became occupied or vacated, and
 * frees it when nobody, here or elsewhere, is in it any more. */
G_GNUC_INTERNAL void hub_channel_release (LegbaHub * hub, LegbaHubApp * app,
    Channel * channel);
/* A new member at the end of the join order; takes the strings. */
G_GNUC_INTERNAL Member *hub_member_add (Channel * channel, char *user_id,
    char *user_info);
/* Pusher protocol 7: member_added to the channel's subscribers but
 * except, member_removed to all of them (the member is then freed). */
G_GNUC_INTERNAL void hub_presence_member_joined (LegbaHub * hub,
    LegbaHubApp * app, Channel * channel, Member * member,
    LegbaHubConn * except);
G_GNUC_INTERNAL void hub_presence_member_left (LegbaHub * hub,
    LegbaHubApp * app, Channel * channel, Member * member);

/* The kind of a channel, from its name's prefix. */
G_GNUC_INTERNAL ChannelKind hub_channel_kind (const char *name);
G_GNUC_INTERNAL void hub_conn_send (LegbaHub * hub, LegbaHubConn * conn,
    GBytes * frame);
/* Sends pusher:error with code and the message to conn. */
/* *INDENT-OFF* */
G_GNUC_INTERNAL void hub_conn_error (LegbaHub * hub, LegbaHubConn * conn,
    guint code, const char *format, ...) G_GNUC_PRINTF (4, 5);
/* *INDENT-ON* */

/* ---- A connection's subscriptions (legba-hub-subscribe.c) ---- */

G_GNUC_INTERNAL Subscription *hub_conn_sub_lookup (LegbaHubConn * conn,
    const char *name);
/* A new array of conn's subscriptions, to go through while they change. */
G_GNUC_INTERNAL GPtrArray *hub_conn_subs_list (LegbaHubConn * conn);
/* Removes sub from its connection and its channel and frees it; a presence
 * member whose last subscription it was leaves, and a vacant channel goes. */
G_GNUC_INTERNAL void hub_subscription_remove (LegbaHub * hub,
    Subscription * sub);
/* The data of a pusher: event: an object, or a string holding one; *owned
 * holds what must live as long as the object. */
G_GNUC_INTERNAL JsonObject *hub_frame_get_data (JsonObject * frame,
    JsonNode ** owned);
/* pusher:subscribe and pusher:unsubscribe from conn. */
G_GNUC_INTERNAL void hub_handle_subscribe (LegbaHub * hub,
    LegbaHubConn * conn, JsonObject * frame);
G_GNUC_INTERNAL void hub_handle_unsubscribe (LegbaHub * hub,
    LegbaHubConn * conn, JsonObject * frame);

/* Pusher protocol 7 pusher:subscription_error {"type", "error", "status"}
 * on channel to conn. */
/* *INDENT-OFF* */
G_GNUC_INTERNAL void hub_conn_subscription_error (LegbaHub * hub,
    LegbaHubConn * conn, const char *channel, const char *type, guint status,
    const char *format, ...) G_GNUC_PRINTF (6, 7);
/* *INDENT-ON* */
/* Subscribes conn to the channel name (authorized; user_id and user_info
 * for presence, taken when used); first, when not NULL, is a frame that
 * goes to conn just before its subscription_succeeded. FALSE when the
 * presence channel is full (conn got the subscription_error, not first). */
G_GNUC_INTERNAL gboolean hub_subscription_add (LegbaHub * hub,
    LegbaHubConn * conn, const char *name, char **user_id, char **user_info,
    GBytes * first);

/* ---- The gate's held subscriptions (legba-hub-gate.c) ---- */

/* Offers the authorized presence subscription to the gate; TRUE when it
 * holds it (takes user_id and user_info then). */
G_GNUC_INTERNAL gboolean hub_gate_hold (LegbaHub * hub, LegbaHubConn * conn,
    const char *name, char **user_id, char **user_info);
/* Forgets conn's held subscription to name, or all of them (name NULL). */
G_GNUC_INTERNAL void hub_gate_forget (LegbaHubConn * conn, const char *name);

/* ---- Subscription counting (legba-hub-count.c) ---- */

/* The number of subscriptions to channel changed, here or elsewhere. */
G_GNUC_INTERNAL void hub_count_changed (LegbaHubApp * app,
    Channel * channel);
/* pusher_internal:subscription_count to the subscribers of every channel
 * whose count changed since the last call. */
G_GNUC_INTERNAL void hub_count_flush (LegbaHub * hub);

/* ---- Hooks (legba-hub-hooks.c); called only when the hook is set ---- */

/* TRUE when the client event goes on to be relayed; a refusal is sent. */
G_GNUC_INTERNAL gboolean hub_hook_client_event (LegbaHub * hub,
    LegbaHubConn * conn, const char *channel, const char *event,
    const LegbaJsonSpan * data, const char *user_id);
/* member_id: the presence member's, NULL on other channels. */
G_GNUC_INTERNAL void hub_hook_subscribed (LegbaHub * hub,
    LegbaHubConn * conn, const char *channel, const char *member_id,
    gboolean subscribed);
/* ---- Cache channels (legba-hub-cache.c) ---- */

/* cache-, private-cache-, private-encrypted-cache-, presence-cache- */
G_GNUC_INTERNAL gboolean hub_channel_is_cache (const char *name);
/* frame was delivered to channel: kept as its last event when it is a
 * cache channel; origin: this instance published it (the relay stores it
 * in the cluster). */
G_GNUC_INTERNAL void hub_cache_store (LegbaHub * hub, LegbaHubApp * app,
    const char *channel, GBytes * frame, gboolean origin);
/* conn was just told it subscribed to channel: the cached event, or
 * pusher:cache_miss (perhaps once the relay has looked). */
G_GNUC_INTERNAL void hub_cache_subscribed (LegbaHub * hub,
    LegbaHubConn * conn, Channel * channel);
/* Drops the entries past their time; at every tick. */
G_GNUC_INTERNAL void hub_cache_expire (LegbaHub * hub);
G_GNUC_INTERNAL void hub_cache_init (LegbaHubApp * app);
G_GNUC_INTERNAL void hub_cache_clear (LegbaHubApp * app);

/* ---- Watchlists (legba-hub-watchlist.c) ---- */

/* The "watchlist" of a pusher:signin's user_data: TRUE with *list (NULL
 * when absent) or FALSE with *why. */
G_GNUC_INTERNAL gboolean hub_watchlist_parse (JsonObject * user,
    guint max_users, char ***list, char **why);
/* conn signed in with list (taken): it watches those users and gets the
 * ones online now. */
G_GNUC_INTERNAL void hub_watchlist_attach (LegbaHub * hub,
    LegbaHubConn * conn, char **list);
G_GNUC_INTERNAL void hub_watchlist_detach (LegbaHubConn * conn);
/* user_id's first signed-in connection here came (online) or its last one
 * went: the cluster learns of it, and its watchers when the user came
 * online or went offline in the whole cluster. */
G_GNUC_INTERNAL void hub_user_local (LegbaHub * hub, LegbaHubApp * app,
    const char *user_id, gboolean online);
/* Another instance has one more (present) or one fewer. */
G_GNUC_INTERNAL void hub_user_remote (LegbaHub * hub, LegbaHubApp * app,
    const char *user_id, gboolean present);
G_GNUC_INTERNAL void hub_watchlist_init (LegbaHubApp * app);
G_GNUC_INTERNAL void hub_watchlist_clear (LegbaHubApp * app);

G_GNUC_INTERNAL void hub_conn_close (LegbaHub * hub, LegbaHubConn * conn,
    guint16 code, const char *reason);
G_GNUC_INTERNAL void hub_count_error (LegbaHub * hub, guint code);
G_GNUC_INTERNAL gboolean hub_channel_name_valid (const char *name,
    guint max_length);

G_END_DECLS
