/*
 * search.h: the candidate search behind the provider's UTLS-*-SEARCH
 * ciphers (search.c). Internal to the provider.
 *
 * This code handles secrets: a search key holds a traffic key, the GHASH key
 * and its powers.
 */
#ifndef UTLS_PROVIDER_SEARCH_H
#define UTLS_PROVIDER_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/types.h>

typedef struct utls_search_key_st utls_search_key;

/* utls_search_key_new returns a key for |kind| and |layout| (the enums of
 * utls/aeadsearch.h), its ciphers fetched from |libctx|, or NULL. */
utls_search_key *utls_search_key_new(OSSL_LIB_CTX *libctx, int kind, int layout,
                                     const unsigned char *key, size_t key_len,
                                     const unsigned char *iv, size_t iv_len);

/* utls_search_key_free wipes and frees |k|. NULL-safe. */
void utls_search_key_free(utls_search_key *k);

/* utls_search_run searches |record| under |k| (see utls_aead_search_run).
 * Returns 1 when the search ran, with *out_index the matching candidate or -1
 * (then *out_len is 0 and |out| is wiped), 0 on an error. */
int utls_search_run(utls_search_key *k, unsigned char *out, size_t *out_len, size_t max_out,
                    long *out_index, const unsigned char *record, size_t record_len,
                    const uint64_t *seqs, size_t num_seqs);

#endif
