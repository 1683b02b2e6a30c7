/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * docs/room-protocol.md §4: signal messages, their size, `part` chunking and
 * reassembly.
 */
#include <legba/signal/legba-signal-codec.h>

#include <legba/common/legba-json.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON as JavaScript writes it ---- */

static void
write_string (GString * out, const char *s)
{
  g_autofree char *valid = NULL;
  const char *p;

  /* a JSON text is UTF-8: an application's stray bytes become U+FFFD */
  if (!g_utf8_validate (s, -1, NULL))
    s = valid = g_utf8_make_valid (s, -1);
  g_string_append_c (out, '"');
  for (p = s; *p; p++) {
    guchar c = *p;

    /* ECMA-262 QuoteJSONString */
    switch (c) {
      case '"':
        g_string_append (out, "\\\"");
        break;
      case '\\':
        g_string_append (out, "\\\\");
        break;
      case '\b':
        g_string_append (out, "\\b");
        break;
      case '\f':
        g_string_append (out, "\\f");
        break;
      case '\n':
        g_string_append (out, "\\n");
        break;
      case '\r':
        g_string_append (out, "\\r");
        break;
      case '\t':
        g_string_append (out, "\\t");
        break;
      default:
        if (c < 0x20)
          g_string_append_printf (out, "\\u%04x", c);
        else
          g_string_append_c (out, c);
    }
  }
  g_string_append_c (out, '"');
}

/* ECMA-262 Number::toString: the shortest digits that read back as d,
 * placed in plain or exponent notation by the position of the point. */
static void
write_double (GString * out, double d)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  char digits[32];
  const char *p;
  int precision, exponent, k, n, i;

  if (!isfinite (d)) {
    g_string_append (out, "null");
    return;
  }
  if (d == 0) {
    g_string_append_c (out, '0');
    return;
  }
  for (precision = 1; precision <= 17; precision++) {
    char format[8];

    g_snprintf (format, sizeof format, "%%.%de", precision - 1);
    g_ascii_formatd (buf, sizeof buf, format, d);
    if (g_ascii_strtod (buf, NULL) == d)
      break;
  }
  p = buf;
  if (*p == '-') {
    g_string_append_c (out, '-');
    p++;
  }
  for (k = 0; *p && *p != 'e'; p++)
    if (g_ascii_isdigit (*p))
      digits[k++] = *p;
  while (k > 1 && digits[k - 1] == '0')
    k--;
  digits[k] = '\0';
  exponent = *p == 'e' ? atoi (p + 1) : 0;
  n = exponent + 1;

  if (k <= n && n <= 21) {
    g_string_append (out, digits);
    for (i = k; i < n; i++)
      g_string_append_c (out, '0');
  } else if (0 < n && n <= 21) {
    g_string_append_len (out, digits, n);
    g_string_append_c (out, '.');
    g_string_append (out, digits + n);
  } else if (-6 < n && n <= 0) {
    g_string_append (out, "0.");
    for (i = n; i < 0; i++)
      g_string_append_c (out, '0');
    g_string_append (out, digits);
  } else {
    g_string_append_c (out, digits[0]);
    if (k > 1) {
      g_string_append_c (out, '.');
      g_string_append (out, digits + 1);
    }
    g_string_append_printf (out, "e%c%d", n - 1 >= 0 ? '+' : '-', ABS (n - 1));
  }
}

static void
write_value (GString * out, JsonNode * node)
{
  switch (json_node_get_value_type (node)) {
    case G_TYPE_INT64:
      g_string_append_printf (out, "%" G_GINT64_FORMAT,
          json_node_get_int (node));
      break;
    case G_TYPE_DOUBLE:
      write_double (out, json_node_get_double (node));
      break;
    case G_TYPE_BOOLEAN:
      g_string_append (out, json_node_get_boolean (node) ? "true" : "false");
      break;
    case G_TYPE_STRING:
      write_string (out, json_node_get_string (node));
      break;
    default:
      g_string_append (out, "null");
  }
}

void
legba_json_write (GString * out, JsonNode * node)
{
  JsonObjectIter iter;
  const char *name;
  JsonNode *member;
  JsonArray *array;
  guint i, len;

  switch (JSON_NODE_TYPE (node)) {
    case JSON_NODE_OBJECT:
      g_string_append_c (out, '{');
      json_object_iter_init_ordered (&iter, json_node_get_object (node));
      for (i = 0; json_object_iter_next_ordered (&iter, &name, &member); i++) {
        if (i > 0)
          g_string_append_c (out, ',');
        write_string (out, name);
        g_string_append_c (out, ':');
        legba_json_write (out, member);
      }
      g_string_append_c (out, '}');
      break;
    case JSON_NODE_ARRAY:
      array = json_node_get_array (node);
      len = json_array_get_length (array);
      g_string_append_c (out, '[');
      for (i = 0; i < len; i++) {
        if (i > 0)
          g_string_append_c (out, ',');
        legba_json_write (out, json_array_get_element (array, i));
      }
      g_string_append_c (out, ']');
      break;
    case JSON_NODE_VALUE:
      write_value (out, node);
      break;
    case JSON_NODE_NULL:
      g_string_append (out, "null");
      break;
  }
}

char *
legba_json_object_to_string (JsonObject * object, gsize * len)
{
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  GString *out = g_string_sized_new (256);

  json_node_set_object (node, object);
  legba_json_write (out, node);
  if (len)
    *len = out->len;
  return g_string_free (out, FALSE);
}

/* ---- Checks ---- */

static const char *
get_string (JsonObject * object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (node);
}

static gboolean
get_int (JsonObject * object, const char *name, gint64 * value)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) ||
      json_node_get_value_type (node) != G_TYPE_INT64)
    return FALSE;
  *value = json_node_get_int (node);
  return TRUE;
}

static gboolean
check_candidates (JsonObject * signal)
{
  JsonNode *node = json_object_get_member (signal, "candidates");
  JsonNode *end = json_object_get_member (signal, "end");
  JsonArray *array;
  guint i, len;

  if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node))
    return FALSE;
  if (end != NULL && !JSON_NODE_HOLDS_NULL (end) &&
      (!JSON_NODE_HOLDS_VALUE (end) ||
          json_node_get_value_type (end) != G_TYPE_BOOLEAN))
    return FALSE;
  array = json_node_get_array (node);
  len = json_array_get_length (array);
  for (i = 0; i < len; i++) {
    JsonNode *candidate = json_array_get_element (array, i);

    if (!JSON_NODE_HOLDS_OBJECT (candidate) ||
        get_string (json_node_get_object (candidate), "candidate") == NULL)
      return FALSE;
  }
  return TRUE;
}

static gboolean
check_part (JsonObject * signal)
{
  gint64 part, parts;

  return get_string (signal, "id") != NULL &&
      get_string (signal, "chunk") != NULL &&
      get_int (signal, "part", &part) && get_int (signal, "parts", &parts) &&
      parts >= 1 && parts <= LEGBA_SIGNAL_MAX_PARTS &&
      part >= 0 && part < parts;
}

gboolean
legba_signal_check (JsonObject * signal, GError ** error)
{
  const char *type = get_string (signal, "type");
  const char *missing = NULL;

  if (get_string (signal, "to") == NULL)
    missing = "to";
  else if (get_string (signal, "from") == NULL)
    missing = "from";
  else if (get_string (signal, "pc") == NULL)
    missing = "pc";
  else if (type == NULL)
    missing = "type";
  else if (g_str_equal (type, "offer") || g_str_equal (type, "answer")) {
    if (get_string (signal, "sdp") == NULL)
      missing = "sdp";
  } else if (g_str_equal (type, "candidates")) {
    if (!check_candidates (signal))
      missing = "candidates";
  } else if (g_str_equal (type, "part")) {
    if (!check_part (signal))
      missing = "id, part, parts or chunk";
  }

  if (missing != NULL) {
    g_set_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID,
        "Signal without a valid %s", missing);
    return FALSE;
  }
  return TRUE;
}

/* ---- Splitting ---- */

static char *
part_to_string (JsonObject * signal, const char *id, gint64 part,
    gint64 parts, const char *chunk, gsize * len)
{
  g_autoptr (JsonObject) object = json_object_new ();

  /* §4: a part's to, from and pc are those of the signal inside */
  json_object_set_string_member (object, "to", get_string (signal, "to"));
  json_object_set_string_member (object, "from", get_string (signal, "from"));
  json_object_set_string_member (object, "pc", get_string (signal, "pc"));
  json_object_set_string_member (object, "type", "part");
  json_object_set_string_member (object, "id", id);
  json_object_set_int_member (object, "part", part);
  json_object_set_int_member (object, "parts", parts);
  json_object_set_string_member (object, "chunk", chunk);
  return legba_json_object_to_string (object, len);
}

/* Bytes a character of the signal's JSON text takes inside the `chunk`
 * string: the text has no control characters, only quotes and
 * backslashes gain an escape. */
static gsize
chunk_cost (const char *p, const char **next)
{
  *next = g_utf8_next_char (p);
  if (*p == '"' || *p == '\\')
    return 2;
  return *next - p;
}

/* Cuts text into chunks of at most budget bytes once escaped, at
 * character boundaries. Returns the number of chunks, filling offsets
 * (the start of each, and the end) when given. */
static guint
cut_chunks (const char *text, gsize budget, GArray * offsets)
{
  const char *p = text, *next;
  gsize used = 0, start = 0;
  guint count = 1;

  if (offsets)
    g_array_append_val (offsets, start);
  while (*p) {
    gsize cost = chunk_cost (p, &next);

    if (used + cost > budget) {
      start = p - text;
      count++;
      used = 0;
      if (offsets)
        g_array_append_val (offsets, start);
    }
    used += cost;
    p = next;
  }
  if (offsets) {
    start = p - text;
    g_array_append_val (offsets, start);
  }
  return count;
}

static guint
count_digits (guint64 v)
{
  guint n = 1;

  while (v >= 10) {
    v /= 10;
    n++;
  }
  return n;
}

static gboolean
split_budget (JsonObject * signal, const char *id, const char *text,
    gsize limit, guint * parts, gsize * budget)
{
  guint guess = 1;

  /* The overhead grows with the digits of part and parts: assume a count,
   * cut, and retry with the count found until its digits fit. */
  for (;;) {
    gsize overhead;
    guint count;

    /* an empty part: only its overhead is needed */
    g_free (part_to_string (signal, id, guess - 1, guess, "", &overhead));

    /* at least one character of any kind per part */
    if (overhead + 8 > limit)
      return FALSE;
    count = cut_chunks (text, limit - overhead, NULL);
    if (count_digits (count) <= count_digits (guess)) {
      *parts = count;
      *budget = limit - overhead;
      return TRUE;
    }
    guess = count;
  }
}

GPtrArray *
legba_signal_split (JsonObject * signal, const char *id, gsize limit,
    GError ** error)
{
  g_autoptr (GPtrArray) out = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GArray) offsets = g_array_new (FALSE, FALSE, sizeof (gsize));
  gsize len, budget;
  g_autofree char *text = legba_json_object_to_string (signal, &len);
  guint parts, i;

  if (len <= limit) {
    g_ptr_array_add (out, g_steal_pointer (&text));
    return g_steal_pointer (&out);
  }
  if (!split_budget (signal, id, text, limit, &parts, &budget) ||
      parts > LEGBA_SIGNAL_MAX_PARTS) {
    g_set_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_TOO_LARGE,
        "A signal of %" G_GSIZE_FORMAT " bytes does not fit in %d parts "
        "of %" G_GSIZE_FORMAT " bytes", len, LEGBA_SIGNAL_MAX_PARTS, limit);
    return NULL;
  }
  cut_chunks (text, budget, offsets);
  for (i = 0; i < parts; i++) {
    gsize start = g_array_index (offsets, gsize, i);
    gsize end = g_array_index (offsets, gsize, i + 1);
    g_autofree char *chunk = g_strndup (text + start, end - start);
    gsize part_len;
    char *part = part_to_string (signal, id, i, parts, chunk, &part_len);

    g_ptr_array_add (out, part);
    if (part_len > limit) {
      g_set_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_TOO_LARGE,
          "Part %u of a signal takes %" G_GSIZE_FORMAT " bytes, over %"
          G_GSIZE_FORMAT, i, part_len, limit);
      return NULL;
    }
  }
  return g_steal_pointer (&out);
}

/* ---- Reassembly ---- */

typedef struct
{
  char *key;                    /* "from\nid" */
  char *to;
  char *from;
  char *pc;
  guint parts;
  guint received;
  char **chunks;
  gsize bytes;
  gint64 started;
} PartSet;

struct _LegbaSignalReassembler
{
  GHashTable *sets;             /* key -> PartSet, owned */
  gsize bytes;
};

static void
part_set_free (PartSet * set)
{
  guint i;

  for (i = 0; i < set->parts; i++)
    g_free (set->chunks[i]);
  g_free (set->chunks);
  g_free (set->key);
  g_free (set->to);
  g_free (set->from);
  g_free (set->pc);
  g_free (set);
}

LegbaSignalReassembler *
legba_signal_reassembler_new (void)
{
  LegbaSignalReassembler *self = g_new0 (LegbaSignalReassembler, 1);

  self->sets = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
      (GDestroyNotify) part_set_free);
  return self;
}

void
legba_signal_reassembler_free (LegbaSignalReassembler * self)
{
  g_hash_table_unref (self->sets);
  g_free (self);
}

static void
drop_set (LegbaSignalReassembler * self, PartSet * set)
{
  self->bytes -= set->bytes;
  g_hash_table_remove (self->sets, set->key);
}

guint
legba_signal_reassembler_expire (LegbaSignalReassembler * self, gint64 now_us)
{
  GHashTableIter iter;
  PartSet *set;

  g_hash_table_iter_init (&iter, self->sets);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) & set)) {
    if (now_us - set->started > LEGBA_SIGNAL_PART_TIMEOUT_US) {
      g_debug ("Dropping %u of %u parts of signal %s: incomplete after 10 s",
          set->received, set->parts, set->key);
      self->bytes -= set->bytes;
      g_hash_table_iter_remove (&iter);
    }
  }
  return g_hash_table_size (self->sets);
}

static PartSet *
find_or_start_set (LegbaSignalReassembler * self, JsonObject * part,
    gint64 now_us, GError ** error)
{
  const char *from = get_string (part, "from");
  g_autofree char *key = g_strconcat (from, "\n", get_string (part, "id"),
      NULL);
  PartSet *set = g_hash_table_lookup (self->sets, key);
  gint64 parts = 0;

  get_int (part, "parts", &parts);
  if (set != NULL) {
    if (set->parts != parts || g_strcmp0 (set->to, get_string (part, "to"))
        || g_strcmp0 (set->pc, get_string (part, "pc"))) {
      drop_set (self, set);
      g_set_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID,
          "Parts of one signal disagree on parts, to or pc");
      return NULL;
    }
    return set;
  }
  if (g_hash_table_size (self->sets) >= LEGBA_SIGNAL_MAX_PENDING_SETS) {
    g_set_error_literal (error, LEGBA_SIGNAL_ERROR,
        LEGBA_SIGNAL_ERROR_TOO_LARGE, "Too many unfinished part sets");
    return NULL;
  }
  set = g_new0 (PartSet, 1);
  set->key = g_steal_pointer (&key);
  set->to = g_strdup (get_string (part, "to"));
  set->from = g_strdup (from);
  set->pc = g_strdup (get_string (part, "pc"));
  set->parts = parts;
  set->chunks = g_new0 (char *, parts);
  set->started = now_us;
  g_hash_table_insert (self->sets, set->key, set);
  return set;
}

static JsonObject *
assemble (PartSet * set, GError ** error)
{
  g_autoptr (GString) text = g_string_sized_new (set->bytes);
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *message = NULL;
  JsonObject *signal;
  const char *type;
  guint i;

  for (i = 0; i < set->parts; i++)
    g_string_append (text, set->chunks[i]);
  root = legba_json_parse_strict (text->str, text->len, NULL, NULL, &message);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)) {
    g_set_error_literal (error, LEGBA_SIGNAL_ERROR,
        LEGBA_SIGNAL_ERROR_INVALID, message ? message :
        "Reassembled signal is not an object");
    return NULL;
  }
  signal = json_node_get_object (root);
  if (!legba_signal_check (signal, error))
    return NULL;
  type = get_string (signal, "type");
  if (g_str_equal (type, "part") ||
      g_strcmp0 (get_string (signal, "to"), set->to) ||
      g_strcmp0 (get_string (signal, "from"), set->from) ||
      g_strcmp0 (get_string (signal, "pc"), set->pc)) {
    g_set_error_literal (error, LEGBA_SIGNAL_ERROR,
        LEGBA_SIGNAL_ERROR_INVALID,
        "Reassembled signal is a part or disagrees with its parts");
    return NULL;
  }
  return json_object_ref (signal);
}

JsonObject *
legba_signal_reassembler_add (LegbaSignalReassembler * self,
    JsonObject * part, gint64 now_us, GError ** error)
{
  const char *chunk = get_string (part, "chunk");
  gsize chunk_len = strlen (chunk);
  gint64 index = 0;
  PartSet *set;
  JsonObject *signal;

  legba_signal_reassembler_expire (self, now_us);
  set = find_or_start_set (self, part, now_us, error);
  if (set == NULL)
    return NULL;
  get_int (part, "part", &index);
  if (set->chunks[index] != NULL) {
    g_set_error (error, LEGBA_SIGNAL_ERROR, LEGBA_SIGNAL_ERROR_INVALID,
        "Part %" G_GINT64_FORMAT " of signal %s arrived twice", index,
        set->key);
    return NULL;
  }
  if (self->bytes + chunk_len > LEGBA_SIGNAL_MAX_PENDING_BYTES) {
    drop_set (self, set);
    g_set_error_literal (error, LEGBA_SIGNAL_ERROR,
        LEGBA_SIGNAL_ERROR_TOO_LARGE, "Unfinished part sets over the bound");
    return NULL;
  }
  set->chunks[index] = g_strdup (chunk);
  set->bytes += chunk_len;
  self->bytes += chunk_len;
  if (++set->received < set->parts)
    return NULL;

  signal = assemble (set, error);
  drop_set (self, set);
  return signal;
}
