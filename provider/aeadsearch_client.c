/*
 * AEAD candidate search, client side (utls/aeadsearch.h). Self-contained:
 * only libcrypto's public API, so that the fork can compile this file as it
 * is.
 *
 * Provider path: the UTLS-*-SEARCH cipher of the "utls" provider, keyed once
 * per context; per record, the candidates go in as the "utls-seqs" parameter,
 * the record through one EVP_DecryptUpdate, and EVP_DecryptFinal_ex and
 * "utls-match" say which candidate authenticated.
 *
 * EVP path: the ordinary AEAD (AES-GCM or ChaCha20-Poly1305 from whichever
 * provider the library context offers), keyed once; per candidate, the nonce
 * and the additional data are set and the record is decrypted and its tag
 * checked, stopping at the first that authenticates. Setting a new IV resets
 * the AEAD's state, so one context serves every candidate.
 *
 * This code handles secrets: the keyed contexts and the plaintext.
 */
#define _DEFAULT_SOURCE /* explicit_bzero */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "aead_layout.h"
#include "utls/be64.h"
#include "utls/aeadsearch.h"

struct utls_aead_search_st {
    int path; /* UTLS_AEAD_SEARCH_PATH_PROVIDER or _EVP */
    int kind;
    int layout;
    EVP_CIPHER_CTX *ctx; /* the search cipher, or the AEAD */
    unsigned char iv[AEAD_NONCE_LEN];
    size_t iv_len;
    unsigned char seqs_be[UTLS_AEAD_SEARCH_MAX_CANDIDATES * 8];
};

static size_t explicit_len(const UTLS_AEAD_SEARCH *s)
{
    return utls_aead_search_explicit_len(s->kind, s->layout);
}

/* Wipes secrets: like OPENSSL_cleanse, without its byte-at-a-time cost. */
static void wipe(void *p, size_t n)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 25))
    explicit_bzero(p, n);
#else
    OPENSSL_cleanse(p, n);
#endif
}

static EVP_CIPHER_CTX *provider_ctx(OSSL_LIB_CTX *libctx, const char *propq, int kind,
                                    int layout, const uint8_t *key, const uint8_t *iv,
                                    size_t iv_len)
{
    const char *name = kind == UTLS_AEAD_SEARCH_AES_128_GCM   ? UTLS_AEAD_SEARCH_AES_128_GCM_NAME
                       : kind == UTLS_AEAD_SEARCH_AES_256_GCM ? UTLS_AEAD_SEARCH_AES_256_GCM_NAME
                                                              : UTLS_AEAD_SEARCH_CHACHA20_POLY1305_NAME;
    OSSL_PARAM params[3];
    EVP_CIPHER *cipher;
    EVP_CIPHER_CTX *ctx = NULL;

    /* Not finding the provider is the normal case when it is not loaded. */
    ERR_set_mark();
    cipher = EVP_CIPHER_fetch(libctx, name, propq);
    ERR_pop_to_mark();
    if (cipher == NULL) {
        return NULL;
    }
    params[0] = OSSL_PARAM_construct_utf8_string(
        UTLS_AEAD_SEARCH_PARAM_LAYOUT, layout == UTLS_AEAD_SEARCH_TLS12 ? "tls12" : "tls13", 0);
    params[1] = OSSL_PARAM_construct_octet_string(UTLS_AEAD_SEARCH_PARAM_IV, (void *)iv, iv_len);
    params[2] = OSSL_PARAM_construct_end();
    if ((ctx = EVP_CIPHER_CTX_new()) == NULL
        || EVP_DecryptInit_ex2(ctx, cipher, key, NULL, params) <= 0) {
        EVP_CIPHER_CTX_free(ctx);
        ctx = NULL;
    }
    EVP_CIPHER_free(cipher);
    return ctx;
}

static EVP_CIPHER_CTX *evp_ctx(OSSL_LIB_CTX *libctx, const char *propq, int kind,
                               const uint8_t *key)
{
    const char *name = kind == UTLS_AEAD_SEARCH_AES_128_GCM   ? "AES-128-GCM"
                       : kind == UTLS_AEAD_SEARCH_AES_256_GCM ? "AES-256-GCM"
                                                              : "ChaCha20-Poly1305";
    EVP_CIPHER *cipher = EVP_CIPHER_fetch(libctx, name, propq);
    EVP_CIPHER_CTX *ctx = NULL;

    if (cipher == NULL) {
        return NULL;
    }
    if ((ctx = EVP_CIPHER_CTX_new()) == NULL
        || EVP_DecryptInit_ex2(ctx, cipher, key, NULL, NULL) <= 0) {
        EVP_CIPHER_CTX_free(ctx);
        ctx = NULL;
    }
    EVP_CIPHER_free(cipher);
    return ctx;
}

UTLS_AEAD_SEARCH *utls_aead_search_new(OSSL_LIB_CTX *libctx, const char *propq, int kind,
                                       int layout, const uint8_t *key, size_t key_len,
                                       const uint8_t *iv, size_t iv_len, int path)
{
    UTLS_AEAD_SEARCH *s;
    size_t want_key, want_iv;

    if (!utls_aead_search_lengths(kind, layout, &want_key, &want_iv)) {
        return NULL;
    }
    switch (path) {
    case UTLS_AEAD_SEARCH_PATH_AUTO:
    case UTLS_AEAD_SEARCH_PATH_PROVIDER:
    case UTLS_AEAD_SEARCH_PATH_EVP:
        break;
    default:
        return NULL;
    }
    if (key == NULL || iv == NULL || key_len != want_key || iv_len != want_iv) {
        return NULL;
    }
    if ((s = OPENSSL_zalloc(sizeof(*s))) == NULL) {
        return NULL;
    }
    s->kind = kind;
    s->layout = layout;
    memcpy(s->iv, iv, iv_len);
    s->iv_len = iv_len;
    if (path != UTLS_AEAD_SEARCH_PATH_EVP
        && (s->ctx = provider_ctx(libctx, propq, kind, layout, key, iv, iv_len)) != NULL) {
        s->path = UTLS_AEAD_SEARCH_PATH_PROVIDER;
        return s;
    }
    if (path != UTLS_AEAD_SEARCH_PATH_PROVIDER
        && (s->ctx = evp_ctx(libctx, propq, kind, key)) != NULL) {
        s->path = UTLS_AEAD_SEARCH_PATH_EVP;
        return s;
    }
    utls_aead_search_free(s);
    return NULL;
}

void utls_aead_search_free(UTLS_AEAD_SEARCH *s)
{
    if (s == NULL) {
        return;
    }
    EVP_CIPHER_CTX_free(s->ctx);
    OPENSSL_clear_free(s, sizeof(*s));
}

int utls_aead_search_get_path(const UTLS_AEAD_SEARCH *s)
{
    return s->path;
}

static enum utls_aead_search_result run_provider(UTLS_AEAD_SEARCH *s, uint8_t *out,
                                                 size_t *out_len, size_t *out_index,
                                                 const uint8_t *record, size_t record_len,
                                                 const uint64_t *seqs, size_t num_seqs)
{
    OSSL_PARAM params[2];
    int match = -1, l = 0, l2 = 0, final_ok;
    size_t i;

    for (i = 0; i < num_seqs; i++) {
        utls_store_be64(s->seqs_be + 8 * i, seqs[i]);
    }
    params[0] = OSSL_PARAM_construct_octet_string(UTLS_AEAD_SEARCH_PARAM_SEQS, s->seqs_be,
                                                  8 * num_seqs);
    params[1] = OSSL_PARAM_construct_end();
    if (EVP_CIPHER_CTX_set_params(s->ctx, params) <= 0
        || EVP_DecryptUpdate(s->ctx, out, &l, record, (int)record_len) <= 0) {
        return UTLS_AEAD_SEARCH_ERROR;
    }
    final_ok = EVP_DecryptFinal_ex(s->ctx, out + l, &l2) > 0;
    params[0] = OSSL_PARAM_construct_int(UTLS_AEAD_SEARCH_PARAM_MATCH, &match);
    if (EVP_CIPHER_CTX_get_params(s->ctx, params) <= 0
        || final_ok != (match >= 0) || (match >= 0 && (size_t)match >= num_seqs)) {
        return UTLS_AEAD_SEARCH_ERROR;
    }
    if (!final_ok) {
        return UTLS_AEAD_SEARCH_NOT_FOUND;
    }
    *out_len = (size_t)l + (size_t)l2;
    *out_index = (size_t)match;
    return UTLS_AEAD_SEARCH_FOUND;
}

static enum utls_aead_search_result run_evp(UTLS_AEAD_SEARCH *s, uint8_t *out, size_t *out_len,
                                            size_t *out_index, const uint8_t *record,
                                            size_t record_len, const uint64_t *seqs,
                                            size_t num_seqs)
{
    size_t ex = explicit_len(s);
    const uint8_t *c = record + UTLS_AEAD_SEARCH_HEADER_LEN + ex;
    size_t c_len = record_len - UTLS_AEAD_SEARCH_HEADER_LEN - ex - UTLS_AEAD_SEARCH_TAG_LEN;
    unsigned char nonce[AEAD_NONCE_LEN], aad[TLS12_AAD_LEN];
    const unsigned char *a = record;
    size_t a_len = UTLS_AEAD_SEARCH_HEADER_LEN, i;
    int j, l, l2;

    for (i = 0; i < num_seqs; i++) {
        if (ex != 0) {
            /* RFC 5288 3: nonce = salt || GCMNonce.nonce_explicit */
            memcpy(nonce, s->iv, TLS12_GCM_SALT_LEN);
            memcpy(nonce + TLS12_GCM_SALT_LEN, record + UTLS_AEAD_SEARCH_HEADER_LEN,
                   TLS12_GCM_EXPLICIT_LEN);
        } else {
            /* RFC 8446 5.3, RFC 7905 2: the padded sequence number XOR the iv */
            memcpy(nonce, s->iv, AEAD_NONCE_LEN);
            for (j = 0; j < 8; j++) {
                nonce[4 + j] ^= (unsigned char)(seqs[i] >> (56 - 8 * j));
            }
        }
        if (s->layout == UTLS_AEAD_SEARCH_TLS12) {
            /* RFC 5246 6.2.3.3: seq_num + type + version + length */
            utls_store_be64(aad, seqs[i]);
            aad[8] = record[0];
            aad[9] = record[1];
            aad[10] = record[2];
            aad[11] = (unsigned char)(c_len >> 8);
            aad[12] = (unsigned char)c_len;
            a = aad;
            a_len = sizeof(aad);
        }
        if (EVP_DecryptInit_ex(s->ctx, NULL, NULL, NULL, nonce) <= 0
            || EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_AEAD_SET_TAG, UTLS_AEAD_SEARCH_TAG_LEN,
                                   (void *)(c + c_len)) <= 0
            || EVP_DecryptUpdate(s->ctx, NULL, &l, a, (int)a_len) <= 0) {
            return UTLS_AEAD_SEARCH_ERROR;
        }
        l = 0;
        if (c_len > 0 && EVP_DecryptUpdate(s->ctx, out, &l, c, (int)c_len) <= 0) {
            continue;
        }
        if (EVP_DecryptFinal_ex(s->ctx, out + l, &l2) > 0) {
            *out_len = (size_t)l + (size_t)l2;
            *out_index = i;
            return UTLS_AEAD_SEARCH_FOUND;
        }
    }
    return UTLS_AEAD_SEARCH_NOT_FOUND;
}

enum utls_aead_search_result utls_aead_search_run(UTLS_AEAD_SEARCH *s, uint8_t *out,
                                                  size_t *out_len, size_t max_out,
                                                  size_t *out_index, const uint8_t *record,
                                                  size_t record_len, const uint64_t *seqs,
                                                  size_t num_seqs)
{
    size_t overhead;
    enum utls_aead_search_result r;

    if (s == NULL || out == NULL || out_len == NULL || out_index == NULL || record == NULL
        || seqs == NULL || num_seqs == 0 || num_seqs > UTLS_AEAD_SEARCH_MAX_CANDIDATES
        || max_out < record_len
        || (out < record + record_len && record < out + max_out)) { /* overlap */
        return UTLS_AEAD_SEARCH_ERROR;
    }
    *out_len = 0;
    *out_index = SIZE_MAX;
    overhead = UTLS_AEAD_SEARCH_HEADER_LEN + explicit_len(s) + UTLS_AEAD_SEARCH_TAG_LEN;
    /* Malformed records authenticate under no candidate (the provider checks
     * the same; checked here too so that EVP's int lengths cannot overflow). */
    if (record_len < overhead || record_len > UTLS_AEAD_SEARCH_MAX_RECORD_LEN
        || (((size_t)record[3] << 8) | record[4]) != record_len - UTLS_AEAD_SEARCH_HEADER_LEN) {
        wipe(out, record_len);
        return UTLS_AEAD_SEARCH_NOT_FOUND;
    }
    if (s->path == UTLS_AEAD_SEARCH_PATH_PROVIDER) {
        /* The provider reports no match without touching the error queue. */
        r = run_provider(s, out, out_len, out_index, record, record_len, seqs, num_seqs);
    } else {
        /* A failed tag is an answer: drop what it pushed; keep real errors. */
        ERR_set_mark();
        r = run_evp(s, out, out_len, out_index, record, record_len, seqs, num_seqs);
        if (r != UTLS_AEAD_SEARCH_ERROR) {
            ERR_pop_to_mark();
        } else {
            ERR_clear_last_mark();
        }
    }
    if (r != UTLS_AEAD_SEARCH_FOUND) {
        *out_len = 0;
        *out_index = SIZE_MAX;
        wipe(out, record_len);
    }
    return r;
}

enum utls_aead_search_result utls_aead_search(OSSL_LIB_CTX *libctx, int kind, int layout,
                                              const uint8_t *key, size_t key_len,
                                              const uint8_t *iv, size_t iv_len, int path,
                                              uint8_t *out, size_t *out_len, size_t max_out,
                                              size_t *out_index, const uint8_t *record,
                                              size_t record_len, const uint64_t *seqs,
                                              size_t num_seqs)
{
    UTLS_AEAD_SEARCH *s = utls_aead_search_new(libctx, NULL, kind, layout, key, key_len, iv,
                                               iv_len, path);
    enum utls_aead_search_result r;

    if (s == NULL) {
        return UTLS_AEAD_SEARCH_ERROR;
    }
    r = utls_aead_search_run(s, out, out_len, max_out, out_index, record, record_len, seqs,
                             num_seqs);
    utls_aead_search_free(s);
    return r;
}
