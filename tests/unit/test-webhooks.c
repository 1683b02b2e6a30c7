/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The webhooks' parts without I/O: specs read from the configuration,
 * the backoff between attempts, Pusher's body.
 */
#include <legba/server/legba-server.h>
#include <legba/server/legba-webhooks.h>
#include <json-glib/json-glib.h>
#include <string.h>

static void
test_spec_valid (void)
{
  g_autofree char *url = NULL;
  LegbaWebhookEvents events = 0;
  g_autoptr (GError) error = NULL;

  g_assert_true (legba_webhook_spec_parse ("https://example.com/hook?k=1 "
          "channel_occupied, channel_vacated,member_added member_removed "
          "client_event,cache_miss,subscription_count", &url, &events, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (url, ==, "https://example.com/hook?k=1");
  g_assert_cmpuint (events, ==, LEGBA_WEBHOOK_CHANNEL_OCCUPIED |
      LEGBA_WEBHOOK_CHANNEL_VACATED | LEGBA_WEBHOOK_MEMBER_ADDED |
      LEGBA_WEBHOOK_MEMBER_REMOVED | LEGBA_WEBHOOK_CLIENT_EVENT |
      LEGBA_WEBHOOK_CACHE_MISS | LEGBA_WEBHOOK_SUBSCRIPTION_COUNT);
}

static const struct
{
  const char *spec;
  const char *message;          /* a part of the error's */
} bad_specs[] = {
  {"", "empty"},
  {"   ", "empty"},
  {"http://example.com/", "no event given"},
  {"ftp://example.com/ client_event", "not http:// or https://"},
  {"example.com client_event", "URI"},
  {"http:///path client_event", "no host"},
  {"http://example.com/ client_events", "unknown event 'client_events'"},
  {"http://example.com/ Channel_Occupied", "unknown event"},
  {"http://exa mple.com/ client_event", "unknown event 'mple.com/'"},
};

static void
test_spec_invalid (gconstpointer data)
{
  guint i = GPOINTER_TO_UINT (data);
  g_autoptr (GError) error = NULL;
  g_autofree char *url = NULL;

  g_assert_false (legba_webhook_spec_parse (bad_specs[i].spec, &url, NULL,
          &error));
  g_assert_null (url);
  g_assert_error (error, LEGBA_SERVER_ERROR, LEGBA_SERVER_ERROR_CONFIG);
  if (strstr (error->message, bad_specs[i].message) == NULL)
    g_error ("'%s': error '%s' does not say '%s'", bad_specs[i].spec,
        error->message, bad_specs[i].message);
}

static void
test_backoff (void)
{
  g_assert_cmpuint (legba_webhook_backoff_ms (1000, 1), ==, 1000);
  g_assert_cmpuint (legba_webhook_backoff_ms (1000, 2), ==, 2000);
  g_assert_cmpuint (legba_webhook_backoff_ms (1000, 3), ==, 4000);
  g_assert_cmpuint (legba_webhook_backoff_ms (1000, 7), ==, 60000);
  g_assert_cmpuint (legba_webhook_backoff_ms (1000, G_MAXUINT), ==, 60000);
  g_assert_cmpuint (legba_webhook_backoff_ms (50, 1), ==, 50);
  g_assert_cmpuint (legba_webhook_backoff_ms (0, 1), ==, 1);
  g_assert_cmpuint (legba_webhook_backoff_ms (G_MAXUINT, 2), ==, 60000);
}

static void
test_body (void)
{
  const char *events[] = {
    "{\"name\":\"channel_occupied\",\"channel\":\"a\"}",
    "{\"name\":\"member_added\",\"channel\":\"presence-b\",\"user_id\":\"u\"}",
  };
  g_autofree char *body = legba_webhook_body_new (1327078148132, events, 2);
  g_autofree char *empty = legba_webhook_body_new (5, NULL, 0);
  g_autoptr (JsonNode) node = NULL;

  g_assert_cmpstr (body, ==, "{\"time_ms\":1327078148132,\"events\":["
      "{\"name\":\"channel_occupied\",\"channel\":\"a\"},"
      "{\"name\":\"member_added\",\"channel\":\"presence-b\","
      "\"user_id\":\"u\"}]}");
  node = json_from_string (body, NULL);
  g_assert_nonnull (node);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (node));
  g_assert_cmpstr (empty, ==, "{\"time_ms\":5,\"events\":[]}");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/webhooks/spec/valid", test_spec_valid);
  for (guint i = 0; i < G_N_ELEMENTS (bad_specs); i++) {
    g_autofree char *path = g_strdup_printf ("/webhooks/spec/invalid/%u", i);

    g_test_add_data_func (path, GUINT_TO_POINTER (i), test_spec_invalid);
  }
  g_test_add_func ("/webhooks/backoff", test_backoff);
  g_test_add_func ("/webhooks/body", test_body);
  return g_test_run ();
}
