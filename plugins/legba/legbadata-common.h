/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What legbadatasink and legbadatasrc share: finding their LegbaRoom and
 * the participants they name.
 */
#pragma once

#include <gst/gst.h>
#include <legba/legba.h>

G_BEGIN_DECLS

LegbaRoom *legba_data_find_room (GstElement * element, LegbaRoom * room,
    const char *room_element, GError ** error);

gboolean legba_data_matches (LegbaParticipant * p, char **names);
gboolean legba_data_matches_id (const char *id, const char *identity,
    char **names);

G_END_DECLS
