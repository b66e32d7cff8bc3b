/*
 * SSL_MODE_UNORDERED_PARTIAL: records larger than the read buffer come back
 * in parts, each record's parts contiguous and before any other record, out
 * of order between records, every byte exactly once; SSL_pending() counts
 * what is held. Without the flag the same read fails with
 * UTLS_R_BUFFER_TOO_SMALL and consumes nothing. The "unordered" word of
 * UTLS_MODE sets the flag (programs that read in small chunks).
 *
 * Three records A B C are written; B and C reach the receiver first (A is
 * the hole), then A.
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

static const size_t rec_len[3] = { 1000, 3000, 2000 };

typedef struct {
    uh_seg_pair tls; /* client, server, segment BIO, next offset */
    uint8_t *wire[3]; /* each record's bytes, as written */
    size_t wire_len[3];
    uint64_t wire_off[3];
    uint8_t plain[3][3000];
} pair;

static void pair_new(pair *p, uint64_t mode)
{
    memset(p, 0, sizeof(*p));
    assert_true(uh_seg_pair_new(&p->tls, uh_key, uh_cert, mode));
    for (int r = 0; r < 3; r++) {
        for (size_t i = 0; i < rec_len[r]; i++)
            p->plain[r][i] = (uint8_t)(r * 61 + i * 7 + 1);
        assert_true(uh_pair_write_record(&p->tls, p->plain[r], rec_len[r], &p->wire[r],
                                         &p->wire_len[r], &p->wire_off[r]));
        assert_true(p->wire_len[r] > rec_len[r]);
    }
}

static void pair_free(pair *p)
{
    for (int r = 0; r < 3; r++)
        free(p->wire[r]);
    uh_seg_pair_free(&p->tls);
}

static void push(pair *p, int r)
{
    assert_true(UTLS_BIO_segment_push(p->tls.seg, p->wire_off[r], p->wire[r], p->wire_len[r]));
}

/* Reads record |r| in |chunk|-byte parts; every part must be the next bytes
 * of it, with the metadata of it; SSL_pending() the rest. */
static void read_in_parts(pair *p, int r, size_t chunk, int out_of_order)
{
    uint8_t buf[3000];
    size_t got = 0, n;
    UTLS_RECORD_INFO info;

    while (got < rec_len[r]) {
        size_t want = rec_len[r] - got < chunk ? rec_len[r] - got : chunk;

        ERR_clear_error();
        if (!UTLS_read_record(p->tls.s, buf, chunk, &n, &info)) {
            uh_errors_to_stderr("partial");
            fail_msg("record %d: read failed after %zu of %zu bytes (SSL_get_error %d)", r, got,
                     rec_len[r], SSL_get_error(p->tls.s, 0));
        }
        assert_int_equal(n, want);
        assert_memory_equal(buf, p->plain[r] + got, n);
        assert_int_equal(info.out_of_order != 0, out_of_order);
        assert_int_equal(info.stream_offset, p->wire_off[r]);
        got += n;
        if (out_of_order) /* held by uTLS: counted by SSL_pending() */
            assert_true(SSL_pending(p->tls.s) >= (int)(rec_len[r] - got));
    }
}

static void expect_want_read(pair *p)
{
    assert_true(uh_read_wants_read(p->tls.s));
}

static void test_partial_reads(void **state)
{
    pair p;
    UTLS_STATS st;
    uint8_t peekbuf[100];
    size_t n;

    (void)state;
    pair_new(&p, SSL_MODE_UNORDERED | SSL_MODE_UNORDERED_PARTIAL);
    push(&p, 1);
    push(&p, 2);
    /* A peek at B's first part consumes nothing. */
    assert_true(SSL_peek_ex(p.tls.s, peekbuf, sizeof(peekbuf), &n));
    assert_int_equal(n, sizeof(peekbuf));
    assert_memory_equal(peekbuf, p.plain[1], n);
    assert_int_equal(SSL_pending(p.tls.s), (int)(rec_len[1] + rec_len[2]));
    read_in_parts(&p, 1, 512, 1); /* B: 6 parts */
    read_in_parts(&p, 2, 700, 1); /* C: 3 parts */
    expect_want_read(&p);
    assert_int_equal(SSL_pending(p.tls.s), 0);
    push(&p, 0);
    read_in_parts(&p, 0, 300, 0); /* A, in order: 4 parts */
    /* B and C were delivered already: nothing more. */
    expect_want_read(&p);
    assert_int_equal(UTLS_get_stats(p.tls.s, &st), 1);
    assert_int_equal(st.records_out_of_order, 2);
    assert_int_equal(st.records_in_order, 1);
    pair_free(&p);
}

static void test_whole_records_without_flag(void **state)
{
    pair p;
    uint8_t buf[3000];
    size_t n;
    UTLS_RECORD_INFO info;
    unsigned long e;

    (void)state;
    pair_new(&p, SSL_MODE_UNORDERED);
    push(&p, 1);
    ERR_clear_error();
    assert_false(UTLS_read_record(p.tls.s, buf, 512, &n, &info));
    e = ERR_peek_error();
    assert_int_equal(ERR_GET_LIB(e), UTLS_get_lib());
    assert_int_equal(ERR_GET_REASON(e), UTLS_R_BUFFER_TOO_SMALL);
    ERR_clear_error();
    /* Nothing was consumed: a buffer that fits gets the whole record. */
    assert_true(UTLS_read_record(p.tls.s, buf, sizeof(buf), &n, &info));
    assert_int_equal(n, rec_len[1]);
    assert_memory_equal(buf, p.plain[1], n);
    assert_true(info.out_of_order);
    pair_free(&p);
}

static void test_env_word_sets_partial(void **state)
{
    SSL_CTX *ctx;
    SSL *s;

    (void)state;
    /* UTLS_MODE is read when an SSL_CTX is made (lib/glue/conf.c). */
    setenv("UTLS_MODE", "unordered,all", 1);
    ctx = SSL_CTX_new(TLS_server_method());
    unsetenv("UTLS_MODE");
    assert_non_null(ctx);
    s = SSL_new(ctx);
    assert_non_null(s);
    assert_true((SSL_get_mode(s) & SSL_MODE_UNORDERED) != 0);
    assert_true((SSL_get_mode(s) & SSL_MODE_UNORDERED_PARTIAL) != 0);
    SSL_free(s);
    SSL_CTX_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partial_reads),
        cmocka_unit_test(test_whole_records_without_flag),
        cmocka_unit_test(test_env_word_sets_partial),
    };
    return cmocka_run_group_tests_name("unordered-partial", tests,
                                       uh_identity_setup, uh_identity_teardown);
}
