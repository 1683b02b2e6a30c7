/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A controlled packet loss for the mesh peers (loss.h).
 */
#include "loss.h"

#include <string.h>

static gdouble loss_probability;

void
loss_set_probability (gdouble probability)
{
  loss_probability = probability;
}

/* atomic: RTP packets into every netsim of the process, and out */
static gint loss_packets_in, loss_packets_out;

static GstPadProbeReturn
loss_count (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  gint n = 1;

  if (GST_PAD_PROBE_INFO_TYPE (info) & GST_PAD_PROBE_TYPE_BUFFER_LIST)
    n = gst_buffer_list_length (GST_PAD_PROBE_INFO_BUFFER_LIST (info));
  g_atomic_int_add ((gint *) data, n);
  return GST_PAD_PROBE_OK;
}

static void
loss_count_pad (GstElement * sim, const char *name, gint * counter)
{
  GstPad *pad = gst_element_get_static_pad (sim, name);

  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER |
      GST_PAD_PROBE_TYPE_BUFFER_LIST, loss_count, counter, NULL);
  gst_object_unref (pad);
}

static GstElement *
loss_aux_sender (GstElement * webrtc, GObject * transport, gpointer data)
{
  GstElement *sim = gst_element_factory_make ("netsim", NULL);

  if (sim == NULL)
    g_error ("--loss: no netsim element (gst-plugins-bad)");
  g_object_set (sim, "drop-probability", (gfloat) loss_probability, NULL);
  loss_count_pad (sim, "sink", &loss_packets_in);
  loss_count_pad (sim, "src", &loss_packets_out);
  return sim;
}

/* --loss P is a probability under 1, and only for mesh mode */
gboolean
loss_option_ok (const char *mode)
{
  if (loss_probability >= 0 && loss_probability < 1 &&
      (loss_probability == 0 || strcmp (mode, "mesh") == 0))
    return TRUE;
  g_printerr ("--loss: a probability under 1, in mesh mode\n");
  return FALSE;
}

void
loss_window_open (LossWindow * w)
{
  w->in = g_atomic_int_get (&loss_packets_in);
  w->out = g_atomic_int_get (&loss_packets_out);
}

/* the window's loss, as JSON members followed by ", " */
void
loss_window_print (const LossWindow * w, GString * out)
{
  gint in = g_atomic_int_get (&loss_packets_in) - w->in;
  gint passed = g_atomic_int_get (&loss_packets_out) - w->out;

  g_string_append_printf (out, "\"loss\": %g, \"rtp_packets\": %d, "
      "\"rtp_dropped\": %d, ", loss_probability, in, in - passed);
}

/* An RTP packet as it leaves on the wire: SRTP keeps the RTP header in
 * the clear (version 2), and with rtcp-mux an RTCP packet's second byte
 * is its type, 192 to 223 (RFC 5761); STUN, DTLS (and SCTP within it)
 * start lower. */
static gboolean
is_rtp (GstBuffer * buffer)
{
  guint8 head[2];

  return gst_buffer_extract (buffer, 0, head, 2) == 2
      && (head[0] & 0xc0) == 0x80 && (head[1] < 192 || head[1] > 223);
}

/* Drops an RTP packet with the probability, counting what came and what
 * passed; everything else passes. */
static gboolean
loss_keep (GstBuffer ** buffer, guint idx, gpointer data)
{
  if (!is_rtp (*buffer))
    return TRUE;
  g_atomic_int_inc (&loss_packets_in);
  if (g_random_double () < loss_probability) {
    gst_clear_buffer (buffer);
    return TRUE;
  }
  g_atomic_int_inc (&loss_packets_out);
  return TRUE;
}

static GstPadProbeReturn
loss_wire (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  if (GST_PAD_PROBE_INFO_TYPE (info) & GST_PAD_PROBE_TYPE_BUFFER_LIST) {
    GstBufferList *list = gst_buffer_list_make_writable
        (GST_PAD_PROBE_INFO_BUFFER_LIST (info));

    gst_buffer_list_foreach (list, loss_keep, NULL);
    GST_PAD_PROBE_INFO_DATA (info) = list;
    return gst_buffer_list_length (list) ? GST_PAD_PROBE_OK :
        GST_PAD_PROBE_DROP;
  } else {
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER (info);

    if (!is_rtp (buffer))
      return GST_PAD_PROBE_OK;
    g_atomic_int_inc (&loss_packets_in);
    if (g_random_double () < loss_probability)
      return GST_PAD_PROBE_DROP;
    g_atomic_int_inc (&loss_packets_out);
    return GST_PAD_PROBE_OK;
  }
}

/* call for every element added to a LegbaRoom's pipeline
 * (deep-element-added): the room takes webrtcbin's aux sender for its
 * own (docs/congestion-control.md), so packets are lost on the wire, at
 * each connection's nicesink, as the RTP packets they are */
void
loss_watch_wire (GstElement * element)
{
  GstElementFactory *f = gst_element_get_factory (element);
  GstPad *pad;

  if (loss_probability <= 0 || f == NULL ||
      strcmp (GST_OBJECT_NAME (f), "nicesink") != 0)
    return;
  pad = gst_element_get_static_pad (element, "sink");
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER |
      GST_PAD_PROBE_TYPE_BUFFER_LIST, loss_wire, NULL, NULL);
  gst_object_unref (pad);
}

/* call for every element added to the pipeline (deep-element-added) */
void
loss_watch (GstElement * element)
{
  GstElementFactory *f = gst_element_get_factory (element);

  if (loss_probability > 0 && f != NULL &&
      strcmp (GST_OBJECT_NAME (f), "webrtcbin") == 0)
    g_signal_connect (element, "request-aux-sender",
        G_CALLBACK (loss_aux_sender), NULL);
}
