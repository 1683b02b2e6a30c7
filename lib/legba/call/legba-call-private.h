/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What legba-call.c (the object: configuration, state, signals),
 * legba-call-pipeline.c (the pipeline, local tracks, start and stop) and
 * legba-call-remote.c (what is received: decoders, displays, the grid,
 * counters) share.
 */
#pragma once

#include <legba/legba.h>
#include <legba/signal/legba-signal-client.h>

/* The player of a video file source (legba-call-file.c) */
typedef struct _LegbaCallFile LegbaCallFile;

/* The CPU time of a local track's threads (legba-call-cpu.c) */
typedef struct _LegbaTrackCpu LegbaTrackCpu;

/* One remote participant seen during the call; kept after it leaves so
 * that its counters can still be read. */
typedef struct
{
  LegbaCall *call;              /* unowned */
  char *id;
  char *identity;
  gboolean present;
  /* counted on streaming threads, under the call's lock */
  guint64 video_frames;
  guint64 audio_buffers;
  /* main context only */
  guint64 last_video_frames;
  gdouble fps;
  GstStructure *room_stats;     /* the participant's last LegbaRoom stats */
  GstElement *bins[2];          /* by LegbaTrackKind */
  GstPad *room_pads[2];
  GstPad *grid_pad;             /* the compositor's request pad */
  GstElement *checker;          /* legbastampcheck, when measuring */
  gdouble latency[3];           /* p50, p95, p99 ms; -1 unknown */
  guint64 latency_valid;
  guint64 data_messages;        /* application messages received */
  gboolean muted[2];            /* as it announced (legba.mute) */
  gboolean published[2];        /* a track of that kind arrived */
} LegbaCallRemote;

struct _LegbaCall
{
  GObject parent;

  /* configuration */
  char *server_url;
  char *app_key;
  char *app_secret;
  char *app_id;
  char *token;
  char *auth_url;
  char *room_name;
  char *identity;
  char *display_name;
  LegbaCallVideo video;
  char *video_file;
  GstElement *video_element;
  LegbaCallAudio audio;
  LegbaVideoCodec codec;
  LegbaEncoderPrefer encoder_prefer;
  char *encoder_factory;
  guint proof_timeout;
  guint bitrate;
  guint width;
  guint height;
  guint framerate;
  LegbaCallDisplay display;
  guint grid_width;
  guint grid_height;
  GstElement *grid_sink;
  gboolean play_audio;
  gboolean measure_latency;
  guint stats_interval;

  /* running */
  GMainContext *context;
  LegbaCallState state;
  guint generation;             /* bumped by each start and stop */
  GstElement *pipeline;
  GSource *bus_source;
  LegbaSignalClient *client;
  LegbaRoom *room;
  GCancellable *cancellable;
  GstElement *valves[2];        /* by LegbaTrackKind */
  GstElement *encoder;          /* legbavideoenc */
  GstElement *audio_encoder;    /* opusenc */
  GstElement *compositor;
  gpointer x_display;           /* xcb_connection_t, while windows show */
  LegbaCallFile *file;          /* with video "file" */
  GSource *stats_source;
  gboolean muted[2];

  GMutex lock;
  GHashTable *remotes;          /* id -> LegbaCallRemote */
  GPtrArray *order;             /* LegbaCallRemote, in order of arrival */
  guint64 sent_bytes[2];        /* under lock */
  guint64 sent_buffers[2];
  guint64 last_sent_bytes[2];
  gint64 last_stats_time;
  gdouble sent_bitrate[2];
  gdouble cpu_percent;
  gint64 last_cpu_us;
  LegbaTrackCpu *track_cpu[2];  /* by LegbaTrackKind, while started */
  gdouble track_cpu_percent[2]; /* under lock; < 0 unknown */
};

/* gst_parse_bin_from_description() looks for unlinked pads inside child
 * bins too (legbavideoenc, decodebin): ghost the pads by name instead */
void legba_call_ghost (GstElement * bin, const char *element,
    const char *pad);
void legba_call_remote_free (gpointer data);
LegbaCallRemote *legba_call_remote_for (LegbaCall * self,
    LegbaParticipant * participant);
void legba_call_connect_room (LegbaCall * self);
void legba_call_retile (LegbaCall * self);
gboolean legba_call_build_grid (LegbaCall * self, GError ** error);
gboolean legba_call_hold_display (LegbaCall * self, GError ** error);
void legba_call_release_display (LegbaCall * self);
void legba_call_update_remote_stats (LegbaCall * self, gdouble seconds);
void legba_call_remove_tracks (LegbaCall * self);
LegbaCallFile *legba_call_file_new (LegbaCall * call, const char *path,
    GstElement * appsrc, guint width, guint height, guint framerate,
    GMainContext * context, GError ** error);
gboolean legba_call_file_play (LegbaCallFile * file, GError ** error);
void legba_call_file_free (LegbaCallFile * file);
LegbaTrackCpu *legba_track_cpu_new (void);
void legba_track_cpu_free (LegbaTrackCpu * cpu);
void legba_track_cpu_note_thread (LegbaTrackCpu * cpu);
void legba_track_cpu_sample (LegbaTrackCpu * const *cpus, guint n,
    gboolean * sampled, guint64 * used_ns);
void legba_call_fail (LegbaCall * self, GError * error);
void legba_call_emit_warning (LegbaCall * self, GError * error);
void legba_call_emit_video_sink (LegbaCall * self,
    LegbaParticipant * participant, GstElement * sink);
void legba_call_emit_data (LegbaCall * self, LegbaParticipant * participant,
    const char *topic, JsonNode * data);
void legba_call_notify_participant (LegbaCall * self,
    LegbaParticipant * participant, gboolean joined);
G_GNUC_INTERNAL void legba_call_emit_stats_updated (LegbaCall * self);
G_GNUC_INTERNAL void legba_call_set_state (LegbaCall * self,
    LegbaCallState state);
G_GNUC_INTERNAL void legba_call_teardown (LegbaCall * self);
