// gemm_wgmma.cu - persistent grouped bf16 GEMM for sm_90a: TMA loads into 128-byte-swizzled
// shared memory, wgmma with fp32 accumulators, one producer warpgroup and two consumer
// warpgroups, fused epilogues (bias, bias x probs, FC1 activation x probs).
//
// Design. A CTA owns one SM (grid = SM count) and walks the tile list tile = blockIdx.x +
// i * gridDim.x; the list (group, m-tile, n-tile) is built on the device from the splits
// (sched.cuh). Tile 128 x 256 x 64, 4 stages of 48 KB. Warpgroup 0 issues the TMA copies (one
// thread) and waits on per-stage "empty" barriers; warpgroups 1 and 2 each own 64 rows of the
// tile, wait on "full" barriers, run 4 wgmma m64n256k16 per stage, retire them, release the
// stage. Epilogues (gemm_epilogue.inc) work on the fragment in registers: the bf16 ones pack
// the tile into bf16 pairs and store it during the next tile's first k-blocks, between wgmma
// batches, so the tensor cores do not wait for the stores and the activation math (measured on
// the H200: DeepSeek-V3 forward 0.91-0.96x torch before, 1.05-1.08x after); the quantizing ones
// (MXFP8 on store, NVFP4 amaxes) reduce their block maxima with shuffles right after the tile.
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

namespace
{

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4;
constexpr int A_BYTES = BM * BK * 2;
constexpr int B_BYTES = BN * BK * 2;
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;
constexpr int THREADS = 384;
constexpr int RASTER = 8; // m-tiles per raster band (16 measured no better on the H200)

enum { EPI_PLAIN = 0, EPI_GLU_INTERLEAVED, EPI_GLU_SPLIT, EPI_UNARY };
// Flag on the three activation epilogues: the fused MXFP8 FC1 epilogue (quantize z on store).
constexpr int EPI_MX = 4;
// Flag: the fused NVFP4 FC1 epilogue (bf16 z from the fp32 accumulator, per-group amaxes on store).
constexpr int EPI_NV = 8;
constexpr int EPI_Q = EPI_MX | EPI_NV;
// shared memory of the MXFP8 epilogue's column maxima, per consumer warpgroup (floats; layout at
// gemm_epilogue.inc epi_quant, for the unary activation's 64 z columns per thread)
constexpr int MX_WG_FLOATS = 16 * (64 + 4) + 8 * (2 * 64 + 4);
constexpr int MX_RED_BYTES = 2 * MX_WG_FLOATS * 4;

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
    // Bands of RASTER m-tiles, walked n-tile by n-tile: the CTAs working at the same time share
    // a few A panels and a few B panels, so both stay in L2 (nt-fastest order re-read all of
    // W_g from memory for every m-tile).
    const int n_tiles = (int)p.n_tiles;
    const int m_tiles =
        (int)(KIND == FT_GEMM_WGRAD ? (p.n + BM - 1) / BM : (tp.rows + BM - 1) / BM);
    const int R = RASTER;
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

#include "gemm_epilogue.inc"

template <int KIND, int EPI>
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
        // the bf16 epilogues are stored while the next tile's main loop runs (DEFER); the
        // quantizing ones right after their own main loop
        constexpr bool DEFER = !Q;
        constexpr int NCH = epi_nch<BASE>();
        float *red = reinterpret_cast<float *>(smem + STAGES * STAGE_BYTES) + cw * MX_WG_FLOATS;
        uint32_t it = 0;
        float acc[128];
        epi_hold hold; // DEFER: the previous tile, stored during this one's main loop
        bool held = false;
        auto chunks = [&](int from, int to) { epi_chunks<KIND, BASE>(p, hold, from, to, cw, tid); };
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
            if constexpr (Q) {
                epi_quant_any<BASE, (EPI & EPI_NV) != 0>(p, tp, acc, cw, tid, red);
            } else {
                epi_pack<KIND, EPI>(p, tp, acc, cw, tid, hold);
                held = true;
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

template <int KIND, int EPI>
int launch(const CUtensorMap &ta, const CUtensorMap &tb, const wg_params &p, cudaStream_t st,
           ft_err *err)
{
    static int attr_done = 0;
    auto kern = wg_gemm_kernel<KIND, EPI>;
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
