/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * An in-process LegbaSignaller (test-hub.c): signallers that meet in a
 * hub, which completes joins and delivers signals from idle sources of
 * the main context of the thread that first joined (the sender's, for a
 * signal); a test can hold, reorder and forge signals through it. The
 * hub has no lock: the members of one hub share one context. Members
 * hear only of the members of their own room, as on a server's presence
 * channels.
 */
#pragma once

#include <legba/legba.h>

G_BEGIN_DECLS

#define TEST_TYPE_SIGNALLER (test_signaller_get_type ())
G_DECLARE_FINAL_TYPE (TestSignaller, test_signaller, TEST, SIGNALLER,
    GObject)

typedef struct _TestHub TestHub;

/* Returns TRUE to deliver the signal now; FALSE when the filter kept it
 * (it may deliver it later with test_hub_deliver). */
typedef gboolean (*TestHubFilter) (TestHub * hub, const char *from,
    const char *to, JsonObject * signal, gpointer user_data);

TestHub *test_hub_new (void);
void test_hub_free (TestHub * hub);
void test_hub_set_filter (TestHub * hub, TestHubFilter filter,
    gpointer user_data);
/* Delivers signal to `to` as if `from` (the vouched sender) sent it. */
void test_hub_deliver (TestHub * hub, const char *from, const char *to,
    JsonObject * signal);
/* When FALSE, joiners are neither listed to nor announced to others. */
void test_hub_set_announce (TestHub * hub, gboolean announce);
/* When TRUE, joins complete one after the other as on a presence
 * channel: a joiner lists only the members whose join has completed, and
 * only they hear of it (one of two members offers). By default two joins
 * started together list each other (both offer: glare). */
void test_hub_set_ordered (TestHub * hub, gboolean ordered);
guint test_hub_count (TestHub * hub, const char *type);
/* the pc of the last offer between participants a and b */
const char *test_hub_pc (TestHub * hub, const char *a, const char *b);

TestSignaller *test_signaller_new (TestHub * hub);

G_END_DECLS
