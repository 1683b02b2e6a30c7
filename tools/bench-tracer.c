/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-bench: CPU time per element, from a GStreamer tracer that reads
 * the calling thread's CPU clock (CLOCK_THREAD_CPUTIME_ID) each time data,
 * an event or a query enters or leaves an element. Each thread keeps the
 * stack of elements it is inside; the time between two readings goes to
 * the element on top (the one working), or, when the stack is empty, to
 * the element that pushes next (a source producing its next buffer). So
 * an element's figure is its own work in streaming threads, without what
 * it pushed downstream; work an element hands to threads of its own
 * (x264's and libvpx's encoder threads) shows in the per-thread figures
 * instead.
 */
#include "bench.h"

#include <time.h>

#define STACK_MAX 64

typedef struct
{
  GstPad *pad;                  /* the pad the call entered through */
  GstElement *element;          /* reffed */
} Entry;

typedef struct
{
  Entry stack[STACK_MAX];
  guint depth;
  guint epoch;
  gint64 last_ns;
} ThreadState;

typedef struct
{
  GstTracer parent;
} BenchTracer;

typedef struct
{
  GstTracerClass parent;
} BenchTracerClass;

static GType bench_tracer_get_type (void);
G_DEFINE_TYPE (BenchTracer, bench_tracer, GST_TYPE_TRACER);

static gint counting;           /* atomic: between open and close */
static guint epoch;             /* atomic: one per window */
static GMutex totals_lock;
static GHashTable *totals;      /* GstElement (reffed) -> gint64 ns */

static void
thread_state_free (gpointer data)
{
  ThreadState *ts = data;

  for (guint i = 0; i < ts->depth; i++)
    gst_object_unref (ts->stack[i].element);
  g_free (ts);
}

static GPrivate thread_state = G_PRIVATE_INIT (thread_state_free);

static gint64
thread_cpu_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * G_GINT64_CONSTANT (1000000000) + ts.tv_nsec;
}

/* The element a pad belongs to, through ghost pads (reffed; NULL when
 * the pad has none). */
static GstElement *
pad_element (GstPad * pad)
{
  GstObject *parent = pad != NULL ? gst_object_get_parent (GST_OBJECT (pad))
      : NULL;

  while (parent != NULL && GST_IS_PAD (parent)) {
    GstObject *up = gst_object_get_parent (parent);

    gst_object_unref (parent);
    parent = up;
  }
  if (parent != NULL && !GST_IS_ELEMENT (parent))
    g_clear_pointer (&parent, gst_object_unref);
  return (GstElement *) parent;
}

static GstElement *
peer_element (GstPad * pad)
{
  GstPad *peer = gst_pad_get_peer (pad);
  GstElement *element = pad_element (peer);

  g_clear_pointer (&peer, gst_object_unref);
  return element;
}

static void
account (GstElement * element, gint64 ns)
{
  gint64 *total;

  if (element == NULL || ns <= 0)
    return;
  g_mutex_lock (&totals_lock);
  total = g_hash_table_lookup (totals, element);
  if (total == NULL) {
    total = g_new0 (gint64, 1);
    g_hash_table_insert (totals, gst_object_ref (element), total);
  }
  *total += ns;
  g_mutex_unlock (&totals_lock);
}

/* The calling thread's state, NULL when not counting; a state from an
 * earlier window starts afresh. */
static ThreadState *
thread_state_now (gint64 * now)
{
  ThreadState *ts;
  guint current;

  if (!g_atomic_int_get (&counting))
    return NULL;
  ts = g_private_get (&thread_state);
  if (ts == NULL) {
    ts = g_new0 (ThreadState, 1);
    g_private_set (&thread_state, ts);
  }
  *now = thread_cpu_ns ();
  current = g_atomic_int_get (&epoch);
  if (ts->epoch != current) {
    while (ts->depth > 0)
      gst_object_unref (ts->stack[--ts->depth].element);
    ts->epoch = current;
    ts->last_ns = *now;
  }
  return ts;
}

/* A call enters receiver through pad; pusher (looked up only when the
 * stack is empty) is the element the thread was working for until now. */
static void
enter (GstPad * pad, GstElement * receiver, GstPad * pusher_pad,
    gboolean pusher_is_peer)
{
  gint64 now;
  ThreadState *ts = thread_state_now (&now);

  if (ts == NULL) {
    g_clear_pointer (&receiver, gst_object_unref);
    return;
  }
  if (ts->depth > 0) {
    account (ts->stack[ts->depth - 1].element, now - ts->last_ns);
  } else {
    GstElement *pusher = pusher_is_peer ? peer_element (pusher_pad) :
        pad_element (pusher_pad);

    account (pusher, now - ts->last_ns);
    g_clear_pointer (&pusher, gst_object_unref);
  }
  if (receiver != NULL && ts->depth < STACK_MAX) {
    ts->stack[ts->depth].pad = pad;
    ts->stack[ts->depth].element = receiver;
    ts->depth++;
  } else {
    g_clear_pointer (&receiver, gst_object_unref);
  }
  ts->last_ns = now;
}

/* The call that entered through pad returns (calls above it on the
 * stack that never reported their return are dropped with it). */
static void
leave (GstPad * pad)
{
  gint64 now;
  ThreadState *ts = thread_state_now (&now);
  gint i;

  if (ts == NULL)
    return;
  for (i = ts->depth - 1; i >= 0 && ts->stack[i].pad != pad; i--);
  if (i < 0)
    return;
  account (ts->stack[ts->depth - 1].element, now - ts->last_ns);
  while (ts->depth > (guint) i)
    gst_object_unref (ts->stack[--ts->depth].element);
  ts->last_ns = now;
}

/* Data and queries enter the element owning the pad they are given to;
 * pushed events and pulled ranges, the element across the link. */

static void
on_chain_pre (GObject * self, GstClockTime ts, GstPad * pad, gpointer data)
{
  enter (pad, pad_element (pad), pad, TRUE);
}

static void
on_query_pre (GObject * self, GstClockTime ts, GstPad * pad, GstQuery * q)
{
  enter (pad, pad_element (pad), pad, TRUE);
}

static void
on_push_event_pre (GObject * self, GstClockTime ts, GstPad * pad,
    GstEvent * event)
{
  enter (pad, peer_element (pad), pad, FALSE);
}

static void
on_pull_range_pre (GObject * self, GstClockTime ts, GstPad * pad,
    guint64 offset, guint size)
{
  enter (pad, peer_element (pad), pad, FALSE);
}

static void
on_post (GObject * self, GstClockTime ts, GstPad * pad)
{
  leave (pad);
}

static void
bench_tracer_init (BenchTracer * self)
{
  GstTracer *tracer = GST_TRACER (self);

  gst_tracing_register_hook (tracer, "pad-chain-pre",
      G_CALLBACK (on_chain_pre));
  gst_tracing_register_hook (tracer, "pad-chain-post", G_CALLBACK (on_post));
  gst_tracing_register_hook (tracer, "pad-chain-list-pre",
      G_CALLBACK (on_chain_pre));
  gst_tracing_register_hook (tracer, "pad-chain-list-post",
      G_CALLBACK (on_post));
  gst_tracing_register_hook (tracer, "pad-query-pre",
      G_CALLBACK (on_query_pre));
  gst_tracing_register_hook (tracer, "pad-query-post", G_CALLBACK (on_post));
  gst_tracing_register_hook (tracer, "pad-push-event-pre",
      G_CALLBACK (on_push_event_pre));
  gst_tracing_register_hook (tracer, "pad-push-event-post",
      G_CALLBACK (on_post));
  gst_tracing_register_hook (tracer, "pad-pull-range-pre",
      G_CALLBACK (on_pull_range_pre));
  gst_tracing_register_hook (tracer, "pad-pull-range-post",
      G_CALLBACK (on_post));
}

static void
bench_tracer_class_init (BenchTracerClass * klass)
{
}

/* Installs the tracer: before any pipeline leaves the NULL state (tracers
 * are not thread-safe to add later). */
void
bench_tracer_install (void)
{
  GstTracer *tracer;

  totals = g_hash_table_new_full (NULL, NULL, gst_object_unref, g_free);
  tracer = g_object_new (bench_tracer_get_type (), NULL);
  gst_object_ref_sink (tracer);
  /* the hooks hold it from now on, until gst_deinit() */
  gst_object_unref (tracer);
}

/* Starts counting afresh. */
void
bench_tracer_open (void)
{
  g_mutex_lock (&totals_lock);
  g_hash_table_remove_all (totals);
  g_mutex_unlock (&totals_lock);
  g_atomic_int_inc (&epoch);
  g_atomic_int_set (&counting, TRUE);
}

static gint
by_cpu_desc (gconstpointer a, gconstpointer b)
{
  const BenchElementCpu *x = *(BenchElementCpu * const *) a;
  const BenchElementCpu *y = *(BenchElementCpu * const *) b;

  return x->cpu_ns < y->cpu_ns ? 1 : x->cpu_ns > y->cpu_ns ? -1 : 0;
}

static void
element_cpu_free (gpointer data)
{
  BenchElementCpu *e = data;

  g_free (e->name);
  g_free (e->factory);
  g_free (e);
}

/* Stops counting. Returns: (transfer full) (element-type BenchElementCpu)
 * the time of each element since bench_tracer_open(), the busiest first. */
GPtrArray *
bench_tracer_close (void)
{
  GPtrArray *out = g_ptr_array_new_with_free_func (element_cpu_free);
  GHashTableIter iter;
  gpointer key, value;

  g_atomic_int_set (&counting, FALSE);
  g_mutex_lock (&totals_lock);
  g_hash_table_iter_init (&iter, totals);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    GstElement *element = key;
    GstElementFactory *factory = gst_element_get_factory (element);
    BenchElementCpu *e = g_new0 (BenchElementCpu, 1);

    /* bins show their children's time; their own is their ghost pads' */
    if (GST_IS_BIN (element)) {
      g_free (e);
      continue;
    }
    e->name = gst_object_get_name (GST_OBJECT (element));
    e->factory = g_strdup (factory != NULL ?
        gst_plugin_feature_get_name (GST_PLUGIN_FEATURE (factory)) : "");
    e->cpu_ns = *(gint64 *) value;
    g_ptr_array_add (out, e);
  }
  g_hash_table_remove_all (totals);
  g_mutex_unlock (&totals_lock);
  g_ptr_array_sort (out, by_cpu_desc);
  return out;
}
