/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaWsStream's input, continued: the whole text frames and pings the
 * stream takes off a plain socket before libsoup reads it.
 */
#include <legba/server/legba-ws-stream-private.h>

#include <errno.h>
#include <sys/socket.h>

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
gboolean
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
