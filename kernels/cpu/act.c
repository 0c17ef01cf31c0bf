/*
 * act.c - activations forward and backward with per-row probabilities (TE's scaled activation
 * kernels, docs/fuser-model.md, "Activations"): SwiGLU, ClampedQGeGLU and SReLU, GLU halves plain
 * or interleaved in 32-column groups. All math in fp32; callers round outputs where TE stores bf16.
 */
#include "act_int.h"

#include <math.h>

static const char *const act_names[FT_ACT_COUNT] = {"swiglu", "clamped_qgeglu", "srelu"};

const char *ft_act_name(ft_act_kind k)
{
    return (unsigned)k < FT_ACT_COUNT ? act_names[k] : "?";
}

int ftk_act_check(const ft_act *a, int64_t rows, int64_t k2, ft_err *err)
{
    if (!a || (unsigned)a->kind >= FT_ACT_COUNT)
        return ft_err_set(err, FT_EINVAL, "activation: unknown kind %d", a ? (int)a->kind : -1);
    if (rows < 0 || k2 < 0)
        return ft_err_set(err, FT_EINVAL, "activation: negative shape %lld x %lld", (long long)rows,
                          (long long)k2);
    if (a->interleave != 0 && a->interleave != 32)
        return ft_err_set(err, FT_EINVAL, "activation: glu_interleave_size %d (0 or 32)",
                          (int)a->interleave);
    if (a->interleave && !ft_act_is_glu(a->kind))
        return ft_err_set(err, FT_EINVAL, "activation: %s takes no interleave",
                          ft_act_name(a->kind));
    if (a->interleave && k2 % a->interleave)
        return ft_err_set(err, FT_EINVAL,
                          "activation: %lld output columns are not a multiple of the interleave %d",
                          (long long)k2, (int)a->interleave);
    return FT_OK;
}

int ft_cpu_act_forward(const ft_act *a, int64_t rows, int64_t k2, const float *h,
                       const float *probs, float *z, ft_err *err)
{
    int rc = ftk_act_check(a, rows, k2, err);
    if (rc) return rc;
    const int64_t n1 = ft_act_is_glu(a->kind) ? 2 * k2 : k2;
    for (int64_t r = 0; r < rows; r++) {
        const float *hr = h + r * n1;
        float p = probs ? probs[r] : 1.0f;
        for (int64_t c = 0; c < k2; c++) {
            act_eval e = act_at(a, hr, k2, c, 0);
            z[r * k2 + c] = e.f * p;
        }
    }
    return FT_OK;
}

int ft_cpu_act_backward(const ft_act *a, int64_t rows, int64_t k2, const float *h,
                        const float *probs, const float *dz, float *dh, float *dprobs, ft_err *err)
{
    int rc = ftk_act_check(a, rows, k2, err);
    if (rc) return rc;
    const int glu = ft_act_is_glu(a->kind);
    const int64_t n1 = glu ? 2 * k2 : k2;
    for (int64_t r = 0; r < rows; r++) {
        const float *hr = h + r * n1;
        float *dhr = dh + r * n1;
        float p = probs ? probs[r] : 1.0f, dp = 0.0f;
        for (int64_t c = 0; c < k2; c++) {
            act_eval e = act_at(a, hr, k2, c, 1);
            float g = dz[r * k2 + c];
            float gp = g * p;
            dhr[e.iu] = gp * e.du;
            if (glu) dhr[e.iv] = gp * e.dv;
            dp += g * e.f;
        }
        if (dprobs) dprobs[r] = dp;
    }
    return FT_OK;
}
