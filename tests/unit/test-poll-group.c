/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaPollGroup: sources on many small bucket contexts, served from one
 * parent context. Real sockets (socket pairs), real GSources; every wait
 * runs the parent context until a condition holds, with a deadline.
 */
#include <legba/server/legba-poll-group.h>

#include <gio/gio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define WAIT_S 10

static gboolean
on_wait_timeout (gpointer user_data)
{
  *(gboolean *) user_data = TRUE;
  return G_SOURCE_REMOVE;
}

#define WAIT_UNTIL(expr, reason) G_STMT_START { \
    gboolean timed_out_ = FALSE, held_; \
    guint timer_ = g_timeout_add_seconds (WAIT_S, on_wait_timeout, \
        &timed_out_); \
    while (!(held_ = (expr)) && !timed_out_) \
      g_main_context_iteration (NULL, TRUE); \
    if (!timed_out_) \
      g_source_remove (timer_); \
    if (!held_) \
      g_error ("timed out after %d s waiting for %s", WAIT_S, (reason)); \
  } G_STMT_END

/* One member: the bucket side of a socket pair, read by a GSocket source
 * made in its bucket's context; the test writes to the other side. */
typedef struct
{
  LegbaPollGroup *group;
  LegbaPollBucket *bucket;
  GSocket *socket;
  int peer;
  GSource *source;
  GString *received;
  gboolean eof;
} Member;

static gboolean
member_readable (GSocket * socket, GIOCondition condition, gpointer user_data)
{
  Member *m = user_data;
  char buffer[256];
  gssize n;

  g_assert_true (g_main_context_is_owner (legba_poll_bucket_get_context
          (m->bucket)));
  n = g_socket_receive (socket, buffer, sizeof buffer, NULL, NULL);
  if (n <= 0) {
    m->eof = TRUE;
    return G_SOURCE_REMOVE;
  }
  g_string_append_len (m->received, buffer, n);
  return G_SOURCE_CONTINUE;
}

/* want_fd >= 0: the member's socket gets that descriptor number. */
static Member *
member_new_full (LegbaPollGroup * group, int want_fd)
{
  Member *m = g_new0 (Member, 1);
  g_autoptr (GError) error = NULL;
  GMainContext *context;
  int fds[2];

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK
          | SOCK_CLOEXEC, 0, fds), ==, 0);
  if (want_fd >= 0 && fds[0] != want_fd) {
    g_assert_cmpint (dup2 (fds[0], want_fd), ==, want_fd);
    close (fds[0]);
    fds[0] = want_fd;
  }
  m->group = group;
  m->peer = fds[1];
  m->socket = g_socket_new_from_fd (fds[0], &error);
  g_assert_no_error (error);
  m->received = g_string_new (NULL);
  m->bucket = legba_poll_group_join (group, fds[0]);
  g_assert_nonnull (m->bucket);

  context = legba_poll_bucket_get_context (m->bucket);
  g_main_context_push_thread_default (context);
  m->source = g_socket_create_source (m->socket, G_IO_IN, NULL);
  g_source_set_callback (m->source, G_SOURCE_FUNC (member_readable), m, NULL);
  g_source_attach (m->source, g_main_context_get_thread_default ());
  g_main_context_pop_thread_default (context);
  return m;
}

static Member *
member_new (LegbaPollGroup * group)
{
  return member_new_full (group, -1);
}

static void
member_write (Member * m, const char *text)
{
  g_assert_cmpint (write (m->peer, text, strlen (text)), ==, strlen (text));
}

static void
member_free (Member * m)
{
  g_source_destroy (m->source);
  g_source_unref (m->source);
  legba_poll_group_leave (m->group, m->bucket);
  g_object_unref (m->socket);
  close (m->peer);
  g_string_free (m->received, TRUE);
  g_free (m);
}

static gboolean
all_received (GPtrArray * members, const char *expected)
{
  guint i;

  for (i = 0; i < members->len; i++) {
    Member *m = members->pdata[i];

    if (!g_str_equal (m->received->str, expected))
      return FALSE;
  }
  return TRUE;
}

/* Many members over many buckets: each gets its own bytes, in order,
 * whatever the order in which the peers write. */
static void
test_many_members (void)
{
  LegbaPollGroup *group = legba_poll_group_new (NULL, 8);
  g_autoptr (GPtrArray) members = g_ptr_array_new ();
  g_autoptr (GString) expected = g_string_new (NULL);
  guint i, round;

  for (i = 0; i < 200; i++)
    g_ptr_array_add (members, member_new (group));
  g_assert_cmpuint (legba_poll_group_get_n_buckets (group), ==, 25);
  g_assert_cmpuint (legba_poll_group_get_n_members (group), ==, 200);

  for (round = 0; round < 20; round++) {
    g_autofree char *word = g_strdup_printf ("<%u>", round);

    /* Peers write back to front, so buckets wake in changing orders. */
    for (i = members->len; i > 0; i--)
      member_write (members->pdata[i - 1], word);
    g_string_append (expected, word);
    if (round % 5 == 4)
      WAIT_UNTIL (all_received (members, expected->str),
          "every member to read what its peer wrote");
  }

  for (i = 0; i < members->len; i++)
    member_free (members->pdata[i]);
  g_assert_cmpuint (legba_poll_group_get_n_members (group), ==, 0);
  legba_poll_group_free (group);
}

/* A member left behind does not hold the others back: one peer writes
 * nothing while the rest of its bucket is served. */
static void
test_quiet_member (void)
{
  LegbaPollGroup *group = legba_poll_group_new (NULL, 4);
  Member *quiet = member_new (group);
  g_autoptr (GPtrArray) talking = g_ptr_array_new ();
  guint i;

  for (i = 0; i < 7; i++)
    g_ptr_array_add (talking, member_new (group));
  for (i = 0; i < talking->len; i++)
    member_write (talking->pdata[i], "hello");
  WAIT_UNTIL (all_received (talking, "hello"), "the talking members");
  g_assert_cmpstr (quiet->received->str, ==, "");

  member_write (quiet, "late");
  WAIT_UNTIL (g_str_equal (quiet->received->str, "late"), "the quiet member");

  member_free (quiet);
  for (i = 0; i < talking->len; i++)
    member_free (talking->pdata[i]);
  legba_poll_group_free (group);
}

static gboolean
count_tick (gpointer user_data)
{
  (*(guint *) user_data)++;
  return G_SOURCE_REMOVE;
}

static void
attach_in_bucket (LegbaPollBucket * bucket, GSource * source)
{
  GMainContext *context = legba_poll_bucket_get_context (bucket);

  g_main_context_push_thread_default (context);
  g_source_attach (source, g_main_context_get_thread_default ());
  g_main_context_pop_thread_default (context);
}

/* Timeouts and idles attached to a bucket from outside its callbacks run
 * once the bucket is touched; timeouts attached from its callbacks run
 * without it. */
static void
test_timeouts (void)
{
  LegbaPollGroup *group = legba_poll_group_new (NULL, 4);
  Member *m = member_new (group);
  guint fired = 0;
  GSource *source;

  source = g_timeout_source_new (50);
  g_source_set_callback (source, count_tick, &fired, NULL);
  attach_in_bucket (m->bucket, source);
  g_source_unref (source);
  source = g_idle_source_new ();
  g_source_set_callback (source, count_tick, &fired, NULL);
  attach_in_bucket (m->bucket, source);
  g_source_unref (source);
  legba_poll_bucket_touch (m->bucket);
  WAIT_UNTIL (fired == 2, "an idle and a timeout in a bucket");

  member_free (m);
  legba_poll_group_free (group);
}

typedef struct
{
  LegbaPollBucket *bucket;
  gboolean done;
} ThreadAttach;

static gboolean
mark_done (gpointer user_data)
{
  ThreadAttach *t = user_data;

  g_assert_true (g_main_context_is_owner (legba_poll_bucket_get_context
          (t->bucket)));
  t->done = TRUE;
  return G_SOURCE_REMOVE;
}

static gpointer
attach_from_thread (gpointer user_data)
{
  ThreadAttach *t = user_data;
  GSource *source = g_idle_source_new ();

  g_source_set_callback (source, mark_done, t, NULL);
  g_source_attach (source, legba_poll_bucket_get_context (t->bucket));
  g_source_unref (source);
  return NULL;
}

/* A source attached from another thread (a GTask finishing in a worker)
 * wakes its bucket. */
static void
test_other_thread (void)
{
  LegbaPollGroup *group = legba_poll_group_new (NULL, 4);
  Member *m = member_new (group);
  ThreadAttach t = { m->bucket, FALSE };
  GThread *thread;

  /* Let the bucket mirror its descriptors (its wakeup one included). */
  member_write (m, "x");
  WAIT_UNTIL (g_str_equal (m->received->str, "x"), "the first read");

  thread = g_thread_new ("attach", attach_from_thread, &t);
  g_thread_join (thread);
  WAIT_UNTIL (t.done, "the idle attached from another thread");

  member_free (m);
  legba_poll_group_free (group);
}

/* A descriptor number closed and given to a new member of the same
 * bucket is polled again (closing took it out of the epoll set). */
static void
test_descriptor_reuse (void)
{
  LegbaPollGroup *group = legba_poll_group_new (NULL, 4);
  Member *keep = member_new (group);
  Member *m = member_new (group);
  LegbaPollBucket *bucket = m->bucket;
  int fd = g_socket_get_fd (m->socket);

  member_write (m, "a");
  WAIT_UNTIL (g_str_equal (m->received->str, "a"), "the first member");
  member_free (m);

  /* Same number, same bucket (the place m left). */
  m = member_new_full (group, fd);
  g_assert_cmpint (g_socket_get_fd (m->socket), ==, fd);
  g_assert_true (m->bucket == bucket);
  /* Once the bucket has run (it serves keep), m's bytes can only come
   * through the epoll set. */
  member_write (keep, "k");
  WAIT_UNTIL (g_str_equal (keep->received->str, "k"), "the other member");
  member_write (m, "b");
  WAIT_UNTIL (g_str_equal (m->received->str, "b"), "the reused descriptor");

  member_free (m);
  member_free (keep);
  legba_poll_group_free (group);
}

static gboolean
close_later (gpointer user_data)
{
  (*(guint *) user_data)++;
  return G_SOURCE_REMOVE;
}

/* A group let go while a bucket still holds a timeout serves it, then
 * frees itself (the sanitizer build checks nothing is left). */
static void
test_free_with_pending (void)
{
  LegbaPollGroup *group = legba_poll_group_new (NULL, 4);
  Member *m = member_new (group);
  LegbaPollBucket *bucket = m->bucket;
  guint fired = 0;
  GSource *source;

  source = g_timeout_source_new (100);
  g_source_set_callback (source, close_later, &fired, NULL);
  attach_in_bucket (bucket, source);
  g_source_unref (source);
  member_free (m);

  legba_poll_group_free (group);
  WAIT_UNTIL (fired == 1, "the timeout left in the freed group");
}

/* The parent context's wakeup: the eventfd among the descriptors it
 * polls (GLib writes to it to wake a context from its poll). */
static int
parent_wakeup_fd (void)
{
  GMainContext *context = g_main_context_default ();
  GPollFD fds[16];
  gint max_priority, timeout, n;
  int found = -1;

  g_main_context_acquire (context);
  g_main_context_prepare (context, &max_priority);
  n = g_main_context_query (context, max_priority, &timeout, fds,
      G_N_ELEMENTS (fds));
  g_assert_cmpint (n, <=, G_N_ELEMENTS (fds));
  for (gint i = 0; i < n && found < 0; i++) {
    g_autofree char *path = g_strdup_printf ("/proc/self/fdinfo/%d",
        fds[i].fd);
    g_autofree char *info = NULL;

    if (g_file_get_contents (path, &info, NULL, NULL) &&
        strstr (info, "eventfd-count:") != NULL)
      found = fds[i].fd;
  }
  for (gint i = 0; i < n; i++)
    fds[i].revents = 0;
  if (g_main_context_check (context, max_priority, fds, n))
    g_main_context_dispatch (context);
  g_main_context_release (context);
  g_assert_cmpint (found, >=, 0);
  return found;
}

static gboolean
wakeup_pending (int fd)
{
  GPollFD p = { fd, G_IO_IN, 0 };

  return g_poll (&p, 1, 0) == 1;
}

/* Serving a member's input costs the parent context no wakeup of its
 * own: no write to its eventfd, no iteration more to read it back. */
static void
test_no_wakeup (void)
{
  LegbaPollGroup *group = legba_poll_group_new (NULL, 4);
  Member *m = member_new (group);
  int wakeup = parent_wakeup_fd ();

  member_write (m, "a");
  WAIT_UNTIL (g_str_equal (m->received->str, "a"), "the first read");
  for (guint i = 0; i < 10 && wakeup_pending (wakeup); i++)
    g_main_context_iteration (NULL, FALSE);
  g_assert_false (wakeup_pending (wakeup));

  member_write (m, "b");
  WAIT_UNTIL (g_str_equal (m->received->str, "ab"), "the second read");
  g_assert_false (wakeup_pending (wakeup));

  member_free (m);
  legba_poll_group_free (group);
}

/* A member's callback that runs the parent context (a nested main loop)
 * is not served into: the group serves nothing until the callback
 * returns, then serves what came meanwhile. */
typedef struct
{
  Member *self, *other;
  guint nested;
  gsize other_during;
} Nesting;

static gboolean
nesting_readable (GSocket * socket, GIOCondition condition, gpointer data)
{
  Nesting *n = data;
  gboolean more = member_readable (socket, condition, n->self);

  if (n->nested++ == 0) {
    member_write (n->other, "o");
    for (guint i = 0; i < 5; i++)
      g_main_context_iteration (NULL, FALSE);
    n->other_during = n->other->received->len;
  }
  return more;
}

static void
test_recursion (void)
{
  LegbaPollGroup *group = legba_poll_group_new (NULL, 1);
  Member *a = member_new (group), *b = member_new (group);
  Nesting n = { a, b, 0, 0 };

  g_assert_true (a->bucket != b->bucket);
  g_source_set_callback (a->source, G_SOURCE_FUNC (nesting_readable), &n, NULL);
  member_write (a, "a");
  WAIT_UNTIL (g_str_equal (b->received->str, "o"),
      "the other member, once the nested loop returned");
  g_assert_cmpstr (a->received->str, ==, "a");
  g_assert_cmpuint (n.other_during, ==, 0);
  /* served as before */
  member_write (a, "b");
  WAIT_UNTIL (g_str_equal (a->received->str, "ab"), "a's second read");

  member_free (a);
  member_free (b);
  legba_poll_group_free (group);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/poll-group/many-members", test_many_members);
  g_test_add_func ("/poll-group/quiet-member", test_quiet_member);
  g_test_add_func ("/poll-group/timeouts", test_timeouts);
  g_test_add_func ("/poll-group/other-thread", test_other_thread);
  g_test_add_func ("/poll-group/descriptor-reuse", test_descriptor_reuse);
  g_test_add_func ("/poll-group/free-with-pending", test_free_with_pending);
  g_test_add_func ("/poll-group/no-wakeup", test_no_wakeup);
  g_test_add_func ("/poll-group/recursion", test_recursion);
  return g_test_run ();
}
