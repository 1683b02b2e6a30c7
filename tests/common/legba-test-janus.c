/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#include "legba-test-janus.h"
#include "legba-test.h"

#include <libsoup/soup.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#define API_SECRET "legba-test-api-secret"
#define ADMIN_SECRET "legba-test-admin-secret"
#define ADMIN_KEY LEGBA_TEST_JANUS_ADMIN_KEY
#define READY_TIMEOUT_S 30

/* Where the VideoRoom plugin is: Debian's multiarch folder
 * (/usr/lib/<triplet>/janus) or a plain one; NULL when none. */
static char *
janus_lib (void)
{
  const char *plain[] = { "/usr/lib/janus", "/usr/local/lib/janus",
    "/opt/janus/lib/janus", NULL
  };
  g_autoptr (GDir) dir = g_dir_open ("/usr/lib", 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL) {
    g_autofree char *lib = g_build_filename ("/usr/lib", name, "janus", NULL);
    g_autofree char *plugin = g_build_filename (lib, "plugins",
        "libjanus_videoroom.so", NULL);

    if (g_file_test (plugin, G_FILE_TEST_EXISTS))
      return g_steal_pointer (&lib);
  }
  for (guint i = 0; plain[i] != NULL; i++) {
    g_autofree char *plugin = g_build_filename (plain[i], "plugins",
        "libjanus_videoroom.so", NULL);

    if (g_file_test (plugin, G_FILE_TEST_EXISTS))
      return g_strdup (plain[i]);
  }
  return NULL;
}

static guint
free_port (void)
{
  g_autoptr (GSocket) socket = g_socket_new (G_SOCKET_FAMILY_IPV4,
      G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
  g_autoptr (GInetAddress) loopback =
      g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) any = g_inet_socket_address_new (loopback, 0);
  g_autoptr (GSocketAddress) bound = NULL;

  g_assert_nonnull (socket);
  g_assert_true (g_socket_bind (socket, any, FALSE, NULL));
  bound = g_socket_get_local_address (socket, NULL);
  return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
}

static void
write_file (const char *dir, const char *name, const char *text)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autoptr (GError) error = NULL;

  g_file_set_contents (path, text, -1, &error);
  g_assert_no_error (error);
}

static void
link_module (const char *lib, const char *dir, const char *kind,
    const char *name)
{
  g_autofree char *target = g_build_filename (lib, kind, name, NULL);
  g_autofree char *path = g_build_filename (dir, kind, name, NULL);

  g_assert_cmpint (symlink (target, path), ==, 0);
}

static void
write_config (LegbaTestJanus * j, const char *lib)
{
  g_autofree char *cfg = g_build_filename (j->dir, "cfg", NULL);
  g_autofree char *main = g_strdup_printf ("general: {\n"
      "  configs_folder = \"%1$s/cfg\"\n"
      "  plugins_folder = \"%1$s/plugins\"\n"
      "  transports_folder = \"%1$s/transports\"\n"
      "  events_folder = \"%1$s/empty\"\n"
      "  loggers_folder = \"%1$s/empty\"\n"
      "  debug_level = 4\n"
      "  log_to_stdout = false\n"
      "  log_to_file = \"%1$s/janus.log\"\n"
      "%2$s"
      "  admin_secret = \"" ADMIN_SECRET "\"\n"
      "}\n" "nat: {\n  ice_enforce_list = \"lo\"\n}\n", j->dir,
      j->open ? "" : "  api_secret = \"" API_SECRET "\"\n"
      "  token_auth = true\n");
  g_autofree char *http = g_strdup_printf ("general: {\n"
      "  json = \"compact\"\n  base_path = \"/janus\"\n  http = true\n"
      "  port = %u\n  ip = \"127.0.0.1\"\n  https = false\n}\n"
      "admin: {\n  admin_http = true\n  admin_port = %u\n"
      "  admin_ip = \"127.0.0.1\"\n  admin_base_path = \"/admin\"\n}\n",
      j->http_port, j->admin_port);
  g_autofree char *ws = g_strdup_printf ("general: {\n"
      "  json = \"compact\"\n  ws = true\n  ws_port = %u\n"
      "  ws_ip = \"127.0.0.1\"\n  wss = false\n}\n"
      "admin: {\n  admin_ws = false\n}\n", j->ws_port);

  for (guint i = 0; i < 4; i++) {
    const char *sub[] = { "cfg", "plugins", "transports", "empty" };
    g_autofree char *path = g_build_filename (j->dir, sub[i], NULL);

    g_assert_cmpint (g_mkdir (path, 0700), ==, 0);
  }
  write_file (cfg, "janus.jcfg", main);
  write_file (cfg, "janus.transport.http.jcfg", http);
  write_file (cfg, "janus.transport.websockets.jcfg", ws);
  write_file (cfg, "janus.plugin.videoroom.jcfg",
      "general: {\n  admin_key = \"" ADMIN_KEY "\"\n}\n");
  link_module (lib, j->dir, "plugins", "libjanus_videoroom.so");
  link_module (lib, j->dir, "transports", "libjanus_http.so");
  link_module (lib, j->dir, "transports", "libjanus_websockets.so");
}

/* POSTs request (consumed) to the API at url; the answer, NULL when the
 * server could not be reached. */
static JsonObject *
post (const char *url, JsonObject * request)
{
  g_autoptr (SoupSession) session = soup_session_new ();
  g_autoptr (SoupMessage) message = soup_message_new ("POST", url);
  g_autoptr (JsonNode) node = json_node_alloc ();
  g_autofree char *text = NULL;
  g_autoptr (GBytes) body = NULL;
  g_autoptr (GBytes) answer = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonNode *parsed;
  gsize size;
  const char *data;

  json_object_set_string_member (request, "transaction", "t");
  json_node_init_object (node, request);
  json_object_unref (request);
  text = json_to_string (node, FALSE);
  body = g_bytes_new (text, strlen (text));
  soup_message_set_request_body_from_bytes (message, "application/json", body);
  answer = soup_session_send_and_read (session, message, NULL, NULL);
  if (answer == NULL)
    return NULL;
  data = g_bytes_get_data (answer, &size);
  if (!json_parser_load_from_data (parser, data, (gssize) size, NULL))
    return NULL;
  parsed = json_parser_get_root (parser);
  if (parsed == NULL || !JSON_NODE_HOLDS_OBJECT (parsed))
    return NULL;
  return json_object_ref (json_node_get_object (parsed));
}

static JsonObject *
janus_call (LegbaTestJanus * j, const char *path, JsonObject * request)
{
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/janus%s",
      j->http_port, path);
  JsonObject *answer;

  json_object_set_string_member (request, "apisecret", API_SECRET);
  answer = post (url, request);
  g_assert_nonnull (answer);
  return answer;
}

static gboolean
ready (LegbaTestJanus * j)
{
  g_autofree char *log_path = g_build_filename (j->dir, "janus.log", NULL);
  g_autofree char *log = NULL;
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/admin",
      j->admin_port);
  JsonObject *request = json_object_new ();
  g_autoptr (JsonObject) answer = NULL;

  if (!g_file_get_contents (log_path, &log, NULL, NULL) ||
      strstr (log, "Websockets server started") == NULL) {
    json_object_unref (request);
    return FALSE;
  }
  json_object_set_string_member (request, "janus", "ping");
  json_object_set_string_member (request, "admin_secret", ADMIN_SECRET);
  answer = post (url, request);
  return answer != NULL;
}

static gboolean
poll_tick (gpointer data)
{
  return G_SOURCE_CONTINUE;
}

/* Runs Janus on the configuration folder of j, until it listens. */
static void
spawn (LegbaTestJanus * j)
{
  g_autofree char *janus = g_find_program_in_path ("janus");
  g_autoptr (GSubprocessLauncher) launcher = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *cfg = g_build_filename (j->dir, "cfg", NULL);
  g_autofree char *log = g_build_filename (j->dir, "janus.log", NULL);
  guint tick;

  /* ready() reads the log: a former run's must not answer for this one */
  g_unlink (log);
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE |
      G_SUBPROCESS_FLAGS_STDERR_SILENCE);
  legba_test_launcher_die_with_parent (launcher);
  {
    g_autofree char *main = g_build_filename (cfg, "janus.jcfg", NULL);
    const char *argv[] = { janus, "-F", cfg, "-C", main, NULL };

    j->process = g_subprocess_launcher_spawnv (launcher, argv, &error);
  }
  g_assert_no_error (error);
  /* Janus says nothing on a pipe: its log and its admin API say when both
   * transports listen */
  tick = g_timeout_add (50, poll_tick, NULL);
  LEGBA_TEST_WAIT_UNTIL (ready (j), READY_TIMEOUT_S, "Janus to listen");
  g_source_remove (tick);
}

static gboolean
start (LegbaTestJanus * j, gboolean open)
{
  g_autofree char *janus = g_find_program_in_path ("janus");
  g_autofree char *lib = janus_lib ();
  g_autoptr (GError) error = NULL;

  memset (j, 0, sizeof (*j));
  j->open = open;
  if (janus == NULL || lib == NULL)
    return FALSE;
  j->dir = g_dir_make_tmp ("legba-janus-XXXXXX", &error);
  g_assert_no_error (error);
  j->http_port = free_port ();
  j->admin_port = free_port ();
  j->ws_port = free_port ();
  j->ws_url = g_strdup_printf ("ws://127.0.0.1:%u/", j->ws_port);
  write_config (j, lib);
  spawn (j);
  return TRUE;
}

void
legba_test_janus_kill (LegbaTestJanus * j)
{
  g_assert_nonnull (j->process);
  g_subprocess_force_exit (j->process);
  g_subprocess_wait (j->process, NULL, NULL);
  g_clear_object (&j->process);
}

void
legba_test_janus_restart (LegbaTestJanus * j)
{
  g_assert_null (j->process);
  spawn (j);
}

gboolean
legba_test_janus_start (LegbaTestJanus * j)
{
  return start (j, FALSE);
}

gboolean
legba_test_janus_start_open (LegbaTestJanus * j)
{
  return start (j, TRUE);
}

static void
remove_tree (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL) {
    g_autofree char *path = g_build_filename (dir, name, NULL);

    if (g_file_test (path, G_FILE_TEST_IS_DIR) &&
        !g_file_test (path, G_FILE_TEST_IS_SYMLINK))
      remove_tree (path);
    else
      g_unlink (path);
  }
  g_rmdir (dir);
}

void
legba_test_janus_stop (LegbaTestJanus * j)
{
  if (j->process != NULL) {
    g_subprocess_force_exit (j->process);
    g_subprocess_wait (j->process, NULL, NULL);
    g_clear_object (&j->process);
  }
  if (j->dir != NULL)
    remove_tree (j->dir);
  g_clear_pointer (&j->dir, g_free);
  g_clear_pointer (&j->ws_url, g_free);
}

static gint64
data_id (JsonObject * answer)
{
  JsonObject *data = json_object_get_object_member (answer, "data");

  g_assert_cmpstr (json_object_get_string_member (answer, "janus"), ==,
      "success");
  return json_object_get_int_member (data, "id");
}

/* A session and a VideoRoom handle on it: "/SESSION/HANDLE". */
static char *
videoroom_handle (LegbaTestJanus * j)
{
  JsonObject *request = json_object_new ();
  g_autoptr (JsonObject) created = NULL;
  g_autoptr (JsonObject) attached = NULL;
  g_autofree char *session = NULL;
  gint64 session_id;

  json_object_set_string_member (request, "janus", "create");
  created = janus_call (j, "", request);
  session_id = data_id (created);
  session = g_strdup_printf ("/%" G_GINT64_FORMAT, session_id);
  request = json_object_new ();
  json_object_set_string_member (request, "janus", "attach");
  json_object_set_string_member (request, "plugin", "janus.plugin.videoroom");
  attached = janus_call (j, session, request);
  return g_strdup_printf ("%s/%" G_GINT64_FORMAT, session, data_id (attached));
}

/* The VideoRoom's answer to body (consumed), checked. */
static JsonObject *
videoroom_request (LegbaTestJanus * j, JsonObject * body)
{
  g_autofree char *handle = videoroom_handle (j);
  JsonObject *request = json_object_new ();
  g_autoptr (JsonObject) answer = NULL;
  JsonObject *plugindata;

  json_object_set_string_member (request, "janus", "message");
  json_object_set_object_member (request, "body", body);
  answer = janus_call (j, handle, request);
  g_assert_cmpstr (json_object_get_string_member (answer, "janus"), ==,
      "success");
  plugindata = json_object_get_object_member (answer, "plugindata");
  return json_object_ref (json_object_get_object_member (plugindata, "data"));
}

static void
add_token (LegbaTestJanus * j, const char *token)
{
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/admin",
      j->admin_port);
  JsonObject *request = json_object_new ();
  JsonArray *plugins = json_array_new ();
  g_autoptr (JsonObject) answer = NULL;

  json_array_add_string_element (plugins, "janus.plugin.videoroom");
  json_object_set_string_member (request, "janus", "add_token");
  json_object_set_string_member (request, "token", token);
  json_object_set_array_member (request, "plugins", plugins);
  json_object_set_string_member (request, "admin_secret", ADMIN_SECRET);
  answer = post (url, request);
  g_assert_nonnull (answer);
  g_assert_cmpstr (json_object_get_string_member (answer, "janus"), ==,
      "success");
}

guint64
legba_test_janus_create_room (LegbaTestJanus * j, const char *pin,
    const char *const *tokens)
{
  static guint64 next_room = 1000;
  JsonObject *body = json_object_new ();
  JsonArray *allowed = json_array_new ();
  g_autoptr (JsonObject) data = NULL;
  guint64 room = ++next_room;

  for (guint i = 0; tokens != NULL && tokens[i] != NULL; i++) {
    add_token (j, tokens[i]);
    json_array_add_string_element (allowed, tokens[i]);
  }
  json_object_set_string_member (body, "request", "create");
  json_object_set_string_member (body, "admin_key", ADMIN_KEY);
  json_object_set_int_member (body, "room", (gint64) room);
  json_object_set_string_member (body, "pin", pin);
  json_object_set_array_member (body, "allowed", allowed);
  json_object_set_string_member (body, "audiocodec", "opus");
  json_object_set_string_member (body, "videocodec", "h264,vp8");
  json_object_set_boolean_member (body, "transport_wide_cc_ext", TRUE);
  json_object_set_boolean_member (body, "notify_joining", TRUE);
  json_object_set_int_member (body, "publishers", 16);
  data = videoroom_request (j, body);
  g_assert_cmpstr (json_object_get_string_member (data, "videoroom"), ==,
      "created");
  return room;
}

JsonArray *
legba_test_janus_participants (LegbaTestJanus * j, guint64 room)
{
  JsonObject *body = json_object_new ();
  g_autoptr (JsonObject) data = NULL;

  json_object_set_string_member (body, "request", "listparticipants");
  json_object_set_int_member (body, "room", (gint64) room);
  data = videoroom_request (j, body);
  return json_array_ref (json_object_get_array_member (data, "participants"));
}

guint
legba_test_janus_count_rooms (LegbaTestJanus * j)
{
  JsonObject *body = json_object_new ();
  g_autoptr (JsonObject) data = NULL;

  json_object_set_string_member (body, "request", "list");
  json_object_set_string_member (body, "admin_key", ADMIN_KEY);
  data = videoroom_request (j, body);
  return json_array_get_length (json_object_get_array_member (data, "list"));
}

/* Janus's admin API: token (add_token or remove_token) for the VideoRoom. */
static void
token_request (LegbaTestJanus * j, const char *verb, const char *token)
{
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/admin",
      j->admin_port);
  JsonObject *request = json_object_new ();
  g_autoptr (JsonObject) answer = NULL;

  json_object_set_string_member (request, "janus", verb);
  json_object_set_string_member (request, "token", token);
  if (strcmp (verb, "add_token") == 0) {
    JsonArray *plugins = json_array_new ();

    json_array_add_string_element (plugins, "janus.plugin.videoroom");
    json_object_set_array_member (request, "plugins", plugins);
  }
  json_object_set_string_member (request, "admin_secret", ADMIN_SECRET);
  answer = post (url, request);
  g_assert_nonnull (answer);
  g_assert_cmpstr (json_object_get_string_member (answer, "janus"), ==,
      "success");
}

static void
allowed_request (LegbaTestJanus * j, guint64 room, const char *action,
    const char *token)
{
  JsonObject *body = json_object_new ();
  JsonArray *allowed = json_array_new ();
  g_autoptr (JsonObject) data = NULL;

  json_array_add_string_element (allowed, token);
  json_object_set_string_member (body, "request", "allowed");
  json_object_set_int_member (body, "room", (gint64) room);
  json_object_set_string_member (body, "action", action);
  json_object_set_array_member (body, "allowed", allowed);
  data = videoroom_request (j, body);
  g_assert_cmpstr (json_object_get_string_member (data, "videoroom"), ==,
      "success");
}

void
legba_test_janus_admit (LegbaTestJanus * j, guint64 room, const char *token)
{
  token_request (j, "add_token", token);
  allowed_request (j, room, "add", token);
}

void
legba_test_janus_revoke (LegbaTestJanus * j, guint64 room, const char *token)
{
  allowed_request (j, room, "remove", token);
  token_request (j, "remove_token", token);
}

static JsonObject *
admin_call (LegbaTestJanus * j, const char *path, const char *verb)
{
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/admin%s",
      j->admin_port, path);
  JsonObject *request = json_object_new ();
  JsonObject *answer;

  json_object_set_string_member (request, "janus", verb);
  json_object_set_string_member (request, "admin_secret", ADMIN_SECRET);
  answer = post (url, request);
  g_assert_nonnull (answer);
  g_assert_cmpstr (json_object_get_string_member (answer, "janus"), ==,
      "success");
  return answer;
}

/* Whether one of the session's handles is a VideoRoom participant of
 * that display (its handle_info's plugin_specific). */
static gboolean
session_has_display (LegbaTestJanus * j, gint64 session, const char *display)
{
  g_autofree char *path = g_strdup_printf ("/%" G_GINT64_FORMAT, session);
  g_autoptr (JsonObject) listed = admin_call (j, path, "list_handles");
  JsonArray *handles = json_object_get_array_member (listed, "handles");

  for (guint i = 0; i < json_array_get_length (handles); i++) {
    g_autofree char *handle_path = g_strdup_printf ("%s/%" G_GINT64_FORMAT,
        path, json_array_get_int_element (handles, i));
    g_autoptr (JsonObject) info = admin_call (j, handle_path, "handle_info");
    JsonObject *o = json_object_get_object_member (info, "info");
    JsonNode *node = o ? json_object_get_member (o, "plugin_specific") : NULL;

    if (node != NULL && JSON_NODE_HOLDS_OBJECT (node) &&
        g_strcmp0 (json_object_get_string_member_with_default
            (json_node_get_object (node), "display", NULL), display) == 0)
      return TRUE;
  }
  return FALSE;
}

gboolean
legba_test_janus_destroy_session_of (LegbaTestJanus * j, const char *display)
{
  g_autoptr (JsonObject) listed = admin_call (j, "", "list_sessions");
  JsonArray *sessions = json_object_get_array_member (listed, "sessions");

  for (guint i = 0; i < json_array_get_length (sessions); i++) {
    gint64 session = json_array_get_int_element (sessions, i);
    g_autofree char *path = g_strdup_printf ("/%" G_GINT64_FORMAT, session);

    if (session_has_display (j, session, display)) {
      g_autoptr (JsonObject) answer = admin_call (j, path, "destroy_session");

      return TRUE;
    }
  }
  return FALSE;
}
