/*
 * test_kernels.c - the kernels module's building blocks: number formats (known answers), the
 * quantizers (TE's scale rules, block layouts, RHT, stochastic rounding), grouped GEMM against a
 * float64 loop, activations, and the `fusertrace kernels quantize` command.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ft_kernels.h"
#include "test_util.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t rng_state;

static void seed_rng(uint64_t s)
{
    rng_state = s;
}

static double urand(void) /* [0, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1p-53;
}

static float nrand(void) /* approximately N(0, 1), bf16 values */
{
    double s = 0;
    for (int i = 0; i < 4; i++)
        s += urand();
    return ft_bf16_round((float)((s - 2.0) * 1.7320508));
}

static float *randv(int64_t n, float scale)
{
    float *v = ft_malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = ft_bf16_round(nrand() * scale);
    return v;
}

/* ---- formats: known answers --------------------------------------------------------------- */

static void test_e2m1_midpoints(void **state)
{
    (void)state;
    static const struct {
        float in, out;
    } kat[] = {
        {0.25f, 0.0f},   {0.75f, 1.0f},   {1.25f, 1.0f},      {1.75f, 2.0f},   {2.5f, 2.0f},
        {3.5f, 4.0f},    {5.0f, 4.0f},    {0.2500001f, 0.5f}, {0.7499f, 0.5f}, {1.2501f, 1.5f},
        {2.5001f, 3.0f}, {5.0001f, 6.0f}, {4.9999f, 4.0f},    {7.0f, 6.0f},    {1e30f, 6.0f},
        {0.0f, 0.0f},    {0.5f, 0.5f},    {3.0f, 3.0f},       {6.0f, 6.0f},    {0.1f, 0.0f},
    };
    for (size_t i = 0; i < FT_ARRAY_LEN(kat); i++) {
        assert_float_equal(ft_e2m1_decode(ft_e2m1_encode(kat[i].in)), kat[i].out, 0.0f);
        assert_float_equal(ft_e2m1_decode(ft_e2m1_encode(-kat[i].in)), -kat[i].out, 0.0f);
    }
    /* codes: sign in bit 3, magnitude index in bits 0-2, even index in the low nibble */
    assert_int_equal(ft_e2m1_encode(1.5f), 3);
    assert_int_equal(ft_e2m1_encode(-6.0f), 0xF);
    for (uint8_t c = 0; c < 16; c++)
        if (c != 8) assert_int_equal(ft_e2m1_encode(ft_e2m1_decode(c)), c);
}

static void test_fp8_e4m3_saturation_and_subnormals(void **state)
{
    (void)state;
    assert_float_equal(ft_fp8_round(FT_FP8_E4M3, 448.0f), 448.0f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E4M3, 464.0f), 448.0f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E4M3, 1e9f), 448.0f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E4M3, -INFINITY), -448.0f, 0.0f);
    assert_true(isnan(ft_fp8_round(FT_FP8_E4M3, NAN)));
    /* subnormals: quantum 2^-9 below 2^-6, ties to even */
    assert_float_equal(ft_fp8_round(FT_FP8_E4M3, 0x1p-9f), 0x1p-9f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E4M3, 0x1p-10f), 0.0f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E4M3, 0x1.8p-10f), 0x1p-9f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E4M3, 0x3p-10f), 0x2p-9f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E4M3, 0x7p-10f), 0x4p-9f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E4M3, 0x1.ep-7f), 0x1p-6f, 0.0f); /* 15/16 * 2^-6 */
    /* normals: 3 mantissa bits, ties to even */
    assert_float_equal(ft_fp8_round(FT_FP8_E4M3, 1.0625f), 1.0f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E4M3, 1.1875f), 1.25f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E4M3, 1.9375f), 2.0f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E4M3, -300.0f), -288.0f, 0.0f);
    assert_int_equal(ft_fp8_encode(FT_FP8_E4M3, 448.0f), 0x7E);
    assert_int_equal(ft_fp8_encode(FT_FP8_E4M3, 0x1p-9f), 0x01);
    assert_int_equal(ft_fp8_encode(FT_FP8_E4M3, -1.0f), 0xB8);
    for (int c = 0; c < 256; c++) {
        float v = ft_fp8_decode(FT_FP8_E4M3, (uint8_t)c);
        if (isnan(v)) {
            assert_true((c & 0x7F) == 0x7F);
            continue;
        }
        assert_int_equal(ft_fp8_encode(FT_FP8_E4M3, v), c == 0x80 ? 0x80 : c);
        assert_float_equal(ft_fp8_round(FT_FP8_E4M3, v), v, 0.0f);
    }
}

static void test_fp8_e5m2_saturation_and_subnormals(void **state)
{
    (void)state;
    assert_float_equal(ft_fp8_round(FT_FP8_E5M2, 57344.0f), 57344.0f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E5M2, 61440.0f), 57344.0f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E5M2, INFINITY), 57344.0f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E5M2, 0x1p-16f), 0x1p-16f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E5M2, 0x1p-17f), 0.0f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E5M2, 0x3p-17f), 0x2p-16f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E5M2, 1.125f), 1.0f, 0.0f);
    assert_float_equal(ft_fp8_round(FT_FP8_E5M2, 1.375f), 1.5f, 0.0f);
    assert_int_equal(ft_fp8_encode(FT_FP8_E5M2, 57344.0f), 0x7B);
    for (int c = 0; c < 256; c++) {
        float v = ft_fp8_decode(FT_FP8_E5M2, (uint8_t)c);
        if (isnan(v) || isinf(v)) continue;
        assert_int_equal(ft_fp8_encode(FT_FP8_E5M2, v), c);
    }
}

static void test_bf16_round_nearest_even(void **state)
{
    (void)state;
    assert_float_equal(ft_bf16_round(1.0f + 0x1p-8f), 1.0f, 0.0f);           /* tie -> even */
    assert_float_equal(ft_bf16_round(1.0f + 0x3p-8f), 1.0f + 0x1p-6f, 0.0f); /* tie -> even */
    assert_float_equal(ft_bf16_round(1.0f + 0x1.2p-8f), 1.0f + 0x1p-7f, 0.0f);
    assert_true(isinf(ft_bf16_round(FLT_MAX)));
    assert_true(isnan(ft_bf16_round(NAN)));
    assert_int_equal(ft_bf16_bits(-2.0f), 0xC000);
    assert_float_equal(ft_bf16_value(0x3F80), 1.0f, 0.0f);
}

static void test_e8m0_edge_cases(void **state)
{
    (void)state;
    assert_int_equal(ft_e8m0_from_float(1.0f), 127);
    assert_int_equal(ft_e8m0_from_float(1.5f), 128); /* rounded up */
    assert_int_equal(ft_e8m0_from_float(1.0000001f), 128);
    assert_int_equal(ft_e8m0_from_float(0.0f), 0);
    assert_int_equal(ft_e8m0_from_float(0x1p-127f), 0); /* subnormal, mantissa 0x400000 */
    assert_int_equal(ft_e8m0_from_float(0x1.2p-127f), 1);
    assert_int_equal(ft_e8m0_from_float(0x1.8p127f), 254); /* no round up past 254 */
    assert_int_equal(ft_e8m0_from_float(INFINITY), 254);
    assert_int_equal(ft_e8m0_from_float(NAN), 255);
    assert_float_equal(ft_e8m0_dequant(127), 1.0f, 0.0f);
    assert_float_equal(ft_e8m0_dequant(130), 8.0f, 0.0f);
    assert_float_equal(ft_e8m0_quant(130), 0.125f, 0.0f);
    assert_float_equal(ft_e8m0_quant(254), 0x1p-127f, 0.0f);
    assert_float_equal(ft_e8m0_quant(0), 0x1p127f, 0.0f);
}

/* MXFP8 block maxima whose mantissa is above 1.75 (E4M3's largest) must pick the next power of
 * two, never saturate, and dequantize to round(x / 2^e) 2^e with e = ceil(log2(amax * fl(1/448))).
 */
static void test_mxfp8_scale_rounds_up(void **state)
{
    (void)state;
    const float maxima[] = {448.0f * 1.9f, 1.875f, 0.0123f, 448.0f, 3.0e-5f, 1.76f * 64.0f};
    for (size_t t = 0; t < FT_ARRAY_LEN(maxima); t++) {
        float x[32], out[32];
        for (int i = 0; i < 32; i++)
            x[i] = maxima[t] * (float)(i - 16) / 16.0f;
        ft_qcfg q = {.fmt = FT_QF_MXFP8, .fp8 = FT_FP8_E4M3};
        ft_qstats st;
        assert_int_equal(ft_cpu_quantize(&q, x, 1, 32, NULL, 0, out, &st, NULL), FT_OK);
        float amax = fabsf(x[0]);
        int e = (int)ceil(log2((double)(amax * (1.0f / 448.0f))));
        assert_int_equal(st.n_sat, 0);
        for (int i = 0; i < 32; i++) {
            float want = ldexpf(ft_fp8_round(FT_FP8_E4M3, ldexpf(x[i], -e)), e);
            assert_float_equal(out[i], want, 0.0f);
        }
    }
    /* a zero block stays zero (code 0) */
    float z[64] = {0}, zo[64];
    z[40] = 3.0f;
    ft_qcfg q = {.fmt = FT_QF_MXFP8};
    assert_int_equal(ft_cpu_quantize(&q, z, 1, 64, NULL, 0, zo, NULL, NULL), FT_OK);
    for (int i = 0; i < 32; i++)
        assert_float_equal(zo[i], 0.0f, 0.0f);
    assert_float_equal(zo[40], 3.0f, 0.0f);
}

/* NVFP4: global scale S = 2688 / A per group, block scale d = e4m3(amax_b * S / 6), element
 * e2m1(x / (d / S)), dequantized (d A) / 2688. Hand-computed values. */
static void test_nvfp4_two_level_scaling(void **state)
{
    (void)state;
    float x[32] = {0}, out[32];
    x[0] = 6.0f;    /* block 0 amax 6 = A: S = 448, d = 448, x exact */
    x[1] = 2.9f;    /* -> 3 */
    x[2] = -1.3f;   /* -> -1.5 */
    x[16] = 0.75f;  /* block 1 amax 0.75: d = e4m3(56) = 56, multiplier 8, deq 1/8 */
    x[17] = 0.1f;   /* 0.8 -> 1 -> 0.125 */
    x[18] = 0.3f;   /* 2.4 -> 2 -> 0.25 */
    x[19] = -0.45f; /* 3.6 -> 4 -> -0.5 */
    x[20] = 0.03f;  /* 0.24 -> 0 */
    ft_qcfg q = {.fmt = FT_QF_NVFP4};
    assert_int_equal(ft_cpu_quantize(&q, x, 1, 32, NULL, 0, out, NULL, NULL), FT_OK);
    const float want[] = {6.0f, 3.0f, -1.5f};
    for (int i = 0; i < 3; i++)
        assert_float_equal(out[i], want[i], 0.0f);
    assert_float_equal(out[16], 0.75f, 0.0f);
    assert_float_equal(out[17], 0.125f, 0.0f);
    assert_float_equal(out[18], 0.25f, 0.0f);
    assert_float_equal(out[19], -0.5f, 0.0f);
    assert_float_equal(out[20], 0.0f, 0.0f);

    /* per-group global scale: the same block quantizes differently under another group amax */
    float g2[2 * 16], o2[2 * 16];
    for (int i = 0; i < 16; i++) {
        g2[i] = 0.1f * (float)(i + 1);      /* group 0: A = 1.6 */
        g2[16 + i] = 0.1f * (float)(i + 1); /* group 1: same block plus a large value */
    }
    g2[31] = 100.0f;
    int64_t splits[2] = {1, 1};
    assert_int_equal(ft_cpu_quantize(&q, g2, 2, 16, splits, 2, o2, NULL, NULL), FT_OK);
    int differ = 0;
    for (int i = 0; i < 15; i++)
        differ += o2[i] != o2[16 + i];
    assert_true(differ > 0);
    /* a zero tensor: S = 1, all zeros, no NaN */
    float zz[16] = {0}, zo[16];
    assert_int_equal(ft_cpu_quantize(&q, zz, 1, 16, NULL, 0, zo, NULL, NULL), FT_OK);
    for (int i = 0; i < 16; i++)
        assert_float_equal(zo[i], 0.0f, 0.0f);
}

/* The quantizer's branchless vector loops against the scalar format functions, block by block,
 * on values spanning subnormal to saturating ranges (seeded, printed). */
static void test_quantize_matches_scalar_formats(void **state)
{
    (void)state;
    const uint64_t seed = 4242;
    print_message("seed %llu\n", (unsigned long long)seed);
    seed_rng(seed);
    const int64_t R = 8, C = 96;
    float x[8 * 96], out[8 * 96];
    for (int i = 0; i < R * C; i++)
        x[i] = ft_bf16_round((float)((urand() - 0.5) * ldexp(1.0, (int)(urand() * 40) - 30)));
    x[5] = NAN;
    for (int e5 = 0; e5 < 2; e5++) {
        ft_fp8 f = e5 ? FT_FP8_E5M2 : FT_FP8_E4M3;
        ft_qcfg q = {.fmt = FT_QF_MXFP8, .fp8 = f};
        assert_int_equal(ft_cpu_quantize(&q, x, R, C, NULL, 0, out, NULL, NULL), FT_OK);
        for (int b = 0; b < R * C / 32; b++) {
            float amax = 0;
            for (int i = 0; i < 32; i++)
                amax = fabsf(x[b * 32 + i]) > amax ? fabsf(x[b * 32 + i]) : amax;
            uint8_t code = ft_e8m0_from_float(amax * (1.0f / ft_fp8_max(f)));
            for (int i = 0; i < 32; i++) {
                float v = x[b * 32 + i];
                float want = ft_fp8_round(f, v * ft_e8m0_quant(code)) * ft_e8m0_dequant(code);
                if (isnan(v))
                    assert_true(isnan(out[b * 32 + i]));
                else
                    assert_float_equal(out[b * 32 + i], want, 0.0f);
            }
        }
    }
    x[5] = 1.0f;
    ft_qcfg q = {.fmt = FT_QF_NVFP4};
    assert_int_equal(ft_cpu_quantize(&q, x, R, C, NULL, 0, out, NULL, NULL), FT_OK);
    float A = 0;
    for (int i = 0; i < R * C; i++)
        A = fabsf(x[i]) > A ? fabsf(x[i]) : A;
    float S = 2688.0f / A, Sd = 1.0f / S;
    for (int b = 0; b < R * C / 16; b++) {
        float amax = 0;
        for (int i = 0; i < 16; i++)
            amax = fabsf(x[b * 16 + i]) > amax ? fabsf(x[b * 16 + i]) : amax;
        float d = ft_fp8_round(FT_FP8_E4M3, amax * (S * (1.0f / 6.0f)));
        float m = fminf(1.0f / (d * Sd), FLT_MAX);
        for (int i = 0; i < 16; i++) {
            float want =
                ft_e2m1_decode(ft_e2m1_encode(x[b * 16 + i] * m)) * ((d * A) * (1.0f / 2688.0f));
            assert_float_equal(out[b * 16 + i], want, 0.0f);
        }
    }
    /* stochastic rounding: the vector loop draws ft_rng_bits(seed, 2*stream, index) */
    ft_qcfg sr = {.fmt = FT_QF_NVFP4, .sr = 1, .seed = 9, .stream = 3};
    assert_int_equal(ft_cpu_quantize(&sr, x, R, C, NULL, 0, out, NULL, NULL), FT_OK);
    for (int b = 0; b < R * C / 16; b++) {
        float amax = 0;
        for (int i = 0; i < 16; i++)
            amax = fabsf(x[b * 16 + i]) > amax ? fabsf(x[b * 16 + i]) : amax;
        float d = ft_fp8_round(FT_FP8_E4M3, amax * (S * (1.0f / 6.0f)));
        float m = fminf(1.0f / (d * Sd), FLT_MAX);
        for (int i = 0; i < 16; i++) {
            int idx = b * 16 + i;
            uint32_t bits = ft_rng_bits(9, 6, (uint64_t)idx);
            float want =
                ft_e2m1_decode(ft_e2m1_encode_sr(x[idx] * m, bits)) * ((d * A) * (1.0f / 2688.0f));
            assert_float_equal(out[idx], want, 0.0f);
        }
    }
    /* columnwise SR: blocks of 16 rows of a column, stream 2*3+1, counter = row-major index */
    sr.columnwise = 1;
    float xc[32 * 4], oc[32 * 4];
    for (int i = 0; i < 32 * 4; i++)
        xc[i] = x[i];
    assert_int_equal(ft_cpu_quantize(&sr, xc, 32, 4, NULL, 0, oc, NULL, NULL), FT_OK);
    float Ac = 0;
    for (int i = 0; i < 32 * 4; i++)
        Ac = fabsf(xc[i]) > Ac ? fabsf(xc[i]) : Ac;
    float Sc = 2688.0f / Ac, Sdc = 1.0f / Sc;
    for (int c = 0; c < 4; c++)
        for (int r0 = 0; r0 < 32; r0 += 16) {
            float amax = 0;
            for (int r = r0; r < r0 + 16; r++)
                amax = fabsf(xc[r * 4 + c]) > amax ? fabsf(xc[r * 4 + c]) : amax;
            float d = ft_fp8_round(FT_FP8_E4M3, amax * (Sc * (1.0f / 6.0f)));
            float m = fminf(1.0f / (d * Sdc), FLT_MAX);
            for (int r = r0; r < r0 + 16; r++) {
                uint32_t bits = ft_rng_bits(9, 7, (uint64_t)(r * 4 + c));
                float want = ft_e2m1_decode(ft_e2m1_encode_sr(xc[r * 4 + c] * m, bits)) *
                             ((d * Ac) * (1.0f / 2688.0f));
                assert_float_equal(oc[r * 4 + c], want, 0.0f);
            }
        }
}

static void test_fp8_current_and_block_scales(void **state)
{
    (void)state;
    float x[256], out[256];
    for (int i = 0; i < 256; i++)
        x[i] = (i < 128 ? 2.0f : 0.02f) * (float)((i % 7) - 3) / 3.0f;
    /* current: one scale 448/2 = 224 for the tensor */
    ft_qcfg q = {.fmt = FT_QF_FP8_CURRENT};
    assert_int_equal(ft_cpu_quantize(&q, x, 2, 128, NULL, 0, out, NULL, NULL), FT_OK);
    for (int i = 0; i < 256; i++)
        assert_float_equal(out[i], ft_fp8_round(FT_FP8_E4M3, x[i] * 224.0f) * (1.0f / 224.0f),
                           0.0f);
    /* power-of-2: 224 -> 128 */
    q.pow2_scales = 1;
    assert_int_equal(ft_cpu_quantize(&q, x, 2, 128, NULL, 0, out, NULL, NULL), FT_OK);
    assert_float_equal(out[1], ft_fp8_round(FT_FP8_E4M3, x[1] * 128.0f) / 128.0f, 0.0f);
    /* block 1x128: the small row gets its own scale (2^14 after pow2 of 448/0.02) */
    ft_qcfg b = {.fmt = FT_QF_FP8_BLOCK, .pow2_scales = 1};
    assert_int_equal(ft_cpu_quantize(&b, x, 2, 128, NULL, 0, out, NULL, NULL), FT_OK);
    assert_float_equal(out[129], ft_fp8_round(FT_FP8_E4M3, x[129] * 16384.0f) / 16384.0f, 0.0f);
    assert_float_equal(out[1], ft_fp8_round(FT_FP8_E4M3, x[1] * 128.0f) / 128.0f, 0.0f);
    /* 128x128 tile: both rows share the scale of the larger */
    b.two_d = 1;
    assert_int_equal(ft_cpu_quantize(&b, x, 2, 128, NULL, 0, out, NULL, NULL), FT_OK);
    assert_float_equal(out[129], ft_fp8_round(FT_FP8_E4M3, x[129] * 128.0f) / 128.0f, 0.0f);
}

static void test_delayed_scaling_history_window(void **state)
{
    (void)state;
    ft_delayed d;
    assert_int_equal(ft_delayed_init(&d, 3, FT_FP8_E4M3, 0.0f, 0, NULL), FT_OK);
    assert_float_equal(d.scale, 1.0f, 0.0f);
    ft_delayed_update(&d, 1.0f);
    ft_delayed_update(&d, 4.0f);
    ft_delayed_update(&d, 2.0f);
    assert_float_equal(d.scale, 448.0f / 4.0f, 0.0f);
    ft_delayed_update(&d, 1.0f); /* window {4, 2, 1} */
    assert_float_equal(d.scale, 448.0f / 4.0f, 0.0f);
    ft_delayed_update(&d, 1.0f); /* 4 leaves the window of 3 */
    assert_float_equal(d.scale, 448.0f / 2.0f, 0.0f);
    ft_delayed_update(&d, 1.0f);
    assert_float_equal(d.scale, 448.0f, 0.0f);
    ft_delayed_update(&d, 0.0f); /* window max still 1 */
    assert_float_equal(d.scale, 448.0f, 0.0f);
    ft_delayed_free(&d);
    assert_int_equal(ft_delayed_init(&d, 4, FT_FP8_E5M2, 1.0f, 1, NULL), FT_OK);
    ft_delayed_update(&d, 8.0f);
    ft_delayed_update(&d, 2.0f);
    assert_float_equal(d.scale, 57344.0f / 2.0f / 2.0f, 0.0f); /* most_recent, margin 1 */
    ft_delayed_update(&d, 0.0f);                               /* amax 0 keeps the scale */
    assert_float_equal(d.scale, 57344.0f / 2.0f / 2.0f, 0.0f);
    ft_delayed_free(&d);
    assert_int_equal(ft_delayed_init(&d, 0, FT_FP8_E4M3, 0.0f, 0, NULL), FT_ERANGE);
}

/* Columnwise = the rowwise rule on the transpose, for every blocked format. */
static void test_quantize_columnwise_is_transposed_rowwise(void **state)
{
    (void)state;
    const int64_t R = 64, C = 48;
    seed_rng(11);
    float *x = randv(R * C, 1.0f), *xt = randv(R * C, 1.0f);
    float *a = randv(R * C, 1.0f), *b = randv(R * C, 1.0f);
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++)
            xt[j * R + i] = x[i * C + j];
    const ft_qfmt fmts[] = {FT_QF_MXFP8, FT_QF_NVFP4, FT_QF_FP8_BLOCK};
    for (size_t f = 0; f < FT_ARRAY_LEN(fmts); f++) {
        ft_qcfg col = {.fmt = fmts[f], .columnwise = 1}, row = {.fmt = fmts[f]};
        assert_int_equal(ft_cpu_quantize(&col, x, R, C, NULL, 0, a, NULL, NULL), FT_OK);
        assert_int_equal(ft_cpu_quantize(&row, xt, C, R, NULL, 0, b, NULL, NULL), FT_OK);
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < C; j++)
                assert_float_equal(a[i * C + j], b[j * R + i], 0.0f);
    }
    ft_free(x), ft_free(xt), ft_free(a), ft_free(b);
}

/* 2D tiles: columnwise usage equals rowwise; one scale per tile (a tile's values all scale
 * with its own maximum, not with a neighbour's). */
static void test_quantize_2d_tiles(void **state)
{
    (void)state;
    const int64_t R = 40, C = 72; /* partial tiles at both edges */
    seed_rng(31);
    float *x = randv(R * C, 1.0f), *a = randv(R * C, 1), *b = randv(R * C, 1);
    const ft_qfmt fmts[] = {FT_QF_MXFP8, FT_QF_NVFP4, FT_QF_FP8_BLOCK};
    for (size_t f = 0; f < FT_ARRAY_LEN(fmts); f++) {
        ft_qcfg row = {.fmt = fmts[f], .two_d = 1, .pow2_scales = 1}, col = row;
        col.columnwise = 1;
        assert_int_equal(ft_cpu_quantize(&row, x, R, C, NULL, 0, a, NULL, NULL), FT_OK);
        assert_int_equal(ft_cpu_quantize(&col, x, R, C, NULL, 0, b, NULL, NULL), FT_OK);
        assert_memory_equal(a, b, (size_t)(R * C) * sizeof *a);
    }
    /* MXFP8 32x32: a large value in tile (0,0) coarsens its whole tile, and only it */
    ft_qcfg q = {.fmt = FT_QF_MXFP8, .two_d = 1};
    float *base = randv(R * C, 1);
    assert_int_equal(ft_cpu_quantize(&q, x, R, C, NULL, 0, base, NULL, NULL), FT_OK);
    x[0] = 1000.0f;
    assert_int_equal(ft_cpu_quantize(&q, x, R, C, NULL, 0, a, NULL, NULL), FT_OK);
    int coarse = 0;
    for (int64_t i = 1; i < 32; i++)
        for (int64_t j = 0; j < 32; j++)
            coarse += a[i * C + j] != base[i * C + j];
    assert_true(coarse > 0);
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++)
            if (i >= 32 || j >= 32) assert_float_equal(a[i * C + j], base[i * C + j], 0.0f);
    ft_free(x), ft_free(a), ft_free(b), ft_free(base);
}

/* M = diag(s) H16 / 4 is orthogonal: M M^T = I exactly (entries +-1/4); s is TE's sign vector
 * (transformer_engine's RHT, written out here independently of kernels/formats_int.h's mask). */
static void test_rht_orthogonal(void **state)
{
    (void)state;
    static const int8_t te_signs[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
    assert_memory_equal(ft_rht_signs, te_signs, sizeof te_signs);
    float M[16][16];
    for (int i = 0; i < 16; i++) {
        float v[16] = {0};
        v[i] = 1.0f;
        ft_rht16(v);
        for (int j = 0; j < 16; j++) {
            assert_float_equal(fabsf(v[j]), 0.25f, 0.0f);
            M[i][j] = v[j];
        }
        /* row i of M is s_i times row i of H16: its first entry carries the sign */
        assert_float_equal(M[i][0], 0.25f * (float)ft_rht_signs[i], 0.0f);
    }
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = 0;
            for (int k = 0; k < 16; k++)
                s += M[i][k] * M[j][k];
            assert_float_equal(s, i == j ? 1.0f : 0.0f, 0.0f);
        }
    /* RHT needs 16-row groups */
    float x[20 * 2], o[20 * 2];
    for (int i = 0; i < 40; i++)
        x[i] = 1.0f;
    ft_qcfg q = {.fmt = FT_QF_NVFP4, .columnwise = 1, .rht = 1};
    ft_err err = {0};
    assert_int_equal(ft_cpu_quantize(&q, x, 20, 2, NULL, 0, o, NULL, &err), FT_EINVAL);
    assert_non_null(strstr(err.msg, "16"));
    q.columnwise = 0;
    assert_int_equal(ft_cpu_quantize(&q, x, 16, 2, NULL, 0, o, NULL, &err), FT_EINVAL);
}

/* Stochastic rounding is unbiased: the mean of many SR roundings of x approaches x. With n
 * draws between E2M1 neighbours lo < x < hi, the mean's standard deviation is at most
 * (hi - lo) / (2 sqrt(n)); we allow 5 of them. */
static void test_sr_unbiased(void **state)
{
    (void)state;
    const uint64_t seed = 0x5eed1234u;
    const int n = 20000;
    const float xs[] = {0.1f, 0.6f, 1.3f, 2.2f, 3.7f, 4.5f, 5.9f, -2.6f};
    print_message("sr seed %llu, %d draws per value\n", (unsigned long long)seed, n);
    for (size_t t = 0; t < FT_ARRAY_LEN(xs); t++) {
        double sum = 0;
        for (int i = 0; i < n; i++)
            sum += ft_e2m1_decode(ft_e2m1_encode_sr(xs[t], ft_rng_bits(seed, t, (uint64_t)i)));
        double mean = sum / n, a = fabs(xs[t]);
        double step = a < 2 ? 0.5 : (a < 4 ? 1.0 : 2.0);
        double bound = 5.0 * step / (2.0 * sqrt((double)n));
        if (fabs(mean - xs[t]) > bound)
            print_error("x=%g mean=%g bound=%g\n", (double)xs[t], mean, bound);
        assert_true(fabs(mean - xs[t]) <= bound);
    }
    /* deterministic rounding is biased on the same inputs (so the test can fail) */
    assert_true(fabs(ft_e2m1_decode(ft_e2m1_encode(0.6f)) - 0.6) > 0.05);
    /* quantizer-level: SR output depends on the seed, and only on it */
    float x[64], a[64], b[64], c[64];
    for (int i = 0; i < 64; i++)
        x[i] = 0.37f * (float)(i % 9 - 4);
    ft_qcfg q = {.fmt = FT_QF_NVFP4, .sr = 1, .seed = 1};
    assert_int_equal(ft_cpu_quantize(&q, x, 4, 16, NULL, 0, a, NULL, NULL), FT_OK);
    assert_int_equal(ft_cpu_quantize(&q, x, 4, 16, NULL, 0, b, NULL, NULL), FT_OK);
    q.seed = 2;
    assert_int_equal(ft_cpu_quantize(&q, x, 4, 16, NULL, 0, c, NULL, NULL), FT_OK);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
}

static void test_quantize_bad_input(void **state)
{
    (void)state;
    float x[4] = {1, 2, 3, 4}, o[4];
    ft_err err = {0};
    int64_t bad[2] = {1, 5};
    ft_qcfg q = {.fmt = FT_QF_MXFP8};
    assert_int_equal(ft_cpu_quantize(&q, x, 2, 2, bad, 2, o, NULL, &err), FT_EINVAL);
    assert_non_null(strstr(err.msg, "split 1"));
    q.sr = 1;
    assert_int_equal(ft_cpu_quantize(&q, x, 2, 2, NULL, 0, o, NULL, &err), FT_EINVAL);
    ft_qcfg d = {.fmt = FT_QF_FP8_DELAYED, .scale = 0.0f};
    assert_int_equal(ft_cpu_quantize(&d, x, 2, 2, NULL, 0, o, NULL, &err), FT_EINVAL);
    ft_qcfg c = {.fmt = FT_QF_NVFP4, .columnwise = 1};
    ft_alloc_fail_after(0);
    assert_int_equal(ft_cpu_quantize(&c, x, 2, 2, NULL, 0, o, NULL, &err), FT_ENOMEM);
    ft_alloc_fail_after(-1);
}

/* ---- grouped GEMM ------------------------------------------------------------------------- */

static void test_gemm_ragged_empty_groups_vs_f64(void **state)
{
    (void)state;
    const int64_t splits[] = {0, 5, 0, 17, 3, 0};
    const uint32_t G = 6;
    const int64_t m = 27, n = 9, k = 13; /* 2 padding rows */
    seed_rng(7);
    float *x = randv(m * k, 1), *dy = randv(m * n, 1), *w = randv(G * n * k, 1);
    float *b = randv(G * n, 1), *ps = randv(m, 1), *c = randv(m * n, 1);
    float *dx = randv(m * k, 1), *dw = randv(G * n * k, 1);
    float pad_y = c[25 * n], pad_x = dx[26 * k];
    ft_gemm f = {FT_GEMM_FPROP, G, splits, m, n, k, x, w, c, b, ps, 0};
    ft_gemm d = {FT_GEMM_DGRAD, G, splits, m, n, k, dy, w, dx, NULL, NULL, 0};
    ft_gemm wg = {FT_GEMM_WGRAD, G, splits, m, n, k, dy, x, dw, NULL, NULL, 0};
    assert_int_equal(ft_cpu_gemm(&f, NULL), FT_OK);
    assert_int_equal(ft_cpu_gemm(&d, NULL), FT_OK);
    assert_int_equal(ft_cpu_gemm(&wg, NULL), FT_OK);
    int64_t r0 = 0;
    for (uint32_t g = 0; g < G; g++) {
        const float *wg_ = w + g * n * k;
        for (int64_t r = r0; r < r0 + splits[g]; r++) {
            for (int64_t j = 0; j < n; j++) {
                double s = (double)b[g * n + j] * ps[r];
                for (int64_t i = 0; i < k; i++)
                    s += (double)x[r * k + i] * wg_[j * k + i];
                assert_float_equal(c[r * n + j], s, 1e-5 + 1e-5 * fabs(s));
            }
            for (int64_t i = 0; i < k; i++) {
                double s = 0;
                for (int64_t j = 0; j < n; j++)
                    s += (double)dy[r * n + j] * wg_[j * k + i];
                assert_float_equal(dx[r * k + i], s, 1e-5 + 1e-5 * fabs(s));
            }
        }
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < k; i++) {
                double s = 0;
                for (int64_t r = r0; r < r0 + splits[g]; r++)
                    s += (double)dy[r * n + j] * x[r * k + i];
                assert_float_equal(dw[(g * n + j) * k + i], s, 1e-5 + 1e-5 * fabs(s));
            }
        r0 += splits[g];
    }
    assert_float_equal(c[25 * n], pad_y, 0.0f); /* padding rows untouched */
    assert_float_equal(dx[26 * k], pad_x, 0.0f);
    /* accumulate adds */
    float before = dw[5 * n * k - 1];
    wg.accumulate = 1;
    assert_int_equal(ft_cpu_gemm(&wg, NULL), FT_OK);
    assert_float_equal(dw[5 * n * k - 1], 2 * before, 1e-5);
    int64_t bad[] = {30};
    ft_gemm e = {FT_GEMM_FPROP, 1, bad, m, n, k, x, w, c, NULL, NULL, 0};
    ft_err err = {0};
    assert_int_equal(ft_cpu_gemm(&e, &err), FT_EINVAL);
    assert_non_null(strstr(err.msg, "overruns"));
    ft_free(x), ft_free(dy), ft_free(w), ft_free(b), ft_free(ps), ft_free(c), ft_free(dx);
    ft_free(dw);
}

/* ---- activations -------------------------------------------------------------------------- */

/* Backward against central differences of the forward, every activation, both layouts. */
static void test_act_backward_matches_finite_differences(void **state)
{
    (void)state;
    const int64_t rows = 3, k2 = 64;
    const ft_act acts[] = {
        {FT_ACT_SWIGLU, 0, 0, 0, 0},
        {FT_ACT_SWIGLU, 32, 0, 0, 0},
        {FT_ACT_CLAMPED_QGEGLU, 32, 7.0f, 1.702f, 1.0f},
        {FT_ACT_SRELU, 0, 0, 0, 0},
    };
    seed_rng(3);
    for (size_t t = 0; t < FT_ARRAY_LEN(acts); t++) {
        const ft_act *a = &acts[t];
        int64_t n1 = ft_act_is_glu(a->kind) ? 2 * k2 : k2;
        float *h = randv(rows * n1, 3.0f), *dz = randv(rows * k2, 1.0f), *p = randv(rows, 1.0f);
        float *dh = randv(rows * n1, 1), *z = randv(rows * k2, 1), dp[3];
        assert_int_equal(ft_cpu_act_backward(a, rows, k2, h, p, dz, dh, dp, NULL), FT_OK);
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t j = 0; j < n1; j++) {
                float save = h[r * n1 + j], eps = 1e-2f;
                if (a->kind != FT_ACT_SWIGLU && fabsf(fabsf(save) - 7.0f) < 0.05f) continue;
                if (a->kind == FT_ACT_SRELU && fabsf(save) < 0.05f) continue;
                double l[2];
                for (int s = 0; s < 2; s++) {
                    h[r * n1 + j] = save + (s ? eps : -eps);
                    assert_int_equal(ft_cpu_act_forward(a, rows, k2, h, p, z, NULL), FT_OK);
                    l[s] = 0;
                    for (int64_t c = 0; c < k2; c++)
                        l[s] += (double)z[r * k2 + c] * dz[r * k2 + c];
                }
                h[r * n1 + j] = save;
                double fd = (l[1] - l[0]) / (2.0 * eps);
                assert_float_equal(dh[r * n1 + j], fd, 2e-3 + 2e-2 * fabs(fd));
            }
            /* dprobs = sum dz f (unscaled) = d/dp of sum dz p f */
            assert_int_equal(ft_cpu_act_forward(a, rows, k2, h, NULL, z, NULL), FT_OK);
            double s = 0;
            for (int64_t c = 0; c < k2; c++)
                s += (double)z[r * k2 + c] * dz[r * k2 + c];
            assert_float_equal(dp[r], s, 1e-4 + 1e-4 * fabs(s));
        }
        ft_free(h), ft_free(dz), ft_free(p), ft_free(dh), ft_free(z);
    }
}

/* Interleave 32: column t*64 + half*32 + l of h is plain column half*k2 + t*32 + l. */
static void test_act_interleave32_layout(void **state)
{
    (void)state;
    const int64_t k2 = 96, n1 = 192;
    seed_rng(5);
    float *hp = randv(n1, 2), *hi = randv(n1, 2), *zp = randv(k2, 1), *zi = randv(k2, 1);
    for (int64_t t = 0; t < k2 / 32; t++)
        for (int half = 0; half < 2; half++)
            for (int64_t l = 0; l < 32; l++)
                hi[t * 64 + half * 32 + l] = hp[half * k2 + t * 32 + l];
    ft_act plain = {FT_ACT_SWIGLU, 0, 0, 0, 0}, il = {FT_ACT_SWIGLU, 32, 0, 0, 0};
    assert_int_equal(ft_cpu_act_forward(&plain, 1, k2, hp, NULL, zp, NULL), FT_OK);
    assert_int_equal(ft_cpu_act_forward(&il, 1, k2, hi, NULL, zi, NULL), FT_OK);
    assert_memory_equal(zp, zi, (size_t)k2 * sizeof *zp);
    /* u sigma(u) v by hand for column 40 (t = 1, l = 8) */
    float u = hi[64 + 8], v = hi[64 + 32 + 8];
    assert_float_equal(zi[40], u / (1 + expf(-u)) * v, 1e-6 + 1e-6 * fabsf(zi[40]));
    ft_err err = {0};
    assert_int_equal(ft_cpu_act_forward(&il, 1, 48, hi, NULL, zi, &err), FT_EINVAL);
    ft_free(hp), ft_free(hi), ft_free(zp), ft_free(zi);
}

/* ---- the CLI ------------------------------------------------------------------------------ */

/* Run `fusertrace kernels quantize ARGS < in > out`; the exit status, -1 without the CLI. */
static int run_cli(const char *args, const char *in, const char *out)
{
    if (!tu_cli()) return -1;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "\"%s\" kernels quantize %s < \"%s\" > \"%s\" 2>/dev/null", tu_cli(),
             args, in, out);
    return tu_sh(cmd, NULL, 0);
}

static void test_cli_quantize_matches_library(void **state)
{
    (void)state;
    if (!getenv("FT_CLI")) skip();
    const int64_t R = 32, C = 48;
    seed_rng(21);
    float *x = randv(R * C, 2.0f), *want = randv(R * C, 1), *got = randv(R * C, 1);
    const char *in = FT_BINARY_DIR "/test_kernels_in.bin",
               *out = FT_BINARY_DIR "/test_kernels_out.bin";
    FILE *f = fopen(in, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(x, sizeof *x, (size_t)(R * C), f), (size_t)(R * C));
    fclose(f);
    ft_qcfg q = {.fmt = FT_QF_NVFP4, .columnwise = 1, .rht = 1};
    assert_int_equal(ft_cpu_quantize(&q, x, R, C, NULL, 0, want, NULL, NULL), FT_OK);
    assert_int_equal(run_cli("--format nvfp4 --columnwise --rht --rows 32 --cols 48", in, out), 0);
    f = fopen(out, "rb");
    assert_non_null(f);
    assert_int_equal(fread(got, sizeof *got, (size_t)(R * C), f), (size_t)(R * C));
    fclose(f);
    assert_memory_equal(got, want, (size_t)(R * C) * sizeof *got);
    /* short input, bad flags, bad combinations: exit 2 */
    assert_int_equal(run_cli("--format mxfp8 --rows 33 --cols 48", in, out), 2);
    assert_int_equal(run_cli("--format mxfp8 --rows 16 --cols 48", in, out), 2);
    assert_int_equal(run_cli("--format fp9 --rows 32 --cols 48", in, out), 2);
    assert_int_equal(run_cli("--format nvfp4 --rht --rows 32 --cols 48", in, out), 2);
    assert_int_equal(run_cli("--format mxfp8 --rows 32", in, out), 2);
    assert_int_equal(run_cli("--format mxfp8 --rows 32 --cols 48 --stats", in, out), 0);
    f = fopen(out, "rb");
    assert_non_null(f);
    char line[256];
    int seen = 0;
    while (fgets(line, sizeof line, f))
        seen += !strncmp(line, "rel_l2 ", 7) || !strncmp(line, "saturated ", 10);
    fclose(f);
    assert_int_equal(seen, 2);
    remove(in);
    remove(out);
    ft_free(x), ft_free(want), ft_free(got);
}

static long live_at_start;

static int note_live(void **state)
{
    (void)state;
    live_at_start = ft_alloc_live();
    return 0;
}

static int check_leaks(void **state)
{
    (void)state;
    assert_int_equal(ft_alloc_live(), live_at_start);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_e2m1_midpoints, note_live, check_leaks),
        cmocka_unit_test_setup_teardown(test_fp8_e4m3_saturation_and_subnormals, note_live,
                                        check_leaks),
        cmocka_unit_test_setup_teardown(test_fp8_e5m2_saturation_and_subnormals, note_live,
                                        check_leaks),
        cmocka_unit_test_setup_teardown(test_bf16_round_nearest_even, note_live, check_leaks),
        cmocka_unit_test_setup_teardown(test_e8m0_edge_cases, note_live, check_leaks),
        cmocka_unit_test_setup_teardown(test_mxfp8_scale_rounds_up, note_live, check_leaks),
        cmocka_unit_test_setup_teardown(test_nvfp4_two_level_scaling, note_live, check_leaks),
        cmocka_unit_test_setup_teardown(test_quantize_matches_scalar_formats, note_live,
                                        check_leaks),
        cmocka_unit_test_setup_teardown(test_fp8_current_and_block_scales, note_live, check_leaks),
        cmocka_unit_test_setup_teardown(test_delayed_scaling_history_window, note_live,
                                        check_leaks),
        cmocka_unit_test_setup_teardown(test_quantize_columnwise_is_transposed_rowwise, note_live,
                                        check_leaks),
        cmocka_unit_test_setup_teardown(test_quantize_2d_tiles, note_live, check_leaks),
        cmocka_unit_test_setup_teardown(test_rht_orthogonal, note_live, check_leaks),
        cmocka_unit_test_setup_teardown(test_sr_unbiased, note_live, check_leaks),
        cmocka_unit_test_setup_teardown(test_quantize_bad_input, note_live, check_leaks),
        cmocka_unit_test_setup_teardown(test_gemm_ragged_empty_groups_vs_f64, note_live,
                                        check_leaks),
        cmocka_unit_test_setup_teardown(test_act_backward_matches_finite_differences, note_live,
                                        check_leaks),
        cmocka_unit_test_setup_teardown(test_act_interleave32_layout, note_live, check_leaks),
        cmocka_unit_test_setup_teardown(test_cli_quantize_matches_library, note_live, check_leaks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
