/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The benchmarks' Legba peer: a LegbaServer embedded in this process on
 * 127.0.0.1 and pairs of LegbaRooms (each with its own LegbaSignalClient
 * and bin; one pipeline per pair, as bench/peers/webrtcbin-peer.c puts
 * its two webrtcbins in one) that meet in a room of their own. Same modes and
 * JSON as bench/peers/webrtcbin-peer.c, where Legba has them:
 *
 *   legba-peer setup [--iterations N] [--in-process]
 *   legba-peer pairs [--count N] [--seconds S] [--no-teardown]
 *                    [--in-process]
 *   legba-peer bulk  [--bytes B] [--size S]
 *   legba-peer rtt   [--count N] [--rate R] [--size S] [--sync-data]
 *   legba-peer call  [--frames N] [--width W --height H] [--bitrate KBPS]
 *                    [--sync] [--latency MS] [--recalculate-latency]
 *   legba-peer first-frame [--iterations N] [--width W --height H]
 *                    [--bitrate KBPS]
 *   legba-peer mesh  --server-url URL --identity ID [--expect N]
 *                    [--width W --height H] [--bitrate KBPS] [--loss P]
 *   legba-peer viewers --server-url URL --room ROOM --count N
 *                    [--identity PREFIX] [--first F] [--batch B]
 *                    [--max-participants M]
 *
 * --server-url ws://HOST:PORT: a legba-server of its own process (app
 * key bench-key, secret bench-secret) instead of the embedded one.
 *
 * setup and pairs --in-process: the rooms meet through an in-process
 * signaller (tests/integration/test-hub.c: joins and signals are idle
 * callbacks of this process's main loop) instead of a signalling server,
 * with host candidates on 127.0.0.1 as a loopback server gives them: a
 * pair then holds no WebSocket, as plain webrtcbin's pairs hand their
 * descriptions across in process. Beside
 * each pair's time, setup prints when the rooms had joined and when
 * the pair's descriptions were applied and its webrtcbins connected
 * (bench/peers/phases.h), in ms from the connect calls.
 *
 * bulk and rtt: binary messages (legba_room_send_bytes) from room a to
 * room b on the reliable channel, as webrtcbin-peer sends raw bytes. bulk
 * sends while the room takes them (its queue towards b holds 1 MiB on top
 * of webrtcbin's buffered-amount) and waits for ready-to-send when it
 * refuses one; rtt stamps each message with the send time, b echoes it.
 * rtt --sync-data: both rooms take the messages with
 * sync-bytes-received, on the thread each arrives on, and b echoes from
 * there (legba_room_send_bytes() from that thread), as webrtcbin-peer
 * echoes from webrtcbin's; without it, with bytes-received on the rooms'
 * main context.
 * pairs also reports the heap in use (mallinfo2) per pair.
 *
 * call: room a sends a stamped H.264 track (legbastamp, x264enc
 * ultrafast zerolatency), room b decodes it (avdec_h264) and reads the
 * stamps back (legbastampcheck): glass-to-glass through two rooms.
 * --sync reads the stamps where a clock-synced sink would show the
 * frames (a clocksync before legbastampcheck, a synced sink after it, so
 * that the pipeline configures its latency); --latency sets room b's
 * `latency` (the jitter buffer's, which a synced sink waits out).
 * --recalculate-latency has the sender's pipeline recompute its latency
 * once b has decoded 10 frames, as a sink added to it later would.
 *
 * first-frame: room a sends a stamped H.264 track of a moving zone plate
 * (x264enc as in call), room b decodes what it receives (avdec_h264 !
 * legbastampcheck); both pipelines are playing when both rooms' connect
 * calls are made, back to back, and each iteration is timed from the
 * first of them to the first frame out of b's decoder. The first
 * iteration is the process's first call (after legba_room_prepare(), as
 * in setup); a failed one is -1.
 *
 * mesh: one participant of a mesh, one process each: it sends that same
 * track to everyone in room "mesh" and decodes every participant's video.
 * It prints {"event": "decoding"} once --expect participants' streams have
 * each given a decoded frame, then takes commands on standard input:
 * "start" opens the measured window (process CPU by getrusage, frames
 * decoded per stream), "stop" closes it and prints the result (once
 * every stream has given a frame in the window: a starved one holds it
 * open until its next); end of input leaves the room. bench/suites.py
 * mesh drives four of them. --loss P drops each RTP packet this
 * participant sends with probability P (bench/peers/loss.h), in each of
 * the webrtcbins its room makes.
 *
 * viewers: N receive-only participants of ROOM in this one process
 * (identities PREFIX<F>..PREFIX<F+N-1>, "r" and 1 by default), each a LegbaRoom of its
 * own (its own signalling client and, in an SFU room, its own Janus
 * session and subscription) with no track, in one pipeline; each
 * received track ends in a fakesink whose buffers are counted, nothing
 * decoded. They start --batch at a time, each batch once the one before
 * has joined (or failed, or after 60 s), with a line {"event": "batch"}
 * on standard output after each and {"event": "started"} after the
 * last; then "report" on standard input prints each viewer's figures
 * (ms from its connect call: joined_ms, first_video_ms, -1 when never;
 * started_ms from the first viewer's; buffers received by kind; its
 * room's state and last error; and bus_pending, whether the pipeline's
 * bus holds a message: it should not, each dropped where it is posted),
 * and end of input leaves the rooms.
 * bench/sfu/sfu-vs-mesh.py --viewer-host shared drives it.
 *
 * A pair is set up when each room lists the other participant as
 * connected: its peer connection is up and both of its data channels are
 * open. Unlike the other peers, the offer, answer and candidates go
 * through the signalling server (WebSocket, loopback): that is part of
 * what a room costs. ICE: the rooms' defaults for a loopback server (host
 * candidates on 127.0.0.1, no STUN server).
 */
#include <legba/legba.h>
#include <legba/server/server.h>
#include <sys/resource.h>
#include <malloc.h>
#include <string.h>
#include <stdio.h>

#include "census.h"
#include "encoded.h"
#include "loss.h"
#include "pairs.h"
#include "phases.h"
#include "test-hub.h"

#define APP_ID "bench"
#define APP_KEY "bench-key"
#define APP_SECRET "bench-secret"

typedef struct
{
  GstElement *pipeline;         /* the room's bin (call: its own pipeline) */
  LegbaRoom *room;
  gboolean connected;           /* the other participant is connected */
  gboolean failed;
  char *other;                  /* the other participant's id */
  gint64 joined_at;             /* monotonic µs: the room connected */
} Side;

typedef struct
{
  GstElement *pipeline;         /* both rooms' bins (not in call mode) */
  Side s[2];
} Pair;

static char *server_url;
static TestHub *hub;            /* --in-process */
static Phases phases;           /* setup */
static gboolean timing_phases;  /* setup */
static double main_ms;          /* when main() started */
static gboolean external_server;
static gboolean no_teardown;    /* pairs */

/* bulk and rtt */
static GMutex data_lock;        /* received_msgs and rtts, which rtt
                                 * --sync-data adds to from other threads */
static guint64 received_bytes;
static guint64 received_msgs;
static GArray *rtts;            /* double ms */
static gboolean blocked;        /* room a refused a message */
static gboolean sync_data;      /* rtt --sync-data */

/* call */
static gboolean call_sync;      /* the stamps read after a clocksync */
static gint call_latency = -1;  /* the receiving room's latency, ms */
static gboolean call_recalculate;       /* the sender's pipeline recomputes
                                         * its latency once frames flow */
static GstElement *check;
static gint frames_out;

/* first-frame and mesh: the sender's line */
#define VIDEO_LINE "videotestsrc is-live=true pattern=zone-plate kx2=20 " \
  "ky2=20 kt=1 ! video/x-raw,format=I420,width=%u,height=%u,framerate=30/1 " \
  "! legbastamp ! x264enc name=enc tune=zerolatency speed-preset=ultrafast " \
  "bitrate=%u key-int-max=60 ! capsfilter " \
  "caps=video/x-h264,profile=constrained-baseline"
#define DECODE_LINE "avdec_h264 ! legbastampcheck name=check ! " \
  "fakesink sync=false async=false"

static void
on_participant_state (LegbaParticipant * lp, GParamSpec * pspec, Side * side)
{
  LegbaParticipantState state = legba_participant_get_state (lp);

  if (state == LEGBA_PARTICIPANT_STATE_CONNECTED) {
    side->connected = TRUE;
    if (side->other == NULL)
      side->other = g_strdup (legba_participant_get_id (lp));
  } else if (state == LEGBA_PARTICIPANT_STATE_FAILED)
    side->failed = TRUE;
}

static void
on_participant_joined (LegbaRoom * room, LegbaParticipant * lp, Side * side)
{
  g_signal_connect (lp, "notify::state", G_CALLBACK (on_participant_state),
      side);
  on_participant_state (lp, NULL, side);
}

static void
on_room_state (LegbaRoom * room, GParamSpec * pspec, Side * side)
{
  if (legba_room_get_state (room) == LEGBA_ROOM_STATE_CONNECTED &&
      side->joined_at == 0)
    side->joined_at = g_get_monotonic_time ();
}

static void
on_room_error (LegbaRoom * room, GError * error, Side * side)
{
  g_printerr ("room error: %s\n", error->message);
}

/* the room, its bin and signalling client, not yet connected: the bin is
 * a pipeline of its own when pipeline is NULL, else a bin in pipeline */
static void
side_create (Side * side, GstElement * pipeline, const char *room_name,
    const char *identity)
{
  LegbaSignaller *signaller;

  if (hub != NULL) {
    signaller = LEGBA_SIGNALLER (test_signaller_new (hub));
  } else {
    signaller = LEGBA_SIGNALLER (legba_signal_client_new (server_url, APP_KEY));
    g_object_set (signaller, "app-secret", APP_SECRET, NULL);
  }
  if (pipeline == NULL) {
    side->pipeline = gst_pipeline_new (identity);
  } else {
    side->pipeline = gst_bin_new (identity);
    gst_bin_add (GST_BIN (pipeline), side->pipeline);
    gst_element_sync_state_with_parent (side->pipeline);
  }
  side->room = legba_room_new (signaller, GST_BIN (side->pipeline));
  g_object_unref (signaller);
  g_object_set (side->room, "room", room_name, "identity", identity, NULL);
  if (hub != NULL) {
    const char *const loopback[] = { "127.0.0.1", NULL };

    g_object_set (side->room, "local-addresses", loopback, NULL);
  }
  g_signal_connect (side->room, "notify::state", G_CALLBACK (on_room_state),
      side);
  g_signal_connect (side->room, "participant-joined",
      G_CALLBACK (on_participant_joined), side);
  g_signal_connect (side->room, "error", G_CALLBACK (on_room_error), side);
}

static void
side_start (Side * side, GstElement * pipeline, const char *room_name,
    const char *identity)
{
  side_create (side, pipeline, room_name, identity);
  if (pipeline == NULL)
    gst_element_set_state (side->pipeline, GST_STATE_PLAYING);
  legba_room_connect_async (side->room, NULL, NULL, NULL);
}

/* own: side->pipeline is a pipeline of its own (call, first-frame and
 * mesh modes), else a bin
 * the pair's pipeline holds */
static void
side_stop (Side * side, gboolean own)
{
  legba_room_disconnect (side->room);
  if (own) {
    gst_element_set_state (side->pipeline, GST_STATE_NULL);
    gst_clear_object (&side->pipeline);
  }
  side->pipeline = NULL;
  g_clear_object (&side->room);
  g_clear_pointer (&side->other, g_free);
}

static void
on_pair_element (GstBin * bin, GstBin * sub, GstElement * element,
    gpointer data)
{
  GstElementFactory *f = gst_element_get_factory (element);

  if (timing_phases && f != NULL &&
      strcmp (GST_OBJECT_NAME (f), "webrtcbin") == 0)
    phases_watch (&phases, element);
}

static Pair *
pair_new (guint n)
{
  Pair *p = g_new0 (Pair, 1);
  char room[32], a[32], b[32];

  g_snprintf (room, sizeof room, "bench-%u", n);
  g_snprintf (a, sizeof a, "a%u", n);
  g_snprintf (b, sizeof b, "b%u", n);
  p->pipeline = gst_pipeline_new (room);
  g_signal_connect (p->pipeline, "deep-element-added",
      G_CALLBACK (on_pair_element), NULL);
  gst_element_set_state (p->pipeline, GST_STATE_PLAYING);
  side_start (&p->s[0], p->pipeline, room, a);
  side_start (&p->s[1], p->pipeline, room, b);
  return p;
}

static gboolean
timed_out (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

static gboolean
pair_wait (Pair * p, guint seconds)
{
  gboolean expired = FALSE;
  guint id = g_timeout_add_seconds (seconds, timed_out, &expired);

  while (!(p->s[0].connected && p->s[1].connected) && !expired &&
      !p->s[0].failed && !p->s[1].failed)
    g_main_context_iteration (NULL, TRUE);
  if (!expired)
    g_source_remove (id);
  return p->s[0].connected && p->s[1].connected;
}

static void
pair_free (Pair * p)
{
  side_stop (&p->s[0], p->pipeline == NULL);
  side_stop (&p->s[1], p->pipeline == NULL);
  if (p->pipeline != NULL) {
    gst_element_set_state (p->pipeline, GST_STATE_NULL);
    gst_clear_object (&p->pipeline);
  }
  /* let the rooms finish leaving */
  while (g_main_context_iteration (NULL, FALSE));
  g_free (p);
}

/* The first pair is the first call of this process, timed from its
 * connect calls like the others. The process's one-time work
 * (legba_room_prepare(): the DTLS keys, GStreamer's first peer
 * connection) is made before, off that path, as an application does it
 * at start; process_to_open_ms is from main() to the first pair's open,
 * that work included. */
static int
mode_setup (guint iterations)
{
  GString *out = g_string_new ("{\"peer\": \"legba\", \"mode\": \"setup\"");
  GArray *series[4];
  const char *names[] = { "setup_ms", "joined_ms", "described_ms",
    "connected_ms"
  };
  guint failed = 0, ok = 0;
  double prepare_ms, process_to_open_ms = -1;

  for (guint s = 0; s < G_N_ELEMENTS (series); s++)
    series[s] = g_array_new (FALSE, FALSE, sizeof (double));
  timing_phases = TRUE;
  legba_room_prepare ();
  legba_room_prepare_wait ();
  prepare_ms = now_ms () - main_ms;
  for (guint i = 0; i < iterations; i++) {
    double t[4];
    Pair *p;

    phases_start (&phases);
    p = pair_new (i);
    if (pair_wait (p, 30)) {
      t[0] = (g_get_monotonic_time () - phases.t0) / 1000.0;
      t[1] = (MAX (p->s[0].joined_at, p->s[1].joined_at) - phases.t0) / 1000.0;
      t[2] = phases_described_ms (&phases);
      t[3] = phases_connected_ms (&phases);
      for (guint s = 0; s < G_N_ELEMENTS (series); s++)
        g_array_append_val (series[s], t[s]);
      if (i == 0)
        process_to_open_ms = now_ms () - main_ms;
      ok++;
    } else {
      failed++;
    }
    pair_free (p);
  }
  for (guint s = 0; s < G_N_ELEMENTS (series); s++) {
    g_string_append (out, ", ");
    print_series (out, names[s], series[s]);
    g_array_unref (series[s]);
  }
  g_string_append_printf (out, ", \"failed\": %u, \"prepare_ms\": %.4f, "
      "\"process_to_open_ms\": %.4f, \"signaller\": \"%s\"}", failed,
      prepare_ms, process_to_open_ms, hub ? "in-process" : "server");
  puts (out->str);
  g_string_free (out, TRUE);
  return ok ? 0 : 1;
}

/* the pairs mode's hooks (pairs.h) */
static gpointer
pairs_new (guint index, GstElement ** pipeline)
{
  Pair *p = pair_new (index);

  *pipeline = p->pipeline;
  return p;
}

static int
mode_pairs (guint count, double seconds)
{
  PairsPeer peer = {
    .peer = "legba",
    .includes = hub != NULL ? "two in-process signallers per pair" :
        external_server ? "two signalling clients per pair" :
        "two signalling clients and their server-side sockets per pair",
    .no_teardown = no_teardown,
    .pair_new = pairs_new,
    .pair_wait = (PairsWaitFunc) pair_wait,
    .pair_free = (GDestroyNotify) pair_free,
  };

  return pairs_run (&peer, count, seconds);
}

/* room b: count (bulk) or echo (rtt) */
static void
on_bytes_b (LegbaRoom * room, LegbaParticipant * from, GBytes * bytes,
    gpointer unused)
{
  if (rtts != NULL) {
    const char *to[] = { legba_participant_get_id (from), NULL };
    GError *error = NULL;

    if (!legba_room_send_bytes (room, bytes, LEGBA_RELIABILITY_RELIABLE, to,
            &error))
      g_error ("echo: %s", error->message);
    return;
  }
  received_bytes += g_bytes_get_size (bytes);
  received_msgs++;
}

/* room a: the echo */
static void
on_bytes_a (LegbaRoom * room, LegbaParticipant * from, GBytes * bytes,
    gpointer unused)
{
  gsize size;
  const guint8 *data = g_bytes_get_data (bytes, &size);
  double sent, rtt;

  if (size < sizeof sent)
    return;
  memcpy (&sent, data, sizeof sent);
  rtt = now_ms () - sent;
  g_mutex_lock (&data_lock);
  g_array_append_val (rtts, rtt);
  received_msgs++;
  g_mutex_unlock (&data_lock);
  if (sync_data)
    g_main_context_wakeup (NULL);
}

static void
on_ready (LegbaRoom * room, LegbaParticipant * p, LegbaReliability rel,
    gpointer unused)
{
  blocked = FALSE;
}

static Pair *
data_pair (void)
{
  Pair *p = pair_new (0);
  const char *received = sync_data ? "sync-bytes-received" : "bytes-received";

  if (!pair_wait (p, 30))
    g_error ("the pair did not connect");
  if (sync_data) {
    legba_room_enable_sync_data_emission (p->s[0].room);
    legba_room_enable_sync_data_emission (p->s[1].room);
  }
  g_signal_connect (p->s[1].room, received, G_CALLBACK (on_bytes_b), NULL);
  g_signal_connect (p->s[0].room, received, G_CALLBACK (on_bytes_a), NULL);
  g_signal_connect (p->s[0].room, "ready-to-send", G_CALLBACK (on_ready), NULL);
  return p;
}

static guint64
locked_get (guint64 * counter)
{
  guint64 v;

  g_mutex_lock (&data_lock);
  v = *counter;
  g_mutex_unlock (&data_lock);
  return v;
}

/* iterates the main context until *counter reaches target or the
 * deadline */
static gboolean
iterate_until (guint64 * counter, guint64 target, guint seconds)
{
  gboolean expired = FALSE;
  guint id = g_timeout_add_seconds (seconds, timed_out, &expired);

  while (locked_get (counter) < target && !expired)
    g_main_context_iteration (NULL, TRUE);
  if (!expired)
    g_source_remove (id);
  return locked_get (counter) >= target;
}

static int
mode_bulk (guint64 bytes, gsize size)
{
  Pair *p = data_pair ();
  guint8 *data = g_malloc (size);
  GBytes *msg;
  const char *to[] = { p->s[0].other, NULL };
  guint64 sent = 0;
  double t0, c0, t, c;
  gboolean done;

  for (gsize i = 0; i < size; i++)
    data[i] = 'a' + i % 26;
  msg = g_bytes_new_take (data, size);
  t0 = now_ms ();
  c0 = cpu_s ();
  while (sent < bytes) {
    GError *error = NULL;

    if (blocked) {
      g_main_context_iteration (NULL, TRUE);
      continue;
    }
    if (legba_room_send_bytes (p->s[0].room, msg, LEGBA_RELIABILITY_RELIABLE,
            to, &error)) {
      sent += size;
    } else if (g_error_matches (error, LEGBA_ROOM_ERROR,
            LEGBA_ROOM_ERROR_NOT_DELIVERED)) {
      /* its queue is full: until ready-to-send */
      blocked = TRUE;
      g_error_free (error);
    } else {
      g_error ("send: %s", error->message);
    }
  }
  done = iterate_until (&received_bytes, sent, 60);
  t = now_ms () - t0;
  c = cpu_s () - c0;
  print_bulk ("legba", sent, received_bytes, size, t, c, done);
  g_bytes_unref (msg);
  pair_free (p);
  return done ? 0 : 1;
}

static int
mode_rtt (guint count, double rate, gsize size)
{
  Pair *p;
  guint8 *data = g_malloc0 (MAX (size, sizeof (double)));
  double c0, c, start;
  GString *out = g_string_new ("{\"peer\": \"legba\", \"mode\": \"rtt\", ");
  gboolean all;
  const char *to[2] = { NULL, NULL };

  rtts = g_array_new (FALSE, FALSE, sizeof (double));
  p = data_pair ();
  to[0] = p->s[0].other;
  c0 = cpu_s ();
  start = now_ms ();
  for (guint i = 0; i < count; i++) {
    double due = start + i * 1000.0 / rate, t;
    GBytes *b;
    GError *error = NULL;

    /* the main context runs the rooms meanwhile */
    while ((t = now_ms ()) < due) {
      gboolean expired = FALSE;

      g_timeout_add ((guint) (due - t) + 1, timed_out, &expired);
      while (!expired)
        g_main_context_iteration (NULL, TRUE);
    }
    t = now_ms ();
    memcpy (data, &t, sizeof t);
    b = g_bytes_new (data, MAX (size, sizeof t));
    if (!legba_room_send_bytes (p->s[0].room, b, LEGBA_RELIABILITY_RELIABLE,
            to, &error))
      g_error ("send: %s", error->message);
    g_bytes_unref (b);
  }
  all = iterate_until (&received_msgs, count, 10);
  c = cpu_s () - c0;
  g_mutex_lock (&data_lock);
  g_string_append (out, "\"rtt_ms\": [");
  for (guint i = 0; i < rtts->len; i++)
    g_string_append_printf (out, "%s%.4f", i ? ", " : "",
        g_array_index (rtts, double, i));
  g_string_append_printf (out, "], \"sent\": %u, \"size\": %zu, "
      "\"rate\": %g, \"cpu_s\": %.4f, \"sync_data\": %s, \"complete\": %s}",
      count, size, rate, c, sync_data ? "true" : "false",
      all ? "true" : "false");
  g_mutex_unlock (&data_lock);
  puts (out->str);
  g_string_free (out, TRUE);
  /* once the rooms' threads have stopped */
  pair_free (p);
  g_clear_pointer (&rtts, g_array_unref);
  g_free (data);
  return all ? 0 : 1;
}

static GstPadProbeReturn
count_frame (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  g_atomic_int_inc (&frames_out);
  g_main_context_wakeup (NULL);
  return GST_PAD_PROBE_OK;
}

static void
on_track_added (LegbaRoom * room, LegbaParticipant * lp, LegbaTrackKind kind,
    GstPad * pad, Side * side)
{
  GError *error = NULL;
  GstElement *bin;
  GstPad *sinkpad, *out;

  if (kind != LEGBA_TRACK_KIND_VIDEO || check != NULL)
    return;
  bin = gst_parse_bin_from_description (call_sync ?
      "avdec_h264 ! clocksync ! legbastampcheck name=check series=true ! "
      "fakesink sync=true" : "avdec_h264 ! legbastampcheck "
      "name=check series=true ! fakesink sync=false async=false", TRUE, &error);
  if (bin == NULL)
    g_error ("receiver line: %s", error->message);
  check = gst_bin_get_by_name (GST_BIN (bin), "check");
  out = gst_element_get_static_pad (check, "src");
  gst_pad_add_probe (out, GST_PAD_PROBE_TYPE_BUFFER, count_frame, NULL, NULL);
  gst_object_unref (out);
  gst_bin_add (GST_BIN (side->pipeline), bin);
  gst_element_sync_state_with_parent (bin);
  sinkpad = gst_element_get_static_pad (bin, "sink");
  if (gst_pad_link (pad, sinkpad) != GST_PAD_LINK_OK)
    g_error ("could not link the received track");
  gst_object_unref (sinkpad);
}

static int
mode_call (guint frames, guint width, guint height, guint kbps)
{
  char *line = g_strdup_printf ("videotestsrc is-live=true pattern=smpte "
      "horizontal-speed=4 ! video/x-raw,format=I420,width=%u,height=%u,"
      "framerate=30/1 ! legbastamp ! x264enc name=enc tune=zerolatency "
      "speed-preset=ultrafast bitrate=%u key-int-max=60 ! capsfilter "
      "caps=video/x-h264,profile=constrained-baseline", width, height, kbps);
  Pair *p = g_new0 (Pair, 1);
  GError *error = NULL;
  GstElement *src;
  GstPad *srcpad, *sinkpad;
  GstBus *bus;
  GstMessage *msg = NULL;
  gboolean expired = FALSE;
  guint timer;
  struct rusage r0, r1;
  double t0 = now_ms ();
  GString *out;

  getrusage (RUSAGE_SELF, &r0);
  /* the sender's pipeline and track before it joins */
  p->s[0].pipeline = gst_pipeline_new ("a");
  {
    LegbaSignalClient *client = legba_signal_client_new (server_url, APP_KEY);

    g_object_set (client, "app-secret", APP_SECRET, NULL);
    p->s[0].room = legba_room_new (LEGBA_SIGNALLER (client),
        GST_BIN (p->s[0].pipeline));
    g_object_unref (client);
  }
  g_object_set (p->s[0].room, "room", "call", "identity", "a", NULL);
  g_signal_connect (p->s[0].room, "error", G_CALLBACK (on_room_error), NULL);
  src = gst_parse_bin_from_description (line, TRUE, &error);
  if (src == NULL)
    g_error ("sender line: %s", error->message);
  encoded_watch (GST_BIN (src));
  gst_bin_add (GST_BIN (p->s[0].pipeline), src);
  sinkpad = legba_room_add_track (p->s[0].room, LEGBA_TRACK_KIND_VIDEO, &error);
  if (sinkpad == NULL)
    g_error ("add_track: %s", error->message);
  srcpad = gst_element_get_static_pad (src, "src");
  gst_pad_link (srcpad, sinkpad);
  gst_object_unref (srcpad);
  gst_object_unref (sinkpad);
  gst_element_set_state (p->s[0].pipeline, GST_STATE_PLAYING);
  legba_room_connect_async (p->s[0].room, NULL, NULL, NULL);

  p->s[1].pipeline = gst_pipeline_new ("b");
  {
    LegbaSignalClient *client = legba_signal_client_new (server_url, APP_KEY);

    g_object_set (client, "app-secret", APP_SECRET, NULL);
    p->s[1].room = legba_room_new (LEGBA_SIGNALLER (client),
        GST_BIN (p->s[1].pipeline));
    g_object_unref (client);
  }
  g_object_set (p->s[1].room, "room", "call", "identity", "b", NULL);
  if (call_latency >= 0)
    g_object_set (p->s[1].room, "latency", (guint) call_latency, NULL);
  g_signal_connect (p->s[1].room, "track-added", G_CALLBACK (on_track_added),
      &p->s[1]);
  g_signal_connect (p->s[1].room, "error", G_CALLBACK (on_room_error), NULL);
  gst_element_set_state (p->s[1].pipeline, GST_STATE_PLAYING);
  legba_room_connect_async (p->s[1].room, NULL, NULL, NULL);

  timer = g_timeout_add_seconds (30 + frames / 10, timed_out, &expired);
  while ((guint) g_atomic_int_get (&frames_out) < frames && !expired) {
    g_main_context_iteration (NULL, TRUE);
    if (call_recalculate && g_atomic_int_get (&frames_out) >= 10) {
      gst_bin_recalculate_latency (GST_BIN (p->s[0].pipeline));
      call_recalculate = FALSE;
    }
  }
  if (!expired)
    g_source_remove (timer);
  getrusage (RUSAGE_SELF, &r1);
  out = g_string_new ("{\"peer\": \"legba\", \"mode\": \"call\"");
  g_string_append_printf (out, ", \"frames\": %d"
      ", \"complete\": %s, \"seconds\": %.2f, \"cpu_ms_per_frame\": %.3f",
      g_atomic_int_get (&frames_out), expired ? "false" : "true",
      (now_ms () - t0) / 1000,
      ((r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec -
              r0.ru_stime.tv_sec) * 1e3 + (r1.ru_utime.tv_usec -
              r0.ru_utime.tv_usec + r1.ru_stime.tv_usec -
              r0.ru_stime.tv_usec) / 1e3) / MAX (g_atomic_int_get (&frames_out),
          1));
  if (check != NULL) {
    GstPad *pad = gst_element_get_static_pad (check, "sink");

    bus = gst_element_get_bus (p->s[1].pipeline);
    gst_pad_send_event (pad, gst_event_new_eos ());
    gst_object_unref (pad);
    while ((msg = gst_bus_timed_pop_filtered (bus, 10 * GST_SECOND,
                GST_MESSAGE_ELEMENT)) != NULL &&
        !gst_message_has_name (msg, "legba-stamp-summary"))
      gst_message_unref (msg);
    gst_object_unref (bus);
  }
  if (msg != NULL) {
    const GstStructure *st = gst_message_get_structure (msg);
    const GValue *series = gst_structure_get_value (st, "latency-series");
    guint64 failed = 0, lost = 0;

    gst_structure_get_uint64 (st, "failed", &failed);
    gst_structure_get_uint64 (st, "lost", &lost);
    g_string_append_printf (out, ", \"failed\": %" G_GUINT64_FORMAT
        ", \"lost\": %" G_GUINT64_FORMAT ", \"latency_ms\": [", failed, lost);
    for (guint i = 0; series && i < gst_value_array_get_size (series); i++)
      g_string_append_printf (out, "%s%.3f", i ? ", " : "",
          g_value_get_double (gst_value_array_get_value (series, i)));
    g_string_append (out, "]");
    gst_message_unref (msg);
  }
  encoded_append (out);
  g_string_append (out, "}");
  puts (out->str);
  g_string_free (out, TRUE);
  gst_clear_object (&check);
  pair_free (p);
  g_free (line);
  return expired ? 1 : 0;
}

/* ---- first-frame and mesh ---- */

/* a remote participant's decoded video */
typedef struct
{
  char *from;                   /* its identity */
  GstPad *pad;                  /* the room's track pad */
  gboolean ended;               /* under streams_lock: the track was
                                 * removed (its peer connection replaced) */
  GstElement *check;
  gint frames;                  /* atomic: frames out of the decoder */
  gint64 first_us;              /* under streams_lock: its first frame */
  gint window_frames;           /* frames when the window opened */
  guint64 window_lost;          /* legbastampcheck's frames-lost then */
} Stream;

static GMutex streams_lock;
static GPtrArray *streams;      /* Stream, under streams_lock */

static GstPadProbeReturn
stream_frame (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  Stream *st = data;

  if (g_atomic_int_add (&st->frames, 1) == 0) {
    g_mutex_lock (&streams_lock);
    st->first_us = g_get_monotonic_time ();
    g_mutex_unlock (&streams_lock);
    g_main_context_wakeup (NULL);
  }
  return GST_PAD_PROBE_OK;
}

static void
stream_free (Stream * st)
{
  g_free (st->from);
  gst_clear_object (&st->pad);
  gst_clear_object (&st->check);
  g_free (st);
}

/* decodes every video track the room gives (on the room's context) */
static void
on_video_track (LegbaRoom * room, LegbaParticipant * lp, LegbaTrackKind kind,
    GstPad * pad, GstBin * pipeline)
{
  GError *error = NULL;
  GstElement *bin;
  GstPad *sinkpad, *out;
  Stream *st;

  if (kind != LEGBA_TRACK_KIND_VIDEO)
    return;
  bin = gst_parse_bin_from_description (DECODE_LINE, TRUE, &error);
  if (bin == NULL)
    g_error ("receiver line: %s", error->message);
  st = g_new0 (Stream, 1);
  st->from = g_strdup (legba_participant_get_identity (lp));
  st->pad = gst_object_ref (pad);
  st->check = gst_bin_get_by_name (GST_BIN (bin), "check");
  g_mutex_lock (&streams_lock);
  g_ptr_array_add (streams, st);
  g_mutex_unlock (&streams_lock);
  out = gst_element_get_static_pad (st->check, "sink");
  gst_pad_add_probe (out, GST_PAD_PROBE_TYPE_BUFFER, stream_frame, st, NULL);
  gst_object_unref (out);
  gst_bin_add (pipeline, bin);
  gst_element_sync_state_with_parent (bin);
  sinkpad = gst_element_get_static_pad (bin, "sink");
  if (gst_pad_link (pad, sinkpad) != GST_PAD_LINK_OK)
    g_error ("could not link the received track");
  gst_object_unref (sinkpad);
}


/* a removed track's stream leaves the counts (a room replaces a peer
 * connection that failed; its new track is a stream of its own) */
static void
on_track_removed (LegbaRoom * room, LegbaParticipant * lp,
    LegbaTrackKind kind, GstPad * pad, gpointer data)
{
  g_mutex_lock (&streams_lock);
  for (guint i = 0; i < streams->len; i++) {
    Stream *st = streams->pdata[i];

    if (st->pad == pad && !st->ended) {
      st->ended = TRUE;
      g_printerr ("mesh: the track from %s ended (%d frames decoded)\n",
          st->from, g_atomic_int_get (&st->frames));
    }
  }
  g_mutex_unlock (&streams_lock);
}

/* the stamped 640x360 (or other) H.264 track of VIDEO_LINE */
static void
side_send_video (Side * side, guint width, guint height, guint kbps)
{
  char *line = g_strdup_printf (VIDEO_LINE, width, height, kbps);
  GError *error = NULL;
  GstElement *src = gst_parse_bin_from_description (line, TRUE, &error);
  GstPad *srcpad, *sinkpad;

  if (src == NULL)
    g_error ("sender line: %s", error->message);
  census_count_encoder (src);
  gst_bin_add (GST_BIN (side->pipeline), src);
  sinkpad = legba_room_add_track (side->room, LEGBA_TRACK_KIND_VIDEO, &error);
  if (sinkpad == NULL)
    g_error ("add_track: %s", error->message);
  srcpad = gst_element_get_static_pad (src, "src");
  if (gst_pad_link (srcpad, sinkpad) != GST_PAD_LINK_OK)
    g_error ("could not link the video track");
  gst_object_unref (srcpad);
  gst_object_unref (sinkpad);
  g_free (line);
}

/* the first frame's time of the first stream, 0 if none yet */
static gint64
first_frame_us (void)
{
  gint64 t = 0;

  g_mutex_lock (&streams_lock);
  if (streams->len > 0)
    t = ((Stream *) streams->pdata[0])->first_us;
  g_mutex_unlock (&streams_lock);
  return t;
}

static int
mode_first_frame (guint iterations, guint width, guint height, guint kbps)
{
  GString *out = g_string_new ("{\"peer\": \"legba\", \"mode\": "
      "\"first-frame\", \"first_frame_ms\": [");
  guint failed = 0, ok = 0;
  double prepare_ms;

  legba_room_prepare ();
  legba_room_prepare_wait ();
  prepare_ms = now_ms () - main_ms;
  streams = g_ptr_array_new_with_free_func ((GDestroyNotify) stream_free);
  for (guint i = 0; i < iterations; i++) {
    Pair *p = g_new0 (Pair, 1);
    char room[32];
    gboolean expired = FALSE;
    guint timer;
    gint64 t0, t = 0;

    g_snprintf (room, sizeof room, "first-frame-%u", i);
    side_create (&p->s[0], NULL, room, "a");
    side_send_video (&p->s[0], width, height, kbps);
    side_create (&p->s[1], NULL, room, "b");
    g_signal_connect (p->s[1].room, "track-added",
        G_CALLBACK (on_video_track), p->s[1].pipeline);
    gst_element_set_state (p->s[0].pipeline, GST_STATE_PLAYING);
    gst_element_set_state (p->s[1].pipeline, GST_STATE_PLAYING);
    t0 = g_get_monotonic_time ();
    legba_room_connect_async (p->s[0].room, NULL, NULL, NULL);
    legba_room_connect_async (p->s[1].room, NULL, NULL, NULL);
    timer = g_timeout_add_seconds (60, timed_out, &expired);
    while ((t = first_frame_us ()) == 0 && !expired)
      g_main_context_iteration (NULL, TRUE);
    if (!expired)
      g_source_remove (timer);
    /* a failed iteration keeps its place, as -1 */
    g_string_append_printf (out, "%s%.3f", i ? ", " : "",
        t != 0 ? (t - t0) / 1e3 : -1.0);
    if (t != 0)
      ok++;
    else
      failed++;
    pair_free (p);
    g_ptr_array_set_size (streams, 0);
  }
  g_string_append_printf (out, "], \"failed\": %u, \"prepare_ms\": %.3f, "
      "\"width\": %u, \"height\": %u, \"bitrate_kbps\": %u}", failed,
      prepare_ms, width, height, kbps);
  puts (out->str);
  g_string_free (out, TRUE);
  g_clear_pointer (&streams, g_ptr_array_unref);
  return ok == iterations ? 0 : 1;
}

typedef struct
{
  GMainLoop *loop;
  Side side;
  const char *identity;
  guint expect;
  gint64 connect_us;
  gboolean decoding;            /* "decoding" printed */
  gboolean in_window;
  gboolean stopping;            /* "stop" came: close once every stream
                                 * has given a frame in the window */
  gint64 window_us;
  double window_cpu;
  gint window_encoded, window_keys;
  LossWindow window_loss;
} Mesh;

static guint
streams_decoding (void)
{
  guint n = 0;

  g_mutex_lock (&streams_lock);
  for (guint i = 0; i < streams->len; i++)
    if (((Stream *) streams->pdata[i])->first_us != 0 &&
        !((Stream *) streams->pdata[i])->ended)
      n++;
  g_mutex_unlock (&streams_lock);
  return n;
}

static void mesh_window_close (Mesh * m);

/* every stream has given a frame since the window opened */
static gboolean
window_has_every_stream (void)
{
  gboolean all = TRUE;

  g_mutex_lock (&streams_lock);
  for (guint i = 0; i < streams->len; i++) {
    Stream *st = streams->pdata[i];

    if (!st->ended && g_atomic_int_get (&st->frames) <= st->window_frames)
      all = FALSE;
  }
  g_mutex_unlock (&streams_lock);
  return all;
}

static gboolean
mesh_poll (gpointer data)
{
  Mesh *m = data;
  guint n = streams_decoding ();

  if (m->in_window && m->stopping && window_has_every_stream ())
    mesh_window_close (m);

  if (!m->decoding && n >= m->expect) {
    m->decoding = TRUE;
    printf ("{\"event\": \"decoding\", \"identity\": \"%s\", \"streams\": %u, "
        "\"ms\": %.1f}\n", m->identity, n,
        (g_get_monotonic_time () - m->connect_us) / 1e3);
    fflush (stdout);
  }
  return G_SOURCE_CONTINUE;
}

static void
mesh_window_open (Mesh * m)
{
  m->in_window = TRUE;
  m->window_cpu = cpu_s ();
  m->window_us = g_get_monotonic_time ();
  m->window_encoded = census_encoded_frames ();
  m->window_keys = census_encoded_key_frames ();
  loss_window_open (&m->window_loss);
  /* the pipeline's graph, with GST_DEBUG_DUMP_DOT_DIR set */
  GST_DEBUG_BIN_TO_DOT_FILE (GST_BIN (m->side.pipeline),
      GST_DEBUG_GRAPH_SHOW_ALL, m->identity);
  g_mutex_lock (&streams_lock);
  for (guint i = 0; i < streams->len; i++) {
    Stream *st = streams->pdata[i];

    st->window_frames = g_atomic_int_get (&st->frames);
    g_object_get (st->check, "frames-lost", &st->window_lost, NULL);
  }
  g_mutex_unlock (&streams_lock);
}

static void
mesh_window_close (Mesh * m)
{
  double cpu = cpu_s () - m->window_cpu;
  double s = (g_get_monotonic_time () - m->window_us) / 1e6;
  GString *out = g_string_new (NULL);
  guint ended = 0;

  g_string_append_printf (out, "{\"peer\": \"legba\", \"mode\": \"mesh\", "
      "\"identity\": \"%s\", \"window_s\": %.3f, \"cpu_s\": %.4f, "
      "\"cpu_pct\": %.2f, \"rss_kib\": %.0f, \"threads\": %u, "
      "\"frames_encoded\": %d, \"key_frames\": %d, ",
      m->identity, s, cpu, 100 * cpu / s, rss_kib (),
      census_count_entries ("/proc/self/task"),
      census_encoded_frames () - m->window_encoded,
      census_encoded_key_frames () - m->window_keys);
  loss_window_print (&m->window_loss, out);
  g_string_append (out, "\"streams\": [");
  g_mutex_lock (&streams_lock);
  for (guint i = 0, n = 0; i < streams->len; i++) {
    Stream *st = streams->pdata[i];
    gint frames = g_atomic_int_get (&st->frames) - st->window_frames;
    guint64 valid = 0, failed = 0, lost = 0;
    gdouble p50 = -1, p95 = -1;

    if (st->ended) {
      ended++;
      continue;
    }
    g_object_get (st->check, "frames-valid", &valid, "frames-failed",
        &failed, "frames-lost", &lost, "latency-p50", &p50, "latency-p95",
        &p95, NULL);
    /* lost: stamped frames of the window never decoded (counter gaps) */
    g_string_append_printf (out, "%s{\"from\": \"%s\", \"frames\": %d, "
        "\"fps\": %.3f, \"lost\": %" G_GUINT64_FORMAT
        ", \"first_frame_ms\": %.1f, \"stamps_valid\": %" G_GUINT64_FORMAT
        ", \"stamps_failed\": %" G_GUINT64_FORMAT
        ", \"latency_p50_ms\": %.1f, \"latency_p95_ms\": %.1f}",
        n++ ? ", " : "",
        st->from, frames, frames / s, lost - st->window_lost,
        st->first_us ? (st->first_us - m->connect_us) / 1e3 : -1.0, valid,
        failed, p50, p95);
  }
  g_mutex_unlock (&streams_lock);
  /* the streams of replaced peer connections, left out above */
  g_string_append_printf (out, "], \"streams_ended\": %u}", ended);
  puts (out->str);
  fflush (stdout);
  g_string_free (out, TRUE);
  m->in_window = FALSE;
  m->stopping = FALSE;
}

/* the streams that gave no frame in the window, on standard error, and
 * the pipeline's graph then (with GST_DEBUG_DUMP_DOT_DIR set) */
static void
report_starved (Mesh * m)
{
  char *name = g_strdup_printf ("%s-starved", m->identity);

  g_mutex_lock (&streams_lock);
  for (guint i = 0; i < streams->len; i++) {
    Stream *st = streams->pdata[i];
    gint frames = g_atomic_int_get (&st->frames);

    if (!st->ended && frames <= st->window_frames)
      g_printerr ("mesh: %s: no frame from %s in the window (%d before it, "
          "the first %.1f ms after connecting)\n", m->identity, st->from,
          frames, (st->first_us - m->connect_us) / 1e3);
  }
  g_mutex_unlock (&streams_lock);
  GST_DEBUG_BIN_TO_DOT_FILE (GST_BIN (m->side.pipeline),
      GST_DEBUG_GRAPH_SHOW_ALL, name);
  g_free (name);
}

/* the driver's commands: start, stop; end of input leaves */
static gboolean
on_command (GIOChannel * in, GIOCondition cond, gpointer data)
{
  Mesh *m = data;
  char *line = NULL;
  GIOStatus status = g_io_channel_read_line (in, &line, NULL, NULL, NULL);

  if (status == G_IO_STATUS_AGAIN)
    return G_SOURCE_CONTINUE;
  if (status != G_IO_STATUS_NORMAL) {
    g_main_loop_quit (m->loop);
    return G_SOURCE_REMOVE;
  }
  g_strstrip (line);
  if (strcmp (line, "start") == 0)
    mesh_window_open (m);
  else if (strcmp (line, "stop") == 0) {
    /* a starved stream keeps the window open until its next frame, so
     * that every stream is measured; the window's length is reported */
    m->stopping = m->in_window;
    if (m->in_window && window_has_every_stream ())
      mesh_window_close (m);
    else if (m->in_window)
      report_starved (m);
  } else
    g_printerr ("mesh: unknown command '%s'\n", line);
  g_free (line);
  return G_SOURCE_CONTINUE;
}

static void
on_mesh_element (GstBin * bin, GstBin * sub, GstElement * element,
    gpointer data)
{
  loss_watch_wire (element);
}

static int
mode_mesh (const char *identity, guint expect, guint width, guint height,
    guint kbps)
{
  Mesh m = { 0 };
  GIOChannel *in;
  guint poll, watch;

  m.identity = identity;
  m.expect = expect;
  m.loop = g_main_loop_new (NULL, FALSE);
  streams = g_ptr_array_new_with_free_func ((GDestroyNotify) stream_free);
  side_create (&m.side, NULL, "mesh", identity);
  g_signal_connect (m.side.pipeline, "deep-element-added",
      G_CALLBACK (on_mesh_element), NULL);
  side_send_video (&m.side, width, height, kbps);
  g_signal_connect (m.side.room, "track-added", G_CALLBACK (on_video_track),
      m.side.pipeline);
  g_signal_connect (m.side.room, "track-removed",
      G_CALLBACK (on_track_removed), NULL);
  gst_element_set_state (m.side.pipeline, GST_STATE_PLAYING);
  m.connect_us = g_get_monotonic_time ();
  legba_room_connect_async (m.side.room, NULL, NULL, NULL);
  poll = g_timeout_add (100, mesh_poll, &m);
  in = g_io_channel_unix_new (0);
  watch = g_io_add_watch (in, G_IO_IN | G_IO_HUP | G_IO_ERR, on_command, &m);
  g_main_loop_run (m.loop);
  g_source_remove (poll);
  if (g_main_context_find_source_by_id (NULL, watch) != NULL)
    g_source_remove (watch);
  g_io_channel_unref (in);
  side_stop (&m.side, TRUE);
  while (g_main_context_iteration (NULL, FALSE));
  g_clear_pointer (&streams, g_ptr_array_unref);
  g_main_loop_unref (m.loop);
  return m.decoding ? 0 : 1;
}

/* ---- viewers ---- */

/* a receive-only participant: a room with no track, counting what
 * arrives on its track pads without decoding it */
typedef struct
{
  Side side;
  char *identity;
  gint64 started_us;            /* its connect call */
  gint video_buffers;           /* atomic */
  gint audio_buffers;           /* atomic */
  gint64 first_video_us;        /* under viewers_lock, 0 until a buffer */
  char *error;                  /* its room's last error */
} Viewer;

static GMutex viewers_lock;

static GstPadProbeReturn
viewer_video_buffer (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  Viewer *v = data;

  if (g_atomic_int_add (&v->video_buffers, 1) == 0) {
    g_mutex_lock (&viewers_lock);
    v->first_video_us = g_get_monotonic_time ();
    g_mutex_unlock (&viewers_lock);
  }
  return GST_PAD_PROBE_OK;
}

static GstPadProbeReturn
viewer_audio_buffer (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  g_atomic_int_inc (&((Viewer *) data)->audio_buffers);
  return GST_PAD_PROBE_OK;
}

/* every received track ends in a fakesink, its buffers counted */
static void
on_viewer_track (LegbaRoom * room, LegbaParticipant * lp, LegbaTrackKind kind,
    GstPad * pad, Viewer * v)
{
  GstElement *sink = gst_element_factory_make ("fakesink", NULL);
  GstPad *sinkpad;

  g_object_set (sink, "sync", FALSE, "async", FALSE, NULL);
  gst_bin_add (GST_BIN (v->side.pipeline), sink);
  gst_element_sync_state_with_parent (sink);
  sinkpad = gst_element_get_static_pad (sink, "sink");
  gst_pad_add_probe (sinkpad, GST_PAD_PROBE_TYPE_BUFFER,
      kind == LEGBA_TRACK_KIND_VIDEO ? viewer_video_buffer :
      viewer_audio_buffer, v, NULL);
  if (gst_pad_link (pad, sinkpad) != GST_PAD_LINK_OK)
    g_printerr ("viewers: %s could not link a received track\n", v->identity);
  gst_object_unref (sinkpad);
}

static void
on_viewer_error (LegbaRoom * room, GError * error, Viewer * v)
{
  g_free (v->error);
  v->error = g_strdup (error->message);
}

static void
on_viewer_connected (GObject * room, GAsyncResult * result, gpointer data)
{
  Viewer *v = data;
  GError *error = NULL;

  if (!legba_room_connect_finish (LEGBA_ROOM (room), result, &error)) {
    g_printerr ("viewers: %s could not join: %s\n", v->identity,
        error->message);
    on_viewer_error (LEGBA_ROOM (room), error, v);
    g_error_free (error);
  }
}

static gboolean
viewer_settled (Viewer * v)
{
  LegbaRoomState state = legba_room_get_state (v->side.room);

  return v->side.joined_at != 0 || state == LEGBA_ROOM_STATE_FAILED;
}

static const char *
state_nick (LegbaRoomState state)
{
  GEnumClass *c = g_type_class_ref (LEGBA_TYPE_ROOM_STATE);
  GEnumValue *v = g_enum_get_value (c, state);

  g_type_class_unref (c);
  return v ? v->value_nick : "unknown";
}

static double
since_ms (gint64 us, gint64 from_us)
{
  return us == 0 ? -1 : (us - from_us) / 1000.0;
}

/* bus: the viewers' pipeline's, whose queue should stay empty */
static void
viewers_report (GPtrArray * viewers, gint64 t0, GstBus * bus)
{
  GString *out = g_string_new ("{\"peer\": \"legba\", \"mode\": \"viewers\", "
      "\"viewers\": [");

  for (guint i = 0; i < viewers->len; i++) {
    Viewer *v = g_ptr_array_index (viewers, i);
    gint64 first;

    g_mutex_lock (&viewers_lock);
    first = v->first_video_us;
    g_mutex_unlock (&viewers_lock);
    g_string_append_printf (out, "%s{\"identity\": \"%s\", "
        "\"started_ms\": %.1f, \"joined_ms\": %.1f, "
        "\"first_video_ms\": %.1f, \"video_buffers\": %d, "
        "\"audio_buffers\": %d, \"state\": \"%s\", \"error\": ",
        i ? ", " : "", v->identity, since_ms (v->started_us, t0),
        since_ms (v->side.joined_at, v->started_us),
        since_ms (first, v->started_us),
        g_atomic_int_get (&v->video_buffers),
        g_atomic_int_get (&v->audio_buffers),
        state_nick (legba_room_get_state (v->side.room)));
    if (v->error == NULL) {
      g_string_append (out, "null}");
    } else {
      g_autofree char *e = g_strescape (v->error, NULL);

      g_string_append_printf (out, "\"%s\"}", e);
    }
  }
  g_string_append_printf (out, "], \"bus_pending\": %s}",
      gst_bus_have_pending (bus) ? "true" : "false");
  puts (out->str);
  fflush (stdout);
  g_string_free (out, TRUE);
}

typedef struct
{
  GPtrArray *viewers;           /* Viewer */
  GMainLoop *loop;
  GstBus *bus;                  /* the viewers' pipeline's */
  gint64 t0;                    /* the first viewer's connect call */
} Viewers;

/* every message of the viewers' pipeline, on the thread that posts it:
 * errors and warnings go to standard error, and none is queued. Nothing
 * reads the pipeline's bus; queued, its messages would pile up for the
 * process's life, and each post into that queue waits for the posts
 * before it to finish (gst_atomic_queue_push), which with a hundred rooms'
 * threads posting on two busy cores held the main loop for tens of
 * seconds: no Janus keepalive sent, no join answered */
static GstBusSyncReply
on_viewers_bus_message (GstBus * bus, GstMessage * message, gpointer data)
{
  GError *error = NULL;
  char *debug = NULL;

  switch (GST_MESSAGE_TYPE (message)) {
    case GST_MESSAGE_ERROR:
      gst_message_parse_error (message, &error, &debug);
      break;
    case GST_MESSAGE_WARNING:
      gst_message_parse_warning (message, &error, &debug);
      break;
    default:
      return GST_BUS_DROP;
  }
  g_printerr ("viewers: %s from %s: %s\n",
      GST_MESSAGE_TYPE (message) == GST_MESSAGE_ERROR ? "error" : "warning",
      GST_MESSAGE_SRC_NAME (message), error->message);
  g_error_free (error);
  g_free (debug);
  return GST_BUS_DROP;
}

/* the driver's commands: report prints every viewer's counts; end of
 * input leaves */
static gboolean
on_viewers_command (GIOChannel * in, GIOCondition cond, gpointer data)
{
  Viewers *vs = data;
  char *line = NULL;
  GIOStatus status = g_io_channel_read_line (in, &line, NULL, NULL, NULL);

  if (status == G_IO_STATUS_AGAIN)
    return G_SOURCE_CONTINUE;
  if (status != G_IO_STATUS_NORMAL) {
    g_main_loop_quit (vs->loop);
    return G_SOURCE_REMOVE;
  }
  g_strstrip (line);
  if (strcmp (line, "report") == 0)
    viewers_report (vs->viewers, vs->t0, vs->bus);
  else
    g_printerr ("viewers: unknown command '%s'\n", line);
  g_free (line);
  return G_SOURCE_CONTINUE;
}

static Viewer *
viewer_start (GstElement * pipeline, const char *room_name,
    const char *identity, guint max_participants)
{
  Viewer *v = g_new0 (Viewer, 1);

  v->identity = g_strdup (identity);
  side_create (&v->side, pipeline, room_name, identity);
  if (max_participants > 0)
    g_object_set (v->side.room, "max-participants", max_participants, NULL);
  g_signal_connect (v->side.room, "track-added",
      G_CALLBACK (on_viewer_track), v);
  g_signal_connect (v->side.room, "error", G_CALLBACK (on_viewer_error), v);
  v->started_us = g_get_monotonic_time ();
  legba_room_connect_async (v->side.room, NULL, on_viewer_connected, v);
  return v;
}

/* after viewer_stop() and once its room's callbacks have run */
static void
viewer_free (Viewer * v)
{
  g_free (v->identity);
  g_free (v->error);
  g_free (v);
}

/* count viewers of room_name, identities PREFIX1..PREFIXcount, each a
 * room of its own in one pipeline, started batch at a time: each batch
 * once the one before has joined (or failed, or after 60 s) */
static int
mode_viewers (const char *room_name, const char *prefix, guint first_id,
    guint count, guint batch, guint max_participants)
{
  Viewers vs = { 0 };
  GstElement *pipeline = gst_pipeline_new ("viewers");
  GIOChannel *in;
  guint watch;

  vs.viewers = g_ptr_array_new_with_free_func ((GDestroyNotify) viewer_free);
  vs.loop = g_main_loop_new (NULL, FALSE);
  vs.bus = gst_element_get_bus (pipeline);
  gst_bus_set_sync_handler (vs.bus, on_viewers_bus_message, NULL, NULL);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  legba_room_prepare ();
  legba_room_prepare_wait ();
  for (guint first = 1; first <= count; first += batch) {
    guint last = MIN (first + batch - 1, count), joined = 0;
    gboolean expired = FALSE;
    guint id;

    for (guint i = first; i <= last; i++) {
      g_autofree char *identity = g_strdup_printf ("%s%u", prefix,
          first_id + i - 1);

      g_ptr_array_add (vs.viewers, viewer_start (pipeline, room_name,
              identity, max_participants));
    }
    if (first == 1)
      vs.t0 = ((Viewer *) g_ptr_array_index (vs.viewers, 0))->started_us;
    id = g_timeout_add_seconds (60, timed_out, &expired);
    for (;;) {
      guint settled = 0;

      joined = 0;
      for (guint i = first - 1; i < last; i++) {
        Viewer *v = g_ptr_array_index (vs.viewers, i);

        settled += viewer_settled (v);
        joined += v->side.joined_at != 0;
      }
      if (settled == last - first + 1 || expired)
        break;
      g_main_context_iteration (NULL, TRUE);
    }
    if (!expired)
      g_source_remove (id);
    g_print ("{\"event\": \"batch\", \"started\": %u, \"joined\": %u, "
        "\"ms\": %.1f}\n", last, joined,
        (g_get_monotonic_time () - vs.t0) / 1000.0);
    fflush (stdout);
  }
  g_print ("{\"event\": \"started\", \"viewers\": %u}\n", count);
  fflush (stdout);
  in = g_io_channel_unix_new (0);
  watch = g_io_add_watch (in, G_IO_IN | G_IO_HUP | G_IO_ERR,
      on_viewers_command, &vs);
  g_main_loop_run (vs.loop);
  if (g_main_context_find_source_by_id (NULL, watch) != NULL)
    g_source_remove (watch);
  g_io_channel_unref (in);
  for (guint i = 0; i < vs.viewers->len; i++)
    side_stop (&((Viewer *) g_ptr_array_index (vs.viewers, i))->side, FALSE);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (vs.bus);
  gst_object_unref (pipeline);
  /* let the rooms finish leaving */
  while (g_main_context_iteration (NULL, FALSE));
  g_ptr_array_unref (vs.viewers);
  g_main_loop_unref (vs.loop);
  return 0;
}

int
main (int argc, char **argv)
{
  guint iterations = 10, count = 100, frames = 300, width = 1280,
      height = 720, kbps = 1500;
  double seconds = 120, rate = 100, loss = 0;
  gint64 bytes = 4000000;
  guint size = 1024;
  char *url = NULL, *identity = NULL, *room_name = NULL;
  guint expect = 3, batch = 10, max_participants = 0, first_id = 1;
  gboolean in_process = FALSE;
  LegbaServer *server = NULL;
  GOptionEntry entries[] = {
    {"iterations", 0, 0, G_OPTION_ARG_INT, &iterations, "setup: pairs", "N"},
    {"count", 0, 0, G_OPTION_ARG_INT, &count, "pairs: pairs; viewers: viewers",
        "N"},
    {"no-teardown", 0, 0, G_OPTION_ARG_NONE, &no_teardown,
        "pairs: exit with the pairs up once the figures are printed", NULL},
    {"seconds", 0, 0, G_OPTION_ARG_DOUBLE, &seconds, "pairs: bound", "S"},
    {"frames", 0, 0, G_OPTION_ARG_INT, &frames, "call: frames", "N"},
    {"width", 0, 0, G_OPTION_ARG_INT, &width, "call: width", "W"},
    {"height", 0, 0, G_OPTION_ARG_INT, &height, "call: height", "H"},
    {"bitrate", 0, 0, G_OPTION_ARG_INT, &kbps, "call: kbit/s", "K"},
    {"sync", 0, 0, G_OPTION_ARG_NONE, &call_sync,
          "call: read the stamps after a clocksync (as a synced sink shows them)",
        NULL},
    {"latency", 0, 0, G_OPTION_ARG_INT, &call_latency,
        "call: the receiving room's latency (default: the room's)", "MS"},
    {"recalculate-latency", 0, 0, G_OPTION_ARG_NONE, &call_recalculate,
          "call: the sender's pipeline recomputes its latency after 10 frames",
        NULL},
    {"bytes", 0, 0, G_OPTION_ARG_INT64, &bytes, "bulk: bytes", "B"},
    {"size", 0, 0, G_OPTION_ARG_INT, &size, "bulk, rtt: message size", "S"},
    {"rate", 0, 0, G_OPTION_ARG_DOUBLE, &rate, "rtt: messages/s", "R"},
    {"sync-data", 0, 0, G_OPTION_ARG_NONE, &sync_data,
          "rtt: take and echo the messages on the threads they arrive on",
        NULL},
    {"server-url", 0, 0, G_OPTION_ARG_STRING, &url, "a legba-server's URL",
        "URL"},
    {"in-process", 0, 0, G_OPTION_ARG_NONE, &in_process,
        "setup, pairs: an in-process signaller, no server", NULL},
    {"identity", 0, 0, G_OPTION_ARG_STRING, &identity,
        "mesh: this participant's identity", "ID"},
    {"expect", 0, 0, G_OPTION_ARG_INT, &expect,
        "mesh: the other participants to decode", "N"},
    {"loss", 0, 0, G_OPTION_ARG_DOUBLE, &loss,
        "mesh: drop each RTP packet sent with this probability", "P"},
    {"room", 0, 0, G_OPTION_ARG_STRING, &room_name,
        "viewers: the room to join", "ROOM"},
    {"first", 0, 0, G_OPTION_ARG_INT, &first_id,
        "viewers: the first viewer's number (default 1)", "N"},
    {"batch", 0, 0, G_OPTION_ARG_INT, &batch,
        "viewers: viewers started at a time (default 10)", "N"},
    {"max-participants", 0, 0, G_OPTION_ARG_INT, &max_participants,
        "viewers: each room's max-participants", "N"},
    {NULL}
  };
  GOptionContext *ctx;
  GError *error = NULL;
  int rc;

  main_ms = now_ms ();
  census_raise_fd_limit ();
  ctx =
      g_option_context_new
      ("setup|pairs|bulk|rtt|call|first-frame|mesh|viewers");

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_add_group (ctx, gst_init_get_option_group ());
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || argc != 2) {
    g_printerr ("%s\n", error ? error->message : "give one mode");
    return 2;
  }
  g_option_context_free (ctx);
  loss_set_probability (loss);
  if (!loss_option_ok (argv[1]))
    return 2;
  if (sync_data && strcmp (argv[1], "rtt") != 0) {
    g_printerr ("--sync-data is for rtt\n");
    return 2;
  }
  if (in_process && strcmp (argv[1], "setup") != 0
      && strcmp (argv[1], "pairs") != 0) {
    g_printerr ("--in-process is for setup and pairs\n");
    return 2;
  }
  if (in_process) {
    hub = test_hub_new ();
    test_hub_set_ordered (hub, TRUE);
  } else if (url != NULL) {
    server_url = url;
    external_server = TRUE;
  } else {
    server = legba_server_new ();
    g_object_set (server, "max-connections", 0, NULL);
    if (!legba_server_add_app (server, APP_ID, APP_KEY, APP_SECRET, &error) ||
        !legba_server_listen (server, "127.0.0.1", 0, &error)) {
      g_printerr ("server: %s\n", error->message);
      return 1;
    }
    server_url = legba_server_get_url (server);
  }
  if (strcmp (argv[1], "setup") == 0)
    rc = mode_setup (iterations);
  else if (strcmp (argv[1], "pairs") == 0)
    rc = mode_pairs (count, seconds);
  else if (strcmp (argv[1], "bulk") == 0 && bytes > 0 && size > 0)
    rc = mode_bulk (bytes, size);
  else if (strcmp (argv[1], "rtt") == 0 && rate > 0 && size > 0)
    rc = mode_rtt (count, rate, size);
  else if (strcmp (argv[1], "call") == 0)
    rc = mode_call (frames, width, height, kbps);
  else if (strcmp (argv[1], "first-frame") == 0)
    rc = mode_first_frame (iterations, width, height, kbps);
  else if (strcmp (argv[1], "mesh") == 0 && identity != NULL && external_server)
    rc = mode_mesh (identity, expect, width, height, kbps);
  else if (strcmp (argv[1], "viewers") == 0 && room_name != NULL &&
      external_server && count > 0 && batch > 0)
    rc = mode_viewers (room_name, identity ? identity : "r", first_id, count,
        batch, max_participants);
  else {
    g_printerr ("unknown mode %s\n", argv[1]);
    rc = 2;
  }
  if (server != NULL) {
    legba_server_shutdown (server);
    g_object_unref (server);
  }
  g_clear_pointer (&hub, test_hub_free);
  g_free (server_url);
  g_free (identity);
  g_free (room_name);
  return rc;
}
