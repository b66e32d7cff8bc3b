/* fuzz_streams.c: libFuzzer target for the sub-stream header parser and
 * reorder buffer (core/src/streamq.c, docs/substreams.md).
 * The input is a script of records as UTLS_stream_read() would see them:
 *   each: u8 flags (bit 0: the record came in order; bit 1: take it held, as
 *         for a too-small buffer), u16 length, then that many plaintext bytes
 *         (sub-stream header + payload).
 * Record i has TLS sequence number i. Like the SSL glue, the first error
 * ends the run. Checked after every record: every returned message is its
 * stream's next one, carries exactly the payload that was pushed for it, and
 * is returned once; a decoded header re-encodes to the same bytes (one
 * encoding per header); the held counters match the messages held. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utls/streamq.h"

#define FUZZ_NAME "fuzz_streams"
#include "fuzz_check.h"

/* Records per input: bounds the run time of one input. */
#define MAX_RECORDS 4096

typedef struct {
    uint32_t id;
    uint64_t seq;
    uint64_t hash;
    int returned;
} pushed;

static pushed g_pushed[MAX_RECORDS];
static size_t g_num_pushed;
static uint64_t g_next[UTLS_STREAMQ_MAX_STREAMS];

static uint64_t fnv(const uint8_t *p, size_t len)
{
    uint64_t h = 1469598103934665603ULL;

    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static void returned(uint32_t id, uint64_t seq, const uint8_t *data, size_t len)
{
    size_t i;

    CHECK(id < UTLS_STREAMQ_MAX_STREAMS);
    CHECK(seq == g_next[id]); /* its stream's order */
    g_next[id]++;
    for (i = 0; i < g_num_pushed; i++)
        if (g_pushed[i].id == id && g_pushed[i].seq == seq)
            break;
    CHECK(i < g_num_pushed);
    CHECK(!g_pushed[i].returned); /* exactly once */
    CHECK(g_pushed[i].hash == fnv(data, len)); /* intact */
    g_pushed[i].returned = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    utls_streamq *q = utls_streamq_new();
    size_t pos = 0, rec = 0;

    CHECK(q != NULL);
    memset(g_next, 0, sizeof(g_next));
    g_num_pushed = 0;
    while (pos + 3 <= size && rec < MAX_RECORDS) {
        uint8_t flags = data[pos];
        size_t len = (size_t)data[pos + 1] << 8 | data[pos + 2];
        const uint8_t *pt = data + pos + 3;
        utls_streamq_record info;
        uint8_t again[UTLS_STREAMQ_MAX_HEADER];
        uint32_t id;
        uint64_t seq;
        size_t hl, held_before;
        utls_sq_status r;
        utls_sq_msg m;

        pos += 3;
        if (len > size - pos)
            len = size - pos;
        pos += len;
        memset(&info, 0, sizeof(info));
        info.seq = rec++;
        info.out_of_order = (flags & 1) == 0;
        if ((flags & 1) != 0 && utls_streamq_check_inorder(q, &info) != UTLS_SQ_OK)
            break;
        r = utls_streamq_header_decode(pt, len, &id, &seq, &hl);
        if (r != UTLS_SQ_OK)
            break;
        CHECK(hl <= len && hl <= UTLS_STREAMQ_MAX_HEADER);
        CHECK(utls_streamq_header_encode(again, id, seq) == hl);
        CHECK(memcmp(again, pt, hl) == 0);
        held_before = utls_streamq_num_held(q);
        r = utls_streamq_push(q, id, seq, pt + hl, len - hl, &info,
                              ((flags & 1) ? UTLS_SQ_IN_ORDER : 0) | ((flags & 2) ? UTLS_SQ_HOLD : 0));
        if (r == UTLS_SQ_DELIVERABLE || r == UTLS_SQ_OK) {
            CHECK(g_num_pushed < MAX_RECORDS);
            g_pushed[g_num_pushed].id = id;
            g_pushed[g_num_pushed].seq = seq;
            g_pushed[g_num_pushed].hash = fnv(pt + hl, len - hl);
            g_pushed[g_num_pushed].returned = 0;
            g_num_pushed++;
        }
        if (r == UTLS_SQ_DELIVERABLE) {
            CHECK(utls_streamq_num_held(q) == held_before);
            returned(id, seq, pt + hl, len - hl);
            utls_streamq_advance(q, id);
        } else if (r == UTLS_SQ_OK) {
            CHECK(utls_streamq_num_held(q) == held_before + 1);
        } else {
            CHECK(utls_streamq_num_held(q) == held_before); /* refused: nothing changed */
            break;
        }
        while (utls_streamq_peek(q, &m)) {
            returned(m.stream_id, m.seq, m.data, m.len);
            CHECK(m.held);
            utls_streamq_pop(q);
        }
        CHECK(utls_streamq_num_held(q) <= UTLS_STREAMQ_MAX_HELD_MESSAGES);
        CHECK(utls_streamq_bytes_held(q) <= UTLS_STREAMQ_MAX_HELD_BYTES);
    }
    /* Whatever is still held is exactly what was pushed and not returned. */
    {
        size_t waiting = 0;

        for (size_t i = 0; i < g_num_pushed; i++)
            waiting += !g_pushed[i].returned;
        CHECK(waiting == utls_streamq_num_held(q));
    }
    utls_streamq_free(q);
    return 0;
}
