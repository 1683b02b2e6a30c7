/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The benchmarks' plain-webrtcbin peer: two webrtcbins in this process,
 * the offer, answer and candidates handed across directly, no signalling
 * server and no Legba. It is the floor Legba's rooms add to.
 *
 *   webrtcbin-peer setup [--iterations N] [--pacing MS]
 *   webrtcbin-peer bulk  [--bytes B] [--size S]
 *   webrtcbin-peer rtt   [--count N] [--rate R] [--size S]
 *   webrtcbin-peer pairs [--count N] [--seconds S]
 *   webrtcbin-peer call  [--frames N] [--width W --height H] [--bitrate KBPS]
 *   webrtcbin-peer first-frame [--iterations N] [--width W --height H]
 *                        [--bitrate KBPS]
 *
 * first-frame: the sender's stamped H.264 track of a moving zone plate
 * (as legba-peer's), timed from the pipeline going to PLAYING (which
 * starts the negotiation) to the first frame out of b's decoder; the
 * first iteration is the process's first peer connection.
 *
 * Prints one JSON object on standard output. ICE: host candidates on
 * 127.0.0.1 only (libnice leaves loopback out by default, so it is added
 * to each agent), no STUN server, as for every peer of the suite.
 * --pacing sets libnice's stun-pacing-timer (default: libnice's 20 ms).
 *
 * --like-legba (data pairs: setup, bulk, rtt, pairs): the session a pair
 * of Legba's rooms describes when neither publishes (ROOM-PROTOCOL.md 5
 * and 6), made with webrtcbin alone: a video and an audio transceiver,
 * receive-only, on each side (video: H.264 and VP8 with NACK, PLI, FIR
 * and transport-cc feedback and its header extension, NACK on; audio:
 * Opus), and the two data channels `legba` (ordered, reliable) and
 * `legba-lossy` (unordered, max-retransmits 0); the offer is made once
 * all of it is added, as a room does. A pair is open when both channels
 * are open on both sides. Without it: one reliable channel `bench`, no
 * transceiver.
 */
#include <gst/gst.h>
#include <gst/sdp/sdp.h>
#include <gst/webrtc/webrtc.h>
#include <nice/agent.h>
#include <sys/resource.h>
#include <malloc.h>
#include <string.h>
#include <stdio.h>

#include "census.h"
#include <stdlib.h>

typedef struct
{
  GstElement *pipe;
  GstElement *a, *b;
  GstWebRTCDataChannel *dca, *dcb;
  GstElement *check;
  gboolean open_a, open_b, failed;
  guint channels_a, channels_b; /* open so far (--like-legba: two each) */
  GstWebRTCDataChannel *lossy;  /* --like-legba: a's second channel */
  guint16 sctp_id;
} Pair;

static GMutex lock;
static GCond cond;
static guint pacing_ms;
static gboolean like_legba;
static guint16 next_sctp_id = 1;

/* bulk and rtt counters, under lock */
static guint64 received_bytes;
static guint64 received_msgs;
static GArray *rtts;            /* gdouble ms */
static guint64 frames_out;
static gint64 first_frame_us;   /* under lock: the first frame out */
static gint64 pair_started_us;  /* the last pair_new()'s PLAYING */

static gboolean
pair_open (Pair * p)
{
  return p->open_a && p->open_b;
}

static gboolean
wait_open (Pair * p, double seconds)
{
  gint64 end = g_get_monotonic_time () + (gint64) (seconds * G_USEC_PER_SEC);
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
  p->channels_a++;
  p->open_a = p->channels_a == (like_legba ? 2 : 1);
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
  p->channels_b++;
  p->open_b = p->channels_b == (like_legba ? 2 : 1);
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
    gst_bin_add (GST_BIN (p->pipe), src);
    gst_element_link (src, p->a);
    /* the jitter buffer's latency Legba's rooms use (webrtcbin: 200) */
    g_object_set (p->a, "latency", 100, NULL);
    g_object_set (p->b, "latency", 100, NULL);
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
    GstStructure *lossy = gst_structure_new ("options", "ordered",
        G_TYPE_BOOLEAN, FALSE, "max-retransmits", G_TYPE_INT, 0, NULL);

    g_signal_emit_by_name (p->a, "create-data-channel", "legba-lossy", lossy,
        &p->lossy);
    gst_structure_free (lossy);
    if (p->lossy == NULL)
      g_error ("create-data-channel failed");
    g_signal_connect (p->lossy, "on-open", G_CALLBACK (on_open_a), p);
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
  g_clear_object (&p->lossy);
  g_clear_object (&p->dcb);
  gst_object_unref (p->pipe);
  g_free (p);
}

/* ---- process figures ---- */

/* ---- modes ---- */

static void
print_series (GString * out, const char *name, GArray * values)
{
  g_string_append_printf (out, "\"%s\": [", name);
  for (guint i = 0; i < values->len; i++)
    g_string_append_printf (out, "%s%.4f", i ? ", " : "",
        g_array_index (values, double, i));
  g_string_append (out, "]");
}

static int
mode_setup (guint iterations)
{
  GArray *times = g_array_new (FALSE, FALSE, sizeof (double));
  GString *out =
      g_string_new ("{\"peer\": \"webrtcbin\", \"mode\": \"setup\", ");
  guint failed = 0;

  for (guint i = 0; i < iterations; i++) {
    double t0 = now_ms (), t;
    Pair *p = pair_new (NULL);

    if (wait_open (p, 30)) {
      t = now_ms () - t0;
      g_array_append_val (times, t);
    } else {
      failed++;
    }
    pair_free (p);
  }
  print_series (out, "setup_ms", times);
  g_string_append_printf (out, ", \"failed\": %u, \"pacing_ms\": %u}", failed,
      pacing_ms);
  puts (out->str);
  return times->len ? 0 : 1;
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

static int
mode_pairs (guint count, double seconds)
{
  GPtrArray *pairs = g_ptr_array_new ();
  double rss0 = rss_kib (), heap0 = heap_kib (), heap1 = 0, t0 = now_ms ();
  guint fds0 = census_count_entries ("/proc/self/fd");
  guint threads0 = census_count_entries ("/proc/self/task");
  guint connected = 0;
  const char *stop = "count";
  Census before, first = { 0 }, last;
  GString *out;

  CensusHeadroom room;
  const char *why;

  census_take (&before);
  census_headroom_init (&room);
  for (guint i = 0; i < count; i++) {
    Pair *p;

    if ((why = census_no_room (&room)) != NULL) {
      stop = why;
      break;
    }
    p = pair_new (NULL);

    g_ptr_array_add (pairs, p);
    if (!wait_open (p, 30)) {
      stop = "a pair did not connect within 30 s";
      break;
    }
    connected++;
    room.pairs = connected;
    if (connected == 1) {
      heap1 = heap_kib ();
      census_take (&first);
    }
    if (now_ms () - t0 > seconds * 1000) {
      stop = "time bound";
      break;
    }
  }
  out = g_string_new (NULL);
  g_string_append_printf (out, "{\"peer\": \"webrtcbin\", "
      "\"mode\": \"pairs\", \"asked\": %u, \"connected\": %u, "
      "\"stopped\": \"%s\", \"seconds\": %.2f, "
      "\"rss_kib_per_pair\": %.1f, \"fds_per_pair\": %.2f, "
      "\"threads_per_pair\": %.2f, \"heap_kib_per_pair\": %.1f, "
      "\"heap_kib_per_pair_after_first\": %.1f", count,
      connected, stop, (now_ms () - t0) / 1000,
      connected ? (rss_kib () - rss0) / connected : 0.0,
      connected ? (double) (census_count_entries ("/proc/self/fd") -
          fds0) / connected : 0.0,
      connected ? (double) (census_count_entries ("/proc/self/task") -
          threads0) / connected : 0.0,
      connected ? (heap_kib () - heap0) / connected : 0.0,
      connected > 1 ? (heap_kib () - heap1) / (connected - 1) : 0.0);
  if (connected > 0) {
    census_take (&last);
    census_append_json (out, &before, &first, &last, connected);
    census_clear (&last);
  }
  g_string_append (out, "}");
  puts (out->str);
  fflush (stdout);
  g_string_free (out, TRUE);
  census_clear (&before);
  census_clear (&first);
  for (guint i = 0; i < pairs->len; i++)
    pair_free (pairs->pdata[i]);
  g_ptr_array_unref (pairs);
  return connected ? 0 : 1;
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
  sink = gst_parse_bin_from_description ("rtph264depay ! avdec_h264 ! "
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
      "framerate=30/1 ! legbastamp ! x264enc tune=zerolatency "
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

int
main (int argc, char **argv)
{
  guint iterations = 10, count = 500, frames = 300, width = 1280,
      height = 720, kbps = 1500;
  gint64 bytes = 32 * 1024 * 1024;
  gint size = 1024;
  double rate = 100, seconds = 120;
  GOptionEntry entries[] = {
    {"iterations", 0, 0, G_OPTION_ARG_INT, &iterations, "setup: pairs", "N"},
    {"pacing", 0, 0, G_OPTION_ARG_INT, &pacing_ms, "stun-pacing-timer", "MS"},
    {"like-legba", 0, 0, G_OPTION_ARG_NONE, &like_legba,
          "data pairs: the transceivers and two channels of Legba's rooms",
        NULL},
    {"bytes", 0, 0, G_OPTION_ARG_INT64, &bytes, "bulk: bytes", "B"},
    {"size", 0, 0, G_OPTION_ARG_INT, &size, "message size", "S"},
    {"count", 0, 0, G_OPTION_ARG_INT, &count, "rtt messages / pairs", "N"},
    {"rate", 0, 0, G_OPTION_ARG_DOUBLE, &rate, "rtt: messages/s", "R"},
    {"seconds", 0, 0, G_OPTION_ARG_DOUBLE, &seconds, "pairs: bound", "S"},
    {"frames", 0, 0, G_OPTION_ARG_INT, &frames, "call: frames", "N"},
    {"width", 0, 0, G_OPTION_ARG_INT, &width, "call: width", "W"},
    {"height", 0, 0, G_OPTION_ARG_INT, &height, "call: height", "H"},
    {"bitrate", 0, 0, G_OPTION_ARG_INT, &kbps, "call: kbit/s", "K"},
    {NULL}
  };
  GOptionContext *ctx = g_option_context_new ("setup|bulk|rtt|pairs|call|"
      "first-frame");
  GError *error = NULL;

  census_raise_fd_limit ();
  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_add_group (ctx, gst_init_get_option_group ());
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || argc != 2) {
    g_printerr ("%s\n", error ? error->message : "give one mode");
    return 2;
  }
  g_option_context_free (ctx);
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
  g_printerr ("unknown mode %s\n", argv[1]);
  return 2;
}
