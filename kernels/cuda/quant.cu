// quant.cu - ft_cuda_quantize: the float32 fake-quantization contract of ft_kernels.h on the GPU
// (FP8 delayed/current/block, MXFP8, NVFP4 with columnwise RHT and stochastic rounding), value
// for value the CPU reference's results (kernels/cpu/quant.c; docs/fuser-model.md, "Quantization
// formats").
//
// Two passes where a per-group amax is needed (FP8 current, NVFP4): an amax kernel (atomicMax on
// the float's bits; NaN ignored, as in the reference) and the quantize kernel. One thread owns one
// scaling block (1D blocks along a row or down a column, or a 2D tile), so the amax and the
// rounding of a block never cross threads. Columnwise and 2D blocks restart at each group's
// first row. Row offsets and per-group block counts are computed on the device from the splits.
// Limits: the 2D path gives one thread a whole tile (slow for 128x128 FP8 block tiles; fine for
// weights in numerics replay).
#include "quant_dev.cuh"

namespace
{

// Per-group amax of the source (RHT'd 16-row chunks when rht). Thread: 64 columns of one row, or
// (rht) one 16-row chunk of one column.
__global__ void q_amax_kernel(qdev q, const float *x, int64_t cols, const int64_t *offs,
                              const int64_t *rb, int G, uint32_t *amax_bits)
{
    const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    if (q.rht) {
        const int64_t n = rb[G] * cols;
        for (int64_t i = tid; i < n; i += stride) {
            const int64_t blk = i / cols, c = i % cols;
            const int g = group_of(rb, G, blk);
            const int64_t r0 = offs[g] + (blk - rb[g]) * 16;
            float v[16];
#pragma unroll
            for (int j = 0; j < 16; j++)
                v[j] = x[(r0 + j) * cols + c];
            d_rht16(v);
            float m = 0.0f;
#pragma unroll
            for (int j = 0; j < 16; j++)
                m = amax_merge(m, fabsf(v[j]));
            atomicMax(&amax_bits[g], __float_as_uint(m));
        }
        return;
    }
    const int64_t chunks = (cols + 63) / 64, n = offs[G] * chunks;
    for (int64_t i = tid; i < n; i += stride) {
        const int64_t r = i / chunks, c0 = (i % chunks) * 64;
        const int64_t ce = c0 + 64 < cols ? c0 + 64 : cols;
        float m = 0.0f;
        for (int64_t c = c0; c < ce; c++)
            m = amax_merge(m, fabsf(x[r * cols + c]));
        atomicMax(&amax_bits[group_of(offs, G, r)], __float_as_uint(m));
    }
}

// Quantize: one thread per scaling unit (see file comment).
__global__ void q_kernel(qdev q, const float *x, float *out, int64_t rows, int64_t cols,
                         const int64_t *offs, const int64_t *rb, int G, const uint32_t *amax_bits)
{
    const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t used = offs[G];
    // padding rows are copied
    for (int64_t i = used * cols + tid; i < rows * cols; i += stride)
        out[i] = x[i];
    if (q.fmt < 0) return; // done by a specialised kernel
    if (q.fmt == FT_QF_NONE) {
        for (int64_t i = tid; i < used * cols; i += stride)
            out[i] = x[i];
        return;
    }
    const int bs = q.bs;
    if (bs == 0 || (!q.columnwise && !q.two_d)) {
        // per-tensor, or rowwise 1D blocks of bs (per-tensor: chunks of 64)
        const int64_t side = bs ? bs : 64;
        const int64_t chunks = (cols + side - 1) / side, n = used * chunks;
        for (int64_t i = tid; i < n; i += stride) {
            const int64_t r = i / chunks, c0 = (i % chunks) * side;
            const int64_t ce = c0 + side < cols ? c0 + side : cols;
            const int g = group_of(offs, G, r);
            const float gamax = amax_bits ? __uint_as_float(amax_bits[g]) : 0.0f;
            float am = 0.0f;
            if (bs)
                for (int64_t c = c0; c < ce; c++)
                    am = amax_merge(am, fabsf(x[r * cols + c]));
            float mult, deq;
            block_params(q, bs ? am : gamax, gamax, &mult, &deq);
            for (int64_t c = c0; c < ce; c++)
                out[r * cols + c] =
                    quant_one(q, x[r * cols + c], mult, deq, (uint64_t)(r * cols + c));
        }
        return;
    }
    if (!q.two_d) {
        // columnwise 1D: bs consecutive rows of one column within a group
        const int64_t n = rb[G] * cols;
        for (int64_t i = tid; i < n; i += stride) {
            const int64_t blk = i / cols, c = i % cols;
            const int g = group_of(rb, G, blk);
            const int64_t r0 = offs[g] + (blk - rb[g]) * bs;
            const int64_t re = r0 + bs < offs[g + 1] ? r0 + bs : offs[g + 1];
            const float gamax = amax_bits ? __uint_as_float(amax_bits[g]) : 0.0f;
            if (q.rht) { // bs == 16, full chunk (group sizes are multiples of 16)
                float v[16];
#pragma unroll
                for (int j = 0; j < 16; j++)
                    v[j] = x[(r0 + j) * cols + c];
                d_rht16(v);
                float am = 0.0f;
#pragma unroll
                for (int j = 0; j < 16; j++)
                    am = amax_merge(am, fabsf(v[j]));
                float mult, deq;
                block_params(q, am, gamax, &mult, &deq);
#pragma unroll
                for (int j = 0; j < 16; j++)
                    out[(r0 + j) * cols + c] =
                        quant_one(q, v[j], mult, deq, (uint64_t)((r0 + j) * cols + c));
                continue;
            }
            float am = 0.0f;
            for (int64_t r = r0; r < re; r++)
                am = amax_merge(am, fabsf(x[r * cols + c]));
            float mult, deq;
            block_params(q, am, gamax, &mult, &deq);
            for (int64_t r = r0; r < re; r++)
                out[r * cols + c] =
                    quant_one(q, x[r * cols + c], mult, deq, (uint64_t)(r * cols + c));
        }
        return;
    }
    // 2D tiles of bs x bs within a group
    const int64_t ct = (cols + bs - 1) / bs, n = rb[G] * ct;
    for (int64_t i = tid; i < n; i += stride) {
        const int64_t blk = i / ct, c0 = (i % ct) * bs;
        const int64_t ce = c0 + bs < cols ? c0 + bs : cols;
        const int g = group_of(rb, G, blk);
        const int64_t r0 = offs[g] + (blk - rb[g]) * bs;
        const int64_t re = r0 + bs < offs[g + 1] ? r0 + bs : offs[g + 1];
        const float gamax = amax_bits ? __uint_as_float(amax_bits[g]) : 0.0f;
        float am = 0.0f;
        for (int64_t r = r0; r < re; r++)
            for (int64_t c = c0; c < ce; c++)
                am = amax_merge(am, fabsf(x[r * cols + c]));
        float mult, deq;
        block_params(q, am, gamax, &mult, &deq);
        for (int64_t r = r0; r < re; r++)
            for (int64_t c = c0; c < ce; c++)
                out[r * cols + c] =
                    quant_one(q, x[r * cols + c], mult, deq, (uint64_t)(r * cols + c));
    }
}

// ---- vectorised paths (cols % 4 == 0, 16-byte aligned): a warp owns 128 columns of a row, each
// lane 4 consecutive values; a block of bs columns is a group of bs/4 lanes --------------------

// Per-group amax: grid-stride over (row, 128-column chunk) per warp; one atomic per warp and
// group change.
__global__ void q_amax_rows_kernel(const float *x, int64_t cols, const int64_t *offs, int G,
                                   uint32_t *amax_bits)
{
    const int lane = threadIdx.x % 32;
    const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    const int64_t n_warps = (int64_t)gridDim.x * blockDim.x / 32;
    const int64_t chunks = (cols + 127) / 128, n = offs[G] * chunks;
    float m = 0.0f;
    int held = -1;
    for (int64_t i = warp; i < n; i += n_warps) {
        const int64_t r = i / chunks, c = (i % chunks) * 128 + 4 * lane;
        const int g = G == 1 ? 0 : group_of(offs, G, r);
        if (g != held) {
            if (held >= 0) {
                for (int d = 16; d; d >>= 1)
                    m = amax_merge(m, __shfl_xor_sync(0xffffffffu, m, d));
                if (lane == 0) atomicMax(&amax_bits[held], __float_as_uint(m));
            }
            held = g;
            m = 0.0f;
        }
        if (c < cols) {
            float4 v = *reinterpret_cast<const float4 *>(x + r * cols + c);
            m = amax_merge(m, fabsf(v.x));
            m = amax_merge(m, fabsf(v.y));
            m = amax_merge(m, fabsf(v.z));
            m = amax_merge(m, fabsf(v.w));
        }
    }
    if (held >= 0) {
        for (int d = 16; d; d >>= 1)
            m = amax_merge(m, __shfl_xor_sync(0xffffffffu, m, d));
        if (lane == 0) atomicMax(&amax_bits[held], __float_as_uint(m));
    }
}

// Rowwise 1D blocks (bs 16, 32, 128) or per-tensor scaling (bs 0).
__global__ void q_rows_kernel(qdev q, const float *x, float *out, int64_t cols, const int64_t *offs,
                              int G, const uint32_t *amax_bits)
{
    const int lane = threadIdx.x % 32;
    const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    const int64_t n_warps = (int64_t)gridDim.x * blockDim.x / 32;
    const int64_t chunks = (cols + 127) / 128, n = offs[G] * chunks;
    const int lanes_per_block = q.bs ? q.bs / 4 : 32;
    for (int64_t i = warp; i < n; i += n_warps) {
        const int64_t r = i / chunks, c = (i % chunks) * 128 + 4 * lane;
        const int g = G == 1 ? 0 : group_of(offs, G, r);
        const float gamax = amax_bits ? __uint_as_float(amax_bits[g]) : 0.0f;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        const bool in = c < cols;
        if (in) v = *reinterpret_cast<const float4 *>(x + r * cols + c);
        float am = 0.0f;
        if (q.bs) {
            am = amax_merge(amax_merge(fabsf(v.x), fabsf(v.y)), amax_merge(fabsf(v.z), fabsf(v.w)));
            for (int d = 1; d < lanes_per_block; d <<= 1)
                am = amax_merge(am, __shfl_xor_sync(0xffffffffu, am, d));
        }
        float mult, deq;
        block_params(q, q.bs ? am : gamax, gamax, &mult, &deq);
        if (in) {
            const uint64_t ctr = (uint64_t)(r * cols + c);
            float4 o;
            o.x = quant_one(q, v.x, mult, deq, ctr);
            o.y = quant_one(q, v.y, mult, deq, ctr + 1);
            o.z = quant_one(q, v.z, mult, deq, ctr + 2);
            o.w = quant_one(q, v.w, mult, deq, ctr + 3);
            *reinterpret_cast<float4 *>(out + r * cols + c) = o;
        }
    }
}

// Columnwise 1D blocks of BS rows (16 or 32): the block is read once into registers.
template <int BS>
__global__ void q_cols_kernel(qdev q, const float *x, float *out, int64_t cols, const int64_t *offs,
                              const int64_t *rb, int G, const uint32_t *amax_bits)
{
    const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t n = rb[G] * cols;
    for (int64_t i = tid; i < n; i += stride) {
        const int64_t blk = i / cols, c = i % cols;
        const int g = group_of(rb, G, blk);
        const int64_t r0 = offs[g] + (blk - rb[g]) * BS;
        const int64_t nr = offs[g + 1] - r0 < BS ? offs[g + 1] - r0 : BS;
        const float gamax = amax_bits ? __uint_as_float(amax_bits[g]) : 0.0f;
        float v[BS];
#pragma unroll
        for (int j = 0; j < BS; j++)
            v[j] = j < nr ? x[(r0 + j) * cols + c] : 0.0f;
        if (BS == 16 && q.rht) { // full chunks: RHT group sizes are multiples of 16
            float t[16];
#pragma unroll
            for (int j = 0; j < 16; j++)
                t[j] = v[j % BS];
            d_rht16(t);
#pragma unroll
            for (int j = 0; j < 16; j++)
                v[j % BS] = t[j];
        }
        float am = 0.0f;
#pragma unroll
        for (int j = 0; j < BS; j++)
            am = amax_merge(am, fabsf(v[j]));
        float mult, deq;
        block_params(q, am, gamax, &mult, &deq);
#pragma unroll
        for (int j = 0; j < BS; j++)
            if (j < nr)
                out[(r0 + j) * cols + c] =
                    quant_one(q, v[j], mult, deq, (uint64_t)((r0 + j) * cols + c));
    }
}

} // namespace

// The factor per group that ft_cuda_quantize_gs reports (see ft_cuda_int.cuh).
__global__ void q_gscale_kernel(qdev q, int G, const uint32_t *amax_bits, float *gs)
{
    for (int g = threadIdx.x; g < G; g += blockDim.x) {
        float s = 1.0f;
        if (q.fmt == FT_QF_NVFP4) {
            s = __fmul_rn(__uint_as_float(amax_bits[g]),
                          __fdiv_rn(1.0f, FT_E4M3_MAX * FT_E2M1_MAX));
        } else if (q.fmt == FT_QF_FP8_CURRENT) {
            s = __fdiv_rn(
                1.0f, fp8_scale_from_amax(__uint_as_float(amax_bits[g]), q.fmax, q.pow2, q.eps));
        } else if (q.fmt == FT_QF_FP8_DELAYED) {
            s = __fdiv_rn(1.0f, q.scale);
        }
        gs[g] = (s > 0.0f && s <= FLT_MAX) ? s : 1.0f;
    }
}

extern "C" int ft_cuda_quantize(const ft_qcfg *q, const float *x, int64_t rows, int64_t cols,
                                const int64_t *splits, uint32_t n_groups, float *out, void *stream,
                                ft_err *err)
{
    return ft_cuda_quantize_gs(q, x, rows, cols, splits, n_groups, out, NULL, (cudaStream_t)stream,
                               err);
}

int ft_cuda_quantize_gs(const ft_qcfg *q, const float *x, int64_t rows, int64_t cols,
                        const int64_t *splits, uint32_t n_groups, float *out, float *gscale,
                        cudaStream_t st, ft_err *err)
{
    if (!q || (unsigned)q->fmt >= FT_QF_COUNT)
        return ft_err_set(err, FT_EINVAL, "cuda quantize: unknown format");
    if (q->fp8 != FT_FP8_E4M3 && q->fp8 != FT_FP8_E5M2)
        return ft_err_set(err, FT_EINVAL, "cuda quantize: unknown fp8 type %d", (int)q->fp8);
    if (q->rht && !(q->fmt == FT_QF_NVFP4 && q->columnwise && !q->two_d))
        return ft_err_set(err, FT_EINVAL, "cuda quantize: RHT applies to NVFP4 columnwise 1D only");
    if (q->sr && q->fmt != FT_QF_NVFP4)
        return ft_err_set(err, FT_EINVAL, "cuda quantize: stochastic rounding is NVFP4 only");
    if (q->two_d && ft_qfmt_block(q->fmt) == 0)
        return ft_err_set(err, FT_EINVAL, "cuda quantize: 2D tiles need mxfp8, nvfp4 or fp8-block");
    if (q->fmt == FT_QF_FP8_DELAYED && !(q->scale > 0.0f && q->scale <= FLT_MAX))
        return ft_err_set(err, FT_EINVAL,
                          "cuda quantize: fp8-delayed scale %g is not positive "
                          "finite",
                          (double)q->scale);
    if (rows < 0 || cols < 0)
        return ft_err_set(err, FT_EINVAL, "cuda quantize: bad shape %lld x %lld", (long long)rows,
                          (long long)cols);
    if (splits && (n_groups == 0 || n_groups > FT_CUDA_MAX_GROUPS))
        return ft_err_set(err, FT_EINVAL, "cuda quantize: n_groups %u outside 1..%d", n_groups,
                          FT_CUDA_MAX_GROUPS);
    const int G = splits ? (int)n_groups : 1;
    if (rows == 0 || cols == 0) return FT_OK; // gscale untouched: no value uses it
    qdev d;
    d.fmt = q->fmt;
    d.fp8 = q->fp8;
    d.columnwise = q->columnwise;
    d.two_d = q->two_d;
    d.rht = q->rht;
    d.sr = q->sr;
    d.pow2 = q->pow2_scales;
    d.eps = q->amax_epsilon;
    d.scale = q->scale;
    d.fmax =
        q->fmt == FT_QF_NVFP4 ? FT_E2M1_MAX : (q->fp8 == FT_FP8_E5M2 ? FT_E5M2_MAX : FT_E4M3_MAX);
    d.seed = q->seed;
    d.stream = q->stream * 2u + (q->columnwise ? 1u : 0u);
    d.bs = ft_qfmt_block(q->fmt);
    // RHT chunks are 16 rows; 2D and columnwise blocks are bs rows.
    const int rb_side = (q->columnwise || q->two_d) ? d.bs : 0;
    const int need_amax = q->fmt == FT_QF_NVFP4 || q->fmt == FT_QF_FP8_CURRENT;
    int64_t *ws = NULL;
    size_t ws_bytes = 2 * (size_t)(G + 1) * sizeof(int64_t) + (size_t)G * sizeof(uint32_t);
    int rc = cu_fail(cudaMallocAsync((void **)&ws, ws_bytes, st), err, "cudaMallocAsync");
    if (rc) return rc;
    int64_t *offs = ws, *rb = ws + (G + 1);
    uint32_t *amax_bits = (uint32_t *)(ws + 2 * (G + 1));
    q_offsets_kernel<<<1, 1, 0, st>>>(splits, G, rows, rb_side, offs, rb);
    rc = cu_launched(err, "q_offsets_kernel");
    const int vec = cols % 4 == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)out & 15) == 0;
    int dev = 0, n_sm = 132;
    if (!rc) rc = cu_fail(cudaGetDevice(&dev), err, "cudaGetDevice");
    if (!rc)
        rc = cu_fail(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev), err,
                     "cudaDeviceGetAttribute");
    const unsigned persistent = (unsigned)n_sm * 8;
    if (!rc && need_amax) {
        rc = cu_fail(cudaMemsetAsync(amax_bits, 0, (size_t)G * sizeof(uint32_t), st), err,
                     "cudaMemsetAsync");
        if (!rc && vec && !q->rht) {
            q_amax_rows_kernel<<<persistent, 256, 0, st>>>(x, cols, offs, G, amax_bits);
            rc = cu_launched(err, "q_amax_rows_kernel");
        } else if (!rc) {
            q_amax_kernel<<<cu_blocks(rows * cols / 16 + 1, 256), 256, 0, st>>>(d, x, cols, offs,
                                                                                rb, G, amax_bits);
            rc = cu_launched(err, "q_amax_kernel");
        }
    }
    const uint32_t *ab = need_amax ? amax_bits : NULL;
    if (!rc && gscale) {
        q_gscale_kernel<<<1, 256, 0, st>>>(d, G, ab, gscale);
        rc = cu_launched(err, "q_gscale_kernel");
    }
    const int rowwise = d.fmt != FT_QF_NONE && !q->two_d && (d.bs == 0 || !q->columnwise);
    const int colwise = d.fmt != FT_QF_NONE && !q->two_d && q->columnwise && d.bs > 0 && d.bs <= 32;
    if (!rc && vec && rowwise) {
        q_rows_kernel<<<persistent, 256, 0, st>>>(d, x, out, cols, offs, G, ab);
        rc = cu_launched(err, "q_rows_kernel");
    } else if (!rc && colwise) {
        if (d.bs == 16)
            q_cols_kernel<16><<<persistent, 256, 0, st>>>(d, x, out, cols, offs, rb, G, ab);
        else
            q_cols_kernel<32><<<persistent, 256, 0, st>>>(d, x, out, cols, offs, rb, G, ab);
        rc = cu_launched(err, "q_cols_kernel");
    }
    if (!rc) {
        // everything else, and the copy of the padding rows in every case
        qdev rest = d;
        if ((vec && rowwise) || colwise) rest.fmt = -1; // padding copy only
        const unsigned blocks = rest.fmt < 0 ? persistent : cu_blocks(rows * cols / 8 + 1, 256);
        q_kernel<<<blocks, 256, 0, st>>>(rest, x, out, rows, cols, offs, rb, G, ab);
        rc = cu_launched(err, "q_kernel");
    }
    int rc2 = cu_fail(cudaFreeAsync(ws, st), err, "cudaFreeAsync");
    return rc ? rc : rc2;
}
