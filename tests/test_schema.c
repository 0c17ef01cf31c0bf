/*
 * test_schema.c - the trace file: the chunk codec on randomized records (seed printed), decoder
 * robustness against damaged bytes, open errors (foreign database, not SQLite, newer format,
 * existing file), damage detection in chunks and in every small table (by open, verify and
 * export), dedup and canonical JSON, the reader's range, and the verify/info commands.
 */
#define _POSIX_C_SOURCE 200809L
#include "chunk.h"
#include "ft_recorder.h"
#include "stream_gen.h"
#include "test_util.h"
#include "trace_int.h"

#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <jansson.h>
#include <zstd.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static char tmpdir[512];

static void tmp_path(char *buf, size_t cap, const char *name)
{
    tu_dir_path(buf, cap, tmpdir, name);
}

static int setup_dir(void **state)
{
    (void)state;
    return tu_dir_fresh(tmpdir, sizeof tmpdir, "test_schema_tmp");
}

static int teardown_dir(void **state)
{
    (void)state;
    return tu_dir_remove(tmpdir);
}

/* ---- randomized codec round trip ---------------------------------------------------------- */
#define RT_FUSERS 7

typedef struct rt_rec {
    int kind;
    ft_call c;
    ft_backward b;
    uint32_t fuser;
    int32_t recipe;
    int64_t n_tokens;
    uint8_t op_rg[8];
    int64_t *splits;
} rt_rec;

static uint64_t rnd(gen_rng *r, uint64_t n)
{
    return n ? gen_next(r) % n : 0;
}

static int64_t rnd_i64(gen_rng *r)
{
    switch (rnd(r, 4)) {
    case 0:
        return (int64_t)rnd(r, 10);
    case 1:
        return -(int64_t)rnd(r, 1000);
    case 2:
        return (int64_t)gen_next(r);
    default:
        return rnd(r, 2) ? INT64_MAX - (int64_t)rnd(r, 3) : INT64_MIN + (int64_t)rnd(r, 3);
    }
}

static const char *const phases[] = {"fwd", "recompute", "eval", "", "a much longer phase name"};
static const uint32_t rt_n_ops[RT_FUSERS] = {3, 5, 1, 0, 8, 3, 2};

/* n random records (calls with every optional field on or off, backward events, split vectors
 * repeated, mutated, empty and huge-valued). */
static rt_rec *random_records(gen_rng *g, uint32_t n)
{
    rt_rec *v = calloc(n, sizeof *v);
    assert_non_null(v);
    int64_t seq = rnd(g, 2) ? rnd_i64(g) / 4 : 0;
    int64_t last_call = 0;
    int have_call = 0;
    int64_t *prev = NULL;
    uint32_t prev_k = 0;
    for (uint32_t i = 0; i < n; i++) {
        rt_rec *r = &v[i];
        seq += 1 + (rnd(g, 10) == 0 ? (int64_t)rnd(g, 1u << 20) : 0);
        if (have_call && rnd(g, 4) == 0) {
            r->kind = FT_REC_BACKWARD;
            r->b.seq = seq;
            r->b.call = last_call;
            r->b.has_ns = (int)rnd(g, 2);
            r->b.ns = rnd_i64(g);
            continue;
        }
        r->kind = FT_REC_CALL;
        ft_call *c = &r->c;
        c->seq = seq;
        last_call = seq;
        have_call = 1;
        r->fuser = (uint32_t)rnd(g, RT_FUSERS);
        c->flags = (uint32_t)rnd(g, 1u << 13);
        r->recipe = (c->flags & FT_CF_HAS_RECIPE) ? (int32_t)rnd(g, 5) : -1;
        c->device = rnd(g, 3) ? 0 : (int32_t)rnd_i64(g);
        c->n_op_rg = rt_n_ops[r->fuser];
        for (uint32_t k = 0; k < c->n_op_rg; k++)
            r->op_rg[k] = (uint8_t)rnd(g, 2);
        c->op_rg = r->op_rg;
        c->step = rnd_i64(g);
        c->mb = rnd(g, 2) ? (int64_t)rnd(g, 4) : rnd_i64(g);
        c->phase = phases[rnd(g, FT_ARRAY_LEN(phases))];
        c->ns = rnd_i64(g);
        c->fuse_ns = rnd_i64(g);
        if (c->flags & FT_CF_HAS_SPLITS) {
            uint32_t k;
            if (prev && rnd(g, 2)) { /* repeat or mutate the previous vector */
                k = prev_k;
                r->splits = malloc((k ? k : 1) * sizeof(int64_t));
                memcpy(r->splits, prev, k * sizeof(int64_t));
                if (k && rnd(g, 2)) r->splits[rnd(g, k)] += (int64_t)rnd(g, 50);
            } else {
                k = (uint32_t)(rnd(g, 5) == 0 ? 0 : rnd(g, 70));
                r->splits = malloc((k ? k : 1) * sizeof(int64_t));
                int64_t lim = rnd(g, 8) == 0 ? (INT64_MAX / 80) : 5000;
                for (uint32_t m = 0; m < k; m++)
                    r->splits[m] = rnd(g, 6) == 0 ? 0 : (int64_t)rnd(g, (uint64_t)lim);
            }
            c->n_splits = k;
            c->m_splits = r->splits;
            for (uint32_t m = 0; m < k; m++)
                r->n_tokens += r->splits[m];
            prev = r->splits;
            prev_k = k;
        }
    }
    return v;
}

static void free_records(rt_rec *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        free(v[i].splits);
    free(v);
}

static void check_batch(const ft_batch *b, const rt_rec *v, uint32_t n, int with_splits)
{
    assert_int_equal(b->n, n);
    for (uint32_t i = 0; i < n; i++) {
        const rt_rec *r = &v[i];
        assert_int_equal(b->kind[i], r->kind);
        if (r->kind == FT_REC_BACKWARD) {
            assert_true(b->seq[i] == r->b.seq);
            assert_true(b->bwd_call[i] == r->b.call);
            assert_int_equal(b->flags[i], r->b.has_ns ? FT_CF_HAS_NS : 0);
            if (r->b.has_ns) assert_true(b->ns[i] == r->b.ns);
            assert_int_equal(b->op_rg_off[i + 1] - b->op_rg_off[i], 0);
            assert_int_equal(b->recipe[i], -1);
            continue;
        }
        const ft_call *c = &r->c;
        uint32_t fl = c->flags;
        assert_true(b->seq[i] == c->seq);
        assert_int_equal(b->flags[i], fl);
        assert_int_equal(b->fuser[i], r->fuser);
        assert_int_equal(b->recipe[i], r->recipe);
        assert_int_equal(b->device[i], c->device);
        uint32_t no = b->op_rg_off[i + 1] - b->op_rg_off[i], first = c->n_op_rg;
        assert_int_equal(no, c->n_op_rg);
        for (uint32_t k = 0; k < no; k++) {
            assert_int_equal(b->op_rg[b->op_rg_off[i] + k], c->op_rg[k]);
            if (c->op_rg[k] && first == c->n_op_rg) first = k;
        }
        assert_int_equal(b->first_rg[i], first);
        if (fl & FT_CF_HAS_STEP) assert_true(b->step[i] == c->step);
        if (fl & FT_CF_HAS_MB) assert_true(b->mb[i] == c->mb);
        if (fl & FT_CF_HAS_NS) assert_true(b->ns[i] == c->ns);
        if (fl & FT_CF_HAS_FUSE_NS) assert_true(b->fuse_ns[i] == c->fuse_ns);
        if (fl & FT_CF_HAS_PHASE)
            assert_string_equal(b->phases[b->phase[i]], c->phase);
        else
            assert_int_equal(b->phase[i], -1);
        assert_true(b->n_tokens[i] == ((fl & FT_CF_HAS_SPLITS) ? r->n_tokens : 0));
        if (with_splits && (fl & FT_CF_HAS_SPLITS)) {
            assert_int_equal(b->splits_off[i + 1] - b->splits_off[i], c->n_splits);
            for (uint32_t m = 0; m < c->n_splits; m++)
                assert_true(b->splits[b->splits_off[i] + m] == c->m_splits[m]);
        } else if (with_splits) {
            assert_int_equal(b->splits_off[i + 1], b->splits_off[i]);
        } else {
            assert_null(b->splits);
        }
    }
}

static const ft_chunk_limits rt_limits = {RT_FUSERS, rt_n_ops, 5, NULL};

static void encode_records(ft_chunk_enc *e, const rt_rec *v, uint32_t n, ft_buf *blob,
                           ft_chunk_info *info)
{
    for (uint32_t i = 0; i < n; i++) {
        if (v[i].kind == FT_REC_BACKWARD)
            assert_int_equal(ft_chunk_enc_backward(e, &v[i].b), FT_OK);
        else
            assert_int_equal(ft_chunk_enc_call(e, &v[i].c, v[i].fuser, v[i].recipe, v[i].n_tokens),
                             FT_OK);
    }
    ft_err err = {0};
    assert_int_equal(ft_chunk_enc_finish(e, 1, blob, info, &err), FT_OK);
    info->id = 1;
}

static uint64_t test_seed(void)
{
    const char *s = getenv("FT_TEST_SEED");
    int64_t v;
    if (s && !ft_parse_i64(s, &v)) return (uint64_t)v;
    return (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
}

static void test_codec_round_trip_random(void **state)
{
    (void)state;
    uint64_t seed = test_seed();
    printf("test_codec_round_trip_random: seed %llu (FT_TEST_SEED=%llu reproduces)\n",
           (unsigned long long)seed, (unsigned long long)seed);
    gen_rng g = {seed};
    ft_chunk_enc *e = NULL;
    ft_chunk_dec *d = NULL;
    assert_int_equal(ft_chunk_enc_new(&e), FT_OK);
    assert_int_equal(ft_chunk_dec_new(&d), FT_OK);
    ft_buf blob = {0};
    for (int round = 0; round < 40; round++) {
        uint32_t n = 1 + (uint32_t)rnd(&g, round < 30 ? 300 : 5000);
        rt_rec *v = random_records(&g, n);
        ft_chunk_info info;
        encode_records(e, v, n, &blob, &info);
        ft_batch b;
        ft_err err = {0};
        for (int with = 0; with < 2; with++) {
            int rc = ft_chunk_decode(d, &info, blob.data, blob.len, &rt_limits,
                                     with ? FT_READ_SPLITS : 0, &b, &err);
            if (rc) fail_msg("seed %llu round %d: %s", (unsigned long long)seed, round, err.msg);
            check_batch(&b, v, n, with);
        }
        free_records(v, n);
    }
    ft_buf_free(&blob);
    ft_chunk_enc_free(e);
    ft_chunk_dec_free(d);
}

/* Damaged stored bytes: every outcome is an error code (never a crash, never a silent change,
 * because the checksum covers every decoded byte). */
static void test_codec_damaged_bytes(void **state)
{
    (void)state;
    uint64_t seed = test_seed();
    printf("test_codec_damaged_bytes: seed %llu\n", (unsigned long long)seed);
    gen_rng g = {seed};
    ft_chunk_enc *e = NULL;
    ft_chunk_dec *d = NULL;
    assert_int_equal(ft_chunk_enc_new(&e), FT_OK);
    assert_int_equal(ft_chunk_dec_new(&d), FT_OK);
    ft_buf blob = {0};
    uint32_t n = 400;
    rt_rec *v = random_records(&g, n);
    ft_chunk_info info;
    encode_records(e, v, n, &blob, &info);
    uint8_t *copy = malloc(blob.len);
    for (int trial = 0; trial < 600; trial++) {
        memcpy(copy, blob.data, blob.len);
        size_t len = blob.len;
        int what = (int)rnd(&g, 3);
        if (what == 0) {
            copy[rnd(&g, len)] ^= (uint8_t)(1u << rnd(&g, 8));
        } else if (what == 1) {
            for (int k = 0; k < 8; k++)
                copy[rnd(&g, len)] = (uint8_t)gen_next(&g);
        } else {
            len = rnd(&g, len);
        }
        ft_batch b;
        ft_err err = {0};
        int rc = ft_chunk_decode(d, &info, copy, len, &rt_limits, FT_READ_SPLITS, &b, &err);
        if (rc == FT_OK) {
            check_batch(&b, v, n, 1); /* a flip zstd ignores must not change the answer */
        } else {
            assert_int_equal(rc, FT_ECORRUPT);
            assert_non_null(strstr(err.msg, "chunk 1"));
        }
    }
    free(copy);
    free_records(v, n);
    ft_buf_free(&blob);
    ft_chunk_enc_free(e);
    ft_chunk_dec_free(d);
}

/* A chunk of a codec this build does not know is refused with a hint, not misread. */
static void test_codec_unknown_refused(void **state)
{
    (void)state;
    gen_rng g = {5};
    ft_chunk_enc *e = NULL;
    ft_chunk_dec *d = NULL;
    assert_int_equal(ft_chunk_enc_new(&e), FT_OK);
    assert_int_equal(ft_chunk_dec_new(&d), FT_OK);
    ft_buf blob = {0};
    rt_rec *v = random_records(&g, 50);
    ft_chunk_info info;
    encode_records(e, v, 50, &blob, &info);
    assert_int_equal(info.codec, 3);
    ft_batch b;
    ft_err err = {0};
    info.codec = 4;
    assert_int_equal(ft_chunk_decode(d, &info, blob.data, blob.len, &rt_limits, 0, &b, &err),
                     FT_ECORRUPT);
    assert_non_null(strstr(err.msg, "unknown chunk codec 4"));
    assert_non_null(strstr(err.msg, "reads codecs 1 to 3"));
    for (uint32_t c = 1; c <= 2; c++) { /* a codec-3 chunk labelled 1 or 2 is not read as one */
        info.codec = c;
        assert_int_equal(ft_chunk_decode(d, &info, blob.data, blob.len, &rt_limits, 0, &b, &err),
                         FT_ECORRUPT);
    }
    info.codec = 3;
    assert_int_equal(ft_chunk_decode(d, &info, blob.data, blob.len, &rt_limits, 0, &b, &err),
                     FT_OK);
    free_records(v, 50);
    ft_buf_free(&blob);
    ft_chunk_enc_free(e);
    ft_chunk_dec_free(d);
}

/* ---- decompression bombs: crafted chunks with valid checksums ---------------------------------
 */
typedef struct bomb {
    ft_buf main, sp;
} bomb;

static void b_varint(ft_buf *b, uint64_t v)
{
    assert_int_equal(ft_buf_reserve(b, 10), FT_OK);
    while (v >= 0x80) {
        b->data[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->data[b->len++] = (uint8_t)v;
}

static void b_bytes(ft_buf *b, const void *p, size_t n)
{
    assert_int_equal(ft_buf_append(b, p, n), FT_OK);
}

static void b_u32(ft_buf *b, uint32_t v)
{
    b_bytes(b, &v, 4); /* the test runs on little-endian hosts only (the format is LE) */
}

/* A codec-2 main section (104-byte header, 16 columns) of n calls (consecutive seq from 0,
 * fuser 0, flags fl, op_rg entry 1, every other column 0) with the op_rg dictionary dict (n_oprg
 * entries); columns as single runs. */
static void bomb_main(bomb *bm, uint32_t n, uint32_t fl, const ft_buf *dict, uint32_t n_oprg)
{
    ft_buf *m = &bm->main;
    m->len = 0;
    assert_int_equal(ft_buf_reserve(m, 104), FT_OK);
    memset(m->data, 0, 104);
    m->len = 104;
    memcpy(m->data, "FTC2", 4);
    memcpy(m->data + 4, &n, 4);
    memcpy(m->data + 8, &n, 4);
    memcpy(m->data + 36, &n_oprg, 4);
    uint32_t lens[16];
    for (int c = 0; c < 14; c++) {
        size_t before = m->len;
        uint8_t mode = 1;
        b_bytes(m, &mode, 1);
        if (c != 13) { /* BWD: no backward records, no values */
            b_varint(m, c == 4 ? fl : c == 6 ? 1 : 0);
            b_varint(m, n - 1);
        }
        lens[c] = (uint32_t)(m->len - before);
    }
    lens[14] = 0;
    lens[15] = (uint32_t)dict->len;
    b_bytes(m, dict->data, dict->len);
    memcpy(m->data + 40, lens, sizeof lens);
}

/* Store the bomb's sections as one chunk (split section checksum patched in) and decode it;
 * returns the status and the growth of the peak RSS in MB. */
static int bomb_decode(bomb *bm, const ft_chunk_limits *lim, ft_err *err, long *rss_mb)
{
    ft_buf *m = &bm->main, *sp = &bm->sp;
    uint32_t sp_len = (uint32_t)sp->len;
    uint64_t sp_sum = sp_len ? ft_hash64(sp->data, sp_len) : 0;
    memcpy(m->data + 20, &sp_len, 4);
    memcpy(m->data + 24, &sp_sum, 8);
    ft_chunk_info info = {.id = 42, .first_seq = 0, .codec = 2};
    memcpy(&info.n_records, m->data + 4, 4);
    memcpy(&info.n_calls, m->data + 8, 4);
    info.raw_bytes = m->len + sp_len;
    info.checksum = ft_hash64(m->data, m->len);
    size_t cap = 20 + ZSTD_compressBound(m->len) + ZSTD_compressBound(sp_len);
    uint8_t *blob = malloc(cap);
    assert_non_null(blob);
    size_t z1 = ZSTD_compress(blob + 20, cap - 20, m->data, m->len, 19);
    size_t z2 = sp_len ? ZSTD_compress(blob + 20 + z1, cap - 20 - z1, sp->data, sp_len, 19) : 0;
    assert_false(ZSTD_isError(z1) || ZSTD_isError(z2));
    uint32_t hdr[4] = {(uint32_t)m->len, (uint32_t)z1, sp_len, (uint32_t)z2};
    memcpy(blob, "FTZ2", 4);
    memcpy(blob + 4, hdr, 16);
    printf("  bomb: %zu stored bytes claim %zu + %u decoded\n", 20 + z1 + z2, m->len, sp_len);
    /* decoded in a child, whose peak RSS starts at what it shares with this process */
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rusage ru0, ru1;
        getrusage(RUSAGE_SELF, &ru0);
        ft_chunk_dec *d = NULL;
        ft_batch b;
        int rc = ft_chunk_dec_new(&d);
        if (!rc) rc = ft_chunk_decode(d, &info, blob, 20 + z1 + z2, lim, FT_READ_SPLITS, &b, err);
        getrusage(RUSAGE_SELF, &ru1);
        long out[2] = {rc, (ru1.ru_maxrss - ru0.ru_maxrss) / 1024};
        if (write(fd[1], out, sizeof out) != sizeof out ||
            write(fd[1], err->msg, sizeof err->msg) != (ssize_t)sizeof err->msg)
            _exit(1);
        _exit(0);
    }
    close(fd[1]);
    long got[2] = {-1, -1};
    assert_int_equal(read(fd[0], got, sizeof got), (ssize_t)sizeof got);
    assert_int_equal(read(fd[0], err->msg, sizeof err->msg), (ssize_t)sizeof err->msg);
    close(fd[0]);
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    free(blob);
    *rss_mb = got[1];
    return (int)got[0];
}

/* issue 14 item 2: (1) an op_rg dictionary of unreferenced 65535-op entries whose decoded main
 * section exceeds what its records can hold; (2) one within that cap whose expansion exceeds
 * the per-chunk op_rg total; (3) split back-references past the per-chunk split total. Each is
 * refused naming the chunk, and the peak RSS grows by no more than the limits allow. */
static void test_codec_bombs(void **state)
{
    (void)state;
    bomb bm = {{0}, {0}};
    ft_buf dict = {0};
    ft_err err = {0};
    long rss;
    uint32_t ops[1] = {65535};
    ft_chunk_limits lim = {1, ops, 0, NULL};
    uint8_t zeros[8192] = {0};

    /* (1) 4096 entries x 8 KB: 33 MB decoded main, 268 MB once expanded */
    for (uint32_t i = 0; i < 4096; i++) {
        b_varint(&dict, 65535);
        b_bytes(&dict, zeros, 8192);
    }
    bomb_main(&bm, 4096, 0, &dict, 4096);
    assert_true(bm.main.len > ft_chunk_main_cap(4096, 4096));
    int rc = bomb_decode(&bm, &lim, &err, &rss);
    printf("  (1) %s; peak RSS +%ld MB\n", ft_err_msg(&err), rss);
    assert_int_equal(rc, FT_ECORRUPT);
    assert_non_null(strstr(ft_err_msg(&err), "chunk 42"));
    assert_non_null(strstr(ft_err_msg(&err), "can hold"));
    assert_true(rss < 16);

    /* (2) 2048 entries x 8 KB: 16.8 MB decoded (within the cap), 134M values expanded */
    dict.len = 0;
    for (uint32_t i = 0; i < 2048; i++) {
        b_varint(&dict, 65535);
        b_bytes(&dict, zeros, 8192);
    }
    bomb_main(&bm, 2048, 0, &dict, 2048);
    assert_true(bm.main.len <= ft_chunk_main_cap(2048, 2048));
    rc = bomb_decode(&bm, &lim, &err, &rss);
    printf("  (2) %s; peak RSS +%ld MB\n", ft_err_msg(&err), rss);
    assert_int_equal(rc, FT_ECORRUPT);
    assert_non_null(strstr(ft_err_msg(&err), "chunk 42"));
    assert_non_null(strstr(ft_err_msg(&err), "op_rg dictionary expands"));
    assert_true(rss < 48); /* the decoded main section itself, not its 134 MB expansion */

    /* (3) calls of a 0-op fuser with splits and 0 tokens: one literal of 65536 zeros, then
     * references to it, 258 x 65536 > FT_CHUNK_MAX_SPLIT_VALUES */
    ops[0] = 0;
    dict.len = 0;
    b_varint(&dict, 0);
    bomb_main(&bm, 258, FT_CF_HAS_SPLITS, &dict, 1);
    ft_buf tags = {0};
    b_varint(&tags, 2);
    b_varint(&tags, 65536);
    for (int i = 1; i < 258; i++)
        b_varint(&tags, 3);
    bm.sp.len = 0;
    b_u32(&bm.sp, (uint32_t)tags.len);
    b_u32(&bm.sp, 65535);
    b_bytes(&bm.sp, tags.data, tags.len);
    uint8_t ones[8192]; /* residual symbol 1: zz(0 - pred 0) + 1, no extra bits */
    memset(ones, 1, sizeof ones);
    for (int i = 0; i < 8; i++)
        b_bytes(&bm.sp, ones, i < 7 ? 8192 : 8191);
    rc = bomb_decode(&bm, &lim, &err, &rss);
    printf("  (3) %s; peak RSS +%ld MB\n", ft_err_msg(&err), rss);
    assert_int_equal(rc, FT_ECORRUPT);
    assert_non_null(strstr(ft_err_msg(&err), "chunk 42"));
    assert_non_null(strstr(ft_err_msg(&err), "split sizes"));
#ifdef __SANITIZE_ADDRESS__
    long copies = 3; /* ASan's realloc always copies: old and new blocks coexist, plus shadow */
#else
    long copies = 1;
#endif
    assert_true(rss < copies * 8 * (long)FT_CHUNK_MAX_SPLIT_VALUES / (1 << 20) + 48);
    ft_buf_free(&tags);
    ft_buf_free(&dict);
    ft_buf_free(&bm.main);
    ft_buf_free(&bm.sp);
}

/* Damaged decoded bytes behind a valid checksum (what a buggy writer could produce): the
 * validation of every length and reference must hold on its own. */
static void test_codec_damaged_sections(void **state)
{
    (void)state;
    uint64_t seed = test_seed();
    printf("test_codec_damaged_sections: seed %llu\n", (unsigned long long)seed);
    gen_rng g = {seed};
    ft_chunk_enc *e = NULL;
    ft_chunk_dec *d = NULL;
    assert_int_equal(ft_chunk_enc_new(&e), FT_OK);
    assert_int_equal(ft_chunk_dec_new(&d), FT_OK);
    ft_buf blob = {0};
    uint32_t n = 300;
    rt_rec *v = random_records(&g, n);
    ft_chunk_info info;
    encode_records(e, v, n, &blob, &info);
    /* recover the raw sections */
    uint32_t main_raw, main_z, sp_raw, sp_z;
    memcpy(&main_raw, blob.data + 4, 4);
    memcpy(&main_z, blob.data + 8, 4);
    memcpy(&sp_raw, blob.data + 12, 4);
    memcpy(&sp_z, blob.data + 16, 4);
    uint8_t *m = malloc(main_raw), *sp = malloc(sp_raw + 1);
    assert_int_equal(ZSTD_decompress(m, main_raw, blob.data + 20, main_z), main_raw);
    if (sp_raw)
        assert_int_equal(ZSTD_decompress(sp, sp_raw, blob.data + 20 + main_z, sp_z), sp_raw);
    uint8_t *m2 = malloc(main_raw), *sp2 = malloc(sp_raw + 1);
    ft_buf out = {0};
    for (int trial = 0; trial < 1500; trial++) {
        memcpy(m2, m, main_raw);
        memcpy(sp2, sp, sp_raw);
        int target = sp_raw && rnd(&g, 3) == 0;
        uint8_t *buf = target ? sp2 : m2;
        size_t len = target ? sp_raw : main_raw;
        int flips = 1 + (int)rnd(&g, 4);
        for (int k = 0; k < flips; k++) {
            size_t at = target || rnd(&g, 4) ? rnd(&g, len) : 4 + rnd(&g, 36);
            buf[at] = rnd(&g, 2) ? (uint8_t)gen_next(&g) : buf[at] ^ (uint8_t)(1u << rnd(&g, 8));
        }
        if (target) { /* keep the split checksum valid */
            uint64_t h = ft_hash64(sp2, sp_raw);
            memcpy(m2 + 24, &h, 8);
        }
        ft_chunk_info ci = info;
        ci.checksum = ft_hash64(m2, main_raw);
        memcpy(&ci.n_records, m2 + 4, 4);
        memcpy(&ci.n_calls, m2 + 8, 4);
        memcpy(&ci.first_seq, m2 + 12, 8);
        /* re-wrap */
        out.len = 0;
        ft_buf_reserve(&out, 20 + ZSTD_compressBound(main_raw) + ZSTD_compressBound(sp_raw));
        size_t z1 = ZSTD_compress(out.data + 20, ZSTD_compressBound(main_raw), m2, main_raw, 1);
        size_t z2 =
            sp_raw ? ZSTD_compress(out.data + 20 + z1, ZSTD_compressBound(sp_raw), sp2, sp_raw, 1)
                   : 0;
        memcpy(out.data, "FTZ2", 4);
        uint32_t u[4] = {main_raw, (uint32_t)z1, sp_raw, (uint32_t)z2};
        memcpy(out.data + 4, u, 16);
        out.len = 20 + z1 + z2;
        ci.raw_bytes = (uint64_t)main_raw + sp_raw;
        ft_batch b;
        ft_err err = {0};
        int rc = ft_chunk_decode(d, &ci, out.data, out.len, &rt_limits, FT_READ_SPLITS, &b, &err);
        assert_true(rc == FT_OK || rc == FT_ECORRUPT);
        if (rc == FT_OK) { /* whatever decoded must be self-consistent */
            for (uint32_t i = 0; i < b.n; i++) {
                assert_true(b.op_rg_off[i] <= b.op_rg_off[i + 1]);
                assert_true(b.splits_off[i] <= b.splits_off[i + 1]);
                if (b.kind[i] == FT_REC_CALL) assert_true(b.fuser[i] < RT_FUSERS);
                if (i) assert_true(b.seq[i] > b.seq[i - 1]);
            }
        }
    }
    ft_buf_free(&out);
    free(m);
    free(sp);
    free(m2);
    free(sp2);
    free_records(v, n);
    ft_buf_free(&blob);
    ft_chunk_enc_free(e);
    ft_chunk_dec_free(d);
}

/* ---- open errors -------------------------------------------------------------------------- */
static void make_trace(const char *path, uint64_t n_calls, uint32_t chunk)
{
    gen_params p = {11, 4, 16, 2, n_calls, 1024, 1};
    ft_rec_opts o = {chunk, 0};
    ft_rec *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(path, &o, &r, &err), FT_OK);
    ft_sink s;
    ft_rec_sink(r, &s);
    assert_int_equal(gen_stream(&p, &s), FT_OK);
    assert_int_equal(ft_rec_close(r), FT_OK);
}

static void sql(const char *path, const char *stmt)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(db, stmt, NULL, NULL, &msg);
    if (rc != SQLITE_OK) fail_msg("%s: %s", stmt, msg);
    sqlite3_close(db);
}

static int open_rc(const char *path, ft_err *err)
{
    ft_trace *t = NULL;
    int rc = ft_trace_open(path, FT_OPEN_READ, &t, err);
    if (!rc)
        ft_trace_close(t);
    else
        assert_null(t);
    return rc;
}

static void test_open_foreign_database(void **state)
{
    (void)state;
    char path[600];
    ft_err err = {0};
    tmp_path(path, sizeof path, "foreign.db");
    sql(path, "CREATE TABLE x(a); INSERT INTO x VALUES (1);");
    assert_int_equal(open_rc(path, &err), FT_ENOTTRACE);
    assert_non_null(strstr(err.msg, "application_id 0x0"));
    tmp_path(path, sizeof path, "other_app.db");
    sql(path, "PRAGMA application_id = 1234; CREATE TABLE meta(a);");
    assert_int_equal(open_rc(path, &err), FT_ENOTTRACE);

    tmp_path(path, sizeof path, "text.ftdb");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 200; i++)
        fputs("this is not a database at all\n", f);
    fclose(f);
    assert_int_equal(open_rc(path, &err), FT_ENOTTRACE);
    assert_non_null(strstr(err.msg, "not a fusertrace trace"));

    tmp_path(path, sizeof path, "empty.ftdb");
    f = fopen(path, "w");
    fclose(f);
    assert_int_equal(open_rc(path, &err), FT_ENOTTRACE);

    tmp_path(path, sizeof path, "missing.ftdb");
    assert_int_equal(open_rc(path, &err), FT_ENOTFOUND);
    assert_non_null(strstr(err.msg, "missing.ftdb"));
}

static void test_open_newer_version(void **state)
{
    (void)state;
    char path[600];
    ft_err err = {0};
    tmp_path(path, sizeof path, "newer.ftdb");
    make_trace(path, 100, 0);
    sql(path, "PRAGMA user_version = 3;");
    assert_int_equal(open_rc(path, &err), FT_EVERSION);
    assert_non_null(strstr(err.msg, "newer fusertrace (format 3)"));
    assert_non_null(strstr(err.msg, "this build reads formats 1 to 2"));
    sql(path, "PRAGMA user_version = 0;");
    assert_int_equal(open_rc(path, &err), FT_EVERSION);
}

static void test_create_existing_fails(void **state)
{
    (void)state;
    char path[600];
    ft_err err = {0};
    tmp_path(path, sizeof path, "exists.ftdb");
    make_trace(path, 10, 0);
    ft_trace *t = NULL;
    assert_int_equal(ft_trace_open(path, FT_OPEN_CREATE, &t, &err), FT_EINVAL);
    assert_null(t);
    /* the existing trace is untouched */
    assert_int_equal(open_rc(path, &err), FT_OK);
}

static void test_ddl_matches_constants(void **state)
{
    (void)state;
    char path[600];
    tmp_path(path, sizeof path, "ddl.ftdb");
    make_trace(path, 10, 0);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(st, 0), FT_APPLICATION_ID);
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int64(st, 0), FT_FORMAT_VERSION);
    sqlite3_finalize(st);
    /* a finished trace is one self-contained file (journal mode back to DELETE) */
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "delete");
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* ---- damage ------------------------------------------------------------------------------- */
static int verify_rc(const char *path, ft_err *err)
{
    ft_trace *t = NULL;
    int rc = ft_trace_open(path, FT_OPEN_READ, &t, err);
    if (rc) return rc;
    rc = ft_trace_verify(t, err);
    ft_trace_close(t);
    return rc;
}

static int export_rc(const char *path, ft_err *err)
{
    ft_trace *t = NULL;
    int rc = ft_trace_open(path, FT_OPEN_READ, &t, err);
    if (rc) return rc;
    digest_sink d;
    ft_sink s;
    digest_sink_init(&d, &s);
    rc = ft_trace_export(t, &s, err);
    ft_trace_close(t);
    return rc;
}

/* Overwrite one byte of chunk `id`'s stored data through the blob API. */
static void flip_chunk_byte(const char *path, int64_t id, int at_from_end)
{
    sqlite3 *db = NULL;
    sqlite3_blob *bl = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_blob_open(db, "main", "chunks", "data", id, 1, &bl), SQLITE_OK);
    int n = sqlite3_blob_bytes(bl);
    int off = at_from_end ? n - 3 : n / 2;
    uint8_t b;
    assert_int_equal(sqlite3_blob_read(bl, &b, 1, off), SQLITE_OK);
    b ^= 0x5a;
    assert_int_equal(sqlite3_blob_write(bl, &b, 1, off), SQLITE_OK);
    sqlite3_blob_close(bl);
    sqlite3_close(db);
}

static void test_corrupt_chunk_detected(void **state)
{
    (void)state;
    char path[600];
    ft_err err = {0};
    for (int where = 0; where < 2; where++) {
        tmp_path(path, sizeof path, "chunkflip.ftdb");
        make_trace(path, 3000, 500);
        assert_int_equal(verify_rc(path, &err), FT_OK);
        flip_chunk_byte(path, 3, where);
        assert_int_equal(open_rc(path, &err), FT_OK); /* the index is intact */
        assert_int_equal(verify_rc(path, &err), FT_ECORRUPT);
        assert_non_null(strstr(err.msg, "chunk 3"));
        assert_int_equal(export_rc(path, &err), FT_ECORRUPT);
        assert_non_null(strstr(err.msg, "chunk 3"));
    }
}

static void test_corrupt_small_tables_detected(void **state)
{
    (void)state;
    static const struct {
        const char *stmt, *table;
    } cases[] = {
        {"UPDATE recipes SET attrs = '{\"disable_rht\":true}' WHERE id = 1", "recipes"},
        {"UPDATE recipes SET obj = obj + 1 WHERE id = 2", "recipes"},
        {"UPDATE fusers SET label = 'x' WHERE id = 2", "fusers"},
        {"UPDATE fusers SET decl_pos = decl_pos + 1 WHERE id = 1", "fusers"},
        {"UPDATE oplists SET ops = replace(ops, '4096', '4097')", "oplists"},
        {"UPDATE meta SET value = '2.0.0' WHERE key = 'te_version'", "meta"},
        {"DELETE FROM meta WHERE key = 'env'", "meta"},
        {"UPDATE chunks SET n_calls = n_calls - 1 WHERE id = 2", "chunks"},
        {"DELETE FROM chunks WHERE id = 4", "chunks"},
        {"UPDATE meta SET value = '0000000000000000' WHERE key = 'digest.fusers'", "fusers"},
    };
    char path[600];
    ft_err err = {0};
    for (size_t i = 0; i < FT_ARRAY_LEN(cases); i++) {
        tmp_path(path, sizeof path, "tableflip.ftdb");
        make_trace(path, 3000, 500);
        sql(path, cases[i].stmt);
        assert_int_equal(open_rc(path, &err), FT_ECORRUPT);
        char want[64];
        snprintf(want, sizeof want, "table %s", cases[i].table);
        if (!strstr(err.msg, want)) fail_msg("%s: got '%s'", cases[i].stmt, err.msg);
        assert_int_equal(verify_rc(path, &err), FT_ECORRUPT);
        assert_int_equal(export_rc(path, &err), FT_ECORRUPT);
    }
}

static void test_verify_schema_change_detected(void **state)
{
    (void)state;
    char path[600];
    ft_err err = {0};
    tmp_path(path, sizeof path, "schema.ftdb");
    make_trace(path, 100, 0);
    sql(path, "CREATE TABLE extra(x)");
    assert_int_equal(verify_rc(path, &err), FT_ECORRUPT);
    assert_non_null(strstr(err.msg, "schema"));
}

/* ---- dedup and canonical JSON ------------------------------------------------------------- */
static void test_dedup_oplists_and_recipes(void **state)
{
    (void)state;
    char path[600];
    ft_err err = {0};
    tmp_path(path, sizeof path, "dedup.ftdb");
    ft_rec *r = NULL;
    assert_int_equal(ft_rec_open(path, NULL, &r, &err), FT_OK);
    const char *a = "[{\"type\":\"GELU\"},{\"type\":\"BasicLinear\",\"attrs\":{\"in_features\":8,"
                    "\"dtype\":\"bfloat16\"}}]";
    const char *a2 = "[ {\"type\": \"GELU\"}, {\"attrs\": {\"dtype\": \"bfloat16\", "
                     "\"in_features\": 8}, \"type\": \"BasicLinear\"} ]";
    const char *b = "[{\"type\":\"GELU\"},{\"type\":\"BasicLinear\",\"attrs\":{\"in_features\":9,"
                    "\"dtype\":\"bfloat16\"}}]";
    assert_int_equal(ft_rec_fuser(r, 1, "l0", a), FT_OK);
    assert_int_equal(ft_rec_fuser(r, 2, "l1", a2), FT_OK); /* same list, other spelling */
    assert_int_equal(ft_rec_fuser(r, 3, NULL, b), FT_OK);
    assert_int_equal(ft_rec_fuser(r, 3, NULL, a), FT_EINVAL); /* id reused */
    assert_int_equal(ft_rec_fuser(r, 4, NULL, "[{\"attrs\":{}}]"), FT_EINVAL);
    assert_int_equal(ft_rec_fuser(r, 4, NULL, "{\"type\":\"GELU\"}"), FT_EINVAL);
    assert_int_equal(ft_rec_recipe(r, 1, "NVFP4BlockScaling", 77, "{\"a\":1,\"b\":null}"), FT_OK);
    assert_int_equal(ft_rec_recipe(r, 2, "NVFP4BlockScaling", 77, "{ \"b\":null, \"a\":1 }"),
                     FT_EINVAL); /* same (obj, attrs) */
    assert_non_null(strstr(ft_rec_error(r)->msg, "already declared"));
    assert_int_equal(ft_rec_recipe(r, 2, "NVFP4BlockScaling", 78, "{\"a\":1,\"b\":null}"), FT_OK);
    assert_int_equal(ft_rec_recipe(r, 3, "NVFP4BlockScaling", 77, "{\"a\":2,\"b\":null}"), FT_OK);
    assert_int_equal(ft_rec_recipe(r, 4, "X", 1, "[1]"), FT_EINVAL);
    assert_int_equal(ft_rec_close(r), FT_OK);
    ft_trace *t = NULL;
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    assert_int_equal(ft_trace_n_fusers(t), 3);
    assert_int_equal(ft_trace_n_oplists(t), 2);
    assert_ptr_equal(ft_trace_fuser(t, 0)->ops_json, ft_trace_fuser(t, 1)->ops_json);
    assert_string_equal(
        ft_trace_fuser(t, 0)->ops_json,
        "[{\"type\":\"GELU\"},{\"attrs\":{\"dtype\":\"bfloat16\",\"in_features\":8},"
        "\"type\":\"BasicLinear\"}]");
    assert_null(ft_trace_fuser(t, 2)->label);
    assert_int_equal(ft_trace_fuser(t, 0)->n_ops, 2);
    assert_int_equal(ft_trace_n_recipes(t), 3);
    assert_string_equal(ft_trace_recipe(t, 0)->attrs_json, "{\"a\":1,\"b\":null}");
    assert_int_equal(ft_trace_verify(t, &err), FT_OK);
    ft_trace_close(t);
}

static void test_canonical_doubles(void **state)
{
    (void)state;
    char path[600];
    ft_err err = {0};
    tmp_path(path, sizeof path, "doubles.ftdb");
    ft_rec *r = NULL;
    assert_int_equal(ft_rec_open(path, NULL, &r, &err), FT_OK);
    assert_int_equal(
        ft_rec_recipe(r, 1, "T", 1,
                      "{\"a\":0.1,\"b\":1.0,\"c\":1e300,\"d\":-0.0,\"e\":0.30000000000000004,"
                      "\"f\":5e-324,\"g\":123456789012345678,\"h\":\"\\u00e9\\n\\\"\"}"),
        FT_OK);
    assert_int_equal(ft_rec_close(r), FT_OK);
    ft_trace *t = NULL;
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    assert_string_equal(ft_trace_recipe(t, 0)->attrs_json,
                        "{\"a\":0.1,\"b\":1.0,\"c\":1e+300,\"d\":-0.0,\"e\":0.30000000000000004,"
                        "\"f\":4.94065645841247e-324,\"g\":123456789012345678,"
                        "\"h\":\"\xc3\xa9\\n\\\"\"}");
    ft_trace_close(t);
}

/* ---- reader ------------------------------------------------------------------------------- */
static void test_reader_range_and_totals(void **state)
{
    (void)state;
    char path[600];
    ft_err err = {0};
    tmp_path(path, sizeof path, "range.ftdb");
    make_trace(path, 2000, 300);
    ft_trace *t = NULL;
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    uint64_t nc = ft_trace_n_chunks(t);
    assert_true(nc >= 3);
    ft_reader *r = NULL;
    assert_int_equal(ft_reader_open(t, 0, &r), FT_OK);
    assert_int_equal(ft_reader_range(r, 1, nc), FT_ERANGE);
    assert_int_equal(ft_reader_range(r, 1, 2), FT_OK);
    const ft_batch *b;
    uint64_t seen = 0, calls = 0;
    while (ft_reader_next(r, &b) == FT_OK && b) {
        seen++;
        for (uint32_t i = 0; i < b->n; i++)
            calls += b->kind[i] == FT_REC_CALL;
        assert_null(b->splits);
    }
    assert_int_equal(seen, 2);
    assert_int_equal(calls, ft_trace_chunk(t, 1)->n_calls + ft_trace_chunk(t, 2)->n_calls);
    ft_reader_close(r);
    assert_int_equal(ft_trace_n_calls(t), 2000);
    ft_trace_sizes sz;
    assert_int_equal(ft_trace_sizes_get(t, &sz), FT_OK);
    assert_true(sz.file_bytes > sz.chunk_zip_bytes && sz.chunk_raw_bytes > sz.chunk_zip_bytes);
    assert_string_equal(ft_trace_meta(t, "state"), "complete");
    assert_string_equal(ft_trace_header(t)->te_version, "2.20.2");
    assert_int_equal(ft_trace_header(t)->world_size, 8);
    ft_trace_close(t);
}

/* ---- the verify and info commands --------------------------------------------------------- */
/* Run `fusertrace ARGS 2>&1`; output into out. The exit status, -1 without the CLI. */
static int run_cli(const char *args, char *out, size_t cap)
{
    if (!tu_cli()) return -1;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", tu_cli(), args);
    return tu_sh(cmd, out, cap);
}

static void test_cli_verify_and_info(void **state)
{
    (void)state;
    if (!getenv("FT_CLI")) skip();
    char path[600], args[1400], out[16384];
    tmp_path(path, sizeof path, "cli.ftdb");
    make_trace(path, 3000, 1000);
    snprintf(args, sizeof args, "verify '%s'", path);
    assert_int_equal(run_cli(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "ok (3000 calls"));
    snprintf(args, sizeof args, "info '%s'", path);
    assert_int_equal(run_cli(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "3000 ("));
    assert_non_null(strstr(out, "GroupedLinear > ScaledSwiGLU > GroupedLinear"));
    assert_non_null(strstr(out, "NVFP4BlockScaling"));
    snprintf(args, sizeof args, "info --json '%s'", path);
    assert_int_equal(run_cli(args, out, sizeof out), 0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "calls")), 3000);
    assert_int_equal(json_integer_value(json_object_get(j, "fusers")), 8);
    assert_true(json_real_value(json_object_get(j, "bytes_per_call")) > 0);
    json_decref(j);

    flip_chunk_byte(path, 2, 0);
    snprintf(args, sizeof args, "verify '%s'", path);
    assert_int_equal(run_cli(args, out, sizeof out), 1);
    assert_non_null(strstr(out, "chunk 2"));
    sql(path, "UPDATE recipes SET obj = 5 WHERE id = 1");
    assert_int_equal(run_cli(args, out, sizeof out), 1);
    assert_non_null(strstr(out, "table recipes"));
    tmp_path(path, sizeof path, "cli_foreign.db");
    sql(path, "CREATE TABLE x(a)");
    snprintf(args, sizeof args, "verify '%s'", path);
    assert_int_equal(run_cli(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "verify");
    assert_int_equal(run_cli(args, out, sizeof out), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_round_trip_random),
        cmocka_unit_test(test_codec_damaged_bytes),
        cmocka_unit_test(test_codec_damaged_sections),
        cmocka_unit_test(test_codec_bombs),
        cmocka_unit_test(test_codec_unknown_refused),
        cmocka_unit_test(test_open_foreign_database),
        cmocka_unit_test(test_open_newer_version),
        cmocka_unit_test(test_create_existing_fails),
        cmocka_unit_test(test_ddl_matches_constants),
        cmocka_unit_test(test_corrupt_chunk_detected),
        cmocka_unit_test(test_corrupt_small_tables_detected),
        cmocka_unit_test(test_verify_schema_change_detected),
        cmocka_unit_test(test_dedup_oplists_and_recipes),
        cmocka_unit_test(test_canonical_doubles),
        cmocka_unit_test(test_reader_range_and_totals),
        cmocka_unit_test(test_cli_verify_and_info),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
