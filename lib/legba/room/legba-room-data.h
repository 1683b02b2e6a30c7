/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Application data between the participants of a LegbaRoom, over the data
 * channels of docs/room-protocol.md §6, and the events the application's
 * backend publishes to the room (§7).
 *
 * Threads: as the rest of LegbaRoom (legba-room.h): call these from the
 * thread that runs the room's main context; the signals are emitted there.
 */
#pragma once

#if !defined(LEGBA_INSIDE) && !defined(LEGBA_COMPILATION)
#error "Only <legba/legba.h> can be included directly."
#endif

#include <gst/gst.h>
#include <legba/legba-api.h>
#include <json-glib/json-glib.h>
#include <legba/room/legba-room.h>

G_BEGIN_DECLS

/**
 * LegbaReliability:
 * @LEGBA_RELIABILITY_RELIABLE: ordered and retransmitted, on the data
 *   channel `legba`; nothing is dropped
 * @LEGBA_RELIABILITY_LOSSY: unordered, never retransmitted, on the data
 *   channel `legba-lossy`: for latest-value-wins traffic. The channel is
 *   opened by whichever side first sends on it; the first messages to a
 *   participant wait for it to open
 *
 * How a message travels (docs/room-protocol.md §6).
 */
typedef enum
{
  LEGBA_RELIABILITY_RELIABLE,
  LEGBA_RELIABILITY_LOSSY,
} LegbaReliability;

#define LEGBA_TYPE_RELIABILITY (legba_reliability_get_type ())
LEGBA_API
GType legba_reliability_get_type (void);

/**
 * LEGBA_ROOM_SERVER_PARTICIPANT:
 *
 * The participant id under which events published by the application's
 * backend (docs/room-protocol.md §7) are reported by #LegbaRoom::data-received.
 */
#define LEGBA_ROOM_SERVER_PARTICIPANT "server"

/**
 * LEGBA_ROOM_DEFAULT_MAX_MESSAGE_SIZE:
 *
 * The largest message, in bytes, to a peer whose SDP has no
 * `max-message-size` attribute (docs/room-protocol.md §6), GStreamer 1.22's
 * own offers among them.
 */
#define LEGBA_ROOM_DEFAULT_MAX_MESSAGE_SIZE 65536

/**
 * LEGBA_ROOM_DATA_QUEUE_BYTES:
 *
 * How many bytes of messages each recipient may hold, per channel, while
 * its channel is not open yet or cannot take more; a reliable message
 * beyond it is refused for that recipient (%LEGBA_ROOM_ERROR_NOT_DELIVERED).
 */
#define LEGBA_ROOM_DATA_QUEUE_BYTES (1024 * 1024)

LEGBA_API
gboolean legba_room_send_json (LegbaRoom * self, JsonNode * data,
    const char *topic, LegbaReliability reliability, const char *const *to,
    GError ** error);
LEGBA_API
gboolean legba_room_send_bytes (LegbaRoom * self, GBytes * bytes,
    LegbaReliability reliability, const char *const *to, GError ** error);
LEGBA_API
gboolean legba_room_is_sfu (LegbaRoom * self);
LEGBA_API
gsize legba_room_get_max_message_size (LegbaRoom * self,
    const char *participant_id);
LEGBA_API
LegbaReliability legba_room_get_received_reliability (LegbaRoom * self);
LEGBA_API
void legba_room_enable_sync_data_emission (LegbaRoom * self);
LEGBA_API
void legba_room_disable_sync_data_emission (LegbaRoom * self);

LEGBA_API
void legba_room_set_muted (LegbaRoom * self, gboolean audio, gboolean video);
LEGBA_API
void legba_room_get_muted (LegbaRoom * self, gboolean * audio,
    gboolean * video);
LEGBA_API
gboolean legba_room_get_participant_muted (LegbaRoom * self,
    const char *participant_id, gboolean * audio, gboolean * video);

LEGBA_API
GstStructure *legba_room_get_data_stats (LegbaRoom * self);

/**
 * LegbaDataMeta:
 * @meta: the parent #GstMeta
 * @participant_id: (nullable): on a buffer from `legbadatasrc`, the
 *   sender's participant id (`server` for §7 events); unused by
 *   `legbadatasink`
 * @topic: (nullable): the message's topic; on a buffer into
 *   `legbadatasink`, overrides its `topic` property
 * @reliability: how the message travelled, or, into `legbadatasink`, how it
 *   is to travel when @has_reliability is set
 * @has_reliability: whether @reliability overrides the sink's `reliable`
 *   property
 * @to: (nullable) (array zero-terminated=1): into `legbadatasink`, the
 *   recipients, overriding its `to` property
 *
 * One data-channel message's envelope, carried by buffers of the
 * `legbadatasrc` and `legbadatasink` elements.
 */
typedef struct
{
  GstMeta meta;

  char *participant_id;
  char *topic;
  LegbaReliability reliability;
  gboolean has_reliability;
  char **to;
} LegbaDataMeta;

LEGBA_API
GType legba_data_meta_api_get_type (void);
#define LEGBA_DATA_META_API_TYPE (legba_data_meta_api_get_type ())
LEGBA_API
const GstMetaInfo *legba_data_meta_get_info (void);
#define LEGBA_DATA_META_INFO (legba_data_meta_get_info ())

LEGBA_API
LegbaDataMeta *legba_buffer_add_data_meta (GstBuffer * buffer,
    const char *participant_id, const char *topic,
    LegbaReliability reliability, const char *const *to);
LEGBA_API
LegbaDataMeta *legba_buffer_get_data_meta (GstBuffer * buffer);

G_END_DECLS
