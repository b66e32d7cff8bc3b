/*
 * be64.h: big-endian 64-bit loads and stores (sequence numbers in nonces and
 * AAD, GHASH blocks), for the provider, its libssl client and the runtime:
 * one copy. Written out byte by byte, which compilers turn into one
 * byte-swapping load or store. Pure C (core/).
 */
#ifndef UTLS_BE64_H
#define UTLS_BE64_H

#include <stdint.h>

static inline uint64_t utls_load_be64(const unsigned char *p)
{
    return ((uint64_t)p[0] << 56) | ((uint64_t)p[1] << 48) | ((uint64_t)p[2] << 40)
        | ((uint64_t)p[3] << 32) | ((uint64_t)p[4] << 24) | ((uint64_t)p[5] << 16)
        | ((uint64_t)p[6] << 8) | (uint64_t)p[7];
}

static inline void utls_store_be64(unsigned char *p, uint64_t v)
{
    p[0] = (unsigned char)(v >> 56);
    p[1] = (unsigned char)(v >> 48);
    p[2] = (unsigned char)(v >> 40);
    p[3] = (unsigned char)(v >> 32);
    p[4] = (unsigned char)(v >> 24);
    p[5] = (unsigned char)(v >> 16);
    p[6] = (unsigned char)(v >> 8);
    p[7] = (unsigned char)v;
}

#endif
