/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The wire rules of docs/room-protocol.md §4 without any I/O: how a signal is
 * written and measured, checked, split into `part` messages and put back
 * together. LegbaSignalClient uses them; unit tests cover them alone.
 */
#pragma once

#include <legba/signal/legba-signaller.h>

G_BEGIN_DECLS

/* docs/room-protocol.md §4: the strictest common limits of Pusher servers. */
#define LEGBA_SIGNAL_DEFAULT_EVENT_BYTES 10000
#define LEGBA_SIGNAL_DEFAULT_EVENTS_PER_WINDOW 10
#define LEGBA_SIGNAL_RATE_WINDOW_US (1100 * G_TIME_SPAN_MILLISECOND)
#define LEGBA_SIGNAL_PART_TIMEOUT_US (10 * G_TIME_SPAN_SECOND)
/* Bounds on what a receiver keeps for unfinished `part` sets. */
#define LEGBA_SIGNAL_MAX_PARTS 256
#define LEGBA_SIGNAL_MAX_PENDING_SETS 64
#define LEGBA_SIGNAL_MAX_PENDING_BYTES (4 * 1024 * 1024)

/* Appends node as JavaScript's JSON.stringify writes it: compact, members
 * in order, non-ASCII and '/' unescaped, control characters as \b \f \n
 * \r \t or \u00xx, numbers in JavaScript's shortest form. The UTF-8 length
 * of this text is the size §4 counts. */
void legba_json_write (GString * out, JsonNode * node);
char *legba_json_object_to_string (JsonObject * object, gsize * len);

/* A received signal is well-formed: `to`, `from`, `pc` and `type` strings
 * and the fields its type needs (offer and answer: `sdp`; candidates: a
 * `candidates` array of objects and an optional boolean `end`; part: `id`,
 * `part`, `parts`, `chunk`). Types this version does not know pass. */
gboolean legba_signal_check (JsonObject * signal, GError ** error);

/* The `data` texts to send for signal (which has its `to` and `from`):
 * the signal itself when it fits in limit bytes, else `part` messages
 * with the given id, each within limit. Fails (LEGBA_SIGNAL_ERROR_TOO_LARGE)
 * when no split fits. */
GPtrArray *legba_signal_split (JsonObject * signal, const char *id,
    gsize limit, GError ** error);

typedef struct _LegbaSignalReassembler LegbaSignalReassembler;

LegbaSignalReassembler *legba_signal_reassembler_new (void);
void legba_signal_reassembler_free (LegbaSignalReassembler * self);

/* Takes one checked `part` message; returns the whole signal once every
 * part of its (from, id) set is in (checked, with the to, from and pc of
 * its parts), else NULL. Returns NULL with error set when the part is
 * refused or completes a malformed signal. */
JsonObject *legba_signal_reassembler_add (LegbaSignalReassembler * self,
    JsonObject * part, gint64 now_us, GError ** error);

/* Drops the sets started more than LEGBA_SIGNAL_PART_TIMEOUT_US before
 * now_us; returns how many sets remain. */
guint legba_signal_reassembler_expire (LegbaSignalReassembler * self,
    gint64 now_us);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (LegbaSignalReassembler,
    legba_signal_reassembler_free)

G_END_DECLS
