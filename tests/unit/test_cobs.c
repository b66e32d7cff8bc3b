/* test_cobs.c: unit tests for the COBS codec (core/include/utls/cobs.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "utls/cobs.h"
#include "test_rng.h"

#define GUARD 64
#define GUARD_BYTE 0xA5

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint8_t rnd8(void)
{
    return (uint8_t)(test_xorshift64star(&rng_state) >> 56);
}

typedef enum { DATA_RANDOM, DATA_ZEROS, DATA_NONZERO, DATA_SPARSE } data_kind;

static void fill(uint8_t *buf, size_t n, data_kind k)
{
    for (size_t i = 0; i < n; i++) {
        switch (k) {
        case DATA_RANDOM:
            buf[i] = rnd8();
            break;
        case DATA_ZEROS:
            buf[i] = 0;
            break;
        case DATA_NONZERO:
            buf[i] = (uint8_t)(rnd8() | 1);
            break;
        case DATA_SPARSE: /* zeros about every 300 bytes: long blocks */
            buf[i] = rnd8() < 1 ? 0 : (uint8_t)(rnd8() | 0x80);
            break;
        }
    }
}

static int guard_intact(const uint8_t *p)
{
    for (size_t i = 0; i < GUARD; i++) {
        if (p[i] != GUARD_BYTE) {
            return 0;
        }
    }
    return 1;
}

/* Encodes |in| into a buffer of exactly the bound (followed by a guard),
 * checks the size limit and the absence of zeros, decodes into exactly n
 * bytes (followed by a guard) and compares. */
static void round_trip(const uint8_t *in, size_t n)
{
    size_t bound = utls_cobs_encode_bound(n);
    assert_int_equal(bound, UTLS_COBS_ENCODE_BOUND(n));
    size_t limit = n == 0 ? 1 : n + (n + 253) / 254;
    assert_true(bound <= limit);
    uint8_t *enc = malloc(bound + GUARD);
    uint8_t *dec = malloc(n + GUARD);
    assert_non_null(enc);
    assert_non_null(dec);
    memset(enc, GUARD_BYTE, bound + GUARD);
    memset(dec, GUARD_BYTE, n + GUARD);
    size_t elen = 12345;
    assert_int_equal(utls_cobs_encode(in, n, enc, bound, &elen), UTLS_COBS_OK);
    assert_true(elen >= 1);
    assert_true(elen <= bound);
    assert_true(elen >= n + 1); /* at least one code byte per block, one block per zero plus one */
    assert_true(guard_intact(enc + bound));
    assert_null(memchr(enc, 0, elen));
    size_t dlen = 12345;
    assert_int_equal(utls_cobs_decode(enc, elen, dec, n, &dlen), UTLS_COBS_OK);
    assert_int_equal(dlen, n);
    assert_true(guard_intact(dec + n));
    assert_memory_equal(dec, in, n);
    /* One byte short of the encoded size must fail without overrunning. */
    if (elen > 0) {
        memset(enc, GUARD_BYTE, bound + GUARD);
        size_t l = 7;
        assert_int_equal(utls_cobs_encode(in, n, enc, elen - 1, &l), UTLS_COBS_ERR_SPACE);
        assert_int_equal(l, 0);
        assert_true(guard_intact(enc + elen - 1));
        /* Re-encode for the next check (the failed call may leave a partial
         * encoding). */
        assert_int_equal(utls_cobs_encode(in, n, enc, bound, &elen), UTLS_COBS_OK);
    }
    if (n > 0) {
        memset(dec, GUARD_BYTE, n + GUARD);
        size_t l = 7;
        assert_int_equal(utls_cobs_decode(enc, elen, dec, n - 1, &l), UTLS_COBS_ERR_SPACE);
        assert_int_equal(l, 0);
        assert_true(guard_intact(dec + n - 1));
    }
    free(enc);
    free(dec);
}

static void test_round_trip_small(void **state)
{
    (void)state;
    uint8_t buf[1001];
    for (int k = DATA_RANDOM; k <= DATA_SPARSE; k++) {
        for (size_t n = 0; n <= 1000; n++) {
            fill(buf, n, (data_kind)k);
            round_trip(buf, n);
        }
    }
}

static void test_round_trip_edges(void **state)
{
    (void)state;
    static const size_t lens[] = {253, 254, 255, 256, 507, 508, 509, 510, 762, 763,
                                  1200, 1500, 9000, 65535, 65536, 65537};
    size_t max = 65537;
    uint8_t *buf = malloc(max);
    assert_non_null(buf);
    for (int k = DATA_RANDOM; k <= DATA_SPARSE; k++) {
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
            for (int rep = 0; rep < 4; rep++) {
                fill(buf, lens[i], (data_kind)k);
                round_trip(buf, lens[i]);
            }
        }
    }
    /* A zero at every position around the block boundaries. */
    for (size_t n = 250; n <= 512; n++) {
        for (size_t z = 0; z < n; z += (z > 8 && z + 8 < n) ? 37 : 1) {
            fill(buf, n, DATA_NONZERO);
            buf[z] = 0;
            round_trip(buf, n);
        }
    }
    free(buf);
}

/* The worst case is exactly the bound: non-zero runs cost ceil(n/254). */
static void test_overhead(void **state)
{
    (void)state;
    size_t max = 65536;
    uint8_t *buf = malloc(max);
    uint8_t *enc = malloc(UTLS_COBS_ENCODE_BOUND(max));
    assert_non_null(buf);
    assert_non_null(enc);
    fill(buf, max, DATA_NONZERO);
    for (size_t n = 1; n <= max; n += n < 2000 ? 1 : 97) {
        size_t elen = 0;
        assert_int_equal(utls_cobs_encode(buf, n, enc, UTLS_COBS_ENCODE_BOUND(n), &elen),
                         UTLS_COBS_OK);
        assert_int_equal(elen, n + (n + 253) / 254);
        /* at most 0.4% + 1 byte: ceil(n/254) <= n/254 + 1 */
        assert_true((double)elen <= (double)n * (1.0 + 1.0 / 254.0) + 1.0);
    }
    assert_int_equal(utls_cobs_encode_bound(0), 1);
    assert_int_equal(utls_cobs_encode_bound(1), 2);
    assert_int_equal(utls_cobs_encode_bound(254), 255);
    assert_int_equal(utls_cobs_encode_bound(255), 257);
    assert_int_equal(utls_cobs_encode_bound(508), 510);
    assert_int_equal(utls_cobs_encode_bound(509), 512);
    assert_int_equal(utls_cobs_encode_bound(SIZE_MAX), 0);
    assert_int_equal(utls_cobs_encode_bound(SIZE_MAX - 1), 0);
    /* The largest multiple-of-254 input that still fits. */
    size_t k = SIZE_MAX / 255;
    assert_int_equal(utls_cobs_encode_bound(k * 254), k * 255);
    free(buf);
    free(enc);
}

static void check_vector(const uint8_t *in, size_t n, const uint8_t *want, size_t wn)
{
    uint8_t enc[300];
    uint8_t dec[300];
    size_t l = 0;
    assert_int_equal(utls_cobs_encode(in, n, enc, sizeof(enc), &l), UTLS_COBS_OK);
    assert_int_equal(l, wn);
    assert_memory_equal(enc, want, wn);
    assert_int_equal(utls_cobs_decode(want, wn, dec, sizeof(dec), &l), UTLS_COBS_OK);
    assert_int_equal(l, n);
    assert_memory_equal(dec, in, n);
}

/* Examples from the Wikipedia article "Consistent Overhead Byte Stuffing"
 * (the encoding table; its trailing 00 delimiter is left out here, since
 * this codec adds no delimiters). Written out as literals. */
static void test_vectors(void **state)
{
    (void)state;
    static const uint8_t e0_in[] = {0x00};
    static const uint8_t e0_out[] = {0x01, 0x01};
    check_vector(e0_in, 1, e0_out, 2);
    static const uint8_t e1_in[] = {0x00, 0x00};
    static const uint8_t e1_out[] = {0x01, 0x01, 0x01};
    check_vector(e1_in, 2, e1_out, 3);
    static const uint8_t e2_in[] = {0x00, 0x11, 0x00};
    static const uint8_t e2_out[] = {0x01, 0x02, 0x11, 0x01};
    check_vector(e2_in, 3, e2_out, 4);
    static const uint8_t e3_in[] = {0x11, 0x22, 0x00, 0x33};
    static const uint8_t e3_out[] = {0x03, 0x11, 0x22, 0x02, 0x33};
    check_vector(e3_in, 4, e3_out, 5);
    static const uint8_t e4_in[] = {0x11, 0x22, 0x33, 0x44};
    static const uint8_t e4_out[] = {0x05, 0x11, 0x22, 0x33, 0x44};
    check_vector(e4_in, 4, e4_out, 5);
    static const uint8_t e5_in[] = {0x11, 0x00, 0x00, 0x00};
    static const uint8_t e5_out[] = {0x02, 0x11, 0x01, 0x01, 0x01};
    check_vector(e5_in, 4, e5_out, 5);
    /* Empty input: one empty final block (this codec's convention). */
    static const uint8_t e_empty_out[] = {0x01};
    check_vector(NULL, 0, e_empty_out, 1);

    uint8_t in[255];
    uint8_t out[258];
    /* 01 02 .. FE (254 bytes) -> FF 01 02 .. FE */
    for (int i = 0; i < 254; i++) {
        in[i] = (uint8_t)(i + 1);
    }
    out[0] = 0xFF;
    memcpy(out + 1, in, 254);
    check_vector(in, 254, out, 255);
    /* 00 01 02 .. FE (255 bytes) -> 01 FF 01 02 .. FE */
    for (int i = 0; i < 255; i++) {
        in[i] = (uint8_t)i;
    }
    out[0] = 0x01;
    out[1] = 0xFF;
    memcpy(out + 2, in + 1, 254);
    check_vector(in, 255, out, 256);
    /* 01 02 .. FE FF (255 bytes) -> FF 01 02 .. FE 02 FF */
    for (int i = 0; i < 255; i++) {
        in[i] = (uint8_t)(i + 1);
    }
    out[0] = 0xFF;
    memcpy(out + 1, in, 254);
    out[255] = 0x02;
    out[256] = 0xFF;
    check_vector(in, 255, out, 257);
    /* 02 03 .. FF 00 (255 bytes) -> FF 02 03 .. FF 01 01 */
    for (int i = 0; i < 254; i++) {
        in[i] = (uint8_t)(i + 2);
    }
    in[254] = 0x00;
    out[0] = 0xFF;
    memcpy(out + 1, in, 254);
    out[255] = 0x01;
    out[256] = 0x01;
    check_vector(in, 255, out, 257);
    /* 03 04 .. FF 00 01 (255 bytes) -> FE 03 04 .. FF 02 01 */
    for (int i = 0; i < 253; i++) {
        in[i] = (uint8_t)(i + 3);
    }
    in[253] = 0x00;
    in[254] = 0x01;
    out[0] = 0xFE;
    memcpy(out + 1, in, 253);
    out[254] = 0x02;
    out[255] = 0x01;
    check_vector(in, 255, out, 256);
}

/* Decodes |in| into a guarded buffer of |cap| bytes and expects |want|. */
static void bad_decode(const uint8_t *in, size_t n, size_t cap, utls_cobs_result want)
{
    uint8_t out[600];
    assert_true(cap + GUARD <= sizeof(out));
    memset(out, GUARD_BYTE, sizeof(out));
    size_t l = 99;
    /* Copy the input to the heap at its exact size so ASan sees overreads. */
    uint8_t *h = malloc(n ? n : 1);
    assert_non_null(h);
    if (n) {
        memcpy(h, in, n);
    }
    assert_int_equal(utls_cobs_decode(h, n, out, cap, &l), want);
    assert_int_equal(l, 0);
    assert_true(guard_intact(out + cap));
    free(h);
}

static void test_hostile_decode(void **state)
{
    (void)state;
    /* Empty input: not an encoding. */
    bad_decode(NULL, 0, 16, UTLS_COBS_ERR_CODE);
    /* Zero as a code byte, and zero inside a block. */
    static const uint8_t z0[] = {0x00};
    bad_decode(z0, 1, 16, UTLS_COBS_ERR_ZERO);
    static const uint8_t z1[] = {0x03, 0x11, 0x00, 0x01};
    bad_decode(z1, 4, 16, UTLS_COBS_ERR_ZERO);
    static const uint8_t z2[] = {0x02, 0x11, 0x00};
    bad_decode(z2, 3, 16, UTLS_COBS_ERR_ZERO);
    static const uint8_t z3[] = {0x02, 0x11, 0x02, 0x22, 0x01, 0x00};
    bad_decode(z3, 6, 16, UTLS_COBS_ERR_ZERO);
    /* Code past the end (truncated block). */
    static const uint8_t t0[] = {0x05, 0x11, 0x22, 0x33};
    bad_decode(t0, 4, 16, UTLS_COBS_ERR_CODE);
    static const uint8_t t1[] = {0x02};
    bad_decode(t1, 1, 16, UTLS_COBS_ERR_CODE);
    static const uint8_t t2[] = {0x02, 0x11, 0xFF, 0x22};
    bad_decode(t2, 4, 16, UTLS_COBS_ERR_CODE);
    /* A zero past the end of a truncated block is reported as a zero. */
    static const uint8_t t3[] = {0x05, 0x11, 0x00};
    bad_decode(t3, 3, 16, UTLS_COBS_ERR_ZERO);
    /* Truncated 255-block. */
    uint8_t big[600];
    memset(big, 0x42, sizeof(big));
    big[0] = 0xFF;
    bad_decode(big, 254, 500, UTLS_COBS_ERR_CODE);
    /* Non-canonical: an empty final block after a 255-block. */
    big[255] = 0x01;
    bad_decode(big, 256, 500, UTLS_COBS_ERR_CODE);
    /* ... while FF block + 02 xx is fine (255 bytes). */
    big[255] = 0x02;
    uint8_t out[300];
    size_t l = 0;
    assert_int_equal(utls_cobs_decode(big, 257, out, sizeof(out), &l), UTLS_COBS_OK);
    assert_int_equal(l, 255);
    /* Output too small, at every cap below the decoded size. */
    static const uint8_t s0[] = {0x03, 0x11, 0x22, 0x02, 0x33}; /* 11 22 00 33 */
    for (size_t cap = 0; cap < 4; cap++) {
        bad_decode(s0, 5, cap, UTLS_COBS_ERR_SPACE);
    }
    for (size_t cap = 0; cap < 255; cap++) {
        bad_decode(big, 257, cap, UTLS_COBS_ERR_SPACE);
    }
    /* Random garbage: never crashes, never overruns, and anything that
     * decodes re-encodes to the same bytes. */
    uint8_t g[512];
    uint8_t d[512 + GUARD];
    uint8_t e[UTLS_COBS_ENCODE_BOUND(512)];
    for (int it = 0; it < 20000; it++) {
        size_t n = rnd8() + (size_t)(rnd8() & 1) * 256;
        for (size_t i = 0; i < n; i++) {
            g[i] = (it & 1) ? (uint8_t)(rnd8() | 1) : rnd8();
            if ((it & 2) && rnd8() < 8) {
                g[i] = 0xFF;
            }
        }
        size_t cap = (it & 4) ? n / 2 : n;
        memset(d, GUARD_BYTE, sizeof(d));
        utls_cobs_result r = utls_cobs_decode(g, n, d, cap, &l);
        assert_true(guard_intact(d + cap));
        if (r == UTLS_COBS_OK) {
            assert_true(l + 1 <= n);
            size_t el = 0;
            assert_int_equal(utls_cobs_encode(d, l, e, sizeof(e), &el), UTLS_COBS_OK);
            assert_int_equal(el, n);
            assert_memory_equal(e, g, n);
        } else {
            assert_int_equal(l, 0);
        }
    }
}

static void test_encode_space(void **state)
{
    (void)state;
    uint8_t in[700];
    uint8_t out[800];
    fill(in, sizeof(in), DATA_RANDOM);
    size_t need = 0;
    assert_int_equal(utls_cobs_encode(in, sizeof(in), out, sizeof(out), &need), UTLS_COBS_OK);
    for (size_t cap = 0; cap < need; cap++) {
        memset(out, GUARD_BYTE, sizeof(out));
        size_t l = 5;
        assert_int_equal(utls_cobs_encode(in, sizeof(in), out, cap, &l), UTLS_COBS_ERR_SPACE);
        assert_int_equal(l, 0);
        for (size_t i = cap; i < sizeof(out); i++) {
            assert_int_equal(out[i], GUARD_BYTE);
        }
    }
    size_t l = 0;
    assert_int_equal(utls_cobs_encode(NULL, 0, out, 0, &l), UTLS_COBS_ERR_SPACE);
    assert_string_equal(utls_cobs_result_name(UTLS_COBS_OK), "ok");
    assert_string_equal(utls_cobs_result_name(UTLS_COBS_ERR_ZERO), "zero");
    assert_string_equal(utls_cobs_result_name(UTLS_COBS_ERR_CODE), "code");
    assert_string_equal(utls_cobs_result_name(UTLS_COBS_ERR_SPACE), "space");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_small), cmocka_unit_test(test_round_trip_edges),
        cmocka_unit_test(test_overhead),         cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_hostile_decode),   cmocka_unit_test(test_encode_space),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
