/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#include <legba/server/legba-ws-stream.h>

#include <glib-unix.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

struct _LegbaWsStream
{
  GIOStream parent;

  GIOStream *base;              /* NULL when the socket is used directly */
  /* The socket's descriptor while the stream is open, else -1. Used
   * directly, it is a duplicate the stream owns unless socket is set
   * (no duplicate could be made), which then keeps it open. */
  int fd;
  GSocket *socket;
  struct _LegbaWsInput *input;
  struct _LegbaWsOutput *output;

  gpointer owner;
  LegbaWsTextFunc text_func;
  guint linger_ms;
  gboolean aborted;

  /* A close in progress: lingering, then closing base. */
  GTask *close_task;
  GSource *drain_source;
  GSource *drain_timeout;
};

/* ---- The socket's descriptor ----
 *
 * Over a plain socket the stream reads and writes the descriptor itself,
 * as GIO's socket would (non-blocking, no SIGPIPE), without keeping the
 * GSocket: some 340 bytes a socket, more than the whole stream. */

static gboolean
legba_ws_fd_closed (int fd, GError ** error)
{
  if (fd >= 0)
    return FALSE;
  g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_CLOSED,
      "the socket is closed");
  return TRUE;
}

static void
legba_ws_fd_error (int errsv, const char *what, GError ** error)
{
  g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "%s: %s",
      what, g_strerror (errsv));
}

/* The conditions of condition (and G_IO_HUP, G_IO_ERR) the socket is in
 * now. */
static GIOCondition
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

static gboolean
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

static gssize
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

static gssize
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
static int
legba_ws_stream_fd (LegbaWsStream * stream)
{
  return stream != NULL ? stream->fd : -1;
}

/* RFC 6455 §5.2: the header length once its first two bytes are known. */
static guint
legba_ws_header_need (const guint8 * h)
{
  guint len7 = h[1] & 0x7f;

  return 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + ((h[1] & 0x80) ? 4 : 0);
}

static guint64
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

/* ---- LegbaWsOutput: the counting output stream ---- */

typedef struct _LegbaWsFrame LegbaWsFrame;

#define LEGBA_TYPE_WS_OUTPUT (legba_ws_output_get_type ())
G_DECLARE_FINAL_TYPE (LegbaWsOutput, legba_ws_output, LEGBA, WS_OUTPUT,
    GOutputStream);

struct _LegbaWsOutput
{
  GOutputStream parent;

  /* NULL when the socket is written directly, through stream: not owned
   * (the stream owns this), NULL again once the stream is gone. */
  GOutputStream *base;
  LegbaWsStream *stream;

  /* Parser of the frames going out (RFC 6455 §5.2). A server never masks,
   * but the mask bit is honoured anyway. */
  guint8 header[14];
  guint header_len;             /* header bytes seen of the current frame */
  guint header_need;            /* 2 until the length form is known */
  gboolean in_payload;
  guint64 payload_left;
  gboolean data_frame;          /* text, binary or continuation */
  gboolean fin;
  guint8 opcode;
  guint64 frame_size;           /* header and payload */
  guint64 message_written;      /* bytes of the head message written */
  gboolean close_written;

  /* Sizes of the accounted messages not completely written, oldest first. */
  GQueue pending;
  gsize queued;
  guint64 written;

  /* Bytes of the pongs libsoup is to write for the pings it read (RFC
   * 6455 §5.5.3: it answers each), until it writes them or its close. */
  gsize pongs_owed;

  /* Frames the stream writes itself that the socket has not taken yet:
   * text frames (legba_ws_stream_send_text), oldest first, and pongs
   * ahead of those not started; their bytes not yet written. They go
   * before anything libsoup writes after them; flush waits for the
   * socket to take them. pong is the one pong not started, which answers
   * the newest ping. */
  GQueue frames;
  gsize frames_left;
  LegbaWsFrame *pong;
  GSource *flush;
};

/* A frame of the stream's own, a text frame or a pong: its header, made
 * here, then its payload (a text frame's is shared with every other
 * socket it goes to). */
struct _LegbaWsFrame
{
  GBytes *payload;
  guint8 header[10];
  guint header_len;
  gsize sent;                   /* of header and payload together */
};

static void
legba_ws_frame_free (gpointer data)
{
  LegbaWsFrame *frame = data;

  g_bytes_unref (frame->payload);
  g_free (frame);
}

/* RFC 6455 §5.2: a final, unmasked text frame's header; returns its
 * length. */
static guint
legba_ws_text_header (guint8 * header, gsize payload_len)
{
  guint len = 2, i;

  header[0] = 0x81;
  if (payload_len < 126) {
    header[1] = payload_len;
  } else if (payload_len < 65536) {
    header[1] = 126;
    header[2] = payload_len >> 8;
    header[3] = payload_len & 0xff;
    len = 4;
  } else {
    header[1] = 127;
    for (i = 0; i < 8; i++)
      header[2 + i] = (guint64) payload_len >> (8 * (7 - i));
    len = 10;
  }
  return len;
}

static void legba_ws_output_pollable_init (GPollableOutputStreamInterface *
    iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (LegbaWsOutput, legba_ws_output,
    G_TYPE_OUTPUT_STREAM,
    G_IMPLEMENT_INTERFACE (G_TYPE_POLLABLE_OUTPUT_STREAM,
        legba_ws_output_pollable_init));

static void
legba_ws_output_message_done (LegbaWsOutput * self)
{
  gsize size;

  self->message_written = 0;
  if (g_queue_is_empty (&self->pending))
    return;
  size = GPOINTER_TO_SIZE (g_queue_pop_head (&self->pending));
  self->queued -= size;
}

static void
legba_ws_output_header_done (LegbaWsOutput * self)
{
  guint8 opcode = self->header[0] & 0x0f;

  self->data_frame = (opcode & 0x08) == 0;
  self->fin = (self->header[0] & 0x80) != 0;
  self->opcode = opcode;
  /* libsoup writes nothing after its close, no pong either. */
  if (opcode == 0x08) {
    self->close_written = TRUE;
    self->pongs_owed = 0;
  }
  self->payload_left = legba_ws_header_payload_len (self->header);
  self->frame_size = self->header_len + self->payload_left;
  self->in_payload = TRUE;
  if (self->data_frame)
    self->message_written += self->header_len;
  self->header_len = 0;
  self->header_need = 2;
}

static void
legba_ws_output_frame_done (LegbaWsOutput * self)
{
  self->in_payload = FALSE;
  if (self->data_frame && self->fin)
    legba_ws_output_message_done (self);
  if (self->opcode == 0x0a)
    self->pongs_owed -= MIN (self->pongs_owed, self->frame_size);
}

static void
legba_ws_output_feed (LegbaWsOutput * self, const guint8 * data, gsize len)
{
  self->written += len;

  while (len > 0) {
    if (self->in_payload) {
      gsize n = (gsize) MIN ((guint64) len, self->payload_left);

      self->payload_left -= n;
      if (self->data_frame)
        self->message_written += n;
      data += n;
      len -= n;
      if (self->payload_left == 0)
        legba_ws_output_frame_done (self);
      continue;
    }

    self->header[self->header_len++] = *data++;
    len--;
    if (self->header_len == 2)
      self->header_need = legba_ws_header_need (self->header);
    if (self->header_len >= 2 && self->header_len == self->header_need) {
      legba_ws_output_header_done (self);
      if (self->payload_left == 0)
        legba_ws_output_frame_done (self);
    }
  }
}

static gboolean
legba_ws_output_at_boundary (LegbaWsOutput * self)
{
  return !self->in_payload && self->header_len == 0;
}

static gsize
legba_ws_output_get_queued (LegbaWsOutput * self)
{
  gsize head;

  if (g_queue_is_empty (&self->pending))
    return self->frames_left + self->pongs_owed;
  head = GPOINTER_TO_SIZE (g_queue_peek_head (&self->pending));
  return self->frames_left + self->pongs_owed + self->queued -
      (gsize) MIN (self->message_written, (guint64) head);
}

/* Writes what it can of frame's bytes not yet sent, header and payload in
 * one call: the bytes written, or -1 with errno set. */
static gssize
legba_ws_frame_write (int fd, LegbaWsFrame * frame)
{
  struct iovec iov[2];
  struct msghdr msg = { 0, };
  gsize size, at = frame->sent;
  const guint8 *payload = g_bytes_get_data (frame->payload, &size);
  gssize n;

  if (at < frame->header_len) {
    iov[msg.msg_iovlen].iov_base = frame->header + at;
    iov[msg.msg_iovlen++].iov_len = frame->header_len - at;
    at = 0;
  } else {
    at -= frame->header_len;
  }
  if (at < size) {
    iov[msg.msg_iovlen].iov_base = (guint8 *) payload + at;
    iov[msg.msg_iovlen++].iov_len = size - at;
  }
  msg.msg_iov = iov;
  do
    n = sendmsg (fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n;
}

/* Writes the queued frames the socket takes now, never in the middle of
 * one of libsoup's frames. TRUE once none is left; FALSE when the socket
 * is full, or with error set when it failed. */
static gboolean
legba_ws_output_flush_frames (LegbaWsOutput * self, GError ** error)
{
  LegbaWsFrame *frame;

  while ((frame = g_queue_peek_head (&self->frames)) != NULL) {
    int fd = legba_ws_stream_fd (self->stream);
    gssize n;

    if (legba_ws_fd_closed (fd, error))
      return FALSE;
    if (frame->sent == 0 && !legba_ws_output_at_boundary (self))
      return FALSE;
    n = legba_ws_frame_write (fd, frame);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        legba_ws_fd_error (errno, "Error sending data", error);
      return FALSE;
    }
    frame->sent += n;
    self->frames_left -= n;
    self->written += n;
    if (frame == self->pong)
      self->pong = NULL;
    if (frame->sent < frame->header_len + g_bytes_get_size (frame->payload))
      return FALSE;
    legba_ws_frame_free (g_queue_pop_head (&self->frames));
  }
  return TRUE;
}

/* Drops the queued frames and stops waiting to write them: the socket is
 * closed or failed. */
static void
legba_ws_output_drop_frames (LegbaWsOutput * self)
{
  g_queue_clear_full (&self->frames, legba_ws_frame_free);
  self->frames_left = 0;
  self->pong = NULL;
  self->pongs_owed = 0;
  if (self->flush != NULL) {
    g_source_destroy (self->flush);
    g_clear_pointer (&self->flush, g_source_unref);
  }
}

/* Drops the queued frames but one partly written: a close goes next. */
static void
legba_ws_output_drop_unstarted (LegbaWsOutput * self)
{
  LegbaWsFrame *head = g_queue_peek_head (&self->frames);
  gsize left = 0;

  if (head != NULL && head->sent > 0) {
    g_queue_pop_head (&self->frames);
    left = head->header_len + g_bytes_get_size (head->payload) - head->sent;
  } else {
    head = NULL;
  }
  g_queue_clear_full (&self->frames, legba_ws_frame_free);
  self->pong = NULL;
  self->frames_left = left;
  if (head != NULL)
    g_queue_push_head (&self->frames, head);
}

static gboolean
legba_ws_output_on_writable (gint fd, GIOCondition condition,
    gpointer user_data)
{
  LegbaWsOutput *self = user_data;
  g_autoptr (GError) error = NULL;

  if (!legba_ws_output_flush_frames (self, &error) && error == NULL)
    return G_SOURCE_CONTINUE;
  if (error != NULL) {
    /* The peer is gone: what libsoup reads next tells it so. */
    g_debug ("%s", error->message);
    legba_ws_output_drop_frames (self);
    if (self->stream != NULL)
      legba_ws_stream_abort (self->stream);
    return G_SOURCE_REMOVE;
  }
  g_clear_pointer (&self->flush, g_source_unref);
  return G_SOURCE_REMOVE;
}

static gssize
legba_ws_output_send (LegbaWsOutput * self, const void *buffer, gsize count,
    gboolean blocking, GCancellable * cancellable, GError ** error)
{
  gssize n;

  /* The stream's own frames go first, except to finish a frame of
   * libsoup's that is partly written. */
  while (!g_queue_is_empty (&self->frames) &&
      legba_ws_output_at_boundary (self)) {
    GError *flush_error = NULL;

    if (legba_ws_output_flush_frames (self, &flush_error))
      break;
    if (flush_error != NULL) {
      g_propagate_error (error, flush_error);
      return -1;
    }
    if (!blocking) {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK,
          g_strerror (EAGAIN));
      return -1;
    }
    if (!legba_ws_fd_wait (legba_ws_stream_fd (self->stream), G_IO_OUT,
            cancellable, error))
      return -1;
  }

  if (self->base == NULL)
    n = legba_ws_fd_send (legba_ws_stream_fd (self->stream), buffer, count,
        blocking, cancellable, error);
  else if (blocking)
    n = g_output_stream_write (self->base, buffer, count, cancellable, error);
  else
    n = g_pollable_output_stream_write_nonblocking (G_POLLABLE_OUTPUT_STREAM
        (self->base), buffer, count, cancellable, error);
  if (n > 0)
    legba_ws_output_feed (self, buffer, n);
  return n;
}

static gssize
legba_ws_output_write (GOutputStream * stream, const void *buffer,
    gsize count, GCancellable * cancellable, GError ** error)
{
  return legba_ws_output_send (LEGBA_WS_OUTPUT (stream), buffer, count, TRUE,
      cancellable, error);
}

static gboolean
legba_ws_output_flush (GOutputStream * stream, GCancellable * cancellable,
    GError ** error)
{
  LegbaWsOutput *self = LEGBA_WS_OUTPUT (stream);

  if (self->base == NULL)
    return TRUE;
  return g_output_stream_flush (self->base, cancellable, error);
}

/* The base stream belongs to the base GIOStream, which closes it, as the
 * LegbaWsStream closes the socket. */
static gboolean
legba_ws_output_close (GOutputStream * stream, GCancellable * cancellable,
    GError ** error)
{
  return TRUE;
}

static gboolean
legba_ws_output_can_poll (GPollableOutputStream * stream)
{
  LegbaWsOutput *self = LEGBA_WS_OUTPUT (stream);

  if (self->base == NULL)
    return TRUE;
  return G_IS_POLLABLE_OUTPUT_STREAM (self->base) &&
      g_pollable_output_stream_can_poll (G_POLLABLE_OUTPUT_STREAM (self->base));
}

static gboolean
legba_ws_output_is_writable (GPollableOutputStream * stream)
{
  LegbaWsOutput *self = LEGBA_WS_OUTPUT (stream);

  if (self->base == NULL)
    return (legba_ws_fd_check (legba_ws_stream_fd (self->stream),
            G_IO_OUT) & G_IO_OUT) != 0;
  return g_pollable_output_stream_is_writable (G_POLLABLE_OUTPUT_STREAM
      (self->base));
}

static GSource *
legba_ws_output_create_source (GPollableOutputStream * stream,
    GCancellable * cancellable)
{
  LegbaWsOutput *self = LEGBA_WS_OUTPUT (stream);
  g_autoptr (GSource) base_source = NULL;

  if (self->base == NULL)
    base_source = g_unix_fd_source_new (legba_ws_stream_fd (self->stream),
        G_IO_OUT);
  else
    base_source = g_pollable_output_stream_create_source
        (G_POLLABLE_OUTPUT_STREAM (self->base), cancellable);
  return g_pollable_source_new_full (self, base_source, cancellable);
}

static gssize
legba_ws_output_write_nonblocking (GPollableOutputStream * stream,
    const void *buffer, gsize count, GError ** error)
{
  return legba_ws_output_send (LEGBA_WS_OUTPUT (stream), buffer, count, FALSE,
      NULL, error);
}

static void
legba_ws_output_pollable_init (GPollableOutputStreamInterface * iface)
{
  iface->can_poll = legba_ws_output_can_poll;
  iface->is_writable = legba_ws_output_is_writable;
  iface->create_source = legba_ws_output_create_source;
  iface->write_nonblocking = legba_ws_output_write_nonblocking;
}

static void
legba_ws_output_finalize (GObject * object)
{
  LegbaWsOutput *self = LEGBA_WS_OUTPUT (object);

  g_queue_clear (&self->pending);
  legba_ws_output_drop_frames (self);
  g_clear_object (&self->base);
  G_OBJECT_CLASS (legba_ws_output_parent_class)->finalize (object);
}

static void
legba_ws_output_class_init (LegbaWsOutputClass * klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GOutputStreamClass *stream_class = G_OUTPUT_STREAM_CLASS (klass);

  object_class->finalize = legba_ws_output_finalize;
  stream_class->write_fn = legba_ws_output_write;
  stream_class->flush = legba_ws_output_flush;
  stream_class->close_fn = legba_ws_output_close;
}

static void
legba_ws_output_init (LegbaWsOutput * self)
{
  g_queue_init (&self->pending);
  g_queue_init (&self->frames);
  self->header_need = 2;
}

/* ---- LegbaWsInput: the input stream that bounds incoming messages ---- */

/* Bytes one dispatch of a socket's reading takes off a plain socket: a
 * peer that sends as fast as it is read must not hold the thread, which
 * serves every other socket too. What is left waits for the next
 * iteration; the socket is still readable. */
#define LEGBA_WS_READ_BUDGET (16 * 1024)

/* libsoup's max-incoming-payload-size bounds one frame, not a message
 * sent as many continuation frames (RFC 6455 §5.4), which it gathers in
 * memory. This stream reads the frame headers as they pass and fails the
 * read once a message would exceed the bound. */
#define LEGBA_TYPE_WS_INPUT (legba_ws_input_get_type ())
G_DECLARE_FINAL_TYPE (LegbaWsInput, legba_ws_input, LEGBA, WS_INPUT,
    GInputStream);

struct _LegbaWsInput
{
  GInputStream parent;

  /* As LegbaWsOutput's. */
  GInputStream *base;
  LegbaWsStream *stream;
  GByteArray *held;             /* the peer's first bytes, read before */
  gsize held_off;
  gboolean short_read;          /* the last socket read gave less than asked */
  gsize budget;                 /* socket bytes still to read this dispatch */
  gboolean closed;              /* no more waiting on the socket */
  /* Waiting on the socket: the context's watch (a user of it) and the
   * poll record the input keeps in it. */
  GSource *watch;
  GPollFD pollfd;
  GSource *reader;              /* the newest source made; not owned */

  guint8 header[14];
  guint header_len;
  guint header_need;
  guint64 payload_left;
  guint64 message_size;         /* payload of the current data message */
  guint64 max_message;          /* 0: no bound */
  gboolean too_large;
  gboolean in_message;          /* a fragmented message has begun */
  gboolean close_seen;

  /* Control frames in the current one-second window, and its start. */
  guint max_control;            /* per second; 0: no bound */
  guint control_count;
  gint64 control_window;
  gboolean flooded;             /* over max_control: reads fail */

  /* Whole text frames the stream takes itself (legba_ws_stream_set_text_func):
   * the start of a frame not yet whole, and an error of the socket's that
   * libsoup is still to read. */
  GByteArray *own;
  int pending_errno;
  gboolean texts_stopped;
};

static void legba_ws_input_pollable_init (GPollableInputStreamInterface *
    iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (LegbaWsInput, legba_ws_input,
    G_TYPE_INPUT_STREAM,
    G_IMPLEMENT_INTERFACE (G_TYPE_POLLABLE_INPUT_STREAM,
        legba_ws_input_pollable_init));

/* One more control frame from the peer: FALSE, and the input flooded,
 * when that makes more than max_control in the window. */
static gboolean
legba_ws_input_count_control (LegbaWsInput * self)
{
  gint64 now;

  if (self->max_control == 0)
    return TRUE;
  now = g_get_monotonic_time ();
  if (self->control_count == 0 || now - self->control_window >= G_USEC_PER_SEC) {
    self->control_window = now;
    self->control_count = 0;
  }
  if (++self->control_count <= self->max_control)
    return TRUE;
  self->flooded = TRUE;
  return FALSE;
}

/* A control frame going to libsoup: a ping it answers (RFC 6455 §5.5.2:
 * final, no reserved bit, masked, at most 125 bytes; while it has not
 * closed) owes a pong of the same payload, counted as queued until
 * libsoup writes it. */
static void
legba_ws_input_owe_pong (LegbaWsInput * self, guint64 payload_len)
{
  LegbaWsStream *stream = self->stream;

  if (stream == NULL || self->close_seen || stream->output->close_written ||
      self->header[0] != 0x89 || !(self->header[1] & 0x80) || payload_len > 125)
    return;
  stream->output->pongs_owed += 2 + payload_len;
}

/* Returns FALSE when a frame makes its message too large or comes over
 * the control frame rate; *good is then the number of bytes before that
 * frame's header within data. */
static gboolean
legba_ws_input_check (LegbaWsInput * self, const guint8 * data,
    gsize len, gsize * good)
{
  gsize i = 0, header_start = 0;

  while (i < len) {
    guint64 plen;
    guint8 opcode;

    if (self->payload_left > 0) {
      gsize n = (gsize) MIN ((guint64) (len - i), self->payload_left);

      self->payload_left -= n;
      i += n;
      continue;
    }

    if (self->header_len == 0)
      header_start = i;
    self->header[self->header_len++] = data[i++];
    if (self->header_len == 2)
      self->header_need = legba_ws_header_need (self->header);
    if (self->header_len < 2 || self->header_len < self->header_need)
      continue;

    plen = legba_ws_header_payload_len (self->header);
    opcode = self->header[0] & 0x0f;
    self->header_len = 0;
    self->header_need = 2;
    self->payload_left = plen;
    if (opcode & 0x08) {
      if (!legba_ws_input_count_control (self)) {
        *good = header_start;
        return FALSE;
      }
      legba_ws_input_owe_pong (self, plen);
      self->close_seen |= opcode == 0x08;
      continue;
    }
    if (opcode != 0)
      self->message_size = 0;
    self->in_message = !(self->header[0] & 0x80);
    if (self->max_message > 0 && plen > self->max_message - self->message_size) {
      *good = header_start;
      return FALSE;
    }
    self->message_size += plen;
  }
  return TRUE;
}

static gboolean
legba_ws_input_failed (LegbaWsInput * self)
{
  return self->too_large || self->flooded;
}

/* The error of every read once a bound is broken. */
static gssize
legba_ws_input_fail (LegbaWsInput * self, GError ** error)
{
  if (self->flooded)
    g_set_error_literal (error, LEGBA_WS_STREAM_ERROR,
        LEGBA_WS_STREAM_ERROR_CONTROL_FLOOD,
        "WebSocket control frames over the rate limit");
  else
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE,
        "WebSocket message over the size limit");
  return -1;
}

/* Passes on what base returned, up to the frame that breaks a bound;
 * the read after that one fails. */
static gssize
legba_ws_input_filter (LegbaWsInput * self, const void *buffer, gssize n,
    GError ** error)
{
  gsize good = 0;

  if (n <= 0 || legba_ws_input_check (self, buffer, n, &good))
    return n;

  if (!self->flooded)
    self->too_large = TRUE;
  if (good > 0)
    return good;
  return legba_ws_input_fail (self, error);
}

static gssize
legba_ws_input_take_held (LegbaWsInput * self, void *buffer, gsize count)
{
  gsize n = MIN (count, self->held->len - self->held_off);

  memcpy (buffer, self->held->data + self->held_off, n);
  self->held_off += n;
  if (self->held_off == self->held->len) {
    g_clear_pointer (&self->held, g_byte_array_unref);
    self->held_off = 0;
  }
  return n;
}

static gssize
legba_ws_input_receive (LegbaWsInput * self, void *buffer, gsize count,
    gboolean blocking, GCancellable * cancellable, GError ** error)
{
  if (self->held != NULL)
    return legba_ws_input_take_held (self, buffer, count);
  if (self->pending_errno != 0) {
    legba_ws_fd_error (self->pending_errno, "Error receiving data", error);
    self->pending_errno = 0;
    return -1;
  }
  if (self->base == NULL)
    return legba_ws_fd_recv (legba_ws_stream_fd (self->stream), buffer, count,
        blocking, cancellable, error);
  if (blocking)
    return g_input_stream_read (self->base, buffer, count, cancellable, error);
  return g_pollable_input_stream_read_nonblocking (G_POLLABLE_INPUT_STREAM
      (self->base), buffer, count, cancellable, error);
}

static gssize
legba_ws_input_read (GInputStream * stream, void *buffer, gsize count,
    GCancellable * cancellable, GError ** error)
{
  LegbaWsInput *self = LEGBA_WS_INPUT (stream);

  if (legba_ws_input_failed (self))
    return legba_ws_input_fail (self, error);
  return legba_ws_input_filter (self, buffer,
      legba_ws_input_receive (self, buffer, count, TRUE, cancellable, error),
      error);
}

/* The base stream belongs to the base GIOStream, which closes it, as the
 * LegbaWsStream closes the socket. */
static gboolean
legba_ws_input_close (GInputStream * stream, GCancellable * cancellable,
    GError ** error)
{
  return TRUE;
}

static gboolean
legba_ws_input_can_poll (GPollableInputStream * stream)
{
  LegbaWsInput *self = LEGBA_WS_INPUT (stream);

  if (self->base == NULL)
    return TRUE;
  return G_IS_POLLABLE_INPUT_STREAM (self->base) &&
      g_pollable_input_stream_can_poll (G_POLLABLE_INPUT_STREAM (self->base));
}

static gboolean
legba_ws_input_is_readable (GPollableInputStream * stream)
{
  LegbaWsInput *self = LEGBA_WS_INPUT (stream);

  if (legba_ws_input_failed (self) || self->held != NULL ||
      self->pending_errno != 0)
    return TRUE;
  if (self->base == NULL)
    return (legba_ws_fd_check (legba_ws_stream_fd (self->stream),
            G_IO_IN) & G_IO_IN) != 0;
  return g_pollable_input_stream_is_readable (G_POLLABLE_INPUT_STREAM
      (self->base));
}

/* ---- Whole text frames, taken before libsoup ----
 *
 * libsoup reads a socket's frames with a new reading source for every
 * batch, formats debug messages GLib drops, and hands each message over
 * through a GBytes and a signal emission: most of what a relayed client
 * event costs the server beside the kernel. Where the owner asked for them
 * (legba_ws_stream_set_text_func), the stream takes whole text frames
 * itself, as they come off the socket, and calls the owner with each
 * payload. Everything else (control frames, fragments, a frame over the
 * bound, unmasked or with reserved bits, text that is not UTF-8, the end
 * of the stream) goes to libsoup, which answers it as RFC 6455 says, and
 * so does whatever comes after it until libsoup is back at a frame
 * boundary outside a fragmented message: one socket's messages come one
 * way at a time, in order. After a close frame either way, or once the
 * owner declines a message, libsoup reads everything. */

static void legba_ws_stream_answer_ping (LegbaWsStream * stream,
    const guint8 * payload, gsize len);

typedef enum
{
  LEGBA_WS_SCAN_PARTIAL,        /* not all of the frame is there yet */
  LEGBA_WS_SCAN_TEXT,           /* a whole text frame the stream takes */
  LEGBA_WS_SCAN_PING,           /* a whole ping the stream answers */
  LEGBA_WS_SCAN_OTHER,          /* for libsoup */
} LegbaWsScan;

/* Classifies the frame at the start of data; a text frame's header size
 * and payload length go to *header_len and *payload_len. A frame libsoup
 * refuses by its length (over the bound, or a length not written in the
 * fewest bytes, RFC 6455 §5.2) is libsoup's as soon as the length is
 * there, before its mask: libsoup answers it at that point too. */
static LegbaWsScan
legba_ws_scan_frame (const guint8 * data, gsize len, guint64 max,
    guint * header_len, guint64 * payload_len)
{
  guint len7;

  if (len < 2)
    return LEGBA_WS_SCAN_PARTIAL;
  /* FIN, no reserved bit, ping; masked; a control frame's payload is at
   * most 125 bytes, its length in the 7-bit form (RFC 6455 §5.5). */
  if (data[0] == 0x89 && (data[1] & 0x80) && (data[1] & 0x7f) < 126) {
    *header_len = 6;
    *payload_len = data[1] & 0x7f;
    return len < *header_len + *payload_len ? LEGBA_WS_SCAN_PARTIAL :
        LEGBA_WS_SCAN_PING;
  }
  /* FIN, no reserved bit, text; masked, as a client's frames are. */
  if (data[0] != 0x81 || !(data[1] & 0x80))
    return LEGBA_WS_SCAN_OTHER;
  *header_len = legba_ws_header_need (data);
  if (len < *header_len - 4)
    return LEGBA_WS_SCAN_PARTIAL;
  *payload_len = legba_ws_header_payload_len (data);
  len7 = data[1] & 0x7f;
  if (*payload_len > max || (len7 == 126 && *payload_len < 126) ||
      (len7 == 127 && *payload_len <= G_MAXUINT16))
    return LEGBA_WS_SCAN_OTHER;
  if (len < *header_len || len - *header_len < *payload_len)
    return LEGBA_WS_SCAN_PARTIAL;
  return LEGBA_WS_SCAN_TEXT;
}

static void
legba_ws_unmask (guint8 * payload, gsize len, const guint8 * mask)
{
  gsize i;

  for (i = 0; i < len; i++)
    payload[i] ^= mask[i & 3];
}

static gboolean
legba_ws_input_may_take (LegbaWsInput * self)
{
  LegbaWsStream *stream = self->stream;

  return stream != NULL && stream->text_func != NULL &&
      stream->owner != NULL && self->base == NULL && self->held == NULL &&
      !self->closed && !legba_ws_input_failed (self) && !self->texts_stopped &&
      self->pending_errno == 0 && self->max_message > 0 &&
      self->header_len == 0 && self->payload_left == 0 &&
      !self->in_message && !self->close_seen && stream->fd >= 0 &&
      !stream->aborted && !stream->output->close_written;
}

/* Takes the whole text frames at the start of data (len bytes), unmasked
 * in place; returns how many bytes they took. *other is set when the
 * frame after them is libsoup's, or the owner declined one. */
static gsize
legba_ws_input_take_frames (LegbaWsInput * self, guint8 * data, gsize len,
    gboolean * other)
{
  gsize off = 0;

  *other = FALSE;
  while (off < len) {
    LegbaWsStream *stream = self->stream;
    guint header_len = 0;
    guint64 payload_len = 0;
    guint8 *payload;
    gboolean more;

    switch (legba_ws_scan_frame (data + off, len - off, self->max_message,
            &header_len, &payload_len)) {
      case LEGBA_WS_SCAN_PARTIAL:
        return off;
      case LEGBA_WS_SCAN_OTHER:
        *other = TRUE;
        return off;
      case LEGBA_WS_SCAN_PING:
        if (!legba_ws_input_count_control (self)) {
          *other = TRUE;
          return off;
        }
        payload = data + off + header_len;
        legba_ws_unmask (payload, payload_len, payload - 4);
        legba_ws_stream_answer_ping (stream, payload, payload_len);
        off += header_len + payload_len;
        if (!legba_ws_input_may_take (self)) {
          *other = TRUE;
          return off;
        }
        continue;
      case LEGBA_WS_SCAN_TEXT:
        break;
    }
    payload = data + off + header_len;
    legba_ws_unmask (payload, payload_len, payload - 4);
    if (!g_utf8_validate_len ((const char *) payload, payload_len, NULL)) {
      /* libsoup closes with 1007; it gets the frame as it came. */
      legba_ws_unmask (payload, payload_len, payload - 4);
      *other = TRUE;
      return off;
    }
    off += header_len + payload_len;
    more = stream->text_func (stream->owner, (const char *) payload,
        payload_len);
    if (!more || !legba_ws_input_may_take (self)) {
      self->texts_stopped |= !more;
      *other = TRUE;
      return off;
    }
  }
  return off;
}

/* Reads the socket and takes its whole text frames. Returns TRUE when
 * that was all there was (the socket would block, or gave less than
 * asked), FALSE when libsoup is to read now: what the stream did not take
 * is then held for it. */
static gboolean
legba_ws_input_take_texts (LegbaWsInput * self)
{
  g_autoptr (LegbaWsStream) stream = NULL;
  guint8 chunk[16384];

  if (!legba_ws_input_may_take (self))
    return FALSE;
  stream = g_object_ref (self->stream);
  self->short_read = FALSE;
  for (;;) {
    gssize n = recv (stream->fd, chunk, sizeof chunk, MSG_DONTWAIT);
    guint8 *data = chunk;
    gsize len, taken;
    gboolean other;

    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return TRUE;
    if (n <= 0) {
      /* The end of the stream, or its error: libsoup's to read, after
       * the start of a frame the stream holds. */
      if (n < 0)
        self->pending_errno = errno;
      self->held = g_steal_pointer (&self->own);
      return FALSE;
    }

    self->budget -= MIN (self->budget, (gsize) n);
    len = n;
    if (self->own != NULL) {
      g_byte_array_append (self->own, chunk, n);
      data = self->own->data;
      len = self->own->len;
    }
    taken = legba_ws_input_take_frames (self, data, len, &other);
    if (self->flooded) {
      /* Nothing more of the peer's is read: libsoup's read fails. */
      g_clear_pointer (&self->own, g_byte_array_unref);
      return FALSE;
    }
    if (self->own == NULL && taken < len)
      self->own = g_byte_array_new_take (g_memdup2 (data + taken,
              len - taken), len - taken);
    else if (self->own != NULL)
      g_byte_array_remove_range (self->own, 0, taken);
    if (self->own != NULL && self->own->len == 0)
      g_clear_pointer (&self->own, g_byte_array_unref);

    if (other) {
      self->held = g_steal_pointer (&self->own);
      return FALSE;
    }
    if ((gsize) n < sizeof chunk || self->budget == 0)
      return TRUE;
  }
}

/* Waiting on the socket.
 *
 * libsoup makes a new reading source for every batch of frames it reads
 * and destroys it in its callback, and GLib signals the context's wakeup
 * (a write to an eventfd) for every descriptor of every source in a
 * source's tree each time it is attached, blocked around its dispatch or
 * destroyed: through the layers of the stream libsoup hands over (its
 * buffering, GIO's socket stream) eight writes per batch read. An input
 * reading its socket directly instead keeps its socket's poll record in
 * the context's *watch* for as long as it reads, and the sources libsoup
 * makes hold no descriptor: each is ready when the input's record is, or
 * at once while bytes read before are held. Making and destroying them
 * then changes nothing GLib polls.
 *
 * The watch is one source per context that only holds the poll records
 * of the inputs waiting in it (a source of its own per socket was some
 * 0.2 KiB of the server's memory per socket at 5,000 sockets). Its records are plain poll records, not unix fds: GLib
 * makes a source whose unix fd polls ready ready itself, whatever its
 * check says. Their events are the inputs' to change; the context reads
 * them at every query. */
typedef struct
{
  GSource source;
  guint users;                  /* inputs with a record in it */
} LegbaWsWatch;

typedef struct
{
  GSource source;
  LegbaWsInput *input;          /* owned */
} LegbaWsReader;

static gboolean
legba_ws_watch_dispatch (GSource * source, GSourceFunc callback,
    gpointer user_data)
{
  return G_SOURCE_CONTINUE;
}

/* Never ready: no check, and no unix fd. */
static GSourceFuncs legba_ws_watch_funcs = {
  NULL,
  NULL,
  legba_ws_watch_dispatch,
  NULL,
  NULL,
  NULL,
};

static GMutex legba_ws_watches_lock;
static GHashTable *legba_ws_watches;    /* GMainContext -> LegbaWsWatch */

static GSource *
legba_ws_watch_use (GMainContext * context)
{
  LegbaWsWatch *watch;

  g_mutex_lock (&legba_ws_watches_lock);
  if (legba_ws_watches == NULL)
    legba_ws_watches = g_hash_table_new (NULL, NULL);
  watch = g_hash_table_lookup (legba_ws_watches, context);
  if (watch == NULL) {
    watch = (LegbaWsWatch *) g_source_new (&legba_ws_watch_funcs,
        sizeof (LegbaWsWatch));
    g_source_set_static_name (&watch->source, "LegbaWsWatch");
    g_source_attach (&watch->source, context);
    g_hash_table_insert (legba_ws_watches, context, watch);
  }
  watch->users++;
  g_mutex_unlock (&legba_ws_watches_lock);
  return &watch->source;
}

static void
legba_ws_watch_leave (GSource * source)
{
  LegbaWsWatch *watch = (LegbaWsWatch *) source;

  g_mutex_lock (&legba_ws_watches_lock);
  if (--watch->users == 0) {
    g_hash_table_remove (legba_ws_watches, g_source_get_context (source));
    g_source_destroy (source);
    g_source_unref (source);
  }
  g_mutex_unlock (&legba_ws_watches_lock);
}

static gboolean
legba_ws_reader_prepare (GSource * source, gint * timeout)
{
  return ((LegbaWsReader *) source)->input->held != NULL;
}

/* The reader is checked after GLib has polled every descriptor of the
 * context, the input's too, in the same iteration. */
static gboolean
legba_ws_reader_check (GSource * source)
{
  LegbaWsInput *input = ((LegbaWsReader *) source)->input;

  return input->held != NULL || (input->watch != NULL &&
      input->pollfd.events != 0 && input->pollfd.revents != 0);
}

static gboolean
legba_ws_reader_dispatch (GSource * source, GSourceFunc callback,
    gpointer user_data)
{
  LegbaWsReader *reader = (LegbaWsReader *) source;

  if (callback == NULL)
    return G_SOURCE_REMOVE;
  reader->input->budget = LEGBA_WS_READ_BUDGET;
  /* All the socket had was whole text frames, taken (or all this dispatch
   * may read): libsoup has nothing to read, and its source stays as it
   * is. */
  if (legba_ws_input_take_texts (reader->input))
    return G_SOURCE_CONTINUE;
  return ((GPollableSourceFunc) (void (*)(void)) callback) (G_OBJECT
      (reader->input), user_data);
}

/* A reader is finalized once libsoup destroys it, after the dispatch it
 * was destroyed in, by which time libsoup has made the next one if it
 * reads on. With no newer reader (libsoup stopped reading, or closes),
 * the socket is not polled until one comes, so that a level-triggered
 * poll does not spin on input nobody takes. */
static void
legba_ws_reader_finalize (GSource * source)
{
  LegbaWsReader *reader = (LegbaWsReader *) source;

  if (reader->input->reader == source) {
    reader->input->reader = NULL;
    reader->input->pollfd.events = 0;
  }
  g_clear_object (&reader->input);
}

static GSourceFuncs legba_ws_reader_funcs = {
  legba_ws_reader_prepare,
  legba_ws_reader_check,
  legba_ws_reader_dispatch,
  legba_ws_reader_finalize,
  NULL,
  NULL,
};

static void
legba_ws_input_stop_watch (LegbaWsInput * self)
{
  if (self->watch == NULL)
    return;
  g_source_remove_poll (self->watch, &self->pollfd);
  legba_ws_watch_leave (g_steal_pointer (&self->watch));
}

/* The input waits in the context the reader will be attached to: the
 * thread-default one, as libsoup attaches its sources. */
static void
legba_ws_input_start_watch (LegbaWsInput * self)
{
  GMainContext *context = g_main_context_get_thread_default ();

  if (context == NULL)
    context = g_main_context_default ();
  if (self->watch != NULL && g_source_get_context (self->watch) != context)
    legba_ws_input_stop_watch (self);
  self->pollfd.events = G_IO_IN;
  if (self->watch == NULL) {
    self->watch = legba_ws_watch_use (context);
    self->pollfd.fd = legba_ws_stream_fd (self->stream);
    self->pollfd.revents = 0;
    g_source_add_poll (self->watch, &self->pollfd);
  }
}

/* Closing: the socket is no longer waited on for libsoup. */
static void
legba_ws_input_close_watch (LegbaWsInput * self)
{
  self->closed = TRUE;
  legba_ws_input_stop_watch (self);
}

static GSource *
legba_ws_reader_new (LegbaWsInput * self, GCancellable * cancellable)
{
  GSource *source = g_source_new (&legba_ws_reader_funcs,
      sizeof (LegbaWsReader));

  g_source_set_static_name (source, "LegbaWsReader");
  ((LegbaWsReader *) source)->input = g_object_ref (self);
  if (cancellable != NULL) {
    g_autoptr (GSource) cancelled = g_cancellable_source_new (cancellable);

    g_source_set_dummy_callback (cancelled);
    g_source_add_child_source (source, cancelled);
  }
  legba_ws_input_start_watch (self);
  self->reader = source;
  return source;
}

static GSource *
legba_ws_input_create_source (GPollableInputStream * stream,
    GCancellable * cancellable)
{
  LegbaWsInput *self = LEGBA_WS_INPUT (stream);
  g_autoptr (GSource) base_source = NULL;

  if (self->base == NULL && !self->closed)
    return legba_ws_reader_new (self, cancellable);
  if (self->base == NULL)
    base_source = g_unix_fd_source_new (legba_ws_stream_fd (self->stream),
        G_IO_IN);
  else
    base_source = g_pollable_input_stream_create_source
        (G_POLLABLE_INPUT_STREAM (self->base), cancellable);
  return g_pollable_source_new_full (self, base_source, cancellable);
}

static gssize
legba_ws_input_read_nonblocking (GPollableInputStream * stream, void *buffer,
    gsize count, GError ** error)
{
  LegbaWsInput *self = LEGBA_WS_INPUT (stream);
  gboolean from_socket = self->base == NULL && self->held == NULL;
  gssize n;

  if (legba_ws_input_failed (self))
    return legba_ws_input_fail (self, error);
  /* libsoup reads until a read would block. A socket that gave less than
   * was asked had nothing more at that moment; what comes later makes the
   * socket readable again, so the read that would only say so is
   * spared. A socket that gave this dispatch's budget waits for the next
   * one: the socket is still readable. */
  if (from_socket && (self->short_read || self->budget == 0)) {
    self->short_read = FALSE;
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK,
        "no more input for now");
    return -1;
  }
  n = legba_ws_input_receive (self, buffer, count, FALSE, NULL, error);
  self->short_read = from_socket && n > 0 && (gsize) n < count;
  if (from_socket && n > 0)
    self->budget -= MIN (self->budget, (gsize) n);
  return legba_ws_input_filter (self, buffer, n, error);
}

static void
legba_ws_input_pollable_init (GPollableInputStreamInterface * iface)
{
  iface->can_poll = legba_ws_input_can_poll;
  iface->is_readable = legba_ws_input_is_readable;
  iface->create_source = legba_ws_input_create_source;
  iface->read_nonblocking = legba_ws_input_read_nonblocking;
}

static void
legba_ws_input_finalize (GObject * object)
{
  LegbaWsInput *self = LEGBA_WS_INPUT (object);

  legba_ws_input_stop_watch (self);
  g_clear_pointer (&self->held, g_byte_array_unref);
  g_clear_pointer (&self->own, g_byte_array_unref);
  g_clear_object (&self->base);
  G_OBJECT_CLASS (legba_ws_input_parent_class)->finalize (object);
}

static void
legba_ws_input_class_init (LegbaWsInputClass * klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GInputStreamClass *stream_class = G_INPUT_STREAM_CLASS (klass);

  object_class->finalize = legba_ws_input_finalize;
  stream_class->read_fn = legba_ws_input_read;
  stream_class->close_fn = legba_ws_input_close;
}

static void
legba_ws_input_init (LegbaWsInput * self)
{
  self->header_need = 2;
  self->budget = LEGBA_WS_READ_BUDGET;
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

/* Writes frame (its payload not owned) now when nothing of the stream's
 * or libsoup's is in the way and the socket takes it all; else queues it,
 * with a reference to its payload: last, or when urgent (a control
 * frame) ahead of the frames not started, and waits for the socket on
 * context (NULL: the thread-default one). Returns the queued frame, NULL
 * when it was written or the socket failed (the stream is then
 * aborted). */
static LegbaWsFrame *
legba_ws_stream_push_frame (LegbaWsStream * stream, const LegbaWsFrame * frame,
    gboolean urgent, GMainContext * context)
{
  LegbaWsOutput *output = stream->output;
  gsize size = frame->header_len + g_bytes_get_size (frame->payload);
  LegbaWsFrame *queued;
  LegbaWsFrame *head;
  gssize n = 0;

  if (g_queue_is_empty (&output->frames) &&
      legba_ws_output_at_boundary (output)) {
    n = legba_ws_frame_write (stream->fd, (LegbaWsFrame *) frame);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      /* The peer is gone: what libsoup reads next tells it so. */
      g_debug ("Error sending data: %s", g_strerror (errno));
      legba_ws_stream_abort (stream);
      return NULL;
    }
    n = MAX (n, 0);
    output->written += n;
    if ((gsize) n == size)
      return NULL;
  }

  queued = g_memdup2 (frame, sizeof *frame);
  g_bytes_ref (queued->payload);
  queued->sent = n;
  head = g_queue_peek_head (&output->frames);
  if (!urgent || head == NULL)
    g_queue_push_tail (&output->frames, queued);
  else if (head->sent > 0)
    g_queue_push_nth (&output->frames, queued, 1);
  else
    g_queue_push_head (&output->frames, queued);
  output->frames_left += size - n;
  if (output->flush == NULL) {
    output->flush = g_unix_fd_source_new (stream->fd, G_IO_OUT);
    g_source_set_callback (output->flush,
        (GSourceFunc) G_CALLBACK (legba_ws_output_on_writable), output, NULL);
    g_source_set_static_name (output->flush, "legba-ws-flush");
    g_source_attach (output->flush, context != NULL ? context :
        g_main_context_get_thread_default ());
  }
  return queued;
}

/* RFC 6455 §5.5.3: a pong carries its ping's payload, and an endpoint
 * that has not yet answered earlier pings may answer the newest one only:
 * a pong not started yet takes the newest ping's payload. */
static void
legba_ws_stream_answer_ping (LegbaWsStream * stream, const guint8 * payload,
    gsize len)
{
  LegbaWsOutput *output = stream->output;
  g_autoptr (GBytes) bytes = NULL;
  LegbaWsFrame frame;

  if (stream->fd < 0 || stream->aborted || output->close_written)
    return;
  bytes = g_bytes_new (payload, len);
  if (output->pong != NULL) {
    output->frames_left -= g_bytes_get_size (output->pong->payload);
    output->frames_left += len;
    g_bytes_unref (output->pong->payload);
    output->pong->payload = g_steal_pointer (&bytes);
    output->pong->header[1] = len;
    return;
  }
  frame.payload = bytes;
  frame.header[0] = 0x8a;
  frame.header[1] = len;
  frame.header_len = 2;
  frame.sent = 0;
  output->pong = legba_ws_stream_push_frame (stream, &frame, TRUE, NULL);
  if (output->pong != NULL && output->pong->sent > 0)
    output->pong = NULL;
}

gboolean
legba_ws_stream_send_text (LegbaWsStream * stream, GBytes * payload,
    GMainContext * context)
{
  LegbaWsOutput *output;
  LegbaWsFrame frame;

  g_return_val_if_fail (LEGBA_IS_WS_STREAM (stream), FALSE);
  g_return_val_if_fail (payload != NULL, FALSE);

  output = stream->output;
  if (stream->base != NULL)
    return FALSE;
  if (stream->fd < 0 || stream->aborted || output->close_written)
    return TRUE;

  frame.payload = payload;
  frame.header_len = legba_ws_text_header (frame.header,
      g_bytes_get_size (payload));
  frame.sent = 0;
  legba_ws_stream_push_frame (stream, &frame, FALSE, context);
  return TRUE;
}

gboolean
legba_ws_stream_inject_close (LegbaWsStream * stream, guint16 code,
    const char *reason)
{
  LegbaWsOutput *output;
  guint8 frame[2 + 125];
  gsize reason_len, len;
  gssize n;

  g_return_val_if_fail (LEGBA_IS_WS_STREAM (stream), FALSE);

  output = stream->output;
  if (stream->aborted || output->close_written ||
      !legba_ws_output_at_boundary (output) ||
      !g_pollable_output_stream_can_poll (G_POLLABLE_OUTPUT_STREAM (output)))
    return FALSE;

  /* The stream's own frames go first, those the socket takes now; the
   * others give way to the close. */
  if (!g_queue_is_empty (&output->frames) &&
      !legba_ws_output_flush_frames (output, NULL))
    legba_ws_output_drop_unstarted (output);

  /* RFC 6455 §5.5.1: a control frame's payload is at most 125 bytes. */
  reason_len = reason ? MIN (strlen (reason), 123) : 0;
  len = 2 + reason_len;
  frame[0] = 0x88;
  frame[1] = len;
  frame[2] = code >> 8;
  frame[3] = code & 0xff;
  if (reason_len > 0)
    memcpy (frame + 4, reason, reason_len);

  n = legba_ws_output_send (output, frame, 2 + len, FALSE, NULL, NULL);
  return n == (gssize) (2 + len);
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
