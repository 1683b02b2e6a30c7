/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What legbadatasink and legbadatasrc share: finding their LegbaRoom, and
 * calling it on its own thread from a streaming or state-change thread.
 */
#pragma once

#include <gst/gst.h>
#include <legba/legba.h>

G_BEGIN_DECLS

typedef struct _LegbaDataCall LegbaDataCall;
typedef void (*LegbaDataFunc) (LegbaRoom * room, gpointer data);

LegbaRoom *legba_data_find_room (GstElement * element, LegbaRoom * room,
    const char *room_element, GError ** error);

LegbaDataCall *legba_data_call_new (LegbaRoom * room, LegbaDataFunc func,
    gpointer data);
void legba_data_call_cancel (LegbaDataCall * call);
gboolean legba_data_call_wait (LegbaDataCall * call);
void legba_data_call_unref (LegbaDataCall * call);
gboolean legba_data_run (LegbaRoom * room, LegbaDataFunc func, gpointer data);

gboolean legba_data_matches (LegbaParticipant * p, char **names);
gboolean legba_data_matches_id (const char *id, const char *identity,
    char **names);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (LegbaDataCall, legba_data_call_unref)

G_END_DECLS
