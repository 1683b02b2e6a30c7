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
 *
 * With --sfu (the test demo-sfu) the same call runs in an SFU room: the
 * test starts an open Janus of its own with tests/common/start-janus.sh
 * (exit 77, skipped, when janus is not installed) and gives it to
 * legba-demo with --janus-url, --janus-ws-url and --janus-admin-key.
 */
#include <legba-test.h>

#include <string.h>

#define DEMO_OK "OK: video, audio and data flowed every way between the 3 " \
    "participants."

/* KEY=VALUE lines of start-janus.sh */
static char *janus_dir;
static char *janus_url;
static char *janus_ws_url;
static char *janus_admin_key;

static void
run_demo (const char *const *extra)
{
  g_autoptr (GSubprocessLauncher) launcher = g_subprocess_launcher_new
      (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_MERGE);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  const char *const common[] = { legba_test_tool_path ("LEGBA_DEMO"),
    "--width", "320", "--height", "180", "--encoder-proof-timeout", "30000",
    NULL
  };
  g_autoptr (GSubprocess) demo = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *out = NULL;
  g_auto (GStrv) lines = NULL;

  for (guint i = 0; common[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) common[i]);
  for (guint i = 0; extra != NULL && extra[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) extra[i]);
  g_ptr_array_add (argv, NULL);
  legba_test_launcher_report_criticals (launcher);
  demo = g_subprocess_launcher_spawnv (launcher,
      (const char *const *) argv->pdata, &error);
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

static void
test_demo (void)
{
  run_demo (NULL);
}

/* The room is an SFU room on the Janus (legba-demo says so), and media and
 * data still flow every way. */
static void
test_demo_sfu (void)
{
  const char *const extra[] = { "--janus-url", janus_url, "--janus-ws-url",
    janus_ws_url, "--janus-admin-key", janus_admin_key, NULL
  };

  run_demo (extra);
}

static char *
janus_script (void)
{
  return g_build_filename (g_getenv ("LEGBA_SOURCE_ROOT"), "tests", "common",
      "start-janus.sh", NULL);
}

/* A shell that stops the Janus and removes its folder when its standard
 * input closes: when the test ends, or when it dies of a failed
 * assertion. */
static GSubprocess *janus_reaper;

static void
reaper_start (void)
{
  g_autofree char *script = janus_script ();
  g_autoptr (GError) error = NULL;

  janus_reaper = g_subprocess_new (G_SUBPROCESS_FLAGS_STDIN_PIPE, &error,
      "/bin/sh", "-c", "trap '' HUP INT TERM; read -r _; "
      "/bin/sh \"$0\" --stop \"$1\"; /bin/rm -rf \"$1\"", script, janus_dir,
      NULL);
  g_assert_no_error (error);
}

/* Starts an open Janus in a temporary folder: FALSE when janus is not
 * installed. */
static gboolean
janus_start (void)
{
  g_autofree char *script = janus_script ();
  g_autoptr (GError) error = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_auto (GStrv) lines = NULL;
  int status;

  /* set but empty: a Janus the participants reach with the room's pin
   * (set before any thread starts) */
  g_setenv ("JANUS_API_SECRET", "", TRUE);
  janus_dir = g_dir_make_tmp ("legba-demo-janus-XXXXXX", &error);
  g_assert_no_error (error);
  reaper_start ();
  status = legba_test_run ((const char *const[]) {
        "/bin/sh", script, janus_dir, NULL
      }, &out, &err);
  if (status == 77)
    return FALSE;
  if (status != 0)
    g_error ("start-janus.sh exited %d: %s", status, err);
  lines = g_strsplit (out, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    if (g_str_has_prefix (lines[i], "JANUS_HTTP_URL="))
      janus_url = g_strdup (lines[i] + strlen ("JANUS_HTTP_URL="));
    else if (g_str_has_prefix (lines[i], "JANUS_WS_URL="))
      janus_ws_url = g_strdup (lines[i] + strlen ("JANUS_WS_URL="));
    else if (g_str_has_prefix (lines[i], "JANUS_ADMIN_KEY="))
      janus_admin_key = g_strdup (lines[i] + strlen ("JANUS_ADMIN_KEY="));
  }
  g_assert_nonnull (janus_url);
  g_assert_nonnull (janus_ws_url);
  g_assert_nonnull (janus_admin_key);
  return TRUE;
}

static void
janus_stop (void)
{
  g_autoptr (GError) error = NULL;

  g_output_stream_close (g_subprocess_get_stdin_pipe (janus_reaper), NULL,
      &error);
  g_assert_no_error (error);
  g_subprocess_wait_check (janus_reaper, NULL, &error);
  g_assert_no_error (error);
  g_clear_object (&janus_reaper);
  g_clear_pointer (&janus_dir, g_free);
  g_clear_pointer (&janus_url, g_free);
  g_clear_pointer (&janus_ws_url, g_free);
  g_clear_pointer (&janus_admin_key, g_free);
}

int
main (int argc, char **argv)
{
  gboolean sfu = argc > 1 && g_str_equal (argv[1], "--sfu");
  int status;

  if (sfu) {
    argv[1] = argv[0];
    argv++;
    argc--;
  }
  g_test_init (&argc, &argv, NULL);
  if (!sfu) {
    g_test_add_func ("/demo/call", test_demo);
    return g_test_run ();
  }
  if (!janus_start ()) {
    janus_stop ();
    g_printerr ("janus is not installed: skipping\n");
    return 77;
  }
  g_test_add_func ("/demo/sfu", test_demo_sfu);
  status = g_test_run ();
  janus_stop ();
  return status;
}
