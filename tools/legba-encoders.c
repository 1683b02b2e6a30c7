/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-encoders: proves every video encoder candidate on this machine and
 * prints, per codec, each candidate in selection order with its family,
 * kind and outcome (the reason for every rejection), then the one that
 * would be selected. The same report as `legba-call --list-encoders`.
 */
#include <legba/legba.h>

#include <stdlib.h>

static gchar *opt_codec = NULL;
static gchar *opt_prefer = NULL;
static gint opt_width = 1280;
static gint opt_height = 720;
static gint opt_fps = 30;
static gint opt_timeout = LEGBA_ENCODER_DEFAULT_PROOF_TIMEOUT_MS;

static const GOptionEntry entries[] = {
  {"codec", 'c', 0, G_OPTION_ARG_STRING, &opt_codec,
      "Only this codec: h264, vp8, vp9 or av1 (default: all)", "CODEC"},
  {"prefer", 'p', 0, G_OPTION_ARG_STRING, &opt_prefer,
      "auto, hardware or software (default: auto)", "KIND"},
  {"width", 'W', 0, G_OPTION_ARG_INT, &opt_width,
      "Width of the frames proved (default: 1280)", "PIXELS"},
  {"height", 'H', 0, G_OPTION_ARG_INT, &opt_height,
      "Height of the frames proved (default: 720)", "PIXELS"},
  {"fps", 'f', 0, G_OPTION_ARG_INT, &opt_fps,
      "Frame rate of the frames proved (default: 30)", "FPS"},
  {"timeout", 't', 0, G_OPTION_ARG_INT, &opt_timeout,
      "Time bound of each proof in ms (default: 5000)", "MS"},
  {NULL}
};

static gboolean
parse_prefer (const gchar * name, LegbaEncoderPrefer * prefer)
{
  g_autoptr (GEnumClass) klass = g_type_class_ref (LEGBA_TYPE_ENCODER_PREFER);
  GEnumValue *value = g_enum_get_value_by_nick (klass, name);

  if (value)
    *prefer = value->value;
  return value != NULL;
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) context =
      g_option_context_new ("- list the video encoders that work here");
  g_autoptr (GError) error = NULL;
  g_autoptr (GstCaps) caps = NULL;
  LegbaEncoderPrefer prefer = LEGBA_ENCODER_PREFER_AUTO;
  LegbaVideoCodec only = LEGBA_VIDEO_CODEC_H264;

  g_option_context_add_main_entries (context, entries, NULL);
  g_option_context_add_group (context, gst_init_get_option_group ());
  if (!g_option_context_parse (context, &argc, &argv, &error)) {
    g_printerr ("legba-encoders: %s\n", error->message);
    return 2;
  }
  if (opt_codec && !legba_video_codec_from_string (opt_codec, &only)) {
    g_printerr ("legba-encoders: unknown codec '%s'\n", opt_codec);
    return 2;
  }
  if (opt_prefer && !parse_prefer (opt_prefer, &prefer)) {
    g_printerr ("legba-encoders: unknown preference '%s'\n", opt_prefer);
    return 2;
  }
  if (opt_width < 16 || opt_height < 16 || opt_fps < 1 || opt_timeout < 1) {
    g_printerr ("legba-encoders: size, frame rate and timeout must be "
        "positive (at least 16x16 pixels)\n");
    return 2;
  }
  caps = gst_caps_new_simple ("video/x-raw", "format", G_TYPE_STRING, "I420",
      "width", G_TYPE_INT, opt_width, "height", G_TYPE_INT, opt_height,
      "framerate", GST_TYPE_FRACTION, opt_fps, 1,
      "pixel-aspect-ratio", GST_TYPE_FRACTION, 1, 1, NULL);

  for (gint codec = LEGBA_VIDEO_CODEC_H264; codec <= LEGBA_VIDEO_CODEC_AV1;
      codec++) {
    g_autofree gchar *report = NULL;

    if (opt_codec && codec != (gint) only)
      continue;
    report = legba_encoder_report (codec, caps, prefer, opt_timeout);
    g_print ("%s", report);
  }
  g_free (opt_codec);
  g_free (opt_prefer);
  return 0;
}
