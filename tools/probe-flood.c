/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-probe flood: a well-behaved client's pusher:ping round trip,
 * quiet and then while hostile clients flood the server with WebSocket
 * pings and never read (docs/server.md, Limits and abuse). Each flooder
 * is a thread with a raw TCP socket of its own: it upgrades, then sends
 * pings (125-byte payloads, masked) as fast as the socket takes them,
 * and connects again when the server closes it (an attacker that comes
 * back), until the timed round trips are done. The flooders run at a
 * lower priority (nice 10): an attacker's CPU is not the server's, and on
 * a small machine a flooder at full speed would otherwise take a core
 * from the server and the timed client.
 */
#include "probe.h"

#include <errno.h>
#include <netdb.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#define NS_PER_S G_GINT64_CONSTANT (1000000000)
#define NS_PER_MS 1e6

/* Pings a flooder writes in one buffer. */
#define FLOOD_BATCH 512
#define PING_PAYLOAD 125

/* Bytes the flooders send before the timed round trips start. */
#define FLOOD_WARMUP_BYTES (4 * 1024 * 1024)

typedef struct
{
  char *host;
  char *port;
  char *request;                /* the upgrade request */
  GByteArray *pings;            /* FLOOD_BATCH ping frames */
  gint stop;
  gsize bytes;                  /* sent, all flooders */
  gint connections;             /* upgrades done, all flooders */
  GPtrArray *threads;
} Flood;

static int
flood_connect (Flood * flood)
{
  struct addrinfo hints = { 0, }, *res = NULL;
  struct timeval timeout = { 1, 0 };
  char head[4096];
  gsize have = 0;
  int fd;

  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo (flood->host, flood->port, &hints, &res) != 0)
    return -1;
  fd = socket (res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect (fd, res->ai_addr, res->ai_addrlen) != 0) {
    if (fd >= 0)
      close (fd);
    freeaddrinfo (res);
    return -1;
  }
  freeaddrinfo (res);
  /* Sends and reads wake up every second to see whether to stop. */
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  if (send (fd, flood->request, strlen (flood->request), MSG_NOSIGNAL) < 0)
    goto fail;
  /* The response's headers, up to the blank line; what follows
   * (connection_established) is never read. */
  while (have < sizeof head - 1) {
    gssize n = recv (fd, head + have, 1, 0);

    if (n <= 0)
      goto fail;
    have += n;
    head[have] = '\0';
    if (g_str_has_suffix (head, "\r\n\r\n")) {
      if (strstr (head, " 101 ") == NULL)
        break;
      return fd;
    }
  }
fail:
  close (fd);
  return -1;
}

static gpointer
flood_thread (gpointer user_data)
{
  Flood *flood = user_data;

  /* Linux: the nice value of this thread alone. */
  setpriority (PRIO_PROCESS, (id_t) syscall (SYS_gettid), 10);
  while (!g_atomic_int_get (&flood->stop)) {
    int fd = flood_connect (flood);

    if (fd < 0) {
      g_usleep (10000);
      continue;
    }
    g_atomic_int_inc (&flood->connections);
    while (!g_atomic_int_get (&flood->stop)) {
      gssize n = send (fd, flood->pings->data, flood->pings->len,
          MSG_NOSIGNAL);

      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        continue;
      if (n <= 0)
        break;
      g_atomic_pointer_add (&flood->bytes, n);
    }
    close (fd);
  }
  return NULL;
}

/* RFC 6455 §5.2: FLOOD_BATCH masked pings. */
static GByteArray *
flood_pings (void)
{
  static const guint8 mask[4] = { 0x1b, 0x5e, 0xa7, 0x90 };
  GByteArray *pings = g_byte_array_new ();

  for (guint i = 0; i < FLOOD_BATCH; i++) {
    guint8 frame[6 + PING_PAYLOAD] = { 0x89, 0x80 | PING_PAYLOAD, };

    memcpy (frame + 2, mask, sizeof mask);
    for (guint j = 0; j < PING_PAYLOAD; j++)
      frame[6 + j] = ((i + j) & 0xff) ^ mask[j % 4];
    g_byte_array_append (pings, frame, sizeof frame);
  }
  return pings;
}

static gboolean
flood_init (Flood * flood, const char *url, const char *app_key,
    GError ** error)
{
  g_autoptr (GUri) uri = g_uri_parse (url, G_URI_FLAGS_NONE, error);

  if (uri == NULL)
    return FALSE;
  if (g_strcmp0 (g_uri_get_scheme (uri), "ws") != 0) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
        "the flooders speak plain ws:// only");
    return FALSE;
  }
  flood->host = g_strdup (g_uri_get_host (uri));
  flood->port = g_strdup_printf ("%d", g_uri_get_port (uri) > 0 ?
      g_uri_get_port (uri) : 80);
  flood->request = g_strdup_printf ("GET /app/%s?protocol=7 HTTP/1.1\r\n"
      "Host: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
      "Sec-WebSocket-Version: 13\r\n\r\n", app_key, flood->host);
  flood->pings = flood_pings ();
  flood->threads = g_ptr_array_new ();
  return TRUE;
}

static void
flood_stop (Flood * flood)
{
  g_atomic_int_set (&flood->stop, 1);
  for (guint i = 0; i < flood->threads->len; i++)
    g_thread_join (flood->threads->pdata[i]);
  g_ptr_array_set_size (flood->threads, 0);
}

static void
flood_clear (Flood * flood)
{
  if (flood->threads != NULL) {
    flood_stop (flood);
    g_ptr_array_unref (flood->threads);
  }
  g_clear_pointer (&flood->pings, g_byte_array_unref);
  g_free (flood->host);
  g_free (flood->port);
  g_free (flood->request);
}

/* At least count round trips, for at least min_s seconds: appended to
 * out, in ms. */
static gboolean
flood_ping (ProbeSocket * socket, guint count, double min_s, GArray * out,
    gint64 deadline, GError ** error)
{
  gint64 until = probe_now_ns () + (gint64) (min_s * NS_PER_S);

  while (out->len < count || probe_now_ns () < until) {
    g_autoptr (ProbeMessage) pong = NULL;
    gint64 start = probe_now_ns ();
    double ms;

    probe_socket_send (socket, "pusher:ping", NULL, NULL);
    pong = probe_socket_wait (socket, "pusher:pong", NULL, deadline, error);
    if (pong == NULL)
      return FALSE;
    ms = (pong->received_ns - start) / NS_PER_MS;
    g_array_append_val (out, ms);
  }
  return TRUE;
}

static void
flood_print (gboolean json, guint flooders, GArray * quiet, GArray * flooded,
    double seconds, gsize bytes, gint connections)
{
  ProbeStats q, f;
  double pings = bytes / (double) (6 + PING_PAYLOAD);

  probe_stats_compute ((double *) quiet->data, quiet->len, &q);
  probe_stats_compute ((double *) flooded->data, flooded->len, &f);
  if (json) {
    g_autoptr (GString) out = g_string_new (NULL);

    g_string_append_printf (out, "{\"flooders\":%u,\"quiet_ms\":", flooders);
    probe_stats_to_json (&q, out);
    g_string_append (out, ",\"flood_ms\":");
    probe_stats_to_json (&f, out);
    g_string_append_printf (out, ",\"flood_s\":%.3f,\"flood_bytes\":%"
        G_GSIZE_FORMAT ",\"flood_pings_per_s\":%.0f,"
        "\"flooder_connections\":%d}", seconds, bytes, pings / seconds,
        connections);
    g_print ("%s\n", out->str);
    return;
  }
  g_print ("quiet  pusher:ping -> pong  n=%" G_GSIZE_FORMAT "  p50 %.3f ms  "
      "p95 %.3f ms  p99 %.3f ms  max %.3f ms\n", q.n, q.p50, q.p95, q.p99,
      q.max);
  g_print ("flood  pusher:ping -> pong  n=%" G_GSIZE_FORMAT "  p50 %.3f ms  "
      "p95 %.3f ms  p99 %.3f ms  max %.3f ms\n", f.n, f.p50, f.p95, f.p99,
      f.max);
  g_print ("flood  %u flooder(s): %.0f pings/s (%.1f MB/s) for %.1f s, "
      "%d connections\n", flooders, pings / seconds, bytes / seconds / 1e6,
      seconds, connections);
}

int
probe_command_flood (int argc, char **argv)
{
  ProbeCommon common = { 0 };
  int count = 500, flooders = 1;
  double seconds = 2;
  GOptionEntry entries[] = {
    {"count", 'n', 0, G_OPTION_ARG_INT, &count,
        "Timed round trips at least, quiet and during the flood "
          "(default 500)", "N"},
    {"seconds", 0, 0, G_OPTION_ARG_DOUBLE, &seconds,
        "Seconds of round trips at least, each phase (default 2)", "S"},
    {"flooders", 0, 0, G_OPTION_ARG_INT, &flooders,
        "Clients flooding pings (default 1)", "N"},
    {NULL}
  };
  g_autoptr (GError) error = NULL;
  g_autoptr (ProbeSocket) socket = NULL;
  g_autoptr (GArray) quiet = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr (GArray) flooded = g_array_new (FALSE, FALSE, sizeof (double));
  Flood flood = { 0, };
  gint64 deadline, start;
  gsize bytes = 0;
  int status = 1;

  if (!probe_parse_options ("flood", "A client's pusher:ping round trips, "
          "quiet and then while other clients send WebSocket pings as fast "
          "as they can and never read (connecting again when closed). "
          "Prints p50/p95/p99 in ms of both, and the flood's rate.",
          entries, probe_common_entries (&common), &argc, &argv)
      || !probe_common_validate (&common, TRUE)) {
    probe_common_clear (&common);
    return 2;
  }
  if (count <= 0 || flooders <= 0 || seconds < 0) {
    g_printerr ("legba-probe flood: --count and --flooders must be "
        "positive, --seconds not negative\n");
    probe_common_clear (&common);
    return 2;
  }
  deadline = probe_now_ns () + common.timeout_s * NS_PER_S;

  if (!flood_init (&flood, common.url, common.app_key, &error) ||
      (socket = probe_socket_connect (common.url, common.app_key, deadline,
              &error)) == NULL ||
      !flood_ping (socket, count, seconds, quiet, deadline, &error))
    goto out;

  for (int i = 0; i < flooders; i++)
    g_ptr_array_add (flood.threads, g_thread_new ("flooder", flood_thread,
            &flood));
  while (g_atomic_pointer_get (&flood.bytes) < FLOOD_WARMUP_BYTES &&
      probe_now_ns () < deadline) {
    probe_socket_drain (socket);
    g_usleep (1000);
  }
  start = probe_now_ns ();
  bytes = g_atomic_pointer_get (&flood.bytes);
  if (!flood_ping (socket, count, seconds, flooded, deadline, &error))
    goto out;
  bytes = g_atomic_pointer_get (&flood.bytes) - bytes;
  flood_print (common.json, flooders, quiet, flooded,
      (probe_now_ns () - start) / (double) NS_PER_S, bytes,
      g_atomic_int_get (&flood.connections));
  status = 0;

out:
  flood_clear (&flood);
  if (error != NULL)
    g_printerr ("legba-probe flood: %s\n", error->message);
  if (socket != NULL)
    probe_socket_close (socket, deadline);
  probe_common_clear (&common);
  return status;
}
