/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legbavideoenc and legba_encoder_*: selection order and overrides,
 * rejection reasons, the proof cache, the bitrate contract (and
 * openh264's frame skipping only under a cap too low for the picture),
 * bitrate changes while playing, force-key-unit, and mid-stream fallback. The
 * failures are produced by real encoder elements registered by this test
 * (one that cannot open its device, one that fails on its first frame,
 * one that fails after a few frames, one that works) in real pipelines,
 * next to the real x264, openh264 and VP8 encoders.
 */
#include <gst/check/gstcheck.h>
#include <gst/video/video.h>
#include <legba/legba.h>

/* ---- test encoders ---- */

typedef enum
{
  FAKE_FAILS_OPEN,
  FAKE_FAILS_FIRST_FRAME,
  FAKE_FAILS_MID_STREAM,
  FAKE_WORKS,
} FakeBehaviour;

#define FAKE_MID_STREAM_FRAMES 10

typedef struct
{
  GstVideoEncoder parent;
  guint frames;
} FakeEnc;

typedef struct
{
  GstVideoEncoderClass parent;
  FakeBehaviour behaviour;
} FakeEncClass;

static gint fake_instances;     /* atomic */
static gint fake_forced_key_units;      /* atomic */

static GstStaticPadTemplate fake_sink = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("video/x-raw, format=I420"));
static GstStaticPadTemplate fake_src = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("video/x-h264, stream-format=byte-stream, "
        "alignment=au, profile=constrained-baseline"));

static FakeBehaviour
fake_behaviour (gpointer self)
{
  return ((FakeEncClass *) G_OBJECT_GET_CLASS (self))->behaviour;
}

static GstStateChangeReturn
fake_change_state (GstElement * element, GstStateChange transition)
{
  GstElementClass *parent = g_type_class_peek_parent (G_OBJECT_GET_CLASS
      (element));

  if (transition == GST_STATE_CHANGE_NULL_TO_READY
      && fake_behaviour (element) == FAKE_FAILS_OPEN) {
    GST_ELEMENT_ERROR (element, RESOURCE, OPEN_READ_WRITE,
        ("No encoding device"), ("/dev/fake-encoder: no such device"));
    return GST_STATE_CHANGE_FAILURE;
  }
  return parent->change_state (element, transition);
}

static gboolean
fake_set_format (GstVideoEncoder * encoder, GstVideoCodecState * state)
{
  GstCaps *caps = gst_caps_from_string ("video/x-h264, "
      "stream-format=byte-stream, alignment=au, "
      "profile=constrained-baseline, level=(string)3.1");
  GstVideoCodecState *out =
      gst_video_encoder_set_output_state (encoder, caps, state);

  gst_video_codec_state_unref (out);
  return gst_video_encoder_negotiate (encoder);
}

/* Emits a 5-byte NAL: IDR on sync points, non-IDR otherwise. */
static GstFlowReturn
fake_handle_frame (GstVideoEncoder * encoder, GstVideoCodecFrame * frame)
{
  FakeEnc *self = (FakeEnc *) encoder;
  FakeBehaviour behaviour = fake_behaviour (self);
  gboolean key = self->frames == 0
      || GST_VIDEO_CODEC_FRAME_IS_FORCE_KEYFRAME (frame);
  guint8 nal[] = { 0, 0, 0, 1, key ? 0x65 : 0x41 };

  self->frames++;
  if ((behaviour == FAKE_FAILS_FIRST_FRAME && self->frames == 1)
      || (behaviour == FAKE_FAILS_MID_STREAM
          && self->frames > FAKE_MID_STREAM_FRAMES)) {
    gst_video_codec_frame_unref (frame);
    GST_ELEMENT_ERROR (encoder, STREAM, ENCODE, ("Encoding failed"),
        ("frame %u", self->frames));
    return GST_FLOW_ERROR;
  }
  if (GST_VIDEO_CODEC_FRAME_IS_FORCE_KEYFRAME (frame))
    g_atomic_int_inc (&fake_forced_key_units);
  if (key)
    GST_VIDEO_CODEC_FRAME_SET_SYNC_POINT (frame);
  frame->output_buffer = gst_buffer_new_memdup (nal, sizeof (nal));
  return gst_video_encoder_finish_frame (encoder, frame);
}

static void
fake_class_init (gpointer klass, gpointer data)
{
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstVideoEncoderClass *enc_class = GST_VIDEO_ENCODER_CLASS (klass);

  ((FakeEncClass *) klass)->behaviour = GPOINTER_TO_INT (data);
  element_class->change_state = fake_change_state;
  enc_class->set_format = fake_set_format;
  enc_class->handle_frame = fake_handle_frame;
  gst_element_class_add_static_pad_template (element_class, &fake_sink);
  gst_element_class_add_static_pad_template (element_class, &fake_src);
  gst_element_class_set_static_metadata (element_class, "Test encoder",
      "Codec/Encoder/Video/Hardware", "Encoder that fails on purpose", "Legba");
}

static void
fake_instance_init (GTypeInstance * instance, gpointer klass)
{
  g_atomic_int_inc (&fake_instances);
}

static void
register_fake (const gchar * name, FakeBehaviour behaviour)
{
  const GTypeInfo info = {
    .class_size = sizeof (FakeEncClass),
    .class_init = fake_class_init,
    .class_data = GINT_TO_POINTER (behaviour),
    .instance_size = sizeof (FakeEnc),
    .instance_init = fake_instance_init,
  };
  g_autofree gchar *type_name = g_strdup_printf ("LegbaTest_%s", name);
  GType type = g_type_register_static (GST_TYPE_VIDEO_ENCODER, type_name,
      &info, 0);

  g_assert_true (gst_element_register (NULL, name, GST_RANK_NONE, type));
}

/* ---- helpers ---- */

static GstCaps *
raw_caps (gint width, gint height)
{
  return gst_caps_new_simple ("video/x-raw", "format", G_TYPE_STRING, "I420",
      "width", G_TYPE_INT, width, "height", G_TYPE_INT, height,
      "framerate", GST_TYPE_FRACTION, 30, 1, NULL);
}

static gboolean
have (const gchar * factory)
{
  g_autoptr (GstElementFactory) f = gst_element_factory_find (factory);
  return f != NULL;
}

static gint
index_of (GPtrArray * candidates, const gchar * factory)
{
  for (guint i = 0; i < candidates->len; i++) {
    if (g_strcmp0 (legba_encoder_candidate_get_factory_name
            (g_ptr_array_index (candidates, i)), factory) == 0)
      return i;
  }
  return -1;
}

static void
setup (void)
{
  g_unsetenv (LEGBA_ENCODER_ENV);
  legba_encoder_clear_proofs ();
}

/* ---- candidates ---- */

GST_START_TEST (test_candidates_order)
{
  g_autoptr (GPtrArray) all = legba_encoder_list_candidates
      (LEGBA_VIDEO_CODEC_H264, LEGBA_ENCODER_PREFER_AUTO, NULL);
  g_autoptr (GPtrArray) sw = legba_encoder_list_candidates
      (LEGBA_VIDEO_CODEC_H264, LEGBA_ENCODER_PREFER_SOFTWARE, NULL);
  g_autoptr (GPtrArray) hw = legba_encoder_list_candidates
      (LEGBA_VIDEO_CODEC_H264, LEGBA_ENCODER_PREFER_HARDWARE, NULL);
  g_autoptr (GPtrArray) vp8 = legba_encoder_list_candidates
      (LEGBA_VIDEO_CODEC_VP8, LEGBA_ENCODER_PREFER_AUTO, NULL);
  gboolean seen_software = FALSE;

  setup ();
  fail_unless (index_of (all, "x264enc") >= 0);
  fail_unless (index_of (vp8, "vp8enc") >= 0);
  fail_unless (index_of (vp8, "x264enc") < 0);
  /* hardware strictly before software */
  for (guint i = 0; i < all->len; i++) {
    gboolean hardware =
        legba_encoder_candidate_is_hardware (g_ptr_array_index (all, i));
    fail_if (hardware && seen_software, "hardware after software");
    seen_software |= !hardware;
  }
  /* known families before unknown ones of the same kind; x264 first */
  if (have ("avenc_h264_omx"))
    fail_unless (index_of (all, "avenc_h264_omx") < index_of (all, "x264enc"));
  if (have ("openh264enc"))
    fail_unless (index_of (all, "x264enc") < index_of (all, "openh264enc"));
  fail_unless (index_of (all, "fakeh264enc") >= 0);
  if (have ("avenc_h264_omx"))
    fail_unless (index_of (all, "avenc_h264_omx") < index_of (all,
            "fakeh264enc"));
  fail_unless (index_of (all, "fakeh264enc") < index_of (all, "x264enc"));
  fail_unless (index_of (all, "legbavideoenc") < 0);
  /* preference filters */
  fail_unless (index_of (sw, "x264enc") >= 0);
  for (guint i = 0; i < sw->len; i++)
    fail_if (legba_encoder_candidate_is_hardware (g_ptr_array_index (sw, i)));
  for (guint i = 0; i < hw->len; i++)
    fail_unless (legba_encoder_candidate_is_hardware (g_ptr_array_index (hw,
                i)));
}

GST_END_TEST;

GST_START_TEST (test_candidates_overrides)
{
  g_autoptr (GPtrArray) env = NULL;
  g_autoptr (GPtrArray) env_prefer = NULL;
  g_autoptr (GPtrArray) forced = NULL;

  setup ();
  g_setenv (LEGBA_ENCODER_ENV, "openh264enc, x264enc", TRUE);
  env = legba_encoder_list_candidates (LEGBA_VIDEO_CODEC_H264,
      LEGBA_ENCODER_PREFER_AUTO, NULL);
  fail_unless_equals_int (env->len, 2);
  fail_unless_equals_int (index_of (env, "openh264enc"), 0);
  fail_unless_equals_int (index_of (env, "x264enc"), 1);

  /* encoder-factory wins over the environment */
  forced = legba_encoder_list_candidates (LEGBA_VIDEO_CODEC_H264,
      LEGBA_ENCODER_PREFER_AUTO, "legbatestworks");
  fail_unless_equals_int (forced->len, 1);
  fail_unless_equals_int (index_of (forced, "legbatestworks"), 0);

  /* a preference in the environment overrides the caller's */
  g_setenv (LEGBA_ENCODER_ENV, "software", TRUE);
  env_prefer = legba_encoder_list_candidates (LEGBA_VIDEO_CODEC_H264,
      LEGBA_ENCODER_PREFER_HARDWARE, NULL);
  fail_unless (index_of (env_prefer, "x264enc") >= 0);
  for (guint i = 0; i < env_prefer->len; i++)
    fail_if (legba_encoder_candidate_is_hardware (g_ptr_array_index
            (env_prefer, i)));
  g_unsetenv (LEGBA_ENCODER_ENV);
}

GST_END_TEST;

/* ---- proofs ---- */

static void
assert_rejected (const gchar * factory, GstCaps * out, gint code)
{
  g_autoptr (GstCaps) raw = raw_caps (320, 240);
  g_autoptr (LegbaEncoderProof) proof = legba_encoder_prove (factory,
      LEGBA_VIDEO_CODEC_H264, raw, out, 2000);
  g_autofree gchar *text = legba_encoder_proof_to_string (proof);

  GST_INFO ("%s", text);
  fail_if (legba_encoder_proof_is_ok (proof), "%s proved", factory);
  fail_unless (g_error_matches (legba_encoder_proof_get_error (proof),
          LEGBA_ENCODER_ERROR, code), "%s: expected reason %d", text, code);
}

GST_START_TEST (test_proof_rejections)
{
  g_autoptr (GstCaps) vp8 = gst_caps_from_string ("video/x-vp8");
  g_autoptr (GstCaps) raw = raw_caps (320, 240);
  g_autoptr (LegbaEncoderProof) works = NULL;
  g_autoptr (LegbaEncoderProof) x264 = NULL;

  setup ();
  assert_rejected ("legbatestfailsopen", NULL, LEGBA_ENCODER_ERROR_NO_DEVICE);
  assert_rejected ("legbatestfailsframe", NULL, LEGBA_ENCODER_ERROR_FAILED);
  assert_rejected ("nosuchencoder", NULL, LEGBA_ENCODER_ERROR_UNAVAILABLE);
  assert_rejected ("x264enc", vp8, LEGBA_ENCODER_ERROR_CAPS);
  /* a real hardware-family element without its device */
  if (have ("avenc_h264_omx"))
    assert_rejected ("avenc_h264_omx", NULL, LEGBA_ENCODER_ERROR_NO_DEVICE);

  works = legba_encoder_prove ("legbatestworks", LEGBA_VIDEO_CODEC_H264, raw,
      NULL, 2000);
  fail_unless (legba_encoder_proof_is_ok (works));
  x264 = legba_encoder_prove ("x264enc", LEGBA_VIDEO_CODEC_H264, raw, NULL,
      5000);
  fail_unless (legba_encoder_proof_is_ok (x264));
}

GST_END_TEST;

GST_START_TEST (test_select_reasons)
{
  g_autoptr (GstCaps) raw = raw_caps (320, 240);
  g_autoptr (GPtrArray) rejected = NULL;
  g_autoptr (GPtrArray) rejected_auto = NULL;
  g_autoptr (LegbaEncoderProof) proof = NULL;
  g_autoptr (LegbaEncoderProof) auto_proof = NULL;
  g_autoptr (LegbaEncoderProof) none = NULL;
  g_autoptr (GError) error = NULL;

  setup ();
  g_setenv (LEGBA_ENCODER_ENV,
      "legbatestfailsopen,legbatestfailsframe,legbatestworks", TRUE);
  proof = legba_encoder_select (LEGBA_VIDEO_CODEC_H264, raw, NULL,
      LEGBA_ENCODER_PREFER_AUTO, NULL, 2000, &rejected, &error);
  g_assert_no_error (error);
  fail_unless_equals_string (legba_encoder_proof_get_factory_name (proof),
      "legbatestworks");
  fail_unless_equals_int (rejected->len, 2);
  fail_unless (g_error_matches (legba_encoder_proof_get_error
          (g_ptr_array_index (rejected, 0)), LEGBA_ENCODER_ERROR,
          LEGBA_ENCODER_ERROR_NO_DEVICE));
  fail_unless (g_error_matches (legba_encoder_proof_get_error
          (g_ptr_array_index (rejected, 1)), LEGBA_ENCODER_ERROR,
          LEGBA_ENCODER_ERROR_FAILED));

  g_setenv (LEGBA_ENCODER_ENV, "legbatestfailsopen", TRUE);
  none = legba_encoder_select (LEGBA_VIDEO_CODEC_H264, raw, NULL,
      LEGBA_ENCODER_PREFER_AUTO, NULL, 2000, NULL, &error);
  fail_unless (none == NULL);
  fail_unless (g_error_matches (error, LEGBA_ENCODER_ERROR,
          LEGBA_ENCODER_ERROR_NO_CANDIDATE));
  fail_unless (strstr (error->message, "no device") != NULL, "%s",
      error->message);
  g_clear_error (&error);

  /* from the registry: an unknown family is listed but never proved */
  g_unsetenv (LEGBA_ENCODER_ENV);
  auto_proof = legba_encoder_select (LEGBA_VIDEO_CODEC_H264, raw, NULL,
      LEGBA_ENCODER_PREFER_AUTO, NULL, 5000, &rejected_auto, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < rejected_auto->len; i++) {
    LegbaEncoderProof *r = g_ptr_array_index (rejected_auto, i);
    if (g_strcmp0 (legba_encoder_proof_get_factory_name (r),
            "fakeh264enc") == 0)
      fail_unless (g_error_matches (legba_encoder_proof_get_error (r),
              LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_UNKNOWN_FAMILY));
  }
}

GST_END_TEST;

GST_START_TEST (test_proof_cache)
{
  g_autoptr (GstCaps) raw = raw_caps (320, 240);
  g_autoptr (GstCaps) other = raw_caps (352, 288);
  g_autoptr (LegbaEncoderProof) proof1 = NULL;
  g_autoptr (LegbaEncoderProof) again = NULL;
  g_autoptr (LegbaEncoderProof) resized = NULL;
  g_autoptr (LegbaEncoderProof) after_failure = NULL;
  g_autoptr (LegbaEncoderProof) after_clear = NULL;
  g_autoptr (GError) failure = g_error_new (GST_STREAM_ERROR,
      GST_STREAM_ERROR_ENCODE, "device lost");
  gint before;

  setup ();
  before = g_atomic_int_get (&fake_instances);
  proof1 = legba_encoder_prove ("legbatestworks", LEGBA_VIDEO_CODEC_H264, raw,
      NULL, 2000);
  fail_unless_equals_int (g_atomic_int_get (&fake_instances), before + 1);
  again = legba_encoder_prove ("legbatestworks", LEGBA_VIDEO_CODEC_H264, raw,
      NULL, 2000);
  fail_unless (proof1 == again, "second proof not from the cache");
  fail_unless_equals_int (g_atomic_int_get (&fake_instances), before + 1);
  /* other caps are another proof */
  resized = legba_encoder_prove ("legbatestworks", LEGBA_VIDEO_CODEC_H264,
      other, NULL, 2000);
  fail_unless (resized != proof1);
  fail_unless_equals_int (g_atomic_int_get (&fake_instances), before + 2);

  legba_encoder_record_failure ("legbatestworks", failure);
  after_failure = legba_encoder_prove ("legbatestworks",
      LEGBA_VIDEO_CODEC_H264, raw, NULL, 2000);
  fail_if (legba_encoder_proof_is_ok (after_failure));
  fail_unless_equals_string (legba_encoder_proof_get_error
      (after_failure)->message, "device lost");

  legba_encoder_clear_proofs ();
  after_clear = legba_encoder_prove ("legbatestworks",
      LEGBA_VIDEO_CODEC_H264, raw, NULL, 2000);
  fail_unless (legba_encoder_proof_is_ok (after_clear));
  fail_unless_equals_int (g_atomic_int_get (&fake_instances), before + 3);
}

GST_END_TEST;

/* ---- running pipelines ---- */

typedef struct
{
  GMutex lock;
  guint64 buffers;
  guint64 bytes;
  guint64 key_frames;
  GstClockTime first_pts, last_pts;
  /* bytes of the buffers whose PTS is at or after split_pts */
  GstClockTime split_pts;
  guint64 bytes_after_split;
  guint64 buffers_after_split;
  guint64 key_frames_after_split;
  GstCaps *caps;
} Output;

static GstPadProbeReturn
count_output (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  Output *out = data;
  GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER (info);
  GstClockTime pts = GST_BUFFER_PTS (buffer);
  gboolean key = !GST_BUFFER_FLAG_IS_SET (buffer, GST_BUFFER_FLAG_DELTA_UNIT);

  g_mutex_lock (&out->lock);
  if (out->buffers == 0)
    out->first_pts = pts;
  out->last_pts = pts;
  out->buffers++;
  out->bytes += gst_buffer_get_size (buffer);
  out->key_frames += key;
  /* encoders offset their timestamps (x264enc by 1000 h): split on the
   * time since the first output */
  if (GST_CLOCK_TIME_IS_VALID (out->split_pts)
      && pts - out->first_pts >= out->split_pts) {
    out->bytes_after_split += gst_buffer_get_size (buffer);
    out->buffers_after_split++;
    out->key_frames_after_split += key;
  }
  if (!out->caps)
    out->caps = gst_pad_get_current_caps (pad);
  g_mutex_unlock (&out->lock);
  return GST_PAD_PROBE_OK;
}

/* Runs PIPELINE (with elements named "enc" and "sink") to EOS; returns the
 * bus messages of interest. Fails on an error or after 60 s. */
static GList *
run_to_eos (GstElement * pipeline, Output * out)
{
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  GstPad *pad = gst_element_get_static_pad (sink, "sink");
  GstBus *bus = gst_element_get_bus (pipeline);
  GList *messages = NULL;
  gboolean done = FALSE;

  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, count_output, out, NULL);
  fail_unless (gst_element_set_state (pipeline, GST_STATE_PLAYING) !=
      GST_STATE_CHANGE_FAILURE);
  while (!done) {
    /* the bound of the whole run: a hung pipeline fails the test */
    GstMessage *msg = gst_bus_timed_pop (bus, 60 * GST_SECOND);

    fail_unless (msg != NULL, "no EOS within 60 s");
    switch (GST_MESSAGE_TYPE (msg)) {
      case GST_MESSAGE_ERROR:{
        g_autoptr (GError) error = NULL;
        g_autofree gchar *debug = NULL;
        gst_message_parse_error (msg, &error, &debug);
        fail ("error from %s: %s (%s)", GST_MESSAGE_SRC_NAME (msg),
            error->message, debug);
        break;
      }
      case GST_MESSAGE_EOS:
        done = TRUE;
        gst_message_unref (msg);
        break;
      case GST_MESSAGE_WARNING:
      case GST_MESSAGE_ELEMENT:
        messages = g_list_append (messages, msg);
        break;
      default:
        gst_message_unref (msg);
        break;
    }
  }
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (bus);
  gst_object_unref (pad);
  gst_object_unref (sink);
  return messages;
}

static void
output_init (Output * out)
{
  memset (out, 0, sizeof (*out));
  g_mutex_init (&out->lock);
  out->split_pts = GST_CLOCK_TIME_NONE;
}

static void
output_clear (Output * out)
{
  gst_clear_caps (&out->caps);
  g_mutex_clear (&out->lock);
}

static gdouble
output_bitrate (Output * out, guint frames, gint fps)
{
  return out->bytes * 8.0 * fps / frames;
}

static const GstStructure *
find_selected (GList * messages, guint nth)
{
  for (GList * l = messages; l; l = l->next) {
    const GstStructure *s = gst_message_get_structure (l->data);
    if (GST_MESSAGE_TYPE (l->data) == GST_MESSAGE_ELEMENT
        && gst_structure_has_name (s, "legba-encoder-selected") && nth-- == 0)
      return s;
  }
  return NULL;
}

/* Moving, detailed content: a zone plate whose rings move every frame
 * (x264 wants about 18 Mbit/s at 720p to code it at full quality). */
#define CONTENT "videotestsrc pattern=zone-plate kx2=20 ky2=20 kt=1"

/* @extra: more properties of legbavideoenc, or NULL */
static GstElement *
contract_pipeline_full (const gchar * codec, const gchar * factory,
    gint width, gint height, guint frames, guint cap, const gchar * extra)
{
  g_autofree gchar *desc = g_strdup_printf (CONTENT " num-buffers=%u "
      "! video/x-raw,format=I420,width=%d,height=%d,framerate=30/1 "
      "! legbavideoenc name=enc codec=%s %s%s bitrate=%u %s "
      "! fakesink name=sink sync=false", frames, width, height, codec,
      factory ? "encoder-factory=" : "", factory ? factory : "", cap,
      extra ? extra : "");
  g_autoptr (GError) error = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &error);

  g_assert_no_error (error);
  return pipeline;
}

static GstElement *
contract_pipeline (const gchar * codec, const gchar * factory, gint width,
    gint height, guint frames, guint cap)
{
  return contract_pipeline_full (codec, factory, width, height, frames, cap,
      NULL);
}

/* The output bitrate over the run stays within 1.10 x the cap; returns
 * the output frame count. */
static guint64
check_contract (const gchar * codec, const gchar * factory, gint width,
    gint height, guint frames, guint cap)
{
  GstElement *pipeline = contract_pipeline (codec, factory, width, height,
      frames, cap);
  Output out;
  GList *messages;
  gdouble rate;
  guint64 n_buffers;

  output_init (&out);
  messages = run_to_eos (pipeline, &out);
  rate = output_bitrate (&out, frames, 30);
  GST_INFO ("%s %s %dx%d cap %u: %.0f bit/s (%.2f x), %" G_GUINT64_FORMAT
      "/%u frames", codec, factory ? factory : "auto", width, height, cap,
      rate, rate / cap, out.buffers, frames);
  fail_unless (rate <= 1.10 * cap, "%s %dx%d: %.0f bit/s over the %u cap",
      codec, width, height, rate, cap);
  fail_unless (rate >= 0.3 * cap, "%s %dx%d: %.0f bit/s, the cap %u is "
      "not exercised", codec, width, height, rate, cap);
  n_buffers = out.buffers;
  g_list_free_full (messages, (GDestroyNotify) gst_message_unref);
  output_clear (&out);
  gst_object_unref (pipeline);
  return n_buffers;
}

GST_START_TEST (test_element_selects)
{
  GstElement *pipeline = contract_pipeline ("h264", NULL, 320, 240, 15,
      300000);
  g_autoptr (GstCaps) raw = raw_caps (320, 240);
  g_autoptr (LegbaEncoderProof) expected = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GstElement) enc = NULL;
  g_autofree gchar *current = NULL;
  const GstStructure *selected;
  GstStructure *caps_s;
  Output out;
  GList *messages;

  setup ();
  expected = legba_encoder_select (LEGBA_VIDEO_CODEC_H264, raw, NULL,
      LEGBA_ENCODER_PREFER_AUTO, NULL, 5000, NULL, &error);
  g_assert_no_error (error);
  output_init (&out);
  messages = run_to_eos (pipeline, &out);
  selected = find_selected (messages, 0);
  fail_unless (selected != NULL, "no legba-encoder-selected message");
  fail_unless_equals_string (gst_structure_get_string (selected, "factory"),
      legba_encoder_proof_get_factory_name (expected));
  fail_unless_equals_string (gst_structure_get_string (selected, "reason"),
      "selected");
  fail_unless (find_selected (messages, 1) == NULL);
  enc = gst_bin_get_by_name (GST_BIN (pipeline), "enc");
  g_object_get (enc, "current-encoder", &current, NULL);
  fail_unless_equals_string (current,
      legba_encoder_proof_get_factory_name (expected));
  /* WebRTC output caps */
  fail_unless (out.caps != NULL);
  caps_s = gst_caps_get_structure (out.caps, 0);
  fail_unless_equals_string (gst_structure_get_string (caps_s,
          "stream-format"), "byte-stream");
  fail_unless_equals_string (gst_structure_get_string (caps_s, "alignment"),
      "au");
  fail_unless_equals_string (gst_structure_get_string (caps_s, "profile"),
      "constrained-baseline");
  fail_unless_equals_int (out.buffers, 15);
  g_list_free_full (messages, (GDestroyNotify) gst_message_unref);
  output_clear (&out);
  gst_object_unref (pipeline);
}

GST_END_TEST;

/* 640x360 under a 500 kbit/s cap, 3 s of content, each installed family. */
GST_START_TEST (test_bitrate_contract)
{
  setup ();
  check_contract ("h264", "x264enc", 640, 360, 90, 500000);
  if (have ("openh264enc"))
    check_contract ("h264", "openh264enc", 640, 360, 90, 500000);
  check_contract ("vp8", NULL, 640, 360, 90, 500000);
}

GST_END_TEST;

static void
keep_openh264 (GstBin * bin, GstBin * sub_bin, GstElement * element,
    gpointer data)
{
  GstElement **kept = data;
  GstElementFactory *factory = gst_element_get_factory (element);

  if (!*kept && factory
      && g_strcmp0 (GST_OBJECT_NAME (factory), "openh264enc") == 0)
    *kept = gst_object_ref (element);
}

/* openh264enc at 640x360: frame skipping is switched on only when the cap
 * is below what the size and frame rate need; the choice is announced and
 * in stats, and the cap holds either way. */
static void
check_frame_dropping (guint cap, gboolean expect_drop)
{
  const guint frames = 90;
  /* the size kept: the switch is decided for 640x360 itself */
  GstElement *pipeline = contract_pipeline_full ("h264", "openh264enc", 640,
      360, frames, cap, "degradation-preference=maintain-resolution");
  g_autoptr (GstElement) enc = gst_bin_get_by_name (GST_BIN (pipeline), "enc");
  g_autoptr (GstCaps) raw = raw_caps (640, 360);
  g_autoptr (GstStructure) stats = NULL;
  GstElement *openh264 = NULL;
  const GstStructure *announced = NULL;
  gboolean dropping = !expect_drop, skip = !expect_drop;
  guint min_bitrate = 0, announced_cap = 0, stats_min = 0;
  guint needed;
  Output out;
  GList *messages;
  gdouble rate;

  g_signal_connect (pipeline, "deep-element-added",
      G_CALLBACK (keep_openh264), &openh264);
  output_init (&out);
  messages = run_to_eos (pipeline, &out);
  fail_unless (openh264 != NULL, "openh264enc was not used");
  needed = legba_encoder_get_min_bitrate (openh264, raw);
  fail_unless (needed > 0);
  /* the two caps of the test are on either side of the threshold */
  fail_unless ((cap < needed) == expect_drop, "cap %u, %u needed", cap, needed);
  for (GList * l = messages; l; l = l->next) {
    const GstStructure *s = gst_message_get_structure (l->data);
    if (GST_MESSAGE_TYPE (l->data) == GST_MESSAGE_ELEMENT
        && gst_structure_has_name (s, "legba-encoder-frame-dropping")) {
      fail_unless (announced == NULL, "announced twice");
      announced = s;
    }
  }
  fail_unless (announced != NULL, "no legba-encoder-frame-dropping message");
  fail_unless_equals_string (gst_structure_get_string (announced, "factory"),
      "openh264enc");
  fail_unless (gst_structure_get_boolean (announced, "frame-dropping",
          &dropping));
  fail_unless (gst_structure_get_uint (announced, "cap", &announced_cap));
  fail_unless (gst_structure_get_uint (announced, "min-bitrate", &min_bitrate));
  fail_unless_equals_int (dropping, expect_drop);
  fail_unless_equals_int (announced_cap, cap);
  fail_unless_equals_int (min_bitrate, needed);
  g_object_get (openh264, "enable-frame-skip", &skip, NULL);
  fail_unless_equals_int (skip, expect_drop);
  g_object_get (enc, "stats", &stats, NULL);
  dropping = !expect_drop;
  fail_unless (gst_structure_get_boolean (stats, "frame-dropping", &dropping));
  fail_unless (gst_structure_get_uint (stats, "min-bitrate", &stats_min));
  fail_unless_equals_int (dropping, expect_drop);
  fail_unless_equals_int (stats_min, needed);

  rate = output_bitrate (&out, frames, 30);
  GST_INFO ("openh264enc cap %u (%u needed): %.0f bit/s (%.2f x), %"
      G_GUINT64_FORMAT "/%u frames", cap, needed, rate, rate / cap,
      out.buffers, frames);
  fail_unless (rate <= 1.10 * cap, "%.0f bit/s over the %u cap", rate, cap);
  /* without frame skipping every frame comes out */
  if (!expect_drop)
    fail_unless_equals_int (out.buffers, frames);
  gst_object_unref (openh264);
  g_list_free_full (messages, (GDestroyNotify) gst_message_unref);
  output_clear (&out);
  gst_object_unref (pipeline);
}

GST_START_TEST (test_openh264_frame_dropping)
{
  setup ();
  if (!have ("openh264enc"))
    return;
  check_frame_dropping (2500000, FALSE);
  check_frame_dropping (500000, TRUE);
}

GST_END_TEST;

/* 720p at 1 Mbit/s: the cap is held without dropping frames, so a cap held
 * by dropping most frames fails. */
GST_START_TEST (test_frame_rate)
{
  guint64 h264, vp8;

  setup ();
  h264 = check_contract ("h264", NULL, 1280, 720, 60, 1000000);
  fail_unless (h264 >= 54, "H.264: %" G_GUINT64_FORMAT "/60 frames", h264);
  vp8 = check_contract ("vp8", NULL, 1280, 720, 60, 1000000);
  fail_unless (vp8 >= 54, "VP8: %" G_GUINT64_FORMAT "/60 frames", vp8);
}

GST_END_TEST;

/* Sets the bitrate from the streaming thread when the frame at 2 s enters
 * the element: the change lands at a known point of the stream. */
static GstPadProbeReturn
lower_bitrate (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  GstElement *enc = data;

  if (GST_BUFFER_PTS (GST_PAD_PROBE_INFO_BUFFER (info)) >= 2 * GST_SECOND) {
    g_object_set (enc, "bitrate", 250000, NULL);
    return GST_PAD_PROBE_REMOVE;
  }
  return GST_PAD_PROBE_OK;
}

GST_START_TEST (test_bitrate_change)
{
  GstElement *pipeline = contract_pipeline ("h264", "x264enc", 640, 360,
      150, 2000000);
  g_autoptr (GstElement) enc = gst_bin_get_by_name (GST_BIN (pipeline), "enc");
  g_autoptr (GstPad) sink = gst_element_get_static_pad (enc, "sink");
  Output out;
  GList *messages;
  gdouble before, after;

  setup ();
  output_init (&out);
  /* the last 2 s, well after the change */
  out.split_pts = 3 * GST_SECOND;
  gst_pad_add_probe (sink, GST_PAD_PROBE_TYPE_BUFFER, lower_bitrate, enc, NULL);
  messages = run_to_eos (pipeline, &out);
  before = (out.bytes - out.bytes_after_split) * 8.0 * 30 /
      (out.buffers - out.buffers_after_split);
  after = out.bytes_after_split * 8.0 * 30 / out.buffers_after_split;
  GST_INFO ("before %.0f bit/s, after %.0f bit/s", before, after);
  fail_unless (after <= 1.10 * 250000, "%.0f bit/s after lowering to 250000",
      after);
  fail_unless (after < before / 3, "%.0f then %.0f bit/s", before, after);
  g_list_free_full (messages, (GDestroyNotify) gst_message_unref);
  output_clear (&out);
  gst_object_unref (pipeline);
}

GST_END_TEST;

/* The same change, as legbaroom asks for it: a legba-target-bitrate event
 * from downstream when the frame at 2 s enters. */
static GstPadProbeReturn
network_bitrate (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  GstPad *downstream = data;

  if (GST_BUFFER_PTS (GST_PAD_PROBE_INFO_BUFFER (info)) >= 2 * GST_SECOND) {
    gst_pad_push_event (downstream,
        gst_event_new_custom (GST_EVENT_CUSTOM_UPSTREAM,
            gst_structure_new ("legba-target-bitrate", "bitrate", G_TYPE_UINT,
                250000, NULL)));
    return GST_PAD_PROBE_REMOVE;
  }
  return GST_PAD_PROBE_OK;
}

GST_START_TEST (test_network_bitrate)
{
  GstElement *pipeline = contract_pipeline ("h264", "x264enc", 640, 360,
      150, 2000000);
  g_autoptr (GstElement) enc = gst_bin_get_by_name (GST_BIN (pipeline), "enc");
  g_autoptr (GstElement) fakesink = gst_bin_get_by_name (GST_BIN (pipeline),
      "sink");
  g_autoptr (GstPad) sink = gst_element_get_static_pad (enc, "sink");
  g_autoptr (GstPad) downstream = gst_element_get_static_pad (fakesink, "sink");
  g_autoptr (GstStructure) stats = NULL;
  Output out;
  GList *messages;
  gdouble before, after;
  guint bitrate = 0, network = 0;

  setup ();
  output_init (&out);
  out.split_pts = 3 * GST_SECOND;
  gst_pad_add_probe (sink, GST_PAD_PROBE_TYPE_BUFFER, network_bitrate,
      downstream, NULL);
  messages = run_to_eos (pipeline, &out);
  before = (out.bytes - out.bytes_after_split) * 8.0 * 30 /
      (out.buffers - out.buffers_after_split);
  after = out.bytes_after_split * 8.0 * 30 / out.buffers_after_split;
  GST_INFO ("before %.0f bit/s, after %.0f bit/s", before, after);
  fail_unless (after <= 1.10 * 250000, "%.0f bit/s after the network asked "
      "for 250000", after);
  fail_unless (after < before / 3, "%.0f then %.0f bit/s", before, after);
  /* the user's bitrate stays the ceiling; the stats say what the network
   * carries */
  g_object_get (enc, "bitrate", &bitrate, "stats", &stats, NULL);
  fail_unless_equals_int (bitrate, 2000000);
  fail_unless (gst_structure_get_uint (stats, "network-bitrate", &network));
  fail_unless_equals_int (network, 250000);
  g_list_free_full (messages, (GDestroyNotify) gst_message_unref);
  output_clear (&out);
  gst_object_unref (pipeline);
}

GST_END_TEST;


/* ---- scaling down when the bitrate cannot carry the picture ---- */

/* The sizes the encoded stream goes through, and whether the first buffer
 * after each change of size is a key frame. */
typedef struct
{
  GMutex lock;
  gint width, height;           /* of the last caps */
  guint changes;                /* caps of another size after the first */
  gboolean key_due;
  guint keys_after_change;
  gint first_width, first_height;
} Sizes;

static GstPadProbeReturn
track_sizes (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  Sizes *sz = data;

  g_mutex_lock (&sz->lock);
  if (info->type & GST_PAD_PROBE_TYPE_BUFFER) {
    GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER (info);

    if (sz->key_due) {
      sz->keys_after_change +=
          !GST_BUFFER_FLAG_IS_SET (buffer, GST_BUFFER_FLAG_DELTA_UNIT);
      sz->key_due = FALSE;
    }
  } else if (GST_EVENT_TYPE (GST_PAD_PROBE_INFO_EVENT (info)) == GST_EVENT_CAPS) {
    GstCaps *caps;
    GstStructure *st;
    gint w = 0, h = 0;

    gst_event_parse_caps (GST_PAD_PROBE_INFO_EVENT (info), &caps);
    st = gst_caps_get_structure (caps, 0);
    gst_structure_get_int (st, "width", &w);
    gst_structure_get_int (st, "height", &h);
    if (sz->width == 0) {
      sz->first_width = w;
      sz->first_height = h;
    } else if (w != sz->width || h != sz->height) {
      sz->changes++;
      sz->key_due = TRUE;
    }
    sz->width = w;
    sz->height = h;
  }
  g_mutex_unlock (&sz->lock);
  return GST_PAD_PROBE_OK;
}

static void
watch_sizes (GstElement * pipeline, Sizes * sz)
{
  g_autoptr (GstElement) sink = gst_bin_get_by_name (GST_BIN (pipeline),
      "sink");
  g_autoptr (GstPad) pad = gst_element_get_static_pad (sink, "sink");

  memset (sz, 0, sizeof (*sz));
  g_mutex_init (&sz->lock);
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER |
      GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, track_sizes, sz, NULL);
}

static guint
count_scaling (GList * messages, const GstStructure ** last)
{
  guint n = 0;

  for (GList * l = messages; l; l = l->next) {
    const GstStructure *s = gst_message_get_structure (l->data);
    if (GST_MESSAGE_TYPE (l->data) == GST_MESSAGE_ELEMENT
        && gst_structure_has_name (s, "legba-encoder-scaling")) {
      n++;
      *last = s;
    }
  }
  return n;
}

static void
keep_encoder (GstBin * bin, GstBin * sub_bin, GstElement * element,
    gpointer data)
{
  GstElement **kept = data;
  GstElementFactory *factory = gst_element_get_factory (element);

  if (!*kept && factory && gst_element_factory_list_is_type (factory,
          GST_ELEMENT_FACTORY_TYPE_ENCODER))
    *kept = gst_object_ref (element);
}

/* 1280x720 at 30 fps under a 1 Mbit/s cap, below what @factory needs
 * there on detailed content: by default the picture is sent smaller, at
 * least 90% of the frames come out and the output stays within 1.10 x the
 * cap; with maintain-resolution the size is kept (the encoder drops
 * frames instead, as before). */
static void
check_scaling (const gchar * codec, const gchar * factory,
    gboolean maintain_resolution)
{
  const guint frames = 90, cap = 1000000;
  GstElement *pipeline = contract_pipeline_full (codec, factory, 1280, 720,
      frames, cap, maintain_resolution ?
      "degradation-preference=maintain-resolution" : NULL);
  g_autoptr (GstElement) enc = gst_bin_get_by_name (GST_BIN (pipeline), "enc");
  g_autoptr (GstCaps) raw = raw_caps (1280, 720);
  g_autoptr (GstStructure) stats = NULL;
  GstElement *encoder = NULL;
  const GstStructure *announced = NULL;
  gboolean scaled = !maintain_resolution;
  gint want_w, want_h, out_w = 0, out_h = 0, in_w = 0;
  guint floor, stats_floor = 0, msg_floor = 0, msg_cap = 0;
  Sizes sz;
  Output out;
  GList *messages;
  gdouble rate;

  setup ();
  g_signal_connect (pipeline, "deep-element-added",
      G_CALLBACK (keep_encoder), &encoder);
  watch_sizes (pipeline, &sz);
  output_init (&out);
  messages = run_to_eos (pipeline, &out);
  fail_unless (encoder != NULL);
  floor = legba_encoder_get_scaling_floor (encoder, raw);
  /* the cap is below the floor at 1280x720 */
  fail_unless (floor > cap, "%s needs only %u bit/s at 720p", factory, floor);
  fail_unless (legba_encoder_choose_size (encoder, raw, cap, 0, 0, &want_w,
          &want_h));

  fail_unless_equals_int (count_scaling (messages, &announced), 1);
  fail_unless_equals_string (gst_structure_get_string (announced, "factory"),
      factory);
  fail_unless (gst_structure_get_boolean (announced, "scaled", &scaled));
  fail_unless_equals_int (scaled, !maintain_resolution);
  fail_unless (gst_structure_get_int (announced, "output-width", &out_w));
  fail_unless (gst_structure_get_int (announced, "output-height", &out_h));
  fail_unless (gst_structure_get_int (announced, "input-width", &in_w));
  fail_unless (gst_structure_get_uint (announced, "floor", &msg_floor));
  fail_unless (gst_structure_get_uint (announced, "cap", &msg_cap));
  fail_unless_equals_int (in_w, 1280);
  fail_unless_equals_int (msg_floor, floor);
  fail_unless_equals_int (msg_cap, cap);
  if (maintain_resolution) {
    fail_unless_equals_int (out_w, 1280);
    fail_unless_equals_int (out_h, 720);
  } else {
    fail_unless_equals_int (out_w, want_w);
    fail_unless_equals_int (out_h, want_h);
    fail_unless (want_w < 1280 && want_h < 720);
    /* even, the aspect ratio kept */
    fail_unless (want_w % 2 == 0 && want_h % 2 == 0);
    fail_unless (abs (want_w * 720 - want_h * 1280) <= 2 * 1280);
  }

  /* what the encoder produced, from the first frame on */
  fail_unless_equals_int (sz.first_width, out_w);
  fail_unless_equals_int (sz.first_height, out_h);
  fail_unless_equals_int (sz.changes, 0);

  g_object_get (enc, "stats", &stats, NULL);
  fail_unless (gst_structure_get_boolean (stats, "scaled", &scaled));
  fail_unless_equals_int (scaled, !maintain_resolution);
  fail_unless (gst_structure_get_int (stats, "output-width", &out_w));
  fail_unless (gst_structure_get_uint (stats, "scaling-floor", &stats_floor));
  fail_unless_equals_int (out_w, sz.first_width);
  fail_unless_equals_int (stats_floor, floor);

  rate = output_bitrate (&out, frames, 30);
  GST_INFO ("%s 1280x720 cap %u (floor %u)%s: sent %dx%d, %.0f bit/s "
      "(%.2f x), %" G_GUINT64_FORMAT "/%u frames", factory, cap, floor,
      maintain_resolution ? " maintain-resolution" : "", sz.first_width,
      sz.first_height, rate, rate / cap, out.buffers, frames);
  fail_unless (rate <= 1.10 * cap, "%.0f bit/s over the %u cap", rate, cap);
  if (!maintain_resolution)
    fail_unless (out.buffers * 10 >= frames * 9, "%" G_GUINT64_FORMAT
        "/%u frames", out.buffers, frames);
  gst_object_unref (encoder);
  g_list_free_full (messages, (GDestroyNotify) gst_message_unref);
  output_clear (&out);
  g_mutex_clear (&sz.lock);
  gst_object_unref (pipeline);
}

GST_START_TEST (test_scaling_vp8)
{
  check_scaling ("vp8", "vp8enc", FALSE);
  check_scaling ("vp8", "vp8enc", TRUE);
}

GST_END_TEST;

GST_START_TEST (test_scaling_openh264)
{
  if (!have ("openh264enc"))
    return;
  check_scaling ("h264", "openh264enc", FALSE);
  check_scaling ("h264", "openh264enc", TRUE);
}

GST_END_TEST;

/* x264enc has no measured floor: never scaled, nothing announced. */
GST_START_TEST (test_scaling_not_x264)
{
  GstElement *pipeline = contract_pipeline ("h264", "x264enc", 1280, 720, 30,
      250000);
  g_autoptr (GstElement) enc = gst_bin_get_by_name (GST_BIN (pipeline), "enc");
  g_autoptr (GstStructure) stats = NULL;
  const GstStructure *announced = NULL;
  gboolean scaled = TRUE;
  guint floor = 1;
  Sizes sz;
  Output out;
  GList *messages;

  setup ();
  watch_sizes (pipeline, &sz);
  output_init (&out);
  messages = run_to_eos (pipeline, &out);
  fail_unless_equals_int (count_scaling (messages, &announced), 0);
  fail_unless_equals_int (sz.first_width, 1280);
  g_object_get (enc, "stats", &stats, NULL);
  fail_unless (gst_structure_get_boolean (stats, "scaled", &scaled));
  fail_unless (gst_structure_get_uint (stats, "scaling-floor", &floor));
  fail_if (scaled);
  fail_unless_equals_int (floor, 0);
  g_list_free_full (messages, (GDestroyNotify) gst_message_unref);
  output_clear (&out);
  g_mutex_clear (&sz.lock);
  gst_object_unref (pipeline);
}

GST_END_TEST;

typedef struct
{
  GstElement *enc;
  guint bitrate;
} NewBitrate;

/* Sets the bitrate from the streaming thread when the frame at 1 s
 * enters the element. */
static GstPadProbeReturn
change_bitrate (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  NewBitrate *change = data;

  if (GST_BUFFER_PTS (GST_PAD_PROBE_INFO_BUFFER (info)) >= GST_SECOND) {
    g_object_set (change->enc, "bitrate", change->bitrate, NULL);
    return GST_PAD_PROBE_REMOVE;
  }
  return GST_PAD_PROBE_OK;
}

/* 1280x720 under @from bit/s, then @to while playing: the size sent
 * changes once mid-stream (new caps, the encoder reconfigured, a key frame
 * first), announced: up to 1280x720 when @to is above @from, down from
 * it otherwise. */
static void
check_resize (const gchar * codec, const gchar * factory, guint from, guint to)
{
  const guint frames = 60;
  const gboolean up = to > from;
  GstElement *pipeline = contract_pipeline_full (codec, factory, 1280, 720,
      frames, from, NULL);
  g_autoptr (GstElement) enc = gst_bin_get_by_name (GST_BIN (pipeline), "enc");
  g_autoptr (GstPad) sink = gst_element_get_static_pad (enc, "sink");
  g_autoptr (GstStructure) stats = NULL;
  const GstStructure *last = NULL;
  gboolean scaled = TRUE;
  gint out_w = 0, out_h = 0;
  NewBitrate change = { enc, to };
  Sizes sz;
  Output out;
  GList *messages;

  setup ();
  watch_sizes (pipeline, &sz);
  output_init (&out);
  gst_pad_add_probe (sink, GST_PAD_PROBE_TYPE_BUFFER, change_bitrate,
      &change, NULL);
  messages = run_to_eos (pipeline, &out);
  GST_INFO ("%s: sent %dx%d, then %dx%d; %u change(s), %u key frame(s) "
      "after them; %" G_GUINT64_FORMAT "/%u frames", factory, sz.first_width,
      sz.first_height, sz.width, sz.height, sz.changes, sz.keys_after_change,
      out.buffers, frames);
  fail_unless_equals_int (sz.changes, 1);
  fail_unless_equals_int (sz.keys_after_change, 1);
  if (up) {
    fail_unless (sz.first_width < 1280);
    fail_unless_equals_int (sz.width, 1280);
    fail_unless_equals_int (sz.height, 720);
  } else {
    fail_unless_equals_int (sz.first_width, 1280);
    fail_unless (sz.width < 1280 && sz.height < 720);
  }
  fail_unless_equals_int (count_scaling (messages, &last), 2);
  fail_unless (gst_structure_get_boolean (last, "scaled", &scaled));
  fail_unless_equals_int (scaled, !up);
  g_object_get (enc, "stats", &stats, NULL);
  fail_unless (gst_structure_get_int (stats, "output-width", &out_w));
  fail_unless (gst_structure_get_int (stats, "output-height", &out_h));
  fail_unless_equals_int (out_w, sz.width);
  fail_unless_equals_int (out_h, sz.height);
  g_list_free_full (messages, (GDestroyNotify) gst_message_unref);
  output_clear (&out);
  g_mutex_clear (&sz.lock);
  gst_object_unref (pipeline);
}

GST_START_TEST (test_scale_up)
{
  check_resize ("vp8", "vp8enc", 1000000, 5000000);
  if (have ("openh264enc"))
    check_resize ("h264", "openh264enc", 1000000, 5000000);
}

GST_END_TEST;

/* lowered while playing: down at once */
GST_START_TEST (test_scale_down_while_playing)
{
  check_resize ("vp8", "vp8enc", 5000000, 1000000);
}

GST_END_TEST;

/* Asks for a key frame (as webrtcbin does on a PLI) once 1 s has gone
 * out. */
static GstPadProbeReturn
request_key_frame (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  GstClockTime *first = data;
  GstClockTime pts = GST_BUFFER_PTS (GST_PAD_PROBE_INFO_BUFFER (info));

  if (!GST_CLOCK_TIME_IS_VALID (*first))
    *first = pts;
  if (pts - *first >= GST_SECOND) {
    gst_pad_push_event (pad,
        gst_video_event_new_upstream_force_key_unit (GST_CLOCK_TIME_NONE,
            TRUE, 1));
    return GST_PAD_PROBE_REMOVE;
  }
  return GST_PAD_PROBE_OK;
}

GST_START_TEST (test_force_key_unit)
{
  GstElement *pipeline = contract_pipeline ("h264", "x264enc", 320, 240, 60,
      500000);
  g_autoptr (GstElement) sink = gst_bin_get_by_name (GST_BIN (pipeline),
      "sink");
  g_autoptr (GstPad) pad = gst_element_get_static_pad (sink, "sink");
  GstClockTime first_pts = GST_CLOCK_TIME_NONE;
  Output out;
  GList *messages;

  setup ();
  output_init (&out);
  out.split_pts = GST_SECOND + 1;
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, request_key_frame,
      &first_pts, NULL);
  messages = run_to_eos (pipeline, &out);
  /* x264's own interval (250) puts no key frame in 2 s but the first */
  fail_unless_equals_int (out.key_frames - out.key_frames_after_split, 1);
  fail_unless_equals_int (out.key_frames_after_split, 1);
  g_list_free_full (messages, (GDestroyNotify) gst_message_unref);
  output_clear (&out);
  gst_object_unref (pipeline);
}

GST_END_TEST;

/* The encoder fails after 10 frames: the element switches to the next
 * candidate, asks it for a key frame, warns, and the pipeline runs on. */
static void
check_fallback (const gchar * next, guint expected_forced)
{
  GstElement *pipeline = contract_pipeline ("h264", NULL, 320, 240, 40,
      500000);
  g_autoptr (GstElement) enc = gst_bin_get_by_name (GST_BIN (pipeline), "enc");
  g_autofree gchar *env = g_strdup_printf ("legbatestfailsmid,%s", next);
  g_autofree gchar *current = NULL;
  g_autoptr (GstStructure) stats = NULL;
  const GstStructure *sel1, *sel2;
  gboolean warned = FALSE;
  gint forced_before = g_atomic_int_get (&fake_forced_key_units);
  guint fallbacks = 0;
  Output out;
  GList *messages;

  setup ();
  g_setenv (LEGBA_ENCODER_ENV, env, TRUE);
  output_init (&out);
  messages = run_to_eos (pipeline, &out);
  sel1 = find_selected (messages, 0);
  sel2 = find_selected (messages, 1);
  fail_unless (sel1 && sel2);
  fail_unless_equals_string (gst_structure_get_string (sel1, "factory"),
      "legbatestfailsmid");
  fail_unless_equals_string (gst_structure_get_string (sel2, "factory"), next);
  fail_unless_equals_string (gst_structure_get_string (sel2, "reason"),
      "fallback");
  for (GList * l = messages; l; l = l->next)
    warned |= GST_MESSAGE_TYPE (l->data) == GST_MESSAGE_WARNING
        && GST_MESSAGE_SRC (l->data) == GST_OBJECT (enc);
  fail_unless (warned, "no warning posted");
  g_object_get (enc, "current-encoder", &current, "stats", &stats, NULL);
  fail_unless_equals_string (current, next);
  fail_unless (gst_structure_get_uint (stats, "fallbacks", &fallbacks));
  fail_unless_equals_int (fallbacks, 1);
  /* 10 frames from the first encoder, the other 30 from the next one:
   * the failing frame itself is encoded again */
  fail_unless_equals_int (out.buffers, 40);
  fail_unless (out.key_frames >= 2);
  fail_unless_equals_int (g_atomic_int_get (&fake_forced_key_units) -
      forced_before, expected_forced);
  g_unsetenv (LEGBA_ENCODER_ENV);
  g_list_free_full (messages, (GDestroyNotify) gst_message_unref);
  output_clear (&out);
  gst_object_unref (pipeline);
}

GST_START_TEST (test_fallback_to_test_encoder)
{
  check_fallback ("legbatestworks", 1);
}

GST_END_TEST;

GST_START_TEST (test_fallback_to_x264)
{
  check_fallback ("x264enc", 0);
}

GST_END_TEST;

GST_START_TEST (test_no_encoder_works)
{
  GstElement *pipeline = contract_pipeline ("h264", "legbatestfailsopen",
      320, 240, 10, 500000);
  GstBus *bus = gst_element_get_bus (pipeline);
  g_autoptr (GstMessage) msg = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree gchar *debug = NULL;

  setup ();
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  msg = gst_bus_timed_pop_filtered (bus, 30 * GST_SECOND,
      GST_MESSAGE_ERROR | GST_MESSAGE_EOS);
  fail_unless (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR);
  gst_message_parse_error (msg, &error, &debug);
  fail_unless_equals_string (GST_MESSAGE_SRC_NAME (msg), "enc");
  fail_unless (strstr (debug, "legbatestfailsopen: no device") != NULL, "%s",
      debug);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (bus);
  gst_object_unref (pipeline);
}

GST_END_TEST;

/* Without one of its helper elements (here videoscale, as when only
 * Legba's plugin is installed) the encoder is still made, without a
 * critical, and refuses to start with an error that names the element. */
GST_START_TEST (test_helper_element_missing)
{
  GstRegistry *registry = gst_registry_get ();
  GstPluginFeature *videoscale =
      gst_registry_lookup_feature (registry, "videoscale");
  GstElement *enc;
  GstBus *bus;
  g_autoptr (GstMessage) msg = NULL;
  g_autoptr (GError) error = NULL;

  fail_unless (videoscale != NULL);
  /* the plugins loaded first: loading one registers its features again */
  gst_object_unref (gst_object_ref_sink (gst_element_factory_make
          ("legbavideoenc", NULL)));
  gst_registry_remove_feature (registry, videoscale);
  enc = gst_element_factory_make ("legbavideoenc", NULL);
  fail_unless (enc != NULL);
  bus = gst_bus_new ();
  gst_element_set_bus (enc, bus);
  fail_unless_equals_int (gst_element_set_state (enc, GST_STATE_READY),
      GST_STATE_CHANGE_FAILURE);
  msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR);
  fail_unless (msg != NULL);
  gst_message_parse_error (msg, &error, NULL);
  fail_unless (g_error_matches (error, GST_CORE_ERROR,
          GST_CORE_ERROR_MISSING_PLUGIN));
  fail_unless (strstr (error->message, "videoscale") != NULL, "%s",
      error->message);
  gst_element_set_state (enc, GST_STATE_NULL);
  gst_element_set_bus (enc, NULL);
  gst_object_unref (bus);
  gst_object_unref (enc);
  gst_registry_add_feature (registry, videoscale);
}

GST_END_TEST;

static Suite *
legbavideoenc_suite (void)
{
  Suite *s = suite_create ("legbavideoenc");
  TCase *tc = tcase_create ("general");

  register_fake ("legbatestfailsopen", FAKE_FAILS_OPEN);
  register_fake ("legbatestfailsframe", FAKE_FAILS_FIRST_FRAME);
  register_fake ("legbatestfailsmid", FAKE_FAILS_MID_STREAM);
  register_fake ("legbatestworks", FAKE_WORKS);
  /* listed by the registry, of no family Legba knows */
  register_fake ("fakeh264enc", FAKE_WORKS);

  tcase_set_timeout (tc, 120);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_candidates_order);
  tcase_add_test (tc, test_candidates_overrides);
  tcase_add_test (tc, test_proof_rejections);
  tcase_add_test (tc, test_select_reasons);
  tcase_add_test (tc, test_proof_cache);
  tcase_add_test (tc, test_element_selects);
  tcase_add_test (tc, test_bitrate_contract);
  tcase_add_test (tc, test_openh264_frame_dropping);
  tcase_add_test (tc, test_frame_rate);
  tcase_add_test (tc, test_bitrate_change);
  tcase_add_test (tc, test_network_bitrate);
  tcase_add_test (tc, test_scaling_vp8);
  tcase_add_test (tc, test_scaling_openh264);
  tcase_add_test (tc, test_scaling_not_x264);
  tcase_add_test (tc, test_scale_up);
  tcase_add_test (tc, test_scale_down_while_playing);
  tcase_add_test (tc, test_force_key_unit);
  tcase_add_test (tc, test_fallback_to_test_encoder);
  tcase_add_test (tc, test_fallback_to_x264);
  tcase_add_test (tc, test_no_encoder_works);
  tcase_add_test (tc, test_helper_element_missing);
  return s;
}

GST_CHECK_MAIN (legbavideoenc);
