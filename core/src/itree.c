/* itree.c: treap of disjoint intervals; see itree.h. */
#include "itree.h"

#include <stdlib.h>

static uint32_t itree_next_prio(utls_itree *t)
{
    /* xorshift64*: only has to be independent of the keys, not secret. */
    uint64_t x = t->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    t->rng = x;
    return (uint32_t)((x * 0x2545F4914F6CDD1DULL) >> 32);
}

void utls_itree_init(utls_itree *t, uint64_t seed)
{
    t->root = NULL;
    t->num_nodes = 0;
    t->rng = seed != 0 ? seed : 0x9E3779B97F4A7C15ULL;
    t->spare = NULL;
    t->spare_cap = 0;
}

utls_itree_node *utls_itree_node_new(utls_itree *t)
{
    utls_itree_node *n = calloc(1, sizeof(*n));
    if (n == NULL) {
        return NULL;
    }
    n->prio = itree_next_prio(t);
    return n;
}

void utls_itree_node_free(utls_itree_node *n)
{
    if (n == NULL) {
        return;
    }
    free(n->buf);
    free(n);
}

size_t utls_itree_free_subtree(utls_itree_node *n)
{
    size_t count = 0;
    /* Iterative on the right spine, recursive on the left: expected depth is
     * O(log n) for a treap either way. */
    while (n != NULL) {
        utls_itree_node *right = n->right;
        count += utls_itree_free_subtree(n->left);
        utls_itree_node_free(n);
        count++;
        n = right;
    }
    return count;
}

void utls_itree_clear(utls_itree *t)
{
    utls_itree_free_subtree(t->root);
    t->root = NULL;
    t->num_nodes = 0;
    free(t->spare);
    t->spare = NULL;
    t->spare_cap = 0;
}

uint8_t *utls_itree_take_spare(utls_itree *t, size_t need, size_t *out_cap)
{
    uint8_t *buf = t->spare;

    if (buf == NULL || t->spare_cap < need) {
        return NULL;
    }
    *out_cap = t->spare_cap;
    t->spare = NULL;
    t->spare_cap = 0;
    return buf;
}

void utls_itree_offer_spare(utls_itree *t, uint8_t *buf, size_t cap)
{
    if (buf == NULL) {
        return;
    }
    if (cap > UTLS_ITREE_SPARE_MAX || cap <= t->spare_cap) {
        free(buf);
        return;
    }
    free(t->spare);
    t->spare = buf;
    t->spare_cap = cap;
}

/* itree_free_subtree_keep frees the subtree |n| like utls_itree_free_subtree,
 * offering each node's buffer to |t| as the spare. */
static size_t itree_free_subtree_keep(utls_itree *t, utls_itree_node *n)
{
    size_t count = 0;

    while (n != NULL) {
        utls_itree_node *right = n->right;
        count += itree_free_subtree_keep(t, n->left);
        utls_itree_offer_spare(t, n->buf, n->cap);
        n->buf = NULL;
        utls_itree_node_free(n);
        count++;
        n = right;
    }
    return count;
}

void utls_itree_split(utls_itree_node *root, utls_itree_node **out_left,
                      utls_itree_node **out_right, uint64_t key)
{
    if (root == NULL) {
        *out_left = NULL;
        *out_right = NULL;
        return;
    }
    if (root->start < key) {
        utls_itree_split(root->right, &root->right, out_right, key);
        *out_left = root;
    } else {
        utls_itree_split(root->left, out_left, &root->left, key);
        *out_right = root;
    }
}

utls_itree_node *utls_itree_merge(utls_itree_node *l, utls_itree_node *r)
{
    if (l == NULL) {
        return r;
    }
    if (r == NULL) {
        return l;
    }
    if (l->prio > r->prio) {
        l->right = utls_itree_merge(l->right, r);
        return l;
    }
    r->left = utls_itree_merge(l, r->left);
    return r;
}

void utls_itree_insert(utls_itree *t, utls_itree_node *n)
{
    utls_itree_node *l;
    utls_itree_node *r;

    n->left = NULL;
    n->right = NULL;
    utls_itree_split(t->root, &l, &r, n->start);
    t->root = utls_itree_merge(utls_itree_merge(l, n), r);
    t->num_nodes++;
}

utls_itree_node *utls_itree_remove(utls_itree *t, uint64_t key)
{
    utls_itree_node **link = &t->root;

    while (*link != NULL && (*link)->start != key) {
        link = key < (*link)->start ? &(*link)->left : &(*link)->right;
    }
    utls_itree_node *n = *link;
    if (n == NULL) {
        return NULL;
    }
    *link = utls_itree_merge(n->left, n->right);
    n->left = NULL;
    n->right = NULL;
    t->num_nodes--;
    return n;
}

utls_itree_node *utls_itree_find_le(const utls_itree *t, uint64_t key)
{
    utls_itree_node *n = t->root;
    utls_itree_node *best = NULL;

    while (n != NULL) {
        if (n->start <= key) {
            best = n;
            n = n->right;
        } else {
            n = n->left;
        }
    }
    return best;
}

utls_itree_node *utls_itree_find_ge(const utls_itree *t, uint64_t key)
{
    utls_itree_node *n = t->root;
    utls_itree_node *best = NULL;

    while (n != NULL) {
        if (n->start >= key) {
            best = n;
            n = n->left;
        } else {
            n = n->right;
        }
    }
    return best;
}

utls_itree_node *utls_itree_max(const utls_itree *t)
{
    utls_itree_node *n = t->root;

    while (n != NULL && n->right != NULL) {
        n = n->right;
    }
    return n;
}

utls_itree_node *utls_itree_min(const utls_itree *t)
{
    utls_itree_node *n = t->root;

    while (n != NULL && n->left != NULL) {
        n = n->left;
    }
    return n;
}

int utls_itree_add_range(utls_itree *t, uint64_t start, uint64_t end)
{
    if (end <= start) {
        return 1;
    }
    /* The run that may absorb [start, end) on the left: one that overlaps or
     * touches start. */
    utls_itree_node *pred = utls_itree_find_le(t, start);
    if (pred != NULL && pred->end >= end) {
        return 1; /* already covered */
    }
    uint64_t lo = (pred != NULL && pred->end >= start) ? pred->start : start;

    utls_itree_node *a;
    utls_itree_node *b;
    utls_itree_node *m;
    utls_itree_node *c;
    utls_itree_split(t->root, &a, &b, lo);
    if (end == UINT64_MAX) {
        m = b;
        c = NULL;
    } else {
        utls_itree_split(b, &m, &c, end + 1);
    }

    utls_itree_node *n;
    if (m == NULL) {
        n = utls_itree_node_new(t);
        if (n == NULL) {
            t->root = utls_itree_merge(a, c);
            return 0;
        }
        n->start = start;
        n->end = end;
        t->num_nodes++;
    } else {
        /* Every node in m overlaps or touches [start, end]; keep the root of
         * m (its priority is the largest), widen it and free the rest. */
        uint64_t new_start, new_end;
        (void)utls_itree_extent(m, start, end, &new_start, &new_end);
        n = m;
        size_t freed = utls_itree_free_subtree(n->left) + utls_itree_free_subtree(n->right);
        t->num_nodes -= freed;
        n->left = NULL;
        n->right = NULL;
        n->start = new_start;
        n->end = new_end;
    }
    t->root = utls_itree_merge(utls_itree_merge(a, n), c);
    return 1;
}

utls_itree_node *utls_itree_extent(utls_itree_node *m, uint64_t start, uint64_t end,
                                   uint64_t *out_start, uint64_t *out_end)
{
    utls_itree_node *first = m;
    const utls_itree_node *last = m;

    while (first->left != NULL) {
        first = first->left;
    }
    while (last->right != NULL) {
        last = last->right;
    }
    *out_start = first->start < start ? first->start : start;
    *out_end = last->end > end ? last->end : end;
    return first;
}

static uint64_t itree_span_sum(const utls_itree_node *n)
{
    uint64_t sum = 0;

    while (n != NULL) {
        sum += itree_span_sum(n->left);
        sum += n->end > n->start ? n->end - n->start : 0;
        n = n->right;
    }
    return sum;
}

uint64_t utls_itree_trim_below(utls_itree *t, size_t *out_freed, uint64_t offset)
{
    utls_itree_node *a;
    utls_itree_node *b;
    uint64_t dropped = 0;

    utls_itree_split(t->root, &a, &b, offset);
    /* Only the largest node below |offset| can straddle it. */
    utls_itree_node **link = &a;
    while (*link != NULL && (*link)->right != NULL) {
        link = &(*link)->right;
    }
    utls_itree_node *top = *link;
    if (top != NULL && top->end > offset) {
        *link = top->left;
        top->left = NULL;
        uint64_t cut = offset - top->start;
        dropped += cut;
        top->head += (size_t)cut;
        top->start = offset;
        b = utls_itree_merge(top, b);
    }
    /* Sum and free what is entirely below. */
    dropped += itree_span_sum(a);
    size_t freed = itree_free_subtree_keep(t, a);
    t->num_nodes -= freed;
    if (out_freed != NULL) {
        *out_freed += freed;
    }
    t->root = b;
    return dropped;
}
