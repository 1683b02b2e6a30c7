/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * liblegba-gst: a room's signalling (LegbaSignaller, LegbaSignalClient),
 * rooms (LegbaRoom, LegbaParticipant, data), calls (LegbaCall) and the
 * encoder choice (legba_encoder_*). pkg-config: legba-gst-1.0. The server
 * is a library of its own: <legba/server/server.h>, legba-server-1.0.
 */
#pragma once

#define LEGBA_INSIDE
#include <legba/legba-version.h>
#include <legba/encoder/legba-encoder.h>
#include <legba/signal/legba-signaller.h>
#include <legba/signal/legba-signal-client.h>
#include <legba/room/legba-participant.h>
#include <legba/room/legba-room.h>
#include <legba/room/legba-room-data.h>
#include <legba/call/legba-call.h>
#undef LEGBA_INSIDE
