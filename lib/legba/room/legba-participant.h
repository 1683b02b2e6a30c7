/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * LegbaParticipant:
 *
 * A remote participant of a #LegbaRoom.
 *
 * A #LegbaParticipant is another member of the room a #LegbaRoom joined:
 * its participant id (docs/room-protocol.md §2, `IDENTITY-SUFFIX`), the
 * identity and display name it announced, where the peer connection with
 * it stands, and a summary of that connection's statistics. The room
 * creates and updates participants; applications read them from
 * legba_room_get_participants() and watch their properties.
 *
 * ## Threads
 *
 * A participant belongs to its room's main context: its properties change
 * and notify there (see #LegbaRoom), and it is read from that context's
 * thread.
 */
#pragma once

#if !defined(LEGBA_INSIDE) && !defined(LEGBA_COMPILATION)
#error "Only <legba/legba.h> can be included directly."
#endif

#include <gst/gst.h>
#include <legba/legba-api.h>

G_BEGIN_DECLS

/**
 * LegbaParticipantState:
 * @LEGBA_PARTICIPANT_STATE_NEW: listed in the room; no peer connection yet
 *   (waiting for its offer, docs/room-protocol.md §3)
 * @LEGBA_PARTICIPANT_STATE_CONNECTING: a peer connection is being
 *   negotiated or is establishing ICE and DTLS
 * @LEGBA_PARTICIPANT_STATE_CONNECTED: the peer connection is connected and
 *   its data channels are open
 * @LEGBA_PARTICIPANT_STATE_RECONNECTING: the peer connection failed and a
 *   fresh one is being made (docs/room-protocol.md §3)
 * @LEGBA_PARTICIPANT_STATE_AWAY: the signalling server reported it gone;
 *   its peer connection is kept for the grace period in case it comes back
 * @LEGBA_PARTICIPANT_STATE_FAILED: no peer connection could be made with
 *   it (the replacement failed too); it stays listed while in the room
 * @LEGBA_PARTICIPANT_STATE_LEFT: it left the room; it is no longer listed
 *
 * Where the local participant stands with a remote one, the
 * #LegbaParticipant:state property.
 */
typedef enum
{
  LEGBA_PARTICIPANT_STATE_NEW,
  LEGBA_PARTICIPANT_STATE_CONNECTING,
  LEGBA_PARTICIPANT_STATE_CONNECTED,
  LEGBA_PARTICIPANT_STATE_RECONNECTING,
  LEGBA_PARTICIPANT_STATE_AWAY,
  LEGBA_PARTICIPANT_STATE_FAILED,
  LEGBA_PARTICIPANT_STATE_LEFT,
} LegbaParticipantState;

#define LEGBA_TYPE_PARTICIPANT_STATE (legba_participant_state_get_type ())
LEGBA_API
GType legba_participant_state_get_type (void);

#define LEGBA_TYPE_PARTICIPANT (legba_participant_get_type ())
LEGBA_API
G_DECLARE_FINAL_TYPE (LegbaParticipant, legba_participant, LEGBA,
    PARTICIPANT, GObject)

LEGBA_API
const char *legba_participant_get_id (LegbaParticipant * self);
LEGBA_API
const char *legba_participant_get_identity (LegbaParticipant * self);
LEGBA_API
const char *legba_participant_get_name (LegbaParticipant * self);
LEGBA_API
LegbaParticipantState legba_participant_get_state (LegbaParticipant * self);
LEGBA_API
GstStructure *legba_participant_get_stats (LegbaParticipant * self);

G_END_DECLS
