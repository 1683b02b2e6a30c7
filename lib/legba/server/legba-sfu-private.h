/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What the parts of LegbaSfu share: its rooms, the requests in flight,
 * and the calls one part makes of another (legba-sfu.c: the rooms' life,
 * placement and the gate; legba-sfu-move.c: a Janus that dies, a room
 * another server moved). On the server's context, as LegbaSfu.
 */
#pragma once

#include <legba/server/legba-sfu.h>
#include <legba/server/legba-janus-api.h>
#include <legba/server/legba-janus-watch.h>
#include <legba/server/legba-sfu-store.h>

G_BEGIN_DECLS

#define ROOM_CHANNEL_PREFIX "presence-legba."
#define TOPOLOGY_EVENT "legba:topology"
/* Janus answers in milliseconds; a Janus that does not within this is
 * taken for down. */
#define JANUS_TIMEOUT_S 5
/* How often each Janus is asked whether it is still there (a keepalive
 * of a session of the server's own): the most a dead Janus goes
 * unnoticed, when it refuses connections. */
#define JANUS_WATCH_MS 1000
/* A room that could not be moved yet (no Janus answers) tries again. */
#define MOVE_RETRY_MS 1000
/* With a store, how often each room's placement is read again: a room
 * another server moved (a Janus only it found dead) is followed. */
#define FOLLOW_MS 2000
/* JavaScript numbers hold integers exactly up to 2^53. */
#define ROOM_ID_MAX ((G_GUINT64_CONSTANT (1) << 53) - 1)
/* Janus VideoRoom: the room already exists. */
#define JANUS_ROOM_EXISTS 427
/* Janus VideoRoom: no such room. */
#define JANUS_NO_ROOM 426

typedef enum
{
  ROOM_CREATING,
  ROOM_READY,
} RoomState;

typedef struct
{
  char *socket_id;
  char *user_id;
} Waiter;

typedef struct
{
  LegbaSfu *sfu;
  char *key;                    /* app id ":" channel */
  char *channel;
  guint instance;               /* index in janus_urls */
  guint64 id;
  char pin[25];
  char secret[33];
  RoomState state;
  GHashTable *tokens;           /* user id -> token, added in Janus */
  GPtrArray *waiters;           /* Waiter *, until created */
  guint publishers;
  guint attempts;               /* creations tried (an id taken: again) */
  guint n_loads;                /* load answers awaited */
  guint *loads;                 /* rooms per instance, G_MAXUINT: down */
  char *stored;                 /* its placement in the store, or NULL */
  guint n_adding;               /* tokens being added */
  gboolean vacant;              /* nobody in it, but members on their way */
  /* Its Janus died: being made again elsewhere, for the members it has */
  gboolean moving;
  char *moved_from;             /* the placement it had in the store */
  GSource *retry;               /* the next attempt to move it */
  /* An auto room moving from mesh to the SFU: its members in the mesh get
   * legba:topology once it is made; if it cannot be, it stays a mesh */
  gboolean automatic;
  /* This instance made the VideoRoom it uses (with a store: recorded its
   * placement first), rather than finding another instance's */
  gboolean placed_here;
  LegbaHubApp *app;
} SfuRoom;

struct _LegbaSfu
{
  LegbaHub *hub;
  GMainContext *context;
  SoupSession *session;
  char **janus_urls;
  char **janus_ws_urls;
  char *api_secret;
  char *admin_key;
  LegbaSfuRule rule;
  GHashTable *app_rules;
  GHashTable *rooms;            /* key -> SfuRoom * (owned) */
  LegbaSfuStore *store;         /* placement shared in Redis, or NULL */
  LegbaJanusWatch *watch;       /* notices a Janus that dies */
  GSource *follow;              /* with a store: placements read again */
  /* With a store: key -> the joins of that auto room whose placement is
   * being read (pointer count) */
  GHashTable *auto_pending;
  /* auto rooms: moved to the SFU; kept a mesh past their size, for an
   * SFU that could not be had or a member without legba-room/2 */
  guint64 auto_moves;
  guint64 auto_stays_unavailable;
  guint64 auto_stays_old_client;
  /* Shared with the requests in flight, which find the LegbaSfu gone when
   * it is cancelled */
  GCancellable *alive;
};

/* What a Janus request comes back to. */
typedef struct
{
  GCancellable *alive;
  LegbaSfu *sfu;
  char *room_key;
  char *socket_id;
  char *user_id;
  char *token;
  guint instance;
  JsonObject *body;             /* a destroy waiting for the store */
  /* A join of an auto room, held while its placement is read */
  LegbaHubApp *app;
  char *channel;
  char *user_info;
  guint auto_max;
} Op;

typedef struct
{
  const char *user_id;
  GPtrArray *sockets;
} MemberSockets;

/* legba-sfu.c */
G_GNUC_INTERNAL guint64 legba_sfu_random_room_id (void);
G_GNUC_INTERNAL Op *legba_sfu_op_new (LegbaSfu * sfu, SfuRoom * room);
G_GNUC_INTERNAL void legba_sfu_op_free (Op * op);
G_GNUC_INTERNAL SfuRoom *legba_sfu_op_room (Op * op);
G_GNUC_INTERNAL JsonObject *legba_sfu_room_request (SfuRoom * room,
    const char *request);
G_GNUC_INTERNAL void legba_sfu_room_send (SfuRoom * room, JsonObject * body,
    LegbaJanusCallback callback, Op * op);
G_GNUC_INTERNAL char *legba_sfu_topology_data (SfuRoom * room,
    const char *token);
/* a LegbaHubMemberSocketFunc: the sockets of m's user, into m */
G_GNUC_INTERNAL void legba_sfu_collect_sockets (const char *socket_id,
    const char *user_id, const char *user_info, gpointer m);
G_GNUC_INTERNAL JsonArray *legba_sfu_room_allowed (SfuRoom * room);
G_GNUC_INTERNAL gboolean legba_sfu_room_adopt (SfuRoom * room,
    const char *value, GError ** error);
G_GNUC_INTERNAL void legba_sfu_room_destroy_send (LegbaSfu * sfu,
    guint instance, JsonObject * body, Op * op);
G_GNUC_INTERNAL void legba_sfu_room_place (SfuRoom * room);
G_GNUC_INTERNAL void legba_sfu_room_close (SfuRoom * room);

/* legba-sfu-move.c */
G_GNUC_INTERNAL void legba_sfu_room_move (SfuRoom * room);
G_GNUC_INTERNAL void legba_sfu_room_move_again (SfuRoom * room);
G_GNUC_INTERNAL void legba_sfu_room_move_later (SfuRoom * room,
    const GError * error);
G_GNUC_INTERNAL void legba_sfu_room_readmit (SfuRoom * room);
/* a LegbaJanusWatch's loss function */
G_GNUC_INTERNAL void legba_sfu_janus_lost (guint instance, gboolean again,
    const char *why, gpointer sfu);
/* a GSourceFunc: every FOLLOW_MS with a store */
G_GNUC_INTERNAL gboolean legba_sfu_follow_tick (gpointer sfu);

G_END_DECLS
