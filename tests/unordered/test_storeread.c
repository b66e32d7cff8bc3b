/*
 * Store-backed in-order bytes and skipped bodies (docs/unordered.md,
 * PERFORMANCE). When a hole fills, the segment BIO does not copy the run held
 * past it into its in-order buffer: BIO_read() returns those bytes straight
 * from the store. And a record the SSL already delivered out of order is
 * skipped once its header is parsed, its body passed unread
 * (UTLS_BIO_CTRL_DISCARD), when the store is shared and its epoch unchanged.
 * These tests check that nothing is lost, duplicated, reordered or changed:
 *
 *   - a run held past a hole that fills, read with BIO_read() in pieces of
 *     odd sizes, with in-order segments arriving after the fill, a second
 *     hole inside, and forged retransmissions over received and held bytes;
 *   - the receive window while the stream goes on in the store: in-order
 *     bytes past it and an insert that must evict move the in-order bytes
 *     out of the store first (the spill), and still every byte arrives once;
 *   - the discard control: refused unless at the read point with every byte
 *     here, and then exact across the buffer / store boundary;
 *   - with SSL: records delivered out of order are skipped unread
 *     (bodies_skipped), in-order records around and after them (held in the
 *     store or not) are read whole, a tampered retransmission of a delivered
 *     record's bytes changes nothing, forged bytes that arrived first are
 *     never skipped (the in-order path fails on them as stock OpenSSL would),
 *     read-ahead and an eviction force the full read + decrypt path; the
 *     same over TLS 1.2 AES-GCM and over the uTCP BIO.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

#include "uharness.h"

/* BIO controls of the fragment sources (lib/bio/utls_bio.h, internal to libssl). */
#define CTRL_READ_OFFSET 0x7575
#define CTRL_DISCARD 0x7579
typedef struct {
    uint64_t offset;
    size_t len;
} discard_arg; /* utls_bio_discard */

static long discard(BIO *b, uint64_t offset, size_t len)
{
    discard_arg d = {offset, len};

    return BIO_ctrl(b, CTRL_DISCARD, 0, &d);
}

/* --- Raw segment BIO -------------------------------------------------------- */

#define STREAM_LEN 8000

/* The byte at stream offset |i|: not periodic over any small length, so a
 * byte out of place is seen. */
static uint8_t stream_byte(uint64_t i)
{
    return (uint8_t)((i * 131u) ^ (i >> 7) ^ 0x5a);
}

static uint8_t g_stream[STREAM_LEN];

static void stream_init(void)
{
    for (size_t i = 0; i < STREAM_LEN; i++)
        g_stream[i] = stream_byte(i);
}

static void push_ok(BIO *b, uint64_t off, size_t len)
{
    assert_true(off + len <= STREAM_LEN);
    assert_int_equal(UTLS_BIO_segment_push(b, off, g_stream + off, len), 1);
}

/* push_garbage pushes |len| bytes at |off| that differ from the stream's. */
static void push_garbage(BIO *b, uint64_t off, size_t len)
{
    uint8_t buf[STREAM_LEN];

    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)~g_stream[off + i];
    assert_int_equal(UTLS_BIO_segment_push(b, off, buf, len), 1);
}

static uint64_t read_offset(BIO *b)
{
    uint64_t off = UINT64_MAX;

    assert_int_equal(BIO_ctrl(b, CTRL_READ_OFFSET, 0, &off), 1);
    return off;
}

/* read_to reads from |*pos| up to |end| in pieces of the odd sizes in
 * |sizes| (cycled; a piece may come back shorter), checking every byte
 * against the stream and the read offset after each piece. */
static void read_to(BIO *b, uint64_t *pos, uint64_t end, const int *sizes, size_t num_sizes)
{
    uint8_t buf[STREAM_LEN];
    size_t k = 0;

    assert_true((uint64_t)BIO_pending(b) >= end - *pos);
    while (*pos < end) {
        int want = sizes[k++ % num_sizes], n;

        if ((uint64_t)want > end - *pos)
            want = (int)(end - *pos);
        n = BIO_read(b, buf, want);
        assert_true(n > 0);
        assert_true(n <= want);
        assert_memory_equal(buf, g_stream + *pos, (size_t)n);
        *pos += (uint64_t)n;
        assert_int_equal(read_offset(b), *pos);
    }
}

/* expect_empty: the BIO has no in-order byte now (retry, not end of file). */
static void expect_empty(BIO *b)
{
    uint8_t one;

    assert_int_equal(BIO_pending(b), 0);
    assert_int_equal(BIO_read(b, &one, 1), -1);
    assert_true(BIO_should_retry(b));
    assert_int_equal(BIO_eof(b), 0);
}

static void test_storeread_run_read_in_pieces(void **state)
{
    static const int sizes[] = {7, 13, 1, 251, 3, 1021, 2};
    BIO *b = BIO_new(UTLS_BIO_s_segment());
    uint64_t pos = 0;
    uint8_t one;

    (void)state;
    stream_init();
    assert_non_null(b);
    push_ok(b, 0, 100);
    /* Held past the hole at 100..300, in overlapping odd pieces. */
    push_ok(b, 300, 333);
    push_ok(b, 600, 211);
    push_ok(b, 777, 223);
    read_to(b, &pos, 37, sizes, 1);
    read_to(b, &pos, 100, sizes + 1, 1);
    expect_empty(b);
    /* The hole fills with a segment that also reaches into the held run with
     * other bytes: the held ones are the stream. */
    {
        uint8_t seg[250];

        memcpy(seg, g_stream + 100, 200);
        for (size_t i = 200; i < sizeof(seg); i++)
            seg[i] = (uint8_t)~g_stream[100 + i];
        assert_int_equal(UTLS_BIO_segment_push(b, 100, seg, sizeof(seg)), 1);
    }
    assert_int_equal(BIO_pending(b), 900);
    /* In order while the stream goes on in the store: appended behind it. */
    push_ok(b, 1000, 150);
    push_ok(b, 1100, 100); /* straddles the in-order end */
    /* A second hole inside: 1200..1500 missing, 1500..2000 held. */
    push_ok(b, 1500, 499);
    push_ok(b, 1999, 1);
    assert_int_equal(BIO_pending(b), 1100);
    read_to(b, &pos, 1100, sizes, sizeof(sizes) / sizeof(sizes[0]));
    /* Retransmissions over bytes already received and held, forged: the
     * stream keeps its first bytes. */
    push_garbage(b, 0, 1200);
    push_garbage(b, 1500, 500);
    assert_int_equal(BIO_pending(b), 100);
    /* The second hole fills while 1100..1200 are still unread in the store,
     * with a segment whose ends are forged: the part already received and
     * the part held keep their bytes. */
    {
        uint8_t seg[500];

        memcpy(seg, g_stream + 1150, sizeof(seg));
        memset(seg, 0xee, 50);
        memset(seg + 350, 0xee, 150);
        assert_int_equal(UTLS_BIO_segment_push(b, 1150, seg, sizeof(seg)), 1);
    }
    assert_int_equal(BIO_pending(b), 900);
    push_ok(b, 2000, 3);
    read_to(b, &pos, 2003, sizes + 2, 5);
    expect_empty(b);
    assert_int_equal(UTLS_BIO_segment_push_eof(b, 2003), 1);
    assert_int_equal(BIO_read(b, &one, 1), 0);
    assert_int_equal(BIO_eof(b), 1);
    BIO_free(b);
}

/* Pieces read and pushed in turns while the stream stays in the store: the
 * reader keeps passing bytes that are only in the store, while small holes
 * open past them and fill. */
static void test_storeread_interleaved(void **state)
{
    static const int sizes[] = {5, 17, 129};
    BIO *b = BIO_new(UTLS_BIO_s_segment());
    uint64_t pos = 0, end;

    (void)state;
    stream_init();
    assert_non_null(b);
    push_ok(b, 50, 950);
    push_ok(b, 0, 50);
    end = 1000;
    while (end < 5000) {
        read_to(b, &pos, end - 150, sizes, 3);
        push_ok(b, end + 100, 77); /* a small hole ... */
        assert_int_equal((uint64_t)BIO_pending(b), end - pos);
        push_ok(b, end, 100);      /* ... filled behind unread bytes */
        end += 177;
        push_ok(b, end, 333);
        end += 333;
        assert_int_equal((uint64_t)BIO_pending(b), end - pos);
    }
    read_to(b, &pos, end, sizes, 3);
    expect_empty(b);
    BIO_free(b);
}

/*
 * The receive window counts from the read point (as TCP's does, and as the
 * store's own window does): while the stream goes on in the store, in-order
 * bytes that would reach past it are appended to the in-order buffer after
 * the store's in-order bytes were copied there (the spill), not dropped.
 * Every byte still arrives once, in order, with the value it first had.
 */
static void test_storeread_window_spill(void **state)
{
    static const int sizes[] = {11, 301, 2};
    BIO *b = BIO_new(UTLS_BIO_s_segment());
    uint64_t pos = 0;

    (void)state;
    stream_init();
    assert_non_null(b);
    assert_int_equal(UTLS_BIO_segment_set_window(b, 4096), 1);
    push_ok(b, 200, 2800);
    push_ok(b, 0, 200);     /* 3000 bytes in order, 2800 of them in the store */
    push_ok(b, 3000, 1200); /* 4200 past the read point: spilled first */
    assert_int_equal(BIO_pending(b), 4200);
    read_to(b, &pos, 2001, sizes, 1);
    push_ok(b, 4300, 1000); /* past a hole at 4200..4300 */
    push_ok(b, 4200, 100);  /* 4300..5300 in order, in the store */
    assert_int_equal(BIO_pending(b), 5300 - 2001);
    push_garbage(b, 4250, 100); /* received and held: ignored */
    push_ok(b, 5300, 900);      /* 6200 - 2001 > 4096: spilled first */
    assert_int_equal(BIO_pending(b), 6200 - 2001);
    /* Outside the window counted from the read point: refused, as before. */
    ERR_set_mark();
    assert_int_equal(UTLS_BIO_segment_push(b, 6300, g_stream + 6300, 1000), 0);
    ERR_pop_to_mark();
    read_to(b, &pos, 6200, sizes, 3);
    expect_empty(b);
    BIO_free(b);
}

/* The discard control passes exactly the bytes asked for, from the read
 * point only, and only when they are all here. */
static void test_storeread_discard(void **state)
{
    BIO *b = BIO_new(UTLS_BIO_s_segment()), *mem = BIO_new(BIO_s_mem());
    uint64_t pos;
    uint8_t buf[64];
    discard_arg big = {0, (size_t)-1};

    (void)state;
    stream_init();
    assert_non_null(b);
    assert_non_null(mem);
    push_ok(b, 100, 400);
    push_ok(b, 0, 40);
    assert_int_equal(discard(b, 0, 41), 0); /* past the hole */
    assert_int_equal(BIO_ctrl(b, CTRL_DISCARD, 0, &big), 0);
    assert_int_equal(BIO_ctrl(b, CTRL_DISCARD, 1, NULL), 0);
    assert_int_equal(discard(b, 1, 1), 0); /* not the read point */
    assert_int_equal(read_offset(b), 0);
    assert_int_equal(BIO_pending(b), 40);
    push_ok(b, 40, 60); /* the run 100..500 joins: in the store */
    assert_int_equal(discard(b, 0, 501), 0);
    assert_int_equal(discard(b, 0, 30), 1);
    /* Across the buffer (30..100) into the store (100..500). */
    assert_int_equal(discard(b, 30, 90), 1);
    assert_int_equal(read_offset(b), 120);
    assert_int_equal(BIO_read(b, buf, 9), 9);
    assert_memory_equal(buf, g_stream + 120, 9);
    assert_int_equal(discard(b, 120, 1), 0); /* behind the read point */
    assert_int_equal(discard(b, 129, 371), 1);
    assert_int_equal(BIO_pending(b), 0);
    assert_int_equal(discard(b, 500, 1), 0); /* nothing here */
    push_ok(b, 500, 20);
    pos = 500;
    read_to(b, &pos, 520, (const int[]){3}, 1);
    expect_empty(b);
    /* Any other BIO does not answer it. */
    assert_int_equal(BIO_write(mem, "abc", 3), 3);
    assert_int_equal(discard(mem, 0, 1), 0);
    assert_int_equal(BIO_pending(mem), 3);
    BIO_free(mem);
    BIO_free(b);
}

/* --- With SSL --------------------------------------------------------------- */

#define MAX_RECS 64

typedef struct {
    uh_seg_pair p;
    int n;
    uint8_t *wire[MAX_RECS];
    size_t wire_len[MAX_RECS];
    uint64_t off[MAX_RECS];
    size_t plain_len[MAX_RECS];
    int delivered[MAX_RECS];
} stream;

/* The plaintext length of record |r|: odd sizes, 20 .. 16384. */
static size_t rec_len(int r)
{
    static const size_t lens[] = {1400, 20, 977, 16384, 333, 4099, 1, 2500};
    size_t len = lens[r % 8];

    return len < UH_MSG_MIN ? UH_MSG_MIN : len;
}

/* tls12_pair_new is uh_seg_pair_new for TLS 1.2 with the suite |cipher|
 * (the harness's default pair is TLS 1.3). */
static void tls12_pair_new(uh_seg_pair *p, const char *cipher, long server_mode)
{
    assert_true(uh_seg_pair_new_tls12(p, uh_key, uh_cert, (uint64_t)server_mode, cipher));
    assert_int_equal(SSL_version(p->s), TLS1_2_VERSION);
}

/* stream_new_lens: the pair (TLS 1.3, or TLS 1.2 with the suite |tls12|) and
 * |num| records written by the client, record r of |lens|[r] plaintext
 * bytes (NULL: rec_len(r)). */
static void stream_new_lens(stream *st, int num, long server_mode, const size_t *lens,
                            const char *tls12)
{
    uint8_t msg[UH_MSG_MAX];

    memset(st, 0, sizeof(*st));
    if (tls12 != NULL)
        tls12_pair_new(&st->p, tls12, server_mode);
    else
        assert_true(uh_seg_pair_new(&st->p, uh_key, uh_cert, (uint64_t)server_mode));
    assert_true(num <= MAX_RECS);
    for (int r = 0; r < num; r++) {
        st->plain_len[r] = lens != NULL ? lens[r] : rec_len(r);
        assert_true(uh_msg_build(msg, (uint32_t)r, st->plain_len[r]));
        assert_true(uh_pair_write_record(&st->p, msg, st->plain_len[r], &st->wire[r],
                                         &st->wire_len[r], &st->off[r]));
        /* One record per write: header + payload + type + tag (TLS 1.3), or
         * header + explicit nonce + payload + tag (TLS 1.2 AES-GCM). */
        assert_int_equal(st->wire_len[r], 5 + st->plain_len[r] + (tls12 != NULL ? 8 : 1) + 16);
    }
    st->n = num;
}

static void stream_new(stream *st, int num, long server_mode)
{
    stream_new_lens(st, num, server_mode, NULL, NULL);
}

static void stream_free(stream *st)
{
    for (int r = 0; r < st->n; r++)
        free(st->wire[r]);
    uh_seg_pair_free(&st->p);
}

static void spush(stream *st, int r)
{
    assert_true(UTLS_BIO_segment_push(st->p.seg, st->off[r], st->wire[r], st->wire_len[r]));
}

/* spush_range pushes the wire bytes of records |from|..|to| (inclusive) as
 * segments of |seg| bytes, cut without regard to record boundaries. */
static void spush_range(stream *st, int from, int to, size_t seg)
{
    uint64_t start = st->off[from], end = st->off[to] + st->wire_len[to], at;
    int r = from;

    for (at = start; at < end;) {
        uint8_t buf[4096];
        size_t len = end - at < seg ? (size_t)(end - at) : seg, got = 0;

        assert_true(seg <= sizeof(buf));
        while (got < len) {
            size_t in, take;

            while (at + got >= st->off[r] + st->wire_len[r])
                r++;
            in = (size_t)(at + got - st->off[r]);
            take = st->wire_len[r] - in < len - got ? st->wire_len[r] - in : len - got;
            memcpy(buf + got, st->wire[r] + in, take);
            got += take;
        }
        assert_true(UTLS_BIO_segment_push(st->p.seg, at, buf, len));
        at += len;
        while (r < to && at >= st->off[r] + st->wire_len[r])
            r++;
    }
}

/* read_next reads one record: returns its index (checked whole and intact,
 * at its offset, delivered once), or -1 if the read failed with
 * SSL_get_error |want_err| (anything else fails the test). |*out_ooo| is
 * set from its metadata. */
static int read_next(stream *st, int want_err, int *out_ooo)
{
    uint8_t buf[UH_MSG_MAX];
    size_t n;
    uint32_t index;
    UTLS_RECORD_INFO info;

    ERR_clear_error();
    if (!UTLS_read_record(st->p.s, buf, sizeof(buf), &n, &info)) {
        int err = SSL_get_error(st->p.s, 0);

        if (err != want_err) {
            uh_errors_to_stderr("storeread");
            fail_msg("read failed with %d, expected %d", err, want_err);
        }
        ERR_clear_error();
        return -1;
    }
    assert_true(uh_msg_check(buf, n, &index));
    assert_true(index < (uint32_t)st->n);
    assert_int_equal(n, st->plain_len[index]);
    assert_int_equal(info.stream_offset, st->off[index]);
    assert_int_equal(st->delivered[index], 0);
    st->delivered[index] = 1;
    if (out_ooo != NULL)
        *out_ooo = info.out_of_order != 0;
    return (int)index;
}

static void expect(stream *st, int r, int ooo)
{
    int got_ooo = -1;

    assert_int_equal(read_next(st, SSL_ERROR_WANT_READ, &got_ooo), r);
    assert_int_equal(got_ooo, ooo);
}

static void expect_nothing(stream *st)
{
    assert_int_equal(read_next(st, SSL_ERROR_WANT_READ, NULL), -1);
}

static UTLS_STATS stats_of(stream *st)
{
    UTLS_STATS s;

    assert_int_equal(UTLS_get_stats(st->p.s, &s), 1);
    return s;
}

/* expect_skips checks the counters of records delivered out of order and of
 * those skipped in order (all of them, and those whose body was not read);
 * returns the statistics for further checks. */
static UTLS_STATS expect_skips(stream *st, uint64_t ooo, uint64_t skipped, uint64_t bodies)
{
    UTLS_STATS s = stats_of(st);

    assert_int_equal(s.records_out_of_order, ooo);
    assert_int_equal(s.records_skipped, skipped);
    assert_int_equal(s.bodies_skipped, bodies);
    return s;
}

/* expect_each_once checks that every record of |st| was delivered once. */
static void expect_each_once(const stream *st)
{
    for (int r = 0; r < st->n; r++)
        assert_int_equal(st->delivered[r], 1);
}

/*
 * Records 2..5 delivered out of order; record 0 in order; record 1 fills the
 * hole, so 2..5 are in order in the store; records 6 and 7 arrive in order
 * behind them (into the store). Reading: 1 whole, 2..5 skipped unread, 6 and
 * 7 whole from the store. Then a second hole: 9 and 10 early, 8 fills it.
 */
static void run_skip_bodies(const char *tls12)
{
    stream st;
    UTLS_STATS s;

    stream_new_lens(&st, 12, SSL_MODE_UNORDERED, NULL, tls12);
    spush_range(&st, 2, 5, 1111);
    for (int r = 2; r <= 5; r++) {
        int got = read_next(&st, SSL_ERROR_WANT_READ, NULL);

        assert_true(got >= 2 && got <= 5);
    }
    expect_nothing(&st);
    spush(&st, 0);
    expect(&st, 0, 0);
    expect_nothing(&st);
    spush(&st, 1);
    spush_range(&st, 6, 7, 777);
    expect(&st, 1, 0);
    expect(&st, 6, 0);
    expect(&st, 7, 0);
    expect_nothing(&st);
    s = expect_skips(&st, 4, 4, 4);
    assert_int_equal(s.decryptions_saved, 4);
    spush(&st, 9);
    spush(&st, 10);
    expect(&st, 9, 1);
    expect(&st, 10, 1);
    spush_range(&st, 8, 8, 501);
    spush(&st, 11);
    expect(&st, 8, 0);
    expect(&st, 11, 0);
    expect_nothing(&st);
    s = expect_skips(&st, 6, 6, 6);
    assert_int_equal(s.records_in_order, 6);
    expect_each_once(&st);
    stream_free(&st);
}

static void test_storeread_ssl_skip_bodies(void **state)
{
    (void)state;
    run_skip_bodies(NULL);
}

/* TLS 1.2 AES-GCM: the skipped records' explicit nonces (read from the
 * store, the body otherwise unread) still anchor the predictor, so the
 * records past the second hole are found. */
static void test_storeread_ssl_skip_bodies_tls12_gcm(void **state)
{
    (void)state;
    run_skip_bodies("ECDHE-ECDSA-AES128-GCM-SHA256");
}

/*
 * Tampered retransmissions of records already delivered out of order, at
 * their offsets with other bytes (a straddling one over the hole, one inside
 * the held run), before the hole fills: the store keeps the bytes that were
 * authenticated, the records are skipped unread, and what follows is read
 * intact.
 */
static void test_storeread_ssl_tampered_retransmission(void **state)
{
    stream st;
    UTLS_STATS s;
    uint8_t *forged;
    size_t flen;

    (void)state;
    stream_new(&st, 6, SSL_MODE_UNORDERED);
    spush(&st, 1);
    spush(&st, 2);
    spush(&st, 3);
    for (int k = 0; k < 3; k++)
        assert_true(read_next(&st, SSL_ERROR_WANT_READ, NULL) >= 1);
    /* Record 2 again, body flipped. */
    forged = malloc(st.wire_len[2]);
    assert_non_null(forged);
    memcpy(forged, st.wire[2], st.wire_len[2]);
    for (size_t i = 5; i < st.wire_len[2]; i++)
        forged[i] ^= 0xa5;
    assert_true(UTLS_BIO_segment_push(st.p.seg, st.off[2], forged, st.wire_len[2]));
    free(forged);
    expect_nothing(&st);
    /* The hole's record, genuine, followed by a forged copy of record 1's
     * first half in the same segment. */
    flen = st.wire_len[0] + st.wire_len[1] / 2;
    forged = malloc(flen);
    assert_non_null(forged);
    memcpy(forged, st.wire[0], st.wire_len[0]);
    memset(forged + st.wire_len[0], 0x17, flen - st.wire_len[0]);
    assert_true(UTLS_BIO_segment_push(st.p.seg, st.off[0], forged, flen));
    free(forged);
    expect(&st, 0, 0);
    spush(&st, 4);
    expect(&st, 4, 0);
    /* Retransmissions of bytes read in order, forged: ignored. */
    {
        uint8_t junk[64];

        memset(junk, 0x42, sizeof(junk));
        assert_true(UTLS_BIO_segment_push(st.p.seg, st.off[3], junk, sizeof(junk)));
    }
    spush(&st, 5);
    expect(&st, 5, 0);
    expect_nothing(&st);
    s = expect_skips(&st, 3, 3, 3);
    assert_int_equal(s.records_in_order, 3);
    expect_each_once(&st);
    stream_free(&st);
}

/*
 * Forged bytes that arrive first at a record's offset are what the stream
 * holds (held bytes win). That record is never delivered out of order, so
 * never skipped: in order it is read and decrypted, and fails as stock
 * OpenSSL would over that stream. Nothing unauthenticated is delivered.
 */
static void test_storeread_ssl_forged_first_not_skipped(void **state)
{
    stream st;
    UTLS_STATS s;
    uint8_t *forged;

    (void)state;
    stream_new(&st, 4, SSL_MODE_UNORDERED);
    forged = malloc(st.wire_len[2]);
    assert_non_null(forged);
    memcpy(forged, st.wire[2], st.wire_len[2]);
    forged[st.wire_len[2] - 3] ^= 0x01; /* the tag */
    assert_true(UTLS_BIO_segment_push(st.p.seg, st.off[2], forged, st.wire_len[2]));
    free(forged);
    spush(&st, 2); /* the genuine copy comes too late */
    spush(&st, 1);
    expect(&st, 1, 1);
    expect_nothing(&st);
    spush(&st, 3);
    expect(&st, 3, 1);
    spush(&st, 0);
    expect(&st, 0, 0);
    assert_int_equal(read_next(&st, SSL_ERROR_SSL, NULL), -1);
    s = stats_of(&st);
    assert_int_equal(s.records_out_of_order, 2);
    assert_int_equal(s.bodies_skipped, 1); /* record 1 only */
    assert_int_equal(st.delivered[2], 0);
    stream_free(&st);
}

/* With read-ahead the body is in OpenSSL's read buffer with the header: the
 * record is compared in place of the body skip (decryptions_saved), never
 * skipped unread. */
static void test_storeread_ssl_read_ahead_falls_back(void **state)
{
    stream st;
    UTLS_STATS s;

    (void)state;
    stream_new(&st, 8, SSL_MODE_UNORDERED);
    SSL_set_read_ahead(st.p.s, 1);
    spush_range(&st, 1, 7, 999);
    for (int k = 1; k <= 7; k++)
        assert_true(read_next(&st, SSL_ERROR_WANT_READ, NULL) >= 1);
    spush(&st, 0);
    expect(&st, 0, 0);
    expect_nothing(&st);
    s = stats_of(&st);
    assert_int_equal(s.records_skipped, 7);
    assert_int_equal(s.decryptions_saved, 7);
    assert_int_equal(s.bodies_skipped, 0);
    stream_free(&st);
}

/* The segment BIO's bound on runs held past a hole (UTLS_SEG_MAX_RUNS in
 * lib/bio/segstore_local.h): one more and the farthest run is evicted. */
#define SEG_MAX_RUNS 65536

/*
 * Records 1..3 are delivered early; record 0 fills the hole, so 1..3 are in
 * order in the store, unread. Then one-byte segments past a new hole make
 * one run too many: the store evicts (after copying the in-order bytes out
 * of it) and its epoch moves. Records 1..3 are then read and decrypted in
 * full (not saved, not skipped unread), records verified after the eviction
 * are skipped unread, and each is delivered once.
 */
static void test_storeread_ssl_eviction_full_path(void **state)
{
    enum { NUM = 14 };
    static const size_t lens[NUM] = {1400, 100, 200, 300, 400, 16384, 16384, 16384,
                                     16384, 16384, 16384, 16384, 16384, 16384};
    stream st;
    UTLS_STATS s;
    uint64_t base;
    int r, ooo;

    (void)state;
    stream_new_lens(&st, NUM, SSL_MODE_UNORDERED, lens, NULL);
    for (r = 1; r <= 3; r++) {
        spush(&st, r);
        expect(&st, r, 1);
    }
    spush(&st, 0); /* 1..3 in order now, in the store */
    base = st.off[5];
    assert_true(st.off[NUM - 1] + st.wire_len[NUM - 1] - base >= 2 * (uint64_t)SEG_MAX_RUNS);
    for (uint64_t k = 0; k < SEG_MAX_RUNS; k++) {
        uint64_t off = base + 2 * k;

        for (r = 5; off >= st.off[r] + st.wire_len[r]; r++)
            continue;
        assert_true(UTLS_BIO_segment_push(st.p.seg, off, st.wire[r] + (off - st.off[r]), 1));
    }
    for (r = 5; r < NUM; r++)
        spush(&st, r);
    /* Record 0 in order, 1..3 passed, 5.. early (after the eviction), in
     * whatever order the reads find them. */
    while ((r = read_next(&st, SSL_ERROR_WANT_READ, &ooo)) >= 0)
        assert_true(r == 0 ? !ooo : r >= 5 && ooo);
    assert_int_equal(st.delivered[0], 1);
    spush(&st, 4);
    expect(&st, 4, 0);
    expect_nothing(&st);
    for (r = 0; r < NUM; r++)
        assert_int_equal(st.delivered[r], 1);
    s = stats_of(&st);
    assert_int_equal(s.records_in_order, 2);
    assert_int_equal(s.records_out_of_order, NUM - 2);
    assert_int_equal(s.records_skipped, NUM - 2);
    assert_int_equal(s.decryptions_saved, NUM - 2 - 3); /* 1..3 were decrypted */
    assert_int_equal(s.bodies_skipped, NUM - 2 - 3);
    stream_free(&st);
}

/* --- The uTCP BIO ----------------------------------------------------------- */

/* utcp_send writes Minion's uTCP unit for |len| bytes at stream offset
 * |off|: flags, 32-bit offset (big-endian), data. */
static void utcp_send(int fd, uint64_t off, const uint8_t *data, size_t len)
{
    uint8_t unit[5 + 32768];

    assert_true(len <= sizeof(unit) - 5);
    unit[0] = 0;
    unit[1] = (uint8_t)(off >> 24);
    unit[2] = (uint8_t)(off >> 16);
    unit[3] = (uint8_t)(off >> 8);
    unit[4] = (uint8_t)off;
    memcpy(unit + 5, data, len);
    assert_int_equal(send(fd, unit, 5 + len, 0), (ssize_t)(5 + len));
}

/*
 * The same over the uTCP BIO (the segment store behind a filter reading
 * units from a SOCK_SEQPACKET socket): records delivered early are skipped
 * unread when the unit that fills the hole is read, and records behind them
 * are read whole.
 */
static void test_storeread_utcp_skip_bodies(void **state)
{
    stream st;
    int fd[2], n;
    uint8_t buf[65536], msg[UH_MSG_MAX];
    BIO *f, *sock;

    (void)state;
    memset(&st, 0, sizeof(st));
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fd), 0);
    assert_int_equal(fcntl(fd[0], F_SETFL, fcntl(fd[0], F_GETFL) | O_NONBLOCK), 0);
    assert_true(uh_pair_contexts(&st.p, uh_key, uh_cert, &(uh_pair_opts){0}));
    f = BIO_new(UTLS_BIO_f_utcp());
    sock = BIO_new_socket(fd[0], BIO_NOCLOSE);
    assert_true(f != NULL && sock != NULL && st.p.c != NULL && st.p.s != NULL);
    BIO_push(f, sock);
    SSL_set_bio(st.p.c, st.p.c_in, st.p.c_out);
    SSL_set_bio(st.p.s, f, f);
    SSL_set_mode(st.p.s, SSL_MODE_UNORDERED);
    SSL_set_connect_state(st.p.c);
    SSL_set_accept_state(st.p.s);
    for (int i = 0; i < 10; i++) {
        SSL_do_handshake(st.p.c);
        while ((n = BIO_read(st.p.c_out, buf, sizeof(buf))) > 0) {
            for (int at = 0; at < n; at += 16384) {
                int len = n - at < 16384 ? n - at : 16384;

                utcp_send(fd[1], st.p.base, buf + at, (size_t)len);
                st.p.base += (uint64_t)len;
            }
        }
        SSL_do_handshake(st.p.s);
        while ((n = (int)recv(fd[1], buf, sizeof(buf), MSG_DONTWAIT)) > 0)
            BIO_write(st.p.c_in, buf, n);
    }
    assert_true(SSL_is_init_finished(st.p.s));
    st.n = 10;
    for (int r = 0; r < st.n; r++) {
        st.plain_len[r] = rec_len(r);
        assert_true(uh_msg_build(msg, (uint32_t)r, st.plain_len[r]));
        assert_true(uh_pair_write_record(&st.p, msg, st.plain_len[r], &st.wire[r],
                                         &st.wire_len[r], &st.off[r]));
    }
    for (int r = 2; r <= 5; r++)
        utcp_send(fd[1], st.off[r], st.wire[r], st.wire_len[r]);
    for (int k = 0; k < 4; k++) {
        int r = read_next(&st, SSL_ERROR_WANT_READ, NULL);

        assert_true(r >= 2 && r <= 5);
    }
    expect_nothing(&st);
    utcp_send(fd[1], st.off[0], st.wire[0], st.wire_len[0]);
    expect(&st, 0, 0);
    expect_nothing(&st);
    utcp_send(fd[1], st.off[1], st.wire[1], st.wire_len[1]);
    for (int r = 6; r < st.n; r++)
        utcp_send(fd[1], st.off[r], st.wire[r], st.wire_len[r]);
    expect(&st, 1, 0);
    for (int r = 6; r < st.n; r++)
        expect(&st, r, 0);
    expect_nothing(&st);
    expect_skips(&st, 4, 4, 4);
    expect_each_once(&st);
    stream_free(&st);
    close(fd[0]);
    close(fd[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_storeread_run_read_in_pieces),
        cmocka_unit_test(test_storeread_interleaved),
        cmocka_unit_test(test_storeread_window_spill),
        cmocka_unit_test(test_storeread_discard),
        cmocka_unit_test(test_storeread_ssl_skip_bodies),
        cmocka_unit_test(test_storeread_ssl_skip_bodies_tls12_gcm),
        cmocka_unit_test(test_storeread_ssl_tampered_retransmission),
        cmocka_unit_test(test_storeread_ssl_forged_first_not_skipped),
        cmocka_unit_test(test_storeread_ssl_read_ahead_falls_back),
        cmocka_unit_test(test_storeread_ssl_eviction_full_path),
        cmocka_unit_test(test_storeread_utcp_skip_bodies),
    };

    return cmocka_run_group_tests_name("storeread", tests, uh_identity_setup,
                                       uh_identity_teardown);
}
