/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Participants that record the data they receive, for the data tests
 * (test-room-data.c, test-data-elements.c).
 */
#include "room-data-test.h"


void
got_free (gpointer data)
{
  Got *g = data;

  g_free (g->from);
  g_free (g->topic);
  g_free (g->json);
  g_clear_pointer (&g->bytes, g_bytes_unref);
  g_free (g);
}

void
on_data (LegbaRoom * room, LegbaParticipant * from, const char *topic,
    JsonNode * node, Data * d)
{
  Got *g = g_new0 (Got, 1);

  g->from = g_strdup (legba_participant_get_id (from));
  g->topic = g_strdup (topic);
  g->json = json_to_string (node, FALSE);
  g->reliability = legba_room_get_received_reliability (room);
  g_ptr_array_add (d->got, g);
}

void
on_bytes (LegbaRoom * room, LegbaParticipant * from, GBytes * bytes, Data * d)
{
  Got *g = g_new0 (Got, 1);

  g->from = g_strdup (legba_participant_get_id (from));
  g->bytes = g_bytes_ref (bytes);
  g->reliability = legba_room_get_received_reliability (room);
  g_ptr_array_add (d->got, g);
}

static void
on_ready (LegbaRoom * room, LegbaParticipant * to, LegbaReliability rel,
    Data * d)
{
  d->ready++;
}

static void
on_mute (LegbaRoom * room, LegbaParticipant * from, gboolean audio,
    gboolean video, Data * d)
{
  g_free (d->mute_from);
  d->mute_from = g_strdup (legba_participant_get_id (from));
  d->audio_muted = audio;
  d->video_muted = video;
  d->mutes++;
}

Data *
data_new (Fixture * f, const char *identity)
{
  Data *d = g_new0 (Data, 1);

  d->p = participant_new_for_server (f, identity, NULL, FALSE);
  d->got = g_ptr_array_new_with_free_func (got_free);
  g_signal_connect (d->p->room, "data-received", G_CALLBACK (on_data), d);
  g_signal_connect (d->p->room, "bytes-received", G_CALLBACK (on_bytes), d);
  g_signal_connect (d->p->room, "ready-to-send", G_CALLBACK (on_ready), d);
  g_signal_connect (d->p->room, "mute-changed", G_CALLBACK (on_mute), d);
  return d;
}

void
data_free (Data * d)
{
  participant_free (d->p);
  g_ptr_array_unref (d->got);
  g_free (d->mute_from);
  g_free (d);
}

const char *
id_of (Data * d)
{
  return legba_room_get_participant_id (d->p->room);
}

Got *
got (Data * d, guint i)
{
  g_assert_cmpuint (i, <, d->got->len);
  return d->got->pdata[i];
}

/* the length of an array other threads add to under @lock */
guint
locked_len (GMutex * lock, GPtrArray * array)
{
  guint n;

  g_mutex_lock (lock);
  n = array->len;
  g_mutex_unlock (lock);
  return n;
}

void
connect_all (Data ** all, guint n)
{
  for (guint i = 0; i < n; i++)
    participant_connect_and_wait (all[i]->p);
  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < n; j++)
      if (i != j)
        ROOM_WAIT_FOR (participant_connected_to (all[i]->p, all[j]->p),
            "every data channel open");
}

void
free_all (Data ** all, guint n)
{
  for (guint i = n; i > 0; i--)
    data_free (all[i - 1]);
}

guint64
data_stat (Data * d, const char *field)
{
  g_autoptr (GstStructure) s = legba_room_get_data_stats (d->p->room);
  guint64 v = 0;

  g_assert_true (gst_structure_get_uint64 (s, field, &v));
  return v;
}

void
send_json (Data * from, const char *json, const char *topic,
    LegbaReliability rel, const char *const *to)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) node = json_from_string (json, &error);

  g_assert_no_error (error);
  g_assert_true (legba_room_send_json (from->p->room, node, topic, rel, to,
          &error));
  g_assert_no_error (error);
}

static GstPadProbeReturn
drop_while_stalled (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  return g_atomic_int_get ((gint *) data) ? GST_PAD_PROBE_DROP :
      GST_PAD_PROBE_OK;
}

/* Everything arriving at the participant's ICE transports is dropped
 * while *stalled: SCTP gets no acknowledgement from it, as from a peer on
 * a frozen network. ICE's own checks are not data and carry on. */
void
stall_input (Participant * p, gint * stalled)
{
  g_autoptr (GPtrArray) sources = elements_by_factory (p->pipeline, "nicesrc");

  g_assert_cmpuint (sources->len, >, 0);
  for (guint i = 0; i < sources->len; i++) {
    GstPad *pad = gst_element_get_static_pad (sources->pdata[i], "src");

    gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER |
        GST_PAD_PROBE_TYPE_BUFFER_LIST, drop_while_stalled, stalled, NULL);
    gst_object_unref (pad);
  }
}
