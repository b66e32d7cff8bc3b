/*
 * Trial decryption of a record found out of order, on the 3.5 base.
 *
 * TLS 1.1/1.2 records are checked by the read record layer's own functions
 * on a copy of the record (probe12). For TLS 1.3 the check is the one 3.5's
 * record layer makes (ssl/record/methods/
 * tls13_meth.c, tls13_cipher() and tls13_post_process_record()), with the
 * same EVP calls in the same order and the same values (RFC 8446 5.2-5.3:
 * nonce = static IV XOR the padded sequence number, additional data = the
 * record header, the tag at the end), made on the connection's private copy
 * of the read cipher context (a failed tag must not touch the record
 * layer's) with the candidate's number. Nothing of the connection is
 * changed, so nothing needs restoring; errors a failed check pushed are
 * removed: a failure out of order is soft.
 *
 * This code handles secrets (the keyed context copy, plaintext in scratch,
 * the next key generation's key).
 */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/provider.h>

#include "glue_local.h"
#include "record/methods/recmethod_local.h" /* OSSL_RECORD_LAYER */

#include "utls/be64.h"

int utls_next_key_setup(SSL *s, utls_conn *c)
{
    /* RFC 8446 7.2: application_traffic_secret_N+1 =
     *     HKDF-Expand-Label(application_traffic_secret_N, "traffic upd", "", Hash.length) */
    static const unsigned char label[] = "traffic upd";
    SSL_CONNECTION *sc = UTLS_SC(s);
    const EVP_MD *md;
    const EVP_CIPHER *ciph;
    const unsigned char *insecret;
    unsigned char secret[EVP_MAX_MD_SIZE], key[EVP_MAX_KEY_LENGTH];
    size_t hashlen, keylen, ivlen, taglen = 0;
    int l, ok = 0;

    c->rx.next.valid = 0;
    if (sc == NULL || c->probe.tls13_taglen == 0)
        return 0;
    md = ssl_handshake_md(sc);
    ciph = sc->s3.tmp.new_sym_enc;
    insecret = sc->server ? sc->client_app_traffic_secret : sc->server_app_traffic_secret;
    if (md == NULL || ciph == NULL || (l = EVP_MD_get_size(md)) <= 0)
        return 0;
    hashlen = (size_t)l;
    keylen = (size_t)EVP_CIPHER_get_key_length(ciph);
    ivlen = c->probe.tls13_ivlen;
    if (c->probe.tls13_ccm)
        taglen = c->probe.tls13_taglen;
    if (keylen > sizeof(key) || ivlen > sizeof(c->rx.next.iv))
        return 0;
    if (c->rx.next.ctx == NULL && (c->rx.next.ctx = EVP_CIPHER_CTX_new()) == NULL)
        return 0;
    /* The same derivation as tls13_update_key(), argument for argument, and
     * the same context setup as tls13_set_crypto_state() for reading. */
    if (!tls13_hkdf_expand(sc, md, insecret, label, sizeof(label) - 1, NULL, hashlen, secret,
                           hashlen, 0)
        || !tls13_derive_key(sc, md, secret, key, keylen)
        || !tls13_derive_iv(sc, md, secret, c->rx.next.iv, ivlen))
        goto end;
    if (EVP_CipherInit_ex(c->rx.next.ctx, ciph, NULL, NULL, NULL, 0) <= 0
        || EVP_CIPHER_CTX_ctrl(c->rx.next.ctx, EVP_CTRL_AEAD_SET_IVLEN, (int)ivlen, NULL) <= 0
        || (taglen != 0
            && EVP_CIPHER_CTX_ctrl(c->rx.next.ctx, EVP_CTRL_AEAD_SET_TAG, (int)taglen, NULL) <= 0)
        || EVP_CipherInit_ex(c->rx.next.ctx, NULL, NULL, key, NULL, 0) <= 0)
        goto end;
    c->probe.next_ivlen = ivlen;
    c->rx.next.valid = 1;
    ok = 1;
end:
    OPENSSL_cleanse(secret, sizeof(secret));
    OPENSSL_cleanse(key, sizeof(key));
    return ok;
}

void utls_probe13_setup(SSL *s, utls_conn *c)
{
    const OSSL_RECORD_LAYER *rl = utls_rl35(UTLS_SC(s));
    int ivlen;

    c->probe.tls13_taglen = 0;
    c->probe.tls13_ccm = 0;
    if (rl == NULL || rl->version != TLS1_3_VERSION || rl->enc_ctx == NULL
        || rl->mac_ctx != NULL || rl->iv == NULL
        || (ivlen = EVP_CIPHER_CTX_get_iv_length(rl->enc_ctx)) < SEQ_NUM_SIZE
        || ivlen > EVP_MAX_IV_LENGTH || rl->taglen == 0 || rl->taglen > EVP_MAX_AEAD_TAG_LENGTH)
        return;
    /* The tag length the record layer took from the suite. */
    c->probe.tls13_taglen = rl->taglen;
    c->probe.tls13_ccm = EVP_CIPHER_CTX_get_mode(rl->enc_ctx) == EVP_CIPH_CCM_MODE;
    c->probe.tls13_ivlen = (size_t)ivlen;
}

/*
 * probe13_inner finds the content type of the decrypted inner plaintext
 * |pt| (|len| bytes; RFC 8446 5.4: the last non-zero byte) and checks it
 * and the length as tls13_post_process_record() does. Returns 1 and sets
 * the outputs if the record is one uTLS may deliver, 0 otherwise.
 */
static int probe13_inner(const unsigned char *pt, size_t len, const unsigned char **out_pt,
                         size_t *out_len, int *out_type)
{
    size_t end;
    int type;

    if (len == 0)
        return 0;
    for (end = len - 1; end > 0 && pt[end] == 0; end--)
        continue;
    type = pt[end];
    if ((type != SSL3_RT_APPLICATION_DATA && type != SSL3_RT_ALERT
         && type != SSL3_RT_HANDSHAKE)
        || end > SSL3_RT_MAX_PLAIN_LENGTH)
        return 0;
    *out_pt = pt;
    *out_len = end;
    *out_type = type;
    return 1;
}

/*
 * probe13 decrypts TLS 1.3 record |wire| (|wire_len| bytes, header included)
 * as number |seq| into |out| with context |ctx| (keyed for reading) and
 * static IV |static_iv| (|ivlen| bytes), as tls13_cipher() does. Returns the
 * inner plaintext's length (content type and padding included) plus one if
 * the tag verifies, 0 otherwise.
 */
static size_t probe13(const utls_conn *c, EVP_CIPHER_CTX *ctx, const unsigned char *static_iv,
                      size_t ivlen, const unsigned char *wire, size_t wire_len, uint64_t seq,
                      unsigned char *out)
{
    unsigned char iv[EVP_MAX_IV_LENGTH];
    size_t taglen = c->probe.tls13_taglen, ctlen = wire_len - SSL3_RT_HEADER_LENGTH, off;
    int lenu, lenf, ok;

    /* tls13_cipher(): at least one byte of content type besides the tag;
     * the sequence number must not wrap when it counts this record. */
    if (ctlen < taglen + 1 || seq == UINT64_MAX || ivlen < SEQ_NUM_SIZE || ivlen > sizeof(iv))
        return 0;
    ctlen -= taglen;
    off = ivlen - SEQ_NUM_SIZE;
    memcpy(iv, static_iv, off);
    utls_store_be64(iv + off, utls_load_be64(static_iv + off) ^ seq);
    /* The header is the additional data: on the wire it says ctlen + taglen,
     * exactly what tls13_cipher() writes back into its own copy. */
    ok = EVP_CipherInit_ex(ctx, NULL, NULL, NULL, iv, 0) > 0
        && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, (int)taglen,
                               (void *)(wire + wire_len - taglen)) > 0
        && (!c->probe.tls13_ccm || EVP_CipherUpdate(ctx, NULL, &lenu, NULL, (int)ctlen) > 0)
        && EVP_CipherUpdate(ctx, NULL, &lenu, wire, SSL3_RT_HEADER_LENGTH) > 0
        && EVP_CipherUpdate(ctx, out, &lenu, wire + SSL3_RT_HEADER_LENGTH, (int)ctlen) > 0
        && EVP_CipherFinal_ex(ctx, out + lenu, &lenf) > 0
        && (size_t)lenu + (size_t)lenf == ctlen;
    OPENSSL_cleanse(iv, sizeof(iv));
    return ok ? ctlen + 1 : 0;
}

/*
 * probe12 checks TLS 1.1/1.2 record |wire| (|wire_len| bytes, header
 * included) as number |seq| with the read record layer's own functions, in
 * the order tls_get_more_records() calls them (encrypt-then-MAC check,
 * decryption, MAC-then-encrypt check, the plaintext bound), on a copy of the
 * record in c->rx.scratch. For the duration of the call the record layer's
 * cipher context is the private copy and its sequence number the
 * candidate's; both are put back, and so is its alert: a check that fails
 * on the data returns 0 without RLAYERfatal() (tls1_cipher(), tls1_mac());
 * one that set an alert (an internal error) returns -1. Every cipher sets
 * its nonce or IV per record, so one copy of the context serves every probe.
 */
static int probe12(utls_conn *c, OSSL_RECORD_LAYER *rl, const unsigned char *wire,
                   size_t wire_len, uint64_t seq, const unsigned char **out_pt, size_t *out_len,
                   int *out_type)
{
    TLS_RL_RECORD rec;
    SSL_MAC_BUF macbuf;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned char saved_seq[SEQ_NUM_SIZE];
    EVP_CIPHER_CTX *saved_ctx = rl->enc_ctx;
    int saved_alert = rl->alert, ok = 0, imac;
    size_t mac_size = 0;

    memset(&rec, 0, sizeof(rec));
    memset(&macbuf, 0, sizeof(macbuf));
    rec.type = wire[0];
    rec.rec_version = ((unsigned int)wire[1] << 8) | wire[2];
    rec.length = rec.orig_len = wire_len - SSL3_RT_HEADER_LENGTH;
    memcpy(c->rx.scratch, wire, wire_len);
    rec.input = rec.data = c->rx.scratch + SSL3_RT_HEADER_LENGTH;
    memcpy(saved_seq, rl->sequence, SEQ_NUM_SIZE);
    utls_store_be64(rl->sequence, seq);
    rl->enc_ctx = c->probe.ctx;
    ERR_set_mark();
    if (rl->md_ctx != NULL && EVP_MD_CTX_get0_md(rl->md_ctx) != NULL) {
        imac = EVP_MD_get_size(EVP_MD_CTX_get0_md(rl->md_ctx));
        if (imac <= 0 || imac > EVP_MAX_MD_SIZE)
            goto done;
        mac_size = (size_t)imac;
    }
    if (rl->use_etm && rl->md_ctx != NULL) {
        const unsigned char *mac;

        if (rec.length < mac_size)
            goto done;
        rec.length -= mac_size;
        mac = rec.data + rec.length;
        if (rl->funcs->mac(rl, &rec, md, 0) == 0 || CRYPTO_memcmp(md, mac, mac_size) != 0)
            goto done;
        mac_size = 0;
        utls_store_be64(rl->sequence, seq); /* the MAC counted the record */
    }
    if (rl->funcs->cipher(rl, &rec, 1, 0, mac_size > 0 ? &macbuf : NULL, mac_size) == 0)
        goto done;
    if (mac_size > 0) {
        /* MAC-then-encrypt: the padding and MAC were removed in constant
         * time; the MAC is checked over the candidate sequence number. */
        utls_store_be64(rl->sequence, seq);
        if (macbuf.mac == NULL || rl->funcs->mac(rl, &rec, md, 0) == 0
            || CRYPTO_memcmp(md, macbuf.mac, mac_size) != 0
            || rec.length > SSL3_RT_MAX_COMPRESSED_LENGTH + mac_size)
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
    memcpy(rl->sequence, saved_seq, SEQ_NUM_SIZE);
    rl->enc_ctx = saved_ctx;
    if (rl->alert != saved_alert) {
        rl->alert = saved_alert; /* an internal error inside the probe: never expected */
        return -1;
    }
    return ok;
}

int utls_probe(SSL *s, utls_conn *c, int next_key, const unsigned char *wire, size_t wire_len,
               uint64_t seq, const unsigned char **out_pt, size_t *out_len, int *out_type)
{
    SSL_CONNECTION *sc = UTLS_SC(s);
    const OSSL_RECORD_LAYER *rl = utls_rl35(sc);
    unsigned char *out;
    size_t got;
    int ok = 0, mark = !c->probe.quiet_failure;

    if (sc == NULL || rl == NULL || wire_len < SSL3_RT_HEADER_LENGTH
        || wire_len > UTLS_SCRATCH_LEN || wire[0] != SSL3_RT_APPLICATION_DATA
        || (next_key ? !c->rx.next.valid : !c->probe.ctx_valid) || utls_rx_scratch(c) == NULL)
        return 0;
    if (rl->version != TLS1_3_VERSION)
        return next_key ? 0 : probe12(c, (OSSL_RECORD_LAYER *)rl, wire, wire_len, seq, out_pt,
                                      out_len, out_type);
    if (rl->iv == NULL || c->probe.tls13_taglen == 0)
        return 0;
    out = c->rx.scratch + SSL3_RT_HEADER_LENGTH;
    if (mark)
        ERR_set_mark();
    got = probe13(c, next_key ? c->rx.next.ctx : c->probe.ctx,
                  next_key ? c->rx.next.iv : rl->iv,
                  next_key ? c->probe.next_ivlen : c->probe.tls13_ivlen, wire, wire_len, seq, out);
    if (got > 0)
        ok = probe13_inner(out, got - 1, out_pt, out_len, out_type);
    if (mark)
        ERR_pop_to_mark();
    return ossl_statem_in_error(sc) ? -1 : ok;
}
