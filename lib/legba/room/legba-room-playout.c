/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The jitter buffers of a room's received streams on a real path: once a
 * second, on the room's context, each peer connection's jitter buffers
 * get the latency their LegbaPlayout gives from their own counts
 * (legba-playout.h; LegbaRoom:latency is where each starts,
 * LegbaRoom:max-latency the most it grows to). The highest among a
 * connection's is its participant's `jitter-buffer-latency` stat.
 */
#include <legba/room/legba-room-private.h>
#include <legba/room/legba-playout.h>

#define PLAYOUT_KEY "legba-playout"

static guint64
stat (const GstStructure * stats, const char *name)
{
  guint64 value = 0;

  gst_structure_get_uint64 (stats, name, &value);
  return value;
}

/* Gives one jitter buffer its latency; returns it. */
static guint
adapt (LegbaPeer * peer, GstElement * jitterbuffer, gint64 now)
{
  LegbaPlayout *playout = g_object_get_data (G_OBJECT (jitterbuffer),
      PLAYOUT_KEY);
  g_autoptr (GstStructure) stats = NULL;
  LegbaPlayoutStats counts;
  guint latency;

  if (playout == NULL) {
    /* where webrtcbin set it: the room's latency when the connection
     * was made */
    g_object_get (jitterbuffer, "latency", &latency, NULL);
    playout = g_new (LegbaPlayout, 1);
    legba_playout_init (playout, latency, 0);
    g_object_set_data_full (G_OBJECT (jitterbuffer), PLAYOUT_KEY, playout,
        g_free);
  }
  playout->ceiling_ms = MAX (playout->floor_ms,
      (guint) g_atomic_int_get (&peer->room->max_latency));
  g_object_get (jitterbuffer, "stats", &stats, NULL);
  if (stats == NULL)
    return playout->latency_ms;
  counts = (LegbaPlayoutStats) {
  .lost = stat (stats, "num-lost"),.late =
        stat (stats, "num-late"),.rtx_rtt_ns =
        stat (stats, "rtx-rtt"),.jitter_ns = stat (stats, "avg-jitter"),};
  g_object_get (jitterbuffer, "latency", &latency, NULL);
  if (legba_playout_update (playout, &counts, now) == latency)
    return latency;
  GST_INFO_OBJECT (jitterbuffer, "pc %s: jitter buffer %u -> %u ms (lost %"
      G_GUINT64_FORMAT ", late %" G_GUINT64_FORMAT ", retransmissions' "
      "round trip %" G_GUINT64_FORMAT " ms)", peer->pc, latency,
      playout->latency_ms, counts.lost, counts.late,
      counts.rtx_rtt_ns / 1000000);
  /* posts a latency message: the pipeline's sinks wait as much more */
  g_object_set (jitterbuffer, "latency", playout->latency_ms, NULL);
  return playout->latency_ms;
}

static gboolean
is_jitterbuffer (GstElement * element)
{
  GstElementFactory *factory = gst_element_get_factory (element);

  return factory != NULL &&
      g_strcmp0 (GST_OBJECT_NAME (factory), "rtpjitterbuffer") == 0;
}

static void
adapt_peer (LegbaPeer * peer, gint64 now)
{
  GstIterator *it;
  GValue item = G_VALUE_INIT;
  guint highest = 0;
  gboolean done = FALSE;

  /* a connection without media (a room of data only) has no jitter
   * buffer to look for among webrtcbin's elements */
  if (peer->webrtcbin == NULL || !legba_peer_media_has_streams (peer))
    return;
  it = gst_bin_iterate_recurse (GST_BIN (peer->webrtcbin));
  while (!done) {
    switch (gst_iterator_next (it, &item)) {
      case GST_ITERATOR_OK:{
        GstElement *element = g_value_get_object (&item);

        if (is_jitterbuffer (element))
          highest = MAX (highest, adapt (peer, element, now));
        g_value_reset (&item);
        break;
      }
      case GST_ITERATOR_RESYNC:
        gst_iterator_resync (it);
        break;
      default:
        done = TRUE;
        break;
    }
  }
  g_value_unset (&item);
  gst_iterator_free (it);
  peer->playout_latency = highest;
}

static gboolean
playout_tick (gpointer data)
{
  LegbaRoom *self = data;
  GHashTableIter iter;
  gpointer peer;
  gint64 now = g_get_monotonic_time ();

  g_hash_table_iter_init (&iter, self->peers);
  while (g_hash_table_iter_next (&iter, NULL, &peer))
    adapt_peer (peer, now);
  return G_SOURCE_CONTINUE;
}

void
legba_room_start_playout (LegbaRoom * self)
{
  legba_clear_source (&self->playout_source);
  self->playout_source = legba_room_attach_source (self,
      g_timeout_source_new_seconds (1), playout_tick, self, NULL);
}

void
legba_room_stop_playout (LegbaRoom * self)
{
  legba_clear_source (&self->playout_source);
}

/* Adds the connection's jitter buffer latency to its participant's
 * stats, once a received stream has one. */
void
legba_peer_playout_add_stats (LegbaPeer * peer, GstStructure * summary)
{
  if (peer->playout_latency != 0)
    gst_structure_set (summary, "jitter-buffer-latency", G_TYPE_UINT,
        peer->playout_latency, NULL);
}
