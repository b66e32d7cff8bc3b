/*
 * The sub-stream header codec and reorder buffer (see utls/streamq.h and
 * docs/substreams.md). Pure C, no OpenSSL.
 *
 * Header, format 1 (the first bytes of a record's plaintext):
 *
 *   format (1 byte, 0x01) | stream id (varint) | sequence number (varint)
 *
 * Varints are LEB128: 7 bits per byte, least significant first, the high bit
 * set on every byte but the last. The encoding must be minimal (no trailing
 * zero byte), so each (stream id, sequence number) has exactly one header.
 * A stream id below UTLS_STREAMQ_MAX_STREAMS takes at most 2 bytes and a
 * sequence number up to UTLS_STREAMQ_MAX_SEQ (2^56 - 1) at most 8.
 */
#include <stdlib.h>
#include <string.h>

#include "utls/streamq.h"

/* Varint bytes: a stream id below 256 needs 2, a sequence number below 2^56
 * needs 8. Anything longer is refused before it is decoded. */
#define SQ_ID_VARINT_MAX 2
#define SQ_SEQ_VARINT_MAX 8

typedef struct {
    uint64_t seq;
    uint8_t *data; /* owned; NULL when len is 0 */
    size_t len;
    utls_streamq_record info;
} sq_held;

typedef struct {
    uint64_t next;  /* the sequence number to deliver next */
    sq_held *held;  /* sorted by seq, all > next - 1 */
    size_t num_held, cap;
    int in_ready;   /* the stream is in the ready ring */
} sq_stream;

struct utls_streamq_st {
    sq_stream streams[UTLS_STREAMQ_MAX_STREAMS];
    /* Streams whose first held message is their next one, in the order they
     * became deliverable. Each stream appears at most once. */
    uint16_t ready[UTLS_STREAMQ_MAX_STREAMS];
    size_t ready_head, num_ready;
    size_t num_held, bytes_held;
};

/* Plaintext copies are wiped before they are freed. */
static void sq_wipe_free(uint8_t *p, size_t len)
{
    volatile uint8_t *v = p;
    size_t i;

    if (p == NULL)
        return;
    for (i = 0; i < len; i++)
        v[i] = 0;
    free(p);
}

static size_t varint_put(uint8_t *out, uint64_t v)
{
    size_t n = 0;

    do {
        uint8_t b = (uint8_t)(v & 0x7f);

        v >>= 7;
        out[n++] = (uint8_t)(b | (v != 0 ? 0x80 : 0));
    } while (v != 0);
    return n;
}

/* varint_get reads a minimal varint of at most |max| bytes from |*p| (|*len|
 * left), advancing both. Returns UTLS_SQ_OK, UTLS_SQ_TRUNCATED,
 * UTLS_SQ_BAD_VARINT (not minimal), or |too_long| when more than |max| bytes
 * would be needed (the value is out of range). */
static utls_sq_status varint_get(const uint8_t **p, size_t *len, size_t max,
                                 utls_sq_status too_long, uint64_t *out)
{
    uint64_t v = 0;
    size_t i;

    for (i = 0; i < max; i++) {
        uint8_t b;

        if (i == *len)
            return UTLS_SQ_TRUNCATED;
        b = (*p)[i];
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if ((b & 0x80) == 0) {
            if (b == 0 && i > 0)
                return UTLS_SQ_BAD_VARINT; /* not minimal */
            *p += i + 1;
            *len -= i + 1;
            *out = v;
            return UTLS_SQ_OK;
        }
    }
    return too_long;
}

size_t utls_streamq_header_encode(uint8_t *out, uint32_t stream_id, uint64_t seq)
{
    size_t n = 0;

    if (stream_id >= UTLS_STREAMQ_MAX_STREAMS || seq > UTLS_STREAMQ_MAX_SEQ)
        return 0;
    out[n++] = UTLS_STREAMQ_FORMAT_V1;
    n += varint_put(out + n, stream_id);
    n += varint_put(out + n, seq);
    return n;
}

utls_sq_status utls_streamq_header_decode(const uint8_t *rec, size_t len, uint32_t *out_id,
                                          uint64_t *out_seq, size_t *out_hdr_len)
{
    const uint8_t *p = rec;
    size_t left = len;
    uint64_t id, seq;
    utls_sq_status st;

    if (left < 1)
        return UTLS_SQ_TRUNCATED;
    if (p[0] != UTLS_STREAMQ_FORMAT_V1)
        return UTLS_SQ_BAD_VERSION;
    p++;
    left--;
    if ((st = varint_get(&p, &left, SQ_ID_VARINT_MAX, UTLS_SQ_BAD_STREAM_ID, &id))
        != UTLS_SQ_OK)
        return st;
    if (id >= UTLS_STREAMQ_MAX_STREAMS)
        return UTLS_SQ_BAD_STREAM_ID;
    if ((st = varint_get(&p, &left, SQ_SEQ_VARINT_MAX, UTLS_SQ_BAD_SEQ, &seq)) != UTLS_SQ_OK)
        return st;
    if (seq > UTLS_STREAMQ_MAX_SEQ)
        return UTLS_SQ_BAD_SEQ;
    *out_id = (uint32_t)id;
    *out_seq = seq;
    *out_hdr_len = (size_t)(p - rec);
    return UTLS_SQ_OK;
}

utls_streamq *utls_streamq_new(void)
{
    return calloc(1, sizeof(utls_streamq));
}

void utls_streamq_free(utls_streamq *q)
{
    size_t i, j;

    if (q == NULL)
        return;
    for (i = 0; i < UTLS_STREAMQ_MAX_STREAMS; i++) {
        sq_stream *st = &q->streams[i];

        for (j = 0; j < st->num_held; j++)
            sq_wipe_free(st->held[j].data, st->held[j].len);
        free(st->held);
    }
    free(q);
}

static void ready_push(utls_streamq *q, uint32_t id)
{
    sq_stream *st = &q->streams[id];

    if (st->in_ready || st->num_held == 0 || st->held[0].seq != st->next)
        return;
    q->ready[(q->ready_head + q->num_ready) % UTLS_STREAMQ_MAX_STREAMS] = (uint16_t)id;
    q->num_ready++;
    st->in_ready = 1;
}

/* rank_before: record |a| was sent before record |b| (key generation, then
 * sequence number). */
static int rank_before(const utls_streamq_record *a, const utls_streamq_record *b)
{
    if (a->key_generation != b->key_generation)
        return a->key_generation < b->key_generation;
    return a->seq < b->seq;
}

utls_sq_status utls_streamq_check_inorder(const utls_streamq *q, const utls_streamq_record *info)
{
    size_t i;

    if (q->num_held == 0)
        return UTLS_SQ_OK;
    for (i = 0; i < UTLS_STREAMQ_MAX_STREAMS; i++) {
        const sq_stream *st = &q->streams[i];

        /* A held message waits for a lower sequence number of its stream,
         * which its sender wrote in an earlier record. */
        if (st->num_held > 0 && st->held[0].seq != st->next
            && rank_before(&st->held[0].info, info))
            return UTLS_SQ_GAP;
    }
    return UTLS_SQ_OK;
}

/* held_find returns the index of the first held message with seq >= |seq|. */
static size_t held_find(const sq_stream *st, uint64_t seq)
{
    size_t lo = 0, hi = st->num_held;

    /* Arrivals mostly extend the end: check it first. */
    if (hi == 0 || st->held[hi - 1].seq < seq)
        return hi;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (st->held[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static utls_sq_status sq_hold(utls_streamq *q, sq_stream *st, size_t at, uint64_t seq,
                              const uint8_t *data, size_t len, const utls_streamq_record *info)
{
    sq_held *h;
    uint8_t *copy = NULL;

    if (q->num_held >= UTLS_STREAMQ_MAX_HELD_MESSAGES
        || len > UTLS_STREAMQ_MAX_HELD_BYTES - q->bytes_held)
        return UTLS_SQ_HELD_LIMIT;
    if (st->num_held == st->cap) {
        size_t ncap = st->cap == 0 ? 16 : st->cap * 2;
        sq_held *n;

        if (ncap > UTLS_STREAMQ_MAX_HELD_MESSAGES)
            ncap = UTLS_STREAMQ_MAX_HELD_MESSAGES;
        if ((n = realloc(st->held, ncap * sizeof(*n))) == NULL)
            return UTLS_SQ_NOMEM;
        st->held = n;
        st->cap = ncap;
    }
    if (len > 0) {
        if ((copy = malloc(len)) == NULL)
            return UTLS_SQ_NOMEM;
        memcpy(copy, data, len);
    }
    memmove(st->held + at + 1, st->held + at, (st->num_held - at) * sizeof(*st->held));
    h = &st->held[at];
    h->seq = seq;
    h->data = copy;
    h->len = len;
    if (info != NULL)
        h->info = *info;
    else
        memset(&h->info, 0, sizeof(h->info));
    st->num_held++;
    q->num_held++;
    q->bytes_held += len;
    return UTLS_SQ_OK;
}

utls_sq_status utls_streamq_push(utls_streamq *q, uint32_t id, uint64_t seq, const uint8_t *data,
                                 size_t len, const utls_streamq_record *info, unsigned int flags)
{
    sq_stream *st;
    size_t at;
    utls_sq_status r;

    if (id >= UTLS_STREAMQ_MAX_STREAMS)
        return UTLS_SQ_BAD_STREAM_ID;
    if (seq > UTLS_STREAMQ_MAX_SEQ)
        return UTLS_SQ_BAD_SEQ;
    st = &q->streams[id];
    if (seq < st->next)
        return UTLS_SQ_DUPLICATE;
    at = held_find(st, seq);
    if (at < st->num_held && st->held[at].seq == seq)
        return UTLS_SQ_DUPLICATE;
    if (seq == st->next) {
        if ((flags & UTLS_SQ_HOLD) != 0) {
            /* The caller cannot take it now (its buffer is too small): keep
             * it as the stream's deliverable head. */
            if ((r = sq_hold(q, st, 0, seq, data, len, info)) != UTLS_SQ_OK)
                return r;
            ready_push(q, id);
            return UTLS_SQ_OK;
        }
        return UTLS_SQ_DELIVERABLE;
    }
    /* Everything before an in-order record has been returned: its stream's
     * earlier messages can no longer arrive. */
    if ((flags & UTLS_SQ_IN_ORDER) != 0)
        return UTLS_SQ_GAP;
    if (seq - st->next > UTLS_STREAMQ_MAX_AHEAD)
        return UTLS_SQ_TOO_FAR_AHEAD;
    return sq_hold(q, st, at, seq, data, len, info);
}

void utls_streamq_advance(utls_streamq *q, uint32_t id)
{
    sq_stream *st;

    if (id >= UTLS_STREAMQ_MAX_STREAMS)
        return;
    st = &q->streams[id];
    st->next++;
    ready_push(q, id);
}

int utls_streamq_peek(utls_streamq *q, utls_sq_msg *out)
{
    sq_stream *st;
    uint32_t id;

    if (q->num_ready == 0)
        return 0;
    id = q->ready[q->ready_head];
    st = &q->streams[id];
    out->stream_id = id;
    out->seq = st->held[0].seq;
    out->data = st->held[0].data;
    out->len = st->held[0].len;
    out->held = 1;
    out->record = st->held[0].info;
    return 1;
}

void utls_streamq_pop(utls_streamq *q)
{
    sq_stream *st;
    uint32_t id;

    if (q->num_ready == 0)
        return;
    id = q->ready[q->ready_head];
    q->ready_head = (q->ready_head + 1) % UTLS_STREAMQ_MAX_STREAMS;
    q->num_ready--;
    st = &q->streams[id];
    st->in_ready = 0;
    q->num_held--;
    q->bytes_held -= st->held[0].len;
    sq_wipe_free(st->held[0].data, st->held[0].len);
    st->num_held--;
    memmove(st->held, st->held + 1, st->num_held * sizeof(*st->held));
    st->next++;
    /* Round robin: a stream with more deliverable messages goes to the back. */
    ready_push(q, id);
}

size_t utls_streamq_num_held(const utls_streamq *q)
{
    return q->num_held;
}

size_t utls_streamq_bytes_held(const utls_streamq *q)
{
    return q->bytes_held;
}

uint64_t utls_streamq_next_seq(const utls_streamq *q, uint32_t id)
{
    return id < UTLS_STREAMQ_MAX_STREAMS ? q->streams[id].next : 0;
}
