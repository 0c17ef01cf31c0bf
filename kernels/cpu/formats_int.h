/*
 * formats_int.h - inline scalar format helpers for the CPU kernels (private to kernels/cpu).
 *
 * Rounding works on the float's bits: a value in a target format's normal range is rounded to
 * the format's mantissa width by the add-half-ulp-and-mask trick (RNE); a value in its subnormal
 * range by adding and subtracting a power of two whose fp32 ulp is the subnormal quantum (RNE by
 * the FPU). Both need strict IEEE float semantics (no -ffast-math).
 */
#ifndef FT_FORMATS_INT_H
#define FT_FORMATS_INT_H

#include "ft_kernels.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float bf16_round(float x)
{
    uint32_t u = f2u(x);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) return u2f(u | 0x00400000u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return u2f(u & 0xFFFF0000u);
}

/* RNE of a >= 0 (finite, below the format's max) to a format with `shift` = 23 - mbits dropped
 * mantissa bits, smallest normal min_normal and subnormal magic 2^(emin - mbits + 23). */
static inline float rne_mant(float a, int shift, float min_normal, float magic)
{
    if (a < min_normal) {
        float t = a + magic; /* IEEE semantics: not folded without -ffast-math */
        return t - magic;
    }
    uint32_t u = f2u(a);
    u += ((1u << (shift - 1)) - 1u) + ((u >> shift) & 1u);
    return u2f(u & ~((1u << shift) - 1u));
}

static inline float e4m3_round(float x)
{
    float a = fabsf(x);
    if (!(a < FT_E4M3_MAX)) return isnan(x) ? x : copysignf(FT_E4M3_MAX, x);
    return copysignf(rne_mant(a, 20, 0x1p-6f, 0x1p14f), x);
}

static inline float e5m2_round(float x)
{
    float a = fabsf(x);
    if (!(a < FT_E5M2_MAX)) return isnan(x) ? x : copysignf(FT_E5M2_MAX, x);
    return copysignf(rne_mant(a, 21, 0x1p-14f, 0x1p7f), x);
}

static inline float fp8_round(ft_fp8 f, float x)
{
    return f == FT_FP8_E5M2 ? e5m2_round(x) : e4m3_round(x);
}

/* E2M1 RNE after clamping to +-6. */
static inline float e2m1_round(float x)
{
    float a = fabsf(x), q;
    if (!(a < FT_E2M1_MAX)) return isnan(x) ? x : copysignf(FT_E2M1_MAX, x);
    if (a < 2.0f) {
        float t = a * 2.0f + 0x1p23f;
        q = (t - 0x1p23f) * 0.5f;
    } else if (a < 4.0f) {
        float t = a + 0x1p23f;
        q = t - 0x1p23f;
    } else {
        q = a <= 5.0f ? 4.0f : 6.0f;
    }
    return copysignf(q, x);
}

/* E2M1 stochastic rounding: up with probability (|x| - lo) / (hi - lo), using 24 of the bits. */
static inline float e2m1_round_sr(float x, uint32_t rbits)
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
    float u = (float)(rbits >> 8) * 0x1p-24f;
    float q = (u * step < a - lo) ? lo + step : lo;
    return copysignf(q, x);
}

/* TE float_to_e8m0 (non-Blackwell path; same results as cvt.rp.satfinite.ue8m0x2). */
static inline uint8_t e8m0_from_float(float v)
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

static inline float e8m0_dequant(uint8_t code)
{
    if (code == 0xFF) return NAN;
    if (code == 0) return u2f(0x00400000u); /* 2^-127 */
    return u2f((uint32_t)code << 23);
}

static inline float e8m0_quant(uint8_t code)
{
    if (code == 0xFF) return NAN;
    if (code == 0xFE) return u2f(0x00400000u);
    return u2f((uint32_t)(254 - code) << 23);
}

/* TE compute_scale_from_amax (recipe_common.cuh): FP8 current, delayed-free, and block scales
 * (quant.c; the packed-layout decoder in qpacked.c). */
static inline float fp8_scale_from_amax(float amax, float max_fp8, int pow2, float eps)
{
    if (amax < eps) amax = eps;
    if (isinf(amax) || amax == 0.0f || isnan(amax)) return 1.0f;
    float scale = max_fp8 / amax;
    if (isinf(scale)) scale = FLT_MAX;
    if (pow2) scale = u2f(f2u(scale) & 0xFF800000u);
    return scale;
}

/* RNG: key = mix(seed, stream) once per tensor usage, then one splitmix64 step per counter. */
static inline uint64_t rng_key(uint64_t seed, uint64_t stream)
{
    return ft_hash_mix(seed, stream);
}

static inline uint32_t rng_at(uint64_t key, uint64_t counter)
{
    uint64_t z = key + (counter + 1u) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static inline uint32_t rng_bits(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return rng_at(rng_key(seed, stream), counter);
}

/* ---- branchless element rounding for the quantizer loops (vectorizable) ------------------- */

/* |v| clamped to max, rounded RNE to a format with `shift` dropped mantissa bits, smallest
 * normal min_normal and subnormal magic (see rne_mant); sign restored; NaN passes through. */
static inline float round_sat(float v, float max, uint32_t shift, float min_normal, float magic)
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

static inline float e2m1_q(float v)
{
    return round_sat(v, FT_E2M1_MAX, 22, 1.0f, 0x1p22f);
}

static inline float e4m3_q(float v)
{
    return round_sat(v, FT_E4M3_MAX, 20, 0x1p-6f, 0x1p14f);
}

static inline float e5m2_q(float v)
{
    return round_sat(v, FT_E5M2_MAX, 21, 0x1p-14f, 0x1p7f);
}

/* E2M1 stochastic rounding, branchless: lo = |v| truncated to the grid, step = grid spacing at
 * lo; up iff (rbits >> 8) 2^-24 step < |v| - lo. */
static inline float e2m1_q_sr(float v, uint32_t rbits)
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

/* v <- bf16(bf16(v) * diag(s) * H16 / 4): fast Walsh-Hadamard butterflies in fp32. */
static inline void rht16(float v[16])
{
    for (int i = 0; i < 16; i++)
        v[i] = ft_rht_signs[i] < 0 ? -bf16_round(v[i]) : bf16_round(v[i]);
    for (int len = 1; len < 16; len <<= 1)
        for (int i = 0; i < 16; i++)
            if (!(i & len)) {
                float a = v[i], b = v[i + len];
                v[i] = a + b;
                v[i + len] = a - b;
            }
    for (int i = 0; i < 16; i++)
        v[i] = bf16_round(v[i] * 0.25f);
}

#endif /* FT_FORMATS_INT_H */
