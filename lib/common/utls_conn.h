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

    /* The receive path past a hole: key generations, the out-of-order
     * stores, the candidates, the chain and the ready queue
     * (lib/rx/utls_rx.h). */
    utls_rx_state rx;
    utls_probe_state probe; /* the probes' cipher state (lib/glue/probe.c) */

    /* Explicit record numbers: the negotiation and both directions
     * (lib/ern/utls_ern.h). */
    utls_ern_state ern;
};

/* utls_ooo_reset drops the out-of-order stores (rebuilt for the current key
 * generation on next use); verified records waiting are kept. */
void utls_ooo_reset(utls_conn *c);

/* utls_rx_scratch returns the probe buffer c->rx.scratch, made on first use;
 * NULL if it cannot be made (lib/common/conn.c). */
unsigned char *utls_rx_scratch(utls_conn *c);

#endif
