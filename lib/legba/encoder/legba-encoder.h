/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Encoder selection: which video encoder works on this machine, and one
 * contract (bitrate in bit/s, key-frame interval in frames, realtime
 * latency mode) across every encoder family Legba knows.
 *
 * Thread contract: every function may be called from any thread, streaming
 * threads included. Proofs are cached per process under a lock; a proof
 * runs a small pipeline of its own and blocks the caller for at most the
 * time bound it is given.
 */
#pragma once

#if !defined(LEGBA_INSIDE) && !defined(LEGBA_COMPILATION)
#error "Only <legba/legba.h> can be included directly."
#endif

#include <gst/gst.h>
#include <legba/legba-api.h>

G_BEGIN_DECLS

/**
 * LEGBA_ENCODER_ERROR:
 *
 * Error domain of encoder proofs and selection. Errors in this domain are
 * from the #LegbaEncoderError enumeration.
 */
#define LEGBA_ENCODER_ERROR (legba_encoder_error_quark ())
LEGBA_API
GQuark legba_encoder_error_quark (void);

/**
 * LegbaEncoderError:
 * @LEGBA_ENCODER_ERROR_UNAVAILABLE: the factory is not in the registry or
 *   cannot be instantiated
 * @LEGBA_ENCODER_ERROR_NO_DEVICE: the encoder could not open its device or
 *   driver (missing GPU, driver or library)
 * @LEGBA_ENCODER_ERROR_SESSION_LIMIT: the device refused one more encoding
 *   session
 * @LEGBA_ENCODER_ERROR_CAPS: the encoder does not accept the raw video or
 *   cannot produce the output caps asked for
 * @LEGBA_ENCODER_ERROR_TIMED_OUT: no encoded frame within the time bound
 * @LEGBA_ENCODER_ERROR_FAILED: any other failure while encoding
 * @LEGBA_ENCODER_ERROR_UNKNOWN_FAMILY: the factory belongs to no family
 *   Legba can drive through its bitrate contract (it is used only when
 *   forced)
 * @LEGBA_ENCODER_ERROR_NO_CANDIDATE: no candidate proved to work
 *
 * Why a candidate was rejected.
 */
typedef enum
{
  LEGBA_ENCODER_ERROR_UNAVAILABLE,
  LEGBA_ENCODER_ERROR_NO_DEVICE,
  LEGBA_ENCODER_ERROR_SESSION_LIMIT,
  LEGBA_ENCODER_ERROR_CAPS,
  LEGBA_ENCODER_ERROR_TIMED_OUT,
  LEGBA_ENCODER_ERROR_FAILED,
  LEGBA_ENCODER_ERROR_UNKNOWN_FAMILY,
  LEGBA_ENCODER_ERROR_NO_CANDIDATE,
} LegbaEncoderError;

/**
 * LegbaVideoCodec:
 * @LEGBA_VIDEO_CODEC_H264: H.264, byte-stream, AU-aligned,
 *   constrained-baseline unless negotiated otherwise
 * @LEGBA_VIDEO_CODEC_VP8: VP8
 * @LEGBA_VIDEO_CODEC_VP9: VP9 (profile 0)
 * @LEGBA_VIDEO_CODEC_AV1: AV1
 *
 * Video codecs an encoder is selected for.
 */
typedef enum
{
  LEGBA_VIDEO_CODEC_H264,
  LEGBA_VIDEO_CODEC_VP8,
  LEGBA_VIDEO_CODEC_VP9,
  LEGBA_VIDEO_CODEC_AV1,
} LegbaVideoCodec;

LEGBA_API
GType legba_video_codec_get_type (void);
#define LEGBA_TYPE_VIDEO_CODEC (legba_video_codec_get_type ())

/**
 * LegbaEncoderPrefer:
 * @LEGBA_ENCODER_PREFER_AUTO: hardware families first, then software
 * @LEGBA_ENCODER_PREFER_HARDWARE: hardware families only
 * @LEGBA_ENCODER_PREFER_SOFTWARE: software families only
 *
 * Which kinds of encoder are candidates.
 */
typedef enum
{
  LEGBA_ENCODER_PREFER_AUTO,
  LEGBA_ENCODER_PREFER_HARDWARE,
  LEGBA_ENCODER_PREFER_SOFTWARE,
} LegbaEncoderPrefer;

LEGBA_API
GType legba_encoder_prefer_get_type (void);
#define LEGBA_TYPE_ENCODER_PREFER (legba_encoder_prefer_get_type ())

/**
 * LegbaEncoderSpeed:
 * @LEGBA_ENCODER_SPEED_FASTEST: the fastest realtime preset of the family
 * @LEGBA_ENCODER_SPEED_BALANCED: a middle preset
 * @LEGBA_ENCODER_SPEED_QUALITY: the best preset still usable in realtime
 *
 * Speed preset, mapped to each family's own preset property.
 */
typedef enum
{
  LEGBA_ENCODER_SPEED_FASTEST,
  LEGBA_ENCODER_SPEED_BALANCED,
  LEGBA_ENCODER_SPEED_QUALITY,
} LegbaEncoderSpeed;

LEGBA_API
GType legba_encoder_speed_get_type (void);
#define LEGBA_TYPE_ENCODER_SPEED (legba_encoder_speed_get_type ())

/**
 * LegbaDegradationPreference:
 * @LEGBA_DEGRADATION_PREFERENCE_BALANCED: the same as maintain-framerate
 *   here: the picture is scaled down to what the bitrate carries; below the
 *   smallest size the encoder's frame dropping takes over
 * @LEGBA_DEGRADATION_PREFERENCE_MAINTAIN_FRAMERATE: the picture is scaled
 *   down when the bitrate is below what the encoder needs at its size
 *   (legba_encoder_choose_size())
 * @LEGBA_DEGRADATION_PREFERENCE_MAINTAIN_RESOLUTION: the size is kept and
 *   the encoder drops frames to hold the cap
 *
 * What to give up when the bitrate cannot carry the picture, named after
 * WebRTC's RTCDegradationPreference.
 */
typedef enum
{
  LEGBA_DEGRADATION_PREFERENCE_BALANCED,
  LEGBA_DEGRADATION_PREFERENCE_MAINTAIN_FRAMERATE,
  LEGBA_DEGRADATION_PREFERENCE_MAINTAIN_RESOLUTION,
} LegbaDegradationPreference;

LEGBA_API
GType legba_degradation_preference_get_type (void);
#define LEGBA_TYPE_DEGRADATION_PREFERENCE \
  (legba_degradation_preference_get_type ())

/**
 * LEGBA_ENCODER_MIN_SCALED_PIXELS:
 *
 * legba_encoder_choose_size() scales no picture below this many pixels
 * (320 x 180, libwebrtc's default minimum).
 */
#define LEGBA_ENCODER_MIN_SCALED_PIXELS (320 * 180)

/**
 * LEGBA_ENCODER_SCALE_UP_MARGIN:
 *
 * A scaled picture goes back up to a larger size only when the bitrate is
 * at least this many times that size's floor.
 */
#define LEGBA_ENCODER_SCALE_UP_MARGIN 1.2

/**
 * LEGBA_ENCODER_ENV:
 *
 * The environment variable operators set to steer selection: a
 * comma-separated list of factory names tried in that order instead of
 * the registry's candidates, and/or one of `hardware`, `software`, `auto`
 * to override the preference. An element's `encoder-factory` property
 * still wins over it.
 */
#define LEGBA_ENCODER_ENV "LEGBA_ENCODER"

/**
 * LEGBA_ENCODER_DEFAULT_PROOF_TIMEOUT_MS:
 *
 * Default time bound of one proof, from opening the encoder to its first
 * encoded frame.
 */
#define LEGBA_ENCODER_DEFAULT_PROOF_TIMEOUT_MS 5000

/**
 * LegbaEncoderSettings:
 * @bitrate: target bitrate in bit/s
 * @max_bitrate: cap in bit/s; 0 means @bitrate is the cap
 * @keyframe_interval: frames between key frames; 0 leaves the encoder's
 *   default
 * @speed: speed preset
 *
 * The contract every family is driven through. The realtime latency mode
 * (no B-frames, zero-latency tuning, no lookahead, constant bitrate) is
 * always applied.
 */
typedef struct
{
  guint bitrate;
  guint max_bitrate;
  guint keyframe_interval;
  LegbaEncoderSpeed speed;
} LegbaEncoderSettings;

/**
 * LegbaEncoderCandidate:
 *
 * One encoder factory that can produce a codec, with its family and
 * whether it is hardware. Reference-counted, immutable.
 */
typedef struct _LegbaEncoderCandidate LegbaEncoderCandidate;

LEGBA_API
GType legba_encoder_candidate_get_type (void);
#define LEGBA_TYPE_ENCODER_CANDIDATE (legba_encoder_candidate_get_type ())

LEGBA_API
LegbaEncoderCandidate *legba_encoder_candidate_ref (LegbaEncoderCandidate *
    candidate);
LEGBA_API
void legba_encoder_candidate_unref (LegbaEncoderCandidate * candidate);
LEGBA_API
const gchar *legba_encoder_candidate_get_factory_name (LegbaEncoderCandidate
    * candidate);
LEGBA_API
const gchar *legba_encoder_candidate_get_family (LegbaEncoderCandidate *
    candidate);
LEGBA_API
gboolean legba_encoder_candidate_is_hardware (LegbaEncoderCandidate *
    candidate);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (LegbaEncoderCandidate,
    legba_encoder_candidate_unref);

/**
 * LegbaEncoderProof:
 *
 * The outcome of proving one encoder factory with given raw caps and
 * output caps: success, or the reason it was rejected. Reference-counted,
 * immutable.
 */
typedef struct _LegbaEncoderProof LegbaEncoderProof;

LEGBA_API
GType legba_encoder_proof_get_type (void);
#define LEGBA_TYPE_ENCODER_PROOF (legba_encoder_proof_get_type ())

LEGBA_API
LegbaEncoderProof *legba_encoder_proof_ref (LegbaEncoderProof * proof);
LEGBA_API
void legba_encoder_proof_unref (LegbaEncoderProof * proof);
LEGBA_API
const gchar *legba_encoder_proof_get_factory_name (LegbaEncoderProof *
    proof);
LEGBA_API
gboolean legba_encoder_proof_is_ok (LegbaEncoderProof * proof);
LEGBA_API
const GError *legba_encoder_proof_get_error (LegbaEncoderProof * proof);
LEGBA_API
gint64 legba_encoder_proof_get_duration_us (LegbaEncoderProof * proof);
LEGBA_API
gchar *legba_encoder_proof_to_string (LegbaEncoderProof * proof);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (LegbaEncoderProof, legba_encoder_proof_unref);

LEGBA_API
const gchar *legba_video_codec_to_string (LegbaVideoCodec codec);
LEGBA_API
gboolean legba_video_codec_from_string (const gchar * name,
    LegbaVideoCodec * codec);
LEGBA_API
GstCaps *legba_video_codec_get_output_caps (LegbaVideoCodec codec);

LEGBA_API
GPtrArray *legba_encoder_list_candidates (LegbaVideoCodec codec,
    LegbaEncoderPrefer prefer, const gchar * forced_factory);

LEGBA_API
LegbaEncoderProof *legba_encoder_prove (const gchar * factory_name,
    LegbaVideoCodec codec, GstCaps * raw_caps, GstCaps * output_caps,
    guint timeout_ms);
LEGBA_API
void legba_encoder_record_failure (const gchar * factory_name,
    const GError * error);
LEGBA_API
void legba_encoder_clear_proofs (void);

LEGBA_API
LegbaEncoderProof *legba_encoder_select (LegbaVideoCodec codec,
    GstCaps * raw_caps, GstCaps * output_caps, LegbaEncoderPrefer prefer,
    const gchar * forced_factory, guint timeout_ms, GPtrArray ** rejected,
    GError ** error);

LEGBA_API
void legba_encoder_settings_init (LegbaEncoderSettings * settings);
LEGBA_API
GstElement *legba_encoder_make (const gchar * factory_name,
    const LegbaEncoderSettings * settings, GError ** error);
LEGBA_API
gboolean legba_encoder_apply_settings (GstElement * encoder,
    const LegbaEncoderSettings * settings, GError ** error);
LEGBA_API
gboolean legba_encoder_set_bitrate (GstElement * encoder, guint bitrate,
    guint max_bitrate);
LEGBA_API
gboolean legba_encoder_can_change_bitrate (GstElement * encoder);
LEGBA_API
guint legba_encoder_get_min_bitrate (GstElement * encoder,
    GstCaps * raw_caps);
LEGBA_API
gboolean legba_encoder_apply_frame_dropping (GstElement * encoder,
    const LegbaEncoderSettings * settings, GstCaps * raw_caps,
    guint * min_bitrate);
LEGBA_API
guint legba_encoder_get_scaling_floor (GstElement * encoder,
    GstCaps * raw_caps);
LEGBA_API
gboolean legba_encoder_choose_size (GstElement * encoder, GstCaps * raw_caps,
    guint bitrate, gint current_width, gint current_height, gint * width,
    gint * height);

LEGBA_API
gchar *legba_encoder_report (LegbaVideoCodec codec, GstCaps * raw_caps,
    LegbaEncoderPrefer prefer, guint timeout_ms);

G_END_DECLS
