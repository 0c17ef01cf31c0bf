/*
 * mlp_ref.c - float64 reference of the grouped MLP forward and backward: the exact math of
 * docs/fuser-model.md ("Grouped-MLP math") with no quantization and no bf16 rounding, written
 * independently of mlp.c (its own float64 GEMMs through CBLAS dgemm per group, its own activation
 * loops) so that each checks the other.
 */
#include "act_int.h"

#include <cblas.h>
#include <string.h>

static double *dalloc(int64_t n)
{
    return ft_calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

static void to_f64(double *d, const float *s, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = s[i];
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
    if (t > INT32_MAX || k1 > INT32_MAX || n1 > INT32_MAX || n2 > INT32_MAX)
        return ft_err_set(err, FT_ERANGE, "mlp reference: shape beyond BLAS int");
    int64_t used = 0;
    for (uint32_t g = 0; g < G; g++) {
        if (m->splits[g] < 0 || m->splits[g] > t - used)
            return ft_err_set(err, FT_EINVAL, "mlp reference: bad split %u", g);
        used += m->splits[g];
    }
    const int64_t wmax = n1 * k1 > n2 * k2 ? n1 * k1 : n2 * k2;
    double *x = dalloc(t * k1), *h = dalloc(t * n1), *z = dalloc(t * k2), *y = dalloc(t * n2);
    double *w = dalloc(wmax), *d_y = dy ? dalloc(t * n2) : NULL, *dz = dalloc(t * k2);
    double *dh = dalloc(t * n1), *dp = dalloc(t), *dwg = dalloc(wmax), *dx = dalloc(t * k1);
    if (!x || !h || !z || !y || !w || (dy && !d_y) || !dz || !dh || !dp || !dwg || !dx) {
        rc = ft_err_set(err, FT_ENOMEM, "mlp reference: no memory");
        goto done;
    }
    to_f64(x, m->x, used * k1);
    /* forward: h = x W1^T + b1, z = p f(h), y = z W2^T + b2 (* p with scale_bias) */
    int64_t r0 = 0;
    for (uint32_t g = 0; g < G; g++) {
        const int64_t s = m->splits[g];
        if (s > 0) {
            to_f64(w, m->w1 + (size_t)g * n1 * k1, n1 * k1);
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s, (int)n1, (int)k1, 1.0,
                        x + r0 * k1, (int)k1, w, (int)k1, 0.0, h + r0 * n1, (int)n1);
            for (int64_t r = r0; r < r0 + s; r++) {
                if (m->b1)
                    for (int64_t j = 0; j < n1; j++)
                        h[r * n1 + j] += m->b1[g * n1 + j];
                const double p = m->probs ? m->probs[r] : 1.0;
                for (int64_t c = 0; c < k2; c++)
                    z[r * k2 + c] = p * act_at64(&m->act, h + r * n1, k2, c).f;
            }
            to_f64(w, m->w2 + (size_t)g * n2 * k2, n2 * k2);
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s, (int)n2, (int)k2, 1.0,
                        z + r0 * k2, (int)k2, w, (int)k2, 0.0, y + r0 * n2, (int)n2);
            for (int64_t r = r0; m->b2 && r < r0 + s; r++) {
                const double p = m->scale_bias && m->probs ? m->probs[r] : 1.0;
                for (int64_t j = 0; j < n2; j++)
                    y[r * n2 + j] += m->b2[g * n2 + j] * p;
            }
        }
        r0 += s;
    }
    if (out->h) memcpy(out->h, h, (size_t)(t * n1) * sizeof *h);
    if (out->z) memcpy(out->z, z, (size_t)(t * k2) * sizeof *z);
    if (out->y) memcpy(out->y, y, (size_t)(t * n2) * sizeof *y);
    if (!dy) goto done;

    /* backward: dz = dy W2, dh = dz p f'(h), dx = dh W1, dW2 = dy^T z, dW1 = dh^T x */
    if (out->db1) memset(out->db1, 0, (size_t)(G * n1) * sizeof(double));
    if (out->db2) memset(out->db2, 0, (size_t)(G * n2) * sizeof(double));
    to_f64(d_y, dy, used * n2);
    r0 = 0;
    for (uint32_t g = 0; g < G; g++) {
        const int64_t s = m->splits[g];
        double *dw2 = out->dw2 ? out->dw2 + (size_t)g * n2 * k2 : dwg;
        double *dw1 = out->dw1 ? out->dw1 + (size_t)g * n1 * k1 : dwg;
        if (s == 0) {
            if (out->dw2) memset(dw2, 0, (size_t)(n2 * k2) * sizeof(double));
            if (out->dw1) memset(dw1, 0, (size_t)(n1 * k1) * sizeof(double));
            continue;
        }
        to_f64(w, m->w2 + (size_t)g * n2 * k2, n2 * k2);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)s, (int)k2, (int)n2, 1.0,
                    d_y + r0 * n2, (int)n2, w, (int)k2, 0.0, dz + r0 * k2, (int)k2);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n2, (int)k2, (int)s, 1.0,
                    d_y + r0 * n2, (int)n2, z + r0 * k2, (int)k2, 0.0, dw2, (int)k2);
        for (int64_t r = r0; r < r0 + s; r++) {
            const double p = m->probs ? m->probs[r] : 1.0;
            const float *dyr = dy + r * n2;
            for (int64_t j = 0; j < n2; j++) {
                if (out->db2) out->db2[g * n2 + j] += dyr[j] * (m->scale_bias ? p : 1.0);
                if (m->scale_bias) dp[r] += (double)dyr[j] * m->b2[g * n2 + j];
            }
            for (int64_t c = 0; c < k2; c++) {
                act_eval64 ev = act_at64(&m->act, h + r * n1, k2, c);
                double gz = dz[r * k2 + c];
                dh[r * n1 + ev.iu] = gz * p * ev.du;
                if (ev.iv >= 0) dh[r * n1 + ev.iv] = gz * p * ev.dv;
                dp[r] += gz * ev.f;
            }
            for (int64_t j = 0; out->db1 && j < n1; j++)
                out->db1[g * n1 + j] += dh[r * n1 + j];
        }
        to_f64(w, m->w1 + (size_t)g * n1 * k1, n1 * k1);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)s, (int)k1, (int)n1, 1.0,
                    dh + r0 * n1, (int)n1, w, (int)k1, 0.0, dx + r0 * k1, (int)k1);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n1, (int)k1, (int)s, 1.0,
                    dh + r0 * n1, (int)n1, x + r0 * k1, (int)k1, 0.0, dw1, (int)k1);
        r0 += s;
    }
    if (out->dx) memcpy(out->dx, dx, (size_t)(t * k1) * sizeof *dx);
    if (out->dprobs) memcpy(out->dprobs, dp, (size_t)t * sizeof *dp);
done:
    ft_free(x);
    ft_free(h);
    ft_free(z);
    ft_free(y);
    ft_free(w);
    ft_free(d_y);
    ft_free(dz);
    ft_free(dh);
    ft_free(dp);
    ft_free(dwg);
    ft_free(dx);
    return rc;
}
