/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba_json_check_strict(): RFC 8259 text accepted, everything else
 * refused with a reason, and the spans of the top-level members a caller
 * asks for.
 */
#include <legba/common/legba-json.h>

#include <string.h>

static gboolean
check (const char *text, gsize len, char **error_message)
{
  return legba_json_check_strict (text, len, NULL, NULL, error_message);
}

static void
test_valid (void)
{
  const char *valid[] = {
    "0", "-0", "12.5", "-3.25e-7", "1E+9", "0.0e0", "true", "false", "null",
    "\"\"", "\"plain\"", "[]", "{}", " \t\r\n[ 1 , 2 ]\n",
    "{\"a\":{\"b\":[true,false,null,{}]},\"c\":\"d\"}",
    /* escapes, a surrogate pair among them */
    "\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\ud83d\\ude00\"",
    /* UTF-8 of two, three and four bytes */
    "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"",
    "{\"\xc3\xa9\":\"\xe2\x82\xac\"}",
  };

  for (guint i = 0; i < G_N_ELEMENTS (valid); i++) {
    g_autofree char *error = NULL;
    g_autoptr (JsonNode) node = NULL;

    if (!check (valid[i], strlen (valid[i]), &error))
      g_error ("refused %s: %s", valid[i], error);
    /* what it accepts, json-glib reads */
    node = json_from_string (valid[i], NULL);
    g_assert_nonnull (node);
  }
}

static void
test_invalid (void)
{
  const struct
  {
    const char *text;
    gssize len;                 /* -1: strlen */
    const char *reason;         /* a part of the error, or NULL */
  } invalid[] = {
    {"", -1, NULL}, {" ", -1, NULL}, {"01", -1, NULL}, {"1.", -1, NULL},
    {".5", -1, NULL}, {"-", -1, NULL}, {"1e", -1, NULL}, {"+1", -1, NULL},
    {"0x1F", -1, NULL}, {"NaN", -1, NULL}, {"tru", -1, NULL},
    {"[1,]", -1, NULL}, {"{\"a\":1,}", -1, NULL}, {"{'a':1}", -1, NULL},
    {"{\"a\" 1}", -1, NULL}, {"{1:2}", -1, NULL}, {"[1 2]", -1, NULL},
    {"[1] /* c */", -1, NULL}, {"1 2", -1, NULL}, {"\"open", -1, NULL},
    {"\"tab\there\"", -1, NULL}, {"\"\\x41\"", -1, NULL},
    {"\"\\u12\"", -1, NULL},
    /* a NUL byte, in a string and outside */
    {"\"a\0b\"", 5, NULL}, {"[1]\0", 4, NULL},
    /* what json-glib cannot hold, or would turn into invalid UTF-8 */
    {"\"\\u0000\"", -1, "\\u0000"},
    {"\"\\ud800\"", -1, "surrogate"}, {"\"\\udc00\"", -1, "surrogate"},
    {"\"\\ud800\\u0041\"", -1, "surrogate"},
    /* not UTF-8: Latin-1, an overlong '/', an encoded surrogate, a
     * sequence cut by the closing quote, a code point over U+10FFFF */
    {"\"caf\xe9\"", -1, "UTF-8"}, {"\"\xc0\xaf\"", -1, "UTF-8"},
    {"\"\xed\xa0\x80\"", -1, "UTF-8"}, {"\"\xe2\x82\"", -1, "UTF-8"},
    {"\"\xf4\x90\x80\x80\"", -1, "UTF-8"},
    /* a byte over 0x7f outside a string */
    {"[1,\xc3\xa9]", -1, NULL},
    /* a sequence cut by the end of the text */
    {"\"\xe2\x82", -1, NULL},
  };

  for (guint i = 0; i < G_N_ELEMENTS (invalid); i++) {
    gsize len = invalid[i].len < 0 ? strlen (invalid[i].text) :
        (gsize) invalid[i].len;
    g_autofree char *error = NULL;

    if (check (invalid[i].text, len, &error))
      g_error ("accepted invalid text %u", i);
    g_assert_nonnull (error);
    if (invalid[i].reason != NULL && strstr (error, invalid[i].reason) == NULL)
      g_error ("text %u refused for \"%s\", not for %s", i, error,
          invalid[i].reason);
  }
}

/* [[...]] with depth brackets each side */
static char *
nested (guint depth)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < depth; i++)
    g_string_append_c (s, '[');
  for (guint i = 0; i < depth; i++)
    g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

static void
test_depth (void)
{
  g_autofree char *deepest = nested (LEGBA_JSON_MAX_DEPTH);
  g_autofree char *too_deep = nested (LEGBA_JSON_MAX_DEPTH + 1);
  g_autofree char *error = NULL;

  g_assert_true (check (deepest, strlen (deepest), NULL));
  g_assert_false (check (too_deep, strlen (too_deep), &error));
  g_assert_nonnull (strstr (error, "nested too deeply"));
}

static void
test_int64 (void)
{
  const char *within[] = {
    "9223372036854775807", "-9223372036854775808", "-0", "[1,-1]",
    /* a fraction or an exponent makes a double, which json-glib reads */
    "18446744073709551616.0", "18446744073709551616e0", "1e400",
  };
  const char *beyond[] = {
    "9223372036854775808", "-9223372036854775809", "18446744073709551616",
    "{\"a\":[100000000000000000000]}",
  };

  for (guint i = 0; i < G_N_ELEMENTS (within); i++)
    g_assert_true (legba_json_check_strict_full (within[i],
            strlen (within[i]), LEGBA_JSON_CHECK_INT64, NULL, NULL, NULL));
  for (guint i = 0; i < G_N_ELEMENTS (beyond); i++) {
    g_autofree char *error = NULL;

    /* RFC 8259 text: refused only when asked */
    g_assert_true (check (beyond[i], strlen (beyond[i]), NULL));
    g_assert_false (legba_json_check_strict_full (beyond[i],
            strlen (beyond[i]), LEGBA_JSON_CHECK_INT64, NULL, NULL, &error));
    g_assert_nonnull (strstr (error, "beyond 64 bits"));
  }
}

static char *
span_text (const LegbaJsonSpan * span)
{
  return span->start ? g_strndup (span->start, span->len) : NULL;
}

static void
test_spans (void)
{
  static const char *const keys[] = { "topic", "data", NULL };
  const struct
  {
    const char *text, *topic, *data;    /* NULL: no span */
  } cases[] = {
    {"{\"topic\":\"t\",\"data\":[1, 2]}", "\"t\"", "[1, 2]"},
    /* a repeated name: the last one; nested names do not count */
    {"{\"data\":1,\"x\":{\"data\":2,\"topic\":3},\"data\" : {\"a\":\"}\"} }",
        NULL, "{\"a\":\"}\"}"},
    /* names written with escapes are the names they decode to */
    {"{\"d\\u0061ta\":null,\"\\u0074opic\":\"\\\"\"}", "\"\\\"\"", "null"},
    /* not an object: no member */
    {"[{\"topic\":1,\"data\":2}]", NULL, NULL},
    {"\"data\"", NULL, NULL},
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    LegbaJsonSpan spans[2] = { {"stale", 5}, {"stale", 5}
    };
    g_autofree char *topic = NULL, *data = NULL;

    g_assert_true (legba_json_check_strict (cases[i].text,
            strlen (cases[i].text), keys, spans, NULL));
    topic = span_text (&spans[0]);
    data = span_text (&spans[1]);
    g_assert_cmpstr (topic, ==, cases[i].topic);
    g_assert_cmpstr (data, ==, cases[i].data);
  }
}

static void
test_plain_string (void)
{
  LegbaJsonSpan plain = { "\"pose\"", 6 }, escaped = { "\"a\\nb\"", 6 };
  LegbaJsonSpan number = { "12", 2 }, absent = { NULL, 0 };
  char buffer[8];

  g_assert_true (legba_json_span_get_plain_string (&plain, buffer,
          sizeof buffer));
  g_assert_cmpstr (buffer, ==, "pose");
  /* the content and its NUL must fit */
  g_assert_false (legba_json_span_get_plain_string (&plain, buffer, 4));
  g_assert_true (legba_json_span_get_plain_string (&plain, buffer, 5));
  g_assert_false (legba_json_span_get_plain_string (&escaped, buffer,
          sizeof buffer));
  g_assert_false (legba_json_span_get_plain_string (&number, buffer,
          sizeof buffer));
  g_assert_false (legba_json_span_get_plain_string (&absent, buffer,
          sizeof buffer));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/json/check/valid", test_valid);
  g_test_add_func ("/json/check/invalid", test_invalid);
  g_test_add_func ("/json/check/depth", test_depth);
  g_test_add_func ("/json/check/int64", test_int64);
  g_test_add_func ("/json/check/spans", test_spans);
  g_test_add_func ("/json/span/plain-string", test_plain_string);
  return g_test_run ();
}
