/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * JSON from the network, read strictly (see legba-json.h).
 */
#include "legba-json.h"

#include <string.h>

/* A recursive-descent check of RFC 8259 that also notes where the chosen
 * members of the top-level object (depth 1) start and end. */
typedef struct
{
  const char *p;
  const char *end;
  const char *const *keys;      /* NULL-terminated */
  LegbaJsonSpan *spans;         /* one per key */
  const char *error;
} JsonScan;

static gboolean scan_value (JsonScan * s, guint depth);

static inline void
scan_ws (JsonScan * s)
{
  const char *p = s->p;

  /* whitespace is at most ' ': one comparison for anything else */
  while (p < s->end && (guchar) * p <= ' ' && (*p == ' ' || *p == '\t'
          || *p == '\n' || *p == '\r'))
    p++;
  s->p = p;
}

static gint
scan_hex4 (JsonScan * s)
{
  gint v = 0;

  for (guint i = 0; i < 4; i++) {
    if (s->p >= s->end || !g_ascii_isxdigit (*s->p))
      return -1;
    v = v * 16 + g_ascii_xdigit_value (*s->p++);
  }
  return v;
}

/* After a backslash. json-glib cannot hold U+0000 in a string and turns
 * unpaired surrogates into invalid UTF-8: both are refused. */
static gboolean
scan_escape (JsonScan * s)
{
  gint u;
  char c;

  if (s->p >= s->end)
    return FALSE;
  c = *s->p++;
  if (c != 'u')
    return c != '\0' && strchr ("\"\\/bfnrt", c) != NULL;

  u = scan_hex4 (s);
  if (u < 0)
    return FALSE;
  if (u == 0) {
    s->error = "\\u0000 in a string is not supported";
    return FALSE;
  }
  if (u >= 0xdc00 && u <= 0xdfff) {
    s->error = "unpaired UTF-16 surrogate in a string";
    return FALSE;
  }
  if (u >= 0xd800 && u <= 0xdbff) {
    if (s->end - s->p < 2 || s->p[0] != '\\' || s->p[1] != 'u')
      goto unpaired;
    s->p += 2;
    u = scan_hex4 (s);
    if (u < 0xdc00 || u > 0xdfff)
      goto unpaired;
  }
  return TRUE;

unpaired:
  s->error = "unpaired UTF-16 surrogate in a string";
  return FALSE;
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

/* At a byte of string_stop other than the closing quote, at p: an escape
 * or a multi-byte character is scanned and the position after it
 * returned; NULL refuses the string. */
G_GNUC_NO_INLINE static const char *
scan_string_stop (JsonScan * s, const char *p)
{
  guchar c = *p;

  if (c == '\\') {
    s->p = p + 1;
    return scan_escape (s) ? s->p : NULL;
  }
  if (c >= 0x80) {
    /* one character: the rest of the text bounds it */
    if (g_utf8_get_char_validated (p, s->end - p) < (gunichar) - 2)
      return g_utf8_next_char (p);
    s->p = p;
    s->error = "not valid UTF-8 text";
    return NULL;
  }
  s->p = p;                     /* a control character */
  return NULL;
}

static gboolean
scan_string (JsonScan * s)
{
  const char *p = s->p + 1, *end = s->end;      /* after '"' */

  for (;;) {
    while (p < end && !string_stop[(guchar) * p])
      p++;
    if (p >= end) {
      s->p = p;
      return FALSE;
    }
    if (*p == '"') {
      s->p = p + 1;
      return TRUE;
    }
    if ((p = scan_string_stop (s, p)) == NULL)
      return FALSE;
  }
}

static const char *
scan_digits (const char *p, const char *end)
{
  while (p < end && (guchar) (*p - '0') < 10)
    p++;
  return p;
}

static gboolean
scan_number (JsonScan * s)
{
  const char *p = s->p, *end = s->end, *digits;

  if (*p == '-')
    p++;
  if (p < end && *p == '0')
    p++;
  else if ((digits = p, p = scan_digits (p, end)) == digits)
    goto fail;
  if (p < end && *p == '.') {
    p++;
    if ((digits = p, p = scan_digits (p, end)) == digits)
      goto fail;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < end && (*p == '+' || *p == '-'))
      p++;
    if ((digits = p, p = scan_digits (p, end)) == digits)
      goto fail;
  }
  s->p = p;
  return TRUE;

fail:
  s->p = p;
  return FALSE;
}

static gboolean
scan_literal (JsonScan * s, const char *word)
{
  gsize n = strlen (word);

  if ((gsize) (s->end - s->p) < n || memcmp (s->p, word, n) != 0)
    return FALSE;
  s->p += n;
  return TRUE;
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
  for (guint i = 0; s->keys && s->keys[i]; i++)
    if (scan_key_equals (key, len, s->keys[i]))
      return &s->spans[i];
  return NULL;
}

static gboolean
scan_object (JsonScan * s, guint depth)
{
  s->p++;                       /* '{' */
  scan_ws (s);
  if (s->p < s->end && *s->p == '}') {
    s->p++;
    return TRUE;
  }
  for (;;) {
    const char *key, *value;
    LegbaJsonSpan *wanted;

    scan_ws (s);
    if (s->p >= s->end || *s->p != '"')
      return FALSE;
    key = s->p;
    if (!scan_string (s))
      return FALSE;
    wanted = depth == 1 ? scan_wanted (s, key, s->p - key) : NULL;
    scan_ws (s);
    if (s->p >= s->end || *s->p != ':')
      return FALSE;
    s->p++;
    scan_ws (s);
    value = s->p;
    if (!scan_value (s, depth))
      return FALSE;
    if (wanted) {
      /* Duplicate names: the last one counts, as in json-glib. */
      wanted->start = value;
      wanted->len = s->p - value;
    }
    scan_ws (s);
    if (s->p >= s->end)
      return FALSE;
    if (*s->p == '}') {
      s->p++;
      return TRUE;
    }
    if (*s->p++ != ',')
      return FALSE;
  }
}

static gboolean
scan_array (JsonScan * s, guint depth)
{
  s->p++;                       /* '[' */
  scan_ws (s);
  if (s->p < s->end && *s->p == ']') {
    s->p++;
    return TRUE;
  }
  for (;;) {
    scan_ws (s);
    if (!scan_value (s, depth))
      return FALSE;
    scan_ws (s);
    if (s->p >= s->end)
      return FALSE;
    if (*s->p == ']') {
      s->p++;
      return TRUE;
    }
    if (*s->p++ != ',')
      return FALSE;
  }
}

static gboolean
scan_value (JsonScan * s, guint depth)
{
  if (s->p >= s->end)
    return FALSE;
  switch (*s->p) {
    case '{':
    case '[':
      if (depth >= LEGBA_JSON_MAX_DEPTH) {
        s->error = "nested too deeply";
        return FALSE;
      }
      if (*s->p == '{')
        return scan_object (s, depth + 1);
      return scan_array (s, depth + 1);
    case '"':
      return scan_string (s);
    case 't':
      return scan_literal (s, "true");
    case 'f':
      return scan_literal (s, "false");
    case 'n':
      return scan_literal (s, "null");
    default:
      if (*s->p == '-' || g_ascii_isdigit (*s->p))
        return scan_number (s);
      return FALSE;
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
  JsonScan s = { text, text + len, keys, spans, NULL };

  g_return_val_if_fail (text != NULL || len == 0, FALSE);
  g_return_val_if_fail (keys == NULL || spans != NULL, FALSE);

  for (guint i = 0; keys != NULL && keys[i] != NULL; i++)
    spans[i].start = NULL, spans[i].len = 0;
  /* outside strings the grammar admits ASCII alone: strings are where
   * UTF-8 is checked */
  if (len > G_MAXSSIZE) {
    parse_fail (error_message, "text too long");
    return FALSE;
  }

  scan_ws (&s);
  if (!scan_value (&s, 0) || (scan_ws (&s), s.p != s.end)) {
    if (s.error != NULL)
      parse_fail (error_message, "invalid JSON: %s", s.error);
    else
      parse_fail (error_message, "invalid JSON at byte %" G_GSIZE_FORMAT,
          (gsize) (s.p - text));
    return FALSE;
  }
  return TRUE;
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
