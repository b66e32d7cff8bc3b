/* fuzz_cobs.c: libFuzzer target for the COBS codec (core/include/utls/cobs.h).
 *   1. The input is decoded as an encoded frame: this must not crash, read or
 *      write out of bounds (the output buffer is exactly the size given), and
 *      if it decodes, encoding the result gives the input back (the decoder
 *      accepts only canonical encodings). A decode into a smaller buffer must
 *      fail with UTLS_COBS_ERR_SPACE or the same error as the full decode.
 *   2. The input is encoded as data: the encoding is within the bound, holds
 *      no zero, and decodes back to the input. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utls/cobs.h"

#define FUZZ_NAME "fuzz_cobs"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* 1. decode arbitrary bytes */
    size_t cap = size ? size - 1 : 0; /* always enough for a valid frame */
    uint8_t *dec = malloc(cap ? cap : 1);
    CHECK(dec != NULL);
    size_t dlen = 1;
    utls_cobs_result r = utls_cobs_decode(data, size, dec, cap, &dlen);
    CHECK(r != UTLS_COBS_ERR_SPACE);
    if (r == UTLS_COBS_OK) {
        CHECK(dlen <= cap);
        size_t bound = utls_cobs_encode_bound(dlen);
        uint8_t *enc = malloc(bound);
        CHECK(enc != NULL);
        size_t elen = 0;
        CHECK(utls_cobs_encode(dec, dlen, enc, bound, &elen) == UTLS_COBS_OK);
        CHECK(elen == size);
        CHECK(memcmp(enc, data, size) == 0);
        free(enc);
        if (dlen > 0) {
            /* One byte short must fail cleanly. */
            uint8_t *small = malloc(dlen - 1 ? dlen - 1 : 1);
            CHECK(small != NULL);
            size_t sl = 1;
            CHECK(utls_cobs_decode(data, size, small, dlen - 1, &sl) == UTLS_COBS_ERR_SPACE);
            CHECK(sl == 0);
            free(small);
        }
    } else {
        CHECK(dlen == 0);
        /* A smaller buffer fails too, with this error or for space. */
        size_t half = cap / 2;
        uint8_t *small = malloc(half ? half : 1);
        CHECK(small != NULL);
        size_t sl = 1;
        utls_cobs_result r2 = utls_cobs_decode(data, size, small, half, &sl);
        CHECK(r2 == r || r2 == UTLS_COBS_ERR_SPACE);
        CHECK(sl == 0);
        free(small);
    }
    free(dec);

    /* 2. encode arbitrary bytes, decode back */
    size_t bound = utls_cobs_encode_bound(size);
    CHECK(bound != 0);
    CHECK(bound <= (size == 0 ? 1 : size + (size + 253) / 254));
    uint8_t *enc = malloc(bound);
    CHECK(enc != NULL);
    size_t elen = 0;
    CHECK(utls_cobs_encode(data, size, enc, bound, &elen) == UTLS_COBS_OK);
    CHECK(elen >= 1 && elen <= bound);
    CHECK(memchr(enc, 0, elen) == NULL);
    uint8_t *back = malloc(size ? size : 1);
    CHECK(back != NULL);
    size_t blen = 1;
    CHECK(utls_cobs_decode(enc, elen, back, size, &blen) == UTLS_COBS_OK);
    CHECK(blen == size);
    CHECK(size == 0 || memcmp(back, data, size) == 0);
    free(back);
    free(enc);
    return 0;
}
