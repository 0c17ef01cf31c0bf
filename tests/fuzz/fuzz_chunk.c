/*
 * fuzz_chunk.c - libFuzzer target for the chunk decoder (schema/chunk_dec.c, layout in chunk.h).
 *
 * A random blob almost never passes zstd and the checksum, so the input carries the DECODED
 * sections and the harness builds a valid stored chunk around them: it patches the split
 * section's size and checksum into the main header, compresses both sections, and derives the
 * index row from the main header. Every column decoder, dictionary and reference check is then
 * reachable. A flag selects raw mode instead, where the bytes are the stored form itself (stored
 * header and zstd paths).
 *
 * The codec (chunk.h) follows the magic: a decoded main section starting "FTC1" (built mode) or
 * a stored chunk starting "FTZ1" (raw mode) is read as codec 1, anything else as codec 2.
 *
 * Input:
 *   0        1   bit 0: decode split sizes (FT_READ_SPLITS); bit 1: raw mode
 *   1        1   n_fusers
 *   2        2   n_recipes (u16 LE)
 *   4        2*n_fusers  op count of each fuser (u16 LE)
 *   then, built mode: u32 LE main length, the decoded main section, the decoded split section
 *         (the rest; empty = no split section)
 *   then, raw mode: index row (i64 first_seq, u32 n_records, u32 n_calls, u64 raw_bytes,
 *         u64 checksum), the stored chunk (the rest)
 *
 * Oracles: the status is FT_OK or FT_ECORRUPT with a message naming the chunk; a decoded batch
 * keeps every documented invariant (ft_batch in ft_trace.h); decoding the same bytes again with
 * the same decoder gives the same batch; with split sizes, re-encoding the batch and decoding
 * that gives the same batch again.
 *
 * Build: tests/fuzz/build.sh. The corpus in tests/fuzz/corpus/chunk/ is replayed by
 * tests/test_fuzz_regress.c, which includes this file and calls fuzz_chunk_run(); seeds come
 * from tests/fuzz/make_seeds.py.
 */
#include "chunk.h"
#include "ft_common.h"

#include <zstd.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int fuzz_chunk_run(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Records in one built chunk: the recorder writes 65536 by default; larger ones decode too but
 * would only slow the fuzzer down. */
#define FUZZ_CHUNK_MAX_RECORDS (1u << 17)

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

static void wr64(uint8_t *p, uint64_t v)
{
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

/* Every documented invariant of a decoded batch; returns a digest of all of it (so every byte
 * is read), or sets *bad. */
static uint64_t check_batch(const ft_batch *b, const ft_chunk_limits *lim, int splits, int *bad)
{
    uint64_t h = ft_hash64(&b->n, sizeof b->n);
#define MIX(p, n) (h = ft_hash64_seed((p), (n), h))
    MIX(b->kind, b->n);
    MIX(b->seq, 8u * b->n);
    MIX(b->fuser, 4u * b->n);
    MIX(b->recipe, 4u * b->n);
    MIX(b->flags, 4u * b->n);
    MIX(b->device, 4u * b->n);
    MIX(b->first_rg, 4u * b->n);
    MIX(b->op_rg_off, 4u * (b->n + 1u));
    MIX(b->op_rg, b->op_rg_off[b->n]);
    MIX(b->n_tokens, 8u * b->n);
    MIX(b->sid, 8u * b->n);
    for (uint32_t i = 0; i < b->n; i++) {
        uint32_t fl = b->flags[i];
        int call = b->kind[i] == FT_REC_CALL;
        if (b->kind[i] == FT_REC_END) { /* a fuser end: a fuser, no other field */
            if (b->fuser[i] >= lim->n_fusers || (fl & ~(uint32_t)FT_CF_INSTANCE) ||
                b->op_rg_off[i + 1] != b->op_rg_off[i] || b->recipe[i] != -1)
                *bad = 1;
            continue;
        }
        if (!call && b->kind[i] != FT_REC_BACKWARD) *bad = 1;
        if (call && (fl & FT_CF_NEW_FUSER) && !(fl & FT_CF_INSTANCE)) *bad = 1;
        if (i && b->seq[i] <= b->seq[i - 1]) *bad = 1;
        uint32_t n_ops = b->op_rg_off[i + 1] - b->op_rg_off[i];
        if (b->op_rg_off[i + 1] < b->op_rg_off[i]) *bad = 1;
        if (call) {
            if (b->fuser[i] >= lim->n_fusers || n_ops != lim->fuser_n_ops[b->fuser[i]]) *bad = 1;
            if (b->recipe[i] < -1 || b->recipe[i] >= (int64_t)lim->n_recipes) *bad = 1;
            if ((b->recipe[i] >= 0) != ((fl & FT_CF_HAS_RECIPE) != 0)) *bad = 1;
            if (fl & FT_CF_HAS_STEP) MIX(&b->step[i], 8);
            if (fl & FT_CF_HAS_MB) MIX(&b->mb[i], 8);
            if (fl & FT_CF_HAS_FUSE_NS) MIX(&b->fuse_ns[i], 8);
            if (!(fl & FT_CF_HAS_SPLITS) && b->n_tokens[i] != 0) *bad = 1;
            if (b->n_tokens[i] < 0) *bad = 1;
        } else {
            if (n_ops || b->bwd_call[i] >= b->seq[i]) *bad = 1;
            if (fl & ~(uint32_t)FT_CF_HAS_NS) *bad = 1;
            MIX(&b->bwd_call[i], 8);
        }
        if (fl & FT_CF_HAS_NS) MIX(&b->ns[i], 8);
        uint32_t first = n_ops;
        for (uint32_t k = 0; k < n_ops; k++) {
            uint8_t v = b->op_rg[b->op_rg_off[i] + k];
            if (v > 1) *bad = 1;
            if (v && first == n_ops) first = k;
        }
        if (b->first_rg[i] != first) *bad = 1;
        if (b->phase[i] >= 0) {
            if (!(fl & FT_CF_HAS_PHASE) || (uint32_t)b->phase[i] >= b->n_phases) {
                *bad = 1;
            } else {
                const char *s = b->phases[b->phase[i]];
                MIX(s, strlen(s));
            }
        } else if (b->phase[i] != -1 || (fl & FT_CF_HAS_PHASE)) {
            *bad = 1;
        }
        if (splits) {
            uint32_t lo = b->splits_off[i], hi = b->splits_off[i + 1];
            if (hi < lo || (hi > lo && !(call && (fl & FT_CF_HAS_SPLITS)))) {
                *bad = 1;
                continue;
            }
            uint64_t sum = 0;
            for (uint32_t k = lo; k < hi; k++) {
                if (b->splits[k] < 0) *bad = 1;
                sum += (uint64_t)b->splits[k];
            }
            if (call && (fl & FT_CF_HAS_SPLITS) && sum != (uint64_t)b->n_tokens[i]) *bad = 1;
        }
    }
    if (splits) {
        MIX(b->splits_off, 4u * (b->n + 1u));
        MIX(b->splits, 8u * b->splits_off[b->n]);
    }
#undef MIX
    return h;
}

/* Re-encode a batch (decoded with split sizes) into blob; info gets its index row. */
static int reencode(const ft_batch *b, ft_buf *blob, ft_chunk_info *info)
{
    ft_chunk_enc *e;
    int rc = ft_chunk_enc_new(&e);
    if (rc) return rc;
    for (uint32_t i = 0; i < b->n && !rc; i++) {
        if (b->kind[i] == FT_REC_END) {
            rc = ft_chunk_enc_end(e, b->seq[i], b->fuser[i], (b->flags[i] & FT_CF_INSTANCE) != 0,
                                  b->sid[i]);
            continue;
        }
        if (b->kind[i] == FT_REC_BACKWARD) {
            ft_backward bw = {b->seq[i], b->bwd_call[i], (b->flags[i] & FT_CF_HAS_NS) != 0,
                              b->ns[i]};
            rc = ft_chunk_enc_backward(e, &bw);
            continue;
        }
        uint32_t fl = b->flags[i];
        ft_call c = {
            .seq = b->seq[i],
            .fuser = (fl & FT_CF_INSTANCE) ? b->sid[i] : b->fuser[i],
            .recipe = b->recipe[i],
            .flags = fl,
            .device = b->device[i],
            .n_op_rg = b->op_rg_off[i + 1] - b->op_rg_off[i],
            .op_rg = b->op_rg + b->op_rg_off[i],
            .n_splits = b->splits_off[i + 1] - b->splits_off[i],
            .m_splits = b->splits + b->splits_off[i],
            .step = b->step[i],
            .mb = b->mb[i],
            .phase = b->phase[i] >= 0 ? b->phases[b->phase[i]] : NULL,
            .ns = b->ns[i],
            .fuse_ns = b->fuse_ns[i],
        };
        rc = ft_chunk_enc_call(e, &c, b->fuser[i], b->recipe[i], b->n_tokens[i]);
    }
    ft_err err = {0, ""};
    if (!rc) rc = ft_chunk_enc_finish(e, 1, blob, info, &err);
    ft_chunk_enc_free(e);
    return rc;
}

/* Decode (data, len) twice with one decoder (and, with split sizes, its re-encoding once).
 * Returns the decoder's status, or FT_ESTATE when an oracle fails. */
static int decode_checked(const ft_chunk_info *info, const uint8_t *data, size_t len,
                          const ft_chunk_limits *lim, unsigned flags)
{
    ft_chunk_dec *d;
    int rc = ft_chunk_dec_new(&d);
    if (rc) return rc;
    ft_batch b;
    ft_err err = {0, ""};
    uint64_t h1 = 0;
    int bad = 0, splits = (flags & FT_READ_SPLITS) != 0;
    for (int pass = 0; pass < 2; pass++) { /* the second pass reuses the decoder's state */
        err = (ft_err){0, ""};
        int r = ft_chunk_decode(d, info, data, len, lim, flags, &b, &err);
        if (pass && r != rc) bad = 1;
        rc = r;
        if (rc && (rc != FT_ECORRUPT || err.rc != rc || !strstr(err.msg, "chunk "))) bad = 1;
        if (rc) continue;
        uint64_t h = check_batch(&b, lim, splits, &bad);
        if (pass && h != h1) bad = 1;
        h1 = h;
    }
    if (!rc && !bad && splits) {
        ft_buf blob = {0};
        ft_chunk_info info2;
        int r = reencode(&b, &blob, &info2);
        if (!r) {
            ft_chunk_dec *d2;
            r = ft_chunk_dec_new(&d2);
            if (!r) {
                ft_batch b2;
                info2.id = info->id;
                r = ft_chunk_decode(d2, &info2, blob.data, blob.len, lim, flags, &b2, &err);
                if (r || check_batch(&b2, lim, 1, &bad) != h1) bad = 1;
                ft_chunk_dec_free(d2);
            }
        }
        if (r == FT_ERANGE) r = FT_OK; /* a dictionary of the encoder is smaller: not a bug */
        if (r && r != FT_ENOMEM) bad = 1;
        ft_buf_free(&blob);
    }
    ft_chunk_dec_free(d);
    return bad ? FT_ESTATE : rc;
}

/* Compress src into dst[cap]; returns the frame size, 0 on failure. */
static size_t zframe(uint8_t *dst, size_t cap, const uint8_t *src, size_t n)
{
    size_t z = ZSTD_compress(dst, cap, src, n, 1);
    return ZSTD_isError(z) ? 0 : z;
}

/* Returns FT_OK when the chunk decodes, FT_EINVAL when it is rejected with a proper message (or
 * the input is not a harness input), anything else on a bug. */
int fuzz_chunk_run(const uint8_t *data, size_t size)
{
    if (size < 4) return FT_EINVAL;
    unsigned mode = data[0];
    uint32_t n_fusers = data[1], n_recipes = (uint32_t)data[2] | (uint32_t)data[3] << 8;
    size_t pos = 4;
    if (size - pos < 2u * n_fusers) return FT_EINVAL;
    uint32_t n_ops[256];
    for (uint32_t i = 0; i < n_fusers; i++)
        n_ops[i] = (uint32_t)data[pos + 2 * i] | (uint32_t)data[pos + 2 * i + 1] << 8;
    pos += 2u * n_fusers;
    ft_chunk_limits lim = {n_fusers, n_fusers ? n_ops : NULL, n_recipes, NULL};
    unsigned flags = (mode & 1) ? FT_READ_SPLITS : 0;
    ft_chunk_info info = {.id = 7, .codec = FT_CHUNK_CODEC};
    int rc;

    if (mode & 2) { /* raw: index row, then the stored chunk */
        if (size - pos < 32) return FT_EINVAL;
        const uint8_t *p = data + pos;
        info.first_seq = (int64_t)rd64(p);
        info.n_records = rd32(p + 8);
        info.n_calls = rd32(p + 12);
        info.raw_bytes = rd64(p + 16);
        info.checksum = rd64(p + 24);
        if (info.n_records > FUZZ_CHUNK_MAX_RECORDS) return FT_EINVAL;
        pos += 32;
        if (size - pos >= 4 && !memcmp(data + pos, "FTZ1", 4)) info.codec = 1;
        if (size - pos >= 4 && !memcmp(data + pos, "FTZ2", 4)) info.codec = 2;
        uint8_t *copy = malloc(size - pos + 1); /* exact-size heap copy: ASan sees overreads */
        if (!copy) return FT_ENOMEM;
        memcpy(copy, data + pos, size - pos);
        rc = decode_checked(&info, copy, size - pos, &lim, flags);
        free(copy);
    } else { /* built: decoded sections -> stored chunk */
        if (size - pos < 4) return FT_EINVAL;
        uint32_t main_len = rd32(data + pos);
        pos += 4;
        if (main_len > size - pos) return FT_EINVAL;
        size_t sp_len = size - pos - main_len;
        uint8_t *main = malloc(main_len + 1u);
        size_t zcap = ZSTD_compressBound(main_len) + ZSTD_compressBound(sp_len);
        uint8_t *blob = malloc(FT_CHUNK_STORED_HDR + zcap);
        if (!main || !blob) {
            free(main);
            free(blob);
            return FT_ENOMEM;
        }
        memcpy(main, data + pos, main_len);
        const uint8_t *sp = data + pos + main_len;
        if (main_len >= FT_CHUNK_MAIN_HDR) {
            wr32(main + 20, (uint32_t)sp_len);
            wr64(main + 24, sp_len ? ft_hash64(sp, sp_len) : 0);
            info.n_records = rd32(main + 4);
            info.n_calls = rd32(main + 8);
            info.first_seq = (int64_t)rd64(main + 12);
            if (!memcmp(main, "FTC1", 4)) info.codec = 1;
            if (!memcmp(main, "FTC2", 4)) info.codec = 2;
        }
        info.raw_bytes = (uint64_t)main_len + sp_len;
        info.checksum = ft_hash64(main, main_len);
        size_t mz = zframe(blob + FT_CHUNK_STORED_HDR, zcap, main, main_len);
        size_t sz = sp_len ? zframe(blob + FT_CHUNK_STORED_HDR + mz, zcap - mz, sp, sp_len) : 0;
        rc = FT_EINVAL;
        if (mz && (sz || !sp_len) && info.n_records <= FUZZ_CHUNK_MAX_RECORDS) {
            memcpy(blob, info.codec == 1 ? "FTZ1" : info.codec == 2 ? "FTZ2" : "FTZ3", 4);
            wr32(blob + 4, main_len);
            wr32(blob + 8, (uint32_t)mz);
            wr32(blob + 12, (uint32_t)sp_len);
            wr32(blob + 16, (uint32_t)sz);
            rc = decode_checked(&info, blob, FT_CHUNK_STORED_HDR + mz + sz, &lim, flags);
        }
        free(main);
        free(blob);
    }
    return rc == FT_ECORRUPT ? FT_EINVAL : rc;
}

#ifndef FT_FUZZ_REPLAY /* the test suite includes several targets in one binary */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int rc = fuzz_chunk_run(data, size);
    if (rc != FT_OK && rc != FT_EINVAL) abort();
    return 0;
}
#endif
