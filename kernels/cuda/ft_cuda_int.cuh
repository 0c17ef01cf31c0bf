// ft_cuda_int.cuh - private helpers of the CUDA back end: error reporting, bf16 and activation
// math shared by the kernels. Not part of the public contract.
#ifndef FT_CUDA_INT_CUH
#define FT_CUDA_INT_CUH

#include "ft_kernels_cuda.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// Record a failed CUDA call in err; returns FT_ECUDA (or FT_OK when e == cudaSuccess).
static inline int cu_fail(cudaError_t e, ft_err *err, const char *what)
{
    if (e == cudaSuccess) return FT_OK;
    return ft_err_set(err, FT_ECUDA, "%s: %s (%s)", what, cudaGetErrorString(e),
                      cudaGetErrorName(e));
}

// After a launch: picks up configuration errors (bad grid, too much shared memory).
static inline int cu_launched(ft_err *err, const char *kernel)
{
    return cu_fail(cudaGetLastError(), err, kernel);
}

static inline unsigned cu_blocks(int64_t n, int per)
{
    int64_t b = (n + per - 1) / per;
    if (b < 1) b = 1;
    if (b > 1048576) b = 1048576; // grid-stride loops cover the rest
    return (unsigned)b;
}

// ---- bf16 ---------------------------------------------------------------------------------

__device__ __forceinline__ float bf16_to_f(uint16_t b)
{
    return __uint_as_float((uint32_t)b << 16);
}

__device__ __forceinline__ uint16_t f_to_bf16(float f)
{
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

// ---- activations (docs/fuser-model.md, "Activations"; fp32 math) -------------------------

struct act_params {
    int kind;       // ft_act_kind
    int interleave; // 0 or 32
    float limit, alpha, offset;
};

__device__ __forceinline__ float sigmoidf_(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

// f(u, v): GLU value (unary SReLU ignores v).
__device__ __forceinline__ float act_f(const act_params &a, float u, float v)
{
    if (a.kind == FT_ACT_SWIGLU) return u * sigmoidf_(u) * v;
    if (a.kind == FT_ACT_CLAMPED_QGEGLU) {
        float uc = fminf(u, a.limit);
        float vc = fminf(fmaxf(v, -a.limit), a.limit);
        return uc * sigmoidf_(a.alpha * uc) * (vc + a.offset);
    }
    float r = fmaxf(u, 0.0f);
    return r * r;
}

// Derivatives of f at (u, v): *du, *dv (dv = 0 for unary).
__device__ __forceinline__ void act_df(const act_params &a, float u, float v, float *du, float *dv)
{
    if (a.kind == FT_ACT_SWIGLU) {
        float s = sigmoidf_(u);
        *du = (s + u * s * (1.0f - s)) * v;
        *dv = u * s;
    } else if (a.kind == FT_ACT_CLAMPED_QGEGLU) {
        float uc = fminf(u, a.limit);
        float vc = fminf(fmaxf(v, -a.limit), a.limit);
        float s = sigmoidf_(a.alpha * uc);
        *du = u <= a.limit ? (s + a.alpha * uc * s * (1.0f - s)) * (vc + a.offset) : 0.0f;
        *dv = fabsf(v) <= a.limit ? uc * s : 0.0f;
    } else {
        *du = 2.0f * fmaxf(u, 0.0f);
        *dv = 0.0f;
    }
}

static inline act_params act_from(const ft_act *a)
{
    act_params p;
    p.kind = a ? (int)a->kind : -1;
    p.interleave = a ? a->interleave : 0;
    p.limit = a ? a->limit : 0.0f;
    p.alpha = a ? a->alpha : 0.0f;
    p.offset = a ? a->offset : 0.0f;
    return p;
}

// Column of u (act half) and v (gate half) in h for output column j of z (GLU).
__host__ __device__ __forceinline__ void glu_cols(int interleave, int64_t k2, int64_t j,
                                                  int64_t *cu, int64_t *cv)
{
    if (interleave > 0) {
        int64_t t = j / interleave, l = j % interleave;
        *cu = t * 2 * interleave + l;
        *cv = *cu + interleave;
    } else {
        *cu = j;
        *cv = k2 + j;
    }
}

// Largest i in [0, n) with a[i] <= v, for a non-decreasing a[0..n) with a[0] <= v (row offsets,
// tile prefixes: the group a row or a tile belongs to; empty groups repeat a value and lose).
__device__ __forceinline__ int last_le(const int64_t *a, int n, int64_t v)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (a[mid] <= v)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// Internal entry points shared between the .cu files.
int ft_cuda_wgmma_gemm(const ft_cuda_bf16_gemm *g, cudaStream_t st, ft_err *err);
int ft_cuda_wgmma_supported(const ft_cuda_bf16_gemm *g, ft_err *err);
int ft_cuda_bf16_act_forward(const ft_act *a, int64_t rows, int64_t k2, const uint16_t *h,
                             const float *probs, uint16_t *z, cudaStream_t st, ft_err *err);

// mlp.cu's activation and reduction kernels for the bf16 step (mlp_bf16.cu) and the
// float32-contract MLP (mlp_f32.cu); rnd: round outputs to bf16 values.
int ft_cu_check_act(const ft_act *a, int64_t n1, int64_t k2, ft_err *err); // n1 < 0: unchecked
int ft_cu_colsum_bf16(const uint16_t *x, int64_t cols, const int64_t *offs, int G,
                      const float *scale, float *db, cudaStream_t st, ft_err *err);
int ft_cu_dprobs_bias_bf16(const uint16_t *dy, int64_t n2, const uint16_t *b2, const int64_t *offs,
                           int G, int64_t t, float *dprobs, cudaStream_t st, ft_err *err);
int ft_cu_act_fwd_f32(const ft_act *a, int64_t rows, int64_t k2, const float *h, const float *probs,
                      float *z, bool rnd, cudaStream_t st, ft_err *err);
int ft_cu_act_bwd_f32(const ft_act *a, int64_t rows, int64_t k2, const float *h, const float *probs,
                      const float *dz, float *dh, float *dprobs, bool rnd, cudaStream_t st,
                      ft_err *err);
int ft_cu_offsets(const int64_t *splits, int G, int64_t m, int64_t *offs, cudaStream_t st,
                  ft_err *err); // offs[0..G], clamped to m
int ft_cu_colsum_f32(const float *x, int64_t cols, const int64_t *offs, int G, const float *scale,
                     float *db, cudaStream_t st, ft_err *err);
int ft_cu_dprobs_bias_f32(const float *dy, int64_t n2, const float *b2, const int64_t *offs, int G,
                          int64_t t, float *dprobs, cudaStream_t st, ft_err *err);

// ft_cuda_quantize that also writes gscale[G] (device; NULL: not wanted), the per-group factor
// every dequantized value of the group is an exact multiple of: a value v of group g is
// code * block_scale * gscale[g] up to float32 rounding, and bf16(v / gscale[g]) is exactly
// code * block_scale (at most 6 significant bits). NVFP4 amax / (448 * 6), FP8 current 1 / scale,
// FP8 delayed 1 / q->scale, 1 for MXFP8, FP8 block and NONE (their values are exact in bf16
// already: MXFP8 and power-of-two FP8 block scales).
int ft_cuda_quantize_gs(const ft_qcfg *q, const float *x, int64_t rows, int64_t cols,
                        const int64_t *splits, uint32_t n_groups, float *out, float *gscale,
                        cudaStream_t st, ft_err *err);

// ---- the numerics' float32-contract MLP on the device (mlp_f32.cu, nx.cu) ------------------

enum { FT_PH_GEN = 0, FT_PH_REF, FT_PH_QUANT, FT_PH_GEMM, FT_PH_CMP, FT_PH_OTHER, FT_PH_COUNT };

// ft_cu_mlp_f32_forward/backward feed the GEMMs bf16 operands (the fake-quantized values divided
// by their group's factor, exact) on cuBLAS tensor cores with fp32 accumulation and output, alpha
// = the two operands' factors; ft_fast holds the cuBLAS handle, the profile and the weight cache.
struct ft_fast_w { // a cached bf16 weight operand (one tensor and usage of every expert)
    uint64_t key, tick;
    uint16_t *b;
    float *gs; // [G]
    size_t bytes;
};

struct ft_fast {
    void *blas;        // cublasHandle_t
    const float *zero; // device 0.0f (cuBLAS pointer mode device)
    int profile;       // 1: synchronise at every phase change and add wall time to ms[]
    int phase;
    uint64_t t_mark;
    double ms[FT_PH_COUNT];
    // Weights are the same across the calls of a fuser, so their bf16 operands are kept (LRU,
    // at most wcap bytes); wgen changes whenever the weight arrays are rewritten.
    uint64_t wgen, tick;
    ft_fast_w w[16];
    int n_w;
    size_t wbytes, wcap;
};
void ft_fast_phase(ft_fast *f, int phase, cudaStream_t st);
void ft_fast_forget(ft_fast *f, cudaStream_t st); // drop the cached weights
// The bf16 copy of weights w[G][n][k] (float32 bf16 values, tensor FT_MLP_W1 or W2) from the
// weight cache, made there if absent (cache 1): the entry the unquantized runs' rowwise weight
// operand uses. Where the cache has no room (or cache is 0: a caller that needs two entries at
// once which the cache cannot hold together, since making one may evict the other), *own
// receives a pool buffer holding it (free it with cudaFreeAsync on st), else NULL.
int ft_fast_bf16_weights(ft_fast *f, const float *w, int tensor, int64_t n, int64_t k, uint32_t G,
                         int cache, cudaStream_t st, const uint16_t **out, uint16_t **own,
                         ft_err *err);

// The float32-contract MLP: m holds device pointers; hsplits the same splits on the host. FP8
// block scales that are not powers of two are refused (FT_EUNSUPPORTED: not exact in bf16).
int ft_cu_mlp_f32_forward(const ft_mlp *m, const int64_t *hsplits, ft_fast *fast, ft_mlp_fwd *out,
                          cudaStream_t st, ft_err *err);
int ft_cu_mlp_f32_backward(const ft_mlp *m, const int64_t *hsplits, ft_fast *fast,
                           const ft_mlp_fwd *fwd, const float *dy, ft_mlp_bwd *out, cudaStream_t st,
                           ft_err *err);

#endif
