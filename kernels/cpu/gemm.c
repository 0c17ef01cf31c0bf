/*
 * gemm.c - grouped GEMM reference with fp32 accumulation over per-group row splits: the fprop,
 * dgrad and wgrad layouts of a grouped linear layer (spec/te-fuser.md §4.5 "GEMM operands").
 *
 * Plain loops ordered for unit-stride inner loops; fprop dot products use 8 partial sums (an
 * accumulation order like a tensor core's k-split, and vectorizable). Not tuned further: the
 * replay runs shrunk shapes, and the CUDA back end is the fast one.
 */
#include "ft_kernels.h"

#include <string.h>

static float dot(const float *a, const float *b, int64_t n)
{
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            acc[l] += a[i + l] * b[i + l];
    for (; i < n; i++)
        acc[i & 7] += a[i] * b[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static void axpy(float *y, float a, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

static int check(const ft_gemm *g, ft_err *err)
{
    if (!g) return ft_err_set(err, FT_EINVAL, "gemm: no descriptor");
    if ((unsigned)g->kind > FT_GEMM_WGRAD)
        return ft_err_set(err, FT_EINVAL, "gemm: unknown kind %d", (int)g->kind);
    if (g->m < 0 || g->n < 0 || g->k < 0)
        return ft_err_set(err, FT_EINVAL, "gemm: negative shape m=%lld n=%lld k=%lld",
                          (long long)g->m, (long long)g->n, (long long)g->k);
    if (g->n_groups == 0 || !g->splits) return ft_err_set(err, FT_EINVAL, "gemm: no groups");
    int64_t total = 0;
    for (uint32_t i = 0; i < g->n_groups; i++) {
        if (g->splits[i] < 0 || g->splits[i] > g->m - total)
            return ft_err_set(err, FT_EINVAL,
                              "gemm: split %u = %lld is negative or overruns m = %lld", i,
                              (long long)g->splits[i], (long long)g->m);
        total += g->splits[i];
    }
    if (!g->a || !g->b || !g->c) return ft_err_set(err, FT_EINVAL, "gemm: NULL operand");
    return FT_OK;
}

int ft_cpu_gemm(const ft_gemm *g, ft_err *err)
{
    int rc = check(g, err);
    if (rc) return rc;
    const int64_t n = g->n, k = g->k;
    int64_t r0 = 0;
    for (uint32_t grp = 0; grp < g->n_groups; grp++) {
        const int64_t rows = g->splits[grp];
        switch (g->kind) {
        case FT_GEMM_FPROP: {
            const float *w = g->b + (size_t)grp * n * k;
            const float *bias = g->bias ? g->bias + (size_t)grp * n : NULL;
            for (int64_t r = r0; r < r0 + rows; r++) {
                const float *xr = g->a + r * k;
                float *yr = g->c + r * n;
                float bs = g->bias_scale ? g->bias_scale[r] : 1.0f;
                for (int64_t j = 0; j < n; j++) {
                    float v = dot(xr, w + j * k, k);
                    if (bias) v += bias[j] * bs;
                    yr[j] = g->accumulate ? yr[j] + v : v;
                }
            }
            break;
        }
        case FT_GEMM_DGRAD: {
            const float *w = g->b + (size_t)grp * n * k;
            for (int64_t r = r0; r < r0 + rows; r++) {
                const float *dy = g->a + r * n;
                float *dx = g->c + r * k;
                if (!g->accumulate) memset(dx, 0, (size_t)k * sizeof *dx);
                for (int64_t j = 0; j < n; j++)
                    axpy(dx, dy[j], w + j * k, k);
            }
            break;
        }
        case FT_GEMM_WGRAD: {
            float *dw = g->c + (size_t)grp * n * k;
            if (!g->accumulate) memset(dw, 0, (size_t)(n * k) * sizeof *dw);
            for (int64_t r = r0; r < r0 + rows; r++) {
                const float *dy = g->a + r * n;
                const float *x = g->b + r * k;
                for (int64_t j = 0; j < n; j++)
                    axpy(dw + j * k, dy[j], x, k);
            }
            break;
        }
        }
        r0 += rows;
    }
    return FT_OK;
}
