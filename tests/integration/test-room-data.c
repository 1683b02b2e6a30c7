/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Application data between LegbaRoom participants (docs/room-protocol.md §6,
 * §7) through legba-server (in-process, 127.0.0.1, port 0): order on the
 * reliable channel, topics, recipients, the lossy channel, queueing before
 * the channels open, one stalled recipient while another keeps receiving,
 * the 64 KiB limit, malformed messages, mute and the backend's events.
 */
#include "room-data-test.h"
#include <legba/common/legba-json.h>
#include <legba/room/legba-room-private.h>

#include <legba-test.h>

#define GST_USE_UNSTABLE_API
#include <gst/webrtc/webrtc.h>
#include <gst/app/app.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <sys/prctl.h>

/* ---- Order, topics, recipients ---- */

#define ORDERED 300

static void
test_order (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob"),
      *c = data_new (f, "carol");
  Data *all[] = { a, b, c };
  const char *only_bob[] = { NULL, NULL };

  connect_all (all, 3);
  only_bob[0] = id_of (b);
  for (guint i = 0; i < ORDERED; i++) {
    g_autofree char *json = g_strdup_printf ("{\"n\":%u}", i);

    send_json (a, json, i % 2 ? "odd" : NULL, LEGBA_RELIABILITY_RELIABLE, NULL);
  }
  send_json (a, "\"for bob\"", "private", LEGBA_RELIABILITY_RELIABLE, only_bob);
  send_json (a, "[\"end\"]", "end", LEGBA_RELIABILITY_RELIABLE, NULL);
  ROOM_WAIT_FOR (b->got->len == ORDERED + 2 && c->got->len == ORDERED + 1,
      "every message");
  for (guint i = 0; i < ORDERED; i++) {
    g_autofree char *json = g_strdup_printf ("{\"n\":%u}", i);

    for (guint k = 1; k < 3; k++) {
      Got *g = got (all[k], i);

      g_assert_cmpstr (g->json, ==, json);
      g_assert_cmpstr (g->topic, ==, i % 2 ? "odd" : NULL);
      g_assert_cmpstr (g->from, ==, id_of (a));
      g_assert_cmpint (g->reliability, ==, LEGBA_RELIABILITY_RELIABLE);
    }
  }
  g_assert_cmpstr (got (b, ORDERED)->json, ==, "\"for bob\"");
  g_assert_cmpstr (got (b, ORDERED)->topic, ==, "private");
  /* carol's next message after the ordered ones is the last one: the
   * private one, sent between them, never reached her */
  g_assert_cmpstr (got (c, ORDERED)->topic, ==, "end");
  g_assert_cmpstr (got (b, ORDERED + 1)->topic, ==, "end");
  g_assert_cmpuint (a->got->len, ==, 0);
  /* and the mute state each peer is told on open (§6) */
  g_assert_cmpuint (data_stat (a, "messages-sent"), ==, 2 * ORDERED + 3 + 2);
  g_assert_cmpuint (data_stat (b, "messages-received"), ==, ORDERED + 2 + 2);
  for (guint i = 0; i < 3; i++)
    assert_no_room_errors (all[i]->p);
  free_all (all, 3);
}

/* A data-received handler that leaves the room: the peer closes inside
 * the dispatch that reports its messages; the rest of that batch and
 * everything after are not reported, and nothing is used after it is
 * freed (the sanitized build checks that). */
static void
leave_on_first (LegbaRoom * room, LegbaParticipant * from, const char *topic,
    JsonNode * data, Data * d)
{
  if (d->got->len == 1)
    legba_room_disconnect (room);
}

#define LEAVE_BURST 50

static void
test_leave_in_handler (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob");
  Data *all[] = { a, b };

  connect_all (all, 2);
  g_signal_connect_after (b->p->room, "data-received",
      G_CALLBACK (leave_on_first), b);
  for (guint i = 0; i < LEAVE_BURST; i++) {
    g_autofree char *json = g_strdup_printf ("{\"n\":%u}", i);

    send_json (a, json, NULL, LEGBA_RELIABILITY_RELIABLE, NULL);
  }
  ROOM_WAIT_FOR (legba_room_get_state (b->p->room) ==
      LEGBA_ROOM_STATE_DISCONNECTED, "bob left from his handler");
  /* alice sees him go: his peer connection is closed on both sides */
  ROOM_WAIT_FOR (g_list_model_get_n_items (legba_room_get_participants
          (a->p->room)) == 0, "alice saw bob leave");
  g_assert_cmpuint (b->got->len, ==, 1);
  g_assert_cmpstr (got (b, 0)->json, ==, "{\"n\":0}");
  free_all (all, 2);
}

/* Binary messages, both ways, and the recipients check. */
static void
test_bytes (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob");
  Data *all[] = { a, b };
  const guint8 raw[] = { 0, 1, 2, 255, 0 };
  g_autoptr (GBytes) bytes = g_bytes_new (raw, sizeof raw);
  g_autoptr (GBytes) empty = g_bytes_new (NULL, 0);
  g_autoptr (GError) error = NULL;
  const char *nobody[] = { "nobody-123", NULL };
  const char *mixed[] = { NULL, "nobody-123", NULL };

  connect_all (all, 2);
  g_assert_true (legba_room_send_bytes (a->p->room, bytes,
          LEGBA_RELIABILITY_RELIABLE, NULL, &error));
  g_assert_true (legba_room_send_bytes (b->p->room, bytes,
          LEGBA_RELIABILITY_LOSSY, NULL, &error));
  g_assert_no_error (error);
  ROOM_WAIT_FOR (b->got->len == 1 && a->got->len == 1, "the bytes");
  g_assert_true (g_bytes_equal (got (b, 0)->bytes, bytes));
  g_assert_cmpstr (got (b, 0)->from, ==, id_of (a));
  g_assert_true (g_bytes_equal (got (a, 0)->bytes, bytes));
  g_assert_cmpint (got (a, 0)->reliability, ==, LEGBA_RELIABILITY_LOSSY);
  /* webrtcbin 1.22 cannot send an empty message: refused */
  g_assert_false (legba_room_send_bytes (a->p->room, empty,
          LEGBA_RELIABILITY_RELIABLE, NULL, &error));
  g_assert_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_INVALID);
  g_clear_error (&error);

  /* a recipient not in the room: named, nothing sent */
  g_assert_false (legba_room_send_bytes (a->p->room, bytes,
          LEGBA_RELIABILITY_RELIABLE, nobody, &error));
  g_assert_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_NOT_DELIVERED);
  g_assert_nonnull (strstr (error->message, "nobody-123"));
  g_clear_error (&error);
  /* one known and one unknown: the known one gets it */
  mixed[0] = id_of (b);
  g_assert_false (legba_room_send_bytes (a->p->room, bytes,
          LEGBA_RELIABILITY_RELIABLE, mixed, &error));
  g_assert_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_NOT_DELIVERED);
  g_assert_null (strstr (error->message, id_of (b)));
  g_clear_error (&error);
  ROOM_WAIT_FOR (b->got->len == 2, "the bytes for a known recipient");
  /* reserved topics are the room's */
  {
    g_autoptr (JsonNode) node = json_from_string ("1", NULL);

    g_assert_false (legba_room_send_json (a->p->room, node, "legba.mute",
            LEGBA_RELIABILITY_RELIABLE, NULL, &error));
    g_assert_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_INVALID);
  }
  assert_no_room_errors (a->p);
  assert_no_room_errors (b->p);
  free_all (all, 2);
}

/* ---- Stats without media ---- */

static gboolean
count_emission (GSignalInvocationHint * hint, guint n_values,
    const GValue * values, gpointer data)
{
  g_atomic_int_inc ((gint *) data);
  return TRUE;
}

static guint64
stats_field (Participant * p, Participant * other, const char *field)
{
  g_autoptr (GstStructure) stats =
      legba_participant_get_stats (participant_find (p, other));
  guint64 value = G_MAXUINT64;

  if (stats == NULL || !gst_structure_get_uint64 (stats, field, &value))
    return G_MAXUINT64;
  return value;
}

static guint64
room_data_field (Participant * p, const char *field)
{
  g_autoptr (GstStructure) stats = legba_room_get_data_stats (p->room);
  guint64 value = G_MAXUINT64;

  gst_structure_get_uint64 (stats, field, &value);
  return value;
}

/* A room that only exchanges data refreshes its participants' stats
 * (every whole second, by default) from its own counters, without asking
 * webrtcbin for statistics it has none of: no RTP stream flows. */
static void
test_stats_without_media (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob");
  Data *all[] = { a, b };
  g_autoptr (GstElementFactory) factory = gst_element_factory_find
      ("webrtcbin");
  g_autoptr (GstPluginFeature) loaded =
      gst_plugin_feature_load (GST_PLUGIN_FEATURE (factory));
  GType type = gst_element_factory_get_element_type (GST_ELEMENT_FACTORY
      (loaded));
  g_autoptr (GTypeClass) klass = g_type_class_ref (type);
  guint signal_id = g_signal_lookup ("get-stats", type);
  gint get_stats = 0;
  gulong hook;
  guint64 sent, received;
  g_autoptr (GError) error = NULL;

  g_assert_cmpuint (signal_id, !=, 0);
  hook = g_signal_add_emission_hook (signal_id, 0, count_emission,
      &get_stats, NULL);
  connect_all (all, 2);
  for (guint i = 0; i < 3; i++) {
    g_autoptr (JsonNode) node = json_from_string ("{\"n\":1}", NULL);

    g_assert_true (legba_room_send_json (a->p->room, node, "t",
            LEGBA_RELIABILITY_RELIABLE, NULL, &error));
    g_assert_no_error (error);
  }
  ROOM_WAIT_FOR (b->got->len == 3, "the messages");
  /* the room's own messages (its mute state) count too: the participant's
   * figures catch up with the room's totals, one peer's worth */
  sent = room_data_field (a->p, "messages-sent");
  received = room_data_field (b->p, "messages-received");
  g_assert_cmpuint (sent, >=, 3);
  g_assert_cmpuint (received, ==, sent);
  ROOM_WAIT_FOR (stats_field (b->p, a->p, "data-messages-received") ==
      received && stats_field (a->p, b->p, "data-messages-sent") == sent,
      "the stats' refresh");
  g_assert_cmpuint (stats_field (b->p, a->p, "bytes-received"), ==, 0);
  g_assert_cmpuint (stats_field (b->p, a->p, "packets-received"), ==, 0);
  g_assert_cmpuint (stats_field (b->p, a->p, "bitrate-in"), ==, 0);
  g_assert_cmpuint (stats_field (a->p, b->p, "bytes-sent"), ==, 0);
  g_assert_cmpint (g_atomic_int_get (&get_stats), ==, 0);
  g_signal_remove_emission_hook (signal_id, hook);
  assert_no_room_errors (a->p);
  assert_no_room_errors (b->p);
  free_all (all, 2);
}

/* ---- The lossy channel ---- */

static void
test_lossy (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob");
  Data *all[] = { a, b };

  connect_all (all, 2);
  for (guint i = 0; i < 50; i++) {
    g_autofree char *json = g_strdup_printf ("%u", i);

    send_json (a, json, "pos", LEGBA_RELIABILITY_LOSSY, NULL);
  }
  /* the reliable marker: the lossy ones left before it */
  send_json (a, "\"marker\"", "marker", LEGBA_RELIABILITY_RELIABLE, NULL);
  ROOM_WAIT_FOR (b->got->len > 1, "lossy messages and the marker");
  run_for (200);
  g_assert_cmpuint (b->got->len, <=, 51);
  for (guint i = 0; i < b->got->len; i++) {
    Got *g = got (b, i);

    if (g_strcmp0 (g->topic, "marker") == 0) {
      g_assert_cmpint (g->reliability, ==, LEGBA_RELIABILITY_RELIABLE);
      continue;
    }
    g_assert_cmpstr (g->topic, ==, "pos");
    g_assert_cmpint (g->reliability, ==, LEGBA_RELIABILITY_LOSSY);
  }
  g_assert_cmpuint (data_stat (a, "messages-sent") + data_stat (a,
          "lossy-dropped"), ==, 51 + 1);
  assert_no_room_errors (a->p);
  free_all (all, 2);
}

/* The lossy channel is made on demand (§6): not by the offer, but by
 * whichever side first has a lossy message; two made at once (both sides
 * sending their first lossy message together) both work. */

typedef struct
{
  gint reliable;                /* remote-made channels, by label */
  gint lossy;
} Channels;

static void
count_channel (GstElement * webrtcbin, GstWebRTCDataChannel * channel,
    Channels * seen)
{
  g_autofree char *label = NULL;

  g_object_get (channel, "label", &label, NULL);
  if (g_strcmp0 (label, "legba") == 0)
    g_atomic_int_inc (&seen->reliable);
  else if (g_strcmp0 (label, "legba-lossy") == 0)
    g_atomic_int_inc (&seen->lossy);
}

static void
count_peer_channels (GstBin * pipeline, GstElement * element, Channels * seen)
{
  g_autoptr (GstElement) webrtcbin = peer_bin_webrtcbin (element);

  if (webrtcbin == NULL)
    return;
  g_signal_connect (webrtcbin, "on-data-channel", G_CALLBACK (count_channel),
      seen);
}

static guint
count_lossy_from (Data * d, const char *from)
{
  guint n = 0;

  for (guint i = 0; i < d->got->len; i++)
    if (got (d, i)->reliability == LEGBA_RELIABILITY_LOSSY &&
        g_strcmp0 (got (d, i)->from, from) == 0)
      n++;
  return n;
}

/* a main-loop turn now and then, for a count kept by another thread */
static gboolean
wake (gpointer data)
{
  return G_SOURCE_CONTINUE;
}

static void
test_lossy_on_demand (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob");
  Data *all[] = { a, b };
  Channels at_a = { 0 }, at_b = { 0 };
  guint poll;

  g_signal_connect (a->p->pipeline, "element-added",
      G_CALLBACK (count_peer_channels), &at_a);
  g_signal_connect (b->p->pipeline, "element-added",
      G_CALLBACK (count_peer_channels), &at_b);
  /* alice is there first: bob offers */
  connect_all (all, 2);
  send_json (b, "1", "marker", LEGBA_RELIABILITY_RELIABLE, NULL);
  ROOM_WAIT_FOR (a->got->len == 1, "a reliable message");
  g_assert_cmpint (g_atomic_int_get (&at_a.reliable), ==, 1);
  g_assert_cmpint (g_atomic_int_get (&at_a.lossy), ==, 0);
  g_assert_cmpint (g_atomic_int_get (&at_b.lossy), ==, 0);

  /* both sides' first lossy messages, in the same main-loop turn */
  send_json (a, "\"a\"", "pos", LEGBA_RELIABILITY_LOSSY, NULL);
  send_json (b, "\"b\"", "pos", LEGBA_RELIABILITY_LOSSY, NULL);
  ROOM_WAIT_FOR (count_lossy_from (a, id_of (b)) == 1 &&
      count_lossy_from (b, id_of (a)) == 1, "the first lossy messages");
  /* the messages are taken where they leave SCTP (legba-room-tap.c), and
   * webrtcbin announces a remote channel from its own task: the count may
   * come after them */
  poll = g_timeout_add (20, wake, NULL);
  ROOM_WAIT_FOR (g_atomic_int_get (&at_a.lossy) +
      g_atomic_int_get (&at_b.lossy) >= 1, "a remote-made lossy channel");
  g_source_remove (poll);
  g_assert_cmpint (g_atomic_int_get (&at_a.lossy), <=, 1);
  g_assert_cmpint (g_atomic_int_get (&at_b.lossy), <=, 1);

  /* the channels stay: later lossy messages go at once, both ways */
  send_json (a, "\"a2\"", "pos", LEGBA_RELIABILITY_LOSSY, NULL);
  send_json (b, "\"b2\"", "pos", LEGBA_RELIABILITY_LOSSY, NULL);
  ROOM_WAIT_FOR (count_lossy_from (a, id_of (b)) == 2 &&
      count_lossy_from (b, id_of (a)) == 2, "the second lossy messages");
  g_assert_cmpint (g_atomic_int_get (&at_a.lossy), <=, 1);
  g_assert_cmpint (g_atomic_int_get (&at_b.lossy), <=, 1);
  g_assert_cmpuint (data_stat (a, "lossy-dropped"), ==, 0);
  g_assert_cmpuint (data_stat (b, "lossy-dropped"), ==, 0);
  assert_no_room_errors (a->p);
  assert_no_room_errors (b->p);
  free_all (all, 2);
}

/* ---- One stalled recipient ---- */


static guint
count_reliable (Data * d)
{
  guint n = 0;

  for (guint i = 0; i < d->got->len; i++)
    n += got (d, i)->reliability == LEGBA_RELIABILITY_RELIABLE;
  return n;
}

static void
test_stalled (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob"),
      *c = data_new (f, "carol");
  Data *all[] = { a, b, c };
  gint stalled = 1;
  g_autofree char *filler = g_malloc (CHUNK + 1);
  g_autoptr (GError) error = NULL;
  guint accepted = 0, lossy_for_carol = 0;
  const char *to_carol[] = { NULL, NULL };

  connect_all (all, 3);
  to_carol[0] = id_of (c);
  memset (filler, 'x', CHUNK);
  filler[CHUNK] = '\0';
  stall_input (c->p, &stalled);
  /* each message waits for bob to have it: bob keeps receiving while
   * carol's queue fills, until carol cannot take more */
  for (guint i = 0; error == NULL; i++) {
    g_autoptr (JsonNode) node = json_node_init_string (json_node_alloc (),
        filler);
    guint before = b->got->len;

    if (i == 2000)
      g_error ("carol took 2000 messages of %d bytes while stalled", CHUNK);
    if (legba_room_send_json (a->p->room, node, "bulk",
            LEGBA_RELIABILITY_RELIABLE, NULL, &error))
      accepted++;
    ROOM_WAIT_FOR (b->got->len == before + 1, "bob to receive while carol "
        "is stalled");
  }
  g_assert_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_NOT_DELIVERED);
  g_assert_nonnull (strstr (error->message, id_of (c)));
  g_assert_null (strstr (error->message, id_of (b)));
  g_test_message ("carol stalled after %u messages of %d bytes", accepted,
      CHUNK);
  g_assert_cmpuint (accepted, >, 0);
  g_assert_cmpuint (data_stat (a, "not-delivered"), ==, 1);
  g_assert_cmpuint (a->ready, ==, 0);
  /* the lossy channel drops instead (latest value wins), and counts */
  while (data_stat (a, "lossy-dropped") == 0) {
    g_autoptr (JsonNode) node = json_node_init_string (json_node_alloc (),
        filler);

    g_assert_cmpuint (lossy_for_carol, <, 1000);
    g_assert_true (legba_room_send_json (a->p->room, node, "pos",
            LEGBA_RELIABILITY_LOSSY, to_carol, NULL));
    lossy_for_carol++;
  }
  g_assert_cmpuint (b->got->len, ==, accepted + 1);

  /* carol's network is back: her queue drains, in order */
  g_atomic_int_set (&stalled, 0);
  ROOM_WAIT_FOR (a->ready == 1, "ready-to-send for carol");
  ROOM_WAIT_FOR (count_reliable (c) == accepted, "carol to get every "
      "message accepted for her");
  for (guint i = 0; i < c->got->len; i++)
    if (got (c, i)->reliability == LEGBA_RELIABILITY_RELIABLE)
      g_assert_cmpstr (got (c, i)->topic, ==, "bulk");
  g_assert_cmpuint (count_reliable (c), ==, accepted);
  g_clear_error (&error);
  send_json (a, "\"again\"", "again", LEGBA_RELIABILITY_RELIABLE, to_carol);
  ROOM_WAIT_FOR (c->got->len > 0 &&
      g_strcmp0 (got (c, c->got->len - 1)->topic, "again") == 0,
      "carol to take messages again");
  for (guint i = 0; i < 3; i++)
    assert_no_room_errors (all[i]->p);
  free_all (all, 3);
}

/* ---- Queued before the channels open ---- */

static void
send_early (LegbaRoom * room, LegbaParticipant * who, Data * a)
{
  const char *to[] = { legba_participant_get_id (who), NULL };

  for (guint i = 0; i < 5; i++) {
    g_autofree char *json = g_strdup_printf ("%u", i);

    send_json (a, json, "early", LEGBA_RELIABILITY_RELIABLE, to);
  }
  g_assert_cmpuint (data_stat (a, "messages-queued"), ==, 5);
  g_assert_cmpuint (data_stat (a, "messages-sent"), ==, 0);
}

static void
test_queued (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob");

  participant_connect_and_wait (a->p);
  g_signal_connect (a->p->room, "participant-joined",
      G_CALLBACK (send_early), a);
  participant_connect_and_wait (b->p);
  ROOM_WAIT_FOR (b->got->len == 5, "the messages queued before the "
      "channels opened");
  for (guint i = 0; i < 5; i++) {
    g_autofree char *json = g_strdup_printf ("%u", i);

    g_assert_cmpstr (got (b, i)->json, ==, json);
  }
  g_assert_cmpuint (data_stat (a, "messages-queued"), ==, 0);
  assert_no_room_errors (a->p);
  assert_no_room_errors (b->p);
  data_free (b);
  data_free (a);
}

/* ---- A busy context ---- */

typedef struct
{
  gint held;                    /* (atomic) the context was held */
  guint reconnecting;           /* participants seen reconnecting or failed */
} Busy;

/* Longer than a peer connection may go without a step. */
static gboolean
hold_past_deadline (gpointer data)
{
  g_usleep ((LEGBA_ROOM_PEER_CONNECT_TIMEOUT_MS + 2000) *
      G_TIME_SPAN_MILLISECOND);
  return G_SOURCE_REMOVE;
}

/* On webrtcbin's thread, after the room's own handler queued the step
 * for the room's context: that context is held, once, before it runs it. */
static void
on_connection_state (GstElement * webrtcbin, GParamSpec * pspec, Busy * busy)
{
  GstWebRTCPeerConnectionState state;

  g_object_get (webrtcbin, "connection-state", &state, NULL);
  if (state == GST_WEBRTC_PEER_CONNECTION_STATE_CONNECTED &&
      g_atomic_int_compare_and_exchange (&busy->held, 0, 1)) {
    GSource *hold = g_idle_source_new ();

    g_source_set_priority (hold, G_PRIORITY_HIGH);
    g_source_set_callback (hold, hold_past_deadline, NULL, NULL);
    g_source_attach (hold, NULL);
    g_source_unref (hold);
  }
}

static void
watch_peer_bin (GstBin * pipeline, GstElement * element, Busy * busy)
{
  g_autoptr (GstElement) webrtcbin = peer_bin_webrtcbin (element);

  if (webrtcbin == NULL)
    return;
  g_signal_connect (webrtcbin, "notify::connection-state",
      G_CALLBACK (on_connection_state), busy);
}

static void
on_participant_state (LegbaParticipant * p, GParamSpec * pspec, Busy * busy)
{
  LegbaParticipantState state;

  g_object_get (p, "state", &state, NULL);
  if (state == LEGBA_PARTICIPANT_STATE_RECONNECTING ||
      state == LEGBA_PARTICIPANT_STATE_FAILED)
    busy->reconnecting++;
}

static void
watch_participant (LegbaRoom * room, LegbaParticipant * p, Busy * busy)
{
  g_signal_connect (p, "notify::state", G_CALLBACK (on_participant_state),
      busy);
}

/* The room's context is held (a handler, or a machine too busy to run
 * it) for longer than the connection deadline, just as webrtcbin reports
 * the connection up: the steps it queued meanwhile count, the connection
 * is not given up on and made again, and the messages queued for the
 * newcomer arrive once each. */
static void
test_busy_context (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob");
  Busy busy = { 0, };

  participant_connect_and_wait (a->p);
  g_signal_connect (a->p->room, "participant-joined",
      G_CALLBACK (send_early), a);
  g_signal_connect (a->p->room, "participant-joined",
      G_CALLBACK (watch_participant), &busy);
  g_signal_connect (b->p->room, "participant-joined",
      G_CALLBACK (watch_participant), &busy);
  g_signal_connect (b->p->pipeline, "element-added",
      G_CALLBACK (watch_peer_bin), &busy);
  participant_connect_and_wait (b->p);
  ROOM_WAIT_FOR (participant_connected_to (a->p, b->p) &&
      participant_connected_to (b->p, a->p) && b->got->len == 5,
      "the connection and the messages queued before it");
  g_assert_cmpint (g_atomic_int_get (&busy.held), ==, 1);
  g_assert_cmpuint (busy.reconnecting, ==, 0);
  for (guint i = 0; i < 5; i++) {
    g_autofree char *json = g_strdup_printf ("%u", i);

    g_assert_cmpstr (got (b, i)->json, ==, json);
  }
  g_assert_cmpuint (participant_peer_bins (a->p), ==, 1);
  g_assert_cmpuint (participant_peer_bins (b->p), ==, 1);
  g_signal_handlers_disconnect_by_data (b->p->pipeline, &busy);
  assert_no_room_errors (a->p);
  assert_no_room_errors (b->p);
  data_free (b);
  data_free (a);
}

/* ---- A connection that fails with messages waiting ---- */

static void
count_arrival (LegbaRoom * room, LegbaParticipant * from, const char *topic,
    JsonNode * data, gint * arrived)
{
  g_atomic_int_inc (arrived);
}

/* Bob's connection with alice fails while five messages of hers have
 * arrived (webrtcbin handed them over) and wait for the room's context,
 * which the test does not run meanwhile: they are reported all the same,
 * once each and in order, and the connection is made again. */
static void
test_failed_with_inbox (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob");
  Data *all[] = { a, b };
  gint64 deadline = g_get_monotonic_time () +
      ROOM_WAIT_MS * G_TIME_SPAN_MILLISECOND;
  gint arrived = 0;
  LegbaParticipant *alice;

  connect_all (all, 2);
  g_signal_connect (b->p->room, "sync-data-received",
      G_CALLBACK (count_arrival), &arrived);
  legba_room_enable_sync_data_emission (b->p->room);
  for (guint i = 0; i < 5; i++) {
    g_autofree char *json = g_strdup_printf ("%u", i);

    send_json (a, json, NULL, LEGBA_RELIABILITY_RELIABLE, NULL);
  }
  while (g_atomic_int_get (&arrived) < 5 && g_get_monotonic_time () < deadline)
    g_usleep (10 * G_TIME_SPAN_MILLISECOND);
  g_assert_cmpint (g_atomic_int_get (&arrived), ==, 5);
  g_assert_cmpuint (b->got->len, ==, 0);
  alice = participant_find (b->p, a->p);
  alice->peer->events->failed (alice->peer, "failed by the test");

  ROOM_WAIT_FOR (b->got->len == 5 && participant_connected_to (a->p, b->p) &&
      participant_connected_to (b->p, a->p), "alice's messages and the "
      "connection made again");
  for (guint i = 0; i < 5; i++) {
    g_autofree char *json = g_strdup_printf ("%u", i);

    g_assert_cmpstr (got (b, i)->from, ==, id_of (a));
    g_assert_cmpstr (got (b, i)->json, ==, json);
  }
  /* through the new connection, after them */
  send_json (a, "5", NULL, LEGBA_RELIABILITY_RELIABLE, NULL);
  ROOM_WAIT_FOR (b->got->len == 6, "a message on the new connection");
  g_assert_cmpstr (got (b, 5)->json, ==, "5");
  legba_room_disable_sync_data_emission (b->p->room);
  free_all (all, 2);
}

/* ---- Size ---- */

/* {"topic":"big","data":"xxx...x"}: 25 bytes around the string */
static JsonNode *
envelope_of_size (gsize size)
{
  g_autofree char *s = g_malloc (size - 25 + 1);

  memset (s, 'x', size - 25);
  s[size - 25] = '\0';
  return json_node_init_string (json_node_alloc (), s);
}

static void
test_size (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob");
  Data *all[] = { a, b };
  g_autoptr (JsonNode) fits = envelope_of_size (65536);
  g_autoptr (JsonNode) over = envelope_of_size (65537);
  g_autofree guint8 *raw = g_malloc0 (65537);
  g_autoptr (GBytes) max = g_bytes_new (raw, 65536);
  g_autoptr (GBytes) big = g_bytes_new (raw, 65537);
  g_autoptr (GError) error = NULL;

  connect_all (all, 2);
  g_assert_cmpuint (legba_room_get_max_message_size (a->p->room, id_of (b)),
      ==, 65536);
  g_assert_false (legba_room_send_json (a->p->room, over, "big",
          LEGBA_RELIABILITY_RELIABLE, NULL, &error));
  g_assert_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_TOO_LARGE);
  g_assert_nonnull (strstr (error->message, id_of (b)));
  g_clear_error (&error);
  g_assert_false (legba_room_send_bytes (a->p->room, big,
          LEGBA_RELIABILITY_RELIABLE, NULL, &error));
  g_assert_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_TOO_LARGE);
  g_clear_error (&error);
  g_assert_true (legba_room_send_json (a->p->room, fits, "big",
          LEGBA_RELIABILITY_RELIABLE, NULL, &error));
  g_assert_true (legba_room_send_bytes (a->p->room, max,
          LEGBA_RELIABILITY_RELIABLE, NULL, &error));
  g_assert_no_error (error);
  ROOM_WAIT_FOR (b->got->len == 2, "the largest messages");
  g_assert_cmpuint (strlen (got (b, 0)->json), ==, 65536 - 25 + 2);
  g_assert_cmpuint (g_bytes_get_size (got (b, 1)->bytes), ==, 65536);
  g_assert_cmpuint (data_stat (a, "messages-sent"), ==, 2 + 1);
  assert_no_room_errors (a->p);
  assert_no_room_errors (b->p);
  free_all (all, 2);
}

/* ---- Malformed messages ---- */

static void
on_raw_channel (GstElement * webrtcbin, GstWebRTCDataChannel * channel,
    GstWebRTCDataChannel ** out)
{
  g_autofree char *label = NULL;

  g_object_get (channel, "label", &label, NULL);
  if (g_strcmp0 (label, "legba") == 0 && *out == NULL)
    *out = g_object_ref (channel);
}

static void
on_peer_bin (GstBin * pipeline, GstElement * element,
    GstWebRTCDataChannel ** out)
{
  g_autoptr (GstElement) webrtcbin = peer_bin_webrtcbin (element);

  if (webrtcbin == NULL)
    return;
  g_signal_connect (webrtcbin, "on-data-channel",
      G_CALLBACK (on_raw_channel), out);
}

/* longer than a room copies in place */
#define LONG_TOPIC "a-topic-of-more-than-sixty-four-bytes-" \
  "written-without-any-escape-in-it"

static void
test_malformed (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob");
  Data *all[] = { a, b };
  GstWebRTCDataChannel *raw = NULL;
  const char *bad[] = {
    "not json", "[1,2]", "{\"topic\":5,\"data\":1}", "{\"topic\":\"t\"}",
    "{\"topic\":\"legba.mute\",\"data\":{\"audio\":1}}", "\"just a string\"",
    /* not UTF-8: a Latin-1 byte, an overlong '/', a UTF-16 surrogate */
    "{\"topic\":\"t\xe9\",\"data\":1}",
    "{\"topic\":\"t\",\"data\":\"\xc0\xaf\"}",
    "{\"topic\":\"t\",\"data\":\"\xed\xa0\x80\"}",
    /* text json-glib alone would take: single quotes, a comment, an
     * unpaired surrogate escape, \u0000, nesting over the bound */
    "{'topic':'t','data':1}", "{\"data\":1 /* c */}",
    "{\"topic\":\"t\",\"data\":\"\\ud800\"}",
    "{\"topic\":\"t\\u0000\",\"data\":1}",
    /* 2^64, which json-glib would hand on wrapped round */
    "{\"topic\":\"t\",\"data\":18446744073709551616}", NULL,
  };
  /* envelopes written by hand, well formed: each arrives as it says */
  const struct
  {
    const char *text, *topic, *json;
  } good[] = {
    {"{\"topic\":\"caf\\u00e9 \\\"au lait\\\"\",\"data\":[1]}",
        "caf\xc3\xa9 \"au lait\"", "[1]"},
    {"{\"topic\":\"" LONG_TOPIC "\",\"data\":true}", LONG_TOPIC, "true"},
    {" {\"data\" : 1, \"topic\" : null, \"data\" : {\"topic\":\"x\"}} ",
        NULL, "{\"topic\":\"x\"}"},
    {"{\"d\\u0061ta\":\"\\ud83d\\ude00\",\"topic\":\"\"}", "",
        "\"\xf0\x9f\x98\x80\""},
    {"{\"data\":[-9223372036854775808,9223372036854775807]}", NULL,
        "[-9223372036854775808,9223372036854775807]"},
  };
  GString *deep = g_string_new ("{\"topic\":\"t\",\"data\":");
  GError *e;

  /* alice is there first: bob offers, alice's webrtcbin announces the
   * channels, and the test writes into alice's end as is */
  g_signal_connect (a->p->pipeline, "element-added",
      G_CALLBACK (on_peer_bin), &raw);
  /* the last bad one: data nested one level deeper than the bound */
  for (guint i = 0; i < LEGBA_JSON_MAX_DEPTH; i++)
    g_string_append_c (deep, '[');
  for (guint i = 0; i < LEGBA_JSON_MAX_DEPTH; i++)
    g_string_append_c (deep, ']');
  g_string_append_c (deep, '}');
  bad[G_N_ELEMENTS (bad) - 1] = deep->str;
  connect_all (all, 2);
  ROOM_WAIT_FOR (raw != NULL, "alice's end of the channel");
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr (GError) error = NULL;

    g_assert_true (gst_webrtc_data_channel_send_string_full (raw, bad[i],
            &error));
  }
  for (guint i = 0; i < G_N_ELEMENTS (good); i++) {
    g_autoptr (GError) error = NULL;

    g_assert_true (gst_webrtc_data_channel_send_string_full (raw,
            good[i].text, &error));
  }
  send_json (a, "42", "ok", LEGBA_RELIABILITY_RELIABLE, NULL);
  /* one channel, in order: "ok" comes last */
  ROOM_WAIT_FOR (b->got->len > 0 &&
      g_strcmp0 (got (b, b->got->len - 1)->topic, "ok") == 0,
      "the good messages after the bad ones");
  g_assert_cmpuint (b->got->len, ==, G_N_ELEMENTS (good) + 1);
  for (guint i = 0; i < G_N_ELEMENTS (good); i++) {
    g_assert_cmpstr (got (b, i)->topic, ==, good[i].topic);
    g_assert_cmpstr (got (b, i)->json, ==, good[i].json);
  }
  g_assert_cmpuint (b->p->errors->len, ==, G_N_ELEMENTS (bad));
  for (guint i = 0; i < b->p->errors->len; i++) {
    e = b->p->errors->pdata[i];
    g_assert_error (e, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_MALFORMED);
    g_assert_nonnull (strstr (e->message, id_of (a)));
  }
  g_assert_cmpuint (data_stat (b, "malformed"), ==, G_N_ELEMENTS (bad));
  g_assert_true (participant_connected_to (b->p, a->p));
  g_ptr_array_set_size (b->p->errors, 0);
  g_object_unref (raw);
  g_string_free (deep, TRUE);
  assert_no_room_errors (a->p);
  free_all (all, 2);
}

/* ---- Mute (§6) and the backend's events (§7) ---- */

static void
test_mute (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob"), *c;
  Data *all[] = { a, b, NULL };
  gboolean audio, video;

  connect_all (all, 2);
  /* the state on open: nothing muted */
  ROOM_WAIT_FOR (b->mutes == 1, "alice's mute state on open");
  g_assert_false (b->audio_muted || b->video_muted);
  legba_room_set_muted (a->p->room, TRUE, FALSE);
  ROOM_WAIT_FOR (b->mutes == 2, "alice's mute");
  g_assert_cmpstr (b->mute_from, ==, id_of (a));
  g_assert_true (b->audio_muted);
  g_assert_false (b->video_muted);
  g_assert_true (legba_room_get_participant_muted (b->p->room, id_of (a),
          &audio, &video));
  g_assert_true (audio && !video);
  /* a newcomer learns it once its channel opens */
  c = data_new (f, "carol");
  all[2] = c;
  participant_connect_and_wait (c->p);
  ROOM_WAIT_FOR (legba_room_get_participant_muted (c->p->room, id_of (a),
          &audio, &video), "carol to learn alice's mute state");
  g_assert_true (audio && !video);
  /* not data for the application */
  g_assert_cmpuint (b->got->len + c->got->len, ==, 0);
  for (guint i = 0; i < 3; i++)
    assert_no_room_errors (all[i]->p);
  free_all (all, 3);
}

static void
test_server_event (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob");
  Data *all[] = { a, b };

  connect_all (all, 2);
  fixture_publish_event (f, "score", "{\"home\":2}");
  fixture_publish_event (f, "notice", "plain text");
  ROOM_WAIT_FOR (a->got->len == 2 && b->got->len == 2, "both events");
  for (guint i = 0; i < 2; i++) {
    g_assert_cmpstr (got (all[i], 0)->from, ==, LEGBA_ROOM_SERVER_PARTICIPANT);
    g_assert_cmpstr (got (all[i], 0)->topic, ==, "score");
    g_assert_cmpstr (got (all[i], 0)->json, ==, "{\"home\":2}");
    g_assert_cmpstr (got (all[i], 1)->topic, ==, "notice");
    g_assert_cmpstr (got (all[i], 1)->json, ==, "\"plain text\"");
    assert_no_room_errors (all[i]->p);
  }
  free_all (all, 2);
}

/* ---- Messages webrtcbin reports ---- */

/* A stream the room cannot tell at its first message is left to webrtcbin
 * (legba-room-tap.c): its messages then come from the channel's
 * on-message-string and on-message-data, on webrtcbin's thread, and the
 * room reports them as any other, in order with what it took itself. Here
 * webrtcbin's emissions are made on alice's end of the channel by hand. */
static void
test_left_to_webrtcbin (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob");
  Data *all[] = { a, b };
  GstWebRTCDataChannel *raw = NULL;
  g_autoptr (GBytes) bytes = g_bytes_new_static ("\0\1\2", 3);
  g_autoptr (GBytes) empty = g_bytes_new (NULL, 0);

  g_signal_connect (a->p->pipeline, "element-added",
      G_CALLBACK (on_peer_bin), &raw);
  connect_all (all, 2);
  ROOM_WAIT_FOR (raw != NULL && a->mutes == 1,
      "alice's end of the channel and bob's mute state");

  send_json (b, "1", "taken", LEGBA_RELIABILITY_RELIABLE, NULL);
  ROOM_WAIT_FOR (a->got->len == 1, "a message the room took itself");
  g_signal_emit_by_name (raw, "on-message-string",
      "{\"topic\":\"left\",\"data\":{\"n\":2}}");
  g_signal_emit_by_name (raw, "on-message-data", bytes);
  g_signal_emit_by_name (raw, "on-message-data", NULL);
  g_signal_emit_by_name (raw, "on-message-string", "not json");
  send_json (b, "3", "taken", LEGBA_RELIABILITY_RELIABLE, NULL);
  ROOM_WAIT_FOR (a->got->len == 5 && a->p->errors->len == 1,
      "the messages webrtcbin reported, then one more");

  for (guint i = 0; i < a->got->len; i++)
    g_assert_cmpstr (got (a, i)->from, ==, id_of (b));
  g_assert_cmpstr (got (a, 1)->topic, ==, "left");
  g_assert_cmpstr (got (a, 1)->json, ==, "{\"n\":2}");
  g_assert_cmpint (got (a, 1)->reliability, ==, LEGBA_RELIABILITY_RELIABLE);
  g_assert_true (g_bytes_equal (got (a, 2)->bytes, bytes));
  g_assert_true (g_bytes_equal (got (a, 3)->bytes, empty));
  g_assert_cmpstr (got (a, 4)->json, ==, "3");
  g_assert_error ((GError *) a->p->errors->pdata[0], LEGBA_ROOM_ERROR,
      LEGBA_ROOM_ERROR_MALFORMED);
  g_ptr_array_set_size (a->p->errors, 0);
  /* bob's mute state, two messages taken, four left, one of them
   * malformed */
  g_assert_cmpuint (data_stat (a, "messages-received"), ==, 1 + 2 + 4);
  g_object_unref (raw);
  assert_no_room_errors (b->p);
  free_all (all, 2);
}

/* ---- The sync- signals ---- */

/* what the sync- handlers saw, from whatever thread */
typedef struct
{
  GMutex lock;
  GPtrArray *got;               /* Got */
  GThread *main_thread;
  guint on_main;                /* emissions on the test's thread */
  guint on_stream;              /* on an SCTP stream's thread (sctpdec's) */
  LegbaRoom *room;
  gint handed_over;             /* (atomic) data-received and
                                 * bytes-received emissions on room */
} Sync;

/* an emission hook: the room reported a message on its context */
static gboolean
count_handed_over (GSignalInvocationHint * hint, guint n_values,
    const GValue * values, gpointer data)
{
  Sync *s = data;

  if (g_value_get_object (&values[0]) == (GObject *) s->room)
    g_atomic_int_inc (&s->handed_over);
  return TRUE;
}

static void
sync_add (Sync * s, LegbaRoom * room, LegbaParticipant * from, Got * g)
{
  char thread[16] = "";

  g->from = g_strdup (legba_participant_get_id (from));
  g->reliability = legba_room_get_received_reliability (room);
  /* GStreamer names a pad's task thread after its element and pad */
  prctl (PR_GET_NAME, thread);
  g_mutex_lock (&s->lock);
  g_ptr_array_add (s->got, g);
  if (g_thread_self () == s->main_thread)
    s->on_main++;
  if (g_str_has_prefix (thread, "sctpdec"))
    s->on_stream++;
  g_mutex_unlock (&s->lock);
}

static void
on_sync_data (LegbaRoom * room, LegbaParticipant * from, const char *topic,
    JsonNode * node, Sync * s)
{
  Got *g = g_new0 (Got, 1);

  g->topic = g_strdup (topic);
  g->json = json_to_string (node, FALSE);
  sync_add (s, room, from, g);
}

static void
on_sync_bytes (LegbaRoom * room, LegbaParticipant * from, GBytes * bytes,
    Sync * s)
{
  Got *g = g_new0 (Got, 1);

  g->bytes = g_bytes_ref (bytes);
  sync_add (s, room, from, g);
}

static guint
sync_count (Sync * s)
{
  return locked_len (&s->lock, s->got);
}

#define SYNC_RELIABLE 50

/* The sync- signals come once enabled. Bob then handles messages on the
 * threads they arrive on alone: each message reaches him there once, in
 * order on its channel, with its reliability; mute and malformed messages
 * still reach his room's context; the counts count everything once, also
 * once he handles messages in both places; and his room goes while
 * messages still arrive. */
static void
test_sync (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob");
  Data *all[] = { a, b };
  Sync s = {.main_thread = g_thread_self (),.room = b->p->room };
  guint signal_ids[2] = {
    g_signal_lookup ("data-received", LEGBA_TYPE_ROOM),
    g_signal_lookup ("bytes-received", LEGBA_TYPE_ROOM),
  };
  gulong hooks[2];
  GstWebRTCDataChannel *raw = NULL;
  g_autoptr (GBytes) bytes = g_bytes_new_static ("\0\1\2", 3);
  g_autoptr (GError) error = NULL;
  guint64 received;
  guint n;

  g_mutex_init (&s.lock);
  s.got = g_ptr_array_new_with_free_func (got_free);
  g_signal_connect (b->p->room, "sync-data-received",
      G_CALLBACK (on_sync_data), &s);
  g_signal_connect (b->p->room, "sync-bytes-received",
      G_CALLBACK (on_sync_bytes), &s);
  g_signal_connect (a->p->pipeline, "element-added",
      G_CALLBACK (on_peer_bin), &raw);
  connect_all (all, 2);
  ROOM_WAIT_FOR (raw != NULL && b->mutes == 1,
      "alice's end of the channel and her mute state");

  /* not emitted until enabled */
  send_json (a, "0", "early", LEGBA_RELIABILITY_RELIABLE, NULL);
  ROOM_WAIT_FOR (b->got->len == 1, "the early message on bob's context");
  g_assert_cmpuint (sync_count (&s), ==, 0);
  g_ptr_array_set_size (b->got, 0);
  legba_room_enable_sync_data_emission (b->p->room);
  g_signal_handlers_disconnect_by_func (b->p->room, on_data, b);
  g_signal_handlers_disconnect_by_func (b->p->room, on_bytes, b);
  for (guint i = 0; i < G_N_ELEMENTS (hooks); i++)
    hooks[i] = g_signal_add_emission_hook (signal_ids[i], 0,
        count_handed_over, &s, NULL);

  for (guint i = 0; i < SYNC_RELIABLE; i++) {
    g_autofree char *json = g_strdup_printf ("{\"n\":%u}", i);

    send_json (a, json, "seq", LEGBA_RELIABILITY_RELIABLE, NULL);
  }
  g_assert_true (legba_room_send_bytes (a->p->room, bytes,
          LEGBA_RELIABILITY_RELIABLE, NULL, &error));
  g_assert_no_error (error);
  legba_room_set_muted (a->p->room, TRUE, FALSE);
  g_assert_true (gst_webrtc_data_channel_send_string_full (raw, "not json",
          &error));
  g_assert_no_error (error);
  send_json (a, "\"last\"", "end", LEGBA_RELIABILITY_RELIABLE, NULL);
  send_json (a, "1", "lossy", LEGBA_RELIABILITY_LOSSY, NULL);
  fixture_publish_event (f, "score", "{\"home\":2}");
  ROOM_WAIT_FOR (sync_count (&s) == SYNC_RELIABLE + 4 && b->mutes == 2 &&
      b->p->errors->len == 1, "every message at bob");

  /* on the threads they arrived on, reliable ones in order */
  g_mutex_lock (&s.lock);
  for (guint i = 0, seq = 0; i < s.got->len; i++) {
    Got *g = s.got->pdata[i];

    if (g_strcmp0 (g->from, LEGBA_ROOM_SERVER_PARTICIPANT) == 0) {
      g_assert_cmpstr (g->topic, ==, "score");
      g_assert_cmpint (g->reliability, ==, LEGBA_RELIABILITY_RELIABLE);
      continue;
    }
    g_assert_cmpstr (g->from, ==, id_of (a));
    if (g->bytes != NULL) {
      g_assert_true (g_bytes_equal (g->bytes, bytes));
      g_assert_cmpuint (seq, ==, SYNC_RELIABLE);
    } else if (g_strcmp0 (g->topic, "seq") == 0) {
      g_autofree char *json = g_strdup_printf ("{\"n\":%u}", seq++);

      g_assert_cmpstr (g->json, ==, json);
      g_assert_cmpint (g->reliability, ==, LEGBA_RELIABILITY_RELIABLE);
    } else if (g_strcmp0 (g->topic, "end") == 0) {
      g_assert_cmpuint (seq, ==, SYNC_RELIABLE);
      g_assert_cmpint (g->reliability, ==, LEGBA_RELIABILITY_RELIABLE);
    } else {
      g_assert_cmpstr (g->topic, ==, "lossy");
      g_assert_cmpint (g->reliability, ==, LEGBA_RELIABILITY_LOSSY);
    }
  }
  /* the backend's event alone came on the room's context; alice's
   * messages on the threads of their SCTP streams, where the room takes
   * them before webrtcbin would hand them to its own thread */
  g_assert_cmpuint (s.on_main, ==, 1);
  g_assert_cmpuint (s.on_stream, ==, SYNC_RELIABLE + 3);
  g_mutex_unlock (&s.lock);
  /* nothing handled on bob's context: no message went there to be
   * reported, but the backend's event, which arrives there */
  g_assert_cmpint (g_atomic_int_get (&s.handed_over), ==, 1);
  for (guint i = 0; i < G_N_ELEMENTS (hooks); i++)
    g_signal_remove_emission_hook (signal_ids[i], hooks[i]);
  g_assert_true (b->audio_muted);
  g_assert_error ((GError *) b->p->errors->pdata[0], LEGBA_ROOM_ERROR,
      LEGBA_ROOM_ERROR_MALFORMED);
  g_ptr_array_set_size (b->p->errors, 0);
  /* every message of alice's counted once: the early one, the sync ones,
   * two mute states, the malformed one */
  received = 1 + SYNC_RELIABLE + 3 + 2 + 1;
  g_assert_cmpuint (data_stat (b, "messages-received"), ==, received);
  g_assert_cmpuint (data_stat (b, "malformed"), ==, 1);

  /* handled in both places: reported in both, counted once */
  g_signal_connect (b->p->room, "data-received", G_CALLBACK (on_data), b);
  send_json (a, "2", "both", LEGBA_RELIABILITY_RELIABLE, NULL);
  ROOM_WAIT_FOR (b->got->len == 1, "the message on bob's context");
  g_assert_cmpuint (sync_count (&s), ==, SYNC_RELIABLE + 5);
  g_assert_cmpstr (got (b, 0)->topic, ==, "both");
  g_assert_cmpuint (data_stat (b, "messages-received"), ==, received + 1);

  /* bob's room goes while alice's messages arrive */
  n = sync_count (&s);
  for (guint i = 0; i < 200; i++)
    send_json (a, "3", "late", LEGBA_RELIABILITY_RELIABLE, NULL);
  ROOM_WAIT_FOR (sync_count (&s) > n, "the first late message");
  data_free (b);
  g_assert_cmpuint (sync_count (&s), <=, n + 200);
  g_object_unref (raw);
  assert_no_room_errors (a->p);
  data_free (a);
  g_ptr_array_unref (s.got);
  g_mutex_clear (&s.lock);
}

/* ---- Sending from any thread ---- */

#define FROM_THREAD 200
#define FROM_MAIN 200

typedef struct
{
  GMutex lock;
  GPtrArray *got;               /* Got: what bob took, on his threads */
  GThread *main_thread;
  guint on_main;
  guint echo_failures;
  LegbaRoom *alice;
  const char *bob;
} Echo;

/* Bob, on the thread a message arrives on: keeps it and sends it back
 * from there. */
static void
echo_back (LegbaRoom * room, LegbaParticipant * from, const char *topic,
    JsonNode * node, Echo * e)
{
  const char *to[] = { legba_participant_get_id (from), NULL };
  g_autoptr (GError) error = NULL;
  Got *g = g_new0 (Got, 1);

  g->from = g_strdup (to[0]);
  g->topic = g_strdup (topic);
  g->json = json_to_string (node, FALSE);
  g->reliability = legba_room_get_received_reliability (room);
  if (!legba_room_send_json (room, node, topic, g->reliability, to, &error))
    g_atomic_int_inc (&e->echo_failures);
  g_mutex_lock (&e->lock);
  g_ptr_array_add (e->got, g);
  if (g_thread_self () == e->main_thread)
    e->on_main++;
  g_mutex_unlock (&e->lock);
  g_main_context_wakeup (NULL);
}

/* Alice, on a thread of the test's own: a reliable series, one lossy
 * message before her lossy channel exists, and the refusals. */
static gpointer
send_from_thread (gpointer data)
{
  Echo *e = data;
  const char *nobody[] = { "nobody-here", NULL };
  const char *bob[] = { e->bob, NULL };
  g_autoptr (JsonNode) big = json_node_new (JSON_NODE_VALUE);
  g_autofree char *filler = g_strnfill (LEGBA_ROOM_DEFAULT_MAX_MESSAGE_SIZE,
      'x');
  g_autoptr (GError) error = NULL;

  for (guint i = 0; i < FROM_THREAD; i++) {
    g_autoptr (JsonNode) node = json_node_new (JSON_NODE_VALUE);

    json_node_set_int (node, i);
    g_assert_true (legba_room_send_json (e->alice, node, "thread",
            LEGBA_RELIABILITY_RELIABLE, bob, &error));
    g_assert_no_error (error);
  }
  {
    g_autoptr (JsonNode) node = json_node_new (JSON_NODE_VALUE);

    json_node_set_string (node, "lossy");
    g_assert_true (legba_room_send_json (e->alice, node, "lossy",
            LEGBA_RELIABILITY_LOSSY, NULL, &error));
    g_assert_no_error (error);
  }
  json_node_set_string (big, "for nobody");
  g_assert_false (legba_room_send_json (e->alice, big, "x",
          LEGBA_RELIABILITY_RELIABLE, nobody, &error));
  g_assert_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_NOT_DELIVERED);
  g_assert_nonnull (strstr (error->message, "nobody-here (not in the room)"));
  g_clear_error (&error);
  json_node_set_string (big, filler);
  g_assert_false (legba_room_send_json (e->alice, big, "x",
          LEGBA_RELIABILITY_RELIABLE, NULL, &error));
  g_assert_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_TOO_LARGE);
  g_main_context_wakeup (NULL);
  return NULL;
}

static guint
count_topic (GPtrArray * got, const char *topic, LegbaReliability rel)
{
  guint n = 0, next = 0;

  /* in the order sent, once each */
  for (guint i = 0; i < got->len; i++) {
    Got *g = got->pdata[i];

    if (g_strcmp0 (g->topic, topic) != 0)
      continue;
    g_assert_cmpint (g->reliability, ==, rel);
    if (rel == LEGBA_RELIABILITY_RELIABLE) {
      g_autofree char *json = g_strdup_printf ("%u", next++);

      g_assert_cmpstr (g->json, ==, json);
    }
    n++;
  }
  return n;
}

/* Alice sends from a thread of her own while her room's context sends
 * too; bob sends each message back from the thread it arrived on. Every
 * message arrives once, in the order its thread sent it, the lossy one
 * first asks for the lossy channel on alice's context; the refusals come
 * back to the sending thread; the counts count each message once. */
static void
test_any_thread (Fixture * f, gconstpointer unused)
{
  Data *a = data_new (f, "alice"), *b = data_new (f, "bob");
  Data *all[] = { a, b };
  Echo e = {.main_thread = g_thread_self (),.alice = a->p->room };
  GThread *thread;
  guint taken;

  g_mutex_init (&e.lock);
  e.got = g_ptr_array_new_with_free_func (got_free);
  connect_all (all, 2);
  ROOM_WAIT_FOR (a->mutes == 1 && b->mutes == 1, "the mute states");
  e.bob = id_of (b);
  g_signal_handlers_disconnect_by_func (b->p->room, on_data, b);
  g_signal_connect (b->p->room, "sync-data-received", G_CALLBACK (echo_back),
      &e);
  legba_room_enable_sync_data_emission (b->p->room);

  thread = g_thread_new ("sender", send_from_thread, &e);
  for (guint i = 0; i < FROM_MAIN; i++) {
    g_autofree char *json = g_strdup_printf ("%u", i);

    send_json (a, json, "main", LEGBA_RELIABILITY_RELIABLE, NULL);
    g_main_context_iteration (NULL, FALSE);
  }
  g_thread_join (thread);
  ROOM_WAIT_FOR (locked_len (&e.lock, e.got) == FROM_THREAD + FROM_MAIN + 1 &&
      a->got->len == FROM_THREAD + FROM_MAIN + 1, "every message and its echo");

  g_mutex_lock (&e.lock);
  g_assert_cmpuint (count_topic (e.got, "thread",
          LEGBA_RELIABILITY_RELIABLE), ==, FROM_THREAD);
  g_assert_cmpuint (count_topic (e.got, "main", LEGBA_RELIABILITY_RELIABLE),
      ==, FROM_MAIN);
  g_assert_cmpuint (count_topic (e.got, "lossy", LEGBA_RELIABILITY_LOSSY),
      ==, 1);
  g_assert_cmpuint (e.on_main, ==, 0);
  /* the echoes, sent from bob's threads: each reliable one in the order
   * bob took it */
  taken = e.got->len;
  for (guint i = 0, k = 0; i < a->got->len; i++) {
    Got *echo = got (a, i);

    g_assert_cmpstr (echo->from, ==, e.bob);
    if (echo->reliability == LEGBA_RELIABILITY_LOSSY) {
      g_assert_cmpstr (echo->topic, ==, "lossy");
      continue;
    }
    while (k < e.got->len &&
        ((Got *) e.got->pdata[k])->reliability == LEGBA_RELIABILITY_LOSSY)
      k++;
    g_assert_cmpuint (k, <, e.got->len);
    g_assert_cmpstr (echo->topic, ==, ((Got *) e.got->pdata[k])->topic);
    g_assert_cmpstr (echo->json, ==, ((Got *) e.got->pdata[k])->json);
    k++;
  }
  g_mutex_unlock (&e.lock);
  g_assert_cmpint (g_atomic_int_get (&e.echo_failures), ==, 0);
  /* and the mute state each side is told on open */
  g_assert_cmpuint (data_stat (a, "messages-sent"), ==, taken + 1);
  g_assert_cmpuint (data_stat (b, "messages-sent"), ==, taken + 1);
  g_assert_cmpuint (data_stat (b, "messages-received"), ==, taken + 1);
  g_assert_cmpuint (data_stat (a, "not-delivered"), ==, 0);
  assert_no_room_errors (a->p);
  assert_no_room_errors (b->p);
  legba_room_disable_sync_data_emission (b->p->room);
  free_all (all, 2);
  g_ptr_array_unref (e.got);
  g_mutex_clear (&e.lock);
}

int
main (int argc, char **argv)
{
  room_test_init (&argc, &argv);

#define ADD_DATA(path, func) \
  g_test_add ("/room/data/" path, Fixture, NULL, fixture_setup, func, \
      fixture_teardown)
  ADD_DATA ("order-topics-recipients", test_order);
  ADD_DATA ("leave-in-handler", test_leave_in_handler);
  ADD_DATA ("bytes", test_bytes);
  ADD_DATA ("stats-without-media", test_stats_without_media);
  ADD_DATA ("lossy", test_lossy);
  ADD_DATA ("lossy-on-demand", test_lossy_on_demand);
  ADD_DATA ("stalled-recipient", test_stalled);
  ADD_DATA ("queued-before-open", test_queued);
  ADD_DATA ("busy-context", test_busy_context);
  ADD_DATA ("failed-with-inbox", test_failed_with_inbox);
  ADD_DATA ("size", test_size);
  ADD_DATA ("malformed", test_malformed);
  ADD_DATA ("mute", test_mute);
  ADD_DATA ("server-event", test_server_event);
  ADD_DATA ("left-to-webrtcbin", test_left_to_webrtcbin);
  ADD_DATA ("sync", test_sync);
  ADD_DATA ("any-thread", test_any_thread);
  return g_test_run ();
}
