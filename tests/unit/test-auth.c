/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Signatures (Pusher's documented examples), HTTP API request verification
 * and join tokens.
 */
#include <legba/common/legba-auth.h>
#include <legba/server/legba-token-private.h>
#include <legba/server/legba-token.h>

#include <string.h>

/* Pusher's worked examples (library auth reference). */
#define PUSHER_KEY "278d425bdf160c739803"
#define PUSHER_SECRET "7ad3773142a6692b25b8"
#define PUSHER_SOCKET "1234.1234"

static void
test_hmac_hex (void)
{
  g_autofree char *sig =
      legba_auth_hmac_hex (PUSHER_SECRET, "1234.1234:private-foobar", -1);
  g_autofree char *prefix =
      legba_auth_hmac_hex (PUSHER_SECRET, "1234.1234:private-foobarXYZ", 24);

  g_assert_cmpstr (sig, ==,
      "58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4");
  g_assert_cmpstr (prefix, ==, sig);
}

static void
test_equal (void)
{
  g_assert_true (legba_auth_equal ("", ""));
  g_assert_true (legba_auth_equal ("abc", "abc"));
  g_assert_false (legba_auth_equal ("abc", "abd"));
  g_assert_false (legba_auth_equal ("abc", "ab"));
  g_assert_false (legba_auth_equal ("ab", "abc"));
  g_assert_false (legba_auth_equal ("abc", ""));
  g_assert_false (legba_auth_equal ("", "abc"));
  g_assert_false (legba_auth_equal ("abc", "ABC"));
}

static void
test_channel_private_example (void)
{
  const char *expected = PUSHER_KEY
      ":58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4";
  g_autofree char *auth = legba_auth_channel_sign (PUSHER_KEY, PUSHER_SECRET,
      PUSHER_SOCKET, "private-foobar", NULL);

  g_assert_cmpstr (auth, ==, expected);
  g_assert_true (legba_auth_channel_check (PUSHER_KEY, PUSHER_SECRET,
          PUSHER_SOCKET, "private-foobar", NULL, expected));
}

static void
test_channel_presence_example (void)
{
  const char *data = "{\"user_id\":10,\"user_info\":{\"name\":\"Mr. Pusher\"}}";
  const char *expected = PUSHER_KEY
      ":afaed3695da2ffd16931f457e338e6c9f2921fa133ce7dac49f529792be6304c";
  g_autofree char *auth = legba_auth_channel_sign (PUSHER_KEY, PUSHER_SECRET,
      PUSHER_SOCKET, "presence-foobar", data);

  g_assert_cmpstr (auth, ==, expected);
  g_assert_true (legba_auth_channel_check (PUSHER_KEY, PUSHER_SECRET,
          PUSHER_SOCKET, "presence-foobar", data, expected));
  /* The channel_data is signed: another member's data does not pass. */
  g_assert_false (legba_auth_channel_check (PUSHER_KEY, PUSHER_SECRET,
          PUSHER_SOCKET, "presence-foobar",
          "{\"user_id\":11,\"user_info\":{\"name\":\"Mr. Pusher\"}}",
          expected));
  g_assert_false (legba_auth_channel_check (PUSHER_KEY, PUSHER_SECRET,
          PUSHER_SOCKET, "presence-foobar", NULL, expected));
}

static void
test_channel_forged (void)
{
  const char *good = PUSHER_KEY
      ":58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4";
  const char *forged[] = {
    PUSHER_KEY
        ":58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a5",
    PUSHER_KEY
        ":58DF8B0C36D6982B82C3ECF6B4662E34FE8C25BBA48F5369F135BF843651C3A4",
    PUSHER_KEY ":58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf8436",
    "otherkey:58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4",
    "58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4",
    PUSHER_KEY ":",
    "",
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (forged); i++)
    g_assert_false (legba_auth_channel_check (PUSHER_KEY, PUSHER_SECRET,
            PUSHER_SOCKET, "private-foobar", NULL, forged[i]));
  g_assert_false (legba_auth_channel_check (PUSHER_KEY, PUSHER_SECRET,
          PUSHER_SOCKET, "private-foobar", NULL, NULL));
  /* Valid for one socket or channel only. */
  g_assert_false (legba_auth_channel_check (PUSHER_KEY, PUSHER_SECRET,
          "1234.5678", "private-foobar", NULL, good));
  g_assert_false (legba_auth_channel_check (PUSHER_KEY, PUSHER_SECRET,
          PUSHER_SOCKET, "private-foobaz", NULL, good));
  g_assert_false (legba_auth_channel_check (PUSHER_KEY, "another-secret",
          PUSHER_SOCKET, "private-foobar", NULL, good));
}

static void
test_user_example (void)
{
  const char *data = "{\"id\":\"12345\"}";
  const char *expected = PUSHER_KEY
      ":4708d583dada6a56435fb8bc611c77c359a31eebde13337c16ab43aa6de336ba";
  g_autofree char *auth = legba_auth_user_sign (PUSHER_KEY, PUSHER_SECRET,
      PUSHER_SOCKET, data);

  g_assert_cmpstr (auth, ==, expected);
  g_assert_true (legba_auth_user_check (PUSHER_KEY, PUSHER_SECRET,
          PUSHER_SOCKET, data, expected));
  g_assert_false (legba_auth_user_check (PUSHER_KEY, PUSHER_SECRET,
          PUSHER_SOCKET, "{\"id\":\"12346\"}", expected));
  g_assert_false (legba_auth_user_check (PUSHER_KEY, PUSHER_SECRET,
          "1234.1235", data, expected));
  g_assert_false (legba_auth_user_check (PUSHER_KEY, PUSHER_SECRET,
          PUSHER_SOCKET, data, NULL));
  /* A channel signature is not a user signature. */
  g_assert_false (legba_auth_user_check (PUSHER_KEY, PUSHER_SECRET,
          PUSHER_SOCKET, data, PUSHER_KEY
          ":58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4"));
}

/* ---- HTTP API ---- */

#define EXAMPLE_BODY \
  "{\"name\":\"foo\",\"channels\":[\"project-3\"],\"data\":\"{\\\"some\\\":\\\"data\\\"}\"}"
#define EXAMPLE_MD5 "ec365a775a4cd0599faeb73354201b6f"
#define EXAMPLE_SIGNATURE \
  "da454824c97ba181a32ccc17a72625ba02771f50b50e1e7430e47a1f3f457e6c"
#define EXAMPLE_TIME 1353088179
/* EXAMPLE_SIGNATURE with its last digit changed */
#define FORGED_SIGNATURE \
  "da454824c97ba181a32ccc17a72625ba02771f50b50e1e7430e47a1f3f457e6d"

static GHashTable *
example_params (void)
{
  GHashTable *params = g_hash_table_new_full (g_str_hash, g_str_equal,
      g_free, g_free);

  g_hash_table_insert (params, g_strdup ("auth_key"), g_strdup (PUSHER_KEY));
  g_hash_table_insert (params, g_strdup ("auth_timestamp"),
      g_strdup ("1353088179"));
  g_hash_table_insert (params, g_strdup ("auth_version"), g_strdup ("1.0"));
  g_hash_table_insert (params, g_strdup ("body_md5"), g_strdup (EXAMPLE_MD5));
  g_hash_table_insert (params, g_strdup ("auth_signature"),
      g_strdup (EXAMPLE_SIGNATURE));
  return params;
}

static gboolean
verify_example (GHashTable * params, const char *body, gint64 now,
    GError ** error)
{
  return legba_auth_http_verify (PUSHER_KEY, PUSHER_SECRET, "POST",
      "/apps/3/events", params, body, body ? strlen (body) : 0, now, 600,
      error);
}

static void
test_http_string_to_sign (void)
{
  g_autoptr (GHashTable) params = example_params ();
  g_autofree char *text = NULL;
  g_autofree char *mixed = NULL;

  text = legba_auth_http_string_to_sign ("POST", "/apps/3/events", params);
  g_assert_cmpstr (text, ==, "POST\n/apps/3/events\nauth_key=" PUSHER_KEY
      "&auth_timestamp=1353088179&auth_version=1.0&body_md5=" EXAMPLE_MD5);

  /* Keys are lower-cased before sorting; values are signed unescaped. */
  g_hash_table_insert (params, g_strdup ("Info"),
      g_strdup ("user_count,subscription_count"));
  g_hash_table_insert (params, g_strdup ("filter_by_prefix"),
      g_strdup ("presence-a b"));
  mixed = legba_auth_http_string_to_sign ("GET", "/apps/3/channels", params);
  g_assert_cmpstr (mixed, ==, "GET\n/apps/3/channels\nauth_key=" PUSHER_KEY
      "&auth_timestamp=1353088179&auth_version=1.0&body_md5=" EXAMPLE_MD5
      "&filter_by_prefix=presence-a b&info=user_count,subscription_count");
}

static void
test_http_pusher_example (void)
{
  g_autoptr (GHashTable) params = example_params ();
  g_autoptr (GError) error = NULL;
  g_autofree char *md5 = g_compute_checksum_for_string (G_CHECKSUM_MD5,
      EXAMPLE_BODY, -1);

  g_assert_cmpstr (md5, ==, EXAMPLE_MD5);
  g_assert_true (verify_example (params, EXAMPLE_BODY, EXAMPLE_TIME, &error));
  g_assert_no_error (error);
}

/* Signatures made by the pusher Node SDK (5.3.4, the version the
 * integration tests pin) with key f00d, secret beef, at 1234567890: the
 * requests it makes verify here. */
static void
test_http_node_sdk_example (void)
{
  g_autoptr (GHashTable) params = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GError) error = NULL;

  g_hash_table_insert (params, "auth_key", "f00d");
  g_hash_table_insert (params, "auth_timestamp", "1234567890");
  g_hash_table_insert (params, "auth_version", "1.0");
  g_hash_table_insert (params, "body_md5", "165d5e6d7ca8f73b3853ce45addf42fc");
  g_hash_table_insert (params, "auth_signature",
      "89323a7f200fdefaa992e73e0953534dbb94c4dd2450514bcb4721b28b14fb26");
  g_assert_true (legba_auth_http_verify ("f00d", "beef", "GET", "/event",
          params, "example body", 12, 1234567890, 600, &error));
  g_assert_no_error (error);

  g_hash_table_remove (params, "body_md5");
  g_hash_table_insert (params, "foo", "bar");
  g_hash_table_insert (params, "baz", "123454321");
  g_hash_table_insert (params, "auth_signature",
      "8df535ace13ffd2e77b023f251ba9a6b0c4e5c307b3cc6a2ca42d559109db7c8");
  g_assert_true (legba_auth_http_verify ("f00d", "beef", "GET", "/event",
          params, NULL, 0, 1234567890, 600, &error));
  g_assert_no_error (error);

  g_hash_table_remove (params, "foo");
  g_hash_table_remove (params, "baz");
  g_hash_table_insert (params, "filter_by_prefix", "presence-");
  g_hash_table_insert (params, "info", "user_count,subscription_count");
  g_hash_table_insert (params, "auth_signature",
      "f8f11a0dbc9d791d0af36bcbeed8f9a5b6e34204c7d7d27f204bb5f7c2406cd9");
  g_assert_true (legba_auth_http_verify ("f00d", "beef", "GET",
          "/apps/1234/channels", params, NULL, 0, 1234567890, 600, &error));
  g_assert_no_error (error);
}

static void
test_http_stale (void)
{
  g_autoptr (GHashTable) params = example_params ();
  GError *error = NULL;

  g_assert_true (verify_example (params, EXAMPLE_BODY, EXAMPLE_TIME + 600,
          NULL));
  g_assert_true (verify_example (params, EXAMPLE_BODY, EXAMPLE_TIME - 600,
          NULL));

  g_assert_false (verify_example (params, EXAMPLE_BODY, EXAMPLE_TIME + 601,
          &error));
  g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_TIMESTAMP);
  g_clear_error (&error);
  g_assert_false (verify_example (params, EXAMPLE_BODY, EXAMPLE_TIME - 601,
          &error));
  g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_TIMESTAMP);
  g_clear_error (&error);

  g_hash_table_insert (params, g_strdup ("auth_timestamp"),
      g_strdup ("13530881790000000000000"));
  g_assert_false (verify_example (params, EXAMPLE_BODY, EXAMPLE_TIME, &error));
  g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_TIMESTAMP);
  g_clear_error (&error);
  g_hash_table_insert (params, g_strdup ("auth_timestamp"), g_strdup ("-1"));
  g_assert_false (verify_example (params, EXAMPLE_BODY, EXAMPLE_TIME, &error));
  g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_TIMESTAMP);
  g_clear_error (&error);
}

static void
test_http_body_md5 (void)
{
  g_autoptr (GHashTable) params = example_params ();
  GError *error = NULL;

  /* A body that is not the one signed. */
  g_assert_false (verify_example (params, EXAMPLE_BODY " ", EXAMPLE_TIME,
          &error));
  g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_BODY_MD5);
  g_clear_error (&error);

  /* Upper-case hex is not what the protocol sends. */
  g_hash_table_insert (params, g_strdup ("body_md5"),
      g_ascii_strup (EXAMPLE_MD5, -1));
  g_assert_false (verify_example (params, EXAMPLE_BODY, EXAMPLE_TIME, &error));
  g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_BODY_MD5);
  g_clear_error (&error);

  /* A body needs a body_md5. */
  g_hash_table_remove (params, "body_md5");
  g_assert_false (verify_example (params, EXAMPLE_BODY, EXAMPLE_TIME, &error));
  g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_MISSING);
  g_clear_error (&error);

  /* A body_md5 with no body must be the MD5 of nothing. */
  g_hash_table_insert (params, g_strdup ("body_md5"), g_strdup (EXAMPLE_MD5));
  g_assert_false (verify_example (params, NULL, EXAMPLE_TIME, &error));
  g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_BODY_MD5);
  g_clear_error (&error);
}

static void
test_http_forged (void)
{
  GError *error = NULL;
  g_autoptr (GHashTable) params = NULL;

  /* One digit off. */
  params = example_params ();
  g_hash_table_insert (params, g_strdup ("auth_signature"),
      g_strdup (FORGED_SIGNATURE));
  g_assert_false (verify_example (params, EXAMPLE_BODY, EXAMPLE_TIME, &error));
  g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_SIGNATURE);
  g_clear_error (&error);

  /* A parameter added after signing. */
  g_hash_table_insert (params, g_strdup ("auth_signature"),
      g_strdup (EXAMPLE_SIGNATURE));
  g_hash_table_insert (params, g_strdup ("socket_id"), g_strdup ("1.1"));
  g_assert_false (verify_example (params, EXAMPLE_BODY, EXAMPLE_TIME, &error));
  g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_SIGNATURE);
  g_clear_error (&error);
  g_hash_table_remove (params, "socket_id");

  /* Another path or method. */
  g_assert_false (legba_auth_http_verify (PUSHER_KEY, PUSHER_SECRET, "POST",
          "/apps/4/events", params, EXAMPLE_BODY, strlen (EXAMPLE_BODY),
          EXAMPLE_TIME, 600, &error));
  g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_SIGNATURE);
  g_clear_error (&error);
  g_assert_false (legba_auth_http_verify (PUSHER_KEY, PUSHER_SECRET, "GET",
          "/apps/3/events", params, EXAMPLE_BODY, strlen (EXAMPLE_BODY),
          EXAMPLE_TIME, 600, &error));
  g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_SIGNATURE);
  g_clear_error (&error);

  /* Another secret. */
  g_assert_false (legba_auth_http_verify (PUSHER_KEY, "not-the-secret",
          "POST", "/apps/3/events", params, EXAMPLE_BODY,
          strlen (EXAMPLE_BODY), EXAMPLE_TIME, 600, &error));
  g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_SIGNATURE);
  g_clear_error (&error);
}

static void
test_http_parameters (void)
{
  static const char *const required[] = { "auth_key", "auth_timestamp",
    "auth_version", "auth_signature"
  };
  GError *error = NULL;
  guint i;

  for (i = 0; i < G_N_ELEMENTS (required); i++) {
    g_autoptr (GHashTable) params = example_params ();

    g_hash_table_remove (params, required[i]);
    g_assert_false (verify_example (params, EXAMPLE_BODY, EXAMPLE_TIME,
            &error));
    g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_MISSING);
    g_clear_error (&error);
  }

  {
    g_autoptr (GHashTable) params = example_params ();

    g_hash_table_insert (params, g_strdup ("auth_key"), g_strdup ("other"));
    g_assert_false (verify_example (params, EXAMPLE_BODY, EXAMPLE_TIME,
            &error));
    g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_KEY);
    g_clear_error (&error);

    g_hash_table_insert (params, g_strdup ("auth_key"), g_strdup (PUSHER_KEY));
    g_hash_table_insert (params, g_strdup ("auth_version"), g_strdup ("2.0"));
    g_assert_false (verify_example (params, EXAMPLE_BODY, EXAMPLE_TIME,
            &error));
    g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_VERSION);
    g_clear_error (&error);
  }
}

/* ---- Join tokens ---- */

#define TOKEN_SECRET "token-secret"
#define NOW 1700000000

static char *
b64url_len (const char *data, gsize len)
{
  char *s = g_base64_encode ((const guchar *) data, len);
  char *p;

  for (p = s; *p; p++) {
    if (*p == '+')
      *p = '-';
    else if (*p == '/')
      *p = '_';
    else if (*p == '=')
      *p = '\0';
  }
  return s;
}

static char *
b64url (const char *text)
{
  return b64url_len (text, strlen (text));
}

/* An HS256 token built by hand from the bytes of its JSON parts. */
static char *
make_token_len (const char *secret, const char *header, gsize header_len,
    const char *payload, gsize payload_len)
{
  g_autofree char *h = b64url_len (header, header_len);
  g_autofree char *p = b64url_len (payload, payload_len);
  g_autofree char *input = g_strconcat (h, ".", p, NULL);
  g_autoptr (GHmac) hmac = g_hmac_new (G_CHECKSUM_SHA256,
      (const guchar *) secret, strlen (secret));
  guint8 digest[32];
  gsize len = sizeof (digest);
  g_autofree char *sig = NULL;

  g_hmac_update (hmac, (const guchar *) input, -1);
  g_hmac_get_digest (hmac, digest, &len);
  sig = b64url_len ((const char *) digest, len);
  return g_strconcat (input, ".", sig, NULL);
}

static char *
make_token (const char *secret, const char *header, const char *payload)
{
  return make_token_len (secret, header, strlen (header), payload,
      strlen (payload));
}

#define HS256 "{\"alg\":\"HS256\",\"typ\":\"JWT\"}"
#define CLAIMS(extra) \
  "{\"room\":\"standup\",\"sub\":\"alice\",\"name\":\"Alice A.\"," \
  "\"iat\":1699999000,\"exp\":1700000600" extra "}"

static void
assert_token_refused (const char *token, gint64 now)
{
  LegbaTokenClaims claims;
  GError *error = NULL;

  g_assert_false (legba_token_verify (TOKEN_SECRET, token, now, &claims,
          &error));
  g_assert_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_TOKEN);
  g_assert_null (claims.room);
  g_assert_null (claims.identity);
  g_assert_null (claims.name);
  g_clear_error (&error);
}

static void
test_token_roundtrip (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *token = NULL;
  LegbaTokenClaims claims;
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;
  char **parts;

  token = legba_join_token_new (TOKEN_SECRET, "standup", "alice@example.com",
      "Alice Ä.", 3600, &error);
  g_assert_no_error (error);
  g_assert_nonnull (token);

  /* Three base64url segments, no padding. */
  parts = g_strsplit (token, ".", -1);
  g_assert_cmpuint (g_strv_length (parts), ==, 3);
  g_assert_null (strpbrk (token, "=+/"));
  g_strfreev (parts);

  g_assert_true (legba_token_verify (TOKEN_SECRET, token, now, &claims,
          &error));
  g_assert_no_error (error);
  g_assert_cmpstr (claims.room, ==, "standup");
  g_assert_cmpstr (claims.identity, ==, "alice@example.com");
  g_assert_cmpstr (claims.name, ==, "Alice Ä.");
  g_assert_cmpint (claims.expires, >=, now + 3600);
  g_assert_cmpint (claims.expires, <=, now + 3601);
  legba_token_claims_clear (&claims);
  g_assert_null (claims.room);

  /* It expires after its lifetime, and only the secret verifies it. */
  assert_token_refused (token, now + 3602);
  g_assert_false (legba_token_verify ("other-secret", token, now, &claims,
          NULL));
}

static void
test_token_default_name (void)
{
  g_autofree char *token = NULL;
  g_autofree char *unnamed = NULL;
  LegbaTokenClaims claims;

  token = legba_join_token_new (TOKEN_SECRET, "r", "bob", NULL, 60, NULL);
  g_assert_true (legba_token_verify (TOKEN_SECRET, token,
          g_get_real_time () / G_USEC_PER_SEC, &claims, NULL));
  g_assert_cmpstr (claims.name, ==, "bob");
  legba_token_claims_clear (&claims);

  unnamed = make_token (TOKEN_SECRET, HS256,
      "{\"room\":\"r\",\"sub\":\"carol\",\"exp\":1700000600}");
  g_assert_true (legba_token_verify (TOKEN_SECRET, unnamed, NOW, &claims,
          NULL));
  g_assert_cmpstr (claims.name, ==, "carol");
  g_assert_cmpint (claims.expires, ==, 1700000600);
  legba_token_claims_clear (&claims);
}

static void
test_token_handmade (void)
{
  g_autofree char *token = make_token (TOKEN_SECRET, HS256, CLAIMS (""));
  g_autofree char *no_typ = make_token (TOKEN_SECRET, "{\"alg\":\"HS256\"}",
      CLAIMS (""));
  LegbaTokenClaims claims;

  /* Any conforming HS256 JWT library's tokens verify. */
  g_assert_true (legba_token_verify (TOKEN_SECRET, token, NOW, &claims, NULL));
  g_assert_cmpstr (claims.room, ==, "standup");
  g_assert_cmpstr (claims.identity, ==, "alice");
  g_assert_cmpstr (claims.name, ==, "Alice A.");
  legba_token_claims_clear (&claims);
  g_assert_true (legba_token_verify (TOKEN_SECRET, no_typ, NOW, &claims, NULL));
  legba_token_claims_clear (&claims);

  /* Expired at exp, not a second later. */
  assert_token_refused (token, 1700000600);
  g_assert_true (legba_token_verify (TOKEN_SECRET, token, 1700000599, &claims,
          NULL));
  legba_token_claims_clear (&claims);
}

static void
test_token_forged (void)
{
  g_autofree char *token = make_token (TOKEN_SECRET, HS256, CLAIMS (""));
  g_autofree char *other = make_token ("guessed", HS256, CLAIMS (""));
  g_autofree char *tampered = NULL;
  g_autofree char *spliced = NULL;
  g_autofree char *alien_token = NULL;
  g_autofree char *truncated = NULL;
  char **parts, **alien;
  gsize len;

  assert_token_refused (other, NOW);

  /* A payload for another room under the original signature. */
  parts = g_strsplit (token, ".", 3);
  alien_token = make_token (TOKEN_SECRET, HS256,
      "{\"room\":\"other\",\"sub\":\"alice\",\"exp\":1700000600}");
  alien = g_strsplit (alien_token, ".", 3);
  spliced = g_strjoin (".", parts[0], alien[1], parts[2], NULL);
  assert_token_refused (spliced, NOW);
  g_strfreev (alien);
  g_strfreev (parts);

  /* One character of the signature changed, and a truncated one. */
  tampered = g_strdup (token);
  len = strlen (tampered);
  tampered[len - 2] = tampered[len - 2] == 'A' ? 'B' : 'A';
  assert_token_refused (tampered, NOW);
  truncated = g_strndup (token, len - 1);
  assert_token_refused (truncated, NOW);
}

static void
test_token_algorithms (void)
{
  static const char *const headers[] = {
    "{\"alg\":\"none\",\"typ\":\"JWT\"}",
    "{\"alg\":\"HS512\",\"typ\":\"JWT\"}",
    "{\"alg\":\"RS256\",\"typ\":\"JWT\"}",
    "{\"alg\":\"hs256\",\"typ\":\"JWT\"}",
    "{\"typ\":\"JWT\"}",
    "{\"alg\":256}",
    "{\"alg\":\"HS256\",\"typ\":\"JWE\"}",
    "[\"HS256\"]",
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (headers); i++) {
    g_autofree char *token = make_token (TOKEN_SECRET, headers[i],
        CLAIMS (""));

    assert_token_refused (token, NOW);
  }

  /* "alg": "none" with the signature left empty. */
  {
    g_autofree char *h = b64url ("{\"alg\":\"none\"}");
    g_autofree char *p = b64url (CLAIMS (""));
    g_autofree char *unsigned_token = g_strconcat (h, ".", p, ".", NULL);

    assert_token_refused (unsigned_token, NOW);
  }
}

static void
test_token_malformed (void)
{
  g_autofree char *token = make_token (TOKEN_SECRET, HS256, CLAIMS (""));
  g_autofree char *four = g_strconcat (token, ".e30", NULL);
  g_autofree char *padded = NULL;
  g_autofree char *not_json = make_token (TOKEN_SECRET, HS256, "not json");
  g_autofree char *array = make_token (TOKEN_SECRET, HS256, "[1,2]");
  g_autofree char *nul = NULL;
  g_autofree char *huge = NULL;
  const char *dot = strchr (token, '.');
  GString *big;
  static const char *const junk[] = {
    "", ".", "..", "...", "abc", "a.b", "a.b.c", "e30.e30.", ".e30.abc",
    "e30..abc", "!!!.e30.abc", "e30.e30.abc!", "e.e30.abc",
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (junk); i++)
    assert_token_refused (junk[i], NOW);
  assert_token_refused (four, NOW);
  assert_token_refused (not_json, NOW);
  assert_token_refused (array, NOW);

  /* base64 padding is not base64url. */
  padded = g_strdup_printf ("%.*s=%s", (int) (dot - token), token, dot);
  assert_token_refused (padded, NOW);

  /* A NUL inside the decoded JSON text, signed as it is. */
  nul = make_token_len (TOKEN_SECRET, HS256 "\0", sizeof (HS256),
      CLAIMS (""), strlen (CLAIMS ("")));
  assert_token_refused (nul, NOW);
  g_free (nul);
  nul = make_token_len (TOKEN_SECRET, HS256, strlen (HS256),
      CLAIMS ("") "\0", sizeof (CLAIMS ("")));
  assert_token_refused (nul, NOW);

  /* Too long to be one of ours. */
  big = g_string_new (NULL);
  for (i = 0; i < 5000; i++)
    g_string_append_c (big, 'A');
  g_string_append (big, ".e30.abc");
  huge = g_string_free (big, FALSE);
  assert_token_refused (huge, NOW);
  assert_token_refused (NULL, NOW);
}

static void
test_token_claims (void)
{
  static const char *const bad[] = {
    /* missing claims */
    "{\"sub\":\"alice\",\"exp\":1700000600}",
    "{\"room\":\"r\",\"exp\":1700000600}",
    "{\"room\":\"r\",\"sub\":\"alice\"}",
    /* wrong types */
    "{\"room\":1,\"sub\":\"alice\",\"exp\":1700000600}",
    "{\"room\":\"r\",\"sub\":[\"alice\"],\"exp\":1700000600}",
    "{\"room\":\"r\",\"sub\":\"alice\",\"exp\":\"1700000600\"}",
    "{\"room\":\"r\",\"sub\":\"alice\",\"exp\":null}",
    "{\"room\":\"r\",\"sub\":\"alice\",\"exp\":1e300}",
    "{\"room\":\"r\",\"sub\":\"alice\",\"name\":5,\"exp\":1700000600}",
    "{\"room\":\"r\",\"sub\":\"alice\",\"iat\":\"x\",\"exp\":1700000600}",
    /* values outside docs/room-protocol.md §2 */
    "{\"room\":\"\",\"sub\":\"alice\",\"exp\":1700000600}",
    "{\"room\":\"a b\",\"sub\":\"alice\",\"exp\":1700000600}",
    "{\"room\":\"r/s\",\"sub\":\"alice\",\"exp\":1700000600}",
    "{\"room\":\"r\",\"sub\":\"\",\"exp\":1700000600}",
    "{\"room\":\"r\",\"sub\":\"al ice\",\"exp\":1700000600}",
    "{\"room\":\"r\",\"sub\":\"al\\\"ice\",\"exp\":1700000600}",
    "{\"room\":\"r\",\"sub\":\"ali:ce\",\"exp\":1700000600}",
    "{\"room\":\"r\",\"sub\":\"\\u00e9\",\"exp\":1700000600}",
    /* not yet valid */
    "{\"room\":\"r\",\"sub\":\"alice\",\"nbf\":1700000100,\"exp\":1700000600}",
    /* expired */
    "{\"room\":\"r\",\"sub\":\"alice\",\"exp\":1699999999}",
  };
  g_autofree char *room149 = NULL;
  g_autofree char *room150 = NULL;
  g_autofree char *json = NULL;
  g_autofree char *ok = NULL;
  g_autofree char *too_long = NULL;
  LegbaTokenClaims claims;
  guint i;

  for (i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autofree char *token = make_token (TOKEN_SECRET, HS256, bad[i]);

    assert_token_refused (token, NOW);
  }

  room149 = g_strnfill (149, 'r');
  room150 = g_strnfill (150, 'r');
  json = g_strdup_printf ("{\"room\":\"%s\",\"sub\":\"a\",\"exp\":%d}",
      room149, NOW + 1);
  ok = make_token (TOKEN_SECRET, HS256, json);
  g_assert_true (legba_token_verify (TOKEN_SECRET, ok, NOW, &claims, NULL));
  legba_token_claims_clear (&claims);
  g_free (json);
  json = g_strdup_printf ("{\"room\":\"%s\",\"sub\":\"a\",\"exp\":%d}",
      room150, NOW + 1);
  too_long = make_token (TOKEN_SECRET, HS256, json);
  assert_token_refused (too_long, NOW);
}

static void
test_token_mint_invalid (void)
{
  g_autofree char *long_name = g_strnfill (257, 'n');
  g_autofree char *long_room = g_strnfill (150, 'r');
  struct
  {
    const char *secret, *room, *identity, *name;
    gint64 lifetime;
  } cases[] = {
    {"", "r", "alice", NULL, 60},
    {"s", "", "alice", NULL, 60},
    {"s", "a room", "alice", NULL, 60},
    {"s", long_room, "alice", NULL, 60},
    {"s", "r", "", NULL, 60},
    {"s", "r", "al/ice", NULL, 60},
    {"s", "r", "alice", long_name, 60},
    {"s", "r", "alice", "\xff\xfe", 60},
    {"s", "r", "alice", NULL, 0},
    {"s", "r", "alice", NULL, -5},
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++) {
    GError *error = NULL;
    char *token = legba_join_token_new (cases[i].secret, cases[i].room,
        cases[i].identity, cases[i].name, cases[i].lifetime, &error);

    g_assert_null (token);
    g_assert_error (error, LEGBA_TOKEN_ERROR, LEGBA_TOKEN_ERROR_INVALID);
    g_clear_error (&error);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/auth/hmac/hex", test_hmac_hex);
  g_test_add_func ("/auth/equal", test_equal);
  g_test_add_func ("/auth/channel/private-example",
      test_channel_private_example);
  g_test_add_func ("/auth/channel/presence-example",
      test_channel_presence_example);
  g_test_add_func ("/auth/channel/forged", test_channel_forged);
  g_test_add_func ("/auth/user/example", test_user_example);
  g_test_add_func ("/auth/http/string-to-sign", test_http_string_to_sign);
  g_test_add_func ("/auth/http/pusher-example", test_http_pusher_example);
  g_test_add_func ("/auth/http/node-sdk-example", test_http_node_sdk_example);
  g_test_add_func ("/auth/http/stale", test_http_stale);
  g_test_add_func ("/auth/http/body-md5", test_http_body_md5);
  g_test_add_func ("/auth/http/forged", test_http_forged);
  g_test_add_func ("/auth/http/parameters", test_http_parameters);
  g_test_add_func ("/auth/token/roundtrip", test_token_roundtrip);
  g_test_add_func ("/auth/token/default-name", test_token_default_name);
  g_test_add_func ("/auth/token/handmade", test_token_handmade);
  g_test_add_func ("/auth/token/forged", test_token_forged);
  g_test_add_func ("/auth/token/algorithms", test_token_algorithms);
  g_test_add_func ("/auth/token/malformed", test_token_malformed);
  g_test_add_func ("/auth/token/claims", test_token_claims);
  g_test_add_func ("/auth/token/mint-invalid", test_token_mint_invalid);

  return g_test_run ();
}
