/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * `legba-probe load`: many sockets, split evenly over one or more server
 * instances, held by forked workers (probe-ws.c). The parent publishes
 * through the HTTP API, stamping each event with its CLOCK_MONOTONIC
 * publish time; every socket times its own receipt on the same clock.
 * With --relay the sockets pair up on private channels and bounce client
 * events instead.
 *
 * --sync lets a harness sample the server between phases: the parent
 * prints "subscribed S N" once the sockets are set up, "warm" once the
 * warm-up events are delivered (if any), and "done" once the work is
 * delivered, and after each waits for a line on stdin. With --self-test
 * it first prints "self-test-server PID", so that the harness can sample
 * that server as it samples a real one.
 */
#define _GNU_SOURCE
#include "probe.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define NS_PER_S G_GINT64_CONSTANT (1000000000)
#define FD_RESERVE 64
#define READY_GRACE_NS (5 * NS_PER_S)

typedef struct
{
  ProbeCommon common;
  char *targets;
  int connections;
  int events;
  int warmup;
  int relay;
  int workers;
  int event_timeout_s;
  int connect_window;
  char *channel;
  gboolean sync;
  gboolean self_test;
} LoadOptions;

typedef struct
{
  GPid pid;
  int control;
  guint count;
  ProbeWorkerReady ready;
  gboolean got_ready;
  gboolean relay_done;
  guint32 last_event_done;      /* events done + 1 */
} WorkerHandle;

typedef struct
{
  LoadOptions *options;
  ProbeLoadConfig config;
  WorkerHandle *workers;
  guint n_workers;
  guint subscribed;
  gint64 publish_ns;
  gint64 relay_ns;
  guint events_completed;
  GString *errors;
  /* merged results */
  guint64 *connections;
  guint64 *ready;
  guint64 *delivered;
  guint64 *event_max_ns;
  guint64 duplicates;
  guint64 relayed;
  guint64 frames_in;
  guint64 work_cpu_ns;
  guint64 work_frames;
  GArray *latency_ms;
  GArray *relay_rtt_ms;
} Load;

/* *INDENT-OFF* */
static void load_error (Load * load, const char *format, ...)
    G_GNUC_PRINTF (2, 3);
/* *INDENT-ON* */

static void
load_error (Load * load, const char *format, ...)
{
  va_list args;

  if (load->errors->len > 0)
    g_string_append (load->errors, "\n");
  va_start (args, format);
  g_string_append_vprintf (load->errors, format, args);
  va_end (args);
}

/* ---- targets ---- */

static gboolean
resolve_target (const char *spec, ProbeTarget * target, GError ** error)
{
  const char *colon = strrchr (spec, ':');
  g_autofree char *host = NULL;
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM };
  struct addrinfo *info = NULL;
  guint64 port;
  int r;

  if (colon == NULL || colon == spec
      || !g_ascii_string_to_unsigned (colon + 1, 10, 1, 65535, &port, NULL)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
        "target '%s' is not HOST:PORT", spec);
    return FALSE;
  }
  host = g_strndup (spec, colon - spec);
  if (host[0] == '[' && host[strlen (host) - 1] == ']') {
    memmove (host, host + 1, strlen (host));
    host[strlen (host) - 1] = '\0';
  }
  r = getaddrinfo (host, NULL, &hints, &info);
  if (r != 0 || info == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
        "target '%s': %s", spec, gai_strerror (r));
    return FALSE;
  }
  target->addr = g_new0 (struct sockaddr_storage, 1);
  memcpy (target->addr, info->ai_addr, info->ai_addrlen);
  target->addr_len = info->ai_addrlen;
  if (info->ai_family == AF_INET6)
    ((struct sockaddr_in6 *) target->addr)->sin6_port = htons (port);
  else
    ((struct sockaddr_in *) target->addr)->sin_port = htons (port);
  freeaddrinfo (info);
  target->host = g_steal_pointer (&host);
  target->port = port;
  return TRUE;
}

static gboolean
resolve_targets (const char *list, ProbeLoadConfig * config, GError ** error)
{
  g_auto (GStrv) specs = g_strsplit (list, ",", -1);

  config->n_targets = g_strv_length (specs);
  config->targets = g_new0 (ProbeTarget, MAX (config->n_targets, 1));
  for (guint i = 0; i < config->n_targets; i++)
    if (!resolve_target (g_strstrip (specs[i]), &config->targets[i], error))
      return FALSE;
  return config->n_targets > 0;
}

static void
free_targets (ProbeLoadConfig * config)
{
  for (guint i = 0; i < config->n_targets; i++) {
    g_free (config->targets[i].host);
    g_free (config->targets[i].addr);
  }
  g_clear_pointer (&config->targets, g_free);
}

/* ---- workers ---- */

/* Raises RLIMIT_NOFILE to the hard limit; returns the sockets one process
 * can hold. */
static guint
raise_fd_limit (void)
{
  struct rlimit limit;

  if (getrlimit (RLIMIT_NOFILE, &limit) < 0)
    return 1024 - FD_RESERVE;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit (RLIMIT_NOFILE, &limit);
    getrlimit (RLIMIT_NOFILE, &limit);
  }
  return MAX ((gint64) MIN (limit.rlim_cur, 1 << 20) - FD_RESERVE, 16);
}

static gboolean
spawn_workers (Load * load, GError ** error)
{
  guint n = load->options->connections;
  guint per_process = raise_fd_limit ();
  guint first = 0;

  load->n_workers = MAX ((guint) load->options->workers,
      (n + per_process - 1) / per_process);
  load->n_workers = CLAMP (load->n_workers, 1, n);
  load->workers = g_new0 (WorkerHandle, load->n_workers);
  /* stdout is shared with the workers: nothing buffered may be written
   * twice. */
  fflush (stdout);
  for (guint w = 0; w < load->n_workers; w++) {
    WorkerHandle *h = &load->workers[w];
    int pair[2];
    guint count = n / load->n_workers + (w < n % load->n_workers);

    /* Relay pairs stay within one worker; an odd socket out goes last. */
    if (load->config.relay_rounds > 0) {
      guint pairs = n / 2;

      count = 2 * (pairs / load->n_workers + (w < pairs % load->n_workers));
      if (w + 1 == load->n_workers)
        count += n & 1;
    }
    if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0) {
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno),
          "socketpair: %s", g_strerror (errno));
      load->n_workers = w;
      return FALSE;
    }
    h->count = count;
    h->pid = fork ();
    if (h->pid < 0) {
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno),
          "fork: %s", g_strerror (errno));
      close (pair[0]);
      close (pair[1]);
      load->n_workers = w;
      return FALSE;
    }
    if (h->pid == 0) {
      /* A worker has no purpose without the parent that drives it. */
      prctl (PR_SET_PDEATHSIG, SIGKILL);
      close (pair[0]);
      for (guint other = 0; other < w; other++)
        close (load->workers[other].control);
      probe_worker_run (&load->config, w, first, count, pair[1]);
    }
    close (pair[1]);
    h->control = pair[0];
    first += count;
  }
  return TRUE;
}

/* Reads one message from any worker into header and payload; FALSE at
 * the deadline or when a worker is gone. */
static gboolean
read_message (Load * load, gint64 deadline_ns, guint * worker,
    ProbeCtlHeader * header, void *payload, gsize payload_size)
{
  g_autofree struct pollfd *fds = g_new0 (struct pollfd, load->n_workers);

  for (guint w = 0; w < load->n_workers; w++) {
    fds[w].fd = load->workers[w].control;
    fds[w].events = POLLIN;
  }
  for (;;) {
    gint64 left = deadline_ns - probe_now_ns ();
    int r;

    if (left <= 0)
      return FALSE;
    r = poll (fds, load->n_workers, left / 1000000 + 1);
    if (r < 0 && errno != EINTR)
      return FALSE;
    for (guint w = 0; r > 0 && w < load->n_workers; w++) {
      if (!(fds[w].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      if (!probe_read_full (fds[w].fd, header, sizeof (*header))
          || header->len > payload_size
          || !probe_read_full (fds[w].fd, payload, header->len)) {
        load_error (load, "worker %u stopped unexpectedly", w);
        return FALSE;
      }
      *worker = w;
      return TRUE;
    }
  }
}

/* Waits until every worker reports `type` (for events: event `arg`). */
static gboolean
wait_workers (Load * load, ProbeCtlType type, guint32 arg, gint64 deadline)
{
  for (;;) {
    gboolean all = TRUE;
    ProbeCtlHeader header;
    ProbeWorkerReady ready;
    guint w;

    for (w = 0; w < load->n_workers; w++) {
      WorkerHandle *h = &load->workers[w];

      if ((type == PROBE_CTL_READY && !h->got_ready)
          || (type == PROBE_CTL_RELAY_DONE && !h->relay_done)
          || (type == PROBE_CTL_EVENT_DONE && h->ready.ready > 0
              && h->last_event_done <= arg))
        all = FALSE;
    }
    if (all)
      return TRUE;
    if (!read_message (load, deadline, &w, &header, &ready, sizeof (ready)))
      return FALSE;
    if (header.type == PROBE_CTL_READY) {
      load->workers[w].ready = ready;
      load->workers[w].got_ready = TRUE;
    } else if (header.type == PROBE_CTL_EVENT_DONE) {
      load->workers[w].last_event_done =
          MAX (load->workers[w].last_event_done, header.arg + 1);
    } else if (header.type == PROBE_CTL_RELAY_DONE) {
      load->workers[w].relay_done = TRUE;
    }
  }
}

static void
send_all (Load * load, ProbeCtlType type, guint32 arg)
{
  for (guint w = 0; w < load->n_workers; w++)
    probe_ctl_send (load->workers[w].control, type, arg, NULL, 0);
}

/* ---- phases ---- */

static gboolean
sync_point (Load * load, const char *line)
{
  char buf[256];
  struct pollfd fd = {.fd = STDIN_FILENO,.events = POLLIN };
  gint64 left = load->config.deadline_ns - probe_now_ns ();

  if (!load->options->sync)
    return TRUE;
  g_print ("%s\n", line);
  fflush (stdout);
  if (left <= 0 || poll (&fd, 1, left / 1000000 + 1) <= 0
      || fgets (buf, sizeof (buf), stdin) == NULL) {
    load_error (load, "--sync: no go-ahead on stdin after '%s'", line);
    return FALSE;
  }
  return TRUE;
}

static gboolean
connect_phase (Load * load)
{
  guint failed = 0;

  /* Workers give up on their stragglers at the deadline and report what
   * they set up: wait a little past it for that report. */
  if (!wait_workers (load, PROBE_CTL_READY, 0,
          load->config.deadline_ns + READY_GRACE_NS)) {
    load_error (load, "timed out before every socket was set up");
    return FALSE;
  }
  for (guint w = 0; w < load->n_workers; w++) {
    load->subscribed += load->workers[w].ready.ready;
    failed += load->workers[w].ready.failed;
    if (load->workers[w].ready.error[0] != '\0')
      load_error (load, "%s", load->workers[w].ready.error);
  }
  if (failed > 0)
    load_error (load, "%u of %d sockets failed to subscribe", failed,
        load->options->connections);
  return load->subscribed > 0;
}

static gboolean
publish_phase (Load * load)
{
  LoadOptions *o = load->options;
  g_autoptr (ProbeApi) api = probe_api_new (o->common.api_url,
      o->common.app_id, o->common.app_key, o->common.app_secret,
      o->common.timeout_s);
  gint64 start = probe_now_ns ();

  for (guint i = 0; i < load->config.n_events; i++) {
    g_autoptr (GError) error = NULL;
    g_autofree char *data = NULL;
    gint64 now, deadline;

    if (i > 0 && i == load->config.warmup) {
      if (!sync_point (load, "warm"))
        return FALSE;
      start = probe_now_ns ();
    }
    now = probe_now_ns ();
    deadline = MIN (load->config.deadline_ns,
        now + o->event_timeout_s * NS_PER_S);

    data = g_strdup_printf ("{\"probe_t\":%" G_GINT64_FORMAT ",\"probe_i\":"
        "%u}", now, i);
    if (!probe_api_trigger (api, o->channel, load->config.event, data, &error)) {
      load_error (load, "publishing event %u: %s", i, error->message);
      return FALSE;
    }
    if (!wait_workers (load, PROBE_CTL_EVENT_DONE, i, deadline)) {
      load_error (load, "event %u did not reach every socket within %d s",
          i, o->event_timeout_s);
      if (probe_now_ns () >= load->config.deadline_ns)
        return FALSE;
      continue;
    }
    load->events_completed++;
  }
  load->publish_ns = probe_now_ns () - start;
  return TRUE;
}

static gboolean
relay_phase (Load * load)
{
  gint64 start = probe_now_ns ();

  send_all (load, PROBE_CTL_RELAY, 0);
  if (!wait_workers (load, PROBE_CTL_RELAY_DONE, 0, load->config.deadline_ns)) {
    load_error (load, "relay rounds did not finish in time");
    return FALSE;
  }
  load->relay_ns = probe_now_ns () - start;
  return TRUE;
}

static void
merge_result (Load * load, const guint8 * p, gsize len)
{
  ProbeWorkerResult r;
  guint t = load->config.n_targets, e = load->config.n_events;
  const guint64 *u;
  const gint64 *s;

  memcpy (&r, p, sizeof (r));
  if (len < sizeof (r) + (3 * t + e) * 8 + (r.n_latencies + r.n_relay_rtts)
      * 8 + r.error_len)
    return;
  u = (const guint64 *) (p + sizeof (r));
  for (guint i = 0; i < t; i++) {
    load->connections[i] += u[i];
    load->ready[i] += u[t + i];
    load->delivered[i] += u[2 * t + i];
  }
  for (guint i = 0; i < e; i++)
    load->event_max_ns[i] = MAX (load->event_max_ns[i], u[3 * t + i]);
  s = (const gint64 *) (u + 3 * t + e);
  for (guint64 i = 0; i < r.n_latencies; i++) {
    double ms = s[i] / 1e6;

    g_array_append_val (load->latency_ms, ms);
  }
  s += r.n_latencies;
  for (guint64 i = 0; i < r.n_relay_rtts; i++) {
    double ms = s[i] / 1e6;

    g_array_append_val (load->relay_rtt_ms, ms);
  }
  if (r.error_len > 0)
    load_error (load, "%.*s", (int) r.error_len, (const char *) (s +
            r.n_relay_rtts));
  load->duplicates += r.duplicates;
  load->relayed += r.relayed;
  load->frames_in += r.frames_in;
  load->work_cpu_ns += r.work_cpu_ns;
  load->work_frames += r.work_frames;
}

/* Asks every worker for its result and reaps it. */
static void
finish_workers (Load * load)
{
  gint64 deadline = probe_now_ns () + 10 * NS_PER_S;

  send_all (load, PROBE_CTL_FINISH, 0);
  for (guint w = 0; w < load->n_workers; w++) {
    WorkerHandle *h = &load->workers[w];
    ProbeCtlHeader header;
    g_autofree guint8 *payload = NULL;
    struct pollfd fd = {.fd = h->control,.events = POLLIN };

    while (poll (&fd, 1, MAX (deadline - probe_now_ns (), 0) / 1000000) > 0
        && probe_read_full (h->control, &header, sizeof (header))) {
      g_free (payload);
      payload = g_malloc (MAX (header.len, 1));
      if (!probe_read_full (h->control, payload, header.len))
        break;
      if (header.type == PROBE_CTL_RESULT) {
        merge_result (load, payload, header.len);
        break;
      }
    }
    /* The worker exits right after its result: wait for its end of the
     * socket to close, then reap it; a stuck worker is killed. */
    if (poll (&fd, 1, MAX (deadline - probe_now_ns (), 0) / 1000000) <= 0)
      kill (h->pid, SIGKILL);
    close (h->control);
    waitpid (h->pid, NULL, 0);
  }
}

/* ---- report ---- */

static double
generator_cpu_s (void)
{
  struct rusage self, children;

  getrusage (RUSAGE_SELF, &self);
  getrusage (RUSAGE_CHILDREN, &children);
  return self.ru_utime.tv_sec + self.ru_stime.tv_sec
      + children.ru_utime.tv_sec + children.ru_stime.tv_sec
      + (self.ru_utime.tv_usec + self.ru_stime.tv_usec
      + children.ru_utime.tv_usec + children.ru_stime.tv_usec) / 1e6;
}

typedef struct
{
  guint64 delivered;
  guint64 total;
  guint64 relay_expected;
  double fanout_per_s;          /* receipts over the publish-to-last spans */
  double cpu_s;
  ProbeStats latency;
  ProbeStats relay_rtt;
} Summary;

static void
summarize (Load * load, Summary * sum)
{
  LoadOptions *o = load->options;
  double spans_s = 0;

  memset (sum, 0, sizeof (*sum));
  sum->total = (guint64) o->connections * o->events;
  for (guint i = 0; i < load->config.n_targets; i++)
    sum->delivered += load->delivered[i];
  for (guint i = load->config.warmup; i < load->config.n_events; i++)
    spans_s += load->event_max_ns[i] / 1e9;
  if (spans_s > 0)
    sum->fanout_per_s = sum->delivered / spans_s;
  if (o->relay > 0)
    sum->relay_expected = 2 * (guint64) (o->connections / 2) * o->relay;
  probe_stats_compute ((double *) load->latency_ms->data,
      load->latency_ms->len, &sum->latency);
  probe_stats_compute ((double *) load->relay_rtt_ms->data,
      load->relay_rtt_ms->len, &sum->relay_rtt);
  sum->cpu_s = generator_cpu_s ();
}

static void
json_string (GString * out, const char *s)
{
  g_autoptr (JsonNode) node = json_node_init_string (json_node_alloc (), s);
  g_autofree char *text = json_to_string (node, FALSE);

  g_string_append (out, text);
}

static void
json_double (GString * out, const char *name, double v, gboolean comma)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];

  g_string_append_printf (out, "\"%s\":%s%s", name,
      g_ascii_formatd (buf, sizeof (buf), "%.3f", v), comma ? "," : "");
}

static void
print_json (Load * load, Summary * sum)
{
  LoadOptions *o = load->options;
  g_autoptr (GString) out = g_string_new (NULL);
  g_auto (GStrv) errors = g_strsplit (load->errors->str, "\n", -1);

  g_string_append_printf (out, "{\"delivered\":%" G_GUINT64_FORMAT
      ",\"total\":%" G_GUINT64_FORMAT ",\"connections\":%d,\"subscribed\":%u,"
      "\"events\":%d,\"warmup\":%d,\"workers\":%u,\"self_test\":%s,"
      "\"split\":[", sum->delivered, sum->total, o->connections,
      load->subscribed, o->events, o->warmup, load->n_workers,
      o->self_test ? "true" : "false");
  for (guint i = 0; i < load->config.n_targets; i++) {
    ProbeTarget *t = &load->config.targets[i];
    g_autofree char *name = g_strdup_printf ("%s:%u", t->host, t->port);

    g_string_append_printf (out, "%s{\"target\":", i ? "," : "");
    json_string (out, name);
    g_string_append_printf (out, ",\"connections\":%" G_GUINT64_FORMAT
        ",\"subscribed\":%" G_GUINT64_FORMAT ",\"delivered\":%"
        G_GUINT64_FORMAT "}", load->connections[i], load->ready[i],
        load->delivered[i]);
  }
  g_string_append (out, "],\"latency_ms\":");
  probe_stats_to_json (&sum->latency, out);
  g_string_append_printf (out, ",\"duplicates\":%" G_GUINT64_FORMAT ",",
      load->duplicates);
  json_double (out, "fanout_frames_per_s", sum->fanout_per_s, TRUE);
  json_double (out, "publish_s", load->publish_ns / 1e9, TRUE);
  json_double (out, "generator_cpu_s", sum->cpu_s, TRUE);
  g_string_append_printf (out, "\"frames_in\":%" G_GUINT64_FORMAT ","
      "\"work_frames\":%" G_GUINT64_FORMAT ",", load->frames_in,
      load->work_frames);
  json_double (out, "work_cpu_s", load->work_cpu_ns / 1e9, TRUE);
  json_double (out, "work_us_per_frame", load->work_frames ?
      load->work_cpu_ns / 1e3 / load->work_frames : 0, TRUE);
  g_string_append_printf (out, "\"relay\":{\"rounds\":%d,\"pairs\":%d,"
      "\"relayed\":%" G_GUINT64_FORMAT ",\"expected\":%" G_GUINT64_FORMAT
      ",", o->relay, o->relay > 0 ? o->connections / 2 : 0, load->relayed,
      sum->relay_expected);
  json_double (out, "elapsed_s", load->relay_ns / 1e9, TRUE);
  g_string_append (out, "\"rtt_ms\":");
  probe_stats_to_json (&sum->relay_rtt, out);
  g_string_append (out, "},\"errors\":[");
  for (guint i = 0; load->errors->len > 0 && errors[i] != NULL; i++) {
    g_string_append (out, i ? "," : "");
    json_string (out, errors[i]);
  }
  g_print ("%s]}\n", out->str);
}

static void
print_text (Load * load, Summary * sum)
{
  LoadOptions *o = load->options;

  g_print ("load: %d sockets over %u target(s), %u worker process(es)%s\n",
      o->connections, load->config.n_targets, load->n_workers,
      o->self_test ? ", against the built-in self-test server" : "");
  for (guint i = 0; i < load->config.n_targets; i++)
    g_print ("  %s:%u  connections %" G_GUINT64_FORMAT "  subscribed %"
        G_GUINT64_FORMAT "  delivered %" G_GUINT64_FORMAT "\n",
        load->config.targets[i].host, load->config.targets[i].port,
        load->connections[i], load->ready[i], load->delivered[i]);
  if (o->events > 0) {
    g_print ("delivered %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT
        " (%d event(s) x %d sockets; %d warm-up event(s) untimed)\n",
        sum->delivered, sum->total, o->events, o->connections, o->warmup);
    g_print ("publish-to-receipt  p50 %.3f ms  p95 %.3f ms  p99 %.3f ms  "
        "max %.3f ms\n", sum->latency.p50, sum->latency.p95,
        sum->latency.p99, sum->latency.max);
    g_print ("fan-out rate %.0f frames/s (receipts over publish-to-last-"
        "receipt time)\n", sum->fanout_per_s);
  }
  if (o->relay > 0)
    g_print ("relay: %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT " client "
        "events relayed in %.3f s, round trip p50 %.3f ms  p95 %.3f ms\n",
        load->relayed, sum->relay_expected, load->relay_ns / 1e9,
        sum->relay_rtt.p50, sum->relay_rtt.p95);
  if (load->duplicates > 0)
    g_print ("duplicates %" G_GUINT64_FORMAT "\n", load->duplicates);
  g_print ("generator CPU %.3f s; after setup %.3f s for %" G_GUINT64_FORMAT
      " frames received (%.2f us per frame)\n", sum->cpu_s,
      load->work_cpu_ns / 1e9, load->work_frames, load->work_frames ?
      load->work_cpu_ns / 1e3 / load->work_frames : 0);
}

/* ---- the command ---- */

static gboolean
load_validate (LoadOptions * o)
{
  if (o->self_test) {
    if (o->common.app_id == NULL)
      o->common.app_id = g_strdup ("self-test");
    if (o->common.app_key == NULL)
      o->common.app_key = g_strdup ("self-test");
    if (o->common.app_secret == NULL)
      o->common.app_secret = g_strdup ("self-test");
  } else if (o->targets == NULL) {
    g_printerr ("legba-probe load: --targets (or --self-test) is required\n");
    return FALSE;
  }
  if (o->connections <= 0 || o->events < 0 || o->warmup < 0 || o->relay < 0
      || o->workers < 0 || o->event_timeout_s <= 0 || o->connect_window <= 0
      || (o->relay > 0 && o->connections < 2)) {
    g_printerr ("legba-probe load: --connections must be positive (2 or "
        "more with --relay), --events, --warmup, --relay and --workers not "
        "negative, --event-timeout and --connect-window positive\n");
    return FALSE;
  }
  if (o->relay > 0 && o->events > 0) {
    g_printerr ("legba-probe load: --relay and --events are separate runs\n");
    return FALSE;
  }
  if (o->relay == 0 && o->events == 0)
    o->events = 1;
  if (o->channel == NULL)
    o->channel = g_strdup ("probe-load");
  return probe_common_validate (&o->common, FALSE);
}

static void
load_init (Load * load, LoadOptions * o)
{
  guint t = load->config.n_targets;

  load->options = o;
  load->config.app_key = o->common.app_key;
  load->config.app_secret = o->common.app_secret;
  load->config.channel = o->channel;
  load->config.event = "probe-load";
  load->config.warmup = o->events > 0 ? o->warmup : 0;
  load->config.n_events = o->events > 0 ? o->events + o->warmup : 0;
  load->config.relay_rounds = o->relay;
  load->config.connect_window = o->connect_window;
  load->config.deadline_ns = probe_now_ns () + o->common.timeout_s * NS_PER_S;
  load->connections = g_new0 (guint64, t);
  load->ready = g_new0 (guint64, t);
  load->delivered = g_new0 (guint64, t);
  load->event_max_ns = g_new0 (guint64, MAX (load->config.n_events, 1));
  load->latency_ms = g_array_new (FALSE, FALSE, sizeof (double));
  load->relay_rtt_ms = g_array_new (FALSE, FALSE, sizeof (double));
}

static void
load_clear (Load * load)
{
  free_targets (&load->config);
  g_free (load->workers);
  g_free (load->connections);
  g_free (load->ready);
  g_free (load->delivered);
  g_free (load->event_max_ns);
  g_clear_pointer (&load->latency_ms, g_array_unref);
  g_clear_pointer (&load->relay_rtt_ms, g_array_unref);
  g_string_free (load->errors, TRUE);
}

static gboolean
load_run (Load * load)
{
  g_autoptr (GError) error = NULL;
  gboolean ok;

  if (!spawn_workers (load, &error)) {
    load_error (load, "%s", error->message);
    finish_workers (load);
    return FALSE;
  }
  ok = connect_phase (load);
  if (ok) {
    g_autofree char *line = g_strdup_printf ("subscribed %u %d",
        load->subscribed, load->options->connections);

    ok = sync_point (load, line);
  }
  if (ok && load->config.n_events > 0)
    ok = publish_phase (load);
  if (ok && load->config.relay_rounds > 0)
    ok = relay_phase (load);
  if (ok)
    ok = sync_point (load, "done");
  finish_workers (load);
  return ok;
}

int
probe_command_load (int argc, char **argv)
{
  LoadOptions o = {.connections = 100,.event_timeout_s = 10,
    .connect_window = 256
  };
  GOptionEntry entries[] = {
    {"targets", 0, 0, G_OPTION_ARG_STRING, &o.targets,
        "Servers to spread the sockets over", "HOST:PORT[,HOST:PORT...]"},
    {"connections", 'c', 0, G_OPTION_ARG_INT, &o.connections,
        "Sockets in all (default 100)", "N"},
    {"events", 'e', 0, G_OPTION_ARG_INT, &o.events,
        "Timed fan-out events, published one after the other, each once "
          "the previous one reached every socket (default 1)", "E"},
    {"warmup", 0, 0, G_OPTION_ARG_INT, &o.warmup,
        "Untimed fan-out events before them (default 0)", "W"},
    {"relay", 0, 0, G_OPTION_ARG_INT, &o.relay,
        "Instead of fan-out: pair the sockets on private channels and "
          "bounce R client-event round trips per pair", "R"},
    {"channel", 0, 0, G_OPTION_ARG_STRING, &o.channel,
        "Fan-out channel, relay channel prefix (default probe-load)", "NAME"},
    {"workers", 'w', 0, G_OPTION_ARG_INT, &o.workers,
        "Worker processes (default: as few as the file-descriptor limit "
          "allows)", "W"},
    {"event-timeout", 0, 0, G_OPTION_ARG_INT, &o.event_timeout_s,
        "Wait at most this long for one event to reach every socket "
          "(default 10)", "S"},
    {"connect-window", 0, 0, G_OPTION_ARG_INT, &o.connect_window,
        "Handshakes in flight per worker (default 256)", "N"},
    {"sync", 0, 0, G_OPTION_ARG_NONE, &o.sync,
        "Print 'subscribed S N', 'warm' (after --warmup events) and 'done', "
          "and wait for a line on stdin after each, so a harness can sample "
          "the server", NULL},
    {"self-test", 0, 0, G_OPTION_ARG_NONE, &o.self_test,
        "Run against a built-in minimal fan-out server: the generator's own "
          "ceiling", NULL},
    {NULL}
  };
  g_autoptr (GError) error = NULL;
  Load load = {.errors = g_string_new (NULL) };
  Summary sum;
  GPid server = -1;
  gboolean ok = FALSE;

  o.common.timeout_s = 120;

  if (!probe_parse_options ("load", "Opens N sockets split evenly over the "
          "targets, subscribes each to one public channel, publishes events "
          "through the HTTP API stamped with their CLOCK_MONOTONIC publish "
          "time, and times each socket's receipt. Prints delivered/total, "
          "the split and publish-to-receipt p50/p95/p99.", entries,
          probe_common_entries (&o.common), &argc, &argv)
      || !load_validate (&o)) {
    g_string_free (load.errors, TRUE);
    probe_common_clear (&o.common);
    return 2;
  }
  if (o.self_test) {
    guint16 port;

    server = probe_selftest_server_start (&port, probe_now_ns () +
        (o.common.timeout_s + 10) * NS_PER_S, &error);
    g_free (o.targets);
    o.targets = g_strdup_printf ("127.0.0.1:%u", port);
    g_free (o.common.api_url);
    o.common.api_url = g_strdup_printf ("http://127.0.0.1:%u", port);
  }
  if (server > 0 && o.sync) {
    g_autofree char *line = g_strdup_printf ("self-test-server %d", server);

    load.options = &o;
    load.config.deadline_ns = probe_now_ns () + o.common.timeout_s * NS_PER_S;
    if (!sync_point (&load, line))
      g_set_error (&error, G_IO_ERROR, G_IO_ERROR_FAILED, "%s",
          load.errors->str);
  }
  if (error == NULL && !resolve_targets (o.targets, &load.config, &error)
      && error == NULL)
    g_set_error (&error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "no targets");
  if (error == NULL && o.common.api_url == NULL)
    o.common.api_url = g_strdup_printf ("http://%s:%u",
        load.config.targets[0].host, load.config.targets[0].port);
  if (error == NULL) {
    load_init (&load, &o);
    ok = load_run (&load);
    summarize (&load, &sum);
    ok = ok && sum.delivered == sum.total && load.relayed >= sum.relay_expected;
    if (o.common.json)
      print_json (&load, &sum);
    else
      print_text (&load, &sum);
  }
  if (server > 0) {
    kill (server, SIGTERM);
    waitpid (server, NULL, 0);
  }
  if (error != NULL)
    g_printerr ("legba-probe load: %s\n", error->message);
  else if (!ok)
    g_printerr ("legba-probe load: failed%s%s\n", load.errors->len ?
        ": " : "", load.errors->str);
  load_clear (&load);
  g_free (o.targets);
  g_free (o.channel);
  probe_common_clear (&o.common);
  return ok ? 0 : 1;
}
