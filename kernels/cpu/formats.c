/*
 * formats.c - scalar number formats: bf16, FP8 (E4M3/E5M2), E2M1 (FP4), E8M0 scales, the
 * counter-based RNG for stochastic rounding, and the 16-point RHT: the public entry points of
 * the arithmetic in kernels/formats_int.h (shared with the CUDA kernels), and the FP8/E2M1 code
 * encoders and decoders.
 */
#include "formats_int.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- bf16 --------------------------------------------------------------------------------- */
float ft_bf16_round(float x)
{
    return bf16_round(x);
}

uint16_t ft_bf16_bits(float x)
{
    return (uint16_t)(f2u(bf16_round(x)) >> 16);
}

float ft_bf16_value(uint16_t bits)
{
    return u2f((uint32_t)bits << 16);
}

void ft_bf16_round_n(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = bf16_round(x[i]);
}

/* ---- FP8 ---------------------------------------------------------------------------------- */
float ft_fp8_max(ft_fp8 f)
{
    return f == FT_FP8_E5M2 ? FT_E5M2_MAX : FT_E4M3_MAX;
}

float ft_fp8_round(ft_fp8 f, float x)
{
    return fp8_round(f, x);
}

uint8_t ft_fp8_encode(ft_fp8 f, float x)
{
    const int mbits = f == FT_FP8_E5M2 ? 2 : 3;
    const int bias = f == FT_FP8_E5M2 ? 15 : 7;
    uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x)) return (uint8_t)(sign | (f == FT_FP8_E5M2 ? 0x7F : 0x7F));
    float q = fabsf(ft_fp8_round(f, x));
    if (q == 0.0f) return sign;
    int e;
    float m = frexpf(q, &e); /* q = m 2^e, m in [0.5, 1) */
    int exp_field = e - 1 + bias;
    if (exp_field <= 0) { /* subnormal: q = frac * 2^(1 - bias - mbits) */
        int frac = (int)ldexpf(q, bias - 1 + mbits);
        return (uint8_t)(sign | frac);
    }
    int frac = (int)ldexpf(2.0f * m - 1.0f, mbits);
    return (uint8_t)(sign | (exp_field << mbits) | frac);
}

float ft_fp8_decode(ft_fp8 f, uint8_t code)
{
    const int mbits = f == FT_FP8_E5M2 ? 2 : 3;
    const int bias = f == FT_FP8_E5M2 ? 15 : 7;
    const int ebits = 7 - mbits;
    int exp_field = (code >> mbits) & ((1 << ebits) - 1);
    int frac = code & ((1 << mbits) - 1);
    float s = (code & 0x80) ? -1.0f : 1.0f;
    if (f == FT_FP8_E4M3 && exp_field == 15 && frac == 7) return NAN;
    if (f == FT_FP8_E5M2 && exp_field == 31) return frac ? NAN : s * INFINITY;
    if (exp_field == 0) return s * ldexpf((float)frac, 1 - bias - mbits);
    return s * ldexpf(1.0f + ldexpf((float)frac, -mbits), exp_field - bias);
}

/* ---- E2M1 --------------------------------------------------------------------------------- */
static const float e2m1_values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

static uint8_t e2m1_code_of(float q) /* q an exact E2M1 value, sign included */
{
    uint8_t sign = signbit(q) ? 8 : 0;
    float a = fabsf(q);
    for (uint8_t c = 0; c < 8; c++)
        if (e2m1_values[c] == a) return (uint8_t)(sign | c);
    return sign | 7; /* unreachable for exact values */
}

uint8_t ft_e2m1_encode(float x)
{
    return e2m1_code_of(e2m1_round(x));
}

uint8_t ft_e2m1_encode_sr(float x, uint32_t rbits)
{
    return e2m1_code_of(e2m1_round_sr(x, rbits));
}

float ft_e2m1_decode(uint8_t code)
{
    float v = e2m1_values[code & 7];
    return (code & 8) ? -v : v;
}

/* ---- E8M0 --------------------------------------------------------------------------------- */
uint8_t ft_e8m0_from_float(float v)
{
    return e8m0_from_float(v);
}

float ft_e8m0_dequant(uint8_t code)
{
    return e8m0_dequant(code);
}

float ft_e8m0_quant(uint8_t code)
{
    return e8m0_quant(code);
}

/* ---- RNG ---------------------------------------------------------------------------------- */
uint32_t ft_rng_bits(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return rng_bits(seed, stream, counter);
}

/* ---- RHT ---------------------------------------------------------------------------------- */
#define SIGN(i) ((FT_RHT_NEG >> (i)&1u) ? -1 : 1)
const int8_t ft_rht_signs[16] = {SIGN(0),  SIGN(1),  SIGN(2),  SIGN(3), SIGN(4),  SIGN(5),
                                 SIGN(6),  SIGN(7),  SIGN(8),  SIGN(9), SIGN(10), SIGN(11),
                                 SIGN(12), SIGN(13), SIGN(14), SIGN(15)};
#undef SIGN

void ft_rht16(float v[16])
{
    rht16(v);
}
