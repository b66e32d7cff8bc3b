/*
 * The chain fast path (docs/unordered.md, PERFORMANCE): past a record that
 * verified out of order, the next record's header is at its end and its
 * number is the next one, so when bytes arriving at the end of the run
 * complete that record it is verified with that one candidate, without a
 * scan. These tests drive a TLS 1.3 client into the segment BIO of a server
 * with SSL_MODE_UNORDERED, record by record, and check that the fast path
 * delivers what it should and that everything unusual falls back to the
 * general path without delivering anything twice or unauthenticated:
 *
 *   - a chain of whole records, and of records split over two segments;
 *   - a header at the chain cursor that the cipher cannot produce, and one
 *     whose length is plausible but wrong (the tag check fails softly and
 *     leaves OpenSSL's error queue clean);
 *   - a segment that overlaps the chain with different bytes (held bytes
 *     win), with genuine and with forged bytes past the chain;
 *   - a failed probe, then a genuine record copied to the next record's
 *     place (each probe sets its own nonce);
 *   - a KeyUpdate inside a chain: the records after it are under the next
 *     key and are still delivered early;
 *   - a chain that meets the hole filling, and a new hole after it;
 *   - the read after a record delivered out of order: SSL_ERROR_WANT_READ
 *     without an in-order read, but not at the end of the stream;
 *   - the read after a record read in order: the same answer without
 *     OpenSSL's record layer, but not with bytes read ahead or part of a
 *     record in OpenSSL's buffer, nor after close_notify.
 */
#include <errno.h>
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

/* Records a test writes at most (the hole, the chain, what follows). */
#define MAX_RECS 48
#define REC_PLAIN_LEN 1400

typedef struct {
    uh_seg_pair p;
    int n;
    uint8_t *wire[MAX_RECS];
    size_t wire_len[MAX_RECS];
    uint64_t off[MAX_RECS];
    uint32_t msg_index[MAX_RECS]; /* the message a record carries ... */
    int is_app[MAX_RECS];         /* ... if it is application data */
} chain;

/* take_records splits what the client wrote into records (5-byte headers)
 * and appends them to |ch|; returns the index of the first. */
static int take_records(chain *ch)
{
    uint8_t buf[65536];
    int first = ch->n, n;
    size_t at = 0;

    n = BIO_read(ch->p.c_out, buf, sizeof(buf));
    assert_true(n > 0);
    while (at < (size_t)n) {
        size_t len;

        assert_true(at + 5 <= (size_t)n);
        len = 5 + (((size_t)buf[at + 3] << 8) | buf[at + 4]);
        assert_true(at + len <= (size_t)n);
        assert_true(ch->n < MAX_RECS);
        ch->wire[ch->n] = malloc(len);
        assert_non_null(ch->wire[ch->n]);
        memcpy(ch->wire[ch->n], buf + at, len);
        ch->wire_len[ch->n] = len;
        ch->off[ch->n] = ch->p.base;
        ch->is_app[ch->n] = 0;
        ch->p.base += len;
        ch->n++;
        at += len;
    }
    assert_int_equal(BIO_pending(ch->p.c_out), 0);
    return first;
}

/* write_msg has the client send message |index| in one record; returns the
 * record's index. */
static int write_msg(chain *ch, uint32_t index)
{
    uint8_t msg[REC_PLAIN_LEN];
    int r;

    assert_true(uh_msg_build(msg, index, sizeof(msg)));
    assert_int_equal(SSL_write(ch->p.c, msg, sizeof(msg)), (int)sizeof(msg));
    r = take_records(ch);
    assert_int_equal(r, ch->n - 1);
    ch->is_app[r] = 1;
    ch->msg_index[r] = index;
    return r;
}

/* write_key_update has the client send a KeyUpdate (its own record, under
 * the old key); returns the record's index. */
static int write_key_update(chain *ch)
{
    int r;

    assert_true(SSL_key_update(ch->p.c, SSL_KEY_UPDATE_NOT_REQUESTED));
    assert_true(SSL_do_handshake(ch->p.c) == 1);
    r = take_records(ch);
    assert_int_equal(r, ch->n - 1);
    return r;
}

static void chain_new(chain *ch, int num_msgs)
{
    memset(ch, 0, sizeof(*ch));
    assert_true(uh_seg_pair_new(&ch->p, uh_key, uh_cert, SSL_MODE_UNORDERED));
    for (int i = 0; i < num_msgs; i++)
        write_msg(ch, (uint32_t)i);
}

static void chain_free(chain *ch)
{
    for (int r = 0; r < ch->n; r++)
        free(ch->wire[r]);
    uh_seg_pair_free(&ch->p);
}

static void push_bytes(chain *ch, uint64_t off, const uint8_t *data, size_t len)
{
    assert_true(UTLS_BIO_segment_push(ch->p.seg, off, data, len));
}

static void push(chain *ch, int r)
{
    push_bytes(ch, ch->off[r], ch->wire[r], ch->wire_len[r]);
}

/* read_record reads one record and checks that it is record |r|, out of
 * order as |ooo| says, under key generation |gen|. */
static void read_record(chain *ch, int r, int ooo, uint32_t gen)
{
    uint8_t buf[16384];
    size_t n;
    uint32_t index;
    UTLS_RECORD_INFO info;

    assert_true(uh_read_record(ch->p.s, "chain", r, buf, sizeof(buf), &n, &info));
    assert_true(uh_msg_check(buf, n, &index));
    assert_int_equal(index, ch->msg_index[r]);
    assert_int_equal(info.out_of_order != 0, ooo);
    assert_int_equal(info.stream_offset, ch->off[r]);
    assert_int_equal(info.wire_len, ch->wire_len[r]);
    assert_int_equal(info.key_generation, gen);
}

/* read_fails reads and expects failure with SSL_get_error |err|. For
 * SSL_ERROR_WANT_READ the error queue must be empty: soft failures out of
 * order leave nothing behind. */
static void read_fails(chain *ch, int err)
{
    uint8_t buf[16384];
    size_t n;

    assert_false(UTLS_read_record(ch->p.s, buf, sizeof(buf), &n, NULL));
    assert_int_equal(SSL_get_error(ch->p.s, 0), err);
    if (err == SSL_ERROR_WANT_READ)
        assert_int_equal(ERR_peek_error(), 0);
    ERR_clear_error();
}

static UTLS_STATS stats(chain *ch)
{
    UTLS_STATS st;

    assert_int_equal(UTLS_get_stats(ch->p.s, &st), 1);
    return st;
}

/* A hole at record 0, then records 1..N one segment each: each is
 * delivered early as soon as it is whole, with one trial decryption and no
 * failure; the hole delivers record 0 and skips the rest unread. */
static void run_chain(void **state)
{
    const int split = test_case_param(state);
    enum { N = 16 };
    chain ch;
    UTLS_STATS st;

    chain_new(&ch, N + 1);
    for (int r = 1; r <= N; r++) {
        if (split) {
            /* Each record in two segments: nothing until the second. */
            size_t half = ch.wire_len[r] / 2;

            push_bytes(&ch, ch.off[r], ch.wire[r], half);
            read_fails(&ch, SSL_ERROR_WANT_READ);
            push_bytes(&ch, ch.off[r] + half, ch.wire[r] + half, ch.wire_len[r] - half);
        } else {
            push(&ch, r);
        }
        read_record(&ch, r, 1, 0);
        read_fails(&ch, SSL_ERROR_WANT_READ);
    }
    st = stats(&ch);
    assert_int_equal(st.records_out_of_order, N);
    assert_int_equal(st.probes, N);
    assert_int_equal(st.soft_failures, 0);
    push(&ch, 0);
    read_record(&ch, 0, 0, 0);
    read_fails(&ch, SSL_ERROR_WANT_READ); /* nothing twice */
    st = stats(&ch);
    assert_int_equal(st.records_in_order, 1);
    assert_int_equal(st.records_skipped, N);
    assert_int_equal(st.decryptions_saved, N);
    chain_free(&ch);
}

/*
 * A hole inside a record longer than a segment (senders that write 4 KB or
 * 16 KB records, NSS's tstclnt among them): the in-order path has the long
 * record's header, not its end. Its header anchors the numbers past the
 * hole: the records behind it go early, also when the hole reaches into the
 * next record's header; the sizes seen so far (one short record) rank the
 * right number too far down to be tried within the probe limits.
 */
/* write_sized has the client send message |index| of |len| bytes in one
 * record; returns the record's index. */
static int write_sized(chain *ch, uint32_t index, size_t len)
{
    static uint8_t msg[UH_MSG_MAX];
    int r;

    assert_true(uh_msg_build(msg, index, len));
    assert_int_equal(SSL_write(ch->p.c, msg, (int)len), (int)len);
    r = take_records(ch);
    assert_int_equal(r, ch->n - 1);
    ch->is_app[r] = 1;
    ch->msg_index[r] = index;
    return r;
}

static void run_hole_in_long_record(void **state)
{
    const int into_next = test_case_param(state);
    /* What tstclnt sent at 2% loss when the lock-out was found: one short
     * record, one of 4000 bytes, then records of 50 to 1400 bytes. */
    static const size_t after[] = {329, 162, 972, 70, 164, 152, 1281, 1508 - 22, 930, 193, 480,
                                   331, 805, 499, 496, 159};
    chain ch;
    UTLS_STATS st;
    int lr, nx, r, first_ooo;
    size_t cut;

    memset(&ch, 0, sizeof(ch));
    assert_true(uh_seg_pair_new(&ch.p, uh_key, uh_cert, SSL_MODE_UNORDERED));
    r = write_sized(&ch, 0, 425);
    push(&ch, r);
    read_record(&ch, r, 0, 0);
    lr = write_sized(&ch, 1, 4000);
    nx = write_sized(&ch, 2, after[0]);
    for (size_t i = 1; i < sizeof(after) / sizeof(after[0]); i++)
        write_sized(&ch, (uint32_t)(2 + i), after[i]);
    /* The long record's first 1448 bytes arrive; the rest of it (and with
     * |into_next| the next record's header too) is the hole. */
    push_bytes(&ch, ch.off[lr], ch.wire[lr], 1448);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    cut = into_next ? 20 : 0;
    push_bytes(&ch, ch.off[nx] + cut, ch.wire[nx] + cut, ch.wire_len[nx] - cut);
    first_ooo = into_next ? nx + 1 : nx;
    if (!into_next)
        read_record(&ch, nx, 1, 0);
    for (r = nx + 1; r < ch.n; r++) {
        push(&ch, r);
        read_record(&ch, r, 1, 0);
    }
    read_fails(&ch, SSL_ERROR_WANT_READ);
    st = stats(&ch);
    assert_int_equal(st.records_out_of_order, (uint64_t)(ch.n - first_ooo));
    /* The hole fills: the long record in order, the rest skipped. */
    push(&ch, lr);
    if (into_next) {
        push(&ch, nx);
        read_record(&ch, lr, 0, 0);
        read_record(&ch, nx, 0, 0);
    } else {
        read_record(&ch, lr, 0, 0);
    }
    read_fails(&ch, SSL_ERROR_WANT_READ);
    chain_free(&ch);
}

/*
 * Record 3 arrives with a forged header (|how|: 0 an outer type TLS 1.3
 * never uses, 1 a length one byte short, still plausible). The chain breaks
 * there; records 4 and 5 are still found past it (the general path scans the
 * bytes) and delivered early; the forged bytes are what the stream holds, so
 * when the hole fills the in-order path fails on record 3, as stock OpenSSL
 * would over a TCP stream carrying them.
 */
static void run_forged_header(void **state)
{
    const int how = test_case_param(state);
    chain ch;
    UTLS_STATS st;
    uint8_t *w;

    chain_new(&ch, 6);
    push(&ch, 1);
    read_record(&ch, 1, 1, 0);
    push(&ch, 2);
    read_record(&ch, 2, 1, 0);
    w = ch.wire[3];
    if (how == 0) {
        w[0] = SSL3_RT_HANDSHAKE;
    } else {
        size_t len = ((size_t)w[3] << 8 | w[4]) - 1;

        w[3] = (uint8_t)(len >> 8);
        w[4] = (uint8_t)len;
    }
    push(&ch, 3);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    st = stats(&ch);
    assert_int_equal(st.records_out_of_order, 2);
    if (how == 1)
        assert_true(st.soft_failures >= 1); /* tried, failed, nothing left */
    push(&ch, 4);
    read_record(&ch, 4, 1, 0);
    push(&ch, 5);
    read_record(&ch, 5, 1, 0);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    push(&ch, 0);
    read_record(&ch, 0, 0, 0);
    read_fails(&ch, SSL_ERROR_SSL);
    st = stats(&ch);
    assert_int_equal(st.records_out_of_order, 4);
    assert_int_equal(st.records_in_order, 1);
    chain_free(&ch);
}

/*
 * A segment overlaps the end of verified record 2 with other bytes and
 * carries the start of record 3: genuine (|forge_next| 0) or forged. Held
 * bytes win, so record 2 stays as verified; record 3 is delivered early only
 * if its bytes are genuine, and record 4 is delivered early either way.
 */
static void run_overlap(void **state)
{
    const int forge_next = test_case_param(state);
    chain ch;
    UTLS_STATS st;
    uint8_t seg[400];
    size_t tail = 100, head = sizeof(seg) - 100;

    chain_new(&ch, 5);
    push(&ch, 1);
    read_record(&ch, 1, 1, 0);
    push(&ch, 2);
    read_record(&ch, 2, 1, 0);
    memset(seg, 0x5a, tail); /* not record 2's bytes */
    memcpy(seg + tail, ch.wire[3], head);
    if (forge_next)
        seg[tail + 50] ^= 0x01; /* ciphertext of record 3 */
    push_bytes(&ch, ch.off[3] - tail, seg, sizeof(seg));
    read_fails(&ch, SSL_ERROR_WANT_READ);
    push_bytes(&ch, ch.off[3] + head, ch.wire[3] + head, ch.wire_len[3] - head);
    if (!forge_next)
        read_record(&ch, 3, 1, 0);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    push(&ch, 4);
    read_record(&ch, 4, 1, 0);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    push(&ch, 0);
    read_record(&ch, 0, 0, 0);
    st = stats(&ch);
    if (forge_next) {
        /* Records 1 and 2 pass unread (their bytes are those verified);
         * record 3 is decrypted in order and fails. */
        read_fails(&ch, SSL_ERROR_SSL);
        st = stats(&ch);
        assert_int_equal(st.records_out_of_order, 3);
        assert_int_equal(st.decryptions_saved, 2);
    } else {
        read_fails(&ch, SSL_ERROR_WANT_READ);
        st = stats(&ch);
        assert_int_equal(st.records_out_of_order, 4);
        assert_int_equal(st.records_skipped, 4);
        assert_int_equal(st.decryptions_saved, 4);
    }
    chain_free(&ch);
}

/*
 * Each probe sets its own nonce (AES-GCM: the invocation field, per probe;
 * utls_probe.c). Record 3 arrives forged (one ciphertext bit), so its probe
 * as number 3 fails after the nonce for 3 was set; then a genuine copy of
 * record 3 arrives where record 4 belongs (the same length). Under a nonce
 * left over from the failed probe it would authenticate; under record 4's it
 * must not: nothing is delivered, and the error queue stays clean. A genuine
 * record 5 after it still verifies (its own nonce once more).
 */
static void test_chain_nonce_per_probe(void **state)
{
    chain ch;
    UTLS_STATS st;
    uint8_t *copy;

    (void)state;
    chain_new(&ch, 6);
    assert_int_equal(ch.wire_len[3], ch.wire_len[4]);
    push(&ch, 1);
    read_record(&ch, 1, 1, 0);
    push(&ch, 2);
    read_record(&ch, 2, 1, 0);
    copy = malloc(ch.wire_len[3]);
    assert_non_null(copy);
    memcpy(copy, ch.wire[3], ch.wire_len[3]);
    ch.wire[3][SSL3_RT_HEADER_LENGTH + 20] ^= 0x01;
    push(&ch, 3);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    st = stats(&ch);
    assert_int_equal(st.records_out_of_order, 2);
    assert_true(st.soft_failures >= 1);
    push_bytes(&ch, ch.off[4], copy, ch.wire_len[3]); /* record 3's bytes at 4's place */
    read_fails(&ch, SSL_ERROR_WANT_READ);
    st = stats(&ch);
    assert_int_equal(st.records_out_of_order, 2);
    assert_true(st.soft_failures >= 2);
    push(&ch, 5);
    read_record(&ch, 5, 1, 0);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    /* In order: record 0, records 1 and 2 passed unread, then the forged
     * record 3 fails as it would in stock OpenSSL. */
    push(&ch, 0);
    read_record(&ch, 0, 0, 0);
    read_fails(&ch, SSL_ERROR_SSL);
    st = stats(&ch);
    assert_int_equal(st.records_out_of_order, 3);
    assert_int_equal(st.decryptions_saved, 2);
    free(copy);
    chain_free(&ch);
}

/*
 * A KeyUpdate inside a chain: records 1 and 2 under the first key, the
 * KeyUpdate (a handshake record, processed only in order), then records
 * under the next key. Those are delivered early too, as key generation 1,
 * and once the hole fills nothing is delivered twice.
 */
static void test_chain_key_update_inside(void **state)
{
    chain ch;
    UTLS_STATS st;
    int ku, a, b, c;

    (void)state;
    chain_new(&ch, 3);
    ku = write_key_update(&ch);
    a = write_msg(&ch, 100);
    b = write_msg(&ch, 101);
    c = write_msg(&ch, 102);
    push(&ch, 1);
    read_record(&ch, 1, 1, 0);
    push(&ch, 2);
    read_record(&ch, 2, 1, 0);
    push(&ch, ku);
    read_fails(&ch, SSL_ERROR_WANT_READ); /* nothing to deliver */
    push(&ch, a);
    read_record(&ch, a, 1, 1);
    push(&ch, b);
    read_record(&ch, b, 1, 1);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    push(&ch, 0);
    read_record(&ch, 0, 0, 0);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    push(&ch, c);
    read_record(&ch, c, 0, 1); /* in order now, under the new key */
    read_fails(&ch, SSL_ERROR_WANT_READ);
    st = stats(&ch);
    assert_int_equal(st.records_out_of_order, 4);
    assert_int_equal(st.records_in_order, 2);
    assert_int_equal(st.records_skipped, 4);
    chain_free(&ch);
}

/*
 * The hole fills while the record at the chain cursor is half there: the
 * in-order path passes the chain and delivers that record itself, once. A
 * new hole after it starts a new chain.
 */
static void test_chain_meets_hole_filling(void **state)
{
    chain ch;
    UTLS_STATS st;
    size_t half;

    (void)state;
    chain_new(&ch, 9);
    push(&ch, 1);
    read_record(&ch, 1, 1, 0);
    push(&ch, 2);
    read_record(&ch, 2, 1, 0);
    half = ch.wire_len[3] / 2;
    push_bytes(&ch, ch.off[3], ch.wire[3], half);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    push(&ch, 0);
    read_record(&ch, 0, 0, 0);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    push_bytes(&ch, ch.off[3] + half, ch.wire[3] + half, ch.wire_len[3] - half);
    read_record(&ch, 3, 0, 0);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    /* A new hole at record 4. */
    for (int r = 5; r < 9; r++) {
        push(&ch, r);
        read_record(&ch, r, 1, 0);
    }
    read_fails(&ch, SSL_ERROR_WANT_READ);
    push(&ch, 4);
    read_record(&ch, 4, 0, 0);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    st = stats(&ch);
    assert_int_equal(st.records_out_of_order, 6);
    assert_int_equal(st.records_in_order, 3);
    assert_int_equal(st.records_skipped, 6);
    assert_int_equal(st.soft_failures, 0);
    chain_free(&ch);
}

/* read_fails_at_end reads and expects the failure of stock OpenSSL at an
 * unexpected end of stream, not SSL_ERROR_WANT_READ. */
static void read_fails_at_end(chain *ch)
{
    uint8_t buf[16384];
    size_t n;
    int err;

    assert_false(UTLS_read_record(ch->p.s, buf, sizeof(buf), &n, NULL));
    err = SSL_get_error(ch->p.s, 0);
    assert_true(err == SSL_ERROR_SSL || err == SSL_ERROR_SYSCALL);
    ERR_clear_error();
}

/*
 * After a record delivered out of order (or a read that found nothing) the
 * next read reports SSL_ERROR_WANT_READ without an in-order read attempt
 * while nothing can be read in order, with the BIO's retry flag set as
 * BIO_read() would set it. The end of the stream is not "nothing": once the
 * in-order stream reaches it, the read fails as stock OpenSSL's does.
 */
static void test_chain_end_of_stream_after_chain(void **state)
{
    chain ch;

    (void)state;
    chain_new(&ch, 3);
    push(&ch, 1);
    read_record(&ch, 1, 1, 0);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    assert_true(BIO_should_read(ch.p.seg));
    assert_int_equal(UTLS_BIO_segment_push_eof(ch.p.seg, ch.off[2]), 1);
    read_fails(&ch, SSL_ERROR_WANT_READ); /* record 0 is still missing */
    push(&ch, 0);
    read_record(&ch, 0, 0, 0);
    read_fails_at_end(&ch);
    chain_free(&ch);

    /* The end of the stream arriving while the reader waits. */
    chain_new(&ch, 2);
    push(&ch, 0);
    read_record(&ch, 0, 0, 0);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    assert_int_equal(UTLS_BIO_segment_push_eof(ch.p.seg, ch.off[1]), 1);
    read_fails_at_end(&ch);
    chain_free(&ch);
}

/*
 * UTLS_read_record() answers a read that can only fail with
 * SSL_ERROR_WANT_READ without passing through OpenSSL's record layer
 * (docs/unordered.md, PERFORMANCE). It must answer exactly as the full read
 * would, and only then: not while OpenSSL holds bytes read ahead or part of
 * a record, and not after close_notify.
 */
static void test_chain_nothing_to_read_in_order(void **state)
{
    chain ch;
    uint8_t both[2 * (REC_PLAIN_LEN + 64)];

    (void)state;
    /* In order: the read after each record fails as BIO_read() would have. */
    chain_new(&ch, 2);
    push(&ch, 0);
    read_record(&ch, 0, 0, 0);
    errno = EINTR;
    read_fails(&ch, SSL_ERROR_WANT_READ);
    assert_int_equal(errno, 0); /* cleared, as ssl3_read_internal() does */
    assert_true(BIO_should_read(ch.p.seg));
    assert_true(BIO_should_retry(ch.p.seg));
    push(&ch, 1);
    read_record(&ch, 1, 0, 0);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    chain_free(&ch);

    /* Read-ahead: both records leave the BIO with the first read; the
     * second is in OpenSSL's buffer, not "nothing". */
    chain_new(&ch, 2);
    SSL_set_read_ahead(ch.p.s, 1);
    assert_true(ch.wire_len[0] + ch.wire_len[1] <= sizeof(both));
    memcpy(both, ch.wire[0], ch.wire_len[0]);
    memcpy(both + ch.wire_len[0], ch.wire[1], ch.wire_len[1]);
    push_bytes(&ch, ch.off[0], both, ch.wire_len[0] + ch.wire_len[1]);
    read_record(&ch, 0, 0, 0);
    assert_int_equal(BIO_pending(ch.p.seg), 0);
    read_record(&ch, 1, 0, 0);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    chain_free(&ch);

    /* Part of a header, then the rest: OpenSSL keeps the part. */
    chain_new(&ch, 1);
    push_bytes(&ch, ch.off[0], ch.wire[0], 3);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    push_bytes(&ch, ch.off[0] + 3, ch.wire[0] + 3, ch.wire_len[0] - 3);
    read_record(&ch, 0, 0, 0);
    read_fails(&ch, SSL_ERROR_WANT_READ);
    chain_free(&ch);

    /* close_notify: every later read reports it, never SSL_ERROR_WANT_READ. */
    chain_new(&ch, 1);
    assert_true(SSL_shutdown(ch.p.c) >= 0);
    take_records(&ch);
    push(&ch, 0);
    push(&ch, 1);
    read_record(&ch, 0, 0, 0);
    read_fails(&ch, SSL_ERROR_ZERO_RETURN);
    read_fails(&ch, SSL_ERROR_ZERO_RETURN);
    chain_free(&ch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST_CASE(test_chain_whole_records, run_chain, &test_case_no),
        TEST_CASE(test_chain_split_records, run_chain, &test_case_yes),
        TEST_CASE(test_chain_forged_type_at_cursor, run_forged_header, &test_case_no),
        TEST_CASE(test_chain_forged_length_at_cursor, run_forged_header, &test_case_yes),
        TEST_CASE(test_chain_overlap_genuine_next, run_overlap, &test_case_no),
        TEST_CASE(test_chain_overlap_forged_next, run_overlap, &test_case_yes),
        cmocka_unit_test(test_chain_nonce_per_probe),
        cmocka_unit_test(test_chain_key_update_inside),
        cmocka_unit_test(test_chain_meets_hole_filling),
        cmocka_unit_test(test_chain_end_of_stream_after_chain),
        cmocka_unit_test(test_chain_nothing_to_read_in_order),
        TEST_CASE(test_chain_hole_inside_long_record, run_hole_in_long_record, &test_case_no),
        TEST_CASE(test_chain_hole_into_next_header, run_hole_in_long_record, &test_case_yes),
    };

    return cmocka_run_group_tests_name("chain", tests, uh_identity_setup, uh_identity_teardown);
}
