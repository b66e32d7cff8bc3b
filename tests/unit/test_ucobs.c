/* test_ucobs.c: unit tests for the uCOBS framer and receiver
 * (core/include/utls/ucobs.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "utls/ucobs.h"
#include "test_rng.h"

static uint64_t rng_state;

static uint32_t rnd32(void)
{
    return (uint32_t)(test_xorshift64star(&rng_state) >> 32);
}

/* A sent stream: the datagrams and where each frame lies. */
#define MAX_DGRAMS 2048
typedef struct {
    size_t n;
    uint8_t *dg[MAX_DGRAMS];
    size_t dlen[MAX_DGRAMS];
    uint64_t off[MAX_DGRAMS]; /* opening marker */
    size_t flen[MAX_DGRAMS];
    uint8_t *wire;
    size_t wire_len, wire_cap;
    /* what the receiver delivered */
    int seen[MAX_DGRAMS];
    int ooo[MAX_DGRAMS];
} stream;

static void stream_init(stream *s)
{
    memset(s, 0, sizeof(*s));
}

static void stream_free(stream *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->dg[i]);
    }
    free(s->wire);
}

static void stream_append_raw(stream *s, const uint8_t *p, size_t len)
{
    if (s->wire_len + len > s->wire_cap) {
        s->wire_cap = (s->wire_len + len) * 2 + 64;
        s->wire = realloc(s->wire, s->wire_cap);
        assert_non_null(s->wire);
    }
    memcpy(s->wire + s->wire_len, p, len);
    s->wire_len += len;
}

static void stream_add(stream *s, const uint8_t *d, size_t len)
{
    size_t bound = utls_ucobs_frame_bound(len), flen = 0;
    uint8_t *f = malloc(bound);

    assert_true(s->n < MAX_DGRAMS);
    assert_non_null(f);
    assert_int_equal(utls_ucobs_frame(f, bound, &flen, d, len), 1);
    s->dg[s->n] = malloc(len ? len : 1);
    assert_non_null(s->dg[s->n]);
    if (len) {
        memcpy(s->dg[s->n], d, len);
    }
    s->dlen[s->n] = len;
    s->off[s->n] = s->wire_len;
    s->flen[s->n] = flen;
    s->n++;
    stream_append_raw(s, f, flen);
    free(f);
}

static void stream_add_random(stream *s, size_t len)
{
    uint8_t *d = malloc(len ? len : 1);
    assert_non_null(d);
    for (size_t i = 0; i < len; i++) {
        /* a zero every ~8 bytes, so COBS has work to do */
        d[i] = (rnd32() & 7) == 0 ? 0 : (uint8_t)rnd32();
    }
    stream_add(s, d, len);
    free(d);
}

/* drain takes every queued datagram, checks it against the sent ones
 * (identity, bytes) and that it was not delivered before. Returns how many. */
static size_t drain(utls_ucobs_rx *rx, stream *s)
{
    utls_ucobs_datagram dg;
    size_t count = 0;

    while (utls_ucobs_rx_peek(rx, &dg)) {
        size_t i;
        for (i = 0; i < s->n && s->off[i] != dg.offset; i++) {
        }
        assert_true(i < s->n);
        assert_int_equal(s->seen[i], 0);
        assert_int_equal(dg.len, s->dlen[i]);
        if (dg.len) {
            assert_memory_equal(dg.data, s->dg[i], dg.len);
        }
        s->seen[i] = 1;
        s->ooo[i] = dg.out_of_order;
        assert_int_equal(utls_ucobs_rx_pop(rx), 1);
        count++;
    }
    assert_int_equal(utls_ucobs_rx_pop(rx), 0);
    return count;
}

static void assert_all_seen(const stream *s)
{
    for (size_t i = 0; i < s->n; i++) {
        assert_int_equal(s->seen[i], 1);
    }
}

static void feed(utls_ucobs_rx *rx, const stream *s, uint64_t from, uint64_t to)
{
    if (to > from) {
        assert_int_equal(utls_ucobs_rx_feed(rx, from, s->wire + from, (size_t)(to - from), 7), 1);
    }
}

/* rx_start: a new receiver (with |lim|, NULL: the defaults) for |s|, nothing
 * of |s| seen yet. */
static utls_ucobs_rx *rx_start(stream *s, const utls_ucobs_limits *lim)
{
    utls_ucobs_rx *rx = utls_ucobs_rx_new(lim, 0);

    assert_non_null(rx);
    memset(s->seen, 0, sizeof(s->seen));
    return rx;
}

static utls_ucobs_stats rx_stats(const utls_ucobs_rx *rx)
{
    utls_ucobs_stats st;

    utls_ucobs_rx_get_stats(rx, &st);
    return st;
}

static void test_ucobs_round_trip(void **state)
{
    (void)state;
    rng_state = 0x1234567ull;
    stream s;
    stream_init(&s);
    for (size_t i = 0; i < 300; i++) {
        stream_add_random(&s, rnd32() % 3000);
    }
    stream_add_random(&s, 0);
    stream_add_random(&s, UTLS_UCOBS_MAX_DATAGRAM);
    stream_add_random(&s, 1);
    /* whole, then in random segment sizes */
    for (int pass = 0; pass < 2; pass++) {
        utls_ucobs_rx *rx = rx_start(&s, NULL);
        memset(s.seen, 0, sizeof(s.seen));
        uint64_t pos = 0;
        while (pos < s.wire_len) {
            size_t seg = pass == 0 ? s.wire_len : 1 + rnd32() % 3000;
            if (seg > s.wire_len - pos) {
                seg = (size_t)(s.wire_len - pos);
            }
            feed(rx, &s, pos, pos + seg);
            pos += seg;
            drain(rx, &s);
        }
        assert_all_seen(&s);
        for (size_t i = 0; i < s.n; i++) {
            assert_int_equal(s.ooo[i], 0);
        }
        utls_ucobs_stats st = rx_stats(rx);
        assert_int_equal(st.datagrams_in_order, s.n);
        assert_int_equal(st.datagrams_out_of_order, 0);
        assert_int_equal(st.framing_errors, 0);
        assert_int_equal(st.junk_bytes, 0);
        /* Linear: the walk passes each byte about once. */
        assert_true(st.bytes_scanned <= s.wire_len + s.n);
        utls_ucobs_rx_free(rx);
    }
    stream_free(&s);
}

/* Every hole position and a few hole sizes: datagrams whose frame avoids the
 * hole come before it fills (in order before it, out of order after), the
 * rest after, each exactly once. */
static void test_ucobs_every_hole_position(void **state)
{
    (void)state;
    rng_state = 42;
    stream s;
    stream_init(&s);
    static const size_t sizes[] = {0, 1, 5, 253, 254, 255, 2, 600, 0, 3};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        stream_add_random(&s, sizes[i]);
    }
    static const size_t hole_lens[] = {1, 2, 3, 300};
    for (size_t hl = 0; hl < sizeof(hole_lens) / sizeof(hole_lens[0]); hl++) {
        for (uint64_t h = 0; h + hole_lens[hl] <= s.wire_len; h++) {
            uint64_t he = h + hole_lens[hl];
            utls_ucobs_rx *rx = rx_start(&s, NULL);
            memset(s.seen, 0, sizeof(s.seen));
            feed(rx, &s, 0, h);
            /* after the hole, in pieces of 7 bytes */
            for (uint64_t p = he; p < s.wire_len; p += 7) {
                feed(rx, &s, p, p + 7 < s.wire_len ? p + 7 : s.wire_len);
            }
            drain(rx, &s);
            for (size_t i = 0; i < s.n; i++) {
                int clear = s.off[i] + s.flen[i] <= h || s.off[i] >= he;
                assert_int_equal(s.seen[i], clear);
                if (clear) {
                    assert_int_equal(s.ooo[i], s.off[i] >= he);
                }
            }
            feed(rx, &s, h, he);
            drain(rx, &s);
            assert_all_seen(&s);
            utls_ucobs_stats st = rx_stats(rx);
            assert_int_equal(st.datagrams_in_order + st.datagrams_out_of_order, s.n);
            assert_int_equal(st.framing_errors, 0);
            utls_ucobs_rx_free(rx);
        }
    }
    stream_free(&s);
}

/* Minion Figure 6. */
static void test_ucobs_figure6(void **state)
{
    (void)state;
    rng_state = 6;
    stream s;
    stream_init(&s);
    stream_add_random(&s, 100);
    stream_add_random(&s, 100);
    stream_add_random(&s, 100);
    uint64_t e1 = s.off[1], e2 = s.off[2], mid2 = s.off[1] + s.flen[1] / 2;

    /* (a) three segments, the middle one lost: 1 and 3 at once. */
    utls_ucobs_rx *rx = rx_start(&s, NULL);
    feed(rx, &s, 0, e1);
    feed(rx, &s, e2, s.wire_len);
    assert_int_equal(drain(rx, &s), 2);
    assert_int_equal(s.seen[0] + s.seen[2], 2);
    assert_int_equal(s.ooo[2], 1);
    feed(rx, &s, e1, e2);
    assert_int_equal(drain(rx, &s), 1);
    assert_int_equal(s.ooo[1], 0);
    utls_ucobs_rx_free(rx);

    /* (b) re-segmented into two, split inside record 2, none lost. */
    rx = rx_start(&s, NULL);
    feed(rx, &s, 0, mid2);
    assert_int_equal(drain(rx, &s), 1);
    assert_int_equal(s.seen[0], 1);
    feed(rx, &s, mid2, s.wire_len);
    assert_int_equal(drain(rx, &s), 2);
    assert_all_seen(&s);
    utls_ucobs_rx_free(rx);

    /* (c) the first of the two lost: record 3 at once, 1 and 2 later. */
    rx = rx_start(&s, NULL);
    feed(rx, &s, mid2, s.wire_len);
    assert_int_equal(drain(rx, &s), 1);
    assert_int_equal(s.seen[2], 1);
    assert_int_equal(s.ooo[2], 1);
    feed(rx, &s, 0, mid2);
    assert_int_equal(drain(rx, &s), 2);
    assert_all_seen(&s);
    assert_int_equal(s.ooo[0] + s.ooo[1], 0);
    utls_ucobs_rx_free(rx);
    stream_free(&s);
}

static void test_ucobs_empty_and_max(void **state)
{
    (void)state;
    uint8_t f[8];
    size_t fl = 99;
    assert_int_equal(utls_ucobs_frame(f, sizeof(f), &fl, NULL, 0), 1);
    assert_int_equal(fl, 3);
    assert_int_equal(f[0], 0);
    assert_int_equal(f[1], 1);
    assert_int_equal(f[2], 0);
    /* too small a buffer: refused, nothing past cap */
    memset(f, 0xA5, sizeof(f));
    assert_int_equal(utls_ucobs_frame(f, 2, &fl, NULL, 0), 0);
    assert_int_equal(fl, 0);
    assert_int_equal(f[2], 0xA5);
    uint8_t d4[4] = {1, 2, 3, 4};
    assert_int_equal(utls_ucobs_frame(f, 6, &fl, d4, 4), 0); /* needs 7 */
    assert_int_equal(f[6], 0xA5);
    assert_int_equal(utls_ucobs_frame(f, 7, &fl, d4, 4), 1);
    assert_int_equal(fl, 7);
    /* over the maximum: refused */
    assert_int_equal(utls_ucobs_frame_bound(UTLS_UCOBS_MAX_DATAGRAM + 1), 0);
    uint8_t *big = calloc(1, UTLS_UCOBS_MAX_DATAGRAM + 1);
    uint8_t *out = malloc(UTLS_UCOBS_MAX_FRAME + 300);
    assert_non_null(big);
    assert_non_null(out);
    assert_int_equal(
        utls_ucobs_frame(out, UTLS_UCOBS_MAX_FRAME + 300, &fl, big, UTLS_UCOBS_MAX_DATAGRAM + 1),
        0);
    /* max size all non-zero: exactly the bound */
    memset(big, 0x41, UTLS_UCOBS_MAX_DATAGRAM);
    assert_int_equal(utls_ucobs_frame(out, UTLS_UCOBS_MAX_FRAME, &fl, big, UTLS_UCOBS_MAX_DATAGRAM),
                     1);
    assert_int_equal(fl, UTLS_UCOBS_MAX_FRAME);
    /* a hand-made frame one byte over the maximum (COBS of 65536 bytes) is a
     * framing error on the receiver; the next datagram still arrives */
    stream s;
    stream_init(&s);
    size_t over_len = 0;
    uint8_t zero = 0;
    stream_append_raw(&s, &zero, 1);
    assert_int_equal(utls_cobs_encode(big, UTLS_UCOBS_MAX_DATAGRAM, out, UTLS_UCOBS_MAX_FRAME,
                                      &over_len),
                     UTLS_COBS_OK);
    /* 65535 = 258 * 254 + 3: the last block is 04 41 41 41; make it 05 + 4 */
    assert_int_equal(out[over_len - 4], 4);
    out[over_len - 4] = 5;
    out[over_len] = 0x41;
    stream_append_raw(&s, out, over_len + 1);
    stream_append_raw(&s, &zero, 1);
    stream_add(&s, d4, 4);
    utls_ucobs_rx *rx = rx_start(&s, NULL);
    feed(rx, &s, 0, s.wire_len);
    assert_int_equal(drain(rx, &s), 1);
    assert_all_seen(&s);
    utls_ucobs_stats st = rx_stats(rx);
    assert_int_equal(st.framing_errors, 1);
    utls_ucobs_rx_free(rx);
    /* the same, arriving past a hole */
    rx = rx_start(&s, NULL);
    feed(rx, &s, 1, s.wire_len);
    assert_int_equal(drain(rx, &s), 1);
    assert_int_equal(s.ooo[0], 1);
    feed(rx, &s, 0, 1);
    assert_int_equal(drain(rx, &s), 0);
    st = rx_stats(rx);
    assert_int_equal(st.framing_errors, 1); /* counted once */
    utls_ucobs_rx_free(rx);
    stream_free(&s);
    free(big);
    free(out);
}

/* Malformed frames are counted and skipped; the good ones around them come
 * through. */
static void test_ucobs_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        uint8_t bytes[8];
        size_t len;
    } bad[] = {
        {"block past the end", {5, 0x41, 0x42}, 3},
        {"block past the end by one", {3, 0x41}, 2},
        {"empty final block after 255", {0}, 0}, /* built below */
    };
    uint8_t d3[3] = {9, 0, 8};
    for (size_t b = 0; b < 3; b++) {
        stream s;
        stream_init(&s);
        uint8_t zero = 0;
        stream_add(&s, d3, 3);
        stream_append_raw(&s, &zero, 1);
        if (b < 2) {
            stream_append_raw(&s, bad[b].bytes, bad[b].len);
        } else {
            uint8_t nc[256];
            nc[0] = 0xFF;
            memset(nc + 1, 0x33, 254);
            nc[255] = 0x01;
            stream_append_raw(&s, nc, 256);
        }
        stream_append_raw(&s, &zero, 1);
        stream_add(&s, d3, 3);
        for (int order = 0; order < 2; order++) {
            utls_ucobs_rx *rx = rx_start(&s, NULL);
            if (order == 0) {
                feed(rx, &s, 0, s.wire_len);
            } else {
                feed(rx, &s, 2, s.wire_len); /* the bad frame past a hole */
                feed(rx, &s, 0, 2);
            }
            assert_int_equal(drain(rx, &s), 2);
            assert_all_seen(&s);
            utls_ucobs_stats st = rx_stats(rx);
            assert_int_equal(st.framing_errors, 1);
            utls_ucobs_rx_free(rx);
        }
        stream_free(&s);
    }
    /* Junk before the first marker, then zeros in a row: no datagram, no
     * error for the empty gaps, junk counted. */
    stream s;
    stream_init(&s);
    static const uint8_t junk[] = {0x17, 0x03, 0x03, 0, 0, 0, 0};
    stream_append_raw(&s, junk, sizeof(junk));
    stream_add(&s, d3, 3);
    utls_ucobs_rx *rx = rx_start(&s, NULL);
    feed(rx, &s, 0, s.wire_len);
    assert_int_equal(drain(rx, &s), 1);
    utls_ucobs_stats st = rx_stats(rx);
    assert_int_equal(st.junk_bytes, 3);
    assert_int_equal(st.framing_errors, 0);
    utls_ucobs_rx_free(rx);
    stream_free(&s);
    /* Invalid calls */
    rx = utls_ucobs_rx_new(NULL, 0);
    assert_int_equal(utls_ucobs_rx_feed(rx, 0, NULL, 5, 0), 0);
    assert_int_equal(utls_ucobs_rx_feed(rx, UINT64_MAX - 2, d3, 3, 0), 0);
    assert_int_equal(utls_ucobs_rx_feed(rx, 0, NULL, 0, 0), 1);
    utls_ucobs_rx_free(rx);
    utls_ucobs_rx_free(NULL);
}

/* An endless run of non-zero bytes in order is given up after
 * UTLS_UCOBS_MAX_FRAME; the store does not keep it; the stream recovers. */
static void test_ucobs_endless_run(void **state)
{
    (void)state;
    stream s;
    stream_init(&s);
    uint8_t zero = 0;
    uint8_t *junk = malloc(300000);
    assert_non_null(junk);
    memset(junk, 0x7F, 300000);
    stream_append_raw(&s, &zero, 1);
    stream_append_raw(&s, junk, 300000);
    uint8_t d[2] = {1, 2};
    stream_add(&s, d, 2);
    utls_ucobs_rx *rx = rx_start(&s, NULL);
    for (uint64_t p = 0; p < s.wire_len; p += 1000) {
        feed(rx, &s, p, p + 1000 < s.wire_len ? p + 1000 : s.wire_len);
        utls_ucobs_stats st = rx_stats(rx);
        assert_true(st.reasm.bytes_new - st.reasm.bytes_evicted <= s.wire_len); /* sanity */
    }
    assert_int_equal(drain(rx, &s), 1);
    assert_all_seen(&s);
    utls_ucobs_stats st = rx_stats(rx);
    assert_int_equal(st.framing_errors, 1);
    utls_ucobs_rx_free(rx);
    free(junk);
    stream_free(&s);
}

/* Duplicates and conflicting overlaps: the first copy wins, nothing is
 * delivered twice. */
static void test_ucobs_duplicates_conflicts(void **state)
{
    (void)state;
    rng_state = 99;
    stream s;
    stream_init(&s);
    for (int i = 0; i < 20; i++) {
        stream_add_random(&s, 50 + rnd32() % 200);
    }
    utls_ucobs_rx *rx = rx_start(&s, NULL);
    uint64_t h = s.off[3] + 5;
    /* everything past a hole, twice, then a conflicting copy */
    feed(rx, &s, h, s.wire_len);
    feed(rx, &s, h, s.wire_len);
    uint8_t *evil = malloc(s.wire_len);
    assert_non_null(evil);
    memset(evil, 0x55, s.wire_len);
    assert_int_equal(utls_ucobs_rx_feed(rx, h + 10, evil, (size_t)(s.wire_len - h - 10), 0), 1);
    assert_int_equal(drain(rx, &s), 16);
    /* overlapping pieces that fill the hole, twice */
    feed(rx, &s, 0, h - 3);
    feed(rx, &s, 2, h + 4);
    feed(rx, &s, 0, s.wire_len);
    assert_int_equal(drain(rx, &s), 4);
    assert_all_seen(&s);
    utls_ucobs_stats st = rx_stats(rx);
    assert_true(st.reasm.bytes_conflicting > 0);
    assert_int_equal(st.datagrams_in_order + st.datagrams_out_of_order, s.n);
    free(evil);
    utls_ucobs_rx_free(rx);
    stream_free(&s);
}

/* With a tiny ahead set, datagrams past a hole are held back and come in
 * order, still exactly once. */
static void test_ucobs_ahead_limit(void **state)
{
    (void)state;
    rng_state = 5;
    stream s;
    stream_init(&s);
    for (int i = 0; i < 10; i++) {
        stream_add_random(&s, 20);
    }
    utls_ucobs_limits lim;
    utls_ucobs_limits_default(&lim);
    lim.max_ahead = 2;
    utls_ucobs_rx *rx = rx_start(&s, &lim);
    feed(rx, &s, 1, s.wire_len);
    assert_int_equal(drain(rx, &s), 2);
    feed(rx, &s, 0, 1);
    assert_int_equal(drain(rx, &s), 8);
    assert_all_seen(&s);
    utls_ucobs_stats st = rx_stats(rx);
    assert_int_equal(st.held_back, 7);
    assert_int_equal(st.datagrams_out_of_order, 2);
    utls_ucobs_rx_free(rx);
    /* ready-bytes limit */
    utls_ucobs_limits_default(&lim);
    lim.max_ready_ahead_bytes = 30;
    rx = rx_start(&s, &lim);
    feed(rx, &s, 1, s.wire_len);
    assert_int_equal(utls_ucobs_rx_num_ready(rx), 1);
    feed(rx, &s, 0, 1);
    assert_int_equal(drain(rx, &s), 10);
    utls_ucobs_rx_free(rx);
    stream_free(&s);
}

/* Property: random datagrams, random segmentation, random order, duplicates
 * and overlaps: the delivered set equals the sent set, exactly once. */
static void test_ucobs_property(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        rng_state = seed * 0x9E3779B97F4A7C15ull;
        stream s;
        stream_init(&s);
        size_t n = 1 + rnd32() % 200;
        for (size_t i = 0; i < n; i++) {
            uint32_t k = rnd32() % 10;
            stream_add_random(&s, k == 0 ? 0 : k < 8 ? rnd32() % 300 : rnd32() % 5000);
        }
        /* cut into segments */
        size_t nseg = 0, cap = s.wire_len + 1;
        uint64_t *so = malloc(cap * 2 * sizeof(uint64_t));
        uint64_t *se = malloc(cap * 2 * sizeof(uint64_t));
        assert_non_null(so);
        assert_non_null(se);
        for (uint64_t p = 0; p < s.wire_len;) {
            uint64_t l = 1 + rnd32() % 1500;
            if (l > s.wire_len - p) {
                l = s.wire_len - p;
            }
            so[nseg] = p;
            se[nseg++] = p + l;
            p += l;
        }
        size_t nuniq = nseg;
        /* duplicates and overlapping copies */
        for (size_t i = 0; i < nuniq / 4; i++) {
            size_t j = rnd32() % nuniq;
            uint64_t a = so[j] > 3 ? so[j] - rnd32() % 4 : so[j];
            uint64_t b = se[j] + rnd32() % 4;
            so[nseg] = a;
            se[nseg++] = b < s.wire_len ? b : s.wire_len;
        }
        test_shuffle_pairs(so, se, nseg, &rng_state);
        utls_ucobs_rx *rx = rx_start(&s, NULL);
        for (size_t i = 0; i < nseg; i++) {
            feed(rx, &s, so[i], se[i]);
            if (rnd32() % 3 == 0) {
                drain(rx, &s);
            }
        }
        drain(rx, &s);
        assert_all_seen(&s);
        utls_ucobs_stats st = rx_stats(rx);
        assert_int_equal(st.datagrams_in_order + st.datagrams_out_of_order, s.n);
        assert_int_equal(st.framing_errors, 0);
        assert_int_equal(utls_ucobs_rx_walked(rx), s.wire_len);
        utls_ucobs_rx_free(rx);
        free(so);
        free(se);
        stream_free(&s);
    }
}

/* Overhead: frame size <= n + ceil(n * 0.004) + 2 for every n up to the
 * maximum, and the exact bound n + ceil(n/254) + 2 is reached by non-zero
 * data and never exceeded by random data. */
static void test_ucobs_overhead(void **state)
{
    (void)state;
    rng_state = 77;
    uint8_t *d = malloc(UTLS_UCOBS_MAX_DATAGRAM);
    uint8_t *f = malloc(UTLS_UCOBS_MAX_FRAME);
    assert_non_null(d);
    assert_non_null(f);
    for (size_t n = 0; n <= UTLS_UCOBS_MAX_DATAGRAM; n++) {
        size_t exact = n == 0 ? 3 : n + (n + 253) / 254 + 2;
        size_t allowed = n + (n * 4 + 999) / 1000 + 2; /* n + ceil(n*0.004) + 2 */
        assert_int_equal(utls_ucobs_frame_bound(n), exact);
        assert_true(exact <= allowed || n == 0);
    }
    assert_int_equal(utls_ucobs_frame_bound(0), 3); /* the empty datagram: 00 01 00 */
    static const size_t sizes[] = {1, 2, 253, 254, 255, 508, 509, 1000, 1419, 1448, 4096, 16384,
                                   65535};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k], fl = 0;
        size_t allowed = n + (n * 4 + 999) / 1000 + 2;
        memset(d, 0xEE, n);
        assert_int_equal(utls_ucobs_frame(f, UTLS_UCOBS_MAX_FRAME, &fl, d, n), 1);
        assert_int_equal(fl, n + (n + 253) / 254 + 2);
        assert_true(fl <= allowed);
        for (size_t i = 0; i < n; i++) {
            d[i] = (uint8_t)rnd32();
        }
        assert_int_equal(utls_ucobs_frame(f, UTLS_UCOBS_MAX_FRAME, &fl, d, n), 1);
        assert_true(fl <= utls_ucobs_frame_bound(n));
        assert_true(fl <= allowed);
        assert_int_equal(f[0], 0);
        assert_int_equal(f[fl - 1], 0);
        assert_null(memchr(f + 1, 0, fl - 2));
    }
    free(d);
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ucobs_round_trip),
        cmocka_unit_test(test_ucobs_every_hole_position),
        cmocka_unit_test(test_ucobs_figure6),
        cmocka_unit_test(test_ucobs_empty_and_max),
        cmocka_unit_test(test_ucobs_malformed),
        cmocka_unit_test(test_ucobs_endless_run),
        cmocka_unit_test(test_ucobs_duplicates_conflicts),
        cmocka_unit_test(test_ucobs_ahead_limit),
        cmocka_unit_test(test_ucobs_property),
        cmocka_unit_test(test_ucobs_overhead),
    };
    return cmocka_run_group_tests_name("ucobs", tests, NULL, NULL);
}
