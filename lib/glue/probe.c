/*
 * Trial decryption of a record found out of order.
 *
 * The check is OpenSSL's own: the same ssl3_enc->enc and ssl3_enc->mac
 * functions, in the same order as ssl3_get_record (encrypt-then-MAC check,
 * decryption, MAC-then-encrypt check, TLS 1.3 inner type), so that a record
 * verifies out of order exactly when it would verify in order. Only the state
 * differs, and only for the duration of the call: the read sequence number is
 * the candidate, the cipher context is the connection's private copy of the
 * read context (see utls_conn_st.probe.ctx; a failed tag must not touch the
 * real one), and the record is a copy in c->rx.scratch. Every cipher sets its
 * nonce or IV per record, so one copy serves every probe of a key. Everything is
 * restored before returning, and errors the failed check pushed are removed:
 * a failure out of order is soft.
 *
 * TLS 1.3 application records of the AEAD suites take a direct path
 * (utls_probe13): the EVP calls tls13_enc() makes to decrypt a record, in its
 * order and with the same nonce, additional data and tag, made on the private
 * context with the candidate's number, without installing anything in the
 * SSL. tls13_enc() spends about a sixth of its instructions around those
 * calls (a WPACKET for the five header bytes, the IV length asked of the
 * provider each time); for a probe, which runs once per record delivered out
 * of order, that and the swapping in and out of the read state were
 * measurable (bench/cpu: loss2_ratio about 4 points). With AES-GCM of
 * OpenSSL's own providers the nonce is not set through EVP_CipherInit_ex()
 * either: its first four bytes are fixed per key (set once), the other eight
 * are set with the tag in one parameter call per probe
 * (utls_probe13_gcm_prime; bench/cpu: loss2_ratio about 5 points more).
 *
 * This code handles secrets (the keyed context copy, plaintext in scratch).
 */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/provider.h>

#include "glue_local.h"

/* The big-endian helpers (core/, one copy for the fork and the provider). */
#include "utls/be64.h"
#define put_be64 utls_store_be64

/* The bytes at the end of a TLS 1.3 record copied for the tag check: the
 * longest tag of a TLS 1.3 AEAD (RFC 8446 5.2: AES-GCM, ChaCha20-Poly1305,
 * AES-CCM; AES-CCM-8's is 8). */
#define UTLS_PROBE_TAIL 16

int utls_next_key_setup(SSL *s, utls_conn *c)
{
    /* RFC 8446 7.2: application_traffic_secret_N+1 =
     *     HKDF-Expand-Label(application_traffic_secret_N, "traffic upd", "", Hash.length) */
    static const unsigned char label[] = "traffic upd";
    const EVP_MD *md = ssl_handshake_md(s);
    const EVP_CIPHER *ciph = s->s3.tmp.new_sym_enc;
    const unsigned char *insecret = s->server ? s->client_app_traffic_secret
                                              : s->server_app_traffic_secret;
    unsigned char secret[EVP_MAX_MD_SIZE], key[EVP_MAX_KEY_LENGTH];
    size_t hashlen, keylen, ivlen, taglen = 0;
    int l, ok = 0;

    c->rx.next.valid = 0;
    c->probe.next_gcm_inv = UTLS_GCM_INV_UNKNOWN; /* next.ctx is keyed anew */
    if (md == NULL || ciph == NULL || (l = EVP_MD_get_size(md)) <= 0)
        return 0;
    hashlen = (size_t)l;
    keylen = (size_t)EVP_CIPHER_get_key_length(ciph);
    if (EVP_CIPHER_get_mode(ciph) == EVP_CIPH_CCM_MODE) {
        ivlen = EVP_CCM_TLS_IV_LEN;
        taglen = (s->s3.tmp.new_cipher != NULL
                  && (s->s3.tmp.new_cipher->algorithm_enc & (SSL_AES128CCM8 | SSL_AES256CCM8)))
            ? EVP_CCM8_TLS_TAG_LEN : EVP_CCM_TLS_TAG_LEN;
    } else {
        ivlen = (size_t)EVP_CIPHER_get_iv_length(ciph);
    }
    if (keylen > sizeof(key) || ivlen > sizeof(c->rx.next.iv))
        return 0;
    if (c->rx.next.ctx == NULL && (c->rx.next.ctx = EVP_CIPHER_CTX_new()) == NULL)
        return 0;
    /* The same derivation as tls13_update_key(), argument for argument. */
    if (!tls13_hkdf_expand(s, md, insecret, label, sizeof(label) - 1, NULL, hashlen, secret,
                           hashlen, 0)
        || !tls13_derive_key(s, md, secret, key, keylen)
        || !tls13_derive_iv(s, md, secret, c->rx.next.iv, ivlen))
        goto end;
    if (EVP_CipherInit_ex(c->rx.next.ctx, ciph, NULL, NULL, NULL, 0) <= 0
        || EVP_CIPHER_CTX_ctrl(c->rx.next.ctx, EVP_CTRL_AEAD_SET_IVLEN, (int)ivlen, NULL) <= 0
        || (taglen != 0
            && EVP_CIPHER_CTX_ctrl(c->rx.next.ctx, EVP_CTRL_AEAD_SET_TAG, (int)taglen, NULL) <= 0)
        || EVP_CipherInit_ex(c->rx.next.ctx, NULL, NULL, key, NULL, -1) <= 0)
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
    uint32_t alg_enc;
    int ivlen;

    c->probe.tls13_taglen = 0;
    c->probe.tls13_ccm = 0;
    if (!SSL_IS_TLS13(s) || s->s3.tmp.new_cipher == NULL || s->enc_read_ctx == NULL
        || (ivlen = EVP_CIPHER_CTX_get_iv_length(s->enc_read_ctx)) < SEQ_NUM_SIZE
        || ivlen > EVP_MAX_IV_LENGTH)
        return;
    /* The tag length exactly as tls13_enc() derives it for reading. */
    alg_enc = s->s3.tmp.new_cipher->algorithm_enc;
    if (alg_enc & SSL_AESCCM) {
        c->probe.tls13_taglen = (alg_enc & (SSL_AES128CCM8 | SSL_AES256CCM8)) ? EVP_CCM8_TLS_TAG_LEN
                                                                           : EVP_CCM_TLS_TAG_LEN;
        c->probe.tls13_ccm = 1;
    } else if (alg_enc & SSL_AESGCM) {
        c->probe.tls13_taglen = EVP_GCM_TLS_TAG_LEN;
    } else if (alg_enc & SSL_CHACHA20) {
        c->probe.tls13_taglen = EVP_CHACHAPOLY_TLS_TAG_LEN;
    }
    c->probe.tls13_ivlen = (size_t)ivlen;
}

/*
 * utls_probe13_inner finds the content type of decrypted TLS 1.3 record
 * |rec| (RFC 8446 5.4: the last non-zero byte of the inner plaintext) and
 * checks it and the length as ssl3_get_record() does. Returns 1 and sets the
 * outputs if the record is one uTLS may deliver, 0 otherwise.
 */
static int utls_probe13_inner(SSL3_RECORD *rec, const unsigned char **out_pt, size_t *out_len,
                              int *out_type)
{
    size_t end;

    if (rec->length == 0 || rec->type != SSL3_RT_APPLICATION_DATA)
        return 0;
    for (end = rec->length - 1; end > 0 && rec->data[end] == 0; end--)
        continue;
    rec->type = rec->data[end];
    rec->length = end;
    if ((rec->type != SSL3_RT_APPLICATION_DATA && rec->type != SSL3_RT_ALERT
         && rec->type != SSL3_RT_HANDSHAKE)
        || rec->length > SSL3_RT_MAX_PLAIN_LENGTH)
        return 0;
    *out_pt = rec->data;
    *out_len = rec->length;
    *out_type = (int)rec->type;
    return 1;
}

/* utls_param_octets fills |p| as OSSL_PARAM_construct_octet_string(|key|,
 * |data|, |len|) would, or as the end marker when |key| is NULL. */
static void utls_param_octets(OSSL_PARAM *p, const char *key, void *data, size_t len)
{
    p->key = key;
    p->data_type = key != NULL ? OSSL_PARAM_OCTET_STRING : 0;
    p->data = data;
    p->data_size = len;
    p->return_size = key != NULL ? OSSL_PARAM_UNMODIFIED : 0;
}

/*
 * utls_probe13_gcm_prime readies AES-GCM context |ctx|, whose static IV is
 * |static_iv| (|ivlen| bytes), for nonces set by their last eight bytes
 * alone: RFC 8446 5.3 pads the 64-bit record number on the left to the IV
 * length and XORs it in, so with a 12-byte IV the first four bytes of every
 * nonce of the key are the static IV's. They are set once here as the GCM
 * "fixed field" (OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED); each probe then sets
 * the other eight (the "invocation field", OSSL_CIPHER_PARAM_AEAD_TLS1_SET_IV_INV,
 * accepted only when decrypting) together with the tag in one
 * EVP_CIPHER_CTX_set_params() call, instead of an EVP_CipherInit_ex() with
 * the whole nonce (which asks the provider for the IV length each time) and a
 * separate EVP_CTRL_AEAD_SET_TAG. The nonce and tag are the same, so a record
 * verifies exactly when it would through tls13_enc(). Returns
 * UTLS_GCM_INV_READY, or UTLS_GCM_INV_NO if |ctx| is not AES-GCM with a
 * 12-byte IV or its provider refuses; the error queue is left as it was.
 */
static int utls_probe13_gcm_prime(EVP_CIPHER_CTX *ctx, const unsigned char *static_iv,
                                  size_t ivlen)
{
    OSSL_PARAM params[2];
    unsigned char fixed[EVP_GCM_TLS_FIXED_IV_LEN];
    const EVP_CIPHER *ciph = EVP_CIPHER_CTX_get0_cipher(ctx);
    const OSSL_PROVIDER *prov = ciph != NULL ? EVP_CIPHER_get0_provider(ciph) : NULL;
    const char *pname = prov != NULL ? OSSL_PROVIDER_get0_name(prov) : NULL;
    int ok;

    /*
     * Only OpenSSL's own GCM (ciphercommon_gcm.c in the default and FIPS
     * providers), whose handling of these parameters is known: a provider
     * may ignore a parameter it does not know and still succeed, and one that
     * ignored the invocation field would decrypt with a stale nonce.
     */
    if (ciph == NULL || pname == NULL
        || (strcmp(pname, "default") != 0 && strcmp(pname, "fips") != 0)
        || EVP_CIPHER_CTX_get_mode(ctx) != EVP_CIPH_GCM_MODE
        || ivlen != EVP_GCM_TLS_FIXED_IV_LEN + EVP_GCM_TLS_EXPLICIT_IV_LEN
        || EVP_CIPHER_CTX_is_encrypting(ctx))
        return UTLS_GCM_INV_NO;
    memcpy(fixed, static_iv, sizeof(fixed));
    params[0] = OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED, fixed,
                                                  sizeof(fixed));
    params[1] = OSSL_PARAM_construct_end();
    ERR_set_mark();
    ok = EVP_CIPHER_CTX_set_params(ctx, params) > 0;
    ERR_pop_to_mark();
    OPENSSL_cleanse(fixed, sizeof(fixed));
    return ok ? UTLS_GCM_INV_READY : UTLS_GCM_INV_NO;
}

/*
 * utls_probe13 decrypts TLS 1.3 application record |wire| (|wire_len|
 * bytes, header included) as number |seq| into rec->data, with the calls
 * tls13_enc() makes to decrypt it, in its order and with the same values
 * (RFC 8446 5.2-5.3: nonce = static IV XOR the padded sequence number,
 * additional data = the record header, the tag at the end), but on the given
 * context and IV directly: no WPACKET for five header bytes, no swapping of
 * the connection's read state in and out, and the tag read where it lies.
 * |*gcm_inv| is the context's UTLS_GCM_INV_* state (utls_probe13_gcm_prime:
 * AES-GCM sets the nonce and the tag in one call). Returns 1 and sets
 * rec->length to the inner plaintext's length (content type and padding
 * included) if the tag verifies, 0 otherwise.
 */
static int utls_probe13(utls_conn *c, EVP_CIPHER_CTX *ctx, int *gcm_inv,
                        const unsigned char *static_iv, size_t ivlen,
                        const unsigned char *wire, size_t wire_len, uint64_t seq,
                        SSL3_RECORD *rec)
{
    unsigned char iv[EVP_MAX_IV_LENGTH], aad[SSL3_RT_HEADER_LENGTH];
    size_t taglen = c->probe.tls13_taglen, ctlen = wire_len - SSL3_RT_HEADER_LENGTH, off;
    int lenu, lenf, ok, keyed;

    /* tls13_enc(): at least one byte of content type besides the tag; the
     * sequence number must not wrap when it counts this record. */
    if (ctlen < taglen + 1 || seq == UINT64_MAX || ivlen < SEQ_NUM_SIZE
        || ivlen > sizeof(iv))
        return 0;
    ctlen -= taglen;
    off = ivlen - SEQ_NUM_SIZE;
    memcpy(iv, static_iv, off);
    /* The number XORed into the IV's last eight bytes as one word (a byte
     * loop here showed in perf). */
    put_be64(iv + off, utls_load_be64(static_iv + off) ^ seq);
    aad[0] = (unsigned char)rec->type;
    aad[1] = (unsigned char)(rec->rec_version >> 8);
    aad[2] = (unsigned char)rec->rec_version;
    aad[3] = (unsigned char)((ctlen + taglen) >> 8);
    aad[4] = (unsigned char)(ctlen + taglen);
    if (*gcm_inv == UTLS_GCM_INV_UNKNOWN)
        *gcm_inv = c->probe.tls13_ccm ? UTLS_GCM_INV_NO
                                  : utls_probe13_gcm_prime(ctx, static_iv, ivlen);
    if (*gcm_inv == UTLS_GCM_INV_READY && taglen == EVP_GCM_TLS_TAG_LEN) {
        /* The tag is stored before the nonce is set (the provider handles
         * the tag parameter first); the fixed field is the static IV's. */
        OSSL_PARAM params[3];

        /* Filled in place: OSSL_PARAM_construct_*() return the structure by
         * value, three block copies that perf found in this function's
         * hottest instructions. */
        utls_param_octets(&params[0], OSSL_CIPHER_PARAM_AEAD_TAG,
                          (void *)(wire + wire_len - taglen), taglen);
        utls_param_octets(&params[1], OSSL_CIPHER_PARAM_AEAD_TLS1_SET_IV_INV,
                          iv + EVP_GCM_TLS_FIXED_IV_LEN, EVP_GCM_TLS_EXPLICIT_IV_LEN);
        utls_param_octets(&params[2], NULL, NULL, 0); /* the end marker */
        keyed = EVP_CIPHER_CTX_set_params(ctx, params) > 0;
    } else {
        /* EVP_CTRL_AEAD_SET_TAG copies the tag into the context. */
        keyed = EVP_CipherInit_ex(ctx, NULL, NULL, NULL, iv, 0) > 0
            && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, (int)taglen,
                                   (void *)(wire + wire_len - taglen)) > 0;
    }
    ok = keyed
        && (!c->probe.tls13_ccm || EVP_CipherUpdate(ctx, NULL, &lenu, NULL, (int)ctlen) > 0)
        && EVP_CipherUpdate(ctx, NULL, &lenu, aad, (int)sizeof(aad)) > 0
        && EVP_CipherUpdate(ctx, rec->data, &lenu, wire + SSL3_RT_HEADER_LENGTH, (int)ctlen) > 0
        && EVP_CipherFinal_ex(ctx, rec->data + lenu, &lenf) > 0
        && (size_t)lenu + (size_t)lenf == ctlen;
    OPENSSL_cleanse(iv, sizeof(iv));
    if (!ok)
        return 0;
    rec->length = ctlen;
    return 1;
}

int utls_probe(SSL *s, utls_conn *c, int next_key, const unsigned char *wire, size_t wire_len,
               uint64_t seq, const unsigned char **out_pt, size_t *out_len, int *out_type)
{
    SSL3_RECORD rec;
    SSL_MAC_BUF macbuf;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned char saved_seq[SEQ_NUM_SIZE];
    unsigned char *rseq = RECORD_LAYER_get_read_sequence(&s->rlayer);
    EVP_CIPHER_CTX *saved_ctx = s->enc_read_ctx;
    unsigned char saved_iv[EVP_MAX_IV_LENGTH];
    size_t mac_size = 0;
    int ok = 0, mark = !c->probe.quiet_failure;

    if (wire_len < SSL3_RT_HEADER_LENGTH || wire_len > UTLS_SCRATCH_LEN || saved_ctx == NULL
        || (next_key ? !c->rx.next.valid : !c->probe.ctx_valid) || utls_rx_scratch(c) == NULL)
        return 0;
    memset(&rec, 0, sizeof(rec));
    memset(&macbuf, 0, sizeof(macbuf));
    rec.type = wire[0];
    rec.rec_version = ((unsigned int)wire[1] << 8) | wire[2];
    rec.length = rec.orig_len = wire_len - SSL3_RT_HEADER_LENGTH;
    if (SSL_IS_TLS13(s) && rec.type == SSL3_RT_APPLICATION_DATA && c->probe.tls13_taglen != 0) {
        /* The direct path: the connection's read state is not touched. */
        rec.data = c->rx.scratch + SSL3_RT_HEADER_LENGTH;
        if (mark)
            ERR_set_mark();
        if (utls_probe13(c, next_key ? c->rx.next.ctx : c->probe.ctx,
                         next_key ? &c->probe.next_gcm_inv : &c->probe.gcm_inv,
                         next_key ? c->rx.next.iv : s->read_iv,
                         next_key ? c->probe.next_ivlen : c->probe.tls13_ivlen, wire, wire_len,
                         seq, &rec))
            ok = utls_probe13_inner(&rec, out_pt, out_len, out_type);
        if (mark)
            ERR_pop_to_mark();
        return ossl_statem_in_error(s) ? -1 : ok;
    }
    if (SSL_IS_TLS13(s) && rec.type == SSL3_RT_APPLICATION_DATA) {
        /*
         * tls13_enc() decrypts rec->input into rec->data and reads the tag
         * from the end of rec->data: the ciphertext is read where it lies
         * (the store), and only its last UTLS_PROBE_TAIL bytes, which hold
         * the tag of any TLS 1.3 AEAD, are copied. The decryption overwrites
         * the rest of scratch. Nothing writes through rec->input.
         */
        size_t tail = rec.length < UTLS_PROBE_TAIL ? rec.length : UTLS_PROBE_TAIL;

        memcpy(c->rx.scratch + wire_len - tail, wire + wire_len - tail, tail);
        rec.input = (unsigned char *)wire + SSL3_RT_HEADER_LENGTH;
        rec.data = c->rx.scratch + SSL3_RT_HEADER_LENGTH;
    } else {
        memcpy(c->rx.scratch, wire, wire_len);
        rec.input = rec.data = c->rx.scratch + SSL3_RT_HEADER_LENGTH;
    }

    memcpy(saved_seq, rseq, SEQ_NUM_SIZE);
    put_be64(rseq, seq);
    s->enc_read_ctx = next_key ? c->rx.next.ctx : c->probe.ctx;
    if (next_key) {
        /* tls13_enc() forms the nonce from s->read_iv */
        memcpy(saved_iv, s->read_iv, sizeof(saved_iv));
        memcpy(s->read_iv, c->rx.next.iv, sizeof(saved_iv));
    }
    /* A soft failure leaves the error queue as it was: with a mark, or for a
     * cipher whose failed tag check pushes nothing (probe_quiet_failure). */
    if (mark)
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
        ok = utls_probe13_inner(&rec, out_pt, out_len, out_type);
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
    if (s->read_hash != NULL) /* only MAC ciphers write |md| */
        OPENSSL_cleanse(md, sizeof(md));
    if (mark)
        ERR_pop_to_mark();
    memcpy(rseq, saved_seq, SEQ_NUM_SIZE);
    s->enc_read_ctx = saved_ctx;
    if (next_key) {
        memcpy(s->read_iv, saved_iv, sizeof(saved_iv));
        OPENSSL_cleanse(saved_iv, sizeof(saved_iv));
    }
    if (ossl_statem_in_error(s))
        return -1; /* an internal error inside the cipher code: never expected */
    return ok;
}
