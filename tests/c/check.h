/* Tiny check helpers shared by the C test programs. */
#ifndef OFL_TEST_CHECK_H
#define OFL_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int ofl_test_failures;

/* Print what is checked; count a failure when `cond` is false. */
#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        int ok_ = !!(cond);                                                     \
        printf("%s: ", ok_ ? "ok  " : "FAIL");                                  \
        printf(__VA_ARGS__);                                                    \
        printf("  [%s:%d]\n", __FILE__, __LINE__);                              \
        fflush(stdout);                                                         \
        if (!ok_) ofl_test_failures++;                                          \
    } while (0)

/* Exit status of a test program. */
#define CHECK_DONE() (printf("%d failure(s)\n", ofl_test_failures), ofl_test_failures ? 1 : 0)

#endif
