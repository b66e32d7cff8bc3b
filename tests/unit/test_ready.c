/* test_ready.c: unit tests for the ready queue (lib/rx/ready.c), without a
 * handshake: records verified past a hole are queued in (key generation,
 * sequence number) order, bounded, handed over whole or in parts, and
 * remembered as delivered so that the in-order path skips them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/crypto.h>

#include "common/utls_conn.h"

/* ready.c's one call into the rest of the receive path. */
static uint64_t store_epoch = 7;
uint64_t utls_store_epoch(const utls_conn *c)
{
    (void)c;
    return store_epoch;
}

/* The error queue: only the reason of the last error raised. */
static int last_reason;
void utls_raise(int reason, const char *fmt, ...)
{
    (void)fmt;
    last_reason = reason;
}

static utls_conn *conn_new(size_t max_ready)
{
    utls_conn *c = calloc(1, sizeof(*c));

    assert_non_null(c);
    c->limits.max_ready_records = max_ready;
    c->rx.ooo_possible = 1;
    return c;
}

static void conn_free(utls_conn *c)
{
    while (c->rx.ready.num > 0) {
        utls_ready_remove(c, 0);
    }
    for (size_t i = 0; i < c->rx.ready.num_spare; i++) {
        OPENSSL_free(c->rx.ready.spare[i]);
    }
    OPENSSL_free(c->rx.ready.rec);
    OPENSSL_free(c->rx.scratch);
    utls_seqset_free(&c->rx.ahead);
    utls_seqset_free(&c->rx.next.ahead);
    free(c);
}

static void add(utls_conn *c, uint32_t gen, uint64_t seq, const char *pt)
{
    utls_ready_add_verified(c, seq, gen, 1000 + seq, 22 + strlen(pt), 5, (const unsigned char *)pt,
                            strlen(pt));
}

static void test_ready_sorted_by_gen_and_seq(void **state)
{
    utls_conn *c = conn_new(8);

    (void)state;
    add(c, 0, 5, "five");
    add(c, 1, 0, "next key");
    add(c, 0, 2, "two");
    add(c, 0, 9, "nine");
    assert_int_equal(c->rx.ready.num, 4);
    assert_int_equal(c->rx.ready.rec[0].seq, 2);
    assert_int_equal(c->rx.ready.rec[1].seq, 5);
    assert_int_equal(c->rx.ready.rec[2].seq, 9);
    assert_int_equal(c->rx.ready.rec[3].gen, 1);
    assert_int_equal(utls_ready_find(c, 0, 9), 2);
    assert_int_equal(utls_ready_find(c, 1, 9), -1);
    assert_int_equal(utls_ready_find(c, 1, 0), 3);
    /* The plaintext was copied (it was not in the probe buffer). */
    assert_memory_equal(c->rx.ready.rec[1].data, "five", 4);
    assert_int_equal(c->rx.ready.rec[1].store_epoch, 7);
    assert_int_equal(c->rx.ready.rec[1].offset, 1005);
    conn_free(c);
}

static void test_ready_limit_counts_dropped(void **state)
{
    utls_conn *c = conn_new(2);

    (void)state;
    add(c, 0, 1, "a");
    add(c, 0, 2, "b");
    add(c, 0, 3, "ccc"); /* past max_ready_records: left to the in-order path */
    assert_int_equal(c->rx.ready.num, 2);
    assert_int_equal(c->stats.bytes_dropped, 22 + 3);
    utls_ready_remove(c, 0);
    assert_int_equal(c->rx.ready.num, 1);
    assert_int_equal(c->rx.ready.rec[0].seq, 2);
    add(c, 0, 3, "ccc");
    assert_int_equal(c->rx.ready.num, 2);
    conn_free(c);
}

static void test_ready_probe_buffer_handed_over(void **state)
{
    utls_conn *c = conn_new(8);
    unsigned char *probe;

    (void)state;
    c->rx.scratch = OPENSSL_malloc(UTLS_SCRATCH_LEN);
    assert_non_null(c->rx.scratch);
    probe = c->rx.scratch;
    memcpy(probe + 5, "in place", 8);
    utls_ready_add_verified(c, 4, 0, 0, 30, 0, probe + 5, 8);
    /* No copy: the record keeps the probe buffer, the next probe gets a new
     * one; given back, the buffer becomes a spare. */
    assert_ptr_equal(c->rx.ready.rec[0].buf, probe);
    assert_ptr_equal(c->rx.ready.rec[0].data, probe + 5);
    assert_ptr_not_equal(c->rx.scratch, probe);
    utls_ready_remove(c, 0);
    assert_int_equal(c->rx.ready.num_spare, 1);
    assert_ptr_equal(c->rx.ready.spare[0], probe);
    conn_free(c);
}

static void test_ready_mark_delivered_fills_ahead(void **state)
{
    utls_conn *c = conn_new(8);

    (void)state;
    c->rx.gen = 3;
    add(c, 3, 10, "cur");
    add(c, 4, 1, "next");
    assert_int_equal(utls_ready_mark_delivered(c, &c->rx.ready.rec[0]), 1);
    assert_int_equal(utls_ready_mark_delivered(c, &c->rx.ready.rec[1]), 1);
    assert_true(utls_seqset_contains(&c->rx.ahead, 10));
    assert_true(utls_seqset_contains(&c->rx.next.ahead, 1));
    assert_false(utls_seqset_contains(&c->rx.ahead, 1));
    assert_int_equal(c->rx.ahead.off[0], 1010);
    assert_int_equal(c->hooks.may_skip, 1);
    conn_free(c);
}

static void test_ready_partial_read_in_parts(void **state)
{
    utls_conn *c = conn_new(8);
    unsigned char buf[4];
    size_t n = 0;
    int ret = 0;

    (void)state;
    add(c, 0, 6, "abcdefghij");
    /* SSL_MODE_UNORDERED_PARTIAL: the first 4 bytes now; the record leaves
     * the queue and the rest waits in the partial record. */
    assert_int_equal(utls_ready_deliver(c, 1, buf, 4, 0, &n), UTLS_READY_DELIVERED);
    assert_int_equal(n, 4);
    assert_memory_equal(buf, "abcd", 4);
    assert_int_equal(c->rx.ready.num, 0);
    assert_int_equal(c->rx.ready.partial_active, 1);
    assert_int_equal(c->stats.records_out_of_order, 1);
    /* Peek: nothing consumed. */
    assert_int_equal(utls_ready_partial_read(c, buf, 4, 1, &n, &ret), UTLS_HOOK_HANDLED);
    assert_int_equal(n, 4);
    assert_int_equal(c->rx.ready.partial_pos, 4);
    assert_int_equal(utls_ready_partial_read(c, buf, 4, 0, &n, &ret), UTLS_HOOK_HANDLED);
    assert_memory_equal(buf, "efgh", 4);
    assert_int_equal(utls_ready_partial_read(c, buf, 4, 0, &n, &ret), UTLS_HOOK_HANDLED);
    assert_int_equal(n, 2);
    assert_memory_equal(buf, "ij", 2);
    assert_int_equal(c->rx.ready.partial_active, 0);
    assert_null(c->rx.ready.partial.buf);
    /* Every part says which record it came from. */
    assert_int_equal(c->last_info.seq, 6);
    assert_int_equal(c->last_info.out_of_order, 1);
    assert_int_equal(c->last_info.stream_offset, 1006);
    conn_free(c);
}

/* utls_ready_deliver: whole, refused for a small buffer (nothing consumed),
 * and peeked (in parts: test_ready_partial_read_in_parts). */
static void test_ready_deliver(void **state)
{
    utls_conn *c = conn_new(8);
    unsigned char buf[16];
    size_t n = 0;

    (void)state;
    add(c, 0, 3, "first");
    /* Too small, no partial mode: an error, the record stays queued. */
    last_reason = 0;
    assert_int_equal(utls_ready_deliver(c, 0, buf, 4, 0, &n), UTLS_READY_TOO_SMALL);
    assert_int_equal(last_reason, UTLS_R_BUFFER_TOO_SMALL);
    assert_int_equal(c->rx.ready.num, 1);
    assert_int_equal(c->stats.records_out_of_order, 0);
    /* Peek: copied, still queued, not remembered. */
    assert_int_equal(utls_ready_deliver(c, 0, buf, sizeof(buf), 1, &n), UTLS_READY_DELIVERED);
    assert_int_equal(n, 5);
    assert_int_equal(c->rx.ready.num, 1);
    assert_false(utls_seqset_contains(&c->rx.ahead, 3));
    /* Whole. */
    assert_int_equal(utls_ready_deliver(c, 0, buf, sizeof(buf), 0, &n), UTLS_READY_DELIVERED);
    assert_memory_equal(buf, "first", 5);
    assert_int_equal(c->rx.ready.num, 0);
    assert_true(utls_seqset_contains(&c->rx.ahead, 3));
    assert_int_equal(c->last_info.seq, 3);
    assert_int_equal(c->stats.records_out_of_order, 1);
    conn_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ready_sorted_by_gen_and_seq),
        cmocka_unit_test(test_ready_limit_counts_dropped),
        cmocka_unit_test(test_ready_probe_buffer_handed_over),
        cmocka_unit_test(test_ready_mark_delivered_fills_ahead),
        cmocka_unit_test(test_ready_partial_read_in_parts),
        cmocka_unit_test(test_ready_deliver),
    };
    return cmocka_run_group_tests_name("ready", tests, NULL, NULL);
}
