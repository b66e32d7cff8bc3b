/* test_storm.c: the whole out-of-order pipeline (reasm -> scan -> seqpred ->
 * verify) under an injection storm, as the tap would see it: forged
 * segments at random and absurd offsets, 1-byte fragments, segments packed
 * with plausible headers, and forged bytes racing ahead of genuine ones.
 * Every limit (bytes, fragments, pending headers, intervals, candidates)
 * must hold after every event, no forged or wrong record may be accepted,
 * and every record is delivered exactly once (in order or out of order):
 * nothing in the in-order stream is lost. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "streamgen.h"
#include "utls/reasm.h"
#include "utls/scan.h"
#include "utls/seqpred.h"

enum {
    STORM_MAX_BYTES = 256 * 1024,
    STORM_MAX_FRAGMENTS = 64,
    STORM_WINDOW = 1 << 20,
    STORM_MAX_PENDING = 32,
    STORM_MAX_INTERVALS = 64,
    STORM_CANDIDATES = 8,
};

typedef struct {
    const sg_stream *st;
    utls_reasm *ra;
    utls_scan *sc;
    utls_seqpred *sp;
    uint8_t *delivered; /* per record: 0, 1 in order, 2 out of order */
    uint8_t *tcp_have;  /* bytes the kernel's in-order stream has */
    uint64_t tcp_inorder;
    size_t next_inorder_rec;
    uint64_t ooo_delivered;
    uint64_t inorder_delivered;
    uint64_t probes;
    uint64_t soft_failures;
} storm;

static void check_limits(const storm *s)
{
    assert_true(utls_reasm_bytes_held(s->ra) <= STORM_MAX_BYTES);
    assert_true(utls_reasm_num_fragments(s->ra) <= STORM_MAX_FRAGMENTS);
    assert_true(utls_scan_num_pending(s->sc) <= STORM_MAX_PENDING);
    assert_true(utls_scan_num_intervals(s->sc) <= STORM_MAX_INTERVALS);
}

/* verify stands in for the AEAD check: right boundary, right sequence
 * number, and the bytes held are the genuine ones. */
static int verify(const storm *s, uint64_t off, size_t wire, uint64_t seq, const uint8_t *bytes)
{
    size_t idx = sg_record_at(s->st, off);
    return idx != (size_t)-1 && idx == seq && s->st->recs[idx].wire_len == wire &&
           memcmp(bytes, s->st->bytes + off, wire) == 0;
}

static void try_hits(storm *s, const utls_reasm_run *run)
{
    utls_scan_hit hits[4];
    utls_scan_result sr;
    do {
        size_t n = 0;
        sr = utls_scan_feed(s->sc, hits, 4, &n, run->offset, run->data, run->len);
        assert_int_not_equal(sr, UTLS_SCAN_ERROR);
        for (size_t h = 0; h < n; h++) {
            uint64_t off = hits[h].offset;
            size_t wire = (size_t)hits[h].len + 5;
            if (off + wire > run->offset + run->len) {
                continue; /* require_whole guarantees this; be safe */
            }
            utls_seqpred_query q;
            memset(&q, 0, sizeof(q));
            q.offset = off;
            q.wire_len = wire;
            uint64_t cand[UTLS_SEQPRED_MAX_CANDIDATES];
            size_t nc = utls_seqpred_candidates(s->sp, cand, UTLS_SEQPRED_MAX_CANDIDATES, &q);
            assert_true(nc <= STORM_CANDIDATES);
            const uint8_t *bytes = run->data + (off - run->offset);
            int ok = 0;
            for (size_t c = 0; c < nc && !ok; c++) {
                s->probes++;
                if (verify(s, off, wire, cand[c], bytes)) {
                    ok = 1;
                    size_t idx = (size_t)cand[c];
                    assert_int_equal(s->delivered[idx], 0);
                    s->delivered[idx] = 2;
                    s->ooo_delivered++;
                    utls_seqpred_record rec = {off, cand[c], wire, 0, 0};
                    assert_int_equal(utls_seqpred_add_anchor(s->sp, &rec), 1);
                    assert_int_equal(utls_scan_confirm(s->sc, off, wire), 1);
                }
            }
            if (!ok) {
                /* Soft failure: the record, if genuine, comes in order. */
                s->soft_failures++;
            }
        }
    } while (sr == UTLS_SCAN_MORE);
}

static void offer(storm *s, uint64_t off, const uint8_t *data, size_t len)
{
    utls_reasm_result res = utls_reasm_insert(s->ra, off, data, len);
    assert_true(res != UTLS_REASM_ERROR);
    check_limits(s);
    if (res == UTLS_REASM_STORED) {
        utls_reasm_run run;
        uint64_t inorder = utls_reasm_inorder(s->ra);
        if (utls_reasm_find_run(s->ra, &run, off > inorder ? off : inorder)) {
            try_hits(s, &run);
        }
    }
    check_limits(s);
}

/* The kernel's in-order stream: records complete in it are delivered in
 * order with the normal read sequence number, unless already delivered. */
static void tcp_deliver(storm *s)
{
    while (s->tcp_inorder < s->st->len && s->tcp_have[s->tcp_inorder]) {
        s->tcp_inorder++;
    }
    while (s->next_inorder_rec < s->st->num_recs) {
        const sg_record *rec = &s->st->recs[s->next_inorder_rec];
        if (rec->offset + rec->wire_len > s->tcp_inorder) {
            break;
        }
        if (s->delivered[s->next_inorder_rec] == 0) {
            s->delivered[s->next_inorder_rec] = 1;
            s->inorder_delivered++;
        }
        utls_seqpred_record a = {rec->offset, s->next_inorder_rec, rec->wire_len, 0, 0};
        assert_int_equal(utls_seqpred_add_anchor(s->sp, &a), 1);
        s->next_inorder_rec++;
        uint64_t point = rec->offset + rec->wire_len;
        assert_int_equal(utls_reasm_advance(s->ra, point), 1);
        assert_int_equal(utls_scan_advance(s->sc, point), 1);
        utls_seqpred_advance(s->sp, point);
    }
    check_limits(s);
}

static void inject(storm *s, sg_rng *r, uint8_t *junk)
{
    uint64_t base = utls_reasm_inorder(s->ra);
    switch (sg_next(r) % 6) {
    case 0: /* random garbage anywhere in (and past) the window */
        offer(s, base + sg_range(r, 0, 4 * STORM_WINDOW), junk, (size_t)sg_range(r, 1, 1448));
        break;
    case 1: /* a burst of 1-byte fragments with holes between */
        for (int i = 0; i < 40; i++) {
            offer(s, base + sg_range(r, 0, STORM_WINDOW), junk, 1);
        }
        break;
    case 2: /* packed plausible headers whose records never complete */
        offer(s, base + sg_range(r, 0, STORM_WINDOW), junk + 4096, 1440);
        break;
    case 3: /* forged bytes racing ahead of genuine ones, just past the hole */
        offer(s, base + sg_range(r, 0, 64 * 1024), junk + 8192, (size_t)sg_range(r, 100, 1448));
        break;
    case 4: /* absurd and wrapping offsets */
        offer(s, UINT64_MAX - sg_range(r, 0, 2000), junk, (size_t)sg_range(r, 1, 3000));
        break;
    default: /* a forged record with a plausible header, whole */
        offer(s, base + sg_range(r, 0, STORM_WINDOW), junk + 12288, 1000);
        break;
    }
}

static void storm_run(sg_model model, uint64_t seed)
{
    sg_stream st;
    assert_int_equal(sg_stream_make(&st, model, 1 << 20, seed, 0.0), 1);
    size_t nseg = 0;
    sg_segment *segs = sg_segments_make(&nseg, st.len, seed, 1448, 0.03, 0.02, 0.0, 8.0);
    assert_non_null(segs);

    storm s;
    memset(&s, 0, sizeof(s));
    s.st = &st;
    utls_reasm_limits lim = {STORM_MAX_BYTES, STORM_MAX_FRAGMENTS, STORM_WINDOW};
    s.ra = utls_reasm_new(&lim, 0);
    utls_scan_profile pr;
    utls_scan_profile_tls13_app(&pr);
    pr.max_pending = STORM_MAX_PENDING;
    pr.max_intervals = STORM_MAX_INTERVALS;
    s.sc = utls_scan_new(&pr, 0);
    utls_seqpred_config cfg;
    utls_seqpred_config_default(&cfg);
    cfg.max_candidates = STORM_CANDIDATES;
    s.sp = utls_seqpred_new(&cfg);
    s.delivered = calloc(st.num_recs, 1);
    s.tcp_have = calloc(st.len, 1);
    assert_non_null(s.ra);
    assert_non_null(s.sc);
    assert_non_null(s.sp);

    static uint8_t junk[16384];
    sg_rng r = {seed + 99};
    for (size_t i = 0; i < sizeof(junk); i++) {
        junk[i] = (uint8_t)sg_next(&r);
    }
    for (size_t i = 4096; i + 5 <= 4096 + 1440; i += 5) {
        sg_put_header(junk + i, 16000);
    }
    sg_put_header(junk + 8192, 200);
    sg_put_header(junk + 12288, 995);

    /* Lost segments are retransmitted by TCP later: the kernel's in-order
     * stream gets them after a delay; the tap sees the retransmission too. */
    uint8_t *seen = calloc(st.len, 1);
    for (size_t i = 0; i < nseg; i++) {
        const sg_segment *sg = &segs[i];
        for (int k = 0; k < 3; k++) {
            inject(&s, &r, junk);
        }
        offer(&s, sg->offset, st.bytes + sg->offset, sg->len);
        memset(s.tcp_have + sg->offset, 1, sg->len);
        memset(seen + sg->offset, 1, sg->len);
        if (i % 16 == 15) {
            /* An RTT later: retransmit whatever is still missing below. */
            uint64_t upto = sg->offset;
            for (uint64_t b = s.tcp_inorder; b < upto; b++) {
                if (!s.tcp_have[b]) {
                    uint64_t e = b;
                    while (e < upto && !s.tcp_have[e]) {
                        e++;
                    }
                    offer(&s, b, st.bytes + b, (size_t)(e - b));
                    memset(s.tcp_have + b, 1, (size_t)(e - b));
                    b = e;
                }
            }
            tcp_deliver(&s);
        }
    }
    /* The end of the connection: everything arrives in order. */
    memset(s.tcp_have, 1, st.len);
    tcp_deliver(&s);

    for (size_t k = 0; k < st.num_recs; k++) {
        if (s.delivered[k] == 0) {
            fail_msg("record %zu never delivered", k);
        }
    }
    utls_reasm_stats rs;
    utls_reasm_get_stats(s.ra, &rs);
    utls_scan_stats ss;
    utls_scan_get_stats(s.sc, &ss);
    print_message("storm %s: %zu records, %llu out of order, %llu in order, %llu probes, "
                  "%llu soft failures; reasm evicted %llu B, window-dropped %llu B, "
                  "conflicting %llu B, invalid %llu; scan pending dropped %llu, "
                  "intervals dropped %llu\n",
                  sg_model_names[model], st.num_recs, (unsigned long long)s.ooo_delivered,
                  (unsigned long long)s.inorder_delivered, (unsigned long long)s.probes,
                  (unsigned long long)s.soft_failures, (unsigned long long)rs.bytes_evicted,
                  (unsigned long long)rs.bytes_dropped_window,
                  (unsigned long long)rs.bytes_conflicting,
                  (unsigned long long)rs.num_invalid_inserts,
                  (unsigned long long)ss.pending_dropped,
                  (unsigned long long)ss.intervals_dropped);
    assert_int_equal(s.ooo_delivered + s.inorder_delivered, st.num_recs);
    /* The storm really hit the limits, and the pipeline still worked. */
    assert_true(rs.bytes_evicted > 0);
    assert_true(rs.bytes_dropped_window > 0);
    assert_true(rs.num_invalid_inserts > 0);
    assert_true(ss.pending_dropped > 0);
    assert_true(s.ooo_delivered > 0);
    free(seen);
    free(s.delivered);
    free(s.tcp_have);
    free(segs);
    utls_seqpred_free(s.sp);
    utls_scan_free(s.sc);
    utls_reasm_free(s.ra);
    sg_stream_free(&st);
}

static void test_storm_cbr(void **state)
{
    (void)state;
    storm_run(SG_CBR, 11);
}

static void test_storm_vbr(void **state)
{
    (void)state;
    storm_run(SG_VBR, 12);
}

static void test_storm_mixed(void **state)
{
    (void)state;
    storm_run(SG_MIXED, 13);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_storm_cbr),
        cmocka_unit_test(test_storm_vbr),
        cmocka_unit_test(test_storm_mixed),
    };
    return cmocka_run_group_tests_name("storm", tests, NULL, NULL);
}
