/*
 * fuzz_jsonl.c - libFuzzer target for the capture-jsonl importer.
 *
 * Each input is imported twice into the JSONL writer sink, once as `import` does (the simdjson
 * fast path for call and backward lines, jansson for the rest) and once through the general
 * (jansson) path alone, so the fuzzer drives the line reader, the zstd input, both parsers,
 * every validation path and the writer. The only acceptable outcomes are FT_OK and FT_EINVAL,
 * the same from both runs with the same message and the same output; anything else (and any
 * crash or leak) is a bug; a disagreement is returned as FT_ESTATE.
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
#include <string.h>

int fuzz_jsonl_run(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One import of data with flags; the writer's output in *out (free()), the message in err. */
static int import_once(const uint8_t *data, size_t size, unsigned flags, char **out,
                       size_t *out_len, ft_err *err)
{
    *out = NULL;
    *out_len = 0;
    FILE *in = tmpfile();
    if (!in) return FT_ENOMEM;
    if (size && fwrite(data, 1, size, in) != size) {
        fclose(in);
        return FT_ENOMEM;
    }
    rewind(in);
    FILE *of = open_memstream(out, out_len);
    ft_jsonl_writer *w = NULL;
    int rc = of ? ft_jsonl_writer_new(of, &w) : FT_ENOMEM;
    if (!rc) {
        ft_sink sink;
        ft_jsonl_writer_sink(w, &sink);
        rc = ft_jsonl_import_ex(in, "fuzz", &sink, NULL, flags, err);
    }
    ft_jsonl_writer_free(w);
    if (of) fclose(of);
    fclose(in);
    return rc;
}

/* Import data both ways; returns the importer's status, FT_ESTATE when the two runs disagree
 * (FT_ENOMEM if the harness itself cannot run). */
int fuzz_jsonl_run(const uint8_t *data, size_t size)
{
    char *a = NULL, *g = NULL;
    size_t na = 0, ng = 0;
    ft_err ea = {0, ""}, eg = {0, ""};
    int rc = import_once(data, size, 0, &a, &na, &ea);
    int rg = import_once(data, size, FT_JSONL_NO_FAST_PATH, &g, &ng, &eg);
    if (rc != FT_ENOMEM && rg != FT_ENOMEM &&
        (rc != rg || strcmp(ea.msg, eg.msg) || na != ng || (na && memcmp(a, g, na)))) {
        fprintf(stderr, "fuzz_jsonl: the import paths disagree: %d '%s' / %d '%s'\n", rc, ea.msg,
                rg, eg.msg);
        rc = FT_ESTATE;
    }
    free(a);
    free(g);
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
