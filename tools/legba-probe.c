/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-probe: checks, times and loads any Pusher protocol 7 server.
 *
 *   legba-probe probe --url ws://127.0.0.1:6001 --app-id ID --app-key K --app-secret S
 *   legba-probe rtt   --url ... --count 500 [--json]
 *   legba-probe flood --url ... --count 500 --flooders 1 [--json]
 *   legba-probe load  --targets 127.0.0.1:6001 --connections 10000 ... [--json]
 *
 * Every subcommand exits 0 on success and 1 on failure (2 on bad usage),
 * saying why on stderr, and gives up after --timeout seconds.
 */
#include "probe.h"

#include <stdlib.h>
#include <string.h>

#define NS_PER_S G_GINT64_CONSTANT (1000000000)
#define NS_PER_MS 1e6

/* ---- probe: one protocol round trip, one line per check ---- */

typedef struct
{
  guint run;
  guint failed;
} Checks;

static gboolean
check (Checks * checks, gboolean ok, const char *what, GError * error)
{
  checks->run++;
  if (ok) {
    g_print ("ok %u - %s\n", checks->run, what);
  } else {
    checks->failed++;
    g_print ("not ok %u - %s%s%s\n", checks->run, what,
        error ? ": " : "", error ? error->message : "");
  }
  return ok;
}

static gboolean
is_socket_id (const char *id)
{
  return id != NULL && g_regex_match_simple ("^[0-9]+\\.[0-9]+$", id, 0, 0);
}

/* The presence block of a subscription_succeeded: {ids, hash, count}. */
static gboolean
presence_lists (ProbeMessage * succeeded, guint count, const char *id_a,
    const char *id_b)
{
  JsonObject *data, *presence, *hash;
  JsonArray *ids;

  if (succeeded->data == NULL || !JSON_NODE_HOLDS_OBJECT (succeeded->data))
    return FALSE;
  data = json_node_get_object (succeeded->data);
  presence = probe_json_object_member (data, "presence");
  if (presence == NULL)
    return FALSE;
  ids = probe_json_array_member (presence, "ids");
  hash = probe_json_object_member (presence, "hash");
  if (ids == NULL || hash == NULL
      || json_object_get_int_member_with_default (presence, "count",
          0) != count || json_array_get_length (ids) != count)
    return FALSE;
  return json_object_has_member (hash, id_a) && (id_b == NULL
      || json_object_has_member (hash, id_b));
}

static JsonNode *
object_with_int (const char *member, gint64 value)
{
  JsonObject *object = json_object_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  json_object_set_int_member (object, member, value);
  json_node_take_object (node, object);
  return node;
}

static gint64
data_int (ProbeMessage * message, const char *member)
{
  if (message == NULL || message->data == NULL
      || !JSON_NODE_HOLDS_OBJECT (message->data))
    return -1;
  return json_object_get_int_member_with_default (json_node_get_object
      (message->data), member, -1);
}

typedef struct
{
  ProbeCommon *common;
  gint64 deadline;
  guint32 tag;                  /* keeps channel names apart between runs */
  ProbeSocket *a;
  ProbeSocket *b;
  char *public;
  char *private;
  char *presence;
} ProbeRun;

static void
probe_run_clear (ProbeRun * run)
{
  g_clear_pointer (&run->a, probe_socket_free);
  g_clear_pointer (&run->b, probe_socket_free);
  g_clear_pointer (&run->public, g_free);
  g_clear_pointer (&run->private, g_free);
  g_clear_pointer (&run->presence, g_free);
}

/* Connections and subscriptions; FALSE when later checks cannot run. */
static gboolean
probe_subscriptions (ProbeRun * run, Checks * checks)
{
  ProbeCommon *c = run->common;
  g_autoptr (GError) error = NULL;
  g_autoptr (ProbeMessage) message = NULL;
  g_autofree char *forged = g_strdup_printf ("private-probe-forged-%08x",
      run->tag);

  run->a = probe_socket_connect (c->url, c->app_key, run->deadline, &error);
  if (!check (checks, run->a != NULL, "connect: pusher:connection_established",
          error))
    return FALSE;
  check (checks, is_socket_id (probe_socket_get_id (run->a))
      && probe_socket_get_activity_timeout (run->a) > 0,
      "connect: socket_id is digits.digits, activity_timeout set", NULL);

  probe_socket_send (run->a, "pusher:ping", NULL, NULL);
  message = probe_socket_wait (run->a, "pusher:pong", NULL, run->deadline,
      &error);
  check (checks, message != NULL, "pusher:ping answered by pusher:pong", error);
  g_clear_pointer (&message, probe_message_free);
  g_clear_error (&error);

  message = probe_socket_subscribe (run->a, run->public, NULL, NULL, NULL,
      run->deadline, &error);
  check (checks, message != NULL, "subscribe: public channel", error);
  g_clear_pointer (&message, probe_message_free);
  g_clear_error (&error);

  message = probe_socket_subscribe (run->a, run->private, c->app_key,
      c->app_secret, NULL, run->deadline, &error);
  check (checks, message != NULL, "subscribe: private channel, signed", error);
  g_clear_pointer (&message, probe_message_free);
  g_clear_error (&error);

  message = probe_socket_subscribe (run->a, forged, c->app_key,
      "not-the-secret", NULL, run->deadline, &error);
  check (checks, message == NULL && g_error_matches (error, G_IO_ERROR,
          G_IO_ERROR_PERMISSION_DENIED),
      "subscribe: private channel with a forged signature is refused", NULL);
  g_clear_pointer (&message, probe_message_free);
  g_clear_error (&error);

  run->b = probe_socket_connect (c->url, c->app_key, run->deadline, &error);
  if (!check (checks, run->b != NULL, "connect: a second socket", error))
    return FALSE;
  message = probe_socket_subscribe (run->b, run->private, c->app_key,
      c->app_secret, NULL, run->deadline, &error);
  return check (checks, message != NULL,
      "subscribe: second socket on the private channel", error);
}

/* Client events on the private channel: relayed to B, never echoed to A.
 * B answers only after it got A's event, so an echo to A would have been
 * queued before the answer: no answer-then-echo race. */
static void
probe_client_events (ProbeRun * run, Checks * checks)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (ProbeMessage) at_b = NULL;
  g_autoptr (ProbeMessage) at_a = NULL;
  g_autoptr (ProbeMessage) echo = NULL;
  g_autoptr (JsonNode) data = object_with_int ("probe", run->tag);

  probe_socket_send (run->a, "client-probe", run->private, data);
  at_b = probe_socket_wait (run->b, "client-probe", run->private,
      run->deadline, &error);
  check (checks, at_b != NULL && data_int (at_b, "probe") == run->tag,
      "client event relayed to the other subscriber, data intact", error);
  g_clear_error (&error);

  probe_socket_send (run->b, "client-probe-reply", run->private, data);
  at_a = probe_socket_wait (run->a, "client-probe-reply", run->private,
      run->deadline, &error);
  echo = probe_socket_take (run->a, "client-probe", run->private);
  check (checks, at_a != NULL && echo == NULL,
      "client event not echoed to its sender", error);
}

static char *
member_data (const char *user_id, const char *name)
{
  return g_strdup_printf ("{\"user_id\":\"%s\",\"user_info\":{\"name\":"
      "\"%s\"}}", user_id, name);
}

static void
probe_presence (ProbeRun * run, Checks * checks)
{
  ProbeCommon *c = run->common;
  g_autoptr (GError) error = NULL;
  g_autoptr (ProbeMessage) message = NULL;
  g_autofree char *id_a = g_strdup_printf ("probe-a-%08x", run->tag);
  g_autofree char *id_b = g_strdup_printf ("probe-b-%08x", run->tag);
  g_autofree char *data_a = member_data (id_a, "Probe A");
  g_autofree char *data_b = member_data (id_b, "Probe B");
  g_autoptr (JsonNode) data = object_with_int ("probe", run->tag);

  message = probe_socket_subscribe (run->a, run->presence, c->app_key,
      c->app_secret, data_a, run->deadline, &error);
  check (checks, message != NULL && presence_lists (message, 1, id_a, NULL),
      "presence: subscribed alone, {ids, hash, count} lists itself", error);
  g_clear_pointer (&message, probe_message_free);
  g_clear_error (&error);

  message = probe_socket_subscribe (run->b, run->presence, c->app_key,
      c->app_secret, data_b, run->deadline, &error);
  check (checks, message != NULL && presence_lists (message, 2, id_a, id_b),
      "presence: second member sees both", error);
  g_clear_pointer (&message, probe_message_free);
  g_clear_error (&error);

  message = probe_socket_wait (run->a, "pusher_internal:member_added",
      run->presence, run->deadline, &error);
  check (checks, message != NULL
      && g_strcmp0 (probe_message_data_string (message, "user_id"), id_b) == 0,
      "presence: member_added with the newcomer's user_id", error);
  g_clear_pointer (&message, probe_message_free);
  g_clear_error (&error);

  probe_socket_send (run->b, "client-probe", run->presence, data);
  message = probe_socket_wait (run->a, "client-probe", run->presence,
      run->deadline, &error);
  check (checks, message != NULL && g_strcmp0 (message->user_id, id_b) == 0,
      "presence: client event relayed with the sender's user_id", error);
}

static void
probe_api_and_leave (ProbeRun * run, Checks * checks)
{
  ProbeCommon *c = run->common;
  g_autoptr (GError) error = NULL;
  g_autoptr (ProbeMessage) message = NULL;
  g_autoptr (ProbeApi) api = probe_api_new (c->api_url, c->app_id,
      c->app_key, c->app_secret, c->timeout_s);
  g_autofree char *data = g_strdup_printf ("{\"probe\":%u}", run->tag);
  g_autofree char *id_b = g_strdup_printf ("probe-b-%08x", run->tag);
  gboolean sent;

  sent = probe_api_trigger (api, run->public, "probe-api", data, &error);
  check (checks, sent, "HTTP API: signed POST /apps/ID/events accepted", error);
  g_clear_error (&error);
  if (sent) {
    message = probe_socket_wait (run->a, "probe-api", run->public,
        run->deadline, &error);
    check (checks, message != NULL && data_int (message, "probe") == run->tag,
        "HTTP API: event received by the subscriber", error);
    g_clear_pointer (&message, probe_message_free);
    g_clear_error (&error);
  }

  probe_socket_close (run->b, run->deadline);
  message = probe_socket_wait (run->a, "pusher_internal:member_removed",
      run->presence, run->deadline, &error);
  check (checks, message != NULL
      && g_strcmp0 (probe_message_data_string (message, "user_id"), id_b) == 0,
      "presence: member_removed when the member's socket closes", error);
}

static int
command_probe (int argc, char **argv)
{
  ProbeCommon common = { 0 };
  GOptionEntry entries[] = { {NULL} };
  ProbeRun run = { 0 };
  Checks checks = { 0 };
  gboolean ok;

  if (!probe_parse_options ("probe", "Checks a Pusher protocol 7 server: "
          "connection, ping, public/private/presence subscriptions, client "
          "events, presence members and the HTTP API. One line per check.",
          entries, probe_common_entries (&common), &argc, &argv)
      || !probe_common_validate (&common, TRUE)) {
    probe_common_clear (&common);
    return 2;
  }
  run.common = &common;
  run.deadline = probe_now_ns () + common.timeout_s * NS_PER_S;
  run.tag = g_random_int ();
  run.public = g_strdup_printf ("probe-public-%08x", run.tag);
  run.private = g_strdup_printf ("private-probe-%08x", run.tag);
  run.presence = g_strdup_printf ("presence-probe-%08x", run.tag);

  ok = probe_subscriptions (&run, &checks);
  if (ok) {
    probe_client_events (&run, &checks);
    probe_presence (&run, &checks);
    probe_api_and_leave (&run, &checks);
  }
  if (run.a != NULL)
    probe_socket_close (run.a, run.deadline);
  probe_run_clear (&run);
  probe_common_clear (&common);

  g_print ("# %u of %u checks passed%s\n", checks.run - checks.failed,
      checks.run, ok ? "" : " (stopped early)");
  if (checks.failed > 0 || !ok) {
    g_printerr ("legba-probe probe: %u check(s) failed\n", checks.failed);
    return 1;
  }
  return 0;
}

/* ---- rtt: sequential round trips ---- */

/* docs/room-protocol.md §4: at most `rate` client events in any 1.1 s window
 * per connection. Keeps the send times of the last `rate` events. */
typedef struct
{
  guint rate;
  gint64 *sent;
  guint next;
} Pacer;

static void
pacer_wait (Pacer * pacer, ProbeSocket * socket, gint64 deadline)
{
  gint64 free_at;

  if (pacer->rate == 0)
    return;
  free_at = pacer->sent[pacer->next] + 1100 * G_GINT64_CONSTANT (1000000);
  while (pacer->sent[pacer->next] != 0 && probe_now_ns () < free_at
      && probe_now_ns () < deadline) {
    g_usleep (1000);
    probe_socket_drain (socket);
  }
  pacer->sent[pacer->next] = probe_now_ns ();
  pacer->next = (pacer->next + 1) % pacer->rate;
}

static gboolean
rtt_ping (ProbeSocket * a, guint count, guint warmup, double *out,
    gint64 deadline, GError ** error)
{
  for (guint i = 0; i < count + warmup; i++) {
    g_autoptr (ProbeMessage) pong = NULL;
    gint64 start = probe_now_ns ();

    probe_socket_send (a, "pusher:ping", NULL, NULL);
    pong = probe_socket_wait (a, "pusher:pong", NULL, deadline, error);
    if (pong == NULL)
      return FALSE;
    if (i >= warmup)
      out[i - warmup] = (pong->received_ns - start) / NS_PER_MS;
  }
  return TRUE;
}

/* A sends client-rtt {"n"} to B; B answers client-rtt-reply {"n"}. */
static gboolean
rtt_relay (ProbeSocket * a, ProbeSocket * b, const char *channel,
    guint count, guint warmup, double *out, gint64 deadline, GError ** error)
{
  guint rate = MIN (probe_socket_get_client_event_rate (a),
      probe_socket_get_client_event_rate (b));
  g_autofree gint64 *sent_a = g_new0 (gint64, MAX (rate, 1));
  g_autofree gint64 *sent_b = g_new0 (gint64, MAX (rate, 1));
  Pacer pace_a = { rate, sent_a, 0 }, pace_b = { rate, sent_b, 0 };

  for (guint i = 0; i < count + warmup; i++) {
    g_autoptr (ProbeMessage) at_b = NULL;
    g_autoptr (ProbeMessage) at_a = NULL;
    g_autoptr (JsonNode) data = object_with_int ("n", i);
    gint64 start;

    pacer_wait (&pace_a, a, deadline);
    pacer_wait (&pace_b, b, deadline);
    start = probe_now_ns ();
    probe_socket_send (a, "client-rtt", channel, data);
    at_b = probe_socket_wait (b, "client-rtt", channel, deadline, error);
    if (at_b == NULL)
      return FALSE;
    probe_socket_send (b, "client-rtt-reply", channel, data);
    at_a = probe_socket_wait (a, "client-rtt-reply", channel, deadline, error);
    if (at_a == NULL)
      return FALSE;
    if (data_int (at_a, "n") != i) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
          "round trip %u: answer out of order", i);
      return FALSE;
    }
    if (i >= warmup)
      out[i - warmup] = (at_a->received_ns - start) / NS_PER_MS;
  }
  return TRUE;
}

static void
rtt_print (gboolean json, guint count, guint warmup, double *ping,
    double *relay)
{
  ProbeStats ping_stats, relay_stats;

  probe_stats_compute (ping, count, &ping_stats);
  probe_stats_compute (relay, count, &relay_stats);
  if (json) {
    g_autoptr (GString) out = g_string_new (NULL);

    g_string_append_printf (out, "{\"count\":%u,\"warmup\":%u,"
        "\"ping_ms\":", count, warmup);
    probe_stats_to_json (&ping_stats, out);
    g_string_append (out, ",\"relay_ms\":");
    probe_stats_to_json (&relay_stats, out);
    g_print ("%s}\n", out->str);
    return;
  }
  g_print ("ping  (pusher:ping -> pusher:pong)  n=%u  p50 %.3f ms  "
      "p95 %.3f ms  p99 %.3f ms  max %.3f ms\n", count, ping_stats.p50,
      ping_stats.p95, ping_stats.p99, ping_stats.max);
  g_print ("relay (client event A->B->A)       n=%u  p50 %.3f ms  "
      "p95 %.3f ms  p99 %.3f ms  max %.3f ms\n", count, relay_stats.p50,
      relay_stats.p95, relay_stats.p99, relay_stats.max);
}

static int
command_rtt (int argc, char **argv)
{
  ProbeCommon common = { 0 };
  int count = 500, warmup = 5;
  GOptionEntry entries[] = {
    {"count", 'n', 0, G_OPTION_ARG_INT, &count,
        "Timed round trips of each kind (default 500)", "N"},
    {"warmup", 0, 0, G_OPTION_ARG_INT, &warmup,
        "Untimed round trips before them (default 5)", "N"},
    {NULL}
  };
  g_autoptr (GError) error = NULL;
  g_autoptr (ProbeSocket) a = NULL;
  g_autoptr (ProbeSocket) b = NULL;
  g_autoptr (ProbeMessage) sub = NULL;
  g_autofree double *ping = NULL;
  g_autofree double *relay = NULL;
  g_autofree char *channel = NULL;
  gint64 deadline;
  int status = 1;

  if (!probe_parse_options ("rtt", "Sequential round trips on one "
          "connection, timed on CLOCK_MONOTONIC: pusher:ping -> pusher:pong, "
          "and a client event A->B answered B->A on a private channel. "
          "Prints p50/p95/p99 in ms. Paces client events to the rate the "
          "server advertises, if any (docs/room-protocol.md §4).",
          entries, probe_common_entries (&common), &argc, &argv)
      || !probe_common_validate (&common, TRUE)) {
    probe_common_clear (&common);
    return 2;
  }
  if (count <= 0 || warmup < 0) {
    g_printerr ("legba-probe rtt: --count must be positive, --warmup not "
        "negative\n");
    probe_common_clear (&common);
    return 2;
  }
  deadline = probe_now_ns () + common.timeout_s * NS_PER_S;
  channel = g_strdup_printf ("private-probe-rtt-%08x", g_random_int ());
  ping = g_new0 (double, count);
  relay = g_new0 (double, count);

  if ((a = probe_socket_connect (common.url, common.app_key, deadline,
              &error)) == NULL
      || (b = probe_socket_connect (common.url, common.app_key, deadline,
              &error)) == NULL)
    goto out;
  if ((sub = probe_socket_subscribe (a, channel, common.app_key,
              common.app_secret, NULL, deadline, &error)) == NULL)
    goto out;
  g_clear_pointer (&sub, probe_message_free);
  if ((sub = probe_socket_subscribe (b, channel, common.app_key,
              common.app_secret, NULL, deadline, &error)) == NULL)
    goto out;
  if (!rtt_ping (a, count, warmup, ping, deadline, &error)
      || !rtt_relay (a, b, channel, count, warmup, relay, deadline, &error))
    goto out;
  rtt_print (common.json, count, warmup, ping, relay);
  status = 0;

out:
  if (error != NULL)
    g_printerr ("legba-probe rtt: %s\n", error->message);
  if (a != NULL)
    probe_socket_close (a, deadline);
  if (b != NULL)
    probe_socket_close (b, deadline);
  probe_common_clear (&common);
  return status;
}

/* ---- main ---- */

static void
usage (void)
{
  g_printerr ("Usage: legba-probe COMMAND [OPTION...]\n\n"
      "Commands:\n"
      "  probe   check a Pusher protocol 7 server, one line per check\n"
      "  rtt     round trips: pusher:ping->pong and client event relay\n"
      "  load    fan-out and relay load over many sockets\n"
      "  relay   instances sharing rooms: events reach every instance once\n"
      "  presence  instances sharing rooms: one presence list\n"
      "  flood   round trips while other clients flood pings\n\n"
      "legba-probe COMMAND --help shows the options of a command.\n");
}

int
main (int argc, char **argv)
{
  const char *command = argc > 1 ? argv[1] : NULL;

  if (command == NULL) {
    usage ();
    return 2;
  }
  /* Each command parses argv from its own name on. */
  argc--;
  argv++;
  if (g_strcmp0 (command, "probe") == 0)
    return command_probe (argc, argv);
  if (g_strcmp0 (command, "rtt") == 0)
    return command_rtt (argc, argv);
  if (g_strcmp0 (command, "flood") == 0)
    return probe_command_flood (argc, argv);
  if (g_strcmp0 (command, "load") == 0)
    return probe_command_load (argc, argv);
  if (g_strcmp0 (command, "relay") == 0)
    return probe_command_relay (argc, argv);
  if (g_strcmp0 (command, "presence") == 0)
    return probe_command_presence (argc, argv);
  if (g_strcmp0 (command, "--help") == 0 || g_strcmp0 (command, "-h") == 0
      || g_strcmp0 (command, "help") == 0) {
    usage ();
    return 0;
  }
  g_printerr ("legba-probe: unknown command '%s'\n", command);
  usage ();
  return 2;
}
