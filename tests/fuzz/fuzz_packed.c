/*
 * fuzz_packed.c - libFuzzer target for ft_rec_append_packed (recorder/rec_packed.c, record
 * layout in ft_recorder.h), the batch API the Python capture hook calls through ctypes.
 *
 * Each input opens a recorder on a fresh trace file, declares the fusers and recipes below,
 * appends the packed records and closes. When everything was accepted the trace is read back and
 * every record must come out as it went in (so the fuzzer also drives the recorder's checks and
 * the chunk encoder with whatever the packed parser lets through).
 *
 * Input: byte 0: records per chunk (0 = the default; small values make many chunks, exercising
 * flushes and chunk boundaries), then the packed buffer (copied to an 8-byte-aligned heap block
 * of exactly its size, so ASan sees any overread).
 *
 * Oracles: the status is FT_OK, or FT_EINVAL / FT_ERANGE with a message naming the record; the
 * trace written is readable, verifies and holds exactly the records accepted.
 *
 * Files go to FT_BINARY_DIR when the test suite compiles this file, else to $TMPDIR (or the
 * current directory). Build: tests/fuzz/build.sh; the corpus in tests/fuzz/corpus/packed/ is
 * replayed by tests/test_fuzz_regress.c through fuzz_packed_run().
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_recorder.h"
#include "ft_trace.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fuzz_packed_run(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The declarations every input records against: (id, op count). Op counts 1..12 cover
 * one-op fusers, byte-sized and multi-byte op_rg patterns. */
static const struct {
    int64_t id;
    const char *ops;
    uint32_t n_ops;
} fuzz_fusers[] = {
    {1,
     "[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":4}},{\"type\":\"ScaledSwiGLU\"},"
     "{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":4}}]",
     3},
    {2, "[{\"type\":\"BasicLinear\"}]", 1},
    {5, "[{\"type\":\"Identity\"}]", 1}, /* the capture stream wants at least one op */
    {9,
     "[{\"type\":\"LayerNorm\"},{\"type\":\"BasicLinear\"},{\"type\":\"Bias\"},{\"type\":"
     "\"GELU\"},{\"type\":\"BasicLinear\"},{\"type\":\"Bias\"},{\"type\":\"Dropout\"},{\"type\":"
     "\"AddExtraInput\"},{\"type\":\"RMSNorm\"},{\"type\":\"BasicLinear\"},{\"type\":\"SiLU\"},"
     "{\"type\":\"Identity\"}]",
     12},
};
static const struct {
    int64_t id, obj;
    const char *type, *attrs;
} fuzz_recipes[] = {
    {1, 100, "NVFP4BlockScaling", "{\"disable_rht\":false}"},
    {2, 100, "NVFP4BlockScaling", "{\"disable_rht\":true}"},
    {3, 200, "MXFP8BlockScaling", "{}"},
};

/* One packed record as appended (fields the round trip compares). */
typedef struct {
    int backward;
    int64_t seq, a, recipe, step, mb, ns, fuse_ns;
    uint32_t flags, n_rg;
    int32_t device, n_sp;
    const uint8_t *rg;
    const uint8_t *sp; /* n_sp int64 */
    const char *phase;
} packed_rec;

static int64_t ld64(const uint8_t *p)
{
    int64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint32_t ld32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Record at *off of an accepted buffer (lengths already checked by the recorder). */
static void unpack(const uint8_t *p, size_t *off, packed_rec *r)
{
    const uint8_t *h = p + *off;
    memset(r, 0, sizeof *r);
    r->seq = ld64(h);
    r->a = ld64(h + 8);
    r->recipe = ld64(h + 16);
    r->step = ld64(h + 24);
    r->mb = ld64(h + 32);
    r->ns = ld64(h + 40);
    r->fuse_ns = ld64(h + 48);
    r->flags = ld32(h + 56);
    r->device = (int32_t)ld32(h + 60);
    r->n_rg = ld32(h + 64);
    r->n_sp = (int32_t)ld32(h + 68);
    r->backward = ld32(h + 76) == FT_REC_BACKWARD;
    *off += 80;
    if (r->backward) return;
    /* HAS_SPLITS follows n_splits (-1 = absent), whatever the flags field says */
    r->flags = (r->flags & ~(uint32_t)FT_CF_HAS_SPLITS) | (r->n_sp >= 0 ? FT_CF_HAS_SPLITS : 0);
    r->rg = p + *off;
    *off += (r->n_rg + 7u) & ~7u;
    r->sp = p + *off;
    *off += r->n_sp > 0 ? 8u * (size_t)r->n_sp : 0u;
    if (r->flags & FT_CF_HAS_PHASE) {
        r->phase = (const char *)p + *off;
        *off += (strlen(r->phase) + 1u + 7u) & ~(size_t)7u;
    }
}

/* Decoded record i of batch b equals packed record r. */
static int same(ft_trace *t, const ft_batch *b, uint32_t i, const packed_rec *r)
{
    if (r->backward) {
        ft_backward w;
        ft_batch_backward(b, i, &w);
        return b->kind[i] == FT_REC_BACKWARD && w.seq == r->seq && w.call == r->a &&
               w.has_ns == (r->flags != 0) && (!w.has_ns || w.ns == r->ns);
    }
    ft_call c;
    ft_batch_call(t, b, i, &c);
    uint32_t fl = r->flags;
    if (b->kind[i] != FT_REC_CALL || c.seq != r->seq || c.fuser != r->a || c.flags != fl ||
        c.device != r->device || c.n_op_rg != r->n_rg || memcmp(c.op_rg, r->rg, r->n_rg))
        return 0;
    if ((fl & FT_CF_HAS_RECIPE) && c.recipe != r->recipe) return 0;
    if ((fl & FT_CF_HAS_STEP) && c.step != r->step) return 0;
    if ((fl & FT_CF_HAS_MB) && c.mb != r->mb) return 0;
    if ((fl & FT_CF_HAS_NS) && c.ns != r->ns) return 0;
    if ((fl & FT_CF_HAS_FUSE_NS) && c.fuse_ns != r->fuse_ns) return 0;
    if ((fl & FT_CF_HAS_PHASE) && strcmp(c.phase, r->phase)) return 0;
    if (fl & FT_CF_HAS_SPLITS) {
        uint32_t k = r->n_sp > 0 ? (uint32_t)r->n_sp : 0;
        if (c.n_splits != k || (k && memcmp(c.m_splits, r->sp, 8u * k))) return 0;
    }
    return 1;
}

/* Read the trace at path back: it verifies and holds exactly the n records of buf. */
static int read_back(const char *path, const uint8_t *buf, uint32_t n)
{
    ft_trace *t;
    ft_err err = {0, ""};
    int rc = ft_trace_open(path, FT_OPEN_READ, &t, &err);
    if (rc) return FT_ESTATE;
    ft_reader *rd = NULL;
    int ok = ft_trace_verify(t, NULL) == FT_OK && !ft_reader_open(t, FT_READ_SPLITS, &rd);
    size_t off = 0;
    uint32_t seen = 0;
    const ft_batch *b;
    while (ok && !(rc = ft_reader_next(rd, &b)) && b) {
        for (uint32_t i = 0; i < b->n && ok; i++, seen++) {
            packed_rec r;
            if (seen >= n) {
                ok = 0;
                break;
            }
            unpack(buf, &off, &r);
            ok = same(t, b, i, &r);
        }
    }
    if (rc || seen != n) ok = 0;
    ft_reader_close(rd);
    ft_trace_close(t);
    return ok ? FT_OK : FT_ESTATE;
}

/* Returns FT_OK when every record was accepted and read back, FT_EINVAL when the buffer was
 * rejected with a message, anything else on a bug. */
int fuzz_packed_run(const uint8_t *data, size_t size)
{
    if (size < 1) return FT_EINVAL;
    ft_rec_opts opts = {data[0], 0};
    size_t n_bytes = size - 1;
    uint8_t *buf = malloc(n_bytes ? n_bytes : 1u); /* ends at n_bytes, for ASan; malloc aligns */
    if (!buf) return FT_ENOMEM;
    if (n_bytes) memcpy(buf, data + 1, n_bytes);

    char path[4096];
#ifdef FT_BINARY_DIR
    const char *dir = FT_BINARY_DIR;
#else
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : ".";
#endif
    snprintf(path, sizeof path, "%s/fuzz_packed.%ld.ftdb", dir, (long)getpid());
    ft_trace_remove(path);

    ft_err err = {0, ""};
    ft_rec *r;
    int rc = ft_rec_open(path, &opts, &r, &err);
    if (rc) {
        free(buf);
        return FT_EIO;
    }
    for (size_t i = 0; i < sizeof fuzz_fusers / sizeof *fuzz_fusers && !rc; i++)
        rc = ft_rec_fuser(r, fuzz_fusers[i].id, NULL, fuzz_fusers[i].ops);
    for (size_t i = 0; i < sizeof fuzz_recipes / sizeof *fuzz_recipes && !rc; i++)
        rc = ft_rec_recipe(r, fuzz_recipes[i].id, fuzz_recipes[i].type, fuzz_recipes[i].obj,
                           fuzz_recipes[i].attrs);
    if (rc) {
        ft_rec_abort(r);
        ft_trace_remove(path);
        free(buf);
        return FT_ESTATE;
    }
    uint32_t n_done = 0;
    rc = ft_rec_append_packed(r, buf, n_bytes, &n_done, &err);
    /* a rejected record: a clean error naming the record; the records before it still land */
    int bad = rc && ((rc != FT_EINVAL && rc != FT_ERANGE) || err.rc != rc ||
                     !strstr(err.msg, "packed record"));
    if (ft_rec_close(r) != FT_OK || read_back(path, buf, n_done) != FT_OK) bad = 1;
    ft_trace_remove(path);
    free(buf);
    if (bad) return FT_ESTATE;
    return rc ? FT_EINVAL : FT_OK;
}

#ifndef FT_FUZZ_REPLAY /* the test suite includes several targets in one binary */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int rc = fuzz_packed_run(data, size);
    if (rc != FT_OK && rc != FT_EINVAL) abort();
    return 0;
}
#endif
