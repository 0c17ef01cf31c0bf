/*
 * bench_numerics.c - numerical replay of a trace on the CPU kernels: time, calls per second, and
 * the report (bands, per-policy divergence), next to the plain replay of the same trace measured
 * in the same run (the baseline: what --numerics adds on top of a policy replay).
 *
 * usage: bench_numerics TRACE [--shrink K] [--sample N] [--threads N] [--json]
 * (--threads 0, the default: one per online core; the figures do not depend on it, the time does)
 */
#include "ft_replay.h"
#include "ft_numerics.h"
#include "ft_report.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr,
                "usage: bench_numerics TRACE [--shrink K] [--sample N] [--threads N] [--json]\n");
        return 2;
    }
    ft_numerics_opts no = {.shrink = 4, .sample = 0, .seed = 1};
    int json = 0;
    for (int i = 2; i < argc; i++) {
        int64_t v;
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (i + 1 < argc &&
                   (!strcmp(argv[i], "--shrink") || !strcmp(argv[i], "--sample") ||
                    !strcmp(argv[i], "--threads")) &&
                   !ft_parse_i64(argv[i + 1], &v) && v >= 0 && v < (1 << 30)) {
            if (!strcmp(argv[i], "--shrink"))
                no.shrink = (uint32_t)v;
            else if (!strcmp(argv[i], "--sample"))
                no.sample = (uint32_t)v;
            else
                no.n_threads = (uint32_t)v;
            i++;
        } else {
            fprintf(stderr, "bench_numerics: bad argument '%s'\n", argv[i]);
            return 2;
        }
    }
    ft_trace *t = NULL;
    ft_err err = {0};
    int rc = ft_trace_open(argv[1], FT_OPEN_READ, &t, &err);
    if (rc) {
        fprintf(stderr, "bench_numerics: %s\n", ft_err_msg(&err));
        return 2;
    }
    ft_replay_result *base = ft_calloc(2, sizeof *base);
    ft_numerics_result nr;
    if (!base) return 3;
    ft_replay_opts ro = {0};
    uint64_t t0 = ft_now_ns();
    rc = ft_replay_trace(t, &ro, &base[0], &err);
    uint64_t t1 = ft_now_ns();
    if (!rc) rc = ft_numerics_replay_trace(t, &ro, &no, &base[1], &nr, &err);
    uint64_t t2 = ft_now_ns();
    if (rc) {
        fprintf(stderr, "bench_numerics: %s\n", ft_err_msg(&err));
        ft_trace_close(t);
        ft_free(base);
        return 3;
    }
    double s_base = (double)(t1 - t0) * 1e-9, s_num = (double)(t2 - t1) * 1e-9;
    printf("bench_numerics: %s, shrink %u, sample %u (0 = all), threads %u\n", argv[1], no.shrink,
           no.sample, nr.n_threads);
    printf("baseline replay (policies only): %.3f s for %llu calls\n", s_base,
           (unsigned long long)base[0].calls);
    printf("replay with numerics:            %.3f s (%.1fx the baseline), %llu calls run, "
           "%.2f numerics calls/s\n",
           s_num, s_num / (s_base > 0 ? s_base : 1e-9), (unsigned long long)nr.calls_run,
           nr.calls_run / (s_num > 0 ? s_num : 1e-9));
    if (json)
        ft_report_write(stdout, &base[1], &nr, FT_REPORT_JSON, &err);
    else
        ft_report_numerics(stdout, &nr, &err);
    ft_trace_close(t);
    ft_free(base);
    return 0;
}
