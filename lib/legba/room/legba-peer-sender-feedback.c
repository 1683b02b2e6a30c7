/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaPeerSender's feedback: what comes back up from the RTP session
 * (transport-wide feedback for the estimator, retransmission requests for
 * the policy), the round trip read from the session's receiver reports,
 * the target reported to the room, and the stats.
 */
#include <legba/room/legba-peer-sender-private.h>
#include <gst/rtp/gstrtcpbuffer.h>
#include <gst/rtp/gstrtpbuffer.h>

#define GST_CAT_DEFAULT legba_sender_debug

/* How often the estimator is told the time when no feedback comes, and
 * the round trip read. */
#define TICK_US (50 * G_TIME_SPAN_MILLISECOND)
#define RTT_POLL_US G_USEC_PER_SEC
#define RTX_PTS_POLL_US (2 * G_USEC_PER_SEC)
/* The target is reported when it moved by more than this fraction, and
 * at least this often. */
#define REPORT_CHANGE 0.03
#define REPORT_US G_USEC_PER_SEC
#define MIN_BITRATE 30000
/* How long the video is held to the start estimate waiting for the first
 * feedback. */
/* audio packets sent before telling whether the feedback reports them */
#define AUDIO_DECIDE_PACKETS 100
/* What the link carries of a packet beyond the RTP packet the feedback
 * gives the size of: IPv4 and UDP headers, the SRTP authentication tag. */
#define WIRE_OVERHEAD (20 + 8 + 10)
/* The loss the receiver reports rises with the first report that shows
 * it; a lower report weighs this much against what was known. */
#define LOSS_FALL_WEIGHT 0.3

void
legba_peer_sender_feedback_init (LegbaPeerSender * self, guint start_bitrate,
    guint max_bitrate)
{
  LegbaBweConfig config = {
    .min_bps = MIN (MIN_BITRATE, max_bitrate),
    .start_bps = CLAMP (start_bitrate, MIN (MIN_BITRATE, max_bitrate),
        max_bitrate),
    .max_bps = max_bitrate,
  };

  self->bwe = legba_bwe_new (&config);
  self->loss = -1;
  self->target = legba_bwe_target (self->bwe);
  legba_send_rates_init (&self->rates, g_get_monotonic_time ());
  self->video_target = legba_send_rates_video_target (&self->rates,
      self->target, MIN_BITRATE);
  self->policies = g_hash_table_new_full (NULL, NULL, NULL,
      (GDestroyNotify) legba_rtx_policy_free);
  self->report_loss = g_hash_table_new (NULL, NULL);
  self->rtx_pts = g_array_new (FALSE, FALSE, sizeof (guint8));
  self->rtt_blocks = g_hash_table_new_full (NULL, NULL, NULL, g_free);
}

void
legba_peer_sender_feedback_clear (LegbaPeerSender * self)
{
  g_clear_pointer (&self->bwe, legba_bwe_free);
  g_clear_pointer (&self->policies, g_hash_table_unref);
  g_clear_pointer (&self->rtx_pts, g_array_unref);
  g_clear_pointer (&self->rtt_blocks, g_hash_table_unref);
  if (self->session != NULL && self->rtcp_handler != 0)
    g_signal_handler_disconnect (self->session, self->rtcp_handler);
  self->rtcp_handler = 0;
  g_clear_pointer (&self->report_loss, g_hash_table_unref);
  g_clear_object (&self->session);
}

/* ---- The target ---- */

static void
set_policy_target (gpointer ssrc, gpointer policy, gpointer target)
{
  legba_rtx_policy_set_target (policy, GPOINTER_TO_UINT (target));
}

static void
set_policy_rtt (gpointer ssrc, gpointer policy, gpointer rtt)
{
  legba_rtx_policy_set_rtt (policy, *(gint64 *) rtt);
}

/* Takes the estimator's target; returns whether the room should hear it
 * now. Called with the lock. */
static gboolean
update_target (LegbaPeerSender * self, gint64 now)
{
  guint target = legba_bwe_target (self->bwe);
  gdouble change;

  self->target = target;
  self->video_target = legba_send_rates_video_target (&self->rates, target,
      MIN_BITRATE);
  g_hash_table_foreach (self->policies, set_policy_target,
      GUINT_TO_POINTER (target));
  if (self->target_func == NULL)
    return FALSE;
  change = self->reported_target == 0 ? 1.0 :
      ABS ((gdouble) self->video_target - self->reported_target) /
      self->reported_target;
  if (change <= REPORT_CHANGE && now - self->reported_at < REPORT_US)
    return FALSE;
  if (GST_LEVEL_DEBUG <= _gst_debug_min) {
    LegbaBweState state;

    legba_bwe_get_state (self->bwe, &state);
    GST_DEBUG_OBJECT (self, "target %u bit/s (delay %u, loss %u, acked %u, "
        "%s, %s, trend %.1f / %.1f ms, queue %" G_GINT64_FORMAT " ms, loss "
        "%.3f), video %u bit/s", target, state.delay_bps, state.loss_bps,
        state.acked_bps, legba_bwe_usage_name (state.usage),
        legba_bwe_rate_state_name (state.rate_state), state.modified_trend,
        state.threshold, state.queue_delay_us / 1000, state.loss_fraction,
        self->video_target);
  }
  self->reported_target = self->video_target;
  self->reported_at = now;
  return TRUE;
}

static void
report_target (LegbaPeerSender * self, gboolean report)
{
  LegbaPeerSenderTargetFunc func;
  gpointer data;
  guint target;

  if (!report)
    return;
  g_mutex_lock (&self->lock);
  func = self->target_func;
  data = self->target_data;
  target = self->reported_target;
  g_mutex_unlock (&self->lock);
  if (func != NULL)
    func (target, data);
}

/**
 * legba_peer_sender_get_loss_percentage:
 * @self: a #LegbaPeerSender
 *
 * The share of the packets sent that the receiver lost: the higher of
 * what its transport-wide feedback says of the video and what its RTCP
 * report blocks say of each of our media streams, smoothed: up with the
 * first reading that shows more, down over a few seconds.
 *
 * Returns: a percentage, or -1 before the first reading
 */
gint
legba_peer_sender_get_loss_percentage (LegbaPeerSender * self)
{
  gint percent;

  g_mutex_lock (&self->lock);
  percent = self->loss < 0 ? -1 : (gint) self->reported_loss;
  g_mutex_unlock (&self->lock);
  return percent;
}

/* The estimate, or 0 before the first feedback (a receiver that never
 * sends any does not hold the encoder back). */
guint
legba_peer_sender_get_target (LegbaPeerSender * self)
{
  guint target;

  g_mutex_lock (&self->lock);
  target = self->feedback_reports > 0 ? self->target : 0;
  g_mutex_unlock (&self->lock);
  return target;
}

/* The video encoder's share of the estimate (legba-send-rates.c). Before
 * the first feedback it is the share of the start estimate, as in
 * libwebrtc, for LEGBA_SENDER_START_US from the first packet: a call on a slow
 * link starts with key frames that fit it. A receiver that sent no
 * feedback by then does not hold the encoder back: 0. */
guint
legba_peer_sender_get_video_target (LegbaPeerSender * self)
{
  gint64 now = g_get_monotonic_time ();
  guint target;

  g_mutex_lock (&self->lock);
  if (self->feedback_reports > 0 || legba_peer_sender_in_start (self, now))
    target = self->video_target;
  else
    target = 0;
  g_mutex_unlock (&self->lock);
  return target;
}

/* ---- Transport-wide feedback ---- */

static gint64
ts_us (const GstStructure * s, const char *field)
{
  guint64 ts = GST_CLOCK_TIME_NONE;

  if (!gst_structure_get_uint64 (s, field, &ts)
      || !GST_CLOCK_TIME_IS_VALID (ts))
    return LEGBA_BWE_LOST;
  return (gint64) MIN (ts / GST_USECOND, (guint64) G_MAXINT64 / 2);
}

/* rtpsession's RTPTWCCPackets: a "packets" array of RTPTWCCPacket
 * structures (seqnum, local-ts, remote-ts, size, lost). A malformed entry
 * is skipped, never trusted. */
static GArray *
parse_twcc (const GstStructure * s)
{
  const GValue *value = gst_structure_get_value (s, "packets");
  GArray *packets = g_array_new (FALSE, FALSE, sizeof (LegbaBwePacket));
  guint n;

  G_GNUC_BEGIN_IGNORE_DEPRECATIONS;
  if (value == NULL || !G_VALUE_HOLDS (value, g_value_array_get_type ())
      || g_value_get_boxed (value) == NULL)
    return packets;
  n = ((GValueArray *) g_value_get_boxed (value))->n_values;
  for (guint i = 0; i < n; i++) {
    const GValue *v = g_value_array_get_nth (g_value_get_boxed (value), i);
    const GstStructure *p;
    LegbaBwePacket packet = { 0, };
    guint seqnum = 0, size = 0;
    gboolean lost = FALSE;

    if (!GST_VALUE_HOLDS_STRUCTURE (v))
      continue;
    p = gst_value_get_structure (v);
    if (!gst_structure_get_uint (p, "seqnum", &seqnum) ||
        !gst_structure_get_uint (p, "size", &size))
      continue;
    gst_structure_get_boolean (p, "lost", &lost);
    packet.seq = seqnum & 0xffff;
    packet.size = size + WIRE_OVERHEAD;
    packet.send_us = ts_us (p, "local-ts");
    packet.arrival_us = lost ? LEGBA_BWE_LOST : ts_us (p, "remote-ts");
    if (packet.send_us == LEGBA_BWE_LOST)
      continue;
    g_array_append_val (packets, packet);
  }
  G_GNUC_END_IGNORE_DEPRECATIONS;
  return packets;
}

/* Whether the audio's packets carry no transport-wide sequence number:
 * webrtcbin numbers only the packets of a stream negotiated with the
 * extension, and the room negotiates it on the video (an answer takes
 * what the offer had). The feedback then reports about as many packets as
 * left in the video and retransmission lanes; with the audio, that many
 * more. Told once feedback came and AUDIO_DECIDE_PACKETS audio packets
 * left; until then the audio counts as reported. Called with the lock. */
static gboolean
audio_untracked (LegbaPeerSender * self)
{
  guint64 audio = self->packets_sent[LEGBA_SENDER_LANE_AUDIO];
  guint64 others = self->packets_sent[LEGBA_SENDER_LANE_VIDEO] +
      self->packets_sent[LEGBA_SENDER_LANE_RTX];

  return self->feedback_reports > 0 && audio >= AUDIO_DECIDE_PACKETS &&
      self->feedback_packets < others + audio / 2;
}

static void
on_twcc (LegbaPeerSender * self, const GstStructure * s)
{
  g_autoptr (GArray) packets = parse_twcc (s);
  gint64 now = g_get_monotonic_time ();
  gboolean report;

  g_mutex_lock (&self->lock);
  self->feedback_reports++;
  self->feedback_packets += packets->len;
  legba_bwe_set_untracked (self->bwe, audio_untracked (self) ?
      legba_send_rates_lane_bps (&self->rates, LEGBA_SENDER_LANE_AUDIO) : 0);
  legba_bwe_on_feedback (self->bwe, (LegbaBwePacket *) packets->data,
      packets->len, now);
  report = update_target (self, now);
  g_mutex_unlock (&self->lock);
  report_target (self, report);
}

/* ---- Retransmissions ---- */

static LegbaRtxPolicy *
policy_for (LegbaPeerSender * self, guint32 ssrc)
{
  LegbaRtxPolicy *policy = g_hash_table_lookup (self->policies,
      GUINT_TO_POINTER (ssrc));

  if (policy == NULL && g_hash_table_size (self->policies) < 16) {
    policy = legba_rtx_policy_new ();
    legba_rtx_policy_set_target (policy, self->target);
    if (self->rtt_us > 0)
      legba_rtx_policy_set_rtt (policy, self->rtt_us);
    g_hash_table_insert (self->policies, GUINT_TO_POINTER (ssrc), policy);
  }
  return policy;
}

static const char *
verdict_name (LegbaRtxVerdict verdict)
{
  switch (verdict) {
    case LEGBA_RTX_SEND:
      return "sent";
    case LEGBA_RTX_UNKNOWN:
      return "refused: unknown";
    case LEGBA_RTX_TOO_OLD:
      return "refused: too old";
    case LEGBA_RTX_RECENT:
      return "refused: sent within the round trip";
    case LEGBA_RTX_OVER_BUDGET:
      return "refused: over budget";
  }
  return "refused";
}

/* How many times rtprtxsend is asked to send the packet again: 0 (the
 * policy refuses), 1, or 2 (legba-rtx-policy.h). */
static guint
answer_request (LegbaPeerSender * self, const GstStructure * s)
{
  guint seqnum = 0, ssrc = 0, copies = 0;
  LegbaRtxPolicy *policy;
  LegbaRtxVerdict verdict = LEGBA_RTX_UNKNOWN;

  if (!gst_structure_get_uint (s, "seqnum", &seqnum) ||
      !gst_structure_get_uint (s, "ssrc", &ssrc))
    return 0;
  g_mutex_lock (&self->lock);
  policy = g_hash_table_lookup (self->policies, GUINT_TO_POINTER (ssrc));
  if (policy != NULL)
    verdict = legba_rtx_policy_request (policy, seqnum & 0xffff,
        g_get_monotonic_time (), &copies);
  g_mutex_unlock (&self->lock);
  GST_LOG_OBJECT (self, "retransmission of %u (SSRC %08x): %s%s", seqnum,
      ssrc, verdict_name (verdict), copies > 1 ? ", twice" : "");
  return copies;
}

gboolean
legba_peer_sender_src_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  LegbaPeerSender *self = LEGBA_PEER_SENDER (parent);
  const GstStructure *s = gst_event_get_structure (event);

  if (GST_EVENT_TYPE (event) == GST_EVENT_CUSTOM_UPSTREAM && s != NULL) {
    if (gst_structure_has_name (s, "GstRTPRetransmissionRequest")) {
      guint copies = answer_request (self, s);

      if (copies == 0) {
        gst_event_unref (event);
        return TRUE;
      }
      /* rtprtxsend sends one copy per request */
      if (copies > 1)
        gst_pad_push_event (self->sinkpad, gst_event_ref (event));
    }
    if (gst_structure_has_name (s, "RTPTWCCPackets"))
      on_twcc (self, s);
  }
  return gst_pad_push_event (self->sinkpad, event);
}

static void
read_rtx_pts (LegbaPeerSender * self, gint64 now)
{
  g_autoptr (GstPad) peer = NULL;
  g_autoptr (GstElement) upstream = NULL;
  GstStructure *map = NULL;

  self->rtx_pts_at = now;
  peer = gst_pad_get_peer (self->sinkpad);
  upstream = peer ? gst_pad_get_parent_element (peer) : NULL;
  if (upstream == NULL || g_object_class_find_property
      (G_OBJECT_GET_CLASS (upstream), "payload-type-map") == NULL)
    return;
  g_object_get (upstream, "payload-type-map", &map, NULL);
  g_array_set_size (self->rtx_pts, 0);
  for (gint i = 0; map != NULL && i < gst_structure_n_fields (map); i++) {
    guint pt = 0;

    if (gst_structure_get_uint (map, gst_structure_nth_field_name (map, i),
            &pt) && pt < 128) {
      guint8 byte = pt;

      g_array_append_val (self->rtx_pts, byte);
    }
  }
  g_clear_pointer (&map, gst_structure_free);
}

/* Called with the lock. */
gboolean
legba_peer_sender_is_rtx_pt (LegbaPeerSender * self, guint8 pt)
{
  gint64 now = g_get_monotonic_time ();

  if (self->rtx_pts_at == 0 || now - self->rtx_pts_at > RTX_PTS_POLL_US)
    read_rtx_pts (self, now);
  for (guint i = 0; i < self->rtx_pts->len; i++)
    if (g_array_index (self->rtx_pts, guint8, i) == pt)
      return TRUE;
  return FALSE;
}

/* The RTP payload's length: the packet less its header, CSRCs, header
 * extensions and padding; 0 for what is not an RTP packet. */
static gsize
rtp_payload_size (GstBuffer * buffer)
{
  GstRTPBuffer rtp = GST_RTP_BUFFER_INIT;
  gsize size;

  if (!gst_rtp_buffer_map (buffer, GST_MAP_READ, &rtp))
    return 0;
  size = gst_rtp_buffer_get_payload_len (&rtp);
  gst_rtp_buffer_unmap (&rtp);
  return size;
}

/* A packet of @lane leaves: a video packet's time goes into its
 * stream's history; the lane's packets are counted. */
void
legba_peer_sender_record_sent (LegbaPeerSender * self, GstBuffer * buffer,
    LegbaSenderLane lane)
{
  gsize size = gst_buffer_get_size (buffer);
  guint8 header[12];

  g_mutex_lock (&self->lock);
  legba_send_rates_add (&self->rates, lane, size + WIRE_OVERHEAD,
      lane == LEGBA_SENDER_LANE_VIDEO ? rtp_payload_size (buffer) : 0);
  if (lane == LEGBA_SENDER_LANE_VIDEO &&
      gst_buffer_extract (buffer, 0, header, 12) == 12) {
    LegbaRtxPolicy *policy = policy_for (self, GST_READ_UINT32_BE (header + 8));

    if (policy != NULL)
      legba_rtx_policy_packet_sent (policy, GST_READ_UINT16_BE (header + 2),
          gst_buffer_get_size (buffer), g_get_monotonic_time ());
  }
  if (lane == LEGBA_SENDER_LANE_VIDEO &&
      gst_buffer_extract (buffer, 0, header, 12) == 12) {
    self->pad_ssrc[self->pad_head] = GST_READ_UINT32_BE (header + 8);
    self->pad_seq[self->pad_head] = GST_READ_UINT16_BE (header + 2);
    self->pad_head = (self->pad_head + 1) % LEGBA_SENDER_PAD_HISTORY;
    self->pad_filled = MIN (self->pad_filled + 1, LEGBA_SENDER_PAD_HISTORY);
    self->pad_next = 0;
  }
  if (lane != LEGBA_SENDER_LANE_RTX)
    self->pad_budget -= size + WIRE_OVERHEAD;
  self->packets_sent[lane]++;
  g_mutex_unlock (&self->lock);
}

/* ---- Padding ---- */

/* While the estimator probes, what the media leave of the probe's rate is
 * filled with retransmissions of the last video packets sent, asked of
 * rtprtxsend as a receiver's NACK would (libwebrtc pads with such
 * retransmissions too): the receiver drops them as duplicates; the link
 * carries them, and the transport-wide feedback reports them. */
#define PAD_PACKET_BYTES (1200 + WIRE_OVERHEAD)
#define PAD_MAX_AHEAD_US (100 * G_TIME_SPAN_MILLISECOND)
#define PAD_MAX_PER_TICK 8

/* Called with the lock; returns how many requests were put in @ssrcs and
 * @seqs. */
static guint
plan_padding (LegbaPeerSender * self, gint64 now, guint32 * ssrcs,
    guint16 * seqs)
{
  guint probe = self->feedback_reports > 0 ? legba_bwe_probe (self->bwe) : 0;
  gdouble dt = self->pad_at > 0 ? (now - self->pad_at) /
      (gdouble) G_USEC_PER_SEC : 0;
  gdouble cap;
  guint n = 0;

  self->pad_at = now;
  if (probe == 0 || self->pad_filled == 0) {
    self->pad_budget = 0;
    return 0;
  }
  cap = probe / 8.0 * PAD_MAX_AHEAD_US / G_USEC_PER_SEC;
  self->pad_budget = CLAMP (self->pad_budget + probe / 8.0 * MIN (dt, 0.1),
      -cap, cap);
  while (self->pad_budget >= PAD_PACKET_BYTES && n < PAD_MAX_PER_TICK) {
    guint back = self->pad_next % self->pad_filled;
    guint slot = (self->pad_head + LEGBA_SENDER_PAD_HISTORY - 1 - back) %
        LEGBA_SENDER_PAD_HISTORY;

    ssrcs[n] = self->pad_ssrc[slot];
    seqs[n] = self->pad_seq[slot];
    n++;
    self->pad_next++;
    self->pad_budget -= PAD_PACKET_BYTES;
  }
  self->pad_requests += n;
  return n;
}

static void
pad (LegbaPeerSender * self, gint64 now)
{
  guint32 ssrcs[PAD_MAX_PER_TICK];
  guint16 seqs[PAD_MAX_PER_TICK];
  guint n;

  g_mutex_lock (&self->lock);
  n = plan_padding (self, now, ssrcs, seqs);
  g_mutex_unlock (&self->lock);
  for (guint i = 0; i < n; i++)
    gst_pad_push_event (self->sinkpad,
        gst_event_new_custom (GST_EVENT_CUSTOM_UPSTREAM,
            gst_structure_new ("GstRTPRetransmissionRequest",
                "seqnum", G_TYPE_UINT, (guint) seqs[i],
                "ssrc", G_TYPE_UINT, ssrcs[i], NULL)));
}

/* ---- Round trip ---- */

static GObject *
find_session (LegbaPeerSender * self)
{
  g_autoptr (GstObject) bin = gst_object_get_parent (GST_OBJECT (self));
  g_autoptr (GstObject) rtpbin = bin ? gst_object_get_parent (bin) : NULL;
  GObject *session = NULL;

  if (rtpbin == NULL || g_signal_lookup ("get-internal-session",
          G_OBJECT_TYPE (rtpbin)) == 0)
    return NULL;
  /* webrtcbin bundles everything into session 0 */
  g_signal_emit_by_name (rtpbin, "get-internal-session", 0, &session);
  return session;
}

/* The largest round trip believed: a report block whose LSR and DLSR
 * give more says nothing of the path (a clock jump, a corrupt block). */
#define MAX_RTT_UNITS (10 * 65536)

/* The round trip of the newest report blocks about what we send, in
 * microseconds, or 0 when no receiver reported since the last call.
 * rtpsession 1.22 computes it (rb-round-trip, 1/65536 s) as a receiver's
 * block about one of our internal sources comes in, and keeps the
 * receiver's last block on the stats of the receiver's source, not on
 * ours: the blocks are read there, those about our SSRCs, and taken only
 * when their LSR or DLSR moved since the last call (remembered per
 * receiver in @seen), so a receiver that stopped reporting does not
 * leave its last round trip standing. */
static gint64
read_rtt (GObject * session, GHashTable * seen)
{
  GValueArray *sources = NULL;
  g_autoptr (GHashTable) ours = g_hash_table_new (NULL, NULL);
  g_autoptr (GPtrArray) remote =
      g_ptr_array_new_with_free_func ((GDestroyNotify) gst_structure_free);
  gint64 rtt = 0;

  g_object_get (session, "sources", &sources, NULL);
  G_GNUC_BEGIN_IGNORE_DEPRECATIONS;
  for (guint i = 0; sources != NULL && i < sources->n_values; i++) {
    GObject *source = g_value_get_object (g_value_array_get_nth (sources, i));
    GstStructure *stats = NULL;
    gboolean internal = FALSE;
    guint ssrc = 0;

    g_object_get (source, "stats", &stats, NULL);
    if (stats == NULL)
      continue;
    if (gst_structure_get_boolean (stats, "internal", &internal) && internal) {
      if (gst_structure_get_uint (stats, "ssrc", &ssrc))
        g_hash_table_add (ours, GUINT_TO_POINTER (ssrc));
      gst_structure_free (stats);
    } else {
      g_ptr_array_add (remote, stats);
    }
  }
  g_clear_pointer (&sources, g_value_array_free);
  G_GNUC_END_IGNORE_DEPRECATIONS;
  for (guint i = 0; i < remote->len; i++) {
    const GstStructure *stats = g_ptr_array_index (remote, i);
    gboolean have_rb = FALSE;
    guint ssrc = 0, rb_ssrc = 0, lsr = 0, dlsr = 0, round_trip = 0;
    guint64 block;

    if (!gst_structure_get_boolean (stats, "have-rb", &have_rb) || !have_rb ||
        !gst_structure_get_uint (stats, "ssrc", &ssrc) ||
        !gst_structure_get_uint (stats, "rb-ssrc", &rb_ssrc) ||
        !gst_structure_get_uint (stats, "rb-lsr", &lsr) ||
        !gst_structure_get_uint (stats, "rb-dlsr", &dlsr) ||
        !gst_structure_get_uint (stats, "rb-round-trip", &round_trip) ||
        !g_hash_table_contains (ours, GUINT_TO_POINTER (rb_ssrc)) || lsr == 0)
      continue;
    block = (guint64) lsr << 32 | dlsr;
    if (g_hash_table_contains (seen, GUINT_TO_POINTER (ssrc)) &&
        *(guint64 *) g_hash_table_lookup (seen, GUINT_TO_POINTER (ssrc)) ==
        block)
      continue;
    g_hash_table_insert (seen, GUINT_TO_POINTER (ssrc),
        g_memdup2 (&block, sizeof block));
    if (round_trip > 0 && round_trip <= MAX_RTT_UNITS)
      rtt = MAX (rtt, (gint64) round_trip * G_USEC_PER_SEC / 65536);
  }
  return rtt;
}

/* Each receiver report block about our media, as the RTP session takes
 * it in (on its RTCP thread): the audio, or a video stream the
 * retransmission policy follows; a block about the retransmissions' own
 * stream says nothing of the path. The newest fraction lost of each
 * stream is kept. rtpsession 1.22 keeps only the last block a receiver
 * sent (on the stats of the receiver's source), and a receiver that
 * reports on the audio, the video and the retransmissions in one packet
 * leaves whichever came last there. */
static void
on_receiving_rtcp (GObject * session, GstBuffer * buffer, gpointer data)
{
  LegbaPeerSender *self = data;
  GstRTCPBuffer rtcp = GST_RTCP_BUFFER_INIT;
  GstRTCPPacket packet;
  gboolean more;

  if (!gst_rtcp_buffer_map (buffer, GST_MAP_READ, &rtcp))
    return;
  g_mutex_lock (&self->lock);
  for (more = gst_rtcp_buffer_get_first_packet (&rtcp, &packet); more;
      more = gst_rtcp_packet_move_to_next (&packet)) {
    GstRTCPType type = gst_rtcp_packet_get_type (&packet);

    if (type != GST_RTCP_TYPE_SR && type != GST_RTCP_TYPE_RR)
      continue;
    for (guint i = 0; i < gst_rtcp_packet_get_rb_count (&packet); i++) {
      guint32 ssrc, exthighestseq, jitter, lsr, dlsr;
      guint8 fraction_lost;
      gint32 packets_lost;

      gst_rtcp_packet_get_rb (&packet, i, &ssrc, &fraction_lost,
          &packets_lost, &exthighestseq, &jitter, &lsr, &dlsr);
      if ((self->audio_ssrc != 0 && ssrc == self->audio_ssrc) ||
          g_hash_table_contains (self->policies, GUINT_TO_POINTER (ssrc)))
        g_hash_table_insert (self->report_loss, GUINT_TO_POINTER (ssrc),
            GUINT_TO_POINTER (fraction_lost + 1));
    }
  }
  g_mutex_unlock (&self->lock);
  gst_rtcp_buffer_unmap (&rtcp);
}

/* The highest fraction lost (0..1) of the newest report block about each
 * of our media streams, or -1 before any. Called with the lock. */
static gdouble
media_loss (LegbaPeerSender * self)
{
  GHashTableIter iter;
  gpointer value;
  gdouble loss = -1;

  g_hash_table_iter_init (&iter, self->report_loss);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    loss = MAX (loss, (GPOINTER_TO_UINT (value) - 1) / 256.0);
  return loss;
}

/* The loss on the way to the receiver: the higher of what its
 * transport-wide feedback says of the video's packets over the last
 * loss interval (every 100 ms or so, before any retransmission) and its
 * report blocks about our media (the audio's included; a GStreamer
 * receiver sends those seconds apart), or -1 before either. Called with
 * the lock. */
static gdouble
path_loss (LegbaPeerSender * self)
{
  LegbaBweState state;
  gdouble loss = media_loss (self);

  if (self->feedback_reports > 0) {
    legba_bwe_get_state (self->bwe, &state);
    loss = MAX (loss, state.loss_fraction);
  }
  return loss;
}

/* Takes a reading of the loss; returns whether the room should hear
 * it (its percentage moved). Called with the lock. */
static gboolean
update_loss (LegbaPeerSender * self, gdouble loss)
{
  guint percent;

  if (loss < 0)
    return FALSE;
  self->loss = loss >= self->loss ? loss :
      (1 - LOSS_FALL_WEIGHT) * self->loss + LOSS_FALL_WEIGHT * loss;
  percent = (guint) (self->loss * 100 + 0.5);
  if (percent == self->reported_loss)
    return FALSE;
  GST_DEBUG_OBJECT (self, "the receiver reports %.1f%% lost (%u%% smoothed)",
      loss * 100, percent);
  self->reported_loss = percent;
  return TRUE;
}

static void
poll_rtt (LegbaPeerSender * self, gint64 now)
{
  GObject *session;
  gint64 rtt;
  gboolean report;

  g_mutex_lock (&self->lock);
  self->rtt_at = now;
  session = self->session ? g_object_ref (self->session) : NULL;
  g_mutex_unlock (&self->lock);
  if (session == NULL && (session = find_session (self)) != NULL) {
    g_mutex_lock (&self->lock);
    g_set_object (&self->session, session);
    g_mutex_unlock (&self->lock);
    self->rtcp_handler = g_signal_connect (session, "on-receiving-rtcp",
        G_CALLBACK (on_receiving_rtcp), self);
  }
  if (session == NULL)
    return;
  rtt = read_rtt (session, self->rtt_blocks);
  g_object_unref (session);
  g_mutex_lock (&self->lock);
  report = update_loss (self, path_loss (self)) && self->target_func != NULL;
  if (rtt > 0) {
    self->rtt_us = rtt;
    legba_bwe_on_rtt (self->bwe, rtt, now);
    g_hash_table_foreach (self->policies, set_policy_rtt, &rtt);
  }
  g_mutex_unlock (&self->lock);
  report_target (self, report);
}

/* Runs on the task, every TICK_US. */
void
legba_peer_sender_tick (LegbaPeerSender * self, gint64 now)
{
  gboolean report, rtt_due;

  g_mutex_lock (&self->lock);
  self->tick_at = now + TICK_US;
  legba_bwe_on_tick (self->bwe, now);
  legba_send_rates_update (&self->rates, now);
  report = update_target (self, now);
  rtt_due = now - self->rtt_at >= RTT_POLL_US;
  g_mutex_unlock (&self->lock);
  report_target (self, report);
  pad (self, now);
  if (rtt_due)
    poll_rtt (self, now);
}

/* ---- Stats ---- */

static void
add_counts (gpointer ssrc, gpointer policy, gpointer total)
{
  LegbaRtxCounts counts, *sum = total;

  legba_rtx_policy_get_counts (policy, &counts);
  sum->requests += counts.requests;
  sum->sent += counts.sent;
  sum->sent_twice += counts.sent_twice;
  sum->unknown += counts.unknown;
  sum->too_old += counts.too_old;
  sum->recent += counts.recent;
  sum->over_budget += counts.over_budget;
}

GstStructure *
legba_peer_sender_get_stats (LegbaPeerSender * self)
{
  LegbaBweState state;
  LegbaRtxCounts rtx = { 0, };
  GstStructure *s;
  gdouble rate;

  g_mutex_lock (&self->lock);
  legba_bwe_get_state (self->bwe, &state);
  g_hash_table_foreach (self->policies, add_counts, &rtx);
  rate = legba_peer_sender_pacing_factor (self, g_get_monotonic_time ()) *
      self->target;
  s = gst_structure_new ("legba-sender-stats",
      "target-bitrate", G_TYPE_UINT, state.target_bps,
      "video-target-bitrate", G_TYPE_UINT, self->video_target,
      "audio-bitrate", G_TYPE_UINT,
      legba_send_rates_lane_bps (&self->rates, LEGBA_SENDER_LANE_AUDIO),
      "video-bitrate", G_TYPE_UINT,
      legba_send_rates_lane_bps (&self->rates, LEGBA_SENDER_LANE_VIDEO),
      "rtx-bitrate", G_TYPE_UINT,
      legba_send_rates_lane_bps (&self->rates, LEGBA_SENDER_LANE_RTX),
      "delay-based-bitrate", G_TYPE_UINT, state.delay_bps,
      "loss-based-bitrate", G_TYPE_UINT, state.loss_bps,
      "acknowledged-bitrate", G_TYPE_UINT, state.acked_bps,
      "delay-usage", G_TYPE_STRING, legba_bwe_usage_name (state.usage),
      "rate-control", G_TYPE_STRING,
      legba_bwe_rate_state_name (state.rate_state),
      "feedback-loss", G_TYPE_DOUBLE, state.loss_fraction,
      "reported-loss", G_TYPE_DOUBLE, MAX (self->loss, 0.0),
      "feedback-reports", G_TYPE_UINT64, self->feedback_reports,
      "feedback-missing", G_TYPE_BOOLEAN, state.feedback_missing,
      "audio-untracked", G_TYPE_BOOLEAN, audio_untracked (self),
      "round-trip-ms", G_TYPE_DOUBLE, self->rtt_us / 1000.0,
      "pacing-rate", G_TYPE_UINT, (guint) rate,
      "pacing-queue-ms", G_TYPE_DOUBLE,
      rate > 0 ? self->queued_bytes * 8 * 1000.0 / rate : 0.0,
      "pacing-queue-packets", G_TYPE_UINT, self->queued_packets,
      "video-steered", G_TYPE_BOOLEAN, !self->video_unsteered,
      "rtx-requests", G_TYPE_UINT64, rtx.requests,
      "rtx-sent", G_TYPE_UINT64, rtx.sent,
      "rtx-sent-twice", G_TYPE_UINT64, rtx.sent_twice,
      "rtx-refused-recent", G_TYPE_UINT64, rtx.recent,
      "rtx-refused-too-old", G_TYPE_UINT64, rtx.too_old + rtx.unknown,
      "rtx-refused-budget", G_TYPE_UINT64, rtx.over_budget,
      "packets-sent-audio", G_TYPE_UINT64,
      self->packets_sent[LEGBA_SENDER_LANE_AUDIO],
      "packets-sent-video", G_TYPE_UINT64,
      self->packets_sent[LEGBA_SENDER_LANE_VIDEO],
      "packets-sent-rtx", G_TYPE_UINT64,
      self->packets_sent[LEGBA_SENDER_LANE_RTX],
      "padding-requests", G_TYPE_UINT64, self->pad_requests, NULL);
  g_mutex_unlock (&self->lock);
  return s;
}
