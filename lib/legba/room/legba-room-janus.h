/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaJanus: one session with a Janus 1.1 server over its WebSocket API
 * (subprotocol `janus-protocol`): creating the session, keeping it alive
 * (a keepalive every LEGBA_JANUS_KEEPALIVE_S), attaching plugin handles,
 * sending their messages and trickled candidates, and matching replies
 * to requests by transaction. It knows nothing of the VideoRoom's
 * requests: legba-room-sfu.c speaks those through it.
 *
 * Every request carries the `token` given at creation (Janus's token
 * authentication; ignored by a Janus without it), never an API secret.
 *
 * Threads: it belongs to the thread-default main context at its
 * creation; its callbacks run there. After legba_janus_free() none runs.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define LEGBA_JANUS_KEEPALIVE_S 25

typedef struct _LegbaJanus LegbaJanus;

/* The answer to a request made for `handle` (0: the session's own):
 * `reply` is Janus's "success" (session, attach, a synchronous plugin
 * request) or, after its "ack", the plugin's "event" with the same
 * transaction; NULL with `error` set when Janus answered "error" or the
 * session ended first. */
typedef void (*LegbaJanusReply) (guint64 handle, JsonObject * reply,
    const GError * error, gpointer user_data);

/* ready: the session exists.
 * event: an event of a handle's plugin that answers no request: `data` is
 *   its plugindata's data, `jsep` its description or NULL.
 * hangup: the handle's PeerConnection went down (`reason` from Janus).
 * failed: the session is lost: Janus refused it (`code`
 *   LEGBA_ROOM_ERROR_REFUSED: a token it does not take), or the connection
 *   failed or closed, or Janus timed the session out
 *   (LEGBA_ROOM_ERROR_UNREACHABLE); nothing more comes. */
typedef struct
{
  void (*ready) (gpointer user_data);
  void (*event) (guint64 handle, JsonObject * data, JsonObject * jsep,
      gpointer user_data);
  void (*hangup) (guint64 handle, const char *reason, gpointer user_data);
  void (*failed) (int code, const char *why, gpointer user_data);
} LegbaJanusEvents;

LegbaJanus *legba_janus_new (const char *url, const char *token,
    const LegbaJanusEvents * events, gpointer user_data);
/* Destroys the session (best effort) and closes the connection. */
void legba_janus_free (LegbaJanus * janus);
/* The token later requests carry (the server gave the member a new one). */
void legba_janus_set_token (LegbaJanus * janus, const char *token);

/* reply's `reply`: "success" with data.id the new handle's id; its
 * `handle` argument is `tag` */
void legba_janus_attach (LegbaJanus * janus, const char *plugin,
    guint64 tag, LegbaJanusReply reply, gpointer user_data);
void legba_janus_detach (LegbaJanus * janus, guint64 handle);
/* body (transfer full); jsep_type and sdp NULL for none */
void legba_janus_message (LegbaJanus * janus, guint64 handle,
    JsonObject * body, const char *jsep_type, const char *sdp,
    LegbaJanusReply reply, gpointer user_data);
/* candidate (transfer full): {"candidate", "sdpMid", "sdpMLineIndex"};
 * NULL: the last one was sent */
void legba_janus_trickle (LegbaJanus * janus, guint64 handle,
    JsonObject * candidate);

G_END_DECLS
