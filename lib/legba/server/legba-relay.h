/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaRelay: several legba-server instances behind the same rooms,
 * through one Redis (docs/scale-out.md).
 *
 * Every event an instance's hub delivers (client events, HTTP API events,
 * server-to-user events) is appended to one Redis stream with its origin
 * (instance id, run, sequence number); every instance reads the stream
 * from its own last-read id and delivers what others appended, so each
 * subscriber gets each event once, in the order its publisher sent it.
 * Presence and subscription counts are shared the same way, each instance
 * also keeping its own part in a Redis hash (a snapshot for the others)
 * and a heartbeat key whose expiry tells the others it died.
 *
 * Threads: a LegbaRelay runs on the GMainContext given to
 * legba_relay_new(), the hub's; call it from that context's thread only.
 */
#pragma once

#include <legba/server/legba-hub.h>
#include <legba/server/legba-redis-glib.h>

G_BEGIN_DECLS

typedef struct _LegbaRelay LegbaRelay;

/* The defaults, stated in docs/scale-out.md. */
#define LEGBA_RELAY_DEFAULT_PREFIX "legba:"
#define LEGBA_RELAY_DEFAULT_RETENTION 10000
#define LEGBA_RELAY_MIN_RETENTION 100
#define LEGBA_RELAY_DEFAULT_INSTANCE_TTL 10
#define LEGBA_RELAY_MIN_INSTANCE_TTL 2

typedef struct
{
  LegbaRedisAddress address;
  const char *instance_id;      /* unique in the cluster */
  const char *prefix;           /* of every Redis key */
  guint retention;              /* stream entries kept (XADD MAXLEN ~) */
  guint instance_ttl;           /* seconds: a silent instance is gone */
} LegbaRelayConfig;

/* Instance ids: 1 to 64 of A-Z a-z 0-9 . _ - : */
gboolean legba_relay_instance_id_is_valid (const char *id);
/* A default instance id: host name and process id. */
char *legba_relay_default_instance_id (void);

/* Installs itself as the hub's cluster callbacks; does not connect yet. */
LegbaRelay *legba_relay_new (LegbaHub * hub, GMainContext * context,
    const LegbaRelayConfig * config);

/* Connects, and keeps reconnecting with backoff while Redis is away. */
void legba_relay_start (LegbaRelay * relay);

/* Tells the others this instance is leaving (they drop its members at
 * once) and stops relaying; for a shutdown. */
void legba_relay_leave (LegbaRelay * relay);

/* Writes what is still buffered for Redis (at most timeout_ms), then
 * disconnects and detaches from the hub. */
void legba_relay_free (LegbaRelay * relay);

const char *legba_relay_get_instance_id (LegbaRelay * relay);
gboolean legba_relay_is_up (LegbaRelay * relay);

/* Whether this instance sends the cluster's webhooks for channels and
 * members: the one with the smallest instance id among those alive, as
 * this one knows them (TRUE while Redis is away), but not for what another
 * instance's snapshot shows as it is applied. */
gboolean legba_relay_is_webhook_sender (LegbaRelay * relay);

/* Appends the relay's part of /metrics (Prometheus text format). */
void legba_relay_render_metrics (LegbaRelay * relay, GString * out);

G_END_DECLS
