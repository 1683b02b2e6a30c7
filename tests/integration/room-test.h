/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What the LegbaRoom tests share (room-test.c): participants made of a
 * pipeline, a room and a signaller, that count the frames they decode
 * from each remote participant; and an in-process signaller whose hub
 * lets a test hold, reorder and forge signals.
 */
#pragma once

#include "signal-test.h"
#include "test-hub.h"

/* Built with AddressSanitizer (-Dsanitize=true): every allocation costs
 * far more, so the heaviest tests do less (docs say which). */
#if defined(__SANITIZE_ADDRESS__)
#define ROOM_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ROOM_SANITIZED 1
#endif
#endif
#ifndef ROOM_SANITIZED
#define ROOM_SANITIZED 0
#endif

/* Media tests decode on a machine that may be busy (CI runs the suite
 * under AddressSanitizer too): their waits are long. They end as soon as
 * what they wait for happens; the deadline only turns a hang into a
 * failure. */
#define ROOM_WAIT_MS (ROOM_SANITIZED ? 120000 : 60000)

#define ROOM_WAIT_FOR(expr, reason) G_STMT_START { \
    gboolean expired_; \
    GSource *deadline_ = deadline_new (ROOM_WAIT_MS, &expired_); \
    while (!(expr) && !expired_) \
      g_main_context_iteration (NULL, TRUE); \
    deadline_free (deadline_); \
    if (!(expr)) \
      g_error ("Timed out after %d ms waiting for %s", ROOM_WAIT_MS, \
          reason); \
  } G_STMT_END

/* gst_init, g_test_init, and the one GStreamer 1.22 critical the tests
 * let through (room-test.c says which and why) */
void room_test_init (int *argc, char ***argv);

/* ---- Participants ---- */

typedef struct
{
  char *id;
  guint64 frames[2];            /* decoded, by LegbaTrackKind */
  gint64 first_video_time;      /* monotonic, of the first decoded frame */
  gint64 last_video_time;       /* monotonic, of the last decoded frame */
  gint64 max_video_gap;         /* us, the longest between two frames */
  GstElement *decoders[2];
  GstPad *pads[2];
} Remote;

typedef struct
{
  GstElement *pipeline;
  LegbaSignaller *signaller;
  LegbaRoom *room;
  char *identity;
  GHashTable *remotes;          /* participant id -> Remote */
  GMutex lock;                  /* frames are counted on streaming threads */
  guint joined;
  guint left;
  guint tracks_added;
  guint tracks_removed;
  GPtrArray *errors;            /* GError */
  gboolean connect_done;
  GError *connect_error;
  gint64 connect_started;
  GstElement *sources[2];
} Participant;

/* video: "h264", "vp8" or NULL for none */
Participant *participant_new (LegbaSignaller * signaller, const char *identity,
    const char *video, gboolean audio);
Participant *participant_new_for_server (Fixture * f, const char *identity,
    const char *video, gboolean audio);
void participant_free (Participant * p);
/* bin: a source with a "src" pad, linked to a new track of kind, added to
 * the pipeline in its state; the participant owns it from then */
void participant_publish (Participant * p, LegbaTrackKind kind,
    GstElement * bin);
void participant_connect (Participant * p);
void participant_connect_and_wait (Participant * p);
guint64 participant_frames (Participant * p, Participant * from,
    LegbaTrackKind kind);
gboolean participant_decodes (Participant * p, Participant * from,
    guint64 frames);
/* The longest time, in microseconds, between two video frames p decoded
 * from from since the last reset; reset: start again from now. */
gint64 participant_video_gap (Participant * p, Participant * from,
    gboolean reset);
guint participant_peer_bins (Participant * p);
LegbaParticipant *participant_find (Participant * p, Participant * other);
gboolean participant_connected_to (Participant * p, Participant * other);
void assert_no_room_errors (Participant * p);
void wait_until_all_decode (Participant ** all, guint n, guint64 frames);

/* The elements made by factory_name anywhere inside bin (a reference to
 * each), read again from the start if the bin changes meanwhile. */
GPtrArray *elements_by_factory (GstElement * bin, const char *factory_name);
/* For a pipeline's element-added: the webrtcbin of element when it is a
 * room's peer bin (a new reference), else NULL. */
GstElement *peer_bin_webrtcbin (GstElement * element);
