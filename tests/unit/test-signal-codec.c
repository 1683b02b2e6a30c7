/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * docs/room-protocol.md §4 without I/O: JSON as JavaScript writes it, signal
 * checks, `part` splitting and reassembly; participant ids (§2).
 */
#include <legba/legba.h>

#include <legba/signal/legba-signal-codec.h>

#include <math.h>
#include <string.h>

#define SECOND G_TIME_SPAN_SECOND

static JsonObject *
parse_object (const char *text)
{
  g_autoptr (JsonNode) node = json_from_string (text, NULL);

  g_assert_nonnull (node);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (node));
  return json_object_ref (json_node_get_object (node));
}

static char *
write_node (JsonNode * node)
{
  GString *out = g_string_new (NULL);

  legba_json_write (out, node);
  return g_string_free (out, FALSE);
}

static void
assert_double (double d, const char *expected)
{
  g_autoptr (JsonNode) node = json_node_init_double (json_node_alloc (), d);
  g_autofree char *text = write_node (node);

  g_assert_cmpstr (text, ==, expected);
}

/* What JSON.stringify writes in node and in a browser. */
static void
test_json_javascript (void)
{
  g_autoptr (JsonObject) object = json_object_new ();
  g_autoptr (JsonNode) node = NULL;
  g_autofree char *text = NULL;
  gsize len;

  json_object_set_string_member (object, "s",
      "a/b é € 😀 \x01\x1f\x7f \t\n\r\b\f \"\\");
  json_object_set_int_member (object, "i", -5);
  json_object_set_boolean_member (object, "b", TRUE);
  json_object_set_null_member (object, "n");
  json_object_set_array_member (object, "a", json_array_new ());
  json_object_set_object_member (object, "o", json_object_new ());
  text = legba_json_object_to_string (object, &len);
  g_assert_cmpstr (text, ==, "{\"s\":\"a/b é € 😀 \\u0001\\u001f\x7f "
      "\\t\\n\\r\\b\\f \\\"\\\\\",\"i\":-5,\"b\":true,\"n\":null,"
      "\"a\":[],\"o\":{}}");
  g_assert_cmpuint (len, ==, strlen (text));

  /* ECMA-262 Number::toString */
  assert_double (0.1, "0.1");
  assert_double (3.0, "3");
  assert_double (-1.5, "-1.5");
  assert_double (100, "100");
  assert_double (1e20, "100000000000000000000");
  assert_double (1e21, "1e+21");
  assert_double (1.5e21, "1.5e+21");
  assert_double (0.000001, "0.000001");
  assert_double (1e-7, "1e-7");
  assert_double (1.25e-7, "1.25e-7");
  assert_double (123.456, "123.456");
  assert_double (5e-324, "5e-324");
  assert_double (1.7976931348623157e308, "1.7976931348623157e+308");
  assert_double (0.0, "0");
  assert_double (-0.0, "0");
  assert_double (INFINITY, "null");
  assert_double (NAN, "null");

  /* invalid UTF-8 from an application never makes invalid JSON text */
  node = json_node_init_string (json_node_alloc (), "a\xff" "b");
  g_clear_pointer (&text, g_free);
  text = write_node (node);
  g_assert_true (g_utf8_validate (text, -1, NULL));
}

static const struct
{
  const char *json;
  gboolean valid;
} checks[] = {
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"offer\","
        "\"sdp\":\"v=0\"}", TRUE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"answer\","
        "\"sdp\":\"v=0\"}", TRUE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"bye\"}", TRUE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"candidates\","
        "\"candidates\":[]}", TRUE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"candidates\","
        "\"candidates\":[{\"candidate\":\"c\",\"sdpMid\":\"0\","
        "\"sdpMLineIndex\":0}],\"end\":true}", TRUE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"future\"}", TRUE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"part\",\"id\":\"7\","
        "\"part\":0,\"parts\":2,\"chunk\":\"{\"}", TRUE},
  {"{\"from\":\"a\",\"pc\":\"1\",\"type\":\"bye\"}", FALSE},
  {"{\"to\":\"b\",\"pc\":\"1\",\"type\":\"bye\"}", FALSE},
  {"{\"to\":\"b\",\"from\":\"a\",\"type\":\"bye\"}", FALSE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\"}", FALSE},
  {"{\"to\":1,\"from\":\"a\",\"pc\":\"1\",\"type\":\"bye\"}", FALSE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"offer\"}", FALSE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"answer\","
        "\"sdp\":5}", FALSE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"candidates\"}",
      FALSE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"candidates\","
        "\"candidates\":[1]}", FALSE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"candidates\","
        "\"candidates\":[],\"end\":\"yes\"}", FALSE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"part\",\"id\":\"7\","
        "\"part\":2,\"parts\":2,\"chunk\":\"{\"}", FALSE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"part\",\"id\":\"7\","
        "\"part\":-1,\"parts\":2,\"chunk\":\"{\"}", FALSE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"part\",\"id\":\"7\","
        "\"part\":0,\"parts\":100000,\"chunk\":\"{\"}", FALSE},
  {"{\"to\":\"b\",\"from\":\"a\",\"pc\":\"1\",\"type\":\"part\","
        "\"part\":0,\"parts\":2,\"chunk\":\"{\"}", FALSE},
};

static void
test_check (void)
{
  guint i;

  for (i = 0; i < G_N_ELEMENTS (checks); i++) {
    g_autoptr (JsonObject) signal = parse_object (checks[i].json);
    g_autoptr (GError) error = NULL;
    gboolean ok = legba_signal_check (signal, &error);

    if (ok != checks[i].valid)
      g_error ("%s: expected %s", checks[i].json,
          checks[i].valid ? "valid" : "invalid");
    if (!ok)
      g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID);
  }
}

static JsonObject *
make_offer (gsize sdp_len)
{
  static const char *pieces[] = { "a=candidate:1 1 udp 2122260223 ",
    "\"", "\\", "\r\n", "é", "😀", "x"
  };
  JsonObject *signal = json_object_new ();
  GString *sdp = g_string_new (NULL);
  guint i = 0;

  while (sdp->len < sdp_len)
    g_string_append (sdp, pieces[i++ % G_N_ELEMENTS (pieces)]);
  json_object_set_string_member (signal, "to", "bob-abcdef");
  json_object_set_string_member (signal, "from", "alice-abcdef");
  json_object_set_string_member (signal, "pc", "pc-1");
  json_object_set_string_member (signal, "type", "offer");
  json_object_set_string_member (signal, "sdp", sdp->str);
  g_string_free (sdp, TRUE);
  return signal;
}

static void
test_split_fits (void)
{
  g_autoptr (JsonObject) signal = make_offer (100);
  g_autoptr (GPtrArray) texts = NULL;
  g_autofree char *whole = legba_json_object_to_string (signal, NULL);

  texts = legba_signal_split (signal, "1", 10000, NULL);
  g_assert_cmpuint (texts->len, ==, 1);
  g_assert_cmpstr (texts->pdata[0], ==, whole);
}

/* Splits, checks every part, reassembles in the given order. */
static void
split_and_join (gsize sdp_len, gsize limit, gboolean reverse)
{
  g_autoptr (JsonObject) signal = make_offer (sdp_len);
  g_autoptr (LegbaSignalReassembler) r = legba_signal_reassembler_new ();
  g_autoptr (GPtrArray) texts = NULL;
  g_autoptr (JsonObject) whole = NULL;
  g_autoptr (GError) error = NULL;
  GString *chunks = g_string_new (NULL);
  g_autofree char *original = legba_json_object_to_string (signal, NULL);
  guint i;

  texts = legba_signal_split (signal, "42", limit, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (texts->len, >, 1);
  for (i = 0; i < texts->len; i++) {
    guint k = reverse ? texts->len - 1 - i : i;
    g_autoptr (JsonObject) part = parse_object (texts->pdata[k]);
    g_autoptr (JsonObject) done = NULL;

    g_assert_cmpuint (strlen (texts->pdata[k]), <=, limit);
    g_assert_true (legba_signal_check (part, NULL));
    g_assert_cmpstr (json_object_get_string_member (part, "type"), ==, "part");
    g_assert_cmpstr (json_object_get_string_member (part, "pc"), ==, "pc-1");
    g_assert_cmpint (json_object_get_int_member (part, "part"), ==, k);
    g_assert_cmpint (json_object_get_int_member (part, "parts"), ==,
        texts->len);
    if (!reverse)
      g_string_append (chunks, json_object_get_string_member (part, "chunk"));
    done = legba_signal_reassembler_add (r, part, 0, &error);
    g_assert_no_error (error);
    if (i + 1 < texts->len)
      g_assert_null (done);
    else
      whole = g_steal_pointer (&done);
  }
  /* §4: the chunks, concatenated in order, are the signal's JSON text */
  if (!reverse)
    g_assert_cmpstr (chunks->str, ==, original);
  g_string_free (chunks, TRUE);
  g_assert_nonnull (whole);
  g_assert_cmpstr (json_object_get_string_member (whole, "sdp"), ==,
      json_object_get_string_member (signal, "sdp"));
  g_assert_cmpuint (legba_signal_reassembler_expire (r, 0), ==, 0);
}

static void
test_split_parts (void)
{
  split_and_join (30000, 10000, FALSE);
  split_and_join (30000, 10000, TRUE);
  /* ten parts and more: the digits of part and parts grow */
  split_and_join (20000, 1000, FALSE);
  split_and_join (60000, 600, TRUE);
}

static void
test_split_too_large (void)
{
  g_autoptr (JsonObject) signal = make_offer (5000);
  g_autoptr (GError) error = NULL;

  /* a limit the part envelope alone fills */
  g_assert_null (legba_signal_split (signal, "1", 100, &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_TOO_LARGE);
  g_clear_error (&error);
  /* more parts than a receiver keeps */
  g_clear_pointer (&signal, json_object_unref);
  signal = make_offer (LEGBA_SIGNAL_MAX_PARTS * 400);
  g_assert_null (legba_signal_split (signal, "1", 400, &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_TOO_LARGE);
}

static JsonObject *
make_part (const char *from, const char *id, int part, int parts,
    const char *chunk)
{
  JsonObject *p = json_object_new ();

  json_object_set_string_member (p, "to", "bob-abcdef");
  json_object_set_string_member (p, "from", from);
  json_object_set_string_member (p, "pc", "pc-1");
  json_object_set_string_member (p, "type", "part");
  json_object_set_string_member (p, "id", id);
  json_object_set_int_member (p, "part", part);
  json_object_set_int_member (p, "parts", parts);
  json_object_set_string_member (p, "chunk", chunk);
  return p;
}

static JsonObject *
add_part (LegbaSignalReassembler * r, const char *from, const char *id,
    int part, int parts, const char *chunk, gint64 now, GError ** error)
{
  g_autoptr (JsonObject) p = make_part (from, id, part, parts, chunk);

  return legba_signal_reassembler_add (r, p, now, error);
}

#define BYE_A "{\"to\":\"bob-abcdef\",\"from\":\"alice-abcdef\"," \
  "\"pc\":\"pc-1\",\"type\":\"bye\"}"

/* Sets are kept apart by (from, id), and dropped 10 s after they start. */
static void
test_reassembly_keys_and_expiry (void)
{
  g_autoptr (LegbaSignalReassembler) r = legba_signal_reassembler_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) done = NULL;

  g_assert_null (add_part (r, "alice-abcdef", "1", 0, 2, "{\"to\":\"bob-"
          "abcdef\",\"from\":\"alice-abcdef\",", 0, &error));
  /* same id, another sender: another set */
  g_assert_null (add_part (r, "carol-abcdef", "1", 1, 2, "x", 0, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (legba_signal_reassembler_expire (r, 0), ==, 2);
  done = add_part (r, "alice-abcdef", "1", 1, 2, "\"pc\":\"pc-1\","
      "\"type\":\"bye\"}", 5 * SECOND, &error);
  g_assert_no_error (error);
  g_assert_nonnull (done);
  g_assert_cmpstr (json_object_get_string_member (done, "type"), ==, "bye");

  /* carol's set is over 10 s old: dropped, and a late part starts anew */
  g_assert_cmpuint (legba_signal_reassembler_expire (r, 11 * SECOND), ==, 0);
  g_assert_null (add_part (r, "carol-abcdef", "1", 0, 2, "y", 12 * SECOND,
          &error));
  g_assert_no_error (error);
  g_assert_cmpuint (legba_signal_reassembler_expire (r, 23 * SECOND), ==, 0);
}

static void
test_reassembly_refused (void)
{
  g_autoptr (LegbaSignalReassembler) r = legba_signal_reassembler_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) inner = make_part ("alice-abcdef", "9", 0, 1, BYE_A);
  g_autofree char *inner_part = legba_json_object_to_string (inner, NULL);
  char id[16];
  guint i;

  /* a duplicate part */
  g_assert_null (add_part (r, "alice-abcdef", "1", 0, 2, "{", 0, &error));
  g_assert_null (add_part (r, "alice-abcdef", "1", 0, 2, "{", 0, &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID);
  g_clear_error (&error);
  /* parts that disagree on the count */
  g_assert_null (add_part (r, "alice-abcdef", "1", 1, 3, "}", 0, &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID);
  g_clear_error (&error);
  /* chunks that are not JSON */
  g_assert_null (add_part (r, "alice-abcdef", "2", 0, 1, "{nope", 0, &error));
  g_assert_nonnull (error);
  g_clear_error (&error);
  /* a signal inside from another sender */
  g_assert_null (add_part (r, "carol-abcdef", "3", 0, 1, BYE_A, 0, &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID);
  g_clear_error (&error);
  /* a part inside a part */
  g_assert_null (add_part (r, "alice-abcdef", "4", 0, 1, inner_part, 0,
          &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_cmpuint (legba_signal_reassembler_expire (r, 0), ==, 0);

  /* at most LEGBA_SIGNAL_MAX_PENDING_SETS unfinished sets */
  for (i = 0; i < LEGBA_SIGNAL_MAX_PENDING_SETS; i++) {
    g_snprintf (id, sizeof id, "%u", i);
    g_assert_null (add_part (r, "alice-abcdef", id, 0, 2, "{", 0, &error));
    g_assert_no_error (error);
  }
  g_assert_null (add_part (r, "alice-abcdef", "last", 0, 2, "{", 0, &error));
  g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_TOO_LARGE);
}

static void
test_participant_ids (void)
{
  g_autofree char *id = legba_signaller_generate_participant_id ("alice");
  g_autofree char *other = legba_signaller_generate_participant_id ("alice");
  g_autoptr (GError) error = NULL;
  static const char *bad[][3] = {
    {"room", "alice-abc", "alice"},     /* suffix too short */
    {"room", "alice-abcdefghijklmnopq", "alice"},       /* too long */
    {"room", "alice-ABCDEF", "alice"},  /* upper case */
    {"room", "alice_abcdef", "alice"},
    {"room", "bob-abcdef", "alice"},
    {"room", "alice-abcdef", ""},
    {"", "alice-abcdef", "alice"},
    {"a room", "alice-abcdef", "alice"},
  };
  char long_room[151];
  guint i;

  g_assert_true (g_str_has_prefix (id, "alice-"));
  g_assert_cmpstr (id, !=, other);
  g_assert_true (legba_signaller_check_participant ("demo", id, "alice",
          &error));
  g_assert_no_error (error);
  g_assert_true (legba_signaller_check_participant ("a-b_c=d@e,f.g;h",
          "dash-ed-abcdef", "dash-ed", NULL));
  for (i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_assert_false (legba_signaller_check_participant (bad[i][0], bad[i][1],
            bad[i][2], &error));
    g_assert_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID);
    g_clear_error (&error);
  }
  memset (long_room, 'r', 150);
  long_room[150] = '\0';
  g_assert_false (legba_signaller_check_participant (long_room, id, "alice",
          NULL));
  long_room[149] = '\0';
  g_assert_true (legba_signaller_check_participant (long_room, id, "alice",
          NULL));
}

/* LegbaSignalClient: the room is on loopback when its server is */
static void
test_is_loopback (void)
{
  static const struct
  {
    const char *url;
    gboolean loopback;
  } cases[] = {
    {"ws://127.0.0.1:6001", TRUE},
    {"wss://127.3.2.1", TRUE},
    {"ws://localhost:6001/prefix", TRUE},
    {"ws://[::1]:6001", TRUE},
    {"ws://192.0.2.1:6001", FALSE},
    {"wss://legba.example", FALSE},
    {"not a url", FALSE},
    {NULL, FALSE},
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autoptr (LegbaSignalClient) client =
        legba_signal_client_new (cases[i].url, "key");

    g_assert_cmpint (legba_signaller_is_loopback (LEGBA_SIGNALLER (client)),
        ==, cases[i].loopback);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/signal/json/javascript", test_json_javascript);
  g_test_add_func ("/signal/check", test_check);
  g_test_add_func ("/signal/split/fits", test_split_fits);
  g_test_add_func ("/signal/split/parts", test_split_parts);
  g_test_add_func ("/signal/split/too-large", test_split_too_large);
  g_test_add_func ("/signal/reassembly/keys-and-expiry",
      test_reassembly_keys_and_expiry);
  g_test_add_func ("/signal/reassembly/refused", test_reassembly_refused);
  g_test_add_func ("/signaller/participant-ids", test_participant_ids);
  g_test_add_func ("/signaller/is-loopback", test_is_loopback);

  return g_test_run ();
}
