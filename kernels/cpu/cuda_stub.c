/*
 * cuda_stub.c - the ft_cuda_* entry points when fusertrace is built without CUDA: each reports
 * FT_ENODEV so callers (replay --numerics cuda, tests) can say so and skip.
 */
#include "ft_kernels.h"

#ifndef FT_HAVE_CUDA

static int no_cuda(ft_err *err)
{
    return ft_err_set(err, FT_ENODEV, "fusertrace was built without CUDA (nvcc not found)");
}

int ft_cuda_device_count(void)
{
    return 0;
}

int ft_cuda_device_info(char *name, size_t cap, int *n_sm, ft_err *err)
{
    if (name && cap) name[0] = 0;
    if (n_sm) *n_sm = 0;
    return no_cuda(err);
}

int ft_cuda_quantize(const ft_qcfg *q, const float *x, int64_t rows, int64_t cols,
                     const int64_t *splits, uint32_t n_groups, float *out, void *stream,
                     ft_err *err)
{
    (void)q, (void)x, (void)rows, (void)cols, (void)splits, (void)n_groups, (void)out;
    (void)stream;
    return no_cuda(err);
}

int ft_cuda_gemm(const ft_gemm *g, void *stream, ft_err *err)
{
    (void)g, (void)stream;
    return no_cuda(err);
}

int ft_cuda_act_forward(const ft_act *a, int64_t rows, int64_t k2, const float *h,
                        const float *probs, float *z, void *stream, ft_err *err)
{
    (void)a, (void)rows, (void)k2, (void)h, (void)probs, (void)z, (void)stream;
    return no_cuda(err);
}

int ft_cuda_act_backward(const ft_act *a, int64_t rows, int64_t k2, const float *h,
                         const float *probs, const float *dz, float *dh, float *dprobs,
                         void *stream, ft_err *err)
{
    (void)a, (void)rows, (void)k2, (void)h, (void)probs, (void)dz, (void)dh, (void)dprobs;
    (void)stream;
    return no_cuda(err);
}

int ft_cuda_mlp_forward(const ft_mlp *m, ft_mlp_fwd *out, void *stream, ft_err *err)
{
    (void)m, (void)out, (void)stream;
    return no_cuda(err);
}

int ft_cuda_mlp_backward(const ft_mlp *m, const ft_mlp_fwd *fwd, const float *dy, ft_mlp_bwd *out,
                         void *stream, ft_err *err)
{
    (void)m, (void)fwd, (void)dy, (void)out, (void)stream;
    return no_cuda(err);
}

int ft_cuda_nx_new(ft_cuda_nx **out, ft_err *err)
{
    *out = NULL;
    return no_cuda(err);
}

void ft_cuda_nx_free(ft_cuda_nx *nx)
{
    (void)nx;
}

int ft_cuda_mem_info(uint64_t *free_b, uint64_t *total_b, ft_err *err)
{
    if (free_b) *free_b = 0;
    if (total_b) *total_b = 0;
    return no_cuda(err);
}

int ft_cuda_nx_problem(ft_cuda_nx *nx, const ft_nx_problem *p, ft_err *err)
{
    (void)nx, (void)p;
    return no_cuda(err);
}

int ft_cuda_nx_run(ft_cuda_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, unsigned flags,
                   ft_err *err)
{
    (void)nx, (void)path, (void)q, (void)flags;
    return no_cuda(err);
}

int ft_cuda_nx_collect(ft_cuda_nx *nx, ft_nx_figs *figs, uint32_t n, ft_err *err)
{
    (void)nx, (void)figs, (void)n;
    return no_cuda(err);
}

int ft_cuda_nx_download(ft_cuda_nx *nx, int which, float *host, ft_err *err)
{
    (void)nx, (void)which, (void)host;
    return no_cuda(err);
}

int ft_cuda_nx_reference(ft_cuda_nx *nx, int which, float *host, ft_err *err)
{
    (void)nx, (void)which, (void)host;
    return no_cuda(err);
}

int ft_cuda_nx_memory(ft_cuda_nx *nx, uint64_t *held, uint64_t *pool_peak, ft_err *err)
{
    (void)nx;
    if (held) *held = 0;
    if (pool_peak) *pool_peak = 0;
    return no_cuda(err);
}

void ft_cuda_nx_profile(ft_cuda_nx *nx, int on, double ms[FT_NX_PHASES])
{
    (void)nx, (void)on;
    if (ms)
        for (int i = 0; i < FT_NX_PHASES; i++)
            ms[i] = 0.0;
}

#else
typedef int ft_cuda_stub_unused; /* ISO C forbids an empty translation unit */
#endif
