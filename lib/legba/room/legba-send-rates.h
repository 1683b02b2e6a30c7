/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaSendRates: what a peer connection's packets take of the link, per
 * lane (audio, retransmissions, video), measured on the wire, and from it
 * the share of the estimated rate left to the video encoder
 * (docs/congestion-control.md, "Who gets the estimate"). No I/O and no
 * clock of its own: the caller gives the time.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum
{
  LEGBA_SENDER_LANE_AUDIO,
  LEGBA_SENDER_LANE_RTX,
  LEGBA_SENDER_LANE_VIDEO,      /* and the serialized events */
  LEGBA_SENDER_N_LANES,
} LegbaSenderLane;

typedef struct
{
  /* the window being counted */
  gint64 window_at;
  guint64 bytes[LEGBA_SENDER_N_LANES];
  guint64 video_payload;
  /* the rates of the windows closed so far, smoothed */
  gboolean measured;
  gdouble bps[LEGBA_SENDER_N_LANES];
  gdouble payload_share;
} LegbaSendRates;

void legba_send_rates_init (LegbaSendRates * rates, gint64 now_us);
void legba_send_rates_add (LegbaSendRates * rates, LegbaSenderLane lane,
    gsize wire_bytes, gsize payload_bytes);
void legba_send_rates_update (LegbaSendRates * rates, gint64 now_us);
guint legba_send_rates_lane_bps (const LegbaSendRates * rates,
    LegbaSenderLane lane);
guint legba_send_rates_video_target (const LegbaSendRates * rates,
    guint target_bps, guint min_bps);

G_END_DECLS
