/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A video call in ten lines: joins ROOM as IDENTITY with the camera (or a
 * test pattern) and the microphone, and shows everybody else in a grid.
 *
 *   call ws://127.0.0.1:6001 ROOM IDENTITY APP_KEY APP_SECRET [test]
 */
#include <legba/legba.h>

int
main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;

  gst_init (&argc, &argv);
  if (argc < 6) {
    g_printerr ("usage: %s URL ROOM IDENTITY APP_KEY APP_SECRET [test]\n",
        argv[0]);
    return 2;
  }

  GMainLoop *loop = g_main_loop_new (NULL, FALSE);
  LegbaCall *call = legba_call_new (argv[1], argv[2], argv[3]);
  g_object_set (call, "app-key", argv[4], "app-secret", argv[5],
      "video", argc > 6 ? LEGBA_CALL_VIDEO_TEST : LEGBA_CALL_VIDEO_CAMERA,
      "audio", argc > 6 ? LEGBA_CALL_AUDIO_TEST : LEGBA_CALL_AUDIO_MIC,
      "display", LEGBA_CALL_DISPLAY_GRID, NULL);
  g_signal_connect_swapped (call, "error", G_CALLBACK (g_main_loop_quit), loop);
  if (!legba_call_start (call, &error)) {
    g_printerr ("%s\n", error->message);
    return 1;
  }
  g_main_loop_run (loop);

  legba_call_stop (call);
  g_object_unref (call);
  g_main_loop_unref (loop);
  return 0;
}
