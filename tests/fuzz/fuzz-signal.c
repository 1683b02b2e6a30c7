/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * libFuzzer target: the room signals' codec (legba-signal-codec.h), as
 * LegbaSignalClient uses it on what other participants send. The input is
 * a script, one step per line:
 *
 *   !tick SECONDS             advance the clock; the reassembler expires
 *                             what is older than its timeout
 *   !split LIMIT SHIFT JSON   JSON, when it is a valid signal (not a
 *                             part), split for a LIMIT of bytes; the
 *                             texts are fed to a reassembler of their own
 *                             starting at text SHIFT (mod their number)
 *   JSON                      a received signal: checked, and a part goes
 *                             to the reassembler every such line shares
 *
 * What must hold, or the target aborts:
 * - every whole signal the reassembler gives passes legba_signal_check()
 *   and is not a part;
 * - a split gives texts within the limit, each a signal that passes the
 *   check (parts when there are several), and its parts, fed in turn
 *   from any one of them (wrapping round), reassemble to a signal that is
 *   written exactly as the original.
 */
#include <legba/common/legba-json.h>
#include <legba/signal/legba-signal-codec.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

typedef struct
{
  LegbaSignalReassembler *reassembler;
  gint64 now;
} Harness;

static JsonObject *
parse_object (const char *text, gsize len)
{
  g_autoptr (JsonNode) root = legba_json_parse_strict (text, len, NULL, NULL,
      NULL);

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return NULL;
  return json_object_ref (json_node_get_object (root));
}

static gboolean
is_part (JsonObject * signal)
{
  return g_strcmp0 (legba_json_object_get_string (signal, "type"), "part") == 0;
}

static void
check_whole (JsonObject * whole)
{
  if (!legba_signal_check (whole, NULL) || is_part (whole))
    abort ();
}

static void
received (Harness * h, const char *text, gsize len)
{
  g_autoptr (JsonObject) signal = parse_object (text, len);
  g_autoptr (JsonObject) whole = NULL;

  if (signal == NULL || !legba_signal_check (signal, NULL) || !is_part (signal))
    return;
  whole = legba_signal_reassembler_add (h->reassembler, signal, h->now, NULL);
  if (whole != NULL)
    check_whole (whole);
}

static void
split (Harness * h, gsize limit, guint shift, const char *text, gsize len)
{
  g_autoptr (JsonObject) signal = parse_object (text, len);
  g_autoptr (GPtrArray) texts = NULL;
  g_autoptr (LegbaSignalReassembler) reassembler = NULL;
  g_autoptr (JsonObject) whole = NULL;
  g_autofree char *original = NULL, *again = NULL;

  if (signal == NULL || !legba_signal_check (signal, NULL) || is_part (signal))
    return;
  texts = legba_signal_split (signal, "fz", limit, NULL);
  if (texts == NULL)
    return;
  original = legba_json_object_to_string (signal, NULL);
  if (texts->len == 1) {
    if (strlen (texts->pdata[0]) > limit || strcmp (texts->pdata[0],
            original) != 0)
      abort ();
    return;
  }
  reassembler = legba_signal_reassembler_new ();
  for (guint i = 0; i < texts->len; i++) {
    const char *part_text = texts->pdata[(i + shift) % texts->len];
    g_autoptr (JsonObject) part = NULL;

    if (strlen (part_text) > limit)
      abort ();
    part = parse_object (part_text, strlen (part_text));
    if (part == NULL || !legba_signal_check (part, NULL) || !is_part (part))
      abort ();
    if (whole != NULL)
      abort ();
    whole = legba_signal_reassembler_add (reassembler, part, h->now, NULL);
  }
  if (whole == NULL)
    abort ();
  check_whole (whole);
  again = legba_json_object_to_string (whole, NULL);
  if (strcmp (original, again) != 0)
    abort ();
}

static gboolean
take_number (const char **p, const char *end, guint64 * out)
{
  const char *start = *p;
  guint64 n = 0;

  while (*p < end && g_ascii_isdigit (**p) && n < G_MAXUINT32)
    n = n * 10 + (guint64) (*(*p)++ - '0');
  if (*p == start)
    return FALSE;
  if (*p < end && **p == ' ')
    (*p)++;
  *out = n;
  return TRUE;
}

static void
harness_line (Harness * h, const char *line, gsize len)
{
  const char *end = line + len, *p;
  guint64 a, b;

  if (len > 6 && memcmp (line, "!tick ", 6) == 0) {
    p = line + 6;
    if (take_number (&p, end, &a)) {
      h->now += (gint64) a *G_USEC_PER_SEC;
      legba_signal_reassembler_expire (h->reassembler, h->now);
    }
  } else if (len > 7 && memcmp (line, "!split ", 7) == 0) {
    p = line + 7;
    if (take_number (&p, end, &a) && take_number (&p, end, &b))
      split (h, (gsize) a, (guint) b, p, end - p);
  } else {
    received (h, line, len);
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  const char *text = (const char *) data, *end = text + size;
  Harness h = { legba_signal_reassembler_new (), G_USEC_PER_SEC };

  while (text < end) {
    const char *newline = memchr (text, '\n', end - text);
    const char *line_end = newline ? newline : end;

    harness_line (&h, text, line_end - text);
    text = line_end + 1;
  }
  legba_signal_reassembler_free (h.reassembler);
  return 0;
}
