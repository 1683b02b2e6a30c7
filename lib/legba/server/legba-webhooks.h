/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaWebhooks: Pusher's webhooks (docs/server.md, "Webhooks"). What the
 * hub's observer reports goes, as Pusher's events, to each webhook URL of
 * the app that wants it: batched over a short window into one signed POST
 * {"time_ms", "events"}, retried with exponential backoff, queued within a
 * bound per URL, with what cannot be delivered counted and logged.
 *
 * Threads: a LegbaWebhooks runs on the GMainContext given to
 * legba_webhooks_new(), the hub's; call it from that context's thread only.
 * Each URL has a SoupSession of its own, so that a receiver that hangs
 * holds up nothing but its own queue.
 */
#pragma once

#include <legba/server/legba-hub.h>

G_BEGIN_DECLS

typedef struct _LegbaWebhooks LegbaWebhooks;

/* The events a webhook may ask for (Pusher's names). */
typedef enum
{
  LEGBA_WEBHOOK_CHANNEL_OCCUPIED = 1 << 0,
  LEGBA_WEBHOOK_CHANNEL_VACATED = 1 << 1,
  LEGBA_WEBHOOK_MEMBER_ADDED = 1 << 2,
  LEGBA_WEBHOOK_MEMBER_REMOVED = 1 << 3,
  LEGBA_WEBHOOK_CLIENT_EVENT = 1 << 4,
  LEGBA_WEBHOOK_CACHE_MISS = 1 << 5,
  LEGBA_WEBHOOK_SUBSCRIPTION_COUNT = 1 << 6,
} LegbaWebhookEvents;

/* The defaults, stated in docs/server.md. */
#define LEGBA_WEBHOOK_DEFAULT_BATCH_MS 200
#define LEGBA_WEBHOOK_DEFAULT_DELAY_MS 3000
#define LEGBA_WEBHOOK_DEFAULT_TIMEOUT_S 10
#define LEGBA_WEBHOOK_DEFAULT_MAX_QUEUED 10000
#define LEGBA_WEBHOOK_DEFAULT_BACKOFF_MS 1000
#define LEGBA_WEBHOOK_DEFAULT_RETRY_S 300
/* Events in one request at most. */
#define LEGBA_WEBHOOK_MAX_BATCH 100
/* The longest wait between two attempts. */
#define LEGBA_WEBHOOK_MAX_BACKOFF_MS 60000

typedef struct
{
  guint batch_ms;               /* window gathered into one request */
  guint delay_ms;               /* member_removed, channel_vacated held */
  guint timeout_s;              /* one request, connecting included */
  guint max_queued;             /* events waiting per URL */
  guint backoff_ms;             /* first wait after a failure */
  guint retry_s;                /* a batch is given up after this */
} LegbaWebhookSettings;

void legba_webhook_settings_init_defaults (LegbaWebhookSettings * settings);

/* "URL EVENT[,EVENT...]": an http:// or https:// URL with a host, then
 * Pusher event names (channel_occupied, channel_vacated, member_added,
 * member_removed, client_event, cache_miss, subscription_count) separated
 * by commas or spaces. FALSE otherwise, with an error
 * (LEGBA_SERVER_ERROR_CONFIG) that says what is wrong. */
gboolean legba_webhook_spec_parse (const char *spec, char **url,
    LegbaWebhookEvents * events, GError ** error);

/* The wait before attempt number `attempt` (1: the first retry):
 * backoff_ms doubling each time, at most LEGBA_WEBHOOK_MAX_BACKOFF_MS. */
guint legba_webhook_backoff_ms (guint backoff_ms, guint attempt);

/* Pusher's body: {"time_ms":time_ms,"events":[e1,e2,...]}, each event a
 * JSON object's text. */
char *legba_webhook_body_new (gint64 time_ms, const char *const *events,
    guint n_events);

/* Observes the hub (legba_hub_set_observer()) and sends on context. */
LegbaWebhooks *legba_webhooks_new (LegbaHub * hub, GMainContext * context,
    const LegbaWebhookSettings * settings);

/* Adds a webhook to the app app_id (which the hub must know) from a spec
 * as legba_webhook_spec_parse() reads it. */
gboolean legba_webhooks_add (LegbaWebhooks * webhooks, const char *app_id,
    const char *spec, GError ** error);

/* With several instances, only one sends the events of the cluster
 * (channels and members): is_sender says whether this one does. NULL:
 * always. */
void legba_webhooks_set_sender (LegbaWebhooks * webhooks,
    gboolean (*is_sender) (gpointer user_data), gpointer user_data);

/* Appends the webhooks' part of /metrics (Prometheus text format). */
void legba_webhooks_render_metrics (LegbaWebhooks * webhooks, GString * out);

/* Detaches from the hub and drops what is queued, logging how much. */
void legba_webhooks_free (LegbaWebhooks * webhooks);

G_END_DECLS
