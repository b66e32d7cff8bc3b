/*
 * test_case.h: table-driven cmocka cases. One test function runs every
 * variant of a scenario; the table gives each variant its own name and its
 * parameter, instead of a wrapper function per variant.
 */
#ifndef UTLS_TEST_CASE_H
#define UTLS_TEST_CASE_H

/* test_case_no, test_case_yes: the parameter of a case that turns one
 * behaviour off or on (cmocka hands a NULL initial state the group's state
 * instead, so a parameter is never NULL). */
static const int test_case_no = 0, test_case_yes = 1;

/* TEST_CASE(name, fn, param) is a struct CMUnitTest named |name| that runs
 * |fn| with *state == |param| (a non-NULL pointer to const data). */
#define TEST_CASE(name, fn, param) {#name, fn, NULL, NULL, (void *)(param)}

/* test_case_param returns the int a TEST_CASE's |state| points to. */
static inline int test_case_param(void **state)
{
    return *(const int *)*state;
}

#endif
