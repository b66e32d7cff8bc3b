/*
 * One store (docs/unordered.md, PERFORMANCE): with the segment BIO the SSL
 * reads fragments past a hole from the BIO's own store, and a record it
 * verified out of order is skipped unread when the in-order stream reaches
 * it. That is sound only because a byte of the BIO's stream keeps the value
 * it first arrived with, and because anything that could break that (an
 * eviction) moves the store's epoch. These tests check both halves:
 *
 *   - held bytes win over a later straddling segment in the in-order stream;
 *   - records verified early are skipped without a decryption, exactly once;
 *   - a verified record evicted from the store and replaced by a forged copy
 *     is not skipped: the in-order path decrypts it and fails as stock
 *     OpenSSL would; replaced by an identical copy it authenticates and is
 *     still not delivered twice;
 *   - the receive window counts from the read point: a push that returned 1
 *     never loses a byte.
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

#include "test_case.h"
#include "uharness.h"

/* The segment BIO's bound on runs held past a hole (UTLS_SEG_MAX_RUNS in
 * lib/bio/segstore_local.h): one more and the farthest run is evicted. */
#define SEG_MAX_RUNS 65536

/* Record 0 is the hole; records 1..NUM_MIDDLE fill the middle; the last one
 * arrives first and is delivered out of order. The middle holds more than
 * 2 * SEG_MAX_RUNS bytes, so that every other byte of it makes that many
 * runs. */
#define NUM_MIDDLE 9
#define NUM_RECORDS (NUM_MIDDLE + 2)
#define MIDDLE_LEN 16000
#define MAX_LEN 16384

typedef struct {
    uh_seg_pair sp; /* the client, the server on its segment BIO */
    size_t len[NUM_RECORDS];
    uint8_t *wire[NUM_RECORDS];
    size_t wire_len[NUM_RECORDS];
    uint64_t wire_off[NUM_RECORDS];
    uint8_t *plain[NUM_RECORDS];
} pair;

static void pair_new(pair *p)
{
    memset(p, 0, sizeof(*p));
    assert_true(uh_seg_pair_new(&p->sp, uh_key, uh_cert, SSL_MODE_UNORDERED));
    for (int r = 0; r < NUM_RECORDS; r++) {
        p->len[r] = r == 0 ? 1000 : r == NUM_RECORDS - 1 ? 2000 : MIDDLE_LEN;
        p->plain[r] = malloc(p->len[r]);
        assert_non_null(p->plain[r]);
        for (size_t i = 0; i < p->len[r]; i++)
            p->plain[r][i] = (uint8_t)(r * 61 + i * 7 + 1);
        assert_true(uh_pair_write_record(&p->sp, p->plain[r], p->len[r], &p->wire[r],
                                         &p->wire_len[r], &p->wire_off[r]));
        assert_true(p->wire_len[r] > p->len[r]);
    }
}

static void pair_free(pair *p)
{
    for (int r = 0; r < NUM_RECORDS; r++) {
        free(p->wire[r]);
        free(p->plain[r]);
    }
    uh_seg_pair_free(&p->sp);
}

static void push(pair *p, int r)
{
    assert_true(UTLS_BIO_segment_push(p->sp.seg, p->wire_off[r], p->wire[r], p->wire_len[r]));
}

/* read_record reads one record and checks it is record |r| (in or out of
 * order as |out_of_order| says). */
static void read_record(pair *p, int r, int out_of_order)
{
    uint8_t buf[MAX_LEN];
    size_t n;
    UTLS_RECORD_INFO info;

    assert_true(uh_read_record(p->sp.s, "onestore", r, buf, sizeof(buf), &n, &info));
    assert_int_equal(n, p->len[r]);
    assert_memory_equal(buf, p->plain[r], n);
    assert_int_equal(info.out_of_order != 0, out_of_order);
    assert_int_equal(info.stream_offset, p->wire_off[r]);
}

/* read_fails reads and expects failure with SSL_get_error |err|. */
static void read_fails(pair *p, int err)
{
    uint8_t buf[MAX_LEN];
    size_t n;

    ERR_clear_error();
    assert_false(UTLS_read_record(p->sp.s, buf, sizeof(buf), &n, NULL));
    assert_int_equal(SSL_get_error(p->sp.s, 0), err);
    ERR_clear_error();
}

static void test_onestore_held_bytes_win(void **state)
{
    BIO *b = BIO_new(UTLS_BIO_s_segment());
    uint8_t data[40], forged[40], out[64];

    (void)state;
    assert_non_null(b);
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i + 1);
    memcpy(forged, data, sizeof(forged));
    memset(forged + 18, 0xee, 22);
    /* Bytes 20..40 are held past the hole; a segment from 0 that reaches
     * into them with other values: the held ones are the stream. */
    assert_int_equal(UTLS_BIO_segment_push(b, 20, data + 20, 20), 1);
    assert_int_equal(UTLS_BIO_segment_push(b, 0, forged, 40), 1);
    assert_int_equal(BIO_read(b, out, sizeof(out)), 40);
    assert_memory_equal(out, forged, 20);      /* new bytes below the held ones */
    assert_memory_equal(out + 20, data + 20, 20);
    /* Straddling the in-order end and reaching past the held run: the bytes
     * beyond it are new and kept too. */
    assert_int_equal(UTLS_BIO_segment_push(b, 50, data, 5), 1);
    memset(forged, 0xaa, sizeof(forged));
    assert_int_equal(UTLS_BIO_segment_push(b, 40, forged, 20), 1);
    assert_int_equal(BIO_read(b, out, sizeof(out)), 20);
    assert_memory_equal(out, forged, 10);
    assert_memory_equal(out + 10, data, 5);
    assert_memory_equal(out + 15, forged + 15, 5);
    BIO_free(b);
}

static void test_onestore_skips_verified_records(void **state)
{
    pair p;
    UTLS_STATS st;

    (void)state;
    pair_new(&p);
    for (int r = 1; r < NUM_RECORDS; r++)
        push(&p, r);
    for (int r = 1; r < NUM_RECORDS; r++)
        read_record(&p, r, 1);
    read_fails(&p, SSL_ERROR_WANT_READ);
    push(&p, 0);
    read_record(&p, 0, 0);
    read_fails(&p, SSL_ERROR_WANT_READ); /* nothing twice */
    assert_int_equal(UTLS_get_stats(p.sp.s, &st), 1);
    assert_int_equal(st.records_out_of_order, NUM_RECORDS - 1);
    assert_int_equal(st.records_in_order, 1);
    assert_int_equal(st.records_skipped, NUM_RECORDS - 1);
    /* Every early record was passed in order without a decryption, and
     * without its body being read (utls_hook_skip_body). */
    assert_int_equal(st.decryptions_saved, NUM_RECORDS - 1);
    assert_int_equal(st.bodies_skipped, NUM_RECORDS - 1);
    pair_free(&p);
}

/* evict_last pushes every other byte of the middle records, SEG_MAX_RUNS
 * runs: with the last record's run that is one too many, and the farthest
 * run (the last record) is evicted. Then the middle is completed. */
static void evict_last(pair *p)
{
    uint64_t start = p->wire_off[1], end = p->wire_off[NUM_RECORDS - 1];
    size_t k;

    assert_true(end - start >= 2 * (uint64_t)SEG_MAX_RUNS);
    for (k = 0; k < SEG_MAX_RUNS; k++) {
        uint64_t off = start + 2 * k;
        int r = 1 + (int)((off - start) / p->wire_len[1]);

        assert_true(UTLS_BIO_segment_push(p->sp.seg, off, p->wire[r] + (off - p->wire_off[r]), 1));
    }
    for (int r = 1; r < NUM_RECORDS - 1; r++)
        push(p, r);
}

static void run_evicted(void **state)
{
    const int forge = test_case_param(state);
    pair p;
    int last = NUM_RECORDS - 1;
    UTLS_STATS st;

    pair_new(&p);
    push(&p, last);
    read_record(&p, last, 1); /* verified and delivered early */
    read_fails(&p, SSL_ERROR_WANT_READ);
    evict_last(&p);
    if (forge)
        p.wire[last][p.wire_len[last] - 20] ^= 0x01; /* ciphertext, same length */
    push(&p, last);
    /* The middle records are complete past the hole now: delivered early.
     * The copy of the last one is not delivered again. */
    for (int r = 1; r < last; r++)
        read_record(&p, r, 1);
    read_fails(&p, SSL_ERROR_WANT_READ);
    push(&p, 0);
    read_record(&p, 0, 0);
    if (forge) {
        /* The middle ones are passed unread; the last one is decrypted in
         * order, as stock OpenSSL would, and fails: bad_record_mac. */
        read_fails(&p, SSL_ERROR_SSL);
        assert_int_equal(UTLS_get_stats(p.sp.s, &st), 1);
        assert_int_equal(st.records_out_of_order, last);
        assert_int_equal(st.decryptions_saved, NUM_MIDDLE);
        assert_int_equal(st.bodies_skipped, NUM_MIDDLE);
    } else {
        /* It authenticates in order, and is skipped: delivered once. */
        read_fails(&p, SSL_ERROR_WANT_READ);
        assert_int_equal(UTLS_get_stats(p.sp.s, &st), 1);
        assert_int_equal(st.records_out_of_order, last);
        assert_int_equal(st.records_skipped, last);
        assert_int_equal(st.decryptions_saved, NUM_MIDDLE); /* the last: decrypted */
        assert_int_equal(st.bodies_skipped, NUM_MIDDLE);
    }
    pair_free(&p);
}

/* The receive window counts from the read point (docs/segment-bio.md,
 * BOUNDS): a segment that ends past it is refused whole, so that a push that
 * returned 1 never loses a byte. Found by fuzz_receiver
 * (tests/fuzz/corpus/fuzz_receiver/regress-window-read-point): the push
 * counted the window from the end of the in-order bytes, accepted a segment
 * past a hole that reached beyond read point + window, and the store dropped
 * that part silently; a forged copy pushed later then won in the in-order
 * stream over genuine bytes that had been accepted first. */
static void test_onestore_window_counts_from_read_point(void **state)
{
    enum { WINDOW = 4096, HOLE = 3000, HELD = 3500, END = 5000 };
    static uint8_t genuine[END], forged[END], out[END];
    BIO *seg = BIO_new(UTLS_BIO_s_segment());
    unsigned long e;

    (void)state;
    assert_non_null(seg);
    for (size_t i = 0; i < END; i++) {
        genuine[i] = (uint8_t)(i * 7 + 1);
        forged[i] = (uint8_t)~genuine[i];
    }
    assert_int_equal(UTLS_BIO_segment_set_window(seg, WINDOW), 1);
    /* In order and unread: the read point stays at 0. */
    assert_int_equal(UTLS_BIO_segment_push(seg, 0, genuine, HOLE), 1);
    /* Past a hole, ending END bytes past the read point: refused whole. */
    ERR_clear_error();
    assert_int_equal(UTLS_BIO_segment_push(seg, HELD, genuine + HELD, END - HELD), 0);
    e = ERR_peek_error();
    assert_int_equal(ERR_GET_LIB(e), UTLS_get_lib());
    assert_int_equal(ERR_GET_REASON(e), UTLS_R_OUTSIDE_WINDOW);
    ERR_clear_error();
    /* Read: the window moves on, and the same segment fits. */
    assert_int_equal(BIO_read(seg, out, HOLE), HOLE);
    assert_int_equal(UTLS_BIO_segment_push(seg, HELD, genuine + HELD, END - HELD), 1);
    /* A conflicting copy of everything: the first copy of every byte it
     * accepted wins. */
    assert_int_equal(UTLS_BIO_segment_push(seg, HOLE, forged + HOLE, END - HOLE), 1);
    assert_int_equal(BIO_read(seg, out + HOLE, END - HOLE), END - HOLE);
    assert_memory_equal(out + HELD, genuine + HELD, END - HELD);
    assert_memory_equal(out + HOLE, forged + HOLE, HELD - HOLE);
    BIO_free(seg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_onestore_held_bytes_win),
        cmocka_unit_test(test_onestore_skips_verified_records),
        TEST_CASE(test_onestore_evicted_then_forged, run_evicted, &test_case_yes),
        TEST_CASE(test_onestore_evicted_then_identical, run_evicted, &test_case_no),
        cmocka_unit_test(test_onestore_window_counts_from_read_point),
    };
    return cmocka_run_group_tests_name("unordered-onestore", tests,
                                       uh_identity_setup, uh_identity_teardown);
}
