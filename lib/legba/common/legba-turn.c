/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * TURN credentials and ICE server lists (legba-turn.h).
 */
#include <legba/common/legba-turn.h>
#include <legba/common/legba-json.h>

#include <gio/gio.h>
#include <string.h>

/* RFC 7065 §3.1 default ports */
#define TURN_PORT 3478
#define TURNS_PORT 5349

char *
legba_turn_credential (const char *secret, const char *username)
{
  g_autoptr (GHmac) hmac = NULL;
  guint8 digest[20];
  gsize len = sizeof digest;

  g_return_val_if_fail (secret != NULL, NULL);
  g_return_val_if_fail (username != NULL, NULL);

  hmac = g_hmac_new (G_CHECKSUM_SHA1, (const guchar *) secret, strlen (secret));
  g_hmac_update (hmac, (const guchar *) username, -1);
  g_hmac_get_digest (hmac, digest, &len);
  return g_base64_encode (digest, len);
}

char *
legba_turn_username (gint64 expiry_s, const char *user_id)
{
  g_return_val_if_fail (user_id != NULL, NULL);

  return g_strdup_printf ("%" G_GINT64_FORMAT ":%s", expiry_s, user_id);
}

typedef struct
{
  gboolean secure;
  char *host;                   /* IPv6 addresses keep their brackets */
  guint port;
  const char *transport;        /* NULL, "udp" or "tcp" */
} TurnUrl;

static void
turn_url_clear (TurnUrl * url)
{
  g_clear_pointer (&url->host, g_free);
}

static gboolean
host_char_ok (char c)
{
  return g_ascii_isalnum (c) || c == '-' || c == '.' || c == '_';
}

/* RFC 7065 §3.1: turnURI = scheme ":" host [ ":" port ]
 *                          [ "?transport=" transport ] */
static gboolean
turn_url_parse (const char *text, TurnUrl * url, GError ** error)
{
  const char *p, *end;

  memset (url, 0, sizeof *url);
  if (g_str_has_prefix (text, "turns:")) {
    url->secure = TRUE;
    p = text + strlen ("turns:");
  } else if (g_str_has_prefix (text, "turn:")) {
    p = text + strlen ("turn:");
  } else {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
        "'%s' is not a turn: or turns: URL", text);
    return FALSE;
  }
  url->port = url->secure ? TURNS_PORT : TURN_PORT;

  if (*p == '[') {
    end = strchr (p, ']');
    if (end == NULL || end == p + 1) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
          "'%s': an IPv6 host is written [ADDRESS]", text);
      return FALSE;
    }
    for (const char *c = p + 1; c < end; c++)
      if (!g_ascii_isxdigit (*c) && *c != ':' && *c != '.') {
        g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
            "'%s': an IPv6 host is written [ADDRESS]", text);
        return FALSE;
      }
    end++;
  } else {
    for (end = p; host_char_ok (*end); end++);
    if (end == p) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
          "'%s' has no host (turn:HOST[:PORT][?transport=udp|tcp])", text);
      return FALSE;
    }
  }
  url->host = g_strndup (p, end - p);
  p = end;

  if (*p == ':') {
    guint64 port;
    const char *digits = ++p;
    g_autofree char *number = NULL;

    while (g_ascii_isdigit (*p))
      p++;
    number = g_strndup (digits, p - digits);
    if (!g_ascii_string_to_unsigned (number, 10, 1, 65535, &port, NULL)) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
          "'%s': the port is not a number from 1 to 65535", text);
      turn_url_clear (url);
      return FALSE;
    }
    url->port = port;
  }
  if (g_str_equal (p, "?transport=udp")) {
    url->transport = "udp";
  } else if (g_str_equal (p, "?transport=tcp")) {
    url->transport = "tcp";
  } else if (*p != '\0') {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
        "'%s': expected turn:HOST[:PORT][?transport=udp|tcp]", text);
    turn_url_clear (url);
    return FALSE;
  }
  return TRUE;
}

gboolean
legba_turn_url_check (const char *url, GError ** error)
{
  TurnUrl parsed;

  g_return_val_if_fail (url != NULL, FALSE);

  if (!turn_url_parse (url, &parsed, error))
    return FALSE;
  turn_url_clear (&parsed);
  return TRUE;
}

void
legba_turn_append_ice_servers (GString * out, const char *const *urls,
    const char *secret, guint ttl_s, const char *user_id, gint64 now_s)
{
  g_autofree char *username = NULL;
  g_autofree char *credential = NULL;

  g_return_if_fail (out != NULL);
  g_return_if_fail (urls != NULL && urls[0] != NULL);
  g_return_if_fail (secret != NULL && user_id != NULL);

  username = legba_turn_username (now_s + ttl_s, user_id);
  credential = legba_turn_credential (secret, username);
  g_string_append (out, "[{\"urls\":[");
  for (guint i = 0; urls[i] != NULL; i++) {
    if (i > 0)
      g_string_append_c (out, ',');
    legba_json_append_string (out, urls[i]);
  }
  g_string_append (out, "],\"username\":");
  legba_json_append_string (out, username);
  g_string_append (out, ",\"credential\":");
  legba_json_append_string (out, credential);
  g_string_append (out, "}]");
}

static void
add_uri (GStrvBuilder * uris, const char *url, const char *username,
    const char *credential)
{
  g_autofree char *user = NULL;
  g_autofree char *password = NULL;
  g_autofree char *uri = NULL;
  TurnUrl parsed;

  if (!turn_url_parse (url, &parsed, NULL))
    return;
  user = g_uri_escape_string (username, NULL, FALSE);
  password = g_uri_escape_string (credential, NULL, FALSE);
  uri = g_strdup_printf ("%s://%s:%s@%s:%u%s%s",
      parsed.secure ? "turns" : "turn", user, password, parsed.host,
      parsed.port, parsed.transport ? "?transport=" : "",
      parsed.transport ? parsed.transport : "");
  g_strv_builder_add (uris, uri);
  turn_url_clear (&parsed);
}

char **
legba_turn_uris_from_ice_servers (JsonArray * servers)
{
  g_autoptr (GStrvBuilder) uris = g_strv_builder_new ();
  guint n = servers ? json_array_get_length (servers) : 0;

  for (guint i = 0; i < n; i++) {
    JsonNode *node = json_array_get_element (servers, i);
    JsonObject *server;
    JsonNode *urls;
    const char *username, *credential;

    if (!JSON_NODE_HOLDS_OBJECT (node))
      continue;
    server = json_node_get_object (node);
    username = legba_json_object_get_string (server, "username");
    credential = legba_json_object_get_string (server, "credential");
    urls = json_object_get_member (server, "urls");
    if (username == NULL || credential == NULL || urls == NULL)
      continue;
    /* RTCIceServer.urls: one string or an array of them */
    if (JSON_NODE_HOLDS_VALUE (urls) &&
        json_node_get_value_type (urls) == G_TYPE_STRING) {
      add_uri (uris, json_node_get_string (urls), username, credential);
    } else if (JSON_NODE_HOLDS_ARRAY (urls)) {
      JsonArray *list = json_node_get_array (urls);

      for (guint j = 0; j < json_array_get_length (list); j++) {
        JsonNode *url = json_array_get_element (list, j);

        if (JSON_NODE_HOLDS_VALUE (url) &&
            json_node_get_value_type (url) == G_TYPE_STRING)
          add_uri (uris, json_node_get_string (url), username, credential);
      }
    }
  }
  return g_strv_builder_end (uris);
}
