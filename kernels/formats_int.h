/*
 * formats_int.h - the arithmetic of the number formats, written once for both back ends: bf16,
 * FP8 (E4M3/E5M2), E2M1 (FP4), E8M0 scales, TE's scale rules (FP8 current/block, MXFP8, NVFP4),
 * the counter-based RNG of stochastic rounding and the 16-point RHT. Private to kernels/ (cpu/
 * and cuda/); a header of inline functions usable from C11 and from nvcc (FT_HDI: host and
 * device), so the CPU reference and the CUDA kernels run the same float operations in the same
 * order and agree bit for bit.
 *
 * Rounding works on the float's bits: a value in a target format's normal range is rounded to
 * the format's mantissa width by the add-half-ulp-and-mask trick (RNE); a value in its subnormal
 * range by adding and subtracting a power of two whose fp32 ulp is the subnormal quantum (RNE by
 * the FPU). Both need strict IEEE float semantics: no -ffast-math on the host, and on the device
 * the FT_F* operations (__fadd_rn, ...), which nvcc never contracts into an FMA.
 *
 * Limits: bf16_round is the bit trick on the host and the cvt.rn instruction on the device; they
 * agree on every value except NaN payloads (both give a NaN).
 */
#ifndef FT_FORMATS_INT_H
#define FT_FORMATS_INT_H

#include "ft_kernels.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#define FT_HDI static __host__ __device__ __forceinline__
#else
#define FT_HDI static inline
#endif

/* Float operations the device must not fuse into an FMA (plain operators on the host, where
 * C11 without extensions does not contract). */
#ifdef __CUDA_ARCH__
#define FT_FADD(a, b) __fadd_rn(a, b)
#define FT_FSUB(a, b) __fsub_rn(a, b)
#define FT_FMUL(a, b) __fmul_rn(a, b)
#define FT_FDIV(a, b) __fdiv_rn(a, b)
#define FT_DADD(a, b) __dadd_rn(a, b)
#define FT_DMUL(a, b) __dmul_rn(a, b)
#define FT_UNROLL     _Pragma("unroll")
#else
#define FT_FADD(a, b) ((a) + (b))
#define FT_FSUB(a, b) ((a) - (b))
#define FT_FMUL(a, b) ((a) * (b))
#define FT_FDIV(a, b) ((a) / (b))
#define FT_DADD(a, b) ((a) + (b))
#define FT_DMUL(a, b) ((a) * (b))
#define FT_UNROLL
#endif

/* ---- float bits ---------------------------------------------------------------------------- */

FT_HDI uint32_t f2u(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

FT_HDI float u2f(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* ---- bf16 ---------------------------------------------------------------------------------- */

/* RNE to bf16; overflow rounds to +-inf as a bf16 cast does; NaN stays NaN. */
FT_HDI float bf16_round(float x)
{
#ifdef __CUDA_ARCH__
    return __bfloat162float(__float2bfloat16_rn(x));
#else
    uint32_t u = f2u(x);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) return u2f(u | 0x00400000u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return u2f(u & 0xFFFF0000u);
#endif
}

/* ---- FP8 ----------------------------------------------------------------------------------- */

/* RNE of a >= 0 (finite, below the format's max) to a format with `shift` = 23 - mbits dropped
 * mantissa bits, smallest normal min_normal and subnormal magic 2^(emin - mbits + 23). */
FT_HDI float rne_mant(float a, int shift, float min_normal, float magic)
{
    if (a < min_normal) return FT_FSUB(FT_FADD(a, magic), magic);
    uint32_t u = f2u(a);
    u += ((1u << (shift - 1)) - 1u) + ((u >> shift) & 1u);
    return u2f(u & ~((1u << shift) - 1u));
}

/* RNE with saturation to +-max (satfinite: +-inf -> +-max); NaN passes through. */
FT_HDI float e4m3_round(float x)
{
    float a = fabsf(x);
    if (!(a < FT_E4M3_MAX)) return isnan(x) ? x : copysignf(FT_E4M3_MAX, x);
    return copysignf(rne_mant(a, 20, 0x1p-6f, 0x1p14f), x);
}

FT_HDI float e5m2_round(float x)
{
    float a = fabsf(x);
    if (!(a < FT_E5M2_MAX)) return isnan(x) ? x : copysignf(FT_E5M2_MAX, x);
    return copysignf(rne_mant(a, 21, 0x1p-14f, 0x1p7f), x);
}

/* fp8: an ft_fp8 (an int, so C++ callers pass their own copies of it). */
FT_HDI float fp8_round(int fp8, float x)
{
    return fp8 == FT_FP8_E5M2 ? e5m2_round(x) : e4m3_round(x);
}

/* ---- E2M1 ---------------------------------------------------------------------------------- */

/* E2M1 RNE after clamping to +-6. */
FT_HDI float e2m1_round(float x)
{
    float a = fabsf(x), q;
    if (!(a < FT_E2M1_MAX)) return isnan(x) ? x : copysignf(FT_E2M1_MAX, x);
    if (a < 2.0f)
        q = FT_FMUL(FT_FSUB(FT_FADD(FT_FMUL(a, 2.0f), 0x1p23f), 0x1p23f), 0.5f);
    else if (a < 4.0f)
        q = FT_FSUB(FT_FADD(a, 0x1p23f), 0x1p23f);
    else
        q = a <= 5.0f ? 4.0f : 6.0f;
    return copysignf(q, x);
}

/* E2M1 stochastic rounding: up with probability (|x| - lo) / (hi - lo), using 24 of the bits. */
FT_HDI float e2m1_round_sr(float x, uint32_t rbits)
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
    float u = FT_FMUL((float)(rbits >> 8), 0x1p-24f);
    float q = (FT_FMUL(u, step) < FT_FSUB(a, lo)) ? lo + step : lo;
    return copysignf(q, x);
}

/* ---- E8M0 ---------------------------------------------------------------------------------- */

/* TE float_to_e8m0 (non-Blackwell path; same results as cvt.rp.satfinite.ue8m0x2). */
FT_HDI uint8_t e8m0_from_float(float v)
{
    if (isnan(v)) return 0xFF;
    if (isinf(v)) return 0xFE;
    if (v == 0.0f) return 0;
    uint32_t u = f2u(v);
    uint32_t exponent = (u >> 23) & 0xFFu;
    uint32_t mantissa = u & 0x7FFFFFu;
    if ((mantissa > 0 && exponent != 0xFE) && !(exponent == 0 && mantissa <= 0x400000u)) ++exponent;
    return (uint8_t)exponent;
}

/* 2^(code-127); code 0 -> 2^-127, 0xFF -> NaN. */
FT_HDI float e8m0_dequant(uint8_t code)
{
    if (code == 0xFF) return u2f(0x7FC00000u);
    if (code == 0) return u2f(0x00400000u); /* 2^-127 */
    return u2f((uint32_t)code << 23);
}

/* TE's exp2f_rcp: 2^(127-code); code 254 -> 2^-127, 0xFF -> NaN. */
FT_HDI float e8m0_quant(uint8_t code)
{
    if (code == 0xFF) return u2f(0x7FC00000u);
    if (code == 0xFE) return u2f(0x00400000u);
    return u2f((uint32_t)(254 - code) << 23);
}

/* ---- scale rules --------------------------------------------------------------------------- */

/* TE compute_scale_from_amax (recipe_common.cuh): FP8 current and block scales. */
FT_HDI float fp8_scale_from_amax(float amax, float max_fp8, int pow2, float eps)
{
    if (amax < eps) amax = eps;
    if (isinf(amax) || amax == 0.0f || isnan(amax)) return 1.0f;
    float scale = FT_FDIV(max_fp8, amax);
    if (isinf(scale)) scale = FLT_MAX;
    if (pow2) scale = u2f(f2u(scale) & 0xFF800000u);
    return scale;
}

/* MXFP8 block: E8M0 code of a block with max |x| = amax (element format max fmax). */
FT_HDI uint8_t mxfp8_code(float amax, float fmax)
{
    return e8m0_from_float(FT_FMUL(amax, FT_FDIV(1.0f, fmax)));
}

/* TE compute_global_encode_scaling_factor_FP4: S = 448*6/A, FLT_MAX cap, 1 for A = 0 or inf. */
FT_HDI float nvfp4_global_scale(float amax)
{
    float s = FT_FDIV(FT_E4M3_MAX * FT_E2M1_MAX, amax);
    s = fminf(s, FLT_MAX);
    if (amax == 0.0f || s == 0.0f) return 1.0f;
    return s;
}

/* NVFP4 block: E4M3-rounded decode scale d of a block with max |x| = amax, global scale S. */
FT_HDI float nvfp4_block_scale(float amax, float S)
{
    return e4m3_round(fminf(FT_FMUL(amax, FT_FMUL(S, FT_FDIV(1.0f, FT_E2M1_MAX))), FLT_MAX));
}

/* NVFP4 block multiplier from the block scale d and the group's 1/S (FLT_MAX cap). */
FT_HDI float nvfp4_block_mult(float d, float Sdec)
{
    return fminf(FT_FDIV(1.0f, FT_FMUL(d, Sdec)), FLT_MAX);
}

/* NVFP4 dequantization factor of a block in TE's order: (d * A) / (448 * 6), A the group amax. */
FT_HDI float nvfp4_dequant(float d, float gamax)
{
    return FT_FMUL(FT_FMUL(d, gamax), FT_FDIV(1.0f, FT_E4M3_MAX * FT_E2M1_MAX));
}

/* ---- RNG ----------------------------------------------------------------------------------- */

/* key = mix(seed, stream) once per tensor usage, then one splitmix64 step per counter. */
FT_HDI uint64_t rng_key(uint64_t seed, uint64_t stream)
{
    return ft_hash_mix(seed, stream);
}

FT_HDI uint32_t rng_at(uint64_t key, uint64_t counter)
{
    uint64_t z = key + (counter + 1u) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

FT_HDI uint32_t rng_bits(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return rng_at(rng_key(seed, stream), counter);
}

/* ---- RHT ----------------------------------------------------------------------------------- */

/* TE's fixed RHT sign vector as a mask: bit i set where s_i = -1 (ft_rht_signs holds it as
 * values). */
#define FT_RHT_NEG 0xD7E8u

/* v <- bf16(bf16(v) * diag(s) * H16 / 4): fast Walsh-Hadamard butterflies in fp32. */
FT_HDI void rht16(float *v)
{
    FT_UNROLL
    for (int i = 0; i < 16; i++)
        v[i] = (FT_RHT_NEG >> i & 1u) ? -bf16_round(v[i]) : bf16_round(v[i]);
    FT_UNROLL
    for (int len = 1; len < 16; len <<= 1) {
        FT_UNROLL
        for (int i = 0; i < 16; i++)
            if (!(i & len)) {
                float a = v[i], b = v[i + len];
                v[i] = FT_FADD(a, b);
                v[i + len] = FT_FSUB(a, b);
            }
    }
    FT_UNROLL
    for (int i = 0; i < 16; i++)
        v[i] = bf16_round(FT_FMUL(v[i], 0.25f));
}

/* ---- branchless element rounding for the CPU quantizer loops (vectorizable) ---------------- */

/* |v| clamped to max, rounded RNE to a format with `shift` dropped mantissa bits, smallest
 * normal min_normal and subnormal magic (see rne_mant); sign restored; NaN passes through. The
 * same values as e4m3_round, e5m2_round and e2m1_round. */
FT_HDI float round_sat(float v, float max, uint32_t shift, float min_normal, float magic)
{
    float a = fabsf(v);
    float c = a < max ? a : max;
    float sub = (c + magic) - magic;
    uint32_t u = f2u(c);
    u = (u + ((1u << (shift - 1)) - 1u) + ((u >> shift) & 1u)) & ~((1u << shift) - 1u);
    float q = c < min_normal ? sub : u2f(u);
    q = a == a ? q : a;
    return u2f(f2u(q) | (f2u(v) & 0x80000000u));
}

FT_HDI float e2m1_q(float v)
{
    return round_sat(v, FT_E2M1_MAX, 22, 1.0f, 0x1p22f);
}

FT_HDI float e4m3_q(float v)
{
    return round_sat(v, FT_E4M3_MAX, 20, 0x1p-6f, 0x1p14f);
}

FT_HDI float e5m2_q(float v)
{
    return round_sat(v, FT_E5M2_MAX, 21, 0x1p-14f, 0x1p7f);
}

/* E2M1 stochastic rounding, branchless (the values of e2m1_round_sr): lo = |v| truncated to the
 * grid, step = grid spacing at lo; up iff (rbits >> 8) 2^-24 step < |v| - lo. */
FT_HDI float e2m1_q_sr(float v, uint32_t rbits)
{
    float a = fabsf(v);
    float c = a < FT_E2M1_MAX ? a : FT_E2M1_MAX;
    float lo_n = u2f(f2u(c) & 0xFFC00000u);          /* normal: keep 1 mantissa bit */
    float step_n = u2f(f2u(c) & 0xFF800000u) * 0.5f; /* half the power of two */
    float lo_s = c >= 0.5f ? 0.5f : 0.0f;
    float lo = c < 1.0f ? lo_s : lo_n;
    float step = c < 1.0f ? 0.5f : step_n;
    float r = (float)(rbits >> 8) * 0x1p-24f;
    float q = r * step < c - lo ? lo + step : lo;
    q = a == a ? q : a;
    return u2f(f2u(q) | (f2u(v) & 0x80000000u));
}

#endif /* FT_FORMATS_INT_H */
