/* cobs.c: COBS encoder and decoder; see include/utls/cobs.h. Runs of data
 * bytes are found with memchr and moved with memcpy, not byte by byte. */
#include "utls/cobs.h"

#include <string.h>

size_t utls_cobs_encode_bound(size_t n)
{
    if (n == 0) {
        return 1;
    }
    size_t extra = n / UTLS_COBS_BLOCK + (n % UTLS_COBS_BLOCK != 0);
    if (n > SIZE_MAX - extra) {
        return 0;
    }
    return n + extra;
}

utls_cobs_result utls_cobs_encode(const uint8_t *in, size_t n, uint8_t *out, size_t cap,
                                  size_t *out_len)
{
    const uint8_t *p = in;
    const uint8_t *end = in + n;
    size_t o = 0;
    *out_len = 0;
    for (;;) {
        size_t rem = (size_t)(end - p);
        size_t lim = rem < UTLS_COBS_BLOCK ? rem : UTLS_COBS_BLOCK;
        const uint8_t *z = lim ? memchr(p, 0, lim) : NULL;
        size_t d = z != NULL ? (size_t)(z - p) : lim;
        /* d data bytes plus the code byte; o <= cap holds throughout. */
        if (cap - o < d + 1) {
            return UTLS_COBS_ERR_SPACE;
        }
        if (z != NULL || d < UTLS_COBS_BLOCK) {
            out[o] = (uint8_t)(d + 1);
        } else {
            out[o] = 0xFF;
        }
        if (d != 0) {
            memcpy(out + o + 1, p, d);
        }
        o += d + 1;
        if (z != NULL) {
            p = z + 1; /* the zero is implied by the code; go on (maybe to
                        * an empty final block) */
            continue;
        }
        p += d;
        if (p == end) {
            break; /* a short final block, or a 255-block ending the input */
        }
    }
    *out_len = o;
    return UTLS_COBS_OK;
}

utls_cobs_result utls_cobs_decode(const uint8_t *in, size_t n, uint8_t *out, size_t cap,
                                  size_t *out_len)
{
    const uint8_t *p = in;
    const uint8_t *end = in + n;
    size_t o = 0;
    int prev_full = 0; /* the previous block was a 255-block */
    *out_len = 0;
    if (n == 0) {
        return UTLS_COBS_ERR_CODE;
    }
    while (p < end) {
        unsigned c = *p++;
        if (c == 0) {
            return UTLS_COBS_ERR_ZERO;
        }
        size_t d = c - 1u;
        size_t rem = (size_t)(end - p);
        if (d > rem) {
            /* Report a zero first if the rest holds one: it is the clearer
             * fault (a delimiter inside the frame). */
            return rem && memchr(p, 0, rem) ? UTLS_COBS_ERR_ZERO : UTLS_COBS_ERR_CODE;
        }
        if (d && memchr(p, 0, d) != NULL) {
            return UTLS_COBS_ERR_ZERO;
        }
        int last = d == rem;
        if (last && d == 0 && prev_full) {
            return UTLS_COBS_ERR_CODE; /* the encoder never writes this */
        }
        size_t need = d + (!last && c != 0xFF);
        if (cap - o < need) {
            return UTLS_COBS_ERR_SPACE;
        }
        if (d != 0) {
            memcpy(out + o, p, d);
        }
        o += d;
        p += d;
        if (!last && c != 0xFF) {
            out[o++] = 0;
        }
        prev_full = c == 0xFF;
    }
    *out_len = o;
    return UTLS_COBS_OK;
}

const char *utls_cobs_result_name(utls_cobs_result r)
{
    switch (r) {
    case UTLS_COBS_OK:
        return "ok";
    case UTLS_COBS_ERR_ZERO:
        return "zero";
    case UTLS_COBS_ERR_CODE:
        return "code";
    case UTLS_COBS_ERR_SPACE:
        return "space";
    }
    return "unknown";
}
