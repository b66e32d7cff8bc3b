/*
 * utls/aeadsearch.h: AEAD candidate search for TLS records.
 *
 * A receiver that gets a TLS record out of order does not know its sequence
 * number, so it does not know the record's nonce (and, in TLS 1.2, its
 * additional data). utls_aead_search_run() is given the record and a list of
 * candidate sequence numbers and returns the first candidate under which the
 * record authenticates, with the plaintext.
 *
 * Two implementations give identical results:
 *   provider  the "utls" OpenSSL provider (provider/, algorithms
 *             UTLS-*-SEARCH), fetched from the caller's library context. For
 *             AES-GCM each extra candidate costs one AES block (TLS 1.3) or
 *             one GF(2^128) multiplication (TLS 1.2) instead of a decryption.
 *   evp       trial decryption with the ordinary EVP AEAD, candidate after
 *             candidate; used when the provider cannot be fetched.
 *
 * Only libcrypto is needed (aeadsearch_client.c). See provider/README.md.
 *
 * This code handles secrets: a search context holds a traffic key.
 */
#ifndef UTLS_AEADSEARCH_H
#define UTLS_AEADSEARCH_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The provider and its algorithms, as OSSL_PROVIDER_load() and
 * EVP_CIPHER_fetch() name them. */
#define UTLS_AEAD_SEARCH_PROVIDER_NAME "utls"
#define UTLS_AEAD_SEARCH_AES_128_GCM_NAME "UTLS-AES-128-GCM-SEARCH"
#define UTLS_AEAD_SEARCH_AES_256_GCM_NAME "UTLS-AES-256-GCM-SEARCH"
#define UTLS_AEAD_SEARCH_CHACHA20_POLY1305_NAME "UTLS-CHACHA20-POLY1305-SEARCH"

/* Cipher context parameters of the UTLS-*-SEARCH algorithms. */
#define UTLS_AEAD_SEARCH_PARAM_LAYOUT "utls-layout" /* utf8 string "tls13" or "tls12" */
#define UTLS_AEAD_SEARCH_PARAM_IV "utls-iv"         /* octet string: static IV or salt */
#define UTLS_AEAD_SEARCH_PARAM_SEQS "utls-seqs"     /* octet string: N big-endian uint64 */
#define UTLS_AEAD_SEARCH_PARAM_MATCH "utls-match"   /* int, gettable: index or -1 */

/* Every AEAD here has a 16-byte tag. */
#define UTLS_AEAD_SEARCH_TAG_LEN 16
/* TLS record header: type, version, length. */
#define UTLS_AEAD_SEARCH_HEADER_LEN 5
/* Candidates per search. Bounds the work one forged record can cause (an
 * attacker who injects a record makes the receiver try every candidate):
 * 1024 AES blocks, or 1024 trial decryptions on the EVP path. */
#define UTLS_AEAD_SEARCH_MAX_CANDIDATES 1024
/* Largest record accepted, header included: RFC 5246 6.2.3 allows a
 * TLSCiphertext fragment of 2^14 + 2048 bytes (RFC 8446 5.2: 2^14 + 256). */
#define UTLS_AEAD_SEARCH_MAX_RECORD_LEN (UTLS_AEAD_SEARCH_HEADER_LEN + 16384 + 2048)

/* The AEAD of the record protection. */
enum utls_aead_search_kind {
    UTLS_AEAD_SEARCH_AES_128_GCM = 1,
    UTLS_AEAD_SEARCH_AES_256_GCM = 2,
    UTLS_AEAD_SEARCH_CHACHA20_POLY1305 = 3,
};

/* Where the nonce and the additional data come from.
 *   TLS13  RFC 8446 5.3: nonce = iv XOR (0^32 || seq), 12-byte iv;
 *          AAD = the 5-byte record header. Record: header || C || tag.
 *   TLS12  AES-GCM, RFC 5288 3: nonce = salt || explicit nonce (the 8 bytes
 *          after the header), 4-byte salt; record: header || explicit || C ||
 *          tag. ChaCha20-Poly1305, RFC 7905 2: nonce as in TLS13, 12-byte iv,
 *          record: header || C || tag. AAD (RFC 5246 6.2.3.3) =
 *          seq || type || version || plaintext length. */
enum utls_aead_search_layout {
    UTLS_AEAD_SEARCH_TLS13 = 1,
    UTLS_AEAD_SEARCH_TLS12 = 2,
};

/* Which implementation a search context uses. */
enum utls_aead_search_path {
    UTLS_AEAD_SEARCH_PATH_AUTO = 0,     /* the provider if it can be fetched, else evp */
    UTLS_AEAD_SEARCH_PATH_PROVIDER = 1, /* the provider or fail (tests) */
    UTLS_AEAD_SEARCH_PATH_EVP = 2,      /* trial decryption only (tests, benchmarks) */
};

/* The outcome of one search. */
enum utls_aead_search_result {
    UTLS_AEAD_SEARCH_FOUND = 1,     /* a candidate authenticates; plaintext written */
    UTLS_AEAD_SEARCH_NOT_FOUND = 0, /* none does, or the record is malformed */
    UTLS_AEAD_SEARCH_ERROR = -1,    /* bad arguments or an internal failure */
};

typedef struct utls_aead_search_st UTLS_AEAD_SEARCH;

/*
 * utls_aead_search_new returns a search context for one traffic key, or NULL
 * on failure (bad kind, layout or lengths; the cipher cannot be fetched; with
 * UTLS_AEAD_SEARCH_PATH_PROVIDER, the provider cannot be fetched). |key_len|
 * is 16 or 32 as the AEAD needs; |iv| is the 12-byte static IV, or for TLS 1.2
 * AES-GCM the 4-byte salt (the implicit part of the nonce). |libctx| and
 * |propq| are those of the caller's fetches (NULL for the defaults). The
 * context keeps its own copy of the key material; the caller may wipe its
 * own. The caller owns the context and frees it with utls_aead_search_free.
 */
UTLS_AEAD_SEARCH *utls_aead_search_new(OSSL_LIB_CTX *libctx, const char *propq, int kind,
                                       int layout, const uint8_t *key, size_t key_len,
                                       const uint8_t *iv, size_t iv_len, int path);

/* utls_aead_search_free wipes and frees |s|. NULL-safe. */
void utls_aead_search_free(UTLS_AEAD_SEARCH *s);

/* utls_aead_search_get_path returns UTLS_AEAD_SEARCH_PATH_PROVIDER or
 * UTLS_AEAD_SEARCH_PATH_EVP: the implementation |s| uses. */
int utls_aead_search_get_path(const UTLS_AEAD_SEARCH *s);

/*
 * utls_aead_search_run looks for the first of the |num_seqs| candidate
 * sequence numbers |seqs| under which |record| (one whole TLS record, header
 * to tag, |record_len| bytes) authenticates.
 *
 * UTLS_AEAD_SEARCH_FOUND: *out_index is the candidate's index, and the AEAD
 * plaintext (for TLS 1.3 the TLSInnerPlaintext, padding and type included) is
 * in |out|, *out_len bytes. NOT_FOUND: no candidate authenticates, or the
 * record is malformed (shorter than the AEAD's overhead, longer than
 * UTLS_AEAD_SEARCH_MAX_RECORD_LEN, or its header's length field is not
 * |record_len| - 5); *out_index is SIZE_MAX, *out_len 0 and |out| wiped.
 * ERROR: |max_out| is smaller than |record_len|, |out| overlaps |record|,
 * |num_seqs| is 0 or above UTLS_AEAD_SEARCH_MAX_CANDIDATES, or a library call
 * failed.
 *
 * Tags are compared in constant time, and the provider compares every
 * candidate before it decides. Results are the same on both paths.
 */
enum utls_aead_search_result utls_aead_search_run(UTLS_AEAD_SEARCH *s, uint8_t *out,
                                                  size_t *out_len, size_t max_out,
                                                  size_t *out_index, const uint8_t *record,
                                                  size_t record_len, const uint64_t *seqs,
                                                  size_t num_seqs);

/*
 * utls_aead_search is utls_aead_search_new, utls_aead_search_run and
 * utls_aead_search_free in one call, for one record. It pays the key setup
 * every time; a receiver keeps a context per key instead.
 */
enum utls_aead_search_result utls_aead_search(OSSL_LIB_CTX *libctx, int kind, int layout,
                                              const uint8_t *key, size_t key_len,
                                              const uint8_t *iv, size_t iv_len, int path,
                                              uint8_t *out, size_t *out_len, size_t max_out,
                                              size_t *out_index, const uint8_t *record,
                                              size_t record_len, const uint64_t *seqs,
                                              size_t num_seqs);

#ifdef __cplusplus
}
#endif

#endif
