/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-bench: runs a launch line, or a send line and a receive line (in
 * one process, or in two on this host), for a number of frames or
 * seconds, and prints what docs/benchmarks.md asks of a measurement: CPU per
 * frame (process user+sys over the frames, per thread and per element),
 * glass-to-glass latency from a legbastampcheck, frames in and out,
 * bitrate, and the conditions of the run.
 */
#include "bench.h"

#include <legba/legba.h>

#include <locale.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define EXIT_REFUSED 3

#define DEFAULT_FRAMES 300
#define DEFAULT_ENC "enc"
/* after the sender's end: how long the receiver may stay without a new
 * frame before it is taken to have received all it will */
#define DRAIN_QUIET_US (1 * G_USEC_PER_SEC)
#define EOS_TIMEOUT_S 10
#define PROGRESS_MS 500

typedef struct
{
  gint64 frames;
  gdouble seconds;
  gint warmup;
  gboolean json;
  char *send;
  char *recv;
  gboolean processes;
  gboolean allow_debug;
  char *enc;
  gdouble timeout;
  gboolean no_elements;
  gboolean no_progress;
} Options;

typedef struct _Bench Bench;

typedef struct
{
  Bench *bench;
  const char *role;             /* "pipeline", "send" or "recv" */
  char *description;
  GstElement *pipeline;
  GstElement *check;            /* the first legbastampcheck */
  gint frames_in;               /* atomic: frames let into the line */
  gint frames_out;              /* atomic: frames at its end */
  guint64 limit;                /* frames let in at most; 0: no limit */
  gint stop_requested;          /* atomic: the end is asked for */
  GstStructure *summary;        /* legba-stamp-summary */
  guint bus_watch;

  GMutex lock;                  /* the encoded stream, while measuring */
  guint64 enc_bytes, enc_buffers;
  GstClockTime enc_first_pts, enc_end_pts;
  gboolean enc_found;
} BenchLine;

struct _Bench
{
  Options *o;
  const char *mode;             /* "pipeline", "send-recv" or "processes" */
  BenchLine *lines[2];
  guint n_lines;
  BenchLine *in_line;           /* where frames enter (NULL: in a child) */
  BenchLine *out_line;          /* where they leave */
  GMainLoop *loop;
  GError *error;

  gint window_open;             /* atomic */
  gboolean window_closed;
  gint measuring;               /* atomic: the encoded stream counts */
  BenchCpu cpu_start, cpu_end;
  gint frames_in_start, frames_out_start, frames_in_end, frames_out_end;
  GPtrArray *elements;
  BenchConditions *conditions;

  gboolean draining;
  gint64 drain_last_change_us;
  gint drain_last_out;
  /* main-loop sources, removed when the run ends */
  guint drain_source, eos_source, seconds_source, timeout_source;
  guint progress_source;

  GSubprocess *child;
  JsonObject *child_result;
  gint child_frames_in_total;

  gboolean progress;
};

static void bench_fail (Bench * bench, GError * error);

/* ---- the lines ---- */

static guint
count_frames (GstPadProbeInfo * info)
{
  if (info->type & GST_PAD_PROBE_TYPE_BUFFER_LIST)
    return gst_buffer_list_length (GST_PAD_PROBE_INFO_BUFFER_LIST (info));
  return 1;
}

static void open_window (Bench * bench);
static gboolean stop_line (gpointer data);

static GstPadProbeReturn
on_frame_in (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  BenchLine *line = data;
  guint n = count_frames (info);
  guint64 total;

  /* one buffer at a time past the limit: frames beyond it never enter */
  if (line->limit > 0
      && (guint64) g_atomic_int_get (&line->frames_in) >= line->limit
      && (info->type & GST_PAD_PROBE_TYPE_BUFFER))
    return GST_PAD_PROBE_DROP;
  total = g_atomic_int_add (&line->frames_in, n) + n;
  if (total - n < (guint64) line->bench->o->warmup
      && total >= (guint64) line->bench->o->warmup)
    open_window (line->bench);
  if (line->limit > 0 && total >= line->limit
      && g_atomic_int_compare_and_exchange (&line->stop_requested, 0, 1)) {
    g_idle_add (stop_line, line);
  }
  return GST_PAD_PROBE_OK;
}

static GstPadProbeReturn
on_frame_out (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  BenchLine *line = data;
  guint64 total = g_atomic_int_add (&line->frames_out, count_frames (info)) +
      count_frames (info);

  /* a receiver alone (its sender in another process) opens its window on
   * its own count */
  if (line->bench->in_line == NULL
      && total - count_frames (info) < (guint64) line->bench->o->warmup
      && total >= (guint64) line->bench->o->warmup)
    open_window (line->bench);
  return GST_PAD_PROBE_OK;
}

static GstPadProbeReturn
on_encoded (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  BenchLine *line = data;
  GstBuffer *buffer;

  if (!g_atomic_int_get (&line->bench->measuring)
      || !(info->type & GST_PAD_PROBE_TYPE_BUFFER))
    return GST_PAD_PROBE_OK;
  buffer = GST_PAD_PROBE_INFO_BUFFER (info);
  g_mutex_lock (&line->lock);
  line->enc_bytes += gst_buffer_get_size (buffer);
  line->enc_buffers++;
  if (GST_BUFFER_PTS_IS_VALID (buffer)) {
    GstClockTime end = GST_BUFFER_PTS (buffer) +
        (GST_BUFFER_DURATION_IS_VALID (buffer) ?
        GST_BUFFER_DURATION (buffer) : 0);

    if (!GST_CLOCK_TIME_IS_VALID (line->enc_first_pts))
      line->enc_first_pts = GST_BUFFER_PTS (buffer);
    if (!GST_CLOCK_TIME_IS_VALID (line->enc_end_pts)
        || end > line->enc_end_pts)
      line->enc_end_pts = end;
  }
  g_mutex_unlock (&line->lock);
  return GST_PAD_PROBE_OK;
}

/* The first element made by factory name in bin, reffed. */
static GstElement *
find_by_factory (GstElement * bin, const char *name)
{
  g_autoptr (GstIterator) it = gst_bin_iterate_recurse (GST_BIN (bin));
  GValue item = G_VALUE_INIT;
  GstElement *found = NULL;

  while (found == NULL && gst_iterator_next (it, &item) == GST_ITERATOR_OK) {
    GstElement *e = g_value_get_object (&item);
    GstElementFactory *f = gst_element_get_factory (e);

    if (f != NULL && g_str_equal (GST_OBJECT_NAME (f), name))
      found = gst_object_ref (e);
    g_value_reset (&item);
  }
  g_value_unset (&item);
  return found;
}

/* The first pad of element in direction, reffed. */
static GstPad *
first_pad (GstElement * element, GstPadDirection direction)
{
  g_autoptr (GstIterator) it = direction == GST_PAD_SRC ?
      gst_element_iterate_src_pads (element) :
      gst_element_iterate_sink_pads (element);
  GValue item = G_VALUE_INIT;
  GstPad *pad = NULL;

  if (gst_iterator_next (it, &item) == GST_ITERATOR_OK) {
    pad = g_value_dup_object (&item);
    g_value_unset (&item);
  }
  return pad;
}

/* The first source (or sink) element of the pipeline, reffed. */
static GstElement *
first_end (GstElement * pipeline, gboolean sources)
{
  g_autoptr (GstIterator) it = sources ?
      gst_bin_iterate_sources (GST_BIN (pipeline)) :
      gst_bin_iterate_sinks (GST_BIN (pipeline));
  GValue item = G_VALUE_INIT;
  GstElement *e = NULL;

  if (gst_iterator_next (it, &item) == GST_ITERATOR_OK) {
    e = g_value_dup_object (&item);
    g_value_unset (&item);
  }
  return e;
}

static void
add_probe (GstElement * element, GstPadDirection direction,
    GstPadProbeCallback callback, BenchLine * line)
{
  GstPad *pad;

  if (element == NULL)
    return;
  pad = first_pad (element, direction);
  if (pad != NULL) {
    gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER |
        GST_PAD_PROBE_TYPE_BUFFER_LIST, callback, line, NULL);
    gst_object_unref (pad);
  }
}

/* Frames enter where legbastamp writes them (else at the first source)
 * and leave where legbastampcheck reads them (else at the first sink). */
static void
attach_probes (BenchLine * line, gboolean in, gboolean out)
{
  g_autoptr (GstElement) stamp = find_by_factory (line->pipeline, "legbastamp");
  g_autoptr (GstElement) source = first_end (line->pipeline, TRUE);
  g_autoptr (GstElement) sink = first_end (line->pipeline, FALSE);
  g_autoptr (GstElement) enc = gst_bin_get_by_name (GST_BIN (line->pipeline),
      line->bench->o->enc);

  if (in)
    add_probe (stamp ? stamp : source, GST_PAD_SRC, on_frame_in, line);
  if (out)
    add_probe (line->check ? line->check : sink, GST_PAD_SINK, on_frame_out,
        line);
  if (enc != NULL) {
    line->enc_found = TRUE;
    add_probe (enc, GST_PAD_SRC, on_encoded, line);
  }
}

static gboolean on_bus (GstBus * bus, GstMessage * msg, gpointer data);

/* Names each streaming thread after its task as it enters it: the
 * message is delivered synchronously, in that thread. */
static GstBusSyncReply
on_bus_sync (GstBus * bus, GstMessage * msg, gpointer data)
{
  GstStreamStatusType type;
  GstElement *owner;
  g_autofree char *name = NULL;

  if (GST_MESSAGE_TYPE (msg) != GST_MESSAGE_STREAM_STATUS)
    return GST_BUS_PASS;
  gst_message_parse_stream_status (msg, &type, &owner);
  if (type != GST_STREAM_STATUS_TYPE_ENTER)
    return GST_BUS_PASS;
  if (GST_IS_PAD (GST_MESSAGE_SRC (msg)))
    name = g_strdup_printf ("%s:%s", GST_OBJECT_NAME (owner),
        GST_OBJECT_NAME (GST_MESSAGE_SRC (msg)));
  else
    name = g_strdup (GST_OBJECT_NAME (owner));
  bench_cpu_name_this_thread (name);
  return GST_BUS_PASS;
}

static BenchLine *
line_new (Bench * bench, const char *role, const char *description,
    GError ** error)
{
  BenchLine *line = g_new0 (BenchLine, 1);
  g_autoptr (GstBus) bus = NULL;

  line->bench = bench;
  line->role = role;
  line->description = g_strdup (description);
  g_mutex_init (&line->lock);
  line->enc_first_pts = line->enc_end_pts = GST_CLOCK_TIME_NONE;
  line->pipeline = gst_parse_launch_full (description, NULL,
      GST_PARSE_FLAG_FATAL_ERRORS, error);
  if (line->pipeline == NULL) {
    g_prefix_error (error, "%s line: ", role);
    return line;
  }
  if (!GST_IS_PIPELINE (line->pipeline)) {
    GstElement *pipeline = gst_pipeline_new (NULL);

    gst_bin_add (GST_BIN (pipeline), line->pipeline);
    line->pipeline = pipeline;
  }
  gst_object_ref_sink (line->pipeline);
  line->check = find_by_factory (line->pipeline, "legbastampcheck");
  if (line->check != NULL)
    g_object_set (line->check, "series", TRUE, NULL);
  bus = gst_element_get_bus (line->pipeline);
  gst_bus_set_sync_handler (bus, on_bus_sync, NULL, NULL);
  line->bus_watch = gst_bus_add_watch (bus, on_bus, line);
  return line;
}

static void
line_free (BenchLine * line)
{
  if (line == NULL)
    return;
  if (line->pipeline != NULL) {
    gst_element_set_state (line->pipeline, GST_STATE_NULL);
    gst_object_unref (line->pipeline);
  }
  if (line->bus_watch != 0)
    g_source_remove (line->bus_watch);
  g_clear_object (&line->check);
  g_clear_pointer (&line->summary, gst_structure_free);
  g_mutex_clear (&line->lock);
  g_free (line->description);
  g_free (line);
}

/* ---- the measuring window ---- */

static gboolean
stop_line (gpointer data)
{
  BenchLine *line = data;

  gst_element_send_event (line->pipeline, gst_event_new_eos ());
  return G_SOURCE_REMOVE;
}

static gboolean
on_seconds_elapsed (gpointer data)
{
  Bench *bench = data;

  bench->seconds_source = 0;
  if (bench->in_line != NULL
      && g_atomic_int_compare_and_exchange (&bench->in_line->stop_requested,
          0, 1)) {
    stop_line (bench->in_line);
  }
  return G_SOURCE_REMOVE;
}

static gboolean
start_seconds (gpointer data)
{
  Bench *bench = data;

  bench->seconds_source = g_timeout_add ((guint) (bench->o->seconds * 1000),
      on_seconds_elapsed, bench);
  return G_SOURCE_REMOVE;
}

/* Opens the window, once: from the streaming thread that lets in the
 * last warm-up frame (or out, in a receiving process), so that the CPU
 * and frame counts start at that very frame. */
static void
open_window (Bench * bench)
{
  if (!g_atomic_int_compare_and_exchange (&bench->window_open, FALSE, TRUE))
    return;
  if (!bench->o->no_elements)
    bench_tracer_open ();
  bench_cpu_take (&bench->cpu_start);
  if (bench->in_line != NULL)
    bench->frames_in_start = g_atomic_int_get (&bench->in_line->frames_in);
  bench->frames_out_start = g_atomic_int_get (&bench->out_line->frames_out);
  g_atomic_int_set (&bench->measuring, TRUE);
  if (bench->o->seconds > 0)
    g_idle_add (start_seconds, bench);
}

static void
close_window (Bench * bench)
{
  if (!g_atomic_int_get (&bench->window_open) || bench->window_closed)
    return;
  bench->window_closed = TRUE;
  g_atomic_int_set (&bench->measuring, FALSE);
  bench_cpu_take (&bench->cpu_end);
  if (!bench->o->no_elements)
    bench->elements = bench_tracer_close ();
  if (bench->in_line != NULL)
    bench->frames_in_end = g_atomic_int_get (&bench->in_line->frames_in);
  bench->frames_out_end = g_atomic_int_get (&bench->out_line->frames_out);
  bench_conditions_end (bench->conditions);
}

static void
finish (Bench * bench)
{
  close_window (bench);
  g_main_loop_quit (bench->loop);
}

/* A receiving line whose sources do not end it on request: what it
 * received until now is the result. */
static gboolean
on_eos_late (gpointer data)
{
  Bench *bench = data;

  bench->eos_source = 0;
  g_printerr ("legba-bench: the recv line did not end within %d s of the "
      "request; measuring what it received\n", EOS_TIMEOUT_S);
  finish (bench);
  return G_SOURCE_REMOVE;
}

/* After the sender's end, the receiver keeps its line until every frame
 * sent has come out, or until none has for DRAIN_QUIET_US. */
static gboolean
on_drain_tick (gpointer data)
{
  Bench *bench = data;
  BenchLine *recv = bench->out_line;
  gint out = g_atomic_int_get (&recv->frames_out);
  gint sent = bench->in_line != NULL ?
      g_atomic_int_get (&bench->in_line->frames_in) :
      bench->child_frames_in_total;
  gint64 now = g_get_monotonic_time ();

  if (out != bench->drain_last_out) {
    bench->drain_last_out = out;
    bench->drain_last_change_us = now;
  }
  if (out >= sent || now - bench->drain_last_change_us >= DRAIN_QUIET_US) {
    bench->drain_source = 0;
    g_atomic_int_set (&recv->stop_requested, 1);
    stop_line (recv);
    bench->eos_source = g_timeout_add_seconds (EOS_TIMEOUT_S, on_eos_late,
        bench);
    return G_SOURCE_REMOVE;
  }
  return G_SOURCE_CONTINUE;
}

static void
start_draining (Bench * bench)
{
  if (bench->draining)
    return;
  bench->draining = TRUE;
  bench->drain_last_out = g_atomic_int_get (&bench->out_line->frames_out);
  bench->drain_last_change_us = g_get_monotonic_time ();
  bench->drain_source = g_timeout_add (50, on_drain_tick, bench);
}

static gboolean
on_bus (GstBus * bus, GstMessage * msg, gpointer data)
{
  BenchLine *line = data;
  Bench *bench = line->bench;

  switch (GST_MESSAGE_TYPE (msg)) {
    case GST_MESSAGE_ERROR:{
      GError *error = NULL;
      g_autofree char *debug = NULL;

      gst_message_parse_error (msg, &error, &debug);
      g_prefix_error (&error, "%s line, %s: ", line->role,
          GST_OBJECT_NAME (GST_MESSAGE_SRC (msg)));
      if (debug != NULL)
        g_printerr ("legba-bench: %s\n", debug);
      bench_fail (bench, error);
      break;
    }
    case GST_MESSAGE_WARNING:{
      g_autoptr (GError) error = NULL;

      gst_message_parse_warning (msg, &error, NULL);
      g_printerr ("legba-bench: %s line, %s: %s\n", line->role,
          GST_OBJECT_NAME (GST_MESSAGE_SRC (msg)), error->message);
      break;
    }
    case GST_MESSAGE_ELEMENT:
      if (GST_MESSAGE_SRC (msg) == GST_OBJECT (line->check)
          && gst_structure_has_name (gst_message_get_structure (msg),
              "legba-stamp-summary")) {
        g_clear_pointer (&line->summary, gst_structure_free);
        line->summary = gst_structure_copy (gst_message_get_structure (msg));
      }
      break;
    case GST_MESSAGE_EOS:
      if (line == bench->out_line)
        finish (bench);
      else
        start_draining (bench);
      break;
    default:
      break;
  }
  return G_SOURCE_CONTINUE;
}

static void
bench_fail (Bench * bench, GError * error)
{
  if (bench->error == NULL)
    bench->error = error;
  else
    g_error_free (error);
  if (bench->child != NULL)
    g_subprocess_send_signal (bench->child, SIGTERM);
  g_main_loop_quit (bench->loop);
}

static gboolean
on_timeout (gpointer data)
{
  Bench *bench = data;

  bench->timeout_source = 0;
  bench_fail (bench, g_error_new (G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
          "no end within %.0f s (--timeout)", bench->o->timeout));
  return G_SOURCE_REMOVE;
}

/* ---- the progress line ---- */

static gboolean
on_progress (gpointer data)
{
  Bench *bench = data;
  BenchLine *out = bench->out_line;
  g_autoptr (GString) s = g_string_new ("legba-bench: ");

  if (bench->in_line != NULL)
    g_string_append_printf (s, "%d frames in, ",
        g_atomic_int_get (&bench->in_line->frames_in));
  g_string_append_printf (s, "%d out", g_atomic_int_get (&out->frames_out));
  if (g_atomic_int_get (&bench->measuring))
    g_string_append_printf (s, ", %.1f s measured",
        (g_get_monotonic_time () - bench->cpu_start.wall_us) / 1e6);
  else
    g_string_append (s, ", warming up");
  if (out->check != NULL) {
    gdouble p50 = -1, p95 = -1;

    g_object_get (out->check, "latency-p50", &p50, "latency-p95", &p95, NULL);
    if (p50 >= 0)
      g_string_append_printf (s, ", latency p50 %.1f ms p95 %.1f ms", p50, p95);
  }
  g_printerr ("\r%s\033[K", s->str);
  return G_SOURCE_CONTINUE;
}

/* ---- the child process ---- */

static void
die_with_parent (gpointer data)
{
  prctl (PR_SET_PDEATHSIG, SIGTERM);
}

static void
on_child_done (GObject * source, GAsyncResult * result, gpointer data)
{
  Bench *bench = data;
  g_autofree char *out = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  GError *error = NULL;

  if (!g_subprocess_communicate_utf8_finish (G_SUBPROCESS (source), result,
          &out, NULL, &error)) {
    bench_fail (bench, error);
    return;
  }
  if (!g_subprocess_get_if_exited (bench->child)
      || g_subprocess_get_exit_status (bench->child) != 0) {
    bench_fail (bench, g_error_new (G_IO_ERROR, G_IO_ERROR_FAILED,
            "the send process failed (exit status %d)",
            g_subprocess_get_if_exited (bench->child) ?
            g_subprocess_get_exit_status (bench->child) : -1));
    return;
  }
  if (!json_parser_load_from_data (parser, out, -1, &error)
      || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))) {
    g_prefix_error (&error, "the send process's result: ");
    bench_fail (bench, error ? error : g_error_new (G_IO_ERROR,
            G_IO_ERROR_INVALID_DATA, "the send process's result is not "
            "a JSON object"));
    return;
  }
  bench->child_result =
      json_object_ref (json_node_get_object (json_parser_get_root (parser)));
  bench->child_frames_in_total =
      json_object_get_int_member_with_default (bench->child_result,
      "frames_in_total", 0);
  start_draining (bench);
}

static gboolean
spawn_sender (Bench * bench, GError ** error)
{
  Options *o = bench->o;
  g_autoptr (GSubprocessLauncher) launcher =
      g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *self = g_file_read_link ("/proc/self/exe", error);

  if (self == NULL)
    return FALSE;
  g_ptr_array_add (argv, g_steal_pointer (&self));
  g_ptr_array_add (argv, g_strdup ("--json"));
  g_ptr_array_add (argv, g_strdup ("--no-progress"));
  if (o->seconds > 0)
    g_ptr_array_add (argv, g_strdup_printf ("--seconds=%g", o->seconds));
  else
    g_ptr_array_add (argv, g_strdup_printf ("--frames=%" G_GINT64_FORMAT,
            o->frames));
  g_ptr_array_add (argv, g_strdup_printf ("--warmup=%d", o->warmup));
  g_ptr_array_add (argv, g_strdup_printf ("--enc=%s", o->enc));
  g_ptr_array_add (argv, g_strdup_printf ("--timeout=%g", o->timeout));
  if (o->allow_debug)
    g_ptr_array_add (argv, g_strdup ("--allow-debug"));
  if (o->no_elements)
    g_ptr_array_add (argv, g_strdup ("--no-elements"));
  g_ptr_array_add (argv, g_strdup ("--"));
  g_ptr_array_add (argv, g_strdup (o->send));
  g_ptr_array_add (argv, NULL);

  g_subprocess_launcher_set_child_setup (launcher, die_with_parent, NULL, NULL);
  bench->child = g_subprocess_launcher_spawnv (launcher,
      (const char *const *) argv->pdata, error);
  if (bench->child == NULL)
    return FALSE;
  bench_conditions_exclude_pid (bench->conditions,
      atoi (g_subprocess_get_identifier (bench->child)));
  g_subprocess_communicate_utf8_async (bench->child, NULL, NULL,
      on_child_done, bench);
  return TRUE;
}

/* ---- running ---- */

static gboolean
play (BenchLine * line, GError ** error)
{
  if (gst_element_set_state (line->pipeline, GST_STATE_PLAYING) ==
      GST_STATE_CHANGE_FAILURE) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
        "the %s line cannot play", line->role);
    return FALSE;
  }
  return TRUE;
}

static gboolean
bench_setup (Bench * bench, const char *pipeline, GError ** error)
{
  Options *o = bench->o;

  if (pipeline != NULL) {
    bench->mode = "pipeline";
    bench->lines[bench->n_lines++] = line_new (bench, "pipeline", pipeline,
        error);
    bench->in_line = bench->out_line = bench->lines[0];
  } else {
    bench->mode = o->processes ? "processes" : "send-recv";
    bench->lines[bench->n_lines++] = line_new (bench, "recv", o->recv, error);
    bench->out_line = bench->lines[0];
    if (!o->processes && *error == NULL) {
      bench->lines[bench->n_lines++] = line_new (bench, "send", o->send, error);
      bench->in_line = bench->lines[1];
    }
  }
  if (*error != NULL)
    return FALSE;

  for (guint i = 0; i < bench->n_lines; i++) {
    BenchLine *line = bench->lines[i];

    attach_probes (line, line == bench->in_line, line == bench->out_line);
  }
  if (bench->in_line != NULL && o->seconds <= 0)
    bench->in_line->limit = o->warmup + o->frames;
  return TRUE;
}

static gboolean
bench_run (Bench * bench, GError ** error)
{
  Options *o = bench->o;

  bench->loop = g_main_loop_new (NULL, FALSE);
  if (o->warmup == 0)
    open_window (bench);
  /* the receiver first, so that the sender's first frames find it */
  if (!play (bench->out_line, error))
    return FALSE;
  if (bench->in_line != NULL && bench->in_line != bench->out_line
      && !play (bench->in_line, error))
    return FALSE;
  if (o->processes && !spawn_sender (bench, error))
    return FALSE;

  bench->timeout_source = g_timeout_add ((guint) (o->timeout * 1000),
      on_timeout, bench);
  if (bench->progress)
    bench->progress_source = g_timeout_add (PROGRESS_MS, on_progress, bench);
  g_main_loop_run (bench->loop);
  if (bench->progress)
    g_printerr ("\r\033[K");
  g_clear_handle_id (&bench->drain_source, g_source_remove);
  g_clear_handle_id (&bench->eos_source, g_source_remove);
  g_clear_handle_id (&bench->seconds_source, g_source_remove);
  g_clear_handle_id (&bench->timeout_source, g_source_remove);
  g_clear_handle_id (&bench->progress_source, g_source_remove);

  if (bench->error != NULL) {
    g_propagate_error (error, g_steal_pointer (&bench->error));
    return FALSE;
  }
  return TRUE;
}

/* ---- results ---- */

typedef struct
{
  guint64 n;
  gdouble p50, p95, p99, min, max, mean;
  GArray *series;               /* gdouble milliseconds, arrival order */
} Latency;

static gint
compare_double (gconstpointer a, gconstpointer b)
{
  gdouble x = *(const gdouble *) a, y = *(const gdouble *) b;

  return x < y ? -1 : x > y ? 1 : 0;
}

/* Nearest rank, as legbastampcheck computes it. */
static gdouble
nearest_rank (const GArray * sorted, guint percent)
{
  gint64 k = ((gint64) percent * sorted->len + 99) / 100 - 1;

  return g_array_index (sorted, gdouble, CLAMP (k, 0, sorted->len - 1));
}

/* The checker's series without its first skip samples (the warm-up). */
static void
latency_compute (Latency * l, const GstStructure * summary, guint skip)
{
  const GValue *series = summary != NULL ?
      gst_structure_get_value (summary, "latency-series") : NULL;
  g_autoptr (GArray) sorted = NULL;
  gdouble total = 0;

  memset (l, 0, sizeof (*l));
  l->series = g_array_new (FALSE, FALSE, sizeof (gdouble));
  for (guint i = skip; series != NULL && i < gst_value_array_get_size (series);
      i++) {
    gdouble ms = g_value_get_double (gst_value_array_get_value (series, i));

    g_array_append_val (l->series, ms);
    total += ms;
  }
  l->n = l->series->len;
  if (l->n == 0)
    return;
  sorted = g_array_copy (l->series);
  g_array_sort (sorted, compare_double);
  l->p50 = nearest_rank (sorted, 50);
  l->p95 = nearest_rank (sorted, 95);
  l->p99 = nearest_rank (sorted, 99);
  l->min = g_array_index (sorted, gdouble, 0);
  l->max = g_array_index (sorted, gdouble, sorted->len - 1);
  l->mean = total / l->n;
}

typedef struct
{
  gint64 frames, frames_in, frames_out, frames_in_total, frames_out_total;
  gdouble seconds;
  gdouble user_s, system_s;     /* all processes */
  gdouble own_s;                /* this process */
  gdouble bitrate_bps;          /* < 0: not measured */
  guint64 enc_bytes, enc_buffers;
  gdouble enc_seconds;
  Latency latency;
} Result;

static const BenchLine *
encoded_line (Bench * bench)
{
  for (guint i = 0; i < bench->n_lines; i++)
    if (bench->lines[i]->enc_found)
      return bench->lines[i];
  return NULL;
}

static gdouble
child_double (Bench * bench, const char *path, gdouble fallback)
{
  g_auto (GStrv) parts = g_strsplit (path, ".", 2);
  JsonObject *o = bench->child_result;
  JsonNode *node;

  if (parts[1] != NULL) {
    node = json_object_get_member (o, parts[0]);
    if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
      return fallback;
    o = json_node_get_object (node);
    node = json_object_get_member (o, parts[1]);
  } else {
    node = json_object_get_member (o, parts[0]);
  }
  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node))
    return fallback;
  return json_node_get_double (node);
}

static void
result_compute (Bench * bench, Result * r)
{
  const BenchLine *enc = encoded_line (bench);

  memset (r, 0, sizeof (*r));
  r->seconds = (bench->cpu_end.wall_us - bench->cpu_start.wall_us) / 1e6;
  r->user_s = (bench->cpu_end.user_us - bench->cpu_start.user_us) / 1e6;
  r->system_s = (bench->cpu_end.system_us - bench->cpu_start.system_us) / 1e6;
  r->own_s = r->user_s + r->system_s;
  r->frames_out = bench->frames_out_end - bench->frames_out_start;
  r->frames_out_total = bench->frames_out_end;
  r->bitrate_bps = -1;
  if (bench->in_line != NULL) {
    r->frames_in = bench->frames_in_end - bench->frames_in_start;
    r->frames_in_total = bench->frames_in_end;
  } else {
    r->frames_in = child_double (bench, "frames_in", 0);
    r->frames_in_total = bench->child_frames_in_total;
    r->user_s += child_double (bench, "cpu_s.user", 0);
    r->system_s += child_double (bench, "cpu_s.system", 0);
    r->bitrate_bps = child_double (bench, "bitrate_bps", -1);
    r->enc_bytes = child_double (bench, "encoded.bytes", 0);
    r->enc_buffers = child_double (bench, "encoded.buffers", 0);
    r->enc_seconds = child_double (bench, "encoded.seconds", 0);
  }
  r->frames = r->frames_in;
  if (enc != NULL && GST_CLOCK_TIME_IS_VALID (enc->enc_first_pts)
      && enc->enc_end_pts > enc->enc_first_pts) {
    r->enc_bytes = enc->enc_bytes;
    r->enc_buffers = enc->enc_buffers;
    r->enc_seconds = (enc->enc_end_pts - enc->enc_first_pts) / 1e9;
    r->bitrate_bps = enc->enc_bytes * 8 / r->enc_seconds;
  }
  latency_compute (&r->latency, bench->out_line->summary, bench->o->warmup);
}

static void
result_clear (Result * r)
{
  g_clear_pointer (&r->latency.series, g_array_unref);
}

/* ---- JSON ---- */

static void
member_double (JsonBuilder * b, const char *name, gdouble value)
{
  json_builder_set_member_name (b, name);
  json_builder_add_double_value (b, value);
}

static void
member_int (JsonBuilder * b, const char *name, gint64 value)
{
  json_builder_set_member_name (b, name);
  json_builder_add_int_value (b, value);
}

static void
member_string (JsonBuilder * b, const char *name, const char *value)
{
  json_builder_set_member_name (b, name);
  if (value != NULL)
    json_builder_add_string_value (b, value);
  else
    json_builder_add_null_value (b);
}

static void
member_null (JsonBuilder * b, const char *name)
{
  json_builder_set_member_name (b, name);
  json_builder_add_null_value (b);
}

static void
add_latency (JsonBuilder * b, const Latency * l)
{
  const char *names[] = { "p50", "p95", "p99", "min", "max", "mean" };
  const gdouble values[] = { l->p50, l->p95, l->p99, l->min, l->max, l->mean };

  json_builder_set_member_name (b, "latency_ms");
  json_builder_begin_object (b);
  for (guint i = 0; i < G_N_ELEMENTS (names); i++) {
    if (l->n > 0)
      member_double (b, names[i], values[i]);
    else
      member_null (b, names[i]);
  }
  member_int (b, "n", l->n);
  json_builder_set_member_name (b, "series");
  json_builder_begin_array (b);
  for (guint i = 0; i < l->series->len; i++)
    json_builder_add_double_value (b, g_array_index (l->series, gdouble, i));
  json_builder_end_array (b);
  json_builder_end_object (b);
}

static void
add_check (JsonBuilder * b, const GstStructure * summary)
{
  const char *fields[] = { "valid", "failed", "lost", "duplicated",
    "reordered"
  };

  json_builder_set_member_name (b, "check");
  if (summary == NULL) {
    json_builder_add_null_value (b);
    return;
  }
  json_builder_begin_object (b);
  for (guint i = 0; i < G_N_ELEMENTS (fields); i++) {
    guint64 v = 0;

    gst_structure_get_uint64 (summary, fields[i], &v);
    member_int (b, fields[i], v);
  }
  json_builder_end_object (b);
}

/* The child's entries of a list (threads, elements), marked as its. */
static void
add_child_entries (JsonBuilder * b, Bench * bench, const char *name)
{
  JsonNode *node = bench->child_result != NULL ?
      json_object_get_member (bench->child_result, name) : NULL;

  if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node))
    return;
  for (guint i = 0; i < json_array_get_length (json_node_get_array (node)); i++) {
    JsonNode *entry =
        json_node_copy (json_array_get_element (json_node_get_array (node),
            i));

    if (JSON_NODE_HOLDS_OBJECT (entry))
      json_object_set_string_member (json_node_get_object (entry), "process",
          "send");
    json_builder_add_value (b, entry);
  }
}

static void
add_elements (JsonBuilder * b, Bench * bench, guint64 frames)
{
  json_builder_set_member_name (b, "elements");
  json_builder_begin_array (b);
  for (guint i = 0; bench->elements != NULL && i < bench->elements->len; i++) {
    BenchElementCpu *e = bench->elements->pdata[i];

    json_builder_begin_object (b);
    if (bench->child != NULL)
      member_string (b, "process", "recv");
    member_string (b, "name", e->name);
    member_string (b, "factory", e->factory);
    member_double (b, "cpu_ms", e->cpu_ns / 1e6);
    member_double (b, "cpu_ms_per_frame", frames > 0 ?
        e->cpu_ns / 1e6 / frames : 0);
    json_builder_end_object (b);
  }
  add_child_entries (b, bench, "elements");
  json_builder_end_array (b);
}

static void
add_cpu (JsonBuilder * b, gdouble user_s, gdouble system_s, gint64 frames)
{
  json_builder_set_member_name (b, "cpu_s");
  json_builder_begin_object (b);
  member_double (b, "user", user_s);
  member_double (b, "system", system_s);
  member_double (b, "total", user_s + system_s);
  json_builder_end_object (b);
  member_double (b, "cpu_ms_per_frame", frames > 0 ?
      (user_s + system_s) * 1000 / frames : 0);
}

static char *
result_to_json (Bench * bench, const Result * r)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;
  const Options *o = bench->o;

  json_builder_begin_object (b);
  member_string (b, "tool", "legba-bench");
  member_string (b, "mode", bench->mode);
  member_string (b, "pipeline", g_str_equal (bench->mode, "pipeline") ?
      bench->lines[0]->description : NULL);
  member_string (b, "send", o->send);
  member_string (b, "recv", o->recv);
  member_int (b, "frames", r->frames);
  member_int (b, "frames_in", r->frames_in);
  member_int (b, "frames_out", r->frames_out);
  member_int (b, "frames_in_total", r->frames_in_total);
  member_int (b, "frames_out_total", r->frames_out_total);
  member_int (b, "warmup_frames", o->warmup);
  member_double (b, "seconds", r->seconds);
  add_cpu (b, r->user_s, r->system_s, r->frames);
  if (bench->child != NULL) {
    json_builder_set_member_name (b, "processes");
    json_builder_begin_object (b);
    json_builder_set_member_name (b, "send");
    json_builder_begin_object (b);
    add_cpu (b, child_double (bench, "cpu_s.user", 0),
        child_double (bench, "cpu_s.system", 0), r->frames);
    json_builder_end_object (b);
    json_builder_set_member_name (b, "recv");
    json_builder_begin_object (b);
    add_cpu (b, (bench->cpu_end.user_us - bench->cpu_start.user_us) / 1e6,
        (bench->cpu_end.system_us - bench->cpu_start.system_us) / 1e6,
        r->frames);
    json_builder_end_object (b);
    json_builder_end_object (b);
  }
  json_builder_set_member_name (b, "threads");
  json_builder_begin_array (b);
  bench_cpu_add_threads (b, &bench->cpu_start, &bench->cpu_end, r->frames,
      bench->child != NULL ? "recv" : NULL);
  add_child_entries (b, bench, "threads");
  json_builder_end_array (b);
  add_elements (b, bench, r->frames);
  add_latency (b, &r->latency);
  add_check (b, bench->out_line->summary);
  if (r->bitrate_bps >= 0) {
    member_double (b, "bitrate_bps", r->bitrate_bps);
    json_builder_set_member_name (b, "encoded");
    json_builder_begin_object (b);
    member_string (b, "element", o->enc);
    member_int (b, "bytes", r->enc_bytes);
    member_int (b, "buffers", r->enc_buffers);
    member_double (b, "seconds", r->enc_seconds);
    json_builder_end_object (b);
  } else {
    member_null (b, "bitrate_bps");
    member_null (b, "encoded");
  }
  bench_conditions_add (bench->conditions, b);
  json_builder_end_object (b);

  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  return json_generator_to_data (gen, NULL);
}

/* ---- text ---- */

static gint
by_ms_per_frame_desc (gconstpointer a, gconstpointer b)
{
  gdouble x = json_object_get_double_member (*(JsonObject * const *) a,
      "cpu_ms_per_frame");
  gdouble y = json_object_get_double_member (*(JsonObject * const *) b,
      "cpu_ms_per_frame");

  return x < y ? 1 : x > y ? -1 : 0;
}

/* The busiest max entries of a list, both processes' merged. */
static void
print_list (const char *title, JsonNode * list, guint max)
{
  JsonArray *a = json_node_get_array (list);
  g_autoptr (GPtrArray) sorted = g_ptr_array_new ();

  for (guint i = 0; i < json_array_get_length (a); i++)
    g_ptr_array_add (sorted, json_array_get_object_element (a, i));
  g_ptr_array_sort (sorted, by_ms_per_frame_desc);
  for (guint i = 0; i < sorted->len && i < max; i++) {
    JsonObject *e = sorted->pdata[i];
    const char *process = json_object_get_string_member_with_default (e,
        "process", NULL);
    const char *factory = json_object_get_string_member_with_default (e,
        "factory", NULL);
    const char *task = json_object_get_string_member_with_default (e,
        "task", NULL);
    const char *name = json_object_get_string_member (e, "name");

    /* a thread without a task: the main thread, or one a library
     * started (with the name of the thread that started it) */
    g_print ("%-11s %7.3f ms per frame  %s%s%s%s%s%s\n", i == 0 ? title : "",
        json_object_get_double_member (e, "cpu_ms_per_frame"),
        task != NULL ? task : name,
        factory != NULL ? " (" : "", factory != NULL ? factory : "",
        factory != NULL ? ")" : "",
        json_object_has_member (e, "task") && task == NULL ?
        " (not a streaming thread)" : "",
        process != NULL ? (g_str_equal (process, "send") ? " [send]" :
            " [recv]") : "");
  }
}

static void
result_print (Bench * bench, const Result * r, const char *json)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *root;
  const GstStructure *summary = bench->out_line->summary;
  const Latency *l = &r->latency;

  json_parser_load_from_data (parser, json, -1, NULL);
  root = json_node_get_object (json_parser_get_root (parser));

  g_print ("frames      %" G_GINT64_FORMAT " in, %" G_GINT64_FORMAT
      " out over %.2f s (after %d warm-up frames)\n", r->frames_in,
      r->frames_out, r->seconds, bench->o->warmup);
  g_print ("CPU         %.3f ms per frame: user %.3f s, system %.3f s "
      "over %" G_GINT64_FORMAT " frames (%.0f%% of one CPU)\n",
      r->frames > 0 ? (r->user_s + r->system_s) * 1000 / r->frames : 0,
      r->user_s, r->system_s, r->frames, r->seconds > 0 ?
      (r->user_s + r->system_s) / r->seconds * 100 : 0);
  if (l->n > 0)
    g_print ("latency     p50 %.2f ms, p95 %.2f ms, p99 %.2f ms (n %"
        G_GUINT64_FORMAT "; min %.2f, max %.2f, mean %.2f)\n", l->p50, l->p95,
        l->p99, l->n, l->min, l->max, l->mean);
  else
    g_print ("latency     not measured (%s)\n", bench->out_line->check ?
        "no frame with a valid code" : "no legbastampcheck");
  if (summary != NULL) {
    guint64 v[5] = { 0 };

    gst_structure_get (summary, "valid", G_TYPE_UINT64, &v[0], "failed",
        G_TYPE_UINT64, &v[1], "lost", G_TYPE_UINT64, &v[2], "duplicated",
        G_TYPE_UINT64, &v[3], "reordered", G_TYPE_UINT64, &v[4], NULL);
    g_print ("check       %" G_GUINT64_FORMAT " valid, %" G_GUINT64_FORMAT
        " failed, %" G_GUINT64_FORMAT " lost, %" G_GUINT64_FORMAT
        " duplicated, %" G_GUINT64_FORMAT " reordered\n", v[0], v[1], v[2],
        v[3], v[4]);
  }
  if (r->bitrate_bps >= 0)
    g_print ("bitrate     %.1f kbit/s (%s: %" G_GUINT64_FORMAT " bytes in %"
        G_GUINT64_FORMAT " buffers over %.2f s of stream)\n",
        r->bitrate_bps / 1000, bench->o->enc, r->enc_bytes, r->enc_buffers,
        r->enc_seconds);
  else
    g_print ("bitrate     not measured (no element named %s)\n", bench->o->enc);
  print_list ("threads", json_object_get_member (root, "threads"), 6);
  print_list ("elements", json_object_get_member (root, "elements"), 8);
  bench_conditions_print (bench->conditions);
}

/* ---- main ---- */

static int
usage_error (const char *message)
{
  g_printerr ("%s: %s\nTry '%s --help' for more information.\n",
      g_get_prgname (), message, g_get_prgname ());
  return EXIT_USAGE;
}

static const char *
check_options (Options * o, int argc)
{
  if (o->frames < 0 || o->seconds < 0 || o->warmup < 0 || o->timeout < 0)
    return "--frames, --seconds, --warmup and --timeout take positive numbers";
  if (o->frames > 0 && o->seconds > 0)
    return "--frames and --seconds exclude each other";
  if ((o->send == NULL) != (o->recv == NULL))
    return "--send and --recv go together";
  if (o->send != NULL && argc > 1)
    return "give a PIPELINE or --send and --recv, not both";
  if (o->send == NULL && argc <= 1)
    return "no PIPELINE";
  if (o->processes && o->send == NULL)
    return "--processes needs --send and --recv";
  if ((guint64) o->warmup + o->frames > G_MAXINT / 2)
    return "too many frames";
  return NULL;
}

static void
set_defaults (Options * o)
{
  if (o->frames == 0 && o->seconds == 0)
    o->frames = DEFAULT_FRAMES;
  if (o->enc == NULL)
    o->enc = g_strdup (DEFAULT_ENC);
  /* room for 5 frames a second, and a minute to start and stop */
  if (o->timeout == 0)
    o->timeout = 60 + (o->seconds > 0 ? o->seconds : 0) +
        (o->warmup + o->frames) / 5.0;
}

/* docs/benchmarks.md, "Runs": the harness refuses to measure a debug
 * build. */
static gboolean
build_measurable (void)
{
  return g_str_equal (LEGBA_BUILD_TYPE, "release") && !LEGBA_BUILD_SANITIZED;
}

static int
run (Options * o, const char *pipeline, int argc, char **argv)
{
  Bench bench = { 0 };
  g_autoptr (GError) error = NULL;
  g_autofree char *json = NULL;
  Result r;
  int status = EXIT_SUCCESS;

  bench.o = o;
  bench.progress = !o->no_progress && isatty (STDERR_FILENO);
  bench.conditions = bench_conditions_start (argc, argv);
  if (!bench_setup (&bench, pipeline, &error)
      || !bench_run (&bench, &error)) {
    g_printerr ("legba-bench: %s\n", error->message);
    status = EXIT_FAILED;
  } else {
    result_compute (&bench, &r);
    json = result_to_json (&bench, &r);
    if (o->json)
      g_print ("%s\n", json);
    else
      result_print (&bench, &r, json);
    result_clear (&r);
  }

  for (guint i = 0; i < bench.n_lines; i++)
    line_free (bench.lines[i]);
  if (bench.child != NULL) {
    if (status != EXIT_SUCCESS)
      g_subprocess_send_signal (bench.child, SIGTERM);
    g_subprocess_wait (bench.child, NULL, NULL);
    g_object_unref (bench.child);
  }
  g_clear_pointer (&bench.child_result, json_object_unref);
  g_clear_pointer (&bench.elements, g_ptr_array_unref);
  g_clear_pointer (&bench.loop, g_main_loop_unref);
  bench_cpu_clear (&bench.cpu_start);
  bench_cpu_clear (&bench.cpu_end);
  bench_conditions_free (bench.conditions);
  return status;
}

int
main (int argc, char **argv)
{
  Options o = { 0 };
  const GOptionEntry entries[] = {
    {"frames", 'f', 0, G_OPTION_ARG_INT64, &o.frames,
        "Measure N frames (default 300)", "N"},
    {"seconds", 's', 0, G_OPTION_ARG_DOUBLE, &o.seconds,
        "Measure S seconds instead", "S"},
    {"warmup", 'w', 0, G_OPTION_ARG_INT, &o.warmup,
        "Let W frames through before measuring; the latency figures skip "
          "their samples (default 0: the run from its start)", "W"},
    {"json", 0, 0, G_OPTION_ARG_NONE, &o.json,
        "Print one JSON object", NULL},
    {"send", 0, 0, G_OPTION_ARG_STRING, &o.send,
        "The sending line (with --recv)", "PIPELINE"},
    {"recv", 0, 0, G_OPTION_ARG_STRING, &o.recv,
        "The receiving line (with --send)", "PIPELINE"},
    {"processes", 0, 0, G_OPTION_ARG_NONE, &o.processes,
        "Run the sending line in a second process", NULL},
    {"allow-debug", 0, 0, G_OPTION_ARG_NONE, &o.allow_debug,
        "Measure even a build of Legba that is not a release build", NULL},
    {"enc", 0, 0, G_OPTION_ARG_STRING, &o.enc,
        "The element whose output is the encoded stream, for the bitrate "
          "(default enc)", "NAME"},
    {"timeout", 0, 0, G_OPTION_ARG_DOUBLE, &o.timeout,
        "Give up after S seconds (default: 60, plus the seconds, plus a "
          "fifth of a second a frame)", "S"},
    {"no-elements", 0, 0, G_OPTION_ARG_NONE, &o.no_elements,
        "No CPU time per element (no tracer in the pipeline's way)", NULL},
    {"no-progress", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE,
        &o.no_progress, "No progress line", NULL},
    G_OPTION_ENTRY_NULL
  };
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) original = g_strdupv (argv);
  g_autofree char *pipeline = NULL;
  const char *problem;
  int status;

  setlocale (LC_ALL, "");
  setlocale (LC_NUMERIC, "C");
  context = g_option_context_new ("[PIPELINE]");
  g_option_context_add_main_entries (context, entries, NULL);
  g_option_context_add_group (context, gst_init_get_option_group ());
  g_option_context_set_summary (context,
      "Runs PIPELINE (a gst-launch-1.0 line), or a --send line and a --recv\n"
      "line, and prints CPU per frame, glass-to-glass latency (from a\n"
      "legbastamp before the encoder and a legbastampcheck after the\n"
      "decoder), frames in and out, the bitrate of the element named enc,\n"
      "and the conditions of the run.");
  g_option_context_set_description (context,
      "Frames enter where legbastamp stamps them (else at the first\n"
      "source) and leave where legbastampcheck reads them (else at the\n"
      "first sink). CPU per frame is the process's user+sys time over the\n"
      "frames that entered; with --processes, both processes' time.\n"
      "Sender and receiver read one clock: CLOCK_MONOTONIC of this host.\n"
      "\n"
      "Exit status: 0 measured, 1 the run failed, 2 usage error, 3 refused\n"
      "to measure a build that is not a release build.\n");

  if (!g_option_context_parse (context, &argc, &argv, &error)) {
    status = usage_error (error->message);
    goto out;
  }
  if (argc > 1 && g_str_equal (argv[1], "--")) {
    memmove (argv + 1, argv + 2, (argc - 1) * sizeof (char *));
    argc--;
  }
  problem = check_options (&o, argc);
  if (problem != NULL) {
    status = usage_error (problem);
    goto out;
  }
  set_defaults (&o);
  if (!o.allow_debug && !build_measurable ()) {
    g_printerr ("legba-bench: refusing to measure a %s build of Legba%s: "
        "build it with meson setup -Dbuildtype=release, or pass "
        "--allow-debug\n", LEGBA_BUILD_TYPE, LEGBA_BUILD_SANITIZED ?
        " with sanitizers" : "");
    status = EXIT_REFUSED;
    goto out;
  }
  if (argc > 1)
    pipeline = g_strjoinv (" ", argv + 1);

  if (!o.no_elements)
    bench_tracer_install ();
  status = run (&o, pipeline, g_strv_length (original), original);

out:
  g_free (o.send);
  g_free (o.recv);
  g_free (o.enc);
  gst_deinit ();
  return status;
}
