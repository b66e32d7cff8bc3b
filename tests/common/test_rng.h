/*
 * test_rng.h: the deterministic generators the tests (and the testbed's
 * nfq-delay) draw their data from, so that a failure reproduces from its
 * seed. Marsaglia's xorshift64 and Vigna's xorshift64* (the state must not
 * be 0), and xoshiro256** seeded through splitmix64 (any seed). Header-only
 * (static inline).
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

/* test_splitmix64 advances |*x| by the golden-ratio increment and returns
 * it mixed: one seed spreads into xoshiro256**'s four words. */
static inline uint64_t test_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* test_xoshiro256ss_seed fills the state |s| from |seed| with splitmix64
 * (never all zero). */
static inline void test_xoshiro256ss_seed(uint64_t s[4], uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        s[i] = test_splitmix64(&seed);
    }
}

static inline uint64_t test_rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* test_xoshiro256ss_next advances the state |s| (xoshiro256**) and returns
 * its next output. */
static inline uint64_t test_xoshiro256ss_next(uint64_t s[4])
{
    uint64_t result = test_rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = test_rotl64(s[3], 45);
    return result;
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
