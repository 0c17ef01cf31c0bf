/*
 * bench_recorder.c - recorder cost per call (64-expert split sizes) against the row-per-call
 * SQLite baseline (one INSERT per record inside one transaction), same stream, same run; and the
 * reader's decode rate without and with split sizes.
 *
 * Usage: bench_recorder [CALLS] [EXPERTS]   (defaults 1000000, 64; ~1.5 GB of memory). The stream
 * is synth `recompute` held in memory first, so generation is not timed. Thread CPU time.
 */
#include "bench_rowdb.h"

#include <unistd.h>

static int parse_arg(const char *s, int64_t *v)
{
    return ft_parse_i64(s, v) || *v <= 0;
}

int main(int argc, char **argv)
{
    int64_t calls = 1000000, experts = 64;
    if ((argc > 1 && parse_arg(argv[1], &calls)) || (argc > 2 && parse_arg(argv[2], &experts))) {
        fprintf(stderr, "usage: bench_recorder [CALLS] [EXPERTS]\n");
        return 2;
    }
    char ebuf[32];
    snprintf(ebuf, sizeof ebuf, "%lld", (long long)experts);
    ft_synth_param p[] = {{"experts", ebuf}, {"steps", "100000"}};
    mem_stream m;
    if (mem_stream_synth(&m, "recompute", p, 2, (uint64_t)calls)) return 3;
    char path[64], base[64];
    snprintf(path, sizeof path, "bench_recorder_%d.ftdb", (int)getpid());
    snprintf(base, sizeof base, "bench_recorder_%d.rows.db", (int)getpid());
    printf("stream: synth recompute, %llu calls + %llu backward, %lld experts\n",
           (unsigned long long)m.n_calls, (unsigned long long)m.n_bwd, (long long)experts);

    /* recorder: best of 3 (each a fresh file: open, every record, close) */
    ft_err err = {0};
    ft_sink s;
    double t0, t_rec = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        ft_trace_remove(path);
        ft_rec *r = NULL;
        t0 = bench_thread_seconds();
        if (ft_rec_open(path, NULL, &r, &err)) {
            fprintf(stderr, "%s\n", ft_err_msg(&err));
            return 3;
        }
        ft_rec_sink(r, &s);
        if (mem_stream_play(&m, &s)) {
            fprintf(stderr, "record: %s\n", ft_err_msg(ft_rec_error(r)));
            return 3;
        }
        if (ft_rec_close(r)) return 3;
        double dt = bench_thread_seconds() - t0;
        if (dt < t_rec) t_rec = dt;
    }

    if (getenv("FT_BENCH_RECORDER_ONLY")) {
        printf("recorder: %.1f ns/call\n", t_rec * 1e9 / (double)m.n_calls);
        ft_trace_remove(path);
        return 0;
    }
    /* baseline: best of 3 */
    double t_base = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        rowdb rd;
        t0 = bench_thread_seconds();
        if (rowdb_open(&rd, base)) return 3;
        rowdb_sink(&rd, &s);
        if (mem_stream_play(&m, &s) || rowdb_close(&rd)) {
            fprintf(stderr, "baseline failed\n");
            return 3;
        }
        double dt = bench_thread_seconds() - t0;
        if (dt < t_base) t_base = dt;
    }
    double ns_rec = t_rec * 1e9 / (double)m.n_calls, ns_base = t_base * 1e9 / (double)m.n_calls;
    printf("recorder:             %8.1f ns/call (best of 3; incl. backward records, open, close)\n",
           ns_rec);
    printf("row-per-call SQLite:  %8.1f ns/call (baseline, best of 3)\n", ns_base);
    printf("ratio:                %8.2fx faster than the baseline\n", ns_base / ns_rec);

    /* reader */
    ft_trace *t = NULL;
    if (ft_trace_open(path, FT_OPEN_READ, &t, &err)) {
        fprintf(stderr, "%s\n", ft_err_msg(&err));
        return 3;
    }
    for (int with = 0; with < 2; with++) {
        uint64_t n = 0;
        double best = 1e30;
        for (int rep = 0; rep < 5; rep++) {
            ft_reader *rdr = NULL;
            if (ft_reader_open(t, with ? FT_READ_SPLITS : 0, &rdr)) return 3;
            const ft_batch *b;
            n = 0;
            t0 = bench_thread_seconds();
            while (!ft_reader_next(rdr, &b) && b)
                n += b->n;
            double dt = bench_thread_seconds() - t0;
            if (dt < best) best = dt;
            ft_reader_close(rdr);
        }
        printf("reader %-14s %8.1f M records/s (%.1f ns/record, best of 5)\n",
               with ? "with splits:" : "without splits:", (double)n / best * 1e-6,
               best * 1e9 / (double)n);
    }
    ft_trace_close(t);
    ft_trace_remove(path);
    ft_trace_remove(base);
    return 0;
}
