/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaRelay: legba-server instances sharing rooms through Redis. The
 * behaviour in each phase (Redis up, down, back) is documented in
 * docs/scale-out.md; this comment is the map of the code.
 *
 * Keys (PREFIX is "legba:" unless configured):
 *   PREFIXevents          the stream every instance appends to and reads
 *   PREFIXinstance:ID     heartbeat of instance ID: its run, expiring
 *   PREFIXstate:ID        instance ID's share of presence and subscription
 *                         counts (a hash), with its run and the sequence
 *                         number of the last change written there
 *   PREFIXinstances       the ids of the instances with a state hash
 *   PREFIXcache:APP:CHAN  the last event of a cache channel, expiring
 *                         (legba-relay-cache.c)
 *
 * Stream entries, fields: o origin instance id, r its run (random per
 * process), s sequence number (per run, 1, 2, 3 ...), k kind, and by kind
 *   e  an event: a app id, c channel, f the frame as delivered, x the
 *      socket_id not to deliver it to (optional)
 *   t  terminate a user's connections: a, u user id
 *   h  a notice of the origin's gate (an auto room moved to its SFU): a, c
 *   j  a user joined a presence channel on the origin: a, c, u, i user_info
 *      (c "#users": the user's first connection on the origin signed in)
 *   l  ... left it: a, c, u
 *   o  the origin's subscription count of a channel: a, c, n
 *   y  the origin rewrote its whole state hash: read it again
 *   g  the origin is leaving
 *   n  nothing: the sequence number of a state change, appended again
 *      after Redis lost its data (the state hash covers the change)
 * and p = 1 on an entry appended again after Redis lost its data (events,
 * terminations, notices and n).
 *
 * Each instance writes on one connection (commands), in sequence order,
 * and reads with XREAD BLOCK on another from its last-read id. Readers
 * skip their own entries and any sequence number already seen from that
 * run, so an entry appended twice (a resend after a lost connection, a
 * replay) is delivered once. State changes (j, l, o) go to the hash and
 * the stream together; a reader takes a snapshot of an instance's hash
 * (a Lua script, atomic with the heartbeat check) when it first meets the
 * instance, when it says y, or after a gap, and applies later changes on
 * top of it.
 */
#include <legba/server/legba-relay-private.h>

#include <legba/server/legba-server-private.h>

#include <string.h>
#include <unistd.h>

/* ---- Instance ids and entries ---- */

gboolean
legba_relay_instance_id_is_valid (const char *id)
{
  gsize len = 0;

  if (id == NULL)
    return FALSE;
  for (const char *p = id; *p; p++, len++)
    if (!g_ascii_isalnum (*p) && strchr ("._-:", *p) == NULL)
      return FALSE;
  return len > 0 && len <= 64;
}

char *
legba_relay_default_instance_id (void)
{
  g_autofree char *host = g_ascii_strdown (g_get_host_name (), -1);

  for (char *p = host; *p; p++)
    if (!g_ascii_isalnum (*p) && strchr ("._-", *p) == NULL)
      *p = '-';
  host[MIN (strlen (host), 48)] = '\0';
  return g_strdup_printf ("%s-%d", host, (int) getpid ());
}

static void
entry_free (Entry * entry)
{
  g_free (entry->app);
  g_free (entry->channel);
  g_free (entry->user);
  g_free (entry->value);
  g_free (entry->except);
  g_clear_pointer (&entry->frame, g_bytes_unref);
  g_free (entry);
}

/* Only the sequence number of an entry: kind n. */
static void
entry_make_placeholder (Entry * entry)
{
  g_clear_pointer (&entry->app, g_free);
  g_clear_pointer (&entry->channel, g_free);
  g_clear_pointer (&entry->user, g_free);
  g_clear_pointer (&entry->value, g_free);
  g_clear_pointer (&entry->except, g_free);
  g_clear_pointer (&entry->frame, g_bytes_unref);
  entry->kind = 'n';
}

static gsize
entry_size (Entry * entry)
{
  return sizeof *entry + (entry->frame ? g_bytes_get_size (entry->frame) : 0);
}

char *
relay_member_key (const char *app, const char *channel, const char *user)
{
  return g_strconcat (app, SEP, channel, SEP, user, NULL);
}

char *
relay_occupancy_key (const char *app, const char *channel)
{
  return g_strconcat (app, SEP, channel, NULL);
}

/* ---- Logging ---- */

void
relay_log (LegbaRelay * relay, GLogLevelFlags level, const char *event,
    const char *key, const char *value, const char *key2, const char *value2)
{
  legba_server_log (level, event, "INSTANCE", relay->instance_id,
      "REDIS", relay->address_text, key, value, key2, value2, NULL);
}

/* ---- Writing ---- */

typedef struct
{
  GPtrArray *argv;
  GArray *lens;
  GPtrArray *owned;
} Args;

static void
args_init (Args * args)
{
  args->argv = g_ptr_array_new ();
  args->lens = g_array_new (FALSE, FALSE, sizeof (size_t));
  args->owned = g_ptr_array_new_with_free_func (g_free);
}

static void
args_clear (Args * args)
{
  g_ptr_array_unref (args->argv);
  g_array_unref (args->lens);
  g_ptr_array_unref (args->owned);
}

static void
args_add_len (Args * args, const char *arg, gsize len)
{
  g_ptr_array_add (args->argv, (gpointer) arg);
  g_array_append_val (args->lens, len);
}

static void
args_add (Args * args, const char *arg)
{
  args_add_len (args, arg, strlen (arg));
}

static void
args_take (Args * args, char *arg)
{
  g_ptr_array_add (args->owned, arg);
  args_add (args, arg);
}

static void
args_send (LegbaRelay * relay, Args * args, LegbaRedisReplyFunc func)
{
  legba_redis_command (relay->cmd, COMMAND_TIMEOUT_MS, func, relay, NULL,
      args->argv->len, (const char **) args->argv->pdata,
      (const size_t *) args->lens->data);
}

/* The state hash follows the change, in the same pipeline as its XADD. */
static void
relay_write_state (LegbaRelay * relay, Entry * entry)
{
  g_autofree char *seq = g_strdup_printf ("%" G_GUINT64_FORMAT, entry->seq);
  g_autofree char *field = NULL;
  gboolean drop;

  if (entry->kind == 'o') {
    field = g_strconcat ("o" SEP, entry->app, SEP, entry->channel, NULL);
    drop = g_str_equal (entry->value, "0");
  } else {
    field = g_strconcat ("m" SEP, entry->app, SEP, entry->channel, SEP,
        entry->user, NULL);
    drop = entry->kind == 'l';
  }
  if (drop) {
    legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, NULL, NULL,
        "HDEL", relay->state_key, field, NULL);
    legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, NULL, NULL,
        "HSET", relay->state_key, "seq", seq, NULL);
  } else {
    legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, NULL, NULL,
        "HSET", relay->state_key, field, entry->value, "seq", seq, NULL);
  }
}

static void
on_ack (LegbaRedis * redis, redisReply * reply, gpointer user_data)
{
  LegbaRelay *relay = user_data;
  Entry *entry = g_queue_pop_head (&relay->outbox);
  gint64 now = g_get_monotonic_time ();

  g_assert (entry != NULL && entry->seq != 0);
  if (reply->type == REDIS_REPLY_ERROR) {
    relay->counters.invalid++;
    relay_log (relay, G_LOG_LEVEL_WARNING, "relay-write-refused", "ERROR",
        reply->str, NULL, NULL);
    entry_free (entry);
    return;
  }
  relay->counters.published++;
  relay->counters.publish_count++;
  relay->counters.publish_us += now - entry->written_at;
  if (entry->kind == 'g') {
    entry_free (entry);
    return;
  }
  /* Kept a while: appended again should Redis come back without it. A
   * state change only as its sequence number (the state hash written on
   * reconnection covers it), so that readers see no gap. */
  if (strchr ("eth", entry->kind) == NULL)
    entry_make_placeholder (entry);
  entry->acked_at = now;
  relay->replay_bytes += entry_size (entry);
  g_queue_push_tail (&relay->replay, entry);
  while (relay->replay.length > relay->retention ||
      relay->replay_bytes > REPLAY_MAX_BYTES) {
    Entry *old = g_queue_pop_head (&relay->replay);

    relay->replay_bytes -= entry_size (old);
    entry_free (old);
  }
}

/* XADD of one entry (with its state change first); acknowledged in order
 * unless it is a replay. */
static void
relay_write (LegbaRelay * relay, Entry * entry, gboolean replay)
{
  char kind[2] = { entry->kind, '\0' };
  Args args;

  if (entry->seq == 0)
    entry->seq = ++relay->seq;
  if (!replay && strchr ("jlo", entry->kind) != NULL)
    relay_write_state (relay, entry);

  args_init (&args);
  args_add (&args, "XADD");
  args_add (&args, relay->events_key);
  args_add (&args, "MAXLEN");
  args_add (&args, "~");
  args_add (&args, relay->retention_text);
  args_add (&args, "*");
  args_add (&args, "o");
  args_add (&args, relay->instance_id);
  args_add (&args, "r");
  args_add (&args, relay->run);
  args_add (&args, "s");
  args_take (&args, g_strdup_printf ("%" G_GUINT64_FORMAT, entry->seq));
  args_add (&args, "k");
  args_add (&args, kind);
  if (entry->app != NULL) {
    args_add (&args, "a");
    args_add (&args, entry->app);
  }
  if (entry->channel != NULL) {
    args_add (&args, "c");
    args_add (&args, entry->channel);
  }
  if (entry->user != NULL) {
    args_add (&args, "u");
    args_add (&args, entry->user);
  }
  if (entry->value != NULL) {
    args_add (&args, entry->kind == 'o' ? "n" : "i");
    args_add (&args, entry->value);
  }
  if (entry->except != NULL) {
    args_add (&args, "x");
    args_add (&args, entry->except);
  }
  if (entry->frame != NULL) {
    gsize len;
    const char *data = g_bytes_get_data (entry->frame, &len);

    args_add (&args, "f");
    args_add_len (&args, data ? data : "", len);
  }
  if (replay) {
    args_add (&args, "p");
    args_add (&args, "1");
  }
  entry->written_at = g_get_monotonic_time ();
  args_send (relay, &args, replay ? NULL : on_ack);
  args_clear (&args);
}

/* Events, terminations and gate notices wait (bounded) while Redis is
 * away; state
 * changes are not kept: the whole state is written again on reconnect. */
static void
relay_push (LegbaRelay * relay, Entry * entry)
{
  if (relay->phase == PHASE_UP) {
    g_queue_push_tail (&relay->outbox, entry);
    relay_write (relay, entry, FALSE);
    return;
  }
  if (relay->phase == PHASE_LEFT || strchr ("eth", entry->kind) == NULL) {
    entry_free (entry);
    return;
  }
  if (relay->outbox.length >= relay->retention) {
    if (!relay->reported_full)
      relay_log (relay, G_LOG_LEVEL_MESSAGE, "relay-outbox-full",
          "RETENTION", relay->retention_text, NULL, NULL);
    relay->reported_full = TRUE;
    relay->counters.dropped++;
    entry_free (g_queue_pop_head (&relay->outbox));
  }
  g_queue_push_tail (&relay->outbox, entry);
}

/* HSET state run RUN seq SEQ, the fields added to it by sync_add. */
static void
sync_begin (LegbaRelay * relay, Args * args, const char *seq)
{
  args_init (args);
  args_add (args, "HSET");
  args_add (args, relay->state_key);
  args_add (args, "run");
  args_add (args, relay->run);
  args_add (args, "seq");
  args_add (args, seq);
}

/* Sends the HSET every SYNC_CHUNK fields, and starts the next. */
static void
sync_add (LegbaRelay * relay, Args * args, const char *seq, char *field,
    char *value)
{
  args_take (args, field);
  args_take (args, value);
  if (args->argv->len >= 6 + 2 * SYNC_CHUNK) {
    args_send (relay, args, NULL);
    args_clear (args);
    sync_begin (relay, args, seq);
  }
}

/* The whole state hash, written again in one transaction (a snapshot
 * never sees it half written), then y: readers take a snapshot. */
void
relay_write_sync (LegbaRelay * relay)
{
  Entry *entry = g_new0 (Entry, 1);
  g_autofree char *seq = NULL;
  GHashTableIter iter;
  gpointer key, value;
  Args args;

  entry->kind = 'y';
  entry->seq = ++relay->seq;
  seq = g_strdup_printf ("%" G_GUINT64_FORMAT, entry->seq);
  legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, NULL, NULL,
      "MULTI", NULL);
  legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, NULL, NULL,
      "DEL", relay->state_key, NULL);
  sync_begin (relay, &args, seq);
  g_hash_table_iter_init (&iter, relay->local_members);
  while (g_hash_table_iter_next (&iter, &key, &value))
    sync_add (relay, &args, seq, g_strconcat ("m" SEP, key, NULL),
        g_strdup (value));
  g_hash_table_iter_init (&iter, relay->local_occupancy);
  while (g_hash_table_iter_next (&iter, &key, &value))
    sync_add (relay, &args, seq, g_strconcat ("o" SEP, key, NULL),
        g_strdup_printf ("%u", GPOINTER_TO_UINT (value)));
  args_send (relay, &args, NULL);
  args_clear (&args);
  legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, NULL, NULL,
      "EXEC", NULL);
  g_hash_table_remove_all (relay->dirty_occupancy);

  g_queue_push_tail (&relay->outbox, entry);
  relay_write (relay, entry, FALSE);
}

static gboolean
relay_flush_occupancy (gpointer user_data)
{
  LegbaRelay *relay = user_data;
  GHashTableIter iter;
  gpointer key;

  g_clear_pointer (&relay->flush, g_source_unref);
  if (relay->phase != PHASE_UP)
    return G_SOURCE_REMOVE;
  g_hash_table_iter_init (&iter, relay->dirty_occupancy);
  while (g_hash_table_iter_next (&iter, &key, NULL)) {
    g_auto (GStrv) parts = g_strsplit (key, SEP, 2);
    Entry *entry = g_new0 (Entry, 1);

    entry->kind = 'o';
    entry->app = g_strdup (parts[0]);
    entry->channel = g_strdup (parts[1]);
    entry->value = g_strdup_printf ("%u", GPOINTER_TO_UINT
        (g_hash_table_lookup (relay->local_occupancy, key)));
    relay_push (relay, entry);
  }
  g_hash_table_remove_all (relay->dirty_occupancy);
  return G_SOURCE_REMOVE;
}

void
relay_prune_replay (LegbaRelay * relay, gint64 now)
{
  while (relay->replay.length > 0 &&
      now - ((Entry *) relay->replay.head->data)->acked_at >
      REPLAY_MAX_AGE_US) {
    Entry *old = g_queue_pop_head (&relay->replay);

    relay->replay_bytes -= entry_size (old);
    entry_free (old);
  }
}

/* ---- Hub callbacks: what this instance does ---- */

static void
hub_event (LegbaHubApp * app, const char *channel, GBytes * frame,
    const char *except_socket_id, gpointer user_data)
{
  LegbaRelay *relay = user_data;
  Entry *entry = g_new0 (Entry, 1);

  entry->kind = 'e';
  entry->app = g_strdup (legba_hub_app_get_id (app));
  entry->channel = g_strdup (channel);
  entry->except = g_strdup (except_socket_id);
  entry->frame = g_bytes_ref (frame);
  relay_push (relay, entry);
  /* Out at once: the hub fans out locally next, which takes a while with
   * many sockets, and the others can fan out meanwhile. */
  if (relay->phase == PHASE_UP)
    legba_redis_write_now (relay->cmd);
}

static void
hub_member (LegbaHubApp * app, const char *channel, const char *user_id,
    const char *user_info, gboolean present, gpointer user_data)
{
  LegbaRelay *relay = user_data;
  const char *app_id = legba_hub_app_get_id (app);
  char *key = relay_member_key (app_id, channel, user_id);
  Entry *entry;

  if (present) {
    g_hash_table_replace (relay->local_members, key,
        g_strdup (user_info ? user_info : ""));
  } else {
    g_hash_table_remove (relay->local_members, key);
    g_free (key);
  }
  if (relay->phase != PHASE_UP)
    return;
  entry = g_new0 (Entry, 1);
  entry->kind = present ? 'j' : 'l';
  entry->app = g_strdup (app_id);
  entry->channel = g_strdup (channel);
  entry->user = g_strdup (user_id);
  if (present)
    entry->value = g_strdup (user_info ? user_info : "");
  relay_push (relay, entry);
}

static void
hub_subscriptions (LegbaHubApp * app, const char *channel, guint count,
    gpointer user_data)
{
  LegbaRelay *relay = user_data;
  char *key = relay_occupancy_key (legba_hub_app_get_id (app), channel);

  g_hash_table_add (relay->dirty_occupancy, g_strdup (key));
  if (count > 0)
    g_hash_table_replace (relay->local_occupancy, key,
        GUINT_TO_POINTER (count));
  else {
    g_hash_table_remove (relay->local_occupancy, key);
    g_free (key);
  }
  if (relay->phase != PHASE_UP || relay->flush != NULL)
    return;
  relay->flush = g_timeout_source_new (OCCUPANCY_FLUSH_MS);
  g_source_set_callback (relay->flush, relay_flush_occupancy, relay, NULL);
  g_source_attach (relay->flush, relay->context);
}

static void
hub_terminate_user (LegbaHubApp * app, const char *user_id, gpointer user_data)
{
  Entry *entry = g_new0 (Entry, 1);

  entry->kind = 't';
  entry->app = g_strdup (legba_hub_app_get_id (app));
  entry->user = g_strdup (user_id);
  relay_push (user_data, entry);
}

static void
hub_gate_notice (LegbaHubApp * app, const char *channel, gpointer user_data)
{
  LegbaRelay *relay = user_data;
  Entry *entry = g_new0 (Entry, 1);

  entry->kind = 'h';
  entry->app = g_strdup (legba_hub_app_get_id (app));
  entry->channel = g_strdup (channel);
  relay_push (relay, entry);
  /* Members elsewhere wait for it (an auto room's move) */
  if (relay->phase == PHASE_UP)
    legba_redis_write_now (relay->cmd);
}

static const LegbaHubCluster relay_cluster = {
  hub_event,
  hub_member,
  hub_subscriptions,
  hub_terminate_user,
  relay_cache_store,
  relay_cache_lookup,
  hub_gate_notice,
};

/* ---- Connecting ---- */

void
relay_register (LegbaRelay * relay)
{
  legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, NULL, NULL,
      "SET", relay->heartbeat_key, relay->run, "EX", relay->ttl_text, NULL);
  legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, NULL, NULL,
      "SADD", relay->instances_key, relay->instance_id, NULL);
}

static void
relay_up (LegbaRelay * relay, gboolean redis_restarted)
{
  g_autofree char *outbox = g_strdup_printf ("%u", relay->outbox.length);

  relay->phase = PHASE_UP;
  relay->backoff_ms = BACKOFF_MIN_MS;
  relay->reported_down = FALSE;
  relay->reported_full = FALSE;
  relay->counters.connects++;
  relay_log (relay, G_LOG_LEVEL_MESSAGE, "redis-connected", "FROM_ID",
      relay->last_id, "OUTBOX", outbox);

  /* Redis lost what was acknowledged: append it again for the instances
   * that had not read it (they skip what they had). It lost the others'
   * heartbeats too: they have their own reconnection delay and then a TTL
   * to come back before their members go. */
  if (redis_restarted) {
    relay->counters.redis_restarts++;
    relay->grace_until = g_get_monotonic_time () +
        relay->instance_ttl * G_USEC_PER_SEC + RECONNECT_MAX_MS * 1000;
    for (GList * l = relay->replay.head; l != NULL; l = l->next) {
      relay_write (relay, l->data, TRUE);
      relay->counters.replayed += ((Entry *) l->data)->kind != 'n';
    }
  }
  /* Unacknowledged first (same sequence numbers), then what waited. */
  for (GList * l = relay->outbox.head; l != NULL; l = l->next)
    relay_write (relay, l->data, FALSE);
  /* State first: a heartbeat tells the others the state is there. */
  relay_write_sync (relay);
  relay_register (relay);
  relay_read_instances (relay);
  relay_read (relay);
}

static const char *
reply_first_id (redisReply * reply)
{
  if (reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 &&
      reply->element[0]->type == REDIS_REPLY_ARRAY &&
      reply->element[0]->elements > 0 &&
      reply->element[0]->element[0]->type == REDIS_REPLY_STRING)
    return reply->element[0]->element[0]->str;
  return NULL;
}

/* First connection: read from the end of the stream as it is now. */
static void
on_tail (LegbaRedis * redis, redisReply * reply, gpointer user_data)
{
  LegbaRelay *relay = user_data;
  const char *id = reply_first_id (reply);

  relay->last_id = g_strdup (id ? id : "0-0");
  relay_up (relay, FALSE);
}

/* A new Redis process: if it kept the stream (persistence), go on from
 * the last id read; otherwise read its new stream from the start. */
static void
on_resume (LegbaRedis * redis, redisReply * reply, gpointer user_data)
{
  LegbaRelay *relay = user_data;

  if (reply_first_id (reply) == NULL) {
    g_free (relay->last_id);
    relay->last_id = g_strdup ("0-0");
  }
  relay_up (relay, TRUE);
}

static void
on_info (LegbaRedis * redis, redisReply * reply, gpointer user_data)
{
  LegbaRelay *relay = user_data;
  const char *found;
  g_autofree char *run_id = NULL;
  gboolean restarted;

  if (reply->type != REDIS_REPLY_STRING ||
      (found = strstr (reply->str, "run_id:")) == NULL) {
    relay_down (relay, "INFO server gave no run_id");
    return;
  }
  run_id = g_strndup (found + 7, strcspn (found + 7, "\r\n"));
  restarted = relay->redis_run_id != NULL &&
      !g_str_equal (relay->redis_run_id, run_id);
  g_free (relay->redis_run_id);
  relay->redis_run_id = g_steal_pointer (&run_id);

  if (relay->last_id == NULL)
    legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, on_tail,
        relay, "XREVRANGE", relay->events_key, "+", "-", "COUNT", "1", NULL);
  else if (restarted)
    legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, on_resume,
        relay, "XRANGE", relay->events_key, relay->last_id, relay->last_id,
        NULL);
  else
    relay_up (relay, FALSE);
}

static void
on_redis_ready (LegbaRedis * redis, gpointer user_data)
{
  LegbaRelay *relay = user_data;

  if (!legba_redis_is_ready (relay->cmd) ||
      !legba_redis_is_ready (relay->reader))
    return;
  legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, on_info,
      relay, "INFO", "server", NULL);
}

static void
on_redis_closed (LegbaRedis * redis, const char *reason, gpointer user_data)
{
  relay_down (user_data, reason);
}

static gboolean
relay_reconnect (gpointer user_data)
{
  LegbaRelay *relay = user_data;

  g_clear_pointer (&relay->reconnect, g_source_unref);
  relay->phase = PHASE_CONNECTING;
  relay->cmd = legba_redis_connect (&relay->address, relay->context,
      CONNECT_TIMEOUT_MS, on_redis_ready, on_redis_closed, relay);
  relay->reader = legba_redis_connect (&relay->address, relay->context,
      CONNECT_TIMEOUT_MS, on_redis_ready, on_redis_closed, relay);
  return G_SOURCE_REMOVE;
}

static void
relay_disconnect (LegbaRelay * relay)
{
  g_clear_pointer (&relay->cmd, legba_redis_free);
  g_clear_pointer (&relay->reader, legba_redis_free);
  if (relay->flush != NULL) {
    g_source_destroy (relay->flush);
    g_clear_pointer (&relay->flush, g_source_unref);
  }
}

/* Either connection failed: serve locally, retry after a backoff. What
 * was written and not acknowledged stays in the outbox for a resend. */
void
relay_down (LegbaRelay * relay, const char *reason)
{
  g_autofree char *retry = NULL;
  GHashTableIter iter;
  gpointer value;
  guint delay;

  if (relay->phase == PHASE_UP)
    relay->counters.disconnects++;
  relay_disconnect (relay);
  if (relay->phase == PHASE_LEFT)
    return;
  relay->phase = PHASE_DOWN;
  g_hash_table_iter_init (&iter, relay->peers);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    ((Peer *) value)->snapshot_pending = FALSE;

  delay = relay->backoff_ms + g_random_int_range (0, relay->backoff_ms / 5 + 1);
  relay->backoff_ms = MIN (relay->backoff_ms * 2, BACKOFF_MAX_MS);
  retry = g_strdup_printf ("%u", delay);
  relay_log (relay, relay->reported_down ? G_LOG_LEVEL_INFO :
      G_LOG_LEVEL_MESSAGE, "redis-disconnected", "REASON", reason,
      "RETRY_MS", retry);
  relay->reported_down = TRUE;

  relay->reconnect = g_timeout_source_new (delay);
  g_source_set_callback (relay->reconnect, relay_reconnect, relay, NULL);
  g_source_attach (relay->reconnect, relay->context);
}

/* ---- Life cycle ---- */

LegbaRelay *
legba_relay_new (LegbaHub * hub, GMainContext * context,
    const LegbaRelayConfig * config)
{
  LegbaRelay *relay;
  const char *prefix;

  g_return_val_if_fail (hub != NULL, NULL);
  g_return_val_if_fail (config != NULL, NULL);
  g_return_val_if_fail (legba_relay_instance_id_is_valid
      (config->instance_id), NULL);

  relay = g_new0 (LegbaRelay, 1);
  relay->hub = hub;
  relay->context = g_main_context_ref (context ? context :
      g_main_context_default ());
  legba_redis_address_copy (&config->address, &relay->address);
  relay->address_text = legba_redis_address_describe (&config->address);
  relay->instance_id = g_strdup (config->instance_id);
  relay->run = g_strdup_printf ("%08x%08x", g_random_int (), g_random_int ());
  relay->retention = MAX (config->retention, LEGBA_RELAY_MIN_RETENTION);
  relay->instance_ttl = MAX (config->instance_ttl,
      LEGBA_RELAY_MIN_INSTANCE_TTL);
  relay->retention_text = g_strdup_printf ("%u", relay->retention);
  relay->ttl_text = g_strdup_printf ("%u", relay->instance_ttl);
  prefix = config->prefix ? config->prefix : LEGBA_RELAY_DEFAULT_PREFIX;
  relay->key_prefix = g_strdup (prefix);
  relay->events_key = g_strconcat (prefix, "events", NULL);
  relay->instances_key = g_strconcat (prefix, "instances", NULL);
  relay->heartbeat_key = g_strconcat (prefix, "instance:",
      relay->instance_id, NULL);
  relay->state_key = g_strconcat (prefix, "state:", relay->instance_id, NULL);
  relay->backoff_ms = BACKOFF_MIN_MS;
  g_queue_init (&relay->outbox);
  g_queue_init (&relay->replay);
  g_queue_init (&relay->cache_unanswered);
  relay->peers = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
      (GDestroyNotify) relay_peer_free);
  relay->local_members = g_hash_table_new_full (g_str_hash, g_str_equal,
      g_free, g_free);
  relay->local_occupancy = g_hash_table_new_full (g_str_hash, g_str_equal,
      g_free, NULL);
  relay->dirty_occupancy = g_hash_table_new_full (g_str_hash, g_str_equal,
      g_free, NULL);
  legba_hub_set_cluster (hub, &relay_cluster, relay);
  return relay;
}

void
legba_relay_start (LegbaRelay * relay)
{
  g_return_if_fail (relay != NULL);

  if (relay->phase != PHASE_IDLE)
    return;
  relay->tick = g_timeout_source_new (TICK_MS);
  g_source_set_callback (relay->tick, relay_tick, relay, NULL);
  g_source_attach (relay->tick, relay->context);
  relay_reconnect (relay);
}

void
legba_relay_leave (LegbaRelay * relay)
{
  Entry *entry;

  g_return_if_fail (relay != NULL);

  if (relay->phase == PHASE_UP) {
    entry = g_new0 (Entry, 1);
    entry->kind = 'g';
    g_queue_push_tail (&relay->outbox, entry);
    relay_write (relay, entry, FALSE);
    legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, NULL, NULL,
        "DEL", relay->heartbeat_key, relay->state_key, NULL);
    legba_redis_command_strings (relay->cmd, COMMAND_TIMEOUT_MS, NULL, NULL,
        "SREM", relay->instances_key, relay->instance_id, NULL);
  }
  if (relay->reconnect != NULL) {
    g_source_destroy (relay->reconnect);
    g_clear_pointer (&relay->reconnect, g_source_unref);
  }
  relay->phase = PHASE_LEFT;
}

void
legba_relay_free (LegbaRelay * relay)
{
  if (relay == NULL)
    return;
  legba_hub_set_cluster (relay->hub, NULL, NULL);
  if (relay->cmd != NULL)
    legba_redis_flush (relay->cmd, 500);
  relay_disconnect (relay);
  relay_cache_clear (relay);
  if (relay->reconnect != NULL)
    g_source_destroy (relay->reconnect);
  g_clear_pointer (&relay->reconnect, g_source_unref);
  if (relay->tick != NULL)
    g_source_destroy (relay->tick);
  g_clear_pointer (&relay->tick, g_source_unref);
  g_queue_clear_full (&relay->outbox, (GDestroyNotify) entry_free);
  g_queue_clear_full (&relay->replay, (GDestroyNotify) entry_free);
  g_hash_table_unref (relay->peers);
  g_hash_table_unref (relay->local_members);
  g_hash_table_unref (relay->local_occupancy);
  g_hash_table_unref (relay->dirty_occupancy);
  legba_redis_address_clear (&relay->address);
  g_free (relay->address_text);
  g_free (relay->instance_id);
  g_free (relay->run);
  g_free (relay->retention_text);
  g_free (relay->ttl_text);
  g_free (relay->key_prefix);
  g_free (relay->events_key);
  g_free (relay->instances_key);
  g_free (relay->heartbeat_key);
  g_free (relay->state_key);
  g_free (relay->redis_run_id);
  g_free (relay->last_id);
  g_main_context_unref (relay->context);
  g_free (relay);
}

const char *
legba_relay_get_instance_id (LegbaRelay * relay)
{
  g_return_val_if_fail (relay != NULL, NULL);
  return relay->instance_id;
}

gboolean
legba_relay_is_up (LegbaRelay * relay)
{
  g_return_val_if_fail (relay != NULL, FALSE);
  return relay->phase == PHASE_UP;
}

/* ---- /metrics ---- */

static void
metric (GString * out, const char *name, const char *type, const char *help,
    guint64 value)
{
  g_string_append_printf (out, "# HELP %s %s\n# TYPE %s %s\n%s %"
      G_GUINT64_FORMAT "\n", name, help, name, type, name, value);
}

gboolean
legba_relay_is_webhook_sender (LegbaRelay * relay)
{
  GHashTableIter iter;
  gpointer value;

  g_return_val_if_fail (relay != NULL, TRUE);

  if (relay->in_snapshot)
    return FALSE;
  if (relay->phase != PHASE_UP)
    return TRUE;
  g_hash_table_iter_init (&iter, relay->peers);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    Peer *peer = value;

    if (!peer->gone && strcmp (peer->id, relay->instance_id) < 0)
      return FALSE;
  }
  return TRUE;
}

void
legba_relay_render_metrics (LegbaRelay * relay, GString * out)
{
  const RelayCounters *c = &relay->counters;
  GHashTableIter iter;
  gpointer value;
  guint live = 0;

  g_return_if_fail (relay != NULL);

  g_hash_table_iter_init (&iter, relay->peers);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    live += !((Peer *) value)->gone;

  g_string_append_printf (out, "# HELP legba_relay_info Instance id of this "
      "legba-server in its cluster.\n# TYPE legba_relay_info gauge\n"
      "legba_relay_info{instance=\"%s\"} 1\n", relay->instance_id);
  metric (out, "legba_relay_up", "gauge",
      "1 while connected to Redis and relaying, else 0.",
      relay->phase == PHASE_UP);
  metric (out, "legba_relay_connects_total", "counter",
      "Connections to Redis established.", c->connects);
  metric (out, "legba_relay_disconnects_total", "counter",
      "Connections to Redis lost.", c->disconnects);
  metric (out, "legba_relay_redis_restarts_total", "counter",
      "Reconnections to a Redis that had restarted (new run_id).",
      c->redis_restarts);
  metric (out, "legba_relay_published_total", "counter",
      "Stream entries this instance appended (acknowledged by Redis).",
      c->published);
  metric (out, "legba_relay_received_total", "counter",
      "Stream entries from other instances applied here.", c->received);
  metric (out, "legba_relay_duplicates_total", "counter",
      "Stream entries skipped as already applied (resends, replays).",
      c->duplicates);
  metric (out, "legba_relay_lost_total", "counter",
      "Entries of other instances never read here (trimmed or lost by "
      "Redis), from gaps in their sequence numbers.", c->lost);
  metric (out, "legba_relay_dropped_total", "counter",
      "Events not relayed: the outbox was full while Redis was away.",
      c->dropped);
  metric (out, "legba_relay_replayed_total", "counter",
      "Events and terminations appended again after Redis came back "
      "without them.", c->replayed);
  metric (out, "legba_relay_outbox", "gauge",
      "Entries waiting for Redis (unacknowledged or unsent).",
      relay->outbox.length);
  metric (out, "legba_relay_instances", "gauge",
      "Other instances known alive.", live);
  metric (out, "legba_relay_instances_expired_total", "counter",
      "Other instances removed because their heartbeat expired.", c->expired);
  metric (out, "legba_relay_snapshots_total", "counter",
      "Snapshots of other instances' state applied.", c->snapshots);
  metric (out, "legba_relay_invalid_total", "counter",
      "Stream entries or answers that could not be used.", c->invalid);
  g_string_append_printf (out, "# HELP legba_relay_append_seconds Time from "
      "writing an entry to Redis acknowledging it.\n"
      "# TYPE legba_relay_append_seconds summary\n"
      "legba_relay_append_seconds_sum %.6f\n"
      "legba_relay_append_seconds_count %" G_GUINT64_FORMAT "\n",
      c->publish_us / 1e6, c->publish_count);
}
