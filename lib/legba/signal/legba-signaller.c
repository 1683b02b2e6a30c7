/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#include <legba/signal/legba-signaller.h>

#include <string.h>

/**
 * legba_signal_error_quark:
 *
 * Gets the error domain of #LegbaSignaller, %LEGBA_SIGNAL_ERROR: its errors are
 * from the #LegbaSignalError enumeration.
 *
 * Returns: the domain's #GQuark
 */
GQuark
legba_signal_error_quark (void)
{
  return g_quark_from_static_string ("legba-signal-error-quark");
}

G_DEFINE_ENUM_TYPE (LegbaSignallerState, legba_signaller_state,
    G_DEFINE_ENUM_VALUE (LEGBA_SIGNALLER_STATE_DISCONNECTED, "disconnected"),
    G_DEFINE_ENUM_VALUE (LEGBA_SIGNALLER_STATE_CONNECTING, "connecting"),
    G_DEFINE_ENUM_VALUE (LEGBA_SIGNALLER_STATE_CONNECTED, "connected"),
    G_DEFINE_ENUM_VALUE (LEGBA_SIGNALLER_STATE_RECONNECTING, "reconnecting"),
    G_DEFINE_ENUM_VALUE (LEGBA_SIGNALLER_STATE_FAILED, "failed"));

/* docs/room-protocol.md §2 */
#define MAX_ROOM_LENGTH 149
#define SUFFIX_MIN 6
#define SUFFIX_MAX 16
#define SUFFIX_GENERATED 10

struct _LegbaSignalMember
{
  gatomicrefcount ref;
  char *id;
  JsonObject *user_info;
};

G_DEFINE_BOXED_TYPE (LegbaSignalMember, legba_signal_member,
    legba_signal_member_ref, legba_signal_member_unref);

/**
 * legba_signal_member_new:
 * @id: the participant id (the presence `user_id`)
 * @user_info: (nullable) (transfer none): the presence `user_info`, or
 *   %NULL when the server gave none or it was not an object
 *
 * Creates a member. The signaller does this for each member the server
 * lists; an in-process implementation uses it too.
 *
 * Returns: (transfer full): a new #LegbaSignalMember
 */
LegbaSignalMember *
legba_signal_member_new (const char *id, JsonObject * user_info)
{
  LegbaSignalMember *member;

  g_return_val_if_fail (id != NULL, NULL);

  member = g_new0 (LegbaSignalMember, 1);
  g_atomic_ref_count_init (&member->ref);
  member->id = g_strdup (id);
  member->user_info = user_info ? json_object_ref (user_info) :
      json_object_new ();
  return member;
}

/**
 * legba_signal_member_ref:
 * @member: a #LegbaSignalMember
 *
 * Takes a reference on @member.
 *
 * Returns: (transfer full): @member, with one more reference
 */
LegbaSignalMember *
legba_signal_member_ref (LegbaSignalMember * member)
{
  g_return_val_if_fail (member != NULL, NULL);

  g_atomic_ref_count_inc (&member->ref);
  return member;
}

/**
 * legba_signal_member_unref:
 * @member: (transfer full): a #LegbaSignalMember
 *
 * Drops one reference; the last one frees @member.
 */
void
legba_signal_member_unref (LegbaSignalMember * member)
{
  g_return_if_fail (member != NULL);

  if (!g_atomic_ref_count_dec (&member->ref))
    return;
  g_free (member->id);
  json_object_unref (member->user_info);
  g_free (member);
}

/**
 * legba_signal_member_get_id:
 * @member: a #LegbaSignalMember
 *
 * Gets the member's participant id, its presence `user_id`.
 *
 * Returns: (transfer none): the participant id, `IDENTITY-SUFFIX`
 */
const char *
legba_signal_member_get_id (LegbaSignalMember * member)
{
  g_return_val_if_fail (member != NULL, NULL);

  return member->id;
}

static const char *
user_info_string (LegbaSignalMember * member, const char *field)
{
  JsonNode *node = json_object_get_member (member->user_info, field);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (node);
}

/**
 * legba_signal_member_get_identity:
 * @member: a #LegbaSignalMember
 *
 * Gets the identity the member joined as, from its presence `user_info`.
 *
 * Returns: (transfer none) (nullable): `user_info.identity` when it is a
 *   string, else %NULL
 */
const char *
legba_signal_member_get_identity (LegbaSignalMember * member)
{
  g_return_val_if_fail (member != NULL, NULL);

  return user_info_string (member, "identity");
}

/**
 * legba_signal_member_get_name:
 * @member: a #LegbaSignalMember
 *
 * Gets the display name the member announced in its presence `user_info`.
 *
 * Returns: (transfer none) (nullable): `user_info.name`, the display name,
 *   when it is a string, else %NULL
 */
const char *
legba_signal_member_get_name (LegbaSignalMember * member)
{
  g_return_val_if_fail (member != NULL, NULL);

  return user_info_string (member, "name");
}

/**
 * legba_signal_member_get_user_info:
 * @member: a #LegbaSignalMember
 *
 * The whole presence `user_info` (docs/room-protocol.md §2); fields this
 * version does not know are kept. Do not modify it.
 *
 * Returns: (transfer none): the `user_info` object, empty when the server
 *   gave none
 */
JsonObject *
legba_signal_member_get_user_info (LegbaSignalMember * member)
{
  g_return_val_if_fail (member != NULL, NULL);

  return member->user_info;
}

G_DEFINE_INTERFACE (LegbaSignaller, legba_signaller, G_TYPE_OBJECT);

static void
legba_signaller_default_init (LegbaSignallerInterface * iface)
{
  /**
   * LegbaSignaller:state:
   *
   * The #LegbaSignallerState; watch it with #GObject::notify.
   */
  g_object_interface_install_property (iface,
      g_param_spec_enum ("state", "State", "Where the signaller stands",
          LEGBA_TYPE_SIGNALLER_STATE, LEGBA_SIGNALLER_STATE_DISCONNECTED,
          G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS));

  /**
   * LegbaSignaller::joined:
   * @self: the signaller
   * @members: (element-type LegbaSignalMember) (transfer none): the other
   *   members of the room (the local participant is not listed)
   *
   * The room was joined: emitted on the first subscription and again after
   * each reconnection, with the full list each time. Before a repeated
   * #LegbaSignaller::joined, members that are gone from the new list are
   * reported by #LegbaSignaller::member-left.
   */
  g_signal_new ("joined", G_TYPE_FROM_INTERFACE (iface), G_SIGNAL_RUN_LAST,
      0, NULL, NULL, NULL, G_TYPE_NONE, 1,
      G_TYPE_PTR_ARRAY | G_SIGNAL_TYPE_STATIC_SCOPE);

  /**
   * LegbaSignaller::ice-servers:
   * @self: the signaller
   * @uris: (array zero-terminated=1) (transfer none): TURN servers with
   *   credentials for this participant, as webrtcbin URIs
   *   (`turn(s)://USER:PASSWORD@HOST:PORT[?transport=udp|tcp]`, user and
   *   password URI-escaped); may be empty
   *
   * The signalling server handed out TURN credentials for this
   * participant (legba-server does when configured for it; other servers
   * do not, and then this is never emitted). Emitted before
   * #LegbaSignaller::joined, on each subscription that carried them, so a
   * reconnection brings fresh credentials.
   */
  g_signal_new ("ice-servers", G_TYPE_FROM_INTERFACE (iface),
      G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 1,
      G_TYPE_STRV | G_SIGNAL_TYPE_STATIC_SCOPE);

  /**
   * LegbaSignaller::member-joined:
   * @self: the signaller
   * @member: (transfer none): the newcomer
   *
   * A participant joined the room after the local one.
   */
  g_signal_new ("member-joined", G_TYPE_FROM_INTERFACE (iface),
      G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 1,
      LEGBA_TYPE_SIGNAL_MEMBER | G_SIGNAL_TYPE_STATIC_SCOPE);

  /**
   * LegbaSignaller::member-left:
   * @self: the signaller
   * @member: (transfer none): the member that left, as it was listed
   *
   * A participant left the room (for the Pusher protocol, its last
   * connection unsubscribed or closed).
   */
  g_signal_new ("member-left", G_TYPE_FROM_INTERFACE (iface),
      G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 1,
      LEGBA_TYPE_SIGNAL_MEMBER | G_SIGNAL_TYPE_STATIC_SCOPE);

  /**
   * LegbaSignaller::signal-received:
   * @self: the signaller
   * @from: the sender's participant id, as the transport vouches for it
   * @signal: (transfer none): the signal (docs/room-protocol.md §4),
   *   reassembled when it came in `part` messages; `to` is the local
   *   participant and `from` equals @from
   *
   * A signal for the local participant arrived. Do not modify @signal.
   */
  g_signal_new ("signal-received", G_TYPE_FROM_INTERFACE (iface),
      G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 2,
      G_TYPE_STRING | G_SIGNAL_TYPE_STATIC_SCOPE,
      JSON_TYPE_OBJECT | G_SIGNAL_TYPE_STATIC_SCOPE);

  /**
   * LegbaSignaller::event-received:
   * @self: the signaller
   * @event: the event name
   * @data: (transfer none): the event's data: the JSON value it holds when
   *   it parses, else the string itself
   *
   * The application's backend published @event to the room
   * (docs/room-protocol.md §7: a room reports it as data from the participant
   * id `server`, with @event as the topic), or the server told this
   * participant alone (§8: an SFU room's `legba:topology`, which comes
   * just before #LegbaSignaller::joined).
   */
  g_signal_new ("event-received", G_TYPE_FROM_INTERFACE (iface),
      G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 2,
      G_TYPE_STRING | G_SIGNAL_TYPE_STATIC_SCOPE,
      JSON_TYPE_NODE | G_SIGNAL_TYPE_STATIC_SCOPE);

  /**
   * LegbaSignaller::error:
   * @self: the signaller
   * @error: what went wrong, in the %LEGBA_SIGNAL_ERROR domain
   *
   * Something the application should know about. A fatal error is
   * followed by %LEGBA_SIGNALLER_STATE_FAILED; after the others (such as
   * %LEGBA_SIGNAL_ERROR_CONNECT while reconnecting) the signaller carries
   * on by itself.
   */
  g_signal_new ("error", G_TYPE_FROM_INTERFACE (iface), G_SIGNAL_RUN_LAST,
      0, NULL, NULL, NULL, G_TYPE_NONE, 1,
      G_TYPE_ERROR | G_SIGNAL_TYPE_STATIC_SCOPE);
}

/**
 * legba_signaller_join:
 * @self: a #LegbaSignaller
 * @room: the room name (docs/room-protocol.md §2: `[A-Za-z0-9_\-=@,.;]{1,149}`)
 * @participant_id: the local participant id, `IDENTITY-SUFFIX`; keep it for
 *   the participant's lifetime (see
 *   legba_signaller_generate_participant_id())
 * @identity: the local participant's identity, the id's prefix
 * @display_name: (nullable): the name shown to others; %NULL for @identity
 *
 * Starts joining @room. The outcome is reported asynchronously: the state
 * becomes %LEGBA_SIGNALLER_STATE_CONNECTED and #LegbaSignaller::joined is
 * emitted, or #LegbaSignaller::error and %LEGBA_SIGNALLER_STATE_FAILED.
 *
 * Returns: %FALSE with @error set when the arguments or the configuration
 *   are invalid or a room is already joined (nothing started)
 */
gboolean
legba_signaller_join (LegbaSignaller * self, const char *room,
    const char *participant_id, const char *identity,
    const char *display_name, GError ** error)
{
  g_return_val_if_fail (LEGBA_IS_SIGNALLER (self), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  return LEGBA_SIGNALLER_GET_IFACE (self)->join (self, room, participant_id,
      identity, display_name, error);
}

/**
 * legba_signaller_leave:
 * @self: a #LegbaSignaller
 *
 * Leaves the room, if any: the state becomes
 * %LEGBA_SIGNALLER_STATE_DISCONNECTED and no more room signals are
 * emitted. Signals still waiting in the send queue are dropped.
 */
void
legba_signaller_leave (LegbaSignaller * self)
{
  g_return_if_fail (LEGBA_IS_SIGNALLER (self));

  LEGBA_SIGNALLER_GET_IFACE (self)->leave (self);
}

/**
 * legba_signaller_send:
 * @self: a #LegbaSignaller
 * @to: the addressee's participant id
 * @signal: (transfer none): the signal (docs/room-protocol.md §4) without `to`
 *   and `from`, which the signaller sets
 *
 * Queues @signal for @to. Signals leave in the order they were sent; the
 * signaller splits and paces them as the transport requires, and keeps
 * them while it reconnects.
 *
 * Returns: %FALSE with @error set when no room is joined, @signal is not
 *   a §4 signal or it cannot be sent within the size limit
 */
gboolean
legba_signaller_send (LegbaSignaller * self, const char *to,
    JsonObject * signal, GError ** error)
{
  g_return_val_if_fail (LEGBA_IS_SIGNALLER (self), FALSE);
  g_return_val_if_fail (to != NULL, FALSE);
  g_return_val_if_fail (signal != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  return LEGBA_SIGNALLER_GET_IFACE (self)->send (self, to, signal, error);
}

/**
 * legba_signaller_get_state:
 * @self: a #LegbaSignaller
 *
 * Gets the state of the signaller, its #LegbaSignaller:state property.
 *
 * Returns: the current #LegbaSignaller:state
 */
LegbaSignallerState
legba_signaller_get_state (LegbaSignaller * self)
{
  g_return_val_if_fail (LEGBA_IS_SIGNALLER (self),
      LEGBA_SIGNALLER_STATE_DISCONNECTED);

  return LEGBA_SIGNALLER_GET_IFACE (self)->get_state (self);
}

/**
 * legba_signaller_is_loopback:
 * @self: a #LegbaSignaller
 *
 * Whether the room is reached on this machine's loopback interface only:
 * for #LegbaSignalClient, its #LegbaSignalClient:server-url names
 * 127.0.0.0/8, ::1 or localhost. Every participant then runs on this
 * machine, and a #LegbaRoom without #LegbaRoom:local-addresses gathers
 * its ICE candidates on 127.0.0.1 only. An implementation that does not
 * provide #LegbaSignallerInterface.is_loopback is not.
 *
 * Returns: %TRUE when the room is reached on the loopback interface only
 */
gboolean
legba_signaller_is_loopback (LegbaSignaller * self)
{
  LegbaSignallerInterface *iface;

  g_return_val_if_fail (LEGBA_IS_SIGNALLER (self), FALSE);

  iface = LEGBA_SIGNALLER_GET_IFACE (self);
  return iface->is_loopback != NULL && iface->is_loopback (self);
}

/**
 * legba_signaller_generate_participant_id:
 * @identity: the participant's identity
 *
 * Makes a participant id for @identity (docs/room-protocol.md §2):
 * `IDENTITY-SUFFIX` with a random suffix of lower-case letters and digits.
 * Make it once per participant and keep it across reconnections.
 *
 * Returns: (transfer full): the new participant id
 */
char *
legba_signaller_generate_participant_id (const char *identity)
{
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  GString *id;
  int i;

  g_return_val_if_fail (identity != NULL && identity[0] != '\0', NULL);

  id = g_string_new (identity);
  g_string_append_c (id, '-');
  for (i = 0; i < SUFFIX_GENERATED; i++)
    g_string_append_c (id,
        alphabet[g_random_int_range (0, sizeof alphabet - 1)]);
  return g_string_free (id, FALSE);
}

static gboolean
room_is_valid (const char *room)
{
  gsize i;

  for (i = 0; room[i]; i++) {
    if (i >= MAX_ROOM_LENGTH)
      return FALSE;
    if (!g_ascii_isalnum (room[i]) && !strchr ("_-=@,.;", room[i]))
      return FALSE;
  }
  return i > 0;
}

static gboolean
suffix_is_valid (const char *suffix)
{
  gsize i;

  for (i = 0; suffix[i]; i++) {
    if (i >= SUFFIX_MAX)
      return FALSE;
    if (!g_ascii_isdigit (suffix[i]) && !g_ascii_islower (suffix[i]))
      return FALSE;
  }
  return i >= SUFFIX_MIN;
}

/**
 * legba_signaller_check_participant:
 * @room: a room name
 * @participant_id: a participant id
 * @identity: the identity @participant_id must start with
 * @error: return location for a #GError, or %NULL
 *
 * Checks the arguments of legba_signaller_join() (docs/room-protocol.md §2):
 * the room name's characters and length, and that @participant_id is
 * @identity, `-`, and a suffix of 6 to 16 lower-case letters and digits.
 * Implementations call it before joining.
 *
 * Returns: %TRUE when they are valid; else %FALSE with @error set
 *   (%LEGBA_SIGNAL_ERROR_INVALID)
 */
gboolean
legba_signaller_check_participant (const char *room,
    const char *participant_id, const char *identity, GError ** error)
{
  gsize len;

  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (room == NULL || !room_is_valid (room)) {
    g_set_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID,
        "Invalid room name \"%s\": 1 to %d of A-Z a-z 0-9 _ - = @ , . ;",
        room ? room : "(null)", MAX_ROOM_LENGTH);
    return FALSE;
  }
  if (identity == NULL || identity[0] == '\0' ||
      !g_utf8_validate (identity, -1, NULL)) {
    g_set_error_literal (error, LEGBA_SIGNAL_ERROR,
        LEGBA_SIGNAL_ERROR_INVALID, "The identity must be non-empty UTF-8");
    return FALSE;
  }
  len = strlen (identity);
  if (participant_id == NULL || !g_str_has_prefix (participant_id, identity)
      || participant_id[len] != '-'
      || !suffix_is_valid (participant_id + len + 1)) {
    g_set_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID,
        "Invalid participant id \"%s\": it must be \"%s-\" followed by "
        "%d to %d of a-z 0-9", participant_id ? participant_id : "(null)",
        identity, SUFFIX_MIN, SUFFIX_MAX);
    return FALSE;
  }
  return TRUE;
}
