/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Where a pair's setup time goes, for the setup mode of the C peers
 * (phases.h).
 */
#include "phases.h"

#include <gst/webrtc/webrtc.h>

typedef struct
{
  Phases *phases;
  guint slot;
} PhasesWatch;

/* a new pair: forget the last one's instants, time from now */
void
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

static void
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

static void
phases_on_connection (GstElement * webrtc, GParamSpec * pspec, PhasesWatch * w)
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

static void
phases_watch_free (gpointer data, GClosure * closure)
{
  g_free (data);
}

/* Watches one of the pair's (at most) two webrtcbins. */
void
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
static double
phases_ms (Phases * ph, const gint64 * at)
{
  double ms = -1;

  g_mutex_lock (&ph->lock);
  if (ph->watched == 2 && at[0] != 0 && at[1] != 0)
    ms = (MAX (at[0], at[1]) - ph->t0) / 1000.0;
  g_mutex_unlock (&ph->lock);
  return ms;
}

double
phases_described_ms (Phases * ph)
{
  return phases_ms (ph, ph->described);
}

double
phases_connected_ms (Phases * ph)
{
  return phases_ms (ph, ph->connected);
}
