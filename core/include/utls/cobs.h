/* cobs.h: Consistent Overhead Byte Stuffing (Cheshire and Baker, "Consistent
 * Overhead Byte Stuffing", IEEE/ACM Transactions on Networking 7(2), 1999),
 * the codec under uCOBS (issue 9).
 *
 * The encoder turns n arbitrary bytes into a string with no zero byte: the
 * input is cut into blocks, each written as a code byte c (1..255) followed
 * by c-1 data bytes. A block with c < 255 stands for its data followed by a
 * zero; a block with c == 255 stands for 254 data bytes and no zero. The
 * input is taken to end in an implicit zero that is not written, so the last
 * block's zero is dropped on decoding, and a 255-block that ends the input
 * exactly is not followed by an empty 0x01 block.
 *
 * This codec adds no delimiters: the framing layer puts the zero markers
 * around the encoded bytes. The decoder accepts exactly the strings the
 * encoder produces (canonical form), so decode then encode gives back the
 * input whenever decode succeeds.
 *
 * Overhead: 1 byte for n <= 254, at most ceil(n/254) bytes for n >= 1 (one
 * per 254 bytes, about 0.4%); UTLS_COBS_ENCODE_BOUND gives the exact worst
 * case. The decoded length is never larger than the encoded length minus 1.
 *
 * Neither function allocates; both are reentrant. */
#ifndef UTLS_COBS_H
#define UTLS_COBS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* UTLS_COBS_BLOCK is the most data bytes one code byte covers. */
#define UTLS_COBS_BLOCK 254

/* UTLS_COBS_ENCODE_BOUND(n) is the largest encoded size of n input bytes:
 * n + ceil(n/254), and 1 for n == 0. Reached by runs of non-zero bytes. The
 * macro does not check for overflow; utls_cobs_encode_bound does. */
#define UTLS_COBS_ENCODE_BOUND(n) \
    ((n) == 0 ? (size_t)1 : (size_t)(n) + ((size_t)(n) + 253) / 254)

/* utls_cobs_result is the outcome of utls_cobs_encode and utls_cobs_decode. */
typedef enum {
    UTLS_COBS_OK = 0,
    UTLS_COBS_ERR_ZERO,  /* decode: a zero byte in the encoded input */
    UTLS_COBS_ERR_CODE,  /* decode: empty input, a code byte whose block runs
                          * past the end, or a non-canonical ending (an empty
                          * final block after a 255-block) */
    UTLS_COBS_ERR_SPACE  /* the output does not fit in |cap| bytes */
} utls_cobs_result;

/* utls_cobs_encode_bound returns UTLS_COBS_ENCODE_BOUND(n), or 0 if that
 * does not fit in a size_t. */
size_t utls_cobs_encode_bound(size_t n);

/* utls_cobs_encode writes the encoding of |in| (|n| bytes) to |out| (|cap|
 * bytes) and its length to |*out_len|. Returns UTLS_COBS_OK, or
 * UTLS_COBS_ERR_SPACE if it does not fit (then |*out_len| is 0 and |out| may
 * hold a partial encoding; nothing is written past |cap|). A |cap| of
 * utls_cobs_encode_bound(n) always suffices. |in| and |out| must not
 * overlap. */
utls_cobs_result utls_cobs_encode(const uint8_t *in, size_t n, uint8_t *out, size_t cap,
                                  size_t *out_len);

/* utls_cobs_decode writes the decoding of |in| (|n| bytes, no delimiters) to
 * |out| (|cap| bytes) and its length to |*out_len|. Returns UTLS_COBS_OK or an
 * error (then |*out_len| is 0 and |out| may hold partial output; nothing is
 * read past |n| or written past |cap|). A |cap| of n - 1 always suffices for
 * valid input. |in| and |out| must not overlap. */
utls_cobs_result utls_cobs_decode(const uint8_t *in, size_t n, uint8_t *out, size_t cap,
                                  size_t *out_len);

/* utls_cobs_result_name returns a static name for |r| ("ok", "zero", ...). */
const char *utls_cobs_result_name(utls_cobs_result r);

#ifdef __cplusplus
}
#endif

#endif /* UTLS_COBS_H */
