/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaSendRates (legba-send-rates.h). The estimate covers everything a
 * connection sends, on the wire; the video encoder controls only its own
 * payload. So the video gets the estimate less what the audio and the
 * retransmissions take, times the share of the video's wire bytes that
 * is payload (the rest is IP, UDP, SRTP and RTP headers: 8-15% at low
 * rates, where packets are small). Without that, a 300 kbit/s link with
 * Opus at 64 kbit/s beside the video stays overfull.
 */
#include <legba/room/legba-send-rates.h>

/* A rate is measured over windows of this length, each new one weighing
 * this much against those before. */
#define WINDOW_US (500 * G_TIME_SPAN_MILLISECOND)
#define SMOOTHING 0.5
/* The payload share assumed before the first video packet was counted:
 * a 1,200-byte packet's. */
#define DEFAULT_PAYLOAD_SHARE 0.94

void
legba_send_rates_init (LegbaSendRates * rates, gint64 now_us)
{
  *rates = (LegbaSendRates) {
  .window_at = now_us,.payload_share = DEFAULT_PAYLOAD_SHARE,};
}

void
legba_send_rates_add (LegbaSendRates * rates, LegbaSenderLane lane,
    gsize wire_bytes, gsize payload_bytes)
{
  g_return_if_fail (lane < LEGBA_SENDER_N_LANES);
  rates->bytes[lane] += wire_bytes;
  if (lane == LEGBA_SENDER_LANE_VIDEO)
    rates->video_payload += MIN (payload_bytes, wire_bytes);
}

/* Closes the window once it is long enough. */
void
legba_send_rates_update (LegbaSendRates * rates, gint64 now_us)
{
  gint64 span = now_us - rates->window_at;

  if (span < WINDOW_US)
    return;
  if (rates->bytes[LEGBA_SENDER_LANE_VIDEO] > 0) {
    gdouble share = (gdouble) rates->video_payload /
        rates->bytes[LEGBA_SENDER_LANE_VIDEO];

    rates->payload_share = rates->measured ?
        SMOOTHING * share + (1 - SMOOTHING) * rates->payload_share : share;
  }
  rates->video_payload = 0;
  for (guint lane = 0; lane < LEGBA_SENDER_N_LANES; lane++) {
    gdouble bps = rates->bytes[lane] * 8.0 * G_USEC_PER_SEC / span;

    rates->bps[lane] = rates->measured ?
        SMOOTHING * bps + (1 - SMOOTHING) * rates->bps[lane] : bps;
    rates->bytes[lane] = 0;
  }
  rates->measured = TRUE;
  rates->window_at = now_us;
}

guint
legba_send_rates_lane_bps (const LegbaSendRates * rates, LegbaSenderLane lane)
{
  g_return_val_if_fail (lane < LEGBA_SENDER_N_LANES, 0);
  return (guint) MIN (rates->bps[lane], G_MAXUINT);
}

/* What the video encoder may send, of @target_bps on the wire: at least
 * @min_bps (a picture, however small, rather than none), 0 when there is
 * no target. */
guint
legba_send_rates_video_target (const LegbaSendRates * rates, guint target_bps,
    guint min_bps)
{
  gdouble left;

  if (target_bps == 0)
    return 0;
  left = (gdouble) target_bps - rates->bps[LEGBA_SENDER_LANE_AUDIO] -
      rates->bps[LEGBA_SENDER_LANE_RTX];
  left *= rates->payload_share;
  return (guint) (CLAMP (left, (gdouble) min_bps, (gdouble) target_bps) + 0.5);
}
