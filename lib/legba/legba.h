/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once

#define LEGBA_INSIDE
#include <legba/legba-version.h>
#include <legba/encoder/legba-encoder.h>
#include <legba/server/legba-server.h>
#include <legba/signal/legba-signaller.h>
#include <legba/signal/legba-signal-client.h>
#include <legba/server/legba-token.h>
#include <legba/room/legba-participant.h>
#include <legba/room/legba-room.h>
#include <legba/room/legba-room-data.h>
#include <legba/call/legba-call.h>
#undef LEGBA_INSIDE
