/*
 * What the runtime (lib/) asks of the glue: the calls that need OpenSSL's
 * internals (the SSL's uTLS state, the record layer, the read cipher state),
 * declared with public types only. The glue's own files include
 * glue_local.h, which adds ssl_local.h; nothing else in lib/ may.
 */
#ifndef UTLS_LIB_GLUE_H
#define UTLS_LIB_GLUE_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include <openssl/evp.h>

#include "utls/seqpred.h"
#include "utls/aeadsearch.h"
#include "ern/utls_ern.h"
#include "glue/utls_hooks.h"

/* What the probes keep per connection (utls_conn_st.probe): the read
 * cipher state they work on, set up by the glue when a key is installed. */
typedef struct {
    /* A private copy of the read cipher context, taken when the key is
     * installed and reused by every probe of that key. Taken later, it could
     * share the provider's MAC buffer with the real context: 3.0's cipher
     * dupctx copies that pointer (CBC MAC-then-encrypt), and freeing it twice
     * corrupts the heap. */
    EVP_CIPHER_CTX *ctx;
    int ctx_valid;
    /* TLS 1.3 probes decrypt directly (utls_probe13): the tag length as
     * tls13_enc() derives it from the suite (0: not a TLS 1.3 AEAD suite,
     * probes go through tls13_enc()), whether it is AES-CCM, and the IV
     * length of the current key's context and of the next key's. */
    size_t tls13_taglen;
    int tls13_ccm;
    size_t tls13_ivlen, next_ivlen;
    /* AES-GCM probes set the nonce and the tag with one parameter call (the
     * invocation field under a fixed field, utls_probe13_gcm_prime): per
     * context, UTLS_GCM_INV_UNKNOWN until the first probe of a copy tries,
     * then UTLS_GCM_INV_READY or UTLS_GCM_INV_NO (EVP_CipherInit_ex per
     * probe, as tls13_enc()). */
    int gcm_inv, next_gcm_inv;
    /* AEAD candidate search through the uTLS provider (provider/), for the
     * current TLS 1.3 AES-GCM key, when the provider is loaded; NULL
     * otherwise (trial decryption one candidate at a time). */
    UTLS_AEAD_SEARCH *search;
    unsigned char *search_out;
    /* A failed tag check of the read cipher pushes nothing onto OpenSSL's
     * error queue (TLS 1.3 AES-GCM of the default provider), so a probe
     * needs no error-queue mark (utls_probe). */
    int quiet_failure;
} utls_probe_state;

/* utls_conn_get returns |s|'s uTLS state, creating it on first use; NULL
 * when memory ran out. The SSL owns it. */
utls_conn *utls_conn_get(SSL *s);
/* utls_inorder_seq: the sequence number the in-order path will use for its
 * next record. */
uint64_t utls_inorder_seq(SSL *s);
/* utls_gen_setup decides whether records of the current read key can be
 * delivered out of order and builds the stores for it. Returns 1 if they
 * can. */
int utls_gen_setup(SSL *s, utls_conn *c);
/* utls_inorder_partial_anchor: when the in-order path has read the header of
 * a record whose body is still incomplete, returns 1 and describes it in
 * |*a| (an anchor for the predictor); 0 otherwise. */
int utls_inorder_partial_anchor(SSL *s, const utls_conn *c, utls_seqpred_record *a);
/* utls_ssl_mode: SSL_get_mode(|s|) without its side effects and cost (on
 * 3.5 every SSL_CTRL_MODE call also hands the mode to the record layer,
 * about 400 instructions); 0 for an SSL that is not a TLS connection. */
uint32_t utls_ssl_mode(const SSL *s);
/* utls_max_send_fragment: ssl_get_max_send_fragment(). */
size_t utls_max_send_fragment(const SSL *s);
/* utls_max_pipelines: the SSL's max_pipelines setting. */
size_t utls_max_pipelines(const SSL *s);
/* utls_split_send_fragment: the SSL's split_send_fragment, as
 * ssl_get_split_send_fragment() returns it. */
size_t utls_split_send_fragment(const SSL *s);

/* The states of utls_conn_st.probe.gcm_inv and probe.next_gcm_inv. */
#define UTLS_GCM_INV_UNKNOWN 0 /* a fresh copy of the context: not tried */
#define UTLS_GCM_INV_READY 1   /* fixed field set: probes set the rest */
#define UTLS_GCM_INV_NO (-1)   /* not AES-GCM, or the provider refused */

/*
 * utls_probe13_setup notes, for the current read key, what the direct TLS 1.3
 * probe needs (tag length as tls13_enc() derives it, AES-CCM or not, IV
 * length); for anything but a TLS 1.3 AEAD suite it leaves probes to
 * tls13_enc() and the other ssl3_enc functions.
 */
void utls_probe13_setup(SSL *s, utls_conn *c);

/*
 * utls_probe checks whether the record |wire| (|wire_len| bytes, header
 * included) authenticates as sequence number |seq| under |s|'s current read
 * state (with |next_key|, under the next key generation's key), on a copy of
 * that state. On success returns 1, points |*out_pt| at
 * the plaintext (inside c->rx.scratch, valid until the next probe), sets
 * |*out_len| to its length and |*out_type| to its content type (the inner
 * type for TLS 1.3). Returns 0 on a failed check (nothing of |s| changed, no error
 * left on the queue), -1 on an internal error.
 */
int utls_probe(SSL *s, utls_conn *c, int next_key, const unsigned char *wire, size_t wire_len,
               uint64_t seq, const unsigned char **out_pt, size_t *out_len, int *out_type);

/*
 * utls_next_key_setup derives the read key and IV that a TLS 1.3 KeyUpdate
 * from the peer would install (RFC 8446 7.2), into c->rx.next.ctx and
 * c->rx.next.iv, without installing them. Returns 1 on success.
 */
int utls_next_key_setup(SSL *s, utls_conn *c);

/* Explicit record numbers (lib/glue/ern_*.c). */
/* utls_ern_strip removes what negotiation put in front of an authenticated
 * application record's plaintext |*pt|: the peer's switch token (only
 * recognised when this endpoint expects it) and the record number, which must
 * equal |seq|. |numbered|: the record is known to carry a number. Returns 0
 * for a plain record, 1 for a numbered one, 2 for the switch record, -1 when
 * the number is not |seq|. */
int utls_ern_strip(SSL *s, const utls_conn *c, const unsigned char **pt, size_t *len,
                   uint64_t seq, int numbered);
/* lib/glue/ern_neg.c (both bases). utls_ern_tokens computes the tokens
 * from the exporter once it exists; returns 1 when they are ready. */
int utls_ern_tokens(SSL *s, utls_conn *c);
/* utls_ern_put_prefix writes into |pkt| what this endpoint puts in front of
 * an application record's plaintext: an owed accept or switch token, and the
 * record's number |seq| once numbers are on (|*out_len| bytes in all).
 * Returns 0 when |pkt| has no room. */
struct wpacket_st;
int utls_ern_put_prefix(utls_conn *c, struct wpacket_st *pkt, uint64_t seq, size_t *out_len);
/* utls_ern_inorder_data handles the plaintext |*pt| (|*len| bytes) of an
 * application record authenticated in order as number |seq|: takes the
 * peer's switch token (numbers on from here) and strips the number. Returns
 * 1 when something was stripped, 0 for a plain record, -1 when the number is
 * not |seq| (the caller fails the connection with decode_error). */
int utls_ern_inorder_data(SSL *s, utls_conn *c, const unsigned char **pt, size_t *len,
                          uint64_t seq);
/* utls_ern_tls13_kind: the one-block test's kind (UTLS_ERN_KIND_*) for a TLS
 * 1.3 AEAD, or 0 for none. */
int utls_ern_tls13_kind(const EVP_CIPHER *ciph);
/* utls_ern_keys_init keys |k| (its kind set) with the raw read key |key|
 * (|keylen| bytes) for the one-block test. Returns 1 on success. */
int utls_ern_keys_init(SSL *s, utls_ern_keys *k, const unsigned char *key, size_t keylen);
/* utls_ern_tls12_kind: how ERN runs on the TLS 1.2 cipher of the record
 * layer's context |ctx|: UTLS_ERN_KIND_GCM12 (AES-GCM: the offer is the
 * explicit nonce), UTLS_ERN_KIND_CBC12 (AES-CBC: the explicit IV), or 0:
 * legacy (docs/ern.md "Which suites"; also for another version or DTLS). */
struct evp_cipher_ctx_st;
int utls_ern_tls12_kind(const SSL *s, const struct evp_cipher_ctx_st *ctx);
/* utls_ern_tls12_offer_check: a TLS 1.2 client decrypted the first record
 * under its new read key (the server's Finished), of kind |kind|, whose
 * plaintext the record layer left at |pt|, just after the explicit nonce or
 * the IV block it decrypted in place. Looks there for the server's offer
 * (once per connection: marks it checked) and, when it is there, owes the
 * accept token. Secret material is wiped. */
void utls_ern_tls12_offer_check(SSL *s, utls_conn *c, int kind, const unsigned char *pt);
/* utls_ern_tls12_keys_setup fills |k| for the one-block test from the TLS 1.2
 * read key kept at the key change (utls_hook_tls12_key_set) and the read
 * layer's context |read_ctx| (for the kind). Returns 1 on success. */
int utls_ern_tls12_keys_setup(SSL *s, utls_ern_keys *k, const struct evp_cipher_ctx_st *read_ctx);
/* Per base (lib/glue/ern_hooks.c, lib/glue/3.5/ern.c), for the sealing
 * calls of lib/glue/ern_seal.c. utls_ern_write_seq: the number the next
 * record written takes. utls_ern_padding_on: TLS 1.3 record padding (a
 * callback or block padding) applies to the next record. */
uint64_t utls_ern_write_seq(SSL *s);
int utls_ern_padding_on(SSL *s);
/* utls_ern_seal_build encrypts |len| bytes of |buf| as one application
 * record with the next number and copies it, header included, to |out|
 * (|out_cap| bytes; |*out_written| set) without writing it. Returns 0
 * after SSLfatal(). */
int utls_ern_seal_build(SSL *s, const void *buf, size_t len, unsigned char *out, size_t out_cap,
                        size_t *out_written);
/* utls_ern_sealed_start puts the sealed record |rec| (|len| bytes) into the
 * write buffer as a pending write; utls_ern_sealed_write writes what is left
 * of it (again after a partial write). Both return 1 on success, 0 on an
 * error or a retry (SSL_get_error()). */
int utls_ern_sealed_start(SSL *s, const unsigned char *rec, size_t len);
int utls_ern_sealed_write(SSL *s, size_t len);
/* utls_ern_keys_setup fills |k| with the raw current (|next|: next) read
 * key for the one-block test. Returns 1 on success. */
int utls_ern_keys_setup(SSL *s, utls_ern_keys *k, int next);
/* utls_tls13_read_key derives the raw read key (|*keylen| bytes, at most
 * EVP_MAX_KEY_LENGTH) and 12-byte IV of the current TLS 1.3 read key, or with
 * |next| of the one a KeyUpdate would install. Secrets: the caller wipes them. */
int utls_tls13_read_key(SSL *s, int next, unsigned char *key, size_t *keylen,
                        unsigned char iv[12]);

#endif
