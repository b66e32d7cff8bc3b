/* test_structsize.c: unit tests for the size-checked copies of caller-
 * allocated structures (core/include/utls/structsize.h): an older, the same
 * and a newer layout, in both directions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "utls/structsize.h"

/* Three releases of one structure: each adds a field at the end. */
typedef struct {
    uint64_t a, b;
} v1;
typedef struct {
    uint64_t a, b, c;
} v2;
typedef struct {
    uint64_t a, b, c, d;
} v3;

static void test_structsize_bounds(void **state)
{
    (void)state;
    assert_false(utls_struct_size_ok(sizeof(v1) - 1, sizeof(v1)));
    assert_false(utls_struct_size_ok(0, sizeof(v1)));
    assert_true(utls_struct_size_ok(sizeof(v1), sizeof(v1)));
    assert_true(utls_struct_size_ok(sizeof(v3), sizeof(v1)));
    assert_true(utls_struct_size_ok(UTLS_STRUCT_MAX_SIZE, sizeof(v1)));
    assert_false(utls_struct_size_ok(UTLS_STRUCT_MAX_SIZE + 1, sizeof(v1)));
    assert_false(utls_struct_size_ok((size_t)-1, sizeof(v1)));
}

/* The library (v2) fills an older caller's v1: only v1's bytes are written. */
static void test_structsize_out_to_older(void **state)
{
    v2 lib = {1, 2, 3};
    struct {
        v1 caller;
        uint64_t after;
    } mem;

    (void)state;
    memset(&mem, 0xaa, sizeof(mem));
    utls_struct_out(&mem.caller, sizeof(mem.caller), &lib, sizeof(lib));
    assert_int_equal(mem.caller.a, 1);
    assert_int_equal(mem.caller.b, 2);
    assert_int_equal(mem.after, 0xaaaaaaaaaaaaaaaaULL); /* not one byte past */
}

/* The library (v2) fills a newer caller's v3: the field it does not know is 0. */
static void test_structsize_out_to_newer(void **state)
{
    v2 lib = {1, 2, 3};
    v3 caller;

    (void)state;
    memset(&caller, 0xaa, sizeof(caller));
    utls_struct_out(&caller, sizeof(caller), &lib, sizeof(lib));
    assert_int_equal(caller.a, 1);
    assert_int_equal(caller.c, 3);
    assert_int_equal(caller.d, 0);
}

/* An older caller's v1 read into the library's v2: c keeps its default. */
static void test_structsize_in_from_older(void **state)
{
    v1 caller = {10, 20};
    v2 lib = {0, 0, 99};

    (void)state;
    assert_int_equal(utls_struct_in(&lib, sizeof(lib), &caller, sizeof(caller)), 1);
    assert_int_equal(lib.a, 10);
    assert_int_equal(lib.b, 20);
    assert_int_equal(lib.c, 99);
}

/* A newer caller's v3 is accepted only while its unknown field is unset,
 * and a refusal writes nothing. */
static void test_structsize_in_from_newer(void **state)
{
    v3 caller = {10, 20, 30, 0};
    v2 lib = {0, 0, 99};

    (void)state;
    assert_int_equal(utls_struct_in(&lib, sizeof(lib), &caller, sizeof(caller)), 1);
    assert_int_equal(lib.c, 30);
    memset(&lib, 0, sizeof(lib));
    caller.d = 1;
    assert_int_equal(utls_struct_in(&lib, sizeof(lib), &caller, sizeof(caller)), 0);
    assert_int_equal(lib.a, 0);
    /* Only the last byte set: still found. */
    memset(&caller.d, 0, sizeof(caller.d));
    ((unsigned char *)&caller)[sizeof(caller) - 1] = 0x80;
    assert_int_equal(utls_struct_in(&lib, sizeof(lib), &caller, sizeof(caller)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_structsize_bounds),
        cmocka_unit_test(test_structsize_out_to_older),
        cmocka_unit_test(test_structsize_out_to_newer),
        cmocka_unit_test(test_structsize_in_from_older),
        cmocka_unit_test(test_structsize_in_from_newer),
    };

    return cmocka_run_group_tests_name("structsize", tests, NULL, NULL);
}
