/* reasm.h: sparse store of TCP stream fragments that arrived past a hole.
 *
 * The store keys bytes by their 64-bit stream offset. Inserting a fragment
 * merges it with every fragment it overlaps or touches, so the store always
 * holds disjoint, non-adjacent contiguous runs. Where a new fragment overlaps
 * bytes already held, the first-arrived bytes are kept and differing bytes are
 * counted as conflicts. Insert is O(log n) expected in the number of runs
 * (plus the bytes copied).
 *
 * The store is only ever the out-of-order side: the in-order TCP byte stream
 * is authoritative and delivers every byte whatever happens here. Dropping
 * data from the store therefore never loses a record; it only means that
 * record is not delivered early. Every limit below relies on that.
 *
 * Not thread-safe; one instance per connection direction. */
#ifndef UTLS_REASM_H
#define UTLS_REASM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* UTLS_REASM_MAX_BYTES is the default bound on bytes held past the in-order
 * point. Attack bounded: a peer or an on-path injector (the tap sees segments
 * before TCP validates them) sending data that never becomes in-order, to
 * exhaust memory. Buffers grow by 1.5x and are shrunk when eviction leaves
 * them mostly empty; a single insert may briefly hold up to 2x this before
 * eviction. Plus UTLS_REASM_MAX_FRAGMENTS small nodes. */
#define UTLS_REASM_MAX_BYTES ((size_t)4 << 20)

/* UTLS_REASM_MAX_FRAGMENTS is the default bound on disjoint runs held.
 * Attack bounded: many tiny segments with holes between them (1 byte every
 * 2 bytes), which would otherwise cost a node per byte and make each insert
 * and scan pay for a deep tree. */
#define UTLS_REASM_MAX_FRAGMENTS ((size_t)4096)

/* UTLS_REASM_MAX_WINDOW is the default bound on how far past the in-order
 * point a stored byte may lie. Attack bounded: forged segments at absurd
 * offsets (2^63, or just below 2^64) that a real receive window would never
 * contain, used to park data that is never trimmed by the in-order point. */
#define UTLS_REASM_MAX_WINDOW ((uint64_t)16 << 20)

/* UTLS_REASM_MAX_ALT_COPIES is the default bound on other copies of held
 * bytes kept (utls_reasm_swap_alternate), and UTLS_REASM_MAX_ALT_BYTES on
 * their bytes. Attack bounded: a forger whose copy of a range arrived first
 * (so the genuine one is the conflicting later copy) keeps sending more
 * differing copies, to push the genuine one out or to grow memory. Past
 * either bound the copy furthest from the in-order point is dropped (the
 * nearest records come through first); a record whose genuine copy was
 * dropped arrives in order. Each copy is swapped in at most
 * UTLS_REASM_MAX_ALT_SWAPS times (once: a record spanning several segments
 * fails until the last of its genuine copies is in, and undoing a swap on
 * such a failure would go round in circles), so a record that fails under
 * every copy costs a bounded number of rescans. */
#define UTLS_REASM_MAX_ALT_COPIES ((size_t)32)
#define UTLS_REASM_MAX_ALT_BYTES ((size_t)256 << 10)
#define UTLS_REASM_MAX_ALT_SWAPS 1u

typedef struct utls_reasm utls_reasm;

/* utls_reasm_limits holds the per-instance limits. A limit of 0 bytes or 0
 * fragments stores nothing (out-of-order delivery off). */
typedef struct {
    size_t max_bytes;     /* bytes held, see UTLS_REASM_MAX_BYTES */
    size_t max_fragments; /* disjoint runs held, see UTLS_REASM_MAX_FRAGMENTS */
    uint64_t max_window;  /* distance past the in-order point, see UTLS_REASM_MAX_WINDOW */
} utls_reasm_limits;

/* utls_reasm_stats counts what happened to inserted bytes. Every inserted
 * byte ends up in exactly one of new/duplicate/below/dropped_window/
 * dropped_size at insert time; bytes_evicted counts held bytes removed later
 * to respect max_bytes or max_fragments. */
typedef struct {
    uint64_t bytes_new;            /* stored for the first time */
    uint64_t bytes_duplicate;      /* already held (identical or conflicting) */
    uint64_t bytes_conflicting;    /* subset of duplicate whose value differed */
    uint64_t bytes_below_inorder;  /* already delivered in order */
    uint64_t bytes_dropped_window; /* past the window */
    uint64_t bytes_dropped_size;   /* single fragment larger than max_bytes */
    uint64_t bytes_evicted;        /* removed from the far end by a limit */
    uint64_t num_inserts;
    uint64_t num_conflicting_inserts;
    uint64_t num_invalid_inserts; /* wrapping offsets, NULL data */
    uint64_t alt_copies_kept;     /* conflicting copies kept (with alternates on) */
    uint64_t alt_copies_dropped;  /* kept copies dropped by a bound */
    uint64_t alt_swaps;           /* copies swapped in (utls_reasm_swap_alternate) */
} utls_reasm_stats;

/* utls_reasm_run describes one contiguous run of held bytes. |data| points
 * into the store and stays valid until the next call that modifies it
 * (insert, advance, free). */
typedef struct {
    uint64_t offset;
    const uint8_t *data;
    size_t len;
} utls_reasm_run;

/* utls_reasm_result is the outcome of utls_reasm_insert. */
typedef enum {
    UTLS_REASM_STORED = 0,   /* at least one new byte stored (rescan its run) */
    UTLS_REASM_NO_NEW_DATA,  /* empty, already held or already in order */
    UTLS_REASM_DROPPED,      /* nothing new stored because of a limit */
    UTLS_REASM_INVALID,      /* offset + len wraps past 2^64, or NULL data */
    UTLS_REASM_ERROR         /* allocation failure; store unchanged */
} utls_reasm_result;

/* utls_reasm_limits_default writes the default limits to |*out_limits|. */
void utls_reasm_limits_default(utls_reasm_limits *out_limits);

/* utls_reasm_new returns a new, empty store whose in-order point is
 * |inorder_offset|, or NULL on allocation failure. |limits| is copied; NULL
 * means the defaults. The caller owns the result and frees it with
 * utls_reasm_free. */
utls_reasm *utls_reasm_new(const utls_reasm_limits *limits, uint64_t inorder_offset);

/* utls_reasm_free frees |r| and everything it holds. NULL-safe. */
void utls_reasm_free(utls_reasm *r);

/* utls_reasm_insert offers |len| bytes at stream offset |offset|. |data| is
 * copied; the caller keeps ownership. Bytes below the in-order point are
 * ignored, bytes past the window are dropped, bytes already held are
 * compared (conflicts counted) and the held copy kept. If the store then
 * exceeds max_bytes or max_fragments, data furthest from the in-order point
 * is evicted first (possibly part of this fragment): data nearest the
 * in-order point becomes deliverable soonest. Returns a utls_reasm_result. */
utls_reasm_result utls_reasm_insert(utls_reasm *r, uint64_t offset, const uint8_t *data,
                                    size_t len);

/* utls_reasm_keep_alternates turns on (|on| = 1) or off the keeping of
 * conflicting copies: while on, a fragment that overlaps held bytes with
 * different values is kept beside the store (bounded, see
 * UTLS_REASM_MAX_ALT_COPIES) instead of being discarded, for
 * utls_reasm_swap_alternate. Off by default: a store whose bytes are the
 * authoritative stream (first arrival wins, as in TCP) must not change
 * them. Turning it off drops the copies kept. */
void utls_reasm_keep_alternates(utls_reasm *r, int on);

/* utls_reasm_swap_alternate is called when the held bytes in [offset,
 * offset + len) failed to authenticate. If a kept copy overlaps that range
 * and differs from the held bytes there, its bytes replace the held ones
 * where both exist, the replaced bytes are kept as that copy instead (swapped
 * once already, see UTLS_REASM_MAX_ALT_SWAPS), and the range whose bytes
 * changed is written to |*out_from|, |*out_to|: anything learnt from it
 * (scanned headers, verified records) is stale. Returns 1 if it swapped, 0
 * if there was nothing to swap. */
int utls_reasm_swap_alternate(utls_reasm *r, uint64_t offset, size_t len, uint64_t *out_from,
                              uint64_t *out_to);

/* utls_reasm_find_alternate sets |*out_run| to the kept copy that starts at
 * |offset| (the most recent if several) and returns 1, or returns 0 if there
 * is none. Its data stays valid until the next call that modifies |r|. */
int utls_reasm_find_alternate(const utls_reasm *r, utls_reasm_run *out_run, uint64_t offset);

/* utls_reasm_num_alternates returns the number of other copies kept. */
size_t utls_reasm_num_alternates(const utls_reasm *r);

/* utls_reasm_advance moves the in-order point to |inorder_offset| and frees
 * every held byte below it (a straddling run is cut without copying).
 * Returns 1, or 0 if |inorder_offset| is below the current in-order point
 * (nothing changes: the in-order stream never goes backwards). */
int utls_reasm_advance(utls_reasm *r, uint64_t inorder_offset);

/* utls_reasm_inorder returns the current in-order point. */
uint64_t utls_reasm_inorder(const utls_reasm *r);

/* utls_reasm_find_run sets |*out_run| to the run containing |offset| and
 * returns 1, or returns 0 if no held byte is at |offset|. */
int utls_reasm_find_run(const utls_reasm *r, utls_reasm_run *out_run, uint64_t offset);

/* utls_reasm_first_run sets |*out_run| to the lowest run and returns 1, or
 * returns 0 if the store is empty. */
int utls_reasm_first_run(const utls_reasm *r, utls_reasm_run *out_run);

/* utls_reasm_next_run sets |*out_run| to the first run that starts after
 * |offset| (pass the previous run's offset to iterate) and returns 1, or
 * returns 0 if there is none. */
int utls_reasm_next_run(const utls_reasm *r, utls_reasm_run *out_run, uint64_t offset);

/* utls_reasm_bytes_held returns the number of bytes currently held. */
size_t utls_reasm_bytes_held(const utls_reasm *r);

/* utls_reasm_num_fragments returns the number of disjoint runs held. */
size_t utls_reasm_num_fragments(const utls_reasm *r);

/* utls_reasm_get_stats copies the counters to |*out_stats|. */
void utls_reasm_get_stats(const utls_reasm *r, utls_reasm_stats *out_stats);

#ifdef __cplusplus
}
#endif

#endif
