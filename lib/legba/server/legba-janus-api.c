/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * One VideoRoom request through Janus's HTTP API: create a session, attach
 * janus.plugin.videoroom, send the request (the VideoRoom answers create,
 * destroy, allowed and list at once, in the HTTP answer), destroy the
 * session. A session per request needs no keepalive and survives a Janus
 * restart; the requests are rare (a room made, a member joining or
 * leaving).
 */
#include <legba/server/legba-janus-api.h>

#include <legba/common/legba-json.h>

#include <string.h>

G_DEFINE_QUARK (legba - janus - error - quark, legba_janus_error);

typedef enum
{
  STEP_CREATE,
  STEP_ATTACH,
  STEP_MESSAGE,
  STEP_DESTROY,
} Step;

typedef struct
{
  SoupSession *session;
  GMainContext *context;
  char *url;
  char *api_secret;
  JsonObject *body;
  LegbaJanusCallback callback;
  gpointer user_data;
  Step step;
  gint64 session_id;
  gint64 handle_id;
  JsonObject *answer;           /* the VideoRoom's, once there */
  GError *error;                /* the first failure */
} Request;

static void request_send (Request * request);

static void
request_finish (Request * request)
{
  request->callback (request->error ? NULL : request->answer, request->error,
      request->user_data);
  g_object_unref (request->session);
  g_main_context_unref (request->context);
  g_free (request->url);
  g_free (request->api_secret);
  json_object_unref (request->body);
  g_clear_pointer (&request->answer, json_object_unref);
  g_clear_error (&request->error);
  g_free (request);
}

/* {"janus": VERB, "transaction": ..., "apisecret": ...} */
static JsonObject *
envelope_new (const char *api_secret, const char *verb)
{
  JsonObject *obj = json_object_new ();

  json_object_set_string_member (obj, "janus", verb);
  json_object_set_string_member (obj, "transaction", "legba");
  if (api_secret != NULL)
    json_object_set_string_member (obj, "apisecret", api_secret);
  return obj;
}

static JsonObject *
request_envelope (Request * request, const char *verb)
{
  return envelope_new (request->api_secret, verb);
}

/* The error of a Janus answer, core or VideoRoom, whose verb should be
 * expected; NULL when none. */
static GError *
answer_error (JsonObject * answer, const char *expected, JsonObject ** plugin)
{
  const char *verb = legba_json_object_get_string (answer, "janus");
  JsonObject *error, *pd;

  *plugin = NULL;
  if (g_strcmp0 (verb, "error") == 0) {
    error = json_object_get_object_member (answer, "error");
    if (error != NULL)
      return g_error_new (LEGBA_JANUS_ERROR,
          (gint) json_object_get_int_member_with_default (error, "code", 0),
          "Janus: %s", legba_json_object_get_string (error, "reason") ?
          legba_json_object_get_string (error, "reason") : "error");
  }
  if (g_strcmp0 (verb, expected) != 0)
    return g_error_new (LEGBA_JANUS_ERROR, LEGBA_JANUS_ERROR_INVALID,
        "Janus answered \"%s\" where \"%s\" was expected",
        verb ? verb : "(nothing)", expected);
  pd = json_object_has_member (answer, "plugindata") ?
      json_object_get_object_member (answer, "plugindata") : NULL;
  if (pd != NULL && json_object_has_member (pd, "data"))
    *plugin = json_object_get_object_member (pd, "data");
  if (*plugin != NULL && json_object_has_member (*plugin, "error_code"))
    return g_error_new (LEGBA_JANUS_ERROR,
        (gint) json_object_get_int_member (*plugin, "error_code"),
        "Janus VideoRoom: %s", legba_json_object_get_string (*plugin,
            "error") ? legba_json_object_get_string (*plugin, "error") :
        "error");
  return NULL;
}

/* The JSON object Janus at url answered (bytes, NULL with error when
 * none came), whose verb should be expected; NULL when it is not one,
 * or says an error, with out_error set. */
static JsonNode *
answer_read (const char *url, GBytes * bytes, SoupMessage * msg,
    const GError * error, const char *expected, JsonObject ** plugin,
    GError ** out_error)
{
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *why = NULL;
  gsize size = 0;
  const char *text;
  GError *janus_error;

  *plugin = NULL;
  if (bytes == NULL) {
    *out_error = g_error_new (LEGBA_JANUS_ERROR,
        LEGBA_JANUS_ERROR_UNREACHABLE, "Janus at %s: %s", url, error->message);
    return NULL;
  }
  if (soup_message_get_status (msg) != SOUP_STATUS_OK) {
    *out_error = g_error_new (LEGBA_JANUS_ERROR,
        LEGBA_JANUS_ERROR_UNREACHABLE, "Janus at %s: HTTP %u", url,
        soup_message_get_status (msg));
    return NULL;
  }
  text = g_bytes_get_data (bytes, &size);
  root = legba_json_parse_strict (text, size, NULL, NULL, &why);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    *out_error = g_error_new (LEGBA_JANUS_ERROR,
        LEGBA_JANUS_ERROR_INVALID, "Janus at %s: not a JSON object", url);
    return NULL;
  }
  janus_error = answer_error (json_node_get_object (root), expected, plugin);
  if (janus_error != NULL) {
    *out_error = janus_error;
    return NULL;
  }
  return g_steal_pointer (&root);
}

/* Reads the answer of the current step; FALSE (with request->error set)
 * when the request cannot go on. */
static gboolean
request_take_answer (Request * request, GBytes * bytes, SoupMessage * msg,
    GError * error)
{
  g_autoptr (JsonNode) root = NULL;
  JsonObject *answer, *plugin, *data;

  root = answer_read (request->url, bytes, msg, error, "success", &plugin,
      &request->error);
  if (root == NULL)
    return FALSE;
  answer = json_node_get_object (root);
  if (request->step == STEP_MESSAGE) {
    request->answer = plugin ? json_object_ref (plugin) : json_object_new ();
    return TRUE;
  }
  data = json_object_has_member (answer, "data") ?
      json_object_get_object_member (answer, "data") : NULL;
  if (request->step != STEP_DESTROY &&
      (data == NULL || json_object_get_int_member_with_default (data, "id",
              0) == 0)) {
    request->error = g_error_new (LEGBA_JANUS_ERROR,
        LEGBA_JANUS_ERROR_INVALID, "Janus at %s: no id in its answer",
        request->url);
    return FALSE;
  }
  if (request->step == STEP_CREATE)
    request->session_id = json_object_get_int_member (data, "id");
  else if (request->step == STEP_ATTACH)
    request->handle_id = json_object_get_int_member (data, "id");
  return TRUE;
}

static void
request_sent (GObject * source, GAsyncResult * result, gpointer user_data)
{
  Request *request = user_data;
  SoupMessage *msg = soup_session_get_async_result_message (SOUP_SESSION
      (source), result);
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) bytes =
      soup_session_send_and_read_finish (SOUP_SESSION (source), result, &error);
  gboolean ok;

  if (request->step == STEP_DESTROY) {
    request_finish (request);
    return;
  }
  ok = request_take_answer (request, bytes, msg, error);
  if (!ok && request->session_id == 0) {
    request_finish (request);
    return;
  }
  /* A session once made is destroyed, whatever happened after. */
  request->step = ok ? request->step + 1 : STEP_DESTROY;
  request_send (request);
}

static char *
object_to_text (JsonObject * obj)
{
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);

  json_node_set_object (node, obj);
  json_generator_set_root (gen, node);
  return json_generator_to_data (gen, NULL);
}

static void
request_send (Request * request)
{
  g_autoptr (JsonObject) obj = NULL;
  g_autoptr (SoupMessage) msg = NULL;
  g_autoptr (GBytes) payload = NULL;
  g_autofree char *url = NULL;
  g_autofree char *text = NULL;

  switch (request->step) {
    case STEP_CREATE:
      obj = request_envelope (request, "create");
      url = g_strdup (request->url);
      break;
    case STEP_ATTACH:
      obj = request_envelope (request, "attach");
      json_object_set_string_member (obj, "plugin", "janus.plugin.videoroom");
      url = g_strdup_printf ("%s/%" G_GINT64_FORMAT, request->url,
          request->session_id);
      break;
    case STEP_MESSAGE:
      obj = request_envelope (request, "message");
      json_object_set_object_member (obj, "body",
          json_object_ref (request->body));
      url = g_strdup_printf ("%s/%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT,
          request->url, request->session_id, request->handle_id);
      break;
    case STEP_DESTROY:
    default:
      obj = request_envelope (request, "destroy");
      url = g_strdup_printf ("%s/%" G_GINT64_FORMAT, request->url,
          request->session_id);
      break;
  }
  text = object_to_text (obj);
  payload = g_bytes_new_take (text, strlen (text));
  text = NULL;
  msg = soup_message_new (SOUP_METHOD_POST, url);
  soup_message_set_request_body_from_bytes (msg, "application/json", payload);
  g_main_context_push_thread_default (request->context);
  soup_session_send_and_read_async (request->session, msg, G_PRIORITY_DEFAULT,
      NULL, request_sent, request);
  g_main_context_pop_thread_default (request->context);
}

void
legba_janus_request (SoupSession * session, GMainContext * context,
    const char *url, const char *api_secret, JsonObject * body,
    LegbaJanusCallback callback, gpointer user_data)
{
  Request *request;

  g_return_if_fail (SOUP_IS_SESSION (session));
  g_return_if_fail (url != NULL);
  g_return_if_fail (body != NULL);
  g_return_if_fail (callback != NULL);

  request = g_new0 (Request, 1);
  request->session = g_object_ref (session);
  request->context = context ? g_main_context_ref (context) :
      g_main_context_ref_thread_default ();
  request->url = g_strdup (url);
  request->api_secret = api_secret && *api_secret ? g_strdup (api_secret) :
      NULL;
  request->body = json_object_ref (body);
  request->callback = callback;
  request->user_data = user_data;
  request_send (request);
}

/* ---- Requests of Janus's core ---- */

typedef struct
{
  char *url;
  char *verb;
  LegbaJanusCoreCallback callback;
  gpointer user_data;
} CoreRequest;

static void
core_request_sent (GObject * source, GAsyncResult * result, gpointer user_data)
{
  CoreRequest *request = user_data;
  SoupMessage *msg = soup_session_get_async_result_message (SOUP_SESSION
      (source), result);
  g_autoptr (GError) error = NULL;
  g_autoptr (GError) janus_error = NULL;
  g_autoptr (GBytes) bytes =
      soup_session_send_and_read_finish (SOUP_SESSION (source), result, &error);
  g_autoptr (JsonNode) root = NULL;
  JsonObject *plugin;

  /* Janus acknowledges a keepalive ("ack"); it answers the rest
   * "success" */
  root = answer_read (request->url, bytes, msg, error,
      strcmp (request->verb, "keepalive") == 0 ? "ack" : "success", &plugin,
      &janus_error);
  request->callback (root ? json_node_get_object (root) : NULL, janus_error,
      request->user_data);
  g_free (request->url);
  g_free (request->verb);
  g_free (request);
}

void
legba_janus_core_request (SoupSession * session, GMainContext * context,
    const char *url, const char *api_secret, const char *verb,
    gint64 session_id, LegbaJanusCoreCallback callback, gpointer user_data)
{
  g_autoptr (JsonObject) obj = NULL;
  g_autoptr (SoupMessage) msg = NULL;
  g_autoptr (GBytes) payload = NULL;
  char *text;
  CoreRequest *request;

  g_return_if_fail (SOUP_IS_SESSION (session));
  g_return_if_fail (url != NULL);
  g_return_if_fail (verb != NULL);
  g_return_if_fail (callback != NULL);

  request = g_new0 (CoreRequest, 1);
  request->url = session_id != 0 ? g_strdup_printf ("%s/%" G_GINT64_FORMAT,
      url, session_id) : g_strdup (url);
  request->verb = g_strdup (verb);
  request->callback = callback;
  request->user_data = user_data;
  obj = envelope_new (api_secret && *api_secret ? api_secret : NULL, verb);
  text = object_to_text (obj);
  payload = g_bytes_new_take (text, strlen (text));
  msg = soup_message_new (SOUP_METHOD_POST, request->url);
  soup_message_set_request_body_from_bytes (msg, "application/json", payload);
  if (context != NULL)
    g_main_context_push_thread_default (context);
  soup_session_send_and_read_async (session, msg, G_PRIORITY_DEFAULT, NULL,
      core_request_sent, request);
  if (context != NULL)
    g_main_context_pop_thread_default (context);
}
