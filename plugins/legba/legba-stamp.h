/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Pixel timestamps for glass-to-glass latency (docs/benchmarks.md,
 * "Runs": read from a timestamp written into the pixels before encoding
 * and read back after decoding). The legbastamp and legbastampcheck
 * elements are thin wrappers over this file.
 *
 * The code: 64 bits, laid out as a grid of 4 rows of 32 square cells in the
 * top-left corner of the frame. Each bit is a pair of neighbouring cells,
 * the first bright and the second dark for a 1, the other way round for a
 * 0, so reading needs no threshold: a bit is whichever cell of its pair is
 * brighter, after averaging the inner half of each cell (the edges are
 * what a lossy codec blurs). A pair whose cells differ by less than a
 * fixed contrast means "no code here". The bits, most significant first:
 *
 *   32 bits  CLOCK_MONOTONIC in microseconds, low 32 bits (wraps after
 *            71 minutes; latencies are taken modulo 2^32)
 *   16 bits  frame counter (wraps after 65,536 frames)
 *   16 bits  check value: CRC-16/CCITT-FALSE of the 6 bytes above
 *
 * Bright cells are Y' 235 with neutral chroma (R'G'B' 255 in RGB formats),
 * dark cells Y' 16 (R'G'B' 0); alpha is opaque. Lines are read and written
 * through the format's own unpack and pack functions (GstVideoFormatInfo),
 * so every raw format GStreamer can convert is handled the same way, with
 * the frame's own strides and plane offsets (video meta included).
 *
 * Thread contract: a LegbaStampLayout and a LegbaStampStats are each used
 * by one thread at a time; the elements guard their stats with the
 * object lock.
 */
#pragma once

#include <gst/video/video.h>

G_BEGIN_DECLS

/* Rows and columns of cells; two columns carry one bit. */
#define LEGBA_STAMP_ROWS 4
#define LEGBA_STAMP_COLUMNS 32
#define LEGBA_STAMP_BITS (LEGBA_STAMP_ROWS * LEGBA_STAMP_COLUMNS / 2)

/* The smallest cell side in pixels: below it the frame cannot carry the
 * code (a frame of at least 64x8 pixels can). */
#define LEGBA_STAMP_MIN_CELL 2

typedef struct
{
  guint32 time_us;              /* CLOCK_MONOTONIC, microseconds, low bits */
  guint16 counter;
} LegbaStampCode;

typedef enum
{
  LEGBA_STAMP_READ_OK,
  LEGBA_STAMP_READ_NO_CODE,     /* a pair of cells without contrast */
  LEGBA_STAMP_READ_BAD_CHECK,   /* every pair readable, check value wrong */
} LegbaStampReadResult;

guint32 legba_stamp_now_us (void);

GstCaps *legba_stamp_caps (void);

guint legba_stamp_cell_for_band (guint width, guint height,
    guint band_height);

/* ---- reading and writing frames ---- */

typedef struct _LegbaStampLayout LegbaStampLayout;

LegbaStampLayout *legba_stamp_layout_new (const GstVideoInfo * info,
    guint band_height);
void legba_stamp_layout_free (LegbaStampLayout * layout);
guint legba_stamp_layout_get_cell (const LegbaStampLayout * layout);
void legba_stamp_layout_write (LegbaStampLayout * layout,
    GstVideoFrame * frame, const LegbaStampCode * code);
LegbaStampReadResult legba_stamp_layout_read (LegbaStampLayout * layout,
    const GstVideoFrame * frame, LegbaStampCode * code);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (LegbaStampLayout, legba_stamp_layout_free)

/* The bits of a code as the cells carry them, and back: exposed for tests. */
void legba_stamp_code_to_bits (const LegbaStampCode * code,
    guint8 bits[LEGBA_STAMP_BITS]);
gboolean legba_stamp_code_from_bits (const guint8 bits[LEGBA_STAMP_BITS],
    LegbaStampCode * code);

/* ---- what the checker counts ---- */

typedef enum
{
  LEGBA_STAMP_FRAME_NEW,        /* first time seen, in order */
  LEGBA_STAMP_FRAME_REORDERED,  /* first time seen, after a later frame */
  LEGBA_STAMP_FRAME_DUPLICATE,  /* seen before */
} LegbaStampFrameKind;

typedef struct
{
  guint64 frames;               /* frames looked at */
  guint64 valid;                /* whose code passed its check */
  guint64 failed;               /* without a readable code */
  guint64 lost;                 /* counters skipped and not seen since */
  guint64 duplicated;
  guint64 reordered;
  guint first_counter;          /* counter of the first valid frame */
  guint64 n;                    /* latency samples: first sightings */
  gdouble p50_ms, p95_ms, p99_ms;       /* nearest rank; -1 when n is 0 */
  gdouble min_ms, max_ms, mean_ms;
} LegbaStampSummary;

typedef struct _LegbaStampStats LegbaStampStats;

LegbaStampStats *legba_stamp_stats_new (void);
void legba_stamp_stats_free (LegbaStampStats * stats);
LegbaStampFrameKind legba_stamp_stats_add (LegbaStampStats * stats,
    guint16 counter, guint32 latency_us);
void legba_stamp_stats_add_failed (LegbaStampStats * stats);
void legba_stamp_stats_summarize (LegbaStampStats * stats,
    LegbaStampSummary * summary);
const guint32 *legba_stamp_stats_get_latencies (LegbaStampStats * stats,
    guint * n);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (LegbaStampStats, legba_stamp_stats_free)

G_END_DECLS
