/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Every public error domain is named "legba-PART-error-quark", the string a
 * GError carries into every language binding.
 */
#include <legba/legba.h>
#include <legba/server/server.h>

static void
test_domains (void)
{
  const struct
  {
    GQuark domain;
    const char *name;
  } domains[] = {
    {LEGBA_ROOM_ERROR, "legba-room-error-quark"},
    {LEGBA_SIGNAL_ERROR, "legba-signal-error-quark"},
    {LEGBA_CALL_ERROR, "legba-call-error-quark"},
    {LEGBA_ENCODER_ERROR, "legba-encoder-error-quark"},
    {LEGBA_SERVER_ERROR, "legba-server-error-quark"},
    {LEGBA_TOKEN_ERROR, "legba-token-error-quark"},
  };

  for (guint i = 0; i < G_N_ELEMENTS (domains); i++)
    g_assert_cmpstr (g_quark_to_string (domains[i].domain), ==,
        domains[i].name);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/error-domains/names", test_domains);
  return g_test_run ();
}
