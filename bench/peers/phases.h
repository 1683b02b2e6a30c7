/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Where a pair's setup time goes (the setup mode of the C peers): the
 * pair's two webrtcbins are watched from the moment they are made, and
 * two instants are kept, each the later of the two webrtcbins':
 *
 * - described: signaling-state back to stable after an offer (the offerer
 *   has applied the answer, the answerer has made and applied it);
 * - connected: connection-state connected (ICE and DTLS done).
 *
 * What comes after connected, until both sides' data channels are open,
 * is SCTP and the channels' own handshake. webrtcbin notifies from its
 * own threads, so the instants are taken under a lock.
 */
#pragma once

#include <gst/gst.h>

/* static storage: its lock needs no initialisation */
typedef struct
{
  GMutex lock;
  gint64 t0;                    /* monotonic µs */
  guint watched;
  gboolean left_stable[2];
  gint64 described[2];
  gint64 connected[2];
} Phases;

/* a new pair: forget the last one's instants, time from now */
void phases_start (Phases * ph);

/* Watches one of the pair's (at most) two webrtcbins. */
void phases_watch (Phases * ph, GstElement * webrtc);

/* the later of the two webrtcbins' instant in ms from phases_start(), or
 * -1 when either has not reached it */
double phases_described_ms (Phases * ph);
double phases_connected_ms (Phases * ph);
