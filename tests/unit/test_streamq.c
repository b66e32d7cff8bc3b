/*
 * test_streamq.c: unit tests for the sub-stream header codec and reorder
 * buffer (core/include/utls/streamq.h), without a handshake. What the queue
 * promises: one header per (stream id, sequence number) and every malformed
 * one refused with its reason; each stream's messages come out in that
 * stream's order, exactly once, intact, with the record they came in; a
 * stream never waits for another; a refused push changes nothing; every
 * limit (held messages, held bytes, distance ahead) holds for one stream as
 * for all of them together.
 *
 * The test is linked with -Wl,--wrap for malloc, calloc and realloc (see
 * tests/unit/CMakeLists.txt) so that it can make the queue's allocations
 * fail.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "utls/streamq.h"

/* The allocator the queue sees: fails every call once |g_alloc_budget|
 * successful calls have been made (-1: never fails). */
static long g_alloc_budget = -1;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);

static int alloc_fails(void)
{
    if (g_alloc_budget < 0)
        return 0;
    if (g_alloc_budget == 0)
        return 1;
    g_alloc_budget--;
    return 0;
}

void *__wrap_malloc(size_t n)
{
    return alloc_fails() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return alloc_fails() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    return alloc_fails() ? NULL : __real_realloc(p, n);
}

static utls_streamq_record rec_at(uint32_t key_generation, uint64_t seq)
{
    utls_streamq_record r;

    memset(&r, 0, sizeof(r));
    r.key_generation = key_generation;
    r.seq = seq;
    r.out_of_order = 1;
    r.stream_offset = 1000 + 100 * seq;
    r.wire_len = 22 + (size_t)seq;
    r.arrival_ns = 5000000 + seq;
    return r;
}

/* push_str offers |payload| as |id|'s |seq|, without a record or flags. */
static utls_sq_status push_str(utls_streamq *q, uint32_t id, uint64_t seq, const char *payload)
{
    return utls_streamq_push(q, id, seq, (const uint8_t *)payload, strlen(payload), NULL, 0);
}

/* deliver pushes |payload| as |id|'s |seq|, which must be its stream's next
 * message, and returns it as a caller would. */
static void deliver(utls_streamq *q, uint32_t id, uint64_t seq, const char *payload)
{
    assert_int_equal(push_str(q, id, seq, payload), UTLS_SQ_DELIVERABLE);
    utls_streamq_advance(q, id);
}

/* Pops the next deliverable message and checks it is |id|'s |seq| with
 * |payload|. */
static void expect_pop(utls_streamq *q, uint32_t id, uint64_t seq, const char *payload)
{
    utls_sq_msg m;

    assert_true(utls_streamq_peek(q, &m));
    assert_int_equal(m.stream_id, id);
    assert_int_equal(m.seq, seq);
    assert_int_equal(m.held, 1);
    assert_int_equal(m.len, strlen(payload));
    if (m.len > 0) {
        assert_memory_equal(m.data, payload, m.len);
    }
    utls_streamq_pop(q);
}

/* The fixture of most tests: a new, empty queue. */
static int queue_setup(void **state)
{
    *state = utls_streamq_new();
    return *state == NULL ? -1 : 0;
}

static int queue_teardown(void **state)
{
    utls_streamq_free(*state);
    return 0;
}

#define QUEUE_TEST(t) cmocka_unit_test_setup_teardown(t, queue_setup, queue_teardown)

/* Header bytes for a few (id, seq) pairs: the documented format. */
static void test_streamq_header_format(void **state)
{
    uint8_t h[UTLS_STREAMQ_MAX_HEADER];
    uint32_t id;
    uint64_t seq;
    size_t hl, full;

    (void)state;
    assert_int_equal(utls_streamq_header_encode(h, 0, 0), 3);
    assert_memory_equal(h, "\x01\x00\x00", 3);
    assert_int_equal(utls_streamq_header_encode(h, 200, 300), 5);
    assert_memory_equal(h, "\x01\xc8\x01\xac\x02", 5);
    assert_int_equal(utls_streamq_header_encode(h, 255, UTLS_STREAMQ_MAX_SEQ),
                     UTLS_STREAMQ_MAX_HEADER);
    assert_int_equal(utls_streamq_header_decode(h, UTLS_STREAMQ_MAX_HEADER, &id, &seq, &hl),
                     UTLS_SQ_OK);
    assert_int_equal(id, 255);
    assert_true(seq == UTLS_STREAMQ_MAX_SEQ);
    assert_int_equal(hl, UTLS_STREAMQ_MAX_HEADER);
    assert_int_equal(utls_streamq_header_encode(h, UTLS_STREAMQ_MAX_STREAMS, 0), 0);
    assert_int_equal(utls_streamq_header_encode(h, 0, UTLS_STREAMQ_MAX_SEQ + 1), 0);
    /* Every truncation of a valid header is refused as truncated. */
    full = utls_streamq_header_encode(h, 200, 1u << 20);
    assert_int_equal(full, 6);
    for (size_t cut = 0; cut < full; cut++) {
        assert_int_equal(utls_streamq_header_decode(h, cut, &id, &seq, &hl), UTLS_SQ_TRUNCATED);
    }
}

/* Encoding and decoding agree at every varint length boundary, with payload
 * bytes after the header left alone. */
static void test_streamq_header_round_trip(void **state)
{
    static const uint32_t ids[] = {0, 1, 127, 128, 255};
    static const uint64_t seqs[] = {0,
                                    1,
                                    127,
                                    128,
                                    16383,
                                    16384,
                                    (UINT64_C(1) << 49) - 1,
                                    UINT64_C(1) << 49,
                                    UTLS_STREAMQ_MAX_SEQ};
    uint8_t buf[UTLS_STREAMQ_MAX_HEADER + 4];

    (void)state;
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        for (size_t j = 0; j < sizeof(seqs) / sizeof(seqs[0]); j++) {
            size_t want = 1 + (ids[i] < 128 ? 1 : 2), hl = 0, got_hl = 0;
            uint32_t id = 0;
            uint64_t seq = 0;

            for (uint64_t v = seqs[j]; v >= 128; v >>= 7) {
                want++;
            }
            want++;
            memset(buf, 0xee, sizeof(buf));
            hl = utls_streamq_header_encode(buf, ids[i], seqs[j]);
            assert_int_equal(hl, want);
            assert_true(hl <= UTLS_STREAMQ_MAX_HEADER);
            assert_int_equal(utls_streamq_header_decode(buf, hl + 4, &id, &seq, &got_hl),
                             UTLS_SQ_OK);
            assert_int_equal(id, ids[i]);
            assert_true(seq == seqs[j]);
            assert_int_equal(got_hl, hl);
            assert_int_equal(buf[hl], 0xee);
        }
    }
}

/* Malformed headers: each refused with its reason, the outputs untouched. */
static void test_streamq_header_refuses(void **state)
{
    static const struct {
        const char *bytes;
        size_t len;
        utls_sq_status want;
    } cases[] = {
        {"", 0, UTLS_SQ_TRUNCATED},
        {"\x00\x00\x00", 3, UTLS_SQ_BAD_VERSION},
        {"\x02\x00\x00", 3, UTLS_SQ_BAD_VERSION},
        {"\xff\x00\x00", 3, UTLS_SQ_BAD_VERSION},
        /* Not minimal: stream id 0 as 0x80 0x00; sequence number 1 as 0x81 0x00. */
        {"\x01\x80\x00\x00", 4, UTLS_SQ_BAD_VARINT},
        {"\x01\x00\x81\x00", 4, UTLS_SQ_BAD_VARINT},
        /* Stream id 256 (two bytes, minimal) and a three-byte stream id. */
        {"\x01\x80\x02\x00", 4, UTLS_SQ_BAD_STREAM_ID},
        {"\x01\x80\x80\x01\x00", 5, UTLS_SQ_BAD_STREAM_ID},
        /* Sequence number 2^56: nine varint bytes. */
        {"\x01\x00\x80\x80\x80\x80\x80\x80\x80\x80\x01", 11, UTLS_SQ_BAD_SEQ},
        /* Eight continuation bytes: longer than any sequence number. */
        {"\x01\x00\xff\xff\xff\xff\xff\xff\xff\xff", 10, UTLS_SQ_BAD_SEQ},
        /* The sequence number's varint runs off the end. */
        {"\x01\x05\x80", 3, UTLS_SQ_TRUNCATED},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint32_t id = 0xabcd;
        uint64_t seq = 0x1234;
        size_t hl = 77;

        assert_int_equal(utls_streamq_header_decode((const uint8_t *)cases[i].bytes,
                                                    cases[i].len, &id, &seq, &hl),
                         cases[i].want);
        assert_int_equal(id, 0xabcd);
        assert_int_equal(seq, 0x1234);
        assert_int_equal(hl, 77);
    }
}

/* Messages in their stream's order are handed back at once, nothing copied. */
static void test_streamq_in_order(void **state)
{
    utls_streamq *q = *state;
    utls_sq_msg m;

    for (uint64_t s = 0; s < 10; s++) {
        utls_streamq_record r = rec_at(0, s);

        assert_int_equal(utls_streamq_push(q, 3, s, (const uint8_t *)"abc", 3, &r,
                                           UTLS_SQ_IN_ORDER),
                         UTLS_SQ_DELIVERABLE);
        assert_int_equal(utls_streamq_num_held(q), 0);
        assert_int_equal(utls_streamq_next_seq(q, 3), s);
        utls_streamq_advance(q, 3);
        assert_int_equal(utls_streamq_next_seq(q, 3), s + 1);
    }
    assert_false(utls_streamq_peek(q, &m));
    assert_int_equal(utls_streamq_bytes_held(q), 0);
    assert_int_equal(utls_streamq_next_seq(q, 4), 0);
}

/* Arrivals ahead of a gap are copied, held, and returned in order with the
 * record each came in once the gap is filled. */
static void test_streamq_reordered(void **state)
{
    utls_streamq *q = *state;
    utls_streamq_record r3 = rec_at(0, 7), r1 = rec_at(0, 5), r2 = rec_at(1, 0);
    uint8_t buf[8];
    utls_sq_msg m;

    memcpy(buf, "three", 5);
    assert_int_equal(utls_streamq_push(q, 0, 3, buf, 5, &r3, 0), UTLS_SQ_OK);
    memset(buf, 0, sizeof(buf)); /* the queue kept its own copy */
    memcpy(buf, "one", 3);
    assert_int_equal(utls_streamq_push(q, 0, 1, buf, 3, &r1, 0), UTLS_SQ_OK);
    memcpy(buf, "two", 3);
    assert_int_equal(utls_streamq_push(q, 0, 2, buf, 3, &r2, 0), UTLS_SQ_OK);
    assert_int_equal(utls_streamq_num_held(q), 3);
    assert_int_equal(utls_streamq_bytes_held(q), 11);
    /* Held behind the gap at 0: nothing deliverable yet. */
    assert_false(utls_streamq_peek(q, &m));
    deliver(q, 0, 0, "zero");
    assert_true(utls_streamq_peek(q, &m));
    assert_memory_equal(&m.record, &r1, sizeof(r1));
    expect_pop(q, 0, 1, "one");
    assert_true(utls_streamq_peek(q, &m));
    assert_memory_equal(&m.record, &r2, sizeof(r2));
    expect_pop(q, 0, 2, "two");
    assert_true(utls_streamq_peek(q, &m));
    assert_memory_equal(&m.record, &r3, sizeof(r3));
    expect_pop(q, 0, 3, "three");
    assert_false(utls_streamq_peek(q, &m));
    assert_int_equal(utls_streamq_num_held(q), 0);
    assert_int_equal(utls_streamq_bytes_held(q), 0);
    assert_int_equal(utls_streamq_next_seq(q, 0), 4);
    /* pop with nothing deliverable changes nothing. */
    utls_streamq_pop(q);
    assert_int_equal(utls_streamq_next_seq(q, 0), 4);
}

/* A number delivered or held already is refused and changes nothing: the
 * first copy of a held message stays. */
static void test_streamq_duplicate(void **state)
{
    utls_streamq *q = *state;

    deliver(q, 1, 0, "a");
    assert_int_equal(push_str(q, 1, 3, "first"), UTLS_SQ_OK);
    assert_int_equal(push_str(q, 1, 3, "forged!"), UTLS_SQ_DUPLICATE);
    assert_int_equal(utls_streamq_push(q, 1, 3, (const uint8_t *)"x", 1, NULL, UTLS_SQ_HOLD),
                     UTLS_SQ_DUPLICATE);
    assert_int_equal(push_str(q, 1, 0, "a"), UTLS_SQ_DUPLICATE);
    assert_int_equal(utls_streamq_push(q, 1, 0, (const uint8_t *)"a", 1, NULL, UTLS_SQ_IN_ORDER),
                     UTLS_SQ_DUPLICATE);
    assert_int_equal(utls_streamq_num_held(q), 1);
    assert_int_equal(utls_streamq_bytes_held(q), 5);
    assert_int_equal(utls_streamq_next_seq(q, 1), 1);
    deliver(q, 1, 1, "b");
    deliver(q, 1, 2, "c");
    expect_pop(q, 1, 3, "first");
    assert_int_equal(push_str(q, 1, 3, "first"), UTLS_SQ_DUPLICATE);
}

/* A gap in one stream holds only that stream; deliverable streams come out
 * in the order they became deliverable, one message each in turn. */
static void test_streamq_streams_independent(void **state)
{
    utls_streamq *q = *state;
    utls_sq_msg m;

    assert_int_equal(push_str(q, 1, 1, "1.1"), UTLS_SQ_OK);
    assert_int_equal(push_str(q, 1, 2, "1.2"), UTLS_SQ_OK);
    assert_int_equal(push_str(q, 9, 1, "9.1"), UTLS_SQ_OK);
    assert_int_equal(push_str(q, 5, 1, "5.1"), UTLS_SQ_OK);
    /* Stream 2 has no gap: never held behind stream 1's. */
    for (uint64_t s = 0; s < 3; s++) {
        deliver(q, 2, s, "2");
    }
    assert_false(utls_streamq_peek(q, &m));
    /* Gaps filled in the order 5, 1, 9. */
    deliver(q, 5, 0, "");
    deliver(q, 1, 0, "");
    deliver(q, 9, 0, "");
    expect_pop(q, 5, 1, "5.1");
    /* Stream 1 has two deliverable: after one it goes behind stream 9. */
    expect_pop(q, 1, 1, "1.1");
    expect_pop(q, 9, 1, "9.1");
    expect_pop(q, 1, 2, "1.2");
    assert_false(utls_streamq_peek(q, &m));
}

/* UTLS_SQ_IN_ORDER: everything before the record was returned, so a number
 * past its stream's next one proves a skipped number. */
static void test_streamq_in_order_gap(void **state)
{
    utls_streamq *q = *state;

    assert_int_equal(utls_streamq_push(q, 0, 1, (const uint8_t *)"x", 1, NULL, UTLS_SQ_IN_ORDER),
                     UTLS_SQ_GAP);
    assert_int_equal(utls_streamq_num_held(q), 0);
    assert_int_equal(utls_streamq_push(q, 0, 0, (const uint8_t *)"x", 1, NULL, UTLS_SQ_IN_ORDER),
                     UTLS_SQ_DELIVERABLE);
}

/* utls_streamq_check_inorder: a held message waits for a number its sender
 * wrote in an earlier record; once an in-order record passes that record,
 * the number can never come. */
static void test_streamq_check_inorder(void **state)
{
    utls_streamq *q = utls_streamq_new();
    utls_streamq_record held = rec_at(1, 5), r;

    (void)state;
    assert_non_null(q);
    r = rec_at(7, 7);
    assert_int_equal(utls_streamq_check_inorder(q, &r), UTLS_SQ_OK); /* nothing held */
    assert_int_equal(utls_streamq_push(q, 4, 2, (const uint8_t *)"x", 1, &held, 0), UTLS_SQ_OK);
    r = rec_at(1, 4);
    assert_int_equal(utls_streamq_check_inorder(q, &r), UTLS_SQ_OK);
    /* Its own record is not an earlier one. */
    assert_int_equal(utls_streamq_check_inorder(q, &held), UTLS_SQ_OK);
    r = rec_at(0, 100);
    assert_int_equal(utls_streamq_check_inorder(q, &r), UTLS_SQ_OK); /* older key */
    r = rec_at(1, 6);
    assert_int_equal(utls_streamq_check_inorder(q, &r), UTLS_SQ_GAP);
    r = rec_at(2, 0);
    assert_int_equal(utls_streamq_check_inorder(q, &r), UTLS_SQ_GAP); /* newer key */
    utls_streamq_free(q);

    /* A held message that is its stream's next one (held for a small buffer)
     * waits for nothing. */
    q = utls_streamq_new();
    assert_non_null(q);
    assert_int_equal(utls_streamq_push(q, 4, 0, (const uint8_t *)"x", 1, &held, UTLS_SQ_HOLD),
                     UTLS_SQ_OK);
    r = rec_at(9, 9);
    assert_int_equal(utls_streamq_check_inorder(q, &r), UTLS_SQ_OK);
    utls_streamq_free(q);
}

/* UTLS_SQ_HOLD keeps a deliverable message (the caller's buffer is too
 * small) as its stream's deliverable head; without a record its metadata is
 * zero. */
static void test_streamq_hold_flag(void **state)
{
    utls_streamq *q = *state;
    utls_streamq_record zero;
    utls_sq_msg m;

    memset(&zero, 0, sizeof(zero));
    assert_int_equal(utls_streamq_push(q, 6, 0, (const uint8_t *)"big", 3, NULL, UTLS_SQ_HOLD),
                     UTLS_SQ_OK);
    assert_int_equal(utls_streamq_num_held(q), 1);
    assert_int_equal(utls_streamq_next_seq(q, 6), 0);
    assert_true(utls_streamq_peek(q, &m));
    assert_memory_equal(&m.record, &zero, sizeof(zero));
    /* Peeking twice describes the same message; only pop takes it. */
    assert_true(utls_streamq_peek(q, &m));
    expect_pop(q, 6, 0, "big");
    assert_int_equal(utls_streamq_next_seq(q, 6), 1);
    assert_int_equal(utls_streamq_num_held(q), 0);
}

/* A message more than UTLS_STREAMQ_MAX_AHEAD past its stream's next number
 * is refused at once; the bound moves with the stream. */
static void test_streamq_too_far_ahead(void **state)
{
    utls_streamq *q = *state;

    assert_int_equal(push_str(q, 0, UTLS_STREAMQ_MAX_AHEAD + 1, "x"), UTLS_SQ_TOO_FAR_AHEAD);
    assert_int_equal(push_str(q, 0, UTLS_STREAMQ_MAX_SEQ, "x"), UTLS_SQ_TOO_FAR_AHEAD);
    assert_int_equal(push_str(q, 0, UTLS_STREAMQ_MAX_AHEAD, "x"), UTLS_SQ_OK);
    assert_int_equal(utls_streamq_num_held(q), 1);
    deliver(q, 0, 0, "x");
    assert_int_equal(push_str(q, 0, UTLS_STREAMQ_MAX_AHEAD + 1, "x"), UTLS_SQ_OK);
    /* Another stream counts from its own next number. */
    assert_int_equal(push_str(q, 1, UTLS_STREAMQ_MAX_AHEAD + 1, "x"), UTLS_SQ_TOO_FAR_AHEAD);
    assert_int_equal(utls_streamq_num_held(q), 2);
}

/* Out-of-range arguments: refused or ignored, nothing changed. */
static void test_streamq_bad_arguments(void **state)
{
    utls_streamq *q = *state;

    assert_int_equal(push_str(q, UTLS_STREAMQ_MAX_STREAMS, 0, "x"), UTLS_SQ_BAD_STREAM_ID);
    assert_int_equal(push_str(q, 0, UTLS_STREAMQ_MAX_SEQ + 1, "x"), UTLS_SQ_BAD_SEQ);
    utls_streamq_advance(q, UTLS_STREAMQ_MAX_STREAMS);
    assert_int_equal(utls_streamq_next_seq(q, UTLS_STREAMQ_MAX_STREAMS), 0);
    assert_int_equal(utls_streamq_num_held(q), 0);
    /* Empty messages are held and returned like any other. */
    assert_int_equal(utls_streamq_push(q, 255, 1, NULL, 0, NULL, 0), UTLS_SQ_OK);
    assert_int_equal(utls_streamq_num_held(q), 1);
    assert_int_equal(utls_streamq_bytes_held(q), 0);
    assert_int_equal(utls_streamq_push(q, 255, 0, NULL, 0, NULL, 0), UTLS_SQ_DELIVERABLE);
    utls_streamq_advance(q, 255);
    expect_pop(q, 255, 1, "");
    utls_streamq_free(NULL);
}

/* The held caps, all streams together and one stream alone (the per-stream
 * caps equal the totals, docs/substreams.md). A refused push changes
 * nothing. */
static void test_streamq_held_limits(void **state)
{
    /* One record's plaintext, and one byte more. */
    static uint8_t big[UTLS_STREAMQ_MAX_RECORD_PLAINTEXT + 1];
    const size_t rec = UTLS_STREAMQ_MAX_RECORD_PLAINTEXT;
    utls_streamq *q = utls_streamq_new();
    utls_sq_msg m;
    size_t i;

    (void)state;
    assert_non_null(q);
    /* Held message count: streams 0..255 each hold seq 1..8 (2048). */
    for (i = 0; i < UTLS_STREAMQ_MAX_HELD_MESSAGES; i++) {
        assert_int_equal(utls_streamq_push(q, (uint32_t)(i % UTLS_STREAMQ_MAX_STREAMS),
                                           1 + i / UTLS_STREAMQ_MAX_STREAMS, big, 1, NULL, 0),
                         UTLS_SQ_OK);
    }
    assert_int_equal(utls_streamq_push(q, 7, 100, big, 1, NULL, 0), UTLS_SQ_HELD_LIMIT);
    assert_int_equal(utls_streamq_push(q, 7, 0, big, 1, NULL, UTLS_SQ_HOLD), UTLS_SQ_HELD_LIMIT);
    assert_int_equal(utls_streamq_num_held(q), UTLS_STREAMQ_MAX_HELD_MESSAGES);
    assert_int_equal(utls_streamq_bytes_held(q), UTLS_STREAMQ_MAX_HELD_MESSAGES);
    /* Filling one gap makes 8 deliverable. */
    assert_int_equal(utls_streamq_push(q, 7, 0, big, 1, NULL, 0), UTLS_SQ_DELIVERABLE);
    utls_streamq_advance(q, 7);
    for (i = 1; i <= 8; i++) {
        assert_true(utls_streamq_peek(q, &m));
        assert_int_equal(m.stream_id, 7);
        assert_int_equal(m.seq, i);
        assert_int_equal(m.len, 1);
        utls_streamq_pop(q);
    }
    assert_false(utls_streamq_peek(q, &m));
    assert_int_equal(utls_streamq_next_seq(q, 7), 9);
    assert_int_equal(utls_streamq_num_held(q), UTLS_STREAMQ_MAX_HELD_MESSAGES - 8);
    utls_streamq_free(q);

    /* One stream alone reaches the total message cap (it lies within
     * UTLS_STREAMQ_MAX_AHEAD). */
    q = utls_streamq_new();
    assert_non_null(q);
    for (i = 0; i < UTLS_STREAMQ_MAX_HELD_MESSAGES; i++) {
        assert_int_equal(utls_streamq_push(q, 3, 1 + i, NULL, 0, NULL, 0), UTLS_SQ_OK);
    }
    assert_int_equal(utls_streamq_push(q, 3, 1 + i, NULL, 0, NULL, 0), UTLS_SQ_HELD_LIMIT);
    assert_int_equal(utls_streamq_push(q, 4, 1, NULL, 0, NULL, 0), UTLS_SQ_HELD_LIMIT);
    utls_streamq_free(q);

    /* Held bytes, one stream: full records up to one record below the cap;
     * a message one byte longer than the room left is refused although the
     * message count has room, one that fits exactly is held. */
    q = utls_streamq_new();
    assert_non_null(q);
    for (i = 0; i < UTLS_STREAMQ_MAX_HELD_MESSAGES - 1; i++) {
        assert_int_equal(utls_streamq_push(q, 0, 1 + i, big, rec, NULL, 0), UTLS_SQ_OK);
    }
    assert_int_equal(utls_streamq_bytes_held(q), UTLS_STREAMQ_MAX_HELD_BYTES - rec);
    assert_int_equal(utls_streamq_push(q, 1, 1, big, rec + 1, NULL, 0), UTLS_SQ_HELD_LIMIT);
    assert_int_equal(utls_streamq_num_held(q), UTLS_STREAMQ_MAX_HELD_MESSAGES - 1);
    assert_int_equal(utls_streamq_bytes_held(q), UTLS_STREAMQ_MAX_HELD_BYTES - rec);
    assert_int_equal(utls_streamq_push(q, 1, 1, big, rec, NULL, 0), UTLS_SQ_OK);
    assert_int_equal(utls_streamq_bytes_held(q), UTLS_STREAMQ_MAX_HELD_BYTES);
    /* Now both caps are reached: even an empty message is refused. */
    assert_int_equal(utls_streamq_push(q, 1, 2, NULL, 0, NULL, 0), UTLS_SQ_HELD_LIMIT);
    utls_streamq_free(q);
}

/* Out of memory while holding: UTLS_SQ_NOMEM and nothing changed; the same
 * push succeeds once memory is back. */
static void test_streamq_nomem(void **state)
{
    utls_streamq *q;
    utls_sq_msg m;

    (void)state;
    g_alloc_budget = 0;
    assert_null(utls_streamq_new());
    g_alloc_budget = -1;
    q = utls_streamq_new();
    assert_non_null(q);
    /* The first held message allocates the stream's array, then the copy:
     * fail each in turn. */
    for (long budget = 0; budget < 2; budget++) {
        g_alloc_budget = budget;
        assert_int_equal(push_str(q, 2, 1, "data"), UTLS_SQ_NOMEM);
        g_alloc_budget = -1;
        assert_int_equal(utls_streamq_num_held(q), 0);
        assert_int_equal(utls_streamq_bytes_held(q), 0);
    }
    assert_int_equal(push_str(q, 2, 1, "data"), UTLS_SQ_OK);
    deliver(q, 2, 0, "x");
    assert_true(utls_streamq_peek(q, &m));
    expect_pop(q, 2, 1, "data");
    utls_streamq_free(q);
}

/* xorshift64*: a fixed, portable sequence for the property test. */
static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

#define PROP_STREAMS 8
#define PROP_PER_STREAM 200
#define PROP_TOTAL (PROP_STREAMS * PROP_PER_STREAM)

/*
 * Seeded random runs: messages of 8 streams interleaved into records, the
 * records arriving shuffled (some records several times), every message
 * returned exactly once, in its stream's order, with its own payload and
 * record.
 */
static void test_streamq_property_shuffled(void **state)
{
    static struct {
        uint32_t id;
        uint64_t seq;
    } sent[PROP_TOTAL];
    static size_t order[PROP_TOTAL];
    static int got[PROP_TOTAL];

    (void)state;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        uint64_t rs = seed * UINT64_C(0x9e3779b97f4a7c15), next[PROP_STREAMS] = {0};
        utls_streamq *q = utls_streamq_new();
        size_t returned = 0;
        utls_sq_msg m;

        assert_non_null(q);
        memset(got, 0, sizeof(got));
        for (size_t i = 0; i < PROP_TOTAL; i++) {
            uint32_t id = (uint32_t)(next_rand(&rs) % PROP_STREAMS);

            sent[i].id = id;
            sent[i].seq = next[id]++;
            order[i] = i;
        }
        /* Local shuffles (a record swapped up to 63 places on, perhaps again
         * later): 1600 messages, 200 per stream, never reach the caps. */
        for (size_t i = 0; i + 1 < PROP_TOTAL; i++) {
            size_t j = i + (size_t)(next_rand(&rs) % 64), t;

            if (j >= PROP_TOTAL) {
                j = PROP_TOTAL - 1;
            }
            t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        memset(next, 0, sizeof(next));
        for (size_t k = 0; k < PROP_TOTAL; k++) {
            int copies = next_rand(&rs) % 8 == 0 ? 2 : 1;
            size_t i = order[k];
            utls_streamq_record r = rec_at(0, i);
            uint8_t payload[sizeof(size_t)];

            memcpy(payload, &i, sizeof(i));
            for (int c = 0; c < copies; c++) {
                utls_sq_status st = utls_streamq_push(q, sent[i].id, sent[i].seq, payload,
                                                      sizeof(payload), &r, 0);

                if (c > 0) {
                    assert_int_equal(st, UTLS_SQ_DUPLICATE);
                    continue;
                }
                if (st == UTLS_SQ_DELIVERABLE) {
                    assert_int_equal(sent[i].seq, next[sent[i].id]);
                    next[sent[i].id]++;
                    got[i]++;
                    returned++;
                    utls_streamq_advance(q, sent[i].id);
                } else {
                    assert_int_equal(st, UTLS_SQ_OK);
                }
            }
            while (utls_streamq_peek(q, &m)) {
                size_t from;

                assert_int_equal(m.len, sizeof(from));
                memcpy(&from, m.data, sizeof(from));
                assert_true(from < PROP_TOTAL);
                assert_int_equal(m.stream_id, sent[from].id);
                assert_int_equal(m.seq, sent[from].seq);
                assert_int_equal(m.seq, next[m.stream_id]);
                assert_int_equal(m.record.seq, from);
                next[m.stream_id]++;
                got[from]++;
                returned++;
                utls_streamq_pop(q);
            }
        }
        assert_int_equal(returned, PROP_TOTAL);
        for (size_t i = 0; i < PROP_TOTAL; i++) {
            assert_int_equal(got[i], 1);
        }
        assert_int_equal(utls_streamq_num_held(q), 0);
        assert_int_equal(utls_streamq_bytes_held(q), 0);
        utls_streamq_free(q);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_streamq_header_format),
        cmocka_unit_test(test_streamq_header_round_trip),
        cmocka_unit_test(test_streamq_header_refuses),
        QUEUE_TEST(test_streamq_in_order),
        QUEUE_TEST(test_streamq_reordered),
        QUEUE_TEST(test_streamq_duplicate),
        QUEUE_TEST(test_streamq_streams_independent),
        QUEUE_TEST(test_streamq_in_order_gap),
        cmocka_unit_test(test_streamq_check_inorder),
        QUEUE_TEST(test_streamq_hold_flag),
        QUEUE_TEST(test_streamq_too_far_ahead),
        QUEUE_TEST(test_streamq_bad_arguments),
        cmocka_unit_test(test_streamq_held_limits),
        cmocka_unit_test(test_streamq_nomem),
        cmocka_unit_test(test_streamq_property_shuffled),
    };
    return cmocka_run_group_tests_name("streamq", tests, NULL, NULL);
}
