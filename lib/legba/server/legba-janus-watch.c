/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A Janus session per instance, kept alive (the Janus HTTP API: "create"
 * on the server's root, then "keepalive" on the session's path, answered
 * "ack"): one request per instance and interval, in flight at most one at
 * a time. A session lost is made again at the next interval, so an
 * instance that comes back is watched again.
 */
#include <legba/server/legba-janus-watch.h>
#include <legba/server/legba-janus-api.h>

typedef struct
{
  LegbaJanusWatch *watch;
  guint index;
  gint64 session_id;            /* 0: none yet, or lost */
  gboolean busy;                /* a request in flight */
  gboolean lost;                /* lost, and no session made since */
} Instance;

struct _LegbaJanusWatch
{
  SoupSession *session;
  GMainContext *context;
  char **urls;
  char *api_secret;
  Instance *instances;
  guint n_instances;
  GSource *tick;
  LegbaJanusLostFunc lost;
  gpointer user_data;
  /* Shared with the requests in flight */
  GCancellable *alive;
};

typedef struct
{
  GCancellable *alive;
  Instance *instance;
  gboolean keepalive;
} Probe;

static void
probe_free (Probe * probe)
{
  g_object_unref (probe->alive);
  g_free (probe);
}

static void
probe_answered (JsonObject * answer, const GError * error, gpointer user_data)
{
  Probe *probe = user_data;
  Instance *instance = probe->instance;
  g_autofree char *why = NULL;
  JsonObject *data;
  gint64 id = 0;
  gboolean again;

  if (g_cancellable_is_cancelled (probe->alive)) {
    probe_free (probe);
    return;
  }
  instance->busy = FALSE;
  if (answer != NULL && !probe->keepalive) {
    data = json_object_has_member (answer, "data") &&
        JSON_NODE_HOLDS_OBJECT (json_object_get_member (answer, "data")) ?
        json_object_get_object_member (answer, "data") : NULL;
    id = data ? json_object_get_int_member_with_default (data, "id", 0) : 0;
  }
  if (!probe->keepalive && id > 0) {
    instance->session_id = id;
    instance->lost = FALSE;
    probe_free (probe);
    return;
  }
  if (probe->keepalive && answer != NULL) {
    probe_free (probe);
    return;
  }
  /* A session that failed to be made again counts too once the instance
   * was lost: a room placed there meanwhile (the instance back for a
   * moment) is then lost with it. */
  if (!probe->keepalive && !instance->lost) {
    probe_free (probe);
    return;
  }
  why = error == NULL ? g_strdup ("not an answer of Janus") :
      probe->keepalive && error->code != LEGBA_JANUS_ERROR_UNREACHABLE &&
      error->code != LEGBA_JANUS_ERROR_INVALID ?
      g_strdup_printf ("%s: it no longer knows the session", error->message) :
      g_strdup (error->message);
  probe_free (probe);
  again = instance->lost;
  instance->session_id = 0;
  /* before the callback, which may place rooms elsewhere */
  instance->lost = TRUE;
  instance->watch->lost (instance->index, again, why,
      instance->watch->user_data);
}

/* Janus's HTTP API: "create" on the server's root, then "keepalive" on
 * the session's path */
static void
probe_send (LegbaJanusWatch * watch, Instance * instance)
{
  Probe *probe = g_new0 (Probe, 1);

  probe->alive = g_object_ref (watch->alive);
  probe->instance = instance;
  probe->keepalive = instance->session_id != 0;
  instance->busy = TRUE;
  legba_janus_core_request (watch->session, watch->context,
      watch->urls[instance->index], watch->api_secret,
      probe->keepalive ? "keepalive" : "create", instance->session_id,
      probe_answered, probe);
}

static gboolean
watch_tick (gpointer user_data)
{
  LegbaJanusWatch *watch = user_data;

  for (guint i = 0; i < watch->n_instances; i++)
    if (!watch->instances[i].busy)
      probe_send (watch, &watch->instances[i]);
  return G_SOURCE_CONTINUE;
}

LegbaJanusWatch *
legba_janus_watch_new (SoupSession * session, GMainContext * context,
    const char *const *urls, const char *api_secret, guint interval_ms,
    LegbaJanusLostFunc lost, gpointer user_data)
{
  LegbaJanusWatch *watch;

  g_return_val_if_fail (SOUP_IS_SESSION (session), NULL);
  g_return_val_if_fail (urls != NULL && lost != NULL, NULL);

  watch = g_new0 (LegbaJanusWatch, 1);
  watch->session = g_object_ref (session);
  watch->context = context ? g_main_context_ref (context) :
      g_main_context_ref_thread_default ();
  watch->urls = g_strdupv ((char **) urls);
  watch->api_secret = api_secret && *api_secret ? g_strdup (api_secret) : NULL;
  watch->n_instances = g_strv_length (watch->urls);
  watch->instances = g_new0 (Instance, watch->n_instances);
  for (guint i = 0; i < watch->n_instances; i++) {
    watch->instances[i].watch = watch;
    watch->instances[i].index = i;
  }
  watch->lost = lost;
  watch->user_data = user_data;
  watch->alive = g_cancellable_new ();
  watch_tick (watch);
  watch->tick = g_timeout_source_new (interval_ms);
  g_source_set_callback (watch->tick, watch_tick, watch, NULL);
  g_source_attach (watch->tick, watch->context);
  return watch;
}

void
legba_janus_watch_free (LegbaJanusWatch * watch)
{
  if (watch == NULL)
    return;
  g_cancellable_cancel (watch->alive);
  g_object_unref (watch->alive);
  g_source_destroy (watch->tick);
  g_source_unref (watch->tick);
  g_object_unref (watch->session);
  g_main_context_unref (watch->context);
  g_strfreev (watch->urls);
  g_free (watch->api_secret);
  g_free (watch->instances);
  g_free (watch);
}

gboolean
legba_janus_watch_is_lost (LegbaJanusWatch * watch, guint instance)
{
  g_return_val_if_fail (instance < watch->n_instances, FALSE);

  return watch->instances[instance].lost;
}
