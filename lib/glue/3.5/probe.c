/*
 * Trial decryption of a TLS 1.3 record found out of order, on the 3.5 base.
 *
 * The check is the one 3.5's record layer makes (ssl/record/methods/
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

int utls_probe(SSL *s, utls_conn *c, int next_key, const unsigned char *wire, size_t wire_len,
               uint64_t seq, const unsigned char **out_pt, size_t *out_len, int *out_type)
{
    SSL_CONNECTION *sc = UTLS_SC(s);
    const OSSL_RECORD_LAYER *rl = utls_rl35(sc);
    unsigned char *out;
    size_t got;
    int ok = 0, mark = !c->probe.quiet_failure;

    if (sc == NULL || rl == NULL || rl->iv == NULL || c->probe.tls13_taglen == 0
        || wire_len < SSL3_RT_HEADER_LENGTH || wire_len > UTLS_SCRATCH_LEN
        || wire[0] != SSL3_RT_APPLICATION_DATA
        || (next_key ? !c->rx.next.valid : !c->probe.ctx_valid))
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
