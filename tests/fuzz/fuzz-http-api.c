/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * libFuzzer target for legba_http_api_handle: request verification,
 * routing, JSON and form bodies, join tokens.
 *
 * An input is "METHOD\nPATH\nQUERY\nAUTHORIZATION\nBODY": the first four
 * lines, then everything else as the body (which may hold any byte). QUERY
 * is "k=v&k=v", percent-encoded. Each input runs against a fresh hub with
 * one app (id 1, key fuzz-key, secret fuzz-secret), a clock fixed at
 * FUZZ_NOW, and three connections: one in a presence room, one on a
 * private and a public channel, one signed in as a user. Seeds signed
 * for that app and time reach past the signature check; the join-token
 * endpoint needs no signature, so mutations of its body go deep. Every
 * answer must be a JSON object in UTF-8, whatever bytes the request held.
 */
#include <legba/server/legba-http-api.h>
#include <legba/common/legba-auth.h>

#include <json-glib/json-glib.h>
#include <stdint.h>
#include <string.h>

#define FUZZ_APP_ID "1"
#define FUZZ_KEY "fuzz-key"
#define FUZZ_SECRET "fuzz-secret"
#define FUZZ_NOW 1700000000

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

static void
noop_send (gpointer handle, GBytes * frame, gpointer user_data)
{
}

static void
noop_close (gpointer handle, guint16 code, const char *reason,
    gpointer user_data)
{
}

static const LegbaHubTransport noop_transport = { noop_send, noop_close };

static void
send_frame (LegbaHub * hub, LegbaHubConn * conn, const char *event,
    JsonBuilder * data)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *text = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "event");
  json_builder_add_string_value (b, event);
  json_builder_set_member_name (b, "data");
  json_builder_add_value (b, json_builder_get_root (data));
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  text = json_generator_to_data (gen, NULL);
  legba_hub_receive (hub, conn, text, strlen (text));
}

static void
subscribe (LegbaHub * hub, LegbaHubConn * conn, const char *channel,
    const char *channel_data)
{
  g_autoptr (JsonBuilder) data = json_builder_new ();
  g_autofree char *auth = NULL;

  if (!g_str_has_prefix (channel, "public"))
    auth = legba_auth_channel_sign (FUZZ_KEY, FUZZ_SECRET,
        legba_hub_conn_get_socket_id (conn), channel, channel_data);

  json_builder_begin_object (data);
  json_builder_set_member_name (data, "channel");
  json_builder_add_string_value (data, channel);
  if (auth) {
    json_builder_set_member_name (data, "auth");
    json_builder_add_string_value (data, auth);
  }
  if (channel_data) {
    json_builder_set_member_name (data, "channel_data");
    json_builder_add_string_value (data, channel_data);
  }
  json_builder_end_object (data);
  send_frame (hub, conn, "pusher:subscribe", data);
}

static void
sign_in (LegbaHub * hub, LegbaHubConn * conn, const char *user_data)
{
  g_autoptr (JsonBuilder) data = json_builder_new ();
  g_autofree char *auth = legba_auth_user_sign (FUZZ_KEY, FUZZ_SECRET,
      legba_hub_conn_get_socket_id (conn), user_data);

  json_builder_begin_object (data);
  json_builder_set_member_name (data, "auth");
  json_builder_add_string_value (data, auth);
  json_builder_set_member_name (data, "user_data");
  json_builder_add_string_value (data, user_data);
  json_builder_end_object (data);
  send_frame (hub, conn, "pusher:signin", data);
}

static LegbaHub *
hub_new (LegbaHubConn ** conns)
{
  static int handles[3];
  LegbaHub *hub = legba_hub_new (&noop_transport, NULL);
  guint i;

  if (!legba_hub_add_app (hub, FUZZ_APP_ID, FUZZ_KEY, FUZZ_SECRET, NULL))
    g_error ("cannot add the fuzzing app");
  for (i = 0; i < G_N_ELEMENTS (handles); i++) {
    conns[i] = legba_hub_open (hub, FUZZ_KEY, "7", &handles[i]);
    if (conns[i] == NULL)
      g_error ("cannot open a connection");
  }

  subscribe (hub, conns[0], "presence-legba.room",
      "{\"user_id\":\"alice-abcdef\",\"user_info\":{\"identity\":\"alice\"}}");
  subscribe (hub, conns[1], "private-chat", NULL);
  subscribe (hub, conns[1], "public-news", NULL);
  sign_in (hub, conns[2], "{\"id\":\"bob\"}");
  subscribe (hub, conns[2], "public-news", NULL);
  return hub;
}

/* The next "\n"-terminated field of [*p, end), NUL-terminated. */
static char *
next_line (const char **p, const char *end)
{
  const char *nl = memchr (*p, '\n', end - *p);
  const char *stop = nl ? nl : end;
  char *line = g_strndup (*p, stop - *p);

  *p = nl ? nl + 1 : end;
  return line;
}

static GHashTable *
parse_query (const char *query)
{
  GHashTable *params = g_hash_table_new_full (g_str_hash, g_str_equal,
      g_free, g_free);
  g_auto (GStrv) pairs = g_strsplit (query, "&", 64);
  guint i;

  for (i = 0; pairs[i]; i++) {
    char *eq = strchr (pairs[i], '=');
    char *key, *value;

    if (eq == NULL)
      continue;
    *eq = '\0';
    key = g_uri_unescape_string (pairs[i], NULL);
    value = g_uri_unescape_string (eq + 1, NULL);
    if (key && value) {
      g_hash_table_insert (params, key, value);
    } else {
      g_free (key);
      g_free (value);
    }
  }
  return params;
}

static void
assert_json_object (const char *body)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;

  if (!g_utf8_validate (body, -1, NULL))
    g_error ("a response body that is not UTF-8: %s", body);
  if (!json_parser_load_from_data (parser, body, -1, &error) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    g_error ("a response body that is not a JSON object: %s", body);
}

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  const char *p = (const char *) data, *end = p + size;
  g_autofree char *method = next_line (&p, end);
  g_autofree char *path = next_line (&p, end);
  g_autofree char *query = next_line (&p, end);
  g_autofree char *authorization = next_line (&p, end);
  g_autoptr (GHashTable) params = parse_query (query);
  LegbaHttpRequest request = { 0 };
  LegbaHttpResponse response = { 0 };
  LegbaHubConn *conns[3];
  LegbaHub *hub = hub_new (conns);
  guint i;

  request.method = method;
  request.path = path;
  request.params = params;
  request.body = p < end ? p : NULL;
  request.body_len = end - p;
  request.authorization = authorization[0] ? authorization : NULL;
  request.now_s = FUZZ_NOW;

  legba_http_api_handle (hub, &request, &response);
  if (response.status < 200 || response.status > 599 || response.body == NULL)
    g_error ("no response for %s %s", method, path);
  assert_json_object (response.body);
  legba_http_response_clear (&response);

  for (i = 0; i < G_N_ELEMENTS (conns); i++)
    legba_hub_conn_closed (hub, conns[i]);
  legba_hub_free (hub);
  return 0;
}
