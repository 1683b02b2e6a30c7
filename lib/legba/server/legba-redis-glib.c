/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * hiredis 0.14's asynchronous API over a GLib main context.
 *
 * hiredis asks its event library, through the hooks in
 * redisAsyncContext.ev, to watch its socket for reading and writing, and
 * calls cleanup when it frees the context. Here a LegbaRedis is itself the
 * GSource that watches that one descriptor (g_source_add_unix_fd), and it
 * is reference-counted: the owner holds one reference and hiredis another
 * until its last hook has run (cleanup for a context that never connected,
 * onDisconnect for one that did), so no hook can reach freed memory
 * whatever order things end in.
 *
 * hiredis 0.14 has no timeouts in its asynchronous API: each command
 * carries a deadline here. Redis answers a connection's commands in order,
 * so the connection is stalled as soon as its oldest unanswered command is
 * overdue; the source's prepare/check wake the main loop for that deadline
 * and the connection is then closed.
 */
#include <legba/server/legba-redis-glib.h>

#include <gio/gio.h>
#include <hiredis/async.h>

#include <poll.h>
#include <stdarg.h>
#include <string.h>

#define DEFAULT_PORT 6379

typedef struct _LegbaRedisCall LegbaRedisCall;

struct _LegbaRedisCall
{
  GList link;                   /* in LegbaRedis.calls; data: self */
  LegbaRedis *redis;
  LegbaRedisReplyFunc func;
  gpointer user_data;
  GDestroyNotify destroy;
  gint64 deadline;              /* monotonic, microseconds */
};

struct _LegbaRedis
{
  GSource source;
  redisAsyncContext *ac;        /* NULL once hiredis let it go */
  gpointer fd_tag;
  GIOCondition events;
  GQueue calls;                 /* sent and unanswered, oldest first */
  gint64 handshake_deadline;
  guint handshake_left;         /* handshake answers still due */
  LegbaRedisReadyFunc ready_func;
  LegbaRedisClosedFunc closed_func;
  gpointer user_data;
  char *reason;                 /* why it closed; NULL while it lives */
  gboolean ready;
  gboolean notified;            /* closed_func ran */
  gboolean released;            /* the owner called legba_redis_free() */
  gboolean hiredis_ref;         /* hiredis holds a reference */
};

/* ---- Addresses ---- */

static gboolean
address_fail (GError ** error, const char *what)
{
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
      "Redis URL: %s (expected redis://[:PASSWORD@]HOST[:PORT][/DB] or "
      "unix://[:PASSWORD@]/PATH[?db=N])", what);
  return FALSE;
}

static gboolean
address_parse_db (const char *text, guint * db)
{
  guint64 value;

  if (!g_ascii_string_to_unsigned (text, 10, 0, G_MAXINT, &value, NULL))
    return FALSE;
  *db = value;
  return TRUE;
}

static gboolean
address_parse_unix (GUri * uri, LegbaRedisAddress * address, GError ** error)
{
  const char *host = g_uri_get_host (uri);
  const char *path = g_uri_get_path (uri);
  const char *query = g_uri_get_query (uri);

  if (host != NULL && *host != '\0')
    return address_fail (error, "a unix:// URL has no host (unix:///PATH)");
  if (path == NULL || path[0] != '/' || path[1] == '\0')
    return address_fail (error, "unix:// needs the absolute path of the "
        "socket");
  if (query != NULL && (!g_str_has_prefix (query, "db=") ||
          !address_parse_db (query + 3, &address->db)))
    return address_fail (error, "the only query of a unix:// URL is db=N");
  address->path = g_strdup (path);
  return TRUE;
}

static gboolean
address_parse_tcp (GUri * uri, LegbaRedisAddress * address, GError ** error)
{
  const char *host = g_uri_get_host (uri);
  const char *path = g_uri_get_path (uri);
  int port = g_uri_get_port (uri);

  if (host == NULL || *host == '\0')
    return address_fail (error, "redis:// needs a host");
  if (g_uri_get_query (uri) != NULL)
    return address_fail (error, "a redis:// URL takes no query");
  if (path != NULL && *path != '\0' && !g_str_equal (path, "/") &&
      !address_parse_db (path + 1, &address->db))
    return address_fail (error, "the path of a redis:// URL is a database "
        "number");
  if (port == 0)
    return address_fail (error, "port 0");
  address->host = g_strdup (host);
  address->port = port > 0 ? (guint) port : DEFAULT_PORT;
  return TRUE;
}

gboolean
legba_redis_address_parse (const char *url, LegbaRedisAddress * address,
    GError ** error)
{
  g_autoptr (GUri) uri = NULL;
  const char *scheme, *user, *password;
  gboolean ok;

  g_return_val_if_fail (url != NULL, FALSE);
  g_return_val_if_fail (address != NULL, FALSE);

  memset (address, 0, sizeof *address);
  uri = g_uri_parse (url, G_URI_FLAGS_HAS_PASSWORD, NULL);
  if (uri == NULL)
    return address_fail (error, "not a URL");
  if (g_uri_get_fragment (uri) != NULL)
    return address_fail (error, "no #fragment");

  scheme = g_uri_get_scheme (uri);
  if (g_ascii_strcasecmp (scheme, "redis") == 0)
    ok = address_parse_tcp (uri, address, error);
  else if (g_ascii_strcasecmp (scheme, "unix") == 0)
    ok = address_parse_unix (uri, address, error);
  else
    ok = address_fail (error, "the scheme is neither redis nor unix");
  if (!ok) {
    legba_redis_address_clear (address);
    return FALSE;
  }

  user = g_uri_get_user (uri);
  password = g_uri_get_password (uri);
  if (user != NULL && *user != '\0')
    address->username = g_strdup (user);
  if (password != NULL && *password != '\0')
    address->password = g_strdup (password);
  if (address->username != NULL && address->password == NULL) {
    legba_redis_address_clear (address);
    return address_fail (error, "a user needs a password (USER:PASSWORD@)");
  }
  return TRUE;
}

void
legba_redis_address_clear (LegbaRedisAddress * address)
{
  g_clear_pointer (&address->host, g_free);
  g_clear_pointer (&address->path, g_free);
  g_clear_pointer (&address->username, g_free);
  g_clear_pointer (&address->password, g_free);
  address->port = 0;
  address->db = 0;
}

void
legba_redis_address_copy (const LegbaRedisAddress * from,
    LegbaRedisAddress * to)
{
  to->host = g_strdup (from->host);
  to->port = from->port;
  to->path = g_strdup (from->path);
  to->username = g_strdup (from->username);
  to->password = g_strdup (from->password);
  to->db = from->db;
}

char *
legba_redis_address_describe (const LegbaRedisAddress * address)
{
  if (address->path != NULL)
    return address->db ? g_strdup_printf ("unix://%s?db=%u", address->path,
        address->db) : g_strdup_printf ("unix://%s", address->path);
  if (strchr (address->host, ':') != NULL)
    return g_strdup_printf ("redis://[%s]:%u/%u", address->host,
        address->port, address->db);
  return g_strdup_printf ("redis://%s:%u/%u", address->host, address->port,
      address->db);
}

/* ---- Closing ---- */

/* *INDENT-OFF* */
static void redis_fail (LegbaRedis * redis, const char *format, ...)
    G_GNUC_PRINTF (2, 3);
/* *INDENT-ON* */

/* Records why the connection ends (the first reason wins) and wakes the
 * source, which tells the owner from the main context. */
static void
redis_fail (LegbaRedis * redis, const char *format, ...)
{
  va_list args;

  if (redis->reason == NULL) {
    va_start (args, format);
    redis->reason = g_strdup_vprintf (format, args);
    va_end (args);
  }
  if (!g_source_is_destroyed (&redis->source))
    g_main_context_wakeup (g_source_get_context (&redis->source));
}

static void
redis_release_hiredis (LegbaRedis * redis)
{
  if (!redis->hiredis_ref)
    return;
  redis->hiredis_ref = FALSE;
  g_source_unref (&redis->source);
}

/* ---- hiredis hooks ---- */

static void
redis_watch (LegbaRedis * redis, GIOCondition condition, gboolean on)
{
  GIOCondition events = on ? redis->events | condition :
      redis->events & ~condition;

  if (events == redis->events)
    return;
  redis->events = events;
  if (redis->fd_tag != NULL && !g_source_is_destroyed (&redis->source))
    g_source_modify_unix_fd (&redis->source, redis->fd_tag, events);
}

static void
ev_add_read (void *privdata)
{
  redis_watch (privdata, G_IO_IN, TRUE);
}

static void
ev_del_read (void *privdata)
{
  redis_watch (privdata, G_IO_IN, FALSE);
}

static void
ev_add_write (void *privdata)
{
  redis_watch (privdata, G_IO_OUT, TRUE);
}

static void
ev_del_write (void *privdata)
{
  redis_watch (privdata, G_IO_OUT, FALSE);
}

/* hiredis is freeing the context: stop watching its descriptor. For a
 * context that never connected this is the last hook. */
static void
ev_cleanup (void *privdata)
{
  LegbaRedis *redis = privdata;
  redisAsyncContext *ac = redis->ac;

  if (redis->fd_tag != NULL && !g_source_is_destroyed (&redis->source))
    g_source_remove_unix_fd (&redis->source, redis->fd_tag);
  redis->fd_tag = NULL;
  redis->events = 0;
  redis->ac = NULL;
  if (ac != NULL && ac->err)
    redis_fail (redis, "connection lost: %s", ac->errstr);
  else
    redis_fail (redis, "connection closed");
  if (ac == NULL || !(ac->c.flags & REDIS_CONNECTED))
    redis_release_hiredis (redis);
}

static void
on_connect (const redisAsyncContext * ac, int status)
{
  LegbaRedis *redis = ac->ev.data;

  if (status != REDIS_OK)
    redis_fail (redis, "cannot connect: %s", ac->errstr);
}

/* The last hook for a context that connected. */
static void
on_disconnect (const redisAsyncContext * ac, int status)
{
  LegbaRedis *redis = ac->ev.data;

  if (status != REDIS_OK)
    redis_fail (redis, "connection lost: %s", ac->errstr);
  else
    redis_fail (redis, "connection closed");
  redis_release_hiredis (redis);
}

static void
on_reply (redisAsyncContext * ac, void *reply, void *privdata)
{
  LegbaRedisCall *call = privdata;
  LegbaRedis *redis = call->redis;

  g_queue_unlink (&redis->calls, &call->link);
  /* NULL: hiredis is freeing the context; the owner hears of it once,
   * through closed. */
  if (reply != NULL && redis->reason == NULL && !redis->released &&
      call->func != NULL)
    call->func (redis, reply, call->user_data);
  if (call->destroy != NULL)
    call->destroy (call->user_data);
  g_free (call);
}

/* ---- The GSource ---- */

static gboolean
redis_overdue (LegbaRedis * redis, gint * timeout)
{
  LegbaRedisCall *head;
  gint64 left;

  if (redis->calls.head == NULL)
    return FALSE;
  head = redis->calls.head->data;
  left = head->deadline - g_get_monotonic_time ();
  if (left <= 0)
    return TRUE;
  if (timeout != NULL)
    *timeout = (gint) MIN ((left + 999) / 1000, G_MAXINT);
  return FALSE;
}

static gboolean
redis_prepare (GSource * source, gint * timeout)
{
  LegbaRedis *redis = (LegbaRedis *) source;

  *timeout = -1;
  if (redis->reason != NULL)
    return !redis->notified && !redis->released;
  return redis_overdue (redis, timeout);
}

static gboolean
redis_check (GSource * source)
{
  LegbaRedis *redis = (LegbaRedis *) source;

  if (redis->reason != NULL)
    return !redis->notified && !redis->released;
  return redis_overdue (redis, NULL);
}

static gboolean
redis_dispatch (GSource * source, GSourceFunc callback, gpointer user_data)
{
  LegbaRedis *redis = (LegbaRedis *) source;

  if (redis->ac != NULL && redis->fd_tag != NULL) {
    GIOCondition revents = g_source_query_unix_fd (source, redis->fd_tag);

    if (revents & G_IO_OUT)
      redisAsyncHandleWrite (redis->ac);
    if (redis->ac != NULL && (revents & (G_IO_IN | G_IO_HUP | G_IO_ERR)))
      redisAsyncHandleRead (redis->ac);
  }
  if (redis->reason == NULL && redis_overdue (redis, NULL))
    redis_fail (redis, redis->ready ? "no answer in time" :
        "timed out connecting");
  if (redis->reason == NULL || redis->notified || redis->released)
    return G_SOURCE_CONTINUE;

  /* Outside hiredis's callbacks here: freeing takes effect at once. */
  if (redis->ac != NULL)
    redisAsyncFree (redis->ac);
  redis->notified = TRUE;
  redis->closed_func (redis, redis->reason, redis->user_data);
  return G_SOURCE_CONTINUE;
}

static void
redis_finalize (GSource * source)
{
  LegbaRedis *redis = (LegbaRedis *) source;

  g_assert (redis->calls.head == NULL);
  g_free (redis->reason);
}

static GSourceFuncs redis_source_funcs = {
  redis_prepare,
  redis_check,
  redis_dispatch,
  redis_finalize,
  NULL,
  NULL,
};

/* ---- Connecting ---- */

static void
on_handshake_reply (LegbaRedis * redis, redisReply * reply, gpointer user_data)
{
  const char *step = user_data;

  if (reply->type == REDIS_REPLY_ERROR) {
    redis_fail (redis, "%s refused: %.200s", step, reply->str);
    /* Inside a callback: hiredis frees the context once it returns. */
    redisAsyncFree (redis->ac);
    return;
  }
  if (--redis->handshake_left > 0)
    return;
  redis->ready = TRUE;
  redis->ready_func (redis, redis->user_data);
}

static void
redis_handshake (LegbaRedis * redis, const LegbaRedisAddress * address,
    guint timeout_ms)
{
  g_autofree char *db = g_strdup_printf ("%u", address->db);

  /* Redis 6 ACL: AUTH USER PASSWORD; before it, AUTH PASSWORD. */
  if (address->password != NULL && address->username != NULL)
    legba_redis_command_strings (redis, timeout_ms, on_handshake_reply,
        (gpointer) "AUTH", "AUTH", address->username, address->password, NULL);
  else if (address->password != NULL)
    legba_redis_command_strings (redis, timeout_ms, on_handshake_reply,
        (gpointer) "AUTH", "AUTH", address->password, NULL);
  if (address->db != 0)
    legba_redis_command_strings (redis, timeout_ms, on_handshake_reply,
        (gpointer) "SELECT", "SELECT", db, NULL);
  legba_redis_command_strings (redis, timeout_ms, on_handshake_reply,
      (gpointer) "PING", "PING", NULL);
  redis->handshake_left = g_queue_get_length (&redis->calls);
}

LegbaRedis *
legba_redis_connect (const LegbaRedisAddress * address,
    GMainContext * context, guint timeout_ms, LegbaRedisReadyFunc ready,
    LegbaRedisClosedFunc closed, gpointer user_data)
{
  LegbaRedis *redis;
  redisAsyncContext *ac;

  g_return_val_if_fail (address != NULL, NULL);
  g_return_val_if_fail (address->host != NULL || address->path != NULL, NULL);
  g_return_val_if_fail (ready != NULL && closed != NULL, NULL);

  redis = (LegbaRedis *) g_source_new (&redis_source_funcs,
      sizeof (LegbaRedis));
  g_source_set_static_name (&redis->source, "LegbaRedis");
  g_queue_init (&redis->calls);
  redis->ready_func = ready;
  redis->closed_func = closed;
  redis->user_data = user_data;
  redis->handshake_deadline = g_get_monotonic_time () +
      timeout_ms * G_GINT64_CONSTANT (1000);
  g_source_attach (&redis->source, context);

  if (address->path != NULL)
    ac = redisAsyncConnectUnix (address->path);
  else
    ac = redisAsyncConnect (address->host, (int) address->port);
  if (ac == NULL || ac->err) {
    redis_fail (redis, "cannot connect: %s", ac ? ac->errstr : "no memory");
    if (ac != NULL)
      redisAsyncFree (ac);
    return redis;
  }

  redis->ac = ac;
  redis->hiredis_ref = TRUE;
  g_source_ref (&redis->source);
  ac->ev.data = redis;
  ac->ev.addRead = ev_add_read;
  ac->ev.delRead = ev_del_read;
  ac->ev.addWrite = ev_add_write;
  ac->ev.delWrite = ev_del_write;
  ac->ev.cleanup = ev_cleanup;
  redis->fd_tag = g_source_add_unix_fd (&redis->source, ac->c.fd, 0);
  /* Setting it asks for the descriptor's writability (connect(2) done). */
  redisAsyncSetConnectCallback (ac, on_connect);
  redisAsyncSetDisconnectCallback (ac, on_disconnect);

  /* hiredis buffers these until connect(2) completes, then writes them. */
  redis_handshake (redis, address, timeout_ms);
  return redis;
}

/* ---- Commands ---- */

void
legba_redis_command (LegbaRedis * redis, guint timeout_ms,
    LegbaRedisReplyFunc func, gpointer user_data, GDestroyNotify destroy,
    int argc, const char **argv, const size_t *argvlen)
{
  LegbaRedisCall *call;

  g_return_if_fail (redis != NULL);
  g_return_if_fail (argc > 0 && argv != NULL);

  if (redis->reason != NULL || redis->released || redis->ac == NULL) {
    if (destroy != NULL)
      destroy (user_data);
    return;
  }

  call = g_new0 (LegbaRedisCall, 1);
  call->link.data = call;
  call->redis = redis;
  call->func = func;
  call->user_data = user_data;
  call->destroy = destroy;
  call->deadline =
      g_get_monotonic_time () + timeout_ms * G_GINT64_CONSTANT (1000);
  /* Queued before the handshake ends, it cannot be due before it. */
  if (!redis->ready)
    call->deadline = MAX (call->deadline, redis->handshake_deadline);
  g_queue_push_tail_link (&redis->calls, &call->link);

  if (redisAsyncCommandArgv (redis->ac, on_reply, call, argc, argv,
          argvlen) != REDIS_OK) {
    g_queue_unlink (&redis->calls, &call->link);
    if (destroy != NULL)
      destroy (user_data);
    g_free (call);
    redis_fail (redis, "cannot send a command: %s",
        redis->ac->errstr[0] ? redis->ac->errstr : "connection closing");
  }
}

void
legba_redis_command_strings (LegbaRedis * redis, guint timeout_ms,
    LegbaRedisReplyFunc func, gpointer user_data, const char *first, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  const char *arg;
  va_list args;

  va_start (args, first);
  for (arg = first; arg != NULL; arg = va_arg (args, const char *))
      g_ptr_array_add (argv, (gpointer) arg);
  va_end (args);
  legba_redis_command (redis, timeout_ms, func, user_data, NULL, argv->len,
      (const char **) argv->pdata, NULL);
}

gboolean
legba_redis_is_ready (LegbaRedis * redis)
{
  g_return_val_if_fail (redis != NULL, FALSE);
  return redis->ready && redis->reason == NULL;
}

guint
legba_redis_get_pending (LegbaRedis * redis)
{
  g_return_val_if_fail (redis != NULL, 0);
  return g_queue_get_length (&redis->calls);
}

void
legba_redis_write_now (LegbaRedis * redis)
{
  g_return_if_fail (redis != NULL);

  if (redis->ac != NULL && redis->reason == NULL &&
      (redis->ac->c.flags & REDIS_CONNECTED) &&
      !(redis->ac->c.flags & REDIS_IN_CALLBACK))
    redisAsyncHandleWrite (redis->ac);
}

void
legba_redis_flush (LegbaRedis * redis, guint timeout_ms)
{
  gint64 deadline =
      g_get_monotonic_time () + timeout_ms * G_GINT64_CONSTANT (1000);

  g_return_if_fail (redis != NULL);

  while (redis->ac != NULL && redis->reason == NULL &&
      (redis->ac->c.flags & REDIS_CONNECTED)) {
    struct pollfd pfd = { redis->ac->c.fd, POLLOUT, 0 };
    gint64 left = deadline - g_get_monotonic_time ();
    int done = 0;

    if (redisBufferWrite (&redis->ac->c, &done) == REDIS_ERR || done ||
        left <= 0 || poll (&pfd, 1, (int) (left / 1000) + 1) <= 0)
      return;
  }
}

void
legba_redis_free (LegbaRedis * redis)
{
  if (redis == NULL)
    return;
  redis->released = TRUE;
  /* Inside one of its callbacks hiredis defers this until it returns; its
   * reference keeps this object alive until then. */
  if (redis->ac != NULL)
    redisAsyncFree (redis->ac);
  g_source_destroy (&redis->source);
  g_source_unref (&redis->source);
}
