/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * SFU rooms whose Janus dies, and rooms another server moved
 * (docs/server.md, SFU rooms): a room whose Janus a LegbaJanusWatch finds
 * dead is made again on a live one, under a fresh id, with the tokens its
 * members have, and its members here get a new legba:topology; with a
 * store, each room's placement is read again every FOLLOW_MS, and a room
 * another server moved is followed. The rest of the rooms' life is
 * legba-sfu.c's.
 */
#include <legba/server/legba-sfu-private.h>

#include <string.h>

/* ---- A Janus that dies: its rooms move ---- */

/* The new placement's topology to each socket of the room's members on
 * this instance, with the member's token. */
static void
room_tell_members (SfuRoom * room)
{
  LegbaSfu *sfu = room->sfu;
  GHashTableIter iter;
  gpointer user_id, token;
  guint told = 0;

  g_hash_table_iter_init (&iter, room->tokens);
  while (g_hash_table_iter_next (&iter, &user_id, &token)) {
    g_autoptr (GPtrArray) sockets = g_ptr_array_new_with_free_func (g_free);
    MemberSockets m = { user_id, sockets };
    g_autofree char *topology = legba_sfu_topology_data (room, token);

    legba_hub_foreach_member_socket (sfu->hub, room->app, room->channel,
        legba_sfu_collect_sockets, &m);
    for (guint i = 0; i < sockets->len; i++)
      told += legba_hub_send_to_socket (sfu->hub, room->app,
          sockets->pdata[i], room->channel, TOPOLOGY_EVENT, topology);
  }
  g_message ("sfu-room-moved channel=%s janus=%s room=%" G_GUINT64_FORMAT
      " members=%u sockets=%u", room->channel, sfu->janus_urls[room->instance],
      room->id, g_hash_table_size (room->tokens), told);
}

static void
tokens_readmitted (JsonObject * data, const GError * error, gpointer user_data)
{
  Op *op = user_data;
  SfuRoom *room = legba_sfu_op_room (op);

  legba_sfu_op_free (op);
  if (room == NULL)
    return;
  room->n_adding--;
  if (error != NULL) {
    /* Lost again already, or refusing: made again a little later. */
    if (room->state == ROOM_READY) {
      room->moving = TRUE;
      g_free (room->moved_from);
      room->moved_from = g_steal_pointer (&room->stored);
      legba_sfu_room_move_later (room, error);
    }
    return;
  }
  room_tell_members (room);
  if (room->vacant && room->n_adding == 0)
    legba_sfu_room_close (room);
}

/* The room, made again (here or by another instance), takes the tokens of
 * this instance's members, who are then told where it is now. */
void
legba_sfu_room_readmit (SfuRoom * room)
{
  JsonObject *body;

  if (g_hash_table_size (room->tokens) == 0) {
    if (room->vacant && room->n_adding == 0)
      legba_sfu_room_close (room);
    return;
  }
  body = legba_sfu_room_request (room, "allowed");
  json_object_set_string_member (body, "action", "add");
  json_object_set_array_member (body, "allowed", legba_sfu_room_allowed (room));
  room->n_adding++;
  legba_sfu_room_send (room, body, tokens_readmitted,
      legba_sfu_op_new (room->sfu, room));
  json_object_unref (body);
}

/* Places the room again, under a fresh id (the members tell an SFU
 * session from another by its Janus and room). */
void
legba_sfu_room_move_again (SfuRoom * room)
{
  room->state = ROOM_CREATING;
  room->attempts = 0;
  room->id = legba_sfu_random_room_id ();
  legba_sfu_room_place (room);
}

static void
placement_forgotten (const char *value, gboolean done, const GError * error,
    gpointer user_data)
{
  legba_sfu_op_free (user_data);
}

static gboolean
room_move_retry (gpointer user_data)
{
  SfuRoom *room = user_data;
  LegbaSfu *sfu = room->sfu;

  g_clear_pointer (&room->retry, g_source_unref);
  if (room->vacant && room->n_adding == 0 && room->waiters->len == 0 &&
      g_hash_table_size (room->tokens) == 0) {
    /* Everybody left while no Janus answered: the room is not made
     * again, and its placement (on the dead Janus) goes. */
    g_message ("sfu-room-dropped channel=%s", room->channel);
    if (sfu->store != NULL && room->moved_from != NULL)
      legba_sfu_store_release (sfu->store, room->key, room->moved_from,
          placement_forgotten, legba_sfu_op_new (sfu, room));
    g_hash_table_remove (sfu->rooms, room->key);
    return G_SOURCE_REMOVE;
  }
  legba_sfu_room_move_again (room);
  return G_SOURCE_REMOVE;
}

/* No Janus took the room, or the store did not answer: again a little
 * later, for as long as it has members. */
void
legba_sfu_room_move_later (SfuRoom * room, const GError * error)
{
  g_message ("sfu-room-move-failed channel=%s error=\"%s\" retry_ms=%u",
      room->channel, error->message, MOVE_RETRY_MS);
  g_clear_pointer (&room->stored, g_free);
  room->state = ROOM_CREATING;
  if (room->retry != NULL)
    return;
  room->retry = g_timeout_source_new (MOVE_RETRY_MS);
  g_source_set_callback (room->retry, room_move_retry, room, NULL);
  g_source_attach (room->retry, room->sfu->context);
}

/* The room's Janus died (or restarted, which loses every room): it is
 * made again on a live one, with the tokens its members have. */
void
legba_sfu_room_move (SfuRoom * room)
{
  g_message ("sfu-room-moving channel=%s janus=%s room=%" G_GUINT64_FORMAT,
      room->channel, room->sfu->janus_urls[room->instance], room->id);
  room->moving = TRUE;
  if (room->stored != NULL) {
    g_free (room->moved_from);
    room->moved_from = g_steal_pointer (&room->stored);
  }
  legba_sfu_room_move_again (room);
}

void
legba_sfu_janus_lost (guint instance, gboolean again, const char *why,
    gpointer user_data)
{
  LegbaSfu *sfu = user_data;
  g_autoptr (GPtrArray) lost = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  if (!again)
    g_message ("sfu-instance-lost janus=%s error=\"%s\"",
        sfu->janus_urls[instance], why);
  g_hash_table_iter_init (&iter, sfu->rooms);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    SfuRoom *room = value;

    if (room->instance == instance && room->state == ROOM_READY)
      g_ptr_array_add (lost, room);
  }
  for (guint i = 0; i < lost->len; i++)
    legba_sfu_room_move (lost->pdata[i]);
}

/* ---- A room another server moved ---- */

static void
placement_read (const char *value, gboolean done, const GError * error,
    gpointer user_data)
{
  Op *op = user_data;
  SfuRoom *room = legba_sfu_op_room (op);
  g_autoptr (GError) adopt_error = NULL;
  JsonObject *destroy;
  guint instance;

  legba_sfu_op_free (op);
  if (room == NULL || error != NULL || value == NULL ||
      room->state != ROOM_READY || room->moving || room->stored == NULL ||
      room->n_adding > 0 || strcmp (value, room->stored) == 0)
    return;
  /* The room left here goes (best effort: its Janus may be the dead
   * one), its members are told where the room went. */
  destroy = legba_sfu_room_request (room, "destroy");
  instance = room->instance;
  if (!legba_sfu_room_adopt (room, value, &adopt_error)) {
    json_object_unref (destroy);
    g_message ("sfu-room-follow-failed channel=%s error=\"%s\"",
        room->channel, adopt_error->message);
    return;
  }
  legba_sfu_room_destroy_send (room->sfu, instance, destroy,
      legba_sfu_op_new (room->sfu, room));
  g_message ("sfu-room-followed channel=%s janus=%s room=%" G_GUINT64_FORMAT,
      room->channel, room->sfu->janus_urls[room->instance], room->id);
  legba_sfu_room_readmit (room);
}

/* Reads the placement of every room this instance holds. */
gboolean
legba_sfu_follow_tick (gpointer user_data)
{
  LegbaSfu *sfu = user_data;
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, sfu->rooms);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    SfuRoom *room = value;

    /* not while tokens are being added: they go to the room it knows */
    if (room->state == ROOM_READY && !room->moving && room->stored != NULL &&
        room->n_adding == 0)
      legba_sfu_store_get (sfu->store, room->key, placement_read,
          legba_sfu_op_new (sfu, room));
  }
  return G_SOURCE_CONTINUE;
}
