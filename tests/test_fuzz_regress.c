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
    int n_files, n_ok;
    tu_replay_corpus(FT_SOURCE_DIR "/tests/fuzz/corpus/jsonl", fuzz_jsonl_run, &n_files, &n_ok);
    assert_true(n_files >= 4);
    assert_true(n_ok >= 1); /* the valid seeds still import */
}

/* Chunk decoder: the seeds are real synthetic-trace chunks (they must decode) plus what the
 * fuzzer found; damaged ones must give FT_ECORRUPT with a message. */
static void test_fuzz_chunk_corpus(void **state)
{
    (void)state;
    int n_files, n_ok;
    tu_replay_corpus(FT_SOURCE_DIR "/tests/fuzz/corpus/chunk", fuzz_chunk_run, &n_files, &n_ok);
    assert_true(n_files >= 15);
    assert_true(n_ok >= 10); /* the seed chunks still decode (built and raw modes) */
}

/* Packed-record batches against a recorder on a scratch trace, read back record by record. */
static void test_fuzz_packed_corpus(void **state)
{
    (void)state;
    int n_files, n_ok;
    tu_replay_corpus(FT_SOURCE_DIR "/tests/fuzz/corpus/packed", fuzz_packed_run, &n_files, &n_ok);
    assert_true(n_files >= 8);
    assert_true(n_ok >= 4); /* the valid seed batches still record and read back */
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
