/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * auto rooms (docs/server.md, "SFU rooms"; docs/rooms.md): a legba-server
 * whose rooms are `auto:2` keeps two LegbaRoom participants in a mesh and
 * moves the room to a Janus of its own when a third joins. The three end
 * up exchanging video and reliable data through Janus; the reliable
 * messages the first two send each other all along, the move included,
 * all arrive; each had the other's probes (`legba.sfu-probe`) through
 * Janus before it said `sfu-ready`, neither waited out its move, and no
 * application handler ever saw a message on a reserved topic. With a
 * Janus that cannot be reached, the room stays a mesh.
 * Across two legba-servers sharing a redis-server of the test's own
 * (`auto:2`, alice on one, bob on the other, carol joining on alice's),
 * the same: the server carol joins through makes the one VideoRoom, the
 * other follows with bob; a member joining later through a third server
 * is sent to that VideoRoom. A server whose Redis is gone keeps its auto
 * rooms a mesh.
 *
 * The longest time each participant went without a video frame of each
 * other one across the move is printed as a TAP comment and, with
 * LEGBA_AUTO_GAP_JSON=FILE, appended to FILE as one JSON line
 * (bench/RESULTS.md §11).
 *
 * Without janus installed, the test exits 77 (skipped); without
 * redis-server, /room/sfu-auto/cluster is skipped.
 */
#include "room-test.h"
#include "legba-test.h"
#include "legba-test-janus.h"

#include <glib/gstdio.h>
#include <stdio.h>

/* The reliable messages a participant sends, one every SEND_MS */
#define SEND_MS 20
#define MAX_MESSAGES 20000

static LegbaTestJanus janus;
/* The VideoRooms Janus had before the test (set by its setup) */
static guint rooms_before;
/* What the rooms logged of their moves (GST_INFO of legbaroom), by
 * kind; any thread */
static GMutex moves_lock;
static guint probes_received;   /* "P's messages come through the SFU" */
static guint moves_expired;     /* "the move ... is not done after" */
/* The servers' sfu-* log lines, in order */
static GPtrArray *server_log;
static char *redis_server_path;

static GLogWriterOutput
log_writer (GLogLevelFlags level, const GLogField * fields, gsize n_fields,
    gpointer user_data)
{
  for (gsize i = 0; i < n_fields; i++)
    if (g_str_equal (fields[i].key, "MESSAGE") && fields[i].length < 0 &&
        g_str_has_prefix (fields[i].value, "sfu-"))
      g_ptr_array_add (server_log, g_strdup (fields[i].value));
  return g_log_writer_default (level, fields, n_fields, user_data);
}

/* The first line of the server's log that starts with prefix, or NULL. */
static const char *
logged (const char *prefix)
{
  for (guint i = 0; i < server_log->len; i++)
    if (g_str_has_prefix (server_log->pdata[i], prefix))
      return server_log->pdata[i];
  return NULL;
}

/* How many lines of the servers' log start with prefix. */
static guint
logged_count (const char *prefix)
{
  guint n = 0;

  for (guint i = 0; i < server_log->len; i++)
    n += g_str_has_prefix (server_log->pdata[i], prefix);
  return n;
}

static void
log_move (GstDebugCategory * category, GstDebugLevel level, const char *file,
    const char *function, gint line, GObject * object,
    GstDebugMessage * message, gpointer user_data)
{
  const char *text;

  if (level > GST_LEVEL_INFO ||
      g_strcmp0 (gst_debug_category_get_name (category), "legbaroom") != 0)
    return;
  text = gst_debug_message_get (message);
  g_mutex_lock (&moves_lock);
  if (strstr (text, "'s messages come through the SFU") != NULL)
    probes_received++;
  if (strstr (text, "the move to the SFU is not done after") != NULL)
    moves_expired++;
  g_mutex_unlock (&moves_lock);
}

/* Messages on a reserved topic that reached the application */
static gint reserved_seen;

static void
on_any_data (LegbaRoom * room, LegbaParticipant * sender, const char *topic,
    JsonNode * data, gpointer unused)
{
  if (topic != NULL && g_str_has_prefix (topic, "legba."))
    g_atomic_int_inc (&reserved_seen);
}

static void
watch_reserved (Participant * p)
{
  g_signal_connect (p->room, "data-received", G_CALLBACK (on_any_data), NULL);
  g_signal_connect (p->room, "sync-data-received", G_CALLBACK (on_any_data),
      NULL);
  legba_room_enable_sync_data_emission (p->room);
}

typedef struct
{
  Participant *p;
  guint sent;                   /* messages 0 to sent - 1 went out */
  guint failed;                 /* sends refused */
} Sender;

/* What one participant received of each other's sequence. */
typedef struct
{
  GHashTable *seen;             /* "sender:n" */
  guint duplicates;
} SeqReceived;

static gboolean
send_next (gpointer data)
{
  Sender *s = data;
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_VALUE);
  g_autoptr (GError) error = NULL;

  g_assert_cmpuint (s->sent, <, MAX_MESSAGES);
  json_node_set_int (node, s->sent);
  if (legba_room_send_json (s->p->room, node, "seq",
          LEGBA_RELIABILITY_RELIABLE, NULL, &error)) {
    s->sent++;
  } else {
    g_test_message ("%s: send %u: %s", s->p->identity, s->sent, error->message);
    s->failed++;
  }
  return G_SOURCE_CONTINUE;
}

static void
on_data (LegbaRoom * room, LegbaParticipant * sender, const char *topic,
    JsonNode * data, SeqReceived * r)
{
  char *key;

  if (g_strcmp0 (topic, "seq") != 0)
    return;
  key = g_strdup_printf ("%s:%" G_GINT64_FORMAT,
      legba_participant_get_id (sender), json_node_get_int (data));
  if (!g_hash_table_add (r->seen, key))
    r->duplicates++;
}

/* Whether r has every message of s. */
static gboolean
has_all (SeqReceived * r, Sender * s)
{
  const char *id = legba_room_get_participant_id (s->p->room);

  for (guint n = 0; n < s->sent; n++) {
    g_autofree char *key = g_strdup_printf ("%s:%u", id, n);

    if (!g_hash_table_contains (r->seen, key))
      return FALSE;
  }
  return TRUE;
}

static guint
missing (SeqReceived * r, Sender * s)
{
  const char *id = legba_room_get_participant_id (s->p->room);
  guint n_missing = 0;

  for (guint n = 0; n < s->sent; n++) {
    g_autofree char *key = g_strdup_printf ("%s:%u", id, n);

    n_missing += !g_hash_table_contains (r->seen, key);
  }
  return n_missing;
}

static void
on_metrics (GObject * source, GAsyncResult * result, gpointer user_data)
{
  g_autoptr (GError) error = NULL;
  GBytes *body = soup_session_send_and_read_finish (SOUP_SESSION (source),
      result, &error);

  g_assert_no_error (error);
  *(GBytes **) user_data = body;
}

/* Whether the server's /metrics has line. */
static gboolean
metrics_have (Fixture * f, const char *line)
{
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autofree char *url = g_strdup_printf ("%s/metrics", f->url);
  g_autoptr (SoupMessage) msg = soup_message_new ("GET", url);
  g_autoptr (GBytes) body = NULL;
  g_autofree char *text = NULL;
  g_autofree char *wanted = g_strdup_printf ("\n%s\n", line);

  soup_session_send_and_read_async (session, msg, G_PRIORITY_DEFAULT, NULL,
      on_metrics, &body);
  ROOM_WAIT_FOR (body != NULL, "the server's /metrics");
  text = g_strndup (g_bytes_get_data (body, NULL), g_bytes_get_size (body));
  return strstr (text, wanted) != NULL;
}

static guint
webrtcbins (Participant * p)
{
  g_autoptr (GPtrArray) all = elements_by_factory (p->pipeline, "webrtcbin");

  return all->len;
}

static gboolean
all_decode (Participant ** all, guint n, guint64 frames)
{
  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < n; j++)
      if (i != j && !participant_decodes (all[i], all[j], frames))
        return FALSE;
  return TRUE;
}

/* Frames of each other decoded by each, as the SFU brings them: through a
 * publisher connection and one per other participant. */
static gboolean
all_through_sfu (Participant ** all, guint n, guint64 * frames)
{
  for (guint i = 0; i < n; i++)
    if (webrtcbins (all[i]) != n)
      return FALSE;
  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < n; j++)
      if (i != j && participant_frames (all[i], all[j],
              LEGBA_TRACK_KIND_VIDEO) < frames[i * n + j] + 30)
        return FALSE;
  return TRUE;
}

static void
server_setup (Fixture * f, const char *http_url, const char *ws_url)
{
  const char *urls[] = { http_url, NULL };
  const char *ws_urls[] = { ws_url, NULL };

  legba_test_tolerate_rtpsession_race ();
  g_ptr_array_set_size (server_log, 0);
  f->server = legba_server_new ();
  g_object_set (f->server, "sfu-janus-urls", urls, "sfu-janus-ws-urls",
      ws_urls, "sfu-admin-key", LEGBA_TEST_JANUS_ADMIN_KEY, "sfu-topology",
      "auto:2", NULL);
  fixture_listen (f, 0);
}

static void
auto_setup (Fixture * f, gconstpointer data)
{
  g_autofree char *http = g_strdup_printf ("http://127.0.0.1:%u/janus",
      janus.http_port);

  server_setup (f, http, janus.ws_url);
  rooms_before = legba_test_janus_count_rooms (&janus);
}

static void
write_gaps (const char *json)
{
  const char *path = g_getenv ("LEGBA_AUTO_GAP_JSON");
  FILE *out;

  if (path == NULL)
    return;
  out = fopen (path, "a");
  g_assert_nonnull (out);
  fprintf (out, "%s\n", json);
  fclose (out);
}

/* What a test checks at the end, the three still in the VideoRoom. */
typedef void (*InSfuCheck) (gpointer user_data);

/* alice (through fa) and bob (through fb) in a mesh, sending each other a
 * message every SEND_MS; carol joins through fc: the room moves to Janus;
 * the three receive each other from it, and alice and bob have each
 * other's every message. */
static void
run_switch (Fixture * fa, Fixture * fb, Fixture * fc, const char *name,
    InSfuCheck check, gpointer check_data)
{
  Participant *a = participant_new_for_server (fa, "alice", "h264", TRUE);
  Participant *b = participant_new_for_server (fb, "bob", "h264", TRUE);
  Participant *c;
  Participant *all[3] = { a, b, NULL };
  Sender sa = { a }, sb = { b };
  SeqReceived ra = { g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
        NULL)
  };
  SeqReceived rb = { g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
        NULL)
  };
  guint64 frames[9] = { 0, };
  g_autoptr (GString) gaps = g_string_new (NULL);
  guint source_a, source_b;
  gint64 switch_started;

  g_atomic_int_set (&reserved_seen, 0);
  g_mutex_lock (&moves_lock);
  probes_received = moves_expired = 0;
  g_mutex_unlock (&moves_lock);
  watch_reserved (a);
  watch_reserved (b);
  participant_connect_and_wait (a);
  participant_connect_and_wait (b);
  ROOM_WAIT_FOR (all_decode (all, 2, 30), "alice and bob to decode each "
      "other in the mesh");
  /* a mesh: one peer connection each, no Janus room */
  g_assert_cmpuint (webrtcbins (a), ==, 1);
  g_assert_cmpuint (webrtcbins (b), ==, 1);
  g_signal_connect (a->room, "data-received", G_CALLBACK (on_data), &ra);
  g_signal_connect (b->room, "data-received", G_CALLBACK (on_data), &rb);
  source_a = g_timeout_add (SEND_MS, send_next, &sa);
  source_b = g_timeout_add (SEND_MS, send_next, &sb);
  ROOM_WAIT_FOR (sa.sent >= 10 && sb.sent >= 10 && has_all (&rb, &sa) &&
      has_all (&ra, &sb), "the mesh to carry the first messages");

  /* the third: the server moves the room to Janus */
  participant_video_gap (a, b, TRUE);
  participant_video_gap (b, a, TRUE);
  g_string_printf (gaps, "{\"test\":\"%s\",\"gaps_ms\":{", name);
  switch_started = g_get_monotonic_time ();
  c = participant_new_for_server (fc, "carol", "h264", TRUE);
  watch_reserved (c);
  all[2] = c;
  participant_connect_and_wait (c);
  for (guint i = 0; i < 3; i++)
    for (guint j = 0; j < 3; j++)
      if (all[j] != NULL && all[i] != NULL)
        frames[i * 3 + j] = participant_frames (all[i], all[j],
            LEGBA_TRACK_KIND_VIDEO);
  ROOM_WAIT_FOR (all_through_sfu (all, 3, frames), "the three to receive "
      "each other's video through Janus, without mesh connections");
  g_test_message ("the room moved to Janus in %" G_GINT64_FORMAT " ms",
      (g_get_monotonic_time () - switch_started) / 1000);
  g_string_append_printf (gaps, "\"alice<-bob\":%.1f,\"bob<-alice\":%.1f",
      participant_video_gap (a, b, FALSE) / 1000.0,
      participant_video_gap (b, a, FALSE) / 1000.0);
  g_string_append_printf (gaps, "},\"switch_ms\":%.1f}",
      (g_get_monotonic_time () - switch_started) / 1000.0);
  g_test_message ("%s", gaps->str);
  write_gaps (gaps->str);

  /* a few more messages through Janus, then every one is checked */
  {
    guint until_a = sa.sent + 10, until_b = sb.sent + 10;

    ROOM_WAIT_FOR (sa.sent >= until_a && sb.sent >= until_b,
        "ten more messages each");
  }
  g_source_remove (source_a);
  g_source_remove (source_b);
  g_assert_cmpuint (sa.failed, ==, 0);
  g_assert_cmpuint (sb.failed, ==, 0);
  {
    gboolean expired;
    GSource *deadline = deadline_new (10000, &expired);

    while (!(has_all (&rb, &sa) && has_all (&ra, &sb)) && !expired)
      g_main_context_iteration (NULL, TRUE);
    deadline_free (deadline);
  }
  g_test_message ("alice sent %u, bob missed %u; bob sent %u, alice missed "
      "%u; duplicates %u and %u", sa.sent, missing (&rb, &sa), sb.sent,
      missing (&ra, &sb), rb.duplicates, ra.duplicates);
  g_assert_cmpuint (missing (&rb, &sa), ==, 0);
  g_assert_cmpuint (missing (&ra, &sb), ==, 0);
  g_assert_cmpuint (ra.duplicates, ==, 0);
  g_assert_cmpuint (rb.duplicates, ==, 0);
  /* the participants are those of the mesh */
  g_assert_cmpuint (a->joined, ==, 2);
  g_assert_cmpuint (b->joined, ==, 2);
  g_assert_cmpuint (a->left, ==, 0);

  /* and carol's data reaches both through Janus too */
  {
    SeqReceived rc = { g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
          NULL)
    };
    Sender sc = { c };
    guint source_c;

    g_signal_connect (a->room, "data-received", G_CALLBACK (on_data), &rc);
    source_c = g_timeout_add (SEND_MS, send_next, &sc);
    ROOM_WAIT_FOR (sc.sent >= 5, "carol to send");
    g_source_remove (source_c);
    ROOM_WAIT_FOR (has_all (&rc, &sc), "alice to receive carol's messages");
    g_signal_handlers_disconnect_by_data (a->room, &rc);
    g_hash_table_unref (rc.seen);
  }
  assert_no_room_errors (a);
  assert_no_room_errors (b);
  assert_no_room_errors (c);
  /* alice had bob's probe through Janus and bob alice's, and neither
   * waited out its move; no probe reached the application */
  g_mutex_lock (&moves_lock);
  g_assert_cmpuint (probes_received, ==, 2);
  g_assert_cmpuint (moves_expired, ==, 0);
  g_mutex_unlock (&moves_lock);
  g_assert_cmpint (g_atomic_int_get (&reserved_seen), ==, 0);
  /* the three still in the VideoRoom */
  check (check_data);
  g_signal_handlers_disconnect_by_data (a->room, &ra);
  g_signal_handlers_disconnect_by_data (b->room, &rb);
  participant_free (c);
  participant_free (b);
  participant_free (a);
  g_hash_table_unref (ra.seen);
  g_hash_table_unref (rb.seen);
  /* its members gone, the server destroys the VideoRoom: the next test
   * finds Janus as this one did */
  ROOM_WAIT_FOR (legba_test_janus_count_rooms (&janus) == rooms_before,
      "the VideoRoom to be destroyed once its members left");
}

static void
check_switch (gpointer data)
{
  Fixture *f = data;

  g_assert_cmpstr (logged ("sfu-auto-switch"), ==, "sfu-auto-switch "
      "channel=presence-legba.test-room members=3 max=2");
  g_assert_true (metrics_have (f, "legba_sfu_auto_moves_total 1"));
}

static void
test_auto_switch (Fixture * f, gconstpointer data)
{
  run_switch (f, f, f, "sfu-auto-switch", check_switch, f);
}

/* ---- Two servers sharing a Redis ---- */

typedef struct
{
  LegbaTestProcess process;
  char *dir;
  char *socket;
  char *url;
} Redis;

static Redis *redis;
/* The second and third servers of /room/sfu-auto/cluster (the
 * fixture's is the first) */
static Fixture other;
static Fixture third;

static void
redis_start (void)
{
  g_autoptr (GError) error = NULL;
  const char *argv[] = { redis_server_path, "--port", "0", "--unixsocket",
    NULL, "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
    "--dir", NULL, NULL
  };

  redis = g_new0 (Redis, 1);
  redis->dir = g_dir_make_tmp ("legba-sfu-auto-XXXXXX", &error);
  g_assert_no_error (error);
  redis->socket = g_build_filename (redis->dir, "redis.sock", NULL);
  redis->url = g_strconcat ("unix://", redis->socket, NULL);
  argv[4] = redis->socket;
  argv[12] = redis->dir;
  legba_test_process_start (&redis->process, argv,
      "ready to accept connections", 20);
}

static void
redis_stop (void)
{
  if (redis == NULL)
    return;
  legba_test_process_clear (&redis->process);
  g_unlink (redis->socket);
  g_rmdir (redis->dir);
  g_free (redis->dir);
  g_free (redis->socket);
  g_free (redis->url);
  g_clear_pointer (&redis, g_free);
}

/* A server of the cluster: auto:2 rooms on the test's Janus, placement and
 * presence shared through the test's Redis. */
static void
cluster_server_setup (Fixture * f, const char *instance_id)
{
  g_autofree char *http = g_strdup_printf ("http://127.0.0.1:%u/janus",
      janus.http_port);
  const char *urls[] = { http, NULL };
  const char *ws_urls[] = { janus.ws_url, NULL };

  f->server = legba_server_new ();
  g_object_set (f->server, "sfu-janus-urls", urls, "sfu-janus-ws-urls",
      ws_urls, "sfu-admin-key", LEGBA_TEST_JANUS_ADMIN_KEY, "sfu-topology",
      "auto:2", "redis-url", redis->url, "instance-id", instance_id, NULL);
  fixture_listen (f, 0);
}

static void
cluster_setup (Fixture * f, gconstpointer data)
{
  legba_test_tolerate_rtpsession_race ();
  g_ptr_array_set_size (server_log, 0);
  if (redis_server_path == NULL)
    return;
  redis_start ();
  cluster_server_setup (f, "sfu-auto-a");
  cluster_server_setup (&other, "sfu-auto-b");
  cluster_server_setup (&third, "sfu-auto-c");
  rooms_before = legba_test_janus_count_rooms (&janus);
}

static void
cluster_teardown (Fixture * f, gconstpointer data)
{
  fixture_teardown (&third, NULL);
  memset (&third, 0, sizeof third);
  fixture_teardown (&other, NULL);
  memset (&other, 0, sizeof other);
  fixture_teardown (f, data);
  redis_stop ();
}

/* The "legba:topology" event p got, or NULL. */
static const char *
topology_event (Peer * p)
{
  for (guint i = 0; i < p->events->len; i++)
    if (g_str_has_prefix (p->events->pdata[i], "legba:topology "))
      return p->events->pdata[i];
  return NULL;
}

/* The three in the VideoRoom: alice's server (carol's too) moved the
 * room, once; bob's followed it; Janus has that one room; a member
 * joining later through the third server, which had no member of the
 * room, is sent to it. */
static void
check_cluster (gpointer data)
{
  Fixture *f = data;
  const char *created = logged ("sfu-room-created ");
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  JsonObject *sfu;
  Peer *dave;
  guint64 room;

  g_assert_cmpstr (logged ("sfu-auto-switch"), ==, "sfu-auto-switch "
      "channel=presence-legba.test-room members=3 max=2");
  g_assert_cmpuint (logged_count ("sfu-auto-switch"), ==, 1);
  g_assert_cmpuint (logged_count ("sfu-room-created"), ==, 1);
  g_assert_cmpuint (logged_count ("sfu-auto-followed "
          "channel=presence-legba.test-room"), ==, 1);
  g_assert_true (metrics_have (f, "legba_sfu_auto_moves_total 1"));
  g_assert_true (metrics_have (&other, "legba_sfu_auto_moves_total 0"));
  g_assert_cmpuint (legba_test_janus_count_rooms (&janus), ==,
      rooms_before + 1);

  g_assert_nonnull (created);
  g_assert_nonnull (strstr (created, " room="));
  room = g_ascii_strtoull (strstr (created, " room=") + 6, NULL, 10);
  dave = peer_new (&third, "dave");
  peer_join_and_wait (dave);
  WAIT_FOR (topology_event (dave) != NULL, "dave's legba:topology");
  g_assert_true (json_parser_load_from_data (parser,
          topology_event (dave) + strlen ("legba:topology "), -1, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object
          (json_parser_get_root (parser)), "topology"), ==, "sfu");
  sfu = json_object_get_object_member (json_node_get_object
      (json_parser_get_root (parser)), "sfu");
  g_assert_cmpuint (json_object_get_int_member (sfu, "room"), ==, room);
  g_assert_cmpstr (json_object_get_string_member (sfu, "url"), ==,
      janus.ws_url);
  g_assert_cmpuint (logged_count ("sfu-room-created"), ==, 1);
  g_assert_cmpuint (legba_test_janus_count_rooms (&janus), ==,
      rooms_before + 1);
  g_assert_true (metrics_have (&third, "legba_sfu_auto_moves_total 0"));
  peer_free (dave);
}

static void
test_auto_cluster (Fixture * f, gconstpointer data)
{
  if (redis_server_path == NULL) {
    g_test_skip ("redis-server is not installed");
    return;
  }
  /* bob's presence reaches alice's server with the mesh: the third
   * member that carol makes counts him */
  run_switch (f, &other, f, "sfu-auto-cluster", check_cluster, f);
}

/* The server's Janus is a port nothing listens on. */
static void
down_setup (Fixture * f, gconstpointer data)
{
  g_autoptr (GSocket) socket = g_socket_new (G_SOCKET_FAMILY_IPV4,
      G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
  g_autoptr (GInetAddress) lo =
      g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) any = g_inet_socket_address_new (lo, 0);
  g_autoptr (GSocketAddress) bound = NULL;
  g_autofree char *http = NULL;
  g_autofree char *ws = NULL;
  guint port;

  g_assert_true (g_socket_bind (socket, any, FALSE, NULL));
  bound = g_socket_get_local_address (socket, NULL);
  port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
  http = g_strdup_printf ("http://127.0.0.1:%u/janus", port);
  ws = g_strdup_printf ("ws://127.0.0.1:%u/", port);
  server_setup (f, http, ws);
  /* bound, never listening, until the test ends */
  g_object_set_data_full (G_OBJECT (f->server), "closed-port",
      g_steal_pointer (&socket), g_object_unref);
}

/* Janus down when the third joins: the three meet in the mesh. */
static void
test_auto_janus_down (Fixture * f, gconstpointer data)
{
  Participant *a = participant_new_for_server (f, "alice", "h264", TRUE);
  Participant *b = participant_new_for_server (f, "bob", "h264", TRUE);
  Participant *c = participant_new_for_server (f, "carol", "h264", TRUE);
  Participant *all[3] = { a, b, c };

  participant_connect_and_wait (a);
  participant_connect_and_wait (b);
  participant_connect_and_wait (c);
  ROOM_WAIT_FOR (all_decode (all, 3, 30), "the three to decode each other "
      "in the mesh");
  /* the server says why */
  g_assert_nonnull (logged ("sfu-auto-switch"));
  g_assert_nonnull (logged ("sfu-auto-stays-mesh "
          "channel=presence-legba.test-room error=\"Janus at http://127.0.0.1:"));
  g_assert_true (metrics_have (f, "legba_sfu_auto_stays_mesh_total"
          "{reason=\"sfu-unavailable\"} 1"));
  g_assert_true (metrics_have (f, "legba_sfu_auto_moves_total 0"));
  /* a peer connection to each other one */
  for (guint i = 0; i < 3; i++) {
    g_assert_cmpuint (webrtcbins (all[i]), ==, 2);
    g_assert_cmpint (legba_room_get_state (all[i]->room), ==,
        LEGBA_ROOM_STATE_CONNECTED);
    assert_no_room_errors (all[i]);
  }
  participant_free (c);
  participant_free (b);
  participant_free (a);
}

/* A server of a cluster whose Redis is not there (a socket path nothing
 * listens on): auto:1 rooms. */
static void
redis_down_setup (Fixture * f, gconstpointer data)
{
  g_autofree char *http = g_strdup_printf ("http://127.0.0.1:%u/janus",
      janus.http_port);
  const char *urls[] = { http, NULL };
  const char *ws_urls[] = { janus.ws_url, NULL };
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("legba-sfu-auto-XXXXXX", &error);
  g_autofree char *url = NULL;

  g_assert_no_error (error);
  url = g_strdup_printf ("unix://%s/redis.sock", dir);
  g_rmdir (dir);
  legba_test_tolerate_rtpsession_race ();
  g_ptr_array_set_size (server_log, 0);
  rooms_before = legba_test_janus_count_rooms (&janus);
  f->server = legba_server_new ();
  g_object_set (f->server, "sfu-janus-urls", urls, "sfu-janus-ws-urls",
      ws_urls, "sfu-admin-key", LEGBA_TEST_JANUS_ADMIN_KEY, "sfu-topology",
      "auto:1", "redis-url", url, "instance-id", "sfu-auto-alone", NULL);
  fixture_listen (f, 0);
}

/* Its Redis gone, the server cannot read whether an auto room moved: the
 * members join its mesh, the one past its size too, told no topology,
 * and the server says why. */
static void
test_auto_redis_down (Fixture * f, gconstpointer data)
{
  Peer *a = peer_new (f, "alice");
  Peer *b = peer_new (f, "bob");

  peer_join_and_wait (a);
  peer_join_and_wait (b);
  WAIT_FOR (peer_knows (a, b) && peer_knows (b, a), "alice and bob to "
      "see each other");
  WAIT_FOR (logged ("sfu-auto-stays-mesh") != NULL, "the server to say "
      "why the room stays a mesh");
  g_assert_cmpstr (logged ("sfu-auto-stays-mesh"), ==, "sfu-auto-stays-mesh "
      "channel=presence-legba.test-room error=\"the Redis of SFU room "
      "placement does not answer\"");
  g_assert_cmpuint (logged_count ("sfu-auto-switch"), ==, 1);
  g_assert_cmpuint (logged_count ("sfu-room-created"), ==, 0);
  g_assert_true (metrics_have (f, "legba_sfu_auto_stays_mesh_total"
          "{reason=\"sfu-unavailable\"} 1"));
  g_assert_true (metrics_have (f, "legba_sfu_auto_moves_total 0"));
  g_assert_cmpuint (legba_test_janus_count_rooms (&janus), ==, rooms_before);
  for (guint i = 0; i < a->events->len; i++)
    g_assert_false (g_str_has_prefix (a->events->pdata[i], "legba:"));
  for (guint i = 0; i < b->events->len; i++)
    g_assert_false (g_str_has_prefix (b->events->pdata[i], "legba:"));
  g_assert_cmpuint (a->errors->len, ==, 0);
  g_assert_cmpuint (b->errors->len, ==, 0);
  peer_free (b);
  peer_free (a);
}

int
main (int argc, char **argv)
{
  int status;

  room_test_init (&argc, &argv);
  /* the rooms' INFO lines of their moves, to log_move() (meson's test
   * environment has GST_DEBUG legba*:4) */
  if (g_getenv ("GST_DEBUG") == NULL)
    gst_debug_set_threshold_for_name ("legbaroom", GST_LEVEL_INFO);
  gst_debug_add_log_function (log_move, NULL, NULL);
  server_log = g_ptr_array_new_with_free_func (g_free);
  g_log_set_writer_func (log_writer, NULL, NULL);
  if (!legba_test_janus_start_open (&janus)) {
    g_printerr ("janus is not installed: skipping\n");
    return 77;
  }
  g_test_add ("/room/sfu-auto/switch", Fixture, NULL, auto_setup,
      test_auto_switch, fixture_teardown);
  g_test_add ("/room/sfu-auto/janus-down", Fixture, NULL, down_setup,
      test_auto_janus_down, fixture_teardown);
  redis_server_path = g_find_program_in_path ("redis-server");
  g_test_add ("/room/sfu-auto/cluster", Fixture, NULL, cluster_setup,
      test_auto_cluster, cluster_teardown);
  g_test_add ("/room/sfu-auto/redis-down", Fixture, NULL, redis_down_setup,
      test_auto_redis_down, fixture_teardown);
  status = g_test_run ();
  legba_test_janus_stop (&janus);
  g_ptr_array_unref (server_log);
  g_free (redis_server_path);
  return status;
}
