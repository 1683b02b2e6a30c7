/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The family table and the mapping of LegbaEncoderSettings onto each
 * family's properties. Units and names are those the elements register in
 * GStreamer 1.22 (tests/unit/test-encoder-family.c checks every row against
 * the installed element, or against the property facts GStreamer 1.22
 * records, kept in tests/unit/data/encoder-properties-1.22.json).
 */
#include <legba/encoder/legba-encoder-private.h>

#include <string.h>

GST_DEBUG_CATEGORY_EXTERN (legba_encoder_debug);
#define GST_CAT_DEFAULT legba_encoder_debug

/* Selection order: hardware families first (NVENC, VA, QSV, V4L2,
 * VideoToolbox, AMF, OpenMAX through gst-libav), then software (x264,
 * openh264, libvpx, libaom). Rate control is always constant bitrate with frame
 * dropping where the family offers it, as browsers configure their
 * encoders for WebRTC. */
static const LegbaEncoderFamily families[] = {
  {
        /* nvcodec, the 1.22 encoders (gstnvencoder.cpp) */
        .name = "nvenc",
        .patterns = "nvautogpu*enc nvcuda*enc nvd3d11*enc",
        .hardware = TRUE,
        .bitrate = "bitrate",.bitrate_scale = 1000,
        .max_bitrate = "max-bitrate",.max_bitrate_scale = 1000,
        .bitrate_mutable = TRUE,
        .keyframe = "gop-size",
        .realtime = "rate-control=cbr zero-reorder-delay=true ?b-frames=0 "
        "?rc-lookahead=0",
        .speed = {"preset=low-latency-hp", "preset=low-latency",
            "preset=low-latency-hq"},
      },
  {
        /* nvcodec, the legacy encoders (gstnvbaseenc.c) */
        .name = "nvenc",
        .patterns = "nvh264enc nvh265enc nvh264device*enc nvh265device*enc",
        .hardware = TRUE,
        .bitrate = "bitrate",.bitrate_scale = 1000,
        .max_bitrate = "max-bitrate",.max_bitrate_scale = 1000,
        .bitrate_mutable = TRUE,
        .keyframe = "gop-size",
        .realtime = "rc-mode=cbr zerolatency=true ?bframes=0 ?rc-lookahead=0",
        .speed = {"preset=low-latency-hp", "preset=low-latency",
            "preset=low-latency-hq"},
      },
  {
        .name = "va",
        .patterns = "vah26?enc vah26?lpenc vavp?enc vavp?lpenc vaav1enc "
        "vaav1lpenc",
        .hardware = TRUE,
        .bitrate = "bitrate",.bitrate_scale = 1000,
        .bitrate_mutable = TRUE,
        .keyframe = "key-int-max",
        .realtime = "?rate-control=cbr ?b-frames=0",
        .speed = {"target-usage=7", "target-usage=4", "target-usage=1"},
      },
  {
        /* gstreamer-vaapi */
        .name = "vaapi",
        .patterns = "vaapi*enc",
        .hardware = TRUE,
        .bitrate = "bitrate",.bitrate_scale = 1000,
        .bitrate_mutable = FALSE,
        .keyframe = "keyframe-period",
        .realtime = "rate-control=cbr ?max-bframes=0",
        .speed = {"quality-level=7", "quality-level=4", "quality-level=1"},
      },
  {
        .name = "qsv",
        .patterns = "qsv*enc",
        .hardware = TRUE,
        .bitrate = "bitrate",.bitrate_scale = 1000,
        .max_bitrate = "max-bitrate",.max_bitrate_scale = 1000,
        /* gstqsvh264enc.cpp reconfigures on the next frame */
        .bitrate_mutable = TRUE,
        .keyframe = "gop-size",
        .realtime = "rate-control=cbr low-latency=true ?b-frames=0",
        .speed = {"target-usage=7", "target-usage=4", "target-usage=1"},
      },
  {
        /* V4L2 stateful encoders: V4L2 controls in extra-controls, named
         * as gstv4l2object.c names them; not changeable while playing in
         * 1.22 */
        .name = "v4l2",
        .patterns = "v4l2*enc",
        .hardware = TRUE,
        .v4l2_controls = TRUE,
        .bitrate = "video_bitrate",.bitrate_scale = 1,
        .bitrate_mutable = FALSE,
        .keyframe = "video_gop_size",
        .realtime = "video_bitrate_mode=1 video_b_frames=0",
        .speed = {"", "", ""},
      },
  {
        .name = "videotoolbox",
        .patterns = "vtenc_*",
        .hardware = TRUE,
        .bitrate = "bitrate",.bitrate_scale = 1000,
        .bitrate_mutable = TRUE,
        .keyframe = "max-keyframe-interval",
        .realtime = "realtime=true allow-frame-reordering=false",
        .speed = {"quality=0.25", "quality=0.5", "quality=0.75"},
      },
  {
        .name = "amf",
        .patterns = "amf*enc",
        .hardware = TRUE,
        .bitrate = "bitrate",.bitrate_scale = 1000,
        .max_bitrate = "max-bitrate",.max_bitrate_scale = 1000,
        .bitrate_mutable = TRUE,
        .keyframe = "gop-size",
        .realtime = "usage=ultra-low-latency rate-control=cbr",
        .speed = {"preset=speed", "preset=balanced", "preset=quality"},
      },
  {
        /* libavcodec's OpenMAX IL wrapper (gst-libav) */
        .name = "omx",
        .patterns = "avenc_*_omx",
        .hardware = TRUE,
        .bitrate = "bitrate",.bitrate_scale = 1,
        .max_bitrate = "maxrate",.max_bitrate_scale = 1,
        .bitrate_mutable = FALSE,
        .keyframe = "gop-size",
        .realtime = "max-bframes=0",
        .speed = {"", "", ""},
      },
  {
        /* x264's buffer model at 150 ms (its default 600): no frame, a key
         * frame at a scene cut included, is more than a few frames' worth,
         * as libwebrtc caps its key frames; larger ones stood in a 1 Mbit/s
         * bottleneck's queue for 150-180 ms. At 100 ms x264 made 16-50%
         * less than its bitrate, and beside a TCP flow the estimate, held
         * to what was sent, fell with it (docs/encoders.md). */
        .name = "x264",
        .patterns = "x264enc",
        .hardware = FALSE,
        .bitrate = "bitrate",.bitrate_scale = 1000,
        .bitrate_mutable = TRUE,
        .keyframe = "key-int-max",
        .realtime = "tune=zerolatency bframes=0 b-adapt=false rc-lookahead=0 "
        "sync-lookahead=0 vbv-buf-capacity=150",
        .speed = {"speed-preset=ultrafast", "speed-preset=superfast",
            "speed-preset=veryfast"},
      },
  {
        /* Without frame skipping, bitrate mode cannot go below about 0.15
         * bit per pixel per frame (its coarsest quantizer on detailed
         * moving content: 0.159 at 360p, 0.144 at 720p, 0.146 at 1080p,
         * bench/encoders/tune.py) and overshoots under a lower cap; with
         * it, it drops a few frames even above that. So frame skipping is
         * on only under 0.17 bit per pixel per frame. openh264enc reads
         * the switch when it configures itself for new caps only. */
        .name = "openh264",
        .patterns = "openh264enc",
        .hardware = FALSE,
        .bitrate = "bitrate",.bitrate_scale = 1,
        .max_bitrate = "max-bitrate",.max_bitrate_scale = 1,
        .bitrate_mutable = TRUE,
        .keyframe = "gop-size",
        .realtime = "rate-control=bitrate usage-type=camera",
        .speed = {"complexity=low", "complexity=medium", "complexity=high"},
        .frame_drop = "enable-frame-skip",.frame_drop_bpp = 0.17,
      },
  {
        /* libvpx: frame dropping and the buffer model of libwebrtc at 3/4
         * of its sizes (750 / 375 / 450 ms for 1000 / 500 / 600):
         * libwebrtc's sizes reach 1.11 x the cap at 720p / 0.5 Mbit/s and
         * 2160p / 2.5 Mbit/s, these 1.08 x, for 1-3 fewer frames of 150
         * where the cap is too low and none where it is not; half the
         * sizes hold the cap more tightly still but drop frames where the
         * cap carries the picture (bench/encoders/tune.py). No setting of
         * these knobs keeps 90% of the frames where the cap is below what
         * libvpx needs at its coarsest quantizer. The encoder applies
         * target-bitrate changes while playing (vpx_codec_enc_config_set).
         * One thread: libvpx's threads cost several times the CPU per
         * frame here. */
        .name = "vpx",
        .patterns = "vp8enc vp9enc",
        .hardware = FALSE,
        .bitrate = "target-bitrate",.bitrate_scale = 1,
        .bitrate_mutable = TRUE,
        .keyframe = "keyframe-max-dist",
        .realtime = "deadline=1 end-usage=cbr lag-in-frames=0 "
        "error-resilient=default undershoot=100 overshoot=15 "
        "buffer-size=750 buffer-initial-size=375 buffer-optimal-size=450 "
        "dropframe-threshold=30",
        .speed = {"cpu-used=-8", "cpu-used=-6", "cpu-used=-4"},
      },
  {
        .name = "aom",
        .patterns = "av1enc",
        .hardware = FALSE,
        .bitrate = "target-bitrate",.bitrate_scale = 1000,
        .bitrate_mutable = TRUE,
        .keyframe = "keyframe-max-dist",
        .realtime = "usage-profile=realtime end-usage=cbr lag-in-frames=0 "
        "drop-frame=30 row-mt=true",
        .speed = {"cpu-used=10", "cpu-used=9", "cpu-used=8"},
      },
};

const LegbaEncoderFamily *
legba_encoder_families (guint * n_families)
{
  *n_families = G_N_ELEMENTS (families);
  return families;
}

static gboolean
family_matches (const LegbaEncoderFamily * family, const gchar * factory)
{
  g_auto (GStrv) patterns = g_strsplit (family->patterns, " ", -1);

  for (guint i = 0; patterns[i]; i++) {
    if (patterns[i][0] && g_pattern_match_simple (patterns[i], factory))
      return TRUE;
  }
  return FALSE;
}

/**
 * legba_encoder_family_lookup:
 * @factory_name: an element factory name
 * @index: (out) (optional): the family's row, its selection order
 *
 * Returns: (nullable): the family driving @factory_name, or %NULL
 */
const LegbaEncoderFamily *
legba_encoder_family_lookup (const gchar * factory_name, guint * index)
{
  for (guint i = 0; i < G_N_ELEMENTS (families); i++) {
    if (family_matches (&families[i], factory_name)) {
      if (index)
        *index = i;
      return &families[i];
    }
  }
  return NULL;
}

/* Sets one property from its string form, validated against its spec.
 * Optional names (leading '?') the element does not have are skipped. */
static gboolean
set_property_from_string (GObject * object, const gchar * setting,
    GError ** error)
{
  g_auto (GStrv) kv = g_strsplit (setting, "=", 2);
  const gchar *name = kv[0];
  gboolean optional = name[0] == '?';
  g_auto (GValue) value = G_VALUE_INIT;
  const gchar *text = kv[1];
  GParamSpec *pspec;

  if (optional)
    name++;
  if (!kv[1]) {
    g_set_error (error, LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_FAILED,
        "malformed setting '%s'", setting);
    return FALSE;
  }
  pspec = g_object_class_find_property (G_OBJECT_GET_CLASS (object), name);
  if (!pspec) {
    if (optional)
      return TRUE;
    g_set_error (error, LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_FAILED,
        "%s has no property '%s'", G_OBJECT_TYPE_NAME (object), name);
    return FALSE;
  }
  g_value_init (&value, pspec->value_type);
  if (!gst_value_deserialize (&value, text)
      || g_param_value_validate (pspec, &value)) {
    g_set_error (error, LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_FAILED,
        "%s: '%s' is not a valid value of '%s'", G_OBJECT_TYPE_NAME (object),
        text, name);
    return FALSE;
  }
  g_object_set_property (object, name, &value);
  return TRUE;
}

/* Sets a numeric property of any integer type, clamped to its range. */
static gboolean
set_number (GObject * object, const gchar * name, guint64 number,
    GError ** error)
{
  GParamSpec *pspec =
      g_object_class_find_property (G_OBJECT_GET_CLASS (object), name);
  g_auto (GValue) wide = G_VALUE_INIT;
  g_auto (GValue) value = G_VALUE_INIT;

  if (!pspec) {
    g_set_error (error, LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_FAILED,
        "%s has no property '%s'", G_OBJECT_TYPE_NAME (object), name);
    return FALSE;
  }
  g_value_init (&wide, G_TYPE_UINT64);
  g_value_set_uint64 (&wide, MIN (number, (guint64) G_MAXINT32));
  g_value_init (&value, pspec->value_type);
  if (!g_value_transform (&wide, &value)) {
    g_set_error (error, LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_FAILED,
        "%s: property '%s' is not a number", G_OBJECT_TYPE_NAME (object), name);
    return FALSE;
  }
  g_param_value_validate (pspec, &value);
  g_object_set_property (object, name, &value);
  return TRUE;
}

static gboolean
set_switch (GObject * object, const gchar * name, gboolean on, GError ** error)
{
  GParamSpec *pspec =
      g_object_class_find_property (G_OBJECT_GET_CLASS (object), name);

  if (!pspec || pspec->value_type != G_TYPE_BOOLEAN) {
    g_set_error (error, LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_FAILED,
        "%s has no boolean property '%s'", G_OBJECT_TYPE_NAME (object), name);
    return FALSE;
  }
  g_object_set (object, name, on, NULL);
  return TRUE;
}

static guint
scale_bitrate (guint bits_per_second, guint scale)
{
  return MAX (1, (bits_per_second + scale / 2) / scale);
}

/* The target never exceeds the cap; families without a peak property are
 * given the cap as their target when the target is above it. */
static void
effective_bitrates (const LegbaEncoderSettings * settings, guint * target,
    guint * cap)
{
  *cap = settings->max_bitrate ? settings->max_bitrate : settings->bitrate;
  *target = MIN (settings->bitrate, *cap);
}

static gboolean
apply_v4l2_controls (GstElement * encoder, const LegbaEncoderFamily * family,
    const LegbaEncoderSettings * settings, GError ** error)
{
  g_autoptr (GstStructure) controls = gst_structure_new_empty ("controls");
  g_auto (GStrv) realtime = g_strsplit (family->realtime, " ", -1);
  guint target, cap;

  if (!g_object_class_find_property (G_OBJECT_GET_CLASS (encoder),
          "extra-controls")) {
    g_set_error (error, LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_FAILED,
        "%s has no property 'extra-controls'", GST_ELEMENT_NAME (encoder));
    return FALSE;
  }
  for (guint i = 0; realtime[i]; i++) {
    g_auto (GStrv) kv = g_strsplit (realtime[i], "=", 2);
    if (kv[0][0] && kv[1])
      gst_structure_set (controls, kv[0], G_TYPE_INT, atoi (kv[1]), NULL);
  }
  effective_bitrates (settings, &target, &cap);
  gst_structure_set (controls, family->bitrate, G_TYPE_INT,
      (gint) MIN (target, (guint) G_MAXINT32), NULL);
  if (settings->keyframe_interval) {
    gst_structure_set (controls, family->keyframe, G_TYPE_INT,
        (gint) MIN (settings->keyframe_interval, (guint) G_MAXINT32),
        "h264_i_frame_period", G_TYPE_INT,
        (gint) MIN (settings->keyframe_interval, (guint) G_MAXINT32), NULL);
  }
  g_object_set (encoder, "extra-controls", controls, NULL);
  return TRUE;
}

static gboolean
apply_settings_list (GstElement * encoder, const gchar * list, GError ** error)
{
  g_auto (GStrv) items = g_strsplit (list, " ", -1);

  for (guint i = 0; items[i]; i++) {
    if (items[i][0]
        && !set_property_from_string (G_OBJECT (encoder), items[i], error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
apply_bitrate (GstElement * encoder, const LegbaEncoderFamily * family,
    guint target, guint cap, GError ** error)
{
  if (!set_number (G_OBJECT (encoder), family->bitrate,
          scale_bitrate (target, family->bitrate_scale), error))
    return FALSE;
  if (family->max_bitrate && !set_number (G_OBJECT (encoder),
          family->max_bitrate, scale_bitrate (cap,
              family->max_bitrate_scale), error))
    return FALSE;
  return TRUE;
}

static const LegbaEncoderFamily *
family_of_element (GstElement * encoder, GError ** error)
{
  GstElementFactory *factory = gst_element_get_factory (encoder);
  const gchar *name = factory ? GST_OBJECT_NAME (factory) : NULL;
  const LegbaEncoderFamily *family =
      name ? legba_encoder_family_lookup (name, NULL) : NULL;

  if (!family)
    g_set_error (error, LEGBA_ENCODER_ERROR,
        LEGBA_ENCODER_ERROR_UNKNOWN_FAMILY,
        "%s belongs to no encoder family Legba knows",
        name ? name : GST_ELEMENT_NAME (encoder));
  return family;
}

/**
 * legba_encoder_apply_settings:
 * @encoder: an encoder element, in the NULL or READY state
 * @settings: the contract to apply
 * @error: return location for a #LEGBA_ENCODER_ERROR
 *
 * Configures @encoder for realtime use (no B-frames, no lookahead,
 * zero-latency tuning, constant bitrate), its speed preset, key-frame
 * interval and bitrate, each mapped to the family's own property and unit.
 *
 * Returns: %FALSE when @encoder belongs to no known family
 *   (%LEGBA_ENCODER_ERROR_UNKNOWN_FAMILY) or lacks a property its family
 *   is documented to have (%LEGBA_ENCODER_ERROR_FAILED)
 */
gboolean
legba_encoder_apply_settings (GstElement * encoder,
    const LegbaEncoderSettings * settings, GError ** error)
{
  const LegbaEncoderFamily *family;
  guint target, cap;

  g_return_val_if_fail (GST_IS_ELEMENT (encoder), FALSE);
  g_return_val_if_fail (settings != NULL, FALSE);
  g_return_val_if_fail (settings->speed <= LEGBA_ENCODER_SPEED_QUALITY, FALSE);

  family = family_of_element (encoder, error);
  if (!family)
    return FALSE;
  if (family->v4l2_controls)
    return apply_v4l2_controls (encoder, family, settings, error);
  if (!apply_settings_list (encoder, family->realtime, error)
      || !apply_settings_list (encoder, family->speed[settings->speed], error))
    return FALSE;
  if (settings->keyframe_interval && !set_number (G_OBJECT (encoder),
          family->keyframe, settings->keyframe_interval, error))
    return FALSE;
  /* until the caps are known, the cap is held by dropping frames */
  if (family->frame_drop && !set_switch (G_OBJECT (encoder),
          family->frame_drop, TRUE, error))
    return FALSE;
  effective_bitrates (settings, &target, &cap);
  return apply_bitrate (encoder, family, target, cap, error);
}

/**
 * legba_encoder_can_change_bitrate:
 * @encoder: an encoder element
 *
 * Tells whether an encoder element takes a new bitrate while PLAYING,
 * as legba_encoder_set_bitrate() gives it; an encoder of another family
 * applies a new bitrate from its next start.
 *
 * Returns: whether @encoder applies bitrate changes while PLAYING
 */
gboolean
legba_encoder_can_change_bitrate (GstElement * encoder)
{
  const LegbaEncoderFamily *family = family_of_element (encoder, NULL);

  return family && family->bitrate_mutable;
}

/**
 * legba_encoder_set_bitrate:
 * @encoder: an encoder element, in any state
 * @bitrate: target in bit/s
 * @max_bitrate: cap in bit/s; 0 means @bitrate is the cap
 *
 * Changes the bitrate of a running encoder, for congestion control.
 *
 * Returns: %FALSE when @encoder's family cannot change its bitrate while
 *   PLAYING (the new value is still stored and applies from the next
 *   start)
 */
gboolean
legba_encoder_set_bitrate (GstElement * encoder, guint bitrate,
    guint max_bitrate)
{
  const LegbaEncoderFamily *family;
  LegbaEncoderSettings settings = {.bitrate = bitrate,
    .max_bitrate = max_bitrate
  };
  g_autoptr (GError) error = NULL;
  guint target, cap;

  g_return_val_if_fail (GST_IS_ELEMENT (encoder), FALSE);

  family = family_of_element (encoder, NULL);
  if (!family)
    return FALSE;
  effective_bitrates (&settings, &target, &cap);
  if (family->v4l2_controls) {
    GstStructure *controls = NULL;

    g_object_get (encoder, "extra-controls", &controls, NULL);
    if (!controls)
      controls = gst_structure_new_empty ("controls");
    gst_structure_set (controls, family->bitrate, G_TYPE_INT,
        (gint) MIN (target, (guint) G_MAXINT32), NULL);
    g_object_set (encoder, "extra-controls", controls, NULL);
    gst_structure_free (controls);
  } else if (!apply_bitrate (encoder, family, target, cap, &error)) {
    GST_WARNING_OBJECT (encoder, "bitrate: %s", error->message);
    return FALSE;
  }
  GST_DEBUG_OBJECT (encoder, "bitrate %u bit/s, cap %u bit/s", target, cap);
  return family->bitrate_mutable;
}

/* Frame rate assumed when the caps give none (variable frame rate). */
#define FALLBACK_FPS 30.0

static guint
min_bitrate_for_caps (const LegbaEncoderFamily * family, GstCaps * raw_caps)
{
  GstStructure *s;
  gint width = 0, height = 0, fps_n = 0, fps_d = 1;
  gdouble fps = FALLBACK_FPS;

  if (!family->frame_drop || !raw_caps || gst_caps_get_size (raw_caps) == 0)
    return 0;
  s = gst_caps_get_structure (raw_caps, 0);
  if (!gst_structure_get_int (s, "width", &width)
      || !gst_structure_get_int (s, "height", &height)
      || width <= 0 || height <= 0)
    return 0;
  if (gst_structure_get_fraction (s, "framerate", &fps_n, &fps_d)
      && fps_n > 0 && fps_d > 0)
    fps = (gdouble) fps_n / fps_d;
  return (guint) MIN (family->frame_drop_bpp * width * height * fps,
      (gdouble) G_MAXINT32);
}

/**
 * legba_encoder_get_min_bitrate:
 * @encoder: an encoder element
 * @raw_caps: fixed raw video caps @encoder takes
 *
 * The lowest cap at which @encoder's family holds the cap without dropping
 * frames, at the size and frame rate of @raw_caps (a variable frame rate
 * counts as 30 fps). It is measured on detailed moving content, so easier
 * content needs less.
 *
 * Returns: the bitrate in bit/s, or 0 when the family's frame dropping is
 *   not switched by the cap (always on in its realtime settings, as for
 *   libvpx and libaom, or absent)
 */
guint
legba_encoder_get_min_bitrate (GstElement * encoder, GstCaps * raw_caps)
{
  const LegbaEncoderFamily *family;

  g_return_val_if_fail (GST_IS_ELEMENT (encoder), 0);

  family = family_of_element (encoder, NULL);
  return family ? min_bitrate_for_caps (family, raw_caps) : 0;
}

/**
 * legba_encoder_apply_frame_dropping:
 * @encoder: an encoder element, before it configures itself for @raw_caps
 * @settings: the contract in force
 * @raw_caps: fixed raw video caps @encoder is about to take
 * @min_bitrate: (out) (optional): legba_encoder_get_min_bitrate()
 *
 * For families whose frame dropping is a switch (openh264), turns it on
 * only when the cap is below what the size and frame rate of @raw_caps
 * need (legba_encoder_get_min_bitrate()), and off otherwise, so that a
 * cap that can carry the picture keeps every frame. Such an encoder reads
 * the switch when it configures itself for caps, so call this before the
 * caps reach it. legba_encoder_apply_settings() leaves it on.
 *
 * Returns: %TRUE when the family has such a switch and the cap is below
 *   its minimum: the encoder now drops frames to hold the cap
 */
gboolean
legba_encoder_apply_frame_dropping (GstElement * encoder,
    const LegbaEncoderSettings * settings, GstCaps * raw_caps,
    guint * min_bitrate)
{
  const LegbaEncoderFamily *family;
  guint needed, target, cap;
  gboolean drop;

  g_return_val_if_fail (GST_IS_ELEMENT (encoder), FALSE);
  g_return_val_if_fail (settings != NULL, FALSE);

  if (min_bitrate)
    *min_bitrate = 0;
  family = family_of_element (encoder, NULL);
  if (!family || !family->frame_drop)
    return FALSE;
  needed = min_bitrate_for_caps (family, raw_caps);
  if (min_bitrate)
    *min_bitrate = needed;
  if (!needed)
    return FALSE;
  effective_bitrates (settings, &target, &cap);
  drop = cap < needed;
  if (!set_switch (G_OBJECT (encoder), family->frame_drop, drop, NULL))
    return FALSE;
  GST_INFO_OBJECT (encoder, "cap %u bit/s, %u bit/s needed without dropping "
      "frames: %s %s", cap, needed, family->frame_drop, drop ? "on" : "off");
  return drop;
}
