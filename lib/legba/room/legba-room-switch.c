/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A mesh room moving to its SFU (docs/rooms.md, "From mesh to SFU";
 * docs/room-protocol.md §8), make before break:
 *
 * - the mesh connections are kept, out of the room core's hands (which
 *   makes no new ones), while the SFU connections are made; each
 *   participant's goes when the SFU connection that receives it is
 *   connected, before the SFU brings its first media, and once the local
 *   messages queued for it on the mesh went out;
 * - the local participant's reliable messages to everyone, which go to
 *   the SFU from the event on, wait in its queue until each participant
 *   it met in the mesh has said, with the signal `sfu-ready`, that its
 *   subscription to the local participant's feed has its data channel
 *   open: the SFU relays a message to the subscribers whose channel is
 *   open then, and no other.
 *
 * SWITCH_MS bounds it all: then the messages go and the mesh connections
 * close, whoever has not answered.
 *
 * Threads: the room's main context, as everything of the room's.
 */
#include <legba/room/legba-room-data-private.h>

/* The longest a move may take before the room stops waiting */
#define SWITCH_MS 5000
/* How often a mesh connection's queue is looked at again */
#define DRAIN_POLL_MS 50

struct _LegbaRoomSwitch
{
  LegbaRoom *room;
  GHashTable *retired;          /* participant id -> LegbaPeer (owned) */
  GHashTable *partners;         /* ids of those met in the mesh, until
                                 * told sfu-ready */
  GHashTable *waiting;          /* ids of those whose sfu-ready is due */
  GHashTable *receiving;        /* ids received through the SFU */
  LegbaPeer *publisher;         /* owned: connected, its data held */
  gboolean released;            /* the publisher carries the data */
  GSource *deadline;
  GSource *drain_poll;
  gint64 started;
};

static void
close_retired (LegbaRoomSwitch * sw, const char *id)
{
  LegbaPeer *peer = g_hash_table_lookup (sw->retired, id);

  if (peer == NULL)
    return;
  GST_INFO ("room %s: closing the mesh connection to %s (pc %s), %"
      G_GINT64_FORMAT " ms into the move to the SFU", sw->room->room_name,
      id, peer->pc, (g_get_monotonic_time () - sw->started) / 1000);
  g_hash_table_remove (sw->room->peers, peer->pc);
  legba_peer_close (peer);
  g_hash_table_remove (sw->retired, id);
  legba_room_congestion_update (sw->room);
}

static void
finish (LegbaRoomSwitch * sw)
{
  LegbaRoom *room = sw->room;

  if (!sw->released || g_hash_table_size (sw->retired) > 0 ||
      g_hash_table_size (sw->partners) > 0)
    return;
  GST_INFO ("room %s: moved to the SFU in %" G_GINT64_FORMAT " ms",
      room->room_name, (g_get_monotonic_time () - sw->started) / 1000);
  g_clear_pointer (&room->sw, legba_room_switch_free);
}

static void
release (LegbaRoomSwitch * sw)
{
  if (sw->released || sw->publisher == NULL)
    return;
  sw->released = TRUE;
  GST_INFO ("room %s: messages go through the SFU, %" G_GINT64_FORMAT
      " ms into the move", sw->room->room_name,
      (g_get_monotonic_time () - sw->started) / 1000);
  legba_room_data_peer_connected (sw->room, sw->publisher);
}

static gboolean drain_poll (gpointer data);

/* Closes each mesh connection whose participant comes through the SFU
 * and whose queue is empty; polls for the others. */
static void
close_drained (LegbaRoomSwitch * sw)
{
  g_autoptr (GPtrArray) due = g_ptr_array_new ();
  gboolean queued = FALSE;
  GHashTableIter iter;
  gpointer id;

  g_hash_table_iter_init (&iter, sw->retired);
  while (g_hash_table_iter_next (&iter, &id, NULL)) {
    if (!g_hash_table_contains (sw->receiving, id))
      continue;
    if (legba_room_data_queued (sw->room, id) > 0)
      queued = TRUE;
    else
      g_ptr_array_add (due, id);
  }
  for (guint i = 0; i < due->len; i++)
    close_retired (sw, due->pdata[i]);
  if (queued && sw->drain_poll == NULL)
    sw->drain_poll = legba_room_timeout (sw->room, DRAIN_POLL_MS, drain_poll,
        sw, NULL);
}

static gboolean
drain_poll (gpointer data)
{
  LegbaRoomSwitch *sw = data;

  legba_clear_source (&sw->drain_poll);
  close_drained (sw);
  finish (sw);
  return G_SOURCE_REMOVE;
}

static gboolean
deadline_expired (gpointer data)
{
  LegbaRoomSwitch *sw = data;
  g_autoptr (GPtrArray) ids = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter iter;
  gpointer id;

  legba_clear_source (&sw->deadline);
  GST_WARNING ("room %s: the move to the SFU is not done after %d ms (%u "
      "participants to answer, %u mesh connections); finishing it",
      sw->room->room_name, SWITCH_MS, g_hash_table_size (sw->waiting),
      g_hash_table_size (sw->retired));
  g_hash_table_remove_all (sw->waiting);
  g_hash_table_remove_all (sw->partners);
  release (sw);
  g_hash_table_iter_init (&iter, sw->retired);
  while (g_hash_table_iter_next (&iter, &id, NULL))
    g_ptr_array_add (ids, g_strdup (id));
  for (guint i = 0; i < ids->len; i++)
    close_retired (sw, ids->pdata[i]);
  /* without a publisher yet, the data waits for it as in any SFU room */
  sw->released = TRUE;
  finish (sw);
  return G_SOURCE_REMOVE;
}

gboolean
legba_room_switch_begin (LegbaRoom * room)
{
  LegbaRoomSwitch *sw;

  g_return_val_if_fail (room->sw == NULL, FALSE);

  sw = g_new0 (LegbaRoomSwitch, 1);
  sw->room = room;
  sw->started = g_get_monotonic_time ();
  sw->retired = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      (GDestroyNotify) legba_peer_unref);
  sw->waiting = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  sw->partners = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  sw->receiving = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0;
      i < g_list_model_get_n_items (G_LIST_MODEL (room->participants)); i++) {
    g_autoptr (LegbaParticipant) p =
        g_list_model_get_item (G_LIST_MODEL (room->participants), i);

    /* a connection still being made is closed as the core sees fit */
    if (p->peer == NULL || p->peer->sfu || !p->peer->connected)
      continue;
    /* the core, which closes the participant's connection, finds none */
    g_hash_table_insert (sw->retired, g_strdup (p->id),
        g_steal_pointer (&p->peer));
    g_hash_table_add (sw->waiting, g_strdup (p->id));
    g_hash_table_add (sw->partners, g_strdup (p->id));
  }
  if (g_hash_table_size (sw->retired) == 0) {
    legba_room_switch_free (sw);
    return FALSE;
  }
  GST_INFO ("room %s: moving to the SFU, keeping %u mesh connections until "
      "then", room->room_name, g_hash_table_size (sw->retired));
  sw->deadline = legba_room_timeout (room, SWITCH_MS, deadline_expired, sw,
      NULL);
  room->sw = sw;
  return TRUE;
}

gboolean
legba_room_switch_hold (LegbaRoom * room, LegbaPeer * publisher)
{
  LegbaRoomSwitch *sw = room->sw;

  if (sw == NULL || sw->released)
    return FALSE;
  g_clear_pointer (&sw->publisher, legba_peer_unref);
  sw->publisher = legba_peer_ref (publisher);
  if (g_hash_table_size (sw->waiting) == 0) {
    release (sw);
    finish (sw);
  } else {
    GST_INFO ("room %s: the SFU takes the local tracks; messages wait for %u "
        "participants to receive them", room->room_name,
        g_hash_table_size (sw->waiting));
  }
  return TRUE;
}

void
legba_room_switch_ready (LegbaRoom * room, const char *from)
{
  LegbaRoomSwitch *sw = room->sw;

  if (sw == NULL || !g_hash_table_remove (sw->waiting, from))
    return;
  GST_INFO ("room %s: %s receives the local participant through the SFU",
      room->room_name, from);
  if (g_hash_table_size (sw->waiting) == 0) {
    release (sw);
    finish (sw);
  }
}

void
legba_room_switch_receiving (LegbaRoom * room, LegbaPeer * subscriber)
{
  LegbaRoomSwitch *sw = room->sw;

  if (sw == NULL)
    return;
  g_hash_table_add (sw->receiving, g_strdup (subscriber->participant->id));
  close_drained (sw);
  finish (sw);
}

void
legba_room_switch_subscribed (LegbaRoom * room, LegbaPeer * subscriber)
{
  g_autoptr (JsonObject) ready = NULL;
  g_autoptr (GError) error = NULL;

  if (room->sw == NULL ||
      !g_hash_table_remove (room->sw->partners, subscriber->participant->id))
    return;
  ready = json_object_new ();
  json_object_set_string_member (ready, "pc", subscriber->pc);
  json_object_set_string_member (ready, "type", "sfu-ready");
  if (!legba_signaller_send (room->signaller, subscriber->participant->id,
          ready, &error))
    GST_WARNING ("room %s: could not tell %s it is received through the "
        "SFU: %s", room->room_name, subscriber->participant->id,
        error->message);
  finish (room->sw);
}

void
legba_room_switch_participant_left (LegbaRoom * room, LegbaParticipant * p)
{
  LegbaRoomSwitch *sw = room->sw;

  if (sw == NULL)
    return;
  close_retired (sw, p->id);
  g_hash_table_remove (sw->receiving, p->id);
  g_hash_table_remove (sw->partners, p->id);
  if (g_hash_table_remove (sw->waiting, p->id) &&
      g_hash_table_size (sw->waiting) == 0)
    release (sw);
  finish (sw);
}

void
legba_room_switch_free (LegbaRoomSwitch * sw)
{
  GHashTableIter iter;
  gpointer value;

  if (sw == NULL)
    return;
  legba_clear_source (&sw->deadline);
  legba_clear_source (&sw->drain_poll);
  g_hash_table_iter_init (&iter, sw->retired);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    LegbaPeer *peer = value;

    g_hash_table_remove (sw->room->peers, peer->pc);
    legba_peer_close (peer);
  }
  g_hash_table_unref (sw->retired);
  g_hash_table_unref (sw->waiting);
  g_hash_table_unref (sw->partners);
  g_hash_table_unref (sw->receiving);
  g_clear_pointer (&sw->publisher, legba_peer_unref);
  g_free (sw);
}
