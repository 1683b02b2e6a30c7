/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaSendRates: the lanes' rates measured on the wire, and the video
 * encoder's share of an estimate (what the audio and the retransmissions
 * leave, less the video's own headers).
 */
#include <legba/room/legba-send-rates.h>

#define MS (G_TIME_SPAN_MILLISECOND)

/* Counts @pps packets a second of @wire bytes (@payload of them payload)
 * on @lane for @ms milliseconds, from @now; returns the time after. */
static gint64
send_for (LegbaSendRates * rates, gint64 now, guint ms, LegbaSenderLane lane,
    guint pps, gsize wire, gsize payload)
{
  guint n = pps * ms / 1000;

  for (guint i = 0; i < n; i++)
    legba_send_rates_add (rates, lane, wire, payload);
  now += ms * MS;
  legba_send_rates_update (rates, now);
  return now;
}

/* Opus at 50 packets of 200 bytes a second takes 80 kbit/s of a 300 kbit/s
 * estimate; of the 220 left the video's headers take their share (100
 * of 1,000 bytes here): the encoder gets 198 kbit/s, not 300. */
static void
test_audio_and_headers_left_out (void)
{
  LegbaSendRates rates;
  gint64 now = 1000 * MS;

  legba_send_rates_init (&rates, now);
  for (guint i = 0; i < 4; i++) {
    for (guint j = 0; j < 50; j++)
      legba_send_rates_add (&rates, LEGBA_SENDER_LANE_AUDIO, 200, 0);
    now = send_for (&rates, now, 1000, LEGBA_SENDER_LANE_VIDEO, 20, 1000, 900);
  }
  g_assert_cmpuint (legba_send_rates_lane_bps (&rates,
          LEGBA_SENDER_LANE_AUDIO), ==, 80000);
  g_assert_cmpuint (legba_send_rates_lane_bps (&rates,
          LEGBA_SENDER_LANE_VIDEO), ==, 160000);
  g_assert_cmpuint (legba_send_rates_video_target (&rates, 300000, 30000),
      ==, 198000);
}

/* Retransmissions come out of the video's share as the audio does. */
static void
test_retransmissions_left_out (void)
{
  LegbaSendRates rates;
  gint64 now = 0;

  legba_send_rates_init (&rates, now);
  now = send_for (&rates, now, 1000, LEGBA_SENDER_LANE_RTX, 10, 1250, 0);
  /* no video counted yet: a 1,200-byte packet's share, 0.94 */
  g_assert_cmpuint (legba_send_rates_video_target (&rates, 1000000, 30000),
      ==, 846000);
}

/* However little the audio leaves, the video keeps its floor; and no
 * estimate means no target. */
static void
test_floor_and_none (void)
{
  LegbaSendRates rates;
  gint64 now = 0;

  legba_send_rates_init (&rates, now);
  now = send_for (&rates, now, 1000, LEGBA_SENDER_LANE_AUDIO, 50, 200, 0);
  g_assert_cmpuint (legba_send_rates_video_target (&rates, 60000, 30000), ==,
      30000);
  g_assert_cmpuint (legba_send_rates_video_target (&rates, 0, 30000), ==, 0);
}

/* A rate moves only once a window closed, and then half way towards the
 * new window's figure. */
static void
test_windows_smoothed (void)
{
  LegbaSendRates rates;
  gint64 now = 0;

  legba_send_rates_init (&rates, now);
  now = send_for (&rates, now, 1000, LEGBA_SENDER_LANE_AUDIO, 50, 200, 0);
  g_assert_cmpuint (legba_send_rates_lane_bps (&rates,
          LEGBA_SENDER_LANE_AUDIO), ==, 80000);
  /* 400 ms: the window is still open, nothing moves */
  now = send_for (&rates, now, 400, LEGBA_SENDER_LANE_AUDIO, 0, 200, 0);
  g_assert_cmpuint (legba_send_rates_lane_bps (&rates,
          LEGBA_SENDER_LANE_AUDIO), ==, 80000);
  /* the audio stopped: 500 ms later, half way to 0 */
  now = send_for (&rates, now, 100, LEGBA_SENDER_LANE_AUDIO, 0, 200, 0);
  g_assert_cmpuint (legba_send_rates_lane_bps (&rates,
          LEGBA_SENDER_LANE_AUDIO), ==, 40000);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/send-rates/audio-and-headers-left-out",
      test_audio_and_headers_left_out);
  g_test_add_func ("/send-rates/retransmissions-left-out",
      test_retransmissions_left_out);
  g_test_add_func ("/send-rates/floor-and-none", test_floor_and_none);
  g_test_add_func ("/send-rates/windows-smoothed", test_windows_smoothed);
  return g_test_run ();
}
