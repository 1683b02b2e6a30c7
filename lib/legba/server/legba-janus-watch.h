/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Watching Janus instances for their death (docs/server.md, SFU rooms): a
 * session of its own on each, through Janus's HTTP API, kept alive at an
 * interval. A keepalive that finds no answer, or a Janus that no longer
 * knows the session (it restarted, and so lost every VideoRoom), is the
 * instance lost. Asynchronous, on a main context given, over libsoup 3.
 */
#pragma once

#include <libsoup/soup.h>

G_BEGIN_DECLS

typedef struct _LegbaJanusWatch LegbaJanusWatch;

/* The instance (its index in urls) that had a session died or restarted;
 * called from context when the session is lost (again: FALSE), then at
 * each interval while no session can be made there (again: TRUE). */
typedef void (*LegbaJanusLostFunc) (guint instance, gboolean again,
    const char *why, gpointer user_data);

/* Watches every url (NULL-terminated: Janus HTTP APIs) every interval_ms,
 * through session (made on context), with api_secret when not NULL. */
LegbaJanusWatch *legba_janus_watch_new (SoupSession * session,
    GMainContext * context, const char *const *urls, const char *api_secret,
    guint interval_ms, LegbaJanusLostFunc lost, gpointer user_data);
/* Whether the instance was lost and has not answered since (an instance
 * not watched long enough to know is not). */
gboolean legba_janus_watch_is_lost (LegbaJanusWatch * watch, guint instance);
/* Stops watching: lost is never called again. */
void legba_janus_watch_free (LegbaJanusWatch * watch);

G_END_DECLS
