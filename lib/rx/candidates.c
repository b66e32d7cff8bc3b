/*
 * Past a hole: a plausible record header found by the scanner is tried under
 * its likely sequence numbers (the predictor's ranking, an explicit record
 * number, the next key generation), each on a copy of the read state
 * (utls_probe), within the probe budget; headers whose candidates all failed
 * are kept to be retried next to a new anchor.
 */
#include <string.h>

#include <openssl/err.h>

#include "common/utls_conn.h"
#include "glue/utls_glue.h"

/* One copy of the big-endian helpers for the fork and the provider (core/:
 * written out, one byte-swapping load; a loop stayed a loop). */
#include "utls/be64.h"
#define be64 utls_load_be64

/* --- Past a hole: scan, predict, probe ----------------------------------- */

/* utls_ooo_sync brings the stores up to the in-order point and adds the
 * last in-order records noted since the previous sync as anchors. Everything
 * that reads the stores or the predictor runs after it. */
void utls_ooo_sync(utls_conn *c)
{
    int i;

    if (!c->rx.stores_stale)
        return;
    if (!c->rx.store_shared)
        utls_reasm_advance(c->rx.store, c->inorder.next_offset); /* the BIO trims its own */
    utls_scan_advance(c->rx.scan, c->inorder.next_offset);
    for (i = 2 - c->rx.num_idle_anchors; i < 2; i++)
        utls_seqpred_add_anchor(c->rx.pred, &c->rx.idle_anchor[i]);
    utls_seqpred_advance(c->rx.pred, c->inorder.next_offset);
    c->rx.num_idle_anchors = 0;
    c->rx.stores_stale = 0;
}

utls_seqpred *utls_pred_next_gen(const utls_conn *c)
{
    utls_seqpred *pred;

    /* TLS 1.3 only: a TLS 1.2 renegotiation may change the cipher, and with
     * it the bounds in pred_config and the sizes of the same messages. */
    if (c->rx.pred == NULL || !c->rx.tls13)
        return NULL;
    if ((pred = utls_seqpred_new(&c->rx.pred_config)) != NULL)
        utls_seqpred_inherit_sizes(pred, c->rx.pred);
    return pred;
}

/*
 * utls_verify_candidate runs the full check of the record at |hit| as sequence
 * number |seq| of the current or next key and, if it verifies, records it
 * (anchor, chained header) and queues its plaintext for delivery. With
 * |numbered| the plaintext starts with the record's number, which is removed.
 * A full check uses one of the header's |*allowance| probes. Returns 1 if it
 * verified, -1 to stop trying this record (probe budget, allowance or an
 * internal error), 0 to try the next candidate.
 */
static int utls_verify_candidate(SSL *s, utls_conn *c, int next_key, const utls_scan_hit *hit,
                                 const unsigned char *wire, const utls_seqpred_query *q,
                                 uint64_t arrival_ns, uint64_t seq, int numbered,
                                 size_t *allowance)
{
    utls_seqset *ahead = next_key ? &c->rx.next.ahead : &c->rx.ahead;
    uint32_t gen = c->rx.gen + (next_key ? 1 : 0);
    uint64_t floor = next_key ? 0 : utls_inorder_seq(s);
    const unsigned char *pt;
    size_t pt_len;
    int type, r;

    if (seq < floor)
        return 0; /* processed in order already */
    if (utls_seqset_contains(ahead, seq) || utls_ready_find(c, gen, seq) >= 0) {
        size_t i = utls_seqset_lower(ahead, seq);
        int r = utls_ready_find(c, gen, seq);

        /* This very record (same number, same place) is known: verified
         * before. Nothing to probe, and the next header is known too. */
        if ((i < ahead->n && ahead->v[i] == seq && ahead->off[i] == hit->offset)
            || (r >= 0 && c->rx.ready.rec[r].offset == hit->offset)) {
            utls_scan_confirm(c->rx.scan, hit->offset, q->wire_len);
            if (!next_key && !numbered && hit->offset + q->wire_len > c->rx.chain.off)
                utls_chain_set(c, hit->offset, q->wire_len, seq);
            return 1;
        }
        return 0;
    }
    /* A number the record's position cannot have: a genuine record copied
     * to another offset (its explicit nonce or number would verify). */
    if (!next_key && !utls_seqpred_plausible(c->rx.pred, hit->offset, q->wire_len, PRED_SEQ(seq)))
        return 0;
    if (next_key && c->rx.next.pred != NULL
        && !utls_seqpred_plausible(c->rx.next.pred, hit->offset, q->wire_len, PRED_SEQ(seq)))
        return 0;
    if (c->rx.probe_budget < 1 || *allowance == 0) {
        c->stats.probe_limit_hits++;
        if (c->rx.probe_budget < 1)
            c->rx.budget_starved = 1;
        return -1;
    }
    c->rx.probe_budget -= 1;
    (*allowance)--;
    c->stats.probes++;
    r = utls_probe(s, c, next_key, wire, q->wire_len, seq, &pt, &pt_len, &type);
    if (r < 0)
        return -1;
    if (r == 0) {
        c->stats.soft_failures++;
        return 0;
    }
    if (type == SSL3_RT_APPLICATION_DATA && c->ern.tokens_ready) {
        /* The number (checked by the block test for |numbered|, which the
         * AEAD check now confirmed), or the peer's switch record: stripped
         * here; the switch itself takes effect only in order. Past the
         * peer's switch point (in order) every application record carries
         * its number, also one that verified through the predicted
         * candidates because its number search came up empty (a replayed
         * copy elsewhere had taken the number): it must carry |seq| and
         * lose it, or its number would reach the application. */
        if (utls_ern_strip(s, c, &pt, &pt_len, seq, numbered || c->ern.rx) < 0)
            return 0;
    }
    /* Authenticated: a true record boundary with a known number. */
    {
        utls_seqpred_record a = {0};

        if (next_key && c->rx.next.pred == NULL)
            c->rx.next.pred = utls_pred_next_gen(c);
        if (next_key && (!c->rx.next.seen || hit->offset < c->rx.next.seen_offset)) {
            c->rx.next.seen = 1;
            c->rx.next.seen_offset = hit->offset;
        }
        if (next_key ? c->rx.next.pred != NULL : 1) {
            a.offset = hit->offset;
            a.seq = PRED_SEQ(seq);
            a.wire_len = q->wire_len;
            a.has_nonce = q->has_nonce;
            a.explicit_nonce = q->explicit_nonce;
            utls_seqpred_add_anchor(next_key ? c->rx.next.pred : c->rx.pred, &a);
        }
        utls_scan_confirm(c->rx.scan, hit->offset, q->wire_len);
        /* The next record of the chain is verified by the fast path
         * (utls_chain_run); not past a handshake record (a KeyUpdate changes
         * the key after it), nor under the next key or numbered records
         * (their numbers are not the chain's). */
        if (!next_key && !numbered && type == SSL3_RT_APPLICATION_DATA)
            utls_chain_set(c, hit->offset, q->wire_len, seq);
        else if (!next_key)
            c->rx.chain.valid = 0;
        /* Alerts and handshake messages are processed only in order;
         * empty records carry nothing to deliver. */
        if (type == SSL3_RT_APPLICATION_DATA && pt_len > 0)
            utls_ready_add_verified(c, seq, gen, hit->offset, q->wire_len, arrival_ns,
                                    pt, pt_len);
        if (c->rx.cleanse_plaintext)
            OPENSSL_cleanse(c->rx.scratch, q->wire_len);
    }
    return 1;
}

static int utls_try_key(SSL *s, utls_conn *c, int next_key, const utls_scan_hit *hit,
                        const unsigned char *wire, const utls_seqpred_query *q,
                        uint64_t arrival_ns, size_t *allowance)
{
    uint64_t cands[UTLS_SEQPRED_MAX_CANDIDATES];
    utls_seqpred *pred = next_key ? c->rx.next.pred : c->rx.pred;
    /* Records below the in-order point's sequence number were processed in
     * order; the next key's numbering starts at 0. */
    uint64_t floor = next_key ? 0 : utls_inorder_seq(s);
    uint64_t tried = 0; /* a candidate tried before the ranking (shifted) */
    size_t limit = *allowance, n, i;

    /* A peer that may number its records: the record's own number, by
     * one-block tests nearest first around the highest number known before
     * it (utls_ern_ooo_find, lib/glue/ern_hooks.c). A match settles which key
     * generation the record is under and whether it can go early; only a
     * record without a number (or beyond the span) goes on to the predicted
     * candidates below. */
    if (c->ern.tokens_ready && (SSL_is_server(s) ? c->ern.offered : c->ern.accepted)) {
        utls_ern_keys *k = next_key ? &c->ern.next : &c->ern.cur;
        uint64_t guess = UTLS_ERN_NO_GUESS, seq;
        int r;

        if (pred != NULL && utls_seqpred_num_anchors(pred) > 0
            && utls_seqpred_candidates(pred, cands, 1, q) == 1 && cands[0] != 0)
            guess = cands[0] - 1;
        if ((k->valid || utls_ern_keys_setup(s, k, next_key))
            && utls_ern_ooo_find(c, k, wire, q->wire_len, hit->offset, guess, floor,
                                 !next_key, &seq)) {
            if (seq < floor) { /* written after higher numbers: in order */
                c->ern.ooo_verdict = UTLS_ERN_OOO_SETTLED;
                return 0;
            }
            r = utls_verify_candidate(s, c, next_key, hit, wire, q, arrival_ns, seq, 1, allowance);
            c->ern.ooo_verdict = r < 0 ? UTLS_ERN_OOO_MATCHED : UTLS_ERN_OOO_SETTLED;
            return r > 0;
        }
    }
    if (!next_key && pred != NULL && !c->ern.rx) {
        utls_seqpred_record partial;

        if (utls_inorder_partial_anchor(s, c, &partial))
            (void)utls_seqpred_add_anchor(pred, &partial); /* refused if inconsistent */
    }
    if (pred != NULL && utls_seqpred_num_anchors(pred) > 0) {
        /* The first record past a hole: when the predictor knows its most
         * likely number without ranking the rest (all sizes seen so far
         * equal, the gap a multiple of it), that one is tried first, and the
         * ranking is made only if it fails. */
        if (c->probe.search == NULL && limit > 0 && utls_seqpred_first_candidate(pred, q, &tried)
            && tried != 0) {
            int r = utls_verify_candidate(s, c, next_key, hit, wire, q, arrival_ns, tried - 1, 0,
                                          allowance);

            if (r != 0)
                return r > 0;
        } else {
            tried = 0;
        }
        n = utls_seqpred_candidates(pred, cands, limit, q);
    } else if (next_key) {
        /* Nothing verified under the next key yet: the KeyUpdate lies
         * somewhere before this record, most likely close before it. */
        for (n = 0; n < limit; n++)
            cands[n] = PRED_SEQ(n);
    } else {
        return 0;
    }
    /* With the provider: one search over all candidates picks the one that
     * authenticates (or none); only that one gets the full record check. */
    if (c->probe.search != NULL && !next_key && n > 0 && c->rx.probe_budget >= 1 && *allowance > 0
        && (c->probe.search_out != NULL
            || (c->probe.search_out = OPENSSL_malloc(UTLS_SCRATCH_LEN)) != NULL)) {
        uint64_t seqs[UTLS_SEQPRED_MAX_CANDIDATES];
        size_t m = 0, len, idx;

        for (i = 0; i < n; i++)
            if (cands[i] != 0)
                seqs[m++] = cands[i] - 1;
        c->rx.probe_budget -= 1;
        (*allowance)--;
        c->stats.probes++;
        c->stats.provider_searches++;
        switch (utls_aead_search_run(c->probe.search, c->probe.search_out, &len, UTLS_SCRATCH_LEN,
                                     &idx, wire, q->wire_len, seqs, m)) {
        case UTLS_AEAD_SEARCH_FOUND:
            return utls_verify_candidate(s, c, 0, hit, wire, q, arrival_ns, seqs[idx], 0,
                                         allowance) > 0;
        case UTLS_AEAD_SEARCH_NOT_FOUND:
            c->stats.soft_failures++;
            return 0;
        case UTLS_AEAD_SEARCH_ERROR:
        default:
            break; /* one at a time below */
        }
    }
    for (i = 0; i < n; i++) {
        int r;

        if (cands[i] == 0 || cands[i] == tried)
            continue; /* the virtual origin record, or tried above */
        if (*allowance == 0)
            break;
        r = utls_verify_candidate(s, c, next_key, hit, wire, q, arrival_ns, cands[i] - 1, 0,
                                  allowance);
        if (r != 0)
            return r > 0;
    }
    if (n == limit)
        c->stats.probe_limit_hits++;
    return 0;
}

/*
 * utls_try_record tries to authenticate the record at the plausible header
 * |hit| inside |run|: under the current key, then (TLS 1.3) under the next,
 * with at most |*allowance| full checks (decremented). Returns 1 if it
 * verified.
 */
int utls_try_record(SSL *s, utls_conn *c, const utls_scan_hit *hit,
                    const utls_reasm_run *run, uint64_t arrival_ns, size_t *allowance)
{
    utls_seqpred_query q;
    const unsigned char *wire = run->data + (hit->offset - run->offset);

    if (hit->offset < c->inorder.next_offset)
        return 0;
    memset(&q, 0, sizeof(q));
    q.offset = hit->offset;
    q.wire_len = SSL3_RT_HEADER_LENGTH + hit->len;
    if (c->rx.explicit_nonce && hit->len >= 8) {
        q.has_nonce = 1;
        q.explicit_nonce = be64(wire + SSL3_RT_HEADER_LENGTH);
    }
    /* Past a record that verified under the next key, the current key can
     * no longer be in use: the peer's KeyUpdate lies before it. */
    /* TLS 1.3: half of the allowance is for the next key, in case a
     * KeyUpdate hides in the hole; past a record that verified under it, all
     * of it is (the current key can no longer be in use). */
    {
        int may_be_next = c->rx.tls13 && c->rx.post_handshake;
        int only_next = may_be_next && c->rx.next.seen && hit->offset > c->rx.next.seen_offset;
        size_t next_share = only_next ? *allowance : (may_be_next ? *allowance / 2 : 0);
        size_t cur = *allowance - next_share;
        int ok;

        c->ern.ooo_verdict = UTLS_ERN_OOO_NONE;
        if (!only_next) {
            ok = utls_try_key(s, c, 0, hit, wire, &q, arrival_ns, &cur);
            *allowance = cur + next_share;
            if (ok)
                return 1;
            /* ERN: its number matched under the current key, so no other
             * generation; settled means nothing to retry (lib/glue/ern_hooks.c). */
            if (c->ern.ooo_verdict == UTLS_ERN_OOO_SETTLED)
                *allowance = 0;
            if (c->ern.ooo_verdict != UTLS_ERN_OOO_NONE)
                return 0;
        }
        if (next_share == 0 || !(c->rx.next.valid || utls_next_key_setup(s, c)))
            return 0;
        ok = utls_try_key(s, c, 1, hit, wire, &q, arrival_ns, allowance);
        if (!ok && c->ern.ooo_verdict == UTLS_ERN_OOO_SETTLED)
            *allowance = 0;
        return ok;
    }
}

/* failed_add remembers a header whose candidates all failed after |spent|
 * probes; one that has spent its whole allowance is not worth keeping. */
void utls_failed_add(utls_conn *c, const utls_scan_hit *hit, size_t spent)
{
    if (spent >= c->limits.max_probes_per_record)
        return;
    if (c->ern.ooo_verdict == UTLS_ERN_OOO_SETTLED)
        return; /* ERN: its own number settled it (utls_try_record) */
    if (c->rx.failed.num == UTLS_MAX_FAILED_HITS) {
        memmove(&c->rx.failed.hit[0], &c->rx.failed.hit[1],
                (c->rx.failed.num - 1) * sizeof(c->rx.failed.hit[0]));
        memmove(&c->rx.failed.spent[0], &c->rx.failed.spent[1],
                (c->rx.failed.num - 1) * sizeof(c->rx.failed.spent[0]));
        c->rx.failed.num--;
    }
    c->rx.failed.spent[c->rx.failed.num] = spent;
    c->rx.failed.hit[c->rx.failed.num++] = *hit;
}

/*
 * failed_retry tries again the remembered headers that lie in held data past
 * the in-order point, now that a new record verified. Returns 1 if any
 * verified (which may in turn pin others: the caller loops).
 */
int utls_failed_retry(SSL *s, utls_conn *c, uint64_t arrival_ns)
{
    size_t i = 0;
    int progress = 0;

    utls_chain_sync(c);

    while (i < c->rx.failed.num) {
        utls_scan_hit hit = c->rx.failed.hit[i];
        utls_reasm_run run;
        size_t allowance = c->limits.max_probes_per_record - c->rx.failed.spent[i];
        size_t before = allowance;
        int drop = 0;

        if (hit.offset < c->inorder.next_offset
            || !utls_reasm_find_run(c->rx.store, &run, hit.offset)
            || run.offset + run.len < hit.offset + SSL3_RT_HEADER_LENGTH + hit.len) {
            drop = 1; /* passed in order, or no longer held */
        } else if (utls_try_record(s, c, &hit, &run, arrival_ns, &allowance)) {
            drop = 1;
            progress = 1;
        } else {
            c->rx.failed.spent[i] += before - allowance;
            drop = allowance == 0; /* its allowance is used up */
        }
        if (drop) {
            memmove(&c->rx.failed.hit[i], &c->rx.failed.hit[i + 1],
                    (c->rx.failed.num - i - 1) * sizeof(hit));
            memmove(&c->rx.failed.spent[i], &c->rx.failed.spent[i + 1],
                    (c->rx.failed.num - i - 1) * sizeof(c->rx.failed.spent[0]));
            c->rx.failed.num--;
        } else {
            i++;
        }
    }
    return progress;
}
