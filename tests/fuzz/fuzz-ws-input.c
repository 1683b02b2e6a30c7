/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * libFuzzer target: incoming WebSocket frames, read by libsoup alone and
 * by LegbaWsStream taking whole text frames itself. The input's first byte
 * chooses how the rest is cut (0: all at once; else pieces of 1 to 32
 * bytes); the rest is what a client sends after the upgrade. It goes to
 * two server-side SoupWebsocketConnections over LegbaWsStream on a socket
 * pair: one where libsoup reads every frame, one where the stream takes
 * the whole text frames and pings (legba_ws_stream_set_text_func) and
 * leaves the rest to libsoup, as the server sets it up. The socket pair
 * takes every pong at once: none answers more than one ping. After each piece each side's
 * context runs until it has nothing to do; then the client's side is shut
 * down for writing and each runs until its connection is closed.
 *
 * What must hold, or the target aborts: both report the same messages,
 * errors and close, in the same order and by the same piece, and write
 * the same bytes back to the client. What libsoup reports once it is
 * closing (after the peer's close frame, or after its own close for an
 * error) is left out: it depends on how much libsoup had read when it
 * decided, which differs with how the bytes came anyway.
 */
#include <legba/server/legba-ws-stream.h>

#include <errno.h>
#include <libsoup/soup.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_MESSAGE 1024
#define MAX_ITERATIONS 100000
#define CLOSE_DEADLINE_S 10

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

typedef struct
{
  GMainContext *context;
  LegbaWsStream *stream;
  SoupWebsocketConnection *ws;
  int client;
  GString *events;              /* messages, errors, close, piece marks */
  GByteArray *written;          /* what the server wrote to the client */
  gboolean closed;
} Side;

static void
side_log_message (Side * side, const char *kind, const void *payload, gsize len)
{
  g_string_append_printf (side->events, "%s%" G_GSIZE_FORMAT ":", kind, len);
  g_string_append_len (side->events, payload, len);
}

static gboolean
is_open (SoupWebsocketConnection * ws)
{
  return soup_websocket_connection_get_state (ws) == SOUP_WEBSOCKET_STATE_OPEN;
}

static void
on_message (SoupWebsocketConnection * ws, gint type, GBytes * message,
    Side * side)
{
  gsize len;
  const void *payload = g_bytes_get_data (message, &len);

  if (is_open (ws))
    side_log_message (side, type == SOUP_WEBSOCKET_DATA_TEXT ? "T" : "B",
        payload, len);
}

/* libsoup reports an error before it starts closing for it. */
static void
on_error (SoupWebsocketConnection * ws, GError * error, Side * side)
{
  if (is_open (ws))
    g_string_append_printf (side->events, "E%s:%d;",
        g_quark_to_string (error->domain), error->code);
}

/* The peer's close frame, answered. */
static void
on_closing (SoupWebsocketConnection * ws, Side * side)
{
  g_string_append_printf (side->events, "K%u:%s;",
      soup_websocket_connection_get_close_code (ws),
      soup_websocket_connection_get_close_data (ws) ?
      soup_websocket_connection_get_close_data (ws) : "");
}

static void
on_closed (SoupWebsocketConnection * ws, Side * side)
{
  g_string_append (side->events, "C;");
  side->closed = TRUE;
}

/* As the server's: no more once the connection is no longer open. */
static gboolean
on_text (gpointer owner, const char *text, gsize len)
{
  Side *side = owner;

  if (soup_websocket_connection_get_state (side->ws) !=
      SOUP_WEBSOCKET_STATE_OPEN)
    return FALSE;
  side_log_message (side, "T", text, len);
  return TRUE;
}

static void
side_init (Side * side, gboolean take_texts)
{
  g_autoptr (GSocket) socket = NULL;
  g_autoptr (GSocketConnection) connection = NULL;
  g_autoptr (GUri) uri = g_uri_parse ("ws://127.0.0.1/app/fuzz",
      G_URI_FLAGS_NONE, NULL);
  int fds[2];

  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
    abort ();
  socket = g_socket_new_from_fd (fds[0], NULL);
  if (socket == NULL)
    abort ();
  connection = g_socket_connection_factory_create_connection (socket);
  side->client = fds[1];
  side->events = g_string_new (NULL);
  side->written = g_byte_array_new ();
  side->closed = FALSE;
  side->context = g_main_context_new ();
  /* The stream keeps a duplicate of the descriptor; the socket and its
   * connection go when this returns, as the server's HTTP connection. */
  side->stream = legba_ws_stream_new (G_IO_STREAM (connection), socket, TRUE);
  legba_ws_stream_set_max_message (side->stream, MAX_MESSAGE);
  g_main_context_push_thread_default (side->context);
  side->ws = soup_websocket_connection_new (G_IO_STREAM (side->stream), uri,
      SOUP_WEBSOCKET_CONNECTION_SERVER, NULL, NULL, NULL);
  g_main_context_pop_thread_default (side->context);
  soup_websocket_connection_set_max_incoming_payload_size (side->ws,
      MAX_MESSAGE);
  soup_websocket_connection_set_keepalive_interval (side->ws, 0);
  legba_ws_stream_set_owner (side->stream, side);
  if (take_texts)
    legba_ws_stream_set_text_func (side->stream, on_text);
  g_signal_connect (side->ws, "message", G_CALLBACK (on_message), side);
  g_signal_connect (side->ws, "error", G_CALLBACK (on_error), side);
  g_signal_connect (side->ws, "closing", G_CALLBACK (on_closing), side);
  g_signal_connect (side->ws, "closed", G_CALLBACK (on_closed), side);
}

/* Reads what the server wrote so far. */
static void
side_drain (Side * side)
{
  guint8 buffer[4096];
  ssize_t n;

  while ((n = recv (side->client, buffer, sizeof buffer, MSG_DONTWAIT)) > 0)
    g_byte_array_append (side->written, buffer, n);
}

/* Runs the side's context until nothing is ready. */
static void
side_settle (Side * side)
{
  guint i = 0;

  g_main_context_push_thread_default (side->context);
  while (g_main_context_iteration (side->context, FALSE))
    if (++i == MAX_ITERATIONS)
      abort ();
  g_main_context_pop_thread_default (side->context);
  side_drain (side);
}

/* A server that closed its socket takes nothing more: noted in the
 * events, as both sides must have closed by the same piece. */
static void
side_send (Side * side, const uint8_t * data, size_t len)
{
  while (len > 0) {
    ssize_t n = send (side->client, data, len, MSG_NOSIGNAL);

    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      g_string_append (side->events, "P;");
      return;
    }
    if (n <= 0)
      abort ();
    data += n;
    len -= n;
  }
}

static gboolean
on_close_deadline (gpointer user_data)
{
  g_printerr ("the connection did not close within %u s of the end of "
      "its input\n", CLOSE_DEADLINE_S);
  abort ();
}

/* The client's end of input: the connection must close, whatever came
 * before it (libsoup waits at most 5 s for a peer's close). */
static void
side_finish (Side * side)
{
  GSource *deadline = g_timeout_source_new_seconds (CLOSE_DEADLINE_S);

  g_source_set_callback (deadline, on_close_deadline, NULL, NULL);
  g_source_attach (deadline, side->context);
  shutdown (side->client, SHUT_WR);
  g_main_context_push_thread_default (side->context);
  while (!side->closed) {
    g_main_context_iteration (side->context, TRUE);
    side_drain (side);
  }
  g_main_context_pop_thread_default (side->context);
  g_source_destroy (deadline);
  g_source_unref (deadline);
  side_drain (side);
}

static void
side_clear (Side * side)
{
  g_main_context_push_thread_default (side->context);
  g_clear_object (&side->ws);
  g_clear_object (&side->stream);
  while (g_main_context_iteration (side->context, FALSE));
  g_main_context_pop_thread_default (side->context);
  g_main_context_unref (side->context);
  close (side->client);
  g_string_free (side->events, TRUE);
  g_byte_array_unref (side->written);
}

/* For a failure's report: bytes as they are when printable, else \xNN. */
static void
print_escaped (const guint8 * data, gsize len)
{
  for (gsize i = 0; i < len; i++) {
    if (data[i] >= 0x20 && data[i] < 0x7f && data[i] != '\\')
      g_printerr ("%c", data[i]);
    else
      g_printerr ("\\x%02x", data[i]);
  }
}

static void
print_side (const char *name, Side * side)
{
  g_printerr ("%s: events ", name);
  print_escaped ((const guint8 *) side->events->str, side->events->len);
  g_printerr ("\n  written ");
  print_escaped (side->written->data, side->written->len);
  g_printerr ("\n");
}

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  Side sides[2];
  size_t piece, at = 1;

  if (size < 1)
    return 0;
  piece = data[0] == 0 ? size : (size_t) data[0] % 32 + 1;
  side_init (&sides[0], FALSE);
  side_init (&sides[1], TRUE);
  while (at < size) {
    size_t len = MIN (piece, size - at);

    for (guint i = 0; i < 2; i++) {
      side_send (&sides[i], data + at, len);
      side_settle (&sides[i]);
      g_string_append_c (sides[i].events, '|');
    }
    at += len;
  }
  for (guint i = 0; i < 2; i++)
    side_finish (&sides[i]);

  if (!g_string_equal (sides[0].events, sides[1].events) ||
      sides[0].written->len != sides[1].written->len ||
      (sides[0].written->len > 0 && memcmp (sides[0].written->data,
              sides[1].written->data, sides[0].written->len) != 0)) {
    print_side ("libsoup alone", &sides[0]);
    print_side ("with the stream's texts", &sides[1]);
    abort ();
  }
  for (guint i = 0; i < 2; i++)
    side_clear (&sides[i]);
  return 0;
}
