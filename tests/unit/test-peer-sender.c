/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaPeerSender in a GstHarness: packets leave paced, audio first;
 * retransmission requests reach upstream only as LegbaRtxPolicy allows;
 * transport-wide feedback is taken in and passed on; the round trip read
 * from a real rtpbin's receiver reports; stats.
 */
#include <legba/room/legba-peer-sender.h>
#include <gst/app/gstappsrc.h>
#include <gst/check/gstharness.h>

#define VIDEO_SSRC 0x11111111
#define AUDIO_SSRC 0x22222222

static GstBuffer *
rtp_packet (guint32 ssrc, guint16 seq, gsize size)
{
  GstBuffer *buffer = gst_buffer_new_allocate (NULL, size, NULL);
  GstMapInfo map;

  gst_buffer_map (buffer, &map, GST_MAP_WRITE);
  memset (map.data, 0, size);
  map.data[0] = 0x80;
  map.data[1] = ssrc == AUDIO_SSRC ? 111 : 96;
  GST_WRITE_UINT16_BE (map.data + 2, seq);
  GST_WRITE_UINT32_BE (map.data + 8, ssrc);
  gst_buffer_unmap (buffer, &map);
  return buffer;
}

static GstHarness *
sender_harness (guint start, guint max)
{
  GstElement *sender = legba_peer_sender_new (start, max);
  GstHarness *h = gst_harness_new_with_element (sender, "sink", "src");

  gst_object_unref (sender);
  gst_harness_set_src_caps_str (h, "application/x-rtp");
  return h;
}

static guint16
seq_of (GstBuffer * buffer)
{
  guint8 header[4];

  gst_buffer_extract (buffer, 0, header, 4);
  return GST_READ_UINT16_BE (header + 2);
}

static void
feedback (GstHarness * h)
{
  GstEvent *event;

  gst_harness_push_upstream_event (h,
      gst_event_new_custom (GST_EVENT_CUSTOM_UPSTREAM,
          gst_structure_new_empty ("RTPTWCCPackets")));
  while ((event = gst_harness_try_pull_upstream_event (h)) != NULL)
    gst_event_unref (event);
}

/* A transport-wide feedback event as rtpsession sends it up, reporting
 * n packets received, 20 ms apart. */
static void
feedback_packets (GstHarness * h, guint n)
{
  GValueArray *array;
  GstStructure *s;
  GstEvent *event;

  G_GNUC_BEGIN_IGNORE_DEPRECATIONS;
  array = g_value_array_new (n);
  for (guint i = 0; i < n; i++) {
    GValue v = G_VALUE_INIT;
    GstStructure *p = gst_structure_new ("RTPTWCCPacket",
        "seqnum", G_TYPE_UINT, i,
        "local-ts", G_TYPE_UINT64, (guint64) i * 20 * GST_MSECOND,
        "remote-ts", G_TYPE_UINT64, (guint64) (i * 20 + 10) * GST_MSECOND,
        "size", G_TYPE_UINT, 1200,
        "lost", G_TYPE_BOOLEAN, FALSE, NULL);

    g_value_init (&v, GST_TYPE_STRUCTURE);
    g_value_take_boxed (&v, p);
    g_value_array_append (array, &v);
    g_value_unset (&v);
  }
  s = gst_structure_new ("RTPTWCCPackets", "packets",
      g_value_array_get_type (), array, NULL);
  g_value_array_free (array);
  G_GNUC_END_IGNORE_DEPRECATIONS;
  gst_harness_push_upstream_event (h,
      gst_event_new_custom (GST_EVENT_CUSTOM_UPSTREAM, s));
  while ((event = gst_harness_try_pull_upstream_event (h)) != NULL)
    gst_event_unref (event);
}

static gboolean
stats_audio_untracked (GstHarness * h)
{
  GstStructure *stats =
      legba_peer_sender_get_stats (LEGBA_PEER_SENDER (h->element));
  gboolean untracked = FALSE;

  g_assert_true (gst_structure_get_boolean (stats, "audio-untracked",
          &untracked));
  gst_structure_free (stats);
  return untracked;
}

/* 100 audio and 50 video packets leave; feedback that reports 50 packets
 * did not report the audio (webrtcbin numbered only the video's), and
 * the stats say so; feedback that reports all 150 did. */
static void
check_audio_untracked (guint reported, gboolean untracked)
{
  GstHarness *h = sender_harness (300000, 2000000);

  legba_peer_sender_set_audio_ssrc (LEGBA_PEER_SENDER (h->element), AUDIO_SSRC);
  for (guint16 i = 0; i < 150; i++) {
    gst_harness_push (h, i % 3 == 2 ? rtp_packet (VIDEO_SSRC, i, 1200) :
        rtp_packet (AUDIO_SSRC, i, 100));
    gst_buffer_unref (gst_harness_pull (h));
  }
  g_assert_false (stats_audio_untracked (h));
  feedback_packets (h, reported);
  g_assert_cmpint (stats_audio_untracked (h), ==, untracked);
  gst_harness_teardown (h);
}

static void
test_audio_untracked (void)
{
  check_audio_untracked (50, TRUE);
  check_audio_untracked (150, FALSE);
}

/* Pushes n packets of 1200 bytes at once; returns how long they took to
 * come out, in microseconds. */
static gint64
burst_span_n (GstHarness * h, guint16 n)
{
  gint64 first = 0, last = 0;

  for (guint16 i = 0; i < n; i++)
    gst_harness_push (h, rtp_packet (VIDEO_SSRC, i, 1200));
  for (guint16 i = 0; i < n; i++) {
    GstBuffer *out = gst_harness_pull (h);

    g_assert_nonnull (out);
    g_assert_cmpuint (seq_of (out), ==, i);
    last = g_get_monotonic_time ();
    if (i == 0)
      first = last;
    gst_buffer_unref (out);
  }
  return last - first;
}

static gint64
burst_span (GstHarness * h)
{
  return burst_span_n (h, 30);
}

/* Once the receiver gives feedback, 30 packets of 1200 bytes pushed at
 * once leave paced at the 300 kbit/s start estimate (2.5 times it past
 * the start: over about 380 ms), not in one burst. */
static void
test_paced (void)
{
  GstHarness *h = sender_harness (300000, 2000000);

  feedback (h);
  /* 29 x 1200 bytes at 93,750 bytes/s, less what the budget may hold */
  g_assert_cmpint (burst_span (h), >=, 300 * G_TIME_SPAN_MILLISECOND);
  gst_harness_teardown (h);
}

static guint
stats_pacing_rate (GstHarness * h)
{
  GstStructure *stats =
      legba_peer_sender_get_stats (LEGBA_PEER_SENDER (h->element));
  guint rate = 0;

  g_assert_true (gst_structure_get_uint (stats, "pacing-rate", &rate));
  gst_structure_free (stats);
  return rate;
}

/* The pacing rate over the target. */
static gdouble
stats_pacing_factor (GstHarness * h)
{
  GstStructure *stats =
      legba_peer_sender_get_stats (LEGBA_PEER_SENDER (h->element));
  guint rate = 0, target = 0;

  g_assert_true (gst_structure_get_uint (stats, "pacing-rate", &rate));
  g_assert_true (gst_structure_get_uint (stats, "target-bitrate", &target));
  gst_structure_free (stats);
  return target > 0 ? rate / (gdouble) target : 0;
}

/* In the start (3 s from the transport's opening) the link is not known
 * yet: without feedback, and with it, 12 packets of 1200 bytes leave at
 * the 300 kbit/s start estimate itself, not 2.5 times it: 11 x 1200 bytes
 * at 37,500 bytes/s, less what the budget may hold (1.7 kB), take 0.31 s
 * (0.12 s at 2.5 times). */
static void
test_start_paced (void)
{
  GstHarness *h = sender_harness (300000, 2000000);

  g_assert_cmpuint (stats_pacing_rate (h), ==, 300000);
  g_assert_cmpint (burst_span_n (h, 12), >=, 280 * G_TIME_SPAN_MILLISECOND);
  gst_harness_teardown (h);
  h = sender_harness (300000, 2000000);
  feedback (h);
  g_assert_cmpint (burst_span_n (h, 12), >=, 280 * G_TIME_SPAN_MILLISECOND);
  gst_harness_teardown (h);
}

/* A receiver that sent no feedback by the end of the start gives nothing
 * to pace by: then the same burst leaves as it comes. */
static void
test_unpaced_without_feedback (void)
{
  GstHarness *h = sender_harness (300000, 2000000);
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;

  gst_harness_push (h, rtp_packet (VIDEO_SSRC, 1000, 1200));
  gst_buffer_unref (gst_harness_pull (h));
  /* the start is over when the pacing rate is 2.5 x the estimate (which
   * falls meanwhile, without feedback) */
  while (stats_pacing_factor (h) < 2 && g_get_monotonic_time () < deadline)
    g_usleep (20 * G_TIME_SPAN_MILLISECOND);
  g_assert_cmpfloat (stats_pacing_factor (h), >, 2);
  g_assert_cmpint (burst_span (h), <, 300 * G_TIME_SPAN_MILLISECOND);
  gst_harness_teardown (h);
}

/* Video whose encoder ignores the target leaves as it comes, feedback or
 * not: held to the pacing rate it would only wait here. */
static void
test_unsteered_video_unpaced (void)
{
  GstHarness *h = sender_harness (300000, 2000000);

  legba_peer_sender_set_video_steered (LEGBA_PEER_SENDER (h->element), FALSE);
  feedback (h);
  g_assert_cmpint (burst_span (h), <, 300 * G_TIME_SPAN_MILLISECOND);
  gst_harness_teardown (h);
}

/* An audio packet queued behind a frame's worth of video leaves first. */
static void
test_audio_first (void)
{
  GstHarness *h = sender_harness (300000, 2000000);
  guint position = 0;

  legba_peer_sender_set_audio_ssrc (LEGBA_PEER_SENDER (h->element), AUDIO_SSRC);
  feedback (h);
  for (guint16 i = 0; i < 30; i++)
    gst_harness_push (h, rtp_packet (VIDEO_SSRC, i, 1200));
  gst_harness_push (h, rtp_packet (AUDIO_SSRC, 1000, 100));
  for (guint i = 0; i < 31; i++) {
    GstBuffer *out = gst_harness_pull (h);

    if (seq_of (out) == 1000)
      position = i;
    gst_buffer_unref (out);
  }
  /* at most the packets already on their way when it came */
  g_assert_cmpuint (position, <=, 3);
  gst_harness_teardown (h);
}

static GstEvent *
rtx_request (guint seq, guint ssrc)
{
  return gst_event_new_custom (GST_EVENT_CUSTOM_UPSTREAM,
      gst_structure_new ("GstRTPRetransmissionRequest", "seqnum", G_TYPE_UINT,
          seq, "ssrc", G_TYPE_UINT, ssrc, NULL));
}

static guint
count_upstream_requests (GstHarness * h)
{
  GstEvent *event;
  guint n = 0;

  while ((event = gst_harness_try_pull_upstream_event (h)) != NULL) {
    const GstStructure *s = gst_event_get_structure (event);

    if (s != NULL && gst_structure_has_name (s, "GstRTPRetransmissionRequest"))
      n++;
    gst_event_unref (event);
  }
  return n;
}

/* Video packets 0 to n - 1 through the sender, and the requests so far
 * gone upstream cleared. */
static void
send_video (GstHarness * h, guint16 n)
{
  for (guint16 i = 0; i < n; i++)
    gst_harness_push (h, rtp_packet (VIDEO_SSRC, i, 1200));
  for (guint16 i = 0; i < n; i++)
    gst_buffer_unref (gst_harness_pull (h));
  count_upstream_requests (h);
}

/* A request for a packet sent passes once; the same request again at
 * once, one for a packet never sent, and a storm of requests do not. */
static void
test_requests_bounded (void)
{
  GstHarness *h = sender_harness (300000, 2000000);
  guint passed;

  send_video (h, 10);

  gst_harness_push_upstream_event (h, rtx_request (3, VIDEO_SSRC));
  g_assert_cmpuint (count_upstream_requests (h), ==, 1);
  gst_harness_push_upstream_event (h, rtx_request (3, VIDEO_SSRC));
  g_assert_cmpuint (count_upstream_requests (h), ==, 0);
  gst_harness_push_upstream_event (h, rtx_request (500, VIDEO_SSRC));
  gst_harness_push_upstream_event (h, rtx_request (4, 0x3333));
  g_assert_cmpuint (count_upstream_requests (h), ==, 0);

  /* every packet asked for a hundred times: each goes again at most
   * once (within the round trip), and only as far as the budget of a
   * quarter of 300 kbit/s over 500 ms (4,687 bytes) reaches */
  for (guint round = 0; round < 100; round++)
    for (guint seq = 0; seq < 10; seq++)
      gst_harness_push_upstream_event (h, rtx_request (seq, VIDEO_SSRC));
  passed = count_upstream_requests (h);
  g_assert_cmpuint (passed, >=, 1);
  g_assert_cmpuint (passed, <=, 4);
  gst_harness_teardown (h);
}

/* A request for a packet already sent again, two round trips later (the
 * round trip is 100 ms before any report gives one), goes upstream twice:
 * rtprtxsend sends a copy per request. */
static void
test_repeat_goes_twice (void)
{
  GstHarness *h = sender_harness (300000, 2000000);
  GstStructure *stats;
  guint64 twice = 0;

  send_video (h, 3);

  gst_harness_push_upstream_event (h, rtx_request (1, VIDEO_SSRC));
  g_assert_cmpuint (count_upstream_requests (h), ==, 1);
  g_usleep (210 * G_TIME_SPAN_MILLISECOND);
  gst_harness_push_upstream_event (h, rtx_request (1, VIDEO_SSRC));
  g_assert_cmpuint (count_upstream_requests (h), ==, 2);
  stats = legba_peer_sender_get_stats (LEGBA_PEER_SENDER (h->element));
  g_assert_true (gst_structure_get_uint64 (stats, "rtx-sent-twice", &twice));
  g_assert_cmpuint (twice, ==, 1);
  gst_structure_free (stats);
  gst_harness_teardown (h);
}

/* Other upstream events, transport-wide feedback among them, pass on. */
static void
test_feedback_passes (void)
{
  GstHarness *h = sender_harness (300000, 2000000);
  GstStructure *twcc = gst_structure_new_empty ("RTPTWCCPackets");
  g_autoptr (GstStructure) stats = NULL;
  GstEvent *event;
  guint64 reports = 0;
  gboolean seen = FALSE;

  gst_harness_push (h, rtp_packet (VIDEO_SSRC, 0, 1200));
  gst_buffer_unref (gst_harness_pull (h));
  while ((event = gst_harness_try_pull_upstream_event (h)) != NULL)
    gst_event_unref (event);
  g_assert_cmpuint (legba_peer_sender_get_target (LEGBA_PEER_SENDER
          (h->element)), ==, 0);
  gst_harness_push_upstream_event (h,
      gst_event_new_custom (GST_EVENT_CUSTOM_UPSTREAM, twcc));
  while ((event = gst_harness_try_pull_upstream_event (h)) != NULL) {
    const GstStructure *s = gst_event_get_structure (event);

    seen |= s != NULL && gst_structure_has_name (s, "RTPTWCCPackets");
    gst_event_unref (event);
  }
  g_assert_true (seen);
  stats = legba_peer_sender_get_stats (LEGBA_PEER_SENDER (h->element));
  g_assert_true (gst_structure_get_uint64 (stats, "feedback-reports",
          &reports));
  g_assert_cmpuint (reports, ==, 1);
  /* an estimate once feedback came, none before */
  g_assert_cmpuint (legba_peer_sender_get_target (LEGBA_PEER_SENDER
          (h->element)), >, 0);
  gst_harness_teardown (h);
}

/* Before the receiver's first feedback the video is held to the start
 * estimate's share (300 kbit/s less the headers of 1,200-byte packets);
 * a receiver that sent none 3 s after the first packet no longer holds
 * it back. */
static void
test_video_target_before_feedback (void)
{
  GstHarness *h = sender_harness (300000, 2000000);
  LegbaPeerSender *sender = LEGBA_PEER_SENDER (h->element);
  gint64 sent_at, deadline;

  g_assert_cmpuint (legba_peer_sender_get_video_target (sender), ==, 282000);
  gst_harness_push (h, rtp_packet (VIDEO_SSRC, 0, 1200));
  gst_buffer_unref (gst_harness_pull (h));
  sent_at = g_get_monotonic_time ();
  g_assert_cmpuint (legba_peer_sender_get_video_target (sender), ==, 282000);
  deadline = sent_at + 10 * G_USEC_PER_SEC;
  while (legba_peer_sender_get_video_target (sender) != 0 &&
      g_get_monotonic_time () < deadline)
    g_usleep (20 * G_TIME_SPAN_MILLISECOND);
  g_assert_cmpuint (legba_peer_sender_get_video_target (sender), ==, 0);
  g_assert_cmpint (g_get_monotonic_time () - sent_at, >=,
      3 * G_USEC_PER_SEC - 100 * G_TIME_SPAN_MILLISECOND);
  gst_harness_teardown (h);
}

/* The sender as webrtcbin places it, in an aux sender bin in rtpbin:
 * its bin's pads are sink_0 and src_0. */
static GstElement *
request_aux_sender (GstElement * rtpbin, guint session, GstElement * sender)
{
  GstElement *bin = gst_bin_new (NULL);
  g_autoptr (GstPad) sink = gst_element_get_static_pad (sender, "sink");
  g_autoptr (GstPad) src = gst_element_get_static_pad (sender, "src");

  g_assert_cmpuint (session, ==, 0);
  gst_bin_add (GST_BIN (bin), gst_object_ref (sender));
  gst_element_add_pad (bin, gst_ghost_pad_new ("sink_0", sink));
  gst_element_add_pad (bin, gst_ghost_pad_new ("src_0", src));
  return bin;
}

static void
on_receiver_pad (GstElement * rtpbin, GstPad * pad, GstElement * sink)
{
  g_autoptr (GstPad) sinkpad = gst_element_get_static_pad (sink, "sink");

  if (g_str_has_prefix (GST_PAD_NAME (pad), "recv_rtp_src_") &&
      !gst_pad_is_linked (sinkpad))
    gst_pad_link (pad, sinkpad);
}

static void
fast_rtcp (GstElement * rtpbin)
{
  GObject *session = NULL;

  g_signal_emit_by_name (rtpbin, "get-internal-session", 0, &session);
  g_assert_nonnull (session);
  g_object_set (session, "rtcp-min-interval", (guint64) 200 * GST_MSECOND,
      NULL);
  g_object_unref (session);
}

static GstFlowReturn
pass_rtcp (GstElement * appsink, GstElement * appsrc)
{
  GstSample *sample = NULL;

  g_signal_emit_by_name (appsink, "pull-sample", &sample);
  if (sample == NULL)
    return GST_FLOW_EOS;
  gst_app_src_push_buffer (GST_APP_SRC (appsrc),
      gst_buffer_ref (gst_sample_get_buffer (sample)));
  gst_sample_unref (sample);
  return GST_FLOW_OK;
}

static gdouble
stats_round_trip_ms (LegbaPeerSender * sender)
{
  g_autoptr (GstStructure) stats = legba_peer_sender_get_stats (sender);
  gdouble ms = -1;

  g_assert_true (gst_structure_get_double (stats, "round-trip-ms", &ms));
  return ms;
}

/* Audio goes from one rtpbin, through the sender, to a second rtpbin
 * whose RTCP comes back 50 ms late (through an appsink and an appsrc: a
 * pipeline's graph has no loops): the round trip is read from the
 * receiver's report blocks (rtpsession keeps them on the receiver's
 * source, not ours) and shows in the stats. */
static void
test_round_trip (void)
{
  GstElement *sender = legba_peer_sender_new (300000, 2000000);
  GstElement *pipeline = gst_pipeline_new (NULL);
  GstElement *a = gst_element_factory_make ("rtpbin", NULL);
  GstElement *b = gst_element_factory_make ("rtpbin", NULL);
  GstElement *src = gst_element_factory_make ("audiotestsrc", NULL);
  GstElement *enc = gst_element_factory_make ("mulawenc", NULL);
  GstElement *pay = gst_element_factory_make ("rtppcmupay", NULL);
  GstElement *back = gst_element_factory_make ("appsink", NULL);
  GstElement *queue = gst_element_factory_make ("appsrc", NULL);
  GstElement *late = gst_element_factory_make ("identity", NULL);
  GstElement *out = gst_element_factory_make ("fakesink", NULL);
  g_autoptr (GstCaps) rtcp = gst_caps_new_empty_simple ("application/x-rtcp");
  gint64 deadline;
  gdouble ms = 0;

  g_object_set (src, "is-live", TRUE, NULL);
  g_object_set (late, "sleep-time", 50000, NULL);
  g_object_set (back, "emit-signals", TRUE, "sync", FALSE, "async", FALSE,
      NULL);
  g_object_set (queue, "is-live", TRUE, "format", GST_FORMAT_TIME, NULL);
  gst_app_src_set_caps (GST_APP_SRC (queue), rtcp);
  g_signal_connect (back, "new-sample", G_CALLBACK (pass_rtcp), queue);
  g_object_set (out, "sync", FALSE, "async", FALSE, NULL);
  g_signal_connect (a, "request-aux-sender", G_CALLBACK (request_aux_sender),
      sender);
  g_signal_connect (b, "pad-added", G_CALLBACK (on_receiver_pad), out);
  gst_bin_add_many (GST_BIN (pipeline), a, b, src, enc, pay, back, queue,
      late, out, NULL);
  g_assert_true (gst_element_link_many (src, enc, pay, NULL));
  g_assert_true (gst_element_link_pads (pay, "src", a, "send_rtp_sink_0"));
  g_assert_true (gst_element_link_pads (a, "send_rtp_src_0", b,
          "recv_rtp_sink_0"));
  g_assert_true (gst_element_link_pads (a, "send_rtcp_src_0", b,
          "recv_rtcp_sink_0"));
  g_assert_true (gst_element_link_pads (b, "send_rtcp_src_0", back, "sink"));
  g_assert_true (gst_element_link (queue, late));
  g_assert_true (gst_element_link_pads (late, "src", a, "recv_rtcp_sink_0"));
  fast_rtcp (a);
  fast_rtcp (b);
  g_assert_cmpfloat (stats_round_trip_ms (LEGBA_PEER_SENDER (sender)), ==, 0);
  g_assert_cmpint (gst_element_set_state (pipeline, GST_STATE_PLAYING), !=,
      GST_STATE_CHANGE_FAILURE);
  deadline = g_get_monotonic_time () + 15 * G_USEC_PER_SEC;
  while ((ms = stats_round_trip_ms (LEGBA_PEER_SENDER (sender))) == 0 &&
      g_get_monotonic_time () < deadline)
    g_usleep (50 * G_TIME_SPAN_MILLISECOND);
  g_assert_cmpfloat (ms, >=, 45);
  g_assert_cmpfloat (ms, <, 500);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (pipeline);
  gst_object_unref (sender);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/peer-sender/paced", test_paced);
  g_test_add_func ("/peer-sender/start-paced", test_start_paced);
  g_test_add_func ("/peer-sender/audio-untracked", test_audio_untracked);
  g_test_add_func ("/peer-sender/unpaced-without-feedback",
      test_unpaced_without_feedback);
  g_test_add_func ("/peer-sender/unsteered-video-unpaced",
      test_unsteered_video_unpaced);
  g_test_add_func ("/peer-sender/audio-first", test_audio_first);
  g_test_add_func ("/peer-sender/requests-bounded", test_requests_bounded);
  g_test_add_func ("/peer-sender/repeat-goes-twice", test_repeat_goes_twice);
  g_test_add_func ("/peer-sender/feedback-passes", test_feedback_passes);
  g_test_add_func ("/peer-sender/video-target-before-feedback",
      test_video_target_before_feedback);
  g_test_add_func ("/peer-sender/round-trip", test_round_trip);
  return g_test_run ();
}
