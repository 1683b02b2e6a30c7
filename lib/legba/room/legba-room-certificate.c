/* Legba: real-time rooms for GStreamer
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The process-wide DTLS certificate every peer connection of a LegbaRoom
 * presents (docs/webrtcbin.md, "DTLS certificate"): made once, handed to
 * webrtcbin's dtlssrtpdec as PEM, and its fingerprint written into each
 * local description.
 */
#include <legba/room/legba-room-private.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

/* docs/webrtcbin.md, "DTLS certificate": an ECDSA P-256 certificate
 * shakes hands faster than webrtcbin's RSA-2048 one, and shared by every
 * connection (and held by one long-lived dtlsdec) it is built once per
 * process. */
typedef struct
{
  char *pem;                    /* certificate and private key */
  char *fingerprint;            /* "sha-256 AB:CD:…", of the certificate */
} Certificate;

/* RFC 8122: the hash of the certificate's DER encoding, in uppercase hex
 * pairs joined by colons. */
static char *
certificate_fingerprint (X509 * cert)
{
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  GString *out;

  if (X509_digest (cert, EVP_sha256 (), md, &len) == 0 || len == 0)
    return NULL;
  out = g_string_new ("sha-256 ");
  for (unsigned int i = 0; i < len; i++)
    g_string_append_printf (out, i ? ":%02X" : "%02X", md[i]);
  return g_string_free (out, FALSE);
}

static gboolean
make_certificate (Certificate * out)
{
  EVP_PKEY *key = EVP_EC_gen ("P-256");
  X509 *cert = X509_new ();
  X509_NAME *name;
  BIO *bio = BIO_new (BIO_s_mem ());
  char *data = NULL;
  long len;

  if (key == NULL || cert == NULL || bio == NULL)
    goto out;
  X509_set_version (cert, 2);
  ASN1_INTEGER_set (X509_get_serialNumber (cert), g_random_int () >> 1);
  X509_gmtime_adj (X509_getm_notBefore (cert), -24 * 3600);
  X509_gmtime_adj (X509_getm_notAfter (cert), 30L * 24 * 3600);
  X509_set_pubkey (cert, key);
  name = X509_get_subject_name (cert);
  X509_NAME_add_entry_by_txt (name, "CN", MBSTRING_ASC,
      (const unsigned char *) "legba", -1, -1, 0);
  X509_set_issuer_name (cert, name);
  if (X509_sign (cert, key, EVP_sha256 ()) == 0 ||
      !PEM_write_bio_X509 (bio, cert) ||
      !PEM_write_bio_PrivateKey (bio, key, NULL, NULL, 0, NULL, NULL))
    goto out;
  out->fingerprint = certificate_fingerprint (cert);
  if (out->fingerprint == NULL)
    goto out;
  len = BIO_get_mem_data (bio, &data);
  out->pem = g_strndup (data, len);

out:
  BIO_free (bio);
  X509_free (cert);
  EVP_PKEY_free (key);
  return out->pem != NULL;
}

static const Certificate *
certificate (void)
{
  static gsize made;
  static Certificate cert;

  if (g_once_init_enter (&made)) {
    if (!make_certificate (&cert)) {
      g_warning ("Could not make an ECDSA certificate; webrtcbin's own "
          "will be used");
      g_clear_pointer (&cert.fingerprint, g_free);
    }
    g_once_init_leave (&made, 1);
  }
  return &cert;
}

const char *
legba_room_certificate_pem (void)
{
  return certificate ()->pem;
}

/* webrtcbin 1.22 derives a=fingerprint from everything base64 in the
 * dtlssrtpdec's `pem`: with a private key in it, the hash covers the key
 * too and matches no certificate (a browser then refuses the handshake).
 * Each fingerprint of a local description is set to the certificate's
 * own. Nothing changes when webrtcbin's own certificate is in use. */
void
legba_room_fix_fingerprints (GstSDPMessage * sdp)
{
  const char *fingerprint = certificate ()->fingerprint;
  GstSDPAttribute attr;

  if (fingerprint == NULL)
    return;
  for (guint i = 0; i < gst_sdp_message_attributes_len (sdp); i++) {
    if (g_strcmp0 (gst_sdp_message_get_attribute (sdp, i)->key,
            "fingerprint") != 0)
      continue;
    gst_sdp_attribute_set (&attr, "fingerprint", fingerprint);
    gst_sdp_message_replace_attribute (sdp, i, &attr);
  }
  for (guint m = 0; m < gst_sdp_message_medias_len (sdp); m++) {
    GstSDPMedia *media = (GstSDPMedia *) gst_sdp_message_get_media (sdp, m);

    for (guint i = 0; i < gst_sdp_media_attributes_len (media); i++) {
      if (g_strcmp0 (gst_sdp_media_get_attribute (media, i)->key,
              "fingerprint") != 0)
        continue;
      gst_sdp_attribute_set (&attr, "fingerprint", fingerprint);
      gst_sdp_media_replace_attribute (media, i, &attr);
    }
  }
}
