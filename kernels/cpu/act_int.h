/*
 * act_int.h - per-element activation math shared by act.c, the MLP and its float64 reference
 * (private to kernels/cpu).
 */
#ifndef FT_ACT_INT_H
#define FT_ACT_INT_H

#include "ft_kernels.h"

#include <math.h>

typedef struct act_eval {
    int64_t iu, iv; /* columns of h holding the act (u) and gate (v) inputs; iv = -1 unary */
    float f;        /* f(u, v) */
    float du, dv;   /* partial derivatives (when asked) */
} act_eval;

int ftk_act_check(const ft_act *a, int64_t rows, int64_t k2, ft_err *err);

/* Column of h that feeds output column c as u (half 0) or v (half 1). */
static inline int64_t act_col(const ft_act *a, int64_t k2, int64_t c, int half)
{
    if (!ft_act_is_glu(a->kind)) return c;
    if (a->interleave) {
        int64_t w = a->interleave;
        return (c / w) * 2 * w + half * w + c % w;
    }
    return half * k2 + c;
}

static inline float sigmoidf_(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

static inline act_eval act_at(const ft_act *a, const float *hr, int64_t k2, int64_t c, int grad)
{
    act_eval e = {act_col(a, k2, c, 0), -1, 0.0f, 0.0f, 0.0f};
    float u = hr[e.iu];
    switch (a->kind) {
    case FT_ACT_SWIGLU: {
        e.iv = act_col(a, k2, c, 1);
        float v = hr[e.iv], s = sigmoidf_(u);
        e.f = u * s * v;
        if (grad) {
            e.du = (s + u * s * (1.0f - s)) * v;
            e.dv = u * s;
        }
        break;
    }
    case FT_ACT_CLAMPED_QGEGLU: {
        e.iv = act_col(a, k2, c, 1);
        float v = hr[e.iv], L = a->limit;
        float uc = fminf(u, L), vc = fmaxf(-L, fminf(v, L));
        float s = sigmoidf_(a->alpha * uc);
        e.f = uc * s * (vc + a->offset);
        if (grad) {
            e.du = u <= L ? (s + a->alpha * uc * s * (1.0f - s)) * (vc + a->offset) : 0.0f;
            e.dv = fabsf(v) <= L ? uc * s : 0.0f;
        }
        break;
    }
    default: { /* SReLU */
        float m = u > 0.0f ? u : 0.0f;
        e.f = m * m;
        if (grad) e.du = 2.0f * m;
        break;
    }
    }
    return e;
}

/* The same in float64 for the reference path. */
typedef struct act_eval64 {
    int64_t iu, iv;
    double f, du, dv;
} act_eval64;

static inline act_eval64 act_at64(const ft_act *a, const double *hr, int64_t k2, int64_t c)
{
    act_eval64 e = {act_col(a, k2, c, 0), -1, 0.0, 0.0, 0.0};
    double u = hr[e.iu];
    switch (a->kind) {
    case FT_ACT_SWIGLU: {
        e.iv = act_col(a, k2, c, 1);
        double v = hr[e.iv], s = 1.0 / (1.0 + exp(-u));
        e.f = u * s * v;
        e.du = (s + u * s * (1.0 - s)) * v;
        e.dv = u * s;
        break;
    }
    case FT_ACT_CLAMPED_QGEGLU: {
        e.iv = act_col(a, k2, c, 1);
        double v = hr[e.iv], L = a->limit, al = a->alpha;
        double uc = u < L ? u : L, vc = v > L ? L : (v < -L ? -L : v);
        double s = 1.0 / (1.0 + exp(-al * uc));
        e.f = uc * s * (vc + a->offset);
        e.du = u <= L ? (s + al * uc * s * (1.0 - s)) * (vc + a->offset) : 0.0;
        e.dv = fabs(v) <= L ? uc * s : 0.0;
        break;
    }
    default: {
        double m = u > 0.0 ? u : 0.0;
        e.f = m * m;
        e.du = 2.0 * m;
        break;
    }
    }
    return e;
}

#endif /* FT_ACT_INT_H */
