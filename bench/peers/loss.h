/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A controlled packet loss for the mesh peers (--loss P): each outgoing
 * RTP packet is dropped with probability P. In webrtcbin-peer every
 * webrtcbin added to the pipeline gets a netsim as its auxiliary sender
 * (webrtcbin's request-aux-sender), after its RTX sender and before
 * SRTP; a Legba room takes that slot for its congestion control, so in
 * legba-peer the packets are dropped as they leave, at each connection's
 * nicesink, where SRTP leaves the RTP header readable. Either way media
 * packets and their retransmissions are dropped alike; RTCP (the
 * receivers' NACKs and PLIs, the reports) and the data channels are not. The packets in and
 * out of the netsims are counted, so a run says what it dropped. A loss
 * in the network itself (netem) would take RTCP too; this machine's
 * kernel has no netem qdisc.
 */
#ifndef LEGBA_BENCH_LOSS_H
#define LEGBA_BENCH_LOSS_H

#include <gst/gst.h>

/* the P of --loss P, 0 (no netsim) unless set */
void loss_set_probability (gdouble probability);

/* --loss P is a probability under 1, and only for mesh mode */
gboolean loss_option_ok (const char *mode);

/* the packets into and out of the netsims when a window opened */
typedef struct
{
  gint in, out;
} LossWindow;

void loss_window_open (LossWindow * w);

/* the window's loss, as JSON members followed by ", " */
void loss_window_print (const LossWindow * w, GString * out);

/* call for every element added to the pipeline (deep-element-added) */
void loss_watch (GstElement * element);

void loss_watch_wire (GstElement * element);

#endif
