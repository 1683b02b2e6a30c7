/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaWsStream: the GIOStream itself (legba-ws-stream.h says what it is
 * for), the socket's descriptor it reads and writes over a plain socket,
 * the frame header parsing its two streams share, closing with its
 * linger, and the settings and counters of its API. Its output is in
 * legba-ws-stream-output.c, its input in legba-ws-stream-input.c, the
 * text frames it takes before libsoup in legba-ws-stream-texts.c.
 */
#include <legba/server/legba-ws-stream-private.h>

#include <glib-unix.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- The socket's descriptor ----
 *
 * Over a plain socket the stream reads and writes the descriptor itself,
 * as GIO's socket would (non-blocking, no SIGPIPE), without keeping the
 * GSocket: some 340 bytes a socket, more than the whole stream. */

gboolean
legba_ws_fd_closed (int fd, GError ** error)
{
  if (fd >= 0)
    return FALSE;
  g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_CLOSED,
      "the socket is closed");
  return TRUE;
}

void
legba_ws_fd_error (int errsv, const char *what, GError ** error)
{
  g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "%s: %s",
      what, g_strerror (errsv));
}

/* The conditions of condition (and G_IO_HUP, G_IO_ERR) the socket is in
 * now. */
GIOCondition
legba_ws_fd_check (int fd, GIOCondition condition)
{
  struct pollfd pfd = { fd, condition, 0 };
  int r;

  if (fd < 0)
    return 0;
  do
    r = poll (&pfd, 1, 0);
  while (r < 0 && errno == EINTR);
  return r > 0 ? pfd.revents & (condition | G_IO_HUP | G_IO_ERR) : 0;
}

gboolean
legba_ws_fd_wait (int fd, GIOCondition condition, GCancellable * cancellable,
    GError ** error)
{
  GPollFD pfd[2] = { {fd, condition, 0}, };
  guint n = g_cancellable_make_pollfd (cancellable, &pfd[1]) ? 2 : 1;
  int r;

  do
    r = g_poll (pfd, n, -1);
  while (r < 0 && errno == EINTR);
  if (n == 2)
    g_cancellable_release_fd (cancellable);
  return !g_cancellable_set_error_if_cancelled (cancellable, error);
}

/* After a recv() or send() that failed: TRUE when it is to be made
 * again (interrupted, or it would block and the call blocks: once the
 * socket is ready), else FALSE with error set. */
static gboolean
legba_ws_fd_again (int fd, GIOCondition condition, gboolean blocking,
    GCancellable * cancellable, const char *what, GError ** error)
{
  int errsv = errno;

  if (errsv == EINTR)
    return TRUE;
  if ((errsv == EAGAIN || errsv == EWOULDBLOCK) && blocking)
    return legba_ws_fd_wait (fd, condition, cancellable, error);
  legba_ws_fd_error (errsv, what, error);
  return FALSE;
}

gssize
legba_ws_fd_recv (int fd, void *buffer, gsize count, gboolean blocking,
    GCancellable * cancellable, GError ** error)
{
  gssize n;

  if (legba_ws_fd_closed (fd, error))
    return -1;
  do {
    n = recv (fd, buffer, count, MSG_DONTWAIT);
    if (n >= 0)
      return n;
  } while (legba_ws_fd_again (fd, G_IO_IN, blocking, cancellable,
          "Error receiving data", error));
  return -1;
}

gssize
legba_ws_fd_send (int fd, const void *buffer, gsize count, gboolean blocking,
    GCancellable * cancellable, GError ** error)
{
  gssize n;

  if (legba_ws_fd_closed (fd, error))
    return -1;
  do {
    n = send (fd, buffer, count, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0)
      return n;
  } while (legba_ws_fd_again (fd, G_IO_OUT, blocking, cancellable,
          "Error sending data", error));
  return -1;
}

/* The descriptor of the stream of an input or output without base. */
int
legba_ws_stream_fd (LegbaWsStream * stream)
{
  return stream != NULL ? stream->fd : -1;
}

/* RFC 6455 §5.2: the header length once its first two bytes are known. */
guint
legba_ws_header_need (const guint8 * h)
{
  guint len7 = h[1] & 0x7f;

  return 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + ((h[1] & 0x80) ? 4 : 0);
}

guint64
legba_ws_header_payload_len (const guint8 * h)
{
  guint len7 = h[1] & 0x7f;
  guint64 len = 0;
  guint i;

  if (len7 < 126)
    return len7;
  if (len7 == 126)
    return ((guint64) h[2] << 8) | h[3];
  for (i = 2; i < 10; i++)
    len = (len << 8) | h[i];
  return len;
}

/* ---- LegbaWsStream ---- */

G_DEFINE_FINAL_TYPE (LegbaWsStream, legba_ws_stream, G_TYPE_IO_STREAM);

G_DEFINE_QUARK (legba - ws - stream - error - quark, legba_ws_stream_error);

static GInputStream *
legba_ws_stream_get_input_stream (GIOStream * stream)
{
  LegbaWsStream *self = LEGBA_WS_STREAM (stream);

  return G_INPUT_STREAM (self->input);
}

static GOutputStream *
legba_ws_stream_get_output_stream (GIOStream * stream)
{
  LegbaWsStream *self = LEGBA_WS_STREAM (stream);

  return G_OUTPUT_STREAM (self->output);
}

/* A peer that does not read keeps the socket unwritable; closing through
 * TLS would then wait forever to send close_notify. Such a socket is
 * aborted instead. */
static void
legba_ws_stream_abort_if_stalled (LegbaWsStream * self)
{
  if (self->fd < 0 || self->aborted)
    return;
  if (!(legba_ws_fd_check (self->fd, G_IO_OUT) & G_IO_OUT))
    legba_ws_stream_abort (self);
}

/* Closes the socket when the stream reads and writes it directly; base
 * closes it otherwise. Either way the descriptor is no longer used. */
static gboolean
legba_ws_stream_close_fd (LegbaWsStream * self, GError ** error)
{
  int fd = self->fd;

  self->fd = -1;
  legba_ws_output_drop_frames (self->output);
  if (self->base != NULL || fd < 0)
    return TRUE;
  if (self->socket != NULL)
    return g_socket_close (self->socket, error);
  if (close (fd) != 0 && errno != EINTR) {
    legba_ws_fd_error (errno, "Error closing socket", error);
    return FALSE;
  }
  return TRUE;
}

static gboolean
legba_ws_stream_close (GIOStream * stream, GCancellable * cancellable,
    GError ** error)
{
  LegbaWsStream *self = LEGBA_WS_STREAM (stream);

  legba_ws_input_close_watch (self->input);
  legba_ws_stream_abort_if_stalled (self);
  if (!legba_ws_stream_close_fd (self, error))
    return FALSE;
  if (self->base == NULL)
    return TRUE;
  return g_io_stream_close (self->base, cancellable, error);
}

static void
legba_ws_stream_base_closed (GObject * source, GAsyncResult * result,
    gpointer user_data)
{
  g_autoptr (GTask) task = user_data;
  GError *error = NULL;

  if (g_io_stream_close_finish (G_IO_STREAM (source), result, &error))
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

static void
legba_ws_stream_close_base (LegbaWsStream * self)
{
  GTask *task = g_steal_pointer (&self->close_task);

  if (self->drain_source != NULL) {
    g_source_destroy (self->drain_source);
    g_clear_pointer (&self->drain_source, g_source_unref);
  }
  if (self->drain_timeout != NULL) {
    g_source_destroy (self->drain_timeout);
    g_clear_pointer (&self->drain_timeout, g_source_unref);
  }

  legba_ws_stream_abort_if_stalled (self);
  if (self->base == NULL) {
    GError *error = NULL;

    if (legba_ws_stream_close_fd (self, &error))
      g_task_return_boolean (task, TRUE);
    else
      g_task_return_error (task, error);
    g_object_unref (task);
    return;
  }
  legba_ws_stream_close_fd (self, NULL);
  g_io_stream_close_async (self->base, g_task_get_priority (task),
      g_task_get_cancellable (task), legba_ws_stream_base_closed, task);
}

static gboolean
legba_ws_stream_drain_timeout (gpointer user_data)
{
  legba_ws_stream_close_base (LEGBA_WS_STREAM (user_data));
  return G_SOURCE_REMOVE;
}

/* Reads dropped in one dispatch of the drain (16 KiB, as
 * LEGBA_WS_READ_BUDGET): a peer that keeps sending must not hold the
 * thread until the linger's end. */
#define LEGBA_WS_DRAIN_READS 4

static gboolean
legba_ws_stream_drain (gint fd, GIOCondition condition, gpointer user_data)
{
  LegbaWsStream *self = LEGBA_WS_STREAM (user_data);
  char buffer[4096];
  guint reads = 0;

  for (;;) {
    gssize n = recv (fd, buffer, sizeof buffer, MSG_DONTWAIT);

    if (n > 0 && ++reads == LEGBA_WS_DRAIN_READS)
      return G_SOURCE_CONTINUE;
    if (n > 0 || (n < 0 && errno == EINTR))
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return G_SOURCE_CONTINUE;
    break;
  }

  legba_ws_stream_close_base (self);
  return G_SOURCE_REMOVE;
}

static void
legba_ws_stream_close_async (GIOStream * stream, int io_priority,
    GCancellable * cancellable, GAsyncReadyCallback callback,
    gpointer user_data)
{
  LegbaWsStream *self = LEGBA_WS_STREAM (stream);
  GTask *task;

  legba_ws_input_close_watch (self->input);
  /* Nothing is written after the close: frames the socket did not take
   * go, as libsoup's own queue does. */
  legba_ws_output_drop_frames (self->output);
  task = g_task_new (stream, cancellable, callback, user_data);
  g_task_set_source_tag (task, legba_ws_stream_close_async);
  g_task_set_priority (task, io_priority);
  self->close_task = task;

  if (self->fd < 0 || self->aborted || self->linger_ms == 0) {
    legba_ws_stream_close_base (self);
    return;
  }

  /* RFC 6455 §7.1.1: the server closes first; lingering lets the peer
   * read the close frame rather than a reset caused by unread input. */
  shutdown (self->fd, SHUT_WR);
  self->drain_source = g_unix_fd_source_new (self->fd,
      G_IO_IN | G_IO_HUP | G_IO_ERR);
  g_source_set_callback (self->drain_source,
      (GSourceFunc) G_CALLBACK (legba_ws_stream_drain), self, NULL);
  g_source_attach (self->drain_source, g_main_context_get_thread_default ());
  self->drain_timeout = g_timeout_source_new (self->linger_ms);
  g_source_set_callback (self->drain_timeout, legba_ws_stream_drain_timeout,
      self, NULL);
  g_source_attach (self->drain_timeout, g_main_context_get_thread_default ());
}

static gboolean
legba_ws_stream_close_finish (GIOStream * stream, GAsyncResult * result,
    GError ** error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

static void
legba_ws_stream_finalize (GObject * object)
{
  LegbaWsStream *self = LEGBA_WS_STREAM (object);

  /* libsoup may hold the input and the output a little longer; they then
   * find the socket closed. */
  if (self->input != NULL)
    self->input->stream = NULL;
  if (self->output != NULL)
    self->output->stream = NULL;
  g_clear_object (&self->input);
  g_clear_object (&self->output);
  g_clear_object (&self->base);
  g_clear_object (&self->socket);
  G_OBJECT_CLASS (legba_ws_stream_parent_class)->finalize (object);
}

static void
legba_ws_stream_class_init (LegbaWsStreamClass * klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GIOStreamClass *stream_class = G_IO_STREAM_CLASS (klass);

  object_class->finalize = legba_ws_stream_finalize;
  stream_class->get_input_stream = legba_ws_stream_get_input_stream;
  stream_class->get_output_stream = legba_ws_stream_get_output_stream;
  stream_class->close_fn = legba_ws_stream_close;
  stream_class->close_async = legba_ws_stream_close_async;
  stream_class->close_finish = legba_ws_stream_close_finish;
}

static void
legba_ws_stream_init (LegbaWsStream * self)
{
  self->fd = -1;
}

/* What base may hold of the peer's bytes past the request: libsoup reads
 * an HTTP request in blocks of 8 KiB and keeps the rest of the last one,
 * so once more than that has been taken, base holds nothing more. */
#define LEGBA_WS_TAKE_MAX (64 * 1024)

/* Reads what base holds, and what the socket has now, into held; stops at
 * a read that gives less than asked, after which base holds nothing. */
static void
legba_ws_input_take (LegbaWsInput * self, GPollableInputStream * base)
{
  guint8 chunk[4096];
  gssize n;

  do {
    n = g_pollable_input_stream_read_nonblocking (base, chunk, sizeof chunk,
        NULL, NULL);
    if (n <= 0)
      break;
    if (self->held == NULL)
      self->held = g_byte_array_new ();
    g_byte_array_append (self->held, chunk, n);
  } while ((gsize) n == sizeof chunk && self->held->len < LEGBA_WS_TAKE_MAX);
}

LegbaWsStream *
legba_ws_stream_new (GIOStream * base, GSocket * socket, gboolean plain)
{
  LegbaWsStream *self;
  GInputStream *base_input;

  g_return_val_if_fail (G_IS_IO_STREAM (base), NULL);
  g_return_val_if_fail (socket == NULL || G_IS_SOCKET (socket), NULL);

  base_input = g_io_stream_get_input_stream (base);
  self = g_object_new (LEGBA_TYPE_WS_STREAM, NULL);
  self->input = g_object_new (LEGBA_TYPE_WS_INPUT, NULL);
  self->output = g_object_new (LEGBA_TYPE_WS_OUTPUT, NULL);

  /* Over a plain socket, base's layers (libsoup's buffering over GIO's
   * socket connection and its two streams) only pass bytes through once
   * what libsoup read past the request is taken; the socket is then read
   * and written directly and base let go. Releasing base neither closes
   * the socket (libsoup's stream does not close on dispose; GIO's socket
   * connection does not close its socket on dispose) nor costs the some
   * 600 bytes base keeps for each socket. The stream keeps a duplicate of
   * the descriptor, and the GSocket goes with the HTTP connection. */
  if (socket != NULL && plain && G_IS_POLLABLE_INPUT_STREAM (base_input)) {
    legba_ws_input_take (self->input, G_POLLABLE_INPUT_STREAM (base_input));
    self->fd = fcntl (g_socket_get_fd (socket), F_DUPFD_CLOEXEC, 0);
    if (self->fd < 0) {
      self->socket = g_object_ref (socket);
      self->fd = g_socket_get_fd (socket);
    }
    self->input->stream = self->output->stream = self;
    return self;
  }

  self->socket = socket ? g_object_ref (socket) : NULL;
  self->fd = socket ? g_socket_get_fd (socket) : -1;
  self->base = g_object_ref (base);
  self->input->base = g_object_ref (base_input);
  self->output->base = g_object_ref (g_io_stream_get_output_stream (base));
  return self;
}

gsize
legba_ws_frame_size (gsize payload_len)
{
  if (payload_len < 126)
    return payload_len + 2;
  if (payload_len < 65536)
    return payload_len + 4;
  return payload_len + 10;
}

void
legba_ws_stream_account (LegbaWsStream * stream, gsize frame_size)
{
  g_return_if_fail (LEGBA_IS_WS_STREAM (stream));

  g_queue_push_tail (&stream->output->pending, GSIZE_TO_POINTER (frame_size));
  stream->output->queued += frame_size;
}

gsize
legba_ws_stream_get_queued (LegbaWsStream * stream)
{
  g_return_val_if_fail (LEGBA_IS_WS_STREAM (stream), 0);

  return legba_ws_output_get_queued (stream->output);
}

guint64
legba_ws_stream_get_written (LegbaWsStream * stream)
{
  g_return_val_if_fail (LEGBA_IS_WS_STREAM (stream), 0);

  return stream->output->written;
}

void
legba_ws_stream_set_max_message (LegbaWsStream * stream, guint64 max_bytes)
{
  g_return_if_fail (LEGBA_IS_WS_STREAM (stream));

  stream->input->max_message = max_bytes;
}

void
legba_ws_stream_set_max_control_rate (LegbaWsStream * stream,
    guint max_per_second)
{
  g_return_if_fail (LEGBA_IS_WS_STREAM (stream));

  stream->input->max_control = max_per_second;
}

void
legba_ws_stream_set_linger (LegbaWsStream * stream, guint timeout_ms)
{
  g_return_if_fail (LEGBA_IS_WS_STREAM (stream));

  stream->linger_ms = timeout_ms;
}

void
legba_ws_stream_abort (LegbaWsStream * stream)
{
  struct linger linger = { 1, 0 };

  g_return_if_fail (LEGBA_IS_WS_STREAM (stream));

  if (stream->aborted)
    return;
  stream->aborted = TRUE;
  legba_ws_output_drop_frames (stream->output);
  if (stream->fd < 0)
    return;

  /* Drop what the kernel still holds for the peer: the close that follows
   * resets the connection instead of keeping it for the peer to read. */
  if (setsockopt (stream->fd, SOL_SOCKET, SO_LINGER, &linger,
          sizeof linger) != 0)
    g_debug ("SO_LINGER on a stalled socket failed");
  shutdown (stream->fd, SHUT_RDWR);
}

int
legba_ws_stream_get_fd (LegbaWsStream * stream)
{
  g_return_val_if_fail (LEGBA_IS_WS_STREAM (stream), -1);

  return stream->fd;
}

gboolean
legba_ws_stream_is_aborted (LegbaWsStream * stream)
{
  g_return_val_if_fail (LEGBA_IS_WS_STREAM (stream), FALSE);

  return stream->aborted;
}

void
legba_ws_stream_set_owner (LegbaWsStream * stream, gpointer owner)
{
  stream->owner = owner;
}

gpointer
legba_ws_stream_get_owner (LegbaWsStream * stream)
{
  return stream->owner;
}

void
legba_ws_stream_set_text_func (LegbaWsStream * stream, LegbaWsTextFunc func)
{
  stream->text_func = func;
}
