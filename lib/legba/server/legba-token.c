/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Join tokens: JSON Web Tokens (RFC 7519) signed with HMAC-SHA256 (JWS
 * "HS256", RFC 7515/7518) under the app secret, so a participant can be
 * admitted to one room without ever holding the secret.
 */
#include <legba/server/legba-token.h>
#include <legba/common/legba-auth.h>
#include <legba/server/legba-token-private.h>
#include <legba/common/legba-json.h>

#include <json-glib/json-glib.h>
#include <string.h>

/* Bounds on untrusted tokens, well above anything legba_join_token_new
 * mints, so verification work stays small. */
#define MAX_TOKEN_LENGTH 4096
#define MAX_NAME_BYTES 256
#define MAX_IDENTITY_LENGTH 128
/* docs/room-protocol.md §2: the channel "presence-legba.R" stays within 164. */
#define MAX_ROOM_LENGTH 149

/**
 * legba_token_error_quark:
 *
 * Gets the error domain of join tokens, %LEGBA_TOKEN_ERROR: its errors are
 * from the #LegbaTokenError enumeration.
 *
 * Returns: the domain's #GQuark
 */
GQuark
legba_token_error_quark (void)
{
  return g_quark_from_static_string ("legba-token-error-quark");
}

/* docs/room-protocol.md §2 and Pusher channel names: [A-Za-z0-9_\-=@,.;] */
static gboolean
name_chars_are_valid (const char *s, gsize max_len)
{
  gsize i;

  if (s == NULL || s[0] == '\0')
    return FALSE;

  for (i = 0; s[i]; i++) {
    if (i >= max_len)
      return FALSE;
    if (!g_ascii_isalnum (s[i]) && !strchr ("_-=@,.;", s[i]))
      return FALSE;
  }
  return TRUE;
}

static gboolean
room_is_valid (const char *room)
{
  return name_chars_are_valid (room, MAX_ROOM_LENGTH);
}

/* An identity becomes "IDENTITY-SUFFIX", a presence user_id. */
static gboolean
identity_is_valid (const char *identity)
{
  return name_chars_are_valid (identity, MAX_IDENTITY_LENGTH);
}

static gboolean
display_name_is_valid (const char *name)
{
  return strlen (name) <= MAX_NAME_BYTES && g_utf8_validate (name, -1, NULL);
}

/* RFC 7515 base64url without padding. */
static char *
base64url_encode (const guchar * data, gsize len)
{
  char *s = g_base64_encode (data, len);
  char *p;

  for (p = s; *p; p++) {
    if (*p == '+')
      *p = '-';
    else if (*p == '/')
      *p = '_';
    else if (*p == '=') {
      *p = '\0';
      break;
    }
  }
  return s;
}

/* Decodes one base64url segment of length len; NULL unless it is made only
 * of the alphabet and has a possible length. */
static guchar *
base64url_decode (const char *s, gsize len, gsize * out_len)
{
  g_autofree char *std = NULL;
  gsize i, padded;

  if (len == 0 || len % 4 == 1)
    return NULL;

  padded = (len + 3) / 4 * 4;
  std = g_malloc (padded + 1);
  for (i = 0; i < len; i++) {
    char c = s[i];

    if (c == '-')
      c = '+';
    else if (c == '_')
      c = '/';
    else if (!g_ascii_isalnum (c))
      return NULL;
    std[i] = c;
  }
  for (; i < padded; i++)
    std[i] = '=';
  std[padded] = '\0';

  return g_base64_decode (std, out_len);
}

/* base64url(HMAC-SHA256(secret, signing_input)) */
static char *
jws_sign (const char *secret, const char *input, gsize input_len)
{
  g_autoptr (GHmac) hmac = NULL;
  guint8 digest[32];
  gsize digest_len = sizeof (digest);

  hmac = g_hmac_new (G_CHECKSUM_SHA256, (const guchar *) secret,
      strlen (secret));
  g_hmac_update (hmac, (const guchar *) input, input_len);
  g_hmac_get_digest (hmac, digest, &digest_len);
  return base64url_encode (digest, digest_len);
}

static char *
json_segment (JsonNode * node)
{
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autofree char *text = NULL;
  gsize len;

  json_generator_set_root (gen, node);
  text = json_generator_to_data (gen, &len);
  return base64url_encode ((const guchar *) text, len);
}

/**
 * legba_join_token_new:
 * @secret: the app secret the server verifies the token with
 * @room: the room the token admits to, `[A-Za-z0-9_\-=@,.;]{1,149}`
 * @identity: who the participant is, `[A-Za-z0-9_\-=@,.;]{1,128}`; its
 *   participant id will be @identity, "-" and a suffix of its own
 * @name: (nullable): display name, UTF-8, at most 256 bytes; %NULL or empty
 *   uses @identity
 * @lifetime_s: seconds from now until the token expires; positive
 * @error: return location for a #GError, or %NULL
 *
 * Mints a join token: an HS256 JSON Web Token whose claims are `room`,
 * `sub` (the identity), `name`, `iat` and `exp`. legba-server's
 * `POST /apps/APP_ID/auth` trades it, with a socket id and the client's
 * participant suffix, for the presence authorization of exactly that room.
 *
 * Returns: (transfer full) (nullable): the token, or %NULL with @error set
 *   (%LEGBA_TOKEN_ERROR_INVALID) when an argument is not valid
 */
char *
legba_join_token_new (const char *secret, const char *room,
    const char *identity, const char *name, gint64 lifetime_s, GError ** error)
{
  g_autoptr (JsonBuilder) b = NULL;
  g_autoptr (JsonNode) header = NULL;
  g_autoptr (JsonNode) payload = NULL;
  g_autofree char *h = NULL;
  g_autofree char *p = NULL;
  g_autofree char *input = NULL;
  g_autofree char *sig = NULL;
  gint64 now;

  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (secret == NULL || secret[0] == '\0') {
    g_set_error (error, LEGBA_TOKEN_ERROR, LEGBA_TOKEN_ERROR_INVALID,
        "The secret is empty");
    return NULL;
  }
  if (!room_is_valid (room)) {
    g_set_error (error, LEGBA_TOKEN_ERROR, LEGBA_TOKEN_ERROR_INVALID,
        "Invalid room name: 1 to %d characters of A-Z a-z 0-9 _ - = @ , . ;",
        MAX_ROOM_LENGTH);
    return NULL;
  }
  if (!identity_is_valid (identity)) {
    g_set_error (error, LEGBA_TOKEN_ERROR, LEGBA_TOKEN_ERROR_INVALID,
        "Invalid identity: 1 to %d characters of A-Z a-z 0-9 _ - = @ , . ;",
        MAX_IDENTITY_LENGTH);
    return NULL;
  }
  if (name == NULL || name[0] == '\0')
    name = identity;
  if (!display_name_is_valid (name)) {
    g_set_error (error, LEGBA_TOKEN_ERROR, LEGBA_TOKEN_ERROR_INVALID,
        "Invalid name: UTF-8 of at most %d bytes", MAX_NAME_BYTES);
    return NULL;
  }
  if (lifetime_s <= 0 || lifetime_s > G_MAXINT32) {
    g_set_error (error, LEGBA_TOKEN_ERROR, LEGBA_TOKEN_ERROR_INVALID,
        "The lifetime must be between 1 and %d seconds", G_MAXINT32);
    return NULL;
  }

  now = g_get_real_time () / G_USEC_PER_SEC;

  b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "alg");
  json_builder_add_string_value (b, "HS256");
  json_builder_set_member_name (b, "typ");
  json_builder_add_string_value (b, "JWT");
  json_builder_end_object (b);
  header = json_builder_get_root (b);

  json_builder_reset (b);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "room");
  json_builder_add_string_value (b, room);
  json_builder_set_member_name (b, "sub");
  json_builder_add_string_value (b, identity);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, name);
  json_builder_set_member_name (b, "iat");
  json_builder_add_int_value (b, now);
  json_builder_set_member_name (b, "exp");
  json_builder_add_int_value (b, now + lifetime_s);
  json_builder_end_object (b);
  payload = json_builder_get_root (b);

  h = json_segment (header);
  p = json_segment (payload);
  input = g_strconcat (h, ".", p, NULL);
  sig = jws_sign (secret, input, strlen (input));

  return g_strconcat (input, ".", sig, NULL);
}

/* One segment as a JSON object, read strictly (RFC 8259, bounded
 * nesting): the header is parsed before the signature is checked. */
static JsonObject *
parse_segment (const char *s, gsize len)
{
  g_autofree guchar *text = NULL;
  g_autofree char *message = NULL;
  g_autoptr (JsonNode) root = NULL;
  gsize text_len;

  text = base64url_decode (s, len, &text_len);
  if (text == NULL)
    return NULL;

  root = legba_json_parse_strict ((const char *) text, text_len, NULL, NULL,
      &message);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return NULL;
  return json_object_ref (json_node_get_object (root));
}

/* A JSON number as whole seconds (RFC 7519 NumericDate); FALSE when the
 * member is absent or not a number. */
static gboolean
get_numeric_date (JsonObject * obj, const char *member, gint64 * out)
{
  JsonNode *node = json_object_get_member (obj, member);
  GType type;

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node))
    return FALSE;

  type = json_node_get_value_type (node);
  if (type == G_TYPE_INT64) {
    *out = json_node_get_int (node);
    return TRUE;
  }
  if (type == G_TYPE_DOUBLE) {
    gdouble d = json_node_get_double (node);

    if (!(d > -1e15 && d < 1e15))
      return FALSE;
    *out = (gint64) d;
    return TRUE;
  }
  return FALSE;
}

static gboolean
token_error (GError ** error, const char *message)
{
  g_set_error_literal (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_TOKEN,
      message);
  return FALSE;
}

/* RFC 7515 §5.2 with the algorithm fixed to HS256 (RFC 8725 §3.1: never
 * let the token choose, never accept "none"). */
static gboolean
check_header_and_signature (const char *secret, const char *token,
    const char *dot1, const char *dot2, GError ** error)
{
  g_autoptr (JsonObject) header = NULL;
  g_autofree char *expected = NULL;
  const char *alg, *typ;

  header = parse_segment (token, dot1 - token);
  if (header == NULL)
    return token_error (error, "Malformed token");

  alg = legba_json_object_get_string (header, "alg");
  if (alg == NULL || strcmp (alg, "HS256") != 0)
    return token_error (error, "Token algorithm must be HS256");
  typ = legba_json_object_get_string (header, "typ");
  if (json_object_has_member (header, "typ") &&
      (typ == NULL || g_ascii_strcasecmp (typ, "JWT") != 0))
    return token_error (error, "Token type must be JWT");

  expected = jws_sign (secret, token, dot2 - token);
  if (!legba_auth_equal (expected, dot2 + 1))
    return token_error (error, "Invalid token signature");
  return TRUE;
}

static gboolean
read_claims (JsonObject * payload, gint64 now_s, LegbaTokenClaims * claims,
    GError ** error)
{
  const char *room, *identity, *name;
  gint64 exp, nbf, iat;

  room = legba_json_object_get_string (payload, "room");
  if (room == NULL)
    return token_error (error, "Token has no room claim");
  if (!room_is_valid (room))
    return token_error (error, "Token room is not a valid room name");

  identity = legba_json_object_get_string (payload, "sub");
  if (identity == NULL)
    return token_error (error, "Token has no sub claim");
  if (!identity_is_valid (identity))
    return token_error (error, "Token sub is not a valid identity");

  if (!get_numeric_date (payload, "exp", &exp))
    return token_error (error, "Token has no exp claim");
  if (now_s >= exp)
    return token_error (error, "Token expired");

  if (json_object_has_member (payload, "nbf")) {
    if (!get_numeric_date (payload, "nbf", &nbf))
      return token_error (error, "Token nbf is not a number");
    if (now_s < nbf)
      return token_error (error, "Token not yet valid");
  }
  if (json_object_has_member (payload, "iat") &&
      !get_numeric_date (payload, "iat", &iat))
    return token_error (error, "Token iat is not a number");

  name = legba_json_object_get_string (payload, "name");
  if (json_object_has_member (payload, "name") && name == NULL)
    return token_error (error, "Token name is not a string");
  if (name == NULL || name[0] == '\0')
    name = identity;
  if (!display_name_is_valid (name))
    return token_error (error, "Token name is too long");

  claims->room = g_strdup (room);
  claims->identity = g_strdup (identity);
  claims->name = g_strdup (name);
  claims->expires = exp;
  return TRUE;
}

gboolean
legba_token_verify (const char *secret, const char *token, gint64 now_s,
    LegbaTokenClaims * claims, GError ** error)
{
  g_autoptr (JsonObject) payload = NULL;
  const char *dot1, *dot2;
  gsize len;

  g_return_val_if_fail (secret != NULL, FALSE);
  g_return_val_if_fail (claims != NULL, FALSE);

  memset (claims, 0, sizeof (*claims));

  if (token == NULL || secret[0] == '\0')
    return token_error (error, "Malformed token");

  len = strlen (token);
  dot1 = strchr (token, '.');
  dot2 = dot1 ? strchr (dot1 + 1, '.') : NULL;
  if (len > MAX_TOKEN_LENGTH || dot1 == NULL || dot2 == NULL ||
      strchr (dot2 + 1, '.') != NULL || dot2[1] == '\0')
    return token_error (error, "Malformed token");

  if (!check_header_and_signature (secret, token, dot1, dot2, error))
    return FALSE;

  payload = parse_segment (dot1 + 1, dot2 - dot1 - 1);
  if (payload == NULL)
    return token_error (error, "Malformed token");

  return read_claims (payload, now_s, claims, error);
}

void
legba_token_claims_clear (LegbaTokenClaims * claims)
{
  g_return_if_fail (claims != NULL);

  g_clear_pointer (&claims->room, g_free);
  g_clear_pointer (&claims->identity, g_free);
  g_clear_pointer (&claims->name, g_free);
  claims->expires = 0;
}
