/*
 * bench_size.c - bytes per call of one stream in four forms, measured in the same run: the
 * .ftdb trace (recorder defaults), capture JSONL, JSONL compressed with zstd -19 (libzstd,
 * level 19, one thread: what `zstd -19 FILE` produces), and a row-per-call SQLite table
 * (bench_rowdb.h). Stream: synth `recompute` (64 experts by default), cut at CALLS calls.
 *
 * Usage: bench_size [CALLS] [EXPERTS]   (defaults 1000000, 64; level 19 over 1M calls takes
 * minutes of CPU).
 */
#include "bench_rowdb.h"

#include <sys/stat.h>
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

int main(int argc, char **argv)
{
    int64_t calls = 1000000, experts = 64;
    if ((argc > 1 && (ft_parse_i64(argv[1], &calls) || calls <= 0)) ||
        (argc > 2 && (ft_parse_i64(argv[2], &experts) || experts <= 0))) {
        fprintf(stderr, "usage: bench_size [CALLS] [EXPERTS]\n");
        return 2;
    }
    char ebuf[32];
    snprintf(ebuf, sizeof ebuf, "%lld", (long long)experts);
    ft_synth_param p[] = {{"experts", ebuf}, {"steps", "100000"}};
    mem_stream m;
    if (mem_stream_synth(&m, "recompute", p, 2, (uint64_t)calls)) return 3;
    char trace[64], jsonl[64], rows[64];
    snprintf(trace, sizeof trace, "bench_size_%d.ftdb", (int)getpid());
    snprintf(jsonl, sizeof jsonl, "bench_size_%d.jsonl", (int)getpid());
    snprintf(rows, sizeof rows, "bench_size_%d.rows.db", (int)getpid());
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
    rowdb rd;
    if (rowdb_open(&rd, rows)) return 3;
    rowdb_sink(&rd, &s);
    if (mem_stream_play(&m, &s) || rowdb_close(&rd)) return 3;

    double t0 = bench_thread_seconds();
    uint64_t z19 = zstd19_size(jsonl);
    double tz = bench_thread_seconds() - t0;
    uint64_t b_trace = file_size(trace), b_jsonl = file_size(jsonl), b_rows = file_size(rows);
    double n = (double)m.n_calls;
    printf("stream: synth recompute, %llu calls + %llu backward events, %lld experts\n",
           (unsigned long long)m.n_calls, (unsigned long long)m.n_bwd, (long long)experts);
    printf("%-28s %14s %12s %10s\n", "form", "bytes", "bytes/call", "vs zstd-19");
    printf("%-28s %14llu %12.2f %9.3fx\n", ".ftdb (fusertrace)", (unsigned long long)b_trace,
           (double)b_trace / n, (double)b_trace / (double)z19);
    printf("%-28s %14llu %12.2f %9.3fx\n", "JSONL", (unsigned long long)b_jsonl,
           (double)b_jsonl / n, (double)b_jsonl / (double)z19);
    printf("%-28s %14llu %12.2f %9.3fx  (baseline, %.1f s to compress)\n", "JSONL + zstd -19",
           (unsigned long long)z19, (double)z19 / n, 1.0, tz);
    printf("%-28s %14llu %12.2f %9.3fx\n", "row-per-call SQLite", (unsigned long long)b_rows,
           (double)b_rows / n, (double)b_rows / (double)z19);
    printf("target: .ftdb <= 0.5x JSONL + zstd -19: %s\n",
           (double)b_trace <= 0.5 * (double)z19 ? "met" : "MISSED");
    ft_trace_remove(trace);
    remove(jsonl);
    ft_trace_remove(rows);
    return 0;
}
