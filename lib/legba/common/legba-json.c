/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * JSON from the network, read strictly (see legba-json.h).
 */
#include <legba/common/legba-json.h>

#include <string.h>

/* A recursive-descent check of RFC 8259 that also notes where the chosen
 * members of the top-level object (depth 1) start and end. Each step takes
 * the position it starts at and returns the one after what it read, or
 * NULL with the position of the fault (and a reason when there is one
 * worth giving) noted. */
typedef struct
{
  const char *end;
  const char *const *keys;      /* NULL-terminated */
  LegbaJsonSpan *spans;         /* one per key */
  const char *error;
  const char *error_at;
  LegbaJsonCheckFlags flags;
} JsonScan;

static const char *scan_value (JsonScan * s, const char *p, guint depth);

static const char *
scan_fail (JsonScan * s, const char *p, const char *error)
{
  s->error_at = p;
  s->error = error;
  return NULL;
}

/* whitespace is at most ' ': one comparison for anything else */
static inline const char *
scan_ws (const char *p, const char *end)
{
  while (p < end && (guchar) * p <= ' ' && (*p == ' ' || *p == '\t'
          || *p == '\n' || *p == '\r'))
    p++;
  return p;
}

static gint
scan_hex4 (const char *p, const char *end)
{
  gint v = 0;

  if (end - p < 4)
    return -1;
  for (guint i = 0; i < 4; i++) {
    if (!g_ascii_isxdigit (p[i]))
      return -1;
    v = v * 16 + g_ascii_xdigit_value (p[i]);
  }
  return v;
}

/* After a backslash. json-glib cannot hold U+0000 in a string and turns
 * unpaired surrogates into invalid UTF-8: both are refused. */
static const char *
scan_escape (JsonScan * s, const char *p)
{
  gint u;

  if (p >= s->end)
    return scan_fail (s, p, NULL);
  if (*p != 'u') {
    if (*p != '\0' && strchr ("\"\\/bfnrt", *p) != NULL)
      return p + 1;
    return scan_fail (s, p, NULL);
  }
  if ((u = scan_hex4 (p + 1, s->end)) < 0)
    return scan_fail (s, p, NULL);
  p += 5;
  if (u == 0)
    return scan_fail (s, p, "\\u0000 in a string is not supported");
  if (u >= 0xdc00 && u <= 0xdfff)
    return scan_fail (s, p, "unpaired UTF-16 surrogate in a string");
  if (u >= 0xd800 && u <= 0xdbff) {
    if (s->end - p < 2 || p[0] != '\\' || p[1] != 'u')
      return scan_fail (s, p, "unpaired UTF-16 surrogate in a string");
    u = scan_hex4 (p + 2, s->end);
    if (u < 0xdc00 || u > 0xdfff)
      return scan_fail (s, p, "unpaired UTF-16 surrogate in a string");
    p += 6;
  }
  return p;
}

/* Bytes a string's scan stops at: the closing quote, a backslash, a
 * control character (refused) and the first byte of a multi-byte UTF-8
 * sequence (validated). */
static const guint8 string_stop[256] = {
  [0x00 ... 0x1f] = 1,
  ['"'] = 1,
  ['\\'] = 1,
  [0x80 ... 0xff] = 1,
};

/* At a byte of string_stop other than the closing quote: an escape or a
 * multi-byte character, or the string's fault. */
G_GNUC_NO_INLINE static const char *
scan_string_stop (JsonScan * s, const char *p)
{
  guchar c = *p;

  if (c == '\\')
    return scan_escape (s, p + 1);
  if (c >= 0x80) {
    /* one character: the rest of the text bounds it */
    if (g_utf8_get_char_validated (p, s->end - p) < (gunichar) - 2)
      return g_utf8_next_char (p);
    return scan_fail (s, p, "not valid UTF-8 text");
  }
  return scan_fail (s, p, NULL);        /* a control character */
}

/* At the opening quote. */
static const char *
scan_string (JsonScan * s, const char *p)
{
  const char *end = s->end;

  p++;
  for (;;) {
    while (p < end && !string_stop[(guchar) * p])
      p++;
    if (p >= end)
      return scan_fail (s, p, NULL);
    if (*p == '"')
      return p + 1;
    if ((p = scan_string_stop (s, p)) == NULL)
      return NULL;
  }
}

static inline const char *
scan_digits (const char *p, const char *end)
{
  while (p < end && (guchar) (*p - '0') < 10)
    p++;
  return p;
}

/* Whether the digits of an integer, n of them at p, negative or not, are
 * beyond what a gint64 holds. */
static gboolean
scan_integer_too_big (const char *p, gsize n, gboolean negative)
{
  const char *max = negative ? "9223372036854775808" : "9223372036854775807";

  return n > 19 || (n == 19 && memcmp (p, max, 19) > 0);
}

static const char *
scan_number (JsonScan * s, const char *p)
{
  const char *end = s->end, *digits, *integer;
  gboolean negative = *p == '-';

  if (negative)
    p++;
  integer = p;
  if (p < end && *p == '0') {
    p++;
  } else {
    digits = p;
    if ((p = scan_digits (p, end)) == digits)
      return scan_fail (s, p, NULL);
  }
  if ((s->flags & LEGBA_JSON_CHECK_INT64) && p - integer >= 19 &&
      (p >= end || (*p != '.' && *p != 'e' && *p != 'E')) &&
      scan_integer_too_big (integer, p - integer, negative))
    return scan_fail (s, integer, "an integer beyond 64 bits");
  if (p < end && *p == '.') {
    digits = ++p;
    if ((p = scan_digits (p, end)) == digits)
      return scan_fail (s, p, NULL);
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < end && (*p == '+' || *p == '-'))
      p++;
    digits = p;
    if ((p = scan_digits (p, end)) == digits)
      return scan_fail (s, p, NULL);
  }
  return p;
}

static const char *
scan_literal (JsonScan * s, const char *p, const char *word, gsize n)
{
  if ((gsize) (s->end - p) < n || memcmp (p, word, n) != 0)
    return scan_fail (s, p, NULL);
  return p + n;
}

/* Whether the raw string token (with its quotes) decodes to the ASCII
 * string want. */
static gboolean
scan_key_equals (const char *raw, gsize len, const char *want)
{
  const char *p = raw + 1, *end = raw + len - 1;

  for (; p < end; p++, want++) {
    char c = *p;

    if (c == '\\') {
      p++;
      if (*p == 'u') {
        gint v = 0;

        for (guint i = 1; i <= 4; i++)
          v = v * 16 + g_ascii_xdigit_value (p[i]);
        if (v >= 0x80)
          return FALSE;
        c = v;
        p += 4;
      } else {
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";

        c = to[strchr (from, *p) - from];
      }
    }
    if (*want != c)
      return FALSE;
  }
  return *want == '\0';
}

static LegbaJsonSpan *
scan_wanted (JsonScan * s, const char *key, gsize len)
{
  for (guint i = 0; s->keys[i]; i++)
    if (scan_key_equals (key, len, s->keys[i]))
      return &s->spans[i];
  return NULL;
}

/* At '{'; depth counts it. */
static const char *
scan_object (JsonScan * s, const char *p, guint depth)
{
  const char *end = s->end;

  p = scan_ws (p + 1, end);
  if (p < end && *p == '}')
    return p + 1;
  for (;;) {
    const char *key = p, *value;
    LegbaJsonSpan *wanted = NULL;

    if (p >= end || *p != '"')
      return scan_fail (s, p, NULL);
    if ((p = scan_string (s, p)) == NULL)
      return NULL;
    if (depth == 1 && s->keys != NULL)
      wanted = scan_wanted (s, key, p - key);
    p = scan_ws (p, end);
    if (p >= end || *p != ':')
      return scan_fail (s, p, NULL);
    value = p = scan_ws (p + 1, end);
    if ((p = scan_value (s, p, depth)) == NULL)
      return NULL;
    if (wanted) {
      /* Duplicate names: the last one counts, as in json-glib. */
      wanted->start = value;
      wanted->len = p - value;
    }
    p = scan_ws (p, end);
    if (p < end && *p == '}')
      return p + 1;
    if (p >= end || *p != ',')
      return scan_fail (s, p, NULL);
    p = scan_ws (p + 1, end);
  }
}

/* At '['; depth counts it. */
static const char *
scan_array (JsonScan * s, const char *p, guint depth)
{
  const char *end = s->end;

  p = scan_ws (p + 1, end);
  if (p < end && *p == ']')
    return p + 1;
  for (;;) {
    if ((p = scan_value (s, p, depth)) == NULL)
      return NULL;
    p = scan_ws (p, end);
    if (p < end && *p == ']')
      return p + 1;
    if (p >= end || *p != ',')
      return scan_fail (s, p, NULL);
    p = scan_ws (p + 1, end);
  }
}

static const char *
scan_value (JsonScan * s, const char *p, guint depth)
{
  if (p >= s->end)
    return scan_fail (s, p, NULL);
  switch (*p) {
    case '"':
      return scan_string (s, p);
    case '{':
    case '[':
      if (depth >= LEGBA_JSON_MAX_DEPTH)
        return scan_fail (s, p, "nested too deeply");
      if (*p == '{')
        return scan_object (s, p, depth + 1);
      return scan_array (s, p, depth + 1);
    case 't':
      return scan_literal (s, p, "true", 4);
    case 'f':
      return scan_literal (s, p, "false", 5);
    case 'n':
      return scan_literal (s, p, "null", 4);
    case '-':
    case '0' ... '9':
      return scan_number (s, p);
    default:
      return scan_fail (s, p, NULL);
  }
}

/* *INDENT-OFF* */
static JsonNode *parse_fail (char **error_message, const char *format, ...)
    G_GNUC_PRINTF (2, 3);
/* *INDENT-ON* */

static JsonNode *
parse_fail (char **error_message, const char *format, ...)
{
  va_list args;

  if (error_message != NULL) {
    va_start (args, format);
    *error_message = g_strdup_vprintf (format, args);
    va_end (args);
  }
  return NULL;
}

gboolean
legba_json_check_strict (const char *text, gsize len, const char *const *keys,
    LegbaJsonSpan * spans, char **error_message)
{
  return legba_json_check_strict_full (text, len, 0, keys, spans,
      error_message);
}

gboolean
legba_json_check_strict_full (const char *text, gsize len,
    LegbaJsonCheckFlags flags, const char *const *keys, LegbaJsonSpan * spans,
    char **error_message)
{
  JsonScan s = { text + len, keys, spans, NULL, text, flags };
  const char *p;

  g_return_val_if_fail (text != NULL || len == 0, FALSE);
  g_return_val_if_fail (keys == NULL || spans != NULL, FALSE);

  for (guint i = 0; keys != NULL && keys[i] != NULL; i++)
    spans[i].start = NULL, spans[i].len = 0;
  if (len > G_MAXSSIZE) {
    parse_fail (error_message, "text too long");
    return FALSE;
  }

  /* outside strings the grammar admits ASCII alone: strings are where
   * UTF-8 is checked */
  p = scan_value (&s, scan_ws (text, s.end), 0);
  if (p != NULL && (p = scan_ws (p, s.end)) != s.end)
    scan_fail (&s, p, NULL);
  if (p == s.end)
    return TRUE;
  if (s.error != NULL)
    parse_fail (error_message, "invalid JSON: %s", s.error);
  else
    parse_fail (error_message, "invalid JSON at byte %" G_GSIZE_FORMAT,
        (gsize) (s.error_at - text));
  return FALSE;
}

gboolean
legba_json_span_get_plain_string (const LegbaJsonSpan * span, char *buffer,
    gsize size)
{
  gsize n;

  g_return_val_if_fail (span != NULL, FALSE);
  g_return_val_if_fail (buffer != NULL && size > 0, FALSE);

  if (span->start == NULL || span->len < 2 || span->start[0] != '"')
    return FALSE;
  n = span->len - 2;
  if (n >= size || memchr (span->start + 1, '\\', n) != NULL)
    return FALSE;
  memcpy (buffer, span->start + 1, n);
  buffer[n] = '\0';
  return TRUE;
}

JsonNode *
legba_json_parse_strict (const char *text, gsize len, const char *const *keys,
    LegbaJsonSpan * spans, char **error_message)
{
  g_autoptr (JsonParser) parser = NULL;
  g_autoptr (GError) error = NULL;
  JsonNode *root;

  if (!legba_json_check_strict (text, len, keys, spans, error_message))
    return NULL;

  parser = json_parser_new_immutable ();
  if (!json_parser_load_from_data (parser, text, len, &error))
    return parse_fail (error_message, "invalid JSON: %s", error->message);
  root = json_parser_get_root (parser);
  if (root == NULL)
    return parse_fail (error_message, "invalid JSON: empty");
  return json_node_ref (root);
}

/* The string member name of obj, or NULL when absent or not a string. */
const char *
legba_json_object_get_string (JsonObject * obj, const char *name)
{
  JsonNode *node = json_object_get_member (obj, name);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (node);
}


void
legba_json_append_string (GString * out, const char *str)
{
  g_autofree char *valid = NULL;
  const char *run;

  if (!g_utf8_validate (str, -1, NULL))
    str = valid = g_utf8_make_valid (str, -1);

  g_string_append_c (out, '"');
  for (run = str; *str; str++) {
    guchar c = *str;
    const char *escape;

    if (c >= 0x20 && c != '"' && c != '\\')
      continue;
    g_string_append_len (out, run, str - run);
    run = str + 1;
    switch (c) {
      case '"':
        escape = "\\\"";
        break;
      case '\\':
        escape = "\\\\";
        break;
      case '\n':
        escape = "\\n";
        break;
      case '\r':
        escape = "\\r";
        break;
      case '\t':
        escape = "\\t";
        break;
      case '\b':
        escape = "\\b";
        break;
      case '\f':
        escape = "\\f";
        break;
      default:
        g_string_append_printf (out, "\\u%04x", c);
        continue;
    }
    g_string_append (out, escape);
  }
  g_string_append_len (out, run, str - run);
  g_string_append_c (out, '"');
}
