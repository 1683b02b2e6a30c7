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
