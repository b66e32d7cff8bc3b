/* scan.c: plausible TLS record header scanner; see include/utls/scan.h. */
#include "utls/scan.h"

#include <stdlib.h>
#include <string.h>

#include "itree.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Pending node flags. */
#define SCAN_PENDING_CHAINED 1u  /* position follows a confirmed record */
#define SCAN_PENDING_UNPARSED 2u /* header bytes not seen yet: end unknown */

struct utls_scan {
    utls_scan_profile profile;
    uint64_t inorder;
    utls_itree checked; /* header positions already examined */
    utls_itree pending; /* plausible headers waiting for their record */
    utls_scan_stats stats;
};

void utls_scan_profile_tls13_app(utls_scan_profile *out_profile)
{
    memset(out_profile, 0, sizeof(*out_profile));
    out_profile->type_mask = UTLS_SCAN_TYPE(23);
    out_profile->version = 0x0303;
    /* RFC 8446 5.2: "The length MUST NOT exceed 2^14 + 256 bytes." and the
     * AEAD output holds at least the 1-byte inner content type and a 16-byte
     * tag. */
    out_profile->min_len = 17;
    out_profile->max_len = (1 << 14) + 256;
    out_profile->require_whole = 1;
}

double utls_scan_profile_fp_rate(const utls_scan_profile *profile)
{
    int types = __builtin_popcount(profile->type_mask);
    double lens = profile->max_len >= profile->min_len
                      ? (double)(profile->max_len - profile->min_len + 1)
                      : 0.0;
    return (double)types / 256.0 / 65536.0 * lens / 65536.0;
}

utls_scan *utls_scan_new(const utls_scan_profile *profile, uint64_t inorder_offset)
{
    if (profile->min_len > profile->max_len) {
        return NULL;
    }
    utls_scan *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    s->profile = *profile;
    if (s->profile.max_pending == 0) {
        s->profile.max_pending = UTLS_SCAN_MAX_PENDING;
    }
    if (s->profile.max_intervals == 0) {
        s->profile.max_intervals = UTLS_SCAN_MAX_INTERVALS;
    }
    s->inorder = inorder_offset;
    utls_itree_init(&s->checked, (uint64_t)(uintptr_t)s ^ 0xC0FFEEULL);
    utls_itree_init(&s->pending, (uint64_t)(uintptr_t)s ^ 0xBADC0DEULL);
    return s;
}

void utls_scan_free(utls_scan *s)
{
    if (s == NULL) {
        return;
    }
    utls_itree_clear(&s->checked);
    utls_itree_clear(&s->pending);
    free(s);
}

/* scan_record_end sets |*out_end| to the end of a record of |rec_len|
 * ciphertext bytes whose header is at |pos|, and returns 0 if that end
 * would pass 2^64 - 1 (such a record can never be present). */
static int scan_record_end(uint64_t pos, uint16_t rec_len, uint64_t *out_end)
{
    uint64_t wire = UTLS_SCAN_HEADER_LEN + (uint64_t)rec_len;
    if (wire > UINT64_MAX - pos) {
        return 0;
    }
    *out_end = pos + wire;
    return 1;
}

/* scan_header_ok applies the profile's rules to the 5 bytes at |h|. */
static int scan_header_ok(const utls_scan_profile *pr, const uint8_t *h, uint16_t *out_len)
{
    uint16_t len = (uint16_t)((h[3] << 8) | h[4]);

    if (h[0] >= 32 || (pr->type_mask & UTLS_SCAN_TYPE(h[0])) == 0) {
        return 0;
    }
    if (h[1] != (pr->version >> 8) || h[2] != (pr->version & 0xff)) {
        return 0;
    }
    if (len < pr->min_len || len > pr->max_len) {
        return 0;
    }
    *out_len = len;
    return 1;
}

/* scan_find_next returns the first index i in [from, to) where a plausible
 * header starts, or |to|. The caller guarantees to + 4 <= the run length, so
 * every header examined is wholly inside the run. The fast path compares the
 * two version bytes 16 positions at a time: on random data only 1 position
 * in 65536 survives that test. */
static size_t scan_find_next(const utls_scan_profile *pr, const uint8_t *d, size_t from,
                             size_t to, uint16_t *out_len)
{
    size_t i = from;
    uint8_t vh = (uint8_t)(pr->version >> 8);
    uint8_t vl = (uint8_t)(pr->version & 0xff);

#if defined(__SSE2__)
    const __m128i xh = _mm_set1_epi8((char)vh);
    const __m128i xl = _mm_set1_epi8((char)vl);
    /* d[i+1..i+32] and d[i+2..i+33] must be inside the run: i + 34 <= to + 4. */
    while (i + 32 <= to) {
        __m128i a0 = _mm_loadu_si128((const __m128i *)(d + i + 1));
        __m128i b0 = _mm_loadu_si128((const __m128i *)(d + i + 2));
        __m128i a1 = _mm_loadu_si128((const __m128i *)(d + i + 17));
        __m128i b1 = _mm_loadu_si128((const __m128i *)(d + i + 18));
        __m128i m0 = _mm_and_si128(_mm_cmpeq_epi8(a0, xh), _mm_cmpeq_epi8(b0, xl));
        __m128i m1 = _mm_and_si128(_mm_cmpeq_epi8(a1, xh), _mm_cmpeq_epi8(b1, xl));
        uint32_t mask = (uint32_t)_mm_movemask_epi8(m0) |
                        ((uint32_t)_mm_movemask_epi8(m1) << 16);
        while (mask != 0) {
            size_t p = i + (size_t)__builtin_ctz(mask);
            if (scan_header_ok(pr, d + p, out_len)) {
                return p;
            }
            mask &= mask - 1;
        }
        i += 32;
    }
#else
    /* Portable path: skip to the next version-major byte with memchr. */
    while (i < to) {
        const uint8_t *q = memchr(d + i + 1, vh, to - i);
        if (q == NULL) {
            return to;
        }
        i = (size_t)(q - d) - 1;
        if (q[1] == vl && scan_header_ok(pr, d + i, out_len)) {
            return i;
        }
        i++;
    }
#endif
    for (; i < to; i++) {
        if (d[i + 1] == vh && d[i + 2] == vl && scan_header_ok(pr, d + i, out_len)) {
            return i;
        }
    }
    return to;
}

static void scan_enforce_intervals(utls_scan *s)
{
    while (s->checked.num_nodes > s->profile.max_intervals) {
        utls_itree_node *last = utls_itree_max(&s->checked);
        utls_itree_node_free(utls_itree_remove(&s->checked, last->start));
        s->stats.intervals_dropped++;
    }
}

static int scan_mark_checked(utls_scan *s, uint64_t start, uint64_t end)
{
    if (!utls_itree_add_range(&s->checked, start, end)) {
        return 0;
    }
    scan_enforce_intervals(s);
    return 1;
}

static int scan_is_checked(const utls_scan *s, uint64_t pos)
{
    const utls_itree_node *n = utls_itree_find_le(&s->checked, pos);
    return n != NULL && n->end > pos;
}

/* scan_add_pending records a plausible header (or a chained position) that
 * cannot be reported yet. Returns 1, or 0 on allocation failure. */
static int scan_add_pending(utls_scan *s, uint64_t pos, uint64_t end, uint32_t flags)
{
    utls_itree_node *n = utls_itree_node_new(&s->pending);
    if (n == NULL) {
        return 0;
    }
    n->start = pos;
    n->end = end;
    n->flags = flags;
    utls_itree_insert(&s->pending, n);
    while (s->pending.num_nodes > s->profile.max_pending) {
        utls_itree_node *last = utls_itree_max(&s->pending);
        utls_itree_node_free(utls_itree_remove(&s->pending, last->start));
        s->stats.pending_dropped++;
    }
    return 1;
}

static void scan_emit(utls_scan *s, utls_scan_hit *hit, uint64_t pos, const uint8_t *h,
                      int chained)
{
    hit->offset = pos;
    hit->type = h[0];
    hit->version = (uint16_t)((h[1] << 8) | h[2]);
    hit->len = (uint16_t)((h[3] << 8) | h[4]);
    hit->chained = chained;
    s->stats.hits++;
    s->stats.hits_chained += chained != 0;
}

/* scan_chained_body looks at the chained hits |hits[0..n)|: if |pos| lies in
 * the body of one (after its first byte, before its record's end), sets
 * |*out_skip_end| to that end; returns the lowest body start above |pos|
 * (UINT64_MAX if none). */
static uint64_t scan_chained_body(const utls_scan_hit *hits, size_t n, uint64_t pos,
                                  uint64_t *out_skip_end)
{
    uint64_t lowest = UINT64_MAX;

    for (size_t i = 0; i < n; i++) {
        uint64_t body = hits[i].offset + 1;
        uint64_t end = hits[i].offset + UTLS_SCAN_HEADER_LEN + hits[i].len;

        if (!hits[i].chained || end < body) {
            continue;
        }
        if (pos >= body && pos < end) {
            *out_skip_end = end;
            return UINT64_MAX;
        }
        if (body > pos && body < lowest) {
            lowest = body;
        }
    }
    return lowest;
}

utls_scan_result utls_scan_feed(utls_scan *s, utls_scan_hit *out_hits, size_t max_hits,
                                size_t *out_num_hits, uint64_t offset, const uint8_t *data,
                                size_t len)
{
    size_t num = 0;

    *out_num_hits = 0;
    if (len == 0) {
        return UTLS_SCAN_DONE;
    }
    if (data == NULL || (uint64_t)len > UINT64_MAX - offset) {
        return UTLS_SCAN_ERROR;
    }
    uint64_t run_end = offset + len;
    if (run_end <= s->inorder) {
        return UTLS_SCAN_DONE;
    }
    uint64_t run_start = offset < s->inorder ? s->inorder : offset;

    /* Pending headers inside this run whose record may now be complete. */
    uint64_t pos = run_start;
    for (;;) {
        utls_itree_node *p = utls_itree_find_ge(&s->pending, pos);
        if (p == NULL || p->start >= run_end) {
            break;
        }
        pos = p->start + 1;
        if (p->start + UTLS_SCAN_HEADER_LEN > run_end) {
            continue;
        }
        const uint8_t *h = data + (p->start - offset);
        if (p->flags & SCAN_PENDING_UNPARSED) {
            uint16_t rec_len;
            uint64_t rec_end = 0;
            if (!scan_header_ok(&s->profile, h, &rec_len) ||
                !scan_record_end(p->start, rec_len, &rec_end)) {
                /* The record after a confirmed one does not look like a
                 * header: the stream is not what we think; leave it to the
                 * in-order path. */
                s->stats.chain_breaks++;
                utls_itree_node_free(utls_itree_remove(&s->pending, p->start));
                continue;
            }
            p->end = rec_end;
            p->flags &= ~SCAN_PENDING_UNPARSED;
        }
        if (s->profile.require_whole && p->end > run_end) {
            continue;
        }
        if (num == max_hits) {
            *out_num_hits = num;
            return UTLS_SCAN_MORE;
        }
        scan_emit(s, &out_hits[num++], p->start, h, (p->flags & SCAN_PENDING_CHAINED) != 0);
        utls_itree_node_free(utls_itree_remove(&s->pending, p->start));
    }

    /* Unchecked positions: those with a whole header inside the run. The
     * bodies of the chained hits just reported are left out: a chained
     * header is a true record boundary, so nothing inside its record is a
     * header, and scanning ~all the bytes past a hole again would cost more
     * than everything else the scanner does. They stay unchecked: if the
     * record then fails to verify (bytes forged at the boundary), a later
     * feed of this run scans them; if it verifies, utls_scan_confirm marks
     * them checked. */
    size_t num_chained = num;
    if (run_end - run_start < UTLS_SCAN_HEADER_LEN) {
        *out_num_hits = num;
        return UTLS_SCAN_DONE;
    }
    uint64_t scan_end = run_end - (UTLS_SCAN_HEADER_LEN - 1);
    pos = run_start;
    while (pos < scan_end) {
        utls_itree_node *c = utls_itree_find_le(&s->checked, pos);
        if (c != NULL && c->end > pos) {
            pos = c->end;
            continue;
        }
        uint64_t skip_end = 0;
        uint64_t body_start = scan_chained_body(out_hits, num_chained, pos, &skip_end);
        if (skip_end != 0) {
            pos = skip_end;
            continue;
        }
        utls_itree_node *next = utls_itree_find_ge(&s->checked, pos);
        uint64_t gap_end = (next != NULL && next->start < scan_end) ? next->start : scan_end;
        if (body_start < gap_end) {
            gap_end = body_start;
        }
        uint64_t gap_start = pos;
        while (pos < gap_end) {
            uint16_t rec_len = 0;
            size_t i = scan_find_next(&s->profile, data, (size_t)(pos - offset),
                                      (size_t)(gap_end - offset), &rec_len);
            uint64_t hit = offset + i;
            s->stats.positions_checked += hit - pos;
            if (hit == gap_end) {
                pos = gap_end;
                break;
            }
            uint64_t rec_end = 0;
            if (!scan_record_end(hit, rec_len, &rec_end)) {
                /* Cannot fit below 2^64: not a header worth reporting. */
            } else if (s->profile.require_whole && rec_end > run_end) {
                if (!scan_add_pending(s, hit, rec_end, 0)) {
                    goto err;
                }
            } else {
                if (num == max_hits) {
                    if (!scan_mark_checked(s, gap_start, hit)) {
                        goto err;
                    }
                    *out_num_hits = num;
                    return UTLS_SCAN_MORE;
                }
                scan_emit(s, &out_hits[num++], hit, data + i, 0);
            }
            s->stats.positions_checked++;
            pos = hit + 1;
        }
        if (!scan_mark_checked(s, gap_start, gap_end)) {
            goto err;
        }
    }
    *out_num_hits = num;
    return UTLS_SCAN_DONE;

err:
    /* Hits already written were taken out of the pending set or are below
     * the last checked mark; report them. */
    *out_num_hits = num;
    return UTLS_SCAN_ERROR;
}

int utls_scan_confirm(utls_scan *s, uint64_t offset, size_t wire_len)
{
    if (wire_len < UTLS_SCAN_HEADER_LEN || (uint64_t)wire_len > UINT64_MAX - offset) {
        return 0;
    }
    uint64_t next = offset + wire_len;
    if (next <= s->inorder) {
        return 1;
    }
    uint64_t start = offset < s->inorder ? s->inorder : offset;

    /* Nothing inside an authenticated record is a header. */
    for (;;) {
        utls_itree_node *p = utls_itree_find_ge(&s->pending, start);
        if (p == NULL || p->start >= next) {
            break;
        }
        utls_itree_node_free(utls_itree_remove(&s->pending, p->start));
    }
    int next_checked = scan_is_checked(s, next);
    if (!scan_mark_checked(s, start, next)) {
        return 0;
    }
    utls_itree_node *p = utls_itree_find_ge(&s->pending, next);
    if (p != NULL && p->start == next) {
        p->flags |= SCAN_PENDING_CHAINED;
        return 1;
    }
    if (next_checked || next == UINT64_MAX) {
        /* Already checked: either reported (the caller holds it) or not a
         * plausible header. Never report a position twice. */
        return 1;
    }
    if (!scan_add_pending(s, next, next, SCAN_PENDING_CHAINED | SCAN_PENDING_UNPARSED)) {
        return 0;
    }
    return scan_mark_checked(s, next, next + 1);
}

int utls_scan_advance(utls_scan *s, uint64_t inorder_offset)
{
    if (inorder_offset < s->inorder) {
        return 0;
    }
    s->inorder = inorder_offset;
    utls_itree_trim_below(&s->checked, NULL, inorder_offset);
    utls_itree_node *below;
    utls_itree_node *rest;
    utls_itree_split(s->pending.root, &below, &rest, inorder_offset);
    s->pending.num_nodes -= utls_itree_free_subtree(below);
    s->pending.root = rest;
    return 1;
}

int utls_scan_forget(utls_scan *s, uint64_t from, uint64_t to)
{
    utls_itree_node *n;

    if (to <= from) {
        return 1;
    }
    /* Checked intervals: cut [from, to) out, keeping what lies outside. */
    while ((n = utls_itree_find_le(&s->checked, to - 1)) != NULL && n->end > from) {
        uint64_t a = n->start;
        uint64_t b = n->end;
        utls_itree_node_free(utls_itree_remove(&s->checked, a));
        if (a < from && !utls_itree_add_range(&s->checked, a, from)) {
            return 0;
        }
        if (b > to && !utls_itree_add_range(&s->checked, to, b)) {
            return 0;
        }
    }
    /* Pending headers found in the old bytes. */
    while ((n = utls_itree_find_ge(&s->pending, from)) != NULL && n->start < to) {
        utls_itree_node_free(utls_itree_remove(&s->pending, n->start));
    }
    return 1;
}

size_t utls_scan_num_pending(const utls_scan *s)
{
    return s->pending.num_nodes;
}

size_t utls_scan_num_intervals(const utls_scan *s)
{
    return s->checked.num_nodes;
}

void utls_scan_get_stats(const utls_scan *s, utls_scan_stats *out_stats)
{
    *out_stats = s->stats;
}
