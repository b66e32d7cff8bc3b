/*
 * The sets of sequence numbers delivered ahead of the in-order path (see
 * utls/seqset.h). Moved from the fork's receive path; pure C.
 */
#include <stdlib.h>
#include <string.h>

#include "utls/seqset.h"

size_t utls_seqset_lower(const utls_seqset *set, uint64_t seq)
{
    size_t lo = 0, hi = set->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (set->v[mid] < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int utls_seqset_contains(const utls_seqset *set, uint64_t seq)
{
    size_t i = utls_seqset_lower(set, seq);

    return i < set->n && set->v[i] == seq;
}

/* utls_seqset_point sets the arrays' pointers to entry |first| of |set|'s
 * memory: sequence numbers, offsets and epochs (uint64_t), then lengths. */
static void seqset_point(utls_seqset *set, size_t first)
{
    uint64_t *m = set->mem;

    set->first = first;
    set->v = m + first;
    set->off = m + UTLS_MAX_DELIVERED_AHEAD + first;
    set->epoch = m + 2 * UTLS_MAX_DELIVERED_AHEAD + first;
    set->wire_len = (size_t *)(void *)(m + 3 * UTLS_MAX_DELIVERED_AHEAD) + first;
}

int utls_seqset_add(utls_seqset *set, uint64_t seq, uint64_t off, size_t wire_len,
                    uint64_t epoch)
{
    size_t i, tail;

    if (set->mem == NULL) {
        set->mem = malloc(UTLS_MAX_DELIVERED_AHEAD
                                  * (3 * sizeof(uint64_t) + sizeof(size_t)));
        if (set->mem == NULL)
            return 0;
        set->n = 0;
        seqset_point(set, 0);
    }
    if (set->n == UTLS_MAX_DELIVERED_AHEAD)
        return 0;
    if (set->first + set->n == UTLS_MAX_DELIVERED_AHEAD) {
        /* The end of the memory: the entries move to its start, once per
         * UTLS_MAX_DELIVERED_AHEAD - n entries taken from the front. */
        uint64_t *v = set->v, *o = set->off, *e = set->epoch;
        size_t *w = set->wire_len;

        seqset_point(set, 0);
        memmove(set->v, v, set->n * sizeof(*set->v));
        memmove(set->off, o, set->n * sizeof(*set->off));
        memmove(set->epoch, e, set->n * sizeof(*set->epoch));
        memmove(set->wire_len, w, set->n * sizeof(*set->wire_len));
    }
    /* Records are usually delivered ahead in increasing order: the end,
     * without the search and the moves. */
    i = set->n == 0 || set->v[set->n - 1] < seq ? set->n : utls_seqset_lower(set, seq);
    tail = set->n - i;
    if (tail > 0) {
        memmove(&set->v[i + 1], &set->v[i], tail * sizeof(*set->v));
        memmove(&set->off[i + 1], &set->off[i], tail * sizeof(*set->off));
        memmove(&set->wire_len[i + 1], &set->wire_len[i], tail * sizeof(*set->wire_len));
        memmove(&set->epoch[i + 1], &set->epoch[i], tail * sizeof(*set->epoch));
    }
    set->v[i] = seq;
    set->off[i] = off;
    set->wire_len[i] = wire_len;
    set->epoch[i] = epoch;
    set->n++;
    return 1;
}

/* utls_seqset_remove deletes the |count| entries from index |at| on, keeping the
 * parallel arrays in step. */
void utls_seqset_remove(utls_seqset *set, size_t at, size_t count)
{
    size_t rest = set->n - at - count;

    if (count == 0)
        return;
    if (at == 0) {
        /* From the front (the in-order path passing records): no move. */
        set->n -= count;
        seqset_point(set, set->n == 0 ? 0 : set->first + count);
        return;
    }

    memmove(&set->v[at], &set->v[at + count], rest * sizeof(*set->v));
    memmove(&set->off[at], &set->off[at + count], rest * sizeof(*set->off));
    memmove(&set->wire_len[at], &set->wire_len[at + count], rest * sizeof(*set->wire_len));
    memmove(&set->epoch[at], &set->epoch[at + count], rest * sizeof(*set->epoch));
    set->n -= count;
}

/* utls_seqset_take removes |seq| and everything below it; returns 1 if |seq| was
 * there. In-order sequence numbers only grow, so lower ones are stale. */
int utls_seqset_take(utls_seqset *set, uint64_t seq)
{
    size_t i = utls_seqset_lower(set, seq);
    int found = i < set->n && set->v[i] == seq;
    size_t drop = i + (size_t)found;

    if (drop == 0)
        return 0;
    utls_seqset_remove(set, 0, drop);
    return found;
}

/* utls_seqset_take_one removes |seq| only, and what lies a reorder window below
 * it (|window|); returns 1 if |seq| was there. With explicit record numbers a
 * sender may write lower numbers later (docs/ern.md). */
int utls_seqset_take_one(utls_seqset *set, uint64_t seq, uint64_t window)
{
    uint64_t floor = seq > window ? seq - window : 0;
    size_t i = utls_seqset_lower(set, seq);
    int found = i < set->n && set->v[i] == seq;

    if (found)
        utls_seqset_remove(set, i, 1);
    utls_seqset_remove(set, 0, utls_seqset_lower(set, floor));
    return found;
}

/* utls_seqset_forget_epochs: the bytes behind these records can no longer be
 * vouched for by a shared store (the read BIO changed). */
void utls_seqset_forget_epochs(utls_seqset *set)
{
    size_t i;

    for (i = 0; i < set->n; i++)
        set->epoch[i] = UTLS_NO_EPOCH;
}

void utls_seqset_free(utls_seqset *set)
{
    if (set == NULL)
        return;
    free(set->mem);
    set->mem = NULL;
    set->v = set->off = set->epoch = NULL;
    set->wire_len = NULL;
    set->n = set->first = 0;
}
