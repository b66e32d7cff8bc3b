/*
 * A sorted, bounded set of sequence numbers: the records delivered ahead of
 * the in-order path, each with the stream offset, wire length and store
 * epoch it was verified at. Pure C, no OpenSSL (core/).
 */
#ifndef UTLS_SEQSET_H
#define UTLS_SEQSET_H

#include <stddef.h>
#include <stdint.h>

/* Records delivered out of order and not yet passed in order. Bounds the
 * duplicate-suppression set; past it no more records are delivered early. */
#define UTLS_MAX_DELIVERED_AHEAD 1024

/* A sorted set of sequence numbers (records delivered ahead of the in-order
 * path), bounded by UTLS_MAX_DELIVERED_AHEAD. */
typedef struct {
    uint64_t *v;        /* sequence numbers, sorted */
    uint64_t *off;      /* the stream offset each was verified at */
    size_t *wire_len;   /* its length on the wire, header included */
    uint64_t *epoch;    /* the shared store's epoch when it was verified, or
                         * UTLS_NO_EPOCH (see utls_hook_skip_decrypt) */
    size_t n;
    /* The four arrays live in |mem| (owned; UTLS_MAX_DELIVERED_AHEAD entries
     * each) from entry |first| on: the in-order path takes entries from the
     * front, which only moves |first| (no memmove per record). */
    void *mem;
    size_t first;
} utls_seqset;
/* An epoch no shared store has: the record's bytes are compared or decrypted
 * in order, never skipped unseen. */
#define UTLS_NO_EPOCH UINT64_MAX

/* utls_seqset_lower returns the index (from |set->first|) of the first
 * entry >= |seq|. */
size_t utls_seqset_lower(const utls_seqset *set, uint64_t seq);
/* utls_seqset_contains returns 1 if |seq| is in |set|. */
int utls_seqset_contains(const utls_seqset *set, uint64_t seq);
/* utls_seqset_add inserts |seq| with what it was verified at; returns 1, or
 * 0 when the set is full (UTLS_MAX_DELIVERED_AHEAD) or memory ran out. */
int utls_seqset_add(utls_seqset *set, uint64_t seq, uint64_t off, size_t wire_len,
                    uint64_t epoch);
/* utls_seqset_remove drops |count| entries from index |at|. */
void utls_seqset_remove(utls_seqset *set, size_t at, size_t count);
/* utls_seqset_take removes |seq| and every entry below it; returns 1 if
 * |seq| was in the set. */
int utls_seqset_take(utls_seqset *set, uint64_t seq);
/* utls_seqset_take_one removes |seq| only, and what lies more than |window|
 * below it; returns 1 if |seq| was there. */
int utls_seqset_take_one(utls_seqset *set, uint64_t seq, uint64_t window);
/* utls_seqset_forget_epochs sets every entry's epoch to UTLS_NO_EPOCH. */
void utls_seqset_forget_epochs(utls_seqset *set);
/* utls_seqset_free releases the set's memory and empties it. NULL-safe. */
void utls_seqset_free(utls_seqset *set);

#endif
