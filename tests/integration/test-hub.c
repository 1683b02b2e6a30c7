/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * An in-process LegbaSignaller (test-hub.h): the room tests' signaller,
 * and the setup benchmark's (bench/peers/legba-peer.c) when it times
 * rooms without a signalling server.
 */
#include "test-hub.h"

#include <string.h>

struct _TestHub
{
  GHashTable *members;          /* id -> TestSignaller (unowned) */
  TestHubFilter filter;
  gpointer filter_data;
  gboolean announce;
  gboolean ordered;
  GHashTable *counts;           /* signal type -> count */
  GHashTable *pcs;              /* "a\nb" (sorted ids) -> pc of the last offer */
};

struct _TestSignaller
{
  GObject parent;
  TestHub *hub;
  char *room;
  char *id;
  char *identity;
  char *name;
  LegbaSignallerState state;
  GSource *join_source;
  GMainContext *context;        /* of the thread that first joined */
};

enum
{
  PROP_0,
  PROP_STATE,
};

static void test_signaller_iface_init (LegbaSignallerInterface * iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (TestSignaller, test_signaller, G_TYPE_OBJECT,
    G_IMPLEMENT_INTERFACE (LEGBA_TYPE_SIGNALLER, test_signaller_iface_init));

TestHub *
test_hub_new (void)
{
  TestHub *hub = g_new0 (TestHub, 1);

  hub->members = g_hash_table_new (g_str_hash, g_str_equal);
  hub->counts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  hub->pcs = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  hub->announce = TRUE;
  return hub;
}

void
test_hub_free (TestHub * hub)
{
  g_assert_cmpuint (g_hash_table_size (hub->members), ==, 0);
  g_hash_table_unref (hub->members);
  g_hash_table_unref (hub->counts);
  g_hash_table_unref (hub->pcs);
  g_free (hub);
}

void
test_hub_set_filter (TestHub * hub, TestHubFilter filter, gpointer user_data)
{
  hub->filter = filter;
  hub->filter_data = user_data;
}

void
test_hub_set_announce (TestHub * hub, gboolean announce)
{
  hub->announce = announce;
}

void
test_hub_set_ordered (TestHub * hub, gboolean ordered)
{
  hub->ordered = ordered;
}

static gboolean
same_room (TestSignaller * a, TestSignaller * b)
{
  return strcmp (a->room, b->room) == 0;
}

/* Members of other rooms never hear of each other; ordered: only members
 * whose join completed hear of others. */
static gboolean
hears (TestSignaller * self, TestSignaller * member)
{
  return member != self && same_room (member, self) &&
      (!self->hub->ordered || member->state == LEGBA_SIGNALLER_STATE_CONNECTED);
}

static char *
pair_key (const char *a, const char *b)
{
  return strcmp (a, b) < 0 ? g_strconcat (a, "\n", b, NULL) :
      g_strconcat (b, "\n", a, NULL);
}

const char *
test_hub_pc (TestHub * hub, const char *a, const char *b)
{
  g_autofree char *key = pair_key (a, b);

  return g_hash_table_lookup (hub->pcs, key);
}

guint
test_hub_count (TestHub * hub, const char *type)
{
  return GPOINTER_TO_UINT (g_hash_table_lookup (hub->counts, type));
}

static LegbaSignalMember *
member_of (TestSignaller * s)
{
  g_autoptr (JsonObject) info = json_object_new ();

  json_object_set_string_member (info, "identity", s->identity);
  json_object_set_string_member (info, "name", s->name);
  json_object_set_string_member (info, "protocol", "legba-room/1");
  return legba_signal_member_new (s->id, info);
}

void
test_hub_deliver (TestHub * hub, const char *from, const char *to,
    JsonObject * signal)
{
  TestSignaller *target = g_hash_table_lookup (hub->members, to);

  if (target != NULL)
    g_signal_emit_by_name (target, "signal-received", from, signal);
}

typedef struct
{
  TestHub *hub;
  char *from;
  char *to;
  JsonObject *signal;
} Delivery;

static void
delivery_free (gpointer data)
{
  Delivery *d = data;

  g_free (d->from);
  g_free (d->to);
  json_object_unref (d->signal);
  g_free (d);
}

static gboolean
deliver_later (gpointer data)
{
  Delivery *d = data;

  if (d->hub->filter == NULL ||
      d->hub->filter (d->hub, d->from, d->to, d->signal, d->hub->filter_data))
    test_hub_deliver (d->hub, d->from, d->to, d->signal);
  return G_SOURCE_REMOVE;
}

static void
set_state (TestSignaller * self, LegbaSignallerState state)
{
  self->state = state;
  g_object_notify (G_OBJECT (self), "state");
}

static gboolean
complete_join (gpointer data)
{
  TestSignaller *self = data;
  g_autoptr (GPtrArray) members =
      g_ptr_array_new_with_free_func ((GDestroyNotify)
      legba_signal_member_unref);
  g_autoptr (LegbaSignalMember) me = member_of (self);
  GHashTableIter iter;
  gpointer other;

  g_clear_pointer (&self->join_source, g_source_unref);
  g_hash_table_iter_init (&iter, self->hub->members);
  while (g_hash_table_iter_next (&iter, NULL, &other))
    if (self->hub->announce && hears (self, other))
      g_ptr_array_add (members, member_of (other));
  set_state (self, LEGBA_SIGNALLER_STATE_CONNECTED);
  g_signal_emit_by_name (self, "joined", members);
  g_hash_table_iter_init (&iter, self->hub->members);
  while (g_hash_table_iter_next (&iter, NULL, &other))
    if (hears (self, other))
      g_signal_emit_by_name (other, "member-joined", me);
  return G_SOURCE_REMOVE;
}

static gboolean
test_join (LegbaSignaller * signaller, const char *room,
    const char *participant_id, const char *identity,
    const char *display_name, GError ** error)
{
  TestSignaller *self = TEST_SIGNALLER (signaller);

  if (!legba_signaller_check_participant (room, participant_id, identity,
          error))
    return FALSE;
  g_free (self->room);
  g_free (self->id);
  g_free (self->identity);
  g_free (self->name);
  self->room = g_strdup (room);
  self->id = g_strdup (participant_id);
  self->identity = g_strdup (identity);
  self->name = g_strdup (display_name ? display_name : identity);
  g_hash_table_insert (self->hub->members, self->id, self);
  if (self->context == NULL)
    self->context = g_main_context_ref_thread_default ();
  set_state (self, LEGBA_SIGNALLER_STATE_CONNECTING);
  /* the member list is taken when the join completes: two joins started
   * together list each other (both offer: glare) */
  self->join_source = g_idle_source_new ();
  g_source_set_callback (self->join_source, complete_join, self, NULL);
  g_source_attach (self->join_source, self->context);
  return TRUE;
}

static void
test_leave (LegbaSignaller * signaller)
{
  TestSignaller *self = TEST_SIGNALLER (signaller);
  g_autoptr (LegbaSignalMember) me = NULL;
  GHashTableIter iter;
  gpointer other;

  if (self->id == NULL ||
      g_hash_table_lookup (self->hub->members, self->id) != self)
    return;
  if (self->join_source != NULL) {
    g_source_destroy (self->join_source);
    g_clear_pointer (&self->join_source, g_source_unref);
  }
  g_hash_table_remove (self->hub->members, self->id);
  me = member_of (self);
  g_hash_table_iter_init (&iter, self->hub->members);
  while (g_hash_table_iter_next (&iter, NULL, &other))
    if (same_room (other, self))
      g_signal_emit_by_name (other, "member-left", me);
  set_state (self, LEGBA_SIGNALLER_STATE_DISCONNECTED);
}

static void
copy_member (JsonObject * object, const char *name, JsonNode * node,
    gpointer data)
{
  json_object_set_member (data, name, json_node_copy (node));
}

static gboolean
test_send (LegbaSignaller * signaller, const char *to, JsonObject * signal,
    GError ** error)
{
  TestSignaller *self = TEST_SIGNALLER (signaller);
  Delivery *d = g_new0 (Delivery, 1);
  GSource *source;
  const char *type = json_object_get_string_member_with_default (signal,
      "type", "?");

  g_hash_table_insert (self->hub->counts, g_strdup (type),
      GUINT_TO_POINTER (test_hub_count (self->hub, type) + 1));
  if (strcmp (type, "offer") == 0)
    g_hash_table_insert (self->hub->pcs, pair_key (self->id, to),
        g_strdup (json_object_get_string_member (signal, "pc")));
  d->hub = self->hub;
  d->from = g_strdup (self->id);
  d->to = g_strdup (to);
  d->signal = json_object_new ();
  json_object_foreach_member (signal, copy_member, d->signal);
  json_object_set_string_member (d->signal, "to", to);
  json_object_set_string_member (d->signal, "from", self->id);
  source = g_idle_source_new ();
  g_source_set_priority (source, G_PRIORITY_DEFAULT);
  g_source_set_callback (source, deliver_later, d, delivery_free);
  g_source_attach (source, self->context);
  g_source_unref (source);
  return TRUE;
}

static LegbaSignallerState
test_get_state (LegbaSignaller * signaller)
{
  return TEST_SIGNALLER (signaller)->state;
}

static void
test_signaller_iface_init (LegbaSignallerInterface * iface)
{
  iface->join = test_join;
  iface->leave = test_leave;
  iface->send = test_send;
  iface->get_state = test_get_state;
}

static void
test_signaller_get_property (GObject * object, guint prop_id, GValue * value,
    GParamSpec * pspec)
{
  g_value_set_enum (value, TEST_SIGNALLER (object)->state);
}

static void
test_signaller_finalize (GObject * object)
{
  TestSignaller *self = TEST_SIGNALLER (object);

  test_leave (LEGBA_SIGNALLER (self));
  g_free (self->room);
  g_free (self->id);
  g_free (self->identity);
  g_free (self->name);
  g_clear_pointer (&self->context, g_main_context_unref);
  G_OBJECT_CLASS (test_signaller_parent_class)->finalize (object);
}

static void
test_signaller_class_init (TestSignallerClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);

  gobject_class->get_property = test_signaller_get_property;
  gobject_class->finalize = test_signaller_finalize;
  g_object_class_override_property (gobject_class, PROP_STATE, "state");
}

static void
test_signaller_init (TestSignaller * self)
{
}

TestSignaller *
test_signaller_new (TestHub * hub)
{
  TestSignaller *self = g_object_new (TEST_TYPE_SIGNALLER, NULL);

  self->hub = hub;
  return self;
}
