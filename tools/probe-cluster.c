/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * `legba-probe relay` and `legba-probe presence`: checks of several
 * server instances that share their rooms (docs/scale-out.md), one line
 * per check, exit status 1 when any fails.
 *
 *   relay     an HTTP API publish on any instance reaches the subscribers
 *             of every instance once, in order; client events too.
 *   presence  members joining and leaving through different instances:
 *             subscription_succeeded, member_added and member_removed
 *             once per user of the cluster, and the HTTP API of every
 *             instance listing the same users.
 *
 * "Not delivered" is checked after a marker: an event the same instance
 * sends afterwards, which a subscriber receives after anything sent
 * before it (an instance's events reach the others in the order it sent
 * them).
 */
#include "probe.h"

#include <legba/common/legba-auth.h>

#include <libsoup/soup.h>
#include <string.h>

#define NS_PER_S G_GINT64_CONSTANT (1000000000)
#define NS_PER_MS 1e6
#define POLL_US 20000

typedef struct
{
  guint run;
  guint failed;
  gboolean to_stderr;           /* --json: the lines go to stderr */
} Checks;

typedef struct
{
  ProbeCommon common;
  char *urls_arg;
  char **urls;                  /* ws://HOST:PORT, one per instance */
  char **api_urls;
  guint n;
  gint64 deadline;
  guint32 tag;
  SoupSession *http;
  Checks checks;
} Cluster;

static gboolean
check (Checks * checks, gboolean ok, GError * error, const char *format, ...)
G_GNUC_PRINTF (4, 5);

     static gboolean
         check (Checks * checks, gboolean ok, GError * error,
    const char *format, ...)
{
  g_autofree char *what = NULL;
  va_list args;

  va_start (args, format);
  what = g_strdup_vprintf (format, args);
  va_end (args);
  checks->run++;
  if (!ok)
    checks->failed++;
  (checks->to_stderr ? g_printerr : g_print) ("%s %u - %s%s%s\n",
      ok ? "ok" : "not ok", checks->run, what, error && !ok ? ": " : "",
      error && !ok ? error->message : "");
  return ok;
}

/* ---- Options ---- */

/* ws://H:P -> http://H:P, wss -> https */
static char *
api_url_of (const char *url)
{
  g_autoptr (GUri) uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);
  const char *scheme;

  if (uri == NULL || g_uri_get_host (uri) == NULL)
    return NULL;
  scheme = g_uri_get_scheme (uri);
  if (g_ascii_strcasecmp (scheme, "wss") == 0)
    scheme = "https";
  else if (g_ascii_strcasecmp (scheme, "ws") == 0)
    scheme = "http";
  else
    return NULL;
  return g_uri_join (G_URI_FLAGS_NONE, scheme, NULL, g_uri_get_host (uri),
      g_uri_get_port (uri), "", NULL, NULL);
}

static void
cluster_clear (Cluster * cl)
{
  probe_common_clear (&cl->common);
  g_free (cl->urls_arg);
  g_strfreev (cl->urls);
  g_strfreev (cl->api_urls);
  g_clear_object (&cl->http);
}

/* Returns 0 when the options are good, else the exit status. */
static int
cluster_parse (Cluster * cl, const char *command, const char *summary,
    GOptionEntry * extra, int argc, char **argv)
{
  GOptionEntry urls[] = {
    {"urls", 0, 0, G_OPTION_ARG_STRING, &cl->urls_arg,
          "WebSocket base URLs of the instances, comma-separated (two or more)",
        "ws://HOST:PORT,..."},
    {NULL}
  };
  g_autofree GOptionEntry *all = NULL;
  guint n_extra = 0;

  while (extra[n_extra].long_name != NULL)
    n_extra++;
  all = g_new0 (GOptionEntry, n_extra + 2);
  all[0] = urls[0];
  memcpy (all + 1, extra, n_extra * sizeof (GOptionEntry));
  if (!probe_parse_options (command, summary, all,
          probe_common_entries (&cl->common), &argc, &argv)
      || !probe_common_validate (&cl->common, FALSE))
    return 2;
  if (cl->urls_arg == NULL) {
    g_printerr ("legba-probe %s: --urls is required\n", command);
    return 2;
  }
  cl->urls = g_strsplit (cl->urls_arg, ",", -1);
  cl->n = g_strv_length (cl->urls);
  cl->api_urls = g_new0 (char *, cl->n + 1);
  for (guint i = 0; i < cl->n; i++) {
    g_strstrip (cl->urls[i]);
    cl->api_urls[i] = api_url_of (cl->urls[i]);
    if (cl->api_urls[i] == NULL) {
      g_printerr ("legba-probe %s: '%s' is not a ws:// or wss:// URL\n",
          command, cl->urls[i]);
      return 2;
    }
  }
  if (cl->n < 2) {
    g_printerr ("legba-probe %s: --urls needs two instances or more\n",
        command);
    return 2;
  }
  cl->deadline = probe_now_ns () + cl->common.timeout_s * NS_PER_S;
  cl->tag = g_random_int ();
  cl->http = soup_session_new_with_options ("timeout", cl->common.timeout_s,
      NULL);
  cl->checks.to_stderr = cl->common.json;
  return 0;
}

static int
cluster_finish (Cluster * cl, const char *command, gboolean complete,
    GString * json)
{
  Checks *c = &cl->checks;

  (c->to_stderr ? g_printerr : g_print) ("# %u of %u checks passed%s\n",
      c->run - c->failed, c->run, complete ? "" : " (stopped early)");
  if (json != NULL)
    g_print ("{\"command\":\"%s\",\"instances\":%u,\"checks\":%u,"
        "\"failed\":%u,\"complete\":%s%s}\n", command, cl->n, c->run,
        c->failed, complete ? "true" : "false", json->str);
  if (c->failed > 0 || !complete) {
    g_printerr ("legba-probe %s: %u check(s) failed\n", command, c->failed);
    return 1;
  }
  return 0;
}

/* ---- HTTP API queries, signed ---- */

/* GET API_URL/apps/ID/PATH with info (may be NULL); the JSON object. */
static JsonObject *
api_get (Cluster * cl, guint instance, const char *path, const char *info,
    GError ** error)
{
  g_autoptr (GHashTable) params = g_hash_table_new (g_str_hash, g_str_equal);
  g_autofree char *full = g_strdup_printf ("/apps/%s/%s", cl->common.app_id,
      path);
  g_autofree char *timestamp = g_strdup_printf ("%" G_GINT64_FORMAT,
      g_get_real_time () / G_USEC_PER_SEC);
  g_autofree char *to_sign = NULL;
  g_autofree char *signature = NULL;
  g_autofree char *url = NULL;
  g_autoptr (SoupMessage) msg = NULL;
  g_autoptr (GBytes) body = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonNode *root;

  g_hash_table_insert (params, (char *) "auth_key", cl->common.app_key);
  g_hash_table_insert (params, (char *) "auth_timestamp", timestamp);
  g_hash_table_insert (params, (char *) "auth_version", (char *) "1.0");
  if (info != NULL)
    g_hash_table_insert (params, (char *) "info", (char *) info);
  to_sign = legba_auth_http_string_to_sign ("GET", full, params);
  signature = legba_auth_hmac_hex (cl->common.app_secret, to_sign, -1);
  url = g_strdup_printf ("%s%s?auth_key=%s&auth_timestamp=%s&auth_version=1.0"
      "%s%s&auth_signature=%s", cl->api_urls[instance], full,
      cl->common.app_key, timestamp, info ? "&info=" : "", info ? info : "",
      signature);
  msg = soup_message_new ("GET", url);
  if (msg == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
        "bad URL %s", url);
    return NULL;
  }
  body = soup_session_send_and_read (cl->http, msg, NULL, error);
  if (body == NULL)
    return NULL;
  if (soup_message_get_status (msg) != SOUP_STATUS_OK) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "GET %s: HTTP %u",
        full, soup_message_get_status (msg));
    return NULL;
  }
  if (!json_parser_load_from_data (parser, g_bytes_get_data (body, NULL),
          g_bytes_get_size (body), error))
    return NULL;
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
        "GET %s: not a JSON object", full);
    return NULL;
  }
  return json_object_ref (json_node_get_object (root));
}

/* For g_ptr_array_sort: a and b point to strings. */
static gint
compare_strings (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* The sorted user ids GET .../channels/NAME/users lists, comma-joined. */
static char *
api_users (Cluster * cl, guint instance, const char *channel, GError ** error)
{
  g_autofree char *path = g_strdup_printf ("channels/%s/users", channel);
  g_autoptr (JsonObject) object = api_get (cl, instance, path, NULL, error);
  g_autoptr (GPtrArray) ids = g_ptr_array_new ();
  JsonArray *users;

  if (object == NULL)
    return NULL;
  users = probe_json_array_member (object, "users");
  for (guint i = 0; users && i < json_array_get_length (users); i++) {
    JsonNode *node = json_array_get_element (users, i);

    if (JSON_NODE_HOLDS_OBJECT (node))
      g_ptr_array_add (ids, (gpointer)
          json_object_get_string_member_with_default (json_node_get_object
              (node), "id", ""));
  }
  g_ptr_array_sort (ids, compare_strings);
  g_ptr_array_add (ids, NULL);
  return g_strjoinv (",", (char **) ids->pdata);
}

static char *
sorted_join (const char *const *ids)
{
  g_autoptr (GPtrArray) sorted = g_ptr_array_new ();

  for (guint i = 0; ids[i] != NULL; i++)
    g_ptr_array_add (sorted, (gpointer) ids[i]);
  g_ptr_array_sort (sorted, compare_strings);
  g_ptr_array_add (sorted, NULL);
  return g_strjoinv (",", (char **) sorted->pdata);
}

/* Polls the instance's users until they are exactly `ids`; FALSE (and
 * error) at the deadline. Presence reaches the other instances through
 * Redis, so their answers may lag by a moment. */
static gboolean
api_wait_users (Cluster * cl, guint instance, const char *channel,
    const char *const *ids, gint64 deadline, GError ** error)
{
  g_autofree char *want = sorted_join (ids);
  g_autofree char *got = NULL;

  while (TRUE) {
    g_autoptr (GError) local_error = NULL;

    g_free (got);
    got = api_users (cl, instance, channel, &local_error);
    if (got == NULL) {
      g_propagate_error (error, g_steal_pointer (&local_error));
      return FALSE;
    }
    if (g_str_equal (got, want))
      return TRUE;
    if (probe_now_ns () >= deadline)
      break;
    g_usleep (POLL_US);
  }
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
      "instance %u lists [%s], expected [%s]", instance, got, want);
  return FALSE;
}

/* Polls GET .../channels/NAME?info=user_count,subscription_count until
 * both are as expected. */
static gboolean
api_wait_counts (Cluster * cl, guint instance, const char *channel,
    gint64 users, gint64 subscriptions, gint64 deadline, GError ** error)
{
  g_autofree char *path = g_strdup_printf ("channels/%s", channel);
  gint64 got_users = -1, got_subs = -1;

  while (TRUE) {
    g_autoptr (JsonObject) object = api_get (cl, instance, path,
        "user_count,subscription_count", error);

    if (object == NULL)
      return FALSE;
    got_users = json_object_get_int_member_with_default (object,
        "user_count", -1);
    got_subs = json_object_get_int_member_with_default (object,
        "subscription_count", -1);
    if (got_users == users && got_subs == subscriptions)
      return TRUE;
    if (probe_now_ns () >= deadline)
      break;
    g_usleep (POLL_US);
  }
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT, "instance %u: "
      "user_count %" G_GINT64_FORMAT " subscription_count %" G_GINT64_FORMAT
      ", expected %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT, instance,
      got_users, got_subs, users, subscriptions);
  return FALSE;
}

/* ---- Sockets ---- */

static gint64
data_int (ProbeMessage * message, const char *member)
{
  if (message == NULL || message->data == NULL
      || !JSON_NODE_HOLDS_OBJECT (message->data))
    return -1;
  return json_object_get_int_member_with_default (json_node_get_object
      (message->data), member, -1);
}

static void
sockets_free (GPtrArray * sockets, gint64 deadline)
{
  for (guint i = 0; i < sockets->len; i++) {
    probe_socket_close (sockets->pdata[i], deadline);
    probe_socket_free (sockets->pdata[i]);
  }
  g_ptr_array_unref (sockets);
}

/* Takes every queued message of this event (after a drain). */
static guint
take_all (ProbeSocket * socket, const char *event, const char *channel)
{
  ProbeMessage *message;
  guint n = 0;

  probe_socket_drain (socket);
  while ((message = probe_socket_take (socket, event, channel)) != NULL) {
    probe_message_free (message);
    n++;
  }
  return n;
}

/* ---- relay ---- */

/* Every socket gets instance i's `count` events, in order. */
static gboolean
relay_receive_all (Cluster * cl, GPtrArray * sockets, const char *channel,
    guint from, guint count, GArray * latencies, GError ** error)
{
  for (guint j = 0; j < sockets->len; j++) {
    for (guint k = 0; k < count; k++) {
      g_autoptr (ProbeMessage) message = probe_socket_wait (sockets->pdata[j],
          "probe-relay", channel, cl->deadline, error);
      double ms;

      if (message == NULL) {
        g_prefix_error (error, "instance %u, event %u of %u: ", j, k, count);
        return FALSE;
      }
      if (data_int (message, "from") != from || data_int (message, "n") != k) {
        g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
            "instance %u got event %" G_GINT64_FORMAT " of instance %"
            G_GINT64_FORMAT " where event %u of instance %u was due", j,
            data_int (message, "n"), data_int (message, "from"), k, from);
        return FALSE;
      }
      ms = (message->received_ns - data_int (message, "t")) / NS_PER_MS;
      if (j != from)
        g_array_append_val (latencies, ms);
    }
  }
  return TRUE;
}

static gboolean
relay_publish (Cluster * cl, GPtrArray * sockets, const char *channel,
    guint count, GArray * latencies)
{
  gboolean all = TRUE;

  for (guint i = 0; i < cl->n; i++) {
    g_autoptr (ProbeApi) api = probe_api_new (cl->api_urls[i],
        cl->common.app_id, cl->common.app_key, cl->common.app_secret,
        cl->common.timeout_s);
    g_autoptr (GError) error = NULL;
    gboolean ok = TRUE;

    for (guint k = 0; ok && k < count; k++) {
      g_autofree char *data = g_strdup_printf ("{\"from\":%u,\"n\":%u,\"t\":%"
          G_GINT64_FORMAT "}", i, k, probe_now_ns ());

      ok = probe_api_trigger (api, channel, "probe-relay", data, &error);
    }
    ok = ok && relay_receive_all (cl, sockets, channel, i, count, latencies,
        &error);
    all &= check (&cl->checks, ok, error, "%u events published through the "
        "HTTP API of instance %u reach the subscribers of every instance in "
        "order", count, i);
  }
  return all;
}

/* A marker from each instance, then nothing else may be queued. */
static void
relay_no_duplicates (Cluster * cl, GPtrArray * sockets, const char *channel)
{
  g_autoptr (GError) error = NULL;
  guint extra = 0;
  gboolean ok = TRUE;

  for (guint i = 0; ok && i < cl->n; i++) {
    g_autoptr (ProbeApi) api = probe_api_new (cl->api_urls[i],
        cl->common.app_id, cl->common.app_key, cl->common.app_secret,
        cl->common.timeout_s);

    ok = probe_api_trigger (api, channel, "probe-relay-marker", "{}", &error);
  }
  for (guint j = 0; ok && j < sockets->len; j++) {
    for (guint i = 0; ok && i < cl->n; i++) {
      g_autoptr (ProbeMessage) marker = probe_socket_wait (sockets->pdata[j],
          "probe-relay-marker", channel, cl->deadline, &error);

      ok = marker != NULL;
    }
    extra += take_all (sockets->pdata[j], "probe-relay", channel);
  }
  if (ok && extra > 0)
    g_set_error (&error, G_IO_ERROR, G_IO_ERROR_FAILED,
        "%u event(s) delivered twice", extra);
  check (&cl->checks, ok && extra == 0, error,
      "no event delivered twice (checked after a marker from every instance)");
}

static void
relay_client_events (Cluster * cl, GPtrArray * sockets, const char *channel)
{
  for (guint i = 0; i < cl->n; i++) {
    g_autoptr (JsonNode) data = json_from_string ("{\"from\":0}", NULL);
    g_autoptr (GError) error = NULL;
    gboolean ok = TRUE;

    json_object_set_int_member (json_node_get_object (data), "from", i);
    probe_socket_send (sockets->pdata[i], "client-probe-relay", channel, data);
    for (guint j = 0; ok && j < sockets->len; j++) {
      g_autoptr (ProbeMessage) message = NULL;

      if (j == i)
        continue;
      message = probe_socket_wait (sockets->pdata[j], "client-probe-relay",
          channel, cl->deadline, &error);
      ok = message != NULL && data_int (message, "from") == i;
      if (message != NULL && !ok)
        g_set_error (&error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
            "instance %u got another client event", j);
    }
    if (ok && take_all (sockets->pdata[i], "client-probe-relay", channel)) {
      ok = FALSE;
      g_set_error (&error, G_IO_ERROR, G_IO_ERROR_FAILED, "echoed to sender");
    }
    check (&cl->checks, ok, error, "a client event sent on instance %u "
        "reaches the other instances, not its sender", i);
  }
}

/* One socket per instance on a public and a private channel. */
static GPtrArray *
relay_connect (Cluster * cl, const char *public, const char *private)
{
  GPtrArray *sockets = g_ptr_array_new ();

  for (guint i = 0; i < cl->n; i++) {
    g_autoptr (GError) error = NULL;
    g_autoptr (ProbeMessage) a = NULL;
    g_autoptr (ProbeMessage) b = NULL;
    ProbeSocket *socket = probe_socket_connect (cl->urls[i],
        cl->common.app_key, cl->deadline, &error);

    if (socket != NULL) {
      g_ptr_array_add (sockets, socket);
      a = probe_socket_subscribe (socket, public, NULL, NULL, NULL,
          cl->deadline, &error);
      if (a != NULL)
        b = probe_socket_subscribe (socket, private, cl->common.app_key,
            cl->common.app_secret, NULL, cl->deadline, &error);
    }
    if (!check (&cl->checks, b != NULL, error, "instance %u (%s): connected "
            "and subscribed to a public and a private channel", i,
            cl->urls[i])) {
      sockets_free (sockets, cl->deadline);
      return NULL;
    }
  }
  return sockets;
}

int
probe_command_relay (int argc, char **argv)
{
  Cluster cl = { {0} };
  int events = 3;
  GOptionEntry entries[] = {
    {"events", 'n', 0, G_OPTION_ARG_INT, &events,
        "Events published through each instance (default 3)", "N"},
    {NULL}
  };
  g_autofree char *public = NULL;
  g_autofree char *private = NULL;
  g_autoptr (GArray) latencies = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr (GString) json = NULL;
  GPtrArray *sockets;
  ProbeStats stats;
  int status;

  status = cluster_parse (&cl, "relay", "Checks that server instances "
      "sharing rooms through Redis relay to each other: events published "
      "through the HTTP API of each instance reach a subscriber on every "
      "instance once and in order, and client events reach the other "
      "instances. One line per check.", entries, argc, argv);
  if (status == 0 && (events <= 0 || events > 1000)) {
    g_printerr ("legba-probe relay: --events is 1 to 1000\n");
    status = 2;
  }
  if (status != 0) {
    cluster_clear (&cl);
    return status;
  }
  public = g_strdup_printf ("probe-relay-%08x", cl.tag);
  private = g_strdup_printf ("private-probe-relay-%08x", cl.tag);

  sockets = relay_connect (&cl, public, private);
  if (sockets == NULL) {
    status = cluster_finish (&cl, "relay", FALSE, NULL);
    cluster_clear (&cl);
    return status;
  }
  relay_publish (&cl, sockets, public, events, latencies);
  relay_no_duplicates (&cl, sockets, public);
  relay_client_events (&cl, sockets, private);
  sockets_free (sockets, cl.deadline);

  probe_stats_compute ((double *) latencies->data, latencies->len, &stats);
  (cl.checks.to_stderr ? g_printerr : g_print) ("# publish-to-receipt on "
      "other instances: n=%" G_GSIZE_FORMAT "  p50 %.3f ms  p95 %.3f ms  "
      "max %.3f ms\n", stats.n, stats.p50, stats.p95, stats.max);
  if (cl.common.json) {
    json = g_string_new (",\"cross_instance_ms\":");
    probe_stats_to_json (&stats, json);
  }
  status = cluster_finish (&cl, "relay", TRUE, json);
  cluster_clear (&cl);
  return status;
}

/* ---- presence ---- */

typedef struct
{
  Cluster *cl;
  char *channel;
  GPtrArray *watchers;          /* ProbeSocket, one per instance */
  GPtrArray *ids;               /* their user ids, then NULL */
} Presence;

static char *
member_data (const char *user_id)
{
  return g_strdup_printf ("{\"user_id\":\"%s\",\"user_info\":{\"probe\":"
      "\"cluster\"}}", user_id);
}

static ProbeSocket *
presence_join (Presence * p, guint instance, const char *user_id,
    ProbeMessage ** succeeded, GError ** error)
{
  g_autofree char *data = member_data (user_id);
  ProbeSocket *socket = probe_socket_connect (p->cl->urls[instance],
      p->cl->common.app_key, p->cl->deadline, error);
  ProbeMessage *message;

  if (socket == NULL)
    return NULL;
  message = probe_socket_subscribe (socket, p->channel, p->cl->common.app_key,
      p->cl->common.app_secret, data, p->cl->deadline, error);
  if (message == NULL) {
    probe_socket_free (socket);
    return NULL;
  }
  if (succeeded != NULL)
    *succeeded = message;
  else
    probe_message_free (message);
  return socket;
}

/* Every watcher but `except` (-1: none) gets member_added or
 * member_removed for user_id. */
static gboolean
presence_expect (Presence * p, const char *event, const char *user_id,
    gint except, GError ** error)
{
  for (guint j = 0; j < p->watchers->len; j++) {
    g_autoptr (ProbeMessage) message = NULL;

    if ((gint) j == except)
      continue;
    message = probe_socket_wait (p->watchers->pdata[j], event, p->channel,
        p->cl->deadline, error);
    if (message == NULL) {
      g_prefix_error (error, "watcher on instance %u: ", j);
      return FALSE;
    }
    if (g_strcmp0 (probe_message_data_string (message, "user_id"),
            user_id) != 0) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
          "watcher on instance %u: %s for %s where %s was due", j, event,
          probe_message_data_string (message, "user_id"), user_id);
      return FALSE;
    }
  }
  return TRUE;
}

/* subscription_succeeded lists exactly the watchers so far. */
static gboolean
presence_lists (ProbeMessage * succeeded, GPtrArray * ids, guint n,
    GError ** error)
{
  JsonObject *data = succeeded->data && JSON_NODE_HOLDS_OBJECT
      (succeeded->data) ? json_node_get_object (succeeded->data) : NULL;
  JsonObject *presence = data ? probe_json_object_member (data,
      "presence") : NULL;
  JsonObject *hash = presence ? probe_json_object_member (presence,
      "hash") : NULL;

  if (hash == NULL || json_object_get_int_member_with_default (presence,
          "count", -1) != n || json_object_get_size (hash) != n) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
        "presence block does not count %u members", n);
    return FALSE;
  }
  for (guint i = 0; i < n; i++) {
    if (!json_object_has_member (hash, ids->pdata[i])) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
          "%s is not listed", (char *) ids->pdata[i]);
      return FALSE;
    }
  }
  return TRUE;
}

/* One watcher per instance, each joining once the instance lists the
 * earlier ones: its subscription_succeeded must list them all. */
static gboolean
presence_watchers (Presence * p)
{
  Cluster *cl = p->cl;

  for (guint i = 0; i < cl->n; i++) {
    g_autoptr (GError) error = NULL;
    g_autoptr (ProbeMessage) succeeded = NULL;
    char *id = g_strdup_printf ("watch-%u-%08x", i, cl->tag);
    ProbeSocket *socket;
    gboolean ok;

    ok = i == 0 || api_wait_users (cl, i, p->channel,
        (const char *const *) p->ids->pdata, cl->deadline, &error);
    g_ptr_array_insert (p->ids, p->ids->len - 1, id);
    socket = ok ? presence_join (p, i, id, &succeeded, &error) : NULL;
    if (socket != NULL)
      g_ptr_array_add (p->watchers, socket);
    ok = socket != NULL && presence_lists (succeeded, p->ids, i + 1, &error)
        && presence_expect (p, "pusher_internal:member_added", id, i, &error);
    if (!check (&cl->checks, ok, error, "a member joining through instance "
            "%u lists the members of the other instances and is added on "
            "every instance", i))
      return FALSE;
  }
  return TRUE;
}

/* A watcher-visible marker: a user joining through `instance`; events
 * sent before it through that instance have then arrived. */
static ProbeSocket *
presence_marker (Presence * p, guint instance, const char *name,
    GError ** error)
{
  g_autofree char *id = g_strdup_printf ("%s-%08x", name, p->cl->tag);
  ProbeSocket *socket = presence_join (p, instance, id, NULL, error);

  if (socket != NULL &&
      !presence_expect (p, "pusher_internal:member_added", id, -1, error))
    g_clear_pointer (&socket, probe_socket_free);
  return socket;
}

static guint
presence_take_all (Presence * p, const char *event)
{
  guint n = 0;

  for (guint j = 0; j < p->watchers->len; j++)
    n += take_all (p->watchers->pdata[j], event, p->channel);
  return n;
}

/* The same user through two instances: added once, removed once. */
static void
presence_two_connections (Presence * p)
{
  Cluster *cl = p->cl;
  g_autofree char *user = g_strdup_printf ("twice-%08x", cl->tag);
  g_autoptr (GError) error = NULL;
  ProbeSocket *first = NULL, *second = NULL, *mark0 = NULL, *mark1 = NULL;
  guint extra = 0;
  gboolean ok;

  first = presence_join (p, 0, user, NULL, &error);
  ok = first != NULL && presence_expect (p, "pusher_internal:member_added",
      user, -1, &error);
  check (&cl->checks, ok, error, "a user joining through instance 0 is "
      "added on every instance");
  if (!ok)
    goto out;

  second = presence_join (p, 1, user, NULL, &error);
  mark1 = second ? presence_marker (p, 1, "mark1", &error) : NULL;
  extra = mark1 ? presence_take_all (p, "pusher_internal:member_added") : 0;
  ok = mark1 != NULL && extra == 0;
  check (&cl->checks, ok, error, "the same user joining again through "
      "instance 1 is not added again (%u extra member_added)", extra);

  for (guint i = 0; ok && i < cl->n; i++) {
    ok = api_wait_counts (cl, i, p->channel, cl->n + 2, cl->n + 3,
        cl->deadline, &error);
    check (&cl->checks, ok, error, "HTTP API of instance %u: the user of "
        "two instances counts once in user_count; subscription_count "
        "counts every instance's sockets", i);
  }

  probe_socket_close (first, cl->deadline);
  g_clear_pointer (&first, probe_socket_free);
  mark0 = ok ? presence_marker (p, 0, "mark0", &error) : NULL;
  extra = mark0 ? presence_take_all (p, "pusher_internal:member_removed") : 0;
  ok = mark0 != NULL && extra == 0;
  check (&cl->checks, ok, error, "the user leaving instance 0 but still on "
      "instance 1 is not removed (%u member_removed)", extra);

  probe_socket_close (second, cl->deadline);
  g_clear_pointer (&second, probe_socket_free);
  ok = ok && presence_expect (p, "pusher_internal:member_removed", user, -1,
      &error);
  check (&cl->checks, ok, error, "the user leaving its last instance is "
      "removed on every instance");
out:
  g_clear_pointer (&first, probe_socket_free);
  g_clear_pointer (&second, probe_socket_free);
  g_clear_pointer (&mark0, probe_socket_free);
  g_clear_pointer (&mark1, probe_socket_free);
}

int
probe_command_presence (int argc, char **argv)
{
  Cluster cl = { {0} };
  GOptionEntry entries[] = { {NULL} };
  Presence p = { &cl };
  g_autoptr (GString) json = NULL;
  gboolean complete = FALSE;
  int status;

  status = cluster_parse (&cl, "presence", "Checks that server instances "
      "sharing rooms through Redis share presence: members joining and "
      "leaving through different instances are listed, added and removed "
      "once per user on every instance, and the HTTP API of every instance "
      "lists the same users. Needs --urls with two instances or more. One "
      "line per check.", entries, argc, argv);
  if (status != 0) {
    cluster_clear (&cl);
    return status;
  }
  p.channel = g_strdup_printf ("presence-probe-cluster-%08x", cl.tag);
  p.watchers = g_ptr_array_new ();
  p.ids = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (p.ids, NULL);

  if (presence_watchers (&p)) {
    presence_two_connections (&p);
    complete = TRUE;
  }
  sockets_free (p.watchers, cl.deadline);
  g_ptr_array_unref (p.ids);
  g_free (p.channel);
  if (cl.common.json)
    json = g_string_new (NULL);
  status = cluster_finish (&cl, "presence", complete, json);
  cluster_clear (&cl);
  return status;
}
