/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What the files of LegbaRoom's data part share: legba-room-data.c
 * (sending, the room's hooks), legba-room-data-receive.c (receiving, the
 * peer connection's hooks) and legba-room-data-signals.c (the signals).
 * Nothing else includes this header; the rest of the room calls the part
 * through legba-room-data-private.h.
 */
#pragma once

#include <legba/room/legba-room-data-private.h>

G_BEGIN_DECLS

/* Backpressure: a channel takes more while webrtcbin holds at most this
 * many unsent bytes of it, and asks for more once it is down to LOW. Two
 * to four maximal messages: enough to keep SCTP busy, little latency. */
#define CHANNEL_HIGH_WATER (256 * 1024)
#define CHANNEL_LOW_WATER (64 * 1024)

/* §6 */
#define RESERVED_PREFIX "legba."
#define MUTE_TOPIC "legba.mute"
/* §8: a mesh room moving to its SFU */
#define SFU_PROBE_TOPIC "legba.sfu-probe"

/* the signals, made by legba-room-data-signals.c */
enum
{
  SIGNAL_DATA_RECEIVED,
  SIGNAL_BYTES_RECEIVED,
  SIGNAL_SYNC_DATA_RECEIVED,
  SIGNAL_SYNC_BYTES_RECEIVED,
  SIGNAL_READY_TO_SEND,
  SIGNAL_MUTE_CHANGED,
  N_SIGNALS
};

/* A recipient's messages waiting for one of its channels */
typedef struct
{
  GQueue queue;                 /* Message, in order */
  gsize bytes;
  gboolean owed;                /* a message was refused: ready-to-send due */
} Outbox;

/* What the room knows of one participant's data, by participant id, from
 * its joining to its leaving (lock: LegbaRoomData.lock). */
typedef struct
{
  char *id;
  Outbox out[2];                /* by LegbaReliability */
  /* the channels of its connected peer connection that are open, owned;
   * cleared when that connection closes */
  GstWebRTCDataChannel *ready[2];
  gboolean lossy_wanted;        /* a lossy message asked for the channel,
                                 * which is on its way */
  gboolean kicked;              /* the context has its outboxes to drain */
  guint64 max_message_size;     /* 0 until its channels open */
  guint64 sent;
  guint64 received;
  guint64 lossy_dropped;
  guint64 not_delivered;
  gboolean mute_known;
  gboolean audio_muted;
  gboolean video_muted;
} Recipient;

struct _LegbaRoomData
{
  LegbaRoom *room;
  GMutex lock;                  /* recipients, sent, lossy_dropped,
                                 * not_delivered */
  GHashTable *recipients;       /* id -> Recipient: the room's participants */
  char *sfu_id;                 /* in an SFU room, the recipient that is
                                 * the SFU (the local publisher's
                                 * connection): everything goes there */
  gboolean sfu_asked;           /* a message went to sfu_id: the room was
                                 * asked to publish */
  GSource *kick;                /* on the room's context: drains the
                                 * outboxes a send kicked */
  LegbaParticipant *server;     /* §7: the sender of backend events */
  JsonParser *parser;
  GMutex generator_lock;
  JsonGenerator *generator;     /* writes the envelopes' data */
  gulong event_handler;
  gulong left_handler;
  gboolean audio_muted;
  gboolean video_muted;
  guint64 sent;
  guint64 lossy_dropped;
  guint64 not_delivered;
  guint64 received;             /* on the room's context alone, as
                                 * malformed */
  guint64 malformed;
  gint sync_enabled;            /* (atomic) */
};

G_GNUC_INTERNAL extern guint data_signals[N_SIGNALS];

/* legba-room-data.c: on the room's context, once a channel of the peer's
 * (@data: its LegbaReliability) is down to CHANNEL_LOW_WATER: what waits
 * for it goes. */
G_GNUC_INTERNAL void data_channel_low (LegbaPeer * peer, gpointer data);

/* legba-room-data-receive.c */
/* Messages the sync- signals alone reported on the peer's streaming
 * threads, not yet in the room's counts. */
G_GNUC_INTERNAL guint64 data_peer_received (LegbaPeer * peer);
/* §7: the signaller's event-received: data from `server` */
G_GNUC_INTERNAL void data_on_event_received (LegbaSignaller * signaller,
    const char *event, JsonNode * data, LegbaRoom * room);

G_END_DECLS
