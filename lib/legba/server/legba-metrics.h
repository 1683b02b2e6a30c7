/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The counters of legba-server's transport, and /metrics in the Prometheus
 * text exposition format (version 0.0.4) over them and the hub's own.
 */
#pragma once

#include <legba/server/legba-hub.h>

G_BEGIN_DECLS

typedef struct _LegbaMetrics LegbaMetrics;

/* Values the transport measures at the time of a scrape. */
typedef struct
{
  guint sockets;                /* WebSocket sockets open, closing included */
  guint64 queued_bytes;         /* bytes waiting in libsoup, all sockets */
  guint64 written_bytes;        /* bytes written to sockets, ever */
  guint pending_connections;    /* accepted, not yet WebSockets nor done */
} LegbaMetricsGauges;

/* What the listeners did with connections (docs/server.md, "Limits and
 * abuse"). */
typedef enum
{
  LEGBA_ACCEPT_REFUSED_DESCRIPTORS,   /* at the descriptor limit */
  LEGBA_ACCEPT_REFUSED_PER_ADDRESS,   /* max-pending-per-address */
  LEGBA_ACCEPT_PAUSED_PENDING,        /* at max-pending-connections */
  LEGBA_ACCEPT_PAUSED_ERROR,          /* accept() failed, no way to refuse */
  LEGBA_ACCEPT_HANDSHAKE_TIMEOUT,     /* shut down at handshake-timeout */
  LEGBA_ACCEPT_N_EVENTS
} LegbaAcceptEvent;

LegbaMetrics *legba_metrics_new (void);
void legba_metrics_free (LegbaMetrics * metrics);

/* The route label of a request path: the path with its variable parts
 * replaced (/apps/:id/channels/:name), so the label set stays small
 * whatever clients send. */
const char *legba_metrics_route (const char *path);

void legba_metrics_count_http (LegbaMetrics * metrics, const char *route,
    guint status);

/* A close the transport decided on, by WebSocket close code (1009: a
 * message over max-frame-bytes). The hub counts its own codes. */
void legba_metrics_count_close (LegbaMetrics * metrics, guint16 code);

/* A socket torn down because its queue went over max-queued-bytes. */
void legba_metrics_count_queue_overflow (LegbaMetrics * metrics);

/* A connection refused, accepting paused, a handshake timed out. */
void legba_metrics_count_accept (LegbaMetrics * metrics,
    LegbaAcceptEvent event);

/* A WebSocket handshake refused for its Origin. */
void legba_metrics_count_origin_refused (LegbaMetrics * metrics);

/* A socket closed for sending control frames over
 * control-frames-per-second. */
void legba_metrics_count_control_flood (LegbaMetrics * metrics);

/* A socket closed for a compressed message that inflated over
 * max-frame-bytes. */
void legba_metrics_count_inflate_limit (LegbaMetrics * metrics);

char *legba_metrics_render (LegbaMetrics * metrics, LegbaHub * hub,
    const LegbaMetricsGauges * gauges);

G_END_DECLS
