/*
 * The slots of records sealed out of sequence order (UTLS_ern_seal): sealed,
 * unwritten records, slot = number mod UTLS_ERN_REORDER_WINDOW.
 */
#include <string.h>
#include <openssl/err.h>

#include "common/utls_conn.h"

/* The slots' memory (utls_ern_state.slot). */
#define ERN_SLOTS_BYTES (UTLS_ERN_REORDER_WINDOW * sizeof(utls_ern_slot))

/* --- Sending out of sequence order (docs/ern.md) ---------------------------- */

/*
 * Window rules (docs/ern.md, "Sending out of sequence order"). The receiver
 * accepts a number n if UTLS_ERN_REORDER_WINDOW > n - top > -UTLS_ERN_REORDER_WINDOW
 * (top: the highest number it has seen) and n was not seen. The sender keeps
 * every record it writes inside that: a number m is sealed only if
 *   m < lowest sealed unwritten + UTLS_ERN_REORDER_WINDOW   (not too far behind
 *                                              what may be written after it), and
 *   m < highest written + 1 + UTLS_ERN_REORDER_WINDOW        (not too far ahead).
 * The highest written only grows, so both still hold when the record is
 * written later.
 */

/* utls_ern_seal_low: the lowest sealed unwritten number, or |dflt| if none. */
uint64_t utls_ern_seal_low(const utls_conn *c, uint64_t dflt)
{
    uint64_t low = dflt;
    size_t i;

    if (c->ern.slot == NULL)
        return dflt;
    for (i = 0; i < UTLS_ERN_REORDER_WINDOW; i++)
        if (c->ern.slot[i].state == UTLS_ERN_SLOT_SEALED && c->ern.slot[i].number < low)
            low = c->ern.slot[i].number;
    return low;
}

int utls_ern_slots_make(utls_conn *c)
{
    if (c->ern.slot == NULL && (c->ern.slot = OPENSSL_zalloc(ERN_SLOTS_BYTES)) == NULL) {
        ERR_raise_data(ERR_LIB_SSL, ERR_R_MALLOC_FAILURE, "the sealed records' slots (%zu bytes)",
                       (size_t)ERN_SLOTS_BYTES);
        return 0;
    }
    return 1;
}

void utls_ern_state_free(utls_conn *c)
{
    if (c->ern.slot != NULL)
        OPENSSL_clear_free(c->ern.slot, ERN_SLOTS_BYTES);
    OPENSSL_free(c->ern.hint);
    c->ern.slot = NULL;
    c->ern.hint = NULL;
    c->ern.num_hints = c->ern.hint_next = 0;
}

void utls_ern_slots_clear(utls_conn *c)
{
    if (c->ern.slot != NULL)
        OPENSSL_cleanse(c->ern.slot, ERN_SLOTS_BYTES);
    c->ern.num_sealed = 0;
    c->ern.wpending = 0;
}

/* utls_ern_find_sealed: the slot holding sealed record |rec|, or -1. */
int utls_ern_find_sealed(const utls_conn *c, const unsigned char *rec, size_t len)
{
    size_t i;

    if (rec == NULL || len < SSL3_RT_HEADER_LENGTH + UTLS_ERN_SEAL_TAIL || c->ern.slot == NULL)
        return -1;
    for (i = 0; i < UTLS_ERN_REORDER_WINDOW; i++)
        if (c->ern.slot[i].state == UTLS_ERN_SLOT_SEALED && c->ern.slot[i].len == len
            && memcmp(c->ern.slot[i].tail, rec + len - UTLS_ERN_SEAL_TAIL, UTLS_ERN_SEAL_TAIL)
                   == 0)
            return (int)i;
    return -1;
}
