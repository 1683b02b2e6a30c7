/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Join tokens, checked by the server (minting is public API:
 * legba-token.h).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Join tokens: HS256 JWT with claims room, sub (identity), name, exp
 * (and iat). Minting is public API (legba_join_token_new). */
typedef struct
{
  char *room;
  char *identity;
  char *name;
  gint64 expires;
} LegbaTokenClaims;

gboolean legba_token_verify (const char *secret, const char *token,
    gint64 now_s, LegbaTokenClaims * claims, GError ** error);
void legba_token_claims_clear (LegbaTokenClaims * claims);

G_END_DECLS
