/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Running a function on the thread of a GMainContext and waiting for it,
 * from another thread: legbaroom's calls into the room it runs on a
 * thread of its own, legbadatasink's and legbadatasrc's calls into their
 * LegbaRoom from a streaming or state-change thread.
 *
 * A call that is cancelled before it starts never runs; once it runs, it is
 * waited for to the end. So the object and data, which the caller owns, are
 * only used while the caller waits: the call takes no reference (the last
 * reference of an element must not go on the context's thread, which the
 * element stops and joins). The context's thread must never wait for the
 * calling thread.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _LegbaContextCall LegbaContextCall;
typedef gpointer (*LegbaContextFunc) (gpointer object, gpointer data);

LegbaContextCall *legba_context_call_new (GMainContext * context,
    gpointer object, LegbaContextFunc func, gpointer data);
void legba_context_call_cancel (LegbaContextCall * call);
gboolean legba_context_call_wait (LegbaContextCall * call, gpointer * result);
void legba_context_call_unref (LegbaContextCall * call);
gpointer legba_context_run (GMainContext * context, gpointer object,
    LegbaContextFunc func, gpointer data);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (LegbaContextCall, legba_context_call_unref)

G_END_DECLS
