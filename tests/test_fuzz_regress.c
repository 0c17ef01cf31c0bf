/*
 * test_fuzz_regress.c - replays every fuzz corpus file as an ordinary test: no crash, no leak,
 * and each target's status is FT_OK or FT_EINVAL (a clean rejection; the targets turn every
 * oracle failure into another status). The fuzz targets themselves are compiled in: the JSONL
 * importer, the chunk decoder and the packed-record batch API (the fuser model's corpus is
 * replayed by test_tefuser).
 */
#define _POSIX_C_SOURCE 200809L
#define FT_FUZZ_REPLAY  1
#include "fuzz/fuzz_chunk.c"
#include "fuzz/fuzz_jsonl.c"
#include "fuzz/fuzz_packed.c"
#include "test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static void test_fuzz_jsonl_corpus(void **state)
{
    (void)state;
    assert_true(tu_replay_corpus("jsonl", fuzz_jsonl_run) >= 4);
}

/* Chunk decoder: the seeds are real synthetic-trace chunks (they must decode) plus what the
 * fuzzer found; damaged ones must give FT_ECORRUPT with a message. */
static void test_fuzz_chunk_corpus(void **state)
{
    (void)state;
    assert_true(tu_replay_corpus("chunk", fuzz_chunk_run) >= 15);
}

/* Packed-record batches against a recorder on a scratch trace, read back record by record. */
static void test_fuzz_packed_corpus(void **state)
{
    (void)state;
    assert_true(tu_replay_corpus("packed", fuzz_packed_run) >= 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_jsonl_corpus),
        cmocka_unit_test(test_fuzz_chunk_corpus),
        cmocka_unit_test(test_fuzz_packed_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
