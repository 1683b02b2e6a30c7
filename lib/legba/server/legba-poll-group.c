/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#include <legba/server/legba-poll-group.h>

#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

/* How often a freed group looks whether its buckets are empty yet. */
#define ORPHAN_CHECK_MS 50

typedef struct
{
  int fd;
  guint32 events;               /* EPOLL* */
} LegbaPollEntry;

struct _LegbaPollBucket
{
  LegbaPollGroup *group;
  GMainContext *context;
  int epfd;
  guint index;                  /* in the group's buckets */
  guint members;
  gint64 deadline;              /* monotonic µs of the next timeout; -1: none */
  gboolean idle;                /* no source but the wakeup at last look */
  GArray *registered;           /* LegbaPollEntry in the epoll set, by fd */
  GArray *wanted;               /* scratch: what the last query asked for */
  GPollFD *fds;
  gint n_fds_alloc;
};

typedef struct
{
  GSource source;
  LegbaPollGroup *group;
} LegbaPollSource;

/* The group lives as long as its source: the parent context holds the
 * source while it is attached, and the group's owner holds one more
 * reference until legba_poll_group_free(). */
struct _LegbaPollGroup
{
  LegbaPollSource *source;
  int epfd;                     /* the buckets' epoll descriptors */
  struct epoll_event *ready;    /* scratch for epoll_wait */
  guint n_ready_alloc;
  guint bucket_size;
  GPtrArray *buckets;
  gpointer tag;                 /* epfd in the source */
  guint members;
  gboolean orphaned;            /* freed, serving what is left in the buckets */
  gboolean dispatching;         /* in legba_poll_source_dispatch() */
  gboolean paused;              /* epfd left out of the parent's poll until
                                 * the dispatch that a callback recursed
                                 * into returns */
};

static guint32
legba_poll_events_from_condition (gushort condition)
{
  guint32 events = 0;

  if (condition & G_IO_IN)
    events |= EPOLLIN;
  if (condition & G_IO_OUT)
    events |= EPOLLOUT;
  if (condition & G_IO_PRI)
    events |= EPOLLPRI;
  return events;
}

static gint
legba_poll_entry_compare (gconstpointer a, gconstpointer b)
{
  const LegbaPollEntry *ea = a, *eb = b;

  return (ea->fd > eb->fd) - (ea->fd < eb->fd);
}

static void
legba_poll_bucket_ctl (LegbaPollBucket * bucket, int op, int fd, guint32 events)
{
  struct epoll_event ev = { 0, };

  ev.events = events;
  ev.data.fd = fd;
  if (epoll_ctl (bucket->epfd, op, fd, &ev) == 0)
    return;
  /* A descriptor closed since it was added left the set on its own; one
   * reused since then is a new file the set does not hold yet. */
  if (op == EPOLL_CTL_ADD && errno == EEXIST)
    epoll_ctl (bucket->epfd, EPOLL_CTL_MOD, fd, &ev);
  else if (op == EPOLL_CTL_MOD && errno == ENOENT)
    epoll_ctl (bucket->epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* Makes the epoll set hold exactly the descriptors the bucket's context
 * polls, with the same conditions. */
static void
legba_poll_bucket_sync (LegbaPollBucket * bucket, const GPollFD * fds,
    gint n_fds)
{
  GArray *wanted = bucket->wanted;
  GArray *registered = bucket->registered;
  guint i, j, n;

  g_array_set_size (wanted, 0);
  for (i = 0; i < (guint) n_fds; i++) {
    LegbaPollEntry entry;

    entry.fd = fds[i].fd;
    entry.events = legba_poll_events_from_condition (fds[i].events);
    /* A blocked source polls with no conditions: nothing to wait for. */
    if (entry.events != 0)
      g_array_append_val (wanted, entry);
  }
  g_array_sort (wanted, legba_poll_entry_compare);
  /* One descriptor polled by several sources: the union of conditions. */
  for (i = 0, n = 0; i < wanted->len; i++) {
    LegbaPollEntry *e = &g_array_index (wanted, LegbaPollEntry, i);

    if (n > 0 && g_array_index (wanted, LegbaPollEntry, n - 1).fd == e->fd)
      g_array_index (wanted, LegbaPollEntry, n - 1).events |= e->events;
    else
      g_array_index (wanted, LegbaPollEntry, n++) = *e;
  }
  g_array_set_size (wanted, n);

  i = j = 0;
  while (i < wanted->len || j < registered->len) {
    LegbaPollEntry *w = i < wanted->len ?
        &g_array_index (wanted, LegbaPollEntry, i) : NULL;
    LegbaPollEntry *r = j < registered->len ?
        &g_array_index (registered, LegbaPollEntry, j) : NULL;

    if (r == NULL || (w != NULL && w->fd < r->fd)) {
      legba_poll_bucket_ctl (bucket, EPOLL_CTL_ADD, w->fd, w->events);
      i++;
    } else if (w == NULL || r->fd < w->fd) {
      epoll_ctl (bucket->epfd, EPOLL_CTL_DEL, r->fd, NULL);
      j++;
    } else {
      if (w->events != r->events)
        legba_poll_bucket_ctl (bucket, EPOLL_CTL_MOD, w->fd, w->events);
      i++;
      j++;
    }
  }

  bucket->wanted = registered;
  bucket->registered = wanted;
}

static gint
legba_poll_bucket_query (LegbaPollBucket * bucket, gint max_priority,
    gint * timeout)
{
  gint n_fds;

  while ((n_fds = g_main_context_query (bucket->context, max_priority,
              timeout, bucket->fds, bucket->n_fds_alloc)) >
      bucket->n_fds_alloc) {
    g_free (bucket->fds);
    bucket->n_fds_alloc = n_fds;
    bucket->fds = g_new (GPollFD, n_fds);
  }
  legba_poll_bucket_sync (bucket, bucket->fds, n_fds);
  return n_fds;
}

/* One iteration of the bucket's context, never blocking: what GLib's own
 * g_main_context_iteration() does, with the descriptors mirrored into the
 * epoll set on the way, and once more after dispatching, since callbacks
 * may have added sources or timeouts. */
static void
legba_poll_bucket_iterate (LegbaPollBucket * bucket)
{
  gint max_priority = G_MAXINT, timeout = -1, n_fds;
  gboolean ready;

  /* Thread-default while it runs: libsoup and GIO attach the sources they
   * make on the way to the thread-default context, and they must stay in
   * the bucket. */
  g_main_context_push_thread_default (bucket->context);
  g_main_context_prepare (bucket->context, &max_priority);
  n_fds = legba_poll_bucket_query (bucket, max_priority, &timeout);
  if (n_fds > 0)
    g_poll (bucket->fds, n_fds, 0);
  ready = g_main_context_check (bucket->context, max_priority, bucket->fds,
      n_fds);
  if (ready) {
    g_main_context_dispatch (bucket->context);
    max_priority = G_MAXINT;
    timeout = -1;
    if (g_main_context_prepare (bucket->context, &max_priority))
      timeout = 0;
    n_fds = legba_poll_bucket_query (bucket, max_priority, &timeout);
  }
  bucket->idle = timeout < 0 && n_fds <= 1;
  bucket->deadline = timeout < 0 ? -1 :
      g_get_monotonic_time () + (gint64) timeout *1000;
  g_main_context_pop_thread_default (bucket->context);
}

static gboolean
legba_poll_bucket_is_due (LegbaPollBucket * bucket, gint64 now)
{
  return bucket->deadline >= 0 && bucket->deadline <= now;
}

static gboolean
legba_poll_source_prepare (GSource * source, gint * timeout)
{
  LegbaPollGroup *group = ((LegbaPollSource *) source)->group;
  gint64 now = g_source_get_time (source);
  gint64 next = -1;
  guint i;

  /* a callback runs the parent context: nothing here until it returns */
  if (group->dispatching) {
    *timeout = -1;
    return FALSE;
  }
  for (i = 0; i < group->buckets->len; i++) {
    LegbaPollBucket *bucket = g_ptr_array_index (group->buckets, i);

    if (bucket->deadline < 0)
      continue;
    if (bucket->deadline <= now) {
      *timeout = 0;
      return TRUE;
    }
    if (next < 0 || bucket->deadline < next)
      next = bucket->deadline;
  }
  *timeout = next < 0 ? -1 : (gint) MIN ((next - now + 999) / 1000,
      (gint64) G_MAXINT);
  if (group->orphaned && (*timeout < 0 || *timeout > ORPHAN_CHECK_MS))
    *timeout = ORPHAN_CHECK_MS;
  return FALSE;
}

static gboolean
legba_poll_source_check (GSource * source)
{
  LegbaPollGroup *group = ((LegbaPollSource *) source)->group;
  gint64 now = g_source_get_time (source);
  guint i;

  if (group->dispatching)
    return FALSE;
  if (group->orphaned || g_source_query_unix_fd (source, group->tag) != 0)
    return TRUE;
  for (i = 0; i < group->buckets->len; i++)
    if (legba_poll_bucket_is_due (g_ptr_array_index (group->buckets, i), now))
      return TRUE;
  return FALSE;
}

static gboolean
legba_poll_source_dispatch (GSource * source, GSourceFunc callback,
    gpointer user_data)
{
  LegbaPollGroup *group = ((LegbaPollSource *) source)->group;
  gint64 now = g_source_get_time (source);
  gboolean idle = TRUE;
  guint i, n_buckets = group->buckets->len;
  int n_ready;

  if (group->dispatching) {
    /* the parent context, run by a callback of ours: the epoll descriptor
     * stays ready until the outer dispatch serves it, so it leaves the
     * parent's poll meanwhile instead of waking it again and again */
    if (!group->paused && group->tag != NULL) {
      g_source_modify_unix_fd (source, group->tag, 0);
      group->paused = TRUE;
    }
    return G_SOURCE_CONTINUE;
  }
  group->dispatching = TRUE;

  /* GLib holds the source, hence the group, until dispatch returns, even
   * if a callback lets the group go. Buckets made meanwhile are served
   * next time. Each bucket is served at most once here: those with input
   * are marked due first. */
  g_source_set_ready_time (source, -1);
  if (group->n_ready_alloc < n_buckets) {
    g_free (group->ready);
    group->n_ready_alloc = n_buckets;
    group->ready = g_new (struct epoll_event, n_buckets);
  }
  n_ready = n_buckets > 0 ?
      epoll_wait (group->epfd, group->ready, n_buckets, 0) : 0;
  for (i = 0; n_ready > 0 && i < (guint) n_ready; i++) {
    LegbaPollBucket *bucket =
        g_ptr_array_index (group->buckets, group->ready[i].data.u32);

    bucket->deadline = 0;
  }
  for (i = 0; i < n_buckets; i++) {
    LegbaPollBucket *bucket = g_ptr_array_index (group->buckets, i);

    if (group->orphaned || legba_poll_bucket_is_due (bucket, now))
      legba_poll_bucket_iterate (bucket);
    idle = idle && bucket->idle;
  }
  group->dispatching = FALSE;
  if (group->paused) {
    g_source_modify_unix_fd (source, group->tag, G_IO_IN);
    group->paused = FALSE;
  }
  /* Let go and nothing left to serve (closes begun in the buckets have
   * finished): the context drops the source, which frees the group. */
  if (group->orphaned && idle)
    return G_SOURCE_REMOVE;
  return G_SOURCE_CONTINUE;
}

static void legba_poll_bucket_free (LegbaPollBucket * bucket);

static void
legba_poll_source_finalize (GSource * source)
{
  LegbaPollGroup *group = ((LegbaPollSource *) source)->group;
  guint i;

  for (i = 0; i < group->buckets->len; i++)
    legba_poll_bucket_free (g_ptr_array_index (group->buckets, i));
  g_ptr_array_unref (group->buckets);
  close (group->epfd);
  g_free (group->ready);
  g_free (group);
}

static GSourceFuncs legba_poll_source_funcs = {
  legba_poll_source_prepare,
  legba_poll_source_check,
  legba_poll_source_dispatch,
  legba_poll_source_finalize,
  NULL,
  NULL,
};

LegbaPollGroup *
legba_poll_group_new (GMainContext * parent, guint bucket_size)
{
  LegbaPollGroup *group = g_new0 (LegbaPollGroup, 1);
  GSource *source;

  group->bucket_size = MAX (bucket_size, 1);
  group->buckets = g_ptr_array_new ();
  group->epfd = epoll_create1 (EPOLL_CLOEXEC);
  source = g_source_new (&legba_poll_source_funcs, sizeof (LegbaPollSource));
  g_source_set_static_name (source, "LegbaPollGroup");
  group->source = (LegbaPollSource *) source;
  group->source->group = group;
  /* GLib would take the descriptor out of the context around each
   * dispatch and put it back, and each is a write to the context's wakeup
   * and one more iteration to read it: the source guards against its own
   * recursion instead */
  g_source_set_can_recurse (source, TRUE);
  if (group->epfd >= 0)
    group->tag = g_source_add_unix_fd (source, group->epfd, G_IO_IN);
  g_source_attach (source, parent);
  return group;
}

static void
legba_poll_bucket_free (LegbaPollBucket * bucket)
{
  g_main_context_release (bucket->context);
  close (bucket->epfd);
  g_main_context_unref (bucket->context);
  g_array_unref (bucket->registered);
  g_array_unref (bucket->wanted);
  g_free (bucket->fds);
  g_free (bucket);
}

void
legba_poll_group_free (LegbaPollGroup * group)
{
  if (group == NULL)
    return;
  /* Sockets closing when their owner lets go finish closing in the
   * buckets (their last callbacks are there); the group goes once every
   * bucket is empty. */
  group->orphaned = TRUE;
  g_source_set_ready_time ((GSource *) group->source, 0);
  g_source_unref ((GSource *) group->source);
}

static LegbaPollBucket *
legba_poll_bucket_new (LegbaPollGroup * group)
{
  LegbaPollBucket *bucket;
  struct epoll_event ev = { 0, };
  int epfd;

  if (group->epfd < 0 || (epfd = epoll_create1 (EPOLL_CLOEXEC)) < 0)
    return NULL;
  ev.events = EPOLLIN;
  ev.data.u32 = group->buckets->len;
  if (epoll_ctl (group->epfd, EPOLL_CTL_ADD, epfd, &ev) != 0) {
    close (epfd);
    return NULL;
  }
  bucket = g_new0 (LegbaPollBucket, 1);
  bucket->group = group;
  bucket->epfd = epfd;
  bucket->index = group->buckets->len;
  /* The group's thread owns the context for good. Sources it attaches
   * itself are seen at the next iteration (after a dispatch, or when
   * touched); sources attached from another thread (a GTask finishing in
   * a worker) signal the context's wakeup descriptor, which is in the
   * epoll set. */
  bucket->context = g_main_context_new ();
  g_main_context_acquire (bucket->context);
  bucket->deadline = -1;
  bucket->registered = g_array_new (FALSE, FALSE, sizeof (LegbaPollEntry));
  bucket->wanted = g_array_new (FALSE, FALSE, sizeof (LegbaPollEntry));
  g_ptr_array_add (group->buckets, bucket);
  return bucket;
}

LegbaPollBucket *
legba_poll_group_join (LegbaPollGroup * group, int fd)
{
  LegbaPollBucket *bucket = NULL;
  guint i;

  g_return_val_if_fail (group != NULL && !group->orphaned, NULL);

  for (i = 0; i < group->buckets->len; i++) {
    LegbaPollBucket *b = g_ptr_array_index (group->buckets, i);

    if (b->members < group->bucket_size) {
      bucket = b;
      break;
    }
  }
  if (bucket == NULL)
    bucket = legba_poll_bucket_new (group);
  if (bucket == NULL)
    return NULL;

  /* The descriptor number may have served a socket of this bucket that
   * is closed now: closing took it out of the epoll set, so forget it was
   * there and add it again at the next iteration. */
  for (i = 0; fd >= 0 && i < bucket->registered->len; i++) {
    if (g_array_index (bucket->registered, LegbaPollEntry, i).fd == fd) {
      g_array_remove_index (bucket->registered, i);
      break;
    }
  }
  /* Iterated at the parent's next iteration, which mirrors the new
   * member's descriptors (a new bucket's epoll set does not even hold its
   * wakeup descriptor before that). */
  bucket->deadline = 0;
  bucket->members++;
  group->members++;
  return bucket;
}

void
legba_poll_group_leave (LegbaPollGroup * group, LegbaPollBucket * bucket)
{
  g_return_if_fail (group != NULL && bucket != NULL);
  g_return_if_fail (bucket->members > 0);

  bucket->members--;
  group->members--;
}

GMainContext *
legba_poll_bucket_get_context (LegbaPollBucket * bucket)
{
  return bucket->context;
}

void
legba_poll_bucket_touch (LegbaPollBucket * bucket)
{
  bucket->deadline = 0;
}

guint
legba_poll_group_get_n_buckets (LegbaPollGroup * group)
{
  return group->buckets->len;
}

guint
legba_poll_group_get_n_members (LegbaPollGroup * group)
{
  return group->members;
}
