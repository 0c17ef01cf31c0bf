/*
 * mlp.c - the grouped MLP (FC1 -> scaled activation -> FC2) forward and backward on the CPU,
 * fused and unfused, with fake-quantized GEMM operands (docs/fuser-model.md, "Grouped-MLP math").
 *
 * Operand usages ("GEMM operands"): fprop X rowwise x W rowwise; dgrad dY rowwise x W
 * columnwise; wgrad dY columnwise x X columnwise, contracted over each group's tokens. With RHT
 * the two wgrad operands are rotated along the token axis (groups zero-padded to 16 rows), which
 * cancels in the product.
 *
 * Where bf16 rounding happens is what separates the paths (see ft_mlp_path in ft_kernels.h).
 * Assumption (docs/fuser-model.md, "Limits and open questions"; not answerable from TE's source):
 * the fused FC1 epilogue evaluates the activation on the fp32 accumulator + bias, and db1 of the
 * fused dGLU kernel is reduced from fp32 dh.
 */
#include "act_int.h"
#include "formats_int.h"

#include <string.h>

void ft_mlp_qcfg(const ft_mlp_quant *q, int tensor, uint32_t group, int columnwise, ft_qcfg *out)
{
    const int grad = tensor == FT_MLP_DY || tensor == FT_MLP_DH;
    const int weight = tensor == FT_MLP_W1 || tensor == FT_MLP_W2;
    const int nvfp4 = q->fmt == FT_QF_NVFP4;
    memset(out, 0, sizeof *out);
    out->fmt = q->fmt;
    out->fp8 = grad ? q->fp8_bwd : q->fp8_fwd;
    out->columnwise = (uint8_t)(columnwise != 0);
    if (weight)
        out->two_d = q->fmt == FT_QF_FP8_BLOCK || ((q->fmt == FT_QF_MXFP8 || nvfp4) && q->two_d);
    out->rht = (uint8_t)(!weight && nvfp4 && q->rht && columnwise);
    out->sr = (uint8_t)(grad && nvfp4 && q->sr);
    out->pow2_scales = q->pow2_scales;
    out->scale = 1.0f;
    out->seed = q->seed;
    out->stream = (uint64_t)tensor;
    (void)group;
}

/* ---- workspace ---------------------------------------------------------------------------- */

typedef struct ws {
    float *p[16];
    int n;
} ws;

static float *ws_alloc(ws *w, int64_t count)
{
    if (w->n >= (int)FT_ARRAY_LEN(w->p)) return NULL;
    float *p = ft_malloc((size_t)(count > 0 ? count : 1) * sizeof *p);
    if (p) w->p[w->n++] = p;
    return p;
}

static void ws_free(ws *w)
{
    for (int i = 0; i < w->n; i++)
        ft_free(w->p[i]);
    w->n = 0;
}

/* ---- validation --------------------------------------------------------------------------- */

int ft_mlp_check(const ft_mlp *m, ft_err *err)
{
    if (!m) return ft_err_set(err, FT_EINVAL, "mlp: no descriptor");
    if (m->n_groups == 0 || !m->splits) return ft_err_set(err, FT_EINVAL, "mlp: no groups");
    if (m->t < 0 || m->k1 <= 0 || m->n1 <= 0 || m->k2 <= 0 || m->n2 <= 0)
        return ft_err_set(err, FT_EINVAL, "mlp: bad shape t=%lld k1=%lld n1=%lld k2=%lld n2=%lld",
                          (long long)m->t, (long long)m->k1, (long long)m->n1, (long long)m->k2,
                          (long long)m->n2);
    int rc = ftk_act_check(&m->act, m->t, m->k2, err);
    if (rc) return rc;
    int64_t want_n1 = ft_act_is_glu(m->act.kind) ? 2 * m->k2 : m->k2;
    if (m->n1 != want_n1)
        return ft_err_set(err, FT_EINVAL, "mlp: fc1 out_features %lld != %lld for %s",
                          (long long)m->n1, (long long)want_n1, ft_act_name(m->act.kind));
    int64_t total = 0;
    for (uint32_t g = 0; g < m->n_groups; g++) {
        if (m->splits[g] < 0 || m->splits[g] > m->t - total)
            return ft_err_set(err, FT_EINVAL,
                              "mlp: split %u = %lld is negative or overruns %lld tokens", g,
                              (long long)m->splits[g], (long long)m->t);
        total += m->splits[g];
    }
    if (!m->x || !m->w1 || !m->w2) return ft_err_set(err, FT_EINVAL, "mlp: NULL x, w1 or w2");
    if (m->scale_bias && (!m->probs || !m->b2))
        return ft_err_set(err, FT_EINVAL, "mlp: scale_bias needs probs and an fc2 bias");
    if ((unsigned)m->quant.fmt >= FT_QF_COUNT)
        return ft_err_set(err, FT_EINVAL, "mlp: unknown quantization %d", (int)m->quant.fmt);
    /* the fused path's precision rules are defined for block-scaled data only */
    if (m->path == FT_MLP_FUSED && m->quant.fmt != FT_QF_MXFP8 && m->quant.fmt != FT_QF_NVFP4)
        return ft_err_set(err, FT_EINVAL,
                          "mlp: the fused grouped MLP needs MXFP8 or NVFP4 quantizers, not %s",
                          ft_qfmt_name(m->quant.fmt));
    return FT_OK;
}

/* ---- quantized operands ------------------------------------------------------------------- */

/* Fake-quantize a grouped activation/grad tensor src[rows][cols] for (tensor, usage). With FP8
 * delayed scaling each group uses its own state's scale; rowwise use updates the history. */
static int quant_act(const ft_mlp *m, int tensor, int columnwise, const float *src, int64_t rows,
                     int64_t cols, const int64_t *splits, float *dst, ft_err *err)
{
    ft_qcfg q;
    ft_mlp_qcfg(&m->quant, tensor, 0, columnwise, &q);
    if (m->quant.fmt != FT_QF_FP8_DELAYED)
        return ft_cpu_quantize(&q, src, rows, cols, splits, m->n_groups, dst, NULL, err);
    int64_t r0 = 0;
    for (uint32_t g = 0; g < m->n_groups; g++) {
        ft_delayed *d = m->quant.delayed ? &m->quant.delayed[tensor * m->n_groups + g] : NULL;
        ft_qstats st;
        q.scale = d ? d->scale : 1.0f;
        int rc = ft_cpu_quantize(&q, src + r0 * cols, splits[g], cols, NULL, 0, dst + r0 * cols,
                                 &st, err);
        if (rc) return rc;
        if (d && !columnwise) ft_delayed_update(d, st.amax);
        r0 += splits[g];
    }
    return FT_OK;
}

/* Fake-quantize every expert's weight w[G][n][k] for a usage. */
static int quant_weights(const ft_mlp *m, int tensor, int columnwise, const float *w, int64_t n,
                         int64_t k, float *dst, ft_err *err)
{
    for (uint32_t g = 0; g < m->n_groups; g++) {
        ft_qcfg q;
        ft_qstats st;
        ft_mlp_qcfg(&m->quant, tensor, g, columnwise, &q);
        ft_delayed *d = NULL;
        if (m->quant.fmt == FT_QF_FP8_DELAYED && m->quant.delayed)
            d = &m->quant.delayed[tensor * m->n_groups + g];
        if (d) q.scale = d->scale;
        size_t off = (size_t)g * (size_t)(n * k);
        int rc = ft_cpu_quantize(&q, w + off, n, k, NULL, 0, dst + off, &st, err);
        if (rc) return rc;
        if (d && !columnwise) ft_delayed_update(d, st.amax);
    }
    return FT_OK;
}

static void round_bf16(float *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = bf16_round(p[i]);
}

/* ---- forward ------------------------------------------------------------------------------ */

int ft_cpu_mlp_forward(const ft_mlp *m, ft_mlp_fwd *out, ft_err *err)
{
    int rc = ft_mlp_check(m, err);
    if (rc) return rc;
    if (!out || !out->h || !out->z || !out->y)
        return ft_err_set(err, FT_EINVAL, "mlp forward: NULL output array");
    const int64_t t = m->t, k1 = m->k1, n1 = m->n1, k2 = m->k2, n2 = m->n2;
    const int fused = m->path == FT_MLP_FUSED;
    ws w = {0};
    float *xq = ws_alloc(&w, t * k1), *w1q = ws_alloc(&w, m->n_groups * n1 * k1);
    float *acc = ws_alloc(&w, t * n1), *zq = ws_alloc(&w, t * k2);
    float *w2q = ws_alloc(&w, m->n_groups * n2 * k2);
    if (!xq || !w1q || !acc || !zq || !w2q) {
        rc = ft_err_set(err, FT_ENOMEM, "mlp forward: no memory");
        goto done;
    }
    /* FC1 */
    if ((rc = quant_act(m, FT_MLP_X, 0, m->x, t, k1, m->splits, xq, err))) goto done;
    if ((rc = quant_weights(m, FT_MLP_W1, 0, m->w1, n1, k1, w1q, err))) goto done;
    ft_gemm g1 = {FT_GEMM_FPROP, m->n_groups, m->splits, t, n1, k1, xq, w1q, acc, m->b1, NULL, 0};
    if ((rc = ft_cpu_gemm(&g1, err))) goto done;
    int64_t used = 0;
    for (uint32_t g = 0; g < m->n_groups; g++)
        used += m->splits[g];
    memset(acc + used * n1, 0, (size_t)((t - used) * n1) * sizeof *acc); /* padding rows */
    for (int64_t i = 0; i < t * n1; i++)
        out->h[i] = bf16_round(acc[i]);

    /* activation: fused evaluates it on the fp32 accumulator, unfused on the stored bf16 h */
    if ((rc = ft_cpu_act_forward(&m->act, t, k2, fused ? acc : out->h, m->probs, out->z, err)))
        goto done;
    if (!(fused && m->quant.fmt == FT_QF_MXFP8)) round_bf16(out->z, t * k2);

    /* FC2 */
    if ((rc = quant_act(m, FT_MLP_Z, 0, out->z, t, k2, m->splits, zq, err))) goto done;
    if ((rc = quant_weights(m, FT_MLP_W2, 0, m->w2, n2, k2, w2q, err))) goto done;
    ft_gemm g2 = {FT_GEMM_FPROP,
                  m->n_groups,
                  m->splits,
                  t,
                  n2,
                  k2,
                  zq,
                  w2q,
                  out->y,
                  m->b2,
                  m->scale_bias ? m->probs : NULL,
                  0};
    if ((rc = ft_cpu_gemm(&g2, err))) goto done;
    round_bf16(out->y, used * n2);
    memset(out->y + used * n2, 0, (size_t)((t - used) * n2) * sizeof *out->y);
done:
    ws_free(&w);
    return rc;
}

/* ---- backward ----------------------------------------------------------------------------- */

static int64_t pad16(int64_t v)
{
    return (v + 15) / 16 * 16;
}

/* dW[G][n][k] = wgrad of columnwise-quantized a[t][n] (tensor ta) and b[t][k] (tensor tb). With
 * RHT each group is copied into zero-padded 16-row multiples first. */
static int wgrad(const ft_mlp *m, int ta, const float *a, int64_t n, int tb, const float *b,
                 int64_t k, float *dw, ft_err *err)
{
    ws w = {0};
    int rc = FT_OK;
    const int rht = m->quant.fmt == FT_QF_NVFP4 && m->quant.rht;
    const int64_t *splits = m->splits;
    int64_t tp = m->t, *psplits = NULL;
    const float *pa = a, *pb = b;
    if (rht) {
        psplits = ft_malloc(m->n_groups * sizeof *psplits);
        if (!psplits) return ft_err_set(err, FT_ENOMEM, "mlp wgrad: no memory");
        tp = 0;
        for (uint32_t g = 0; g < m->n_groups; g++)
            tp += psplits[g] = pad16(m->splits[g]);
        float *ca = ws_alloc(&w, tp * n), *cb = ws_alloc(&w, tp * k);
        if (!ca || !cb) {
            rc = ft_err_set(err, FT_ENOMEM, "mlp wgrad: no memory");
            goto done;
        }
        memset(ca, 0, (size_t)(tp * n) * sizeof *ca);
        memset(cb, 0, (size_t)(tp * k) * sizeof *cb);
        int64_t r0 = 0, p0 = 0;
        for (uint32_t g = 0; g < m->n_groups; g++) {
            memcpy(ca + p0 * n, a + r0 * n, (size_t)(m->splits[g] * n) * sizeof *ca);
            memcpy(cb + p0 * k, b + r0 * k, (size_t)(m->splits[g] * k) * sizeof *cb);
            r0 += m->splits[g];
            p0 += psplits[g];
        }
        pa = ca, pb = cb, splits = psplits;
    }
    float *qa = ws_alloc(&w, tp * n), *qb = ws_alloc(&w, tp * k);
    if (!qa || !qb) {
        rc = ft_err_set(err, FT_ENOMEM, "mlp wgrad: no memory");
        goto done;
    }
    if ((rc = quant_act(m, ta, 1, pa, tp, n, splits, qa, err))) goto done;
    if ((rc = quant_act(m, tb, 1, pb, tp, k, splits, qb, err))) goto done;
    ft_gemm gw = {FT_GEMM_WGRAD, m->n_groups, splits, tp, n, k, qa, qb, dw, NULL, NULL, 0};
    if ((rc = ft_cpu_gemm(&gw, err))) goto done;
    round_bf16(dw, m->n_groups * n * k);
done:
    ws_free(&w);
    ft_free(psplits);
    return rc;
}

int ft_cpu_mlp_backward(const ft_mlp *m, const ft_mlp_fwd *fwd, const float *dy, ft_mlp_bwd *out,
                        ft_err *err)
{
    int rc = ft_mlp_check(m, err);
    if (rc) return rc;
    if (!fwd || !fwd->h || !fwd->z || !dy || !out || !out->dx || !out->dw1 || !out->dw2)
        return ft_err_set(err, FT_EINVAL, "mlp backward: NULL input or output array");
    const int fused = m->path == FT_MLP_FUSED;
    const int64_t t = m->t, k1 = m->k1, n1 = m->n1, k2 = m->k2, n2 = m->n2;
    const uint32_t G = m->n_groups;
    ws w = {0};
    float *dyq = ws_alloc(&w, t * n2), *w2c = ws_alloc(&w, G * n2 * k2);
    float *dz = ws_alloc(&w, t * k2), *dh32 = ws_alloc(&w, t * n1), *dh = ws_alloc(&w, t * n1);
    float *dhq = ws_alloc(&w, t * n1), *w1c = ws_alloc(&w, G * n1 * k1);
    float *dp = ws_alloc(&w, t);
    if (!dyq || !w2c || !dz || !dh32 || !dh || !dhq || !w1c || !dp) {
        rc = ft_err_set(err, FT_ENOMEM, "mlp backward: no memory");
        goto done;
    }
    int64_t used = 0;
    for (uint32_t g = 0; g < G; g++)
        used += m->splits[g];

    /* FC2 backward: db2, dz = dY x W2 (columnwise) */
    if (out->db2) {
        memset(out->db2, 0, (size_t)(G * n2) * sizeof *out->db2);
        int64_t r = 0;
        for (uint32_t g = 0; g < G; g++)
            for (int64_t e = r + m->splits[g]; r < e; r++)
                for (int64_t j = 0; j < n2; j++)
                    out->db2[g * n2 + j] +=
                        m->scale_bias ? dy[r * n2 + j] * m->probs[r] : dy[r * n2 + j];
        round_bf16(out->db2, G * n2);
    }
    if ((rc = quant_act(m, FT_MLP_DY, 0, dy, t, n2, m->splits, dyq, err))) goto done;
    if ((rc = quant_weights(m, FT_MLP_W2, 1, m->w2, n2, k2, w2c, err))) goto done;
    ft_gemm gd2 = {FT_GEMM_DGRAD, G, m->splits, t, n2, k2, dyq, w2c, dz, NULL, NULL, 0};
    if ((rc = ft_cpu_gemm(&gd2, err))) goto done;
    memset(dz + used * k2, 0, (size_t)((t - used) * k2) * sizeof *dz);
    if (!fused) round_bf16(dz, t * k2);

    /* activation backward on the saved bf16 h */
    if ((rc = ft_cpu_act_backward(&m->act, t, k2, fwd->h, m->probs, dz, dh32, dp, err))) goto done;
    if (m->scale_bias) {
        int64_t r = 0;
        for (uint32_t g = 0; g < G; g++)
            for (int64_t e = r + m->splits[g]; r < e; r++) {
                float s = 0.0f;
                for (int64_t j = 0; j < n2; j++)
                    s += dy[r * n2 + j] * m->b2[g * n2 + j];
                dp[r] += s;
            }
    }
    if (out->dprobs && m->probs) memcpy(out->dprobs, dp, (size_t)t * sizeof *dp);
    for (int64_t i = 0; i < t * n1; i++)
        dh[i] = (fused && m->quant.fmt == FT_QF_MXFP8) ? dh32[i] : bf16_round(dh32[i]);
    if (out->db1) {
        const float *src = fused ? dh32 : dh;
        memset(out->db1, 0, (size_t)(G * n1) * sizeof *out->db1);
        int64_t r = 0;
        for (uint32_t g = 0; g < G; g++)
            for (int64_t e = r + m->splits[g]; r < e; r++)
                for (int64_t j = 0; j < n1; j++)
                    out->db1[g * n1 + j] += src[r * n1 + j];
        round_bf16(out->db1, G * n1);
    }

    /* FC1 backward: dx = dH x W1 (columnwise) */
    if ((rc = quant_act(m, FT_MLP_DH, 0, dh, t, n1, m->splits, dhq, err))) goto done;
    if ((rc = quant_weights(m, FT_MLP_W1, 1, m->w1, n1, k1, w1c, err))) goto done;
    ft_gemm gd1 = {FT_GEMM_DGRAD, G, m->splits, t, n1, k1, dhq, w1c, out->dx, NULL, NULL, 0};
    if ((rc = ft_cpu_gemm(&gd1, err))) goto done;
    round_bf16(out->dx, used * k1);
    memset(out->dx + used * k1, 0, (size_t)((t - used) * k1) * sizeof *out->dx);

    /* wgrads: columnwise x columnwise over each group's tokens */
    if ((rc = wgrad(m, FT_MLP_DY, dy, n2, FT_MLP_Z, fwd->z, k2, out->dw2, err))) goto done;
    if ((rc = wgrad(m, FT_MLP_DH, dh, n1, FT_MLP_X, m->x, k1, out->dw1, err))) goto done;
done:
    ws_free(&w);
    return rc;
}
