/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * H.264 with several slices per frame (x264enc tune=zerolatency, as
 * legbavideoenc runs it) through a room, legba-server in-process: the
 * receiver links avdec_h264 straight to the room's track pad and must
 * decode the frames the sender encoded, key frames and the others. Each
 * frame carries its number in its pixels twice (legbastamp), at the top
 * and, upside down, at the bottom, in the first and the last slice; the
 * receiver reads both back after the decoder (legba-stamp.h). A frame
 * counts only when both read and agree (a slice the decoder lost or
 * concealed from an earlier picture shows a wrong number or none), and
 * the count is over a fixed run of frame numbers.
 *
 * That the room tells webrtcbin a live track has no latency to wait out
 * before sending.
 *
 * And a change of size mid-stream through a room: legbavideoenc sends the
 * picture scaled down under a low bitrate, the bitrate is raised while
 * playing, and the receiver's decoder must output frames of the larger
 * size (H.264 from openh264enc, decoded by avdec_h264; VP8 from vp8enc,
 * decoded by vp8dec).
 */
#include "room-test.h"

#include "legba-stamp.h"

#include <string.h>

/* frames counted, from the first the receiver reads */
#define RUN 150

/* 30 frames a second of moving bars, a key frame every 2 s, several
 * slices a frame (sliced threads: tune=zerolatency; threads=4 asks for
 * them whatever the machine's core count) */
#define SENDER \
  "videotestsrc is-live=true pattern=smpte horizontal-speed=4 ! " \
  "video/x-raw,format=I420,width=640,height=360,framerate=30/1 ! " \
  "legbastamp ! videoflip video-direction=vert ! legbastamp ! " \
  "videoflip video-direction=vert ! " \
  "x264enc tune=zerolatency speed-preset=ultrafast threads=4 " \
  "key-int-max=60 bitrate=1000"

typedef struct
{
  GMutex lock;
  GHashTable *key_pts;          /* of key frames into the decoder */
  LegbaStampLayout *layout;     /* streaming thread only */
  GstVideoInfo info;
  GstBuffer *flipped;           /* streaming thread only */
  gboolean started;
  guint16 first;                /* frame number of the first frame read */
  gboolean seen[RUN];
  gboolean key[RUN];
  gboolean done;                /* a frame after the run was read */
  guint64 broken;               /* frames out whose bottom number is not theirs */
} Count;

static GstPadProbeReturn
into_decoder (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  Count *c = data;
  GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER (info);

  if (!GST_BUFFER_FLAG_IS_SET (buffer, GST_BUFFER_FLAG_DELTA_UNIT)
      && GST_BUFFER_PTS_IS_VALID (buffer)) {
    g_mutex_lock (&c->lock);
    g_hash_table_add (c->key_pts, g_memdup2 (&GST_BUFFER_PTS (buffer),
            sizeof (GstClockTime)));
    g_mutex_unlock (&c->lock);
  }
  return GST_PAD_PROBE_OK;
}

/* The run starts at the first frame whose top number reads and ends at
 * the first past it: a frame with a broken slice still shows where it
 * is. */
static void
count_frame (Count * c, guint16 number, gboolean whole, gboolean key)
{
  guint16 at;

  if (!c->started) {
    c->started = TRUE;
    c->first = number;
  }
  at = (guint16) (number - c->first);
  if (at < RUN) {
    c->seen[at] |= whole;
    c->key[at] |= key && whole;
    c->broken += !whole;
  } else if (at < G_MAXUINT16 / 2) {
    c->done = TRUE;
  }
}

/* The frame upside down, into c->flipped: its bottom stamp, readable. */
static void
flip (Count * c, const GstVideoFrame * frame, GstVideoFrame * out)
{
  if (c->flipped == NULL)
    c->flipped = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (&c->info),
        NULL);
  g_assert_true (gst_video_frame_map (out, &c->info, c->flipped,
          GST_MAP_WRITE));
  for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES (frame); p++) {
    guint rows = GST_VIDEO_FRAME_COMP_HEIGHT (frame, p);
    guint bytes = GST_VIDEO_FRAME_COMP_WIDTH (frame, p) *
        GST_VIDEO_FRAME_COMP_PSTRIDE (frame, p);
    const guint8 *from = GST_VIDEO_FRAME_PLANE_DATA (frame, p);
    guint8 *to = GST_VIDEO_FRAME_PLANE_DATA (out, p);

    for (guint r = 0; r < rows; r++)
      memcpy (to + r * GST_VIDEO_FRAME_PLANE_STRIDE (out, p),
          from + (rows - 1 - r) * GST_VIDEO_FRAME_PLANE_STRIDE (frame, p),
          bytes);
  }
}

static GstPadProbeReturn
out_of_decoder (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  Count *c = data;
  GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER (info);
  GstVideoFrame frame, flipped;
  LegbaStampCode top, bottom;
  gboolean top_read, whole, key;

  if (c->layout == NULL) {
    g_autoptr (GstCaps) caps = gst_pad_get_current_caps (pad);

    g_assert_true (gst_video_info_from_caps (&c->info, caps));
    c->layout = legba_stamp_layout_new (&c->info, 0);
    g_assert_nonnull (c->layout);
  }
  g_assert_true (gst_video_frame_map (&frame, &c->info, buffer, GST_MAP_READ));
  flip (c, &frame, &flipped);
  top_read = legba_stamp_layout_read (c->layout, &frame, &top) ==
      LEGBA_STAMP_READ_OK;
  whole = top_read && legba_stamp_layout_read (c->layout, &flipped,
      &bottom) == LEGBA_STAMP_READ_OK && top.counter == bottom.counter;
  gst_video_frame_unmap (&flipped);
  gst_video_frame_unmap (&frame);

  g_mutex_lock (&c->lock);
  key = GST_BUFFER_PTS_IS_VALID (buffer) &&
      g_hash_table_contains (c->key_pts, &GST_BUFFER_PTS (buffer));
  if (top_read)
    count_frame (c, top.counter, whole, key);
  g_mutex_unlock (&c->lock);
  return GST_PAD_PROBE_OK;
}

static gboolean
count_done (Count * c)
{
  gboolean done;

  g_mutex_lock (&c->lock);
  done = c->done;
  g_mutex_unlock (&c->lock);
  return done;
}

static void
add_stamped_h264 (Participant * p)
{
  g_autoptr (GError) error = NULL;
  GstElement *bin = gst_parse_bin_from_description (SENDER, TRUE, &error);

  g_assert_no_error (error);
  participant_publish (p, LEGBA_TRACK_KIND_VIDEO, bin);
}

/* The decoder room-test.c links to the track pad: avdec_h264, nothing
 * between it and the pad. */
static GstElement *
decoder_of (Participant * p, Participant * from)
{
  const char *id = legba_room_get_participant_id (from->room);
  Remote *r = g_hash_table_lookup (p->remotes, id);
  GstElement *bin = r ? r->decoders[LEGBA_TRACK_KIND_VIDEO] : NULL;

  return bin ? gst_bin_get_by_name (GST_BIN (bin), "dec") : NULL;
}

static void
test_multi_slice (Fixture * f, gconstpointer data)
{
  Participant *alice = participant_new_for_server (f, "alice", NULL, FALSE);
  Participant *bob = participant_new_for_server (f, "bob", NULL, FALSE);
  g_autoptr (GstElement) dec = NULL;
  GstPad *pad;
  Count c = { 0, };
  guint decoded = 0, keys = 0;

  g_mutex_init (&c.lock);
  c.key_pts = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  /* a machine this test shares may be busy: the jitter buffer leaves
   * retransmissions time to fill what the loopback lost, so that what is
   * counted is what the receive path makes of the stream */
  g_object_set (bob->room, "latency", 2000, NULL);
  add_stamped_h264 (alice);
  participant_connect_and_wait (alice);
  participant_connect_and_wait (bob);
  ROOM_WAIT_FOR (participant_frames (bob, alice, LEGBA_TRACK_KIND_VIDEO) > 0,
      "bob to decode a frame of alice's video");

  dec = decoder_of (bob, alice);
  g_assert_nonnull (dec);
  g_assert_cmpstr (GST_OBJECT_NAME (gst_element_get_factory (dec)), ==,
      "avdec_h264");
  pad = gst_element_get_static_pad (dec, "sink");
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, into_decoder, &c, NULL);
  gst_object_unref (pad);
  pad = gst_element_get_static_pad (dec, "src");
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, out_of_decoder, &c, NULL);
  gst_object_unref (pad);

  ROOM_WAIT_FOR (count_done (&c), "bob to read a frame number past the run");

  g_mutex_lock (&c.lock);
  for (guint i = 0; i < RUN; i++) {
    decoded += c.seen[i];
    keys += c.key[i];
  }
  g_test_message ("of %u frames from #%u: %u decoded whole, %u of them key "
      "frames; %" G_GUINT64_FORMAT " frames out broken", RUN, c.first,
      decoded, keys, c.broken);
  /* at least 90% of the frames between the key frames (a key frame that
   * did not decode counts among those: the bound only tightens) */
  g_assert_cmpuint ((decoded - keys) * 10, >=, (RUN - keys) * 9);
  g_mutex_unlock (&c.lock);

  assert_no_room_errors (alice);
  assert_no_room_errors (bob);
  participant_free (bob);
  participant_free (alice);
  g_clear_pointer (&c.layout, legba_stamp_layout_free);
  gst_clear_buffer (&c.flipped);
  g_hash_table_unref (c.key_pts);
  g_mutex_clear (&c.lock);
}

/* ---- what webrtcbin waits out before sending ---- */

/* The first element of factory name in bin, or NULL. */
static GstElement *
find_element (GstBin * bin, const char *name)
{
  GstIterator *it = gst_bin_iterate_all_by_element_factory_name (bin, name);
  GValue item = G_VALUE_INIT;
  GstElement *found = NULL;

  if (it != NULL && gst_iterator_next (it, &item) == GST_ITERATOR_OK) {
    found = g_value_dup_object (&item);
    g_value_unset (&item);
  }
  g_clear_pointer (&it, gst_iterator_free);
  return found;
}

static gboolean
query_latency (GstPad * pad, gboolean peer, GstClockTime * min)
{
  g_autoptr (GstQuery) query = gst_query_new_latency ();
  gboolean live = FALSE, ok;

  ok = peer ? gst_pad_peer_query (pad, query) : gst_pad_query (pad, query);
  g_assert_true (ok);
  gst_query_parse_latency (query, &live, min, NULL);
  return live;
}

/* webrtcbin syncs what it sends to the clock and waits out the latency
 * upstream reports, which it learns whenever the sender's pipeline
 * recomputes its latency: x264enc's frame would then be added to every
 * frame sent. Once the pipeline has recomputed it, what the room reports
 * to webrtcbin for a live track is no latency at all, while the encoder
 * reports its own. */
static void
test_send_latency (Fixture * f, gconstpointer data)
{
  Participant *alice = participant_new_for_server (f, "alice", NULL, FALSE);
  Participant *bob = participant_new_for_server (f, "bob", NULL, FALSE);
  g_autoptr (GstElement) enc = NULL;
  g_autoptr (GstElement) webrtcbin = NULL;
  g_autoptr (GstPad) enc_src = NULL;
  g_autoptr (GstPad) webrtc_sink = NULL;
  GstClockTime min = GST_CLOCK_TIME_NONE;

  add_stamped_h264 (alice);
  participant_connect_and_wait (alice);
  participant_connect_and_wait (bob);
  ROOM_WAIT_FOR (participant_frames (bob, alice, LEGBA_TRACK_KIND_VIDEO) > 0,
      "bob to decode a frame of alice's video");
  g_assert_true (gst_bin_recalculate_latency (GST_BIN (alice->pipeline)));

  enc = find_element (GST_BIN (alice->pipeline), "x264enc");
  g_assert_nonnull (enc);
  enc_src = gst_element_get_static_pad (enc, "src");
  g_assert_true (query_latency (enc_src, FALSE, &min));
  g_test_message ("the encoder reports %" GST_TIME_FORMAT, GST_TIME_ARGS (min));
  g_assert_cmpuint (min, >, 0);

  webrtcbin = find_element (GST_BIN (alice->pipeline), "webrtcbin");
  g_assert_nonnull (webrtcbin);
  webrtc_sink = gst_element_get_static_pad (webrtcbin, "sink_0");
  g_assert_nonnull (webrtc_sink);
  g_assert_true (gst_pad_is_linked (webrtc_sink));
  g_assert_true (query_latency (webrtc_sink, TRUE, &min));
  g_assert_cmpuint (min, ==, 0);

  assert_no_room_errors (alice);
  assert_no_room_errors (bob);
  participant_free (bob);
  participant_free (alice);
}

/* ---- a change of size mid-stream ---- */

#define RESIZE_SENDER \
  "videotestsrc is-live=true pattern=smpte horizontal-speed=4 ! " \
  "video/x-raw,format=I420,width=640,height=360,framerate=30/1 ! " \
  "legbavideoenc name=venc codec=%s encoder-factory=%s bitrate=%u " \
  "keyframe-interval=60"

/* what leaves the receiver's decoder */
typedef struct
{
  GMutex lock;
  guint64 small;                /* frames of the scaled size */
  guint64 full_after_small;     /* frames of the full size after those */
  gint small_width, small_height;
} Sizes;

static GstPadProbeReturn
decoded_size (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  Sizes *sz = data;
  g_autoptr (GstCaps) caps = gst_pad_get_current_caps (pad);
  GstStructure *s = caps ? gst_caps_get_structure (caps, 0) : NULL;
  gint w = 0, h = 0;

  if (!s || !gst_structure_get_int (s, "width", &w)
      || !gst_structure_get_int (s, "height", &h))
    return GST_PAD_PROBE_OK;
  g_mutex_lock (&sz->lock);
  if (w == sz->small_width && h == sz->small_height)
    sz->small++;
  else if (w == 640 && h == 360 && sz->small > 0)
    sz->full_after_small++;
  g_mutex_unlock (&sz->lock);
  g_main_context_wakeup (NULL);
  return GST_PAD_PROBE_OK;
}

static guint64
sizes_get (Sizes * sz, gboolean full)
{
  guint64 n;

  g_mutex_lock (&sz->lock);
  n = full ? sz->full_after_small : sz->small;
  g_mutex_unlock (&sz->lock);
  return n;
}

static void
test_resize (Fixture * f, gconstpointer data)
{
  const gchar *codec = data;
  const gchar *factory = g_str_equal (codec, "h264") ? "openh264enc" : "vp8enc";
  /* below the encoder's floor at 640x360: sent at 320x180 */
  const guint low = 250000, high = 3000000;
  g_autofree gchar *desc = NULL;
  g_autoptr (GstElement) venc = NULL;
  g_autoptr (GstElement) dec = NULL;
  g_autoptr (GstStructure) stats = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GstElementFactory) available = gst_element_factory_find (factory);
  Participant *alice, *bob;
  GstElement *bin;
  GstPad *src;
  Sizes sz = { 0, };
  gint out_w = 0, out_h = 0;

  if (!available) {
    g_test_skip_printf ("%s is not installed", factory);
    return;
  }
  alice = participant_new_for_server (f, "alice", NULL, FALSE);
  bob = participant_new_for_server (f, "bob", NULL, FALSE);
  g_mutex_init (&sz.lock);
  desc = g_strdup_printf (RESIZE_SENDER, codec, factory, low);
  /* the ghost pad by hand: gst_parse's would be found inside
   * legbavideoenc, an unlinked pad of the bin it is */
  bin = gst_parse_bin_from_description (desc, FALSE, &error);
  g_assert_no_error (error);
  venc = gst_bin_get_by_name (GST_BIN (bin), "venc");
  src = gst_element_get_static_pad (venc, "src");
  gst_element_add_pad (bin, gst_ghost_pad_new ("src", src));
  gst_object_unref (src);
  participant_publish (alice, LEGBA_TRACK_KIND_VIDEO, bin);

  participant_connect_and_wait (alice);
  participant_connect_and_wait (bob);
  ROOM_WAIT_FOR (participant_frames (bob, alice, LEGBA_TRACK_KIND_VIDEO) > 0,
      "bob to decode a frame of alice's video");

  /* the size sent at the low bitrate */
  g_object_get (venc, "stats", &stats, NULL);
  g_assert_true (gst_structure_get_int (stats, "output-width", &out_w));
  g_assert_true (gst_structure_get_int (stats, "output-height", &out_h));
  g_assert_cmpint (out_w, <, 640);
  g_assert_cmpint (out_h, <, 360);
  sz.small_width = out_w;
  sz.small_height = out_h;

  dec = decoder_of (bob, alice);
  g_assert_nonnull (dec);
  src = gst_element_get_static_pad (dec, "src");
  gst_pad_add_probe (src, GST_PAD_PROBE_TYPE_BUFFER, decoded_size, &sz, NULL);
  gst_object_unref (src);
  ROOM_WAIT_FOR (sizes_get (&sz, FALSE) >= 10,
      "bob to decode 10 frames of the scaled size");

  /* raised while playing: back to 640x360, through the room */
  g_object_set (venc, "bitrate", high, NULL);
  ROOM_WAIT_FOR (sizes_get (&sz, TRUE) >= 10,
      "bob to decode 10 frames of the full size after the raise");
  g_test_message ("%s: %" G_GUINT64_FORMAT " frames decoded at %dx%d, then "
      "%" G_GUINT64_FORMAT " at 640x360", factory, sizes_get (&sz, FALSE),
      sz.small_width, sz.small_height, sizes_get (&sz, TRUE));

  assert_no_room_errors (alice);
  assert_no_room_errors (bob);
  participant_free (bob);
  participant_free (alice);
  g_mutex_clear (&sz.lock);
}

int
main (int argc, char **argv)
{
  room_test_init (&argc, &argv);
  g_test_add ("/room/h264/multi-slice", Fixture, NULL, fixture_setup,
      test_multi_slice, fixture_teardown);
  g_test_add ("/room/h264/send-latency", Fixture, NULL, fixture_setup,
      test_send_latency, fixture_teardown);
  g_test_add ("/room/resize/h264", Fixture, "h264", fixture_setup,
      test_resize, fixture_teardown);
  g_test_add ("/room/resize/vp8", Fixture, "vp8", fixture_setup,
      test_resize, fixture_teardown);
  return g_test_run ();
}
