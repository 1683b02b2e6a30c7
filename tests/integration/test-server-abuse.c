/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaServer in-process on 127.0.0.1 port 0 against hostile WebSocket
 * clients, over raw TCP sockets: many sockets at once, a client that
 * floods pings and never reads, a compressed message that inflates far
 * beyond max-frame-bytes. Each must cost the server a bounded amount and
 * leave the other clients served. The server and the clients share this
 * thread's main context; every wait runs it until a condition holds, with
 * a timeout and a reason. GLib criticals and warnings are fatal.
 */
#include <legba/legba.h>

#include <legba/server/legba-server-private.h>
#include "legba-test.h"

#include <glib-unix.h>
#include <libsoup/soup.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define APP_ID "1"
#define APP_KEY "app-key"
#define APP_SECRET "app-secret"
#define WS_PATH "/app/" APP_KEY "?protocol=7"
#define WAIT_S 20

#define WAIT_UNTIL LEGBA_TEST_WAIT_UNTIL

/* ---- The server ---- */

static LegbaServer *
server_new (const char *first_property, ...)
{
  g_autoptr (GError) error = NULL;
  LegbaServer *server = legba_server_new ();
  va_list ap;

  va_start (ap, first_property);
  g_object_set_valist (G_OBJECT (server), first_property, ap);
  va_end (ap);
  g_assert_true (legba_server_add_app (server, APP_ID, APP_KEY, APP_SECRET,
          &error));
  g_assert_no_error (error);
  g_assert_true (legba_server_listen (server, "127.0.0.1", 0, &error));
  g_assert_no_error (error);
  return server;
}

static void
server_free (LegbaServer * server)
{
  legba_server_shutdown (server);
  WAIT_UNTIL (legba_server_get_connection_count (server) == 0, WAIT_S,
      "every socket to close on shutdown");
  g_object_unref (server);
  while (g_main_context_iteration (NULL, FALSE));
}

/* ---- Raw clients ---- */

typedef struct
{
  int fd;
  guint watch;                  /* reading into in; 0: not reading */
  GByteArray *in;
  gboolean eof;
} RawClient;

static gboolean
raw_on_readable (gint fd, GIOCondition condition, gpointer user_data)
{
  RawClient *raw = user_data;
  guint8 buffer[16384];

  for (;;) {
    gssize n = recv (fd, buffer, sizeof buffer, MSG_DONTWAIT);

    if (n > 0) {
      g_byte_array_append (raw->in, buffer, n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return G_SOURCE_CONTINUE;
    raw->eof = TRUE;
    raw->watch = 0;
    return G_SOURCE_REMOVE;
  }
}

static void
raw_start_reading (RawClient * raw)
{
  if (raw->watch == 0 && !raw->eof)
    raw->watch = g_unix_fd_add (raw->fd, G_IO_IN | G_IO_HUP | G_IO_ERR,
        raw_on_readable, raw);
}

static void
raw_stop_reading (RawClient * raw)
{
  if (raw->watch != 0)
    g_source_remove (raw->watch);
  raw->watch = 0;
}

static RawClient *
raw_connect (LegbaServer * server)
{
  struct sockaddr_in address = { 0, };
  RawClient *raw = g_new0 (RawClient, 1);
  int one = 1;

  address.sin_family = AF_INET;
  address.sin_port = htons (legba_server_get_port (server));
  address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  raw->in = g_byte_array_new ();
  raw->fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (raw->fd, >=, 0);
  /* The kernel completes the TCP handshake from the listen backlog. */
  g_assert_cmpint (connect (raw->fd, (struct sockaddr *) &address,
          sizeof address), ==, 0);
  g_assert_cmpint (setsockopt (raw->fd, IPPROTO_TCP, TCP_NODELAY, &one,
          sizeof one), ==, 0);
  g_assert_true (g_unix_set_fd_nonblocking (raw->fd, TRUE, NULL));
  return raw;
}

/* Sends what the socket takes now; the number of bytes, -1 once the
 * server has closed the connection. */
static gssize
raw_send_some (RawClient * raw, const void *data, gsize len)
{
  gssize n;

  do
    n = send (raw->fd, data, len, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return 0;
  return n;
}

/* Sends all of data, running the main context while the socket is full;
 * FALSE when the server closed the connection first. */
static gboolean
raw_write (RawClient * raw, const void *data, gsize len)
{
  const guint8 *p = data;
  gint64 deadline = g_get_monotonic_time () + WAIT_S * G_USEC_PER_SEC;

  while (len > 0) {
    gssize n = raw_send_some (raw, p, len);

    if (n < 0)
      return FALSE;
    p += n;
    len -= n;
    if (n == 0) {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_main_context_iteration (NULL, FALSE);
    }
  }
  return TRUE;
}

static const char *
raw_find (RawClient * raw, const char *needle)
{
  if (raw->in->len == 0)
    return NULL;
  return g_strstr_len ((const char *) raw->in->data, raw->in->len, needle);
}

static void
raw_send_upgrade (RawClient * raw, const char *extensions)
{
  g_autofree char *request = g_strdup_printf ("GET " WS_PATH " HTTP/1.1\r\n"
      "Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
      "Sec-WebSocket-Version: 13\r\n%s%s%s\r\n",
      extensions ? "Sec-WebSocket-Extensions: " : "",
      extensions ? extensions : "", extensions ? "\r\n" : "");

  g_assert_true (raw_write (raw, request, strlen (request)));
}

/* Upgrades to WebSocket (RFC 6455 §4.1) and returns the response's
 * headers; what follows them stays in raw->in. */
static char *
raw_handshake (RawClient * raw, const char *extensions)
{
  const char *end;
  char *headers;

  raw_send_upgrade (raw, extensions);
  raw_start_reading (raw);
  WAIT_UNTIL (raw_find (raw, "\r\n\r\n") != NULL || raw->eof, WAIT_S,
      "the handshake response");
  end = raw_find (raw, "\r\n\r\n");
  g_assert_nonnull (end);
  headers = g_strndup ((const char *) raw->in->data,
      end - (const char *) raw->in->data);
  g_byte_array_remove_range (raw->in, 0,
      end + 4 - (const char *) raw->in->data);
  g_assert_true (g_str_has_prefix (headers,
          "HTTP/1.1 101 Switching Protocols"));
  return headers;
}

static void
raw_client_free (RawClient * raw)
{
  raw_stop_reading (raw);
  close (raw->fd);
  g_byte_array_unref (raw->in);
  g_free (raw);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (RawClient, raw_client_free);

/* ---- Many sockets ---- */

#define MANY_SOCKETS 1000

/* Every socket's handlers are connected through closures shared with
 * other sockets; a GClosure holds at most 255 connections, and a socket
 * past them logged criticals (fatal here) on opening and warnings on
 * closing. */
static void
test_many_sockets (void)
{
  LegbaServer *server = server_new (NULL);
  g_autoptr (GPtrArray) clients =
      g_ptr_array_new_with_free_func ((GDestroyNotify) raw_client_free);
  guint i;

  for (i = 0; i < MANY_SOCKETS; i++) {
    RawClient *raw = raw_connect (server);

    g_ptr_array_add (clients, raw);
    if (i % 100 < 99) {
      raw_send_upgrade (raw, NULL);
      continue;
    }
    g_free (raw_handshake (raw, NULL));
    WAIT_UNTIL (legba_server_get_connection_count (server) == i + 1,
        WAIT_S, "the sockets so far to be open");
  }
  g_assert_cmpuint (legba_server_get_connection_count (server), ==,
      MANY_SOCKETS);

  /* Half close from the client's side, half from the server's. */
  g_ptr_array_remove_range (clients, 0, MANY_SOCKETS / 2);
  WAIT_UNTIL (legba_server_get_connection_count (server) == MANY_SOCKETS / 2,
      WAIT_S, "the server to see the clients' sockets closed");
  server_free (server);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL |
      G_LOG_LEVEL_WARNING);

  g_test_add_func ("/server/abuse/many-sockets", test_many_sockets);
  return g_test_run ();
}
