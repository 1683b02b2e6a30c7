/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The bitrate of the call peers' encoder, the same in legba-peer and
 * webrtcbin-peer and counted as legba-bench counts it on the RTP floor:
 * the bytes out of the element named "enc" over the span of their
 * timestamps (first PTS to the last PTS plus its duration). What goes on
 * the wire adds RTP, SRTP and retransmissions to it.
 */
#ifndef LEGBA_BENCH_ENCODED_H
#define LEGBA_BENCH_ENCODED_H

#include <gst/gst.h>

/* Counts what the element named "enc" in bin puts out, if it has one. */
void encoded_watch (GstBin * bin);

/* Appends ", \"bitrate_bps\": B" to out, or nothing before a second of
 * frames' timestamps has been counted. */
void encoded_append (GString * out);

#endif
