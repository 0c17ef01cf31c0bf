/*
 * test_fuzz_regress.c - replays every fuzz corpus file as an ordinary test: no crash, no leak,
 * and the importer's status is FT_OK or FT_EINVAL. The fuzz target itself is compiled in.
 */
#define _POSIX_C_SOURCE 200809L
#include "fuzz/fuzz_jsonl.c"
#include "test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static void test_fuzz_jsonl_corpus(void **state)
{
    (void)state;
    int n_files, n_ok;
    tu_replay_corpus(FT_SOURCE_DIR "/tests/fuzz/corpus/jsonl", fuzz_jsonl_run, &n_files, &n_ok);
    assert_true(n_files >= 4);
    assert_true(n_ok >= 1); /* the valid seeds still import */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_jsonl_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
