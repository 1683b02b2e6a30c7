/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * One request to a Janus VideoRoom through Janus's HTTP API
 * (https://janus.conf.meetecho.com/docs/rest.html): a session of its own,
 * the plugin attached, the request, the session destroyed. Asynchronous,
 * on a main context given, over libsoup 3.
 */
#pragma once

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

G_BEGIN_DECLS

#define LEGBA_JANUS_ERROR (legba_janus_error_quark ())
GQuark legba_janus_error_quark (void);

/* Codes: Janus's own error codes (its core's 4xx, the VideoRoom's 4xx),
 * or these. */
typedef enum
{
  LEGBA_JANUS_ERROR_UNREACHABLE = 1,    /* no answer, HTTP error */
  LEGBA_JANUS_ERROR_INVALID = 2,        /* an answer that is not Janus's */
} LegbaJanusError;

/* data: the VideoRoom's answer ("plugindata" "data"), NULL on error. */
typedef void (*LegbaJanusCallback) (JsonObject * data, const GError * error,
    gpointer user_data);

/* Sends body (a VideoRoom request, e.g. {"request": "create", ...}) to the
 * Janus whose HTTP API is url, with api_secret when not NULL, through
 * session (made on context); callback is called once, from context, after
 * the Janus session is closed again.
 * A VideoRoom answer with an "error_code" is an error of that code. */
void legba_janus_request (SoupSession * session, GMainContext * context,
    const char *url, const char *api_secret, JsonObject * body,
    LegbaJanusCallback callback, gpointer user_data);

/* answer: Janus's whole answer (a "success" with its "data", or the
 * "ack" of a keepalive), NULL on error. */
typedef void (*LegbaJanusCoreCallback) (JsonObject * answer,
    const GError * error, gpointer user_data);

/* Sends one request of Janus's core (no plugin) to the Janus whose HTTP
 * API is url: verb ("create", "keepalive", ...) on the server's root, or
 * on session_id's path when not 0, with api_secret when not NULL; the
 * same envelope and answer reading as legba_janus_request(), without a
 * session of its own. callback is called once, from context; an answer
 * other than "ack" to "keepalive", or than "success" to the rest, is an
 * error (Janus's code for its "error"). */
void legba_janus_core_request (SoupSession * session, GMainContext * context,
    const char *url, const char *api_secret, const char *verb,
    gint64 session_id, LegbaJanusCoreCallback callback, gpointer user_data);

G_END_DECLS
