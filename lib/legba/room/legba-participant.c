/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#include <legba/room/legba-room-private.h>

G_DEFINE_ENUM_TYPE (LegbaParticipantState, legba_participant_state,
    G_DEFINE_ENUM_VALUE (LEGBA_PARTICIPANT_STATE_NEW, "new"),
    G_DEFINE_ENUM_VALUE (LEGBA_PARTICIPANT_STATE_CONNECTING, "connecting"),
    G_DEFINE_ENUM_VALUE (LEGBA_PARTICIPANT_STATE_CONNECTED, "connected"),
    G_DEFINE_ENUM_VALUE (LEGBA_PARTICIPANT_STATE_RECONNECTING,
        "reconnecting"),
    G_DEFINE_ENUM_VALUE (LEGBA_PARTICIPANT_STATE_AWAY, "away"),
    G_DEFINE_ENUM_VALUE (LEGBA_PARTICIPANT_STATE_FAILED, "failed"),
    G_DEFINE_ENUM_VALUE (LEGBA_PARTICIPANT_STATE_LEFT, "left"));

G_DEFINE_FINAL_TYPE (LegbaParticipant, legba_participant, G_TYPE_OBJECT);

enum
{
  PROP_0,
  PROP_ID,
  PROP_IDENTITY,
  PROP_NAME,
  PROP_STATE,
  PROP_STATS,
  N_PROPERTIES
};

static GParamSpec *properties[N_PROPERTIES];

static void
legba_participant_finalize (GObject * object)
{
  LegbaParticipant *self = LEGBA_PARTICIPANT (object);

  g_assert (self->peer == NULL);
  g_free (self->id);
  g_free (self->identity);
  g_free (self->name);
  g_clear_pointer (&self->stats, gst_structure_free);
  G_OBJECT_CLASS (legba_participant_parent_class)->finalize (object);
}

static void
legba_participant_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  LegbaParticipant *self = LEGBA_PARTICIPANT (object);

  switch (prop_id) {
    case PROP_ID:
      g_value_set_string (value, self->id);
      break;
    case PROP_IDENTITY:
      g_value_set_string (value, self->identity);
      break;
    case PROP_NAME:
      g_value_set_string (value, self->name);
      break;
    case PROP_STATE:
      g_value_set_enum (value, self->state);
      break;
    case PROP_STATS:
      g_value_take_boxed (value, legba_participant_get_stats (self));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
}

static void
legba_participant_class_init (LegbaParticipantClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);

  gobject_class->finalize = legba_participant_finalize;
  gobject_class->get_property = legba_participant_get_property;

  /**
   * LegbaParticipant:id:
   *
   * The participant id, `IDENTITY-SUFFIX` (docs/room-protocol.md §2).
   */
  properties[PROP_ID] = g_param_spec_string ("id", "Id",
      "The participant id, IDENTITY-SUFFIX", NULL,
      G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  /**
   * LegbaParticipant:identity:
   *
   * The identity it joined as (the presence `user_info.identity`, or the
   * id's prefix when the server gave none).
   */
  properties[PROP_IDENTITY] = g_param_spec_string ("identity", "Identity",
      "The identity the participant joined as", NULL,
      G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  /**
   * LegbaParticipant:name:
   *
   * Its display name (`user_info.name`, or the identity).
   */
  properties[PROP_NAME] = g_param_spec_string ("name", "Name",
      "The participant's display name", NULL,
      G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  /**
   * LegbaParticipant:state:
   *
   * Where the peer connection with this participant stands.
   */
  properties[PROP_STATE] = g_param_spec_enum ("state", "State",
      "Where the peer connection with this participant stands",
      LEGBA_TYPE_PARTICIPANT_STATE, LEGBA_PARTICIPANT_STATE_NEW,
      G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  /**
   * LegbaParticipant:stats:
   *
   * A summary of the peer connection's statistics (see
   * legba_participant_get_stats()), refreshed every
   * #LegbaRoom:stats-interval milliseconds.
   */
  properties[PROP_STATS] = g_param_spec_boxed ("stats", "Stats",
      "Summary of the peer connection's statistics", GST_TYPE_STRUCTURE,
      G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);

  g_object_class_install_properties (gobject_class, N_PROPERTIES, properties);
}

static void
legba_participant_init (LegbaParticipant * self)
{
  self->state = LEGBA_PARTICIPANT_STATE_NEW;
}

/* The identity is the id without its last `-SUFFIX`
 * (docs/room-protocol.md §2). */
static char *
identity_from_id (const char *id)
{
  const char *dash = strrchr (id, '-');

  return dash && dash != id ? g_strndup (id, dash - id) : g_strdup (id);
}

LegbaParticipant *
legba_participant_new (const char *id, LegbaSignalMember * member)
{
  LegbaParticipant *self = g_object_new (LEGBA_TYPE_PARTICIPANT, NULL);
  const char *identity = member ? legba_signal_member_get_identity (member) :
      NULL;
  const char *name = member ? legba_signal_member_get_name (member) : NULL;

  self->id = g_strdup (id);
  self->identity = identity ? g_strdup (identity) : identity_from_id (id);
  self->name = g_strdup (name ? name : self->identity);
  return self;
}

void
legba_participant_set_state (LegbaParticipant * self,
    LegbaParticipantState state)
{
  if (self->state == state)
    return;
  GST_DEBUG ("participant %s: %s -> %s", self->id,
      legba_enum_nick (LEGBA_TYPE_PARTICIPANT_STATE, self->state),
      legba_enum_nick (LEGBA_TYPE_PARTICIPANT_STATE, state));
  self->state = state;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATE]);
}

void
legba_participant_take_stats (LegbaParticipant * self, GstStructure * stats)
{
  g_clear_pointer (&self->stats, gst_structure_free);
  self->stats = stats;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATS]);
}

/**
 * legba_participant_get_id:
 * @self: a #LegbaParticipant
 *
 * Gets the participant id, unique in the room (docs/room-protocol.md §2).
 *
 * Returns: (transfer none): the participant id, `IDENTITY-SUFFIX`
 */
const char *
legba_participant_get_id (LegbaParticipant * self)
{
  g_return_val_if_fail (LEGBA_IS_PARTICIPANT (self), NULL);

  return self->id;
}

/**
 * legba_participant_get_identity:
 * @self: a #LegbaParticipant
 *
 * Gets the identity the participant joined as, from its join token or its
 * app's authentication.
 *
 * Returns: (transfer none): the identity the participant joined as
 */
const char *
legba_participant_get_identity (LegbaParticipant * self)
{
  g_return_val_if_fail (LEGBA_IS_PARTICIPANT (self), NULL);

  return self->identity;
}

/**
 * legba_participant_get_name:
 * @self: a #LegbaParticipant
 *
 * Gets the display name the participant announced.
 *
 * Returns: (transfer none): the display name (the identity when the
 *   participant announced none)
 */
const char *
legba_participant_get_name (LegbaParticipant * self)
{
  g_return_val_if_fail (LEGBA_IS_PARTICIPANT (self), NULL);

  return self->name;
}

/**
 * legba_participant_get_state:
 * @self: a #LegbaParticipant
 *
 * Gets where the peer connection with the participant stands, its
 * #LegbaParticipant:state property.
 *
 * Returns: the #LegbaParticipant:state
 */
LegbaParticipantState
legba_participant_get_state (LegbaParticipant * self)
{
  g_return_val_if_fail (LEGBA_IS_PARTICIPANT (self),
      LEGBA_PARTICIPANT_STATE_LEFT);

  return self->state;
}

/**
 * legba_participant_get_stats:
 * @self: a #LegbaParticipant
 *
 * A summary of webrtcbin's statistics for the peer connection with this
 * participant, as last refreshed (#LegbaRoom:stats-interval), in a
 * structure named `legba-participant-stats`:
 *
 * | field | type | |
 * |---|---|---|
 * | `bitrate-in`, `bitrate-out` | guint64 | bits per second, RTP over the last interval |
 * | `bytes-received`, `bytes-sent` | guint64 | RTP payload and headers since the start |
 * | `packets-received`, `packets-lost` | guint64, gint64 | RTP, all streams from the participant |
 * | `round-trip-time` | gdouble | seconds, from RTCP; 0 until known |
 * | `jitter` | gdouble | seconds, the largest of the incoming streams |
 * | `video-frames-received`, `audio-frames-received` | guint64 | encoded frames depayloaded |
 * | `data-messages-sent`, `data-messages-received` | guint64 | data channel messages, the room's own included |
 * | `data-lossy-dropped`, `data-not-delivered` | guint64 | lossy messages dropped on a congested channel; messages larger than the participant accepts |
 * | `data-queued-bytes` | guint64 | waiting to be sent to the participant now |
 *
 * The RTP figures are 0 until a stream flows either way: webrtcbin is
 * not asked before then.
 *
 * Returns: (transfer full) (nullable): a copy of the summary, or %NULL
 *   before the first one
 */
GstStructure *
legba_participant_get_stats (LegbaParticipant * self)
{
  g_return_val_if_fail (LEGBA_IS_PARTICIPANT (self), NULL);

  return self->stats ? gst_structure_copy (self->stats) : NULL;
}
