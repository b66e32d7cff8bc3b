/*
 * AEAD candidate search (search.h): which of N candidate sequence numbers
 * makes a TLS record authenticate.
 *
 * AES-GCM (NIST SP 800-38D 7.2): tag = GHASH_H(A, C) XOR E_K(J0), J0 =
 * nonce || 1, and GHASH_H(A, C) = A_1·H^m XOR ... XOR C_n·H^2 XOR L·H over
 * the m blocks of A, C and the length block L.
 *   TLS 1.3: A (the record header) and C are the same for every candidate;
 *     only J0 changes. One GHASH for the record, then one AES block per
 *     candidate: candidate i matches when E_K(J0_i) == tag XOR GHASH.
 *   TLS 1.2: J0 is the same for every candidate (salt || explicit nonce from
 *     the record); only the sequence number in the single AAD block A
 *     changes, and GHASH is linear in it:
 *       GHASH(A_i, C) = GHASH(A_0, C) XOR (A_i XOR A_0)·H^m.
 *     One GHASH and one AES block for the record, then one multiplication per
 *     candidate: candidate i matches when (A_i XOR A_0)·H^m == tag XOR
 *     GHASH(A_0, C) XOR E_K(J0).
 *   In both, the winner is then decrypted once: GCTR from nonce || 2, as
 *     AES-ECB over counter blocks.
 *   GHASH comes from libcrypto's CRYPTO_gcm128 (its carry-less multiplication
 *   code) with a block function that yields H once and zeros afterwards, so
 *   that E_K(J0) is zero and the "tag" it computes is GHASH alone; its CTR
 *   function does nothing, as the keystream is not needed there.
 * ChaCha20-Poly1305 (RFC 8439): the Poly1305 key is the first ChaCha20 block
 *   under the nonce, so nothing is shared between candidates; each is a full
 *   trial decryption through EVP, stopping at the first that authenticates.
 *
 * Every candidate's tag is compared with CRYPTO_memcmp, and for AES-GCM the
 * first match is chosen with masks after all candidates were compared: no
 * branch depends on tag bytes before the final decision.
 *
 * This code handles secrets (the AES key schedules, H and its powers, the
 * keystream blocks, plaintext).
 */
#define _DEFAULT_SOURCE /* explicit_bzero */
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/modes.h>

#include "aead_layout.h"
#include "utls/be64.h"
#include "gf128.h"
#include "search.h"
#include "utls/aeadsearch.h"

#define AES_BLOCK 16
/* Candidates per AES-ECB call; bounds the two stack buffers (2 KiB). */
#define SEARCH_BATCH 64
/* H^(2^k) for k < HPOW_COUNT covers every m: a TLS 1.2 record of
 * UTLS_AEAD_SEARCH_MAX_RECORD_LEN bytes has m = 2 + 1151 GHASH blocks < 2^11. */
#define HPOW_COUNT 11

/* The "block cipher" CRYPTO_gcm128 sees: H at init, then zeros. */
struct ghash_only {
    unsigned char h[AES_BLOCK];
    int give_h;
};

struct utls_search_key_st {
    int kind;
    int layout;
    unsigned char iv[AEAD_NONCE_LEN];
    size_t iv_len;
    uint64_t iv_tail;     /* iv[4..11], the part a sequence number is XORed into */
    EVP_CIPHER_CTX *ecb;  /* AES-GCM: E_K of counter blocks (candidates, keystream) */
    EVP_CIPHER_CTX *aead; /* ChaCha20-Poly1305 */
    GCM128_CONTEXT *gcm;  /* GHASH only, see ghash_only_block */
    struct ghash_only gk;
    utls_gf128 hpow[HPOW_COUNT]; /* TLS 1.2: H^(2^k) */
    size_t hm_for;               /* TLS 1.2: the m of hm, 0 if none yet */
    utls_gf128 hm;
};

static void ghash_only_block(const unsigned char in[16], unsigned char out[16], const void *key)
{
    const struct ghash_only *g = key;

    (void)in;
    if (g->give_h) {
        memcpy(out, g->h, AES_BLOCK);
    } else {
        memset(out, 0, AES_BLOCK);
    }
}

static void ghash_only_stream(const unsigned char *in, unsigned char *out, size_t blocks,
                              const void *key, const unsigned char ivec[16])
{
    (void)in;
    (void)out;
    (void)blocks;
    (void)key;
    (void)ivec;
}

/* 1 when |r| (a CRYPTO_memcmp result, 0..255) is 0, else 0; no branch. */
static size_t ct_is_zero(int r)
{
    return (size_t)(((unsigned int)r - 1u) >> (sizeof(unsigned int) * 8 - 1));
}

static size_t explicit_len(const utls_search_key *k)
{
    return utls_aead_search_explicit_len(k->kind, k->layout);
}

/* The nonce of candidate |seq|: RFC 8446 5.3 / RFC 7905 2 (iv XOR seq), or
 * RFC 5288 3 (salt || explicit nonce). */
static void nonce_for(const utls_search_key *k, const unsigned char *record, uint64_t seq,
                      unsigned char nonce[AEAD_NONCE_LEN])
{
    if (explicit_len(k) != 0) {
        memcpy(nonce, k->iv, TLS12_GCM_SALT_LEN);
        memcpy(nonce + TLS12_GCM_SALT_LEN, record + UTLS_AEAD_SEARCH_HEADER_LEN,
               TLS12_GCM_EXPLICIT_LEN);
        return;
    }
    memcpy(nonce, k->iv, 4);
    utls_store_be64(nonce + 4, k->iv_tail ^ seq);
}

/* RFC 5246 6.2.3.3: additional_data = seq_num + TLSCompressed.type +
 * TLSCompressed.version + TLSCompressed.length. */
static void tls12_aad(unsigned char aad[TLS12_AAD_LEN], uint64_t seq, const unsigned char *record,
                      size_t plain_len)
{
    utls_store_be64(aad, seq);
    aad[8] = record[0];
    aad[9] = record[1];
    aad[10] = record[2];
    aad[11] = (unsigned char)(plain_len >> 8);
    aad[12] = (unsigned char)plain_len;
}

/* Padding is left on: ECB output is only ever taken from EVP_EncryptUpdate of
 * whole blocks, and changing it would cost a parameter call per re-init. */
static EVP_CIPHER_CTX *keyed_ctx(OSSL_LIB_CTX *libctx, const char *name, const unsigned char *key,
                                 int enc)
{
    EVP_CIPHER *cipher = EVP_CIPHER_fetch(libctx, name, NULL);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int ok = cipher != NULL && ctx != NULL
        && EVP_CipherInit_ex2(ctx, cipher, key, NULL, enc, NULL) > 0;

    EVP_CIPHER_free(cipher);
    if (!ok) {
        EVP_CIPHER_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

utls_search_key *utls_search_key_new(OSSL_LIB_CTX *libctx, int kind, int layout,
                                     const unsigned char *key, size_t key_len,
                                     const unsigned char *iv, size_t iv_len)
{
    static const unsigned char zero[AES_BLOCK];
    utls_search_key *k;
    size_t want_key, want_iv;
    int l, i;

    if (!utls_aead_search_lengths(kind, layout, &want_key, &want_iv)) {
        return NULL;
    }
    if (key == NULL || iv == NULL || key_len != want_key || iv_len != want_iv) {
        return NULL;
    }
    if ((k = OPENSSL_zalloc(sizeof(*k))) == NULL) {
        return NULL;
    }
    k->kind = kind;
    k->layout = layout;
    memcpy(k->iv, iv, iv_len);
    k->iv_len = iv_len;
    if (iv_len == AEAD_NONCE_LEN) {
        k->iv_tail = utls_load_be64(iv + 4);
    }

    if (!utls_aead_search_is_gcm(kind)) {
        if ((k->aead = keyed_ctx(libctx, "ChaCha20-Poly1305", key, 0)) == NULL) {
            goto err;
        }
        return k;
    }
    if ((k->ecb = keyed_ctx(libctx, want_key == 16 ? "AES-128-ECB" : "AES-256-ECB", key, 1))
            == NULL
        || EVP_EncryptUpdate(k->ecb, k->gk.h, &l, zero, AES_BLOCK) <= 0 || l != AES_BLOCK) {
        goto err;
    }
    k->gk.give_h = 1;
    k->gcm = CRYPTO_gcm128_new(&k->gk, ghash_only_block);
    k->gk.give_h = 0;
    if (k->gcm == NULL) {
        goto err;
    }
    if (layout == UTLS_AEAD_SEARCH_TLS12) {
        k->hpow[0] = utls_gf128_load(k->gk.h);
        for (i = 1; i < HPOW_COUNT; i++) {
            k->hpow[i] = utls_gf128_mul(k->hpow[i - 1], k->hpow[i - 1]);
        }
    }
    return k;

err:
    utls_search_key_free(k);
    return NULL;
}

void utls_search_key_free(utls_search_key *k)
{
    if (k == NULL) {
        return;
    }
    EVP_CIPHER_CTX_free(k->ecb);
    EVP_CIPHER_CTX_free(k->aead);
    CRYPTO_gcm128_release(k->gcm); /* wipes it */
    OPENSSL_clear_free(k, sizeof(*k));
}

/* GHASH_H(aad, c) into |s|; |scratch| receives |c_len| bytes of garbage. */
static int ghash(utls_search_key *k, unsigned char *scratch, const unsigned char *aad,
                 size_t aad_len, const unsigned char *c, size_t c_len, unsigned char s[AES_BLOCK])
{
    static const unsigned char any_iv[AEAD_NONCE_LEN];

    CRYPTO_gcm128_setiv(k->gcm, any_iv, sizeof(any_iv));
    if (CRYPTO_gcm128_aad(k->gcm, aad, aad_len) != 0
        || CRYPTO_gcm128_decrypt_ctr32(k->gcm, c, scratch, c_len, ghash_only_stream) != 0) {
        return 0;
    }
    CRYPTO_gcm128_tag(k->gcm, s, AES_BLOCK);
    return 1;
}

/* Wipes secrets. OPENSSL_cleanse goes byte by byte through a volatile
 * pointer, which costs more than the AES it follows; glibc's explicit_bzero
 * is a memset the compiler may not remove. */
static void wipe(void *p, size_t n)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 25))
    explicit_bzero(p, n);
#else
    OPENSSL_cleanse(p, n);
#endif
}

/* out = a XOR b, a word at a time (a byte loop costs as much as the AES). */
static void xor_bytes(unsigned char *out, const unsigned char *a, const unsigned char *b,
                      size_t n)
{
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        uint64_t x, y;

        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        x ^= y;
        memcpy(out + i, &x, 8);
    }
    for (; i < n; i++) {
        out[i] = a[i] ^ b[i];
    }
}

/*
 * GCTR from nonce || 2 (SP 800-38D 7.2 step 3: the payload starts at
 * inc32(J0)), as AES-ECB over counter blocks written into |out| and encrypted
 * in place, then XORed with the ciphertext: the ECB context is keyed once,
 * where an EVP CTR context would need a re-initialisation (and its parameter
 * round trips) for every record. |out| has room for whole blocks (it holds
 * the record, which is longer than the ciphertext by more than a block).
 */
static int gcm_decrypt_winner(utls_search_key *k, unsigned char *out,
                              const unsigned char nonce[AEAD_NONCE_LEN], const unsigned char *c,
                              size_t c_len)
{
    size_t blocks = (c_len + AES_BLOCK - 1) / AES_BLOCK, i;
    uint32_t ctr = 2;
    int l;

    for (i = 0; i < blocks; i++, ctr++) {
        unsigned char *cb = out + i * AES_BLOCK;

        memcpy(cb, nonce, AEAD_NONCE_LEN);
        cb[12] = (unsigned char)(ctr >> 24);
        cb[13] = (unsigned char)(ctr >> 16);
        cb[14] = (unsigned char)(ctr >> 8);
        cb[15] = (unsigned char)ctr;
    }
    if (blocks > 0
        && (EVP_EncryptUpdate(k->ecb, out, &l, out, (int)(blocks * AES_BLOCK)) <= 0
            || (size_t)l != blocks * AES_BLOCK)) {
        wipe(out, blocks * AES_BLOCK);
        return 0;
    }
    xor_bytes(out, out, c, c_len);
    wipe(out + c_len, blocks * AES_BLOCK - c_len); /* unused keystream */
    return 1;
}

static size_t h_power_index_max(void)
{
    return ((size_t)1 << HPOW_COUNT) - 1;
}

/* H^m, kept for the next record of the same length. */
static utls_gf128 h_power(utls_search_key *k, size_t m)
{
    utls_gf128 r = { 0x8000000000000000ULL, 0 }; /* the field's 1 */
    int i;

    if (k->hm_for == m) {
        return k->hm;
    }
    for (i = 0; i < HPOW_COUNT; i++) {
        if ((m >> i) & 1) { /* m is public: the record length */
            r = utls_gf128_mul(r, k->hpow[i]);
        }
    }
    k->hm = r;
    k->hm_for = m;
    return r;
}

static int search_gcm_tls13(utls_search_key *k, unsigned char *out, long *out_index,
                            const unsigned char *record, size_t record_len, const uint64_t *seqs,
                            size_t num_seqs)
{
    const unsigned char *c = record + UTLS_AEAD_SEARCH_HEADER_LEN;
    size_t c_len = record_len - UTLS_AEAD_SEARCH_HEADER_LEN - UTLS_AEAD_SEARCH_TAG_LEN;
    const unsigned char *tag = c + c_len;
    unsigned char target[AES_BLOCK], ctrs[SEARCH_BATCH * AES_BLOCK];
    unsigned char ks[SEARCH_BATCH * AES_BLOCK], nonce[AEAD_NONCE_LEN];
    size_t base, j, found = 0, match = 0, used = 0;
    int l, i, ok = 0;

    /* RFC 8446 5.2: additional_data = TLSCiphertext.opaque_type ||
     * legacy_record_version || length, i.e. the record header. */
    if (!ghash(k, out, record, UTLS_AEAD_SEARCH_HEADER_LEN, c, c_len, target)) {
        goto end;
    }
    for (i = 0; i < AES_BLOCK; i++) {
        target[i] ^= tag[i];
    }
    for (base = 0; base < num_seqs; base += SEARCH_BATCH) {
        size_t n = num_seqs - base < SEARCH_BATCH ? num_seqs - base : SEARCH_BATCH;

        for (j = 0; j < n; j++) {
            unsigned char *cb = ctrs + j * AES_BLOCK;

            nonce_for(k, record, seqs[base + j], cb);
            cb[12] = 0;
            cb[13] = 0;
            cb[14] = 0;
            cb[15] = 1;
        }
        used = used > n ? used : n;
        if (EVP_EncryptUpdate(k->ecb, ks, &l, ctrs, (int)(n * AES_BLOCK)) <= 0
            || (size_t)l != n * AES_BLOCK) {
            goto end;
        }
        for (j = 0; j < n; j++) {
            size_t take = ct_is_zero(CRYPTO_memcmp(ks + j * AES_BLOCK, target, AES_BLOCK))
                & (found ^ 1);

            match |= (base + j) & (0 - take);
            found |= take;
        }
    }
    *out_index = -1;
    if (found) {
        nonce_for(k, record, seqs[match], nonce);
        if (!gcm_decrypt_winner(k, out, nonce, c, c_len)) {
            goto end;
        }
        *out_index = (long)match;
    }
    ok = 1;
end:
    wipe(target, sizeof(target));
    wipe(ks, used * AES_BLOCK);
    return ok;
}

static int search_gcm_tls12(utls_search_key *k, unsigned char *out, long *out_index,
                            const unsigned char *record, size_t record_len, const uint64_t *seqs,
                            size_t num_seqs)
{
    const unsigned char *c = record + UTLS_AEAD_SEARCH_HEADER_LEN + TLS12_GCM_EXPLICIT_LEN;
    size_t c_len = record_len - UTLS_AEAD_SEARCH_HEADER_LEN - TLS12_GCM_EXPLICIT_LEN
        - UTLS_AEAD_SEARCH_TAG_LEN;
    const unsigned char *tag = c + c_len;
    /* GHASH blocks from A to the end: A, the ciphertext, the length block. */
    size_t m = 1 + (c_len + AES_BLOCK - 1) / AES_BLOCK + 1;
    unsigned char aad[TLS12_AAD_LEN], target[AES_BLOCK], ekj0[AES_BLOCK], prod[AES_BLOCK];
    unsigned char nonce[AEAD_NONCE_LEN], cb[AES_BLOCK];
    utls_gf128 hm;
    size_t i, found = 0, match = 0;
    int l, ok = 0;

    if (m > h_power_index_max()) {
        return 0;
    }
    nonce_for(k, record, 0, nonce);
    memcpy(cb, nonce, AEAD_NONCE_LEN);
    cb[12] = 0;
    cb[13] = 0;
    cb[14] = 0;
    cb[15] = 1;
    tls12_aad(aad, seqs[0], record, c_len);
    if (!ghash(k, out, aad, sizeof(aad), c, c_len, target)
        || EVP_EncryptUpdate(k->ecb, ekj0, &l, cb, AES_BLOCK) <= 0 || l != AES_BLOCK) {
        goto end;
    }
    for (i = 0; i < AES_BLOCK; i++) {
        target[i] ^= tag[i] ^ ekj0[i];
    }
    hm = h_power(k, m);
    for (i = 0; i < num_seqs; i++) {
        /* A_i XOR A_0: the sequence numbers differ, the rest of A does not. */
        utls_gf128 d = { seqs[i] ^ seqs[0], 0 };
        size_t take;

        utls_gf128_store(prod, utls_gf128_mul(d, hm));
        take = ct_is_zero(CRYPTO_memcmp(prod, target, AES_BLOCK)) & (found ^ 1);
        match |= i & (0 - take);
        found |= take;
    }
    *out_index = -1;
    if (found) {
        if (!gcm_decrypt_winner(k, out, nonce, c, c_len)) {
            goto end;
        }
        *out_index = (long)match;
    }
    ok = 1;
end:
    wipe(target, sizeof(target));
    wipe(ekj0, sizeof(ekj0));
    wipe(prod, sizeof(prod));
    wipe(&hm, sizeof(hm));
    return ok;
}

static int search_chacha(utls_search_key *k, unsigned char *out, long *out_index,
                         const unsigned char *record, size_t record_len, const uint64_t *seqs,
                         size_t num_seqs)
{
    const unsigned char *c = record + UTLS_AEAD_SEARCH_HEADER_LEN;
    size_t c_len = record_len - UTLS_AEAD_SEARCH_HEADER_LEN - UTLS_AEAD_SEARCH_TAG_LEN;
    unsigned char nonce[AEAD_NONCE_LEN], aad[TLS12_AAD_LEN];
    const unsigned char *a = record;
    size_t a_len = UTLS_AEAD_SEARCH_HEADER_LEN, i;
    int l, l2;

    *out_index = -1;
    for (i = 0; i < num_seqs; i++) {
        nonce_for(k, record, seqs[i], nonce);
        if (k->layout == UTLS_AEAD_SEARCH_TLS12) {
            tls12_aad(aad, seqs[i], record, c_len);
            a = aad;
            a_len = sizeof(aad);
        }
        if (EVP_DecryptInit_ex(k->aead, NULL, NULL, NULL, nonce) <= 0
            || EVP_CIPHER_CTX_ctrl(k->aead, EVP_CTRL_AEAD_SET_TAG, UTLS_AEAD_SEARCH_TAG_LEN,
                                   (void *)(c + c_len)) <= 0
            || EVP_DecryptUpdate(k->aead, NULL, &l, a, (int)a_len) <= 0) {
            return 0;
        }
        l = 0;
        if (c_len > 0 && EVP_DecryptUpdate(k->aead, out, &l, c, (int)c_len) <= 0) {
            continue;
        }
        if (EVP_DecryptFinal_ex(k->aead, out + l, &l2) > 0) {
            *out_index = (long)i;
            break;
        }
    }
    return 1;
}

int utls_search_run(utls_search_key *k, unsigned char *out, size_t *out_len, size_t max_out,
                    long *out_index, const unsigned char *record, size_t record_len,
                    const uint64_t *seqs, size_t num_seqs)
{
    size_t overhead = UTLS_AEAD_SEARCH_HEADER_LEN + explicit_len(k) + UTLS_AEAD_SEARCH_TAG_LEN;
    int ok;

    *out_len = 0;
    *out_index = -1;
    if (out == NULL || record == NULL || seqs == NULL || num_seqs == 0
        || num_seqs > UTLS_AEAD_SEARCH_MAX_CANDIDATES || max_out < record_len
        || (out < record + record_len && record < out + max_out)) { /* overlap */
        return 0;
    }
    /* Malformed records authenticate under no candidate. */
    if (record_len < overhead || record_len > UTLS_AEAD_SEARCH_MAX_RECORD_LEN
        || (((size_t)record[3] << 8) | record[4]) != record_len - UTLS_AEAD_SEARCH_HEADER_LEN) {
        wipe(out, record_len);
        return 1;
    }
    if (!utls_aead_search_is_gcm(k->kind)) {
        /* A failed tag is an answer, not an error: drop what EVP pushed. */
        ERR_set_mark();
        ok = search_chacha(k, out, out_index, record, record_len, seqs, num_seqs);
        if (ok) {
            ERR_pop_to_mark();
        } else {
            ERR_clear_last_mark();
        }
    } else if (k->layout == UTLS_AEAD_SEARCH_TLS13) {
        ok = search_gcm_tls13(k, out, out_index, record, record_len, seqs, num_seqs);
    } else {
        ok = search_gcm_tls12(k, out, out_index, record, record_len, seqs, num_seqs);
    }
    if (ok && *out_index >= 0) {
        *out_len = record_len - overhead;
    } else {
        *out_index = -1;
        wipe(out, record_len);
    }
    return ok;
}
