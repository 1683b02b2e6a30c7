/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once

/**
 * LEGBA_API:
 *
 * Marks a function of liblegba-gst or liblegba-server as part of the
 * library's interface. The libraries are built with hidden visibility:
 * only what is declared with this macro is exported.
 */
#if defined(LEGBA_COMPILATION)
#define LEGBA_API __attribute__ ((visibility ("default"))) extern
#else
#define LEGBA_API extern
#endif
