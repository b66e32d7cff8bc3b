/*
 * The in-order path of SSL_MODE_UNORDERED (docs/unordered.md, PERFORMANCE).
 * The patched record code calls uTLS's read and skip hooks only when uTLS's
 * state says they may have something to do (utls_hook_state), the delivery
 * hook only for a record longer than the buffer, and UTLS_read_record() takes
 * an in-order record's metadata from the record-done hook. These tests check
 * that nothing is lost on the way:
 *
 *   - an in-order record's metadata (sequence number, offset, length, in
 *     order, a real arrival time) and its count, once per record even when
 *     it is peeked first or first refused for a buffer too small;
 *   - a read that found nothing waiting (the read hook then goes idle) still
 *     delivers a record that completes past a hole with the next push, and
 *     the in-order path then skips it;
 *   - after SSL_set0_rbio() the new BIO is asked, not the old one's signals;
 *   - the arrival time read when a record authenticates in a call that asked
 *     for metadata is never one left from an earlier record, whatever call
 *     decrypted the next one (a call without metadata, a buffer too small,
 *     SSL_read_ex());
 *   - a zero-length buffer is refused as too small, in order as out of order;
 *   - SSL_has_pending() reports records verified past a hole.
 *
 * Records 0, 1, 2 are written by the client; a push of record 2 before 1 makes
 * record 1 the hole.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

#include "uharness.h"

#define NUM_RECORDS 3
#define RECORD_LEN 1200

typedef struct {
    uh_seg_pair tls;
    uint8_t *wire[NUM_RECORDS];
    size_t wire_len[NUM_RECORDS];
    uint64_t wire_off[NUM_RECORDS];
    uint8_t plain[NUM_RECORDS][RECORD_LEN];
} pair;

static void pair_new(pair *p, uint64_t mode)
{
    memset(p, 0, sizeof(*p));
    assert_true(uh_seg_pair_new(&p->tls, uh_key, uh_cert, mode));
    for (int r = 0; r < NUM_RECORDS; r++) {
        for (size_t i = 0; i < RECORD_LEN; i++)
            p->plain[r][i] = (uint8_t)(r * 37 + i * 11 + 3);
        assert_true(uh_pair_write_record(&p->tls, p->plain[r], RECORD_LEN, &p->wire[r],
                                         &p->wire_len[r], &p->wire_off[r]));
        assert_true(p->wire_len[r] > RECORD_LEN);
    }
}

static void pair_free(pair *p)
{
    for (int r = 0; r < NUM_RECORDS; r++)
        free(p->wire[r]);
    uh_seg_pair_free(&p->tls);
}

static void push(BIO *seg, const pair *p, int r)
{
    assert_true(UTLS_BIO_segment_push(seg, p->wire_off[r], p->wire[r], p->wire_len[r]));
}

/* Reads one record, which must be record |r| with the metadata of it; its
 * arrival time must lie between |t_pushed| (taken before its push) and now. */
static void expect_record(pair *p, int r, int out_of_order, uint64_t t_pushed)
{
    uint8_t buf[RECORD_LEN + 100];
    size_t n = 0;
    UTLS_RECORD_INFO info;

    memset(&info, 0xa5, sizeof(info));
    assert_true(uh_read_record(p->tls.s, "inorder", r, buf, sizeof(buf), &n, &info));
    assert_int_equal(n, RECORD_LEN);
    assert_memory_equal(buf, p->plain[r], n);
    assert_int_equal(info.out_of_order != 0, out_of_order);
    assert_int_equal(info.seq, (uint64_t)r); /* no tickets: app records 0, 1, 2 */
    assert_int_equal(info.key_generation, 0);
    assert_int_equal(info.stream_offset, p->wire_off[r]);
    assert_int_equal(info.wire_len, p->wire_len[r]);
    assert_true(info.arrival_ns >= t_pushed);
    assert_true(info.arrival_ns <= uh_monotonic_ns());
}

static void expect_want_read(pair *p)
{
    uint8_t buf[RECORD_LEN + 100];
    size_t n;
    UTLS_RECORD_INFO info;

    assert_false(UTLS_read_record(p->tls.s, buf, sizeof(buf), &n, &info));
    assert_int_equal(SSL_get_error(p->tls.s, 0), SSL_ERROR_WANT_READ);
}

static UTLS_STATS stats(pair *p)
{
    UTLS_STATS st;

    assert_int_equal(UTLS_get_stats(p->tls.s, &st), 1);
    return st;
}

static void test_inorder_metadata_counted_once(void **state)
{
    pair p;
    uint8_t buf[RECORD_LEN + 100];
    size_t n;
    uint64_t t0;
    unsigned long e;

    (void)state;
    pair_new(&p, SSL_MODE_UNORDERED);
    t0 = uh_monotonic_ns();
    push(p.tls.seg, &p, 0);
    /* A peek returns the record and consumes nothing... */
    assert_true(SSL_peek_ex(p.tls.s, buf, sizeof(buf), &n));
    assert_int_equal(n, RECORD_LEN);
    assert_memory_equal(buf, p.plain[0], n);
    expect_record(&p, 0, 0, t0);
    /* ... and the record counts once. */
    assert_int_equal(stats(&p).records_in_order, 1);
    expect_want_read(&p);

    /* A buffer too small: an error that consumes nothing; the record counts
     * once, when a buffer that fits gets it. */
    t0 = uh_monotonic_ns();
    push(p.tls.seg, &p, 1);
    ERR_clear_error();
    assert_false(UTLS_read_record(p.tls.s, buf, RECORD_LEN - 1, &n, NULL));
    e = ERR_peek_error();
    assert_int_equal(ERR_GET_LIB(e), UTLS_get_lib());
    assert_int_equal(ERR_GET_REASON(e), UTLS_R_BUFFER_TOO_SMALL);
    ERR_clear_error();
    expect_record(&p, 1, 0, t0);
    assert_int_equal(stats(&p).records_in_order, 2);
    assert_int_equal(stats(&p).records_out_of_order, 0);
    pair_free(&p);
}

static void test_inorder_idle_read_sees_next_push(void **state)
{
    pair p;
    uint64_t t0;
    UTLS_STATS st;

    (void)state;
    pair_new(&p, SSL_MODE_UNORDERED);
    t0 = uh_monotonic_ns();
    push(p.tls.seg, &p, 0);
    expect_record(&p, 0, 0, t0);
    /* Nothing waits: the read hook goes idle until the BIO signals. */
    expect_want_read(&p);
    expect_want_read(&p);
    t0 = uh_monotonic_ns();
    push(p.tls.seg, &p, 2); /* past the hole at record 1 */
    expect_record(&p, 2, 1, t0);
    expect_want_read(&p);
    t0 = uh_monotonic_ns();
    push(p.tls.seg, &p, 1); /* fills the hole; record 2 is skipped */
    expect_record(&p, 1, 0, t0);
    expect_want_read(&p);
    st = stats(&p);
    assert_int_equal(st.records_in_order, 2);
    assert_int_equal(st.records_out_of_order, 1);
    assert_int_equal(st.records_skipped, 1);
    assert_int_equal(st.decryptions_saved, 1);
    pair_free(&p);
}

/*
 * Issue 19, point 5: among records deliverable at the same moment, the lowest
 * sequence number goes first. Records 1 and 2 complete past the hole at record
 * 0 and are verified together; the application reads record 1 early, and
 * before it reads record 2 the retransmission fills the hole: record 0 (in
 * order) comes before record 2, which then comes in order too. A peek sees
 * the record the next read returns.
 */
static void test_inorder_filled_hole_goes_first(void **state)
{
    pair p;
    uint8_t buf[RECORD_LEN + 100];
    uint64_t t0;
    UTLS_STATS st;
    int peek;

    (void)state;
    for (peek = 0; peek <= 1; peek++) {
        pair_new(&p, SSL_MODE_UNORDERED);
        t0 = uh_monotonic_ns();
        push(p.tls.seg, &p, 1);
        push(p.tls.seg, &p, 2);
        expect_record(&p, 1, 1, t0); /* early: record 2 waits verified */
        assert_int_equal(SSL_pending(p.tls.s), RECORD_LEN);
        push(p.tls.seg, &p, 0); /* the retransmission */
        if (peek) {
            assert_int_equal(SSL_peek(p.tls.s, buf, sizeof(buf)), RECORD_LEN);
            assert_memory_equal(buf, p.plain[0], RECORD_LEN);
        }
        expect_record(&p, 0, 0, t0); /* before record 2 */
        expect_record(&p, 2, 0, t0);
        expect_want_read(&p);
        st = stats(&p);
        assert_int_equal(st.records_out_of_order, 1);
        assert_int_equal(st.records_in_order, 2);
        pair_free(&p);
    }
}

static void test_inorder_new_read_bio(void **state)
{
    pair p;
    uint64_t t0;
    BIO *next;
    uint8_t *filler;
    size_t len;

    (void)state;
    pair_new(&p, SSL_MODE_UNORDERED);
    t0 = uh_monotonic_ns();
    push(p.tls.seg, &p, 0);
    expect_record(&p, 0, 0, t0);
    expect_want_read(&p); /* idle, with the first BIO */

    /* A second segment BIO that carries the same stream from record 1 on:
     * the bytes before it were read from the first one. */
    next = BIO_new(UTLS_BIO_s_segment());
    assert_non_null(next);
    len = (size_t)p.wire_off[1];
    filler = calloc(1, len);
    assert_non_null(filler);
    assert_true(UTLS_BIO_segment_push(next, 0, filler, len));
    assert_int_equal(BIO_read(next, filler, (int)len), (int)len);
    free(filler);
    SSL_set0_rbio(p.tls.s, next);

    t0 = uh_monotonic_ns();
    push(next, &p, 2); /* past the hole at record 1, in the new BIO */
    expect_record(&p, 2, 1, t0);
    expect_want_read(&p);
    t0 = uh_monotonic_ns();
    push(next, &p, 1);
    expect_record(&p, 1, 0, t0);
    expect_want_read(&p);
    assert_int_equal(stats(&p).records_out_of_order, 1);
    assert_int_equal(stats(&p).records_in_order, 2);
    pair_free(&p);
}

/* Reads record |r| in one UTLS_read_record() call with metadata and returns
 * its arrival time, checked against |t_pushed| and now. */
static uint64_t read_arrival(pair *p, int r, uint64_t t_pushed)
{
    uint8_t buf[RECORD_LEN + 100];
    size_t n = 0;
    UTLS_RECORD_INFO info;

    memset(&info, 0, sizeof(info));
    assert_true(UTLS_read_record(p->tls.s, buf, sizeof(buf), &n, &info));
    assert_int_equal(n, RECORD_LEN);
    assert_memory_equal(buf, p->plain[r], n);
    assert_int_equal(info.seq, (uint64_t)r);
    assert_true(info.arrival_ns >= t_pushed);
    assert_true(info.arrival_ns <= uh_monotonic_ns());
    return info.arrival_ns;
}

static void test_inorder_arrival_never_stale(void **state)
{
    pair p;
    uint8_t buf[RECORD_LEN + 100];
    size_t n;
    uint64_t t0, t1, t2, a0, a1;

    (void)state;
    pair_new(&p, SSL_MODE_UNORDERED);
    /* Record 0 decrypted by a call with metadata: stamped as it authenticates. */
    t0 = uh_monotonic_ns();
    push(p.tls.seg, &p, 0);
    a0 = read_arrival(&p, 0, t0);
    expect_want_read(&p);

    /* Record 1 decrypted by a call without metadata whose buffer is too
     * small (an error that consumes nothing), then read with metadata: its
     * time is not record 0's. */
    while (uh_monotonic_ns() == a0)
        ;
    t1 = uh_monotonic_ns();
    push(p.tls.seg, &p, 1);
    ERR_clear_error();
    assert_false(UTLS_read_record(p.tls.s, buf, RECORD_LEN - 1, &n, NULL));
    ERR_clear_error();
    a1 = read_arrival(&p, 1, t1);
    assert_true(a1 > a0);
    expect_want_read(&p);

    /* Record 2 peeked with SSL_peek_ex() (decrypted without metadata), then
     * read with metadata: the same. */
    while (uh_monotonic_ns() == a1)
        ;
    t2 = uh_monotonic_ns();
    push(p.tls.seg, &p, 2);
    assert_true(SSL_peek_ex(p.tls.s, buf, sizeof(buf), &n));
    assert_int_equal(n, RECORD_LEN);
    assert_true(read_arrival(&p, 2, t2) > a1);
    expect_want_read(&p);
    assert_int_equal(stats(&p).records_in_order, 3);
    pair_free(&p);
}

/* A zero-length buffer is too small for any record: UTLS_R_BUFFER_TOO_SMALL,
 * nothing consumed, on the in-order path exactly as out of order. Found by
 * fuzz_receiver (tests/fuzz/corpus/fuzz_receiver/regress-zero-length-read):
 * the in-order path returned 0 with no error, which SSL_get_error() reports
 * as SSL_ERROR_SYSCALL, while a record waiting out of order gave
 * UTLS_R_BUFFER_TOO_SMALL. */
static void expect_too_small_empty(pair *p, int use_read_ex)
{
    uint8_t buf[1];
    size_t n = 7;
    unsigned long e;

    ERR_clear_error();
    if (use_read_ex) {
        assert_false(SSL_read_ex(p->tls.s, buf, 0, &n));
    } else {
        assert_false(UTLS_read_record(p->tls.s, buf, 0, &n, NULL));
    }
    assert_int_equal(SSL_get_error(p->tls.s, 0), SSL_ERROR_SSL);
    e = ERR_peek_error();
    assert_int_equal(ERR_GET_LIB(e), UTLS_get_lib());
    assert_int_equal(ERR_GET_REASON(e), UTLS_R_BUFFER_TOO_SMALL);
    ERR_clear_error();
}

static void test_inorder_zero_length_buffer(void **state)
{
    pair p;
    uint64_t t0;

    (void)state;
    pair_new(&p, SSL_MODE_UNORDERED);
    t0 = uh_monotonic_ns();
    push(p.tls.seg, &p, 0);
    /* In order, the record not yet read into OpenSSL's buffer, then already
     * in it (the first refusal read it): both refused, nothing lost. */
    expect_too_small_empty(&p, 0);
    expect_too_small_empty(&p, 1);
    expect_record(&p, 0, 0, t0);
    /* Out of order: record 2 past the hole of record 1. */
    t0 = uh_monotonic_ns();
    push(p.tls.seg, &p, 2);
    expect_too_small_empty(&p, 0);
    expect_record(&p, 2, 1, t0);
    t0 = uh_monotonic_ns();
    push(p.tls.seg, &p, 1);
    expect_too_small_empty(&p, 1);
    expect_record(&p, 1, 0, t0);
    expect_want_read(&p);
    assert_int_equal(stats(&p).records_in_order, 2);
    assert_int_equal(stats(&p).records_out_of_order, 1);
    pair_free(&p);
}

/* A record verified past a hole and not yet read is buffered, processed
 * data: SSL_pending() counts it and SSL_has_pending() says so. Found by
 * fuzz_receiver (tests/fuzz/corpus/fuzz_receiver/regress-has-pending):
 * SSL_has_pending() returned 0 while SSL_pending() counted such a record. */
static void test_inorder_has_pending_counts_ready_records(void **state)
{
    pair p;
    uint8_t buf[RECORD_LEN + 100];
    size_t n;
    UTLS_RECORD_INFO info;

    (void)state;
    pair_new(&p, SSL_MODE_UNORDERED);
    assert_int_equal(SSL_has_pending(p.tls.s), 0);
    push(p.tls.seg, &p, 2);
    push(p.tls.seg, &p, 1);
    /* One read delivers one of the two; the other waits, verified. */
    assert_true(UTLS_read_record(p.tls.s, buf, sizeof(buf), &n, &info));
    assert_true(info.out_of_order);
    assert_int_equal(SSL_pending(p.tls.s), RECORD_LEN);
    assert_int_equal(SSL_has_pending(p.tls.s), 1);
    assert_true(UTLS_read_record(p.tls.s, buf, sizeof(buf), &n, &info));
    assert_true(info.out_of_order);
    assert_int_equal(SSL_pending(p.tls.s), 0);
    expect_want_read(&p);
    pair_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inorder_metadata_counted_once),
        cmocka_unit_test(test_inorder_idle_read_sees_next_push),
        cmocka_unit_test(test_inorder_filled_hole_goes_first),
        cmocka_unit_test(test_inorder_new_read_bio),
        cmocka_unit_test(test_inorder_arrival_never_stale),
        cmocka_unit_test(test_inorder_zero_length_buffer),
        cmocka_unit_test(test_inorder_has_pending_counts_ready_records),
    };
    return cmocka_run_group_tests_name("unordered-inorder", tests,
                                       uh_identity_setup, uh_identity_teardown);
}
