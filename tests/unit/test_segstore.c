/* test_segstore.c: unit tests for the segment store behind the segment, uTCP
 * and tap BIOs (lib/bio/segstore.c), without a handshake: segments pushed,
 * in-order bytes read, fragment events for bytes past a hole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/bio.h>

#include "bio/segstore_local.h"

/* The store's only calls out of lib/bio/: errors and the clock. */
static int last_reason;
void utls_raise(int reason, const char *fmt, ...)
{
    (void)fmt;
    last_reason = reason;
}
uint64_t utls_now_ns(void)
{
    return 1;
}

static unsigned char stream[1 << 16];

static int setup(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(stream); i++) {
        stream[i] = (unsigned char)(i * 7 + (i >> 8));
    }
    return 0;
}

/* Reads every in-order byte the store has, as BIO_read() of the segment
 * BIO would; returns how many, checking them against |stream| from |from|. */
static size_t read_all(seg_ctx *c, uint64_t from)
{
    BIO *b = BIO_new(BIO_s_null());
    char buf[4096];
    size_t total = 0;
    int n;

    assert_non_null(b);
    while ((n = seg_read_inorder(b, c, buf, sizeof(buf))) > 0) {
        assert_memory_equal(buf, stream + from + total, (size_t)n);
        total += (size_t)n;
    }
    BIO_free(b);
    return total;
}

static void test_segstore_inorder_bytes_read_back(void **state)
{
    seg_ctx *c = utls_seg_ctx_new();

    (void)state;
    assert_non_null(c);
    assert_int_equal(utls_segstore_read_would_block(c), 1);
    assert_int_equal(utls_seg_push(c, 0, stream, 100, 0), 1);
    assert_int_equal(utls_segstore_inorder_end(c), 100);
    assert_int_equal(utls_segstore_num_events(c), 0); /* no hole: nothing early */
    assert_int_equal(utls_segstore_read_would_block(c), 0);
    assert_int_equal(read_all(c, 0), 100);
    assert_int_equal(utls_segstore_read_would_block(c), 1);
    utls_seg_ctx_free(c);
}

static void test_segstore_hole_queues_event(void **state)
{
    seg_ctx *c = utls_seg_ctx_new();
    utls_bio_fragment f;

    (void)state;
    assert_int_equal(utls_seg_push(c, 0, stream, 10, 0), 1);
    assert_int_equal(utls_seg_push(c, 20, stream + 20, 30, 5), 1);
    assert_int_equal(utls_segstore_inorder_end(c), 10);
    assert_int_equal(utls_segstore_num_events(c), 1);
    assert_int_equal(utls_segstore_take_event(c, &f), 1);
    assert_int_equal(f.offset, 20);
    assert_int_equal(f.len, 30);
    assert_int_equal(f.arrival_ns, 5);
    assert_memory_equal(f.data, stream + 20, 30);
    assert_int_equal(utls_segstore_take_event(c, &f), 0);
    /* The hole fills: the run past it becomes in order, read in one go. */
    assert_int_equal(utls_seg_push(c, 10, stream + 10, 10, 0), 1);
    assert_int_equal(utls_segstore_inorder_end(c), 50);
    assert_int_equal(read_all(c, 0), 50);
    utls_seg_ctx_free(c);
}

static void test_segstore_overlap_first_bytes_kept(void **state)
{
    seg_ctx *c = utls_seg_ctx_new();
    unsigned char forged[40];

    (void)state;
    assert_int_equal(utls_seg_push(c, 100, stream + 100, 20, 0), 1);
    /* A later copy that overlaps with other bytes does not replace them:
     * a stream byte keeps the value it first arrived with. */
    memset(forged, 0xee, sizeof(forged));
    assert_int_equal(utls_seg_push(c, 90, forged, 40, 0), 1);
    assert_int_equal(utls_seg_push(c, 0, stream, 90, 0), 1);
    assert_int_equal(utls_segstore_inorder_end(c), 130);
    {
        BIO *b = BIO_new(BIO_s_null());
        char buf[130];
        size_t got = 0;
        int n;

        while ((n = seg_read_inorder(b, c, buf + got, (int)(sizeof(buf) - got))) > 0) {
            got += (size_t)n;
        }
        BIO_free(b);
        assert_int_equal(got, 130);
        assert_memory_equal(buf, stream, 90);
        assert_memory_equal(buf + 90, forged, 10); /* arrived first there */
        assert_memory_equal(buf + 100, stream + 100, 20);
        assert_memory_equal(buf + 120, forged + 30, 10);
    }
    utls_seg_ctx_free(c);
}

static void test_segstore_refuses_outside_window(void **state)
{
    seg_ctx *c = utls_seg_ctx_new();

    (void)state;
    last_reason = 0;
    assert_int_equal(utls_seg_push(c, c->window, stream, 10, 0), 0);
    assert_int_equal(last_reason, UTLS_R_OUTSIDE_WINDOW);
    assert_int_equal(utls_segstore_num_events(c), 0);
    last_reason = 0;
    assert_int_equal(utls_seg_push(c, UINT64_MAX - 4, stream, 10, 0), 0);
    assert_int_equal(last_reason, UTLS_R_OFFSET_WRAPS);
    utls_seg_ctx_free(c);
}

static void test_segstore_duplicate_no_new_event(void **state)
{
    seg_ctx *c = utls_seg_ctx_new();
    utls_bio_fragment f;

    (void)state;
    assert_int_equal(utls_seg_push(c, 50, stream + 50, 10, 0), 1);
    assert_int_equal(utls_segstore_take_event(c, &f), 1);
    assert_int_equal(utls_seg_push(c, 50, stream + 50, 10, 0), 1);
    assert_int_equal(utls_segstore_num_events(c), 0);
    /* Below the read point: a retransmission, accepted and ignored. */
    assert_int_equal(utls_seg_push(c, 0, stream, 50, 0), 1);
    assert_int_equal(read_all(c, 0), 60);
    assert_int_equal(utls_seg_push(c, 0, stream, 60, 0), 1);
    assert_int_equal(utls_segstore_read_would_block(c), 1);
    utls_seg_ctx_free(c);
}

static void test_segstore_events_bounded(void **state)
{
    seg_ctx *c = utls_seg_ctx_new();
    utls_bio_fragment f;
    uint64_t off;

    (void)state;
    /* A hole at 0, then many small separate fragments: the event ring keeps
     * the newest UTLS_SEG_MAX_EVENTS, the oldest are dropped (the in-order
     * stream still has them). */
    for (off = 2; off < 2 + 2 * (UTLS_SEG_MAX_EVENTS + 100); off += 2) {
        assert_int_equal(utls_seg_push(c, off, stream + off, 1, 0), 1);
    }
    assert_int_equal(utls_segstore_num_events(c), UTLS_SEG_MAX_EVENTS);
    assert_int_equal(utls_segstore_take_event(c, &f), 1);
    assert_int_equal(f.offset, 2 + 2 * 100);
    utls_seg_ctx_free(c);
}

static void test_segstore_events_grow_in_order(void **state)
{
    seg_ctx *c = utls_seg_ctx_new();
    utls_bio_fragment f;
    uint64_t off, want;
    size_t i;

    (void)state;
    /* The ring starts at UTLS_SEG_MIN_EVENTS and grows while wrapped (its
     * head moved by the events taken): the events still come out oldest
     * first, none lost or doubled. */
    for (off = 2; off < 2 + 2 * 10; off += 2)
        assert_int_equal(utls_seg_push(c, off, stream + off, 1, 0), 1);
    for (want = 2, i = 0; i < 6; i++, want += 2) {
        assert_int_equal(utls_segstore_take_event(c, &f), 1);
        assert_int_equal(f.offset, want);
    }
    for (; off < 2 + 2 * (10 + 3 * UTLS_SEG_MIN_EVENTS); off += 2)
        assert_int_equal(utls_seg_push(c, off, stream + off, 1, 0), 1);
    assert_int_equal(utls_segstore_num_events(c), 4 + 3 * UTLS_SEG_MIN_EVENTS);
    for (; want < off; want += 2) {
        assert_int_equal(utls_segstore_take_event(c, &f), 1);
        assert_int_equal(f.offset, want);
    }
    assert_int_equal(utls_segstore_take_event(c, &f), 0);
    utls_seg_ctx_free(c);
}

static void test_segstore_tap_mode_skips_inorder(void **state)
{
    utls_segstore *c = utls_segstore_new(); /* the tap's: in-order bytes not kept */
    utls_bio_fragment f;

    (void)state;
    /* Captured bytes at the in-order point do not move it: only the kernel
     * (utls_segstore_skip_inorder) does. They wait in the store. */
    assert_int_equal(utls_segstore_push(c, 0, stream, 10, 0), 1);
    assert_int_equal(utls_segstore_inorder_end(c), 0);
    assert_int_equal(utls_segstore_num_events(c), 1);
    utls_segstore_skip_inorder(c, 10); /* the socket has them */
    assert_int_equal(utls_segstore_inorder_end(c), 10);
    assert_int_equal(utls_segstore_take_event(c, &f), 0); /* in order now: not early */
    assert_int_equal(utls_segstore_push(c, 30, stream + 30, 10, 0), 1);
    assert_int_equal(utls_segstore_num_events(c), 1);
    /* The socket delivered up to 35: the hole below is no hole any more. */
    utls_segstore_skip_inorder(c, 35);
    assert_int_equal(utls_segstore_inorder_end(c), 35);
    /* The part the kernel holds is passed; the rest is still early. */
    assert_int_equal(utls_segstore_take_event(c, &f), 1);
    assert_int_equal(f.offset, 35);
    assert_int_equal(f.len, 5);
    utls_segstore_free(c);
    utls_segstore_free(NULL);
}

/* A forged copy of a lost segment that lines up with the in-order point does
 * not hide the hole: the genuine bytes behind it are still reported early,
 * and the point moves only with the kernel. (Issue 20, point 6.) */
static void test_segstore_tap_mode_forged_copy_keeps_hole(void **state)
{
    utls_segstore *c = utls_segstore_new();
    unsigned char forged[20];
    utls_bio_fragment f;

    (void)state;
    memset(forged, 0xee, sizeof(forged));
    utls_segstore_skip_inorder(c, 10); /* the kernel has [0, 10) */
    assert_int_equal(utls_segstore_push(c, 10, forged, 20, 0), 1); /* lost [10, 30) forged */
    assert_int_equal(utls_segstore_push(c, 30, stream + 30, 20, 0), 1); /* genuine after it */
    assert_int_equal(utls_segstore_inorder_end(c), 10);
    assert_int_equal(utls_segstore_take_event(c, &f), 1);
    assert_int_equal(f.offset, 10);
    assert_int_equal(utls_segstore_take_event(c, &f), 1);
    assert_int_equal(f.offset, 30);
    assert_int_equal(f.len, 20);
    assert_memory_equal(f.data, stream + 30, 20);
    utls_segstore_free(c);
}

/* A later copy that differs from the bytes the tap's store holds is handed
 * on as a fragment of its own, so that the SSL can keep it in case the first
 * copy fails to authenticate (issue 20, point 6); an identical copy is not. */
static void test_segstore_tap_mode_hands_on_other_copy(void **state)
{
    utls_segstore *c = utls_segstore_new();
    unsigned char forged[20];
    utls_bio_fragment f;

    (void)state;
    memset(forged, 0xee, sizeof(forged));
    assert_int_equal(utls_segstore_push(c, 100, forged, 20, 0), 1); /* forged first */
    assert_int_equal(utls_segstore_take_event(c, &f), 1);
    assert_int_equal(utls_segstore_push(c, 100, stream + 100, 20, 0), 1); /* genuine */
    assert_int_equal(utls_segstore_take_event(c, &f), 1);
    assert_int_equal(f.offset, 100);
    assert_int_equal(f.len, 20);
    assert_memory_equal(f.data, stream + 100, 20);
    assert_int_equal(utls_segstore_push(c, 100, forged, 20, 0), 1); /* the held copy again */
    assert_int_equal(utls_segstore_take_event(c, &f), 0);
    utls_segstore_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segstore_inorder_bytes_read_back),
        cmocka_unit_test(test_segstore_hole_queues_event),
        cmocka_unit_test(test_segstore_overlap_first_bytes_kept),
        cmocka_unit_test(test_segstore_refuses_outside_window),
        cmocka_unit_test(test_segstore_duplicate_no_new_event),
        cmocka_unit_test(test_segstore_events_bounded),
        cmocka_unit_test(test_segstore_events_grow_in_order),
        cmocka_unit_test(test_segstore_tap_mode_skips_inorder),
        cmocka_unit_test(test_segstore_tap_mode_forged_copy_keeps_hole),
        cmocka_unit_test(test_segstore_tap_mode_hands_on_other_copy),
    };
    return cmocka_run_group_tests_name("segstore", tests, setup, NULL);
}
