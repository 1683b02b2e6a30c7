/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Encoder families: how each family of encoder elements is driven through
 * the one contract of LegbaEncoderSettings. Private to the library and its
 * unit tests.
 */
#pragma once

#include <legba/encoder/legba-encoder.h>

G_BEGIN_DECLS

/*
 * LegbaEncoderFamily:
 * @name: family name ("x264", "nvenc", ...)
 * @patterns: space-separated glob patterns of factory names
 * @hardware: whether the family encodes on a device
 * @v4l2_controls: the settings are V4L2 controls carried by the
 *   element's `extra-controls` structure, not properties
 * @bitrate: property (or V4L2 control) for the target bitrate
 * @bitrate_scale: bit/s divided by this gives the property's unit (1 for
 *   bit/s, 1000 for kbit/s)
 * @max_bitrate: (nullable): property for the peak bitrate; when NULL the
 *   target itself is kept at or below the cap
 * @max_bitrate_scale: as @bitrate_scale, for @max_bitrate
 * @bitrate_mutable: the element applies bitrate changes while PLAYING
 * @keyframe: property (or control) for the key-frame interval in frames
 * @realtime: space-separated `name=value` settings of the realtime latency
 *   mode; a leading `?` marks a property the element registers only when
 *   its device supports it
 * @speed: `name=value` settings for each #LegbaEncoderSpeed
 * @frame_drop: (nullable): boolean property that turns frame dropping
 *   on; set only when the cap is below @frame_drop_bpp (families whose
 *   frame dropping is always on carry it in @realtime)
 * @frame_drop_bpp: bits per pixel per frame below which the family cannot
 *   hold the cap without dropping frames
 *
 * One row of the family table. The table's order is the selection order.
 */
typedef struct
{
  const gchar *name;
  const gchar *patterns;
  gboolean hardware;
  gboolean v4l2_controls;
  const gchar *bitrate;
  guint bitrate_scale;
  const gchar *max_bitrate;
  guint max_bitrate_scale;
  gboolean bitrate_mutable;
  const gchar *keyframe;
  const gchar *realtime;
  const gchar *speed[3];
  const gchar *frame_drop;
  gdouble frame_drop_bpp;
} LegbaEncoderFamily;

const LegbaEncoderFamily *legba_encoder_families (guint * n_families);
const LegbaEncoderFamily *legba_encoder_family_lookup (const gchar *
    factory_name, guint * index);

const gchar *legba_encoder_reason_name (gint code);
GError *legba_encoder_run_proof (const gchar * factory_name,
    GstCaps * raw_caps, GstCaps * output_caps, guint timeout_ms);
void legba_encoder_ensure_debug (void);

G_END_DECLS
