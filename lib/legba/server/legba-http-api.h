/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The Pusher HTTP API of legba-server over LegbaHub, without socket I/O:
 * a request in, a response out, so it is unit-tested and fuzzed alone.
 */
#pragma once

#include <legba/server/legba-hub.h>

G_BEGIN_DECLS

typedef struct
{
  const char *method;           /* "GET", "POST", ... */
  const char *path;             /* decoded path, e.g. /apps/1/events */
  GHashTable *params;           /* decoded query parameters (str -> str) */
  const char *body;             /* may be NULL when body_len is 0 */
  gsize body_len;
  const char *authorization;    /* Authorization header, or NULL */
  gint64 now_s;                 /* wall-clock seconds, for auth_timestamp */
} LegbaHttpRequest;

typedef struct
{
  guint status;
  char *body;                   /* JSON text */
} LegbaHttpResponse;

/* Handles everything under /apps/: events, batch_events, channels,
 * channels/NAME, channels/NAME/users, users/ID/terminate_connections,
 * and the join-token auth endpoint /apps/ID/auth. Errors are JSON
 * {"error": "..."} with the status Pusher uses (400, 401, 403, 404, 413). */
void legba_http_api_handle (LegbaHub * hub, const LegbaHttpRequest * request,
    LegbaHttpResponse * response);
void legba_http_response_clear (LegbaHttpResponse * response);

G_END_DECLS
