/*
 * test_rng.h: the deterministic generators the tests draw their data from,
 * so that a failure reproduces from its seed. Marsaglia's xorshift64 and
 * Vigna's xorshift64*; the state must not be 0. Header-only (static inline).
 */
#ifndef UTLS_TEST_RNG_H
#define UTLS_TEST_RNG_H

#include <stddef.h>
#include <stdint.h>

/* test_xorshift64 advances |*state| (xorshift64, shifts 13, 7, 17) and
 * returns it. */
static inline uint64_t test_xorshift64(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* test_xorshift64star advances |*state| (xorshift64*, shifts 12, 25, 27) and
 * returns the scrambled output; its high bits are the good ones. */
static inline uint64_t test_xorshift64star(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 0x2545F4914F6CDD1DULL;
}

/* test_shuffle_pairs shuffles the pairs (|a|[i], |b|[i]) of |n| entries
 * (Fisher-Yates), drawing from |*state| with test_xorshift64star: segments
 * given as (start, end) arrive in a seeded random order. */
static inline void test_shuffle_pairs(uint64_t *a, uint64_t *b, size_t n, uint64_t *state)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (uint32_t)(test_xorshift64star(state) >> 32) % i;
        uint64_t t = a[i - 1];

        a[i - 1] = a[j];
        a[j] = t;
        t = b[i - 1];
        b[i - 1] = b[j];
        b[j] = t;
    }
}

#endif
