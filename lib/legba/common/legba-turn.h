/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Time-limited TURN credentials (the "TURN REST API" scheme that coturn
 * implements with use-auth-secret and static-auth-secret), the
 * `ice_servers` legba-server hands to room members (docs/server.md), and
 * their conversion into webrtcbin's TURN URIs (docs/rooms.md).
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Credentials last a day unless configured otherwise (the lifetime the
 * TURN REST scheme's description suggests). */
#define LEGBA_TURN_DEFAULT_TTL 86400

/* base64 (HMAC-SHA1 (secret, username)): the password coturn derives
 * from its static-auth-secret for a user name. */
char *legba_turn_credential (const char *secret, const char *username);

/* "EXPIRY:USER_ID", EXPIRY in seconds since the Unix epoch. */
char *legba_turn_username (gint64 expiry_s, const char *user_id);

/* Is url a TURN URI of RFC 7065, turn: or turns:, as browsers take them
 * (`turn:HOST[:PORT][?transport=udp|tcp]`, HOST a name, an IPv4 address
 * or a bracketed IPv6 one)? Sets error (G_IO_ERROR_INVALID_ARGUMENT)
 * saying what is wrong. */
gboolean legba_turn_url_check (const char *url, GError ** error);

/* Appends the JSON array of RTCIceServer dictionaries
 * [{"urls": [...], "username": "EXPIRY:USER_ID", "credential": "..."}]
 * for user_id, valid until now_s + ttl_s. urls must pass
 * legba_turn_url_check(). */
void legba_turn_append_ice_servers (GString * out,
    const char *const *urls, const char *secret, guint ttl_s,
    const char *user_id, gint64 now_s);

/* The TURN servers of an RTCIceServer array (as the signalling server
 * sent it) as webrtcbin URIs, `turn(s)://USER:PASSWORD@HOST:PORT
 * [?transport=T]`, user and password URI-escaped. Entries that are not
 * TURN servers with a user name and credential are skipped. Never NULL. */
char **legba_turn_uris_from_ice_servers (JsonArray * servers);

G_END_DECLS
