/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The HTTP side of LegbaServer: the Pusher HTTP API under /apps/ (with
 * CORS), GET /up, GET /metrics, the demo page's files under /demo/, and
 * bounded request bodies.
 */
#define LEGBA_SERVER_INTERNALS
#include <legba/server/legba-server-private.h>

#include <legba/common/legba-auth.h>
#include <legba/server/legba-http-api.h>

#include <legba/legba-version.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void
legba_server_respond (SoupServerMessage * msg, guint status,
    const char *content_type, char *body)
{
  soup_server_message_set_status (msg, status, NULL);
  if (body != NULL)
    soup_server_message_set_response (msg, content_type, SOUP_MEMORY_TAKE,
        body, strlen (body));
}

/* {"error": error}. The message may quote the request (its path), which
 * need not be UTF-8: invalid bytes become U+FFFD, so that the body is
 * always JSON. */
static char *
legba_server_error_json (const char *error)
{
  g_autoptr (JsonBuilder) builder = json_builder_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *valid = g_utf8_make_valid (error, -1);

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "error");
  json_builder_add_string_value (builder, valid);
  json_builder_end_object (builder);
  root = json_builder_get_root (builder);
  return json_to_string (root, FALSE);
}

void
legba_server_respond_error (SoupServerMessage * msg, guint status,
    const char *error)
{
  legba_server_respond (msg, status, "application/json",
      legba_server_error_json (error));
}

char *
legba_server_remote (SoupServerMessage * msg)
{
  return legba_server_address_string (soup_server_message_get_remote_address
      (msg));
}

/* "HOST:PORT", "[HOST]:PORT" for IPv6, "-" for anything else. */
char *
legba_server_address_string (GSocketAddress * address)
{
  g_autofree char *host = NULL;

  if (!G_IS_INET_SOCKET_ADDRESS (address))
    return g_strdup ("-");
  host = g_inet_address_to_string (g_inet_socket_address_get_address
      (G_INET_SOCKET_ADDRESS (address)));
  if (strchr (host, ':'))
    return g_strdup_printf ("[%s]:%u", host,
        g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (address)));
  return g_strdup_printf ("%s:%u", host,
      g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (address)));
}

gboolean
legba_server_origin_allowed (LegbaServer * self, const char *origin)
{
  char **o;

  if (self->allowed_origins == NULL || origin == NULL)
    return TRUE;
  for (o = self->allowed_origins; *o != NULL; o++) {
    if (g_str_equal (*o, "*") || g_ascii_strcasecmp (*o, origin) == 0)
      return TRUE;
  }
  return FALSE;
}

/* Answers msg from what it has read so far (its headers, part of its
 * body): libsoup would only answer once it has read the whole body. The
 * response goes out at once, the rest of the body is read and dropped for
 * a moment (so that the client reads the response rather than a reset),
 * and the connection is closed. */
static void
legba_server_refuse (LegbaServer * self, SoupServerMessage * msg,
    guint status, const char *error)
{
  GUri *uri = soup_server_message_get_uri (msg);
  g_autofree char *body = legba_server_error_json (error);
  g_autofree char *remote = legba_server_remote (msg);
  g_autofree char *status_s = g_strdup_printf ("%u", status);

  legba_server_log (G_LOG_LEVEL_INFO, "http-refused", "STATUS", status_s,
      "REASON", error, "REMOTE", remote, NULL);
  legba_metrics_count_http (self->metrics,
      legba_metrics_route (uri ? g_uri_get_path (uri) : NULL), status);
  if (!legba_acceptor_refuse (msg, status, body)) {
    /* A connection the server did not accept itself: libsoup answers
     * once the body is read (and dropped). */
    soup_message_body_set_accumulate (soup_server_message_get_request_body
        (msg), FALSE);
    soup_message_headers_replace (soup_server_message_get_response_headers
        (msg), "Connection", "close");
    legba_server_respond_error (msg, status, error);
  }
}

/* RFC 9112 §6.3: a Content-Length that is not one number the server can
 * hold leaves the end of the body unknown. libsoup would take -5 as the
 * length and fail to read the body with a warning, and 2^64 as reading
 * until the connection ends. */
static gboolean
legba_server_length_is_valid (SoupMessageHeaders * headers)
{
  const char *value = soup_message_headers_get_one (headers,
      "Content-Length");
  guint64 length;

  return value == NULL ||
      g_ascii_string_to_unsigned (value, 10, 0, G_MAXINT64, &length, NULL);
}

/* libsoup before 3.3 never lets go of a kept-alive connection that its
 * client closes while it waits for the next request (fixed upstream by
 * "server: do not leak idle connections closed by the client"): the
 * socket stays in CLOSE_WAIT and the connection in memory for the
 * server's life, one for every HTTP client that came and went. With such
 * a libsoup every response closes its connection, but the 101 of a
 * WebSocket upgrade (legba_server_keep_connection). */
static gboolean
legba_server_closes_idle (void)
{
  return soup_get_major_version () > 3 ||
      (soup_get_major_version () == 3 && soup_get_minor_version () >= 3);
}

void
legba_server_keep_connection (SoupServerMessage * msg)
{
  soup_message_headers_remove (soup_server_message_get_response_headers
      (msg), "Connection");
}

/* Request bodies are bounded by max-request-bytes: a declared length over
 * it is answered 413 from the headers, a chunked body as soon as it goes
 * over; either way without reading the rest of the body. */
static void
legba_server_got_headers (SoupServerMessage * msg, gpointer user_data)
{
  LegbaServer *self = user_data;
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);

  if (soup_server_message_get_status (msg) != 0)
    return;
  if (!legba_server_length_is_valid (headers))
    legba_server_refuse (self, msg, SOUP_STATUS_BAD_REQUEST,
        "invalid Content-Length");
  else if (soup_message_headers_get_encoding (headers) ==
      SOUP_ENCODING_CONTENT_LENGTH &&
      soup_message_headers_get_content_length (headers) >
      self->max_request_bytes)
    legba_server_refuse (self, msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE,
        "request body too large");
}

static void
legba_server_got_chunk (SoupServerMessage * msg, GBytes * chunk,
    gpointer user_data)
{
  LegbaServer *self = user_data;
  SoupMessageBody *body = soup_server_message_get_request_body (msg);

  if (soup_server_message_get_status (msg) == 0 &&
      body->length > self->max_request_bytes)
    legba_server_refuse (self, msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE,
        "request body too large");
}

static void
legba_server_request_started (SoupServer * soup, SoupServerMessage * msg,
    gpointer user_data)
{
  /* Set before the request is read, so that the answers libsoup gives
   * itself to requests it cannot parse say it too. */
  if (!legba_server_closes_idle ())
    soup_message_headers_replace (soup_server_message_get_response_headers
        (msg), "Connection", "close");
  g_signal_connect_object (msg, "got-headers",
      G_CALLBACK (legba_server_got_headers), user_data, 0);
  g_signal_connect_object (msg, "got-chunk",
      G_CALLBACK (legba_server_got_chunk), user_data, 0);
}

static void
legba_server_request_finished (SoupServer * soup, SoupServerMessage * msg,
    gpointer user_data)
{
  LegbaServer *self = user_data;
  GUri *uri = soup_server_message_get_uri (msg);

  legba_metrics_count_http (self->metrics,
      legba_metrics_route (uri ? g_uri_get_path (uri) : NULL),
      soup_server_message_get_status (msg));
  legba_acceptor_request_done (msg);
}

static void
legba_server_request_aborted (SoupServer * soup, SoupServerMessage * msg,
    gpointer user_data)
{
  legba_acceptor_request_done (msg);
}

/* ---- HTTP routes ---- */

void
legba_server_handle_default (SoupServer * soup, SoupServerMessage * msg,
    const char *path, GHashTable * query, gpointer user_data)
{
  legba_server_respond_error (msg, SOUP_STATUS_NOT_FOUND, "not found");
}

static gboolean
legba_server_is_get (SoupServerMessage * msg)
{
  const char *method = soup_server_message_get_method (msg);

  if (method == SOUP_METHOD_GET || method == SOUP_METHOD_HEAD)
    return TRUE;
  soup_message_headers_replace (soup_server_message_get_response_headers
      (msg), "Allow", "GET, HEAD");
  legba_server_respond_error (msg, SOUP_STATUS_METHOD_NOT_ALLOWED,
      "method not allowed");
  return FALSE;
}

static void
legba_server_handle_up (SoupServer * soup, SoupServerMessage * msg,
    const char *path, GHashTable * query, gpointer user_data)
{
  if (!g_str_equal (path, "/up")) {
    legba_server_handle_default (soup, msg, path, query, user_data);
    return;
  }
  if (legba_server_is_get (msg))
    legba_server_respond (msg, SOUP_STATUS_OK, "text/plain", g_strdup ("OK\n"));
}

/* The demo page's files are small; a larger one is not read. */
#define MAX_WEB_FILE_BYTES (16 * 1024 * 1024)

/* What the demo page needs, and nothing more: its own scripts, style and
 * WebSocket (CSP 3: 'self' matches ws: and wss: on the page's host and
 * port), the WebSocket APIs of the Janus instances of SFU rooms, media
 * elements playing MediaStreams, and no framing. */
#define DEMO_CSP_BEFORE "default-src 'none'; script-src 'self'; " \
    "style-src 'self'; connect-src 'self'"
#define DEMO_CSP_AFTER "; img-src 'self' data:; " \
    "media-src 'self' blob: mediastream:; base-uri 'none'; " \
    "form-action 'self'; frame-ancestors 'none'"

/* The origin of a Janus WebSocket URL as a CSP source (scheme, host and
 * port), or NULL for one that is not a plain ws:// or wss:// URL. */
static char *
legba_server_csp_source (const char *url)
{
  g_autoptr (GUri) uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);
  const char *scheme = uri ? g_uri_get_scheme (uri) : NULL;
  const char *host = uri ? g_uri_get_host (uri) : NULL;
  gboolean v6;

  if (scheme == NULL || host == NULL || *host == '\0' ||
      (!g_str_equal (scheme, "ws") && !g_str_equal (scheme, "wss")) ||
      strspn (host, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
          "0123456789.-:") != strlen (host))
    return NULL;
  v6 = strchr (host, ':') != NULL;
  if (g_uri_get_port (uri) < 0)
    return g_strdup_printf ("%s://%s%s%s", scheme, v6 ? "[" : "", host,
        v6 ? "]" : "");
  return g_strdup_printf ("%s://%s%s%s:%d", scheme, v6 ? "[" : "", host,
      v6 ? "]" : "", g_uri_get_port (uri));
}

/* The page's Content-Security-Policy: connect-src adds the Janus
 * instances SFU rooms send their members to (docs/server.md). */
static char *
legba_server_demo_csp (LegbaServer * self)
{
  GString *csp = g_string_new (DEMO_CSP_BEFORE);

  for (char **url = self->sfu_janus_ws_urls; url && *url; url++) {
    g_autofree char *source = legba_server_csp_source (*url);

    if (source != NULL)
      g_string_append_printf (csp, " %s", source);
  }
  g_string_append (csp, DEMO_CSP_AFTER);
  return g_string_free (csp, FALSE);
}

typedef enum
{
  WEB_FILE_OK,
  WEB_FILE_MISSING,
  WEB_FILE_REFUSED,             /* there, but not a regular file to serve */
} LegbaWebFileResult;

/* Reads the regular file NAME of DIR into *contents (*length bytes, with
 * a NUL after them). Nothing else is opened: not a symbolic link
 * (wherever it points), nor a FIFO (whose open() would wait for a writer,
 * with the whole server), a device or a directory. lstat() looks before
 * opening; O_NOFOLLOW and O_NONBLOCK keep the open() itself from
 * following a link or waiting, should the name be replaced in between,
 * and fstat() checks what was opened. */
static LegbaWebFileResult
legba_server_read_web_file (const char *dir, const char *name,
    char **contents, gsize * length)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree char *data = NULL;
  LegbaWebFileResult result = WEB_FILE_REFUSED;
  struct stat st;
  gsize done = 0;
  int fd;

  if (lstat (path, &st) != 0)
    return WEB_FILE_MISSING;
  if (!S_ISREG (st.st_mode))
    return WEB_FILE_REFUSED;
  fd = open (path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? WEB_FILE_MISSING : WEB_FILE_REFUSED;
  if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode) ||
      st.st_size > MAX_WEB_FILE_BYTES)
    goto out;

  /* A regular file: reads do not wait on anyone. One that shrinks
   * meanwhile is served as far as it goes; one that grows, as it was. */
  data = g_malloc (st.st_size + 1);
  while (done < (gsize) st.st_size) {
    gssize n = read (fd, data + done, st.st_size - done);

    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      goto out;
    if (n == 0)
      break;
    done += n;
  }
  data[done] = '\0';
  *contents = g_steal_pointer (&data);
  *length = done;
  result = WEB_FILE_OK;
out:
  close (fd);
  return result;
}

static const char *
legba_server_web_file_type (const char *name)
{
  if (g_str_has_suffix (name, ".html"))
    return "text/html; charset=utf-8";
  if (g_str_has_suffix (name, ".js"))
    return "text/javascript; charset=utf-8";
  if (g_str_has_suffix (name, ".css"))
    return "text/css; charset=utf-8";
  return "application/octet-stream";
}

/* /demo/NAME: the demo page's files, from a flat directory (no
 * subdirectories, so no path leaves it), regular files only. Every answer
 * says not to sniff types and carries the page's Content-Security-Policy. */
static void
legba_server_handle_demo (SoupServer * soup, SoupServerMessage * msg,
    const char *path, GHashTable * query, gpointer user_data)
{
  LegbaServer *self = user_data;
  SoupMessageHeaders *headers = soup_server_message_get_response_headers (msg);
  g_autofree char *csp = NULL;
  const char *name, *dir;
  char *contents = NULL;
  gsize length = 0;

  if (!g_str_equal (path, "/demo") && !g_str_has_prefix (path, "/demo/")) {
    legba_server_handle_default (soup, msg, path, query, user_data);
    return;
  }
  soup_message_headers_replace (headers, "X-Content-Type-Options", "nosniff");
  csp = legba_server_demo_csp (self);
  soup_message_headers_replace (headers, "Content-Security-Policy", csp);
  if (!legba_server_is_get (msg))
    return;
  if (g_str_equal (path, "/demo")) {
    soup_server_message_set_redirect (msg, SOUP_STATUS_MOVED_PERMANENTLY,
        "/demo/");
    return;
  }
  name = path + strlen ("/demo/");
  if (*name == '\0')
    name = "index.html";
  dir = g_str_equal (name, "pusher.min.js") ? self->pusher_js_dir :
      self->web_dir;
  if (dir == NULL) {
    legba_server_respond_error (msg, SOUP_STATUS_NOT_FOUND,
        "no demo page here (legba-server --web-dir and --pusher-js-dir)");
    return;
  }
  if (strchr (name, '/') != NULL || name[0] == '.') {
    legba_server_respond_error (msg, SOUP_STATUS_NOT_FOUND, "not found");
    return;
  }
  switch (legba_server_read_web_file (dir, name, &contents, &length)) {
    case WEB_FILE_MISSING:
      legba_server_respond_error (msg, SOUP_STATUS_NOT_FOUND, "not found");
      return;
    case WEB_FILE_REFUSED:
      legba_server_respond_error (msg, SOUP_STATUS_FORBIDDEN,
          "not served: only regular files, no links, at most 16 MiB");
      return;
    case WEB_FILE_OK:
      break;
  }
  soup_message_headers_replace (headers, "Cache-Control", "no-cache");
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_server_message_set_response (msg, legba_server_web_file_type (name),
      SOUP_MEMORY_TAKE, contents, length);
}

static gboolean
legba_server_metrics_authorized (LegbaServer * self, SoupServerMessage * msg)
{
  const char *auth;
  g_autofree char *expected = NULL;

  if (self->metrics_token == NULL || *self->metrics_token == '\0')
    return TRUE;
  auth = soup_message_headers_get_one (soup_server_message_get_request_headers
      (msg), "Authorization");
  if (auth == NULL)
    return FALSE;
  expected = g_strconcat ("Bearer ", self->metrics_token, NULL);
  return legba_auth_equal (auth, expected);
}

static void
legba_server_serve_metrics (LegbaServer * self, SoupServerMessage * msg)
{
  if (!legba_server_is_get (msg))
    return;
  if (!legba_server_metrics_authorized (self, msg)) {
    soup_message_headers_replace (soup_server_message_get_response_headers
        (msg), "WWW-Authenticate", "Bearer realm=\"legba-metrics\"");
    legba_server_respond_error (msg, SOUP_STATUS_UNAUTHORIZED,
        "metrics token required");
    return;
  }

  legba_server_respond (msg, SOUP_STATUS_OK,
      "text/plain; version=0.0.4; charset=utf-8",
      legba_server_render_metrics (self));
}

static void
legba_server_handle_metrics (SoupServer * soup, SoupServerMessage * msg,
    const char *path, GHashTable * query, gpointer user_data)
{
  LegbaServer *self = user_data;

  /* With a listener of its own, /metrics is not on the public one. */
  if (!g_str_equal (path, "/metrics") ||
      (self->metrics_soup != NULL && soup != self->metrics_soup)) {
    legba_server_handle_default (soup, msg, path, query, user_data);
    return;
  }
  legba_server_serve_metrics (self, msg);
}

/* CORS (Fetch standard): allowed origins may read /apps/ responses. */
static gboolean
legba_server_cors (LegbaServer * self, SoupServerMessage * msg)
{
  SoupMessageHeaders *req = soup_server_message_get_request_headers (msg);
  SoupMessageHeaders *resp = soup_server_message_get_response_headers (msg);
  const char *origin = soup_message_headers_get_one (req, "Origin");

  if (origin == NULL)
    return TRUE;
  soup_message_headers_append (resp, "Vary", "Origin");
  if (!legba_server_origin_allowed (self, origin))
    return FALSE;
  soup_message_headers_replace (resp, "Access-Control-Allow-Origin", origin);
  return TRUE;
}

static void
legba_server_preflight (LegbaServer * self, SoupServerMessage * msg,
    gboolean allowed)
{
  SoupMessageHeaders *req = soup_server_message_get_request_headers (msg);
  SoupMessageHeaders *resp = soup_server_message_get_response_headers (msg);
  const char *wanted = soup_message_headers_get_one (req,
      "Access-Control-Request-Headers");

  if (!allowed) {
    legba_server_respond_error (msg, SOUP_STATUS_FORBIDDEN,
        "origin not allowed");
    return;
  }
  soup_message_headers_replace (resp, "Access-Control-Allow-Methods",
      "GET, POST, OPTIONS");
  soup_message_headers_replace (resp, "Access-Control-Allow-Headers",
      wanted ? wanted : "Authorization, Content-Type");
  soup_message_headers_replace (resp, "Access-Control-Max-Age", "600");
  soup_server_message_set_status (msg, SOUP_STATUS_NO_CONTENT, NULL);
}

void
legba_server_handle_apps (SoupServer * soup, SoupServerMessage * msg,
    const char *path, GHashTable * query, gpointer user_data)
{
  LegbaServer *self = user_data;
  const char *method = soup_server_message_get_method (msg);
  SoupMessageBody *body = soup_server_message_get_request_body (msg);
  g_autoptr (GHashTable) params = NULL;
  g_autofree char *remote = NULL;
  g_autofree char *status_s = NULL;
  LegbaHttpRequest request = { 0, };
  LegbaHttpResponse response = { 0, };
  gboolean allowed = legba_server_cors (self, msg);

  if (method == SOUP_METHOD_OPTIONS) {
    legba_server_preflight (self, msg, allowed);
    return;
  }
  if (!legba_server_api_admit (self, msg, path))
    return;

  params = query ? g_hash_table_ref (query) :
      g_hash_table_new (g_str_hash, g_str_equal);
  request.method = method;
  request.path = path;
  request.params = params;
  request.body = body->length > 0 ? body->data : NULL;
  request.body_len = body->length;
  request.authorization = soup_message_headers_get_one
      (soup_server_message_get_request_headers (msg), "Authorization");
  request.now_s = g_get_real_time () / G_USEC_PER_SEC;

  legba_http_api_handle (self->hub, &request, &response);
  legba_server_respond (msg, response.status, "application/json",
      g_steal_pointer (&response.body));
  legba_http_response_clear (&response);

  /* Only the method, path and status: queries hold signatures. */
  remote = legba_server_remote (msg);
  status_s = g_strdup_printf ("%u", soup_server_message_get_status (msg));
  legba_server_log (G_LOG_LEVEL_INFO, "http-api", "METHOD", method,
      "PATH", path, "STATUS", status_s, "REMOTE", remote, NULL);
}

SoupServer *
legba_server_new_soup (LegbaServer * self)
{
  SoupServer *soup = soup_server_new ("server-header",
      "legba-server/" LEGBA_VERSION, NULL);

  g_signal_connect_object (soup, "request-started",
      G_CALLBACK (legba_server_request_started), self, 0);
  g_signal_connect_object (soup, "request-finished",
      G_CALLBACK (legba_server_request_finished), self, 0);
  g_signal_connect_object (soup, "request-aborted",
      G_CALLBACK (legba_server_request_aborted), self, 0);
  soup_server_add_handler (soup, NULL, legba_server_handle_default, self, NULL);
  soup_server_add_handler (soup, "/up", legba_server_handle_up, self, NULL);
  soup_server_add_handler (soup, "/demo", legba_server_handle_demo, self, NULL);
  soup_server_add_handler (soup, "/metrics", legba_server_handle_metrics,
      self, NULL);
  return soup;
}
