/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A room's stats timer: every #LegbaRoom:stats-interval each peer
 * connection refreshes its participant's stats (legba-room-peer.c).
 */
#include <legba/room/legba-room-private.h>

static gboolean
stats_tick (gpointer data)
{
  LegbaRoom *self = data;
  GHashTableIter iter;
  gpointer peer;

  g_hash_table_iter_init (&iter, self->peers);
  while (g_hash_table_iter_next (&iter, NULL, &peer))
    legba_peer_update_stats (peer);
  return G_SOURCE_CONTINUE;
}

/* An interval of whole seconds takes GLib's second timers, which wake
 * together: the rooms of a context then refresh in one main-loop
 * iteration instead of one each, and every iteration visits all of the
 * context's sources. */
void
legba_room_restart_stats (LegbaRoom * self)
{
  guint ms = self->stats_interval;

  legba_clear_source (&self->stats_source);
  if (ms == 0 || self->state == LEGBA_ROOM_STATE_DISCONNECTED)
    return;
  self->stats_source = legba_room_attach_source (self, ms % 1000 == 0 ?
      g_timeout_source_new_seconds (ms / 1000) : g_timeout_source_new (ms),
      stats_tick, self, NULL);
}
