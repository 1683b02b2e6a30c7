/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#include <legba/server/legba-ws-deflate.h>

#include <string.h>
#include <zlib.h>

/* Output is inflated in steps of this many bytes at most. */
#define INFLATE_STEP 16384

/* RFC 7692 §7.2.1: what a sender removes from the end of each compressed
 * message, and the receiver appends before inflating it. */
static const guint8 deflate_tail[4] = { 0x00, 0x00, 0xff, 0xff };

typedef struct
{
  z_stream z;
  gboolean ready;               /* z initialized */
  gboolean no_context_takeover; /* reset after each message */
} LegbaZStream;

struct _LegbaWsDeflate
{
  SoupWebsocketExtension parent;

  /* The parameters negotiated (RFC 7692 §7.1), echoed in the response. */
  gboolean server_no_context_takeover;
  gboolean client_no_context_takeover;
  guint server_max_window_bits; /* 0: not asked for */
  guint client_max_window_bits; /* 0: not offered */

  LegbaZStream deflater;
  LegbaZStream inflater;

  gsize max_message;            /* 0: no bound */
  gsize message_size;           /* inflated so far of the current message */
  gboolean in_message;          /* a compressed message continues */
  gboolean over_limit;
};

G_DEFINE_FINAL_TYPE (LegbaWsDeflate, legba_ws_deflate,
    SOUP_TYPE_WEBSOCKET_EXTENSION);

static gboolean
legba_ws_deflate_bad_param (const char *name, GError ** error)
{
  g_set_error (error, SOUP_WEBSOCKET_ERROR, SOUP_WEBSOCKET_ERROR_BAD_HANDSHAKE,
      "Invalid permessage-deflate parameter '%s'", name);
  return FALSE;
}

/* RFC 7692 §7.1.2: a window size is 8 to 15 bits, written as a number. */
static gboolean
legba_ws_deflate_parse_bits (const char *value, guint * bits)
{
  guint64 n;

  if (value == NULL || !g_ascii_string_to_unsigned (value, 10, 8, 15, &n, NULL))
    return FALSE;
  *bits = n;
  return TRUE;
}

static gboolean
legba_ws_deflate_parse (LegbaWsDeflate * self, GHashTable * params,
    GError ** error)
{
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_iter_init (&iter, params);
  while (g_hash_table_iter_next (&iter, &key, &value)) {
    const char *name = key;

    if (g_str_equal (name, "server_no_context_takeover") && value == NULL)
      self->server_no_context_takeover = TRUE;
    else if (g_str_equal (name, "client_no_context_takeover") && value == NULL)
      self->client_no_context_takeover = TRUE;
    else if (g_str_equal (name, "server_max_window_bits") &&
        legba_ws_deflate_parse_bits (value, &self->server_max_window_bits));
    else if (g_str_equal (name, "client_max_window_bits") && value == NULL)
      self->client_max_window_bits = 15;
    else if (!g_str_equal (name, "client_max_window_bits") ||
        !legba_ws_deflate_parse_bits (value, &self->client_max_window_bits))
      return legba_ws_deflate_bad_param (name, error);
  }
  return TRUE;
}

static gboolean
legba_ws_deflate_configure (SoupWebsocketExtension * extension,
    SoupWebsocketConnectionType connection_type, GHashTable * params,
    GError ** error)
{
  LegbaWsDeflate *self = LEGBA_WS_DEFLATE (extension);
  guint deflate_bits, inflate_bits;

  g_return_val_if_fail (connection_type == SOUP_WEBSOCKET_CONNECTION_SERVER,
      FALSE);

  if (params != NULL && !legba_ws_deflate_parse (self, params, error))
    return FALSE;

  /* The server compresses with the window the client allows it (zlib
   * makes no raw deflate stream of an 8-bit window; a 9-bit one inflates
   * with 8 bits, as zlib's inflater accepts), and inflates with the one
   * the client says it uses. */
  deflate_bits = self->server_max_window_bits ?
      MAX (self->server_max_window_bits, 9) : 15;
  inflate_bits = self->client_max_window_bits ?
      self->client_max_window_bits : 15;
  self->deflater.no_context_takeover = self->server_no_context_takeover;
  self->inflater.no_context_takeover = self->client_no_context_takeover;
  if (deflateInit2 (&self->deflater.z, Z_DEFAULT_COMPRESSION, Z_DEFLATED,
          -(int) deflate_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    g_set_error_literal (error, SOUP_WEBSOCKET_ERROR,
        SOUP_WEBSOCKET_ERROR_BAD_HANDSHAKE, "zlib could not start");
    return FALSE;
  }
  self->deflater.ready = TRUE;
  if (inflateInit2 (&self->inflater.z, -(int) inflate_bits) != Z_OK) {
    g_set_error_literal (error, SOUP_WEBSOCKET_ERROR,
        SOUP_WEBSOCKET_ERROR_BAD_HANDSHAKE, "zlib could not start");
    return FALSE;
  }
  self->inflater.ready = TRUE;
  return TRUE;
}

/* RFC 7692 §7.1: the response echoes what the client asked for. */
static char *
legba_ws_deflate_get_response_params (SoupWebsocketExtension * extension)
{
  LegbaWsDeflate *self = LEGBA_WS_DEFLATE (extension);
  GString *params = g_string_new (NULL);

  if (self->server_no_context_takeover)
    g_string_append (params, "; server_no_context_takeover");
  if (self->client_no_context_takeover)
    g_string_append (params, "; client_no_context_takeover");
  if (self->server_max_window_bits != 0)
    g_string_append_printf (params, "; server_max_window_bits=%u",
        self->server_max_window_bits);
  if (self->client_max_window_bits != 0)
    g_string_append_printf (params, "; client_max_window_bits=%u",
        self->client_max_window_bits);
  if (params->len == 0) {
    g_string_free (params, TRUE);
    return NULL;
  }
  return g_string_free (params, FALSE);
}

static GBytes *
legba_ws_deflate_process_outgoing (SoupWebsocketExtension * extension,
    guint8 * header, GBytes * payload, GError ** error)
{
  LegbaWsDeflate *self = LEGBA_WS_DEFLATE (extension);
  z_stream *z = &self->deflater.z;
  GByteArray *out;
  gsize len, done;
  const guint8 *data = g_bytes_get_data (payload, &len);
  int r;

  /* RFC 7692 §6.1: control frames are never compressed; an empty message
   * may go as it is. */
  if ((header[0] & 0x08) || len == 0)
    return payload;

  out = g_byte_array_sized_new (deflateBound (z, len) + 16);
  g_byte_array_set_size (out, deflateBound (z, len) + 16);
  z->next_in = (Bytef *) data;
  z->avail_in = len;
  z->next_out = out->data;
  z->avail_out = out->len;
  for (;;) {
    r = deflate (z, Z_SYNC_FLUSH);
    if ((r != Z_OK && r != Z_BUF_ERROR) ||
        (z->avail_in == 0 && z->avail_out > 0))
      break;
    done = out->len - z->avail_out;
    g_byte_array_set_size (out, out->len * 2);
    z->next_out = out->data + done;
    z->avail_out = out->len - done;
  }
  done = out->len - z->avail_out;
  g_bytes_unref (payload);

  /* RFC 7692 §7.2.1: the sync flush ends with 00 00 ff ff, removed. */
  if ((r != Z_OK && r != Z_BUF_ERROR) || done < 4 ||
      memcmp (out->data + done - 4, deflate_tail, 4) != 0) {
    g_byte_array_unref (out);
    deflateReset (z);
    g_set_error_literal (error, SOUP_WEBSOCKET_ERROR,
        SOUP_WEBSOCKET_CLOSE_SERVER_ERROR, "Could not compress a message");
    return NULL;
  }
  if (self->deflater.no_context_takeover)
    deflateReset (z);
  header[0] |= 0x40;
  g_byte_array_set_size (out, done - 4);
  return g_byte_array_free_to_bytes (out);
}

static GBytes *
legba_ws_deflate_fail (LegbaWsDeflate * self, GByteArray * out,
    GBytes * payload, gint code, const char *message, GError ** error)
{
  g_byte_array_unref (out);
  g_bytes_unref (payload);
  self->in_message = FALSE;
  self->message_size = 0;
  inflateReset (&self->inflater.z);
  g_set_error_literal (error, SOUP_WEBSOCKET_ERROR, code, message);
  return NULL;
}

/* Inflates the input z holds onto out until it is all taken and its
 * output given, or out holds limit bytes; FALSE on corrupt data. */
static gboolean
legba_ws_deflate_inflate (z_stream * z, GByteArray * out, gsize limit)
{
  while (out->len < limit) {
    gsize at = out->len, step = MIN (INFLATE_STEP, limit - at);
    int r;

    g_byte_array_set_size (out, at + step);
    z->next_out = out->data + at;
    z->avail_out = step;
    r = inflate (z, Z_SYNC_FLUSH);
    g_byte_array_set_size (out, at + step - z->avail_out);
    /* A block marked final (RFC 1951 §3.2.3) ends one deflate stream;
     * another may follow in the same message. */
    if (r == Z_STREAM_END && inflateReset (z) != Z_OK)
      return FALSE;
    if (r != Z_OK && r != Z_STREAM_END && r != Z_BUF_ERROR)
      return FALSE;
    /* Z_BUF_ERROR with room for output: all input was taken. */
    if (r == Z_BUF_ERROR || (z->avail_in == 0 && z->avail_out > 0))
      return TRUE;
  }
  return TRUE;
}

static GBytes *
legba_ws_deflate_process_incoming (SoupWebsocketExtension * extension,
    guint8 * header, GBytes * payload, GError ** error)
{
  LegbaWsDeflate *self = LEGBA_WS_DEFLATE (extension);
  z_stream *z = &self->inflater.z;
  gboolean fin = (header[0] & 0x80) != 0, compressed;
  GByteArray *out;
  gsize len, limit;
  const guint8 *data;

  /* RFC 7692 §6.1: only the first frame of a compressed data message has
   * RSV1 set; control frames are never compressed. */
  if (header[0] & 0x08)
    return payload;
  compressed = (header[0] & 0x40) != 0;
  if (compressed && self->in_message)
    return legba_ws_deflate_fail (self, g_byte_array_new (), payload,
        SOUP_WEBSOCKET_CLOSE_PROTOCOL_ERROR,
        "RSV1 set on a continuation frame", error);
  if (!compressed && !self->in_message)
    return payload;
  header[0] &= ~0x40;
  self->in_message = !fin;

  /* One byte of room over the bound tells a message over it. */
  limit = self->max_message ? self->max_message - self->message_size + 1 :
      G_MAXSIZE;
  data = g_bytes_get_data (payload, &len);
  out = g_byte_array_new ();
  z->next_in = (Bytef *) data;
  z->avail_in = len;
  if (!legba_ws_deflate_inflate (z, out, limit))
    goto corrupt;
  if (fin && out->len < limit) {
    z->next_in = (Bytef *) deflate_tail;
    z->avail_in = sizeof deflate_tail;
    if (!legba_ws_deflate_inflate (z, out, limit))
      goto corrupt;
  }
  if (out->len >= limit) {
    self->over_limit = TRUE;
    return legba_ws_deflate_fail (self, out, payload,
        SOUP_WEBSOCKET_CLOSE_TOO_BIG,
        "Message over the size limit once inflated", error);
  }
  g_bytes_unref (payload);
  self->message_size = fin ? 0 : self->message_size + out->len;
  if (fin && self->inflater.no_context_takeover)
    inflateReset (z);
  return g_byte_array_free_to_bytes (out);

corrupt:
  return legba_ws_deflate_fail (self, out, payload,
      SOUP_WEBSOCKET_CLOSE_PROTOCOL_ERROR,
      "Could not inflate a compressed message", error);
}

static void
legba_ws_deflate_finalize (GObject * object)
{
  LegbaWsDeflate *self = LEGBA_WS_DEFLATE (object);

  if (self->deflater.ready)
    deflateEnd (&self->deflater.z);
  if (self->inflater.ready)
    inflateEnd (&self->inflater.z);
  G_OBJECT_CLASS (legba_ws_deflate_parent_class)->finalize (object);
}

static void
legba_ws_deflate_class_init (LegbaWsDeflateClass * klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  SoupWebsocketExtensionClass *extension_class =
      SOUP_WEBSOCKET_EXTENSION_CLASS (klass);

  object_class->finalize = legba_ws_deflate_finalize;
  extension_class->name = "permessage-deflate";
  extension_class->configure = legba_ws_deflate_configure;
  extension_class->get_response_params = legba_ws_deflate_get_response_params;
  extension_class->process_outgoing_message = legba_ws_deflate_process_outgoing;
  extension_class->process_incoming_message = legba_ws_deflate_process_incoming;
}

static void
legba_ws_deflate_init (LegbaWsDeflate * self)
{
}

void
legba_ws_deflate_set_max_message (LegbaWsDeflate * deflate, gsize max_bytes)
{
  g_return_if_fail (LEGBA_IS_WS_DEFLATE (deflate));

  deflate->max_message = max_bytes;
}

gboolean
legba_ws_deflate_is_over_limit (LegbaWsDeflate * deflate)
{
  g_return_val_if_fail (LEGBA_IS_WS_DEFLATE (deflate), FALSE);

  return deflate->over_limit;
}
