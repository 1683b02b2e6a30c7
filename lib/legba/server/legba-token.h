/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once

#if !defined(LEGBA_INSIDE) && !defined(LEGBA_COMPILATION)
#error "Only <legba/server/server.h> can be included directly."
#endif

#include <glib.h>
#include <legba/legba-api.h>

G_BEGIN_DECLS

/**
 * LEGBA_TOKEN_ERROR:
 *
 * Error domain of legba_join_token_new(). Errors in this domain are from
 * the #LegbaTokenError enumeration.
 */
#define LEGBA_TOKEN_ERROR (legba_token_error_quark ())
LEGBA_API
GQuark legba_token_error_quark (void);

/**
 * LegbaTokenError:
 * @LEGBA_TOKEN_ERROR_INVALID: an argument is not valid (empty secret, room
 *   or identity outside the allowed characters, name too long, lifetime
 *   not positive)
 *
 * Errors of legba_join_token_new().
 */
typedef enum
{
  LEGBA_TOKEN_ERROR_INVALID,
} LegbaTokenError;

LEGBA_API
char *legba_join_token_new (const char *secret, const char *room,
    const char *identity, const char *name, gint64 lifetime_s,
    GError ** error);

G_END_DECLS
