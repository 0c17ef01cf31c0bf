/*
 * quant.c - quantization emulation exact to TransformerEngine's semantics (docs/fuser-model.md,
 * "Quantization formats"): quantize, then dequantize to float32 in TE's dequantization order.
 *
 * Layouts: rowwise 1D blocks run along a row; columnwise 1D blocks are handled in slabs of
 * block-size rows with one block per column (no transposes); 2D tiles are shared by both usages.
 * The element loops are branchless so the compiler vectorizes them. Groups are row splits
 * quantized independently.
 *
 * Limits: NVFP4 4over6 and row-scaled activations are not emulated; FP8 delayed scaling takes its
 * scale from the caller (ft_delayed) and does not model amax reduction across ranks.
 */
#include "formats_int.h"

#include <float.h>
#include <math.h>
#include <string.h>

static const char *const qfmt_names[FT_QF_COUNT] = {"none",      "fp8-delayed", "fp8-current",
                                                    "fp8-block", "mxfp8",       "nvfp4"};

const char *ft_qfmt_name(ft_qfmt f)
{
    return (unsigned)f < FT_QF_COUNT ? qfmt_names[f] : "?";
}

/* ---- element loops ------------------------------------------------------------------------ */

#if defined(__GNUC__)
#define FT_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define FT_ALWAYS_INLINE inline
#endif

enum { K_E4M3, K_E5M2, K_E2M1, K_E2M1_SR };

typedef struct qrun {
    const ft_qcfg *q;
    int kind;          /* K_* element rounding */
    float fmax;        /* element format max */
    float g_amax;      /* NVFP4: group amax A (post-RHT) */
    float g_scale;     /* NVFP4: S; FP8 per-tensor: scale */
    float g_scale_dec; /* NVFP4: 1/S */
    uint64_t rng_key;  /* SR: key of (seed, usage stream) */
    int64_t n_sat;
} qrun;

/* p[i] <- round(p[i] * mult[i * ps]) * deq[i * ps] for i < n; ps is 0 (one block) or 1 (one
 * parameter per element, the columnwise slab). Counter of element i: c0 + i. Returns the number
 * of saturated elements. Specialised per (kind, ps) by inlining. */
static FT_ALWAYS_INLINE int64_t run(int kind, float *p, int64_t n, const float *mult,
                                    const float *deq, int64_t ps, uint64_t key, uint64_t c0,
                                    float fmax)
{
    int64_t sat = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = p[i] * mult[i * ps];
        sat += fabsf(v) > fmax;
        float q;
        switch (kind) {
        case K_E4M3:
            q = e4m3_q(v);
            break;
        case K_E5M2:
            q = e5m2_q(v);
            break;
        case K_E2M1:
            q = e2m1_q(v);
            break;
        default:
            q = e2m1_q_sr(v, rng_at(key, c0 + (uint64_t)i));
            break;
        }
        p[i] = q * deq[i * ps];
    }
    return sat;
}

static void quant_vals(qrun *r, float *p, int64_t n, const float *mult, const float *deq,
                       int per_elem, uint64_t c0)
{
    const uint64_t k = r->rng_key;
    const float m = r->fmax;
    int64_t s;
    if (per_elem) {
        switch (r->kind) {
        case K_E4M3:
            s = run(K_E4M3, p, n, mult, deq, 1, k, c0, m);
            break;
        case K_E5M2:
            s = run(K_E5M2, p, n, mult, deq, 1, k, c0, m);
            break;
        case K_E2M1:
            s = run(K_E2M1, p, n, mult, deq, 1, k, c0, m);
            break;
        default:
            s = run(K_E2M1_SR, p, n, mult, deq, 1, k, c0, m);
            break;
        }
    } else {
        switch (r->kind) {
        case K_E4M3:
            s = run(K_E4M3, p, n, mult, deq, 0, k, c0, m);
            break;
        case K_E5M2:
            s = run(K_E5M2, p, n, mult, deq, 0, k, c0, m);
            break;
        case K_E2M1:
            s = run(K_E2M1, p, n, mult, deq, 0, k, c0, m);
            break;
        default:
            s = run(K_E2M1_SR, p, n, mult, deq, 0, k, c0, m);
            break;
        }
    }
    r->n_sat += s;
}

/* ---- block parameters --------------------------------------------------------------------- */

static float max_abs(const float *p, int64_t n) /* NaN-ignoring, like fmaxf */
{
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf(p[i]);
        m = a > m ? a : m;
    }
    return m;
}

/* Multiplier and dequantization factor of one block with max |x| = amax. */
static void block_params(const qrun *r, float amax, float *mult, float *deq)
{
    switch (r->q->fmt) {
    case FT_QF_MXFP8: {
        uint8_t code = mxfp8_code(amax, r->fmax);
        *mult = e8m0_quant(code);
        *deq = e8m0_dequant(code);
        break;
    }
    case FT_QF_NVFP4: {
        float d = nvfp4_block_scale(amax, r->g_scale);
        *mult = nvfp4_block_mult(d, r->g_scale_dec);
        *deq = nvfp4_dequant(d, r->g_amax);
        break;
    }
    case FT_QF_FP8_BLOCK: {
        float s = fp8_scale_from_amax(amax, r->fmax, r->q->pow2_scales, r->q->amax_epsilon);
        *mult = s;
        *deq = 1.0f / s;
        break;
    }
    default: /* per-tensor FP8: the group's scale */
        *mult = r->g_scale;
        *deq = 1.0f / r->g_scale;
        break;
    }
}

int ft_qfmt_block(ft_qfmt f)
{
    switch (f) {
    case FT_QF_MXFP8:
        return 32;
    case FT_QF_NVFP4:
        return 16;
    case FT_QF_FP8_BLOCK:
        return 128;
    default:
        return 0; /* per tensor */
    }
}

/* ---- layouts ------------------------------------------------------------------------------ */

/* Rowwise 1D blocks over buf[nr][nc]; element (i, j) has counter base + i*nc + j. */
static void quant_rows(qrun *r, float *buf, int64_t nr, int64_t nc, uint64_t base)
{
    const int64_t bs = ft_qfmt_block(r->q->fmt);
    for (int64_t i = 0; i < nr; i++) {
        float *row = buf + i * nc;
        for (int64_t j0 = 0; j0 < nc; j0 += bs) {
            int64_t n = nc - j0 < bs ? nc - j0 : bs;
            float mult, deq;
            block_params(r, max_abs(row + j0, n), &mult, &deq);
            quant_vals(r, row + j0, n, &mult, &deq, 0, base + (uint64_t)(i * nc + j0));
        }
    }
}

/* Columnwise 1D blocks: slabs of bs rows, one block per column of a slab. col[3*nc] scratch. */
static void quant_cols(qrun *r, float *buf, int64_t nr, int64_t nc, uint64_t base, float *col)
{
    const int64_t bs = ft_qfmt_block(r->q->fmt);
    float *amax = col, *mult = col + nc, *deq = col + 2 * nc;
    for (int64_t i0 = 0; i0 < nr; i0 += bs) {
        int64_t ni = nr - i0 < bs ? nr - i0 : bs;
        for (int64_t j = 0; j < nc; j++)
            amax[j] = 0.0f;
        for (int64_t i = i0; i < i0 + ni; i++) {
            const float *row = buf + i * nc;
            for (int64_t j = 0; j < nc; j++) {
                float a = fabsf(row[j]);
                amax[j] = a > amax[j] ? a : amax[j];
            }
        }
        for (int64_t j = 0; j < nc; j++)
            block_params(r, amax[j], &mult[j], &deq[j]);
        for (int64_t i = i0; i < i0 + ni; i++)
            quant_vals(r, buf + i * nc, nc, mult, deq, 1, base + (uint64_t)(i * nc));
    }
}

/* Square tiles of side bs over buf[nr][nc] (2D; rowwise and columnwise alike). */
static void quant_tiles(qrun *r, float *buf, int64_t nr, int64_t nc, uint64_t base)
{
    const int64_t bs = ft_qfmt_block(r->q->fmt);
    for (int64_t i0 = 0; i0 < nr; i0 += bs) {
        int64_t ni = nr - i0 < bs ? nr - i0 : bs;
        for (int64_t j0 = 0; j0 < nc; j0 += bs) {
            int64_t nj = nc - j0 < bs ? nc - j0 : bs;
            float amax = 0.0f;
            for (int64_t i = 0; i < ni; i++) {
                float a = max_abs(buf + (i0 + i) * nc + j0, nj);
                amax = a > amax ? a : amax;
            }
            float mult, deq;
            block_params(r, amax, &mult, &deq);
            for (int64_t i = 0; i < ni; i++)
                quant_vals(r, buf + (i0 + i) * nc + j0, nj, &mult, &deq, 0,
                           base + (uint64_t)((i0 + i) * nc + j0));
        }
    }
}

/* In place: every 16-row chunk of every column of buf[nr][nc] <- bf16(bf16(chunk) M), as
 * ft_rht16 does, vectorized across columns. */
static void rht_rows(float *buf, int64_t nr, int64_t nc)
{
    for (int64_t i0 = 0; i0 + 16 <= nr; i0 += 16) {
        float *rows[16];
        for (int i = 0; i < 16; i++) {
            rows[i] = buf + (i0 + i) * nc;
            const float s = (float)ft_rht_signs[i];
            for (int64_t j = 0; j < nc; j++)
                rows[i][j] = s * bf16_round(rows[i][j]);
        }
        for (int len = 1; len < 16; len <<= 1)
            for (int i = 0; i < 16; i++)
                if (!(i & len)) {
                    float *ra = rows[i], *rb = rows[i + len];
                    for (int64_t j = 0; j < nc; j++) {
                        float a = ra[j], b = rb[j];
                        ra[j] = a + b;
                        rb[j] = a - b;
                    }
                }
        for (int i = 0; i < 16; i++)
            for (int64_t j = 0; j < nc; j++)
                rows[i][j] = bf16_round(rows[i][j] * 0.25f);
    }
}

/* ---- one group ---------------------------------------------------------------------------- */

/* Quantize group rows [row0, row0+nr) of x into out; col holds 3*nc floats. */
static void quant_group(qrun *r, const float *x, float *out, int64_t row0, int64_t nr, int64_t nc,
                        float *col, float *amax_out)
{
    const ft_qcfg *q = r->q;
    const float *src = x + row0 * nc;
    float *dst = out + row0 * nc;
    const uint64_t base = (uint64_t)(row0 * nc);

    if (dst != src) memcpy(dst, src, (size_t)(nr * nc) * sizeof *dst);
    if (q->rht) rht_rows(dst, nr, nc);
    float g_amax = max_abs(dst, nr * nc);
    *amax_out = g_amax;
    if (q->fmt == FT_QF_NVFP4) {
        r->g_amax = g_amax;
        r->g_scale = nvfp4_global_scale(g_amax);
        r->g_scale_dec = 1.0f / r->g_scale;
    } else if (q->fmt == FT_QF_FP8_CURRENT) {
        r->g_scale = fp8_scale_from_amax(g_amax, r->fmax, q->pow2_scales, q->amax_epsilon);
    } else if (q->fmt == FT_QF_FP8_DELAYED) {
        r->g_scale = q->scale;
    }

    if (q->fmt == FT_QF_NONE) return;
    if (ft_qfmt_block(q->fmt) == 0) { /* per-tensor FP8: one scale, usage irrelevant */
        float mult, deq;
        block_params(r, g_amax, &mult, &deq);
        quant_vals(r, dst, nr * nc, &mult, &deq, 0, base);
    } else if (q->two_d) {
        quant_tiles(r, dst, nr, nc, base);
    } else if (q->columnwise) {
        quant_cols(r, dst, nr, nc, base, col);
    } else {
        quant_rows(r, dst, nr, nc, base);
    }
}

/* ---- public ------------------------------------------------------------------------------- */

static int check_cfg(const ft_qcfg *q, ft_err *err)
{
    if (!q) return ft_err_set(err, FT_EINVAL, "quantize: no quantizer config");
    if ((unsigned)q->fmt >= FT_QF_COUNT)
        return ft_err_set(err, FT_EINVAL, "quantize: unknown format %d", (int)q->fmt);
    if (q->fp8 != FT_FP8_E4M3 && q->fp8 != FT_FP8_E5M2)
        return ft_err_set(err, FT_EINVAL, "quantize: unknown fp8 type %d", (int)q->fp8);
    if (q->rht && !(q->fmt == FT_QF_NVFP4 && q->columnwise && !q->two_d))
        return ft_err_set(err, FT_EINVAL,
                          "quantize: RHT applies to NVFP4 columnwise 1D data only (format %s%s%s)",
                          ft_qfmt_name(q->fmt), q->columnwise ? "" : ", rowwise",
                          q->two_d ? ", 2D" : "");
    if (q->sr && q->fmt != FT_QF_NVFP4)
        return ft_err_set(err, FT_EINVAL, "quantize: stochastic rounding is NVFP4 only (format %s)",
                          ft_qfmt_name(q->fmt));
    if (q->two_d && (q->fmt != FT_QF_NVFP4 && q->fmt != FT_QF_MXFP8 && q->fmt != FT_QF_FP8_BLOCK))
        return ft_err_set(err, FT_EINVAL, "quantize: 2D tiles need mxfp8, nvfp4 or fp8-block");
    if (q->fmt == FT_QF_FP8_DELAYED && !(q->scale > 0.0f && isfinite(q->scale)))
        return ft_err_set(err, FT_EINVAL, "quantize: fp8-delayed scale %g is not positive finite",
                          (double)q->scale);
    return FT_OK;
}

int ft_cpu_quantize(const ft_qcfg *q, const float *x, int64_t rows, int64_t cols,
                    const int64_t *splits, uint32_t n_groups, float *out, ft_qstats *st,
                    ft_err *err)
{
    int rc = check_cfg(q, err);
    if (rc) return rc;
    if (rows < 0 || cols < 0 || (rows > 0 && cols > INT64_MAX / rows))
        return ft_err_set(err, FT_EINVAL, "quantize: bad shape %lld x %lld", (long long)rows,
                          (long long)cols);
    if (rows * cols > 0 && (!x || !out))
        return ft_err_set(err, FT_EINVAL, "quantize: NULL input or output");
    if (splits && n_groups == 0)
        return ft_err_set(err, FT_EINVAL, "quantize: splits given with 0 groups");
    int64_t one = rows, total = 0;
    if (!splits) {
        splits = &one;
        n_groups = 1;
    }
    for (uint32_t g = 0; g < n_groups; g++) {
        if (splits[g] < 0 || splits[g] > rows - total)
            return ft_err_set(err, FT_EINVAL,
                              "quantize: split %u = %lld is negative or overruns %lld rows", g,
                              (long long)splits[g], (long long)rows);
        if (q->rht && splits[g] % 16)
            return ft_err_set(err, FT_EINVAL,
                              "quantize: RHT needs group rows in multiples of 16 (group %u has "
                              "%lld)",
                              g, (long long)splits[g]);
        total += splits[g];
    }

    float *col = NULL;
    if (q->columnwise && !q->two_d && ft_qfmt_block(q->fmt) > 0 && cols > 0) {
        col = ft_malloc((size_t)(3 * cols) * sizeof *col);
        if (!col)
            return ft_err_set(err, FT_ENOMEM, "quantize: no memory for %lld columns",
                              (long long)cols);
    }
    qrun r = {.q = q, .fmax = q->fmt == FT_QF_NVFP4 ? FT_E2M1_MAX : ft_fp8_max(q->fp8)};
    r.kind = q->fmt == FT_QF_NVFP4 ? (q->sr ? K_E2M1_SR : K_E2M1)
                                   : (q->fp8 == FT_FP8_E5M2 ? K_E5M2 : K_E4M3);
    r.rng_key = rng_key(q->seed, q->stream * 2u + (q->columnwise ? 1u : 0u));
    float amax = 0.0f;
    int64_t row0 = 0;
    for (uint32_t g = 0; g < n_groups; g++) {
        float ga = 0.0f;
        if (splits[g] > 0) quant_group(&r, x, out, row0, splits[g], cols, col, &ga);
        amax = ga > amax ? ga : amax;
        row0 += splits[g];
    }
    if (row0 < rows && out != x)
        memcpy(out + row0 * cols, x + row0 * cols, (size_t)((rows - row0) * cols) * sizeof *out);
    ft_free(col);

    if (st) {
        memset(st, 0, sizeof *st);
        st->amax = amax;
        st->n_sat = r.n_sat;
        for (int64_t i = 0; i < rows * cols; i++)
            st->n_nan += !isfinite(out[i]);
    }
    return FT_OK;
}

void ft_quant_error(const float *x, const float *xq, size_t n, ft_qstats *st)
{
    double sig = 0.0, noise = 0.0, max_abs = 0.0;
    int64_t flush = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)xq[i] - (double)x[i];
        double a = fabs(d);
        if (a > max_abs || isnan(a)) max_abs = a;
        noise += d * d;
        sig += (double)x[i] * (double)x[i];
        flush += x[i] != 0.0f && xq[i] == 0.0f;
    }
    st->max_abs = max_abs;
    st->rel_l2 = sig > 0.0 ? sqrt(noise / sig) : (noise > 0.0 ? INFINITY : 0.0);
    st->snr_db = noise > 0.0 ? 10.0 * log10(sig / noise) : INFINITY;
    st->n_flush = flush;
}

/* ---- delayed scaling ---------------------------------------------------------------------- */

int ft_delayed_init(ft_delayed *d, int64_t len, ft_fp8 fp8, float margin, int most_recent,
                    ft_err *err)
{
    memset(d, 0, sizeof *d);
    if (len < 1 || len > (1 << 24))
        return ft_err_set(err, FT_ERANGE, "delayed scaling: amax_history_len %lld out of range",
                          (long long)len);
    d->hist = ft_calloc((size_t)len, sizeof *d->hist);
    if (!d->hist) return ft_err_set(err, FT_ENOMEM, "delayed scaling: no memory for history");
    d->len = len;
    d->scale = 1.0f;
    d->margin = margin;
    d->fp8 = fp8;
    d->most_recent = (uint8_t)(most_recent != 0);
    return FT_OK;
}

void ft_delayed_update(ft_delayed *d, float amax)
{
    if (!d->hist) return;
    d->hist[d->pos] = amax;
    d->pos = (d->pos + 1) % d->len;
    d->n_seen++;
    float a = amax;
    if (!d->most_recent) {
        a = 0.0f;
        for (int64_t i = 0; i < d->len; i++)
            a = (d->hist[i] > a || isnan(d->hist[i])) ? d->hist[i] : a;
    }
    float sf = ft_fp8_max(d->fp8) / a;
    sf = sf / powf(2.0f, d->margin);
    if (a > 0.0f && isfinite(a)) d->scale = sf;
}

void ft_delayed_free(ft_delayed *d)
{
    ft_free(d->hist);
    memset(d, 0, sizeof *d);
}
