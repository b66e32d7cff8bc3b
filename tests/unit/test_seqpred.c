/* test_seqpred.c: unit tests for the sequence-number predictor
 * (core/include/utls/seqpred.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "utls/seqpred.h"

static utls_seqpred_record rec(uint64_t offset, uint64_t seq, size_t wire_len)
{
    utls_seqpred_record r;
    memset(&r, 0, sizeof(r));
    r.offset = offset;
    r.seq = seq;
    r.wire_len = wire_len;
    return r;
}

static utls_seqpred_query query(uint64_t offset, size_t wire_len)
{
    utls_seqpred_query q;
    memset(&q, 0, sizeof(q));
    q.offset = offset;
    q.wire_len = wire_len;
    return q;
}

/* add_anchor returns what utls_seqpred_add_anchor returns for the record
 * of |wire_len| bytes at |offset| with number |seq|. */
static int add_anchor(utls_seqpred *sp, uint64_t offset, uint64_t seq, size_t wire_len)
{
    utls_seqpred_record r = rec(offset, seq, wire_len);

    return utls_seqpred_add_anchor(sp, &r);
}

/* candidates_at returns how many candidates (at most |max|, into |out|) |sp|
 * has for a record of |wire_len| bytes at |offset|. */
static size_t candidates_at(utls_seqpred *sp, uint64_t *out, size_t max, uint64_t offset,
                            size_t wire_len)
{
    utls_seqpred_query q = query(offset, wire_len);

    return utls_seqpred_candidates(sp, out, max, &q);
}

/* only_candidate checks that |sp| has exactly one candidate for a record of
 * |wire_len| bytes at |offset| and returns it. */
static uint64_t only_candidate(utls_seqpred *sp, uint64_t offset, size_t wire_len)
{
    uint64_t out[UTLS_SEQPRED_MAX_CANDIDATES];

    assert_int_equal(candidates_at(sp, out, UTLS_SEQPRED_MAX_CANDIDATES, offset, wire_len), 1);
    return out[0];
}

static utls_seqpred *new_with_anchor(uint64_t offset, uint64_t seq, size_t wire_len)
{
    utls_seqpred *sp = utls_seqpred_new(NULL);
    assert_non_null(sp);
    assert_int_equal(add_anchor(sp, offset, seq, wire_len), 1);
    return sp;
}

/* new_bounded returns a predictor for records of |min_len| to |max_len|
 * bytes that lists up to UTLS_SEQPRED_MAX_CANDIDATES candidates. */
static utls_seqpred *new_bounded(size_t min_len, size_t max_len)
{
    utls_seqpred_config cfg;
    utls_seqpred *sp;

    utls_seqpred_config_default(&cfg);
    cfg.min_wire_len = min_len;
    cfg.max_wire_len = max_len;
    cfg.max_candidates = UTLS_SEQPRED_MAX_CANDIDATES;
    sp = utls_seqpred_new(&cfg);
    assert_non_null(sp);
    return sp;
}

/* add_anchors gives |sp| the anchors of records 0..|num|-1, all 1448 bytes
 * long and back to back from offset 0. */
static void add_anchors(utls_seqpred *sp, uint64_t num)
{
    for (uint64_t i = 0; i < num; i++) {
        assert_int_equal(add_anchor(sp, i * 1448, i, 1448), 1);
    }
}

/* expect_exact checks that for every record |from|..|to|-1 of that 1448-byte
 * stream, |sp| predicts its number exactly (first candidate) and ranks it
 * first. */
static void expect_exact(utls_seqpred *sp, uint64_t from, uint64_t to)
{
    uint64_t cands[UTLS_SEQPRED_MAX_CANDIDATES];
    uint64_t first = 0;

    for (uint64_t seq = from; seq < to; seq++) {
        utls_seqpred_query q = query(seq * 1448, 1448);
        assert_int_equal(utls_seqpred_first_candidate(sp, &q, &first), 1);
        assert_int_equal(first, seq);
        assert_true(utls_seqpred_candidates(sp, cands, 16, &q) > 0);
        assert_int_equal(cands[0], first);
    }
}

static int contains(const uint64_t *v, size_t n, uint64_t x)
{
    for (size_t i = 0; i < n; i++) {
        if (v[i] == x) {
            return 1;
        }
    }
    return 0;
}

/* Constant-size stream: the first candidate is exact. */
static void test_seqpred_constant_sizes_first_exact(void **state)
{
    (void)state;
    utls_seqpred *sp = utls_seqpred_new(NULL);
    add_anchors(sp, 10);
    uint64_t out[UTLS_SEQPRED_MAX_CANDIDATES];
    for (uint64_t lost = 0; lost < 50; lost++) {
        size_t n = candidates_at(sp, out, UTLS_SEQPRED_MAX_CANDIDATES, (10 + lost) * 1448, 1448);
        assert_true(n >= 1);
        assert_int_equal(out[0], 10 + lost);
    }
    utls_seqpred_free(sp);
}

/* Declared constant size: exactly one candidate, none off the grid. */
static void test_seqpred_declared_constant_one(void **state)
{
    (void)state;
    utls_seqpred_config cfg;
    utls_seqpred_config_default(&cfg);
    cfg.constant_wire_len = 1000;
    utls_seqpred *sp = utls_seqpred_new(&cfg);
    assert_int_equal(add_anchor(sp, 5000, 7, 1000), 1);
    uint64_t out[8];
    assert_int_equal(only_candidate(sp, 9000, 1000), 11); /* 3 records in [6000, 9000) */
    assert_int_equal(candidates_at(sp, out, 8, 9500, 1000), 0);
    /* Only an anchor above: count backwards. */
    utls_seqpred_free(sp);
    sp = utls_seqpred_new(&cfg);
    assert_int_equal(add_anchor(sp, 100000, 500, 1000), 1);
    assert_int_equal(only_candidate(sp, 95000, 1000), 495);
    utls_seqpred_free(sp);
}

/* Every candidate lies inside what the min/max record sizes allow. */
static void test_seqpred_bounds_from_sizes(void **state)
{
    (void)state;
    utls_seqpred *sp = new_bounded(100, 1000);
    assert_int_equal(add_anchor(sp, 0, 0, 500), 1);
    /* gap 1500 bytes: between 2 (ceil 1500/1000) and 15 records. */
    utls_seqpred_query q = query(2000, 500);
    uint64_t out[UTLS_SEQPRED_MAX_CANDIDATES];
    size_t n = utls_seqpred_candidates(sp, out, UTLS_SEQPRED_MAX_CANDIDATES, &q);
    assert_int_equal(n, 14);
    for (size_t i = 0; i < n; i++) {
        assert_true(out[i] >= 3 && out[i] <= 16);
    }
    assert_int_equal(out[0], 4); /* 1500 / 500 = 3 records in the gap */
    /* Gap 0: exactly the next record. */
    assert_int_equal(only_candidate(sp, 500, 500), 1);
    /* Gap smaller than the smallest record: impossible. */
    assert_int_equal(candidates_at(sp, out, 8, 550, 500), 0);
    /* Inside the anchor record: impossible. */
    assert_int_equal(candidates_at(sp, out, 8, 100, 500), 0);
    /* Query length outside the bounds. */
    assert_int_equal(candidates_at(sp, out, 8, 5000, 50), 0);
    utls_seqpred_free(sp);
}

/* Anchors on both sides narrow the range to their intersection. */
static void test_seqpred_both_directions(void **state)
{
    (void)state;
    utls_seqpred *sp = new_bounded(100, 1000);
    utls_seqpred_record a = rec(0, 10, 500);
    utls_seqpred_record b = rec(2000, 14, 500);
    assert_int_equal(utls_seqpred_add_anchor(sp, &a), 1);
    assert_int_equal(utls_seqpred_add_anchor(sp, &b), 1);
    /* Records 11..13 fill [500, 2000). A header at 1000 (len 500): from
     * below 500 bytes hold 1..5 records (seq 12..16), from above also 1..5
     * (seq 8..12): only 12 is consistent with both. */
    assert_int_equal(only_candidate(sp, 1000, 500), 12);
    uint64_t out[UTLS_SEQPRED_MAX_CANDIDATES];
    /* A record that would overlap the anchor above. */
    assert_int_equal(candidates_at(sp, out, 8, 1800, 500), 0);
    /* Header just before the anchor above: seq 13. */
    size_t n = candidates_at(sp, out, 8, 1500, 500);
    assert_true(n >= 1);
    assert_int_equal(out[0], 13);
    assert_false(contains(out, n, 14));
    assert_false(contains(out, n, 10));
    /* Exactly an anchor's offset: its sequence number. */
    assert_int_equal(only_candidate(sp, 2000, 500), 14);
    utls_seqpred_free(sp);
}

/* TLS 1.2 GCM: one verified record pins (nonce - seq); two make it exact. */
static void test_seqpred_nonce_delta(void **state)
{
    (void)state;
    utls_seqpred_config cfg;
    utls_seqpred_config_default(&cfg);
    cfg.nonce_delta = 1;
    cfg.min_wire_len = 29;
    utls_seqpred *sp = utls_seqpred_new(&cfg);
    const uint64_t delta = 0xfedcba9876543210ULL; /* random start, wraps */
    utls_seqpred_record r = rec(0, 0, 300);
    r.has_nonce = 1;
    r.explicit_nonce = 0 + delta;
    assert_int_equal(utls_seqpred_add_anchor(sp, &r), 1);
    uint64_t out[16];
    utls_seqpred_query q = query(100000, 777);
    q.has_nonce = 1;
    q.explicit_nonce = 345 + delta;
    size_t n = utls_seqpred_candidates(sp, out, 16, &q);
    assert_true(n > 1);
    assert_int_equal(out[0], 345);
    r = rec(300, 1, 300);
    r.has_nonce = 1;
    r.explicit_nonce = 1 + delta;
    assert_int_equal(utls_seqpred_add_anchor(sp, &r), 1);
    n = utls_seqpred_candidates(sp, out, 16, &q);
    assert_int_equal(n, 1);
    assert_int_equal(out[0], 345);
    /* A sender whose nonces are not seq + constant breaks the mode for good. */
    r = rec(600, 2, 300);
    r.has_nonce = 1;
    r.explicit_nonce = 0x1234;
    assert_int_equal(utls_seqpred_add_anchor(sp, &r), 1);
    n = utls_seqpred_candidates(sp, out, 16, &q);
    assert_false(n == 1 && out[0] == 345);
    utls_seqpred_stats st;
    utls_seqpred_get_stats(sp, &st);
    assert_int_equal(st.nonce_mismatches, 1);
    utls_seqpred_free(sp);
}

static void test_seqpred_explicit_record_number(void **state)
{
    (void)state;
    utls_seqpred *sp = new_with_anchor(0, 0, 100);
    utls_seqpred_query q = query(1 << 20, 100);
    q.has_record_number = 1;
    q.record_number = 123456;
    uint64_t out[4];
    assert_int_equal(utls_seqpred_candidates(sp, out, 4, &q), 1);
    assert_int_equal(out[0], 123456);
    utls_seqpred_free(sp);
}

/* Contradictory anchors are refused and change nothing. */
static void test_seqpred_rejects_bad_anchors(void **state)
{
    (void)state;
    utls_seqpred *sp = new_with_anchor(1000, 10, 100);
    utls_seqpred_record r = rec(1000, 11, 100);
    assert_int_equal(utls_seqpred_add_anchor(sp, &r), 0); /* same offset, other seq */
    assert_int_equal(add_anchor(sp, 1000, 10, 100), 1); /* idempotent */
    assert_int_equal(add_anchor(sp, 2000, 9, 100), 0); /* seq goes backwards */
    assert_int_equal(add_anchor(sp, 1050, 11, 100), 0); /* overlaps */
    assert_int_equal(add_anchor(sp, 500, 10, 100), 0);
    assert_int_equal(add_anchor(sp, 5000, 20, 10), 0); /* below min size */
    assert_int_equal(add_anchor(sp, UINT64_MAX - 50, 20, 100), 0); /* wraps */
    assert_int_equal(utls_seqpred_num_anchors(sp), 1);
    utls_seqpred_free(sp);
    utls_seqpred_free(NULL);
    utls_seqpred_config cfg;
    utls_seqpred_config_default(&cfg);
    cfg.min_wire_len = 0;
    assert_null(utls_seqpred_new(&cfg));
    cfg.min_wire_len = 2000;
    cfg.max_wire_len = 1000;
    assert_null(utls_seqpred_new(&cfg));
}

static void test_seqpred_no_anchor_no_candidates(void **state)
{
    (void)state;
    utls_seqpred *sp = utls_seqpred_new(NULL);
    uint64_t out[4];
    assert_int_equal(candidates_at(sp, out, 4, 1000, 100), 0);
    utls_seqpred_free(sp);
}

/* Storm: huge gaps, many queries; the candidate cap always holds, the list
 * is distinct, and anchors stay bounded. */
static void test_seqpred_storm_candidate_cap(void **state)
{
    (void)state;
    utls_seqpred_config cfg;
    utls_seqpred_config_default(&cfg);
    cfg.max_candidates = 1000; /* clamped to the hard cap */
    utls_seqpred *sp = utls_seqpred_new(&cfg);
    uint64_t off = 0;
    for (uint64_t i = 0; i < 500; i++) {
        utls_seqpred_record r = rec(off, i, 22 + (size_t)(i * 7919 % 16000));
        assert_int_equal(utls_seqpred_add_anchor(sp, &r), 1);
        off += r.wire_len;
        assert_true(utls_seqpred_num_anchors(sp) <= UTLS_SEQPRED_MAX_ANCHORS);
    }
    uint64_t out[UTLS_SEQPRED_MAX_CANDIDATES * 4];
    uint64_t seed = 7;
    for (int i = 0; i < 2000; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        utls_seqpred_query q = query(off + (seed >> 40), 22 + (size_t)((seed >> 8) % 16000));
        size_t n = utls_seqpred_candidates(sp, out, sizeof(out) / sizeof(out[0]), &q);
        assert_true(n <= UTLS_SEQPRED_MAX_CANDIDATES);
        for (size_t a = 0; a < n; a++) {
            assert_true(out[a] >= 500);
            for (size_t b = a + 1; b < n; b++) {
                assert_true(out[a] != out[b]);
            }
        }
    }
    /* The per-instance default cap holds too. */
    utls_seqpred *d = new_with_anchor(0, 0, 1000);
    utls_seqpred_query q = query(10 << 20, 1000);
    assert_int_equal(utls_seqpred_candidates(d, out, 64, &q), UTLS_SEQPRED_DEFAULT_CANDIDATES);
    assert_int_equal(utls_seqpred_candidates(d, out, 3, &q), 3);
    utls_seqpred_free(d);
    utls_seqpred_free(sp);
}

/* advance keeps the highest anchor below the in-order point. */
static void test_seqpred_advance(void **state)
{
    (void)state;
    utls_seqpred *sp = utls_seqpred_new(NULL);
    for (uint64_t i = 0; i < 10; i++) {
        assert_int_equal(add_anchor(sp, i * 100, i, 100), 1);
    }
    utls_seqpred_advance(sp, 550);
    assert_int_equal(utls_seqpred_num_anchors(sp), 6); /* 4 (ends 500) .. 9 */
    assert_int_equal(only_candidate(sp, 500, 100), 5);
    utls_seqpred_free(sp);
}

/* An origin (first record under a new key) bounds what follows without
 * touching the size statistics. */
static void test_seqpred_origin_bounds_without_stats(void **state)
{
    (void)state;
    utls_seqpred *sp = utls_seqpred_new(NULL);
    assert_int_equal(utls_seqpred_add_origin(sp, 10000, 0), 0);
    assert_int_equal(utls_seqpred_add_origin(sp, 5, 1), 0);
    assert_int_equal(utls_seqpred_add_origin(sp, 10000, 1), 1);
    assert_true(utls_seqpred_mean_wire_len(sp) == 0.0);
    assert_int_equal(only_candidate(sp, 10000, 500), 1);
    utls_seqpred_free(sp);
}

/* utls_seqpred_first_candidate names, without ranking, the candidate that
 * utls_seqpred_candidates puts first, and only when it is known: sizes all
 * equal and the gap a multiple, an anchor at the offset, one feasible value;
 * not for varying sizes, a gap that is no multiple, or no anchor. */
static void test_seqpred_first_candidate_matches_ranking(void **state)
{
    (void)state;
    uint64_t cands[UTLS_SEQPRED_MAX_CANDIDATES];
    uint64_t first = 0;
    utls_seqpred *sp = utls_seqpred_new(NULL);
    utls_seqpred_query q = query(0, 1448);

    assert_int_equal(utls_seqpred_first_candidate(sp, &q, &first), 0); /* no anchor */
    add_anchors(sp, 4);
    expect_exact(sp, 4, 44);
    q = query(4 * 1448 + 100, 1448); /* not a multiple: ranked */
    assert_int_equal(utls_seqpred_first_candidate(sp, &q, &first), 0);
    q = query(2 * 1448, 1448); /* an anchor's own offset */
    assert_int_equal(utls_seqpred_first_candidate(sp, &q, &first), 1);
    assert_int_equal(first, 2);
    q = query(2 * 1448, 1000); /* ... with another length: none */
    assert_int_equal(utls_seqpred_first_candidate(sp, &q, &first), 0);
    q = query(1448 + 700, 1448); /* inside an anchor */
    assert_int_equal(utls_seqpred_first_candidate(sp, &q, &first), 0);
    /* A size that differs: every candidate is ranked. */
    assert_int_equal(add_anchor(sp, 100 * 1448, 100, 1000), 1);
    q = query(101 * 1448, 1448);
    assert_int_equal(utls_seqpred_first_candidate(sp, &q, &first), 0);
    /* Right after an anchor exactly one value is feasible. */
    q = query(100 * 1448 + 1000, 1448);
    assert_int_equal(utls_seqpred_first_candidate(sp, &q, &first), 1);
    assert_int_equal(first, 101);
    assert_int_equal(utls_seqpred_candidates(sp, cands, 16, &q), 1);
    assert_int_equal(cands[0], 101);
    utls_seqpred_free(sp);

    /* Sizes that differed at first and are one size since: the recent size
     * decides, as it does the ranking's first place. */
    sp = utls_seqpred_new(NULL);
    for (size_t n = 0; n < 3; n++) {
        utls_seqpred_observe(sp, 300 + 100 * n);
    }
    add_anchors(sp, 600);
    expect_exact(sp, 601, 680);
    q = query(700 * 1448 + 724, 1448); /* half a record off: ranked */
    assert_int_equal(utls_seqpred_first_candidate(sp, &q, &first), 0);
    utls_seqpred_free(sp);
}

/* A new key generation's predictor that inherits the sizes seen under the
 * old key ranks a gap by them; one that starts over ranks it by the few
 * records seen since, which here are all small. */
static void test_seqpred_inherit_sizes(void **state)
{
    (void)state;
    uint64_t out[UTLS_SEQPRED_MAX_CANDIDATES];
    utls_seqpred *old = utls_seqpred_new(NULL);
    utls_seqpred *fresh = utls_seqpred_new(NULL);
    utls_seqpred *heir = utls_seqpred_new(NULL);
    utls_seqpred *empty = utls_seqpred_new(NULL);
    size_t n;

    /* Under the old key: 200 and 1500 bytes in turn, 100 records. */
    for (size_t i = 0; i < 100; i++) {
        assert_int_equal(add_anchor(old, 1000 + i * 850 - (i % 2) * 650, 10 + i,
                                    i % 2 == 0 ? 200 : 1500),
                         1);
    }
    assert_true(utls_seqpred_mean_wire_len(old) > 700.0);

    /* Into a predictor that has seen nothing: a copy of the statistics,
     * never the anchors (their numbers are the old key's). */
    utls_seqpred_inherit_sizes(empty, old);
    assert_true(utls_seqpred_mean_wire_len(empty) == utls_seqpred_mean_wire_len(old));
    assert_int_equal(utls_seqpred_num_anchors(empty), 0);
    utls_seqpred_inherit_sizes(empty, NULL);
    assert_true(utls_seqpred_mean_wire_len(empty) == utls_seqpred_mean_wire_len(old));

    /* Under the new key: an origin, then three small records in order. */
    for (int k = 0; k < 2; k++) {
        utls_seqpred *sp = k == 0 ? fresh : heir;

        assert_int_equal(utls_seqpred_add_origin(sp, 100000, 1), 1);
        for (size_t i = 0; i < 3; i++) {
            assert_int_equal(add_anchor(sp, 100000 + i * 200, 1 + i, 200), 1);
        }
    }
    utls_seqpred_inherit_sizes(heir, old);
    /* The three new records came last and weigh more than one old one each,
     * but the old sizes still dominate. */
    assert_true(utls_seqpred_mean_wire_len(heir) < utls_seqpred_mean_wire_len(old));
    assert_true(utls_seqpred_mean_wire_len(heir) > 600.0);
    assert_int_equal(utls_seqpred_num_anchors(heir), utls_seqpred_num_anchors(fresh));

    /* Past a hole of ten records (200 and 1500 in turn, 8500 bytes) after
     * the last of them (seq 3): the record there is seq 14. */
    n = candidates_at(heir, out, 4, 100600 + 8500, 200);
    assert_true(n >= 3);
    assert_true(contains(out, 3, 14));
    n = candidates_at(fresh, out, 4, 100600 + 8500, 200);
    assert_true(n >= 3);
    assert_false(contains(out, 3, 14));

    utls_seqpred_free(old);
    utls_seqpred_free(fresh);
    utls_seqpred_free(heir);
    utls_seqpred_free(empty);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seqpred_constant_sizes_first_exact),
        cmocka_unit_test(test_seqpred_declared_constant_one),
        cmocka_unit_test(test_seqpred_bounds_from_sizes),
        cmocka_unit_test(test_seqpred_both_directions),
        cmocka_unit_test(test_seqpred_nonce_delta),
        cmocka_unit_test(test_seqpred_explicit_record_number),
        cmocka_unit_test(test_seqpred_rejects_bad_anchors),
        cmocka_unit_test(test_seqpred_no_anchor_no_candidates),
        cmocka_unit_test(test_seqpred_storm_candidate_cap),
        cmocka_unit_test(test_seqpred_advance),
        cmocka_unit_test(test_seqpred_origin_bounds_without_stats),
        cmocka_unit_test(test_seqpred_first_candidate_matches_ranking),
        cmocka_unit_test(test_seqpred_inherit_sizes),
    };
    return cmocka_run_group_tests_name("seqpred", tests, NULL, NULL);
}
