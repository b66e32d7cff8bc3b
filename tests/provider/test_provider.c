/*
 * Tests of the "utls" provider and the aeadsearch client (label provider).
 *
 * Records are made with the ordinary EVP AEADs (the known answers), then
 * searched on three paths over the same inputs, which must agree exactly:
 *   builtin  the provider registered in process (OSSL_PROVIDER_add_builtin)
 *   module   build/lib/ossl-modules/utls.so, found through OPENSSL_MODULES
 *   evp      the client's EVP trial-decryption fallback
 * With the argument "config" the program instead checks that openssl.cnf
 * (OPENSSL_CONF, a [provider_sect] naming the module) makes the default
 * library context use the provider.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

#include "gf128.h"
#include "utls/aeadsearch.h"
#include "utls_prov.h"
#include "test_rng.h"

/* Room for records one byte above the limit. */
#define MAX_REC (UTLS_AEAD_SEARCH_MAX_RECORD_LEN + 64)

enum { PATH_BUILTIN, PATH_MODULE, PATH_EVP, PATH_COUNT };
static const char *const path_names[PATH_COUNT] = { "builtin", "module", "evp" };

static OSSL_LIB_CTX *libctx[PATH_COUNT];
static OSSL_PROVIDER *prov_default[PATH_COUNT], *prov_utls[PATH_COUNT];

/* A deterministic generator: failures reproduce. */
static uint64_t rng_state = 0x75544c5370726f76ULL;

static uint64_t rng(void)
{
    return test_xorshift64(&rng_state);
}

static void rng_bytes(unsigned char *p, size_t n)
{
    while (n-- > 0) {
        *p++ = (unsigned char)rng();
    }
}

static size_t key_len_of(int kind)
{
    return kind == UTLS_AEAD_SEARCH_AES_128_GCM ? 16 : 32;
}

static int is_gcm(int kind)
{
    return kind != UTLS_AEAD_SEARCH_CHACHA20_POLY1305;
}

static size_t iv_len_of(int kind, int layout)
{
    return is_gcm(kind) && layout == UTLS_AEAD_SEARCH_TLS12 ? 4 : 12;
}

static size_t explicit_of(int kind, int layout)
{
    return is_gcm(kind) && layout == UTLS_AEAD_SEARCH_TLS12 ? 8 : 0;
}

static const char *cipher_name(int kind)
{
    return kind == UTLS_AEAD_SEARCH_AES_128_GCM   ? "AES-128-GCM"
           : kind == UTLS_AEAD_SEARCH_AES_256_GCM ? "AES-256-GCM"
                                                  : "ChaCha20-Poly1305";
}

/* One key and record: the known answer. */
typedef struct {
    int kind, layout;
    unsigned char key[32], iv[12];
    uint64_t seq;
    unsigned char plain[MAX_REC];
    size_t plain_len;
    unsigned char record[MAX_REC];
    size_t record_len;
} vector;

/* Encrypts |v->plain| as a record with sequence number |v->seq| with EVP. */
static void seal(vector *v)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    size_t ex = explicit_of(v->kind, v->layout);
    unsigned char nonce[12], aad[13], *c;
    const unsigned char *a;
    size_t a_len;
    int i, l;

    v->record_len = 5 + ex + v->plain_len + 16;
    assert_true(v->record_len <= MAX_REC);
    v->record[0] = 23;
    v->record[1] = 3;
    v->record[2] = 3;
    v->record[3] = (unsigned char)((v->record_len - 5) >> 8);
    v->record[4] = (unsigned char)(v->record_len - 5);
    if (ex != 0) {
        memcpy(nonce, v->iv, 4);
        rng_bytes(v->record + 5, 8);
        memcpy(nonce + 4, v->record + 5, 8);
    } else {
        memcpy(nonce, v->iv, 12);
        for (i = 0; i < 8; i++) {
            nonce[4 + i] ^= (unsigned char)(v->seq >> (56 - 8 * i));
        }
    }
    if (v->layout == UTLS_AEAD_SEARCH_TLS12) {
        for (i = 0; i < 8; i++) {
            aad[i] = (unsigned char)(v->seq >> (56 - 8 * i));
        }
        memcpy(aad + 8, v->record, 3);
        aad[11] = (unsigned char)(v->plain_len >> 8);
        aad[12] = (unsigned char)v->plain_len;
        a = aad;
        a_len = 13;
    } else {
        a = v->record;
        a_len = 5;
    }
    c = v->record + 5 + ex;
    assert_non_null(ctx);
    assert_int_equal(EVP_EncryptInit_ex2(ctx, EVP_CIPHER_fetch(NULL, cipher_name(v->kind), NULL),
                                         v->key, nonce, NULL),
                     1);
    assert_int_equal(EVP_EncryptUpdate(ctx, NULL, &l, a, (int)a_len), 1);
    l = 0;
    if (v->plain_len > 0) {
        assert_int_equal(EVP_EncryptUpdate(ctx, c, &l, v->plain, (int)v->plain_len), 1);
    }
    assert_int_equal(EVP_EncryptFinal_ex(ctx, c + l, &l), 1);
    assert_int_equal(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, c + v->plain_len), 1);
    EVP_CIPHER_free((EVP_CIPHER *)EVP_CIPHER_CTX_get0_cipher(ctx));
    EVP_CIPHER_CTX_free(ctx);
}

static void make_vector(vector *v, int kind, int layout, size_t plain_len)
{
    memset(v, 0, sizeof(*v));
    v->kind = kind;
    v->layout = layout;
    rng_bytes(v->key, sizeof(v->key));
    rng_bytes(v->iv, sizeof(v->iv));
    v->seq = rng() >> (rng() % 64);
    v->plain_len = plain_len;
    rng_bytes(v->plain, plain_len);
    seal(v);
}

typedef struct {
    enum utls_aead_search_result r;
    size_t index;
    size_t len;
    unsigned char out[MAX_REC];
} answer;

static void search_on(int path, const vector *v, const uint64_t *seqs, size_t n, answer *a)
{
    int want = path == PATH_EVP ? UTLS_AEAD_SEARCH_PATH_EVP : UTLS_AEAD_SEARCH_PATH_PROVIDER;
    UTLS_AEAD_SEARCH *s = utls_aead_search_new(libctx[path], NULL, v->kind, v->layout, v->key,
                                               key_len_of(v->kind), v->iv,
                                               iv_len_of(v->kind, v->layout), want);

    assert_non_null(s);
    assert_int_equal(utls_aead_search_get_path(s), want);
    memset(a, 0xa5, sizeof(*a));
    a->r = utls_aead_search_run(s, a->out, &a->len, sizeof(a->out), &a->index, v->record,
                                v->record_len, seqs, n);
    utls_aead_search_free(s);
    assert_int_equal(ERR_peek_error(), 0);
}

/* Every path gives |want| (index or SIZE_MAX) and, when found, the plaintext. */
static void expect_all(const vector *v, const uint64_t *seqs, size_t n, size_t want)
{
    static answer a;
    int p;
    size_t i;

    for (p = 0; p < PATH_COUNT; p++) {
        search_on(p, v, seqs, n, &a);
        if (want == SIZE_MAX) {
            if (a.r != UTLS_AEAD_SEARCH_NOT_FOUND) {
                fail_msg("%s: expected no match, got %d index %zu", path_names[p], a.r,
                         a.index);
            }
            assert_int_equal(a.index, SIZE_MAX);
            assert_int_equal(a.len, 0);
            for (i = 0; i < v->record_len; i++) {
                assert_int_equal(a.out[i], 0); /* wiped */
            }
            continue;
        }
        if (a.r != UTLS_AEAD_SEARCH_FOUND || a.index != want) {
            fail_msg("%s: kind %d layout %d n %zu: got %d index %zu, want %zu", path_names[p],
                     v->kind, v->layout, n, a.r, a.index, want);
        }
        assert_int_equal(a.len, v->plain_len);
        assert_memory_equal(a.out, v->plain, v->plain_len);
    }
}

/* |n| candidates around the true sequence number, the true one at |pos|. */
static void candidates(uint64_t *seqs, size_t n, uint64_t truth, size_t pos)
{
    size_t i;

    for (i = 0; i < n; i++) {
        seqs[i] = truth + 1 + i; /* never the truth */
    }
    if (pos < n) {
        seqs[pos] = truth;
    }
}

static const int kinds[] = { UTLS_AEAD_SEARCH_AES_128_GCM, UTLS_AEAD_SEARCH_AES_256_GCM,
                             UTLS_AEAD_SEARCH_CHACHA20_POLY1305 };
static const int layouts[] = { UTLS_AEAD_SEARCH_TLS13, UTLS_AEAD_SEARCH_TLS12 };
static const size_t counts[] = { 1, 8, 32, 128 };

static vector vec;
static uint64_t seqs[UTLS_AEAD_SEARCH_MAX_CANDIDATES];

static void test_provider_gf128_clmul_matches_portable(void **state)
{
    int i;

    (void)state;
    for (i = 0; i < 20000; i++) {
        utls_gf128 a = { rng(), rng() }, b = { rng(), rng() };
        utls_gf128 x = utls_gf128_mul(a, b), y = utls_gf128_mul_portable(a, b);

        assert_true(x.hi == y.hi && x.lo == y.lo);
    }
}

static void test_provider_true_candidate_at_random_position(void **state)
{
    size_t k, l, c, round;

    (void)state;
    for (k = 0; k < 3; k++) {
        for (l = 0; l < 2; l++) {
            for (c = 0; c < 4; c++) {
                for (round = 0; round < 4; round++) {
                    size_t pos = (size_t)(rng() % counts[c]);

                    make_vector(&vec, kinds[k], layouts[l], 1 + (size_t)(rng() % 1500));
                    candidates(seqs, counts[c], vec.seq, pos);
                    expect_all(&vec, seqs, counts[c], pos);
                }
            }
        }
    }
}

static void test_provider_record_lengths(void **state)
{
    /* Empty, partial, whole and many blocks, a full Ethernet segment, the
     * largest TLS 1.3 fragment, the largest TLS 1.2 GCM fragment (explicit
     * nonce and tag included), and one byte more than that (refused). */
    static const size_t lens[] = { 0, 1, 15, 16, 17, 1426, 16384 + 256 - 16 - 1,
                                   16384 + 2048 - 8 - 16, 16384 + 2048 - 8 - 16 + 1 };
    size_t k, l, i;

    (void)state;
    for (k = 0; k < 3; k++) {
        for (l = 0; l < 2; l++) {
            for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
                size_t pos;

                make_vector(&vec, kinds[k], layouts[l], lens[i]);
                pos = (size_t)(rng() % 8);
                candidates(seqs, 8, vec.seq, pos);
                expect_all(&vec, seqs, 8,
                           vec.record_len > UTLS_AEAD_SEARCH_MAX_RECORD_LEN ? SIZE_MAX : pos);
            }
        }
    }
}

static void test_provider_sequence_numbers_far_apart(void **state)
{
    /* TLS 1.2 GCM multiplies by the difference of sequence numbers: every bit
     * of it must count. */
    size_t k, l, i;

    (void)state;
    for (k = 0; k < 3; k++) {
        for (l = 0; l < 2; l++) {
            make_vector(&vec, kinds[k], layouts[l], 300);
            for (i = 0; i < 32; i++) {
                seqs[i] = rng();
            }
            seqs[0] = vec.seq ^ 0x8000000000000000ULL;
            seqs[1] = vec.seq ^ 1;
            seqs[21] = vec.seq;
            expect_all(&vec, seqs, 32, 21);
            seqs[21] = vec.seq ^ ((uint64_t)1 << (rng() % 64));
            expect_all(&vec, seqs, 32, SIZE_MAX);
        }
    }
}

static void test_provider_none_matching(void **state)
{
    size_t k, l, c;

    (void)state;
    for (k = 0; k < 3; k++) {
        for (l = 0; l < 2; l++) {
            for (c = 0; c < 4; c++) {
                make_vector(&vec, kinds[k], layouts[l], 1000);
                candidates(seqs, counts[c], vec.seq, SIZE_MAX);
                expect_all(&vec, seqs, counts[c], SIZE_MAX);
            }
        }
    }
}

static void test_provider_duplicates_give_first(void **state)
{
    size_t k, l;

    (void)state;
    for (k = 0; k < 3; k++) {
        for (l = 0; l < 2; l++) {
            make_vector(&vec, kinds[k], layouts[l], 100);
            candidates(seqs, 32, vec.seq, 5);
            seqs[9] = vec.seq;
            seqs[31] = vec.seq;
            expect_all(&vec, seqs, 32, 5);
        }
    }
}

static void tamper_and_expect_none(size_t offset)
{
    vec.record[offset] ^= (unsigned char)(1u << (rng() % 8));
    expect_all(&vec, seqs, 32, SIZE_MAX);
}

static void test_provider_tampered_records(void **state)
{
    size_t k, l;

    (void)state;
    for (k = 0; k < 3; k++) {
        for (l = 0; l < 2; l++) {
            size_t ex = explicit_of(kinds[k], layouts[l]);
            size_t pos = (size_t)(rng() % 32), body;

            make_vector(&vec, kinds[k], layouts[l], 700);
            candidates(seqs, 32, vec.seq, pos);
            expect_all(&vec, seqs, 32, pos);
            body = vec.record_len - 5 - ex - 16;

            tamper_and_expect_none(vec.record_len - 1 - (size_t)(rng() % 16)); /* tag */
            seal(&vec);
            tamper_and_expect_none(5 + ex + (size_t)(rng() % body)); /* ciphertext */
            seal(&vec);
            tamper_and_expect_none(0); /* header: type */
            seal(&vec);
            tamper_and_expect_none(1 + (size_t)(rng() % 2)); /* header: version */
            seal(&vec);
            tamper_and_expect_none(3 + (size_t)(rng() % 2)); /* header: length */
            if (ex != 0) {
                seal(&vec);
                tamper_and_expect_none(5 + (size_t)(rng() % ex)); /* explicit nonce */
            }
            seal(&vec);
            expect_all(&vec, seqs, 32, pos);
        }
    }
}

static void test_provider_malformed_records(void **state)
{
    size_t k, l;

    (void)state;
    for (k = 0; k < 3; k++) {
        for (l = 0; l < 2; l++) {
            size_t full;

            make_vector(&vec, kinds[k], layouts[l], 0);
            candidates(seqs, 4, vec.seq, 0);
            expect_all(&vec, seqs, 4, 0);
            full = vec.record_len;
            /* Shorter than header + tag (+ explicit nonce), header adjusted. */
            vec.record_len = full - 1;
            vec.record[3] = (unsigned char)((vec.record_len - 5) >> 8);
            vec.record[4] = (unsigned char)(vec.record_len - 5);
            expect_all(&vec, seqs, 4, SIZE_MAX);
            vec.record_len = 5;
            vec.record[3] = 0;
            vec.record[4] = 0;
            expect_all(&vec, seqs, 4, SIZE_MAX);
        }
    }
}

static void test_provider_bad_arguments(void **state)
{
    static answer a;
    int p;

    (void)state;
    make_vector(&vec, UTLS_AEAD_SEARCH_AES_128_GCM, UTLS_AEAD_SEARCH_TLS13, 64);
    candidates(seqs, 4, vec.seq, 1);
    /* Key and IV lengths. */
    assert_null(utls_aead_search_new(libctx[PATH_BUILTIN], NULL, UTLS_AEAD_SEARCH_AES_128_GCM,
                                     UTLS_AEAD_SEARCH_TLS13, vec.key, 32, vec.iv, 12,
                                     UTLS_AEAD_SEARCH_PATH_AUTO));
    assert_null(utls_aead_search_new(libctx[PATH_BUILTIN], NULL, UTLS_AEAD_SEARCH_AES_128_GCM,
                                     UTLS_AEAD_SEARCH_TLS12, vec.key, 16, vec.iv, 12,
                                     UTLS_AEAD_SEARCH_PATH_AUTO));
    assert_null(utls_aead_search_new(libctx[PATH_BUILTIN], NULL, 99, UTLS_AEAD_SEARCH_TLS13,
                                     vec.key, 16, vec.iv, 12, UTLS_AEAD_SEARCH_PATH_AUTO));
    assert_null(utls_aead_search_new(libctx[PATH_BUILTIN], NULL, UTLS_AEAD_SEARCH_AES_128_GCM,
                                     7, vec.key, 16, vec.iv, 12, UTLS_AEAD_SEARCH_PATH_AUTO));
    for (p = 0; p < PATH_COUNT; p++) {
        UTLS_AEAD_SEARCH *s = utls_aead_search_new(
            libctx[p], NULL, UTLS_AEAD_SEARCH_AES_128_GCM, UTLS_AEAD_SEARCH_TLS13, vec.key, 16,
            vec.iv, 12, p == PATH_EVP ? UTLS_AEAD_SEARCH_PATH_EVP : UTLS_AEAD_SEARCH_PATH_AUTO);

        assert_non_null(s);
        /* The output must hold the whole record. */
        assert_int_equal(utls_aead_search_run(s, a.out, &a.len, vec.record_len - 1, &a.index,
                                              vec.record, vec.record_len, seqs, 4),
                         UTLS_AEAD_SEARCH_ERROR);
        assert_int_equal(utls_aead_search_run(s, a.out, &a.len, sizeof(a.out), &a.index,
                                              vec.record, vec.record_len, seqs, 0),
                         UTLS_AEAD_SEARCH_ERROR);
        assert_int_equal(utls_aead_search_run(s, a.out, &a.len, sizeof(a.out), &a.index,
                                              vec.record, vec.record_len, seqs,
                                              UTLS_AEAD_SEARCH_MAX_CANDIDATES + 1),
                         UTLS_AEAD_SEARCH_ERROR);
        assert_int_equal(utls_aead_search_run(s, a.out, &a.len, sizeof(a.out), &a.index,
                                              vec.record, vec.record_len, seqs, 4),
                         UTLS_AEAD_SEARCH_FOUND);
        assert_int_equal(a.index, 1);
        utls_aead_search_free(s);
    }
    utls_aead_search_free(NULL);
    ERR_clear_error();
}

static void test_provider_max_candidates(void **state)
{
    size_t pos = UTLS_AEAD_SEARCH_MAX_CANDIDATES - 1 - (size_t)(rng() % 100);
    size_t k, l;

    (void)state;
    for (k = 0; k < 3; k++) {
        for (l = 0; l < 2; l++) {
            make_vector(&vec, kinds[k], layouts[l], 200);
            candidates(seqs, UTLS_AEAD_SEARCH_MAX_CANDIDATES, vec.seq, pos);
            expect_all(&vec, seqs, UTLS_AEAD_SEARCH_MAX_CANDIDATES, pos);
        }
    }
}

static void test_provider_paths_and_fallback(void **state)
{
    OSSL_LIB_CTX *plain = OSSL_LIB_CTX_new();
    OSSL_PROVIDER *def = OSSL_PROVIDER_load(plain, "default");
    UTLS_AEAD_SEARCH *s;
    static answer a;

    (void)state;
    make_vector(&vec, UTLS_AEAD_SEARCH_AES_256_GCM, UTLS_AEAD_SEARCH_TLS13, 64);
    candidates(seqs, 8, vec.seq, 6);
    /* Without the provider: PROVIDER fails, AUTO falls back to EVP. */
    assert_null(utls_aead_search_new(plain, NULL, vec.kind, vec.layout, vec.key, 32, vec.iv, 12,
                                     UTLS_AEAD_SEARCH_PATH_PROVIDER));
    s = utls_aead_search_new(plain, NULL, vec.kind, vec.layout, vec.key, 32, vec.iv, 12,
                             UTLS_AEAD_SEARCH_PATH_AUTO);
    assert_non_null(s);
    assert_int_equal(utls_aead_search_get_path(s), UTLS_AEAD_SEARCH_PATH_EVP);
    utls_aead_search_free(s);
    assert_int_equal(ERR_peek_error(), 0); /* the failed fetch left nothing behind */
    /* With it: AUTO takes the provider. */
    s = utls_aead_search_new(libctx[PATH_MODULE], NULL, vec.kind, vec.layout, vec.key, 32,
                             vec.iv, 12, UTLS_AEAD_SEARCH_PATH_AUTO);
    assert_non_null(s);
    assert_int_equal(utls_aead_search_get_path(s), UTLS_AEAD_SEARCH_PATH_PROVIDER);
    utls_aead_search_free(s);
    /* The one-shot call. */
    assert_int_equal(utls_aead_search(libctx[PATH_MODULE], vec.kind, vec.layout, vec.key, 32,
                                      vec.iv, 12, UTLS_AEAD_SEARCH_PATH_PROVIDER, a.out, &a.len,
                                      sizeof(a.out), &a.index, vec.record, vec.record_len, seqs,
                                      8),
                     UTLS_AEAD_SEARCH_FOUND);
    assert_int_equal(a.index, 6);
    OSSL_PROVIDER_unload(def);
    OSSL_LIB_CTX_free(plain);
}

/* 1 when utls.so from OPENSSL_MODULES is mapped into this process. */
static int module_mapped(void)
{
    char line[4096], want[4096];
    FILE *f = fopen("/proc/self/maps", "r");
    int found = 0;

    snprintf(want, sizeof(want), "%s/utls.so", getenv("OPENSSL_MODULES"));
    if (f == NULL) {
        return 0;
    }
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        found = strstr(line, want) != NULL;
    }
    fclose(f);
    return found;
}

/* The provider through EVP directly, as README.md shows, including a copy of
 * the context (dupctx) and the module's identity. */
static void test_provider_evp_interface(void **state)
{
    EVP_CIPHER *cipher = EVP_CIPHER_fetch(libctx[PATH_MODULE], UTLS_AEAD_SEARCH_AES_128_GCM_NAME,
                                          NULL);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new(), *copy = EVP_CIPHER_CTX_new();
    unsigned char be[8 * 8], out[2048];
    OSSL_PARAM params[3];
    const char *name = NULL;
    int match = -2, l, l2, i, j;

    (void)state;
    assert_non_null(cipher);
    assert_string_equal(OSSL_PROVIDER_get0_name(EVP_CIPHER_get0_provider(cipher)), "utls");
    params[0] = OSSL_PARAM_construct_utf8_ptr(OSSL_PROV_PARAM_NAME, (char **)&name, 0);
    params[1] = OSSL_PARAM_construct_end();
    assert_int_equal(OSSL_PROVIDER_get_params(prov_utls[PATH_MODULE], params), 1);
    assert_string_equal(name, "uTLS AEAD candidate search provider");
    assert_true(module_mapped());

    make_vector(&vec, UTLS_AEAD_SEARCH_AES_128_GCM, UTLS_AEAD_SEARCH_TLS13, 1426);
    candidates(seqs, 8, vec.seq, 3);
    for (i = 0; i < 8; i++) {
        for (j = 0; j < 8; j++) {
            be[8 * i + j] = (unsigned char)(seqs[i] >> (56 - 8 * j));
        }
    }
    /* The static IV as the init IV; the layout defaults to tls13. */
    params[0] = OSSL_PARAM_construct_octet_string(UTLS_AEAD_SEARCH_PARAM_SEQS, be, sizeof(be));
    params[1] = OSSL_PARAM_construct_end();
    assert_int_equal(EVP_DecryptInit_ex2(ctx, cipher, vec.key, vec.iv, params), 1);
    assert_int_equal(EVP_CIPHER_CTX_copy(copy, ctx), 1);
    assert_int_equal(EVP_EncryptInit_ex2(copy, cipher, vec.key, vec.iv, NULL), 0);
    ERR_clear_error();
    EVP_CIPHER_CTX_free(copy);
    copy = EVP_CIPHER_CTX_new();
    assert_int_equal(EVP_CIPHER_CTX_copy(copy, ctx), 1);
    assert_int_equal(EVP_DecryptUpdate(copy, out, &l, vec.record, (int)vec.record_len), 1);
    assert_int_equal(l, (int)vec.plain_len);
    assert_memory_equal(out, vec.plain, vec.plain_len);
    assert_int_equal(EVP_DecryptFinal_ex(copy, out + l, &l2), 1);
    params[0] = OSSL_PARAM_construct_int(UTLS_AEAD_SEARCH_PARAM_MATCH, &match);
    assert_int_equal(EVP_CIPHER_CTX_get_params(copy, params), 1);
    assert_int_equal(match, 3);
    /* The original: tampered, no match, Final fails. */
    vec.record[10] ^= 1;
    assert_int_equal(EVP_DecryptUpdate(ctx, out, &l, vec.record, (int)vec.record_len), 1);
    assert_int_equal(l, 0);
    assert_int_equal(EVP_DecryptFinal_ex(ctx, out, &l2), 0);
    assert_int_equal(EVP_CIPHER_CTX_get_params(ctx, params), 1);
    assert_int_equal(match, -1);
    ERR_clear_error();
    EVP_CIPHER_CTX_free(ctx);
    EVP_CIPHER_CTX_free(copy);
    EVP_CIPHER_free(cipher);
}

static int setup_paths(void **state)
{
    const char *modules = getenv("OPENSSL_MODULES");
    int p;

    (void)state;
    if (modules == NULL) {
        fprintf(stderr, "OPENSSL_MODULES must name the directory of utls.so\n");
        return -1;
    }
    for (p = 0; p < PATH_COUNT; p++) {
        if ((libctx[p] = OSSL_LIB_CTX_new()) == NULL
            || (prov_default[p] = OSSL_PROVIDER_load(libctx[p], "default")) == NULL) {
            return -1;
        }
    }
    if (OSSL_PROVIDER_add_builtin(libctx[PATH_BUILTIN], "utls", utls_provider_init) != 1
        || (prov_utls[PATH_BUILTIN] = OSSL_PROVIDER_load(libctx[PATH_BUILTIN], "utls")) == NULL
        || (prov_utls[PATH_MODULE] = OSSL_PROVIDER_load(libctx[PATH_MODULE], "utls")) == NULL) {
        ERR_print_errors_fp(stderr);
        return -1;
    }
    return 0;
}

static int teardown_paths(void **state)
{
    int p;

    (void)state;
    for (p = 0; p < PATH_COUNT; p++) {
        if (prov_utls[p] != NULL) {
            OSSL_PROVIDER_unload(prov_utls[p]);
        }
        if (prov_default[p] != NULL) {
            OSSL_PROVIDER_unload(prov_default[p]);
        }
        OSSL_LIB_CTX_free(libctx[p]);
    }
    return 0;
}

/* Run with OPENSSL_CONF naming a configuration that activates the module:
 * the default library context (NULL) then has the provider. */
static void test_provider_openssl_cnf(void **state)
{
    UTLS_AEAD_SEARCH *s;
    static answer a;
    size_t k, l;

    (void)state;
    assert_int_equal(OSSL_PROVIDER_available(NULL, "utls"), 1);
    assert_int_equal(OSSL_PROVIDER_available(NULL, "default"), 1);
    for (k = 0; k < 3; k++) {
        for (l = 0; l < 2; l++) {
            make_vector(&vec, kinds[k], layouts[l], 1426);
            candidates(seqs, 32, vec.seq, 17);
            s = utls_aead_search_new(NULL, NULL, vec.kind, vec.layout, vec.key,
                                     key_len_of(vec.kind), vec.iv,
                                     iv_len_of(vec.kind, vec.layout), UTLS_AEAD_SEARCH_PATH_AUTO);
            assert_non_null(s);
            assert_int_equal(utls_aead_search_get_path(s), UTLS_AEAD_SEARCH_PATH_PROVIDER);
            assert_int_equal(utls_aead_search_run(s, a.out, &a.len, sizeof(a.out), &a.index,
                                                  vec.record, vec.record_len, seqs, 32),
                             UTLS_AEAD_SEARCH_FOUND);
            assert_int_equal(a.index, 17);
            assert_memory_equal(a.out, vec.plain, vec.plain_len);
            utls_aead_search_free(s);
        }
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest paths[] = {
        cmocka_unit_test(test_provider_gf128_clmul_matches_portable),
        cmocka_unit_test(test_provider_true_candidate_at_random_position),
        cmocka_unit_test(test_provider_record_lengths),
        cmocka_unit_test(test_provider_sequence_numbers_far_apart),
        cmocka_unit_test(test_provider_none_matching),
        cmocka_unit_test(test_provider_duplicates_give_first),
        cmocka_unit_test(test_provider_tampered_records),
        cmocka_unit_test(test_provider_malformed_records),
        cmocka_unit_test(test_provider_bad_arguments),
        cmocka_unit_test(test_provider_max_candidates),
        cmocka_unit_test(test_provider_paths_and_fallback),
        cmocka_unit_test(test_provider_evp_interface),
    };
    const struct CMUnitTest config[] = {
        cmocka_unit_test(test_provider_openssl_cnf),
    };

    if (argc > 1 && strcmp(argv[1], "config") == 0) {
        return cmocka_run_group_tests_name("provider_config", config, NULL, NULL);
    }
    return cmocka_run_group_tests_name("provider", paths, setup_paths, teardown_paths);
}
