/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Congestion control in a room (docs/congestion-control.md): each peer
 * connection gets a LegbaPeerSender as webrtcbin's aux sender, which
 * estimates what the connection carries; the room gives the shared video
 * encoder the lowest video share of an estimate (what the audio and the
 * retransmissions leave) among the peers it sends video to, as a
 * `legba-target-bitrate` event up the track (legbavideoenc follows it,
 * with its own bitrate as the ceiling). The audio encoder hears the
 * highest loss the receivers of the audio report, as a `legba-packet-loss`
 * event up the audio track (LegbaCall sets its opusenc's
 * packet-loss-percentage from it, for its in-band FEC).
 */
#include <legba/room/legba-room-private.h>
#include <legba/room/legba-peer-sender.h>
#include <legba/room/legba-send-rates.h>

/* What a connection is assumed to carry before its first feedback (as
 * libwebrtc), and the most an estimate may reach; the encoder's own
 * bitrate caps what it sends. */
#define START_BITRATE 300000
#define MAX_BITRATE 20000000
/* The encoder hears a new target when it moved by more than this. */
#define TARGET_CHANGE 0.03

static void
target_changed (LegbaPeer * peer, gpointer data)
{
  legba_room_congestion_update (peer->room);
}

static void
on_target (guint bitrate, gpointer data)
{
  LegbaPeer *peer = data;

  legba_peer_invoke (peer, target_changed, NULL, NULL);
}

static GstElement *
on_request_aux_sender (GstElement * webrtcbin, GObject * transport,
    LegbaPeer * peer)
{
  GstElement *sender = legba_peer_sender_new (START_BITRATE, MAX_BITRATE);

  legba_peer_sender_set_target_func (LEGBA_PEER_SENDER (sender), on_target,
      legba_peer_ref (peer), (GDestroyNotify) legba_peer_unref);
  g_mutex_lock (&peer->room->lock);
  legba_peer_sender_set_video_steered (LEGBA_PEER_SENDER (sender),
      !peer->room->video_unsteered);
  g_mutex_unlock (&peer->room->lock);
  g_mutex_lock (&peer->lock);
  gst_object_replace ((GstObject **) & peer->sender, GST_OBJECT (sender));
  if (peer->media[LEGBA_TRACK_KIND_AUDIO].ssrc != 0)
    legba_peer_sender_set_audio_ssrc (LEGBA_PEER_SENDER (sender),
        peer->media[LEGBA_TRACK_KIND_AUDIO].ssrc);
  g_mutex_unlock (&peer->lock);
  GST_INFO ("pc %s: pacing and estimating the bandwidth", peer->pc);
  return sender;
}

void
legba_peer_congestion_setup (LegbaPeer * peer)
{
  if (!peer->room->congestion_control)
    return;
  g_signal_connect (peer->webrtcbin, "request-aux-sender",
      G_CALLBACK (on_request_aux_sender), peer);
}

/* Drops the sender's reference on the peer (its target function's): a
 * closed peer's sender may live on inside webrtcbin until it goes. */
void
legba_peer_congestion_close (LegbaPeer * peer)
{
  GstElement *sender;

  g_mutex_lock (&peer->lock);
  sender = g_steal_pointer (&peer->sender);
  g_mutex_unlock (&peer->lock);
  if (sender == NULL)
    return;
  legba_peer_sender_set_target_func (LEGBA_PEER_SENDER (sender), NULL, NULL,
      NULL);
  gst_object_unref (sender);
}

/* The sender of @peer, or NULL (transfer full). */
static LegbaPeerSender *
peer_sender (LegbaPeer * peer)
{
  LegbaPeerSender *sender;

  g_mutex_lock (&peer->lock);
  sender = peer->sender ? gst_object_ref (peer->sender) : NULL;
  g_mutex_unlock (&peer->lock);
  return sender;
}

/* The video's share of the start estimate: what the encoder is held to
 * while the video goes to no connection with an estimate of its own yet. */
static guint
start_target (void)
{
  LegbaSendRates rates;

  legba_send_rates_init (&rates, 0);
  return legba_send_rates_video_target (&rates, START_BITRATE, 0);
}

/* The lowest video target among the connections the video goes to. A
 * connection without a sender yet counts with the start estimate, as the
 * video going to none does: the first frames a newcomer gets, key frame
 * first, fit a slow link. 0 (no limit) when every connection's receiver
 * let the wait for feedback pass. */
static guint
lowest_target (LegbaRoom * self)
{
  GHashTableIter iter;
  gpointer value;
  guint lowest = 0, peers = 0;

  g_hash_table_iter_init (&iter, self->peers);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    LegbaPeer *peer = value;
    g_autoptr (LegbaPeerSender) sender = NULL;
    guint target;

    if (peer->media[LEGBA_TRACK_KIND_VIDEO].webrtc_sink == NULL)
      continue;
    peers++;
    sender = peer_sender (peer);
    target = sender ? legba_peer_sender_get_video_target (sender) :
        start_target ();
    if (target != 0 && (lowest == 0 || target < lowest))
      lowest = target;
  }
  return peers == 0 ? start_target () : lowest;
}

/* Records whether the video's encoder follows the target, and tells the
 * senders: video that does not is not held to the pacing rate. */
static void
set_steered (LegbaRoom * self, gboolean steered)
{
  GHashTableIter iter;
  gpointer value;

  g_mutex_lock (&self->lock);
  if (self->video_unsteered == !steered) {
    g_mutex_unlock (&self->lock);
    return;
  }
  self->video_unsteered = !steered;
  g_mutex_unlock (&self->lock);
  GST_INFO ("room %s: the video's encoder %s the target", self->room_name,
      steered ? "follows" : "ignores");
  g_hash_table_iter_init (&iter, self->peers);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    g_autoptr (LegbaPeerSender) sender = peer_sender (value);

    if (sender != NULL)
      legba_peer_sender_set_video_steered (sender, steered);
  }
}

/* The highest loss the receivers of the audio report, in percent: 0
 * before any reports. */
static guint
highest_loss (LegbaRoom * self)
{
  GHashTableIter iter;
  gpointer value;
  gint highest = 0;

  g_hash_table_iter_init (&iter, self->peers);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    LegbaPeer *peer = value;
    g_autoptr (LegbaPeerSender) sender = NULL;

    if (peer->media[LEGBA_TRACK_KIND_AUDIO].webrtc_sink == NULL)
      continue;
    sender = peer_sender (peer);
    if (sender != NULL)
      highest = MAX (highest, legba_peer_sender_get_loss_percentage (sender));
  }
  return highest;
}

/* The sink pad of the local track of @kind's tee, or NULL (transfer
 * full); @running (optional): whether the track's caps are known (its
 * encoder is linked and running). */
static GstPad *
track_teesink (LegbaRoom * self, LegbaTrackKind kind, gboolean * running)
{
  LegbaLocalTrack *track;
  GstPad *teesink;

  g_mutex_lock (&self->lock);
  track = self->tracks[kind];
  teesink = track ? gst_element_get_static_pad (track->tee, "sink") : NULL;
  if (running != NULL)
    *running = track != NULL && track->caps != NULL;
  g_mutex_unlock (&self->lock);
  return teesink;
}

/* Tells the audio encoder the loss, when it moved. */
static void
update_audio (LegbaRoom * self)
{
  g_autoptr (GstPad) teesink = NULL;
  guint loss = highest_loss (self);

  if (loss == self->audio_loss ||
      (teesink = track_teesink (self, LEGBA_TRACK_KIND_AUDIO, NULL)) == NULL)
    return;
  GST_DEBUG ("room %s: the audio's receivers report %u%% lost",
      self->room_name, loss);
  /* not taken before the encoder is linked: tried again at the next */
  if (gst_pad_push_event (teesink,
          gst_event_new_custom (GST_EVENT_CUSTOM_UPSTREAM,
              gst_structure_new ("legba-packet-loss", "percentage",
                  G_TYPE_UINT, loss, NULL))))
    self->audio_loss = loss;
}

/* Tells the video encoder what the peers carry, and the audio encoder
 * what they lose, when that moved. Runs on the room's context: once the
 * video's caps are known (the encoder is linked and running), after a
 * target or a loss changed, a peer connection came or went. */
void
legba_room_congestion_update (LegbaRoom * self)
{
  g_autoptr (GstPad) teesink = NULL;
  guint target;
  gdouble change;
  gboolean running, taken;

  if (self == NULL || !self->congestion_control)
    return;
  update_audio (self);
  target = lowest_target (self);
  change = self->video_target == 0 || target == 0 ?
      (target != self->video_target) :
      ABS ((gdouble) target - self->video_target) / self->video_target;
  if (change <= TARGET_CHANGE)
    return;
  teesink = track_teesink (self, LEGBA_TRACK_KIND_VIDEO, &running);
  if (teesink == NULL)
    return;
  GST_DEBUG ("room %s: the video's target is %u bit/s", self->room_name,
      target);
  /* not taken before the encoder is linked: tried again at the next; not
   * taken once the video runs: no element upstream follows it, and it is
   * tried again at each update in case one comes */
  taken = gst_pad_push_event (teesink,
      gst_event_new_custom (GST_EVENT_CUSTOM_UPSTREAM,
          gst_structure_new ("legba-target-bitrate", "bitrate",
              G_TYPE_UINT, target, NULL)));
  if (taken)
    self->video_target = target;
  if (running)
    set_steered (self, taken);
}

static gboolean
copy_field (GQuark field, const GValue * value, gpointer summary)
{
  gst_structure_id_set_value (summary, field, value);
  return TRUE;
}

/* Adds the sender's figures to the participant's stats summary, when
 * the connection sends media: a receive-only one's estimate (a viewer's,
 * an SFU subscriber's) says nothing of a path anything goes on. */
void
legba_peer_congestion_add_stats (LegbaPeer * peer, GstStructure * summary)
{
  g_autoptr (LegbaPeerSender) sender = NULL;
  g_autoptr (GstStructure) stats = NULL;

  if (peer->media[LEGBA_TRACK_KIND_VIDEO].webrtc_sink == NULL &&
      peer->media[LEGBA_TRACK_KIND_AUDIO].webrtc_sink == NULL)
    return;
  sender = peer_sender (peer);
  if (sender == NULL)
    return;
  stats = legba_peer_sender_get_stats (sender);
  gst_structure_foreach (stats, copy_field, summary);
}
