/*
 * Explicit record numbers (docs/ern.md) on the 3.5 base: the glue that
 * drives 3.5's record layer (OSSL_RECORD_METHOD, ssl/record/methods/). The
 * negotiation itself (tokens, the NewSessionTicket offer, the prefix written
 * and stripped) is lib/glue/ern_neg.c, compiled for both bases; the pure
 * parts (the one-block test, the receive window, hints) are lib/ern/.
 *
 * TLS 1.3, and TLS 1.2 with AES-GCM and AES-CBC. The TLS 1.2 offer rides in
 * a field the server chooses in its Finished (the AES-GCM explicit nonce
 * start, the AES-CBC explicit IV): patch 0010 passes the new TLS 1.2 record
 * layer's keys to utls_hook35_tls12_key_set() (the offer itself is
 * lib/glue/ern_neg.c's, shared with 3.0) and tls1_cipher()'s explicit IV to
 * utls_hook_tls12_cbc_iv(); a client looks for it in the first record its
 * new read layer returns (utls_hook35_ern_record()).
 *
 * 3.5's record layer writes and reads records with its own sequence
 * numbers (OSSL_RECORD_LAYER.sequence), so the hooks are inside it:
 * tls_write_records_default() puts the prefix in front of the plaintext
 * (patch 0008), tls_get_more_records() decrypts a record under the number
 * it carries (patch 0007); ssl3_read_bytes() hands every record read in
 * order to utls_hook35_ern_record() (patch 0007), which strips the prefix
 * and moves the receive window. Sealing (lib/glue/ern_seal.c, shared) builds
 * a record with the record method's writer and leaves it unwritten; patch
 * 0009 holds other records, key changes and closing back while sealed
 * records are unwritten, as 3.0's 0013-0014 do.
 *
 * This code handles secrets: raw read keys for the one-block test (wiped
 * with the connection, lib/common/conn.c).
 */
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>

#include "glue_local.h"
#include "record/methods/recmethod_local.h" /* OSSL_RECORD_LAYER, TLS_RL_RECORD */

/* The big-endian helpers (core/). */
#include "utls/be64.h"

/* --- Keys ------------------------------------------------------------------ */

/* ern_version: |rl| protects records ERN can number: TLS 1.3, or TLS 1.2
 * (which cipher: utls_ern_tls12_kind(); DTLS is never negotiated). */
static int ern_version(const OSSL_RECORD_LAYER *rl)
{
    return rl->version == TLS1_3_VERSION || rl->version == TLS1_2_VERSION;
}

int utls_ern_keys_setup(SSL *s, utls_ern_keys *k, int next)
{
    SSL_CONNECTION *sc = UTLS_SC(s);
    const OSSL_RECORD_LAYER *rl;
    unsigned char key[EVP_MAX_KEY_LENGTH];
    size_t keylen = 0;
    int ok = 0;

    k->valid = 0;
    if (sc == NULL)
        return 0;
    /* TLS 1.2: the key kept at the key change (patch 0010); the kind from
     * the read layer's cipher. No KeyUpdate in TLS 1.2, so no next key. */
    if (!SSL_CONNECTION_IS_TLS13(sc))
        return !next && (rl = utls_rl35(sc)) != NULL
               && utls_ern_tls12_keys_setup(s, k, rl->enc_ctx);
    if (sc->s3.tmp.new_sym_enc == NULL
        || (k->kind = utls_ern_tls13_kind(sc->s3.tmp.new_sym_enc)) == 0
        || !utls_tls13_read_key(s, next, key, &keylen, k->iv))
        goto end;
    ok = utls_ern_keys_init(s, k, key, keylen);
end:
    OPENSSL_cleanse(key, sizeof(key));
    return ok;
}

/* --- TLS 1.2: the keys and the offer (patch 0010) ----------------------------- */

int utls_hook35_tls12_key_set(SSL_CONNECTION *sc, int direction, const unsigned char *key,
                              size_t key_len, const unsigned char *iv, size_t iv_len)
{
    int read = direction == OSSL_RECORD_DIRECTION_READ;
    const OSSL_RECORD_METHOD *meth = read ? sc->rlayer.rrlmethod : sc->rlayer.wrlmethod;
    OSSL_RECORD_LAYER *rl = read ? sc->rlayer.rrl : sc->rlayer.wrl;

    /* 3.5's own record method only: under KTLS's the kernel encrypts and
     * decrypts, so a server offers nothing and a client looks for nothing
     * (legacy, as on 3.0 where KTLS copies the state it is given). */
    if (meth != &ossl_tls_record_method || rl == NULL || rl->version != TLS1_2_VERSION
        || rl->enc_ctx == NULL)
        return 1;
    return utls_hook_tls12_key_set(SSL_CONNECTION_GET_SSL(sc), read ? SSL3_CC_READ : SSL3_CC_WRITE,
                                   rl->enc_ctx, key, key_len, iv, iv_len);
}

/*
 * tls12_offer: a TLS 1.2 client's read layer |rl| returned the handshake
 * record |rr|. When it is the first record under the new read key (the
 * server's Finished: sequence number 0, counted by decryption already), the
 * offer is looked for just before its plaintext, which the record method
 * decrypted in place after the explicit nonce or IV block (lib/glue/ern_neg.c).
 */
static void tls12_offer(SSL_CONNECTION *sc, utls_conn *c, const OSSL_RECORD_LAYER *rl,
                        const TLS_RECORD *rr)
{
    SSL *s = SSL_CONNECTION_GET_SSL(sc);
    int kind = utls_ern_tls12_kind(s, rl->enc_ctx);

    if (kind == 0 || utls_load_be64(rl->sequence) != 1 || rr->off != 0)
        return;
    utls_ern_tls12_offer_check(s, c, kind, rr->data);
}

/* --- Sending (patch 0008) -------------------------------------------------- */

int utls_hook35_ern_write_prefix(OSSL_RECORD_LAYER *rl, WPACKET *pkt, int type, size_t pipe,
                                 TLS_RL_RECORD *wr, size_t *out_len)
{
    SSL_CONNECTION *sc = rl->cbarg;
    utls_conn *c = sc != NULL ? sc->utls : NULL;

    *out_len = 0;
    if (c == NULL || type != SSL3_RT_APPLICATION_DATA || !ern_version(rl)
        || sc->rlayer.wrl != rl || SSL_in_init(SSL_CONNECTION_GET_SSL(sc)))
        return 1;
    /* An empty record (UTLS_ern_flush) has no room reserved for content:
     * the record's data starts here. */
    if (wr->data == NULL)
        wr->data = WPACKET_get_curr(pkt);
    /* The number the record is encrypted under: this record's sequence. */
    return utls_ern_put_prefix(c, pkt, utls_load_be64(rl->sequence) + pipe, out_len);
}

int UTLS_ern_flush(SSL *s)
{
    SSL_CONNECTION *sc = UTLS_SC(s);
    utls_conn *c = sc != NULL ? sc->utls : NULL;
    OSSL_RECORD_TEMPLATE tmpl;
    int r;

    if (c == NULL)
        return 1;
    if (c->ern.flush_pending) {
        /* A flush that could not be written at once: the record layer holds
         * the rest of the record. */
        r = HANDLE_RLAYER_WRITE_RETURN(sc, sc->rlayer.wrlmethod->retry_write_records(
                                               sc->rlayer.wrl));
    } else {
        if (c->ern.token_due == 0 || SSL_in_init(s) || RECORD_LAYER_write_pending(&sc->rlayer))
            return 1;
        /* An application record with no content: just the owed message and
         * the record's number (ssl3_write_bytes() writes nothing for 0
         * bytes, so the record layer is asked directly, as it does). */
        memset(&tmpl, 0, sizeof(tmpl));
        tmpl.type = SSL3_RT_APPLICATION_DATA;
        /* RFC 8446 5.1: legacy_record_version */
        tmpl.version = sc->version == TLS1_3_VERSION ? TLS1_2_VERSION : sc->version;
        tmpl.buf = c->ern.flush_buf;
        tmpl.buflen = 0;
        sc->rwstate = SSL_NOTHING;
        r = HANDLE_RLAYER_WRITE_RETURN(sc, sc->rlayer.wrlmethod->write_records(sc->rlayer.wrl,
                                                                               &tmpl, 1));
    }
    c->ern.flush_pending = r <= 0 && SSL_want_write(s);
    return r > 0;
}

/* --- Receiving in order (patch 0007) --------------------------------------- */

int utls_hook35_ern_pre_decrypt(OSSL_RECORD_LAYER *rl, TLS_RL_RECORD *rr)
{
    SSL_CONNECTION *sc = rl->cbarg;
    utls_conn *c = sc->utls;
    uint64_t ctr, hint = 0, n = 0;
    int have_hint;

    if (c == NULL || !c->ern.rx || sc->rlayer.rrl != rl || !ern_version(rl)
        || rr->type != SSL3_RT_APPLICATION_DATA || rr->rec_version == SSL2_VERSION
        || rl->packet == NULL)
        return 1;
    ctr = utls_load_be64(rl->sequence);
    /* Without a key (no test possible) the search leaves the counted
     * number: in sequence order, as before. */
    if (!c->ern.cur.valid)
        (void)utls_ern_keys_setup(SSL_CONNECTION_GET_SSL(sc), &c->ern.cur, 0);
    /* The record starts where the in-order stream is (read.c notes it). */
    have_hint = (sc->mode & SSL_MODE_UNORDERED) != 0 && c->inorder.offset_known
                && utls_ern_hint_find(c, c->inorder.next_offset, &hint);
    switch (utls_ern_rx_find(c, &c->ern.cur, rl->packet, SSL3_RT_HEADER_LENGTH + rr->length, ctr,
                             have_hint, hint, &n)) {
    case UTLS_ERN_RX_FOUND:
        /* The number the record is decrypted and authenticated under: TLS
         * 1.3's nonce, TLS 1.2's additional data or MAC. */
        utls_store_be64(rl->sequence, n);
        return 1;
    case UTLS_ERN_RX_REPLAY:
        utls_raise(UTLS_R_ERN_REPLAY, "record number %llu", (unsigned long long)n);
        break;
    case UTLS_ERN_RX_OUTSIDE:
        utls_raise(UTLS_R_ERN_OUT_OF_WINDOW, "record number %llu, highest seen + 1 = %llu",
                   (unsigned long long)n, (unsigned long long)ctr);
        break;
    default:
        return 1;
    }
    /* The alert the connection fails with (ssl3_read_bytes() sends it);
     * the reason is the uTLS one raised above. */
    rl->alert = SSL_AD_DECODE_ERROR;
    return 0;
}

int utls_hook35_ern_record(SSL_CONNECTION *sc, TLS_RECORD *rr)
{
    SSL *s = SSL_CONNECTION_GET_SSL(sc);
    utls_conn *c = sc->utls;
    OSSL_RECORD_LAYER *rl;
    TLS_RL_RECORD *rec = rr->rechandle;
    const unsigned char *pt;
    size_t len, stripped;
    uint64_t seq;

    if (c == NULL || sc->rlayer.rrlmethod != &ossl_tls_record_method
        || (rl = sc->rlayer.rrl) == NULL || rec == NULL)
        return 1;
    /* TLS 1.2: the server's offer, once per connection (patch 0010). */
    if (rr->type == SSL3_RT_HANDSHAKE && !sc->server && !c->ern.tls12_checked
        && rl->version == TLS1_2_VERSION)
        tls12_offer(sc, c, rl, rr);
    if (!c->ern.tokens_ready || !ern_version(rl))
        return 1;
    /* The record layer counted the record: it is the one before its counter
     * (one record per batch: utls_gen_setup() refuses read pipelining). */
    seq = utls_load_be64(rl->sequence) - 1;
    /* Between records the read sequence is the highest number seen + 1: a
     * sender that does not reorder is then checked in sequence. */
    if (c->ern.rx && utls_ern_window_note(c, seq))
        utls_store_be64(rl->sequence, c->ern.rx_next);
    /* An empty application record from a peer that numbers its records is
     * one read.c emptied (delivered out of order before): nothing to strip. */
    if (rr->type != SSL3_RT_APPLICATION_DATA || (c->ern.rx && rr->length == 0))
        return 1;
    pt = rr->data + rr->off;
    len = rr->length;
    switch (utls_ern_inorder_data(s, c, &pt, &len, seq)) {
    case 0:
        return 1; /* a plain record */
    case 1:
        break;
    default:
        /* A numbered record whose number is not the sequence number counted:
         * the authenticated sender lied. */
        SSLfatal(sc, SSL_AD_DECODE_ERROR, SSL_R_BAD_RECORD_TYPE);
        return 0;
    }
    /* Stripped in ssl3_read_bytes()'s copy and in the record layer's own
     * record, so that releasing what is left releases the record. */
    stripped = rr->length - len;
    rr->data = (unsigned char *)pt - rr->off;
    rr->length = len;
    rec->off += stripped;
    rec->length -= stripped;
    return 1;
}

/* --- Sealing: this base's record writer (lib/glue/ern_seal.c) --------------- */

/* wrl35: the write record layer of |sc| when it is 3.5's own TLS record
 * method, whose write buffer the sealing calls use; NULL for KTLS's. */
static OSSL_RECORD_LAYER *wrl35(SSL_CONNECTION *sc)
{
    if (sc == NULL || sc->rlayer.wrlmethod != &ossl_tls_record_method)
        return NULL;
    return sc->rlayer.wrl;
}

uint64_t utls_ern_write_seq(SSL *s)
{
    const OSSL_RECORD_LAYER *rl = wrl35(UTLS_SC(s));

    /* No number for another record method (KTLS): sealing is refused at the
     * window check, before anything is taken. */
    return rl != NULL ? utls_load_be64(rl->sequence) : UINT64_MAX;
}

int utls_ern_padding_on(SSL *s)
{
    const SSL_CONNECTION *sc = UTLS_SC(s);
    const OSSL_RECORD_LAYER *rl;

    if (sc == NULL || !SSL_CONNECTION_IS_TLS13(sc))
        return 0;
    /*
     * 3.5 hands the SSL's padding settings to a write record layer when it
     * installs the key (stock: a setting changed later applies from the next
     * key). The record is sealed under the current layer, or under a new one
     * when a KeyUpdate is owed (UTLS_ern_seal() sends it first).
     */
    rl = wrl35((SSL_CONNECTION *)sc);
    if (rl == NULL || sc->key_update != SSL_KEY_UPDATE_NONE)
        return sc->rlayer.record_padding_cb != NULL || sc->rlayer.block_padding > 0;
    return rl->padding != NULL || rl->block_padding > 0;
}

int utls_ern_seal_build(SSL *s, const void *buf, size_t len, unsigned char *out, size_t out_cap,
                        size_t *out_written)
{
    SSL_CONNECTION *sc = UTLS_SC(s);
    OSSL_RECORD_LAYER *rl = wrl35(sc);
    OSSL_RECORD_TEMPLATE tmpl;
    TLS_BUFFER *wb;
    size_t written;

    if (rl == NULL) {
        SSLfatal(sc, SSL_AD_INTERNAL_ERROR, ERR_R_INTERNAL_ERROR);
        return 0;
    }
    memset(&tmpl, 0, sizeof(tmpl));
    tmpl.type = SSL3_RT_APPLICATION_DATA;
    tmpl.version = sc->version == TLS1_3_VERSION ? TLS1_2_VERSION : sc->version;
    tmpl.buf = buf;
    tmpl.buflen = len;
    /*
     * The record method's own writer, without the write that
     * tls_write_records() does after it: the record is built (numbered,
     * padded, encrypted, counted) in the write buffer and left there, as
     * 3.0's do_ssl3_write() does for its CBC empty fragments.
     */
    if (!rl->funcs->write_records(rl, &tmpl, 1)) {
        (void)HANDLE_RLAYER_WRITE_RETURN(sc, OSSL_RECORD_RETURN_FATAL);
        return 0;
    }
    wb = &rl->wbuf[0];
    written = TLS_BUFFER_get_left(wb);
    if (written > out_cap) {
        SSLfatal(sc, SSL_AD_INTERNAL_ERROR, ERR_R_INTERNAL_ERROR);
        return 0;
    }
    memcpy(out, TLS_BUFFER_get_buf(wb) + TLS_BUFFER_get_offset(wb), written);
    TLS_BUFFER_set_left(wb, 0);
    *out_written = written;
    return 1;
}

int utls_ern_sealed_start(SSL *s, const unsigned char *rec, size_t len)
{
    SSL_CONNECTION *sc = UTLS_SC(s);
    OSSL_RECORD_LAYER *rl = wrl35(sc);
    TLS_BUFFER *wb;

    if (rl == NULL || !tls_setup_write_buffer(rl, 1, 0, 0))
        return 0;
    wb = &rl->wbuf[0];
    if (len > TLS_BUFFER_get_len(wb)) {
        utls_raise(UTLS_R_ERN_BAD_ARGUMENT, "%zu bytes do not fit the write buffer", len);
        return 0;
    }
    memcpy(TLS_BUFFER_get_buf(wb), rec, len);
    TLS_BUFFER_set_offset(wb, 0);
    TLS_BUFFER_set_left(wb, len);
    rl->nextwbuf = 0;
    /* A write is pending (RECORD_LAYER_write_pending()); not one
     * SSL_write() can resume (utls_hook_write_bytes refuses it). */
    sc->rlayer.wpend_tot = len;
    sc->rlayer.wpend_type = SSL3_RT_APPLICATION_DATA;
    sc->rlayer.wpend_buf = sc->utls->ern.flush_buf;
    return 1;
}

int utls_ern_sealed_write(SSL *s, size_t len)
{
    SSL_CONNECTION *sc = UTLS_SC(s);

    (void)len; /* the record layer keeps what is left */
    sc->rwstate = SSL_NOTHING;
    if (HANDLE_RLAYER_WRITE_RETURN(sc, sc->rlayer.wrlmethod->retry_write_records(sc->rlayer.wrl))
        <= 0)
        return 0;
    sc->rlayer.wpend_tot = 0;
    return 1;
}
