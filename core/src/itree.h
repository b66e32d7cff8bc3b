/* itree.h: internal balanced tree of disjoint half-open intervals over uint64
 * stream offsets, shared by reasm (fragments with bytes) and scan (scanned
 * positions, pending headers). A treap: every operation is O(log n) expected
 * in the number of intervals, and the priorities come from a private
 * generator, so the shape does not depend on the order an attacker chooses
 * for segments. Not part of the public API. */
#ifndef UTLS_CORE_ITREE_H
#define UTLS_CORE_ITREE_H

#include <stddef.h>
#include <stdint.h>

typedef struct utls_itree_node {
    struct utls_itree_node *left;
    struct utls_itree_node *right;
    uint64_t start; /* key; first offset */
    uint64_t end;   /* one past the last offset; end > start except for scan
                     * pending nodes whose length is not known yet */
    uint32_t prio;
    uint32_t flags;  /* owner-defined */
    uint8_t *buf;    /* reasm only: bytes [start, end) live at buf + head */
    size_t head;
    size_t cap;
} utls_itree_node;

/* The largest node buffer utls_itree_trim_below keeps for reuse: bounds
 * the memory a tree holds while empty. */
#define UTLS_ITREE_SPARE_MAX ((size_t)256 << 10)

typedef struct {
    utls_itree_node *root;
    size_t num_nodes;
    uint64_t rng; /* xorshift state for priorities */
    /* reasm only: the buffer of a node trim_below freed (|spare_cap| bytes,
     * owned, or NULL), for the next run, so that a hole's run does not
     * cost a fresh allocation (and page faults once glibc has trimmed the
     * heap) every time. */
    uint8_t *spare;
    size_t spare_cap;
} utls_itree;

/* utls_itree_init makes |t| an empty tree. */
void utls_itree_init(utls_itree *t, uint64_t seed);

/* utls_itree_node_new returns a zeroed node with a fresh priority, or NULL. It
 * is not linked into |t|; the caller sets start/end and calls
 * utls_itree_insert. */
utls_itree_node *utls_itree_node_new(utls_itree *t);

/* utls_itree_node_free frees |n| and its buffer; NULL-safe. |n| must already
 * be unlinked. */
void utls_itree_node_free(utls_itree_node *n);

/* utls_itree_clear frees every node. */
void utls_itree_clear(utls_itree *t);

/* utls_itree_insert links |n|; no other node may have the same start. */
void utls_itree_insert(utls_itree *t, utls_itree_node *n);

/* utls_itree_remove unlinks (does not free) the node whose start is |key|
 * and returns it, or NULL if there is none. */
utls_itree_node *utls_itree_remove(utls_itree *t, uint64_t key);

/* utls_itree_find_le returns the node with the largest start <= |key|. */
utls_itree_node *utls_itree_find_le(const utls_itree *t, uint64_t key);

/* utls_itree_find_ge returns the node with the smallest start >= |key|. */
utls_itree_node *utls_itree_find_ge(const utls_itree *t, uint64_t key);

/* utls_itree_max returns the node with the largest start, or NULL. */
utls_itree_node *utls_itree_max(const utls_itree *t);

/* utls_itree_min returns the node with the smallest start, or NULL. */
utls_itree_node *utls_itree_min(const utls_itree *t);

/* utls_itree_extent returns the leftmost node of the subtree |m| (not NULL)
 * and sets [*out_start, *out_end] to [start, end] widened to cover every node
 * of |m|: what a run that overlaps or touches all of them becomes. */
utls_itree_node *utls_itree_extent(utls_itree_node *m, uint64_t start, uint64_t end,
                                   uint64_t *out_start, uint64_t *out_end);

/* utls_itree_split detaches from |*root| the nodes with start < |key| into
 * |*out_left| and the rest into |*out_right|. */
void utls_itree_split(utls_itree_node *root, utls_itree_node **out_left,
                      utls_itree_node **out_right, uint64_t key);

/* utls_itree_merge joins two treaps where every start in |l| is below every
 * start in |r| and returns the new root. */
utls_itree_node *utls_itree_merge(utls_itree_node *l, utls_itree_node *r);

/* utls_itree_free_subtree frees every node under |n| and returns how many. */
size_t utls_itree_free_subtree(utls_itree_node *n);

/* utls_itree_add_range records that [start, end) is covered, merging with
 * every overlapping or adjacent interval so intervals stay disjoint and
 * non-adjacent. Nodes must have no buffers. Returns 1, or 0 on allocation
 * failure (tree unchanged). */
int utls_itree_add_range(utls_itree *t, uint64_t start, uint64_t end);

/* utls_itree_take_spare returns the spare buffer if it holds at least |need|
 * bytes (the caller owns it; its size in |*out_cap|), else NULL. */
uint8_t *utls_itree_take_spare(utls_itree *t, size_t need, size_t *out_cap);

/* utls_itree_offer_spare takes ownership of |buf| (|cap| bytes) as the spare
 * if it is larger than the current one and at most UTLS_ITREE_SPARE_MAX,
 * and frees whichever buffer it does not keep. */
void utls_itree_offer_spare(utls_itree *t, uint8_t *buf, size_t cap);

/* utls_itree_trim_below drops everything below |offset|, cutting a node that
 * straddles it (its buffer head moves forward, nothing is copied). Returns
 * the number of offsets (end - start summed) dropped and adds the number of
 * freed nodes to |*out_freed| (may be NULL). */
uint64_t utls_itree_trim_below(utls_itree *t, size_t *out_freed, uint64_t offset);

#endif
