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
#include "glue/utls_glue.h"

struct utls_conn_st {
    /* First: the patched record code reads it in place (utls_hooks.h). */
    utls_hook_state hooks;
    UTLS_LIMITS limits;
    UTLS_STATS stats;

    /* Where the in-order path is (lib/rx/utls_rx.h; written by the record
     * hooks, lib/glue/inorder.c). */
    utls_rx_inorder inorder;
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
    utls_rx_chain chain; /* the chain fast path (lib/rx/chain.c) */
    utls_probe_state probe; /* the probes' cipher state (lib/glue/probe.c) */
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
    utls_rx_failed failed; /* headers to retry (lib/rx/candidates.c) */
    utls_seqpred_config pred_config;

    /* TLS 1.3: the key a KeyUpdate from the peer would install next
     * (lib/rx/utls_rx.h). */
    utls_rx_next_key next;
    utls_ready_queue ready; /* lib/rx/ready.c */

    unsigned char *scratch; /* one record: header + max ciphertext */
    int cleanse_plaintext;  /* SSL_OP_CLEANSE_PLAINTEXT: wipe plaintext copies */
    int ip_tunnel;          /* SSL_MODE_UTLS_IP_TUNNEL: only datagrams go early */

    /* Explicit record numbers: the negotiation and both directions
     * (lib/ern/utls_ern.h). */
    utls_ern_state ern;
};

/* utls_ooo_reset drops the out-of-order stores (rebuilt for the current key
 * generation on next use); verified records waiting are kept. */
void utls_ooo_reset(utls_conn *c);

#endif
