/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The room's participant and negotiation rules (docs/room-protocol.md §3,
 * §4), event by event, without I/O: a fake room records the actions the
 * core asks for, and the tests hand it the time.
 */
#include <legba/room/legba-room-core.h>

#define MS G_TIME_SPAN_MILLISECOND

typedef struct
{
  LegbaRoomCore *core;
  GString *log;                 /* the actions, one a line */
  GPtrArray *handles;           /* char *, the participants' ids */
  GHashTable *live;             /* pc -> non-NULL: peer_is_live */
  gboolean refuse_open;
  gboolean refuse_answer;
  gint64 deadline;              /* the last wake-up asked for */
  guint entered;
  char *last_pc;                /* of the last open_peer */
} Room;

static gpointer
on_added (const char *id, gpointer member, gpointer user_data)
{
  Room *r = user_data;
  char *handle = g_strdup (id);

  g_ptr_array_add (r->handles, handle);
  g_string_append_printf (r->log, "added %s%s\n", id, member ? " +" : "");
  return handle;
}

static const char *
state_name (LegbaRoomCoreState state)
{
  static const char *names[] = { "new", "connecting", "connected",
    "reconnecting", "away", "failed", "left"
  };
  return names[state];
}

static void
on_state (gpointer handle, LegbaRoomCoreState state, gpointer user_data)
{
  Room *r = user_data;

  g_string_append_printf (r->log, "state %s %s\n", (char *) handle,
      state_name (state));
}

static void
on_removed (gpointer handle, gpointer user_data)
{
  Room *r = user_data;

  g_string_append_printf (r->log, "removed %s\n", (char *) handle);
}

static void
on_failed (gpointer handle, const char *why, gpointer user_data)
{
  Room *r = user_data;

  g_string_append_printf (r->log, "failed %s: %s\n", (char *) handle, why);
}

static void
on_entered (gpointer user_data)
{
  Room *r = user_data;

  r->entered++;
}

static gboolean
on_open (gpointer handle, const char *pc, gboolean offerer, gpointer user_data)
{
  Room *r = user_data;

  if (r->refuse_open) {
    g_string_append_printf (r->log, "open %s refused\n", (char *) handle);
    return FALSE;
  }
  g_free (r->last_pc);
  r->last_pc = g_strdup (pc);
  return TRUE;
}

/* pc ids are random: the log says "offer" for one of ours, "answer PC"
 * for the peer's. */
static void
on_start (gpointer handle, const char *pc, const char *sdp, gpointer user_data)
{
  Room *r = user_data;

  if (sdp == NULL)
    g_string_append_printf (r->log, "offer %s\n", (char *) handle);
  else
    g_string_append_printf (r->log, "answer %s %s %s\n", (char *) handle, pc,
        sdp);
}

static void
on_close (gpointer handle, const char *pc, gpointer user_data)
{
  Room *r = user_data;

  g_string_append_printf (r->log, "close %s %s\n", (char *) handle, pc);
}

static void
on_bye (gpointer handle, const char *pc, gpointer user_data)
{
  Room *r = user_data;

  g_string_append_printf (r->log, "bye %s %s\n", (char *) handle, pc);
}

static gboolean
on_answer (gpointer handle, const char *pc, const char *sdp, gpointer user_data)
{
  Room *r = user_data;

  g_string_append_printf (r->log, "apply-answer %s %s\n", pc, sdp);
  return !r->refuse_answer;
}

static void
on_candidates (gpointer handle, const char *pc, JsonArray * candidates,
    gpointer user_data)
{
  Room *r = user_data;

  g_string_append_printf (r->log, "candidates %s %u\n", pc,
      json_array_get_length (candidates));
}

/* live holds the live connections' pcs and, for an SFU room's
 * participants (pc NULL), their ids */
static gboolean
on_is_live (gpointer handle, const char *pc, gpointer user_data)
{
  Room *r = user_data;

  return g_hash_table_contains (r->live, pc != NULL ? pc : handle);
}

static void
on_schedule (gint64 deadline, gpointer user_data)
{
  Room *r = user_data;

  r->deadline = deadline;
}

static void
on_full (guint members, gpointer user_data)
{
  Room *r = user_data;

  g_string_append_printf (r->log, "full %u\n", members);
}

static const LegbaRoomCoreActions actions = {
  on_added, on_state, on_removed, on_failed, on_entered, on_open, on_start,
  on_close, on_bye,
  on_answer, on_candidates, on_is_live, on_schedule, on_full,
};

static void
room_setup (Room * r, gconstpointer data)
{
  r->log = g_string_new (NULL);
  r->handles = g_ptr_array_new_with_free_func (g_free);
  r->live = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  r->deadline = -1;
  r->core = legba_room_core_new (&actions, r);
  legba_room_core_set_local_id (r->core, "m-local");
}

static void
room_teardown (Room * r, gconstpointer data)
{
  legba_room_core_free (r->core);
  g_string_free (r->log, TRUE);
  g_ptr_array_unref (r->handles);
  g_hash_table_unref (r->live);
  g_free (r->last_pc);
}

/* The actions since the last call, and forgets them. */
static char *
take_log (Room * r)
{
  char *out = g_strdup (r->log->str);

  g_string_truncate (r->log, 0);
  return out;
}

#define assert_log(r, expected) G_STMT_START { \
  g_autofree char *_log = take_log (r); \
  g_assert_cmpstr (_log, ==, expected); \
} G_STMT_END

static void
join (Room * r, const char *const *ids, gint64 now)
{
  gpointer members[8];
  guint n = g_strv_length ((char **) ids);

  for (guint i = 0; i < n; i++)
    members[i] = (gpointer) ids[i];
  g_assert_true (legba_room_core_joined (r->core, ids, members, n, now));
}

/* A connected offerer connection with id, made by joining a room that
 * lists it. Returns its pc. */
static char *
connect_by_joining (Room * r, const char *id, gint64 now)
{
  const char *ids[] = { id, NULL };

  join (r, ids, now);
  g_assert_true (legba_room_core_peer_connected (r->core, r->last_pc));
  g_string_truncate (r->log, 0);
  return g_strdup (r->last_pc);
}

static JsonArray *
candidates_array (guint n)
{
  JsonArray *array = json_array_new ();

  for (guint i = 0; i < n; i++)
    json_array_add_object_element (array, json_object_new ());
  return array;
}

/* §3: on subscription_succeeded the joiner offers to every member. */
static void
test_join_offers (Room * r, gconstpointer data)
{
  const char *ids[] = { "a-1", "z-1", NULL };

  join (r, ids, 0);
  assert_log (r, "added a-1 +\nstate a-1 connecting\noffer a-1\n"
      "added z-1 +\nstate z-1 connecting\noffer z-1\n");
  g_assert_cmpint (r->deadline, ==, -1);
  g_assert_cmpuint (r->entered, ==, 1);
  g_assert_true (legba_room_core_peer_connected (r->core, r->last_pc));
  assert_log (r, "state z-1 connected\n");
  g_assert_cmpstr (legba_room_core_find (r->core, "z-1"), ==, "z-1");
  g_assert_cmpstr (legba_room_core_find_by_pc (r->core, r->last_pc), ==, "z-1");
  g_assert_null (legba_room_core_find (r->core, "nobody"));
}

/* §3: the room is full when joining. */
static void
test_join_full (Room * r, gconstpointer data)
{
  const char *ids[] = { "a-1", "b-1", NULL };
  gpointer members[] = { NULL, NULL };

  legba_room_core_set_max_participants (r->core, 2);
  g_assert_false (legba_room_core_joined (r->core, ids, members, 2, 0));
  assert_log (r, "full 2\n");
  legba_room_core_set_max_participants (r->core, 3);
  join (r, ids, 0);
  assert_log (r, "added a-1 +\nstate a-1 connecting\noffer a-1\n"
      "added b-1 +\nstate b-1 connecting\noffer b-1\n");
}

/* §3: a newcomer is waited for; after 3 s the greater id offers. */
static void
test_fallback_offer (Room * r, gconstpointer data)
{
  const char *none[] = { NULL };

  join (r, none, 0);
  legba_room_core_member_added (r->core, "a-1", "a", 1000 * MS);
  assert_log (r, "added a-1 +\n");
  g_assert_cmpint (r->deadline, ==, 4000 * MS);
  legba_room_core_tick (r->core, 3999 * MS);
  assert_log (r, "");
  legba_room_core_tick (r->core, 4000 * MS);
  assert_log (r, "state a-1 connecting\noffer a-1\n");
  g_assert_cmpint (r->deadline, ==, -1);
}

/* §3: the smaller id keeps waiting; the newcomer's offer is answered. */
static void
test_fallback_smaller_waits (Room * r, gconstpointer data)
{
  const char *none[] = { NULL };

  join (r, none, 0);
  legba_room_core_member_added (r->core, "z-1", "z", 0);
  legba_room_core_tick (r->core, 3000 * MS);
  assert_log (r, "added z-1 +\n");
  g_assert_cmpint (r->deadline, ==, -1);
  legba_room_core_offer (r->core, "z-1", "pcz", "sdp", 3500 * MS);
  assert_log (r, "state z-1 connecting\nanswer z-1 pcz sdp\n");
}

/* §3: the newcomer's offer within 3 s cancels the fallback. */
static void
test_fallback_cancelled_by_offer (Room * r, gconstpointer data)
{
  const char *none[] = { NULL };

  join (r, none, 0);
  legba_room_core_member_added (r->core, "a-1", "a", 0);
  legba_room_core_offer (r->core, "a-1", "pca", "sdp", 1000 * MS);
  g_assert_cmpint (r->deadline, ==, -1);
  legba_room_core_tick (r->core, 5000 * MS);
  assert_log (r, "added a-1 +\nstate a-1 connecting\nanswer a-1 pca sdp\n");
}

/* No fallback offer once the room was left; none beyond max-participants. */
static void
test_fallback_not_in_room (Room * r, gconstpointer data)
{
  const char *none[] = { NULL };

  legba_room_core_set_max_participants (r->core, 2);
  join (r, none, 0);
  legba_room_core_member_added (r->core, "a-1", "a", 0);
  legba_room_core_member_added (r->core, "b-1", "b", 0);
  assert_log (r, "added a-1 +\nadded b-1 +\n");
  g_assert_cmpint (r->deadline, ==, 3000 * MS);
  legba_room_core_leave (r->core, TRUE);
  assert_log (r, "removed a-1\nremoved b-1\n");
  g_assert_cmpint (r->deadline, ==, -1);
}

/* §3 glare: our offer to a smaller id stands; its offer is dropped. */
static void
test_glare_won (Room * r, gconstpointer data)
{
  const char *ids[] = { "a-1", NULL };
  g_autofree char *ours = NULL;

  join (r, ids, 0);
  ours = g_strdup (r->last_pc);
  g_string_truncate (r->log, 0);
  legba_room_core_offer (r->core, "a-1", "theirs", "sdp", 0);
  assert_log (r, "");
  g_assert_cmpstr (legba_room_core_get_pc (r->core, "a-1"), ==, ours);
}

/* §3 glare: a greater id's offer wins; ours is discarded and it is
 * answered. */
static void
test_glare_lost (Room * r, gconstpointer data)
{
  const char *ids[] = { "z-1", NULL };
  g_autofree char *ours = NULL;
  g_autofree char *expected = NULL;

  join (r, ids, 0);
  ours = g_strdup (r->last_pc);
  g_string_truncate (r->log, 0);
  legba_room_core_offer (r->core, "z-1", "theirs", "sdp", 0);
  expected = g_strdup_printf ("close z-1 %s\nanswer z-1 theirs sdp\n", ours);
  assert_log (r, expected);
  g_assert_cmpstr (legba_room_core_get_pc (r->core, "z-1"), ==, "theirs");
}

/* Once answered, an offer from the smaller id replaces the connection
 * (it replaced a failed one, §3); a second offer for a pc is dropped. */
static void
test_offer_replaces_answered (Room * r, gconstpointer data)
{
  const char *ids[] = { "a-1", NULL };
  g_autofree char *ours = NULL;
  g_autofree char *expected = NULL;

  join (r, ids, 0);
  ours = g_strdup (r->last_pc);
  legba_room_core_answer (r->core, "a-1", ours, "ans");
  g_string_truncate (r->log, 0);
  legba_room_core_offer (r->core, "a-1", "fresh", "sdp", 0);
  expected = g_strdup_printf ("close a-1 %s\nanswer a-1 fresh sdp\n", ours);
  assert_log (r, expected);
  legba_room_core_offer (r->core, "a-1", "fresh", "sdp", 0);
  assert_log (r, "");
}

/* An answer the connection refused (never asked for) leaves it awaiting
 * one: glare still goes to the greater id. */
static void
test_answer_refused (Room * r, gconstpointer data)
{
  const char *ids[] = { "a-1", NULL };
  g_autofree char *ours = NULL;
  g_autofree char *expected = NULL;

  join (r, ids, 0);
  ours = g_strdup (r->last_pc);
  r->refuse_answer = TRUE;
  legba_room_core_answer (r->core, "a-1", ours, "ans");
  legba_room_core_offer (r->core, "a-1", "theirs", "sdp", 0);
  expected = g_strdup_printf ("added a-1 +\nstate a-1 connecting\noffer a-1\n"
      "apply-answer %s ans\n", ours);
  assert_log (r, expected);
}

/* §4: an answer, candidates or bye for a pc that is someone else's or
 * unknown is dropped. */
static void
test_signals_for_unknown_pc (Room * r, gconstpointer data)
{
  const char *ids[] = { "a-1", "b-1", NULL };
  g_autoptr (JsonArray) candidates = candidates_array (1);
  g_autofree char *pc = NULL;

  join (r, ids, 0);
  pc = g_strdup (r->last_pc);
  g_string_truncate (r->log, 0);
  legba_room_core_answer (r->core, "a-1", pc, "ans");
  legba_room_core_answer (r->core, "a-1", "nope", "ans");
  legba_room_core_bye (r->core, "a-1", pc, 0);
  legba_room_core_bye (r->core, "a-1", "nope", 0);
  legba_room_core_candidates (r->core, "a-1", pc, candidates, 0);
  assert_log (r, "");
  /* not kept for later either: the pc is known, and b-1's */
  g_assert_cmpint (r->deadline, ==, -1);
}

/* §4: candidates before their offer are kept and applied with it. */
static void
test_early_candidates (Room * r, gconstpointer data)
{
  const char *none[] = { NULL };
  g_autoptr (JsonArray) two = candidates_array (2);
  g_autoptr (JsonArray) one = candidates_array (1);

  join (r, none, 0);
  legba_room_core_candidates (r->core, "a-1", "pca", two, 0);
  legba_room_core_candidates (r->core, "a-1", "pca", one, 10 * MS);
  legba_room_core_candidates (r->core, "b-1", "pca", one, 20 * MS);
  assert_log (r, "");
  g_assert_cmpint (r->deadline, ==, 10000 * MS);
  legba_room_core_offer (r->core, "a-1", "pca", "sdp", 100 * MS);
  assert_log (r, "added a-1\nstate a-1 connecting\n"
      "candidates pca 2\ncandidates pca 1\nanswer a-1 pca sdp\n");
  g_assert_cmpint (r->deadline, ==, 10020 * MS);
  legba_room_core_candidates (r->core, "a-1", "pca", one, 200 * MS);
  assert_log (r, "candidates pca 1\n");
}

/* §4: kept candidates expire after 10 s. */
static void
test_early_candidates_expire (Room * r, gconstpointer data)
{
  const char *none[] = { NULL };
  g_autoptr (JsonArray) one = candidates_array (1);

  join (r, none, 0);
  legba_room_core_candidates (r->core, "a-1", "pca", one, 0);
  legba_room_core_tick (r->core, 9999 * MS);
  g_assert_cmpint (r->deadline, ==, 10000 * MS);
  legba_room_core_tick (r->core, 10000 * MS);
  g_assert_cmpint (r->deadline, ==, -1);
  legba_room_core_offer (r->core, "a-1", "pca", "sdp", 10001 * MS);
  assert_log (r, "added a-1\nstate a-1 connecting\nanswer a-1 pca sdp\n");
}

/* §3: member_removed keeps a live connection for the grace period; the
 * same id back within it tears nothing down. */
static void
test_grace_back (Room * r, gconstpointer data)
{
  g_autofree char *pc = connect_by_joining (r, "a-1", 0);

  g_hash_table_add (r->live, g_strdup (pc));
  legba_room_core_member_removed (r->core, "a-1", 1000 * MS);
  assert_log (r, "state a-1 away\n");
  g_assert_cmpint (r->deadline, ==, 1500 * MS);
  legba_room_core_tick (r->core, 1500 * MS);
  g_assert_cmpint (r->deadline, ==, 2000 * MS);
  legba_room_core_member_added (r->core, "a-1", "a", 1600 * MS);
  assert_log (r, "state a-1 connected\n");
  g_assert_cmpint (r->deadline, ==, -1);
  g_assert_cmpstr (legba_room_core_get_pc (r->core, "a-1"), ==, pc);
}

/* §3: listed again by a reconnect's subscription_succeeded within the
 * grace period: kept, not offered to again. */
static void
test_grace_back_on_rejoin (Room * r, gconstpointer data)
{
  const char *ids[] = { "a-1", NULL };
  g_autofree char *pc = connect_by_joining (r, "a-1", 0);

  g_hash_table_add (r->live, g_strdup (pc));
  legba_room_core_member_removed (r->core, "a-1", 0);
  join (r, ids, 100 * MS);
  assert_log (r, "state a-1 away\nstate a-1 connected\n");
  g_assert_cmpint (r->deadline, ==, -1);
}

/* §3: after the grace period the participant is gone. */
static void
test_grace_expires (Room * r, gconstpointer data)
{
  g_autofree char *pc = connect_by_joining (r, "a-1", 0);
  g_autofree char *expected = NULL;
  gint64 now = 0;

  g_hash_table_add (r->live, g_strdup (pc));
  legba_room_core_member_removed (r->core, "a-1", now);
  while (r->deadline != -1 && now < 20000 * MS) {
    now = r->deadline;
    legba_room_core_tick (r->core, now);
  }
  g_assert_cmpint (now, ==, 10000 * MS);
  expected = g_strdup_printf ("state a-1 away\nclose a-1 %s\nremoved a-1\n",
      pc);
  assert_log (r, expected);
  g_assert_null (legba_room_core_find (r->core, "a-1"));
}

/* §3: a connection whose packets stopped is not kept: at once on
 * member_removed, or at the next check once it stops. */
static void
test_grace_not_live (Room * r, gconstpointer data)
{
  g_autofree char *pc = connect_by_joining (r, "a-1", 0);
  g_autofree char *b_pc = NULL;
  g_autofree char *expected = NULL;

  legba_room_core_member_removed (r->core, "a-1", 0);
  expected = g_strdup_printf ("close a-1 %s\nremoved a-1\n", pc);
  assert_log (r, expected);

  b_pc = connect_by_joining (r, "b-1", 0);
  g_hash_table_add (r->live, g_strdup (b_pc));
  legba_room_core_member_removed (r->core, "b-1", 0);
  legba_room_core_tick (r->core, 500 * MS);
  g_hash_table_remove (r->live, b_pc);
  legba_room_core_tick (r->core, 1000 * MS);
  g_free (expected);
  expected = g_strdup_printf ("state b-1 away\nclose b-1 %s\nremoved b-1\n",
      b_pc);
  assert_log (r, expected);
}

/* §3: a bye from an away participant removes it. */
static void
test_grace_bye (Room * r, gconstpointer data)
{
  g_autofree char *pc = connect_by_joining (r, "a-1", 0);
  g_autofree char *expected = NULL;

  g_hash_table_add (r->live, g_strdup (pc));
  legba_room_core_member_removed (r->core, "a-1", 0);
  legba_room_core_bye (r->core, "a-1", pc, 10 * MS);
  expected = g_strdup_printf ("state a-1 away\nclose a-1 %s\nremoved a-1\n",
      pc);
  assert_log (r, expected);
  g_assert_cmpint (r->deadline, ==, -1);
}

/* §3: the greater id replaces a failed connection with a fresh offer; a
 * second failure in a row gives up, says bye and reports it. */
static void
test_replace_failed_greater (Room * r, gconstpointer data)
{
  g_autofree char *first = connect_by_joining (r, "a-1", 0);
  g_autofree char *second = NULL;
  g_autofree char *expected = NULL;

  legba_room_core_peer_failed (r->core, first, "ICE failed", 0);
  expected = g_strdup_printf ("close a-1 %s\nstate a-1 reconnecting\n"
      "offer a-1\n", first);
  assert_log (r, expected);
  second = g_strdup (r->last_pc);
  g_assert_cmpstr (second, !=, first);
  legba_room_core_peer_failed (r->core, second, "DTLS failed", 0);
  g_free (expected);
  expected = g_strdup_printf ("bye a-1 %s\nclose a-1 %s\nstate a-1 failed\n"
      "failed a-1: DTLS failed\n", second, second);
  assert_log (r, expected);
  /* a failed participant is not offered to again on a rejoin */
  {
    const char *ids[] = { "a-1", NULL };

    join (r, ids, 0);
    assert_log (r, "");
  }
}

/* §3: the smaller id says bye and waits for the greater's fresh offer. */
static void
test_replace_failed_smaller (Room * r, gconstpointer data)
{
  g_autofree char *first = connect_by_joining (r, "z-1", 0);
  g_autofree char *expected = NULL;

  legba_room_core_peer_failed (r->core, first, "ICE failed", 0);
  expected = g_strdup_printf ("bye z-1 %s\nclose z-1 %s\n"
      "state z-1 reconnecting\n", first, first);
  assert_log (r, expected);
  g_assert_cmpint (r->deadline, ==, 3000 * MS);
  legba_room_core_offer (r->core, "z-1", "fresh", "sdp", 100 * MS);
  assert_log (r, "answer z-1 fresh sdp\n");
  g_assert_cmpint (r->deadline, ==, -1);
  g_assert_true (legba_room_core_peer_connected (r->core, "fresh"));
  assert_log (r, "state z-1 connected\n");
  /* connected again: a later failure is a first failure */
  legba_room_core_peer_failed (r->core, "fresh", "ICE failed", 0);
  assert_log (r, "bye z-1 fresh\nclose z-1 fresh\nstate z-1 reconnecting\n");
}

/* A failure of a connection that is no longer current changes nothing;
 * a participant whose peer connection cannot be made is failed. */
static void
test_replace_stale_and_refused (Room * r, gconstpointer data)
{
  const char *ids[] = { "a-1", NULL };

  legba_room_core_peer_failed (r->core, "old", "ICE failed", 0);
  g_assert_false (legba_room_core_peer_connected (r->core, "old"));
  r->refuse_open = TRUE;
  join (r, ids, 0);
  assert_log (r, "added a-1 +\nopen a-1 refused\nstate a-1 failed\n");
}

/* §3: a bye from the smaller id (its end failed): the greater offers a
 * fresh connection 250 ms later; a second bye in a row waits 3 s. */
static void
test_bye_reoffer (Room * r, gconstpointer data)
{
  g_autofree char *pc = connect_by_joining (r, "a-1", 0);
  g_autofree char *expected = NULL;
  g_autofree char *second = NULL;

  legba_room_core_bye (r->core, "a-1", pc, 1000 * MS);
  expected = g_strdup_printf ("close a-1 %s\nstate a-1 new\n", pc);
  assert_log (r, expected);
  g_assert_cmpint (r->deadline, ==, 1250 * MS);
  legba_room_core_tick (r->core, 1250 * MS);
  assert_log (r, "state a-1 reconnecting\noffer a-1\n");
  second = g_strdup (r->last_pc);
  legba_room_core_bye (r->core, "a-1", second, 2000 * MS);
  g_assert_cmpint (r->deadline, ==, 5000 * MS);
}

/* §3: a bye from the greater id: the smaller waits 3 s for its offer and
 * does not offer itself. */
static void
test_bye_smaller_waits (Room * r, gconstpointer data)
{
  g_autofree char *pc = connect_by_joining (r, "z-1", 0);

  legba_room_core_bye (r->core, "z-1", pc, 0);
  g_assert_cmpint (r->deadline, ==, 3000 * MS);
  legba_room_core_tick (r->core, 3000 * MS);
  g_string_truncate (r->log, 0);
  g_assert_cmpint (r->deadline, ==, -1);
  g_assert_null (legba_room_core_get_pc (r->core, "z-1"));
}

/* §3 reconnect: connections to members still listed stay up; a member
 * listed without one is offered to; leaving says bye on each. */
static void
test_reconnect (Room * r, gconstpointer data)
{
  const char *ids[] = { "a-1", "b-1", NULL };
  g_autofree char *pc = connect_by_joining (r, "a-1", 0);
  g_autofree char *b_pc = NULL;
  g_autofree char *expected = NULL;

  join (r, ids, 5000 * MS);
  assert_log (r, "added b-1 +\nstate b-1 connecting\noffer b-1\n");
  b_pc = g_strdup (r->last_pc);
  g_assert_cmpstr (legba_room_core_get_pc (r->core, "a-1"), ==, pc);
  legba_room_core_leave (r->core, TRUE);
  expected = g_strdup_printf ("bye a-1 %s\nclose a-1 %s\nremoved a-1\n"
      "bye b-1 %s\nclose b-1 %s\nremoved b-1\n", pc, pc, b_pc, b_pc);
  assert_log (r, expected);
  /* the next join is a first join again */
  legba_room_core_set_max_participants (r->core, 1);
  g_assert_false (legba_room_core_joined (r->core, ids, NULL, 2, 0));
}

/* An offer from a participant not listed yet lists it; before the room
 * is joined a bye does not lead to an offer of ours. */
static void
test_offer_lists (Room * r, gconstpointer data)
{
  legba_room_core_offer (r->core, "a-1", "pca", "sdp", 0);
  assert_log (r, "added a-1\nstate a-1 connecting\nanswer a-1 pca sdp\n");
  legba_room_core_member_added (r->core, "a-1", "a", 0);
  assert_log (r, "");
  g_assert_cmpint (r->deadline, ==, -1);
  legba_room_core_bye (r->core, "a-1", "pca", 0);
  assert_log (r, "close a-1 pca\nstate a-1 new\n");
  g_assert_cmpint (r->deadline, ==, 250 * MS);
  legba_room_core_tick (r->core, 250 * MS);
  assert_log (r, "");
}

/* SFU rooms: the topology event's data, read strictly. */
static void
test_topology_parse (Room * r, gconstpointer data)
{
  static const struct
  {
    const char *json;
    gboolean ok;
    gboolean sfu;
  } cases[] = {
    {"{\"topology\":\"mesh\"}", TRUE, FALSE},
    {"{\"topology\":\"sfu\",\"sfu\":{\"kind\":\"janus\","
          "\"url\":\"ws://127.0.0.1:8188/\",\"room\":1234,\"pin\":\"p\","
          "\"token\":\"t\"}}", TRUE, TRUE},
    {"{\"topology\":\"sfu\",\"sfu\":{\"kind\":\"janus\","
          "\"url\":\"wss://sfu.example/\",\"room\":7}}", TRUE, TRUE},
    {"[]", FALSE, FALSE},
    {"\"sfu\"", FALSE, FALSE},
    {"{}", FALSE, FALSE},
    {"{\"topology\":\"ring\"}", FALSE, FALSE},
    {"{\"topology\":\"sfu\"}", FALSE, FALSE},
    {"{\"topology\":\"sfu\",\"sfu\":{\"kind\":\"mediasoup\","
          "\"url\":\"ws://h/\",\"room\":1}}", FALSE, FALSE},
    {"{\"topology\":\"sfu\",\"sfu\":{\"kind\":\"janus\","
          "\"url\":\"http://h/\",\"room\":1}}", FALSE, FALSE},
    {"{\"topology\":\"sfu\",\"sfu\":{\"kind\":\"janus\","
          "\"url\":\"ws://h/\",\"room\":\"1\"}}", FALSE, FALSE},
    {"{\"topology\":\"sfu\",\"sfu\":{\"kind\":\"janus\","
          "\"url\":\"ws://h/\",\"room\":0}}", FALSE, FALSE},
    {"{\"topology\":\"sfu\",\"sfu\":{\"kind\":\"janus\","
          "\"url\":\"ws://h/\",\"room\":1.5}}", FALSE, FALSE},
    {"{\"topology\":\"sfu\",\"sfu\":{\"kind\":\"janus\","
          "\"url\":\"ws://h/\",\"room\":1,\"pin\":3}}", FALSE, FALSE},
    {"{\"topology\":\"sfu\",\"sfu\":{\"kind\":\"janus\","
          "\"url\":\"ws://h/\",\"room\":1,\"token\":{}}}", FALSE, FALSE},
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autoptr (JsonNode) node = json_from_string (cases[i].json, NULL);
    g_autoptr (LegbaRoomSfu) sfu = NULL;
    g_autofree char *why = NULL;
    gboolean ok = legba_room_core_parse_topology (node, &sfu, &why);

    g_test_message ("%s", cases[i].json);
    g_assert_cmpint (ok, ==, cases[i].ok);
    g_assert_cmpint (sfu != NULL, ==, cases[i].sfu);
    g_assert_true (ok || why != NULL);
  }
  {
    g_autoptr (JsonNode) node = json_from_string ("{\"topology\":\"sfu\","
        "\"sfu\":{\"kind\":\"janus\",\"url\":\"ws://127.0.0.1:8188/\","
        "\"room\":1234,\"pin\":\"p\",\"token\":\"t\"}}", NULL);
    g_autoptr (LegbaRoomSfu) sfu = NULL;
    g_autofree char *why = NULL;

    g_assert_true (legba_room_core_parse_topology (node, &sfu, &why));
    g_assert_cmpstr (sfu->url, ==, "ws://127.0.0.1:8188/");
    g_assert_cmpuint (sfu->room, ==, 1234);
    g_assert_cmpstr (sfu->pin, ==, "p");
    g_assert_cmpstr (sfu->token, ==, "t");
  }
}

/* SFU rooms: the mesh connections close with a bye, the participants
 * stay, and no offer is made, answered or awaited from then on. */
static void
test_sfu_mode (Room * r, gconstpointer data)
{
  g_autofree char *pc = connect_by_joining (r, "a-1", 0);
  g_autofree char *expected = g_strdup_printf ("bye a-1 %s\nclose a-1 %s\n"
      "state a-1 new\n", pc, pc);
  const char *ids[] = { "a-1", "b-1", NULL };
  g_autoptr (JsonArray) candidates = candidates_array (1);

  g_assert_false (legba_room_core_is_sfu (r->core));
  legba_room_core_use_sfu (r->core);
  assert_log (r, expected);
  g_assert_true (legba_room_core_is_sfu (r->core));
  g_assert_null (legba_room_core_get_pc (r->core, "a-1"));
  legba_room_core_use_sfu (r->core);
  assert_log (r, "");

  /* a newcomer is listed and awaited by no timer */
  legba_room_core_member_added (r->core, "z-1", "z-1", 0);
  assert_log (r, "added z-1 +\n");
  g_assert_cmpint (r->deadline, ==, -1);
  /* its mesh signals are dropped, candidates not kept */
  legba_room_core_candidates (r->core, "z-1", "pcz", candidates, 0);
  legba_room_core_offer (r->core, "z-1", "pcz", "v=0", 0);
  assert_log (r, "");
  g_assert_cmpint (r->deadline, ==, -1);
  /* a reconnect lists the members again without offering */
  join (r, ids, 0);
  assert_log (r, "added b-1 +\n");
  /* a participant whose media do not come through the SFU is removed
   * at once when it leaves */
  legba_room_core_member_removed (r->core, "z-1", 0);
  assert_log (r, "removed z-1\n");
  /* leaving ends the SFU room: the next join starts as a mesh */
  legba_room_core_leave (r->core, TRUE);
  assert_log (r, "removed a-1\nremoved b-1\n");
  g_assert_false (legba_room_core_is_sfu (r->core));
}

/* SFU rooms, §3's grace period: a participant whose media still come
 * through the SFU when the server says it left (its signalling went) is
 * kept, away, and back as it was when listed again within the grace
 * period; once its media stop, it is removed at the next check. */
static void
test_sfu_grace (Room * r, gconstpointer data)
{
  legba_room_core_use_sfu (r->core);
  legba_room_core_member_added (r->core, "a-1", "a-1", 0);
  legba_room_core_member_added (r->core, "b-1", "b-1", 0);
  assert_log (r, "added a-1 +\nadded b-1 +\n");
  g_hash_table_add (r->live, g_strdup ("a-1"));
  g_hash_table_add (r->live, g_strdup ("b-1"));

  legba_room_core_member_removed (r->core, "a-1", 1000 * MS);
  assert_log (r, "state a-1 away\n");
  g_assert_nonnull (legba_room_core_find (r->core, "a-1"));
  legba_room_core_tick (r->core, 1500 * MS);
  legba_room_core_member_added (r->core, "a-1", "a-1", 1600 * MS);
  assert_log (r, "state a-1 connected\n");
  g_assert_cmpint (r->deadline, ==, -1);

  legba_room_core_member_removed (r->core, "b-1", 2000 * MS);
  assert_log (r, "state b-1 away\n");
  g_hash_table_remove (r->live, "b-1");
  legba_room_core_tick (r->core, r->deadline);
  assert_log (r, "removed b-1\n");
  g_assert_null (legba_room_core_find (r->core, "b-1"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, func) g_test_add ("/room/core/" path, Room, NULL, \
    room_setup, func, room_teardown)
  ADD ("join/offers", test_join_offers);
  ADD ("join/full", test_join_full);
  ADD ("fallback/greater-offers", test_fallback_offer);
  ADD ("fallback/smaller-waits", test_fallback_smaller_waits);
  ADD ("fallback/cancelled-by-offer", test_fallback_cancelled_by_offer);
  ADD ("fallback/not-in-room", test_fallback_not_in_room);
  ADD ("glare/won", test_glare_won);
  ADD ("glare/lost", test_glare_lost);
  ADD ("glare/answered", test_offer_replaces_answered);
  ADD ("glare/answer-refused", test_answer_refused);
  ADD ("signal/unknown-pc", test_signals_for_unknown_pc);
  ADD ("signal/early-candidates", test_early_candidates);
  ADD ("signal/early-expire", test_early_candidates_expire);
  ADD ("grace/back", test_grace_back);
  ADD ("grace/back-on-rejoin", test_grace_back_on_rejoin);
  ADD ("grace/expires", test_grace_expires);
  ADD ("grace/not-live", test_grace_not_live);
  ADD ("sfu/grace", test_sfu_grace);
  ADD ("grace/bye", test_grace_bye);
  ADD ("replace/greater", test_replace_failed_greater);
  ADD ("replace/smaller", test_replace_failed_smaller);
  ADD ("replace/stale-and-refused", test_replace_stale_and_refused);
  ADD ("bye/reoffer", test_bye_reoffer);
  ADD ("bye/smaller-waits", test_bye_smaller_waits);
  ADD ("reconnect", test_reconnect);
  ADD ("offer-lists", test_offer_lists);
  ADD ("topology/parse", test_topology_parse);
  ADD ("topology/sfu", test_sfu_mode);
#undef ADD
  return g_test_run ();
}
