/*
 * Explicit record numbers, negotiated under encryption (uTLS ERN v1).
 * The protocol is docs/ern.md; this file is its 3.0 glue for TLS 1.3 and
 * for TLS 1.2 with AES-GCM and AES-CBC: where the TLS 1.2 offer is looked
 * for, the write hooks and the in-order read hooks. The parts both bases
 * share (the TLS 1.2 offer itself among them) are in lib/glue/ern_neg.c,
 * the pure parts in lib/ern/.
 *
 * This code handles secrets: the exporter value and tokens derived from it,
 * and raw traffic keys for the one-block candidate test. All are wiped when
 * no longer needed.
 */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include "glue_local.h"
/* The big-endian helpers (core/, one copy for the fork and the provider). */
#include "utls/be64.h"

/* --- The TLS 1.2 offer (lib/glue/ern_neg.c): where this base's record code is -- */

void utls_ern_tls12_record_done(SSL *s, const SSL3_RECORD *rr)
{
    utls_conn *c;
    int kind;

    if (s->server || rr->type != SSL3_RT_HANDSHAKE
        || (kind = utls_ern_tls12_kind(s, s->enc_read_ctx)) == 0 || (c = utls_conn_get(s)) == NULL
        || c->ern.tls12_checked)
        return;
    /* Only the first record under the read key (sequence number 0, counted
     * by decryption already): the server's Finished. */
    if (utls_load_be64(RECORD_LAYER_get_read_sequence(&s->rlayer)) != 1)
        return;
    utls_ern_tls12_offer_check(s, c, kind, rr->data);
}

/* --- Sending ----------------------------------------------------------------- */

int utls_hook_write_prefix(SSL *s, WPACKET *pkt, int type, size_t pipe, size_t *out_len)
{
    utls_conn *c = s->utls;

    *out_len = 0;
    if (c == NULL || type != SSL3_RT_APPLICATION_DATA || SSL_in_init(s))
        return 1;
    /* The number the record is encrypted under: this record's sequence. */
    return utls_ern_put_prefix(c, pkt,
                               utls_load_be64(RECORD_LAYER_get_write_sequence(&s->rlayer)) + pipe,
                               out_len);
}

int UTLS_ern_flush(SSL *s)
{
    utls_conn *c;
    size_t zero = 0, written;
    int r;

    if (s == NULL || (c = s->utls) == NULL)
        return 1;
    if (c->ern.flush_pending) {
        /* A flush that could not be written at once: same buffer, same length. */
        r = ssl3_write_pending(s, SSL3_RT_APPLICATION_DATA, c->ern.flush_buf, 0, &written);
    } else {
        if (c->ern.token_due == 0 || SSL_in_init(s) || s->rlayer.wbuf[0].left != 0)
            return 1;
        /* An application record with no content: just the owed message and
         * the record's number. */
        r = do_ssl3_write(s, SSL3_RT_APPLICATION_DATA, c->ern.flush_buf, &zero, 1, 0, &written);
    }
    c->ern.flush_pending = r <= 0 && SSL_want_write(s);
    return r > 0;
}

/* --- Sealing: this base's record writer (lib/glue/ern_seal.c) --------------- */

uint64_t utls_ern_write_seq(SSL *s)
{
    return utls_load_be64(RECORD_LAYER_get_write_sequence(&s->rlayer));
}

int utls_ern_padding_on(SSL *s)
{
    return SSL_IS_TLS13(s) && (s->record_padding_cb != NULL || s->block_padding > 0);
}

int utls_ern_seal_build(SSL *s, const void *buf, size_t len, unsigned char *out, size_t out_cap,
                        size_t *out_written)
{
    SSL3_BUFFER *wb;
    size_t pipelen = len, written = 0;

    /* do_ssl3_write() with |create_empty_fragment| builds one record in the
     * write buffer and returns without writing it (OpenSSL uses this for
     * its CBC empty fragments). */
    if (do_ssl3_write(s, SSL3_RT_APPLICATION_DATA, buf, &pipelen, 1, 1, &written) <= 0)
        return 0;
    wb = &s->rlayer.wbuf[0];
    if (written > out_cap) {
        SSLfatal(s, SSL_AD_INTERNAL_ERROR, ERR_R_INTERNAL_ERROR);
        return 0;
    }
    memcpy(out, SSL3_BUFFER_get_buf(wb) + SSL3_BUFFER_get_offset(wb), written);
    SSL3_BUFFER_set_offset(wb, 0);
    SSL3_BUFFER_set_left(wb, 0);
    *out_written = written;
    return 1;
}

int utls_ern_sealed_start(SSL *s, const unsigned char *rec, size_t len)
{
    SSL3_BUFFER *wb;

    if (s->rlayer.numwpipes == 0 && !ssl3_setup_write_buffer(s, 1, 0))
        return 0;
    wb = &s->rlayer.wbuf[0];
    if (len > SSL3_BUFFER_get_len(wb)) {
        utls_raise(UTLS_R_ERN_BAD_ARGUMENT, "%zu bytes do not fit the write buffer", len);
        return 0;
    }
    memcpy(SSL3_BUFFER_get_buf(wb), rec, len);
    SSL3_BUFFER_set_offset(wb, 0);
    SSL3_BUFFER_set_left(wb, len);
    s->rlayer.wpend_tot = len;
    s->rlayer.wpend_buf = s->utls->ern.flush_buf; /* ours: SSL_write() cannot resume it */
    s->rlayer.wpend_type = SSL3_RT_APPLICATION_DATA;
    s->rlayer.wpend_ret = len;
    return 1;
}

int utls_ern_sealed_write(SSL *s, size_t len)
{
    size_t written;

    return ssl3_write_pending(s, SSL3_RT_APPLICATION_DATA, s->utls->ern.flush_buf, len,
                              &written) > 0;
}

/* --- Receiving in order ------------------------------------------------------ */

int utls_ern_inorder(SSL *s, utls_conn *c, SSL3_RECORD *rr, uint64_t seq)
{
    const unsigned char *pt = rr->data;
    size_t len = rr->length;
    int r = utls_ern_inorder_data(s, c, &pt, &len, seq);

    if (r < 0) {
        /* A numbered record whose number is not the sequence number counted:
         * the authenticated sender lied. */
        SSLfatal(s, SSL_AD_DECODE_ERROR, SSL_R_BAD_RECORD_TYPE);
        return 0;
    }
    rr->data = (unsigned char *)pt;
    rr->length = len;
    return 1;
}

/* --- Receiving out of order: the one-block test ------------------------------ */

/*
 * utls_ern_keys_setup derives the raw key and IV of the current read key (or,
 * with |next|, the one a TLS 1.3 KeyUpdate would install) into |k|, for the
 * one-block test; for TLS 1.2 AES-GCM and AES-CBC it uses the key kept at the key change
 * (utls_hook_tls12_key_set). Returns 1 on success.
 */
int utls_ern_keys_setup(SSL *s, utls_ern_keys *k, int next)
{
    const EVP_CIPHER *ciph = s->s3.tmp.new_sym_enc;
    unsigned char key[EVP_MAX_KEY_LENGTH];
    size_t keylen;
    int ok = 0;

    k->valid = 0;
    if (ciph == NULL)
        return 0;
    /* TLS 1.2: the key kept at the key change. No KeyUpdate in TLS 1.2, so
     * no next key. */
    if (!SSL_IS_TLS13(s))
        return !next && utls_ern_tls12_keys_setup(s, k, s->enc_read_ctx);
    if ((k->kind = utls_ern_tls13_kind(ciph)) == 0
        || !utls_tls13_read_key(s, next, key, &keylen, k->iv) || keylen > sizeof(k->key))
        goto end;
    if (!utls_ern_keys_init(s, k, key, keylen))
        goto end;
    ok = 1;
end:
    OPENSSL_cleanse(key, sizeof(key));
    return ok;
}

static void set_read_seq(SSL *s, uint64_t v)
{
    utls_store_be64(RECORD_LAYER_get_read_sequence(&s->rlayer), v);
}

int utls_hook_ern_pre_decrypt(SSL *s, SSL3_RECORD *rr)
{
    utls_conn *c = s->utls;
    const unsigned char *wire = RECORD_LAYER_get_packet(&s->rlayer);
    size_t wire_len = SSL3_RT_HEADER_LENGTH + rr->length;
    uint64_t ctr, hint = 0, n = 0;
    int have_hint;

    if (c == NULL || !c->ern.rx || rr->type != SSL3_RT_APPLICATION_DATA
        || rr->rec_version == SSL2_VERSION)
        return 1;
    ctr = utls_load_be64(RECORD_LAYER_get_read_sequence(&s->rlayer));
    /* Without a key (no test possible) the search leaves the counted
     * number: in sequence order, as before. */
    if (!c->ern.cur.valid)
        (void)utls_ern_keys_setup(s, &c->ern.cur, 0);
    have_hint = (s->mode & SSL_MODE_UNORDERED) != 0
                && utls_ern_hint_find(c, c->inorder.cur_offset, &hint);
    switch (utls_ern_rx_find(c, &c->ern.cur, wire, wire_len, ctr, have_hint, hint, &n)) {
    case UTLS_ERN_RX_FOUND:
        set_read_seq(s, n);
        return 1;
    case UTLS_ERN_RX_REPLAY:
        utls_raise(UTLS_R_ERN_REPLAY, "record number %llu", (unsigned long long)n);
        SSLfatal_alert(s, SSL_AD_DECODE_ERROR);
        return 0;
    case UTLS_ERN_RX_OUTSIDE:
        utls_raise(UTLS_R_ERN_OUT_OF_WINDOW, "record number %llu, highest seen + 1 = %llu",
                   (unsigned long long)n, (unsigned long long)ctr);
        SSLfatal_alert(s, SSL_AD_DECODE_ERROR);
        return 0;
    default:
        return 1;
    }
}

/* Between records the read sequence is the highest number seen + 1: a
 * sender that does not reorder is then checked in sequence. */
void utls_ern_rx_done(SSL *s, utls_conn *c, uint64_t seq)
{
    if (utls_ern_window_note(c, seq))
        set_read_seq(s, c->ern.rx_next);
}
