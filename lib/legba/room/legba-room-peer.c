/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * One peer connection of a LegbaRoom: a webrtcbin in a bin of its own,
 * its negotiation (docs/room-protocol.md §3 to §6), trickle ICE with
 * batching and queueing (§4), its data channels and its closing. The
 * knobs of docs/webrtcbin.md it is given are in legba-room-knobs.c, the
 * process-wide DTLS certificate in legba-room-certificate.c, and what
 * every connection of a process shares is prepared in
 * legba-room-prepare.c.
 *
 * Threads: webrtcbin calls back on its own threads (promises, ICE, data
 * channels, connection state). Every such callback only hands a closure
 * holding a peer reference to the room's main context; the closure drops
 * itself when the peer was closed meanwhile (peer->room is NULL).
 */
#include <legba/room/legba-room-private.h>
#include <legba/room/legba-room-data-private.h>
#include <legba/common/legba-json.h>

/* ---- The peer's bin: its elements' errors are the peer's ---- */

/* A GstBin that keeps the errors of its elements (a socket that failed, a
 * webrtcbin that gave up) from reaching the pipeline, where they would
 * stop every participant: each one fails this peer connection only. */
#define LEGBA_TYPE_PEER_BIN (legba_peer_bin_get_type ())
G_DECLARE_FINAL_TYPE (LegbaPeerBin, legba_peer_bin, LEGBA, PEER_BIN, GstBin);

struct _LegbaPeerBin
{
  GstBin parent;
  LegbaPeer *peer;              /* unowned, NULL once closed (object lock) */
};

G_DEFINE_FINAL_TYPE (LegbaPeerBin, legba_peer_bin, GST_TYPE_BIN);

static void element_failed (LegbaPeer * peer, gpointer data);

static void
legba_peer_bin_handle_message (GstBin * bin, GstMessage * message)
{
  LegbaPeerBin *self = LEGBA_PEER_BIN (bin);
  g_autoptr (GError) error = NULL;
  g_autofree char *debug = NULL;
  LegbaPeer *peer;

  if (GST_MESSAGE_TYPE (message) != GST_MESSAGE_ERROR) {
    GST_BIN_CLASS (legba_peer_bin_parent_class)->handle_message (bin, message);
    return;
  }
  gst_message_parse_error (message, &error, &debug);
  GST_WARNING_OBJECT (bin, "error from %s: %s (%s)",
      GST_MESSAGE_SRC_NAME (message), error->message, debug ? debug : "");
  GST_OBJECT_LOCK (self);
  peer = self->peer ? legba_peer_ref (self->peer) : NULL;
  GST_OBJECT_UNLOCK (self);
  if (peer != NULL) {
    legba_peer_invoke (peer, element_failed, g_strdup_printf ("%s: %s",
            GST_MESSAGE_SRC_NAME (message), error->message), g_free);
    legba_peer_unref (peer);
  }
  gst_message_unref (message);
}

static void
legba_peer_bin_class_init (LegbaPeerBinClass * klass)
{
  GST_BIN_CLASS (klass)->handle_message = legba_peer_bin_handle_message;
}

static void
legba_peer_bin_init (LegbaPeerBin * self)
{
}

static void
peer_bin_set_peer (GstBin * bin, LegbaPeer * peer)
{
  GST_OBJECT_LOCK (bin);
  LEGBA_PEER_BIN (bin)->peer = peer;
  GST_OBJECT_UNLOCK (bin);
}

/* ---- Freeing ---- */

/* The last reference was dropped (legba_peer_unref()). */
static void
peer_free (LegbaPeer * peer)
{
  g_assert (peer->room == NULL);
  g_clear_object (&peer->bin);
  g_clear_object (&peer->webrtcbin);
  g_clear_object (&peer->participant);
  gst_clear_object (&peer->sctpenc);
  for (guint i = 0; i < G_N_ELEMENTS (peer->channels); i++)
    g_clear_object (&peer->channels[i]);
  for (guint i = 0; i < G_N_ELEMENTS (peer->transceivers); i++)
    g_clear_object (&peer->transceivers[i]);
  for (guint i = 0; i < G_N_ELEMENTS (peer->mids); i++)
    g_free (peer->mids[i]);
  g_clear_pointer (&peer->answer, gst_sdp_message_free);
  g_clear_pointer (&peer->offer, gst_sdp_message_free);
  g_clear_pointer (&peer->last_stats, gst_structure_free);
  g_ptr_array_unref (peer->remote_candidates);
  g_ptr_array_unref (peer->local_candidates);
  g_ptr_array_unref (peer->promises);
  g_clear_pointer (&peer->pending_offer, gst_webrtc_session_description_free);
  g_free (peer->pc);
  legba_peer_data_free (peer->data);
  g_mutex_clear (&peer->lock);
  g_free (peer);
}

static void progress (LegbaPeer * peer);

/* ---- ICE (§4: trickle, batched every 50 ms) ---- */

static gboolean
flush_candidates (gpointer data)
{
  LegbaPeer *peer = data;
  g_autoptr (JsonObject) signal = json_object_new ();
  JsonArray *list = json_array_new ();

  legba_clear_source (&peer->batch_source);
  if (!peer->local_sent ||
      (peer->local_candidates->len == 0 && !peer->local_candidates_end))
    return G_SOURCE_REMOVE;
  for (guint i = 0; i < peer->local_candidates->len; i++)
    json_array_add_object_element (list,
        json_object_ref (peer->local_candidates->pdata[i]));
  g_ptr_array_set_size (peer->local_candidates, 0);
  json_object_set_string_member (signal, "pc", peer->pc);
  json_object_set_string_member (signal, "type", "candidates");
  json_object_set_array_member (signal, "candidates", list);
  if (peer->local_candidates_end)
    json_object_set_boolean_member (signal, "end", TRUE);
  peer->local_candidates_end = FALSE;
  peer->events->send_signal (peer, signal);
  return G_SOURCE_REMOVE;
}

static void
schedule_flush (LegbaPeer * peer)
{
  if (peer->batch_source == NULL)
    peer->batch_source = legba_room_timeout (peer->room,
        LEGBA_ROOM_CANDIDATE_BATCH_MS, flush_candidates, peer, NULL);
}

typedef struct
{
  guint mline;
  char *candidate;
} LocalCandidate;

static void
local_candidate_free (gpointer data)
{
  LocalCandidate *c = data;

  g_free (c->candidate);
  g_free (c);
}

static void
add_local_candidate (LegbaPeer * peer, gpointer data)
{
  LocalCandidate *c = data;
  JsonObject *object = json_object_new ();

  json_object_set_string_member (object, "candidate", c->candidate);
  if (c->mline < G_N_ELEMENTS (peer->mids) && peer->mids[c->mline] != NULL)
    json_object_set_string_member (object, "sdpMid", peer->mids[c->mline]);
  json_object_set_int_member (object, "sdpMLineIndex", c->mline);
  g_ptr_array_add (peer->local_candidates, object);
  progress (peer);
  schedule_flush (peer);
}

static void
on_ice_candidate (GstElement * webrtcbin, guint mline, const char *candidate,
    LegbaPeer * peer)
{
  LocalCandidate *c;

  if (candidate == NULL || candidate[0] == '\0')
    return;
  c = g_new0 (LocalCandidate, 1);
  c->mline = mline;
  c->candidate = g_strdup (candidate);
  legba_peer_invoke (peer, add_local_candidate, c, local_candidate_free);
}

/* §4: candidates are gathered for up to 50 ms; when gathering is over
 * sooner (host candidates only, as on one machine) they leave at once. */
static void
end_of_candidates (LegbaPeer * peer, gpointer data)
{
  peer->local_candidates_end = TRUE;
  legba_clear_source (&peer->batch_source);
  flush_candidates (peer);
}

static void
on_gathering_state (GstElement * webrtcbin, GParamSpec * pspec,
    LegbaPeer * peer)
{
  GstWebRTCICEGatheringState state;

  g_object_get (webrtcbin, "ice-gathering-state", &state, NULL);
  if (state == GST_WEBRTC_ICE_GATHERING_STATE_COMPLETE)
    legba_peer_invoke (peer, end_of_candidates, NULL, NULL);
}

static void
add_remote_candidate (LegbaPeer * peer, JsonNode * node)
{
  JsonObject *object;
  JsonNode *index;
  const char *candidate;
  gint64 mline;

  if (!JSON_NODE_HOLDS_OBJECT (node)) {
    g_message ("pc %s: dropping a candidate that is not an object", peer->pc);
    return;
  }
  object = json_node_get_object (node);
  candidate = legba_json_object_get_string (object, "candidate");
  index = json_object_get_member (object, "sdpMLineIndex");
  /* with max-bundle every candidate is the first m-line's */
  mline = index && JSON_NODE_HOLDS_VALUE (index) &&
      json_node_get_value_type (index) == G_TYPE_INT64 ?
      json_node_get_int (index) : 0;
  if (candidate != NULL && candidate[0] == '\0')
    return;                     /* an end-of-candidates marker */
  if (candidate == NULL || mline < 0 || mline > 255 ||
      !(g_str_has_prefix (candidate, "candidate:") ||
          g_str_has_prefix (candidate, "a=candidate:"))) {
    g_message ("pc %s: dropping a malformed candidate", peer->pc);
    return;
  }
  g_signal_emit_by_name (peer->webrtcbin, "add-ice-candidate", (guint) mline,
      candidate);
}

void
legba_peer_handle_candidates (LegbaPeer * peer, JsonArray * candidates)
{
  guint n = json_array_get_length (candidates);

  progress (peer);
  for (guint i = 0; i < n; i++) {
    JsonNode *node = json_array_get_element (candidates, i);

    /* §4: kept until the description they belong to is set */
    if (!peer->remote_set)
      g_ptr_array_add (peer->remote_candidates, json_node_copy (node));
    else
      add_remote_candidate (peer, node);
  }
}

static void
apply_remote_candidates (LegbaPeer * peer)
{
  g_autoptr (GPtrArray) pending = g_steal_pointer (&peer->remote_candidates);

  peer->remote_candidates =
      g_ptr_array_new_with_free_func ((GDestroyNotify) json_node_unref);
  for (guint i = 0; i < pending->len; i++)
    add_remote_candidate (peer, pending->pdata[i]);
}

/* ---- Connection state and data channels ---- */

static void
check_connected (LegbaPeer * peer)
{
  if (peer->connected ||
      peer->connection_state != GST_WEBRTC_PEER_CONNECTION_STATE_CONNECTED ||
      (!peer->channel_open[0] && !peer->sfu_subscriber))
    return;
  peer->connected = TRUE;
  legba_clear_source (&peer->connect_timeout);
  GST_INFO ("pc %s: connected to %s in %" G_GINT64_FORMAT " us", peer->pc,
      peer->participant->id, g_get_monotonic_time () - peer->created);
  peer->events->connected (peer);
}

/* The DTLS transport the connection's streams share (max-bundle): under
 * the SCTP transport, or else under the first transceiver */
static GObject *
shared_dtls_transport (LegbaPeer * peer)
{
  g_autoptr (GObject) sctp = NULL;
  g_autoptr (GObject) transceiver = NULL;
  g_autoptr (GObject) receiver = NULL;
  GObject *dtls = NULL;

  g_object_get (peer->webrtcbin, "sctp-transport", &sctp, NULL);
  if (sctp != NULL) {
    g_object_get (sctp, "transport", &dtls, NULL);
    return dtls;
  }
  g_signal_emit_by_name (peer->webrtcbin, "get-transceiver", 0, &transceiver);
  if (transceiver != NULL)
    g_object_get (transceiver, "receiver", &receiver, NULL);
  if (receiver != NULL)
    g_object_get (receiver, "transport", &dtls, NULL);
  return dtls;
}

/* webrtcbin 1.22 folds ICE and DTLS into one failed connection state:
 * which of the two it was, for the error */
static const char *
failure_reason (LegbaPeer * peer)
{
  g_autoptr (GObject) dtls = shared_dtls_transport (peer);
  GstWebRTCICEConnectionState ice;
  GstWebRTCDTLSTransportState state = GST_WEBRTC_DTLS_TRANSPORT_STATE_NEW;

  g_object_get (peer->webrtcbin, "ice-connection-state", &ice, NULL);
  if (ice == GST_WEBRTC_ICE_CONNECTION_STATE_FAILED)
    return "ICE failed: no pair of candidates reached the participant";
  if (dtls != NULL)
    g_object_get (dtls, "state", &state, NULL);
  if (state == GST_WEBRTC_DTLS_TRANSPORT_STATE_FAILED)
    return "DTLS failed: the handshake with the participant failed";
  return "ICE or DTLS failed";
}

static void
connection_state_changed (LegbaPeer * peer, gpointer data)
{
  GstWebRTCPeerConnectionState state = GPOINTER_TO_INT (data);

  GST_DEBUG ("pc %s: connection state %d", peer->pc, state);
  peer->connection_state = state;
  progress (peer);
  if (state == GST_WEBRTC_PEER_CONNECTION_STATE_CONNECTED)
    legba_peer_media_open (peer);
  if (state == GST_WEBRTC_PEER_CONNECTION_STATE_FAILED)
    peer->events->failed (peer, failure_reason (peer));
  else
    check_connected (peer);
}

static void
on_connection_state (GstElement * webrtcbin, GParamSpec * pspec,
    LegbaPeer * peer)
{
  GstWebRTCPeerConnectionState state;

  g_object_get (webrtcbin, "connection-state", &state, NULL);
  legba_peer_invoke (peer, connection_state_changed, GINT_TO_POINTER (state),
      NULL);
}

static void
connect_expired (LegbaPeer * peer, gpointer data)
{
  if (peer->connected || !peer->connect_expired)
    return;
  peer->connect_expired = FALSE;
  peer->events->failed (peer, "not connected in time");
}

/* The deadline passed on the room's context, which may not have seen
 * yet what webrtcbin's threads queued for it before (a busy context runs
 * late): the connection fails only if none of that was a step, which the
 * check, queued behind it, knows. */
static gboolean
connect_timed_out (gpointer data)
{
  LegbaPeer *peer = data;

  legba_clear_source (&peer->connect_timeout);
  peer->connect_expired = TRUE;
  legba_peer_invoke (peer, connect_expired, NULL, NULL);
  return G_SOURCE_REMOVE;
}

/* A step towards connected: the deadline starts again. A loaded machine
 * takes long between steps, a dead connection takes no step. */
static void
progress (LegbaPeer * peer)
{
  if (peer->connected ||
      (peer->connect_timeout == NULL && !peer->connect_expired))
    return;
  peer->connect_expired = FALSE;
  legba_clear_source (&peer->connect_timeout);
  peer->connect_timeout = legba_room_timeout (peer->room,
      LEGBA_ROOM_PEER_CONNECT_TIMEOUT_MS, connect_timed_out, peer, NULL);
}

static int
channel_index (LegbaPeer * peer, GstWebRTCDataChannel * channel)
{
  g_autofree char *label = NULL;

  g_object_get (channel, "label", &label, NULL);
  if (g_strcmp0 (label, LEGBA_ROOM_CHANNEL_LOSSY) == 0)
    return 1;
  if (g_strcmp0 (label, LEGBA_ROOM_CHANNEL_RELIABLE) == 0 ||
      peer->sfu_subscriber)
    return 0;
  return -1;
}

/* Channel i of the peer is open: the reliable one may complete the
 * connection, the lossy one takes what waited for it. */
static void
mark_channel_open (LegbaPeer * peer, int i)
{
  peer->channel_open[i] = TRUE;
  check_connected (peer);
  if (i == 0 && peer->events->reliable_open != NULL)
    peer->events->reliable_open (peer);
  if (i == 1 && peer->connected)
    peer->events->lossy_open (peer);
}

static void
channel_opened (LegbaPeer * peer, gpointer data)
{
  GstWebRTCDataChannel *channel = data;
  int i = channel_index (peer, channel);

  if (i < 0 || peer->channels[i] != channel)
    return;
  GST_DEBUG ("pc %s: data channel %d open", peer->pc, i);
  progress (peer);
  mark_channel_open (peer, i);
}

static void
on_channel_open (GstWebRTCDataChannel * channel, LegbaPeer * peer)
{
  legba_peer_invoke (peer, channel_opened, g_object_ref (channel),
      g_object_unref);
}

static void
watch_channel (LegbaPeer * peer, GstWebRTCDataChannel * channel)
{
  int i = channel_index (peer, channel);
  GstWebRTCDataChannelState state;

  if (i < 0) {
    GST_INFO ("pc %s: ignoring a data channel of another protocol", peer->pc);
    return;
  }
  if (peer->channels[i] != NULL) {
    GST_INFO ("pc %s: ignoring a second data channel %d", peer->pc, i);
    return;
  }
  peer->channels[i] = g_object_ref (channel);
  g_signal_connect_data (channel, "on-open", G_CALLBACK (on_channel_open),
      legba_peer_ref (peer), legba_peer_closure_unref, 0);
  g_object_get (channel, "ready-state", &state, NULL);
  if (state == GST_WEBRTC_DATA_CHANNEL_STATE_OPEN)
    mark_channel_open (peer, i);
}

static void
remote_channel (LegbaPeer * peer, gpointer data)
{
  watch_channel (peer, data);
}

static void
on_data_channel (GstElement * webrtcbin, GstWebRTCDataChannel * channel,
    LegbaPeer * peer)
{
  legba_peer_data_watch_channel (peer, channel);
  legba_peer_invoke (peer, remote_channel, g_object_ref (channel),
      g_object_unref);
}

/* §6: the offerer creates the reliable channel before its offer. */
static gboolean
create_channels (LegbaPeer * peer)
{
  GstWebRTCDataChannel *reliable = NULL;

  g_signal_emit_by_name (peer->webrtcbin, "create-data-channel",
      LEGBA_ROOM_CHANNEL_RELIABLE, NULL, &reliable);
  if (reliable != NULL) {
    legba_peer_data_watch_channel (peer, reliable);
    watch_channel (peer, reliable);
  }
  g_clear_object (&reliable);
  return peer->channels[0] != NULL;
}

/* §6: the lossy channel is made by the side that first has a lossy
 * message for the other, once the connection is up, unless the other
 * side made one already. A channel each way when both sides make one at
 * once: each side sends on the first it has, and receives on both. Its
 * webrtcbin gives it a stream id of its side's parity (RFC 8832), so two
 * made at once never collide. */
void
legba_peer_open_lossy (LegbaPeer * peer)
{
  GstWebRTCDataChannel *lossy = NULL;
  g_autoptr (GstStructure) options =
      gst_structure_new ("options", "ordered", G_TYPE_BOOLEAN, FALSE,
      "max-retransmits", G_TYPE_INT, 0, NULL);

  if (peer->channels[1] != NULL || !peer->connected)
    return;
  GST_DEBUG ("pc %s: opening the lossy channel", peer->pc);
  g_signal_emit_by_name (peer->webrtcbin, "create-data-channel",
      LEGBA_ROOM_CHANNEL_LOSSY, options, &lossy);
  if (lossy == NULL) {
    GST_WARNING ("pc %s: webrtcbin made no lossy channel", peer->pc);
    return;
  }
  legba_peer_data_watch_channel (peer, lossy);
  watch_channel (peer, lossy);
  g_object_unref (lossy);
}

/* ---- Negotiation (§3, §5) ---- */

/* A promise handed to webrtcbin is kept in peer->promises until its
 * change function runs (the reply), or until the peer is closed: then the
 * ones not answered yet are interrupted (GstPromise must not be freed
 * pending). Interrupted, not expired: webrtcbin may still answer one from
 * its own thread while it stops (an offer asked for just before a mesh
 * connection closed for the SFU), and gst_promise_reply() on an expired
 * promise is a critical, where an interrupted one takes the reply
 * silently. */
static void
emit_with_promise (LegbaPeer * peer, const char *action, gpointer argument,
    GstPromise * promise)
{
  g_mutex_lock (&peer->lock);
  g_ptr_array_add (peer->promises, promise);
  g_mutex_unlock (&peer->lock);
  g_signal_emit_by_name (peer->webrtcbin, action, argument, promise);
}

/* The destroy notify of a promise's peer reference: released when the
 * promise is freed, answered or interrupted. */
static void
promise_peer_unref (gpointer peer)
{
  legba_peer_unref (peer);
}

/* Last thing of a change function, on any thread: drops the peer's
 * reference to a promise that has been answered. */
static void
promise_done (LegbaPeer * peer, GstPromise * promise)
{
  gboolean kept;

  g_mutex_lock (&peer->lock);
  kept = g_ptr_array_remove_fast (peer->promises, promise);
  g_mutex_unlock (&peer->lock);
  if (kept)
    gst_promise_unref (promise);
}

static void
interrupt_promises (LegbaPeer * peer)
{
  g_autoptr (GPtrArray) pending = NULL;

  g_mutex_lock (&peer->lock);
  pending = g_steal_pointer (&peer->promises);
  peer->promises = g_ptr_array_new ();
  g_mutex_unlock (&peer->lock);
  for (guint i = 0; i < pending->len; i++) {
    gst_promise_interrupt (pending->pdata[i]);
    gst_promise_unref (pending->pdata[i]);
  }
}

static void
fail_peer (LegbaPeer * peer, const char *why)
{
  peer->events->failed (peer, why);
}

static void
element_failed (LegbaPeer * peer, gpointer data)
{
  fail_peer (peer, data);
}

static char *
promise_error (GstPromise * promise)
{
  const GstStructure *reply;
  g_autoptr (GError) error = NULL;

  if (gst_promise_wait (promise) != GST_PROMISE_RESULT_REPLIED)
    return g_strdup ("webrtcbin did not answer");
  reply = gst_promise_get_reply (promise);
  if (reply != NULL && gst_structure_has_field (reply, "error")) {
    gst_structure_get (reply, "error", G_TYPE_ERROR, &error, NULL);
    return g_strdup (error ? error->message : "webrtcbin failed");
  }
  return NULL;
}

static void
description_applied (LegbaPeer * peer, gpointer data)
{
  const char *error = data;
  g_autoptr (GError) link_error = NULL;

  if (error != NULL) {
    fail_peer (peer, error);
    return;
  }
  progress (peer);
  if (++peer->applied < 2 || peer->negotiated)
    return;
  peer->negotiated = TRUE;
  GST_DEBUG ("pc %s: negotiated", peer->pc);
  if (!legba_peer_media_link_send (peer, &link_error))
    peer->events->error (peer, link_error);
  /* the copies served the negotiation; webrtcbin keeps its descriptions */
  g_clear_pointer (&peer->answer, gst_sdp_message_free);
  g_clear_pointer (&peer->offer, gst_sdp_message_free);
}

static void
on_applied (GstPromise * promise, gpointer data)
{
  LegbaPeer *peer = data;

  legba_peer_invoke (peer, description_applied, promise_error (promise),
      g_free);
  promise_done (peer, promise);
}

static GstPromise *
applied_promise (LegbaPeer * peer)
{
  return gst_promise_new_with_change_func (on_applied, legba_peer_ref (peer),
      promise_peer_unref);
}

static void
remember_mids (LegbaPeer * peer, const GstSDPMessage * sdp)
{
  guint n = MIN (gst_sdp_message_medias_len (sdp), G_N_ELEMENTS (peer->mids));

  for (guint i = 0; i < n; i++) {
    const GstSDPMedia *media = gst_sdp_message_get_media (sdp, i);

    g_free (peer->mids[i]);
    peer->mids[i] = g_strdup (gst_sdp_media_get_attribute_val (media, "mid"));
  }
}

static void
description_created (LegbaPeer * peer, gpointer data)
{
  GstWebRTCSessionDescription *desc = data;
  gboolean offer = peer->role == LEGBA_PEER_OFFERER;
  g_autoptr (JsonObject) signal = json_object_new ();
  g_autofree char *text = NULL;

  if (desc == NULL) {
    fail_peer (peer, offer ? "could not create an offer" :
        "could not answer the offer");
    return;
  }
  progress (peer);
  legba_room_fix_fingerprints (desc->sdp);
  if (!offer && peer->offer != NULL)
    legba_room_media_complete_answer (peer->offer, desc->sdp);
  remember_mids (peer, desc->sdp);
  if (!offer)
    gst_sdp_message_copy (desc->sdp, &peer->answer);
  emit_with_promise (peer, "set-local-description", desc,
      applied_promise (peer));
  text = gst_sdp_message_as_text (desc->sdp);
  json_object_set_string_member (signal, "pc", peer->pc);
  json_object_set_string_member (signal, "type", offer ? "offer" : "answer");
  json_object_set_string_member (signal, "sdp", text);
  GST_DEBUG ("pc %s: sending the %s", peer->pc, offer ? "offer" : "answer");
  peer->events->send_signal (peer, signal);
  /* §4: the description leaves before any of its candidates */
  peer->local_sent = TRUE;
  if (peer->local_candidates->len > 0 || peer->local_candidates_end)
    schedule_flush (peer);
}

static void
on_description_created (GstPromise * promise, gpointer data)
{
  LegbaPeer *peer = data;
  GstWebRTCSessionDescription *desc = NULL;
  const char *field = peer->role == LEGBA_PEER_OFFERER ? "offer" : "answer";

  if (gst_promise_wait (promise) == GST_PROMISE_RESULT_REPLIED &&
      gst_promise_get_reply (promise) != NULL)
    gst_structure_get (gst_promise_get_reply (promise), field,
        GST_TYPE_WEBRTC_SESSION_DESCRIPTION, &desc, NULL);
  legba_peer_invoke (peer, description_created, desc,
      (GDestroyNotify) gst_webrtc_session_description_free);
  promise_done (peer, promise);
}

static GstPromise *
created_promise (LegbaPeer * peer)
{
  return gst_promise_new_with_change_func (on_description_created,
      legba_peer_ref (peer), promise_peer_unref);
}

/* §5: exactly one video and one audio transceiver, sendrecv for a kind
 * this participant publishes, recvonly otherwise; NACK/RTX on video. */
static void
add_transceivers (LegbaPeer * peer)
{
  for (LegbaTrackKind kind = 0; kind < 2; kind++) {
    g_autoptr (GstCaps) caps = legba_room_media_codec_preferences (peer->room,
        kind, peer->role, peer->sfu_subscriber);
    GstWebRTCRTPTransceiverDirection direction = peer->room->tracks[kind] &&
        !peer->sfu_subscriber ? GST_WEBRTC_RTP_TRANSCEIVER_DIRECTION_SENDRECV :
        GST_WEBRTC_RTP_TRANSCEIVER_DIRECTION_RECVONLY;
    GstWebRTCRTPTransceiver *transceiver = NULL;

    /* The SSRC we send under, announced in the description: webrtcbin
     * 1.22 knows none before the payloader's caps reach it (after
     * negotiation), and then writes an RTX group for SSRC 0 and gives the
     * track's msid to the RTX stream; a browser decodes the stream sent
     * under an unannounced SSRC but hands its frames to no track. */
    if (direction == GST_WEBRTC_RTP_TRANSCEIVER_DIRECTION_SENDRECV) {
      peer->media[kind].ssrc = (guint32) g_random_int_range (1, G_MAXINT32);
      caps = gst_caps_make_writable (caps);
      for (guint i = 0; i < gst_caps_get_size (caps); i++)
        gst_structure_set (gst_caps_get_structure (caps, i), "ssrc",
            G_TYPE_UINT, peer->media[kind].ssrc, NULL);
    }
    g_signal_emit_by_name (peer->webrtcbin, "add-transceiver", direction, caps,
        &transceiver);
    if (transceiver != NULL && kind == LEGBA_TRACK_KIND_VIDEO)
      g_object_set (transceiver, "do-nack", TRUE, NULL);
    if (transceiver != NULL && kind == LEGBA_TRACK_KIND_VIDEO &&
        peer->room->video_fec_percentage > 0)
      g_object_set (transceiver, "fec-type",
          GST_WEBRTC_FEC_TYPE_ULP_RED, "fec-percentage",
          peer->room->video_fec_percentage, NULL);
    peer->transceivers[kind] = g_steal_pointer (&transceiver);
  }
}

static void
start_offer (LegbaPeer * peer)
{
  add_transceivers (peer);
  if (!create_channels (peer)) {
    fail_peer (peer, "could not create the data channels (is the sctp "
        "plugin installed?)");
    return;
  }
  /* docs/webrtcbin.md, "Negotiation and connection state":
   * on-negotiation-needed may fire before the session is fully
   * described; the offer is made here, once it is. */
  emit_with_promise (peer, "create-offer", NULL, created_promise (peer));
}

static GstWebRTCSessionDescription *
parse_description (LegbaPeer * peer, GstWebRTCSDPType type, const char *sdp)
{
  GstSDPMessage *message = NULL;

  if (gst_sdp_message_new_from_text (sdp, &message) != GST_SDP_OK ||
      gst_sdp_message_medias_len (message) == 0) {
    g_message ("pc %s: dropping an unreadable %s", peer->pc,
        gst_webrtc_sdp_type_to_string (type));
    g_clear_pointer (&message, gst_sdp_message_free);
    return NULL;
  }
  return gst_webrtc_session_description_new (type, message);
}

/* §5: an m-line none of our transceivers took (a codec we do not
 * publish, a second track of a kind) is only received. */
static void
receive_only_the_rest (LegbaPeer * peer)
{
  GArray *transceivers = NULL;

  g_signal_emit_by_name (peer->webrtcbin, "get-transceivers", &transceivers);
  for (guint i = 0; transceivers != NULL && i < transceivers->len; i++) {
    GstWebRTCRTPTransceiver *t = g_array_index (transceivers,
        GstWebRTCRTPTransceiver *, i);

    if (t != peer->transceivers[0] && t != peer->transceivers[1])
      g_object_set (t, "direction",
          GST_WEBRTC_RTP_TRANSCEIVER_DIRECTION_RECVONLY, NULL);
  }
  g_clear_pointer (&transceivers, g_array_unref);
}

static void
offer_applied (LegbaPeer * peer, gpointer data)
{
  if (data != NULL) {
    fail_peer (peer, data);
    return;
  }
  peer->applied++;
  progress (peer);
  receive_only_the_rest (peer);
  /* Janus relays a publisher's messages to a subscriber once a data
   * channel of the subscriber's is open (its VideoRoom's data_ready):
   * the subscriber opens one, as janus.js does */
  if (peer->sfu_subscriber && !create_channels (peer)) {
    fail_peer (peer, "could not create the data channels (is the sctp "
        "plugin installed?)");
    return;
  }
  emit_with_promise (peer, "create-answer", NULL, created_promise (peer));
}

static void
on_offer_applied (GstPromise * promise, gpointer data)
{
  LegbaPeer *peer = data;

  legba_peer_invoke (peer, offer_applied, promise_error (promise), g_free);
  promise_done (peer, promise);
}

static void
answer_offer (LegbaPeer * peer)
{
  GstWebRTCSessionDescription *offer = g_steal_pointer (&peer->pending_offer);

  add_transceivers (peer);
  g_clear_pointer (&peer->offer, gst_sdp_message_free);
  gst_sdp_message_copy (offer->sdp, &peer->offer);
  emit_with_promise (peer, "set-remote-description", offer,
      gst_promise_new_with_change_func (on_offer_applied,
          legba_peer_ref (peer), promise_peer_unref));
  gst_webrtc_session_description_free (offer);
  /* webrtcbin applies operations in order: candidates may follow now */
  peer->remote_set = TRUE;
  apply_remote_candidates (peer);
}

void
legba_peer_start (LegbaPeer * peer)
{
  g_return_if_fail (peer->role == LEGBA_PEER_OFFERER);

  if (!legba_room_media_ready (peer->room)) {
    GST_DEBUG ("pc %s: waiting for the local tracks' caps", peer->pc);
    peer->waiting_media = TRUE;
    return;
  }
  start_offer (peer);
}

void
legba_peer_handle_offer (LegbaPeer * peer, const char *sdp)
{
  g_return_if_fail (peer->role == LEGBA_PEER_ANSWERER);

  peer->pending_offer = parse_description (peer, GST_WEBRTC_SDP_TYPE_OFFER,
      sdp);
  if (peer->pending_offer == NULL) {
    fail_peer (peer, "unreadable offer");
    return;
  }
  if (legba_room_media_receives (peer->pending_offer->sdp))
    legba_room_prepare_decoders ();
  if (!legba_room_media_ready (peer->room)) {
    GST_DEBUG ("pc %s: waiting for the local tracks' caps", peer->pc);
    peer->waiting_media = TRUE;
    return;
  }
  answer_offer (peer);
}

void
legba_peer_media_ready (LegbaPeer * peer)
{
  if (!peer->waiting_media)
    return;
  peer->waiting_media = FALSE;
  if (peer->role == LEGBA_PEER_OFFERER)
    start_offer (peer);
  else
    answer_offer (peer);
}

/* Returns whether the answer was taken. */
gboolean
legba_peer_handle_answer (LegbaPeer * peer, const char *sdp)
{
  GstWebRTCSessionDescription *answer;

  if (peer->role != LEGBA_PEER_OFFERER || peer->remote_set || !peer->local_sent) {
    g_message ("pc %s: dropping an answer that was not asked for", peer->pc);
    return FALSE;
  }
  answer = parse_description (peer, GST_WEBRTC_SDP_TYPE_ANSWER, sdp);
  if (answer == NULL)
    return FALSE;
  gst_sdp_message_copy (answer->sdp, &peer->answer);
  if (legba_room_media_receives (answer->sdp))
    legba_room_prepare_decoders ();
  emit_with_promise (peer, "set-remote-description", answer,
      applied_promise (peer));
  gst_webrtc_session_description_free (answer);
  peer->remote_set = TRUE;
  apply_remote_candidates (peer);
  return TRUE;
}


static void
connect_webrtcbin (LegbaPeer * peer)
{
  struct
  {
    const char *name;
    GCallback callback;
  } handlers[] = {
    {"on-ice-candidate", G_CALLBACK (on_ice_candidate)},
    {"notify::ice-gathering-state", G_CALLBACK (on_gathering_state)},
    {"notify::connection-state", G_CALLBACK (on_connection_state)},
    {"on-data-channel", G_CALLBACK (on_data_channel)},
    {"pad-added", G_CALLBACK (legba_peer_media_on_pad_added)},
  };

  for (guint i = 0; i < G_N_ELEMENTS (handlers); i++)
    g_signal_connect_data (peer->webrtcbin, handlers[i].name,
        handlers[i].callback, legba_peer_ref (peer),
        legba_peer_closure_unref, 0);
  g_signal_connect_data (peer->bin, "deep-element-added",
      G_CALLBACK (legba_peer_on_deep_element_added), legba_peer_ref (peer),
      legba_peer_closure_unref, 0);
}

LegbaPeer *
legba_peer_new (LegbaRoom * room, LegbaParticipant * participant,
    const char *pc, LegbaPeerRole role, const LegbaPeerEvents * events,
    GError ** error)
{
  return legba_peer_new_full (room, participant, pc, role, 0, events, error);
}

LegbaPeer *
legba_peer_new_full (LegbaRoom * room, LegbaParticipant * participant,
    const char *pc, LegbaPeerRole role, LegbaPeerFlags flags,
    const LegbaPeerEvents * events, GError ** error)
{
  LegbaPeer *peer;
  g_autofree char *name = NULL;

  if (!legba_peer_check_plugins (error))
    return NULL;
  peer = g_new0 (LegbaPeer, 1);
  g_atomic_ref_count_init (&peer->ref);
  g_mutex_init (&peer->lock);
  peer->room = room;
  peer->participant = g_object_ref (participant);
  peer->pc = g_strdup (pc);
  peer->role = role;
  peer->sfu = (flags & LEGBA_PEER_SFU) != 0;
  peer->sfu_subscriber = peer->sfu && role == LEGBA_PEER_ANSWERER;
  peer->events = events;
  peer->free = peer_free;
  peer->created = g_get_monotonic_time ();
  peer->sctp_id = legba_room_next_sctp_association_id ();
  peer->remote_candidates =
      g_ptr_array_new_with_free_func ((GDestroyNotify) json_node_unref);
  peer->local_candidates =
      g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  peer->promises = g_ptr_array_new ();

  name = g_strdup_printf ("legba-peer-%s", pc);
  peer->bin = GST_BIN (gst_object_ref_sink (g_object_new (LEGBA_TYPE_PEER_BIN,
              "name", name, NULL)));
  peer_bin_set_peer (peer->bin, peer);
  peer->webrtcbin = gst_object_ref_sink (gst_element_factory_make ("webrtcbin",
          "webrtcbin"));
  legba_peer_configure_webrtcbin (peer);
  connect_webrtcbin (peer);
  gst_bin_add (peer->bin, peer->webrtcbin);
  gst_bin_add (room->bin, GST_ELEMENT (peer->bin));
  gst_element_sync_state_with_parent (GST_ELEMENT (peer->bin));
  /* negotiation needs webrtcbin running, media only the parent's PLAYING */
  if (GST_STATE_TARGET (peer->bin) < GST_STATE_READY)
    gst_element_set_state (GST_ELEMENT (peer->bin), GST_STATE_READY);
  peer->connect_timeout = legba_room_timeout (room,
      LEGBA_ROOM_PEER_CONNECT_TIMEOUT_MS, connect_timed_out, peer, NULL);
  return peer;
}

static void
unlink_sctp_pad (const GValue * item, gpointer data)
{
  GstPad *pad = g_value_get_object (item);
  GstPad *peer_pad = gst_pad_get_peer (pad);
  GstElement *source;

  if (peer_pad == NULL)
    return;
  source = gst_pad_get_parent_element (peer_pad);
  if (source != NULL) {
    gst_element_set_locked_state (source, TRUE);
    gst_element_set_state (source, GST_STATE_NULL);
    gst_object_unref (source);
  }
  gst_pad_unlink (peer_pad, pad);
  gst_object_unref (peer_pad);
}

/* webrtcbin 1.22: a data channel that closes (the remote reset its
 * stream, or it failed) releases its sctpenc pad from a task on
 * webrtcbin's thread, while sctpenc, going down to READY, removes the same
 * pads on ours: whichever comes second releases a pad that is no longer
 * sctpenc's. So before the peer's bin stops, the channels are unlinked
 * from sctpenc (a closing channel then finds nothing to release), and a
 * task already past that point is waited for: webrtcbin runs its tasks in
 * order, so the reply to a request queued now comes after it.
 * Each channel's source is stopped before its pad is unlinked: a source
 * still running would push into the unlinked pad and post an error,
 * which the channel's bin in 1.22 takes without ever freeing it (the
 * message, and with it the source, would outlive the pipeline). */
static void
detach_data_channels (LegbaPeer * peer)
{
  GstElement *sctpenc;
  GstIterator *it;
  GstPromise *promise;

  g_mutex_lock (&peer->lock);
  sctpenc = peer->sctpenc ? gst_object_ref (peer->sctpenc) : NULL;
  g_mutex_unlock (&peer->lock);
  if (sctpenc == NULL)
    return;
  it = gst_element_iterate_sink_pads (sctpenc);
  while (gst_iterator_foreach (it, unlink_sctp_pad, NULL) ==
      GST_ITERATOR_RESYNC)
    gst_iterator_resync (it);
  gst_iterator_free (it);
  gst_object_unref (sctpenc);
  /* a closed webrtcbin replies at once */
  promise = gst_promise_new ();
  g_signal_emit_by_name (peer->webrtcbin, "get-stats", NULL, promise);
  gst_promise_wait (promise);
  gst_promise_unref (promise);
}

void
legba_peer_close (LegbaPeer * peer)
{
  LegbaRoom *room = peer->room;

  if (room == NULL)
    return;
  legba_clear_source (&peer->batch_source);
  legba_clear_source (&peer->connect_timeout);
  peer->connect_expired = FALSE;
  g_mutex_lock (&peer->lock);
  peer->closing = TRUE;
  g_mutex_unlock (&peer->lock);
  legba_peer_data_close (peer);
  legba_peer_media_unlink (peer);
  legba_peer_congestion_close (peer);
  g_signal_handlers_disconnect_by_data (peer->webrtcbin, peer);
  g_signal_handlers_disconnect_by_data (peer->bin, peer);
  peer_bin_set_peer (peer->bin, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (peer->channels); i++)
    if (peer->channels[i] != NULL)
      g_signal_handlers_disconnect_by_data (peer->channels[i], peer);
  detach_data_channels (peer);
  legba_peer_release_turn_allocations (peer);
  gst_element_set_locked_state (GST_ELEMENT (peer->bin), TRUE);
  gst_element_set_state (GST_ELEMENT (peer->bin), GST_STATE_NULL);
  legba_peer_data_closed (peer);
  interrupt_promises (peer);
  if (room->bin != NULL)
    gst_bin_remove (room->bin, GST_ELEMENT (peer->bin));
  peer->room = NULL;
  GST_DEBUG ("pc %s: closed", peer->pc);
}

gboolean
legba_peer_is_live (LegbaPeer * peer)
{
  gint64 last;

  g_mutex_lock (&peer->lock);
  last = peer->last_rx;
  g_mutex_unlock (&peer->lock);
  return peer->connected && last > 0 &&
      g_get_monotonic_time () - last < LEGBA_ROOM_LIVENESS_MS * 1000;
}

/* ---- Stats ---- */

static void
stats_ready (LegbaPeer * peer, gpointer data)
{
  GstStructure *summary = legba_peer_media_summarize (peer, data);

  legba_peer_data_add_stats (peer, summary);
  legba_peer_playout_add_stats (peer, summary);
  peer->events->stats (peer, summary);
}

static void
on_stats (GstPromise * promise, gpointer data)
{
  LegbaPeer *peer = data;
  const GstStructure *reply = NULL;

  if (gst_promise_wait (promise) == GST_PROMISE_RESULT_REPLIED)
    reply = gst_promise_get_reply (promise);
  if (reply != NULL)
    legba_peer_invoke (peer, stats_ready, gst_structure_copy (reply),
        (GDestroyNotify) gst_structure_free);
  promise_done (peer, promise);
}

void
legba_peer_update_stats (LegbaPeer * peer)
{
  GstPromise *promise;

  /* nothing to count before, and webrtcbin 1.22 is safest left alone
   * while it negotiates */
  if (!peer->connected)
    return;
  /* until an RTP stream flows either way webrtcbin has nothing of the
   * participant's to count, and its get-stats is not cheap: in a
   * process of a thousand data-only rooms the refreshes alone would
   * take much of the CPU */
  if (!peer->rtp_seen)
    peer->rtp_seen = legba_peer_media_has_streams (peer);
  if (!peer->rtp_seen) {
    GstStructure *none = gst_structure_new_empty ("webrtc-stats");

    stats_ready (peer, none);
    gst_structure_free (none);
    return;
  }
  promise = gst_promise_new_with_change_func (on_stats, legba_peer_ref (peer),
      promise_peer_unref);
  emit_with_promise (peer, "get-stats", NULL, promise);
}
