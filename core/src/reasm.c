/* reasm.c: sparse fragment store; see include/utls/reasm.h. */
#include "utls/reasm.h"

#include <stdlib.h>
#include <string.h>

#include "itree.h"

/* reasm_alt is another copy of held bytes that differed from them. */
typedef struct {
    uint64_t offset;
    size_t len;
    uint8_t *buf;
    unsigned swaps;
} reasm_alt;

struct utls_reasm {
    utls_itree runs;
    uint64_t inorder;
    utls_reasm_limits limits;
    size_t bytes_held;
    utls_reasm_stats stats;
    int keep_alts;
    reasm_alt alts[UTLS_REASM_MAX_ALT_COPIES];
    size_t num_alts;
    size_t alt_bytes;
};

void utls_reasm_limits_default(utls_reasm_limits *out_limits)
{
    out_limits->max_bytes = UTLS_REASM_MAX_BYTES;
    out_limits->max_fragments = UTLS_REASM_MAX_FRAGMENTS;
    out_limits->max_window = UTLS_REASM_MAX_WINDOW;
}

utls_reasm *utls_reasm_new(const utls_reasm_limits *limits, uint64_t inorder_offset)
{
    utls_reasm *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return NULL;
    }
    if (limits != NULL) {
        r->limits = *limits;
    } else {
        utls_reasm_limits_default(&r->limits);
    }
    utls_itree_init(&r->runs, (uint64_t)(uintptr_t)r ^ 0x5DEECE66DULL);
    r->inorder = inorder_offset;
    return r;
}

static void reasm_alt_drop(utls_reasm *r, size_t i)
{
    free(r->alts[i].buf);
    r->alt_bytes -= r->alts[i].len;
    r->alts[i] = r->alts[--r->num_alts];
}

void utls_reasm_free(utls_reasm *r)
{
    if (r == NULL) {
        return;
    }
    while (r->num_alts > 0) {
        reasm_alt_drop(r, r->num_alts - 1);
    }
    utls_itree_clear(&r->runs);
    free(r);
}

void utls_reasm_keep_alternates(utls_reasm *r, int on)
{
    r->keep_alts = on != 0;
    while (!r->keep_alts && r->num_alts > 0) {
        reasm_alt_drop(r, r->num_alts - 1);
    }
}

int utls_reasm_find_alternate(const utls_reasm *r, utls_reasm_run *out_run, uint64_t offset)
{
    size_t i;
    int found = 0;

    for (i = 0; i < r->num_alts; i++) {
        if (r->alts[i].offset == offset) {
            out_run->offset = offset;
            out_run->data = r->alts[i].buf;
            out_run->len = r->alts[i].len;
            found = 1; /* later entries are newer, except after a drop: fine */
        }
    }
    return found;
}

size_t utls_reasm_num_alternates(const utls_reasm *r)
{
    return r->num_alts;
}

/* reasm_alt_keep keeps a copy of the fragment [offset, offset + len) that
 * conflicted with held bytes, then enforces the bounds by dropping the copy
 * furthest from the in-order point (possibly this one). Allocation failure
 * only means the copy is not kept. */
static void reasm_alt_keep(utls_reasm *r, uint64_t offset, const uint8_t *data, size_t len)
{
    size_t i;

    if (len > UTLS_REASM_MAX_ALT_BYTES) {
        r->stats.alt_copies_dropped++;
        return;
    }
    for (i = 0; i < r->num_alts; i++) {
        if (r->alts[i].offset == offset && r->alts[i].len == len
            && memcmp(r->alts[i].buf, data, len) == 0) {
            return; /* the same copy again */
        }
    }
    uint8_t *buf = malloc(len);
    if (buf == NULL) {
        return;
    }
    memcpy(buf, data, len);
    if (r->num_alts == UTLS_REASM_MAX_ALT_COPIES) {
        /* Room for one more: the bounds below then pick what goes. */
        size_t far = 0;
        for (i = 1; i < r->num_alts; i++) {
            if (r->alts[i].offset > r->alts[far].offset) {
                far = i;
            }
        }
        if (r->alts[far].offset < offset) {
            free(buf);
            r->stats.alt_copies_dropped++;
            return;
        }
        reasm_alt_drop(r, far);
        r->stats.alt_copies_dropped++;
    }
    r->alts[r->num_alts].offset = offset;
    r->alts[r->num_alts].len = len;
    r->alts[r->num_alts].buf = buf;
    r->alts[r->num_alts].swaps = 0;
    r->num_alts++;
    r->alt_bytes += len;
    r->stats.alt_copies_kept++;
    while (r->alt_bytes > UTLS_REASM_MAX_ALT_BYTES) {
        size_t far = 0;
        for (i = 1; i < r->num_alts; i++) {
            if (r->alts[i].offset > r->alts[far].offset) {
                far = i;
            }
        }
        reasm_alt_drop(r, far);
        r->stats.alt_copies_dropped++;
    }
}

/* reasm_alt_exchange swaps the bytes of copy |a| with the held bytes where
 * both exist; returns 1 if any differed (then [*from, *to) covers them). */
static int reasm_alt_exchange(utls_reasm *r, reasm_alt *a, uint64_t *from, uint64_t *to)
{
    uint64_t a_end = a->offset + a->len;
    utls_itree_node *n = utls_itree_find_le(&r->runs, a->offset);
    int changed = 0;

    if (n == NULL || n->end <= a->offset) {
        n = utls_itree_find_ge(&r->runs, a->offset);
    }
    for (; n != NULL && n->start < a_end; n = utls_itree_find_ge(&r->runs, n->start + 1)) {
        uint64_t x0 = n->start > a->offset ? n->start : a->offset;
        uint64_t x1 = n->end < a_end ? n->end : a_end;
        uint8_t *held = n->buf + n->head + (x0 - n->start);
        uint8_t *alt = a->buf + (x0 - a->offset);
        size_t k;

        if (x0 >= x1 || memcmp(held, alt, (size_t)(x1 - x0)) == 0) {
            continue;
        }
        for (k = 0; k < (size_t)(x1 - x0); k++) {
            uint8_t t = held[k];
            held[k] = alt[k];
            alt[k] = t;
        }
        if (!changed || x0 < *from) {
            *from = x0;
        }
        if (!changed || x1 > *to) {
            *to = x1;
        }
        changed = 1;
    }
    return changed;
}

int utls_reasm_swap_alternate(utls_reasm *r, uint64_t offset, size_t len, uint64_t *out_from,
                              uint64_t *out_to)
{
    uint64_t end = (uint64_t)len > UINT64_MAX - offset ? UINT64_MAX : offset + len;
    size_t i;

    /* A copy never swapped in first: the record may span several copies
     * (one per segment), and undoing the last swap before trying them all
     * would go round in circles. Then those swapped in before. */
    for (unsigned pass = 0; pass < UTLS_REASM_MAX_ALT_SWAPS; pass++) {
        for (i = 0; i < r->num_alts; i++) {
            reasm_alt *a = &r->alts[i];

            if (a->swaps != pass || a->offset >= end || a->offset + a->len <= offset) {
                continue;
            }
            if (reasm_alt_exchange(r, a, out_from, out_to)) {
                a->swaps++;
                r->stats.alt_swaps++;
                return 1;
            }
        }
    }
    return 0;
}

static const uint8_t *reasm_node_data(const utls_itree_node *n)
{
    return n->buf + n->head;
}

static size_t reasm_node_len(const utls_itree_node *n)
{
    return (size_t)(n->end - n->start);
}

/* reasm_merge_ctx carries one insert through the runs it overlaps. */
typedef struct {
    uint64_t offset; /* the new fragment, after clipping */
    uint64_t end;
    const uint8_t *data;
    uint64_t new_start; /* the merged run */
    uint8_t *buf;
    utls_itree_node *base; /* node whose buffer is |buf| in place, or NULL */
    uint64_t cursor;       /* new data below this has been placed or compared */
    uint64_t bytes_new;
    uint64_t bytes_dup;
    uint64_t bytes_conflict;
} reasm_merge_ctx;

static void reasm_copy_new(reasm_merge_ctx *c, uint64_t from, uint64_t to)
{
    if (to <= from) {
        return;
    }
    memcpy(c->buf + (from - c->new_start), c->data + (from - c->offset), (size_t)(to - from));
    c->bytes_new += to - from;
}

static void reasm_merge_one(reasm_merge_ctx *c, utls_itree_node *n)
{
    uint64_t n_end = n->end;
    /* New bytes in the gap before this run. */
    reasm_copy_new(c, c->cursor, n->start < c->end ? n->start : c->end);
    /* Overlap: the held bytes win, differences are counted. */
    uint64_t ov_start = n->start > c->offset ? n->start : c->offset;
    uint64_t ov_end = n_end < c->end ? n_end : c->end;
    if (ov_start < ov_end) {
        const uint8_t *held = (n == c->base ? c->buf : reasm_node_data(n)) + (ov_start - n->start);
        const uint8_t *fresh = c->data + (ov_start - c->offset);
        size_t ov_len = (size_t)(ov_end - ov_start);
        c->bytes_dup += ov_len;
        if (memcmp(held, fresh, ov_len) != 0) {
            for (size_t i = 0; i < ov_len; i++) {
                c->bytes_conflict += held[i] != fresh[i];
            }
        }
    }
    if (n != c->base) {
        memcpy(c->buf + (n->start - c->new_start), reasm_node_data(n), reasm_node_len(n));
    }
    if (n_end > c->cursor) {
        c->cursor = n_end;
    }
}

static void reasm_merge_visit(reasm_merge_ctx *c, utls_itree_node *n)
{
    while (n != NULL) {
        reasm_merge_visit(c, n->left);
        reasm_merge_one(c, n);
        n = n->right;
    }
}

/* reasm_shrink gives back a buffer that is mostly unused after its tail was
 * evicted, so allocation stays proportional to the bytes held. Failure to
 * shrink is harmless. */
static void reasm_shrink(utls_itree_node *n)
{
    size_t len = reasm_node_len(n);

    if (n->cap <= 4096 || n->cap / 2 <= len) {
        return;
    }
    memmove(n->buf, n->buf + n->head, len);
    n->head = 0;
    uint8_t *buf = realloc(n->buf, len);
    if (buf != NULL) {
        n->buf = buf;
        n->cap = len;
    }
}

/* reasm_evict_far_end removes bytes from the highest offsets until both
 * limits hold, and returns how many bytes it removed. */
static uint64_t reasm_evict_far_end(utls_reasm *r)
{
    uint64_t evicted = 0;

    while (r->runs.num_nodes > r->limits.max_fragments || r->bytes_held > r->limits.max_bytes) {
        utls_itree_node *last = utls_itree_max(&r->runs);
        if (last == NULL) {
            break;
        }
        size_t len = reasm_node_len(last);
        size_t excess = r->bytes_held - (r->bytes_held > r->limits.max_bytes
                                             ? r->limits.max_bytes
                                             : r->bytes_held);
        if (r->runs.num_nodes > r->limits.max_fragments || excess >= len) {
            utls_itree_node_free(utls_itree_remove(&r->runs, last->start));
            r->bytes_held -= len;
            evicted += len;
        } else {
            last->end -= excess;
            r->bytes_held -= excess;
            evicted += excess;
            reasm_shrink(last);
        }
    }
    return evicted;
}

#define REASM_MIN_GROW ((size_t)16 << 10)
/* Below this capacity a run grows 4x at a time, above it 2x. glibc's realloc
 * copies a chunk below its mmap threshold (128 KiB by default) and moves
 * larger ones with mremap, without copying; a hole of ~40 full segments
 * (58 KiB) cost 1.4 + 16 + 32 KiB of copies with 2x, 1.4 + 16 with 4x. The
 * extra slack is bounded: at most 3/4 of a buffer below 256 KiB. */
#define REASM_FAST_GROW_BELOW ((size_t)256 << 10)

/* reasm_grow makes |n|'s buffer hold |need| bytes starting at its head 0,
 * keeping its current bytes. Returns the buffer or NULL. */
static uint8_t *reasm_grow(utls_reasm *r, utls_itree_node *n, size_t need)
{
    size_t len = reasm_node_len(n);

    if (n->head + need <= n->cap) {
        return n->buf + n->head;
    }
    if (need <= n->cap) {
        memmove(n->buf, n->buf + n->head, len);
        n->head = 0;
        return n->buf;
    }
    /* Grow geometrically, from at least 16 KiB, so runs that grow by appends
     * (a hole lasting many segments) are copied O(1) times per byte and few
     * times in all: each realloc below glibc's mmap threshold copies the run. */
    size_t cap = n->cap < REASM_FAST_GROW_BELOW ? n->cap * 4 : n->cap * 2;
    if (cap < REASM_MIN_GROW) {
        cap = REASM_MIN_GROW;
    }
    if (cap < need) {
        cap = need;
    }
    uint8_t *buf;
    size_t spare_cap;
    if ((buf = utls_itree_take_spare(&r->runs, need, &spare_cap)) != NULL) {
        /* A buffer a passed run left: no allocation, and the old buffer is
         * the spare for the next run. */
        memcpy(buf, n->buf + n->head, len);
        utls_itree_offer_spare(&r->runs, n->buf, n->cap);
        n->buf = buf;
        n->head = 0;
        n->cap = spare_cap;
        return buf;
    }
    if (n->head == 0) {
        buf = realloc(n->buf, cap);
        if (buf == NULL) {
            return NULL;
        }
    } else {
        buf = malloc(cap);
        if (buf == NULL) {
            return NULL;
        }
        memcpy(buf, n->buf + n->head, len);
        free(n->buf);
    }
    n->buf = buf;
    n->head = 0;
    n->cap = cap;
    return buf;
}

utls_reasm_result utls_reasm_insert(utls_reasm *r, uint64_t offset, const uint8_t *data,
                                    size_t len)
{
    r->stats.num_inserts++;
    if (len == 0) {
        return UTLS_REASM_NO_NEW_DATA;
    }
    if (data == NULL || (uint64_t)len > UINT64_MAX - offset) {
        /* A fragment whose end would wrap past 2^64 cannot be part of any
         * TCP stream we track; refuse it rather than wrap it onto offset 0. */
        r->stats.num_invalid_inserts++;
        return UTLS_REASM_INVALID;
    }
    uint64_t end = offset + len;

    if (end <= r->inorder) {
        r->stats.bytes_below_inorder += len;
        return UTLS_REASM_NO_NEW_DATA;
    }
    if (offset < r->inorder) {
        uint64_t cut = r->inorder - offset;
        r->stats.bytes_below_inorder += cut;
        data += cut;
        offset = r->inorder;
    }
    uint64_t limit = r->limits.max_window > UINT64_MAX - r->inorder
                         ? UINT64_MAX
                         : r->inorder + r->limits.max_window;
    if (offset >= limit) {
        r->stats.bytes_dropped_window += end - offset;
        return UTLS_REASM_DROPPED;
    }
    if (end > limit) {
        r->stats.bytes_dropped_window += end - limit;
        end = limit;
    }
    if (end - offset > r->limits.max_bytes) {
        /* Nothing beyond max_bytes could be kept anyway; dropping the far
         * part first keeps peak memory at about 2x max_bytes. */
        r->stats.bytes_dropped_size += end - offset - r->limits.max_bytes;
        end = offset + r->limits.max_bytes;
        if (end == offset) {
            return UTLS_REASM_DROPPED;
        }
    }

    /* The common case past a hole: the fragment continues the highest run
     * exactly (the segments after a loss arrive in order). Its buffer grows
     * in place; no tree operation, nothing to compare. */
    utls_itree_node *top = utls_itree_max(&r->runs);
    if (top != NULL && top->end == offset) {
        if (reasm_grow(r, top, (size_t)(end - top->start)) == NULL) {
            return UTLS_REASM_ERROR;
        }
        memcpy(top->buf + top->head + (size_t)(offset - top->start), data, (size_t)(end - offset));
        top->end = end;
        r->bytes_held += (size_t)(end - offset);
        r->stats.bytes_new += end - offset;
        r->stats.bytes_evicted += reasm_evict_far_end(r);
        return UTLS_REASM_STORED;
    }

    /* Find every run that overlaps or touches [offset, end]. */
    utls_itree_node *pred = utls_itree_find_le(&r->runs, offset);
    uint64_t lo = (pred != NULL && pred->end >= offset) ? pred->start : offset;
    utls_itree_node *a;
    utls_itree_node *b;
    utls_itree_node *m;
    utls_itree_node *c;
    utls_itree_split(r->runs.root, &a, &b, lo);
    if (end == UINT64_MAX) {
        m = b;
        c = NULL;
    } else {
        utls_itree_split(b, &m, &c, end + 1);
    }

    reasm_merge_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.offset = offset;
    ctx.end = end;
    ctx.data = data;
    ctx.cursor = offset;

    utls_itree_node *keep;
    if (m == NULL) {
        keep = utls_itree_node_new(&r->runs);
        if (keep != NULL) {
            /* A run that will grow by appends (the segments after a loss)
             * starts in the spare buffer when there is one. */
            keep->buf = utls_itree_take_spare(&r->runs, (size_t)(end - offset), &keep->cap);
            if (keep->buf == NULL) {
                keep->buf = malloc((size_t)(end - offset));
                keep->cap = (size_t)(end - offset);
            }
        }
        if (keep == NULL || keep->buf == NULL) {
            utls_itree_node_free(keep);
            r->runs.root = utls_itree_merge(a, c);
            return UTLS_REASM_ERROR;
        }
        keep->start = offset;
        keep->end = end;
        ctx.new_start = offset;
        ctx.buf = keep->buf;
        reasm_copy_new(&ctx, offset, end);
        r->runs.num_nodes++;
    } else {
        uint64_t new_start, new_end;
        utls_itree_node *first = utls_itree_extent(m, offset, end, &new_start, &new_end);
        size_t need = (size_t)(new_end - new_start);
        uint8_t *fresh_buf = NULL;
        if (first->start == new_start) {
            /* Extend the first run's buffer in place. */
            ctx.buf = reasm_grow(r, first, need);
            ctx.base = first;
        } else {
            fresh_buf = malloc(need);
            ctx.buf = fresh_buf;
        }
        if (ctx.buf == NULL) {
            r->runs.root = utls_itree_merge(utls_itree_merge(a, m), c);
            return UTLS_REASM_ERROR;
        }
        ctx.new_start = new_start;
        reasm_merge_visit(&ctx, m);
        reasm_copy_new(&ctx, ctx.cursor, end);

        /* Keep |first| as the merged run's node (rekeying it is safe: no
         * other node lies between a and c), free the others. */
        if (first != m) {
            /* Unlink |first| from m before freeing the rest of m. */
            utls_itree_node **link = &m;
            while ((*link)->left != NULL) {
                link = &(*link)->left;
            }
            *link = first->right;
            first->right = NULL;
            r->runs.num_nodes -= utls_itree_free_subtree(m);
        } else {
            r->runs.num_nodes -= utls_itree_free_subtree(first->right);
            first->right = NULL;
        }
        first->left = NULL;
        if (fresh_buf != NULL) {
            free(first->buf);
            first->buf = fresh_buf;
            first->head = 0;
            first->cap = need;
        }
        first->start = new_start;
        first->end = new_end;
        keep = first;
    }
    r->runs.root = utls_itree_merge(utls_itree_merge(a, keep), c);

    r->bytes_held += (size_t)ctx.bytes_new;
    r->stats.bytes_new += ctx.bytes_new;
    r->stats.bytes_duplicate += ctx.bytes_dup;
    r->stats.bytes_conflicting += ctx.bytes_conflict;
    if (ctx.bytes_conflict != 0) {
        r->stats.num_conflicting_inserts++;
        if (r->keep_alts) {
            reasm_alt_keep(r, offset, data, (size_t)(end - offset));
        }
    }
    r->stats.bytes_evicted += reasm_evict_far_end(r);
    if (ctx.bytes_new == 0) {
        return UTLS_REASM_NO_NEW_DATA;
    }
    return UTLS_REASM_STORED;
}

int utls_reasm_advance(utls_reasm *r, uint64_t inorder_offset)
{
    if (inorder_offset < r->inorder) {
        return 0;
    }
    /* Nothing is held below the in-order point (inserts clip to it), so
     * unless the lowest run starts below the new point, there is nothing to
     * trim: no tree operation (this runs on every segment BIO insert). */
    const utls_itree_node *low = utls_itree_min(&r->runs);
    r->inorder = inorder_offset;
    for (size_t i = 0; i < r->num_alts;) {
        if (r->alts[i].offset + r->alts[i].len <= inorder_offset) {
            reasm_alt_drop(r, i); /* in order now: the stream has its bytes */
        } else {
            i++;
        }
    }
    if (low == NULL || low->start >= inorder_offset) {
        return 1;
    }
    r->bytes_held -= (size_t)utls_itree_trim_below(&r->runs, NULL, inorder_offset);
    return 1;
}

uint64_t utls_reasm_inorder(const utls_reasm *r)
{
    return r->inorder;
}

static int reasm_fill_run(const utls_itree_node *n, utls_reasm_run *out_run)
{
    if (n == NULL) {
        return 0;
    }
    out_run->offset = n->start;
    out_run->data = reasm_node_data(n);
    out_run->len = reasm_node_len(n);
    return 1;
}

int utls_reasm_find_run(const utls_reasm *r, utls_reasm_run *out_run, uint64_t offset)
{
    const utls_itree_node *n = utls_itree_find_le(&r->runs, offset);
    if (n == NULL || n->end <= offset) {
        return 0;
    }
    return reasm_fill_run(n, out_run);
}

int utls_reasm_first_run(const utls_reasm *r, utls_reasm_run *out_run)
{
    return reasm_fill_run(utls_itree_min(&r->runs), out_run);
}

int utls_reasm_next_run(const utls_reasm *r, utls_reasm_run *out_run, uint64_t offset)
{
    if (offset == UINT64_MAX) {
        return 0;
    }
    return reasm_fill_run(utls_itree_find_ge(&r->runs, offset + 1), out_run);
}

size_t utls_reasm_bytes_held(const utls_reasm *r)
{
    return r->bytes_held;
}

size_t utls_reasm_num_fragments(const utls_reasm *r)
{
    return r->runs.num_nodes;
}

void utls_reasm_get_stats(const utls_reasm *r, utls_reasm_stats *out_stats)
{
    *out_stats = r->stats;
}
