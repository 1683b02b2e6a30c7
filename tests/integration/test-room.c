/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaRoom through legba-server (in-process, 127.0.0.1, port 0): GStreamer
 * participants in one process that decode and count each other's video
 * and audio; joining and leaving mid-call; a full room; chunked offers;
 * the server restarted mid-call; a peer whose sending stalled; a join
 * while one peer's sending is stuck; what a receiver sends back to a
 * sender (transport-wide feedback, NACKs for lost packets, PLIs).
 */
#include "room-test.h"
#include "legba-test.h"

#include <glib/gstdio.h>
#include <signal.h>

#define GST_USE_UNSTABLE_API
#include <gst/video/video.h>
#include <gst/webrtc/webrtc.h>

/* frames each participant must decode of each other's tracks */
#define FRAMES 10

static GstElement *
first_webrtcbin (Participant * p)
{
  for (GList * l = GST_BIN_CHILDREN (p->pipeline); l; l = l->next)
    if (g_str_has_prefix (GST_OBJECT_NAME (l->data), "legba-peer-"))
      return gst_bin_get_by_name (GST_BIN (l->data), "webrtcbin");
  return NULL;
}

static gboolean
stats_show_media (Participant * p, Participant * other)
{
  g_autoptr (GstStructure) stats =
      legba_participant_get_stats (participant_find (p, other));
  guint64 frames = 0, bytes = 0, packets = 0, bitrate = 0;

  if (stats == NULL)
    return FALSE;
  gst_structure_get (stats, "video-frames-received", G_TYPE_UINT64, &frames,
      "bytes-received", G_TYPE_UINT64, &bytes, "packets-received",
      G_TYPE_UINT64, &packets, "bitrate-in", G_TYPE_UINT64, &bitrate, NULL);
  return frames > 0 && bytes > 0 && packets > 0 && bitrate > 0;
}

/* The sender's video-steered for other: whether p's video encoder takes
 * the room's target (docs/congestion-control.md, Pacing). */
static gboolean
video_steered (Participant * p, Participant * other)
{
  g_autoptr (GstStructure) stats =
      legba_participant_get_stats (participant_find (p, other));
  gboolean steered = TRUE;

  g_assert_nonnull (stats);
  g_assert_true (gst_structure_get_boolean (stats, "video-steered", &steered));
  return steered;
}

/* The jitter buffer latency of p's streams from other, 0 until known
 * (LegbaRoom:max-latency). */
static guint
jitter_buffer_latency (Participant * p, Participant * other)
{
  g_autoptr (GstStructure) stats =
      legba_participant_get_stats (participant_find (p, other));
  guint latency = 0;

  if (stats != NULL)
    gst_structure_get_uint (stats, "jitter-buffer-latency", &latency);
  return latency;
}

static GstElement *
find_by_factory (GstElement * bin, const char *factory_name)
{
  g_autoptr (GPtrArray) found = elements_by_factory (bin, factory_name);

  return found->len > 0 ? gst_object_ref (found->pdata[0]) : NULL;
}

/* "sha-256 AB:CD:…" of the first certificate in a PEM */
static char *
pem_fingerprint (const char *pem)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GTlsCertificate) cert = g_tls_certificate_new_from_pem (pem, -1,
      &error);
  g_autoptr (GByteArray) der = NULL;
  g_autofree char *hex = NULL;
  GString *out = g_string_new ("sha-256 ");

  g_assert_no_error (error);
  g_object_get (cert, "certificate", &der, NULL);
  hex = g_compute_checksum_for_data (G_CHECKSUM_SHA256, der->data, der->len);
  for (guint i = 0; hex[i] != '\0'; i += 2)
    g_string_append_printf (out, "%s%c%c", i ? ":" : "",
        g_ascii_toupper (hex[i]), g_ascii_toupper (hex[i + 1]));
  return g_string_free (out, FALSE);
}

/* What an RFC 8122 endpoint (a browser) checks: the a=fingerprint of p's
 * description is the hash of the certificate its DTLS handshake presented
 * to `other`; and an answer's H.264 carries a constrained-baseline
 * profile-level-id. */
static void
assert_description (Participant * p, Participant * other, const char *field)
{
  g_autoptr (GstElement) webrtcbin = first_webrtcbin (p);
  g_autoptr (GstElement) other_webrtcbin = first_webrtcbin (other);
  g_autoptr (GstElement) dtls = find_by_factory (other_webrtcbin,
      "dtlssrtpdec");
  GstWebRTCSessionDescription *desc = NULL;
  g_autofree char *peer_pem = NULL;
  g_autofree char *presented = NULL;
  guint fingerprints = 0, h264 = 0;

  g_object_get (webrtcbin, field, &desc, NULL);
  g_object_get (dtls, "peer-pem", &peer_pem, NULL);
  g_assert_nonnull (peer_pem);
  presented = pem_fingerprint (peer_pem);
  for (guint m = 0; m < gst_sdp_message_medias_len (desc->sdp); m++) {
    const GstSDPMedia *media = gst_sdp_message_get_media (desc->sdp, m);

    for (guint i = 0; i < gst_sdp_media_attributes_len (media); i++) {
      const GstSDPAttribute *attr = gst_sdp_media_get_attribute (media, i);

      if (strcmp (attr->key, "fingerprint") == 0) {
        g_assert_cmpstr (attr->value, ==, presented);
        fingerprints++;
      } else if (strcmp (attr->key, "fmtp") == 0 &&
          strstr (attr->value, "packetization-mode=1")) {
        g_assert_nonnull (strstr (attr->value, "profile-level-id=42e0"));
        h264++;
      }
    }
  }
  g_assert_cmpuint (fingerprints, >, 0);
  g_assert_cmpuint (h264, >, 0);
  gst_webrtc_session_description_free (desc);
}

/* The knobs of docs/webrtcbin.md reach each webrtcbin and its ICE agent. */
static void
assert_knobs (Participant * p, guint latency)
{
  g_autoptr (GstElement) webrtcbin = first_webrtcbin (p);
  g_autoptr (GObject) ice = NULL;
  g_autoptr (GObject) agent = NULL;
  guint webrtc_latency, pacing;
  gboolean upnp;
  GstWebRTCBundlePolicy bundle;

  g_assert_nonnull (webrtcbin);
  g_object_get (webrtcbin, "latency", &webrtc_latency, "bundle-policy",
      &bundle, "ice-agent", &ice, NULL);
  g_assert_cmpuint (webrtc_latency, ==, latency);
  g_assert_cmpint (bundle, ==, GST_WEBRTC_BUNDLE_POLICY_MAX_BUNDLE);
  g_object_get (ice, "agent", &agent, NULL);
  g_object_get (agent, "stun-pacing-timer", &pacing, "upnp", &upnp, NULL);
  g_assert_cmpuint (pacing, ==, 1);
  g_assert_false (upnp);
}

/* Each webrtcbin receives its streams without a ULPFEC decoder, and its
 * rtpstorage keeps no packets for one: a room negotiates no FEC, and
 * rtpbin 1.22 records such decoders without a lock (legba-room-knobs.c,
 * refuse_fec). Called once media has been decoded, so the streams went
 * through rtpbin's receive path. */
static void
assert_no_fec (Participant * p)
{
  g_autoptr (GPtrArray) decoders = elements_by_factory (p->pipeline,
      "rtpulpfecdec");
  g_autoptr (GPtrArray) jitterbuffers = elements_by_factory (p->pipeline,
      "rtpjitterbuffer");
  g_autoptr (GPtrArray) storages = elements_by_factory (p->pipeline,
      "rtpstorage");

  g_assert_cmpuint (decoders->len, ==, 0);
  g_assert_cmpuint (jitterbuffers->len, >, 0);
  g_assert_cmpuint (storages->len, >, 0);
  for (guint i = 0; i < storages->len; i++) {
    guint64 kept = G_MAXUINT64;

    g_object_get (storages->pdata[i], "size-time", &kept, NULL);
    g_assert_cmpuint (kept, ==, 0);
  }
}

/* The id of the transport-wide-cc a=extmap of desc's video, or 0 */
static guint
video_twcc_id (GstWebRTCSessionDescription * desc)
{
  for (guint m = 0; m < gst_sdp_message_medias_len (desc->sdp); m++) {
    const GstSDPMedia *media = gst_sdp_message_get_media (desc->sdp, m);

    if (g_strcmp0 (gst_sdp_media_get_media (media), "video") != 0)
      continue;
    for (guint i = 0; i < gst_sdp_media_attributes_len (media); i++) {
      const GstSDPAttribute *attr = gst_sdp_media_get_attribute (media, i);

      if (strcmp (attr->key, "extmap") == 0 &&
          strstr (attr->value, "transport-wide-cc") != NULL)
        return (guint) g_ascii_strtoull (attr->value, NULL, 10);
    }
  }
  return 0;
}

/* The bitrate at which the transport-wide feedback p received says its
 * packets arrived (its rtpsession's twcc-stats, computed from the
 * feedback of the participant it sends to over the last feedback
 * window), 0 without any. */
static guint
twcc_bitrate_reported (Participant * p)
{
  g_autoptr (GstElement) webrtcbin = first_webrtcbin (p);
  g_autoptr (GstElement) rtpbin = gst_bin_get_by_name (GST_BIN (webrtcbin),
      "rtpbin");
  g_autoptr (GstElement) session = NULL;
  g_autoptr (GstStructure) stats = NULL;
  guint bitrate = 0;

  g_signal_emit_by_name (rtpbin, "get-session", 0, &session);
  if (session == NULL)
    return 0;
  g_object_get (session, "twcc-stats", &stats, NULL);
  if (stats != NULL)
    gst_structure_get_uint (stats, "bitrate-recv", &bitrate);
  return bitrate;
}

/* The transport-wide feedback reports p's congestion control took in, over
 * every participant it sends to (their stats' feedback-reports, refreshed
 * every stats-interval): a count that only grows, where rtpsession's
 * twcc-stats describe the last feedback window only. */
static guint64
feedback_reports (Participant * p)
{
  GListModel *list = legba_room_get_participants (p->room);
  guint64 sum = 0;

  for (guint i = 0; i < g_list_model_get_n_items (list); i++) {
    g_autoptr (LegbaParticipant) other = g_list_model_get_item (list, i);
    g_autoptr (GstStructure) stats = NULL;
    guint64 n = 0;

    g_object_get (other, "stats", &stats, NULL);
    if (stats != NULL && gst_structure_get_uint64 (stats, "feedback-reports",
            &n))
      sum += n;
  }
  return sum;
}

/* The sum of a counter over the sources of p's rtpsession ("sent-nack-count",
 * "sent-pli-count", ...) */
static guint
session_count (Participant * p, const char *field)
{
  g_autoptr (GstElement) webrtcbin = first_webrtcbin (p);
  g_autoptr (GstElement) rtpbin = gst_bin_get_by_name (GST_BIN (webrtcbin),
      "rtpbin");
  g_autoptr (GstElement) session = NULL;
  g_autoptr (GstStructure) stats = NULL;
  GValueArray *sources;
  guint sum = 0;

  g_signal_emit_by_name (rtpbin, "get-session", 0, &session);
  if (session == NULL)
    return 0;
  g_object_get (session, "stats", &stats, NULL);
  /* rtpsession 1.22 gives its sources' stats as a GValueArray */
  G_GNUC_BEGIN_IGNORE_DEPRECATIONS;
  sources = g_value_get_boxed (gst_structure_get_value (stats, "source-stats"));
  for (guint i = 0; sources != NULL && i < sources->n_values; i++) {
    const GstStructure *s =
        gst_value_get_structure (g_value_array_get_nth (sources, i));
    guint n = 0;

    if (gst_structure_get_uint (s, field, &n))
      sum += n;
  }
  G_GNUC_END_IGNORE_DEPRECATIONS;
  return sum;
}

static gboolean
wake (gpointer data)
{
  return G_SOURCE_CONTINUE;
}

/* A receiver sends transport-wide congestion control feedback, whoever
 * offered: the answer takes the offer's extension id for it
 * (docs/room-protocol.md §5), and the sender on each side gets feedback
 * on what it sends. */
static void
assert_transport_feedback (Participant * offerer, Participant * answerer)
{
  g_autoptr (GstElement) offering = first_webrtcbin (offerer);
  g_autoptr (GstElement) answering = first_webrtcbin (answerer);
  GstWebRTCSessionDescription *offer = NULL, *answer = NULL;
  guint poll;

  g_object_get (offering, "local-description", &offer, NULL);
  g_object_get (answering, "local-description", &answer, NULL);
  g_assert_cmpuint (video_twcc_id (offer), >, 0);
  g_assert_cmpuint (video_twcc_id (answer), ==, video_twcc_id (offer));
  gst_webrtc_session_description_free (offer);
  gst_webrtc_session_description_free (answer);
  /* twcc-stats is a property: polled, not signalled */
  poll = g_timeout_add (50, wake, NULL);
  ROOM_WAIT_FOR ((twcc_bitrate_reported (offerer) > 0 ||
          feedback_reports (offerer) > 0) &&
      (twcc_bitrate_reported (answerer) > 0 || feedback_reports (answerer) > 0),
      "transport-wide feedback to reach both senders");
  g_source_remove (poll);
  g_test_message ("transport-wide feedback: the offerer's packets arrive at "
      "%u bit/s, the answerer's at %u bit/s", twcc_bitrate_reported (offerer),
      twcc_bitrate_reported (answerer));
}

/* p asked for a key frame when its track pads were linked, with a PLI
 * (RFC 4585), never with a FIR: RFC 5104 keeps FIR for other cases, and
 * rtpsession numbers every FIR alike, so a sender takes all but the first
 * for repeats (legba-room-media.c, key_unit_as_pli). */
static void
assert_key_frame_requests (Participant * p)
{
  guint poll = g_timeout_add (50, wake, NULL);

  ROOM_WAIT_FOR (session_count (p, "sent-pli-count") > 0,
      "a key frame request");
  g_source_remove (poll);
  g_assert_cmpuint (session_count (p, "sent-fir-count"), ==, 0);
}

static void
test_two (Fixture * f, gconstpointer data)
{
  Participant *alice = participant_new_for_server (f, "alice", "h264", TRUE);
  Participant *bob = participant_new_for_server (f, "bob", "h264", TRUE);
  Participant *all[] = { alice, bob };
  Remote *r;

  g_object_set (alice->room, "latency", 150, NULL);
  participant_connect_and_wait (alice);
  participant_connect_and_wait (bob);
  ROOM_WAIT_FOR (participant_connected_to (alice, bob) &&
      participant_connected_to (bob, alice), "the peer connection");
  wait_until_all_decode (all, 2, FRAMES);
  assert_knobs (alice, 150);
  assert_knobs (bob, 100);
  assert_no_fec (alice);
  assert_no_fec (bob);
  /* bob, the newcomer, offered; alice answered */
  assert_description (bob, alice, "local-description");
  assert_description (alice, bob, "local-description");
  assert_transport_feedback (bob, alice);
  assert_key_frame_requests (alice);
  assert_key_frame_requests (bob);
  ROOM_WAIT_FOR (stats_show_media (alice, bob) && stats_show_media (bob,
          alice), "stats to show the media");
  /* x264enc takes no target: its video is not held to the pacing rate */
  g_assert_false (video_steered (alice, bob));
  g_assert_false (video_steered (bob, alice));
  /* on loopback nothing comes late: each keeps the latency it started at */
  ROOM_WAIT_FOR (jitter_buffer_latency (alice, bob) != 0 &&
      jitter_buffer_latency (bob, alice) != 0, "the jitter buffers' latency");
  g_assert_cmpuint (jitter_buffer_latency (alice, bob), ==, 150);
  g_assert_cmpuint (jitter_buffer_latency (bob, alice), ==, 100);

  r = g_hash_table_lookup (bob->remotes,
      legba_room_get_participant_id (alice->room));
  g_test_message ("bob: connect to the first decoded frame of alice: "
      "%.1f ms", (r->first_video_time - bob->connect_started) / 1000.0);
  g_assert_cmpuint (g_list_model_get_n_items (legba_room_get_participants
          (alice->room)), ==, 1);
  g_assert_cmpuint (participant_peer_bins (alice), ==, 1);
  g_assert_cmpuint (participant_peer_bins (bob), ==, 1);
  g_assert_cmpuint (alice->tracks_added, ==, 2);
  g_assert_cmpuint (bob->tracks_added, ==, 2);
  assert_no_room_errors (alice);
  assert_no_room_errors (bob);
  participant_free (bob);
  ROOM_WAIT_FOR (alice->left == 1, "alice to see bob leave");
  g_assert_cmpuint (alice->tracks_removed, ==, 2);
  g_assert_cmpuint (participant_peer_bins (alice), ==, 0);
  participant_free (alice);
}

/* docs/webrtcbin.md, "SCTP association ids": every webrtcbin of the
 * process has its own (its sctpenc and sctpdec share it). */
static void
assert_distinct_sctp_ids (Participant ** all, guint n)
{
  g_autoptr (GHashTable) seen = g_hash_table_new (NULL, NULL);
  guint encoders = 0;

  for (guint i = 0; i < n; i++) {
    g_autoptr (GPtrArray) found = elements_by_factory (all[i]->pipeline,
        "sctpenc");

    for (guint k = 0; k < found->len; k++) {
      guint id;

      g_object_get (found->pdata[k], "sctp-association-id", &id, NULL);
      g_assert_false (g_hash_table_contains (seen, GUINT_TO_POINTER (id)));
      g_hash_table_add (seen, GUINT_TO_POINTER (id));
      encoders++;
    }
  }
  g_assert_cmpuint (encoders, ==, n * (n - 1));
}

/* The sum of a counter over p's jitter buffers' stats */
static guint64
jitterbuffer_count (Participant * p, const char *field)
{
  g_autoptr (GPtrArray) found = elements_by_factory (p->pipeline,
      "rtpjitterbuffer");
  guint64 sum = 0;

  for (guint i = 0; i < found->len; i++) {
    g_autoptr (GstStructure) stats = NULL;
    guint64 n = 0;

    g_object_get (found->pdata[i], "stats", &stats, NULL);
    if (gst_structure_get_uint64 (stats, field, &n))
      sum += n;
  }
  return sum;
}

/* A receiver asks for the video packets it lost (RTCP NACK) and gets them
 * again (RTX, RFC 4588) within its jitter buffer's latency: every 20th
 * packet the receiver takes in is dropped. The sender offers, as
 * Chromium joining a room of Legba receivers does. */
static void
test_nack (Fixture * f, gconstpointer data)
{
  Participant *alice = participant_new_for_server (f, "alice", NULL, FALSE);
  Participant *bob = participant_new_for_server (f, "bob", "h264", TRUE);
  Participant *all[] = { alice };
  g_autoptr (GstElement) webrtcbin = NULL;
  g_autoptr (GstElement) rtpbin = NULL;
  g_autoptr (GstPad) in = NULL;
  guint dropped = 0, poll;
  gulong probe;

  participant_connect_and_wait (alice);
  participant_connect_and_wait (bob);
  ROOM_WAIT_FOR (participant_connected_to (alice, bob), "the connection");
  wait_until_all_decode (all, 1, 1);
  webrtcbin = first_webrtcbin (alice);
  rtpbin = gst_bin_get_by_name (GST_BIN (webrtcbin), "rtpbin");
  in = gst_element_get_static_pad (rtpbin, "recv_rtp_sink_0");
  probe = gst_pad_add_probe (in, GST_PAD_PROBE_TYPE_BUFFER |
      GST_PAD_PROBE_TYPE_BUFFER_LIST, legba_test_lose_every_20th, &dropped,
      NULL);
  /* the counters are properties: polled, not signalled */
  poll = g_timeout_add (50, wake, NULL);
  ROOM_WAIT_FOR (session_count (alice, "sent-nack-count") > 0 &&
      jitterbuffer_count (alice, "rtx-success-count") > 0,
      "a lost packet to be asked for and to come again");
  g_source_remove (poll);
  g_test_message ("%u NACKs sent, %" G_GUINT64_FORMAT " packets asked for, %"
      G_GUINT64_FORMAT " of them repaired", session_count (alice,
          "sent-nack-count"), jitterbuffer_count (alice, "rtx-count"),
      jitterbuffer_count (alice, "rtx-success-count"));
  gst_pad_remove_probe (in, probe);
  assert_no_room_errors (alice);
  assert_no_room_errors (bob);
  participant_free (bob);
  participant_free (alice);
}

/* A 4-way mesh: everyone decodes everyone. Under AddressSanitizer the
 * participants send audio only (four H.264 encoders and twelve decoders
 * in one instrumented process do not fit a loaded 2-core machine); the
 * video paths are exercised there by the other tests. */
static void
test_four (Fixture * f, gconstpointer data)
{
  const char *names[] = { "anna", "ben", "carl", "dora" };
  const char *video = ROOM_SANITIZED ? NULL : "h264";
  guint kinds = video ? 2 : 1;
  Participant *all[4];

  for (guint i = 0; i < 4; i++) {
    all[i] = participant_new_for_server (f, names[i], video, TRUE);
    participant_connect_and_wait (all[i]);
  }
  wait_until_all_decode (all, 4, FRAMES);
  assert_distinct_sctp_ids (all, 4);
  for (guint i = 0; i < 4; i++) {
    g_assert_cmpuint (g_list_model_get_n_items (legba_room_get_participants
            (all[i]->room)), ==, 3);
    g_assert_cmpuint (participant_peer_bins (all[i]), ==, 3);
    g_assert_cmpuint (all[i]->tracks_added, ==, 3 * kinds);
    assert_no_room_errors (all[i]);
  }
  for (guint i = 0; i < 4; i++)
    participant_free (all[i]);
}

/* A participant leaves mid-call: the others release its pads and its
 * webrtcbin; it joins again (same participant id) and media resumes. */
static void
test_leave_and_return (Fixture * f, gconstpointer data)
{
  Participant *a = participant_new_for_server (f, "alice", "h264", TRUE);
  Participant *b = participant_new_for_server (f, "bob", "h264", TRUE);
  Participant *c = participant_new_for_server (f, "carol", "h264", TRUE);
  Participant *all[] = { a, b, c };
  g_autofree char *carol_id = NULL;

  participant_connect_and_wait (a);
  participant_connect_and_wait (b);
  wait_until_all_decode (all, 2, FRAMES);
  /* carol joins mid-call: she decodes the others, who decode her */
  participant_connect_and_wait (c);
  wait_until_all_decode (all, 3, FRAMES);
  carol_id = g_strdup (legba_room_get_participant_id (c->room));

  legba_room_disconnect (c->room);
  g_assert_cmpint (legba_room_get_state (c->room), ==,
      LEGBA_ROOM_STATE_DISCONNECTED);
  g_assert_cmpuint (c->left, ==, 2);
  g_assert_cmpuint (c->tracks_removed, ==, 4);
  g_assert_cmpuint (participant_peer_bins (c), ==, 0);
  ROOM_WAIT_FOR (a->left == 1
      && b->left == 1, "carol to be gone for the others");
  g_assert_null (legba_room_find_participant (a->room, carol_id));
  g_assert_cmpuint (a->tracks_removed, ==, 2);
  g_assert_cmpuint (participant_peer_bins (a), ==, 1);
  g_assert_cmpuint (participant_peer_bins (b), ==, 1);

  /* back, with the same participant id: fresh peer connections */
  participant_connect_and_wait (c);
  g_assert_cmpstr (legba_room_get_participant_id (c->room), ==, carol_id);
  ROOM_WAIT_FOR (a->tracks_added == 6 && b->tracks_added == 6 &&
      c->tracks_added == 8, "carol's tracks again");
  {
    guint64 before = participant_frames (a, c, LEGBA_TRACK_KIND_VIDEO);

    ROOM_WAIT_FOR (participant_frames (a, c, LEGBA_TRACK_KIND_VIDEO) >=
        before + FRAMES && participant_frames (c, a,
            LEGBA_TRACK_KIND_VIDEO) >= 2 * FRAMES,
        "media between alice and carol again");
  }
  for (guint i = 0; i < 3; i++) {
    assert_no_room_errors (all[i]);
    participant_free (all[i]);
  }
}

/* §3 mesh cap: a room already holding max-participants refuses the join
 * with a clear error. */
static void
test_full (Fixture * f, gconstpointer data)
{
  Participant *a = participant_new_for_server (f, "alice", NULL, TRUE);
  Participant *b = participant_new_for_server (f, "bob", NULL, TRUE);
  Participant *c = participant_new_for_server (f, "carol", NULL, TRUE);

  g_object_set (c->room, "max-participants", 2, NULL);
  participant_connect_and_wait (a);
  participant_connect_and_wait (b);
  participant_connect (c);
  ROOM_WAIT_FOR (c->connect_done, "carol's join to end");
  g_assert_error (c->connect_error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_FULL);
  g_assert_nonnull (strstr (c->connect_error->message, "full"));
  g_assert_cmpint (legba_room_get_state (c->room), ==, LEGBA_ROOM_STATE_FAILED);
  g_assert_cmpuint (participant_peer_bins (c), ==, 0);
  /* carol left at once: the others end up without her */
  ROOM_WAIT_FOR (g_list_model_get_n_items (legba_room_get_participants
          (a->room))
      == 1, "carol to be gone");
  participant_free (c);
  participant_free (b);
  participant_free (a);
}

static void
test_unreachable (Fixture * f, gconstpointer data)
{
  Participant *a = participant_new_for_server (f, "alice", NULL, TRUE);

  stop_server (f);
  participant_connect (a);
  ROOM_WAIT_FOR (a->connect_done, "the join to fail");
  g_assert_error (a->connect_error, LEGBA_ROOM_ERROR,
      LEGBA_ROOM_ERROR_UNREACHABLE);
  g_assert_cmpint (legba_room_get_state (a->room), ==, LEGBA_ROOM_STATE_FAILED);
  participant_free (a);
}

static void
test_refused (Fixture * f, gconstpointer data)
{
  Participant *a = participant_new_for_server (f, "alice", NULL, TRUE);

  g_object_set (a->signaller, "app-secret", "not-the-secret", NULL);
  participant_connect (a);
  ROOM_WAIT_FOR (a->connect_done, "the join to fail");
  g_assert_error (a->connect_error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_REFUSED);
  participant_free (a);
}

/* §4: offers larger than the server's client event limit leave in parts
 * and are put back together. */
static void
test_chunked (Fixture * f, gconstpointer data)
{
  Participant *a = participant_new_for_server (f, "alice", "h264", TRUE);
  Participant *b = participant_new_for_server (f, "bob", "h264", TRUE);
  Participant *all[] = { a, b };

  g_autoptr (GstElement) webrtcbin = NULL;
  GstWebRTCSessionDescription *offer = NULL;
  g_autofree char *text = NULL;

  participant_connect_and_wait (a);
  participant_connect_and_wait (b);
  wait_until_all_decode (all, 2, FRAMES);
  /* bob offered; his offer did not fit in one client event */
  webrtcbin = first_webrtcbin (b);
  g_object_get (webrtcbin, "local-description", &offer, NULL);
  text = gst_sdp_message_as_text (offer->sdp);
  g_assert_cmpuint (strlen (text), >, 1000);
  gst_webrtc_session_description_free (offer);
  assert_no_room_errors (a);
  assert_no_room_errors (b);
  participant_free (b);
  participant_free (a);
}

static gboolean
rooms_in_state (Participant ** all, guint n, LegbaRoomState state)
{
  for (guint i = 0; i < n; i++)
    if (legba_room_get_state (all[i]->room) != state)
      return FALSE;
  return TRUE;
}

/* §3: a signalling outage is not a media outage. The server goes away
 * mid-call and comes back on the same port: media flows throughout, the
 * same peer connections carry on, and the room is whole again. */
static void
test_server_restart (Fixture * f, gconstpointer data)
{
  Participant *a = participant_new_for_server (f, "alice", "h264", TRUE);
  Participant *b = participant_new_for_server (f, "bob", "h264", TRUE);
  Participant *all[] = { a, b };
  LegbaParticipant *bob_seen_by_a;
  guint port;
  guint64 before;

  participant_connect_and_wait (a);
  participant_connect_and_wait (b);
  wait_until_all_decode (all, 2, FRAMES);
  bob_seen_by_a = participant_find (a, b);

  port = f->port;
  stop_server (f);
  ROOM_WAIT_FOR (rooms_in_state (all, 2, LEGBA_ROOM_STATE_RECONNECTING),
      "both rooms to lose the server");
  before = participant_frames (a, b, LEGBA_TRACK_KIND_VIDEO);
  ROOM_WAIT_FOR (participant_frames (a, b, LEGBA_TRACK_KIND_VIDEO) >=
      before + FRAMES && participant_frames (b, a, LEGBA_TRACK_KIND_AUDIO) >=
      before + FRAMES, "media to flow while the server is down");
  g_assert_true (rooms_in_state (all, 2, LEGBA_ROOM_STATE_RECONNECTING));

  start_server (f, port, 0);
  ROOM_WAIT_FOR (rooms_in_state (all, 2, LEGBA_ROOM_STATE_CONNECTED) &&
      participant_connected_to (a, b) && participant_connected_to (b, a),
      "the room to be whole again");
  /* the same participant object and peer connection: nothing torn down */
  g_assert_true (participant_find (a, b) == bob_seen_by_a);
  g_assert_cmpuint (a->left, ==, 0);
  g_assert_cmpuint (a->tracks_added, ==, 2);
  g_assert_cmpuint (participant_peer_bins (a), ==, 1);
  before = participant_frames (b, a, LEGBA_TRACK_KIND_VIDEO);
  ROOM_WAIT_FOR (participant_frames (b, a, LEGBA_TRACK_KIND_VIDEO) >=
      before + FRAMES, "media after the outage");
  participant_free (b);
  participant_free (a);
}

/* An error of one element of a peer bin, as the element itself would
 * post it (GST_ELEMENT_ERROR). */
static void
post_peer_error (GstElement * peer_bin, const char *factory)
{
  g_autoptr (GstElement) element = find_by_factory (peer_bin, factory);
  GError *error = g_error_new_literal (GST_RESOURCE_ERROR,
      GST_RESOURCE_ERROR_READ, "forced by the test");

  g_assert_nonnull (element);
  gst_element_post_message (element, gst_message_new_error (GST_OBJECT
          (element), error, "test-room.c"));
  g_error_free (error);
}

static GstElement *
peer_bin_of (Participant * p, Participant * other)
{
  Remote *r = g_hash_table_lookup (p->remotes,
      legba_room_get_participant_id (other->room));

  g_assert_nonnull (r->pads[LEGBA_TRACK_KIND_VIDEO]);
  return gst_pad_get_parent_element (r->pads[LEGBA_TRACK_KIND_VIDEO]);
}

/* the next peer bin added to the pipeline fails at once */
static void
fail_next_peer (GstBin * pipeline, GstElement * element, gboolean * armed)
{
  if (!*armed || !g_str_has_prefix (GST_OBJECT_NAME (element), "legba-peer-"))
    return;
  *armed = FALSE;
  /* (its ICE elements come later) */
  post_peer_error (element, "webrtcbin");
}

/* One connection's element error stays with that connection: the
 * pipeline carries on (the bus handler of room-test.c aborts on any
 * error), the other participants never notice, and the connection is
 * replaced by a fresh one (§3: offered by the greater id). When the
 * replacement fails too, the participant is reported failed. */
static void
test_peer_error (Fixture * f, gconstpointer data)
{
  Participant *a = participant_new_for_server (f, "alice", "h264", TRUE);
  Participant *b = participant_new_for_server (f, "bob", "h264", TRUE);
  Participant *c = participant_new_for_server (f, "carol", "h264", TRUE);
  Participant *all[] = { a, b, c };
  g_autoptr (GstElement) bin = NULL;
  LegbaParticipant *bob_in_a;
  GError *reported;
  gboolean armed = FALSE;
  guint64 from_b, from_c;
  guint added;

  for (guint i = 0; i < 3; i++)
    participant_connect_and_wait (all[i]);
  wait_until_all_decode (all, 3, FRAMES);
  bob_in_a = participant_find (a, b);

  /* one failure: replaced, nothing reported */
  added = a->tracks_added;
  from_c = participant_frames (a, c, LEGBA_TRACK_KIND_VIDEO);
  bin = peer_bin_of (a, b);
  post_peer_error (bin, "nicesrc");
  g_clear_object (&bin);
  ROOM_WAIT_FOR (a->tracks_added == added + 2 &&
      participant_connected_to (a, b), "a fresh connection between a and b");
  g_assert_true (participant_find (a, b) == bob_in_a);
  from_b = participant_frames (a, b, LEGBA_TRACK_KIND_VIDEO);
  ROOM_WAIT_FOR (participant_frames (a, b, LEGBA_TRACK_KIND_VIDEO) >=
      from_b + FRAMES && participant_frames (b, a, LEGBA_TRACK_KIND_VIDEO) >=
      2 * FRAMES, "media between a and b again");
  g_assert_cmpuint (participant_frames (a, c, LEGBA_TRACK_KIND_VIDEO), >,
      from_c);
  g_assert_cmpuint (participant_peer_bins (a), ==, 2);
  for (guint i = 0; i < 3; i++)
    assert_no_room_errors (all[i]);

  /* a failure, and its replacement failing too: reported */
  g_signal_connect (a->pipeline, "element-added",
      G_CALLBACK (fail_next_peer), &armed);
  armed = TRUE;
  bin = peer_bin_of (a, b);
  post_peer_error (bin, "nicesrc");
  ROOM_WAIT_FOR (a->errors->len > 0, "a to report b failed");
  g_assert_false (armed);
  reported = a->errors->pdata[0];
  g_assert_error (reported, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_PEER);
  g_assert_nonnull (strstr (reported->message, "forced by the test"));
  g_assert_cmpint (legba_participant_get_state (participant_find (a, b)),
      ==, LEGBA_PARTICIPANT_STATE_FAILED);
  g_signal_handlers_disconnect_by_func (a->pipeline, fail_next_peer, &armed);
  /* carol and her media were never touched */
  from_c = participant_frames (a, c, LEGBA_TRACK_KIND_VIDEO);
  ROOM_WAIT_FOR (participant_frames (a, c, LEGBA_TRACK_KIND_VIDEO) >=
      from_c + FRAMES, "carol's media at alice after the failures");
  g_assert_true (participant_connected_to (a, c));
  g_assert_true (participant_connected_to (c, a));
  assert_no_room_errors (c);
  g_ptr_array_set_size (a->errors, 0);
  for (guint i = 0; i < 3; i++)
    participant_free (all[i]);
}

/* A call through legba-server over TLS (wss://), the participants
 * trusting the server's private CA through their signaller's ca-file. */
static void
test_wss (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("legba-room-XXXXXX", &error);
  g_autofree char *cert = NULL;
  g_autofree char *key = NULL;
  Fixture f = { NULL, };
  Participant *all[2];

  g_assert_no_error (error);
  if (!legba_test_make_certificate (dir, &cert, &key)) {
    g_test_skip ("openssl is not installed");
    g_rmdir (dir);
    return;
  }
  f.server = legba_server_new ();
  g_assert_true (legba_server_add_app (f.server, APP_ID, APP_KEY, APP_SECRET,
          &error));
  g_assert_true (legba_server_set_tls_files (f.server, cert, key, &error));
  g_assert_true (legba_server_listen (f.server, "127.0.0.1", 0, &error));
  g_assert_no_error (error);
  f.url = legba_server_get_url (f.server);
  g_assert_true (g_str_has_prefix (f.url, "https://"));

  all[0] = participant_new_for_server (&f, "alice", "h264", TRUE);
  all[1] = participant_new_for_server (&f, "bob", "h264", TRUE);
  for (guint i = 0; i < 2; i++) {
    g_object_set (all[i]->signaller, "ca-file", cert, NULL);
    participant_connect_and_wait (all[i]);
  }
  wait_until_all_decode (all, 2, FRAMES);
  for (guint i = 0; i < 2; i++) {
    assert_no_room_errors (all[i]);
    participant_free (all[i]);
  }
  fixture_teardown (&f, NULL);
  g_remove (cert);
  g_remove (key);
  g_rmdir (dir);
}

/* ---- TURN: coturn on loopback, relay only ---- */

#define TURN_SECRET "legba-test-turn-secret"

static guint
free_udp_port (void)
{
  g_autoptr (GSocket) socket = g_socket_new (G_SOCKET_FAMILY_IPV4,
      G_SOCKET_TYPE_DATAGRAM, G_SOCKET_PROTOCOL_UDP, NULL);
  g_autoptr (GInetAddress) loopback =
      g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) any = g_inet_socket_address_new (loopback, 0);
  g_autoptr (GSocketAddress) bound = NULL;

  g_assert_true (g_socket_bind (socket, any, FALSE, NULL));
  bound = g_socket_get_local_address (socket, NULL);
  return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
}

/* Does a STUN binding request to 127.0.0.1:port get its response? */
static gboolean
stun_answers (guint port)
{
  g_autoptr (GSocket) socket = g_socket_new (G_SOCKET_FAMILY_IPV4,
      G_SOCKET_TYPE_DATAGRAM, G_SOCKET_PROTOCOL_UDP, NULL);
  g_autoptr (GInetAddress) loopback =
      g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) to = g_inet_socket_address_new (loopback, port);
  guint8 request[20] = { 0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42 };
  guint8 response[512];
  gssize got;

  for (guint i = 8; i < sizeof request; i++)
    request[i] = g_random_int_range (0, 256);
  if (g_socket_send_to (socket, to, (const char *) request, sizeof request,
          NULL, NULL) != sizeof request ||
      !g_socket_condition_timed_wait (socket, G_IO_IN, 200 * 1000, NULL, NULL))
    return FALSE;
  got = g_socket_receive (socket, (char *) response, sizeof response, NULL,
      NULL);
  /* a binding success response with our transaction id */
  return got >= 20 && response[0] == 0x01 && response[1] == 0x01 &&
      memcmp (response + 8, request + 8, 12) == 0;
}

static gboolean
file_contains (const char *path, const char *text)
{
  g_autofree char *contents = NULL;

  return g_file_get_contents (path, &contents, NULL, NULL) &&
      strstr (contents, text) != NULL;
}

/* A call relayed through TURN only: both participants with the relay
 * ICE transport policy, a real coturn (Debian's turnserver) on loopback
 * sharing a secret with legba-server (use-auth-secret), and the
 * participants' credentials from legba-server alone: no TURN server is
 * configured on the rooms. */
static void
test_turn (Fixture * f, gconstpointer data)
{
  g_autofree char *turnserver = g_find_program_in_path ("turnserver");
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = NULL;
  g_autofree char *log = NULL;
  g_autofree char *log_arg = NULL;
  g_autofree char *pid_arg = NULL;
  g_autofree char *db_arg = NULL;
  g_autofree char *port_arg = NULL;
  g_autoptr (GSubprocess) coturn = NULL;
  g_autofree char *suffix = NULL;
  char *turn_urls[2] = { NULL, NULL };
  Participant *all[2];
  guint port;

  if (turnserver == NULL) {
    g_test_skip ("turnserver (coturn) is not installed");
    return;
  }
  dir = g_dir_make_tmp ("legba-turn-XXXXXX", &error);
  g_assert_no_error (error);
  log = g_build_filename (dir, "turn.log", NULL);
  log_arg = g_strdup_printf ("--log-file=%s", log);
  pid_arg = g_strdup_printf ("--pidfile=%s/turn.pid", dir);
  db_arg = g_strdup_printf ("--userdb=%s/turndb", dir);
  port = free_udp_port ();
  port_arg = g_strdup_printf ("--listening-port=%u", port);
  coturn = g_subprocess_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE |
      G_SUBPROCESS_FLAGS_STDERR_SILENCE, &error, turnserver, "-n",
      "--listening-ip=127.0.0.1", "--relay-ip=127.0.0.1", port_arg,
      "--use-auth-secret", "--static-auth-secret=" TURN_SECRET,
      "--realm=legba", "--no-cli", "--no-tls", "--no-dtls", "--no-tcp",
      "--no-tcp-relay",
      "--allow-loopback-peers", "--fingerprint", "--verbose", "--simple-log",
      "--no-stdout-log", log_arg, pid_arg, db_arg, NULL);
  g_assert_no_error (error);
  /* each try waits up to 200 ms for the answer */
  for (gint64 end = g_get_monotonic_time () + ROOM_WAIT_MS * 1000;
      !stun_answers (port); g_usleep (20 * 1000))
    if (g_get_monotonic_time () > end) {
      g_autofree char *text = NULL;

      g_file_get_contents (log, &text, NULL, NULL);
      g_error ("turnserver did not answer STUN on port %u; its log:\n%s",
          port, text ? text : "(none)");
    }

  turn_urls[0] = g_strdup_printf ("turn:127.0.0.1:%u?transport=udp", port);
  suffix = g_strdup_printf ("@127.0.0.1:%u?transport=udp", port);
  g_object_set (f->server, "turn-urls", turn_urls, "turn-secret",
      TURN_SECRET, "turn-ttl", 600, NULL);
  all[0] = participant_new_for_server (f, "alice", "h264", TRUE);
  all[1] = participant_new_for_server (f, "bob", "h264", TRUE);
  for (guint i = 0; i < 2; i++) {
    g_auto (GStrv) ice_servers = NULL;
    g_autofree char *participant_id = NULL;
    g_autofree char *user = NULL;
    gint64 before = g_get_real_time () / G_USEC_PER_SEC, after, expiry;
    char *end;

    g_object_set (all[i]->room, "ice-transport-policy",
        GST_WEBRTC_ICE_TRANSPORT_POLICY_RELAY, NULL);
    participant_connect_and_wait (all[i]);
    after = g_get_real_time () / G_USEC_PER_SEC;
    /* the credentials legba-server handed this participant, as a
     * webrtcbin URI: turn://EXPIRY%3APARTICIPANT_ID:CREDENTIAL@HOST:PORT,
     * expiring the ttl after the join */
    g_object_get (all[i]->room, "ice-servers", &ice_servers,
        "participant-id", &participant_id, NULL);
    g_assert_nonnull (ice_servers);
    g_assert_cmpuint (g_strv_length (ice_servers), ==, 1);
    g_assert_true (g_str_has_prefix (ice_servers[0], "turn://"));
    g_assert_true (g_str_has_suffix (ice_servers[0], suffix));
    expiry = g_ascii_strtoll (ice_servers[0] + strlen ("turn://"), &end, 10);
    g_assert_cmpint (expiry, >=, before + 600);
    g_assert_cmpint (expiry, <=, after + 600);
    user = g_strdup_printf ("%%3A%s:", participant_id);
    g_assert_true (g_str_has_prefix (end, user));
  }
  wait_until_all_decode (all, 2, FRAMES);
  /* coturn granted both participants an allocation */
  g_assert_true (file_contains (log, "ALLOCATE processed, success"));
  for (guint i = 0; i < 2; i++) {
    assert_no_room_errors (all[i]);
    participant_free (all[i]);
  }
  /* and they released their allocations when they left */
  g_assert_true (file_contains (log, "lifetime=0"));
  g_subprocess_send_signal (coturn, SIGTERM);
  g_subprocess_wait (coturn, NULL, NULL);
  g_free (turn_urls[0]);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  for (const char *name; d && (name = g_dir_read_name (d));) {
    g_autofree char *path = g_build_filename (dir, name, NULL);

    g_remove (path);
  }
  g_rmdir (dir);
}

static int
compare_times (gconstpointer a, gconstpointer b)
{
  gint64 x = *(const gint64 *) a, y = *(const gint64 *) b;

  return x < y ? -1 : x > y;
}

/* Calls set up one after another in one process (the first cold, the
 * others warm): from the newcomer's legba_room_connect_async() through
 * legba-server to the data channels open on both sides, the process's
 * one-time work made before (legba_room_prepare(), waited for as an
 * application may; waiting again returns at once). Reports the times;
 * asserts that every call connects and leaves cleanly. */
static void
test_setup_times (Fixture * f, gconstpointer data)
{
  Participant *a;
  GArray *warm = g_array_new (FALSE, FALSE, sizeof (gint64));
  gint64 cold = 0;

  legba_room_prepare ();
  legba_room_prepare_wait ();
  legba_room_prepare_wait ();
  a = participant_new_for_server (f, "alice", NULL, FALSE);
  participant_connect_and_wait (a);
  for (guint i = 0; i < 6; i++) {
    Participant *b = participant_new_for_server (f, "bob", NULL, FALSE);
    gint64 start = g_get_monotonic_time (), took;

    participant_connect (b);
    ROOM_WAIT_FOR (participant_connected_to (a, b) &&
        participant_connected_to (b, a), "both data channels open");
    took = g_get_monotonic_time () - start;
    if (i == 0)
      cold = took;
    else
      g_array_append_val (warm, took);
    participant_free (b);
    ROOM_WAIT_FOR (a->left == i + 1, "alice to see bob leave");
    g_assert_cmpuint (participant_peer_bins (a), ==, 0);
  }
  g_array_sort (warm, compare_times);
  g_test_message ("connect -> data channels open on both sides, through "
      "legba-server: first %.1f ms, warm median %.1f ms (min %.1f, max "
      "%.1f, n=%u)", cold / 1000.0,
      g_array_index (warm, gint64, warm->len / 2) / 1000.0,
      g_array_index (warm, gint64, 0) / 1000.0,
      g_array_index (warm, gint64, warm->len - 1) / 1000.0, warm->len);
  g_array_unref (warm);
  assert_no_room_errors (a);
  participant_free (a);
}

/* The sink pad of the H.264 payloader of p's one peer connection */
static GstPad *
sole_payloader_sink (Participant * p)
{
  g_autoptr (GstElement) peer_bin = NULL;
  g_autoptr (GstElement) pay = NULL;

  for (GList * l = GST_BIN_CHILDREN (p->pipeline); l; l = l->next)
    if (g_str_has_prefix (GST_OBJECT_NAME (l->data), "legba-peer-")) {
      g_assert_null (peer_bin);
      peer_bin = gst_object_ref (l->data);
    }
  g_assert_nonnull (peer_bin);
  pay = find_by_factory (peer_bin, "rtph264pay");
  g_assert_nonnull (pay);
  return gst_element_get_static_pad (pay, "sink");
}

/* What reaches the payloader of one peer: every break in the frames'
 * timestamps must be followed by a key frame (the send queue drops up to
 * one), or the peer decodes garbage until the next periodic one. */
typedef struct
{
  GMutex lock;
  GstClockTime last_pts;
  guint64 gaps;
  guint64 gaps_at_delta;
  guint64 encoded;              /* frames out of the shared encoder */
} SendWatch;

static GstPadProbeReturn
watch_payloader (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  SendWatch *w = data;
  GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER (info);
  GstClockTime pts = GST_BUFFER_PTS (buffer);

  g_mutex_lock (&w->lock);
  /* 15 frames a second: a gap of more than one and a half frames */
  if (GST_CLOCK_TIME_IS_VALID (w->last_pts) && GST_CLOCK_TIME_IS_VALID (pts)
      && pts > w->last_pts + GST_SECOND / 10) {
    w->gaps++;
    if (GST_BUFFER_FLAG_IS_SET (buffer, GST_BUFFER_FLAG_DELTA_UNIT))
      w->gaps_at_delta++;
  }
  w->last_pts = pts;
  g_mutex_unlock (&w->lock);
  g_main_context_wakeup (NULL);
  return GST_PAD_PROBE_OK;
}

static GstPadProbeReturn
count_encoded (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  SendWatch *w = data;

  g_mutex_lock (&w->lock);
  w->encoded++;
  g_mutex_unlock (&w->lock);
  g_main_context_wakeup (NULL);
  return GST_PAD_PROBE_OK;
}

static GstPadProbeReturn
hold (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  return GST_PAD_PROBE_OK;
}

static guint64
watch_get (SendWatch * w, guint64 * field)
{
  guint64 value;

  g_mutex_lock (&w->lock);
  value = *field;
  g_mutex_unlock (&w->lock);
  return value;
}

/* A peer whose sending stalls (its payloader blocked) overflows its send
 * queue while the encoder runs on; once unblocked its video resumes at a
 * key frame the room asked for (the encoder makes none of its own within
 * the test: key-int-max=1000 at 15 frames a second) and decodes again. */
static void
test_send_overflow (Fixture * f, gconstpointer data)
{
  Participant *alice = participant_new_for_server (f, "alice", "h264", FALSE);
  Participant *bob = participant_new_for_server (f, "bob", NULL, TRUE);
  Participant *all[] = { alice, bob };
  SendWatch w = { 0, };
  g_autoptr (GstElement) tee = NULL;
  g_autoptr (GstPad) pay_sink = NULL;
  g_autoptr (GstPad) tee_sink = NULL;
  guint64 encoded, decoded;
  gulong blocked;

  g_mutex_init (&w.lock);
  w.last_pts = GST_CLOCK_TIME_NONE;
  participant_connect_and_wait (alice);
  participant_connect_and_wait (bob);
  wait_until_all_decode (all, 2, FRAMES);

  pay_sink = sole_payloader_sink (alice);
  gst_pad_add_probe (pay_sink, GST_PAD_PROBE_TYPE_BUFFER, watch_payloader,
      &w, NULL);
  tee = gst_bin_get_by_name (GST_BIN (alice->pipeline), "legba-video-tee");
  g_assert_nonnull (tee);
  tee_sink = gst_element_get_static_pad (tee, "sink");
  gst_pad_add_probe (tee_sink, GST_PAD_PROBE_TYPE_BUFFER, count_encoded, &w,
      NULL);

  /* two seconds of video against a queue of one */
  encoded = watch_get (&w, &w.encoded);
  blocked = gst_pad_add_probe (pay_sink, GST_PAD_PROBE_TYPE_BLOCK |
      GST_PAD_PROBE_TYPE_BUFFER, hold, NULL, NULL);
  ROOM_WAIT_FOR (watch_get (&w, &w.encoded) >= encoded + 30,
      "alice's encoder to run on while her payloader is blocked");
  gst_pad_remove_probe (pay_sink, blocked);

  ROOM_WAIT_FOR (watch_get (&w, &w.gaps) > 0,
      "the frames after the dropped ones to reach the payloader");
  decoded = participant_frames (bob, alice, LEGBA_TRACK_KIND_VIDEO);
  ROOM_WAIT_FOR (participant_frames (bob, alice, LEGBA_TRACK_KIND_VIDEO) >=
      decoded + FRAMES, "bob to decode alice's video again");
  g_mutex_lock (&w.lock);
  g_test_message ("breaks in what reached the payloader: %" G_GUINT64_FORMAT
      ", %" G_GUINT64_FORMAT " at a delta frame", w.gaps, w.gaps_at_delta);
  g_assert_cmpuint (w.gaps, >, 0);
  g_assert_cmpuint (w.gaps_at_delta, ==, 0);
  g_mutex_unlock (&w.lock);
  assert_no_room_errors (alice);
  assert_no_room_errors (bob);
  participant_free (bob);
  participant_free (alice);
  g_mutex_clear (&w.lock);
}

static GstPadProbeReturn
hold_and_say (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  g_atomic_int_set ((gint *) data, TRUE);
  g_main_context_wakeup (NULL);
  return GST_PAD_PROBE_OK;
}

/* A peer whose sending is stuck (its payloader blocked: so is every peer
 * whose link stalls, and for good one whose connection goes down) holds
 * up no one else when someone joins. The newcomer's branch, linked to
 * alice's tee, makes her encoder negotiate again and ask every branch
 * for its allocation: bob's stuck queue must not keep that question, or
 * alice's encoder stops for everyone. Carol decodes alice meanwhile, and
 * bob does again once unblocked. */
static void
test_join_while_stuck (Fixture * f, gconstpointer data)
{
  Participant *alice = participant_new_for_server (f, "alice", "h264", FALSE);
  Participant *bob = participant_new_for_server (f, "bob", NULL, TRUE);
  Participant *carol;
  Participant *all[] = { alice, bob };
  g_autoptr (GstPad) pay_sink = NULL;
  gint held = FALSE;
  guint64 decoded;
  gulong blocked;

  participant_connect_and_wait (alice);
  participant_connect_and_wait (bob);
  wait_until_all_decode (all, 2, FRAMES);

  pay_sink = sole_payloader_sink (alice);
  blocked = gst_pad_add_probe (pay_sink, GST_PAD_PROBE_TYPE_BLOCK |
      GST_PAD_PROBE_TYPE_BUFFER, hold_and_say, &held, NULL);
  ROOM_WAIT_FOR (g_atomic_int_get (&held), "alice's sending to bob to stop");

  carol = participant_new_for_server (f, "carol", NULL, TRUE);
  participant_connect_and_wait (carol);
  ROOM_WAIT_FOR (participant_decodes (carol, alice, FRAMES),
      "carol to decode alice while alice's sending to bob is stuck");

  decoded = participant_frames (bob, alice, LEGBA_TRACK_KIND_VIDEO);
  gst_pad_remove_probe (pay_sink, blocked);
  ROOM_WAIT_FOR (participant_frames (bob, alice, LEGBA_TRACK_KIND_VIDEO) >=
      decoded + FRAMES, "bob to decode alice's video again");
  assert_no_room_errors (alice);
  assert_no_room_errors (bob);
  assert_no_room_errors (carol);
  participant_free (carol);
  participant_free (bob);
  participant_free (alice);
}

/* ---- A connection starts at a key frame, unasked ---- */

typedef struct
{
  gint seen;                    /* (atomic) a frame reached the payloader */
  gint first_delta;             /* (atomic) and it was a delta frame */
} FirstFrame;

static GstPadProbeReturn
first_to_payloader (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  FirstFrame *first = data;
  GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER (info);

  g_atomic_int_set (&first->first_delta,
      GST_BUFFER_FLAG_IS_SET (buffer, GST_BUFFER_FLAG_DELTA_UNIT));
  g_atomic_int_set (&first->seen, TRUE);
  return GST_PAD_PROBE_REMOVE;
}

static void
watch_first_to_payloader (GstBin * bin, GstBin * sub_bin,
    GstElement * element, gpointer data)
{
  GstElementFactory *factory = gst_element_get_factory (element);
  GstPad *sink;

  if (factory == NULL ||
      g_strcmp0 (GST_OBJECT_NAME (factory), "rtph264pay") != 0)
    return;
  sink = gst_element_get_static_pad (element, "sink");
  gst_pad_add_probe (sink, GST_PAD_PROBE_TYPE_BUFFER, first_to_payloader,
      data, NULL);
  gst_object_unref (sink);
}

static GstPadProbeReturn
refuse_key_unit (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  return gst_video_event_is_force_key_unit (GST_PAD_PROBE_INFO_EVENT (info)) ?
      GST_PAD_PROBE_DROP : GST_PAD_PROBE_OK;
}

/* Key-frame requests from the receiving branch (the room's when the track
 * is linked, the parser's, the decoder's) end at the depayloader: none
 * becomes a PLI. */
static void
refuse_at_depayloaders (GstBin * bin, GstBin * sub_bin, GstElement * element,
    gpointer data)
{
  GstElementFactory *factory = gst_element_get_factory (element);
  GstPad *sink;

  if (factory == NULL || !g_str_has_suffix (GST_OBJECT_NAME (factory), "depay"))
    return;
  sink = gst_element_get_static_pad (element, "sink");
  gst_pad_add_probe (sink, GST_PAD_PROBE_TYPE_EVENT_UPSTREAM, refuse_key_unit,
      NULL, NULL);
  gst_object_unref (sink);
}

static GstPadProbeReturn
count_key_unit (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  if (gst_video_event_is_force_key_unit (GST_PAD_PROBE_INFO_EVENT (info))) {
    g_atomic_int_inc ((gint *) data);
    g_main_context_wakeup (NULL);
  }
  return GST_PAD_PROBE_OK;
}

/* Once the connection is up the sender asks its encoder for a key frame
 * of its own accord, and the branch to the participant starts there: a
 * participant that cannot ask (a browser asks only once it has received
 * a frame it cannot decode, a round trip later) gets a picture from the
 * first frame. Bob never asks (his requests end before they become
 * PLIs); a request still reaches alice's encoder, whose key frames come
 * only on request, and the first frame of alice's branch to bob is a key
 * frame, not one queued while the handshake went on. */
static void
test_first_frame_unasked (Fixture * f, gconstpointer data)
{
  Participant *alice = participant_new_for_server (f, "alice", "h264", FALSE);
  Participant *bob = participant_new_for_server (f, "bob", NULL, TRUE);
  g_autoptr (GstElement) encoder = find_by_factory (alice->pipeline, "x264enc");
  g_autoptr (GstPad) encoder_src = NULL;
  FirstFrame first = { 0, };
  gint requests = 0;

  g_assert_nonnull (encoder);
  encoder_src = gst_element_get_static_pad (encoder, "src");
  gst_pad_add_probe (encoder_src, GST_PAD_PROBE_TYPE_EVENT_UPSTREAM,
      count_key_unit, &requests, NULL);
  g_signal_connect (alice->pipeline, "deep-element-added",
      G_CALLBACK (watch_first_to_payloader), &first);
  g_signal_connect (bob->pipeline, "deep-element-added",
      G_CALLBACK (refuse_at_depayloaders), NULL);
  participant_connect_and_wait (alice);
  participant_connect_and_wait (bob);
  ROOM_WAIT_FOR (g_atomic_int_get (&requests) > 0 &&
      g_atomic_int_get (&first.seen),
      "alice to ask her encoder for a key frame and send bob a frame");
  g_assert_cmpuint (session_count (bob, "sent-pli-count"), ==, 0);
  g_assert_cmpuint (session_count (bob, "sent-fir-count"), ==, 0);
  g_assert_false (g_atomic_int_get (&first.first_delta));
  assert_no_room_errors (alice);
  assert_no_room_errors (bob);
  g_signal_handlers_disconnect_by_data (alice->pipeline, &first);
  participant_free (bob);
  participant_free (alice);
}

/* The one-time preparation, made and waited for before any room exists,
 * with the rooms' debug output on: it logs through the rooms' category,
 * which must be there already (a missing one is a GStreamer critical,
 * fatal in the tests). In a process of its own, where no room was made. */
static void
test_prepare_first (void)
{
  if (g_test_subprocess ()) {
    g_assert_null (g_type_class_peek (LEGBA_TYPE_ROOM));
    /* GST_DEBUG=5, its output to GST_DEBUG_FILE (below) */
    gst_debug_set_default_threshold (GST_LEVEL_DEBUG);
    legba_room_prepare ();
    legba_room_prepare_wait ();
    return;
  }
  /* read by the subprocess's gst_init() */
  g_setenv ("GST_DEBUG_FILE", "/dev/null", TRUE);
  g_test_trap_subprocess (NULL, 120 * G_USEC_PER_SEC,
      G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_unsetenv ("GST_DEBUG_FILE");
  g_test_trap_assert_passed ();
}

int
main (int argc, char **argv)
{
  room_test_init (&argc, &argv);

#define ADD_ROOM(path, func, data) \
  g_test_add ("/room/server/" path, Fixture, GUINT_TO_POINTER (data), \
      fixture_setup, func, fixture_teardown)
  g_test_add_func ("/room/prepare-first", test_prepare_first);
  ADD_ROOM ("two", test_two, 0);
  ADD_ROOM ("nack", test_nack, 0);
  ADD_ROOM ("setup-times", test_setup_times, 0);
  ADD_ROOM ("four", test_four, 0);
  ADD_ROOM ("leave-and-return", test_leave_and_return, 0);
  ADD_ROOM ("full", test_full, 0);
  ADD_ROOM ("unreachable", test_unreachable, 0);
  ADD_ROOM ("refused", test_refused, 0);
  /* a limit below an offer's size (~2,500 bytes): offers leave in parts */
  ADD_ROOM ("chunked-offer", test_chunked, 1000);
  ADD_ROOM ("server-restart", test_server_restart, 0);
  ADD_ROOM ("peer-error", test_peer_error, 0);
  ADD_ROOM ("send-overflow", test_send_overflow, 0);
  ADD_ROOM ("join-while-stuck", test_join_while_stuck, 0);
  ADD_ROOM ("first-frame-unasked", test_first_frame_unasked, 0);
  g_test_add_func ("/room/server/wss", test_wss);
  ADD_ROOM ("turn-relay-only", test_turn, 0);
  return g_test_run ();
}
