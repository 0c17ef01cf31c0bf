/*
 * fuzz_jsonl.c - libFuzzer target for the capture-jsonl importer.
 *
 * Each input is imported into the JSONL writer sink (writing to /dev/null), so the fuzzer drives
 * the line reader, jansson, every validation path and the writer. The only acceptable outcomes
 * are FT_OK and FT_EINVAL; anything else (and any crash or leak) is a bug.
 *
 * Build with clang: tests/fuzz/build.sh (not part of the normal build). The corpus in
 * tests/fuzz/corpus/jsonl/ is replayed as an ordinary test by tests/test_fuzz_regress.c, which
 * includes this file and calls fuzz_jsonl_run().
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_recorder.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int fuzz_jsonl_run(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Import data; returns the importer's status (FT_ENOMEM if the harness itself cannot run). */
int fuzz_jsonl_run(const uint8_t *data, size_t size)
{
    FILE *in = tmpfile();
    if (!in) return FT_ENOMEM;
    if (size && fwrite(data, 1, size, in) != size) {
        fclose(in);
        return FT_ENOMEM;
    }
    rewind(in);
    FILE *out = fopen("/dev/null", "w");
    ft_jsonl_writer *w = NULL;
    int rc = out ? ft_jsonl_writer_new(out, &w) : FT_ENOMEM;
    if (!rc) {
        ft_sink sink;
        ft_err err = {0, ""};
        ft_jsonl_writer_sink(w, &sink);
        rc = ft_jsonl_import(in, "fuzz", &sink, NULL, &err);
    }
    ft_jsonl_writer_free(w);
    if (out) fclose(out);
    fclose(in);
    return rc;
}

#ifndef FT_FUZZ_REPLAY /* the test suite includes several targets in one binary */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int rc = fuzz_jsonl_run(data, size);
    if (rc != FT_OK && rc != FT_EINVAL) abort();
    return 0;
}
#endif
