/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What the peer connections of a process share and what their first one
 * would otherwise wait for: distinct SCTP association ids, and
 * legba_room_prepare(), which makes the DTLS certificate
 * (legba-room-certificate.c) and the DTLS plugin's key, warms webrtcbin
 * up with a throwaway connection, and loads the decoders' plugins on
 * threads of their own.
 */
#include <legba/room/legba-room-private.h>

#include <nice/agent.h>
#include <stdlib.h>
#include <openssl/crypto.h>

/* docs/webrtcbin.md, "SCTP association ids": webrtcbin draws them at
 * random and pairs in one process collide; Legba hands out distinct
 * ones. */
guint16
legba_room_next_sctp_association_id (void)
{
  static gint next;
  guint id = (guint) g_atomic_int_add (&next, 1);

  return (guint16) (id % 65535 + 1);
}

static struct
{
  GThread *thread;
  GThread *decoders;            /* legba_room_media_load_decoders() */
  GstElement *dtls;             /* keeps the certificate's DTLS agent */
} prepared;
static GMutex prepared_lock;    /* prepared.thread, prepared.decoders */

/* Sets what a warm-up connection needs of the knobs: a process-unique
 * SCTP association id, and the shared certificate. */
static void
warm_up_element_added (GstBin * bin, GstBin * sub_bin, GstElement * element,
    gpointer data)
{
  GstElementFactory *factory = gst_element_get_factory (element);
  const char *name = factory ? GST_OBJECT_NAME (factory) : "";

  if (strcmp (name, "sctpenc") == 0 || strcmp (name, "sctpdec") == 0)
    g_object_set (element, "sctp-association-id",
        (guint) GPOINTER_TO_UINT (data), NULL);
  else if (strcmp (name, "dtlssrtpdec") == 0 &&
      legba_room_certificate_pem () != NULL)
    g_object_set (element, "pem", legba_room_certificate_pem (), NULL);
}

static gboolean
warm_up_step (GstElement * webrtcbin, const char *action, gpointer argument,
    const char *field, GstWebRTCSessionDescription ** out)
{
  GstPromise *promise = gst_promise_new ();
  const GstStructure *reply;
  gboolean ok;

  g_signal_emit_by_name (webrtcbin, action, argument, promise);
  ok = gst_promise_wait (promise) == GST_PROMISE_RESULT_REPLIED;
  reply = ok ? gst_promise_get_reply (promise) : NULL;
  if (out != NULL && reply != NULL)
    gst_structure_get (reply, field, GST_TYPE_WEBRTC_SESSION_DESCRIPTION, out,
        NULL);
  ok = ok && (reply == NULL || !gst_structure_has_field (reply, "error"));
  gst_promise_unref (promise);
  return ok && (out == NULL || *out != NULL);
}

/* The first peer connection of a process spends tens of milliseconds on
 * one-time work: loading the webrtc, nice, dtls, srtp, sctp and
 * rtpmanager plugins, registering their types, libnice's and usrsctp's
 * first use. A throwaway connection that describes a session like a
 * room's (two transceivers, a data channel) and gathers on 127.0.0.1 does
 * it here instead. It never sends a packet to anyone. */
static void
warm_up_webrtcbin (void)
{
  GstElement *bin = gst_bin_new ("legba-warm-up");
  GstElement *webrtcbin = gst_element_factory_make ("webrtcbin", NULL);
  GstWebRTCSessionDescription *offer = NULL;
  GstWebRTCDataChannel *channel = NULL;
  const char *caps[] = {
    "application/x-rtp,media=video,encoding-name=VP8,payload=96,"
        "clock-rate=90000",
    "application/x-rtp,media=audio,encoding-name=OPUS,payload=111,"
        "clock-rate=48000,encoding-params=(string)2",
  };
  GObject *ice = NULL, *agent = NULL;

  gst_object_ref_sink (bin);
  if (webrtcbin == NULL)
    goto out;
  g_signal_connect (bin, "deep-element-added",
      G_CALLBACK (warm_up_element_added),
      GUINT_TO_POINTER (legba_room_next_sctp_association_id ()));
  g_object_set (webrtcbin, "bundle-policy",
      GST_WEBRTC_BUNDLE_POLICY_MAX_BUNDLE, NULL);
  g_object_get (webrtcbin, "ice-agent", &ice, NULL);
  if (ice != NULL &&
      g_object_class_find_property (G_OBJECT_GET_CLASS (ice), "agent"))
    g_object_get (ice, "agent", &agent, NULL);
  if (agent != NULL && NICE_IS_AGENT (agent)) {
    NiceAddress address;

    g_object_set (agent, "upnp", FALSE, NULL);
    nice_address_init (&address);
    nice_address_set_from_string (&address, "127.0.0.1");
    nice_agent_add_local_address (NICE_AGENT (agent), &address);
  }
  g_clear_object (&agent);
  g_clear_object (&ice);
  gst_bin_add (GST_BIN (bin), webrtcbin);
  if (gst_element_set_state (bin, GST_STATE_READY) == GST_STATE_CHANGE_FAILURE)
    goto out;
  for (guint i = 0; i < G_N_ELEMENTS (caps); i++) {
    GstCaps *c = gst_caps_from_string (caps[i]);
    GstWebRTCRTPTransceiver *transceiver = NULL;

    g_signal_emit_by_name (webrtcbin, "add-transceiver",
        GST_WEBRTC_RTP_TRANSCEIVER_DIRECTION_RECVONLY, c, &transceiver);
    g_clear_object (&transceiver);
    gst_caps_unref (c);
  }
  g_signal_emit_by_name (webrtcbin, "create-data-channel", "legba-warm-up",
      NULL, &channel);
  if (warm_up_step (webrtcbin, "create-offer", NULL, "offer", &offer))
    warm_up_step (webrtcbin, "set-local-description", offer, NULL, NULL);

out:
  g_clear_pointer (&offer, gst_webrtc_session_description_free);
  gst_element_set_state (bin, GST_STATE_NULL);
  g_clear_object (&channel);
  gst_object_unref (bin);
}

static gpointer
decoders_thread (gpointer data)
{
  legba_room_media_load_decoders ();
  return NULL;
}

/* Loads the decoders' plugins (legba_room_media_load_decoders) on a
 * thread of its own, once per process; legba_room_prepare_wait() waits
 * for it as for the rest. */
void
legba_room_prepare_decoders (void)
{
  static gsize started;

  if (g_once_init_enter (&started)) {
    g_mutex_lock (&prepared_lock);
    prepared.decoders = g_thread_new ("legba-decoders", decoders_thread, NULL);
    g_mutex_unlock (&prepared_lock);
    g_once_init_leave (&started, 1);
  }
}

static gpointer
prepare_thread (gpointer data)
{
  const char *pem = legba_room_certificate_pem ();
  GstElement *dec = gst_element_factory_make ("dtlsdec", "legba-dtls-keeper");

  if (dec == NULL)
    return NULL;
  if (pem != NULL)
    g_object_set (dec, "pem", pem, NULL);
  prepared.dtls = gst_object_ref_sink (dec);
  warm_up_webrtcbin ();
  /* the signalling client's first connection loads GIO's proxy modules
   * (libproxy, GSettings): ~15 ms on the first call's path otherwise */
  g_proxy_resolver_get_default ();
  return NULL;
}

/**
 * legba_room_prepare_wait:
 *
 * Waits until what legba_room_prepare() started is made. An application
 * that must not overlap that work with its first call (a measurement of
 * the first call, a "ready" indicator) calls it; rooms wait for it when
 * they are disposed, and the process when it exits (a process that exits
 * while that thread is inside OpenSSL crashes in OpenSSL's cleanup).
 * Returns at once when legba_room_prepare() was never called or is done.
 */
void
legba_room_prepare_wait (void)
{
  GThread *thread, *decoders;

  g_mutex_lock (&prepared_lock);
  thread = g_steal_pointer (&prepared.thread);
  decoders = g_steal_pointer (&prepared.decoders);
  g_mutex_unlock (&prepared_lock);
  if (thread != NULL) {
    g_thread_join (thread);
    GST_DEBUG ("DTLS prepared: %" GST_PTR_FORMAT, prepared.dtls);
  }
  if (decoders != NULL)
    g_thread_join (decoders);
}

static void
prepare_finish_at_exit (void)
{
  legba_room_prepare_wait ();
}

/**
 * legba_room_prepare:
 *
 * Makes, on a thread of its own, what the first call of a process would
 * otherwise make on its way: the process's DTLS certificate, the key
 * GStreamer's DTLS plugin generates when its first element is created (an
 * RSA key, 80–560 ms), and GStreamer's one-time work for a first peer
 * connection (loading and initialising the webrtc, nice, dtls, srtp, sctp
 * and rtpmanager plugins, through a throwaway connection that gathers on
 * 127.0.0.1 and sends nothing; GIO's proxy resolver, which the first
 * signalling connection would load). legba_room_connect_async() calls
 * it, and so do #LegbaCall when it starts and the `legbaroom` element when
 * it goes to READY; an application calls it earlier
 * (after gst_init()) to take it further off its first call's path, and
 * legba_room_prepare_wait() waits for it. Only the first call does
 * anything.
 */
void
legba_room_prepare (void)
{
  static gsize started;

  if (g_once_init_enter (&started)) {
    legba_room_debug_init ();
    /* Initialised here first, OpenSSL is told not to clean up at exit:
     * GStreamer's pooled streaming threads that used it (DTLS, SRTP) can
     * still be ending when the process does, and its exit-time cleanup
     * would free their per-thread state under them (a double free). What
     * it would free is the process's until it ends anyway. The process
     * still waits at exit for the thread below. (With no option at all,
     * OPENSSL_init_crypto() returns at once.) */
    OPENSSL_init_crypto (OPENSSL_INIT_ADD_ALL_CIPHERS |
        OPENSSL_INIT_ADD_ALL_DIGESTS | OPENSSL_INIT_NO_ATEXIT, NULL);
    atexit (prepare_finish_at_exit);
    g_mutex_lock (&prepared_lock);
    prepared.thread = g_thread_new ("legba-prepare", prepare_thread, NULL);
    g_mutex_unlock (&prepared_lock);
    g_once_init_leave (&started, 1);
  }
}
