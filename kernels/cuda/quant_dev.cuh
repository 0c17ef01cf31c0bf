// quant_dev.cuh - device versions of the scalar number formats and the scaling-block rules of
// kernels/cpu/formats_int.h and kernels/cpu/quant.c (same float operations in the same order, so
// results are bit-exact to the CPU reference). Shared by the quantization kernels (quant.cu,
// quant_packed.cu) and the GEMM epilogue that quantizes on store (gemm_wgmma.cu). Private to
// kernels/cuda.
#ifndef FT_QUANT_DEV_CUH
#define FT_QUANT_DEV_CUH

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

// ---- scalar formats (device mirrors of kernels/cpu/formats_int.h) -------------------------

__device__ __forceinline__ float d_bf16r(float x)
{
    return __bfloat162float(__float2bfloat16_rn(x));
}

__device__ __forceinline__ float rne_mant(float a, int shift, float min_normal, float magic)
{
    if (a < min_normal) return __fsub_rn(__fadd_rn(a, magic), magic);
    uint32_t u = __float_as_uint(a);
    u += ((1u << (shift - 1)) - 1u) + ((u >> shift) & 1u);
    return __uint_as_float(u & ~((1u << shift) - 1u));
}

__device__ __forceinline__ float d_fp8_round(int fp8, float x)
{
    float a = fabsf(x);
    if (fp8 == FT_FP8_E5M2) {
        if (!(a < FT_E5M2_MAX)) return isnan(x) ? x : copysignf(FT_E5M2_MAX, x);
        return copysignf(rne_mant(a, 21, 0x1p-14f, 0x1p7f), x);
    }
    if (!(a < FT_E4M3_MAX)) return isnan(x) ? x : copysignf(FT_E4M3_MAX, x);
    return copysignf(rne_mant(a, 20, 0x1p-6f, 0x1p14f), x);
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
    float a = fabsf(x), q;
    if (!(a < FT_E2M1_MAX)) return isnan(x) ? x : copysignf(FT_E2M1_MAX, x);
    if (a < 2.0f)
        q = __fmul_rn(__fsub_rn(__fadd_rn(__fmul_rn(a, 2.0f), 0x1p23f), 0x1p23f), 0.5f);
    else if (a < 4.0f)
        q = __fsub_rn(__fadd_rn(a, 0x1p23f), 0x1p23f);
    else
        q = a <= 5.0f ? 4.0f : 6.0f;
    return copysignf(q, x);
}

__device__ __forceinline__ float d_e2m1_round_sr(float x, uint32_t rbits)
{
    float a = fabsf(x), lo, step;
    if (!(a < FT_E2M1_MAX)) return isnan(x) ? x : copysignf(FT_E2M1_MAX, x);
    if (a < 2.0f) {
        step = 0.5f;
        lo = (float)(int)(a * 2.0f) * 0.5f;
    } else if (a < 4.0f) {
        step = 1.0f;
        lo = (float)(int)a;
    } else {
        step = 2.0f;
        lo = 4.0f;
    }
    float u = __fmul_rn((float)(rbits >> 8), 0x1p-24f);
    float q = (__fmul_rn(u, step) < __fsub_rn(a, lo)) ? lo + step : lo;
    return copysignf(q, x);
}

__device__ __forceinline__ uint8_t d_e8m0_from_float(float v)
{
    if (isnan(v)) return 0xFF;
    if (isinf(v)) return 0xFE;
    if (v == 0.0f) return 0;
    uint32_t u = __float_as_uint(v);
    uint32_t exponent = (u >> 23) & 0xFFu;
    uint32_t mantissa = u & 0x7FFFFFu;
    if ((mantissa > 0 && exponent != 0xFE) && !(exponent == 0 && mantissa <= 0x400000u)) ++exponent;
    return (uint8_t)exponent;
}

__device__ __forceinline__ float d_e8m0_dequant(uint8_t code)
{
    if (code == 0xFF) return __uint_as_float(0x7FC00000u);
    if (code == 0) return __uint_as_float(0x00400000u);
    return __uint_as_float((uint32_t)code << 23);
}

__device__ __forceinline__ float d_e8m0_quant(uint8_t code)
{
    if (code == 0xFF) return __uint_as_float(0x7FC00000u);
    if (code == 0xFE) return __uint_as_float(0x00400000u);
    return __uint_as_float((uint32_t)(254 - code) << 23);
}

__device__ __forceinline__ uint64_t d_hash_mix(uint64_t h, uint64_t v)
{
    uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

// key = mix(seed, stream) once per tensor usage, then one splitmix64 step per counter
// (formats_int.h rng_key / rng_at).
__device__ __forceinline__ uint32_t d_rng_at(uint64_t key, uint64_t counter)
{
    uint64_t z = key + (counter + 1u) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

__device__ __forceinline__ uint32_t d_rng_bits(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return d_rng_at(d_hash_mix(seed, stream), counter);
}

__constant__ float rht_sign[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};

__device__ __forceinline__ void d_rht16(float (&v)[16])
{
#pragma unroll
    for (int i = 0; i < 16; i++)
        v[i] = rht_sign[i] < 0 ? -d_bf16r(v[i]) : d_bf16r(v[i]);
#pragma unroll
    for (int len = 1; len < 16; len <<= 1)
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

__device__ __forceinline__ float fp8_scale_from_amax(float amax, float max_fp8, int pow2, float eps)
{
    if (amax < eps) amax = eps;
    if (isinf(amax) || amax == 0.0f || isnan(amax)) return 1.0f;
    float scale = __fdiv_rn(max_fp8, amax);
    if (isinf(scale)) scale = FLT_MAX;
    if (pow2) scale = __uint_as_float(__float_as_uint(scale) & 0xFF800000u);
    return scale;
}

__device__ __forceinline__ float nvfp4_global_scale(float amax)
{
    float s = __fdiv_rn(FT_E4M3_MAX * FT_E2M1_MAX, amax);
    s = fminf(s, FLT_MAX);
    if (amax == 0.0f || s == 0.0f) return 1.0f;
    return s;
}

// max(m, a) ignoring a NaN a, as the reference's max_abs (a > m ? a : m) does; so an amax is
// never NaN and its float bits order like the values (atomicMax on the bits).
__device__ __forceinline__ float amax_merge(float m, float a)
{
    return fmaxf(m, a);
}

// MXFP8 block: E8M0 code of a block with max |x| = amax (element format max fmax).
__device__ __forceinline__ uint8_t mxfp8_code(float amax, float fmax)
{
    return d_e8m0_from_float(__fmul_rn(amax, __fdiv_rn(1.0f, fmax)));
}

// NVFP4 block: E4M3-rounded decode scale d of a block with max |x| = amax, global scale S.
__device__ __forceinline__ float nvfp4_block_scale(float amax, float S)
{
    return d_fp8_round(FT_FP8_E4M3,
                       fminf(__fmul_rn(amax, __fmul_rn(S, __fdiv_rn(1.0f, FT_E2M1_MAX))), FLT_MAX));
}

// NVFP4 block multiplier from the block scale d and the group's 1/S.
__device__ __forceinline__ float nvfp4_block_mult(float d, float Sdec)
{
    return fminf(__fdiv_rn(1.0f, __fmul_rn(d, Sdec)), FLT_MAX);
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
        *deq = __fmul_rn(__fmul_rn(d, gamax), __fdiv_rn(1.0f, FT_E4M3_MAX * FT_E2M1_MAX));
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
