/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The Pusher HTTP API (Channels "HTTP API reference") over LegbaHub, and
 * the join-token endpoint of docs/room-protocol.md §2. Every request is
 * untrusted: it is validated here and answered with a JSON error, never
 * passed on to a g_return_if_fail.
 */
#include <legba/server/legba-http-api.h>
#include <legba/common/legba-auth.h>
#include <legba/server/legba-token-private.h>
#include <legba/common/legba-json.h>

#include <string.h>

/* Pusher HTTP API: auth_timestamp within 600 s of the server's clock. */
#define AUTH_WINDOW_S 600
/* Pusher HTTP API limits, as the pusher SDKs enforce them client-side. */
#define MAX_EVENT_CHANNELS 100
#define MAX_BATCH_EVENTS 10
#define MAX_EVENT_NAME_BYTES 200
#define MAX_USER_ID_BYTES 256
/* Socket ids are two unsigned 64-bit numbers at most. */
#define MAX_SOCKET_ID_LENGTH 41
/* docs/room-protocol.md §2 */
#define ROOM_CHANNEL_PREFIX "presence-legba."
/* What a client may say it speaks (docs/room-protocol.md §8); the first
 * when it says nothing. */
static const char *const room_protocols[] = {
  "legba-room/1", "legba-room/2", NULL
};

#define SUFFIX_MIN 6
#define SUFFIX_MAX 16
/* Pusher "#server-to-user-USER_ID": the channel sendToUser publishes to. */
#define SERVER_TO_USER_PREFIX "#server-to-user-"

static void
respond (LegbaHttpResponse * response, guint status, JsonNode * root)
{
  g_autoptr (JsonGenerator) gen = json_generator_new ();

  json_generator_set_root (gen, root);
  response->status = status;
  g_free (response->body);
  response->body = json_generator_to_data (gen, NULL);
}

static void
respond_builder (LegbaHttpResponse * response, guint status, JsonBuilder * b)
{
  g_autoptr (JsonNode) root = json_builder_get_root (b);

  respond (response, status, root);
}

static void
respond_empty (LegbaHttpResponse * response)
{
  g_autoptr (JsonObject) empty = json_object_new ();
  g_autoptr (JsonNode) root = json_node_init_object (json_node_alloc (), empty);

  respond (response, 200, root);
}

/* Pusher HTTP API errors: the status and {"error": "..."}. Messages may
 * quote request values; the generator escapes them, and bytes that are
 * not UTF-8 (a path, a query value) become U+FFFD, so that the body is
 * always JSON. */
static void
respond_take_error (LegbaHttpResponse * response, guint status, char *message)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autofree char *valid = g_utf8_make_valid (message, -1);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "error");
  json_builder_add_string_value (b, valid);
  json_builder_end_object (b);
  respond_builder (response, status, b);
  g_free (message);
}

#define respond_error(response, status, ...) \
  respond_take_error ((response), (status), g_strdup_printf (__VA_ARGS__))

/* ---- Input validation ---- */

/* Pusher protocol 7 socket ids: digits "." digits. */
static gboolean
socket_id_is_valid (const char *s)
{
  gsize i, before = 0, after = 0;
  gboolean dot = FALSE;

  if (s == NULL)
    return FALSE;
  for (i = 0; s[i]; i++) {
    if (i >= MAX_SOCKET_ID_LENGTH)
      return FALSE;
    if (s[i] == '.' && !dot)
      dot = TRUE;
    else if (!g_ascii_isdigit (s[i]))
      return FALSE;
    else if (dot)
      after++;
    else
      before++;
  }
  return dot && before > 0 && after > 0;
}

/* docs/room-protocol.md §2: the participant suffix is [a-z0-9]{6,16}. */
static gboolean
suffix_is_valid (const char *s)
{
  gsize i;

  if (s == NULL)
    return FALSE;
  for (i = 0; s[i]; i++) {
    if (i >= SUFFIX_MAX || !(g_ascii_islower (s[i]) || g_ascii_isdigit (s[i])))
      return FALSE;
  }
  return i >= SUFFIX_MIN;
}

/* The request body as a JSON object, or NULL after answering 400. The
 * text is checked against RFC 8259 (and a nesting bound) before json-glib
 * sees it. */
static JsonObject *
parse_body_object (const LegbaHttpRequest * request,
    LegbaHttpResponse * response)
{
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *message = NULL;

  if (request->body == NULL || request->body_len == 0) {
    respond_error (response, 400, "Request body required");
    return NULL;
  }

  root = legba_json_parse_strict (request->body, request->body_len, NULL,
      NULL, &message);
  if (root == NULL) {
    respond_error (response, 400, "Request body: %s", message);
    return NULL;
  }
  if (!JSON_NODE_HOLDS_OBJECT (root)) {
    respond_error (response, 400, "Request body must be a JSON object");
    return NULL;
  }
  return json_object_ref (json_node_get_object (root));
}

/* A string member; NULL when absent. *ok is FALSE when present but not a
 * string. */
static const char *
get_string_member (JsonObject * obj, const char *name, gboolean * ok)
{
  const char *value = legba_json_object_get_string (obj, name);

  *ok = value != NULL || !json_object_has_member (obj, name);
  return value;
}

typedef struct
{
  gboolean user_count;
  gboolean subscription_count;
} InfoAttributes;

/* Pusher `info`: a comma-separated list of attribute names. Names Legba
 * does not compute (such as "cache") are ignored. */
static void
parse_info (const char *info, InfoAttributes * attrs)
{
  g_auto (GStrv) names = NULL;
  guint i;

  attrs->user_count = attrs->subscription_count = FALSE;
  if (info == NULL)
    return;

  names = g_strsplit (info, ",", 16);
  for (i = 0; names[i]; i++) {
    const char *name = g_strstrip (names[i]);

    if (strcmp (name, "user_count") == 0)
      attrs->user_count = TRUE;
    else if (strcmp (name, "subscription_count") == 0)
      attrs->subscription_count = TRUE;
  }
}

static gboolean
is_presence (const char *channel)
{
  return g_str_has_prefix (channel, "presence-");
}

/* ---- Events ---- */

typedef struct
{
  const char *name;
  const char *data;
  const char *socket_id;
  GPtrArray *channels;          /* borrowed strings, unique */
  gboolean has_info;
  InfoAttributes info;
} ApiEvent;

static void
api_event_clear (ApiEvent * ev)
{
  g_clear_pointer (&ev->channels, g_ptr_array_unref);
}

static gboolean
add_channel (LegbaHub * hub, ApiEvent * ev, const char *channel,
    LegbaHttpResponse * response)
{
  guint i;

  if (channel == NULL) {
    respond_error (response, 400, "Channel names must be strings");
    return FALSE;
  }
  if (g_str_has_prefix (channel, SERVER_TO_USER_PREFIX)) {
    gsize len = strlen (channel + strlen (SERVER_TO_USER_PREFIX));

    if (len == 0 || len > MAX_USER_ID_BYTES) {
      respond_error (response, 400, "Invalid user id in channel name");
      return FALSE;
    }
  } else if (!legba_hub_channel_name_is_valid (hub, channel)) {
    respond_error (response, 400, "Invalid channel name: '%s'", channel);
    return FALSE;
  }

  for (i = 0; i < ev->channels->len; i++)
    if (strcmp (g_ptr_array_index (ev->channels, i), channel) == 0)
      return TRUE;
  g_ptr_array_add (ev->channels, (gpointer) channel);
  return TRUE;
}

/* Pusher: `channels` (an array of 1 to 100 names) or `channel`. */
static gboolean
read_channels (LegbaHub * hub, JsonObject * obj, gboolean batch,
    ApiEvent * ev, LegbaHttpResponse * response)
{
  JsonNode *list = batch ? NULL : json_object_get_member (obj, "channels");
  gboolean ok;
  const char *single = get_string_member (obj, "channel", &ok);
  JsonArray *array;
  guint i, n;

  if (!ok || (list != NULL && single != NULL)) {
    respond_error (response, 400, "Give either channels or channel");
    return FALSE;
  }
  if (list == NULL) {
    if (single == NULL) {
      respond_error (response, 400, "Missing channel");
      return FALSE;
    }
    return add_channel (hub, ev, single, response);
  }

  if (!JSON_NODE_HOLDS_ARRAY (list)) {
    respond_error (response, 400, "channels must be an array");
    return FALSE;
  }
  array = json_node_get_array (list);
  n = json_array_get_length (array);
  if (n == 0 || n > MAX_EVENT_CHANNELS) {
    respond_error (response, 400, "An event goes to 1 to %d channels",
        MAX_EVENT_CHANNELS);
    return FALSE;
  }
  for (i = 0; i < n; i++) {
    JsonNode *node = json_array_get_element (array, i);
    const char *channel = NULL;

    if (JSON_NODE_HOLDS_VALUE (node) &&
        json_node_get_value_type (node) == G_TYPE_STRING)
      channel = json_node_get_string (node);
    if (!add_channel (hub, ev, channel, response))
      return FALSE;
  }
  return TRUE;
}

/* Validates one event of POST events (batch FALSE) or batch_events, so
 * that nothing is published unless every event is acceptable. */
static gboolean
read_event (LegbaHub * hub, JsonNode * node, gboolean batch, ApiEvent * ev,
    LegbaHttpResponse * response)
{
  const LegbaLimits *limits = legba_hub_get_limits (hub);
  JsonObject *obj;
  const char *info;
  gboolean ok_name, ok_data, ok_socket, ok_info;

  ev->channels = g_ptr_array_new ();
  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node)) {
    respond_error (response, 400, "An event must be a JSON object");
    return FALSE;
  }
  obj = json_node_get_object (node);

  ev->name = get_string_member (obj, "name", &ok_name);
  ev->data = get_string_member (obj, "data", &ok_data);
  ev->socket_id = get_string_member (obj, "socket_id", &ok_socket);
  info = get_string_member (obj, "info", &ok_info);

  if (!ok_name || ev->name == NULL || ev->name[0] == '\0' ||
      strlen (ev->name) > MAX_EVENT_NAME_BYTES) {
    respond_error (response, 400, "Event name must be a string of 1 to %d "
        "bytes", MAX_EVENT_NAME_BYTES);
    return FALSE;
  }
  if (g_str_has_prefix (ev->name, "pusher")) {
    respond_error (response, 400, "Event names starting with pusher are "
        "reserved");
    return FALSE;
  }
  if (!ok_data || ev->data == NULL) {
    respond_error (response, 400, "Event data must be a string");
    return FALSE;
  }
  if (strlen (ev->data) > limits->max_event_bytes) {
    respond_error (response, 413, "Event data is over %" G_GSIZE_FORMAT
        " bytes", limits->max_event_bytes);
    return FALSE;
  }
  if (!ok_socket || (ev->socket_id && !socket_id_is_valid (ev->socket_id))) {
    respond_error (response, 400, "Invalid socket_id");
    return FALSE;
  }
  if (!ok_info) {
    respond_error (response, 400, "info must be a string");
    return FALSE;
  }
  ev->has_info = info != NULL;
  parse_info (info, &ev->info);

  return read_channels (hub, obj, batch, ev, response);
}

static gboolean
publish_event (LegbaHub * hub, LegbaHubApp * app, ApiEvent * ev,
    LegbaHttpResponse * response)
{
  g_autoptr (GPtrArray) channels = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  guint i;

  for (i = 0; i < ev->channels->len; i++) {
    const char *channel = g_ptr_array_index (ev->channels, i);

    if (g_str_has_prefix (channel, SERVER_TO_USER_PREFIX))
      legba_hub_send_to_user (hub, app,
          channel + strlen (SERVER_TO_USER_PREFIX), ev->name, ev->data);
    else
      g_ptr_array_add (channels, (gpointer) channel);
  }
  if (channels->len == 0)
    return TRUE;

  g_ptr_array_add (channels, NULL);
  if (!legba_hub_publish (hub, app, (const char *const *) channels->pdata,
          ev->name, ev->data, ev->socket_id, &error)) {
    respond_error (response,
        g_error_matches (error, LEGBA_HUB_ERROR,
            LEGBA_HUB_ERROR_TOO_LARGE) ? 413 : 400, "%s", error->message);
    return FALSE;
  }
  return TRUE;
}

/* The attributes of one channel asked for with `info`. */
static void
add_channel_attributes (JsonBuilder * b, const LegbaHubChannelInfo * ci,
    const InfoAttributes * attrs)
{
  json_builder_begin_object (b);
  if (attrs->user_count && is_presence (ci->name)) {
    json_builder_set_member_name (b, "user_count");
    json_builder_add_int_value (b, ci->user_count);
  }
  if (attrs->subscription_count) {
    json_builder_set_member_name (b, "subscription_count");
    json_builder_add_int_value (b, ci->subscription_count);
  }
  json_builder_end_object (b);
}

static void
add_event_channel_info (LegbaHub * hub, LegbaHubApp * app, JsonBuilder * b,
    const char *channel, const InfoAttributes * attrs)
{
  LegbaHubChannelInfo ci = { 0 };

  legba_hub_get_channel (hub, app, channel, &ci);
  ci.name = channel;
  add_channel_attributes (b, &ci, attrs);
}

/* Pusher HTTP API: POST /apps/ID/events. */
static void
handle_events (LegbaHub * hub, LegbaHubApp * app,
    const LegbaHttpRequest * request, LegbaHttpResponse * response)
{
  g_autoptr (JsonObject) body = NULL;
  g_autoptr (JsonNode) node = NULL;
  g_autoptr (JsonBuilder) b = NULL;
  ApiEvent ev = { 0 };
  guint i;

  body = parse_body_object (request, response);
  if (body == NULL)
    return;

  node = json_node_init_object (json_node_alloc (), body);
  if (!read_event (hub, node, FALSE, &ev, response) ||
      !publish_event (hub, app, &ev, response))
    goto out;

  if (!ev.has_info) {
    respond_empty (response);
    goto out;
  }

  /* Pusher: with `info`, a hash of the channels published to. */
  b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "channels");
  json_builder_begin_object (b);
  for (i = 0; i < ev.channels->len; i++) {
    const char *channel = g_ptr_array_index (ev.channels, i);

    if (g_str_has_prefix (channel, SERVER_TO_USER_PREFIX))
      continue;
    json_builder_set_member_name (b, channel);
    add_event_channel_info (hub, app, b, channel, &ev.info);
  }
  json_builder_end_object (b);
  json_builder_end_object (b);
  respond_builder (response, 200, b);

out:
  api_event_clear (&ev);
}

static void
respond_batch_info (LegbaHub * hub, LegbaHubApp * app, ApiEvent * events,
    guint n, LegbaHttpResponse * response)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  guint i;

  /* Pusher: attributes at index i for the channel of event i. */
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "batch");
  json_builder_begin_array (b);
  for (i = 0; i < n; i++) {
    const char *channel = g_ptr_array_index (events[i].channels, 0);

    if (!events[i].has_info || g_str_has_prefix (channel,
            SERVER_TO_USER_PREFIX)) {
      json_builder_begin_object (b);
      json_builder_end_object (b);
    } else {
      add_event_channel_info (hub, app, b, channel, &events[i].info);
    }
  }
  json_builder_end_array (b);
  json_builder_end_object (b);
  respond_builder (response, 200, b);
}

/* Pusher HTTP API: POST /apps/ID/batch_events {"batch": [...]}. */
static void
handle_batch_events (LegbaHub * hub, LegbaHubApp * app,
    const LegbaHttpRequest * request, LegbaHttpResponse * response)
{
  g_autoptr (JsonObject) body = NULL;
  ApiEvent events[MAX_BATCH_EVENTS] = { {0} };
  JsonNode *batch;
  JsonArray *array;
  gboolean any_info = FALSE;
  guint i, n;

  body = parse_body_object (request, response);
  if (body == NULL)
    return;

  batch = json_object_get_member (body, "batch");
  if (batch == NULL || !JSON_NODE_HOLDS_ARRAY (batch)) {
    respond_error (response, 400, "batch must be an array of events");
    return;
  }
  array = json_node_get_array (batch);
  n = json_array_get_length (array);
  if (n == 0 || n > MAX_BATCH_EVENTS) {
    respond_error (response, 400, "A batch holds 1 to %d events",
        MAX_BATCH_EVENTS);
    return;
  }

  for (i = 0; i < n; i++) {
    if (!read_event (hub, json_array_get_element (array, i), TRUE,
            &events[i], response))
      goto out;
    any_info |= events[i].has_info;
  }
  for (i = 0; i < n; i++)
    if (!publish_event (hub, app, &events[i], response))
      goto out;

  if (any_info)
    respond_batch_info (hub, app, events, n, response);
  else
    respond_empty (response);

out:
  for (i = 0; i < n; i++)
    api_event_clear (&events[i]);
}

/* ---- Channels and users ---- */

static const char *
get_param (const LegbaHttpRequest * request, const char *name)
{
  return request->params ? g_hash_table_lookup (request->params, name) : NULL;
}

typedef struct
{
  JsonBuilder *builder;
  InfoAttributes attrs;
} ChannelsListing;

static void
add_listed_channel (const LegbaHubChannelInfo * info, gpointer user_data)
{
  ChannelsListing *listing = user_data;

  json_builder_set_member_name (listing->builder, info->name);
  add_channel_attributes (listing->builder, info, &listing->attrs);
}

/* Pusher HTTP API: GET /apps/ID/channels. */
static void
handle_channels (LegbaHub * hub, LegbaHubApp * app,
    const LegbaHttpRequest * request, LegbaHttpResponse * response)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  const char *prefix = get_param (request, "filter_by_prefix");
  ChannelsListing listing;

  parse_info (get_param (request, "info"), &listing.attrs);
  /* Pusher: user_count only for a listing limited to presence channels. */
  if (listing.attrs.user_count && (prefix == NULL || !is_presence (prefix))) {
    respond_error (response, 400, "user_count is only available with "
        "filter_by_prefix=presence-");
    return;
  }

  listing.builder = b;
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "channels");
  json_builder_begin_object (b);
  legba_hub_foreach_channel (hub, app, prefix && prefix[0] ? prefix : NULL,
      add_listed_channel, &listing);
  json_builder_end_object (b);
  json_builder_end_object (b);
  respond_builder (response, 200, b);
}

/* Pusher HTTP API: GET /apps/ID/channels/NAME. */
static void
handle_channel (LegbaHub * hub, LegbaHubApp * app, const char *channel,
    const LegbaHttpRequest * request, LegbaHttpResponse * response)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  LegbaHubChannelInfo ci = { 0 };
  InfoAttributes attrs;
  gboolean occupied;

  if (!legba_hub_channel_name_is_valid (hub, channel)) {
    respond_error (response, 400, "Invalid channel name");
    return;
  }
  parse_info (get_param (request, "info"), &attrs);
  if (attrs.user_count && !is_presence (channel)) {
    respond_error (response, 400, "user_count is only available for "
        "presence channels");
    return;
  }

  occupied = legba_hub_get_channel (hub, app, channel, &ci);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "occupied");
  json_builder_add_boolean_value (b, occupied);
  /* As soketi does: a presence channel always reports its user count. */
  if (is_presence (channel)) {
    json_builder_set_member_name (b, "user_count");
    json_builder_add_int_value (b, occupied ? ci.user_count : 0);
  }
  if (attrs.subscription_count) {
    json_builder_set_member_name (b, "subscription_count");
    json_builder_add_int_value (b, occupied ? ci.subscription_count : 0);
  }
  json_builder_end_object (b);
  respond_builder (response, 200, b);
}

/* Pusher HTTP API: GET /apps/ID/channels/NAME/users (presence only). */
static void
handle_channel_users (LegbaHub * hub, LegbaHubApp * app, const char *channel,
    LegbaHttpResponse * response)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (GPtrArray) users = NULL;
  guint i;

  if (!legba_hub_channel_name_is_valid (hub, channel)) {
    respond_error (response, 400, "Invalid channel name");
    return;
  }
  if (!is_presence (channel)) {
    respond_error (response, 400, "Only presence channels have users");
    return;
  }

  users = legba_hub_get_users (hub, app, channel);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "users");
  json_builder_begin_array (b);
  for (i = 0; users && i < users->len; i++) {
    json_builder_begin_object (b);
    json_builder_set_member_name (b, "id");
    json_builder_add_string_value (b, g_ptr_array_index (users, i));
    json_builder_end_object (b);
  }
  json_builder_end_array (b);
  json_builder_end_object (b);
  respond_builder (response, 200, b);
}

/* Pusher HTTP API: POST /apps/ID/users/USER_ID/terminate_connections. */
static void
handle_terminate (LegbaHub * hub, LegbaHubApp * app, const char *user_id,
    LegbaHttpResponse * response)
{
  if (user_id[0] == '\0' || strlen (user_id) > MAX_USER_ID_BYTES ||
      !g_utf8_validate (user_id, -1, NULL)) {
    respond_error (response, 400, "Invalid user id");
    return;
  }
  legba_hub_terminate_user (hub, app, user_id);
  respond_empty (response);
}

/* ---- Join tokens (docs/room-protocol.md §2) ---- */

/* RFC 6750 §2.1: "Authorization: Bearer TOKEN", scheme case-insensitive. */
static const char *
bearer_token (const char *authorization)
{
  const char *p;

  if (authorization == NULL)
    return NULL;
  p = authorization;
  while (*p == ' ')
    p++;
  if (g_ascii_strncasecmp (p, "Bearer ", 7) != 0)
    return NULL;
  p += 7;
  while (*p == ' ')
    p++;
  return *p ? p : NULL;
}

/* The fields of a channel authorization request: a form, as pusher-js
 * posts it (socket_id, channel_name and any extra params), or a JSON
 * object of strings. */
static GHashTable *
parse_auth_fields (const LegbaHttpRequest * request,
    LegbaHttpResponse * response)
{
  static const char *const names[] = { "socket_id", "channel_name", "suffix",
    "protocol"
  };
  g_autoptr (JsonObject) obj = NULL;
  GHashTable *fields;
  gsize i = 0;

  if (request->body == NULL || request->body_len == 0) {
    respond_error (response, 400, "Request body required");
    return NULL;
  }
  while (i < request->body_len && g_ascii_isspace (request->body[i]))
    i++;

  if (i == request->body_len || request->body[i] != '{') {
    fields = g_uri_parse_params (request->body, request->body_len, "&",
        G_URI_PARAMS_WWW_FORM, NULL);
    if (fields == NULL)
      respond_error (response, 400, "Invalid form body");
    return fields;
  }

  obj = parse_body_object (request, response);
  if (obj == NULL)
    return NULL;
  fields = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  for (i = 0; i < G_N_ELEMENTS (names); i++) {
    gboolean ok;
    const char *value = get_string_member (obj, names[i], &ok);

    if (value)
      g_hash_table_insert (fields, g_strdup (names[i]), g_strdup (value));
  }
  return fields;
}

/* docs/room-protocol.md §2: user_id IDENTITY-SUFFIX, user_info {identity, name,
 * protocol}, as compact JSON (the text the signature covers). */
static char *
room_channel_data (const LegbaTokenClaims * claims, const char *suffix,
    const char *protocol)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *user_id = g_strconcat (claims->identity, "-", suffix,
      NULL);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "user_id");
  json_builder_add_string_value (b, user_id);
  json_builder_set_member_name (b, "user_info");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "identity");
  json_builder_add_string_value (b, claims->identity);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, claims->name);
  json_builder_set_member_name (b, "protocol");
  json_builder_add_string_value (b, protocol ? protocol : room_protocols[0]);
  json_builder_end_object (b);
  json_builder_end_object (b);

  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  return json_generator_to_data (gen, NULL);
}

static gboolean
check_auth_fields (GHashTable * fields, const LegbaTokenClaims * claims,
    LegbaHttpResponse * response)
{
  const char *socket_id = g_hash_table_lookup (fields, "socket_id");
  const char *channel = g_hash_table_lookup (fields, "channel_name");
  const char *suffix = g_hash_table_lookup (fields, "suffix");
  const char *protocol = g_hash_table_lookup (fields, "protocol");
  g_autofree char *room_channel = NULL;

  if (!socket_id_is_valid (socket_id)) {
    respond_error (response, 400, "socket_id must be digits.digits");
    return FALSE;
  }
  if (!suffix_is_valid (suffix)) {
    respond_error (response, 400, "suffix must be %d to %d of a-z 0-9",
        SUFFIX_MIN, SUFFIX_MAX);
    return FALSE;
  }
  if (channel == NULL) {
    respond_error (response, 400, "channel_name required");
    return FALSE;
  }
  if (protocol != NULL && !g_strv_contains (room_protocols, protocol)) {
    respond_error (response, 400, "protocol must be legba-room/1 or "
        "legba-room/2");
    return FALSE;
  }
  room_channel = g_strconcat (ROOM_CHANNEL_PREFIX, claims->room, NULL);
  if (strcmp (channel, room_channel) != 0) {
    respond_error (response, 403, "The token admits to %s only", room_channel);
    return FALSE;
  }
  return TRUE;
}

/* The TURN credentials of the participant the answer admits, when the
 * server hands them out (docs/server.md, "TURN credentials"). */
static void
add_ice_servers (LegbaHub * hub, JsonBuilder * b,
    const LegbaTokenClaims * claims, const char *suffix, gint64 now_s)
{
  g_autoptr (GString) text = g_string_new (NULL);
  g_autofree char *user_id = g_strconcat (claims->identity, "-", suffix,
      NULL);

  if (!legba_hub_append_ice_servers (hub, text, user_id, now_s))
    return;
  json_builder_set_member_name (b, "ice_servers");
  json_builder_add_value (b, json_from_string (text->str, NULL));
}

/* POST /apps/ID/auth: a join token and a socket in, the presence
 * authorization for exactly the token's room out (and the participant's
 * TURN credentials, when configured). The participant id is
 * always IDENTITY-SUFFIX, so it can never be the reserved id "server". */
static void
handle_auth (LegbaHub * hub, LegbaHubApp * app,
    const LegbaHttpRequest * request, LegbaHttpResponse * response)
{
  g_autoptr (JsonBuilder) b = NULL;
  g_autoptr (GHashTable) fields = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *channel_data = NULL;
  g_autofree char *auth = NULL;
  LegbaTokenClaims claims = { 0 };
  const char *token = bearer_token (request->authorization);

  if (token == NULL) {
    respond_error (response, 401, "Authorization: Bearer TOKEN required");
    return;
  }
  if (!legba_token_verify (legba_hub_app_get_secret (app), token,
          request->now_s, &claims, &error)) {
    respond_error (response, 401, "%s", error->message);
    return;
  }

  fields = parse_auth_fields (request, response);
  if (fields == NULL || !check_auth_fields (fields, &claims, response))
    goto out;

  channel_data = room_channel_data (&claims, g_hash_table_lookup (fields,
          "suffix"), g_hash_table_lookup (fields, "protocol"));
  auth = legba_auth_channel_sign (legba_hub_app_get_key (app),
      legba_hub_app_get_secret (app), g_hash_table_lookup (fields,
          "socket_id"), g_hash_table_lookup (fields, "channel_name"),
      channel_data);

  b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "auth");
  json_builder_add_string_value (b, auth);
  json_builder_set_member_name (b, "channel_data");
  json_builder_add_string_value (b, channel_data);
  add_ice_servers (hub, b, &claims, g_hash_table_lookup (fields, "suffix"),
      request->now_s);
  json_builder_end_object (b);
  respond_builder (response, 200, b);

out:
  legba_token_claims_clear (&claims);
}

/* ---- Routing ---- */

static gboolean
check_signature (LegbaHubApp * app, const LegbaHttpRequest * request,
    LegbaHttpResponse * response)
{
  g_autoptr (GHashTable) empty = NULL;
  g_autoptr (GError) error = NULL;
  GHashTable *params = request->params;

  if (params == NULL)
    params = empty = g_hash_table_new (g_str_hash, g_str_equal);

  if (!legba_auth_http_verify (legba_hub_app_get_key (app),
          legba_hub_app_get_secret (app), request->method, request->path,
          params, request->body, request->body ? request->body_len : 0,
          request->now_s, AUTH_WINDOW_S, &error)) {
    respond_error (response, 401, "%s", error->message);
    return FALSE;
  }
  return TRUE;
}

static gboolean
method_is (const LegbaHttpRequest * request, const char *method,
    LegbaHttpResponse * response)
{
  if (strcmp (request->method, method) == 0)
    return TRUE;
  respond_error (response, 405, "Use %s", method);
  return FALSE;
}

/* Routes `rest`, the path after /apps/ID/, of a signed request. */
static void
route_signed (LegbaHub * hub, LegbaHubApp * app, const char *rest,
    const LegbaHttpRequest * request, LegbaHttpResponse * response)
{
  const char *slash;

  if (strcmp (rest, "events") == 0) {
    if (method_is (request, "POST", response))
      handle_events (hub, app, request, response);
  } else if (strcmp (rest, "batch_events") == 0) {
    if (method_is (request, "POST", response))
      handle_batch_events (hub, app, request, response);
  } else if (strcmp (rest, "channels") == 0) {
    if (method_is (request, "GET", response))
      handle_channels (hub, app, request, response);
  } else if (g_str_has_prefix (rest, "channels/")) {
    g_autofree char *channel = NULL;

    rest += strlen ("channels/");
    slash = strchr (rest, '/');
    channel = slash ? g_strndup (rest, slash - rest) : g_strdup (rest);
    if (slash && strcmp (slash, "/users") != 0)
      respond_error (response, 404, "Not found");
    else if (method_is (request, "GET", response)) {
      if (slash)
        handle_channel_users (hub, app, channel, response);
      else
        handle_channel (hub, app, channel, request, response);
    }
  } else if (g_str_has_prefix (rest, "users/") &&
      g_str_has_suffix (rest, "/terminate_connections")) {
    g_autofree char *user_id = g_strndup (rest + strlen ("users/"),
        strlen (rest) - strlen ("users/") - strlen ("/terminate_connections"));

    if (method_is (request, "POST", response))
      handle_terminate (hub, app, user_id, response);
  } else {
    respond_error (response, 404, "Not found");
  }
}

/* Routes one request under /apps/APP_ID/. The app is looked up first (an
 * unknown one is 404 whatever else is wrong), then the join-token endpoint
 * is served unsigned and everything else needs a valid Pusher signature. */
void
legba_http_api_handle (LegbaHub * hub, const LegbaHttpRequest * request,
    LegbaHttpResponse * response)
{
  g_autofree char *app_id = NULL;
  LegbaHubApp *app;
  const char *rest, *slash;

  g_return_if_fail (hub != NULL);
  g_return_if_fail (request != NULL && response != NULL);

  response->status = 0;
  response->body = NULL;

  if (request->method == NULL || request->path == NULL ||
      !g_str_has_prefix (request->path, "/apps/")) {
    respond_error (response, 404, "Not found");
    return;
  }

  rest = request->path + strlen ("/apps/");
  slash = strchr (rest, '/');
  app_id = slash ? g_strndup (rest, slash - rest) : g_strdup (rest);
  app = legba_hub_find_app_by_id (hub, app_id);
  if (app == NULL) {
    respond_error (response, 404, "Unknown app");
    return;
  }
  if (slash == NULL) {
    respond_error (response, 404, "Not found");
    return;
  }
  rest = slash + 1;

  if (strcmp (rest, "auth") == 0) {
    if (method_is (request, "POST", response))
      handle_auth (hub, app, request, response);
    return;
  }

  if (check_signature (app, request, response))
    route_signed (hub, app, rest, request, response);
}

void
legba_http_response_clear (LegbaHttpResponse * response)
{
  g_return_if_fail (response != NULL);

  g_clear_pointer (&response->body, g_free);
  response->status = 0;
}
