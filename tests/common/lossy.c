/* lossy.c: the in-process lossy segment network (see lossy.h). */
#include "lossy.h"
#include "test_rng.h"

#include <stdlib.h>
#include <string.h>

/* ---- PRNG: splitmix64 seeds xoshiro256** (test_rng.h) ---- */

void lossy_rng_seed(lossy_rng *rng, uint64_t seed)
{
    test_xoshiro256ss_seed(rng->s, seed);
}

uint64_t lossy_rng_next(lossy_rng *rng)
{
    return test_xoshiro256ss_next(rng->s);
}

uint64_t lossy_rng_below(lossy_rng *rng, uint64_t bound)
{
    if (bound == 0) {
        return 0;
    }
    /* Lemire-free rejection: unbiased and simple. */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % bound);
    uint64_t x;
    do {
        x = lossy_rng_next(rng);
    } while (x >= limit);
    return x % bound;
}

uint64_t lossy_rng_range(lossy_rng *rng, uint64_t lo, uint64_t hi)
{
    if (hi <= lo) {
        return lo;
    }
    return lo + lossy_rng_below(rng, hi - lo + 1);
}

double lossy_rng_unit(lossy_rng *rng)
{
    return (double)(lossy_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
}

void lossy_rng_bytes(lossy_rng *rng, void *out, size_t len)
{
    uint8_t *p = out;
    while (len > 0) {
        uint64_t x = lossy_rng_next(rng);
        size_t n = len < 8 ? len : 8;
        memcpy(p, &x, n);
        p += n;
        len -= n;
    }
}

/* ---- parameters ---- */

void lossy_params_lossless(lossy_params *out_params)
{
    memset(out_params, 0, sizeof(*out_params));
    out_params->mss = LOSSY_MSS;
    out_params->rtt = 10;
}

void lossy_params_default(lossy_params *out_params, double loss)
{
    lossy_params_lossless(out_params);
    out_params->p_drop = loss;
    out_params->p_drop_retx = loss;
    out_params->p_reorder = loss > 0 ? 0.01 : 0;
    out_params->reorder_max = 4;
    out_params->p_dup = loss > 0 ? 0.005 : 0;
    out_params->dup_max_delay = 6;
    out_params->p_resegment = 0.5;
    out_params->rtt = 10;
    out_params->rtt_jitter = 3;
}

/* ---- the network ---- */

typedef struct event {
    uint64_t due;
    uint64_t order;     /* ties broken by scheduling order */
    uint64_t offset;
    size_t len;
    enum lossy_kind kind;
    unsigned attempts;  /* retransmissions of this piece so far */
    uint8_t *owned;     /* injected bytes, else NULL (the stream's) */
} event;

typedef struct range {
    uint64_t offset;
    uint64_t len;
    unsigned ticks;
} range;

/* A retransmitted piece that keeps being lost is let through after this many
 * attempts, so that every run ends. */
#define MAX_ATTEMPTS 8

struct lossy_net {
    lossy_params params;
    lossy_rng rng;
    lossy_deliver_fn deliver;
    void *arg;

    uint8_t *stream;
    size_t stream_len;
    size_t stream_cap;
    uint64_t wire_end;  /* bytes put on the wire (cut into segments) */

    uint64_t *bits;     /* one bit per stream byte: present at the receiver */
    size_t bits_words;
    uint64_t inorder;
    uint64_t max_end;   /* end of the furthest present sender byte */

    lossy_record *records;
    size_t num_records;
    size_t records_cap;
    uint64_t parse_pos; /* where the next header starts */

    event *events;
    size_t num_events;
    size_t events_cap;
    uint64_t order;
    uint64_t tick;

    range *drops;
    size_t num_drops;
    range *holds;
    size_t num_holds;

    lossy_counters counters;
    int aborted;
    int in_pump;
};

lossy_net *lossy_new(const lossy_params *params, uint64_t seed, lossy_deliver_fn deliver,
                     void *arg)
{
    lossy_net *net = calloc(1, sizeof(*net));
    if (net == NULL) {
        return NULL;
    }
    net->params = *params;
    if (net->params.mss == 0) {
        net->params.mss = LOSSY_MSS;
    }
    lossy_rng_seed(&net->rng, seed);
    net->deliver = deliver;
    net->arg = arg;
    return net;
}

void lossy_free(lossy_net *net)
{
    if (net == NULL) {
        return;
    }
    for (size_t i = 0; i < net->num_events; i++) {
        free(net->events[i].owned);
    }
    free(net->events);
    free(net->stream);
    free(net->bits);
    free(net->records);
    free(net->drops);
    free(net->holds);
    free(net);
}

void lossy_set_params(lossy_net *net, const lossy_params *params)
{
    net->params = *params;
    if (net->params.mss == 0) {
        net->params.mss = LOSSY_MSS;
    }
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) {
        return 1;
    }
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        n *= 2;
    }
    void *q = realloc(*p, n * elem);
    if (q == NULL) {
        return 0;
    }
    *p = q;
    *cap = n;
    return 1;
}

static int bit_get(const lossy_net *net, uint64_t i)
{
    return (net->bits[i >> 6] >> (i & 63)) & 1;
}

static void bits_set(lossy_net *net, uint64_t from, uint64_t to)
{
    for (uint64_t i = from; i < to;) {
        if ((i & 63) == 0 && to - i >= 64) {
            net->bits[i >> 6] = UINT64_MAX;
            i += 64;
        } else {
            net->bits[i >> 6] |= 1ULL << (i & 63);
            i++;
        }
    }
}

int lossy_present(const lossy_net *net, uint64_t offset, uint64_t len)
{
    if (offset + len > net->stream_len) {
        return 0;
    }
    if (offset + len <= net->inorder) {
        return 1;
    }
    for (uint64_t i = offset; i < offset + len;) {
        if ((i & 63) == 0 && offset + len - i >= 64) {
            if (net->bits[i >> 6] != UINT64_MAX) {
                return 0;
            }
            i += 64;
        } else {
            if (!bit_get(net, i)) {
                return 0;
            }
            i++;
        }
    }
    return 1;
}

static int schedule(lossy_net *net, uint64_t due, uint64_t offset, size_t len,
                    enum lossy_kind kind, unsigned attempts, uint8_t *owned)
{
    if (!grow((void **)&net->events, &net->events_cap, net->num_events + 1, sizeof(event))) {
        free(owned);
        return 0;
    }
    event *e = &net->events[net->num_events++];
    e->due = due;
    e->order = net->order++;
    e->offset = offset;
    e->len = len;
    e->kind = kind;
    e->attempts = attempts;
    e->owned = owned;
    return 1;
}

static uint64_t rtt_due(lossy_net *net)
{
    return net->tick + (net->params.rtt ? net->params.rtt : 1)
           + lossy_rng_range(&net->rng, 0, net->params.rtt_jitter);
}

/* A loss of sender bytes [a, b): schedule its repair, perhaps cut at other
 * boundaries and overlapping the neighbours (as a TCP sender that
 * repacketises does). */
static int schedule_repair(lossy_net *net, uint64_t a, uint64_t b, unsigned attempts)
{
    uint64_t due = rtt_due(net);
    if (lossy_rng_unit(&net->rng) < net->params.p_resegment) {
        uint64_t half = net->params.mss / 2;
        uint64_t left = lossy_rng_below(&net->rng, (a < half ? a : half) + 1);
        uint64_t right = lossy_rng_below(&net->rng, half + 1);
        a -= left;
        b += right;
        if (b > net->wire_end) {
            b = net->wire_end;
        }
        unsigned pieces = (unsigned)lossy_rng_range(&net->rng, 1, 3);
        net->counters.resegmented++;
        uint64_t start = a;
        for (unsigned i = 0; i < pieces && start < b; i++) {
            uint64_t end = b;
            if (i + 1 < pieces && b - start > 2) {
                end = lossy_rng_range(&net->rng, start + 1, b - 1);
            }
            /* Pieces may go out in any order within a few ticks. */
            if (!schedule(net, due + lossy_rng_below(&net->rng, 3), start, (size_t)(end - start),
                          LOSSY_RETRANSMISSION, attempts, NULL)) {
                return 0;
            }
            start = end;
        }
        return 1;
    }
    return schedule(net, due, a, (size_t)(b - a), LOSSY_RETRANSMISSION, attempts, NULL);
}

static int overlaps(const range *r, uint64_t offset, uint64_t len)
{
    return offset < r->offset + r->len && r->offset < offset + len;
}

/* Truth: the first record whose end lies past |offset|. */
static size_t first_record_ending_after(const lossy_net *net, uint64_t offset)
{
    size_t lo = 0, hi = net->num_records;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const lossy_record *r = &net->records[mid];
        if (r->offset + r->wire_len <= offset) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* Delivers one event. Returns 1, or 0 if the callback aborted. */
static int deliver_event(lossy_net *net, event *ev)
{
    uint64_t off = ev->offset;
    size_t len = ev->len;
    uint8_t *copy = malloc(len ? len : 1);
    if (copy == NULL) {
        return 0;
    }
    if (ev->owned != NULL) {
        memcpy(copy, ev->owned, len);
    } else {
        memcpy(copy, net->stream + off, len);
    }

    /* Truth, with an undo log in case the callback refuses the segment. */
    uint64_t inorder_before = net->inorder;
    uint64_t max_end_before = net->max_end;
    int hole_before = net->max_end > net->inorder;
    uint64_t lo = off < net->stream_len ? off : net->stream_len;
    uint64_t hi = off + len < net->stream_len ? off + len : net->stream_len;
    size_t w0 = (size_t)(lo >> 6), w1 = hi > lo ? (size_t)((hi - 1) >> 6) + 1 : w0;
    uint64_t *saved = NULL;
    if (hi > lo) {
        saved = malloc((w1 - w0) * sizeof(uint64_t));
        if (saved == NULL) {
            free(copy);
            return 0;
        }
        memcpy(saved, net->bits + w0, (w1 - w0) * sizeof(uint64_t));
        bits_set(net, lo, hi);
        if (hi > net->max_end) {
            net->max_end = hi;
        }
        while (net->inorder < net->stream_len) {
            uint64_t i = net->inorder;
            if ((i & 63) == 0 && net->stream_len - i >= 64 && net->bits[i >> 6] == UINT64_MAX) {
                net->inorder += 64;
            } else if (bit_get(net, i)) {
                net->inorder++;
            } else {
                break;
            }
        }
    }
    uint64_t index = net->counters.deliveries + 1;
    size_t first_rec = first_record_ending_after(net, lo);
    size_t completed_n = 0;
    size_t *completed = NULL;
    for (size_t r = first_rec; hi > lo && r < net->num_records; r++) {
        lossy_record *rec = &net->records[r];
        if (rec->offset >= hi) {
            break;
        }
        if (rec->complete_at != 0 || !lossy_present(net, rec->offset, rec->wire_len)) {
            continue;
        }
        rec->complete_at = index;
        rec->after_hole = net->inorder < rec->offset + rec->wire_len;
        size_t *c = realloc(completed, (completed_n + 1) * sizeof(*c));
        if (c == NULL) {
            free(completed);
            free(saved);
            free(copy);
            return 0;
        }
        completed = c;
        completed[completed_n++] = r;
    }

    lossy_delivery d;
    d.index = index;
    d.offset = off;
    d.data = copy;
    d.len = len;
    d.kind = ev->kind;
    d.inorder_before = inorder_before;
    d.inorder_after = net->inorder;
    d.hole_before = hole_before;
    d.fills_hole = hole_before && net->inorder > inorder_before;
    d.past_hole = off > inorder_before;
    net->counters.deliveries++;
    int rc = net->deliver(net->arg, &d);
    free(copy);
    if (rc == LOSSY_CB_RETRY) {
        net->counters.deliveries--;
        net->counters.retries++;
        if (saved != NULL) {
            memcpy(net->bits + w0, saved, (w1 - w0) * sizeof(uint64_t));
        }
        net->inorder = inorder_before;
        net->max_end = max_end_before;
        for (size_t i = 0; i < completed_n; i++) {
            net->records[completed[i]].complete_at = 0;
            net->records[completed[i]].after_hole = 0;
        }
        free(saved);
        free(completed);
        uint8_t *owned = ev->owned;
        ev->owned = NULL;
        return schedule(net, rtt_due(net), off, len, ev->kind, ev->attempts, owned);
    }
    free(saved);
    free(completed);
    if (rc != LOSSY_CB_OK) {
        return 0;
    }
    net->counters.bytes_delivered += len;
    if (d.fills_hole) {
        net->counters.holes_filled++;
    }
    return 1;
}

/* Delivers every event that is due, earliest first. */
static int pump(lossy_net *net)
{
    if (net->in_pump) {
        return 1; /* a callback that sends: its segments are delivered by the outer loop */
    }
    net->in_pump = 1;
    int ok = 1;
    for (;;) {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < net->num_events; i++) {
            const event *e = &net->events[i];
            if (e->due > net->tick) {
                continue;
            }
            if (best == SIZE_MAX || e->due < net->events[best].due
                || (e->due == net->events[best].due && e->order < net->events[best].order)) {
                best = i;
            }
        }
        if (best == SIZE_MAX) {
            break;
        }
        event ev = net->events[best];
        net->events[best] = net->events[--net->num_events];
        if (ev.kind == LOSSY_RETRANSMISSION && ev.attempts < MAX_ATTEMPTS
            && lossy_rng_unit(&net->rng) < net->params.p_drop_retx) {
            net->counters.drops++;
            if (!schedule(net, rtt_due(net), ev.offset, ev.len, ev.kind, ev.attempts + 1, NULL)) {
                ok = 0;
                break;
            }
            continue;
        }
        if (ev.kind == LOSSY_RETRANSMISSION) {
            net->counters.retransmissions++;
        }
        int r = deliver_event(net, &ev);
        free(ev.owned);
        if (!r) {
            ok = 0;
            break;
        }
    }
    net->in_pump = 0;
    if (!ok) {
        net->aborted = 1;
    }
    return ok;
}

/* Puts sender bytes [off, off + len) on the wire as one segment. */
static int transmit(lossy_net *net, uint64_t off, size_t len)
{
    net->tick++;
    net->counters.segments++;
    for (size_t i = 0; i < net->num_drops; i++) {
        if (overlaps(&net->drops[i], off, len)) {
            net->counters.drops++;
            return schedule_repair(net, off, off + len, 0);
        }
    }
    for (size_t i = 0; i < net->num_holds; i++) {
        if (overlaps(&net->holds[i], off, len)) {
            net->counters.reordered++;
            return schedule(net, net->tick + net->holds[i].ticks, off, len, LOSSY_REORDERED, 0,
                            NULL);
        }
    }
    lossy_rng *rng = &net->rng;
    if (lossy_rng_unit(rng) < net->params.p_drop) {
        net->counters.drops++;
        return schedule_repair(net, off, off + len, 0);
    }
    uint64_t due = net->tick;
    enum lossy_kind kind = LOSSY_ORIGINAL;
    if (net->params.reorder_max > 0 && lossy_rng_unit(rng) < net->params.p_reorder) {
        due += lossy_rng_range(rng, 1, net->params.reorder_max);
        kind = LOSSY_REORDERED;
        net->counters.reordered++;
    }
    if (!schedule(net, due, off, len, kind, 0, NULL)) {
        return 0;
    }
    if (lossy_rng_unit(rng) < net->params.p_dup) {
        net->counters.duplicates++;
        if (!schedule(net, due + lossy_rng_range(rng, 0, net->params.dup_max_delay), off, len,
                      LOSSY_DUPLICATE, 0, NULL)) {
            return 0;
        }
    }
    return 1;
}

static int parse_records(lossy_net *net)
{
    while (net->parse_pos + 5 <= net->stream_len) {
        const uint8_t *h = net->stream + net->parse_pos;
        if (!grow((void **)&net->records, &net->records_cap, net->num_records + 1,
                  sizeof(lossy_record))) {
            return 0;
        }
        lossy_record *r = &net->records[net->num_records++];
        memset(r, 0, sizeof(*r));
        r->offset = net->parse_pos;
        r->type = h[0];
        r->version = (uint16_t)((h[1] << 8) | h[2]);
        r->wire_len = 5 + (size_t)((h[3] << 8) | h[4]);
        r->app_index = -1;
        net->parse_pos += r->wire_len;
    }
    return 1;
}

int lossy_append(lossy_net *net, const void *data, size_t len)
{
    if (net->aborted) {
        return 0;
    }
    if (!grow((void **)&net->stream, &net->stream_cap, net->stream_len + len, 1)) {
        return 0;
    }
    size_t words = (net->stream_cap + 63) / 64;
    if (words > net->bits_words) {
        uint64_t *b = realloc(net->bits, words * sizeof(uint64_t));
        if (b == NULL) {
            return 0;
        }
        memset(b + net->bits_words, 0, (words - net->bits_words) * sizeof(uint64_t));
        net->bits = b;
        net->bits_words = words;
    }
    memcpy(net->stream + net->stream_len, data, len);
    net->stream_len += len;
    return parse_records(net);
}

int lossy_transmit(lossy_net *net)
{
    if (net->aborted) {
        return 0;
    }
    while (net->stream_len - net->wire_end >= net->params.mss) {
        uint64_t off = net->wire_end;
        net->wire_end += net->params.mss;
        if (!transmit(net, off, net->params.mss) || !pump(net)) {
            return 0;
        }
    }
    return 1;
}

int lossy_send(lossy_net *net, const void *data, size_t len)
{
    return lossy_append(net, data, len) && lossy_transmit(net);
}

int lossy_flush(lossy_net *net)
{
    if (net->aborted) {
        return 0;
    }
    if (net->stream_len > net->wire_end) {
        uint64_t off = net->wire_end;
        size_t len = (size_t)(net->stream_len - net->wire_end);
        net->wire_end = net->stream_len;
        if (!transmit(net, off, len)) {
            return 0;
        }
    }
    return pump(net);
}

int lossy_idle(lossy_net *net)
{
    if (net->aborted) {
        return 0;
    }
    net->tick++;
    return pump(net);
}

int lossy_finish(lossy_net *net)
{
    if (!lossy_flush(net)) {
        return 0;
    }
    while (net->num_events > 0) {
        if (!lossy_idle(net)) {
            return 0;
        }
    }
    return 1;
}

size_t lossy_pending(const lossy_net *net)
{
    return net->num_events;
}

static void add_range(range **arr, size_t *n, uint64_t offset, uint64_t len, unsigned ticks)
{
    range *r = realloc(*arr, (*n + 1) * sizeof(range));
    if (r == NULL) {
        return;
    }
    *arr = r;
    r[*n].offset = offset;
    r[*n].len = len;
    r[*n].ticks = ticks;
    (*n)++;
}

void lossy_drop_range(lossy_net *net, uint64_t offset, uint64_t len)
{
    add_range(&net->drops, &net->num_drops, offset, len, 0);
}

void lossy_hold_range(lossy_net *net, uint64_t offset, uint64_t len, unsigned ticks)
{
    add_range(&net->holds, &net->num_holds, offset, len, ticks);
}

int lossy_inject(lossy_net *net, uint64_t offset, const void *data, size_t len, unsigned delay)
{
    uint8_t *owned = malloc(len ? len : 1);
    if (owned == NULL) {
        return 0;
    }
    memcpy(owned, data, len);
    net->counters.injected++;
    if (!schedule(net, net->tick + delay, offset, len, LOSSY_INJECTED, MAX_ATTEMPTS, owned)) {
        return 0;
    }
    return delay == 0 ? pump(net) : 1;
}

uint64_t lossy_stream_len(const lossy_net *net)
{
    return net->stream_len;
}

const uint8_t *lossy_stream(const lossy_net *net)
{
    return net->stream;
}

uint64_t lossy_inorder(const lossy_net *net)
{
    return net->inorder;
}

size_t lossy_num_records(const lossy_net *net)
{
    return net->num_records;
}

lossy_record *lossy_get_record(lossy_net *net, size_t i)
{
    return i < net->num_records ? &net->records[i] : NULL;
}

size_t lossy_record_index_after(const lossy_net *net, uint64_t offset)
{
    return first_record_ending_after(net, offset);
}

lossy_record *lossy_find_record(lossy_net *net, uint64_t offset)
{
    size_t i = first_record_ending_after(net, offset);
    if (i < net->num_records && net->records[i].offset == offset) {
        return &net->records[i];
    }
    return NULL;
}

const lossy_counters *lossy_get_counters(const lossy_net *net)
{
    return &net->counters;
}

uint64_t lossy_tick(const lossy_net *net)
{
    return net->tick;
}
