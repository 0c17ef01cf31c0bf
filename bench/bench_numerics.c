/*
 * bench_numerics.c - numerical replay (replay --numerics) timed: sampled calls per second, the
 * share of time in inputs, float64 reference, quantization, GEMMs and comparison, next to
 * baselines measured in the same run: the plain policy replay of the same trace, and (CPU back
 * end) the time OpenBLAS takes for the same GEMM FLOPs in float64.
 *
 * usage: bench_numerics TRACE [options]            a trace file
 *        bench_numerics --model NAME[,NAME..] [options]
 *   NAME: deepseek (E32 T32768 H7168 F2048, DeepSeek-V3 EP8-like), mixtral (E8 T16384 H4096
 *   F14336), qwen3 (E128 T32768 H2048 F768, Qwen3-30B-A3B-like), gpt-oss (E32 T16384 H2880
 *   F2880), small (E32 T8192 H2048 F1024), all (the first four): a synth "demo" trace of that
 *   size (2 layers, 4 steps, MXFP8 detours every 2nd step, so the policies differ).
 *   options: --numerics cpu|cuda (default cpu) --shrink K (default 1 cuda, 8 cpu) --sample N
 *   (default 0: every call) --threads N --json (report as JSON) --no-profile (skip the profiled
 * second pass) Output: one "RESULT numerics ..." line per trace and back end, then the report.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_kernels.h"
#include "ft_recorder.h"
#include "ft_replayer.h"
#include "ft_numerics.h"
#include "ft_report.h"
#include "ft_synth.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct model {
    const char *name;
    int experts, tokens, hidden, ffn;
} model;

static const model models[] = {{"deepseek", 32, 32768, 7168, 2048},
                               {"mixtral", 8, 16384, 4096, 14336},
                               {"qwen3", 128, 32768, 2048, 768},
                               {"gpt-oss", 32, 16384, 2880, 2880},
                               {"small", 32, 8192, 2048, 1024}};

/* NAME is one of the comma-separated words of list */
static int has_word(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static int synth_model(const model *m, const char *path, ft_err *err)
{
    char e[16], t[16], h[16], f[16];
    snprintf(e, sizeof e, "%d", m->experts);
    snprintf(t, sizeof t, "%d", m->tokens);
    snprintf(h, sizeof h, "%d", m->hidden);
    snprintf(f, sizeof f, "%d", m->ffn);
    const ft_synth_param sets[] = {
        {"layers", "2"},       {"experts", e},      {"tokens", t},
        {"hidden", h},         {"ffn", f},          {"steps", "4"},
        {"microbatches", "2"}, {"eval_every", "0"}, {"shared_expert", "0"},
        {"bf16_first", "0"},   {"bf16_last", "0"},  {"detour_every", "2"}};
    remove(path);
    ft_rec *rec = NULL;
    int rc = ft_rec_open(path, NULL, &rec, err);
    if (rc) return rc;
    ft_sink sink;
    ft_rec_sink(rec, &sink);
    rc = ft_synth_run("demo", sets, sizeof sets / sizeof sets[0], 1, &sink, err);
    int rc2 = ft_rec_close(rec);
    return rc ? rc : rc2;
}

/* OpenBLAS float64 GEMM rate (FLOP/s) at m x n x k, best of a few. */
static double dgemm_rate(int m, int n, int k)
{
    double *a = calloc((size_t)m * k, 8), *b = calloc((size_t)k * n, 8),
           *c = calloc((size_t)m * n, 8);
    if (!a || !b || !c) return 0;
    for (size_t i = 0; i < (size_t)m * k; i++)
        a[i] = (double)(i % 7) - 3;
    for (size_t i = 0; i < (size_t)k * n; i++)
        b[i] = (double)(i % 5) - 2;
    double best = 0;
    for (int r = 0; r < 4; r++) {
        uint64_t t0 = ft_now_ns();
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0, a, k, b, k, 0.0, c, n);
        double s = (double)(ft_now_ns() - t0) * 1e-9;
        double rate = 2.0 * m * n * k / (s > 0 ? s : 1e-9);
        if (rate > best) best = rate;
    }
    free(a), free(b), free(c);
    return best;
}

static const char *phase_names[FT_NX_PHASES] = {"inputs", "reference", "quantization",
                                                "gemms",  "compare",   "other"};

static int bench_trace(const char *label, const char *path, const model *m, ft_numerics_opts no,
                       int json, int profile)
{
    ft_trace *t = NULL;
    ft_err err = {0};
    int rc = ft_trace_open(path, FT_OPEN_READ, &t, &err);
    if (rc) {
        fprintf(stderr, "bench_numerics: %s\n", ft_err_msg(&err));
        return 2;
    }
    ft_replay_result *base = ft_calloc(2, sizeof *base);
    ft_numerics_result *nr = ft_calloc(2, sizeof *nr);
    if (!base || !nr) return 3;
    ft_replay_opts ro = {0};
    uint64_t t0 = ft_now_ns();
    rc = ft_replay_trace(t, &ro, &base[0], &err);
    const uint64_t t_base = ft_now_ns();
    uint64_t t1 = t_base;
    /* a cold pass (first use of the device or of BLAS), then the timed one */
    if (!rc) rc = ft_numerics_replay_trace(t, &ro, &no, &base[1], &nr[1], &err);
    const double s_cold = (double)nr[1].wall_ns * 1e-9;
    t1 = ft_now_ns();
    if (!rc) rc = ft_numerics_replay_trace(t, &ro, &no, &base[1], &nr[0], &err);
    uint64_t t2 = ft_now_ns();
    if (!rc && profile) {
        no.profile = 1;
        rc = ft_numerics_replay_trace(t, &ro, &no, &base[1], &nr[1], &err);
    }
    const double s_base = (double)(t_base - t0) * 1e-9, s_num = (double)(t2 - t1) * 1e-9;
    const double s_nx = (double)nr[0].wall_ns * 1e-9;
    printf("bench_numerics: %s (%s), %s, shrink %u, sample %u, threads %u, device %s\n", label,
           path, no.backend == FT_NUMERICS_CUDA ? "cuda" : "cpu", no.shrink, no.sample,
           nr[0].n_threads, nr[0].device[0] ? nr[0].device : "-");
    printf("baseline replay (policies only): %.3f s for %llu calls, %u policies\n", s_base,
           (unsigned long long)base[0].calls, base[0].n_policies);
    printf("cold pass (first use): numerics %.3f s; device memory held at most %.1f GB\n", s_cold,
           (double)nr[0].device_bytes * 1e-9);
    printf("replay with numerics: %.3f s, numerics %.3f s for %llu sampled calls (%llu MLP runs, "
           "%.3g TFLOP): %.2f sampled calls/s, %.1f TFLOP/s\n",
           s_num, s_nx, (unsigned long long)nr[0].calls_run, (unsigned long long)nr[0].mlp_runs,
           nr[0].flops * 1e-12, nr[0].calls_run / (s_nx > 0 ? s_nx : 1e-9),
           nr[0].flops * 1e-12 / (s_nx > 0 ? s_nx : 1e-9));
    char shares[256] = "";
    if (profile) {
        double tot = 0;
        for (int k = 0; k < FT_NX_PHASES; k++)
            tot += nr[1].phase_ms[k];
        size_t o = 0;
        for (int k = 0; k < FT_NX_PHASES && o < sizeof shares; k++)
            o += (size_t)snprintf(shares + o, sizeof shares - o, " %s=%.0f%%", phase_names[k],
                                  tot > 0 ? 100.0 * nr[1].phase_ms[k] / tot : 0.0);
        printf("profiled pass (synchronised phases, %.3f s of phases):%s%s\n", tot * 1e-3, shares,
               no.backend == FT_NUMERICS_CPU ? " (cpu: quantization and GEMMs inside other)" : "");
    }
    char blas[256] = "";
    if (no.backend == FT_NUMERICS_CPU && m) {
        /* the machine's rate: every core for BLAS (numerics left it at its per-thread share) */
        ft_cpu_blas_threads((int)sysconf(_SC_NPROCESSORS_ONLN));
        const int K = (int)no.shrink;
        int rows = (m->tokens / m->experts + K - 1) / K, n = 2 * ((m->ffn + K - 1) / K),
            k = (m->hidden + K - 1) / K;
        double rate = dgemm_rate(rows < 64 ? 64 : rows, n, k);
        double s_blas = nr[0].flops / (rate > 0 ? rate : 1);
        snprintf(blas, sizeof blas, " openblas_fp64=%.3fs ratio=%.2f", s_blas,
                 s_nx / (s_blas > 0 ? s_blas : 1e-9));
        printf("OpenBLAS float64 GEMM at %d x %d x %d (one expert's FC1): %.1f GFLOP/s, so %.3f s "
               "for the same %.3g TFLOP: numerics takes %.2fx that\n",
               rows, n, k, rate * 1e-9, s_blas, nr[0].flops * 1e-12,
               s_nx / (s_blas > 0 ? s_blas : 1e-9));
        double big = dgemm_rate(1024, 1024, 1024);
        printf("OpenBLAS float64 GEMM at 1024^3 (the machine's large-GEMM rate): %.1f GFLOP/s, so "
               "%.3f s: numerics takes %.2fx that\n",
               big * 1e-9, nr[0].flops / (big > 0 ? big : 1),
               s_nx / (nr[0].flops / (big > 0 ? big : 1)));
        size_t o = strlen(blas);
        snprintf(blas + o, sizeof blas - o, " ratio_1024=%.2f",
                 s_nx / (nr[0].flops / (big > 0 ? big : 1)));
    }
    printf("RESULT numerics %s %s shrink=%u calls=%llu runs=%llu cold_s=%.3f seconds=%.3f "
           "calls_per_s=%.2f tflops=%.1f gb=%.1f%s%s\n",
           label, no.backend == FT_NUMERICS_CUDA ? "cuda" : "cpu", no.shrink,
           (unsigned long long)nr[0].calls_run, (unsigned long long)nr[0].mlp_runs, s_cold, s_nx,
           nr[0].calls_run / (s_nx > 0 ? s_nx : 1e-9),
           nr[0].flops * 1e-12 / (s_nx > 0 ? s_nx : 1e-9), (double)nr[0].device_bytes * 1e-9,
           shares, blas);
    if (json)
        ft_report_write(stdout, &base[1], &nr[0], FT_REPORT_JSON, &err);
    else
        ft_report_numerics(stdout, &nr[0], &err);
    fflush(stdout);
    ft_trace_close(t);
    ft_free(base);
    ft_free(nr);
    return 0;
}

int main(int argc, char **argv)
{
    const char *usage =
        "usage: bench_numerics (TRACE | --model NAME[,NAME..]) [--numerics cpu|cuda] "
        "[--shrink K] [--sample N] [--threads N] [--json] [--no-profile]\n";
    if (argc < 2) {
        fprintf(stderr, "%s", usage);
        return 2;
    }
    ft_numerics_opts no = {.shrink = 0, .sample = 0, .seed = 1};
    int json = 0, profile = 1;
    const char *trace = NULL, *models_arg = NULL;
    for (int i = 1; i < argc; i++) {
        int64_t v;
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--no-profile")) {
            profile = 0;
        } else if (!strcmp(argv[i], "--model") && i + 1 < argc) {
            models_arg = argv[++i];
        } else if (!strcmp(argv[i], "--numerics") && i + 1 < argc) {
            const char *b = argv[++i];
            if (!strcmp(b, "cuda"))
                no.backend = FT_NUMERICS_CUDA;
            else if (strcmp(b, "cpu")) {
                fprintf(stderr, "bench_numerics: --numerics cpu or cuda, not '%s'\n", b);
                return 2;
            }
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
        } else if (argv[i][0] != '-' && !trace) {
            trace = argv[i];
        } else {
            fprintf(stderr, "bench_numerics: bad argument '%s'\n%s", argv[i], usage);
            return 2;
        }
    }
    if (!no.shrink) no.shrink = no.backend == FT_NUMERICS_CUDA ? 1 : 8;
    if (trace) return bench_trace(trace, trace, NULL, no, json, profile);
    if (!models_arg) {
        fprintf(stderr, "%s", usage);
        return 2;
    }
    const char *tmp = getenv("TMPDIR");
    int rc = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        const model *m = &models[i];
        const int in_all = has_word(models_arg, "all") && strcmp(m->name, "small");
        if (!in_all && !has_word(models_arg, m->name)) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/bench_numerics_%s_%ld.ftdb", tmp ? tmp : "/tmp", m->name,
                 (long)getpid());
        ft_err err = {0};
        if (synth_model(m, path, &err)) {
            fprintf(stderr, "bench_numerics: synth %s: %s\n", m->name, ft_err_msg(&err));
            return 3;
        }
        char label[96];
        snprintf(label, sizeof label, "%s(E%d,T%d,H%d,F%d)", m->name, m->experts, m->tokens,
                 m->hidden, m->ffn);
        rc |= bench_trace(label, path, m, no, json, profile);
        ft_trace_remove(path);
    }
    return rc;
}
