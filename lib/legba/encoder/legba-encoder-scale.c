/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Scaling the picture down when the bitrate cannot carry it: each
 * factory's measured floor (the lowest bitrate at which it keeps at least
 * 90% of the frames within 1.10 x the cap), and the ladder of smaller
 * sizes libwebrtc steps through (3/4, 1/2, 3/8, 1/4 ...).
 */
#include <legba/encoder/legba-encoder-private.h>

#include <string.h>

GST_DEBUG_CATEGORY_EXTERN (legba_encoder_debug);
#define GST_CAT_DEFAULT legba_encoder_debug

G_DEFINE_ENUM_TYPE (LegbaDegradationPreference,
    legba_degradation_preference,
    G_DEFINE_ENUM_VALUE (LEGBA_DEGRADATION_PREFERENCE_BALANCED, "balanced"),
    G_DEFINE_ENUM_VALUE (LEGBA_DEGRADATION_PREFERENCE_MAINTAIN_FRAMERATE,
        "maintain-framerate"),
    G_DEFINE_ENUM_VALUE (LEGBA_DEGRADATION_PREFERENCE_MAINTAIN_RESOLUTION,
        "maintain-resolution"));

/* One measured point: at width x height and 30 fps, the lowest cap at
 * which the encoder, configured as legbavideoenc configures it, keeps at
 * least 90% of 150 frames of the video-send benchmark's content
 * (scrolling SMPTE bars with a noise patch) within 1.10 x the cap. */
typedef struct
{
  gint width, height;
  guint bitrate;
} FloorPoint;

#define MAX_POINTS 8

typedef struct
{
  const gchar *factory;
  FloorPoint points[MAX_POINTS];        /* by pixel count; 0-terminated */
} FactoryFloor;

/* Measured with bench/encoders/tune.py (docs/encoders.md, "Scaling down");
 * each value is the lowest cap of the measured grid that met the rule.
 * Factories not listed (the hardware families, x264, VP9, AV1) have no
 * measured floor and are never scaled. */
static const FactoryFloor floors[] = {
  {"vp8enc", {
              {320, 180, 207000},
              {480, 270, 311000},
              {640, 360, 553000},
              {960, 540, 1244000},
              {1280, 720, 1935000},
              {1920, 1080, 4355000},
          }},
  /* with frame skipping on, as legbavideoenc runs it below 0.17 bit per
   * pixel per frame */
  {"openh264enc", {
              {320, 180, 311000},
              {480, 270, 622000},
              {640, 360, 1106000},
              {960, 540, 2488000},
              {1280, 720, 3871000},
              {1920, 1080, 8709000},
          }},
};

/* Frame rate assumed when the caps give none (variable frame rate). */
#define FALLBACK_FPS 30.0
#define FLOOR_FPS 30.0

static const FactoryFloor *
floor_of_element (GstElement * encoder)
{
  GstElementFactory *factory = gst_element_get_factory (encoder);
  const gchar *name = factory ? GST_OBJECT_NAME (factory) : NULL;

  for (guint i = 0; name && i < G_N_ELEMENTS (floors); i++) {
    if (strcmp (floors[i].factory, name) == 0)
      return &floors[i];
  }
  return NULL;
}

static gdouble
point_bpp (const FloorPoint * p)
{
  return p->bitrate / ((gdouble) p->width * p->height * FLOOR_FPS);
}

/* Bits per pixel per frame the factory needs at @pixels: the measured
 * points' figure, linear in the pixel count between two points, that of
 * the nearest point outside them. */
static gdouble
floor_bpp (const FactoryFloor * f, gdouble pixels)
{
  guint n = 0;

  while (n < MAX_POINTS && f->points[n].width)
    n++;
  if (pixels <= (gdouble) f->points[0].width * f->points[0].height)
    return point_bpp (&f->points[0]);
  for (guint i = 1; i < n; i++) {
    gdouble lo = (gdouble) f->points[i - 1].width * f->points[i - 1].height;
    gdouble hi = (gdouble) f->points[i].width * f->points[i].height;

    if (pixels <= hi) {
      gdouble t = (pixels - lo) / (hi - lo);
      return point_bpp (&f->points[i - 1]) * (1.0 - t) +
          point_bpp (&f->points[i]) * t;
    }
  }
  return point_bpp (&f->points[n - 1]);
}

static guint
floor_at (const FactoryFloor * f, gint width, gint height, gdouble fps)
{
  gdouble pixels = (gdouble) width * height;

  return (guint) MIN (floor_bpp (f, pixels) * pixels * fps,
      (gdouble) G_MAXINT32);
}

static gboolean
caps_size (GstCaps * raw_caps, gint * width, gint * height, gdouble * fps)
{
  GstStructure *s;
  gint fps_n = 0, fps_d = 1;

  if (!raw_caps || gst_caps_get_size (raw_caps) == 0)
    return FALSE;
  s = gst_caps_get_structure (raw_caps, 0);
  if (!gst_structure_get_int (s, "width", width)
      || !gst_structure_get_int (s, "height", height)
      || *width <= 0 || *height <= 0)
    return FALSE;
  *fps = FALLBACK_FPS;
  if (gst_structure_get_fraction (s, "framerate", &fps_n, &fps_d)
      && fps_n > 0 && fps_d > 0)
    *fps = (gdouble) fps_n / fps_d;
  return TRUE;
}

/**
 * legba_encoder_get_scaling_floor:
 * @encoder: an encoder element
 * @raw_caps: fixed raw video caps
 *
 * The lowest bitrate at which @encoder's factory keeps at least 90% of the
 * frames within 1.10 x the cap at the size and frame rate of @raw_caps (a
 * variable frame rate counts as 30 fps). The figures are measured on
 * detailed moving content (docs/encoders.md), so easier content needs
 * less.
 *
 * Returns: the bitrate in bit/s, or 0 when the factory has no measured
 *   floor (hardware encoders, x264enc): such encoders are never scaled
 */
guint
legba_encoder_get_scaling_floor (GstElement * encoder, GstCaps * raw_caps)
{
  const FactoryFloor *f;
  gint width, height;
  gdouble fps;

  g_return_val_if_fail (GST_IS_ELEMENT (encoder), 0);

  f = floor_of_element (encoder);
  if (!f || !caps_size (raw_caps, &width, &height, &fps))
    return 0;
  return floor_at (f, width, height, fps);
}

/* Step @i of the ladder: 1, 3/4, 1/2, 3/8, 1/4, 3/16 ... of each side,
 * rounded down to even. */
static void
ladder_step (guint i, gint width, gint height, gint * w, gint * h)
{
  gint64 num = (i % 2) ? 3 : 1;
  gint64 den = (i % 2) ? ((gint64) 4 << (i / 2)) : ((gint64) 1 << (i / 2));

  *w = (gint) ((width * num / den) & ~1);
  *h = (gint) ((height * num / den) & ~1);
  if (i == 0) {
    *w = width;
    *h = height;
  }
}

#define MAX_STEPS 16

/**
 * legba_encoder_choose_size:
 * @encoder: an encoder element
 * @raw_caps: fixed raw video caps of the picture to send
 * @bitrate: the bitrate @encoder is asked for, in bit/s
 * @current_width: width sent now, or 0 when nothing is sent yet
 * @current_height: height sent now, or 0 when nothing is sent yet
 * @width: (out): width to send
 * @height: (out): height to send
 *
 * The size to send @raw_caps at so that @encoder can hold @bitrate
 * without dropping frames, as libwebrtc degrades resolution: the largest
 * step of the ladder 1, 3/4, 1/2, 3/8, 1/4 ... of each side (even sizes,
 * the aspect ratio kept) whose floor (legba_encoder_get_scaling_floor()) is
 * at most @bitrate, never below #LEGBA_ENCODER_MIN_SCALED_PIXELS pixels;
 * the smallest step when none is. When something is sent already
 * (@current_width and @current_height are a step of the ladder) the size
 * goes down as soon as the current one's floor is above @bitrate, and
 * back up only to steps whose floor times #LEGBA_ENCODER_SCALE_UP_MARGIN
 * is at most @bitrate, so that a bitrate moving around a floor does not
 * make the size flap.
 *
 * Returns: %TRUE when the size to send is smaller than @raw_caps' (@width
 *   and @height then differ from it); %FALSE when @encoder has no measured
 *   floor, @raw_caps has no size, or the full size is kept
 */
gboolean
legba_encoder_choose_size (GstElement * encoder, GstCaps * raw_caps,
    guint bitrate, gint current_width, gint current_height, gint * width,
    gint * height)
{
  const FactoryFloor *f;
  gint in_w = 0, in_h = 0, sw[MAX_STEPS], sh[MAX_STEPS];
  guint needed[MAX_STEPS];
  guint n = 0, down, chosen;
  gint current = -1;
  gdouble fps;

  g_return_val_if_fail (GST_IS_ELEMENT (encoder), FALSE);
  g_return_val_if_fail (width != NULL && height != NULL, FALSE);

  f = floor_of_element (encoder);
  if (!caps_size (raw_caps, &in_w, &in_h, &fps)) {
    *width = *height = 0;
    return FALSE;
  }
  *width = in_w;
  *height = in_h;
  if (!f)
    return FALSE;

  for (guint i = 0; i < MAX_STEPS; i++) {
    ladder_step (i, in_w, in_h, &sw[n], &sh[n]);
    if (i > 0 && ((gint64) sw[n] * sh[n] < LEGBA_ENCODER_MIN_SCALED_PIXELS
            || sw[n] < 2 || sh[n] < 2))
      break;
    needed[n] = floor_at (f, sw[n], sh[n], fps);
    if (sw[n] == current_width && sh[n] == current_height)
      current = n;
    n++;
  }

  for (down = 0; down + 1 < n && needed[down] > bitrate; down++);
  chosen = down;
  if (current >= 0 && down < (guint) current) {
    /* a larger size would do: only with the margin */
    guint up;

    for (up = 0; up < (guint) current
        && needed[up] * LEGBA_ENCODER_SCALE_UP_MARGIN > bitrate; up++);
    chosen = up;
  }
  *width = sw[chosen];
  *height = sh[chosen];
  GST_LOG_OBJECT (encoder, "%dx%d at %u bit/s: %dx%d (floor %u bit/s, "
      "%u at full size)", in_w, in_h, bitrate, *width, *height,
      needed[chosen], needed[0]);
  return chosen > 0;
}
