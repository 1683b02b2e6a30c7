/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * libFuzzer target: LegbaHub frame handling. The input is a script, one
 * step per line, run against a hub with two apps and N_SLOTS connections
 * (slots 0 and 1 on app 1; slots 2 and 3 on app 2, which has a sign-in
 * timeout and a cap of one connection):
 *
 *   N TEXT                  TEXT as a frame from slot N; a line that does
 *                           not start with a digit and a space goes from 0
 *   !bin N                  a binary frame from slot N
 *   !sub N CHANNEL [DATA]   pusher:subscribe from N, correctly signed (with
 *                           channel_data DATA when given)
 *   !signin N USER_DATA     pusher:signin from N, correctly signed
 *   !publish CHANNEL EVENT DATA   on app 1
 *   !user ID EVENT DATA     server-to-user event on app 1
 *   !terminate ID           on app 1
 *   !tick SECONDS           advance the clock, then legba_hub_tick()
 *   !close N                the transport reports N closed
 *   !open N PROTOCOL        (re)open slot N with that protocol value
 *   !closeall
 *   !sync                   from now on the transport reports the closes
 *                           the hub asks for from inside its close callback
 *
 * A slot with no connection is opened (protocol 7) when a step needs it.
 * Every frame the hub sends must be a strict JSON object with a string
 * "event": anything else aborts.
 */
#include <legba/common/legba-auth.h>
#include <legba/server/legba-hub.h>
#include <legba/common/legba-json.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define N_SLOTS 4

typedef struct
{
  LegbaHub *hub;
  LegbaHubConn *conns[N_SLOTS];
  gboolean close_requested[N_SLOTS];
  gboolean sync_close;
  gint64 now;
} Harness;

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

static void
harness_report_closed (Harness * h, guint slot)
{
  LegbaHubConn *conn = h->conns[slot];

  h->conns[slot] = NULL;
  if (conn != NULL)
    legba_hub_conn_closed (h->hub, conn);
}

static void
fuzz_send (gpointer handle, GBytes * frame, gpointer user_data)
{
  gsize len;
  const char *text = g_bytes_get_data (frame, &len);
  g_autoptr (JsonNode) root = legba_json_parse_strict (text, len, NULL, NULL,
      NULL);

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root) ||
      legba_json_object_get_string (json_node_get_object (root),
          "event") == NULL)
    abort ();
}

static void
fuzz_close (gpointer handle, guint16 code, const char *reason,
    gpointer user_data)
{
  Harness *h = user_data;
  guint slot = GPOINTER_TO_UINT (handle) - 1;

  if (code < 4000 || code > 4399 || reason == NULL || strlen (reason) > 123)
    abort ();
  h->close_requested[slot] = TRUE;
  if (h->sync_close)
    harness_report_closed (h, slot);
}

static const LegbaHubTransport fuzz_transport = { fuzz_send, fuzz_close };

static gint64
fuzz_now (gpointer user_data)
{
  return ((Harness *) user_data)->now;
}

static void
harness_open (Harness * h, guint slot, const char *protocol)
{
  harness_report_closed (h, slot);
  h->close_requested[slot] = FALSE;
  h->conns[slot] = legba_hub_open (h->hub, slot >= 2 ? "key2" : "key1",
      protocol, GUINT_TO_POINTER (slot + 1));
}

static LegbaHubConn *
harness_conn (Harness * h, guint slot)
{
  if (h->conns[slot] == NULL)
    harness_open (h, slot, "7");
  return h->conns[slot];
}

static LegbaHubApp *
harness_app (Harness * h, guint slot)
{
  return legba_hub_find_app_by_id (h->hub, slot >= 2 ? "2" : "1");
}

/* A pusher: event whose data object has the string members given as key,
 * value arguments ending with a NULL key (a NULL value leaves its member
 * out). */
static void
harness_send_event (Harness * h, guint slot, const char *event, ...)
{
  LegbaHubConn *conn = harness_conn (h, slot);
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *text = NULL;
  const char *key;
  va_list args;

  if (conn == NULL)
    return;
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "event");
  json_builder_add_string_value (b, event);
  json_builder_set_member_name (b, "data");
  json_builder_begin_object (b);
  va_start (args, event);
  while ((key = va_arg (args, const char *)) != NULL)
  {
    const char *value = va_arg (args, const char *);

    if (value == NULL)
      continue;
    json_builder_set_member_name (b, key);
    json_builder_add_string_value (b, value);
  }
  va_end (args);
  json_builder_end_object (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  text = json_to_string (root, FALSE);
  legba_hub_receive (h->hub, conn, text, strlen (text));
}

static void
harness_subscribe (Harness * h, guint slot, const char *channel,
    const char *channel_data)
{
  LegbaHubApp *app = harness_app (h, slot);
  LegbaHubConn *conn = harness_conn (h, slot);
  g_autofree char *auth = NULL;

  if (conn == NULL || !g_utf8_validate (channel, -1, NULL) ||
      (channel_data != NULL && !g_utf8_validate (channel_data, -1, NULL)))
    return;
  auth = legba_auth_channel_sign (legba_hub_app_get_key (app),
      legba_hub_app_get_secret (app), legba_hub_conn_get_socket_id (conn),
      channel, channel_data);
  harness_send_event (h, slot, "pusher:subscribe", "channel", channel, "auth",
      auth, "channel_data", channel_data, NULL);
}

static void
harness_signin (Harness * h, guint slot, const char *user_data)
{
  LegbaHubApp *app = harness_app (h, slot);
  LegbaHubConn *conn = harness_conn (h, slot);
  g_autofree char *auth = NULL;

  if (conn == NULL || !g_utf8_validate (user_data, -1, NULL))
    return;
  auth = legba_auth_user_sign (legba_hub_app_get_key (app),
      legba_hub_app_get_secret (app), legba_hub_conn_get_socket_id (conn),
      user_data);
  harness_send_event (h, slot, "pusher:signin", "auth", auth, "user_data",
      user_data, NULL);
}

static guint
parse_slot (const char *word)
{
  return word != NULL && g_ascii_isdigit (word[0]) ?
      (guint) (word[0] - '0') % N_SLOTS : 0;
}

static void
harness_command (Harness * h, const char *line)
{
  g_auto (GStrv) w = g_strsplit (line, " ", 4);
  guint n = g_strv_length (w);
  guint slot = parse_slot (w[1]);
  LegbaHubApp *app = harness_app (h, 0);
  const char *channels[] = { w[1], NULL };

  if (g_str_equal (w[0], "!bin") && harness_conn (h, slot) != NULL)
    legba_hub_receive_binary (h->hub, h->conns[slot]);
  else if (g_str_equal (w[0], "!sub") && n >= 3)
    harness_subscribe (h, slot, w[2], w[3]);
  else if (g_str_equal (w[0], "!signin") && n >= 3)
    harness_signin (h, slot, strchr (line + strlen ("!signin "), ' ') + 1);
  else if (g_str_equal (w[0], "!publish") && n == 4)
    legba_hub_publish (h->hub, app, channels, w[2], w[3], NULL, NULL);
  else if (g_str_equal (w[0], "!user") && n == 4)
    legba_hub_send_to_user (h->hub, app, w[1], w[2], w[3]);
  else if (g_str_equal (w[0], "!terminate") && n >= 2)
    legba_hub_terminate_user (h->hub, app, w[1]);
  else if (g_str_equal (w[0], "!tick") && n >= 2) {
    h->now += (gint64) (g_ascii_strtoull (w[1], NULL, 10) % 1000) *
        G_USEC_PER_SEC;
    legba_hub_tick (h->hub);
  } else if (g_str_equal (w[0], "!close"))
    harness_report_closed (h, slot);
  else if (g_str_equal (w[0], "!open") && n >= 2)
    harness_open (h, slot, w[2]);
  else if (g_str_equal (w[0], "!closeall"))
    legba_hub_close_all (h->hub, LEGBA_PUSHER_RECONNECT, "Shutting down");
  else if (g_str_equal (w[0], "!sync"))
    h->sync_close = TRUE;
}

static void
harness_line (Harness * h, const char *line, gsize len)
{
  guint slot = 0;

  if (len > 0 && line[0] == '!') {
    g_autofree char *command = g_strndup (line, len);

    harness_command (h, command);
  } else {
    if (len >= 2 && g_ascii_isdigit (line[0]) && line[1] == ' ') {
      slot = (line[0] - '0') % N_SLOTS;
      line += 2;
      len -= 2;
    }
    if (harness_conn (h, slot) != NULL)
      legba_hub_receive (h->hub, h->conns[slot], line, len);
  }

  /* The transport reports the closes the hub asked for. */
  for (slot = 0; slot < N_SLOTS; slot++)
    if (h->close_requested[slot] && h->conns[slot] != NULL)
      harness_report_closed (h, slot);
}

static void
harness_init (Harness * h)
{
  LegbaLimits limits;

  memset (h, 0, sizeof *h);
  h->now = 1000 * G_USEC_PER_SEC;
  h->hub = legba_hub_new (&fuzz_transport, h);
  legba_hub_set_clock (h->hub, fuzz_now, h);

  /* Small limits, so short inputs reach them. */
  legba_limits_init_defaults (&limits);
  limits.max_event_bytes = 256;
  limits.client_events_per_second = 3;
  limits.max_presence_members = 3;
  limits.max_user_info_bytes = 64;
  limits.max_channel_name_length = 24;
  limits.max_frame_bytes = 2048;
  limits.activity_timeout = 10;
  limits.pong_timeout = 5;
  limits.cache_ttl = 5;
  limits.max_cache_channels = 3;
  limits.max_cache_bytes = 512;
  limits.max_watchlist_users = 4;
  legba_hub_set_limits (h->hub, &limits);
  legba_hub_add_app (h->hub, "1", "key1", "secret1", NULL);
  limits.signin_timeout = 30;
  limits.max_connections = 1;
  legba_hub_set_limits (h->hub, &limits);
  legba_hub_add_app (h->hub, "2", "key2", "secret2", NULL);
}

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  const char *text = (const char *) data, *end = text + size;
  Harness h;

  harness_init (&h);
  while (text < end) {
    const char *newline = memchr (text, '\n', end - text);
    const char *line_end = newline ? newline : end;

    harness_line (&h, text, line_end - text);
    text = line_end + 1;
  }

  h.sync_close = FALSE;
  for (guint slot = 0; slot < N_SLOTS; slot++)
    harness_report_closed (&h, slot);
  if (legba_hub_get_connection_count (h.hub) != 0 ||
      legba_hub_get_subscription_count (h.hub) != 0)
    abort ();
  legba_hub_free (h.hub);
  return 0;
}
