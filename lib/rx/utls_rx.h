/*
 * The receive path past a hole (lib/rx/): the ready queue, the candidates
 * (scan, predict, probe), the chain fast path and the pump that feeds them
 * from the read BIO. Each takes the SSL only to hand it on to the glue
 * (lib/glue/utls_glue.h); none reads its fields.
 */
#ifndef UTLS_LIB_RX_H
#define UTLS_LIB_RX_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

#include "utls/reasm.h"
#include "utls/scan.h"
#include "utls/seqpred.h"
#include "utls/seqset.h"
#include "common/utls_common.h"
#include "bio/utls_bio.h"

typedef struct utls_conn_st utls_conn;

typedef struct {
    uint64_t seq;
    uint32_t gen;
    uint64_t offset;
    size_t wire_len;
    uint64_t arrival_ns;
    size_t len;
    unsigned char *data; /* plaintext, inside |buf| */
    unsigned char *buf;  /* the allocation |data| points into, owned */
    uint64_t store_epoch; /* see utls_seqset.epoch */
    int buf_is_scratch;  /* |buf| is a UTLS_SCRATCH_LEN buffer (a former
                          * probe buffer), reusable as one */
} utls_ready_record;

typedef struct {
    /*
     * The chain fast path (utls_chain_run). Past a record of the current key
     * that verified out of order, the next record's header is at |off|
     * and its number is |seq|: when bytes arriving at the end of the
     * run complete that record, it is verified with that one candidate, with
     * no scan, no candidate ranking and no interval bookkeeping. The scanner
     * knows of the records verified below |synced|; those in
     * [synced, off) were verified by the fast path and are
     * confirmed to it in one call (utls_chain_sync) before it is next used.
     * |min_len|..|max_len| are the scan profile's length bounds.
     */
    int valid;
    uint64_t off;
    uint64_t seq;
    uint64_t synced;
    size_t min_len, max_len;
    /* The last record the fast path verified, added to the predictor as an
     * anchor by utls_chain_sync: the records before it in the chain add
     * nothing (the gap between two anchors that a chain fills exactly tells
     * the predictor no more than its two ends). */
    utls_seqpred_record anchor;
    int anchor_pending;
} utls_rx_chain;

/* The ready queue (ready.c): verified records waiting to be read. */
typedef struct {
    utls_ready_record *rec; /* sorted by (gen, seq) */
    size_t num;
    /* SSL_MODE_UNORDERED_PARTIAL: the out-of-order record being returned in
     * parts (data owned), and how much of it was returned. */
    int partial_active;
    utls_ready_record partial;
    size_t partial_pos;
    /* Probe buffers given back by delivered records, for the next hand-over
     * (see utls_ready_add): no allocation per out-of-order record. */
    unsigned char *spare[UTLS_MAX_SPARE_BUFS];
    size_t num_spare;
} utls_ready_queue;

/* The in-order path as the receive path sees it (utls_conn_st.inorder),
 * kept by the record hooks. |next_offset| is the stream offset of the next
 * record header OpenSSL's record code will read. */
typedef struct {
    int offset_known;
    uint64_t next_offset;
    uint64_t cur_offset; /* the record being processed in order */
    size_t cur_wire_len;
    int stamp;           /* UTLS_read_record() with out_info runs */
    int cur_has_nonce;   /* the record's first 8 ciphertext bytes, for the */
    uint64_t cur_nonce;  /* explicit-nonce delta of TLS 1.2 GCM/CCM */
    UTLS_RECORD_INFO info; /* the last in-order application record */
    int info_valid;
} utls_rx_inorder;

/* The next key generation (TLS 1.3): the key a KeyUpdate from the peer would
 * install next, for records that arrive past a hole that hides the KeyUpdate
 * itself (utls_rx_state.next). */
typedef struct {
    int valid;
    EVP_CIPHER_CTX *ctx;
    unsigned char iv[EVP_MAX_IV_LENGTH];
    utls_seqpred *pred;
    int seen;             /* a record verified under the next key ... */
    uint64_t seen_offset; /* ... at this offset: later ones are too */
    utls_seqset ahead;    /* seqs of gen + 1 delivered out of order */
} utls_rx_next_key;

/* Plausible headers whose candidates all failed, kept to be tried again next
 * to a new anchor (UTLS_MAX_FAILED_HITS, utls_failed_add). */
typedef struct {
    utls_scan_hit hit[UTLS_MAX_FAILED_HITS];
    size_t spent[UTLS_MAX_FAILED_HITS]; /* probes each has cost so far */
    size_t num;
} utls_rx_failed;

/* The receive path's state in the connection (utls_conn_st.rx): what the
 * key-generation setup (lib/glue/keygen.c), the candidates, the chain, the
 * pump and the ready queue share. */
typedef struct {
    /* Key generations: gen counts read-key changes after the handshake. */
    int post_handshake;
    uint32_t gen;
    int gen_ready;              /* out-of-order state set up for gen */
    int gen_start_known;
    uint64_t gen_start_offset;  /* first record of gen */
    int ooo_possible;
    int tls13, aead, explicit_nonce;

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
    utls_rx_chain chain; /* the chain fast path (chain.c) */
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
    utls_rx_failed failed; /* headers to retry (candidates.c) */
    utls_seqpred_config pred_config;

    /* TLS 1.3: the key a KeyUpdate from the peer would install next. */
    utls_rx_next_key next;
    utls_ready_queue ready; /* ready.c */

    unsigned char *scratch; /* one record: header + max ciphertext */
    int cleanse_plaintext;  /* SSL_OP_CLEANSE_PLAINTEXT: wipe plaintext copies */
    int ip_tunnel;          /* SSL_MODE_UTLS_IP_TUNNEL: only datagrams go early */
} utls_rx_state;

/* Sequence numbers in the predictor are shifted by one, so that the virtual
 * anchor that marks the start of a key generation can carry "seq -1". */
#define PRED_SEQ(seq) ((seq) + 1)

/* pump.c: the in-order record just authenticated as |seq|, noted as an
 * anchor for the out-of-order side. */
void utls_note_inorder_anchor(utls_conn *c, uint64_t seq);

/* pump.c: the body of the record at |body_off| (|body_len| bytes), already
 * delivered out of order from the read BIO |rbio|'s own store, is passed in
 * that BIO unread. With |want_nonce| (TLS 1.2 AEAD: the predictor wants the
 * explicit nonce) its first bytes, at most 8, are first copied from the
 * store into |nonce| (*out_nonce_len; 0 otherwise), before the discard lets
 * the store drop them. Returns 0, changing nothing, when the store does not
 * hold the whole body or the BIO refuses (its read point is not the body's
 * first byte): the body is then read as usual. Both bases' body skips. */
int utls_skip_body_discard(utls_conn *c, BIO *rbio, uint64_t body_off, size_t body_len,
                           int want_nonce, unsigned char nonce[8], size_t *out_nonce_len);

/* pump.c: where the in-order bytes the read BIO |rbio| can return without
 * waiting end (UTLS_BIO_CTRL_INORDER_END), in |*out_end|. Straight from the
 * BIO's store when its signals name one that also builds its in-order stream
 * (segment and uTCP BIOs: the same answer without a BIO_ctrl() per delivered
 * record). Returns 1, or 0 when the BIO cannot say. */
int utls_bio_inorder_end(const utls_conn *c, BIO *rbio, uint64_t *out_end);

/* ready.c: verified records waiting to be read, sorted by (gen, seq). */
int utls_ready_find(const utls_conn *c, uint32_t gen, uint64_t seq);
void utls_ready_remove(utls_conn *c, size_t i);
void utls_ready_add_verified(utls_conn *c, uint64_t seq, uint32_t gen, uint64_t offset,
                             size_t wire_len, uint64_t arrival_ns, const unsigned char *pt,
                             size_t pt_len);
void utls_ready_info(utls_conn *c, const utls_ready_record *r);
int utls_ready_mark_delivered(utls_conn *c, const utls_ready_record *r);
int utls_ready_partial_read(utls_conn *c, unsigned char *buf, size_t len, int peek,
                            size_t *readbytes, int *out_ret);

/* What utls_ready_deliver() did with the first ready record. */
typedef enum {
    UTLS_READY_DELIVERED, /* copied to the caller's buffer */
    UTLS_READY_TOO_SMALL, /* the buffer cannot take it (UTLS_R_BUFFER_TOO_SMALL raised) */
    UTLS_READY_IN_ORDER   /* not remembered: left to the in-order path */
} utls_ready_outcome;

/*
 * utls_ready_deliver copies the first ready record of |c| (or its first |len|
 * bytes when |partial|, SSL_MODE_UNORDERED_PARTIAL: the rest follows) to
 * |buf|, sets |*readbytes| and the record's metadata, and unless |peek|
 * removes it and remembers it as delivered. The same for both bases: the
 * glue's read hook calls it once it has decided that the record goes now.
 */
utls_ready_outcome utls_ready_deliver(utls_conn *c, int partial, unsigned char *buf, size_t len,
                                      int peek, size_t *readbytes);

/* candidates.c: a plausible header past a hole, tried under its likely
 * sequence numbers. */
void utls_ooo_sync(utls_conn *c);
/* utls_pred_next_gen returns a new predictor for the key generation after
 * the current one (TLS 1.3 KeyUpdate), with the current predictor's
 * configuration and record-size statistics but none of its anchors (their
 * numbers are the old key's), or NULL: not TLS 1.3, no current predictor
 * (nothing set up yet), or no memory. The caller owns it. */
utls_seqpred *utls_pred_next_gen(const utls_conn *c);
int utls_try_record(SSL *s, utls_conn *c, const utls_scan_hit *hit, const utls_reasm_run *run,
                    uint64_t arrival_ns, size_t *allowance);
void utls_failed_add(utls_conn *c, const utls_scan_hit *hit, size_t spent);
int utls_failed_retry(SSL *s, utls_conn *c, uint64_t arrival_ns);

/* chain.c: the fast path past a verified record, and a run of new bytes. */
void utls_chain_sync(utls_conn *c);
void utls_chain_set(utls_conn *c, uint64_t offset, size_t wire_len, uint64_t seq);
void utls_process_run(SSL *s, utls_conn *c, uint64_t offset, uint64_t arrival_ns);
/* utls_failed_other_copy tries another copy of [offset, offset + len), just
 * kept by the connection's store, for the failed headers there (chain.c). */
int utls_failed_other_copy(SSL *s, utls_conn *c, uint64_t offset, size_t len,
                           uint64_t arrival_ns);

/* pump.c: fragments from the read BIO into the stores. */
void utls_forget_bio(utls_conn *c);
int utls_bio_quiet(SSL *s, utls_conn *c);
int utls_store_refresh(SSL *s, utls_conn *c);
uint64_t utls_store_epoch(const utls_conn *c);
void utls_pump(SSL *s, utls_conn *c);

#endif
