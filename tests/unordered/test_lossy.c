/* test_lossy.c: the lossy segment network checks itself against an
 * independent reassembler (no TLS, no fork needed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lossy.h"

#define STREAM_MAX (4u << 20)

typedef struct receiver {
    uint8_t *bytes;
    uint8_t *have;
    uint64_t inorder;
    uint64_t hash;
    uint64_t deliveries;
    uint64_t refuse_beyond; /* refuse segments this far past inorder (0: never) */
    uint64_t refused;
    lossy_net *net;
    int check_truth;
} receiver;

static int on_delivery(void *arg, lossy_delivery *d)
{
    receiver *rx = arg;
    if (rx->refuse_beyond && d->offset + d->len > d->inorder_before + rx->refuse_beyond) {
        rx->refused++;
        return LOSSY_CB_RETRY;
    }
    assert_true(d->offset + d->len <= STREAM_MAX);
    assert_int_equal(d->inorder_before, rx->inorder);
    int hole = 0;
    for (uint64_t i = rx->inorder; i < STREAM_MAX && i < lossy_stream_len(rx->net); i++) {
        if (rx->have[i]) {
            hole = 1;
            break;
        }
    }
    assert_int_equal(d->hole_before, hole);
    for (size_t i = 0; i < d->len; i++) {
        uint64_t o = d->offset + i;
        if (!rx->have[o]) {
            rx->have[o] = 1;
            rx->bytes[o] = d->data[i];
        }
        rx->hash = (rx->hash ^ d->data[i] ^ (o << 8)) * 0x100000001b3ULL;
    }
    while (rx->have[rx->inorder]) {
        rx->inorder++;
    }
    assert_int_equal(d->inorder_after, rx->inorder);
    assert_int_equal(lossy_inorder(rx->net), rx->inorder);
    rx->deliveries++;
    if (rx->check_truth) {
        for (size_t r = 0; r < lossy_num_records(rx->net); r++) {
            lossy_record *rec = lossy_get_record(rx->net, r);
            int all = rec->offset + rec->wire_len <= lossy_stream_len(rx->net);
            for (uint64_t o = rec->offset; all && o < rec->offset + rec->wire_len; o++) {
                all = rx->have[o];
            }
            assert_int_equal(rec->complete_at != 0, all);
            if (rec->complete_at == d->index) {
                assert_int_equal(rec->after_hole, rx->inorder < rec->offset + rec->wire_len);
            }
        }
    }
    return LOSSY_CB_OK;
}

/* A stream of fake TLS records with lengths from |rng|. */
static size_t make_records(lossy_rng *rng, uint8_t *out, size_t max, size_t *out_count)
{
    size_t len = 0, n = 0;
    for (;;) {
        size_t body = (size_t)lossy_rng_range(rng, 20, 3000);
        if (len + 5 + body > max) {
            break;
        }
        out[len] = 23;
        out[len + 1] = 3;
        out[len + 2] = 3;
        out[len + 3] = (uint8_t)(body >> 8);
        out[len + 4] = (uint8_t)body;
        lossy_rng_bytes(rng, out + len + 5, body);
        len += 5 + body;
        n++;
    }
    *out_count = n;
    return len;
}

static uint64_t run(uint64_t seed, double loss, size_t stream_max, uint64_t refuse_beyond,
                    int check_truth, lossy_counters *out_counters)
{
    static uint8_t src[1 << 20];
    lossy_rng rng;
    lossy_rng_seed(&rng, seed ^ 0xabcdef);
    size_t nrec;
    size_t len = make_records(&rng, src, stream_max, &nrec);

    receiver rx = {0};
    rx.bytes = calloc(STREAM_MAX, 1);
    rx.have = calloc(STREAM_MAX + 1, 1);
    rx.refuse_beyond = refuse_beyond;
    rx.check_truth = check_truth;
    rx.hash = 0xcbf29ce484222325ULL;
    assert_non_null(rx.bytes);
    assert_non_null(rx.have);
    lossy_params p;
    lossy_params_default(&p, loss);
    p.p_dup = 0.02;
    lossy_net *net = lossy_new(&p, seed, on_delivery, &rx);
    assert_non_null(net);
    rx.net = net;
    /* The sender writes in uneven chunks that cut headers, flushing now and
     * then (an application-limited sender). */
    size_t pos = 0;
    while (pos < len) {
        size_t n = (size_t)lossy_rng_range(&rng, 1, 5000);
        if (n > len - pos) {
            n = len - pos;
        }
        assert_true(lossy_send(net, src + pos, n));
        pos += n;
        if (lossy_rng_unit(&rng) < 0.2) {
            assert_true(lossy_flush(net));
        }
    }
    assert_true(lossy_finish(net));
    assert_int_equal(lossy_pending(net), 0);
    assert_int_equal(rx.inorder, len);
    assert_memory_equal(rx.bytes, src, len);
    assert_int_equal(lossy_num_records(net), nrec);
    for (size_t r = 0; r < nrec; r++) {
        assert_true(lossy_get_record(net, r)->complete_at != 0);
        assert_non_null(lossy_find_record(net, lossy_get_record(net, r)->offset));
    }
    if (out_counters) {
        *out_counters = *lossy_get_counters(net);
    }
    lossy_free(net);
    free(rx.bytes);
    free(rx.have);
    return rx.hash;
}

static void test_lossy_lossless_in_order(void **state)
{
    (void)state;
    lossy_counters c;
    run(1, 0.0, 200000, 0, 1, &c);
    assert_int_equal(c.drops, 0);
    assert_int_equal(c.retransmissions, 0);
    assert_int_equal(c.holes_filled, 0);
}

static void test_lossy_loss_reassembles(void **state)
{
    (void)state;
    lossy_counters c;
    run(2, 0.05, 200000, 0, 1, &c);
    assert_true(c.drops > 0);
    assert_true(c.retransmissions > 0);
    assert_true(c.holes_filled > 0);
    assert_true(c.duplicates > 0);
    printf("lossy: seed 2: %llu segments, %llu drops, %llu retx, %llu reseg, %llu reord, "
           "%llu dups, %llu holes filled\n",
           (unsigned long long)c.segments, (unsigned long long)c.drops,
           (unsigned long long)c.retransmissions, (unsigned long long)c.resegmented,
           (unsigned long long)c.reordered, (unsigned long long)c.duplicates,
           (unsigned long long)c.holes_filled);
}

static void test_lossy_seed_reproduces(void **state)
{
    (void)state;
    uint64_t a = run(7, 0.03, 1 << 20, 0, 0, NULL);
    uint64_t b = run(7, 0.03, 1 << 20, 0, 0, NULL);
    uint64_t c = run(8, 0.03, 1 << 20, 0, 0, NULL);
    assert_true(a == b);
    assert_true(a != c);
}

static void test_lossy_heavy_loss_terminates(void **state)
{
    (void)state;
    lossy_counters c;
    run(3, 0.5, 100000, 0, 0, &c);
    assert_true(c.drops > c.segments / 4);
}

static void test_lossy_retry_outside_window(void **state)
{
    (void)state;
    lossy_counters c;
    run(4, 0.05, 200000, 6000, 1, &c);
    assert_true(c.retries > 0);
}

static int drop_cb(void *arg, lossy_delivery *d)
{
    uint64_t *log = arg;
    if (d->offset == 0 && d->kind == LOSSY_RETRANSMISSION) {
        log[0] = d->index;
        log[1] = d->fills_hole;
    }
    if (d->kind == LOSSY_REORDERED) {
        log[2] = d->index;
    }
    return LOSSY_CB_OK;
}

static void test_lossy_forced_drop_and_hold(void **state)
{
    (void)state;
    uint64_t log[3] = {0, 0, 0};
    lossy_params p;
    lossy_params_lossless(&p);
    p.rtt = 20;
    lossy_net *net = lossy_new(&p, 9, drop_cb, log);
    lossy_drop_range(net, 10, 1);
    lossy_hold_range(net, 3 * LOSSY_MSS, 1, 2);
    uint8_t buf[LOSSY_MSS * 10];
    memset(buf, 0, sizeof(buf));
    for (size_t i = 0; i + 5 <= sizeof(buf); i += 100) {
        buf[i] = 23;
        buf[i + 3] = 0;
        buf[i + 4] = 95;
    }
    assert_true(lossy_send(net, buf, sizeof(buf)));
    assert_true(lossy_finish(net));
    assert_int_equal(log[0], 10); /* 9 other segments first, then the repair */
    assert_int_equal(log[1], 1);
    assert_true(log[2] != 0);
    size_t after = 0;
    for (size_t r = 0; r < lossy_num_records(net); r++) {
        after += lossy_get_record(net, r)->after_hole;
    }
    /* Records wholly in segments 1..8 completed while segment 0 was missing. */
    assert_true(after > 100);
    assert_int_equal(lossy_inorder(net), sizeof(buf));
    lossy_free(net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lossy_lossless_in_order),
        cmocka_unit_test(test_lossy_loss_reassembles),
        cmocka_unit_test(test_lossy_seed_reproduces),
        cmocka_unit_test(test_lossy_heavy_loss_terminates),
        cmocka_unit_test(test_lossy_retry_outside_window),
        cmocka_unit_test(test_lossy_forced_drop_and_hold),
    };
    return cmocka_run_group_tests_name("lossy", tests, NULL, NULL);
}
