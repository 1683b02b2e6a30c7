/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Encoder candidates, proofs and selection. A candidate is any element
 * factory of klass Codec/Encoder/Video whose source caps can produce the
 * codec, whatever its rank (hardware encoders often register with rank
 * NONE). A candidate is used only after it was proved: instantiated,
 * brought to PAUSED with the real caps, and made to encode one frame within
 * a time bound. Proofs are cached per process.
 */
#include <legba/encoder/legba-encoder-private.h>

#include <gst/app/app.h>
#include <gst/video/video.h>
#include <string.h>

GST_DEBUG_CATEGORY (legba_encoder_debug);
#define GST_CAT_DEFAULT legba_encoder_debug

/**
 * legba_encoder_error_quark:
 *
 * Gets the error domain of encoder proofs and selection, %LEGBA_ENCODER_ERROR: its errors are
 * from the #LegbaEncoderError enumeration.
 *
 * Returns: the domain's #GQuark
 */
GQuark
legba_encoder_error_quark (void)
{
  return g_quark_from_static_string ("legba-encoder-error-quark");
}

G_DEFINE_ENUM_TYPE (LegbaVideoCodec, legba_video_codec,
    G_DEFINE_ENUM_VALUE (LEGBA_VIDEO_CODEC_H264, "h264"),
    G_DEFINE_ENUM_VALUE (LEGBA_VIDEO_CODEC_VP8, "vp8"),
    G_DEFINE_ENUM_VALUE (LEGBA_VIDEO_CODEC_VP9, "vp9"),
    G_DEFINE_ENUM_VALUE (LEGBA_VIDEO_CODEC_AV1, "av1"));

G_DEFINE_ENUM_TYPE (LegbaEncoderPrefer, legba_encoder_prefer,
    G_DEFINE_ENUM_VALUE (LEGBA_ENCODER_PREFER_AUTO, "auto"),
    G_DEFINE_ENUM_VALUE (LEGBA_ENCODER_PREFER_HARDWARE, "hardware"),
    G_DEFINE_ENUM_VALUE (LEGBA_ENCODER_PREFER_SOFTWARE, "software"));

G_DEFINE_ENUM_TYPE (LegbaEncoderSpeed, legba_encoder_speed,
    G_DEFINE_ENUM_VALUE (LEGBA_ENCODER_SPEED_FASTEST, "fastest"),
    G_DEFINE_ENUM_VALUE (LEGBA_ENCODER_SPEED_BALANCED, "balanced"),
    G_DEFINE_ENUM_VALUE (LEGBA_ENCODER_SPEED_QUALITY, "quality"));

struct _LegbaEncoderCandidate
{
  gatomicrefcount ref;
  gchar *factory_name;
  gchar *family;
  gboolean hardware;
  guint order;                  /* family row, then unknown families */
  guint rank;
  gboolean named;               /* forced or listed by the operator */
};

struct _LegbaEncoderProof
{
  gatomicrefcount ref;
  gchar *factory_name;
  GError *error;                /* NULL when proved */
  gint64 duration_us;
};

/* Proof cache: key (factory, codec, caps) -> LegbaEncoderProof; factories
 * that failed while running -> GError. */
static GMutex cache_lock;
static GHashTable *proofs;      /* protected by cache_lock */
static GHashTable *runtime_failures;    /* protected by cache_lock */

void
legba_encoder_ensure_debug (void)
{
  static gsize once = 0;

  if (g_once_init_enter (&once)) {
    GST_DEBUG_CATEGORY_INIT (legba_encoder_debug, "legbaencoder", 0,
        "Legba encoder selection");
    g_once_init_leave (&once, 1);
  }
}

/* ---- codecs ---- */

static const gchar *const codec_caps[] = {
  /* one string, split for width (parenthesized for -Wstring-concatenation) */
  [LEGBA_VIDEO_CODEC_H264] = ("video/x-h264, stream-format=byte-stream, "
      "alignment=au, profile=constrained-baseline"),
  [LEGBA_VIDEO_CODEC_VP8] = "video/x-vp8",
  [LEGBA_VIDEO_CODEC_VP9] = "video/x-vp9",
  [LEGBA_VIDEO_CODEC_AV1] = "video/x-av1",
};

static const gchar *const codec_media_types[] = {
  [LEGBA_VIDEO_CODEC_H264] = "video/x-h264",
  [LEGBA_VIDEO_CODEC_VP8] = "video/x-vp8",
  [LEGBA_VIDEO_CODEC_VP9] = "video/x-vp9",
  [LEGBA_VIDEO_CODEC_AV1] = "video/x-av1",
};

/**
 * legba_video_codec_to_string:
 * @codec: a codec
 *
 * Gets the short name of a codec, the one legba_video_codec_from_string()
 * reads.
 *
 * Returns: the codec's short name ("h264", "vp8", ...)
 */
const gchar *
legba_video_codec_to_string (LegbaVideoCodec codec)
{
  static const gchar *const names[] = { "h264", "vp8", "vp9", "av1" };

  return codec < G_N_ELEMENTS (names) ? names[codec] : "unknown";
}

/**
 * legba_video_codec_from_string:
 * @name: a short name ("h264", "vp8", "vp9", "av1")
 * @codec: (out): the codec
 *
 * Reads the short name of a codec, as the tools' `--codec` options take it.
 *
 * Returns: whether @name names a codec
 */
gboolean
legba_video_codec_from_string (const gchar * name, LegbaVideoCodec * codec)
{
  g_autoptr (GEnumClass) klass = g_type_class_ref (LEGBA_TYPE_VIDEO_CODEC);
  GEnumValue *value = name ? g_enum_get_value_by_nick (klass, name) : NULL;

  if (value)
    *codec = value->value;
  return value != NULL;
}

/**
 * legba_video_codec_get_output_caps:
 * @codec: a codec
 *
 * The output caps suited to WebRTC: for H.264 byte-stream, AU-aligned,
 * constrained-baseline.
 *
 * Returns: (transfer full): the caps
 */
GstCaps *
legba_video_codec_get_output_caps (LegbaVideoCodec codec)
{
  g_return_val_if_fail (codec <= LEGBA_VIDEO_CODEC_AV1, NULL);
  return gst_caps_from_string (codec_caps[codec]);
}

/* ---- candidates ---- */

G_DEFINE_BOXED_TYPE (LegbaEncoderCandidate, legba_encoder_candidate,
    legba_encoder_candidate_ref, legba_encoder_candidate_unref);

/**
 * legba_encoder_candidate_ref:
 * @candidate: a candidate
 *
 * Takes a reference on @candidate.
 *
 * Returns: (transfer full): @candidate
 */
LegbaEncoderCandidate *
legba_encoder_candidate_ref (LegbaEncoderCandidate * candidate)
{
  g_atomic_ref_count_inc (&candidate->ref);
  return candidate;
}

/**
 * legba_encoder_candidate_unref:
 * @candidate: (transfer full): a candidate
 *
 * Drops a reference on @candidate; the last one frees it.
 */
void
legba_encoder_candidate_unref (LegbaEncoderCandidate * candidate)
{
  if (!g_atomic_ref_count_dec (&candidate->ref))
    return;
  g_free (candidate->factory_name);
  g_free (candidate->family);
  g_free (candidate);
}

/**
 * legba_encoder_candidate_get_factory_name:
 * @candidate: a candidate
 *
 * Gets the name of the candidate's element factory.
 *
 * Returns: the element factory name
 */
const gchar *
legba_encoder_candidate_get_factory_name (LegbaEncoderCandidate * candidate)
{
  return candidate->factory_name;
}

/**
 * legba_encoder_candidate_get_family:
 * @candidate: a candidate
 *
 * Gets the name of the encoder family the candidate belongs to, which
 * says how the one bitrate contract maps onto its properties (`x264`,
 * `va`, `vaapi`, `nvenc`, `qsv`, `vpx`, ...).
 *
 * Returns: (nullable): the family name, or %NULL for a factory of no known
 *   family
 */
const gchar *
legba_encoder_candidate_get_family (LegbaEncoderCandidate * candidate)
{
  return candidate->family;
}

/**
 * legba_encoder_candidate_is_hardware:
 * @candidate: a candidate
 *
 * Tells whether the candidate encodes on a device (a GPU or a dedicated
 * encoder) rather than on the CPU.
 *
 * Returns: whether the candidate encodes on a device
 */
gboolean
legba_encoder_candidate_is_hardware (LegbaEncoderCandidate * candidate)
{
  return candidate->hardware;
}

static LegbaEncoderCandidate *
candidate_new (const gchar * factory_name, GstElementFactory * factory)
{
  LegbaEncoderCandidate *c = g_new0 (LegbaEncoderCandidate, 1);
  guint n_families, index;
  const LegbaEncoderFamily *family =
      legba_encoder_family_lookup (factory_name, &index);
  const gchar *klass = factory ? gst_element_factory_get_metadata (factory,
      GST_ELEMENT_METADATA_KLASS) : NULL;

  legba_encoder_families (&n_families);
  g_atomic_ref_count_init (&c->ref);
  c->factory_name = g_strdup (factory_name);
  c->rank = factory ? gst_plugin_feature_get_rank (GST_PLUGIN_FEATURE
      (factory)) : 0;
  if (family) {
    c->family = g_strdup (family->name);
    c->hardware = family->hardware;
    c->order = index;
  } else {
    /* Unknown families after the known ones of their kind. */
    c->hardware = klass && strstr (klass, "Hardware") != NULL;
    c->order = n_families + (c->hardware ? 0 : 1);
  }
  return c;
}

/* Hardware first (unknown hardware after known hardware), software last,
 * then rank, then name. */
static gint
compare_candidates (gconstpointer a, gconstpointer b)
{
  const LegbaEncoderCandidate *ca = *(LegbaEncoderCandidate **) a;
  const LegbaEncoderCandidate *cb = *(LegbaEncoderCandidate **) b;

  if (ca->hardware != cb->hardware)
    return ca->hardware ? -1 : 1;
  if (ca->order != cb->order)
    return ca->order < cb->order ? -1 : 1;
  if (ca->rank != cb->rank)
    return ca->rank > cb->rank ? -1 : 1;
  return strcmp (ca->factory_name, cb->factory_name);
}

static gboolean
factory_is_candidate (GstElementFactory * factory, GstCaps * media)
{
  const gchar *klass = gst_element_factory_get_metadata (factory,
      GST_ELEMENT_METADATA_KLASS);

  /* legbavideoenc is a video encoder bin itself */
  if (g_str_has_prefix (GST_OBJECT_NAME (factory), "legba"))
    return FALSE;
  /* Codec/Encoder/Video, or Encoder/Video as openh264enc says */
  return klass && strstr (klass, "Encoder") && strstr (klass, "Video")
      && gst_element_factory_can_src_any_caps (factory, media);
}

/* LEGBA_ENCODER: factory names and/or a preference. */
static GStrv
parse_env (LegbaEncoderPrefer * prefer)
{
  const gchar *env = g_getenv (LEGBA_ENCODER_ENV);
  g_auto (GStrv) items = NULL;
  g_autoptr (GStrvBuilder) factories = g_strv_builder_new ();
  g_autoptr (GEnumClass) klass = NULL;

  if (!env || !*env)
    return NULL;
  klass = g_type_class_ref (LEGBA_TYPE_ENCODER_PREFER);
  items = g_strsplit (env, ",", -1);
  for (guint i = 0; items[i]; i++) {
    const gchar *item = g_strstrip (items[i]);
    GEnumValue *value = g_enum_get_value_by_nick (klass, item);

    if (value)
      *prefer = value->value;
    else if (*item)
      g_strv_builder_add (factories, item);
  }
  return g_strv_builder_end (factories);
}

static gboolean
prefer_keeps (LegbaEncoderPrefer prefer, LegbaEncoderCandidate * c)
{
  return prefer == LEGBA_ENCODER_PREFER_AUTO
      || (prefer == LEGBA_ENCODER_PREFER_HARDWARE) == c->hardware;
}

static GPtrArray *
candidates_from_names (const gchar * const *names, LegbaEncoderPrefer prefer,
    gboolean filter)
{
  GPtrArray *out = g_ptr_array_new_with_free_func ((GDestroyNotify)
      legba_encoder_candidate_unref);

  for (guint i = 0; names[i]; i++) {
    g_autoptr (GstElementFactory) factory = gst_element_factory_find (names[i]);
    LegbaEncoderCandidate *c = candidate_new (names[i], factory);

    c->named = TRUE;
    if (!filter || prefer_keeps (prefer, c))
      g_ptr_array_add (out, c);
    else
      legba_encoder_candidate_unref (c);
  }
  return out;
}

/**
 * legba_encoder_list_candidates:
 * @codec: the codec to produce
 * @prefer: which kinds of encoder to keep
 * @forced_factory: (nullable): a factory name that replaces every other
 *   candidate
 *
 * Lists the candidates in selection order: hardware families first
 * (NVENC, VA, VA-API, QSV, V4L2, VideoToolbox, AMF, OpenMAX through
 * gst-libav), then x264, openh264, libvpx, libaom; unknown families
 * after the known ones of their kind. The #LEGBA_ENCODER_ENV environment variable, when set,
 * replaces the registry's list and/or @prefer; @forced_factory replaces
 * both.
 *
 * Returns: (transfer container) (element-type LegbaEncoderCandidate): the
 *   candidates
 */
GPtrArray *
legba_encoder_list_candidates (LegbaVideoCodec codec,
    LegbaEncoderPrefer prefer, const gchar * forced_factory)
{
  g_auto (GStrv) env = NULL;
  g_autoptr (GstCaps) media = NULL;
  GList *factories;
  GPtrArray *out;

  g_return_val_if_fail (codec <= LEGBA_VIDEO_CODEC_AV1, NULL);
  legba_encoder_ensure_debug ();

  if (forced_factory && *forced_factory) {
    const gchar *names[] = { forced_factory, NULL };
    return candidates_from_names (names, prefer, FALSE);
  }
  env = parse_env (&prefer);
  if (env && env[0])
    return candidates_from_names ((const gchar * const *) env, prefer, TRUE);

  media = gst_caps_new_empty_simple (codec_media_types[codec]);
  out = g_ptr_array_new_with_free_func ((GDestroyNotify)
      legba_encoder_candidate_unref);
  factories = gst_element_factory_list_get_elements
      (GST_ELEMENT_FACTORY_TYPE_ENCODER | GST_ELEMENT_FACTORY_TYPE_MEDIA_VIDEO,
      GST_RANK_NONE);
  for (GList * l = factories; l; l = l->next) {
    GstElementFactory *factory = l->data;
    LegbaEncoderCandidate *c;

    if (!factory_is_candidate (factory, media))
      continue;
    c = candidate_new (GST_OBJECT_NAME (factory), factory);
    if (prefer_keeps (prefer, c))
      g_ptr_array_add (out, c);
    else
      legba_encoder_candidate_unref (c);
  }
  gst_plugin_feature_list_free (factories);
  g_ptr_array_sort (out, compare_candidates);
  return out;
}

/* ---- proofs ---- */

G_DEFINE_BOXED_TYPE (LegbaEncoderProof, legba_encoder_proof,
    legba_encoder_proof_ref, legba_encoder_proof_unref);

static LegbaEncoderProof *
proof_new (const gchar * factory_name, GError * error, gint64 duration_us)
{
  LegbaEncoderProof *p = g_new0 (LegbaEncoderProof, 1);

  g_atomic_ref_count_init (&p->ref);
  p->factory_name = g_strdup (factory_name);
  p->error = error;
  p->duration_us = duration_us;
  return p;
}

/**
 * legba_encoder_proof_ref:
 * @proof: a proof
 *
 * Takes a reference on @proof.
 *
 * Returns: (transfer full): @proof
 */
LegbaEncoderProof *
legba_encoder_proof_ref (LegbaEncoderProof * proof)
{
  g_atomic_ref_count_inc (&proof->ref);
  return proof;
}

/**
 * legba_encoder_proof_unref:
 * @proof: (transfer full): a proof
 *
 * Drops a reference on @proof; the last one frees it.
 */
void
legba_encoder_proof_unref (LegbaEncoderProof * proof)
{
  if (!g_atomic_ref_count_dec (&proof->ref))
    return;
  g_free (proof->factory_name);
  g_clear_error (&proof->error);
  g_free (proof);
}

/**
 * legba_encoder_proof_get_factory_name:
 * @proof: a proof
 *
 * Gets the name of the element factory the proof is about.
 *
 * Returns: the factory that was proved
 */
const gchar *
legba_encoder_proof_get_factory_name (LegbaEncoderProof * proof)
{
  return proof->factory_name;
}

/**
 * legba_encoder_proof_is_ok:
 * @proof: a proof
 *
 * Tells whether the proof succeeded.
 *
 * Returns: whether the factory encoded a frame within the time bound
 */
gboolean
legba_encoder_proof_is_ok (LegbaEncoderProof * proof)
{
  return proof->error == NULL;
}

/**
 * legba_encoder_proof_get_error:
 * @proof: a proof
 *
 * Gets why the proved factory was rejected.
 *
 * Returns: (nullable) (transfer none): why the factory was rejected, a
 *   #LEGBA_ENCODER_ERROR, or %NULL when it was proved
 */
const GError *
legba_encoder_proof_get_error (LegbaEncoderProof * proof)
{
  return proof->error;
}

/**
 * legba_encoder_proof_get_duration_us:
 * @proof: a proof
 *
 * Gets how long the proof took, from opening the encoder to its first
 * encoded frame or to its failure.
 *
 * Returns: how long the proof took, in microseconds (0 for a rejection
 *   that needed no pipeline)
 */
gint64
legba_encoder_proof_get_duration_us (LegbaEncoderProof * proof)
{
  return proof->duration_us;
}

const gchar *
legba_encoder_reason_name (gint code)
{
  switch (code) {
    case LEGBA_ENCODER_ERROR_UNAVAILABLE:
      return "unavailable";
    case LEGBA_ENCODER_ERROR_NO_DEVICE:
      return "no device";
    case LEGBA_ENCODER_ERROR_SESSION_LIMIT:
      return "session limit";
    case LEGBA_ENCODER_ERROR_CAPS:
      return "caps not supported";
    case LEGBA_ENCODER_ERROR_TIMED_OUT:
      return "timed out";
    case LEGBA_ENCODER_ERROR_UNKNOWN_FAMILY:
      return "unknown family";
    case LEGBA_ENCODER_ERROR_NO_CANDIDATE:
      return "no candidate";
    default:
      return "failed";
  }
}

/**
 * legba_encoder_proof_to_string:
 * @proof: a proof
 *
 * Describes the proof in one line, for logs and `legba-encoders`.
 *
 * Returns: (transfer full): "FACTORY: ok (N ms)" or "FACTORY: REASON:
 *   MESSAGE"
 */
gchar *
legba_encoder_proof_to_string (LegbaEncoderProof * proof)
{
  if (!proof->error)
    return g_strdup_printf ("%s: ok (%.1f ms)", proof->factory_name,
        proof->duration_us / 1000.0);
  return g_strdup_printf ("%s: %s: %s", proof->factory_name,
      legba_encoder_reason_name (proof->error->code), proof->error->message);
}

/**
 * legba_encoder_clear_proofs:
 *
 * Forgets every cached proof and every failure recorded while running.
 */
void
legba_encoder_clear_proofs (void)
{
  g_mutex_lock (&cache_lock);
  g_clear_pointer (&proofs, g_hash_table_unref);
  g_clear_pointer (&runtime_failures, g_hash_table_unref);
  g_mutex_unlock (&cache_lock);
}

/**
 * legba_encoder_record_failure:
 * @factory_name: a factory that failed while encoding
 * @error: what went wrong
 *
 * Marks @factory_name as failed for the rest of the process: its proofs
 * fail with @error from now on, so no later selection picks it again.
 */
void
legba_encoder_record_failure (const gchar * factory_name, const GError * error)
{
  g_return_if_fail (factory_name != NULL && error != NULL);

  legba_encoder_ensure_debug ();
  GST_WARNING ("%s failed while running: %s", factory_name, error->message);
  g_mutex_lock (&cache_lock);
  if (!runtime_failures)
    runtime_failures = g_hash_table_new_full (g_str_hash, g_str_equal,
        g_free, (GDestroyNotify) g_error_free);
  g_hash_table_replace (runtime_failures, g_strdup (factory_name),
      g_error_copy (error));
  g_mutex_unlock (&cache_lock);
}

static gchar *
proof_key (const gchar * factory_name, LegbaVideoCodec codec,
    GstCaps * raw_caps, GstCaps * output_caps)
{
  g_autofree gchar *raw = gst_caps_to_string (raw_caps);
  g_autofree gchar *out = gst_caps_to_string (output_caps);

  return g_strdup_printf ("%s|%d|%s|%s", factory_name, codec, raw, out);
}

static LegbaEncoderProof *
cache_lookup (const gchar * key, const gchar * factory_name)
{
  LegbaEncoderProof *found = NULL;
  GError *failure;

  g_mutex_lock (&cache_lock);
  failure = runtime_failures ?
      g_hash_table_lookup (runtime_failures, factory_name) : NULL;
  if (failure)
    found = proof_new (factory_name, g_error_copy (failure), 0);
  else if (proofs && (found = g_hash_table_lookup (proofs, key)))
    legba_encoder_proof_ref (found);
  g_mutex_unlock (&cache_lock);
  return found;
}

static void
cache_store (const gchar * key, LegbaEncoderProof * proof)
{
  g_mutex_lock (&cache_lock);
  if (!proofs)
    proofs = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
        (GDestroyNotify) legba_encoder_proof_unref);
  g_hash_table_replace (proofs, g_strdup (key),
      legba_encoder_proof_ref (proof));
  g_mutex_unlock (&cache_lock);
}

/**
 * legba_encoder_prove:
 * @factory_name: the factory to prove
 * @codec: the codec it must produce
 * @raw_caps: the fixed raw video caps it will be fed
 * @output_caps: (nullable): the caps it must produce; %NULL for
 *   legba_video_codec_get_output_caps()
 * @timeout_ms: the time bound, from opening the encoder to its first
 *   encoded frame
 *
 * Proves that @factory_name works here: instantiates it, brings it to
 * PAUSED with @raw_caps and has it encode one frame within @timeout_ms.
 * The result is cached per process (per factory, codec and caps) and
 * logged in the `legbaencoder` debug category.
 *
 * Returns: (transfer full): the proof, never %NULL
 */
LegbaEncoderProof *
legba_encoder_prove (const gchar * factory_name, LegbaVideoCodec codec,
    GstCaps * raw_caps, GstCaps * output_caps, guint timeout_ms)
{
  g_autoptr (GstCaps) out = NULL;
  g_autofree gchar *key = NULL;
  LegbaEncoderProof *proof;
  gint64 start;
  GError *error;

  g_return_val_if_fail (factory_name != NULL, NULL);
  g_return_val_if_fail (GST_IS_CAPS (raw_caps), NULL);
  g_return_val_if_fail (codec <= LEGBA_VIDEO_CODEC_AV1, NULL);

  legba_encoder_ensure_debug ();
  out = output_caps ? gst_caps_ref (output_caps) :
      legba_video_codec_get_output_caps (codec);
  key = proof_key (factory_name, codec, raw_caps, out);
  proof = cache_lookup (key, factory_name);
  if (proof) {
    GST_DEBUG ("cached: %s", proof->error ? proof->error->message : "ok");
    return proof;
  }
  start = g_get_monotonic_time ();
  error = legba_encoder_run_proof (factory_name, raw_caps, out, timeout_ms);
  proof = proof_new (factory_name, error, g_get_monotonic_time () - start);
  if (error)
    GST_INFO ("rejected %s for %" GST_PTR_FORMAT ": %s: %s", factory_name,
        raw_caps, legba_encoder_reason_name (error->code), error->message);
  else
    GST_INFO ("proved %s for %" GST_PTR_FORMAT " in %" G_GINT64_FORMAT
        " us", factory_name, raw_caps, proof->duration_us);
  cache_store (key, proof);
  return proof;
}

/* ---- selection ---- */

/**
 * legba_encoder_select:
 * @codec: the codec to produce
 * @raw_caps: the fixed raw video caps the encoder will be fed
 * @output_caps: (nullable): the caps it must produce; %NULL for
 *   legba_video_codec_get_output_caps()
 * @prefer: which kinds of encoder are candidates
 * @forced_factory: (nullable): the only candidate, if set
 * @timeout_ms: time bound of each proof
 * @rejected: (out) (optional) (transfer container)
 *   (element-type LegbaEncoderProof): the candidates rejected before the
 *   one selected, in order
 * @error: return location for a #LEGBA_ENCODER_ERROR
 *
 * Proves the candidates of legba_encoder_list_candidates() in order and
 * returns the first that works. A factory of no known family is a
 * candidate only when forced or named in #LEGBA_ENCODER_ENV (it is then
 * used unconfigured).
 *
 * Returns: (transfer full) (nullable): the proof of the selected factory,
 *   or %NULL with %LEGBA_ENCODER_ERROR_NO_CANDIDATE
 */
LegbaEncoderProof *
legba_encoder_select (LegbaVideoCodec codec, GstCaps * raw_caps,
    GstCaps * output_caps, LegbaEncoderPrefer prefer,
    const gchar * forced_factory, guint timeout_ms, GPtrArray ** rejected,
    GError ** error)
{
  g_autoptr (GPtrArray) candidates = NULL;
  g_autoptr (GPtrArray) failed = g_ptr_array_new_with_free_func
      ((GDestroyNotify) legba_encoder_proof_unref);
  g_autoptr (GString) reasons = g_string_new (NULL);
  LegbaEncoderProof *selected = NULL;
  g_return_val_if_fail (GST_IS_CAPS (raw_caps), NULL);

  candidates = legba_encoder_list_candidates (codec, prefer, forced_factory);
  for (guint i = 0; i < candidates->len && !selected; i++) {
    LegbaEncoderCandidate *c = g_ptr_array_index (candidates, i);
    LegbaEncoderProof *proof;

    if (!c->family && !c->named)
      proof = proof_new (c->factory_name, g_error_new (LEGBA_ENCODER_ERROR,
              LEGBA_ENCODER_ERROR_UNKNOWN_FAMILY,
              "no property mapping for this family; set encoder-factory "
              "to use it anyway"), 0);
    else
      proof = legba_encoder_prove (c->factory_name, codec, raw_caps,
          output_caps, timeout_ms);
    if (legba_encoder_proof_is_ok (proof)) {
      selected = proof;
    } else {
      g_autofree gchar *text = legba_encoder_proof_to_string (proof);
      g_string_append_printf (reasons, "%s%s", reasons->len ? "; " : "", text);
      g_ptr_array_add (failed, proof);
    }
  }
  if (rejected)
    *rejected = g_steal_pointer (&failed);
  if (!selected)
    g_set_error (error, LEGBA_ENCODER_ERROR, LEGBA_ENCODER_ERROR_NO_CANDIDATE,
        "no %s encoder works here%s%s", legba_video_codec_to_string (codec),
        reasons->len ? ": " : " (no candidate in the registry)", reasons->str);
  return selected;
}

/* ---- report ---- */

/**
 * legba_encoder_report:
 * @codec: the codec
 * @raw_caps: (nullable): the raw caps to prove with; %NULL for I420
 *   1280x720 at 30 fps
 * @prefer: which kinds of encoder are candidates
 * @timeout_ms: time bound of each proof
 *
 * Proves every candidate for @codec and describes the outcome, one line per
 * candidate in selection order, then the one selected: the text of
 * `legba-encoders` and `legba-call --list-encoders`.
 *
 * Returns: (transfer full): the report
 */
gchar *
legba_encoder_report (LegbaVideoCodec codec, GstCaps * raw_caps,
    LegbaEncoderPrefer prefer, guint timeout_ms)
{
  g_autoptr (GPtrArray) candidates =
      legba_encoder_list_candidates (codec, prefer, NULL);
  g_autoptr (GstCaps) caps = raw_caps ? gst_caps_ref (raw_caps) :
      gst_caps_from_string ("video/x-raw, format=I420, width=1280, "
      "height=720, framerate=30/1, pixel-aspect-ratio=1/1");
  g_autofree gchar *caps_text = gst_caps_to_string (caps);
  GString *report = g_string_new (NULL);
  const gchar *selected = NULL;

  g_string_append_printf (report, "%s (%s)\n",
      legba_video_codec_to_string (codec), caps_text);
  for (guint i = 0; i < candidates->len; i++) {
    LegbaEncoderCandidate *c = g_ptr_array_index (candidates, i);
    g_autoptr (LegbaEncoderProof) proof = NULL;
    g_autofree gchar *text = NULL;

    if (c->family)
      proof = legba_encoder_prove (c->factory_name, codec, caps, NULL,
          timeout_ms);
    else
      proof = proof_new (c->factory_name, g_error_new (LEGBA_ENCODER_ERROR,
              LEGBA_ENCODER_ERROR_UNKNOWN_FAMILY,
              "no property mapping for this family"), 0);
    if (!selected && legba_encoder_proof_is_ok (proof))
      selected = c->factory_name;
    text = legba_encoder_proof_to_string (proof);
    g_string_append_printf (report, "  %2u. %-10s %-8s %s\n", i + 1,
        c->family ? c->family : "?", c->hardware ? "hardware" : "software",
        text);
  }
  g_string_append_printf (report, "  selected: %s\n",
      selected ? selected : "none");
  return g_string_free (report, FALSE);
}
