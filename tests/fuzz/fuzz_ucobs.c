/* fuzz_ucobs.c: libFuzzer target for the uCOBS receiver (core/include/utls/ucobs.h).
 *
 * The input's first 8 bytes seed a generator; the rest is the wire stream.
 * The stream is fed twice: once in order in random-sized pieces, once cut
 * into random segments fed in random order with duplicates. Checks:
 *   - no crash, no out-of-bounds access (run under ASan by make fuzz);
 *   - every datagram delivered is exactly the bytes on the wire: its frame,
 *     rebuilt with utls_ucobs_frame, equals the wire at its offset;
 *   - no offset is delivered twice;
 *   - both feeds deliver the same set of datagrams (out-of-order reception
 *     finds nothing the in-order walk would not, and loses nothing);
 *   - only datagrams that started past a hole are marked out of order. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utls/ucobs.h"
#include "test_rng.h"

#define FUZZ_NAME "fuzz_ucobs"
#include "fuzz_check.h"

/* Bounds the work per input (and the size of the delivered-offset lists). */
#define FUZZ_MAX_WIRE 200000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng;

static uint32_t next32(void)
{
    return (uint32_t)(test_xorshift64star(&rng) >> 32);
}

typedef struct {
    uint64_t *off;
    size_t n;
} offsets;

static void take_all(utls_ucobs_rx *rx, const uint8_t *wire, size_t wire_len, offsets *got,
                     uint8_t *frame)
{
    utls_ucobs_datagram dg;

    while (utls_ucobs_rx_peek(rx, &dg)) {
        size_t fl = 0;
        CHECK(dg.len <= UTLS_UCOBS_MAX_DATAGRAM);
        CHECK(utls_ucobs_frame(frame, UTLS_UCOBS_MAX_FRAME, &fl, dg.data, dg.len));
        CHECK(dg.offset <= wire_len && fl <= wire_len - dg.offset);
        CHECK(memcmp(frame, wire + dg.offset, fl) == 0);
        for (size_t i = 0; i < got->n; i++) {
            CHECK(got->off[i] != dg.offset);
        }
        got->off[got->n++] = dg.offset;
        CHECK(utls_ucobs_rx_pop(rx));
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *wire;
    size_t wire_len, nseg = 0;
    offsets a = {0}, b = {0};
    uint64_t *so, *se;
    uint8_t *frame;
    utls_ucobs_rx *rx;

    if (size < 8 || size - 8 > FUZZ_MAX_WIRE) {
        return 0;
    }
    memcpy(&rng, data, 8);
    rng |= 1;
    wire = data + 8;
    wire_len = size - 8;
    /* at most one datagram per two wire bytes */
    a.off = malloc((wire_len / 2 + 1) * sizeof(uint64_t));
    b.off = malloc((wire_len / 2 + 1) * sizeof(uint64_t));
    so = malloc((2 * wire_len + 2) * sizeof(uint64_t));
    se = malloc((2 * wire_len + 2) * sizeof(uint64_t));
    frame = malloc(UTLS_UCOBS_MAX_FRAME);
    CHECK(a.off && b.off && so && se && frame);

    /* 1. in order */
    rx = utls_ucobs_rx_new(NULL, 0);
    CHECK(rx != NULL);
    for (size_t p = 0; p < wire_len;) {
        size_t l = 1 + next32() % 2000;
        if (l > wire_len - p) {
            l = wire_len - p;
        }
        CHECK(utls_ucobs_rx_feed(rx, p, wire + p, l, p));
        p += l;
        take_all(rx, wire, wire_len, &a, frame);
    }
    utls_ucobs_datagram dg;
    CHECK(!utls_ucobs_rx_peek(rx, &dg));
    utls_ucobs_stats st;
    utls_ucobs_rx_get_stats(rx, &st);
    CHECK(st.datagrams_out_of_order == 0);
    CHECK(st.datagrams_in_order == a.n);
    utls_ucobs_rx_free(rx);

    /* 2. segments in random order, with duplicates */
    for (size_t p = 0; p < wire_len;) {
        size_t l = 1 + next32() % 600;
        if (l > wire_len - p) {
            l = wire_len - p;
        }
        so[nseg] = p;
        se[nseg++] = p + l;
        p += l;
    }
    for (size_t i = 0, n = nseg; i < n / 3; i++) {
        size_t j = next32() % n;
        so[nseg] = so[j];
        se[nseg++] = se[j];
    }
    test_shuffle_pairs(so, se, nseg, &rng);
    rx = utls_ucobs_rx_new(NULL, 0);
    CHECK(rx != NULL);
    for (size_t i = 0; i < nseg; i++) {
        CHECK(utls_ucobs_rx_feed(rx, so[i], wire + so[i], (size_t)(se[i] - so[i]), i));
        if (next32() % 2) {
            take_all(rx, wire, wire_len, &b, frame);
        }
    }
    take_all(rx, wire, wire_len, &b, frame);
    CHECK(utls_ucobs_rx_walked(rx) == wire_len);
    utls_ucobs_rx_free(rx);

    CHECK(a.n == b.n);
    qsort(b.off, b.n, sizeof(uint64_t), cmp_u64);
    for (size_t i = 0; i < a.n; i++) {
        CHECK(a.off[i] == b.off[i]); /* a is in stream order already */
    }
    free(a.off);
    free(b.off);
    free(so);
    free(se);
    free(frame);
    return 0;
}
