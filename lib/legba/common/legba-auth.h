/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Signatures of the Pusher protocol and HTTP API, and constant-time checks.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Lower-case hex HMAC-SHA256 of message under secret. */
char *legba_auth_hmac_hex (const char *secret, const char *message,
    gssize len);

/* Constant-time comparison of two NUL-terminated strings (the time depends
 * on the lengths only). */
gboolean legba_auth_equal (const char *a, const char *b);

/* Pusher protocol 7: the `auth` of a private or presence subscription,
 * "KEY:HEX(HMAC-SHA256(SECRET, socket_id:channel[:channel_data]))".
 * channel_data is NULL for private channels. */
char *legba_auth_channel_sign (const char *key, const char *secret,
    const char *socket_id, const char *channel, const char *channel_data);
gboolean legba_auth_channel_check (const char *key, const char *secret,
    const char *socket_id, const char *channel, const char *channel_data,
    const char *auth);

/* Pusher protocol 7 pusher:signin: auth over "socket_id::user::user_data". */
char *legba_auth_user_sign (const char *key, const char *secret,
    const char *socket_id, const char *user_data);
gboolean legba_auth_user_check (const char *key, const char *secret,
    const char *socket_id, const char *user_data, const char *auth);

/* Pusher HTTP API request signature (auth_version 1.0):
 * "METHOD\nPATH\nQUERY" where QUERY is every parameter but auth_signature,
 * keys lower-cased, sorted by key, joined as k=v with "&".
 * `params` maps decoded keys to decoded values. */
char *legba_auth_http_string_to_sign (const char *method, const char *path,
    GHashTable * params);

#define LEGBA_AUTH_ERROR (legba_auth_error_quark ())
GQuark legba_auth_error_quark (void);

typedef enum
{
  LEGBA_AUTH_ERROR_MISSING,     /* a required parameter is absent */
  LEGBA_AUTH_ERROR_KEY,         /* auth_key unknown */
  LEGBA_AUTH_ERROR_VERSION,     /* auth_version is not 1.0 */
  LEGBA_AUTH_ERROR_TIMESTAMP,   /* auth_timestamp not within the window */
  LEGBA_AUTH_ERROR_BODY_MD5,    /* body_md5 does not match the body */
  LEGBA_AUTH_ERROR_SIGNATURE,   /* auth_signature does not match */
  LEGBA_AUTH_ERROR_TOKEN,       /* join token malformed, forged or expired */
} LegbaAuthError;

/* Checks a signed HTTP API request: key, version, timestamp within
 * window_s of now_s, body_md5 when there is a body, then the signature. */
gboolean legba_auth_http_verify (const char *key, const char *secret,
    const char *method, const char *path, GHashTable * params,
    const char *body, gsize body_len, gint64 now_s, guint window_s,
    GError ** error);

G_END_DECLS
