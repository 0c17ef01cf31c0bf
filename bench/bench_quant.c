/*
 * bench_quant.c - CPU quantizer throughput (one core), in MB/s of float32 input read, next to two
 * baselines measured in the same run over the same buffer: memcpy, and a bf16 rounding pass
 * (the cheapest elementwise pass a quantizer must beat a small multiple of).
 *
 * usage: bench_quant [ROWS COLS [REPS]]   (default 2048 x 2048, best of 5)
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_util.h"
#include "ft_kernels.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static double best_of(int reps, int (*fn)(void *), void *arg)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_thread_seconds();
        if (fn(arg)) return -1;
        double s = bench_thread_seconds() - t0;
        best = s < best ? s : best;
    }
    return best;
}

typedef struct job {
    const ft_qcfg *q;
    const float *x;
    float *out;
    int64_t rows, cols;
} job;

static int run_memcpy(void *a)
{
    job *j = a;
    memcpy(j->out, j->x, (size_t)(j->rows * j->cols) * sizeof *j->x);
    return 0;
}

static int run_bf16(void *a)
{
    job *j = a;
    size_t n = (size_t)(j->rows * j->cols);
    for (size_t i = 0; i < n; i++)
        j->out[i] = ft_bf16_round(j->x[i]);
    return 0;
}

static int run_quant(void *a)
{
    job *j = a;
    ft_err err = {0};
    int rc = ft_cpu_quantize(j->q, j->x, j->rows, j->cols, NULL, 0, j->out, NULL, &err);
    if (rc) fprintf(stderr, "bench_quant: %s\n", ft_err_msg(&err));
    return rc;
}

int main(int argc, char **argv)
{
    int64_t rows = 2048, cols = 2048, reps = 5;
    if (argc >= 3 && (ft_parse_i64(argv[1], &rows) || ft_parse_i64(argv[2], &cols) || rows < 16 ||
                      cols < 16 || rows % 16 || rows > 65536 || cols > 65536)) {
        fprintf(stderr, "usage: bench_quant [ROWS COLS [REPS]] (ROWS a multiple of 16)\n");
        return 2;
    }
    if (argc >= 4 && (ft_parse_i64(argv[3], &reps) || reps < 1 || reps > 1000)) {
        fprintf(stderr, "bench_quant: REPS must be 1..1000\n");
        return 2;
    }
    size_t n = (size_t)(rows * cols);
    float *x = ft_malloc(n * sizeof *x), *out = ft_malloc(n * sizeof *out);
    if (!x || !out) {
        fprintf(stderr, "bench_quant: no memory\n");
        return 3;
    }
    uint64_t s = 12345;
    for (size_t i = 0; i < n; i++) { /* bf16 values, roughly normal with outliers */
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(s >> 11) * 0x1p-53;
        x[i] = ft_bf16_round((float)((u - 0.5) * ((i % 97) ? 4.0 : 40.0)));
    }
    const double mb = (double)n * sizeof *x / 1e6;
    job j = {NULL, x, out, rows, cols};
    double t_copy = best_of((int)reps, run_memcpy, &j);
    double t_bf16 = best_of((int)reps, run_bf16, &j);
    printf(
        "bench_quant: %lld x %lld float32 (%.1f MB read per pass), best of %lld, thread CPU time\n",
        (long long)rows, (long long)cols, mb, (long long)reps);
    printf("%-28s %10s %12s %12s\n", "pass", "MB/s", "vs memcpy", "vs bf16");
    printf("%-28s %10.0f %12.3f %12.3f\n", "baseline memcpy", mb / t_copy, 1.0, t_bf16 / t_copy);
    printf("%-28s %10.0f %12.3f %12.3f\n", "baseline bf16 round", mb / t_bf16, t_copy / t_bf16,
           1.0);

    static const struct {
        const char *name;
        ft_qcfg q;
    } cases[] = {
        {"mxfp8 rowwise", {.fmt = FT_QF_MXFP8}},
        {"mxfp8 columnwise", {.fmt = FT_QF_MXFP8, .columnwise = 1}},
        {"mxfp8 2d 32x32", {.fmt = FT_QF_MXFP8, .two_d = 1}},
        {"mxfp8 rowwise e5m2", {.fmt = FT_QF_MXFP8, .fp8 = FT_FP8_E5M2}},
        {"nvfp4 rowwise", {.fmt = FT_QF_NVFP4}},
        {"nvfp4 rowwise sr", {.fmt = FT_QF_NVFP4, .sr = 1, .seed = 1}},
        {"nvfp4 columnwise", {.fmt = FT_QF_NVFP4, .columnwise = 1}},
        {"nvfp4 columnwise rht", {.fmt = FT_QF_NVFP4, .columnwise = 1, .rht = 1}},
        {"nvfp4 columnwise rht sr", {.fmt = FT_QF_NVFP4, .columnwise = 1, .rht = 1, .sr = 1}},
        {"nvfp4 2d 16x16", {.fmt = FT_QF_NVFP4, .two_d = 1}},
        {"fp8-current", {.fmt = FT_QF_FP8_CURRENT}},
        {"fp8-block 1x128", {.fmt = FT_QF_FP8_BLOCK, .pow2_scales = 1}},
        {"fp8-block columnwise", {.fmt = FT_QF_FP8_BLOCK, .pow2_scales = 1, .columnwise = 1}},
        {"fp8-block 2d 128x128", {.fmt = FT_QF_FP8_BLOCK, .pow2_scales = 1, .two_d = 1}},
    };
    int below = 0;
    for (size_t c = 0; c < FT_ARRAY_LEN(cases); c++) {
        j.q = &cases[c].q;
        double t = best_of((int)reps, run_quant, &j);
        if (t < 0) return 3;
        double mbs = mb / t;
        below += mbs < 200.0;
        printf("%-28s %10.0f %12.3f %12.3f%s\n", cases[c].name, mbs, t_copy / t, t_bf16 / t,
               mbs < 200.0 ? "  (below 200 MB/s target)" : "");
    }
    printf("target: every quantizer >= 200 MB/s per core: %s\n",
           below ? "MISSED (see marked rows)" : "met");
    ft_free(x);
    ft_free(out);
    return 0;
}
