/*
 * The receive path on the 3.5 base: in order only, for now.
 *
 * 3.5's record layer (ssl/record/methods/: OSSL_RECORD_METHOD, tls_common.c's
 * tls_read_record(), tls13_meth.c's cipher, the record layer's own copy of
 * the read sequence number and keys) replaced everything the 3.0 glue hooks
 * (ssl3_get_record, ssl3_read_bytes, tls13_change_cipher_state). Until the
 * 3.5 hooks for it exist, no key is taken up (utls_gen_setup refuses), so a
 * connection with SSL_MODE_UNORDERED reads exactly as stock 3.5 does and
 * UTLS_get_stats() reports UTLS_FALLBACK_HANDSHAKE (docs/base35.md). Nothing
 * unauthenticated can be delivered: only OpenSSL's own read path delivers.
 */
#include <string.h>

#include "glue_local.h"

uint64_t utls_inorder_seq(SSL *s)
{
    (void)s;
    return 0; /* only asked once utls_gen_setup() accepted a key: never */
}

int utls_gen_setup(SSL *s, utls_conn *c)
{
    (void)s, (void)c;
    return 0;
}

int utls_inorder_partial_anchor(SSL *s, const utls_conn *c, utls_seqpred_record *a)
{
    (void)s, (void)c, (void)a;
    return 0;
}

void utls_probe13_setup(SSL *s, utls_conn *c)
{
    (void)s, (void)c;
}

int utls_probe(SSL *s, utls_conn *c, int next_key, const unsigned char *wire, size_t wire_len,
               uint64_t seq, const unsigned char **out_pt, size_t *out_len, int *out_type)
{
    (void)s, (void)c, (void)next_key, (void)wire, (void)wire_len, (void)seq, (void)out_pt,
        (void)out_len, (void)out_type;
    return -1; /* never reached: no key is set up for probes */
}

int utls_next_key_setup(SSL *s, utls_conn *c)
{
    (void)s, (void)c;
    return 0;
}

int UTLS_read_record(SSL *s, void *buf, size_t len, size_t *out_read,
                     UTLS_RECORD_INFO *out_info)
{
    int ret;

    if (s == NULL)
        return 0;
    ret = SSL_read_ex(s, buf, len, out_read);
    /* No metadata is kept on this base (as with the mode off on 3.0). */
    if (ret > 0 && out_info != NULL)
        memset(out_info, 0, sizeof(*out_info));
    return ret;
}
