/*
 * bench_synth.c - how fast `synth recompute` generates calls, and what the sinks add.
 *
 *   bench_synth [STEPS [EXPERTS [OUT.ftdb]]]     defaults: 4096 steps (~1M calls), 64 experts
 *
 * Baseline: generation into a null sink (the generator alone). Compared with it in the same run:
 * generation into the JSONL writer (to /dev/null) and into the recorder (a .ftdb file, removed
 * afterwards; default name bench_synth.ftdb in the current directory). Prints calls/s, records/s
 * and each time as a ratio to the baseline.
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_util.h"
#include "ft_recorder.h"
#include "ft_synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *steps = argc > 1 ? argv[1] : "4096";
    const char *experts = argc > 2 ? argv[2] : "64";
    const char *path = argc > 3 ? argv[3] : "bench_synth.ftdb";
    ft_synth_param p[] = {{"steps", steps}, {"experts", experts}};
    ft_err err = {0};

    /* baseline: null sink */
    bench_count n;
    ft_sink null;
    bench_count_sink(&n, &null);
    uint64_t t0 = ft_now_ns();
    int rc = ft_synth_run("recompute", p, 2, 1, &null, &err);
    double t_null = (double)(ft_now_ns() - t0) / 1e9;
    if (rc) {
        fprintf(stderr, "bench_synth: %s\n", ft_err_msg(&err));
        return 1;
    }

    /* JSONL writer to /dev/null */
    FILE *f = fopen("/dev/null", "w");
    ft_jsonl_writer *w = NULL;
    if (!f || ft_jsonl_writer_new(f, &w)) {
        fprintf(stderr, "bench_synth: cannot open the JSONL writer on /dev/null\n");
        return 1;
    }
    ft_sink js;
    ft_jsonl_writer_sink(w, &js);
    t0 = ft_now_ns();
    rc = ft_synth_run("recompute", p, 2, 1, &js, &err);
    rc = rc ? rc : fflush(f) ? FT_EIO : FT_OK;
    double t_jsonl = (double)(ft_now_ns() - t0) / 1e9;
    ft_jsonl_writer_free(w);
    fclose(f);
    if (rc) {
        fprintf(stderr, "bench_synth: jsonl: %s\n", ft_err_msg(&err));
        return 1;
    }

    /* recorder */
    ft_trace_remove(path);
    ft_rec *r;
    if ((rc = ft_rec_open(path, NULL, &r, &err))) {
        fprintf(stderr, "bench_synth: %s\n", ft_err_msg(&err));
        return 1;
    }
    ft_sink rs;
    ft_rec_sink(r, &rs);
    t0 = ft_now_ns();
    rc = ft_synth_run("recompute", p, 2, 1, &rs, &err);
    int crc = rc ? (ft_rec_abort(r), rc) : ft_rec_close(r);
    double t_rec = (double)(ft_now_ns() - t0) / 1e9;
    FILE *db = fopen(path, "rb");
    long bytes = -1;
    if (db && !fseek(db, 0, SEEK_END)) bytes = ftell(db);
    if (db) fclose(db);
    ft_trace_remove(path);
    if (crc) {
        fprintf(stderr, "bench_synth: recorder: %s\n", rc ? ft_err_msg(&err) : ft_strerror(crc));
        return 1;
    }

    double recs = (double)(n.calls + n.backwards);
    printf("synth recompute, steps=%s experts=%s: %llu calls + %llu backward records\n", steps,
           experts, (unsigned long long)n.calls, (unsigned long long)n.backwards);
    printf("%-26s %9s %12s %12s %8s\n", "sink", "seconds", "calls/s", "records/s", "ratio");
    printf("%-26s %9.3f %12.3e %12.3e %8.2f\n", "null (baseline)", t_null, (double)n.calls / t_null,
           recs / t_null, 1.0);
    printf("%-26s %9.3f %12.3e %12.3e %8.2f\n", "JSONL writer -> /dev/null", t_jsonl,
           (double)n.calls / t_jsonl, recs / t_jsonl, t_jsonl / t_null);
    printf("%-26s %9.3f %12.3e %12.3e %8.2f\n", "recorder (.ftdb)", t_rec, (double)n.calls / t_rec,
           recs / t_rec, t_rec / t_null);
    if (bytes > 0)
        printf("trace size %ld bytes, %.2f bytes/call\n", bytes, (double)bytes / (double)n.calls);
    return 0;
}
