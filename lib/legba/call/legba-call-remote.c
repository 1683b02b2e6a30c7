/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaCall, the receiving side: one decoding branch per remote track,
 * its display (window, grid tile, appsink or nothing), and the counters
 * read by legba_call_get_remote_stats().
 */
#include <legba/call/legba-call-private.h>

GST_DEBUG_CATEGORY_EXTERN (legba_call_debug);
#define GST_CAT_DEFAULT legba_call_debug

void
legba_call_remote_free (gpointer data)
{
  LegbaCallRemote *r = data;

  g_free (r->id);
  g_free (r->identity);
  g_clear_pointer (&r->room_stats, gst_structure_free);
  g_free (r);
}

LegbaCallRemote *
legba_call_remote_for (LegbaCall * self, LegbaParticipant * participant)
{
  const char *id = legba_participant_get_id (participant);
  LegbaCallRemote *r = g_hash_table_lookup (self->remotes, id);

  if (r == NULL) {
    r = g_new0 (LegbaCallRemote, 1);
    r->call = self;
    r->id = g_strdup (id);
    r->identity = g_strdup (legba_participant_get_identity (participant));
    r->latency[0] = r->latency[1] = r->latency[2] = -1;
    g_mutex_lock (&self->lock);
    g_hash_table_insert (self->remotes, r->id, r);
    g_ptr_array_add (self->order, r);
    g_mutex_unlock (&self->lock);
  }
  return r;
}

/* ---- Counting ---- */

typedef struct
{
  LegbaCallRemote *remote;
  LegbaTrackKind kind;
} Counter;

static GstPadProbeReturn
count_decoded (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  Counter *c = data;
  LegbaCall *self = c->remote->call;

  g_mutex_lock (&self->lock);
  if (c->kind == LEGBA_TRACK_KIND_VIDEO)
    c->remote->video_frames++;
  else
    c->remote->audio_buffers++;
  g_mutex_unlock (&self->lock);
  return GST_PAD_PROBE_OK;
}

/* ---- The grid ---- */

/* The grid is composed in I420, which the compositor blends in place.
 * Left to negotiate, it picks a 16-bit RGB format (ABGR64) that it can
 * only blend through an intermediate ARGB64 frame and a conversion of
 * every output frame, four times the memory traffic; in GStreamer 1.22
 * that path also crashed now and then as a call ended, unmapping the
 * intermediate frame (4 of 120 runs of the sanitized display test). */
gboolean
legba_call_build_grid (LegbaCall * self, GError ** error)
{
  g_autofree char *desc = g_strdup_printf ("videotestsrc is-live=true "
      "pattern=black ! video/x-raw,format=I420,width=%u,height=%u,"
      "framerate=%u/1 ! compositor name=legba-grid background=black ! "
      "video/x-raw,format=I420 ! videoconvert",
      self->grid_width, self->grid_height, MAX (self->framerate, 1));
  GstElement *bin = gst_parse_bin_from_description (desc, TRUE, error);
  /* a reference of our own either way, dropped once the pipeline has it */
  GstElement *sink = self->grid_sink ? gst_object_ref (self->grid_sink) :
      gst_element_factory_make ("autovideosink", NULL);

  if (sink != NULL && g_object_is_floating (sink))
    gst_object_ref_sink (sink);

  if (bin == NULL || sink == NULL) {
    if (bin != NULL)
      gst_object_unref (bin);
    if (sink == NULL)
      g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_MISSING_PLUGIN,
          "The grid display needs autovideosink (gst-plugins-good)");
    else
      gst_object_unref (sink);
    return FALSE;
  }
  gst_bin_add_many (GST_BIN (self->pipeline), bin, sink, NULL);
  gst_object_unref (sink);
  gst_element_link (bin, sink);
  self->compositor = gst_bin_get_by_name (GST_BIN (bin), "legba-grid");
  return TRUE;
}

void
legba_call_retile (LegbaCall * self)
{
  guint n = 0, i = 0, cols, rows, w, h;

  if (self->compositor == NULL)
    return;
  for (guint k = 0; k < self->order->len; k++)
    if (((LegbaCallRemote *) self->order->pdata[k])->grid_pad != NULL)
      n++;
  if (n == 0)
    return;
  for (cols = 1; cols * cols < n; cols++);
  rows = (n + cols - 1) / cols;
  w = self->grid_width / cols;
  h = self->grid_height / rows;
  for (guint k = 0; k < self->order->len; k++) {
    LegbaCallRemote *r = self->order->pdata[k];

    if (r->grid_pad == NULL)
      continue;
    g_object_set (r->grid_pad, "xpos", (gint) ((i % cols) * w),
        "ypos", (gint) ((i / cols) * h), "width", (gint) w,
        "height", (gint) h, "zorder", 1u, NULL);
    i++;
  }
}

/* ---- Tracks ---- */

static const char *
video_tail (LegbaCall * self)
{
  switch (self->display) {
    case LEGBA_CALL_DISPLAY_WINDOW:
      return "autovideosink sync=false";
    case LEGBA_CALL_DISPLAY_APPSINK:
      return "appsink name=sink sync=false max-buffers=2 drop=true";
    case LEGBA_CALL_DISPLAY_GRID:
      return "queue name=last max-size-buffers=2 leaky=downstream";
    default:
      return "fakesink sync=false async=false";
  }
}

static GstElement *
make_branch (LegbaCall * self, LegbaTrackKind kind, GError ** error)
{
  g_autofree char *desc = NULL;
  GstElement *bin;
  gboolean play = self->play_audio &&
      (self->display == LEGBA_CALL_DISPLAY_WINDOW ||
      self->display == LEGBA_CALL_DISPLAY_GRID);

  if (self->display == LEGBA_CALL_DISPLAY_UNDECODED)
    desc = g_strdup ("identity name=dec ! fakesink name=conv sync=false "
        "async=false");
  else if (kind == LEGBA_TRACK_KIND_VIDEO)
    desc = g_strdup_printf ("decodebin name=dec ! videoconvert name=conv ! "
        "%s%s", self->measure_latency ? "legbastampcheck name=check ! " : "",
        video_tail (self));
  else
    desc = g_strdup_printf ("decodebin name=dec ! audioconvert name=conv ! "
        "audioresample ! %s", play ? "autoaudiosink sync=false" :
        "fakesink sync=false async=false");
  bin = gst_parse_bin_from_description (desc, FALSE, error);
  if (bin == NULL)
    return NULL;
  legba_call_ghost (bin, "dec", "sink");
  /* a sink that prerolls (autovideosink, autoaudiosink) in a branch added
   * to the playing pipeline must not take the pipeline's state with it */
  g_object_set (bin, "async-handling", TRUE, NULL);
  if (kind == LEGBA_TRACK_KIND_VIDEO &&
      self->display == LEGBA_CALL_DISPLAY_GRID)
    legba_call_ghost (bin, "last", "src");
  return bin;
}

static void
on_track_added (LegbaRoom * room, LegbaParticipant * participant,
    LegbaTrackKind kind, GstPad * pad, LegbaCall * self)
{
  LegbaCallRemote *r = legba_call_remote_for (self, participant);
  g_autoptr (GError) error = NULL;
  GstElement *bin = make_branch (self, kind, &error);
  GstElement *conv;
  GstPad *sinkpad;
  Counter *c;

  if (bin == NULL) {
    GError *e = g_error_new (LEGBA_CALL_ERROR,
        LEGBA_CALL_ERROR_MISSING_PLUGIN,
        "Cannot decode %s's %s: %s", r->identity,
        kind == LEGBA_TRACK_KIND_VIDEO ? "video" : "audio", error->message);

    legba_call_emit_warning (self, e);
    g_error_free (e);
    return;
  }
  if (r->bins[kind] != NULL)
    return;
  GST_INFO ("%s's %s track", r->identity,
      kind == LEGBA_TRACK_KIND_VIDEO ? "video" : "audio");
  c = g_new0 (Counter, 1);
  c->remote = r;
  c->kind = kind;
  conv = gst_bin_get_by_name (GST_BIN (bin), "conv");
  sinkpad = gst_element_get_static_pad (conv, "sink");
  gst_pad_add_probe (sinkpad, GST_PAD_PROBE_TYPE_BUFFER, count_decoded, c,
      g_free);
  gst_object_unref (sinkpad);
  gst_object_unref (conv);
  if (kind == LEGBA_TRACK_KIND_VIDEO && self->measure_latency)
    r->checker = gst_bin_get_by_name (GST_BIN (bin), "check");
  r->present = TRUE;
  r->published[kind] = TRUE;
  gst_bin_add (GST_BIN (self->pipeline), bin);
  if (kind == LEGBA_TRACK_KIND_VIDEO && self->compositor != NULL) {
    GstPad *src = gst_element_get_static_pad (bin, "src");

    r->grid_pad = gst_element_request_pad_simple (self->compositor, "sink_%u");
    gst_pad_link (src, r->grid_pad);
    gst_object_unref (src);
    legba_call_retile (self);
  }
  gst_element_sync_state_with_parent (bin);
  sinkpad = gst_element_get_static_pad (bin, "sink");
  if (gst_pad_link (pad, sinkpad) != GST_PAD_LINK_OK)
    GST_WARNING ("could not link %s's track", r->identity);
  gst_object_unref (sinkpad);
  r->bins[kind] = bin;
  r->room_pads[kind] = pad;
  if (kind == LEGBA_TRACK_KIND_VIDEO &&
      self->display == LEGBA_CALL_DISPLAY_APPSINK) {
    GstElement *sink = gst_bin_get_by_name (GST_BIN (bin), "sink");

    legba_call_emit_video_sink (self, participant, sink);
    gst_object_unref (sink);
  }
}

static void
keep_latency (LegbaCallRemote * r)
{
  static const char *const names[] = { "latency-p50", "latency-p95",
    "latency-p99"
  };

  if (r->checker == NULL)
    return;
  for (guint i = 0; i < 3; i++)
    g_object_get (r->checker, names[i], &r->latency[i], NULL);
  g_object_get (r->checker, "frames-valid", &r->latency_valid, NULL);
}

static void
remove_track (LegbaCall * self, LegbaCallRemote * r, LegbaTrackKind kind)
{
  GstElement *bin = g_steal_pointer (&r->bins[kind]);

  r->room_pads[kind] = NULL;
  if (bin == NULL)
    return;
  if (kind == LEGBA_TRACK_KIND_VIDEO) {
    keep_latency (r);
    g_clear_object (&r->checker);
  }
  gst_element_set_locked_state (bin, TRUE);
  gst_element_set_state (bin, GST_STATE_NULL);
  if (kind == LEGBA_TRACK_KIND_VIDEO && r->grid_pad != NULL) {
    gst_element_release_request_pad (self->compositor, r->grid_pad);
    g_clear_object (&r->grid_pad);
  }
  gst_bin_remove (GST_BIN (self->pipeline), bin);
  if (kind == LEGBA_TRACK_KIND_VIDEO)
    legba_call_retile (self);
}

static void
on_track_removed (LegbaRoom * room, LegbaParticipant * participant,
    LegbaTrackKind kind, GstPad * pad, LegbaCall * self)
{
  LegbaCallRemote *r = g_hash_table_lookup (self->remotes,
      legba_participant_get_id (participant));

  if (r != NULL && r->room_pads[kind] == pad)
    remove_track (self, r, kind);
}

void
legba_call_remove_tracks (LegbaCall * self)
{
  for (guint i = 0; i < self->order->len; i++) {
    LegbaCallRemote *r = self->order->pdata[i];

    remove_track (self, r, LEGBA_TRACK_KIND_VIDEO);
    remove_track (self, r, LEGBA_TRACK_KIND_AUDIO);
    r->present = FALSE;
  }
}

static void
on_participant_joined (LegbaRoom * room, LegbaParticipant * participant,
    LegbaCall * self)
{
  legba_call_remote_for (self, participant)->present = TRUE;
  legba_call_notify_participant (self, participant, TRUE);
}

static void
on_participant_left (LegbaRoom * room, LegbaParticipant * participant,
    LegbaCall * self)
{
  LegbaCallRemote *r = g_hash_table_lookup (self->remotes,
      legba_participant_get_id (participant));

  if (r != NULL) {
    remove_track (self, r, LEGBA_TRACK_KIND_VIDEO);
    remove_track (self, r, LEGBA_TRACK_KIND_AUDIO);
    r->present = FALSE;
  }
  legba_call_notify_participant (self, participant, FALSE);
}

static void
on_data_received (LegbaRoom * room, LegbaParticipant * participant,
    const char *topic, JsonNode * data, LegbaCall * self)
{
  LegbaCallRemote *r = g_hash_table_lookup (self->remotes,
      legba_participant_get_id (participant));

  if (r != NULL && (topic == NULL || !g_str_has_prefix (topic, "legba.")))
    r->data_messages++;
  legba_call_emit_data (self, participant, topic, data);
}

static void
on_mute_changed (LegbaRoom * room, LegbaParticipant * participant,
    gboolean audio, gboolean video, LegbaCall * self)
{
  LegbaCallRemote *r = legba_call_remote_for (self, participant);

  r->muted[LEGBA_TRACK_KIND_AUDIO] = audio;
  r->muted[LEGBA_TRACK_KIND_VIDEO] = video;
}

static void
on_room_error (LegbaRoom * room, GError * error, LegbaCall * self)
{
  legba_call_emit_warning (self, error);
}

void
legba_call_connect_room (LegbaCall * self)
{
  g_signal_connect (self->room, "track-added", G_CALLBACK (on_track_added),
      self);
  g_signal_connect (self->room, "track-removed",
      G_CALLBACK (on_track_removed), self);
  g_signal_connect (self->room, "participant-joined",
      G_CALLBACK (on_participant_joined), self);
  g_signal_connect (self->room, "participant-left",
      G_CALLBACK (on_participant_left), self);
  g_signal_connect (self->room, "error", G_CALLBACK (on_room_error), self);
  g_signal_connect (self->room, "data-received",
      G_CALLBACK (on_data_received), self);
  g_signal_connect (self->room, "mute-changed", G_CALLBACK (on_mute_changed),
      self);
}

/* ---- Stats ---- */

void
legba_call_update_remote_stats (LegbaCall * self, gdouble seconds)
{
  for (guint i = 0; i < self->order->len; i++) {
    LegbaCallRemote *r = self->order->pdata[i];
    LegbaParticipant *p = self->room && r->present ?
        legba_room_find_participant (self->room, r->id) : NULL;
    guint64 frames;

    g_mutex_lock (&self->lock);
    frames = r->video_frames;
    g_mutex_unlock (&self->lock);
    if (seconds > 0)
      r->fps = (frames - r->last_video_frames) / seconds;
    r->last_video_frames = frames;
    if (p != NULL) {
      GstStructure *s = legba_participant_get_stats (p);

      if (s != NULL) {
        g_clear_pointer (&r->room_stats, gst_structure_free);
        r->room_stats = s;
      }
    } else if (!r->present) {
      r->fps = 0;
    }
    keep_latency (r);
  }
}

static void
copy_field (GstStructure * to, const GstStructure * from, const char *name,
    GType type)
{
  const GValue *v = from ? gst_structure_get_value (from, name) : NULL;

  if (v != NULL && G_VALUE_TYPE (v) == type)
    gst_structure_set_value (to, name, v);
}

/**
 * legba_call_list_remotes:
 * @self: a #LegbaCall
 *
 * The participant ids of every remote participant seen since the call was
 * started, in order of arrival, including those that left.
 *
 * Returns: (transfer full): a %NULL-terminated array of participant ids
 */
GStrv
legba_call_list_remotes (LegbaCall * self)
{
  GStrvBuilder *b = g_strv_builder_new ();
  GStrv ids;

  g_return_val_if_fail (LEGBA_IS_CALL (self), NULL);
  for (guint i = 0; i < self->order->len; i++)
    g_strv_builder_add (b, ((LegbaCallRemote *) self->order->pdata[i])->id);
  ids = g_strv_builder_end (b);
  g_strv_builder_unref (b);
  return ids;
}

/**
 * legba_call_get_remote_stats:
 * @self: a #LegbaCall
 * @participant_id: a remote participant's id
 *
 * What was received from a remote participant: `participant-id`,
 * `identity` (strings), `present` (boolean: in the room now),
 * `video-frames` (video frames decoded; received, with
 * %LEGBA_CALL_DISPLAY_UNDECODED), `audio-buffers` (audio buffers decoded,
 * or received), `fps` (double, video frames per second over the last
 * stats interval); when its peer connection reported them, `bitrate-in`
 * (guint64, bit/s), `packets-received` (guint64), `packets-lost` (gint64),
 * `round-trip-time` and `jitter` (double, s); what is sent to it, when
 * the room's congestion control runs (docs/congestion-control.md):
 * `target-bitrate` (guint, bit/s: the estimate of what the connection
 * carries), `video-target-bitrate` (guint, bit/s: the video's share of
 * it, what the audio and the retransmissions leave), `pacing-queue-ms` (double), `rtx-requests` and `rtx-sent`
 * (guint64: retransmissions asked for and answered), `feedback-loss`
 * (double, 0..1) and `feedback-missing` (boolean); `data-messages` (guint64,
 * application data messages received from it, the room's own `legba.`
 * topics aside), `audio-muted` and `video-muted` (boolean, as it
 * announced on the `legba.mute` topic), `video-published` and
 * `audio-published` (boolean: a track of that kind arrived from it); with
 * #LegbaCall:measure-latency, `latency-p50`, `latency-p95`,
 * `latency-p99` (double, ms, -1 before the first readable frame) and
 * `latency-frames` (guint64, frames whose time stamp was read).
 *
 * Returns: (transfer full) (nullable): the counters, or %NULL when no
 *   such participant was seen
 */
GstStructure *
legba_call_get_remote_stats (LegbaCall * self, const char *participant_id)
{
  LegbaCallRemote *r;
  GstStructure *s;

  g_return_val_if_fail (LEGBA_IS_CALL (self), NULL);
  g_return_val_if_fail (participant_id != NULL, NULL);
  r = g_hash_table_lookup (self->remotes, participant_id);
  if (r == NULL)
    return NULL;
  g_mutex_lock (&self->lock);
  s = gst_structure_new ("legba-remote-stats",
      "participant-id", G_TYPE_STRING, r->id,
      "identity", G_TYPE_STRING, r->identity,
      "present", G_TYPE_BOOLEAN, r->present,
      "video-frames", G_TYPE_UINT64, r->video_frames,
      "audio-buffers", G_TYPE_UINT64, r->audio_buffers,
      "fps", G_TYPE_DOUBLE, r->fps,
      "data-messages", G_TYPE_UINT64, r->data_messages,
      "audio-muted", G_TYPE_BOOLEAN, r->muted[LEGBA_TRACK_KIND_AUDIO],
      "video-muted", G_TYPE_BOOLEAN, r->muted[LEGBA_TRACK_KIND_VIDEO],
      "video-published", G_TYPE_BOOLEAN, r->published[LEGBA_TRACK_KIND_VIDEO],
      "audio-published", G_TYPE_BOOLEAN, r->published[LEGBA_TRACK_KIND_AUDIO],
      NULL);
  g_mutex_unlock (&self->lock);
  copy_field (s, r->room_stats, "bitrate-in", G_TYPE_UINT64);
  copy_field (s, r->room_stats, "packets-received", G_TYPE_UINT64);
  copy_field (s, r->room_stats, "packets-lost", G_TYPE_INT64);
  copy_field (s, r->room_stats, "round-trip-time", G_TYPE_DOUBLE);
  copy_field (s, r->room_stats, "jitter", G_TYPE_DOUBLE);
  copy_field (s, r->room_stats, "target-bitrate", G_TYPE_UINT);
  copy_field (s, r->room_stats, "video-target-bitrate", G_TYPE_UINT);
  copy_field (s, r->room_stats, "pacing-queue-ms", G_TYPE_DOUBLE);
  copy_field (s, r->room_stats, "rtx-requests", G_TYPE_UINT64);
  copy_field (s, r->room_stats, "rtx-sent", G_TYPE_UINT64);
  copy_field (s, r->room_stats, "feedback-loss", G_TYPE_DOUBLE);
  copy_field (s, r->room_stats, "feedback-missing", G_TYPE_BOOLEAN);
  if (self->measure_latency) {
    keep_latency (r);
    gst_structure_set (s, "latency-p50", G_TYPE_DOUBLE, r->latency[0],
        "latency-p95", G_TYPE_DOUBLE, r->latency[1],
        "latency-p99", G_TYPE_DOUBLE, r->latency[2],
        "latency-frames", G_TYPE_UINT64, r->latency_valid, NULL);
  }
  return s;
}
