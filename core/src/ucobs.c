/* ucobs.c: uCOBS framer and receiver; see include/utls/ucobs.h.
 *
 * The receiver keeps every byte it has not finished with in a utls_reasm
 * store whose in-order point |base| is the opening marker of the datagram in
 * progress at the front of the stream. Two paths find datagrams:
 *
 *  - the walk: the run that starts at |base| (bytes contiguous from the
 *    front) is searched for markers once, from where the last walk stopped;
 *    every marker pair in it is an in-order datagram unless the ahead set
 *    says it was already handled past a hole. The walk then moves |base| to
 *    the last marker, so the store never holds more than one datagram in
 *    progress at the front.
 *  - the scan past a hole: for each run that starts past |base| and got new
 *    bytes, the marker pairs around the new bytes (at most UTLS_UCOBS_MAX_FRAME
 *    back and forward) are handled, recorded in the ahead set, and queued as
 *    out of order.
 *
 * A pair is handled exactly once: past a hole it goes into the ahead set
 * (bounded; when full the pair is left for the walk), and the walk skips and
 * forgets every pair the set holds. */
#define _GNU_SOURCE /* memrchr */
#include "utls/ucobs.h"

#include <stdlib.h>
#include <string.h>

/* The longest run of non-zero bytes that can be a valid datagram. */
#define UCOBS_MAX_CONTENT UTLS_COBS_ENCODE_BOUND(UTLS_UCOBS_MAX_DATAGRAM)

typedef struct {
    uint64_t offset;
    uint8_t *data;
    size_t len;
    int out_of_order;
    uint64_t arrival_ns;
} ready_entry;

struct utls_ucobs_rx {
    utls_ucobs_limits limits;
    utls_reasm *store;
    uint64_t base;      /* the store's in-order point */
    uint64_t walked;    /* the walk has searched [base, walked) */
    int open_valid;     /* a marker at |open| (== base) starts the frame in progress */
    uint64_t open;
    int seen_marker;    /* the walk has met the stream's first marker */
    uint64_t *ahead;    /* sorted offsets of pairs handled past a hole */
    size_t num_ahead;
    ready_entry *ready; /* FIFO: [ready_head, ready_head + num_ready) */
    size_t ready_head, num_ready, ready_cap;
    size_t ready_ahead_bytes;
    utls_ucobs_stats stats;
};

size_t utls_ucobs_frame_bound(size_t n)
{
    if (n > UTLS_UCOBS_MAX_DATAGRAM) {
        return 0;
    }
    return UTLS_UCOBS_FRAME_BOUND(n);
}

int utls_ucobs_frame(uint8_t *out, size_t cap, size_t *out_len, const uint8_t *dgram, size_t n)
{
    size_t enc_len = 0;

    *out_len = 0;
    if (n > UTLS_UCOBS_MAX_DATAGRAM || cap < 3) {
        return 0;
    }
    out[0] = 0;
    if (utls_cobs_encode(dgram, n, out + 1, cap - 2, &enc_len) != UTLS_COBS_OK) {
        return 0;
    }
    out[1 + enc_len] = 0;
    *out_len = enc_len + 2;
    return 1;
}

void utls_ucobs_limits_default(utls_ucobs_limits *out_limits)
{
    utls_reasm_limits_default(&out_limits->reasm);
    out_limits->max_ahead = UTLS_UCOBS_MAX_AHEAD;
    out_limits->max_ready_ahead_bytes = UTLS_UCOBS_MAX_READY_AHEAD_BYTES;
}

utls_ucobs_rx *utls_ucobs_rx_new(const utls_ucobs_limits *limits, uint64_t start_offset)
{
    utls_ucobs_rx *rx = calloc(1, sizeof(*rx));

    if (rx == NULL) {
        return NULL;
    }
    if (limits != NULL) {
        rx->limits = *limits;
    } else {
        utls_ucobs_limits_default(&rx->limits);
    }
    rx->store = utls_reasm_new(&rx->limits.reasm, start_offset);
    rx->ahead = malloc((rx->limits.max_ahead ? rx->limits.max_ahead : 1) * sizeof(uint64_t));
    if (rx->store == NULL || rx->ahead == NULL) {
        utls_ucobs_rx_free(rx);
        return NULL;
    }
    rx->base = start_offset;
    rx->walked = start_offset;
    return rx;
}

void utls_ucobs_rx_free(utls_ucobs_rx *rx)
{
    if (rx == NULL) {
        return;
    }
    for (size_t i = 0; i < rx->num_ready; i++) {
        free(rx->ready[rx->ready_head + i].data);
    }
    free(rx->ready);
    free(rx->ahead);
    utls_reasm_free(rx->store);
    free(rx);
}

/* ahead_find returns the index of the first entry >= |off|. */
static size_t ahead_find(const utls_ucobs_rx *rx, uint64_t off)
{
    size_t lo = 0, hi = rx->num_ahead;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rx->ahead[mid] < off) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

static int ahead_contains(const utls_ucobs_rx *rx, uint64_t off)
{
    size_t i = ahead_find(rx, off);
    return i < rx->num_ahead && rx->ahead[i] == off;
}

/* ahead_add inserts |off| (not present); the caller checked the bound. */
static void ahead_add(utls_ucobs_rx *rx, uint64_t off)
{
    size_t i = ahead_find(rx, off);
    memmove(rx->ahead + i + 1, rx->ahead + i, (rx->num_ahead - i) * sizeof(uint64_t));
    rx->ahead[i] = off;
    rx->num_ahead++;
}

/* ahead_remove_upto forgets every entry below |off| and, if |exact|, an
 * entry equal to it; returns 1 if an entry equal to |off| was there. */
static int ahead_remove_upto(utls_ucobs_rx *rx, uint64_t off, int exact)
{
    size_t i = ahead_find(rx, off);
    int found = i < rx->num_ahead && rx->ahead[i] == off;
    size_t cut = i + (found && exact);

    memmove(rx->ahead, rx->ahead + cut, (rx->num_ahead - cut) * sizeof(uint64_t));
    rx->num_ahead -= cut;
    return found;
}

static int ready_push(utls_ucobs_rx *rx, const ready_entry *e)
{
    if (rx->ready_head + rx->num_ready == rx->ready_cap) {
        if (rx->ready_head > 0) {
            memmove(rx->ready, rx->ready + rx->ready_head, rx->num_ready * sizeof(*rx->ready));
            rx->ready_head = 0;
        } else {
            size_t cap = rx->ready_cap ? rx->ready_cap * 2 : 16;
            ready_entry *n = realloc(rx->ready, cap * sizeof(*n));
            if (n == NULL) {
                return 0;
            }
            rx->ready = n;
            rx->ready_cap = cap;
        }
    }
    rx->ready[rx->ready_head + rx->num_ready++] = *e;
    return 1;
}

typedef enum { PAIR_QUEUED, PAIR_REJECTED, PAIR_NOMEM } pair_result;

/* handle_pair decodes the non-empty run |content| (|clen| bytes) opened by
 * the marker at |open| and queues it. */
static pair_result handle_pair(utls_ucobs_rx *rx, uint64_t open, const uint8_t *content,
                               size_t clen, int out_of_order, uint64_t arrival_ns)
{
    ready_entry e;
    size_t cap;

    if (clen > UCOBS_MAX_CONTENT) {
        rx->stats.framing_errors++;
        return PAIR_REJECTED;
    }
    cap = clen - 1 < UTLS_UCOBS_MAX_DATAGRAM ? clen - 1 : UTLS_UCOBS_MAX_DATAGRAM;
    e.data = malloc(cap ? cap : 1);
    if (e.data == NULL) {
        return PAIR_NOMEM;
    }
    if (utls_cobs_decode(content, clen, e.data, cap, &e.len) != UTLS_COBS_OK) {
        free(e.data);
        rx->stats.framing_errors++;
        return PAIR_REJECTED;
    }
    e.offset = open;
    e.out_of_order = out_of_order;
    e.arrival_ns = arrival_ns;
    if (!ready_push(rx, &e)) {
        free(e.data);
        return PAIR_NOMEM;
    }
    if (out_of_order) {
        rx->ready_ahead_bytes += e.len;
        rx->stats.datagrams_out_of_order++;
    } else {
        rx->stats.datagrams_in_order++;
    }
    return PAIR_QUEUED;
}

/* pair_past_hole handles a complete pair in a run that starts past |base|. */
static int pair_past_hole(utls_ucobs_rx *rx, uint64_t open, const uint8_t *content, size_t clen,
                          uint64_t arrival_ns)
{
    if (ahead_contains(rx, open)) {
        return 1; /* handled already (a duplicate or overlapping fragment) */
    }
    if (rx->num_ahead >= rx->limits.max_ahead
        || rx->ready_ahead_bytes + clen > rx->limits.max_ready_ahead_bytes) {
        rx->stats.held_back++; /* the walk delivers it when the hole fills */
        return 1;
    }
    pair_result r = handle_pair(rx, open, content, clen, 1, arrival_ns);
    if (r == PAIR_NOMEM) {
        return 0;
    }
    ahead_add(rx, open); /* queued or rejected: handled either way */
    return 1;
}

/* scan_past_hole handles the pairs around the new bytes [lo, hi) of |run|,
 * which starts past |base|. */
static int scan_past_hole(utls_ucobs_rx *rx, const utls_reasm_run *run, uint64_t lo, uint64_t hi,
                          uint64_t arrival_ns)
{
    const uint8_t *d = run->data;
    size_t ilo = (size_t)(lo - run->offset), ihi = (size_t)(hi - run->offset);
    size_t back = ilo > UTLS_UCOBS_MAX_FRAME ? ilo - UTLS_UCOBS_MAX_FRAME : 0;
    size_t fwd = run->len - ihi > UTLS_UCOBS_MAX_FRAME ? ihi + UTLS_UCOBS_MAX_FRAME : run->len;
    const uint8_t *first, *last, *z;

    /* The nearest markers outside the new bytes; else the outermost inside. */
    first = ilo > back ? memrchr(d + back, 0, ilo - back) : NULL;
    last = fwd > ihi ? memchr(d + ihi, 0, fwd - ihi) : NULL;
    rx->stats.bytes_scanned += (first ? (size_t)(d + ilo - first) : ilo - back)
                               + (last ? (size_t)(last - (d + ihi)) : fwd - ihi);
    if (first == NULL) {
        first = memchr(d + ilo, 0, ihi - ilo);
    }
    if (last == NULL) {
        last = memrchr(d + ilo, 0, ihi - ilo);
    }
    rx->stats.bytes_scanned += ihi - ilo;
    if (first == NULL || last == NULL || first >= last) {
        return 1;
    }
    for (const uint8_t *p = first; p < last; p = z) {
        z = memchr(p + 1, 0, (size_t)(last - p));
        if (z > p + 1
            && !pair_past_hole(rx, run->offset + (uint64_t)(p - d), p + 1, (size_t)(z - p - 1),
                               arrival_ns)) {
            return 0;
        }
    }
    return 1;
}

/* walk handles the pairs in the run that starts at |base| (if any) from where
 * the last walk stopped, then moves |base| to the frame in progress. */
static int walk(utls_ucobs_rx *rx, uint64_t arrival_ns)
{
    utls_reasm_run run;
    uint64_t end, pos, new_base;

    if (!utls_reasm_first_run(rx->store, &run) || run.offset != rx->base) {
        return 1;
    }
    end = run.offset + run.len;
    pos = rx->walked;
    while (pos < end) {
        const uint8_t *p = run.data + (pos - run.offset);
        const uint8_t *z = memchr(p, 0, (size_t)(end - pos));
        uint64_t zo;

        rx->stats.bytes_scanned += z != NULL ? (size_t)(z - p) + 1 : (size_t)(end - pos);
        if (z == NULL) {
            break;
        }
        zo = run.offset + (uint64_t)(z - run.data);
        if (rx->open_valid && zo > rx->open + 1) {
            if (ahead_remove_upto(rx, rx->open, 1)) {
                /* handled past a hole already */
            } else if (handle_pair(rx, rx->open, run.data + (rx->open + 1 - run.offset),
                                   (size_t)(zo - rx->open - 1), 0, arrival_ns)
                       == PAIR_NOMEM) {
                rx->walked = zo; /* retried on the next feed */
                return 0;
            }
        } else if (!rx->seen_marker) {
            rx->stats.junk_bytes += zo - rx->base;
        }
        rx->seen_marker = 1;
        rx->open_valid = 1;
        rx->open = zo;
        pos = zo + 1;
        /* Move the store's front now: the pairs behind are done. */
        if (!utls_reasm_advance(rx->store, zo) || !utls_reasm_first_run(rx->store, &run)) {
            return 1; /* cannot happen: zo is held and above base */
        }
        rx->base = zo;
    }
    rx->walked = end;
    new_base = rx->base;
    if (rx->open_valid) {
        if (end - rx->open - 1 > UCOBS_MAX_CONTENT) {
            /* A frame longer than any datagram: give it up and skip to the
             * next marker. */
            rx->stats.framing_errors++;
            rx->open_valid = 0;
            new_base = end;
        }
    } else {
        /* Junk before the first marker, or the rest of a frame given up. */
        if (!rx->seen_marker) {
            rx->stats.junk_bytes += end - rx->base;
        }
        new_base = end;
    }
    if (new_base != rx->base) {
        (void)utls_reasm_advance(rx->store, new_base);
        rx->base = new_base;
    }
    (void)ahead_remove_upto(rx, rx->base, 0);
    return 1;
}

int utls_ucobs_rx_feed(utls_ucobs_rx *rx, uint64_t offset, const uint8_t *data, size_t len,
                       uint64_t arrival_ns)
{
    utls_reasm_result r;
    int ok = 1;

    if (len == 0) {
        return 1;
    }
    if (data == NULL || offset > UINT64_MAX - len) {
        return 0;
    }
    rx->stats.bytes_fed += len;
    r = utls_reasm_insert(rx->store, offset, data, len);
    switch (r) {
    case UTLS_REASM_STORED:
        break;
    case UTLS_REASM_NO_NEW_DATA:
    case UTLS_REASM_DROPPED:
        return walk(rx, arrival_ns);
    case UTLS_REASM_INVALID:
    case UTLS_REASM_ERROR:
    default:
        return 0;
    }
    /* Scan the runs past the front that hold the fragment's bytes. */
    uint64_t cur = offset > rx->base ? offset : rx->base;
    uint64_t hi = offset + len;
    while (cur < hi) {
        utls_reasm_run run;
        uint64_t rend;

        if (!utls_reasm_find_run(rx->store, &run, cur)) {
            if (!utls_reasm_next_run(rx->store, &run, cur) || run.offset >= hi) {
                break;
            }
            cur = run.offset;
        }
        rend = run.offset + run.len;
        if (run.offset > rx->base
            && !scan_past_hole(rx, &run, cur, hi < rend ? hi : rend, arrival_ns)) {
            ok = 0;
        }
        cur = rend;
    }
    if (!walk(rx, arrival_ns)) {
        ok = 0;
    }
    return ok;
}

int utls_ucobs_rx_peek(const utls_ucobs_rx *rx, utls_ucobs_datagram *out_dgram)
{
    const ready_entry *e;

    if (rx->num_ready == 0) {
        return 0;
    }
    e = &rx->ready[rx->ready_head];
    out_dgram->offset = e->offset;
    out_dgram->data = e->data;
    out_dgram->len = e->len;
    out_dgram->out_of_order = e->out_of_order;
    out_dgram->arrival_ns = e->arrival_ns;
    return 1;
}

int utls_ucobs_rx_pop(utls_ucobs_rx *rx)
{
    ready_entry *e;

    if (rx->num_ready == 0) {
        return 0;
    }
    e = &rx->ready[rx->ready_head];
    if (e->out_of_order) {
        rx->ready_ahead_bytes -= e->len;
    }
    free(e->data);
    rx->ready_head++;
    if (--rx->num_ready == 0) {
        rx->ready_head = 0;
    }
    return 1;
}

size_t utls_ucobs_rx_num_ready(const utls_ucobs_rx *rx)
{
    return rx->num_ready;
}

uint64_t utls_ucobs_rx_walked(const utls_ucobs_rx *rx)
{
    return rx->walked;
}

void utls_ucobs_rx_get_stats(const utls_ucobs_rx *rx, utls_ucobs_stats *out_stats)
{
    *out_stats = rx->stats;
    utls_reasm_get_stats(rx->store, &out_stats->reasm);
}
