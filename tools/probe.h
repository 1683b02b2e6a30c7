/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-probe: a Pusher protocol 7 client that checks a server (probe),
 * times round trips (rtt) and loads it (load).
 *
 * probe and rtt use libsoup's WebSocket client (ProbeSocket) on the
 * thread-default main context; load uses a lean epoll client of its own
 * (probe-ws.c) spread over worker processes, because a GObject client per
 * socket would make the generator, not the server, the bottleneck.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <sys/socket.h>

G_BEGIN_DECLS

#define PROBE_CLIENT_NAME "legba-probe"

/* Options every subcommand takes. */
typedef struct
{
  char *url;                    /* ws://HOST:PORT */
  char *api_url;                /* http://HOST:PORT, derived from url */
  char *app_id;
  char *app_key;
  char *app_secret;
  int timeout_s;                /* the whole subcommand */
  gboolean json;
} ProbeCommon;

/* The GOptionEntry array for ProbeCommon; the array is static, the
 * pointers in it point into `common`. */
GOptionEntry *probe_common_entries (ProbeCommon * common);
/* Checks required fields and derives api_url; prints the error. */
gboolean probe_common_validate (ProbeCommon * common, gboolean need_url);
void probe_common_clear (ProbeCommon * common);

/* Parses argv with a GOptionContext named after the subcommand; prints
 * the error and returns FALSE on failure. */
gboolean probe_parse_options (const char *command, const char *summary,
    GOptionEntry * entries, GOptionEntry * common_entries, int *argc,
    char ***argv);

/* CLOCK_MONOTONIC in nanoseconds: the clock every latency here is on. */
gint64 probe_now_ns (void);

/* Nearest-rank percentile (p in 0..100) of a sorted array. */
double probe_percentile (const double *sorted, gsize n, double p);

typedef struct
{
  gsize n;
  double p50;
  double p95;
  double p99;
  double max;
} ProbeStats;

/* Sorts values in place and fills stats; stats is zero when n is 0. */
void probe_stats_compute (double *values, gsize n, ProbeStats * stats);
/* Appends {"n", "p50", "p95", "p99", "max"} (milliseconds, 3 decimals). */
void probe_stats_to_json (const ProbeStats * stats, GString * out);

/* The member if it is an object (array), else NULL: json-glib 1.6 has no
 * such getter for untrusted input. */
JsonObject *probe_json_object_member (JsonObject * object, const char *member);
JsonArray *probe_json_array_member (JsonObject * object, const char *member);

/* ---- libsoup client (probe-client.c) ---- */

typedef struct
{
  char *event;
  char *channel;                /* NULL when absent */
  char *user_id;                /* NULL when absent */
  JsonNode *data;               /* decoded: a string holding JSON is parsed */
  gint64 received_ns;
} ProbeMessage;

void probe_message_free (ProbeMessage * message);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (ProbeMessage, probe_message_free);

/* A string member of an object data, or NULL. */
const char *probe_message_data_string (ProbeMessage * message,
    const char *member);

typedef struct _ProbeSocket ProbeSocket;

/* Connects to URL/app/KEY?protocol=7 and waits for
 * pusher:connection_established until deadline_ns. */
ProbeSocket *probe_socket_connect (const char *url, const char *app_key,
    gint64 deadline_ns, GError ** error);
void probe_socket_free (ProbeSocket * socket);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (ProbeSocket, probe_socket_free);

const char *probe_socket_get_id (ProbeSocket * socket);
guint probe_socket_get_activity_timeout (ProbeSocket * socket);
/* limits.client_events_per_second advertised in connection_established
 * (docs/room-protocol.md §4), or 0 when the server advertises none. */
guint probe_socket_get_client_event_rate (ProbeSocket * socket);

/* Sends {"event", "channel", "data"}; data may be NULL ({}). */
void probe_socket_send (ProbeSocket * socket, const char *event,
    const char *channel, JsonNode * data);

/* Waits for the first queued or incoming message with this event (and
 * channel, unless NULL) and removes it from the queue. Messages that do
 * not match stay queued in order. */
ProbeMessage *probe_socket_wait (ProbeSocket * socket, const char *event,
    const char *channel, gint64 deadline_ns, GError ** error);

/* Removes and returns the first queued message with this event, without
 * waiting; NULL if none. */
ProbeMessage *probe_socket_take (ProbeSocket * socket, const char *event,
    const char *channel);

/* Handles whatever the main context has ready, without blocking. */
void probe_socket_drain (ProbeSocket * socket);

/* Subscribes, signing private- and presence- channels with the secret
 * (channel_data is the presence member JSON), and waits for
 * pusher_internal:subscription_succeeded. A pusher:subscription_error or
 * pusher:error fails with its text. */
ProbeMessage *probe_socket_subscribe (ProbeSocket * socket,
    const char *channel, const char *app_key, const char *app_secret,
    const char *channel_data, gint64 deadline_ns, GError ** error);

/* Closes the WebSocket and waits until it is closed. */
void probe_socket_close (ProbeSocket * socket, gint64 deadline_ns);

/* ---- HTTP API (probe-client.c) ---- */

typedef struct _ProbeApi ProbeApi;

ProbeApi *probe_api_new (const char *api_url, const char *app_id,
    const char *app_key, const char *app_secret, guint timeout_s);
void probe_api_free (ProbeApi * api);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (ProbeApi, probe_api_free);

/* The signed query string (auth_key ... auth_signature) of a request to
 * path with this body, per the Pusher HTTP API (auth_version 1.0). */
char *probe_api_sign (const char *app_key, const char *app_secret,
    const char *method, const char *path, const char *body, gint64 now_s);

/* POST /apps/ID/events {"name", "channels": [channel], "data"}: blocks
 * until the response; FALSE unless the status is 200. */
gboolean probe_api_trigger (ProbeApi * api, const char *channel,
    const char *event, const char *data, GError ** error);

/* ---- lean WebSocket for the load path (probe-ws.c) ---- */

/* RFC 6455 §5.2 */
enum
{
  PROBE_WS_CONTINUATION = 0x0,
  PROBE_WS_TEXT = 0x1,
  PROBE_WS_BINARY = 0x2,
  PROBE_WS_CLOSE = 0x8,
  PROBE_WS_PING = 0x9,
  PROBE_WS_PONG = 0xa,
};

/* The largest frame either side of the load path writes, plus header. */
#define PROBE_WS_HEADER_MAX 14

typedef struct
{
  guint8 opcode;
  gboolean fin;
  guint8 *payload;
  gsize len;
} ProbeWsFrame;

/* Parses the frame at buf, unmasking a masked payload in place. Returns
 * the bytes the frame spans, 0 when it is incomplete, -1 when it is
 * invalid or its payload exceeds max_payload. */
gssize probe_ws_frame_parse (guint8 * buf, gsize len, gsize max_payload,
    ProbeWsFrame * frame);
/* Writes one final frame to out (len + PROBE_WS_HEADER_MAX bytes at
 * least), masked with a random key when mask (a client's frames are).
 * Returns the bytes written. */
gsize probe_ws_frame_write (guint8 * out, guint8 opcode, const void *payload,
    gsize len, gboolean mask);
/* base64(SHA-1(key + RFC 6455 GUID)): Sec-WebSocket-Accept for key. */
char *probe_ws_accept (const char *key);

/* Finds the string value of "member" in a compact JSON text, where the
 * text is a Pusher frame whose data may be a JSON-encoded string (member
 * then appears as \"member\"). Returns a pointer into text and its
 * length, or NULL. No unescaping: for ids and names only. */
const char *probe_json_scan_string (const char *text, gsize len,
    const char *member, gsize * value_len);
/* Same for a non-negative integer value; -1 when absent. */
gint64 probe_json_scan_int (const char *text, gsize len, const char *member);

/* ---- load: workers and the parent (probe-load.c, probe-ws.c) ---- */

typedef struct
{
  char *host;
  guint16 port;
  struct sockaddr_storage *addr;
  guint addr_len;
} ProbeTarget;

typedef struct
{
  ProbeTarget *targets;
  guint n_targets;
  const char *app_key;
  const char *app_secret;
  const char *channel;          /* fan-out channel, or relay channel prefix */
  const char *event;            /* fan-out event name */
  guint n_events;               /* fan-out events, warm-up included */
  guint warmup;                 /* untimed events first */
  guint relay_rounds;           /* relay mode when > 0 */
  guint connect_window;         /* handshakes in flight per worker */
  gint64 deadline_ns;
} ProbeLoadConfig;

/* Control messages between the parent and a worker (a socketpair). */
typedef enum
{
  PROBE_CTL_READY = 1,          /* worker: every socket subscribed or failed */
  PROBE_CTL_EVENT_DONE,         /* worker: event `arg` reached every socket */
  PROBE_CTL_RELAY,              /* parent: start the relay rounds */
  PROBE_CTL_RELAY_DONE,         /* worker: every pair finished its rounds */
  PROBE_CTL_FINISH,             /* parent: report and exit */
  PROBE_CTL_RESULT,             /* worker: ProbeWorkerResult + arrays */
} ProbeCtlType;

typedef struct
{
  guint32 type;
  guint32 arg;
  guint64 len;                  /* payload bytes that follow */
} ProbeCtlHeader;

/* What PROBE_CTL_READY carries. */
typedef struct
{
  guint32 ready;
  guint32 failed;
  char error[200];              /* the first failure, NUL-terminated */
} ProbeWorkerReady;

/* What PROBE_CTL_RESULT carries, followed by guint64 arrays
 * connections[n_targets], ready[n_targets], delivered[n_targets],
 * event_max_ns[n_events], then gint64 latency_ns[n_latencies] and
 * relay_rtt_ns[n_relay_rtts], then error_len bytes of text. */
typedef struct
{
  guint32 n_targets;
  guint32 n_events;
  guint64 duplicates;
  guint64 relayed;
  guint64 frames_in;
  guint64 n_latencies;
  guint64 n_relay_rtts;
  guint64 error_len;
  guint64 work_cpu_ns;          /* the worker's CPU time since READY */
  guint64 work_frames;          /* frames it received since READY */
} ProbeWorkerResult;

gboolean probe_ctl_send (int fd, guint32 type, guint32 arg,
    const void *payload, gsize len);
/* Reads exactly len bytes; FALSE on EOF or error. */
gboolean probe_read_full (int fd, void *buf, gsize len);

/* Runs in a forked worker: connects `count` sockets (socket i of the
 * worker goes to target (first + i) % n_targets), talks to the parent
 * on `control` and exits the process. */
G_GNUC_NORETURN void probe_worker_run (const ProbeLoadConfig * config,
    guint worker, guint first, guint count, int control);

/* ---- self-test server (probe-selftest.c) ---- */

/* Forks a minimal epoll fan-out server on 127.0.0.1 (handshake,
 * connection_established, subscribe, client-event relay, POST .../events)
 * whose own cost is close to nothing, so a load against it measures the
 * generator. Returns its pid and port, or -1. */
GPid probe_selftest_server_start (guint16 * port, gint64 deadline_ns,
    GError ** error);

/* ---- subcommands ---- */

int probe_command_load (int argc, char **argv);
/* probe-cluster.c: several instances sharing rooms */
int probe_command_relay (int argc, char **argv);
int probe_command_presence (int argc, char **argv);
/* probe-flood.c: round trips during a ping flood */
int probe_command_flood (int argc, char **argv);

G_END_DECLS
