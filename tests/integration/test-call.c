/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaCall against legba-server in-process: three participants that
 * count what they decode from each other, a grid that re-tiles as one
 * leaves and comes back, data between them, mute and unmute announced on
 * legba.mute, a viewer that counts what it receives without decoding it,
 * the Opus encoder's FEC following the loss a receiver reports, and
 * configurations that cannot
 * work giving clear errors.
 */
#include "signal-test.h"

#include <legba-test.h>

/* media on a machine that may be busy (the suite also runs under
 * AddressSanitizer): long deadlines, never a fixed sleep */
#define CALL_WAIT_MS 90000
#define FRAMES 10

#define CALL_WAIT_FOR(expr, reason) G_STMT_START { \
    gboolean expired_; \
    GSource *deadline_ = deadline_new (CALL_WAIT_MS, &expired_); \
    while (!(expr) && !expired_) \
      g_main_context_iteration (NULL, TRUE); \
    deadline_free (deadline_); \
    if (!(expr)) \
      g_error ("Timed out after %d ms waiting for %s", CALL_WAIT_MS, \
          reason); \
  } G_STMT_END

typedef struct
{
  LegbaCall *call;
  GPtrArray *errors;
  GPtrArray *warnings;
  guint joined;
  guint left;
} Member;

static void
on_error (LegbaCall * call, GError * error, Member * m)
{
  g_test_message ("error: %s", error->message);
  g_ptr_array_add (m->errors, g_error_copy (error));
}

static void
on_warning (LegbaCall * call, GError * error, Member * m)
{
  g_test_message ("warning: %s", error->message);
  g_ptr_array_add (m->warnings, g_error_copy (error));
}

static void
on_joined (LegbaCall * call, LegbaParticipant * p, Member * m)
{
  m->joined++;
}

static void
on_left (LegbaCall * call, LegbaParticipant * p, Member * m)
{
  m->left++;
}

static Member *
member_new (Fixture * f, const char *identity)
{
  Member *m = g_new0 (Member, 1);

  m->call = legba_call_new (f ? f->url : "ws://127.0.0.1:1", ROOM, identity);
  g_object_set (m->call, "app-key", APP_KEY, "app-secret", APP_SECRET,
      "width", 160, "height", 120, "framerate", 15, "bitrate", 200000,
      "stats-interval", 200, "encoder-proof-timeout", 30000, NULL);
  m->errors = g_ptr_array_new_with_free_func ((GDestroyNotify) g_error_free);
  m->warnings = g_ptr_array_new_with_free_func ((GDestroyNotify)
      g_error_free);
  g_signal_connect (m->call, "error", G_CALLBACK (on_error), m);
  g_signal_connect (m->call, "warning", G_CALLBACK (on_warning), m);
  g_signal_connect (m->call, "participant-joined", G_CALLBACK (on_joined), m);
  g_signal_connect (m->call, "participant-left", G_CALLBACK (on_left), m);
  return m;
}

static void
member_start (Member * m)
{
  g_autoptr (GError) error = NULL;
  gboolean ok = legba_call_start (m->call, &error);

  g_assert_no_error (error);
  g_assert_true (ok);
}

static void
member_free (Member * m)
{
  legba_call_stop (m->call);
  g_object_unref (m->call);
  g_ptr_array_unref (m->errors);
  g_ptr_array_unref (m->warnings);
  g_free (m);
}

static const char *
participant_id (Member * m)
{
  LegbaRoom *room = legba_call_get_room (m->call);

  return room ? legba_room_get_participant_id (room) : NULL;
}

static guint64
received (Member * m, Member * from, const char *field)
{
  const char *id = participant_id (from);
  GstStructure *s = id ? legba_call_get_remote_stats (m->call, id) : NULL;
  guint64 n = 0;

  if (s != NULL) {
    gst_structure_get_uint64 (s, field, &n);
    gst_structure_free (s);
  }
  return n;
}

static gboolean
decodes (Member * m, Member * from, guint64 frames)
{
  return received (m, from, "video-frames") >= frames &&
      received (m, from, "audio-buffers") >= frames;
}

static gboolean
all_decode (Member ** all, guint n, guint64 frames)
{
  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < n; j++)
      if (i != j && !decodes (all[i], all[j], frames))
        return FALSE;
  return TRUE;
}

static gboolean
all_received_data (Member ** all, guint n)
{
  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < n; j++)
      if (i != j && received (all[i], all[j], "data-messages") < 1)
        return FALSE;
  return TRUE;
}

static gboolean
remote_muted (Member * m, Member * from, const char *field)
{
  const char *id = participant_id (from);
  GstStructure *s = id ? legba_call_get_remote_stats (m->call, id) : NULL;
  gboolean muted = FALSE;

  if (s != NULL) {
    gst_structure_get_boolean (s, field, &muted);
    gst_structure_free (s);
  }
  return muted;
}

static gboolean
in_call (Member * m)
{
  return legba_call_get_state (m->call) == LEGBA_CALL_STATE_IN_CALL;
}

/* the grid's compositor (a reference) */
static GstElement *
grid_of (Member * m)
{
  return gst_bin_get_by_name (GST_BIN (legba_call_get_pipeline (m->call)),
      "legba-grid");
}

/* the tiles of the grid: the compositor's sink pads but the background's */
static guint
tiles (Member * m, gint width, gint height)
{
  GstElement *grid = grid_of (m);
  guint n = 0;

  for (GList * l = GST_ELEMENT (grid)->sinkpads; l; l = l->next) {
    gint w, h;
    guint zorder;

    g_object_get (l->data, "width", &w, "height", &h, "zorder", &zorder, NULL);
    if (zorder == 1 && w == width && h == height)
      n++;
  }
  gst_object_unref (grid);
  return n;
}

static guint
grid_pads (Member * m)
{
  GstElement *grid = grid_of (m);
  guint n = grid->numsinkpads - 1;

  gst_object_unref (grid);
  return n;
}

/* the format the grid is composed in (the compositor's output) */
static char *
grid_format (Member * m)
{
  GstElement *grid = grid_of (m);
  GstPad *src = gst_element_get_static_pad (grid, "src");
  GstCaps *caps = gst_pad_get_current_caps (src);
  char *format = caps ? g_strdup (gst_structure_get_string
      (gst_caps_get_structure (caps, 0), "format")) : NULL;

  gst_clear_caps (&caps);
  gst_object_unref (src);
  gst_object_unref (grid);
  return format;
}

static gboolean
has_encoder (Member * m)
{
  GstStructure *s = legba_call_get_local_stats (m->call);
  gboolean found = gst_structure_has_field (s, "encoder");

  gst_structure_free (s);
  return found;
}

/* Both local tracks report their own threads' CPU time. */
static gboolean
has_track_cpu (Member * m)
{
  GstStructure *s = legba_call_get_local_stats (m->call);
  gdouble video = 0, audio = 0;

  gst_structure_get_double (s, "video-cpu", &video);
  gst_structure_get_double (s, "audio-cpu", &audio);
  gst_structure_free (s);
  return video > 0 && audio > 0;
}

/* Three participants count what they decode from each other; alice shows
 * a grid of 320x180, composed in I420: two tiles of 160x180, one of
 * 320x180 when carol has left, two again when she is back. */
static void
test_three (Fixture * f, gconstpointer data)
{
  Member *a = member_new (f, "alice");
  Member *b = member_new (f, "bob");
  Member *c = member_new (f, "carol");
  Member *all[] = { a, b, c };
  g_auto (GStrv) remotes = NULL;
  g_autofree char *old_carol = NULL;

  g_object_set (a->call, "display", LEGBA_CALL_DISPLAY_GRID,
      "grid-width", 320, "grid-height", 180, "play-audio", FALSE,
      "grid-sink", gst_element_factory_make ("fakesink", NULL), NULL);
  for (guint i = 0; i < 3; i++)
    member_start (all[i]);
  CALL_WAIT_FOR (in_call (a) && in_call (b) && in_call (c), "three joins");
  CALL_WAIT_FOR (all_decode (all, 3, FRAMES),
      "every participant to decode every other's video and audio");
  for (guint i = 0; i < 3; i++) {
    g_autoptr (GstStructure) stats = NULL;

    g_strfreev (remotes);
    remotes = legba_call_list_remotes (all[i]->call);
    g_assert_cmpuint (g_strv_length (remotes), ==, 2);
    stats = legba_call_get_remote_stats (all[i]->call, remotes[0]);
    g_assert_true (gst_structure_has_field (stats, "identity"));
    CALL_WAIT_FOR (has_encoder (all[i]), "the encoder in use");
  }
  CALL_WAIT_FOR (tiles (a, 160, 180) == 2, "two tiles side by side");
  {
    /* composed in I420, which the compositor blends in place */
    g_autofree char *format = grid_format (a);

    g_assert_cmpstr (format, ==, "I420");
  }
  /* data both ways between every pair */
  for (guint i = 0; i < 3; i++) {
    g_autoptr (JsonNode) hello = json_from_string ("{\"text\": \"hello\"}",
        NULL);
    g_autoptr (GError) error = NULL;

    g_assert_true (legba_room_send_json (legba_call_get_room (all[i]->call),
            hello, "chat", LEGBA_RELIABILITY_RELIABLE, NULL, &error));
    g_assert_no_error (error);
  }
  CALL_WAIT_FOR (all_received_data (all, 3), "a message from every other");

  /* carol leaves: one tile fills the grid */
  old_carol = g_strdup (participant_id (c));
  legba_call_stop (c->call);
  g_assert_cmpint (legba_call_get_state (c->call), ==,
      LEGBA_CALL_STATE_STOPPED);
  CALL_WAIT_FOR (a->left == 1 && b->left == 1, "carol to leave");
  g_assert_cmpuint (grid_pads (a), ==, 1);
  g_assert_cmpuint (tiles (a, 320, 180), ==, 1);
  {
    g_autoptr (GstStructure) s = legba_call_get_remote_stats (a->call,
        old_carol);
    gboolean present = TRUE;

    gst_structure_get_boolean (s, "present", &present);
    g_assert_false (present);
  }

  /* and comes back, as a new participant id */
  member_start (c);
  CALL_WAIT_FOR (in_call (c), "carol to join again");
  g_assert_cmpstr (participant_id (c), !=, old_carol);
  CALL_WAIT_FOR (all_decode (all, 3, FRAMES),
      "every participant to decode carol again, and carol them");
  g_assert_cmpuint (grid_pads (a), ==, 2);
  g_assert_cmpuint (tiles (a, 160, 180), ==, 2);
  for (guint i = 0; i < 3; i++)
    g_assert_cmpuint (all[i]->errors->len, ==, 0);
  for (guint i = 0; i < 3; i++)
    member_free (all[i]);
}

/* Muting stops what is sent; unmuting starts it again, with a key frame
 * so that the video is decoded at once. */
static void
test_mute (Fixture * f, gconstpointer data)
{
  Member *a = member_new (f, "alice");
  Member *b = member_new (f, "bob");
  Member *all[] = { a, b };
  guint64 sent, video, audio, mark;
  GstStructure *s;

  member_start (a);
  member_start (b);
  CALL_WAIT_FOR (all_decode (all, 2, FRAMES), "both to decode each other");
  CALL_WAIT_FOR (has_track_cpu (a), "alice's video and audio CPU time");
  legba_call_set_video_muted (a->call, TRUE);
  legba_call_set_audio_muted (a->call, TRUE);
  g_assert_true (legba_call_get_video_muted (a->call));
  /* announced on legba.mute */
  CALL_WAIT_FOR (remote_muted (b, a, "video-muted") &&
      remote_muted (b, a, "audio-muted"), "bob to be told alice muted");
  /* let what was in flight arrive: bob's next frames mark the time */
  mark = received (a, b, "video-frames");
  CALL_WAIT_FOR (received (a, b, "video-frames") >= mark + 15,
      "bob's next frames");
  s = legba_call_get_local_stats (a->call);
  gst_structure_get_uint64 (s, "video-frames-sent", &sent);
  gst_structure_free (s);
  video = received (b, a, "video-frames");
  audio = received (b, a, "audio-buffers");
  mark = received (a, b, "video-frames");
  CALL_WAIT_FOR (received (a, b, "video-frames") >= mark + 15,
      "bob's next frames");
  s = legba_call_get_local_stats (a->call);
  g_assert_true (gst_structure_has_field_typed (s, "video-muted",
          G_TYPE_BOOLEAN));
  gst_structure_get_uint64 (s, "video-frames-sent", &mark);
  gst_structure_free (s);
  g_assert_cmpuint (mark, ==, sent);
  g_assert_cmpuint (received (b, a, "video-frames"), ==, video);
  g_assert_cmpuint (received (b, a, "audio-buffers"), ==, audio);

  legba_call_set_video_muted (a->call, FALSE);
  legba_call_set_audio_muted (a->call, FALSE);
  CALL_WAIT_FOR (!remote_muted (b, a, "video-muted") &&
      !remote_muted (b, a, "audio-muted"), "bob to be told alice unmuted");
  CALL_WAIT_FOR (received (b, a, "video-frames") >= video + FRAMES &&
      received (b, a, "audio-buffers") >= audio + FRAMES,
      "alice's video and audio again");
  g_assert_cmpuint (a->errors->len, ==, 0);
  member_free (a);
  member_free (b);
}

static gboolean
has_factory (GstBin * bin, const char *factory)
{
  g_autoptr (GstIterator) it = gst_bin_iterate_recurse (bin);
  GValue item = G_VALUE_INIT;
  gboolean found = FALSE;

  while (!found && gst_iterator_next (it, &item) == GST_ITERATOR_OK) {
    GstElementFactory *f = gst_element_get_factory (g_value_get_object (&item));

    found = f != NULL && strcmp (GST_OBJECT_NAME (f), factory) == 0;
    g_value_reset (&item);
  }
  g_value_unset (&item);
  return found;
}

/* A viewer that decodes nothing: it counts alice's video frames and audio
 * packets as they arrive, and its pipeline holds no decoder. */
static void
test_undecoded (Fixture * f, gconstpointer data)
{
  Member *a = member_new (f, "alice");
  Member *v = member_new (f, "victor");
  GstBin *pipeline;

  g_object_set (v->call, "video", LEGBA_CALL_VIDEO_NONE, "audio",
      LEGBA_CALL_AUDIO_NONE, "display", LEGBA_CALL_DISPLAY_UNDECODED, NULL);
  member_start (a);
  member_start (v);
  CALL_WAIT_FOR (decodes (v, a, FRAMES), "victor to receive alice's video "
      "and audio");
  pipeline = GST_BIN (legba_call_get_pipeline (v->call));
  g_assert_false (has_factory (pipeline, "decodebin"));
  g_assert_true (has_factory (pipeline, "fakesink"));
  g_assert_cmpuint (v->errors->len, ==, 0);
  g_assert_cmpuint (v->warnings->len, ==, 0);
  member_free (v);
  member_free (a);
}

/* The first element of factory_name in m's pipeline (a reference), or
 * NULL */
static GstElement *
find_element (Member * m, const char *factory_name)
{
  GstIterator *it =
      gst_bin_iterate_recurse (GST_BIN (legba_call_get_pipeline (m->call)));
  GValue item = G_VALUE_INIT;
  GstElement *found = NULL;

  while (found == NULL && gst_iterator_next (it, &item) == GST_ITERATOR_OK) {
    GstElement *e = g_value_get_object (&item);
    GstElementFactory *factory = gst_element_get_factory (e);

    if (factory != NULL && g_strcmp0 (GST_OBJECT_NAME (factory),
            factory_name) == 0)
      found = gst_object_ref (e);
    g_value_reset (&item);
  }
  g_value_unset (&item);
  gst_iterator_free (it);
  return found;
}

/* What m's Opus encoder sizes its in-band FEC for, percent; -1 without */
static gint
audio_loss (Member * m)
{
  g_autoptr (GstStructure) s = legba_call_get_local_stats (m->call);
  gint percentage = -1;

  gst_structure_get_int (s, "audio-packet-loss-percentage", &percentage);
  return percentage;
}

/* Opus in-band FEC sized for the loss the receiver reports: with every
 * 20th packet bob takes in lost, alice's opusenc (in-band FEC on) is
 * told about 5% in its packet-loss-percentage; once the loss stops, it
 * comes back down. */
static void
test_audio_loss (Fixture * f, gconstpointer data)
{
  Member *a = member_new (f, "alice");
  Member *b = member_new (f, "bob");
  Member *all[] = { a, b };
  g_autoptr (GstElement) webrtcbin = NULL;
  g_autoptr (GstElement) rtpbin = NULL;
  g_autoptr (GstElement) opusenc = NULL;
  g_autoptr (GstPad) in = NULL;
  gboolean fec = FALSE;
  gint percentage = 0;
  guint dropped = 0;
  gulong probe;

  for (guint i = 0; i < 2; i++)
    member_start (all[i]);
  CALL_WAIT_FOR (in_call (a) && in_call (b), "two joins");
  CALL_WAIT_FOR (all_decode (all, 2, FRAMES),
      "each to decode the other's video and audio");
  g_assert_cmpint (audio_loss (a), ==, 0);
  opusenc = find_element (a, "opusenc");
  g_assert_nonnull (opusenc);
  g_object_get (opusenc, "inband-fec", &fec, NULL);
  g_assert_true (fec);

  webrtcbin = find_element (b, "webrtcbin");
  g_assert_nonnull (webrtcbin);
  rtpbin = gst_bin_get_by_name (GST_BIN (webrtcbin), "rtpbin");
  in = gst_element_get_static_pad (rtpbin, "recv_rtp_sink_0");
  probe = gst_pad_add_probe (in, GST_PAD_PROBE_TYPE_BUFFER |
      GST_PAD_PROBE_TYPE_BUFFER_LIST, legba_test_lose_every_20th, &dropped,
      NULL);
  CALL_WAIT_FOR (audio_loss (a) >= 3, "alice's Opus encoder to be told of "
      "bob's loss");
  g_object_get (opusenc, "packet-loss-percentage", &percentage, NULL);
  g_test_message ("%u packets dropped; opusenc told %d%%", dropped, percentage);
  g_assert_cmpint (percentage, ==, audio_loss (a));
  g_assert_cmpint (percentage, <=, 10);

  gst_pad_remove_probe (in, probe);
  CALL_WAIT_FOR (audio_loss (a) <= 1, "the percentage to come back down "
      "once nothing is lost");
  for (guint i = 0; i < 2; i++)
    g_assert_cmpuint (all[i]->errors->len, ==, 0);
  for (guint i = 0; i < 2; i++)
    member_free (all[i]);
}

static void
expect_start_error (Member * m, LegbaCallError code, const char *words)
{
  g_autoptr (GError) error = NULL;

  g_assert_false (legba_call_start (m->call, &error));
  g_assert_error (error, LEGBA_CALL_ERROR, (gint) code);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, words));
  g_assert_cmpint (legba_call_get_state (m->call), ==,
      LEGBA_CALL_STATE_STOPPED);
}

static void
expect_error_signal (Member * m, LegbaCallError code)
{
  member_start (m);
  CALL_WAIT_FOR (m->errors->len > 0, "the call to fail");
  g_assert_error ((GError *) m->errors->pdata[0], LEGBA_CALL_ERROR,
      (gint) code);
  g_assert_cmpint (legba_call_get_state (m->call), ==, LEGBA_CALL_STATE_FAILED);
  g_assert_null (legba_call_get_pipeline (m->call));
}

static void
test_bad_config (Fixture * f, gconstpointer data)
{
  Member *m = member_new (f, "alice");
  LegbaCallVideo video;

  g_assert_false (legba_call_video_from_string ("projector", &video));
  g_object_set (m->call, "identity", NULL, NULL);
  expect_start_error (m, LEGBA_CALL_ERROR_INVALID, "identity");
  g_object_set (m->call, "identity", "alice", "app-secret", NULL, NULL);
  expect_start_error (m, LEGBA_CALL_ERROR_INVALID, "authenticate");
  g_object_set (m->call, "app-secret", APP_SECRET, "video",
      LEGBA_CALL_VIDEO_FILE, "video-file", "/nonexistent/clip.webm", NULL);
  expect_start_error (m, LEGBA_CALL_ERROR_INVALID, "/nonexistent/clip.webm");
  g_object_set (m->call, "video", LEGBA_CALL_VIDEO_CAMERA, NULL);
  if (!g_file_test ("/dev/video0", G_FILE_TEST_EXISTS))
    expect_start_error (m, LEGBA_CALL_ERROR_NO_CAMERA, "camera");
  member_free (m);
}

static void
test_unreachable (Fixture * f, gconstpointer data)
{
  Member *m = member_new (f, "alice");

  stop_server (f);
  expect_error_signal (m, LEGBA_CALL_ERROR_UNREACHABLE);
  member_free (m);
}

static void
test_refused (Fixture * f, gconstpointer data)
{
  Member *m = member_new (f, "alice");

  g_object_set (m->call, "app-secret", "not-the-secret", NULL);
  expect_error_signal (m, LEGBA_CALL_ERROR_REFUSED);
  g_ptr_array_set_size (m->errors, 0);
  /* a forged join token */
  g_object_set (m->call, "app-secret", NULL, "app-id", APP_ID,
      "token", "eyJhbGciOiJIUzI1NiJ9.e30.bm90LWEtc2lnbmF0dXJl", NULL);
  expect_error_signal (m, LEGBA_CALL_ERROR_REFUSED);
  member_free (m);
}

static void
test_no_encoder (Fixture * f, gconstpointer data)
{
  Member *m = member_new (f, "alice");

  g_object_set (m->call, "encoder-factory", "no-such-encoder", NULL);
  expect_error_signal (m, LEGBA_CALL_ERROR_NO_ENCODER);
  member_free (m);
}

/* copy stands for source: the same description, range and default */
static void
assert_same_setting (GParamSpec * copy, GParamSpec * source)
{
  g_assert_nonnull (copy);
  g_assert_nonnull (source);
  g_assert_true (G_PARAM_SPEC_TYPE (copy) == G_PARAM_SPEC_TYPE (source));
  g_assert_cmpstr (g_param_spec_get_nick (copy), ==,
      g_param_spec_get_nick (source));
  g_assert_cmpstr (g_param_spec_get_blurb (copy), ==,
      g_param_spec_get_blurb (source));
  g_assert_cmpint (g_param_values_cmp (copy,
          g_param_spec_get_default_value (copy),
          g_param_spec_get_default_value (source)), ==, 0);
}

/* The call's signal client and room settings are theirs, under the names
 * GI users set */
static void
test_settings_declared_once (void)
{
  static const char *const client_settings[] = {
    "server-url", "app-key", "app-secret", "app-id", "auth-url", "token",
  };
  static const char *const room_settings[] = {
    "room", "identity", "display-name",
  };
  GObjectClass *call = g_type_class_ref (LEGBA_TYPE_CALL);
  GObjectClass *client = g_type_class_ref (LEGBA_TYPE_SIGNAL_CLIENT);
  GObjectClass *room = g_type_class_ref (LEGBA_TYPE_ROOM);

  for (guint i = 0; i < G_N_ELEMENTS (client_settings); i++)
    assert_same_setting (g_object_class_find_property (call,
            client_settings[i]), g_object_class_find_property (client,
            client_settings[i]));
  for (guint i = 0; i < G_N_ELEMENTS (room_settings); i++)
    assert_same_setting (g_object_class_find_property (call,
            room_settings[i]), g_object_class_find_property (room,
            room_settings[i]));
  g_type_class_unref (room);
  g_type_class_unref (client);
  g_type_class_unref (call);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  legba_test_hold_sctp ();

#define ADD_CALL(path, func) \
  g_test_add ("/call/" path, Fixture, NULL, fixture_setup, func, \
      fixture_teardown)
  ADD_CALL ("three", test_three);
  ADD_CALL ("mute", test_mute);
  ADD_CALL ("undecoded", test_undecoded);
  ADD_CALL ("audio-loss", test_audio_loss);
  ADD_CALL ("bad-config", test_bad_config);
  ADD_CALL ("unreachable", test_unreachable);
  ADD_CALL ("refused", test_refused);
  ADD_CALL ("no-encoder", test_no_encoder);
  g_test_add_func ("/call/settings-declared-once", test_settings_declared_once);
  return g_test_run ();
}
