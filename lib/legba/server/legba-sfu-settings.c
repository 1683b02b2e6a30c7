/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The settings of SFU rooms (docs/server.md, SFU rooms): a topology, the
 * Janus URLs and room-name prefixes, checked as the configuration and
 * the command line give them.
 */
#include <legba/server/legba-sfu.h>

#include <gio/gio.h>
#include <string.h>

gboolean
legba_topology_parse_full (const char *text, LegbaTopology * topology,
    guint * auto_max, GError ** error)
{
  guint max = 0;
  guint64 n = 0;
  char *end = NULL;

  if (g_strcmp0 (text, "mesh") == 0) {
    *topology = LEGBA_TOPOLOGY_MESH;
  } else if (g_strcmp0 (text, "sfu") == 0) {
    *topology = LEGBA_TOPOLOGY_SFU;
  } else if (g_strcmp0 (text, "auto") == 0) {
    *topology = LEGBA_TOPOLOGY_AUTO;
    max = LEGBA_TOPOLOGY_AUTO_MAX;
  } else if (text != NULL && g_str_has_prefix (text, "auto:") &&
      g_ascii_isdigit (text[5]) &&
      (n = g_ascii_strtoull (text + 5, &end, 10)) >= 1 && n <= 1000 &&
      *end == '\0') {
    *topology = LEGBA_TOPOLOGY_AUTO;
    max = (guint) n;
  } else {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
        "\"%s\" is not a topology (mesh, sfu, auto or auto:N with N from 1 "
        "to 1000)", text ? text : "");
    return FALSE;
  }
  if (auto_max != NULL)
    *auto_max = max;
  return TRUE;
}

gboolean
legba_topology_parse (const char *text, LegbaTopology * topology,
    GError ** error)
{
  return legba_topology_parse_full (text, topology, NULL, error);
}

gboolean
legba_sfu_url_check (const char *url, gboolean ws, GError ** error)
{
  g_autoptr (GUri) uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);
  const char *scheme = uri ? g_uri_get_scheme (uri) : NULL;
  gboolean ok = scheme != NULL && g_uri_get_host (uri) != NULL &&
      (ws ? (g_str_equal (scheme, "ws") || g_str_equal (scheme, "wss")) :
      (g_str_equal (scheme, "http") || g_str_equal (scheme, "https")));

  if (!ok)
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
        "\"%s\" is not a%s URL", url, ws ? " ws:// or wss://" :
        "n http:// or https://");
  return ok;
}

gboolean
legba_sfu_prefixes_check (const char *const *prefixes, GError ** error)
{
  for (const char *const *p = prefixes; p && *p; p++) {
    gsize n = strlen (*p);

    if (n == 0 || n > 100 || strspn (*p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
            "abcdefghijklmnopqrstuvwxyz0123456789_-=@,.;") != n) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
          "\"%s\" is not a room-name prefix (1 to 100 of A-Z a-z 0-9 "
          "_ - = @ . ;)", *p);
      return FALSE;
    }
  }
  return TRUE;
}

void
legba_sfu_rule_free (gpointer rule)
{
  LegbaSfuRule *r = rule;

  g_strfreev (r->prefixes);
  g_free (r);
}
