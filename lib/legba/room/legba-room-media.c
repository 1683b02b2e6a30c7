/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The media of a LegbaRoom (docs/room-protocol.md §5): each local track is
 * encoded once upstream and teed to every peer connection, payloaded per
 * peer with what that peer negotiated; each participant's tracks come out
 * depayloaded on a pad of its peer bin; key-frame requests go upstream,
 * rate-limited.
 *
 * Threads: pad-added and the probes run on streaming threads. They touch
 * only fields marked (lock) in legba-room-private.h, and build the
 * receive branch right there (data is already flowing); everything else
 * is handed to the room's main context.
 */
#include <legba/room/legba-room-private.h>
#include <legba/room/legba-peer-sender.h>

#include <gst/video/video.h>

static const char *const kind_names[] = { "video", "audio" };

/* ---- Local tracks ---- */

static void
local_caps_known (LegbaRoom * self)
{
  legba_room_congestion_update (self);
  if (legba_room_media_ready (self))
    self->events->media_ready (self);
}

static gboolean
local_caps_known_cb (gpointer data)
{
  local_caps_known (data);
  return G_SOURCE_REMOVE;
}

/* Sends the request the rate limit held back, now that it may pass. */
static gboolean
key_unit_later (gpointer data)
{
  LegbaLocalTrack *track = data;
  GstPad *teesink = gst_element_get_static_pad (track->tee, "sink");

  g_mutex_lock (&track->room->lock);
  g_clear_pointer (&track->key_unit_later, g_source_unref);
  g_mutex_unlock (&track->room->lock);
  gst_pad_push_event (teesink, legba_room_key_unit_event ());
  gst_object_unref (teesink);
  return G_SOURCE_REMOVE;
}

/* At most one key-frame request per 100 ms reaches the encoder, whatever
 * the number of peers asking (PLI/FIR, newcomers): one that comes sooner
 * is held back and merged with any other until the interval has passed,
 * never lost. Runs with the room's lock held. */
static GstPadProbeReturn
limit_key_units (LegbaLocalTrack * track)
{
  gint64 now = g_get_monotonic_time ();
  gint64 wait = track->last_key_unit + LEGBA_ROOM_KEY_UNIT_INTERVAL_US - now;

  if (track->last_key_unit == 0 || wait <= 0) {
    track->last_key_unit = now;
    return GST_PAD_PROBE_OK;
  }
  if (track->key_unit_later == NULL)
    track->key_unit_later = legba_room_timeout (track->room,
        wait / 1000 + 1, key_unit_later, track, NULL);
  return GST_PAD_PROBE_DROP;
}

/* Downstream: the caps of the encoded stream decide what the room offers.
 * Upstream: key-frame requests, rate-limited. */
static GstPadProbeReturn
local_track_probe (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  LegbaLocalTrack *track = data;
  GstEvent *event = GST_PAD_PROBE_INFO_EVENT (info);
  GstPadProbeReturn ret = GST_PAD_PROBE_OK;

  if (GST_EVENT_TYPE (event) == GST_EVENT_CAPS) {
    GstCaps *caps;
    gboolean first;

    gst_event_parse_caps (event, &caps);
    g_mutex_lock (&track->room->lock);
    first = track->caps == NULL;
    gst_caps_replace (&track->caps, caps);
    g_mutex_unlock (&track->room->lock);
    if (first)
      legba_room_invoke (track->room, local_caps_known_cb,
          g_object_ref (track->room), g_object_unref);
  } else if (GST_EVENT_IS_UPSTREAM (event) &&
      gst_video_event_is_force_key_unit (event)) {
    /* a request; the encoder's downstream event that announces the key
     * frame it made is none (taken for one, every key frame would ask for
     * the next: one every 100 ms) */
    g_mutex_lock (&track->room->lock);
    ret = limit_key_units (track);
    g_mutex_unlock (&track->room->lock);
    GST_LOG ("%s key-frame request %s", kind_names[track->kind],
        ret == GST_PAD_PROBE_DROP ? "held back (rate limit)" : "passed");
  }
  return ret;
}

/**
 * legba_room_add_track:
 * @self: a #LegbaRoom
 * @kind: the kind of track
 * @error: return location for a #GError
 *
 * Adds a local track: the returned sink pad (of an element the room adds
 * to #LegbaRoom:bin) takes an encoded stream, #LEGBA_ROOM_VIDEO_CAPS or
 * #LEGBA_ROOM_AUDIO_CAPS, which is sent to every participant. Its caps
 * constrain the encoder upstream (H.264: constrained baseline,
 * byte-stream, access units). Link an encoder to it.
 *
 * Add tracks before connecting: what a participant publishes is decided
 * when a peer connection is negotiated (docs/room-protocol.md §5 has no
 * renegotiation), and negotiation waits until each added track's caps are
 * known (its first buffer's caps event). In an SFU room a participant
 * with no track and no message sent receives only; the first track added
 * (or message sent to everyone) makes it publish (docs/rooms.md, "SFU
 * rooms").
 *
 * Returns: (transfer full) (nullable): the track's sink pad, or %NULL
 *   with @error set: version 1 carries one track of each kind per
 *   participant (%LEGBA_ROOM_ERROR_INVALID), or a GStreamer element is
 *   missing
 */
GstPad *
legba_room_add_track (LegbaRoom * self, LegbaTrackKind kind, GError ** error)
{
  LegbaLocalTrack *track;
  g_autoptr (GstCaps) caps = NULL;
  g_autofree char *name = NULL;
  GstPad *teesink;

  g_return_val_if_fail (LEGBA_IS_ROOM (self), NULL);
  g_return_val_if_fail (kind <= LEGBA_TRACK_KIND_AUDIO, NULL);
  g_return_val_if_fail (self->bin != NULL, NULL);

  if (self->tracks[kind] != NULL) {
    g_set_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_INVALID,
        "A participant sends at most one %s track (room protocol version "
        "1), and this one has one already", kind_names[kind]);
    return NULL;
  }
  track = g_new0 (LegbaLocalTrack, 1);
  track->room = self;
  track->kind = kind;
  name = g_strdup_printf ("legba-%s-caps", kind_names[kind]);
  track->capsfilter = gst_element_factory_make ("capsfilter", name);
  g_free (name);
  name = g_strdup_printf ("legba-%s-tee", kind_names[kind]);
  track->tee = gst_element_factory_make ("tee", name);
  caps = gst_caps_from_string (kind == LEGBA_TRACK_KIND_VIDEO ?
      LEGBA_ROOM_VIDEO_CAPS : LEGBA_ROOM_AUDIO_CAPS);
  g_object_set (track->capsfilter, "caps", caps, NULL);
  g_object_set (track->tee, "allow-not-linked", TRUE, NULL);
  /* the track keeps its elements: the bin may be gone before the track,
   * with a hand-over to the room's context still to run */
  gst_object_ref_sink (track->capsfilter);
  gst_object_ref_sink (track->tee);
  gst_bin_add_many (self->bin, track->capsfilter, track->tee, NULL);
  gst_element_link (track->capsfilter, track->tee);
  gst_element_sync_state_with_parent (track->tee);
  gst_element_sync_state_with_parent (track->capsfilter);
  teesink = gst_element_get_static_pad (track->tee, "sink");
  gst_pad_add_probe (teesink, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM |
      GST_PAD_PROBE_TYPE_EVENT_UPSTREAM, local_track_probe, track, NULL);
  gst_object_unref (teesink);
  track->sinkpad = gst_element_get_static_pad (track->capsfilter, "sink");

  g_mutex_lock (&self->lock);
  self->tracks[kind] = track;
  g_mutex_unlock (&self->lock);
  self->events->publish (self);
  return gst_object_ref (track->sinkpad);
}

void
legba_room_media_free_track (LegbaLocalTrack * track)
{
  GstBin *bin = track->room->bin;

  if (bin != NULL) {
    gst_element_set_locked_state (track->capsfilter, TRUE);
    gst_element_set_locked_state (track->tee, TRUE);
    gst_element_set_state (track->capsfilter, GST_STATE_NULL);
    gst_element_set_state (track->tee, GST_STATE_NULL);
    gst_bin_remove_many (bin, track->capsfilter, track->tee, NULL);
  }
  legba_clear_source (&track->key_unit_later);
  gst_object_unref (track->sinkpad);
  gst_object_unref (track->capsfilter);
  gst_object_unref (track->tee);
  gst_clear_caps (&track->caps);
  g_free (track);
}

static void unlink_send (LegbaPeer * peer, LegbaTrackKind kind);

/**
 * legba_room_remove_track:
 * @self: a #LegbaRoom
 * @kind: the kind of track
 *
 * Stops sending the local track of @kind to every participant and removes
 * its elements from #LegbaRoom:bin; unlink its pad first. Peer
 * connections keep their negotiated media (nothing is renegotiated).
 */
void
legba_room_remove_track (LegbaRoom * self, LegbaTrackKind kind)
{
  LegbaLocalTrack *track;
  GHashTableIter iter;
  gpointer peer;

  g_return_if_fail (LEGBA_IS_ROOM (self));
  g_return_if_fail (kind <= LEGBA_TRACK_KIND_AUDIO);

  if (self->tracks[kind] == NULL)
    return;
  g_hash_table_iter_init (&iter, self->peers);
  while (g_hash_table_iter_next (&iter, NULL, &peer))
    unlink_send (peer, kind);
  g_mutex_lock (&self->lock);
  track = g_steal_pointer (&self->tracks[kind]);
  g_mutex_unlock (&self->lock);
  legba_room_media_free_track (track);
}

gboolean
legba_room_media_ready (LegbaRoom * self)
{
  gboolean ready = TRUE;

  g_mutex_lock (&self->lock);
  for (guint i = 0; i < G_N_ELEMENTS (self->tracks); i++)
    if (self->tracks[i] != NULL && self->tracks[i]->caps == NULL)
      ready = FALSE;
  g_mutex_unlock (&self->lock);
  return ready;
}

static GstCaps *
track_caps (LegbaRoom * self, LegbaTrackKind kind)
{
  GstCaps *caps = NULL;

  g_mutex_lock (&self->lock);
  if (self->tracks[kind] != NULL && self->tracks[kind]->caps != NULL)
    caps = gst_caps_ref (self->tracks[kind]->caps);
  g_mutex_unlock (&self->lock);
  return caps;
}

/* ---- Codecs (§5) ---- */

/* §5: constrained baseline at the level the resolution needs: 3.1 up to
 * 720p30, 4.0 for 1080p, 5.1 above. */
static const char *
h264_profile_level_id (const GstCaps * caps)
{
  const GstStructure *s = caps ? gst_caps_get_structure (caps, 0) : NULL;
  int width = 0, height = 0;

  if (s != NULL) {
    gst_structure_get_int (s, "width", &width);
    gst_structure_get_int (s, "height", &height);
  }
  if ((gint64) width * height <= 1280 * 720)
    return "42e01f";
  if ((gint64) width * height <= 1920 * 1088)
    return "42e028";
  return "42e033";
}

/* The fmtp value of payload type pt in media, or NULL; *index is the
 * attribute's position. */
static const char *
find_fmtp (const GstSDPMedia * media, const char *pt, guint * index)
{
  size_t n = strlen (pt);

  for (guint i = 0; i < gst_sdp_media_attributes_len (media); i++) {
    const GstSDPAttribute *attr = gst_sdp_media_get_attribute (media, i);

    if (g_strcmp0 (attr->key, "fmtp") == 0 && attr->value != NULL &&
        strncmp (attr->value, pt, n) == 0 && attr->value[n] == ' ') {
      if (index != NULL)
        *index = i;
      return attr->value + n + 1;
    }
  }
  return NULL;
}

static char *
find_profile_level_id (const char *fmtp)
{
  const char *at = fmtp ? strstr (fmtp, "profile-level-id=") : NULL;

  if (at == NULL)
    return NULL;
  at += strlen ("profile-level-id=");
  return g_strndup (at, strcspn (at, "; "));
}

static gboolean
is_h264 (const GstSDPMedia * media, const char *pt)
{
  g_autofree char *prefix = g_strdup_printf ("%s ", pt);

  for (guint i = 0; i < gst_sdp_media_attributes_len (media); i++) {
    const GstSDPAttribute *attr = gst_sdp_media_get_attribute (media, i);

    if (g_strcmp0 (attr->key, "rtpmap") == 0 && attr->value != NULL &&
        g_str_has_prefix (attr->value, prefix))
      return g_ascii_strncasecmp (attr->value + strlen (prefix), "H264/",
          5) == 0;
  }
  return FALSE;
}

/* GStreamer 1.22 reads an offer's H.264 profile-level-id as a `profile`
 * and writes no profile-level-id back into the answer, which leaves the
 * offerer (a browser) to assume baseline level 1.0, or refuse. The answer
 * takes the offer's profile-level-id for each H.264 payload type it
 * accepted: the same profile (the one the offer and the codec preferences
 * agreed on) and the offerer's level (level-asymmetry-allowed lets each
 * side send at its own). */
static void
complete_h264_levels (const GstSDPMedia * from, GstSDPMedia * media)
{
  for (guint f = 0; f < gst_sdp_media_formats_len (media); f++) {
    const char *pt = gst_sdp_media_get_format (media, f);
    g_autofree char *level = NULL;
    g_autofree char *value = NULL;
    const char *fmtp;
    guint index = 0;

    if (!is_h264 (media, pt))
      continue;
    fmtp = find_fmtp (media, pt, &index);
    if (fmtp != NULL && strstr (fmtp, "profile-level-id=") != NULL)
      continue;
    level = find_profile_level_id (find_fmtp (from, pt, NULL));
    if (level == NULL)
      continue;
    if (fmtp == NULL) {
      value = g_strdup_printf ("%s profile-level-id=%s", pt, level);
      gst_sdp_media_add_attribute (media, "fmtp", value);
    } else {
      GstSDPAttribute attr;

      value = g_strdup_printf ("%s %s;profile-level-id=%s", pt, fmtp, level);
      gst_sdp_attribute_set (&attr, "fmtp", value);
      gst_sdp_media_replace_attribute (media, index, &attr);
    }
  }
}

/* The id an a=extmap of media gives the transport-wide-cc extension
 * (RFC 8285: "ID[/direction] URI [attributes]"), or 0. */
static guint
twcc_extension_id (const GstSDPMedia * media)
{
  for (guint i = 0; i < gst_sdp_media_attributes_len (media); i++) {
    const GstSDPAttribute *attr = gst_sdp_media_get_attribute (media, i);
    g_auto (GStrv) words = NULL;
    guint64 id;
    char *end;

    if (g_strcmp0 (attr->key, "extmap") != 0 || attr->value == NULL)
      continue;
    words = g_strsplit (attr->value, " ", 3);
    if (words[0] == NULL || words[1] == NULL ||
        strcmp (words[1], LEGBA_TWCC_URI) != 0)
      continue;
    id = g_ascii_strtoull (words[0], &end, 10);
    /* one-byte (1-14) or two-byte (1-255) headers */
    if (end != words[0] && (*end == '\0' || *end == '/') && id >= 1 &&
        id <= 255)
      return (guint) id;
  }
  return 0;
}

static gboolean
has_transport_cc (const GstSDPMedia * media)
{
  for (guint i = 0; i < gst_sdp_media_attributes_len (media); i++) {
    const GstSDPAttribute *attr = gst_sdp_media_get_attribute (media, i);

    if (g_strcmp0 (attr->key, "rtcp-fb") == 0 && attr->value != NULL &&
        g_str_has_suffix (attr->value, " transport-cc"))
      return TRUE;
  }
  return FALSE;
}

/* draft-holmer-rmcat-transport-wide-cc-extensions-01 §4: the sender
 * numbers its packets only if the answer takes the extension too.
 * webrtcbin 1.22 builds an answer from the offer's formats and feedback
 * but not its a=extmap lines, so it accepts transport-cc feedback and
 * then gets no sequence number to give it with: the offerer (a browser)
 * is left without any delay-based estimate and ramps up on its
 * loss-based controller alone, 8% a second. The answer takes the offer's
 * id for the extension on each media whose transport-cc feedback it
 * accepted; webrtcbin reads it from the local description it is given
 * and hands it to the receiving rtpsession, which then sends the
 * feedback. */
static void
complete_twcc (const GstSDPMedia * from, GstSDPMedia * media)
{
  guint id = twcc_extension_id (from);
  g_autofree char *value = NULL;

  if (id == 0 || gst_sdp_media_get_port (media) == 0 ||
      !has_transport_cc (media) || twcc_extension_id (media) != 0)
    return;
  value = g_strdup_printf ("%u %s", id, LEGBA_TWCC_URI);
  gst_sdp_media_add_attribute (media, "extmap", value);
}

void
legba_room_media_complete_answer (const GstSDPMessage * offer,
    GstSDPMessage * answer)
{
  guint n = MIN (gst_sdp_message_medias_len (offer),
      gst_sdp_message_medias_len (answer));

  for (guint m = 0; m < n; m++) {
    const GstSDPMedia *from = gst_sdp_message_get_media (offer, m);
    GstSDPMedia *media = (GstSDPMedia *) gst_sdp_message_get_media (answer, m);

    complete_h264_levels (from, media);
    complete_twcc (from, media);
  }
}

static GstStructure *
rtp_structure (const char *media, const char *encoding, int clock_rate,
    int payload, LegbaPeerRole role)
{
  GstStructure *s = gst_structure_new ("application/x-rtp",
      "media", G_TYPE_STRING, media,
      "encoding-name", G_TYPE_STRING, encoding,
      "clock-rate", G_TYPE_INT, clock_rate, NULL);

  /* an answer keeps the offer's payload types and feedback (webrtcbin
   * intersects the offer with these) and its transport-wide-cc extension
   * id (legba_room_media_complete_answer) */
  if (role == LEGBA_PEER_ANSWERER)
    return s;
  gst_structure_set (s, "payload", G_TYPE_INT, payload, NULL);
  if (strcmp (media, "video") == 0)
    gst_structure_set (s, "rtcp-fb-nack", G_TYPE_BOOLEAN, TRUE,
        "rtcp-fb-nack-pli", G_TYPE_BOOLEAN, TRUE,
        "rtcp-fb-ccm-fir", G_TYPE_BOOLEAN, TRUE,
        "rtcp-fb-transport-cc", G_TYPE_BOOLEAN, TRUE,
        "extmap-1", G_TYPE_STRING, LEGBA_TWCC_URI, NULL);
  return s;
}

GstCaps *
legba_room_media_codec_preferences (LegbaRoom * self, LegbaTrackKind kind,
    LegbaPeerRole role, gboolean receive_only)
{
  g_autoptr (GstCaps) local = receive_only ? NULL : track_caps (self, kind);
  GstCaps *caps = gst_caps_new_empty ();
  const char *name = local ?
      gst_structure_get_name (gst_caps_get_structure (local, 0)) : NULL;

  if (kind == LEGBA_TRACK_KIND_AUDIO) {
    GstStructure *s = rtp_structure ("audio", "OPUS", 48000, 111, role);

    gst_structure_set (s, "encoding-params", G_TYPE_STRING, "2", NULL);
    gst_caps_append_structure (caps, s);
    return caps;
  }
  /* §5: a sender offers only the codec it publishes; a receive-only side
   * offers H.264 and VP8 */
  if (name == NULL || strcmp (name, "video/x-h264") == 0) {
    GstStructure *s = rtp_structure ("video", "H264", 90000, 96, role);

    gst_structure_set (s, "packetization-mode", G_TYPE_STRING, "1", NULL);
    /* an answer matches the offer's profile only: GStreamer 1.22 reads
     * an offer's profile-level-id as `profile` (the level is put back by
     * legba_room_media_complete_answer) */
    if (role == LEGBA_PEER_OFFERER)
      gst_structure_set (s, "profile-level-id", G_TYPE_STRING,
          h264_profile_level_id (local), "level-asymmetry-allowed",
          G_TYPE_STRING, "1", NULL);
    else
      gst_structure_set (s, "profile", G_TYPE_STRING, "constrained-baseline",
          NULL);
    gst_caps_append_structure (caps, s);
  }
  if (name == NULL || strcmp (name, "video/x-vp8") == 0)
    gst_caps_append_structure (caps, rtp_structure ("video", "VP8", 90000, 97,
            role));
  return caps;
}

/* ---- Sending: one branch per peer from each local tee ---- */

static int
find_media (const GstSDPMessage * sdp, const char *kind)
{
  for (guint i = 0; i < gst_sdp_message_medias_len (sdp); i++) {
    const GstSDPMedia *media = gst_sdp_message_get_media (sdp, i);

    if (g_strcmp0 (gst_sdp_media_get_media (media), kind) == 0)
      return gst_sdp_media_get_port (media) != 0 ? (int) i : -1;
  }
  return -1;
}

/* A media's direction attribute, as its description's writer sees it */
static const char *
media_direction (const GstSDPMedia * media)
{
  const char *direction = "sendrecv";

  for (guint i = 0; i < gst_sdp_media_attributes_len (media); i++) {
    const char *key = gst_sdp_media_get_attribute (media, i)->key;

    if (strcmp (key, "sendrecv") == 0 || strcmp (key, "sendonly") == 0 ||
        strcmp (key, "recvonly") == 0 || strcmp (key, "inactive") == 0)
      direction = key;
  }
  return direction;
}

/* Does the negotiated answer let the local participant send this media? */
static gboolean
local_sends (LegbaPeer * peer, const GstSDPMedia * media)
{
  const char *direction = media_direction (media);

  if (strcmp (direction, "sendrecv") == 0)
    return TRUE;
  /* the answer is ours as answerer, the remote's as offerer */
  return strcmp (direction, peer->role == LEGBA_PEER_ANSWERER ? "sendonly" :
      "recvonly") == 0;
}

/* The payload type and transport-wide-cc extension id the answer gives
 * our codec, as the caps the payloader must produce. */
static GstCaps *
negotiated_caps (const GstSDPMedia * media, const char *encoding)
{
  for (guint i = 0; i < gst_sdp_media_formats_len (media); i++) {
    int pt = atoi (gst_sdp_media_get_format (media, i));
    g_autoptr (GstCaps) caps = gst_sdp_media_get_caps_from_media (media, pt);
    GstStructure *s;
    GstCaps *result;
    int clock_rate = 0;

    if (caps == NULL)
      continue;
    s = gst_caps_get_structure (caps, 0);
    if (g_ascii_strcasecmp (gst_structure_get_string (s, "encoding-name") ?
            gst_structure_get_string (s, "encoding-name") : "", encoding) != 0)
      continue;
    if (strcmp (encoding, "H264") == 0 &&
        g_strcmp0 (gst_structure_get_string (s, "packetization-mode"),
            "1") != 0)
      continue;
    gst_structure_get_int (s, "clock-rate", &clock_rate);
    result = gst_caps_new_simple ("application/x-rtp",
        "media", G_TYPE_STRING, gst_structure_get_string (s, "media"),
        "encoding-name", G_TYPE_STRING, encoding,
        "clock-rate", G_TYPE_INT, clock_rate, "payload", G_TYPE_INT, pt, NULL);
    caps = gst_caps_make_writable (caps);
    gst_sdp_media_attributes_to_caps (media, caps);
    s = gst_caps_get_structure (caps, 0);
    for (int f = 0; f < gst_structure_n_fields (s); f++) {
      const char *field = gst_structure_nth_field_name (s, f);
      const char *uri = gst_structure_get_string (s, field);

      if (g_str_has_prefix (field, "extmap-") && uri != NULL &&
          strcmp (uri, LEGBA_TWCC_URI) == 0)
        gst_caps_set_simple (result, field, G_TYPE_STRING, uri, NULL);
    }
    return result;
  }
  return NULL;
}

static GstElement *
make_payloader (const char *encoding, GError ** error)
{
  const char *factory = strcmp (encoding, "H264") == 0 ? "rtph264pay" :
      strcmp (encoding, "VP8") == 0 ? "rtpvp8pay" : "rtpopuspay";
  GstElement *pay = gst_element_factory_make (factory, NULL);

  if (pay == NULL) {
    g_set_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_MISSING_PLUGIN,
        "The GStreamer element %s is missing (gst-plugins-good)", factory);
    return NULL;
  }
  if (strcmp (encoding, "H264") == 0) {
    /* SPS/PPS before every key frame: a newcomer decodes from the first */
    g_object_set (pay, "config-interval", -1, NULL);
    gst_util_set_object_arg (G_OBJECT (pay), "aggregate-mode", "zero-latency");
  } else if (strcmp (encoding, "VP8") == 0) {
    gst_util_set_object_arg (G_OBJECT (pay), "picture-id-mode", "15-bit");
  }
  return pay;
}

static const char *
encoding_of (const GstCaps * caps)
{
  const char *name = gst_structure_get_name (gst_caps_get_structure (caps, 0));

  if (strcmp (name, "video/x-h264") == 0)
    return "H264";
  if (strcmp (name, "video/x-vp8") == 0)
    return "VP8";
  return "OPUS";
}

/* webrtcbin 1.22 makes a sink pad of its own for a sending transceiver
 * that has none when the session is negotiated; use it if it is there. */
static GstPad *
find_sink_pad (LegbaPeer * peer, guint mline)
{
  GstPad *found = NULL;

  GST_OBJECT_LOCK (peer->webrtcbin);
  for (GList * l = GST_ELEMENT (peer->webrtcbin)->sinkpads; l; l = l->next) {
    GstWebRTCRTPTransceiver *transceiver = NULL;
    guint index = G_MAXUINT;

    if (g_object_class_find_property (G_OBJECT_GET_CLASS (l->data),
            "transceiver") == NULL)
      continue;
    g_object_get (l->data, "transceiver", &transceiver, NULL);
    if (transceiver != NULL)
      g_object_get (transceiver, "mlineindex", &index, NULL);
    if (index == mline && found == NULL)
      found = gst_object_ref (l->data);
    g_clear_object (&transceiver);
  }
  GST_OBJECT_UNLOCK (peer->webrtcbin);
  return found;
}

/* webrtcbin 1.22 syncs what it sends to the clock (a clocksync before its
 * RTP session, for sources that are not live: a file would otherwise go
 * out as fast as it is read), and the clocksync waits out the latency
 * that upstream reports: the encoder's, one frame for x264enc. A live
 * source paces its frames itself, so for it that wait is delay alone, and
 * it came or not by accident: the clocksync learns the latency only when
 * the pipeline recomputes it after the branch is linked (a sink added
 * later, an encoder that changes its latency). What webrtcbin hears of a
 * live track's latency is therefore none; a track that is not live keeps
 * being paced. */
static GstPadProbeReturn
send_latency (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  GstQuery *query = GST_PAD_PROBE_INFO_QUERY (info);
  gboolean live;
  GstClockTime min, max;

  if (GST_QUERY_TYPE (query) != GST_QUERY_LATENCY)
    return GST_PAD_PROBE_OK;
  gst_query_parse_latency (query, &live, &min, &max);
  if (live && min > 0)
    gst_query_set_latency (query, TRUE, 0, max);
  return GST_PAD_PROBE_OK;
}

/* The connection is up: the branch's frames may leave, the video from a
 * key frame asked for now (once per branch). */
static void
open_send (LegbaPeer * peer, LegbaTrackKind kind)
{
  LegbaPeerMedia *m = &peer->media[kind];

  if (m->gate == NULL || !legba_send_gate_open (m->gate))
    return;
  GST_DEBUG ("pc %s: connected, %s may leave", peer->pc, kind_names[kind]);
  if (kind == LEGBA_TRACK_KIND_VIDEO)
    gst_pad_send_event (m->tee_pad, legba_room_key_unit_event ());
}

static gboolean
link_send (LegbaPeer * peer, LegbaTrackKind kind, GError ** error)
{
  LegbaRoom *room = peer->room;
  LegbaPeerMedia *m = &peer->media[kind];
  g_autoptr (GstCaps) local = track_caps (room, kind);
  g_autoptr (GstCaps) caps = NULL;
  g_autofree char *sink_name = NULL;
  g_autofree char *ghost_name = NULL;
  GstElement *queue, *pay, *filter;
  GstPad *queue_sink, *filter_src;
  GstPadLinkReturn link;
  int index;

  index = find_media (peer->answer, kind_names[kind]);
  if (local == NULL || index < 0 ||
      !local_sends (peer, gst_sdp_message_get_media (peer->answer, index)))
    return TRUE;
  caps = negotiated_caps (gst_sdp_message_get_media (peer->answer, index),
      encoding_of (local));
  if (caps == NULL) {
    GST_WARNING ("pc %s: %s did not accept our %s codec", peer->pc,
        peer->participant->id, kind_names[kind]);
    return TRUE;
  }
  if (m->ssrc != 0) {
    /* the SSRC the description announced (legba_peer_add_transceivers):
     * the payloader takes the one its downstream caps fix */
    caps = gst_caps_make_writable (caps);
    gst_caps_set_simple (caps, "ssrc", G_TYPE_UINT, m->ssrc, NULL);
  }
  pay = make_payloader (encoding_of (local), error);
  if (pay == NULL)
    return FALSE;
  queue = gst_element_factory_make ("queue", NULL);
  /* a peer that cannot keep up loses frames, never stalls the others:
   * send_gate drops whole frames up to the next key frame once
   * LEGBA_ROOM_SEND_QUEUE_TIME is queued. The queue's own limit, twice
   * that, is never reached; it leaks upstream (GStreamer 1.22's
   * downstream leak re-stores the queued sticky events itself, racing its
   * own streaming thread). */
  g_object_set (queue, "max-size-buffers", 0, "max-size-bytes", 0,
      "max-size-time", 2 * LEGBA_ROOM_SEND_QUEUE_TIME, NULL);
  gst_util_set_object_arg (G_OBJECT (queue), "leaky", "upstream");
  m->gate = legba_send_gate_attach (queue, kind);
  filter = gst_element_factory_make ("capsfilter", NULL);
  g_object_set (filter, "caps", caps, NULL);
  gst_bin_add_many (peer->bin, queue, pay, filter, NULL);
  gst_element_link_many (queue, pay, filter, NULL);
  sink_name = g_strdup_printf ("sink_%d", index);
  m->webrtc_sink = find_sink_pad (peer, index);
  if (m->webrtc_sink == NULL)
    m->webrtc_sink = gst_element_request_pad_simple (peer->webrtcbin,
        sink_name);
  filter_src = gst_element_get_static_pad (filter, "src");
  gst_pad_add_probe (filter_src, GST_PAD_PROBE_TYPE_QUERY_UPSTREAM |
      GST_PAD_PROBE_TYPE_PULL, send_latency, NULL, NULL);
  link = m->webrtc_sink ? gst_pad_link (filter_src, m->webrtc_sink) :
      GST_PAD_LINK_REFUSED;
  gst_object_unref (filter_src);
  if (link != GST_PAD_LINK_OK) {
    g_set_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_PEER,
        "Could not send %s to %s: webrtcbin refused pad %s (%s)",
        kind_names[kind], peer->participant->id, sink_name,
        gst_pad_link_get_name (link));
    return FALSE;
  }
  m->elements[0] = queue;
  m->elements[1] = pay;
  m->elements[2] = filter;
  for (int i = 2; i >= 0; i--)
    gst_element_sync_state_with_parent (m->elements[i]);
  queue_sink = gst_element_get_static_pad (queue, "sink");
  ghost_name = g_strdup_printf ("send_%s", kind_names[kind]);
  m->bin_sink = gst_ghost_pad_new (ghost_name, queue_sink);
  gst_object_unref (queue_sink);
  gst_pad_set_active (m->bin_sink, TRUE);
  gst_element_add_pad (GST_ELEMENT (peer->bin), m->bin_sink);
  m->tee_pad = gst_element_request_pad_simple (room->tracks[kind]->tee,
      "src_%u");
  gst_pad_link (m->tee_pad, m->bin_sink);
  GST_DEBUG ("pc %s: sending %s as %" GST_PTR_FORMAT, peer->pc,
      kind_names[kind], caps);
  if (peer->connection_state == GST_WEBRTC_PEER_CONNECTION_STATE_CONNECTED)
    open_send (peer, kind);
  g_mutex_lock (&peer->lock);
  if (kind == LEGBA_TRACK_KIND_AUDIO && peer->sender != NULL && m->ssrc != 0)
    legba_peer_sender_set_audio_ssrc (LEGBA_PEER_SENDER (peer->sender),
        m->ssrc);
  g_mutex_unlock (&peer->lock);
  return TRUE;
}

void
legba_peer_media_open (LegbaPeer * peer)
{
  for (LegbaTrackKind kind = 0; kind < 2; kind++)
    open_send (peer, kind);
}

gboolean
legba_peer_media_link_send (LegbaPeer * peer, GError ** error)
{
  for (LegbaTrackKind kind = 0; kind < 2; kind++)
    if (peer->room->tracks[kind] != NULL && peer->media[kind].tee_pad == NULL
        && !link_send (peer, kind, error))
      return FALSE;
  return TRUE;
}

/* Stops the branch; when the peer stays (a track was removed) its
 * elements go too. */
static void
unlink_send (LegbaPeer * peer, LegbaTrackKind kind)
{
  LegbaPeerMedia *m = &peer->media[kind];
  LegbaLocalTrack *track = peer->room->tracks[kind];

  m->gate = NULL;
  if (m->tee_pad != NULL) {
    gst_pad_unlink (m->tee_pad, m->bin_sink);
    gst_element_release_request_pad (track->tee, m->tee_pad);
    gst_clear_object (&m->tee_pad);
  }
  if (peer->closing || m->elements[0] == NULL)
    return;
  for (int i = 0; i < 3; i++) {
    gst_element_set_locked_state (m->elements[i], TRUE);
    gst_element_set_state (m->elements[i], GST_STATE_NULL);
    gst_bin_remove (peer->bin, m->elements[i]);
    m->elements[i] = NULL;
  }
  gst_element_remove_pad (GST_ELEMENT (peer->bin), m->bin_sink);
  m->bin_sink = NULL;
  if (m->webrtc_sink != NULL) {
    gst_element_release_request_pad (peer->webrtcbin, m->webrtc_sink);
    gst_clear_object (&m->webrtc_sink);
  }
}

void
legba_peer_media_withdraw (LegbaPeer * peer, LegbaTrackKind kind)
{
  LegbaPeerMedia *m = &peer->media[kind];
  GstPad *track_pad;

  g_mutex_lock (&peer->lock);
  track_pad = g_steal_pointer (&m->track_pad);
  g_mutex_unlock (&peer->lock);
  if (track_pad != NULL && m->track_announced)
    peer->room->events->track (peer->room, peer->participant, kind,
        track_pad, FALSE);
  m->track_announced = FALSE;
  gst_clear_object (&track_pad);
}

void
legba_peer_media_unlink (LegbaPeer * peer)
{
  for (LegbaTrackKind kind = 0; kind < 2; kind++) {
    legba_peer_media_withdraw (peer, kind);
    unlink_send (peer, kind);
    gst_clear_object (&peer->media[kind].webrtc_sink);
  }
}

/* ---- Receiving ---- */

static GstPadProbeReturn
count_frame (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  LegbaPeer *peer = g_object_get_data (G_OBJECT (pad), "legba-peer");
  LegbaTrackKind kind = GPOINTER_TO_INT (data);

  g_mutex_lock (&peer->lock);
  peer->frames[kind]++;
  g_mutex_unlock (&peer->lock);
  return GST_PAD_PROBE_OK;
}

static GstPadProbeReturn
packet_in (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  LegbaPeer *peer = data;
  gint64 now = g_get_monotonic_time ();

  g_mutex_lock (&peer->lock);
  peer->last_rx = now;
  g_mutex_unlock (&peer->lock);
  return GST_PAD_PROBE_OK;
}

/* Liveness (§3 grace period): any packet from the peer. The peer outlives
 * the probe: its bin stops streaming before the peer is released. */
void
legba_peer_media_watch_input (LegbaPeer * peer, GstElement * nicesrc)
{
  GstPad *pad = gst_element_get_static_pad (nicesrc, "src");

  if (pad == NULL)
    return;
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER |
      GST_PAD_PROBE_TYPE_BUFFER_LIST, packet_in, peer, NULL);
  gst_object_unref (pad);
}

static void
unref_pad (gpointer pad, GClosure * closure)
{
  gst_object_unref (pad);
}

/* A newcomer needs a key frame to start decoding: the receiving side
 * asks (a PLI) as soon as the track is consumed; a browser does the same
 * when it starts decoding. */
static void
on_track_linked (GstPad * pad, GstPad * peer_pad, gpointer data)
{
  GstPad *tee_src = data;

  gst_pad_send_event (tee_src, legba_room_key_unit_event ());
}

static void
announce_track (LegbaPeer * peer, gpointer data)
{
  LegbaTrackKind kind = GPOINTER_TO_INT (data);
  GstPad *pad;

  g_mutex_lock (&peer->lock);
  pad = peer->media[kind].track_pad ?
      gst_object_ref (peer->media[kind].track_pad) : NULL;
  g_mutex_unlock (&peer->lock);
  if (pad == NULL)
    return;
  if (peer->sfu_subscriber)
    peer->room->events->sfu_track (peer->room, peer, kind);
  peer->media[kind].track_announced = TRUE;
  GST_INFO ("pc %s: %s track of %s", peer->pc, kind_names[kind],
      peer->participant->id);
  peer->room->events->track (peer->room, peer->participant, kind, pad, TRUE);
  gst_object_unref (pad);
}

static void
discard (LegbaPeer * peer, GstPad * pad)
{
  GstElement *sink = gst_element_factory_make ("fakesink", NULL);
  GstPad *sinkpad;

  g_object_set (sink, "sync", FALSE, "async", FALSE, NULL);
  gst_bin_add (peer->bin, sink);
  gst_element_sync_state_with_parent (sink);
  sinkpad = gst_element_get_static_pad (sink, "sink");
  gst_pad_link (pad, sinkpad);
  gst_object_unref (sinkpad);
}

/* How a received stream is depayloaded: the depayloader, what it must put
 * out, an optional parser after it, and what the track pad carries.
 *
 * H.264 goes through the depayloader's avc output and h264parse, never
 * straight out of its byte-stream output. A sender may put SPS and PPS
 * between the slices of one picture (GStreamer 1.22's rtph264pay with
 * config-interval=-1 does so before every slice of a key frame with
 * several slices, as x264enc tune=zerolatency makes them), and
 * rtph264depay's byte-stream access units end at any SPS or PPS: such a
 * key frame comes out in several buffers, each of which avdec_h264
 * decodes as a picture, and every frame that refers to it is broken up to
 * the next key frame. Its avc output ends access units at the RTP marker bit
 * and keeps parameter sets out of the stream (in codec_data); h264parse
 * turns that back into byte-stream access units and puts SPS and PPS
 * before the first slice of every key frame, so that any decoder can
 * start at any key frame. */
typedef struct
{
  LegbaTrackKind kind;
  const char *depay;
  const char *depay_caps;
  const char *parse;            /* nullable */
  const char *caps;             /* what the track pad carries */
} ReceiveFormat;

static const ReceiveFormat receive_formats[] = {
  {LEGBA_TRACK_KIND_VIDEO, "rtph264depay",
        "video/x-h264, stream-format=avc, alignment=au", "h264parse",
      "video/x-h264, stream-format=byte-stream, alignment=au"},
  {LEGBA_TRACK_KIND_VIDEO, "rtpvp8depay", "video/x-vp8", NULL, "video/x-vp8"},
  {LEGBA_TRACK_KIND_AUDIO, "rtpopusdepay", "audio/x-opus", NULL,
      "audio/x-opus"},
};

static const ReceiveFormat *
receive_format (const GstCaps * caps)
{
  const GstStructure *s = gst_caps_get_structure (caps, 0);
  const char *encoding = gst_structure_get_string (s, "encoding-name");
  static const char *const encodings[] = { "H264", "VP8", "OPUS" };

  for (guint i = 0; encoding != NULL && i < G_N_ELEMENTS (encodings); i++)
    if (g_ascii_strcasecmp (encoding, encodings[i]) == 0)
      return &receive_formats[i];
  return NULL;
}

static GstElement *
make_capsfilter (const char *desc)
{
  GstElement *filter = gst_element_factory_make ("capsfilter", NULL);
  g_autoptr (GstCaps) caps = gst_caps_from_string (desc);

  g_object_set (filter, "caps", caps, NULL);
  return filter;
}

/* After a loss (a DISCONT buffer) and at the start, the H.264 that leaves
 * the depayloader must begin at a whole key frame. rtph264depay's
 * wait-for-keyframe lets through a key frame whose first slice was lost
 * (any IDR slice ends its wait), and a decoder takes that for a picture,
 * broken, with every frame after it up to the next key frame. The gate
 * drops access units until one is an IDR picture from its first
 * macroblock on, and asks the sender for another key frame when it drops
 * a broken one. Runs on the depayloader's streaming thread (avc access
 * units, 4-byte lengths: what rtph264depay writes). */
typedef struct
{
  gboolean waiting;
  guint64 dropped;
} KeyGate;

static gboolean
starts_key_picture (GstBuffer * buffer)
{
  GstMapInfo map;
  gboolean starts = FALSE;
  gsize at = 0;

  if (GST_BUFFER_FLAG_IS_SET (buffer, GST_BUFFER_FLAG_DELTA_UNIT) ||
      !gst_buffer_map (buffer, &map, GST_MAP_READ))
    return FALSE;
  while (at + 6 <= map.size) {
    const guint8 *nal = map.data + at;
    /* byte by byte: GST_READ_UINT32_BE loads unaligned words */
    guint32 size = (guint32) nal[0] << 24 | nal[1] << 16 | nal[2] << 8 | nal[3];
    guint type = nal[4] & 0x1f;

    if (size < 2 || size > map.size - at - 4)
      break;
    if (type == 1 || type == 5) {
      /* the first slice: IDR, first_mb_in_slice 0 (ue(v) "1") */
      starts = type == 5 && (nal[5] & 0x80) != 0;
      break;
    }
    at += 4 + size;
  }
  gst_buffer_unmap (buffer, &map);
  return starts;
}

static GstPadProbeReturn
key_gate (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  KeyGate *gate = data;
  GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER (info);

  if (GST_BUFFER_FLAG_IS_SET (buffer, GST_BUFFER_FLAG_DISCONT))
    gate->waiting = TRUE;
  if (!gate->waiting)
    return GST_PAD_PROBE_OK;
  if (starts_key_picture (buffer)) {
    if (gate->dropped > 0)
      GST_INFO_OBJECT (pad, "H.264 resumes at a key frame after %"
          G_GUINT64_FORMAT " access units dropped", gate->dropped);
    gate->waiting = FALSE;
    gate->dropped = 0;
    return GST_PAD_PROBE_OK;
  }
  if (gate->dropped++ == 0 ||
      !GST_BUFFER_FLAG_IS_SET (buffer, GST_BUFFER_FLAG_DELTA_UNIT))
    gst_pad_send_event (pad, legba_room_key_unit_event ());
  return GST_PAD_PROBE_DROP;
}

/* A received video's requests for a key frame leave as PLI (RFC 4585
 * 6.3.1), not FIR. The depayloader and the key gate ask with an upstream
 * force-key-unit event whose all-headers is TRUE, which rtpsession 1.22
 * turns into a FIR when the sender accepts FIR; RFC 5104 4.3.1.2 keeps
 * FIR for a decoder that must start afresh and asks for PLI when loss
 * broke the picture. And rtpsession increments a FIR's sequence number
 * only when the event's count changes, which these events never do: every
 * FIR repeats the first one's number, which a sender takes for the same
 * request sent again (RFC 5104 4.3.1.1.1). libwebrtc counts such a FIR and
 * makes no key frame for it, and the picture stayed frozen until the
 * sender made a key frame for a reason of its own. Runs on the
 * depayloader's sink pad. */
static GstPadProbeReturn
key_unit_as_pli (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  GstEvent *event = GST_PAD_PROBE_INFO_EVENT (info);
  gboolean all_headers = FALSE;
  guint count = 0;

  if (!gst_video_event_is_force_key_unit (event) ||
      !gst_video_event_parse_upstream_force_key_unit (event, NULL,
          &all_headers, &count) || !all_headers)
    return GST_PAD_PROBE_OK;
  GST_PAD_PROBE_INFO_DATA (info) =
      gst_video_event_new_upstream_force_key_unit (GST_CLOCK_TIME_NONE,
      FALSE, count);
  gst_event_unref (event);
  return GST_PAD_PROBE_OK;
}

/* The plugin of the decoder decodebin would choose for a received format
 * (the highest-ranked one), loaded once per process: on a thread of its
 * own from the first description that announces media
 * (legba_room_media_receives), and at the latest on a stream's
 * own thread before its first track is announced (a stream that comes
 * first waits here for the load under way). An application makes its decoder
 * in its track-added handler, on the room's context; the first one of a
 * process would otherwise load its plugin there (avdec_h264: gst-libav
 * registers every codec it has, about 100 ms of a core), and every other
 * peer connection's signalling would wait behind it. */
static void
load_decoder (const ReceiveFormat * format)
{
  static gsize loaded[G_N_ELEMENTS (receive_formats)];
  gsize *once = &loaded[format - receive_formats];
  g_autoptr (GstCaps) caps = NULL;
  GList *decoders, *usable;

  if (!g_once_init_enter (once))
    return;
  caps = gst_caps_from_string (format->caps);
  decoders = gst_element_factory_list_get_elements
      (GST_ELEMENT_FACTORY_TYPE_DECODER, GST_RANK_MARGINAL);
  usable = gst_element_factory_list_filter (decoders, caps, GST_PAD_SINK,
      FALSE);
  usable = g_list_sort (usable, gst_plugin_feature_rank_compare_func);
  if (usable != NULL) {
    GstPluginFeature *feature = gst_plugin_feature_load (usable->data);

    GST_DEBUG ("%s: %s", format->caps, feature != NULL ?
        GST_OBJECT_NAME (feature) : "no decoder could be loaded");
    g_clear_object (&feature);
  }
  gst_plugin_feature_list_free (usable);
  gst_plugin_feature_list_free (decoders);
  g_once_init_leave (once, 1);
}

void
legba_room_media_load_decoders (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (receive_formats); i++)
    load_decoder (&receive_formats[i]);
}

/* A participant's offer or answer: whether it sends audio or video (an
 * m-line with a port whose direction lets the remote side send). Once
 * one does, the decoders are loaded, long before that media's first
 * packet. A process whose rooms only ever exchange data never loads
 * them. */
gboolean
legba_room_media_receives (const GstSDPMessage * sdp)
{
  for (guint i = 0; i < gst_sdp_message_medias_len (sdp); i++) {
    const GstSDPMedia *media = gst_sdp_message_get_media (sdp, i);
    const char *kind = gst_sdp_media_get_media (media);
    const char *direction = media_direction (media);

    if (gst_sdp_media_get_port (media) != 0 &&
        (g_strcmp0 (kind, "audio") == 0 || g_strcmp0 (kind, "video") == 0) &&
        (strcmp (direction, "sendrecv") == 0 ||
            strcmp (direction, "sendonly") == 0))
      return TRUE;
  }
  return FALSE;
}

/* webrtcbin's pad-added, on a streaming thread: the stream is flowing, so
 * its branch is built here and now; the application hears of it on the
 * room's context. */
void
legba_peer_media_on_pad_added (GstElement * webrtcbin, GstPad * pad,
    LegbaPeer * peer)
{
  g_autoptr (GstCaps) caps = NULL;
  g_autofree char *ghost_name = NULL;
  const ReceiveFormat *format = NULL;
  GstElement *chain[5];
  guint n = 0;
  GstPad *pad_in, *tee_src, *ghost, *counted;
  gboolean take;

  if (GST_PAD_DIRECTION (pad) != GST_PAD_SRC)
    return;
  caps = gst_pad_get_current_caps (pad);
  if (caps == NULL)
    caps = gst_pad_query_caps (pad, NULL);
  if (!gst_caps_is_empty (caps))
    format = receive_format (caps);
  if (format == NULL
      || (chain[0] = gst_element_factory_make (format->depay, NULL)) == NULL) {
    GST_WARNING ("pc %s: discarding a stream of %" GST_PTR_FORMAT, peer->pc,
        caps);
    discard (peer, pad);
    return;
  }
  n = 1;
  if (format->parse != NULL) {
    chain[n] = gst_element_factory_make (format->parse, NULL);
    if (chain[n] == NULL) {
      GST_WARNING ("pc %s: discarding a stream of %" GST_PTR_FORMAT
          ": the GStreamer element %s is missing", peer->pc, caps,
          format->parse);
      gst_object_unref (chain[0]);
      discard (peer, pad);
      return;
    }
    n++;
  }
  g_mutex_lock (&peer->lock);
  take = !peer->closing && !peer->media[format->kind].receiving;
  peer->media[format->kind].receiving = TRUE;
  g_mutex_unlock (&peer->lock);
  if (!take) {
    for (guint i = 0; i < n; i++)
      gst_object_unref (chain[i]);
    discard (peer, pad);
    return;
  }
  if (format->kind == LEGBA_TRACK_KIND_VIDEO) {
    GstPad *depay_sink = gst_element_get_static_pad (chain[0], "sink");

    /* after a lost packet: ask the sender for a key frame (a PLI) and hand
     * the decoder nothing until it comes, never a broken frame */
    g_object_set (chain[0], "request-keyframe", TRUE, "wait-for-keyframe",
        TRUE, NULL);
    gst_pad_add_probe (depay_sink, GST_PAD_PROBE_TYPE_EVENT_UPSTREAM,
        key_unit_as_pli, NULL, NULL);
    gst_object_unref (depay_sink);
  }
  if (format->parse != NULL) {
    KeyGate *gate = g_new0 (KeyGate, 1);
    GstPad *depay_src = gst_element_get_static_pad (chain[0], "src");

    gate->waiting = TRUE;
    gst_pad_add_probe (depay_src, GST_PAD_PROBE_TYPE_BUFFER, key_gate, gate,
        g_free);
    gst_object_unref (depay_src);
    /* parameter sets before every key frame */
    g_object_set (chain[1], "config-interval", -1, NULL);
    /* the depayloader's output, between the two */
    chain[2] = chain[1];
    chain[1] = make_capsfilter (format->depay_caps);
    n++;
  }
  chain[n++] = make_capsfilter (format->caps);
  /* an unlinked track pad discards its data, never stops the stream */
  chain[n] = gst_element_factory_make ("tee", NULL);
  g_object_set (chain[n], "allow-not-linked", TRUE, NULL);
  n++;
  for (guint i = 0; i < n; i++)
    gst_bin_add (peer->bin, chain[i]);
  for (guint i = 0; i + 1 < n; i++)
    gst_element_link (chain[i], chain[i + 1]);
  counted = gst_element_get_static_pad (chain[n - 2], "src");
  g_object_set_data (G_OBJECT (counted), "legba-peer", peer);
  gst_pad_add_probe (counted, GST_PAD_PROBE_TYPE_BUFFER, count_frame,
      GINT_TO_POINTER (format->kind), NULL);
  gst_object_unref (counted);
  tee_src = gst_element_request_pad_simple (chain[n - 1], "src_%u");
  ghost_name = g_strdup_printf ("recv_%s", kind_names[format->kind]);
  ghost = gst_ghost_pad_new (ghost_name, tee_src);
  g_signal_connect_data (ghost, "linked", G_CALLBACK (on_track_linked),
      tee_src, unref_pad, 0);
  gst_pad_set_active (ghost, TRUE);
  gst_element_add_pad (GST_ELEMENT (peer->bin), ghost);
  for (guint i = n; i > 0; i--)
    gst_element_sync_state_with_parent (chain[i - 1]);
  pad_in = gst_element_get_static_pad (chain[0], "sink");
  gst_pad_link (pad, pad_in);
  gst_object_unref (pad_in);

  load_decoder (format);
  g_mutex_lock (&peer->lock);
  peer->media[format->kind].track_pad = gst_object_ref (ghost);
  g_mutex_unlock (&peer->lock);
  legba_peer_invoke (peer, announce_track, GINT_TO_POINTER (format->kind),
      NULL);
}

/* ---- Stats ---- */

static gdouble
number (const GstStructure * s, const char *field)
{
  const GValue *value = gst_structure_get_value (s, field);
  GValue d = G_VALUE_INIT;
  gdouble result = 0;

  if (value == NULL)
    return 0;
  g_value_init (&d, G_TYPE_DOUBLE);
  if (g_value_transform (value, &d))
    result = g_value_get_double (&d);
  g_value_unset (&d);
  return result;
}

typedef struct
{
  gdouble bytes_in, bytes_out, packets_in, lost, rtt, jitter;
} Totals;

static gboolean
add_stat (GQuark field, const GValue * value, gpointer data)
{
  Totals *t = data;
  const GstStructure *s;
  GstWebRTCStatsType type;

  if (!GST_VALUE_HOLDS_STRUCTURE (value))
    return TRUE;
  s = gst_value_get_structure (value);
  if (!gst_structure_get (s, "type", GST_TYPE_WEBRTC_STATS_TYPE, &type, NULL))
    return TRUE;
  switch (type) {
    case GST_WEBRTC_STATS_INBOUND_RTP:
      t->bytes_in += number (s, "bytes-received");
      t->packets_in += number (s, "packets-received");
      t->lost += number (s, "packets-lost");
      t->jitter = MAX (t->jitter, number (s, "jitter"));
      break;
    case GST_WEBRTC_STATS_OUTBOUND_RTP:
      t->bytes_out += number (s, "bytes-sent");
      break;
    case GST_WEBRTC_STATS_REMOTE_INBOUND_RTP:
      t->rtt = MAX (t->rtt, number (s, "round-trip-time"));
      break;
    default:
      break;
  }
  return TRUE;
}

/* Whether an RTP stream is sent to the participant or received from it. */
gboolean
legba_peer_media_has_streams (LegbaPeer * peer)
{
  gboolean any = FALSE;

  g_mutex_lock (&peer->lock);
  for (guint k = 0; k < G_N_ELEMENTS (peer->media); k++)
    any |= peer->media[k].webrtc_sink != NULL || peer->media[k].receiving;
  g_mutex_unlock (&peer->lock);
  return any;
}

GstStructure *
legba_peer_media_summarize (LegbaPeer * peer, const GstStructure * stats)
{
  Totals t = { 0, };
  gint64 now = g_get_monotonic_time ();
  gdouble seconds = (now - peer->last_stats_time) / 1e6;
  guint64 rate_in = 0, rate_out = 0, frames[2];
  GstStructure *summary;

  gst_structure_foreach (stats, add_stat, &t);
  if (peer->last_stats != NULL && seconds > 0) {
    rate_in = MAX (0, t.bytes_in - number (peer->last_stats,
            "bytes-received")) * 8 / seconds;
    rate_out = MAX (0, t.bytes_out - number (peer->last_stats,
            "bytes-sent")) * 8 / seconds;
  }
  g_mutex_lock (&peer->lock);
  frames[0] = peer->frames[0];
  frames[1] = peer->frames[1];
  g_mutex_unlock (&peer->lock);
  summary = gst_structure_new ("legba-participant-stats",
      "bitrate-in", G_TYPE_UINT64, rate_in,
      "bitrate-out", G_TYPE_UINT64, rate_out,
      "bytes-received", G_TYPE_UINT64, (guint64) t.bytes_in,
      "bytes-sent", G_TYPE_UINT64, (guint64) t.bytes_out,
      "packets-received", G_TYPE_UINT64, (guint64) t.packets_in,
      "packets-lost", G_TYPE_INT64, (gint64) t.lost,
      "round-trip-time", G_TYPE_DOUBLE, t.rtt,
      "jitter", G_TYPE_DOUBLE, t.jitter,
      "video-frames-received", G_TYPE_UINT64, frames[0],
      "audio-frames-received", G_TYPE_UINT64, frames[1], NULL);
  legba_peer_congestion_add_stats (peer, summary);
  g_clear_pointer (&peer->last_stats, gst_structure_free);
  peer->last_stats = gst_structure_copy (summary);
  peer->last_stats_time = now;
  return summary;
}
