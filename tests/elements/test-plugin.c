/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The plugin as the registry sees it: it has elements, every element is a
 * final type, and every property of an element of its own (not inherited)
 * has a blurb.
 */
#include <gst/gst.h>

#include <string.h>

static void
test_elements (void)
{
  GList *features = gst_registry_get_feature_list_by_plugin (gst_registry_get
      (), "legba");
  guint elements = 0;

  for (GList * l = features; l != NULL; l = l->next) {
    GstPluginFeature *loaded;
    GType type;
    g_autofree GParamSpec **specs = NULL;
    guint n = 0;
    gpointer klass;

    if (!GST_IS_ELEMENT_FACTORY (l->data))
      continue;
    loaded = gst_plugin_feature_load (l->data);
    g_assert_nonnull (loaded);
    type = gst_element_factory_get_element_type (GST_ELEMENT_FACTORY (loaded));
    g_test_message ("%s: %s", GST_OBJECT_NAME (loaded), g_type_name (type));
    g_assert_true (G_TYPE_IS_FINAL (type));
    klass = g_type_class_ref (type);
    specs = g_object_class_list_properties (klass, &n);
    for (guint i = 0; i < n; i++) {
      const char *blurb = g_param_spec_get_blurb (specs[i]);

      if (specs[i]->owner_type != type)
        continue;
      g_test_message ("  %s: %s", specs[i]->name, blurb);
      g_assert_nonnull (blurb);
      g_assert_cmpuint (strlen (blurb), >, 0);
    }
    g_type_class_unref (klass);
    gst_object_unref (loaded);
    elements++;
  }
  gst_plugin_feature_list_free (features);
  g_assert_cmpuint (elements, >=, 6);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/plugin/elements", test_elements);
  return g_test_run ();
}
