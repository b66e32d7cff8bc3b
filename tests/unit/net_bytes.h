/* net_bytes.h: big-endian stores for the unit tests that build IP and TCP
 * headers by hand (test_tap_validate.c, test_tap_filter.c). */
#ifndef UTLS_TESTS_UNIT_NET_BYTES_H
#define UTLS_TESTS_UNIT_NET_BYTES_H

#include <stdint.h>

static inline void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

static inline void put32(unsigned char *p, uint32_t v)
{
    put16(p, (uint16_t)(v >> 16));
    put16(p + 2, (uint16_t)v);
}

#endif
