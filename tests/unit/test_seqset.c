/* test_seqset.c: unit tests for the set of records delivered ahead of the
 * in-order path (core/include/utls/seqset.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "utls/seqset.h"

static void assert_sorted(const utls_seqset *s)
{
    for (size_t i = 1; i < s->n; i++) {
        assert_true(s->v[i - 1] < s->v[i]);
    }
}

static void test_seqset_add_keeps_order(void **state)
{
    utls_seqset s = {0};
    static const uint64_t in[] = {7, 3, 9, 1, 5};

    (void)state;
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(utls_seqset_add(&s, in[i], 100 * in[i], 10 + in[i], in[i] + 1000), 1);
    }
    assert_int_equal(s.n, 5);
    assert_sorted(&s);
    /* The parallel arrays moved with their sequence numbers. */
    for (size_t i = 0; i < s.n; i++) {
        assert_int_equal(s.off[i], 100 * s.v[i]);
        assert_int_equal(s.wire_len[i], 10 + s.v[i]);
        assert_int_equal(s.epoch[i], s.v[i] + 1000);
    }
    assert_true(utls_seqset_contains(&s, 9));
    assert_false(utls_seqset_contains(&s, 4));
    assert_int_equal(utls_seqset_lower(&s, 4), 2); /* 1 3 | 5 7 9 */
    utls_seqset_free(&s);
    assert_null(s.mem);
    assert_int_equal(s.n, 0);
}

static void test_seqset_take_drops_lower(void **state)
{
    utls_seqset s = {0};

    (void)state;
    for (uint64_t q = 10; q < 20; q += 2) {
        assert_int_equal(utls_seqset_add(&s, q, q, 1, 0), 1);
    }
    /* 13 is not there: everything below it goes, 1 is not returned. */
    assert_int_equal(utls_seqset_take(&s, 13), 0);
    assert_int_equal(s.n, 3); /* 14 16 18 */
    assert_int_equal(s.v[0], 14);
    /* In-order sequence numbers only grow: taking 16 drops 14 too. */
    assert_int_equal(utls_seqset_take(&s, 16), 1);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.v[0], 18);
    assert_int_equal(utls_seqset_take(&s, 5), 0); /* below everything */
    assert_int_equal(s.n, 1);
    utls_seqset_free(&s);
}

static void test_seqset_take_one_keeps_window(void **state)
{
    utls_seqset s = {0};

    (void)state;
    for (uint64_t q = 0; q < 10; q++) {
        assert_int_equal(utls_seqset_add(&s, q * 10, q, 1, 0), 1);
    }
    /* Explicit record numbers: 50 goes, 30 and 40 stay (within the window
     * of 25 below 50), 0..20 go. */
    assert_int_equal(utls_seqset_take_one(&s, 50, 25), 1);
    assert_false(utls_seqset_contains(&s, 50));
    assert_false(utls_seqset_contains(&s, 20));
    assert_true(utls_seqset_contains(&s, 30));
    assert_true(utls_seqset_contains(&s, 40));
    assert_true(utls_seqset_contains(&s, 60));
    assert_int_equal(utls_seqset_take_one(&s, 55, 25), 0);
    assert_sorted(&s);
    utls_seqset_free(&s);
}

static void test_seqset_full_refuses(void **state)
{
    utls_seqset s = {0};

    (void)state;
    for (uint64_t q = 0; q < UTLS_MAX_DELIVERED_AHEAD; q++) {
        assert_int_equal(utls_seqset_add(&s, q, q, 1, 0), 1);
    }
    /* The bound on the duplicate-suppression set. */
    assert_int_equal(utls_seqset_add(&s, UTLS_MAX_DELIVERED_AHEAD, 0, 1, 0), 0);
    assert_int_equal(s.n, UTLS_MAX_DELIVERED_AHEAD);
    utls_seqset_free(&s);
}

static void test_seqset_front_reuse(void **state)
{
    utls_seqset s = {0};
    uint64_t next = 0;

    (void)state;
    /* The in-order path takes from the front, records keep arriving at the
     * back: many times the capacity goes through without losing order. */
    for (int round = 0; round < 8 * UTLS_MAX_DELIVERED_AHEAD; round++) {
        assert_int_equal(utls_seqset_add(&s, next + 5, next, 1, next), 1);
        if (s.n > 4) {
            assert_int_equal(utls_seqset_take(&s, s.v[0]), 1);
        }
        next++;
    }
    assert_true(s.n <= 5);
    assert_sorted(&s);
    for (size_t i = 0; i < s.n; i++) {
        assert_int_equal(s.off[i] + 5, s.v[i]);
        assert_int_equal(s.epoch[i] + 5, s.v[i]);
    }
    utls_seqset_free(&s);
}

static void test_seqset_forget_epochs(void **state)
{
    utls_seqset s = {0};

    (void)state;
    assert_int_equal(utls_seqset_add(&s, 1, 0, 1, 42), 1);
    assert_int_equal(utls_seqset_add(&s, 2, 0, 1, 43), 1);
    utls_seqset_forget_epochs(&s);
    assert_int_equal(s.epoch[0], UTLS_NO_EPOCH);
    assert_int_equal(s.epoch[1], UTLS_NO_EPOCH);
    utls_seqset_free(&s);
    utls_seqset_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seqset_add_keeps_order),
        cmocka_unit_test(test_seqset_take_drops_lower),
        cmocka_unit_test(test_seqset_take_one_keeps_window),
        cmocka_unit_test(test_seqset_full_refuses),
        cmocka_unit_test(test_seqset_front_reuse),
        cmocka_unit_test(test_seqset_forget_epochs),
    };
    return cmocka_run_group_tests_name("seqset", tests, NULL, NULL);
}
