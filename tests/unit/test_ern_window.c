/* test_ern_window.c: unit tests for the pure parts of explicit record
 * numbers (lib/ern/window.c, lib/ern/slots.c), without a handshake: the
 * in-order receive window, the hints left by the out-of-order side and the
 * slots of sealed records (docs/ern.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/utls_conn.h"

static utls_conn *conn_new(void)
{
    utls_conn *c = calloc(1, sizeof(*c));

    assert_non_null(c);
    c->ern.rx = 1; /* the peer's records carry numbers */
    return c;
}

/* conn_free frees what the window and the slots made (utls_ern_state_free). */
static void conn_free(utls_conn *c)
{
    utls_ern_state_free(c);
    free(c);
}

/* The first numbered record as the read hook starts the window at |ctr|. */
static void window_start(utls_conn *c, uint64_t ctr)
{
    c->ern.rxw_valid = 1;
    c->ern.rx_next = ctr;
    c->ern.rx_seen = ~(uint64_t)0;
}

static void note(utls_conn *c, uint64_t seq)
{
    c->ern.rx_checked = 1; /* looked at before decryption */
    assert_int_equal(utls_ern_window_note(c, seq), 1);
}

static void test_ern_window_in_sequence(void **state)
{
    utls_conn *c = conn_new();

    (void)state;
    window_start(c, 10);
    note(c, 10);
    note(c, 11);
    assert_int_equal(c->ern.rx_next, 12);
    assert_int_equal(c->ern.rx_checked, 0);
    assert_true(utls_ern_inorder_seen(c, 11));
    assert_true(utls_ern_inorder_seen(c, 10));
    assert_false(utls_ern_inorder_seen(c, 12));
    conn_free(c);
}

static void test_ern_window_reordered(void **state)
{
    utls_conn *c = conn_new();

    (void)state;
    window_start(c, 0);
    note(c, 3); /* 0, 1, 2 skipped for now */
    assert_int_equal(c->ern.rx_next, 4);
    assert_false(utls_ern_inorder_seen(c, 1));
    note(c, 1); /* behind the highest: marked, the top does not move */
    assert_int_equal(c->ern.rx_next, 4);
    assert_true(utls_ern_inorder_seen(c, 1));
    assert_false(utls_ern_inorder_seen(c, 2));
    assert_false(utls_ern_inorder_seen(c, 0));
    /* Far ahead: everything a window below the new top counts as seen. */
    note(c, 4 + UTLS_ERN_REORDER_WINDOW + 10);
    assert_true(utls_ern_inorder_seen(c, 2));
    conn_free(c);
}

static void test_ern_window_unchecked_restarts(void **state)
{
    utls_conn *c = conn_new();

    (void)state;
    window_start(c, 5);
    /* Not looked at before decryption (a new key) and out of sequence:
     * numbering restarts with the next record, the read sequence stays. */
    c->ern.rx_checked = 0;
    assert_int_equal(utls_ern_window_note(c, 9), 0);
    assert_int_equal(c->ern.rxw_valid, 0);
    assert_int_equal(utls_ern_window_note(c, 10), 0);
    /* Without numbers nothing is noted. */
    c->ern.rx = 0;
    window_start(c, 0);
    assert_int_equal(utls_ern_window_note(c, 0), 0);
    conn_free(c);
}

static void test_ern_window_hints_ring(void **state)
{
    utls_conn *c = conn_new();
    uint64_t n = 0;

    (void)state;
    c->rx.gen = 2;
    utls_ern_hint_add(c, 100, 7);
    assert_int_equal(utls_ern_hint_find(c, 100, &n), 1);
    assert_int_equal(n, 7);
    utls_ern_hint_add(c, 100, 8); /* the same offset: replaced, not added */
    assert_int_equal(c->ern.num_hints, 1);
    assert_int_equal(utls_ern_hint_find(c, 100, &n), 1);
    assert_int_equal(n, 8);
    /* A hint is per key generation. */
    c->rx.gen = 3;
    assert_int_equal(utls_ern_hint_find(c, 100, &n), 0);
    c->rx.gen = 2;
    /* The ring forgets the oldest. */
    for (uint64_t i = 1; i <= UTLS_ERN_HINTS; i++) {
        utls_ern_hint_add(c, 100 + i * 50, i);
    }
    assert_int_equal(c->ern.num_hints, UTLS_ERN_HINTS);
    assert_int_equal(utls_ern_hint_find(c, 100, &n), 0);
    assert_int_equal(utls_ern_hint_find(c, 100 + UTLS_ERN_HINTS * 50, &n), 1);
    assert_int_equal(n, UTLS_ERN_HINTS);
    conn_free(c);
}

static void test_ern_window_sealed_slots(void **state)
{
    utls_conn *c = conn_new();
    unsigned char rec[64];

    (void)state;
    memset(rec, 0x42, sizeof(rec));
    /* Nothing sealed yet: no slots made, and none is found. */
    assert_null(c->ern.slot);
    assert_int_equal(utls_ern_seal_low(c, 99), 99);
    assert_int_equal(utls_ern_find_sealed(c, rec, sizeof(rec)), -1);
    utls_ern_slots_clear(c);
    assert_int_equal(utls_ern_slots_make(c), 1);
    assert_non_null(c->ern.slot);
    c->ern.slot[3].state = UTLS_ERN_SLOT_SEALED;
    c->ern.slot[3].number = 3;
    c->ern.slot[3].len = sizeof(rec);
    memcpy(c->ern.slot[3].tail, rec + sizeof(rec) - UTLS_ERN_SEAL_TAIL, UTLS_ERN_SEAL_TAIL);
    c->ern.slot[5].state = UTLS_ERN_SLOT_SEALED;
    c->ern.slot[5].number = 5;
    c->ern.num_sealed = 2;
    assert_int_equal(utls_ern_seal_low(c, 99), 3);
    assert_int_equal(utls_ern_find_sealed(c, rec, sizeof(rec)), 3);
    rec[sizeof(rec) - 1] ^= 1; /* another tag: another record */
    assert_int_equal(utls_ern_find_sealed(c, rec, sizeof(rec)), -1);
    assert_int_equal(utls_ern_find_sealed(c, rec, 4), -1); /* shorter than a header + tail */
    utls_ern_slots_clear(c);
    assert_int_equal(c->ern.num_sealed, 0);
    assert_int_equal(utls_ern_seal_low(c, 99), 99);
    conn_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ern_window_in_sequence),
        cmocka_unit_test(test_ern_window_reordered),
        cmocka_unit_test(test_ern_window_unchecked_restarts),
        cmocka_unit_test(test_ern_window_hints_ring),
        cmocka_unit_test(test_ern_window_sealed_slots),
    };
    return cmocka_run_group_tests_name("ern_window", tests, NULL, NULL);
}
