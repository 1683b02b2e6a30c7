/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * SECTION:element-legbavideoenc
 * @title: legbavideoenc
 *
 * Encodes raw video with the best encoder that actually works on this
 * machine: hardware families first (NVENC, VA, QSV, V4L2, VideoToolbox,
 * AMF, OpenMAX through gst-libav), software last (x264, openh264, libvpx,
 * libaom).
 * Hardware encoders are often registered whether or not their device is
 * there, so each candidate is *proved* before it is used: instantiated,
 * brought to PAUSED with the real caps and made to encode one frame within
 * #GstLegbaVideoEnc:proof-timeout. Every rejection and its reason is
 * logged in the `legbaencoder` debug category and listed by the
 * `legba-encoders` tool.
 *
 * Every family is driven through one contract: #GstLegbaVideoEnc:bitrate
 * and #GstLegbaVideoEnc:max-bitrate in bit/s (changeable while playing),
 * #GstLegbaVideoEnc:keyframe-interval in frames, a realtime latency mode
 * (no B-frames, zero-latency tuning, no lookahead, constant bitrate with
 * frame dropping where the family offers it), and output caps suited to
 * WebRTC (H.264 byte-stream, AU-aligned, constrained-baseline unless
 * downstream asks for another profile). Force-key-unit events are passed
 * to the encoder in both directions.
 *
 * If the encoder in use fails while running, the element switches to the
 * next candidate that proves it can produce the negotiated codec, profile
 * and level, requests a key frame and posts a warning; the pipeline keeps
 * running. Each choice is announced by an element message named
 * `legba-encoder-selected` with the fields `factory` (string), `family`
 * (string), `hardware` (boolean), `reason` ("selected", "caps-changed" or
 * "fallback") and `rejected` (list of strings, one per candidate rejected
 * before it).
 *
 * Encoders whose frame dropping is a switch (openh264enc) drop frames only
 * when the cap is below what the size and frame rate need
 * (legba_encoder_get_min_bitrate()); the switch is set when caps arrive,
 * and announced by an element message named `legba-encoder-frame-dropping`
 * with the fields `factory` (string), `frame-dropping` (boolean), `cap` and
 * `min-bitrate` (bit/s); #GstLegbaVideoEnc:stats carries the same two
 * facts. A bitrate change while playing applies to the switch from the
 * next caps on.
 *
 * When the bitrate is below what the encoder needs to keep at least 90% of
 * the frames at the input size (its floor, measured for vp8enc and
 * openh264enc: legba_encoder_get_scaling_floor()), the picture is sent
 * scaled down, as browsers do (#GstLegbaVideoEnc:degradation-preference
 * `balanced` or `maintain-framerate`): a videoscale before the encoder
 * sends the largest of 3/4, 1/2, 3/8, 1/4 ... of each side whose floor the
 * bitrate carries (legba_encoder_choose_size()), and back up when the
 * bitrate rises 1.2 times above a larger size's floor. The decision is
 * made when caps arrive and again when #GstLegbaVideoEnc:bitrate or
 * #GstLegbaVideoEnc:max-bitrate change; a new size renegotiates the caps,
 * reconfigures the encoder and starts with a key frame; the receiver
 * decodes the smaller size. Each decision is announced by an element
 * message named `legba-encoder-scaling` with the fields `factory`
 * (string), `scaled` (boolean), `input-width`, `input-height`,
 * `output-width`, `output-height` (int), `bitrate` (the target the
 * decision used), `cap`, `floor` (at the input size) and `output-floor`
 * (at the size sent; all uint, bit/s), and kept in
 * #GstLegbaVideoEnc:stats. `maintain-resolution` keeps the size and lets
 * the encoder drop frames.
 *
 * Downstream may say what the network carries with a custom upstream
 * event named `legba-target-bitrate` with a `bitrate` field (uint, bit/s;
 * 0 lifts the limit): legbaroom sends it from its bandwidth estimation
 * (docs/congestion-control.md). The encoder is then given the lower of it
 * and #GstLegbaVideoEnc:bitrate (and #GstLegbaVideoEnc:max-bitrate no
 * higher than it), and the size is decided again as for a property
 * change: #GstLegbaVideoEnc:bitrate stays the ceiling.
 *
 * Operators steer selection with the `LEGBA_ENCODER` environment variable
 * (a comma-separated list of factory names tried in that order, and/or
 * `hardware`, `software` or `auto`); #GstLegbaVideoEnc:encoder-factory
 * still wins over it.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 videotestsrc is-live=true ! video/x-raw,width=1280,height=720 \
 *     ! legbavideoenc bitrate=1500000 ! h264parse ! fakesink
 * ]|
 */
#include "legba-elements.h"

#include <gst/video/video.h>
#include <legba/legba.h>

GST_DEBUG_CATEGORY_STATIC (legba_video_enc_debug);
#define GST_CAT_DEFAULT legba_video_enc_debug

#define GST_TYPE_LEGBA_VIDEO_ENC (gst_legba_video_enc_get_type ())
G_DECLARE_FINAL_TYPE (GstLegbaVideoEnc, gst_legba_video_enc, GST,
    LEGBA_VIDEO_ENC, GstBin);

enum
{
  PROP_0,
  PROP_CODEC,
  PROP_ENCODER_FACTORY,
  PROP_CURRENT_ENCODER,
  PROP_PREFER,
  PROP_BITRATE,
  PROP_MAX_BITRATE,
  PROP_KEYFRAME_INTERVAL,
  PROP_SPEED,
  PROP_PROOF_TIMEOUT,
  PROP_DEGRADATION_PREFERENCE,
  PROP_STATS,
};

#define DEFAULT_CODEC LEGBA_VIDEO_CODEC_H264
#define DEFAULT_ENCODER_FACTORY NULL
#define DEFAULT_PREFER LEGBA_ENCODER_PREFER_AUTO
#define DEFAULT_BITRATE 1000000
#define DEFAULT_MAX_BITRATE 0
#define DEFAULT_KEYFRAME_INTERVAL 0
#define DEFAULT_SPEED LEGBA_ENCODER_SPEED_FASTEST
#define DEFAULT_PROOF_TIMEOUT LEGBA_ENCODER_DEFAULT_PROOF_TIMEOUT_MS
#define DEFAULT_DEGRADATION_PREFERENCE LEGBA_DEGRADATION_PREFERENCE_BALANCED

struct _GstLegbaVideoEnc
{
  GstBin parent;

  GstPad *sinkpad;              /* ghost of convert's sink */
  GstPad *srcpad;               /* ghost of filter's src */
  GstElement *convert;
  GstElement *scale;
  GstElement *size_filter;      /* the size sent: NULL caps for the input's */
  GstElement *filter;
  const char *missing;          /* a helper element's factory not found */

  /* object lock */
  LegbaVideoCodec codec;
  gchar *forced_factory;
  LegbaEncoderPrefer prefer;
  LegbaEncoderSettings settings;
  guint network_bitrate;        /* 0: none asked for */
  guint proof_timeout;
  gchar *current;
  GstElement *encoder;          /* also read by handle_message */
  GstCaps *negotiated;          /* first output caps, pinned for fallback */
  GError *failure;              /* the encoder posted an error */
  guint64 frames_in;
  guint64 frames_out;
  guint64 bytes_out;
  guint fallbacks;
  guint min_bitrate;            /* 0: the family has no frame-drop switch */
  gboolean frame_dropping;      /* switched on: the cap is below min_bitrate */
  GMutex scale_lock;            /* one size decision at a time */
  LegbaDegradationPreference degradation;
  guint scaling_floor;          /* at the input size; 0: never scaled */
  gint in_width, in_height;     /* of raw_caps */
  gint out_width, out_height;   /* sent to the encoder */

  /* written on the streaming thread (sink pad stream lock) under the
   * object lock, read under either */
  GstCaps *raw_caps;
  GstCaps *out_caps;            /* what the encoder must produce */
};

G_DEFINE_FINAL_TYPE (GstLegbaVideoEnc, gst_legba_video_enc, GST_TYPE_BIN);
GST_ELEMENT_REGISTER_DEFINE (legbavideoenc, "legbavideoenc", GST_RANK_NONE,
    GST_TYPE_LEGBA_VIDEO_ENC);

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS,
    GST_STATIC_CAPS (GST_VIDEO_CAPS_MAKE (GST_VIDEO_FORMATS_ALL)));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("video/x-h264, stream-format=(string)byte-stream, "
        "alignment=(string)au; video/x-vp8; video/x-vp9; video/x-av1"));

/* The settings the encoder is given: the properties, with the bitrate and
 * its cap lowered to what the network carries when downstream said so
 * (the `legba-target-bitrate` event). Called with the object lock. */
static LegbaEncoderSettings
effective_settings (GstLegbaVideoEnc * self)
{
  LegbaEncoderSettings settings = self->settings;
  guint net = self->network_bitrate;

  if (net != 0) {
    settings.bitrate = MIN (settings.bitrate, net);
    if (settings.max_bitrate != 0)
      settings.max_bitrate = MAX (MIN (settings.max_bitrate, net),
          settings.bitrate);
  }
  return settings;
}

/* ---- output caps ---- */

/* Constrained-baseline unless downstream accepts only other profiles:
 * "constrained-baseline or as negotiated". */
static GstCaps *
choose_output_caps (GstLegbaVideoEnc * self, LegbaVideoCodec codec)
{
  g_autoptr (GstCaps) preferred = legba_video_codec_get_output_caps (codec);
  g_autoptr (GstCaps) peer = gst_pad_peer_query_caps (self->srcpad, NULL);
  g_autoptr (GstCaps) wanted = NULL;
  g_autoptr (GstCaps) any_profile = NULL;

  if (!peer || gst_caps_is_any (peer))
    return g_steal_pointer (&preferred);
  wanted = gst_caps_intersect (preferred, peer);
  if (!gst_caps_is_empty (wanted))
    return g_steal_pointer (&preferred);
  any_profile = gst_caps_copy (preferred);
  gst_structure_remove_field (gst_caps_get_structure (any_profile, 0),
      "profile");
  gst_caps_replace (&wanted, NULL);
  wanted = gst_caps_intersect (peer, any_profile);
  if (gst_caps_is_empty (wanted))
    return g_steal_pointer (&preferred);
  return gst_caps_fixate (g_steal_pointer (&wanted));
}

/* The negotiated caps, reduced to what another encoder must match: codec,
 * stream format, alignment, profile and level. */
static GstCaps *
pinned_caps (GstCaps * negotiated)
{
  GstStructure *s = gst_structure_copy (gst_caps_get_structure (negotiated,
          0));
  static const gchar *const keep[] = { "stream-format", "alignment",
    "profile", "level"
  };
  GstStructure *out = gst_structure_new_empty (gst_structure_get_name (s));

  for (guint i = 0; i < G_N_ELEMENTS (keep); i++) {
    const GValue *v = gst_structure_get_value (s, keep[i]);
    if (v)
      gst_structure_set_value (out, keep[i], v);
  }
  gst_structure_free (s);
  return gst_caps_new_full (out, NULL);
}

/* ---- announcing ---- */

static void
post_selected (GstLegbaVideoEnc * self, LegbaEncoderProof * proof,
    GPtrArray * rejected, const gchar * reason, gboolean hardware,
    const gchar * family)
{
  GValue list = G_VALUE_INIT;
  GstStructure *s;

  g_value_init (&list, GST_TYPE_LIST);
  for (guint i = 0; rejected && i < rejected->len; i++) {
    GValue item = G_VALUE_INIT;
    g_value_init (&item, G_TYPE_STRING);
    g_value_take_string (&item,
        legba_encoder_proof_to_string (g_ptr_array_index (rejected, i)));
    gst_value_list_append_and_take_value (&list, &item);
  }
  s = gst_structure_new ("legba-encoder-selected",
      "factory", G_TYPE_STRING, legba_encoder_proof_get_factory_name (proof),
      "family", G_TYPE_STRING, family ? family : "",
      "hardware", G_TYPE_BOOLEAN, hardware,
      "reason", G_TYPE_STRING, reason, NULL);
  gst_structure_take_value (s, "rejected", &list);
  gst_element_post_message (GST_ELEMENT (self),
      gst_message_new_element (GST_OBJECT (self), s));
}

/* Switches the encoder's frame dropping for @caps (families where it is
 * a switch: on only when the cap cannot carry the size and frame rate) and
 * says so. */
static void
decide_frame_dropping (GstLegbaVideoEnc * self, GstElement * encoder,
    GstCaps * caps)
{
  LegbaEncoderSettings settings;
  GstStructure *s;
  guint needed, cap;
  gboolean drop;

  GST_OBJECT_LOCK (self);
  settings = effective_settings (self);
  GST_OBJECT_UNLOCK (self);
  drop = legba_encoder_apply_frame_dropping (encoder, &settings, caps, &needed);
  GST_OBJECT_LOCK (self);
  self->min_bitrate = needed;
  self->frame_dropping = drop;
  GST_OBJECT_UNLOCK (self);
  if (!needed)
    return;
  cap = settings.max_bitrate ? settings.max_bitrate : settings.bitrate;
  if (drop)
    GST_WARNING_OBJECT (self, "the cap of %u bit/s is below the %u bit/s "
        "%" GST_PTR_FORMAT " needs: %s drops frames to hold it", cap, needed,
        caps, GST_ELEMENT_NAME (encoder));
  else
    GST_INFO_OBJECT (self, "the cap of %u bit/s carries %u bit/s: no frame "
        "dropping", cap, needed);
  s = gst_structure_new ("legba-encoder-frame-dropping",
      "factory", G_TYPE_STRING,
      GST_OBJECT_NAME (gst_element_get_factory (encoder)),
      "frame-dropping", G_TYPE_BOOLEAN, drop,
      "cap", G_TYPE_UINT, cap, "min-bitrate", G_TYPE_UINT, needed, NULL);
  gst_element_post_message (GST_ELEMENT (self),
      gst_message_new_element (GST_OBJECT (self), s));
}

/* ---- scaling ---- */

/* @raw at @width x @height: the caps the encoder takes. */
static GstCaps *
sized_caps (GstCaps * raw, gint width, gint height)
{
  GstCaps *caps = gst_caps_copy (raw);

  gst_caps_set_simple (caps, "width", G_TYPE_INT, width, "height", G_TYPE_INT,
      height, NULL);
  return caps;
}

/* What the size filter lets through for @width x @height: that size, the
 * input's pixel aspect ratio (the ladder keeps the aspect ratio), any
 * format and frame rate. */
static GstCaps *
size_filter_caps (GstCaps * raw, gint width, gint height)
{
  GstStructure *in = gst_caps_get_structure (raw, 0);
  gint par_n = 1, par_d = 1;

  gst_structure_get_fraction (in, "pixel-aspect-ratio", &par_n, &par_d);
  return gst_caps_new_simple ("video/x-raw", "width", G_TYPE_INT, width,
      "height", G_TYPE_INT, height, "pixel-aspect-ratio", GST_TYPE_FRACTION,
      par_n, par_d, NULL);
}

/* Decides the size @encoder is sent, for the input caps and the bitrate in
 * force, sets the size filter, and says so when it changes. @fresh: the
 * encoder or the input caps are new, so nothing is sent at a size yet
 * (no hysteresis). Returns the raw caps the encoder will take, or NULL
 * before input caps. */
static GstCaps *
decide_size (GstLegbaVideoEnc * self, GstElement * encoder, gboolean fresh)
{
  g_autoptr (GstCaps) raw = NULL;
  g_autoptr (GstCaps) out_floor_caps = NULL;
  LegbaEncoderSettings settings;
  LegbaDegradationPreference degradation;
  gint in_w = 0, in_h = 0, cur_w, cur_h, w, h;
  guint target, cap, floor;
  gboolean scaling, changed;
  GstStructure *in, *s;

  g_mutex_lock (&self->scale_lock);
  GST_OBJECT_LOCK (self);
  raw = self->raw_caps ? gst_caps_ref (self->raw_caps) : NULL;
  degradation = self->degradation;
  settings = effective_settings (self);
  cap = settings.max_bitrate ? settings.max_bitrate : settings.bitrate;
  target = MIN (settings.bitrate, cap);
  cur_w = fresh ? 0 : self->out_width;
  cur_h = fresh ? 0 : self->out_height;
  GST_OBJECT_UNLOCK (self);
  if (!raw || gst_caps_get_size (raw) == 0) {
    g_mutex_unlock (&self->scale_lock);
    return NULL;
  }
  in = gst_caps_get_structure (raw, 0);
  gst_structure_get_int (in, "width", &in_w);
  gst_structure_get_int (in, "height", &in_h);

  floor = legba_encoder_get_scaling_floor (encoder, raw);
  scaling = floor > 0
      && degradation != LEGBA_DEGRADATION_PREFERENCE_MAINTAIN_RESOLUTION;
  w = in_w;
  h = in_h;
  if (scaling)
    legba_encoder_choose_size (encoder, raw, target, cur_w, cur_h, &w, &h);
  GST_OBJECT_LOCK (self);
  changed = w != self->out_width || h != self->out_height
      || in_w != self->in_width || in_h != self->in_height
      || floor != self->scaling_floor;
  self->scaling_floor = floor;
  self->in_width = in_w;
  self->in_height = in_h;
  self->out_width = w;
  self->out_height = h;
  GST_OBJECT_UNLOCK (self);

  if (changed || fresh) {
    g_autoptr (GstCaps) filter = scaling ? size_filter_caps (raw, w, h) : NULL;
    g_object_set (self->size_filter, "caps", filter, NULL);
  }
  g_mutex_unlock (&self->scale_lock);
  if (!floor || !changed)
    return sized_caps (raw, w, h);

  out_floor_caps = sized_caps (raw, w, h);
  if (w != in_w || h != in_h)
    GST_WARNING_OBJECT (self, "the bitrate of %u bit/s is below the %u bit/s "
        "%s needs at %dx%d: sending %dx%d (%u bit/s needed)", target, floor,
        GST_ELEMENT_NAME (encoder), in_w, in_h, w, h,
        legba_encoder_get_scaling_floor (encoder, out_floor_caps));
  else
    GST_INFO_OBJECT (self, "%dx%d sent at full size (bitrate %u bit/s, "
        "%u bit/s needed, degradation-preference %s)", in_w, in_h, target,
        floor, scaling ? "allows scaling" : "maintain-resolution");
  s = gst_structure_new ("legba-encoder-scaling",
      "factory", G_TYPE_STRING,
      GST_OBJECT_NAME (gst_element_get_factory (encoder)),
      "scaled", G_TYPE_BOOLEAN, w != in_w || h != in_h,
      "input-width", G_TYPE_INT, in_w, "input-height", G_TYPE_INT, in_h,
      "output-width", G_TYPE_INT, w, "output-height", G_TYPE_INT, h,
      "bitrate", G_TYPE_UINT, target, "cap", G_TYPE_UINT, cap,
      "floor", G_TYPE_UINT, floor,
      "output-floor", G_TYPE_UINT,
      legba_encoder_get_scaling_floor (encoder, out_floor_caps), NULL);
  gst_element_post_message (GST_ELEMENT (self),
      gst_message_new_element (GST_OBJECT (self), s));
  return g_steal_pointer (&out_floor_caps);
}

/* ---- installing an encoder ---- */

static void
remove_encoder (GstLegbaVideoEnc * self)
{
  GstElement *old;

  GST_OBJECT_LOCK (self);
  old = g_steal_pointer (&self->encoder);
  GST_OBJECT_UNLOCK (self);
  if (!old)
    return;
  gst_element_set_locked_state (old, TRUE);
  gst_element_set_state (old, GST_STATE_NULL);
  gst_element_unlink_many (self->size_filter, old, self->filter, NULL);
  gst_bin_remove (GST_BIN (self), old);
  gst_object_unref (old);
}

static gboolean
install_encoder (GstLegbaVideoEnc * self, const gchar * factory,
    GError ** error)
{
  LegbaEncoderSettings settings;
  GstElement *encoder;
  g_autoptr (GstCaps) sized = NULL;

  GST_OBJECT_LOCK (self);
  settings = effective_settings (self);
  GST_OBJECT_UNLOCK (self);

  remove_encoder (self);
  encoder = legba_encoder_make (factory, &settings, error);
  if (!encoder)
    return FALSE;
  sized = decide_size (self, encoder, TRUE);
  decide_frame_dropping (self, encoder, sized);
  g_object_set (self->filter, "caps", self->out_caps, NULL);
  gst_bin_add (GST_BIN (self), encoder);
  if (!gst_element_link_many (self->size_filter, encoder, self->filter, NULL)) {
    gst_bin_remove (GST_BIN (self), encoder);
    g_set_error (error, LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_CAPS,
        "cannot link %s between videoscale and the output caps", factory);
    return FALSE;
  }
  GST_OBJECT_LOCK (self);
  self->encoder = gst_object_ref (encoder);
  g_free (self->current);
  self->current = g_strdup (factory);
  g_clear_error (&self->failure);
  GST_OBJECT_UNLOCK (self);
  gst_element_sync_state_with_parent (encoder);
  g_object_notify (G_OBJECT (self), "current-encoder");
  return TRUE;
}

static LegbaEncoderProof *
select_encoder (GstLegbaVideoEnc * self, GPtrArray ** rejected, GError ** error)
{
  LegbaVideoCodec codec;
  LegbaEncoderPrefer prefer;
  g_autofree gchar *forced = NULL;
  guint timeout;

  GST_OBJECT_LOCK (self);
  codec = self->codec;
  prefer = self->prefer;
  forced = g_strdup (self->forced_factory);
  timeout = self->proof_timeout;
  if (self->negotiated)
    gst_caps_replace (&self->out_caps, self->negotiated);
  GST_OBJECT_UNLOCK (self);

  return legba_encoder_select (codec, self->raw_caps, self->out_caps, prefer,
      forced, timeout, rejected, error);
}

/* Selects, installs and announces an encoder for self->raw_caps. */
static gboolean
choose_encoder (GstLegbaVideoEnc * self, const gchar * reason, GError ** error)
{
  g_autoptr (GPtrArray) rejected = NULL;
  g_autoptr (LegbaEncoderProof) proof = NULL;
  g_autoptr (GPtrArray) candidates = NULL;
  const gchar *factory;
  const gchar *family = NULL;
  gboolean hardware = FALSE;

  proof = select_encoder (self, &rejected, error);
  if (!proof)
    return FALSE;
  factory = legba_encoder_proof_get_factory_name (proof);
  if (!install_encoder (self, factory, error))
    return FALSE;
  candidates = legba_encoder_list_candidates (self->codec, self->prefer,
      factory);
  if (candidates->len > 0) {
    LegbaEncoderCandidate *c = g_ptr_array_index (candidates, 0);
    family = legba_encoder_candidate_get_family (c);
    hardware = legba_encoder_candidate_is_hardware (c);
  }
  GST_INFO_OBJECT (self, "%s encoder: %s (%s)", reason, factory,
      family ? family : "unknown family");
  post_selected (self, proof, rejected, reason, hardware, family);
  return TRUE;
}

static gboolean
handle_caps (GstLegbaVideoEnc * self, GstCaps * caps)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *current = NULL;
  gboolean have_encoder;

  if (self->raw_caps && gst_caps_is_equal (self->raw_caps, caps))
    return TRUE;
  GST_OBJECT_LOCK (self);
  gst_caps_replace (&self->raw_caps, caps);
  have_encoder = self->encoder != NULL;
  current = g_strdup (self->current);
  GST_OBJECT_UNLOCK (self);

  if (have_encoder) {
    g_autoptr (LegbaEncoderProof) proof = legba_encoder_prove (current,
        self->codec, caps, self->out_caps, self->proof_timeout);
    if (legba_encoder_proof_is_ok (proof)) {
      GstElement *encoder;

      GST_OBJECT_LOCK (self);
      encoder = self->encoder ? gst_object_ref (self->encoder) : NULL;
      GST_OBJECT_UNLOCK (self);
      if (encoder) {
        g_autoptr (GstCaps) sized = decide_size (self, encoder, TRUE);

        decide_frame_dropping (self, encoder, sized);
        gst_object_unref (encoder);
      }
      return TRUE;
    }
    if (choose_encoder (self, "caps-changed", &error))
      return TRUE;
  } else {
    GstCaps *out = choose_output_caps (self, self->codec);
    gst_caps_take (&self->out_caps, out);
    if (choose_encoder (self, "selected", &error))
      return TRUE;
  }
  GST_ELEMENT_ERROR (self, STREAM, ENCODE,
      ("No %s encoder works on this machine",
          legba_video_codec_to_string (self->codec)), ("%s", error->message));
  return FALSE;
}

/* Mid-stream fallback: the failed factory is recorded for the process, the
 * next candidate that proves it can produce the negotiated caps replaces
 * it, and a key frame is requested from it. */
static gboolean
fall_back (GstLegbaVideoEnc * self)
{
  g_autoptr (GError) failure = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree gchar *failed = NULL;
  g_autoptr (GstPad) encoder_sink = NULL;

  GST_OBJECT_LOCK (self);
  failure = g_steal_pointer (&self->failure);
  failed = g_strdup (self->current);
  GST_OBJECT_UNLOCK (self);
  if (!failure || !failed)
    return FALSE;

  legba_encoder_record_failure (failed, failure);
  if (!choose_encoder (self, "fallback", &error)) {
    GST_ELEMENT_ERROR (self, STREAM, ENCODE,
        ("Encoder %s failed and no other encoder can take over", failed),
        ("%s; %s", failure->message, error->message));
    return FALSE;
  }
  GST_OBJECT_LOCK (self);
  self->fallbacks++;
  encoder_sink = gst_element_get_static_pad (self->encoder, "sink");
  GST_OBJECT_UNLOCK (self);
  gst_pad_send_event (encoder_sink,
      gst_video_event_new_downstream_force_key_unit (GST_CLOCK_TIME_NONE,
          GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE, TRUE, 0));
  GST_ELEMENT_WARNING (self, STREAM, ENCODE,
      ("Encoder %s failed; switched to %s", failed, self->current),
      ("%s", failure->message));
  return TRUE;
}

/* ---- pads ---- */

static gboolean
encoder_failed (GstLegbaVideoEnc * self)
{
  gboolean failed;

  GST_OBJECT_LOCK (self);
  failed = self->failure != NULL;
  GST_OBJECT_UNLOCK (self);
  return failed;
}

static GstFlowReturn
gst_legba_video_enc_chain (GstPad * pad, GstObject * parent, GstBuffer * buffer)
{
  GstLegbaVideoEnc *self = GST_LEGBA_VIDEO_ENC (parent);
  GstFlowReturn ret;

  GST_OBJECT_LOCK (self);
  self->frames_in++;
  GST_OBJECT_UNLOCK (self);
  if (encoder_failed (self) && !fall_back (self)) {
    gst_buffer_unref (buffer);
    return GST_FLOW_ERROR;
  }
  ret = gst_proxy_pad_chain_default (pad, parent, gst_buffer_ref (buffer));
  if (ret != GST_FLOW_OK && ret != GST_FLOW_FLUSHING && encoder_failed (self)) {
    if (fall_back (self))
      ret = gst_proxy_pad_chain_default (pad, parent, gst_buffer_ref (buffer));
    else
      ret = GST_FLOW_ERROR;
  }
  gst_buffer_unref (buffer);
  return ret;
}

static GstFlowReturn
gst_legba_video_enc_chain_list (GstPad * pad, GstObject * parent,
    GstBufferList * list)
{
  GstFlowReturn ret = GST_FLOW_OK;
  guint n = gst_buffer_list_length (list);

  for (guint i = 0; i < n && ret == GST_FLOW_OK; i++)
    ret = gst_legba_video_enc_chain (pad, parent,
        gst_buffer_ref (gst_buffer_list_get (list, i)));
  gst_buffer_list_unref (list);
  return ret;
}

static gboolean
gst_legba_video_enc_sink_event (GstPad * pad, GstObject * parent,
    GstEvent * event)
{
  GstLegbaVideoEnc *self = GST_LEGBA_VIDEO_ENC (parent);

  if (GST_EVENT_TYPE (event) == GST_EVENT_CAPS) {
    GstCaps *caps;

    gst_event_parse_caps (event, &caps);
    if (!handle_caps (self, caps)) {
      gst_event_unref (event);
      return FALSE;
    }
  }
  return gst_pad_event_default (pad, parent, event);
}

/* Counts the encoded output and pins the negotiated caps once known. */
static GstPadProbeReturn
output_probe (GstPad * pad, GstPadProbeInfo * info, gpointer user_data)
{
  GstLegbaVideoEnc *self = user_data;

  if (info->type & GST_PAD_PROBE_TYPE_BUFFER) {
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER (info);
    GST_OBJECT_LOCK (self);
    self->frames_out++;
    self->bytes_out += gst_buffer_get_size (buffer);
    GST_OBJECT_UNLOCK (self);
  } else if (GST_EVENT_TYPE (GST_PAD_PROBE_INFO_EVENT (info)) == GST_EVENT_CAPS) {
    GstCaps *caps;

    gst_event_parse_caps (GST_PAD_PROBE_INFO_EVENT (info), &caps);
    GST_OBJECT_LOCK (self);
    if (!self->negotiated) {
      self->negotiated = pinned_caps (caps);
      GST_DEBUG_OBJECT (self, "output pinned to %" GST_PTR_FORMAT,
          self->negotiated);
    }
    GST_OBJECT_UNLOCK (self);
  }
  return GST_PAD_PROBE_OK;
}

/* ---- bin ---- */

static gboolean
from_encoder (GstLegbaVideoEnc * self, GstObject * src)
{
  gboolean ours;

  GST_OBJECT_LOCK (self);
  ours = self->encoder && (src == GST_OBJECT (self->encoder)
      || gst_object_has_as_ancestor (src, GST_OBJECT (self->encoder)));
  GST_OBJECT_UNLOCK (self);
  return ours;
}

/* An error of the encoder does not fail the pipeline: it is kept for the
 * streaming thread, which falls back to the next candidate. */
static void
gst_legba_video_enc_handle_message (GstBin * bin, GstMessage * message)
{
  GstLegbaVideoEnc *self = GST_LEGBA_VIDEO_ENC (bin);

  if (GST_MESSAGE_TYPE (message) == GST_MESSAGE_ERROR
      && from_encoder (self, GST_MESSAGE_SRC (message))) {
    GError *error = NULL;
    g_autofree gchar *debug = NULL;

    gst_message_parse_error (message, &error, &debug);
    GST_WARNING_OBJECT (self, "encoder error: %s (%s)", error->message,
        debug ? debug : "");
    GST_OBJECT_LOCK (self);
    if (!self->failure)
      self->failure = g_steal_pointer (&error);
    GST_OBJECT_UNLOCK (self);
    g_clear_error (&error);
    gst_message_unref (message);
    return;
  }
  GST_BIN_CLASS (gst_legba_video_enc_parent_class)->handle_message (bin,
      message);
}

static GstStateChangeReturn
gst_legba_video_enc_change_state (GstElement * element,
    GstStateChange transition)
{
  GstLegbaVideoEnc *self = GST_LEGBA_VIDEO_ENC (element);
  GstStateChangeReturn ret;

  if (transition == GST_STATE_CHANGE_NULL_TO_READY && self->missing != NULL) {
    GST_ELEMENT_ERROR (self, CORE, MISSING_PLUGIN, ("legbavideoenc needs the "
            "%s element, which is not installed", self->missing), (NULL));
    return GST_STATE_CHANGE_FAILURE;
  }
  if (transition == GST_STATE_CHANGE_READY_TO_PAUSED) {
    GST_OBJECT_LOCK (self);
    self->frames_in = self->frames_out = self->bytes_out = 0;
    self->min_bitrate = 0;
    self->frame_dropping = FALSE;
    self->scaling_floor = 0;
    self->in_width = self->in_height = self->out_width = self->out_height = 0;
    GST_OBJECT_UNLOCK (self);
  }
  ret = GST_ELEMENT_CLASS (gst_legba_video_enc_parent_class)->change_state
      (element, transition);
  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY) {
    remove_encoder (self);
    gst_clear_caps (&self->out_caps);
    g_object_set (self->size_filter, "caps", NULL, NULL);
    GST_OBJECT_LOCK (self);
    gst_clear_caps (&self->raw_caps);
    gst_clear_caps (&self->negotiated);
    g_clear_error (&self->failure);
    GST_OBJECT_UNLOCK (self);
  }
  return ret;
}

/* ---- properties ---- */

static void
apply_bitrate (GstLegbaVideoEnc * self)
{
  GstElement *encoder;
  LegbaEncoderSettings settings;
  guint bitrate, max_bitrate, min_bitrate;
  gboolean dropping;
  gint old_w, old_h, new_w, new_h;
  g_autoptr (GstCaps) sized = NULL;

  GST_OBJECT_LOCK (self);
  encoder = self->encoder ? gst_object_ref (self->encoder) : NULL;
  settings = effective_settings (self);
  bitrate = settings.bitrate;
  max_bitrate = settings.max_bitrate;
  min_bitrate = self->min_bitrate;
  dropping = self->frame_dropping;
  GST_OBJECT_UNLOCK (self);
  if (!encoder)
    return;
  if (!legba_encoder_set_bitrate (encoder, bitrate, max_bitrate))
    GST_WARNING_OBJECT (self, "%s cannot change its bitrate while playing; "
        "the new bitrate applies from the next start",
        GST_ELEMENT_NAME (encoder));
  GST_OBJECT_LOCK (self);
  old_w = self->out_width;
  old_h = self->out_height;
  GST_OBJECT_UNLOCK (self);
  sized = decide_size (self, encoder, FALSE);
  GST_OBJECT_LOCK (self);
  new_w = self->out_width;
  new_h = self->out_height;
  GST_OBJECT_UNLOCK (self);
  if (sized && (new_w != old_w || new_h != old_h)) {
    /* new caps are on their way to the encoder: its frame-drop switch
     * follows them */
    decide_frame_dropping (self, encoder, sized);
  } else if (min_bitrate
      && ((max_bitrate ? max_bitrate : bitrate) < min_bitrate)
      != dropping)
    GST_WARNING_OBJECT (self, "%s keeps frame dropping %s until the next "
        "caps (the new cap of %u bit/s is %s the %u bit/s its caps need)",
        GST_ELEMENT_NAME (encoder), dropping ? "on" : "off",
        max_bitrate ? max_bitrate : bitrate, dropping ? "above" : "below",
        min_bitrate);
  gst_object_unref (encoder);
}

/* `legba-target-bitrate` (upstream, custom): what the network carries,
 * from legbaroom's bandwidth estimation; 0 lifts the limit. */
static GstPadProbeReturn
target_bitrate_probe (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  GstLegbaVideoEnc *self = data;
  GstEvent *event = GST_PAD_PROBE_INFO_EVENT (info);
  const GstStructure *s = gst_event_get_structure (event);
  guint bitrate = 0;
  gboolean changed;

  if (GST_EVENT_TYPE (event) != GST_EVENT_CUSTOM_UPSTREAM || s == NULL
      || !gst_structure_has_name (s, "legba-target-bitrate")
      || !gst_structure_get_uint (s, "bitrate", &bitrate))
    return GST_PAD_PROBE_OK;
  GST_OBJECT_LOCK (self);
  changed = self->network_bitrate != bitrate;
  self->network_bitrate = bitrate;
  GST_OBJECT_UNLOCK (self);
  if (changed) {
    GST_DEBUG_OBJECT (self, "the network carries %u bit/s", bitrate);
    apply_bitrate (self);
  }
  return GST_PAD_PROBE_DROP;
}

static GstStructure *
get_stats (GstLegbaVideoEnc * self)
{
  GstStructure *s;

  GST_OBJECT_LOCK (self);
  s = gst_structure_new ("legba-video-enc-stats",
      "encoder", G_TYPE_STRING, self->current ? self->current : "",
      "frames-in", G_TYPE_UINT64, self->frames_in,
      "frames-out", G_TYPE_UINT64, self->frames_out,
      "bytes-out", G_TYPE_UINT64, self->bytes_out,
      "fallbacks", G_TYPE_UINT, self->fallbacks,
      "frame-dropping", G_TYPE_BOOLEAN, self->frame_dropping,
      "min-bitrate", G_TYPE_UINT, self->min_bitrate,
      "network-bitrate", G_TYPE_UINT, self->network_bitrate,
      "scaled", G_TYPE_BOOLEAN, self->out_width != self->in_width
      || self->out_height != self->in_height,
      "input-width", G_TYPE_INT, self->in_width,
      "input-height", G_TYPE_INT, self->in_height,
      "output-width", G_TYPE_INT, self->out_width,
      "output-height", G_TYPE_INT, self->out_height,
      "scaling-floor", G_TYPE_UINT, self->scaling_floor, NULL);
  GST_OBJECT_UNLOCK (self);
  return s;
}

static void
gst_legba_video_enc_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstLegbaVideoEnc *self = GST_LEGBA_VIDEO_ENC (object);
  gboolean bitrate_changed = FALSE;

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_CODEC:
      self->codec = g_value_get_enum (value);
      break;
    case PROP_ENCODER_FACTORY:
      g_free (self->forced_factory);
      self->forced_factory = g_value_dup_string (value);
      break;
    case PROP_PREFER:
      self->prefer = g_value_get_enum (value);
      break;
    case PROP_BITRATE:
      self->settings.bitrate = g_value_get_uint (value);
      bitrate_changed = TRUE;
      break;
    case PROP_MAX_BITRATE:
      self->settings.max_bitrate = g_value_get_uint (value);
      bitrate_changed = TRUE;
      break;
    case PROP_KEYFRAME_INTERVAL:
      self->settings.keyframe_interval = g_value_get_uint (value);
      break;
    case PROP_SPEED:
      self->settings.speed = g_value_get_enum (value);
      break;
    case PROP_PROOF_TIMEOUT:
      self->proof_timeout = g_value_get_uint (value);
      break;
    case PROP_DEGRADATION_PREFERENCE:
      self->degradation = g_value_get_enum (value);
      bitrate_changed = TRUE;
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
  if (bitrate_changed)
    apply_bitrate (self);
}

static void
gst_legba_video_enc_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstLegbaVideoEnc *self = GST_LEGBA_VIDEO_ENC (object);

  if (prop_id == PROP_STATS) {
    g_value_take_boxed (value, get_stats (self));
    return;
  }
  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_CODEC:
      g_value_set_enum (value, self->codec);
      break;
    case PROP_ENCODER_FACTORY:
      g_value_set_string (value, self->forced_factory);
      break;
    case PROP_CURRENT_ENCODER:
      g_value_set_string (value, self->current);
      break;
    case PROP_PREFER:
      g_value_set_enum (value, self->prefer);
      break;
    case PROP_BITRATE:
      g_value_set_uint (value, self->settings.bitrate);
      break;
    case PROP_MAX_BITRATE:
      g_value_set_uint (value, self->settings.max_bitrate);
      break;
    case PROP_KEYFRAME_INTERVAL:
      g_value_set_uint (value, self->settings.keyframe_interval);
      break;
    case PROP_SPEED:
      g_value_set_enum (value, self->settings.speed);
      break;
    case PROP_PROOF_TIMEOUT:
      g_value_set_uint (value, self->proof_timeout);
      break;
    case PROP_DEGRADATION_PREFERENCE:
      g_value_set_enum (value, self->degradation);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_legba_video_enc_finalize (GObject * object)
{
  GstLegbaVideoEnc *self = GST_LEGBA_VIDEO_ENC (object);

  g_free (self->forced_factory);
  g_free (self->current);
  g_clear_error (&self->failure);
  gst_clear_object (&self->encoder);
  gst_clear_caps (&self->raw_caps);
  gst_clear_caps (&self->out_caps);
  gst_clear_caps (&self->negotiated);
  g_mutex_clear (&self->scale_lock);
  G_OBJECT_CLASS (gst_legba_video_enc_parent_class)->finalize (object);
}

/* A helper element (gst-plugins-base's videoconvert and videoscale,
 * core's capsfilter), or NULL with the factory kept in self->missing. */
static GstElement *
make_part (GstLegbaVideoEnc * self, const char *factory, const char *name)
{
  GstElement *part = gst_element_factory_make (factory, name);

  if (part == NULL && self->missing == NULL)
    self->missing = factory;
  return part;
}

/* Without its helper elements the encoder has pads that lead nowhere and
 * refuses to leave NULL, saying which element is missing
 * (gst_legba_video_enc_change_state()). */
static void
init_without_parts (GstLegbaVideoEnc * self)
{
  GstElementClass *klass = GST_ELEMENT_GET_CLASS (self);
  GstElement **parts[] = { &self->convert, &self->scale, &self->size_filter,
    &self->filter
  };

  for (guint i = 0; i < G_N_ELEMENTS (parts); i++)
    if (*parts[i] != NULL)
      gst_object_unref (gst_object_ref_sink (g_steal_pointer (parts[i])));
  self->sinkpad = gst_ghost_pad_new_no_target_from_template ("sink",
      gst_element_class_get_pad_template (klass, "sink"));
  self->srcpad = gst_ghost_pad_new_no_target_from_template ("src",
      gst_element_class_get_pad_template (klass, "src"));
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);
}

static void
gst_legba_video_enc_init (GstLegbaVideoEnc * self)
{
  g_autoptr (GstPad) convert_sink = NULL;
  g_autoptr (GstPad) filter_src = NULL;

  self->codec = DEFAULT_CODEC;
  self->prefer = DEFAULT_PREFER;
  legba_encoder_settings_init (&self->settings);
  self->settings.bitrate = DEFAULT_BITRATE;
  self->settings.max_bitrate = DEFAULT_MAX_BITRATE;
  self->settings.keyframe_interval = DEFAULT_KEYFRAME_INTERVAL;
  self->settings.speed = DEFAULT_SPEED;
  self->proof_timeout = DEFAULT_PROOF_TIMEOUT;
  self->degradation = DEFAULT_DEGRADATION_PREFERENCE;
  g_mutex_init (&self->scale_lock);

  self->convert = make_part (self, "videoconvert", "convert");
  self->scale = make_part (self, "videoscale", "scale");
  self->size_filter = make_part (self, "capsfilter", "size");
  self->filter = make_part (self, "capsfilter", "output");
  if (self->missing != NULL) {
    init_without_parts (self);
    return;
  }
  gst_bin_add_many (GST_BIN (self), self->convert, self->scale,
      self->size_filter, self->filter, NULL);
  gst_element_link_many (self->convert, self->scale, self->size_filter, NULL);

  convert_sink = gst_element_get_static_pad (self->convert, "sink");
  self->sinkpad = gst_ghost_pad_new_from_template ("sink", convert_sink,
      gst_element_class_get_pad_template (GST_ELEMENT_GET_CLASS (self),
          "sink"));
  gst_pad_set_chain_function (self->sinkpad, gst_legba_video_enc_chain);
  gst_pad_set_chain_list_function (self->sinkpad,
      gst_legba_video_enc_chain_list);
  gst_pad_set_event_function (self->sinkpad, gst_legba_video_enc_sink_event);
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);

  filter_src = gst_element_get_static_pad (self->filter, "src");
  self->srcpad = gst_ghost_pad_new_from_template ("src", filter_src,
      gst_element_class_get_pad_template (GST_ELEMENT_GET_CLASS (self), "src"));
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);
  gst_pad_add_probe (filter_src, GST_PAD_PROBE_TYPE_BUFFER |
      GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, output_probe, self, NULL);
  gst_pad_add_probe (self->srcpad, GST_PAD_PROBE_TYPE_EVENT_UPSTREAM,
      target_bitrate_probe, self, NULL);
}

static void
install_properties (GObjectClass * gobject_class)
{
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;

  g_object_class_install_property (gobject_class, PROP_CODEC,
      g_param_spec_enum ("codec", "Codec", "Video codec to produce",
          LEGBA_TYPE_VIDEO_CODEC, DEFAULT_CODEC, rw | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_ENCODER_FACTORY,
      g_param_spec_string ("encoder-factory", "Encoder factory",
          "Use only this encoder factory (it is still proved); NULL to "
          "select among all candidates", DEFAULT_ENCODER_FACTORY,
          rw | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_CURRENT_ENCODER,
      g_param_spec_string ("current-encoder", "Current encoder",
          "Factory name of the encoder in use, NULL before caps arrive",
          NULL, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
  g_object_class_install_property (gobject_class, PROP_PREFER,
      g_param_spec_enum ("prefer", "Prefer",
          "Which kinds of encoder are candidates: auto (hardware first, "
          "then software), hardware only or software only",
          LEGBA_TYPE_ENCODER_PREFER, DEFAULT_PREFER,
          rw | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_BITRATE,
      g_param_spec_uint ("bitrate", "Bitrate",
          "Target bitrate in bit/s, mapped to each encoder family's unit; "
          "changeable while playing", 1000, G_MAXINT32, DEFAULT_BITRATE,
          rw | GST_PARAM_MUTABLE_PLAYING));
  g_object_class_install_property (gobject_class, PROP_MAX_BITRATE,
      g_param_spec_uint ("max-bitrate", "Maximum bitrate",
          "Cap in bit/s the output must stay under; 0 makes bitrate the cap; "
          "changeable while playing", 0, G_MAXINT32, DEFAULT_MAX_BITRATE,
          rw | GST_PARAM_MUTABLE_PLAYING));
  g_object_class_install_property (gobject_class, PROP_KEYFRAME_INTERVAL,
      g_param_spec_uint ("keyframe-interval", "Key-frame interval",
          "Frames between key frames; 0 for the encoder's default",
          0, G_MAXINT32, DEFAULT_KEYFRAME_INTERVAL,
          rw | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_SPEED,
      g_param_spec_enum ("speed", "Speed",
          "Speed preset, mapped to each family's own preset",
          LEGBA_TYPE_ENCODER_SPEED, DEFAULT_SPEED,
          rw | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_PROOF_TIMEOUT,
      g_param_spec_uint ("proof-timeout", "Proof timeout",
          "Time bound in ms for a candidate to open and encode its first "
          "frame", 1, G_MAXINT32, DEFAULT_PROOF_TIMEOUT,
          rw | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_DEGRADATION_PREFERENCE,
      g_param_spec_enum ("degradation-preference", "Degradation preference",
          "What to give up when the bitrate is below what the encoder needs "
          "at the input size (its measured floor; only encoders with a "
          "measured floor, vp8enc and openh264enc, are scaled): "
          "maintain-resolution keeps the size and lets the encoder drop "
          "frames; maintain-framerate and balanced send the picture scaled "
          "down (3/4, 1/2, 3/8, 1/4 ... of each side, even sizes, aspect "
          "ratio kept, not below 320x180 pixels) to the largest size whose "
          "floor the bitrate carries, and back up when the bitrate is 1.2 "
          "times a larger size's floor; balanced behaves as "
          "maintain-framerate. Decided when caps arrive and when bitrate "
          "or max-bitrate change; each decision is posted as a "
          "legba-encoder-scaling element message and kept in stats",
          LEGBA_TYPE_DEGRADATION_PREFERENCE, DEFAULT_DEGRADATION_PREFERENCE,
          rw | GST_PARAM_MUTABLE_PLAYING));
  g_object_class_install_property (gobject_class, PROP_STATS,
      g_param_spec_boxed ("stats", "Statistics",
          "encoder (string), frames-in, frames-out, bytes-out (guint64) "
          "since the last start, fallbacks (guint), frame-dropping "
          "(gboolean: the cap is below min-bitrate, so the encoder drops "
          "frames to hold it), min-bitrate (guint: the lowest cap that "
          "carries the size and frame rate without dropping frames, for "
          "encoders whose frame dropping is switched by the cap; 0 for "
          "others), scaled (gboolean: the picture is sent smaller than it "
          "comes in), input-width, input-height, output-width, "
          "output-height (gint: the size that comes in and the size sent), "
          "scaling-floor (guint: the bitrate the encoder needs at the "
          "input size to keep 90% of the frames within 1.10 x the cap; 0 "
          "for encoders never scaled), network-bitrate (guint: what the "
          "network carries, from legbaroom's bandwidth estimation; the "
          "encoder gets the lower of it and bitrate; 0: no estimate)",
          GST_TYPE_STRUCTURE, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
}

static void
gst_legba_video_enc_class_init (GstLegbaVideoEncClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBinClass *bin_class = GST_BIN_CLASS (klass);

  gobject_class->set_property = gst_legba_video_enc_set_property;
  gobject_class->get_property = gst_legba_video_enc_get_property;
  gobject_class->finalize = gst_legba_video_enc_finalize;
  install_properties (gobject_class);

  element_class->change_state = gst_legba_video_enc_change_state;
  bin_class->handle_message = gst_legba_video_enc_handle_message;

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class,
      "Legba video encoder", "Codec/Encoder/Video/Bin",
      "Encodes with the best encoder proved to work here, hardware first, "
      "through one bitrate contract, and falls back mid-stream",
      "Legba <legba@legba.invalid>");

  GST_DEBUG_CATEGORY_INIT (legba_video_enc_debug, "legbavideoenc", 0,
      "Legba video encoder");
}
