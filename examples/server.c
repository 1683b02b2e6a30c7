/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A Pusher-protocol server in a program of its own, with liblegba-server
 * alone (no GStreamer): one app, listening on 127.0.0.1, its URL printed
 * once it listens. Stops on SIGINT or SIGTERM.
 *
 *   server APP_KEY APP_SECRET [PORT]
 */
#include <legba/server/server.h>

#include <glib-unix.h>
#include <stdio.h>
#include <stdlib.h>

static gboolean
on_signal (gpointer loop)
{
  g_main_loop_quit (loop);
  return G_SOURCE_CONTINUE;
}

int
main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;

  if (argc < 3) {
    g_printerr ("usage: %s APP_KEY APP_SECRET [PORT]\n", argv[0]);
    return 2;
  }

  GMainLoop *loop = g_main_loop_new (NULL, FALSE);
  LegbaServer *server = legba_server_new ();
  g_autofree char *url = NULL;

  if (!legba_server_add_app (server, "1", argv[1], argv[2], &error) ||
      !legba_server_listen (server, "127.0.0.1",
          argc > 3 ? (guint) atoi (argv[3]) : 0, &error)) {
    g_printerr ("%s\n", error->message);
    return 1;
  }
  url = legba_server_get_url (server);
  g_print ("%s\n", url);
  fflush (stdout);
  g_unix_signal_add (SIGINT, on_signal, loop);
  g_unix_signal_add (SIGTERM, on_signal, loop);
  g_main_loop_run (loop);

  legba_server_shutdown (server);
  g_object_unref (server);
  g_main_loop_unref (loop);
  return 0;
}
