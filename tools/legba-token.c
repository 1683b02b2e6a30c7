/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * legba-token: mints a join token (docs/room-protocol.md §2) that admits one
 * identity to one room of a legba-server app, so a participant never
 * holds the app secret.
 */
#include <legba/server/server.h>

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>

#define DEFAULT_TTL 3600
#define EXIT_USAGE 2

static char *opt_secret;
static char *opt_room;
static char *opt_identity;
static char *opt_name;
static gint64 opt_ttl = DEFAULT_TTL;

static const GOptionEntry entries[] = {
  {"secret", 's', 0, G_OPTION_ARG_STRING, &opt_secret,
      "The app secret (default: $LEGBA_APP_SECRET)", "SECRET"},
  {"room", 'r', 0, G_OPTION_ARG_STRING, &opt_room,
      "The room the token admits to (required)", "ROOM"},
  {"identity", 'i', 0, G_OPTION_ARG_STRING, &opt_identity,
      "Who the participant is (required)", "ID"},
  {"name", 'n', 0, G_OPTION_ARG_STRING, &opt_name,
      "Display name (default: the identity)", "NAME"},
  {"ttl", 't', 0, G_OPTION_ARG_INT64, &opt_ttl,
      "Seconds until the token expires (default: 3600)", "SECONDS"},
  G_OPTION_ENTRY_NULL
};

static int
usage_error (const char *message)
{
  g_printerr ("%s: %s\nTry '%s --help' for more information.\n",
      g_get_prgname (), message, g_get_prgname ());
  return EXIT_USAGE;
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *token = NULL;
  const char *secret;

  setlocale (LC_ALL, "");
  context = g_option_context_new ("- mint a Legba join token");
  g_option_context_add_main_entries (context, entries, NULL);
  g_option_context_set_summary (context,
      "Prints an HS256 JSON Web Token that admits IDENTITY to ROOM of a\n"
      "legba-server app: a client trades it, at POST /apps/APP_ID/auth, for\n"
      "the presence authorization of that room, as participant\n"
      "IDENTITY-SUFFIX.");
  g_option_context_set_description (context,
      "ROOM and IDENTITY are made of A-Z a-z 0-9 _ - = @ , . ; (a room at\n"
      "most 149 characters, an identity at most 128); NAME is UTF-8 of at\n"
      "most 256 bytes.\n"
      "\n"
      "Prefer LEGBA_APP_SECRET to --secret: other users can read command\n"
      "lines.\n"
      "\n"
      "Exit status: 0 on success, 1 when the token cannot be written, 2 on\n"
      "a usage error.\n");

  if (!g_option_context_parse (context, &argc, &argv, &error))
    return usage_error (error->message);
  if (argc > 1)
    return usage_error ("unexpected argument");

  secret = opt_secret ? opt_secret : g_getenv ("LEGBA_APP_SECRET");
  if (secret == NULL || secret[0] == '\0')
    return usage_error ("the app secret is required "
        "(--secret or LEGBA_APP_SECRET)");
  if (opt_room == NULL)
    return usage_error ("--room is required");
  if (opt_identity == NULL)
    return usage_error ("--identity is required");
  if (opt_ttl <= 0)
    return usage_error ("--ttl must be a positive number of seconds");

  token = legba_join_token_new (secret, opt_room, opt_identity, opt_name,
      opt_ttl, &error);
  if (token == NULL)
    return usage_error (error->message);

  if (printf ("%s\n", token) < 0 || fflush (stdout) != 0) {
    g_printerr ("%s: cannot write the token\n", g_get_prgname ());
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
