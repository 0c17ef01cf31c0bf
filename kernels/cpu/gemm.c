/*
 * gemm.c - grouped GEMM reference with fp32 accumulation over per-group row splits: the fprop,
 * dgrad and wgrad layouts of a grouped linear layer (docs/fuser-model.md, "GEMM operands").
 *
 * One CBLAS sgemm (OpenBLAS) per group, fp32 accumulation in BLAS's order; the bias is added
 * after the product (FPROP).
 */
#include "ft_kernels.h"

#include <cblas.h>
#include <string.h>

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
    if (n > INT32_MAX || k > INT32_MAX || g->m > INT32_MAX)
        return ft_err_set(err, FT_ERANGE, "gemm: shape beyond BLAS int (%lld x %lld x %lld)",
                          (long long)g->m, (long long)n, (long long)k);
    const float beta = g->accumulate ? 1.0f : 0.0f;
    int64_t r0 = 0;
    for (uint32_t grp = 0; grp < g->n_groups; grp++) {
        const int64_t rows = g->splits[grp];
        switch (g->kind) {
        case FT_GEMM_FPROP: { /* C[rows][n] = A[rows][k] W_g[n][k]^T (+ bias * bias_scale) */
            const float *w = g->b + (size_t)grp * n * k;
            const float *bias = g->bias ? g->bias + (size_t)grp * n : NULL;
            float *c = g->c + r0 * n;
            if (rows > 0 && n > 0) {
                if (k > 0)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)n, (int)k,
                                1.0f, g->a + r0 * k, (int)k, w, (int)k, beta, c, (int)n);
                else if (!g->accumulate)
                    memset(c, 0, (size_t)(rows * n) * sizeof *c);
            }
            for (int64_t r = 0; bias && r < rows; r++) {
                const float bs = g->bias_scale ? g->bias_scale[r0 + r] : 1.0f;
                for (int64_t j = 0; j < n; j++)
                    c[r * n + j] += bias[j] * bs;
            }
            break;
        }
        case FT_GEMM_DGRAD: { /* C[rows][k] = A[rows][n] W_g[n][k] */
            float *c = g->c + r0 * k;
            if (rows > 0 && k > 0) {
                if (n > 0)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)k,
                                (int)n, 1.0f, g->a + r0 * n, (int)n, g->b + (size_t)grp * n * k,
                                (int)k, beta, c, (int)k);
                else if (!g->accumulate)
                    memset(c, 0, (size_t)(rows * k) * sizeof *c);
            }
            break;
        }
        case FT_GEMM_WGRAD: { /* C_g[n][k] = A_g[rows][n]^T B_g[rows][k] */
            float *dw = g->c + (size_t)grp * n * k;
            if (rows > 0 && n > 0 && k > 0)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)k, (int)rows,
                            1.0f, g->a + r0 * n, (int)n, g->b + r0 * k, (int)k, beta, dw, (int)k);
            else if (!g->accumulate)
                memset(dw, 0, (size_t)(n * k) * sizeof *dw);
            break;
        }
        }
        r0 += rows;
    }
    return FT_OK;
}

void ft_cpu_blas_threads(int n)
{
    openblas_set_num_threads(n > 0 ? n : 1);
}

double ft_cpu_gemm_rate(void)
{
    enum { N = 256 };
    double *a = ft_malloc(3 * (size_t)N * N * sizeof *a);
    if (!a) return 0.0;
    double *b = a + (size_t)N * N, *c = b + (size_t)N * N, best = 0.0;
    for (size_t i = 0; i < 2 * (size_t)N * N; i++)
        a[i] = (double)(i % 7) - 3.0;
    for (int r = 0; r < 3; r++) {
        uint64_t t0 = ft_now_ns();
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, N, N, 1.0, a, N, b, N, 0.0, c, N);
        double s = (double)(ft_now_ns() - t0) * 1e-9, rate = 2.0 * N * N * N / (s > 0 ? s : 1e-9);
        if (rate > best) best = rate;
    }
    ft_free(a);
    return best;
}
