/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The knobs of docs/webrtcbin.md on one peer connection's webrtcbin and
 * its ICE agent: the plugins it needs, its settings and servers, the
 * elements it makes (the certificate, SCTP association ids, the taps of
 * the media and data parts), the FEC it is refused, the sequence number
 * its RED encoder misplaces, and the release of its TURN allocations when
 * it closes.
 */
#include <legba/room/legba-room-private.h>
#include <legba/room/legba-room-data-private.h>

#include <gst/rtp/gstrtpbuffer.h>
#include <nice/agent.h>

/* rtpredenc of gst-plugins-good 1.22.0 copies a packet's transport-wide
 * sequence number into the RED packet it makes under extension id 1,
 * whatever id was negotiated (fixed in 1.22.1: "redenc: fix setting of
 * extension ID for twcc"). rtpsession then finds no number where it
 * looks, and the video, wrapped in RED, leaves unnumbered: no
 * transport-wide feedback comes back, and the estimate falls to its
 * floor. Each RED packet gets its number back under the negotiated id
 * (from the encoder's caps): a one-byte element of id 1 and two bytes,
 * where none has the negotiated id, is renamed. */
static gboolean
renumber_twcc (GstBuffer ** buffer, guint idx, gpointer data)
{
  guint id = GPOINTER_TO_UINT (data);
  GstRTPBuffer rtp = GST_RTP_BUFFER_INIT;
  guint8 *ext, *one = NULL;
  guint16 bits;
  guint words;

  *buffer = gst_buffer_make_writable (*buffer);
  if (!gst_rtp_buffer_map (*buffer, GST_MAP_READWRITE, &rtp))
    return TRUE;
  if (gst_rtp_buffer_get_extension_data (&rtp, &bits, (gpointer *) & ext,
          &words) && bits == 0xBEDE) {
    for (guint i = 0; i < words * 4;) {
      guint element_id = ext[i] >> 4, len = (ext[i] & 0x0f) + 1;

      if (ext[i] == 0) {
        i++;
        continue;
      }
      if (element_id == 15)
        break;
      if (element_id == id) {
        one = NULL;
        break;
      }
      if (element_id == 1 && len == 2)
        one = &ext[i];
      i += 1 + len;
    }
    if (one != NULL)
      *one = (id << 4) | (*one & 0x0f);
  }
  gst_rtp_buffer_unmap (&rtp);
  return TRUE;
}

/* The one-byte id of the transport-wide-cc extension in caps, or 0 */
static guint
twcc_id_of (GstPad * pad)
{
  g_autoptr (GstCaps) caps = gst_pad_get_current_caps (pad);
  const GstStructure *s;

  if (caps == NULL || gst_caps_get_size (caps) == 0)
    return 0;
  s = gst_caps_get_structure (caps, 0);
  for (int f = 0; f < gst_structure_n_fields (s); f++) {
    const char *field = gst_structure_nth_field_name (s, f);
    const char *uri = gst_structure_get_string (s, field);
    guint64 id;

    if (g_str_has_prefix (field, "extmap-") && uri != NULL &&
        strcmp (uri, LEGBA_TWCC_URI) == 0) {
      id = g_ascii_strtoull (field + strlen ("extmap-"), NULL, 10);
      return id >= 2 && id <= 14 ? (guint) id : 0;
    }
  }
  return 0;
}

static GstPadProbeReturn
on_red_packets (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  g_autoptr (GstElement) redenc = gst_pad_get_parent_element (pad);
  g_autoptr (GstPad) sink = redenc ?
      gst_element_get_static_pad (redenc, "sink") : NULL;
  guint id = sink ? twcc_id_of (sink) : 0;

  if (id == 0)
    return GST_PAD_PROBE_OK;
  if (info->type & GST_PAD_PROBE_TYPE_BUFFER) {
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER (info);

    renumber_twcc (&buffer, 0, GUINT_TO_POINTER (id));
    GST_PAD_PROBE_INFO_DATA (info) = buffer;
  } else {
    GstBufferList *list =
        gst_buffer_list_make_writable (GST_PAD_PROBE_INFO_BUFFER_LIST (info));

    gst_buffer_list_foreach (list, renumber_twcc, GUINT_TO_POINTER (id));
    GST_PAD_PROBE_INFO_DATA (info) = list;
  }
  return GST_PAD_PROBE_OK;
}

void
legba_peer_on_deep_element_added (GstBin * bin, GstBin * sub_bin,
    GstElement * element, LegbaPeer * peer)
{
  GstElementFactory *factory = gst_element_get_factory (element);
  const char *name = factory ? GST_OBJECT_NAME (factory) : "";

  if (strcmp (name, "dtlssrtpdec") == 0) {
    const char *pem = legba_room_certificate_pem ();

    if (pem != NULL)
      g_object_set (element, "pem", pem, NULL);
  } else if (strcmp (name, "sctpenc") == 0 || strcmp (name, "sctpdec") == 0) {
    g_object_set (element, "sctp-association-id", (guint) peer->sctp_id, NULL);
    if (name[4] == 'e') {
      g_mutex_lock (&peer->lock);
      gst_object_replace ((GstObject **) & peer->sctpenc, GST_OBJECT (element));
      g_mutex_unlock (&peer->lock);
    } else {
      legba_peer_tap_decoder (peer, element);
    }
  } else if (strcmp (name, "nicesrc") == 0) {
    legba_peer_media_watch_input (peer, element);
  } else if (strcmp (name, "rtpredenc") == 0) {
    g_autoptr (GstPad) src = gst_element_get_static_pad (element, "src");

    gst_pad_add_probe (src, GST_PAD_PROBE_TYPE_BUFFER |
        GST_PAD_PROBE_TYPE_BUFFER_LIST, on_red_packets, NULL, NULL);
  }
}

/* Janus gathers no loopback address (its ice.c skips loopback
 * interfaces): a connection to an SFU takes libnice's own addresses,
 * whatever the signalling server's. */
static char **
effective_local_addresses (LegbaPeer * peer)
{
  LegbaRoom *room = peer->room;

  if (room->local_addresses != NULL)
    return g_strdupv (room->local_addresses);
  if (!peer->sfu && legba_signaller_is_loopback (room->signaller)) {
    char *loopback[] = { (char *) "127.0.0.1", NULL };

    return g_strdupv (loopback);
  }
  return NULL;
}

static void
configure_ice (LegbaPeer * peer)
{
  LegbaRoom *room = peer->room;
  g_autoptr (GObject) ice = NULL;
  g_autoptr (GObject) agent = NULL;
  g_auto (GStrv) addresses = effective_local_addresses (peer);

  g_object_get (peer->webrtcbin, "ice-agent", &ice, NULL);
  if (ice != NULL &&
      g_object_class_find_property (G_OBJECT_GET_CLASS (ice), "ice-tcp"))
    g_object_set (ice, "ice-tcp", room->ice_tcp, NULL);
  if (ice == NULL ||
      g_object_class_find_property (G_OBJECT_GET_CLASS (ice), "agent") == NULL)
    return;
  g_object_get (ice, "agent", &agent, NULL);
  if (agent == NULL || !NICE_IS_AGENT (agent))
    return;
  g_object_set (agent, "upnp", FALSE, "stun-pacing-timer",
      room->stun_pacing_timer, NULL);
  if (g_object_class_find_property (G_OBJECT_GET_CLASS (agent),
          "idle-timeout") != NULL)
    g_object_set (agent, "idle-timeout", room->ice_idle_timeout, NULL);
  for (guint i = 0; addresses != NULL && addresses[i] != NULL; i++) {
    NiceAddress address;

    nice_address_init (&address);
    if (nice_address_set_from_string (&address, addresses[i]))
      nice_agent_add_local_address (NICE_AGENT (agent), &address);
    else
      g_warning ("local-addresses: '%s' is not an IP address", addresses[i]);
  }
}

/* webrtcbin 1.22 answers rtpbin's request-fec-decoder-full with a ULPFEC
 * decoder for every stream it receives, and rtpbin 1.22 records that
 * decoder in two lists of its own from the stream's thread, with no lock
 * (gstrtpbin.c, expose_recv_src_pad): a participant's audio and video,
 * starting together on their two jitter buffer threads, can lose an
 * entry, and the decoder is then never freed. A room negotiates no FEC
 * (docs/room-protocol.md §5: the codecs it offers and accepts are H.264, VP8
 * and Opus), so that decoder would only pass packets on: webrtcbin's
 * handler is taken off, and rtpbin gets no decoder to record. The packets
 * webrtcbin has each session's rtpstorage keep for such a decoder (the
 * jitter buffer's latency plus 50 ms of them) are not kept either. */
static void
on_new_storage (GstElement * rtpbin, GstElement * storage, guint session,
    gpointer data)
{
  g_object_set (storage, "size-time", (guint64) 0, NULL);
}

/* The mid of the m-line of sdp that announces ssrc (a=ssrc, RFC 5576),
 * or NULL. */
static char *
mid_announcing (const GstSDPMessage * sdp, guint ssrc)
{
  for (guint m = 0; m < gst_sdp_message_medias_len (sdp); m++) {
    const GstSDPMedia *media = gst_sdp_message_get_media (sdp, m);

    for (guint i = 0; i < gst_sdp_media_attributes_len (media); i++) {
      const GstSDPAttribute *attr = gst_sdp_media_get_attribute (media, i);
      char *end;

      if (g_strcmp0 (attr->key, "ssrc") == 0 && attr->value != NULL &&
          g_ascii_strtoull (attr->value, &end, 10) == ssrc &&
          end != attr->value && (*end == ' ' || *end == '\0'))
        return g_strdup (gst_sdp_media_get_attribute_val (media, "mid"));
    }
  }
  return NULL;
}

/* webrtcbin 1.22 sets a new jitter buffer's do-retransmission once for
 * each SSRC the remote description announces, to the do-nack of that
 * SSRC's transceiver, not only for the buffer's own SSRC: the last one
 * wins (GST_DEBUG=webrtcbin:6 shows "setting do-nack=true for transceiver"
 * the video's, then "do-nack=false" the audio's, for the same ssrc). In a
 * bundle whose audio m-line comes after the video's, every jitter buffer
 * ends without retransmission, and a lost video packet is never asked for
 * again (RTCP NACK): it is lost for good, and the picture waits for the
 * next key frame. After webrtcbin's handler, a jitter buffer takes the
 * do-nack of the transceiver whose m-line announces its SSRC; one whose
 * SSRC is not announced is left as webrtcbin set it. Runs on the stream's
 * thread, which holds no lock of webrtcbin's (its own handler takes them). */
static void
on_new_jitterbuffer (GstElement * rtpbin, GstElement * jitterbuffer,
    guint session, guint ssrc, gpointer data)
{
  GstElement *webrtcbin = data;
  GstWebRTCSessionDescription *remote = NULL;
  GArray *transceivers = NULL;
  g_autofree char *mid = NULL;

  g_object_get (webrtcbin, "remote-description", &remote, NULL);
  if (remote != NULL)
    mid = mid_announcing (remote->sdp, ssrc);
  g_clear_pointer (&remote, gst_webrtc_session_description_free);
  if (mid == NULL)
    return;
  g_signal_emit_by_name (webrtcbin, "get-transceivers", &transceivers);
  for (guint i = 0; transceivers != NULL && i < transceivers->len; i++) {
    GstWebRTCRTPTransceiver *t = g_array_index (transceivers,
        GstWebRTCRTPTransceiver *, i);
    g_autofree char *t_mid = NULL;
    gboolean do_nack = FALSE;

    g_object_get (t, "mid", &t_mid, "do-nack", &do_nack, NULL);
    if (g_strcmp0 (t_mid, mid) == 0) {
      g_object_set (jitterbuffer, "do-retransmission", do_nack, NULL);
      break;
    }
  }
  g_clear_pointer (&transceivers, g_array_unref);
}

static void
refuse_fec (GstElement * webrtcbin)
{
  g_autoptr (GstElement) rtpbin = gst_bin_get_by_name (GST_BIN (webrtcbin),
      "rtpbin");
  guint id;

  if (rtpbin == NULL)
    return;
  id = g_signal_lookup ("request-fec-decoder-full", G_OBJECT_TYPE (rtpbin));
  if (id != 0)
    g_signal_handlers_disconnect_matched (rtpbin, G_SIGNAL_MATCH_ID |
        G_SIGNAL_MATCH_DATA, id, 0, NULL, NULL, webrtcbin);
  /* after webrtcbin's own handler, which sets the size */
  g_signal_connect (rtpbin, "new-storage", G_CALLBACK (on_new_storage), NULL);
}

static void
request_retransmissions (GstElement * webrtcbin)
{
  g_autoptr (GstElement) rtpbin = gst_bin_get_by_name (GST_BIN (webrtcbin),
      "rtpbin");

  /* after webrtcbin's own handler; the rtpbin lives in the webrtcbin */
  if (rtpbin != NULL)
    g_signal_connect (rtpbin, "new-jitterbuffer",
        G_CALLBACK (on_new_jitterbuffer), webrtcbin);
}

void
legba_peer_configure_webrtcbin (LegbaPeer * peer)
{
  LegbaRoom *room = peer->room;

  g_object_set (peer->webrtcbin, "bundle-policy",
      GST_WEBRTC_BUNDLE_POLICY_MAX_BUNDLE, "latency", room->latency,
      "ice-transport-policy", room->ice_transport_policy, NULL);
  if (room->stun_server != NULL)
    g_object_set (peer->webrtcbin, "stun-server", room->stun_server, NULL);
  /* An explicit turn-server wins over those the signaller handed out */
  if (room->turn_server != NULL) {
    g_object_set (peer->webrtcbin, "turn-server", room->turn_server, NULL);
    peer->uses_turn = TRUE;
  } else {
    for (guint i = 0; room->ice_servers && room->ice_servers[i]; i++) {
      gboolean added = FALSE;

      g_signal_emit_by_name (peer->webrtcbin, "add-turn-server",
          room->ice_servers[i], &added);
      peer->uses_turn |= added;
    }
  }
  configure_ice (peer);
  refuse_fec (peer->webrtcbin);
  request_retransmissions (peer->webrtcbin);
  legba_peer_congestion_setup (peer);
}

gboolean
legba_peer_check_plugins (GError ** error)
{
  static const char *const needed[][2] = {
    {"webrtcbin", "webrtcbin (gst-plugins-bad, the webrtc plugin)"},
    {"nicesrc", "the nice plugin (gstreamer1.0-nice)"},
    {"dtlssrtpdec", "the dtls plugin (gst-plugins-bad)"},
    {"srtpdec", "the srtp plugin (gst-plugins-bad)"},
    {"sctpenc", "the sctp plugin (gst-plugins-bad)"},
    {"rtpbin", "the rtpmanager plugin (gst-plugins-good)"},
  };

  for (guint i = 0; i < G_N_ELEMENTS (needed); i++) {
    g_autoptr (GstElementFactory) factory =
        gst_element_factory_find (needed[i][0]);

    if (factory == NULL) {
      g_set_error (error, LEGBA_ROOM_ERROR, LEGBA_ROOM_ERROR_MISSING_PLUGIN,
          "The GStreamer element %s is missing: install %s", needed[i][0],
          needed[i][1]);
      return FALSE;
    }
  }
  return TRUE;
}

static void
agent_closed (GObject * agent, GAsyncResult * result, gpointer data)
{
  *(gboolean *) data = TRUE;
}

static gboolean
close_expired (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Allocations on a TURN server outlive the connection unless released
 * (the server keeps them for their lifetime, 10 min by default, and may
 * count them against the user), and webrtcbin 1.22 never releases them.
 * They are released while the connection still runs, so that the
 * server's replies are read: a wait of at most 2 s, for connections that
 * use a TURN server only. */
void
legba_peer_release_turn_allocations (LegbaPeer * peer)
{
  g_autoptr (GObject) ice = NULL;
  g_autoptr (GObject) agent = NULL;
  g_autoptr (GMainContext) context = NULL;
  GSource *deadline;
  gboolean closed = FALSE, expired = FALSE;

  if (!peer->uses_turn)
    return;
  g_object_get (peer->webrtcbin, "ice-agent", &ice, NULL);
  if (ice == NULL ||
      g_object_class_find_property (G_OBJECT_GET_CLASS (ice), "agent") == NULL)
    return;
  g_object_get (ice, "agent", &agent, NULL);
  if (agent == NULL || !NICE_IS_AGENT (agent))
    return;
  context = g_main_context_new ();
  g_main_context_push_thread_default (context);
  nice_agent_close_async (NICE_AGENT (agent), agent_closed, &closed);
  deadline = g_timeout_source_new (2000);
  g_source_set_callback (deadline, close_expired, &expired, NULL);
  g_source_attach (deadline, context);
  while (!closed && !expired)
    g_main_context_iteration (context, TRUE);
  g_source_destroy (deadline);
  g_source_unref (deadline);
  g_main_context_pop_thread_default (context);
  if (!closed)
    GST_WARNING ("pc %s: the TURN server did not confirm the release of "
        "its allocations within 2 s", peer->pc);
}
