/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaWsStream's input: the input stream that bounds incoming messages
 * and control frames, hands libsoup what the stream read before, and
 * waits on a plain socket through one watch per context.
 */
#include <legba/server/legba-ws-stream-private.h>

#include <glib-unix.h>

#include <string.h>

/* ---- LegbaWsInput: the input stream that bounds incoming messages ---- */

/* Bytes one dispatch of a socket's reading takes off a plain socket: a
 * peer that sends as fast as it is read must not hold the thread, which
 * serves every other socket too. What is left waits for the next
 * iteration; the socket is still readable. */
#define LEGBA_WS_READ_BUDGET (16 * 1024)

static void legba_ws_input_pollable_init (GPollableInputStreamInterface *
    iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (LegbaWsInput, legba_ws_input,
    G_TYPE_INPUT_STREAM,
    G_IMPLEMENT_INTERFACE (G_TYPE_POLLABLE_INPUT_STREAM,
        legba_ws_input_pollable_init));

/* One more control frame from the peer: FALSE, and the input flooded,
 * when that makes more than max_control in the window. */
gboolean
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

gboolean
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
void
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
