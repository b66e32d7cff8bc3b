/*
 * The chain fast path: past a record of the current key that verified out
 * of order, the next record's header and number are known, so bytes that
 * complete it are verified with one candidate and no scan; and the run
 * processing that falls back to the scanner.
 */
#include <string.h>

#include <openssl/err.h>

#include "common/utls_conn.h"
#include "glue/utls_glue.h"

/* One copy of the big-endian helpers for the fork and the provider (core/:
 * written out, one byte-swapping load; a loop stayed a loop). */
#include "utls/be64.h"
#define be64 utls_load_be64

/*
 * utls_chain_sync tells the scanner about the records the chain fast path
 * verified since it last knew of one: [chain.synced, chain.off) is a run of
 * authenticated records, so no position inside it is a header and the next
 * header is at chain.off, exactly what one utls_scan_confirm of the whole run
 * says. Called before anything else reads the scanner.
 */
void utls_chain_sync(utls_conn *c)
{
    if (c->rx.chain.valid && c->rx.chain.off > c->rx.chain.synced && c->rx.scan != NULL)
        (void)utls_scan_confirm(c->rx.scan, c->rx.chain.synced, (size_t)(c->rx.chain.off - c->rx.chain.synced));
    c->rx.chain.synced = c->rx.chain.off;
    if (c->rx.chain.anchor_pending && c->rx.pred != NULL)
        utls_seqpred_add_anchor(c->rx.pred, &c->rx.chain.anchor);
    c->rx.chain.anchor_pending = 0;
}

/* utls_chain_set puts the chain cursor after the record of |wire_len| bytes
 * at |offset| that verified (or was known) as |seq| of the current key,
 * whose end the scanner already knows (utls_scan_confirm). */
void utls_chain_set(utls_conn *c, uint64_t offset, size_t wire_len, uint64_t seq)
{
    c->rx.chain.valid = 1;
    c->rx.chain.off = offset + wire_len;
    c->rx.chain.seq = seq + 1;
    c->rx.chain.synced = c->rx.chain.off;
}

/* utls_chain_drop forgets the chain, after telling the scanner about it. */
static void utls_chain_drop(utls_conn *c)
{
    utls_chain_sync(c);
    c->rx.chain.valid = 0;
}

/*
 * utls_chain_verify verifies the record of |wire_len| bytes at |wire|, the
 * chain cursor, as number chain.seq of the current key: the one candidate the
 * general path would try first there, with the same checks (not below the
 * in-order point, not known already, a position the anchors allow, the probe
 * budget) and the same bookkeeping (anchor, ready queue) except the
 * scanner's, which utls_chain_sync does later. Returns 1 if it verified an
 * application data record and the chain goes on, 0 to leave this record to
 * the general path (which tries it again, with every candidate).
 */
static int utls_chain_verify(SSL *s, utls_conn *c, const unsigned char *wire, size_t wire_len,
                             uint64_t arrival_ns)
{
    uint64_t seq = c->rx.chain.seq, offset = c->rx.chain.off;
    utls_seqpred_record a = {0};
    const unsigned char *pt;
    size_t pt_len;
    int type, r;

    /* Known already? The chain runs at the front: a number above the
     * highest delivered and the highest ready one needs no search. */
    if (seq < utls_inorder_seq(s)
        || (c->rx.ahead.n > 0 && c->rx.ahead.v[c->rx.ahead.n - 1] >= seq
            && utls_seqset_contains(&c->rx.ahead, seq))
        || (c->rx.ready.num > 0 && (c->rx.ready.rec[c->rx.ready.num - 1].gen > c->rx.gen
                                 || (c->rx.ready.rec[c->rx.ready.num - 1].gen == c->rx.gen
                                     && c->rx.ready.rec[c->rx.ready.num - 1].seq >= seq))
            && utls_ready_find(c, c->rx.gen, seq) >= 0)
        || !utls_seqpred_plausible(c->rx.pred, offset, wire_len, PRED_SEQ(seq))
        || c->rx.probe_budget < 1)
        return 0;
    c->rx.probe_budget -= 1;
    c->stats.headers_found++;
    c->stats.probes++;
    r = utls_probe(s, c, 0, wire, wire_len, seq, &pt, &pt_len, &type);
    if (r <= 0) {
        if (r == 0)
            c->stats.soft_failures++;
        return 0;
    }
    /* The anchor waits for utls_chain_sync. The next record's plausibility
     * check does not need it: between the last anchor and the cursor lie
     * only the chain's records, whose count and sizes fit that gap exactly
     * as the check requires. */
    a.offset = offset;
    a.seq = PRED_SEQ(seq);
    a.wire_len = wire_len;
    c->rx.chain.anchor = a;
    c->rx.chain.anchor_pending = 1;
    c->rx.chain.off = offset + wire_len;
    c->rx.chain.seq = seq + 1;
    if (type == SSL3_RT_APPLICATION_DATA && pt_len > 0)
        utls_ready_add_verified(c, seq, c->rx.gen, offset, wire_len, arrival_ns, pt, pt_len);
    if (c->rx.cleanse_plaintext)
        OPENSSL_cleanse(c->rx.scratch, wire_len);
    /* A handshake record (a KeyUpdate) or an alert: what follows may be
     * under another key, or nothing. */
    return type == SSL3_RT_APPLICATION_DATA;
}

/*
 * utls_chain_run is the fast path for the fragment at |offset|: when it lies
 * at or past the chain cursor in the run that holds the cursor (bytes
 * arriving at the end of a run of verified records), the records completed
 * at the cursor are verified one after the other, each with its one
 * candidate, and nothing is scanned. Returns 1 if that handled the fragment,
 * 0 if the general path must (the chain is then synced or dropped). Anything
 * unusual is left to the general path: a fragment before the cursor or in
 * another run, a header at the cursor the cipher cannot produce, a record
 * that does not verify, the in-order point past the cursor, a key that may
 * have changed, explicit record numbers.
 */
static int utls_chain_run(SSL *s, utls_conn *c, uint64_t offset, uint64_t arrival_ns)
{
    utls_reasm_run run;
    int verified = 0;

    if (!c->rx.chain.valid || !c->rx.tls13 || c->rx.next.seen || c->ern.tokens_ready
        || offset < c->rx.chain.off || c->rx.chain.off < c->inorder.next_offset
        || !utls_reasm_find_run(c->rx.store, &run, c->rx.chain.off)
        || offset >= run.offset + run.len)
        return 0;
    for (;;) {
        uint64_t avail = run.offset + run.len - c->rx.chain.off;
        const unsigned char *h = run.data + (c->rx.chain.off - run.offset);
        size_t len;

        if (avail < SSL3_RT_HEADER_LENGTH)
            break; /* the next header is not here yet */
        len = ((size_t)h[3] << 8) | h[4];
        /* RFC 8446 5.1: TLSCiphertext.opaque_type is application_data (23)
         * and legacy_record_version 0x0303; the length within the cipher's
         * bounds (the scan profile). Anything else breaks the chain. */
        if (h[0] != SSL3_RT_APPLICATION_DATA || h[1] != (TLS1_2_VERSION >> 8)
            || h[2] != (TLS1_2_VERSION & 0xff) || len < c->rx.chain.min_len
            || len > c->rx.chain.max_len) {
            utls_chain_drop(c);
            return 0;
        }
        if (avail < SSL3_RT_HEADER_LENGTH + len)
            break; /* the record is not whole yet */
        if (!utls_chain_verify(s, c, h, SSL3_RT_HEADER_LENGTH + len, arrival_ns)) {
            utls_chain_drop(c);
            return 0;
        }
        verified = 1;
    }
    /* As in the general path: a new anchor pins the numbers of headers
     * whose candidates failed. */
    if (verified && c->rx.failed.num > 0) {
        while (utls_failed_retry(s, c, arrival_ns))
            continue;
    }
    return 1;
}

/*
 * utls_try_other_copy is called when the record whose header is |hit| failed
 * to authenticate under every candidate. With the connection's own store
 * (the tap's), a copy of its bytes that arrived second and differed may be
 * the genuine one (the first was forged, or damaged): the store swaps it in
 * (utls_reasm_swap_alternate), and the scanner forgets what it found in the
 * old bytes, so that the caller's rescan tries the record again. Never with
 * a BIO's shared store, whose bytes are its in-order stream. Returns 1 if
 * the bytes changed.
 */
static int utls_try_other_copy(utls_conn *c, const utls_scan_hit *hit)
{
    uint64_t from = 0, to = 0;

    if (c->rx.store_shared
        || !utls_reasm_swap_alternate(c->rx.store, hit->offset,
                                      SSL3_RT_HEADER_LENGTH + (size_t)hit->len, &from, &to))
        return 0;
    if (hit->offset < from)
        from = hit->offset;
    (void)utls_scan_forget(c->rx.scan, from, to);
    if (c->rx.chain.valid && c->rx.chain.off > from)
        utls_chain_drop(c);
    return 1;
}

/* utls_failed_other_copy: another copy of [offset, offset + len) has just
 * been kept. A header whose record failed there already is not retried
 * until a new anchor appears, so try the other copy for it now. Returns 1 if
 * any bytes were swapped (and rescanned). */
int utls_failed_other_copy(SSL *s, utls_conn *c, uint64_t offset, size_t len,
                           uint64_t arrival_ns)
{
    size_t i;
    int any = 0;

    for (i = 0; i < c->rx.failed.num; i++) {
        utls_scan_hit hit = c->rx.failed.hit[i];

        if (hit.offset >= offset + len
            || hit.offset + SSL3_RT_HEADER_LENGTH + hit.len <= offset)
            continue;
        if (utls_try_other_copy(c, &hit)) {
            any = 1;
            utls_process_run(s, c, hit.offset, arrival_ns);
            break; /* the failed list may have changed under the rescan */
        }
    }
    return any;
}

/* utls_process_run scans the run holding |offset| and tries every header. */
void utls_process_run(SSL *s, utls_conn *c, uint64_t offset, uint64_t arrival_ns)
{
    utls_scan_hit hits[UTLS_SCAN_BATCH];
    utls_reasm_run run;
    size_t n, i;
    int again;

    if (utls_chain_run(s, c, offset, arrival_ns))
        return;
    utls_chain_sync(c);
    do {
        utls_scan_result sr;

        again = 0;
        if (!utls_reasm_find_run(c->rx.store, &run, offset))
            return;
        do {
            sr = utls_scan_feed(c->rx.scan, hits, UTLS_SCAN_BATCH, &n, run.offset, run.data,
                                run.len);
            for (i = 0; i < n; i++) {
                size_t limit = c->limits.max_probes_per_record;
                size_t first = limit > 2 * UTLS_RETRY_RESERVE ? limit - UTLS_RETRY_RESERVE : limit;
                size_t allowance = first;

                c->stats.headers_found++;
                if (utls_try_record(s, c, &hits[i], &run, arrival_ns, &allowance)) {
                    again = 1; /* the next header is now known (chained) */
                } else {
                    utls_failed_add(c, &hits[i], first - allowance);
                    /* Probed and failed: perhaps another copy verifies.
                     * Swapped in place (the run stays where it is); the
                     * forgotten positions are scanned again below. */
                    if (allowance < first && utls_try_other_copy(c, &hits[i]))
                        again = 1;
                }
            }
        } while (sr == UTLS_SCAN_MORE);
        /* A new anchor pins the numbers of records next to it: retry. */
        if (again && c->rx.failed.num > 0) {
            while (utls_failed_retry(s, c, arrival_ns))
                continue;
        }
    } while (again);
}
