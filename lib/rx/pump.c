/*
 * The unordered receive path (SSL_MODE_UNORDERED): the pump.
 *
 * The in-order path is OpenSSL's own record code: it stays authoritative and
 * delivers every record in sequence order. lib/rx/ adds, past a hole:
 * fragments from the read BIO -> reassembly -> header scan -> sequence
 * prediction -> trial decryption on a copy of the read state -> a queue of
 * verified records, which the next read delivers. A record delivered early is
 * remembered by sequence number and skipped when the in-order path reaches it.
 *
 * The paper's prototype read the socket only when its list of out-of-order
 * records was empty and so locked out in-order data (uTLS report, 7.1). Here
 * every read first drains all fragments that have arrived, then delivers one
 * ready record, and otherwise reads in order; and when the in-order read finds
 * nothing, the fragments are drained again before the read reports
 * SSL_ERROR_WANT_READ. Neither side can starve the other.
 */
#include <string.h>

#include <openssl/err.h>

#include "common/utls_conn.h"
#include "glue/utls_glue.h"

/* utls_forget_bio drops every pointer into the read BIO that |c| knew. */
void utls_forget_bio(utls_conn *c)
{
    size_t i;

    c->rx.sig = NULL;
    c->rx.sig_bio = NULL;
    c->hooks.read_idle = 0;
    /* Another BIO: its store's epochs say nothing about the bytes verified
     * from the old one. */
    utls_seqset_forget_epochs(&c->rx.ahead);
    utls_seqset_forget_epochs(&c->rx.next.ahead);
    for (i = 0; i < c->rx.ready.num; i++)
        c->rx.ready.rec[i].store_epoch = UTLS_NO_EPOCH;
    if (c->rx.ready.partial_active)
        c->rx.ready.partial.store_epoch = UTLS_NO_EPOCH;
}

/* utls_note_inorder_anchor notes the in-order record just authenticated as |seq|
 * for the out-of-order side, which takes it up when it next works. Both
 * bases' in-order hooks call it once per record. */
int utls_skip_body_discard(utls_conn *c, BIO *rbio, uint64_t body_off, size_t body_len,
                           int want_nonce, unsigned char nonce[8], size_t *out_nonce_len)
{
    utls_reasm_run run;
    utls_bio_discard discard;

    *out_nonce_len = 0;
    if (want_nonce) {
        /* The store still holds the body: the reader has not passed it, and
         * an eviction would have moved the epoch the caller checked. */
        if (!utls_reasm_find_run(c->rx.store, &run, body_off)
            || run.offset + run.len - body_off < body_len)
            return 0;
        *out_nonce_len = body_len < 8 ? body_len : 8;
        memcpy(nonce, run.data + (body_off - run.offset), *out_nonce_len);
    }
    /* The BIO refuses unless its read point is the body's first byte and
     * the whole body is in order there: then nothing changed, read it.
     * Straight to its store when its signals name it (utls_next_fragment). */
    discard.offset = body_off;
    discard.len = body_len;
    if (c->rx.sig_bio == rbio && c->rx.sig->events != NULL
            ? !utls_segstore_discard(c->rx.sig->events, body_off, body_len)
            : BIO_ctrl(rbio, UTLS_BIO_CTRL_DISCARD, 0, &discard) != 1) {
        *out_nonce_len = 0;
        return 0;
    }
    return 1;
}

int utls_bio_inorder_end(const utls_conn *c, BIO *rbio, uint64_t *out_end)
{
    const utls_bio_signals *sig = c->rx.sig;

    /* |store| set: the BIO's in-order stream is that store's (not the tap,
     * whose in-order bytes are the kernel's). */
    if (c->rx.sig_bio == rbio && sig != NULL && sig->store != NULL && sig->events != NULL) {
        *out_end = utls_segstore_inorder_end(sig->events);
        return 1;
    }
    return BIO_ctrl(rbio, UTLS_BIO_CTRL_INORDER_END, 0, out_end) == 1;
}

void utls_note_inorder_anchor(utls_conn *c, uint64_t seq)
{
    utls_seqpred_record a = {0};

    a.offset = c->inorder.cur_offset;
    a.seq = PRED_SEQ(seq);
    a.wire_len = c->inorder.cur_wire_len;
    a.has_nonce = c->rx.explicit_nonce && c->inorder.cur_has_nonce;
    a.explicit_nonce = c->inorder.cur_nonce;
    /* The hot path, with or without a hole: only a note. The stores are
     * brought up to date when the out-of-order side next works
     * (utls_ooo_sync). Adding every in-order record as an anchor while bytes
     * are held past a hole shifted the whole anchor table once per record,
     * and advance() drops all but the last in-order anchor anyway. */
    c->rx.idle_anchor[0] = c->rx.idle_anchor[1];
    c->rx.idle_anchor[1] = a;
    if (c->rx.num_idle_anchors < 2)
        c->rx.num_idle_anchors++;
    c->rx.stores_stale = 1;
    utls_seqpred_observe(c->rx.pred, a.wire_len);
}

/* utls_bio_quiet: the read BIO's signals say no fragment or wake-up waits. */
int utls_bio_quiet(SSL *s, utls_conn *c)
{
    BIO *rbio = SSL_get_rbio(s);

    if (c->rx.sig_bio != rbio) {
        utls_forget_bio(c);
        c->rx.sig_bio = rbio;
        if (rbio == NULL
            || BIO_ctrl(rbio, UTLS_BIO_CTRL_GET_SIGNALS, 0, (void *)&c->rx.sig) != 1)
            c->rx.sig = NULL;
    }
    return c->rx.sig != NULL && c->rx.sig->pending == 0;
}

/*
 * utls_store_refresh points c->rx.store at the store fragments are read from:
 * the read BIO's own when it shares one, else the connection's copy (made
 * here if needed). Called at every entry point that reads the store. Returns
 * 1 if there is a store.
 */
int utls_store_refresh(SSL *s, utls_conn *c)
{
    utls_reasm_limits rl;

    (void)utls_bio_quiet(s, c);
    if (c->rx.sig != NULL && c->rx.sig->store != NULL) {
        c->rx.store = c->rx.sig->store;
        c->rx.store_shared = 1;
        return 1;
    }
    c->rx.store_shared = 0;
    if (c->rx.reasm == NULL) {
        rl.max_bytes = c->limits.max_bytes_held;
        rl.max_fragments = c->limits.max_fragments;
        rl.max_window = c->limits.max_window;
        c->rx.reasm = utls_reasm_new(&rl, c->inorder.next_offset);
        /* The connection's own copy is never the in-order stream (OpenSSL
         * reads that from the BIO): it may keep other copies of a range for
         * a record that fails under the first (utls_try_other_copy). */
        if (c->rx.reasm != NULL)
            utls_reasm_keep_alternates(c->rx.reasm, 1);
    }
    c->rx.store = c->rx.reasm;
    return c->rx.store != NULL;
}

/* utls_store_epoch: the shared store's epoch, for a record verified now. */
uint64_t utls_store_epoch(const utls_conn *c)
{
    return c->rx.store_shared && c->rx.sig != NULL ? c->rx.sig->store_epoch : UTLS_NO_EPOCH;
}

/* utls_shared_over_limits: with a shared store the BIO's receive window bounds
 * the memory; the connection's limits still bound what the out-of-order side
 * takes on (the bytes it scans and probes). A fragment past them is left to
 * the in-order stream, as a copy would have been dropped. The store cannot be
 * trimmed from here (it is the BIO's receive buffer), so the far side gives
 * way instead: a fragment that ends within half of max_bytes_held of the
 * in-order point is always taken, whatever lies further out. Otherwise data
 * injected far ahead (a storm of forged headers, a spray of 1-byte segments)
 * would hold the store over its limits and shut out the near, genuine
 * fragments for as long as it stays (issue 20). The work it adds is bounded
 * by that distance and by the probe budget. */
static int utls_shared_over_limits(const utls_conn *c, const utls_bio_fragment *f)
{
    uint64_t reach = f->offset + f->len - c->inorder.next_offset;

    if (reach > c->limits.max_window)
        return 1;
    if (reach <= c->limits.max_bytes_held / 2)
        return 0;
    return utls_reasm_bytes_held(c->rx.store) > c->limits.max_bytes_held
        || utls_reasm_num_fragments(c->rx.store) > c->limits.max_fragments;
}

/* utls_next_fragment takes the next fragment event of |rbio|, the read BIO,
 * into |*f|: straight from its store when its signals name one, else through
 * BIO_ctrl(). Returns 1 if there was one. */
static int utls_next_fragment(utls_conn *c, BIO *rbio, utls_bio_fragment *f)
{
    if (c->rx.sig_bio == rbio && c->rx.sig != NULL && c->rx.sig->events != NULL)
        return c->rx.sig->pending != 0 && utls_segstore_take_event(c->rx.sig->events, f);
    return BIO_ctrl(rbio, UTLS_BIO_CTRL_NEXT_FRAGMENT, 0, f) == 1;
}

/* utls_pump takes every fragment the read BIO has and processes it. Called
 * only when the BIO is not known to be quiet or a rescan is due. */
void utls_pump(SSL *s, utls_conn *c)
{
    utls_bio_fragment f;
    int ok;
    utls_reasm_stats before, after;
    BIO *rbio = SSL_get_rbio(s); /* once: a call with QUIC's tests on 3.5 */

    ok = utls_gen_setup(s, c) && utls_store_refresh(s, c);
    if (ok && c->rx.rescan_pending) {
        /* A new key: what is held past the hole is scanned again. */
        utls_reasm_run run;
        uint64_t at;
        int more;

        c->rx.rescan_pending = 0;
        utls_ooo_sync(c);
        for (more = utls_reasm_first_run(c->rx.store, &run); more;
             more = utls_reasm_next_run(c->rx.store, &run, at)) {
            at = run.offset;
            utls_process_run(s, c, run.offset, 0);
        }
    }
    if (ok && !c->rx.store_shared)
        utls_reasm_get_stats(c->rx.store, &before);
    for (;;) {
        uint64_t at[UTLS_SCAN_BATCH], latest = 0;
        uint64_t other_off[UTLS_SCAN_BATCH];
        size_t other_len[UTLS_SCAN_BATCH];
        size_t n = 0, k, num_other = 0;

        /*
         * Take a batch of fragments first and credit the probe budget for all
         * of them: with a shared store a run already holds the bytes of
         * fragments not yet taken, and scanning it must not find the budget
         * for those bytes missing. Records found are stamped with the latest
         * arrival of the batch (never earlier than their last byte came).
         */
        while (n < UTLS_SCAN_BATCH && utls_next_fragment(c, rbio, &f)) {
            c->stats.fragments++;
            if (!ok)
                continue; /* drained: nothing can be delivered early */
            /* The probe budget grows with the bytes received past a hole. */
            c->rx.probe_budget += (double)f.len * (double)c->limits.max_probes_per_kib / 1024.0;
            if (c->rx.probe_budget
                > UTLS_PROBE_BUDGET_BURST + (double)c->limits.max_probes_per_kib * 64)
                c->rx.probe_budget
                    = UTLS_PROBE_BUDGET_BURST + (double)c->limits.max_probes_per_kib * 64;
            if (c->rx.store_shared) {
                /* Already in the store, and new there (the BIO queues an
                 * event only for bytes it stored for the first time). */
                if (utls_shared_over_limits(c, &f)) {
                    c->stats.bytes_dropped += f.len;
                    continue;
                }
            } else {
                uint64_t kept = 0;
                utls_reasm_stats rs;

                if (c->rx.failed.num > 0) {
                    utls_reasm_get_stats(c->rx.store, &rs);
                    kept = rs.alt_copies_kept;
                }
                if (utls_reasm_insert(c->rx.store, f.offset, f.data, f.len) != UTLS_REASM_STORED) {
                    /* A differing copy of held bytes, kept: a record that
                     * failed there may verify under it (after the batch). */
                    if (c->rx.failed.num > 0 && num_other < UTLS_SCAN_BATCH) {
                        utls_reasm_get_stats(c->rx.store, &rs);
                        if (rs.alt_copies_kept != kept) {
                            other_off[num_other] = f.offset;
                            other_len[num_other++] = f.len;
                            if (f.arrival_ns > latest)
                                latest = f.arrival_ns;
                        }
                    }
                    continue;
                }
            }
            at[n++] = f.offset;
            if (f.arrival_ns > latest)
                latest = f.arrival_ns;
        }
        if (n == 0 && num_other == 0)
            break;
        utls_ooo_sync(c);
        for (k = 0; k < n; k++)
            utls_process_run(s, c, at[k], latest);
        for (k = 0; k < num_other; k++) {
            /* The copy that arrived first (a forger's, sent ahead of the
             * genuine one) may have used up the probe budget failing; the
             * other copy still gets what its own bytes bring, so that it
             * can be tried. Bound: the probes spent on copies past a hole
             * are at most twice the budget their bytes earn, plus
             * UTLS_RETRY_RESERVE per copy kept (UTLS_REASM_MAX_ALT_*). */
            double grant = (double)other_len[k] * (double)c->limits.max_probes_per_kib / 1024.0;

            if (grant < UTLS_RETRY_RESERVE)
                grant = UTLS_RETRY_RESERVE; /* a short copy: the likeliest candidates */

            if (c->rx.probe_budget < grant)
                c->rx.probe_budget = grant;
            (void)utls_failed_other_copy(s, c, other_off[k], other_len[k], latest);
        }
    }
    /* Headers parked when the probe budget ran dry get another chance once
     * it has grown back (it grows with the bytes that keep arriving). */
    if (ok && c->rx.budget_starved && c->rx.failed.num > 0 && c->rx.probe_budget >= 1) {
        c->rx.budget_starved = 0;
        utls_ooo_sync(c);
        while (utls_failed_retry(s, c, 0))
            continue;
    }
    if (ok && !c->rx.store_shared) {
        utls_reasm_get_stats(c->rx.store, &after);
        c->stats.bytes_dropped += (after.bytes_dropped_window - before.bytes_dropped_window)
            + (after.bytes_dropped_size - before.bytes_dropped_size)
            + (after.bytes_evicted - before.bytes_evicted);
    }
}
