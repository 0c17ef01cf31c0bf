// quant_packed.cu - ft_cuda_bf16_quantize: bf16 in, packed codes + block scales out (MXFP8,
// NVFP4 with columnwise RHT and stochastic rounding, FP8 current scaling, FP8 block 1x128), the
// storage a training run keeps. Layouts: ft_kernels_cuda.h. Values: exactly ft_cpu_quantize's
// after ft_qpacked_decode (shared device helpers in quant_dev.cuh; FP8 codes from the hardware
// cvt.rn.satfinite, which rounds like the reference: RNE, +-max on overflow, NaN kept).
//
// Design (bandwidth-bound; 16-byte loads of 8 bf16, 256-thread CTAs, grid-stride over tiles):
// - A tile is a block of BR rows (32; 16 for NVFP4) aligned to its group's first row, times 256
//   columns (a warp's 32 lanes x 8 bf16). Row blocks are numbered over all groups from the
//   per-group prefix rb[] that q_offsets_kernel computes on the device from the splits, so the
//   host never reads them (CUDA-graph safe). Warp w holds rows w, w + 8, ... of the tile.
// - Rowwise blocks are lane groups: 1x32 = 4 lanes, 1x16 = 2, 1x128 = 16; block amax by
//   __shfl_xor. MXFP8 columnwise 32x1 blocks come from the same registers: per-warp column
//   amaxes meet in shared memory, so both usages cost one read of x.
// - NVFP4 columnwise: the 16 x 256 tile goes through shared memory, each thread takes one
//   column (one 16-row block: RHT, amax, scale, 16 codes), neighbouring threads pair their
//   nibbles, and the packed tile leaves through shared memory as 16-byte stores.
// - Per-group amax (FP8 current, NVFP4): a first pass over the row blocks, one atomicMax per CTA
//   and row block (NaN-ignoring maxima, so the float bits order like the values); the RHT amax
//   pass rotates each chunk (the cast pass rotates it again, as TE does).
#include "quant_dev.cuh"

#include <cuda_fp8.h>

namespace
{

constexpr int kThreads = 256; // 8 warps
constexpr int kWarps = kThreads / 32;
constexpr int kTileCols = 256; // 32 lanes x 8 bf16

enum { M_MX = 0, M_NV_ROW, M_FP8_CUR, M_FP8_BLK };

struct pk {
    const uint16_t *x; // [rows][cols] bf16
    int64_t cols;
    const int64_t *offs, *rb; // [G + 1] group row offsets, prefix of row blocks (side br)
    int G, br;
    uint8_t *data;    // codes of the usage (rows kernel: rowwise)
    void *scales;     // scales of the usage
    uint8_t *cdata;   // MXFP8 columnwise codes (rows kernel)
    uint8_t *cscales; // MXFP8 columnwise E8M0 scales (rows kernel)
    float *amax;      // [G] group amax: atomicMax target of the amax passes, read by the casts
    float fmax, eps;  // element format max; FP8 amax epsilon
    int pow2, sr, rht;
    uint64_t key; // SR key: mix(seed, stream * 2 + usage)
};

// Row block blk: its group (returned) and rows [*r0, *r1).
__device__ __forceinline__ int tile_rows(const pk &p, int64_t blk, int64_t *r0, int64_t *r1)
{
    const int g = group_of(p.rb, p.G, blk);
    *r0 = p.offs[g] + (blk - p.rb[g]) * p.br;
    const int64_t end = p.offs[g + 1];
    *r1 = *r0 + p.br < end ? *r0 + p.br : end;
    return g;
}

__device__ __forceinline__ void unpack8(uint4 u, float (&v)[8])
{
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
        v[2 * k] = __uint_as_float(w[k] << 16);
        v[2 * k + 1] = __uint_as_float(w[k] & 0xFFFF0000u);
    }
}

__device__ __forceinline__ float amax8(const float (&v)[8])
{
    float m = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++)
        m = amax_merge(m, fabsf(v[j]));
    return m;
}

// Max over the CTA, returned to every thread (two barriers; red[kWarps] scratch).
__device__ __forceinline__ float block_max(float m, float *red)
{
#pragma unroll
    for (int d = 16; d; d >>= 1)
        m = amax_merge(m, __shfl_xor_sync(0xffffffffu, m, d));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    float r = red[0];
#pragma unroll
    for (int w = 1; w < kWarps; w++)
        r = amax_merge(r, red[w]);
    __syncthreads();
    return r;
}

__device__ __forceinline__ void group_amax_add(const pk &p, int g, float m)
{
    if (threadIdx.x == 0 && m > 0.0f)
        atomicMax(reinterpret_cast<unsigned *>(p.amax) + g, __float_as_uint(m));
}

// Four FP8 codes of v[k..k+3] * m[k..k+3], first element in the lowest byte.
template <int E5M2>
__device__ __forceinline__ uint32_t fp8x4(const float (&v)[8], const float (&m)[8], int k)
{
    const __nv_fp8_interpretation_t f = E5M2 ? __NV_E5M2 : __NV_E4M3;
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(
        make_float2(__fmul_rn(v[k], m[k]), __fmul_rn(v[k + 1], m[k + 1])), __NV_SATFINITE, f);
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(
        make_float2(__fmul_rn(v[k + 2], m[k + 2]), __fmul_rn(v[k + 3], m[k + 3])), __NV_SATFINITE,
        f);
    return lo | (hi << 16);
}

template <int E5M2> __device__ __forceinline__ uint2 fp8x8(const float (&v)[8], const float (&m)[8])
{
    return make_uint2(fp8x4<E5M2>(v, m, 0), fp8x4<E5M2>(v, m, 4));
}

__device__ __forceinline__ uint8_t e4m3_code(float d) // d exactly representable
{
    return (uint8_t)__nv_cvt_float_to_fp8(d, __NV_SATFINITE, __NV_E4M3);
}

// E2M1 code of an E2M1 value q (sign in bit 3). E2M1 has no NaN: NaN -> 7 (+-6).
__device__ __forceinline__ uint32_t e2m1_code(float q)
{
    const uint32_t u = __float_as_uint(q), s = (u >> 28) & 8u;
    const float a = fabsf(q);
    uint32_t c = a >= 0.5f ? 1u : 0u; // 0 or 0.5
    if (a >= 1.0f) c = ((((u >> 23) & 0xFFu) - 126u) << 1) | ((u >> 22) & 1u);
    if (a != a) c = 7u;
    return s | c;
}

// NVFP4 element: code of round(v * mult), stochastic with the bits of counter when sr.
__device__ __forceinline__ uint32_t nvfp4_elem(const pk &p, float v, float mult, uint64_t counter)
{
    const float s = __fmul_rn(v, mult);
    return e2m1_code(p.sr ? d_e2m1_round_sr(s, d_rng_at(p.key, counter)) : d_e2m1_round(s));
}

// ---- per-group amax (plain values): one row block per CTA iteration -----------------------

__global__ void __launch_bounds__(kThreads) pk_amax_kernel(pk p)
{
    __shared__ float red[kWarps];
    const int64_t n_blk = p.rb[p.G], vec_per_row = p.cols / 8;
    for (int64_t blk = blockIdx.x; blk < n_blk; blk += gridDim.x) {
        int64_t r0, r1;
        const int g = tile_rows(p, blk, &r0, &r1);
        const uint4 *src = reinterpret_cast<const uint4 *>(p.x + r0 * p.cols); // whole rows
        const int64_t n = (r1 - r0) * vec_per_row;
        float m = 0.0f, v[8];
        int64_t i = threadIdx.x;
        for (; i + 3 * kThreads < n; i += 4 * kThreads) {
            uint4 u[4];
#pragma unroll
            for (int k = 0; k < 4; k++)
                u[k] = __ldg(src + i + k * kThreads);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                unpack8(u[k], v);
                m = amax_merge(m, amax8(v));
            }
        }
        for (; i < n; i += kThreads) {
            unpack8(__ldg(src + i), v);
            m = amax_merge(m, amax8(v));
        }
        group_amax_add(p, g, block_max(m, red));
    }
}

// ---- rowwise casts (and MXFP8 columnwise from the same registers) -------------------------

// MODE M_*; RPW rows per warp (tile rows BR = 8 * RPW = p.br). do_row/do_col: MXFP8 usages
// (the other modes are rowwise).
template <int MODE, int E5M2, int RPW>
__global__ void __launch_bounds__(kThreads) pk_rows_kernel(pk p, int do_row, int do_col)
{
    __shared__ float part[kWarps][kTileCols]; // MXFP8 columnwise: column amax of each warp's rows
    __shared__ float cmult[kTileCols];        // MXFP8 columnwise: column multipliers
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t cols = p.cols, n_ct = (cols + kTileCols - 1) / kTileCols;
    const int64_t n_tiles = p.rb[p.G] * n_ct;
    for (int64_t t = blockIdx.x; t < n_tiles; t += gridDim.x) {
        const int64_t blk = t / n_ct, c0 = (t % n_ct) * kTileCols, c = c0 + lane * 8;
        int64_t r0, r1;
        const int g = tile_rows(p, blk, &r0, &r1);
        const bool cin = c < cols;
        uint4 raw[RPW];
#pragma unroll
        for (int i = 0; i < RPW; i++) {
            const int64_t r = r0 + warp + 8 * i;
            raw[i] = make_uint4(0u, 0u, 0u, 0u);
            if (cin && r < r1) raw[i] = __ldg(reinterpret_cast<const uint4 *>(p.x + r * cols + c));
        }
        float gamax = 0.0f, S = 1.0f, Sdec = 1.0f;
        if (MODE == M_NV_ROW || MODE == M_FP8_CUR) gamax = p.amax[g];
        if (MODE == M_NV_ROW) {
            S = nvfp4_global_scale(gamax);
            Sdec = __fdiv_rn(1.0f, S);
        }
        if (MODE == M_FP8_CUR) S = fp8_scale_from_amax(gamax, p.fmax, p.pow2, p.eps);
        if (do_row) {
#pragma unroll
            for (int i = 0; i < RPW; i++) {
                const int64_t r = r0 + warp + 8 * i;
                const bool ok = cin && r < r1;
                float v[8], m[8];
                unpack8(raw[i], v);
                float am = amax8(v);
                if (MODE == M_MX) { // 1x32: 4 lanes
                    am = amax_merge(am, __shfl_xor_sync(0xffffffffu, am, 1));
                    am = amax_merge(am, __shfl_xor_sync(0xffffffffu, am, 2));
                    const uint8_t code = mxfp8_code(am, p.fmax);
                    const float mult = d_e8m0_quant(code);
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        m[j] = mult;
                    const uint2 o = fp8x8<E5M2>(v, m);
                    if (ok) {
                        *reinterpret_cast<uint2 *>(p.data + r * cols + c) = o;
                        if ((lane & 3) == 0)
                            static_cast<uint8_t *>(p.scales)[r * (cols / 32) + c / 32] = code;
                    }
                } else if (MODE == M_NV_ROW) { // 1x16: 2 lanes
                    am = amax_merge(am, __shfl_xor_sync(0xffffffffu, am, 1));
                    const float d = nvfp4_block_scale(am, S), mult = nvfp4_block_mult(d, Sdec);
                    uint32_t word = 0;
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        word |= nvfp4_elem(p, v[j], mult, (uint64_t)(r * cols + c + j)) << (4 * j);
                    if (ok) {
                        *reinterpret_cast<uint32_t *>(p.data + (r * cols + c) / 2) = word;
                        if ((lane & 1) == 0)
                            static_cast<uint8_t *>(p.scales)[r * (cols / 16) + c / 16] =
                                e4m3_code(d);
                    }
                } else if (MODE == M_FP8_CUR) { // one scale per group
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        m[j] = S;
                    const uint2 o = fp8x8<E5M2>(v, m);
                    if (ok) *reinterpret_cast<uint2 *>(p.data + r * cols + c) = o;
                } else { // FP8 block 1x128: 16 lanes (a partial last block: absent lanes hold 0)
#pragma unroll
                    for (int d = 1; d < 16; d <<= 1)
                        am = amax_merge(am, __shfl_xor_sync(0xffffffffu, am, d));
                    const float s = fp8_scale_from_amax(am, p.fmax, p.pow2, p.eps);
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        m[j] = s;
                    const uint2 o = fp8x8<E5M2>(v, m);
                    if (ok) {
                        *reinterpret_cast<uint2 *>(p.data + r * cols + c) = o;
                        if ((lane & 15) == 0)
                            static_cast<float *>(p.scales)[r * ((cols + 127) / 128) + c / 128] =
                                __fdiv_rn(1.0f, s);
                    }
                }
            }
        }
        if (MODE == M_MX && do_col) { // 32x1 blocks: this tile's 32 rows of each column
            float cam[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int i = 0; i < RPW; i++) {
                float v[8];
                unpack8(raw[i], v);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    cam[j] = amax_merge(cam[j], fabsf(v[j]));
            }
#pragma unroll
            for (int j = 0; j < 8; j++)
                part[warp][lane * 8 + j] = cam[j];
            __syncthreads();
            {
                const int tc = threadIdx.x; // one column of the tile per thread
                float am = part[0][tc];
#pragma unroll
                for (int w = 1; w < kWarps; w++)
                    am = amax_merge(am, part[w][tc]);
                const uint8_t code = mxfp8_code(am, p.fmax);
                cmult[tc] = d_e8m0_quant(code);
                if (c0 + tc < cols) p.cscales[blk * cols + c0 + tc] = code;
            }
            __syncthreads();
            float m[8];
#pragma unroll
            for (int j = 0; j < 8; j++)
                m[j] = cmult[lane * 8 + j];
#pragma unroll
            for (int i = 0; i < RPW; i++) {
                const int64_t r = r0 + warp + 8 * i;
                float v[8];
                unpack8(raw[i], v);
                const uint2 o = fp8x8<E5M2>(v, m);
                if (cin && r < r1) *reinterpret_cast<uint2 *>(p.cdata + r * cols + c) = o;
            }
            // part and cmult are rewritten only after the next tile's first barrier, which
            // every thread reaches after its reads above.
        }
    }
}

// ---- NVFP4 columnwise (16x1 blocks, optional RHT): shared-memory tiles of 16 x 256 ---------

// AMAX_ONLY: the RHT amax pass (atomicMax into p.amax); else the cast.
template <int AMAX_ONLY> __global__ void __launch_bounds__(kThreads) pk_nv_cols_kernel(pk p)
{
    __shared__ uint4 s_in[16 * kTileCols / 8];   // 16 rows x 256 bf16
    __shared__ uint4 s_out[16 * kTileCols / 32]; // 16 rows x 128 bytes of nibble pairs
    __shared__ float red[kWarps];
    const int tid = threadIdx.x;
    const int64_t cols = p.cols, n_ct = (cols + kTileCols - 1) / kTileCols;
    const int64_t n_tiles = p.rb[p.G] * n_ct;
    for (int64_t t = blockIdx.x; t < n_tiles; t += gridDim.x) {
        const int64_t blk = t / n_ct, c0 = (t % n_ct) * kTileCols;
        int64_t r0, r1;
        const int g = tile_rows(p, blk, &r0, &r1);
#pragma unroll
        for (int k = 0; k < 2; k++) { // 512 vectors: row q / 32, columns c0 + (q % 32) * 8
            const int q = tid + k * kThreads, i = q >> 5;
            const int64_t c = c0 + (q & 31) * 8;
            uint4 u = make_uint4(0u, 0u, 0u, 0u);
            if (r0 + i < r1 && c < cols)
                u = __ldg(reinterpret_cast<const uint4 *>(p.x + (r0 + i) * cols + c));
            s_in[q] = u;
        }
        __syncthreads();
        const int64_t c = c0 + tid; // this thread's column
        const uint16_t *col = reinterpret_cast<const uint16_t *>(s_in) + tid;
        float v[16];
#pragma unroll
        for (int i = 0; i < 16; i++)
            v[i] = bf16_to_f(col[i * kTileCols]);
        if (p.rht) d_rht16(v);
        float am = 0.0f;
#pragma unroll
        for (int i = 0; i < 16; i++)
            am = amax_merge(am, fabsf(v[i]));
        if (AMAX_ONLY) {
            group_amax_add(p, g, block_max(am, red)); // its barriers also free s_in
            continue;
        }
        const float gamax = p.amax[g], S = nvfp4_global_scale(gamax);
        const float d = nvfp4_block_scale(am, S), mult = nvfp4_block_mult(d, __fdiv_rn(1.0f, S));
        if (c < cols) static_cast<uint8_t *>(p.scales)[blk * cols + c] = e4m3_code(d);
        uint64_t codes = 0; // nibble i: row r0 + i
#pragma unroll
        for (int i = 0; i < 16; i++)
            codes |= (uint64_t)nvfp4_elem(p, v[i], mult, (uint64_t)((r0 + i) * cols + c))
                     << (4 * i);
        const uint64_t right = __shfl_down_sync(0xffffffffu, codes, 1); // column c + 1
        if ((tid & 1) == 0) {
            uint8_t *so = reinterpret_cast<uint8_t *>(s_out) + tid / 2;
#pragma unroll
            for (int i = 0; i < 16; i++)
                so[i * (kTileCols / 2)] =
                    (uint8_t)(((codes >> (4 * i)) & 15u) | (((right >> (4 * i)) & 15u) << 4));
        }
        __syncthreads();
        if (tid < 16 * kTileCols / 32) { // row tid / 8, bytes (tid % 8) * 16 of the tile's 128
            const int i = tid >> 3, ch = tid & 7;
            if (r0 + i < r1 && c0 + ch * 32 < cols)
                *reinterpret_cast<uint4 *>(p.data + (r0 + i) * (cols / 2) + c0 / 2 + ch * 16) =
                    s_out[tid];
        }
        // s_in and s_out are rewritten only after barriers every thread reaches after its reads.
    }
}

typedef void (*rows_kernel_fn)(pk, int, int);

unsigned grid_for(int64_t max_tiles, int n_sm)
{
    int64_t g = (int64_t)n_sm * 8; // up to 8 resident CTAs of 256 threads per SM
    if (max_tiles < g) g = max_tiles;
    return (unsigned)(g < 1 ? 1 : g);
}

int check_out(const ft_qpacked *o, int need_scales, int need_amax, const char *usage, ft_err *err)
{
    if (!o->data || ((uintptr_t)o->data & 15))
        return ft_err_set(err, FT_EINVAL,
                          "cuda packed quantize: %s data NULL or not 16-byte aligned", usage);
    if (need_scales && (!o->scales || ((uintptr_t)o->scales & 15)))
        return ft_err_set(err, FT_EINVAL,
                          "cuda packed quantize: %s scales NULL or not 16-byte aligned", usage);
    if (need_amax && !o->amax)
        return ft_err_set(err, FT_EINVAL, "cuda packed quantize: %s amax NULL", usage);
    return FT_OK;
}

} // namespace

extern "C" int ft_cuda_bf16_quantize(const ft_qcfg *q, const uint16_t *x, int64_t rows,
                                     int64_t cols, const int64_t *splits, uint32_t n_groups,
                                     const ft_qpacked *rowwise, const ft_qpacked *colwise,
                                     void *stream, ft_err *err)
{
    cudaStream_t st = (cudaStream_t)stream;
    if (!q) return ft_err_set(err, FT_EINVAL, "cuda packed quantize: no quantizer config");
    if (q->fp8 != FT_FP8_E4M3 && q->fp8 != FT_FP8_E5M2)
        return ft_err_set(err, FT_EINVAL, "cuda packed quantize: unknown fp8 type %d", (int)q->fp8);
    const int fmt = q->fmt;
    const int ok = fmt == FT_QF_MXFP8 || fmt == FT_QF_NVFP4 ||
                   (!colwise && (fmt == FT_QF_FP8_CURRENT || fmt == FT_QF_FP8_BLOCK));
    if (!ok || q->two_d)
        return ft_err_set(err, FT_EUNSUPPORTED, "cuda packed quantize: no %s%s%s kernel",
                          (unsigned)fmt < FT_QF_COUNT ? ft_qfmt_name(q->fmt) : "?",
                          q->two_d ? " 2D" : "", colwise ? " columnwise" : "");
    if ((q->sr || q->rht) && fmt != FT_QF_NVFP4)
        return ft_err_set(err, FT_EINVAL, "cuda packed quantize: SR and RHT are NVFP4 only");
    if (!rowwise && !colwise)
        return ft_err_set(err, FT_EINVAL, "cuda packed quantize: no output usage");
    if (rows < 0 || cols < 0 || cols % 32)
        return ft_err_set(err, FT_EINVAL,
                          "cuda packed quantize: shape %lld x %lld (cols must be a multiple of 32)",
                          (long long)rows, (long long)cols);
    if (splits && (n_groups == 0 || n_groups > FT_CUDA_MAX_GROUPS))
        return ft_err_set(err, FT_EINVAL, "cuda packed quantize: n_groups %u outside 1..%d",
                          n_groups, FT_CUDA_MAX_GROUPS);
    if (rows * cols > 0 && (!x || ((uintptr_t)x & 15)))
        return ft_err_set(err, FT_EINVAL, "cuda packed quantize: x NULL or not 16-byte aligned");
    const int need_amax = fmt == FT_QF_NVFP4 || fmt == FT_QF_FP8_CURRENT;
    const int need_scales = fmt != FT_QF_FP8_CURRENT;
    int rc = FT_OK;
    if (rowwise) rc = check_out(rowwise, need_scales, need_amax, "rowwise", err);
    if (!rc && colwise) rc = check_out(colwise, need_scales, need_amax, "columnwise", err);
    if (rc) return rc;
    const int G = splits ? (int)n_groups : 1;
    const size_t amax_bytes = (size_t)G * sizeof(float);
    // The amaxes are maxima starting from 0 (also the result for empty groups).
    if (need_amax && rowwise)
        rc = cu_fail(cudaMemsetAsync(rowwise->amax, 0, amax_bytes, st), err, "cudaMemsetAsync");
    if (!rc && need_amax && colwise)
        rc = cu_fail(cudaMemsetAsync(colwise->amax, 0, amax_bytes, st), err, "cudaMemsetAsync");
    if (rc || rows == 0 || cols == 0) return rc;

    int dev = 0, n_sm = 132;
    rc = cu_fail(cudaGetDevice(&dev), err, "cudaGetDevice");
    if (!rc)
        rc = cu_fail(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev), err,
                     "cudaDeviceGetAttribute");
    if (rc) return rc;
    pk p = pk();
    p.x = x;
    p.cols = cols;
    p.G = G;
    p.br = fmt == FT_QF_NVFP4 ? 16 : 32;
    p.fmax = fmt == FT_QF_NVFP4 ? FT_E2M1_MAX : (q->fp8 == FT_FP8_E5M2 ? FT_E5M2_MAX : FT_E4M3_MAX);
    p.eps = q->amax_epsilon;
    p.pow2 = q->pow2_scales;
    p.sr = q->sr;
    const int64_t n_ct = (cols + kTileCols - 1) / kTileCols;
    const int64_t max_blocks = rows / p.br + G; // bound on rb[G] for any splits
    const unsigned grid_tiles = grid_for(max_blocks * n_ct, n_sm);
    const unsigned grid_blocks = grid_for(max_blocks, n_sm);
    const int e5m2 = q->fp8 == FT_FP8_E5M2;

    int64_t *ws = NULL;
    rc = cu_fail(cudaMallocAsync((void **)&ws, 2 * (size_t)(G + 1) * sizeof(int64_t), st), err,
                 "cudaMallocAsync");
    if (rc) return rc;
    p.offs = ws;
    p.rb = ws + (G + 1);
    q_offsets_kernel<<<1, 1, 0, st>>>(splits, G, rows, p.br, ws, ws + (G + 1));
    rc = cu_launched(err, "q_offsets_kernel");

    if (!rc && fmt == FT_QF_MXFP8) {
        p.data = rowwise ? rowwise->data : NULL;
        p.scales = rowwise ? rowwise->scales : NULL;
        p.cdata = colwise ? colwise->data : NULL;
        p.cscales = colwise ? static_cast<uint8_t *>(colwise->scales) : NULL;
        rows_kernel_fn f = e5m2 ? pk_rows_kernel<M_MX, 1, 4> : pk_rows_kernel<M_MX, 0, 4>;
        f<<<grid_tiles, kThreads, 0, st>>>(p, rowwise != NULL, colwise != NULL);
        rc = cu_launched(err, "pk_rows_kernel (mxfp8)");
    } else if (!rc && fmt == FT_QF_NVFP4) {
        for (int usage = 0; usage < 2 && !rc; usage++) {
            const ft_qpacked *o = usage ? colwise : rowwise;
            if (!o) continue;
            pk u = p;
            u.data = o->data;
            u.scales = o->scales;
            u.amax = o->amax;
            u.rht = usage ? q->rht : 0;
            u.key = ft_hash_mix(q->seed, q->stream * 2u + (uint64_t)usage);
            if (u.rht)
                pk_nv_cols_kernel<1><<<grid_tiles, kThreads, 0, st>>>(u);
            else
                pk_amax_kernel<<<grid_blocks, kThreads, 0, st>>>(u);
            rc = cu_launched(err, "nvfp4 amax pass");
            if (rc) break;
            if (usage)
                pk_nv_cols_kernel<0><<<grid_tiles, kThreads, 0, st>>>(u);
            else
                pk_rows_kernel<M_NV_ROW, 0, 2><<<grid_tiles, kThreads, 0, st>>>(u, 1, 0);
            rc = cu_launched(err, "nvfp4 cast");
        }
    } else if (!rc) { // FP8 current or block, rowwise
        p.data = rowwise->data;
        p.scales = rowwise->scales;
        p.amax = rowwise->amax;
        rows_kernel_fn f;
        if (fmt == FT_QF_FP8_CURRENT) {
            pk_amax_kernel<<<grid_blocks, kThreads, 0, st>>>(p);
            rc = cu_launched(err, "pk_amax_kernel (fp8 current)");
            f = e5m2 ? pk_rows_kernel<M_FP8_CUR, 1, 4> : pk_rows_kernel<M_FP8_CUR, 0, 4>;
        } else {
            f = e5m2 ? pk_rows_kernel<M_FP8_BLK, 1, 4> : pk_rows_kernel<M_FP8_BLK, 0, 4>;
        }
        if (!rc) {
            f<<<grid_tiles, kThreads, 0, st>>>(p, 1, 0);
            rc = cu_launched(err, "pk_rows_kernel (fp8)");
        }
    }
    int rc2 = cu_fail(cudaFreeAsync(ws, st), err, "cudaFreeAsync");
    return rc ? rc : rc2;
}
