/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaWsDeflate: permessage-deflate (RFC 7692) for the server's
 * WebSockets, in place of libsoup's SoupWebsocketExtensionDeflate, which
 * inflates a message whole whatever it inflates to: a message of a few
 * hundred KiB may inflate to hundreds of MiB before libsoup hands it
 * over. This one stops inflating a message once it is over a bound, and
 * fails it as too big (SOUP_WEBSOCKET_CLOSE_TOO_BIG, which libsoup closes
 * the connection with), so a message costs at most that bound of memory
 * and time. For a SoupWebsocketConnection of the server's side.
 */
#pragma once

#include <libsoup/soup.h>

G_BEGIN_DECLS

#define LEGBA_TYPE_WS_DEFLATE (legba_ws_deflate_get_type ())
G_DECLARE_FINAL_TYPE (LegbaWsDeflate, legba_ws_deflate, LEGBA, WS_DEFLATE,
    SoupWebsocketExtension)

/* Bounds the payload of one incoming message once inflated (0: no
 * bound). */
void legba_ws_deflate_set_max_message (LegbaWsDeflate * deflate,
    gsize max_bytes);

/* Whether a message went over that bound. */
gboolean legba_ws_deflate_is_over_limit (LegbaWsDeflate * deflate);

G_END_DECLS
