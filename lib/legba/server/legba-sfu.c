/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * SFU rooms on Janus VideoRooms (docs/room-protocol.md §8, docs/server.md
 * SFU rooms). A subscription to an SFU room's channel is held by the
 * hub's gate until the member's token is in the room's allowed list, then
 * completed with legba:topology to that socket only; a client that cannot
 * do SFU rooms, or a Janus that cannot be reached, gets a
 * pusher:subscription_error instead. A room whose Janus dies (a
 * LegbaJanusWatch says so) is made again on a live one, and its members
 * get a new legba:topology (legba-sfu-move.c).
 */
#include <legba/server/legba-sfu-private.h>

#include <legba/common/legba-json.h>

#include <string.h>
#include <sys/random.h>

static void room_create (SfuRoom * room);
static void room_claim (SfuRoom * room);
static void auto_stays_mesh (SfuRoom * room, const GError * error);
static void auto_to_mesh (SfuRoom * room);
static void auto_tell_members (SfuRoom * room);

static void
random_hex (char *out, gsize n_chars)
{
  guint8 bytes[32];
  gsize i;

  g_assert (n_chars <= 2 * sizeof bytes);
  if (getrandom (bytes, (n_chars + 1) / 2, 0) != (gssize) (n_chars + 1) / 2)
    g_error ("getrandom failed");
  for (i = 0; i < n_chars; i++)
    out[i] = "0123456789abcdef"[(bytes[i / 2] >> (i % 2 ? 0 : 4)) & 0xf];
  out[n_chars] = '\0';
}

guint64
legba_sfu_random_room_id (void)
{
  guint64 id = 0;

  while (id == 0) {
    if (getrandom (&id, sizeof id, 0) != sizeof id)
      g_error ("getrandom failed");
    id &= ROOM_ID_MAX;
  }
  return id;
}

Op *
legba_sfu_op_new (LegbaSfu * sfu, SfuRoom * room)
{
  Op *op = g_new0 (Op, 1);

  op->alive = g_object_ref (sfu->alive);
  op->sfu = sfu;
  op->room_key = room ? g_strdup (room->key) : NULL;
  return op;
}

void
legba_sfu_op_free (Op * op)
{
  g_object_unref (op->alive);
  g_free (op->room_key);
  g_free (op->socket_id);
  g_free (op->user_id);
  g_free (op->token);
  g_free (op->channel);
  g_free (op->user_info);
  g_clear_pointer (&op->body, json_object_unref);
  g_free (op);
}

/* The room of op, or NULL when the LegbaSfu or the room went away. */
SfuRoom *
legba_sfu_op_room (Op * op)
{
  if (g_cancellable_is_cancelled (op->alive))
    return NULL;
  return g_hash_table_lookup (op->sfu->rooms, op->room_key);
}

static void
waiter_free (gpointer data)
{
  Waiter *waiter = data;

  g_free (waiter->socket_id);
  g_free (waiter->user_id);
  g_free (waiter);
}

static void
room_free (gpointer data)
{
  SfuRoom *room = data;

  g_free (room->key);
  g_free (room->channel);
  g_hash_table_unref (room->tokens);
  g_ptr_array_unref (room->waiters);
  g_free (room->loads);
  g_free (room->stored);
  g_free (room->moved_from);
  if (room->retry != NULL) {
    g_source_destroy (room->retry);
    g_source_unref (room->retry);
  }
  g_free (room);
}

JsonObject *
legba_sfu_room_request (SfuRoom * room, const char *request)
{
  JsonObject *body = json_object_new ();

  json_object_set_string_member (body, "request", request);
  json_object_set_int_member (body, "room", (gint64) room->id);
  if (strcmp (request, "create") != 0)
    json_object_set_string_member (body, "secret", room->secret);
  if (room->sfu->admin_key != NULL)
    json_object_set_string_member (body, "admin_key", room->sfu->admin_key);
  return body;
}

void
legba_sfu_room_send (SfuRoom * room, JsonObject * body,
    LegbaJanusCallback callback, Op * op)
{
  LegbaSfu *sfu = room->sfu;

  legba_janus_request (sfu->session, sfu->context,
      sfu->janus_urls[room->instance], sfu->api_secret, body, callback, op);
}

/* ---- Answers to held subscriptions ---- */

/* legba:topology data, docs/room-protocol.md §8. */
char *
legba_sfu_topology_data (SfuRoom * room, const char *token)
{
  g_autoptr (GString) data = g_string_new ("{\"topology\":\"sfu\",\"sfu\":"
      "{\"kind\":\"janus\",\"url\":");

  legba_json_append_string (data, room->sfu->janus_ws_urls[room->instance]);
  g_string_append_printf (data, ",\"room\":%" G_GUINT64_FORMAT ",\"pin\":",
      room->id);
  legba_json_append_string (data, room->pin);
  g_string_append (data, ",\"token\":");
  legba_json_append_string (data, token);
  g_string_append (data, "}}");
  return g_string_free (g_steal_pointer (&data), FALSE);
}

static void
refuse_unavailable (LegbaSfu * sfu, const char *channel,
    const char *socket_id, const GError * error)
{
  g_autofree char *message = g_strdup_printf ("room %s is an SFU room and "
      "its SFU cannot be reached: %s",
      channel + strlen (ROOM_CHANNEL_PREFIX), error->message);

  g_message ("sfu-unavailable channel=%s socket_id=%s error=\"%s\"",
      channel, socket_id, error->message);
  legba_hub_gate_refuse (sfu->hub, socket_id, channel, "LegbaSfuUnavailable",
      503, message);
}

static void
token_removed (JsonObject * data, const GError * error, gpointer user_data)
{
  Op *op = user_data;

  if (error != NULL && !g_cancellable_is_cancelled (op->alive))
    g_message ("sfu-token-remove-failed room=%s user_id=%s error=\"%s\"",
        op->room_key, op->user_id, error->message);
  legba_sfu_op_free (op);
}

static void
token_remove (SfuRoom * room, const char *user_id, const char *token)
{
  JsonObject *body = legba_sfu_room_request (room, "allowed");
  JsonArray *allowed = json_array_new ();
  Op *op = legba_sfu_op_new (room->sfu, room);

  json_array_add_string_element (allowed, token);
  json_object_set_string_member (body, "action", "remove");
  json_object_set_array_member (body, "allowed", allowed);
  op->user_id = g_strdup (user_id);
  legba_sfu_room_send (room, body, token_removed, op);
  json_object_unref (body);
}

static void
token_added (JsonObject * data, const GError * error, gpointer user_data)
{
  Op *op = user_data;
  SfuRoom *room = legba_sfu_op_room (op);
  g_autofree char *topology = NULL;

  if (room == NULL) {
    legba_sfu_op_free (op);
    return;
  }
  room->n_adding--;
  /* The room's Janus is gone (unreachable, or it restarted and lost the
   * room) and the watch has not said so yet: the room is made again. */
  if (error != NULL && error->domain == LEGBA_JANUS_ERROR &&
      (error->code == JANUS_NO_ROOM ||
          error->code == LEGBA_JANUS_ERROR_UNREACHABLE) &&
      room->state == ROOM_READY)
    legba_sfu_room_move (room);
  if (room->moving) {
    /* Added (or not) on the Janus that died: the member waits for the
     * room made again, as those who come meanwhile. */
    Waiter *waiter = g_new0 (Waiter, 1);

    waiter->socket_id = g_steal_pointer (&op->socket_id);
    waiter->user_id = g_steal_pointer (&op->user_id);
    g_ptr_array_add (room->waiters, waiter);
    legba_sfu_op_free (op);
    return;
  }
  if (error != NULL) {
    refuse_unavailable (room->sfu, room->channel, op->socket_id, error);
    legba_sfu_op_free (op);
    if (room->vacant && room->n_adding == 0)
      legba_sfu_room_close (room);
    return;
  }
  topology = legba_sfu_topology_data (room, op->token);
  if (legba_hub_gate_accept (room->sfu->hub, op->socket_id, room->channel,
          TOPOLOGY_EVENT, topology)) {
    const char *old = g_hash_table_lookup (room->tokens, op->user_id);

    if (old != NULL && strcmp (old, op->token) != 0)
      token_remove (room, op->user_id, old);
    g_hash_table_insert (room->tokens, g_strdup (op->user_id),
        g_strdup (op->token));
    room->vacant = FALSE;
  } else {
    /* Gone meanwhile: its token goes too. */
    token_remove (room, op->user_id, op->token);
  }
  legba_sfu_op_free (op);
  if (room->vacant && room->n_adding == 0)
    legba_sfu_room_close (room);
}

/* Adds a fresh token of user_id to the room, then completes the held
 * subscription. */
static void
token_add (SfuRoom * room, const char *socket_id, const char *user_id)
{
  JsonObject *body = legba_sfu_room_request (room, "allowed");
  JsonArray *allowed = json_array_new ();
  Op *op = legba_sfu_op_new (room->sfu, room);
  char token[33];

  random_hex (token, 32);
  json_array_add_string_element (allowed, token);
  json_object_set_string_member (body, "action", "add");
  json_object_set_array_member (body, "allowed", allowed);
  op->socket_id = g_strdup (socket_id);
  op->user_id = g_strdup (user_id);
  op->token = g_strdup (token);
  room->n_adding++;
  legba_sfu_room_send (room, body, token_added, op);
  json_object_unref (body);
}

/* ---- The room's life ---- */

static void
room_fail (SfuRoom * room, const GError * error)
{
  LegbaSfu *sfu = room->sfu;
  g_autoptr (GPtrArray) waiters = NULL;
  g_autofree char *channel = NULL;

  if (room->automatic) {
    auto_stays_mesh (room, error);
    return;
  }
  waiters = g_steal_pointer (&room->waiters);
  channel = g_strdup (room->channel);

  room->waiters = g_ptr_array_new_with_free_func (waiter_free);
  if (room->moving)
    legba_sfu_room_move_later (room, error);
  else
    g_hash_table_remove (sfu->rooms, room->key);
  for (guint i = 0; i < waiters->len; i++) {
    Waiter *waiter = waiters->pdata[i];

    refuse_unavailable (sfu, channel, waiter->socket_id, error);
  }
}

/* The room exists on its Janus: the members waiting get their tokens. */
static void
room_ready (SfuRoom * room)
{
  gboolean moved = room->moving;

  room->state = ROOM_READY;
  room->moving = FALSE;
  g_clear_pointer (&room->moved_from, g_free);
  if (room->automatic)
    auto_tell_members (room);
  for (guint i = 0; i < room->waiters->len; i++) {
    Waiter *waiter = room->waiters->pdata[i];

    token_add (room, waiter->socket_id, waiter->user_id);
  }
  g_ptr_array_set_size (room->waiters, 0);
  /* Last: it closes a room made again for nobody */
  if (moved)
    legba_sfu_room_readmit (room);
}

static void
room_destroyed (JsonObject * data, const GError * error, gpointer user_data)
{
  Op *op = user_data;

  if (error != NULL && !g_cancellable_is_cancelled (op->alive))
    g_message ("sfu-room-destroy-failed room=%s error=\"%s\"", op->room_key,
        error->message);
  legba_sfu_op_free (op);
}

/* Destroys the room on its Janus (body taken); op is for the answer. */
void
legba_sfu_room_destroy_send (LegbaSfu * sfu, guint instance, JsonObject * body,
    Op * op)
{
  legba_janus_request (sfu->session, sfu->context, sfu->janus_urls[instance],
      sfu->api_secret, body, room_destroyed, op);
  json_object_unref (body);
}

/* ---- Placement shared through Redis ---- */

/* {"janus": URL, "room": ID, "pin", "secret"}: what another instance
 * needs to use the room. */
static char *
room_placement (SfuRoom * room)
{
  g_autoptr (GString) text = g_string_new ("{\"janus\":");

  legba_json_append_string (text, room->sfu->janus_urls[room->instance]);
  g_string_append_printf (text, ",\"room\":%" G_GUINT64_FORMAT ",\"pin\":",
      room->id);
  legba_json_append_string (text, room->pin);
  g_string_append (text, ",\"secret\":");
  legba_json_append_string (text, room->secret);
  g_string_append_c (text, '}');
  return g_string_free (g_steal_pointer (&text), FALSE);
}

/* Takes the room another instance placed; FALSE when value is not one
 * this instance can use. */
gboolean
legba_sfu_room_adopt (SfuRoom * room, const char *value, GError ** error)
{
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *why = NULL;
  JsonObject *obj = NULL;
  const char *url = NULL, *pin = NULL, *secret = NULL;
  gint64 id = 0;
  guint i;

  root = legba_json_parse_strict (value, strlen (value), NULL, NULL, &why);
  if (root != NULL && JSON_NODE_HOLDS_OBJECT (root))
    obj = json_node_get_object (root);
  if (obj != NULL) {
    url = legba_json_object_get_string (obj, "janus");
    pin = legba_json_object_get_string (obj, "pin");
    secret = legba_json_object_get_string (obj, "secret");
    id = json_object_get_int_member_with_default (obj, "room", 0);
  }
  for (i = 0; url != NULL && room->sfu->janus_urls[i] != NULL; i++) {
    if (strcmp (room->sfu->janus_urls[i], url) == 0)
      break;
  }
  if (url == NULL || room->sfu->janus_urls[i] == NULL || pin == NULL ||
      secret == NULL || id <= 0 || strlen (pin) >= sizeof room->pin ||
      strlen (secret) >= sizeof room->secret) {
    g_set_error (error, LEGBA_JANUS_ERROR, LEGBA_JANUS_ERROR_INVALID,
        "the room is placed on %s, which is not among this server's "
        "Janus instances", url ? url : "an unknown Janus");
    return FALSE;
  }
  room->instance = i;
  room->id = (guint64) id;
  g_strlcpy (room->pin, pin, sizeof room->pin);
  g_strlcpy (room->secret, secret, sizeof room->secret);
  g_free (room->stored);
  room->stored = g_strdup (value);
  return TRUE;
}

static void
room_claimed (const char *value, gboolean done, const GError * error,
    gpointer user_data)
{
  Op *op = user_data;
  SfuRoom *room = legba_sfu_op_room (op);
  g_autoptr (GError) adopt_error = NULL;

  if (room == NULL) {
    legba_sfu_op_free (op);
    return;
  }
  if (done) {
    legba_sfu_op_free (op);
    room->placed_here = TRUE;
    room_ready (room);
    return;
  }
  if (error == NULL && value == NULL && room->moved_from != NULL) {
    /* Moving, but its placement went meanwhile: recorded afresh. */
    legba_sfu_op_free (op);
    g_clear_pointer (&room->moved_from, g_free);
    room_claim (room);
    return;
  }
  /* Not recorded as this instance's: the room made here goes. */
  g_clear_pointer (&room->stored, g_free);
  legba_sfu_room_destroy_send (room->sfu, room->instance,
      legba_sfu_room_request (room, "destroy"), op);
  if (error != NULL) {
    room_fail (room, error);
    return;
  }
  if (value == NULL || !legba_sfu_room_adopt (room, value, &adopt_error)) {
    if (adopt_error == NULL)
      adopt_error = g_error_new (LEGBA_JANUS_ERROR, LEGBA_JANUS_ERROR_INVALID,
          "the room's placement vanished meanwhile");
    room_fail (room, adopt_error);
    return;
  }
  g_message ("sfu-room-shared channel=%s janus=%s room=%" G_GUINT64_FORMAT,
      room->channel, room->sfu->janus_urls[room->instance], room->id);
  room_ready (room);
}

/* Records the room just made in the store, unless another instance was
 * first: then that one's room is used and this one destroyed. */
static void
room_claim (SfuRoom * room)
{
  g_free (room->stored);
  room->stored = room_placement (room);
  legba_sfu_store_claim (room->sfu->store, room->key, room->stored,
      room_claimed, legba_sfu_op_new (room->sfu, room));
}

/* Records the room made again in the store in place of the placement it
 * had, unless another instance moved it first: then that one's room is
 * used and this one destroyed. */
static void
room_reclaim (SfuRoom * room)
{
  g_free (room->stored);
  room->stored = room_placement (room);
  legba_sfu_store_replace (room->sfu->store, room->key, room->moved_from,
      room->stored, room_claimed, legba_sfu_op_new (room->sfu, room));
}

static void
room_looked_up (const char *value, gboolean done, const GError * error,
    gpointer user_data)
{
  Op *op = user_data;
  SfuRoom *room = legba_sfu_op_room (op);
  g_autoptr (GError) adopt_error = NULL;

  legba_sfu_op_free (op);
  if (room == NULL)
    return;
  if (error != NULL) {
    room_fail (room, error);
  } else if (value == NULL) {
    legba_sfu_room_place (room);
  } else if (!legba_sfu_room_adopt (room, value, &adopt_error)) {
    room_fail (room, adopt_error);
  } else {
    g_message ("sfu-room-shared channel=%s janus=%s room=%" G_GUINT64_FORMAT,
        room->channel, room->sfu->janus_urls[room->instance], room->id);
    room_ready (room);
  }
}

static void
room_released (const char *value, gboolean done, const GError * error,
    gpointer user_data)
{
  Op *op = user_data;

  if (g_cancellable_is_cancelled (op->alive) || !done) {
    legba_sfu_op_free (op);
    return;
  }
  legba_sfu_room_destroy_send (op->sfu, op->instance,
      g_steal_pointer (&op->body), op);
}

static void
room_created (JsonObject * data, const GError * error, gpointer user_data)
{
  Op *op = user_data;
  SfuRoom *room = legba_sfu_op_room (op);

  if (room == NULL) {
    legba_sfu_op_free (op);
    return;
  }
  legba_sfu_op_free (op);
  if (error != NULL && error->domain == LEGBA_JANUS_ERROR &&
      error->code == JANUS_ROOM_EXISTS && room->attempts < 3) {
    room->id = legba_sfu_random_room_id ();
    room_create (room);
    return;
  }
  if (error != NULL) {
    room_fail (room, error);
    return;
  }
  g_message ("sfu-room-created channel=%s janus=%s room=%" G_GUINT64_FORMAT,
      room->channel, room->sfu->janus_urls[room->instance], room->id);
  if (room->sfu->store != NULL && room->moved_from != NULL)
    room_reclaim (room);
  else if (room->sfu->store != NULL)
    room_claim (room);
  else {
    room->placed_here = TRUE;
    room_ready (room);
  }
}

/* The tokens of the room's members: none for a new room, all of them
 * for a room made again. */
JsonArray *
legba_sfu_room_allowed (SfuRoom * room)
{
  JsonArray *allowed = json_array_new ();
  GHashTableIter iter;
  gpointer token;

  g_hash_table_iter_init (&iter, room->tokens);
  while (g_hash_table_iter_next (&iter, NULL, &token))
    json_array_add_string_element (allowed, token);
  return allowed;
}

static void
room_create (SfuRoom * room)
{
  JsonObject *body = legba_sfu_room_request (room, "create");
  g_autofree char *description = g_strdup_printf ("legba %s", room->key);

  room->attempts++;
  json_object_set_string_member (body, "description", description);
  json_object_set_boolean_member (body, "is_private", TRUE);
  json_object_set_boolean_member (body, "permanent", FALSE);
  json_object_set_string_member (body, "secret", room->secret);
  json_object_set_string_member (body, "pin", room->pin);
  json_object_set_array_member (body, "allowed", legba_sfu_room_allowed (room));
  json_object_set_int_member (body, "publishers", room->publishers);
  json_object_set_string_member (body, "audiocodec", "opus");
  json_object_set_string_member (body, "videocodec", "h264,vp8");
  json_object_set_boolean_member (body, "transport_wide_cc_ext", TRUE);
  json_object_set_boolean_member (body, "notify_joining", TRUE);
  legba_sfu_room_send (room, body, room_created, legba_sfu_op_new (room->sfu,
          room));
  json_object_unref (body);
}

/* ---- Placement: the instance with the fewest rooms ---- */

/* Every instance answered (or is known dead): the room goes to the one
 * with the fewest rooms. */
static void
room_choose (SfuRoom * room)
{
  guint best = G_MAXUINT, i;

  for (i = 0; room->sfu->janus_urls[i] != NULL; i++) {
    if (room->loads[i] != G_MAXUINT &&
        (best == G_MAXUINT || room->loads[i] < room->loads[best]))
      best = i;
  }
  if (best == G_MAXUINT) {
    g_autoptr (GError) down = g_error_new (LEGBA_JANUS_ERROR,
        LEGBA_JANUS_ERROR_UNREACHABLE, "no Janus instance answers");

    room_fail (room, down);
    return;
  }
  room->instance = best;
  room_create (room);
}

static gboolean
room_choose_later (gpointer user_data)
{
  SfuRoom *room = legba_sfu_op_room (user_data);

  if (room != NULL)
    room_choose (room);
  return G_SOURCE_REMOVE;
}

static void
load_answered (JsonObject * data, const GError * error, gpointer user_data)
{
  Op *op = user_data;
  SfuRoom *room = legba_sfu_op_room (op);
  JsonArray *list;

  if (room == NULL) {
    legba_sfu_op_free (op);
    return;
  }
  list = data && json_object_has_member (data, "list") ?
      json_object_get_array_member (data, "list") : NULL;
  room->loads[op->instance] = error || list == NULL ? G_MAXUINT :
      json_array_get_length (list);
  if (error != NULL)
    g_message ("sfu-instance-down janus=%s error=\"%s\"",
        room->sfu->janus_urls[op->instance], error->message);
  legba_sfu_op_free (op);
  if (--room->n_loads > 0)
    return;
  room_choose (room);
}

/* Asks each instance for its rooms (VideoRoom list, private ones
 * included with the admin key), then creates the room on the least
 * loaded; with one instance, creates it there at once. */
void
legba_sfu_room_place (SfuRoom * room)
{
  LegbaSfu *sfu = room->sfu;
  guint n = g_strv_length (sfu->janus_urls);

  if (n == 1) {
    room_create (room);
    return;
  }
  g_free (room->loads);
  room->loads = g_new0 (guint, n);
  room->n_loads = n;
  for (guint i = 0; i < n; i++) {
    JsonObject *body;
    Op *op;

    /* A Janus known dead is not waited for (it may never answer). */
    if (legba_janus_watch_is_lost (sfu->watch, i)) {
      room->loads[i] = G_MAXUINT;
      room->n_loads--;
      continue;
    }
    body = json_object_new ();
    op = legba_sfu_op_new (sfu, room);
    op->instance = i;
    json_object_set_string_member (body, "request", "list");
    if (sfu->admin_key != NULL)
      json_object_set_string_member (body, "admin_key", sfu->admin_key);
    legba_janus_request (sfu->session, sfu->context, sfu->janus_urls[i],
        sfu->api_secret, body, load_answered, op);
    json_object_unref (body);
  }
  if (room->n_loads == 0) {
    /* Every instance known dead: failed from the main loop, never from
     * inside the gate's admit that may have placed the room. */
    GSource *idle = g_idle_source_new ();

    g_source_set_callback (idle, room_choose_later, legba_sfu_op_new (sfu,
            room), (GDestroyNotify) legba_sfu_op_free);
    g_source_attach (idle, sfu->context);
    g_source_unref (idle);
  }
}

/* ---- The gate ---- */

/* The topology of an app's room (auto_max: auto's members of a mesh). */
static LegbaTopology
room_topology (LegbaSfu * sfu, LegbaHubApp * app, const char *room,
    guint * auto_max)
{
  const LegbaSfuRule *rule = sfu->app_rules ?
      g_hash_table_lookup (sfu->app_rules, legba_hub_app_get_id (app)) : NULL;

  if (rule == NULL)
    rule = &sfu->rule;
  *auto_max = rule->auto_max > 0 ? rule->auto_max : LEGBA_TOPOLOGY_AUTO_MAX;
  for (char **p = rule->prefixes; p && *p; p++) {
    if (g_str_has_prefix (room, *p))
      return LEGBA_TOPOLOGY_SFU;
  }
  return rule->topology;
}

/* user_info's "protocol" is legba-room/N with N >= 2. */
static gboolean
speaks_sfu (const char *user_info)
{
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *error = NULL;
  const char *protocol = NULL;
  guint64 version = 0;
  char *end = NULL;

  if (user_info != NULL)
    root = legba_json_parse_strict (user_info, strlen (user_info), NULL,
        NULL, &error);
  if (root != NULL && JSON_NODE_HOLDS_OBJECT (root))
    protocol = legba_json_object_get_string (json_node_get_object (root),
        "protocol");
  if (protocol == NULL || !g_str_has_prefix (protocol, "legba-room/"))
    return FALSE;
  version = g_ascii_strtoull (protocol + strlen ("legba-room/"), &end, 10);
  return end != NULL && *end == '\0' && version >= 2;
}

/* ---- auto rooms: from mesh to SFU (docs/server.md, SFU rooms) ----
 *
 * A room's size is its whole presence, the cluster's. With a store
 * (several servers), the room's placement says whether it moved: a join of
 * an auto room a server has no SFU room of reads it first, and the
 * placement's claim (SET NX) makes the move once; the server that made it
 * tells the others (legba_hub_gate_notify(), through the relay), and each
 * that has members in the mesh takes the placement and tells them
 * (gate_notice). A member joining through another instance makes each
 * instance with members in the mesh count the room again
 * (gate_remote_joined): two joins at the same moment, each counted
 * without the other, still move it. */

typedef struct
{
  GHashTable *users;            /* user id, the room's members */
  gboolean old_client;          /* one does not speak legba-room/2 */
} MemberCount;

static void
count_member (const char *user_id, const char *user_info, gpointer user_data)
{
  MemberCount *count = user_data;

  g_hash_table_add (count->users, (gpointer) user_id);
  if (!speaks_sfu (user_info))
    count->old_client = TRUE;
}

/* The member user_id joining the mesh room channel (NULL: a member of
 * another instance joined it) makes it more than auto_max members, all of
 * whom can join an SFU room: it moves to the SFU. The members are the
 * room's whole presence, those of the cluster's other instances
 * included. */
static gboolean
auto_switches (LegbaSfu * sfu, LegbaHubApp * app, const char *channel,
    const char *user_id, const char *user_info, guint auto_max)
{
  g_autoptr (GHashTable) users = g_hash_table_new (g_str_hash, g_str_equal);
  MemberCount count = { users, user_id != NULL && !speaks_sfu (user_info) };
  guint n;

  legba_hub_foreach_member (sfu->hub, app, channel, count_member, &count);
  if (user_id != NULL)
    g_hash_table_add (users, (gpointer) user_id);
  n = g_hash_table_size (users);
  if (n <= auto_max)
    return FALSE;
  /* Told of a member elsewhere: an old client was told of already */
  if (count.old_client && user_id == NULL)
    return FALSE;
  if (count.old_client) {
    g_message ("sfu-auto-stays-mesh channel=%s members=%u max=%u "
        "error=\"a member does not speak legba-room/2\"", channel, n, auto_max);
    sfu->auto_stays_old_client++;
    return FALSE;
  }
  g_message ("sfu-auto-switch channel=%s members=%u max=%u", channel, n,
      auto_max);
  return TRUE;
}

/* The auto room is not on the SFU after all: forgotten, the members
 * waiting join its mesh. */
static void
auto_to_mesh (SfuRoom * room)
{
  LegbaSfu *sfu = room->sfu;
  g_autoptr (GPtrArray) waiters = g_steal_pointer (&room->waiters);
  g_autofree char *channel = g_strdup (room->channel);

  room->waiters = g_ptr_array_new_with_free_func (waiter_free);
  g_hash_table_remove (sfu->rooms, room->key);
  for (guint i = 0; i < waiters->len; i++) {
    Waiter *waiter = waiters->pdata[i];

    legba_hub_gate_accept (sfu->hub, waiter->socket_id, channel, NULL, NULL);
  }
}

/* The SFU room could not be made: the members waiting join the mesh, the
 * room stays a mesh, and the next member to join tries again. */
static void
auto_stays_mesh (SfuRoom * room, const GError * error)
{
  g_message ("sfu-auto-stays-mesh channel=%s error=\"%s\"", room->channel,
      error->message);
  room->sfu->auto_stays_unavailable++;
  auto_to_mesh (room);
}

void
legba_sfu_collect_sockets (const char *socket_id, const char *user_id,
    const char *user_info, gpointer user_data)
{
  MemberSockets *m = user_data;

  if (strcmp (user_id, m->user_id) == 0)
    g_ptr_array_add (m->sockets, g_strdup (socket_id));
}

static void
member_token_added (JsonObject * data, const GError * error, gpointer user_data)
{
  Op *op = user_data;
  SfuRoom *room = legba_sfu_op_room (op);
  g_autoptr (GPtrArray) sockets = g_ptr_array_new_with_free_func (g_free);
  MemberSockets m = { op->user_id, sockets };
  g_autofree char *topology = NULL;

  if (room == NULL) {
    legba_sfu_op_free (op);
    return;
  }
  room->n_adding--;
  if (error != NULL) {
    g_message ("sfu-auto-member-failed channel=%s user_id=%s error=\"%s\"",
        room->channel, op->user_id, error->message);
  } else {
    /* A socket of the member that joined meanwhile has its own token */
    const char *token = g_hash_table_lookup (room->tokens, op->user_id);

    legba_hub_foreach_member_socket (room->sfu->hub, room->app,
        room->channel, legba_sfu_collect_sockets, &m);
    topology = legba_sfu_topology_data (room, token ? token : op->token);
    for (guint i = 0; i < sockets->len; i++)
      legba_hub_send_to_socket (room->sfu->hub, room->app, sockets->pdata[i],
          room->channel, TOPOLOGY_EVENT, topology);
    if (sockets->len > 0 && token == NULL) {
      g_hash_table_insert (room->tokens, g_strdup (op->user_id),
          g_strdup (op->token));
      room->vacant = FALSE;
    } else {
      token_remove (room, op->user_id, op->token);
    }
  }
  legba_sfu_op_free (op);
  if (room->vacant && room->n_adding == 0)
    legba_sfu_room_close (room);
}

static void
collect_user (const char *socket_id, const char *user_id,
    const char *user_info, gpointer user_data)
{
  g_hash_table_add (user_data, g_strdup (user_id));
}

/* The room is on its SFU now: each member in its mesh gets a token, then
 * legba:topology on each of its sockets in the room. */
static void
auto_tell_members (SfuRoom * room)
{
  g_autoptr (GHashTable) users = g_hash_table_new_full (g_str_hash,
      g_str_equal, g_free, NULL);
  GHashTableIter iter;
  gpointer user_id;

  room->automatic = FALSE;
  if (room->placed_here) {
    room->sfu->auto_moves++;
    /* The other instances' members in the mesh follow (gate_notice) */
    if (room->sfu->store != NULL)
      legba_hub_gate_notify (room->sfu->hub, room->app, room->channel);
  } else {
    g_message ("sfu-auto-followed channel=%s janus=%s room=%"
        G_GUINT64_FORMAT, room->channel,
        room->sfu->janus_urls[room->instance], room->id);
  }
  legba_hub_foreach_member_socket (room->sfu->hub, room->app, room->channel,
      collect_user, users);
  g_hash_table_iter_init (&iter, users);
  while (g_hash_table_iter_next (&iter, &user_id, NULL)) {
    JsonObject *body = legba_sfu_room_request (room, "allowed");
    JsonArray *allowed = json_array_new ();
    Op *op = legba_sfu_op_new (room->sfu, room);
    char token[33];

    random_hex (token, 32);
    json_array_add_string_element (allowed, token);
    json_object_set_string_member (body, "action", "add");
    json_object_set_array_member (body, "allowed", allowed);
    op->user_id = g_strdup (user_id);
    op->token = g_strdup (token);
    room->n_adding++;
    legba_sfu_room_send (room, body, member_token_added, op);
    json_object_unref (body);
  }
}

typedef struct
{
  LegbaSfu *sfu;
  GCancellable *alive;
  char *socket_id;
  char *channel;
} Refusal;

static gboolean
refuse_old_client (gpointer user_data)
{
  Refusal *refusal = user_data;
  g_autofree char *message = NULL;

  if (!g_cancellable_is_cancelled (refusal->alive)) {
    message = g_strdup_printf ("room %s is an SFU room: it needs a client "
        "that speaks legba-room/2",
        refusal->channel + strlen (ROOM_CHANNEL_PREFIX));
    legba_hub_gate_refuse (refusal->sfu->hub, refusal->socket_id,
        refusal->channel, "LegbaTopology", 400, message);
  }
  g_object_unref (refusal->alive);
  g_free (refusal->socket_id);
  g_free (refusal->channel);
  g_free (refusal);
  return G_SOURCE_REMOVE;
}

static SfuRoom *
room_new (LegbaSfu * sfu, LegbaHubApp * app, const char *key,
    const char *channel)
{
  SfuRoom *room = g_new0 (SfuRoom, 1);
  guint cap = legba_hub_app_get_limits (app)->max_presence_members;

  room->sfu = sfu;
  room->key = g_strdup (key);
  room->channel = g_strdup (channel);
  room->id = legba_sfu_random_room_id ();
  random_hex (room->pin, 24);
  random_hex (room->secret, 32);
  room->state = ROOM_CREATING;
  room->tokens = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      g_free);
  room->waiters = g_ptr_array_new_with_free_func (waiter_free);
  /* Every member may publish; an app without a member cap gets Janus's
   * own default of the VideoRoom's examples times ten. */
  room->publishers = cap > 0 ? cap : 100;
  g_hash_table_insert (sfu->rooms, room->key, room);
  return room;
}

/* Admits the member to the SFU room key, room (NULL: none here yet, then
 * found in the store or made, an auto room moving from its mesh when
 * automatic). */
static void
room_admit (LegbaSfu * sfu, LegbaHubApp * app, const char *key,
    const char *channel, SfuRoom * room, gboolean automatic,
    const char *socket_id, const char *user_id, const char *user_info)
{
  Waiter *waiter;

  if (!speaks_sfu (user_info)) {
    Refusal *refusal = g_new0 (Refusal, 1);

    refusal->sfu = sfu;
    refusal->alive = g_object_ref (sfu->alive);
    refusal->socket_id = g_strdup (socket_id);
    refusal->channel = g_strdup (channel);
    GSource *idle = g_idle_source_new ();

    g_source_set_callback (idle, refuse_old_client, refusal, NULL);
    g_source_attach (idle, sfu->context);
    g_source_unref (idle);
    return;
  }
  if (room != NULL && room->state == ROOM_READY) {
    token_add (room, socket_id, user_id);
    return;
  }
  waiter = g_new0 (Waiter, 1);
  waiter->socket_id = g_strdup (socket_id);
  waiter->user_id = g_strdup (user_id);
  if (room == NULL) {
    room = room_new (sfu, app, key, channel);
    room->automatic = automatic;
    room->app = app;
    g_ptr_array_add (room->waiters, waiter);
    if (sfu->store != NULL)
      legba_sfu_store_get (sfu->store, room->key, room_looked_up,
          legba_sfu_op_new (sfu, room));
    else
      legba_sfu_room_place (room);
  } else {
    g_ptr_array_add (room->waiters, waiter);
  }
}

static void
auto_pending_add (LegbaSfu * sfu, const char *key, gint delta)
{
  guint n = GPOINTER_TO_UINT (g_hash_table_lookup (sfu->auto_pending, key));

  n += delta;
  if (n > 0)
    g_hash_table_insert (sfu->auto_pending, g_strdup (key),
        GUINT_TO_POINTER (n));
  else
    g_hash_table_remove (sfu->auto_pending, key);
}

/* Whether the auto room's placement, read for a join, says it is on the
 * SFU already (another instance moved it): the member joins it there;
 * else the room's members in the whole cluster decide, as without a
 * store. */
static void
auto_looked_up (const char *value, gboolean done, const GError * error,
    gpointer user_data)
{
  Op *op = user_data;
  LegbaSfu *sfu = op->sfu;
  SfuRoom *room;

  if (g_cancellable_is_cancelled (op->alive)) {
    legba_sfu_op_free (op);
    return;
  }
  auto_pending_add (sfu, op->room_key, -1);
  /* made meanwhile, for another join or by a notice */
  room = g_hash_table_lookup (sfu->rooms, op->room_key);
  if (room == NULL && error != NULL) {
    /* The store does not answer: the room is taken for the mesh it was */
    if (auto_switches (sfu, op->app, op->channel, op->user_id, op->user_info,
            op->auto_max)) {
      g_message ("sfu-auto-stays-mesh channel=%s error=\"%s\"", op->channel,
          error->message);
      sfu->auto_stays_unavailable++;
    }
    legba_hub_gate_accept (sfu->hub, op->socket_id, op->channel, NULL, NULL);
  } else if (room == NULL && value == NULL &&
      !auto_switches (sfu, op->app, op->channel, op->user_id, op->user_info,
          op->auto_max)) {
    legba_hub_gate_accept (sfu->hub, op->socket_id, op->channel, NULL, NULL);
  } else {
    room_admit (sfu, op->app, op->room_key, op->channel, room, TRUE,
        op->socket_id, op->user_id, op->user_info);
  }
  legba_sfu_op_free (op);
}

/* With a store, a join of an auto room this instance has no SFU room of
 * is held while the room's placement is read: another instance may have
 * moved it to the SFU. */
static void
auto_look_up (LegbaSfu * sfu, LegbaHubApp * app, const char *key,
    const char *channel, const char *socket_id, const char *user_id,
    const char *user_info, guint auto_max)
{
  Op *op = legba_sfu_op_new (sfu, NULL);

  op->room_key = g_strdup (key);
  op->app = app;
  op->channel = g_strdup (channel);
  op->socket_id = g_strdup (socket_id);
  op->user_id = g_strdup (user_id);
  op->user_info = g_strdup (user_info);
  op->auto_max = auto_max;
  auto_pending_add (sfu, key, 1);
  legba_sfu_store_get (sfu->store, key, auto_looked_up, op);
}

static gboolean
gate_admit (LegbaHubApp * app, const char *channel, const char *socket_id,
    const char *user_id, const char *user_info, gpointer user_data)
{
  LegbaSfu *sfu = user_data;
  g_autofree char *key = NULL;
  LegbaTopology topology;
  guint auto_max = 0;
  SfuRoom *room;

  if (!g_str_has_prefix (channel, ROOM_CHANNEL_PREFIX))
    return FALSE;
  topology = room_topology (sfu, app, channel + strlen (ROOM_CHANNEL_PREFIX),
      &auto_max);
  if (topology == LEGBA_TOPOLOGY_MESH)
    return FALSE;
  key = g_strconcat (legba_hub_app_get_id (app), ":", channel, NULL);
  room = g_hash_table_lookup (sfu->rooms, key);
  if (topology == LEGBA_TOPOLOGY_AUTO && room == NULL && sfu->store != NULL) {
    auto_look_up (sfu, app, key, channel, socket_id, user_id, user_info,
        auto_max);
    return TRUE;
  }
  /* An auto room is a mesh until this member would be one too many */
  if (topology == LEGBA_TOPOLOGY_AUTO && room == NULL &&
      !auto_switches (sfu, app, channel, user_id, user_info, auto_max))
    return FALSE;
  room_admit (sfu, app, key, channel, room,
      topology == LEGBA_TOPOLOGY_AUTO, socket_id, user_id, user_info);
  return TRUE;
}

static void
gate_left (LegbaHubApp * app, const char *channel, const char *user_id,
    gpointer user_data)
{
  LegbaSfu *sfu = user_data;
  g_autofree char *key = g_strconcat (legba_hub_app_get_id (app), ":",
      channel, NULL);
  SfuRoom *room = g_hash_table_lookup (sfu->rooms, key);
  g_autofree char *token = NULL;
  gpointer stolen_key = NULL;

  if (room == NULL || !g_hash_table_steal_extended (room->tokens, user_id,
          &stolen_key, (gpointer *) & token))
    return;
  g_free (stolen_key);
  token_remove (room, user_id, token);
}

/* Destroys the room on its Janus (with a store: if this instance's
 * release takes the key) and forgets it. */
void
legba_sfu_room_close (SfuRoom * room)
{
  LegbaSfu *sfu = room->sfu;
  JsonObject *body = legba_sfu_room_request (room, "destroy");

  g_message ("sfu-room-destroyed channel=%s janus=%s room=%" G_GUINT64_FORMAT,
      room->channel, sfu->janus_urls[room->instance], room->id);
  if (sfu->store != NULL) {
    Op *op = legba_sfu_op_new (sfu, room);

    op->instance = room->instance;
    op->body = body;
    legba_sfu_store_release (sfu->store, room->key, room->stored,
        room_released, op);
  } else {
    legba_sfu_room_destroy_send (sfu, room->instance, body,
        legba_sfu_op_new (sfu, room));
  }
  g_hash_table_remove (sfu->rooms, room->key);
}

static void
gate_vacated (LegbaHubApp * app, const char *channel, gpointer user_data)
{
  LegbaSfu *sfu = user_data;
  g_autofree char *key = g_strconcat (legba_hub_app_get_id (app), ":",
      channel, NULL);
  SfuRoom *room = g_hash_table_lookup (sfu->rooms, key);

  /* A room still being made, or getting a member's token, has members on
   * their way in: it closes if none of them makes it. */
  if (room == NULL)
    return;
  if (room->state != ROOM_READY || room->n_adding > 0) {
    room->vacant = room->state == ROOM_READY || room->moving;
    return;
  }
  legba_sfu_room_close (room);
}

static void
count_socket (const char *socket_id, const char *user_id,
    const char *user_info, gpointer user_data)
{
  (*(guint *) user_data)++;
}

/* The placement read for a notice: none means the room is no SFU room
 * (any more; a notice replayed after Redis lost its data). */
static void
auto_followed (const char *value, gboolean done, const GError * error,
    gpointer user_data)
{
  Op *op = user_data;
  SfuRoom *room = legba_sfu_op_room (op);

  if (room != NULL && error == NULL && value == NULL) {
    legba_sfu_op_free (op);
    g_message ("sfu-auto-follow-none channel=%s", room->channel);
    auto_to_mesh (room);
    return;
  }
  room_looked_up (value, done, error, op);
}

/* A member joined an auto room through another instance, which counted
 * the room without a member that joined here at the same moment (the
 * relay's latency): the room, past its size, moves now. Each instance
 * with members in the mesh may try; the placement's claim makes the move
 * once, and an instance that finds it placed already follows it. */
static void
gate_remote_joined (LegbaHubApp * app, const char *channel,
    const char *user_id, gpointer user_data)
{
  LegbaSfu *sfu = user_data;
  g_autofree char *key = NULL;
  guint auto_max, sockets = 0;
  SfuRoom *room;

  if (!g_str_has_prefix (channel, ROOM_CHANNEL_PREFIX) ||
      room_topology (sfu, app, channel + strlen (ROOM_CHANNEL_PREFIX),
          &auto_max) != LEGBA_TOPOLOGY_AUTO)
    return;
  key = g_strconcat (legba_hub_app_get_id (app), ":", channel, NULL);
  if (g_hash_table_contains (sfu->rooms, key))
    return;
  legba_hub_foreach_member_socket (sfu->hub, app, channel, count_socket,
      &sockets);
  if (sockets == 0 || !auto_switches (sfu, app, channel, NULL, NULL, auto_max))
    return;
  room = room_new (sfu, app, key, channel);
  room->automatic = TRUE;
  room->app = app;
  if (sfu->store != NULL)
    legba_sfu_store_get (sfu->store, room->key, room_looked_up,
        legba_sfu_op_new (sfu, room));
  else
    legba_sfu_room_place (room);
}

/* Another instance moved an auto room to the SFU: this instance's
 * members in its mesh, and those on their way in, follow it there. */
static void
gate_notice (LegbaHubApp * app, const char *channel, gpointer user_data)
{
  LegbaSfu *sfu = user_data;
  g_autofree char *key = NULL;
  guint auto_max, sockets = 0;
  SfuRoom *room;

  if (sfu->store == NULL || !g_str_has_prefix (channel, ROOM_CHANNEL_PREFIX)
      || room_topology (sfu, app, channel + strlen (ROOM_CHANNEL_PREFIX),
          &auto_max) != LEGBA_TOPOLOGY_AUTO)
    return;
  key = g_strconcat (legba_hub_app_get_id (app), ":", channel, NULL);
  if (g_hash_table_contains (sfu->rooms, key))
    return;
  legba_hub_foreach_member_socket (sfu->hub, app, channel, count_socket,
      &sockets);
  if (sockets == 0 && !g_hash_table_contains (sfu->auto_pending, key))
    return;
  g_message ("sfu-auto-follow channel=%s sockets=%u", channel, sockets);
  room = room_new (sfu, app, key, channel);
  room->automatic = TRUE;
  room->app = app;
  legba_sfu_store_get (sfu->store, room->key, auto_followed,
      legba_sfu_op_new (sfu, room));
}

/* ---- The LegbaSfu ---- */

void
legba_sfu_render_metrics (LegbaSfu * sfu, GString * out)
{
  g_string_append_printf (out,
      "# HELP legba_sfu_auto_moves_total auto rooms this server moved from "
      "mesh to SFU.\n# TYPE legba_sfu_auto_moves_total counter\n"
      "legba_sfu_auto_moves_total %" G_GUINT64_FORMAT "\n"
      "# HELP legba_sfu_auto_stays_mesh_total Joins past an auto room's size "
      "that left it a mesh, by reason.\n"
      "# TYPE legba_sfu_auto_stays_mesh_total counter\n"
      "legba_sfu_auto_stays_mesh_total{reason=\"sfu-unavailable\"} %"
      G_GUINT64_FORMAT "\n"
      "legba_sfu_auto_stays_mesh_total{reason=\"old-client\"} %"
      G_GUINT64_FORMAT "\n", sfu->auto_moves, sfu->auto_stays_unavailable,
      sfu->auto_stays_old_client);
}

LegbaSfu *
legba_sfu_new (LegbaHub * hub, const LegbaSfuSettings * settings)
{
  LegbaSfu *sfu = g_new0 (LegbaSfu, 1);
  const LegbaHubGate gate = { gate_admit, gate_left, gate_vacated,
    gate_notice, gate_remote_joined
  };

  g_return_val_if_fail (settings->janus_urls && settings->janus_urls[0], NULL);
  g_return_val_if_fail (g_strv_length ((char **) settings->janus_urls) ==
      g_strv_length ((char **) settings->janus_ws_urls), NULL);

  sfu->hub = hub;
  sfu->context = settings->context ? g_main_context_ref (settings->context) :
      g_main_context_ref_thread_default ();
  /* Its own session, made on the hub's context, where it is used */
  g_main_context_push_thread_default (sfu->context);
  sfu->session = soup_session_new_with_options ("timeout", JANUS_TIMEOUT_S,
      "idle-timeout", JANUS_TIMEOUT_S, NULL);
  g_main_context_pop_thread_default (sfu->context);
  sfu->janus_urls = g_strdupv ((char **) settings->janus_urls);
  sfu->janus_ws_urls = g_strdupv ((char **) settings->janus_ws_urls);
  sfu->api_secret = g_strdup (settings->api_secret);
  sfu->admin_key = g_strdup (settings->admin_key);
  sfu->rule.topology = settings->rule.topology;
  sfu->rule.auto_max = settings->rule.auto_max;
  sfu->rule.prefixes = g_strdupv (settings->rule.prefixes);
  sfu->app_rules = settings->app_rules;
  sfu->rooms = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, room_free);
  sfu->auto_pending = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      NULL);
  sfu->alive = g_cancellable_new ();
  if (settings->redis != NULL)
    sfu->store = legba_sfu_store_new (settings->redis,
        settings->redis_prefix, sfu->context);
  if (sfu->store != NULL) {
    sfu->follow = g_timeout_source_new (FOLLOW_MS);
    g_source_set_callback (sfu->follow, legba_sfu_follow_tick, sfu, NULL);
    g_source_attach (sfu->follow, sfu->context);
  }
  sfu->watch = legba_janus_watch_new (sfu->session, sfu->context,
      (const char *const *) sfu->janus_urls, sfu->api_secret, JANUS_WATCH_MS,
      legba_sfu_janus_lost, sfu);
  legba_hub_set_gate (hub, &gate, sfu);
  return sfu;
}

void
legba_sfu_free (LegbaSfu * sfu)
{
  if (sfu == NULL)
    return;
  legba_hub_set_gate (sfu->hub, NULL, NULL);
  g_cancellable_cancel (sfu->alive);
  g_object_unref (sfu->alive);
  legba_janus_watch_free (sfu->watch);
  if (sfu->follow != NULL) {
    g_source_destroy (sfu->follow);
    g_source_unref (sfu->follow);
  }
  legba_sfu_store_free (sfu->store);
  g_hash_table_unref (sfu->rooms);
  g_hash_table_unref (sfu->auto_pending);
  g_object_unref (sfu->session);
  g_main_context_unref (sfu->context);
  g_strfreev (sfu->janus_urls);
  g_strfreev (sfu->janus_ws_urls);
  g_free (sfu->api_secret);
  g_free (sfu->admin_key);
  g_strfreev (sfu->rule.prefixes);
  g_free (sfu);
}
