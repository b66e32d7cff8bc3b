/* fuzz_wire.h: the oracle's copy of the data phase's wire, shared by the
 * fuzz targets over the fork (fuzz_receiver.c, fuzz_ern.c): the bytes the
 * sender wrote, split into records, and what was pushed into the receiver at
 * each offset (first copy, genuine or not), with the helpers that push
 * genuine and forged bytes and keep that record. Header-only: each target is
 * one program. Before including it a target defines FUZZ_WIRE_MAX (bytes of
 * the data phase), FUZZ_WIRE_MAX_RECORDS (at most 256: rec_of is a byte) and
 * CHECK(cond) (abort() on failure), and includes uharness.h. */
#ifndef UTLS_TESTS_FUZZ_WIRE_H
#define UTLS_TESTS_FUZZ_WIRE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

_Static_assert(FUZZ_WIRE_MAX_RECORDS <= 256, "gw.rec_of holds a record index in a byte");

/* fuzz_rec: one record of the data phase, as the sender wrote it. */
typedef struct {
    uint64_t off;       /* in the data phase (add gw.base for the stream) */
    size_t wire_len;
    int app;            /* an application record (else KeyUpdate/alert) */
    uint32_t index;     /* message index (app) */
    size_t msg_len;
    uint32_t gen;       /* key generation */
    uint64_t seq;       /* its sequence number (or explicit number) */
    size_t have;        /* bytes of it pushed so far */
    int complete_early; /* complete at a moment a byte before it was missing */
} fuzz_rec;

/* gw: the data phase and what the oracle knows of each byte. fuzz_wire_reset()
 * clears it per input. */
static struct {
    uh_seg_pair *pair;   /* the receiver's pair */
    uint64_t base;       /* stream offset of the data phase */
    size_t wire_len;
    size_t contig;       /* bytes pushed contiguously from 0 */
    fuzz_rec recs[FUZZ_WIRE_MAX_RECORDS];
    size_t num_recs;
    int forged;          /* anything not genuine was pushed */
    uint64_t strict_bad; /* first offset whose first copy was wrong */
    uint64_t loose_bad;  /* first offset a wrong byte was pushed at while not
                          * yet contiguous */
    uint64_t window;     /* the segment BIO's window, if set (else 0) */
    uint64_t pushed_bytes;
    uint64_t pushes;     /* push calls, refused ones included */
    uint8_t wire[FUZZ_WIRE_MAX];
    uint8_t first[FUZZ_WIRE_MAX];  /* the first byte pushed at each offset */
    uint8_t have[FUZZ_WIRE_MAX];
    uint8_t rec_of[FUZZ_WIRE_MAX]; /* record index of each byte */
} gw;

static int g_trace = -1;

#define TRACE(...)                        \
    do {                                  \
        if (g_trace > 0) {                \
            fprintf(stderr, __VA_ARGS__); \
        }                                 \
    } while (0)

/* fuzz_wire_reset empties gw for a new input over |pair|; tracing is on when
 * the environment variable |trace_env| is set. */
static void fuzz_wire_reset(uh_seg_pair *pair, const char *trace_env)
{
    size_t used = gw.wire_len;

    if (g_trace < 0) {
        g_trace = getenv(trace_env) != NULL;
    }
    memset(gw.have, 0, used);
    memset(gw.recs, 0, sizeof(gw.recs));
    gw.pair = pair;
    gw.base = gw.wire_len = gw.contig = gw.num_recs = 0;
    gw.forged = 0;
    gw.strict_bad = gw.loose_bad = UINT64_MAX;
    gw.window = gw.pushed_bytes = gw.pushes = 0;
}

/* fuzz_note_push records |len| bytes |data| pushed at data-phase offset |rel|
 * (may lie outside the data phase) for the oracle. */
static void fuzz_note_push(int64_t rel, const uint8_t *data, size_t len)
{
    gw.pushed_bytes += len;
    for (size_t i = 0; i < len; i++) {
        int64_t o = rel + (int64_t)i;
        if (o < 0 || (uint64_t)o >= gw.wire_len) {
            continue;
        }
        size_t u = (size_t)o;
        if (data[i] != gw.wire[u] && u >= gw.contig && (uint64_t)u < gw.loose_bad) {
            gw.loose_bad = u;
        }
        if (gw.have[u]) {
            continue;
        }
        gw.have[u] = 1;
        gw.first[u] = data[i];
        /* Bytes go up within a push: the prefix filled by this push counts. */
        while (gw.contig < gw.wire_len && gw.have[gw.contig]) {
            gw.contig++;
        }
        if (data[i] != gw.wire[u] && (uint64_t)u < gw.strict_bad) {
            gw.strict_bad = u;
        }
        fuzz_rec *r = &gw.recs[gw.rec_of[u]];
        r->have++;
        if (r->have == r->wire_len && gw.contig < r->off) {
            r->complete_early = 1;
        }
    }
}

/* fuzz_push_genuine pushes the genuine bytes [rel, rel + len), clipped to the
 * data phase. Returns 1, or 0 if a receive window set smaller than the data
 * (gw.window) refused them; any other refusal fails the oracle. */
static int fuzz_push_genuine(uint64_t rel, size_t len)
{
    if (rel >= gw.wire_len) {
        return 1;
    }
    if (len > gw.wire_len - rel) {
        len = gw.wire_len - rel;
    }
    if (len == 0) {
        return 1;
    }
    ERR_clear_error();
    TRACE("  push genuine [%llu, %llu)\n", (unsigned long long)rel,
          (unsigned long long)(rel + len));
    gw.pushes++;
    if (uh_pair_push(gw.pair, gw.base + rel, gw.wire + rel, len) != 1) {
        unsigned long e = ERR_peek_error();
        TRACE("  (refused: outside the window)\n");
        CHECK(gw.window != 0 && rel + len > gw.window);
        CHECK(ERR_GET_LIB(e) == UTLS_get_lib() && ERR_GET_REASON(e) == UTLS_R_OUTSIDE_WINDOW);
        ERR_clear_error();
        return 0;
    }
    fuzz_note_push((int64_t)rel, gw.wire + rel, len);
    return 1;
}

/* fuzz_push_forged pushes bytes that are not (all) the genuine ones at their
 * offset; |rel| may be negative (the handshake) or far past the data. A
 * refusal must name a uTLS reason of the segment window. */
static void fuzz_push_forged(int64_t rel, const uint8_t *data, size_t len)
{
    int64_t abs = (int64_t)gw.base + rel;
    if (abs < 0 || len == 0) {
        return;
    }
    gw.forged = 1;
    gw.pushes++;
    ERR_clear_error();
    TRACE("  push forged [%lld, %lld)\n", (long long)rel, (long long)rel + (long long)len);
    if (!uh_pair_push(gw.pair, (uint64_t)abs, data, len)) {
        unsigned long e = ERR_peek_error();
        TRACE("  (refused)\n");
        CHECK(ERR_GET_LIB(e) == UTLS_get_lib());
        CHECK(ERR_GET_REASON(e) == UTLS_R_OUTSIDE_WINDOW
              || ERR_GET_REASON(e) == UTLS_R_OFFSET_WRAPS);
        ERR_clear_error();
        return;
    }
    fuzz_note_push(rel, data, len);
}

/* fuzz_take_client_output appends what the client of gw.pair wrote to the
 * wire and splits it into records. Returns how many new records, or -1 if
 * the output is not a sequence of whole records or too long. */
static int fuzz_take_client_output(void)
{
    int n;
    size_t start = gw.wire_len, before = gw.num_recs;
    while ((n = BIO_read(gw.pair->c_out, gw.wire + gw.wire_len,
                         (int)(FUZZ_WIRE_MAX - gw.wire_len))) > 0) {
        gw.wire_len += (size_t)n;
    }
    size_t pos = start;
    while (pos < gw.wire_len) {
        if (gw.wire_len - pos < 5 || gw.num_recs == FUZZ_WIRE_MAX_RECORDS) {
            return -1;
        }
        size_t len = 5 + (((size_t)gw.wire[pos + 3] << 8) | gw.wire[pos + 4]);
        if (len > gw.wire_len - pos) {
            return -1;
        }
        fuzz_rec *r = &gw.recs[gw.num_recs];
        memset(r, 0, sizeof(*r));
        r->off = pos;
        r->wire_len = len;
        for (size_t i = 0; i < len; i++) {
            gw.rec_of[pos + i] = (uint8_t)gw.num_recs;
        }
        gw.num_recs++;
        pos += len;
    }
    return (int)(gw.num_recs - before);
}

/* fuzz_drain_server_output discards what the receiver wrote back (its
 * KeyUpdates, alerts, ...). */
static void fuzz_drain_server_output(void)
{
    uint8_t buf[4096];
    while (uh_pair_take_output(gw.pair, buf, sizeof(buf)) > 0) {
    }
}

/* fuzz_msg_len returns a message length from UH_MSG_MIN up to |max_msg|
 * (|large|), 48 bytes more (|tiny|) or 1500 more: every message the same
 * length (the seed's) or, with |variable|, each its own. */
static size_t fuzz_msg_len(int large, int tiny, int variable, size_t max_msg, uint32_t *rng)
{
    size_t span = large ? max_msg - UH_MSG_MIN : tiny ? 48 : 1500;

    if (variable) {
        return UH_MSG_MIN + fuzz_rng_next(rng) % (span + 1);
    }
    return UH_MSG_MIN + (*rng % (span + 1));
}

/* fuzz_op_push_range: the operation "a genuine slice from inside record |r|
 * to inside or the end of another record, either way round" (any overlap
 * with what was pushed before); reads three bytes of |in|. */
static void fuzz_op_push_range(fuzz_cursor *in, const fuzz_rec *r)
{
    uint64_t a = r->off + fuzz_get_u8(in) % r->wire_len;
    const fuzz_rec *rb = &gw.recs[fuzz_get_u8(in) % gw.num_recs];
    uint64_t b = rb->off + fuzz_get_u8(in) % (rb->wire_len + 1);
    if (b < a) {
        uint64_t t = a;
        a = b;
        b = t;
    }
    fuzz_push_genuine(a, (size_t)(b - a));
}

/* fuzz_op_push_split: record |r|'s tail from a cut (two bytes of |in|), then
 * its head. */
static void fuzz_op_push_split(fuzz_cursor *in, const fuzz_rec *r)
{
    size_t cut = 1 + fuzz_get_u16(in) % r->wire_len;
    fuzz_push_genuine(r->off + cut, r->wire_len - cut);
    fuzz_push_genuine(r->off, cut);
}

/* fuzz_fill_random fills |out| with |len| filler bytes from the PRNG |*s|. */
static void fuzz_fill_random(uint8_t *out, size_t len, uint32_t *s)
{
    for (size_t i = 0; i < len; i++) {
        out[i] = (uint8_t)fuzz_rng_next(s);
    }
}

/* fuzz_app_rec returns the application record that carries message |idx|
 * (the oracle fails if there is none). */
static fuzz_rec *fuzz_app_rec(uint32_t idx)
{
    fuzz_rec *r = NULL;
    for (size_t i = 0; i < gw.num_recs; i++) {
        if (gw.recs[i].app && gw.recs[i].index == idx) {
            r = &gw.recs[i];
        }
    }
    CHECK(r != NULL);
    return r;
}

/* The kinds of read an operation makes. */
enum { READ_INFO, READ_NOINFO, READ_EX, READ_PEEK, READ_SMALL };

/* fuzz_read makes one read of |kind| on |s| into |buf|, which holds a whole
 * record (READ_SMALL: |small_len| bytes, with metadata), with metadata into
 * |info| for READ_INFO and READ_SMALL. Returns what the call returned. */
static int fuzz_read(SSL *s, int kind, uint8_t *buf, size_t small_len, size_t *n,
                     UTLS_RECORD_INFO *info)
{
    switch (kind) {
    case READ_INFO:
        return UTLS_read_record(s, buf, SSL3_RT_MAX_PLAIN_LENGTH, n, info);
    case READ_NOINFO:
        return UTLS_read_record(s, buf, SSL3_RT_MAX_PLAIN_LENGTH, n, NULL);
    case READ_EX:
        return SSL_read_ex(s, buf, SSL3_RT_MAX_PLAIN_LENGTH, n);
    case READ_PEEK:
        return SSL_peek_ex(s, buf, SSL3_RT_MAX_PLAIN_LENGTH, n);
    case READ_SMALL:
    default:
        return UTLS_read_record(s, buf, small_len, n, info);
    }
}

/* fuzz_trace_records prints the data phase's records (with tracing on). */
static void fuzz_trace_records(unsigned suite_i, unsigned flags)
{
    TRACE("suite %u flags 0x%02x\n", suite_i, flags);
    for (size_t i = 0; i < gw.num_recs; i++) {
        TRACE("record %zu: [%llu, %llu) app %d index %u seq %llu gen %u\n", i,
              (unsigned long long)gw.recs[i].off,
              (unsigned long long)(gw.recs[i].off + gw.recs[i].wire_len), gw.recs[i].app,
              gw.recs[i].index, (unsigned long long)gw.recs[i].seq, gw.recs[i].gen);
    }
}

#endif /* UTLS_TESTS_FUZZ_WIRE_H */
