/* test_reasm.c: unit tests for the fragment store (core/include/utls/reasm.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "utls/reasm.h"

static uint8_t pattern[1 << 20];

static int setup_pattern(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(pattern); i++) {
        pattern[i] = (uint8_t)(i * 131 + (i >> 8) * 7 + 1);
    }
    return 0;
}

/* Bytes of the reference stream at stream offset |off|. */
static const uint8_t *at(uint64_t off)
{
    return pattern + (off % (sizeof(pattern) / 2));
}

static utls_reasm *new_default(void)
{
    utls_reasm *r = utls_reasm_new(NULL, 0);
    assert_non_null(r);
    return r;
}

static void expect_run(const utls_reasm *r, uint64_t off, uint64_t start, size_t len)
{
    utls_reasm_run run;
    assert_int_equal(utls_reasm_find_run(r, &run, off), 1);
    assert_int_equal(run.offset, start);
    assert_int_equal(run.len, len);
    assert_memory_equal(run.data, at(start), len);
}

static void test_reasm_insert_single(void **state)
{
    (void)state;
    utls_reasm *r = new_default();
    assert_int_equal(utls_reasm_insert(r, 100, at(100), 50), UTLS_REASM_STORED);
    expect_run(r, 120, 100, 50);
    utls_reasm_run run;
    assert_int_equal(utls_reasm_find_run(r, &run, 99), 0);
    assert_int_equal(utls_reasm_find_run(r, &run, 150), 0);
    assert_int_equal(utls_reasm_bytes_held(r), 50);
    assert_int_equal(utls_reasm_num_fragments(r), 1);
    utls_reasm_free(r);
}

static void test_reasm_zero_length(void **state)
{
    (void)state;
    utls_reasm *r = new_default();
    assert_int_equal(utls_reasm_insert(r, 10, at(10), 0), UTLS_REASM_NO_NEW_DATA);
    assert_int_equal(utls_reasm_insert(r, 10, NULL, 0), UTLS_REASM_NO_NEW_DATA);
    assert_int_equal(utls_reasm_insert(r, 10, NULL, 5), UTLS_REASM_INVALID);
    assert_int_equal(utls_reasm_num_fragments(r), 0);
    utls_reasm_free(r);
}

static void test_reasm_duplicate(void **state)
{
    (void)state;
    utls_reasm *r = new_default();
    assert_int_equal(utls_reasm_insert(r, 1000, at(1000), 1448), UTLS_REASM_STORED);
    assert_int_equal(utls_reasm_insert(r, 1000, at(1000), 1448), UTLS_REASM_NO_NEW_DATA);
    assert_int_equal(utls_reasm_insert(r, 1200, at(1200), 100), UTLS_REASM_NO_NEW_DATA);
    utls_reasm_stats st;
    utls_reasm_get_stats(r, &st);
    assert_int_equal(st.bytes_new, 1448);
    assert_int_equal(st.bytes_duplicate, 1548);
    assert_int_equal(st.bytes_conflicting, 0);
    assert_int_equal(utls_reasm_bytes_held(r), 1448);
    utls_reasm_free(r);
}

static void test_reasm_adjacent_merge(void **state)
{
    (void)state;
    utls_reasm *r = new_default();
    assert_int_equal(utls_reasm_insert(r, 200, at(200), 100), UTLS_REASM_STORED);
    assert_int_equal(utls_reasm_insert(r, 100, at(100), 100), UTLS_REASM_STORED);
    assert_int_equal(utls_reasm_insert(r, 300, at(300), 100), UTLS_REASM_STORED);
    assert_int_equal(utls_reasm_num_fragments(r), 1);
    expect_run(r, 100, 100, 300);
    utls_reasm_free(r);
}

static void test_reasm_overlap_spanning(void **state)
{
    (void)state;
    utls_reasm *r = new_default();
    /* Runs at [10,20) [30,40) [50,60) [70,80); one insert covers 15..75. */
    for (uint64_t o = 10; o < 80; o += 20) {
        assert_int_equal(utls_reasm_insert(r, o, at(o), 10), UTLS_REASM_STORED);
    }
    assert_int_equal(utls_reasm_num_fragments(r), 4);
    assert_int_equal(utls_reasm_insert(r, 15, at(15), 60), UTLS_REASM_STORED);
    assert_int_equal(utls_reasm_num_fragments(r), 1);
    expect_run(r, 10, 10, 70);
    utls_reasm_stats st;
    utls_reasm_get_stats(r, &st);
    assert_int_equal(st.bytes_new, 40 + 30);
    assert_int_equal(st.bytes_duplicate, 5 + 10 + 10 + 5);
    /* A covering insert that starts before everything. */
    assert_int_equal(utls_reasm_insert(r, 0, at(0), 100), UTLS_REASM_STORED);
    expect_run(r, 0, 0, 100);
    assert_int_equal(utls_reasm_bytes_held(r), 100);
    utls_reasm_free(r);
}

static void test_reasm_conflict_first_kept(void **state)
{
    (void)state;
    utls_reasm *r = new_default();
    uint8_t forged[64];
    memcpy(forged, at(500), sizeof(forged));
    forged[3] ^= 0xff;
    forged[40] ^= 0x01;
    assert_int_equal(utls_reasm_insert(r, 520, at(520), 20), UTLS_REASM_STORED);
    /* forged covers 500..564; bytes 520..540 are held: forged[40] conflicts. */
    assert_int_equal(utls_reasm_insert(r, 500, forged, sizeof(forged)), UTLS_REASM_STORED);
    utls_reasm_stats st;
    utls_reasm_get_stats(r, &st);
    assert_int_equal(st.bytes_conflicting, 0); /* forged[40] is offset 540, not held */
    assert_int_equal(utls_reasm_insert(r, 500, at(500), 64), UTLS_REASM_NO_NEW_DATA);
    utls_reasm_get_stats(r, &st);
    assert_int_equal(st.bytes_conflicting, 2);
    assert_int_equal(st.num_conflicting_inserts, 1);
    utls_reasm_run run;
    assert_int_equal(utls_reasm_find_run(r, &run, 500), 1);
    assert_int_equal(run.len, 64);
    /* The first-arrived (forged) bytes are kept. */
    assert_memory_equal(run.data, forged, 64);
    utls_reasm_free(r);
}

static void test_reasm_below_inorder(void **state)
{
    (void)state;
    utls_reasm *r = utls_reasm_new(NULL, 1000);
    assert_non_null(r);
    assert_int_equal(utls_reasm_insert(r, 0, at(0), 1000), UTLS_REASM_NO_NEW_DATA);
    assert_int_equal(utls_reasm_insert(r, 900, at(900), 200), UTLS_REASM_STORED);
    expect_run(r, 1000, 1000, 100);
    utls_reasm_stats st;
    utls_reasm_get_stats(r, &st);
    assert_int_equal(st.bytes_below_inorder, 1100);
    utls_reasm_free(r);
}

static void test_reasm_advance_trims(void **state)
{
    (void)state;
    utls_reasm *r = new_default();
    assert_int_equal(utls_reasm_insert(r, 100, at(100), 100), UTLS_REASM_STORED);
    assert_int_equal(utls_reasm_insert(r, 300, at(300), 100), UTLS_REASM_STORED);
    assert_int_equal(utls_reasm_insert(r, 500, at(500), 100), UTLS_REASM_STORED);
    assert_int_equal(utls_reasm_advance(r, 350), 1);
    assert_int_equal(utls_reasm_inorder(r), 350);
    assert_int_equal(utls_reasm_num_fragments(r), 2);
    assert_int_equal(utls_reasm_bytes_held(r), 150);
    expect_run(r, 350, 350, 50);
    /* The cut run still grows correctly afterwards (head offset logic). */
    assert_int_equal(utls_reasm_insert(r, 400, at(400), 100), UTLS_REASM_STORED);
    expect_run(r, 350, 350, 250);
    assert_int_equal(utls_reasm_advance(r, 349), 0);
    assert_int_equal(utls_reasm_advance(r, 10000), 1);
    assert_int_equal(utls_reasm_bytes_held(r), 0);
    assert_int_equal(utls_reasm_num_fragments(r), 0);
    utls_reasm_free(r);
}

static void test_reasm_iterate_runs(void **state)
{
    (void)state;
    utls_reasm *r = new_default();
    uint64_t starts[] = {5000, 100, 3000, 2000, 7000};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(utls_reasm_insert(r, starts[i], at(starts[i]), 10 + i),
                         UTLS_REASM_STORED);
    }
    uint64_t expect[] = {100, 2000, 3000, 5000, 7000};
    size_t expect_len[] = {11, 13, 12, 10, 14};
    utls_reasm_run run;
    size_t n = 0;
    for (int ok = utls_reasm_first_run(r, &run); ok; ok = utls_reasm_next_run(r, &run, run.offset)) {
        assert_true(n < 5);
        assert_int_equal(run.offset, expect[n]);
        assert_int_equal(run.len, expect_len[n]);
        assert_memory_equal(run.data, at(run.offset), run.len);
        n++;
    }
    assert_int_equal(n, 5);
    utls_reasm_free(r);
}

static void test_reasm_out_of_window(void **state)
{
    (void)state;
    utls_reasm_limits lim;
    utls_reasm_limits_default(&lim);
    lim.max_window = 10000;
    utls_reasm *r = utls_reasm_new(&lim, 50000);
    assert_non_null(r);
    assert_int_equal(utls_reasm_insert(r, 60000, at(60000), 10), UTLS_REASM_DROPPED);
    assert_int_equal(utls_reasm_insert(r, (uint64_t)1 << 63, at(0), 10), UTLS_REASM_DROPPED);
    /* Straddling the window edge: the part inside is kept. */
    assert_int_equal(utls_reasm_insert(r, 59990, at(59990), 20), UTLS_REASM_STORED);
    expect_run(r, 59990, 59990, 10);
    utls_reasm_stats st;
    utls_reasm_get_stats(r, &st);
    assert_int_equal(st.bytes_dropped_window, 30);
    /* The window moves with the in-order point. */
    assert_int_equal(utls_reasm_advance(r, 55000), 1);
    assert_int_equal(utls_reasm_insert(r, 60000, at(60000), 10), UTLS_REASM_STORED);
    expect_run(r, 59990, 59990, 20);
    utls_reasm_free(r);
}

static void test_reasm_wrapping_offsets(void **state)
{
    (void)state;
    utls_reasm_limits lim;
    utls_reasm_limits_default(&lim);
    lim.max_window = UINT64_MAX;
    uint64_t base = UINT64_MAX - 1000;
    utls_reasm *r = utls_reasm_new(&lim, base);
    assert_non_null(r);
    /* End exactly at 2^64 - 1 is fine. */
    assert_int_equal(utls_reasm_insert(r, UINT64_MAX - 100, at(0), 100), UTLS_REASM_STORED);
    /* End past 2^64 - 1 would wrap onto offset 0: refused whole. */
    assert_int_equal(utls_reasm_insert(r, UINT64_MAX - 10, at(0), 11), UTLS_REASM_INVALID);
    assert_int_equal(utls_reasm_insert(r, UINT64_MAX, at(0), 2), UTLS_REASM_INVALID);
    assert_int_equal(utls_reasm_insert(r, UINT64_MAX - 300, at(0), 100), UTLS_REASM_STORED);
    assert_int_equal(utls_reasm_num_fragments(r), 2);
    /* Filling the gap at the top of the space merges without overflow. */
    assert_int_equal(utls_reasm_insert(r, UINT64_MAX - 200, at(0), 100), UTLS_REASM_STORED);
    assert_int_equal(utls_reasm_num_fragments(r), 1);
    assert_int_equal(utls_reasm_insert(r, UINT64_MAX - 250, at(0), 50), UTLS_REASM_NO_NEW_DATA);
    utls_reasm_run run;
    assert_int_equal(utls_reasm_find_run(r, &run, UINT64_MAX - 1), 1);
    assert_int_equal(run.offset, UINT64_MAX - 300);
    assert_int_equal(run.len, 300);
    assert_int_equal(utls_reasm_next_run(r, &run, UINT64_MAX), 0);
    utls_reasm_stats st;
    utls_reasm_get_stats(r, &st);
    assert_int_equal(st.num_invalid_inserts, 2);
    utls_reasm_free(r);
    /* Default window: a fragment near 2^64 is simply out of window. */
    r = new_default();
    assert_int_equal(utls_reasm_insert(r, UINT64_MAX - 5, at(0), 5), UTLS_REASM_DROPPED);
    assert_int_equal(utls_reasm_insert(r, UINT64_MAX - 5, at(0), 6), UTLS_REASM_INVALID);
    utls_reasm_free(r);
}

static void test_reasm_maximal_lengths(void **state)
{
    (void)state;
    utls_reasm *r = new_default();
    size_t lens[] = {(1 << 14) + 1, 0xffff, 0x10000, (size_t)1 << 19};
    uint64_t off = 1;
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(utls_reasm_insert(r, off, at(off), lens[i]), UTLS_REASM_STORED);
        expect_run(r, off, off, lens[i]);
        off += lens[i] + 1;
    }
    assert_int_equal(utls_reasm_num_fragments(r), 4);
    /* One fragment larger than max_bytes keeps only the part nearest the
     * in-order point. */
    utls_reasm_limits lim;
    utls_reasm_limits_default(&lim);
    lim.max_bytes = 1000;
    utls_reasm *small = utls_reasm_new(&lim, 0);
    assert_int_equal(utls_reasm_insert(small, 10, at(10), 5000), UTLS_REASM_STORED);
    expect_run(small, 10, 10, 1000);
    utls_reasm_stats st;
    utls_reasm_get_stats(small, &st);
    assert_int_equal(st.bytes_dropped_size, 4000);
    utls_reasm_free(small);
    utls_reasm_free(r);
}

/* A flood of bytes: the store stays at max_bytes and keeps the data nearest
 * the in-order point. */
static void test_reasm_storm_bytes(void **state)
{
    (void)state;
    utls_reasm_limits lim;
    utls_reasm_limits_default(&lim);
    lim.max_bytes = 64 * 1024;
    utls_reasm *r = utls_reasm_new(&lim, 0);
    uint64_t seed = 42;
    for (int i = 0; i < 20000; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        uint64_t off = 1 + (seed >> 33) % (4u << 20);
        size_t len = 1 + (size_t)((seed >> 20) % 1448);
        utls_reasm_result res = utls_reasm_insert(r, off, at(off), len);
        assert_true(res != UTLS_REASM_ERROR && res != UTLS_REASM_INVALID);
        assert_true(utls_reasm_bytes_held(r) <= lim.max_bytes);
        assert_true(utls_reasm_num_fragments(r) <= lim.max_fragments);
    }
    assert_int_equal(utls_reasm_bytes_held(r), lim.max_bytes);
    /* Held data is still correct, and everything held is below anything
     * that was evicted: the lowest 64 KiB of what was offered. */
    utls_reasm_stats st;
    utls_reasm_get_stats(r, &st);
    assert_true(st.bytes_evicted > 0);
    utls_reasm_run run;
    size_t total = 0;
    for (int ok = utls_reasm_first_run(r, &run); ok; ok = utls_reasm_next_run(r, &run, run.offset)) {
        assert_memory_equal(run.data, at(run.offset), run.len);
        total += run.len;
        assert_true(run.offset < 1u << 20);
    }
    assert_int_equal(total, lim.max_bytes);
    utls_reasm_free(r);
}

/* 1-byte fragments with holes between them: the fragment limit holds. */
static void test_reasm_storm_fragments(void **state)
{
    (void)state;
    utls_reasm_limits lim;
    utls_reasm_limits_default(&lim);
    lim.max_fragments = 100;
    utls_reasm *r = utls_reasm_new(&lim, 0);
    for (uint64_t o = 200000; o > 2; o -= 2) {
        assert_true(utls_reasm_insert(r, o, at(o), 1) != UTLS_REASM_ERROR);
        assert_true(utls_reasm_num_fragments(r) <= 100);
    }
    /* Inserted from the far end down: the last 100 (nearest) are held. */
    assert_int_equal(utls_reasm_num_fragments(r), 100);
    utls_reasm_run run;
    assert_int_equal(utls_reasm_first_run(r, &run), 1);
    assert_int_equal(run.offset, 4);
    /* Filling the holes merges everything back into one run. */
    assert_int_equal(utls_reasm_insert(r, 4, at(4), 199), UTLS_REASM_STORED);
    assert_int_equal(utls_reasm_num_fragments(r), 1);
    expect_run(r, 4, 4, 199);
    utls_reasm_free(r);
}

/* Issue 20, point 6: a forged copy that arrived first does not shadow the
 * genuine one. Off by default (first arrival wins); with other copies kept,
 * a swap puts the genuine bytes in and keeps the forged ones; each copy
 * swaps a bounded number of times. */
static void test_reasm_alternates_swap(void **state)
{
    (void)state;
    utls_reasm *r = new_default();
    utls_reasm_stats st;
    uint8_t forged[300];
    uint64_t from = 0, to = 0;
    memset(forged, 0xee, sizeof(forged));

    /* Off: the conflicting copy is only counted. */
    assert_int_equal(utls_reasm_insert(r, 1000, forged, 300), UTLS_REASM_STORED);
    assert_int_equal(utls_reasm_insert(r, 1000, at(1000), 300), UTLS_REASM_NO_NEW_DATA);
    assert_int_equal(utls_reasm_num_alternates(r), 0);
    assert_int_equal(utls_reasm_swap_alternate(r, 1000, 300, &from, &to), 0);
    utls_reasm_free(r);

    r = new_default();
    utls_reasm_keep_alternates(r, 1);
    assert_int_equal(utls_reasm_insert(r, 1000, forged, 300), UTLS_REASM_STORED);
    /* The genuine copy, a little wider: its new tail is stored, the rest kept. */
    assert_int_equal(utls_reasm_insert(r, 1000, at(1000), 400), UTLS_REASM_STORED);
    assert_int_equal(utls_reasm_num_alternates(r), 1);
    /* The same copy again is not kept twice. */
    assert_int_equal(utls_reasm_insert(r, 1000, at(1000), 400), UTLS_REASM_NO_NEW_DATA);
    assert_int_equal(utls_reasm_num_alternates(r), 1);
    /* Nothing to swap for a range the copy does not reach. */
    assert_int_equal(utls_reasm_swap_alternate(r, 2000, 10, &from, &to), 0);
    /* The record at [1100, 1200) failed: swap. */
    assert_int_equal(utls_reasm_swap_alternate(r, 1100, 100, &from, &to), 1);
    assert_int_equal(from, 1000);
    assert_int_equal(to, 1400); /* the copy's whole overlap with the run */
    expect_run(r, 1000, 1000, 400);
    /* Swapped once: the forged bytes are kept but not swapped back. */
    assert_int_equal(utls_reasm_num_alternates(r), 1);
    assert_int_equal(utls_reasm_swap_alternate(r, 1100, 100, &from, &to), 0);
    expect_run(r, 1000, 1000, 400);
    utls_reasm_get_stats(r, &st);
    assert_int_equal(st.alt_swaps, UTLS_REASM_MAX_ALT_SWAPS);
    assert_int_equal(st.alt_copies_kept, 1);
    /* In order past it: the copy goes. */
    assert_int_equal(utls_reasm_advance(r, 1400), 1);
    assert_int_equal(utls_reasm_num_alternates(r), 0);
    utls_reasm_free(r);
}

/* The copies kept are bounded in number and bytes; past a bound the copy
 * furthest from the in-order point goes, so the nearest survive a storm of
 * differing copies. */
static void test_reasm_alternates_bounded(void **state)
{
    (void)state;
    utls_reasm *r = new_default();
    utls_reasm_stats st;
    static uint8_t forged[20000];
    uint64_t from = 0, to = 0;

    utls_reasm_keep_alternates(r, 1);
    memset(forged, 0xee, sizeof(forged));
    /* Genuine bytes held near, conflicting forged copies far and near. */
    assert_int_equal(utls_reasm_insert(r, 0, at(0), 200000), UTLS_REASM_STORED);
    for (size_t i = 0; i < 3 * UTLS_REASM_MAX_ALT_COPIES; i++) {
        uint64_t off = 190000 - (uint64_t)i * 1000; /* each nearer than the last */
        assert_int_equal(utls_reasm_insert(r, off, forged, 100), UTLS_REASM_NO_NEW_DATA);
    }
    assert_int_equal(utls_reasm_num_alternates(r), UTLS_REASM_MAX_ALT_COPIES);
    /* The nearest copy is kept, the far ones went. */
    uint64_t nearest = 190000 - (uint64_t)(3 * UTLS_REASM_MAX_ALT_COPIES - 1) * 1000;
    assert_int_equal(utls_reasm_swap_alternate(r, nearest, 100, &from, &to), 1);
    assert_int_equal(utls_reasm_swap_alternate(r, 189000, 100, &from, &to), 0);
    /* Bytes: 20 KB copies exceed UTLS_REASM_MAX_ALT_BYTES long before the count. */
    utls_reasm_keep_alternates(r, 0);
    assert_int_equal(utls_reasm_num_alternates(r), 0);
    utls_reasm_keep_alternates(r, 1);
    for (size_t i = 0; i < 30; i++) {
        assert_int_equal(utls_reasm_insert(r, (uint64_t)i * 5000, forged, sizeof(forged)),
                         UTLS_REASM_NO_NEW_DATA);
    }
    assert_true(utls_reasm_num_alternates(r) * sizeof(forged) <= UTLS_REASM_MAX_ALT_BYTES);
    utls_reasm_get_stats(r, &st);
    assert_true(st.alt_copies_dropped > 0);
    utls_reasm_free(r);
}

static void test_reasm_zero_limits(void **state)
{
    (void)state;
    utls_reasm_limits lim = {0, 0, 0};
    utls_reasm *r = utls_reasm_new(&lim, 0);
    assert_int_equal(utls_reasm_insert(r, 0, at(0), 10), UTLS_REASM_DROPPED);
    assert_int_equal(utls_reasm_num_fragments(r), 0);
    utls_reasm_free(r);
    utls_reasm_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reasm_insert_single),
        cmocka_unit_test(test_reasm_zero_length),
        cmocka_unit_test(test_reasm_duplicate),
        cmocka_unit_test(test_reasm_adjacent_merge),
        cmocka_unit_test(test_reasm_overlap_spanning),
        cmocka_unit_test(test_reasm_conflict_first_kept),
        cmocka_unit_test(test_reasm_below_inorder),
        cmocka_unit_test(test_reasm_advance_trims),
        cmocka_unit_test(test_reasm_iterate_runs),
        cmocka_unit_test(test_reasm_out_of_window),
        cmocka_unit_test(test_reasm_wrapping_offsets),
        cmocka_unit_test(test_reasm_maximal_lengths),
        cmocka_unit_test(test_reasm_storm_bytes),
        cmocka_unit_test(test_reasm_storm_fragments),
        cmocka_unit_test(test_reasm_zero_limits),
        cmocka_unit_test(test_reasm_alternates_swap),
        cmocka_unit_test(test_reasm_alternates_bounded),
    };
    return cmocka_run_group_tests_name("reasm", tests, setup_pattern, NULL);
}
