/*
 * bench_estimate.c - the numerics estimate (replay --numerics) against the time the numerics then
 * take, on the same machine in the same run: for each shape (a synth trace, a shrink, a sample),
 * the estimate's range of seconds (calibrated by timing the call with the most work on this
 * machine, ft_numerics_obs_check), the numerics' wall time (the baseline), their ratio to the
 * range's middle (its geometric mean) and whether the time fell inside the range.
 *
 * usage: bench_estimate [--numerics cpu|cuda] [--only N] [--threads N]
 * Output: one "RESULT estimate ..." line per shape, then the worst ratio. Shapes: the demo; synth
 * rht-switch with 64 experts (issue 21's trace); the 32-expert hidden-2048 MoE and
 * DeepSeek-, Qwen3- and Mixtral-like shapes, shrunk so that a 2-core machine runs each in seconds.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_numerics.h"
#include "ft_recorder.h"
#include "ft_replayer.h"
#include "ft_synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct shape {
    const char *name, *scenario;
    ft_synth_param sets[10];
    uint32_t n_sets, shrink, sample;
} shape;

static const shape shapes[] = {
    {"demo", "demo", {{"steps", "4"}}, 1, 16, 16},
    {"rht-switch experts=64", "rht-switch", {{"experts", "64"}}, 1, 16, 0},
    {"E32 T8192 H2048 F1024 (the issue's)",
     "demo",
     {{"experts", "32"},
      {"hidden", "2048"},
      {"ffn", "1024"},
      {"tokens", "8192"},
      {"layers", "4"},
      {"steps", "2"}},
     6,
     8,
     8},
    {"E32 T8192 H2048 F1024, shrink 4",
     "demo",
     {{"experts", "32"},
      {"hidden", "2048"},
      {"ffn", "1024"},
      {"tokens", "8192"},
      {"layers", "2"},
      {"steps", "2"}},
     6,
     4,
     4},
    {"E32 T8192 H2048 F1024, shrink 2",
     "demo",
     {{"experts", "32"},
      {"hidden", "2048"},
      {"ffn", "1024"},
      {"tokens", "8192"},
      {"layers", "2"},
      {"steps", "2"}},
     6,
     2,
     2},
    {"DeepSeek-like E32 T32768 H7168 F2048",
     "demo",
     {{"experts", "32"},
      {"hidden", "7168"},
      {"ffn", "2048"},
      {"tokens", "32768"},
      {"layers", "2"},
      {"steps", "2"}},
     6,
     16,
     4},
    {"Qwen3-like E128 T32768 H2048 F768",
     "demo",
     {{"experts", "128"},
      {"hidden", "2048"},
      {"ffn", "768"},
      {"tokens", "32768"},
      {"layers", "2"},
      {"steps", "2"}},
     6,
     8,
     4},
    {"Mixtral-like E8 T16384 H4096 F14336",
     "demo",
     {{"experts", "8"},
      {"hidden", "4096"},
      {"ffn", "14336"},
      {"tokens", "16384"},
      {"layers", "2"},
      {"steps", "2"}},
     6,
     16,
     4},
};

static int synth(const shape *s, const char *path, ft_err *err)
{
    remove(path);
    ft_rec *rec = NULL;
    int rc = ft_rec_open(path, NULL, &rec, err);
    if (rc) return rc;
    ft_sink sink;
    ft_rec_sink(rec, &sink);
    rc = ft_synth_run(s->scenario, s->sets, s->n_sets, 1, &sink, err);
    int rc2 = ft_rec_close(rec);
    return rc ? rc : rc2;
}

int main(int argc, char **argv)
{
    ft_numerics_backend be = FT_NUMERICS_CPU;
    int only = -1;
    uint32_t threads = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--numerics") && i + 1 < argc)
            be = !strcmp(argv[++i], "cuda") ? FT_NUMERICS_CUDA : FT_NUMERICS_CPU;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = (uint32_t)atoi(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: bench_estimate [--numerics cpu|cuda] [--only N] [--threads N]\n");
            return 2;
        }
    }
    char path[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/bench_estimate_%ld.ftdb", tmp && *tmp ? tmp : "/tmp",
             (long)getpid());
    double worst = 1.0;
    int inside = 0, n = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        if (only >= 0 && (size_t)only != k) continue;
        const shape *s = &shapes[k];
        ft_err err = {0};
        ft_trace *t = NULL;
        ft_numerics_result *nr = calloc(1, sizeof *nr);
        int rc = nr ? synth(s, path, &err) : FT_ENOMEM;
        if (!rc) rc = ft_trace_open(path, FT_OPEN_READ, &t, &err);
        FILE *info = fopen("/dev/null", "w");
        ft_numerics_opts no = {.shrink = s->shrink,
                               .sample = s->sample,
                               .seed = 1,
                               .backend = be,
                               .n_threads = threads,
                               .info = info};
        if (!rc) rc = ft_numerics_replay_trace(t, NULL, &no, NULL, nr, &err);
        if (info) fclose(info);
        ft_trace_close(t);
        remove(path);
        if (rc) {
            fprintf(stderr, "bench_estimate: %s: %s\n", s->name, ft_err_msg(&err));
            free(nr);
            return 1;
        }
        const double actual = (double)nr->wall_ns * 1e-9, mid = sqrt(nr->est_lo_s * nr->est_hi_s);
        const double ratio = mid > 0 ? actual / mid : 0;
        const double off = ratio >= 1 ? ratio : (ratio > 0 ? 1 / ratio : INFINITY);
        const int in = actual >= nr->est_lo_s && actual <= nr->est_hi_s;
        if (off > worst) worst = off;
        inside += in;
        n++;
        printf("RESULT estimate shape=\"%s\" shrink=%u calls=%llu runs=%llu tflop=%.4g "
               "estimate_s=%.2f..%.2f mid_s=%.2f actual_s=%.2f actual/mid=%.2f inside=%d\n",
               s->name, s->shrink, (unsigned long long)nr->calls_run,
               (unsigned long long)nr->mlp_runs, nr->flops * 1e-12, nr->est_lo_s, nr->est_hi_s, mid,
               actual, ratio, in);
        fflush(stdout);
        free(nr);
    }
    printf("RESULT estimate worst factor between the middle of the range and the actual time: "
           "%.2fx; actual inside the range %d of %d\n",
           worst, inside, n);
    return 0;
}
