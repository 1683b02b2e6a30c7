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
#include <gst/webrtc/webrtc.h>

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

typedef struct
{
  Phases *phases;
  guint slot;
} PhasesWatch;

/* a new pair: forget the last one's instants, time from now */
static inline void
phases_start (Phases * ph)
{
  g_mutex_lock (&ph->lock);
  ph->t0 = g_get_monotonic_time ();
  ph->watched = 0;
  for (guint i = 0; i < 2; i++) {
    ph->left_stable[i] = FALSE;
    ph->described[i] = ph->connected[i] = 0;
  }
  g_mutex_unlock (&ph->lock);
}

static inline void
phases_on_signaling (GstElement * webrtc, GParamSpec * pspec, PhasesWatch * w)
{
  GstWebRTCSignalingState state;
  Phases *ph = w->phases;

  g_object_get (webrtc, "signaling-state", &state, NULL);
  g_mutex_lock (&ph->lock);
  if (state != GST_WEBRTC_SIGNALING_STATE_STABLE)
    ph->left_stable[w->slot] = TRUE;
  else if (ph->left_stable[w->slot] && ph->described[w->slot] == 0)
    ph->described[w->slot] = g_get_monotonic_time ();
  g_mutex_unlock (&ph->lock);
}

static inline void
phases_on_connection (GstElement * webrtc, GParamSpec * pspec,
    PhasesWatch * w)
{
  GstWebRTCPeerConnectionState state;
  Phases *ph = w->phases;

  g_object_get (webrtc, "connection-state", &state, NULL);
  g_mutex_lock (&ph->lock);
  if (state == GST_WEBRTC_PEER_CONNECTION_STATE_CONNECTED &&
      ph->connected[w->slot] == 0)
    ph->connected[w->slot] = g_get_monotonic_time ();
  g_mutex_unlock (&ph->lock);
}

static inline void
phases_watch_free (gpointer data, GClosure * closure)
{
  g_free (data);
}

/* Watches one of the pair's (at most) two webrtcbins. */
static inline void
phases_watch (Phases * ph, GstElement * webrtc)
{
  PhasesWatch *w;

  g_mutex_lock (&ph->lock);
  if (ph->watched >= 2) {
    g_mutex_unlock (&ph->lock);
    return;
  }
  w = g_new0 (PhasesWatch, 1);
  w->phases = ph;
  w->slot = ph->watched++;
  g_mutex_unlock (&ph->lock);
  /* one copy per handler, each freed with its handler */
  g_signal_connect_data (webrtc, "notify::connection-state",
      G_CALLBACK (phases_on_connection), g_memdup2 (w, sizeof *w),
      phases_watch_free, 0);
  g_signal_connect_data (webrtc, "notify::signaling-state",
      G_CALLBACK (phases_on_signaling), w, phases_watch_free, 0);
}

/* the later of the two webrtcbins' instant in ms from phases_start(), or
 * -1 when either has not reached it */
static inline double
phases_ms (Phases * ph, const gint64 * at)
{
  double ms = -1;

  g_mutex_lock (&ph->lock);
  if (ph->watched == 2 && at[0] != 0 && at[1] != 0)
    ms = (MAX (at[0], at[1]) - ph->t0) / 1000.0;
  g_mutex_unlock (&ph->lock);
  return ms;
}

static inline double
phases_described_ms (Phases * ph)
{
  return phases_ms (ph, ph->described);
}

static inline double
phases_connected_ms (Phases * ph)
{
  return phases_ms (ph, ph->connected);
}
