/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-server's /demo/ files (web-dir and pusher-js-dir): what is served,
 * with which type and headers, and what is not (no directory configured,
 * names outside the directory, missing files, anything but a regular
 * file), and the page's policy naming the Janus instances of SFU rooms.
 */
#include "signal-test.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct
{
  guint status;
  char *type;
  char *body;
  char *location;
  char *nosniff;                /* X-Content-Type-Options */
  char *csp;                    /* Content-Security-Policy */
} Response;

static void
response_clear (Response * r)
{
  g_free (r->type);
  g_free (r->body);
  g_free (r->location);
  g_free (r->nosniff);
  g_free (r->csp);
}

static void
on_sent (GObject * source, GAsyncResult * result, gpointer data)
{
  GBytes **out = data;
  GError *error = NULL;

  *out = soup_session_send_and_read_finish (SOUP_SESSION (source), result,
      &error);
  g_assert_no_error (error);
}

static Response
get (Fixture * f, const char *path)
{
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autofree char *url = g_strdup_printf ("%s%s", f->url, path);
  g_autoptr (SoupMessage) msg = soup_message_new ("GET", url);
  GBytes *bytes = NULL;
  Response r = { 0, };

  /* redirects are looked at, not followed */
  soup_message_add_flags (msg, SOUP_MESSAGE_NO_REDIRECT);
  soup_session_send_and_read_async (session, msg, G_PRIORITY_DEFAULT, NULL,
      on_sent, &bytes);
  WAIT_FOR (bytes != NULL, "the response");
  r.status = soup_message_get_status (msg);
  r.type = g_strdup (soup_message_headers_get_content_type
      (soup_message_get_response_headers (msg), NULL));
  r.location = g_strdup (soup_message_headers_get_one
      (soup_message_get_response_headers (msg), "Location"));
  r.nosniff = g_strdup (soup_message_headers_get_one
      (soup_message_get_response_headers (msg), "X-Content-Type-Options"));
  r.csp = g_strdup (soup_message_headers_get_one
      (soup_message_get_response_headers (msg), "Content-Security-Policy"));
  r.body = g_strndup (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes));
  g_bytes_unref (bytes);
  return r;
}

static void
test_files (Fixture * f, gconstpointer data)
{
  g_autofree char *web = g_dir_make_tmp ("legba-web-XXXXXX", NULL);
  g_autofree char *pusher = g_dir_make_tmp ("legba-pusher-XXXXXX", NULL);
  g_autofree char *index = g_build_filename (web, "index.html", NULL);
  g_autofree char *peer = g_build_filename (web, "room-peer.js", NULL);
  g_autofree char *lib = g_build_filename (pusher, "pusher.min.js", NULL);
  Response r;

  /* no directories: no page */
  r = get (f, "/demo/");
  g_assert_cmpuint (r.status, ==, 404);
  g_assert_nonnull (strstr (r.body, "--web-dir"));
  response_clear (&r);

  g_assert_true (g_file_set_contents (index, "<!doctype html>", -1, NULL));
  g_assert_true (g_file_set_contents (peer, "export {};", -1, NULL));
  g_assert_true (g_file_set_contents (lib, "var Pusher;", -1, NULL));
  g_object_set (f->server, "web-dir", web, "pusher-js-dir", pusher, NULL);

  r = get (f, "/demo");
  g_assert_cmpuint (r.status, ==, 301);
  g_assert_true (g_str_has_suffix (r.location, "/demo/"));
  response_clear (&r);
  r = get (f, "/demo/");
  g_assert_cmpuint (r.status, ==, 200);
  g_assert_cmpstr (r.type, ==, "text/html");
  g_assert_cmpstr (r.body, ==, "<!doctype html>");
  /* no type sniffing, and the page's policy: nothing inline, nothing
   * from elsewhere */
  g_assert_cmpstr (r.nosniff, ==, "nosniff");
  g_assert_nonnull (r.csp);
  g_assert_nonnull (strstr (r.csp, "default-src 'none'"));
  g_assert_nonnull (strstr (r.csp, "script-src 'self';"));
  g_assert_null (strstr (r.csp, "unsafe"));
  response_clear (&r);
  r = get (f, "/demo/room-peer.js");
  g_assert_cmpstr (r.type, ==, "text/javascript");
  g_assert_cmpstr (r.body, ==, "export {};");
  response_clear (&r);
  r = get (f, "/demo/pusher.min.js");
  g_assert_cmpuint (r.status, ==, 200);
  g_assert_cmpstr (r.body, ==, "var Pusher;");
  response_clear (&r);

  /* nothing outside the two directories, nothing missing */
  for (guint i = 0; i < 4; i++) {
    static const char *const paths[] = { "/demo/missing.js",
      "/demo/..%2Fetc%2Fpasswd", "/demo/.hidden", "/demo/sub/index.html"
    };

    r = get (f, paths[i]);
    /* libsoup itself answers 400 to an encoded slash */
    g_assert_true (r.status == 404 || r.status == 400);
    response_clear (&r);
  }
  r = get (f, "/demo/missing.js");
  g_assert_cmpstr (r.nosniff, ==, "nosniff");
  response_clear (&r);
  r = get (f, "/demotic");
  g_assert_cmpuint (r.status, ==, 404);
  response_clear (&r);

  g_unlink (index);
  g_unlink (peer);
  g_unlink (lib);
  g_rmdir (web);
  g_rmdir (pusher);
}

/* Opens the FIFO for writing, so that a reader waiting in open() goes on,
 * if the test has not finished its request within the deadline: a server
 * that waits on a FIFO then fails the test instead of hanging it. */
typedef struct
{
  const char *fifo;
  GMutex lock;
  GCond cond;
  gboolean answered;
  gboolean rescued;
} Rescue;

static gpointer
rescue_thread (gpointer data)
{
  Rescue *rescue = data;
  gint64 deadline = g_get_monotonic_time () + 10 * G_TIME_SPAN_SECOND;

  g_mutex_lock (&rescue->lock);
  while (!rescue->answered &&
      g_cond_wait_until (&rescue->cond, &rescue->lock, deadline));
  if (!rescue->answered) {
    int fd = open (rescue->fifo, O_WRONLY | O_NONBLOCK);

    rescue->rescued = fd >= 0;
    if (fd >= 0)
      close (fd);
  }
  g_mutex_unlock (&rescue->lock);
  return NULL;
}

/* Only regular files of the directory are served: a FIFO is refused at
 * once (opening it would wait for a writer, with the whole server), and
 * so are symbolic links, wherever they point, and directories; the server
 * keeps serving. */
static void
test_not_regular (Fixture * f, gconstpointer data)
{
  g_autofree char *web = g_dir_make_tmp ("legba-web-XXXXXX", NULL);
  g_autofree char *outside = g_dir_make_tmp ("legba-outside-XXXXXX", NULL);
  g_autofree char *index = g_build_filename (web, "index.html", NULL);
  g_autofree char *secret = g_build_filename (outside, "secret.js", NULL);
  g_autofree char *fifo = g_build_filename (web, "fifo.js", NULL);
  g_autofree char *link_out = g_build_filename (web, "out.js", NULL);
  g_autofree char *link_in = g_build_filename (web, "in.html", NULL);
  g_autofree char *sub = g_build_filename (web, "sub", NULL);
  Rescue rescue = { fifo, };
  GThread *thread;
  Response r;

  g_assert_true (g_file_set_contents (index, "<!doctype html>", -1, NULL));
  g_assert_true (g_file_set_contents (secret, "var secret;", -1, NULL));
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_assert_cmpint (symlink (secret, link_out), ==, 0);
  g_assert_cmpint (symlink ("index.html", link_in), ==, 0);
  g_assert_cmpint (g_mkdir (sub, 0700), ==, 0);
  g_object_set (f->server, "web-dir", web, NULL);

  g_mutex_init (&rescue.lock);
  g_cond_init (&rescue.cond);
  thread = g_thread_new ("rescue", rescue_thread, &rescue);
  r = get (f, "/demo/fifo.js");
  g_mutex_lock (&rescue.lock);
  rescue.answered = TRUE;
  g_cond_signal (&rescue.cond);
  g_mutex_unlock (&rescue.lock);
  g_thread_join (thread);
  g_mutex_clear (&rescue.lock);
  g_cond_clear (&rescue.cond);
  if (rescue.rescued)
    g_error ("the server waited on the FIFO until a writer opened it");
  g_assert_cmpuint (r.status, ==, 403);
  g_assert_cmpstr (r.nosniff, ==, "nosniff");
  response_clear (&r);

  for (guint i = 0; i < 3; i++) {
    static const char *const paths[] = { "/demo/out.js", "/demo/in.html",
      "/demo/sub"
    };

    r = get (f, paths[i]);
    g_assert_cmpuint (r.status, ==, 403);
    g_assert_null (strstr (r.body, "secret"));
    response_clear (&r);
  }

  r = get (f, "/demo/");
  g_assert_cmpuint (r.status, ==, 200);
  g_assert_cmpstr (r.body, ==, "<!doctype html>");
  response_clear (&r);

  g_unlink (fifo);
  g_unlink (link_out);
  g_unlink (link_in);
  g_rmdir (sub);
  g_unlink (index);
  g_unlink (secret);
  g_rmdir (web);
  g_rmdir (outside);
}

/* The page of an SFU room opens a Janus session over WebSocket: the
 * policy's connect-src names each Janus WebSocket API by its origin, and
 * nothing that is not a plain ws:// or wss:// URL. */
static void
test_csp_janus (Fixture * f, gconstpointer data)
{
  g_autofree char *web = g_dir_make_tmp ("legba-web-XXXXXX", NULL);
  g_autofree char *index = g_build_filename (web, "index.html", NULL);
  const char *const urls[] = { "ws://127.0.0.1:8188/",
    "wss://[::1]:9000/janus", "wss://sfu.example/janus",
    "ws://evil;script-src:1/", NULL
  };
  Response r;

  g_assert_true (g_file_set_contents (index, "<!doctype html>", -1, NULL));
  g_object_set (f->server, "web-dir", web, NULL);
  r = get (f, "/demo/");
  g_assert_nonnull (strstr (r.csp, "; connect-src 'self'; "));
  response_clear (&r);

  g_object_set (f->server, "sfu-janus-ws-urls", urls, NULL);
  r = get (f, "/demo/");
  g_assert_cmpuint (r.status, ==, 200);
  g_assert_nonnull (strstr (r.csp, "; connect-src 'self' "
          "ws://127.0.0.1:8188 wss://[::1]:9000 wss://sfu.example; "));
  g_assert_null (strstr (r.csp, "evil"));
  g_assert_nonnull (strstr (r.csp, "script-src 'self';"));
  response_clear (&r);
  g_unlink (index);
  g_rmdir (web);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/demo-page/files", Fixture, NULL, fixture_setup, test_files,
      fixture_teardown);
  g_test_add ("/demo-page/not-regular", Fixture, NULL, fixture_setup,
      test_not_regular, fixture_teardown);
  g_test_add ("/demo-page/csp-janus", Fixture, NULL, fixture_setup,
      test_csp_janus, fixture_teardown);
  return g_test_run ();
}
