// quant_packed.cu - ft_cuda_bf16_quantize: bf16 in, packed codes + block scales out (MXFP8,
// NVFP4 with columnwise RHT and stochastic rounding, FP8 current scaling, FP8 block 1x128), the
// storage a training run keeps. Layouts: ft_kernels_cuda.h. Values: exactly ft_cpu_quantize's
// after ft_qpacked_decode (shared device helpers in quant_dev.cuh; FP8 codes from the hardware
// cvt.rn.satfinite, which rounds like the reference: RNE, +-max on overflow, NaN kept).
//
// Design (bandwidth-bound; measured figures: bench/RESULTS.md, bench_cuda "qpacked"):
// - Warp tiles, no barriers in the loops: each warp takes whole tiles in a grid-stride loop over
//   a persistent grid (CTAs per SM from the occupancy API) and issues all of a tile's loads
//   (8 or 16 per lane, 16 bytes each) before any arithmetic. A tile's rows are a row block of its
//   group (aligned to the group's first row); row blocks are numbered over all groups.
// - The group table (row offsets and the prefix of row blocks per group) is built from the
//   device splits by every CTA in shared memory at its start (two CTA-wide scans), so the host
//   never reads the splits (CUDA-graph safe) and no extra kernel or workspace is needed.
// - Rowwise blocks are lane groups: 1x32 = 4 lanes, 1x16 = 2, 1x128 = 16; block amax by
//   __shfl_xor. MXFP8 columnwise 32x1 blocks come from the same registers (a lane holds 8 rows
//   of its 8 columns, 4 lane rows; __shfl_xor 8, 16), so both usages cost one read of x.
// - NVFP4 columnwise: a lane loads all 16 rows of its 8 (4 with stochastic rounding) columns, so
//   it holds whole 16x1 blocks: RHT, amax, scale and codes in registers, one word per row.
// - Per-group amax (FP8 current, NVFP4): a first pass; each warp keeps a running max and merges
//   it with one atomicMax per group it saw (NaN-ignoring maxima, so the float bits order like
//   the values). The RHT amax pass rotates each block (the cast rotates it again, as TE does).
//   The cast pass walks the tiles backwards, so it starts on what the amax pass left in L2.
// - E2M1 codes come straight from the float bits (e2m1_rn_code), not through a float rounding.
#include "quant_dev.cuh"

#include <cuda_fp8.h>
#include <type_traits>

namespace
{

constexpr int kThreads = 256; // 8 warps
constexpr int kWarps = kThreads / 32;

enum { M_MX = 0, M_NV_ROW, M_FP8_CUR, M_FP8_BLK, M_AMAX };
static_assert(FT_CUDA_MAX_GROUPS <= 4 * kThreads, "load_groups takes 4 groups per thread");

struct pk {
    const uint16_t *x; // [rows][cols] bf16
    int64_t rows, cols;
    const int64_t *splits; // [G] device, or NULL (one group of all rows)
    int G, br;             // br: tile rows (the row-block side rb[] counts in)
    uint8_t *data;         // codes of the usage (rows kernel: rowwise)
    void *scales;          // scales of the usage
    uint8_t *cdata;        // MXFP8 columnwise codes (rows kernel)
    uint8_t *cscales;      // MXFP8 columnwise E8M0 scales (rows kernel)
    float *amax;           // [G] group amax: atomicMax target of the amax passes, read by the casts
    float fmax, eps;       // element format max; FP8 amax epsilon
    int pow2, rht, rev;    // rev: walk the tiles backwards (the end of x is still in L2)
    uint64_t key;          // SR key: mix(seed, stream * 2 + usage)
};

// ---- group table in shared memory: offs[G + 1] row offsets, rb[G + 1] prefix of row blocks ----

// Exclusive prefix sum over the CTA (scratch: kWarps + 1 values; ends with a barrier).
__device__ __forceinline__ int64_t block_excl_scan(int64_t v, int64_t *scratch, int64_t *total)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int64_t inc = v;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int64_t o = __shfl_up_sync(0xffffffffu, inc, d);
        if (lane >= d) inc += o;
    }
    if (lane == 31) scratch[warp] = inc;
    __syncthreads();
    int64_t before = 0, all = 0;
#pragma unroll
    for (int w = 0; w < kWarps; w++) {
        before += w < warp ? scratch[w] : 0;
        all += scratch[w];
    }
    __syncthreads();
    *total = all;
    return before + inc - v;
}

// Fills s_offs / s_rb (G + 1 each) from p.splits with q_offsets_kernel's rules (negative
// splits count 0, rows past `rows` are cut), 4 groups per thread (G <= 4 * kThreads).
__device__ void load_groups(const pk &p, int64_t *s_offs, int64_t *s_rb)
{
    __shared__ int64_t scratch[kWarps];
    const int tid = threadIdx.x, G = p.G;
    const int64_t rows = p.rows, br = p.br;
    if (!p.splits) {
        if (tid == 0) {
            s_offs[0] = 0;
            s_offs[1] = rows;
            s_rb[0] = 0;
            s_rb[1] = (rows + br - 1) / br;
        }
        __syncthreads();
        return;
    }
    int64_t s[4], sum = 0, total;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int g = tid * 4 + k;
        int64_t v = g < G ? p.splits[g] : 0;
        v = v < 0 ? 0 : (v > rows ? rows : v);
        s[k] = v;
        sum += v;
    }
    int64_t o = block_excl_scan(sum, scratch, &total), nb[4], bsum = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int g = tid * 4 + k;
        const int64_t lo = o < rows ? o : rows;
        o += s[k];
        const int64_t hi = o < rows ? o : rows;
        nb[k] = g < G ? (hi - lo + br - 1) / br : 0;
        bsum += nb[k];
        if (g < G) s_offs[g] = lo;
        if (g == G - 1) s_offs[G] = hi;
    }
    int64_t b = block_excl_scan(bsum, scratch, &total);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int g = tid * 4 + k;
        if (g < G) s_rb[g] = b;
        b += nb[k];
    }
    if (tid == 0) s_rb[G] = total;
    __syncthreads();
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

__device__ __forceinline__ float warp_max(float m)
{
#pragma unroll
    for (int d = 16; d; d >>= 1)
        m = amax_merge(m, __shfl_xor_sync(0xffffffffu, m, d));
    return m;
}

// Per-warp running group amax: merged into amax[g] (atomicMax on the bits of NaN-ignoring
// maxima, which order like the values) when the warp moves to another group and at the end.
struct amax_acc {
    int g = -1;
    float m = 0.0f;
    __device__ __forceinline__ void flush(float *amax)
    {
        const float w = warp_max(m);
        if ((threadIdx.x & 31) == 0 && g >= 0 && w > 0.0f)
            atomicMax(reinterpret_cast<unsigned *>(amax) + g, __float_as_uint(w));
        m = 0.0f;
    }
    __device__ __forceinline__ void add(float *amax, int gg, float v) // gg warp-uniform
    {
        if (gg != g) {
            flush(amax);
            g = gg;
        }
        m = amax_merge(m, v);
    }
};

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

template <int E5M2> __device__ __forceinline__ uint2 fp8x8s(const float (&v)[8], float s)
{
    float m[8];
#pragma unroll
    for (int j = 0; j < 8; j++)
        m[j] = s;
    return fp8x8<E5M2>(v, m);
}

// MXFP8 block: E8M0 code of a block with max |x| = amax (never NaN: NaN-ignoring maxima) and its
// quantization multiplier; d_e8m0_from_float / d_e8m0_quant without the NaN cases: round the
// exponent up unless the value is a power of two (or a denormal at most half the smallest
// normal), saturate at 0xFE (infinity too), whose multiplier is 2^-127.
__device__ __forceinline__ uint32_t mx_code(float amax, float inv_fmax, float *mult)
{
    const uint32_t u = __float_as_uint(__fmul_rn(amax, inv_fmax)), e = u >> 23, m = u & 0x7FFFFFu;
    const uint32_t c = min(e + (m != 0u && (e != 0u || m > 0x400000u) ? 1u : 0u), 0xFEu);
    *mult = __uint_as_float(c == 0xFEu ? 0x00400000u : (254u - c) << 23);
    return c;
}

// d_rht16 of bf16 values (their first rounding to bf16 is the identity): the signs (rht_sign's,
// as a compile-time mask: bit i set where rht_sign[i] is -1) go into the first butterfly stage.
constexpr uint32_t kRhtNeg = 0xD7E8u;

__device__ __forceinline__ void rht16_bf16(float (&v)[16])
{
#pragma unroll
    for (int i = 0; i < 16; i += 2) {
        const float a = (kRhtNeg >> i) & 1u ? -v[i] : v[i];
        const float b = (kRhtNeg >> (i + 1)) & 1u ? -v[i + 1] : v[i + 1];
        v[i] = __fadd_rn(a, b);
        v[i + 1] = __fsub_rn(a, b);
    }
#pragma unroll
    for (int len = 2; len < 16; len <<= 1)
#pragma unroll
        for (int i = 0; i < 16; i++)
            if (!(i & len)) {
                float a = v[i], b = v[i + len];
                v[i] = __fadd_rn(a, b);
                v[i + len] = __fsub_rn(a, b);
            }
#pragma unroll
    for (int i = 0; i < 16; i++)
        v[i] = d_bf16r(__fmul_rn(v[i], 0.25f));
}

// E2M1 code (sign in bit 3) of a value q already on the E2M1 grid. No NaN code: NaN -> 7.
__device__ __forceinline__ uint32_t e2m1_code(float q)
{
    const uint32_t u = __float_as_uint(q), s = (u >> 28) & 8u;
    const float a = fabsf(q);
    uint32_t c = a >= 0.5f ? 1u : 0u; // 0 or 0.5
    if (a >= 1.0f) c = ((((u >> 23) & 0xFFu) - 126u) << 1) | ((u >> 22) & 1u);
    if (a != a) c = 7u;
    return s | c;
}

// e2m1_code(d_e2m1_round(s)) without the float round trip: below 1 the two subnormal
// thresholds (ties to even: 0.25 -> 0, 0.75 -> 1); from 1 up, round the float bits to one
// mantissa bit (RNE), read exponent and mantissa bit as the code, saturate at 7 (6.0; also
// infinity and NaN).
__device__ __forceinline__ uint32_t e2m1_rn_code(float s)
{
    const uint32_t u = __float_as_uint(s), ua = u & 0x7FFFFFFFu;
    const float a = __uint_as_float(ua);
    const uint32_t hi = min(((ua + 0x1FFFFFu + ((ua >> 22) & 1u)) >> 22) - 252u, 7u);
    const uint32_t lo = (a > 0.25f ? 1u : 0u) + (a >= 0.75f ? 1u : 0u);
    return ((u >> 28) & 8u) | (a < 1.0f ? lo : hi);
}

// NVFP4 block scale (nvfp4_block_scale with the hardware RNE satfinite conversion): returns
// its E4M3 code, *d the value.
__device__ __forceinline__ uint32_t nv_scale(float amax, float S, float *d)
{
    const float x = fminf(__fmul_rn(amax, __fmul_rn(S, __fdiv_rn(1.0f, FT_E2M1_MAX))), FLT_MAX);
    const __nv_fp8_storage_t c = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    *d = __half2float(__half(__nv_cvt_fp8_to_halfraw(c, __NV_E4M3)));
    return c;
}

// NVFP4 element: code of round(v * mult), stochastic with the bits of counter when SR.
template <int SR>
__device__ __forceinline__ uint32_t nvfp4_elem(const pk &p, float v, float mult, uint64_t counter)
{
    const float s = __fmul_rn(v, mult);
    if (SR) return e2m1_code(d_e2m1_round_sr(s, d_rng_at(p.key, counter)));
    return e2m1_rn_code(s);
}

__device__ __forceinline__ int tile_group(const int64_t *s_rb, int G, int64_t blk)
{
    return G == 1 ? 0 : group_of(s_rb, G, blk);
}

// ---- rowwise casts, MXFP8 columnwise from the same registers, and the plain amax pass ----
//
// Warp tiles of TR rows x TC columns, one per warp and grid-stride step, no barriers: lane
// holds 8 columns (one 16-byte load) of NL = 8 rows, all loads issued first. LW lanes span a
// row (8: 64 columns; 16 for FP8 block 1x128), rows lane / LW + (32 / LW) * i. A 1x32 block is 4
// lanes, 1x16 2, 1x128 16 (block amax by __shfl_xor); a 32x1 block's 32 rows are the 4 lane
// rows x 8 loads (__shfl_xor 8, 16).
template <int MODE, int E5M2, int SR, int MINB = 1, int PF = 0>
__global__ void __launch_bounds__(kThreads, MINB) pk_rows_kernel(pk p, int do_row, int do_col)
{
    constexpr int LW = MODE == M_FP8_BLK ? 16 : 8, RS = 32 / LW, NL = 8, TC = LW * 8;
    extern __shared__ int64_t s_tab[];
    int64_t *s_offs = s_tab, *s_rb = s_tab + (p.G + 1);
    load_groups(p, s_offs, s_rb);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, G = p.G;
    const int64_t cols = p.cols;
    const uint32_t n_ct = (uint32_t)((cols + TC - 1) / TC);
    const uint32_t n_tiles = (uint32_t)s_rb[G] * n_ct;
    const float inv_fmax = __fdiv_rn(1.0f, p.fmax);
    int cur_g = -1;
    float S = 1.0f, Sdec = 1.0f;
    amax_acc acc;
    // Tile t: its row block, this lane's column and first row, the group and its end row.
    auto tile_at = [&](uint32_t t, uint32_t &blk, int64_t &c, int &g, int64_t &r0, int64_t &r1) {
        const uint32_t tt = p.rev ? n_tiles - 1 - t : t;
        blk = tt / n_ct;
        c = (int64_t)(tt - blk * n_ct) * TC + (lane % LW) * 8;
        g = tile_group(s_rb, G, blk);
        r0 = s_offs[g] + (int64_t)(blk - s_rb[g]) * p.br + lane / LW;
        r1 = s_offs[g + 1];
    };
    auto load = [&](uint4(&raw)[NL], uint32_t t) {
        uint32_t blk;
        int64_t c, r0, r1;
        int g;
        tile_at(t, blk, c, g, r0, r1);
#pragma unroll
        for (int i = 0; i < NL; i++) {
            const int64_t r = r0 + RS * i;
            raw[i] = make_uint4(0u, 0u, 0u, 0u);
            if (c < cols && r < r1)
                raw[i] = __ldg(reinterpret_cast<const uint4 *>(p.x + r * cols + c));
        }
    };
    const uint32_t stride = gridDim.x * kWarps;
    uint4 nxt[NL]; // PF: the next tile's loads, issued before this tile's arithmetic
    uint32_t t = blockIdx.x * kWarps + warp;
    if (PF && t < n_tiles) load(nxt, t);
    for (; t < n_tiles; t += stride) {
        uint32_t blk;
        int64_t c, r0, r1;
        int g;
        tile_at(t, blk, c, g, r0, r1);
        const bool cin = c < cols;
        uint4 raw[NL];
        if (PF) {
#pragma unroll
            for (int i = 0; i < NL; i++)
                raw[i] = nxt[i];
            if (t + stride < n_tiles) load(nxt, t + stride);
        } else {
            load(raw, t);
        }
        if (MODE == M_AMAX) {
            float m = 0.0f, v[8];
#pragma unroll
            for (int i = 0; i < NL; i++) {
                unpack8(raw[i], v);
                m = amax_merge(m, amax8(v));
            }
            acc.add(p.amax, g, m);
            continue;
        }
        if ((MODE == M_NV_ROW || MODE == M_FP8_CUR) && g != cur_g) {
            cur_g = g;
            const float gamax = p.amax[g];
            if (MODE == M_NV_ROW) {
                S = nvfp4_global_scale(gamax);
                Sdec = __fdiv_rn(1.0f, S);
            } else {
                S = fp8_scale_from_amax(gamax, p.fmax, p.pow2, p.eps);
            }
        }
        float cm[8];                  // MXFP8 columnwise: the column multipliers
        if (MODE == M_MX && do_col) { // 32x1 blocks: the 4 lane rows x NL loads of a column
            float cam[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int i = 0; i < NL; i++) {
                float v[8];
                unpack8(raw[i], v);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    cam[j] = amax_merge(cam[j], fabsf(v[j]));
            }
            uint32_t cw[2] = {0u, 0u};
#pragma unroll
            for (int j = 0; j < 8; j++) {
                float am = amax_merge(cam[j], __shfl_xor_sync(0xffffffffu, cam[j], 8));
                am = amax_merge(am, __shfl_xor_sync(0xffffffffu, am, 16));
                // Measured on the H200: the library helpers are faster in the prefetching kernel
                // (0.91 x copy against 0.83, col only), mx_code in the other (0.85 against 0.75).
                uint32_t code;
                if constexpr (PF) {
                    code = d_e8m0_from_float(__fmul_rn(am, inv_fmax));
                    cm[j] = d_e8m0_quant((uint8_t)code);
                } else {
                    code = mx_code(am, inv_fmax, &cm[j]);
                }
                cw[j / 4] |= (uint32_t)code << (8 * (j & 3));
            }
            if (cin && lane < LW) // lane row 0 holds the tile's scale row
                *reinterpret_cast<uint2 *>(p.cscales + (int64_t)blk * cols + c) =
                    make_uint2(cw[0], cw[1]);
        }
#pragma unroll
        for (int i = 0; i < NL; i++) {
            const int64_t r = r0 + RS * i;
            const bool ok = cin && r < r1;
            float v[8];
            unpack8(raw[i], v);
            if (MODE == M_MX && do_col) {
                const uint2 o = fp8x8<E5M2>(v, cm);
                if (ok) *reinterpret_cast<uint2 *>(p.cdata + r * cols + c) = o;
            }
            if (!do_row) continue;
            if (MODE == M_FP8_CUR) {
                const uint2 o = fp8x8s<E5M2>(v, S);
                if (ok) *reinterpret_cast<uint2 *>(p.data + r * cols + c) = o;
                continue;
            }
            float am = amax8(v);
            if (MODE == M_MX) { // 1x32: 4 lanes
                am = amax_merge(am, __shfl_xor_sync(0xffffffffu, am, 1));
                am = amax_merge(am, __shfl_xor_sync(0xffffffffu, am, 2));
                float mult;
                const uint32_t code = mx_code(am, inv_fmax, &mult);
                const uint2 o = fp8x8s<E5M2>(v, mult);
                if (ok) {
                    *reinterpret_cast<uint2 *>(p.data + r * cols + c) = o;
                    if ((lane & 3) == 0)
                        static_cast<uint8_t *>(p.scales)[r * (cols / 32) + c / 32] = code;
                }
            } else if (MODE == M_NV_ROW) { // 1x16: 2 lanes
                am = amax_merge(am, __shfl_xor_sync(0xffffffffu, am, 1));
                float d;
                const uint32_t dc = nv_scale(am, S, &d);
                const float mult = nvfp4_block_mult(d, Sdec);
                uint32_t word = 0;
#pragma unroll
                for (int j = 0; j < 8; j++)
                    word |= nvfp4_elem<SR>(p, v[j], mult, (uint64_t)(r * cols + c + j)) << (4 * j);
                if (ok) {
                    *reinterpret_cast<uint32_t *>(p.data + (r * cols + c) / 2) = word;
                    if ((lane & 1) == 0)
                        static_cast<uint8_t *>(p.scales)[r * (cols / 16) + c / 16] = (uint8_t)dc;
                }
            } else { // FP8 block 1x128: 16 lanes (a partial last block: absent lanes hold 0)
#pragma unroll
                for (int d = 1; d < 16; d <<= 1)
                    am = amax_merge(am, __shfl_xor_sync(0xffffffffu, am, d));
                const float s = fp8_scale_from_amax(am, p.fmax, p.pow2, p.eps);
                const uint2 o = fp8x8s<E5M2>(v, s);
                if (ok) {
                    *reinterpret_cast<uint2 *>(p.data + r * cols + c) = o;
                    if ((lane & 15) == 0)
                        static_cast<float *>(p.scales)[r * ((cols + 127) / 128) + c / 128] =
                            __fdiv_rn(1.0f, s);
                }
            }
        }
    }
    if (MODE == M_AMAX) acc.flush(p.amax);
}

// ---- NVFP4 columnwise (16x1 blocks, optional RHT) ------------------------------------------
//
// Warp tiles of 16 rows x 32 * CPL columns: a lane loads CPL columns (8: 16 bytes, 4: 8 bytes)
// of all 16 rows (16 loads issued first) and so holds CPL whole column blocks: RHT, amax, scale
// and 16 codes per column from registers, nibbles gathered into one CPL * 4-bit word per row,
// the CPL scales into one store. AMAX_ONLY: the amax pass (after RHT; the cast pass rotates
// again, as TE does). CPL 4 halves the registers (stochastic rounding's hashes are long).
template <int AMAX_ONLY, int SR, int CPL, int MINB>
__global__ void __launch_bounds__(kThreads, MINB) pk_nv_cols_kernel(pk p)
{
    constexpr int TC = 32 * CPL, NW = CPL / 2;
    typedef typename std::conditional<
        CPL == 8, uint32_t, typename std::conditional<CPL == 4, uint16_t, uint8_t>::type>::type
        word_t;
    extern __shared__ int64_t s_tab[];
    int64_t *s_offs = s_tab, *s_rb = s_tab + (p.G + 1);
    load_groups(p, s_offs, s_rb);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, G = p.G;
    const int64_t cols = p.cols;
    const uint32_t n_ct = (uint32_t)((cols + TC - 1) / TC);
    const uint32_t n_tiles = (uint32_t)s_rb[G] * n_ct;
    int cur_g = -1;
    float S = 1.0f, Sdec = 1.0f;
    amax_acc acc;
    for (uint32_t t = blockIdx.x * kWarps + warp; t < n_tiles; t += gridDim.x * kWarps) {
        const uint32_t tt = p.rev ? n_tiles - 1 - t : t;
        const uint32_t blk = tt / n_ct;
        const int64_t c = (int64_t)(tt - blk * n_ct) * TC + lane * CPL;
        const int g = tile_group(s_rb, G, blk);
        const int64_t r0 = s_offs[g] + (int64_t)(blk - s_rb[g]) * 16, r1 = s_offs[g + 1];
        const bool cin = c < cols;
        uint32_t raw[16][NW];
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const bool ok = cin && r0 + i < r1;
            const uint16_t *src = p.x + (r0 + i) * cols + c;
            if constexpr (CPL == 8) {
                const uint4 u =
                    ok ? __ldg(reinterpret_cast<const uint4 *>(src)) : make_uint4(0u, 0u, 0u, 0u);
                raw[i][0] = u.x;
                raw[i][1] = u.y;
                raw[i][2] = u.z;
                raw[i][3] = u.w;
            } else if constexpr (CPL == 4) {
                const uint2 u =
                    ok ? __ldg(reinterpret_cast<const uint2 *>(src)) : make_uint2(0u, 0u);
                raw[i][0] = u.x;
                raw[i][1] = u.y;
            } else {
                raw[i][0] = ok ? __ldg(reinterpret_cast<const uint32_t *>(src)) : 0u;
            }
        }
        if (!AMAX_ONLY && g != cur_g) {
            cur_g = g;
            S = nvfp4_global_scale(p.amax[g]);
            Sdec = __fdiv_rn(1.0f, S);
        }
        float tm = 0.0f;
        word_t words[16];
        uint32_t sc[2] = {0u, 0u};
#pragma unroll
        for (int i = 0; i < 16; i++)
            words[i] = 0u;
#pragma unroll
        for (int j = 0; j < CPL; j++) {
            float v[16];
#pragma unroll
            for (int i = 0; i < 16; i++) {
                const uint32_t w = raw[i][j / 2];
                v[i] = __uint_as_float(j & 1 ? w & 0xFFFF0000u : w << 16);
            }
            if (p.rht) rht16_bf16(v);
            float am = 0.0f;
#pragma unroll
            for (int i = 0; i < 16; i++)
                am = amax_merge(am, fabsf(v[i]));
            if (AMAX_ONLY) {
                tm = amax_merge(tm, am);
                continue;
            }
            float d;
            sc[j / 4] |= nv_scale(am, S, &d) << (8 * (j & 3));
            const float mult = nvfp4_block_mult(d, Sdec);
#pragma unroll
            for (int i = 0; i < 16; i++)
                words[i] |=
                    (word_t)(nvfp4_elem<SR>(p, v[i], mult, (uint64_t)((r0 + i) * cols + c + j))
                             << (4 * j));
        }
        if (AMAX_ONLY) {
            acc.add(p.amax, g, tm);
            continue;
        }
        if (cin) {
            uint8_t *sp = static_cast<uint8_t *>(p.scales) + (int64_t)blk * cols + c;
            if constexpr (CPL == 8)
                *reinterpret_cast<uint2 *>(sp) = make_uint2(sc[0], sc[1]);
            else if constexpr (CPL == 4)
                *reinterpret_cast<uint32_t *>(sp) = sc[0];
            else
                *reinterpret_cast<uint16_t *>(sp) = (uint16_t)sc[0];
#pragma unroll
            for (int i = 0; i < 16; i++)
                if (r0 + i < r1)
                    *reinterpret_cast<word_t *>(p.data + ((r0 + i) * cols + c) / 2) = words[i];
        }
    }
    if (AMAX_ONLY) acc.flush(p.amax);
}

typedef void (*rows_kernel_fn)(pk, int, int);
typedef void (*cols_kernel_fn)(pk);

// MXFP8 (72 registers: 3 CTAs per SM) or, with pf, prefetching the next tile (2 CTAs per SM).
template <int E5M2> rows_kernel_fn mx_fn(int pf)
{
    if (pf) return pk_rows_kernel<M_MX, E5M2, 0, 2, 1>;
    return pk_rows_kernel<M_MX, E5M2, 0, 3, 0>;
}

// Persistent grid: as many CTAs as fit on the device at once, at most one warp per tile.
int grid_for(const void *fn, size_t smem, int64_t max_tiles, int n_sm, unsigned *grid, ft_err *err)
{
    int per_sm = 0;
    const int rc =
        cu_fail(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kThreads, smem), err,
                "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    if (rc) return rc;
    int64_t g = (int64_t)n_sm * (per_sm < 1 ? 1 : per_sm);
    const int64_t need = (max_tiles + kWarps - 1) / kWarps;
    if (need < g) g = need;
    *grid = (unsigned)(g < 1 ? 1 : g);
    return FT_OK;
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
    if (need_amax && rowwise && !rowwise->amax_given)
        rc = cu_fail(cudaMemsetAsync(rowwise->amax, 0, amax_bytes, st), err, "cudaMemsetAsync");
    if (!rc && need_amax && colwise && !colwise->amax_given)
        rc = cu_fail(cudaMemsetAsync(colwise->amax, 0, amax_bytes, st), err, "cudaMemsetAsync");
    if (rc || rows == 0 || cols == 0) return rc;

    int dev = 0, n_sm = 132;
    rc = cu_fail(cudaGetDevice(&dev), err, "cudaGetDevice");
    if (!rc)
        rc = cu_fail(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev), err,
                     "cudaDeviceGetAttribute");
    if (rc) return rc;
    // Tile counts are 32-bit on the device (at least 16 x 64 elements per tile).
    if (rows / 16 + G > INT32_MAX / ((cols + 63) / 64))
        return ft_err_set(err, FT_EINVAL, "cuda packed quantize: shape %lld x %lld too large",
                          (long long)rows, (long long)cols);
    pk p = pk();
    p.x = x;
    p.rows = rows;
    p.cols = cols;
    p.splits = splits;
    p.G = G;
    p.fmax = fmt == FT_QF_NVFP4 ? FT_E2M1_MAX : (q->fp8 == FT_FP8_E5M2 ? FT_E5M2_MAX : FT_E4M3_MAX);
    p.eps = q->amax_epsilon;
    p.pow2 = q->pow2_scales;
    const size_t smem = 2 * (size_t)(G + 1) * sizeof(int64_t); // group table
    const int e5m2 = q->fp8 == FT_FP8_E5M2;
    unsigned grid = 1;
    // Launches rows kernel f over tiles of br rows x tc columns.
    auto rows_launch = [&](rows_kernel_fn f, const pk &u, int tc, int do_row, int do_col,
                           const char *what) {
        const int64_t max_tiles = (rows / u.br + G) * ((cols + tc - 1) / tc);
        int r = grid_for((const void *)f, smem, max_tiles, n_sm, &grid, err);
        if (r) return r;
        f<<<grid, kThreads, smem, st>>>(u, do_row, do_col);
        return cu_launched(err, what);
    };
    auto cols_launch = [&](cols_kernel_fn f, const pk &u, int tc, const char *what) {
        const int64_t max_tiles = (rows / 16 + G) * ((cols + tc - 1) / tc);
        int r = grid_for((const void *)f, smem, max_tiles, n_sm, &grid, err);
        if (r) return r;
        f<<<grid, kThreads, smem, st>>>(u);
        return cu_launched(err, what);
    };

    if (fmt == FT_QF_MXFP8) {
        p.br = 32;
        // Many tiles per warp: prefetching wins (32768 x 7168 on an H200: row + col 0.79 x copy
        // against 0.75, col only 0.91 against 0.83); with few (32768 x 2048, 128 groups) the
        // extra occupancy does (row + col 0.78 against 0.65).
        const int pf = (rows / 32 + G) * ((cols + 63) / 64) >= n_sm * 576;
        p.data = rowwise ? rowwise->data : NULL;
        p.scales = rowwise ? rowwise->scales : NULL;
        p.cdata = colwise ? colwise->data : NULL;
        p.cscales = colwise ? static_cast<uint8_t *>(colwise->scales) : NULL;
        rc = rows_launch(e5m2 ? mx_fn<1>(pf) : mx_fn<0>(pf), p, 64, rowwise != NULL,
                         colwise != NULL, "pk_rows_kernel (mxfp8)");
    } else if (fmt == FT_QF_NVFP4) {
        for (int usage = 0; usage < 2 && !rc; usage++) {
            const ft_qpacked *o = usage ? colwise : rowwise;
            if (!o) continue;
            pk u = p;
            u.data = o->data;
            u.scales = o->scales;
            u.amax = o->amax;
            u.rht = usage ? q->rht : 0;
            u.key = ft_hash_mix(q->seed, q->stream * 2u + (uint64_t)usage);
            if (o->amax_given) {
                // amaxes from the caller (the NVFP4 FC1 epilogue): cast only
            } else if (u.rht) {
                u.br = 16;
                rc = cols_launch(pk_nv_cols_kernel<1, 0, 8, 2>, u, 256, "nvfp4 rht amax pass");
            } else {
                u.br = 32;
                rc = rows_launch(pk_rows_kernel<M_AMAX, 0, 0>, u, 64, 0, 0, "nvfp4 amax pass");
            }
            if (rc) break;
            u.rev = 1; // the cast starts where the amax pass ended
            if (usage) {
                u.br = 16;
                if (q->sr)
                    rc =
                        cols_launch(pk_nv_cols_kernel<0, 1, 4, 2>, u, 128, "nvfp4 columnwise cast");
                else
                    rc =
                        cols_launch(pk_nv_cols_kernel<0, 0, 8, 2>, u, 256, "nvfp4 columnwise cast");
            } else {
                u.br = 32;
                rc = rows_launch(q->sr ? pk_rows_kernel<M_NV_ROW, 0, 1>
                                       : pk_rows_kernel<M_NV_ROW, 0, 0>,
                                 u, 64, 1, 0, "nvfp4 rowwise cast");
            }
        }
    } else { // FP8 current or block, rowwise
        p.data = rowwise->data;
        p.scales = rowwise->scales;
        p.amax = rowwise->amax;
        if (fmt == FT_QF_FP8_CURRENT) {
            p.br = 32;
            if (!rowwise->amax_given)
                rc =
                    rows_launch(pk_rows_kernel<M_AMAX, 0, 0>, p, 64, 0, 0, "fp8 current amax pass");
            p.rev = 1;
            if (!rc)
                rc = rows_launch(e5m2 ? pk_rows_kernel<M_FP8_CUR, 1, 0>
                                      : pk_rows_kernel<M_FP8_CUR, 0, 0>,
                                 p, 64, 1, 0, "fp8 current cast");
        } else {
            p.br = 16;
            rc = rows_launch(e5m2 ? pk_rows_kernel<M_FP8_BLK, 1, 0>
                                  : pk_rows_kernel<M_FP8_BLK, 0, 0>,
                             p, 128, 1, 0, "fp8 block cast");
        }
    }
    return rc;
}
