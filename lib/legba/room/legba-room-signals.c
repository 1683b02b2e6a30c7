/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The signals a LegbaRoom gets from other participants through its
 * signaller (docs/room-protocol.md §4): offers, answers, candidates and
 * byes go to the room core, sfu-ready to the move to an SFU
 * (legba-room-switch.c); a signal that claims another sender, lacks its
 * type or pc, or carries an unreadable description is dropped with a
 * message.
 *
 * Threads: the room's main context, as the signaller's signals.
 */
#include <legba/room/legba-room-private.h>
#include <legba/common/legba-json.h>

static gboolean
offer_readable (const char *sdp)
{
  GstSDPMessage *message = NULL;
  gboolean readable;

  readable = gst_sdp_message_new_from_text (sdp, &message) == GST_SDP_OK &&
      gst_sdp_message_medias_len (message) > 0;
  g_clear_pointer (&message, gst_sdp_message_free);
  return readable;
}

static void
handle_signal (LegbaRoom * self, const char *from, const char *type,
    const char *pc, JsonObject * signal)
{
  const char *sdp = legba_json_object_get_string (signal, "sdp");
  gint64 now = g_get_monotonic_time ();

  if (strcmp (type, "offer") == 0) {
    /* an unreadable offer must not replace a working connection */
    if (sdp == NULL)
      g_message ("room %s: dropping an offer from %s without sdp",
          self->room_name, from);
    else if (!offer_readable (sdp))
      g_message ("room %s: dropping an unreadable offer from %s",
          self->room_name, from);
    else
      legba_room_core_offer (self->core, from, pc, sdp, now);
  } else if (strcmp (type, "answer") == 0) {
    if (sdp == NULL)
      g_message ("room %s: dropping an answer from %s for pc %s (no sdp)",
          self->room_name, from, pc);
    else
      legba_room_core_answer (self->core, from, pc, sdp);
  } else if (strcmp (type, "candidates") == 0) {
    JsonNode *node = json_object_get_member (signal, "candidates");

    if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node))
      g_message ("room %s: dropping candidates from %s without an array",
          self->room_name, from);
    else
      legba_room_core_candidates (self->core, from, pc,
          json_node_get_array (node), now);
  } else if (strcmp (type, "bye") == 0) {
    if (!legba_room_switch_bye (self, from, pc))
      legba_room_core_bye (self->core, from, pc, now);
  } else if (strcmp (type, "sfu-ready") == 0) {
    legba_room_switch_ready (self, from);
  } else {
    g_message ("room %s: dropping a signal of type '%s' from %s",
        self->room_name, type, from);
  }
}

void
legba_room_on_signal_received (LegbaSignaller * signaller, const char *from,
    JsonObject * signal, LegbaRoom * self)
{
  const char *type = legba_json_object_get_string (signal, "type");
  const char *pc = legba_json_object_get_string (signal, "pc");
  const char *claimed = json_object_has_member (signal, "from") ?
      legba_json_object_get_string (signal, "from") : from;

  if (claimed == NULL || strcmp (claimed, from) != 0) {
    g_message ("room %s: dropping a signal from %s claiming to be from %s",
        self->room_name, from, claimed ? claimed : "(not a string)");
    return;
  }
  if (type == NULL || pc == NULL) {
    g_message ("room %s: dropping a signal from %s without type or pc",
        self->room_name, from);
    return;
  }
  handle_signal (self, from, type, pc, signal);
}
