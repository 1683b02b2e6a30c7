/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#include "legba-context-call.h"

struct _LegbaContextCall
{
  gatomicrefcount ref;
  GMutex lock;
  GCond cond;
  gboolean done;
  gboolean running;
  gboolean cancelled;
  gpointer object;
  LegbaContextFunc func;
  gpointer data;
  gpointer result;
};

static gboolean
call_run (gpointer data)
{
  LegbaContextCall *call = data;
  gpointer result = NULL;

  g_mutex_lock (&call->lock);
  call->running = !call->cancelled;
  g_mutex_unlock (&call->lock);
  if (call->running)
    result = call->func (call->object, call->data);
  g_mutex_lock (&call->lock);
  call->result = result;
  call->done = TRUE;
  g_cond_broadcast (&call->cond);
  g_mutex_unlock (&call->lock);
  return G_SOURCE_REMOVE;
}

/* Invokes func (object, data) on context's thread. */
LegbaContextCall *
legba_context_call_new (GMainContext * context, gpointer object,
    LegbaContextFunc func, gpointer data)
{
  LegbaContextCall *call = g_new0 (LegbaContextCall, 1);

  g_atomic_ref_count_init (&call->ref);
  g_mutex_init (&call->lock);
  g_cond_init (&call->cond);
  call->object = object;
  call->func = func;
  call->data = data;
  g_atomic_ref_count_inc (&call->ref);
  g_main_context_invoke_full (context, G_PRIORITY_DEFAULT, call_run, call,
      (GDestroyNotify) legba_context_call_unref);
  return call;
}

void
legba_context_call_unref (LegbaContextCall * call)
{
  if (!g_atomic_ref_count_dec (&call->ref))
    return;
  g_mutex_clear (&call->lock);
  g_cond_clear (&call->cond);
  g_free (call);
}

/* A call not yet running never will; legba_context_call_wait() returns. */
void
legba_context_call_cancel (LegbaContextCall * call)
{
  g_mutex_lock (&call->lock);
  call->cancelled = TRUE;
  g_cond_broadcast (&call->cond);
  g_mutex_unlock (&call->lock);
}

/* TRUE when the call ran, with what func returned in *result (if not
 * NULL); FALSE when it was cancelled first. */
gboolean
legba_context_call_wait (LegbaContextCall * call, gpointer * result)
{
  gboolean ran;

  g_mutex_lock (&call->lock);
  /* once running, a call is waited for: its data is the caller's */
  while (!call->done && !(call->cancelled && !call->running))
    g_cond_wait (&call->cond, &call->lock);
  ran = call->done && call->running;
  if (result != NULL)
    *result = ran ? call->result : NULL;
  g_mutex_unlock (&call->lock);
  return ran;
}

/* Runs func on context's thread, at once when this thread owns the
 * context, and returns what it returned; for calls never cancelled. */
gpointer
legba_context_run (GMainContext * context, gpointer object,
    LegbaContextFunc func, gpointer data)
{
  g_autoptr (LegbaContextCall) call = NULL;
  gpointer result = NULL;

  if (g_main_context_is_owner (context))
    return func (object, data);
  call = legba_context_call_new (context, object, func, data);
  legba_context_call_wait (call, &result);
  return result;
}
