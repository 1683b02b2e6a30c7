/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaPollGroup: many sockets' GSources on one GMainContext at a cost
 * per wakeup that does not grow with the number of sockets.
 *
 * A GMainContext prepares, polls and checks every source it holds at
 * every iteration, so a context holding one source per socket spends
 * O(sockets) on each wakeup, and O(sockets²) to serve every socket once.
 * A poll group splits its members into buckets of a bounded size, each
 * bucket a GMainContext of its own whose file descriptors are mirrored
 * into an epoll set. The parent context polls one epoll descriptor that
 * holds the buckets' ones and iterates only the buckets that have
 * something to do: a wakeup costs about the bucket size in sources, plus
 * a walk over the buckets' timeouts.
 *
 * Everything runs on the parent context's thread: there is no locking
 * and the order of events on one socket is the order GLib gives them.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _LegbaPollGroup LegbaPollGroup;
typedef struct _LegbaPollBucket LegbaPollBucket;

/* A group whose buckets are iterated from parent, each holding up to
 * bucket_size members. */
LegbaPollGroup *legba_poll_group_new (GMainContext * parent,
    guint bucket_size);

/* Lets the group go. Its buckets are still served from the parent context
 * until no source is left in them (a socket closing meanwhile finishes
 * closing); then the group frees itself. */
void legba_poll_group_free (LegbaPollGroup * group);

/* Takes a place in a bucket for a member whose socket is fd and returns
 * the bucket: create the member's sources while
 * legba_poll_bucket_get_context() is the thread-default context. */
LegbaPollBucket *legba_poll_group_join (LegbaPollGroup * group, int fd);

/* Gives the place back. */
void legba_poll_group_leave (LegbaPollGroup * group, LegbaPollBucket * bucket);

GMainContext *legba_poll_bucket_get_context (LegbaPollBucket * bucket);

/* Has the bucket iterated at the parent's next iteration. Call it after
 * acting on a member from outside the bucket's callbacks in a way that
 * may have added a source or a timeout to the bucket's context (a write
 * that could not complete, a close). */
void legba_poll_bucket_touch (LegbaPollBucket * bucket);

/* Number of buckets, and members in all, for tests and metrics. */
guint legba_poll_group_get_n_buckets (LegbaPollGroup * group);
guint legba_poll_group_get_n_members (LegbaPollGroup * group);

G_END_DECLS
