/*
 * bench_size.c - bytes per call of synth streams under each routing family, next to an empirical
 * entropy bound computed from the same stream, and against the capture JSONL under zstd -19, all
 * in the same run.
 *
 * For each routing family (synth key routing=) and expert count, the stream is synth `recompute`
 * (8 MoE layers with a shared expert, 4096 routed tokens per microbatch, full recompute) cut at
 * CALLS calls, held in memory and written three ways: the .ftdb trace (recorder defaults, the
 * file's size on disk), the capture JSONL (JSONL writer) and that JSONL compressed by libzstd at
 * level 19 with one thread (what `zstd -19 FILE` produces).
 *
 * The bound: the same records go through the chunk encoder alone (65536 records per chunk, as
 * the recorder cuts them), which reports every symbol it codes (ft_chunk_enc_observe): the 14
 * integer columns' codes, the split tags and lengths, and the residuals of the literal split
 * vectors. "bound (model)" is the sum over these streams of count x order-0 empirical entropy of
 * the stream (its symbol frequencies over the whole run, every chunk pooled), plus the dictionary
 * columns' bytes as they are, in bytes per call: what an ideal order-0 coder of each stream would
 * take given exactly the transforms the format applies. "bound (raw)" is the same with the
 * residual stream replaced by the split sizes of the same literal vectors themselves (every k
 * values, no prediction, nothing implied by the sum). Neither counts per-chunk fixed costs or the
 * SQLite file around the chunks; both are statements about this stream, not about routing in
 * general. "chunks" is the sum of the encoder's stored chunks (no SQLite).
 *
 * Usage: bench_size [CALLS [EXPERTS[,EXPERTS...] [FAMILY[,FAMILY...]]]]
 *   defaults: 100000 calls, experts 8,32,64,256, families zipf,drift,hot,balanced,drop.
 * Each configuration runs in a child process (its in-memory stream is freed with it).
 */
#include "bench_rowdb.h"
#include "chunk.h"
#include "ft_hmap.h"

#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

static uint64_t file_size(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

/* zstd -19 of a file, streamed; returns the compressed size or 0 on failure. */
static uint64_t zstd19_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    ZSTD_CCtx *c = ZSTD_createCCtx();
    size_t in_cap = ZSTD_CStreamInSize(), out_cap = ZSTD_CStreamOutSize();
    char *in = malloc(in_cap), *out = malloc(out_cap);
    uint64_t total = 0;
    int ok =
        c && in && out && !ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 19));
    ok = ok && !ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1));
    while (ok) {
        size_t n = fread(in, 1, in_cap, f);
        int last = n < in_cap;
        ZSTD_inBuffer ib = {in, n, 0};
        size_t rem;
        do {
            ZSTD_outBuffer ob = {out, out_cap, 0};
            rem = ZSTD_compressStream2(c, &ob, &ib, last ? ZSTD_e_end : ZSTD_e_continue);
            if (ZSTD_isError(rem)) {
                ok = 0;
                break;
            }
            total += ob.pos;
        } while (last ? rem != 0 : ib.pos < ib.size);
        if (last) break;
    }
    fclose(f);
    ZSTD_freeCCtx(c);
    free(in);
    free(out);
    return ok ? total : 0;
}

/* ---- symbol histograms and the order-0 bound ---------------------------------------------- */
typedef struct hist {
    ft_hmap idx;     /* value -> slot */
    uint64_t *count; /* [n_vals] */
    uint32_t n_vals, cap;
    uint64_t total;
} hist;

typedef struct bound_sink {
    ft_chunk_enc *enc;
    ft_hmap fuser_idx, recipe_idx;
    uint32_t n_fusers, n_recipes;
    hist h[FT_CS_N];
    uint64_t dict_bytes, chunk_bytes;
    ft_buf blob;
    int failed;
} bound_sink;

static void hist_add(hist *h, uint64_t v)
{
    uint32_t j = ft_hmap_get(&h->idx, v);
    if (j == UINT32_MAX) {
        if (h->n_vals == h->cap) {
            h->cap = h->cap ? 2 * h->cap : 1024;
            h->count = realloc(h->count, h->cap * sizeof *h->count);
            if (!h->count) exit(3);
        }
        j = h->n_vals++;
        h->count[j] = 0;
        if (ft_hmap_put(&h->idx, v, j)) exit(3);
    }
    h->count[j]++;
    h->total++;
}

/* count x order-0 empirical entropy, in bits */
static double hist_bits(const hist *h)
{
    double bits = 0.0;
    for (uint32_t i = 0; i < h->n_vals; i++)
        bits += (double)h->count[i] * log2((double)h->total / (double)h->count[i]);
    return bits;
}

static void bs_obs(void *ctx, unsigned stream, uint64_t value)
{
    bound_sink *b = ctx;
    if (stream == FT_CS_DICT_BYTES)
        b->dict_bytes += value;
    else if (stream < FT_CS_N)
        hist_add(&b->h[stream], value);
}

static int bs_header(void *ctx, const ft_header *h)
{
    (void)ctx;
    (void)h;
    return FT_OK;
}

static int bs_fuser(void *ctx, const ft_fuser_def *f)
{
    bound_sink *b = ctx;
    return ft_hmap_put(&b->fuser_idx, (uint64_t)f->id, b->n_fusers++);
}

static int bs_recipe(void *ctx, const ft_recipe_def *r)
{
    bound_sink *b = ctx;
    return ft_hmap_put(&b->recipe_idx, (uint64_t)r->id, b->n_recipes++);
}

static int bs_flush(bound_sink *b)
{
    ft_chunk_info info;
    ft_err err = {0};
    if (!ft_chunk_enc_n_records(b->enc)) return FT_OK;
    int rc = ft_chunk_enc_finish(b->enc, 2, &b->blob, &info, &err);
    b->chunk_bytes += b->blob.len;
    return rc;
}

static int bs_call(void *ctx, const ft_call *c)
{
    bound_sink *b = ctx;
    int64_t nt = 0;
    for (uint32_t i = 0; i < c->n_splits; i++)
        nt += c->m_splits[i];
    uint32_t ri = (c->flags & FT_CF_HAS_RECIPE) ? ft_hmap_get(&b->recipe_idx, (uint64_t)c->recipe)
                                                : UINT32_MAX;
    int rc = ft_chunk_enc_call(b->enc, c, ft_hmap_get(&b->fuser_idx, (uint64_t)c->fuser),
                               ri == UINT32_MAX ? -1 : (int32_t)ri, nt);
    if (rc == FT_ERANGE && !(rc = bs_flush(b)))
        rc = ft_chunk_enc_call(b->enc, c, ft_hmap_get(&b->fuser_idx, (uint64_t)c->fuser),
                               ri == UINT32_MAX ? -1 : (int32_t)ri, nt);
    if (!rc && ft_chunk_enc_n_records(b->enc) >= 65536) rc = bs_flush(b);
    return rc;
}

static int bs_backward(void *ctx, const ft_backward *bw)
{
    bound_sink *b = ctx;
    int rc = ft_chunk_enc_backward(b->enc, bw);
    if (!rc && ft_chunk_enc_n_records(b->enc) >= 65536) rc = bs_flush(b);
    return rc;
}

/* ---- one configuration -------------------------------------------------------------------- */
static int run_one(int64_t calls, const char *experts, const char *routing)
{
    ft_synth_param p[] = {{"experts", experts}, {"steps", "100000"}, {"routing", routing}};
    mem_stream m;
    if (mem_stream_synth(&m, "recompute", p, 3, (uint64_t)calls)) return 3;
    char trace[64], jsonl[64];
    snprintf(trace, sizeof trace, "bench_size_%d.ftdb", (int)getpid());
    snprintf(jsonl, sizeof jsonl, "bench_size_%d.jsonl", (int)getpid());
    ft_trace_remove(trace);

    ft_rec *r = NULL;
    ft_err err = {0};
    ft_sink s;
    if (ft_rec_open(trace, NULL, &r, &err)) {
        fprintf(stderr, "%s\n", ft_err_msg(&err));
        return 3;
    }
    ft_rec_sink(r, &s);
    if (mem_stream_play(&m, &s) || ft_rec_close(r)) {
        fprintf(stderr, "recording failed\n");
        return 3;
    }
    FILE *f = fopen(jsonl, "w");
    ft_jsonl_writer *w = NULL;
    if (!f || ft_jsonl_writer_new(f, &w)) return 3;
    ft_jsonl_writer_sink(w, &s);
    if (mem_stream_play(&m, &s)) {
        fprintf(stderr, "JSONL writer failed\n");
        return 3;
    }
    ft_jsonl_writer_free(w);
    fclose(f);
    char rows[64];
    snprintf(rows, sizeof rows, "bench_size_%d.rows.db", (int)getpid());
    rowdb rd;
    if (rowdb_open(&rd, rows)) return 3;
    rowdb_sink(&rd, &s);
    if (mem_stream_play(&m, &s) || rowdb_close(&rd)) return 3;
    uint64_t b_rows = file_size(rows);
    ft_trace_remove(rows);

    bound_sink b;
    memset(&b, 0, sizeof b);
    if (ft_chunk_enc_new(&b.enc)) return 3;
    ft_chunk_enc_observe(b.enc, bs_obs, &b);
    ft_sink bsk = {&b, bs_header, bs_fuser, bs_recipe, bs_call, bs_backward, NULL, NULL};
    if (mem_stream_play(&m, &bsk) || bs_flush(&b)) {
        fprintf(stderr, "bound pass failed\n");
        return 3;
    }
    double bits_model = 0.0, bits_raw = 0.0;
    for (unsigned i = 0; i < FT_CS_N; i++) {
        if (i == FT_CS_DICT_BYTES) continue;
        double hb = hist_bits(&b.h[i]);
        if (i != FT_CS_SPLIT_RAW) bits_model += hb;
        if (i != FT_CS_SPLIT_RES) bits_raw += hb;
    }
    double n = (double)m.n_calls;
    double bound_m = (bits_model / 8.0 + (double)b.dict_bytes) / n;
    double bound_r = (bits_raw / 8.0 + (double)b.dict_bytes) / n;
    double split_m = hist_bits(&b.h[FT_CS_SPLIT_RES]) / 8.0 / n;

    double t0 = bench_thread_seconds();
    uint64_t z19 = zstd19_size(jsonl);
    double tz = bench_thread_seconds() - t0;
    uint64_t b_trace = file_size(trace), b_jsonl = file_size(jsonl);
    double ftdb = (double)b_trace / n, zb = (double)z19 / n;
    printf("%-9s %4s %8.2f %8.2f %8.2f %8.2f %6.3fx %8.2f %8.2f %8.2f %6.3fx %8.1f  (%llu calls, "
           "%.0f s zstd)\n",
           routing, experts, ftdb, (double)b.chunk_bytes / n, bound_m, split_m, ftdb / bound_m,
           bound_r, (double)b_jsonl / n, zb, ftdb / zb, (double)b_rows / n,
           (unsigned long long)m.n_calls, tz);
    fflush(stdout);
    ft_trace_remove(trace);
    remove(jsonl);
    return 0;
}

int main(int argc, char **argv)
{
    int64_t calls = 100000;
    const char *experts = argc > 2 ? argv[2] : "8,32,64,256";
    const char *families = argc > 3 ? argv[3] : "zipf,drift,hot,balanced,drop";
    if ((argc > 1 && (ft_parse_i64(argv[1], &calls) || calls <= 0)) || argc > 4) {
        fprintf(stderr, "usage: bench_size [CALLS [EXPERTS,... [FAMILY,...]]]\n");
        return 2;
    }
    printf("stream: synth recompute (8 MoE layers + shared expert, 4096 tokens/microbatch, full "
           "recompute), %lld calls\n",
           (long long)calls);
    printf("B/call: .ftdb = trace file; chunks = encoder output without SQLite; bound = order-0 "
           "entropy of the coded streams (model: split residuals; raw: split sizes); split = the "
           "residuals' share of the model bound; rows = row-per-call SQLite table\n");
    printf("%-9s %4s %8s %8s %8s %8s %7s %8s %8s %8s %7s %8s\n", "routing", "E", ".ftdb", "chunks",
           "bound", "split", "/bound", "raw bnd", "JSONL", "zstd-19", "/zstd19", "rows");
    int status = 0;
    char fam[256], ex[256];
    snprintf(fam, sizeof fam, "%s", families);
    for (char *fs = NULL, *fa = strtok_r(fam, ",", &fs); fa; fa = strtok_r(NULL, ",", &fs)) {
        snprintf(ex, sizeof ex, "%s", experts);
        for (char *es = NULL, *e = strtok_r(ex, ",", &es); e; e = strtok_r(NULL, ",", &es)) {
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) _exit(run_one(calls, e, fa));
            int ws = 0;
            if (pid < 0 || waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws))
                status = 3;
        }
    }
    return status;
}
