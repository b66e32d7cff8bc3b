/*
 * GF(2^128) multiplication for GCM (see gf128.h). This code handles secrets:
 * neither version branches on or indexes memory by operand bits.
 */
#include "gf128.h"
#include "utls/be64.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
# define UTLS_GF128_CLMUL 1
# include <emmintrin.h>
# include <wmmintrin.h>
#endif

utls_gf128 utls_gf128_load(const unsigned char in[16])
{
    utls_gf128 a;

    a.hi = utls_load_be64(in);
    a.lo = utls_load_be64(in + 8);
    return a;
}

void utls_gf128_store(unsigned char out[16], utls_gf128 a)
{
    utls_store_be64(out, a.hi);
    utls_store_be64(out + 8, a.lo);
}

utls_gf128 utls_gf128_mul_portable(utls_gf128 a, utls_gf128 b)
{
    /* SP 800-38D 6.3, Algorithm 1: R = 11100001 || 0^120. */
    const uint64_t r = 0xe100000000000000ULL;
    utls_gf128 z = { 0, 0 }, v = b;
    int i;

    for (i = 0; i < 128; i++) {
        uint64_t word = i < 64 ? a.hi : a.lo; /* i is public */
        uint64_t bit = (word >> (63 - (i & 63))) & 1;
        uint64_t take = 0 - bit;
        uint64_t lsb = 0 - (v.lo & 1);

        z.hi ^= v.hi & take;
        z.lo ^= v.lo & take;
        v.lo = (v.lo >> 1) | (v.hi << 63);
        v.hi = (v.hi >> 1) ^ (r & lsb);
    }
    return z;
}

#ifdef UTLS_GF128_CLMUL
/*
 * Carry-less multiplication and reduction of byte-reflected operands (Gueron
 * and Kounavis, "Intel Carry-Less Multiplication Instruction and its Usage for
 * Computing the GCM Mode", Algorithm 5). Our (hi, lo) words are exactly the
 * byte-reflected block, so no shuffle is needed.
 */
__attribute__((target("pclmul,sse2"))) static utls_gf128 gf128_mul_clmul(utls_gf128 x,
                                                                         utls_gf128 y)
{
    /* Register moves, not _mm_set_epi64x: that goes through the stack and
     * stalls on store forwarding. */
    __m128i a = _mm_unpacklo_epi64(_mm_cvtsi64_si128((long long)x.lo),
                                   _mm_cvtsi64_si128((long long)x.hi));
    __m128i b = _mm_unpacklo_epi64(_mm_cvtsi64_si128((long long)y.lo),
                                   _mm_cvtsi64_si128((long long)y.hi));
    __m128i t3, t4, t5, t6, t7, t8, t9, t2;
    utls_gf128 z;

    t3 = _mm_clmulepi64_si128(a, b, 0x00);
    t4 = _mm_clmulepi64_si128(a, b, 0x10);
    t5 = _mm_clmulepi64_si128(a, b, 0x01);
    t6 = _mm_clmulepi64_si128(a, b, 0x11);
    t4 = _mm_xor_si128(t4, t5);
    t5 = _mm_slli_si128(t4, 8);
    t4 = _mm_srli_si128(t4, 8);
    t3 = _mm_xor_si128(t3, t5);
    t6 = _mm_xor_si128(t6, t4);
    /* Shift the 256-bit product left by one: the operands are reflected. */
    t7 = _mm_srli_epi32(t3, 31);
    t8 = _mm_srli_epi32(t6, 31);
    t3 = _mm_slli_epi32(t3, 1);
    t6 = _mm_slli_epi32(t6, 1);
    t9 = _mm_srli_si128(t7, 12);
    t8 = _mm_slli_si128(t8, 4);
    t7 = _mm_slli_si128(t7, 4);
    t3 = _mm_or_si128(t3, t7);
    t6 = _mm_or_si128(t6, t8);
    t6 = _mm_or_si128(t6, t9);
    /* Reduce modulo x^128 + x^7 + x^2 + x + 1. */
    t7 = _mm_slli_epi32(t3, 31);
    t8 = _mm_slli_epi32(t3, 30);
    t9 = _mm_slli_epi32(t3, 25);
    t7 = _mm_xor_si128(t7, t8);
    t7 = _mm_xor_si128(t7, t9);
    t8 = _mm_srli_si128(t7, 4);
    t7 = _mm_slli_si128(t7, 12);
    t3 = _mm_xor_si128(t3, t7);
    t2 = _mm_srli_epi32(t3, 1);
    t4 = _mm_srli_epi32(t3, 2);
    t5 = _mm_srli_epi32(t3, 7);
    t2 = _mm_xor_si128(t2, t4);
    t2 = _mm_xor_si128(t2, t5);
    t2 = _mm_xor_si128(t2, t8);
    t3 = _mm_xor_si128(t3, t2);
    t6 = _mm_xor_si128(t6, t3);

    z.lo = (uint64_t)_mm_cvtsi128_si64(t6);
    z.hi = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(t6, t6));
    return z;
}
#endif

#ifdef UTLS_GF128_TEST_HOOK
int utls_gf128_test_force_portable;
#endif

int utls_gf128_have_clmul(void)
{
#ifdef UTLS_GF128_TEST_HOOK
    if (utls_gf128_test_force_portable) {
        return 0;
    }
#endif
#ifdef UTLS_GF128_CLMUL
    static int have = -1;

    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
    }
    return have;
#else
    return 0;
#endif
}

utls_gf128 utls_gf128_mul(utls_gf128 a, utls_gf128 b)
{
#ifdef UTLS_GF128_CLMUL
    if (utls_gf128_have_clmul()) {
        return gf128_mul_clmul(a, b);
    }
#endif
    return utls_gf128_mul_portable(a, b);
}
