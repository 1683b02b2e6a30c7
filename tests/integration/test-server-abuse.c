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
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

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

/* rcvbuf: the socket's receive buffer, 0: the system's. */
static RawClient *
raw_connect (LegbaServer * server, int rcvbuf)
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
  if (rcvbuf > 0)
    g_assert_cmpint (setsockopt (raw->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
            sizeof rcvbuf), ==, 0);
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

/* Appends a client frame (RFC 6455 §5.2): masked, as clients must. */
static void
raw_frame_append (GByteArray * frame, guint8 first, const void *payload,
    gsize len)
{
  static const guint8 mask[4] = { 0x37, 0xfa, 0x21, 0x3d };
  guint8 header[10];
  gsize header_len, i, at;

  header[0] = first;
  if (len < 126) {
    header[1] = 0x80 | len;
    header_len = 2;
  } else if (len < 65536) {
    header[1] = 0x80 | 126;
    header[2] = len >> 8;
    header[3] = len & 0xff;
    header_len = 4;
  } else {
    header[1] = 0x80 | 127;
    for (i = 0; i < 8; i++)
      header[2 + i] = ((guint64) len >> (8 * (7 - i))) & 0xff;
    header_len = 10;
  }
  g_byte_array_append (frame, header, header_len);
  g_byte_array_append (frame, mask, 4);
  at = frame->len;
  g_byte_array_append (frame, payload, len);
  for (i = 0; i < len; i++)
    frame->data[at + i] ^= mask[i % 4];
}

/* Takes one whole server frame off the input, if there is one. */
static gboolean
raw_take_frame (RawClient * raw, guint8 * opcode, GBytes ** payload)
{
  const guint8 *d = raw->in->data;
  gsize at = 2, len;

  if (raw->in->len < 2)
    return FALSE;
  len = d[1] & 0x7f;
  if (len == 126) {
    if (raw->in->len < 4)
      return FALSE;
    len = (d[2] << 8) | d[3];
    at = 4;
  } else if (len == 127) {
    guint i;

    if (raw->in->len < 10)
      return FALSE;
    for (len = 0, i = 2; i < 10; i++)
      len = (len << 8) | d[i];
    at = 10;
  }
  if (raw->in->len < at + len)
    return FALSE;
  *opcode = d[0] & 0x0f;
  *payload = g_bytes_new (d + at, len);
  g_byte_array_remove_range (raw->in, 0, at + len);
  return TRUE;
}

static GBytes *
raw_next_frame (RawClient * raw, guint8 * opcode)
{
  GBytes *payload = NULL;

  raw_start_reading (raw);
  WAIT_UNTIL (raw_take_frame (raw, opcode, &payload) || raw->eof, WAIT_S,
      "a frame from the server");
  if (payload == NULL && !raw_take_frame (raw, opcode, &payload))
    g_error ("the server closed the connection instead of sending a frame");
  return payload;
}

static guint16
close_code (GBytes * payload)
{
  gsize len;
  const guint8 *d = g_bytes_get_data (payload, &len);

  g_assert_cmpuint (len, >=, 2);
  return (d[0] << 8) | d[1];
}

/* A WebSocket client that has read pusher:connection_established, with
 * the extensions it offered all accepted. */
static RawClient *
raw_client_new (LegbaServer * server, const char *extensions, int rcvbuf)
{
  RawClient *raw = raw_connect (server, rcvbuf);
  g_autofree char *headers = raw_handshake (raw, extensions);
  g_autoptr (GBytes) established = NULL;
  guint8 opcode = 0;

  if (extensions != NULL)
    g_assert_nonnull (strstr (headers, extensions));
  established = raw_next_frame (raw, &opcode);
  g_assert_cmpuint (opcode, ==, 0x1);
  /* Compressed, with an extension. */
  if (extensions == NULL)
    g_assert_nonnull (g_strstr_len (g_bytes_get_data (established, NULL),
            g_bytes_get_size (established), "pusher:connection_established"));
  return raw;
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
    RawClient *raw = raw_connect (server, 0);

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

/* ---- Ping floods ---- */

static const char pusher_ping[] = "{\"event\":\"pusher:ping\",\"data\":{}}";

/* Takes the frames raw has read; TRUE once one is pusher:pong. */
static gboolean
raw_take_pusher_pong (RawClient * raw)
{
  g_autoptr (GBytes) payload = NULL;
  guint8 opcode;

  while (raw_take_frame (raw, &opcode, &payload)) {
    gboolean pong = opcode == 0x1 &&
        g_strstr_len (g_bytes_get_data (payload, NULL),
        g_bytes_get_size (payload), "pusher:pong") != NULL;

    g_clear_pointer (&payload, g_bytes_unref);
    if (pong)
      return TRUE;
  }
  return FALSE;
}

/* Pings of the largest payload a control frame has (RFC 6455 §5.5), its
 * first bytes a sequence number. */
#define PING_PAYLOAD 125
#define PING_SIZE (6 + PING_PAYLOAD)
#define PONG_SIZE (2 + PING_PAYLOAD)

static void
append_pings (GByteArray * wire, guint n, guint32 * seq)
{
  guint8 payload[PING_PAYLOAD] = { 0, };

  for (guint i = 0; i < n; i++, (*seq)++) {
    memcpy (payload, seq, sizeof *seq);
    raw_frame_append (wire, 0x89, payload, sizeof payload);
  }
}

#define FLOOD_ROUND_TRIPS 20
#define FLOOD_MIN_PINGS 100000

/* A client that sends pings and never reads, with no bound on control
 * frames: every ping is read and answered (a pong not yet taken by the
 * socket answers the newest ping), what waits for the flooder stays
 * within two pongs, and another client's pusher:ping is answered again
 * and again while the flood runs. Answering each ping with a pong of its
 * own made libsoup walk a queue of every unsent pong for each new one:
 * the server stalled. */
static void
test_ping_flood (void)
{
  LegbaServer *server = server_new ("control-frames-per-second", 0, NULL);
  g_autoptr (RawClient) flooder = raw_client_new (server, NULL, 4096);
  g_autoptr (RawClient) other = raw_client_new (server, NULL, 0);
  g_autoptr (GByteArray) wire = g_byte_array_new ();
  g_autoptr (GByteArray) ping = g_byte_array_new ();
  g_autoptr (GBytes) payload = NULL;
  guint64 sent = 0, pongs = 0;
  guint32 seq = 0, last = 0;
  guint8 opcode = 0;
  gsize at = 0;
  guint i;

  raw_stop_reading (flooder);
  raw_frame_append (ping, 0x81, pusher_ping, strlen (pusher_ping));
  for (i = 0; i < FLOOD_ROUND_TRIPS || sent < FLOOD_MIN_PINGS; i++) {
    gint64 deadline = g_get_monotonic_time () + WAIT_S * G_USEC_PER_SEC;

    g_assert_true (raw_write (other, ping->data, ping->len));
    while (!raw_take_pusher_pong (other)) {
      gssize n;

      if (g_get_monotonic_time () > deadline)
        g_error ("no pusher:pong within %d s during a ping flood (%"
            G_GUINT64_FORMAT " pings sent)", WAIT_S, sent);
      if (at == wire->len) {
        g_byte_array_set_size (wire, 0);
        append_pings (wire, 100, &seq);
        at = 0;
      }
      n = raw_send_some (flooder, wire->data + at, wire->len - at);
      g_assert_cmpint (n, >=, 0);
      at += n;
      sent += n / PING_SIZE;
      g_main_context_iteration (NULL, n == 0);
      g_assert_cmpuint (legba_server_get_queued_bytes (server), <=,
          2 * PONG_SIZE);
    }
  }
  g_test_message ("%u round trips during a flood of %" G_GUINT64_FORMAT
      " pings", i, sent);

  /* The flooder's stream is whole: pongs only, the last one answering
   * the last ping. */
  g_assert_true (raw_write (flooder, wire->data + at, wire->len - at));
  last = seq - 1;
  raw_start_reading (flooder);
  do {
    g_clear_pointer (&payload, g_bytes_unref);
    payload = raw_next_frame (flooder, &opcode);
    g_assert_cmpuint (opcode, ==, 0xa);
    g_assert_cmpuint (g_bytes_get_size (payload), ==, PING_PAYLOAD);
    pongs++;
  } while (memcmp (g_bytes_get_data (payload, NULL), &last, sizeof last) != 0);
  g_test_message ("%" G_GUINT64_FORMAT " pongs answered %u pings", pongs, seq);
  g_assert_cmpuint (pongs, <, seq);
  g_assert_cmpuint (legba_server_get_connection_count (server), ==, 2);

  g_clear_pointer (&flooder, raw_client_free);
  g_clear_pointer (&other, raw_client_free);
  server_free (server);
}

#define CONTROL_RATE 50

/* Whether GET /metrics has line. */
static gboolean
has_metric (LegbaServer * server, const char *line)
{
  static const char request[] = "GET /metrics HTTP/1.1\r\n"
      "Host: 127.0.0.1\r\nConnection: close\r\n\r\n";
  g_autoptr (RawClient) raw = raw_connect (server, 0);
  g_autofree char *needle = g_strconcat ("\n", line, "\n", NULL);

  g_assert_true (raw_write (raw, request, strlen (request)));
  raw_start_reading (raw);
  WAIT_UNTIL (raw->eof, WAIT_S, "the answer to GET /metrics");
  return raw_find (raw, needle) != NULL;
}

/* Control frames over control-frames-per-second: the socket is closed
 * with 1008 and none past the bound is answered, whether the stream
 * takes the pings (a plain socket) or libsoup does (permessage-deflate);
 * another client stays served. */
static void
test_ping_flood_closed (gconstpointer data)
{
  const char *extensions = data;
  LegbaServer *server = server_new ("control-frames-per-second", CONTROL_RATE,
      "compression", extensions != NULL, NULL);
  g_autoptr (RawClient) flooder = raw_client_new (server, extensions, 0);
  g_autoptr (RawClient) other = raw_client_new (server, NULL, 0);
  g_autoptr (GByteArray) wire = g_byte_array_new ();
  g_autoptr (GByteArray) ping = g_byte_array_new ();
  g_autoptr (GBytes) payload = NULL;
  guint32 seq = 0;
  guint8 opcode = 0;
  guint pongs = 0;
  gsize at = 0;

  raw_stop_reading (flooder);
  append_pings (wire, 20000, &seq);
  while (at < wire->len) {
    gssize n = raw_send_some (flooder, wire->data + at, wire->len - at);

    if (n < 0)
      break;
    at += n;
    if (legba_server_get_connection_count (server) == 1)
      break;
    g_main_context_iteration (NULL, n == 0);
    g_assert_cmpuint (legba_server_get_queued_bytes (server), <=,
        CONTROL_RATE * PONG_SIZE);
  }
  WAIT_UNTIL (legba_server_get_connection_count (server) == 1, WAIT_S,
      "the flooder to be closed");

  raw_start_reading (flooder);
  for (;;) {
    g_clear_pointer (&payload, g_bytes_unref);
    payload = raw_next_frame (flooder, &opcode);
    if (opcode != 0xa)
      break;
    pongs++;
  }
  g_assert_cmpuint (opcode, ==, 0x8);
  g_assert_cmpuint (close_code (payload), ==, 1008);
  g_assert_cmpuint (pongs, <=, CONTROL_RATE);
  g_test_message ("closed after %u pongs", pongs);
  g_assert_true (has_metric (server, "legba_control_flood_closes_total 1"));

  g_byte_array_set_size (ping, 0);
  raw_frame_append (ping, 0x81, pusher_ping, strlen (pusher_ping));
  g_assert_true (raw_write (other, ping->data, ping->len));
  WAIT_UNTIL (raw_take_pusher_pong (other), WAIT_S, "pusher:pong");

  g_clear_pointer (&flooder, raw_client_free);
  g_clear_pointer (&other, raw_client_free);
  server_free (server);
}

/* ---- permessage-deflate ---- */

/* Appends to out what z gives for its input with flush. */
static void
deflate_append (z_stream * z, GByteArray * out, int flush)
{
  guint8 chunk[65536];

  do {
    z->next_out = chunk;
    z->avail_out = sizeof chunk;
    g_assert_cmpint (deflate (z, flush), !=, Z_STREAM_ERROR);
    g_byte_array_append (out, chunk, sizeof chunk - z->avail_out);
  } while (z->avail_out == 0);
}

/* A compressed message's payload (RFC 7692 §7.2.1): raw deflate of data
 * then repeat bytes of zeros, the sync flush's last four bytes removed;
 * a fresh context each time (the client takes no context over). */
static GByteArray *
deflate_message (const char *data, gsize repeat)
{
  static const guint8 zeros[65536];
  GByteArray *out = g_byte_array_new ();
  z_stream z = { 0, };

  g_assert_cmpint (deflateInit2 (&z, 9, Z_DEFLATED, -15, 9,
          Z_DEFAULT_STRATEGY), ==, Z_OK);
  z.next_in = (Bytef *) data;
  z.avail_in = strlen (data);
  deflate_append (&z, out, Z_NO_FLUSH);
  while (repeat > 0) {
    z.next_in = (Bytef *) zeros;
    z.avail_in = MIN (repeat, sizeof zeros);
    repeat -= z.avail_in;
    deflate_append (&z, out, Z_NO_FLUSH);
  }
  deflate_append (&z, out, Z_SYNC_FLUSH);
  deflateEnd (&z);
  g_assert_cmpuint (out->len, >=, 4);
  g_byte_array_set_size (out, out->len - 4);
  return out;
}

/* The payload of the server's next frame, inflated (the server takes
 * no context over). */
static char *
raw_next_inflated (RawClient * raw, z_stream * inflater)
{
  static const guint8 tail[4] = { 0x00, 0x00, 0xff, 0xff };
  g_autoptr (GBytes) payload = NULL;
  g_autoptr (GByteArray) wire = g_byte_array_new ();
  guint8 out[65536];
  guint8 opcode = 0;
  const guint8 *data;
  gsize len;

  payload = raw_next_frame (raw, &opcode);
  g_assert_cmpuint (opcode, ==, 0x1);
  data = g_bytes_get_data (payload, &len);
  g_byte_array_append (wire, data, len);
  g_byte_array_append (wire, tail, sizeof tail);
  inflater->next_in = wire->data;
  inflater->avail_in = wire->len;
  inflater->next_out = out;
  inflater->avail_out = sizeof out;
  g_assert_cmpint (inflate (inflater, Z_SYNC_FLUSH), ==, Z_OK);
  g_assert_cmpuint (inflater->avail_in, ==, 0);
  g_assert_cmpint (inflateReset (inflater), ==, Z_OK);
  return g_strndup ((const char *) out, sizeof out - inflater->avail_out);
}

/* The peak RSS of this process (the server's, in-process) since the last
 * reset, in KiB. */
static guint64
peak_rss_kib (void)
{
  g_autofree char *status = NULL;
  const char *line;

  g_assert_true (g_file_get_contents ("/proc/self/status", &status, NULL,
          NULL));
  line = strstr (status, "\nVmHWM:");
  g_assert_nonnull (line);
  return g_ascii_strtoull (line + strlen ("\nVmHWM:"), NULL, 10);
}

/* Linux 4.0 and later (proc(5), clear_refs). */
static gboolean
reset_peak_rss (void)
{
  int fd = open ("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  gboolean done;

  if (fd < 0)
    return FALSE;
  done = write (fd, "5", 1) == 1;
  close (fd);
  return done;
}

#define BOMB_INFLATED (200 * 1024 * 1024)
#define BOMB_RSS_BOUND_KIB (32 * 1024)

/* A compressed message of some 199 KiB that inflates to 200 MiB, in one
 * frame or in two fragments: the server stops inflating it at
 * max-frame-bytes and closes the socket with 1009, its peak RSS growing by
 * far less than the message would take (libsoup's own extension inflated
 * it whole: +400 MiB). Compressed messages within the bound work. */
static void
test_deflate_bomb (gconstpointer data)
{
  gboolean fragmented = GPOINTER_TO_INT (data);
  LegbaServer *server = server_new ("compression", TRUE, NULL);
  g_autoptr (RawClient) raw = raw_client_new (server,
      "permessage-deflate; server_no_context_takeover; "
      "client_no_context_takeover", 0);
  g_autoptr (RawClient) other = raw_client_new (server, NULL, 0);
  g_autoptr (GByteArray) ping = deflate_message (pusher_ping, 0);
  g_autoptr (GByteArray) bomb = deflate_message ("[", BOMB_INFLATED);
  g_autoptr (GByteArray) wire = g_byte_array_new ();
  g_autoptr (GByteArray) plain = g_byte_array_new ();
  g_autoptr (GBytes) payload = NULL;
  z_stream inflater = { 0, };
  guint64 before, growth;
  guint8 opcode = 0;
  guint i;

  if (!reset_peak_rss ()) {
    g_test_skip ("/proc/self/clear_refs cannot reset the peak RSS");
    return;
  }
  g_test_message ("%u bytes inflating to %u", bomb->len, BOMB_INFLATED);
  g_assert_cmpint (inflateInit2 (&inflater, -15), ==, Z_OK);
  for (i = 0; i < 2; i++) {
    g_autofree char *pong = NULL;

    g_byte_array_set_size (wire, 0);
    raw_frame_append (wire, 0xc1, ping->data, ping->len);
    g_assert_true (raw_write (raw, wire->data, wire->len));
    pong = raw_next_inflated (raw, &inflater);
    g_assert_nonnull (strstr (pong, "pusher:pong"));
  }
  inflateEnd (&inflater);

  g_byte_array_set_size (wire, 0);
  if (fragmented) {
    raw_frame_append (wire, 0x41, bomb->data, bomb->len / 2);
    raw_frame_append (wire, 0x80, bomb->data + bomb->len / 2,
        bomb->len - bomb->len / 2);
  } else {
    raw_frame_append (wire, 0xc1, bomb->data, bomb->len);
  }
  while (g_main_context_iteration (NULL, FALSE));
  g_assert_true (reset_peak_rss ());
  before = peak_rss_kib ();
  g_assert_true (raw_write (raw, wire->data, wire->len));
  payload = raw_next_frame (raw, &opcode);
  g_assert_cmpuint (opcode, ==, 0x8);
  g_assert_cmpuint (close_code (payload), ==, 1009);
  growth = peak_rss_kib () - before;
  g_test_message ("peak RSS grew by %" G_GUINT64_FORMAT " KiB", growth);
  g_assert_cmpuint (growth, <, BOMB_RSS_BOUND_KIB);
  WAIT_UNTIL (legba_server_get_connection_count (server) == 1, WAIT_S,
      "the socket to close");
  g_assert_true (has_metric (server, "legba_inflate_limit_closes_total 1"));

  raw_frame_append (plain, 0x81, pusher_ping, strlen (pusher_ping));
  g_assert_true (raw_write (other, plain->data, plain->len));
  WAIT_UNTIL (raw_take_pusher_pong (other), WAIT_S, "pusher:pong");

  g_clear_pointer (&raw, raw_client_free);
  g_clear_pointer (&other, raw_client_free);
  server_free (server);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL |
      G_LOG_LEVEL_WARNING);

  g_test_add_func ("/server/abuse/many-sockets", test_many_sockets);
  g_test_add_func ("/server/abuse/ping-flood", test_ping_flood);
  g_test_add_data_func ("/server/abuse/ping-flood-closed", NULL,
      test_ping_flood_closed);
  g_test_add_data_func ("/server/abuse/ping-flood-closed-deflate",
      "permessage-deflate", test_ping_flood_closed);
  g_test_add_data_func ("/server/abuse/deflate-bomb", GINT_TO_POINTER (FALSE),
      test_deflate_bomb);
  g_test_add_data_func ("/server/abuse/deflate-bomb-fragmented",
      GINT_TO_POINTER (TRUE), test_deflate_bomb);
  return g_test_run ();
}
