// gemm_wgmma.cu - persistent grouped bf16 GEMM for sm_90a: TMA loads into 128-byte-swizzled
// shared memory, wgmma with fp32 accumulators, one producer warpgroup and two consumer
// warpgroups, fused epilogues (bias, bias x probs, FC1 activation x probs).
//
// Design. A CTA owns one SM (grid = SM count) and walks the tile list tile = blockIdx.x +
// i * gridDim.x; the list (group, m-tile, n-tile) is built on the device from the splits
// (sched.cuh). Tile 128 x 256 x 64, 4 stages of 48 KB. Warpgroup 0 issues the TMA copies (one
// thread) and waits on per-stage "empty" barriers; warpgroups 1 and 2 each own 64 rows of the
// tile, wait on "full" barriers, run 4 wgmma m64n256k16 per stage, retire them, release the
// stage, and store their fragment straight from registers.
// Operand layouts: FPROP A = X (K-major), B = W rows (K-major); DGRAD A = dY (K-major), B = W
// with the contraction along its rows (MN-major); WGRAD A = dY^T and B = X, both with the
// contraction along tokens (MN-major). Rows of other groups inside a tile are either masked at
// the store (FPROP/DGRAD), multiplied by TMA's zero fill (DGRAD's contraction tail), or zeroed in
// shared memory before the wgmma (WGRAD's token tail).
// Limits (checked by ft_cuda_wgmma_supported): n, k multiples of 8, 16-byte aligned pointers,
// n_groups <= FT_CUDA_MAX_GROUPS, GLU interleave 0 or 32 with n % 64 == 0 when interleaved.
#include "quant_dev.cuh"
#include "sched.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdlib.h>

namespace
{

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4;
constexpr int A_BYTES = BM * BK * 2;
constexpr int B_BYTES = BN * BK * 2;
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;
constexpr int THREADS = 384;

enum { EPI_PLAIN = 0, EPI_GLU_INTERLEAVED, EPI_GLU_SPLIT, EPI_UNARY };
// Flag on the three activation epilogues: the fused MXFP8 FC1 epilogue (quantize z on store).
constexpr int EPI_MX = 4;
// Flag: the fused NVFP4 FC1 epilogue (bf16 z from the fp32 accumulator, per-group amaxes on store).
constexpr int EPI_NV = 8;
constexpr int EPI_Q = EPI_MX | EPI_NV;
constexpr int MX_LD = 33; // legacy epilogue: staged z chunk, 64 rows x 32 columns, padded
constexpr int MX_WG_FLOATS = 16 * (64 + 4) + 8 * (2 * 64 + 4); // gemm_epilogue.inc mx_red_floats(64)
constexpr int MX_RED_BYTES = 2 * (MX_WG_FLOATS * 4 > 64 * MX_LD * 4 ? MX_WG_FLOATS * 4 : 64 * MX_LD * 4);

struct wg_params {
    int G;
    int64_t m, n, k;  // ft_gemm shape
    int64_t out_cols; // columns of C (FPROP n, DGRAD/WGRAD k)
    int64_t contract; // contraction length for FPROP/DGRAD (k resp. n)
    int64_t n_tiles;  // tiles along output columns
    const int64_t *splits;
    uint16_t *c;
    const uint16_t *bias;
    const float *bias_scale;
    act_params act;
    const float *probs;
    uint16_t *z;
    int64_t k2;
    uint16_t *zc; // EPI_MX: columnwise MXFP8 copy of z (NULL: rowwise only)
    int z_fp8;    // EPI_MX: element type of z
    float *zamax; // EPI_NV: [2][G] amax of z rowwise and of its 16-row RHT (atomic max)
    int raster;   // m-tiles per raster band
};

#include "wgmma_256.inc"

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(uint64_t *bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    uint32_t addr = smem_u32(bar), ok = 0;
    do {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(ok)
                     : "r"(addr), "r"(parity)
                     : "memory");
    } while (!ok);
}

__device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *tm, uint64_t *bar, int c0,
                                         int c1)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_u32(dst)),
                 "l"((uint64_t)tm), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
                 : "memory");
}

// Shared-memory matrix descriptor, 128-byte swizzle.
__device__ __forceinline__ uint64_t sdesc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wg_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wg_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wg_wait0()
{
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
__device__ __forceinline__ void wg_wait1()
{
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
}

// Decoded tile: group, first row of the group, rows in the group, m/n tile indices.
struct tile_pos {
    int g;
    int64_t row0, rows;
    int64_t mt, nt;
};

template <int KIND>
__device__ __forceinline__ tile_pos decode(const wg_params &p, const int64_t *off,
                                           const int64_t *tiles, int64_t t)
{
    tile_pos tp;
    tp.g = sched_group(tiles, p.G, t);
    // tile counts fit in 32 bits (m < 2^31 rows, n < 2^31 columns): 32-bit division here
    const int local = (int)(t - tiles[tp.g]);
    tp.row0 = off[tp.g];
    tp.rows = off[tp.g + 1] - off[tp.g];
    // Bands of p.raster m-tiles, walked n-tile by n-tile: the CTAs working at the same time share
    // a few A panels and a few B panels, so both stay in L2 (nt-fastest order re-read all of
    // W_g from memory for every m-tile).
    const int n_tiles = (int)p.n_tiles;
    const int m_tiles = (int)(KIND == FT_GEMM_WGRAD ? (p.n + BM - 1) / BM : (tp.rows + BM - 1) / BM);
    const int R = p.raster;
    const int band = local / (R * n_tiles);
    const int first = band * R;
    const int h = m_tiles - first < R ? m_tiles - first : R;
    const int r = local - band * R * n_tiles;
    tp.mt = first + r % h;
    tp.nt = r / h;
    return tp;
}

template <int KIND> __device__ __forceinline__ int n_ktiles(const wg_params &p, const tile_pos &tp)
{
    if (KIND == FT_GEMM_WGRAD) return (int)((tp.rows + BK - 1) / BK);
    return (int)((p.contract + BK - 1) / BK);
}

template <int KIND, int EPI>
__device__ __forceinline__ void produce(const wg_params &p, const CUtensorMap *ta,
                                        const CUtensorMap *tb, const tile_pos &tp, int kt,
                                        uint8_t *st, uint64_t *full)
{
    uint8_t *sa = st, *sb = st + A_BYTES;
    mbar_expect_tx(full, STAGE_BYTES);
    if (KIND == FT_GEMM_FPROP) {
        int k0 = kt * BK;
        tma_load(sa, ta, full, k0, (int)(tp.row0 + tp.mt * BM));
        int64_t r0, r1;
        if ((EPI & 3) == EPI_GLU_SPLIT) { // also with the EPI_MX / EPI_NV flags
            r0 = (int64_t)tp.g * p.n + tp.nt * (BN / 2);
            r1 = r0 + p.k2;
        } else {
            r0 = (int64_t)tp.g * p.n + tp.nt * BN;
            r1 = r0 + BN / 2;
        }
        tma_load(sb, tb, full, k0, (int)r0);
        tma_load(sb + B_BYTES / 2, tb, full, k0, (int)r1);
    } else if (KIND == FT_GEMM_DGRAD) {
        int k0 = kt * BK;
        tma_load(sa, ta, full, k0, (int)(tp.row0 + tp.mt * BM));
        int brow = (int)((int64_t)tp.g * p.n + k0);
        for (int c = 0; c < 4; c++)
            tma_load(sb + c * (B_BYTES / 4), tb, full, (int)(tp.nt * BN + 64 * c), brow);
    } else {
        int tok = (int)(tp.row0 + (int64_t)kt * BK);
        for (int c = 0; c < 2; c++)
            tma_load(sa + c * (A_BYTES / 2), ta, full, (int)(tp.mt * BM + 64 * c), tok);
        for (int c = 0; c < 4; c++)
            tma_load(sb + c * (B_BYTES / 4), tb, full, (int)(tp.nt * BN + 64 * c), tok);
    }
}

// Zero shared-memory rows [valid, 64) of the 128-byte rows of one 64-row box (WGRAD token tail).
__device__ __forceinline__ void zero_rows(uint8_t *box, int valid, int tid)
{
    uint4 zero = make_uint4(0, 0, 0, 0);
    for (int i = valid * 8 + tid; i < 64 * 8; i += 128)
        reinterpret_cast<uint4 *>(box)[i] = zero;
}

// bf16(v0) in the low half, bf16(v1) in the high half (round to nearest even), one instruction.
__device__ __forceinline__ uint32_t pack_bf16(float v0, float v1)
{
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(v1), "f"(v0));
    return r;
}

__device__ __forceinline__ uint32_t sel4(uint32_t a, uint32_t b, uint32_t c, uint32_t d, int i)
{
    return i == 0 ? a : (i == 1 ? b : (i == 2 ? c : d));
}

// The 4 lanes of a quad each hold one packed bf16 pair (4 bytes) of 4 consecutive 8-column
// chunks of the same row: w[c] = columns 8c + 2q, +1. Transpose within the quad so that lane q
// holds all 8 columns of chunk q, then store them as one 16-byte vector at row_ptr + 8q (a warp
// writes 8 rows x 64 contiguous bytes: whole sectors). limit: columns valid from row_ptr.
__device__ __forceinline__ void store_quad(uint16_t *row_ptr, int64_t limit, uint32_t w0,
                                           uint32_t w1, uint32_t w2, uint32_t w3, int q)
{
    uint32_t o0 = 0, o1 = 0, o2 = 0, o3 = 0;
    const int base = (threadIdx.x % 32) & ~3;
    const unsigned mask = 0xFu << base; // rows outside the group skip by whole quads
#pragma unroll
    for (int r = 0; r < 4; r++) {
        uint32_t send = sel4(w0, w1, w2, w3, (q - r) & 3);
        int src = (q + r) & 3;
        uint32_t v = __shfl_sync(mask, send, base + src);
        o0 = src == 0 ? v : o0;
        o1 = src == 1 ? v : o1;
        o2 = src == 2 ? v : o2;
        o3 = src == 3 ? v : o3;
    }
    if (8 * q + 8 <= limit)
        *reinterpret_cast<uint4 *>(row_ptr + 8 * q) = make_uint4(o0, o1, o2, o3);
}

// Fragment column blocks (8 columns each) holding the u and v inputs of z chunk zb (32 columns),
// column block jj (GLU: act and gate halves; unary: u only).
template <int EPI> __device__ __forceinline__ void z_slots(int zb, int jj, int *ju, int *jv)
{
    if (EPI == EPI_GLU_INTERLEAVED) {
        *ju = 8 * zb + jj;
        *jv = *ju + 4;
    } else if (EPI == EPI_GLU_SPLIT) {
        *ju = 4 * zb + jj;
        *jv = *ju + 16;
    } else {
        *ju = *jv = 4 * zb + jj;
    }
}

// Store one fragment row of h (bf16): val(j, e) is element e of fragment column block j.
template <int EPI, typename V>
__device__ __forceinline__ void store_h_row(const wg_params &p, const tile_pos &tp, uint16_t *hrow,
                                            int q, V val)
{
#pragma unroll
    for (int jb = 0; jb < 8; jb++) {
        int64_t c0, lim;
        if (EPI == EPI_GLU_SPLIT) {
            const int64_t a0 = tp.nt * (BN / 2) + 32 * (jb % 4);
            c0 = (jb < 4 ? 0 : p.k2) + a0;
            lim = p.k2 - a0;
        } else {
            c0 = tp.nt * BN + 32 * jb;
            lim = p.n - c0;
        }
        const int j = 4 * jb;
        store_quad(hrow + c0, lim, pack_bf16(val(j, 0), val(j, 1)),
                   pack_bf16(val(j + 1, 0), val(j + 1, 1)), pack_bf16(val(j + 2, 0), val(j + 2, 1)),
                   pack_bf16(val(j + 3, 0), val(j + 3, 1)), q);
    }
}

// Epilogue of one consumer warpgroup: its 64 x 256 fragment (rows 64*wg + 16*warp + lane/4 +
// 8i, columns 8j + 2(lane%4) + e in acc[4j + 2i + e]). Rows outside the group (or past n for
// WGRAD) are skipped by whole quads, so the shuffles stay convergent within a quad.
template <int KIND, int EPI>
__device__ __forceinline__ void epilogue(const wg_params &p, const tile_pos &tp, float (&acc)[128],
                                         int wg, int tid)
{
    const int w = tid / 32, lane = tid % 32, q = lane % 4;
    const uint16_t *bias =
        (KIND == FT_GEMM_FPROP && p.bias) ? p.bias + (int64_t)tp.g * p.n : nullptr;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int64_t trow = tp.mt * BM + 64 * wg + 16 * w + lane / 4 + 8 * i;
        int64_t grow;
        bool valid;
        if (KIND == FT_GEMM_WGRAD) {
            valid = trow < p.n;
            grow = (int64_t)tp.g * p.n + trow;
        } else {
            valid = trow < tp.rows;
            grow = tp.row0 + trow;
        }
        // a quad shares its row, so whole quads skip together
        if (!valid) continue;
        if (EPI == EPI_PLAIN) {
            const float bs = (bias && p.bias_scale) ? p.bias_scale[grow] : 1.0f;
            uint16_t *crow = p.c + grow * p.out_cols;
#pragma unroll
            for (int jb = 0; jb < 8; jb++) {
                uint32_t wv[4];
#pragma unroll
                for (int jj = 0; jj < 4; jj++) {
                    const int j = 4 * jb + jj;
                    const int64_t col = tp.nt * BN + 8 * j + 2 * q;
                    float v0 = acc[4 * j + 2 * i], v1 = acc[4 * j + 2 * i + 1];
                    if (bias && col < p.out_cols) {
                        v0 += bf16_to_f(bias[col]) * bs;
                        v1 += bf16_to_f(bias[col + 1]) * bs;
                    }
                    wv[jj] = pack_bf16(v0, v1);
                }
                const int64_t c0 = tp.nt * BN + 32 * jb;
                store_quad(crow + c0, p.out_cols - c0, wv[0], wv[1], wv[2], wv[3], q);
            }
            continue;
        }
        const float prob = p.probs ? p.probs[grow] : 1.0f;
        uint16_t *hrow = p.c + grow * p.n, *zrow = p.z + grow * p.k2;
        // h = acc + bias, rounded to bf16 (the activation reads the rounded values)
        float hv[32][2];
#pragma unroll
        for (int j = 0; j < 32; j++) {
            int64_t col;
            if (EPI == EPI_GLU_SPLIT)
                col = (j < 16 ? 0 : p.k2) + tp.nt * (BN / 2) + 8 * (j % 16) + 2 * q;
            else
                col = tp.nt * BN + 8 * j + 2 * q;
            float v0 = acc[4 * j + 2 * i], v1 = acc[4 * j + 2 * i + 1];
            const bool in =
                EPI == EPI_GLU_SPLIT ? (tp.nt * (BN / 2) + 8 * (j % 16) < p.k2) : col < p.n;
            if (bias && in) {
                v0 += bf16_to_f(bias[col]);
                v1 += bf16_to_f(bias[col + 1]);
            }
            hv[j][0] = bf16_to_f(f_to_bf16(v0));
            hv[j][1] = bf16_to_f(f_to_bf16(v1));
        }
        store_h_row<EPI>(p, tp, hrow, q, [&](int j, int e) { return hv[j][e]; });
        // z = p * f(u, v): 16 z chunks (GLU) or 32 (unary) per tile row
        constexpr int ZB = EPI == EPI_UNARY ? 8 : 4;
#pragma unroll
        for (int zb = 0; zb < ZB; zb++) {
            uint32_t wv[4];
#pragma unroll
            for (int jj = 0; jj < 4; jj++) {
                int ju, jv;
                z_slots<EPI>(zb, jj, &ju, &jv);
                wv[jj] = pack_bf16(prob * act_f(p.act, hv[ju][0], hv[jv][0]),
                                   prob * act_f(p.act, hv[ju][1], hv[jv][1]));
            }
            const int64_t z0 = EPI == EPI_UNARY ? tp.nt * BN + 32 * zb : tp.nt * (BN / 2) + 32 * zb;
            store_quad(zrow + z0, p.k2 - z0, wv[0], wv[1], wv[2], wv[3], q);
        }
    }
}

// The fused MXFP8 FC1 epilogue of one consumer warpgroup (the CPU's FT_MLP_FUSED MXFP8 path):
// h = acc + bias is stored as bf16, z = p * f(h) is evaluated on the fp32 h, and z is stored
// MXFP8 fake-quantized (bf16 storage holds every FP8 value times a power of two exactly) along
// rows (1x32 blocks) and, into zc, down columns (32x1 blocks; the tile starts at a multiple of 128
// rows of its group, so blocks restart at the group's first row as in the reference). Rows
// outside the group and columns past k2 count as zero in every amax. The quantization works on
// one 64 x 32 chunk of z at a time staged in shared memory (zs, this warpgroup's), with short
// loops: each thread takes half of one row block and half of one column block. (On the
// register fragment instead, with the software FP8 rounding, the epilogue unrolled into ~240 KB
// of code and the kernel ran 1.9-3.1x slower than with the bf16 epilogue.)
template <int EPI, bool NV>
__device__ __forceinline__ void epilogue_mx(const wg_params &p, const tile_pos &tp,
                                            float (&acc)[128], int wg, int tid, float *zs)
{
    const int w = tid / 32, lane = tid % 32, q = lane % 4;
    const uint16_t *bias = p.bias ? p.bias + (int64_t)tp.g * p.n : nullptr;
    constexpr int ZB = EPI == EPI_UNARY ? 8 : 4;
    bool valid[2];
    int64_t grow[2];
    // 1. h = acc + bias in place; store bf16 h; z = p f(h) in place into the u columns' slots
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int64_t trow = tp.mt * BM + 64 * wg + 16 * w + lane / 4 + 8 * i;
        valid[i] = trow < tp.rows;
        grow[i] = tp.row0 + trow;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            int64_t col;
            bool in;
            if (EPI == EPI_GLU_SPLIT) {
                col = (j < 16 ? 0 : p.k2) + tp.nt * (BN / 2) + 8 * (j % 16) + 2 * q;
                in = tp.nt * (BN / 2) + 8 * (j % 16) < p.k2;
            } else {
                col = tp.nt * BN + 8 * j + 2 * q;
                in = col < p.n;
            }
            if (bias && in) {
                acc[4 * j + 2 * i] += bf16_to_f(bias[col]);
                acc[4 * j + 2 * i + 1] += bf16_to_f(bias[col + 1]);
            }
        }
        if (valid[i])
            store_h_row<EPI>(p, tp, p.c + grow[i] * p.n, q,
                             [&](int j, int e) { return acc[4 * j + 2 * i + e]; });
        const float prob = (valid[i] && p.probs) ? p.probs[grow[i]] : 1.0f;
#pragma unroll
        for (int zb = 0; zb < ZB; zb++)
#pragma unroll
            for (int jj = 0; jj < 4; jj++) {
                int ju, jv;
                z_slots<EPI>(zb, jj, &ju, &jv);
                const int64_t zc0 =
                    (EPI == EPI_UNARY ? tp.nt * BN : tp.nt * (BN / 2)) + 32 * zb + 8 * jj;
                const bool keep = valid[i] && zc0 < p.k2;
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const float zv =
                        prob * act_f(p.act, acc[4 * ju + 2 * i + e], acc[4 * jv + 2 * i + e]);
                    acc[4 * ju + 2 * i + e] = keep ? zv : 0.0f;
                }
            }
    }
    const float fmax = p.z_fp8 == FT_FP8_E5M2 ? FT_E5M2_MAX : FT_E4M3_MAX;
    const int64_t row_base = tp.mt * BM + 64 * wg; // tile row of zs row 0
#pragma unroll
    for (int zb = 0; zb < ZB; zb++) {
#pragma unroll
        for (int jj = 0; jj < 4; jj++) {
            int ju, jv; // z of (zb, jj) sits in the u column's slots (step 1)
            z_slots<EPI>(zb, jj, &ju, &jv);
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int e = 0; e < 2; e++)
                    zs[(16 * w + lane / 4 + 8 * i) * MX_LD + 8 * jj + 2 * q + e] =
                        acc[4 * ju + 2 * i + e];
        }
        asm volatile("bar.sync %0, 128;" ::"r"(2 + wg) : "memory");
        const int64_t z0 = (EPI == EPI_UNARY ? tp.nt * BN : tp.nt * (BN / 2)) + 32 * zb;
        if constexpr (NV) {
            // bf16 z (16 values of a row, one store) and its amax; the 16 x 1 chunk of a column
            // (rows 32 b + 16 half ..: 16-row chunks start at the group's first row) through the
            // RHT and its amax. Rows past the group and columns past k2 are zeros in zs.
            const int half = lane & 1;
            const int r = tid / 2;
            float v[16], arow = 0.0f, acol = 0.0f;
#pragma unroll
            for (int c = 0; c < 16; c++) {
                v[c] = d_bf16r(zs[r * MX_LD + 16 * half + c]);
                arow = fmaxf(arow, fabsf(v[c]));
            }
            const int64_t trow = row_base + r, c0 = z0 + 16 * half;
            if (trow < tp.rows) {
                uint16_t *dst = p.z + (tp.row0 + trow) * p.k2 + c0;
                uint32_t wv[8];
#pragma unroll
                for (int e = 0; e < 8; e++)
                    wv[e] = pack_bf16(v[2 * e], v[2 * e + 1]);
                if (c0 < p.k2)
                    *reinterpret_cast<uint4 *>(dst) = make_uint4(wv[0], wv[1], wv[2], wv[3]);
                if (c0 + 8 < p.k2)
                    *reinterpret_cast<uint4 *>(dst + 8) = make_uint4(wv[4], wv[5], wv[6], wv[7]);
            }
            const int c = 16 * (w & 1) + lane / 2, r0 = 32 * (w / 2) + 16 * half;
#pragma unroll
            for (int i = 0; i < 16; i++)
                v[i] = zs[(r0 + i) * MX_LD + c];
            d_rht16(v);
#pragma unroll
            for (int i = 0; i < 16; i++)
                acol = fmaxf(acol, fabsf(v[i]));
#pragma unroll
            for (int d = 16; d; d >>= 1) {
                arow = fmaxf(arow, __shfl_xor_sync(0xFFFFFFFFu, arow, d));
                acol = fmaxf(acol, __shfl_xor_sync(0xFFFFFFFFu, acol, d));
            }
            if (lane == 0) { // non-negative floats order like their bits
                atomicMax(reinterpret_cast<int *>(p.zamax) + tp.g, __float_as_int(arow));
                atomicMax(reinterpret_cast<int *>(p.zamax) + p.G + tp.g, __float_as_int(acol));
            }
        } else {
            // every thread: half (16 values) of one row block and half of one column block; the two
            // halves of a block sit in lanes l and l ^ 1
            const int half = lane & 1;
            {
                const int r = tid / 2; // rowwise: row r, columns 16 half ..
                const float *src = zs + r * MX_LD + 16 * half;
                float v[16], amax = 0.0f;
#pragma unroll
                for (int c = 0; c < 16; c++) {
                    v[c] = src[c];
                    amax = fmaxf(amax, fabsf(v[c]));
                }
                amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 1));
                const uint8_t code = mxfp8_code(amax, fmax);
                const float mult = d_e8m0_quant(code), deq = d_e8m0_dequant(code);
                uint32_t wv[8];
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    const float2 f = d_fp8_round2(p.z_fp8, __fmul_rn(v[2 * e], mult),
                                                  __fmul_rn(v[2 * e + 1], mult));
                    wv[e] = pack_bf16(__fmul_rn(f.x, deq), __fmul_rn(f.y, deq));
                }
                const int64_t trow = row_base + r, c0 = z0 + 16 * half;
                if (trow < tp.rows) {
                    uint16_t *dst = p.z + (tp.row0 + trow) * p.k2 + c0;
                    if (c0 < p.k2)
                        *reinterpret_cast<uint4 *>(dst) = make_uint4(wv[0], wv[1], wv[2], wv[3]);
                    if (c0 + 8 < p.k2)
                        *reinterpret_cast<uint4 *>(dst + 8) =
                            make_uint4(wv[4], wv[5], wv[6], wv[7]);
                }
            }
            if (p.zc) { // columnwise: column c, rows 32 b + 16 half ..
                const int c = 16 * (w & 1) + lane / 2, b = w / 2, r0 = 32 * b + 16 * half;
                float v[16], amax = 0.0f;
#pragma unroll
                for (int r = 0; r < 16; r++) {
                    v[r] = zs[(r0 + r) * MX_LD + c];
                    amax = fmaxf(amax, fabsf(v[r]));
                }
                amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 1));
                const uint8_t code = mxfp8_code(amax, fmax);
                const float mult = d_e8m0_quant(code), deq = d_e8m0_dequant(code);
                if (z0 + c < p.k2) {
#pragma unroll
                    for (int r = 0; r < 16; r += 2) {
                        const float2 f =
                            d_fp8_round2(p.z_fp8, __fmul_rn(v[r], mult), __fmul_rn(v[r + 1], mult));
                        const int64_t trow = row_base + r0 + r;
                        uint16_t *dst = p.zc + (tp.row0 + trow) * p.k2 + z0 + c;
                        if (trow < tp.rows) dst[0] = f_to_bf16(__fmul_rn(f.x, deq));
                        if (trow + 1 < tp.rows) dst[p.k2] = f_to_bf16(__fmul_rn(f.y, deq));
                    }
                }
            }
        }
        asm volatile("bar.sync %0, 128;" ::"r"(2 + wg) : "memory"); // zs free for the next chunk
    }
}

#include "gemm_epilogue.inc"

// Variants (FT_WGMMA_EPI, bench only): 0 the first epilogues (fragment stores with per-column
// shuffles, the activation in accurate math; quantizing ones through 64 x 32 shared-memory
// chunks); 1 gemm_epilogue.inc's, after the main loop; 2 the same, the bf16 ones stored while the
// next tile's wgmma run (4 chunks for GLU); 3 as 2 with 8 GLU chunks (one fragment row each) and
// the MXFP8 GLU epilogue deferred too (4 chunks, z kept in fp32).
template <int KIND, int EPI, int V>
__global__ void __launch_bounds__(THREADS, 1)
    wg_gemm_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                   const wg_params p)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ uint8_t smem_raw[];
    __shared__ int64_t off[FT_CUDA_MAX_GROUPS + 1];
    __shared__ int64_t tiles[FT_CUDA_MAX_GROUPS + 1];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);

    sched_shape sh;
    sh.wgrad = KIND == FT_GEMM_WGRAD;
    sh.bm = BM;
    sh.n_tiles = p.n_tiles;
    sh.m_fixed = p.n;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 8);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    sched_build(p.splits, p.G, p.m, sh, off, tiles);
    const int64_t total = tiles[p.G];
    const int wg = threadIdx.x / 128;

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (threadIdx.x == 0) {
            uint32_t it = 0;
            for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
                tile_pos tp = decode<KIND>(p, off, tiles, t);
                int nk = n_ktiles<KIND>(p, tp);
                for (int kt = 0; kt < nk; kt++, it++) {
                    int s = it % STAGES;
                    if (it >= STAGES) mbar_wait(&empty[s], ((it / STAGES) - 1) & 1);
                    produce<KIND, EPI>(p, &ta, &tb, tp, kt, smem + s * STAGE_BYTES, &full[s]);
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        const int cw = wg - 1, tid = threadIdx.x % 128;
        constexpr int TA = KIND == FT_GEMM_WGRAD ? 1 : 0;
        constexpr int TB = KIND == FT_GEMM_FPROP ? 0 : 1;
        constexpr bool Q = (EPI & EPI_Q) != 0;
        constexpr int BASE = EPI & 3;
        constexpr bool MXG =
            (EPI & EPI_MX) != 0 && (BASE == EPI_GLU_SPLIT || BASE == EPI_GLU_INTERLEAVED);
        constexpr bool DEFER = (V == 2 && !Q) || (V == 3 && (!Q || MXG));
        constexpr bool RS = V == 3;
        constexpr int NCH = MXG ? 4 : epi_nch<BASE, RS>();
        float *red = reinterpret_cast<float *>(smem + STAGES * STAGE_BYTES) +
                     cw * (V == 0 ? 64 * MX_LD : MX_WG_FLOATS);
        uint32_t it = 0;
        float acc[128];
        epi_hold hold; // DEFER: the previous tile, stored during this one's main loop
        bool held = false;
        auto chunks = [&](int from, int to) {
            if constexpr (MXG)
                mx_chunks(p, hold, from, to, cw, tid, red);
            else
                epi_chunks<KIND, BASE, RS>(p, hold, from, to, cw, tid);
        };
        for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
            tile_pos tp = decode<KIND>(p, off, tiles, t);
            int nk = n_ktiles<KIND>(p, tp);
#pragma unroll
            for (int r = 0; r < 128; r++)
                acc[r] = 0.0f;
            for (int kt = 0; kt < nk; kt++, it++) {
                int s = it % STAGES;
                uint8_t *sa = smem + s * STAGE_BYTES, *sb = sa + A_BYTES;
                mbar_wait(&full[s], (it / STAGES) & 1);
                if (KIND == FT_GEMM_WGRAD) {
                    int valid = (int)(tp.rows - (int64_t)kt * BK);
                    if (valid < BK) {
                        zero_rows(sa + cw * (A_BYTES / 2), valid, tid);
                        zero_rows(sb + (2 * cw) * (B_BYTES / 4), valid, tid);
                        zero_rows(sb + (2 * cw + 1) * (B_BYTES / 4), valid, tid);
                        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                        asm volatile("bar.sync 1, 256;" ::: "memory");
                    }
                }
                wg_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 16; kk++) {
                    uint64_t da, db;
                    if (TA == 0)
                        da = sdesc(smem_u32(sa) + cw * 8192 + kk * 32, 16, 1024);
                    else
                        da = sdesc(smem_u32(sa) + cw * 8192 + kk * 2048, 8192, 1024);
                    if (TB == 0)
                        db = sdesc(smem_u32(sb) + kk * 32, 16, 1024);
                    else
                        db = sdesc(smem_u32(sb) + kk * 2048, 8192, 1024);
                    wgmma_256<TA, TB>(acc, da, db, 1);
                }
                wg_commit();
                // one chunk of the previous tile's stores while this batch runs
                if (DEFER && held && kt < NCH) chunks(kt, kt + 1);
                // keep one batch in flight: retire the previous stage's batch and release it
                if (kt > 0) {
                    wg_wait1();
                    if ((tid % 32) == 0) mbar_arrive(&empty[(it - 1) % STAGES]);
                }
            }
            if (DEFER && held && nk < NCH) chunks(nk, NCH);
            // unconditional: a wait_group inside a branch (WGRAD tiles of empty groups have no
            // k-blocks) makes ptxas serialise every wgmma of the kernel (C7518)
            wg_wait0();
            if (nk > 0 && (tid % 32) == 0) mbar_arrive(&empty[(it - 1) % STAGES]);
            if constexpr (V == 0) {
                if constexpr (Q)
                    epilogue_mx<EPI & 3, (EPI & EPI_NV) != 0>(p, tp, acc, cw, tid, red);
                else
                    epilogue<KIND, EPI>(p, tp, acc, cw, tid);
            } else if constexpr (MXG && DEFER) {
                mx_prep_any<BASE>(p, tp, acc, cw, tid, hold);
                held = true;
            } else if constexpr (Q) {
                epi_quant_any<BASE, (EPI & EPI_NV) != 0>(p, tp, acc, cw, tid, red);
            } else {
                epi_pack<KIND, EPI>(p, tp, acc, cw, tid, hold);
                if (DEFER)
                    held = true;
                else
                    chunks(0, NCH);
            }
        }
        if (DEFER && held) chunks(0, NCH);
        (void)red;
    }
#endif
}

// ---- host side ---------------------------------------------------------------------------

PFN_cuTensorMapEncodeTiled_v12000 encode_fn(ft_err *err)
{
    static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
    if (fn) return fn;
    void *ptr = nullptr;
    cudaDriverEntryPointQueryResult q;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000,
                                                     cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !ptr) {
        cu_fail(e != cudaSuccess ? e : cudaErrorSymbolNotFound, err,
                "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)");
        return nullptr;
    }
    fn = (PFN_cuTensorMapEncodeTiled_v12000)ptr;
    return fn;
}

// 2D bf16 tensor map: inner dimension `cols` (contiguous), `rows` rows, box box_c x box_r,
// 128-byte swizzle, zero fill out of bounds.
int make_map(CUtensorMap *m, const void *base, int64_t rows, int64_t cols, int box_c, int box_r,
             ft_err *err)
{
    PFN_cuTensorMapEncodeTiled_v12000 fn = encode_fn(err);
    if (!fn) return FT_ECUDA;
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    cuuint64_t strides[1] = {(cuuint64_t)cols * 2};
    cuuint32_t box[2] = {(cuuint32_t)box_c, (cuuint32_t)box_r};
    cuuint32_t estr[2] = {1, 1};
    CUresult r = fn(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(base), dims, strides,
                    box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return ft_err_set(err, FT_ECUDA, "cuTensorMapEncodeTiled failed (%d) for %lld x %lld",
                          (int)r, (long long)rows, (long long)cols);
    return FT_OK;
}

// FT_WGMMA_EPI=0|1|2|3 picks the epilogue variant (bench comparisons; default 3).
int epi_variant()
{
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("FT_WGMMA_EPI");
        v = (e && e[0] >= '0' && e[0] <= '3' && !e[1]) ? e[0] - '0' : 3;
    }
    return v;
}

// FT_WGMMA_RASTER=N (1..64, bench only) sets the m-tiles per raster band; default 8.
int raster_band()
{
    static int r = 0;
    if (!r) {
        const char *e = getenv("FT_WGMMA_RASTER");
        long v = e ? strtol(e, NULL, 10) : 0;
        r = (v >= 1 && v <= 64) ? (int)v : 8;
    }
    return r;
}

template <int KIND, int EPI, int V>
int launch_v(const CUtensorMap &ta, const CUtensorMap &tb, const wg_params &p, cudaStream_t st,
             ft_err *err)
{
    static int attr_done = 0;
    auto kern = wg_gemm_kernel<KIND, EPI, V>;
    constexpr int smem = SMEM_BYTES + ((EPI & EPI_Q) ? MX_RED_BYTES : 0);
    if (!attr_done) {
        int rc =
            cu_fail(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                    err, "cudaFuncSetAttribute(wg_gemm_kernel)");
        if (rc) return rc;
        attr_done = 1;
    }
    int dev = 0, n_sm = 0;
    int rc = cu_fail(cudaGetDevice(&dev), err, "cudaGetDevice");
    if (rc) return rc;
    rc = cu_fail(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev), err,
                 "cudaDeviceGetAttribute");
    if (rc) return rc;
    kern<<<n_sm, THREADS, smem, st>>>(ta, tb, p);
    return cu_launched(err, "wg_gemm_kernel");
}

template <int KIND, int EPI>
int launch(const CUtensorMap &ta, const CUtensorMap &tb, const wg_params &p, cudaStream_t st,
           ft_err *err)
{
    const int v = epi_variant();
    if (v == 0) return launch_v<KIND, EPI, 0>(ta, tb, p, st, err);
    if (v == 1) return launch_v<KIND, EPI, 1>(ta, tb, p, st, err);
    if (v == 2) return launch_v<KIND, EPI, 2>(ta, tb, p, st, err);
    return launch_v<KIND, EPI, 3>(ta, tb, p, st, err);
}

int epi_of(const ft_cuda_bf16_gemm *g)
{
    if (!g->act) return EPI_PLAIN;
    const int mx = g->z_mxfp8 ? EPI_MX : (g->z_nvfp4 ? EPI_NV : 0);
    if (!ft_act_is_glu(g->act->kind)) return EPI_UNARY | mx;
    return (g->act->interleave > 0 ? EPI_GLU_INTERLEAVED : EPI_GLU_SPLIT) | mx;
}

} // namespace

int ft_cuda_wgmma_supported(const ft_cuda_bf16_gemm *g, ft_err *err)
{
    if (g->n_groups < 1 || g->n_groups > FT_CUDA_MAX_GROUPS)
        return ft_err_set(err, FT_EUNSUPPORTED, "wgmma gemm: n_groups %u outside 1..%d",
                          g->n_groups, FT_CUDA_MAX_GROUPS);
    if (g->n % 8 || g->k % 8 || g->n <= 0 || g->k <= 0)
        return ft_err_set(err, FT_EUNSUPPORTED, "wgmma gemm: n=%lld k=%lld not multiples of 8",
                          (long long)g->n, (long long)g->k);
    uintptr_t ptrs =
        (uintptr_t)g->a | (uintptr_t)g->b | (uintptr_t)g->c | (uintptr_t)g->z | (uintptr_t)g->zc;
    if (ptrs & 15)
        return ft_err_set(err, FT_EUNSUPPORTED, "wgmma gemm: pointers not 16-byte aligned");
    if (g->m > INT32_MAX || (int64_t)g->n_groups * g->n > INT32_MAX)
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "wgmma gemm: tensor too large for 32-bit TMA "
                          "coordinates");
    if (g->act) {
        if (g->kind != FT_GEMM_FPROP)
            return ft_err_set(err, FT_EINVAL, "gemm: activation epilogue needs FPROP");
        if (g->act->interleave != 0 && g->act->interleave != 32)
            return ft_err_set(err, FT_EUNSUPPORTED, "wgmma gemm: GLU interleave %d (0 or 32)",
                              g->act->interleave);
        if (ft_act_is_glu(g->act->kind) && g->act->interleave && g->n % 64)
            return ft_err_set(err, FT_EUNSUPPORTED,
                              "wgmma gemm: interleaved GLU needs n %% 64 == 0 (n=%lld)",
                              (long long)g->n);
        if (ft_act_is_glu(g->act->kind) && (g->n % 16))
            return ft_err_set(err, FT_EUNSUPPORTED, "wgmma gemm: GLU needs n %% 16 == 0");
    }
    return FT_OK;
}

int ft_cuda_wgmma_gemm(const ft_cuda_bf16_gemm *g, cudaStream_t st, ft_err *err)
{
    int rc = ft_cuda_wgmma_supported(g, err);
    if (rc) return rc;
    wg_params p;
    p.G = (int)g->n_groups;
    p.m = g->m;
    p.n = g->n;
    p.k = g->k;
    p.splits = g->splits;
    p.c = g->c;
    p.bias = g->bias;
    p.bias_scale = g->bias_scale;
    p.act = act_from(g->act);
    p.probs = g->probs;
    p.z = g->z;
    p.k2 = 0;
    p.zc = g->z_mxfp8 ? g->zc : nullptr;
    p.z_fp8 = (int)g->z_fp8;
    p.raster = raster_band();
    const int epi = epi_of(g);
    CUtensorMap ta, tb;
    if (g->kind == FT_GEMM_FPROP) {
        p.out_cols = g->n;
        p.contract = g->k;
        const int base = epi & 3;
        p.zamax = g->z_nvfp4 ? g->z_amax : nullptr;
        if (base == EPI_GLU_SPLIT || base == EPI_GLU_INTERLEAVED) p.k2 = g->n / 2;
        if (base == EPI_UNARY) p.k2 = g->n;
        p.n_tiles = base == EPI_GLU_SPLIT ? (p.k2 + BN / 2 - 1) / (BN / 2) : (g->n + BN - 1) / BN;
        rc = make_map(&ta, g->a, g->m, g->k, 64, 128, err);
        if (!rc) rc = make_map(&tb, g->b, (int64_t)g->n_groups * g->n, g->k, 64, 128, err);
    } else if (g->kind == FT_GEMM_DGRAD) {
        p.out_cols = g->k;
        p.contract = g->n;
        p.n_tiles = (g->k + BN - 1) / BN;
        rc = make_map(&ta, g->a, g->m, g->n, 64, 128, err);
        if (!rc) rc = make_map(&tb, g->b, (int64_t)g->n_groups * g->n, g->k, 64, 64, err);
    } else {
        p.out_cols = g->k;
        p.contract = 0;
        p.n_tiles = (g->k + BN - 1) / BN;
        rc = make_map(&ta, g->a, g->m, g->n, 64, 64, err);
        if (!rc) rc = make_map(&tb, g->b, g->m, g->k, 64, 64, err);
    }
    if (rc) return rc;
    if (g->kind == FT_GEMM_FPROP) {
        switch (epi) {
        case EPI_PLAIN:
            return launch<FT_GEMM_FPROP, EPI_PLAIN>(ta, tb, p, st, err);
        case EPI_GLU_INTERLEAVED:
            return launch<FT_GEMM_FPROP, EPI_GLU_INTERLEAVED>(ta, tb, p, st, err);
        case EPI_GLU_SPLIT:
            return launch<FT_GEMM_FPROP, EPI_GLU_SPLIT>(ta, tb, p, st, err);
        case EPI_UNARY:
            return launch<FT_GEMM_FPROP, EPI_UNARY>(ta, tb, p, st, err);
        case EPI_GLU_INTERLEAVED | EPI_MX:
            return launch<FT_GEMM_FPROP, EPI_GLU_INTERLEAVED | EPI_MX>(ta, tb, p, st, err);
        case EPI_GLU_SPLIT | EPI_MX:
            return launch<FT_GEMM_FPROP, EPI_GLU_SPLIT | EPI_MX>(ta, tb, p, st, err);
        case EPI_UNARY | EPI_MX:
            return launch<FT_GEMM_FPROP, EPI_UNARY | EPI_MX>(ta, tb, p, st, err);
        case EPI_GLU_INTERLEAVED | EPI_NV:
            return launch<FT_GEMM_FPROP, EPI_GLU_INTERLEAVED | EPI_NV>(ta, tb, p, st, err);
        case EPI_GLU_SPLIT | EPI_NV:
            return launch<FT_GEMM_FPROP, EPI_GLU_SPLIT | EPI_NV>(ta, tb, p, st, err);
        default:
            return launch<FT_GEMM_FPROP, EPI_UNARY | EPI_NV>(ta, tb, p, st, err);
        }
    }
    if (g->kind == FT_GEMM_DGRAD) return launch<FT_GEMM_DGRAD, EPI_PLAIN>(ta, tb, p, st, err);
    return launch<FT_GEMM_WGRAD, EPI_PLAIN>(ta, tb, p, st, err);
}
