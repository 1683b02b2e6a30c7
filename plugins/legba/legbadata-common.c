/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#include "legbadata-common.h"

/* The room: the legba-room property, else the legbaroom element named
 * room-element, looked for in the element's bin, then in each bin above. */
LegbaRoom *
legba_data_find_room (GstElement * element, LegbaRoom * room,
    const char *room_element, GError ** error)
{
  GstObject *bin;

  if (room != NULL)
    return g_object_ref (room);
  if (room_element == NULL) {
    g_set_error (error, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_SETTINGS,
        "Set room-element (the name of a legbaroom in the pipeline) or "
        "legba-room");
    return NULL;
  }
  for (bin = gst_object_get_parent (GST_OBJECT (element)); bin != NULL;) {
    GstElement *found = GST_IS_BIN (bin) ?
        gst_bin_get_by_name (GST_BIN (bin), room_element) : NULL;
    GstObject *up = gst_object_get_parent (bin);

    gst_object_unref (bin);
    bin = up;
    if (found == NULL)
      continue;
    if (g_object_class_find_property (G_OBJECT_GET_CLASS (found),
            "legba-room") != NULL)
      g_object_get (found, "legba-room", &room, NULL);
    gst_object_unref (found);
    if (room != NULL) {
      g_clear_object (&bin);
      return room;
    }
    g_set_error (error, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_SETTINGS,
        "Element %s is not a legbaroom", room_element);
    g_clear_object (&bin);
    return NULL;
  }
  g_set_error (error, GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_NOT_FOUND,
      "No element named %s in the pipeline", room_element);
  return NULL;
}

/* A call on the room's thread that the calling thread waits for, or
 * gives up on (flushing): then it never runs, or has run already. */
struct _LegbaDataCall
{
  gatomicrefcount ref;
  GMutex lock;
  GCond cond;
  gboolean done;
  gboolean running;
  gboolean cancelled;
  LegbaRoom *room;
  LegbaDataFunc func;
  gpointer data;
};

static gboolean
call_run (gpointer data)
{
  LegbaDataCall *call = data;

  g_mutex_lock (&call->lock);
  call->running = !call->cancelled;
  g_mutex_unlock (&call->lock);
  if (call->running)
    call->func (call->room, call->data);
  g_mutex_lock (&call->lock);
  call->done = TRUE;
  g_cond_broadcast (&call->cond);
  g_mutex_unlock (&call->lock);
  return G_SOURCE_REMOVE;
}

LegbaDataCall *
legba_data_call_new (LegbaRoom * room, LegbaDataFunc func, gpointer data)
{
  LegbaDataCall *call = g_new0 (LegbaDataCall, 1);

  g_atomic_ref_count_init (&call->ref);
  g_mutex_init (&call->lock);
  g_cond_init (&call->cond);
  call->room = g_object_ref (room);
  call->func = func;
  call->data = data;
  g_atomic_ref_count_inc (&call->ref);
  g_main_context_invoke_full (legba_room_get_main_context (room),
      G_PRIORITY_DEFAULT, call_run, call,
      (GDestroyNotify) legba_data_call_unref);
  return call;
}

void
legba_data_call_unref (LegbaDataCall * call)
{
  if (!g_atomic_ref_count_dec (&call->ref))
    return;
  g_object_unref (call->room);
  g_mutex_clear (&call->lock);
  g_cond_clear (&call->cond);
  g_free (call);
}

void
legba_data_call_cancel (LegbaDataCall * call)
{
  g_mutex_lock (&call->lock);
  call->cancelled = TRUE;
  g_cond_broadcast (&call->cond);
  g_mutex_unlock (&call->lock);
}

/* TRUE when the call ran; FALSE when it was cancelled first. */
gboolean
legba_data_call_wait (LegbaDataCall * call)
{
  gboolean ran;

  g_mutex_lock (&call->lock);
  /* once running, a call is waited for: its data is the caller's */
  while (!call->done && !(call->cancelled && !call->running))
    g_cond_wait (&call->cond, &call->lock);
  ran = call->done && call->running;
  g_mutex_unlock (&call->lock);
  return ran;
}

/* Runs func on the room's thread and waits, for calls that cannot be
 * cancelled (start and stop). */
gboolean
legba_data_run (LegbaRoom * room, LegbaDataFunc func, gpointer data)
{
  g_autoptr (LegbaDataCall) call = NULL;

  if (g_main_context_is_owner (legba_room_get_main_context (room))) {
    func (room, data);
    return TRUE;
  }
  call = legba_data_call_new (room, func, data);
  return legba_data_call_wait (call);
}

/* A participant named by id or by identity. */
gboolean
legba_data_matches_id (const char *id, const char *identity, char **names)
{
  if (names == NULL)
    return TRUE;
  for (guint i = 0; names[i] != NULL; i++)
    if (g_strcmp0 (names[i], id) == 0 || g_strcmp0 (names[i], identity) == 0)
      return TRUE;
  return FALSE;
}

gboolean
legba_data_matches (LegbaParticipant * p, char **names)
{
  return legba_data_matches_id (legba_participant_get_id (p),
      legba_participant_get_identity (p), names);
}
