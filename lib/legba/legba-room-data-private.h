/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The data-channel part of LegbaRoom (legba-room-data.c) and the points
 * where the rest of the room calls it.
 */
#pragma once

#include "legba-room-private.h"
#include "legba-room-data.h"

G_BEGIN_DECLS

/* legba-room.c */
void legba_room_data_class_init (GObjectClass * klass);
LegbaRoomData *legba_room_data_new (LegbaRoom * room);
void legba_room_data_dispose (LegbaRoom * room);
void legba_room_data_free (LegbaRoomData * data);
void legba_room_data_peer_connected (LegbaRoom * room, LegbaPeer * peer);

/* legba-room-peer.c */
void legba_peer_data_watch_channel (LegbaPeer * peer,
    GstWebRTCDataChannel * channel);
void legba_peer_data_close (LegbaPeer * peer);
void legba_peer_data_free (LegbaPeerData * data);
void legba_peer_data_add_stats (LegbaPeer * peer, GstStructure * summary);

G_END_DECLS
