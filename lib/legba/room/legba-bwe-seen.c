/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The transport-wide sequence numbers reported so far
 * (draft-holmer-rmcat-transport-wide-cc-extensions-01 §3.1: 16 bits on the
 * wire), unwrapped against the highest seen, with what each report said
 * of the last LEGBA_BWE_SEEN: a packet reported twice counts once, one
 * reported lost and then received counts as received.
 */
#include <legba/room/legba-bwe-private.h>

enum
{
  NONE,
  LOST,
  RECEIVED,
};

static gint64
unwrap (LegbaBweSeen * s, guint seq)
{
  gint16 delta;

  if (!s->have_seq) {
    s->have_seq = TRUE;
    /* far from 0, so that unwrapped numbers stay positive */
    s->highest = ((gint64) 1 << 32) + (seq & 0xffff);
    return s->highest;
  }
  delta = (gint16) (guint16) ((seq & 0xffff) - (s->highest & 0xffff));
  if (delta > 0)
    s->highest += delta;
  return s->highest + MIN (delta, 0);
}

/* What a report of seq (lost or not) adds; *unwrapped is set unless it
 * is too old. */
LegbaBweSeenNews
legba_bwe_seen_take (LegbaBweSeen * s, guint seq, gboolean lost,
    gint64 * unwrapped)
{
  gint64 u = unwrap (s, seq);
  LegbaBweSeenEntry *e;

  if (u <= s->highest - LEGBA_BWE_SEEN)
    return LEGBA_BWE_SEEN_OLD;
  *unwrapped = u;
  e = &s->entries[u % LEGBA_BWE_SEEN];
  if (e->seq == u && e->state != NONE) {
    if (e->state == RECEIVED || lost)
      return LEGBA_BWE_SEEN_OLD;
    e->state = RECEIVED;
    return LEGBA_BWE_SEEN_RECOVERED;
  }
  e->seq = u;
  e->state = lost ? LOST : RECEIVED;
  return LEGBA_BWE_SEEN_NEW;
}
