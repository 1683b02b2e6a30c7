/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * SFU rooms on a real Janus 1.1 (docs/rooms.md, "SFU rooms"): LegbaRoom
 * participants of a legba-server room publish to a Janus VideoRoom and
 * receive each other from it, with the pads, signals and data of the
 * mesh. The test plays the coordinator: it starts Janus, creates the
 * VideoRoom through Janus's API and publishes the `legba:topology` event
 * on the room's channel through the server's HTTP API after each join
 * (the room takes it whoever publishes it, once per join). Then the
 * whole path: a legba-server coordinating a Janus of its own ([sfu]),
 * which makes the room and tells each member; and a Janus killed
 * mid-call, whose room that server makes again on the other Janus, where
 * the participants meet again by themselves, or, with one Janus, on it
 * once it is back. And one participant's own session gone while its
 * Janus is fine (its connection cut by a TCP relay of the test's between
 * the participants and Janus, or the session destroyed through Janus's
 * admin API): it opens one again on the same Janus, or, when Janus stays
 * out of its reach, reports it after 15 s.
 *
 * Without janus installed, the test exits 77 (skipped).
 */
#include "room-test.h"
#include "legba-test.h"
#include "legba-test-janus.h"

#include <signal.h>

#define PIN "legba-pin"
#define TOKEN "legba-token-1"
#define TOKEN2 "legba-token-2"

typedef struct
{
  char *from;
  char *topic;
  char *data;
} Message;

static LegbaTestJanus janus;
static LegbaTestJanus open_janus;
static LegbaTestJanus spare_janus;
static LegbaTestJanus solo_janus;

static void
message_free (gpointer data)
{
  Message *m = data;

  g_free (m->from);
  g_free (m->topic);
  g_free (m->data);
  g_free (m);
}

static void
on_data (LegbaRoom * room, LegbaParticipant * sender, const char *topic,
    JsonNode * data, GPtrArray * received)
{
  Message *m = g_new0 (Message, 1);

  m->from = g_strdup (legba_participant_get_id (sender));
  m->topic = g_strdup (topic);
  m->data = json_to_string (data, FALSE);
  g_ptr_array_add (received, m);
}

static void
on_bytes (LegbaRoom * room, LegbaParticipant * sender, GBytes * bytes,
    GPtrArray * received)
{
  Message *m = g_new0 (Message, 1);

  m->from = g_strdup (legba_participant_get_id (sender));
  m->data = g_strndup (g_bytes_get_data (bytes, NULL),
      g_bytes_get_size (bytes));
  g_ptr_array_add (received, m);
}

/* Janus relays a message only to subscribers whose channel is open: the
 * message is sent again every RESEND_MS until it arrived. */
#define RESEND_MS 100

typedef struct
{
  LegbaRoom *room;
  JsonNode *json;
  GBytes *bytes;
} Resend;

static gboolean
resend (gpointer data)
{
  Resend *r = data;

  if (r->json != NULL)
    legba_room_send_json (r->room, r->json, "greeting",
        LEGBA_RELIABILITY_RELIABLE, NULL, NULL);
  else
    legba_room_send_bytes (r->room, r->bytes, LEGBA_RELIABILITY_RELIABLE,
        NULL, NULL);
  return G_SOURCE_CONTINUE;
}

static guint
resend_start (Resend * r)
{
  resend (r);
  return g_timeout_add (RESEND_MS, resend, r);
}

/* Publishes an SFU room's topology on the room's channel. */
static void
tell_topology_full (Fixture * f, const char *url, guint64 room,
    const char *token)
{
  g_autofree char *data = g_strdup_printf ("{\"topology\":\"sfu\",\"sfu\":"
      "{\"kind\":\"janus\",\"url\":\"%s\",\"room\":%" G_GUINT64_FORMAT ","
      "\"pin\":\"" PIN "\",\"token\":\"%s\"}}", url, room, token);

  fixture_publish_event (f, "legba:topology", data);
}

static void
tell_topology (Fixture * f, guint64 room)
{
  tell_topology_full (f, janus.ws_url, room, TOKEN);
}

/* Whether Janus lists the participant in room; publisher: whether as a
 * publisher. */
static gboolean
janus_lists (guint64 room, Participant * p, gboolean * publisher)
{
  g_autoptr (JsonArray) list = legba_test_janus_participants (&janus, room);
  const char *id = legba_room_get_participant_id (p->room);

  for (guint i = 0; i < json_array_get_length (list); i++) {
    JsonObject *o = json_array_get_object_element (list, i);

    if (g_strcmp0 (json_object_get_string_member_with_default (o, "display",
                NULL), id) == 0) {
      *publisher = json_object_get_boolean_member_with_default (o,
          "publisher", FALSE);
      return TRUE;
    }
  }
  return FALSE;
}

static gboolean
janus_publishes (guint64 room, Participant * p)
{
  gboolean publisher = FALSE;

  return janus_lists (room, p, &publisher) && publisher;
}

static Participant *
join_sfu (Fixture * f, guint64 room, const char *identity)
{
  Participant *p = participant_new_for_server (f, identity, "h264", TRUE);

  participant_connect_and_wait (p);
  tell_topology (f, room);
  ROOM_WAIT_FOR (janus_publishes (room, p), "the participant to publish to "
      "Janus");
  return p;
}

/* The streams of each come to the others from the SFU, with the sender's
 * participant id; no peer connection joins two participants. */
static gboolean
all_decode (Participant ** all, guint n)
{
  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < n; j++)
      if (i != j && !participant_decodes (all[i], all[j], 10))
        return FALSE;
  return TRUE;
}

static void
assert_only_sfu_connections (Participant * p, guint others)
{
  g_autoptr (GPtrArray) webrtcbins = elements_by_factory (p->pipeline,
      "webrtcbin");

  /* one to publish (a participant with a track), one per participant
   * received */
  g_assert_cmpuint (webrtcbins->len, ==, (p->sources[0] || p->sources[1]) +
      others);
}

static void
test_sfu_room (Fixture * f, gconstpointer data)
{
  const char *tokens[] = { TOKEN, NULL };
  guint64 room = legba_test_janus_create_room (&janus, PIN, tokens);
  Participant *a = join_sfu (f, room, "alice");
  Participant *b = join_sfu (f, room, "bob");
  Participant *c;
  Participant *all[3] = { a, b, NULL };
  g_autoptr (GPtrArray) received = g_ptr_array_new_with_free_func
      (message_free);
  g_autoptr (GPtrArray) bytes_received = g_ptr_array_new_with_free_func
      (message_free);
  g_autoptr (GBytes) bytes = g_bytes_new_static ("\x01bin", 4);
  g_autoptr (JsonNode) hello = json_from_string ("{\"n\":1}", NULL);
  const char *to[] = { legba_room_get_participant_id (b->room), NULL };
  Resend json_resend = { a->room, hello, NULL };
  Resend bytes_resend = { b->room, NULL, bytes };
  guint resend_source;
  g_autoptr (GError) error = NULL;
  Message *m;

  ROOM_WAIT_FOR (all_decode (all, 2), "alice and bob to decode each other "
      "through Janus");
  assert_only_sfu_connections (a, 1);
  assert_only_sfu_connections (b, 1);

  /* data to everyone goes through the SFU, from its sender */
  g_signal_connect (b->room, "data-received", G_CALLBACK (on_data), received);
  resend_source = resend_start (&json_resend);
  ROOM_WAIT_FOR (received->len > 0, "bob to receive alice's message");
  g_source_remove (resend_source);
  m = received->pdata[0];
  g_assert_cmpstr (m->from, ==, legba_room_get_participant_id (a->room));
  g_assert_cmpstr (m->topic, ==, "greeting");
  g_assert_cmpstr (m->data, ==, "{\"n\":1}");
  /* and binary, the other way */
  g_signal_connect (a->room, "bytes-received", G_CALLBACK (on_bytes),
      bytes_received);
  resend_source = resend_start (&bytes_resend);
  ROOM_WAIT_FOR (bytes_received->len > 0, "alice to receive bob's bytes");
  g_source_remove (resend_source);
  m = bytes_received->pdata[0];
  g_assert_cmpstr (m->from, ==, legba_room_get_participant_id (b->room));
  g_assert_cmpstr (m->data, ==, "\x01bin");
  /* named recipients: refused, never sent to everyone */
  g_assert_false (legba_room_send_json (a->room, hello, "private",
          LEGBA_RELIABILITY_RELIABLE, to, &error));
  g_assert_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_INVALID);

  /* a third joins later: both receive it, it receives both */
  c = join_sfu (f, room, "carol");
  all[2] = c;
  ROOM_WAIT_FOR (all_decode (all, 3), "the three to decode each other");
  assert_only_sfu_connections (a, 2);
  assert_only_sfu_connections (c, 2);
  for (guint i = 0; i < received->len; i++)
    g_assert_cmpstr (((Message *) received->pdata[i])->topic, !=, "private");

  /* the third leaves: its pads go */
  participant_free (c);
  ROOM_WAIT_FOR (a->left == 1 && b->left == 1 && a->tracks_removed == 2 &&
      b->tracks_removed == 2, "carol's pads to be removed");
  assert_only_sfu_connections (a, 1);
  assert_no_room_errors (a);
  assert_no_room_errors (b);
  participant_free (b);
  participant_free (a);
}

static gboolean
got_topic (GPtrArray * received, const char *topic)
{
  for (guint i = 0; i < received->len; i++)
    if (g_strcmp0 (((Message *) received->pdata[i])->topic, topic) == 0)
      return TRUE;
  return FALSE;
}

/* A second topology of the same room with another token (what a member
 * gets when it subscribes again, a reconnection, and the server takes
 * its former token back): the participants use the new token from then
 * on, so that they still subscribe to a publisher who comes later once
 * the former token is gone. */
static void
test_sfu_token_renewed (Fixture * f, gconstpointer data)
{
  const char *tokens[] = { TOKEN, NULL };
  guint64 room = legba_test_janus_create_room (&janus, PIN, tokens);
  Participant *a = join_sfu (f, room, "alice");
  Participant *b = join_sfu (f, room, "bob");
  Participant *all[3] = { a, b, NULL };
  g_autoptr (GPtrArray) a_got = g_ptr_array_new_with_free_func (message_free);
  g_autoptr (GPtrArray) b_got = g_ptr_array_new_with_free_func (message_free);

  ROOM_WAIT_FOR (all_decode (all, 2), "alice and bob to decode each other");
  g_signal_connect (a->room, "data-received", G_CALLBACK (on_data), a_got);
  g_signal_connect (b->room, "data-received", G_CALLBACK (on_data), b_got);
  legba_test_janus_admit (&janus, room, TOKEN2);
  tell_topology_full (f, janus.ws_url, room, TOKEN2);
  /* §7: after the topology on the same channel, so taken after it */
  fixture_publish_event (f, "marker", "{}");
  ROOM_WAIT_FOR (got_topic (a_got, "marker") && got_topic (b_got, "marker"),
      "both to have the new topology");
  legba_test_janus_revoke (&janus, room, TOKEN);

  all[2] = participant_new_for_server (f, "carol", "h264", TRUE);
  participant_connect_and_wait (all[2]);
  tell_topology_full (f, janus.ws_url, room, TOKEN2);
  ROOM_WAIT_FOR (all_decode (all, 3), "the three to decode each other, "
      "alice and bob subscribing to carol with the new token");
  for (guint i = 0; i < 3; i++)
    assert_no_room_errors (all[i]);
  for (guint i = 0; i < 3; i++)
    participant_free (all[2 - i]);
}

static gboolean
received_from (GPtrArray * received, Participant * from)
{
  for (guint i = 0; i < received->len; i++)
    if (g_strcmp0 (((Message *) received->pdata[i])->from,
            legba_room_get_participant_id (from->room)) == 0)
      return TRUE;
  return FALSE;
}

/* Viewers: a participant with no track that sent nothing receives the
 * others' media and data and publishes nothing (no connection of its own
 * to Janus, which lists it as no publisher); its first message to
 * everyone, or its first track, makes it publish. */
static void
test_sfu_viewers (Fixture * f, gconstpointer data)
{
  const char *tokens[] = { TOKEN, NULL };
  guint64 room = legba_test_janus_create_room (&janus, PIN, tokens);
  Participant *a = join_sfu (f, room, "alice");
  Participant *v = participant_new_for_server (f, "victor", NULL, FALSE);
  Participant *w = participant_new_for_server (f, "wendy", NULL, FALSE);
  g_autoptr (GPtrArray) received = g_ptr_array_new_with_free_func
      (message_free);
  g_autoptr (GPtrArray) a_received = g_ptr_array_new_with_free_func
      (message_free);
  g_autoptr (JsonNode) hello = json_from_string ("{\"n\":1}", NULL);
  Resend a_resend = { a->room, hello, NULL };
  Resend v_resend = { v->room, hello, NULL };
  g_autoptr (GError) error = NULL;
  GstElement *audio;
  gboolean publisher = TRUE;
  guint source;

  participant_connect_and_wait (v);
  tell_topology (f, room);
  participant_connect_and_wait (w);
  tell_topology (f, room);
  ROOM_WAIT_FOR (participant_decodes (v, a, 10) &&
      participant_decodes (w, a, 10), "the viewers to decode alice");
  g_signal_connect (v->room, "data-received", G_CALLBACK (on_data), received);
  source = resend_start (&a_resend);
  ROOM_WAIT_FOR (received->len > 0, "victor to receive alice's message");
  g_source_remove (source);
  g_assert_cmpstr (((Message *) received->pdata[0])->from, ==,
      legba_room_get_participant_id (a->room));
  ROOM_WAIT_FOR (janus_lists (room, v, &publisher) &&
      janus_lists (room, w, &publisher), "Janus to list the viewers");
  g_assert_true (janus_lists (room, v, &publisher));
  g_assert_false (publisher);
  g_assert_true (janus_lists (room, w, &publisher));
  g_assert_false (publisher);
  /* each viewer receives alice and makes no connection of its own; alice
   * receives neither */
  assert_only_sfu_connections (v, 1);
  assert_only_sfu_connections (w, 1);
  assert_only_sfu_connections (a, 0);

  /* victor's first message makes it publish: alice gets it from him */
  g_signal_connect (a->room, "data-received", G_CALLBACK (on_data), a_received);
  source = resend_start (&v_resend);
  ROOM_WAIT_FOR (received_from (a_received, v), "alice to receive victor's "
      "message");
  g_source_remove (source);
  g_assert_true (janus_publishes (room, v));

  /* wendy's first track: alice receives it */
  audio = gst_parse_bin_from_description ("audiotestsrc is-live=true "
      "samplesperbuffer=960 ! audio/x-raw,rate=48000,channels=1 ! opusenc",
      TRUE, &error);
  g_assert_no_error (error);
  participant_publish (w, LEGBA_TRACK_KIND_AUDIO, audio);
  ROOM_WAIT_FOR (participant_frames (a, w, LEGBA_TRACK_KIND_AUDIO) > 10,
      "alice to decode wendy's audio");
  g_assert_true (janus_publishes (room, w));
  assert_no_room_errors (a);
  assert_no_room_errors (v);
  assert_no_room_errors (w);
  participant_free (w);
  participant_free (v);
  participant_free (a);
}

static gboolean
has_error (Participant * p, int code)
{
  for (guint i = 0; i < p->errors->len; i++)
    if (g_error_matches (p->errors->pdata[i], LEGBA_ROOM_ERROR, code))
      return TRUE;
  return FALSE;
}

/* A token Janus does not take, and a Janus that is not there: each named
 * in an error of the room, which stays joined. */
static void
test_sfu_refused (Fixture * f, gconstpointer data)
{
  const char *tokens[] = { TOKEN, NULL };
  guint64 room = legba_test_janus_create_room (&janus, PIN, tokens);
  Participant *p = participant_new_for_server (f, "dave", "h264", TRUE);
  g_autofree char *closed = NULL;
  g_autoptr (GSocket) socket = NULL;

  participant_connect_and_wait (p);
  tell_topology_full (f, janus.ws_url, room, "not-a-token");
  ROOM_WAIT_FOR (has_error (p, LEGBA_ROOM_ERROR_REFUSED), "Janus to refuse "
      "the token");
  g_assert_cmpint (legba_room_get_state (p->room), ==,
      LEGBA_ROOM_STATE_CONNECTED);
  participant_free (p);

  /* a port nothing listens on: bound, never listening */
  socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM,
      G_SOCKET_PROTOCOL_TCP, NULL);
  {
    g_autoptr (GInetAddress) lo =
        g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
    g_autoptr (GSocketAddress) any = g_inet_socket_address_new (lo, 0);
    g_autoptr (GSocketAddress) bound = NULL;

    g_assert_true (g_socket_bind (socket, any, FALSE, NULL));
    bound = g_socket_get_local_address (socket, NULL);
    closed = g_strdup_printf ("ws://127.0.0.1:%u/",
        g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound)));
  }
  p = participant_new_for_server (f, "erin", "h264", TRUE);
  participant_connect_and_wait (p);
  tell_topology_full (f, closed, room, TOKEN);
  ROOM_WAIT_FOR (has_error (p, LEGBA_ROOM_ERROR_UNREACHABLE), "the room to "
      "report Janus unreachable");
  participant_free (p);
}

/* A server whose rooms are all SFU rooms, on open_janus. */
static void
coordinated_setup (Fixture * f, gconstpointer data)
{
  g_autofree char *http = g_strdup_printf ("http://127.0.0.1:%u/janus",
      open_janus.http_port);
  const char *urls[] = { http, NULL };
  const char *ws_urls[] = { open_janus.ws_url, NULL };

  legba_test_tolerate_rtpsession_race ();
  f->server = legba_server_new ();
  g_object_set (f->server, "sfu-janus-urls", urls, "sfu-janus-ws-urls",
      ws_urls, "sfu-admin-key", LEGBA_TEST_JANUS_ADMIN_KEY, "sfu-topology",
      "sfu", NULL);
  fixture_listen (f, 0);
}

static void
on_deep_element_added (GstBin * bin, GstBin * sub_bin, GstElement * element,
    gint * webrtcbins)
{
  GstElementFactory *factory = gst_element_get_factory (element);

  if (factory != NULL && strcmp (GST_OBJECT_NAME (factory), "webrtcbin") == 0)
    g_atomic_int_inc (webrtcbins);
}

/* The video packets p's stats of other say went out: in an SFU room,
 * on p's publisher connection, through which other receives it. */
static gboolean
stats_show_video_sent (Participant * p, Participant * other)
{
  LegbaParticipant *lp = participant_find (p, other);
  g_autoptr (GstStructure) stats = lp ? legba_participant_get_stats (lp) : NULL;
  guint64 packets = 0;
  guint estimate = 0;

  return stats != NULL &&
      gst_structure_get_uint64 (stats, "packets-sent-video", &packets) &&
      gst_structure_get_uint (stats, "target-bitrate", &estimate) &&
      packets > 0 && estimate > 0;
}

/* Counts the webrtcbins the participant ever makes, closed ones too. */
static void
count_webrtcbins (Participant * p, gint * webrtcbins)
{
  g_signal_connect (p->pipeline, "deep-element-added",
      G_CALLBACK (on_deep_element_added), webrtcbins);
}

/* Nobody but legba-server plays the coordinator: it makes the VideoRoom
 * when alice joins and tells each member the room, pin and token; the
 * participants meet through Janus with the mesh's pads and data. The
 * room is known to each before it sees the others: nobody makes a mesh
 * connection, even for a moment (each makes one webrtcbin to publish and
 * one per participant it receives, no more). */
static void
test_sfu_coordinated (Fixture * f, gconstpointer data)
{
  g_autoptr (GPtrArray) received = g_ptr_array_new_with_free_func
      (message_free);
  g_autoptr (JsonNode) hello = json_from_string ("{\"n\":1}", NULL);
  Participant *a = participant_new_for_server (f, "alice", "h264", TRUE);
  Participant *b = participant_new_for_server (f, "bob", "h264", TRUE);
  Participant *c = participant_new_for_server (f, "carol", "h264", TRUE);
  Participant *all[3] = { a, b, c };
  Resend json_resend = { a->room, hello, NULL };
  gint made[3] = { 0, 0, 0 };
  guint resend_source;

  for (guint i = 0; i < 3; i++)
    count_webrtcbins (all[i], &made[i]);
  participant_connect_and_wait (a);
  participant_connect_and_wait (b);
  ROOM_WAIT_FOR (all_decode (all, 2), "alice and bob to decode each other "
      "through the Janus legba-server coordinates");
  assert_only_sfu_connections (a, 1);
  assert_only_sfu_connections (b, 1);
  participant_connect_and_wait (c);
  ROOM_WAIT_FOR (all_decode (all, 3), "all three to decode each other");
  for (guint i = 0; i < 3; i++) {
    assert_only_sfu_connections (all[i], 2);
    g_assert_cmpint (g_atomic_int_get (&made[i]), ==, 3);
  }
  /* each participant's stats of another carry what is sent to it: the
   * publisher connection's figures, not those of the receive-only
   * subscriber connection, which sends no video */
  ROOM_WAIT_FOR (stats_show_video_sent (a, b) && stats_show_video_sent (b, c)
      && stats_show_video_sent (c, a), "the stats to show the video sent "
      "towards Janus");
  g_signal_connect (b->room, "data-received", G_CALLBACK (on_data), received);
  resend_source = resend_start (&json_resend);
  ROOM_WAIT_FOR (received->len > 0, "bob to receive alice's message");
  g_source_remove (resend_source);
  g_assert_cmpstr (((Message *) received->pdata[0])->from, ==,
      legba_room_get_participant_id (a->room));
  for (guint i = 0; i < 3; i++)
    assert_no_room_errors (all[i]);
  participant_free (c);
  participant_free (b);
  participant_free (a);
}

/* Alice's signalling goes away (she leaves the room's channel) while
 * her media keep coming through Janus: bob keeps her, away, and keeps
 * receiving her (§3's grace period, as in the mesh); she is listed again
 * within it: nothing was torn down, nobody left, and each still receives
 * the other. (A participant the SFU room dropped at once would never be
 * received again: Janus says nothing of a publisher that did not go.) */
static void
test_sfu_signalling_away (Fixture * f, gconstpointer data)
{
  Participant *a = participant_new_for_server (f, "alice", "h264", TRUE);
  Participant *b = participant_new_for_server (f, "bob", "h264", TRUE);
  Participant *all[2] = { a, b };
  LegbaParticipant *alice_seen;
  guint64 before;

  participant_connect_and_wait (a);
  participant_connect_and_wait (b);
  ROOM_WAIT_FOR (all_decode (all, 2), "alice and bob to decode each other");
  alice_seen = g_object_ref (participant_find (b, a));
  legba_signaller_leave (a->signaller);
  ROOM_WAIT_FOR (legba_participant_get_state (alice_seen) ==
      LEGBA_PARTICIPANT_STATE_AWAY, "bob to see alice away");
  before = participant_frames (b, a, LEGBA_TRACK_KIND_VIDEO);
  ROOM_WAIT_FOR (participant_frames (b, a, LEGBA_TRACK_KIND_VIDEO) >=
      before + 15, "bob to receive alice while she is away");
  g_assert_true (legba_signaller_join (a->signaller, ROOM,
          legba_room_get_participant_id (a->room), "alice", NULL, NULL));
  ROOM_WAIT_FOR (legba_participant_get_state (alice_seen) ==
      LEGBA_PARTICIPANT_STATE_CONNECTED, "alice to be back");
  g_assert_cmpuint (b->left, ==, 0);
  g_assert_true (participant_find (b, a) == alice_seen);
  before = participant_frames (a, b, LEGBA_TRACK_KIND_VIDEO);
  ROOM_WAIT_FOR (participant_frames (a, b, LEGBA_TRACK_KIND_VIDEO) >=
      before + 15 && all_decode (all, 2), "both to go on receiving");
  assert_only_sfu_connections (a, 1);
  assert_only_sfu_connections (b, 1);
  assert_no_room_errors (a);
  assert_no_room_errors (b);
  g_object_unref (alice_seen);
  participant_free (b);
  participant_free (a);
}

/* A server coordinating two Janus: open_janus and spare_janus. */
static void
two_janus_setup (Fixture * f, gconstpointer data)
{
  g_autofree char *http = g_strdup_printf ("http://127.0.0.1:%u/janus",
      open_janus.http_port);
  g_autofree char *http2 = g_strdup_printf ("http://127.0.0.1:%u/janus",
      spare_janus.http_port);
  const char *urls[] = { http, http2, NULL };
  const char *ws_urls[] = { open_janus.ws_url, spare_janus.ws_url, NULL };

  legba_test_tolerate_rtpsession_race ();
  f->server = legba_server_new ();
  g_object_set (f->server, "sfu-janus-urls", urls, "sfu-janus-ws-urls",
      ws_urls, "sfu-admin-key", LEGBA_TEST_JANUS_ADMIN_KEY, "sfu-topology",
      "sfu", NULL);
  fixture_listen (f, 0);
}

/* The most the media of an SFU room may stop when its Janus dies: the
 * server notices within a second (docs/server.md), the members join the
 * room made again at once (docs/rooms.md gives what was measured). */
#define REJOIN_BOUND_MS 10000

/* The Janus holding the room is killed mid-call: each participant's
 * pads of the other go, the server makes the room again on the other
 * Janus and tells both, and they receive each other again, as the same
 * participants (never reported left), within REJOIN_BOUND_MS; reliable
 * data sent after that arrives. */
static void
test_sfu_janus_dies (Fixture * f, gconstpointer data)
{
  g_autoptr (GPtrArray) received = g_ptr_array_new_with_free_func
      (message_free);
  g_autoptr (JsonNode) hello = json_from_string ("{\"after\":1}", NULL);
  Participant *a = participant_new_for_server (f, "alice", "h264", TRUE);
  Participant *b = participant_new_for_server (f, "bob", "h264", TRUE);
  Participant *all[2] = { a, b };
  Resend json_resend = { a->room, hello, NULL };
  LegbaParticipant *a_sees_b, *b_sees_a;
  LegbaTestJanus *holder, *other;
  guint resend_source;
  gint64 killed;

  participant_connect_and_wait (a);
  participant_connect_and_wait (b);
  ROOM_WAIT_FOR (all_decode (all, 2), "alice and bob to decode each other");
  a_sees_b = participant_find (a, b);
  b_sees_a = participant_find (b, a);
  holder = legba_test_janus_count_rooms (&open_janus) > 0 ? &open_janus :
      &spare_janus;
  other = holder == &open_janus ? &spare_janus : &open_janus;
  g_assert_cmpuint (legba_test_janus_count_rooms (holder), ==, 1);
  g_assert_cmpuint (legba_test_janus_count_rooms (other), ==, 0);

  killed = g_get_monotonic_time ();
  legba_test_janus_kill (holder);
  ROOM_WAIT_FOR (a->tracks_removed == 2 && b->tracks_removed == 2,
      "each participant's pads of the other to go with the dead Janus");
  participant_forget_frames (a, b);
  participant_forget_frames (b, a);
  ROOM_WAIT_FOR (all_decode (all, 2), "alice and bob to decode each other "
      "again, through the room made again on the other Janus");
  g_assert_cmpuint (legba_test_janus_count_rooms (other), ==, 1);
  for (guint i = 0; i < 2; i++) {
    gint64 gap = participant_first_video_time (all[i], all[1 - i]) - killed;

    g_test_message ("sfu-rejoin-gap-ms %s=%" G_GINT64_FORMAT,
        all[i]->identity, gap / 1000);
    g_assert_cmpint (gap, <, REJOIN_BOUND_MS * 1000);
  }
  /* the same participants, their pads added again */
  g_assert_true (participant_find (a, b) == a_sees_b);
  g_assert_true (participant_find (b, a) == b_sees_a);
  g_assert_cmpuint (a->left, ==, 0);
  g_assert_cmpuint (b->left, ==, 0);
  g_assert_cmpuint (a->tracks_added, ==, 4);
  assert_only_sfu_connections (a, 1);
  assert_only_sfu_connections (b, 1);

  g_signal_connect (b->room, "data-received", G_CALLBACK (on_data), received);
  resend_source = resend_start (&json_resend);
  ROOM_WAIT_FOR (received->len > 0, "bob to receive alice's message sent "
      "after the move");
  g_source_remove (resend_source);
  g_assert_cmpstr (((Message *) received->pdata[0])->data, ==, "{\"after\":1}");
  assert_no_room_errors (a);
  assert_no_room_errors (b);
  participant_free (b);
  participant_free (a);
  legba_test_janus_restart (holder);
}

/* The most the media may stop when the room's Janus hangs: the server's
 * keepalive waits 5 s for an answer (docs/server.md). */
#define HANG_BOUND_MS 15000

/* The Janus holding the room stops answering (SIGSTOP: its sockets stay
 * open, so the participants notice nothing): the server's keepalive
 * times out, the room is made again on the other Janus, and the
 * participants, told so, leave the silent one and decode each other
 * again within HANG_BOUND_MS. */
static void
test_sfu_janus_hangs (Fixture * f, gconstpointer data)
{
  Participant *a = participant_new_for_server (f, "alice", "h264", TRUE);
  Participant *b = participant_new_for_server (f, "bob", "h264", TRUE);
  Participant *all[2] = { a, b };
  LegbaTestJanus *holder, *other;
  gint64 stopped;

  participant_connect_and_wait (a);
  participant_connect_and_wait (b);
  ROOM_WAIT_FOR (all_decode (all, 2), "alice and bob to decode each other");
  holder = legba_test_janus_count_rooms (&open_janus) > 0 ? &open_janus :
      &spare_janus;
  other = holder == &open_janus ? &spare_janus : &open_janus;

  stopped = g_get_monotonic_time ();
  g_subprocess_send_signal (holder->process, SIGSTOP);
  ROOM_WAIT_FOR (a->tracks_removed == 2 && b->tracks_removed == 2,
      "each participant's pads of the other to go when told the room moved");
  participant_forget_frames (a, b);
  participant_forget_frames (b, a);
  ROOM_WAIT_FOR (all_decode (all, 2), "alice and bob to decode each other "
      "again, through the room made again on the other Janus");
  g_assert_cmpuint (legba_test_janus_count_rooms (other), ==, 1);
  for (guint i = 0; i < 2; i++) {
    gint64 gap = participant_first_video_time (all[i], all[1 - i]) - stopped;

    g_test_message ("sfu-hang-gap-ms %s=%" G_GINT64_FORMAT,
        all[i]->identity, gap / 1000);
    g_assert_cmpint (gap, <, HANG_BOUND_MS * 1000);
  }
  g_assert_cmpuint (a->left, ==, 0);
  g_assert_cmpuint (b->left, ==, 0);
  assert_only_sfu_connections (a, 1);
  assert_only_sfu_connections (b, 1);
  assert_no_room_errors (a);
  assert_no_room_errors (b);
  participant_free (b);
  participant_free (a);
  legba_test_janus_kill (holder);
  legba_test_janus_restart (holder);
}

/* A server coordinating solo_janus alone. */
static void
solo_setup (Fixture * f, gconstpointer data)
{
  g_autofree char *http = g_strdup_printf ("http://127.0.0.1:%u/janus",
      solo_janus.http_port);
  const char *urls[] = { http, NULL };
  const char *ws_urls[] = { solo_janus.ws_url, NULL };

  legba_test_tolerate_rtpsession_race ();
  f->server = legba_server_new ();
  g_object_set (f->server, "sfu-janus-urls", urls, "sfu-janus-ws-urls",
      ws_urls, "sfu-admin-key", LEGBA_TEST_JANUS_ADMIN_KEY, "sfu-topology",
      "sfu", NULL);
  fixture_listen (f, 0);
}

static gboolean
set_true (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

/* How long the Janus stays down the second time: longer than the
 * server's watch interval, so that the server finds no Janus to make
 * the room on and tries again. */
#define DOWN_MS 2500

/* The only Janus dies and comes back (on the same ports, without the
 * room), twice: at once (the server's next keepalive finds its session
 * unknown), then after DOWN_MS (the keepalive finds no Janus, nor does
 * the move, which is tried again). Each time the server makes the room
 * again there once it answers, and the participants decode each other
 * again. */
static void
test_sfu_janus_restarts (Fixture * f, gconstpointer data)
{
  Participant *a = participant_new_for_server (f, "alice", "h264", TRUE);
  Participant *b = participant_new_for_server (f, "bob", "h264", TRUE);
  Participant *all[2] = { a, b };

  participant_connect_and_wait (a);
  participant_connect_and_wait (b);
  ROOM_WAIT_FOR (all_decode (all, 2), "alice and bob to decode each other");
  for (guint round = 1; round <= 2; round++) {
    gboolean down_over = FALSE;

    legba_test_janus_kill (&solo_janus);
    ROOM_WAIT_FOR (a->tracks_removed == 2 * round &&
        b->tracks_removed == 2 * round, "each participant's pads of the "
        "other to go with the dead Janus");
    participant_forget_frames (a, b);
    participant_forget_frames (b, a);
    if (round == 2) {
      g_timeout_add (DOWN_MS, set_true, &down_over);
      ROOM_WAIT_FOR (down_over, "the Janus's time down");
    }
    legba_test_janus_restart (&solo_janus);
    ROOM_WAIT_FOR (all_decode (all, 2), "alice and bob to decode each other "
        "again, through the room made again on the restarted Janus");
    g_assert_cmpuint (legba_test_janus_count_rooms (&solo_janus), ==, 1);
  }
  g_assert_cmpuint (a->left, ==, 0);
  g_assert_cmpuint (b->left, ==, 0);
  assert_only_sfu_connections (a, 1);
  assert_only_sfu_connections (b, 1);
  assert_no_room_errors (a);
  assert_no_room_errors (b);
  participant_free (b);
  participant_free (a);
}

/* A TCP relay in front of a Janus's WebSocket port, given to the
 * participants as their Janus: cutting one of its links closes that
 * participant's connection to Janus, and only that one, while Janus
 * itself stays up. */
typedef struct
{
  GSocketService *service;
  guint target_port;
  char *url;
  GPtrArray *links;             /* GSocketConnection pairs, accepted first */
  gboolean refusing;            /* closes what it accepts */
  guint refused;
} Relay;

static Relay relay;

static void
spliced (GObject * source, GAsyncResult * result, gpointer data)
{
  g_io_stream_splice_finish (result, NULL);
}

static gboolean
on_relay_incoming (GSocketService * service, GSocketConnection * connection,
    GObject * source, Relay * r)
{
  g_autoptr (GSocketClient) client = g_socket_client_new ();
  g_autoptr (GError) error = NULL;
  GSocketConnection *upstream;

  if (r->refusing) {
    r->refused++;
    g_io_stream_close (G_IO_STREAM (connection), NULL, NULL);
    return TRUE;
  }
  upstream = g_socket_client_connect_to_host (client, "127.0.0.1",
      r->target_port, NULL, &error);
  g_assert_no_error (error);
  g_ptr_array_add (r->links, g_object_ref (connection));
  g_ptr_array_add (r->links, upstream);
  g_io_stream_splice_async (G_IO_STREAM (connection), G_IO_STREAM (upstream),
      G_IO_STREAM_SPLICE_CLOSE_STREAM1 | G_IO_STREAM_SPLICE_CLOSE_STREAM2,
      G_PRIORITY_DEFAULT, NULL, spliced, NULL);
  return TRUE;
}

static void
relay_start (Relay * r, guint target_port)
{
  g_autoptr (GError) error = NULL;
  guint16 port;

  r->target_port = target_port;
  r->refusing = FALSE;
  r->refused = 0;
  r->links = g_ptr_array_new_with_free_func (g_object_unref);
  r->service = g_socket_service_new ();
  port = g_socket_listener_add_any_inet_port (G_SOCKET_LISTENER (r->service),
      NULL, &error);
  g_assert_no_error (error);
  r->url = g_strdup_printf ("ws://127.0.0.1:%u/", port);
  g_signal_connect (r->service, "incoming", G_CALLBACK (on_relay_incoming), r);
  g_socket_service_start (r->service);
}

static guint
relay_count (Relay * r)
{
  return r->links->len / 2;
}

/* Both ends of link i go at once, as a connection reset would. */
static void
relay_cut (Relay * r, guint i)
{
  for (guint k = 2 * i; k < 2 * i + 2; k++)
    g_socket_shutdown (g_socket_connection_get_socket (r->links->pdata[k]),
        TRUE, TRUE, NULL);
}

static void
relay_stop (Relay * r)
{
  g_socket_service_stop (r->service);
  g_socket_listener_close (G_SOCKET_LISTENER (r->service));
  for (guint i = 0; i < relay_count (r); i++)
    relay_cut (r, i);
  g_clear_object (&r->service);
  g_clear_pointer (&r->links, g_ptr_array_unref);
  g_clear_pointer (&r->url, g_free);
}

/* A server coordinating open_janus, whose members reach it through the
 * relay. */
static void
relay_setup (Fixture * f, gconstpointer data)
{
  g_autofree char *http = g_strdup_printf ("http://127.0.0.1:%u/janus",
      open_janus.http_port);
  const char *urls[] = { http, NULL };
  const char *ws_urls[] = { NULL, NULL };

  relay_start (&relay, open_janus.ws_port);
  ws_urls[0] = relay.url;
  legba_test_tolerate_rtpsession_race ();
  f->server = legba_server_new ();
  g_object_set (f->server, "sfu-janus-urls", urls, "sfu-janus-ws-urls",
      ws_urls, "sfu-admin-key", LEGBA_TEST_JANUS_ADMIN_KEY, "sfu-topology",
      "sfu", NULL);
  fixture_listen (f, 0);
}

static void
relay_teardown (Fixture * f, gconstpointer data)
{
  fixture_teardown (f, data);
  relay_stop (&relay);
}

/* The most the media may stop when a participant's own connection to a
 * healthy Janus goes: its first attempt to open it again comes after
 * 250 ms (docs/rooms.md gives what was measured). */
#define RECONNECT_BOUND_MS 10000

/* After alice lost her session (at since, monotonic) while Janus, the
 * server and bob are fine: each one's pads of the other go and come
 * back, as the same participants, within bound_ms (the gap printed as
 * metric); reliable data sent after that arrives, both ways; no error. */
static void
assert_session_back (Participant * a, Participant * b, LegbaParticipant *
    a_sees_b, LegbaParticipant * b_sees_a, gint64 since, gint64 bound_ms,
    const char *metric)
{
  g_autoptr (GPtrArray) received = g_ptr_array_new_with_free_func
      (message_free);
  g_autoptr (GPtrArray) a_received = g_ptr_array_new_with_free_func
      (message_free);
  g_autoptr (JsonNode) hello = json_from_string ("{\"after\":1}", NULL);
  Participant *all[2] = { a, b };
  Resend a_resend = { a->room, hello, NULL };
  Resend b_resend = { b->room, hello, NULL };
  guint resend_source;

  ROOM_WAIT_FOR (a->tracks_removed == 2 && b->tracks_removed == 2,
      "each participant's pads of the other to go with alice's session");
  participant_forget_frames (a, b);
  participant_forget_frames (b, a);
  ROOM_WAIT_FOR (all_decode (all, 2), "alice and bob to decode each other "
      "again, alice in a session of her own again");
  for (guint i = 0; i < 2; i++) {
    gint64 gap = participant_first_video_time (all[i], all[1 - i]) - since;

    g_test_message ("%s %s=%" G_GINT64_FORMAT, metric, all[i]->identity,
        gap / 1000);
    g_assert_cmpint (gap, <, bound_ms * 1000);
  }
  /* the same Janus room (nothing moved), the same participants */
  g_assert_cmpuint (legba_test_janus_count_rooms (&open_janus), ==, 1);
  g_assert_true (participant_find (a, b) == a_sees_b);
  g_assert_true (participant_find (b, a) == b_sees_a);
  g_assert_cmpuint (a->left, ==, 0);
  g_assert_cmpuint (b->left, ==, 0);
  g_assert_cmpuint (a->tracks_added, ==, 4);
  g_assert_cmpuint (b->tracks_added, ==, 4);
  assert_only_sfu_connections (a, 1);
  assert_only_sfu_connections (b, 1);

  /* reliable data, both ways */
  g_signal_connect (b->room, "data-received", G_CALLBACK (on_data), received);
  g_signal_connect (a->room, "data-received", G_CALLBACK (on_data), a_received);
  resend_source = resend_start (&a_resend);
  ROOM_WAIT_FOR (received->len > 0, "bob to receive alice's message sent "
      "after her session came back");
  g_source_remove (resend_source);
  g_assert_cmpstr (((Message *) received->pdata[0])->from, ==,
      legba_room_get_participant_id (a->room));
  g_assert_cmpstr (((Message *) received->pdata[0])->data, ==, "{\"after\":1}");
  resend_source = resend_start (&b_resend);
  ROOM_WAIT_FOR (a_received->len > 0, "alice to receive bob's message");
  g_source_remove (resend_source);
  g_assert_cmpstr (((Message *) a_received->pdata[0])->from, ==,
      legba_room_get_participant_id (b->room));
  assert_no_room_errors (a);
  assert_no_room_errors (b);
}

/* Alice's connection to Janus is cut while Janus, the server and bob's
 * connection are fine: no new topology comes. Alice opens a session
 * again on the same Janus and joins the same VideoRoom, through a new
 * connection (assert_session_back() says the rest). */
static void
test_sfu_connection_cut (Fixture * f, gconstpointer data)
{
  Participant *a = participant_new_for_server (f, "alice", "h264", TRUE);
  Participant *b = participant_new_for_server (f, "bob", "h264", TRUE);
  Participant *all[2] = { a, b };
  LegbaParticipant *a_sees_b, *b_sees_a;
  gint64 cut;

  participant_connect_and_wait (a);
  ROOM_WAIT_FOR (relay_count (&relay) == 1, "alice to reach Janus");
  participant_connect_and_wait (b);
  ROOM_WAIT_FOR (all_decode (all, 2), "alice and bob to decode each other");
  g_assert_cmpuint (relay_count (&relay), ==, 2);
  a_sees_b = participant_find (a, b);
  b_sees_a = participant_find (b, a);

  cut = g_get_monotonic_time ();
  relay_cut (&relay, 0);
  assert_session_back (a, b, a_sees_b, b_sees_a, cut, RECONNECT_BOUND_MS,
      "sfu-reconnect-gap-ms");
  g_assert_cmpuint (relay_count (&relay), ==, 3);
  participant_free (b);
  participant_free (a);
}

/* The room waits this long for its session or a new topology
 * (docs/rooms.md) */
#define LOST_WAIT_S 15

/* Alice's connection is cut and Janus stays out of her reach (the relay
 * closes every new connection): she tries again, with a back-off, and
 * reports the room's SFU unreachable once LOST_WAIT_S passed; bob's
 * pads of her go, and she stays in the room. */
static void
test_sfu_connection_lost (Fixture * f, gconstpointer data)
{
  Participant *a = participant_new_for_server (f, "alice", "h264", TRUE);
  Participant *b = participant_new_for_server (f, "bob", "h264", TRUE);
  Participant *all[2] = { a, b };
  gint64 cut, waited;

  participant_connect_and_wait (a);
  ROOM_WAIT_FOR (relay_count (&relay) == 1, "alice to reach Janus");
  participant_connect_and_wait (b);
  ROOM_WAIT_FOR (all_decode (all, 2), "alice and bob to decode each other");

  relay.refusing = TRUE;
  cut = g_get_monotonic_time ();
  relay_cut (&relay, 0);
  ROOM_WAIT_FOR (b->tracks_removed == 2, "bob's pads of alice to go");
  ROOM_WAIT_FOR (has_error (a, LEGBA_ROOM_ERROR_UNREACHABLE), "alice to "
      "report Janus unreachable");
  waited = (g_get_monotonic_time () - cut) / G_TIME_SPAN_MILLISECOND;
  g_test_message ("sfu-lost-report-ms %" G_GINT64_FORMAT " attempts %u",
      waited, relay.refused);
  g_assert_cmpint (waited, >=, LOST_WAIT_S * 1000);
  g_assert_cmpint (waited, <, (LOST_WAIT_S + 5) * 1000);
  /* 250 ms, doubling up to 4 s: 6 attempts within 15 s */
  g_assert_cmpuint (relay.refused, >=, 4);
  g_assert_cmpuint (relay.refused, <=, 8);
  g_assert_cmpint (legba_room_get_state (a->room), ==,
      LEGBA_ROOM_STATE_CONNECTED);
  g_assert_cmpuint (b->left, ==, 0);
  assert_no_room_errors (b);
  participant_free (b);
  participant_free (a);
}

/* The most the media may stop when Janus destroys a participant's
 * session behind its open WebSocket: the participant learns it from the
 * answer to its next keepalive. */
/* a keepalive every 25 s (docs/room-protocol.md §8) */
#define KEEPALIVE_MS 25000
#define DESTROYED_BOUND_MS (KEEPALIVE_MS + RECONNECT_BOUND_MS)

/* Janus destroys alice's session (its admin API's destroy_session, as
 * its own session timeout would), her WebSocket open: her next
 * keepalive is answered with an error, and she opens a session again
 * (assert_session_back() says the rest). */
static void
test_sfu_session_destroyed (Fixture * f, gconstpointer data)
{
  Participant *a = participant_new_for_server (f, "alice", "h264", TRUE);
  Participant *b = participant_new_for_server (f, "bob", "h264", TRUE);
  Participant *all[2] = { a, b };
  LegbaParticipant *a_sees_b, *b_sees_a;
  gint64 destroyed;

  participant_connect_and_wait (a);
  participant_connect_and_wait (b);
  ROOM_WAIT_FOR (all_decode (all, 2), "alice and bob to decode each other");
  a_sees_b = participant_find (a, b);
  b_sees_a = participant_find (b, a);

  destroyed = g_get_monotonic_time ();
  g_assert_true (legba_test_janus_destroy_session_of (&open_janus,
          legba_room_get_participant_id (a->room)));
  assert_session_back (a, b, a_sees_b, b_sees_a, destroyed,
      DESTROYED_BOUND_MS, "sfu-destroyed-gap-ms");
  participant_free (b);
  participant_free (a);
}

int
main (int argc, char **argv)
{
  int status;

  room_test_init (&argc, &argv);
  if (!legba_test_janus_start (&janus)) {
    g_printerr ("janus is not installed: skipping\n");
    return 77;
  }
  g_test_add ("/room/sfu/janus", Fixture, NULL, fixture_setup, test_sfu_room,
      fixture_teardown);
  g_test_add ("/room/sfu/viewers", Fixture, NULL, fixture_setup,
      test_sfu_viewers, fixture_teardown);
  g_test_add ("/room/sfu/refused", Fixture, NULL, fixture_setup,
      test_sfu_refused, fixture_teardown);
  g_test_add ("/room/sfu/token-renewed", Fixture, NULL, fixture_setup,
      test_sfu_token_renewed, fixture_teardown);
  g_test_add ("/room/sfu/coordinated", Fixture, NULL, coordinated_setup,
      test_sfu_coordinated, fixture_teardown);
  g_test_add ("/room/sfu/signalling-away", Fixture, NULL, coordinated_setup,
      test_sfu_signalling_away, fixture_teardown);
  g_test_add ("/room/sfu/janus-dies", Fixture, NULL, two_janus_setup,
      test_sfu_janus_dies, fixture_teardown);
  g_assert_true (legba_test_janus_start_open (&open_janus));
  g_test_add ("/room/sfu/connection-cut", Fixture, NULL, relay_setup,
      test_sfu_connection_cut, relay_teardown);
  g_test_add ("/room/sfu/connection-lost", Fixture, NULL, relay_setup,
      test_sfu_connection_lost, relay_teardown);
  g_test_add ("/room/sfu/session-destroyed", Fixture, NULL,
      coordinated_setup, test_sfu_session_destroyed, fixture_teardown);
  g_test_add ("/room/sfu/janus-hangs", Fixture, NULL, two_janus_setup,
      test_sfu_janus_hangs, fixture_teardown);
  g_test_add ("/room/sfu/janus-restarts", Fixture, NULL, solo_setup,
      test_sfu_janus_restarts, fixture_teardown);
  g_assert_true (legba_test_janus_start_open (&spare_janus));
  g_assert_true (legba_test_janus_start_open (&solo_janus));
  status = g_test_run ();
  legba_test_janus_stop (&solo_janus);
  legba_test_janus_stop (&spare_janus);
  legba_test_janus_stop (&open_janus);
  legba_test_janus_stop (&janus);
  return status;
}
