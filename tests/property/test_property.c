/* test_property.c: property test of reasm + scan over random TLS-like
 * streams (constant 1448 B, video-like VBR, mixed 100 B..16 KiB records) cut
 * into random segments with loss, re-segmented resends, duplication and
 * reordering, all from seeded generators. For every run:
 *   - no chained (confirmed-boundary) hit is wrong,
 *   - every record whose bytes are all present is found,
 *   - no position is reported twice,
 *   - the store holds exactly the received bytes past the in-order point.
 * The verifier is an oracle standing in for the AEAD check. */
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

typedef struct {
    uint64_t runs;
    uint64_t found;
    uint64_t chained;
    uint64_t false_hits;
    uint64_t complete_records;
} prop_totals;

static void run_one(sg_model model, uint64_t seed, double loss, int advance, prop_totals *tot)
{
    sg_stream st;
    assert_int_equal(sg_stream_make(&st, model, 192 * 1024, seed, 0.2), 1);
    size_t nseg = 0;
    sg_rng r = {seed * 31 + 7};
    double reorder = sg_uniform(&r) * 30.0;
    size_t max_seg = sg_uniform(&r) < 0.3 ? (size_t)sg_range(&r, 1, 200) : 0;
    sg_segment *segs =
        sg_segments_make(&nseg, st.len, seed, max_seg, loss, 0.05, 0.5, reorder);
    assert_non_null(segs);

    utls_reasm_limits lim;
    utls_reasm_limits_default(&lim);
    lim.max_fragments = 1 << 20;
    utls_reasm *ra = utls_reasm_new(&lim, 0);
    utls_scan_profile pr;
    utls_scan_profile_tls13_app(&pr);
    pr.max_pending = 1 << 20;
    pr.max_intervals = 1 << 20;
    utls_scan *sc = utls_scan_new(&pr, 0);
    assert_non_null(ra);
    assert_non_null(sc);

    uint8_t *received = calloc(st.len, 1);
    uint8_t *reported = calloc(st.len, 1);
    uint8_t *found = calloc(st.num_recs, 1);
    assert_non_null(received);
    assert_non_null(reported);
    assert_non_null(found);
    uint64_t inorder = 0;
    utls_scan_hit hits[3]; /* small on purpose: exercises UTLS_SCAN_MORE */

    for (size_t i = 0; i < nseg; i++) {
        const sg_segment *sg = &segs[i];
        memset(received + sg->offset, 1, sg->len);
        utls_reasm_result res = utls_reasm_insert(ra, sg->offset, st.bytes + sg->offset, sg->len);
        assert_true(res == UTLS_REASM_STORED || res == UTLS_REASM_NO_NEW_DATA);
        if (advance) {
            /* Bytes contiguous with the in-order point go the in-order way. */
            utls_reasm_run run;
            if (utls_reasm_first_run(ra, &run) && run.offset == inorder) {
                inorder = run.offset + run.len;
                assert_int_equal(utls_reasm_advance(ra, inorder), 1);
                assert_int_equal(utls_scan_advance(sc, inorder), 1);
            }
        }
        if (res != UTLS_REASM_STORED) {
            continue;
        }
        utls_reasm_run run;
        uint64_t at = sg->offset > inorder ? sg->offset : inorder;
        if (!utls_reasm_find_run(ra, &run, at)) {
            continue;
        }
        utls_scan_result sr;
        do {
            size_t n = 0;
            sr = utls_scan_feed(sc, hits, 3, &n, run.offset, run.data, run.len);
            assert_int_not_equal(sr, UTLS_SCAN_ERROR);
            for (size_t h = 0; h < n; h++) {
                uint64_t off = hits[h].offset;
                assert_true(off >= inorder && off < st.len);
                assert_int_equal(reported[off], 0); /* nothing reported twice */
                reported[off] = 1;
                size_t idx = sg_record_at(&st, off);
                int genuine = idx != (size_t)-1 &&
                              (size_t)hits[h].len + 5 == st.recs[idx].wire_len;
                if (hits[h].chained) {
                    /* A confirmed boundary is never wrong. */
                    assert_true(genuine);
                    tot->chained++;
                }
                if (!genuine) {
                    tot->false_hits++;
                    continue;
                }
                /* The whole record is present in the run handed to us. */
                assert_true(off + st.recs[idx].wire_len <= run.offset + run.len);
                assert_int_equal(found[idx], 0);
                found[idx] = 1;
                tot->found++;
                assert_int_equal(utls_scan_confirm(sc, off, st.recs[idx].wire_len), 1);
            }
        } while (sr == UTLS_SCAN_MORE);
    }

    /* Every record past the in-order point whose bytes all arrived was found. */
    for (size_t k = 0; k < st.num_recs; k++) {
        const sg_record *rec = &st.recs[k];
        if (rec->offset < inorder) {
            continue;
        }
        int complete = 1;
        for (uint64_t b = rec->offset; b < rec->offset + rec->wire_len && complete; b++) {
            complete = received[b];
        }
        if (complete) {
            tot->complete_records++;
            if (!found[k]) {
                fail_msg("model %s seed %llu loss %.2f advance %d: record %zu at %llu "
                         "(len %u) complete but not found",
                         sg_model_names[model], (unsigned long long)seed, loss, advance, k,
                         (unsigned long long)rec->offset, rec->wire_len);
            }
        }
    }
    /* The store holds exactly the received bytes past the in-order point. */
    size_t expect_held = 0;
    for (uint64_t b = inorder; b < st.len; b++) {
        expect_held += received[b];
    }
    assert_int_equal(utls_reasm_bytes_held(ra), expect_held);
    utls_reasm_run run;
    for (int ok = utls_reasm_first_run(ra, &run); ok; ok = utls_reasm_next_run(ra, &run, run.offset)) {
        assert_memory_equal(run.data, st.bytes + run.offset, run.len);
        assert_true(run.offset == 0 || !received[run.offset - 1] || run.offset == inorder);
        assert_true(run.offset + run.len == st.len || !received[run.offset + run.len]);
    }
    tot->runs++;
    free(received);
    free(reported);
    free(found);
    free(segs);
    utls_scan_free(sc);
    utls_reasm_free(ra);
    sg_stream_free(&st);
}

static void run_model(sg_model model)
{
    static const double losses[] = {0.01, 0.05, 0.2};
    prop_totals tot;
    memset(&tot, 0, sizeof(tot));
    const char *env = getenv("UTLS_PROPERTY_SEEDS");
    uint64_t seeds = env != NULL ? strtoull(env, NULL, 10) : 40;
    for (uint64_t seed = 1; seed <= seeds; seed++) {
        for (size_t l = 0; l < 3; l++) {
            run_one(model, seed * 1000 + l, losses[l], (int)(seed & 1), &tot);
        }
    }
    print_message("%s: %llu runs, %llu complete records past the in-order point, %llu found "
                  "(%llu chained), %llu false headers reported\n",
                  sg_model_names[model], (unsigned long long)tot.runs,
                  (unsigned long long)tot.complete_records, (unsigned long long)tot.found,
                  (unsigned long long)tot.chained, (unsigned long long)tot.false_hits);
    /* The streams carry planted false headers and lose data: make sure the
     * test exercised both. */
    assert_true(tot.false_hits > 0);
    assert_true(tot.chained > 0);
    assert_true(tot.found >= tot.complete_records);
}

static void test_property_cbr(void **state)
{
    (void)state;
    run_model(SG_CBR);
}

static void test_property_vbr(void **state)
{
    (void)state;
    run_model(SG_VBR);
}

static void test_property_mixed(void **state)
{
    (void)state;
    run_model(SG_MIXED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_property_cbr),
        cmocka_unit_test(test_property_vbr),
        cmocka_unit_test(test_property_mixed),
    };
    return cmocka_run_group_tests_name("property", tests, NULL, NULL);
}
