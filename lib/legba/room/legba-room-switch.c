/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A mesh room moving to its SFU (docs/rooms.md, "From mesh to SFU";
 * docs/room-protocol.md §8), make before break:
 *
 * - the connected mesh connections are kept, out of the room core's
 *   hands (which makes no new ones), while the SFU connections are made;
 *   each track of a participant comes from the mesh until the SFU brings
 *   it (the mesh track is reported removed right before the SFU's is
 *   added);
 * - while the local participant's messages are held (below), its
 *   publisher connection sends a `legba.sfu-probe` every PROBE_MS;
 * - a participant's subscriber connection with its data channel open,
 *   each track Janus offered on it reported and one of that
 *   participant's probes received on it is told to that participant with
 *   the signal `sfu-ready`; the mesh connection with it closes once
 *   `sfu-ready` went both ways and the local messages queued for it on the
 *   mesh went out;
 * - the local participant's reliable messages to everyone, which go to
 *   the SFU from the event on, wait in its queue until each participant
 *   it met in the mesh has said `sfu-ready`: the SFU relays a message to
 *   the subscribers it considers ready then, and no other. Janus 1.1
 *   considers a subscriber ready once its SCTP association first reported
 *   itself dry (its VideoRoom's data_ready), which may come after the
 *   subscriber's channel opened; a probe that arrived says it is.
 *
 * SWITCH_MS bounds it all: then the messages go and the mesh connections
 * close, whoever has not answered.
 *
 * Threads: the room's main context, as everything of the room's.
 */
#include <legba/room/legba-room-data-private.h>

#include <string.h>

/* The longest a move may take before the room stops waiting */
#define SWITCH_MS 5000
/* How often a mesh connection's queue is looked at again */
#define DRAIN_POLL_MS 50
/* How often the publisher connection sends a probe while the local
 * messages are held */
#define PROBE_MS 100

/* What a participant's subscriber connection brings so far */
typedef struct
{
  guint expected;               /* 1 << LegbaTrackKind, as Janus offered */
  guint announced;
  gboolean open;                /* its reliable channel */
  gboolean probed;              /* a probe of its came through the SFU */
} Feed;

struct _LegbaRoomSwitch
{
  LegbaRoom *room;
  GHashTable *retired;          /* participant id -> LegbaPeer (owned) */
  GHashTable *partners;         /* ids of those met in the mesh, until
                                 * told sfu-ready */
  GHashTable *waiting;          /* ids of those whose sfu-ready is due */
  GHashTable *feeds;            /* id -> Feed: its subscriber connection */
  GHashTable *receiving;        /* ids received through the SFU */
  LegbaPeer *publisher;         /* owned: connected, its data held */
  gboolean released;            /* the publisher carries the data */
  GSource *deadline;
  GSource *drain_poll;
  GSource *probe;               /* while the publisher's data is held */
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
  legba_clear_source (&sw->probe);
  sw->released = TRUE;
  GST_INFO ("room %s: messages go through the SFU, %" G_GINT64_FORMAT
      " ms into the move", sw->room->room_name,
      (g_get_monotonic_time () - sw->started) / 1000);
  legba_room_data_peer_connected (sw->room, sw->publisher);
}

static gboolean drain_poll (gpointer data);
static Feed *feed_of (LegbaRoomSwitch * sw, LegbaPeer * subscriber);
static void feed_check (LegbaRoomSwitch * sw, LegbaPeer * subscriber);

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
    /* the connection is the other side's too: it goes when each side
     * receives the other through the SFU */
    if (!g_hash_table_contains (sw->receiving, id) ||
        g_hash_table_contains (sw->waiting, id))
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
  legba_clear_source (&sw->probe);
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
  sw->feeds = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
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

static gboolean
probe (gpointer data)
{
  LegbaRoomSwitch *sw = data;

  if (sw->publisher != NULL)
    legba_room_data_send_probe (sw->room, sw->publisher);
  return G_SOURCE_CONTINUE;
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
    legba_clear_source (&sw->probe);
    probe (sw);
    sw->probe = legba_room_timeout (room, PROBE_MS, probe, sw, NULL);
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
  if (g_hash_table_size (sw->waiting) == 0)
    release (sw);
  close_drained (sw);
  finish (sw);
}

static gboolean
feed_check_later (gpointer data)
{
  LegbaParticipant *p = data;

  if (p->peer != NULL && p->peer->sfu_subscriber && p->peer->room != NULL &&
      p->peer->room->sw != NULL)
    feed_check (p->peer->room->sw, p->peer);
  return G_SOURCE_REMOVE;
}

void
legba_room_switch_track (LegbaRoom * room, LegbaPeer * subscriber,
    LegbaTrackKind kind)
{
  LegbaPeer *mesh;

  if (room->sw == NULL)
    return;
  feed_of (room->sw, subscriber)->announced |= 1 << kind;
  mesh = g_hash_table_lookup (room->sw->retired, subscriber->participant->id);
  if (mesh != NULL) {
    GST_INFO ("room %s: %s's %s now comes through the SFU",
        room->room_name, subscriber->participant->id,
        kind == LEGBA_TRACK_KIND_VIDEO ? "video" : "audio");
    legba_peer_media_withdraw (mesh, kind);
  }
  /* once the track is reported */
  legba_room_invoke (room, feed_check_later,
      g_object_ref (subscriber->participant), g_object_unref);
}

gboolean
legba_room_switch_bye (LegbaRoom * room, const char *from, const char *pc)
{
  LegbaRoomSwitch *sw = room->sw;
  LegbaPeer *mesh = sw ? g_hash_table_lookup (sw->retired, from) : NULL;

  if (mesh == NULL || strcmp (mesh->pc, pc) != 0)
    return FALSE;
  /* a client that moves break-before-make: it will not say sfu-ready */
  close_retired (sw, from);
  finish (sw);
  return TRUE;
}

static Feed *
feed_of (LegbaRoomSwitch * sw, LegbaPeer * subscriber)
{
  Feed *f = g_hash_table_lookup (sw->feeds, subscriber->participant->id);

  if (f == NULL) {
    f = g_new0 (Feed, 1);
    f->expected = 1 << LEGBA_TRACK_KIND_VIDEO | 1 << LEGBA_TRACK_KIND_AUDIO;
    g_hash_table_insert (sw->feeds, g_strdup (subscriber->participant->id), f);
  }
  return f;
}

/* The subscriber connection has its reliable channel open, has reported
 * each track Janus offered and has brought a probe: the participant is
 * received through the SFU; a participant of the mesh is told so
 * (sfu-ready). */
static void
feed_check (LegbaRoomSwitch * sw, LegbaPeer * subscriber)
{
  LegbaRoom *room = sw->room;
  const char *id = subscriber->participant->id;
  Feed *f = feed_of (sw, subscriber);
  g_autoptr (JsonObject) ready = NULL;
  g_autoptr (GError) error = NULL;

  if (!f->open || !f->probed ||
      (f->announced & f->expected) != f->expected ||
      g_hash_table_contains (sw->receiving, id))
    return;
  g_hash_table_add (sw->receiving, g_strdup (id));
  if (g_hash_table_remove (sw->partners, id)) {
    ready = json_object_new ();
    json_object_set_string_member (ready, "pc", subscriber->pc);
    json_object_set_string_member (ready, "type", "sfu-ready");
    if (!legba_signaller_send (room->signaller, id, ready, &error))
      GST_WARNING ("room %s: could not tell %s it is received through the "
          "SFU: %s", room->room_name, id, error->message);
  }
  close_drained (sw);
  finish (sw);
}

void
legba_room_switch_feed (LegbaRoom * room, LegbaPeer * subscriber,
    const char *offer)
{
  Feed *f;

  if (room->sw == NULL)
    return;
  f = feed_of (room->sw, subscriber);
  f->expected = (strstr (offer, "m=video ") ? 1 << LEGBA_TRACK_KIND_VIDEO :
      0) | (strstr (offer, "m=audio ") ? 1 << LEGBA_TRACK_KIND_AUDIO : 0);
}

void
legba_room_switch_subscribed (LegbaRoom * room, LegbaPeer * subscriber)
{
  if (room->sw == NULL)
    return;
  feed_of (room->sw, subscriber)->open = TRUE;
  feed_check (room->sw, subscriber);
}

void
legba_room_switch_probed (LegbaRoom * room, LegbaPeer * subscriber)
{
  Feed *f;

  if (room->sw == NULL)
    return;
  f = feed_of (room->sw, subscriber);
  if (f->probed)
    return;
  f->probed = TRUE;
  GST_INFO ("room %s: %s's messages come through the SFU", room->room_name,
      subscriber->participant->id);
  feed_check (room->sw, subscriber);
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
  legba_clear_source (&sw->probe);
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
  g_hash_table_unref (sw->feeds);
  g_clear_pointer (&sw->publisher, legba_peer_unref);
  g_free (sw);
}
