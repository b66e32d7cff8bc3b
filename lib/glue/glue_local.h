/*
 * uTLS inside libssl: the per-connection state of the unordered receive path
 * and the functions the hook patches call. Only compiled into the fork; the
 * upstream files include utls_hooks.h, not this.
 */
#ifndef UTLS_LOCAL_H
#define UTLS_LOCAL_H

#include <stdint.h>

#include <openssl/utls.h>

#include "ssl_local.h" /* libssl is built with ssl/ on the include path */
#include "record/record_local.h"
#include "utls/reasm.h"
#include "utls/scan.h"
#include "utls/seqpred.h"
#include "utls/aeadsearch.h"
#include "utls_hooks.h"

/*
 * BIO controls a fragment source answers. They sit above OpenSSL's own
 * BIO_C_* range (which ends below 200 in 3.0) so no stock BIO answers them.
 *
 * UTLS_BIO_CTRL_NEXT_FRAGMENT: ptr is a utls_bio_fragment; returns 1 and fills
 * it with the oldest fragment not yet taken (its data stays valid until the
 * next call on the BIO), 0 if there is none.
 * UTLS_BIO_CTRL_READ_OFFSET: ptr is a uint64_t; returns 1 and stores the
 * stream offset of the next byte BIO_read() will return.
 */

/*
 * The segment store behind the segment, uTCP and tap BIOs: a receive buffer
 * that returns the in-order stream and queues fragments for bytes past a hole
 * (utls_bio.c).
 */
typedef struct utls_segstore_st utls_segstore;
utls_segstore *utls_segstore_new(void);
void utls_segstore_free(utls_segstore *c);
/* utls_segstore_push: see UTLS_BIO_segment_push. */
int utls_segstore_push(utls_segstore *c, uint64_t offset, const unsigned char *data, size_t len,
                       uint64_t arrival_ns);
/* utls_segstore_skip_inorder drops the in-order bytes (the tap: the socket
 * delivers them) and moves the in-order point to at least |offset|. */
void utls_segstore_skip_inorder(utls_segstore *c, uint64_t offset);
/* utls_segstore_inorder_end: the end of the contiguous bytes received. */
uint64_t utls_segstore_inorder_end(const utls_segstore *c);
/* utls_segstore_num_events: fragments waiting to be taken. */
size_t utls_segstore_num_events(const utls_segstore *c);
/* utls_segstore_read_would_block returns 1 if BIO_read() of the segment BIO
 * on |c| would return -1 with the retry flag set: no in-order byte and no
 * end of stream. */
int utls_segstore_read_would_block(const utls_segstore *c);
#define UTLS_BIO_CTRL_NEXT_FRAGMENT 0x7574 /* "ut" */
#define UTLS_BIO_CTRL_READ_OFFSET 0x7575
/* UTLS_BIO_CTRL_TAKE_WAKEUP: returns 1 (and forgets it) if the last read
 * returned early, with the retry flag, only because fragments arrived while it
 * would otherwise have blocked; 0 otherwise. */
#define UTLS_BIO_CTRL_TAKE_WAKEUP 0x7576
/* UTLS_BIO_CTRL_GET_SIGNALS: ptr is a utls_bio_signals **; returns 1 and
 * stores a pointer to the BIO's signals, which live as long as the BIO. The
 * SSL reads them on every read instead of calling into the BIO. */
#define UTLS_BIO_CTRL_GET_SIGNALS 0x7577
/* UTLS_BIO_CTRL_GET_CAPTURE_FD: a tap BIO returns its packet socket (readable
 * when the ring holds captured segments), for callers that poll; -1 or 0
 * otherwise. */
#define UTLS_BIO_CTRL_GET_CAPTURE_FD 0x7578
/* UTLS_BIO_CTRL_DISCARD: ptr is a const utls_bio_discard * (num unused). If
 * its offset is the next byte BIO_read() would return and its len in-order
 * bytes are all here, passes them without returning them and returns 1 (the
 * SSL skips the body of a record it verified out of order:
 * utls_hook_skip_body). Otherwise returns 0 and changes nothing; the caller
 * reads the bytes as usual. Answered by the segment and uTCP BIOs only (0
 * from any other BIO, and from the tap). */
#define UTLS_BIO_CTRL_DISCARD 0x7579
typedef struct {
    uint64_t offset;
    size_t len;
} utls_bio_discard;

/* What a fragment source tells the SSL without a call: |pending| is non-zero
 * when fragments or a wake-up may be waiting (the tap: also when its ring
 * may hold unprocessed blocks), zero when a BIO_ctrl would certainly find
 * nothing. */
typedef struct {
    size_t pending;
    /* The BIO's own store of the bytes past its in-order end, which the SSL
     * reads fragments from instead of keeping a copy (one store, see
     * docs/unordered.md, PERFORMANCE). Set only by a BIO whose in-order
     * stream is built from this store alone and in which a stream byte keeps
     * the value it first arrived with (the segment and uTCP BIOs); NULL for
     * the tap, whose in-order stream comes from the kernel socket. */
    utls_reasm *store;
    /* Counts the events after which a byte once held in |store| could come
     * back with another value: eviction from the store, a new store. A record
     * verified out of order is only trusted to match the in-order stream
     * while this is unchanged. */
    uint64_t store_epoch;
    /* The store whose fragment events UTLS_BIO_CTRL_NEXT_FRAGMENT hands out,
     * when taking one needs nothing else from the BIO (the segment and uTCP
     * BIOs): the SSL takes them with utls_segstore_take_event(), without a
     * BIO_ctrl() per fragment. NULL for the tap, which reads its capture
     * ring first. */
    utls_segstore *events;
    /* Set by the segment BIO alone, whose BIO_read() only returns what the
     * caller pushed: when utls_segstore_read_would_block(events) says so,
     * the SSL may report SSL_ERROR_WANT_READ without the call. */
    int read_is_push_only;
} utls_bio_signals;

typedef struct {
    uint64_t offset;
    const unsigned char *data;
    size_t len;
    uint64_t arrival_ns;
} utls_bio_fragment;

/* utls_tap_wrap puts a tap in front of the socket BIO |sock| whose next byte
 * has stream offset |read_off|; returns the tap BIO (|sock| becomes its next),
 * or NULL with an error raised and |sock| untouched (utls_tap.c). */
BIO *utls_tap_wrap(BIO *sock, uint64_t read_off);
/* utls_bio_method_new makes the BIO_METHOD of one of our BIOs (puts is
 * BIO_write of the string) and its new type index in |*out_type|; NULL on
 * failure. */
BIO_METHOD *utls_bio_method_new(int *out_type, int kind, const char *name,
                                int (*bwrite)(BIO *, const char *, int),
                                int (*bread)(BIO *, char *, int),
                                long (*ctrl)(BIO *, int, long, void *), int (*create)(BIO *),
                                int (*destroy)(BIO *));
/* utls_bio_filter_write: BIO_write of a filter BIO that passes writes to
 * its next BIO unchanged (uTCP, tap). */
int utls_bio_filter_write(BIO *b, const char *in, int inl);
int utls_tap_start_syn_watch(void);

/* utls_segstore_take_event: see UTLS_BIO_CTRL_NEXT_FRAGMENT. */
int utls_segstore_take_event(utls_segstore *c, utls_bio_fragment *f);
/* utls_segstore_discard: UTLS_BIO_CTRL_DISCARD of |len| bytes from stream
 * offset |at| on the store behind a segment or uTCP BIO, without a
 * BIO_ctrl(). Returns 1 if they were passed, 0 if refused (nothing changed). */
int utls_segstore_discard(utls_segstore *c, uint64_t at, size_t len);

/* Default limits (UTLS_limits_default). Each bounds an attack; see utls.h. */
#define UTLS_DEFAULT_MAX_PROBES_PER_RECORD 64
/* 32 trial decryptions per KiB past a hole: an honest stream needs about one
 * per record (>= 1 per 16 KiB .. 1 per 22 bytes); an injector pays 1 KiB of
 * traffic for 32 failed trials of ~1 us each. */
#define UTLS_DEFAULT_MAX_PROBES_PER_KIB 32
/* A burst allowance for the probe budget, so that the first records after a
 * hole do not wait for the budget to build up. */
#define UTLS_PROBE_BUDGET_BURST 256
/* Verified records waiting to be read: bounds memory (each holds up to 16 KiB
 * of plaintext) when the application reads slower than records arrive. */
#define UTLS_DEFAULT_MAX_READY_RECORDS 64
/* Records delivered out of order and not yet passed in order. Bounds the
 * duplicate-suppression set; past it no more records are delivered early. */
#define UTLS_MAX_DELIVERED_AHEAD 1024
/* Spare probe buffers (UTLS_SCRATCH_LEN bytes each) kept for reuse: bounds
 * the memory an idle connection keeps after a burst of out-of-order
 * records. */
#define UTLS_MAX_SPARE_BUFS 4
/* Scanner hits handled per feed call. */
#define UTLS_SCAN_BATCH 64
/* Plausible headers whose candidates all failed, kept to be tried again when
 * a record next to them verifies (its number then pins theirs exactly). The
 * oldest are forgotten first; forged headers cost at most this much memory
 * and, on each retry, the probe budget. */
#define UTLS_MAX_FAILED_HITS 64
/* Of a header's max_probes_per_record, this many are kept back for retries:
 * next to a new anchor its number is exact and one probe settles it. */
#define UTLS_RETRY_RESERVE 4

/* A sorted set of sequence numbers (records delivered ahead of the in-order
 * path), bounded by UTLS_MAX_DELIVERED_AHEAD. */
typedef struct {
    uint64_t *v;        /* sequence numbers, sorted */
    uint64_t *off;      /* the stream offset each was verified at */
    size_t *wire_len;   /* its length on the wire, header included */
    uint64_t *epoch;    /* the shared store's epoch when it was verified, or
                         * UTLS_NO_EPOCH (see utls_hook_skip_decrypt) */
    size_t n;
    /* The four arrays live in |mem| (owned; UTLS_MAX_DELIVERED_AHEAD entries
     * each) from entry |first| on: the in-order path takes entries from the
     * front, which only moves |first| (no memmove per record). */
    void *mem;
    size_t first;
} utls_seqset;
/* An epoch no shared store has: the record's bytes are compared or decrypted
 * in order, never skipped unseen. */
#define UTLS_NO_EPOCH UINT64_MAX

/* Explicit record numbers (docs/ern.md). */
#define UTLS_ERN_TOKEN_LEN 16
#define UTLS_ERN_OFFER 0  /* index into utls_conn_st.ern_token; also "due" values: */
#define UTLS_ERN_ACCEPT 1 /* the client owes the server its accept */
#define UTLS_ERN_SWITCH 2 /* the server owes the client its switch */
#define UTLS_ERN_KIND_GCM 1
#define UTLS_ERN_KIND_CCM 2
#define UTLS_ERN_KIND_CHACHA 3
#define UTLS_ERN_KIND_GCM12 4 /* TLS 1.2 AES-GCM: salt || explicit nonce */
#define UTLS_ERN_KIND_CBC12 5 /* TLS 1.2 AES-CBC: explicit IV, then blocks */
/* TLS 1.2: the offer, the whole 16-byte explicit IV of an AES-CBC record
 * (RFC 5246 6.2.3.2), or its first 8 bytes as an AES-GCM explicit nonce
 * (RFC 5288 3). */
#define UTLS_ERN_OFFER12_LEN 16
/* Sealed records are recognised by their last 16 bytes (AEAD tag, or the
 * last CBC block): unique per record with overwhelming probability. */
#define UTLS_ERN_SEAL_TAIL 16
#define UTLS_ERN_SLOT_FREE 0
#define UTLS_ERN_SLOT_SEALED 1
/* Out of order, what a header's own number said (utls_conn_st.ern_ooo_verdict):
 * nothing (no number matched: tried as before), a number of the key tried
 * matched (no other key generation is tried), or it matched and the record
 * is settled (verified, or left to the in-order path): not retried. */
#define UTLS_ERN_OOO_NONE 0
#define UTLS_ERN_OOO_MATCHED 1
#define UTLS_ERN_OOO_SETTLED 2
/*
 * UTLS_ERN_OOO_SPAN: how far on each side of its center (the highest number
 * known before the record in the stream, + 1) the out-of-order path looks
 * for a record's own number. The sender writes every record within
 * UTLS_ERN_REORDER_WINDOW of the highest number it had written (docs/ern.md,
 * "The window"), and that is at least the highest number before the record.
 * Attack bounded: a forged plausible header (the tap sees segments before
 * TCP validates them) costs at most UTLS_ERN_OOO_MAX_CHECKS (+ 2: the number
 * found there before, the predictor's guess) one-block tests per key
 * generation each time it is tried, and a header whose number matched is
 * not tried again.
 */
#define UTLS_ERN_OOO_SPAN UTLS_ERN_REORDER_WINDOW
#define UTLS_ERN_OOO_MAX_CHECKS (2 * UTLS_ERN_OOO_SPAN + 1)
/*
 * UTLS_ERN_HINTS: how many (offset, number) pairs found out of order are
 * remembered (a ring; the oldest is forgotten). A record whose number the
 * out-of-order side already found costs the in-order check one block test,
 * and its number is skipped when other headers are searched. Attack bounded:
 * a hint is only the first candidate tried, never trusted (the block test
 * and the AEAD check decide), so a forged segment can cost at most one
 * extra block test per record, and the ring is fixed size.
 */
#define UTLS_ERN_HINTS 64
/* No predicted number to try first (utls_ern_ooo_find). */
#define UTLS_ERN_NO_GUESS UINT64_MAX
typedef struct {
    uint64_t offset;
    uint64_t number;
    uint32_t gen;
} utls_ern_hint;

/* Raw key material of one read key, for the one-block candidate test. */
typedef struct {
    int valid;
    int kind;
    EVP_CIPHER_CTX *ctx;  /* AES-ECB keyed, or ChaCha20 (keyed per use) */
    unsigned char key[32]; /* ChaCha20 only */
    unsigned char iv[12];
} utls_ern_keys;

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

/*
 * UTLS_HOT marks the functions every in-order record passes through (the
 * record hooks, the segment BIO's read and push): the compiler keeps them
 * together (.text.hot), so that they share instruction cache lines instead of
 * evicting OpenSSL's own record path (docs/unordered.md, PERFORMANCE).
 * UTLS_COLD marks the rare paths split off them, UTLS_NOINLINE the paths
 * split off them that are not rare (so that the hot function stays small
 * enough to be inlined where it is called).
 */
#if defined(__GNUC__)
# define UTLS_HOT __attribute__((hot))
# define UTLS_COLD __attribute__((cold, noinline))
# define UTLS_NOINLINE __attribute__((noinline))
#else
# define UTLS_HOT
# define UTLS_COLD
# define UTLS_NOINLINE
#endif

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

#define UTLS_SCRATCH_LEN (SSL3_RT_HEADER_LENGTH + SSL3_RT_MAX_ENCRYPTED_LENGTH + 256)

utls_conn *utls_conn_get(SSL *s);
void utls_raise(int reason, const char *fmt, ...);
uint64_t utls_now_ns(void);
void utls_ooo_reset(utls_conn *c);

/* The states of utls_conn_st.probe_gcm_inv and next_gcm_inv. */
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
 * the plaintext (inside c->scratch, valid until the next probe), sets
 * |*out_len| to its length and |*out_type| to its content type (the inner
 * type for TLS 1.3). Returns 0 on a failed check (nothing of |s| changed, no error
 * left on the queue), -1 on an internal error.
 */
int utls_probe(SSL *s, utls_conn *c, int next_key, const unsigned char *wire, size_t wire_len,
               uint64_t seq, const unsigned char **out_pt, size_t *out_len, int *out_type);

/*
 * utls_next_key_setup derives the read key and IV that a TLS 1.3 KeyUpdate
 * from the peer would install (RFC 8446 7.2), into c->next_ctx and
 * c->next_iv, without installing them. Returns 1 on success.
 */
int utls_next_key_setup(SSL *s, utls_conn *c);

/* Explicit record numbers (utls_ern.c). */
void utls_ern_register(SSL_CTX *ctx);
/* utls_ern_strip removes what negotiation put in front of an authenticated
 * application record's plaintext |*pt|: the peer's switch token (only
 * recognised when this endpoint expects it) and the record number, which must
 * equal |seq|. |numbered|: the record is known to carry a number. Returns 0
 * for a plain record, 1 for a numbered one, 2 for the switch record, -1 when
 * the number is not |seq|. */
int utls_ern_strip(SSL *s, const utls_conn *c, const unsigned char **pt, size_t *len,
                   uint64_t seq, int numbered);
/* utls_ern_inorder handles an authenticated application record in order:
 * consumes a negotiation message, or checks and strips the record number.
 * Returns 0 after SSLfatal() (a wrong number). */
int utls_ern_inorder(SSL *s, utls_conn *c, SSL3_RECORD *rr, uint64_t seq);
int utls_ern_keys_setup(SSL *s, utls_ern_keys *k, int next);
/* utls_tls13_read_key derives the raw read key (|*keylen| bytes, at most
 * EVP_MAX_KEY_LENGTH) and 12-byte IV of the current TLS 1.3 read key, or with
 * |next| of the one a KeyUpdate would install. Secrets: the caller wipes them. */
int utls_tls13_read_key(SSL *s, int next, unsigned char *key, size_t *keylen,
                        unsigned char iv[12]);
void utls_ern_keys_clear(utls_ern_keys *k);
int utls_ern_block_matches(utls_ern_keys *k, const unsigned char *wire, size_t wire_len,
                           uint64_t seq);
/* utls_ern_tls12_record_done: a TLS 1.2 client looks for the server's
 * offer in the explicit nonce of the first record under the new read key
 * (the server's Finished), once per connection. */
void utls_ern_tls12_record_done(SSL *s, const SSL3_RECORD *rr);
/* utls_ern_rx_done: the record numbered |seq| was authenticated in order:
 * mark it seen and set the read sequence to the highest number + 1. */
void utls_ern_rx_done(SSL *s, utls_conn *c, uint64_t seq);
/* utls_ern_ooo_find looks for the own number of the record |wire| at stream
 * offset |offset| (found past a hole) under the read key |k|. With |current|
 * (the current key, whose read sequence is |floor|): first the number found
 * before at |offset| (UTLS_ERN_HINTS), then |guess| (the predictor's, or
 * UTLS_ERN_NO_GUESS), then nearest first around the highest number known
 * before |offset| + 1, up to UTLS_ERN_OOO_SPAN on each side, skipping numbers
 * below the in-order window (|floor| - UTLS_ERN_REORDER_WINDOW), those the
 * in-order side authenticated and those found at other offsets. For the next
 * key: nearest first around |guess| (0 without one). At most
 * UTLS_ERN_OOO_MAX_CHECKS + 2 block tests, each counted in
 * c->stats.ern_block_checks. Returns 1 and sets |*out_seq| if a number
 * matched (remembered for |offset| under the current key), 0 if none did. */
int utls_ern_ooo_find(utls_conn *c, utls_ern_keys *k, const unsigned char *wire, size_t wire_len,
                      uint64_t offset, uint64_t guess, uint64_t floor, int current,
                      uint64_t *out_seq);

#endif
