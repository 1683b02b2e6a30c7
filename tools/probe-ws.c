/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The load generator's WebSocket client: RFC 6455 framing, the client
 * handshake and just enough of Pusher protocol 7 (connection_established,
 * subscribe, ping/pong, client events) for thousands of sockets per
 * process on one epoll loop. Frames are scanned, not parsed into trees:
 * the receipt time of each frame is taken when its bytes are read, and
 * the less work between two reads, the less the generator adds to the
 * latency it measures.
 */
#define _GNU_SOURCE
#include "probe.h"

#include <errno.h>
#include <legba/common/legba-auth.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAX_PAYLOAD (1024 * 1024)
#define MAX_HANDSHAKE 8192
#define CONTROL_ID G_MAXUINT64
#define GRACE_NS (5 * G_GINT64_CONSTANT (1000000000))

/* ---- RFC 6455 framing ---- */

gssize
probe_ws_frame_parse (guint8 * buf, gsize len, gsize max_payload,
    ProbeWsFrame * frame)
{
  gsize header = 2;
  guint64 payload_len;
  gboolean masked;

  if (len < 2)
    return 0;
  /* No extension is negotiated, so the RSV bits must be clear. */
  if (buf[0] & 0x70)
    return -1;
  frame->fin = (buf[0] & 0x80) != 0;
  frame->opcode = buf[0] & 0x0f;
  masked = (buf[1] & 0x80) != 0;
  payload_len = buf[1] & 0x7f;
  if (payload_len == 126) {
    if (len < 4)
      return 0;
    payload_len = ((guint64) buf[2] << 8) | buf[3];
    header = 4;
  } else if (payload_len == 127) {
    if (len < 10)
      return 0;
    payload_len = 0;
    for (guint i = 2; i < 10; i++)
      payload_len = (payload_len << 8) | buf[i];
    header = 10;
  }
  if (payload_len > max_payload)
    return -1;
  if (masked)
    header += 4;
  if (len < header + payload_len)
    return 0;
  frame->payload = buf + header;
  frame->len = payload_len;
  if (masked) {
    const guint8 *key = buf + header - 4;

    for (gsize i = 0; i < payload_len; i++)
      frame->payload[i] ^= key[i & 3];
  }
  return header + payload_len;
}

gsize
probe_ws_frame_write (guint8 * out, guint8 opcode, const void *payload,
    gsize len, gboolean mask)
{
  const guint8 *in = payload;
  guint8 mask_bit = mask ? 0x80 : 0;
  gsize n = 0;

  out[n++] = 0x80 | opcode;
  if (len < 126) {
    out[n++] = mask_bit | len;
  } else if (len <= 0xffff) {
    out[n++] = mask_bit | 126;
    out[n++] = len >> 8;
    out[n++] = len & 0xff;
  } else {
    out[n++] = mask_bit | 127;
    for (int shift = 56; shift >= 0; shift -= 8)
      out[n++] = ((guint64) len >> shift) & 0xff;
  }
  if (mask) {
    guint32 random = g_random_int ();
    guint8 key[4];

    memcpy (key, &random, 4);
    memcpy (out + n, key, 4);
    n += 4;
    for (gsize i = 0; i < len; i++)
      out[n + i] = in[i] ^ key[i & 3];
  } else if (len > 0) {
    memcpy (out + n, in, len);
  }
  return n + len;
}

char *
probe_ws_accept (const char *key)
{
  g_autoptr (GChecksum) sha1 = g_checksum_new (G_CHECKSUM_SHA1);
  guint8 digest[20];
  gsize digest_len = sizeof (digest);

  g_checksum_update (sha1, (const guchar *) key, -1);
  g_checksum_update (sha1,
      (const guchar *) "258EAFA5-E914-47DA-95CA-C5AB0DC85B11", -1);
  g_checksum_get_digest (sha1, digest, &digest_len);
  return g_base64_encode (digest, digest_len);
}

/* ---- scanning compact JSON ---- */

/* Start of the value of "member" (plain or \"escaped\"), past the colon
 * and an opening quote if any; NULL when absent. */
static const char *
scan_value (const char *text, gsize len, const char *member, gboolean * quoted)
{
  gsize member_len = strlen (member);
  const char *end = text + len;
  const char *p = text;

  while ((p = memmem (p, end - p, member, member_len)) != NULL) {
    const char *q = p + member_len;

    if (p > text && p[-1] == '"' && q < end && (*q == '"' || *q == '\\')) {
      while (q < end && (*q == '"' || *q == '\\'))
        q++;
      while (q < end && *q == ' ')
        q++;
      if (q < end && *q == ':') {
        q++;
        while (q < end && *q == ' ')
          q++;
        *quoted = FALSE;
        while (q < end && (*q == '"' || *q == '\\')) {
          *quoted = TRUE;
          q++;
        }
        return q;
      }
    }
    p = q;
  }
  return NULL;
}

const char *
probe_json_scan_string (const char *text, gsize len, const char *member,
    gsize * value_len)
{
  gboolean quoted;
  const char *value = scan_value (text, len, member, &quoted);
  const char *q;

  if (value == NULL || !quoted)
    return NULL;
  for (q = value; q < text + len && *q != '"' && *q != '\\'; q++);
  *value_len = q - value;
  return value;
}

gint64
probe_json_scan_int (const char *text, gsize len, const char *member)
{
  gboolean quoted;
  const char *value = scan_value (text, len, member, &quoted);
  gint64 n = 0;
  const char *q;

  if (value == NULL || quoted || value >= text + len
      || !g_ascii_isdigit (*value))
    return -1;
  for (q = value; q < text + len && g_ascii_isdigit (*q); q++)
    n = n * 10 + (*q - '0');
  return n;
}

/* ---- control channel ---- */

gboolean
probe_read_full (int fd, void *buf, gsize len)
{
  guint8 *p = buf;

  while (len > 0) {
    ssize_t r = read (fd, p, len);

    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return FALSE;
    p += r;
    len -= r;
  }
  return TRUE;
}

static gboolean
write_full (int fd, const void *buf, gsize len)
{
  const guint8 *p = buf;

  while (len > 0) {
    ssize_t r = write (fd, p, len);

    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return FALSE;
    p += r;
    len -= r;
  }
  return TRUE;
}

gboolean
probe_ctl_send (int fd, guint32 type, guint32 arg, const void *payload,
    gsize len)
{
  ProbeCtlHeader header = { type, arg, len };

  return write_full (fd, &header, sizeof (header))
      && (len == 0 || write_full (fd, payload, len));
}

/* ---- worker ---- */

typedef enum
{
  CONN_IDLE,
  CONN_CONNECTING,
  CONN_HANDSHAKE,
  CONN_ESTABLISHING,
  CONN_SUBSCRIBING,
  CONN_READY,
  CONN_DEAD,
} ConnState;

static const char *const state_names[] = {
  "not started", "connecting", "in the WebSocket handshake",
  "waiting for connection_established", "subscribing", "subscribed", "closed"
};

typedef enum
{
  ROLE_NONE,
  ROLE_INITIATOR,
  ROLE_RESPONDER,
} RelayRole;

typedef struct
{
  int fd;
  guint8 state;
  guint8 role;
  guint16 target;
  guint32 next_event;           /* first fan-out event not yet received */
  guint32 relay_round;
  gint64 relay_sent_ns;
  char key[28];                 /* Sec-WebSocket-Key */
  GByteArray *in;               /* bytes of an incomplete frame */
  GByteArray *out;              /* bytes the socket did not take yet */
  GByteArray *fragments;        /* a fragmented text message */
} Conn;

typedef struct
{
  const ProbeLoadConfig *config;
  guint index;
  guint first;
  int epoll;
  int control;
  Conn *conns;
  guint count;
  guint next_connect;
  guint in_flight;
  guint ready;
  guint failed;
  gboolean ready_sent;
  guint pairs;
  guint pairs_done;
  gboolean relaying;
  guint32 *event_counts;
  guint64 *event_max_ns;
  guint64 *connections;         /* per target */
  guint64 *ready_by_target;
  guint64 *delivered;
  guint64 duplicates;
  guint64 relayed;
  guint64 frames_in;
  guint64 ready_frames;         /* frames_in when READY was sent */
  gint64 ready_cpu_ns;          /* CPU time when READY was sent */
  GArray *latency_ns;
  GArray *relay_rtt_ns;
  GString *error;
  guint8 scratch[64 * 1024];
  guint8 frame[4096 + PROBE_WS_HEADER_MAX];
} Worker;

/* *INDENT-OFF* */
static void worker_error (Worker * w, Conn * c, const char *format, ...)
    G_GNUC_PRINTF (3, 4);
/* *INDENT-ON* */

static void
worker_error (Worker * w, Conn * c, const char *format, ...)
{
  va_list args;

  if (w->error->len > 0)
    return;
  g_string_append_printf (w->error, "socket %u (%s:%u): ",
      w->first + (guint) (c - w->conns),
      w->config->targets[c->target].host, w->config->targets[c->target].port);
  va_start (args, format);
  g_string_append_vprintf (w->error, format, args);
  va_end (args);
}

static void
conn_dead (Worker * w, Conn * c)
{
  if (c->state == CONN_DEAD)
    return;
  if (c->state != CONN_IDLE && c->state != CONN_READY) {
    w->in_flight--;
    w->failed++;
  } else if (c->state == CONN_READY) {
    w->ready_by_target[c->target]--;
  }
  if (c->fd >= 0) {
    epoll_ctl (w->epoll, EPOLL_CTL_DEL, c->fd, NULL);
    close (c->fd);
    c->fd = -1;
  }
  c->state = CONN_DEAD;
  g_clear_pointer (&c->in, g_byte_array_unref);
  g_clear_pointer (&c->out, g_byte_array_unref);
  g_clear_pointer (&c->fragments, g_byte_array_unref);
}

static void
conn_watch (Worker * w, Conn * c, guint32 events)
{
  struct epoll_event ev = {.events = events,.data.u64 = c - w->conns };

  if (epoll_ctl (w->epoll, EPOLL_CTL_MOD, c->fd, &ev) < 0) {
    worker_error (w, c, "epoll: %s", g_strerror (errno));
    conn_dead (w, c);
  }
}

static void
conn_write (Worker * w, Conn * c, const guint8 * data, gsize len)
{
  if (c->out == NULL || c->out->len == 0) {
    ssize_t r = send (c->fd, data, len, MSG_NOSIGNAL);

    if (r == (ssize_t) len)
      return;
    if (r < 0 && errno != EAGAIN && errno != EINTR) {
      worker_error (w, c, "send: %s", g_strerror (errno));
      conn_dead (w, c);
      return;
    }
    r = MAX (r, 0);
    data += r;
    len -= r;
    if (c->out == NULL)
      c->out = g_byte_array_new ();
    conn_watch (w, c, EPOLLIN | EPOLLOUT);
  }
  g_byte_array_append (c->out, data, len);
}

static void
conn_flush (Worker * w, Conn * c)
{
  ssize_t r;

  if (c->out == NULL || c->out->len == 0) {
    conn_watch (w, c, EPOLLIN);
    return;
  }
  r = send (c->fd, c->out->data, c->out->len, MSG_NOSIGNAL);
  if (r < 0 && errno != EAGAIN && errno != EINTR) {
    worker_error (w, c, "send: %s", g_strerror (errno));
    conn_dead (w, c);
    return;
  }
  if (r > 0)
    g_byte_array_remove_range (c->out, 0, r);
  if (c->out->len == 0)
    conn_watch (w, c, EPOLLIN);
}

static void
conn_send_frame (Worker * w, Conn * c, guint8 opcode, const void *payload,
    gsize len)
{
  guint8 *buf = w->frame;
  g_autofree guint8 *large = NULL;
  gsize n;

  if (len + PROBE_WS_HEADER_MAX > sizeof (w->frame))
    buf = large = g_malloc (len + PROBE_WS_HEADER_MAX);
  n = probe_ws_frame_write (buf, opcode, payload, len, TRUE);
  conn_write (w, c, buf, n);
}

static void
conn_send_text (Worker * w, Conn * c, const char *text)
{
  conn_send_frame (w, c, PROBE_WS_TEXT, text, strlen (text));
}

/* ---- connecting ---- */

static void
conn_start (Worker * w, Conn * c)
{
  const ProbeTarget *t = &w->config->targets[c->target];
  struct epoll_event ev = {.events = EPOLLOUT,.data.u64 = c - w->conns };
  int one = 1;

  w->connections[c->target]++;
  w->in_flight++;
  c->state = CONN_CONNECTING;
  c->fd = socket (t->addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK
      | SOCK_CLOEXEC, 0);
  if (c->fd < 0) {
    worker_error (w, c, "socket: %s", g_strerror (errno));
    conn_dead (w, c);
    return;
  }
  setsockopt (c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof (one));
  if (connect (c->fd, (struct sockaddr *) t->addr, t->addr_len) < 0
      && errno != EINPROGRESS) {
    worker_error (w, c, "connect: %s", g_strerror (errno));
    conn_dead (w, c);
    return;
  }
  if (epoll_ctl (w->epoll, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
    worker_error (w, c, "epoll: %s", g_strerror (errno));
    conn_dead (w, c);
  }
}

static void
conn_connected (Worker * w, Conn * c)
{
  const ProbeTarget *t = &w->config->targets[c->target];
  guint8 nonce[16];
  g_autofree char *key = NULL;
  g_autofree char *app_key = g_uri_escape_string (w->config->app_key, NULL,
      FALSE);
  g_autofree char *request = NULL;
  int err = 0;
  socklen_t err_len = sizeof (err);

  if (getsockopt (c->fd, SOL_SOCKET, SO_ERROR, &err, &err_len) < 0 || err) {
    worker_error (w, c, "connect: %s", g_strerror (err ? err : errno));
    conn_dead (w, c);
    return;
  }
  for (guint i = 0; i < sizeof (nonce); i += 4) {
    guint32 r = g_random_int ();

    memcpy (nonce + i, &r, 4);
  }
  key = g_base64_encode (nonce, sizeof (nonce));
  g_strlcpy (c->key, key, sizeof (c->key));
  /* RFC 6455 §4.1, to the Pusher protocol 7 endpoint. */
  request = g_strdup_printf ("GET /app/%s?protocol=7&client=%s&version=1.0 "
      "HTTP/1.1\r\nHost: %s:%u\r\nUpgrade: websocket\r\n"
      "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
      "Sec-WebSocket-Version: 13\r\n\r\n", app_key, PROBE_CLIENT_NAME,
      t->host, t->port, c->key);
  c->state = CONN_HANDSHAKE;
  conn_watch (w, c, EPOLLIN);
  if (c->state != CONN_DEAD)
    conn_write (w, c, (const guint8 *) request, strlen (request));
}

/* The 101 response: bytes consumed, 0 while incomplete, -1 if refused. */
static gssize
conn_handshake (Worker * w, Conn * c, const guint8 * buf, gsize len)
{
  const char *text = (const char *) buf;
  const char *end = memmem (text, len, "\r\n\r\n", 4);
  g_autofree char *head = NULL;
  g_autofree char *expected = NULL;
  g_autofree char *lower = NULL;
  const char *accept;

  if (end == NULL) {
    if (len > MAX_HANDSHAKE) {
      worker_error (w, c, "handshake response too long");
      return -1;
    }
    return 0;
  }
  head = g_strndup (text, end - text);
  if (!g_str_has_prefix (head, "HTTP/1.1 101")) {
    worker_error (w, c, "handshake refused: %.*s",
        (int) strcspn (head, "\r\n"), head);
    return -1;
  }
  lower = g_ascii_strdown (head, -1);
  accept = strstr (lower, "\r\nsec-websocket-accept:");
  expected = probe_ws_accept (c->key);
  if (accept != NULL) {
    accept = head + (accept - lower) + strlen ("\r\nsec-websocket-accept:");
    while (*accept == ' ')
      accept++;
  }
  if (accept == NULL || strncmp (accept, expected, strlen (expected)) != 0) {
    worker_error (w, c, "handshake: wrong Sec-WebSocket-Accept");
    return -1;
  }
  c->state = CONN_ESTABLISHING;
  return end + 4 - text;
}

/* ---- Pusher protocol 7 ---- */

static char *
relay_channel (Worker * w, Conn * c)
{
  return g_strdup_printf ("private-%s-%u-%u", w->config->channel, w->index,
      (guint) (c - w->conns) / 2);
}

static void
conn_subscribe (Worker * w, Conn * c, const char *text, gsize len)
{
  gsize id_len = 0;
  const char *id = probe_json_scan_string (text, len, "socket_id", &id_len);
  g_autofree char *socket_id = NULL;
  g_autofree char *message = NULL;

  if (id == NULL || id_len == 0) {
    worker_error (w, c, "connection_established without socket_id");
    conn_dead (w, c);
    return;
  }
  socket_id = g_strndup (id, id_len);
  if (c->role != ROLE_NONE) {
    g_autofree char *channel = relay_channel (w, c);
    g_autofree char *auth = legba_auth_channel_sign (w->config->app_key,
        w->config->app_secret, socket_id, channel, NULL);

    message = g_strdup_printf ("{\"event\":\"pusher:subscribe\",\"data\":"
        "{\"channel\":\"%s\",\"auth\":\"%s\"}}", channel, auth);
  } else {
    message = g_strdup_printf ("{\"event\":\"pusher:subscribe\",\"data\":"
        "{\"channel\":\"%s\"}}", w->config->channel);
  }
  c->state = CONN_SUBSCRIBING;
  conn_send_text (w, c, message);
}

static void
conn_ready (Worker * w, Conn * c)
{
  if (c->state != CONN_SUBSCRIBING)
    return;
  c->state = CONN_READY;
  w->in_flight--;
  w->ready++;
  w->ready_by_target[c->target]++;
}

static void
on_fanout (Worker * w, Conn * c, const char *text, gsize len, gint64 now)
{
  gint64 sent = probe_json_scan_int (text, len, "probe_t");
  gint64 i = probe_json_scan_int (text, len, "probe_i");
  gint64 latency;

  if (sent < 0 || i < 0 || i >= w->config->n_events)
    return;
  if (i < c->next_event) {
    w->duplicates++;
    return;
  }
  c->next_event = i + 1;
  latency = now - sent;
  if ((guint64) latency > w->event_max_ns[i])
    w->event_max_ns[i] = latency;
  if (i >= w->config->warmup) {
    w->delivered[c->target]++;
    g_array_append_val (w->latency_ns, latency);
  }
  if (++w->event_counts[i] == w->ready)
    probe_ctl_send (w->control, PROBE_CTL_EVENT_DONE, i, NULL, 0);
}

static void
relay_send (Worker * w, Conn * c, const char *event, guint round)
{
  g_autofree char *channel = relay_channel (w, c);
  g_autofree char *message = g_strdup_printf ("{\"event\":\"%s\","
      "\"channel\":\"%s\",\"data\":{\"n\":%u}}", event, channel, round);

  if (c->role == ROLE_INITIATOR)
    c->relay_sent_ns = probe_now_ns ();
  conn_send_text (w, c, message);
}

static void
on_relay (Worker * w, Conn * c, gboolean reply, const char *text, gsize len,
    gint64 now)
{
  gint64 round = probe_json_scan_int (text, len, "n");

  w->relayed++;
  if (!reply && c->role == ROLE_RESPONDER) {
    relay_send (w, c, "client-probe-relay-reply", MAX (round, 0));
    return;
  }
  if (!reply || c->role != ROLE_INITIATOR || round != c->relay_round)
    return;
  if (w->relaying) {
    gint64 rtt = now - c->relay_sent_ns;

    g_array_append_val (w->relay_rtt_ns, rtt);
  }
  if (++c->relay_round < w->config->relay_rounds)
    relay_send (w, c, "client-probe-relay", c->relay_round);
  else if (++w->pairs_done == w->pairs)
    probe_ctl_send (w->control, PROBE_CTL_RELAY_DONE, 0, NULL, 0);
}

#define EVENT_IS(ev, len, literal) \
  ((len) == sizeof (literal) - 1 && memcmp ((ev), literal, (len)) == 0)

static void
on_text (Worker * w, Conn * c, const char *text, gsize len, gint64 now)
{
  gsize ev_len = 0;
  const char *ev = probe_json_scan_string (text, len, "event", &ev_len);

  w->frames_in++;
  if (ev == NULL)
    return;
  if (ev_len == strlen (w->config->event)
      && memcmp (ev, w->config->event, ev_len) == 0)
    on_fanout (w, c, text, len, now);
  else if (EVENT_IS (ev, ev_len, "client-probe-relay"))
    on_relay (w, c, FALSE, text, len, now);
  else if (EVENT_IS (ev, ev_len, "client-probe-relay-reply"))
    on_relay (w, c, TRUE, text, len, now);
  else if (EVENT_IS (ev, ev_len, "pusher:ping"))
    conn_send_text (w, c, "{\"event\":\"pusher:pong\",\"data\":{}}");
  else if (EVENT_IS (ev, ev_len, "pusher:connection_established")
      && c->state == CONN_ESTABLISHING)
    conn_subscribe (w, c, text, len);
  else if (EVENT_IS (ev, ev_len, "pusher_internal:subscription_succeeded"))
    conn_ready (w, c);
  else if (EVENT_IS (ev, ev_len, "pusher:error")
      || EVENT_IS (ev, ev_len, "pusher:subscription_error")) {
    worker_error (w, c, "%.*s", (int) MIN (len, 160), text);
    if (c->state != CONN_READY)
      conn_dead (w, c);
  }
}

static void
on_frame (Worker * w, Conn * c, ProbeWsFrame * f, gint64 now)
{
  switch (f->opcode) {
    case PROBE_WS_TEXT:
      if (f->fin) {
        on_text (w, c, (const char *) f->payload, f->len, now);
      } else {
        g_clear_pointer (&c->fragments, g_byte_array_unref);
        c->fragments = g_byte_array_new ();
        g_byte_array_append (c->fragments, f->payload, f->len);
      }
      break;
    case PROBE_WS_CONTINUATION:
      if (c->fragments == NULL)
        break;
      g_byte_array_append (c->fragments, f->payload, f->len);
      if (f->fin) {
        g_autoptr (GByteArray) message = g_steal_pointer (&c->fragments);

        on_text (w, c, (const char *) message->data, message->len, now);
      }
      break;
    case PROBE_WS_PING:
      conn_send_frame (w, c, PROBE_WS_PONG, f->payload, f->len);
      break;
    case PROBE_WS_CLOSE:{
      guint code = f->len >= 2 ? (f->payload[0] << 8) | f->payload[1] : 1005;

      worker_error (w, c, "closed by the server (code %u %.*s)", code,
          (int) (f->len > 2 ? MIN (f->len - 2, 120) : 0), f->payload + 2);
      conn_send_frame (w, c, PROBE_WS_CLOSE, f->payload, MIN (f->len, 2));
      conn_dead (w, c);
      break;
    }
    default:
      break;
  }
}

/* Handles whole frames in buf; returns the bytes consumed. */
static gsize
conn_process (Worker * w, Conn * c, guint8 * buf, gsize len, gint64 now)
{
  gsize off = 0;

  if (c->state == CONN_HANDSHAKE) {
    gssize r = conn_handshake (w, c, buf, len);

    if (r <= 0) {
      if (r < 0)
        conn_dead (w, c);
      return 0;
    }
    off = r;
  }
  while (off < len && c->state != CONN_DEAD) {
    ProbeWsFrame frame;
    gssize r = probe_ws_frame_parse (buf + off, len - off, MAX_PAYLOAD,
        &frame);

    if (r == 0)
      break;
    if (r < 0) {
      worker_error (w, c, "invalid WebSocket frame from the server");
      conn_dead (w, c);
      break;
    }
    off += r;
    on_frame (w, c, &frame, now);
  }
  return off;
}

static void
conn_readable (Worker * w, Conn * c)
{
  ssize_t r = recv (c->fd, w->scratch, sizeof (w->scratch), 0);
  gint64 now = probe_now_ns ();
  gsize used;

  if (r < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (r <= 0) {
    if (r == 0)
      worker_error (w, c, "the server closed the connection while %s",
          state_names[c->state]);
    else
      worker_error (w, c, "recv: %s", g_strerror (errno));
    conn_dead (w, c);
    return;
  }
  if (c->in != NULL && c->in->len > 0) {
    g_byte_array_append (c->in, w->scratch, r);
    used = conn_process (w, c, c->in->data, c->in->len, now);
    if (c->in != NULL)
      g_byte_array_remove_range (c->in, 0, used);
    return;
  }
  used = conn_process (w, c, w->scratch, r, now);
  if (used < (gsize) r && c->state != CONN_DEAD) {
    if (c->in == NULL)
      c->in = g_byte_array_new ();
    g_byte_array_append (c->in, w->scratch + used, r - used);
  }
}

/* ---- the worker's loop ---- */

static gint64
cpu_time_ns (void)
{
  struct rusage usage;

  getrusage (RUSAGE_SELF, &usage);
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) *
      G_GINT64_CONSTANT (1000000000) + (usage.ru_utime.tv_usec +
      usage.ru_stime.tv_usec) * G_GINT64_CONSTANT (1000);
}

static void
worker_report (Worker * w)
{
  ProbeWorkerResult result = { 0 };
  const ProbeLoadConfig *config = w->config;
  GByteArray *out = g_byte_array_new ();

  result.n_targets = config->n_targets;
  result.n_events = config->n_events;
  result.duplicates = w->duplicates;
  result.relayed = w->relayed;
  result.frames_in = w->frames_in;
  result.n_latencies = w->latency_ns->len;
  result.n_relay_rtts = w->relay_rtt_ns->len;
  result.error_len = w->error->len;
  result.work_cpu_ns = cpu_time_ns () - w->ready_cpu_ns;
  result.work_frames = w->frames_in - w->ready_frames;
  g_byte_array_append (out, (guint8 *) & result, sizeof (result));
  g_byte_array_append (out, (guint8 *) w->connections,
      config->n_targets * sizeof (guint64));
  g_byte_array_append (out, (guint8 *) w->ready_by_target,
      config->n_targets * sizeof (guint64));
  g_byte_array_append (out, (guint8 *) w->delivered,
      config->n_targets * sizeof (guint64));
  g_byte_array_append (out, (guint8 *) w->event_max_ns,
      config->n_events * sizeof (guint64));
  g_byte_array_append (out, (guint8 *) w->latency_ns->data,
      w->latency_ns->len * sizeof (gint64));
  g_byte_array_append (out, (guint8 *) w->relay_rtt_ns->data,
      w->relay_rtt_ns->len * sizeof (gint64));
  g_byte_array_append (out, (guint8 *) w->error->str, w->error->len);
  probe_ctl_send (w->control, PROBE_CTL_RESULT, 0, out->data, out->len);
  g_byte_array_unref (out);
}

static void
worker_start_relay (Worker * w)
{
  w->relaying = TRUE;
  if (w->pairs == 0) {
    probe_ctl_send (w->control, PROBE_CTL_RELAY_DONE, 0, NULL, 0);
    return;
  }
  for (guint i = 0; i + 1 < w->count; i += 2) {
    Conn *c = &w->conns[i];

    if (c->state == CONN_READY)
      relay_send (w, c, "client-probe-relay", 0);
  }
}

/* FALSE when the parent is gone or asked to finish. */
static gboolean
worker_control (Worker * w)
{
  ProbeCtlHeader header;

  if (!probe_read_full (w->control, &header, sizeof (header)))
    return FALSE;
  switch (header.type) {
    case PROBE_CTL_RELAY:
      worker_start_relay (w);
      return TRUE;
    case PROBE_CTL_FINISH:
      worker_report (w);
      return FALSE;
    default:
      return TRUE;
  }
}

static void
worker_timeout (Worker * w)
{
  for (guint i = 0; i < w->count; i++) {
    Conn *c = &w->conns[i];

    if (c->state != CONN_READY && c->state != CONN_DEAD) {
      worker_error (w, c, "timed out while %s", state_names[c->state]);
      conn_dead (w, c);
    }
  }
}

static void
worker_step (Worker * w)
{
  while (w->in_flight < w->config->connect_window && w->next_connect < w->count)
    conn_start (w, &w->conns[w->next_connect++]);
  if (!w->ready_sent && w->ready + w->failed == w->count) {
    ProbeWorkerReady ready = { w->ready, w->failed, "" };

    g_strlcpy (ready.error, w->error->str, sizeof (ready.error));
    w->ready_sent = TRUE;
    w->ready_frames = w->frames_in;
    w->ready_cpu_ns = cpu_time_ns ();
    probe_ctl_send (w->control, PROBE_CTL_READY, 0, &ready, sizeof (ready));
  }
}

static void
worker_init (Worker * w, const ProbeLoadConfig * config, guint index,
    guint first, guint count, int control)
{
  struct epoll_event ev = {.events = EPOLLIN,.data.u64 = CONTROL_ID };

  w->config = config;
  w->index = index;
  w->first = first;
  w->count = count;
  w->control = control;
  w->epoll = epoll_create1 (EPOLL_CLOEXEC);
  epoll_ctl (w->epoll, EPOLL_CTL_ADD, control, &ev);
  w->conns = g_new0 (Conn, count);
  for (guint i = 0; i < count; i++) {
    w->conns[i].fd = -1;
    w->conns[i].target = (first + i) % config->n_targets;
    if (config->relay_rounds > 0 && (i | 1) < count)
      w->conns[i].role = (i & 1) ? ROLE_RESPONDER : ROLE_INITIATOR;
  }
  w->pairs = config->relay_rounds > 0 ? count / 2 : 0;
  w->event_counts = g_new0 (guint32, MAX (config->n_events, 1));
  w->event_max_ns = g_new0 (guint64, MAX (config->n_events, 1));
  w->connections = g_new0 (guint64, config->n_targets);
  w->ready_by_target = g_new0 (guint64, config->n_targets);
  w->delivered = g_new0 (guint64, config->n_targets);
  w->latency_ns = g_array_sized_new (FALSE, FALSE, sizeof (gint64),
      (gsize) count * MAX (config->n_events, 1));
  w->relay_rtt_ns = g_array_new (FALSE, FALSE, sizeof (gint64));
  w->error = g_string_new (NULL);
}

void
probe_worker_run (const ProbeLoadConfig * config, guint worker, guint first,
    guint count, int control)
{
  Worker *w = g_new0 (Worker, 1);
  struct epoll_event events[256];

  worker_init (w, config, worker, first, count, control);
  for (;;) {
    gint64 now, left;
    int n, timeout_ms;

    worker_step (w);
    now = probe_now_ns ();
    left = config->deadline_ns - now;
    if (left <= 0 && !w->ready_sent) {
      worker_timeout (w);
      continue;
    }
    /* The parent finishes by the deadline; past a grace period it is
     * stuck or gone, and the worker leaves on its own. */
    if (left <= -GRACE_NS)
      _exit (1);
    timeout_ms = left > 0 ? (int) MIN (left / 1000000 + 1, 1000) : 100;
    n = epoll_wait (w->epoll, events, G_N_ELEMENTS (events), timeout_ms);
    if (n < 0 && errno != EINTR)
      _exit (1);
    for (int i = 0; i < n; i++) {
      Conn *c;

      if (events[i].data.u64 == CONTROL_ID) {
        if (!worker_control (w))
          _exit (0);
        continue;
      }
      c = &w->conns[events[i].data.u64];
      if (c->state == CONN_DEAD)
        continue;
      if (c->state == CONN_CONNECTING)
        conn_connected (w, c);
      else if (events[i].events & EPOLLOUT)
        conn_flush (w, c);
      if (c->state != CONN_DEAD && c->state != CONN_CONNECTING
          && (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        conn_readable (w, c);
    }
  }
}
