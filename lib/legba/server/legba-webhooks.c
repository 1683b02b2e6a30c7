/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Pusher's webhooks (docs/server.md, "Webhooks"): the hub's observer turns
 * what happens into Pusher's events, held (member_removed,
 * channel_vacated) or queued per webhook URL, and each URL's queue is sent
 * in batches through a SoupSession of its own.
 */
#define LEGBA_SERVER_INTERNALS
#include <legba/server/legba-webhooks.h>
#include <legba/server/legba-server-private.h>
#include <legba/common/legba-auth.h>
#include <legba/common/legba-json.h>

#include <libsoup/soup.h>
#include <string.h>

static const struct
{
  const char *name;
  LegbaWebhookEvents event;
} event_names[] = {
  {"channel_occupied", LEGBA_WEBHOOK_CHANNEL_OCCUPIED},
  {"channel_vacated", LEGBA_WEBHOOK_CHANNEL_VACATED},
  {"member_added", LEGBA_WEBHOOK_MEMBER_ADDED},
  {"member_removed", LEGBA_WEBHOOK_MEMBER_REMOVED},
  {"client_event", LEGBA_WEBHOOK_CLIENT_EVENT},
  {"cache_miss", LEGBA_WEBHOOK_CACHE_MISS},
  {"subscription_count", LEGBA_WEBHOOK_SUBSCRIPTION_COUNT},
};

typedef enum
{
  RESULT_OK,
  RESULT_STATUS,                /* answered, but not 2xx nor 3xx */
  RESULT_REDIRECT,              /* 3xx: not followed */
  RESULT_TIMEOUT,
  RESULT_NETWORK,               /* no answer, or not HTTP */
  N_RESULTS
} Result;

static const char *const result_names[N_RESULTS] = {
  "ok", "status", "redirect", "timeout", "network"
};

typedef enum
{
  DROP_QUEUE_FULL,
  DROP_EXPIRED,                 /* retried for retry_s in vain */
  DROP_SHUTDOWN,
  N_DROPS
} Drop;

static const char *const drop_names[N_DROPS] = {
  "queue-full", "expired", "shutdown"
};

typedef struct _App App;

/* One webhook URL of an app, with its queue. */
typedef struct
{
  App *app;
  guint index;                  /* in app->targets, for metrics */
  GUri *uri;
  char *url_log;                /* scheme, host, port and path: no secrets */
  LegbaWebhookEvents events;
  SoupSession *session;
  GCancellable *cancellable;
  GQueue queue;                 /* char *: events' JSON, oldest first */
  GSource *timer;               /* batch window or backoff */
  /* The batch being delivered, NULL when none */
  GBytes *body;
  guint n_batch;
  gint64 batch_since;           /* monotonic, first attempt */
  guint attempt;
  gboolean in_flight;
  SoupMessage *msg;
  guint64 dropping;             /* dropped since the queue was last full */
  guint64 sent;                 /* events delivered */
  guint64 requests[N_RESULTS];
  guint64 dropped[N_DROPS];
} Target;

/* A member_removed or channel_vacated held for delay_ms. */
typedef struct
{
  App *app;
  char *key;
  LegbaWebhookEvents event;
  char *json;
  GSource *timer;
} Held;

struct _App
{
  LegbaWebhooks *webhooks;
  LegbaHubApp *hub_app;
  char *id;
  char *key;
  char *secret;
  GPtrArray *targets;           /* Target * */
  LegbaWebhookEvents wanted;    /* all targets' together */
  GHashTable *held;             /* key -> Held * */
};

struct _LegbaWebhooks
{
  LegbaHub *hub;
  GMainContext *context;
  LegbaWebhookSettings settings;
  GHashTable *apps;             /* LegbaHubApp * -> App * */
  GPtrArray *app_order;         /* App *, as added, for metrics */
    gboolean (*is_sender) (gpointer);
  gpointer sender_data;
};

static void target_send (Target * t);

void
legba_webhook_settings_init_defaults (LegbaWebhookSettings * settings)
{
  settings->batch_ms = LEGBA_WEBHOOK_DEFAULT_BATCH_MS;
  settings->delay_ms = LEGBA_WEBHOOK_DEFAULT_DELAY_MS;
  settings->timeout_s = LEGBA_WEBHOOK_DEFAULT_TIMEOUT_S;
  settings->max_queued = LEGBA_WEBHOOK_DEFAULT_MAX_QUEUED;
  settings->backoff_ms = LEGBA_WEBHOOK_DEFAULT_BACKOFF_MS;
  settings->retry_s = LEGBA_WEBHOOK_DEFAULT_RETRY_S;
}

/* ---- Without I/O: specs, backoff, bodies ---- */

static gboolean
spec_fail (GError ** error, const char *spec, const char *what)
{
  g_set_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG,
      "webhook '%s': %s", spec, what);
  return FALSE;
}

gboolean
legba_webhook_spec_parse (const char *spec, char **url,
    LegbaWebhookEvents * events, GError ** error)
{
  g_auto (GStrv) words = NULL;
  g_autoptr (GUri) uri = NULL;
  g_autoptr (GError) uri_error = NULL;
  LegbaWebhookEvents mask = 0;
  const char *scheme;
  guint i, n = 0;

  g_return_val_if_fail (spec != NULL, FALSE);

  words = g_strsplit_set (spec, " \t,", -1);
  for (i = 0; words[i] != NULL; i++)
    if (*words[i] != '\0')
      words[n++] = words[i];
    else
      g_free (words[i]);
  words[n] = NULL;
  if (n == 0)
    return spec_fail (error, spec, "empty (expected URL EVENT,...)");
  uri = g_uri_parse (words[0], G_URI_FLAGS_NONE, &uri_error);
  if (uri == NULL)
    return spec_fail (error, spec, uri_error->message);
  scheme = g_uri_get_scheme (uri);
  if (g_ascii_strcasecmp (scheme, "http") != 0 &&
      g_ascii_strcasecmp (scheme, "https") != 0)
    return spec_fail (error, spec, "the URL is not http:// or https://");
  if (g_uri_get_host (uri) == NULL || *g_uri_get_host (uri) == '\0')
    return spec_fail (error, spec, "the URL has no host");
  if (n == 1)
    return spec_fail (error, spec, "no event given after the URL "
        "(channel_occupied, channel_vacated, member_added, member_removed, "
        "client_event, cache_miss, subscription_count)");
  for (i = 1; i < n; i++) {
    guint j;

    for (j = 0; j < G_N_ELEMENTS (event_names); j++)
      if (g_str_equal (words[i], event_names[j].name))
        break;
    if (j == G_N_ELEMENTS (event_names)) {
      g_autofree char *what = g_strdup_printf ("unknown event '%s'",
          words[i]);

      return spec_fail (error, spec, what);
    }
    mask |= event_names[j].event;
  }
  if (url != NULL)
    *url = g_strdup (words[0]);
  if (events != NULL)
    *events = mask;
  return TRUE;
}

guint
legba_webhook_backoff_ms (guint backoff_ms, guint attempt)
{
  guint64 wait = MAX (backoff_ms, 1);

  while (attempt-- > 1 && wait < LEGBA_WEBHOOK_MAX_BACKOFF_MS)
    wait *= 2;
  return (guint) MIN (wait, LEGBA_WEBHOOK_MAX_BACKOFF_MS);
}

char *
legba_webhook_body_new (gint64 time_ms, const char *const *events,
    guint n_events)
{
  GString *body = g_string_new (NULL);

  g_string_append_printf (body, "{\"time_ms\":%" G_GINT64_FORMAT
      ",\"events\":[", time_ms);
  for (guint i = 0; i < n_events; i++) {
    if (i > 0)
      g_string_append_c (body, ',');
    g_string_append (body, events[i]);
  }
  g_string_append (body, "]}");
  return g_string_free (body, FALSE);
}

/* ---- Queues and delivery ---- */

static void
target_log (Target * t, GLogLevelFlags level, const char *event,
    const char *key, const char *value)
{
  legba_server_log (level, event, "APP", t->app->id, "URL", t->url_log,
      key, value, NULL);
}

static void
target_clear_timer (Target * t)
{
  if (t->timer != NULL) {
    g_source_destroy (t->timer);
    g_clear_pointer (&t->timer, g_source_unref);
  }
}

static gboolean
on_target_timer (gpointer user_data)
{
  Target *t = user_data;

  g_clear_pointer (&t->timer, g_source_unref);
  target_send (t);
  return G_SOURCE_REMOVE;
}

static void
target_schedule (Target * t, guint ms)
{
  target_clear_timer (t);
  t->timer = g_timeout_source_new (ms);
  g_source_set_callback (t->timer, on_target_timer, t, NULL);
  g_source_attach (t->timer, t->app->webhooks->context);
}

/* Once a batch is done with: the next one, after the window unless a
 * full batch is already waiting. */
static void
target_next (Target * t)
{
  g_clear_pointer (&t->body, g_bytes_unref);
  t->n_batch = 0;
  t->attempt = 0;
  if (t->queue.length > 0)
    target_schedule (t, t->queue.length >= LEGBA_WEBHOOK_MAX_BATCH ? 0 :
        t->app->webhooks->settings.batch_ms);
}

static void
target_drop (Target * t, Drop why, guint64 n)
{
  t->dropped[why] += n;
  if (why == DROP_QUEUE_FULL && t->dropping++ > 0)
    return;
  {
    g_autofree char *count = g_strdup_printf ("%" G_GUINT64_FORMAT, n);

    target_log (t, G_LOG_LEVEL_WARNING, why == DROP_QUEUE_FULL ?
        "webhook-queue-full" : "webhook-dropped", "EVENTS", count);
  }
}

static void
target_enqueue (Target * t, const char *json)
{
  if (t->queue.length >= t->app->webhooks->settings.max_queued) {
    target_drop (t, DROP_QUEUE_FULL, 1);
    return;
  }
  if (t->dropping > 0) {
    g_autofree char *count = g_strdup_printf ("%" G_GUINT64_FORMAT,
        t->dropping);

    target_log (t, G_LOG_LEVEL_MESSAGE, "webhook-queue-recovered",
        "DROPPED", count);
    t->dropping = 0;
  }
  g_queue_push_tail (&t->queue, g_strdup (json));
  if (t->body == NULL && t->timer == NULL)
    target_schedule (t, t->queue.length >= LEGBA_WEBHOOK_MAX_BATCH ? 0 :
        t->app->webhooks->settings.batch_ms);
}

static Result
classify (SoupMessage * msg, GError * error)
{
  guint status;

  if (error != NULL)
    return g_error_matches (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT) ?
        RESULT_TIMEOUT : RESULT_NETWORK;
  status = soup_message_get_status (msg);
  if (SOUP_STATUS_IS_SUCCESSFUL (status))
    return RESULT_OK;
  if (SOUP_STATUS_IS_REDIRECTION (status))
    return RESULT_REDIRECT;
  return RESULT_STATUS;
}

static void
target_failed (Target * t, const char *why)
{
  LegbaWebhookSettings *s = &t->app->webhooks->settings;
  gint64 age_ms = (g_get_monotonic_time () - t->batch_since) / 1000;
  guint wait;

  t->attempt++;
  wait = legba_webhook_backoff_ms (s->backoff_ms, t->attempt);
  target_log (t, G_LOG_LEVEL_MESSAGE, "webhook-failed", "WHY", why);
  if (age_ms + wait > (gint64) s->retry_s * 1000) {
    target_drop (t, DROP_EXPIRED, t->n_batch);
    target_next (t);
    return;
  }
  target_schedule (t, wait);
}

static void
on_sent (GObject * source, GAsyncResult * res, gpointer user_data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) answer = NULL;
  g_autofree char *why = NULL;
  Target *t;
  Result result;

  answer = soup_session_send_and_read_finish (SOUP_SESSION (source), res,
      &error);
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;                     /* the target is gone */
  t = user_data;
  t->in_flight = FALSE;
  result = classify (t->msg, error);
  t->requests[result]++;
  if (result == RESULT_OK) {
    t->sent += t->n_batch;
    g_clear_object (&t->msg);
    target_next (t);
    return;
  }
  why = error ? g_strdup (error->message) :
      g_strdup_printf ("HTTP %u", soup_message_get_status (t->msg));
  g_clear_object (&t->msg);
  target_failed (t, why);
}

static void
target_take_batch (Target * t)
{
  g_autoptr (GPtrArray) events = g_ptr_array_new_with_free_func (g_free);
  char *body;

  while (events->len < LEGBA_WEBHOOK_MAX_BATCH && t->queue.length > 0)
    g_ptr_array_add (events, g_queue_pop_head (&t->queue));
  body = legba_webhook_body_new (g_get_real_time () / 1000,
      (const char *const *) events->pdata, events->len);
  t->body = g_bytes_new_take (body, strlen (body));
  t->n_batch = events->len;
  t->batch_since = g_get_monotonic_time ();
  t->attempt = 0;
}

static void
target_send (Target * t)
{
  SoupMessageHeaders *headers;
  g_autofree char *signature = NULL;
  gsize len;
  const char *body, *key, *secret;

  if (t->in_flight)
    return;
  if (t->body == NULL) {
    if (t->queue.length == 0)
      return;
    target_take_batch (t);
  }
  body = g_bytes_get_data (t->body, &len);
  /* the app's key and secret as they are now (a reload may give it a new
   * secret); those it had when removed otherwise */
  key = legba_hub_app_get_key (t->app->hub_app);
  secret = legba_hub_app_get_secret (t->app->hub_app);
  if (key == NULL || secret == NULL) {
    key = t->app->key;
    secret = t->app->secret;
  }
  signature = legba_auth_hmac_hex (secret, body, len);
  t->msg = soup_message_new_from_uri (SOUP_METHOD_POST, t->uri);
  soup_message_add_flags (t->msg, SOUP_MESSAGE_NO_REDIRECT);
  headers = soup_message_get_request_headers (t->msg);
  soup_message_headers_replace (headers, "X-Pusher-Key", key);
  soup_message_headers_replace (headers, "X-Pusher-Signature", signature);
  soup_message_set_request_body_from_bytes (t->msg, "application/json",
      t->body);
  t->in_flight = TRUE;
  g_main_context_push_thread_default (t->app->webhooks->context);
  soup_session_send_and_read_async (t->session, t->msg, G_PRIORITY_DEFAULT,
      t->cancellable, on_sent, t);
  g_main_context_pop_thread_default (t->app->webhooks->context);
}

static Target *
target_new (App * app, GUri * uri, LegbaWebhookEvents events)
{
  Target *t = g_new0 (Target, 1);
  LegbaWebhooks *wh = app->webhooks;

  t->app = app;
  t->index = app->targets->len;
  t->uri = g_uri_ref (uri);
  t->url_log = g_uri_join (G_URI_FLAGS_NONE, g_uri_get_scheme (uri), NULL,
      g_uri_get_host (uri), g_uri_get_port (uri), g_uri_get_path (uri),
      NULL, NULL);
  t->events = events;
  t->cancellable = g_cancellable_new ();
  g_queue_init (&t->queue);
  /* Its own session, created on the hub's context: a hanging receiver
   * takes no connection another URL needs. */
  g_main_context_push_thread_default (wh->context);
  t->session = soup_session_new_with_options ("timeout", wh->settings.timeout_s,
      "idle-timeout", 60, "max-conns-per-host", 2, "user-agent",
      "legba-server", NULL);
  g_main_context_pop_thread_default (wh->context);
  return t;
}

static void
target_free (Target * t)
{
  if (t->queue.length > 0 || t->n_batch > 0) {
    t->dropped[DROP_SHUTDOWN] += t->queue.length + t->n_batch;
    {
      g_autofree char *count = g_strdup_printf ("%u",
          t->queue.length + t->n_batch);

      target_log (t, G_LOG_LEVEL_MESSAGE, "webhook-dropped", "EVENTS", count);
    }
  }
  g_cancellable_cancel (t->cancellable);
  target_clear_timer (t);
  g_queue_clear_full (&t->queue, g_free);
  g_clear_pointer (&t->body, g_bytes_unref);
  g_clear_object (&t->msg);
  g_main_context_push_thread_default (t->app->webhooks->context);
  soup_session_abort (t->session);
  g_main_context_pop_thread_default (t->app->webhooks->context);
  g_object_unref (t->session);
  g_object_unref (t->cancellable);
  g_uri_unref (t->uri);
  g_free (t->url_log);
  g_free (t);
}

/* ---- Events ---- */

static gboolean
is_sender (LegbaWebhooks * wh)
{
  return wh->is_sender == NULL || wh->is_sender (wh->sender_data);
}

/* Queues json to every webhook of app that wants event. */
static void
app_emit (App * app, LegbaWebhookEvents event, const char *json)
{
  for (guint i = 0; i < app->targets->len; i++) {
    Target *t = app->targets->pdata[i];

    if (t->events & event)
      target_enqueue (t, json);
  }
}

static void
held_free (Held * held)
{
  if (held->timer != NULL) {
    g_source_destroy (held->timer);
    g_source_unref (held->timer);
  }
  g_free (held->key);
  g_free (held->json);
  g_free (held);
}

static gboolean
on_held_timer (gpointer user_data)
{
  Held *held = user_data;
  App *app = held->app;

  g_clear_pointer (&held->timer, g_source_unref);
  if (is_sender (app->webhooks))
    app_emit (app, held->event, held->json);
  g_hash_table_remove (app->held, held->key);
  return G_SOURCE_REMOVE;
}

/* Pusher: a member who leaves and comes back within the delay (a page
 * reload) is neither removed nor added again, nor is a channel vacated
 * and occupied again. */
static void
app_hold (App * app, const char *key, LegbaWebhookEvents event, char *json)
{
  Held *held = g_new0 (Held, 1);

  held->app = app;
  held->key = g_strdup (key);
  held->event = event;
  held->json = json;
  held->timer = g_timeout_source_new (app->webhooks->settings.delay_ms);
  g_source_set_callback (held->timer, on_held_timer, held, NULL);
  g_source_attach (held->timer, app->webhooks->context);
  g_hash_table_replace (app->held, held->key, held);
}

static App *
app_lookup (LegbaWebhooks * wh, LegbaHubApp * hub_app, LegbaWebhookEvents ev)
{
  App *app = g_hash_table_lookup (wh->apps, hub_app);

  return app != NULL && (app->wanted & ev) ? app : NULL;
}

static char *
event_new (const char *name, const char *channel, const char *user_id)
{
  GString *json = g_string_new ("{\"name\":");

  legba_json_append_string (json, name);
  g_string_append (json, ",\"channel\":");
  legba_json_append_string (json, channel);
  if (user_id != NULL) {
    g_string_append (json, ",\"user_id\":");
    legba_json_append_string (json, user_id);
  }
  g_string_append_c (json, '}');
  return g_string_free (json, FALSE);
}

/* Something held for the same key comes back: neither is sent. Otherwise
 * the arrival goes out, or the departure is held. */
static void
app_transition (App * app, const char *key, gboolean arrival,
    LegbaWebhookEvents event, char *json)
{
  if (arrival && g_hash_table_remove (app->held, key)) {
    g_free (json);
    return;
  }
  if (!arrival && app->webhooks->settings.delay_ms > 0) {
    app_hold (app, key, event, json);
    return;
  }
  if (is_sender (app->webhooks))
    app_emit (app, event, json);
  g_free (json);
}

static void
on_channel (LegbaHubApp * hub_app, const char *channel, gboolean occupied,
    gpointer user_data)
{
  LegbaWebhookEvents ev = occupied ? LEGBA_WEBHOOK_CHANNEL_OCCUPIED :
      LEGBA_WEBHOOK_CHANNEL_VACATED;
  App *app = app_lookup (user_data, hub_app, LEGBA_WEBHOOK_CHANNEL_OCCUPIED |
      LEGBA_WEBHOOK_CHANNEL_VACATED);
  g_autofree char *key = NULL;

  if (app == NULL)
    return;
  key = g_strconcat ("c\x1f", channel, NULL);
  app_transition (app, key, occupied, ev, event_new (occupied ?
          "channel_occupied" : "channel_vacated", channel, NULL));
}

static void
on_member (LegbaHubApp * hub_app, const char *channel, const char *user_id,
    gboolean added, gpointer user_data)
{
  LegbaWebhookEvents ev = added ? LEGBA_WEBHOOK_MEMBER_ADDED :
      LEGBA_WEBHOOK_MEMBER_REMOVED;
  App *app = app_lookup (user_data, hub_app, LEGBA_WEBHOOK_MEMBER_ADDED |
      LEGBA_WEBHOOK_MEMBER_REMOVED);
  g_autofree char *key = NULL;

  if (app == NULL)
    return;
  key = g_strconcat ("m\x1f", channel, "\x1f", user_id, NULL);
  app_transition (app, key, added, ev, event_new (added ? "member_added" :
          "member_removed", channel, user_id));
}

/* Pusher: client_event {channel, event, data (a string), socket_id,
 * user_id on presence channels}. Only the instance the client is on sends
 * it. */
static void
on_client_event (LegbaHubApp * hub_app, const char *channel,
    const char *event, const char *data, const char *socket_id,
    const char *user_id, gpointer user_data)
{
  App *app = app_lookup (user_data, hub_app, LEGBA_WEBHOOK_CLIENT_EVENT);
  g_autoptr (GString) json = NULL;

  if (app == NULL)
    return;
  json = g_string_new ("{\"name\":\"client_event\",\"channel\":");
  legba_json_append_string (json, channel);
  g_string_append (json, ",\"event\":");
  legba_json_append_string (json, event);
  if (data != NULL) {
    g_string_append (json, ",\"data\":");
    /* The data as the client sent it: a JSON string stays one, anything
     * else becomes the string of its JSON text. */
    if (data[0] == '"')
      g_string_append (json, data);
    else
      legba_json_append_string (json, data);
  }
  g_string_append (json, ",\"socket_id\":");
  legba_json_append_string (json, socket_id);
  if (user_id != NULL) {
    g_string_append (json, ",\"user_id\":");
    legba_json_append_string (json, user_id);
  }
  g_string_append_c (json, '}');
  app_emit (app, LEGBA_WEBHOOK_CLIENT_EVENT, json->str);
}

/* Pusher: cache_miss {channel}, when a subscriber of a cache channel finds
 * nothing cached. Only the instance the subscriber is on sends it. */
static void
on_cache_miss (LegbaHubApp * hub_app, const char *channel, gpointer user_data)
{
  App *app = app_lookup (user_data, hub_app, LEGBA_WEBHOOK_CACHE_MISS);
  g_autofree char *json = NULL;

  if (app == NULL)
    return;
  json = event_new ("cache_miss", channel, NULL);
  app_emit (app, LEGBA_WEBHOOK_CACHE_MISS, json);
}

/* Pusher: subscription_count {channel, subscription_count}, for an app
 * that counts subscriptions, when the count of a channel changed: as
 * often as its subscribers are told (once a second at most, with the
 * count of that moment), the cluster's count, sent by one instance. */
static void
on_subscription_count (LegbaHubApp * hub_app, const char *channel,
    guint count, gpointer user_data)
{
  App *app = app_lookup (user_data, hub_app,
      LEGBA_WEBHOOK_SUBSCRIPTION_COUNT);
  g_autoptr (GString) json = NULL;

  if (app == NULL || !is_sender (app->webhooks))
    return;
  json = g_string_new ("{\"name\":\"subscription_count\",\"channel\":");
  legba_json_append_string (json, channel);
  g_string_append_printf (json, ",\"subscription_count\":%u}", count);
  app_emit (app, LEGBA_WEBHOOK_SUBSCRIPTION_COUNT, json->str);
}

static const LegbaHubObserver observer = {
  on_channel, on_member, on_client_event, on_cache_miss,
  on_subscription_count
};

/* ---- The whole ---- */

static void
app_free (App * app)
{
  g_hash_table_unref (app->held);
  g_ptr_array_unref (app->targets);
  g_free (app->id);
  g_free (app->key);
  g_free (app->secret);
  g_free (app);
}

LegbaWebhooks *
legba_webhooks_new (LegbaHub * hub, GMainContext * context,
    const LegbaWebhookSettings * settings)
{
  LegbaWebhooks *wh = g_new0 (LegbaWebhooks, 1);

  g_return_val_if_fail (hub != NULL, NULL);

  wh->hub = hub;
  wh->context = context ? g_main_context_ref (context) :
      g_main_context_ref_thread_default ();
  if (settings != NULL)
    wh->settings = *settings;
  else
    legba_webhook_settings_init_defaults (&wh->settings);
  wh->apps = g_hash_table_new (NULL, NULL);
  wh->app_order = g_ptr_array_new_with_free_func ((GDestroyNotify) app_free);
  legba_hub_set_observer (hub, &observer, wh);
  return wh;
}

gboolean
legba_webhooks_add (LegbaWebhooks * wh, const char *app_id, const char *spec,
    GError ** error)
{
  g_autofree char *url = NULL;
  g_autoptr (GUri) uri = NULL;
  LegbaWebhookEvents events;
  LegbaHubApp *hub_app;
  App *app;

  g_return_val_if_fail (wh != NULL, FALSE);
  g_return_val_if_fail (app_id != NULL, FALSE);

  if (!legba_webhook_spec_parse (spec, &url, &events, error))
    return FALSE;
  hub_app = legba_hub_find_app_by_id (wh->hub, app_id);
  if (hub_app == NULL)
    return spec_fail (error, spec, "no such app");
  uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);

  app = g_hash_table_lookup (wh->apps, hub_app);
  if (app == NULL) {
    app = g_new0 (App, 1);
    app->webhooks = wh;
    app->hub_app = hub_app;
    app->id = g_strdup (app_id);
    app->key = g_strdup (legba_hub_app_get_key (hub_app));
    app->secret = g_strdup (legba_hub_app_get_secret (hub_app));
    app->targets = g_ptr_array_new_with_free_func ((GDestroyNotify)
        target_free);
    app->held = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
        (GDestroyNotify) held_free);
    g_hash_table_insert (wh->apps, hub_app, app);
    g_ptr_array_add (wh->app_order, app);
  }
  g_ptr_array_add (app->targets, target_new (app, uri, events));
  app->wanted |= events;
  return TRUE;
}

void
legba_webhooks_set_sender (LegbaWebhooks * wh,
    gboolean (*is_sender_func) (gpointer), gpointer user_data)
{
  g_return_if_fail (wh != NULL);

  wh->is_sender = is_sender_func;
  wh->sender_data = is_sender_func ? user_data : NULL;
}

static void
render_family (LegbaWebhooks * wh, GString * out, const char *name,
    const char *type, const char *help, const char *label,
    const char *const *values, guint n_values, gsize offset)
{
  g_string_append_printf (out, "# HELP %s %s\n# TYPE %s %s\n", name, help,
      name, type);
  for (guint a = 0; a < wh->app_order->len; a++) {
    App *app = wh->app_order->pdata[a];
    g_autofree char *id = g_strescape (app->id, NULL);

    for (guint i = 0; i < app->targets->len; i++) {
      Target *t = app->targets->pdata[i];
      const guint64 *counts = (const guint64 *) ((const char *) t + offset);

      if (values == NULL) {
        g_string_append_printf (out, "%s{app=\"%s\",webhook=\"%u\"} %"
            G_GUINT64_FORMAT "\n", name, id, t->index, counts[0]);
        continue;
      }
      for (guint v = 0; v < n_values; v++)
        g_string_append_printf (out, "%s{app=\"%s\",webhook=\"%u\",%s=\"%s\"} %"
            G_GUINT64_FORMAT "\n", name, id, t->index, label, values[v],
            counts[v]);
    }
  }
}

void
legba_webhooks_render_metrics (LegbaWebhooks * wh, GString * out)
{
  g_return_if_fail (wh != NULL);

  render_family (wh, out, "legba_webhook_events_sent_total", "counter",
      "Webhook events delivered (a 2xx answer), per app and webhook "
      "(its index in the app's configuration).", NULL, NULL, 0,
      G_STRUCT_OFFSET (Target, sent));
  render_family (wh, out, "legba_webhook_requests_total", "counter",
      "Webhook requests by result: ok (2xx), status (other), redirect "
      "(3xx, not followed), timeout, network (no HTTP answer).", "result",
      result_names, N_RESULTS, G_STRUCT_OFFSET (Target, requests));
  render_family (wh, out, "legba_webhook_events_dropped_total", "counter",
      "Webhook events given up: queue-full (over max-queued), expired "
      "(retried in vain for retry seconds), shutdown.", "reason", drop_names,
      N_DROPS, G_STRUCT_OFFSET (Target, dropped));
  g_string_append (out, "# HELP legba_webhook_queued_events Webhook events "
      "waiting to be sent.\n# TYPE legba_webhook_queued_events gauge\n");
  for (guint a = 0; a < wh->app_order->len; a++) {
    App *app = wh->app_order->pdata[a];
    g_autofree char *id = g_strescape (app->id, NULL);

    for (guint i = 0; i < app->targets->len; i++) {
      Target *t = app->targets->pdata[i];

      g_string_append_printf (out, "legba_webhook_queued_events{app=\"%s\","
          "webhook=\"%u\"} %u\n", id, t->index, t->queue.length + t->n_batch);
    }
  }
}

void
legba_webhooks_free (LegbaWebhooks * wh)
{
  if (wh == NULL)
    return;
  legba_hub_set_observer (wh->hub, NULL, NULL);
  g_hash_table_unref (wh->apps);
  g_ptr_array_unref (wh->app_order);
  g_main_context_unref (wh->context);
  g_free (wh);
}
