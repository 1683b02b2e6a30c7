/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What the LegbaRoom tests share: an in-process signaller with a hub the
 * tests can steer, and participants that decode and count what they get.
 */
#include "room-test.h"

#include <legba-test.h>

void
room_test_init (int *argc, char ***argv)
{
  gst_init (argc, argv);
  g_test_init (argc, argv, NULL);
  legba_test_tolerate_rtpsession_race ();
  legba_test_hold_sctp ();
}

/* ---- Participants ---- */

/* Key frames only on request (and the first): a participant that decodes
 * proves that key-frame requests reach the encoder. */
static const char *const video_sources[] = {
  /* h264 */
  "videotestsrc is-live=true pattern=ball ! "
      "video/x-raw,width=160,height=120,framerate=15/1 ! "
      "x264enc tune=zerolatency speed-preset=ultrafast key-int-max=1000 "
      "bitrate=200",
  /* vp8 */
  "videotestsrc is-live=true pattern=ball ! "
      "video/x-raw,width=160,height=120,framerate=15/1 ! "
      "vp8enc deadline=1 keyframe-max-dist=1000 target-bitrate=200000",
};

#define AUDIO_SOURCE \
  "audiotestsrc is-live=true wave=sine samplesperbuffer=960 ! " \
  "audio/x-raw,rate=48000,channels=1 ! opusenc"

typedef struct
{
  Participant *p;
  Remote *r;
  LegbaTrackKind kind;
} Counter;

static void
remote_free (gpointer data)
{
  Remote *r = data;

  g_free (r->id);
  g_free (r);
}

static Remote *
remote_for (Participant * p, LegbaParticipant * lp)
{
  const char *id = legba_participant_get_id (lp);
  Remote *r = g_hash_table_lookup (p->remotes, id);

  if (r == NULL) {
    r = g_new0 (Remote, 1);
    r->id = g_strdup (id);
    g_hash_table_insert (p->remotes, r->id, r);
  }
  return r;
}

static GstPadProbeReturn
count_decoded (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  Counter *c = data;
  gint64 now = g_get_monotonic_time ();

  g_mutex_lock (&c->p->lock);
  if (c->r->frames[c->kind]++ == 0 && c->kind == LEGBA_TRACK_KIND_VIDEO)
    c->r->first_video_time = now;
  if (c->kind == LEGBA_TRACK_KIND_VIDEO) {
    if (c->r->last_video_time > 0)
      c->r->max_video_gap = MAX (c->r->max_video_gap,
          now - c->r->last_video_time);
    c->r->last_video_time = now;
  }
  g_mutex_unlock (&c->p->lock);
  return GST_PAD_PROBE_OK;
}

/* The room loads the plugin of the decoder decodebin would choose for a
 * track before announcing it (legba-room-media.c): the handler that makes
 * it loads nothing on the room's context. */
static void
assert_decoder_loaded (const GstCaps * caps)
{
  GList *decoders = gst_element_factory_list_get_elements
      (GST_ELEMENT_FACTORY_TYPE_DECODER, GST_RANK_MARGINAL);
  GList *usable = gst_element_factory_list_filter (decoders, caps,
      GST_PAD_SINK, FALSE);
  g_autoptr (GstPlugin) plugin = NULL;

  usable = g_list_sort (usable, gst_plugin_feature_rank_compare_func);
  g_assert_nonnull (usable);
  plugin = gst_plugin_feature_get_plugin (usable->data);
  g_assert_nonnull (plugin);
  if (!gst_plugin_is_loaded (plugin))
    g_error ("track-added before the plugin of %s (%s) was loaded",
        GST_OBJECT_NAME (usable->data), gst_plugin_get_name (plugin));
  gst_plugin_feature_list_free (usable);
  gst_plugin_feature_list_free (decoders);
}

static void
on_track_added (LegbaRoom * room, LegbaParticipant * lp, LegbaTrackKind kind,
    GstPad * pad, Participant * p)
{
  Remote *r = remote_for (p, lp);
  g_autoptr (GstCaps) caps = gst_pad_query_caps (pad, NULL);
  const char *name = gst_structure_get_name (gst_caps_get_structure (caps,
          0));
  const char *decoder = strcmp (name, "video/x-h264") == 0 ? "avdec_h264" :
      strcmp (name, "video/x-vp8") == 0 ? "vp8dec" : "opusdec";
  g_autofree char *desc = g_strdup_printf ("%s name=dec ! fakesink "
      "name=sink sync=false async=false", decoder);
  g_autoptr (GError) error = NULL;
  GstElement *bin, *sink;
  GstPad *sinkpad;
  Counter *c = g_new0 (Counter, 1);

  assert_decoder_loaded (caps);
  bin = gst_parse_bin_from_description (desc, TRUE, &error);
  g_assert_no_error (error);
  g_assert_null (r->decoders[kind]);
  p->tracks_added++;
  c->p = p;
  c->r = r;
  c->kind = kind;
  sink = gst_bin_get_by_name (GST_BIN (bin), "sink");
  sinkpad = gst_element_get_static_pad (sink, "sink");
  gst_pad_add_probe (sinkpad, GST_PAD_PROBE_TYPE_BUFFER, count_decoded, c,
      g_free);
  gst_object_unref (sinkpad);
  gst_object_unref (sink);
  gst_bin_add (GST_BIN (p->pipeline), bin);
  gst_element_sync_state_with_parent (bin);
  sinkpad = gst_element_get_static_pad (bin, "sink");
  g_assert_cmpint (gst_pad_link (pad, sinkpad), ==, GST_PAD_LINK_OK);
  gst_object_unref (sinkpad);
  r->decoders[kind] = bin;
  r->pads[kind] = pad;
}

static void
on_track_removed (LegbaRoom * room, LegbaParticipant * lp,
    LegbaTrackKind kind, GstPad * pad, Participant * p)
{
  Remote *r = remote_for (p, lp);
  GstElement *bin = g_steal_pointer (&r->decoders[kind]);

  g_assert_nonnull (bin);
  g_assert_true (r->pads[kind] == pad);
  r->pads[kind] = NULL;
  p->tracks_removed++;
  gst_element_set_locked_state (bin, TRUE);
  gst_element_set_state (bin, GST_STATE_NULL);
  gst_bin_remove (GST_BIN (p->pipeline), bin);
}

static void
on_participant_joined (LegbaRoom * room, LegbaParticipant * lp, Participant * p)
{
  remote_for (p, lp);
  p->joined++;
}

static void
on_participant_left (LegbaRoom * room, LegbaParticipant * lp, Participant * p)
{
  p->left++;
}

static void
on_room_error (LegbaRoom * room, GError * error, Participant * p)
{
  g_test_message ("%s: room error: %s", p->identity, error->message);
  g_ptr_array_add (p->errors, g_error_copy (error));
}

static gboolean
on_bus_message (GstBus * bus, GstMessage * message, gpointer data)
{
  Participant *p = data;
  g_autoptr (GError) error = NULL;
  g_autofree char *debug = NULL;

  if (GST_MESSAGE_TYPE (message) != GST_MESSAGE_ERROR)
    return G_SOURCE_CONTINUE;
  gst_message_parse_error (message, &error, &debug);
  g_error ("%s: pipeline error from %s: %s (%s)", p->identity,
      GST_OBJECT_NAME (GST_MESSAGE_SRC (message)), error->message, debug);
  return G_SOURCE_CONTINUE;
}

void
participant_publish (Participant * p, LegbaTrackKind kind, GstElement * bin)
{
  g_autoptr (GError) error = NULL;
  GstPad *src, *sink;

  gst_bin_add (GST_BIN (p->pipeline), bin);
  sink = legba_room_add_track (p->room, kind, &error);
  g_assert_no_error (error);
  src = gst_element_get_static_pad (bin, "src");
  g_assert_cmpint (gst_pad_link (src, sink), ==, GST_PAD_LINK_OK);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_element_sync_state_with_parent (bin);
  p->sources[kind] = bin;
}

static void
add_source (Participant * p, LegbaTrackKind kind, const char *desc)
{
  g_autoptr (GError) error = NULL;
  GstElement *bin = gst_parse_bin_from_description (desc, TRUE, &error);

  g_assert_no_error (error);
  participant_publish (p, kind, bin);
}

Participant *
participant_new (LegbaSignaller * signaller, const char *identity,
    const char *video, gboolean audio)
{
  Participant *p = g_new0 (Participant, 1);
  GstBus *bus;

  /* GLib resets it at every test case; every media test makes
   * participants */
  legba_test_tolerate_rtpsession_race ();
  p->identity = g_strdup (identity);
  p->signaller = signaller;
  p->remotes = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
      remote_free);
  p->errors = g_ptr_array_new_with_free_func ((GDestroyNotify) g_error_free);
  g_mutex_init (&p->lock);
  p->pipeline = gst_pipeline_new (identity);
  bus = gst_element_get_bus (p->pipeline);
  gst_bus_add_watch (bus, on_bus_message, p);
  gst_object_unref (bus);
  p->room = legba_room_new (signaller, GST_BIN (p->pipeline));
  g_object_set (p->room, "room", ROOM, "identity", identity, NULL);
  g_signal_connect (p->room, "track-added", G_CALLBACK (on_track_added), p);
  g_signal_connect (p->room, "track-removed", G_CALLBACK (on_track_removed), p);
  g_signal_connect (p->room, "participant-joined",
      G_CALLBACK (on_participant_joined), p);
  g_signal_connect (p->room, "participant-left",
      G_CALLBACK (on_participant_left), p);
  g_signal_connect (p->room, "error", G_CALLBACK (on_room_error), p);
  if (video != NULL)
    add_source (p, LEGBA_TRACK_KIND_VIDEO,
        video_sources[strcmp (video, "vp8") == 0]);
  if (audio)
    add_source (p, LEGBA_TRACK_KIND_AUDIO, AUDIO_SOURCE);
  g_assert_cmpint (gst_element_set_state (p->pipeline, GST_STATE_PLAYING), !=,
      GST_STATE_CHANGE_FAILURE);
  return p;
}

Participant *
participant_new_for_server (Fixture * f, const char *identity,
    const char *video, gboolean audio)
{
  LegbaSignalClient *client = legba_signal_client_new (f->url, APP_KEY);

  g_object_set (client, "app-secret", APP_SECRET,
      "reconnect-delay-min", BACKOFF_MIN, "reconnect-delay-max", BACKOFF_MAX,
      NULL);
  return participant_new (LEGBA_SIGNALLER (client), identity, video, audio);
}

void
participant_free (Participant * p)
{
  GstBus *bus = gst_element_get_bus (p->pipeline);

  legba_room_disconnect (p->room);
  gst_element_set_state (p->pipeline, GST_STATE_NULL);
  g_clear_object (&p->room);
  gst_bus_remove_watch (bus);
  gst_object_unref (bus);
  gst_object_unref (p->pipeline);
  g_object_unref (p->signaller);
  g_hash_table_unref (p->remotes);
  g_ptr_array_unref (p->errors);
  g_clear_error (&p->connect_error);
  g_mutex_clear (&p->lock);
  g_free (p->identity);
  g_free (p);
}

static void
on_connected (GObject * object, GAsyncResult * result, gpointer data)
{
  Participant *p = data;

  legba_room_connect_finish (LEGBA_ROOM (object), result, &p->connect_error);
  p->connect_done = TRUE;
}

void
participant_connect (Participant * p)
{
  p->connect_done = FALSE;
  g_clear_error (&p->connect_error);
  p->connect_started = g_get_monotonic_time ();
  legba_room_connect_async (p->room, NULL, on_connected, p);
}

void
participant_connect_and_wait (Participant * p)
{
  participant_connect (p);
  ROOM_WAIT_FOR (p->connect_done, "the room to be joined");
  g_assert_no_error (p->connect_error);
  g_assert_cmpint (legba_room_get_state (p->room), ==,
      LEGBA_ROOM_STATE_CONNECTED);
}

guint64
participant_frames (Participant * p, Participant * from, LegbaTrackKind kind)
{
  const char *id = legba_room_get_participant_id (from->room);
  Remote *r = id ? g_hash_table_lookup (p->remotes, id) : NULL;
  guint64 frames;

  if (r == NULL)
    return 0;
  g_mutex_lock (&p->lock);
  frames = r->frames[kind];
  g_mutex_unlock (&p->lock);
  return frames;
}

gint64
participant_video_gap (Participant * p, Participant * from, gboolean reset)
{
  Remote *r = g_hash_table_lookup (p->remotes,
      legba_room_get_participant_id (from->room));
  gint64 gap;

  if (r == NULL)
    return 0;
  g_mutex_lock (&p->lock);
  gap = MAX (r->max_video_gap, g_get_monotonic_time () - r->last_video_time);
  if (reset) {
    r->max_video_gap = 0;
    r->last_video_time = g_get_monotonic_time ();
  }
  g_mutex_unlock (&p->lock);
  return gap;
}

gboolean
participant_decodes (Participant * p, Participant * from, guint64 frames)
{
  return (from->sources[0] == NULL ||
      participant_frames (p, from, LEGBA_TRACK_KIND_VIDEO) >= frames) &&
      (from->sources[1] == NULL ||
      participant_frames (p, from, LEGBA_TRACK_KIND_AUDIO) >= frames);
}

guint
participant_peer_bins (Participant * p)
{
  guint n = 0;

  for (GList * l = GST_BIN_CHILDREN (p->pipeline); l; l = l->next)
    if (g_str_has_prefix (GST_OBJECT_NAME (l->data), "legba-peer-"))
      n++;
  return n;
}

GstElement *
peer_bin_webrtcbin (GstElement * element)
{
  GstElement *webrtcbin;

  if (!g_str_has_prefix (GST_OBJECT_NAME (element), "legba-peer-"))
    return NULL;
  webrtcbin = gst_bin_get_by_name (GST_BIN (element), "webrtcbin");
  g_assert_nonnull (webrtcbin);
  return webrtcbin;
}

GPtrArray *
elements_by_factory (GstElement * bin, const char *factory_name)
{
  GstIterator *it = gst_bin_iterate_recurse (GST_BIN (bin));
  GPtrArray *found = g_ptr_array_new_with_free_func (gst_object_unref);
  GValue item = G_VALUE_INIT;
  GstIteratorResult r;

  while ((r = gst_iterator_next (it, &item)) != GST_ITERATOR_DONE) {
    GstElement *e;
    GstElementFactory *factory;

    if (r == GST_ITERATOR_RESYNC) {
      gst_iterator_resync (it);
      g_ptr_array_set_size (found, 0);
      continue;
    }
    g_assert_cmpint (r, ==, GST_ITERATOR_OK);
    e = g_value_get_object (&item);
    factory = gst_element_get_factory (e);
    if (factory != NULL &&
        strcmp (GST_OBJECT_NAME (factory), factory_name) == 0)
      g_ptr_array_add (found, gst_object_ref (e));
    g_value_reset (&item);
  }
  g_value_unset (&item);
  gst_iterator_free (it);
  return found;
}

LegbaParticipant *
participant_find (Participant * p, Participant * other)
{
  const char *id = legba_room_get_participant_id (other->room);

  return id ? legba_room_find_participant (p->room, id) : NULL;
}

gboolean
participant_connected_to (Participant * p, Participant * other)
{
  LegbaParticipant *lp = participant_find (p, other);

  return lp != NULL &&
      legba_participant_get_state (lp) == LEGBA_PARTICIPANT_STATE_CONNECTED;
}

void
assert_no_room_errors (Participant * p)
{
  if (p->errors->len > 0)
    g_error ("%s: %u room errors, the first: %s", p->identity,
        p->errors->len, ((GError *) p->errors->pdata[0])->message);
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

void
wait_until_all_decode (Participant ** all, guint n, guint64 frames)
{
  ROOM_WAIT_FOR (all_decode (all, n, frames),
      "every participant to decode every other's video and audio");
}
