/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Participants that record the data they receive, for the data tests.
 */
#pragma once

#include "room-test.h"

G_BEGIN_DECLS

/* one received message */
typedef struct
{
  char *from;
  char *topic;
  char *json;                   /* the data, serialized; NULL for bytes */
  GBytes *bytes;
  LegbaReliability reliability;
} Got;

typedef struct
{
  Participant *p;
  GPtrArray *got;               /* Got */
  guint ready;                  /* ready-to-send emissions */
  char *mute_from;
  gboolean audio_muted, video_muted;
  guint mutes;
} Data;

/* the size of each message sent to a stalled recipient */
#define CHUNK 32768

void got_free (gpointer data);
void on_data (LegbaRoom * room, LegbaParticipant * from, const char *topic,
    JsonNode * node, Data * d);
void on_bytes (LegbaRoom * room, LegbaParticipant * from, GBytes * bytes,
    Data * d);
Data * data_new (Fixture * f, const char *identity);
void data_free (Data * d);
const char * id_of (Data * d);
Got * got (Data * d, guint i);
guint locked_len (GMutex * lock, GPtrArray * array);
void connect_all (Data ** all, guint n);
void free_all (Data ** all, guint n);
guint64 data_stat (Data * d, const char *field);
void send_json (Data * from, const char *json, const char *topic,
    LegbaReliability rel, const char *const *to);
void stall_input (Participant * p, gint * stalled);

G_END_DECLS
