/* fuzz_check.h: CHECK(cond), the fuzz targets' assertion. A failed check
 * prints the target, the condition and the line, runs FUZZ_ON_FAILURE()
 * (what the target has to add, such as the OpenSSL error queue) and aborts:
 * libFuzzer and the replay driver (replay_main.c) report an abort as a crash
 * with the input that caused it. Before including it a target defines
 * FUZZ_NAME (its name, a string literal) and may define FUZZ_ON_FAILURE().
 * Header-only: each target is one program. */
#ifndef UTLS_TESTS_FUZZ_CHECK_H
#define UTLS_TESTS_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#ifndef FUZZ_NAME
#error "define FUZZ_NAME before including fuzz_check.h"
#endif

#ifndef FUZZ_ON_FAILURE
#define FUZZ_ON_FAILURE() ((void)0)
#endif

#define CHECK(c)                                                                          \
    do {                                                                                  \
        if (!(c)) {                                                                       \
            fprintf(stderr, "%s: check failed: %s (line %d)\n", FUZZ_NAME, #c, __LINE__); \
            FUZZ_ON_FAILURE();                                                            \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

#endif /* UTLS_TESTS_FUZZ_CHECK_H */
