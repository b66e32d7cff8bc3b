/*
 * sched_wire.h: the self-describing messages the scheduler's test and
 * benchmark programs send, one message per TLS record:
 *
 *   "uSCH" | total length u32 | app id u64 | generated ns u64 |
 *   deadline ns u64 (0: none) | depends on app id u64 (0: none) |
 *   kind u8 | sub-stream u8 | priority u8 | 0 u8 | body
 *
 * all big-endian; body byte i of message id is (id * 31 + i) & 0xff, so a
 * receiver checks identity and integrity from the bytes alone. Times are
 * CLOCK_MONOTONIC, shared by the testbed's namespaces (one host).
 */
#ifndef UTLS_TESTS_SCHED_WIRE_H
#define UTLS_TESTS_SCHED_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define SW_HDR_LEN 44
#define SW_MAX 16384

enum { SW_BULK = 0, SW_URGENT = 1, SW_FRAME = 2, SW_MIX = 3 };

typedef struct {
    uint32_t len;
    uint64_t id, gen_ns, deadline_ns, dep;
    uint8_t kind, substream, priority;
} sw_hdr;

static inline uint64_t sw_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void sw_put(uint8_t *p, uint64_t v, int n)
{
    int i;

    for (i = n - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline uint64_t sw_get(const uint8_t *p, int n)
{
    uint64_t v = 0;
    int i;

    for (i = 0; i < n; i++) {
        v = v << 8 | p[i];
    }
    return v;
}

/* sw_build writes a message of h->len bytes (SW_HDR_LEN..SW_MAX) to |out|. */
static inline int sw_build(uint8_t *out, const sw_hdr *h)
{
    size_t i;

    if (h->len < SW_HDR_LEN || h->len > SW_MAX) {
        return 0;
    }
    memcpy(out, "uSCH", 4);
    sw_put(out + 4, h->len, 4);
    sw_put(out + 8, h->id, 8);
    sw_put(out + 16, h->gen_ns, 8);
    sw_put(out + 24, h->deadline_ns, 8);
    sw_put(out + 32, h->dep, 8);
    out[40] = h->kind;
    out[41] = h->substream;
    out[42] = h->priority;
    out[43] = 0;
    for (i = SW_HDR_LEN; i < h->len; i++) {
        out[i] = (uint8_t)(h->id * 31 + i);
    }
    return 1;
}

/* sw_peek_len: the length a header claims, 0 if fewer than 8 bytes, or
 * SIZE_MAX if the bytes are not a message header. */
static inline size_t sw_peek_len(const uint8_t *p, size_t n)
{
    size_t len;

    if (n < 8) {
        return 0;
    }
    len = (size_t)sw_get(p + 4, 4);
    if (memcmp(p, "uSCH", 4) != 0 || len < SW_HDR_LEN || len > SW_MAX) {
        return (size_t)-1;
    }
    return len;
}

/* sw_parse checks that |p|[0..n) is exactly one intact message. */
static inline int sw_parse(const uint8_t *p, size_t n, sw_hdr *out)
{
    size_t i;

    if (sw_peek_len(p, n) != n || p[43] != 0) {
        return 0;
    }
    out->len = (uint32_t)n;
    out->id = sw_get(p + 8, 8);
    out->gen_ns = sw_get(p + 16, 8);
    out->deadline_ns = sw_get(p + 24, 8);
    out->dep = sw_get(p + 32, 8);
    out->kind = p[40];
    out->substream = p[41];
    out->priority = p[42];
    for (i = SW_HDR_LEN; i < n; i++) {
        if (p[i] != (uint8_t)(out->id * 31 + i)) {
            return 0;
        }
    }
    return 1;
}

#endif
