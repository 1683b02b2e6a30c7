/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaRelay internals shared by legba-relay.c (connecting, writing this
 * instance's events and state, the life cycle, /metrics),
 * legba-relay-peers.c (reading the stream, the other instances' state,
 * heartbeats) and legba-relay-cache.c (cache channels in Redis). Nothing
 * else includes this header.
 */
#pragma once

#include <legba/server/legba-relay.h>

G_BEGIN_DECLS

#define CONNECT_TIMEOUT_MS 3000
#define COMMAND_TIMEOUT_MS 3000
#define READ_BLOCK_MS 2000
#define READ_COUNT "1000"
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
/* The longest a live instance can take to reconnect once Redis is back:
 * its longest retry delay (with jitter), then a connection attempt. */
#define RECONNECT_MAX_MS (BACKOFF_MAX_MS + BACKOFF_MAX_MS / 5 + \
    CONNECT_TIMEOUT_MS)
#define TICK_MS 1000
/* Subscription counts change with every subscribe: coalesced. */
#define OCCUPANCY_FLUSH_MS 100
/* What is kept to append again if Redis comes back empty. */
#define REPLAY_MAX_AGE_US (60 * G_USEC_PER_SEC)
#define REPLAY_MAX_BYTES (16 * 1024 * 1024)
#define SYNC_CHUNK 256
#define GONE_PEER_KEEP_US (600 * G_USEC_PER_SEC)
#define SEP "\x1f"

typedef enum
{
  PHASE_IDLE,
  PHASE_CONNECTING,
  PHASE_UP,
  PHASE_DOWN,
  PHASE_LEFT,
} RelayPhase;

/* Something this instance appends to the stream. */
typedef struct
{
  guint64 seq;                  /* 0 until first written */
  char kind;
  char *app;
  char *channel;
  char *user;
  char *value;                  /* j: user_info ("" none); o: the count */
  char *except;                 /* e: socket_id excluded, or NULL */
  GBytes *frame;                /* e */
  gint64 written_at;
  gint64 acked_at;
} Entry;

/* A state change read from another instance. */
typedef struct
{
  guint64 seq;
  char kind;
  char *app;
  char *channel;
  char *user;
  char *value;
} StateOp;

/* Another instance, as this one knows it. */
typedef struct
{
  char *id;
  char *run;
  guint64 last_seq;             /* highest sequence number read */
  guint64 state_seq;            /* state changes up to it are applied */
  gboolean have_state;          /* a snapshot is applied */
  gboolean snapshot_pending;
  gboolean snapshot_again;
  gboolean gone;                /* this run left or expired */
  gint64 gone_at;
  GQueue buffered;              /* StateOp read while a snapshot is due */
  GHashTable *members;          /* "APP SEP CHANNEL SEP USER" -> user_info */
  GHashTable *occupancy;        /* "APP SEP CHANNEL" -> count (pointer) */
} Peer;

/* A subscriber's look for a cache channel's event (legba-relay-cache.c). */
typedef struct _RelayLookup RelayLookup;

typedef struct
{
  guint64 connects;
  guint64 disconnects;
  guint64 redis_restarts;
  guint64 published;
  guint64 received;
  guint64 duplicates;
  guint64 lost;
  guint64 dropped;
  guint64 replayed;
  guint64 expired;
  guint64 snapshots;
  guint64 invalid;
  guint64 publish_count;
  gint64 publish_us;            /* sum of XADD round trips */
} RelayCounters;

struct _LegbaRelay
{
  LegbaHub *hub;
  GMainContext *context;
  LegbaRedisAddress address;
  char *address_text;           /* for logs, without the password */
  char *instance_id;
  char *run;
  guint retention;
  guint instance_ttl;
  char *retention_text;
  char *ttl_text;
  /* keys */
  char *events_key;
  char *instances_key;
  char *heartbeat_key;
  char *state_key;
  char *key_prefix;             /* PREFIX, for other instances' keys */

  RelayPhase phase;
  LegbaRedis *cmd;
  LegbaRedis *reader;
  GSource *reconnect;
  GSource *tick;
  GSource *flush;
  guint backoff_ms;
  gboolean reported_down;       /* this outage is logged */
  gboolean reported_full;       /* this outage's full outbox is logged */

  char *redis_run_id;           /* of the Redis last connected to */
  gint64 grace_until;           /* heartbeats lost with Redis: wait */
  char *last_id;                /* last stream id read; NULL: none yet */
  guint64 seq;
  GQueue outbox;                /* Entry: unacknowledged, then unwritten */
  GQueue replay;                /* Entry: acknowledged events, for replay */
  gsize replay_bytes;
  GHashTable *peers;            /* id -> Peer */

  /* This instance's own share, mirrored from the hub. */
  GHashTable *local_members;    /* member key -> user_info ("" none) */
  GHashTable *local_occupancy;  /* occupancy key -> count (pointer) */
  GHashTable *dirty_occupancy;  /* occupancy keys to write */

  RelayCounters counters;
  gboolean in_snapshot;         /* applying another instance's snapshot */

  /* Cache lookups Redis dropped, answered (a miss) from cache_idle */
  GQueue cache_unanswered;
  GSource *cache_idle;
};

/* legba-relay.c */
G_GNUC_INTERNAL void relay_log (LegbaRelay * relay, GLogLevelFlags level,
    const char *event, const char *key, const char *value, const char *key2,
    const char *value2);
/* Either connection failed: serve locally, reconnect after a backoff. */
G_GNUC_INTERNAL void relay_down (LegbaRelay * relay, const char *reason);
/* Heartbeat and the set of instances. */
G_GNUC_INTERNAL void relay_register (LegbaRelay * relay);
/* The whole state hash again, then y. */
G_GNUC_INTERNAL void relay_write_sync (LegbaRelay * relay);
/* "APP SEP CHANNEL SEP USER" and "APP SEP CHANNEL". */
G_GNUC_INTERNAL char *relay_member_key (const char *app, const char *channel,
    const char *user);
G_GNUC_INTERNAL char *relay_occupancy_key (const char *app,
    const char *channel);
/* Drops the events kept for a replay that are too old. */
G_GNUC_INTERNAL void relay_prune_replay (LegbaRelay * relay, gint64 now);

/* legba-relay-peers.c */
G_GNUC_INTERNAL void relay_peer_free (Peer * peer);
/* XREAD BLOCK from the last-read id, again and again while up. */
G_GNUC_INTERNAL void relay_read (LegbaRelay * relay);
/* Takes a snapshot of every instance Redis lists. */
G_GNUC_INTERNAL void relay_read_instances (LegbaRelay * relay);
/* Once a second: this instance's heartbeat, the others' checked. */
G_GNUC_INTERNAL gboolean relay_tick (gpointer user_data);

/* legba-relay-cache.c: the hub's cache_store and cache_lookup */
G_GNUC_INTERNAL void relay_cache_store (LegbaHubApp * app,
    const char *channel, GBytes * frame, guint64 ttl_ms, gpointer user_data);
G_GNUC_INTERNAL gboolean relay_cache_lookup (LegbaHubApp * app,
    const char *channel, const char *socket_id, guint64 token,
    gpointer user_data);
/* Drops what is still to be answered; once disconnected, for a free. */
G_GNUC_INTERNAL void relay_cache_clear (LegbaRelay * relay);

G_END_DECLS
