/*
 * gf128.h: multiplication in GCM's field GF(2^128) (NIST SP 800-38D 6.3), for
 * the TLS 1.2 AES-GCM candidate search (aeadsearch.c). Internal to the
 * provider.
 *
 * An element is two 64-bit words: hi holds bytes 0..7 of the 16-byte block
 * read big-endian, lo bytes 8..15. Byte 0's most significant bit is the
 * coefficient of x^0 (GCM's reflected bit order).
 *
 * This code handles secrets (powers of the hash key H): both implementations
 * run in time independent of their operands.
 */
#ifndef UTLS_PROVIDER_GF128_H
#define UTLS_PROVIDER_GF128_H

#include <stdint.h>

typedef struct {
    uint64_t hi;
    uint64_t lo;
} utls_gf128;

/* utls_gf128_load reads a 16-byte GCM block. */
utls_gf128 utls_gf128_load(const unsigned char in[16]);

/* utls_gf128_store writes |a| as a 16-byte GCM block. */
void utls_gf128_store(unsigned char out[16], utls_gf128 a);

/* utls_gf128_mul returns a·b, with carry-less multiplication instructions when
 * the CPU has them and the portable version otherwise. */
utls_gf128 utls_gf128_mul(utls_gf128 a, utls_gf128 b);

/* utls_gf128_mul_portable returns a·b by SP 800-38D Algorithm 1, with masks
 * instead of branches. Exposed for the tests, which check the two against
 * each other. */
utls_gf128 utls_gf128_mul_portable(utls_gf128 a, utls_gf128 b);

/* utls_gf128_have_clmul returns 1 when utls_gf128_mul uses PCLMULQDQ. */
int utls_gf128_have_clmul(void);

#ifdef UTLS_GF128_TEST_HOOK
/* utls_gf128_test_force_portable exists only in test programs that compile
 * gf128.c with UTLS_GF128_TEST_HOOK defined (tests/fuzz/fuzz_aeadsearch.c);
 * utls.so, utls_provider_static and the fork never have it. While it is
 * nonzero, utls_gf128_have_clmul returns 0 and utls_gf128_mul uses the
 * portable multiplication, so that the search's portable path can be checked
 * against PCLMULQDQ on the same machine. The test owns it; not thread-safe. */
extern int utls_gf128_test_force_portable;
#endif

#endif
