/*
 * The "utls" OpenSSL 3 provider: AEAD candidate search as three ciphers,
 * UTLS-AES-128-GCM-SEARCH, UTLS-AES-256-GCM-SEARCH and
 * UTLS-CHACHA20-POLY1305-SEARCH (provider/README.md).
 *
 * A search cipher is decrypt-only. Init takes the traffic key (and, as the
 * IV argument, the 12-byte static IV); the parameters "utls-layout",
 * "utls-iv" and "utls-seqs" (utls/aeadsearch.h) give the record layout, the
 * static IV or TLS 1.2 GCM salt, and the candidates. One EVP_DecryptUpdate
 * with one whole record runs the search: it writes the plaintext when a
 * candidate authenticates and nothing otherwise; EVP_DecryptFinal_ex then
 * succeeds exactly when one did, and "utls-match" says which (or -1).
 *
 * The AES and ChaCha20-Poly1305 primitives come from the other providers of
 * the library context that loaded us, through a child library context.
 *
 * This code handles secrets (the key copy in every cipher context).
 */
#include <string.h>

#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include <openssl/provider.h>

#include "search.h"
#include "utls/aeadsearch.h"
#include "utls_prov.h"

#ifndef UTLS_PROVIDER_VERSION
# define UTLS_PROVIDER_VERSION "0.0.0"
#endif

#define STATIC_IV_LEN 12
#define MAX_KEY_LEN 32

typedef struct {
    const OSSL_CORE_HANDLE *handle;
    OSSL_LIB_CTX *libctx; /* a child of the loading context, for AES and ChaCha20 */
} utls_prov_ctx;

typedef struct {
    utls_prov_ctx *prov;
    int kind;
    int layout;
    unsigned char key[MAX_KEY_LEN];
    size_t key_len;
    int key_set;
    unsigned char iv[STATIC_IV_LEN];
    size_t iv_len; /* 0 until set */
    utls_search_key *sk; /* built at the first search after (re)keying */
    uint64_t seqs[UTLS_AEAD_SEARCH_MAX_CANDIDATES];
    size_t num_seqs;
    int match; /* the last search's index, or -1 */
} utls_cipher_ctx;

static size_t kind_key_len(int kind)
{
    return kind == UTLS_AEAD_SEARCH_AES_128_GCM ? 16 : 32;
}

static void *cipher_newctx(void *provctx, int kind)
{
    utls_cipher_ctx *c = OPENSSL_zalloc(sizeof(*c));

    if (c == NULL) {
        return NULL;
    }
    c->prov = provctx;
    c->kind = kind;
    c->layout = UTLS_AEAD_SEARCH_TLS13;
    c->key_len = kind_key_len(kind);
    c->match = -1;
    return c;
}

static void *aes128_newctx(void *provctx)
{
    return cipher_newctx(provctx, UTLS_AEAD_SEARCH_AES_128_GCM);
}

static void *aes256_newctx(void *provctx)
{
    return cipher_newctx(provctx, UTLS_AEAD_SEARCH_AES_256_GCM);
}

static void *chacha_newctx(void *provctx)
{
    return cipher_newctx(provctx, UTLS_AEAD_SEARCH_CHACHA20_POLY1305);
}

static void cipher_freectx(void *vctx)
{
    utls_cipher_ctx *c = vctx;

    if (c == NULL) {
        return;
    }
    utls_search_key_free(c->sk);
    OPENSSL_clear_free(c, sizeof(*c));
}

static void *cipher_dupctx(void *vctx)
{
    const utls_cipher_ctx *c = vctx;
    utls_cipher_ctx *d = OPENSSL_malloc(sizeof(*d));

    if (d == NULL) {
        return NULL;
    }
    memcpy(d, c, sizeof(*d));
    d->sk = NULL; /* rebuilt from the key copy */
    return d;
}

/* Something the search key depends on changed. */
static void cipher_rekey(utls_cipher_ctx *c)
{
    utls_search_key_free(c->sk);
    c->sk = NULL;
    c->match = -1;
}

static int cipher_set_ctx_params(void *vctx, const OSSL_PARAM params[])
{
    utls_cipher_ctx *c = vctx;
    const OSSL_PARAM *p;
    size_t i;

    /* One pass: this runs for every record (the candidates). */
    for (p = params; p != NULL && p->key != NULL; p++) {
        if (strcmp(p->key, UTLS_AEAD_SEARCH_PARAM_SEQS) == 0) {
            const unsigned char *b = p->data;
            size_t n = p->data_size / 8;

            if (p->data_type != OSSL_PARAM_OCTET_STRING || p->data_size % 8 != 0 || n == 0
                || n > UTLS_AEAD_SEARCH_MAX_CANDIDATES) {
                return 0;
            }
            for (i = 0; i < n; i++, b += 8) {
                c->seqs[i] = ((uint64_t)b[0] << 56) | ((uint64_t)b[1] << 48)
                    | ((uint64_t)b[2] << 40) | ((uint64_t)b[3] << 32) | ((uint64_t)b[4] << 24)
                    | ((uint64_t)b[5] << 16) | ((uint64_t)b[6] << 8) | (uint64_t)b[7];
            }
            c->num_seqs = n;
        } else if (strcmp(p->key, UTLS_AEAD_SEARCH_PARAM_LAYOUT) == 0) {
            const char *s = NULL;

            if (!OSSL_PARAM_get_utf8_string_ptr(p, &s)) {
                return 0;
            }
            if (strcmp(s, "tls13") == 0) {
                c->layout = UTLS_AEAD_SEARCH_TLS13;
            } else if (strcmp(s, "tls12") == 0) {
                c->layout = UTLS_AEAD_SEARCH_TLS12;
            } else {
                return 0;
            }
            cipher_rekey(c);
        } else if (strcmp(p->key, UTLS_AEAD_SEARCH_PARAM_IV) == 0) {
            if (p->data_type != OSSL_PARAM_OCTET_STRING || p->data_size == 0
                || p->data_size > sizeof(c->iv)) {
                return 0;
            }
            memcpy(c->iv, p->data, p->data_size);
            c->iv_len = p->data_size;
            cipher_rekey(c);
        }
    }
    return 1;
}

static int cipher_dinit(void *vctx, const unsigned char *key, size_t keylen,
                        const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    utls_cipher_ctx *c = vctx;

    if (key != NULL) {
        if (keylen != c->key_len) {
            return 0;
        }
        memcpy(c->key, key, keylen);
        c->key_set = 1;
        cipher_rekey(c);
    }
    if (iv != NULL) {
        if (ivlen != STATIC_IV_LEN) {
            return 0;
        }
        memcpy(c->iv, iv, ivlen);
        c->iv_len = ivlen;
        cipher_rekey(c);
    }
    return cipher_set_ctx_params(c, params);
}

static int cipher_einit(void *vctx, const unsigned char *key, size_t keylen,
                        const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    /* A search only opens records. */
    (void)vctx;
    (void)key;
    (void)keylen;
    (void)iv;
    (void)ivlen;
    (void)params;
    return 0;
}

static int cipher_update(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
                         const unsigned char *in, size_t inl)
{
    utls_cipher_ctx *c = vctx;
    long index = -1;

    *outl = 0;
    c->match = -1;
    if (!c->key_set || c->iv_len == 0 || c->num_seqs == 0 || out == NULL || in == NULL) {
        return 0;
    }
    if (c->sk == NULL
        && (c->sk = utls_search_key_new(c->prov->libctx, c->kind, c->layout, c->key, c->key_len,
                                        c->iv, c->iv_len))
            == NULL) {
        return 0;
    }
    if (!utls_search_run(c->sk, out, outl, outsize, &index, in, inl, c->seqs, c->num_seqs)) {
        return 0;
    }
    c->match = (int)index;
    return 1;
}

static int cipher_final(void *vctx, unsigned char *out, size_t *outl, size_t outsize)
{
    const utls_cipher_ctx *c = vctx;

    (void)out;
    (void)outsize;
    *outl = 0;
    return c->match >= 0;
}

static int cipher_get_ctx_params(void *vctx, OSSL_PARAM params[])
{
    const utls_cipher_ctx *c = vctx;
    OSSL_PARAM *p;
    int ok = 1;

    /* One pass: the match is read after every record. */
    for (p = params; p != NULL && p->key != NULL; p++) {
        if (strcmp(p->key, UTLS_AEAD_SEARCH_PARAM_MATCH) == 0) {
            ok = OSSL_PARAM_set_int(p, c->match);
        } else if (strcmp(p->key, OSSL_CIPHER_PARAM_KEYLEN) == 0) {
            ok = OSSL_PARAM_set_size_t(p, c->key_len);
        } else if (strcmp(p->key, OSSL_CIPHER_PARAM_IVLEN) == 0) {
            ok = OSSL_PARAM_set_size_t(p, STATIC_IV_LEN);
        } else if (strcmp(p->key, UTLS_AEAD_SEARCH_PARAM_LAYOUT) == 0) {
            ok = OSSL_PARAM_set_utf8_string(p, c->layout == UTLS_AEAD_SEARCH_TLS12 ? "tls12"
                                                                                  : "tls13");
        }
        if (!ok) {
            return 0;
        }
    }
    return 1;
}

static const OSSL_PARAM *cipher_gettable_ctx_params(void *vctx, void *provctx)
{
    static const OSSL_PARAM table[] = {
        OSSL_PARAM_int(UTLS_AEAD_SEARCH_PARAM_MATCH, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_KEYLEN, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_IVLEN, NULL),
        OSSL_PARAM_utf8_string(UTLS_AEAD_SEARCH_PARAM_LAYOUT, NULL, 0),
        OSSL_PARAM_END,
    };

    (void)vctx;
    (void)provctx;
    return table;
}

static const OSSL_PARAM *cipher_settable_ctx_params(void *vctx, void *provctx)
{
    static const OSSL_PARAM table[] = {
        OSSL_PARAM_utf8_string(UTLS_AEAD_SEARCH_PARAM_LAYOUT, NULL, 0),
        OSSL_PARAM_octet_string(UTLS_AEAD_SEARCH_PARAM_IV, NULL, 0),
        OSSL_PARAM_octet_string(UTLS_AEAD_SEARCH_PARAM_SEQS, NULL, 0),
        OSSL_PARAM_END,
    };

    (void)vctx;
    (void)provctx;
    return table;
}

static int cipher_get_params(OSSL_PARAM params[], int kind)
{
    OSSL_PARAM *p;

    /* A stream-like cipher (block size 1) without EVP's AEAD flag: EVP must
     * pass the record through untouched. */
    if (((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_MODE)) != NULL
         && !OSSL_PARAM_set_uint(p, 0))
        || ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_KEYLEN)) != NULL
            && !OSSL_PARAM_set_size_t(p, kind_key_len(kind)))
        || ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_IVLEN)) != NULL
            && !OSSL_PARAM_set_size_t(p, STATIC_IV_LEN))
        || ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_BLOCK_SIZE)) != NULL
            && !OSSL_PARAM_set_size_t(p, 1))
        || ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_AEAD)) != NULL
            && !OSSL_PARAM_set_int(p, 0))
        || ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_CUSTOM_IV)) != NULL
            && !OSSL_PARAM_set_int(p, 0))
        || ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_CTS)) != NULL
            && !OSSL_PARAM_set_int(p, 0))
        || ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK)) != NULL
            && !OSSL_PARAM_set_int(p, 0))
        || ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_HAS_RAND_KEY)) != NULL
            && !OSSL_PARAM_set_int(p, 0))) {
        return 0;
    }
    return 1;
}

static int aes128_get_params(OSSL_PARAM params[])
{
    return cipher_get_params(params, UTLS_AEAD_SEARCH_AES_128_GCM);
}

static int aes256_get_params(OSSL_PARAM params[])
{
    return cipher_get_params(params, UTLS_AEAD_SEARCH_AES_256_GCM);
}

static int chacha_get_params(OSSL_PARAM params[])
{
    return cipher_get_params(params, UTLS_AEAD_SEARCH_CHACHA20_POLY1305);
}

static const OSSL_PARAM *cipher_gettable_params(void *provctx)
{
    static const OSSL_PARAM table[] = {
        OSSL_PARAM_uint(OSSL_CIPHER_PARAM_MODE, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_KEYLEN, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_IVLEN, NULL),
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_BLOCK_SIZE, NULL),
        OSSL_PARAM_int(OSSL_CIPHER_PARAM_AEAD, NULL),
        OSSL_PARAM_int(OSSL_CIPHER_PARAM_CUSTOM_IV, NULL),
        OSSL_PARAM_int(OSSL_CIPHER_PARAM_CTS, NULL),
        OSSL_PARAM_int(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK, NULL),
        OSSL_PARAM_int(OSSL_CIPHER_PARAM_HAS_RAND_KEY, NULL),
        OSSL_PARAM_END,
    };

    (void)provctx;
    return table;
}

#define UTLS_SEARCH_FUNCTIONS(prefix)                                                       \
    static const OSSL_DISPATCH prefix##_functions[] = {                                      \
        { OSSL_FUNC_CIPHER_NEWCTX, (void (*)(void))prefix##_newctx },                        \
        { OSSL_FUNC_CIPHER_FREECTX, (void (*)(void))cipher_freectx },                        \
        { OSSL_FUNC_CIPHER_DUPCTX, (void (*)(void))cipher_dupctx },                          \
        { OSSL_FUNC_CIPHER_ENCRYPT_INIT, (void (*)(void))cipher_einit },                     \
        { OSSL_FUNC_CIPHER_DECRYPT_INIT, (void (*)(void))cipher_dinit },                     \
        { OSSL_FUNC_CIPHER_UPDATE, (void (*)(void))cipher_update },                          \
        { OSSL_FUNC_CIPHER_FINAL, (void (*)(void))cipher_final },                            \
        { OSSL_FUNC_CIPHER_GET_PARAMS, (void (*)(void))prefix##_get_params },                \
        { OSSL_FUNC_CIPHER_GETTABLE_PARAMS, (void (*)(void))cipher_gettable_params },        \
        { OSSL_FUNC_CIPHER_GET_CTX_PARAMS, (void (*)(void))cipher_get_ctx_params },          \
        { OSSL_FUNC_CIPHER_SET_CTX_PARAMS, (void (*)(void))cipher_set_ctx_params },          \
        { OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS, (void (*)(void))cipher_gettable_ctx_params }, \
        { OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS, (void (*)(void))cipher_settable_ctx_params }, \
        { 0, NULL },                                                                         \
    }

UTLS_SEARCH_FUNCTIONS(aes128);
UTLS_SEARCH_FUNCTIONS(aes256);
UTLS_SEARCH_FUNCTIONS(chacha);

static const OSSL_ALGORITHM utls_ciphers[] = {
    { UTLS_AEAD_SEARCH_AES_128_GCM_NAME, "provider=utls", aes128_functions,
      "AES-128-GCM candidate search over TLS sequence numbers" },
    { UTLS_AEAD_SEARCH_AES_256_GCM_NAME, "provider=utls", aes256_functions,
      "AES-256-GCM candidate search over TLS sequence numbers" },
    { UTLS_AEAD_SEARCH_CHACHA20_POLY1305_NAME, "provider=utls", chacha_functions,
      "ChaCha20-Poly1305 candidate search over TLS sequence numbers (trial decryption)" },
    { NULL, NULL, NULL, NULL },
};

static const OSSL_ALGORITHM *utls_query(void *provctx, int operation_id, int *no_cache)
{
    (void)provctx;
    *no_cache = 0;
    return operation_id == OSSL_OP_CIPHER ? utls_ciphers : NULL;
}

static const OSSL_PARAM *utls_gettable_params(void *provctx)
{
    static const OSSL_PARAM table[] = {
        OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_NAME, NULL, 0),
        OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_VERSION, NULL, 0),
        OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_BUILDINFO, NULL, 0),
        OSSL_PARAM_int(OSSL_PROV_PARAM_STATUS, NULL),
        OSSL_PARAM_END,
    };

    (void)provctx;
    return table;
}

static int utls_get_params(void *provctx, OSSL_PARAM params[])
{
    OSSL_PARAM *p;

    (void)provctx;
    if (((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_NAME)) != NULL
         && !OSSL_PARAM_set_utf8_ptr(p, "uTLS AEAD candidate search provider"))
        || ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_VERSION)) != NULL
            && !OSSL_PARAM_set_utf8_ptr(p, UTLS_PROVIDER_VERSION))
        || ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_BUILDINFO)) != NULL
            && !OSSL_PARAM_set_utf8_ptr(p, UTLS_PROVIDER_VERSION))
        || ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_STATUS)) != NULL
            && !OSSL_PARAM_set_int(p, 1))) {
        return 0;
    }
    return 1;
}

static void utls_teardown(void *provctx)
{
    utls_prov_ctx *pc = provctx;

    if (pc == NULL) {
        return;
    }
    OSSL_LIB_CTX_free(pc->libctx);
    OPENSSL_free(pc);
}

static const OSSL_DISPATCH utls_dispatch[] = {
    { OSSL_FUNC_PROVIDER_TEARDOWN, (void (*)(void))utls_teardown },
    { OSSL_FUNC_PROVIDER_GETTABLE_PARAMS, (void (*)(void))utls_gettable_params },
    { OSSL_FUNC_PROVIDER_GET_PARAMS, (void (*)(void))utls_get_params },
    { OSSL_FUNC_PROVIDER_QUERY_OPERATION, (void (*)(void))utls_query },
    { 0, NULL },
};

int utls_provider_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in,
                       const OSSL_DISPATCH **out, void **provctx)
{
    utls_prov_ctx *pc = OPENSSL_zalloc(sizeof(*pc));

    if (pc == NULL) {
        return 0;
    }
    pc->handle = handle;
    if ((pc->libctx = OSSL_LIB_CTX_new_child(handle, in)) == NULL) {
        OPENSSL_free(pc);
        return 0;
    }
    *out = utls_dispatch;
    *provctx = pc;
    return 1;
}

#ifdef UTLS_PROVIDER_MODULE
/* The module's only exported symbol (the build hides everything else). */
__attribute__((visibility("default"))) int OSSL_provider_init(const OSSL_CORE_HANDLE *handle,
                                                              const OSSL_DISPATCH *in,
                                                              const OSSL_DISPATCH **out,
                                                              void **provctx)
{
    return utls_provider_init(handle, in, out, provctx);
}
#endif
