/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What the test programs share: waiting on the main context, running the
 * built tools (paths from the environment meson test sets), and processes
 * that announce readiness with a line on stdout (legba-server,
 * redis-server).
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <gst/gst.h>

G_BEGIN_DECLS

gboolean legba_test_timeout_cb (gpointer user_data);

/**
 * LEGBA_TEST_WAIT_UNTIL:
 * @expr: the condition
 * @timeout_s: seconds before the test fails
 * @reason: what is awaited, for the failure message
 *
 * Iterates the thread-default main context until @expr holds; fails the
 * test after @timeout_s seconds.
 */
#define LEGBA_TEST_WAIT_UNTIL(expr, timeout_s, reason) G_STMT_START { \
    gboolean timed_out_ = FALSE, held_; \
    guint timer_ = g_timeout_add_seconds ((timeout_s), \
        legba_test_timeout_cb, &timed_out_); \
    while (!(held_ = (expr)) && !timed_out_) \
      g_main_context_iteration (NULL, TRUE); \
    if (!timed_out_) \
      g_source_remove (timer_); \
    if (!held_) \
      g_error ("timed out after %d s waiting for %s", (int) (timeout_s), \
          (reason)); \
  } G_STMT_END

void legba_test_iterate_for (guint ms);

GstPadProbeReturn legba_test_lose_every_20th (GstPad * pad,
    GstPadProbeInfo * info, gpointer data);

const char *legba_test_tool_path (const char *variable);

int legba_test_run (const char *const *argv, char **out, char **err);

int legba_test_run_tool (const char *variable, char **out, char **err,
    const char *first_arg, ...) G_GNUC_NULL_TERMINATED;

gboolean legba_test_make_certificate (const char *dir, char **cert,
    char **key);

JsonObject *legba_test_parse_object (JsonParser * parser, const char *text);

/**
 * LegbaTestProcess:
 * @process: the child
 * @out: its stdout, as lines
 * @line: the line legba_test_process_start() waited for
 * @exited: whether the child has exited
 *
 * A child process that dies with the test (whatever ends the test) and
 * says on stdout when it is ready.
 */
typedef struct
{
  GSubprocess *process;
  GDataInputStream *out;
  char *line;
  gboolean exited;

  /*< private >*/
  const char *wanted;
  gboolean line_done;
} LegbaTestProcess;

void legba_test_process_start (LegbaTestProcess * p, const char *const *argv,
    const char *wanted, guint timeout_s);
void legba_test_process_start_with (LegbaTestProcess * p,
    GSubprocessLauncher * launcher, const char *const *argv,
    const char *wanted, guint timeout_s);
void legba_test_process_signal (LegbaTestProcess * p, int signum,
    guint timeout_s);
void legba_test_process_clear (LegbaTestProcess * p);

guint legba_test_server_port (LegbaTestProcess * p);

void legba_test_tolerate_rtpsession_race (void);
void legba_test_hold_sctp (void);

/* For a tool run as a child process: it reports CRITICALs instead of
 * aborting (G_DEBUG without fatal-criticals), and its output is then
 * checked for any CRITICAL but GStreamer 1.22's rtpsession race. */
void legba_test_launcher_report_criticals (GSubprocessLauncher * launcher);
void legba_test_assert_no_criticals (const char *output);

/* A child spawned by @launcher is killed when the test program exits,
 * a test that fails (and aborts) included: nothing is left behind. */
void legba_test_launcher_die_with_parent (GSubprocessLauncher * launcher);

G_END_DECLS
