/*
 * Trial decryption of a record found out of order.
 *
 * The check is OpenSSL's own: the same ssl3_enc->enc and ssl3_enc->mac
 * functions, in the same order as ssl3_get_record (encrypt-then-MAC check,
 * decryption, MAC-then-encrypt check, TLS 1.3 inner type), so that a record
 * verifies out of order exactly when it would verify in order. Only the state
 * differs, and only for the duration of the call: the read sequence number is
 * the candidate, the cipher context is the connection's private copy of the
 * read context (see utls_conn_st.probe_ctx; a failed tag must not touch the
 * real one), and the record is a copy in c->scratch. Every cipher sets its
 * nonce or IV per record, so one copy serves every probe of a key. Everything is
 * restored before returning, and errors the failed check pushed are removed:
 * a failure out of order is soft.
 *
 * This code handles secrets (the keyed context copy, plaintext in scratch).
 */
#include <string.h>

#include <openssl/err.h>

#include "utls_local.h"

static void put_be64(unsigned char *p, uint64_t v)
{
    int i;

    for (i = 7; i >= 0; i--) {
        p[i] = (unsigned char)v;
        v >>= 8;
    }
}

int utls_probe(SSL *s, utls_conn *c, const unsigned char *wire, size_t wire_len, uint64_t seq,
               const unsigned char **out_pt, size_t *out_len, int *out_type)
{
    SSL3_RECORD rec;
    SSL_MAC_BUF macbuf;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned char saved_seq[SEQ_NUM_SIZE];
    unsigned char *rseq = RECORD_LAYER_get_read_sequence(&s->rlayer);
    EVP_CIPHER_CTX *saved_ctx = s->enc_read_ctx;
    size_t mac_size = 0;
    int ok = 0;

    if (wire_len < SSL3_RT_HEADER_LENGTH || wire_len > UTLS_SCRATCH_LEN || saved_ctx == NULL
        || !c->probe_ctx_valid)
        return 0;
    memcpy(c->scratch, wire, wire_len);
    memset(&rec, 0, sizeof(rec));
    memset(&macbuf, 0, sizeof(macbuf));
    rec.type = wire[0];
    rec.rec_version = ((unsigned int)wire[1] << 8) | wire[2];
    rec.length = rec.orig_len = wire_len - SSL3_RT_HEADER_LENGTH;
    rec.input = rec.data = c->scratch + SSL3_RT_HEADER_LENGTH;

    memcpy(saved_seq, rseq, SEQ_NUM_SIZE);
    put_be64(rseq, seq);
    s->enc_read_ctx = c->probe_ctx;
    ERR_set_mark();

    if (s->read_hash != NULL && EVP_MD_CTX_get0_md(s->read_hash) != NULL) {
        int imac = EVP_MD_get_size(EVP_MD_CTX_get0_md(s->read_hash));

        if (imac < 0 || imac > EVP_MAX_MD_SIZE)
            goto done;
        mac_size = (size_t)imac;
    }
    if (SSL_READ_ETM(s) && s->read_hash != NULL) {
        const unsigned char *mac;

        if (rec.length < mac_size)
            goto done;
        rec.length -= mac_size;
        mac = rec.data + rec.length;
        if (s->method->ssl3_enc->mac(s, &rec, md, 0) == 0
            || CRYPTO_memcmp(md, mac, mac_size) != 0)
            goto done;
        mac_size = 0;
        put_be64(rseq, seq); /* the MAC counted the record */
    }
    if (s->method->ssl3_enc->enc(s, &rec, 1, 0, mac_size > 0 ? &macbuf : NULL, mac_size) == 0)
        goto done;
    if (mac_size > 0) {
        /* MAC-then-encrypt: the padding and MAC were removed in constant time;
         * the MAC is checked over the candidate sequence number. */
        put_be64(rseq, seq);
        if (macbuf.mac == NULL || s->method->ssl3_enc->mac(s, &rec, md, 0) == 0
            || CRYPTO_memcmp(md, macbuf.mac, mac_size) != 0
            || rec.length > SSL3_RT_MAX_COMPRESSED_LENGTH + mac_size)
            goto done;
    }
    if (SSL_IS_TLS13(s)) {
        size_t end;

        /* RFC 8446 5.4: the inner content type is the last non-zero byte. */
        if (rec.length == 0 || rec.type != SSL3_RT_APPLICATION_DATA)
            goto done;
        for (end = rec.length - 1; end > 0 && rec.data[end] == 0; end--)
            continue;
        rec.type = rec.data[end];
        rec.length = end;
        if (rec.type != SSL3_RT_APPLICATION_DATA && rec.type != SSL3_RT_ALERT
            && rec.type != SSL3_RT_HANDSHAKE)
            goto done;
    }
    if (rec.length > SSL3_RT_MAX_PLAIN_LENGTH)
        goto done;
    *out_pt = rec.data;
    *out_len = rec.length;
    *out_type = (int)rec.type;
    ok = 1;

done:
    if (macbuf.alloced)
        OPENSSL_free(macbuf.mac);
    OPENSSL_cleanse(md, sizeof(md));
    ERR_pop_to_mark();
    memcpy(rseq, saved_seq, SEQ_NUM_SIZE);
    s->enc_read_ctx = saved_ctx;
    if (ossl_statem_in_error(s))
        return -1; /* an internal error inside the cipher code: never expected */
    return ok;
}
