/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * `legba-probe load --self-test`: the generator against a fan-out server
 * that does almost nothing. It speaks just enough Pusher protocol 7 for
 * the load path (handshake, connection_established, subscribe, ping,
 * client-event relay, POST /apps/ID/events without checking signatures)
 * and writes one pre-encoded frame per socket per event. What the
 * generator measures against it is the generator's own ceiling: a real
 * server cannot look faster than this through this generator.
 */
#define _GNU_SOURCE
#include "probe.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct
{
  int fd;
  gboolean websocket;
  gboolean closing;             /* close once the output is written */
  gboolean watching_out;        /* EPOLLOUT is in its epoll events */
  GByteArray *in;
  GByteArray *out;
  GPtrArray *channels;          /* names of the channels it joined */
} SConn;

typedef struct
{
  int epoll;
  int listener;
  SConn **by_fd;
  guint max_fd;
  GHashTable *channels;         /* name -> GPtrArray of SConn */
  guint64 next_id;
  gint64 deadline_ns;
} SServer;

static void
sconn_watch_out (SServer * s, SConn * c, gboolean out)
{
  struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0),
    .data.fd = c->fd
  };

  if (c->watching_out == out)
    return;
  c->watching_out = out;
  epoll_ctl (s->epoll, EPOLL_CTL_MOD, c->fd, &ev);
}

static void
sconn_close (SServer * s, SConn * c)
{
  for (guint i = 0; c->channels != NULL && i < c->channels->len; i++) {
    GPtrArray *members = g_hash_table_lookup (s->channels,
        g_ptr_array_index (c->channels, i));

    if (members != NULL)
      g_ptr_array_remove_fast (members, c);
  }
  epoll_ctl (s->epoll, EPOLL_CTL_DEL, c->fd, NULL);
  close (c->fd);
  s->by_fd[c->fd] = NULL;
  g_clear_pointer (&c->channels, g_ptr_array_unref);
  g_byte_array_unref (c->in);
  g_byte_array_unref (c->out);
  g_free (c);
}

/* FALSE when c was closed. */
static gboolean
sconn_flush (SServer * s, SConn * c)
{
  if (c->out->len > 0) {
    ssize_t r = send (c->fd, c->out->data, c->out->len, MSG_NOSIGNAL);

    if (r < 0 && errno != EAGAIN && errno != EINTR) {
      sconn_close (s, c);
      return FALSE;
    }
    if (r > 0)
      g_byte_array_remove_range (c->out, 0, r);
  }
  if (c->out->len == 0 && c->closing) {
    sconn_close (s, c);
    return FALSE;
  }
  sconn_watch_out (s, c, c->out->len > 0);
  return TRUE;
}

static void
sconn_write (SServer * s, SConn * c, const void *data, gsize len)
{
  gboolean idle = c->out->len == 0;

  g_byte_array_append (c->out, data, len);
  if (idle)
    sconn_flush (s, c);
}

static void
sconn_text (SServer * s, SConn * c, const char *text, gsize len)
{
  g_autofree guint8 *frame = g_malloc (len + PROBE_WS_HEADER_MAX);
  gsize n = probe_ws_frame_write (frame, PROBE_WS_TEXT, text, len, FALSE);

  sconn_write (s, c, frame, n);
}

static GPtrArray *
channel_members (SServer * s, const char *name)
{
  GPtrArray *members = g_hash_table_lookup (s->channels, name);

  if (members == NULL) {
    members = g_ptr_array_new ();
    g_hash_table_insert (s->channels, g_strdup (name), members);
  }
  return members;
}

/* Writes one frame, encoded once, to every member but `except`. */
static void
broadcast (SServer * s, const char *channel, const char *text, gsize len,
    SConn * except)
{
  GPtrArray *members = g_hash_table_lookup (s->channels, channel);
  g_autofree guint8 *frame = NULL;
  g_autoptr (GPtrArray) targets = NULL;
  gsize n;

  if (members == NULL)
    return;
  frame = g_malloc (len + PROBE_WS_HEADER_MAX);
  n = probe_ws_frame_write (frame, PROBE_WS_TEXT, text, len, FALSE);
  /* A write may close a member, which edits the array. */
  targets = g_ptr_array_copy (members, NULL, NULL);
  for (guint i = 0; i < targets->len; i++) {
    SConn *c = g_ptr_array_index (targets, i);

    if (c != except && s->by_fd[c->fd] == c)
      sconn_write (s, c, frame, n);
  }
}

static void
on_ws_text (SServer * s, SConn * c, const char *text, gsize len)
{
  gsize ev_len = 0, ch_len = 0;
  const char *ev = probe_json_scan_string (text, len, "event", &ev_len);
  const char *ch = probe_json_scan_string (text, len, "channel", &ch_len);
  g_autofree char *event = ev ? g_strndup (ev, ev_len) : NULL;
  g_autofree char *channel = ch ? g_strndup (ch, ch_len) : NULL;

  if (event == NULL)
    return;
  if (g_str_equal (event, "pusher:ping")) {
    const char *pong = "{\"event\":\"pusher:pong\",\"data\":\"{}\"}";

    sconn_text (s, c, pong, strlen (pong));
  } else if (g_str_equal (event, "pusher:subscribe") && channel != NULL) {
    g_autofree char *ok = g_strdup_printf ("{\"event\":"
        "\"pusher_internal:subscription_succeeded\",\"channel\":\"%s\","
        "\"data\":\"{}\"}", channel);

    g_ptr_array_add (channel_members (s, channel), c);
    if (c->channels == NULL)
      c->channels = g_ptr_array_new_with_free_func (g_free);
    g_ptr_array_add (c->channels, g_strdup (channel));
    sconn_text (s, c, ok, strlen (ok));
  } else if (g_str_has_prefix (event, "client-") && channel != NULL) {
    broadcast (s, channel, text, len, c);
  }
}

/* FALSE when c was closed. */
static gboolean
on_ws_bytes (SServer * s, SConn * c)
{
  int fd = c->fd;
  gsize off = 0;

  while (off < c->in->len) {
    ProbeWsFrame f;
    gssize r = probe_ws_frame_parse (c->in->data + off, c->in->len - off,
        1024 * 1024, &f);

    if (r == 0)
      break;
    if (r < 0 || f.opcode == PROBE_WS_CLOSE) {
      sconn_close (s, c);
      return FALSE;
    }
    off += r;
    if (f.opcode == PROBE_WS_TEXT && f.fin)
      on_ws_text (s, c, (const char *) f.payload, f.len);
    if (s->by_fd[fd] != c)
      return FALSE;
  }
  g_byte_array_remove_range (c->in, 0, off);
  return TRUE;
}

static void
handshake (SServer * s, SConn * c, const char *head)
{
  g_autofree char *lower = g_ascii_strdown (head, -1);
  const char *key = strstr (lower, "\r\nsec-websocket-key:");
  g_autofree char *value = NULL;
  g_autofree char *accept = NULL;
  g_autofree char *response = NULL;
  g_autofree char *established = NULL;
  int fd;

  if (key == NULL) {
    c->closing = TRUE;
    sconn_write (s, c, "HTTP/1.1 400 Bad Request\r\n\r\n", 28);
    return;
  }
  key = head + (key - lower) + strlen ("\r\nsec-websocket-key:");
  value = g_strndup (key, strcspn (key, "\r\n"));
  accept = probe_ws_accept (g_strstrip (value));
  response = g_strdup_printf ("HTTP/1.1 101 Switching Protocols\r\n"
      "Upgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Accept: %s\r\n\r\n", accept);
  established = g_strdup_printf ("{\"event\":"
      "\"pusher:connection_established\",\"data\":\"{\\\"socket_id\\\":"
      "\\\"%u.%" G_GUINT64_FORMAT "\\\",\\\"activity_timeout\\\":120}\"}",
      (guint) getpid (), ++s->next_id);
  c->websocket = TRUE;
  fd = c->fd;
  sconn_write (s, c, response, strlen (response));
  if (s->by_fd[fd] == c)
    sconn_text (s, c, established, strlen (established));
}

/* POST /apps/ID/events: no signature check, the generator signs anyway. */
static void
publish (SServer * s, SConn * c, const char *body, gsize len)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  const char *ok = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
      "Content-Length: 2\r\nConnection: close\r\n\r\n{}";
  JsonObject *request;
  JsonArray *channels;
  const char *name, *data;

  if (!json_parser_load_from_data (parser, body, len, NULL)
      || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))) {
    sconn_write (s, c, "HTTP/1.1 400 Bad Request\r\n\r\n", 28);
    return;
  }
  request = json_node_get_object (json_parser_get_root (parser));
  name = json_object_get_string_member_with_default (request, "name", "");
  data = json_object_get_string_member_with_default (request, "data", "");
  channels = probe_json_array_member (request, "channels");
  for (guint i = 0; channels != NULL && i < json_array_get_length (channels);
      i++) {
    const char *channel = json_node_get_string (json_array_get_element
        (channels, i));
    g_autoptr (JsonBuilder) b = json_builder_new ();
    g_autoptr (JsonNode) root = NULL;
    g_autofree char *frame = NULL;

    if (channel == NULL)
      continue;
    json_builder_begin_object (b);
    json_builder_set_member_name (b, "event");
    json_builder_add_string_value (b, name);
    json_builder_set_member_name (b, "channel");
    json_builder_add_string_value (b, channel);
    json_builder_set_member_name (b, "data");
    json_builder_add_string_value (b, data);
    json_builder_end_object (b);
    root = json_builder_get_root (b);
    frame = json_to_string (root, FALSE);
    broadcast (s, channel, frame, strlen (frame), NULL);
  }
  sconn_write (s, c, ok, strlen (ok));
}

/* An HTTP request: the WebSocket handshake or a publish. */
static void
on_http_bytes (SServer * s, SConn * c)
{
  const char *text = (const char *) c->in->data;
  const char *end = memmem (text, c->in->len, "\r\n\r\n", 4);
  const char *not_found = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
      "Connection: close\r\n\r\n";
  g_autofree char *head = NULL;
  g_autofree char *lower = NULL;
  const char *length;
  gsize header_len, body_len = 0;
  int fd = c->fd;

  if (end == NULL) {
    if (c->in->len > 16384)
      sconn_close (s, c);
    return;
  }
  header_len = end + 4 - text;
  head = g_strndup (text, end - text);
  if (g_str_has_prefix (head, "GET ")) {
    g_byte_array_remove_range (c->in, 0, header_len);
    handshake (s, c, head);
    if (s->by_fd[fd] == c && !c->closing)
      on_ws_bytes (s, c);
    return;
  }
  lower = g_ascii_strdown (head, -1);
  length = strstr (lower, "\r\ncontent-length:");
  if (length != NULL)
    body_len = strtoul (length + strlen ("\r\ncontent-length:"), NULL, 10);
  if (c->in->len < header_len + body_len)
    return;
  c->closing = TRUE;
  if (g_str_has_prefix (head, "POST ") && strstr (head, "/events") != NULL)
    publish (s, c, text + header_len, body_len);
  else
    sconn_write (s, c, not_found, strlen (not_found));
}

static void
sconn_readable (SServer * s, SConn * c)
{
  guint8 buf[65536];
  ssize_t r = recv (c->fd, buf, sizeof (buf), 0);

  if (r < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (r <= 0) {
    sconn_close (s, c);
    return;
  }
  if (c->closing)
    return;
  g_byte_array_append (c->in, buf, r);
  if (c->websocket)
    on_ws_bytes (s, c);
  else
    on_http_bytes (s, c);
}

static void
server_accept (SServer * s)
{
  for (;;) {
    int fd = accept4 (s->listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN,.data.fd = fd };
    int one = 1;
    SConn *c;

    if (fd < 0)
      return;
    if ((guint) fd >= s->max_fd) {
      close (fd);
      continue;
    }
    /* Small frames go out at once, as a real-time server sends them. */
    setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof (one));
    c = g_new0 (SConn, 1);
    c->fd = fd;
    c->in = g_byte_array_new ();
    c->out = g_byte_array_new ();
    s->by_fd[fd] = c;
    epoll_ctl (s->epoll, EPOLL_CTL_ADD, fd, &ev);
  }
}

G_GNUC_NORETURN static void
server_run (int listener, gint64 deadline_ns)
{
  SServer s = { 0 };
  struct epoll_event ev = {.events = EPOLLIN,.data.fd = listener };
  struct epoll_event events[256];
  struct rlimit limit;

  getrlimit (RLIMIT_NOFILE, &limit);
  s.max_fd = MIN (limit.rlim_cur, 1 << 20);
  s.by_fd = g_new0 (SConn *, s.max_fd);
  s.listener = listener;
  s.deadline_ns = deadline_ns;
  s.channels = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      (GDestroyNotify) g_ptr_array_unref);
  s.epoll = epoll_create1 (EPOLL_CLOEXEC);
  epoll_ctl (s.epoll, EPOLL_CTL_ADD, listener, &ev);
  while (probe_now_ns () < deadline_ns) {
    int n = epoll_wait (s.epoll, events, G_N_ELEMENTS (events), 500);

    for (int i = 0; i < n; i++) {
      SConn *c;

      if (events[i].data.fd == listener) {
        server_accept (&s);
        continue;
      }
      c = s.by_fd[events[i].data.fd];
      if (c == NULL)
        continue;
      if ((events[i].events & EPOLLOUT) && !sconn_flush (&s, c))
        continue;
      if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
        sconn_readable (&s, c);
    }
  }
  _exit (0);
}

GPid
probe_selftest_server_start (guint16 * port, gint64 deadline_ns,
    GError ** error)
{
  struct sockaddr_in addr = {.sin_family = AF_INET };
  socklen_t len = sizeof (addr);
  int listener;
  GPid pid;

  addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  listener = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener < 0 || bind (listener, (struct sockaddr *) &addr, len) < 0
      || listen (listener, 4096) < 0
      || getsockname (listener, (struct sockaddr *) &addr, &len) < 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno),
        "self-test server: %s", g_strerror (errno));
    if (listener >= 0)
      close (listener);
    return -1;
  }
  *port = ntohs (addr.sin_port);
  pid = fork ();
  if (pid < 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno),
        "self-test server: fork: %s", g_strerror (errno));
    close (listener);
    return -1;
  }
  if (pid == 0) {
    /* It serves the generator only: it goes when the generator goes. */
    prctl (PR_SET_PDEATHSIG, SIGKILL);
    server_run (listener, deadline_ns);
  }
  close (listener);
  return pid;
}
