/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaRelay, the other instances: reading the stream (their events,
 * delivered here once each), their share of presence and subscription
 * counts (snapshots of their state hashes, then their changes on top), and
 * their heartbeats (an instance whose heartbeat expired is gone: its
 * members are removed here). The map of keys and entries is at the top of
 * legba-relay.c.
 */
#include <legba/server/legba-relay-private.h>

#include <legba/common/legba-json.h>
#include <legba/server/legba-server-private.h>

#include <string.h>

/* KEYS: heartbeat, state. {} when the heartbeat is gone, else {run,
 * HGETALL state}, read together. */
static const char snapshot_script[] =
    "local run = redis.call('GET', KEYS[1])\n"
    "if not run then return {} end\n"
    "return {run, redis.call('HGETALL', KEYS[2])}\n";

/* KEYS: heartbeat, state, instances; ARGV: instance id. Removes an
 * instance whose heartbeat expired; atomic, so that it never deletes the
 * state of an instance that came back meanwhile. */
static const char reap_script[] =
    "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end\n"
    "redis.call('DEL', KEYS[2])\n"
    "redis.call('SREM', KEYS[3], ARGV[1])\n" "return 1\n";

static void relay_reap (LegbaRelay * relay, Peer * peer);
static void peer_request_snapshot (LegbaRelay * relay, Peer * peer);

static void
state_op_free (StateOp * op)
{
  g_free (op->app);
  g_free (op->channel);
  g_free (op->user);
  g_free (op->value);
  g_free (op);
}

/* ---- Other instances: their state in this hub ---- */

/* user_info goes into frames as it is: JSON, or left out. */
static const char *
checked_user_info (const char *info)
{
  g_autoptr (JsonNode) node = NULL;
  g_autofree char *error = NULL;

  if (info == NULL || *info == '\0')
    return NULL;
  node = legba_json_parse_strict (info, strlen (info), NULL, NULL, &error);
  return node != NULL ? info : NULL;
}

/* key: "APP SEP CHANNEL SEP USER"; the user id may hold anything, so it
 * is the last part. */
static void
hub_apply_member (LegbaRelay * relay, const char *key, const char *info,
    gboolean present)
{
  g_auto (GStrv) parts = g_strsplit (key, SEP, 3);
  LegbaHubApp *app;
  gboolean users;

  if (g_strv_length (parts) != 3 || *parts[2] == '\0' ||
      !g_utf8_validate (parts[2], -1, NULL))
    return;
  users = g_str_equal (parts[1], LEGBA_HUB_USERS_CHANNEL);
  if (!users && !g_str_has_prefix (parts[1], "presence-"))
    return;
  app = legba_hub_find_app_by_id (relay->hub, parts[0]);
  if (app == NULL || (!users &&
          !legba_hub_channel_name_is_valid (relay->hub, parts[1])))
    return;
  legba_hub_cluster_member (relay->hub, app, parts[1], parts[2],
      present ? checked_user_info (info) : NULL, present);
}

static void
hub_apply_occupancy (LegbaRelay * relay, const char *key, gint delta)
{
  g_auto (GStrv) parts = g_strsplit (key, SEP, 2);
  LegbaHubApp *app;

  if (delta == 0 || g_strv_length (parts) != 2)
    return;
  app = legba_hub_find_app_by_id (relay->hub, parts[0]);
  if (app == NULL || !legba_hub_channel_name_is_valid (relay->hub, parts[1]))
    return;
  legba_hub_cluster_subscriptions (relay->hub, app, parts[1], delta);
}

static Peer *
peer_new (const char *id, const char *run)
{
  Peer *peer = g_new0 (Peer, 1);

  peer->id = g_strdup (id);
  peer->run = g_strdup (run);
  g_queue_init (&peer->buffered);
  peer->members = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      g_free);
  peer->occupancy = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      NULL);
  return peer;
}

void
relay_peer_free (Peer * peer)
{
  g_queue_clear_full (&peer->buffered, (GDestroyNotify) state_op_free);
  g_hash_table_unref (peer->members);
  g_hash_table_unref (peer->occupancy);
  g_free (peer->id);
  g_free (peer->run);
  g_free (peer);
}

/* Everything the peer had here is gone (it died, left or restarted). Its
 * sequence numbers are kept: its resends are still recognised. */
static void
peer_clear (LegbaRelay * relay, Peer * peer)
{
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_iter_init (&iter, peer->members);
  while (g_hash_table_iter_next (&iter, &key, &value))
    hub_apply_member (relay, key, value, FALSE);
  g_hash_table_remove_all (peer->members);
  g_hash_table_iter_init (&iter, peer->occupancy);
  while (g_hash_table_iter_next (&iter, &key, &value))
    hub_apply_occupancy (relay, key, -(gint) GPOINTER_TO_UINT (value));
  g_hash_table_remove_all (peer->occupancy);
  g_queue_clear_full (&peer->buffered, (GDestroyNotify) state_op_free);
  peer->have_state = FALSE;
  peer->snapshot_again = FALSE;
}

/* Another run of that instance (a new process): a new sequence. */
static void
peer_set_run (LegbaRelay * relay, Peer * peer, const char *run)
{
  peer_clear (relay, peer);
  peer->last_seq = 0;
  peer->state_seq = 0;
  g_free (peer->run);
  peer->run = g_strdup (run);
  peer->gone = FALSE;
}

static void
peer_gone (LegbaRelay * relay, Peer * peer, const char *why)
{
  if (peer->gone)
    return;
  peer_clear (relay, peer);
  peer->gone = TRUE;
  peer->gone_at = g_get_monotonic_time ();
  if (g_str_equal (why, "expired"))
    relay->counters.expired++;
  legba_server_log (G_LOG_LEVEL_MESSAGE, "relay-instance-gone",
      "INSTANCE", relay->instance_id, "PEER", peer->id, "WHY", why, NULL);
}

static void
peer_apply (LegbaRelay * relay, Peer * peer, const StateOp * op)
{
  g_autofree char *key = NULL;
  gpointer old;
  guint64 count;

  if (op->seq <= peer->state_seq)
    return;
  peer->state_seq = op->seq;
  if (op->kind == 'o') {
    key = relay_occupancy_key (op->app, op->channel);
    if (op->value == NULL ||
        !g_ascii_string_to_unsigned (op->value, 10, 0, G_MAXINT, &count, NULL))
      return;
    old = g_hash_table_lookup (peer->occupancy, key);
    hub_apply_occupancy (relay, key, (gint) count - GPOINTER_TO_INT (old));
    if (count > 0)
      g_hash_table_replace (peer->occupancy, g_steal_pointer (&key),
          GUINT_TO_POINTER ((guint) count));
    else
      g_hash_table_remove (peer->occupancy, key);
    return;
  }
  key = relay_member_key (op->app, op->channel, op->user);
  if (op->kind == 'j' && !g_hash_table_contains (peer->members, key)) {
    hub_apply_member (relay, key, op->value, TRUE);
    g_hash_table_insert (peer->members, g_steal_pointer (&key),
        g_strdup (op->value ? op->value : ""));
  } else if (op->kind == 'l' && g_hash_table_contains (peer->members, key)) {
    hub_apply_member (relay, key, NULL, FALSE);
    g_hash_table_remove (peer->members, key);
  }
}

/* Applies a snapshot of the peer's hash: what it lists and no longer. */
static void
peer_apply_snapshot (LegbaRelay * relay, Peer * peer, redisReply * hash)
{
  g_autoptr (GHashTable) members = g_hash_table_new_full (g_str_hash,
      g_str_equal, g_free, g_free);
  g_autoptr (GHashTable) occupancy = g_hash_table_new_full (g_str_hash,
      g_str_equal, g_free, NULL);
  GHashTableIter iter;
  gpointer key, value;
  guint64 seq = 0, count;

  for (gsize i = 0; i + 1 < hash->elements; i += 2) {
    const char *field = hash->element[i]->str;
    const char *text = hash->element[i + 1]->str;

    if (field == NULL || text == NULL)
      continue;
    if (g_str_equal (field, "seq"))
      g_ascii_string_to_unsigned (text, 10, 0, G_MAXUINT64, &seq, NULL);
    else if (g_str_has_prefix (field, "m" SEP))
      g_hash_table_replace (members, g_strdup (field + 2), g_strdup (text));
    else if (g_str_has_prefix (field, "o" SEP) &&
        g_ascii_string_to_unsigned (text, 10, 1, G_MAXINT, &count, NULL))
      g_hash_table_replace (occupancy, g_strdup (field + 2),
          GUINT_TO_POINTER ((guint) count));
  }

  g_hash_table_iter_init (&iter, peer->members);
  while (g_hash_table_iter_next (&iter, &key, &value))
    if (!g_hash_table_contains (members, key))
      hub_apply_member (relay, key, NULL, FALSE);
  g_hash_table_iter_init (&iter, members);
  while (g_hash_table_iter_next (&iter, &key, &value))
    if (!g_hash_table_contains (peer->members, key))
      hub_apply_member (relay, key, value, TRUE);
  g_hash_table_iter_init (&iter, occupancy);
  while (g_hash_table_iter_next (&iter, &key, &value))
    hub_apply_occupancy (relay, key, GPOINTER_TO_INT (value) -
        GPOINTER_TO_INT (g_hash_table_lookup (peer->occupancy, key)));
  g_hash_table_iter_init (&iter, peer->occupancy);
  while (g_hash_table_iter_next (&iter, &key, &value))
    if (!g_hash_table_contains (occupancy, key))
      hub_apply_occupancy (relay, key, -GPOINTER_TO_INT (value));

  g_hash_table_unref (peer->members);
  peer->members = g_steal_pointer (&members);
  g_hash_table_unref (peer->occupancy);
  peer->occupancy = g_steal_pointer (&occupancy);
  peer->state_seq = MAX (peer->state_seq, seq);
  peer->have_state = TRUE;
  relay->counters.snapshots++;
}

typedef struct
{
  LegbaRelay *relay;
  char *id;
} SnapshotCall;

static void
snapshot_call_free (gpointer data)
{
  SnapshotCall *call = data;

  g_free (call->id);
  g_free (call);
}

static void
on_snapshot (LegbaRedis * redis, redisReply * reply, gpointer user_data)
{
  SnapshotCall *call = user_data;
  LegbaRelay *relay = call->relay;
  Peer *peer = g_hash_table_lookup (relay->peers, call->id);
  redisReply *run, *hash;
  const char *hash_run = NULL;

  if (peer == NULL)
    return;
  peer->snapshot_pending = FALSE;
  if (reply->type != REDIS_REPLY_ARRAY) {
    relay_log (relay, G_LOG_LEVEL_WARNING, "relay-snapshot-failed", "PEER",
        peer->id, "ERROR", reply->str);
    return;
  }
  if (reply->elements == 0) {
    relay_reap (relay, peer);
    return;
  }
  run = reply->element[0];
  hash = reply->elements > 1 ? reply->element[1] : NULL;
  if (run->type != REDIS_REPLY_STRING || hash == NULL ||
      hash->type != REDIS_REPLY_ARRAY)
    return;
  if (!g_str_equal (run->str, peer->run))
    peer_set_run (relay, peer, run->str);
  peer->gone = FALSE;
  for (gsize i = 0; i + 1 < hash->elements; i += 2)
    if (g_strcmp0 (hash->element[i]->str, "run") == 0)
      hash_run = hash->element[i + 1]->str;
  /* Not yet written by this run (it writes it before its heartbeat, so
   * only a stale hash gets here): its y comes next. */
  if (g_strcmp0 (hash_run, run->str) != 0)
    return;
  /* What a snapshot shows is what the instance found, not news: the
   * webhooks of its arrivals were sent when they happened. */
  relay->in_snapshot = TRUE;
  peer_apply_snapshot (relay, peer, hash);
  relay->in_snapshot = FALSE;

  if (peer->snapshot_again) {
    peer->snapshot_again = FALSE;
    peer_request_snapshot (relay, peer);
    return;
  }
  while (peer->buffered.length > 0) {
    StateOp *op = g_queue_pop_head (&peer->buffered);

    peer_apply (relay, peer, op);
    state_op_free (op);
  }
}

static void
peer_request_snapshot (LegbaRelay * relay, Peer * peer)
{
  SnapshotCall *call;
  g_autofree char *heartbeat = NULL;
  g_autofree char *state = NULL;

  if (relay->phase != PHASE_UP)
    return;
  if (peer->snapshot_pending) {
    peer->snapshot_again = TRUE;
    return;
  }
  peer->snapshot_pending = TRUE;
  call = g_new0 (SnapshotCall, 1);
  call->relay = relay;
  call->id = g_strdup (peer->id);
  heartbeat = g_strconcat (relay->key_prefix, "instance:", peer->id, NULL);
  state = g_strconcat (relay->key_prefix, "state:", peer->id, NULL);
  legba_redis_command (relay->cmd, COMMAND_TIMEOUT_MS, on_snapshot, call,
      snapshot_call_free, 5, (const char *[]) {
        "EVAL", snapshot_script, "2", heartbeat, state
      }, NULL);
}

/* The peer's heartbeat is gone: it is dead, unless Redis itself lost the
 * heartbeats (restarted) and the peer has not been back for a whole TTL
 * since. Its members then stay until it comes back or the grace ends. */
static void
relay_reap (LegbaRelay * relay, Peer * peer)
{
  g_autofree char *heartbeat = NULL;
  g_autofree char *state = NULL;

  if (peer->gone || g_get_monotonic_time () < relay->grace_until)
    return;
  heartbeat = g_strconcat (relay->key_prefix, "instance:", peer->id, NULL);
  state = g_strconcat (relay->key_prefix, "state:", peer->id, NULL);
  legba_redis_command (relay->cmd, COMMAND_TIMEOUT_MS, NULL, NULL, NULL, 7,
      (const char *[]) {
        "EVAL", reap_script, "3", heartbeat, state, relay->instances_key,
        peer->id
      }, NULL);
  peer_gone (relay, peer, "expired");
}

static Peer *
relay_get_peer (LegbaRelay * relay, const char *id, const char *run)
{
  Peer *peer = g_hash_table_lookup (relay->peers, id);

  if (peer == NULL) {
    peer = peer_new (id, run);
    g_hash_table_insert (relay->peers, peer->id, peer);
  }
  return peer;
}

/* ---- Reading the stream ---- */

typedef struct
{
  const char *o, *r, *k, *a, *c, *u, *i, *n, *x, *f;
  gsize f_len;
  guint64 s;
  gboolean replay;
} Record;

static gboolean
record_parse (redisReply * fields, Record * rec)
{
  memset (rec, 0, sizeof *rec);
  if (fields->type != REDIS_REPLY_ARRAY)
    return FALSE;
  for (gsize i = 0; i + 1 < fields->elements; i += 2) {
    redisReply *name = fields->element[i];
    redisReply *value = fields->element[i + 1];

    if (name->type != REDIS_REPLY_STRING || name->len != 1 ||
        value->type != REDIS_REPLY_STRING)
      continue;
    switch (name->str[0]) {
      case 'o':
        rec->o = value->str;
        break;
      case 'r':
        rec->r = value->str;
        break;
      case 'k':
        rec->k = value->str;
        break;
      case 'a':
        rec->a = value->str;
        break;
      case 'c':
        rec->c = value->str;
        break;
      case 'u':
        rec->u = value->str;
        break;
      case 'i':
        rec->i = value->str;
        break;
      case 'n':
        rec->n = value->str;
        break;
      case 'x':
        rec->x = value->str;
        break;
      case 'f':
        rec->f = value->str;
        rec->f_len = value->len;
        break;
      case 'p':
        rec->replay = TRUE;
        break;
      case 's':
        g_ascii_string_to_unsigned (value->str, 10, 1, G_MAXUINT64, &rec->s,
            NULL);
        break;
      default:
        break;
    }
  }
  return rec->o && rec->r && rec->k && rec->k[0] && !rec->k[1] && rec->s > 0;
}

static void
record_deliver (LegbaRelay * relay, const Record * rec)
{
  LegbaHubApp *app = legba_hub_find_app_by_id (relay->hub, rec->a);

  if (app == NULL || rec->c == NULL || rec->f == NULL)
    return;
  if (!g_str_has_prefix (rec->c, "#server-to-user-") &&
      !legba_hub_channel_name_is_valid (relay->hub, rec->c))
    return;
  /* Redis holds what instances wrote; a frame is still checked to be a
   * text frame of an object before it reaches clients. */
  if (rec->f_len < 2 || rec->f[0] != '{' || rec->f[rec->f_len - 1] != '}' ||
      !g_utf8_validate (rec->f, rec->f_len, NULL)) {
    relay->counters.invalid++;
    return;
  }
  {
    g_autoptr (GBytes) frame = g_bytes_new (rec->f, rec->f_len);

    legba_hub_cluster_deliver (relay->hub, app, rec->c, frame, rec->x);
  }
}

static void
record_state (LegbaRelay * relay, Peer * peer, const Record * rec)
{
  StateOp op = { rec->s, rec->k[0], (char *) rec->a, (char *) rec->c,
    (char *) rec->u, (char *) (rec->k[0] == 'o' ? rec->n : rec->i)
  };
  StateOp *copy;

  if (op.app == NULL || op.channel == NULL ||
      (op.kind != 'o' && op.user == NULL))
    return;
  if (peer->have_state && !peer->snapshot_pending) {
    peer_apply (relay, peer, &op);
    return;
  }
  /* Applied on top of the snapshot, when it comes. */
  copy = g_new0 (StateOp, 1);
  copy->seq = op.seq;
  copy->kind = op.kind;
  copy->app = g_strdup (op.app);
  copy->channel = g_strdup (op.channel);
  copy->user = g_strdup (op.user);
  copy->value = g_strdup (op.value);
  g_queue_push_tail (&peer->buffered, copy);
  if (!peer->snapshot_pending)
    peer_request_snapshot (relay, peer);
}

/* Whether a replayed event is new here: replays are for the instances
 * that were reading when Redis lost them, not for newcomers. */
static gboolean
record_replay_wanted (Peer * peer, const Record * rec)
{
  if (peer->last_seq > 0)
    return TRUE;
  return peer->have_state && rec->s > peer->state_seq;
}

static void
relay_receive (LegbaRelay * relay, const Record * rec)
{
  Peer *peer;
  char kind = rec->k[0];

  if (g_str_equal (rec->o, relay->instance_id))
    return;
  peer = g_hash_table_lookup (relay->peers, rec->o);
  if (peer == NULL) {
    peer = relay_get_peer (relay, rec->o, rec->r);
    peer_request_snapshot (relay, peer);
  } else if (!g_str_equal (peer->run, rec->r)) {
    /* Another run of that instance: the one known here is gone. */
    peer_set_run (relay, peer, rec->r);
    peer_request_snapshot (relay, peer);
  }
  if (rec->s <= peer->last_seq) {
    relay->counters.duplicates++;
    return;
  }
  if (rec->replay && !record_replay_wanted (peer, rec)) {
    peer->last_seq = rec->s;
    return;
  }
  if (peer->last_seq > 0 && rec->s > peer->last_seq + 1) {
    g_autofree char *count = g_strdup_printf ("%" G_GUINT64_FORMAT,
        rec->s - peer->last_seq - 1);

    relay->counters.lost += rec->s - peer->last_seq - 1;
    relay_log (relay, G_LOG_LEVEL_MESSAGE, "relay-lost", "PEER", peer->id,
        "COUNT", count);
    peer_request_snapshot (relay, peer);
  }
  peer->last_seq = rec->s;
  /* A run taken for dead: its events are still delivered (it was cut off
   * from Redis, or they are older than its death), its state waits for
   * its y. */
  if (peer->gone && strchr ("jlog", kind) != NULL)
    return;
  relay->counters.received++;
  switch (kind) {
    case 'e':
      record_deliver (relay, rec);
      break;
    case 't':{
      LegbaHubApp *app = legba_hub_find_app_by_id (relay->hub, rec->a);

      if (app != NULL && rec->u != NULL)
        legba_hub_cluster_terminate_user (relay->hub, app, rec->u);
      break;
    }
    case 'h':{
      LegbaHubApp *app = legba_hub_find_app_by_id (relay->hub, rec->a);

      if (app != NULL && rec->c != NULL &&
          legba_hub_channel_name_is_valid (relay->hub, rec->c))
        legba_hub_cluster_gate_notice (relay->hub, app, rec->c);
      break;
    }
    case 'j':
    case 'l':
    case 'o':
      record_state (relay, peer, rec);
      break;
    case 'y':
      peer->gone = FALSE;
      peer_request_snapshot (relay, peer);
      break;
    case 'g':
      peer_gone (relay, peer, "left");
      break;
    case 'n':
      break;
    default:
      relay->counters.invalid++;
      break;
  }
}

static void
on_read (LegbaRedis * redis, redisReply * reply, gpointer user_data)
{
  LegbaRelay *relay = user_data;
  redisReply *entries;

  if (reply->type == REDIS_REPLY_ERROR) {
    g_autofree char *reason = g_strdup_printf ("XREAD: %s", reply->str);

    relay_down (relay, reason);
    return;
  }
  if (reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 &&
      reply->element[0]->type == REDIS_REPLY_ARRAY &&
      reply->element[0]->elements == 2) {
    entries = reply->element[0]->element[1];
    for (gsize i = 0; entries->type == REDIS_REPLY_ARRAY &&
        i < entries->elements; i++) {
      redisReply *entry = entries->element[i];
      Record rec;

      if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2 ||
          entry->element[0]->type != REDIS_REPLY_STRING)
        continue;
      g_free (relay->last_id);
      relay->last_id = g_strdup (entry->element[0]->str);
      if (record_parse (entry->element[1], &rec))
        relay_receive (relay, &rec);
      else
        relay->counters.invalid++;
    }
  }
  if (relay->phase == PHASE_UP)
    relay_read (relay);
}

void
relay_read (LegbaRelay * relay)
{
  legba_redis_command_strings (relay->reader, READ_BLOCK_MS +
      COMMAND_TIMEOUT_MS, on_read, relay, "XREAD", "COUNT", READ_COUNT,
      "BLOCK", G_STRINGIFY (READ_BLOCK_MS), "STREAMS", relay->events_key,
      relay->last_id, NULL);
}

static void
on_instances (LegbaRedis * redis, redisReply * reply, gpointer user_data)
{
  LegbaRelay *relay = user_data;

  if (reply->type != REDIS_REPLY_ARRAY)
    return;
  /* Peers known here and not listed are checked by their heartbeat. */
  for (gsize i = 0; i < reply->elements; i++) {
    const char *id = reply->element[i]->str;

    if (id == NULL || g_str_equal (id, relay->instance_id))
      continue;
    /* The run is learnt from the snapshot. */
    peer_request_snapshot (relay, relay_get_peer (relay, id, ""));
  }
}

void
relay_read_instances (LegbaRelay * relay)
{
  legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, on_instances,
      relay, "SMEMBERS", relay->instances_key, NULL);
}

/* ---- Heartbeats ---- */

typedef struct
{
  LegbaRelay *relay;
  GPtrArray *ids;
} HeartbeatCall;

static void
heartbeat_call_free (gpointer data)
{
  HeartbeatCall *call = data;

  g_ptr_array_unref (call->ids);
  g_free (call);
}

/* Instances whose heartbeat expired (or changed run) since. */
static void
on_heartbeats (LegbaRedis * redis, redisReply * reply, gpointer user_data)
{
  HeartbeatCall *call = user_data;
  LegbaRelay *relay = call->relay;

  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != call->ids->len)
    return;
  for (guint i = 0; i < call->ids->len; i++) {
    Peer *peer = g_hash_table_lookup (relay->peers, call->ids->pdata[i]);
    redisReply *run = reply->element[i];

    if (peer == NULL)
      continue;
    if (run->type != REDIS_REPLY_STRING) {
      relay_reap (relay, peer);
    } else if (!g_str_equal (run->str, peer->run) && *peer->run != '\0') {
      /* Restarted under the same id. */
      peer_set_run (relay, peer, run->str);
      peer_request_snapshot (relay, peer);
    } else if (peer->gone) {
      /* Back after its heartbeat had expired. */
      peer->gone = FALSE;
      peer_request_snapshot (relay, peer);
    }
  }
}

/* SET ... GET answers nil when this instance's heartbeat had expired:
 * the others may have removed it, so it registers and syncs again. */
static void
on_own_heartbeat (LegbaRedis * redis, redisReply * reply, gpointer user_data)
{
  LegbaRelay *relay = user_data;

  if (reply->type == REDIS_REPLY_NIL && relay->phase == PHASE_UP) {
    relay_log (relay, G_LOG_LEVEL_MESSAGE, "relay-heartbeat-expired",
        NULL, NULL, NULL, NULL);
    relay_write_sync (relay);
    relay_register (relay);
  }
}

static void
relay_prune (LegbaRelay * relay, gint64 now)
{
  GHashTableIter iter;
  gpointer value;

  relay_prune_replay (relay, now);
  g_hash_table_iter_init (&iter, relay->peers);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    Peer *peer = value;

    if (peer->gone && now - peer->gone_at > GONE_PEER_KEEP_US)
      g_hash_table_iter_remove (&iter);
  }
}

gboolean
relay_tick (gpointer user_data)
{
  LegbaRelay *relay = user_data;
  HeartbeatCall *call;
  g_autoptr (GPtrArray) argv = NULL;
  GHashTableIter iter;
  gpointer value;

  relay_prune (relay, g_get_monotonic_time ());
  if (relay->phase != PHASE_UP)
    return G_SOURCE_CONTINUE;
  legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS,
      on_own_heartbeat, relay, "SET", relay->heartbeat_key, relay->run, "EX",
      relay->ttl_text, "GET", NULL);

  call = g_new0 (HeartbeatCall, 1);
  call->relay = relay;
  call->ids = g_ptr_array_new_with_free_func (g_free);
  argv = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (argv, g_strdup ("MGET"));
  g_hash_table_iter_init (&iter, relay->peers);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    Peer *peer = value;

    if (!peer->gone && !peer->have_state && !peer->snapshot_pending)
      peer_request_snapshot (relay, peer);
    g_ptr_array_add (call->ids, g_strdup (peer->id));
    g_ptr_array_add (argv, g_strconcat (relay->key_prefix, "instance:",
            peer->id, NULL));
  }
  if (call->ids->len == 0) {
    heartbeat_call_free (call);
    return G_SOURCE_CONTINUE;
  }
  legba_redis_command (relay->cmd, COMMAND_TIMEOUT_MS, on_heartbeats, call,
      heartbeat_call_free, argv->len, (const char **) argv->pdata, NULL);
  return G_SOURCE_CONTINUE;
}
