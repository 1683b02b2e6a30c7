/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The benchmarks' plain-webrtcbin peer: two webrtcbins in this process,
 * the offer, answer and candidates handed across directly, no signalling
 * server and no Legba. It is the floor Legba's rooms add to.
 *
 *   webrtcbin-peer setup [--iterations N] [--pacing MS] [--like-legba]
 *   webrtcbin-peer bulk  [--bytes B] [--size S]
 *   webrtcbin-peer rtt   [--count N] [--rate R] [--size S]
 *   webrtcbin-peer pairs [--count N] [--seconds S] [--no-teardown]
 *   webrtcbin-peer call  [--frames N] [--width W --height H] [--bitrate KBPS]
 *                        [--sync] [--latency MS]
 *   webrtcbin-peer first-frame [--iterations N] [--width W --height H]
 *                        [--bitrate KBPS]
 *   webrtcbin-peer mesh  --identity ID --peers ID,ID,... [--width W
 *                        --height H] [--bitrate KBPS] [--loss P]
 *
 * call: --sync and --latency as legba-peer's (the jitter buffer's latency
 * is otherwise 100 ms, as Legba's rooms set it).
 *
 * first-frame: the sender's stamped H.264 track of a moving zone plate
 * (as legba-peer's), timed from the pipeline going to PLAYING (which
 * starts the negotiation) to the first frame out of b's decoder; the
 * first iteration is the process's first peer connection.
 *
 * mesh: one participant of a mesh of plain webrtcbins, one process each,
 * as an application without Legba would make it: one webrtcbin per other
 * participant, legba-peer mesh's sender line encoded once and sent to
 * each (tee, then per webrtcbin a leaky queue, rtph264pay and the
 * negotiated format), and each received video decoded through the
 * elements a room's receive chain has (rtph264depay asking for key
 * frames, h264parse, avdec_h264, legbastampcheck). The session is the
 * one a pair of Legba's rooms negotiates when both publish video (as
 * --like-legba, but the video transceiver sends and receives H.264 only,
 * its SSRC announced); the lower id makes the offer. Signalling is
 * the caller's: descriptions and candidates are JSON lines on standard
 * output ({"to": ID, "type": "offer" | "answer" | "candidate", ...}),
 * and the caller hands them on to ID's standard input, "to" replaced by
 * "from". Besides those, standard input takes legba-peer mesh's
 * commands ("start", "stop") and standard output has its lines
 * ({"event": "decoding"} once every other participant's video has given
 * a decoded frame, and the window's result); end of input leaves.
 * bench/suites.py mesh drives four of them. --loss P drops each RTP
 * packet this participant sends with probability P (bench/peers/loss.h).
 *
 * Prints one JSON object on standard output. ICE: host candidates on
 * 127.0.0.1 only (libnice leaves loopback out by default, so it is added
 * to each agent), no STUN server, as for every peer of the suite.
 * --pacing sets libnice's stun-pacing-timer (default: libnice's 20 ms).
 *
 * --like-legba (data pairs: setup, bulk, rtt, pairs): the session a pair
 * of Legba's rooms describes when neither publishes (docs/room-protocol.md
 * §5 and §6), made with webrtcbin alone: a video and an audio transceiver,
 * receive-only, on each side (video: H.264 and VP8 with NACK, PLI, FIR
 * and transport-cc feedback and its header extension, NACK on; audio:
 * Opus), and the data channel `legba` (ordered, reliable; a room makes
 * `legba-lossy` only once it has a lossy message to send); the offer is
 * made once all of it is added, as a room does; and ICE without TCP host
 * candidates, as a room's (LegbaRoom:ice-tcp). Without it: one reliable
 * channel `bench`, no transceiver. A pair is open when its channel is
 * open on both sides.
 *
 * setup also prints when each pair's descriptions were applied and its
 * webrtcbins connected (bench/peers/phases.h), in ms from its start.
 */
#include <gst/gst.h>
#include <gst/sdp/sdp.h>
#include <gst/webrtc/webrtc.h>
#include <json-glib/json-glib.h>
#include <nice/agent.h>
#include <sys/resource.h>
#include <malloc.h>
#include <string.h>
#include <stdio.h>

#include "census.h"
#include "encoded.h"
#include "loss.h"
#include "pairs.h"
#include "phases.h"
#include <stdlib.h>

typedef struct
{
  GstElement *pipe;
  GstElement *a, *b;
  GstWebRTCDataChannel *dca, *dcb;
  GstElement *check;
  gboolean open_a, open_b, failed;
  guint16 sctp_id;
} Pair;

static GMutex lock;
static GCond cond;
static guint pacing_ms;
static gboolean like_legba;
static gboolean no_teardown;    /* pairs */
static gboolean call_sync;      /* call: the stamps read after a clocksync */
static guint call_latency = 100;        /* call: the jitter buffer's, ms */
static guint16 next_sctp_id = 1;

/* bulk and rtt counters, under lock */
static guint64 received_bytes;
static guint64 received_msgs;
static GArray *rtts;            /* gdouble ms */
static guint64 frames_out;
static gint64 first_frame_us;   /* under lock: the first frame out */
static gint64 pair_started_us;  /* the last pair_new()'s PLAYING */
static Phases phases;           /* setup */

static gboolean
pair_open (Pair * p)
{
  return p->open_a && p->open_b;
}

static gboolean
wait_open (Pair * p, guint seconds)
{
  gint64 end = g_get_monotonic_time () + (gint64) seconds * G_USEC_PER_SEC;
  gboolean ok;

  g_mutex_lock (&lock);
  while (!pair_open (p) && !p->failed && g_cond_wait_until (&cond, &lock, end));
  ok = pair_open (p);
  g_mutex_unlock (&lock);
  return ok;
}

/* ---- negotiation ---- */

static void
on_ice_candidate (GstElement * self, guint mline, char *candidate,
    GstElement * other)
{
  g_signal_emit_by_name (other, "add-ice-candidate", mline, candidate);
}

static void
on_answer (GstPromise * promise, gpointer data)
{
  Pair *p = data;
  const GstStructure *reply = gst_promise_get_reply (promise);
  GstWebRTCSessionDescription *answer = NULL;

  gst_structure_get (reply, "answer", GST_TYPE_WEBRTC_SESSION_DESCRIPTION,
      &answer, NULL);
  gst_promise_unref (promise);
  g_signal_emit_by_name (p->b, "set-local-description", answer, NULL);
  g_signal_emit_by_name (p->a, "set-remote-description", answer, NULL);
  gst_webrtc_session_description_free (answer);
}

static void
on_offer (GstPromise * promise, gpointer data)
{
  Pair *p = data;
  const GstStructure *reply = gst_promise_get_reply (promise);
  GstWebRTCSessionDescription *offer = NULL;

  gst_structure_get (reply, "offer", GST_TYPE_WEBRTC_SESSION_DESCRIPTION,
      &offer, NULL);
  gst_promise_unref (promise);
  g_signal_emit_by_name (p->a, "set-local-description", offer, NULL);
  g_signal_emit_by_name (p->b, "set-remote-description", offer, NULL);
  gst_webrtc_session_description_free (offer);
  g_signal_emit_by_name (p->b, "create-answer", NULL,
      gst_promise_new_with_change_func (on_answer, p, NULL));
}

static void
on_negotiation_needed (GstElement * webrtc, Pair * p)
{
  if (like_legba)
    return;                     /* the offer is made once all is added */
  g_signal_emit_by_name (p->a, "create-offer", NULL,
      gst_promise_new_with_change_func (on_offer, p, NULL));
}

/* ---- data channels ---- */

static void
on_message_data_b (GstWebRTCDataChannel * dc, GBytes * bytes, Pair * p)
{
  gsize size;

  g_bytes_get_data (bytes, &size);
  if (rtts != NULL) {
    /* echo */
    gst_webrtc_data_channel_send_data (dc, bytes);
    return;
  }
  g_mutex_lock (&lock);
  received_bytes += size;
  received_msgs++;
  g_cond_broadcast (&cond);
  g_mutex_unlock (&lock);
}

static void
on_message_data_a (GstWebRTCDataChannel * dc, GBytes * bytes, Pair * p)
{
  gsize size;
  const guint8 *data = g_bytes_get_data (bytes, &size);
  double sent;

  if (size < sizeof sent)
    return;
  memcpy (&sent, data, sizeof sent);
  g_mutex_lock (&lock);
  if (rtts != NULL) {
    double rtt = now_ms () - sent;

    g_array_append_val (rtts, rtt);
  }
  received_msgs++;
  g_cond_broadcast (&cond);
  g_mutex_unlock (&lock);
}

static void
on_open_a (GstWebRTCDataChannel * dc, Pair * p)
{
  g_mutex_lock (&lock);
  p->open_a = TRUE;
  g_cond_broadcast (&cond);
  g_mutex_unlock (&lock);
}

static void
on_data_channel_b (GstElement * webrtc, GstWebRTCDataChannel * dc, Pair * p)
{
  char *label = NULL;
  gboolean reliable;

  /* bulk and rtt: the reliable channel */
  g_object_get (dc, "label", &label, NULL);
  reliable = g_strcmp0 (label, like_legba ? "legba" : "bench") == 0;
  g_free (label);
  if (reliable)
    g_signal_connect (dc, "on-message-data", G_CALLBACK (on_message_data_b), p);
  g_mutex_lock (&lock);
  if (reliable)
    p->dcb = g_object_ref (dc);
  p->open_b = TRUE;
  g_cond_broadcast (&cond);
  g_mutex_unlock (&lock);
}

static void
on_state (GstElement * webrtc, GParamSpec * pspec, Pair * p)
{
  GstWebRTCPeerConnectionState state;

  g_object_get (webrtc, "connection-state", &state, NULL);
  if (state == GST_WEBRTC_PEER_CONNECTION_STATE_FAILED) {
    g_mutex_lock (&lock);
    p->failed = TRUE;
    g_cond_broadcast (&cond);
    g_mutex_unlock (&lock);
  }
}

static void
on_deep_element_added (GstBin * bin, GstBin * sub, GstElement * element,
    Pair * p)
{
  GstElementFactory *f = gst_element_get_factory (element);
  const char *name = f ? GST_OBJECT_NAME (f) : "";

  GstObject *up = GST_OBJECT (sub);
  guint id = p->sctp_id;

  if (strcmp (name, "sctpenc") != 0 && strcmp (name, "sctpdec") != 0)
    return;
  /* one association id per webrtcbin, unique in the process */
  while (up != NULL && up != GST_OBJECT (p->b))
    up = GST_OBJECT_PARENT (up);
  if (up != NULL)
    id++;
  g_object_set (element, "sctp-association-id", id, NULL);
}

static void
configure_ice (GstElement * webrtc)
{
  GObject *ice = NULL, *agent = NULL;
  NiceAddress address;

  g_object_get (webrtc, "ice-agent", &ice, NULL);
  if (ice == NULL)
    return;
  /* the rooms' default: no ICE-TCP host candidates */
  if (like_legba)
    g_object_set (ice, "ice-tcp", FALSE, NULL);
  g_object_get (ice, "agent", &agent, NULL);
  if (agent != NULL) {
    nice_address_init (&address);
    nice_address_set_from_string (&address, "127.0.0.1");
    nice_agent_add_local_address (NICE_AGENT (agent), &address);
    g_object_set (agent, "upnp", FALSE, NULL);
    if (pacing_ms > 0)
      g_object_set (agent, "stun-pacing-timer", pacing_ms, NULL);
    g_object_unref (agent);
  }
  g_object_unref (ice);
}

static GstElement *
new_webrtcbin (Pair * p, const char *name)
{
  GstElement *w = gst_element_factory_make ("webrtcbin", name);

  g_object_set (w, "bundle-policy", GST_WEBRTC_BUNDLE_POLICY_MAX_BUNDLE, NULL);
  configure_ice (w);
  g_signal_connect (w, "notify::connection-state", G_CALLBACK (on_state), p);
  gst_bin_add (GST_BIN (p->pipe), w);
  return w;
}

static void on_pad_added_b (GstElement * webrtc, GstPad * pad, Pair * p);

static GstStructure *
rtp_structure (const char *media, const char *encoding, int clock_rate,
    int payload, gboolean offerer)
{
  GstStructure *s = gst_structure_new ("application/x-rtp",
      "media", G_TYPE_STRING, media,
      "encoding-name", G_TYPE_STRING, encoding,
      "clock-rate", G_TYPE_INT, clock_rate, NULL);

  /* an answer keeps the offer's payload types, extensions and feedback */
  if (!offerer)
    return s;
  gst_structure_set (s, "payload", G_TYPE_INT, payload, NULL);
  if (strcmp (media, "video") == 0)
    gst_structure_set (s, "rtcp-fb-nack", G_TYPE_BOOLEAN, TRUE,
        "rtcp-fb-nack-pli", G_TYPE_BOOLEAN, TRUE,
        "rtcp-fb-ccm-fir", G_TYPE_BOOLEAN, TRUE,
        "rtcp-fb-transport-cc", G_TYPE_BOOLEAN, TRUE,
        "extmap-1", G_TYPE_STRING, "http://www.ietf.org/id/"
        "draft-holmer-rmcat-transport-wide-cc-extensions-01", NULL);
  return s;
}

/* --like-legba: a room's receive-only video and audio transceivers */
static void
add_receive_transceivers (GstElement * webrtc, gboolean offerer)
{
  GstCaps *video = gst_caps_new_empty (), *audio = gst_caps_new_empty ();
  GstStructure *h264 = rtp_structure ("video", "H264", 90000, 96, offerer);
  GstStructure *opus = rtp_structure ("audio", "OPUS", 48000, 111, offerer);
  GstWebRTCRTPTransceiver *t = NULL;

  gst_structure_set (h264, "packetization-mode", G_TYPE_STRING, "1", NULL);
  if (offerer)
    gst_structure_set (h264, "profile-level-id", G_TYPE_STRING, "42e01f",
        "level-asymmetry-allowed", G_TYPE_STRING, "1", NULL);
  else
    gst_structure_set (h264, "profile", G_TYPE_STRING, "constrained-baseline",
        NULL);
  gst_caps_append_structure (video, h264);
  gst_caps_append_structure (video, rtp_structure ("video", "VP8", 90000, 97,
          offerer));
  gst_structure_set (opus, "encoding-params", G_TYPE_STRING, "2", NULL);
  gst_caps_append_structure (audio, opus);
  g_signal_emit_by_name (webrtc, "add-transceiver",
      GST_WEBRTC_RTP_TRANSCEIVER_DIRECTION_RECVONLY, video, &t);
  if (t != NULL)
    g_object_set (t, "do-nack", TRUE, NULL);
  g_clear_object (&t);
  g_signal_emit_by_name (webrtc, "add-transceiver",
      GST_WEBRTC_RTP_TRANSCEIVER_DIRECTION_RECVONLY, audio, &t);
  g_clear_object (&t);
  gst_caps_unref (video);
  gst_caps_unref (audio);
}

/* video: NULL for a data-channel pair, else the sender's launch line */
static Pair *
pair_new (const char *video)
{
  Pair *p = g_new0 (Pair, 1);

  p->sctp_id = next_sctp_id;
  next_sctp_id += 2;
  p->pipe = gst_pipeline_new (NULL);
  g_signal_connect (p->pipe, "deep-element-added",
      G_CALLBACK (on_deep_element_added), p);
  p->a = new_webrtcbin (p, "a");
  p->b = new_webrtcbin (p, "b");
  phases_watch (&phases, p->a);
  phases_watch (&phases, p->b);
  g_signal_connect (p->a, "on-ice-candidate", G_CALLBACK (on_ice_candidate),
      p->b);
  g_signal_connect (p->b, "on-ice-candidate", G_CALLBACK (on_ice_candidate),
      p->a);
  g_signal_connect (p->a, "on-negotiation-needed",
      G_CALLBACK (on_negotiation_needed), p);
  if (video != NULL) {
    GError *error = NULL;
    GstElement *src = gst_parse_bin_from_description (video, TRUE, &error);

    if (src == NULL)
      g_error ("sender line: %s", error->message);
    encoded_watch (GST_BIN (src));
    gst_bin_add (GST_BIN (p->pipe), src);
    gst_element_link (src, p->a);
    /* by default the jitter buffer's latency Legba's rooms use
     * (webrtcbin: 200) */
    g_object_set (p->a, "latency", call_latency, NULL);
    g_object_set (p->b, "latency", call_latency, NULL);
    g_signal_connect (p->b, "pad-added", G_CALLBACK (on_pad_added_b), p);
    p->open_a = p->open_b = TRUE;
  } else {
    g_signal_connect (p->b, "on-data-channel",
        G_CALLBACK (on_data_channel_b), p);
  }
  if (video == NULL && like_legba) {
    add_receive_transceivers (p->a, TRUE);
    add_receive_transceivers (p->b, FALSE);
  }
  pair_started_us = g_get_monotonic_time ();
  gst_element_set_state (p->pipe, GST_STATE_PLAYING);
  if (video == NULL) {
    g_signal_emit_by_name (p->a, "create-data-channel",
        like_legba ? "legba" : "bench", NULL, &p->dca);
    if (p->dca == NULL)
      g_error ("create-data-channel failed");
    g_signal_connect (p->dca, "on-open", G_CALLBACK (on_open_a), p);
    g_signal_connect (p->dca, "on-message-data",
        G_CALLBACK (on_message_data_a), p);
  }
  if (video == NULL && like_legba) {
    g_signal_emit_by_name (p->a, "create-offer", NULL,
        gst_promise_new_with_change_func (on_offer, p, NULL));
  }
  return p;
}

static void
pair_free (Pair * p)
{
  gst_element_set_state (p->pipe, GST_STATE_NULL);
  g_clear_object (&p->dca);
  g_clear_object (&p->dcb);
  gst_object_unref (p->pipe);
  g_free (p);
}

/* ---- process figures ---- */

/* ---- modes ---- */

static int
mode_setup (guint iterations)
{
  GArray *series[3];
  const char *names[] = { "setup_ms", "described_ms", "connected_ms" };
  GString *out =
      g_string_new ("{\"peer\": \"webrtcbin\", \"mode\": \"setup\", ");
  guint failed = 0;
  int rc;

  for (guint s = 0; s < G_N_ELEMENTS (series); s++)
    series[s] = g_array_new (FALSE, FALSE, sizeof (double));
  for (guint i = 0; i < iterations; i++) {
    double t[3];
    Pair *p;

    phases_start (&phases);
    p = pair_new (NULL);
    if (wait_open (p, 30)) {
      t[0] = (g_get_monotonic_time () - phases.t0) / 1000.0;
      t[1] = phases_described_ms (&phases);
      t[2] = phases_connected_ms (&phases);
      for (guint s = 0; s < G_N_ELEMENTS (series); s++)
        g_array_append_val (series[s], t[s]);
    } else {
      failed++;
    }
    pair_free (p);
  }
  for (guint s = 0; s < G_N_ELEMENTS (series); s++) {
    print_series (out, names[s], series[s]);
    g_string_append (out, ", ");
  }
  g_string_append_printf (out, "\"failed\": %u, \"pacing_ms\": %u, "
      "\"like_legba\": %s}", failed, pacing_ms, like_legba ? "true" : "false");
  puts (out->str);
  g_string_free (out, TRUE);
  rc = series[0]->len ? 0 : 1;
  for (guint s = 0; s < G_N_ELEMENTS (series); s++)
    g_array_unref (series[s]);
  return rc;
}

static GBytes *
message (gsize size)
{
  guint8 *data = g_malloc (size);

  for (gsize i = 0; i < size; i++)
    data[i] = 'a' + i % 26;
  return g_bytes_new_take (data, size);
}

static int
mode_bulk (guint64 bytes, gsize size)
{
  Pair *p = pair_new (NULL);
  GBytes *msg = message (size);
  guint64 sent = 0;
  double t0, c0, t, c;
  gboolean done = FALSE;

  if (!wait_open (p, 30))
    g_error ("the data channel did not open");
  g_object_set (p->dca, "buffered-amount-low-threshold", (guint64) 256 * 1024,
      NULL);
  t0 = now_ms ();
  c0 = cpu_s ();
  while (sent < bytes) {
    guint64 buffered;

    g_object_get (p->dca, "buffered-amount", &buffered, NULL);
    if (buffered > 1024 * 1024) {
      g_usleep (200);
      continue;
    }
    gst_webrtc_data_channel_send_data (p->dca, msg);
    sent += size;
  }
  {
    gint64 end = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;

    g_mutex_lock (&lock);
    while (received_bytes < sent && g_cond_wait_until (&cond, &lock, end));
    done = received_bytes >= sent;
    g_mutex_unlock (&lock);
  }
  t = now_ms () - t0;
  c = cpu_s () - c0;
  print_bulk ("webrtcbin", sent, received_bytes, size, t, c, done);
  g_bytes_unref (msg);
  pair_free (p);
  return done ? 0 : 1;
}

static int
mode_rtt (guint count, double rate, gsize size)
{
  Pair *p;
  guint8 *data = g_malloc0 (size);
  double c0, c, start;
  GString *out = g_string_new ("{\"peer\": \"webrtcbin\", \"mode\": \"rtt\", ");
  gboolean all;

  rtts = g_array_new (FALSE, FALSE, sizeof (double));
  p = pair_new (NULL);
  if (!wait_open (p, 30))
    g_error ("the data channel did not open");
  c0 = cpu_s ();
  start = now_ms ();
  for (guint i = 0; i < count; i++) {
    double due = start + i * 1000.0 / rate, t;
    GBytes *b;

    while ((t = now_ms ()) < due)
      g_usleep ((gulong) ((due - t) * 1000));
    t = now_ms ();
    memcpy (data, &t, sizeof t);
    b = g_bytes_new (data, size);
    gst_webrtc_data_channel_send_data (p->dca, b);
    g_bytes_unref (b);
  }
  {
    gint64 end = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;

    g_mutex_lock (&lock);
    while (received_msgs < count && g_cond_wait_until (&cond, &lock, end));
    all = received_msgs >= count;
    g_mutex_unlock (&lock);
  }
  c = cpu_s () - c0;
  g_mutex_lock (&lock);
  print_series (out, "rtt_ms", rtts);
  g_mutex_unlock (&lock);
  g_string_append_printf (out, ", \"sent\": %u, \"size\": %zu, \"rate\": %g, "
      "\"cpu_s\": %.4f, \"complete\": %s}", count, size, rate, c,
      all ? "true" : "false");
  puts (out->str);
  g_string_free (out, TRUE);
  pair_free (p);
  g_mutex_lock (&lock);
  g_clear_pointer (&rtts, g_array_unref);
  g_mutex_unlock (&lock);
  g_free (data);
  return all ? 0 : 1;
}

/* the pairs mode's hooks (pairs.h) */
static gpointer
pairs_new (guint index, GstElement ** pipeline)
{
  Pair *p = pair_new (NULL);

  *pipeline = p->pipe;
  return p;
}

static int
mode_pairs (guint count, double seconds)
{
  PairsPeer peer = {
    .peer = "webrtcbin",
    .no_teardown = no_teardown,
    .pair_new = pairs_new,
    .pair_wait = (PairsWaitFunc) wait_open,
    .pair_free = (GDestroyNotify) pair_free,
  };

  return pairs_run (&peer, count, seconds);
}

/* ---- call ---- */

static GstPadProbeReturn
count_frame (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  g_mutex_lock (&lock);
  if (frames_out++ == 0)
    first_frame_us = g_get_monotonic_time ();
  g_cond_broadcast (&cond);
  g_mutex_unlock (&lock);
  return GST_PAD_PROBE_OK;
}

static void
on_pad_added_b (GstElement * webrtc, GstPad * pad, Pair * p)
{
  GError *error = NULL;
  GstElement *sink;
  GstPad *sinkpad, *out;

  if (GST_PAD_DIRECTION (pad) != GST_PAD_SRC)
    return;
  sink = gst_parse_bin_from_description (call_sync ?
      "rtph264depay ! avdec_h264 ! clocksync ! legbastampcheck name=check "
      "series=true ! fakesink sync=true" : "rtph264depay ! avdec_h264 ! "
      "legbastampcheck name=check series=true ! fakesink sync=false", TRUE,
      &error);
  if (sink == NULL)
    g_error ("receiver line: %s", error->message);
  gst_bin_add (GST_BIN (p->pipe), sink);
  p->check = gst_bin_get_by_name (GST_BIN (sink), "check");
  out = gst_element_get_static_pad (p->check, "src");
  gst_pad_add_probe (out, GST_PAD_PROBE_TYPE_BUFFER, count_frame, NULL, NULL);
  gst_object_unref (out);
  gst_element_sync_state_with_parent (sink);
  sinkpad = gst_element_get_static_pad (sink, "sink");
  gst_pad_link (pad, sinkpad);
  gst_object_unref (sinkpad);
}

static int
mode_call (guint frames, guint width, guint height, guint kbps)
{
  char *line = g_strdup_printf ("videotestsrc is-live=true pattern=smpte "
      "horizontal-speed=4 ! video/x-raw,format=I420,width=%u,height=%u,"
      "framerate=30/1 ! legbastamp ! x264enc name=enc tune=zerolatency "
      "speed-preset=ultrafast bitrate=%u key-int-max=60 ! "
      "video/x-h264,profile=constrained-baseline ! rtph264pay "
      "config-interval=-1 pt=96 ! capsfilter caps=\"application/x-rtp,"
      "media=video,encoding-name=H264,payload=96,clock-rate=90000\"", width,
      height, kbps);
  Pair *p = pair_new (line);
  GstBus *bus = gst_element_get_bus (p->pipe);
  GstMessage *msg;
  gboolean got;
  double c0 = cpu_s (), t0 = now_ms ();
  GstPad *pad;
  guint64 target = frames;

  {
    gint64 end = g_get_monotonic_time () + (30 + frames / 10) * G_USEC_PER_SEC;

    g_mutex_lock (&lock);
    while (frames_out < target && g_cond_wait_until (&cond, &lock, end));
    got = frames_out >= target;
    g_mutex_unlock (&lock);
  }
  if (p->check == NULL)
    g_error ("no video arrived");
  pad = gst_element_get_static_pad (p->check, "sink");
  gst_pad_send_event (pad, gst_event_new_eos ());
  gst_object_unref (pad);
  msg = gst_bus_timed_pop_filtered (bus, 10 * GST_SECOND, GST_MESSAGE_ELEMENT);
  while (msg != NULL && !gst_message_has_name (msg, "legba-stamp-summary")) {
    gst_message_unref (msg);
    msg = gst_bus_timed_pop_filtered (bus, 10 * GST_SECOND,
        GST_MESSAGE_ELEMENT);
  }
  {
    GString *out =
        g_string_new ("{\"peer\": \"webrtcbin\", \"mode\": \"call\"");
    g_string_append_printf (out,
        ", \"frames\": %" G_GUINT64_FORMAT
        ", \"complete\": %s, \"cpu_ms_per_frame\": %.3f, \"seconds\": %.2f",
        frames_out, got ? "true" : "false",
        (cpu_s () - c0) * 1000 / MAX (frames_out, 1), (now_ms () - t0) / 1000);
    if (msg != NULL) {
      const GstStructure *s = gst_message_get_structure (msg);
      const GValue *series = gst_structure_get_value (s, "latency-series");
      guint64 failed = 0, lost = 0;

      gst_structure_get_uint64 (s, "failed", &failed);
      gst_structure_get_uint64 (s, "lost", &lost);
      g_string_append_printf (out, ", \"failed\": %" G_GUINT64_FORMAT
          ", \"lost\": %" G_GUINT64_FORMAT ", \"latency_ms\": [", failed, lost);
      for (guint i = 0; series && i < gst_value_array_get_size (series); i++)
        g_string_append_printf (out, "%s%.3f", i ? ", " : "",
            g_value_get_double (gst_value_array_get_value (series, i)));
      g_string_append (out, "]");
      gst_message_unref (msg);
    }
    encoded_append (out);
    g_string_append (out, "}");
    puts (out->str);
  }
  gst_object_unref (bus);
  gst_clear_object (&p->check);
  pair_free (p);
  g_free (line);
  return got ? 0 : 1;
}

/* ---- first-frame ---- */

static int
mode_first_frame (guint iterations, guint width, guint height, guint kbps)
{
  char *line = g_strdup_printf ("videotestsrc is-live=true "
      "pattern=zone-plate kx2=20 ky2=20 kt=1 ! video/x-raw,format=I420,"
      "width=%u,height=%u,framerate=30/1 ! legbastamp ! x264enc "
      "tune=zerolatency speed-preset=ultrafast bitrate=%u key-int-max=60 ! "
      "video/x-h264,profile=constrained-baseline ! rtph264pay "
      "config-interval=-1 pt=96 ! capsfilter caps=\"application/x-rtp,"
      "media=video,encoding-name=H264,payload=96,clock-rate=90000\"", width,
      height, kbps);
  GString *out = g_string_new ("{\"peer\": \"webrtcbin\", \"mode\": "
      "\"first-frame\", \"first_frame_ms\": [");
  guint failed = 0, ok = 0;

  for (guint i = 0; i < iterations; i++) {
    Pair *p;
    gint64 end, t = 0;

    g_mutex_lock (&lock);
    frames_out = 0;
    first_frame_us = 0;
    g_mutex_unlock (&lock);
    p = pair_new (line);
    end = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
    g_mutex_lock (&lock);
    while (frames_out == 0 && g_cond_wait_until (&cond, &lock, end));
    if (frames_out > 0)
      t = first_frame_us;
    g_mutex_unlock (&lock);
    /* a failed iteration keeps its place, as -1 */
    g_string_append_printf (out, "%s%.3f", i ? ", " : "",
        t != 0 ? (t - pair_started_us) / 1e3 : -1.0);
    if (t != 0)
      ok++;
    else
      failed++;
    gst_element_set_state (p->pipe, GST_STATE_NULL);
    gst_clear_object (&p->check);
    pair_free (p);
  }
  g_string_append_printf (out, "], \"failed\": %u, \"width\": %u, "
      "\"height\": %u, \"bitrate_kbps\": %u}", failed, width, height, kbps);
  puts (out->str);
  g_string_free (out, TRUE);
  g_free (line);
  return ok == iterations ? 0 : 1;
}

/* ---- mesh ---- */

/* legba-peer's sender line, up to the encoded track */
#define MESH_VIDEO_LINE "videotestsrc is-live=true pattern=zone-plate " \
  "kx2=20 ky2=20 kt=1 ! video/x-raw,format=I420,width=%u,height=%u," \
  "framerate=30/1 ! legbastamp ! x264enc name=enc tune=zerolatency " \
  "speed-preset=ultrafast bitrate=%u key-int-max=60 ! capsfilter " \
  "caps=\"video/x-h264,stream-format=byte-stream,alignment=au," \
  "profile=constrained-baseline\""
/* one remote's copy of the track: a queue that drops rather than stall
 * the encoder for the others, the payloader, the negotiated format */
#define MESH_SEND_LINE "queue max-size-buffers=0 max-size-bytes=0 " \
  "max-size-time=2000000000 leaky=upstream ! rtph264pay config-interval=-1 " \
  "aggregate-mode=zero-latency ! capsfilter caps=\"application/x-rtp," \
  "media=video,encoding-name=H264,payload=96,clock-rate=90000,ssrc=(uint)%u\""
/* a received video: the elements a room's receive chain has */
#define MESH_DECODE_LINE "rtph264depay request-keyframe=true " \
  "wait-for-keyframe=true ! video/x-h264,stream-format=avc,alignment=au ! " \
  "h264parse config-interval=-1 ! avdec_h264 ! legbastampcheck name=check " \
  "! fakesink sync=false async=false"

/* a remote participant: its webrtcbin and, once it comes, its video */
typedef struct
{
  char *id;
  gboolean offerer;             /* this process offers (the lower id) */
  GstElement *webrtc;
  GstWebRTCRTPTransceiver *video;
  guint32 ssrc;                 /* the SSRC our track goes under */
  GstWebRTCDataChannel *reliable;       /* the offerer's */
  guint16 sctp_id;
  gboolean sending;             /* our track is linked to it */
  /* its decoded video; under mesh_lock */
  GstElement *check;
  gint frames;                  /* atomic: frames out of the decoder */
  gint64 first_us;
  gint window_frames;
  guint64 window_lost;
} Remote;

typedef struct
{
  GMainLoop *loop;
  const char *identity;
  GstElement *pipe;
  GstElement *tee;              /* the encoded track, one branch a remote */
  GPtrArray *remotes;           /* Remote */
  guint width, height, kbps;
  gint64 started_us;
  gboolean decoding;            /* "decoding" printed */
  gboolean in_window;
  gboolean stopping;            /* "stop" came: close once every stream
                                 * has given a frame in the window */
  gint64 window_us;
  double window_cpu;
  gint window_encoded, window_keys;
  LossWindow window_loss;
} Mesh;

static GMutex mesh_lock;        /* the remotes' video */
static gint64 mesh_started_us;  /* the pipeline's PLAYING */

static GMutex out_lock;         /* standard output */

static void
print_line (const char *text)
{
  g_mutex_lock (&out_lock);
  puts (text);
  fflush (stdout);
  g_mutex_unlock (&out_lock);
}

/* a signalling message for the driver to hand to r: one JSON line */
static void
send_signal (Remote * r, JsonObject * o)
{
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);
  char *text;

  json_object_set_string_member (o, "to", r->id);
  json_node_take_object (node, o);
  text = json_to_string (node, FALSE);
  print_line (text);
  g_free (text);
  json_node_unref (node);
}

static void
send_description (Remote * r, GstWebRTCSessionDescription * desc)
{
  JsonObject *o = json_object_new ();
  char *sdp = gst_sdp_message_as_text (desc->sdp);

  json_object_set_string_member (o, "type",
      gst_webrtc_sdp_type_to_string (desc->type));
  json_object_set_string_member (o, "sdp", sdp);
  g_free (sdp);
  send_signal (r, o);
}

static void
on_mesh_candidate (GstElement * webrtc, guint mline, char *candidate,
    Remote * r)
{
  JsonObject *o;

  if (candidate == NULL || candidate[0] == '\0')
    return;
  o = json_object_new ();
  json_object_set_string_member (o, "type", "candidate");
  json_object_set_int_member (o, "mline", mline);
  json_object_set_string_member (o, "candidate", candidate);
  send_signal (r, o);
}

static GstPadProbeReturn
mesh_frame (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  Remote *r = data;

  if (g_atomic_int_add (&r->frames, 1) == 0) {
    g_mutex_lock (&mesh_lock);
    r->first_us = g_get_monotonic_time ();
    g_mutex_unlock (&mesh_lock);
    g_main_context_wakeup (NULL);
  }
  return GST_PAD_PROBE_OK;
}

/* a received stream (on webrtcbin's thread): video is decoded, anything
 * else discarded */
static void
on_mesh_pad_added (GstElement * webrtc, GstPad * pad, Remote * r)
{
  GstElement *pipe = GST_ELEMENT (GST_OBJECT_PARENT (webrtc));
  GstCaps *caps;
  gboolean video = FALSE;
  GError *error = NULL;
  GstElement *bin, *check;
  GstPad *sinkpad, *in;

  if (GST_PAD_DIRECTION (pad) != GST_PAD_SRC)
    return;
  caps = gst_pad_get_current_caps (pad);
  if (caps != NULL)
    video = g_strcmp0 (gst_structure_get_string (gst_caps_get_structure (caps,
                0), "media"), "video") == 0;
  gst_clear_caps (&caps);
  g_mutex_lock (&mesh_lock);
  if (r->check != NULL)
    video = FALSE;              /* one video a participant */
  g_mutex_unlock (&mesh_lock);
  bin = gst_parse_bin_from_description (video ? MESH_DECODE_LINE :
      "fakesink sync=false async=false", TRUE, &error);
  if (bin == NULL)
    g_error ("receiver line: %s", error->message);
  if (video) {
    check = gst_bin_get_by_name (GST_BIN (bin), "check");
    in = gst_element_get_static_pad (check, "sink");
    gst_pad_add_probe (in, GST_PAD_PROBE_TYPE_BUFFER, mesh_frame, r, NULL);
    gst_object_unref (in);
    g_mutex_lock (&mesh_lock);
    r->check = check;
    g_mutex_unlock (&mesh_lock);
  }
  gst_bin_add (GST_BIN (pipe), bin);
  gst_element_sync_state_with_parent (bin);
  sinkpad = gst_element_get_static_pad (bin, "sink");
  if (gst_pad_link (pad, sinkpad) != GST_PAD_LINK_OK)
    g_error ("could not link the stream from %s", r->id);
  gst_object_unref (sinkpad);
}

static const char *
enum_nick (GType type, gint value)
{
  GEnumClass *klass = g_type_class_ref (type);
  GEnumValue *v = g_enum_get_value (klass, value);
  const char *nick = v != NULL ? v->value_nick : "?";

  g_type_class_unref (klass);   /* enum classes stay once made */
  return nick;
}

/* the state of the DTLS transport under the video transceiver (all of
 * the connection's, bundled) */
static const char *
mesh_dtls_state (Remote * r)
{
  GstWebRTCRTPReceiver *receiver = NULL;
  GstWebRTCDTLSTransport *transport = NULL;
  GstWebRTCDTLSTransportState state;
  const char *nick = "none";

  if (r->video == NULL)
    return nick;
  g_object_get (r->video, "receiver", &receiver, NULL);
  if (receiver != NULL)
    g_object_get (receiver, "transport", &transport, NULL);
  if (transport != NULL) {
    g_object_get (transport, "state", &state, NULL);
    nick = enum_nick (GST_TYPE_WEBRTC_DTLS_TRANSPORT_STATE, state);
  }
  g_clear_object (&transport);
  g_clear_object (&receiver);
  return nick;
}

/* a failed connection is for good (nothing here replaces it): said on
 * standard error with what failed, ICE or DTLS, and when */
static void
on_mesh_state (GstElement * webrtc, GParamSpec * pspec, Remote * r)
{
  GstWebRTCPeerConnectionState state;
  GstWebRTCICEConnectionState ice;

  g_object_get (webrtc, "connection-state", &state, "ice-connection-state",
      &ice, NULL);
  if (state == GST_WEBRTC_PEER_CONNECTION_STATE_FAILED)
    g_printerr ("mesh: the connection with %s failed %.3f s after start "
        "(ICE %s, DTLS %s)\n", r->id,
        (g_get_monotonic_time () - mesh_started_us) / 1e6,
        enum_nick (GST_TYPE_WEBRTC_ICE_CONNECTION_STATE, ice),
        mesh_dtls_state (r));
}

/* webrtcbin's sink pad for the video transceiver: the one it made when
 * the session was negotiated, else a new one for its m-line */
static GstPad *
video_sink_pad (Remote * r)
{
  GstPad *found = NULL;
  guint mline = 0;
  char name[32];

  GST_OBJECT_LOCK (r->webrtc);
  for (GList * l = GST_ELEMENT (r->webrtc)->sinkpads; l; l = l->next) {
    GstWebRTCRTPTransceiver *t = NULL;

    if (g_object_class_find_property (G_OBJECT_GET_CLASS (l->data),
            "transceiver") == NULL)
      continue;
    g_object_get (l->data, "transceiver", &t, NULL);
    if (t == r->video && found == NULL)
      found = gst_object_ref (l->data);
    g_clear_object (&t);
  }
  GST_OBJECT_UNLOCK (r->webrtc);
  if (found != NULL)
    return found;
  g_object_get (r->video, "mlineindex", &mline, NULL);
  g_snprintf (name, sizeof name, "sink_%u", mline);
  return gst_element_request_pad_simple (r->webrtc, name);
}

typedef struct
{
  Mesh *m;
  Remote *r;
} MeshRemote;

/* once the session is negotiated (on the main context): our track, one
 * more branch of the tee */
/* As in a room (lib/legba/room/legba-room-media.c send_query): the allocation
 * and drain queries the encoder sends down the tee are answered at the
 * entry of each remote's copy, not kept waiting behind a queue whose
 * remote takes nothing yet (webrtcbin holds a track's data until DTLS is
 * done) or never will (a failed connection): that would stop the encoder
 * for every remote each time one more is linked. */
static GstPadProbeReturn
branch_query (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  switch (GST_QUERY_TYPE (GST_PAD_PROBE_INFO_QUERY (info))) {
    case GST_QUERY_ALLOCATION:
    case GST_QUERY_DRAIN:
      return GST_PAD_PROBE_HANDLED;
    default:
      return GST_PAD_PROBE_OK;
  }
}

static gboolean
mesh_link_track (gpointer data)
{
  MeshRemote *mr = data;
  Remote *r = mr->r;
  char *line = g_strdup_printf (MESH_SEND_LINE, r->ssrc);
  GError *error = NULL;
  GstElement *bin = gst_parse_bin_from_description (line, TRUE, &error);
  GstPad *src, *sink, *teepad;

  if (bin == NULL)
    g_error ("send line: %s", error->message);
  g_free (line);
  if (r->sending) {
    gst_object_unref (bin);
    return G_SOURCE_REMOVE;
  }
  r->sending = TRUE;
  gst_bin_add (GST_BIN (mr->m->pipe), bin);
  src = gst_element_get_static_pad (bin, "src");
  sink = video_sink_pad (r);
  if (sink == NULL || gst_pad_link (src, sink) != GST_PAD_LINK_OK)
    g_error ("webrtcbin refused the track for %s", r->id);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_element_sync_state_with_parent (bin);
  teepad = gst_element_request_pad_simple (mr->m->tee, "src_%u");
  sink = gst_element_get_static_pad (bin, "sink");
  gst_pad_add_probe (sink, GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM |
      GST_PAD_PROBE_TYPE_PUSH, branch_query, NULL, NULL);
  if (gst_pad_link (teepad, sink) != GST_PAD_LINK_OK)
    g_error ("could not link the track for %s", r->id);
  gst_object_unref (sink);
  gst_object_unref (teepad);
  return G_SOURCE_REMOVE;
}

static void
on_negotiated (GstPromise * promise, gpointer data)
{
  GstPromiseResult result = gst_promise_wait (promise);

  gst_promise_unref (promise);
  if (result != GST_PROMISE_RESULT_REPLIED)
    return;                     /* shutting down */
  g_main_context_invoke_full (NULL, G_PRIORITY_DEFAULT, mesh_link_track,
      g_memdup2 (data, sizeof (MeshRemote)), g_free);
}

static GstPromise *
negotiated_promise (MeshRemote * mr)
{
  return gst_promise_new_with_change_func (on_negotiated, mr, NULL);
}

/* a description made (offer or answer): sent on, then set */
static void
on_mesh_description (GstPromise * promise, gpointer data)
{
  MeshRemote *mr = data;
  Remote *r = mr->r;
  const GstStructure *reply = gst_promise_get_reply (promise);
  const char *field = r->offerer ? "offer" : "answer";
  GstWebRTCSessionDescription *desc = NULL;

  if (gst_promise_wait (promise) != GST_PROMISE_RESULT_REPLIED) {
    gst_promise_unref (promise);
    return;                     /* shutting down */
  }
  if (reply != NULL)
    gst_structure_get (reply, field, GST_TYPE_WEBRTC_SESSION_DESCRIPTION,
        &desc, NULL);
  gst_promise_unref (promise);
  if (desc == NULL)
    g_error ("mesh: no %s for %s", field, r->id);
  /* the description leaves before any of its candidates */
  send_description (r, desc);
  g_signal_emit_by_name (r->webrtc, "set-local-description", desc,
      r->offerer ? NULL : negotiated_promise (mr));
  gst_webrtc_session_description_free (desc);
}

/* the video transceiver that sends our track and receives theirs (H.264
 * only, as a room offers the codec it publishes; its SSRC announced) and
 * the receive-only audio one of a room that publishes no audio */
static void
add_mesh_transceivers (Remote * r)
{
  GstCaps *video = gst_caps_new_empty (), *audio = gst_caps_new_empty ();
  GstStructure *h264 = rtp_structure ("video", "H264", 90000, 96, r->offerer);
  GstStructure *opus = rtp_structure ("audio", "OPUS", 48000, 111,
      r->offerer);
  GstWebRTCRTPTransceiver *t = NULL;

  gst_structure_set (h264, "packetization-mode", G_TYPE_STRING, "1",
      "ssrc", G_TYPE_UINT, r->ssrc, NULL);
  if (r->offerer)
    gst_structure_set (h264, "profile-level-id", G_TYPE_STRING, "42e01f",
        "level-asymmetry-allowed", G_TYPE_STRING, "1", NULL);
  else
    gst_structure_set (h264, "profile", G_TYPE_STRING, "constrained-baseline",
        NULL);
  gst_caps_append_structure (video, h264);
  gst_structure_set (opus, "encoding-params", G_TYPE_STRING, "2", NULL);
  gst_caps_append_structure (audio, opus);
  g_signal_emit_by_name (r->webrtc, "add-transceiver",
      GST_WEBRTC_RTP_TRANSCEIVER_DIRECTION_SENDRECV, video, &r->video);
  if (r->video == NULL)
    g_error ("add-transceiver failed");
  g_object_set (r->video, "do-nack", TRUE, NULL);
  g_signal_emit_by_name (r->webrtc, "add-transceiver",
      GST_WEBRTC_RTP_TRANSCEIVER_DIRECTION_RECVONLY, audio, &t);
  g_clear_object (&t);
  gst_caps_unref (video);
  gst_caps_unref (audio);
}

/* the offerer's session: transceivers and the reliable channel (a room
 * makes its lossy one only to send on it), then the offer */
static void
mesh_offer (Mesh * m, Remote * r)
{
  MeshRemote *mr = g_new (MeshRemote, 1);

  mr->m = m;
  mr->r = r;
  g_object_set_data_full (G_OBJECT (r->webrtc), "mesh-remote", mr, g_free);
  add_mesh_transceivers (r);
  g_signal_emit_by_name (r->webrtc, "create-data-channel", "legba", NULL,
      &r->reliable);
  if (r->reliable == NULL)
    g_error ("create-data-channel failed");
  g_signal_emit_by_name (r->webrtc, "create-offer", NULL,
      gst_promise_new_with_change_func (on_mesh_description, mr, NULL));
}

static GstWebRTCSessionDescription *
parse_sdp (GstWebRTCSDPType type, const char *text)
{
  GstSDPMessage *sdp = NULL;

  if (text == NULL || gst_sdp_message_new_from_text (text, &sdp) != GST_SDP_OK) {
    g_printerr ("mesh: an unreadable description\n");
    gst_sdp_message_free (sdp);
    return NULL;
  }
  return gst_webrtc_session_description_new (type, sdp);
}

/* a message the driver hands on from another participant */
static void
mesh_signal (Mesh * m, const char *line)
{
  JsonParser *parser = json_parser_new ();
  JsonObject *o = NULL;
  const char *from = NULL, *type = NULL;
  Remote *r = NULL;
  GstWebRTCSessionDescription *desc;

  if (json_parser_load_from_data (parser, line, -1, NULL) &&
      JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))) {
    o = json_node_get_object (json_parser_get_root (parser));
    from = json_object_get_string_member_with_default (o, "from", NULL);
    type = json_object_get_string_member_with_default (o, "type", NULL);
  }
  for (guint i = 0; from != NULL && i < m->remotes->len; i++)
    if (strcmp (((Remote *) m->remotes->pdata[i])->id, from) == 0)
      r = m->remotes->pdata[i];
  if (r == NULL || type == NULL) {
    g_printerr ("mesh: a message from no participant: %s\n", line);
  } else if (strcmp (type, "offer") == 0 && !r->offerer &&
      g_object_get_data (G_OBJECT (r->webrtc), "mesh-remote") != NULL) {
    g_printerr ("mesh: a second offer from %s, ignored\n", from);
  } else if (strcmp (type, "offer") == 0 && !r->offerer) {
    MeshRemote *mr = g_new (MeshRemote, 1);

    mr->m = m;
    mr->r = r;
    g_object_set_data_full (G_OBJECT (r->webrtc), "mesh-remote", mr, g_free);
    desc = parse_sdp (GST_WEBRTC_SDP_TYPE_OFFER,
        json_object_get_string_member_with_default (o, "sdp", NULL));
    if (desc != NULL) {
      add_mesh_transceivers (r);
      g_signal_emit_by_name (r->webrtc, "set-remote-description", desc, NULL);
      g_signal_emit_by_name (r->webrtc, "create-answer", NULL,
          gst_promise_new_with_change_func (on_mesh_description, mr, NULL));
      gst_webrtc_session_description_free (desc);
    }
  } else if (strcmp (type, "answer") == 0 && r->offerer) {
    desc = parse_sdp (GST_WEBRTC_SDP_TYPE_ANSWER,
        json_object_get_string_member_with_default (o, "sdp", NULL));
    if (desc != NULL) {
      g_signal_emit_by_name (r->webrtc, "set-remote-description", desc,
          negotiated_promise (g_object_get_data (G_OBJECT (r->webrtc),
                  "mesh-remote")));
      gst_webrtc_session_description_free (desc);
    }
  } else if (strcmp (type, "candidate") == 0) {
    const char *candidate =
        json_object_get_string_member_with_default (o, "candidate", NULL);

    if (candidate != NULL)
      g_signal_emit_by_name (r->webrtc, "add-ice-candidate",
          (guint) json_object_get_int_member_with_default (o, "mline", 0),
          candidate);
  } else {
    g_printerr ("mesh: unexpected %s from %s\n", type, from);
  }
  g_object_unref (parser);
}

/* one association id per webrtcbin, unique in the process */
static void
on_mesh_element_added (GstBin * bin, GstBin * sub, GstElement * element,
    Mesh * m)
{
  GstElementFactory *f = gst_element_get_factory (element);
  const char *name = f ? GST_OBJECT_NAME (f) : "";

  if (strcmp (name, "sctpenc") != 0 && strcmp (name, "sctpdec") != 0)
    return;
  for (guint i = 0; i < m->remotes->len; i++) {
    Remote *r = m->remotes->pdata[i];
    GstObject *up = GST_OBJECT (element);

    while (up != NULL && up != GST_OBJECT (r->webrtc))
      up = GST_OBJECT_PARENT (up);
    if (up != NULL)
      g_object_set (element, "sctp-association-id", r->sctp_id, NULL);
  }
}

static guint
mesh_streams_decoding (Mesh * m)
{
  guint n = 0;

  g_mutex_lock (&mesh_lock);
  for (guint i = 0; i < m->remotes->len; i++)
    if (((Remote *) m->remotes->pdata[i])->first_us != 0)
      n++;
  g_mutex_unlock (&mesh_lock);
  return n;
}

/* every stream has given a frame since the window opened */
static gboolean
mesh_window_full (Mesh * m)
{
  gboolean all = TRUE;

  for (guint i = 0; i < m->remotes->len; i++) {
    Remote *r = m->remotes->pdata[i];

    if (g_atomic_int_get (&r->frames) <= r->window_frames)
      all = FALSE;
  }
  return all;
}

static void
mesh_window_open (Mesh * m)
{
  m->in_window = TRUE;
  m->window_cpu = cpu_s ();
  m->window_us = g_get_monotonic_time ();
  m->window_encoded = census_encoded_frames ();
  m->window_keys = census_encoded_key_frames ();
  loss_window_open (&m->window_loss);
  /* the pipeline's graph, with GST_DEBUG_DUMP_DOT_DIR set */
  GST_DEBUG_BIN_TO_DOT_FILE (GST_BIN (m->pipe), GST_DEBUG_GRAPH_SHOW_ALL,
      m->identity);
  g_mutex_lock (&mesh_lock);
  for (guint i = 0; i < m->remotes->len; i++) {
    Remote *r = m->remotes->pdata[i];

    r->window_frames = g_atomic_int_get (&r->frames);
    r->window_lost = 0;
    if (r->check != NULL)
      g_object_get (r->check, "frames-lost", &r->window_lost, NULL);
  }
  g_mutex_unlock (&mesh_lock);
}

static void
mesh_window_close (Mesh * m)
{
  double cpu = cpu_s () - m->window_cpu;
  double s = (g_get_monotonic_time () - m->window_us) / 1e6;
  GString *out = g_string_new (NULL);

  g_string_append_printf (out, "{\"peer\": \"webrtcbin\", \"mode\": \"mesh\", "
      "\"identity\": \"%s\", \"window_s\": %.3f, \"cpu_s\": %.4f, "
      "\"cpu_pct\": %.2f, \"rss_kib\": %.0f, \"threads\": %u, "
      "\"frames_encoded\": %d, \"key_frames\": %d, ",
      m->identity, s, cpu, 100 * cpu / s, rss_kib (),
      census_count_entries ("/proc/self/task"),
      census_encoded_frames () - m->window_encoded,
      census_encoded_key_frames () - m->window_keys);
  loss_window_print (&m->window_loss, out);
  g_string_append (out, "\"streams\": [");
  g_mutex_lock (&mesh_lock);
  for (guint i = 0, n = 0; i < m->remotes->len; i++) {
    Remote *r = m->remotes->pdata[i];
    gint frames = g_atomic_int_get (&r->frames) - r->window_frames;
    guint64 valid = 0, failed = 0, lost = 0;
    gdouble p50 = -1, p95 = -1;

    if (r->check == NULL)
      continue;
    g_object_get (r->check, "frames-valid", &valid, "frames-failed",
        &failed, "frames-lost", &lost, "latency-p50", &p50, "latency-p95",
        &p95, NULL);
    /* lost: stamped frames of the window never decoded (counter gaps) */
    g_string_append_printf (out, "%s{\"from\": \"%s\", \"frames\": %d, "
        "\"fps\": %.3f, \"lost\": %" G_GUINT64_FORMAT
        ", \"first_frame_ms\": %.1f, \"stamps_valid\": %" G_GUINT64_FORMAT
        ", \"stamps_failed\": %" G_GUINT64_FORMAT
        ", \"latency_p50_ms\": %.1f, \"latency_p95_ms\": %.1f}",
        n++ ? ", " : "",
        r->id, frames, frames / s, lost - r->window_lost,
        r->first_us ? (r->first_us - m->started_us) / 1e3 : -1.0, valid,
        failed, p50, p95);
  }
  g_mutex_unlock (&mesh_lock);
  g_string_append (out, "]}");
  print_line (out->str);
  g_string_free (out, TRUE);
  m->in_window = FALSE;
  m->stopping = FALSE;
}

static gboolean
mesh_poll (gpointer data)
{
  Mesh *m = data;
  guint n = mesh_streams_decoding (m);

  if (m->in_window && m->stopping && mesh_window_full (m))
    mesh_window_close (m);
  if (!m->decoding && n >= m->remotes->len) {
    char *line = g_strdup_printf ("{\"event\": \"decoding\", "
        "\"identity\": \"%s\", \"streams\": %u, \"ms\": %.1f}", m->identity,
        n, (g_get_monotonic_time () - m->started_us) / 1e3);

    m->decoding = TRUE;
    print_line (line);
    g_free (line);
  }
  return G_SOURCE_CONTINUE;
}

/* the driver's lines: start, stop, or a message from another participant;
 * end of input leaves */
static gboolean
on_mesh_input (GIOChannel * in, GIOCondition condition, gpointer data)
{
  Mesh *m = data;
  char *line = NULL;
  GIOStatus status = g_io_channel_read_line (in, &line, NULL, NULL, NULL);

  if (status == G_IO_STATUS_AGAIN)
    return G_SOURCE_CONTINUE;
  if (status != G_IO_STATUS_NORMAL) {
    g_main_loop_quit (m->loop);
    return G_SOURCE_REMOVE;
  }
  g_strstrip (line);
  if (strcmp (line, "start") == 0) {
    mesh_window_open (m);
  } else if (strcmp (line, "stop") == 0) {
    /* a starved stream keeps the window open until its next frame */
    m->stopping = m->in_window;
    if (m->in_window && mesh_window_full (m))
      mesh_window_close (m);
  } else if (line[0] == '{') {
    mesh_signal (m, line);
  } else {
    g_printerr ("mesh: unknown command '%s'\n", line);
  }
  g_free (line);
  return G_SOURCE_CONTINUE;
}

static void
remote_free (Remote * r)
{
  g_free (r->id);
  g_clear_object (&r->video);
  g_clear_object (&r->reliable);
  gst_clear_object (&r->check);
  g_free (r);
}

static int
mode_mesh (const char *identity, const char *peers, guint width,
    guint height, guint kbps)
{
  Mesh m = { 0 };
  char **ids = g_strsplit (peers, ",", -1);
  char *line = g_strdup_printf (MESH_VIDEO_LINE, width, height, kbps);
  GError *error = NULL;
  GstElement *src;
  GIOChannel *in;
  guint poll, watch;

  m.identity = identity;
  m.loop = g_main_loop_new (NULL, FALSE);
  m.remotes = g_ptr_array_new_with_free_func ((GDestroyNotify) remote_free);
  m.pipe = gst_pipeline_new ("mesh");
  g_signal_connect (m.pipe, "deep-element-added",
      G_CALLBACK (on_mesh_element_added), &m);
  src = gst_parse_bin_from_description (line, TRUE, &error);
  if (src == NULL)
    g_error ("sender line: %s", error->message);
  g_free (line);
  census_count_encoder (src);
  m.tee = gst_element_factory_make ("tee", "track");
  /* before the first remote is linked, the encoder runs on */
  g_object_set (m.tee, "allow-not-linked", TRUE, NULL);
  gst_bin_add_many (GST_BIN (m.pipe), src, m.tee, NULL);
  if (!gst_element_link (src, m.tee))
    g_error ("could not link the sender line");
  for (guint i = 0; ids[i] != NULL; i++) {
    Remote *r;
    char name[64];

    if (ids[i][0] == '\0' || strcmp (ids[i], identity) == 0)
      continue;
    r = g_new0 (Remote, 1);
    r->id = g_strdup (ids[i]);
    r->offerer = strcmp (identity, ids[i]) < 0;
    r->ssrc = (guint32) g_random_int_range (1, G_MAXINT32);
    r->sctp_id = (guint16) (m.remotes->len + 1);
    g_snprintf (name, sizeof name, "to-%s", ids[i]);
    r->webrtc = gst_element_factory_make ("webrtcbin", name);
    g_object_set (r->webrtc, "bundle-policy",
        GST_WEBRTC_BUNDLE_POLICY_MAX_BUNDLE, "latency", 100, NULL);
    configure_ice (r->webrtc);
    loss_watch (r->webrtc);
    g_signal_connect (r->webrtc, "on-ice-candidate",
        G_CALLBACK (on_mesh_candidate), r);
    g_signal_connect (r->webrtc, "pad-added", G_CALLBACK (on_mesh_pad_added),
        r);
    g_signal_connect (r->webrtc, "notify::connection-state",
        G_CALLBACK (on_mesh_state), r);
    g_ptr_array_add (m.remotes, r);
    gst_bin_add (GST_BIN (m.pipe), r->webrtc);
  }
  g_strfreev (ids);
  if (m.remotes->len == 0)
    g_error ("mesh: --peers names no other participant");
  gst_element_set_state (m.pipe, GST_STATE_PLAYING);
  m.started_us = mesh_started_us = g_get_monotonic_time ();
  for (guint i = 0; i < m.remotes->len; i++)
    if (((Remote *) m.remotes->pdata[i])->offerer)
      mesh_offer (&m, m.remotes->pdata[i]);
  poll = g_timeout_add (100, mesh_poll, &m);
  in = g_io_channel_unix_new (0);
  watch = g_io_add_watch (in, G_IO_IN | G_IO_HUP | G_IO_ERR, on_mesh_input, &m);
  g_main_loop_run (m.loop);
  g_source_remove (poll);
  if (g_main_context_find_source_by_id (NULL, watch) != NULL)
    g_source_remove (watch);
  g_io_channel_unref (in);
  gst_element_set_state (m.pipe, GST_STATE_NULL);
  while (g_main_context_iteration (NULL, FALSE));
  gst_object_unref (m.pipe);
  g_ptr_array_unref (m.remotes);
  g_main_loop_unref (m.loop);
  return m.decoding ? 0 : 1;
}

int
main (int argc, char **argv)
{
  guint iterations = 10, count = 500, frames = 300, width = 1280,
      height = 720, kbps = 1500;
  gint64 bytes = 32 * 1024 * 1024;
  gint size = 1024;
  double rate = 100, seconds = 120, loss = 0;
  char *identity = NULL, *peers = NULL;
  int rc;
  GOptionEntry entries[] = {
    {"iterations", 0, 0, G_OPTION_ARG_INT, &iterations, "setup: pairs", "N"},
    {"pacing", 0, 0, G_OPTION_ARG_INT, &pacing_ms, "stun-pacing-timer", "MS"},
    {"like-legba", 0, 0, G_OPTION_ARG_NONE, &like_legba,
          "data pairs: the transceivers and two channels of Legba's rooms",
        NULL},
    {"bytes", 0, 0, G_OPTION_ARG_INT64, &bytes, "bulk: bytes", "B"},
    {"size", 0, 0, G_OPTION_ARG_INT, &size, "message size", "S"},
    {"count", 0, 0, G_OPTION_ARG_INT, &count, "rtt messages / pairs", "N"},
    {"no-teardown", 0, 0, G_OPTION_ARG_NONE, &no_teardown,
        "pairs: exit with the pairs up once the figures are printed", NULL},
    {"rate", 0, 0, G_OPTION_ARG_DOUBLE, &rate, "rtt: messages/s", "R"},
    {"seconds", 0, 0, G_OPTION_ARG_DOUBLE, &seconds, "pairs: bound", "S"},
    {"frames", 0, 0, G_OPTION_ARG_INT, &frames, "call: frames", "N"},
    {"width", 0, 0, G_OPTION_ARG_INT, &width, "call: width", "W"},
    {"height", 0, 0, G_OPTION_ARG_INT, &height, "call: height", "H"},
    {"bitrate", 0, 0, G_OPTION_ARG_INT, &kbps, "call: kbit/s", "K"},
    {"sync", 0, 0, G_OPTION_ARG_NONE, &call_sync,
          "call: read the stamps after a clocksync (as a synced sink shows them)",
        NULL},
    {"latency", 0, 0, G_OPTION_ARG_INT, &call_latency,
        "call: the jitter buffer's latency", "MS"},
    {"identity", 0, 0, G_OPTION_ARG_STRING, &identity,
        "mesh: this participant's id", "ID"},
    {"peers", 0, 0, G_OPTION_ARG_STRING, &peers,
        "mesh: the other participants' ids, comma-separated", "IDS"},
    {"loss", 0, 0, G_OPTION_ARG_DOUBLE, &loss,
        "mesh: drop each RTP packet sent with this probability", "P"},
    {NULL}
  };
  GOptionContext *ctx = g_option_context_new ("setup|bulk|rtt|pairs|call|"
      "first-frame|mesh");
  GError *error = NULL;

  census_raise_fd_limit ();
  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_add_group (ctx, gst_init_get_option_group ());
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || argc != 2) {
    g_printerr ("%s\n", error ? error->message : "give one mode");
    return 2;
  }
  g_option_context_free (ctx);
  loss_set_probability (loss);
  if (!loss_option_ok (argv[1]))
    return 2;
  if (strcmp (argv[1], "setup") == 0)
    return mode_setup (iterations);
  if (strcmp (argv[1], "bulk") == 0)
    return mode_bulk (bytes, size);
  if (strcmp (argv[1], "rtt") == 0)
    return mode_rtt (count, rate, size);
  if (strcmp (argv[1], "pairs") == 0)
    return mode_pairs (count, seconds);
  if (strcmp (argv[1], "call") == 0)
    return mode_call (frames, width, height, kbps);
  if (strcmp (argv[1], "first-frame") == 0)
    return mode_first_frame (iterations, width, height, kbps);
  if (strcmp (argv[1], "mesh") == 0 && identity != NULL && peers != NULL) {
    rc = mode_mesh (identity, peers, width, height, kbps);
    g_free (identity);
    g_free (peers);
    return rc;
  }
  g_printerr ("unknown mode %s (mesh: --identity and --peers)\n", argv[1]);
  g_free (identity);
  g_free (peers);
  return 2;
}
