/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaRedis: one hiredis 0.14 asynchronous connection driven by a GLib
 * main context, with the timeouts hiredis 0.14 lacks.
 *
 * Use it from the thread that runs the GMainContext given to
 * legba_redis_connect(); nothing locks. hiredis's event hooks (addRead,
 * delRead, addWrite, delWrite, cleanup) drive one GSource per connection,
 * watching the connection's file descriptor. Every command has a deadline;
 * a connection whose oldest unanswered command (or whose handshake) is
 * overdue is closed, as is one that fails or that the server closes. The
 * owner learns of it once, through its closed callback, run from the main
 * context and never from inside a reply callback.
 */
#pragma once

#include <glib.h>
#include <hiredis/hiredis.h>

G_BEGIN_DECLS

/* Where Redis is: TCP (host, port) or a Unix socket (path), with an
 * optional AUTH and database. */
typedef struct
{
  char *host;                   /* TCP, or NULL */
  guint port;
  char *path;                   /* Unix socket, or NULL */
  char *username;               /* Redis 6 ACL user, or NULL */
  char *password;               /* or NULL */
  guint db;
} LegbaRedisAddress;

/* Parses redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] (port 6379, db 0 by
 * default) or unix://[[USER]:PASSWORD@]/PATH[?db=N]; percent-escapes are
 * decoded. The error names what is wrong, never the password. */
gboolean legba_redis_address_parse (const char *url,
    LegbaRedisAddress * address, GError ** error);
void legba_redis_address_clear (LegbaRedisAddress * address);
void legba_redis_address_copy (const LegbaRedisAddress * from,
    LegbaRedisAddress * to);
/* The address for logs: redis://HOST:PORT/DB or unix://PATH, no secret. */
char *legba_redis_address_describe (const LegbaRedisAddress * address);

typedef struct _LegbaRedis LegbaRedis;

/* A command's answer. reply is never NULL; an error reply
 * (REDIS_REPLY_ERROR) is passed as it is. It belongs to hiredis. */
typedef void (*LegbaRedisReplyFunc) (LegbaRedis * redis, redisReply * reply,
    gpointer user_data);

/* The connection is up: connected, authenticated, database selected. */
typedef void (*LegbaRedisReadyFunc) (LegbaRedis * redis, gpointer user_data);

/* The connection is gone (refused, failed, timed out or closed by the
 * server); the answers still due are dropped. Called once. */
typedef void (*LegbaRedisClosedFunc) (LegbaRedis * redis, const char *reason,
    gpointer user_data);

/* Starts connecting; never fails at once: an immediate failure is reported
 * through closed, from the main context. timeout_ms bounds the connection
 * and its handshake (AUTH, SELECT, PING). */
LegbaRedis *legba_redis_connect (const LegbaRedisAddress * address,
    GMainContext * context, guint timeout_ms, LegbaRedisReadyFunc ready,
    LegbaRedisClosedFunc closed, gpointer user_data);

/* Queues one command (binary-safe arguments; argvlen may be NULL for
 * NUL-terminated ones). func (may be NULL) gets the answer, unless the
 * connection closes first; destroy (may be NULL) frees user_data in any
 * case. Commands may be queued before the connection is ready; on a closed
 * connection they are dropped. timeout_ms counts from now. */
void legba_redis_command (LegbaRedis * redis, guint timeout_ms,
    LegbaRedisReplyFunc func, gpointer user_data, GDestroyNotify destroy,
    int argc, const char **argv, const size_t *argvlen);

/* The same with NUL-terminated arguments, the list ending with NULL. */
void legba_redis_command_strings (LegbaRedis * redis, guint timeout_ms,
    LegbaRedisReplyFunc func, gpointer user_data, const char *first, ...)
    G_GNUC_NULL_TERMINATED;

gboolean legba_redis_is_ready (LegbaRedis * redis);
/* Commands sent and not answered yet. */
guint legba_redis_get_pending (LegbaRedis * redis);

/* Writes what is buffered now, as far as the socket takes it without
 * blocking, rather than when the main loop next runs (the rest follows
 * then). Does nothing from inside a reply callback. */
void legba_redis_write_now (LegbaRedis * redis);

/* Blocks for at most timeout_ms writing what is buffered (for a last word
 * before the process exits). */
void legba_redis_flush (LegbaRedis * redis, guint timeout_ms);

/* Closes the connection; no callback runs afterwards. May be called from
 * any callback of this connection. */
void legba_redis_free (LegbaRedis * redis);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (LegbaRedis, legba_redis_free);

G_END_DECLS
