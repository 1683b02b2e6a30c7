/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaRoomCore: the participant and negotiation rules of a room
 * (docs/room-protocol.md §3, and §4's signals kept for an unknown peer
 * connection), without any I/O.
 *
 * It keeps one record per remote participant: its current peer connection
 * (the `pc` id, the role, answered, connected), failed attempts in a row,
 * whether the server lists it, and its timers. It decides who offers to
 * whom, the fallback offer, glare, the grace period on leave, the
 * replacement of a failed or closed connection and what a reconnect keeps.
 * LegbaRoom feeds it events (membership from the signaller, signals from
 * peers, peer connection states, timers) and carries out the actions it
 * asks for through LegbaRoomCoreActions: making and closing peer
 * connections, sending `bye`, reporting participants.
 *
 * Time: each event that may arm a timer takes the monotonic time `now` in
 * microseconds. The core asks for one wake-up at a time (`schedule`); the
 * room then calls legba_room_core_tick() at or after that time. The core
 * never reads a clock and holds no GMainContext, so a test drives it
 * event by event.
 *
 * Threads: a core belongs to one thread (the room's main context); nothing
 * locks. The actions run synchronously inside the event that caused them,
 * in the order the rules take them. They must not call back into the
 * core, with two exceptions: `start_peer` may report its connection
 * failed (legba_room_core_peer_failed()) before it returns, as the core
 * starts a connection last, once its own records are complete; and
 * `room_full` may leave (legba_room_core_leave()). An application that
 * leaves the room from a handler of what participant_added,
 * participant_removed or participant_failed report is tolerated: the
 * core looks its records up again after those.
 *
 * SFU rooms: once the room is told that it is an SFU room
 * (legba_room_core_use_sfu(), from the `legba:topology` event that
 * legba_room_core_parse_topology() reads), the core makes no peer
 * connection with anyone: it closes those it has (with a `bye`), drops
 * the peers' offers, and keeps the participants the server lists, whose
 * media the room then takes from the SFU (docs/rooms.md, "SFU rooms").
 *
 * The chunking of large signals into `part` messages, their reassembly and
 * the pacing of client events (§4) belong to the signaller
 * (legba-signal-codec.c and legba-signal-client.c), below the room.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* §3 */
#define LEGBA_ROOM_OFFER_WAIT_MS 3000
#define LEGBA_ROOM_GRACE_MS 10000
/* §3: after a bye from the smaller id (its end of the connection failed)
 * the greater id offers a fresh connection this much later: long enough
 * for the member_removed of a participant that said bye because it left,
 * short beside the offer wait. A second bye in a row waits the full
 * LEGBA_ROOM_OFFER_WAIT_MS. */
#define LEGBA_ROOM_REOFFER_MS 250
/* §4 */
#define LEGBA_ROOM_EARLY_SIGNAL_MS 10000
/* A peer whose packets stopped this long ago is not "still connected"
 * when the server reports it gone (§3 grace period); during the grace
 * period liveness is checked every third of it. */
#define LEGBA_ROOM_LIVENESS_MS 1500

typedef struct _LegbaRoomCore LegbaRoomCore;

/* The room's SFU, from the `legba:topology` event (docs/room-protocol.md
 * §8): Janus's WebSocket url, the VideoRoom's numeric id, its pin and this
 * participant's token. */
typedef struct
{
  char *url;
  guint64 room;
  char *pin;
  char *token;
} LegbaRoomSfu;

void legba_room_sfu_free (LegbaRoomSfu * sfu);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (LegbaRoomSfu, legba_room_sfu_free)

/* The same values as LegbaParticipantState (legba-participant.h), which
 * the room's participants report. */
typedef enum
{
  LEGBA_ROOM_CORE_NEW,
  LEGBA_ROOM_CORE_CONNECTING,
  LEGBA_ROOM_CORE_CONNECTED,
  LEGBA_ROOM_CORE_RECONNECTING,
  LEGBA_ROOM_CORE_AWAY,
  LEGBA_ROOM_CORE_FAILED,
  LEGBA_ROOM_CORE_LEFT,
} LegbaRoomCoreState;

/* What the room does for the core. `handle` is what participant_added
 * returned for the participant.
 *
 * participant_added: a participant is listed; `member` is what the event
 *   that listed it was given (NULL for one known by its offer only).
 *   Returns the room's handle for it, which the core keeps.
 * participant_state: its state changed.
 * participant_removed: it left; the core forgets it after the call (its
 *   peer connection, if any, was closed first).
 * participant_failed: no connection could be made with it (the
 *   replacement failed too); `why` says what failed last.
 * entered: the room is joined (on each subscription_succeeded accepted,
 *   before its members are listed).
 * open_peer: make peer connection `pc` with the participant, as offerer
 *   or answerer. Returns FALSE when it could not be made.
 * start_peer: start `pc`: as offerer (`offer_sdp` NULL) it makes its
 *   offer; as answerer it applies `offer_sdp`.
 * close_peer: close peer connection `pc`.
 * send_bye: send `bye` for `pc` to the participant.
 * apply_answer: hand the answer to offerer connection `pc`; returns TRUE
 *   when the connection takes it (it had sent its offer and had no answer).
 * apply_candidates: hand remote candidates (a JSON array) to `pc`.
 * peer_is_live: whether `pc` is connected and received packets within
 *   LEGBA_ROOM_LIVENESS_MS; in an SFU room (pc NULL), the connection the
 *   participant's media come through from the SFU.
 * schedule: call legba_room_core_tick() at monotonic time `deadline`
 *   (microseconds), replacing the previous request; -1: no call needed.
 * room_full: the room holds `members` others, more than max-participants
 *   allows (when joining). */
typedef struct
{
  gpointer (*participant_added) (const char *id, gpointer member,
      gpointer user_data);
  void (*participant_state) (gpointer handle, LegbaRoomCoreState state,
      gpointer user_data);
  void (*participant_removed) (gpointer handle, gpointer user_data);
  void (*participant_failed) (gpointer handle, const char *why,
      gpointer user_data);
  void (*entered) (gpointer user_data);
  gboolean (*open_peer) (gpointer handle, const char *pc, gboolean offerer,
      gpointer user_data);
  void (*start_peer) (gpointer handle, const char *pc, const char *offer_sdp,
      gpointer user_data);
  void (*close_peer) (gpointer handle, const char *pc, gpointer user_data);
  void (*send_bye) (gpointer handle, const char *pc, gpointer user_data);
  gboolean (*apply_answer) (gpointer handle, const char *pc, const char *sdp,
      gpointer user_data);
  void (*apply_candidates) (gpointer handle, const char *pc,
      JsonArray * candidates, gpointer user_data);
  gboolean (*peer_is_live) (gpointer handle, const char *pc,
      gpointer user_data);
  void (*schedule) (gint64 deadline, gpointer user_data);
  void (*room_full) (guint members, gpointer user_data);
} LegbaRoomCoreActions;

LegbaRoomCore *legba_room_core_new (const LegbaRoomCoreActions * actions,
    gpointer user_data);
/* Frees the core without calling any action (legba_room_core_leave()
 * first to close what is open). */
void legba_room_core_free (LegbaRoomCore * core);

/* The local participant id (compared byte-wise with the others, §3) and
 * the room's max-participants, for the next join. */
void legba_room_core_set_local_id (LegbaRoomCore * core, const char *id);
void legba_room_core_set_max_participants (LegbaRoomCore * core, guint max);

/* ---- Membership (from the signaller) ---- */

/* pusher_internal:subscription_succeeded, on the first join and after each
 * reconnect: `ids[i]` with `members[i]` (handed to participant_added).
 * Offers to every listed member without a peer connection; one listed
 * again within its grace period keeps its connection. Returns FALSE when
 * the room was full on the first join (room_full was called and nothing
 * else done). */
gboolean legba_room_core_joined (LegbaRoomCore * core, const char *const *ids,
    gpointer * members, guint n, gint64 now);
/* member_added / member_removed */
void legba_room_core_member_added (LegbaRoomCore * core, const char *id,
    gpointer member, gint64 now);
void legba_room_core_member_removed (LegbaRoomCore * core, const char *id,
    gint64 now);
/* The room leaves (or failed): every participant is removed, with a `bye`
 * on each open connection when say_bye; signals kept are dropped. */
void legba_room_core_leave (LegbaRoomCore * core, gboolean say_bye);

/* ---- Signals from peers (§4); `from` is checked by the room ---- */

/* An offer (its SDP readable, checked by the room) for `pc`. */
void legba_room_core_offer (LegbaRoomCore * core, const char *from,
    const char *pc, const char *sdp, gint64 now);
void legba_room_core_answer (LegbaRoomCore * core, const char *from,
    const char *pc, const char *sdp);
void legba_room_core_candidates (LegbaRoomCore * core, const char *from,
    const char *pc, JsonArray * candidates, gint64 now);
void legba_room_core_bye (LegbaRoomCore * core, const char *from,
    const char *pc, gint64 now);

/* ---- Peer connections ---- */

/* Peer connection `pc` is connected (and its reliable data channel open).
 * Returns TRUE when it is its participant's current connection. */
gboolean legba_room_core_peer_connected (LegbaRoomCore * core,
    const char *pc);
/* Peer connection `pc` failed: it is replaced once (§3), else the
 * participant is reported failed. */
void legba_room_core_peer_failed (LegbaRoomCore * core, const char *pc,
    const char *why, gint64 now);

/* Records `pc` as the connection of listed participant `id`, made by the
 * room outside these rules (a benchmark wires one by hand); nothing is
 * opened or started. */
void legba_room_core_attach (LegbaRoomCore * core, const char *id,
    const char *pc);

/* ---- Topology ---- */

/* Reads the data of a `legba:topology` event. Returns TRUE when it is
 * well formed: *sfu is then NULL for a mesh room, else the SFU to use
 * (transfer full). Returns FALSE with *why set (transfer full) for data
 * that is not such an event's; *sfu is then NULL. */
gboolean legba_room_core_parse_topology (JsonNode * data, LegbaRoomSfu ** sfu,
    char **why);
/* The room is an SFU room until it leaves: every peer connection is
 * closed with a `bye`, and no offer is made, answered or awaited;
 * membership still comes from the signaller. */
void legba_room_core_use_sfu (LegbaRoomCore * core);
gboolean legba_room_core_is_sfu (LegbaRoomCore * core);

/* ---- Time ---- */

/* Runs every timer due at `now`. */
void legba_room_core_tick (LegbaRoomCore * core, gint64 now);

/* ---- Lookups ---- */

/* The handle of participant `id`, NULL when not listed. */
gpointer legba_room_core_find (LegbaRoomCore * core, const char *id);
/* The handle of the participant whose current connection is `pc`. */
gpointer legba_room_core_find_by_pc (LegbaRoomCore * core, const char *pc);
/* The participant's current peer connection, NULL when none. */
const char *legba_room_core_get_pc (LegbaRoomCore * core, const char *id);
gboolean legba_room_core_local_is_greater (LegbaRoomCore * core,
    const char *other);

G_END_DECLS
