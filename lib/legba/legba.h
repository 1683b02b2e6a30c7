/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once

#define LEGBA_INSIDE
#include <legba/legba-version.h>
#include <legba/legba-encoder.h>
#include <legba/legba-server.h>
#include <legba/legba-signaller.h>
#include <legba/legba-signal-client.h>
#include <legba/legba-token.h>
#include <legba/legba-participant.h>
#include <legba/legba-room.h>
#include <legba/legba-room-data.h>
#include <legba/legba-call.h>
#undef LEGBA_INSIDE
