/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-server's /demo/ files (web-dir and pusher-js-dir): what is served,
 * with which type, and what is not (no directory configured, names
 * outside the directory, missing files).
 */
#include "signal-test.h"

#include <glib/gstdio.h>

typedef struct
{
  guint status;
  char *type;
  char *body;
  char *location;
} Response;

static void
response_clear (Response * r)
{
  g_free (r->type);
  g_free (r->body);
  g_free (r->location);
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
  r = get (f, "/demotic");
  g_assert_cmpuint (r.status, ==, 404);
  response_clear (&r);

  g_unlink (index);
  g_unlink (peer);
  g_unlink (lib);
  g_rmdir (web);
  g_rmdir (pusher);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/demo-page/files", Fixture, NULL, fixture_setup, test_files,
      fixture_teardown);
  return g_test_run ();
}
