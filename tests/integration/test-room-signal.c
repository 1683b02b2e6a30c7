/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaRoom's signalling rules (docs/room-protocol.md §3 and §4) through an
 * in-process signaller whose hub holds, reorders and forges signals.
 */
#include "room-test.h"

#include <gst/video/video.h>

#define FRAMES 5

typedef struct
{
  TestHub *hub;
} HubFixture;

static void
hub_setup (HubFixture * f, gconstpointer data)
{
  f->hub = test_hub_new ();
}

static void
hub_teardown (HubFixture * f, gconstpointer data)
{
  /* signals still on their way (bye) reach nobody */
  while (g_main_context_iteration (NULL, FALSE));
  test_hub_free (f->hub);
}

static Participant *
participant (HubFixture * f, const char *identity)
{
  return participant_new (LEGBA_SIGNALLER (test_signaller_new (f->hub)),
      identity, "h264", TRUE);
}

static void
call (HubFixture * f, Participant ** all, guint n)
{
  for (guint i = 0; i < n; i++)
    participant_connect_and_wait (all[i]);
  wait_until_all_decode (all, n, FRAMES);
}

/* ---- A connection that cannot come up (§3) ---- */

/* Between alice and bob, the hub hands on candidates with a port nobody
 * listens on, and descriptions whose ICE password refuses the other's
 * checks: every connection between them fails in ICE. */
static gboolean
cut_ice (TestHub * hub, const char *from, const char *to, JsonObject * signal,
    gpointer data)
{
  guint *cut = data;
  const char *type = json_object_get_string_member_with_default (signal,
      "type", "");

  if (strcmp (type, "candidates") == 0) {
    JsonArray *list = json_object_get_array_member (signal, "candidates");

    for (guint i = 0; i < json_array_get_length (list); i++) {
      JsonObject *c = json_array_get_object_element (list, i);
      g_auto (GStrv) fields =
          g_strsplit (json_object_get_string_member (c, "candidate"), " ", -1);
      g_autofree char *text = NULL;

      if (g_strv_length (fields) < 6)
        continue;
      g_free (fields[5]);
      fields[5] = g_strdup ("9");
      text = g_strjoinv (" ", fields);
      json_object_set_string_member (c, "candidate", text);
      (*cut)++;
    }
  } else if (json_object_has_member (signal, "sdp")) {
    g_autoptr (GRegex) pwd = g_regex_new ("a=ice-pwd:[^\\r\\n]+", 0, 0, NULL);
    g_autofree char *sdp = g_regex_replace_literal (pwd,
        json_object_get_string_member (signal, "sdp"), -1, 0,
        "a=ice-pwd:notthepasswordofthispeer", 0, NULL);

    json_object_set_string_member (signal, "sdp", sdp);
  }
  return TRUE;
}

/* A connection whose ICE fails is replaced once, and when the fresh one
 * fails too the room reports the participant failed, saying it was ICE
 * (webrtcbin itself only says the connection failed). */
static void
test_ice_fails (HubFixture * f, gconstpointer data)
{
  Participant *all[] = { participant (f, "alice"), participant (f, "bob") };
  guint cut = 0, reported = 0;

  test_hub_set_filter (f->hub, cut_ice, &cut);
  for (guint i = 0; i < 2; i++)
    participant_connect_and_wait (all[i]);
  ROOM_WAIT_FOR (all[0]->errors->len > 0 || all[1]->errors->len > 0,
      "a participant to be reported failed");
  g_assert_cmpuint (cut, >, 0);
  for (guint i = 0; i < 2; i++)
    for (guint j = 0; j < all[i]->errors->len; j++) {
      GError *error = all[i]->errors->pdata[j];

      g_assert_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_PEER);
      g_assert_nonnull (strstr (error->message, "ICE failed: "));
      g_assert_cmpint (legba_participant_get_state (participant_find
              (all[i], all[1 - i])), ==, LEGBA_PARTICIPANT_STATE_FAILED);
      reported++;
    }
  g_assert_cmpuint (reported, >, 0);
  test_hub_set_filter (f->hub, NULL, NULL);
  for (guint i = 0; i < 2; i++) {
    g_ptr_array_set_size (all[i]->errors, 0);
    participant_free (all[i]);
  }
}

/* ---- Candidates before the offer (§4: kept 10 s by (from, pc)) ---- */

typedef struct
{
  JsonObject *held;
  char *from;
  char *to;
  guint candidates_first;
} Reorder;

static gboolean
hold_offer (TestHub * hub, const char *from, const char *to,
    JsonObject * signal, gpointer data)
{
  Reorder *r = data;
  const char *type = json_object_get_string_member (signal, "type");

  if (strcmp (type, "offer") == 0 && r->held == NULL && r->from == NULL) {
    r->held = json_object_ref (signal);
    r->from = g_strdup (from);
    r->to = g_strdup (to);
    return FALSE;
  }
  if (strcmp (type, "candidates") == 0 && r->held != NULL &&
      g_strcmp0 (from, r->from) == 0) {
    g_autoptr (JsonObject) offer = g_steal_pointer (&r->held);

    /* the candidates first, then the offer they belong to */
    r->candidates_first++;
    test_hub_deliver (hub, from, to, signal);
    test_hub_deliver (hub, from, to, offer);
    return FALSE;
  }
  return TRUE;
}

static void
test_candidates_first (HubFixture * f, gconstpointer data)
{
  Participant *all[] = { participant (f, "alice"), participant (f, "bob") };
  Reorder r = { 0, };

  test_hub_set_filter (f->hub, hold_offer, &r);
  call (f, all, 2);
  g_assert_cmpuint (r.candidates_first, ==, 1);
  test_hub_set_filter (f->hub, NULL, NULL);
  for (guint i = 0; i < 2; i++) {
    assert_no_room_errors (all[i]);
    participant_free (all[i]);
  }
  g_free (r.from);
  g_free (r.to);
}

/* ---- Glare (§3): both offer; the greater id's offer wins ---- */

typedef struct
{
  char *from;
  char *to;
  JsonObject *held;
  gboolean crossed;
} Glare;

/* Holds the first offer until the other side has offered too, then lets
 * both cross. */
static gboolean
cross_offers (TestHub * hub, const char *from, const char *to,
    JsonObject * signal, gpointer data)
{
  Glare *g = data;

  if (g->crossed ||
      strcmp (json_object_get_string_member (signal, "type"), "offer") != 0)
    return TRUE;
  if (g->held == NULL) {
    g->held = json_object_ref (signal);
    g->from = g_strdup (from);
    g->to = g_strdup (to);
    return FALSE;
  }
  g->crossed = TRUE;
  test_hub_deliver (hub, g->from, g->to, g->held);
  return TRUE;
}

static void
test_glare (HubFixture * f, gconstpointer data)
{
  Participant *all[] = { participant (f, "alice"), participant (f, "bob") };
  Glare g = { 0, };

  test_hub_set_filter (f->hub, cross_offers, &g);
  /* joins started together list each other: both offer */
  participant_connect (all[0]);
  participant_connect (all[1]);
  ROOM_WAIT_FOR (all[0]->connect_done && all[1]->connect_done, "both joins");
  wait_until_all_decode (all, 2, FRAMES);
  g_assert_true (g.crossed);
  g_assert_cmpuint (test_hub_count (f->hub, "offer"), ==, 2);
  g_assert_cmpuint (test_hub_count (f->hub, "answer"), ==, 1);
  test_hub_set_filter (f->hub, NULL, NULL);
  g_clear_pointer (&g.held, json_object_unref);
  g_free (g.from);
  g_free (g.to);
  g_assert_cmpuint (participant_peer_bins (all[0]), ==, 1);
  g_assert_cmpuint (participant_peer_bins (all[1]), ==, 1);
  for (guint i = 0; i < 2; i++) {
    assert_no_room_errors (all[i]);
    participant_free (all[i]);
  }
}

/* ---- The 3 s rule (§3) ---- */

static void
test_three_seconds (HubFixture * f, gconstpointer data)
{
  /* "bob" > "alice": bob, already there, offers after 3 s when alice
   * (who did not see him listed) sends nothing */
  Participant *bob = participant (f, "bob");
  Participant *alice = participant (f, "alice");
  Participant *all[] = { alice, bob };
  gint64 start;

  participant_connect_and_wait (bob);
  test_hub_set_announce (f->hub, FALSE);
  start = g_get_monotonic_time ();
  participant_connect_and_wait (alice);
  g_assert_cmpuint (g_list_model_get_n_items (legba_room_get_participants
          (alice->room)), ==, 0);
  ROOM_WAIT_FOR (participant_connected_to (alice, bob), "bob's late offer");
  g_assert_cmpint (g_get_monotonic_time () - start, >=, 3 * G_USEC_PER_SEC);
  g_assert_cmpuint (test_hub_count (f->hub, "offer"), ==, 1);
  wait_until_all_decode (all, 2, FRAMES);
  participant_free (alice);
  participant_free (bob);
}

/* ---- Forged and malformed signals (§4): dropped, logged, harmless ---- */

static void
deliver_json (HubFixture * f, const char *from, Participant * to,
    const char *json)
{
  g_autoptr (JsonNode) node = json_from_string (json, NULL);

  g_assert_nonnull (node);
  test_hub_deliver (f->hub, from, legba_room_get_participant_id (to->room),
      json_node_get_object (node));
}

static void
assert_call_goes_on (Participant ** all, guint n)
{
  guint64 before = participant_frames (all[1], all[0],
      LEGBA_TRACK_KIND_VIDEO);

  ROOM_WAIT_FOR (participant_frames (all[1], all[0], LEGBA_TRACK_KIND_VIDEO) >=
      before + FRAMES, "the call to go on");
  for (guint i = 0; i < n; i++) {
    g_assert_cmpuint (participant_peer_bins (all[i]), ==, n - 1);
    g_assert_cmpuint (all[i]->left, ==, 0);
    assert_no_room_errors (all[i]);
  }
}

static char *
pc_of (HubFixture * f, Participant * p, Participant * other)
{
  return g_strdup (test_hub_pc (f->hub, legba_room_get_participant_id
          (p->room), legba_room_get_participant_id (other->room)));
}

static void
test_spoofed (HubFixture * f, gconstpointer data)
{
  Participant *all[] = { participant (f, "alice"), participant (f, "bob"),
    participant (f, "carol")
  };
  const char *alice = NULL, *carol = NULL;
  g_autofree char *pc = NULL;
  g_autofree char *json = NULL;

  call (f, all, 3);
  alice = legba_room_get_participant_id (all[0]->room);
  carol = legba_room_get_participant_id (all[2]->room);
  pc = pc_of (f, all[1], all[0]);

  /* carol (vouched) claims to be alice */
  json = g_strdup_printf ("{\"type\": \"bye\", \"pc\": \"%s\", \"from\": "
      "\"%s\"}", pc, alice);
  deliver_json (f, carol, all[1], json);
  g_free (json);
  /* carol (vouched and claimed) closes a peer connection that is not hers */
  json = g_strdup_printf ("{\"type\": \"bye\", \"pc\": \"%s\", \"from\": "
      "\"%s\"}", pc, carol);
  deliver_json (f, carol, all[1], json);
  g_free (json);
  /* an answer for alice's connection, from carol */
  json = g_strdup_printf ("{\"type\": \"answer\", \"pc\": \"%s\", \"sdp\": "
      "\"v=0\"}", pc);
  deliver_json (f, carol, all[1], json);
  g_free (json);
  /* an offer claiming to be from someone who is not there */
  json = g_strdup_printf ("{\"type\": \"offer\", \"pc\": \"x1\", \"from\": "
      "\"mallory-abcdef\", \"sdp\": \"v=0\"}");
  deliver_json (f, carol, all[1], json);
  assert_call_goes_on (all, 3);
  g_assert_null (legba_room_find_participant (all[1]->room, "mallory-abcdef"));
  for (guint i = 0; i < 3; i++)
    participant_free (all[i]);
}

static void
test_garbage (HubFixture * f, gconstpointer data)
{
  Participant *all[] = { participant (f, "alice"), participant (f, "bob") };
  const char *alice;
  g_autofree char *pc = NULL;
  g_autofree char *candidates = NULL;
  g_autofree char *offer = NULL;
  const char *garbage[] = {
    "{}",
    "{\"type\": 7, \"pc\": []}",
    "{\"type\": \"offer\", \"pc\": \"p1\"}",
    "{\"type\": \"offer\", \"pc\": \"p2\", \"sdp\": \"not an sdp\"}",
    "{\"type\": \"offer\", \"pc\": \"p3\", \"sdp\": 42}",
    "{\"type\": \"answer\", \"pc\": \"unknown\", \"sdp\": \"v=0\"}",
    "{\"type\": \"bye\", \"pc\": \"unknown\"}",
    "{\"type\": \"candidates\", \"pc\": \"early\", \"candidates\": "
        "[{\"candidate\": \"candidate:1 1 UDP 1 10.0.0.1 9 typ host\"}]}",
    "{\"type\": \"no-such-type\", \"pc\": \"p4\"}",
    "{\"type\": \"part\", \"pc\": \"p5\", \"id\": \"x\", \"part\": 0}",
  };

  call (f, all, 2);
  alice = legba_room_get_participant_id (all[0]->room);
  pc = pc_of (f, all[1], all[0]);
  for (guint i = 0; i < G_N_ELEMENTS (garbage); i++)
    deliver_json (f, alice, all[1], garbage[i]);
  /* malformed candidates for the live connection */
  candidates = g_strdup_printf ("{\"type\": \"candidates\", \"pc\": \"%s\", "
      "\"candidates\": [1, \"x\", {}, {\"candidate\": \"garbage\"}, "
      "{\"candidate\": \"candidate:x\", \"sdpMLineIndex\": -4}, "
      "{\"candidate\": \"\"}]}", pc);
  deliver_json (f, alice, all[1], candidates);
  /* a second offer for the same connection */
  offer = g_strdup_printf ("{\"type\": \"offer\", \"pc\": \"%s\", \"sdp\": "
      "\"v=0\"}", pc);
  deliver_json (f, alice, all[1], offer);
  assert_call_goes_on (all, 2);
  for (guint i = 0; i < 2; i++)
    participant_free (all[i]);
}

/* ---- bye (§4) closes one peer connection; the room stays joined ---- */

static void
test_bye (HubFixture * f, gconstpointer data)
{
  Participant *all[] = { participant (f, "alice"), participant (f, "bob") };
  g_autofree char *pc = NULL;
  g_autofree char *json = NULL;

  call (f, all, 2);
  pc = pc_of (f, all[1], all[0]);
  json = g_strdup_printf ("{\"type\": \"bye\", \"pc\": \"%s\"}", pc);
  deliver_json (f, legba_room_get_participant_id (all[0]->room), all[1], json);
  g_assert_cmpuint (participant_peer_bins (all[1]), ==, 0);
  g_assert_cmpuint (all[1]->tracks_removed, ==, 2);
  g_assert_cmpuint (all[1]->left, ==, 0);
  g_assert_cmpint (legba_room_get_state (all[1]->room), ==,
      LEGBA_ROOM_STATE_CONNECTED);
  for (guint i = 0; i < 2; i++)
    participant_free (all[i]);
}

/* ---- §3 grace period: gone from the server, still connected ---- */

static void
test_grace (HubFixture * f, gconstpointer data)
{
  Participant *all[] = { participant (f, "alice"), participant (f, "bob") };
  LegbaParticipant *alice_seen;
  guint64 before;

  call (f, all, 2);
  alice_seen = participant_find (all[1], all[0]);
  /* alice's signalling goes away, her media does not */
  legba_signaller_leave (all[0]->signaller);
  g_assert_cmpint (legba_participant_get_state (alice_seen), ==,
      LEGBA_PARTICIPANT_STATE_AWAY);
  before = participant_frames (all[1], all[0], LEGBA_TRACK_KIND_VIDEO);
  ROOM_WAIT_FOR (participant_frames (all[1], all[0], LEGBA_TRACK_KIND_VIDEO) >=
      before + FRAMES, "media during the grace period");
  /* and she is back within it: nothing was torn down */
  g_assert_true (legba_signaller_join (all[0]->signaller, ROOM,
          legba_room_get_participant_id (all[0]->room), "alice", NULL, NULL));
  ROOM_WAIT_FOR (legba_participant_get_state (alice_seen) ==
      LEGBA_PARTICIPANT_STATE_CONNECTED, "alice to be back");
  g_assert_cmpuint (all[1]->left, ==, 0);
  g_assert_cmpuint (participant_peer_bins (all[1]), ==, 1);
  for (guint i = 0; i < 2; i++)
    participant_free (all[i]);
}

/* A participant whose media stopped (a killed process) is not "still
 * connected": it goes at once when the server reports it gone. */
static void
test_gone_at_once (HubFixture * f, gconstpointer data)
{
  Participant *all[] = { participant (f, "alice"), participant (f, "bob") };
  gint64 start;

  call (f, all, 2);
  gst_element_set_state (all[0]->pipeline, GST_STATE_NULL);
  start = g_get_monotonic_time ();
  legba_signaller_leave (all[0]->signaller);
  ROOM_WAIT_FOR (all[1]->left == 1, "alice to be gone");
  g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);
  g_assert_cmpuint (participant_peer_bins (all[1]), ==, 0);
  for (guint i = 0; i < 2; i++)
    participant_free (all[i]);
}

/* ---- Key-frame requests: at most one per 100 ms reaches the encoder,
 * and one held back is sent when the interval has passed ---- */

#define KEY_UNIT_INTERVAL_MS 100

static GstPadProbeReturn
count_key_units (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  gint64 now = g_get_monotonic_time ();

  if (gst_video_event_is_force_key_unit (GST_PAD_PROBE_INFO_EVENT (info)))
    g_array_append_val ((GArray *) data, now);
  return GST_PAD_PROBE_OK;
}

static void
test_key_unit_rate_limit (HubFixture * f, gconstpointer data)
{
  TestSignaller *signaller = test_signaller_new (f->hub);
  GstElement *pipeline = gst_parse_launch ("fakesrc is-live=true ! "
      "identity name=encoder", NULL);
  LegbaRoom *room = legba_room_new (LEGBA_SIGNALLER (signaller),
      GST_BIN (pipeline));
  GstElement *encoder = gst_bin_get_by_name (GST_BIN (pipeline), "encoder");
  GstElement *tee;
  GstPad *encoder_src = gst_element_get_static_pad (encoder, "src");
  GstPad *track = legba_room_add_track (room, LEGBA_TRACK_KIND_VIDEO, NULL);
  GstPad *peer_branch;
  GArray *seen = g_array_new (FALSE, FALSE, sizeof (gint64));
  gint64 start;

  g_assert_cmpint (gst_pad_link (encoder_src, track), ==, GST_PAD_LINK_OK);
  gst_pad_add_probe (encoder_src, GST_PAD_PROBE_TYPE_EVENT_UPSTREAM,
      count_key_units, seen, NULL);
  gst_element_set_state (pipeline, GST_STATE_PAUSED);
  tee = gst_bin_get_by_name (GST_BIN (pipeline), "legba-video-tee");
  peer_branch = gst_element_request_pad_simple (tee, "src_%u");
  gst_pad_set_active (peer_branch, TRUE);

  /* three peers ask at once */
  start = g_get_monotonic_time ();
  for (guint i = 0; i < 3; i++)
    gst_pad_send_event (peer_branch,
        gst_video_event_new_upstream_force_key_unit (GST_CLOCK_TIME_NONE,
            TRUE, 0));
  g_assert_cmpuint (seen->len, ==, 1);
  ROOM_WAIT_FOR (seen->len == 2, "the request held back");
  g_assert_cmpint (g_array_index (seen, gint64, 1) - start, >=,
      KEY_UNIT_INTERVAL_MS * G_TIME_SPAN_MILLISECOND);
  run_for (3 * KEY_UNIT_INTERVAL_MS);
  g_assert_cmpuint (seen->len, ==, 2);

  gst_element_release_request_pad (tee, peer_branch);
  gst_object_unref (peer_branch);
  gst_object_unref (tee);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  g_object_unref (room);
  gst_object_unref (track);
  gst_object_unref (encoder_src);
  gst_object_unref (encoder);
  gst_object_unref (pipeline);
  g_object_unref (signaller);
  g_array_unref (seen);
}

/* ---- ICE-TCP: off unless asked for ---- */

typedef struct
{
  guint udp;
  guint tcp;
  guint ends;                   /* candidate lists that said "end" */
} Transports;

/* "candidate:FOUNDATION COMPONENT TRANSPORT PRIORITY ADDRESS PORT typ ..." */
static void
count_candidate (Transports * t, const char *candidate)
{
  g_auto (GStrv) fields = g_strsplit (candidate, " ", 4);

  if (g_strv_length (fields) < 3)
    return;
  if (g_ascii_strcasecmp (fields[2], "tcp") == 0)
    t->tcp++;
  else if (g_ascii_strcasecmp (fields[2], "udp") == 0)
    t->udp++;
}

static gboolean
count_transports (TestHub * hub, const char *from, const char *to,
    JsonObject * signal, gpointer data)
{
  Transports *t = data;
  const char *type = json_object_get_string_member (signal, "type");

  if (strcmp (type, "candidates") == 0) {
    JsonArray *list = json_object_get_array_member (signal, "candidates");

    for (guint i = 0; i < json_array_get_length (list); i++)
      count_candidate (t, json_object_get_string_member_with_default
          (json_array_get_object_element (list, i), "candidate", ""));
    if (json_object_get_boolean_member_with_default (signal, "end", FALSE))
      t->ends++;
  } else if (strcmp (type, "offer") == 0 || strcmp (type, "answer") == 0) {
    g_auto (GStrv) lines = g_strsplit (json_object_get_string_member
        (signal, "sdp"), "\r\n", -1);

    for (guint i = 0; lines[i] != NULL; i++)
      if (g_str_has_prefix (lines[i], "a=candidate:"))
        count_candidate (t, lines[i] + 2);
  }
  return TRUE;
}

static void
test_ice_tcp (HubFixture * f, gconstpointer data)
{
  for (guint tcp = 0; tcp < 2; tcp++) {
    Participant *all[] = {
      participant_new (LEGBA_SIGNALLER (test_signaller_new (f->hub)),
          "alice", NULL, FALSE),
      participant_new (LEGBA_SIGNALLER (test_signaller_new (f->hub)),
          "bob", NULL, FALSE),
    };
    Transports t = { 0, };
    gboolean ice_tcp = TRUE;

    g_object_get (all[0]->room, "ice-tcp", &ice_tcp, NULL);
    g_assert_false (ice_tcp);
    for (guint i = 0; i < 2 && tcp; i++)
      g_object_set (all[i]->room, "ice-tcp", TRUE, NULL);
    test_hub_set_filter (f->hub, count_transports, &t);
    for (guint i = 0; i < 2; i++)
      participant_connect_and_wait (all[i]);
    ROOM_WAIT_FOR (participant_connected_to (all[0], all[1]) &&
        participant_connected_to (all[1], all[0]) && t.ends == 2,
        "the call, and both sides' last candidates");
    test_hub_set_filter (f->hub, NULL, NULL);

    g_assert_cmpuint (t.udp, >, 0);
    if (tcp)
      g_assert_cmpuint (t.tcp, >, 0);
    else
      g_assert_cmpuint (t.tcp, ==, 0);
    for (guint i = 0; i < 2; i++) {
      assert_no_room_errors (all[i]);
      participant_free (all[i]);
    }
  }
}

int
main (int argc, char **argv)
{
  room_test_init (&argc, &argv);

#define ADD_HUB(path, func) \
  g_test_add ("/room/signal/" path, HubFixture, NULL, hub_setup, func, \
      hub_teardown)
  ADD_HUB ("candidates-before-offer", test_candidates_first);
  ADD_HUB ("glare", test_glare);
  ADD_HUB ("three-second-rule", test_three_seconds);
  ADD_HUB ("spoofed-from", test_spoofed);
  ADD_HUB ("garbage", test_garbage);
  ADD_HUB ("bye", test_bye);
  ADD_HUB ("grace-period", test_grace);
  ADD_HUB ("gone-at-once", test_gone_at_once);
  ADD_HUB ("ice-tcp", test_ice_tcp);
  ADD_HUB ("ice-fails", test_ice_fails);
  g_test_add ("/room/media/key-unit-rate-limit", HubFixture, NULL, hub_setup,
      test_key_unit_rate_limit, hub_teardown);
  return g_test_run ();
}
