// gemm_simt.cu - plain grouped GEMM on CUDA cores (fp32 FMA, 64x64 tiles, 4x4 outputs per
// thread), for float32 or bf16 storage. It is the float32 contract's GEMM (the emulated
// quantized values are not bf16, so tensor cores cannot take them exactly) and the fallback of
// the bf16 path where the wgmma kernel's limits do not hold. Same device-side tile scheduler.
#include "sched.cuh"

namespace
{

constexpr int TM = 64, TN = 64, TK = 16, THREADS = 256;

__device__ __forceinline__ float ld(const float *p, int64_t i)
{
    return p[i];
}
__device__ __forceinline__ float ld(const uint16_t *p, int64_t i)
{
    return bf16_to_f(p[i]);
}
__device__ __forceinline__ void st(float *p, int64_t i, float v, int acc)
{
    p[i] = acc ? p[i] + v : v;
}
__device__ __forceinline__ void st(uint16_t *p, int64_t i, float v, int acc)
{
    p[i] = f_to_bf16(acc ? bf16_to_f(p[i]) + v : v);
}

template <typename T> struct simt_params {
    int kind, G, accumulate;
    int64_t m, n, k, out_cols, contract, n_tiles;
    const int64_t *splits;
    const T *a, *b, *bias;
    T *c;
    const float *bias_scale;
};

template <typename T>
__global__ void __launch_bounds__(THREADS) simt_gemm_kernel(const simt_params<T> p)
{
    __shared__ int64_t off[FT_CUDA_MAX_GROUPS + 1];
    __shared__ int64_t tiles[FT_CUDA_MAX_GROUPS + 1];
    __shared__ float As[TK][TM + 4];
    __shared__ float Bs[TK][TN + 4];
    sched_shape sh;
    sh.wgrad = p.kind == FT_GEMM_WGRAD;
    sh.bm = TM;
    sh.n_tiles = p.n_tiles;
    sh.m_fixed = p.n;
    sched_build(p.splits, p.G, p.m, sh, off, tiles);
    const int64_t total = tiles[p.G];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;

    for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
        const int g = sched_group(tiles, p.G, t);
        const int64_t local = t - tiles[g];
        const int64_t m0 = (local / p.n_tiles) * TM, n0 = (local % p.n_tiles) * TN;
        const int64_t row0 = off[g], rows = off[g + 1] - off[g];
        const int64_t mlim = p.kind == FT_GEMM_WGRAD ? p.n : rows;
        const int64_t klen = p.kind == FT_GEMM_WGRAD ? rows : p.contract;
        float acc[4][4] = {};
        for (int64_t k0 = 0; k0 < klen; k0 += TK) {
            for (int i = threadIdx.x; i < TK * TM; i += THREADS) {
                int kk, r;
                float va = 0.0f, vb = 0.0f;
                if (p.kind == FT_GEMM_WGRAD) {
                    kk = i / TM; // token-major reads are coalesced along m / n
                    r = i % TM;
                } else {
                    r = i / TK;
                    kk = i % TK;
                }
                const int64_t kg = k0 + kk;
                if (kg < klen) {
                    if (p.kind == FT_GEMM_FPROP) {
                        if (m0 + r < mlim) va = ld(p.a, (row0 + m0 + r) * p.k + kg);
                        if (n0 + r < p.n) vb = ld(p.b, ((int64_t)g * p.n + n0 + r) * p.k + kg);
                    } else if (p.kind == FT_GEMM_DGRAD) {
                        if (m0 + r < mlim) va = ld(p.a, (row0 + m0 + r) * p.n + kg);
                        if (n0 + r < p.k) vb = ld(p.b, ((int64_t)g * p.n + kg) * p.k + n0 + r);
                    } else {
                        if (m0 + r < p.n) va = ld(p.a, (row0 + kg) * p.n + m0 + r);
                        if (n0 + r < p.k) vb = ld(p.b, (row0 + kg) * p.k + n0 + r);
                    }
                }
                As[kk][r] = va;
                Bs[kk][r] = vb;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < TK; kk++) {
                float av[4], bv[4];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    av[i] = As[kk][ty * 4 + i];
                    bv[i] = Bs[kk][tx * 4 + i];
                }
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
            }
            __syncthreads();
        }
        for (int i = 0; i < 4; i++) {
            const int64_t r = m0 + ty * 4 + i;
            if (r >= mlim) continue;
            const int64_t grow = p.kind == FT_GEMM_WGRAD ? (int64_t)g * p.n + r : row0 + r;
            for (int j = 0; j < 4; j++) {
                const int64_t col = n0 + tx * 4 + j;
                if (col >= p.out_cols) continue;
                float v = acc[i][j];
                if (p.kind == FT_GEMM_FPROP && p.bias)
                    v += ld(p.bias, (int64_t)g * p.n + col) *
                         (p.bias_scale ? p.bias_scale[grow] : 1.0f);
                st(p.c, grow * p.out_cols + col, v, p.accumulate);
            }
        }
    }
}

} // namespace

template <typename T>
static int simt_gemm(const ft_gemm_kind kind, uint32_t G, const int64_t *splits, int64_t m,
                     int64_t n, int64_t k, const T *a, const T *b, T *c, const T *bias,
                     const float *bias_scale, int accumulate, cudaStream_t st, ft_err *err)
{
    if (G < 1 || G > FT_CUDA_MAX_GROUPS)
        return ft_err_set(err, FT_EUNSUPPORTED, "cuda gemm: n_groups %u outside 1..%d", G,
                          FT_CUDA_MAX_GROUPS);
    simt_params<T> p;
    p.kind = (int)kind;
    p.G = (int)G;
    p.accumulate = accumulate;
    p.m = m;
    p.n = n;
    p.k = k;
    p.out_cols = kind == FT_GEMM_FPROP ? n : k;
    p.contract = kind == FT_GEMM_FPROP ? k : n;
    p.n_tiles = (p.out_cols + TN - 1) / TN;
    p.splits = splits;
    p.a = a;
    p.b = b;
    p.c = c;
    p.bias = bias;
    p.bias_scale = bias_scale;
    int dev = 0, n_sm = 0;
    int rc = cu_fail(cudaGetDevice(&dev), err, "cudaGetDevice");
    if (!rc)
        rc = cu_fail(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev), err,
                     "cudaDeviceGetAttribute");
    if (rc) return rc;
    simt_gemm_kernel<T><<<n_sm * 4, THREADS, 0, st>>>(p);
    return cu_launched(err, "simt_gemm_kernel");
}

int ft_cuda_simt_gemm_f32(const ft_gemm *g, cudaStream_t st, ft_err *err)
{
    return simt_gemm<float>(g->kind, g->n_groups, g->splits, g->m, g->n, g->k, g->a, g->b, g->c,
                            g->bias, g->bias_scale, g->accumulate, st, err);
}

int ft_cuda_simt_gemm_bf16(const ft_cuda_bf16_gemm *g, cudaStream_t st, ft_err *err)
{
    return simt_gemm<uint16_t>(g->kind, g->n_groups, g->splits, g->m, g->n, g->k, g->a, g->b, g->c,
                               g->bias, g->bias_scale, 0, st, err);
}
