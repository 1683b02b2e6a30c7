/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Signatures of the Pusher protocol and HTTP API, and constant-time checks.
 */
#include <legba/common/legba-auth.h>

#include <string.h>

GQuark
legba_auth_error_quark (void)
{
  return g_quark_from_static_string ("legba-auth-error-quark");
}

char *
legba_auth_hmac_hex (const char *secret, const char *message, gssize len)
{
  g_return_val_if_fail (secret != NULL, NULL);
  g_return_val_if_fail (message != NULL, NULL);

  if (len < 0)
    len = strlen (message);

  /* GLib writes the digest as lower-case hex, as Pusher's libraries do. */
  return g_compute_hmac_for_data (G_CHECKSUM_SHA256,
      (const guchar *) secret, strlen (secret), (const guchar *) message, len);
}

gboolean
legba_auth_equal (const char *a, const char *b)
{
  gsize la, lb, i;
  guint diff;

  g_return_val_if_fail (a != NULL, FALSE);
  g_return_val_if_fail (b != NULL, FALSE);

  la = strlen (a);
  lb = strlen (b);

  /* Walk all of `a` whatever the contents, so an attacker who controls `b`
   * learns nothing from the time taken but the lengths. */
  diff = (la != lb);
  for (i = 0; i < la; i++)
    diff |= (guchar) a[i] ^ (guchar) b[i < lb ? i : 0];

  return diff == 0;
}

/* "KEY:HEX(HMAC-SHA256(SECRET, signed))" */
static char *
sign_auth (const char *key, const char *secret, const char *signed_text)
{
  g_autofree char *sig = legba_auth_hmac_hex (secret, signed_text, -1);

  return g_strconcat (key, ":", sig, NULL);
}

char *
legba_auth_channel_sign (const char *key, const char *secret,
    const char *socket_id, const char *channel, const char *channel_data)
{
  g_autofree char *text = NULL;

  g_return_val_if_fail (key != NULL && secret != NULL, NULL);
  g_return_val_if_fail (socket_id != NULL && channel != NULL, NULL);

  /* Pusher protocol 7: socket_id:channel_name[:channel_data] */
  if (channel_data)
    text = g_strconcat (socket_id, ":", channel, ":", channel_data, NULL);
  else
    text = g_strconcat (socket_id, ":", channel, NULL);

  return sign_auth (key, secret, text);
}

gboolean
legba_auth_channel_check (const char *key, const char *secret,
    const char *socket_id, const char *channel, const char *channel_data,
    const char *auth)
{
  g_autofree char *expected = NULL;

  if (auth == NULL)
    return FALSE;

  expected = legba_auth_channel_sign (key, secret, socket_id, channel,
      channel_data);
  return legba_auth_equal (expected, auth);
}

char *
legba_auth_user_sign (const char *key, const char *secret,
    const char *socket_id, const char *user_data)
{
  g_autofree char *text = NULL;

  g_return_val_if_fail (key != NULL && secret != NULL, NULL);
  g_return_val_if_fail (socket_id != NULL && user_data != NULL, NULL);

  /* Pusher protocol 7 user authentication: socket_id::user::user_data */
  text = g_strconcat (socket_id, "::user::", user_data, NULL);
  return sign_auth (key, secret, text);
}

gboolean
legba_auth_user_check (const char *key, const char *secret,
    const char *socket_id, const char *user_data, const char *auth)
{
  g_autofree char *expected = NULL;

  if (auth == NULL)
    return FALSE;

  expected = legba_auth_user_sign (key, secret, socket_id, user_data);
  return legba_auth_equal (expected, auth);
}

typedef struct
{
  char *key;                    /* lower-cased */
  const char *value;
} SignParam;

static int
sign_param_compare (gconstpointer a, gconstpointer b)
{
  const SignParam *pa = a, *pb = b;

  return strcmp (pa->key, pb->key);
}

static void
sign_param_clear (SignParam * p)
{
  g_free (p->key);
}

char *
legba_auth_http_string_to_sign (const char *method, const char *path,
    GHashTable * params)
{
  g_autoptr (GArray) sorted = NULL;
  GString *s;
  GHashTableIter iter;
  gpointer k, v;
  guint i;

  g_return_val_if_fail (method != NULL && path != NULL, NULL);

  sorted = g_array_new (FALSE, FALSE, sizeof (SignParam));
  g_array_set_clear_func (sorted, (GDestroyNotify) sign_param_clear);

  if (params) {
    g_hash_table_iter_init (&iter, params);
    while (g_hash_table_iter_next (&iter, &k, &v)) {
      SignParam p;

      p.key = g_ascii_strdown (k, -1);
      p.value = v ? v : "";
      if (strcmp (p.key, "auth_signature") == 0) {
        g_free (p.key);
        continue;
      }
      g_array_append_val (sorted, p);
    }
  }
  g_array_sort (sorted, sign_param_compare);

  /* Pusher HTTP API: "METHOD\nPATH\nk=v&k=v", values not URL-escaped
   * (as the pusher Node SDK signs them). */
  s = g_string_new (method);
  g_string_append_c (s, '\n');
  g_string_append (s, path);
  g_string_append_c (s, '\n');
  for (i = 0; i < sorted->len; i++) {
    SignParam *p = &g_array_index (sorted, SignParam, i);

    if (i > 0)
      g_string_append_c (s, '&');
    g_string_append (s, p->key);
    g_string_append_c (s, '=');
    g_string_append (s, p->value);
  }

  return g_string_free (s, FALSE);
}

static gboolean
check_timestamp (const char *timestamp, gint64 now_s, guint window_s,
    GError ** error)
{
  guint64 ts;
  gint64 delta;

  if (!g_ascii_string_to_unsigned (timestamp, 10, 0, G_MAXINT64, &ts, NULL)) {
    g_set_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_TIMESTAMP,
        "auth_timestamp is not a number of seconds");
    return FALSE;
  }

  delta = now_s - (gint64) ts;
  if (delta > (gint64) window_s || delta < -(gint64) window_s) {
    g_set_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_TIMESTAMP,
        "Timestamp expired: Given timestamp (%s) not within %us of server "
        "time (%" G_GINT64_FORMAT ")", timestamp, window_s, now_s);
    return FALSE;
  }
  return TRUE;
}

static gboolean
check_body_md5 (GHashTable * params, const char *body, gsize body_len,
    GError ** error)
{
  const char *given = g_hash_table_lookup (params, "body_md5");
  g_autofree char *md5 = NULL;

  /* Pusher HTTP API: body_md5 is required when the body is not empty, and
   * checked whenever it is given. */
  if (given == NULL) {
    if (body_len == 0)
      return TRUE;
    g_set_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_MISSING,
        "body_md5 required for a request with a body");
    return FALSE;
  }

  md5 = g_compute_checksum_for_data (G_CHECKSUM_MD5,
      (const guchar *) (body ? body : ""), body ? body_len : 0);
  if (!legba_auth_equal (md5, given)) {
    g_set_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_BODY_MD5,
        "body_md5 does not match the body");
    return FALSE;
  }
  return TRUE;
}

gboolean
legba_auth_http_verify (const char *key, const char *secret,
    const char *method, const char *path, GHashTable * params,
    const char *body, gsize body_len, gint64 now_s, guint window_s,
    GError ** error)
{
  static const char *const required[] = { "auth_key", "auth_timestamp",
    "auth_version", "auth_signature"
  };
  g_autofree char *text = NULL;
  g_autofree char *expected = NULL;
  guint i;

  g_return_val_if_fail (key != NULL && secret != NULL, FALSE);
  g_return_val_if_fail (method != NULL && path != NULL, FALSE);
  g_return_val_if_fail (params != NULL, FALSE);

  for (i = 0; i < G_N_ELEMENTS (required); i++) {
    if (g_hash_table_lookup (params, required[i]) == NULL) {
      g_set_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_MISSING,
          "%s required", required[i]);
      return FALSE;
    }
  }

  if (strcmp (g_hash_table_lookup (params, "auth_key"), key) != 0) {
    g_set_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_KEY,
        "Unknown auth_key");
    return FALSE;
  }

  if (strcmp (g_hash_table_lookup (params, "auth_version"), "1.0") != 0) {
    g_set_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_VERSION,
        "auth_version must be 1.0");
    return FALSE;
  }

  if (!check_timestamp (g_hash_table_lookup (params, "auth_timestamp"),
          now_s, window_s, error))
    return FALSE;

  if (!check_body_md5 (params, body, body_len, error))
    return FALSE;

  text = legba_auth_http_string_to_sign (method, path, params);
  expected = legba_auth_hmac_hex (secret, text, -1);
  if (!legba_auth_equal (expected,
          g_hash_table_lookup (params, "auth_signature"))) {
    g_set_error (error, LEGBA_AUTH_ERROR, LEGBA_AUTH_ERROR_SIGNATURE,
        "Invalid signature: you should have sent HmacSHA256Hex(\"%s\", "
        "your_secret)", text);
    return FALSE;
  }
  return TRUE;
}
