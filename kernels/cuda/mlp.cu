// mlp.cu - the CUDA back end's host API: device helpers, the bf16 GEMM entry point, activation
// kernels (forward, backward with dprobs) and per-group bias-gradient reductions in both
// storages. The bf16 training step (mlp_bf16.cu, what --gpu-time times) and the float32-contract
// MLP of the numerics (mlp_f32.cu) reach them through the ft_cu_* entry points at the end of this
// file.
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

extern "C" int ft_cuda_set_device(int device, ft_err *err)
{
    const int n = ft_cuda_device_count();
    if (device < 0 || device >= n)
        return ft_err_set(err, FT_EINVAL, "CUDA device %d: this process sees %d device%s", device,
                          n, n == 1 ? "" : "s");
    return cu_fail(cudaSetDevice(device), err, "cudaSetDevice");
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

// ==== the bf16 GEMM ========================================================================

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
    return ft_cuda_wgmma_gemm(g, st, err);
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
// except where a float32 output is asked for unrounded (rnd false: the float32 contract's fused
// MXFP8 path).
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

// ---- entry points mlp_bf16.cu and mlp_f32.cu share ------------------------------------------

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

int ft_cu_colsum_bf16(const uint16_t *x, int64_t cols, const int64_t *offs, int G,
                      const float *scale, float *db, cudaStream_t st, ft_err *err)
{
    return group_colsum<uint16_t>(x, cols, offs, G, scale, db, st, err);
}

int ft_cu_dprobs_bias_bf16(const uint16_t *dy, int64_t n2, const uint16_t *b2, const int64_t *offs,
                           int G, int64_t t, float *dprobs, cudaStream_t st, ft_err *err)
{
    if (t <= 0) return FT_OK;
    dprobs_bias_kernel<uint16_t>
        <<<cu_blocks(t * 32, 256), 256, 0, st>>>(dy, n2, b2, offs, G, dprobs);
    return cu_launched(err, "dprobs_bias_kernel");
}

int ft_cu_check_act(const ft_act *a, int64_t n1, int64_t k2, ft_err *err)
{
    return check_act(a, n1, k2, err);
}
