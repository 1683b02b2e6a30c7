/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * LegbaDataMeta: a data-channel message's envelope on the buffers of the
 * legbadatasrc and legbadatasink elements.
 */
#include <legba/room/legba-room-data.h>

/**
 * legba_data_meta_api_get_type:
 *
 * Gets the API type of #LegbaDataMeta, %LEGBA_DATA_META_API_TYPE, which
 * gst_buffer_get_meta() looks a buffer's envelope up by.
 *
 * Returns: the #GType of the meta API
 */
GType
legba_data_meta_api_get_type (void)
{
  static GType type;
  static const char *tags[] = { NULL };

  if (g_once_init_enter (&type)) {
    GType t = gst_meta_api_type_register ("LegbaDataMetaAPI", tags);

    g_once_init_leave (&type, t);
  }
  return type;
}

static gboolean
data_meta_init (GstMeta * meta, gpointer params, GstBuffer * buffer)
{
  LegbaDataMeta *m = (LegbaDataMeta *) meta;

  m->participant_id = NULL;
  m->topic = NULL;
  m->reliability = LEGBA_RELIABILITY_RELIABLE;
  m->has_reliability = FALSE;
  m->to = NULL;
  return TRUE;
}

static void
data_meta_free (GstMeta * meta, GstBuffer * buffer)
{
  LegbaDataMeta *m = (LegbaDataMeta *) meta;

  g_free (m->participant_id);
  g_free (m->topic);
  g_strfreev (m->to);
}

static gboolean
data_meta_transform (GstBuffer * dest, GstMeta * meta, GstBuffer * buffer,
    GQuark type, gpointer data)
{
  LegbaDataMeta *m = (LegbaDataMeta *) meta;
  LegbaDataMeta *copy;

  if (!GST_META_TRANSFORM_IS_COPY (type))
    return FALSE;
  copy = legba_buffer_add_data_meta (dest, m->participant_id, m->topic,
      m->reliability, (const char *const *) m->to);
  copy->has_reliability = m->has_reliability;
  return TRUE;
}

/**
 * legba_data_meta_get_info:
 *
 * Gets the registered implementation of #LegbaDataMeta,
 * %LEGBA_DATA_META_INFO, which gst_buffer_add_meta() takes.
 *
 * Returns: (transfer none): the #GstMetaInfo of #LegbaDataMeta
 */
const GstMetaInfo *
legba_data_meta_get_info (void)
{
  static const GstMetaInfo *info;

  if (g_once_init_enter ((GstMetaInfo **) & info)) {
    const GstMetaInfo *i = gst_meta_register (LEGBA_DATA_META_API_TYPE,
        "LegbaDataMeta", sizeof (LegbaDataMeta), data_meta_init,
        data_meta_free, data_meta_transform);

    g_once_init_leave ((GstMetaInfo **) & info, (GstMetaInfo *) i);
  }
  return info;
}

/**
 * legba_buffer_add_data_meta:
 * @buffer: a writable #GstBuffer
 * @participant_id: (nullable): the sender
 * @topic: (nullable): the topic
 * @reliability: the channel
 * @to: (nullable) (array zero-terminated=1): the recipients
 *
 * Attaches a data-channel message's envelope to @buffer, as `legbadatasrc`
 * does and as an application does to steer one buffer into `legbadatasink`.
 *
 * Returns: (transfer none): the #LegbaDataMeta added to @buffer
 */
LegbaDataMeta *
legba_buffer_add_data_meta (GstBuffer * buffer, const char *participant_id,
    const char *topic, LegbaReliability reliability, const char *const *to)
{
  LegbaDataMeta *m;

  g_return_val_if_fail (GST_IS_BUFFER (buffer), NULL);

  m = (LegbaDataMeta *) gst_buffer_add_meta (buffer, LEGBA_DATA_META_INFO,
      NULL);
  m->participant_id = g_strdup (participant_id);
  m->topic = g_strdup (topic);
  m->reliability = reliability;
  m->to = g_strdupv ((char **) to);
  return m;
}

/**
 * legba_buffer_get_data_meta:
 * @buffer: a #GstBuffer
 *
 * Gets the data-channel message's envelope a buffer carries.
 *
 * Returns: (transfer none) (nullable): the #LegbaDataMeta of @buffer
 */
LegbaDataMeta *
legba_buffer_get_data_meta (GstBuffer * buffer)
{
  return (LegbaDataMeta *) gst_buffer_get_meta (buffer,
      LEGBA_DATA_META_API_TYPE);
}
