/* test_scan.c: unit tests for the record header scanner (core/include/utls/scan.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "utls/scan.h"
#include "test_rng.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
    return test_xorshift64(&rng_state);
}

static void fill_random(uint8_t *buf, size_t len)
{
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = rnd();
        memcpy(buf + i, &v, 8);
    }
    for (; i < len; i++) {
        buf[i] = (uint8_t)rnd();
    }
}

static void put_header(uint8_t *p, uint8_t type, uint16_t version, uint16_t len)
{
    p[0] = type;
    p[1] = (uint8_t)(version >> 8);
    p[2] = (uint8_t)version;
    p[3] = (uint8_t)(len >> 8);
    p[4] = (uint8_t)len;
}

/* Random data with no 0x03 0x03 pair, so no accidental header. */
static void fill_clean(uint8_t *buf, size_t len)
{
    fill_random(buf, len);
    for (size_t i = 0; i < len; i++) {
        if (buf[i] == 0x03) {
            buf[i] = 0x04;
        }
    }
}

static utls_scan *new_tls13(uint64_t inorder)
{
    utls_scan_profile pr;
    utls_scan_profile_tls13_app(&pr);
    utls_scan *s = utls_scan_new(&pr, inorder);
    assert_non_null(s);
    return s;
}

/* Feed a run and collect every hit (looping over UTLS_SCAN_MORE). */
static size_t feed_all(utls_scan *s, utls_scan_hit *hits, size_t max, uint64_t off,
                       const uint8_t *d, size_t len, size_t batch)
{
    size_t total = 0;
    for (;;) {
        size_t n = 0;
        size_t room = max - total < batch ? max - total : batch;
        utls_scan_result res = utls_scan_feed(s, hits + total, room, &n, off, d, len);
        assert_int_not_equal(res, UTLS_SCAN_ERROR);
        total += n;
        if (res == UTLS_SCAN_DONE) {
            return total;
        }
        assert_true(total < max);
    }
}

static void test_scan_finds_planted_headers(void **state)
{
    (void)state;
    rng_state = 1;
    static uint8_t buf[10000];
    fill_clean(buf, sizeof(buf));
    put_header(buf + 100, 23, 0x0303, 50);
    put_header(buf + 1000, 23, 0x0303, 1 << 14);  /* record not present: pending */
    put_header(buf + 2000, 22, 0x0303, 50);       /* wrong type */
    put_header(buf + 3000, 23, 0x0301, 50);       /* wrong version */
    put_header(buf + 4000, 23, 0x0303, 16);       /* below min_len 17 */
    put_header(buf + 5000, 23, 0x0303, (1 << 14) + 257); /* 2^14+257 > max */
    put_header(buf + 6000, 23, 0x0303, 0xffff);
    put_header(buf + 7000, 23, 0x0303, 0);
    put_header(buf + 8000, 23, 0x0303, 17);
    put_header(buf + sizeof(buf) - 22, 23, 0x0303, 17); /* ends exactly at run end */
    utls_scan *s = new_tls13(0);
    utls_scan_hit hits[16];
    size_t n = feed_all(s, hits, 16, 0, buf, sizeof(buf), 16);
    assert_int_equal(n, 3);
    assert_int_equal(hits[0].offset, 100);
    assert_int_equal(hits[0].len, 50);
    assert_int_equal(hits[0].type, 23);
    assert_int_equal(hits[0].version, 0x0303);
    assert_int_equal(hits[0].chained, 0);
    assert_int_equal(hits[1].offset, 8000);
    assert_int_equal(hits[2].offset, sizeof(buf) - 22);
    assert_int_equal(utls_scan_num_pending(s), 1);
    /* Re-feeding the same run finds nothing new: nothing is re-scanned. */
    utls_scan_stats st;
    utls_scan_get_stats(s, &st);
    uint64_t checked = st.positions_checked;
    assert_int_equal(feed_all(s, hits, 16, 0, buf, sizeof(buf), 16), 0);
    utls_scan_get_stats(s, &st);
    assert_int_equal(st.positions_checked, checked);
    utls_scan_free(s);
}

static void test_scan_tls12_lengths(void **state)
{
    (void)state;
    rng_state = 2;
    static uint8_t buf[40000];
    fill_clean(buf, sizeof(buf));
    utls_scan_profile pr;
    memset(&pr, 0, sizeof(pr));
    pr.type_mask = UTLS_SCAN_TYPE(23) | UTLS_SCAN_TYPE(21);
    pr.version = 0x0303;
    pr.min_len = 24;
    pr.max_len = (1 << 14) + 2048;
    pr.require_whole = 1;
    put_header(buf + 10, 21, 0x0303, (1 << 14) + 1);     /* 2^14+1 is fine here */
    put_header(buf + 20000, 23, 0x0303, (1 << 14) + 2049); /* too long */
    put_header(buf + 30000, 24, 0x0303, 30);               /* heartbeat not allowed */
    utls_scan *s = utls_scan_new(&pr, 0);
    utls_scan_hit hits[4];
    size_t n = feed_all(s, hits, 4, 0, buf, sizeof(buf), 4);
    assert_int_equal(n, 1);
    assert_int_equal(hits[0].offset, 10);
    assert_int_equal(hits[0].type, 21);
    assert_int_equal(hits[0].len, (1 << 14) + 1);
    utls_scan_free(s);
    pr.min_len = 100;
    pr.max_len = 99;
    assert_null(utls_scan_new(&pr, 0));
}

/* Against a naive reference on random data with many planted headers, in
 * pieces of every size: exercises the SIMD path, its tail and run edges. */
static void test_scan_matches_reference(void **state)
{
    (void)state;
    rng_state = 3;
    enum { LEN = 1 << 16 };
    static uint8_t buf[LEN];
    fill_random(buf, LEN);
    for (int i = 0; i < 600; i++) {
        size_t p = (size_t)(rnd() % (LEN - 5));
        uint8_t type = (uint8_t)(i % 3 == 0 ? 20 + rnd() % 6 : 22 + rnd() % 2);
        put_header(buf + p, type, 0x0303, (uint16_t)(rnd() % 2000));
    }
    utls_scan_profile pr;
    memset(&pr, 0, sizeof(pr));
    pr.type_mask = UTLS_SCAN_TYPE(22) | UTLS_SCAN_TYPE(23);
    pr.version = 0x0303;
    pr.min_len = 1;
    pr.max_len = 1500;
    pr.require_whole = 0;
    static uint8_t expect[LEN];
    size_t expect_n = 0;
    for (size_t p = 0; p + 5 <= LEN; p++) {
        uint16_t l = (uint16_t)((buf[p + 3] << 8) | buf[p + 4]);
        expect[p] = (buf[p] == 22 || buf[p] == 23) && buf[p + 1] == 3 && buf[p + 2] == 3 &&
                    l >= 1 && l <= 1500;
        expect_n += expect[p];
    }
    assert_true(expect_n > 200);
    /* Feed growing prefixes of random sizes as one growing run. */
    utls_scan *s = utls_scan_new(&pr, 0);
    static utls_scan_hit hits[LEN / 16];
    static uint8_t seen[LEN];
    memset(seen, 0, sizeof(seen));
    size_t got = 0;
    size_t have = 0;
    while (have < LEN) {
        have += 1 + (size_t)(rnd() % 97);
        if (have > LEN) {
            have = LEN;
        }
        size_t n = feed_all(s, hits, LEN / 16, 0, buf, have, 1 + (size_t)(rnd() % 5));
        for (size_t i = 0; i < n; i++) {
            assert_true(hits[i].offset + 5 <= have);
            assert_int_equal(seen[hits[i].offset], 0);
            seen[hits[i].offset] = 1;
            got++;
        }
    }
    assert_int_equal(got, expect_n);
    assert_memory_equal(seen, expect, LEN);
    utls_scan_free(s);
}

/* A header whose record is incomplete waits, and is reported once when the
 * run grows (or a separate later run merges with it). */
static void test_scan_pending_completes(void **state)
{
    (void)state;
    rng_state = 4;
    static uint8_t buf[3000];
    fill_clean(buf, sizeof(buf));
    put_header(buf + 1000, 23, 0x0303, 1000); /* record [1000, 2005) */
    utls_scan *s = new_tls13(0);
    utls_scan_hit hits[4];
    assert_int_equal(feed_all(s, hits, 4, 0, buf, 1500, 4), 0);
    assert_int_equal(utls_scan_num_pending(s), 1);
    assert_int_equal(feed_all(s, hits, 4, 0, buf, 2004, 4), 0);
    assert_int_equal(feed_all(s, hits, 4, 0, buf, 2005, 4), 1);
    assert_int_equal(hits[0].offset, 1000);
    assert_int_equal(utls_scan_num_pending(s), 0);
    assert_int_equal(feed_all(s, hits, 4, 0, buf, 3000, 4), 0);
    /* Header split across the end of a run: not checked until whole. */
    utls_scan_free(s);
    s = new_tls13(0);
    uint8_t big[3100];
    memcpy(big, buf, 3000);
    fill_clean(big + 3000, 100);
    put_header(big + 2998, 23, 0x0303, 17);
    assert_int_equal(feed_all(s, hits, 4, 0, big, 3000, 4), 1);
    assert_int_equal(hits[0].offset, 1000);
    assert_int_equal(feed_all(s, hits, 4, 0, big, 3100, 4), 1);
    assert_int_equal(hits[0].offset, 2998);
    utls_scan_free(s);
}

/* Confirming a record discards headers inside it and chains to the next. */
static void test_scan_chain_after_confirm(void **state)
{
    (void)state;
    rng_state = 5;
    static uint8_t buf[6000];
    fill_clean(buf, sizeof(buf));
    put_header(buf + 0, 23, 0x0303, 995);    /* record [0, 1000) */
    put_header(buf + 500, 23, 0x0303, 4000); /* false header inside it, pending */
    put_header(buf + 1000, 23, 0x0303, 995); /* next record [1000, 2000) */
    put_header(buf + 2000, 23, 0x0303, 995); /* [2000, 3000) */
    utls_scan *s = new_tls13(0);
    utls_scan_hit hits[8];
    /* Only bytes [0, 1003) so far: the record at 0 is whole. */
    assert_int_equal(feed_all(s, hits, 8, 0, buf, 1003, 8), 1);
    assert_int_equal(hits[0].offset, 0);
    assert_int_equal(utls_scan_num_pending(s), 1);
    assert_int_equal(utls_scan_confirm(s, 0, 1000), 1);
    assert_int_equal(utls_scan_num_pending(s), 1); /* 500 gone, 1000 chained */
    /* More bytes arrive: 1000 comes out chained, 2000 plain. */
    size_t n = feed_all(s, hits, 8, 0, buf, 3500, 8);
    assert_int_equal(n, 2);
    assert_int_equal(hits[0].offset, 1000);
    assert_int_equal(hits[0].chained, 1);
    assert_int_equal(hits[1].offset, 2000);
    assert_int_equal(hits[1].chained, 0);
    /* Confirming 1000 chains to 2000, which was already reported: not again. */
    assert_int_equal(utls_scan_confirm(s, 1000, 1000), 1);
    assert_int_equal(feed_all(s, hits, 8, 0, buf, 6000, 8), 0);
    /* Confirming 2000 chains to 3000, which holds no plausible header. */
    assert_int_equal(utls_scan_confirm(s, 2000, 1000), 1);
    assert_int_equal(feed_all(s, hits, 8, 0, buf, 6000, 8), 0);
    utls_scan_stats st;
    utls_scan_get_stats(s, &st);
    assert_int_equal(st.hits_chained, 1);
    assert_int_equal(utls_scan_confirm(s, UINT64_MAX - 2, 10), 0);
    assert_int_equal(utls_scan_confirm(s, 10, 4), 0);
    utls_scan_free(s);
}

/* A chained position whose header arrives later, in a run of its own. */
static void test_scan_chain_into_later_run(void **state)
{
    (void)state;
    rng_state = 6;
    static uint8_t buf[4000];
    fill_clean(buf, sizeof(buf));
    put_header(buf + 0, 23, 0x0303, 995);
    put_header(buf + 1000, 23, 0x0303, 95);
    utls_scan *s = new_tls13(0);
    utls_scan_hit hits[4];
    assert_int_equal(feed_all(s, hits, 4, 0, buf, 1000, 4), 1);
    assert_int_equal(utls_scan_confirm(s, 0, 1000), 1);
    assert_int_equal(feed_all(s, hits, 4, 0, buf, 1002, 4), 0); /* header partial */
    assert_int_equal(feed_all(s, hits, 4, 0, buf, 1100, 4), 1);
    assert_int_equal(hits[0].offset, 1000);
    assert_int_equal(hits[0].chained, 1);
    /* A chained position whose bytes are not a header is dropped. */
    assert_int_equal(utls_scan_confirm(s, 1000, 100), 1);
    buf[1100] = 0x99;
    assert_int_equal(feed_all(s, hits, 4, 1100, buf + 1100, 100, 4), 0);
    utls_scan_stats st;
    utls_scan_get_stats(s, &st);
    assert_int_equal(st.chain_breaks, 1);
    assert_int_equal(utls_scan_num_pending(s), 0);
    utls_scan_free(s);
}

static void test_scan_advance_forgets(void **state)
{
    (void)state;
    rng_state = 7;
    static uint8_t buf[5000];
    fill_clean(buf, sizeof(buf));
    put_header(buf + 100, 23, 0x0303, 9000);
    put_header(buf + 3000, 23, 0x0303, 9000);
    utls_scan *s = new_tls13(0);
    utls_scan_hit hits[4];
    assert_int_equal(feed_all(s, hits, 4, 0, buf, 5000, 4), 0);
    assert_int_equal(utls_scan_num_pending(s), 2);
    assert_int_equal(utls_scan_advance(s, 2000), 1);
    assert_int_equal(utls_scan_num_pending(s), 1);
    assert_int_equal(utls_scan_advance(s, 1999), 0);
    /* Bytes below the in-order point are ignored. */
    put_header(buf + 500, 23, 0x0303, 20);
    assert_int_equal(feed_all(s, hits, 4, 0, buf, 5000, 4), 0);
    utls_scan_free(s);
    utls_scan_free(NULL);
}

/* Zero-length, wrapping and tiny runs. */
/* After the store swapped another copy into [from, to), the positions there
 * are checked again: a header in the new bytes is reported, positions
 * outside the range are not reported twice. (Issue 20, point 6.) */
static void test_scan_forget_rescans_range(void **state)
{
    (void)state;
    rng_state = 11;
    static uint8_t buf[3000];
    fill_clean(buf, sizeof(buf));
    put_header(buf + 100, 23, 0x0303, 100);
    utls_scan *s = new_tls13(0);
    utls_scan_hit hits[4];
    assert_int_equal(feed_all(s, hits, 4, 0, buf, sizeof(buf), 4), 1);
    assert_int_equal(hits[0].offset, 100);
    /* The same run again: nothing new. */
    assert_int_equal(feed_all(s, hits, 4, 0, buf, sizeof(buf), 4), 0);
    /* Other bytes at [1000, 1400): a header at 1200 appears there. */
    put_header(buf + 1200, 23, 0x0303, 50);
    assert_int_equal(feed_all(s, hits, 4, 0, buf, sizeof(buf), 4), 0);
    assert_int_equal(utls_scan_forget(s, 1000, 1400), 1);
    assert_int_equal(feed_all(s, hits, 4, 0, buf, sizeof(buf), 4), 1);
    assert_int_equal(hits[0].offset, 1200);
    /* A pending header inside a forgotten range is dropped with it. */
    put_header(buf + 2900, 23, 0x0303, 1000); /* incomplete: pending */
    assert_int_equal(utls_scan_forget(s, 2800, 3000), 1);
    assert_int_equal(feed_all(s, hits, 4, 0, buf, sizeof(buf), 4), 0);
    assert_int_equal(utls_scan_num_pending(s), 1);
    assert_int_equal(utls_scan_forget(s, 2900, 2901), 1);
    assert_int_equal(utls_scan_num_pending(s), 0);
    assert_int_equal(utls_scan_forget(s, 5, 5), 1); /* empty range */
    utls_scan_free(s);
}

static void test_scan_hostile_runs(void **state)
{
    (void)state;
    utls_scan *s = new_tls13(0);
    utls_scan_hit hits[4];
    size_t n = 7;
    uint8_t b[8] = {23, 3, 3, 0, 17, 0, 0, 0};
    assert_int_equal(utls_scan_feed(s, hits, 4, &n, 0, b, 0), UTLS_SCAN_DONE);
    assert_int_equal(n, 0);
    assert_int_equal(utls_scan_feed(s, hits, 4, &n, UINT64_MAX - 3, b, 8), UTLS_SCAN_ERROR);
    assert_int_equal(utls_scan_feed(s, hits, 4, &n, 0, NULL, 8), UTLS_SCAN_ERROR);
    assert_int_equal(utls_scan_feed(s, hits, 4, &n, 10, b, 4), UTLS_SCAN_DONE);
    assert_int_equal(n, 0);
    /* Whole header at the very top of the offset space; record cannot fit. */
    assert_int_equal(utls_scan_feed(s, hits, 4, &n, UINT64_MAX - 8, b, 8), UTLS_SCAN_DONE);
    assert_int_equal(n, 0);
    /* max_hits 0: MORE without progress, then the hit. */
    uint8_t whole[22] = {23, 3, 3, 0, 17};
    assert_int_equal(utls_scan_feed(s, hits, 0, &n, 100, whole, 22), UTLS_SCAN_MORE);
    assert_int_equal(utls_scan_feed(s, hits, 1, &n, 100, whole, 22), UTLS_SCAN_DONE);
    assert_int_equal(n, 1);
    utls_scan_free(s);
}

/* A storm of forged headers that never complete: pending and interval
 * limits hold, and a real record after the storm is still found. */
static void test_scan_storm_limits(void **state)
{
    (void)state;
    rng_state = 8;
    utls_scan_profile pr;
    utls_scan_profile_tls13_app(&pr);
    pr.max_pending = 64;
    pr.max_intervals = 32;
    utls_scan *s = utls_scan_new(&pr, 0);
    static uint8_t forged[1 << 16];
    for (size_t i = 0; i + 5 <= sizeof(forged); i += 5) {
        put_header(forged + i, 23, 0x0303, 16000);
    }
    utls_scan_hit hits[8];
    for (uint64_t run = 0; run < 200; run++) {
        /* Separate runs far apart, each full of headers. */
        size_t n;
        utls_scan_result res =
            utls_scan_feed(s, hits, 8, &n, 1000000 + run * 100000, forged, 4000);
        assert_int_equal(res, UTLS_SCAN_DONE);
        assert_int_equal(n, 0);
        assert_true(utls_scan_num_pending(s) <= 64);
        assert_true(utls_scan_num_intervals(s) <= 32);
    }
    utls_scan_stats st;
    utls_scan_get_stats(s, &st);
    assert_true(st.pending_dropped > 0);
    assert_true(st.intervals_dropped > 0);
    /* A genuine record nearer the in-order point is still found. */
    uint8_t rec[40];
    fill_clean(rec, sizeof(rec));
    put_header(rec, 23, 0x0303, 35);
    size_t n;
    assert_int_equal(utls_scan_feed(s, hits, 8, &n, 500, rec, sizeof(rec)), UTLS_SCAN_DONE);
    assert_int_equal(n, 1);
    assert_int_equal(hits[0].offset, 500);
    utls_scan_free(s);
}

/* The measured false-positive rate on random data matches the rate the
 * header rules predict (Poisson, 4.5 sigma). */
static void test_scan_false_positive_rate(void **state)
{
    (void)state;
    rng_state = 9;
    utls_scan_profile pr;
    memset(&pr, 0, sizeof(pr));
    /* A loose profile, so 64 MiB gives enough matches to compare. */
    pr.type_mask = UTLS_SCAN_TYPE(20) | UTLS_SCAN_TYPE(21) | UTLS_SCAN_TYPE(22) |
                   UTLS_SCAN_TYPE(23) | UTLS_SCAN_TYPE(24);
    pr.version = 0x0303;
    pr.min_len = 0;
    pr.max_len = 0xffff;
    pr.require_whole = 0;
    utls_scan *s = utls_scan_new(&pr, 0);
    enum { CHUNK = 1 << 20, CHUNKS = 128 };
    static uint8_t buf[CHUNK];
    utls_scan_hit hits[64];
    uint64_t found = 0;
    uint64_t positions = 0;
    for (uint64_t c = 0; c < CHUNKS; c++) {
        fill_random(buf, CHUNK);
        uint64_t off = c * (CHUNK + 16);
        found += feed_all(s, hits, 64, off, buf, CHUNK, 64);
        positions += CHUNK - 4;
        assert_int_equal(utls_scan_advance(s, off + CHUNK), 1);
    }
    double expect = utls_scan_profile_fp_rate(&pr) * (double)positions;
    double sigma = sqrt(expect);
    print_message("scan fp: %llu found, %.1f predicted over %llu positions\n",
                  (unsigned long long)found, expect, (unsigned long long)positions);
    assert_true(expect > 30.0);
    assert_true((double)found > expect - 4.5 * sigma);
    assert_true((double)found < expect + 4.5 * sigma);
    /* The TLS 1.3 profile's predicted rate: type, version, length rules. */
    utls_scan_profile t13;
    utls_scan_profile_tls13_app(&t13);
    double r13 = utls_scan_profile_fp_rate(&t13);
    assert_true(r13 > 1.4e-8 && r13 < 1.6e-8);
    utls_scan_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_finds_planted_headers),
        cmocka_unit_test(test_scan_tls12_lengths),
        cmocka_unit_test(test_scan_matches_reference),
        cmocka_unit_test(test_scan_pending_completes),
        cmocka_unit_test(test_scan_chain_after_confirm),
        cmocka_unit_test(test_scan_chain_into_later_run),
        cmocka_unit_test(test_scan_advance_forgets),
        cmocka_unit_test(test_scan_forget_rescans_range),
        cmocka_unit_test(test_scan_hostile_runs),
        cmocka_unit_test(test_scan_storm_limits),
        cmocka_unit_test(test_scan_false_positive_rate),
    };
    return cmocka_run_group_tests_name("scan", tests, NULL, NULL);
}
