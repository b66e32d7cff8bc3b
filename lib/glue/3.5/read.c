/*
 * The receive path on the 3.5 base: in order only, for now (records read
 * in order are counted and described, patch 0004).
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
#include "record/methods/recmethod_local.h" /* OSSL_RECORD_LAYER, TLS_RL_RECORD */

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

/* record_seq: the sequence number of the record the read record layer |rl|
 * returned last. Its counter is past every record it has decrypted, and it
 * decrypts a batch (pipelining) before returning the first. */
static uint64_t record_seq(const OSSL_RECORD_LAYER *rl)
{
    uint64_t next = 0;
    size_t i;

    for (i = 0; i < SEQ_NUM_SIZE; i++)
        next = (next << 8) | rl->sequence[i];
    return next - 1 - (rl->num_recs - rl->curr_rec);
}

void utls_hook35_record_read(SSL_CONNECTION *sc, TLS_RECORD *rr)
{
    utls_conn *c = utls_conn_get(SSL_CONNECTION_GET_SSL(sc));
    const TLS_RL_RECORD *rec = rr->rechandle;

    if (c == NULL || rr->type != SSL3_RT_APPLICATION_DATA)
        return;
    c->rx.post_handshake = 1;
    /* Only 3.5's own TLS record method (not KTLS's, not DTLS's) keeps the
     * counter in OSSL_RECORD_LAYER.sequence and the ciphertext length. */
    if (sc->rlayer.rrlmethod == &ossl_tls_record_method && rec != NULL) {
        c->inorder.info.seq = record_seq(sc->rlayer.rrl);
        c->inorder.info.wire_len = SSL3_RT_HEADER_LENGTH + rec->orig_len;
    } else {
        c->inorder.info.seq = 0;
        c->inorder.info.wire_len = 0;
    }
    c->inorder.info.key_generation = c->rx.gen;
    c->inorder.info.out_of_order = 0;
    c->inorder.info.stream_offset = 0; /* not tracked on this base yet */
    /* As on 3.0 (lib/glue/inorder.c): the clock is read only in a
     * UTLS_read_record() call that asked for metadata. */
    c->inorder.info.arrival_ns = c->inorder.stamp ? utls_now_ns() : 0;
    c->inorder.info_valid = 1;
    if (rr->length > 0)
        c->stats.records_in_order++;
}

void utls_hook35_read_key_changed(SSL_CONNECTION *sc, int level)
{
    utls_conn *c = sc->utls;

    if (c == NULL || level != OSSL_RECORD_PROTECTION_LEVEL_APPLICATION)
        return;
    if (c->rx.post_handshake)
        c->rx.gen++; /* a KeyUpdate or a renegotiation */
    c->inorder.info_valid = 0;
}

int UTLS_read_record(SSL *s, void *buf, size_t len, size_t *out_read,
                     UTLS_RECORD_INFO *out_info)
{
    utls_conn *c;
    int ret;

    if (s == NULL)
        return 0;
    if ((c = utls_conn_get(s)) == NULL)
        return 0;
    c->inorder.stamp = out_info != NULL;
    ret = SSL_read_ex(s, buf, len, out_read);
    c->inorder.stamp = 0;
    if (ret > 0 && out_info != NULL) {
        if ((SSL_get_mode(s) & SSL_MODE_UNORDERED) == 0 || !c->inorder.info_valid) {
            memset(out_info, 0, sizeof(*out_info)); /* mode off: no metadata */
            return ret;
        }
        *out_info = c->inorder.info;
        if (out_info->arrival_ns == 0)
            out_info->arrival_ns = utls_now_ns(); /* decrypted unasked: now */
    }
    return ret;
}
