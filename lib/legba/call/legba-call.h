/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * LegbaCall:
 *
 * One participant's whole call pipeline: sources (test pattern, camera,
 * file or an element of the application's; test tone or microphone), the
 * encoders, a #LegbaRoom, and for every remote participant a decoder and
 * a display (a window each, one composited grid, application sinks, or
 * none), with live counters.
 *
 * A #LegbaCall builds and runs one participant's call: a video source,
 * an audio source, `legbavideoenc` and `opusenc`, a #LegbaRoom, and for
 * each remote participant a decoder (`decodebin`, hardware decoders first
 * by rank) and a display: one window each, one composited grid re-tiled
 * as people join and leave, application sinks, or none.
 *
 * |[<!-- language="C" -->
 * LegbaCall *call = legba_call_new ("ws://127.0.0.1:6001", "demo", "alice");
 *
 * g_object_set (call, "app-key", "KEY", "token", token, "app-id", "1",
 *     "display", LEGBA_CALL_DISPLAY_GRID, NULL);
 * g_signal_connect (call, "error", G_CALLBACK (on_error), loop);
 * if (!legba_call_start (call, &error))
 *   g_printerr ("%s\n", error->message);
 * g_main_loop_run (loop);
 * ]|
 *
 * Errors found before anything runs (a missing setting, no camera, an
 * unreadable file, a missing element) are returned by legba_call_start();
 * the others (server unreachable, credentials refused, no encoder that
 * works) end the call and are emitted by #LegbaCall::error, and the state
 * becomes %LEGBA_CALL_STATE_FAILED. Nothing waits forever: joining fails
 * at the first failed attempt to reach the server.
 *
 * ## Threads
 *
 * Like #LegbaRoom, a call runs on the thread-default #GMainContext of the
 * thread that created it. Run a #GMainLoop on it and call the call from
 * that thread; its signals are emitted there.
 */
#pragma once

#if !defined(LEGBA_INSIDE) && !defined(LEGBA_COMPILATION)
#error "Only <legba/legba.h> can be included directly."
#endif

#include <gst/gst.h>
#include <legba/legba-api.h>
#include <legba/room/legba-room.h>

G_BEGIN_DECLS

/**
 * LEGBA_CALL_ERROR:
 *
 * Error domain of #LegbaCall. Errors in this domain are from the
 * #LegbaCallError enumeration.
 */
#define LEGBA_CALL_ERROR (legba_call_error_quark ())
LEGBA_API
GQuark legba_call_error_quark (void);

/**
 * LegbaCallError:
 * @LEGBA_CALL_ERROR_INVALID: the configuration cannot work (no server,
 *   room or identity, no way to authenticate, a file that cannot be read,
 *   a call already started)
 * @LEGBA_CALL_ERROR_UNREACHABLE: the signalling server could not be reached
 * @LEGBA_CALL_ERROR_REFUSED: the server refused the credentials or token
 * @LEGBA_CALL_ERROR_FULL: the room is full
 * @LEGBA_CALL_ERROR_NO_CAMERA: the camera was asked for and none is there
 * @LEGBA_CALL_ERROR_NO_MICROPHONE: the microphone was asked for and none is
 *   there
 * @LEGBA_CALL_ERROR_NO_ENCODER: no video encoder works on this machine
 * @LEGBA_CALL_ERROR_MISSING_PLUGIN: a GStreamer element the call needs is
 *   not installed
 * @LEGBA_CALL_ERROR_FAILED: the pipeline failed while running
 * @LEGBA_CALL_ERROR_NO_DISPLAY: windows were asked for (the display
 *   `window`, or `grid` without a #LegbaCall:grid-sink) and there is no
 *   display to show them on (neither `DISPLAY` nor `WAYLAND_DISPLAY` is
 *   set)
 *
 * Errors of #LegbaCall, from legba_call_start() and #LegbaCall::error.
 */
typedef enum
{
  LEGBA_CALL_ERROR_INVALID,
  LEGBA_CALL_ERROR_UNREACHABLE,
  LEGBA_CALL_ERROR_REFUSED,
  LEGBA_CALL_ERROR_FULL,
  LEGBA_CALL_ERROR_NO_CAMERA,
  LEGBA_CALL_ERROR_NO_MICROPHONE,
  LEGBA_CALL_ERROR_NO_ENCODER,
  LEGBA_CALL_ERROR_MISSING_PLUGIN,
  LEGBA_CALL_ERROR_FAILED,
  LEGBA_CALL_ERROR_NO_DISPLAY,
} LegbaCallError;

/**
 * LegbaCallVideo:
 * @LEGBA_CALL_VIDEO_NONE: publish no video
 * @LEGBA_CALL_VIDEO_TEST: a moving test pattern (`videotestsrc`)
 * @LEGBA_CALL_VIDEO_CAMERA: the camera (`v4l2src`, else `autovideosrc`)
 * @LEGBA_CALL_VIDEO_FILE: the video of the file #LegbaCall:video-file,
 *   played once at its own pace
 * @LEGBA_CALL_VIDEO_ELEMENT: the raw video of #LegbaCall:video-element
 *
 * What a call publishes as its video.
 */
typedef enum
{
  LEGBA_CALL_VIDEO_NONE,
  LEGBA_CALL_VIDEO_TEST,
  LEGBA_CALL_VIDEO_CAMERA,
  LEGBA_CALL_VIDEO_FILE,
  LEGBA_CALL_VIDEO_ELEMENT,
} LegbaCallVideo;

#define LEGBA_TYPE_CALL_VIDEO (legba_call_video_get_type ())
LEGBA_API
GType legba_call_video_get_type (void);

/**
 * LegbaCallAudio:
 * @LEGBA_CALL_AUDIO_NONE: publish no audio
 * @LEGBA_CALL_AUDIO_TEST: a test tone (`audiotestsrc`)
 * @LEGBA_CALL_AUDIO_MIC: the microphone (`autoaudiosrc`)
 *
 * What a call publishes as its audio.
 */
typedef enum
{
  LEGBA_CALL_AUDIO_NONE,
  LEGBA_CALL_AUDIO_TEST,
  LEGBA_CALL_AUDIO_MIC,
} LegbaCallAudio;

#define LEGBA_TYPE_CALL_AUDIO (legba_call_audio_get_type ())
LEGBA_API
GType legba_call_audio_get_type (void);

/**
 * LegbaCallDisplay:
 * @LEGBA_CALL_DISPLAY_NONE: decode and count, show nothing
 * @LEGBA_CALL_DISPLAY_WINDOW: one window per remote participant
 * @LEGBA_CALL_DISPLAY_GRID: every remote participant in one composited
 *   window, re-tiled as they join and leave
 * @LEGBA_CALL_DISPLAY_APPSINK: one `appsink` per remote participant,
 *   given to the application by #LegbaCall::video-sink-added
 * @LEGBA_CALL_DISPLAY_UNDECODED: count the frames received, decode
 *   nothing (a viewer that only measures what reaches it;
 *   #LegbaCall:measure-latency reads no stamps)
 *
 * How a call shows the video it receives.
 */
typedef enum
{
  LEGBA_CALL_DISPLAY_NONE,
  LEGBA_CALL_DISPLAY_WINDOW,
  LEGBA_CALL_DISPLAY_GRID,
  LEGBA_CALL_DISPLAY_APPSINK,
  LEGBA_CALL_DISPLAY_UNDECODED,
} LegbaCallDisplay;

#define LEGBA_TYPE_CALL_DISPLAY (legba_call_display_get_type ())
LEGBA_API
GType legba_call_display_get_type (void);

/**
 * LegbaCallState:
 * @LEGBA_CALL_STATE_STOPPED: not started, or stopped
 * @LEGBA_CALL_STATE_STARTING: the pipeline runs and the room is being
 *   joined
 * @LEGBA_CALL_STATE_IN_CALL: in the room
 * @LEGBA_CALL_STATE_FAILED: an error ended the call (#LegbaCall::error
 *   said why); start again to retry
 *
 * Where a #LegbaCall stands, its #LegbaCall:state property.
 */
typedef enum
{
  LEGBA_CALL_STATE_STOPPED,
  LEGBA_CALL_STATE_STARTING,
  LEGBA_CALL_STATE_IN_CALL,
  LEGBA_CALL_STATE_FAILED,
} LegbaCallState;

#define LEGBA_TYPE_CALL_STATE (legba_call_state_get_type ())
LEGBA_API
GType legba_call_state_get_type (void);

LEGBA_API
gboolean legba_call_video_from_string (const char *name,
    LegbaCallVideo * video);
LEGBA_API
gboolean legba_call_audio_from_string (const char *name,
    LegbaCallAudio * audio);
LEGBA_API
gboolean legba_call_display_from_string (const char *name,
    LegbaCallDisplay * display);

#define LEGBA_TYPE_CALL (legba_call_get_type ())
LEGBA_API
G_DECLARE_FINAL_TYPE (LegbaCall, legba_call, LEGBA, CALL, GObject)

LEGBA_API
LegbaCall *legba_call_new (const char *server_url, const char *room,
    const char *identity);

LEGBA_API
gboolean legba_call_start (LegbaCall * self, GError ** error);
LEGBA_API
void legba_call_stop (LegbaCall * self);

LEGBA_API
LegbaCallState legba_call_get_state (LegbaCall * self);
LEGBA_API
LegbaRoom *legba_call_get_room (LegbaCall * self);
LEGBA_API
GstPipeline *legba_call_get_pipeline (LegbaCall * self);

LEGBA_API
void legba_call_set_audio_muted (LegbaCall * self, gboolean muted);
LEGBA_API
gboolean legba_call_get_audio_muted (LegbaCall * self);
LEGBA_API
void legba_call_set_video_muted (LegbaCall * self, gboolean muted);
LEGBA_API
gboolean legba_call_get_video_muted (LegbaCall * self);

LEGBA_API
GStrv legba_call_list_remotes (LegbaCall * self);
LEGBA_API
GstStructure *legba_call_get_remote_stats (LegbaCall * self,
    const char *participant_id);
LEGBA_API
GstStructure *legba_call_get_local_stats (LegbaCall * self);

G_END_DECLS
