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
