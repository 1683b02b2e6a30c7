/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The tools that run a LegbaCall need Legba's GStreamer plugin
 * (legbavideoenc, legbastamp): when the registry does not have it (an
 * uninstalled build, or a prefix GStreamer does not search), it is loaded
 * from this build's directory or from where it is installed.
 */
#pragma once

#include <gst/gst.h>

static inline void
legba_call_plugin_ensure (void)
{
  static const char *const dirs[] = { LEGBA_BUILD_PLUGIN_DIR,
    LEGBA_INSTALLED_PLUGIN_DIR
  };
  GstElementFactory *factory;

  for (guint i = 0; i < G_N_ELEMENTS (dirs); i++) {
    factory = gst_element_factory_find ("legbavideoenc");
    if (factory != NULL) {
      gst_object_unref (factory);
      return;
    }
    if (g_file_test (dirs[i], G_FILE_TEST_IS_DIR))
      gst_registry_scan_path (gst_registry_get (), dirs[i]);
  }
}
