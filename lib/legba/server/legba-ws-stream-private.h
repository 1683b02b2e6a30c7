/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaWsStream internals shared by legba-ws-stream.c (the stream, its
 * socket's descriptor, closing), legba-ws-stream-output.c (the counting
 * output and the stream's own frames), legba-ws-stream-input.c (the
 * bounding input and its waiting on the socket) and
 * legba-ws-stream-texts.c (text frames and pings taken before libsoup).
 * Nothing else includes this header.
 */
#pragma once

#include <legba/server/legba-ws-stream.h>

G_BEGIN_DECLS

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

/* ---- legba-ws-stream.c ---- */

/* Over a plain socket, the stream's own recv(), send() and poll(): each
 * fails with error set as GIO's socket would. */
G_GNUC_INTERNAL gboolean legba_ws_fd_closed (int fd, GError ** error);
G_GNUC_INTERNAL void legba_ws_fd_error (int errsv, const char *what,
    GError ** error);
G_GNUC_INTERNAL GIOCondition legba_ws_fd_check (int fd, GIOCondition condition);
G_GNUC_INTERNAL gboolean legba_ws_fd_wait (int fd, GIOCondition condition,
    GCancellable * cancellable, GError ** error);
G_GNUC_INTERNAL gssize legba_ws_fd_recv (int fd, void *buffer, gsize count,
    gboolean blocking, GCancellable * cancellable, GError ** error);
G_GNUC_INTERNAL gssize legba_ws_fd_send (int fd, const void *buffer,
    gsize count, gboolean blocking, GCancellable * cancellable,
    GError ** error);
G_GNUC_INTERNAL int legba_ws_stream_fd (LegbaWsStream * stream);

/* Reading a frame header (h: its bytes so far, at least two). */
G_GNUC_INTERNAL guint legba_ws_header_need (const guint8 * h);
G_GNUC_INTERNAL guint64 legba_ws_header_payload_len (const guint8 * h);

/* ---- legba-ws-stream-output.c ---- */

G_GNUC_INTERNAL gsize legba_ws_output_get_queued (LegbaWsOutput * self);
G_GNUC_INTERNAL void legba_ws_output_drop_frames (LegbaWsOutput * self);
G_GNUC_INTERNAL void legba_ws_stream_answer_ping (LegbaWsStream * stream,
    const guint8 * payload, gsize len);

/* ---- legba-ws-stream-input.c ---- */

G_GNUC_INTERNAL gboolean legba_ws_input_count_control (LegbaWsInput * self);
G_GNUC_INTERNAL gboolean legba_ws_input_failed (LegbaWsInput * self);
G_GNUC_INTERNAL void legba_ws_input_close_watch (LegbaWsInput * self);

/* ---- legba-ws-stream-texts.c ---- */

G_GNUC_INTERNAL gboolean legba_ws_input_take_texts (LegbaWsInput * self);

G_END_DECLS
