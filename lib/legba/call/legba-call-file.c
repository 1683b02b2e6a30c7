/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The video file source of a LegbaCall: a pipeline of its own decodes the
 * file at its own pace in real time (an appsink that syncs on its clock),
 * scaled to the call's size and frame rate, and hands each frame to the
 * call pipeline's live appsrc, which stamps it with the call's running
 * time. At the end of the file the player seeks back to the start, so the
 * file plays in a loop and the receivers see one continuous stream.
 */
#include <legba/call/legba-call-private.h>

#include <gst/app/app.h>

GST_DEBUG_CATEGORY_EXTERN (legba_call_debug);
#define GST_CAT_DEFAULT legba_call_debug

struct _LegbaCallFile
{
  GstElement *pipeline;
  GSource *bus_source;
  LegbaCall *call;              /* unowned: the call owns the player */
  GstElement *appsrc;           /* in the call's pipeline */
  char *path;
  /* frames since the player started, and at the last loop */
  gint frames;
  gint frames_at_loop;
};

static GstFlowReturn
on_new_sample (GstAppSink * sink, gpointer data)
{
  LegbaCallFile *file = data;
  GstSample *sample = gst_app_sink_pull_sample (sink);
  GstBuffer *buffer;

  if (sample == NULL)
    return GST_FLOW_EOS;
  /* the call's appsrc stamps it with its own running time */
  buffer = gst_buffer_copy (gst_sample_get_buffer (sample));
  GST_BUFFER_PTS (buffer) = GST_BUFFER_DTS (buffer) = GST_CLOCK_TIME_NONE;
  GST_BUFFER_DURATION (buffer) = GST_CLOCK_TIME_NONE;
  gst_sample_unref (sample);
  g_atomic_int_inc (&file->frames);
  /* FLUSHING while the call pipeline stops: not the player's concern */
  gst_app_src_push_buffer (GST_APP_SRC (file->appsrc), buffer);
  return GST_FLOW_OK;
}

static gboolean
on_player_message (GstBus * bus, GstMessage * message, gpointer data)
{
  LegbaCallFile *file = data;
  g_autoptr (GError) gerror = NULL;
  g_autofree char *debug = NULL;
  GError *error;
  gint frames;

  switch (GST_MESSAGE_TYPE (message)) {
    case GST_MESSAGE_EOS:
      frames = g_atomic_int_get (&file->frames);
      if (frames == file->frames_at_loop) {
        error = g_error_new (LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_FAILED,
            "Video file %s has no video frames", file->path);
        legba_call_fail (file->call, error);
        g_error_free (error);
        return G_SOURCE_CONTINUE;
      }
      file->frames_at_loop = frames;
      GST_INFO ("%s ended after %d frames: from the start again", file->path,
          frames);
      if (!gst_element_seek_simple (file->pipeline, GST_FORMAT_TIME,
              GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_KEY_UNIT, 0)) {
        error = g_error_new (LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_FAILED,
            "Video file %s cannot be played again from the start", file->path);
        legba_call_fail (file->call, error);
        g_error_free (error);
      }
      break;
    case GST_MESSAGE_ERROR:
      gst_message_parse_error (message, &gerror, &debug);
      GST_WARNING ("%s: %s (%s)", file->path, gerror->message, debug);
      error = g_error_new (LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_FAILED,
          "Video file %s: %s", file->path, gerror->message);
      legba_call_fail (file->call, error);
      g_error_free (error);
      break;
    default:
      break;
  }
  return G_SOURCE_CONTINUE;
}

LegbaCallFile *
legba_call_file_new (LegbaCall * call, const char *path, GstElement * appsrc,
    guint width, guint height, guint framerate, GMainContext * context,
    GError ** error)
{
  g_autofree char *quoted = g_strescape (path, NULL);
  g_autofree char *desc = g_strdup_printf ("filesrc location=\"%s\" ! "
      "decodebin ! videoconvert ! videoscale ! videorate ! "
      "video/x-raw,format=I420,width=%u,height=%u,framerate=%u/1,"
      "pixel-aspect-ratio=1/1 ! appsink name=sink sync=true "
      "max-buffers=2 drop=true", quoted, width, height, framerate);
  GstAppSinkCallbacks callbacks = {.new_sample = on_new_sample };
  g_autoptr (GstBus) bus = NULL;
  GstElement *sink;
  LegbaCallFile *file;
  GError *e = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &e);

  if (pipeline == NULL) {
    g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_MISSING_PLUGIN,
        "Cannot build the video file player: %s", e->message);
    g_error_free (e);
    return NULL;
  }
  file = g_new0 (LegbaCallFile, 1);
  file->pipeline = gst_object_ref_sink (pipeline);
  file->call = call;
  file->path = g_strdup (path);
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  file->appsrc = gst_object_ref (appsrc);
  gst_app_sink_set_callbacks (GST_APP_SINK (sink), &callbacks, file, NULL);
  gst_object_unref (sink);
  bus = gst_element_get_bus (pipeline);
  file->bus_source = gst_bus_create_watch (bus);
  g_source_set_callback (file->bus_source, G_SOURCE_FUNC (on_player_message),
      file, NULL);
  g_source_attach (file->bus_source, context);
  return file;
}

gboolean
legba_call_file_play (LegbaCallFile * file, GError ** error)
{
  if (gst_element_set_state (file->pipeline, GST_STATE_PLAYING) ==
      GST_STATE_CHANGE_FAILURE) {
    g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_FAILED,
        "Video file %s cannot be played", file->path);
    return FALSE;
  }
  return TRUE;
}

void
legba_call_file_free (LegbaCallFile * file)
{
  gst_element_set_state (file->pipeline, GST_STATE_NULL);
  g_source_destroy (file->bus_source);
  g_source_unref (file->bus_source);
  gst_object_unref (file->pipeline);
  gst_object_unref (file->appsrc);
  g_free (file->path);
  g_free (file);
}
