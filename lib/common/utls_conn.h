/*
 * The per-connection state of the uTLS runtime (utls_conn_st), held by the
 * SSL (s->utls, patch 0002) and reached through utls_conn_get() (the glue).
 * Public OpenSSL headers and the runtime's own only: no OpenSSL internals.
 */
#ifndef UTLS_LIB_CONN_H
#define UTLS_LIB_CONN_H

#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/utls.h>

#include "utls/reasm.h"
#include "utls/scan.h"
#include "utls/seqpred.h"
#include "utls/seqset.h"
#include "utls/aeadsearch.h"
#include "glue/utls_hooks.h"
#include "common/utls_common.h"
#include "bio/utls_bio.h"
#include "ern/utls_ern.h"
#include "rx/utls_rx.h"

struct utls_conn_st {
    /* First: the patched record code reads it in place (utls_hooks.h). */
    utls_hook_state hooks;
    UTLS_LIMITS limits;
    UTLS_STATS stats;

    /* The in-order path. next_offset is the stream offset of the next record
     * header OpenSSL's record code will read. */
    int offset_known;
    uint64_t next_offset;
    uint64_t cur_offset; /* the record being processed in order */
    size_t cur_wire_len;
    int stamp_inorder;   /* UTLS_read_record() with out_info runs */
    int cur_has_nonce;   /* the record's first 8 ciphertext bytes, for the */
    uint64_t cur_nonce;  /* explicit-nonce delta of TLS 1.2 GCM/CCM */
    UTLS_RECORD_INFO inorder_info; /* the last in-order application record */
    int inorder_info_valid;
    UTLS_RECORD_INFO last_info;    /* the last record read out of order */
    int last_info_valid;           /* ... by the current UTLS_read_record() */

    /* Key generations: gen counts read-key changes after the handshake. */
    int post_handshake;
    uint32_t gen;
    int gen_ready;              /* out-of-order state set up for gen */
    int gen_start_known;
    uint64_t gen_start_offset;  /* first record of gen */
    int ooo_possible;
    int tls13, aead, explicit_nonce;
    /* A failed tag check of the read cipher pushes nothing onto OpenSSL's
     * error queue (TLS 1.3 AES-GCM of the default provider), so a probe
     * needs no error-queue mark (utls_probe). */
    int probe_quiet_failure;

    /* The out-of-order side. |store| is where fragments past a hole are read
     * from: the read BIO's own store when it shares one (|store_shared|,
     * utls_bio_signals.store), else |reasm|, the connection's copy (owned).
     * Refreshed at every entry point (utls_store_refresh): the BIO may change
     * between calls. */
    utls_reasm *reasm;
    utls_reasm *store;
    int store_shared;
    utls_scan *scan;
    utls_seqpred *pred;
    /*
     * The chain fast path (utls_chain_run). Past a record of the current key
     * that verified out of order, the next record's header is at |chain_off|
     * and its number is |chain_seq|: when bytes arriving at the end of the
     * run complete that record, it is verified with that one candidate, with
     * no scan, no candidate ranking and no interval bookkeeping. The scanner
     * knows of the records verified below |chain_synced|; those in
     * [chain_synced, chain_off) were verified by the fast path and are
     * confirmed to it in one call (utls_chain_sync) before it is next used.
     * |chain_min_len|..|chain_max_len| are the scan profile's length bounds.
     */
    int chain_valid;
    uint64_t chain_off;
    uint64_t chain_seq;
    uint64_t chain_synced;
    size_t chain_min_len, chain_max_len;
    /* The last record the fast path verified, added to the predictor as an
     * anchor by utls_chain_sync: the records before it in the chain add
     * nothing (the gap between two anchors that a chain fills exactly tells
     * the predictor no more than its two ends). */
    utls_seqpred_record chain_anchor;
    int chain_anchor_pending;
    /* A private copy of the read cipher context, taken when the key is
     * installed and reused by every probe of that key. Taken later, it could
     * share the provider's MAC buffer with the real context: 3.0's cipher
     * dupctx copies that pointer (CBC MAC-then-encrypt), and freeing it twice
     * corrupts the heap. */
    EVP_CIPHER_CTX *probe_ctx;
    int probe_ctx_valid;
    /* TLS 1.3 probes decrypt directly (utls_probe13): the tag length as
     * tls13_enc() derives it from the suite (0: not a TLS 1.3 AEAD suite,
     * probes go through tls13_enc()), whether it is AES-CCM, and the IV
     * length of the current key's context and of the next key's. */
    size_t probe13_taglen;
    int probe13_ccm;
    size_t probe13_ivlen, next_ivlen;
    /* AES-GCM probes set the nonce and the tag with one parameter call (the
     * invocation field under a fixed field, utls_probe13_gcm_prime): per
     * context, UTLS_GCM_INV_UNKNOWN until the first probe of a copy tries,
     * then UTLS_GCM_INV_READY or UTLS_GCM_INV_NO (EVP_CipherInit_ex per
     * probe, as tls13_enc()). */
    int probe_gcm_inv, next_gcm_inv;
    /* AEAD candidate search through the uTLS provider (provider/), for the
     * current TLS 1.3 AES-GCM key, when the provider is loaded; NULL
     * otherwise (trial decryption one candidate at a time). */
    UTLS_AEAD_SEARCH *search;
    unsigned char *search_out;
    /* The read BIO's signals, valid while s->rbio == sig_bio. */
    BIO *sig_bio;
    const utls_bio_signals *sig;
    double probe_budget;

    utls_seqset ahead; /* seqs of gen delivered out of order */
    /* In-order records are only noted here (the last two: two confirm TLS
     * 1.2's nonce delta) and the stores are brought up to date when the
     * out-of-order side next works (utls_ooo_sync). */
    utls_seqpred_record idle_anchor[2];
    int num_idle_anchors;
    int stores_stale;
    int rescan_pending; /* a new key: scan the held bytes again */
    int budget_starved; /* a header was parked for want of probe budget */
    utls_scan_hit failed[UTLS_MAX_FAILED_HITS];
    size_t failed_spent[UTLS_MAX_FAILED_HITS]; /* probes each has cost so far */
    size_t num_failed;
    utls_seqpred_config pred_config;

    /* TLS 1.3: the key a KeyUpdate from the peer would install next, for
     * records that arrive past a hole that hides the KeyUpdate itself. */
    int next_valid;
    EVP_CIPHER_CTX *next_ctx;
    unsigned char next_iv[EVP_MAX_IV_LENGTH];
    utls_seqpred *pred_next;
    int next_seen;             /* a record verified under the next key ... */
    uint64_t next_seen_offset; /* ... at this offset: later ones are too */
    utls_seqset next_ahead; /* seqs of gen + 1 delivered out of order */
    utls_ready_record *ready;
    size_t num_ready;
    /* SSL_MODE_UNORDERED_PARTIAL: the out-of-order record being returned in
     * parts (data owned), and how much of it was returned. */
    int partial_active;
    utls_ready_record partial;
    size_t partial_pos;

    unsigned char *scratch; /* one record: header + max ciphertext */
    /* Probe buffers given back by delivered records, for the next hand-over
     * (see ready_add): no allocation per out-of-order record. */
    unsigned char *spare[UTLS_MAX_SPARE_BUFS];
    size_t num_spare;
    int cleanse_plaintext;  /* SSL_OP_CLEANSE_PLAINTEXT: wipe plaintext copies */

    /* Explicit record numbers: the negotiation and both directions. */
    int ern_tokens_ready;
    unsigned char ern_token[3][UTLS_ERN_TOKEN_LEN];
    int ern_offered;         /* server: the offer went out */
    int ern_accepted;        /* client: the accept went out */
    int ern_token_due;       /* UTLS_ERN_ACCEPT/SWITCH to send, or 0 */
    int ern_flush_pending;   /* UTLS_ern_flush() is waiting to be retried */
    unsigned char ern_flush_buf[1];
    int ern_tx;              /* our application records carry numbers */
    int ern_rx;              /* the peer's do (in order, from here on) */
    utls_ern_keys ern_cur, ern_next;
    /* TLS 1.2 (docs/ern.md): the offer, whether the client looked for it,
     * and the raw AES read key and IV (secret; the key block they come from
     * is freed at the end of the handshake) for the one-block test. */
    unsigned char ern_offer12[UTLS_ERN_OFFER12_LEN];
    int ern12_checked;
    int ern12_cbc_offer_due; /* server: the next CBC explicit IV is the offer */
    int ern12_rx_valid;
    size_t ern12_rx_key_len;
    unsigned char ern12_rx_key[32];
    unsigned char ern12_rx_iv[16]; /* GCM: the 4-byte salt; CBC: the first chaining IV */
    /* Out-of-sequence sending (UTLS_ern_seal): sealed unwritten records,
     * slot = number mod UTLS_ERN_REORDER_WINDOW (they all lie in one window). */
    struct {
        int state; /* UTLS_ERN_SLOT_* */
        uint64_t number;
        size_t len;
        unsigned char tail[UTLS_ERN_SEAL_TAIL]; /* the record's last bytes: its tag or MAC */
    } ern_slot[UTLS_ERN_REORDER_WINDOW];
    size_t ern_num_sealed;
    int ern_sealing;          /* inside UTLS_ern_seal: do not count as written */
    uint64_t ern_seal_next;   /* the write sequence after the last seal */
    uint64_t ern_tx_top_next; /* highest number written under this key, + 1 */
    int ern_wpending;         /* a sealed record is partly written */
    uint64_t ern_wpending_number;
    /* Receiving numbers out of sequence order: ern_rx_next is the highest
     * number seen + 1 (the read sequence between records); bit i of
     * ern_rx_seen is number ern_rx_next - 1 - i. */
    int ern_rxw_valid;
    int ern_rx_checked; /* utls_hook_ern_pre_decrypt saw the current record */
    uint64_t ern_rx_next;
    uint64_t ern_rx_seen;
    /* What the last out-of-order try learnt from the record's own number
     * (UTLS_ERN_OOO_*, utls_ern_ooo_find). */
    int ern_ooo_verdict;
    /* Numbers the out-of-order side matched, by stream offset, so that the
     * in-order check and later tries of the same header test them first. */
    utls_ern_hint ern_hint[UTLS_ERN_HINTS];
    size_t ern_num_hints, ern_hint_next;
};

/* utls_ooo_reset drops the out-of-order stores (rebuilt for the current key
 * generation on next use); verified records waiting are kept. */
void utls_ooo_reset(utls_conn *c);

#endif
