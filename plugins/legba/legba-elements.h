/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once

#include <gst/gst.h>

G_BEGIN_DECLS

GST_ELEMENT_REGISTER_DECLARE (legbastamp);
GST_ELEMENT_REGISTER_DECLARE (legbastampcheck);
GST_ELEMENT_REGISTER_DECLARE (legbavideoenc);
GST_ELEMENT_REGISTER_DECLARE (legbaroom);
GST_ELEMENT_REGISTER_DECLARE (legbadatasink);
GST_ELEMENT_REGISTER_DECLARE (legbadatasrc);

G_END_DECLS
