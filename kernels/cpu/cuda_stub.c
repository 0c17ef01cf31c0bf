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

#else
typedef int ft_cuda_stub_unused; /* ISO C forbids an empty translation unit */
#endif
