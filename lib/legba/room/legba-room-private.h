/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What the parts of LegbaRoom share. legba-room.c drives them: it feeds
 * the rules (legba-room-core.c, no I/O) the signaller's events and
 * carries out what they decide through legba-room-peer.c (one webrtcbin
 * per peer connection: negotiation, ICE; its knobs in legba-room-knobs.c,
 * the process's certificate and preparation in legba-room-certificate.c
 * and legba-room-prepare.c), legba-room-media.c (local tracks teed to
 * every peer, received tracks, stats) and legba-room-data.c (data
 * channels, with legba-room-data-receive.c, -signals.c and -meta.c;
 * legba-room-tap.c takes their messages off SCTP). Those report back through LegbaPeerEvents and
 * LegbaRoomEvents, never by calling the room; a peer connection calls
 * into its own media and data parts, which call nothing of the peer's but
 * legba-room-context.c (references and hand-overs to the room's context).
 *
 * Threads: everything here belongs to the room's main context unless a
 * field says otherwise. Streaming threads touch only what is marked
 * "(lock)", under the lock named, and hand the rest over with
 * legba_room_invoke().
 */
#pragma once

#include <legba/room/legba-room.h>
#include <legba/room/legba-room-core.h>

#include <string.h>
#define GST_USE_UNSTABLE_API
#include <gst/webrtc/webrtc.h>

G_BEGIN_DECLS

GST_DEBUG_CATEGORY_EXTERN (legba_room_debug);
#define GST_CAT_DEFAULT legba_room_debug
void legba_room_debug_init (void);

/* docs/room-protocol.md §4 */
#define LEGBA_ROOM_CANDIDATE_BATCH_MS 50
/* A peer connection that makes no progress towards connected (a
 * description, a candidate, a state change, a data channel open) for this
 * long counts as failed. */
#define LEGBA_ROOM_PEER_CONNECT_TIMEOUT_MS 20000
/* At most one key-frame request upstream per this interval: ten key
 * frames a second at most, whatever the peers ask, and a receiver whose
 * first key frame came incomplete gets the next within about a jitter
 * buffer's latency (docs/rooms.md, Key frames). */
#define LEGBA_ROOM_KEY_UNIT_INTERVAL_US (100 * G_TIME_SPAN_MILLISECOND)
/* what a peer's send queue holds before its frames are dropped */
#define LEGBA_ROOM_SEND_QUEUE_TIME (1 * GST_SECOND)

/* docs/room-protocol.md §8 */
#define LEGBA_ROOM_TOPOLOGY_EVENT "legba:topology"

#define LEGBA_ROOM_CHANNEL_RELIABLE "legba"
#define LEGBA_ROOM_CHANNEL_LOSSY "legba-lossy"

#define LEGBA_TWCC_URI \
  "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"

typedef struct _LegbaPeer LegbaPeer;
/* legba-room-sfu.c */
typedef struct _LegbaSfuClient LegbaSfuClient;
/* legba-room-switch.c */
typedef struct _LegbaRoomSwitch LegbaRoomSwitch;
/* legba-room-data.c */
typedef struct _LegbaRoomData LegbaRoomData;
typedef struct _LegbaPeerData LegbaPeerData;

/* ---- Participants (legba-participant.c) ---- */

struct _LegbaParticipant
{
  GObject parent;

  char *id;
  char *identity;
  char *name;
  LegbaParticipantState state;
  GstStructure *stats;

  /* the room's: its current peer connection (the room core decides
   * which), owned */
  LegbaPeer *peer;
};

LegbaParticipant *legba_participant_new (const char *id,
    LegbaSignalMember * member);
void legba_participant_set_state (LegbaParticipant * self,
    LegbaParticipantState state);
void legba_participant_take_stats (LegbaParticipant * self,
    GstStructure * stats);

/* ---- Local tracks (legba-room-media.c) ---- */

typedef struct
{
  LegbaRoom *room;              /* unowned: the track lives in the room */
  LegbaTrackKind kind;
  GstElement *tee;              /* owned, and in the room's bin */
  GstElement *capsfilter;       /* owned too: the accepted caps, before the tee */
  GstPad *sinkpad;              /* the capsfilter's sink pad, the app's */
  /* (lock: room->lock) */
  GstCaps *caps;                /* of the encoded stream, NULL until known */
  gint64 last_key_unit;         /* monotonic time of the last request */
  GSource *key_unit_later;      /* a request held back by the rate limit */
} LegbaLocalTrack;

/* ---- The room ---- */

/* What the room's media and data parts report to it (legba-room.c), on
 * its context; the room decides what follows.
 *
 * track: a participant's received track is announced (added) or ends
 * media_ready: the local tracks' caps are all known: peer connections
 *   waiting for them may negotiate
 * report: something the application should know (an error signal)
 * find_participant: the listed participant with that id, or NULL
 * open_lossy: open the lossy data channel to the participant; returns
 *   whether the connection has one now
 * publish: the local participant has something to send (a track was
 *   added, a message to everyone waits): in an SFU room, it publishes
 * sfu_track: a track of a participant came through its SFU subscriber
 *   connection, about to be announced (a mesh room moving to the SFU
 *   hands that track over: legba-room-switch.c) */
typedef struct
{
  void (*track) (LegbaRoom * self, LegbaParticipant * participant,
      LegbaTrackKind kind, GstPad * pad, gboolean added);
  void (*media_ready) (LegbaRoom * self);
  void (*report) (LegbaRoom * self, LegbaRoomError code, const char *message);
  LegbaParticipant *(*find_participant) (LegbaRoom * self, const char *id);
  gboolean (*open_lossy) (LegbaRoom * self, const char *participant_id);
  void (*publish) (LegbaRoom * self);
  void (*sfu_track) (LegbaRoom * self, LegbaPeer * subscriber,
      LegbaTrackKind kind);
} LegbaRoomEvents;

struct _LegbaRoom
{
  GObject parent;

  GMainContext *context;
  LegbaSignaller *signaller;
  GstBin *bin;                  /* weak: the room lives inside it */
  gulong signaller_handlers[8];

  /* configuration */
  char *room_name;
  char *identity;
  char *display_name;
  char *participant_id;
  guint max_participants;
  guint latency;
  gint max_latency;              /* atomic: read by the playout timer */
  char *stun_server;
  char *turn_server;
  char **ice_servers;           /* TURN URIs the signaller handed out */
  GstWebRTCICETransportPolicy ice_transport_policy;
  char **local_addresses;
  guint stun_pacing_timer;
  guint ice_idle_timeout;
  gboolean ice_tcp;
  guint stats_interval;
  gboolean congestion_control;
  guint video_fec_percentage;
  guint video_target;           /* told the video encoder; 0: none */
  gboolean video_unsteered;     /* (lock) its encoder ignores the target */
  guint audio_loss;             /* percent, told the audio encoder */

  LegbaRoomState state;
  GTask *connect_task;
  gulong cancel_handler;
  GListStore *participants;     /* LegbaParticipant, listed ones */
  LegbaRoomCore *core;          /* the participant rules; its handles are
                                 * the LegbaParticipants */
  GSource *core_timer;          /* the core's wake-up */
  GHashTable *peers;            /* pc id -> LegbaPeer (unowned) */
  GSource *stats_source;
  GSource *playout_source;       /* legba-room-playout.c */

  GMutex lock;
  LegbaLocalTrack *tracks[2];   /* by LegbaTrackKind */

  LegbaRoomData *data;          /* application data (§6, §7) */
  LegbaSfuClient *sfu;          /* an SFU room's session, else NULL */
  LegbaRoomSwitch *sw;          /* a mesh room moving to its SFU, else NULL */
  const LegbaRoomEvents *events;        /* how its parts report to it */
};

void legba_room_invoke (LegbaRoom * self, GSourceFunc func, gpointer data,
    GDestroyNotify notify);
/* attaches source to the room's context with func; returns it */
GSource *legba_room_attach_source (LegbaRoom * self, GSource * source,
    GSourceFunc func, gpointer data, GDestroyNotify notify);
GSource *legba_room_timeout (LegbaRoom * self, guint ms, GSourceFunc func,
    gpointer data, GDestroyNotify notify);
void legba_clear_source (GSource ** source);
void legba_room_report (LegbaRoom * self, LegbaRoomError code,
    const char *format, ...) G_GNUC_PRINTF (3, 4);
const char *legba_enum_nick (GType type, int value);

/* ---- Peer connections (legba-room-peer.c) ---- */

typedef enum
{
  LEGBA_PEER_OFFERER,
  LEGBA_PEER_ANSWERER,
} LegbaPeerRole;

/* What a peer connection reports to its room, on the room's context;
 * the room decides what follows (legba-room.c, legba-room-core.c).
 *
 * connected: connected, its reliable data channel open
 * failed: it failed (ICE or DTLS, an element's error, no progress in
 *   time, a description it could not make or apply)
 * send_signal: send `signal` (its `pc` and `type` set) to the participant
 * lossy_open: its lossy data channel opened once it was connected
 * stats: its statistics summary (transfer full)
 * error: something the application should know (transfer none) */
typedef struct
{
  void (*connected) (LegbaPeer * peer);
  void (*failed) (LegbaPeer * peer, const char *why);
  void (*send_signal) (LegbaPeer * peer, JsonObject * signal);
  void (*lossy_open) (LegbaPeer * peer);
  void (*stats) (LegbaPeer * peer, GstStructure * summary);
  void (*error) (LegbaPeer * peer, const GError * error);
  /* optional: its reliable data channel opened */
  void (*reliable_open) (LegbaPeer * peer);
} LegbaPeerEvents;

/* The room's */
extern const LegbaPeerEvents legba_room_peer_events;

/* legba-room-send-gate.c: the entry of a peer's send queue, closed until
 * the connection is up, then from the first key frame; frames dropped up
 * to a key frame once the queue is full */
typedef struct _LegbaSendGate LegbaSendGate;
LegbaSendGate *legba_send_gate_attach (GstElement * queue,
    LegbaTrackKind kind);
/* TRUE when it was closed until now */
gboolean legba_send_gate_open (LegbaSendGate * gate);
/* an upstream force-key-unit request, as the room sends them */
GstEvent *legba_room_key_unit_event (void);

typedef struct
{
  /* sending: a branch from the local track's tee into webrtcbin */
  GstPad *tee_pad;              /* request pad of the local tee */
  GstPad *bin_sink;             /* ghost pad of the peer's bin */
  GstElement *elements[4];      /* queue, payloader, capsfilter, NULL */
  GstPad *webrtc_sink;          /* request pad of webrtcbin */
  guint32 ssrc;                 /* announced in the codec preferences */
  LegbaSendGate *gate;          /* the queue's entry (its probe owns it) */

  /* receiving: the depayloaded stream of the participant */
  GstPad *track_pad;            /* ghost src pad of the peer's bin (lock) */
  gboolean receiving;           /* a receive branch exists (lock) */
  gboolean track_announced;
} LegbaPeerMedia;

struct _LegbaPeer
{
  gatomicrefcount ref;
  LegbaRoom *room;              /* unowned; NULL once closed */
  LegbaParticipant *participant;        /* owned */
  char *pc;
  LegbaPeerRole role;
  const LegbaPeerEvents *events;        /* how it reports to its room */
  void (*free) (LegbaPeer * peer);      /* once the last reference goes */

  /* A connection to an SFU (legba-room-sfu.c); one that answers (a
   * subscriber's) receives only, and any data channel the SFU opens on
   * it carries the participant's reliable messages (the SFU names it as
   * it likes). */
  gboolean sfu;
  gboolean sfu_subscriber;

  GstBin *bin;                  /* holds webrtcbin and the media branches */
  GstElement *webrtcbin;
  gboolean uses_turn;           /* given a TURN server */
  guint16 sctp_id;              /* unique in the process */
  GstElement *sctpenc;          /* webrtcbin's, once it made one (lock) */
  GstWebRTCRTPTransceiver *transceivers[2];     /* ours, by kind */
  GstSDPMessage *answer;        /* the negotiated media, from the answer
                                 * until the media is linked (negotiated) */
  char *mids[3];                /* of our description's first m-lines */

  gboolean remote_set;          /* the remote description is applied */
  gboolean local_sent;          /* our description left */
  guint applied;                /* descriptions webrtcbin applied */
  gboolean negotiated;          /* offer and answer both applied */
  gboolean waiting_media;       /* negotiation waits for local caps */
  GstWebRTCSessionDescription *pending_offer; /* answerer: the offer,
                                                 * while it waits */
  GstSDPMessage *offer;         /* answerer: the offer, from its
                                 * application until negotiated */
  GPtrArray *remote_candidates; /* JsonObject, until remote_set */
  GPtrArray *local_candidates;  /* JsonObject, batched (§4: 50 ms) */
  gboolean local_candidates_end;
  GSource *batch_source;
  GSource *connect_timeout;
  gboolean connect_expired;     /* the deadline passed: failed unless a
                                 * step already queued says otherwise */

  GstWebRTCPeerConnectionState connection_state;
  GstWebRTCDataChannel *channels[2];    /* legba, legba-lossy (NULL until
                                         * either side sends lossy) */
  gboolean channel_open[2];
  gboolean connected;           /* reported to the room */
  gint64 created;               /* monotonic, for the logs */

  LegbaPeerMedia media[2];      /* by LegbaTrackKind */
  GstStructure *last_stats;     /* previous summary, for bitrates */
  gboolean rtp_seen;            /* a stream flowed: stats from webrtcbin */
  gint64 last_stats_time;
  guint playout_latency;        /* ms, the highest of its jitter buffers'
                                 * (legba-room-playout.c) */

  GMutex lock;
  /* (lock) */
  gint64 last_rx;               /* monotonic time of the last packet in */
  GPtrArray *promises;          /* GstPromise handed to webrtcbin, pending */
  guint64 frames[2];            /* depayloaded frames, by kind */
  gboolean closing;             /* no new receive branches */
  LegbaPeerData *data;          /* received messages, channels watched */
  GstElement *sender;           /* LegbaPeerSender, webrtcbin's aux sender */
};

typedef void (*PeerFunc) (LegbaPeer * peer, gpointer data);

/* legba-room-context.c: holding a peer connection, and running func
 * (peer, data) on the room's context from any thread unless the peer is
 * closed by then (data is freed either way) */
LegbaPeer *legba_peer_ref (LegbaPeer * peer);
void legba_peer_unref (LegbaPeer * peer);
void legba_peer_closure_unref (gpointer peer, GClosure * closure);
void legba_peer_invoke (LegbaPeer * peer, PeerFunc func, gpointer data,
    GDestroyNotify free_data);

LegbaPeer *legba_peer_new (LegbaRoom * room, LegbaParticipant * participant,
    const char *pc, LegbaPeerRole role, const LegbaPeerEvents * events,
    GError ** error);
/* LEGBA_PEER_SFU: a connection to an SFU (LegbaPeer.sfu) */
typedef enum
{
  LEGBA_PEER_SFU = 1 << 0,
} LegbaPeerFlags;
LegbaPeer *legba_peer_new_full (LegbaRoom * room,
    LegbaParticipant * participant, const char *pc, LegbaPeerRole role,
    LegbaPeerFlags flags, const LegbaPeerEvents * events, GError ** error);
void legba_peer_start (LegbaPeer * peer);
void legba_peer_handle_offer (LegbaPeer * peer, const char *sdp);
gboolean legba_peer_handle_answer (LegbaPeer * peer, const char *sdp);
void legba_peer_handle_candidates (LegbaPeer * peer, JsonArray * candidates);
void legba_peer_media_ready (LegbaPeer * peer);
void legba_peer_close (LegbaPeer * peer);
gboolean legba_peer_is_live (LegbaPeer * peer);
void legba_peer_open_lossy (LegbaPeer * peer);
void legba_peer_update_stats (LegbaPeer * peer);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (LegbaPeer, legba_peer_unref)

/* ---- A peer connection's knobs (legba-room-knobs.c) ---- */

G_GNUC_INTERNAL gboolean legba_peer_check_plugins (GError ** error);
G_GNUC_INTERNAL void legba_peer_configure_webrtcbin (LegbaPeer * peer);
/* the handler of the peer's bin's deep-element-added */
G_GNUC_INTERNAL void legba_peer_on_deep_element_added (GstBin * bin,
    GstBin * sub_bin, GstElement * element, LegbaPeer * peer);
G_GNUC_INTERNAL void legba_peer_release_turn_allocations (LegbaPeer * peer);

/* ---- Congestion control (legba-room-congestion.c) ---- */

void legba_peer_congestion_setup (LegbaPeer * peer);
void legba_peer_congestion_close (LegbaPeer * peer);
void legba_peer_congestion_add_stats (LegbaPeer * peer,
    GstStructure * summary);
void legba_room_congestion_update (LegbaRoom * self);

/* legba-room-stats.c: (re)starts the stats timer, after the interval or
 * the state changed; on the room's context. */
void legba_room_restart_stats (LegbaRoom * self);

/* ---- Received streams' jitter buffers (legba-room-playout.c) ---- */

/* on the room's context, from joining to leaving */
void legba_room_start_playout (LegbaRoom * self);
void legba_room_stop_playout (LegbaRoom * self);
void legba_peer_playout_add_stats (LegbaPeer * peer, GstStructure * summary);

/* ---- Media (legba-room-media.c) ---- */

gboolean legba_room_media_ready (LegbaRoom * self);
void legba_room_media_load_decoders (void);
gboolean legba_room_media_receives (const GstSDPMessage * sdp);
GstCaps *legba_room_media_codec_preferences (LegbaRoom * self,
    LegbaTrackKind kind, LegbaPeerRole role, gboolean receive_only);
void legba_room_media_free_track (LegbaLocalTrack * track);
void legba_room_media_complete_answer (const GstSDPMessage * offer,
    GstSDPMessage * answer);
gboolean legba_peer_media_link_send (LegbaPeer * peer, GError ** error);
void legba_peer_media_unlink (LegbaPeer * peer);
/* The connection is up (DTLS done): the send branches open, the video at
 * a key frame asked for now. */
void legba_peer_media_open (LegbaPeer * peer);
/* The track of kind the peer receives is no longer the participant's: it
 * is reported removed, its data discarded; the connection goes on. */
void legba_peer_media_withdraw (LegbaPeer * peer, LegbaTrackKind kind);
void legba_peer_media_on_pad_added (GstElement * webrtcbin, GstPad * pad,
    LegbaPeer * peer);
void legba_peer_media_watch_input (LegbaPeer * peer, GstElement * nicesrc);
gboolean legba_peer_media_has_streams (LegbaPeer * peer);
GstStructure *legba_peer_media_summarize (LegbaPeer * peer,
    const GstStructure * webrtc_stats);


/* ---- SFU rooms (legba-room-sfu.c) ---- */

/* Connects the room to its signaller's `legba:topology` events: the
 * first that says sfu makes the room an SFU room (legba_room_core_use_sfu()
 * and a LegbaSfuClient); a later one naming another Janus or VideoRoom
 * moves it there (a new LegbaSfuClient). Returns the handler's id. */
gulong legba_room_sfu_watch_topology (LegbaRoom * room);
/* The room's LegbaRoomEvents.publish: in an SFU room, the local
 * participant publishes once joined. */
void legba_room_sfu_publish (LegbaRoom * room);
/* The room's session with its SFU: it receives each listed participant's
 * feed through a peer connection of its own, that participant's `peer`,
 * and publishes the local tracks and the reliable data channel through
 * one peer connection once the room has a local track or asks it to
 * (legba_room_sfu_publish()). */
LegbaSfuClient *legba_sfu_client_new (LegbaRoom * room,
    const LegbaRoomSfu * sfu);
/* Closes every connection and the session. */
void legba_sfu_client_free (LegbaSfuClient * client);
/* Whether the client is in the room sfu names (its Janus and room). */
gboolean legba_sfu_client_is_for (LegbaSfuClient * client,
    const LegbaRoomSfu * sfu);
/* The token of later requests: the room's topology gave a new one. */
void legba_sfu_client_set_token (LegbaSfuClient * client, const char *token);
/* A participant is listed, or no longer (before it is reported left). */
void legba_sfu_client_participant_joined (LegbaSfuClient * client,
    LegbaParticipant * p);
void legba_sfu_client_participant_left (LegbaSfuClient * client,
    LegbaParticipant * p);

/* ---- From mesh to SFU (legba-room-switch.c) ---- */

/* The room, a mesh, is told its SFU: its mesh connections are taken from
 * the participants (and so from the room core) and kept until the SFU
 * brings each participant; FALSE (nothing kept) when it had none. */
gboolean legba_room_switch_begin (LegbaRoom * room);
/* The SFU publisher connection is connected: TRUE when its messages must
 * wait for the participants of the mesh, and the switch lets them go
 * (legba_room_data_peer_connected()) later. */
gboolean legba_room_switch_hold (LegbaRoom * room, LegbaPeer * publisher);
/* The signal `sfu-ready` from a participant: it receives the local
 * participant's data through the SFU. */
void legba_room_switch_ready (LegbaRoom * room, const char *from);
/* The subscriber connection of a participant: Janus's offer (which tracks
 * it brings), its data channel open. Once it is open, has reported each
 * track and has brought a probe of the participant's
 * (legba_room_switch_probed()), the participant is told `sfu-ready` and
 * its mesh connection may go. */
void legba_room_switch_feed (LegbaRoom * room, LegbaPeer * subscriber,
    const char *offer);
void legba_room_switch_subscribed (LegbaRoom * room, LegbaPeer * subscriber);
/* A `legba.sfu-probe` of the participant came on its subscriber
 * connection: the SFU relays its messages to the local participant. */
void legba_room_switch_probed (LegbaRoom * room, LegbaPeer * subscriber);
/* A subscriber connection is about to report a track of kind: the mesh
 * connection's track of that kind, if any, is reported removed first. */
void legba_room_switch_track (LegbaRoom * room, LegbaPeer * subscriber,
    LegbaTrackKind kind);
/* A `bye` from a participant: TRUE when it closed a kept mesh
 * connection. */
void legba_room_on_signal_received (LegbaSignaller * signaller,
    const char *from, JsonObject * signal, LegbaRoom * self);
gboolean legba_room_switch_bye (LegbaRoom * room, const char *from,
    const char *pc);
/* The participant left the room. */
void legba_room_switch_participant_left (LegbaRoom * room,
    LegbaParticipant * p);
void legba_room_switch_free (LegbaRoomSwitch * sw);

/* ---- Process-wide: the DTLS certificate (legba-room-certificate.c) ---- */

const char *legba_room_certificate_pem (void);
G_GNUC_INTERNAL void legba_room_fix_fingerprints (GstSDPMessage * sdp);

/* ---- Process-wide: the preparation (legba-room-prepare.c) ---- */

guint16 legba_room_next_sctp_association_id (void);
void legba_room_prepare_decoders (void);

G_END_DECLS
