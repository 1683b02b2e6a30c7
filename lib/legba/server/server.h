/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * liblegba-server: the Pusher-protocol signalling server (LegbaServer) and
 * its join tokens. GLib, GIO, libsoup, json-glib and hiredis; no
 * GStreamer. pkg-config: legba-server-1.0.
 */
#pragma once

#define LEGBA_INSIDE
#include <legba/legba-version.h>
#include <legba/server/legba-client-event.h>
#include <legba/server/legba-server.h>
#include <legba/server/legba-token.h>
#undef LEGBA_INSIDE
