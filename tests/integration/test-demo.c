/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The README's first command, after its setup and build: legba-demo, the
 * program scripts/demo.sh runs, as a process of its own (smaller frames:
 * the suite also runs under AddressSanitizer on a busy machine). It must
 * exit 0 with its closing line, media and data having flowed every way,
 * and print no GLib critical but GStreamer 1.22's rtpsession race
 * (tests/common/legba-test.c), which the suite's fatal criticals would
 * turn into an abort of the whole call.
 */
#include <legba-test.h>

#include <string.h>

#define DEMO_OK "OK: video, audio and data flowed every way between the 3 " \
    "participants."

static void
test_demo (void)
{
  g_autoptr (GSubprocessLauncher) launcher = g_subprocess_launcher_new
      (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_MERGE);
  g_autoptr (GSubprocess) demo = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *out = NULL;
  g_auto (GStrv) lines = NULL;

  legba_test_launcher_report_criticals (launcher);
  demo = g_subprocess_launcher_spawn (launcher, &error,
      legba_test_tool_path ("LEGBA_DEMO"), "--width", "320", "--height",
      "180", "--encoder-proof-timeout", "30000", NULL);
  g_assert_no_error (error);
  g_subprocess_communicate_utf8 (demo, NULL, NULL, &out, NULL, &error);
  g_assert_no_error (error);

  lines = g_strsplit (out, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    g_test_message ("%s", lines[i]);
  legba_test_assert_no_criticals (out);
  g_assert_true (g_subprocess_get_if_exited (demo));
  g_assert_cmpint (g_subprocess_get_exit_status (demo), ==, 0);
  g_assert_nonnull (strstr (out, DEMO_OK));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/demo/call", test_demo);
  return g_test_run ();
}
