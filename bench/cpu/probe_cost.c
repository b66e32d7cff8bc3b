/*
 * probe_cost.c: what it costs a receiver to find which of N candidate
 * sequence numbers a 1448-byte record was sealed under (issue 6, DESIGN.md
 * sections 5 and 6), printed as JSON under the key "probe_cost".
 *
 * Per cipher (TLS 1.3 AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305, and TLS 1.2
 * AES-128-GCM) and N = 1, 8, 32, 128, with the true candidate last so that all
 * N are checked:
 *   single    one ordinary EVP decryption of the record under the right
 *             nonce (keyed context: set nonce, AAD, decrypt, check tag)
 *   evp       the aeadsearch client's EVP fallback: up to N trial
 *             decryptions on one keyed context, a new nonce each
 *   evp_copy  the same with EVP_CIPHER_CTX_copy of the keyed context before
 *             every trial (how trial decryption is often written)
 *   provider  the aeadsearch client on the "utls" provider (utls.so loaded
 *             from --module-dir): one GHASH, one AES block per candidate
 *             (TLS 1.2: one GF(2^128) multiplication), one CTR decryption
 *   ern       explicit record numbers (docs/ern.md): per candidate one block
 *             cipher operation compared with the 8-byte number at the start
 *             of the plaintext, as utls_ern_block_matches does, then one
 *             ordinary decryption (TLS 1.3 only: a TLS 1.2 GCM nonce is
 *             explicit, so the number needs no search there)
 * Every variant is checked for the right answer before it is timed.
 *
 * Timing: CLOCK_THREAD_CPUTIME_ID around batches of records; every repetition runs
 * every variant once, in an order rotated per repetition (interleaved, so
 * that drift and other load hit all alike); the figure is the median over
 * repetitions of ns per record. Ratios divide by "single" of the same cipher.
 *
 * Usage: probe_cost --module-dir DIR [--out FILE] [--quick] [--reps N]
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

#include "utls/aeadsearch.h"

#define RECORD_WIRE_BYTES 1448
#define NUM_COUNTS 4
#define MAX_N 128
#define ERN_LEN 8

static const size_t counts[NUM_COUNTS] = { 1, 8, 32, 128 };

enum method { M_SINGLE, M_EVP, M_EVP_COPY, M_PROVIDER, M_ERN, NUM_METHODS };
static const char *const method_names[NUM_METHODS] = { "single", "evp", "evp_copy", "provider",
                                                       "ern" };

typedef struct {
    const char *name;
    const char *evp_name;
    int kind;
    int layout;
    unsigned char key[32];
    size_t key_len;
    unsigned char iv[12];
    size_t iv_len;
    uint64_t seq;
    unsigned char record[RECORD_WIRE_BYTES];
    unsigned char plain[RECORD_WIRE_BYTES];
    size_t plain_len;
    uint64_t seqs[NUM_COUNTS][MAX_N]; /* the true one last */
    EVP_CIPHER_CTX *dec;              /* keyed AEAD */
    EVP_CIPHER_CTX *trial;            /* evp_copy's per-trial copy */
    EVP_CIPHER_CTX *blk;              /* ern: AES-ECB or ChaCha20 */
    UTLS_AEAD_SEARCH *s_evp, *s_prov;
    double result[NUM_METHODS][NUM_COUNTS]; /* median ns per record */
} bench_case;

static bench_case cases[] = {
    { .name = "aes128gcm", .evp_name = "AES-128-GCM", .kind = UTLS_AEAD_SEARCH_AES_128_GCM,
      .layout = UTLS_AEAD_SEARCH_TLS13 },
    { .name = "aes256gcm", .evp_name = "AES-256-GCM", .kind = UTLS_AEAD_SEARCH_AES_256_GCM,
      .layout = UTLS_AEAD_SEARCH_TLS13 },
    { .name = "chacha20poly1305", .evp_name = "ChaCha20-Poly1305",
      .kind = UTLS_AEAD_SEARCH_CHACHA20_POLY1305, .layout = UTLS_AEAD_SEARCH_TLS13 },
    { .name = "aes128gcm_tls12", .evp_name = "AES-128-GCM", .kind = UTLS_AEAD_SEARCH_AES_128_GCM,
      .layout = UTLS_AEAD_SEARCH_TLS12 },
};
#define NUM_CASES (sizeof(cases) / sizeof(cases[0]))

static OSSL_LIB_CTX *libctx;
static unsigned char out_buf[RECORD_WIRE_BYTES];
static volatile size_t sink;

static void die(const char *what)
{
    fprintf(stderr, "probe_cost: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

static double now_ns(void)
{
    struct timespec t;

    /* The thread's CPU time: the machine may be shared, and time this thread
     * spends preempted is not a cost of the probe. */
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void put_be64(unsigned char *p, uint64_t v)
{
    int i;

    for (i = 7; i >= 0; i--) {
        p[i] = (unsigned char)v;
        v >>= 8;
    }
}

static size_t explicit_len(const bench_case *c)
{
    return c->kind != UTLS_AEAD_SEARCH_CHACHA20_POLY1305 && c->layout == UTLS_AEAD_SEARCH_TLS12
        ? 8 : 0;
}

/* The nonce and additional data of |seq| for |c|'s record. */
static size_t nonce_aad(const bench_case *c, uint64_t seq, unsigned char nonce[12],
                        unsigned char aad[13])
{
    int i;

    if (explicit_len(c) != 0) {
        memcpy(nonce, c->iv, 4);
        memcpy(nonce + 4, c->record + 5, 8);
    } else {
        memcpy(nonce, c->iv, 12);
        for (i = 0; i < 8; i++) {
            nonce[4 + i] ^= (unsigned char)(seq >> (56 - 8 * i));
        }
    }
    if (c->layout == UTLS_AEAD_SEARCH_TLS12) {
        put_be64(aad, seq);
        memcpy(aad + 8, c->record, 3);
        aad[11] = (unsigned char)(c->plain_len >> 8);
        aad[12] = (unsigned char)c->plain_len;
        return 13;
    }
    memcpy(aad, c->record, 5);
    return 5;
}

/* One ordinary AEAD decryption on |ctx| under |seq|: 1 if it authenticates. */
static int open_record(const bench_case *c, EVP_CIPHER_CTX *ctx, uint64_t seq)
{
    unsigned char nonce[12], aad[13];
    size_t aad_len = nonce_aad(c, seq, nonce, aad), ex = explicit_len(c);
    const unsigned char *ct = c->record + 5 + ex;
    int l, l2;

    if (EVP_DecryptInit_ex(ctx, NULL, NULL, NULL, nonce) <= 0
        || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, (void *)(ct + c->plain_len)) <= 0
        || EVP_DecryptUpdate(ctx, NULL, &l, aad, (int)aad_len) <= 0
        || EVP_DecryptUpdate(ctx, out_buf, &l, ct, (int)c->plain_len) <= 0) {
        return 0;
    }
    return EVP_DecryptFinal_ex(ctx, out_buf + l, &l2) > 0;
}

/* utls_ern_block_matches, for this benchmark's keys. */
static int ern_block_matches(const bench_case *c, uint64_t seq)
{
    unsigned char nonce[12], aad[13], blk[16], ks[64], want[ERN_LEN];
    int l, i;

    nonce_aad(c, seq, nonce, aad);
    if (c->kind == UTLS_AEAD_SEARCH_CHACHA20_POLY1305) {
        /* RFC 8439 2.8: the payload starts at block counter 1. */
        unsigned char iv[16] = { 1, 0, 0, 0 };
        static const unsigned char zero[ERN_LEN];

        memcpy(iv + 4, nonce, 12);
        if (EVP_EncryptInit_ex(c->blk, NULL, NULL, c->key, iv) <= 0
            || EVP_EncryptUpdate(c->blk, ks, &l, zero, ERN_LEN) <= 0) {
            return 0;
        }
    } else {
        /* SP 800-38D: the first plaintext block uses counter 2. */
        memcpy(blk, nonce, 12);
        blk[12] = blk[13] = blk[14] = 0;
        blk[15] = 2;
        if (EVP_EncryptUpdate(c->blk, ks, &l, blk, 16) <= 0) {
            return 0;
        }
    }
    put_be64(want, seq);
    for (i = 0; i < ERN_LEN; i++) {
        ks[i] ^= c->record[5 + i];
    }
    return CRYPTO_memcmp(ks, want, ERN_LEN) == 0;
}

/* One record's work for |m| with |n| candidates; returns the index found or
 * SIZE_MAX. */
static size_t run_once(bench_case *c, enum method m, size_t ci)
{
    size_t n = counts[ci], i, len, index = SIZE_MAX;
    const uint64_t *seqs = c->seqs[ci];

    switch (m) {
    case M_SINGLE:
        return open_record(c, c->dec, c->seq) ? 0 : SIZE_MAX;
    case M_EVP:
        return utls_aead_search_run(c->s_evp, out_buf, &len, sizeof(out_buf), &index, c->record,
                                    sizeof(c->record), seqs, n) == UTLS_AEAD_SEARCH_FOUND
            ? index : SIZE_MAX;
    case M_PROVIDER:
        return utls_aead_search_run(c->s_prov, out_buf, &len, sizeof(out_buf), &index,
                                    c->record, sizeof(c->record), seqs, n)
                == UTLS_AEAD_SEARCH_FOUND
            ? index : SIZE_MAX;
    case M_EVP_COPY:
        for (i = 0; i < n; i++) {
            if (EVP_CIPHER_CTX_copy(c->trial, c->dec) <= 0) {
                die("EVP_CIPHER_CTX_copy");
            }
            if (open_record(c, c->trial, seqs[i])) {
                return i;
            }
        }
        return SIZE_MAX;
    case M_ERN:
        for (i = 0; i < n; i++) {
            if (ern_block_matches(c, seqs[i])) {
                return open_record(c, c->dec, seqs[i]) ? i : SIZE_MAX;
            }
        }
        return SIZE_MAX;
    default:
        return SIZE_MAX;
    }
}

static int method_applies(const bench_case *c, enum method m)
{
    return m != M_ERN || c->layout == UTLS_AEAD_SEARCH_TLS13;
}

static EVP_CIPHER_CTX *keyed(const char *name, const unsigned char *key, int enc)
{
    EVP_CIPHER *cipher = EVP_CIPHER_fetch(libctx, name, NULL);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();

    if (cipher == NULL || ctx == NULL || EVP_CipherInit_ex2(ctx, cipher, key, NULL, enc, NULL) <= 0) {
        die(name);
    }
    EVP_CIPHER_CTX_set_padding(ctx, 0);
    EVP_CIPHER_free(cipher);
    return ctx;
}

static void setup_case(bench_case *c, unsigned int salt)
{
    size_t ex, i, j;
    unsigned char nonce[12], aad[13], *ct;
    size_t aad_len;
    EVP_CIPHER_CTX *enc;
    int l;

    c->key_len = c->kind == UTLS_AEAD_SEARCH_AES_128_GCM ? 16 : 32;
    c->iv_len = explicit_len(c) != 0 ? 4 : 12;
    for (i = 0; i < sizeof(c->key); i++) {
        c->key[i] = (unsigned char)(i * 7 + salt);
    }
    for (i = 0; i < sizeof(c->iv); i++) {
        c->iv[i] = (unsigned char)(i * 13 + salt + 1);
    }
    c->seq = 1000 + salt;
    ex = explicit_len(c);
    c->plain_len = RECORD_WIRE_BYTES - 5 - ex - 16;
    for (i = 0; i < c->plain_len; i++) {
        c->plain[i] = (unsigned char)(i * 31 + salt);
    }
    put_be64(c->plain, c->seq); /* the explicit record number (ern) */
    c->record[0] = 23;
    c->record[1] = 3;
    c->record[2] = 3;
    c->record[3] = (unsigned char)((RECORD_WIRE_BYTES - 5) >> 8);
    c->record[4] = (unsigned char)(RECORD_WIRE_BYTES - 5);
    for (i = 0; i < ex; i++) {
        c->record[5 + i] = (unsigned char)(0xa0 + i);
    }
    aad_len = nonce_aad(c, c->seq, nonce, aad);
    ct = c->record + 5 + ex;
    enc = keyed(c->evp_name, c->key, 1);
    if (EVP_EncryptInit_ex(enc, NULL, NULL, NULL, nonce) <= 0
        || EVP_EncryptUpdate(enc, NULL, &l, aad, (int)aad_len) <= 0
        || EVP_EncryptUpdate(enc, ct, &l, c->plain, (int)c->plain_len) <= 0
        || EVP_EncryptFinal_ex(enc, ct + l, &l) <= 0
        || EVP_CIPHER_CTX_ctrl(enc, EVP_CTRL_AEAD_GET_TAG, 16, ct + c->plain_len) <= 0) {
        die("seal");
    }
    EVP_CIPHER_CTX_free(enc);
    for (i = 0; i < NUM_COUNTS; i++) {
        for (j = 0; j < counts[i]; j++) {
            c->seqs[i][j] = c->seq - (counts[i] - 1) + j;
        }
    }
    c->dec = keyed(c->evp_name, c->key, 0);
    c->trial = EVP_CIPHER_CTX_new();
    c->blk = keyed(c->kind == UTLS_AEAD_SEARCH_CHACHA20_POLY1305 ? "ChaCha20"
                   : c->key_len == 16                           ? "AES-128-ECB"
                                                                : "AES-256-ECB",
                   c->key, 1);
    c->s_evp = utls_aead_search_new(libctx, NULL, c->kind, c->layout, c->key, c->key_len, c->iv,
                                    c->iv_len, UTLS_AEAD_SEARCH_PATH_EVP);
    c->s_prov = utls_aead_search_new(libctx, NULL, c->kind, c->layout, c->key, c->key_len,
                                     c->iv, c->iv_len, UTLS_AEAD_SEARCH_PATH_PROVIDER);
    if (c->trial == NULL || c->s_evp == NULL || c->s_prov == NULL) {
        die("search contexts (is utls.so in --module-dir?)");
    }
    /* Every variant must find the true candidate (the last) before it is timed. */
    for (i = 0; i < NUM_METHODS; i++) {
        for (j = 0; j < NUM_COUNTS; j++) {
            size_t want = i == M_SINGLE ? 0 : counts[j] - 1;

            if (!method_applies(c, (enum method)i)) {
                continue;
            }
            memset(out_buf, 0, sizeof(out_buf));
            if (run_once(c, (enum method)i, j) != want
                || memcmp(out_buf, c->plain, c->plain_len) != 0) {
                fprintf(stderr, "probe_cost: %s %s N=%zu gives a wrong answer\n", c->name,
                        method_names[i], counts[j]);
                exit(1);
            }
        }
    }
}

typedef struct {
    bench_case *c;
    enum method m;
    size_t ci;
    size_t batch;
    double *samples;
} variant;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double time_batch(variant *v)
{
    double t0 = now_ns();
    size_t i, acc = 0;

    for (i = 0; i < v->batch; i++) {
        acc += run_once(v->c, v->m, v->ci);
    }
    sink += acc;
    return (now_ns() - t0) / (double)v->batch;
}

static double ratio(const bench_case *c, enum method m, size_t ci)
{
    return c->result[m][ci] / c->result[M_SINGLE][0];
}

static void print_json(FILE *f, int reps, double sample_ns)
{
    size_t k, m, i;
    const bench_case *g = &cases[0], *g12 = &cases[3];

    fprintf(f, "{\n  \"probe_cost\": {\n");
    fprintf(f, "    \"record_wire_bytes\": %d,\n", RECORD_WIRE_BYTES);
    fprintf(f, "    \"unit\": \"ns per record, median over repetitions\",\n");
    fprintf(f, "    \"repetitions\": %d,\n    \"sample_target_ns\": %.0f,\n", reps, sample_ns);
    fprintf(f, "    \"true_candidate\": \"last of N (all N checked)\",\n");
    fprintf(f, "    \"openssl\": \"%s\",\n", OpenSSL_version(OPENSSL_VERSION));
    fprintf(f, "    \"provider_gcm_32_vs_single\": %.3f,\n", ratio(g, M_PROVIDER, 2));
    fprintf(f, "    \"provider_gcm_32_vs_single_target\": 1.5,\n");
    fprintf(f, "    \"provider_gcm_32_vs_single_met\": %s,\n",
            ratio(g, M_PROVIDER, 2) <= 1.5 ? "true" : "false");
    fprintf(f, "    \"evp_gcm_32_vs_single\": %.3f,\n", ratio(g, M_EVP, 2));
    fprintf(f, "    \"evp_copy_gcm_32_vs_single\": %.3f,\n", ratio(g, M_EVP_COPY, 2));
    fprintf(f, "    \"ern_gcm_32_vs_single\": %.3f,\n", ratio(g, M_ERN, 2));
    fprintf(f, "    \"provider_gcm_tls12_32_vs_single\": %.3f,\n", ratio(g12, M_PROVIDER, 2));
    fprintf(f, "    \"ciphers\": {\n");
    for (k = 0; k < NUM_CASES; k++) {
        const bench_case *c = &cases[k];

        fprintf(f, "      \"%s\": {\n        \"layout\": \"%s\",\n", c->name,
                c->layout == UTLS_AEAD_SEARCH_TLS13 ? "tls13" : "tls12");
        fprintf(f, "        \"single_ns\": %.1f", c->result[M_SINGLE][0]);
        for (m = M_EVP; m < NUM_METHODS; m++) {
            if (!method_applies(c, (enum method)m)) {
                fprintf(f, ",\n        \"%s_ns\": null,\n        \"%s_vs_single\": null",
                        method_names[m], method_names[m]);
                continue;
            }
            fprintf(f, ",\n        \"%s_ns\": {", method_names[m]);
            for (i = 0; i < NUM_COUNTS; i++) {
                fprintf(f, "%s\"%zu\": %.1f", i ? ", " : "", counts[i], c->result[m][i]);
            }
            fprintf(f, "},\n        \"%s_vs_single\": {", method_names[m]);
            for (i = 0; i < NUM_COUNTS; i++) {
                fprintf(f, "%s\"%zu\": %.3f", i ? ", " : "", counts[i], ratio(c, (enum method)m, i));
            }
            fprintf(f, "}");
        }
        fprintf(f, "\n      }%s\n", k + 1 < NUM_CASES ? "," : "");
    }
    fprintf(f, "    }\n  }\n}\n");
}

int main(int argc, char **argv)
{
    const char *module_dir = NULL, *out = NULL;
    int reps = 41, quick = 0, i, r;
    double sample_ns = 400000.0;
    variant vars[NUM_CASES * NUM_METHODS * NUM_COUNTS];
    size_t nv = 0, k, m, ci, v;
    FILE *f;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--module-dir") == 0 && i + 1 < argc) {
            module_dir = argv[++i];
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else {
            fprintf(stderr, "usage: %s --module-dir DIR [--out FILE] [--quick] [--reps N]\n",
                    argv[0]);
            return 2;
        }
    }
    if (quick) {
        reps = 5;
        sample_ns = 50000.0;
    }
    if (module_dir == NULL || reps < 1) {
        fprintf(stderr, "probe_cost: --module-dir DIR (where utls.so is) is required\n");
        return 2;
    }
    if ((libctx = OSSL_LIB_CTX_new()) == NULL
        || OSSL_PROVIDER_set_default_search_path(libctx, module_dir) != 1
        || OSSL_PROVIDER_load(libctx, "default") == NULL
        || OSSL_PROVIDER_load(libctx, UTLS_AEAD_SEARCH_PROVIDER_NAME) == NULL) {
        die("loading the default and utls providers");
    }
    for (k = 0; k < NUM_CASES; k++) {
        setup_case(&cases[k], (unsigned int)k);
        for (m = 0; m < NUM_METHODS; m++) {
            for (ci = 0; ci < NUM_COUNTS; ci++) {
                variant *x = &vars[nv];
                double est;

                if (!method_applies(&cases[k], (enum method)m) || (m == M_SINGLE && ci > 0)) {
                    continue;
                }
                x->c = &cases[k];
                x->m = (enum method)m;
                x->ci = ci;
                x->batch = 16;
                est = time_batch(x); /* warm-up and estimate */
                est = time_batch(x);
                x->batch = (size_t)(sample_ns / (est > 1.0 ? est : 1.0));
                if (x->batch < 4) {
                    x->batch = 4;
                }
                if ((x->samples = calloc((size_t)reps, sizeof(double))) == NULL) {
                    die("calloc");
                }
                nv++;
            }
        }
    }
    for (r = 0; r < reps; r++) {
        for (v = 0; v < nv; v++) {
            variant *x = &vars[(v + (size_t)r * 7) % nv];

            x->samples[r] = time_batch(x);
        }
    }
    for (v = 0; v < nv; v++) {
        qsort(vars[v].samples, (size_t)reps, sizeof(double), cmp_double);
        vars[v].c->result[vars[v].m][vars[v].ci] = vars[v].samples[reps / 2];
        free(vars[v].samples);
    }
    print_json(stdout, reps, sample_ns);
    if (out != NULL) {
        if ((f = fopen(out, "w")) == NULL) {
            die(out);
        }
        print_json(f, reps, sample_ns);
        fclose(f);
    }
    for (k = 0; k < NUM_CASES; k++) {
        utls_aead_search_free(cases[k].s_evp);
        utls_aead_search_free(cases[k].s_prov);
        EVP_CIPHER_CTX_free(cases[k].dec);
        EVP_CIPHER_CTX_free(cases[k].trial);
        EVP_CIPHER_CTX_free(cases[k].blk);
    }
    return 0;
}
