/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The encoder family table against the elements themselves: every
 * property Legba sets, its unit and its values are checked against the
 * installed element's own property specs, or, for elements that cannot be
 * installed here, against the facts GStreamer 1.22 records for them
 * (tests/unit/data/encoder-properties-1.22.json). Never against a table of
 * the project's own.
 */
#include <json-glib/json-glib.h>
#include <legba/legba.h>
#include <legba/encoder/legba-encoder-private.h>
#include <stdlib.h>

static JsonObject *facts;       /* element name -> { source, properties } */

static void
load_facts (void)
{
  const gchar *root = g_getenv ("LEGBA_SOURCE_ROOT");
  g_autofree gchar *path = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;

  g_assert_nonnull (root);
  path = g_build_filename (root, "tests", "unit", "data",
      "encoder-properties-1.22.json", NULL);
  json_parser_load_from_file (parser, path, &error);
  g_assert_no_error (error);
  facts = json_object_ref (json_node_get_object (json_parser_get_root
          (parser)));
}

/* "Bitrate in kbit/sec", "in kbps", "in kilobits per second" against
 * "in bits/sec", "(in bits per second)", "in bits/s". */
static void
assert_unit (const gchar * element, const gchar * property,
    const gchar * blurb, guint scale)
{
  g_autofree gchar *lower = g_ascii_strdown (blurb, -1);
  gboolean kilo = strstr (lower, "kbit") || strstr (lower, "kbps")
      || strstr (lower, "kilobit");

  if (!strstr (lower, "bit") && !strstr (lower, "bps"))
    g_error ("%s:%s: no unit in '%s'", element, property, blurb);
  if (kilo != (scale == 1000))
    g_error ("%s:%s is in %s ('%s'), the table scales by %u", element,
        property, kilo ? "kbit/s" : "bit/s", blurb, scale);
}

/* ---- against an installed element ---- */

static void
check_installed (const LegbaEncoderFamily * family, const gchar * name)
{
  g_autoptr (GstElement) element = gst_element_factory_make (name, NULL);
  GObjectClass *klass;
  GParamSpec *pspec;

  g_assert_nonnull (element);
  gst_object_ref_sink (element);
  klass = G_OBJECT_GET_CLASS (element);
  for (gint speed = 0; speed <= LEGBA_ENCODER_SPEED_QUALITY; speed++) {
    LegbaEncoderSettings settings = {.bitrate = 1500000,.max_bitrate =
          2000000,.keyframe_interval = 60,.speed = speed
    };
    g_autoptr (GError) error = NULL;

    if (!legba_encoder_apply_settings (element, &settings, &error))
      g_error ("%s: %s", name, error->message);
  }
  if (family->v4l2_controls) {
    pspec = g_object_class_find_property (klass, "extra-controls");
    g_assert_nonnull (pspec);
    g_assert_true (pspec->value_type == GST_TYPE_STRUCTURE);
    return;
  }
  pspec = g_object_class_find_property (klass, family->bitrate);
  g_assert_nonnull (pspec);
  assert_unit (name, family->bitrate, g_param_spec_get_blurb (pspec),
      family->bitrate_scale);
  if (family->max_bitrate) {
    pspec = g_object_class_find_property (klass, family->max_bitrate);
    g_assert_nonnull (pspec);
    assert_unit (name, family->max_bitrate, g_param_spec_get_blurb (pspec),
        family->max_bitrate_scale);
  }
  pspec = g_object_class_find_property (klass, family->keyframe);
  g_assert_nonnull (pspec);
  g_assert_true (G_TYPE_IS_FUNDAMENTAL (pspec->value_type)
      && (pspec->value_type == G_TYPE_INT || pspec->value_type == G_TYPE_UINT));
  if (family->frame_drop) {
    pspec = g_object_class_find_property (klass, family->frame_drop);
    g_assert_nonnull (pspec);
    g_assert_true (pspec->value_type == G_TYPE_BOOLEAN);
    g_assert_cmpfloat (family->frame_drop_bpp, >, 0.0);
  }
}

/* ---- against GStreamer 1.22's recorded facts ---- */

static void
check_value (const gchar * element, const gchar * name, JsonObject * spec,
    const gchar * value)
{
  const gchar *type = json_object_get_string_member (spec, "type");

  if (json_object_has_member (spec, "values")) {
    JsonArray *values = json_object_get_array_member (spec, "values");
    for (guint i = 0; i < json_array_get_length (values); i++) {
      if (g_strcmp0 (json_array_get_string_element (values, i), value) == 0)
        return;
    }
    g_error ("%s:%s has no value '%s'", element, name, value);
  } else if (g_strcmp0 (type, "gboolean") == 0) {
    g_assert_true (g_strcmp0 (value, "true") == 0
        || g_strcmp0 (value, "false") == 0);
  } else {
    gchar *end = NULL;
    gdouble number = g_ascii_strtod (value, &end);

    g_assert_true (end && *end == '\0');
    if (json_object_has_member (spec, "min"))
      g_assert_cmpfloat (number, >=, json_object_get_double_member (spec,
              "min"));
    if (json_object_has_member (spec, "max"))
      g_assert_cmpfloat (number, <=, json_object_get_double_member (spec,
              "max"));
  }
}

static void
check_settings_list (const gchar * element, JsonObject * properties,
    const gchar * list)
{
  g_auto (GStrv) items = g_strsplit (list, " ", -1);

  for (guint i = 0; items[i]; i++) {
    g_auto (GStrv) kv = NULL;
    const gchar *name;
    gboolean optional;

    if (!items[i][0])
      continue;
    kv = g_strsplit (items[i], "=", 2);
    optional = kv[0][0] == '?';
    name = optional ? kv[0] + 1 : kv[0];
    if (!json_object_has_member (properties, name)) {
      if (!optional)
        g_error ("%s has no property '%s' in GStreamer 1.22", element, name);
      continue;
    }
    check_value (element, name, json_object_get_object_member (properties,
            name), kv[1]);
  }
}

static void
check_recorded (const LegbaEncoderFamily * family, const gchar * element)
{
  JsonObject *properties = json_object_get_object_member
      (json_object_get_object_member (facts, element), "properties");
  JsonObject *spec;

  if (family->v4l2_controls) {
    spec = json_object_get_object_member (properties, "extra-controls");
    g_assert_nonnull (spec);
    g_assert_cmpstr (json_object_get_string_member (spec, "type"), ==,
        "GstStructure");
    return;
  }
  check_settings_list (element, properties, family->realtime);
  for (guint s = 0; s < G_N_ELEMENTS (family->speed); s++)
    check_settings_list (element, properties, family->speed[s]);
  spec = json_object_get_object_member (properties, family->bitrate);
  g_assert_nonnull (spec);
  assert_unit (element, family->bitrate,
      json_object_get_string_member (spec, "blurb"), family->bitrate_scale);
  if (family->max_bitrate) {
    spec = json_object_get_object_member (properties, family->max_bitrate);
    g_assert_nonnull (spec);
    assert_unit (element, family->max_bitrate,
        json_object_get_string_member (spec, "blurb"),
        family->max_bitrate_scale);
  }
  g_assert_true (json_object_has_member (properties, family->keyframe));
  if (family->frame_drop) {
    spec = json_object_get_object_member (properties, family->frame_drop);
    g_assert_nonnull (spec);
    g_assert_cmpstr (json_object_get_string_member (spec, "type"), ==,
        "gboolean");
  }
}

/* Every row is checked against at least one real element or record. */
static void
test_every_family_checked (void)
{
  guint n;
  const LegbaEncoderFamily *families = legba_encoder_families (&n);
  GList *factories = gst_element_factory_list_get_elements
      (GST_ELEMENT_FACTORY_TYPE_VIDEO_ENCODER, GST_RANK_NONE);
  g_autoptr (GList) recorded = json_object_get_members (facts);

  for (guint i = 0; i < n; i++) {
    guint checked = 0;

    for (GList * l = factories; l; l = l->next) {
      const gchar *name = GST_OBJECT_NAME (l->data);
      guint row;
      if (legba_encoder_family_lookup (name, &row) && row == i) {
        g_test_message ("%s: installed %s", families[i].name, name);
        check_installed (&families[i], name);
        checked++;
      }
    }
    for (GList * l = recorded; l; l = l->next) {
      guint row;
      if (legba_encoder_family_lookup (l->data, &row) && row == i) {
        g_test_message ("%s: GStreamer 1.22 facts of %s", families[i].name,
            (const gchar *) l->data);
        check_recorded (&families[i], l->data);
        checked++;
      }
    }
    if (checked == 0)
      g_error ("family %s (%s) is checked against nothing", families[i].name,
          families[i].patterns);
  }
  gst_plugin_feature_list_free (factories);
}

static void
test_lookup (void)
{
  static const gchar *const cases[][2] = {
    {"x264enc", "x264"}, {"openh264enc", "openh264"}, {"vp8enc", "vpx"},
    {"vp9enc", "vpx"}, {"av1enc", "aom"}, {"nvautogpuh264enc", "nvenc"},
    {"nvh264enc", "nvenc"}, {"vah264lpenc", "va"}, {"vaapih264enc", "vaapi"},
    {"qsvh264enc", "qsv"}, {"v4l2h264enc", "v4l2"},
    {"vtenc_h264_hw", "videotoolbox"}, {"amfh264enc", "amf"},
    {"avenc_h264_omx", "omx"},
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    const LegbaEncoderFamily *f = legba_encoder_family_lookup (cases[i][0],
        NULL);
    g_assert_nonnull (f);
    g_assert_cmpstr (f->name, ==, cases[i][1]);
  }
  g_assert_null (legba_encoder_family_lookup ("x265enc", NULL));
  g_assert_null (legba_encoder_family_lookup ("legbavideoenc", NULL));
}

static guint
get_uint_or_int (GstElement * element, const gchar * name)
{
  GParamSpec *pspec =
      g_object_class_find_property (G_OBJECT_GET_CLASS (element), name);
  g_auto (GValue) value = G_VALUE_INIT;
  g_auto (GValue) as_uint = G_VALUE_INIT;

  g_value_init (&value, pspec->value_type);
  g_object_get_property (G_OBJECT (element), name, &value);
  g_value_init (&as_uint, G_TYPE_UINT);
  g_assert_true (g_value_transform (&value, &as_uint));
  return g_value_get_uint (&as_uint);
}

/* One bit/s contract, each family's own unit; the target never above the
 * cap. Families whose elements are not installed are skipped. */
static void
test_bitrate_units (void)
{
  static const struct
  {
    const gchar *factory, *property;
    guint bitrate, max_bitrate, expected;
  } cases[] = {
    {"x264enc", "bitrate", 1500000, 0, 1500},
    {"x264enc", "bitrate", 2000000, 800000, 800},
    {"openh264enc", "bitrate", 1500000, 0, 1500000},
    {"openh264enc", "max-bitrate", 1500000, 2000000, 2000000},
    {"vp8enc", "target-bitrate", 1500000, 0, 1500000},
    {"vp9enc", "target-bitrate", 700000, 500000, 500000},
    {"av1enc", "target-bitrate", 1500000, 0, 1500},
    {"avenc_h264_omx", "bitrate", 1500000, 0, 1500000},
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    LegbaEncoderSettings settings;
    g_autoptr (GstElement) element = NULL;
    g_autoptr (GError) error = NULL;

    legba_encoder_settings_init (&settings);
    settings.bitrate = cases[i].bitrate;
    settings.max_bitrate = cases[i].max_bitrate;
    element = legba_encoder_make (cases[i].factory, &settings, &error);
    if (!element) {
      g_assert_error (error, LEGBA_ENCODER_ERROR,
          LEGBA_ENCODER_ERROR_UNAVAILABLE);
      g_test_message ("%s not installed", cases[i].factory);
      continue;
    }
    gst_object_ref_sink (element);
    g_assert_cmpuint (get_uint_or_int (element, cases[i].property), ==,
        cases[i].expected);
    g_assert_true (legba_encoder_set_bitrate (element, cases[i].bitrate / 2,
            0) || !legba_encoder_can_change_bitrate (element));
  }
}

/* Frame dropping switched by the cap: on below the minimum the size and
 * frame rate need, off at or above it; left on before caps are known;
 * families without the switch report no minimum. */
static void
test_frame_dropping (void)
{
  g_autoptr (GstCaps) caps = gst_caps_from_string ("video/x-raw, "
      "format=I420, width=1280, height=720, framerate=30/1");
  g_autoptr (GstCaps) half_rate = gst_caps_from_string ("video/x-raw, "
      "format=I420, width=1280, height=720, framerate=15/1");
  g_autoptr (GstCaps) variable = gst_caps_from_string ("video/x-raw, "
      "format=I420, width=1280, height=720, framerate=0/1");
  const LegbaEncoderFamily *family =
      legba_encoder_family_lookup ("openh264enc", NULL);
  guint expected = (guint) (family->frame_drop_bpp * 1280 * 720 * 30);
  static const gchar *const others[] = { "x264enc", "vp8enc", "av1enc" };
  LegbaEncoderSettings settings;
  g_autoptr (GstElement) element = NULL;
  g_autoptr (GError) error = NULL;
  gboolean skip = FALSE;
  guint needed = 0;

  g_assert_nonnull (family->frame_drop);
  legba_encoder_settings_init (&settings);
  settings.bitrate = expected - 1;
  element = legba_encoder_make ("openh264enc", &settings, &error);
  if (!element) {
    g_test_skip ("openh264enc is not installed");
    return;
  }
  gst_object_ref_sink (element);
  g_object_get (element, family->frame_drop, &skip, NULL);
  g_assert_true (skip);
  g_assert_cmpuint (legba_encoder_get_min_bitrate (element, caps), ==,
      expected);
  g_assert_cmpuint (legba_encoder_get_min_bitrate (element, half_rate), ==,
      expected / 2);
  g_assert_cmpuint (legba_encoder_get_min_bitrate (element, variable), ==,
      expected);

  g_assert_true (legba_encoder_apply_frame_dropping (element, &settings,
          caps, &needed));
  g_assert_cmpuint (needed, ==, expected);
  g_object_get (element, family->frame_drop, &skip, NULL);
  g_assert_true (skip);

  /* the cap counts, not the target */
  settings.max_bitrate = expected;
  g_assert_false (legba_encoder_apply_frame_dropping (element, &settings,
          caps, NULL));
  g_object_get (element, family->frame_drop, &skip, NULL);
  g_assert_false (skip);
  /* half the frame rate needs half the bitrate */
  settings.max_bitrate = 0;
  settings.bitrate = expected / 2 + 1;
  g_assert_false (legba_encoder_apply_frame_dropping (element, &settings,
          half_rate, NULL));

  for (guint i = 0; i < G_N_ELEMENTS (others); i++) {
    g_autoptr (GstElement) other = legba_encoder_make (others[i], &settings,
        NULL);
    if (!other)
      continue;
    gst_object_ref_sink (other);
    g_assert_cmpuint (legba_encoder_get_min_bitrate (other, caps), ==, 0);
    needed = 1;
    g_assert_false (legba_encoder_apply_frame_dropping (other, &settings,
            caps, &needed));
    g_assert_cmpuint (needed, ==, 0);
  }
}

static void
test_output_caps (void)
{
  g_autoptr (GstCaps) h264 =
      legba_video_codec_get_output_caps (LEGBA_VIDEO_CODEC_H264);
  g_autoptr (GstCaps) vp8 =
      legba_video_codec_get_output_caps (LEGBA_VIDEO_CODEC_VP8);
  g_autoptr (GstCaps) webrtc = gst_caps_from_string ("video/x-h264, "
      "stream-format=byte-stream, alignment=au, "
      "profile=constrained-baseline");
  LegbaVideoCodec codec;

  g_assert_true (gst_caps_is_equal (h264, webrtc));
  g_assert_cmpstr (gst_structure_get_name (gst_caps_get_structure (vp8, 0)),
      ==, "video/x-vp8");
  g_assert_true (legba_video_codec_from_string ("vp9", &codec));
  g_assert_cmpint (codec, ==, LEGBA_VIDEO_CODEC_VP9);
  g_assert_false (legba_video_codec_from_string ("h265", &codec));
  g_assert_cmpstr (legba_video_codec_to_string (LEGBA_VIDEO_CODEC_AV1), ==,
      "av1");
}

static GstCaps *
sized (gint width, gint height, gint fps)
{
  return gst_caps_new_simple ("video/x-raw", "format", G_TYPE_STRING, "I420",
      "width", G_TYPE_INT, width, "height", G_TYPE_INT, height,
      "framerate", GST_TYPE_FRACTION, fps, 1, NULL);
}

/* The size ladder (legba_encoder_choose_size()): the largest step of 1,
 * 3/4, 1/2, 3/8, 1/4 ... whose floor the bitrate carries, even sizes, the
 * aspect ratio kept, not below 320x180 pixels; down at once, up only with
 * the margin; never for a factory without a measured floor. */
static void
test_scaling_ladder (void)
{
  g_autoptr (GstCaps) hd = sized (1280, 720, 30);
  g_autoptr (GstCaps) hd15 = sized (1280, 720, 15);
  g_autoptr (GstCaps) odd = sized (1366, 768, 30);
  g_autoptr (GstCaps) small = sized (320, 180, 30);
  g_autoptr (GstCaps) c540 = sized (960, 540, 30);
  g_autoptr (GstCaps) c360 = sized (640, 360, 30);
  g_autoptr (GstElement) vp8 = gst_element_factory_make ("vp8enc", NULL);
  g_autoptr (GstElement) x264 = gst_element_factory_make ("x264enc", NULL);
  guint f720, f540, f360;
  gint w, h;

  if (!vp8) {
    g_test_skip ("vp8enc is not installed");
    return;
  }
  gst_object_ref_sink (vp8);
  f720 = legba_encoder_get_scaling_floor (vp8, hd);
  f540 = legba_encoder_get_scaling_floor (vp8, c540);
  f360 = legba_encoder_get_scaling_floor (vp8, c360);
  g_assert_cmpuint (f720, >, f540);
  g_assert_cmpuint (f540, >, f360);
  g_assert_cmpuint (f360, >, 0);
  /* half the frame rate needs half the bitrate */
  g_assert_cmpuint (legba_encoder_get_scaling_floor (vp8, hd15), ==,
      (guint) ((f720 + 1) / 2));

  /* enough for the full size: kept */
  g_assert_false (legba_encoder_choose_size (vp8, hd, f720, 0, 0, &w, &h));
  g_assert_cmpint (w, ==, 1280);
  g_assert_cmpint (h, ==, 720);
  /* just below: 3/4 */
  g_assert_true (legba_encoder_choose_size (vp8, hd, f720 - 1, 0, 0, &w, &h));
  g_assert_cmpint (w, ==, 960);
  g_assert_cmpint (h, ==, 540);
  /* below 3/4's floor: 1/2 */
  g_assert_true (legba_encoder_choose_size (vp8, hd, f540 - 1, 0, 0, &w, &h));
  g_assert_cmpint (w, ==, 640);
  g_assert_cmpint (h, ==, 360);
  /* nothing carries it: the smallest step of at least 320x180 pixels */
  g_assert_true (legba_encoder_choose_size (vp8, hd, 1000, 0, 0, &w, &h));
  g_assert_cmpint (w, ==, 320);
  g_assert_cmpint (h, ==, 180);
  g_assert_false (legba_encoder_choose_size (vp8, small, 1000, 0, 0, &w, &h));
  g_assert_cmpint (w, ==, 320);

  /* even sizes, the aspect ratio kept */
  g_assert_true (legba_encoder_choose_size (vp8, odd, 1000, 0, 0, &w, &h));
  g_assert_cmpint (w % 2, ==, 0);
  g_assert_cmpint (h % 2, ==, 0);
  g_assert_cmpint (w, ==, 1366 / 4 & ~1);
  g_assert_cmpint (h, ==, 768 / 4);

  /* hysteresis: sent at 640x360, 3/4's floor is carried but not with the
   * margin: stays; with the margin: up */
  g_assert_true (legba_encoder_choose_size (vp8, hd, f540, 640, 360, &w, &h));
  g_assert_cmpint (w, ==, 640);
  g_assert_true (legba_encoder_choose_size (vp8, hd,
          (guint) (f540 * LEGBA_ENCODER_SCALE_UP_MARGIN) + 1, 640, 360, &w,
          &h));
  g_assert_cmpint (w, ==, 960);
  /* well above the full size's floor: back to it */
  g_assert_false (legba_encoder_choose_size (vp8, hd,
          (guint) (f720 * LEGBA_ENCODER_SCALE_UP_MARGIN) + 1, 640, 360, &w,
          &h));
  g_assert_cmpint (w, ==, 1280);
  /* down at once: sent at 1280x720, just below its floor */
  g_assert_true (legba_encoder_choose_size (vp8, hd, f720 - 1, 1280, 720, &w,
          &h));
  g_assert_cmpint (w, ==, 960);

  /* no measured floor: never scaled */
  if (x264) {
    gst_object_ref_sink (x264);
    g_assert_cmpuint (legba_encoder_get_scaling_floor (x264, hd), ==, 0);
    g_assert_false (legba_encoder_choose_size (x264, hd, 1000, 0, 0, &w, &h));
    g_assert_cmpint (w, ==, 1280);
    g_assert_cmpint (h, ==, 720);
  }
}

int
main (int argc, char **argv)
{
  int ret;

  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  load_facts ();

  g_test_add_func ("/encoder/family/lookup", test_lookup);
  g_test_add_func ("/encoder/family/every-family-checked",
      test_every_family_checked);
  g_test_add_func ("/encoder/family/bitrate-units", test_bitrate_units);
  g_test_add_func ("/encoder/family/frame-dropping", test_frame_dropping);
  g_test_add_func ("/encoder/family/scaling-ladder", test_scaling_ladder);
  g_test_add_func ("/encoder/family/output-caps", test_output_caps);

  ret = g_test_run ();
  json_object_unref (facts);
  return ret;
}
