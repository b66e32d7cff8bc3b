/* seqpred.c: sequence-number predictor; see include/utls/seqpred.h. */
#include "utls/seqpred.h"

#include <stdlib.h>
#include <string.h>

/* SEQPRED_EWMA_SAMPLES: the size statistics weigh the last ~2^5 records, so a
 * codec that changes rate is followed within a few dozen records. */
#define SEQPRED_EWMA_SAMPLES 32
#define SEQPRED_EWMA_ALPHA (1.0 / (double)SEQPRED_EWMA_SAMPLES)

/* SEQPRED_WINDOW_FACTOR: candidates are taken from this many times the cap
 * on each side of the most likely value, then sorted by likelihood. */
#define SEQPRED_WINDOW_FACTOR 2

/* SEQPRED_CONSTANT_VAR: below this size variance (a standard deviation of
 * half a byte) the recent record sizes count as one size. */
#define SEQPRED_CONSTANT_VAR 0.25

struct utls_seqpred {
    utls_seqpred_config config;
    utls_seqpred_record anchors[UTLS_SEQPRED_MAX_ANCHORS]; /* sorted by offset */
    size_t num_anchors;
    /* Size statistics over observed wire lengths. */
    uint64_t num_observed;
    size_t min_seen;
    size_t max_seen;
    double mean;
    double var;
    /* Nonce delta mode. */
    int delta_known;
    int delta_broken;
    uint64_t delta;
    uint64_t delta_confirmations;
    utls_seqpred_stats stats;
};

void utls_seqpred_config_default(utls_seqpred_config *out_config)
{
    memset(out_config, 0, sizeof(*out_config));
    out_config->min_wire_len = UTLS_SEQPRED_DEFAULT_MIN_WIRE;
    out_config->max_wire_len = UTLS_SEQPRED_DEFAULT_MAX_WIRE;
    out_config->max_candidates = UTLS_SEQPRED_DEFAULT_CANDIDATES;
}

utls_seqpred *utls_seqpred_new(const utls_seqpred_config *config)
{
    utls_seqpred_config cfg;

    if (config != NULL) {
        cfg = *config;
    } else {
        utls_seqpred_config_default(&cfg);
    }
    if (cfg.min_wire_len == 0 || cfg.min_wire_len > cfg.max_wire_len) {
        return NULL;
    }
    if (cfg.max_candidates > UTLS_SEQPRED_MAX_CANDIDATES) {
        cfg.max_candidates = UTLS_SEQPRED_MAX_CANDIDATES;
    }
    utls_seqpred *sp = calloc(1, sizeof(*sp));
    if (sp == NULL) {
        return NULL;
    }
    sp->config = cfg;
    return sp;
}

void utls_seqpred_free(utls_seqpred *sp)
{
    free(sp);
}

void utls_seqpred_observe(utls_seqpred *sp, size_t wire_len)
{
    double w = (double)wire_len;

    sp->num_observed++;
    if (sp->num_observed == 1) {
        sp->min_seen = wire_len;
        sp->max_seen = wire_len;
        sp->mean = w;
        sp->var = 0.0;
        return;
    }
    if (wire_len < sp->min_seen) {
        sp->min_seen = wire_len;
    }
    if (wire_len > sp->max_seen) {
        sp->max_seen = wire_len;
    }
    /* Plain average while warming up, then exponentially weighted. */
    /* max(1/n, alpha), without a division per record once n reaches
     * 1/alpha (alpha is a power of two: 1/n equals it exactly there). */
    double alpha = sp->num_observed >= SEQPRED_EWMA_SAMPLES
                       ? SEQPRED_EWMA_ALPHA
                       : 1.0 / (double)sp->num_observed;
    double diff = w - sp->mean;
    sp->mean += alpha * diff;
    sp->var = (1.0 - alpha) * (sp->var + alpha * diff * diff);
}

void utls_seqpred_inherit_sizes(utls_seqpred *sp, const utls_seqpred *from)
{
    if (from == NULL || from->num_observed == 0) {
        return;
    }
    if (sp->num_observed == 0) {
        sp->num_observed = from->num_observed;
        sp->min_seen = from->min_seen;
        sp->max_seen = from->max_seen;
        sp->mean = from->mean;
        sp->var = from->var;
        return;
    }
    /* |sp|'s records came last: in the running statistics they weigh 1/n
     * each while n is below SEQPRED_EWMA_SAMPLES, then about alpha each; the
     * older ones (|from|'s) weigh the rest. The result is the mixture of the
     * two (its variance includes the spread between their means). */
    uint64_t total = sp->num_observed + from->num_observed;
    double window = total < SEQPRED_EWMA_SAMPLES ? (double)total : (double)SEQPRED_EWMA_SAMPLES;
    double f = (double)sp->num_observed / window;
    if (f > 1.0) {
        f = 1.0;
    }
    double diff = sp->mean - from->mean;
    sp->var = (1.0 - f) * from->var + f * sp->var + f * (1.0 - f) * diff * diff;
    sp->mean = (1.0 - f) * from->mean + f * sp->mean;
    sp->num_observed = total;
    if (from->min_seen < sp->min_seen) {
        sp->min_seen = from->min_seen;
    }
    if (from->max_seen > sp->max_seen) {
        sp->max_seen = from->max_seen;
    }
}

/* seqpred_lower_index returns the number of anchors with offset < |offset|. */
static size_t seqpred_lower_index(const utls_seqpred *sp, uint64_t offset)
{
    size_t lo = 0;
    size_t hi = sp->num_anchors;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sp->anchors[mid].offset < offset) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

static int seqpred_insert(utls_seqpred *sp, const utls_seqpred_record *rec, int observe);

int utls_seqpred_add_anchor(utls_seqpred *sp, const utls_seqpred_record *rec)
{
    return seqpred_insert(sp, rec, 1);
}

int utls_seqpred_add_origin(utls_seqpred *sp, uint64_t offset, uint64_t seq)
{
    utls_seqpred_record rec = {0};

    /* A record of the smallest size that ends at |offset| and carries
     * seq - 1; its size says nothing about the sender, so it is not observed. */
    if (seq == 0 || offset < sp->config.min_wire_len) {
        return 0;
    }
    rec.offset = offset - sp->config.min_wire_len;
    rec.seq = seq - 1;
    rec.wire_len = sp->config.min_wire_len;
    return seqpred_insert(sp, &rec, 0);
}

static int seqpred_insert(utls_seqpred *sp, const utls_seqpred_record *rec, int observe)
{
    if (rec->wire_len < sp->config.min_wire_len || rec->wire_len > sp->config.max_wire_len ||
        (uint64_t)rec->wire_len > UINT64_MAX - rec->offset) {
        return 0;
    }
    size_t i = seqpred_lower_index(sp, rec->offset);
    if (i < sp->num_anchors && sp->anchors[i].offset == rec->offset) {
        const utls_seqpred_record *a = &sp->anchors[i];
        return a->seq == rec->seq && a->wire_len == rec->wire_len;
    }
    if (i > 0) {
        const utls_seqpred_record *a = &sp->anchors[i - 1];
        if (a->seq >= rec->seq || a->offset + a->wire_len > rec->offset) {
            return 0;
        }
    }
    if (i < sp->num_anchors) {
        const utls_seqpred_record *b = &sp->anchors[i];
        if (b->seq <= rec->seq || rec->offset + rec->wire_len > b->offset) {
            return 0;
        }
    }
    if (sp->num_anchors == UTLS_SEQPRED_MAX_ANCHORS) {
        /* Forget the oldest (lowest) anchor. */
        if (i == 0) {
            return 1;
        }
        memmove(&sp->anchors[0], &sp->anchors[1], (i - 1) * sizeof(sp->anchors[0]));
        i--;
    } else {
        memmove(&sp->anchors[i + 1], &sp->anchors[i],
                (sp->num_anchors - i) * sizeof(sp->anchors[0]));
        sp->num_anchors++;
    }
    sp->anchors[i] = *rec;

    if (sp->config.nonce_delta && rec->has_nonce) {
        uint64_t d = rec->explicit_nonce - rec->seq;
        if (!sp->delta_known) {
            sp->delta_known = 1;
            sp->delta = d;
            sp->delta_confirmations = 1;
        } else if (d == sp->delta) {
            sp->delta_confirmations++;
        } else {
            /* Nonces are not seq + constant (e.g. random per record): the
             * mode can never be trusted again for this connection. */
            sp->delta_broken = 1;
            sp->stats.nonce_mismatches++;
        }
    }
    if (observe) {
        utls_seqpred_observe(sp, rec->wire_len);
    }
    return 1;
}

/* seqpred_gap_fits: can |k| records of allowed sizes fill exactly |gap| bytes? */
static int seqpred_gap_fits(const utls_seqpred *sp, uint64_t gap, uint64_t k)
{
    uint64_t minw = sp->config.min_wire_len, maxw = sp->config.max_wire_len;

    if (k == 0) {
        return gap == 0;
    }
    if (k > gap / minw) {
        return 0; /* k * minw > gap, without overflow */
    }
    return k > UINT64_MAX / maxw || k * maxw >= gap;
}

int utls_seqpred_plausible(const utls_seqpred *sp, uint64_t offset, size_t wire_len,
                           uint64_t seq)
{
    size_t i = seqpred_lower_index(sp, offset);

    if ((uint64_t)wire_len > UINT64_MAX - offset) {
        return 0;
    }
    if (i < sp->num_anchors && sp->anchors[i].offset == offset) {
        return sp->anchors[i].seq == seq && sp->anchors[i].wire_len == wire_len;
    }
    if (i > 0) {
        const utls_seqpred_record *b = &sp->anchors[i - 1];
        uint64_t end = b->offset + b->wire_len;

        if (end > offset || seq <= b->seq || !seqpred_gap_fits(sp, offset - end, seq - b->seq - 1)) {
            return 0;
        }
    }
    if (i < sp->num_anchors) {
        const utls_seqpred_record *a = &sp->anchors[i];

        if (offset + wire_len > a->offset || a->seq <= seq ||
            !seqpred_gap_fits(sp, a->offset - (offset + wire_len), a->seq - seq - 1)) {
            return 0;
        }
    }
    return 1;
}

void utls_seqpred_advance(utls_seqpred *sp, uint64_t inorder_offset)
{
    size_t below = 0;

    while (below < sp->num_anchors &&
           sp->anchors[below].offset + sp->anchors[below].wire_len <= inorder_offset) {
        below++;
    }
    if (below > 1) {
        size_t drop = below - 1;
        memmove(&sp->anchors[0], &sp->anchors[drop],
                (sp->num_anchors - drop) * sizeof(sp->anchors[0]));
        sp->num_anchors -= drop;
    }
}

typedef struct {
    uint64_t seq;
    double score;
} seqpred_cand;

/* seqpred_ln returns ln(k) for k >= 1 to about 1e-4, without libm (the core
 * is compiled into libssl, which does not link it): k = m * 2^e with m in
 * [1, 2), ln m = 2 atanh((m - 1) / (m + 1)). */
static double seqpred_ln(uint64_t k)
{
    int e = 63 - __builtin_clzll(k);
    double m = (double)k / (double)((uint64_t)1 << e);
    double t = (m - 1.0) / (m + 1.0);
    double t2 = t * t;
    return (double)e * 0.69314718055994531 +
           2.0 * t * (1.0 + t2 * (1.0 / 3.0 + t2 * (1.0 / 5.0 + t2 / 7.0)));
}

static double seqpred_abs(double x)
{
    return x < 0.0 ? -x : x;
}

/* seqpred_gap_score is the log-likelihood (up to a constant) that |k|
 * records fill |gap| bytes, with record sizes of mean |mu| and variance
 * |var| and a normal approximation of their sum. */
static double seqpred_gap_score(uint64_t gap, uint64_t k, double mu, double var)
{
    if (k == 0) {
        return gap == 0 ? 0.0 : -1e300;
    }
    double d = (double)gap - (double)k * mu;
    return -(d * d) / (2.0 * (double)k * var) - 0.5 * seqpred_ln(k);
}

static size_t seqpred_emit(uint64_t *out_seqs, size_t num, size_t cap, uint64_t seq)
{
    for (size_t i = 0; i < num; i++) {
        if (out_seqs[i] == seq) {
            return num;
        }
    }
    if (num < cap) {
        out_seqs[num++] = seq;
    }
    return num;
}

/* seqpred_emit_sure puts |seq| in the list even when it is full (replacing
 * the least likely entry that is not itself sure): for candidates that a size
 * model can rank too low but that cost one probe each. */
static size_t seqpred_emit_sure(uint64_t *out_seqs, size_t num, size_t cap, size_t *num_sure,
                                uint64_t seq)
{
    for (size_t i = 0; i < num; i++) {
        if (out_seqs[i] == seq) {
            return num;
        }
    }
    if (num < cap) {
        out_seqs[num++] = seq;
    } else if (*num_sure < cap) {
        out_seqs[cap - 1 - *num_sure] = seq;
    } else {
        return num;
    }
    (*num_sure)++;
    return num;
}

/* Until this many sizes were seen, the spread of sizes is not trusted below a
 * coefficient of variation of 1: four small records say little about the
 * fifth. */
#define SEQPRED_TRUST_SAMPLES 32

/* seqpred_range finds the anchors below and above |q|'s offset (either may
 * be NULL), the gaps to them and the feasible sequence numbers [lo, hi].
 * Returns 0 if no number is feasible (or |q| lies inside an anchor). The
 * caller has handled an anchor at the same offset and checked the bounds. */
static int seqpred_range(const utls_seqpred *sp, const utls_seqpred_query *q, size_t i,
                         uint64_t *out_gap_below, uint64_t *out_gap_above, uint64_t *out_lo,
                         uint64_t *out_hi)
{
    const uint64_t minw = sp->config.min_wire_len;
    const uint64_t maxw = sp->config.max_wire_len;
    const utls_seqpred_record *below = i > 0 ? &sp->anchors[i - 1] : NULL;
    const utls_seqpred_record *above = i < sp->num_anchors ? &sp->anchors[i] : NULL;
    uint64_t lo = 0;
    uint64_t hi = UINT64_MAX - 1;

    *out_gap_below = 0;
    *out_gap_above = 0;
    if (below != NULL) {
        uint64_t end = below->offset + below->wire_len;
        if (end > q->offset) {
            return 0; /* inside an authenticated record */
        }
        uint64_t gap = q->offset - end;
        uint64_t kmin = (gap + maxw - 1) / maxw;
        uint64_t kmax = gap / minw;
        if (kmin > kmax || below->seq >= UINT64_MAX - 1 - kmax) {
            return 0;
        }
        lo = below->seq + 1 + kmin;
        hi = below->seq + 1 + kmax;
        *out_gap_below = gap;
    }
    if (above != NULL) {
        uint64_t end = q->offset + q->wire_len;
        if (end > above->offset) {
            return 0; /* would overlap an authenticated record */
        }
        uint64_t gap = above->offset - end;
        uint64_t kmin = (gap + maxw - 1) / maxw;
        uint64_t kmax = gap / minw;
        if (kmin > kmax || above->seq < 1 + kmin) {
            return 0;
        }
        uint64_t a_hi = above->seq - 1 - kmin;
        uint64_t a_lo = above->seq - 1 < kmax ? 0 : above->seq - 1 - kmax;
        lo = a_lo > lo ? a_lo : lo;
        hi = a_hi < hi ? a_hi : hi;
        *out_gap_above = gap;
    }
    if (lo > hi) {
        return 0;
    }
    *out_lo = lo;
    *out_hi = hi;
    return 1;
}

int utls_seqpred_first_candidate(const utls_seqpred *sp, const utls_seqpred_query *q,
                                 uint64_t *out_seq)
{
    const uint64_t minw = sp->config.min_wire_len;
    const uint64_t maxw = sp->config.max_wire_len;
    uint64_t gap_below, gap_above, lo, hi, l, seq;

    /* The same order as utls_seqpred_candidates. */
    if (q->has_record_number) {
        *out_seq = q->record_number;
        return 1;
    }
    if (q->wire_len < minw || q->wire_len > maxw ||
        (uint64_t)q->wire_len > UINT64_MAX - q->offset) {
        return 0;
    }
    if (sp->config.nonce_delta && sp->delta_known && !sp->delta_broken && q->has_nonce) {
        return 0; /* the nonce's candidate and the anchors': rank them */
    }
    size_t i = seqpred_lower_index(sp, q->offset);
    if (i < sp->num_anchors && sp->anchors[i].offset == q->offset) {
        if (sp->anchors[i].wire_len != q->wire_len) {
            return 0;
        }
        *out_seq = sp->anchors[i].seq;
        return 1;
    }
    if (sp->num_anchors == 0 ||
        !seqpred_range(sp, q, i, &gap_below, &gap_above, &lo, &hi)) {
        return 0;
    }
    int has_below = i > 0;
    if (sp->config.constant_wire_len != 0) {
        l = sp->config.constant_wire_len;
    } else if (lo == hi) {
        *out_seq = lo;
        return 1;
    } else if (sp->num_observed >= 2 && sp->min_seen == sp->max_seen) {
        l = sp->min_seen;
    } else if (sp->num_observed >= SEQPRED_EWMA_SAMPLES && i == sp->num_anchors
               && sp->var < SEQPRED_CONSTANT_VAR) {
        /* The recent sizes are one size (earlier ones, a handshake's or a
         * first message's, have decayed out of the statistics): with only
         * an anchor below, the ranking's best is the gap over that size,
         * by a margin of about 1/(2k * 1e-4) in score over its neighbours
         * (the variance floor in utls_seqpred_candidates). */
        l = (uint64_t)(sp->mean + 0.5);
        if (l == 0) {
            return 0;
        }
    } else {
        return 0;
    }
    if (has_below) {
        if (gap_below % l != 0) {
            return 0;
        }
        seq = sp->anchors[i - 1].seq + 1 + gap_below / l;
    } else {
        if (gap_above % l != 0) {
            return 0;
        }
        seq = sp->anchors[i].seq - 1 - gap_above / l;
    }
    if (seq < lo || seq > hi) {
        return 0;
    }
    *out_seq = seq;
    return 1;
}

size_t utls_seqpred_candidates(utls_seqpred *sp, uint64_t *out_seqs, size_t max,
                               const utls_seqpred_query *q)
{
    size_t cap = max < sp->config.max_candidates ? max : sp->config.max_candidates;
    size_t num = 0;
    const uint64_t minw = sp->config.min_wire_len;
    const uint64_t maxw = sp->config.max_wire_len;

    sp->stats.queries++;
    if (cap == 0) {
        return 0;
    }
    if (q->has_record_number) {
        /* The record says which it is; the AEAD check confirms it. */
        out_seqs[0] = q->record_number;
        sp->stats.exact++;
        sp->stats.candidates++;
        return 1;
    }
    if (q->wire_len < minw || q->wire_len > maxw ||
        (uint64_t)q->wire_len > UINT64_MAX - q->offset) {
        return 0;
    }
    if (sp->config.nonce_delta && sp->delta_known && !sp->delta_broken && q->has_nonce) {
        num = seqpred_emit(out_seqs, num, cap, q->explicit_nonce - sp->delta);
        if (sp->delta_confirmations >= 2) {
            /* Two verified records agree: the delta is the sender's rule. */
            sp->stats.exact++;
            sp->stats.candidates += num;
            return num;
        }
    }

    size_t i = seqpred_lower_index(sp, q->offset);
    const utls_seqpred_record *above = NULL;
    const utls_seqpred_record *below = i > 0 ? &sp->anchors[i - 1] : NULL;
    if (i < sp->num_anchors) {
        above = &sp->anchors[i];
        if (above->offset == q->offset) {
            sp->stats.candidates++;
            if (above->wire_len != q->wire_len) {
                return 0;
            }
            out_seqs[0] = above->seq;
            return 1;
        }
    }
    if (below == NULL && above == NULL) {
        sp->stats.candidates += num;
        return num;
    }

    /* Feasible range [lo, hi] of sequence numbers, from both directions. */
    uint64_t lo;
    uint64_t hi;
    uint64_t gap_below;
    uint64_t gap_above;
    if (!seqpred_range(sp, q, i, &gap_below, &gap_above, &lo, &hi)) {
        return 0;
    }

    /* Exact mode: a declared constant record size. */
    if (sp->config.constant_wire_len != 0) {
        uint64_t l = sp->config.constant_wire_len;
        uint64_t seq;
        if (below != NULL) {
            if (gap_below % l != 0) {
                return num;
            }
            seq = below->seq + 1 + gap_below / l;
        } else {
            if (gap_above % l != 0) {
                return num;
            }
            seq = above->seq - 1 - gap_above / l;
        }
        if (seq >= lo && seq <= hi) {
            num = seqpred_emit(out_seqs, num, cap, seq);
        }
        sp->stats.exact++;
        sp->stats.candidates += num;
        return num;
    }

    /* One feasible number (typically: the record starts where a verified one
     * ends): nothing to rank. */
    if (lo == hi) {
        num = seqpred_emit(out_seqs, num, cap, lo);
        sp->stats.candidates += num;
        return num;
    }

    /* Size statistics: fall back to the anchors' sizes, then to the bounds. */
    double mu = sp->num_observed > 0 ? sp->mean : (double)(minw + maxw) / 2.0;
    double var = sp->num_observed > 0 ? sp->var : mu * mu;
    /* Floor the variance so a long constant run does not make a slightly
     * different size impossible. */
    if (var < 0.25 + 1e-4 * mu * mu) {
        var = 0.25 + 1e-4 * mu * mu;
    }
    if (sp->num_observed < SEQPRED_TRUST_SAMPLES && sp->min_seen != sp->max_seen &&
        var < mu * mu) {
        var = mu * mu;
    }

    /* Observed sizes all equal: the multiple of that size is the first
     * candidate (exact for constant-rate senders). */
    if (sp->num_observed >= 2 && sp->min_seen == sp->max_seen) {
        uint64_t l = sp->min_seen;
        if (below != NULL && gap_below % l == 0) {
            uint64_t seq = below->seq + 1 + gap_below / l;
            if (seq >= lo && seq <= hi) {
                num = seqpred_emit(out_seqs, num, cap, seq);
            }
        } else if (below == NULL && gap_above % l == 0) {
            uint64_t seq = above->seq - 1 - gap_above / l;
            if (seq >= lo && seq <= hi) {
                num = seqpred_emit(out_seqs, num, cap, seq);
            }
        }
    }

    /* Most likely value: precision-weighted mean of both directions' estimates. */
    double center;
    {
        double sum_w = 0.0;
        double sum = 0.0;
        if (below != NULL) {
            double k = (double)gap_below / mu;
            double w = 1.0 / (k * var / (mu * mu) + 0.01);
            sum += w * ((double)below->seq + 1.0 + k);
            sum_w += w;
        }
        if (above != NULL) {
            double k = (double)gap_above / mu;
            double w = 1.0 / (k * var / (mu * mu) + 0.01);
            sum += w * ((double)above->seq - 1.0 - k);
            sum_w += w;
        }
        center = sum / sum_w;
    }
    uint64_t c;
    if (center <= (double)lo) {
        c = lo;
    } else if (center >= (double)hi) {
        c = hi;
    } else {
        c = (uint64_t)(center + 0.5);
    }

    uint64_t span = (uint64_t)cap * SEQPRED_WINDOW_FACTOR;
    uint64_t w_lo = c - lo > span ? c - span : lo;
    uint64_t w_hi = hi - c > span ? c + span : hi;
    if (w_lo != lo || w_hi != hi) {
        sp->stats.capped++;
    }
    seqpred_cand cands[2 * UTLS_SEQPRED_MAX_CANDIDATES * SEQPRED_WINDOW_FACTOR + 1];
    size_t n = 0;
    for (uint64_t seq = w_lo;; seq++) {
        double score = 0.0;
        if (below != NULL) {
            score += seqpred_gap_score(gap_below, seq - below->seq - 1, mu, var);
        }
        if (above != NULL) {
            score += seqpred_gap_score(gap_above, above->seq - 1 - seq, mu, var);
        }
        /* Insertion sort, best first; ties go to the value nearer center. */
        size_t j = n++;
        while (j > 0) {
            const seqpred_cand *prev = &cands[j - 1];
            double dp = seqpred_abs((double)prev->seq - center);
            double dc = seqpred_abs((double)seq - center);
            if (prev->score > score || (prev->score == score && dp <= dc)) {
                break;
            }
            cands[j] = cands[j - 1];
            j--;
        }
        cands[j].seq = seq;
        cands[j].score = score;
        if (seq == w_hi) {
            break;
        }
    }
    for (size_t j = 0; j < n && num < cap; j++) {
        num = seqpred_emit(out_seqs, num, cap, cands[j].seq);
    }
    /* The extremes are always tried: the fewest records the gaps can hold
     * (a few large ones, which a model learned from small records ranks last)
     * and the most. */
    if (cap >= 4) {
        size_t num_sure = 0;
        num = seqpred_emit_sure(out_seqs, num, cap, &num_sure, below != NULL ? lo : hi);
        num = seqpred_emit_sure(out_seqs, num, cap, &num_sure, below != NULL ? hi : lo);
    }
    sp->stats.candidates += num;
    return num;
}

size_t utls_seqpred_num_anchors(const utls_seqpred *sp)
{
    return sp->num_anchors;
}

double utls_seqpred_mean_wire_len(const utls_seqpred *sp)
{
    return sp->num_observed > 0 ? sp->mean : 0.0;
}

void utls_seqpred_get_stats(const utls_seqpred *sp, utls_seqpred_stats *out_stats)
{
    *out_stats = sp->stats;
}
