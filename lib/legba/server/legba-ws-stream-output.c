/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaWsStream's output: the output stream that reads the frames
 * libsoup writes as they pass and so counts what is still queued, and
 * the frames the stream writes itself ahead of libsoup's (text frames,
 * pongs, a close).
 */
#include <legba/server/legba-ws-stream-private.h>

#include <glib-unix.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* ---- LegbaWsOutput: the counting output stream ---- */

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

gsize
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
void
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
void
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
