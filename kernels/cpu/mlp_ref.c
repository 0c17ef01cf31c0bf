/*
 * mlp_ref.c - float64 reference of the grouped MLP forward and backward: the exact math of
 * spec/te-fuser.md §4.2-4.4 with no quantization and no bf16 rounding, written independently of
 * mlp.c (plain loops, no shared GEMM) so that each checks the other.
 */
#include "act_int.h"

#include <string.h>

/* Dot products with four float64 partial sums (latency, not precision, is the reason). */
static double dot_ff(const float *a, const float *b, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += (double)a[i] * b[i];
        s1 += (double)a[i + 1] * b[i + 1];
        s2 += (double)a[i + 2] * b[i + 2];
        s3 += (double)a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += (double)a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

static double dot_df(const double *a, const float *b, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

static double *dalloc(int64_t n)
{
    return ft_calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

int ft_cpu_mlp_ref(const ft_mlp *m, const float *dy, ft_mlp_ref *out, ft_err *err)
{
    if (!m || !out) return ft_err_set(err, FT_EINVAL, "mlp reference: NULL argument");
    if (m->n_groups == 0 || !m->splits || !m->x || !m->w1 || !m->w2)
        return ft_err_set(err, FT_EINVAL, "mlp reference: missing groups or operands");
    int rc = ftk_act_check(&m->act, m->t, m->k2, err);
    if (rc) return rc;
    const int64_t t = m->t, k1 = m->k1, n1 = m->n1, k2 = m->k2, n2 = m->n2;
    const uint32_t G = m->n_groups;
    if (n1 != (ft_act_is_glu(m->act.kind) ? 2 * k2 : k2))
        return ft_err_set(err, FT_EINVAL, "mlp reference: fc1 out_features %lld mismatch",
                          (long long)n1);
    int64_t used = 0;
    for (uint32_t g = 0; g < G; g++) {
        if (m->splits[g] < 0 || m->splits[g] > t - used)
            return ft_err_set(err, FT_EINVAL, "mlp reference: bad split %u", g);
        used += m->splits[g];
    }
    double *h = dalloc(t * n1), *a = dalloc(t * k2), *z = dalloc(t * k2), *y = dalloc(t * n2);
    double *dz = dalloc(t * k2), *dh = dalloc(t * n1), *dp = dalloc(t);
    if (!h || !a || !z || !y || !dz || !dh || !dp) {
        rc = ft_err_set(err, FT_ENOMEM, "mlp reference: no memory");
        goto done;
    }
    /* forward */
    int64_t r = 0;
    for (uint32_t g = 0; g < G; g++) {
        const float *w1 = m->w1 + (size_t)g * n1 * k1, *w2 = m->w2 + (size_t)g * n2 * k2;
        for (int64_t e = r + m->splits[g]; r < e; r++) {
            double p = m->probs ? m->probs[r] : 1.0;
            for (int64_t j = 0; j < n1; j++)
                h[r * n1 + j] =
                    (m->b1 ? m->b1[g * n1 + j] : 0.0) + dot_ff(m->x + r * k1, w1 + j * k1, k1);
            for (int64_t c = 0; c < k2; c++) {
                act_eval64 ev = act_at64(&m->act, h + r * n1, k2, c);
                a[r * k2 + c] = ev.f;
                z[r * k2 + c] = p * ev.f;
            }
            for (int64_t j = 0; j < n2; j++)
                y[r * n2 + j] = (m->b2 ? m->b2[g * n2 + j] * (m->scale_bias ? p : 1.0) : 0.0) +
                                dot_df(z + r * k2, w2 + j * k2, k2);
        }
    }
    if (out->h) memcpy(out->h, h, (size_t)(t * n1) * sizeof *h);
    if (out->z) memcpy(out->z, z, (size_t)(t * k2) * sizeof *z);
    if (out->y) memcpy(out->y, y, (size_t)(t * n2) * sizeof *y);
    if (!dy) goto done;

    /* backward */
    if (out->dw1) memset(out->dw1, 0, (size_t)(G * n1 * k1) * sizeof(double));
    if (out->dw2) memset(out->dw2, 0, (size_t)(G * n2 * k2) * sizeof(double));
    if (out->db1) memset(out->db1, 0, (size_t)(G * n1) * sizeof(double));
    if (out->db2) memset(out->db2, 0, (size_t)(G * n2) * sizeof(double));
    if (out->dx) memset(out->dx, 0, (size_t)(t * k1) * sizeof(double));
    r = 0;
    for (uint32_t g = 0; g < G; g++) {
        const float *w1 = m->w1 + (size_t)g * n1 * k1, *w2 = m->w2 + (size_t)g * n2 * k2;
        for (int64_t e = r + m->splits[g]; r < e; r++) {
            double p = m->probs ? m->probs[r] : 1.0;
            const float *dyr = dy + r * n2;
            double *dzr = dz + r * k2;
            for (int64_t i = 0; i < k2; i++)
                dzr[i] = 0.0;
            for (int64_t j = 0; j < n2; j++) {
                const double d = dyr[j];
                const float *w2j = w2 + j * k2;
                for (int64_t i = 0; i < k2; i++)
                    dzr[i] += d * w2j[i];
            }
            for (int64_t j = 0; j < n2; j++) {
                if (out->db2) out->db2[g * n2 + j] += dyr[j] * (m->scale_bias ? p : 1.0);
                if (m->scale_bias) dp[r] += (double)dyr[j] * m->b2[g * n2 + j];
                if (out->dw2)
                    for (int64_t i = 0; i < k2; i++)
                        out->dw2[(g * n2 + j) * k2 + i] += dyr[j] * z[r * k2 + i];
            }
            for (int64_t c = 0; c < k2; c++) {
                act_eval64 ev = act_at64(&m->act, h + r * n1, k2, c);
                double gz = dz[r * k2 + c];
                dh[r * n1 + ev.iu] = gz * p * ev.du;
                if (ev.iv >= 0) dh[r * n1 + ev.iv] = gz * p * ev.dv;
                dp[r] += gz * ev.f;
            }
            double *dxr = out->dx ? out->dx + r * k1 : NULL;
            const float *xr = m->x + r * k1;
            for (int64_t j = 0; j < n1; j++) {
                const double d = dh[r * n1 + j];
                const float *w1j = w1 + j * k1;
                if (out->db1) out->db1[g * n1 + j] += d;
                if (dxr)
                    for (int64_t i = 0; i < k1; i++)
                        dxr[i] += d * w1j[i];
                if (out->dw1) {
                    double *dw = out->dw1 + (g * n1 + j) * k1;
                    for (int64_t i = 0; i < k1; i++)
                        dw[i] += d * xr[i];
                }
            }
        }
    }
    if (out->dprobs) memcpy(out->dprobs, dp, (size_t)t * sizeof *dp);
done:
    ft_free(h);
    ft_free(a);
    ft_free(z);
    ft_free(y);
    ft_free(dz);
    ft_free(dh);
    ft_free(dp);
    return rc;
}
