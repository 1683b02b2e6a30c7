/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * JSON from the network, read strictly.
 *
 * json-glib 1.6 parses recursively without a depth bound (a frame of
 * 200,000 '[' overflows the stack) and accepts text that is not JSON
 * (single quotes, comments, hex numbers); it also turns an unpaired UTF-16
 * surrogate escape into invalid UTF-8 and cuts strings at "\u0000".
 * legba_json_parse_strict() checks the text against RFC 8259 first, with a
 * nesting bound, and only then hands it to json-glib.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Nesting deeper than this (arrays and objects) is refused. */
#define LEGBA_JSON_MAX_DEPTH 64

/* The raw text of one member's value inside the parsed text. */
typedef struct
{
  const char *start;            /* NULL when the member is absent */
  gsize len;
} LegbaJsonSpan;

/* Parses len bytes of text as one RFC 8259 JSON value: UTF-8, no NUL byte,
 * nesting within LEGBA_JSON_MAX_DEPTH, no "\u0000" and no unpaired
 * surrogate escape. When keys (NULL-terminated) is given and the value is an
 * object, spans[i] receives the raw text of its member keys[i] (the last
 * one when a name repeats), so a caller can forward it byte for byte.
 * Returns the root (free with json_node_unref), or NULL with
 * *error_message set (free with g_free). */
JsonNode *legba_json_parse_strict (const char *text, gsize len,
    const char *const *keys, LegbaJsonSpan * spans, char **error_message);

/* The checks of legba_json_parse_strict() alone, spans included, with no
 * tree built: TRUE when text is such a JSON value, else FALSE with
 * *error_message set (free with g_free). */
gboolean legba_json_check_strict (const char *text, gsize len,
    const char *const *keys, LegbaJsonSpan * spans, char **error_message);

/* What legba_json_check_strict_full() checks beyond RFC 8259. */
typedef enum
{
  /* Integers (numbers written without a fraction or an exponent) fit in
   * a gint64: json-glib 1.6 reads a larger one wrapped round (2^64 as 0)
   * instead of failing. */
  LEGBA_JSON_CHECK_INT64 = 1 << 0,
} LegbaJsonCheckFlags;

/* legba_json_check_strict(), with flags. */
gboolean legba_json_check_strict_full (const char *text, gsize len,
    LegbaJsonCheckFlags flags, const char *const *keys, LegbaJsonSpan * spans,
    char **error_message);

/* When span (of a checked text) is a string literal without escapes whose
 * content fits in size bytes with its NUL, copies the content to buffer
 * and returns TRUE; otherwise FALSE (absent, not a string, an escape,
 * too long). */
gboolean legba_json_span_get_plain_string (const LegbaJsonSpan * span,
    char *buffer, gsize size);

/* The member name of obj when it is a string; NULL when absent or of
 * another type. Never warns. */
const char *legba_json_object_get_string (JsonObject * obj, const char *name);

/* Appends str as a JSON string literal (quotes included). Invalid UTF-8 is
 * replaced by U+FFFD, so the output is always valid JSON text. */
void legba_json_append_string (GString * out, const char *str);

G_END_DECLS
