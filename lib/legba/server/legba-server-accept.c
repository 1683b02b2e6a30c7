/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaServer's listening sockets. The server accepts its connections
 * itself and hands each to libsoup (soup_server_accept_iostream()): the
 * listener of libsoup 3 stops for good at the first accept() that fails,
 * one at the descriptor limit included, and never says so. Here:
 *
 * - at the descriptor limit, a descriptor kept in reserve is let go for
 *   the time of one accept(), so that the connection is closed at once
 *   (refused) rather than left waiting in the backlog, and accepting goes
 *   on; when even that is not possible, accepting pauses and is tried
 *   again a second later, or as soon as a connection ends;
 * - connections not yet a WebSocket nor answered (the TLS handshake, the
 *   HTTP request; "pending") are bounded per listener (past
 *   max-pending-connections accepting pauses until one ends) and per
 *   source address (past max-pending-per-address a new one is refused),
 *   and each has handshake-timeout seconds, after which it is shut down;
 * - a request refused from its headers (legba_acceptor_refuse()) is
 *   answered at once with a response written here, without its body.
 *
 * libsoup still gets each listening socket, on a main context that is
 * never run (so it never accepts from it): libsoup keeps HTTP connections
 * alive only while it has a listener.
 */
#define _GNU_SOURCE             /* accept4() */
#define LEGBA_SERVER_INTERNALS
#include <legba/server/legba-server-private.h>

#include <legba/legba-version.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Connections taken per wakeup of a listening socket, so that a burst of
 * them does not hold the main loop. */
#define ACCEPT_BATCH 64

/* After accept() failed with no way to refuse the connection, how long
 * before it is tried again (a connection that ends tries at once). */
#define ACCEPT_RETRY_MS 1000

/* How long a connection answered from its request headers keeps reading
 * (and dropping) what its client still sends, so that the client reads
 * the response instead of a connection reset. */
#define REFUSE_LINGER_MS 1000

typedef struct
{
  LegbaAcceptor *acceptor;
  GSocket *socket;
  GSource *source;              /* NULL while accepting is paused */
} LegbaListener;

struct _LegbaAcceptor
{
  LegbaServer *server;
  SoupServer *soup;
  GMainContext *soup_context;   /* libsoup's listeners', never run */
  GPtrArray *listeners;         /* LegbaListener */
  GHashTable *pending;          /* LegbaPending set, owns them */
  GHashTable *per_source;       /* source key -> count (as pointer) */
  GSource *retry;               /* paused after a failed accept() */
  gboolean paused;              /* at max-pending-connections */
  gboolean stopped;
  guint64 refused_run;          /* refused at the descriptor limit since
                                 * the last connection accepted */
};

/* A connection accepted and not yet a WebSocket nor done with. It ends
 * when libsoup lets go of its stream (watched with a weak reference), or
 * at the upgrade to WebSocket. */
typedef struct
{
  LegbaAcceptor *acceptor;
  GSocket *socket;
  GIOStream *stream;            /* libsoup's (weak), NULL once gone */
  GSocketAddress *remote;       /* the one libsoup has, leads back here */
  char *source;                 /* per-address key */
  char *remote_s;
  GSource *timer;
  /* Answered from its headers: the stream taken back from libsoup, and
   * what the client still sends being dropped. */
  GIOStream *refusing;
  GSource *drain;
} LegbaPending;

static GQuark
legba_pending_quark (void)
{
  static GQuark quark;

  if (quark == 0)
    quark = g_quark_from_static_string ("legba-pending");
  return quark;
}

static void legba_acceptor_update (LegbaAcceptor * self, gboolean freed);
static void legba_pending_stream_gone (gpointer data,
    GObject * where_the_stream_was);

/* ---- Source addresses ---- */

/* The key max-pending-per-address counts by: the IPv4 address, or the
 * /64 prefix of an IPv6 one (what one client usually has to itself). */
static char *
legba_source_key (GSocketAddress * address)
{
  GInetAddress *inet;
  guint8 bytes[16];
  g_autoptr (GInetAddress) prefix = NULL;
  g_autofree char *text = NULL;

  if (!G_IS_INET_SOCKET_ADDRESS (address))
    return g_strdup ("-");
  inet = g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (address));
  if (g_inet_address_get_family (inet) != G_SOCKET_FAMILY_IPV6)
    return g_inet_address_to_string (inet);
  memcpy (bytes, g_inet_address_to_bytes (inet), sizeof bytes);
  memset (bytes + 8, 0, 8);
  prefix = g_inet_address_new_from_bytes (bytes, G_SOCKET_FAMILY_IPV6);
  text = g_inet_address_to_string (prefix);
  return g_strconcat (text, "/64", NULL);
}

static guint
legba_acceptor_source_count (LegbaAcceptor * self, const char *key)
{
  return GPOINTER_TO_UINT (g_hash_table_lookup (self->per_source, key));
}

static void
legba_acceptor_source_add (LegbaAcceptor * self, const char *key, gint delta)
{
  guint count = legba_acceptor_source_count (self, key) + delta;

  if (count == 0)
    g_hash_table_remove (self->per_source, key);
  else
    g_hash_table_insert (self->per_source, g_strdup (key),
        GUINT_TO_POINTER (count));
}

/* ---- Pending connections ---- */

static void
legba_pending_free (gpointer data)
{
  LegbaPending *p = data;

  if (p->timer != NULL) {
    g_source_destroy (p->timer);
    g_source_unref (p->timer);
  }
  if (p->drain != NULL) {
    g_source_destroy (p->drain);
    g_source_unref (p->drain);
  }
  if (p->stream != NULL)
    g_object_weak_unref (G_OBJECT (p->stream), legba_pending_stream_gone, p);
  g_object_set_qdata (G_OBJECT (p->remote), legba_pending_quark (), NULL);
  /* Otherwise the socket is libsoup's, or the WebSocket's. */
  if (p->refusing != NULL) {
    g_io_stream_close (p->refusing, NULL, NULL);
    g_object_unref (p->refusing);
    g_socket_close (p->socket, NULL);
  }
  g_object_unref (p->socket);
  g_object_unref (p->remote);
  g_free (p->source);
  g_free (p->remote_s);
  g_free (p);
}

/* The connection no longer counts as pending. */
static void
legba_pending_end (LegbaPending * p)
{
  LegbaAcceptor *self = p->acceptor;

  legba_acceptor_source_add (self, p->source, -1);
  g_hash_table_remove (self->pending, p);
  legba_acceptor_update (self, TRUE);
}

static void
legba_pending_stream_gone (gpointer data, GObject * where_the_stream_was)
{
  LegbaPending *p = data;

  p->stream = NULL;
  legba_pending_end (p);
}

static LegbaPending *
legba_pending_of (SoupServerMessage * msg)
{
  GSocketAddress *remote = soup_server_message_get_remote_address (msg);

  return remote ? g_object_get_qdata (G_OBJECT (remote),
      legba_pending_quark ()) : NULL;
}

static void legba_pending_finish_refusal (LegbaPending * p);

static gboolean
legba_pending_timeout (gpointer user_data)
{
  LegbaPending *p = user_data;
  LegbaServer *server = p->acceptor->server;

  g_clear_pointer (&p->timer, g_source_unref);
  if (p->refusing != NULL) {
    legba_pending_finish_refusal (p);
    return G_SOURCE_REMOVE;
  }
  legba_metrics_count_accept (server->metrics, LEGBA_ACCEPT_HANDSHAKE_TIMEOUT);
  legba_server_log (G_LOG_LEVEL_INFO, "http-timeout", "REMOTE", p->remote_s,
      NULL);
  /* libsoup reads the end of the stream (or fails to write) and lets go
   * of the connection, which then ends here. */
  g_socket_shutdown (p->socket, TRUE, TRUE, NULL);
  return G_SOURCE_REMOVE;
}

static void
legba_pending_arm (LegbaPending * p, guint ms)
{
  if (p->timer != NULL) {
    g_source_destroy (p->timer);
    g_source_unref (p->timer);
  }
  p->timer = g_timeout_source_new (ms);
  g_source_set_callback (p->timer, legba_pending_timeout, p, NULL);
  g_source_attach (p->timer, p->acceptor->server->context);
}

/* ---- Accepting ---- */

static gboolean
legba_acceptor_is_watching (LegbaAcceptor * self)
{
  return !self->stopped && !self->paused && self->retry == NULL;
}

static gboolean legba_acceptor_ready (GSocket * socket, GIOCondition condition,
    gpointer user_data);

static void
legba_listener_watch (LegbaListener * l, gboolean on)
{
  if (on && l->source == NULL) {
    l->source = g_socket_create_source (l->socket, G_IO_IN, NULL);
    g_source_set_callback (l->source, (GSourceFunc) G_CALLBACK
        (legba_acceptor_ready), l, NULL);
    g_source_attach (l->source, l->acceptor->server->context);
  } else if (!on && l->source != NULL) {
    g_source_destroy (l->source);
    g_clear_pointer (&l->source, g_source_unref);
  }
}

/* Pauses accepting at max-pending-connections, resumes below it; freed:
 * a connection ended. */
static void
legba_acceptor_update (LegbaAcceptor * self, gboolean freed)
{
  guint max = self->server->max_pending_connections;
  guint n = g_hash_table_size (self->pending);

  if (!self->paused && max > 0 && n >= max) {
    g_autofree char *n_s = g_strdup_printf ("%u", n);

    self->paused = TRUE;
    legba_metrics_count_accept (self->server->metrics,
        LEGBA_ACCEPT_PAUSED_PENDING);
    legba_server_log (G_LOG_LEVEL_MESSAGE, "accept-paused",
        "REASON", "max-pending-connections", "PENDING", n_s, NULL);
  } else if (self->paused && (max == 0 || n < max)) {
    self->paused = FALSE;
    legba_server_log (G_LOG_LEVEL_MESSAGE, "accept-resumed", NULL);
  }
  /* A connection that ends frees a descriptor: no need to wait for the
   * retry after a failed accept(). */
  if (freed && self->retry != NULL) {
    g_source_destroy (self->retry);
    g_clear_pointer (&self->retry, g_source_unref);
  }
  for (guint i = 0; i < self->listeners->len; i++)
    legba_listener_watch (g_ptr_array_index (self->listeners, i),
        legba_acceptor_is_watching (self));
}

static gboolean
legba_acceptor_retry (gpointer user_data)
{
  LegbaAcceptor *self = user_data;

  g_clear_pointer (&self->retry, g_source_unref);
  legba_acceptor_update (self, FALSE);
  return G_SOURCE_REMOVE;
}

/* accept() failed in a way no connection can be refused cleanly for (no
 * descriptor in reserve, no memory): accepting pauses for a while. */
static void
legba_acceptor_pause_on_error (LegbaAcceptor * self, int errsv)
{
  if (self->retry != NULL)
    return;
  legba_metrics_count_accept (self->server->metrics, LEGBA_ACCEPT_PAUSED_ERROR);
  legba_server_log (G_LOG_LEVEL_MESSAGE, "accept-failed",
      "ERROR", g_strerror (errsv), NULL);
  self->retry = g_timeout_source_new (ACCEPT_RETRY_MS);
  g_source_set_callback (self->retry, legba_acceptor_retry, self, NULL);
  g_source_attach (self->retry, self->server->context);
  legba_acceptor_update (self, FALSE);
}

/* At the descriptor limit: the reserve descriptor makes room for one
 * accept(), whose connection is closed at once. FALSE when accepting
 * should stop for this wakeup. */
static gboolean
legba_acceptor_refuse_at_limit (LegbaAcceptor * self, LegbaListener * l,
    int errsv)
{
  LegbaServer *server = self->server;
  int fd;

  if (server->reserve_fd < 0) {
    legba_acceptor_pause_on_error (self, errsv);
    return FALSE;
  }
  close (server->reserve_fd);
  fd = accept4 (g_socket_get_fd (l->socket), NULL, NULL, SOCK_CLOEXEC);
  if (fd >= 0)
    close (fd);
  server->reserve_fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    legba_metrics_count_accept (server->metrics,
        LEGBA_ACCEPT_REFUSED_DESCRIPTORS);
    if (self->refused_run++ == 0)
      legba_server_log (G_LOG_LEVEL_MESSAGE, "accept-refused",
          "REASON", "descriptors", "ERROR", g_strerror (errsv), NULL);
  }
  if (server->reserve_fd < 0) {
    legba_acceptor_pause_on_error (self, errsv);
    return FALSE;
  }
  return fd >= 0;
}

/* The connection's stream as libsoup gets it: over TLS when the server
 * has a certificate, as libsoup's own listener would make it. */
static GIOStream *
legba_acceptor_stream (LegbaAcceptor * self, GSocket * socket)
{
  static const char *const protocols[] = { "http/1.1", "http/1.0", NULL };
  g_autoptr (GIOStream) base = G_IO_STREAM
      (g_socket_connection_factory_create_connection (socket));
  g_autoptr (GError) error = NULL;
  GIOStream *tls;

  if (self->soup != self->server->soup || self->server->certificate == NULL)
    return g_steal_pointer (&base);
  tls = g_tls_server_connection_new (base, self->server->certificate, &error);
  if (tls == NULL) {
    legba_server_log (G_LOG_LEVEL_MESSAGE, "tls-failed",
        "ERROR", error->message, NULL);
    return NULL;
  }
  g_tls_connection_set_require_close_notify (G_TLS_CONNECTION (tls), FALSE);
  g_tls_connection_set_advertised_protocols (G_TLS_CONNECTION (tls), protocols);
  return tls;
}

/* A new connection: refused past max-pending-per-address, else handed to
 * libsoup and pending. */
static void
legba_acceptor_take (LegbaAcceptor * self, int fd)
{
  LegbaServer *server = self->server;
  g_autoptr (GSocket) socket = g_socket_new_from_fd (fd, NULL);
  g_autoptr (GSocketAddress) remote = NULL;
  g_autoptr (GSocketAddress) local = NULL;
  g_autoptr (GIOStream) stream = NULL;
  g_autofree char *key = NULL;
  LegbaPending *p;

  if (socket == NULL) {
    close (fd);
    return;
  }
  remote = g_socket_get_remote_address (socket, NULL);
  local = g_socket_get_local_address (socket, NULL);
  if (remote == NULL || local == NULL) {
    /* Gone already. */
    g_socket_close (socket, NULL);
    return;
  }
  key = legba_source_key (remote);
  if (server->max_pending_per_address > 0 &&
      legba_acceptor_source_count (self, key) >=
      server->max_pending_per_address) {
    g_autofree char *remote_s = legba_server_address_string (remote);

    legba_metrics_count_accept (server->metrics,
        LEGBA_ACCEPT_REFUSED_PER_ADDRESS);
    legba_server_log (G_LOG_LEVEL_INFO, "accept-refused",
        "REASON", "max-pending-per-address", "REMOTE", remote_s, NULL);
    g_socket_close (socket, NULL);
    return;
  }
  g_socket_set_option (socket, IPPROTO_TCP, TCP_NODELAY, TRUE, NULL);
  stream = legba_acceptor_stream (self, socket);
  if (stream == NULL) {
    g_socket_close (socket, NULL);
    return;
  }

  p = g_new0 (LegbaPending, 1);
  p->acceptor = self;
  p->socket = g_object_ref (socket);
  p->stream = stream;
  p->remote = g_object_ref (remote);
  p->source = g_steal_pointer (&key);
  p->remote_s = legba_server_address_string (remote);
  g_object_weak_ref (G_OBJECT (stream), legba_pending_stream_gone, p);
  g_object_set_qdata (G_OBJECT (remote), legba_pending_quark (), p);
  g_hash_table_add (self->pending, p);
  legba_acceptor_source_add (self, p->source, 1);
  legba_pending_arm (p, server->handshake_timeout * 1000);
  legba_acceptor_update (self, FALSE);

  /* libsoup may read the request, answer it, even upgrade it, before it
   * returns: p is not touched after. */
  soup_server_accept_iostream (self->soup, stream, local, remote, NULL);
}

static gboolean
legba_acceptor_accept_one (LegbaAcceptor * self, LegbaListener * l)
{
  int fd = accept4 (g_socket_get_fd (l->socket), NULL, NULL, SOCK_CLOEXEC);
  int errsv = errno;

  if (fd >= 0) {
    if (self->refused_run > 0) {
      g_autofree char *n_s = g_strdup_printf ("%" G_GUINT64_FORMAT,
          self->refused_run);

      legba_server_log (G_LOG_LEVEL_MESSAGE, "accept-resumed",
          "REFUSED", n_s, NULL);
      self->refused_run = 0;
    }
    legba_acceptor_take (self, fd);
    return TRUE;
  }
  switch (errsv) {
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
      return FALSE;
    case EMFILE:
    case ENFILE:
      return legba_acceptor_refuse_at_limit (self, l, errsv);
    case ENOBUFS:
    case ENOMEM:
    case EBADF:
    case EINVAL:
    case ENOTSOCK:
    case EOPNOTSUPP:
    case EFAULT:
      legba_acceptor_pause_on_error (self, errsv);
      return FALSE;
    default:
      /* EINTR, ECONNABORTED, and the network errors Linux passes on
       * from the connection (EPROTO, EHOSTUNREACH...): that connection
       * is gone, the next one may be fine. */
      return TRUE;
  }
}

static gboolean
legba_acceptor_ready (GSocket * socket, GIOCondition condition,
    gpointer user_data)
{
  LegbaListener *l = user_data;
  LegbaAcceptor *self = l->acceptor;

  for (guint i = 0; i < ACCEPT_BATCH && legba_acceptor_is_watching (self); i++) {
    if (!legba_acceptor_accept_one (self, l))
      break;
  }
  return G_SOURCE_CONTINUE;
}

/* ---- Refusing from the headers ---- */

static gboolean
legba_pending_drain (GSocket * socket, GIOCondition condition,
    gpointer user_data)
{
  LegbaPending *p = user_data;
  g_autoptr (GError) error = NULL;
  char buffer[4096];
  gssize n;

  do {
    g_clear_error (&error);
    n = g_socket_receive_with_blocking (socket, buffer, sizeof buffer, FALSE,
        NULL, &error);
  } while (n > 0);
  if (n < 0 && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
    return G_SOURCE_CONTINUE;
  /* The client closed (or failed): nothing more will come. */
  g_clear_pointer (&p->drain, g_source_unref);
  legba_pending_finish_refusal (p);
  return G_SOURCE_REMOVE;
}

static void
legba_pending_finish_refusal (LegbaPending * p)
{
  GIOStream *refusing = g_steal_pointer (&p->refusing);

  if (p->stream != NULL) {
    g_object_weak_unref (G_OBJECT (p->stream), legba_pending_stream_gone, p);
    p->stream = NULL;
  }
  g_io_stream_close (refusing, NULL, NULL);
  g_socket_close (p->socket, NULL);
  g_object_unref (refusing);
  legba_pending_end (p);
}

static char *
legba_refusal_text (guint status, const char *body)
{
  g_autoptr (GDateTime) now = g_date_time_new_now_utc ();
  g_autofree char *date = soup_date_time_to_string (now, SOUP_DATE_HTTP);

  return g_strdup_printf ("HTTP/1.1 %u %s\r\n"
      "Server: legba-server/" LEGBA_VERSION "\r\n"
      "Date: %s\r\n"
      "Connection: close\r\n"
      "Content-Type: application/json\r\n"
      "Content-Length: %" G_GSIZE_FORMAT "\r\n\r\n%s", status,
      soup_status_get_phrase (status), date, strlen (body), body);
}

gboolean
legba_acceptor_refuse (SoupServerMessage * msg, guint status, const char *body)
{
  LegbaPending *p = legba_pending_of (msg);
  g_autofree char *text = NULL;
  GOutputStream *out;
  gsize len;
  gssize n;

  if (p == NULL || p->refusing != NULL)
    return FALSE;
  /* libsoup would read the whole body before answering: the connection
   * is taken back from it and answered here. */
  p->refusing = soup_server_message_steal_connection (msg);
  if (p->refusing == NULL)
    return TRUE;

  text = legba_refusal_text (status, body);
  len = strlen (text);
  out = g_io_stream_get_output_stream (p->refusing);
  /* Nothing was written to the connection yet: the socket takes the
   * short answer at once, or the connection is closed without it. */
  n = G_IS_POLLABLE_OUTPUT_STREAM (out) ?
      g_pollable_output_stream_write_nonblocking (G_POLLABLE_OUTPUT_STREAM
      (out), text, len, NULL, NULL) : -1;
  if (n != (gssize) len) {
    legba_pending_finish_refusal (p);
    return TRUE;
  }
  g_socket_shutdown (p->socket, FALSE, TRUE, NULL);
  p->drain = g_socket_create_source (p->socket, G_IO_IN | G_IO_HUP |
      G_IO_ERR, NULL);
  g_source_set_callback (p->drain, (GSourceFunc) G_CALLBACK
      (legba_pending_drain), p, NULL);
  g_source_attach (p->drain, p->acceptor->server->context);
  if (p->timer == NULL || g_source_get_ready_time (p->timer) >
      g_get_monotonic_time () + REFUSE_LINGER_MS * 1000)
    legba_pending_arm (p, REFUSE_LINGER_MS);
  return TRUE;
}

/* ---- Messages ---- */

GSocket *
legba_acceptor_get_socket (SoupServerMessage * msg)
{
  LegbaPending *p = legba_pending_of (msg);

  return p ? p->socket : soup_server_message_get_socket (msg);
}

void
legba_acceptor_upgraded (SoupServerMessage * msg)
{
  LegbaPending *p = legba_pending_of (msg);

  if (p != NULL && p->refusing == NULL)
    legba_pending_end (p);
}

void
legba_acceptor_request_done (SoupServerMessage * msg)
{
  LegbaPending *p = legba_pending_of (msg);

  /* A connection kept alive has as long for its next request. */
  if (p != NULL && p->refusing == NULL)
    legba_pending_arm (p, p->acceptor->server->handshake_timeout * 1000);
}

/* ---- The acceptor ---- */

static void
legba_listener_free (gpointer data)
{
  LegbaListener *l = data;

  legba_listener_watch (l, FALSE);
  g_object_unref (l->socket);
  g_free (l);
}

LegbaAcceptor *
legba_acceptor_new (LegbaServer * server, SoupServer * soup)
{
  LegbaAcceptor *self = g_new0 (LegbaAcceptor, 1);

  self->server = server;
  self->soup = soup;
  self->soup_context = g_main_context_new ();
  self->listeners = g_ptr_array_new_with_free_func (legba_listener_free);
  self->pending = g_hash_table_new_full (NULL, NULL, legba_pending_free, NULL);
  self->per_source = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      NULL);
  return self;
}

gboolean
legba_acceptor_add_socket (LegbaAcceptor * self, GSocket * socket,
    SoupServerListenOptions options, GError ** error)
{
  LegbaListener *l;
  gboolean ok;

  g_socket_set_blocking (socket, FALSE);
  g_main_context_push_thread_default (self->soup_context);
  ok = soup_server_listen_socket (self->soup, socket, options, error);
  g_main_context_pop_thread_default (self->soup_context);
  if (!ok)
    return FALSE;

  l = g_new0 (LegbaListener, 1);
  l->acceptor = self;
  l->socket = g_object_ref (socket);
  g_ptr_array_add (self->listeners, l);
  legba_listener_watch (l, legba_acceptor_is_watching (self));
  return TRUE;
}

guint
legba_acceptor_get_pending (LegbaAcceptor * self)
{
  return self ? g_hash_table_size (self->pending) : 0;
}

/* Accepts no more; the listening sockets are libsoup's to close. */
void
legba_acceptor_stop (LegbaAcceptor * self)
{
  if (self == NULL)
    return;
  self->stopped = TRUE;
  if (self->retry != NULL) {
    g_source_destroy (self->retry);
    g_clear_pointer (&self->retry, g_source_unref);
  }
  g_ptr_array_set_size (self->listeners, 0);
}

void
legba_acceptor_free (LegbaAcceptor * self)
{
  if (self == NULL)
    return;
  legba_acceptor_stop (self);
  g_hash_table_unref (self->pending);
  g_hash_table_unref (self->per_source);
  g_ptr_array_unref (self->listeners);
  g_main_context_unref (self->soup_context);
  g_free (self);
}
