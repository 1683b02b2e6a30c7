/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A program that embeds LegbaServer and answers client events from a C
 * handler of its client-event signal, as an application's backend would
 * (bench/server/hook.mjs measures its round trip): `client-ask` gets an
 * `answer` carrying the same data back to its sender alone, and is not
 * relayed. With --relay, no handler is connected: the server relays as
 * legba-server does. No client-event rate limit, as in bench/server's
 * other runs. Prints "legba-server listening on 127.0.0.1:PORT" once it
 * listens; stops on SIGINT or SIGTERM.
 *
 *   hook-server APP_ID APP_KEY APP_SECRET [--relay]
 */
#include <legba/server/server.h>

#include <glib-unix.h>
#include <stdio.h>
#include <string.h>

static gboolean
on_client_event (LegbaServer * server, LegbaClientEvent * event,
    gpointer user_data)
{
  const char *data;

  if (strcmp (legba_client_event_get_name (event), "client-ask") != 0)
    return FALSE;
  /* pusher-js and the bench client send the data as a JSON string: the
   * reply carries the same string back */
  data = legba_client_event_get_data (event);
  if (data != NULL && data[0] == '"') {
    g_autofree char *inner = g_strndup (data + 1, strlen (data) - 2);
    g_autofree char *text = g_strcompress (inner);

    legba_client_event_reply (event, "answer", text);
  } else {
    legba_client_event_reply (event, "answer", data);
  }
  return TRUE;
}

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
  g_autoptr (GMainLoop) loop = NULL;
  g_autoptr (LegbaServer) server = NULL;

  if (argc < 4) {
    g_printerr ("usage: %s APP_ID APP_KEY APP_SECRET [--relay]\n", argv[0]);
    return 2;
  }
  loop = g_main_loop_new (NULL, FALSE);
  server = legba_server_new ();
  g_object_set (server, "client-events-per-second", 0, NULL);
  if (argc < 5 || strcmp (argv[4], "--relay") != 0)
    g_signal_connect (server, "client-event", G_CALLBACK (on_client_event),
        NULL);
  if (!legba_server_add_app (server, argv[1], argv[2], argv[3], &error) ||
      !legba_server_listen (server, "127.0.0.1", 0, &error)) {
    g_printerr ("%s\n", error->message);
    return 1;
  }
  g_print ("legba-server listening on 127.0.0.1:%u\n",
      legba_server_get_port (server));
  fflush (stdout);
  g_unix_signal_add (SIGINT, on_signal, loop);
  g_unix_signal_add (SIGTERM, on_signal, loop);
  g_main_loop_run (loop);
  legba_server_shutdown (server);
  return 0;
}
