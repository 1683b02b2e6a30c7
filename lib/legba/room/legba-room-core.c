/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The participant and negotiation rules of a room (docs/room-protocol.md
 * §3, §4), without I/O: see legba-room-core.h.
 */
#include <legba/room/legba-room-core.h>

#include <string.h>

#define NEVER G_MAXINT64
#define MS G_TIME_SPAN_MILLISECOND

typedef struct
{
  char *id;
  gpointer handle;              /* the room's, from participant_added */
  LegbaRoomCoreState state;

  char *pc;                     /* current peer connection, NULL if none */
  gboolean offerer;             /* we offered pc */
  gboolean answered;            /* the offerer's pc took an answer */
  gboolean connected;           /* pc reported connected */
  guint attempts;               /* failed peer connections in a row */

  gboolean removed;             /* the server lists it no more (§3 grace) */
  gint64 away_since;
  gint64 offer_at;              /* §3: the 3 s rule, or NEVER */
  gint64 grace_at;              /* next liveness check when away, or NEVER */
} Member;

/* Candidates that came before anything else of their pc (§4). */
typedef struct
{
  char *from;
  char *pc;
  GPtrArray *candidates;        /* JsonArray */
  gint64 expires_at;
} Early;

struct _LegbaRoomCore
{
  LegbaRoomCoreActions actions;
  gpointer user_data;

  char *local_id;
  guint max_participants;
  gboolean in_room;             /* joined, not left */
  gboolean sfu;                 /* an SFU room: no peer connections */

  GHashTable *by_id;            /* id -> Member, owned */
  GHashTable *by_pc;            /* current pc -> Member */
  GQueue order;                 /* Member, in the order they were listed */
  GPtrArray *early;             /* Early */
  gint64 scheduled;             /* the wake-up asked for, or NEVER */
};

static void
member_free (gpointer data)
{
  Member *m = data;

  g_free (m->id);
  g_free (m->pc);
  g_free (m);
}

static void
early_free (gpointer data)
{
  Early *e = data;

  g_free (e->from);
  g_free (e->pc);
  g_ptr_array_unref (e->candidates);
  g_free (e);
}

LegbaRoomCore *
legba_room_core_new (const LegbaRoomCoreActions * actions, gpointer user_data)
{
  LegbaRoomCore *core = g_new0 (LegbaRoomCore, 1);

  core->actions = *actions;
  core->user_data = user_data;
  core->max_participants = G_MAXUINT;
  core->by_id = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
      member_free);
  core->by_pc = g_hash_table_new (g_str_hash, g_str_equal);
  g_queue_init (&core->order);
  core->early = g_ptr_array_new_with_free_func (early_free);
  core->scheduled = NEVER;
  return core;
}

void
legba_room_core_free (LegbaRoomCore * core)
{
  if (core == NULL)
    return;
  g_queue_clear (&core->order);
  g_hash_table_unref (core->by_pc);
  g_hash_table_unref (core->by_id);
  g_ptr_array_unref (core->early);
  g_free (core->local_id);
  g_free (core);
}

void
legba_room_core_set_local_id (LegbaRoomCore * core, const char *id)
{
  g_free (core->local_id);
  core->local_id = g_strdup (id);
}

void
legba_room_core_set_max_participants (LegbaRoomCore * core, guint max)
{
  core->max_participants = max;
}

gboolean
legba_room_core_local_is_greater (LegbaRoomCore * core, const char *other)
{
  /* §3: ids compare byte-wise */
  return strcmp (core->local_id ? core->local_id : "", other) > 0;
}

/* ---- Timers ---- */

/* Asks for the earliest wake-up when it changed, or always when forced
 * (the one asked for has passed). */
static void
reschedule_full (LegbaRoomCore * core, gboolean force)
{
  gint64 next = NEVER;

  for (GList * l = core->order.head; l != NULL; l = l->next) {
    Member *m = l->data;

    next = MIN (next, MIN (m->offer_at, m->grace_at));
  }
  for (guint i = 0; i < core->early->len; i++)
    next = MIN (next, ((Early *) core->early->pdata[i])->expires_at);
  if (next == core->scheduled && !force)
    return;
  core->scheduled = next;
  core->actions.schedule (next == NEVER ? -1 : next, core->user_data);
}

static void
reschedule (LegbaRoomCore * core)
{
  reschedule_full (core, FALSE);
}

/* ---- Participants ---- */

static void
set_state (LegbaRoomCore * core, Member * m, LegbaRoomCoreState state)
{
  if (m->state == state)
    return;
  m->state = state;
  core->actions.participant_state (m->handle, state, core->user_data);
}

static Member *
ensure_member (LegbaRoomCore * core, const char *id, gpointer member)
{
  Member *m = g_hash_table_lookup (core->by_id, id);

  if (m != NULL)
    return m;
  m = g_new0 (Member, 1);
  m->id = g_strdup (id);
  m->state = LEGBA_ROOM_CORE_NEW;
  m->offer_at = m->grace_at = NEVER;
  g_hash_table_insert (core->by_id, m->id, m);
  g_queue_push_tail (&core->order, m);
  m->handle = core->actions.participant_added (id, member, core->user_data);
  /* gone already if the application left the room when told */
  return g_hash_table_lookup (core->by_id, id);
}

/* Closes the participant's current peer connection, if any. */
static void
detach_peer (LegbaRoomCore * core, Member * m)
{
  g_autofree char *pc = g_steal_pointer (&m->pc);

  if (pc == NULL)
    return;
  g_hash_table_remove (core->by_pc, pc);
  m->offerer = m->answered = m->connected = FALSE;
  core->actions.close_peer (m->handle, pc, core->user_data);
}

static void
remove_member (LegbaRoomCore * core, Member * m)
{
  detach_peer (core, m);
  g_queue_remove (&core->order, m);
  g_hash_table_steal (core->by_id, m->id);
  m->state = LEGBA_ROOM_CORE_LEFT;
  core->actions.participant_removed (m->handle, core->user_data);
  member_free (m);
}

static Early *
find_early (LegbaRoomCore * core, const char *from, const char *pc,
    guint * index)
{
  for (guint i = 0; i < core->early->len; i++) {
    Early *e = core->early->pdata[i];

    if (strcmp (e->pc, pc) == 0 && strcmp (e->from, from) == 0) {
      if (index != NULL)
        *index = i;
      return e;
    }
  }
  return NULL;
}

static void
apply_early_candidates (LegbaRoomCore * core, Member * m)
{
  guint index;
  Early *e = find_early (core, m->id, m->pc, &index);
  g_autoptr (GPtrArray) candidates = NULL;
  g_autofree char *pc = NULL;

  if (e == NULL)
    return;
  candidates = g_ptr_array_ref (e->candidates);
  pc = g_strdup (m->pc);
  g_ptr_array_remove_index_fast (core->early, index);
  for (guint i = 0; i < candidates->len; i++)
    core->actions.apply_candidates (m->handle, pc, candidates->pdata[i],
        core->user_data);
}

/* Makes peer connection pc with m, as answerer of offer_sdp or else as
 * offerer, candidates kept for it first (§4). m may be gone when this
 * returns: starting the connection may fail it at once. */
static void
attach_peer (LegbaRoomCore * core, Member * m, const char *pc,
    const char *offer_sdp)
{
  m->offer_at = NEVER;
  if (!core->actions.open_peer (m->handle, pc, offer_sdp == NULL,
          core->user_data)) {
    set_state (core, m, LEGBA_ROOM_CORE_FAILED);
    return;
  }
  m->pc = g_strdup (pc);
  m->offerer = offer_sdp == NULL;
  m->answered = m->connected = FALSE;
  g_hash_table_insert (core->by_pc, m->pc, m);
  set_state (core, m, m->attempts > 0 ? LEGBA_ROOM_CORE_RECONNECTING :
      LEGBA_ROOM_CORE_CONNECTING);
  apply_early_candidates (core, m);
  core->actions.start_peer (m->handle, pc, offer_sdp, core->user_data);
}

static void
offer_to (LegbaRoomCore * core, Member * m)
{
  g_autofree char *pc = g_strdup_printf ("%08x%08x", g_random_int (),
      g_random_int ());

  attach_peer (core, m, pc, NULL);
}

/* §3: the newcomer offers; if its offer has not come within 3 s, the
 * participant with the greater id offers instead. */
static void
wait_for_offer (LegbaRoomCore * core, Member * m, gint64 now, guint ms)
{
  m->offer_at = now + ms * MS;
}

static void
offer_wait_expired (LegbaRoomCore * core, Member * m)
{
  m->offer_at = NEVER;
  if (m->pc == NULL && !m->removed && core->in_room &&
      legba_room_core_local_is_greater (core, m->id))
    offer_to (core, m);
}

/* Whether the member's media still come: its peer connection's in a
 * mesh, in an SFU room the connection they come through from the SFU
 * (the room's, pc NULL). */
static gboolean
member_is_live (LegbaRoomCore * core, Member * m)
{
  if (m->pc == NULL && !core->sfu)
    return FALSE;
  return core->actions.peer_is_live (m->handle, m->pc, core->user_data);
}

/* §3: keep a still-connected peer for the grace period; a peer whose
 * packets stopped (a killed process) is not still connected. */
static void
grace_check (LegbaRoomCore * core, Member * m, gint64 now)
{
  if (member_is_live (core, m) &&
      now - m->away_since < LEGBA_ROOM_GRACE_MS * MS) {
    m->grace_at = now + LEGBA_ROOM_LIVENESS_MS / 3 * MS;
    return;
  }
  m->grace_at = NEVER;
  remove_member (core, m);
}

/* Listed again within the grace period: nothing is torn down. */
static void
come_back (LegbaRoomCore * core, Member * m)
{
  m->removed = FALSE;
  m->grace_at = NEVER;
  set_state (core, m, m->connected || (core->sfu && member_is_live (core, m))
      ? LEGBA_ROOM_CORE_CONNECTED : LEGBA_ROOM_CORE_CONNECTING);
}

/* ---- Membership ---- */

gboolean
legba_room_core_joined (LegbaRoomCore * core, const char *const *ids,
    gpointer * members, guint n, gint64 now)
{
  if (!core->in_room && n + 1 > core->max_participants) {
    core->actions.room_full (n, core->user_data);
    return FALSE;
  }
  core->in_room = TRUE;
  core->actions.entered (core->user_data);
  for (guint i = 0; i < n; i++) {
    Member *m = ensure_member (core, ids[i], members ? members[i] : NULL);

    if (m == NULL)
      break;
    if (m->removed)
      come_back (core, m);
    /* §3: offer to every listed member without a live peer connection */
    if (!core->sfu && m->pc == NULL && m->state != LEGBA_ROOM_CORE_FAILED)
      offer_to (core, m);
  }
  reschedule (core);
  return TRUE;
}

void
legba_room_core_member_added (LegbaRoomCore * core, const char *id,
    gpointer member, gint64 now)
{
  Member *m = g_hash_table_lookup (core->by_id, id);

  if (m != NULL) {
    if (m->removed) {
      g_debug ("%s is back within the grace period", id);
      come_back (core, m);
      reschedule (core);
    }
    return;
  }
  m = ensure_member (core, id, member);
  if (m == NULL)
    return;
  if (core->sfu)
    g_debug ("%s joined the SFU room", id);
  else if (core->order.length + 1 > core->max_participants)
    g_debug ("%s is beyond max-participants (%u); it is expected to leave",
        id, core->max_participants);
  else
    wait_for_offer (core, m, now, LEGBA_ROOM_OFFER_WAIT_MS);
  reschedule (core);
}

void
legba_room_core_member_removed (LegbaRoomCore * core, const char *id,
    gint64 now)
{
  Member *m = g_hash_table_lookup (core->by_id, id);

  if (m == NULL || m->removed)
    return;
  m->offer_at = NEVER;
  if (!member_is_live (core, m)) {
    remove_member (core, m);
  } else {
    g_debug ("%s left the server; keeping its connection for the grace "
        "period", id);
    m->removed = TRUE;
    m->away_since = now;
    set_state (core, m, LEGBA_ROOM_CORE_AWAY);
    m->grace_at = now + LEGBA_ROOM_LIVENESS_MS / 3 * MS;
  }
  reschedule (core);
}

void
legba_room_core_leave (LegbaRoomCore * core, gboolean say_bye)
{
  Member *m;

  core->in_room = FALSE;
  core->sfu = FALSE;
  while ((m = g_queue_peek_head (&core->order)) != NULL) {
    if (say_bye && m->pc != NULL)
      core->actions.send_bye (m->handle, m->pc, core->user_data);
    remove_member (core, m);
  }
  g_ptr_array_set_size (core->early, 0);
  reschedule (core);
}

/* ---- Signals from peers ---- */

void
legba_room_core_offer (LegbaRoomCore * core, const char *from,
    const char *pc, const char *sdp, gint64 now)
{
  Member *m;

  if (core->sfu) {
    g_message ("dropping an offer from %s: the room is an SFU room", from);
    return;
  }
  if (g_hash_table_contains (core->by_pc, pc)) {
    g_debug ("dropping a second offer for pc %s", pc);
    return;
  }
  m = ensure_member (core, from, NULL);
  if (m == NULL)
    return;
  if (m->pc != NULL) {
    if (m->offerer && !m->answered &&
        legba_room_core_local_is_greater (core, from)) {
      /* §3 glare: the offer of the greater id wins */
      g_debug ("glare with %s, our offer wins", from);
      return;
    }
    /* glare lost, or the peer replaced its connection (§3) */
    g_debug ("%s offers pc %s, replacing pc %s", from, pc, m->pc);
    detach_peer (core, m);
  }
  attach_peer (core, m, pc, sdp);
  reschedule (core);
}

/* The participant `from` whose current connection is pc, or NULL. */
static Member *
find_current (LegbaRoomCore * core, const char *from, const char *pc)
{
  Member *m = g_hash_table_lookup (core->by_pc, pc);

  if (m != NULL && strcmp (m->id, from) != 0) {
    g_debug ("%s sent a signal for pc %s, which is %s's", from, pc, m->id);
    return NULL;
  }
  return m;
}

void
legba_room_core_answer (LegbaRoomCore * core, const char *from,
    const char *pc, const char *sdp)
{
  Member *m = find_current (core, from, pc);

  if (m == NULL) {
    g_message ("dropping an answer from %s for unknown pc %s", from, pc);
    return;
  }
  if (core->actions.apply_answer (m->handle, pc, sdp, core->user_data))
    m->answered = TRUE;
}

void
legba_room_core_candidates (LegbaRoomCore * core, const char *from,
    const char *pc, JsonArray * candidates, gint64 now)
{
  Member *m = find_current (core, from, pc);
  Early *e;

  if (m != NULL) {
    core->actions.apply_candidates (m->handle, pc, candidates, core->user_data);
    return;
  }
  if (core->sfu || g_hash_table_contains (core->by_pc, pc))
    return;
  /* §4: kept for up to 10 s, applied once the offer comes */
  e = find_early (core, from, pc, NULL);
  if (e == NULL) {
    e = g_new0 (Early, 1);
    e->from = g_strdup (from);
    e->pc = g_strdup (pc);
    e->candidates =
        g_ptr_array_new_with_free_func ((GDestroyNotify) json_array_unref);
    e->expires_at = now + LEGBA_ROOM_EARLY_SIGNAL_MS * MS;
    g_ptr_array_add (core->early, e);
  }
  g_ptr_array_add (e->candidates, json_array_ref (candidates));
  reschedule (core);
}

void
legba_room_core_bye (LegbaRoomCore * core, const char *from,
    const char *pc, gint64 now)
{
  Member *m = find_current (core, from, pc);

  if (m == NULL) {
    g_message ("dropping a bye from %s for unknown pc %s", from, pc);
    return;
  }
  g_debug ("%s closed pc %s", from, pc);
  detach_peer (core, m);
  if (m->removed) {
    remove_member (core, m);
    reschedule (core);
    return;
  }
  set_state (core, m, LEGBA_ROOM_CORE_NEW);
  /* §3: the greater id replaces the connection; soon after the first bye
   * in a row, since the other side is waiting for that offer */
  m->attempts++;
  wait_for_offer (core, m, now, m->attempts == 1 &&
      legba_room_core_local_is_greater (core, m->id) ?
      LEGBA_ROOM_REOFFER_MS : LEGBA_ROOM_OFFER_WAIT_MS);
  reschedule (core);
}

/* ---- Peer connections ---- */

gboolean
legba_room_core_peer_connected (LegbaRoomCore * core, const char *pc)
{
  Member *m = g_hash_table_lookup (core->by_pc, pc);

  if (m == NULL)
    return FALSE;
  m->connected = TRUE;
  m->attempts = 0;
  if (!m->removed)
    set_state (core, m, LEGBA_ROOM_CORE_CONNECTED);
  return TRUE;
}

/* §3: a failed peer connection is replaced by a fresh one, offered by the
 * participant with the greater id; if that fails too it is reported. */
void
legba_room_core_peer_failed (LegbaRoomCore * core, const char *pc,
    const char *why, gint64 now)
{
  Member *m = g_hash_table_lookup (core->by_pc, pc);
  gboolean greater;

  if (m == NULL)
    return;
  greater = legba_room_core_local_is_greater (core, m->id);
  m->attempts++;
  /* the greater id replaces the connection with a fresh offer; the other
   * side, or a side that gives up, says so */
  if (!greater || m->attempts >= 2)
    core->actions.send_bye (m->handle, pc, core->user_data);
  detach_peer (core, m);
  if (m->removed) {
    remove_member (core, m);
  } else if (m->attempts >= 2) {
    set_state (core, m, LEGBA_ROOM_CORE_FAILED);
    core->actions.participant_failed (m->handle, why, core->user_data);
  } else {
    set_state (core, m, LEGBA_ROOM_CORE_RECONNECTING);
    if (greater)
      offer_to (core, m);
    else
      wait_for_offer (core, m, now, LEGBA_ROOM_OFFER_WAIT_MS);
  }
  reschedule (core);
}

void
legba_room_core_attach (LegbaRoomCore * core, const char *id, const char *pc)
{
  Member *m = g_hash_table_lookup (core->by_id, id);

  g_return_if_fail (m != NULL && m->pc == NULL);
  g_return_if_fail (!g_hash_table_contains (core->by_pc, pc));

  m->offer_at = NEVER;
  m->pc = g_strdup (pc);
  m->offerer = TRUE;
  g_hash_table_insert (core->by_pc, m->pc, m);
  reschedule (core);
}

/* ---- Topology (docs/room-protocol.md §8) ---- */

void
legba_room_sfu_free (LegbaRoomSfu * sfu)
{
  if (sfu == NULL)
    return;
  g_free (sfu->url);
  g_free (sfu->pin);
  g_free (sfu->token);
  g_free (sfu);
}

/* A string member, absent allowed; FALSE when present and not a string. */
static gboolean
optional_string (JsonObject * object, const char *name, char **out)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_STRING)
    return FALSE;
  *out = g_strdup (json_node_get_string (node));
  return TRUE;
}

static LegbaRoomSfu *
parse_sfu (JsonObject * object, char **why)
{
  g_autoptr (LegbaRoomSfu) sfu = g_new0 (LegbaRoomSfu, 1);
  JsonNode *room = json_object_get_member (object, "room");
  const char *kind = json_object_get_string_member_with_default (object,
      "kind", NULL);
  const char *url = json_object_get_string_member_with_default (object,
      "url", NULL);

  if (g_strcmp0 (kind, "janus") != 0) {
    *why = g_strdup ("sfu.kind is not \"janus\"");
    return NULL;
  }
  if (url == NULL || !(g_str_has_prefix (url, "ws://") ||
          g_str_has_prefix (url, "wss://"))) {
    *why = g_strdup ("sfu.url is not a ws:// or wss:// url");
    return NULL;
  }
  if (room == NULL || !JSON_NODE_HOLDS_VALUE (room) ||
      json_node_get_value_type (room) != G_TYPE_INT64 ||
      json_node_get_int (room) <= 0) {
    *why = g_strdup ("sfu.room is not a positive integer");
    return NULL;
  }
  if (!optional_string (object, "pin", &sfu->pin) ||
      !optional_string (object, "token", &sfu->token)) {
    *why = g_strdup ("sfu.pin or sfu.token is not a string");
    return NULL;
  }
  sfu->url = g_strdup (url);
  sfu->room = (guint64) json_node_get_int (room);
  return g_steal_pointer (&sfu);
}

gboolean
legba_room_core_parse_topology (JsonNode * data, LegbaRoomSfu ** sfu,
    char **why)
{
  JsonObject *object;
  JsonNode *node;
  const char *topology;

  *sfu = NULL;
  if (data == NULL || !JSON_NODE_HOLDS_OBJECT (data)) {
    *why = g_strdup ("the topology is not a JSON object");
    return FALSE;
  }
  object = json_node_get_object (data);
  topology = json_object_get_string_member_with_default (object, "topology",
      NULL);
  if (g_strcmp0 (topology, "mesh") == 0)
    return TRUE;
  if (g_strcmp0 (topology, "sfu") != 0) {
    *why = g_strdup_printf ("unknown topology '%s'",
        topology ? topology : "(not a string)");
    return FALSE;
  }
  node = json_object_get_member (object, "sfu");
  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node)) {
    *why = g_strdup ("an sfu topology without an sfu object");
    return FALSE;
  }
  *sfu = parse_sfu (json_node_get_object (node), why);
  return *sfu != NULL;
}

void
legba_room_core_use_sfu (LegbaRoomCore * core)
{
  if (core->sfu)
    return;
  core->sfu = TRUE;
  for (GList * l = core->order.head; l != NULL; l = l->next) {
    Member *m = l->data;

    m->offer_at = NEVER;
    m->attempts = 0;
    if (m->pc == NULL)
      continue;
    core->actions.send_bye (m->handle, m->pc, core->user_data);
    detach_peer (core, m);
    set_state (core, m, LEGBA_ROOM_CORE_NEW);
  }
  g_ptr_array_set_size (core->early, 0);
  reschedule (core);
}

gboolean
legba_room_core_is_sfu (LegbaRoomCore * core)
{
  return core->sfu;
}

/* ---- Time ---- */

void
legba_room_core_tick (LegbaRoomCore * core, gint64 now)
{
  g_autoptr (GPtrArray) due = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i < core->early->len;) {
    Early *e = core->early->pdata[i];

    if (e->expires_at <= now) {
      g_debug ("dropping signals from %s for unknown pc %s after %d ms",
          e->from, e->pc, LEGBA_ROOM_EARLY_SIGNAL_MS);
      g_ptr_array_remove_index (core->early, i);
    } else {
      i++;
    }
  }
  /* by id: a timer's actions may remove other participants */
  for (GList * l = core->order.head; l != NULL; l = l->next) {
    Member *m = l->data;

    if (m->offer_at <= now || m->grace_at <= now)
      g_ptr_array_add (due, g_strdup (m->id));
  }
  for (guint i = 0; i < due->len; i++) {
    Member *m = g_hash_table_lookup (core->by_id, due->pdata[i]);

    if (m != NULL && m->offer_at <= now)
      offer_wait_expired (core, m);
    m = g_hash_table_lookup (core->by_id, due->pdata[i]);
    if (m != NULL && m->grace_at <= now)
      grace_check (core, m, now);
  }
  reschedule_full (core, TRUE);
}

/* ---- Lookups ---- */

gpointer
legba_room_core_find (LegbaRoomCore * core, const char *id)
{
  Member *m = g_hash_table_lookup (core->by_id, id);

  return m ? m->handle : NULL;
}

gpointer
legba_room_core_find_by_pc (LegbaRoomCore * core, const char *pc)
{
  Member *m = g_hash_table_lookup (core->by_pc, pc);

  return m ? m->handle : NULL;
}

const char *
legba_room_core_get_pc (LegbaRoomCore * core, const char *id)
{
  Member *m = g_hash_table_lookup (core->by_id, id);

  return m ? m->pc : NULL;
}
