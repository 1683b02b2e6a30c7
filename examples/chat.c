/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A text chat over a room's data channels, with no audio or video: each
 * line typed is sent to everybody on the topic "chat", and what the
 * others send is printed.
 *
 *   chat ws://127.0.0.1:6001 ROOM IDENTITY APP_KEY APP_SECRET
 */
#include <legba/legba.h>

#include <gio/gunixinputstream.h>
#include <unistd.h>

static void
on_data (LegbaCall * call, LegbaParticipant * from, const char *topic,
    JsonNode * data, gpointer user_data)
{
  if (g_strcmp0 (topic, "chat") == 0 && JSON_NODE_HOLDS_OBJECT (data))
    g_print ("<%s> %s\n", legba_participant_get_identity (from),
        json_object_get_string_member_with_default (json_node_get_object
            (data), "text", ""));
}

static void
on_participant (LegbaCall * call, LegbaParticipant * who, gpointer joined)
{
  g_print ("* %s %s\n", legba_participant_get_identity (who),
      joined ? "joined" : "left");
}

static void
on_line (GObject * source, GAsyncResult * result, gpointer data)
{
  LegbaCall *call = data;
  g_autoptr (GError) error = NULL;
  g_autofree char *line = g_data_input_stream_read_line_finish_utf8
      (G_DATA_INPUT_STREAM (source), result, NULL, &error);
  LegbaRoom *room = legba_call_get_room (call);

  if (line == NULL) {           /* end of input: leave */
    legba_call_stop (call);
    return;
  }
  if (room != NULL && line[0] != '\0') {
    g_autoptr (JsonNode) message = json_node_new (JSON_NODE_OBJECT);
    JsonObject *object = json_object_new ();

    json_object_set_string_member (object, "text", line);
    json_node_take_object (message, object);
    if (!legba_room_send_json (room, message, "chat",
            LEGBA_RELIABILITY_RELIABLE, NULL, &error))
      g_printerr ("not sent to everybody: %s\n", error->message);
  }
  g_data_input_stream_read_line_async (G_DATA_INPUT_STREAM (source),
      G_PRIORITY_DEFAULT, NULL, on_line, call);
}

static void
on_state (LegbaCall * call, GParamSpec * pspec, GMainLoop * loop)
{
  LegbaCallState state = legba_call_get_state (call);

  if (state == LEGBA_CALL_STATE_STOPPED || state == LEGBA_CALL_STATE_FAILED)
    g_main_loop_quit (loop);
}

int
main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GInputStream) stdin_stream = NULL;
  g_autoptr (GDataInputStream) lines = NULL;
  GMainLoop *loop;
  LegbaCall *call;

  gst_init (&argc, &argv);
  if (argc < 6) {
    g_printerr ("usage: %s URL ROOM IDENTITY APP_KEY APP_SECRET\n", argv[0]);
    return 2;
  }
  loop = g_main_loop_new (NULL, FALSE);
  call = legba_call_new (argv[1], argv[2], argv[3]);
  g_object_set (call, "app-key", argv[4], "app-secret", argv[5],
      "video", LEGBA_CALL_VIDEO_NONE, "audio", LEGBA_CALL_AUDIO_NONE, NULL);
  g_signal_connect (call, "data-received", G_CALLBACK (on_data), NULL);
  g_signal_connect (call, "participant-joined", G_CALLBACK (on_participant),
      GINT_TO_POINTER (TRUE));
  g_signal_connect (call, "participant-left", G_CALLBACK (on_participant),
      GINT_TO_POINTER (FALSE));
  g_signal_connect (call, "notify::state", G_CALLBACK (on_state), loop);
  if (!legba_call_start (call, &error)) {
    g_printerr ("%s\n", error->message);
    return 1;
  }
  stdin_stream = g_unix_input_stream_new (STDIN_FILENO, FALSE);
  lines = g_data_input_stream_new (stdin_stream);
  g_data_input_stream_read_line_async (lines, G_PRIORITY_DEFAULT, NULL,
      on_line, call);
  g_main_loop_run (loop);

  g_object_unref (call);
  g_main_loop_unref (loop);
  return 0;
}
