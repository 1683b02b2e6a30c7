/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Where SFU rooms live, shared by the legba-server instances of a cluster
 * through Redis (docs/server.md, SFU rooms): one key per room, claimed
 * with SET NX, so that two instances never both make a room.
 */
#pragma once

#include <legba/server/legba-redis-glib.h>

G_BEGIN_DECLS

typedef struct _LegbaSfuStore LegbaSfuStore;

/* value: the key's value (NULL when it has none); done: the claim or the
 * release took effect here; error: Redis could not be asked. Called once,
 * from the main context, never from inside the call that asked. */
typedef void (*LegbaSfuStoreFunc) (const char *value, gboolean done,
    const GError * error, gpointer user_data);

/* Connects (again, whenever the connection is lost) in the background,
 * on context, where the answers come. */
LegbaSfuStore *legba_sfu_store_new (const LegbaRedisAddress * address,
    const char *prefix, GMainContext * context);
/* Closes the connection; the answers still due are errors. */
void legba_sfu_store_free (LegbaSfuStore * store);

/* The value of the room key. */
void legba_sfu_store_get (LegbaSfuStore * store, const char *key,
    LegbaSfuStoreFunc func, gpointer user_data);
/* Sets the room key to value unless it has one: done when set, else value
 * is the one it has. */
void legba_sfu_store_claim (LegbaSfuStore * store, const char *key,
    const char *value, LegbaSfuStoreFunc func, gpointer user_data);
/* Deletes the room key if it still holds value: done when this call
 * deleted it. */
void legba_sfu_store_release (LegbaSfuStore * store, const char *key,
    const char *value, LegbaSfuStoreFunc func, gpointer user_data);
/* Sets the room key to value if it still holds old (the room moved to
 * another Janus): done when this call set it, else value is the one it
 * has (NULL when none). */
void legba_sfu_store_replace (LegbaSfuStore * store, const char *key,
    const char *old, const char *value, LegbaSfuStoreFunc func,
    gpointer user_data);

G_END_DECLS
