/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The room's data channels' messages, taken where they leave SCTP.
 *
 * webrtcbin 1.22 takes each message from its SCTP stream on that stream's
 * thread (sctpdec's source pad) and hands it to its own thread, which
 * emits on-message-string or on-message-data; a room that reports it on
 * its main context would hand it over a second time. The tap is a probe on
 * each of sctpdec's source pads that takes the messages of the room's
 * channels there instead, so a message is handed over once: to the room's
 * context, or to nobody for the sync- signals.
 *
 * A stream is the room's when the other side opens it with one of §6's
 * labels (its DCEP open comes first on the stream), or when the room made
 * its channel (the room watches it before the other side can send on it).
 * Any other stream, and each message of a stream not known to be the
 * room's at its first message, is left to webrtcbin for good: the room
 * then gets it through the channel's signals, so a stream's messages are
 * all taken one way, in order. The DCEP messages are webrtcbin's alone.
 */
#include <legba/room/legba-room-data-private.h>
#include <gst/sctp/sctpreceivemeta.h>
#include <stdio.h>
#include <string.h>

/* RFC 8831 §8 */
enum
{
  PPID_DCEP = 50,
  PPID_STRING = 51,
  PPID_BINARY_PARTIAL = 52,
  PPID_BINARY = 53,
  PPID_STRING_PARTIAL = 54,
  PPID_STRING_EMPTY = 56,
  PPID_BINARY_EMPTY = 57,
};

/* RFC 8832 §5.1: DATA_CHANNEL_OPEN, its label's length at 8, the label
 * at 12 */
#define DCEP_OPEN 0x03
#define DCEP_OPEN_HEADER 12

typedef enum
{
  STREAM_UNKNOWN,
  STREAM_TAKEN,                 /* the room's, taken here */
  STREAM_LEFT,                  /* left to webrtcbin */
} StreamState;

/* One source pad of sctpdec: one SCTP stream, whose messages come on the
 * pad's thread, one at a time. */
typedef struct
{
  /* unowned: sctpdec is in the peer's bin, which the peer holds until it
   * is freed, and a closed peer's streams have stopped */
  LegbaPeer *peer;
  guint16 stream;
  StreamState state;
  LegbaReliability reliability;
  JsonParser *parser;           /* the sync- signals', made on first need */
} Tap;

static void
tap_free (gpointer data)
{
  Tap *t = data;

  g_clear_object (&t->parser);
  g_free (t);
}

/* A DCEP open names the stream's channel: the room's when its label is
 * one of §6's. */
static void
read_open (Tap * t, GstBuffer * buffer)
{
  GstMapInfo map;
  gsize length;

  if (!gst_buffer_map (buffer, &map, GST_MAP_READ))
    return;
  if (map.size >= DCEP_OPEN_HEADER && map.data[0] == DCEP_OPEN) {
    const char *label = (const char *) map.data + DCEP_OPEN_HEADER;

    length = GST_READ_UINT16_BE (map.data + 8);
    if (DCEP_OPEN_HEADER + length > map.size)
      length = 0;
    t->state = STREAM_TAKEN;
    if (length == strlen (LEGBA_ROOM_CHANNEL_RELIABLE) &&
        memcmp (label, LEGBA_ROOM_CHANNEL_RELIABLE, length) == 0)
      t->reliability = LEGBA_RELIABILITY_RELIABLE;
    else if (length == strlen (LEGBA_ROOM_CHANNEL_LOSSY) &&
        memcmp (label, LEGBA_ROOM_CHANNEL_LOSSY, length) == 0)
      t->reliability = LEGBA_RELIABILITY_LOSSY;
    else
      t->state = STREAM_LEFT;
    GST_DEBUG ("pc %s: stream %u opened by the other side, %s",
        t->peer->pc, t->stream, t->state == STREAM_TAKEN ?
        "the room's" : "not the room's");
  }
  gst_buffer_unmap (buffer, &map);
}

/* A binary message's bytes: the buffer's, mapped while they live. */
typedef struct
{
  GstBuffer *buffer;
  GstMapInfo map;
} Mapped;

static void
mapped_free (gpointer data)
{
  Mapped *m = data;

  gst_buffer_unmap (m->buffer, &m->map);
  gst_buffer_unref (m->buffer);
  g_free (m);
}

/* Hands a message of the stream to the room. FALSE when the peer is
 * closing: then webrtcbin has it, as it has every message once the room
 * stopped watching. */
static gboolean
take (Tap * t, GstBuffer * buffer, guint32 ppid)
{
  g_autoptr (GBytes) bytes = NULL;
  GstMapInfo map;
  Mapped *m;

  if (!legba_peer_data_open (t->peer))
    return FALSE;
  if (ppid == PPID_STRING_EMPTY) {
    legba_peer_data_take (t->peer, t->reliability, &t->parser, "", 0, NULL);
  } else if (ppid == PPID_STRING || ppid == PPID_STRING_PARTIAL) {
    /* the room copies what it keeps of a text */
    if (!gst_buffer_map (buffer, &map, GST_MAP_READ))
      return FALSE;
    legba_peer_data_take (t->peer, t->reliability, &t->parser,
        (const char *) map.data, map.size, NULL);
    gst_buffer_unmap (buffer, &map);
  } else {
    if (ppid == PPID_BINARY_EMPTY) {
      bytes = g_bytes_new (NULL, 0);
    } else {
      m = g_new (Mapped, 1);
      if (!gst_buffer_map (buffer, &m->map, GST_MAP_READ)) {
        g_free (m);
        return FALSE;
      }
      m->buffer = gst_buffer_ref (buffer);
      bytes = g_bytes_new_with_free_func (m->map.data, m->map.size,
          mapped_free, m);
    }
    legba_peer_data_take (t->peer, t->reliability, &t->parser, NULL, 0, bytes);
  }
  return TRUE;
}

/* On the stream's thread. */
static GstPadProbeReturn
on_stream_buffer (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  Tap *t = data;
  GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER (info);
  GstSctpReceiveMeta *meta = gst_sctp_buffer_get_receive_meta (buffer);

  if (meta == NULL)
    return GST_PAD_PROBE_OK;
  switch (meta->ppid) {
    case PPID_DCEP:
      read_open (t, buffer);
      return GST_PAD_PROBE_OK;
    case PPID_STRING:
    case PPID_BINARY_PARTIAL:
    case PPID_BINARY:
    case PPID_STRING_PARTIAL:
    case PPID_STRING_EMPTY:
    case PPID_BINARY_EMPTY:
      break;
    default:
      /* webrtcbin reports what it does not know */
      return GST_PAD_PROBE_OK;
  }
  if (t->state == STREAM_UNKNOWN) {
    t->state = legba_peer_data_stream_reliability (t->peer, t->stream,
        &t->reliability) ? STREAM_TAKEN : STREAM_LEFT;
    GST_DEBUG ("pc %s: stream %u %s", t->peer->pc, t->stream,
        t->state == STREAM_TAKEN ? "is a channel the room made" :
        "is not the room's, or not yet known: left to webrtcbin");
  }
  if (t->state != STREAM_TAKEN || !take (t, buffer, meta->ppid))
    return GST_PAD_PROBE_OK;
  return GST_PAD_PROBE_DROP;
}

/* On the thread sctpdec adds a stream's pad on, before the pad's first
 * buffer. */
static void
on_pad_added (GstElement * sctpdec, GstPad * pad, LegbaPeer * peer)
{
  guint stream;
  Tap *t;

  if (GST_PAD_DIRECTION (pad) != GST_PAD_SRC ||
      sscanf (GST_PAD_NAME (pad), "src_%u", &stream) != 1 || stream > 65535)
    return;
  t = g_new0 (Tap, 1);
  t->peer = peer;
  t->stream = stream;
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, on_stream_buffer, t,
      tap_free);
}

/* From the peer's deep-element-added, as webrtcbin adds its sctpdec. */
void
legba_peer_tap_decoder (LegbaPeer * peer, GstElement * sctpdec)
{
  g_signal_connect (sctpdec, "pad-added", G_CALLBACK (on_pad_added), peer);
}
