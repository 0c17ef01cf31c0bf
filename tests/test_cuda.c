/*
 * test_cuda.c - the CUDA back end against the CPU reference (kernels/cpu/): grouped GEMM (float32
 * contract, bf16 wgmma and SIMT paths, all three kinds), the fused FC1 epilogue, activation
 * backward, the grouped MLP forward/backward, and quantization (exact to the reference). Shapes
 * cover ragged splits, empty groups, padding rows, token counts and widths that are not tile
 * multiples, 1 group and 128 groups. Every GPU test skip()s without a device or a CUDA build.
 * FT_CUDA_TEST_SMALL=1 shrinks the shapes and FT_CUDA_TEST_FILTER=PATTERN picks tests (for
 * compute-sanitizer runs).
 *
 * Tolerances (|gpu - ref| <= atol + rtol |ref|): float32 GEMM 1e-4 relative to sum |a||b| (only
 * the accumulation order differs); bf16 outputs rtol 1/128 (one bf16 ulp plus order); values
 * derived through an activation of a bf16-rounded input 2/128; quantization exact.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_kernels.h"
#ifdef FT_HAVE_CUDA
#include "ft_kernels_cuda.h"
#include <cuda_runtime_api.h>
#endif

#ifdef FT_HAVE_CUDA

static int small_shapes(void)
{
    const char *s = getenv("FT_CUDA_TEST_SMALL");
    return s && s[0] == '1';
}

static void need_gpu(void)
{
    if (ft_cuda_device_count() <= 0) skip();
}

/* ---- host helpers ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x1234567ull;

static float frand(void) /* uniform in [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
}

static float *rand_bf16(int64_t n, float scale)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++)
        p[i] = ft_bf16_round(frand() * scale);
    return p;
}

static uint16_t *to_bits(const float *p, int64_t n)
{
    uint16_t *b = malloc((size_t)(n > 0 ? n : 1) * sizeof *b);
    assert_non_null(b);
    for (int64_t i = 0; i < n; i++)
        b[i] = ft_bf16_bits(p[i]);
    return b;
}

static void *dev_copy(const void *src, size_t bytes)
{
    void *d = NULL;
    ft_err err;
    ft_err_clear(&err);
    assert_int_equal(ft_cuda_malloc(&d, bytes, &err), FT_OK);
    if (bytes) assert_int_equal(ft_cuda_h2d(d, src, bytes, &err), FT_OK);
    return d;
}

static void *dev_poison(size_t bytes)
{
    void *d = NULL;
    ft_err err;
    ft_err_clear(&err);
    assert_int_equal(ft_cuda_malloc(&d, bytes, &err), FT_OK);
    assert_int_equal(ft_cuda_memset(d, 0xFF, bytes, &err), FT_OK); /* NaN in float and bf16 */
    return d;
}

static float *host_f32(const void *d, int64_t n)
{
    float *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    ft_err err;
    ft_err_clear(&err);
    assert_non_null(h);
    if (n) assert_int_equal(ft_cuda_d2h(h, d, (size_t)n * sizeof *h, &err), FT_OK);
    return h;
}

static float *host_bf16(const void *d, int64_t n)
{
    uint16_t *b = malloc((size_t)(n > 0 ? n : 1) * sizeof *b);
    float *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    ft_err err;
    ft_err_clear(&err);
    assert_non_null(b);
    assert_non_null(h);
    if (n) assert_int_equal(ft_cuda_d2h(b, d, (size_t)n * sizeof *b, &err), FT_OK);
    for (int64_t i = 0; i < n; i++)
        h[i] = ft_bf16_value(b[i]);
    free(b);
    return h;
}

/* Count mismatches of got vs ref over rows [0, rows) of width cols (a row stride of cols). */
static int64_t compare(const char *what, const float *got, const float *ref, int64_t n, double atol,
                       double rtol)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]);
        if (!(d <= atol + rtol * fabs((double)ref[i]))) {
            if (bad < 3)
                print_message("%s: [%lld] got %.8g ref %.8g\n", what, (long long)i, (double)got[i],
                              (double)ref[i]);
            bad++;
        }
    }
    if (bad)
        print_message("%s: %lld of %lld outside tolerance\n", what, (long long)bad, (long long)n);
    return bad;
}

static int64_t sum_splits(const int64_t *s, uint32_t g)
{
    int64_t t = 0;
    for (uint32_t i = 0; i < g; i++)
        t += s[i];
    return t;
}

/* Splits for a case: name picks a pattern. */
typedef struct split_case {
    const char *name;
    uint32_t n_groups;
    int64_t t;
    int64_t splits[128];
} split_case;

static void make_cases(split_case *c, int *n)
{
    const int small = small_shapes();
    int k = 0;
    /* ragged with empty groups and padding rows */
    c[k] = (split_case){"ragged", 5, small ? 300 : 777, {0}};
    int64_t r5[5] = {0, small ? 130 : 300, 1, 0, small ? 150 : 400};
    memcpy(c[k].splits, r5, sizeof r5);
    k++;
    c[k] = (split_case){"one-group", 1, small ? 200 : 645, {0}};
    c[k].splits[0] = c[k].t;
    k++;
    c[k] = (split_case){"128-groups", 128, small ? 600 : 2100, {0}};
    int64_t left = c[k].t - 37;
    for (int g = 0; g < 128; g++) {
        int64_t s = (g % 7 == 3) ? 0 : (int64_t)((frand() + 1.0f) * (small ? 4 : 15));
        if (s > left) s = left;
        c[k].splits[g] = s;
        left -= s;
    }
    k++;
    *n = k;
}

/* ---- GEMM -------------------------------------------------------------------------------- */

/* Reference and operands of one GEMM case (float values exactly bf16). */
static void gemm_shapes(ft_gemm_kind kind, const split_case *sc, int64_t n, int64_t k, int64_t *na,
                        int64_t *nb, int64_t *nc)
{
    const int64_t t = sc->t, G = sc->n_groups;
    *na = kind == FT_GEMM_FPROP ? t * k : t * n;
    *nb = kind == FT_GEMM_WGRAD ? t * k : G * n * k;
    *nc = kind == FT_GEMM_FPROP ? t * n : (kind == FT_GEMM_DGRAD ? t * k : G * n * k);
}

/* Elements of C that the reference defines: FPROP/DGRAD rows inside the splits, WGRAD all. */
static int64_t defined_c(ft_gemm_kind kind, const split_case *sc, int64_t n, int64_t k)
{
    int64_t used = sum_splits(sc->splits, sc->n_groups);
    if (kind == FT_GEMM_FPROP) return used * n;
    if (kind == FT_GEMM_DGRAD) return used * k;
    return (int64_t)sc->n_groups * n * k;
}

static void run_gemm_case(ft_gemm_kind kind, const split_case *sc, int64_t n, int64_t k,
                          int with_bias)
{
    ft_err err;
    ft_err_clear(&err);
    int64_t na, nb, nc;
    gemm_shapes(kind, sc, n, k, &na, &nb, &nc);
    const uint32_t G = sc->n_groups;
    float *a = rand_bf16(na, 1.0f), *b = rand_bf16(nb, 0.5f), *ref = calloc((size_t)nc, 4);
    float *bias = with_bias ? rand_bf16(G * n, 1.0f) : NULL;
    float *bscale = with_bias ? rand_bf16(sc->t, 1.0f) : NULL;
    assert_non_null(ref);
    ft_gemm g = {kind, G, sc->splits, sc->t, n, k, a, b, ref, bias, bscale, 0};
    assert_int_equal(ft_cpu_gemm(&g, &err), FT_OK);
    /* |a||b| bound for the fp32 tolerance */
    const int64_t klen = kind == FT_GEMM_FPROP ? k : (kind == FT_GEMM_DGRAD ? n : sc->t);
    const double scale = 0.5 * (double)klen;
    const int64_t def = defined_c(kind, sc, n, k);
    char what[160];

    /* float32 contract */
    void *da = dev_copy(a, (size_t)na * 4), *db = dev_copy(b, (size_t)nb * 4);
    void *dsp = dev_copy(sc->splits, G * sizeof(int64_t));
    void *dbias = bias ? dev_copy(bias, (size_t)(G * n) * 4) : NULL;
    void *dbs = bscale ? dev_copy(bscale, (size_t)sc->t * 4) : NULL;
    void *dc = dev_poison((size_t)nc * 4);
    ft_gemm gd = {kind, G, dsp, sc->t, n, k, da, db, dc, dbias, dbs, 0};
    assert_int_equal(ft_cuda_gemm(&gd, NULL, &err), FT_OK);
    assert_int_equal(ft_cuda_sync(&err), FT_OK);
    float *got = host_f32(dc, nc);
    snprintf(what, sizeof what, "f32 gemm kind %d %s n=%lld k=%lld", kind, sc->name, (long long)n,
             (long long)k);
    assert_int_equal(compare(what, got, ref, def, 1e-4 * scale, 1e-4), 0);
    free(got);

    /* bf16 paths: wgmma (when its limits hold) and SIMT */
    uint16_t *ab = to_bits(a, na), *bb = to_bits(b, nb);
    uint16_t *biasb = bias ? to_bits(bias, G * n) : NULL;
    void *dab = dev_copy(ab, (size_t)na * 2), *dbb = dev_copy(bb, (size_t)nb * 2);
    void *dbiasb = biasb ? dev_copy(biasb, (size_t)(G * n) * 2) : NULL;
    for (int impl = FT_CUDA_IMPL_WGMMA; impl <= FT_CUDA_IMPL_SIMT; impl++) {
        void *dcb = dev_poison((size_t)nc * 2);
        ft_cuda_bf16_gemm gb;
        memset(&gb, 0, sizeof gb);
        gb.kind = kind;
        gb.n_groups = G;
        gb.splits = dsp;
        gb.m = sc->t;
        gb.n = n;
        gb.k = k;
        gb.a = dab;
        gb.b = dbb;
        gb.c = dcb;
        gb.bias = dbiasb;
        gb.bias_scale = dbs;
        gb.impl = (ft_cuda_impl)impl;
        int rc = ft_cuda_bf16_gemm_run(&gb, NULL, &err);
        if (rc == FT_EUNSUPPORTED) {
            ft_cuda_free(dcb);
            continue;
        }
        assert_int_equal(rc, FT_OK);
        assert_int_equal(ft_cuda_sync(&err), FT_OK);
        float *gotb = host_bf16(dcb, nc);
        snprintf(what, sizeof what, "bf16 gemm impl %d kind %d %s n=%lld k=%lld", impl, kind,
                 sc->name, (long long)n, (long long)k);
        assert_int_equal(compare(what, gotb, ref, def, 1e-3 * scale / 64, 1.0 / 128), 0);
        free(gotb);
        ft_cuda_free(dcb);
    }
    ft_cuda_free(da);
    ft_cuda_free(db);
    ft_cuda_free(dsp);
    ft_cuda_free(dbias);
    ft_cuda_free(dbs);
    ft_cuda_free(dc);
    ft_cuda_free(dab);
    ft_cuda_free(dbb);
    ft_cuda_free(dbiasb);
    free(a);
    free(b);
    free(ref);
    free(bias);
    free(bscale);
    free(ab);
    free(bb);
    free(biasb);
}

static void test_cuda_gemm_matches_cpu(void **state)
{
    (void)state;
    need_gpu();
    split_case cases[4];
    int nc = 0;
    make_cases(cases, &nc);
    const int small = small_shapes();
    /* n, k not multiples of the tiles (k also not of 64); a second shape spans several tiles */
    const int64_t shapes[2][2] = {{264, 328}, {small ? 136 : 520, small ? 200 : 1032}};
    for (int c = 0; c < nc; c++)
        for (int s = 0; s < (small ? 1 : 2); s++)
            for (int kind = FT_GEMM_FPROP; kind <= FT_GEMM_WGRAD; kind++)
                run_gemm_case((ft_gemm_kind)kind, &cases[c], shapes[s][0], shapes[s][1],
                              kind == FT_GEMM_FPROP && s == 0);
}

/* ---- fused FC1 epilogue ------------------------------------------------------------------ */

/* One FC1 problem: random bf16 inputs, the CPU's fp32 accumulator acc = x W_g^T + b_g, and the
 * device copies behind a descriptor (FPROP with act, outputs h and z poisoned). */
typedef struct fc1_case {
    uint32_t G;
    int64_t t, k1, n1, k2, used;
    float *x, *w, *b, *p, *acc;
    void *dx, *dw, *db, *dp, *dsp, *dh, *dz;
    ft_cuda_bf16_gemm g;
} fc1_case;

static void fc1_case_init(fc1_case *c, const split_case *sc, const ft_act *act, int64_t k1,
                          int64_t k2)
{
    ft_err err;
    ft_err_clear(&err);
    memset(c, 0, sizeof *c);
    const uint32_t G = c->G = sc->n_groups;
    const int64_t t = c->t = sc->t, n1 = c->n1 = ft_act_is_glu(act->kind) ? 2 * k2 : k2;
    c->k1 = k1;
    c->k2 = k2;
    c->used = sum_splits(sc->splits, G);
    c->x = rand_bf16(t * k1, 1.0f);
    c->w = rand_bf16(G * n1 * k1, 0.2f);
    c->b = rand_bf16(G * n1, 0.5f);
    c->p = rand_bf16(t, 1.0f);
    c->acc = calloc((size_t)(t * n1 > 0 ? t * n1 : 1), 4);
    assert_non_null(c->acc);
    ft_gemm g = {FT_GEMM_FPROP, G, sc->splits, t, n1, k1, c->x, c->w, c->acc, c->b, NULL, 0};
    assert_int_equal(ft_cpu_gemm(&g, &err), FT_OK);
    uint16_t *xb = to_bits(c->x, t * k1), *wb = to_bits(c->w, G * n1 * k1);
    uint16_t *bb = to_bits(c->b, G * n1);
    c->dx = dev_copy(xb, (size_t)(t * k1) * 2);
    c->dw = dev_copy(wb, (size_t)(G * n1 * k1) * 2);
    c->db = dev_copy(bb, (size_t)(G * n1) * 2);
    c->dp = dev_copy(c->p, (size_t)t * 4);
    c->dsp = dev_copy(sc->splits, G * sizeof(int64_t));
    c->dh = dev_poison((size_t)(t * n1) * 2);
    c->dz = dev_poison((size_t)(t * k2) * 2);
    free(xb);
    free(wb);
    free(bb);
    ft_cuda_bf16_gemm *d = &c->g;
    d->kind = FT_GEMM_FPROP;
    d->n_groups = G;
    d->splits = c->dsp;
    d->m = t;
    d->n = n1;
    d->k = k1;
    d->a = c->dx;
    d->b = c->dw;
    d->c = c->dh;
    d->bias = c->db;
    d->act = act;
    d->probs = c->dp;
    d->z = c->dz;
    d->impl = FT_CUDA_IMPL_WGMMA;
}

static void fc1_case_free(fc1_case *c)
{
    void *dev[] = {c->dx, c->dw, c->db, c->dp, c->dsp, c->dh, c->dz};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        ft_cuda_free(dev[i]);
    free(c->x);
    free(c->w);
    free(c->b);
    free(c->p);
    free(c->acc);
}

static void run_fc1_case(const split_case *sc, const ft_act *act, int64_t k1, int64_t k2)
{
    ft_err err;
    ft_err_clear(&err);
    fc1_case c;
    fc1_case_init(&c, sc, act, k1, k2);
    const int64_t t = c.t, n1 = c.n1, used = c.used;
    /* the unfused reference: h rounded to bf16, the activation on it, z rounded */
    float *h = calloc((size_t)(t * n1), 4), *z = calloc((size_t)(t * k2), 4);
    assert_non_null(h);
    assert_non_null(z);
    memcpy(h, c.acc, (size_t)(t * n1) * 4);
    ft_bf16_round_n(h, (size_t)(t * n1));
    assert_int_equal(ft_cpu_act_forward(act, t, k2, h, c.p, z, &err), FT_OK);
    ft_bf16_round_n(z, (size_t)(t * k2));
    for (int impl = FT_CUDA_IMPL_WGMMA; impl <= FT_CUDA_IMPL_SIMT; impl++) {
        assert_int_equal(ft_cuda_memset(c.dh, 0xFF, (size_t)(t * n1) * 2, &err), FT_OK);
        assert_int_equal(ft_cuda_memset(c.dz, 0xFF, (size_t)(t * k2) * 2, &err), FT_OK);
        c.g.impl = (ft_cuda_impl)impl;
        int rc = ft_cuda_bf16_gemm_run(&c.g, NULL, &err);
        if (rc == FT_EUNSUPPORTED) continue;
        assert_int_equal(rc, FT_OK);
        assert_int_equal(ft_cuda_sync(&err), FT_OK);
        float *gh = host_bf16(c.dh, t * n1), *gz = host_bf16(c.dz, t * k2);
        char what[160];
        snprintf(what, sizeof what, "fc1 h impl %d act %s il %d %s", impl, ft_act_name(act->kind),
                 act->interleave, sc->name);
        assert_int_equal(compare(what, gh, h, used * n1, 1e-3, 1.0 / 128), 0);
        snprintf(what, sizeof what, "fc1 z impl %d act %s il %d %s", impl, ft_act_name(act->kind),
                 act->interleave, sc->name);
        assert_int_equal(compare(what, gz, z, used * k2, 2e-3, 2.0 / 128), 0);
        free(gh);
        free(gz);
    }
    fc1_case_free(&c);
    free(h);
    free(z);
}

/* ---- activation backward ----------------------------------------------------------------- */

/* The fused MXFP8 FC1 epilogue (quantize on store) against the CPU's fused MXFP8 forward
 * pieces: fp32 GEMM + bias, activation x probs on the fp32 accumulator, ft_cpu_quantize rowwise
 * and columnwise with the splits. The GEMMs differ in accumulation order (and expf in the last
 * bit), which can move a value across an FP8 rounding midpoint, or a block amax across a power of
 * two: every value must be the reference's FP8 code or an adjacent one, under the block's scale
 * or a scale twice or half as large, and at least 99.9% of the values bit-equal. */
static int fp8_adjacent(float got, float ref, float deq, ft_fp8 f)
{
    for (int s = -1; s <= 1; s++) {
        const float d = s < 0 ? deq * 0.5f : (s > 0 ? deq * 2.0f : deq);
        const float g = got / d, r = ref / d;
        if (ft_fp8_round(f, g) != g) continue;
        const int cg = ft_fp8_encode(f, g), cr = ft_fp8_encode(f, ft_fp8_round(f, r));
        if ((cg & 0x80) == (cr & 0x80) && abs((cg & 0x7F) - (cr & 0x7F)) <= 1) return 1;
        if (g == 0.0f && fabsf(r) <= fabsf(ft_fp8_decode(f, 1))) return 1; /* +-0 vs smallest */
        if (r == 0.0f && fabsf(g) <= fabsf(ft_fp8_decode(f, 1))) return 1;
    }
    return 0;
}

/* deq[i]: the MXFP8 dequantization factor of element i's block in z[t][k2] (rowwise 1x32, or
 * columnwise 32x1 restarting at each group's first row), from the reference's fp32 values. */
static float *mx_block_deq(const float *z, int64_t k2, const int64_t *splits, uint32_t G,
                           int columnwise, ft_fp8 f)
{
    int64_t used = sum_splits(splits, G);
    float *deq = calloc((size_t)(used * k2 > 0 ? used * k2 : 1), 4);
    assert_non_null(deq);
    const float inv = 1.0f / ft_fp8_max(f);
    int64_t r0 = 0;
    for (uint32_t g = 0; g < G; g++) {
        for (int64_t br = 0; br < splits[g]; br += columnwise ? 32 : 1)
            for (int64_t bc = 0; bc < k2; bc += columnwise ? 1 : 32) {
                const int64_t nr = columnwise ? (splits[g] - br < 32 ? splits[g] - br : 32) : 1;
                const int64_t nc = columnwise ? 1 : (k2 - bc < 32 ? k2 - bc : 32);
                float a = 0.0f;
                for (int64_t r = 0; r < nr; r++)
                    for (int64_t c = 0; c < nc; c++)
                        a = fmaxf(a, fabsf(z[(r0 + br + r) * k2 + bc + c]));
                const float d = ft_e8m0_dequant(ft_e8m0_from_float(a * inv));
                for (int64_t r = 0; r < nr; r++)
                    for (int64_t c = 0; c < nc; c++)
                        deq[(r0 + br + r) * k2 + bc + c] = d;
            }
        r0 += splits[g];
    }
    return deq;
}

static int64_t fp8_steps_apart(const char *what, const float *got, const float *ref,
                               const float *deq, int64_t n, ft_fp8 f)
{
    int64_t diff = 0, far = 0;
    for (int64_t i = 0; i < n; i++) {
        if (got[i] == ref[i]) continue;
        diff++;
        if (!fp8_adjacent(got[i], ref[i], deq[i], f)) {
            if (far < 3)
                print_message("%s: [%lld] got %.8g ref %.8g (block deq %g)\n", what, (long long)i,
                              (double)got[i], (double)ref[i], (double)deq[i]);
            far++;
        }
    }
    print_message("%s: %lld of %lld differ, %lld not by one FP8 step\n", what, (long long)diff,
                  (long long)n, (long long)far);
    return far > 0 || diff * 1000 > n ? 1 : 0;
}

static void run_fc1_mx_case(const split_case *sc, const ft_act *act, ft_fp8 f, int64_t k1,
                            int64_t k2)
{
    ft_err err;
    ft_err_clear(&err);
    fc1_case c;
    fc1_case_init(&c, sc, act, k1, k2);
    const uint32_t G = c.G;
    const int64_t t = c.t, n1 = c.n1, used = c.used;
    /* the CPU's fused MXFP8 pieces: the activation on the fp32 accumulator, quantized rowwise and
     * columnwise (h itself is stored rounded) */
    float *h = calloc((size_t)(t * n1), 4), *z = calloc((size_t)(t * k2), 4);
    float *zr = calloc((size_t)(t * k2), 4), *zcol = calloc((size_t)(t * k2), 4);
    assert_true(h && z && zr && zcol);
    memcpy(h, c.acc, (size_t)(t * n1) * 4);
    ft_bf16_round_n(h, (size_t)(t * n1));
    assert_int_equal(ft_cpu_act_forward(act, t, k2, c.acc, c.p, z, &err), FT_OK);
    ft_qcfg q;
    memset(&q, 0, sizeof q);
    q.fmt = FT_QF_MXFP8;
    q.fp8 = f;
    q.scale = 1.0f;
    assert_int_equal(ft_cpu_quantize(&q, z, t, k2, sc->splits, G, zr, NULL, &err), FT_OK);
    q.columnwise = 1;
    assert_int_equal(ft_cpu_quantize(&q, z, t, k2, sc->splits, G, zcol, NULL, &err), FT_OK);

    void *dzc = dev_poison((size_t)(t * k2) * 2);
    c.g.z_mxfp8 = 1;
    c.g.z_fp8 = f;
    c.g.zc = dzc;
    assert_int_equal(ft_cuda_bf16_gemm_run(&c.g, NULL, &err), FT_OK);
    assert_int_equal(ft_cuda_sync(&err), FT_OK);
    float *gh = host_bf16(c.dh, t * n1), *gz = host_bf16(c.dz, t * k2);
    float *gzc = host_bf16(dzc, t * k2);
    char what[160];
    snprintf(what, sizeof what, "mx fc1 h %s il %d %s", ft_act_name(act->kind), act->interleave,
             sc->name);
    assert_int_equal(compare(what, gh, h, used * n1, 1e-3, 1.0 / 128), 0);
    snprintf(what, sizeof what, "mx fc1 z rowwise %s il %d fp8 %d %s", ft_act_name(act->kind),
             act->interleave, (int)f, sc->name);
    float *deq_r = mx_block_deq(z, k2, sc->splits, G, 0, f);
    float *deq_c = mx_block_deq(z, k2, sc->splits, G, 1, f);
    assert_int_equal(fp8_steps_apart(what, gz, zr, deq_r, used * k2, f), 0);
    snprintf(what, sizeof what, "mx fc1 z columnwise %s il %d fp8 %d %s", ft_act_name(act->kind),
             act->interleave, (int)f, sc->name);
    assert_int_equal(fp8_steps_apart(what, gzc, zcol, deq_c, used * k2, f), 0);
    free(deq_r);
    free(deq_c);
    /* without zc only the rowwise copy is written */
    ft_cuda_free(dzc);
    c.g.zc = NULL;
    assert_int_equal(ft_cuda_bf16_gemm_run(&c.g, NULL, &err), FT_OK);
    assert_int_equal(ft_cuda_sync(&err), FT_OK);
    float *gz2 = host_bf16(c.dz, t * k2);
    assert_memory_equal(gz2, gz, (size_t)(used * k2) * 4);
    /* the SIMT path has no quantizing epilogue */
    c.g.impl = FT_CUDA_IMPL_SIMT;
    assert_int_equal(ft_cuda_bf16_gemm_run(&c.g, NULL, &err), FT_EUNSUPPORTED);
    fc1_case_free(&c);
    void *host[] = {h, z, zr, zcol, gh, gz, gzc, gz2};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        free(host[i]);
}

/* The fused NVFP4 FC1 epilogue: bf16 z from the fp32 accumulator (the CPU's fused NVFP4 z), and
 * per-group amaxes on store, rowwise and of the 16-row RHT copy, against the same figures
 * computed on the CPU from the CPU's z (within the GEMM-order tolerance of z). */
static void run_fc1_nv_case(const split_case *sc, const ft_act *act, int64_t k1, int64_t k2)
{
    ft_err err;
    ft_err_clear(&err);
    fc1_case c;
    fc1_case_init(&c, sc, act, k1, k2);
    const uint32_t G = c.G;
    const int64_t t = c.t, used = c.used;
    float *z = calloc((size_t)(t * k2), 4), *amax = calloc((size_t)G * 2, 4);
    assert_true(z && amax);
    assert_int_equal(ft_cpu_act_forward(act, t, k2, c.acc, c.p, z, &err), FT_OK);
    ft_bf16_round_n(z, (size_t)(t * k2));
    int64_t r0 = 0;
    for (uint32_t e = 0; e < G; e++) {
        for (int64_t r = r0; r < r0 + sc->splits[e]; r++)
            for (int64_t j = 0; j < k2; j++)
                amax[e] = fmaxf(amax[e], fabsf(z[r * k2 + j]));
        for (int64_t c0 = 0; c0 < sc->splits[e]; c0 += 16)
            for (int64_t j = 0; j < k2; j++) {
                float v[16] = {0};
                for (int i = 0; i < 16 && c0 + i < sc->splits[e]; i++)
                    v[i] = z[(r0 + c0 + i) * k2 + j];
                ft_rht16(v);
                for (int i = 0; i < 16; i++)
                    amax[G + e] = fmaxf(amax[G + e], fabsf(v[i]));
            }
        r0 += sc->splits[e];
    }
    void *dam = NULL;
    assert_int_equal(ft_cuda_malloc(&dam, (size_t)G * 8, &err), FT_OK);
    assert_int_equal(ft_cuda_memset(dam, 0, (size_t)G * 8, &err), FT_OK);
    c.g.z_nvfp4 = 1;
    c.g.z_amax = dam;
    assert_int_equal(ft_cuda_bf16_gemm_run(&c.g, NULL, &err), FT_OK);
    assert_int_equal(ft_cuda_sync(&err), FT_OK);
    float *gz = host_bf16(c.dz, t * k2), *gam = host_f32(dam, (int64_t)G * 2);
    char what[160];
    snprintf(what, sizeof what, "nv fc1 z %s il %d %s", ft_act_name(act->kind), act->interleave,
             sc->name);
    assert_int_equal(compare(what, gz, z, used * k2, 2e-3, 2.0 / 128), 0);
    snprintf(what, sizeof what, "nv fc1 amax (row, rht col) %s il %d %s", ft_act_name(act->kind),
             act->interleave, sc->name);
    assert_int_equal(compare(what, gam, amax, (int64_t)G * 2, 0.0, 2.0 / 128), 0);
    /* the packed NVFP4 quantization of this z with the epilogue's amaxes given (cast only) must
     * equal the one that computes them: the same codes, scales and amaxes, bit for bit. The RHT
     * copy needs groups of 16-row multiples, the packed layout 32-column multiples. */
    int x16 = k2 % 32 == 0;
    for (uint32_t e = 0; e < G; e++)
        x16 = x16 && sc->splits[e] % 16 == 0;
    for (int usage = 0; usage < 2 && k2 % 32 == 0; usage++) {
        if (usage && !x16) break;
        ft_qcfg q;
        memset(&q, 0, sizeof q);
        q.fmt = FT_QF_NVFP4;
        q.rht = (uint8_t)usage;
        q.scale = 1.0f;
        ft_qpacked_sizes sz;
        assert_int_equal(ft_qpacked_layout(&q, usage, t, k2, G, &sz, &err), FT_OK);
        ft_qpacked own = {dev_poison(sz.data), dev_poison(sz.scales), dev_poison(sz.amax), 0};
        ft_qpacked given = {dev_poison(sz.data), dev_poison(sz.scales),
                            (float *)dam + (usage ? G : 0), 1};
        for (int k = 0; k < 2; k++) {
            const ft_qpacked *o = k ? &given : &own;
            assert_int_equal(ft_cuda_bf16_quantize(&q, c.dz, t, k2, c.dsp, G, usage ? NULL : o,
                                                   usage ? o : NULL, NULL, &err),
                             FT_OK);
        }
        assert_int_equal(ft_cuda_sync(&err), FT_OK);
        uint8_t *h[6];
        const void *src[6] = {own.data, given.data, own.scales, given.scales, own.amax, given.amax};
        const size_t n[6] = {sz.data, sz.data, sz.scales, sz.scales, sz.amax, sz.amax};
        for (int i = 0; i < 6; i++) {
            h[i] = malloc(n[i]);
            assert_non_null(h[i]);
            assert_int_equal(ft_cuda_d2h(h[i], src[i], n[i], &err), FT_OK);
        }
        /* only the rows in use are written (padding rows stay poisoned in both) */
        assert_memory_equal(h[0], h[1], n[0]);
        assert_memory_equal(h[2], h[3], n[2]);
        assert_memory_equal(h[4], h[5], n[4]);
        for (int i = 0; i < 6; i++)
            free(h[i]);
        ft_cuda_free(own.data);
        ft_cuda_free(own.scales);
        ft_cuda_free(own.amax);
        ft_cuda_free(given.data);
        ft_cuda_free(given.scales);
    }
    c.g.z_mxfp8 = 1; /* exclusive */
    assert_int_equal(ft_cuda_bf16_gemm_run(&c.g, NULL, &err), FT_EINVAL);
    ft_cuda_free(dam);
    fc1_case_free(&c);
    free(gz);
    free(gam);
    free(z);
    free(amax);
}

/* Every FC1 epilogue (bf16; MXFP8 quantize-on-store, E5M2 for the split GLU and E4M3 otherwise;
 * NVFP4 amaxes) on every split case and activation. */
static void test_cuda_fc1_epilogue_matches_cpu(void **state)
{
    (void)state;
    need_gpu();
    split_case cases[4];
    int nc = 0;
    make_cases(cases, &nc);
    const ft_act acts[4] = {{FT_ACT_SWIGLU, 32, 0, 0, 0},
                            {FT_ACT_SWIGLU, 0, 0, 0, 0},
                            {FT_ACT_CLAMPED_QGEGLU, 32, 7.0f, 1.702f, 1.0f},
                            {FT_ACT_SRELU, 0, 0, 0, 0}};
    for (int c = 0; c < nc; c++)
        for (int a = 0; a < 4; a++) {
            const int64_t k2 = acts[a].interleave ? 160 : 136;
            run_fc1_case(&cases[c], &acts[a], 200, k2);
            run_fc1_mx_case(&cases[c], &acts[a], a == 1 ? FT_FP8_E5M2 : FT_FP8_E4M3, 200, k2);
            run_fc1_nv_case(&cases[c], &acts[a], 200, k2);
        }
    /* a longer contraction (10 k-blocks per tile, more than the epilogue's chunks) with many
     * tiles per CTA: the kernel stores each tile's epilogue while the next tile's main loop
     * runs (and the rest after it) */
    for (int a = 0; a < 2; a++) {
        const int64_t k2 = acts[a].interleave ? 160 : 136;
        run_fc1_case(&cases[nc - 1], &acts[a], 600, k2);
        run_fc1_mx_case(&cases[nc - 1], &acts[a], FT_FP8_E4M3, 600, k2);
    }
    /* groups of 16-row multiples (and padding rows): the NVFP4 RHT copy from the epilogue's
     * amaxes */
    split_case x16 = {"16-row-groups", 4, 512, {160, 0, 304, 16}};
    run_fc1_nv_case(&x16, &acts[0], 200, 160);
}

static void test_cuda_act_backward_matches_cpu(void **state)
{
    (void)state;
    need_gpu();
    ft_err err;
    ft_err_clear(&err);
    const ft_act acts[4] = {{FT_ACT_SWIGLU, 32, 0, 0, 0},
                            {FT_ACT_CLAMPED_QGEGLU, 0, 7.0f, 1.702f, 1.0f},
                            {FT_ACT_SRELU, 0, 0, 0, 0},
                            {FT_ACT_SWIGLU, 0, 0, 0, 0}};
    const int64_t rows = small_shapes() ? 37 : 301, k2 = 96 + 256; /* > one 256-column sweep */
    for (int i = 0; i < 4; i++) {
        const int64_t n1 = ft_act_is_glu(acts[i].kind) ? 2 * k2 : k2;
        float *h = rand_bf16(rows * n1, 8.0f), *p = rand_bf16(rows, 1.0f);
        float *dz = rand_bf16(rows * k2, 1.0f);
        float *dh = calloc((size_t)(rows * n1), 4), *dp = calloc((size_t)rows, 4);
        float *z = calloc((size_t)(rows * k2), 4);
        assert_int_equal(ft_cpu_act_backward(&acts[i], rows, k2, h, p, dz, dh, dp, &err), FT_OK);
        assert_int_equal(ft_cpu_act_forward(&acts[i], rows, k2, h, p, z, &err), FT_OK);
        ft_bf16_round_n(dh, (size_t)(rows * n1));
        ft_bf16_round_n(z, (size_t)(rows * k2));
        void *d_h = dev_copy(h, (size_t)(rows * n1) * 4), *d_p = dev_copy(p, (size_t)rows * 4);
        void *d_dz = dev_copy(dz, (size_t)(rows * k2) * 4);
        void *d_dh = dev_poison((size_t)(rows * n1) * 4), *d_dp = dev_poison((size_t)rows * 4);
        void *d_z = dev_poison((size_t)(rows * k2) * 4);
        assert_int_equal(
            ft_cuda_act_backward(&acts[i], rows, k2, d_h, d_p, d_dz, d_dh, d_dp, NULL, &err),
            FT_OK);
        assert_int_equal(ft_cuda_act_forward(&acts[i], rows, k2, d_h, d_p, d_z, NULL, &err), FT_OK);
        assert_int_equal(ft_cuda_sync(&err), FT_OK);
        float *gdh = host_f32(d_dh, rows * n1), *gdp = host_f32(d_dp, rows);
        float *gz = host_f32(d_z, rows * k2);
        assert_int_equal(compare("act dh", gdh, dh, rows * n1, 1e-5, 1.0 / 128), 0);
        assert_int_equal(compare("act dprobs", gdp, dp, rows, 1e-3, 1e-4), 0);
        assert_int_equal(compare("act z", gz, z, rows * k2, 1e-6, 1.0 / 128), 0);
        /* bf16 storage (vectorised kernel: k2 % 8 == 0) */
        uint16_t *hb = to_bits(h, rows * n1), *dzb = to_bits(dz, rows * k2);
        void *b_h = dev_copy(hb, (size_t)(rows * n1) * 2),
             *b_dz = dev_copy(dzb, (size_t)(rows * k2) * 2);
        void *b_dh = dev_poison((size_t)(rows * n1) * 2), *b_dp = dev_poison((size_t)rows * 4);
        assert_int_equal(
            ft_cuda_bf16_act_backward(&acts[i], rows, k2, b_h, d_p, b_dz, b_dh, b_dp, NULL, &err),
            FT_OK);
        assert_int_equal(ft_cuda_sync(&err), FT_OK);
        float *bdh = host_bf16(b_dh, rows * n1), *bdp = host_f32(b_dp, rows);
        assert_int_equal(compare("bf16 act dh", bdh, dh, rows * n1, 1e-5, 1.0 / 128), 0);
        assert_int_equal(compare("bf16 act dprobs", bdp, dp, rows, 1e-3, 1e-4), 0);
        free(bdh);
        free(bdp);
        free(hb);
        free(dzb);
        ft_cuda_free(b_h);
        ft_cuda_free(b_dz);
        ft_cuda_free(b_dh);
        ft_cuda_free(b_dp);
        ft_cuda_free(d_h);
        ft_cuda_free(d_p);
        ft_cuda_free(d_dz);
        ft_cuda_free(d_dh);
        ft_cuda_free(d_dp);
        ft_cuda_free(d_z);
        free(h);
        free(p);
        free(dz);
        free(dh);
        free(dp);
        free(z);
        free(gdh);
        free(gdp);
        free(gz);
    }
}

/* ---- grouped MLP --------------------------------------------------------------------------- */

/* The float32 contract on the device for m (host operands): y, dx, dw1, dw2, db1, db2, dprobs
 * copied back into the caller's arrays; returns the first failing call's code. */
typedef struct mlp_out32 {
    float *y, *dx, *dw1, *dw2, *db1, *db2, *dp;
} mlp_out32;

static int run_f32_device(const ft_mlp *m, const float *dy, mlp_out32 *o, ft_err *err)
{
    const int64_t t = m->t, k1 = m->k1, n1 = m->n1, k2 = m->k2, n2 = m->n2;
    const uint32_t G = m->n_groups;
    ft_mlp md = *m;
    md.splits = dev_copy(m->splits, G * sizeof(int64_t));
    md.x = dev_copy(m->x, (size_t)(t * k1) * 4);
    md.w1 = dev_copy(m->w1, (size_t)(G * n1 * k1) * 4);
    md.b1 = m->b1 ? dev_copy(m->b1, (size_t)(G * n1) * 4) : NULL;
    md.w2 = dev_copy(m->w2, (size_t)(G * n2 * k2) * 4);
    md.b2 = m->b2 ? dev_copy(m->b2, (size_t)(G * n2) * 4) : NULL;
    md.probs = m->probs ? dev_copy(m->probs, (size_t)t * 4) : NULL;
    ft_mlp_fwd fd = {dev_poison((size_t)(t * n1) * 4), dev_poison((size_t)(t * k2) * 4),
                     dev_poison((size_t)(t * n2) * 4)};
    ft_mlp_bwd bd = {dev_poison((size_t)(t * k1) * 4), dev_poison((size_t)(G * n1 * k1) * 4),
                     dev_poison((size_t)(G * n1) * 4), dev_poison((size_t)(G * n2 * k2) * 4),
                     dev_poison((size_t)(G * n2) * 4), dev_poison((size_t)t * 4)};
    void *ddy = dev_copy(dy, (size_t)(t * n2) * 4);
    int rc = ft_cuda_mlp_forward(&md, &fd, NULL, err);
    if (!rc) rc = ft_cuda_mlp_backward(&md, &fd, ddy, &bd, NULL, err);
    if (!rc) rc = ft_cuda_sync(err);
    if (!rc) {
        struct {
            float *dst;
            void *src;
            int64_t n;
        } cp[] = {{o->y, fd.y, t * n2},          {o->dx, bd.dx, t * k1},
                  {o->dw1, bd.dw1, G * n1 * k1}, {o->dw2, bd.dw2, G * n2 * k2},
                  {o->db1, bd.db1, G * n1},      {o->db2, bd.db2, G * n2},
                  {o->dp, bd.dprobs, t}};
        for (size_t i = 0; i < sizeof cp / sizeof cp[0] && !rc; i++)
            rc = ft_cuda_d2h(cp[i].dst, cp[i].src, (size_t)cp[i].n * 4, err);
    }
    void *all[] = {(void *)md.splits,
                   (void *)md.x,
                   (void *)md.w1,
                   (void *)md.b1,
                   (void *)md.w2,
                   (void *)md.b2,
                   (void *)md.probs,
                   fd.h,
                   fd.z,
                   fd.y,
                   bd.dx,
                   bd.dw1,
                   bd.db1,
                   bd.dw2,
                   bd.db2,
                   bd.dprobs,
                   ddy};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ft_cuda_free(all[i]);
    return rc;
}

/* ||got - ref|| / ||ref|| over n values (NaN in either counts as a failure: returns 1e9). */
static double rel_l2(const float *got, const float *ref, int64_t n, int64_t *exact)
{
    double num = 0, den = 0;
    *exact = 0;
    for (int64_t i = 0; i < n; i++) {
        if (got[i] != got[i] || ref[i] != ref[i]) return 1e9;
        double d = (double)got[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
        *exact += got[i] == ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static mlp_out32 alloc_out32(const ft_mlp *m)
{
    const int64_t G = m->n_groups;
    mlp_out32 o = {calloc((size_t)(m->t * m->n2), 4),
                   calloc((size_t)(m->t * m->k1), 4),
                   calloc((size_t)(G * m->n1 * m->k1), 4),
                   calloc((size_t)(G * m->n2 * m->k2), 4),
                   calloc((size_t)(G * m->n1), 4),
                   calloc((size_t)(G * m->n2), 4),
                   calloc((size_t)m->t, 4)};
    assert_true(o.y && o.dx && o.dw1 && o.dw2 && o.db1 && o.db2 && o.dp);
    return o;
}

static void free_out32(mlp_out32 *o)
{
    free(o->y);
    free(o->dx);
    free(o->dw1);
    free(o->dw2);
    free(o->db1);
    free(o->db2);
    free(o->dp);
}

static void test_cuda_mlp_matches_cpu(void **state)
{
    (void)state;
    need_gpu();
    ft_err err;
    ft_err_clear(&err);
    split_case cases[4];
    int nc = 0;
    make_cases(cases, &nc);
    for (int c = 0; c < nc; c++) {
        const split_case *sc = &cases[c];
        const uint32_t G = sc->n_groups;
        const int64_t t = sc->t, k1 = 136, k2 = 96, n1 = 2 * k2, n2 = 136;
        const int64_t used = sum_splits(sc->splits, G);
        ft_mlp m;
        memset(&m, 0, sizeof m);
        m.n_groups = G;
        m.splits = sc->splits;
        m.t = t;
        m.k1 = k1;
        m.n1 = n1;
        m.k2 = k2;
        m.n2 = n2;
        m.act = (ft_act){FT_ACT_SWIGLU, 32, 0, 0, 0};
        m.scale_bias = 1;
        m.path = FT_MLP_UNFUSED;
        float *x = rand_bf16(t * k1, 1.0f), *w1 = rand_bf16(G * n1 * k1, 0.2f);
        float *b1 = rand_bf16(G * n1, 0.2f), *w2 = rand_bf16(G * n2 * k2, 0.2f);
        float *b2 = rand_bf16(G * n2, 0.2f), *p = rand_bf16(t, 1.0f), *dy = rand_bf16(t * n2, 1.0f);
        m.x = x;
        m.w1 = w1;
        m.b1 = b1;
        m.w2 = w2;
        m.b2 = b2;
        m.probs = p;
        float *h = calloc((size_t)(t * n1), 4), *z = calloc((size_t)(t * k2), 4);
        float *y = calloc((size_t)(t * n2), 4);
        float *dx = calloc((size_t)(t * k1), 4), *dw1 = calloc((size_t)(G * n1 * k1), 4);
        float *db1 = calloc((size_t)(G * n1), 4), *dw2 = calloc((size_t)(G * n2 * k2), 4);
        float *db2 = calloc((size_t)(G * n2), 4), *dp = calloc((size_t)t, 4);
        ft_mlp_fwd fo = {h, z, y};
        ft_mlp_bwd bo = {dx, dw1, db1, dw2, db2, dp};
        assert_int_equal(ft_cpu_mlp_forward(&m, &fo, &err), FT_OK);
        assert_int_equal(ft_cpu_mlp_backward(&m, &fo, dy, &bo, &err), FT_OK);

        /* the bf16 fast path on the same values */
        uint16_t *xb = to_bits(x, t * k1), *w1b = to_bits(w1, G * n1 * k1);
        uint16_t *b1b = to_bits(b1, G * n1), *w2b = to_bits(w2, G * n2 * k2);
        uint16_t *b2b = to_bits(b2, G * n2), *dyb = to_bits(dy, t * n2);
        ft_cuda_bf16_mlp bm;
        memset(&bm, 0, sizeof bm);
        bm.n_groups = G;
        bm.splits = dev_copy(sc->splits, G * sizeof(int64_t));
        bm.t = t;
        bm.k1 = k1;
        bm.n1 = n1;
        bm.k2 = k2;
        bm.n2 = n2;
        bm.act = m.act;
        bm.scale_bias = 1;
        bm.x = dev_copy(xb, (size_t)(t * k1) * 2);
        bm.w1 = dev_copy(w1b, (size_t)(G * n1 * k1) * 2);
        bm.b1 = dev_copy(b1b, (size_t)(G * n1) * 2);
        bm.w2 = dev_copy(w2b, (size_t)(G * n2 * k2) * 2);
        bm.b2 = dev_copy(b2b, (size_t)(G * n2) * 2);
        bm.probs = dev_copy(p, (size_t)t * 4);
        ft_cuda_bf16_mlp_out bo16 = {dev_poison((size_t)(t * n1) * 2),
                                     dev_poison((size_t)(t * k2) * 2),
                                     dev_poison((size_t)(t * n2) * 2), NULL};
        ft_cuda_bf16_mlp_grads bg = {
            dev_poison((size_t)(t * k2) * 2),      dev_poison((size_t)(t * n1) * 2),
            dev_poison((size_t)(t * k1) * 2),      dev_poison((size_t)(G * n1 * k1) * 2),
            dev_poison((size_t)(G * n2 * k2) * 2), dev_poison((size_t)(G * n1) * 4),
            dev_poison((size_t)(G * n2) * 4),      dev_poison((size_t)t * 4)};
        void *ddy = dev_copy(dyb, (size_t)(t * n2) * 2);
        assert_int_equal(ft_cuda_bf16_mlp_forward(&bm, &bo16, NULL, &err), FT_OK);
        assert_int_equal(ft_cuda_bf16_mlp_backward(&bm, &bo16, ddy, &bg, NULL, &err), FT_OK);
        assert_int_equal(ft_cuda_sync(&err), FT_OK);
        struct {
            const char *name;
            void *d;
            int bf16;
            const float *ref;
            int64_t n;
            double atol, rtol;
        } chk[] = {
            {"mlp y", bo16.y, 1, y, used * n2, 2e-2, 2.0 / 128},
            {"mlp dx", bg.dx, 1, dx, used * k1, 2e-2, 3.0 / 128},
            {"mlp dw1", bg.dw1, 1, dw1, G * n1 * k1, 3e-2, 3.0 / 128},
            {"mlp dw2", bg.dw2, 1, dw2, G * n2 * k2, 3e-2, 3.0 / 128},
            {"mlp db1", bg.db1, 0, db1, G * n1, 3e-2, 2.0 / 128},
            {"mlp db2", bg.db2, 0, db2, G * n2, 1e-2, 2.0 / 128},
            {"mlp dprobs", bg.dprobs, 0, dp, used, 5e-2, 2.0 / 128},
        };
        for (size_t i = 0; i < sizeof chk / sizeof chk[0]; i++) {
            float *got = chk[i].bf16 ? host_bf16(chk[i].d, chk[i].n) : host_f32(chk[i].d, chk[i].n);
            char what[96];
            snprintf(what, sizeof what, "%s (%s)", chk[i].name, sc->name);
            assert_int_equal(compare(what, got, chk[i].ref, chk[i].n, chk[i].atol, chk[i].rtol), 0);
            free(got);
        }
        ft_cuda_free((void *)bm.splits);
        ft_cuda_free((void *)bm.x);
        ft_cuda_free((void *)bm.w1);
        ft_cuda_free((void *)bm.b1);
        ft_cuda_free((void *)bm.w2);
        ft_cuda_free((void *)bm.b2);
        ft_cuda_free((void *)bm.probs);
        ft_cuda_free(bo16.h);
        ft_cuda_free(bo16.z);
        ft_cuda_free(bo16.y);
        ft_cuda_free(bg.dz);
        ft_cuda_free(bg.dh);
        ft_cuda_free(bg.dx);
        ft_cuda_free(bg.dw1);
        ft_cuda_free(bg.dw2);
        ft_cuda_free(bg.db1);
        ft_cuda_free(bg.db2);
        ft_cuda_free(bg.dprobs);
        ft_cuda_free(ddy);

        /* the float32 contract, same path */
        mlp_out32 g32 = alloc_out32(&m);
        assert_int_equal(run_f32_device(&m, dy, &g32, &err), FT_OK);
        assert_int_equal(compare("f32 mlp y", g32.y, y, used * n2, 1e-2, 1.0 / 128), 0);
        assert_int_equal(compare("f32 mlp dx", g32.dx, dx, used * k1, 1e-2, 2.0 / 128), 0);
        assert_int_equal(compare("f32 mlp dw1", g32.dw1, dw1, G * n1 * k1, 1e-2, 2.0 / 128), 0);
        assert_int_equal(compare("f32 mlp dprobs", g32.dp, dp, used, 1e-2, 1.0 / 128), 0);
        free_out32(&g32);
        free(x);
        free(w1);
        free(b1);
        free(w2);
        free(b2);
        free(p);
        free(dy);
        free(h);
        free(z);
        free(y);
        free(dx);
        free(dw1);
        free(db1);
        free(dw2);
        free(db2);
        free(dp);
        free(xb);
        free(w1b);
        free(b1b);
        free(w2b);
        free(b2b);
        free(dyb);
    }
}

/* The quantized and fused emulation paths of the float32 contract against ft_cpu_mlp_*: the
 * same fake-quantized operands (the quantizers are bit-exact), so only the GEMMs' accumulation
 * order differs, which can flip a rare rounding decision of a later quantizer: hence an L2
 * tolerance (1% FP8/MXFP8, 3% NVFP4) rather than an element bound. TE's errors (fused T % 128,
 * fused non-RHT NVFP4 with several groups, fused NVFP4 backward with a plain FC2 bias) come back
 * from both back ends with the same code and text. */
static void test_cuda_mlp_quantized_matches_cpu(void **state)
{
    (void)state;
    need_gpu();
    ft_err err, cerr;
    ft_err_clear(&err);
    ft_err_clear(&cerr);
    const uint32_t G = 4;
    int64_t splits[4] = {96, 0, 37, 100}; /* 233 of 256 rows used; 37 not a block multiple */
    const int64_t t = 256, k1 = 160, k2 = 96, n1 = 2 * k2, n2 = 136, used = 233;
    float *x = rand_bf16(t * k1, 1.0f), *w1 = rand_bf16(G * n1 * k1, 0.2f);
    float *b1 = rand_bf16(G * n1, 0.2f), *w2 = rand_bf16(G * n2 * k2, 0.2f);
    float *b2 = rand_bf16(G * n2, 0.2f), *p = rand_bf16(t, 1.0f), *dy = rand_bf16(t * n2, 1.0f);
    x[5] = 0x1p12f; /* one outlier: block scales must follow it */
    struct {
        const char *name;
        ft_qfmt fmt;
        ft_mlp_path path;
        uint8_t rht, sr, two_d, pow2, scale_bias, e5m2;
        int64_t t;
        int want; /* FT_OK or the expected error of both back ends */
        double tol;
    } cfg[] = {
        {"fp8-delayed", FT_QF_FP8_DELAYED, FT_MLP_UNFUSED, 0, 0, 0, 0, 1, 0, 256, FT_OK, 1e-2},
        {"fp8-current pow2", FT_QF_FP8_CURRENT, FT_MLP_UNFUSED, 0, 0, 0, 1, 0, 1, 256, FT_OK, 1e-2},
        {"fp8-block", FT_QF_FP8_BLOCK, FT_MLP_UNFUSED, 0, 0, 0, 0, 1, 0, 256, FT_OK, 1e-2},
        {"mxfp8 unfused", FT_QF_MXFP8, FT_MLP_UNFUSED, 0, 0, 0, 0, 1, 1, 256, FT_OK, 1e-2},
        {"mxfp8 fused 2d", FT_QF_MXFP8, FT_MLP_FUSED, 0, 0, 1, 0, 0, 0, 256, FT_OK, 1e-2},
        {"nvfp4 fused rht sr", FT_QF_NVFP4, FT_MLP_FUSED, 1, 1, 1, 0, 1, 0, 256, FT_OK, 3e-2},
        {"nvfp4 unfused rht", FT_QF_NVFP4, FT_MLP_UNFUSED, 1, 0, 0, 0, 0, 0, 256, FT_OK, 3e-2},
        {"nvfp4 fused non-rht", FT_QF_NVFP4, FT_MLP_FUSED, 0, 0, 0, 0, 1, 0, 256, FT_EUNSUPPORTED,
         0},
        {"nvfp4 fused plain fc2 bias", FT_QF_NVFP4, FT_MLP_FUSED, 1, 0, 0, 0, 0, 0, 256,
         FT_EUNSUPPORTED, 0},
        {"mxfp8 fused t%128", FT_QF_MXFP8, FT_MLP_FUSED, 0, 0, 0, 0, 0, 0, 240, FT_EUNSUPPORTED, 0},
    };
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        ft_mlp m;
        memset(&m, 0, sizeof m);
        m.n_groups = G;
        m.splits = splits;
        m.t = cfg[c].t;
        m.k1 = k1;
        m.n1 = n1;
        m.k2 = k2;
        m.n2 = n2;
        m.act = (ft_act){FT_ACT_SWIGLU, 32, 0, 0, 0};
        m.scale_bias = cfg[c].scale_bias;
        m.path = cfg[c].path;
        m.quant.fmt = cfg[c].fmt;
        m.quant.fp8_fwd = FT_FP8_E4M3;
        m.quant.fp8_bwd = cfg[c].e5m2 ? FT_FP8_E5M2 : FT_FP8_E4M3;
        m.quant.rht = cfg[c].rht;
        m.quant.sr = cfg[c].sr;
        m.quant.two_d = cfg[c].two_d;
        m.quant.pow2_scales = cfg[c].pow2;
        m.quant.seed = 77;
        m.x = x, m.w1 = w1, m.b1 = b1, m.w2 = w2, m.b2 = b2, m.probs = p;
        const int64_t tt = m.t;
        float *h = calloc((size_t)(tt * n1), 4), *z = calloc((size_t)(tt * k2), 4);
        mlp_out32 ref = alloc_out32(&m), got = alloc_out32(&m);
        ft_mlp_fwd fo = {h, z, ref.y};
        ft_mlp_bwd bo = {ref.dx, ref.dw1, ref.db1, ref.dw2, ref.db2, ref.dp};
        int rc_cpu = ft_cpu_mlp_forward(&m, &fo, &cerr);
        if (!rc_cpu) rc_cpu = ft_cpu_mlp_backward(&m, &fo, dy, &bo, &cerr);
        int rc_gpu = run_f32_device(&m, dy, &got, &err);
        print_message("%s: cpu %d gpu %d %s\n", cfg[c].name, rc_cpu, rc_gpu,
                      rc_gpu ? ft_err_msg(&err) : "");
        assert_int_equal(rc_cpu, cfg[c].want);
        assert_int_equal(rc_gpu, cfg[c].want);
        if (cfg[c].want) {
            assert_string_equal(ft_err_msg(&err), ft_err_msg(&cerr));
        } else {
            struct {
                const char *what;
                const float *g, *r;
                int64_t n;
            } chk[] = {
                {"y", got.y, ref.y, used * n2},         {"dx", got.dx, ref.dx, used * k1},
                {"dw1", got.dw1, ref.dw1, G * n1 * k1}, {"dw2", got.dw2, ref.dw2, G * n2 * k2},
                {"db1", got.db1, ref.db1, G * n1},      {"db2", got.db2, ref.db2, G * n2},
                {"dprobs", got.dp, ref.dp, used}};
            for (size_t i = 0; i < sizeof chk / sizeof chk[0]; i++) {
                int64_t exact = 0;
                double e = rel_l2(chk[i].g, chk[i].r, chk[i].n, &exact);
                print_message("  %-6s rel L2 %.2e, %lld of %lld bit-equal\n", chk[i].what, e,
                              (long long)exact, (long long)chk[i].n);
                assert_true(e <= cfg[c].tol);
            }
            /* padding rows are cleared as the reference clears them */
            for (int64_t i = used * n2; i < tt * n2; i++)
                assert_true(got.y[i] == 0.0f && ref.y[i] == 0.0f);
        }
        ft_err_clear(&err);
        ft_err_clear(&cerr);
        free(h);
        free(z);
        free_out32(&ref);
        free_out32(&got);
    }
    free(x);
    free(w1);
    free(b1);
    free(w2);
    free(b2);
    free(p);
    free(dy);
}

/* ---- quantization ------------------------------------------------------------------------ */

static void test_cuda_quantize_matches_cpu(void **state)
{
    (void)state;
    need_gpu();
    ft_err err;
    ft_err_clear(&err);
    const int64_t rows = small_shapes() ? 96 : 400, cols = 272;
    /* groups multiples of 16 (RHT) with an empty one and 32 padding rows */
    int64_t splits[4] = {160, 0, 48, 160};
    if (small_shapes()) splits[0] = 32, splits[2] = 16, splits[3] = 16;
    float *x = rand_bf16(rows * cols, 3.0f);
    x[5] = 0.0f;
    x[cols + 7] = 1e-30f; /* a denormal-range value */
    void *dx = dev_copy(x, (size_t)(rows * cols) * 4);
    void *dsp = dev_copy(splits, sizeof splits);
    float *ref = malloc((size_t)(rows * cols) * 4);
    assert_non_null(ref);
    struct {
        ft_qfmt fmt;
        ft_fp8 fp8;
        int col, two_d, rht, sr, pow2;
    } cfgs[] = {
        {FT_QF_FP8_CURRENT, FT_FP8_E4M3, 0, 0, 0, 0, 0},
        {FT_QF_FP8_CURRENT, FT_FP8_E5M2, 0, 0, 0, 0, 1},
        {FT_QF_FP8_DELAYED, FT_FP8_E4M3, 0, 0, 0, 0, 0},
        {FT_QF_FP8_BLOCK, FT_FP8_E4M3, 0, 0, 0, 0, 0},
        {FT_QF_FP8_BLOCK, FT_FP8_E4M3, 1, 0, 0, 0, 1},
        {FT_QF_FP8_BLOCK, FT_FP8_E4M3, 0, 1, 0, 0, 0},
        {FT_QF_MXFP8, FT_FP8_E4M3, 0, 0, 0, 0, 0},
        {FT_QF_MXFP8, FT_FP8_E5M2, 1, 0, 0, 0, 0},
        {FT_QF_MXFP8, FT_FP8_E4M3, 0, 1, 0, 0, 0},
        {FT_QF_NVFP4, FT_FP8_E4M3, 0, 0, 0, 0, 0},
        {FT_QF_NVFP4, FT_FP8_E4M3, 1, 0, 1, 0, 0},
        {FT_QF_NVFP4, FT_FP8_E4M3, 1, 0, 1, 1, 0},
        {FT_QF_NVFP4, FT_FP8_E4M3, 0, 0, 0, 1, 0},
        {FT_QF_NVFP4, FT_FP8_E4M3, 0, 1, 0, 0, 0},
        {FT_QF_NVFP4, FT_FP8_E4M3, 1, 0, 0, 0, 0},
        {FT_QF_NONE, FT_FP8_E4M3, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        ft_qcfg q;
        memset(&q, 0, sizeof q);
        q.fmt = cfgs[i].fmt;
        q.fp8 = cfgs[i].fp8;
        q.columnwise = (uint8_t)cfgs[i].col;
        q.two_d = (uint8_t)cfgs[i].two_d;
        q.rht = (uint8_t)cfgs[i].rht;
        q.sr = (uint8_t)cfgs[i].sr;
        q.pow2_scales = (uint8_t)cfgs[i].pow2;
        q.scale = 3.5f;
        q.seed = 42;
        q.stream = 3;
        for (int grouped = 0; grouped < 2; grouped++) {
            const int64_t *sp = grouped ? splits : NULL;
            uint32_t G = grouped ? 4 : 0;
            int rc = ft_cpu_quantize(&q, x, rows, cols, sp, G, ref, NULL, &err);
            if (rc) print_message("cpu quantize: %s\n", ft_err_msg(&err));
            assert_int_equal(rc, FT_OK);
            void *dout = dev_poison((size_t)(rows * cols) * 4);
            rc = ft_cuda_quantize(&q, dx, rows, cols, grouped ? dsp : NULL, G, dout, NULL, &err);
            if (rc) print_message("cuda quantize: %s\n", ft_err_msg(&err));
            assert_int_equal(rc, FT_OK);
            assert_int_equal(ft_cuda_sync(&err), FT_OK);
            float *got = host_f32(dout, rows * cols);
            char what[96];
            snprintf(what, sizeof what, "quantize %s col %d 2d %d rht %d sr %d grouped %d",
                     ft_qfmt_name(q.fmt), q.columnwise, q.two_d, q.rht, q.sr, grouped);
            assert_int_equal(compare(what, got, ref, rows * cols, 0.0, 0.0), 0);
            free(got);
            ft_cuda_free(dout);
        }
    }
    ft_cuda_free(dx);
    ft_cuda_free(dsp);
    free(x);
    free(ref);
}

/* The bf16 MLP forward captured once in a CUDA graph follows new split sizes written to the
 * same device buffer between replays (nothing about the splits is baked in at capture). */
static void test_cuda_mlp_forward_graph_follows_splits(void **state)
{
    (void)state;
    need_gpu();
    ft_err err;
    ft_err_clear(&err);
    const uint32_t G = 6;
    const int64_t t = 640, k1 = 136, k2 = 96, n1 = 2 * k2, n2 = 136;
    const int64_t sa[6] = {100, 0, 200, 37, 150, 153}, sb[6] = {0, 300, 1, 0, 250, 89};
    float *x = rand_bf16(t * k1, 1.0f), *w1 = rand_bf16(G * n1 * k1, 0.2f);
    float *w2 = rand_bf16(G * n2 * k2, 0.2f), *p = rand_bf16(t, 1.0f);
    uint16_t *xb = to_bits(x, t * k1), *w1b = to_bits(w1, G * n1 * k1),
             *w2b = to_bits(w2, G * n2 * k2);
    ft_cuda_bf16_mlp m;
    memset(&m, 0, sizeof m);
    m.n_groups = G;
    void *dsplits = dev_copy(sa, sizeof sa);
    m.splits = dsplits;
    m.t = t;
    m.k1 = k1;
    m.n1 = n1;
    m.k2 = k2;
    m.n2 = n2;
    m.act = (ft_act){FT_ACT_SWIGLU, 32, 0, 0, 0};
    m.x = dev_copy(xb, (size_t)(t * k1) * 2);
    m.w1 = dev_copy(w1b, (size_t)(G * n1 * k1) * 2);
    m.w2 = dev_copy(w2b, (size_t)(G * n2 * k2) * 2);
    m.probs = dev_copy(p, (size_t)t * 4);
    ft_cuda_bf16_mlp_out eager = {dev_poison((size_t)(t * n1) * 2),
                                  dev_poison((size_t)(t * k2) * 2),
                                  dev_poison((size_t)(t * n2) * 2), NULL};
    ft_cuda_bf16_mlp_out graph = {dev_poison((size_t)(t * n1) * 2),
                                  dev_poison((size_t)(t * k2) * 2),
                                  dev_poison((size_t)(t * n2) * 2), NULL};
    cudaStream_t st;
    cudaGraph_t gr;
    cudaGraphExec_t ex;
    assert_int_equal(cudaStreamCreate(&st), cudaSuccess);
    assert_int_equal(ft_cuda_bf16_mlp_forward(&m, &eager, st, &err), FT_OK); /* warm-up */
    assert_int_equal(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    assert_int_equal(ft_cuda_bf16_mlp_forward(&m, &graph, st, &err), FT_OK);
    assert_int_equal(cudaStreamEndCapture(st, &gr), cudaSuccess);
    assert_int_equal(cudaGraphInstantiate(&ex, gr, 0), cudaSuccess);
    for (int round = 0; round < 2; round++) {
        const int64_t *sp = round ? sb : sa;
        assert_int_equal(ft_cuda_h2d(dsplits, sp, sizeof sa, &err), FT_OK);
        assert_int_equal(cudaGraphLaunch(ex, st), cudaSuccess);
        assert_int_equal(ft_cuda_bf16_mlp_forward(&m, &eager, st, &err), FT_OK);
        assert_int_equal(cudaStreamSynchronize(st), cudaSuccess);
        const int64_t used = sum_splits(sp, G);
        float *ye = host_bf16(eager.y, used * n2), *yg = host_bf16(graph.y, used * n2);
        assert_int_equal(compare("graph y", yg, ye, used * n2, 0.0, 0.0), 0);
        free(ye);
        free(yg);
    }
    cudaGraphExecDestroy(ex);
    cudaGraphDestroy(gr);
    cudaStreamDestroy(st);
    ft_cuda_free(dsplits);
    ft_cuda_free((void *)m.x);
    ft_cuda_free((void *)m.w1);
    ft_cuda_free((void *)m.w2);
    ft_cuda_free((void *)m.probs);
    ft_cuda_free(eager.h);
    ft_cuda_free(eager.z);
    ft_cuda_free(eager.y);
    ft_cuda_free(graph.h);
    ft_cuda_free(graph.z);
    ft_cuda_free(graph.y);
    free(x);
    free(w1);
    free(w2);
    free(p);
    free(xb);
    free(w1b);
    free(w2b);
}

static void test_cuda_gemm_rejects_bad_shapes(void **state)
{
    (void)state;
    need_gpu();
    ft_err err;
    ft_err_clear(&err);
    ft_gemm g;
    memset(&g, 0, sizeof g);
    g.kind = FT_GEMM_FPROP;
    g.n_groups = 1;
    g.m = -1;
    assert_int_equal(ft_cuda_gemm(&g, NULL, &err), FT_EINVAL);
    assert_non_null(strstr(ft_err_msg(&err), "shape"));
    ft_qcfg q;
    memset(&q, 0, sizeof q);
    q.fmt = FT_QF_MXFP8;
    q.rht = 1;
    assert_int_equal(ft_cuda_quantize(&q, NULL, 1, 1, NULL, 0, NULL, NULL, &err), FT_EINVAL);
}

/* ---- packed quantization (bf16 in -> codes + scales out) --------------------------------- */

typedef struct qp_buf {
    ft_qpacked d; /* device buffers */
    ft_qpacked_sizes sz;
} qp_buf;

static void qp_alloc(const ft_qcfg *q, int col, int64_t rows, int64_t cols, uint32_t G, qp_buf *o)
{
    ft_err err;
    ft_err_clear(&err);
    memset(o, 0, sizeof *o);
    assert_int_equal(ft_qpacked_layout(q, col, rows, cols, G, &o->sz, &err), FT_OK);
    o->d.data = dev_poison(o->sz.data ? o->sz.data : 1);
    o->d.scales = o->sz.scales ? dev_poison(o->sz.scales) : NULL;
    o->d.amax = o->sz.amax ? dev_poison(o->sz.amax) : NULL;
}

static void qp_free(qp_buf *o)
{
    ft_cuda_free(o->d.data);
    ft_cuda_free(o->d.scales);
    ft_cuda_free(o->d.amax);
}

static void *host_bytes(const void *d, size_t n)
{
    void *h = malloc(n ? n : 1);
    ft_err err;
    ft_err_clear(&err);
    assert_non_null(h);
    if (n) assert_int_equal(ft_cuda_d2h(h, d, n, &err), FT_OK);
    return h;
}

/* One usage of a packed quantization against ft_cpu_quantize: decode(packed) == reference bit
 * for bit, per-group amax == the reference's amax of that group alone, and the codes of rows past
 * sum(splits) untouched (poison). */
static void qp_check(const char *what, const ft_qcfg *q, int col, const float *x, int64_t rows,
                     int64_t cols, const int64_t *splits, uint32_t G, const qp_buf *o)
{
    ft_err err;
    ft_err_clear(&err);
    ft_qcfg qc = *q;
    qc.columnwise = (uint8_t)col;
    if (!col) qc.rht = 0;
    const int64_t n = rows * cols;
    float *ref = malloc((size_t)n * 4), *got = malloc((size_t)n * 4);
    assert_non_null(ref);
    assert_non_null(got);
    int rc = ft_cpu_quantize(&qc, x, rows, cols, splits, G, ref, NULL, &err);
    if (rc) print_message("%s: cpu quantize: %s\n", what, ft_err_msg(&err));
    assert_int_equal(rc, FT_OK);
    ft_qpacked h = {host_bytes(o->d.data, o->sz.data),
                    o->sz.scales ? host_bytes(o->d.scales, o->sz.scales) : NULL,
                    o->sz.amax ? host_bytes(o->d.amax, o->sz.amax) : NULL, 0};
    rc = ft_qpacked_decode(&qc, col, rows, cols, splits, G, &h, x, got, &err);
    if (rc) print_message("%s: decode: %s\n", what, ft_err_msg(&err));
    assert_int_equal(rc, FT_OK);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&got[i], &ref[i], 4)) {
            if (bad < 3)
                print_message("%s: [%lld][%lld] got %.9g ref %.9g (x %.9g)\n", what,
                              (long long)(i / cols), (long long)(i % cols), (double)got[i],
                              (double)ref[i], (double)x[i]);
            bad++;
        }
    if (bad) print_message("%s: %lld of %lld differ\n", what, (long long)bad, (long long)n);
    assert_int_equal(bad, 0);
    const int64_t one = rows, *sp = splits ? splits : &one;
    const uint32_t ng = splits ? G : 1;
    int64_t row0 = 0;
    for (uint32_t g = 0; g < ng; g++) {
        if (h.amax) {
            ft_qstats st;
            float *tmp = malloc((size_t)(sp[g] * cols + 1) * 4);
            assert_non_null(tmp);
            assert_int_equal(
                ft_cpu_quantize(&qc, x + row0 * cols, sp[g], cols, NULL, 0, tmp, &st, &err), FT_OK);
            if (memcmp(&h.amax[g], &st.amax, 4))
                print_message("%s: group %u amax got %.9g ref %.9g\n", what, g, (double)h.amax[g],
                              (double)st.amax);
            assert_memory_equal(&h.amax[g], &st.amax, 4);
            free(tmp);
        }
        row0 += sp[g];
    }
    const size_t per_row = (size_t)(q->fmt == FT_QF_NVFP4 ? cols / 2 : cols);
    const uint8_t *d = h.data;
    for (size_t i = (size_t)row0 * per_row; i < (size_t)rows * per_row; i++)
        if (d[i] != 0xFF) {
            print_message("%s: padding code byte %zu written\n", what, i);
            fail();
        }
    free(h.data);
    free(h.scales);
    free(h.amax);
    free(ref);
    free(got);
}

static void test_cuda_qpacked_matches_cpu(void **state)
{
    (void)state;
    need_gpu();
    ft_err err;
    ft_err_clear(&err);
    const int small = small_shapes();
    /* cols: a partial 256-column tile and a partial 1x128 block */
    const int64_t rows = small ? 96 : 400, cols = 288;
    /* s16: multiples of 16 (RHT) with an empty group and padding rows; rag: groups that are not
     * multiples of any block, an empty one and a 1-row one */
    int64_t s16[4] = {160, 0, 48, 160}, rag[5] = {37, 0, 150, 1, 180};
    /* many: 300 groups of 0..2 rows (more groups than a CTA's threads; not in small runs) */
    int64_t many[300];
    for (int g = 0; g < 300; g++)
        many[g] = (int64_t[]){1, 0, 2, 1}[g % 4];
    if (small) {
        const int64_t a[4] = {32, 0, 16, 16}, b[5] = {7, 0, 45, 1, 20};
        memcpy(s16, a, sizeof a);
        memcpy(rag, b, sizeof b);
    }
    /* xa: zeros, an all-zero 1x64 run and 32x1 run, huge values, a denormal-range value, a NaN
     * (MXFP8, FP8); xb: the same without NaN and huge values (NVFP4: E2M1 has no NaN, and one
     * huge value would flush the rest of its group) */
    float *xa = rand_bf16(rows * cols, 3.0f);
    xa[5] = 0.0f;
    for (int64_t c = 64; c < 128; c++)
        xa[2 * cols + c] = 0.0f;
    for (int64_t r = 0; r < 32; r++)
        xa[r * cols + 10] = 0.0f;
    xa[3 * cols + 40] = ft_bf16_round(3.0e38f);
    xa[4 * cols + 41] = ft_bf16_round(-2.5e38f);
    xa[cols + 7] = ft_bf16_round(1e-30f);
    xa[7 * cols + 100] = NAN;
    float *xb = malloc((size_t)(rows * cols) * 4);
    assert_non_null(xb);
    memcpy(xb, xa, (size_t)(rows * cols) * 4);
    xb[3 * cols + 40] = 1000.0f;
    xb[4 * cols + 41] = -1000.0f;
    xb[7 * cols + 100] = 1.0f;
    uint16_t *ba = to_bits(xa, rows * cols), *bb = to_bits(xb, rows * cols);
    void *dxa = dev_copy(ba, (size_t)(rows * cols) * 2),
         *dxb = dev_copy(bb, (size_t)(rows * cols) * 2);
    void *ds16 = dev_copy(s16, sizeof s16), *drag = dev_copy(rag, sizeof rag),
         *dmany = dev_copy(many, sizeof many);
    struct {
        ft_qfmt fmt;
        ft_fp8 fp8;
        int row, col, rht, sr, pow2;
        float eps;
    } cfgs[] = {
        {FT_QF_MXFP8, FT_FP8_E4M3, 1, 1, 0, 0, 0, 0.0f},
        {FT_QF_MXFP8, FT_FP8_E5M2, 1, 1, 0, 0, 0, 0.0f},
        {FT_QF_MXFP8, FT_FP8_E4M3, 1, 0, 0, 0, 0, 0.0f},
        {FT_QF_MXFP8, FT_FP8_E5M2, 0, 1, 0, 0, 0, 0.0f},
        {FT_QF_NVFP4, FT_FP8_E4M3, 1, 1, 1, 0, 0, 0.0f},
        {FT_QF_NVFP4, FT_FP8_E4M3, 1, 1, 1, 1, 0, 0.0f},
        {FT_QF_NVFP4, FT_FP8_E4M3, 1, 1, 0, 0, 0, 0.0f},
        {FT_QF_NVFP4, FT_FP8_E4M3, 0, 1, 0, 1, 0, 0.0f},
        {FT_QF_FP8_CURRENT, FT_FP8_E4M3, 1, 0, 0, 0, 0, 0.0f},
        {FT_QF_FP8_CURRENT, FT_FP8_E5M2, 1, 0, 0, 0, 1, 1e-3f},
        {FT_QF_FP8_BLOCK, FT_FP8_E4M3, 1, 0, 0, 0, 0, 0.0f},
        {FT_QF_FP8_BLOCK, FT_FP8_E5M2, 1, 0, 0, 0, 1, 0.0f},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        ft_qcfg q;
        memset(&q, 0, sizeof q);
        q.fmt = cfgs[i].fmt;
        q.fp8 = cfgs[i].fp8;
        q.rht = (uint8_t)cfgs[i].rht;
        q.sr = (uint8_t)cfgs[i].sr;
        q.pow2_scales = (uint8_t)cfgs[i].pow2;
        q.amax_epsilon = cfgs[i].eps;
        q.seed = 42;
        q.stream = 3;
        const int nv = q.fmt == FT_QF_NVFP4;
        const float *x = nv ? xb : xa;
        for (int s = 0; s < 4; s++) {
            if (s >= 2 && q.rht) continue; /* RHT needs groups in multiples of 16 */
            if (s == 3 && small) continue;
            const int64_t *sp = s == 0 ? NULL : (s == 1 ? s16 : (s == 2 ? rag : many));
            void *dsp = s == 0 ? NULL : (s == 1 ? ds16 : (s == 2 ? drag : dmany));
            const uint32_t G = s == 0 ? 0 : (s == 1 ? 4 : (s == 2 ? 5 : 300));
            qp_buf rb, cb;
            memset(&rb, 0, sizeof rb);
            memset(&cb, 0, sizeof cb);
            if (cfgs[i].row) qp_alloc(&q, 0, rows, cols, G, &rb);
            if (cfgs[i].col) qp_alloc(&q, 1, rows, cols, G, &cb);
            int rc = ft_cuda_bf16_quantize(&q, nv ? dxb : dxa, rows, cols, dsp, G,
                                           cfgs[i].row ? &rb.d : NULL, cfgs[i].col ? &cb.d : NULL,
                                           NULL, &err);
            if (rc) print_message("cuda packed quantize: %s\n", ft_err_msg(&err));
            assert_int_equal(rc, FT_OK);
            assert_int_equal(ft_cuda_sync(&err), FT_OK);
            char what[128];
            for (int col = 0; col < 2; col++) {
                if (!(col ? cfgs[i].col : cfgs[i].row)) continue;
                snprintf(what, sizeof what, "packed %s %s %s rht %d sr %d pow2 %d splits %d",
                         ft_qfmt_name(q.fmt), q.fp8 == FT_FP8_E5M2 ? "e5m2" : "e4m3",
                         col ? "col" : "row", q.rht, q.sr, q.pow2_scales, s);
                qp_check(what, &q, col, x, rows, cols, sp, G, col ? &cb : &rb);
            }
            if (cfgs[i].row) qp_free(&rb);
            if (cfgs[i].col) qp_free(&cb);
        }
    }
    ft_cuda_free(dxa);
    ft_cuda_free(dxb);
    ft_cuda_free(ds16);
    ft_cuda_free(drag);
    ft_cuda_free(dmany);
    free(xa);
    free(xb);
    free(ba);
    free(bb);
}

static void test_cuda_qpacked_rejects_bad_input(void **state)
{
    (void)state;
    need_gpu();
    ft_err err;
    ft_err_clear(&err);
    ft_qcfg q;
    memset(&q, 0, sizeof q);
    q.fmt = FT_QF_MXFP8;
    qp_buf b;
    memset(&b, 0, sizeof b);
    qp_alloc(&q, 0, 64, 64, 0, &b);
    void *dx = dev_poison(64 * 64 * 2);
    /* cols not a multiple of 32 */
    assert_int_equal(ft_cuda_bf16_quantize(&q, dx, 64, 48, NULL, 0, &b.d, NULL, NULL, &err),
                     FT_EINVAL);
    assert_non_null(strstr(ft_err_msg(&err), "multiple of 32"));
    /* no usage */
    assert_int_equal(ft_cuda_bf16_quantize(&q, dx, 64, 64, NULL, 0, NULL, NULL, NULL, &err),
                     FT_EINVAL);
    /* not implemented: 2D tiles, FP8 block columnwise, FP8 delayed */
    q.two_d = 1;
    assert_int_equal(ft_cuda_bf16_quantize(&q, dx, 64, 64, NULL, 0, &b.d, NULL, NULL, &err),
                     FT_EUNSUPPORTED);
    q.two_d = 0;
    q.fmt = FT_QF_FP8_BLOCK;
    assert_int_equal(ft_cuda_bf16_quantize(&q, dx, 64, 64, NULL, 0, NULL, &b.d, NULL, &err),
                     FT_EUNSUPPORTED);
    ft_qpacked_sizes sz;
    assert_int_equal(ft_qpacked_layout(&q, 1, 64, 64, 1, &sz, &err), FT_EUNSUPPORTED);
    q.fmt = FT_QF_FP8_DELAYED;
    assert_int_equal(ft_cuda_bf16_quantize(&q, dx, 64, 64, NULL, 0, &b.d, NULL, NULL, &err),
                     FT_EUNSUPPORTED);
    /* a misaligned output */
    q.fmt = FT_QF_MXFP8;
    ft_qpacked bad = b.d;
    bad.data = (uint8_t *)b.d.data + 1;
    assert_int_equal(ft_cuda_bf16_quantize(&q, dx, 64, 64, NULL, 0, &bad, NULL, NULL, &err),
                     FT_EINVAL);
    ft_cuda_free(dx);
    qp_free(&b);
}

/* ---- numerics fast path (ft_cuda_nx) ----------------------------------------------------- */

/* The device's inputs and float64 reference against ft_cpu_mlp_ref on the same streams, and the
 * fast path (bf16 operands, cuBLAS) against the float32 emulation per format, on ragged splits
 * with empty groups, 1 group and 128 groups. Tolerances: reference 1e-5 relative L2 (float64
 * math in two orders, stored as float32); fast vs emulation 1e-2 (FP8, MXFP8, bf16) and 3e-2
 * (NVFP4): both round the same fp32 results to bf16, so they differ by accumulation order, and
 * where that moves a value across a rounding or quantization boundary by one step of it. */
static void test_cuda_nx_fast_matches_emulation(void **state)
{
    (void)state;
    need_gpu();
    ft_err err;
    ft_err_clear(&err);
    static int64_t s4[4] = {96, 0, 37, 100}, s1[1] = {200}, s128[128];
    for (int g = 0; g < 128; g++)
        s128[g] = (g % 3 == 1) ? 0 : (g * 7) % 13 + (g % 5 == 0 ? 16 : 0);
    int64_t u128 = 0;
    for (int g = 0; g < 128; g++)
        u128 += s128[g];
    struct {
        uint32_t G;
        const int64_t *splits;
        int64_t t, k1, k2, n2;
        ft_act_kind act;
        int interleave;
    } shp[] = {
        {4, s4, 256, 160, 96, 136, FT_ACT_SWIGLU, 32},
        {1, s1, 256, 96, 64, 64, FT_ACT_SRELU, 0},
        {128, s128, (u128 + 127) / 128 * 128, 64, 32, 64, FT_ACT_CLAMPED_QGEGLU, 0},
    };
    struct {
        const char *name;
        ft_qfmt fmt;
        ft_mlp_path path;
        uint8_t rht, sr, two_d, pow2, e5m2;
        double tol;
    } cfg[] = {
        {"bf16", FT_QF_NONE, FT_MLP_UNFUSED, 0, 0, 0, 0, 0, 1e-2},
        {"fp8-delayed", FT_QF_FP8_DELAYED, FT_MLP_UNFUSED, 0, 0, 0, 0, 1, 1e-2},
        {"fp8-current", FT_QF_FP8_CURRENT, FT_MLP_UNFUSED, 0, 0, 0, 0, 1, 1e-2},
        {"fp8-block pow2", FT_QF_FP8_BLOCK, FT_MLP_UNFUSED, 0, 0, 0, 1, 0, 1e-2},
        {"fp8-block fp32 scales", FT_QF_FP8_BLOCK, FT_MLP_UNFUSED, 0, 0, 0, 0, 0, 1e-2},
        {"mxfp8 unfused", FT_QF_MXFP8, FT_MLP_UNFUSED, 0, 0, 0, 0, 1, 1e-2},
        {"mxfp8 fused 2d", FT_QF_MXFP8, FT_MLP_FUSED, 0, 0, 1, 0, 0, 1e-2},
        {"nvfp4 fused rht sr 2d", FT_QF_NVFP4, FT_MLP_FUSED, 1, 1, 1, 0, 0, 3e-2},
        {"nvfp4 unfused rht", FT_QF_NVFP4, FT_MLP_UNFUSED, 1, 0, 0, 0, 0, 3e-2},
        {"nvfp4 unfused no rht", FT_QF_NVFP4, FT_MLP_UNFUSED, 0, 0, 0, 0, 0, 3e-2},
        {"nvfp4 fused no rht", FT_QF_NVFP4, FT_MLP_FUSED, 0, 0, 0, 0, 0, 3e-2},
    };
    ft_cuda_nx *nx = NULL;
    assert_int_equal(ft_cuda_nx_new(&nx, &err), FT_OK);
    for (size_t s = 0; s < sizeof shp / sizeof shp[0]; s++) {
        const uint32_t G = shp[s].G;
        const int64_t t = shp[s].t, k1 = shp[s].k1, k2 = shp[s].k2, n2 = shp[s].n2;
        const int glu = shp[s].act != FT_ACT_SRELU;
        const int64_t n1 = glu ? 2 * k2 : k2;
        ft_nx_problem p = {.n_groups = G,
                           .splits = shp[s].splits,
                           .t = t,
                           .k1 = k1,
                           .n1 = n1,
                           .k2 = k2,
                           .n2 = n2,
                           .act = {shp[s].act, shp[s].interleave, 7.0f, 1.702f, 1.0f},
                           .bias1 = 1,
                           .bias2 = 1,
                           .scaled = 1,
                           .scale_bias = s != 1,
                           .grad = 1,
                           .wseed = 11 + s,
                           .xseed = 101 + s,
                           .w1_scale = 1.0f / sqrtf((float)k1),
                           .w2_scale = 1.0f / sqrtf((float)k2)};
        assert_int_equal(ft_cuda_nx_problem(nx, &p, &err), FT_OK);
        const int64_t cnt[4] = {t * n2, t * k1, G * n1 * k1, G * n2 * k2};
        float *fa[4], *fb[4];
        for (int o = 0; o < 4; o++) {
            fa[o] = malloc((size_t)(cnt[o] > 0 ? cnt[o] : 1) * 4);
            fb[o] = malloc((size_t)(cnt[o] > 0 ? cnt[o] : 1) * 4);
            assert_true(fa[o] && fb[o]);
        }
        /* the reference against the CPU's on the same streams */
        {
            float *x = malloc((size_t)(t * k1) * 4), *w1 = malloc((size_t)(G * n1 * k1) * 4);
            float *w2 = malloc((size_t)(G * n2 * k2) * 4), *b1 = malloc((size_t)(G * n1) * 4);
            float *b2 = malloc((size_t)(G * n2) * 4), *pr = malloc((size_t)t * 4);
            float *dy = malloc((size_t)(t * n2) * 4);
            for (int64_t i = 0; i < t * k1; i++)
                x[i] = ft_bf16_round(ft_nx_gauss(p.xseed + 1, (uint64_t)i));
            for (int64_t i = 0; i < G * n1 * k1; i++)
                w1[i] = ft_bf16_round(ft_nx_gauss(p.wseed + 2, (uint64_t)i) * p.w1_scale);
            for (int64_t i = 0; i < G * n1; i++)
                b1[i] = ft_bf16_round(ft_nx_gauss(p.wseed + 3, (uint64_t)i) * 0.1f);
            for (int64_t i = 0; i < G * n2 * k2; i++)
                w2[i] = ft_bf16_round(ft_nx_gauss(p.wseed + 4, (uint64_t)i) * p.w2_scale);
            for (int64_t i = 0; i < G * n2; i++)
                b2[i] = ft_bf16_round(ft_nx_gauss(p.wseed + 5, (uint64_t)i) * 0.1f);
            for (int64_t i = 0; i < t; i++)
                pr[i] = ft_bf16_round(
                    0.5f + 0.45f * tanhf(ft_bf16_round(ft_nx_gauss(p.xseed + 6, (uint64_t)i))));
            for (int64_t i = 0; i < t * n2; i++)
                dy[i] = ft_bf16_round(ft_nx_gauss(p.xseed + 7, (uint64_t)i));
            ft_mlp m = {.n_groups = G,
                        .splits = p.splits,
                        .t = t,
                        .k1 = k1,
                        .n1 = n1,
                        .k2 = k2,
                        .n2 = n2,
                        .act = p.act,
                        .scale_bias = p.scale_bias,
                        .x = x,
                        .w1 = w1,
                        .b1 = b1,
                        .w2 = w2,
                        .b2 = b2,
                        .probs = pr};
            double *r64[4];
            for (int o = 0; o < 4; o++)
                r64[o] = calloc((size_t)(cnt[o] > 0 ? cnt[o] : 1), 8);
            ft_mlp_ref r = {.y = r64[0], .dx = r64[1], .dw1 = r64[2], .dw2 = r64[3]};
            assert_int_equal(ft_cpu_mlp_ref(&m, dy, &r, &err), FT_OK);
            for (int o = 0; o < 4; o++) {
                assert_int_equal(ft_cuda_nx_reference(nx, o, fa[o], &err), FT_OK);
                for (int64_t i = 0; i < cnt[o]; i++)
                    fb[o][i] = (float)r64[o][i];
                int64_t exact = 0;
                double e = rel_l2(fa[o], fb[o], cnt[o], &exact);
                print_message("shape %zu reference %d: rel L2 %.2e vs the CPU's\n", s, o, e);
                assert_true(e <= 1e-5);
                free(r64[o]);
            }
            free(x), free(w1), free(w2), free(b1), free(b2), free(pr), free(dy);
        }
        for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
            ft_mlp_quant q = {.fmt = cfg[c].fmt,
                              .fp8_fwd = FT_FP8_E4M3,
                              .fp8_bwd = cfg[c].e5m2 ? FT_FP8_E5M2 : FT_FP8_E4M3,
                              .rht = cfg[c].rht,
                              .sr = cfg[c].sr,
                              .two_d = cfg[c].two_d,
                              .pow2_scales = cfg[c].pow2,
                              .seed = 5};
            assert_int_equal(ft_cuda_nx_problem(nx, &p, &err), FT_OK); /* slots from 0 */
            assert_int_equal(ft_cuda_nx_run(nx, cfg[c].path, &q, FT_NX_BASE, &err), FT_OK);
            ft_nx_figs f[3];
            assert_int_equal(ft_cuda_nx_collect(nx, f, 1, &err), FT_OK);
            for (int o = 0; o < 4 && !f[0].rc; o++)
                assert_int_equal(ft_cuda_nx_download(nx, o, fa[o], &err), FT_OK);
            assert_int_equal(ft_cuda_nx_run(nx, cfg[c].path, &q, FT_NX_EMULATE, &err), FT_OK);
            assert_int_equal(ft_cuda_nx_collect(nx, f, 2, &err), FT_OK);
            for (int o = 0; o < 4 && !f[1].rc; o++)
                assert_int_equal(ft_cuda_nx_download(nx, o, fb[o], &err), FT_OK);
            assert_int_equal(ft_cuda_nx_run(nx, cfg[c].path, &q, 0, &err), FT_OK);
            assert_int_equal(ft_cuda_nx_collect(nx, f, 3, &err), FT_OK);
            print_message("shape %zu %-22s rc %d fast %d: err %.3e emulated %.3e, div %.2e, "
                          "again %.2e\n",
                          s, cfg[c].name, f[0].rc, f[0].fast, f[0].err, f[1].err, f[1].div,
                          f[2].div);
            /* refusals are the same on both modes and decided before anything runs */
            assert_int_equal(f[0].rc, f[1].rc);
            assert_string_equal(f[0].msg, f[1].msg);
            { /* TE's refusals as ft_mlp_check decides them on the host */
                ft_mlp hm = {.n_groups = G,
                             .splits = p.splits,
                             .t = t,
                             .k1 = k1,
                             .n1 = n1,
                             .k2 = k2,
                             .n2 = n2,
                             .act = p.act,
                             .scale_bias = p.scale_bias,
                             .path = cfg[c].path,
                             .quant = q,
                             .x = fa[0],
                             .w1 = fa[0],
                             .b1 = fa[0],
                             .w2 = fa[0],
                             .b2 = fa[0],
                             .probs = fa[0]};
                ft_err herr;
                ft_err_clear(&herr);
                int want = ft_mlp_check(&hm, 1, &herr);
                assert_int_equal(f[0].rc, want);
                if (want) {
                    assert_int_equal(want, FT_EUNSUPPORTED);
                    assert_string_equal(f[0].msg, ft_err_msg(&herr));
                    continue;
                }
            }
            assert_int_equal(f[0].rc, FT_OK);
            assert_int_equal(f[0].fast, !(cfg[c].fmt == FT_QF_FP8_BLOCK && !cfg[c].pow2));
            assert_int_equal(f[1].fast, 0);
            assert_true(f[1].has_base && f[2].has_base);
            assert_true(f[2].div == 0.0 && f[2].div_max_abs == 0.0); /* deterministic */
            assert_true(f[0].nonfinite == 0 && f[1].nonfinite == 0);
            assert_true(f[1].div <= cfg[c].tol);
            assert_true(fabs(f[0].err - f[1].err) <= 0.25 * f[1].err + 1e-4);
            /* the emulated run's outputs against the fast run's, element by element */
            for (int o = 0; o < 4; o++) {
                int64_t exact = 0;
                double e = rel_l2(fa[o], fb[o], cnt[o], &exact);
                if (e > cfg[c].tol) print_error("output %d: rel L2 %.3e\n", o, e);
                assert_true(e <= cfg[c].tol);
            }
        }
        for (int o = 0; o < 4; o++)
            free(fa[o]), free(fb[o]);
    }
    ft_cuda_nx_free(nx);
}

/* The benchmarks' device-side inputs: the same values for the same seed, other values for
 * another, inside [-scale, scale), not constant (so no benchmark times zeros). */
static void test_cuda_fill_random_is_repeatable(void **state)
{
    (void)state;
    need_gpu();
    ft_err err;
    ft_err_clear(&err);
    const int64_t n = 100003; /* not a multiple of the launch's block */
    void *d = NULL;
    assert_int_equal(ft_cuda_malloc(&d, (size_t)n * 2, &err), FT_OK);
    float *v[3];
    const uint64_t seeds[3] = {7, 7, 8};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ft_cuda_memset(d, 0xFF, (size_t)n * 2, &err), FT_OK); /* NaN poison */
        assert_int_equal(ft_cuda_bf16_fill_random(d, n, 0.5f, seeds[k], NULL, &err), FT_OK);
        assert_int_equal(ft_cuda_sync(&err), FT_OK);
        v[k] = host_bf16(d, n);
    }
    assert_memory_equal(v[0], v[1], (size_t)n * 4);
    int64_t same = 0, neg = 0;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        assert_true(v[0][i] >= -0.5f && v[0][i] <= 0.5f); /* bf16 rounding may reach 0.5 */
        same += v[0][i] == v[2][i];
        neg += v[0][i] < 0.0f;
        sum += v[0][i];
    }
    assert_true(same < n / 50);
    assert_true(neg > n * 2 / 5 && neg < n * 3 / 5);
    assert_true(fabs(sum / (double)n) < 0.01);
    for (int k = 0; k < 3; k++)
        free(v[k]);
    ft_cuda_free(d);
}

#endif /* FT_HAVE_CUDA */

static void test_cuda_device_count_is_sane(void **state)
{
    (void)state;
    int n = ft_cuda_device_count();
    assert_true(n >= 0);
#ifndef FT_HAVE_CUDA
    assert_int_equal(n, 0);
    ft_err err;
    ft_err_clear(&err);
    ft_gemm g;
    memset(&g, 0, sizeof g);
    assert_int_equal(ft_cuda_gemm(&g, NULL, &err), FT_ENODEV);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_device_count_is_sane),
#ifdef FT_HAVE_CUDA
        cmocka_unit_test(test_cuda_gemm_rejects_bad_shapes),
        cmocka_unit_test(test_cuda_gemm_matches_cpu),
        cmocka_unit_test(test_cuda_fc1_epilogue_matches_cpu),
        cmocka_unit_test(test_cuda_act_backward_matches_cpu),
        cmocka_unit_test(test_cuda_mlp_matches_cpu),
        cmocka_unit_test(test_cuda_mlp_quantized_matches_cpu),
        cmocka_unit_test(test_cuda_quantize_matches_cpu),
        cmocka_unit_test(test_cuda_mlp_forward_graph_follows_splits),
        cmocka_unit_test(test_cuda_qpacked_matches_cpu),
        cmocka_unit_test(test_cuda_qpacked_rejects_bad_input),
        cmocka_unit_test(test_cuda_nx_fast_matches_emulation),
        cmocka_unit_test(test_cuda_fill_random_is_repeatable),
#endif
    };
    /* FT_CUDA_TEST_FILTER=PATTERN runs the matching tests only (cmocka's wildcard pattern): lets
     * a compute-sanitizer run cover a few tests within its time limit */
    const char *filter = getenv("FT_CUDA_TEST_FILTER");
    if (filter && filter[0]) cmocka_set_test_filter(filter);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
