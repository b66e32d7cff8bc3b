/*
 * aead_layout.h: the nonce, key and IV lengths of the AEAD search's kinds and
 * record layouts (utls/aeadsearch.h), shared by the provider and its libssl
 * client so that both accept exactly the same keys. Internal to the provider.
 */
#ifndef UTLS_PROVIDER_AEAD_LAYOUT_H
#define UTLS_PROVIDER_AEAD_LAYOUT_H

#include <stddef.h>

#include "utls/aeadsearch.h"

/* RFC 8446 5.3 / RFC 5288 3: every AEAD nonce here is 12 bytes; TLS 1.3 and
 * ChaCha20-Poly1305 keep a 12-byte static IV. */
#define AEAD_NONCE_LEN 12
/* RFC 5288 3: the TLS 1.2 AES-GCM nonce is a 4-byte salt from the key block
 * and an 8-byte explicit part carried in every record. */
#define TLS12_GCM_SALT_LEN 4
#define TLS12_GCM_EXPLICIT_LEN 8
/* RFC 5246 6.2.3.3: seq_num(8) || type(1) || version(2) || length(2). */
#define TLS12_AAD_LEN 13

/* utls_aead_search_is_gcm returns 1 for the AES-GCM kinds, else 0. */
static inline int utls_aead_search_is_gcm(int kind)
{
    return kind == UTLS_AEAD_SEARCH_AES_128_GCM || kind == UTLS_AEAD_SEARCH_AES_256_GCM;
}

/* utls_aead_search_explicit_len returns the length of the explicit nonce
 * before the ciphertext of a record: 8 for TLS 1.2 AES-GCM, else 0. */
static inline size_t utls_aead_search_explicit_len(int kind, int layout)
{
    return utls_aead_search_is_gcm(kind) && layout == UTLS_AEAD_SEARCH_TLS12
               ? TLS12_GCM_EXPLICIT_LEN
               : 0;
}

/* utls_aead_search_lengths returns 1 and the key and IV lengths a search of
 * |kind| over records of |layout| takes in |*out_key_len| and |*out_iv_len|
 * (TLS 1.2 AES-GCM: the 4-byte salt; otherwise the 12-byte static IV), or 0
 * for an unknown kind or layout. */
static inline int utls_aead_search_lengths(int kind, int layout, size_t *out_key_len,
                                           size_t *out_iv_len)
{
    switch (kind) {
    case UTLS_AEAD_SEARCH_AES_128_GCM:
        *out_key_len = 16;
        break;
    case UTLS_AEAD_SEARCH_AES_256_GCM:
    case UTLS_AEAD_SEARCH_CHACHA20_POLY1305:
        *out_key_len = 32;
        break;
    default:
        return 0;
    }
    switch (layout) {
    case UTLS_AEAD_SEARCH_TLS13:
    case UTLS_AEAD_SEARCH_TLS12:
        break;
    default:
        return 0;
    }
    *out_iv_len = utls_aead_search_is_gcm(kind) && layout == UTLS_AEAD_SEARCH_TLS12
                      ? TLS12_GCM_SALT_LEN
                      : AEAD_NONCE_LEN;
    return 1;
}

#endif
