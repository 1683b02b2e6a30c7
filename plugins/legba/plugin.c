/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#include "legba-elements.h"

static gboolean
plugin_init (GstPlugin * plugin)
{
  gboolean ret = FALSE;

  ret |= GST_ELEMENT_REGISTER (legbastamp, plugin);
  ret |= GST_ELEMENT_REGISTER (legbastampcheck, plugin);
  ret |= GST_ELEMENT_REGISTER (legbavideoenc, plugin);
  ret |= GST_ELEMENT_REGISTER (legbaroom, plugin);
  ret |= GST_ELEMENT_REGISTER (legbadatasink, plugin);
  ret |= GST_ELEMENT_REGISTER (legbadatasrc, plugin);
  return ret;
}

GST_PLUGIN_DEFINE (GST_VERSION_MAJOR, GST_VERSION_MINOR, legba,
    "Real-time rooms: WebRTC mesh calls, data channels, encoder selection "
    "and latency instruments", plugin_init, VERSION, "LGPL",
    "Legba", "https://legba.invalid/")
