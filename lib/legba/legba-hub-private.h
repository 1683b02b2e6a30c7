/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaHub internals shared by legba-hub.c (the protocol state machine) and
 * legba-hub-api.c (the server-side operations the HTTP API calls). Nothing
 * else includes this header.
 */
#pragma once

#include "legba-hub.h"

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
  guint n_subscriptions;
};

struct _Channel
{
  char *name;
  ChannelKind kind;
  GPtrArray *subscriptions;     /* Subscription *, each knows its index */
  GHashTable *members;          /* presence: user_id -> Member * (owned) */
  GQueue member_order;          /* presence: Members in join order */
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
  LegbaHubApp *app;
  gpointer handle;
  char *socket_id;
  guint index;                  /* in hub->conns */
  GHashTable *subscriptions;    /* channel name -> Subscription * */
  char *user_id;                /* pusher:signin */
  guint user_index;             /* in the app's array for user_id */
  gint64 opened_at;
  gint64 last_activity;
  gboolean ping_pending;        /* a server pusher:ping is unanswered */
  gint64 ping_sent_at;
  gint64 rate_window_start;
  guint rate_count;
  gboolean closing;             /* asked the transport to close */
  gboolean closed;              /* the transport reported it closed */
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
};

struct _LegbaHub
{
  LegbaHubTransport transport;
  gpointer user_data;
  LegbaLimits limits;
  GHashTable *apps_by_id;       /* owns the apps */
  GHashTable *apps_by_key;
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
};

/* Pusher protocol 7 frame {"event", "channel" (when not NULL), "data"},
 * data sent as a JSON string, as servers do. */
G_GNUC_INTERNAL GBytes *hub_frame_new (const char *event, const char *channel,
    const char *data);

/* Sends frame to every connection of channel (or, for "#server-to-user-ID",
 * signed in as ID) but except; returns how many. Every delivery goes through
 * here. */
G_GNUC_INTERNAL guint hub_deliver (LegbaHub * hub, LegbaHubApp * app,
    const char *channel, GBytes * frame, LegbaHubConn * except);

/* Around every entry point that may reach the transport's callbacks. */
G_GNUC_INTERNAL void hub_enter (LegbaHub * hub);
G_GNUC_INTERNAL void hub_leave (LegbaHub * hub);

G_GNUC_INTERNAL void hub_conn_close (LegbaHub * hub, LegbaHubConn * conn,
    guint16 code, const char *reason);
G_GNUC_INTERNAL void hub_count_error (LegbaHub * hub, guint code);
G_GNUC_INTERNAL gboolean hub_channel_name_valid (const char *name,
    guint max_length);

G_END_DECLS
