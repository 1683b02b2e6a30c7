/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * LegbaSignaller:
 *
 * How a room reaches the network: the interface through which a
 * #LegbaRoom joins a room and carries signals for one participant.
 *
 * A #LegbaSignaller joins a room as one participant, tells who else is in
 * it, and carries signals (docs/room-protocol.md §4: offers, answers,
 * candidates) between participants. It is the only way a room reaches the
 * network: #LegbaSignalClient implements it over the Pusher Channels
 * protocol; a test or another protocol provides another implementation,
 * and the room above does not change.
 *
 * An implementation guarantees that #LegbaSignaller::signal-received only
 * reports signals addressed to the local participant whose `from` the
 * transport vouches for, and that malformed signals never reach the
 * application. Membership is reported by #LegbaSignaller::joined (the full
 * list, on every subscription), #LegbaSignaller::member-joined and
 * #LegbaSignaller::member-left.
 *
 * ## Threads
 *
 * An implementation runs on one #GMainContext, documented by the
 * implementation. The thread-default context of the thread that first
 * joins is the one to choose (#LegbaSignalClient does): then a signaller
 * made on one thread can be handed to a room that runs on a thread of its
 * own, as the `legbaroom` element's does. Call its methods from the thread
 * that runs that context; its signals are emitted there.
 */
#pragma once

#if !defined(LEGBA_INSIDE) && !defined(LEGBA_COMPILATION)
#error "Only <legba/legba.h> can be included directly."
#endif

#include <glib-object.h>
#include <legba/legba-api.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/**
 * LEGBA_SIGNAL_ERROR:
 *
 * Error domain of #LegbaSignaller and its implementations. Errors in this
 * domain are from the #LegbaSignalError enumeration.
 */
#define LEGBA_SIGNAL_ERROR (legba_signal_error_quark ())
LEGBA_API
GQuark legba_signal_error_quark (void);

/**
 * LegbaSignalError:
 * @LEGBA_SIGNAL_ERROR_INVALID: an argument is not valid: a room name, a
 *   participant id, a signal that is not a §4 signal, or a configuration
 *   that cannot work (no app key, no way to authenticate)
 * @LEGBA_SIGNAL_ERROR_NOT_JOINED: the call needs a joined room (send,
 *   leave), or a room is already joined (join)
 * @LEGBA_SIGNAL_ERROR_TOO_LARGE: a signal cannot be sent within the size
 *   limit, not even split in `part` messages
 * @LEGBA_SIGNAL_ERROR_CONNECT: the connection could not be opened or was
 *   lost; the signaller retries on its own (not fatal)
 * @LEGBA_SIGNAL_ERROR_AUTH: the room refused the participant (the auth
 *   endpoint or the server refused the subscription); fatal
 * @LEGBA_SIGNAL_ERROR_REFUSED: the server refused the connection and asked
 *   not to reconnect (Pusher codes 4000–4099, such as an unknown app key);
 *   fatal
 * @LEGBA_SIGNAL_ERROR_SERVER: the server reported an error without closing
 *   the connection (for example Pusher 4301, client events over the rate
 *   limit); not fatal
 *
 * Errors of #LegbaSignaller. The fatal ones leave the signaller in
 * %LEGBA_SIGNALLER_STATE_FAILED; after the others it carries on.
 */
typedef enum
{
  LEGBA_SIGNAL_ERROR_INVALID,
  LEGBA_SIGNAL_ERROR_NOT_JOINED,
  LEGBA_SIGNAL_ERROR_TOO_LARGE,
  LEGBA_SIGNAL_ERROR_CONNECT,
  LEGBA_SIGNAL_ERROR_AUTH,
  LEGBA_SIGNAL_ERROR_REFUSED,
  LEGBA_SIGNAL_ERROR_SERVER,
} LegbaSignalError;

/**
 * LegbaSignallerState:
 * @LEGBA_SIGNALLER_STATE_DISCONNECTED: no room joined (initial state, and
 *   after legba_signaller_leave())
 * @LEGBA_SIGNALLER_STATE_CONNECTING: joining a room for the first time
 * @LEGBA_SIGNALLER_STATE_CONNECTED: in the room: members are known and
 *   signals flow
 * @LEGBA_SIGNALLER_STATE_RECONNECTING: the connection was lost after the
 *   room was joined; the signaller is joining again with the same
 *   participant id, and signals sent meanwhile wait in its queue
 * @LEGBA_SIGNALLER_STATE_FAILED: the room cannot be joined as configured
 *   (a fatal error was reported); join again to retry
 *
 * The state of a #LegbaSignaller, its #LegbaSignaller:state property.
 */
typedef enum
{
  LEGBA_SIGNALLER_STATE_DISCONNECTED,
  LEGBA_SIGNALLER_STATE_CONNECTING,
  LEGBA_SIGNALLER_STATE_CONNECTED,
  LEGBA_SIGNALLER_STATE_RECONNECTING,
  LEGBA_SIGNALLER_STATE_FAILED,
} LegbaSignallerState;

#define LEGBA_TYPE_SIGNALLER_STATE (legba_signaller_state_get_type ())
LEGBA_API
GType legba_signaller_state_get_type (void);

/**
 * LegbaSignalMember:
 *
 * A member of a room as the signalling server lists it: a participant id
 * (docs/room-protocol.md §2, `IDENTITY-SUFFIX`) and its presence `user_info`.
 * Immutable and reference-counted.
 */
typedef struct _LegbaSignalMember LegbaSignalMember;

#define LEGBA_TYPE_SIGNAL_MEMBER (legba_signal_member_get_type ())
LEGBA_API
GType legba_signal_member_get_type (void);

LEGBA_API
LegbaSignalMember *legba_signal_member_new (const char *id,
    JsonObject * user_info);
LEGBA_API
LegbaSignalMember *legba_signal_member_ref (LegbaSignalMember * member);
LEGBA_API
void legba_signal_member_unref (LegbaSignalMember * member);
LEGBA_API
const char *legba_signal_member_get_id (LegbaSignalMember * member);
LEGBA_API
const char *legba_signal_member_get_identity (LegbaSignalMember * member);
LEGBA_API
const char *legba_signal_member_get_name (LegbaSignalMember * member);
LEGBA_API
JsonObject *legba_signal_member_get_user_info (LegbaSignalMember * member);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (LegbaSignalMember, legba_signal_member_unref)

#define LEGBA_TYPE_SIGNALLER (legba_signaller_get_type ())
LEGBA_API
G_DECLARE_INTERFACE (LegbaSignaller, legba_signaller, LEGBA, SIGNALLER,
    GObject)

/**
 * LegbaSignallerInterface:
 * @g_iface: the parent interface
 * @join: joins @room as the local participant; see legba_signaller_join()
 * @leave: leaves the room; see legba_signaller_leave()
 * @send: sends a signal; see legba_signaller_send()
 * @get_state: returns the current state
 * @is_loopback: whether the room is reached on this machine's loopback
 *   interface only; see legba_signaller_is_loopback(). Optional: when
 *   %NULL, it is not
 *
 * The virtual methods of #LegbaSignaller. An implementation also overrides
 * the #LegbaSignaller:state property and emits the interface's signals.
 */
struct _LegbaSignallerInterface
{
  GTypeInterface g_iface;

  gboolean (*join) (LegbaSignaller * self, const char *room,
      const char *participant_id, const char *identity,
      const char *display_name, GError ** error);
  void (*leave) (LegbaSignaller * self);
  gboolean (*send) (LegbaSignaller * self, const char *to,
      JsonObject * signal, GError ** error);
  LegbaSignallerState (*get_state) (LegbaSignaller * self);
  gboolean (*is_loopback) (LegbaSignaller * self);

  /*< private >*/
  gpointer padding[7];
};

LEGBA_API
gboolean legba_signaller_join (LegbaSignaller * self, const char *room,
    const char *participant_id, const char *identity,
    const char *display_name, GError ** error);
LEGBA_API
void legba_signaller_leave (LegbaSignaller * self);
LEGBA_API
gboolean legba_signaller_send (LegbaSignaller * self, const char *to,
    JsonObject * signal, GError ** error);
LEGBA_API
LegbaSignallerState legba_signaller_get_state (LegbaSignaller * self);
LEGBA_API
gboolean legba_signaller_is_loopback (LegbaSignaller * self);

LEGBA_API
char *legba_signaller_generate_participant_id (const char *identity);
LEGBA_API
gboolean legba_signaller_check_participant (const char *room,
    const char *participant_id, const char *identity, GError ** error);

G_END_DECLS
