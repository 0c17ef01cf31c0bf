// quant_dev.cuh - the device side of quantization: the scalar formats and scale rules of
// kernels/formats_int.h (one copy for both back ends, so results are bit-exact to the CPU
// reference) under the d_* names the kernels use, the per-block dispatch of the quantizer config
// (block_params, as kernels/cpu/quant.c's) and the group offsets. Shared by the quantization
// kernels (quant.cu, quant_packed.cu) and the GEMM epilogue that quantizes on store
// (gemm_wgmma.cu). Private to kernels/cuda.
#ifndef FT_QUANT_DEV_CUH
#define FT_QUANT_DEV_CUH

#include "formats_int.h"
#include "ft_cuda_int.cuh"

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <float.h>

namespace
{

struct qdev {
    int fmt, fp8, columnwise, two_d, rht, sr, pow2;
    float eps, scale, fmax;
    uint64_t seed, stream;
    int bs; // block side (0: per tensor)
};

// ---- scalar formats: the shared arithmetic of kernels/formats_int.h, under the device names the
// kernels use -------------------------------------------------------------------------------

__device__ __forceinline__ float d_bf16r(float x)
{
    return bf16_round(x);
}

__device__ __forceinline__ float d_fp8_round(int fp8, float x)
{
    return fp8_round(fp8, x);
}

// d_fp8_round of two values with the sm_89+ conversion instructions (cvt.rn.satfinite to
// E4M3/E5M2 pairs and back through f16, which holds every FP8 value): the same RNE, +-max on
// overflow and infinity, NaN kept. Short code for unrolled epilogues.
__device__ __forceinline__ float2 d_fp8_round2(int fp8, float a, float b)
{
    const __nv_fp8_interpretation_t k = fp8 == FT_FP8_E5M2 ? __NV_E5M2 : __NV_E4M3;
    const __nv_fp8x2_storage_t c = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, k);
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(c, k);
    return __half22float2(*reinterpret_cast<const __half2 *>(&h));
}

__device__ __forceinline__ float d_e2m1_round(float x)
{
    return e2m1_round(x);
}

__device__ __forceinline__ float d_e2m1_round_sr(float x, uint32_t rbits)
{
    return e2m1_round_sr(x, rbits);
}

__device__ __forceinline__ uint8_t d_e8m0_from_float(float v)
{
    return e8m0_from_float(v);
}

__device__ __forceinline__ float d_e8m0_dequant(uint8_t code)
{
    return e8m0_dequant(code);
}

__device__ __forceinline__ float d_e8m0_quant(uint8_t code)
{
    return e8m0_quant(code);
}

__device__ __forceinline__ uint32_t d_rng_at(uint64_t key, uint64_t counter)
{
    return rng_at(key, counter);
}

__device__ __forceinline__ uint32_t d_rng_bits(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return rng_bits(seed, stream, counter);
}

__device__ __forceinline__ void d_rht16(float (&v)[16])
{
    rht16(v);
}

// max(m, a) ignoring a NaN a, as the reference's max_abs (a > m ? a : m) does; so an amax is
// never NaN and its float bits order like the values (atomicMax on the bits).
__device__ __forceinline__ float amax_merge(float m, float a)
{
    return fmaxf(m, a);
}

// Block multiplier and dequantization factor (quant.c block_params). gamax: the group's amax.
__device__ __forceinline__ void block_params(const qdev &q, float amax, float gamax, float *mult,
                                             float *deq)
{
    if (q.fmt == FT_QF_MXFP8) {
        uint8_t code = mxfp8_code(amax, q.fmax);
        *mult = d_e8m0_quant(code);
        *deq = d_e8m0_dequant(code);
    } else if (q.fmt == FT_QF_NVFP4) {
        float S = nvfp4_global_scale(gamax);
        float d = nvfp4_block_scale(amax, S);
        *mult = nvfp4_block_mult(d, __fdiv_rn(1.0f, S));
        *deq = nvfp4_dequant(d, gamax);
    } else if (q.fmt == FT_QF_FP8_BLOCK) {
        float s = fp8_scale_from_amax(amax, q.fmax, q.pow2, q.eps);
        *mult = s;
        *deq = __fdiv_rn(1.0f, s);
    } else {
        float s = q.fmt == FT_QF_FP8_CURRENT ? fp8_scale_from_amax(gamax, q.fmax, q.pow2, q.eps)
                                             : q.scale;
        *mult = s;
        *deq = __fdiv_rn(1.0f, s);
    }
}

__device__ __forceinline__ float quant_one(const qdev &q, float x, float mult, float deq,
                                           uint64_t counter)
{
    float v = __fmul_rn(x, mult);
    float r;
    if (q.fmt == FT_QF_NVFP4)
        r = q.sr ? d_e2m1_round_sr(v, d_rng_bits(q.seed, q.stream, counter)) : d_e2m1_round(v);
    else
        r = d_fp8_round(q.fp8, v);
    return __fmul_rn(r, deq);
}

// offs[0..G] row offsets, rb[0..G] prefix of row blocks (side bs) per group.
__global__ void q_offsets_kernel(const int64_t *splits, int G, int64_t rows, int bs, int64_t *offs,
                                 int64_t *rb)
{
    if (blockIdx.x || threadIdx.x) return;
    int64_t o = 0, b = 0;
    for (int g = 0; g < G; g++) {
        offs[g] = o;
        rb[g] = b;
        int64_t s = splits ? splits[g] : rows;
        if (s < 0) s = 0;
        if (o + s > rows) s = rows - o;
        o += s;
        b += bs > 0 ? (s + bs - 1) / bs : 0;
    }
    offs[G] = o;
    rb[G] = b;
}

__device__ __forceinline__ int group_of(const int64_t *offs, int G, int64_t r)
{
    return last_le(offs, G, r);
}

} // namespace

#endif
