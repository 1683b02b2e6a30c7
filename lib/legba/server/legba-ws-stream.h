/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaWsStream: the GIOStream a server-side SoupWebsocketConnection runs
 * over. libsoup keeps outgoing frames in a queue it does not expose, so a
 * socket whose peer stops reading would grow it without bound. This stream
 * sits between libsoup and the connection's stream, watches the frames
 * libsoup writes (RFC 6455 §5.2) and so knows how many bytes of the
 * messages handed to libsoup are still waiting. It also bounds incoming
 * messages, which libsoup does per frame only, and tears a socket down
 * within a bounded time when asked to.
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* How a read fails when the peer breaks a bound of the stream's (besides
 * G_IO_ERROR_MESSAGE_TOO_LARGE for legba_ws_stream_set_max_message()). */
#define LEGBA_WS_STREAM_ERROR (legba_ws_stream_error_quark ())
GQuark legba_ws_stream_error_quark (void);

typedef enum
{
  /* over the rate of legba_ws_stream_set_max_control_rate() */
  LEGBA_WS_STREAM_ERROR_CONTROL_FLOOD,
} LegbaWsStreamError;

#define LEGBA_TYPE_WS_STREAM (legba_ws_stream_get_type ())
G_DECLARE_FINAL_TYPE (LegbaWsStream, legba_ws_stream, LEGBA, WS_STREAM,
    GIOStream)

/* base: the stream stolen from the HTTP connection; socket: its TCP
 * socket (NULL when there is none, e.g. in tests over pipes). plain: the
 * socket carries the WebSocket's bytes as they are (no TLS), so the
 * stream takes what base holds of them, then reads and writes the socket
 * itself and keeps no reference to base. */
LegbaWsStream *legba_ws_stream_new (GIOStream * base, GSocket * socket,
    gboolean plain);

/* The size of an unmasked frame carrying payload_len bytes, header
 * included (RFC 6455 §5.2). */
gsize legba_ws_frame_size (gsize payload_len);

/* One data message of frame_size bytes is being handed to libsoup; it
 * counts as queued until its last byte is written to the socket. */
void legba_ws_stream_account (LegbaWsStream * stream, gsize frame_size);

/* Bytes of accounted messages, of the frames the stream sends itself
 * (texts, pongs) and of the pongs libsoup owes the peer, not yet
 * written. */
gsize legba_ws_stream_get_queued (LegbaWsStream * stream);

/* Bytes written to the socket (every frame, control frames included). */
guint64 legba_ws_stream_get_written (LegbaWsStream * stream);

/* Sends payload as one text frame, written to the socket by the stream
 * itself rather than through libsoup's queue: over a plain socket with no
 * extension (permessage-deflate) on the connection, while libsoup's
 * state is OPEN. What the socket does not take now is queued (counted by
 * legba_ws_stream_get_queued()) and written when it can take it, before
 * anything libsoup writes after this call, by a source on context (NULL:
 * the thread-default context). FALSE when the stream does not write to
 * the socket itself (TLS): nothing is done. A socket that failed is
 * aborted; the frame is dropped with it. */
gboolean legba_ws_stream_send_text (LegbaWsStream * stream, GBytes * payload,
    GMainContext * context);

/* Writes a close frame straight to the socket when that is possible
 * without corrupting the stream (between two frames, no close frame sent
 * yet, and the socket accepts it now). For closes libsoup makes without a
 * close frame of its own (a frame over max-incoming-payload-size). */
gboolean legba_ws_stream_inject_close (LegbaWsStream * stream, guint16 code,
    const char *reason);

/* Bounds the payload of one incoming message, all its fragments together
 * (0: no bound). A frame that would exceed it makes the read fail with
 * G_IO_ERROR_MESSAGE_TOO_LARGE, before its payload is read. */
void legba_ws_stream_set_max_message (LegbaWsStream * stream,
    guint64 max_bytes);

/* Bounds the control frames (ping, pong, close) the peer sends: at most
 * max_per_second in any one-second window (0: no bound). The read that
 * brings the one over it fails with LEGBA_WS_STREAM_ERROR_CONTROL_FLOOD,
 * before that frame reaches libsoup, and so does every read after it. */
void legba_ws_stream_set_max_control_rate (LegbaWsStream * stream,
    guint max_per_second);

/* When the stream is closed, first shut down the sending side and read
 * and drop what the peer still sends, for up to timeout_ms or until it
 * closes: the peer then reads the close frame instead of a reset. */
void legba_ws_stream_set_linger (LegbaWsStream * stream, guint timeout_ms);

/* Tears the socket down now: queued data is dropped (SO_LINGER 0) and both
 * directions are shut down, so libsoup sees the end of the stream on its
 * next poll and closes, even when the peer never reads again. */
void legba_ws_stream_abort (LegbaWsStream * stream);

gboolean legba_ws_stream_is_aborted (LegbaWsStream * stream);

/* The descriptor the stream waits on, -1 once it is closed (or with no
 * socket): over a plain socket a duplicate of the socket's own. */
int legba_ws_stream_get_fd (LegbaWsStream * stream);

/* What the stream serves, for whoever has the stream alone (the handlers
 * of the SoupWebsocketConnection over it); not owned. */
void legba_ws_stream_set_owner (LegbaWsStream * stream, gpointer owner);
gpointer legba_ws_stream_get_owner (LegbaWsStream * stream);

/* Called with the payload of a whole text frame (RFC 6455 §5.6: final,
 * masked, valid UTF-8, within the bound of legba_ws_stream_set_max_message)
 * that the stream read from the socket itself; text, len bytes, is not
 * NUL-terminated and is valid during the call only. Returns FALSE when the
 * owner takes no more messages this way: libsoup then reads the rest. */
typedef gboolean (*LegbaWsTextFunc) (gpointer owner, const char *text,
    gsize len);

/* Over a plain socket, with a bound set and an owner, the stream takes
 * whole text frames itself and calls func with each, in order with the
 * messages libsoup reads (fragmented messages, control frames other than
 * pings, and anything invalid, which libsoup answers as before). It also
 * takes pings and answers them itself (RFC 6455 §5.5.3): a pong the
 * socket has not taken yet answers the newest ping instead of a pong
 * more being queued for each. Only for a connection without extensions:
 * their frames are not plain text. NULL: no more (a socket closing). */
void legba_ws_stream_set_text_func (LegbaWsStream * stream,
    LegbaWsTextFunc func);

G_END_DECLS
