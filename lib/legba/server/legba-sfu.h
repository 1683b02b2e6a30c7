/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-server as the coordinator of SFU rooms (docs/room-protocol.md §8):
 * through the hub's gate, it makes a Janus VideoRoom when an SFU room's
 * first member subscribes, gives each member a token of that room, takes
 * it back when the member leaves and destroys the VideoRoom when the last
 * one has left.
 */
#pragma once

#include <legba/server/legba-hub.h>
#include <legba/server/legba-redis-glib.h>

G_BEGIN_DECLS

typedef enum
{
  LEGBA_TOPOLOGY_MESH,
  LEGBA_TOPOLOGY_SFU,
  LEGBA_TOPOLOGY_AUTO,          /* mesh up to auto_max members, then SFU */
} LegbaTopology;

/* auto's default number of members a room keeps as a mesh. */
#define LEGBA_TOPOLOGY_AUTO_MAX 4

/* The topology of an app's rooms: every room is topology, but rooms whose
 * name starts with one of prefixes (NULL: none) are SFU rooms. */
typedef struct
{
  LegbaTopology topology;
  guint auto_max;               /* auto: the members of a mesh room */
  char **prefixes;
} LegbaSfuRule;

typedef struct
{
  GMainContext *context;        /* the hub's; NULL: the thread default */
  const char *const *janus_urls;        /* HTTP API, one per instance */
  const char *const *janus_ws_urls;     /* what clients reach, same order */
  const char *api_secret;       /* NULL: Janus has none */
  const char *admin_key;        /* the VideoRoom's admin_key, or NULL */
  LegbaSfuRule rule;            /* apps without a rule of their own */
  GHashTable *app_rules;        /* app id -> LegbaSfuRule *, borrowed */
  /* Placement shared by a cluster's instances, or NULL */
  const LegbaRedisAddress *redis;
  const char *redis_prefix;
} LegbaSfuSettings;

typedef struct _LegbaSfu LegbaSfu;

/* Installs itself as the hub's gate; settings are copied, but app_rules,
 * which must outlive the LegbaSfu. */
LegbaSfu *legba_sfu_new (LegbaHub * hub, const LegbaSfuSettings * settings);
/* Removes the gate; the VideoRooms it made stay (Janus drops them when it
 * restarts). */
void legba_sfu_free (LegbaSfu * sfu);

/* "mesh", "sfu", "auto" or "auto:N" (N from 1 to 1000; auto_max, which
 * may be NULL, gets N, LEGBA_TOPOLOGY_AUTO_MAX for "auto", 0 for the
 * others). */
gboolean legba_topology_parse_full (const char *text,
    LegbaTopology * topology, guint * auto_max, GError ** error);
gboolean legba_topology_parse (const char *text, LegbaTopology * topology,
    GError ** error);
/* An http:// or https:// (ws: FALSE), ws:// or wss:// (ws: TRUE) URL. */
gboolean legba_sfu_url_check (const char *url, gboolean ws, GError ** error);
/* Room-name prefixes: 1 to 100 of the room name's characters each. */
gboolean legba_sfu_prefixes_check (const char *const *prefixes,
    GError ** error);

void legba_sfu_rule_free (gpointer rule);

/* Appends the SFU rooms' metrics (Prometheus text) to out. */
void legba_sfu_render_metrics (LegbaSfu * sfu, GString * out);

G_END_DECLS
