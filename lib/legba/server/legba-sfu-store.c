/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * SFU room placement in Redis: PREFIX "sfu:" KEY holds the room's JSON
 * (its Janus, id, pin and secret). A claim is SET NX (then GET when
 * another instance was first); a release deletes the key only while it
 * still holds the releasing instance's value (a Lua compare-and-delete),
 * so a room made again meanwhile is left alone. A room that moved to
 * another Janus replaces the key's value only while it still holds the
 * old placement (a Lua compare-and-set): of two instances that both move
 * it, the first wins and the other takes its room.
 */
#include <legba/server/legba-sfu-store.h>

#include <gio/gio.h>
#include <string.h>

/* As the relay's: Redis answers in well under a millisecond. */
#define COMMAND_TIMEOUT_MS 3000
#define CONNECT_TIMEOUT_MS 3000
#define RECONNECT_MS 1000

static const char release_script[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('DEL', KEYS[1]) else return 0 end";

static const char replace_script[] =
    "local v = redis.call('GET', KEYS[1]) "
    "if v == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end "
    "return v";

struct _LegbaSfuStore
{
  GMainContext *context;
  LegbaRedisAddress address;
  char *prefix;
  LegbaRedis *redis;            /* NULL while waiting to reconnect */
  GSource *reconnect;
};

typedef enum
{
  ASK_GET,
  ASK_CLAIM,
  ASK_RELEASE,
  ASK_REPLACE,
} AskKind;

typedef struct
{
  LegbaSfuStore *store;
  AskKind kind;
  char *key;                    /* with the prefix */
  LegbaSfuStoreFunc func;
  gpointer user_data;
  gboolean answered;
} Ask;

static void store_connect (LegbaSfuStore * store);
static void ask_send (LegbaRedis * redis, Ask * ask, const char **argv);

static gboolean
store_reconnect (gpointer user_data)
{
  LegbaSfuStore *store = user_data;

  g_clear_pointer (&store->reconnect, g_source_unref);
  store_connect (store);
  return G_SOURCE_REMOVE;
}

static void
store_closed (LegbaRedis * redis, const char *reason, gpointer user_data)
{
  LegbaSfuStore *store = user_data;

  g_message ("sfu-store-disconnected reason=\"%s\" retry_ms=%u", reason,
      RECONNECT_MS);
  legba_redis_free (store->redis);
  store->redis = NULL;
  store->reconnect = g_timeout_source_new (RECONNECT_MS);
  g_source_set_callback (store->reconnect, store_reconnect, store, NULL);
  g_source_attach (store->reconnect, store->context);
}

static void
store_ready (LegbaRedis * redis, gpointer user_data)
{
  g_message ("sfu-store-connected");
}

static void
store_connect (LegbaSfuStore * store)
{
  store->redis = legba_redis_connect (&store->address,
      store->context, CONNECT_TIMEOUT_MS, store_ready, store_closed, store);
}

LegbaSfuStore *
legba_sfu_store_new (const LegbaRedisAddress * address, const char *prefix,
    GMainContext * context)
{
  LegbaSfuStore *store = g_new0 (LegbaSfuStore, 1);

  store->context = g_main_context_ref (context);
  legba_redis_address_copy (address, &store->address);
  store->prefix = g_strconcat (prefix ? prefix : "", "sfu:", NULL);
  store_connect (store);
  return store;
}

void
legba_sfu_store_free (LegbaSfuStore * store)
{
  if (store == NULL)
    return;
  if (store->reconnect != NULL) {
    g_source_destroy (store->reconnect);
    g_source_unref (store->reconnect);
  }
  g_clear_pointer (&store->redis, legba_redis_free);
  legba_redis_address_clear (&store->address);
  g_main_context_unref (store->context);
  g_free (store->prefix);
  g_free (store);
}

static gboolean
ask_fail_idle (gpointer user_data)
{
  Ask *ask = user_data;
  g_autoptr (GError) error = g_error_new (G_IO_ERROR,
      G_IO_ERROR_NOT_CONNECTED, "the Redis of SFU room placement does not "
      "answer");

  ask->func (NULL, FALSE, error, ask->user_data);
  g_free (ask->key);
  g_free (ask);
  return G_SOURCE_REMOVE;
}

/* The ask's error, from the main loop (never from inside the call that
 * asked). */
static void
ask_fail_later (Ask * ask)
{
  GSource *idle = g_idle_source_new ();

  g_source_set_callback (idle, ask_fail_idle, ask, NULL);
  g_source_attach (idle, ask->store->context);
  g_source_unref (idle);
}

/* Every ask ends here: answered, or dropped with its connection. */
static void
ask_free (gpointer data)
{
  Ask *ask = data;

  if (!ask->answered) {
    ask_fail_later (ask);
    return;
  }
  g_free (ask->key);
  g_free (ask);
}

static void
ask_reply (LegbaRedis * redis, redisReply * reply, gpointer user_data)
{
  Ask *ask = user_data;
  g_autofree char *value = NULL;
  gboolean done = FALSE;

  if (reply->type == REDIS_REPLY_ERROR) {
    /* ask_free reports it. */
    g_message ("sfu-store-error key=%s error=\"%.*s\"", ask->key,
        (int) reply->len, reply->str);
    return;
  }
  ask->answered = TRUE;
  if (reply->type == REDIS_REPLY_STRING)
    value = g_strndup (reply->str, reply->len);
  if (ask->kind == ASK_CLAIM && reply->type == REDIS_REPLY_STATUS) {
    done = TRUE;
  } else if (ask->kind == ASK_CLAIM) {
    /* Another instance was first: its value answers instead. */
    Ask *get = g_new0 (Ask, 1);

    get->store = ask->store;
    get->kind = ASK_GET;
    get->key = g_strdup (ask->key);
    get->func = ask->func;
    get->user_data = ask->user_data;
    ask_send (redis, get, (const char *[]) { "GET", get->key, NULL });
    return;
  } else if (ask->kind == ASK_RELEASE || ask->kind == ASK_REPLACE) {
    done = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
  }
  ask->func (value, done, NULL, ask->user_data);
}

/* Sends the command (argv NULL-terminated) for ask. */
static void
ask_send (LegbaRedis * redis, Ask * ask, const char **argv)
{
  legba_redis_command (redis, COMMAND_TIMEOUT_MS, ask_reply, ask, ask_free,
      (int) g_strv_length ((char **) argv), argv, NULL);
}

static Ask *
ask_new (LegbaSfuStore * store, AskKind kind, const char *key,
    LegbaSfuStoreFunc func, gpointer user_data)
{
  Ask *ask = g_new0 (Ask, 1);

  ask->store = store;
  ask->kind = kind;
  ask->key = g_strconcat (store->prefix, key, NULL);
  ask->func = func;
  ask->user_data = user_data;
  return ask;
}

void
legba_sfu_store_get (LegbaSfuStore * store, const char *key,
    LegbaSfuStoreFunc func, gpointer user_data)
{
  Ask *ask = ask_new (store, ASK_GET, key, func, user_data);

  if (store->redis == NULL) {
    ask_fail_later (ask);
    return;
  }
  ask_send (store->redis, ask, (const char *[]) { "GET", ask->key, NULL });
}

void
legba_sfu_store_claim (LegbaSfuStore * store, const char *key,
    const char *value, LegbaSfuStoreFunc func, gpointer user_data)
{
  Ask *ask = ask_new (store, ASK_CLAIM, key, func, user_data);

  if (store->redis == NULL) {
    ask_fail_later (ask);
    return;
  }
  ask_send (store->redis, ask, (const char *[]) { "SET", ask->key, value,
        "NX", NULL
      });
}

void
legba_sfu_store_release (LegbaSfuStore * store, const char *key,
    const char *value, LegbaSfuStoreFunc func, gpointer user_data)
{
  Ask *ask = ask_new (store, ASK_RELEASE, key, func, user_data);

  if (store->redis == NULL) {
    ask_fail_later (ask);
    return;
  }
  ask_send (store->redis, ask, (const char *[]) { "EVAL", release_script,
        "1", ask->key, value, NULL
      });
}

void
legba_sfu_store_replace (LegbaSfuStore * store, const char *key,
    const char *old, const char *value, LegbaSfuStoreFunc func,
    gpointer user_data)
{
  Ask *ask = ask_new (store, ASK_REPLACE, key, func, user_data);

  if (store->redis == NULL) {
    ask_fail_later (ask);
    return;
  }
  ask_send (store->redis, ask, (const char *[]) { "EVAL", replace_script,
        "1", ask->key, old, value, NULL
      });
}
