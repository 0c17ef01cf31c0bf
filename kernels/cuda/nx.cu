// nx.cu - the numerics problem on the device (ft_cuda_nx_*, ft_kernels.h "numerical replay: one
// problem, two back ends"): one context holds the inputs of the current call (generated on the
// device from the seed streams of kernels/nx_int.h), the float64 reference (cuBLAS DGEMM per
// expert, activation in float64), the outputs of the base run (bf16, exact: every output of the
// contract is bf16-valued) and the figures of each run, reduced on the device with the metric
// of nx_int.h. Per call only the figures come back to the host (one copy, one synchronisation
// in ft_cuda_nx_collect). Buffers live in the context and in the device's stream-ordered pool
// (release threshold raised), so they are reused across calls.
#include "ft_cuda_int.cuh"
#include "nx_ctx.cuh"
#include "nx_int.h"

#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace
{

enum { S_NREF = 0, S_DREF, S_NBASE, S_DBASE, S_MAXABS, S_NONFIN, S_N };
constexpr int RED_BLOCKS = 512;

// stream (seed, i) of kernels/nx_int.h
__global__ void gen_kernel(float *v, int64_t n, float scale, uint64_t seed, int probs)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        v[i] = nx_input(seed, (uint64_t)i, scale, probs);
}

__global__ void f2d_kernel(const float *s, double *d, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        d[i] = (double)s[i];
}

__global__ void d2f_kernel(const double *s, float *d, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        d[i] = (float)s[i];
}

__global__ void f2b_kernel(const float *s, uint16_t *d, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        d[i] = (uint16_t)(__float_as_uint(s[i]) >> 16); // bf16 values: the top half is exact
}

// The float64 activation of kernels/cpu/act_int.h (act_at64).
struct act64 {
    double f, du, dv;
    int64_t iu, iv;
};

__device__ act64 act_at64(const act_params &a, const double *hr, int64_t k2, int64_t c)
{
    act64 e;
    e.iv = -1;
    e.dv = 0.0;
    if (a.kind == FT_ACT_SRELU) {
        e.iu = c;
        const double u = hr[c], m = u > 0.0 ? u : 0.0;
        e.f = m * m;
        e.du = 2.0 * m;
        return e;
    }
    glu_cols(a.interleave, k2, c, &e.iu, &e.iv);
    const double u = hr[e.iu], v = hr[e.iv];
    if (a.kind == FT_ACT_SWIGLU) {
        const double s = 1.0 / (1.0 + exp(-u));
        e.f = u * s * v;
        e.du = (s + u * s * (1.0 - s)) * v;
        e.dv = u * s;
    } else {
        const double L = a.limit, al = a.alpha;
        const double uc = u < L ? u : L, vc = v > L ? L : (v < -L ? -L : v);
        const double s = 1.0 / (1.0 + exp(-al * uc));
        e.f = uc * s * (vc + (double)a.offset);
        e.du = u <= L ? (s + al * uc * s * (1.0 - s)) * (vc + (double)a.offset) : 0.0;
        e.dv = fabs(v) <= L ? uc * s : 0.0;
    }
    return e;
}

// h += b1 over the rows of every group (float64)
__global__ void ref_bias1_kernel(const int64_t *offs, int G, int64_t n1, double *h, const float *b1)
{
    const int64_t used = offs[G];
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < used * n1;
         i += (int64_t)gridDim.x * blockDim.x)
        h[i] += (double)b1[(int64_t)last_le(offs, G, i / n1) * n1 + i % n1];
}

// z = p f(h) (float64)
__global__ void ref_act_z_kernel(act_params a, const int64_t *offs, int G, int64_t n1, int64_t k2,
                                 const double *h, const float *probs, double *z)
{
    const int64_t used = offs[G];
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < used * k2;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / k2, c = i % k2;
        const double p = probs ? (double)probs[r] : 1.0;
        z[i] = p * act_at64(a, h + r * n1, k2, c).f;
    }
}

// y += b2 * (scale_bias ? p : 1)
__global__ void ref_bias2_kernel(const int64_t *offs, int G, int64_t n2, double *y, const float *b2,
                                 const float *probs, int scale_bias)
{
    const int64_t used = offs[G];
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < used * n2;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / n2;
        const double p = scale_bias ? (double)probs[r] : 1.0;
        y[i] += (double)b2[(int64_t)last_le(offs, G, r) * n2 + i % n2] * p;
    }
}

// dh = dz p f'(h)
__global__ void ref_act_bwd_kernel(act_params a, const int64_t *offs, int G, int64_t n1, int64_t k2,
                                   const double *h, const float *probs, const double *dz,
                                   double *dh)
{
    const int64_t used = offs[G];
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < used * k2;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / k2, c = i % k2;
        const double p = probs ? (double)probs[r] : 1.0;
        const act64 e = act_at64(a, h + r * n1, k2, c);
        const double gz = dz[i];
        dh[r * n1 + e.iu] = gz * p * e.du;
        if (e.iv >= 0) dh[r * n1 + e.iv] = gz * p * e.dv;
    }
}

// Partial sums of one output: vs the reference (num, den), vs the base (num, den), max |o - b|
// (NaN wins: nx_nanmax), non-finite count. Fixed grid: deterministic.
__global__ void cmp_kernel(const float *o, const float *ref, const uint16_t *base, int64_t n,
                           double *part)
{
    __shared__ double sh[S_N][256];
    double s[S_N] = {0, 0, 0, 0, 0, 0};
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const double v = o[i], r = ref[i];
        s[S_NREF] += (v - r) * (v - r);
        s[S_DREF] += r * r;
        if (base) {
            const double b = bf16_to_f(base[i]), d = v - b;
            s[S_NBASE] += d * d;
            s[S_DBASE] += b * b;
            s[S_MAXABS] = nx_nanmax(s[S_MAXABS], fabs(d));
        }
        s[S_NONFIN] += isfinite(o[i]) ? 0.0 : 1.0;
    }
    for (int k = 0; k < S_N; k++)
        sh[k][threadIdx.x] = s[k];
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w)
            for (int k = 0; k < S_N; k++)
                sh[k][threadIdx.x] = k == S_MAXABS
                                         ? nx_nanmax(sh[k][threadIdx.x], sh[k][threadIdx.x + w])
                                         : sh[k][threadIdx.x] + sh[k][threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        for (int k = 0; k < S_N; k++)
            part[(int64_t)blockIdx.x * S_N + k] = sh[k][0];
}

__global__ void cmp_final_kernel(const double *part, int nb, double *out)
{
    if (threadIdx.x >= S_N) return;
    const int k = threadIdx.x;
    double s = 0.0;
    for (int b = 0; b < nb; b++)
        s = k == S_MAXABS ? nx_nanmax(s, part[b * S_N + k]) : s + part[b * S_N + k];
    out[k] = s;
}

int blas_fail(cublasStatus_t s, ft_err *err, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS) return FT_OK;
    return ft_err_set(err, FT_ECUDA, "%s: cuBLAS status %d", what, (int)s);
}

} // namespace

namespace
{

int nx_alloc(ft_nx *nx, void **p, size_t bytes, ft_err *err)
{
    *p = NULL;
    int rc = cu_fail(cudaMalloc(p, bytes ? bytes : 16), err, "cudaMalloc");
    if (rc)
        return ft_err_set(
            err, FT_ENOMEM,
            "numerics cuda: out of device memory allocating %.2f GB (%.2f GB held); a "
            "larger --shrink helps",
            (double)bytes / 1e9, (double)nx->bytes / 1e9);
    nx->bytes += bytes;
    return FT_OK;
}

void nx_release(ft_nx *nx)
{
    ft_fast_forget(&nx->fast, nx->st);
    void *all[] = {nx->splits, nx->offs,    nx->x,       nx->w1,      nx->b1,     nx->w2,
                   nx->b2,     nx->pr,      nx->dy,      nx->h,       nx->z,      nx->ref[0],
                   nx->ref[1], nx->ref[2],  nx->ref[3],  nx->out[0],  nx->out[1], nx->out[2],
                   nx->out[3], nx->base[0], nx->base[1], nx->base[2], nx->base[3]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) cudaFree(all[i]);
    nx->splits = nx->offs = NULL;
    nx->x = nx->w1 = nx->b1 = nx->w2 = nx->b2 = nx->pr = nx->dy = nx->h = nx->z = NULL;
    for (int o = 0; o < O_N; o++)
        nx->ref[o] = nx->out[o] = NULL, nx->base[o] = NULL;
    nx->bytes = 0;
    nx->wkey = 0;
    nx->have = 0;
}

int same_shape(const ft_nx_problem *a, const ft_nx_problem *b)
{
    return a->n_groups == b->n_groups && a->t == b->t && a->k1 == b->k1 && a->n1 == b->n1 &&
           a->k2 == b->k2 && a->n2 == b->n2 && a->bias1 == b->bias1 && a->bias2 == b->bias2 &&
           a->scaled == b->scaled && a->inputs_only == b->inputs_only;
}

int gen(const ft_nx *nx, float *v, int64_t n, float scale, uint64_t seed, int probs, ft_err *err)
{
    if (n <= 0) return FT_OK;
    gen_kernel<<<cu_blocks(n, 256), 256, 0, nx->st>>>(v, n, scale, seed, probs);
    return cu_launched(err, "gen_kernel");
}

// Column-major cuBLAS calls for the row-major grouped layouts (see mlp_f32.cu's gemm).
int dgemm(ft_nx *nx, ft_gemm_kind kind, int64_t s, int64_t n, int64_t k, const double *a,
          const double *b, double *c, ft_err *err)
{
    const double *one = nx->dconst, *zero = nx->dconst + 1;
    cublasStatus_t cs;
    if (kind == FT_GEMM_FPROP) // c[s][n] = a[s][k] b[n][k]^T
        cs = cublasDgemm(nx->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)s, (int)k, one, b, (int)k,
                         a, (int)k, zero, c, (int)n);
    else if (kind == FT_GEMM_DGRAD) // c[s][k] = a[s][n] b[n][k]
        cs = cublasDgemm(nx->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)k, (int)s, (int)n, one, b, (int)k,
                         a, (int)n, zero, c, (int)k);
    else // c[n][k] = a[s][n]^T b[s][k]
        cs = cublasDgemm(nx->blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)k, (int)n, (int)s, one, b, (int)k,
                         a, (int)n, zero, c, (int)k);
    return blas_fail(cs, err, "cublasDgemm");
}

int f2d(const ft_nx *nx, const float *s, double *d, int64_t n, ft_err *err)
{
    if (n <= 0) return FT_OK;
    f2d_kernel<<<cu_blocks(n, 256), 256, 0, nx->st>>>(s, d, n);
    return cu_launched(err, "f2d_kernel");
}

int d2f(const ft_nx *nx, const double *s, float *d, int64_t n, ft_err *err)
{
    if (n <= 0) return FT_OK;
    d2f_kernel<<<cu_blocks(n, 256), 256, 0, nx->st>>>(s, d, n);
    return cu_launched(err, "d2f_kernel");
}

// The float64 reference's work space (device).
struct ref64 {
    double *x, *dy, *h, *z, *o, *dz, *dh, *w, *dw;
};

// The float64 reference's backward (reference's buffers r, its forward done): dz = dy W2,
// dh = dz p f'(h), dx = dh W1, dW2 = dy^T z, dW1 = dh^T x.
int reference_backward(ft_nx *nx, const ref64 *r, ft_err *err)
{
    const ft_nx_problem *p = &nx->p;
    const int64_t t = p->t, k1 = p->k1, n1 = p->n1, k2 = p->k2, n2 = p->n2;
    const uint32_t G = p->n_groups;
    const int64_t omax = n2 > k1 ? n2 : k1;
    const act_params a = act_from(&p->act);
    double *dy64 = r->dy, *h64 = r->h, *z64 = r->z, *o64 = r->o, *dz64 = r->dz, *dh64 = r->dh,
           *w64 = r->w, *dw64 = r->dw;
    const double *x64 = r->x;
    int rc = f2d(nx, nx->dy, dy64, t * n2, err);
    if (!rc) rc = cu_fail(cudaMemsetAsync(dz64, 0, (size_t)(t * k2) * 8, nx->st), err, "memset");
    if (!rc) rc = cu_fail(cudaMemsetAsync(dh64, 0, (size_t)(t * n1) * 8, nx->st), err, "memset");
    if (!rc) rc = cu_fail(cudaMemsetAsync(o64, 0, (size_t)(t * omax) * 8, nx->st), err, "memset");
    int64_t r0 = 0;
    for (uint32_t g = 0; g < G && !rc; g++) {
        const int64_t s = nx->hsplits[g];
        if (s > 0) {
            rc = f2d(nx, nx->w2 + (size_t)g * n2 * k2, w64, n2 * k2, err);
            if (!rc)
                rc = dgemm(nx, FT_GEMM_DGRAD, s, n2, k2, dy64 + r0 * n2, w64, dz64 + r0 * k2, err);
            if (!rc)
                rc = dgemm(nx, FT_GEMM_WGRAD, s, n2, k2, dy64 + r0 * n2, z64 + r0 * k2, dw64, err);
        } else if (!rc) {
            rc = cu_fail(cudaMemsetAsync(dw64, 0, (size_t)(n2 * k2) * 8, nx->st), err, "memset");
        }
        if (!rc) rc = d2f(nx, dw64, nx->ref[O_DW2] + (size_t)g * n2 * k2, n2 * k2, err);
        r0 += s;
    }
    if (!rc) {
        ref_act_bwd_kernel<<<cu_blocks(t * k2, 256), 256, 0, nx->st>>>(a, nx->offs, (int)G, n1, k2,
                                                                       h64, nx->pr, dz64, dh64);
        rc = cu_launched(err, "ref_act_bwd_kernel");
    }
    r0 = 0;
    for (uint32_t g = 0; g < G && !rc; g++) {
        const int64_t s = nx->hsplits[g];
        if (s > 0) {
            rc = f2d(nx, nx->w1 + (size_t)g * n1 * k1, w64, n1 * k1, err);
            if (!rc)
                rc = dgemm(nx, FT_GEMM_DGRAD, s, n1, k1, dh64 + r0 * n1, w64, o64 + r0 * k1, err);
            if (!rc)
                rc = dgemm(nx, FT_GEMM_WGRAD, s, n1, k1, dh64 + r0 * n1, x64 + r0 * k1, dw64, err);
        } else if (!rc) {
            rc = cu_fail(cudaMemsetAsync(dw64, 0, (size_t)(n1 * k1) * 8, nx->st), err, "memset");
        }
        if (!rc) rc = d2f(nx, dw64, nx->ref[O_DW1] + (size_t)g * n1 * k1, n1 * k1, err);
        r0 += s;
    }
    if (!rc) rc = d2f(nx, o64, nx->ref[O_DX], t * k1, err);
    return rc;
}

// The float64 reference of kernels/cpu/mlp_ref.c on the device, rounded to float32 into ref[].
int reference(ft_nx *nx, ft_err *err)
{
    const ft_nx_problem *p = &nx->p;
    const int64_t t = p->t, k1 = p->k1, n1 = p->n1, k2 = p->k2, n2 = p->n2;
    const uint32_t G = p->n_groups;
    const int64_t wmax = n1 * k1 > n2 * k2 ? n1 * k1 : n2 * k2;
    const int64_t omax = n2 > k1 ? n2 : k1;
    const act_params a = act_from(&p->act);
    double *x64 = NULL, *dy64 = NULL, *h64 = NULL, *z64 = NULL, *o64 = NULL, *dz64 = NULL,
           *dh64 = NULL, *w64 = NULL, *dw64 = NULL;
    double **bufs[] = {&x64, &dy64, &h64, &z64, &o64, &dz64, &dh64, &w64, &dw64};
    const int64_t sizes[] = {t * k1,
                             p->grad ? t * n2 : 1,
                             t * n1,
                             t * k2,
                             t * omax,
                             p->grad ? t * k2 : 1,
                             p->grad ? t * n1 : 1,
                             wmax,
                             p->grad ? wmax : 1};
    int rc = FT_OK;
    // The runs' output buffers are idle while the reference runs (same stream, runs come after):
    // the work space takes them first, the pool the rest.
    struct {
        char *p;
        size_t left;
    } reg[] = {{(char *)nx->out[O_DW1], (size_t)nx->cnt[O_DW1] * 4},
               {(char *)nx->out[O_DW2], (size_t)nx->cnt[O_DW2] * 4},
               {(char *)nx->out[O_DX], (size_t)nx->cnt[O_DX] * 4},
               {(char *)nx->out[O_Y], (size_t)nx->cnt[O_Y] * 4}};
    int pooled[sizeof bufs / sizeof bufs[0]] = {0};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0] && !rc; i++) {
        const size_t need = ((size_t)(sizes[i] > 0 ? sizes[i] : 1) * 8 + 255) / 256 * 256;
        size_t r = 0;
        while (r < sizeof reg / sizeof reg[0] && reg[r].left < need)
            r++;
        if (r < sizeof reg / sizeof reg[0]) {
            *bufs[i] = (double *)reg[r].p;
            reg[r].p += need;
            reg[r].left -= need;
            continue;
        }
        pooled[i] = 1;
        rc = cu_fail(
            cudaMallocAsync((void **)bufs[i], (size_t)(sizes[i] > 0 ? sizes[i] : 1) * 8, nx->st),
            err, "cudaMallocAsync (reference)");
        if (rc)
            rc = ft_err_set(err, FT_ENOMEM,
                            "numerics cuda: out of device memory for the float64 reference "
                            "(%.2f GB); a larger --shrink helps",
                            (double)sizes[i] * 8e-9);
    }
    if (!rc && cublasSetStream(nx->blas, nx->st) != CUBLAS_STATUS_SUCCESS)
        rc = ft_err_set(err, FT_ECUDA, "cublasSetStream failed");
    if (!rc && cublasSetPointerMode(nx->blas, CUBLAS_POINTER_MODE_DEVICE) != CUBLAS_STATUS_SUCCESS)
        rc = ft_err_set(err, FT_ECUDA, "cublasSetPointerMode failed");
    if (!rc) rc = cu_fail(cudaMemsetAsync(h64, 0, (size_t)(t * n1) * 8, nx->st), err, "memset");
    if (!rc) rc = cu_fail(cudaMemsetAsync(z64, 0, (size_t)(t * k2) * 8, nx->st), err, "memset");
    if (!rc) rc = cu_fail(cudaMemsetAsync(o64, 0, (size_t)(t * omax) * 8, nx->st), err, "memset");
    if (!rc) rc = f2d(nx, nx->x, x64, t * k1, err);
    // forward: h = x W1^T + b1, z = p f(h), y = z W2^T + b2 (* p)
    int64_t r0 = 0;
    for (uint32_t g = 0; g < G && !rc; g++) {
        const int64_t s = nx->hsplits[g];
        if (s > 0) {
            rc = f2d(nx, nx->w1 + (size_t)g * n1 * k1, w64, n1 * k1, err);
            if (!rc)
                rc = dgemm(nx, FT_GEMM_FPROP, s, n1, k1, x64 + r0 * k1, w64, h64 + r0 * n1, err);
        }
        r0 += s;
    }
    const unsigned nb = cu_blocks(t * n1, 256);
    if (!rc && p->bias1) {
        ref_bias1_kernel<<<nb, 256, 0, nx->st>>>(nx->offs, (int)G, n1, h64, nx->b1);
        rc = cu_launched(err, "ref_bias1_kernel");
    }
    if (!rc) {
        ref_act_z_kernel<<<cu_blocks(t * k2, 256), 256, 0, nx->st>>>(a, nx->offs, (int)G, n1, k2,
                                                                     h64, nx->pr, z64);
        rc = cu_launched(err, "ref_act_z_kernel");
    }
    r0 = 0;
    for (uint32_t g = 0; g < G && !rc; g++) {
        const int64_t s = nx->hsplits[g];
        if (s > 0) {
            rc = f2d(nx, nx->w2 + (size_t)g * n2 * k2, w64, n2 * k2, err);
            if (!rc)
                rc = dgemm(nx, FT_GEMM_FPROP, s, n2, k2, z64 + r0 * k2, w64, o64 + r0 * n2, err);
        }
        r0 += s;
    }
    if (!rc && p->bias2) {
        ref_bias2_kernel<<<cu_blocks(t * n2, 256), 256, 0, nx->st>>>(nx->offs, (int)G, n2, o64,
                                                                     nx->b2, nx->pr, p->scale_bias);
        rc = cu_launched(err, "ref_bias2_kernel");
    }
    if (!rc) rc = d2f(nx, o64, nx->ref[O_Y], t * n2, err);
    if (!rc && p->grad) {
        const ref64 r = {x64, dy64, h64, z64, o64, dz64, dh64, w64, dw64};
        rc = reference_backward(nx, &r, err);
    }
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (*bufs[i] && pooled[i]) cudaFreeAsync(*bufs[i], nx->st);
    return rc;
}

} // namespace

// bf16 copies of bf16-valued floats (the timed step's inputs).
int nx_f2b(const ft_nx *nx, const float *s, uint16_t *d, int64_t n, ft_err *err)
{
    if (n <= 0) return FT_OK;
    f2b_kernel<<<cu_blocks(n, 256), 256, 0, nx->st>>>(s, d, n);
    return cu_launched(err, "f2b_kernel");
}

// The context's device made the calling thread's current one (each entry point below starts
// here, so a context can be used from any thread).
int nx_enter(const ft_nx *nx, ft_err *err)
{
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == nx->dev) return FT_OK;
    return cu_fail(cudaSetDevice(nx->dev), err, "cudaSetDevice");
}

extern "C" int ft_cuda_nx_new(ft_nx **out, ft_err *err)
{
    int dev = 0;
    *out = NULL;
    if (ft_cuda_device_count() >= 1 && cudaGetDevice(&dev) != cudaSuccess) {
        cudaGetLastError();
        dev = 0;
    }
    return ft_cuda_nx_new_on(dev, out, err);
}

extern "C" int ft_cuda_nx_new_on(int device, ft_nx **out, ft_err *err)
{
    *out = NULL;
    const int n_dev = ft_cuda_device_count();
    if (n_dev < 1)
        return ft_err_set(err, FT_ENODEV,
                          "no CUDA device is visible (cudaGetDeviceCount finds none)");
    if (device < 0 || device >= n_dev)
        return ft_err_set(err, FT_EINVAL, "CUDA device %d: this process sees %d device%s", device,
                          n_dev, n_dev == 1 ? "" : "s");
    if (cu_fail(cudaSetDevice(device), err, "cudaSetDevice")) return FT_ECUDA;
    ft_nx *nx = (ft_nx *)ft_calloc(1, sizeof *nx);
    if (!nx) return ft_err_set(err, FT_ENOMEM, "numerics cuda: no memory");
    nx->dev = device;
    int rc =
        cu_fail(cudaStreamCreateWithFlags(&nx->st, cudaStreamNonBlocking), err, "cudaStreamCreate");
    if (!rc && cublasCreate(&nx->blas) != CUBLAS_STATUS_SUCCESS)
        rc = ft_err_set(err, FT_ECUDA, "cublasCreate failed");
    if (!rc) rc = cu_fail(cudaMalloc((void **)&nx->zero, 16), err, "cudaMalloc");
    if (!rc) rc = cu_fail(cudaMalloc((void **)&nx->dconst, 16), err, "cudaMalloc");
    if (!rc) rc = cu_fail(cudaMemset(nx->zero, 0, 16), err, "cudaMemset");
    const double dc[2] = {1.0, 0.0};
    if (!rc)
        rc = cu_fail(cudaMemcpy(nx->dconst, dc, 16, cudaMemcpyHostToDevice), err, "cudaMemcpy");
    if (!rc)
        rc = cu_fail(cudaMalloc((void **)&nx->figs, sizeof(double) * FT_NX_MAX_SLOTS * O_N * S_N),
                     err, "cudaMalloc");
    if (!rc)
        rc = cu_fail(cudaMalloc((void **)&nx->part, sizeof(double) * RED_BLOCKS * S_N), err,
                     "cudaMalloc");
    if (!rc) { // keep freed pool memory for the next call instead of returning it at each sync
        int dev = 0;
        cudaMemPool_t pool;
        uint64_t keep = UINT64_MAX;
        if (cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess)
            cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    if (rc) {
        ft_cuda_nx_free(nx);
        return rc;
    }
    nx->fast.blas = nx->blas;
    nx->fast.zero = nx->zero;
    nx->fast.phase = -1;
    { // the weight cache: FT_NX_WCACHE_GB (default 3 GB, at most a quarter of the device; the
      // DeepSeek-V3 EP8 shape's four bf16 weight operands take 5.6 GB per format, and 3 GB keeps
      // that shape within 40 GB of device memory: bench/RESULTS.md)
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        const char *e = getenv("FT_NX_WCACHE_GB");
        double gb = e && *e ? atof(e) : 3.0;
        size_t cap = (size_t)(gb * 1e9);
        nx->fast.wcap = cap < tot / 4 ? cap : tot / 4;
    }
    *out = nx;
    return FT_OK;
}

extern "C" void ft_cuda_nx_free(ft_nx *nx)
{
    if (!nx) return;
    nx_enter(nx, NULL);
    if (nx->st) cudaStreamSynchronize(nx->st);
    nx_release(nx);
    if (nx->zero) cudaFree(nx->zero);
    if (nx->dconst) cudaFree(nx->dconst);
    if (nx->figs) cudaFree(nx->figs);
    if (nx->part) cudaFree(nx->part);
    if (nx->blas) cublasDestroy(nx->blas);
    if (nx->st) cudaStreamDestroy(nx->st);
    ft_free(nx);
}

extern "C" int ft_cuda_nx_problem(ft_nx *nx, const ft_nx_problem *p, ft_err *err)
{
    if (!nx || !p || !p->splits || p->n_groups < 1 || p->n_groups > FT_CUDA_MAX_GROUPS)
        return ft_err_set(err, FT_EINVAL, "numerics cuda: bad problem (groups 1..%d)",
                          FT_CUDA_MAX_GROUPS);
    if (nx_enter(nx, err)) return FT_ECUDA;
    if (p->t < 0 || p->k1 < 1 || p->n1 < 1 || p->k2 < 1 || p->n2 < 1)
        return ft_err_set(err, FT_EINVAL, "numerics cuda: bad shape");
    int64_t used = 0;
    for (uint32_t g = 0; g < p->n_groups; g++) {
        if (p->splits[g] < 0) return ft_err_set(err, FT_EINVAL, "numerics cuda: split %u < 0", g);
        used += p->splits[g];
    }
    if (used > p->t) return ft_err_set(err, FT_EINVAL, "numerics cuda: splits exceed t");
    ft_fast_phase(&nx->fast, FT_PH_GEN, nx->st);
    int rc = FT_OK;
    const int keep = nx->have && same_shape(&nx->p, p);
    if (!keep) {
        cudaStreamSynchronize(nx->st);
        nx_release(nx);
    }
    const uint32_t G = p->n_groups;
    const int64_t t = p->t, k1 = p->k1, n1 = p->n1, k2 = p->k2, n2 = p->n2;
    nx->p = *p;
    memcpy(nx->hsplits, p->splits, G * sizeof(int64_t));
    nx->p.splits = nx->hsplits;
    nx->cnt[O_Y] = t * n2, nx->cnt[O_DX] = t * k1;
    nx->cnt[O_DW1] = (int64_t)G * n1 * k1, nx->cnt[O_DW2] = (int64_t)G * n2 * k2;
    if (!keep) {
        struct {
            void **p;
            size_t bytes;
        } a[] = {
            {(void **)&nx->splits, G * 8},
            {(void **)&nx->offs, (G + 1) * 8},
            {(void **)&nx->x, (size_t)(t * k1) * 4},
            {(void **)&nx->w1, (size_t)G * n1 * k1 * 4},
            {(void **)&nx->b1, p->bias1 ? (size_t)G * n1 * 4 : 0},
            {(void **)&nx->w2, (size_t)G * n2 * k2 * 4},
            {(void **)&nx->b2, p->bias2 ? (size_t)G * n2 * 4 : 0},
            {(void **)&nx->pr, p->scaled ? (size_t)t * 4 : 0},
            {(void **)&nx->dy, (size_t)(t * n2) * 4},
            {(void **)&nx->h, (size_t)(t * n1) * 4},
            {(void **)&nx->z, (size_t)(t * k2) * 4},
        };
        for (size_t i = 0; i < sizeof a / sizeof a[0] && !rc; i++)
            if (a[i].bytes) rc = nx_alloc(nx, a[i].p, a[i].bytes, err);
        for (int o = 0; o < O_N && !rc && !p->inputs_only; o++) {
            rc = nx_alloc(nx, (void **)&nx->ref[o], (size_t)nx->cnt[o] * 4, err);
            if (!rc) rc = nx_alloc(nx, (void **)&nx->out[o], (size_t)nx->cnt[o] * 4, err);
            if (!rc) rc = nx_alloc(nx, (void **)&nx->base[o], (size_t)nx->cnt[o] * 2, err);
        }
        if (rc) {
            nx_release(nx);
            return rc;
        }
        nx->have = 1;
    }
    nx->has_base = 0;
    nx->n_slots = 0;
    rc = cu_fail(cudaMemcpyAsync(nx->splits, nx->hsplits, G * 8, cudaMemcpyHostToDevice, nx->st),
                 err, "cudaMemcpy splits");
    if (!rc) rc = ft_cu_offsets(nx->splits, (int)G, t, nx->offs, nx->st, err);
    // weights: the same for every call of a fuser; generated again only when they change
    const uint64_t wkey = (p->wseed ^ 0x5bd1e995u) | 1u;
    if (!rc && nx->wkey != wkey) {
        ft_fast_forget(&nx->fast, nx->st);
        rc = gen(nx, nx->w1, (int64_t)G * n1 * k1, p->w1_scale, p->wseed + NX_W1, 0, err);
        if (!rc && p->bias1)
            rc = gen(nx, nx->b1, (int64_t)G * n1, NX_BIAS_SCALE, p->wseed + NX_B1, 0, err);
        if (!rc) rc = gen(nx, nx->w2, (int64_t)G * n2 * k2, p->w2_scale, p->wseed + NX_W2, 0, err);
        if (!rc && p->bias2)
            rc = gen(nx, nx->b2, (int64_t)G * n2, NX_BIAS_SCALE, p->wseed + NX_B2, 0, err);
        if (!rc) nx->wkey = wkey;
    }
    if (!rc) rc = gen(nx, nx->x, t * k1, 1.0f, p->xseed + NX_X, 0, err);
    if (!rc && p->scaled) rc = gen(nx, nx->pr, t, 1.0f, p->xseed + NX_PROBS, 1, err);
    if (!rc) rc = gen(nx, nx->dy, t * n2, 1.0f, p->xseed + NX_DY, 0, err);
    ft_fast_phase(&nx->fast, FT_PH_REF, nx->st);
    if (!rc && !p->inputs_only) rc = reference(nx, err);
    if (rc) nx->wkey = 0;
    return rc;
}

extern "C" int ft_cuda_nx_run(ft_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, unsigned flags,
                              ft_err *err)
{
    if (!nx || !nx->have) return ft_err_set(err, FT_EINVAL, "numerics cuda: no problem set");
    if (nx_enter(nx, err)) return FT_ECUDA;
    if (nx->n_slots >= FT_NX_MAX_SLOTS)
        return ft_err_set(err, FT_ERANGE, "numerics cuda: more than %d runs in one call",
                          FT_NX_MAX_SLOTS);
    const uint32_t slot = nx->n_slots++;
    const ft_nx_problem *p = &nx->p;
    ft_mlp m;
    memset(&m, 0, sizeof m);
    m.n_groups = p->n_groups;
    m.splits = nx->splits;
    m.t = p->t, m.k1 = p->k1, m.n1 = p->n1, m.k2 = p->k2, m.n2 = p->n2;
    m.act = p->act;
    m.scale_bias = p->scale_bias;
    m.path = path;
    m.quant = *q;
    m.x = nx->x, m.w1 = nx->w1, m.b1 = p->bias1 ? nx->b1 : NULL, m.w2 = nx->w2;
    m.b2 = p->bias2 ? nx->b2 : NULL, m.probs = p->scaled ? nx->pr : NULL;
    nx->slot_rc[slot] = FT_OK;
    nx->slot_msg[slot][0] = 0;
    nx->slot_base[slot] = 0;
    if (p->inputs_only)
        return ft_err_set(err, FT_EINVAL, "numerics cuda: the problem was set without a reference");
    // the kernels' refusals (and the back end's) are decided on the host, before anything runs
    ft_mlp hm = m;
    hm.splits = nx->hsplits;
    ft_err kerr;
    ft_err_clear(&kerr);
    int krc = ft_mlp_check(&hm, &kerr);
    if (!krc && q->fmt == FT_QF_FP8_DELAYED && q->delayed)
        krc = ft_err_set(&kerr, FT_EUNSUPPORTED,
                         "numerics cuda: FP8 delayed scaling with amax histories runs on the CPU");
    if (!krc && q->fmt == FT_QF_FP8_BLOCK && !q->pow2_scales)
        krc = ft_err_set(&kerr, FT_EUNSUPPORTED,
                         "numerics cuda: FP8 block scales that are not powers of two are not "
                         "exact in bf16; they run on the CPU");
    if (krc) {
        if (krc != FT_EUNSUPPORTED && krc != FT_EINVAL)
            return ft_err_set(err, krc, "%s", ft_err_msg(&kerr));
        nx->slot_rc[slot] = krc;
        ft_strlcpy(nx->slot_msg[slot], ft_err_msg(&kerr), sizeof nx->slot_msg[slot]);
        return FT_OK;
    }
    ft_mlp_fwd f = {nx->h, nx->z, nx->out[O_Y]};
    int rc = ft_cu_mlp_f32_forward(&m, nx->hsplits, &nx->fast, &f, nx->st, err);
    if (!rc && p->grad) {
        ft_mlp_bwd b = {nx->out[O_DX], nx->out[O_DW1], NULL, nx->out[O_DW2], NULL, NULL};
        rc = ft_cu_mlp_f32_backward(&m, nx->hsplits, &nx->fast, &f, nx->dy, &b, nx->st, err);
    }
    if (rc) return rc;
    ft_fast_phase(&nx->fast, FT_PH_CMP, nx->st);
    const int n_out = p->grad ? O_N : 1;
    for (int o = 0; o < n_out && !rc; o++) {
        cmp_kernel<<<RED_BLOCKS, 256, 0, nx->st>>>(
            nx->out[o], nx->ref[o], nx->has_base ? nx->base[o] : NULL, nx->cnt[o], nx->part);
        rc = cu_launched(err, "cmp_kernel");
        if (!rc) {
            cmp_final_kernel<<<1, 32, 0, nx->st>>>(nx->part, RED_BLOCKS,
                                                   nx->figs + ((size_t)slot * O_N + o) * S_N);
            rc = cu_launched(err, "cmp_final_kernel");
        }
    }
    nx->slot_base[slot] = (uint8_t)nx->has_base;
    if (!rc && (flags & FT_NX_BASE)) {
        for (int o = 0; o < n_out && !rc; o++) {
            if (nx->cnt[o] <= 0) continue;
            f2b_kernel<<<cu_blocks(nx->cnt[o], 256), 256, 0, nx->st>>>(nx->out[o], nx->base[o],
                                                                       nx->cnt[o]);
            rc = cu_launched(err, "f2b_kernel");
        }
        nx->has_base = 1;
    }
    ft_fast_phase(&nx->fast, FT_PH_OTHER, nx->st);
    return rc;
}

extern "C" int ft_cuda_nx_collect(ft_nx *nx, ft_nx_figs *figs, uint32_t n, ft_err *err)
{
    if (!nx || n > nx->n_slots)
        return ft_err_set(err, FT_EINVAL, "numerics cuda: %u figures asked, %u runs", n,
                          nx ? nx->n_slots : 0);
    if (nx_enter(nx, err)) return FT_ECUDA;
    double h[FT_NX_MAX_SLOTS * O_N * S_N];
    int rc = FT_OK;
    if (n)
        rc = cu_fail(cudaMemcpyAsync(h, nx->figs, sizeof(double) * n * O_N * S_N,
                                     cudaMemcpyDeviceToHost, nx->st),
                     err, "cudaMemcpy figures");
    if (!rc) rc = cu_fail(cudaStreamSynchronize(nx->st), err, "cudaStreamSynchronize");
    if (rc) return rc;
    const int n_out = nx->p.grad ? O_N : 1;
    for (uint32_t s = 0; s < n; s++) {
        ft_nx_figs *f = &figs[s];
        memset(f, 0, sizeof *f);
        f->rc = nx->slot_rc[s];
        ft_strlcpy(f->msg, nx->slot_msg[s], sizeof f->msg);
        if (f->rc) continue;
        f->has_base = nx->slot_base[s];
        double e[O_N], d[O_N];
        for (int o = 0; o < n_out; o++) {
            const double *v = h + ((size_t)s * O_N + o) * S_N;
            e[o] = nx_rel(v[S_NREF], v[S_DREF]);
            d[o] = nx_rel(v[S_NBASE], v[S_DBASE]);
            f->out_err[o] = e[o];
            f->div_max_abs = nx_nanmax(f->div_max_abs, v[S_MAXABS]);
            f->nonfinite += (uint64_t)v[S_NONFIN];
        }
        f->err = nx_worst(e, n_out);
        f->div = f->has_base ? nx_worst(d, n_out) : 0.0;
        if (!f->has_base) f->div_max_abs = 0.0;
    }
    return FT_OK;
}

extern "C" int ft_cuda_nx_download(ft_nx *nx, int which, float *host, ft_err *err)
{
    if (!nx || !nx->have || which < 0 || which >= O_N)
        return ft_err_set(err, FT_EINVAL, "numerics cuda: bad download");
    if (nx_enter(nx, err)) return FT_ECUDA;
    const float *src = nx->out[which];
    int rc = cu_fail(
        cudaMemcpyAsync(host, src, (size_t)nx->cnt[which] * 4, cudaMemcpyDeviceToHost, nx->st), err,
        "cudaMemcpy D2H");
    if (!rc) rc = cu_fail(cudaStreamSynchronize(nx->st), err, "cudaStreamSynchronize");
    return rc;
}

extern "C" int ft_cuda_nx_reference(ft_nx *nx, int which, float *host, ft_err *err)
{
    if (!nx || !nx->have || nx->p.inputs_only || which < 0 || which >= O_N)
        return ft_err_set(err, FT_EINVAL, "numerics cuda: bad download");
    if (nx_enter(nx, err)) return FT_ECUDA;
    int rc = cu_fail(cudaMemcpyAsync(host, nx->ref[which], (size_t)nx->cnt[which] * 4,
                                     cudaMemcpyDeviceToHost, nx->st),
                     err, "cudaMemcpy D2H");
    if (!rc) rc = cu_fail(cudaStreamSynchronize(nx->st), err, "cudaStreamSynchronize");
    return rc;
}

extern "C" void ft_cuda_nx_profile(ft_nx *nx, int on, double ms[FT_NX_PHASES])
{
    if (!nx) return;
    nx_enter(nx, NULL);
    if (ms) {
        ft_fast_phase(&nx->fast, FT_PH_OTHER, nx->st);
        for (int i = 0; i < FT_NX_PHASES && i < FT_PH_COUNT; i++)
            ms[i] = nx->fast.ms[i];
    }
    if (on >= 0) {
        cudaStreamSynchronize(nx->st);
        nx->fast.profile = on;
        nx->fast.phase = -1;
        nx->fast.t_mark = 0;
        memset(nx->fast.ms, 0, sizeof nx->fast.ms);
    }
}

extern "C" int ft_cuda_mem_info(uint64_t *free_b, uint64_t *total_b, ft_err *err)
{
    size_t f = 0, t = 0;
    int rc = cu_fail(cudaMemGetInfo(&f, &t), err, "cudaMemGetInfo");
    if (free_b) *free_b = f;
    if (total_b) *total_b = t;
    return rc;
}

extern "C" int ft_cuda_nx_memory(ft_nx *nx, uint64_t *held, uint64_t *pool_peak, ft_err *err)
{
    int dev = 0;
    cudaMemPool_t pool;
    uint64_t hi = 0; // the attribute is a 64-bit count
    if (nx && nx_enter(nx, err)) return FT_ECUDA;
    int rc = cu_fail(cudaGetDevice(&dev), err, "cudaGetDevice");
    if (!rc)
        rc = cu_fail(cudaDeviceGetDefaultMemPool(&pool, dev), err, "cudaDeviceGetDefaultMemPool");
    if (!rc)
        rc = cu_fail(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &hi), err,
                     "cudaMemPoolGetAttribute");
    if (held) *held = nx ? nx->bytes + 16 * 2 + sizeof(double) * (FT_NX_MAX_SLOTS * 4 * 6) : 0;
    if (pool_peak) *pool_peak = (uint64_t)hi;
    return rc;
}
