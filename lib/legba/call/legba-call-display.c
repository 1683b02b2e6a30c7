/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The X display a call shows its windows on, held open while the call
 * runs. An X server resets when its last client leaves unless told not to
 * (Xvfb, or Xorg without a window manager, do): autovideosink opens the
 * display to test a sink, closes it and opens it again for real, and a
 * server that resets in between refuses the second opening, so the sink,
 * and with the grid the whole pipeline, cannot start. The same happens
 * when one participant's window closes and the next one opens. With a
 * connection of its own the server keeps running until the call ends.
 */
#include <legba/call/legba-call-private.h>

GST_DEBUG_CATEGORY_EXTERN (legba_call_debug);
#define GST_CAT_DEFAULT legba_call_debug

#ifdef LEGBA_HAVE_XCB
#include <xcb/xcb.h>

/* a server that is resetting refuses connections for a moment */
#define CONNECT_TRIES 40
#define CONNECT_RETRY_US 50000

static gboolean
needs_display (LegbaCall * self)
{
  return self->display == LEGBA_CALL_DISPLAY_WINDOW ||
      (self->display == LEGBA_CALL_DISPLAY_GRID && self->grid_sink == NULL);
}

gboolean
legba_call_hold_display (LegbaCall * self, GError ** error)
{
  const char *name = g_getenv ("DISPLAY");
  xcb_connection_t *c = NULL;

  if (!needs_display (self) || name == NULL || self->x_display != NULL)
    return TRUE;
  for (guint i = 0; i < CONNECT_TRIES; i++) {
    c = xcb_connect (NULL, NULL);
    if (xcb_connection_has_error (c) == 0)
      break;
    xcb_disconnect (c);
    c = NULL;
    g_usleep (CONNECT_RETRY_US);
  }
  if (c != NULL) {
    GST_INFO ("holding the X display %s while the call runs", name);
    self->x_display = c;
    return TRUE;
  }
  /* Wayland may still show the windows */
  if (g_getenv ("WAYLAND_DISPLAY") != NULL) {
    GST_INFO ("X display %s cannot be opened; Wayland's may serve", name);
    return TRUE;
  }
  g_set_error (error, LEGBA_CALL_ERROR, LEGBA_CALL_ERROR_NO_DISPLAY,
      "Cannot open the X display %s to show the %s on", name,
      self->display == LEGBA_CALL_DISPLAY_GRID ? "grid" : "windows");
  return FALSE;
}

void
legba_call_release_display (LegbaCall * self)
{
  g_clear_pointer (&self->x_display, xcb_disconnect);
}

#else

gboolean
legba_call_hold_display (LegbaCall * self, GError ** error)
{
  return TRUE;
}

void
legba_call_release_display (LegbaCall * self)
{
}

#endif
