// mlp.cu - the CUDA back end's host API: device helpers, GEMM dispatch, activation kernels
// (forward, backward with dprobs), per-group bias-gradient reductions, and the grouped MLP
// forward/backward in bf16 storage. The float32-contract MLP (emulation and the numerics fast
// path) is in mlp_f32.cu and reaches the activation and reduction kernels through the ft_cu_*
// entry points at the end of this file.
#include "ft_cuda_int.cuh"

#include <string.h>

// ==== device helpers ======================================================================

extern "C" int ft_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); // clear the sticky "no device" error
        return 0;
    }
    return n;
}

extern "C" int ft_cuda_malloc(void **p, size_t bytes, ft_err *err)
{
    *p = NULL;
    return cu_fail(cudaMalloc(p, bytes ? bytes : 16), err, "cudaMalloc");
}

extern "C" void ft_cuda_free(void *p)
{
    if (p) cudaFree(p);
}

extern "C" int ft_cuda_memset(void *p, int byte, size_t bytes, ft_err *err)
{
    return cu_fail(cudaMemset(p, byte, bytes), err, "cudaMemset");
}

extern "C" int ft_cuda_h2d(void *dst, const void *src, size_t bytes, ft_err *err)
{
    return cu_fail(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), err, "cudaMemcpy H2D");
}

extern "C" int ft_cuda_d2h(void *dst, const void *src, size_t bytes, ft_err *err)
{
    return cu_fail(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), err, "cudaMemcpy D2H");
}

extern "C" int ft_cuda_sync(ft_err *err)
{
    return cu_fail(cudaDeviceSynchronize(), err, "cudaDeviceSynchronize");
}

extern "C" int ft_cuda_device_info(char *name, size_t cap, int *n_sm, ft_err *err)
{
    int dev = 0;
    cudaDeviceProp prop;
    int rc = cu_fail(cudaGetDevice(&dev), err, "cudaGetDevice");
    if (!rc) rc = cu_fail(cudaGetDeviceProperties(&prop, dev), err, "cudaGetDeviceProperties");
    if (rc) return rc;
    if (name && cap) ft_strlcpy(name, prop.name, cap);
    if (n_sm) *n_sm = prop.multiProcessorCount;
    return FT_OK;
}

struct ft_cuda_timer {
    cudaEvent_t a, b;
};

extern "C" int ft_cuda_timer_new(ft_cuda_timer **t, ft_err *err)
{
    *t = (ft_cuda_timer *)ft_calloc(1, sizeof **t);
    if (!*t) return ft_err_set(err, FT_ENOMEM, "timer: out of memory");
    int rc = cu_fail(cudaEventCreate(&(*t)->a), err, "cudaEventCreate");
    if (!rc) rc = cu_fail(cudaEventCreate(&(*t)->b), err, "cudaEventCreate");
    if (rc) {
        ft_free(*t);
        *t = NULL;
    }
    return rc;
}

extern "C" void ft_cuda_timer_free(ft_cuda_timer *t)
{
    if (!t) return;
    cudaEventDestroy(t->a);
    cudaEventDestroy(t->b);
    ft_free(t);
}

extern "C" int ft_cuda_timer_start(ft_cuda_timer *t, void *stream, ft_err *err)
{
    return cu_fail(cudaEventRecord(t->a, (cudaStream_t)stream), err, "cudaEventRecord");
}

extern "C" int ft_cuda_timer_stop(ft_cuda_timer *t, void *stream, float *ms, ft_err *err)
{
    int rc = cu_fail(cudaEventRecord(t->b, (cudaStream_t)stream), err, "cudaEventRecord");
    if (!rc) rc = cu_fail(cudaEventSynchronize(t->b), err, "cudaEventSynchronize");
    if (!rc) rc = cu_fail(cudaEventElapsedTime(ms, t->a, t->b), err, "cudaEventElapsedTime");
    return rc;
}

namespace
{
__global__ void fill_random_kernel(uint16_t *p, int64_t n, float scale, uint64_t seed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t z = seed + (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull; // splitmix64
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        const float u = (float)(z >> 40) * 0x1p-23f - 1.0f; // [-1, 1)
        p[i] = f_to_bf16(u * scale);
    }
}
} // namespace

extern "C" int ft_cuda_bf16_fill_random(uint16_t *p, int64_t n, float scale, uint64_t seed,
                                        void *stream, ft_err *err)
{
    if (n <= 0) return FT_OK;
    fill_random_kernel<<<cu_blocks(n, 256 * 8), 256, 0, (cudaStream_t)stream>>>(p, n, scale, seed);
    return cu_launched(err, "fill_random_kernel");
}

// ==== GEMM dispatch =======================================================================

extern "C" int ft_cuda_bf16_gemm_run(const ft_cuda_bf16_gemm *g, void *stream, ft_err *err)
{
    cudaStream_t st = (cudaStream_t)stream;
    if (g->m < 0 || g->n < 0 || g->k < 0)
        return ft_err_set(err, FT_EINVAL, "cuda gemm: negative shape");
    if (g->act && g->kind != FT_GEMM_FPROP)
        return ft_err_set(err, FT_EINVAL, "cuda gemm: activation epilogue needs FPROP");
    if (g->act && g->z_nvfp4 && (g->z_mxfp8 || !g->z_amax))
        return ft_err_set(err, FT_EINVAL,
                          "cuda gemm: the NVFP4 epilogue needs z_amax and excludes z_mxfp8");
    if (g->m == 0 || g->n == 0 || g->k == 0) {
        if (g->kind == FT_GEMM_WGRAD && g->n && g->k)
            return ft_cuda_memset(g->c, 0, (size_t)g->n_groups * g->n * g->k * 2, err);
        if (g->kind == FT_GEMM_WGRAD || g->m == 0) return FT_OK;
    }
    ft_cuda_impl impl = g->impl;
    if (impl == FT_CUDA_IMPL_AUTO) {
        ft_err quiet;
        ft_err_clear(&quiet);
        impl = ft_cuda_wgmma_supported(g, &quiet) == FT_OK ? FT_CUDA_IMPL_WGMMA : FT_CUDA_IMPL_SIMT;
    }
    if (impl == FT_CUDA_IMPL_WGMMA) return ft_cuda_wgmma_gemm(g, st, err);
    if (g->act && (g->z_mxfp8 || g->z_nvfp4))
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "cuda gemm: the MXFP8/NVFP4 FC1 epilogues need the WGMMA path "
                          "(its shape limits: see ft_kernels_cuda.h)");
    if (!g->act) return ft_cuda_simt_gemm_bf16(g, st, err);
    // SIMT with an activation: plain FPROP into h, then the activation kernel.
    ft_cuda_bf16_gemm plain = *g;
    plain.act = NULL;
    int rc = ft_cuda_simt_gemm_bf16(&plain, st, err);
    if (rc) return rc;
    int64_t k2 = ft_act_is_glu(g->act->kind) ? g->n / 2 : g->n;
    return ft_cuda_bf16_act_forward(g->act, g->m, k2, g->c, g->probs, g->z, st, err);
}

extern "C" int ft_cuda_gemm(const ft_gemm *g, void *stream, ft_err *err)
{
    if (g->m < 0 || g->n < 0 || g->k < 0)
        return ft_err_set(err, FT_EINVAL, "cuda gemm: negative shape");
    if (g->m == 0 || g->n == 0 || g->k == 0) {
        if (g->kind == FT_GEMM_WGRAD && !g->accumulate && g->n && g->k)
            return ft_cuda_memset(g->c, 0, (size_t)g->n_groups * g->n * g->k * 4, err);
        return FT_OK;
    }
    return ft_cuda_simt_gemm_f32(g, (cudaStream_t)stream, err);
}

// ==== activations =========================================================================

namespace
{

__device__ __forceinline__ float ldv(const float *p, int64_t i)
{
    return p[i];
}
__device__ __forceinline__ float ldv(const uint16_t *p, int64_t i)
{
    return bf16_to_f(p[i]);
}
// Store, rounding to bf16 values in both storages (the contract keeps bf16 values in float),
// except where a float32 output is asked for unrounded (rnd false: the fused MXFP8 emulation).
__device__ __forceinline__ void stv(float *p, int64_t i, float v, bool rnd = true)
{
    p[i] = rnd ? __bfloat162float(__float2bfloat16_rn(v)) : v;
}
__device__ __forceinline__ void stv(uint16_t *p, int64_t i, float v, bool rnd = true)
{
    (void)rnd;
    p[i] = f_to_bf16(v);
}

template <typename T>
__global__ void act_fwd_kernel(act_params a, int64_t rows, int64_t k2, const T *h,
                               const float *probs, T *z, bool rnd)
{
    const int glu = a.kind != FT_ACT_SRELU;
    const int64_t n1 = glu ? 2 * k2 : k2;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * k2;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / k2, j = i % k2, cu = j, cv = j;
        if (glu) glu_cols(a.interleave, k2, j, &cu, &cv);
        float u = ldv(h, r * n1 + cu), v = ldv(h, r * n1 + cv);
        float p = probs ? probs[r] : 1.0f;
        stv(z, i, p * act_f(a, u, v), rnd);
    }
}

// One warp per row: dh = (dz p) f'(h), dprobs[r] = sum_j dz_j f_j(h) (unscaled f).
template <typename T>
__global__ void act_bwd_kernel(act_params a, int64_t rows, int64_t k2, const T *h,
                               const float *probs, const T *dz, T *dh, float *dprobs, bool rnd)
{
    const int glu = a.kind != FT_ACT_SRELU;
    const int64_t n1 = glu ? 2 * k2 : k2;
    const int lane = threadIdx.x % 32;
    for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; r < rows;
         r += (int64_t)gridDim.x * blockDim.x / 32) {
        const float p = probs ? probs[r] : 1.0f;
        float dp = 0.0f;
        for (int64_t j = lane; j < k2; j += 32) {
            int64_t cu = j, cv = j;
            if (glu) glu_cols(a.interleave, k2, j, &cu, &cv);
            float u = ldv(h, r * n1 + cu), v = ldv(h, r * n1 + cv);
            float g = ldv(dz, r * k2 + j), du, dv;
            act_df(a, u, v, &du, &dv);
            dp += g * act_f(a, u, v);
            stv(dh, r * n1 + cu, g * p * du, rnd);
            if (glu) stv(dh, r * n1 + cv, g * p * dv, rnd);
        }
        for (int d = 16; d; d >>= 1)
            dp += __shfl_xor_sync(0xffffffffu, dp, d);
        if (dprobs && lane == 0) dprobs[r] = dp;
    }
}

// bf16 storage, k2 % 8 == 0: the same per row, each lane 8 consecutive columns with 16-byte
// loads and stores (the act and gate halves of 8 outputs are contiguous in both GLU layouts).
__device__ __forceinline__ void unpack8(uint4 v, float *f)
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
}

__device__ __forceinline__ uint4 pack8(const float *f)
{
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; i++)
        w[i] = (uint32_t)f_to_bf16(f[2 * i]) | ((uint32_t)f_to_bf16(f[2 * i + 1]) << 16);
    return make_uint4(w[0], w[1], w[2], w[3]);
}

__global__ void act_bwd_bf16x8_kernel(act_params a, int64_t rows, int64_t k2, const uint16_t *h,
                                      const float *probs, const uint16_t *dz, uint16_t *dh,
                                      float *dprobs)
{
    const int glu = a.kind != FT_ACT_SRELU;
    const int64_t n1 = glu ? 2 * k2 : k2;
    const int lane = threadIdx.x % 32;
    for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; r < rows;
         r += (int64_t)gridDim.x * blockDim.x / 32) {
        const float p = probs ? probs[r] : 1.0f;
        float dp = 0.0f;
        for (int64_t j = 8 * lane; j < k2; j += 256) {
            int64_t cu = j, cv = j;
            if (glu) glu_cols(a.interleave, k2, j, &cu, &cv);
            float u[8], v[8], g[8], du8[8], dv8[8];
            unpack8(*reinterpret_cast<const uint4 *>(h + r * n1 + cu), u);
            unpack8(*reinterpret_cast<const uint4 *>(h + r * n1 + cv), v);
            unpack8(*reinterpret_cast<const uint4 *>(dz + r * k2 + j), g);
#pragma unroll
            for (int e = 0; e < 8; e++) {
                float du, dv;
                act_df(a, u[e], v[e], &du, &dv);
                dp += g[e] * act_f(a, u[e], v[e]);
                du8[e] = g[e] * p * du;
                dv8[e] = g[e] * p * dv;
            }
            *reinterpret_cast<uint4 *>(dh + r * n1 + cu) = pack8(du8);
            if (glu) *reinterpret_cast<uint4 *>(dh + r * n1 + cv) = pack8(dv8);
        }
        for (int d = 16; d; d >>= 1)
            dp += __shfl_xor_sync(0xffffffffu, dp, d);
        if (dprobs && lane == 0) dprobs[r] = dp;
    }
}

// Row offsets from splits (clamped to m), one thread: offs[0..G].
__global__ void offsets_kernel(const int64_t *splits, int G, int64_t m, int64_t *offs)
{
    if (blockIdx.x || threadIdx.x) return;
    int64_t o = 0;
    for (int g = 0; g < G; g++) {
        offs[g] = o < m ? o : m;
        int64_t s = splits[g] > 0 ? splits[g] : 0;
        o += s;
    }
    offs[G] = o < m ? o : m;
}

// db[g][c] = sum over rows of group g of x[r][c] (* scale[r]); grid (col blocks, G).
template <typename T>
__global__ void group_colsum_kernel(const T *x, int64_t cols, const int64_t *offs,
                                    const float *scale, float *db)
{
    const int g = blockIdx.y;
    const int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float s = 0.0f;
    for (int64_t r = offs[g]; r < offs[g + 1]; r++)
        s += ldv(x, r * cols + c) * (scale ? scale[r] : 1.0f);
    db[(int64_t)g * cols + c] = s;
}

// dprobs[r] += dy[r] . b2[g(r)] (scale_bias); one warp per row.
template <typename T>
__global__ void dprobs_bias_kernel(const T *dy, int64_t n2, const T *b2, const int64_t *offs, int G,
                                   float *dprobs)
{
    const int lane = threadIdx.x % 32;
    const int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    if (r >= offs[G]) return;
    const int lo = last_le(offs, G, r);
    float s = 0.0f;
    for (int64_t j = lane; j < n2; j += 32)
        s += ldv(dy, r * n2 + j) * ldv(b2, (int64_t)lo * n2 + j);
    for (int d = 16; d; d >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, d);
    if (lane == 0) dprobs[r] += s;
}

int check_act(const ft_act *a, int64_t n1, int64_t k2, ft_err *err)
{
    if (!a || a->kind < 0 || a->kind >= FT_ACT_COUNT)
        return ft_err_set(err, FT_EINVAL, "cuda act: unknown activation");
    if (ft_act_is_glu(a->kind)) {
        if (n1 >= 0 && n1 != 2 * k2)
            return ft_err_set(err, FT_EINVAL, "cuda act: GLU needs n1 = 2*k2 (n1=%lld k2=%lld)",
                              (long long)n1, (long long)k2);
        if (a->interleave < 0 || (a->interleave > 0 && k2 % a->interleave))
            return ft_err_set(err, FT_EINVAL, "cuda act: k2=%lld not a multiple of interleave %d",
                              (long long)k2, a->interleave);
    } else if (n1 >= 0 && n1 != k2) {
        return ft_err_set(err, FT_EINVAL, "cuda act: unary activation needs n1 = k2");
    }
    return FT_OK;
}

template <typename T>
int act_forward(const ft_act *a, int64_t rows, int64_t k2, const T *h, const float *probs, T *z,
                cudaStream_t st, ft_err *err, bool rnd = true)
{
    int rc = check_act(a, -1, k2, err);
    if (rc || rows <= 0 || k2 <= 0) return rc;
    act_fwd_kernel<T>
        <<<cu_blocks(rows * k2, 256), 256, 0, st>>>(act_from(a), rows, k2, h, probs, z, rnd);
    return cu_launched(err, "act_fwd_kernel");
}

template <typename T>
int act_backward(const ft_act *a, int64_t rows, int64_t k2, const T *h, const float *probs,
                 const T *dz, T *dh, float *dprobs, cudaStream_t st, ft_err *err, bool rnd = true)
{
    int rc = check_act(a, -1, k2, err);
    if (rc || rows <= 0 || k2 <= 0) return rc;
    const uintptr_t ptrs = (uintptr_t)h | (uintptr_t)dz | (uintptr_t)dh;
    if (sizeof(T) == 2 && k2 % 8 == 0 && (a->interleave % 8) == 0 && (ptrs & 15) == 0) {
        act_bwd_bf16x8_kernel<<<cu_blocks(rows * 32, 256), 256, 0, st>>>(
            act_from(a), rows, k2, (const uint16_t *)h, probs, (const uint16_t *)dz, (uint16_t *)dh,
            dprobs);
        return cu_launched(err, "act_bwd_bf16x8_kernel");
    }
    act_bwd_kernel<T><<<cu_blocks(rows * 32, 256), 256, 0, st>>>(act_from(a), rows, k2, h, probs,
                                                                 dz, dh, dprobs, rnd);
    return cu_launched(err, "act_bwd_kernel");
}

template <typename T>
int group_colsum(const T *x, int64_t cols, const int64_t *offs, int G, const float *scale,
                 float *db, cudaStream_t st, ft_err *err)
{
    if (cols <= 0) return FT_OK;
    dim3 grid((unsigned)((cols + 255) / 256), (unsigned)G);
    group_colsum_kernel<T><<<grid, 256, 0, st>>>(x, cols, offs, scale, db);
    return cu_launched(err, "group_colsum_kernel");
}

} // namespace

int ft_cuda_bf16_act_forward(const ft_act *a, int64_t rows, int64_t k2, const uint16_t *h,
                             const float *probs, uint16_t *z, cudaStream_t st, ft_err *err)
{
    return act_forward<uint16_t>(a, rows, k2, h, probs, z, st, err);
}

extern "C" int ft_cuda_act_forward(const ft_act *a, int64_t rows, int64_t k2, const float *h,
                                   const float *probs, float *z, void *stream, ft_err *err)
{
    return act_forward<float>(a, rows, k2, h, probs, z, (cudaStream_t)stream, err);
}

extern "C" int ft_cuda_act_backward(const ft_act *a, int64_t rows, int64_t k2, const float *h,
                                    const float *probs, const float *dz, float *dh, float *dprobs,
                                    void *stream, ft_err *err)
{
    return act_backward<float>(a, rows, k2, h, probs, dz, dh, dprobs, (cudaStream_t)stream, err);
}

extern "C" int ft_cuda_bf16_act_backward(const ft_act *a, int64_t rows, int64_t k2,
                                         const uint16_t *h, const float *probs, const uint16_t *dz,
                                         uint16_t *dh, float *dprobs, void *stream, ft_err *err)
{
    return act_backward<uint16_t>(a, rows, k2, h, probs, dz, dh, dprobs, (cudaStream_t)stream, err);
}

// ==== grouped MLP ==========================================================================

namespace
{

// Shared by both storages: shape checks against ft_mlp's rules.
int check_mlp(uint32_t G, int64_t t, int64_t k1, int64_t n1, int64_t k2, int64_t n2,
              const ft_act *act, int scale_bias, const float *probs, ft_err *err)
{
    if (G < 1 || G > FT_CUDA_MAX_GROUPS)
        return ft_err_set(err, FT_EINVAL, "cuda mlp: n_groups %u outside 1..%d", G,
                          FT_CUDA_MAX_GROUPS);
    if (t < 0 || k1 <= 0 || n1 <= 0 || k2 <= 0 || n2 <= 0)
        return ft_err_set(err, FT_EINVAL,
                          "cuda mlp: bad shape t=%lld k1=%lld n1=%lld k2=%lld "
                          "n2=%lld",
                          (long long)t, (long long)k1, (long long)n1, (long long)k2, (long long)n2);
    if (scale_bias && !probs) return ft_err_set(err, FT_EINVAL, "cuda mlp: scale_bias needs probs");
    return check_act(act, n1, k2, err);
}

} // namespace

extern "C" int ft_cuda_bf16_mlp_forward(const ft_cuda_bf16_mlp *m, const ft_cuda_bf16_mlp_out *out,
                                        void *stream, ft_err *err)
{
    int rc = check_mlp(m->n_groups, m->t, m->k1, m->n1, m->k2, m->n2, &m->act, m->scale_bias,
                       m->probs, err);
    if (rc) return rc;
    ft_cuda_bf16_gemm g1;
    memset(&g1, 0, sizeof g1);
    g1.kind = FT_GEMM_FPROP;
    g1.n_groups = m->n_groups;
    g1.splits = m->splits;
    g1.m = m->t;
    g1.n = m->n1;
    g1.k = m->k1;
    g1.a = m->x;
    g1.b = m->w1;
    g1.c = out->h;
    g1.bias = m->b1;
    g1.act = &m->act;
    g1.probs = m->probs;
    g1.z = out->z;
    g1.z_mxfp8 = m->z_mxfp8;
    g1.z_fp8 = m->z_fp8;
    g1.zc = out->zc;
    g1.impl = m->impl;
    rc = ft_cuda_bf16_gemm_run(&g1, stream, err);
    if (rc) return rc;
    ft_cuda_bf16_gemm g2 = g1;
    g2.n = m->n2;
    g2.k = m->k2;
    g2.a = out->z;
    g2.b = m->w2;
    g2.c = out->y;
    g2.bias = m->b2;
    g2.bias_scale = m->scale_bias ? m->probs : NULL;
    g2.act = NULL;
    g2.probs = NULL;
    g2.z = NULL;
    g2.z_mxfp8 = 0;
    g2.zc = NULL;
    return ft_cuda_bf16_gemm_run(&g2, stream, err);
}

extern "C" int ft_cuda_bf16_mlp_backward(const ft_cuda_bf16_mlp *m, const ft_cuda_bf16_mlp_out *fwd,
                                         const uint16_t *dy, const ft_cuda_bf16_mlp_grads *gr,
                                         void *stream, ft_err *err)
{
    cudaStream_t st = (cudaStream_t)stream;
    int rc = check_mlp(m->n_groups, m->t, m->k1, m->n1, m->k2, m->n2, &m->act, m->scale_bias,
                       m->probs, err);
    if (rc) return rc;
    int64_t *offs = NULL;
    ft_cuda_bf16_gemm g;
    memset(&g, 0, sizeof g);
    g.n_groups = m->n_groups;
    g.splits = m->splits;
    g.m = m->t;
    g.impl = m->impl;
    // dz = dy W2
    g.kind = FT_GEMM_DGRAD;
    g.n = m->n2;
    g.k = m->k2;
    g.a = dy;
    g.b = m->w2;
    g.c = gr->dz;
    rc = ft_cuda_bf16_gemm_run(&g, stream, err);
    if (rc) return rc;
    // dh, dprobs
    rc = act_backward<uint16_t>(&m->act, m->t, m->k2, fwd->h, m->probs, gr->dz, gr->dh,
                                m->probs ? gr->dprobs : NULL, st, err);
    if (rc) return rc;
    // dW2 = dy^T z, dx = dh W1, dW1 = dh^T x
    g.kind = FT_GEMM_WGRAD;
    g.a = dy;
    g.b = (m->z_mxfp8 && fwd->zc) ? fwd->zc : fwd->z; // wgrad takes z's columnwise usage
    g.c = gr->dw2;
    rc = ft_cuda_bf16_gemm_run(&g, stream, err);
    if (rc) return rc;
    g.kind = FT_GEMM_DGRAD;
    g.n = m->n1;
    g.k = m->k1;
    g.a = gr->dh;
    g.b = m->w1;
    g.c = gr->dx;
    rc = ft_cuda_bf16_gemm_run(&g, stream, err);
    if (rc) return rc;
    g.kind = FT_GEMM_WGRAD;
    g.b = m->x;
    g.c = gr->dw1;
    rc = ft_cuda_bf16_gemm_run(&g, stream, err);
    if (rc) return rc;
    // bias grads and the scale_bias part of dprobs need row offsets
    if (!gr->db1 && !gr->db2 && !(m->scale_bias && m->b2 && gr->dprobs)) return FT_OK;
    rc = cu_fail(cudaMallocAsync((void **)&offs, (m->n_groups + 1) * sizeof(int64_t), st), err,
                 "cudaMallocAsync");
    if (rc) return rc;
    offsets_kernel<<<1, 1, 0, st>>>(m->splits, (int)m->n_groups, m->t, offs);
    rc = cu_launched(err, "offsets_kernel");
    if (!rc && gr->db1)
        rc = group_colsum<uint16_t>(gr->dh, m->n1, offs, (int)m->n_groups, NULL, gr->db1, st, err);
    if (!rc && gr->db2)
        rc = group_colsum<uint16_t>(dy, m->n2, offs, (int)m->n_groups,
                                    m->scale_bias ? m->probs : NULL, gr->db2, st, err);
    if (!rc && m->scale_bias && m->b2 && gr->dprobs && m->t > 0) {
        dprobs_bias_kernel<uint16_t><<<cu_blocks(m->t * 32, 256), 256, 0, st>>>(
            dy, m->n2, m->b2, offs, (int)m->n_groups, gr->dprobs);
        rc = cu_launched(err, "dprobs_bias_kernel");
    }
    int rc2 = cu_fail(cudaFreeAsync(offs, st), err, "cudaFreeAsync");
    return rc ? rc : rc2;
}

// ---- entry points the float32-contract MLP (mlp_f32.cu) shares --------------------------

int ft_cu_act_fwd_f32(const ft_act *a, int64_t rows, int64_t k2, const float *h, const float *probs,
                      float *z, bool rnd, cudaStream_t st, ft_err *err)
{
    return act_forward<float>(a, rows, k2, h, probs, z, st, err, rnd);
}

int ft_cu_act_bwd_f32(const ft_act *a, int64_t rows, int64_t k2, const float *h, const float *probs,
                      const float *dz, float *dh, float *dprobs, bool rnd, cudaStream_t st,
                      ft_err *err)
{
    return act_backward<float>(a, rows, k2, h, probs, dz, dh, dprobs, st, err, rnd);
}

int ft_cu_offsets(const int64_t *splits, int G, int64_t m, int64_t *offs, cudaStream_t st,
                  ft_err *err)
{
    offsets_kernel<<<1, 1, 0, st>>>(splits, G, m, offs);
    return cu_launched(err, "offsets_kernel");
}

int ft_cu_colsum_f32(const float *x, int64_t cols, const int64_t *offs, int G, const float *scale,
                     float *db, cudaStream_t st, ft_err *err)
{
    return group_colsum<float>(x, cols, offs, G, scale, db, st, err);
}

int ft_cu_dprobs_bias_f32(const float *dy, int64_t n2, const float *b2, const int64_t *offs, int G,
                          int64_t t, float *dprobs, cudaStream_t st, ft_err *err)
{
    if (t <= 0) return FT_OK;
    dprobs_bias_kernel<float><<<cu_blocks(t * 32, 256), 256, 0, st>>>(dy, n2, b2, offs, G, dprobs);
    return cu_launched(err, "dprobs_bias_kernel");
}
