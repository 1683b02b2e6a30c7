/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What every part of a room uses: its debug category, running on the
 * room's main context (hand-overs, timeouts, clearing a source), and
 * holding a peer connection and handing its work over to that context.
 * Calls nothing of the room's other files.
 */
#include <legba/room/legba-room-private.h>

GST_DEBUG_CATEGORY (legba_room_debug);

/* The rooms' debug category, for the code that may run before a room is
 * made (legba_room_prepare()). */
void
legba_room_debug_init (void)
{
  static gsize done;

  if (g_once_init_enter (&done)) {
    GST_DEBUG_CATEGORY_INIT (legba_room_debug, "legbaroom", 0, "Legba rooms");
    g_once_init_leave (&done, 1);
  }
}

const char *
legba_enum_nick (GType type, int value)
{
  GEnumClass *klass = g_type_class_ref (type);
  GEnumValue *v = g_enum_get_value (klass, value);

  g_type_class_unref (klass);
  return v ? v->value_nick : "?";
}

void
legba_room_invoke (LegbaRoom * self, GSourceFunc func, gpointer data,
    GDestroyNotify notify)
{
  /* Always queued, never run at once: a callback from inside webrtcbin
   * must not call back into it (it may hold its locks). */
  GSource *source = g_idle_source_new ();

  g_source_set_priority (source, G_PRIORITY_DEFAULT);
  g_source_set_callback (source, func, data, notify);
  g_source_set_static_name (source, "legba-room-invoke");
  g_source_attach (source, self->context);
  g_source_unref (source);
}

GSource *
legba_room_attach_source (LegbaRoom * self, GSource * source, GSourceFunc func,
    gpointer data, GDestroyNotify notify)
{
  g_source_set_callback (source, func, data, notify);
  g_source_set_static_name (source, "legba-room-timeout");
  g_source_attach (source, self->context);
  return source;
}

GSource *
legba_room_timeout (LegbaRoom * self, guint ms, GSourceFunc func,
    gpointer data, GDestroyNotify notify)
{
  return legba_room_attach_source (self, g_timeout_source_new (ms), func, data,
      notify);
}

void
legba_clear_source (GSource ** source)
{
  if (*source == NULL)
    return;
  g_source_destroy (*source);
  g_clear_pointer (source, g_source_unref);
}

/* ---- Reference counting ---- */

LegbaPeer *
legba_peer_ref (LegbaPeer * peer)
{
  g_atomic_ref_count_inc (&peer->ref);
  return peer;
}

void
legba_peer_unref (LegbaPeer * peer)
{
  if (g_atomic_ref_count_dec (&peer->ref))
    peer->free (peer);
}

void
legba_peer_closure_unref (gpointer peer, GClosure * closure)
{
  legba_peer_unref (peer);
}

/* ---- Handing over to the room's context ---- */

typedef struct
{
  LegbaPeer *peer;
  PeerFunc func;
  gpointer data;
  GDestroyNotify free_data;
} PeerCall;

static gboolean
peer_call_run (gpointer data)
{
  PeerCall *call = data;

  if (call->peer->room != NULL)
    call->func (call->peer, call->data);
  return G_SOURCE_REMOVE;
}

static void
peer_call_free (gpointer data)
{
  PeerCall *call = data;

  if (call->free_data != NULL && call->data != NULL)
    call->free_data (call->data);
  legba_peer_unref (call->peer);
  g_free (call);
}

/* From any thread: runs func (peer, data) on the room's main context
 * unless the peer is closed by then; data is freed either way. */
void
legba_peer_invoke (LegbaPeer * peer, PeerFunc func, gpointer data,
    GDestroyNotify free_data)
{
  PeerCall *call = g_new0 (PeerCall, 1);
  LegbaRoom *room = peer->room;

  call->peer = legba_peer_ref (peer);
  call->func = func;
  call->data = data;
  call->free_data = free_data;
  if (room == NULL) {
    peer_call_free (call);
    return;
  }
  legba_room_invoke (room, peer_call_run, call, peer_call_free);
}
