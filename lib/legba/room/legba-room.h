/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * LegbaRoom:
 *
 * One participant of a room (docs/room-protocol.md): the participant
 * list, one webrtcbin per remote participant, local tracks sent to all.
 *
 * A #LegbaRoom joins a room through a #LegbaSignaller as one participant
 * and runs the room protocol: it keeps the list of the other participants,
 * makes one peer connection (one webrtcbin) with each of them inside the
 * #GstBin it was given, sends every local track to all of them and hands
 * out what each of them sends. JSON and bytes travel between the
 * participants over data channels (legba_room_send_json(),
 * #LegbaRoom::data-received).
 *
 * |[<!-- language="C" -->
 * LegbaRoom *room = legba_room_new (LEGBA_SIGNALLER (client),
 *     GST_BIN (pipeline));
 * GstPad *video = legba_room_add_track (room, LEGBA_TRACK_KIND_VIDEO, NULL);
 *
 * gst_pad_link (gst_element_get_static_pad (encoder, "src"), video);
 * g_object_set (room, "room", "demo", "identity", "alice", NULL);
 * g_signal_connect (room, "track-added", G_CALLBACK (on_track), NULL);
 * gst_element_set_state (pipeline, GST_STATE_PLAYING);
 * legba_room_connect_async (room, NULL, on_connected, NULL);
 * ]|
 *
 * ## Threads
 *
 * A #LegbaRoom runs on the thread-default #GMainContext of the thread
 * that created it (g_main_context_get_thread_default() at construction),
 * which must also be the context of its #LegbaSignaller. Run a #GMainLoop
 * on that context and call the room from its thread, the data functions
 * included. Its signals and property notifications are emitted there,
 * including #LegbaRoom::track-added, whose pad already carries data: link
 * it from the handler (or leave it unlinked: an unlinked pad discards its
 * data and never stops the room). Callbacks from GStreamer's streaming
 * threads (webrtcbin's signals, pads, data channels) are handed to the
 * room's main context; the room never calls into webrtcbin nor emits a
 * signal while it holds its lock.
 */
#pragma once

#if !defined(LEGBA_INSIDE) && !defined(LEGBA_COMPILATION)
#error "Only <legba/legba.h> can be included directly."
#endif

#include <gio/gio.h>
#include <gst/gst.h>
#include <legba/legba-api.h>
#include <legba/signal/legba-signaller.h>
#include <legba/room/legba-participant.h>

G_BEGIN_DECLS

/**
 * LEGBA_ROOM_ERROR:
 *
 * Error domain of #LegbaRoom. Errors in this domain are from the
 * #LegbaRoomError enumeration.
 */
#define LEGBA_ROOM_ERROR (legba_room_error_quark ())
LEGBA_API
GQuark legba_room_error_quark (void);

/**
 * LegbaRoomError:
 * @LEGBA_ROOM_ERROR_INVALID: the room is not configured so that it can
 *   work (no room name or identity, a second track of one kind, a call
 *   made in the wrong state)
 * @LEGBA_ROOM_ERROR_UNREACHABLE: the signalling server could not be reached
 *   while connecting
 * @LEGBA_ROOM_ERROR_REFUSED: the signalling server or the auth endpoint
 *   refused the participant (bad key, secret or token)
 * @LEGBA_ROOM_ERROR_FULL: the room already holds
 *   #LegbaRoom:max-participants participants
 * @LEGBA_ROOM_ERROR_MISSING_PLUGIN: a GStreamer element the room needs
 *   (webrtcbin, the nice, dtls, srtp or sctp plugins, an RTP payloader)
 *   is not installed
 * @LEGBA_ROOM_ERROR_PEER: a peer connection with a participant could not
 *   be made, even after being replaced (not fatal: the room stays joined)
 * @LEGBA_ROOM_ERROR_SIGNALLING: the signalling server reported a problem it
 *   recovers from (lost connection while in the room, rate limit; not
 *   fatal)
 * @LEGBA_ROOM_ERROR_CLOSED: legba_room_disconnect() was called before the
 *   room was joined
 * @LEGBA_ROOM_ERROR_TOO_LARGE: a message is larger than a recipient's
 *   `max-message-size`; nothing was sent
 * @LEGBA_ROOM_ERROR_NOT_DELIVERED: some recipients could not take a
 *   message (their queue is full, or they are not in the room); the
 *   others got it. The message names them.
 * @LEGBA_ROOM_ERROR_MALFORMED: a participant sent a data-channel message
 *   that is not a docs/room-protocol.md §6 message; it was dropped (not fatal)
 *
 * Errors of #LegbaRoom, reported by legba_room_connect_finish() and by
 * #LegbaRoom::error.
 */
typedef enum
{
  LEGBA_ROOM_ERROR_INVALID,
  LEGBA_ROOM_ERROR_UNREACHABLE,
  LEGBA_ROOM_ERROR_REFUSED,
  LEGBA_ROOM_ERROR_FULL,
  LEGBA_ROOM_ERROR_MISSING_PLUGIN,
  LEGBA_ROOM_ERROR_PEER,
  LEGBA_ROOM_ERROR_SIGNALLING,
  LEGBA_ROOM_ERROR_CLOSED,
  LEGBA_ROOM_ERROR_TOO_LARGE,
  LEGBA_ROOM_ERROR_NOT_DELIVERED,
  LEGBA_ROOM_ERROR_MALFORMED,
} LegbaRoomError;

/**
 * LegbaRoomState:
 * @LEGBA_ROOM_STATE_DISCONNECTED: not in a room (initial state, and after
 *   legba_room_disconnect())
 * @LEGBA_ROOM_STATE_CONNECTING: joining the room
 * @LEGBA_ROOM_STATE_CONNECTED: in the room: participants are known and
 *   signals can be sent
 * @LEGBA_ROOM_STATE_RECONNECTING: the signalling connection was lost and is
 *   being made again; peer connections stay up (docs/room-protocol.md §3)
 * @LEGBA_ROOM_STATE_FAILED: the room cannot be joined as configured (an
 *   error was reported); connect again to retry
 *
 * The state of a #LegbaRoom, its #LegbaRoom:state property.
 */
typedef enum
{
  LEGBA_ROOM_STATE_DISCONNECTED,
  LEGBA_ROOM_STATE_CONNECTING,
  LEGBA_ROOM_STATE_CONNECTED,
  LEGBA_ROOM_STATE_RECONNECTING,
  LEGBA_ROOM_STATE_FAILED,
} LegbaRoomState;

#define LEGBA_TYPE_ROOM_STATE (legba_room_state_get_type ())
LEGBA_API
GType legba_room_state_get_type (void);

/**
 * LegbaTrackKind:
 * @LEGBA_TRACK_KIND_VIDEO: video (H.264 or VP8)
 * @LEGBA_TRACK_KIND_AUDIO: audio (Opus)
 *
 * The kind of a media track.
 */
typedef enum
{
  LEGBA_TRACK_KIND_VIDEO,
  LEGBA_TRACK_KIND_AUDIO,
} LegbaTrackKind;

#define LEGBA_TYPE_TRACK_KIND (legba_track_kind_get_type ())
LEGBA_API
GType legba_track_kind_get_type (void);

/**
 * LEGBA_ROOM_VIDEO_CAPS:
 *
 * The encoded video a local track accepts (docs/room-protocol.md §5): H.264
 * byte-stream, one access unit per buffer, constrained baseline; or VP8.
 */
#define LEGBA_ROOM_VIDEO_CAPS \
  "video/x-h264, stream-format = (string) byte-stream, " \
  "alignment = (string) au, profile = (string) constrained-baseline; " \
  "video/x-vp8"
/**
 * LEGBA_ROOM_AUDIO_CAPS:
 *
 * The encoded audio a local track accepts: Opus.
 */
#define LEGBA_ROOM_AUDIO_CAPS "audio/x-opus"

#define LEGBA_TYPE_ROOM (legba_room_get_type ())
LEGBA_API
G_DECLARE_FINAL_TYPE (LegbaRoom, legba_room, LEGBA, ROOM, GObject)

LEGBA_API
LegbaRoom *legba_room_new (LegbaSignaller * signaller, GstBin * bin);

LEGBA_API
LegbaSignaller *legba_room_get_signaller (LegbaRoom * self);
LEGBA_API
GstBin *legba_room_get_bin (LegbaRoom * self);
LEGBA_API
GMainContext *legba_room_get_main_context (LegbaRoom * self);
LEGBA_API
LegbaRoomState legba_room_get_state (LegbaRoom * self);
LEGBA_API
const char *legba_room_get_participant_id (LegbaRoom * self);
LEGBA_API
GListModel *legba_room_get_participants (LegbaRoom * self);
LEGBA_API
LegbaParticipant *legba_room_find_participant (LegbaRoom * self,
    const char *participant_id);

LEGBA_API
GstPad *legba_room_add_track (LegbaRoom * self, LegbaTrackKind kind,
    GError ** error);
LEGBA_API
void legba_room_remove_track (LegbaRoom * self, LegbaTrackKind kind);

LEGBA_API
void legba_room_connect_async (LegbaRoom * self, GCancellable * cancellable,
    GAsyncReadyCallback callback, gpointer user_data);
LEGBA_API
gboolean legba_room_connect_finish (LegbaRoom * self, GAsyncResult * result,
    GError ** error);
LEGBA_API
void legba_room_disconnect (LegbaRoom * self);

LEGBA_API
void legba_room_prepare (void);
LEGBA_API
void legba_room_prepare_wait (void);

G_END_DECLS
