/*
 * Sub-streams over uTLS records (docs/substreams.md), in process: a TLS 1.3
 * client writes with UTLS_stream_write() (or, as a raw sender, crafts the
 * plaintext itself with SSL_write()), its records are captured one by one and
 * pushed into the server's segment BIO in whatever order a test wants, or
 * through the lossy segment network (lossy.c). Every test checks that each
 * stream's messages are returned exactly once, intact, and in that stream's
 * own order.
 *
 * Groups (argv[1]): api, reorder, lossy, malformed, limits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/utls.h>

#include "lossy.h"
#include "uharness.h"
#include "streams/utls_streamq.h" /* the reorder buffer itself, for its limits */

#define NUM_STREAMS 4
#define MAX_RECORDS 4096

typedef struct {
    uh_seg_pair tls; /* client, server, segment BIO, next offset */
    size_t num;
    uint8_t *wire[MAX_RECORDS];
    size_t wire_len[MAX_RECORDS];
    uint64_t wire_off[MAX_RECORDS];
} pair;

static void pair_new(pair *p, uint64_t server_mode, int client_streams, int server_streams)
{
    memset(p, 0, sizeof(*p));
    assert_true(uh_seg_pair_new(&p->tls, uh_key, uh_cert, server_mode));
    if (client_streams)
        assert_int_equal(UTLS_stream_enable(p->tls.c, 1), 1);
    if (server_streams)
        assert_int_equal(UTLS_stream_enable(p->tls.s, 1), 1);
}

static void pair_free(pair *p)
{
    for (size_t r = 0; r < p->num; r++)
        free(p->wire[r]);
    uh_seg_pair_free(&p->tls);
}

/* Takes what the client wrote as record |p->num| (one write = one record). */
static size_t capture(pair *p)
{
    int n = (int)BIO_pending(p->tls.c_out);

    assert_true(n > 0 && p->num < MAX_RECORDS);
    p->wire[p->num] = malloc((size_t)n);
    assert_int_equal(BIO_read(p->tls.c_out, p->wire[p->num], n), n);
    p->wire_len[p->num] = (size_t)n;
    p->wire_off[p->num] = p->tls.base;
    p->tls.base += (uint64_t)n;
    return p->num++;
}

static size_t write_raw(pair *p, const void *pt, size_t len)
{
    size_t w;

    assert_true(SSL_write_ex(p->tls.c, pt, len, &w));
    return capture(p);
}

static void push(pair *p, size_t r)
{
    assert_true(UTLS_BIO_segment_push(p->tls.seg, p->wire_off[r], p->wire[r], p->wire_len[r]));
}

/* A message's bytes are a function of (stream, seq), so that a receiver
 * checks identity and integrity from them. Lengths vary with both. */
static size_t msg_len(uint32_t id, uint64_t seq)
{
    return 1 + (size_t)((id * 977 + seq * 131) % 1500);
}

static void msg_fill(uint8_t *out, uint32_t id, uint64_t seq)
{
    size_t len = msg_len(id, seq);

    for (size_t i = 0; i < len; i++)
        out[i] = (uint8_t)(id * 31 + seq * 7 + i * 13 + 5);
}

static size_t write_msg(pair *p, uint32_t id, uint64_t seq)
{
    uint8_t m[2000];

    msg_fill(m, id, seq);
    assert_int_equal(UTLS_stream_write(p->tls.c, id, m, msg_len(id, seq)), 1);
    return capture(p);
}

/* The receiver's ledger: per stream the next sequence number it must see. */
typedef struct {
    uint64_t next[UTLS_STREAM_MAX_STREAMS];
    uint64_t total;
    uint64_t held;
    uint64_t ooo_records;
} ledger;

/* Reads until WANT_READ; every message must be its stream's next, intact.
 * Returns the number of messages read. */
static size_t read_ready(pair *p, ledger *lg)
{
    uint8_t buf[SSL3_RT_MAX_PLAIN_LENGTH];
    uint8_t want[2000];
    size_t n, got = 0;
    UTLS_STREAM_INFO info;

    for (;;) {
        ERR_clear_error();
        if (!UTLS_stream_read(p->tls.s, buf, sizeof(buf), &n, &info)) {
            int e = SSL_get_error(p->tls.s, 0);

            if (e != SSL_ERROR_WANT_READ) {
                uh_errors_to_stderr("stream read");
                fail_msg("UTLS_stream_read failed: SSL_get_error %d", e);
            }
            return got;
        }
        assert_true(info.stream_id < UTLS_STREAM_MAX_STREAMS);
        if (info.seq != lg->next[info.stream_id])
            fail_msg("stream %u: got seq %llu, expected %llu", info.stream_id,
                     (unsigned long long)info.seq,
                     (unsigned long long)lg->next[info.stream_id]);
        assert_int_equal(n, msg_len(info.stream_id, info.seq));
        msg_fill(want, info.stream_id, info.seq);
        assert_memory_equal(buf, want, n);
        lg->next[info.stream_id]++;
        lg->total++;
        lg->held += info.held != 0;
        lg->ooo_records += info.record.out_of_order != 0;
        got++;
    }
}

static void expect_error(pair *p, int reason)
{
    uint8_t buf[SSL3_RT_MAX_PLAIN_LENGTH];
    size_t n = 12345;
    unsigned long e;

    ERR_clear_error();
    assert_false(UTLS_stream_read(p->tls.s, buf, sizeof(buf), &n, NULL));
    assert_int_equal(n, 0);
    e = ERR_peek_last_error();
    if (ERR_GET_LIB(e) != UTLS_get_lib() || ERR_GET_REASON(e) != reason) {
        uh_errors_to_stderr("expected error");
        fail_msg("expected uTLS reason %d, got lib %d reason %d", reason, ERR_GET_LIB(e),
                 ERR_GET_REASON(e));
    }
    ERR_clear_error();
}

/* --- api ----------------------------------------------------------------- */

static void test_streams_api_off_by_default(void **state)
{
    pair p;
    uint8_t buf[64];
    size_t n;
    UTLS_STREAM_STATS stats;

    (void)state;
    pair_new(&p, SSL_MODE_UNORDERED, 0, 0);
    ERR_clear_error();
    assert_false(UTLS_stream_write(p.tls.c, 0, "x", 1));
    assert_int_equal(ERR_GET_REASON(ERR_peek_last_error()), UTLS_R_STREAM_NOT_ENABLED);
    assert_false(UTLS_stream_read(p.tls.s, buf, sizeof(buf), &n, NULL));
    assert_int_equal(ERR_GET_REASON(ERR_peek_last_error()), UTLS_R_STREAM_NOT_ENABLED);
    assert_false(UTLS_stream_get_stats(p.tls.s, &stats));
    ERR_clear_error();
    assert_int_equal(UTLS_stream_enable(p.tls.c, 1), 1);
    assert_false(UTLS_stream_write(p.tls.c, UTLS_STREAM_MAX_STREAMS, "x", 1));
    assert_int_equal(ERR_GET_REASON(ERR_peek_last_error()), UTLS_R_STREAM_BAD_ID);
    ERR_clear_error();
    /* One record's payload minus the largest header; one byte more fails and
     * writes nothing. */
    assert_int_equal(UTLS_stream_max_message(p.tls.c), 16384 - UTLS_STREAM_MAX_HEADER);
    {
        size_t max = UTLS_stream_max_message(p.tls.c);
        uint8_t *big = calloc(1, max + 1);

        assert_false(UTLS_stream_write(p.tls.c, 0, big, max + 1));
        assert_int_equal(ERR_GET_REASON(ERR_peek_last_error()), UTLS_R_STREAM_MESSAGE_TOO_LARGE);
        assert_int_equal(BIO_pending(p.tls.c_out), 0);
        ERR_clear_error();
        assert_true(UTLS_stream_write(p.tls.c, 3, big, max));
        free(big);
    }
    capture(&p);
    /* A receiver that did not enable sub-streams sees the header as data. */
    push(&p, 0);
    {
        uint8_t rec[SSL3_RT_MAX_PLAIN_LENGTH];

        assert_true(SSL_read_ex(p.tls.s, rec, sizeof(rec), &n));
        assert_int_equal(n, UTLS_stream_max_message(p.tls.c) + 3); /* 3-byte header */
        assert_int_equal(rec[0], 0x01); /* format 1 */
        assert_int_equal(rec[1], 3);    /* stream 3 */
        assert_int_equal(rec[2], 0);    /* seq 0 */
    }
    assert_int_equal(UTLS_stream_enable(p.tls.c, 0), 1);
    assert_false(UTLS_stream_write(p.tls.c, 0, "x", 1));
    ERR_clear_error();
    pair_free(&p);
}

/* Header bytes for a few (id, seq) pairs: the documented format. */
static void test_streams_api_header_format(void **state)
{
    uint8_t h[UTLS_STREAM_MAX_HEADER];
    uint32_t id;
    uint64_t seq;
    size_t hl;

    (void)state;
    assert_int_equal(utls_streamq_header_encode(h, 0, 0), 3);
    assert_memory_equal(h, "\x01\x00\x00", 3);
    assert_int_equal(utls_streamq_header_encode(h, 200, 300), 5);
    assert_memory_equal(h, "\x01\xc8\x01\xac\x02", 5);
    assert_int_equal(utls_streamq_header_encode(h, 255, UTLS_STREAM_MAX_SEQ),
                     UTLS_STREAM_MAX_HEADER);
    assert_int_equal(utls_streamq_header_decode(h, UTLS_STREAM_MAX_HEADER, &id, &seq, &hl),
                     UTLS_SQ_OK);
    assert_int_equal(id, 255);
    assert_true(seq == UTLS_STREAM_MAX_SEQ);
    assert_int_equal(hl, UTLS_STREAM_MAX_HEADER);
    assert_int_equal(utls_streamq_header_encode(h, 256, 0), 0);
    assert_int_equal(utls_streamq_header_encode(h, 0, UTLS_STREAM_MAX_SEQ + 1), 0);
    /* Every truncation of a valid header is refused as truncated. */
    utls_streamq_header_encode(h, 200, 1u << 20);
    for (size_t cut = 0; cut < 6; cut++)
        assert_int_equal(utls_streamq_header_decode(h, cut, &id, &seq, &hl), UTLS_SQ_TRUNCATED);
}

/* SSL_MODE_UNORDERED off: every record in order; streams still work. */
static void test_streams_api_mode_off(void **state)
{
    pair p;
    ledger lg;

    (void)state;
    memset(&lg, 0, sizeof(lg));
    pair_new(&p, 0, 1, 1);
    for (uint64_t seq = 0; seq < 20; seq++)
        for (uint32_t id = 0; id < NUM_STREAMS; id++)
            write_msg(&p, id, seq);
    for (size_t r = 0; r < p.num; r++)
        push(&p, r);
    assert_int_equal(read_ready(&p, &lg), 80);
    assert_int_equal(lg.held, 0);
    pair_free(&p);
}

/* A buffer too small for the next message consumes nothing. */
static void test_streams_api_small_buffer(void **state)
{
    pair p;
    uint8_t buf[2000], want[2000];
    size_t n;
    UTLS_STREAM_INFO info;
    ledger lg;

    (void)state;
    memset(&lg, 0, sizeof(lg));
    pair_new(&p, SSL_MODE_UNORDERED, 1, 1);
    write_msg(&p, 1, 0); /* 978 bytes */
    write_msg(&p, 1, 1);
    push(&p, 0);
    push(&p, 1);
    ERR_clear_error();
    assert_false(UTLS_stream_read(p.tls.s, buf, 100, &n, &info));
    assert_int_equal(ERR_GET_REASON(ERR_peek_last_error()), UTLS_R_BUFFER_TOO_SMALL);
    assert_false(UTLS_stream_read(p.tls.s, buf, 100, &n, &info));
    assert_int_equal(ERR_GET_REASON(ERR_peek_last_error()), UTLS_R_BUFFER_TOO_SMALL);
    ERR_clear_error();
    /* A buffer that fits (but smaller than a record) gets it. */
    assert_true(UTLS_stream_read(p.tls.s, buf, msg_len(1, 0), &n, &info));
    assert_int_equal(info.seq, 0);
    msg_fill(want, 1, 0);
    assert_memory_equal(buf, want, n);
    lg.next[1] = 1;
    assert_int_equal(read_ready(&p, &lg), 1);
    pair_free(&p);
}

/* --- reorder ------------------------------------------------------------- */

/*
 * Stream A's first record is lost; stream B's messages that were written
 * after it arrive and are returned at once, while A's later message waits.
 */
static void test_streams_reorder_other_stream_not_blocked(void **state)
{
    pair p;
    ledger lg;
    size_t a0, b0, a1, b1, b2;
    UTLS_STREAM_STATS stats;

    (void)state;
    memset(&lg, 0, sizeof(lg));
    pair_new(&p, SSL_MODE_UNORDERED, 1, 1);
    a0 = write_msg(&p, 0, 0);
    b0 = write_msg(&p, 1, 0);
    a1 = write_msg(&p, 0, 1);
    b1 = write_msg(&p, 1, 1);
    b2 = write_msg(&p, 1, 2);
    push(&p, b0);
    push(&p, a1);
    push(&p, b1);
    push(&p, b2);
    /* The hole (a0) is still missing: B is complete, A1 waits. */
    assert_int_equal(read_ready(&p, &lg), 3);
    assert_int_equal(lg.next[1], 3);
    assert_int_equal(lg.next[0], 0);
    assert_int_equal(UTLS_stream_get_stats(p.tls.s, &stats), 1);
    assert_int_equal(stats.held_now, 1);
    assert_true(stats.held_bytes_now == msg_len(0, 1));
    push(&p, a0);
    assert_int_equal(read_ready(&p, &lg), 2);
    assert_int_equal(lg.next[0], 2);
    assert_int_equal(lg.held, 1); /* A1 waited */
    assert_int_equal(UTLS_stream_get_stats(p.tls.s, &stats), 1);
    assert_int_equal(stats.held_now, 0);
    assert_int_equal(stats.messages_received, 5);
    pair_free(&p);
}

/*
 * 4 streams interleaved, 400 records; pushed in seeded random orders, with
 * every record also pushed a second time somewhere later (duplicates), and
 * with overlapping partial segments. After everything arrived, every message
 * of every stream was returned exactly once, in its stream's order.
 */
static void test_streams_reorder_shuffled(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        pair p;
        ledger lg;
        lossy_rng rng;
        size_t order[2 * 400], num = 0;
        uint64_t seqs[NUM_STREAMS] = {0};

        memset(&lg, 0, sizeof(lg));
        lossy_rng_seed(&rng, seed);
        pair_new(&p, SSL_MODE_UNORDERED, 1, 1);
        for (size_t i = 0; i < 400; i++) {
            uint32_t id = (uint32_t)lossy_rng_below(&rng, NUM_STREAMS);

            write_msg(&p, id, seqs[id]++);
        }
        for (size_t i = 0; i < p.num; i++) {
            order[num++] = i;
            order[num++] = i;
        }
        /* Local shuffle: each push moves up to 40 places (a window of
         * reordering, as on a network). */
        for (size_t i = 0; i < num; i++) {
            size_t j = i + (size_t)lossy_rng_below(&rng, 40);

            if (j < num) {
                size_t t = order[i];

                order[i] = order[j];
                order[j] = t;
            }
        }
        for (size_t i = 0; i < num; i++) {
            size_t r = order[i];

            if (lossy_rng_below(&rng, 4) == 0 && p.wire_len[r] > 20) {
                /* in two overlapping pieces */
                size_t cut = 10 + (size_t)lossy_rng_below(&rng, p.wire_len[r] - 20);

                assert_true(UTLS_BIO_segment_push(p.tls.seg, p.wire_off[r] + cut, p.wire[r] + cut,
                                                  p.wire_len[r] - cut));
                assert_true(UTLS_BIO_segment_push(p.tls.seg, p.wire_off[r], p.wire[r], cut + 5));
            } else {
                push(&p, r);
            }
            read_ready(&p, &lg);
        }
        read_ready(&p, &lg);
        for (uint32_t id = 0; id < NUM_STREAMS; id++)
            assert_int_equal(lg.next[id], seqs[id]);
        assert_int_equal(lg.total, 400);
        assert_true(lg.ooo_records > 0);
        assert_true(lg.held > 0);
        pair_free(&p);
    }
}

/*
 * A TLS 1.3 KeyUpdate between the messages, with a hole before it: records
 * under the next key arrive first, their messages wait or pass by their own
 * streams' order, and no gap is reported when the in-order path crosses the
 * key change (ranks compare the key generation first).
 */
static void test_streams_reorder_key_update(void **state)
{
    pair p;
    ledger lg;
    size_t a0, b0, ku, a1, b1, a2;

    (void)state;
    memset(&lg, 0, sizeof(lg));
    pair_new(&p, SSL_MODE_UNORDERED, 1, 1);
    a0 = write_msg(&p, 0, 0);
    b0 = write_msg(&p, 1, 0);
    assert_true(SSL_key_update(p.tls.c, SSL_KEY_UPDATE_NOT_REQUESTED));
    a1 = write_msg(&p, 0, 1); /* the KeyUpdate goes out with this write */
    b1 = write_msg(&p, 1, 1);
    a2 = write_msg(&p, 0, 2);
    (void)ku;
    push(&p, b0);
    push(&p, b1);
    push(&p, a2);
    push(&p, a1);
    read_ready(&p, &lg);
    assert_int_equal(lg.next[0], 0); /* stream 0 waits for a0 */
    push(&p, a0);
    read_ready(&p, &lg);
    assert_int_equal(lg.next[0], 3);
    assert_int_equal(lg.next[1], 2);
    pair_free(&p);
}

/* Turning the layer off while messages wait is refused. */
static void test_streams_reorder_disable_while_held(void **state)
{
    pair p;
    ledger lg;
    size_t a0;

    (void)state;
    memset(&lg, 0, sizeof(lg));
    pair_new(&p, SSL_MODE_UNORDERED, 1, 1);
    a0 = write_msg(&p, 0, 0);
    push(&p, write_msg(&p, 0, 1));
    assert_int_equal(read_ready(&p, &lg), 0);
    ERR_clear_error();
    assert_int_equal(UTLS_stream_enable(p.tls.s, 0), 0);
    assert_int_equal(ERR_GET_REASON(ERR_peek_last_error()), UTLS_R_STREAM_BUSY);
    ERR_clear_error();
    push(&p, a0);
    assert_int_equal(read_ready(&p, &lg), 2);
    assert_int_equal(UTLS_stream_enable(p.tls.s, 0), 1);
    pair_free(&p);
}

/*
 * A non-blocking write that cannot complete keeps the message's number: the
 * same call repeated later sends it, another message first is refused, and
 * the receiver sees no gap.
 */
static void test_streams_api_write_retry(void **state)
{
    pair p;
    ledger lg;
    BIO *bc, *bn;
    uint8_t m[2000], junk[4096];
    int n;

    (void)state;
    memset(&lg, 0, sizeof(lg));
    pair_new(&p, SSL_MODE_UNORDERED, 1, 1);
    /* The client now writes into a BIO pair with room for 200 bytes. */
    assert_true(BIO_new_bio_pair(&bc, 200, &bn, 0));
    BIO_up_ref(p.tls.c_out); /* SSL_set0_wbio() frees the BIO it replaces */
    SSL_set0_wbio(p.tls.c, bc);
    msg_fill(m, 2, 0);
    ERR_clear_error();
    assert_int_equal(UTLS_stream_write(p.tls.c, 2, m, msg_len(2, 0)), 0);
    assert_int_equal(SSL_get_error(p.tls.c, 0), SSL_ERROR_WANT_WRITE);
    /* Something else first: refused, nothing written or numbered. */
    assert_int_equal(UTLS_stream_write(p.tls.c, 3, m, 10), 0);
    assert_int_equal(ERR_GET_REASON(ERR_peek_last_error()), UTLS_R_STREAM_BUSY);
    ERR_clear_error();
    /* Drain and repeat until it goes through. */
    {
        uint8_t *wire = NULL;
        size_t wire_len = 0;
        int done = 0;

        for (int i = 0; i < 100 && !done; i++) {
            while ((n = BIO_read(bn, junk, sizeof(junk))) > 0) {
                wire = realloc(wire, wire_len + (size_t)n);
                memcpy(wire + wire_len, junk, (size_t)n);
                wire_len += (size_t)n;
            }
            done = UTLS_stream_write(p.tls.c, 2, m, msg_len(2, 0));
        }
        assert_true(done);
        while ((n = BIO_read(bn, junk, sizeof(junk))) > 0) {
            wire = realloc(wire, wire_len + (size_t)n);
            memcpy(wire + wire_len, junk, (size_t)n);
            wire_len += (size_t)n;
        }
        assert_true(UTLS_BIO_segment_push(p.tls.seg, p.tls.base, wire, wire_len));
        p.tls.base += wire_len;
        free(wire);
    }
    /* The next message of stream 2 is number 1. */
    SSL_set0_wbio(p.tls.c, p.tls.c_out); /* frees bc */
    push(&p, write_msg(&p, 2, 1));
    assert_int_equal(read_ready(&p, &lg), 2);
    assert_int_equal(lg.next[2], 2);
    BIO_free(bn);
    pair_free(&p);
}

/* Moves what the server wrote to the client, and lets the client read it
 * (tickets, negotiation messages): there is no application data. */
static void server_to_client(pair *p)
{
    uint8_t buf[65536], tmp[64];
    size_t k;

    while ((k = UTLS_BIO_segment_take_output(p->tls.seg, buf, sizeof(buf))) > 0)
        BIO_write(p->tls.c_in, buf, (int)k);
    assert_int_equal(SSL_read(p->tls.c, tmp, sizeof(tmp)), -1);
    assert_int_equal(SSL_get_error(p->tls.c, -1), SSL_ERROR_WANT_READ);
}

/*
 * With explicit record numbers negotiated (docs/ern.md), the record number
 * comes off before the sub-stream header is parsed, and the largest message
 * shrinks by its 8 bytes. Streams still pass each other's holes.
 */
static void test_streams_reorder_with_ern(void **state)
{
    pair p;
    ledger lg;
    UTLS_STATS st;
    size_t first, num;
    uint64_t seqs[NUM_STREAMS] = {0};
    size_t n;

    (void)state;
    memset(&lg, 0, sizeof(lg));
    /* pair_new with tickets (the offer travels in them) and negotiation. */
    memset(&p, 0, sizeof(p));
    assert_true(uh_pair_contexts(&p.tls, uh_key, uh_cert, &(uh_pair_opts){.tls13_tickets = 2}));
    p.tls.seg = BIO_new(UTLS_BIO_s_segment());
    SSL_set_bio(p.tls.c, p.tls.c_in, p.tls.c_out);
    SSL_set_bio(p.tls.s, p.tls.seg, p.tls.seg);
    SSL_set_mode(p.tls.s, SSL_MODE_UNORDERED | SSL_MODE_UTLS_NEGOTIATE);
    SSL_set_mode(p.tls.c, SSL_MODE_UTLS_NEGOTIATE);
    SSL_set_connect_state(p.tls.c);
    SSL_set_accept_state(p.tls.s);
    for (int i = 0; i < 10; i++) {
        uint8_t buf[65536];
        int k;

        SSL_do_handshake(p.tls.c);
        SSL_do_handshake(p.tls.s);
        while ((k = BIO_read(p.tls.c_out, buf, sizeof(buf))) > 0) {
            assert_true(UTLS_BIO_segment_push(p.tls.seg, p.tls.base, buf, (size_t)k));
            p.tls.base += (uint64_t)k;
        }
        while ((n = UTLS_BIO_segment_take_output(p.tls.seg, buf, sizeof(buf))) > 0)
            BIO_write(p.tls.c_in, buf, (int)n);
    }
    assert_true(SSL_is_init_finished(p.tls.s));
    server_to_client(&p); /* the offer, in the tickets */
    assert_int_equal(UTLS_stream_enable(p.tls.c, 1), 1);
    assert_int_equal(UTLS_stream_enable(p.tls.s, 1), 1);
    /* The client's accept goes out with its first message; the server
     * switches with a flush; then the client's records carry numbers. */
    push(&p, write_msg(&p, 0, seqs[0]++));
    assert_int_equal(read_ready(&p, &lg), 1);
    assert_int_equal(UTLS_ern_flush(p.tls.s), 1);
    server_to_client(&p);
    assert_true(UTLS_ern_status(p.tls.c) & UTLS_ERN_TX);
    assert_int_equal(UTLS_stream_max_message(p.tls.c), 16384 - 8 - UTLS_STREAM_MAX_HEADER);
    first = p.num;
    for (size_t i = 0; i < 80; i++) {
        uint32_t id = (uint32_t)(i % NUM_STREAMS);

        write_msg(&p, id, seqs[id]++);
    }
    num = p.num;
    /* Every 9th record is late (a hole each), the rest arrive at once. */
    for (size_t r = first; r < num; r++)
        if ((r - first) % 9 != 0)
            push(&p, r);
    read_ready(&p, &lg);
    assert_true(lg.ooo_records > 0);
    for (size_t r = first; r < num; r++)
        if ((r - first) % 9 == 0)
            push(&p, r);
    read_ready(&p, &lg);
    for (uint32_t id = 0; id < NUM_STREAMS; id++)
        assert_int_equal(lg.next[id], seqs[id]);
    assert_int_equal(UTLS_get_stats(p.tls.s, &st), 1);
    assert_true(st.ern_records_received > 0);
    assert_true(st.records_out_of_order > 0);
    pair_free(&p);
}

/* --- lossy --------------------------------------------------------------- */

typedef struct {
    pair *p;
    uint64_t base;
} lossy_ctx;

static int on_delivery(void *arg, lossy_delivery *d)
{
    lossy_ctx *lc = arg;

    return UTLS_BIO_segment_push(lc->p->tls.seg, lc->base + d->offset, d->data, d->len)
        ? LOSSY_CB_OK : LOSSY_CB_ABORT;
}

/*
 * 4 streams x 600 messages through the lossy network (2% and 5% loss,
 * reordering, duplicates, re-segmented retransmissions), read as segments
 * arrive. Asserts exactly once and per-stream order, and that streams did
 * overtake each other's losses: messages were returned while an earlier
 * message of another stream was missing.
 */
static void test_streams_lossy(void **state)
{
    static const double loss[] = {0.02, 0.05};

    (void)state;
    for (size_t li = 0; li < 2; li++) {
        pair p;
        ledger lg;
        lossy_params params;
        lossy_ctx lc;
        lossy_net *net;
        uint64_t seqs[NUM_STREAMS] = {0};
        uint64_t overtakes = 0;
        uint8_t m[2000];

        memset(&lg, 0, sizeof(lg));
        pair_new(&p, SSL_MODE_UNORDERED, 1, 1);
        lc.p = &p;
        lc.base = p.tls.base;
        lossy_params_default(&params, loss[li]);
        params.rtt = 30;
        net = lossy_new(&params, 100 + li, on_delivery, &lc);
        assert_non_null(net);
        for (size_t i = 0; i < 4 * 600; i++) {
            uint32_t id = (uint32_t)(i % NUM_STREAMS);
            size_t len = msg_len(id, seqs[id]);
            int n;
            uint64_t before[NUM_STREAMS];

            msg_fill(m, id, seqs[id]);
            assert_int_equal(UTLS_stream_write(p.tls.c, id, m, len), 1);
            seqs[id]++;
            while ((n = BIO_read(p.tls.c_out, m, sizeof(m))) > 0)
                assert_true(lossy_send(net, m, (size_t)n));
            memcpy(before, lg.next, sizeof(before));
            read_ready(&p, &lg);
            /* A stream advanced while another one had written messages
             * that were not yet returned. */
            for (uint32_t a = 0; a < NUM_STREAMS; a++)
                if (lg.next[a] > before[a])
                    for (uint32_t b = 0; b < NUM_STREAMS; b++)
                        if (b != a && lg.next[b] + 1 < seqs[b]) {
                            overtakes++;
                            break;
                        }
        }
        assert_true(lossy_finish(net));
        read_ready(&p, &lg);
        for (uint32_t id = 0; id < NUM_STREAMS; id++)
            assert_int_equal(lg.next[id], seqs[id]);
        assert_int_equal(lg.total, 4 * 600);
        print_message("loss %.0f%%: %llu messages, %llu from out-of-order records, %llu held, "
                      "%llu overtakes\n",
                      loss[li] * 100, (unsigned long long)lg.total,
                      (unsigned long long)lg.ooo_records, (unsigned long long)lg.held,
                      (unsigned long long)overtakes);
        assert_true(lg.ooo_records > 0);
        assert_true(lg.held > 0);
        assert_true(overtakes > 0);
        lossy_free(net);
        pair_free(&p);
    }
}

/* --- malformed: a raw sender crafts the plaintext ------------------------ */

typedef struct {
    const char *name;
    const char *pt;
    size_t len;
    int reason;
} bad_record;

static void test_streams_malformed_headers(void **state)
{
    static const bad_record bad[] = {
        {"format byte only", "\x01", 1, UTLS_R_STREAM_BAD_HEADER},
        {"no seq", "\x01\x05", 2, UTLS_R_STREAM_BAD_HEADER},
        {"unknown format", "\x02\x00\x00hello", 8, UTLS_R_STREAM_BAD_VERSION},
        {"legacy data", "GET / HTTP/1.1\r\n", 16, UTLS_R_STREAM_BAD_VERSION},
        {"stream id 256", "\x01\x80\x02\x00", 4, UTLS_R_STREAM_BAD_ID},
        {"stream id 3-byte varint", "\x01\x80\x80\x01\x00", 5, UTLS_R_STREAM_BAD_ID},
        {"non-minimal id", "\x01\x80\x00\x00", 4, UTLS_R_STREAM_BAD_HEADER},
        {"non-minimal seq", "\x01\x00\x81\x00", 4, UTLS_R_STREAM_BAD_HEADER},
        {"seq 2^56 (wraps)", "\x01\x00\x80\x80\x80\x80\x80\x80\x80\x80\x01", 11,
         UTLS_R_STREAM_BAD_SEQ},
        {"seq varint unterminated", "\x01\x00\xff\xff\xff", 5, UTLS_R_STREAM_BAD_HEADER},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pair p;
        ledger lg;
        size_t r;

        memset(&lg, 0, sizeof(lg));
        pair_new(&p, SSL_MODE_UNORDERED, 1, 1);
        write_msg(&p, 0, 0);
        r = write_raw(&p, bad[i].pt, bad[i].len);
        write_msg(&p, 0, 1);
        push(&p, 0);
        assert_int_equal(read_ready(&p, &lg), 1);
        push(&p, r);
        push(&p, r + 1);
        print_message("%s\n", bad[i].name);
        expect_error(&p, bad[i].reason);
        /* Failed for good: the valid message after it is never returned. */
        expect_error(&p, UTLS_R_STREAM_FAILED);
        pair_free(&p);
    }
}

/* The same sequence number twice (in order, and out of order). */
static void test_streams_malformed_duplicate(void **state)
{
    static const uint8_t s0[] = {0x01, 0x00, 0x00, 'a'};
    static const uint8_t s1[] = {0x01, 0x00, 0x01, 'b'};
    pair p;
    ledger lg;
    uint8_t buf[100];
    size_t n;

    (void)state;
    /* In order: seq 0, seq 0. */
    pair_new(&p, SSL_MODE_UNORDERED, 0, 1);
    write_raw(&p, s0, sizeof(s0));
    write_raw(&p, s0, sizeof(s0));
    push(&p, 0);
    push(&p, 1);
    assert_true(UTLS_stream_read(p.tls.s, buf, sizeof(buf), &n, NULL));
    assert_int_equal(n, 1);
    expect_error(&p, UTLS_R_STREAM_DUPLICATE);
    pair_free(&p);

    /* Out of order: hole, seq 1, seq 1 -> the second is refused. */
    memset(&lg, 0, sizeof(lg));
    pair_new(&p, SSL_MODE_UNORDERED, 0, 1);
    write_raw(&p, s0, sizeof(s0));
    write_raw(&p, s1, sizeof(s1));
    write_raw(&p, s1, sizeof(s1));
    push(&p, 1);
    push(&p, 2);
    expect_error(&p, UTLS_R_STREAM_DUPLICATE);
    pair_free(&p);
}

/* A peer that skips a sequence number: proved when the in-order path passes
 * the record the missing message would have had to be in. */
static void test_streams_malformed_gap(void **state)
{
    static const uint8_t a0[] = {0x01, 0x00, 0x00, 'a'};
    static const uint8_t b1[] = {0x01, 0x01, 0x01, 'b'}; /* stream 1 seq 1: seq 0 never sent */
    static const uint8_t a1[] = {0x01, 0x00, 0x01, 'c'};
    static const uint8_t a2[] = {0x01, 0x00, 0x02, 'd'};
    pair p;
    uint8_t buf[100];
    size_t n;
    UTLS_STREAM_INFO info;

    (void)state;
    pair_new(&p, SSL_MODE_UNORDERED, 0, 1);
    write_raw(&p, a0, sizeof(a0));
    write_raw(&p, b1, sizeof(b1));
    write_raw(&p, a1, sizeof(a1));
    write_raw(&p, a2, sizeof(a2));
    push(&p, 1); /* b1 past the hole: held */
    push(&p, 2); /* a1 past the hole: held */
    ERR_clear_error();
    assert_false(UTLS_stream_read(p.tls.s, buf, sizeof(buf), &n, NULL));
    assert_int_equal(SSL_get_error(p.tls.s, 0), SSL_ERROR_WANT_READ);
    push(&p, 0); /* a0 in order: returned, then a1 */
    assert_true(UTLS_stream_read(p.tls.s, buf, sizeof(buf), &n, &info));
    assert_true(info.stream_id == 0 && info.seq == 0 && buf[0] == 'a');
    assert_true(UTLS_stream_read(p.tls.s, buf, sizeof(buf), &n, &info));
    assert_true(info.stream_id == 0 && info.seq == 1 && buf[0] == 'c' && info.held);
    push(&p, 3); /* a2 in order, past b1's record: b1's seq 0 can never come */
    expect_error(&p, UTLS_R_STREAM_GAP);
    expect_error(&p, UTLS_R_STREAM_FAILED);
    pair_free(&p);

    /* With the mode off, an in-order message that is not its stream's next
     * is a gap at once. */
    pair_new(&p, 0, 0, 1);
    write_raw(&p, a0, sizeof(a0));
    write_raw(&p, a2, sizeof(a2));
    push(&p, 0);
    push(&p, 1);
    assert_true(UTLS_stream_read(p.tls.s, buf, sizeof(buf), &n, NULL));
    expect_error(&p, UTLS_R_STREAM_GAP);
    pair_free(&p);
}

/* --- limits -------------------------------------------------------------- */

/* A message far ahead of its stream's gap is refused at once. */
static void test_streams_limits_too_far_ahead(void **state)
{
    uint8_t far[16];
    size_t hl;
    pair p;

    (void)state;
    pair_new(&p, SSL_MODE_UNORDERED, 0, 1);
    hl = utls_streamq_header_encode(far, 0, 0);
    far[hl] = 'x';
    write_raw(&p, far, hl + 1); /* the hole */
    hl = utls_streamq_header_encode(far, 0, UTLS_STREAMQ_MAX_AHEAD + 1);
    far[hl] = 'y';
    write_raw(&p, far, hl + 1);
    push(&p, 1);
    expect_error(&p, UTLS_R_STREAM_LIMIT);
    pair_free(&p);
}

/*
 * An honest sender with many messages behind one hole: the unordered path
 * delivers at most its own bound of records ahead, the rest come in order
 * once the hole is filled; the sub-stream layer never reaches its limits and
 * nothing is lost.
 */
static void test_streams_limits_many_behind_hole(void **state)
{
    pair p;
    ledger lg;
    UTLS_STREAM_STATS stats;
    uint64_t seqs[2] = {0};

    (void)state;
    memset(&lg, 0, sizeof(lg));
    pair_new(&p, SSL_MODE_UNORDERED, 1, 1);
    for (size_t i = 0; i < 2500; i++) {
        uint32_t id = i % 5 == 0 ? 1 : 0;

        write_msg(&p, id, seqs[id]++);
    }
    for (size_t r = 1; r < p.num; r++) {
        push(&p, r);
        if (r % 50 == 0)
            read_ready(&p, &lg);
    }
    read_ready(&p, &lg);
    assert_int_equal(UTLS_stream_get_stats(p.tls.s, &stats), 1);
    print_message("behind one hole: %llu returned, %zu held (max %zu)\n",
                  (unsigned long long)lg.total, stats.held_now, stats.max_held);
    assert_true(stats.max_held > 0);
    assert_true(stats.max_held <= UTLS_STREAMQ_MAX_HELD_MESSAGES);
    push(&p, 0);
    read_ready(&p, &lg);
    assert_int_equal(lg.next[0], seqs[0]);
    assert_int_equal(lg.next[1], seqs[1]);
    assert_int_equal(stats.failed_reason, 0);
    pair_free(&p);
}

/* The reorder buffer's own caps, driven directly (a peer cannot reach them
 * through the unordered path, which delivers fewer records ahead). */
static void test_streams_limits_reorder_buffer(void **state)
{
    utls_streamq *q = utls_streamq_new();
    static uint8_t big[16384];
    utls_sq_msg m;
    size_t i;

    (void)state;
    assert_non_null(q);
    /* Held message count: streams 0..255 each hold seq 1..8 (2048). */
    for (i = 0; i < UTLS_STREAMQ_MAX_HELD_MESSAGES; i++)
        assert_int_equal(utls_streamq_push(q, (uint32_t)(i % 256), 1 + i / 256, big, 1, NULL, 0),
                         UTLS_SQ_OK);
    assert_int_equal(utls_streamq_push(q, 7, 100, big, 1, NULL, 0), UTLS_SQ_HELD_LIMIT);
    /* Refused: nothing changed. Filling one gap makes 8 deliverable. */
    assert_int_equal(utls_streamq_num_held(q), UTLS_STREAMQ_MAX_HELD_MESSAGES);
    assert_int_equal(utls_streamq_push(q, 7, 0, big, 1, NULL, 0), UTLS_SQ_DELIVERABLE);
    utls_streamq_advance(q, 7);
    for (i = 1; i <= 8; i++) {
        assert_true(utls_streamq_peek(q, &m));
        assert_int_equal(m.stream_id, 7);
        assert_int_equal(m.seq, i);
        utls_streamq_pop(q);
    }
    assert_false(utls_streamq_peek(q, &m));
    assert_int_equal(utls_streamq_next_seq(q, 7), 9);
    utls_streamq_free(q);

    /* Held bytes: full records up to the byte cap. */
    q = utls_streamq_new();
    for (i = 0; i < UTLS_STREAMQ_MAX_HELD_BYTES / sizeof(big); i++)
        assert_int_equal(utls_streamq_push(q, 0, 1 + i, big, sizeof(big), NULL, 0), UTLS_SQ_OK);
    assert_int_equal(utls_streamq_bytes_held(q), UTLS_STREAMQ_MAX_HELD_BYTES);
    assert_int_equal(utls_streamq_push(q, 1, 1, big, 1, NULL, 0), UTLS_SQ_HELD_LIMIT);
    /* Duplicates and old numbers. */
    assert_int_equal(utls_streamq_push(q, 0, 5, big, 1, NULL, 0), UTLS_SQ_DUPLICATE);
    assert_int_equal(utls_streamq_push(q, 0, 0, big, 1, NULL, 0), UTLS_SQ_DELIVERABLE);
    utls_streamq_advance(q, 0);
    assert_int_equal(utls_streamq_push(q, 0, 0, big, 1, NULL, 0), UTLS_SQ_DUPLICATE);
    assert_int_equal(utls_streamq_push(q, 0, 1, big, 1, NULL, 0), UTLS_SQ_DUPLICATE);
    assert_int_equal(utls_streamq_push(q, 300, 0, big, 1, NULL, 0), UTLS_SQ_BAD_STREAM_ID);
    utls_streamq_free(q);
}

int main(int argc, char **argv)
{
    const char *group = argc > 1 ? argv[1] : "all";
    int all = strcmp(group, "all") == 0, ran = 0, rc = 0;

    if (all || strcmp(group, "api") == 0) {
        const struct CMUnitTest t[] = {
            cmocka_unit_test(test_streams_api_off_by_default),
            cmocka_unit_test(test_streams_api_header_format),
            cmocka_unit_test(test_streams_api_mode_off),
            cmocka_unit_test(test_streams_api_small_buffer),
            cmocka_unit_test(test_streams_api_write_retry),
        };
        rc |= cmocka_run_group_tests_name("streams.api", t,
                                          uh_identity_setup, uh_identity_teardown);
        ran = 1;
    }
    if (all || strcmp(group, "reorder") == 0) {
        const struct CMUnitTest t[] = {
            cmocka_unit_test(test_streams_reorder_other_stream_not_blocked),
            cmocka_unit_test(test_streams_reorder_shuffled),
            cmocka_unit_test(test_streams_reorder_key_update),
            cmocka_unit_test(test_streams_reorder_disable_while_held),
            cmocka_unit_test(test_streams_reorder_with_ern),
        };
        rc |= cmocka_run_group_tests_name("streams.reorder", t,
                                          uh_identity_setup, uh_identity_teardown);
        ran = 1;
    }
    if (all || strcmp(group, "lossy") == 0) {
        const struct CMUnitTest t[] = {
            cmocka_unit_test(test_streams_lossy),
        };
        rc |= cmocka_run_group_tests_name("streams.lossy", t,
                                          uh_identity_setup, uh_identity_teardown);
        ran = 1;
    }
    if (all || strcmp(group, "malformed") == 0) {
        const struct CMUnitTest t[] = {
            cmocka_unit_test(test_streams_malformed_headers),
            cmocka_unit_test(test_streams_malformed_duplicate),
            cmocka_unit_test(test_streams_malformed_gap),
        };
        rc |= cmocka_run_group_tests_name("streams.malformed", t,
                                          uh_identity_setup, uh_identity_teardown);
        ran = 1;
    }
    if (all || strcmp(group, "limits") == 0) {
        const struct CMUnitTest t[] = {
            cmocka_unit_test(test_streams_limits_too_far_ahead),
            cmocka_unit_test(test_streams_limits_many_behind_hole),
            cmocka_unit_test(test_streams_limits_reorder_buffer),
        };
        rc |= cmocka_run_group_tests_name("streams.limits", t,
                                          uh_identity_setup, uh_identity_teardown);
        ran = 1;
    }
    if (!ran) {
        fprintf(stderr, "unknown group %s\n", group);
        return 2;
    }
    return rc;
}
