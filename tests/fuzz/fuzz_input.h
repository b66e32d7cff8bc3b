/* fuzz_input.h: the input cursor and the small PRNG shared by the fuzz
 * targets over the fork (fuzz_receiver.c, fuzz_ern.c). Header-only: each
 * target is one program. */
#ifndef UTLS_TESTS_FUZZ_INPUT_H
#define UTLS_TESTS_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

/* fuzz_cursor: the unread rest of a fuzz input. Reads past its end give 0,
 * so that every input, however short, is a complete program. */
typedef struct {
    const uint8_t *p;
    size_t len;
} fuzz_cursor;

/* fuzz_get_u8 returns the next byte of |c|, or 0 at its end. */
static inline unsigned fuzz_get_u8(fuzz_cursor *c)
{
    if (c->len == 0) {
        return 0;
    }
    c->len--;
    return *c->p++;
}

/* fuzz_get_u16 returns the next two bytes of |c|, big-endian (0 past its
 * end). */
static inline unsigned fuzz_get_u16(fuzz_cursor *c)
{
    unsigned hi = fuzz_get_u8(c);
    return (hi << 8) | fuzz_get_u8(c);
}

/* fuzz_rng_next advances the xorshift32 state |*s| (never 0) and returns
 * it: cheap filler bytes that depend on a seed taken from the input. */
static inline uint32_t fuzz_rng_next(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

#endif /* UTLS_TESTS_FUZZ_INPUT_H */
