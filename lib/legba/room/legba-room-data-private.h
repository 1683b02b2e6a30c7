/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The data-channel part of LegbaRoom (legba-room-data.c,
 * legba-room-data-receive.c, legba-room-data-signals.c,
 * legba-room-data-meta.c) and the points where the rest of the room calls
 * it; what those files share among themselves is in
 * legba-room-data-shared.h.
 */
#pragma once

#include <legba/room/legba-room-private.h>
#include <legba/room/legba-room-data.h>

G_BEGIN_DECLS

/* legba-room.c */
void legba_room_data_class_init (GObjectClass * klass);
LegbaRoomData *legba_room_data_new (LegbaRoom * room);
void legba_room_data_dispose (LegbaRoom * room);
void legba_room_data_free (LegbaRoomData * data);
void legba_room_data_participant_joined (LegbaRoom * room,
    LegbaParticipant * p);
void legba_room_data_peer_connected (LegbaRoom * room, LegbaPeer * peer);
void legba_room_data_lossy_open (LegbaRoom * room, LegbaPeer * peer);

/* legba-room-sfu.c: in an SFU room, messages to everyone go to the
 * connection of publisher (its peer connected through
 * legba_room_data_peer_connected()), and messages to named recipients are
 * refused; NULL ends it. */
void legba_room_data_use_sfu (LegbaRoom * room, LegbaParticipant * publisher);
/* Bytes of reliable messages to participant id not yet on the wire: queued,
 * or buffered in its channel. */
guint64 legba_room_data_queued (LegbaRoom * room, const char *id);
/* legba-room-switch.c: a mesh room moving to its SFU (§8) sends a
 * `legba.sfu-probe` straight on the reliable channel of its publisher
 * connection, ahead of the messages the move holds; FALSE when the
 * channel is not open or is congested. */
gboolean legba_room_data_send_probe (LegbaRoom * room, LegbaPeer * publisher);

/* legba-room-peer.c */
void legba_peer_data_watch_channel (LegbaPeer * peer,
    GstWebRTCDataChannel * channel);
void legba_peer_data_close (LegbaPeer * peer);
void legba_peer_data_closed (LegbaPeer * peer);
void legba_peer_data_free (LegbaPeerData * data);
void legba_peer_data_add_stats (LegbaPeer * peer, GstStructure * summary);

/* legba-room-tap.c */
gboolean legba_peer_data_open (LegbaPeer * peer);
gboolean legba_peer_data_stream_reliability (LegbaPeer * peer,
    guint16 stream, LegbaReliability * reliability);
void legba_peer_data_take (LegbaPeer * peer, LegbaReliability reliability,
    JsonParser ** parser, const char *text, gsize size, GBytes * bytes);
void legba_peer_tap_decoder (LegbaPeer * peer, GstElement * sctpdec);

/* The benchmarks of the library's own cost (bench/data): hands each
 * message over in place of gst_webrtc_data_channel_send_string_full() (a
 * text message, @text) or _send_data_full() (binary, @bytes), so the
 * transport is left out. NULL, the default, restores webrtcbin's. */
typedef gboolean (*LegbaRoomDataSendFunc) (GstWebRTCDataChannel * channel,
    const char *text, GBytes * bytes, GError ** error);
void legba_room_data_set_send_func (LegbaRoomDataSendFunc func);

G_END_DECLS
