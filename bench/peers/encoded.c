/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The bitrate of the call peers' encoder (encoded.h).
 */
#include "encoded.h"

/* under encoded_lock: the encoder's streaming thread adds, the main
 * thread reads */
static GMutex encoded_lock;
static guint64 encoded_bytes;
static GstClockTime encoded_first = GST_CLOCK_TIME_NONE;
static GstClockTime encoded_end = GST_CLOCK_TIME_NONE;

static GstPadProbeReturn
encoded_count (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER (info);
  GstClockTime end;

  if (!GST_BUFFER_PTS_IS_VALID (buffer))
    return GST_PAD_PROBE_OK;
  end = GST_BUFFER_PTS (buffer) + (GST_BUFFER_DURATION_IS_VALID (buffer) ?
      GST_BUFFER_DURATION (buffer) : 0);
  g_mutex_lock (&encoded_lock);
  encoded_bytes += gst_buffer_get_size (buffer);
  if (!GST_CLOCK_TIME_IS_VALID (encoded_first))
    encoded_first = GST_BUFFER_PTS (buffer);
  if (!GST_CLOCK_TIME_IS_VALID (encoded_end) || end > encoded_end)
    encoded_end = end;
  g_mutex_unlock (&encoded_lock);
  return GST_PAD_PROBE_OK;
}

/* Counts what the element named "enc" in bin puts out, if it has one. */
void
encoded_watch (GstBin * bin)
{
  GstElement *enc = gst_bin_get_by_name (bin, "enc");
  GstPad *pad;

  if (enc == NULL)
    return;
  pad = gst_element_get_static_pad (enc, "src");
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, encoded_count, NULL, NULL);
  gst_object_unref (pad);
  gst_object_unref (enc);
}

/* Appends ", \"bitrate_bps\": B" to out, or nothing before a second of
 * frames' timestamps has been counted. */
void
encoded_append (GString * out)
{
  g_mutex_lock (&encoded_lock);
  if (GST_CLOCK_TIME_IS_VALID (encoded_first) &&
      encoded_end >= encoded_first + GST_SECOND)
    g_string_append_printf (out, ", \"bitrate_bps\": %.0f",
        encoded_bytes * 8.0 * GST_SECOND / (encoded_end - encoded_first));
  g_mutex_unlock (&encoded_lock);
}
