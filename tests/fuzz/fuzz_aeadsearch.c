/* fuzz_aeadsearch.c: libFuzzer target for the AEAD candidate search
 * (provider/: utls_aead_search_run through the "utls" provider and through
 * the client's EVP trial decryption), with a differential and a ground-truth
 * oracle.
 *
 * Per input, one key: the kind (AES-128-GCM, AES-256-GCM,
 * ChaCha20-Poly1305), the layout (TLS13, TLS12) and the key and IV, read from
 * the input or drawn from a seed it gives. Then up to MAX_RECORDS records,
 * each either sealed here with the plain EVP AEAD under one sequence number
 * (the nonce and additional data rules of provider/README.md, "Layouts",
 * written again here from the RFCs: the reference) or arbitrary bytes; then
 * mutations of the record (bit flips in the header, the explicit nonce, the
 * ciphertext or the tag; truncation; extension; a wrong header length field;
 * lengths at the bounds 0, the overhead - 1, the overhead,
 * UTLS_AEAD_SEARCH_MAX_RECORD_LEN and one above); then a candidate list of 0
 * to UTLS_AEAD_SEARCH_MAX_CANDIDATES + 1 numbers (duplicates, the true number
 * once, several times or not at all, numbers near 0 and 2^64), and
 * sometimes a call with bad arguments (max_out one short, out overlapping
 * the record, NULL pointers).
 *
 * Every record is searched on five paths:
 *   prov      a provider context kept for the whole input (its cache of H^m
 *             sees records of many lengths)
 *   evp       an EVP-path context kept for the whole input
 *   fresh     utls_aead_search(): a new provider context per record
 *   portable  TLS 1.2 AES-GCM only: a provider context kept for the whole
 *             input, keyed and always run with the portable GF(2^128)
 *             multiplication forced (utls_gf128_test_force_portable, a hook
 *             compiled into this program only)
 *   copy      the provider's EVP interface without the client: a
 *             UTLS-*-SEARCH cipher context keyed once per input (the static
 *             IV through EVP_DecryptInit_ex2's iv, the TLS 1.2 salt through
 *             "utls-iv"), copied with EVP_CIPHER_CTX_copy for every record
 *             (the copy rebuilds its key), "utls-seqs", one
 *             EVP_DecryptUpdate, EVP_DecryptFinal_ex and "utls-match"
 *
 * The oracle (abort() on any failure):
 *  (a) every path gives the same result, index, length and plaintext;
 *  (b) ground truth: an unmodified sealed record (not above the length
 *      limit) is FOUND at the first index that holds its number, with the
 *      original plaintext, and NOT_FOUND if no index does; a sealed record
 *      with any byte changed, or above the limit, is NOT_FOUND (every byte
 *      of a record is authenticated: the header is the additional data or
 *      gives its type, version and length, and must state the record's
 *      length; the TLS 1.2 explicit nonce is the nonce; so a change is a
 *      forgery, which a bit flip or cut cannot be but with probability
 *      2^-128); arbitrary bytes are NOT_FOUND unless the reference opens
 *      them under the candidate found (a valid record written into the input
 *      by hand); NOT_FOUND leaves *out_index == SIZE_MAX, *out_len == 0 and
 *      the record_len bytes of out zero; FOUND gives an index below
 *      num_seqs and the record's length minus the overhead;
 *  (c) nothing is written to out at or past record_len, nor in guard regions
 *      on both sides of the buffer (besides ASan, which sees the record,
 *      the candidates and out in heap blocks of their exact sizes);
 *  (d) ERROR exactly for bad arguments (num_seqs 0 or above the maximum,
 *      max_out < record_len, out overlapping the record, NULL pointers),
 *      and then nothing written to out or the record; after FOUND and
 *      NOT_FOUND the OpenSSL error queue is what it was before (empty, or
 *      a sentinel error pushed before the call, still alone on it);
 *  (e) the kept contexts agree with the fresh one, and the portable
 *      multiplication with PCLMULQDQ (also directly, on operands from the
 *      record).
 *
 * Input layout (fuzz_input.h cursor; reads past the end give 0):
 *   u8 setup   bits 0-1 kind (0, 1, 2; 3 = 0), bit 2 TLS12, bit 3 key and IV
 *              from the input (32 + 12 bytes) else from the seed, bits 4-7 a
 *              probe of utls_aead_search_new with wrong lengths
 *   u16 u16    the seed of the generator (plaintext, nonces, filler)
 *   per record:
 *     u8 flags      bits 0-1 3 = arbitrary bytes, else sealed; bit 2 header
 *                   type and version from the input (u8, u16); bit 3 push a
 *                   sentinel error before each call; bits 4-6 a bad-argument
 *                   call (1..6); bit 7 TLS 1.2 explicit nonce = the number
 *     u8 u16        length selector (see pick_plain_len)
 *     u8 [..]       the true number's selector (see pick_seq)
 *     [u16 k, k bytes]  arbitrary records: k bytes of the body from the
 *                   input (k modulo the body length + 1), the rest filler
 *     u8            mutation count (0..3), then u8 op, u16 arg, u8 arg2 each
 *     u8            max_out - record_len
 *     u8 [u16]      candidate count (see pick_count), u8 mix, u8 place,
 *                   u16 pos1, u16 pos2 (see fill_candidates)
 *
 * FUZZ_AEADSEARCH_TRACE=1 prints each record and each path's answer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>

#include "fuzz_input.h"
#include "gf128.h"
#include "utls/aeadsearch.h"
#include "utls_prov.h"

#define FUZZ_NAME "fuzz_aeadsearch"
#define FUZZ_ON_FAILURE() ERR_print_errors_fp(stderr)
#include "fuzz_check.h"

/* Records per input: bounds the run time of one input (a record can cost up
 * to six searches of 1024 candidates over 18 KB). */
#define MAX_RECORDS 8
/* Mutations per record. */
#define MAX_MUTATIONS 3
/* Bytes one extension adds (1..256) and the most a record can hold: two
 * above the limit, plus the extensions. */
#define MAX_EXTEND 256
#define REC_CAP (UTLS_AEAD_SEARCH_MAX_RECORD_LEN + 2 + MAX_MUTATIONS * MAX_EXTEND)
/* Untouchable bytes on each side of out. */
#define GUARD_LEN 64
#define GUARD_BYTE 0xa5
/* The reason code of the sentinel error (ERR_LIB_USER). */
#define SENTINEL_REASON 77

#define HEADER_LEN UTLS_AEAD_SEARCH_HEADER_LEN
#define TAG_LEN UTLS_AEAD_SEARCH_TAG_LEN
#define MAX_LEN UTLS_AEAD_SEARCH_MAX_RECORD_LEN
#define MAX_CAND UTLS_AEAD_SEARCH_MAX_CANDIDATES

enum path { P_PROV, P_EVP, P_FRESH, P_PORTABLE, P_COPY, P_COUNT };
static const char *const path_names[P_COUNT] = { "prov", "evp", "fresh", "portable", "copy" };

/* The bad-argument calls (flags bits 4-6). */
enum bad_arg {
    BAD_NONE,
    BAD_MAX_OUT_SHORT, /* max_out = record_len - 1 */
    BAD_OVERLAP,       /* out starts inside the record */
    BAD_NULL_OUT_LEN,
    BAD_NULL_OUT_INDEX,
    BAD_NULL_RECORD,
    BAD_NULL_SEQS,
};

typedef struct {
    int kind, layout;
    uint8_t key[32], iv[12];
    size_t key_len, iv_len, explicit_len, overhead;
} fuzz_key;

/* One path's answer to one search. */
typedef struct {
    enum utls_aead_search_result r;
    size_t index, len;
    uint8_t *buf; /* GUARD_LEN || out (max_out) || GUARD_LEN */
} answer;

static OSSL_LIB_CTX *libctx;
static int trace;
/* P_COPY: a UTLS-*-SEARCH cipher context keyed once per input, copied for
 * every record. */
static EVP_CIPHER_CTX *copy_src;

static void setup_once(void)
{
    if (libctx != NULL) {
        return;
    }
    trace = getenv("FUZZ_AEADSEARCH_TRACE") != NULL;
    libctx = OSSL_LIB_CTX_new();
    CHECK(libctx != NULL);
    CHECK(OSSL_PROVIDER_load(libctx, "default") != NULL);
    CHECK(OSSL_PROVIDER_add_builtin(libctx, UTLS_AEAD_SEARCH_PROVIDER_NAME, utls_provider_init)
          == 1);
    CHECK(OSSL_PROVIDER_load(libctx, UTLS_AEAD_SEARCH_PROVIDER_NAME) != NULL);
}

static uint64_t get_u64(fuzz_cursor *c)
{
    uint64_t v = 0;

    for (int i = 0; i < 4; i++) {
        v = (v << 16) | fuzz_get_u16(c);
    }
    return v;
}

static void fill(uint32_t *rng, uint8_t *p, size_t n)
{
    while (n >= 4) {
        uint32_t w = fuzz_rng_next(rng);
        memcpy(p, &w, 4);
        p += 4;
        n -= 4;
    }
    while (n-- > 0) {
        *p++ = (uint8_t)fuzz_rng_next(rng);
    }
}

static uint64_t rng64(uint32_t *rng)
{
    uint64_t hi = fuzz_rng_next(rng);
    return (hi << 32) | fuzz_rng_next(rng);
}

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (56 - 8 * i));
    }
}

static void set_length_field(uint8_t *rec, size_t v)
{
    rec[3] = (uint8_t)(v >> 8);
    rec[4] = (uint8_t)v;
}

/*
 * The reference AEAD: seals (enc = 1: |in| plaintext, writes ciphertext and
 * tag to |out|) or opens (enc = 0: |in| ciphertext, the tag follows it,
 * writes the plaintext) the body of |rec| under |seq| with one fresh EVP
 * context. |rec| holds the header and, for TLS 1.2 AES-GCM, the explicit
 * nonce already. Nonce and additional data as provider/README.md states:
 *   RFC 8446 5.3, RFC 7905 2: nonce = iv XOR (0^32 || seq);
 *   RFC 5288 3: nonce = salt || explicit;
 *   RFC 8446 5.2: additional data = the header;
 *   RFC 5246 6.2.3.3: seq || type || version || length of the plaintext.
 * Returns 1 on success (the tag verified), 0 otherwise.
 */
static int reference_aead(const fuzz_key *k, int enc, uint64_t seq, const uint8_t *rec,
                          const uint8_t *in, size_t in_len, uint8_t *out)
{
    const char *name = k->kind == UTLS_AEAD_SEARCH_AES_128_GCM   ? "AES-128-GCM"
                       : k->kind == UTLS_AEAD_SEARCH_AES_256_GCM ? "AES-256-GCM"
                                                                 : "ChaCha20-Poly1305";
    uint8_t nonce[12], aad[13];
    const uint8_t *a = rec;
    size_t a_len = HEADER_LEN;
    int l = 0, l2 = 0, ok;

    if (k->explicit_len != 0) {
        memcpy(nonce, k->iv, 4);
        memcpy(nonce + 4, rec + HEADER_LEN, 8);
    } else {
        memcpy(nonce, k->iv, 12);
        for (int i = 0; i < 8; i++) {
            nonce[4 + i] ^= (uint8_t)(seq >> (56 - 8 * i));
        }
    }
    if (k->layout == UTLS_AEAD_SEARCH_TLS12) {
        put_be64(aad, seq);
        memcpy(aad + 8, rec, 3);
        aad[11] = (uint8_t)(in_len >> 8);
        aad[12] = (uint8_t)in_len;
        a = aad;
        a_len = sizeof(aad);
    }
    EVP_CIPHER *cipher = EVP_CIPHER_fetch(libctx, name, NULL);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    CHECK(cipher != NULL && ctx != NULL);
    CHECK(EVP_CipherInit_ex2(ctx, cipher, k->key, nonce, enc, NULL) == 1);
    if (!enc) {
        CHECK(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, TAG_LEN, (void *)(in + in_len))
              == 1);
    }
    CHECK(EVP_CipherUpdate(ctx, NULL, &l, a, (int)a_len) == 1);
    l = 0;
    ok = in_len == 0 || EVP_CipherUpdate(ctx, out, &l, in, (int)in_len) == 1;
    ok = ok && EVP_CipherFinal_ex(ctx, out + l, &l2) == 1;
    if (ok && enc) {
        CHECK(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, TAG_LEN, out + in_len) == 1);
    }
    EVP_CIPHER_CTX_free(ctx);
    EVP_CIPHER_free(cipher);
    ERR_clear_error(); /* a failed tag may leave something; the queue is ours */
    return ok;
}

static void read_key(fuzz_key *k, fuzz_cursor *c, unsigned setup, uint32_t *rng)
{
    static const int kinds[4] = { UTLS_AEAD_SEARCH_AES_128_GCM, UTLS_AEAD_SEARCH_AES_256_GCM,
                                  UTLS_AEAD_SEARCH_CHACHA20_POLY1305,
                                  UTLS_AEAD_SEARCH_AES_128_GCM };
    int gcm;

    memset(k, 0, sizeof(*k));
    k->kind = kinds[setup & 3];
    k->layout = (setup & 4) ? UTLS_AEAD_SEARCH_TLS12 : UTLS_AEAD_SEARCH_TLS13;
    gcm = k->kind != UTLS_AEAD_SEARCH_CHACHA20_POLY1305;
    k->key_len = k->kind == UTLS_AEAD_SEARCH_AES_128_GCM ? 16 : 32;
    k->explicit_len = gcm && k->layout == UTLS_AEAD_SEARCH_TLS12 ? 8 : 0;
    k->iv_len = k->explicit_len != 0 ? 4 : 12;
    k->overhead = HEADER_LEN + k->explicit_len + TAG_LEN;
    if (setup & 8) {
        for (size_t i = 0; i < sizeof(k->key); i++) {
            k->key[i] = (uint8_t)fuzz_get_u8(c);
        }
        for (size_t i = 0; i < sizeof(k->iv); i++) {
            k->iv[i] = (uint8_t)fuzz_get_u8(c);
        }
    } else {
        fill(rng, k->key, sizeof(k->key));
        fill(rng, k->iv, sizeof(k->iv));
    }
}

/* utls_aead_search_new must refuse every wrong kind, layout or length on both
 * paths, and accept the right ones (checked when the contexts are made). */
static void probe_new(const fuzz_key *k, unsigned probe)
{
    int kind = k->kind, layout = k->layout;
    size_t key_len = k->key_len, iv_len = k->iv_len;

    switch (probe) {
    case 1:
        key_len = k->key_len == 16 ? 32 : 16;
        break;
    case 2:
        iv_len = k->iv_len == 4 ? 12 : 4;
        break;
    case 3:
        key_len = 0;
        break;
    case 4:
        kind = 0;
        break;
    case 5:
        layout = 3;
        break;
    case 6:
        layout = 0;
        break;
    case 7:
        kind = 4;
        break;
    default:
        return;
    }
    for (int path = UTLS_AEAD_SEARCH_PATH_AUTO; path <= UTLS_AEAD_SEARCH_PATH_EVP; path++) {
        UTLS_AEAD_SEARCH *s = utls_aead_search_new(libctx, NULL, kind, layout, k->key, key_len,
                                                   k->iv, iv_len, path);
        CHECK(s == NULL);
    }
    CHECK(utls_aead_search_new(libctx, NULL, k->kind, k->layout, k->key, k->key_len, k->iv,
                               k->iv_len, 7)
          == NULL);
}

/* The plaintext length of a record (arbitrary records: the body length), by
 * a selector: small, any, near the limit, just above it, around blocks. */
static size_t pick_plain_len(fuzz_cursor *c, const fuzz_key *k)
{
    unsigned sel = fuzz_get_u8(c);
    unsigned v = fuzz_get_u16(c);
    size_t max_plain = MAX_LEN - k->overhead;

    switch (sel % 8) {
    case 0:
        return 0;
    case 1:
        return v % 64;
    case 2:
        return v % (max_plain + 1);
    case 3:
        return max_plain - v % 4;
    case 4:
        return max_plain + 1 + v % 2; /* one or two bytes above the limit */
    case 5: /* a multiple of the AES block, one less or one more */
        return (size_t)(v % 256 + 1) * 16 - 1 + (sel >> 3) % 3;
    default:
        return v % 1500;
    }
}

/* The number a record is sealed under. */
static uint64_t pick_seq(fuzz_cursor *c)
{
    unsigned sel = fuzz_get_u8(c);

    switch (sel % 8) {
    case 0:
        return 0;
    case 1:
        return UINT64_MAX - fuzz_get_u8(c);
    case 2:
        return get_u64(c);
    case 3:
        return ((uint64_t)1 << 32) - 2 + fuzz_get_u8(c) % 4;
    case 4:
        return ((uint64_t)1 << 63) - 2 + fuzz_get_u8(c) % 4;
    default:
        return fuzz_get_u16(c);
    }
}

/* The number of candidates: selectors 0 to 2 give the two counts out of
 * range and the maximum, 3 any valid count, the others 1 to 32. */
static size_t pick_count(fuzz_cursor *c)
{
    static const size_t fixed[3] = { 0, MAX_CAND + 1, MAX_CAND };
    unsigned sel = fuzz_get_u8(c);

    if (sel % 8 < 3) {
        return fixed[sel % 8];
    }
    return sel % 8 == 3 ? 1 + fuzz_get_u16(c) % MAX_CAND : 1 + (sel >> 3);
}

/* Candidates: each drawn from the kinds the input's |mix| allows (all when
 * 0); then the true number written at up to two places. The truth is read
 * back from the list, not from how it was made. */
static void fill_candidates(fuzz_cursor *c, uint64_t *seqs, size_t n, uint64_t seq,
                            uint32_t *rng)
{
    unsigned mix = fuzz_get_u8(c);
    unsigned place = fuzz_get_u8(c);
    size_t pos1 = fuzz_get_u16(c);
    size_t pos2 = fuzz_get_u16(c);

    if (mix == 0) {
        mix = 0xff;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t r = fuzz_rng_next(rng);
        unsigned kind = r % 8;

        while (!(mix & (1u << kind))) {
            kind = (kind + 1) % 8;
        }
        r >>= 3;
        switch (kind) {
        case 0:
            seqs[i] = seq;
            break;
        case 1:
            seqs[i] = seq + 1 + r % 16;
            break;
        case 2:
            seqs[i] = seq - 1 - r % 16;
            break;
        case 3:
            seqs[i] = UINT64_MAX - r % 16;
            break;
        case 4:
            seqs[i] = r % 16;
            break;
        case 5:
            seqs[i] = seq ^ ((uint64_t)1 << (r % 64));
            break;
        case 6:
            seqs[i] = rng64(rng);
            break;
        default:
            seqs[i] = i > 0 ? seqs[i - 1] : seq + 1;
            break;
        }
    }
    if (n == 0) {
        return;
    }
    switch (place % 4) {
    case 1:
        seqs[pos1 % n] = seq;
        break;
    case 2:
        seqs[pos1 % n] = seq;
        seqs[pos2 % n] = seq;
        break;
    case 3:
        seqs[n - 1] = seq;
        break;
    default:
        break;
    }
}

/* Flips bit |bit| of a byte in [start, start + len) of the record. */
static void flip_in(uint8_t *rec, size_t start, size_t len, unsigned arg, unsigned bit)
{
    if (len > 0) {
        rec[start + arg % len] ^= (uint8_t)(1u << (bit & 7));
    }
}

/* Applies one mutation to |rec| (|*rec_len| bytes, room for REC_CAP). */
static void mutate(const fuzz_key *k, uint8_t *rec, size_t *rec_len, unsigned op, unsigned arg,
                   unsigned arg2, uint32_t *rng)
{
    size_t n = *rec_len;
    size_t body = n >= k->overhead ? n - k->overhead : 0; /* the ciphertext */
    size_t target;

    switch (op % 8) {
    case 0: /* the header */
        flip_in(rec, 0, n < HEADER_LEN ? n : HEADER_LEN, arg, arg2);
        break;
    case 1: /* the explicit nonce (TLS 1.2 AES-GCM), else the ciphertext */
        if (n >= k->overhead && k->explicit_len != 0) {
            flip_in(rec, HEADER_LEN, k->explicit_len, arg, arg2);
        } else {
            flip_in(rec, 0, n, arg, arg2);
        }
        break;
    case 2: /* the ciphertext */
        if (body > 0) {
            flip_in(rec, HEADER_LEN + k->explicit_len, body, arg, arg2);
        } else {
            flip_in(rec, 0, n, arg, arg2);
        }
        break;
    case 3: /* the tag */
        if (n >= TAG_LEN) {
            flip_in(rec, n - TAG_LEN, TAG_LEN, arg, arg2);
        }
        break;
    case 4: /* truncation */
        if (n > 0) {
            *rec_len = n - (1 + arg % n);
        }
        break;
    case 5: /* extension */
        target = n + 1 + arg2 % MAX_EXTEND;
        if (target <= REC_CAP) {
            fill(rng, rec + n, target - n);
            *rec_len = target;
        }
        break;
    case 6: /* a wrong header length field */
        if (n >= HEADER_LEN) {
            set_length_field(rec, arg);
        }
        break;
    default: /* a length at a bound */
        switch (arg2 % 6) {
        case 0:
            target = 0;
            break;
        case 1:
            target = k->overhead - 1;
            break;
        case 2:
            target = k->overhead;
            break;
        case 3:
            target = MAX_LEN;
            break;
        case 4:
            target = MAX_LEN + 1;
            break;
        default:
            target = n;
            break;
        }
        if (target > n) {
            fill(rng, rec + n, target - n);
        }
        *rec_len = target;
        break;
    }
    /* op bit 3: state the new length in the header, so that a cut or grown
     * record reaches the tag check instead of the length check. */
    if ((op & 8) && *rec_len >= HEADER_LEN) {
        set_length_field(rec, *rec_len - HEADER_LEN);
    }
}

/* Pushes the sentinel error when asked; returns whether it did. */
static int push_sentinel(int want)
{
    ERR_clear_error();
    if (want) {
        ERR_raise_data(ERR_LIB_USER, SENTINEL_REASON, "fuzz_aeadsearch sentinel");
    }
    return want;
}

/* After FOUND or NOT_FOUND: the queue holds exactly what it held before. */
static void check_queue(int pushed)
{
    if (pushed) {
        unsigned long e = ERR_get_error();
        CHECK(ERR_GET_LIB(e) == ERR_LIB_USER && ERR_GET_REASON(e) == SENTINEL_REASON);
    }
    CHECK(ERR_peek_error() == 0);
}

static int guard_intact(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != GUARD_BYTE) {
            return 0;
        }
    }
    return 1;
}

static int all_zero(const uint8_t *p, size_t n)
{
    uint8_t acc = 0;

    for (size_t i = 0; i < n; i++) {
        acc |= p[i];
    }
    return acc == 0;
}

/* The search through the provider's EVP interface on a copy of copy_src,
 * with the client's conventions for the answer. ERROR when the candidates
 * are refused or a call fails. */
static enum utls_aead_search_result search_copy(uint8_t *out, size_t *out_len,
                                                size_t *out_index, const uint8_t *rec,
                                                size_t rec_len, const uint64_t *seqs, size_t n)
{
    static uint8_t seqs_be[(MAX_CAND + 1) * 8];
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    OSSL_PARAM params[2];
    int l = -1, l2 = -1, match = -2, final_ok;
    enum utls_aead_search_result r = UTLS_AEAD_SEARCH_ERROR;

    CHECK(ctx != NULL && EVP_CIPHER_CTX_copy(ctx, copy_src) == 1);
    for (size_t i = 0; i < n; i++) {
        put_be64(seqs_be + 8 * i, seqs[i]);
    }
    params[0] = OSSL_PARAM_construct_octet_string(UTLS_AEAD_SEARCH_PARAM_SEQS, seqs_be, 8 * n);
    params[1] = OSSL_PARAM_construct_end();
    if (EVP_CIPHER_CTX_set_params(ctx, params) != 1) {
        goto end;
    }
    CHECK(EVP_DecryptUpdate(ctx, out, &l, rec, (int)rec_len) == 1);
    final_ok = EVP_DecryptFinal_ex(ctx, out + l, &l2) == 1;
    CHECK(l2 == 0);
    params[0] = OSSL_PARAM_construct_int(UTLS_AEAD_SEARCH_PARAM_MATCH, &match);
    CHECK(EVP_CIPHER_CTX_get_params(ctx, params) == 1);
    CHECK(final_ok == (match >= 0));
    *out_len = (size_t)l;
    *out_index = match >= 0 ? (size_t)match : SIZE_MAX;
    r = final_ok ? UTLS_AEAD_SEARCH_FOUND : UTLS_AEAD_SEARCH_NOT_FOUND;
end:
    EVP_CIPHER_CTX_free(ctx);
    return r;
}

/* One search on |path| with valid arguments; fills |a| and checks (c), (d)
 * and the shape of the answer. */
static void search_path(enum path path, UTLS_AEAD_SEARCH *ctx, const fuzz_key *k, answer *a,
                        size_t max_out, const uint8_t *rec, size_t rec_len, const uint64_t *seqs,
                        size_t n, int sentinel, int valid_count)
{
    uint8_t *out = a->buf + GUARD_LEN;
    int pushed;

    memset(a->buf, GUARD_BYTE, max_out + 2 * GUARD_LEN);
    a->index = 0x5a5a;
    a->len = 0x5a5a;
    pushed = push_sentinel(sentinel);
    if (path == P_PORTABLE) {
        utls_gf128_test_force_portable = 1;
    }
    if (path == P_COPY) {
        a->r = search_copy(out, &a->len, &a->index, rec, rec_len, seqs, n);
    } else if (path == P_FRESH) {
        a->r = utls_aead_search(libctx, k->kind, k->layout, k->key, k->key_len, k->iv, k->iv_len,
                                UTLS_AEAD_SEARCH_PATH_PROVIDER, out, &a->len, max_out, &a->index,
                                rec, rec_len, seqs, n);
    } else {
        a->r = utls_aead_search_run(ctx, out, &a->len, max_out, &a->index, rec, rec_len, seqs,
                                    n);
    }
    utls_gf128_test_force_portable = 0;
    if (trace) {
        fprintf(stderr, "  %-8s r=%d index=%zu len=%zu\n", path_names[path], a->r,
                a->r == UTLS_AEAD_SEARCH_FOUND ? a->index : (size_t)0, a->len);
    }
    /* (c): nothing before out, nothing from record_len on */
    CHECK(guard_intact(a->buf, GUARD_LEN));
    CHECK(guard_intact(out + rec_len, max_out - rec_len + GUARD_LEN));
    if (!valid_count) {
        /* (d): the only bad argument here is the count */
        CHECK(a->r == UTLS_AEAD_SEARCH_ERROR);
        CHECK(guard_intact(out, rec_len));
        ERR_clear_error();
        return;
    }
    CHECK(a->r == UTLS_AEAD_SEARCH_FOUND || a->r == UTLS_AEAD_SEARCH_NOT_FOUND);
    check_queue(pushed);
    if (a->r == UTLS_AEAD_SEARCH_NOT_FOUND) {
        CHECK(a->index == SIZE_MAX);
        CHECK(a->len == 0);
        CHECK(all_zero(out, rec_len));
    } else {
        CHECK(a->index < n);
        CHECK(rec_len >= k->overhead && rec_len <= MAX_LEN);
        CHECK(a->len == rec_len - k->overhead);
    }
}

/* A call with one bad argument: ERROR on every path, nothing written to out
 * or the record. */
static void bad_call(enum bad_arg bad, UTLS_AEAD_SEARCH *const ctxs[P_COUNT], const fuzz_key *k,
                     const uint8_t *rec, size_t rec_len, const uint64_t *seqs, size_t n)
{
    /* out and the record in one block, so that they can overlap */
    size_t max_out = rec_len, room = rec_len + max_out + 1;
    uint8_t *block = malloc(room), *copy = malloc(room);
    uint8_t *r = block, *out = block + rec_len;
    size_t out_len = 7, out_index = 7;
    size_t *p_len = &out_len, *p_index = &out_index;
    const uint8_t *p_rec = r;
    const uint64_t *p_seqs = seqs;

    CHECK(block != NULL && copy != NULL);
    memcpy(r, rec, rec_len);
    memset(out, GUARD_BYTE, max_out + 1);
    switch (bad) {
    case BAD_MAX_OUT_SHORT:
        if (rec_len == 0) {
            goto end;
        }
        max_out = rec_len - 1;
        break;
    case BAD_OVERLAP:
        if (rec_len == 0) {
            goto end;
        }
        out = block + rec_len / 2; /* starts inside the record */
        break;
    case BAD_NULL_OUT_LEN:
        p_len = NULL;
        break;
    case BAD_NULL_OUT_INDEX:
        p_index = NULL;
        break;
    case BAD_NULL_RECORD:
        p_rec = NULL;
        break;
    case BAD_NULL_SEQS:
        p_seqs = NULL;
        break;
    default:
        goto end;
    }
    memcpy(copy, block, room);
    for (int p = 0; p < P_COUNT; p++) {
        enum utls_aead_search_result res;

        if (p == P_FRESH) {
            res = utls_aead_search(libctx, k->kind, k->layout, k->key, k->key_len, k->iv,
                                   k->iv_len, UTLS_AEAD_SEARCH_PATH_PROVIDER, out, p_len, max_out,
                                   p_index, p_rec, rec_len, p_seqs, n);
        } else if (ctxs[p] != NULL) {
            res = utls_aead_search_run(ctxs[p], out, p_len, max_out, p_index, p_rec, rec_len,
                                       p_seqs, n);
        } else {
            continue;
        }
        if (trace) {
            fprintf(stderr, "  bad %d on %s: r=%d\n", bad, path_names[p], res);
        }
        CHECK(res == UTLS_AEAD_SEARCH_ERROR);
        CHECK(memcmp(copy, block, room) == 0);
        ERR_clear_error();
    }
end:
    free(block);
    free(copy);
}

/* (e), directly: both multiplications on operands taken from the record. */
static void check_gf128(const uint8_t *rec, size_t rec_len, uint64_t seq)
{
    uint8_t x[16] = { 0 }, y[16] = { 0 };
    utls_gf128 a, b, p1, p2;

    memcpy(x, rec, rec_len < 16 ? rec_len : 16);
    if (rec_len >= 16) {
        memcpy(y, rec + rec_len - 16, 16);
    }
    put_be64(y, seq);
    a = utls_gf128_load(x);
    b = utls_gf128_load(y);
    p1 = utls_gf128_mul(a, b);
    p2 = utls_gf128_mul_portable(a, b);
    CHECK(p1.hi == p2.hi && p1.lo == p2.lo);
}

static void one_record(fuzz_cursor *c, const fuzz_key *k, UTLS_AEAD_SEARCH *const ctxs[P_COUNT],
                       uint32_t *rng, unsigned index)
{
    static uint8_t sealed[REC_CAP], rec_buf[REC_CAP], plain[REC_CAP], ref_out[REC_CAP];
    static uint64_t seq_buf[MAX_CAND + 1];
    unsigned flags = fuzz_get_u8(c);
    int arbitrary = (flags & 3) == 3;
    unsigned type = 23, version = 0x0303;
    size_t plain_len, sealed_len, rec_len, n;
    uint64_t seq;
    answer ans[P_COUNT];

    if (flags & 4) {
        type = fuzz_get_u8(c);
        version = fuzz_get_u16(c);
    }
    plain_len = pick_plain_len(c, k);
    seq = pick_seq(c);
    sealed_len = k->overhead + plain_len;
    CHECK(sealed_len <= REC_CAP);

    sealed[0] = (uint8_t)type;
    sealed[1] = (uint8_t)(version >> 8);
    sealed[2] = (uint8_t)version;
    set_length_field(sealed, sealed_len - HEADER_LEN);
    if (arbitrary) {
        /* The first bytes of the body from the input (so that the fuzzer
         * can write whole records, from its comparison hints too), the
         * rest from the generator. */
        size_t body = sealed_len - HEADER_LEN, take = fuzz_get_u16(c) % (body + 1);

        take = take < c->len ? take : c->len;
        memcpy(sealed + HEADER_LEN, c->p, take);
        c->p += take;
        c->len -= take;
        fill(rng, sealed + HEADER_LEN + take, body - take);
    } else {
        if (k->explicit_len != 0) {
            /* RFC 5288 3: the explicit nonce is the sender's choice: OpenSSL
             * counts from a random start, some stacks send the number. */
            if (flags & 0x80) {
                put_be64(sealed + HEADER_LEN, seq);
            } else {
                fill(rng, sealed + HEADER_LEN, k->explicit_len);
            }
        }
        fill(rng, plain, plain_len);
        CHECK(reference_aead(k, 1, seq, sealed, plain, plain_len,
                             sealed + HEADER_LEN + k->explicit_len)
              == 1);
    }
    memcpy(rec_buf, sealed, sealed_len);
    rec_len = sealed_len;
    unsigned mutations = fuzz_get_u8(c) % (MAX_MUTATIONS + 1);
    for (unsigned m = 0; m < mutations; m++) {
        unsigned op = fuzz_get_u8(c);
        unsigned arg = fuzz_get_u16(c);
        unsigned arg2 = fuzz_get_u8(c);

        mutate(k, rec_buf, &rec_len, op, arg, arg2, rng);
    }
    size_t max_out = rec_len + fuzz_get_u8(c);
    n = pick_count(c);
    fill_candidates(c, seq_buf, n, seq, rng);

    int intact = !arbitrary && rec_len == sealed_len && memcmp(rec_buf, sealed, rec_len) == 0;
    size_t truth = SIZE_MAX; /* the index the ground truth expects */
    if (intact && rec_len <= MAX_LEN) {
        for (size_t i = 0; i < n; i++) {
            if (seq_buf[i] == seq) {
                truth = i;
                break;
            }
        }
    }
    if (trace) {
        fprintf(stderr,
                "record %u: %s, type %u version %04x plain %zu seq %llu sealed %zu -> %zu (%s) "
                "candidates %zu truth %zu max_out %zu\n",
                index, arbitrary ? "arbitrary" : "sealed", type, version, plain_len,
                (unsigned long long)seq, sealed_len, rec_len,
                intact ? "intact" : arbitrary ? "arbitrary" : "changed", n, truth, max_out);
    }

    /* Exact-size heap copies: ASan sees every over-read. */
    uint8_t *rec = malloc(rec_len ? rec_len : 1);
    uint64_t *seqs = malloc((n ? n : 1) * sizeof(*seqs));
    CHECK(rec != NULL && seqs != NULL);
    memcpy(rec, rec_buf, rec_len);
    memcpy(seqs, seq_buf, n * sizeof(*seqs));

    unsigned bad = (flags >> 4) & 7;
    if (bad != BAD_NONE) {
        bad_call((enum bad_arg)bad, ctxs, k, rec, rec_len, seqs, n);
    }

    int valid_count = n >= 1 && n <= MAX_CAND;
    int sentinel = (flags >> 3) & 1;
    for (int p = 0; p < P_COUNT; p++) {
        ans[p].buf = NULL;
        if (p != P_FRESH && p != P_COPY && ctxs[p] == NULL) {
            continue;
        }
        ans[p].buf = malloc(max_out + 2 * GUARD_LEN);
        CHECK(ans[p].buf != NULL);
        search_path((enum path)p, ctxs[p], k, &ans[p], max_out, rec, rec_len, seqs, n, sentinel,
                    valid_count);
    }
    CHECK(memcmp(rec, rec_buf, rec_len) == 0); /* the record is read only */

    /* (a): every path as the kept provider context */
    const answer *ref = &ans[P_PROV];
    for (int p = 0; p < P_COUNT; p++) {
        if (ans[p].buf == NULL) {
            continue;
        }
        CHECK(ans[p].r == ref->r);
        if (ref->r == UTLS_AEAD_SEARCH_FOUND) {
            CHECK(ans[p].index == ref->index);
            CHECK(ans[p].len == ref->len);
            CHECK(memcmp(ans[p].buf + GUARD_LEN, ref->buf + GUARD_LEN, ref->len) == 0);
        }
    }

    /* (b): the ground truth */
    if (valid_count) {
        const uint8_t *out = ref->buf + GUARD_LEN;

        if (truth != SIZE_MAX) {
            CHECK(ref->r == UTLS_AEAD_SEARCH_FOUND);
            CHECK(ref->index == truth);
            CHECK(ref->len == plain_len);
            CHECK(memcmp(out, plain, plain_len) == 0);
        } else if (!arbitrary || ref->r == UTLS_AEAD_SEARCH_NOT_FOUND) {
            CHECK(ref->r == UTLS_AEAD_SEARCH_NOT_FOUND);
        } else {
            /* Arbitrary bytes that authenticate: a valid record written into
             * the input. The reference must open it under that candidate,
             * to the same plaintext, and under none before it. */
            size_t body = rec_len - k->overhead;
            const uint8_t *cbody = rec + HEADER_LEN + k->explicit_len;

            CHECK(reference_aead(k, 0, seqs[ref->index], rec, cbody, body, ref_out) == 1);
            CHECK(memcmp(ref_out, out, body) == 0);
            for (size_t i = 0; i < ref->index; i++) {
                CHECK(reference_aead(k, 0, seqs[i], rec, cbody, body, ref_out) == 0);
            }
        }
    }
    check_gf128(rec, rec_len, seq);

    for (int p = 0; p < P_COUNT; p++) {
        free(ans[p].buf);
    }
    free(rec);
    free(seqs);
}

/* copy_src for |k|: the UTLS-*-SEARCH cipher keyed for decryption. */
static EVP_CIPHER_CTX *keyed_search_cipher(const fuzz_key *k)
{
    const char *name = k->kind == UTLS_AEAD_SEARCH_AES_128_GCM
                           ? UTLS_AEAD_SEARCH_AES_128_GCM_NAME
                       : k->kind == UTLS_AEAD_SEARCH_AES_256_GCM
                           ? UTLS_AEAD_SEARCH_AES_256_GCM_NAME
                           : UTLS_AEAD_SEARCH_CHACHA20_POLY1305_NAME;
    EVP_CIPHER *cipher = EVP_CIPHER_fetch(libctx, name, NULL);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    OSSL_PARAM params[3];
    int salt = k->iv_len != 12;

    CHECK(cipher != NULL && ctx != NULL);
    params[0] = OSSL_PARAM_construct_utf8_string(
        UTLS_AEAD_SEARCH_PARAM_LAYOUT, k->layout == UTLS_AEAD_SEARCH_TLS12 ? "tls12" : "tls13", 0);
    params[1] = salt ? OSSL_PARAM_construct_octet_string(UTLS_AEAD_SEARCH_PARAM_IV,
                                                         (void *)k->iv, k->iv_len)
                     : OSSL_PARAM_construct_end();
    params[2] = OSSL_PARAM_construct_end();
    CHECK(EVP_DecryptInit_ex2(ctx, cipher, k->key, salt ? NULL : k->iv, params) == 1);
    EVP_CIPHER_free(cipher);
    return ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_cursor c = { data, size };
    fuzz_key k;
    UTLS_AEAD_SEARCH *ctxs[P_COUNT] = { NULL };
    unsigned setup;
    uint32_t rng;

    setup_once();
    if (size == 0) {
        return 0;
    }
    setup = fuzz_get_u8(&c);
    rng = ((uint32_t)fuzz_get_u16(&c) << 16) | fuzz_get_u16(&c);
    if (rng == 0) {
        rng = 0x9e3779b9u; /* xorshift's state is never 0 */
    }
    read_key(&k, &c, setup, &rng);
    probe_new(&k, setup >> 4);

    ctxs[P_PROV] = utls_aead_search_new(libctx, NULL, k.kind, k.layout, k.key, k.key_len, k.iv,
                                        k.iv_len, UTLS_AEAD_SEARCH_PATH_PROVIDER);
    ctxs[P_EVP] = utls_aead_search_new(libctx, NULL, k.kind, k.layout, k.key, k.key_len, k.iv,
                                       k.iv_len, UTLS_AEAD_SEARCH_PATH_EVP);
    CHECK(ctxs[P_PROV] != NULL && ctxs[P_EVP] != NULL);
    CHECK(utls_aead_search_get_path(ctxs[P_PROV]) == UTLS_AEAD_SEARCH_PATH_PROVIDER);
    CHECK(utls_aead_search_get_path(ctxs[P_EVP]) == UTLS_AEAD_SEARCH_PATH_EVP);
    /* AUTO takes the provider when the library context has it. */
    UTLS_AEAD_SEARCH *automatic = utls_aead_search_new(libctx, NULL, k.kind, k.layout, k.key,
                                                       k.key_len, k.iv, k.iv_len,
                                                       UTLS_AEAD_SEARCH_PATH_AUTO);
    CHECK(automatic != NULL);
    CHECK(utls_aead_search_get_path(automatic) == UTLS_AEAD_SEARCH_PATH_PROVIDER);
    utls_aead_search_free(automatic);
    if (k.explicit_len != 0) {
        /* The provider builds its key (H and its powers) at the first
         * search: every search on this context runs with the flag set. */
        ctxs[P_PORTABLE] = utls_aead_search_new(libctx, NULL, k.kind, k.layout, k.key, k.key_len,
                                                k.iv, k.iv_len, UTLS_AEAD_SEARCH_PATH_PROVIDER);
        CHECK(ctxs[P_PORTABLE] != NULL);
    }
    copy_src = keyed_search_cipher(&k);
    for (unsigned i = 0; i < MAX_RECORDS && c.len > 0; i++) {
        one_record(&c, &k, ctxs, &rng, i);
    }
    for (int p = 0; p < P_COUNT; p++) {
        utls_aead_search_free(ctxs[p]);
    }
    EVP_CIPHER_CTX_free(copy_src);
    copy_src = NULL;
    CHECK(ERR_peek_error() == 0);
    return 0;
}
