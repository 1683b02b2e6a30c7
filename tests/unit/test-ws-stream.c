/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaWsStream under a SoupWebsocketConnection of the server's side, on
 * a socket pair, its context run by hand: how much one dispatch of a
 * socket's reading takes.
 */
#include <legba/server/legba-ws-stream.h>

#include <libsoup/soup.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MESSAGES 400
#define MESSAGE_BYTES 1000

static gboolean
on_text (gpointer owner, const char *text, gsize len)
{
  (*(guint *) owner)++;
  return TRUE;
}

static void
append_text_frame (GByteArray * wire, gsize len)
{
  guint8 header[8] = { 0x81, 0x80 | 126, len >> 8, len & 0xff, 0, 0, 0, 0 };

  g_byte_array_append (wire, header, sizeof header);
  for (gsize i = 0; i < len; i++)
    g_byte_array_append (wire, (const guint8 *) "x", 1);
}

/* A peer that sends as fast as the server reads must not hold the
 * thread: one dispatch takes 16 KiB of a plain socket at most, the rest
 * waits for the next iterations. */
static void
test_read_budget (void)
{
  g_autoptr (GMainContext) context = g_main_context_new ();
  g_autoptr (GUri) uri = g_uri_parse ("ws://127.0.0.1/app/test",
      G_URI_FLAGS_NONE, NULL);
  g_autoptr (GByteArray) wire = g_byte_array_new ();
  g_autoptr (GSocket) socket = NULL;
  g_autoptr (GSocketConnection) connection = NULL;
  g_autoptr (LegbaWsStream) stream = NULL;
  g_autoptr (SoupWebsocketConnection) ws = NULL;
  int fds[2], size = 1024 * 1024;
  guint texts = 0, after_one;
  gsize at = 0;

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds),
      ==, 0);
  g_assert_cmpint (setsockopt (fds[0], SOL_SOCKET, SO_RCVBUF, &size,
          sizeof size), ==, 0);
  g_assert_cmpint (setsockopt (fds[1], SOL_SOCKET, SO_SNDBUF, &size,
          sizeof size), ==, 0);
  socket = g_socket_new_from_fd (fds[0], NULL);
  g_assert_nonnull (socket);
  connection = g_socket_connection_factory_create_connection (socket);
  stream = legba_ws_stream_new (G_IO_STREAM (connection), socket, TRUE);
  legba_ws_stream_set_max_message (stream, 4096);
  g_main_context_push_thread_default (context);
  ws = soup_websocket_connection_new (G_IO_STREAM (stream), uri,
      SOUP_WEBSOCKET_CONNECTION_SERVER, NULL, NULL, NULL);
  g_main_context_pop_thread_default (context);
  soup_websocket_connection_set_keepalive_interval (ws, 0);
  legba_ws_stream_set_owner (stream, &texts);
  legba_ws_stream_set_text_func (stream, on_text);

  for (guint i = 0; i < MESSAGES; i++)
    append_text_frame (wire, MESSAGE_BYTES);
  while (at < wire->len) {
    gssize n = send (fds[1], wire->data + at, wire->len - at, MSG_NOSIGNAL);

    g_assert_cmpint (n, >, 0);
    at += n;
  }

  g_main_context_push_thread_default (context);
  g_assert_true (g_main_context_iteration (context, FALSE));
  after_one = texts;
  while (g_main_context_iteration (context, FALSE));
  g_main_context_pop_thread_default (context);

  g_test_message ("%u of %u messages in one dispatch", after_one, MESSAGES);
  g_assert_cmpuint (after_one, >, 0);
  g_assert_cmpuint (after_one * (MESSAGE_BYTES + 8), <=, 16 * 1024 + 16384);
  g_assert_cmpuint (texts, ==, MESSAGES);

  g_main_context_push_thread_default (context);
  g_clear_object (&ws);
  g_clear_object (&stream);
  while (g_main_context_iteration (context, FALSE));
  g_main_context_pop_thread_default (context);
  close (fds[1]);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/ws-stream/read-budget", test_read_budget);
  return g_test_run ();
}
