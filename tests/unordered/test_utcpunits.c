/*
 * The uTCP BIO's units (docs/segment-bio.md) through the in-process harness:
 * the server reads UTLS_BIO_f_utcp() over an in-memory unit queue
 * (uh_BIO_s_units). Malformed units are skipped without a trace on the error
 * queue: found by fuzz_receiver (tests/fuzz/corpus/fuzz_receiver/
 * regress-utcp-short-unit), a unit shorter than its 5-byte header left
 * UTLS_R_BAD_UTCP_UNIT queued, so that SSL_get_error() reported the read that
 * should have retried as SSL_ERROR_SSL.
 *
 * Records 0, 1, 2 are written by the client; record 1 pushed first is past
 * the hole of record 0.
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
#define RECORD_LEN 700

typedef struct {
    uh_seg_pair tls;
    uint8_t wire[NUM_RECORDS][RECORD_LEN + 64];
    size_t wire_len[NUM_RECORDS];
    uint64_t wire_off[NUM_RECORDS];
} pair;

static void pair_new(pair *p)
{
    uh_pair_opts o;
    uint8_t msg[RECORD_LEN];

    memset(p, 0, sizeof(*p));
    memset(&o, 0, sizeof(o));
    o.server_mode = SSL_MODE_UNORDERED;
    o.utcp = 1;
    assert_true(uh_seg_pair_new_opts(&p->tls, uh_key, uh_cert, &o));
    for (uint32_t r = 0; r < NUM_RECORDS; r++) {
        assert_true(uh_msg_build(msg, r, RECORD_LEN));
        assert_int_equal(SSL_write(p->tls.c, msg, RECORD_LEN), RECORD_LEN);
        int n = BIO_read(p->tls.c_out, p->wire[r], (int)sizeof(p->wire[r]));
        assert_true(n > RECORD_LEN);
        p->wire_len[r] = (size_t)n;
        p->wire_off[r] = p->tls.base;
        p->tls.base += (uint64_t)n;
    }
}

static void push(pair *p, int r)
{
    assert_true(uh_pair_push(&p->tls, p->wire_off[r], p->wire[r], p->wire_len[r]));
}

/* Reads one record: message |r|, in or out of order as said. */
static void expect_record(pair *p, uint32_t r, int out_of_order)
{
    uint8_t buf[SSL3_RT_MAX_PLAIN_LENGTH];
    size_t n = 0;
    uint32_t index;
    UTLS_RECORD_INFO info;

    assert_true(uh_read_record(p->tls.s, "utcpunits", r, buf, sizeof(buf), &n, &info));
    assert_true(uh_msg_check(buf, n, &index));
    assert_int_equal(index, r);
    assert_int_equal(info.out_of_order != 0, out_of_order);
    assert_int_equal(info.stream_offset, p->wire_off[r]);
}

/* A read with nothing to deliver retries: SSL_ERROR_WANT_READ, nothing
 * queued. */
static void expect_want_read(pair *p)
{
    uint8_t buf[SSL3_RT_MAX_PLAIN_LENGTH];
    size_t n;

    ERR_clear_error();
    assert_false(UTLS_read_record(p->tls.s, buf, sizeof(buf), &n, NULL));
    assert_int_equal(SSL_get_error(p->tls.s, 0), SSL_ERROR_WANT_READ);
    assert_int_equal(ERR_peek_error(), 0);
}

static void test_utcpunits_short_unit_skipped_quietly(void **state)
{
    pair p;
    const uint8_t junk[4] = {0, 0, 0, 0};

    (void)state;
    pair_new(&p);
    push(&p, 1);
    for (size_t len = 1; len < 5; len++) {
        assert_true(uh_units_push(p.tls.units, junk, len));
    }
    expect_record(&p, 1, 1);
    /* Short units only: nothing to deliver, and no error. */
    assert_true(uh_units_push(p.tls.units, junk, 2));
    expect_want_read(&p);
    assert_true(uh_units_push(p.tls.units, junk, 4));
    push(&p, 0);
    assert_true(uh_units_push(p.tls.units, junk, 1));
    expect_record(&p, 0, 0);
    push(&p, 2);
    expect_record(&p, 2, 0);
    expect_want_read(&p);
    uh_seg_pair_free(&p.tls);
}

/* A unit with UTLS_UTCP_FLAG_EOF ends the stream at its offset: everything
 * before it is still delivered, then end of file (no close_notify was sent:
 * SSL_R_UNEXPECTED_EOF_WHILE_READING, as stock OpenSSL reports it). */
static void test_utcpunits_eof_unit(void **state)
{
    pair p;
    uint8_t unit[5];
    uint8_t buf[SSL3_RT_MAX_PLAIN_LENGTH];
    size_t n;
    uint64_t end;

    (void)state;
    pair_new(&p);
    end = p.wire_off[2] + p.wire_len[2];
    unit[0] = UTLS_UTCP_FLAG_EOF;
    unit[1] = (uint8_t)(end >> 24);
    unit[2] = (uint8_t)(end >> 16);
    unit[3] = (uint8_t)(end >> 8);
    unit[4] = (uint8_t)end;
    push(&p, 2);
    push(&p, 1);
    assert_true(uh_units_push(p.tls.units, unit, sizeof(unit)));
    expect_record(&p, 2, 1);
    expect_record(&p, 1, 1);
    push(&p, 0);
    expect_record(&p, 0, 0);
    ERR_clear_error();
    assert_false(UTLS_read_record(p.tls.s, buf, sizeof(buf), &n, NULL));
    assert_int_equal(SSL_get_error(p.tls.s, 0), SSL_ERROR_SSL);
    assert_int_equal(ERR_GET_REASON(ERR_peek_last_error()), SSL_R_UNEXPECTED_EOF_WHILE_READING);
    ERR_clear_error();
    uh_seg_pair_free(&p.tls);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utcpunits_short_unit_skipped_quietly),
        cmocka_unit_test(test_utcpunits_eof_unit),
    };
    return cmocka_run_group_tests_name("unordered-utcpunits", tests, uh_identity_setup,
                                       uh_identity_teardown);
}
