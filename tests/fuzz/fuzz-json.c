/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * libFuzzer target: legba_json_check_strict() against json-glib, on any
 * bytes. What must hold, or the target aborts:
 * - text the check accepts, json-glib parses, and every string in its tree
 *   (member names included) is valid UTF-8 of the length json-glib gives;
 * - the spans of "topic" and "data", when the text is an object, are
 *   themselves JSON values the check accepts, and json-glib finds the same
 *   members there (the last of a repeated name);
 * - json-glib's tree of a span is the tree of that member in the whole
 *   text, written the same.
 */
#include <legba/common/legba-json.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

static void
check_strings (JsonNode * node)
{
  switch (json_node_get_node_type (node)) {
    case JSON_NODE_OBJECT:{
      JsonObjectIter iter;
      const char *name;
      JsonNode *member;

      json_object_iter_init (&iter, json_node_get_object (node));
      while (json_object_iter_next (&iter, &name, &member)) {
        if (!g_utf8_validate (name, -1, NULL))
          abort ();
        check_strings (member);
      }
      break;
    }
    case JSON_NODE_ARRAY:{
      JsonArray *array = json_node_get_array (node);

      for (guint i = 0; i < json_array_get_length (array); i++)
        check_strings (json_array_get_element (array, i));
      break;
    }
    case JSON_NODE_VALUE:
      if (json_node_get_value_type (node) == G_TYPE_STRING &&
          !g_utf8_validate (json_node_get_string (node), -1, NULL))
        abort ();
      break;
    case JSON_NODE_NULL:
      break;
  }
}

/* the span, parsed alone, is the member of the whole text's root */
static void
check_span (const LegbaJsonSpan * span, JsonNode * root, const char *name)
{
  JsonObject *object = JSON_NODE_HOLDS_OBJECT (root) ?
      json_node_get_object (root) : NULL;
  JsonNode *member = object ? json_object_get_member (object, name) : NULL;
  g_autoptr (JsonNode) alone = NULL;
  g_autofree char *a = NULL, *b = NULL;

  if (span->start == NULL) {
    if (member != NULL)
      abort ();
    return;
  }
  if (member == NULL ||
      !legba_json_check_strict (span->start, span->len, NULL, NULL, NULL))
    abort ();
  alone = legba_json_parse_strict (span->start, span->len, NULL, NULL, NULL);
  if (alone == NULL)
    abort ();
  a = json_to_string (alone, FALSE);
  b = json_to_string (member, FALSE);
  if (strcmp (a, b) != 0)
    abort ();
}

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  static const char *const keys[] = { "topic", "data", NULL };
  LegbaJsonSpan spans[2];
  const char *text = (const char *) data;
  g_autoptr (JsonParser) parser = NULL;
  JsonNode *root;

  if (!legba_json_check_strict (text, size, keys, spans, NULL))
    return 0;
  parser = json_parser_new_immutable ();
  if (!json_parser_load_from_data (parser, text, size, NULL) ||
      (root = json_parser_get_root (parser)) == NULL)
    abort ();
  check_strings (root);
  check_span (&spans[0], root, "topic");
  check_span (&spans[1], root, "data");
  return 0;
}
