/* streamgen.h: seeded generator of TLS-like record streams and their
 * segmentation, shared by the property and storm tests and bench/core.
 * Header-only; everything is static. Records are TLS 1.3 application-data
 * shaped: 17 03 03 len, then random "ciphertext". */
#ifndef UTLS_TESTS_STREAMGEN_H
#define UTLS_TESTS_STREAMGEN_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t s;
} sg_rng;

static inline uint64_t sg_next(sg_rng *r)
{
    /* splitmix64 */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* sg_uniform returns a double in [0, 1). */
static inline double sg_uniform(sg_rng *r)
{
    return (double)(sg_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

static inline uint64_t sg_range(sg_rng *r, uint64_t lo, uint64_t hi)
{
    return lo + sg_next(r) % (hi - lo + 1);
}

typedef enum {
    SG_CBR = 0, /* every record 1448 bytes on the wire */
    SG_VBR,     /* video-like: a slowly drifting rate, +-15% per record, 300..1300 B */
    SG_MIXED    /* ciphertext uniform in 100 B .. 16 KiB */
} sg_model;

static const char *const sg_model_names[] = {"cbr", "vbr", "mixed"};

typedef struct {
    uint64_t offset;
    uint32_t wire_len;
} sg_record;

typedef struct {
    uint8_t *bytes;
    size_t len;
    sg_record *recs;
    size_t num_recs;
} sg_stream;

static inline void sg_put_header(uint8_t *p, uint16_t len)
{
    p[0] = 23;
    p[1] = 3;
    p[2] = 3;
    p[3] = (uint8_t)(len >> 8);
    p[4] = (uint8_t)len;
}

/* sg_stream_make builds about |target_len| bytes of records. With
 * |false_header_rate| > 0, that fraction of records carries a forged but
 * plausible header somewhere inside its ciphertext. Returns 1 or 0. */
static inline int sg_stream_make(sg_stream *out, sg_model model, size_t target_len, uint64_t seed,
                                 double false_header_rate)
{
    sg_rng r = {seed};
    size_t cap_recs = target_len / 22 + 16;
    memset(out, 0, sizeof(*out));
    out->bytes = malloc(target_len + 20000);
    out->recs = malloc(cap_recs * sizeof(sg_record));
    if (out->bytes == NULL || out->recs == NULL) {
        return 0;
    }
    double rate = 800.0;
    size_t off = 0;
    while (off < target_len) {
        size_t wire;
        switch (model) {
        case SG_CBR:
            wire = 1448;
            break;
        case SG_VBR:
            rate += (sg_uniform(&r) - 0.5) * 60.0;
            rate = rate < 300.0 ? 300.0 : rate > 1300.0 ? 1300.0 : rate;
            wire = (size_t)(rate * (0.85 + 0.3 * sg_uniform(&r)));
            break;
        case SG_MIXED:
            wire = 5 + (size_t)sg_range(&r, 100, 16384);
            break;
        default:
            wire = 1448;
            break;
        }
        uint8_t *p = out->bytes + off;
        sg_put_header(p, (uint16_t)(wire - 5));
        for (size_t i = 5; i < wire; i++) {
            p[i] = (uint8_t)sg_next(&r);
        }
        if (false_header_rate > 0.0 && sg_uniform(&r) < false_header_rate && wire >= 20) {
            size_t at = (size_t)sg_range(&r, 5, wire - 5);
            sg_put_header(p + at, (uint16_t)sg_range(&r, 17, 16640));
        }
        out->recs[out->num_recs].offset = off;
        out->recs[out->num_recs].wire_len = (uint32_t)wire;
        out->num_recs++;
        off += wire;
    }
    out->len = off;
    return 1;
}

static inline void sg_stream_free(sg_stream *s)
{
    free(s->bytes);
    free(s->recs);
    memset(s, 0, sizeof(*s));
}

/* sg_record_at returns the index of the record starting at |offset|, or
 * (size_t)-1 if no record starts there. */
static inline size_t sg_record_at(const sg_stream *s, uint64_t offset)
{
    size_t lo = 0;
    size_t hi = s->num_recs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->recs[mid].offset < offset) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo < s->num_recs && s->recs[lo].offset == offset) {
        return lo;
    }
    return (size_t)-1;
}

typedef struct {
    uint64_t offset;
    uint32_t len;
    double arrival; /* sort key */
} sg_segment;

/* sg_segments_room makes |*v| (|*cap| entries) hold more than |need|
 * entries, doubling it; returns 1, or 0 after freeing |*v| when out of
 * memory. */
static inline int sg_segments_room(sg_segment **v, size_t *cap, size_t need)
{
    sg_segment *nv;

    if (need < *cap) {
        return 1;
    }
    *cap *= 2;
    nv = realloc(*v, *cap * sizeof(**v));
    if (nv == NULL) {
        free(*v);
        *v = NULL;
        return 0;
    }
    *v = nv;
    return 1;
}

/* sg_segments_make cuts [0, stream_len) into segments of 1..max_seg bytes
 * (max_seg = 0: random up to 1460), drops each with |loss|, duplicates with
 * |dup|, re-sends a dropped one re-segmented (different cut points, with
 * overlap) with |resend|, and reorders by adding random delay of up to
 * |reorder| positions. Returns the segments in arrival order and their count
 * in |*out_num|, or NULL. */
static inline sg_segment *sg_segments_make(size_t *out_num, size_t stream_len, uint64_t seed,
                                           size_t max_seg, double loss, double dup,
                                           double resend, double reorder)
{
    sg_rng r = {seed ^ 0xABCDEF};
    size_t cap = stream_len / 1 + 16;
    size_t n = 0;
    sg_segment *v = malloc(cap * sizeof(*v) / 4 + 64 * sizeof(*v));
    size_t vcap = cap / 4 + 64;
    if (v == NULL) {
        return NULL;
    }
    size_t off = 0;
    size_t idx = 0;
    while (off < stream_len) {
        size_t len = max_seg != 0 ? max_seg : (size_t)sg_range(&r, 1, 1460);
        if (max_seg == 0 && sg_uniform(&r) < 0.7) {
            len = 1448; /* mostly full-sized, like a bulk sender */
        }
        if (len > stream_len - off) {
            len = stream_len - off;
        }
        int copies = 1;
        if (sg_uniform(&r) < loss) {
            copies = 0;
            if (sg_uniform(&r) < resend) {
                /* Re-sent re-segmented: two overlapping pieces, later. */
                size_t cut = (size_t)sg_range(&r, 0, len);
                size_t s1 = off >= 7 ? off - 7 : 0;
                size_t e2 = off + len + 9 < stream_len ? off + len + 9 : stream_len;
                for (int k = 0; k < 2; k++) {
                    if (!sg_segments_room(&v, &vcap, n + 2)) {
                        return NULL;
                    }
                    uint64_t a = k == 0 ? s1 : off + cut;
                    uint64_t b = k == 0 ? off + cut : e2;
                    if (b > a) {
                        v[n].offset = a;
                        v[n].len = (uint32_t)(b - a);
                        v[n].arrival = (double)idx + 20.0 + sg_uniform(&r) * 40.0;
                        n++;
                    }
                }
            }
        } else if (sg_uniform(&r) < dup) {
            copies = 2;
        }
        for (int c = 0; c < copies; c++) {
            if (!sg_segments_room(&v, &vcap, n + 2)) {
                return NULL;
            }
            v[n].offset = off;
            v[n].len = (uint32_t)len;
            v[n].arrival = (double)idx + sg_uniform(&r) * reorder + c * 5.0;
            n++;
        }
        off += len;
        idx++;
    }
    /* Insertion sort by arrival: nearly sorted already. */
    for (size_t i = 1; i < n; i++) {
        sg_segment x = v[i];
        size_t j = i;
        while (j > 0 && v[j - 1].arrival > x.arrival) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
    *out_num = n;
    return v;
}

#endif
