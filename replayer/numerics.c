/*
 * numerics.c - numerical replay of sampled grouped-MLP calls on the CPU kernels (numerics.h).
 *
 * Per call: derive each choice's run configuration (topology from the plan, quantization from the
 * quantizer state and the call's recipe), run every distinct configuration once on the same
 * inputs, run a float64 reference, and fold the comparisons into per-policy figures and the two
 * bands. Limits: FP8 delayed scaling runs with scale 1; CustomRecipe quantizers run unquantized;
 * only the FC1 -> activation -> FC2 window is run (other ops of the fuser are ignored).
 */
#include "numerics.h"
#include "ft_kernels.h"
#include "model_int.h"

#include <jansson.h>

#include <math.h>
#include <string.h>

/* ---- per-fuser MLP description ------------------------------------------------------------ */

typedef struct mlp_desc {
    uint8_t ok;     /* the fuser holds GroupedLinear -> activation -> GroupedLinear */
    uint8_t scaled; /* the activation takes probabilities */
    uint8_t bias1, bias2, scale_bias;
    uint32_t first;  /* op index of FC1 */
    uint32_t groups; /* num_groups */
    int64_t k1, k2, n2;
    ft_act act;
} mlp_desc;

/* One configuration to run: topology + quantization. */
typedef struct runcfg {
    uint8_t fused;
    ft_mlp_quant q;
} runcfg;

typedef struct runout { /* outputs of one configuration for the current call */
    runcfg cfg;
    int rc;        /* FT_OK, or the kernel's FT_EUNSUPPORTED/FT_EINVAL */
    char msg[160]; /* kernel message when rc != FT_OK */
    float *y, *dx, *dw1, *dw2;
} runout;

struct ft_numerics {
    const ft_model *m;
    ft_numerics_opts o;
    uint32_t n_fusers;
    mlp_desc *mlp;        /* [n_fusers] */
    uint64_t n_diff_run;  /* sampled calls where a choice differed from fresh */
    uint64_t n_plain_run; /* sampled calls where none did */
    ft_numerics_result res;
};

static void band_add(ft_band *b, double v)
{
    if (!b->n || v < b->min) b->min = v;
    if (!b->n || v > b->max) b->max = v;
    b->n++;
    b->sum += v;
}

static int find_mlp(const ft_op *ops, uint32_t n, mlp_desc *d)
{
    memset(d, 0, sizeof *d);
    for (uint32_t i = 0; i + 2 < n; i++) {
        const ft_op *a = &ops[i], *b = &ops[i + 1], *c = &ops[i + 2];
        if (a->type != FT_OP_GROUPED_LINEAR || c->type != FT_OP_GROUPED_LINEAR) continue;
        ft_act act = {FT_ACT_SWIGLU, 0, 0, 0, 0};
        int scaled = 0;
        switch (b->type) {
        case FT_OP_SCALED_SWIGLU:
            scaled = 1; /* fall through */
        case FT_OP_SWIGLU:
            act.kind = FT_ACT_SWIGLU;
            break;
        case FT_OP_SCALED_CLAMPED_QGEGLU:
            scaled = 1; /* fall through */
        case FT_OP_CLAMPED_SWIGLU:
            act.kind = FT_ACT_CLAMPED_QGEGLU;
            break;
        case FT_OP_SCALED_SRELU:
            scaled = 1; /* fall through */
        case FT_OP_SRELU:
            act.kind = FT_ACT_SRELU;
            break;
        default:
            continue;
        }
        if (ft_act_is_glu(act.kind)) {
            act.interleave = b->v[FT_OA_GLU_INTERLEAVE] == 32 ? 32 : 0;
            if (act.kind == FT_ACT_CLAMPED_QGEGLU) {
                act.limit = (float)b->f[FT_OA_LIMIT];
                act.alpha = (float)b->f[FT_OA_ALPHA];
                act.offset = (float)b->f[FT_OA_GLU_LINEAR_OFFSET];
            }
        }
        int64_t k1 = a->v[FT_OA_IN_FEATURES], n1 = a->v[FT_OA_OUT_FEATURES];
        int64_t k2 = c->v[FT_OA_IN_FEATURES], n2 = c->v[FT_OA_OUT_FEATURES];
        int64_t G = a->v[FT_OA_NUM_GROUPS];
        int64_t want_n1 = ft_act_is_glu(act.kind) ? 2 * k2 : k2;
        if (k1 < 1 || k2 < 1 || n2 < 1 || n1 != want_n1 || G < 1 || G != c->v[FT_OA_NUM_GROUPS] ||
            G > (1 << 20))
            continue;
        d->ok = 1;
        d->scaled = (uint8_t)scaled;
        d->bias1 = a->v[FT_OA_BIAS] != 0;
        d->bias2 = c->v[FT_OA_BIAS] != 0;
        d->scale_bias = d->bias2 && c->v[FT_OA_SCALE_BIAS] != 0 && scaled;
        d->first = i;
        d->groups = (uint32_t)G;
        d->k1 = k1, d->k2 = k2, d->n2 = n2;
        d->act = act;
        return 1;
    }
    return 0;
}

int ft_numerics_new(const ft_model *m, const ft_fuser_def *fusers, uint32_t n_fusers,
                    int64_t world_size, const char *const *policy_names, uint32_t n_policies,
                    const ft_numerics_opts *opts, ft_numerics **out, ft_err *err)
{
    *out = NULL;
    if (!m || (n_fusers && !fusers))
        return ft_err_set(err, FT_EINVAL, "numerics: no model or fusers");
    if (n_policies > FT_NUMERICS_MAX_POLICIES)
        return ft_err_set(err, FT_ERANGE, "numerics: %u policies (at most %d)", n_policies,
                          FT_NUMERICS_MAX_POLICIES);
    ft_numerics *nx = ft_calloc(1, sizeof *nx);
    if (!nx) return ft_err_set(err, FT_ENOMEM, "numerics: no memory");
    nx->m = m;
    if (opts) nx->o = *opts;
    if (nx->o.shrink < 1) nx->o.shrink = 1;
    nx->n_fusers = n_fusers;
    nx->mlp = ft_calloc(n_fusers ? n_fusers : 1, sizeof *nx->mlp);
    if (!nx->mlp) {
        ft_free(nx);
        return ft_err_set(err, FT_ENOMEM, "numerics: no memory");
    }
    for (uint32_t i = 0; i < n_fusers; i++) {
        ft_op *ops = NULL;
        uint32_t n = 0;
        int rc = ft_ops_parse(fusers[i].ops_json, fusers[i].id, world_size > 0 ? world_size : 1,
                              &ops, &n, err);
        if (rc) {
            ft_numerics_free(nx);
            return rc;
        }
        find_mlp(ops, n, &nx->mlp[i]);
        ft_ops_free(ops, n);
    }
    nx->res.n_policies = n_policies;
    for (uint32_t p = 0; p < n_policies; p++)
        nx->res.pol[p].name = policy_names ? policy_names[p] : "?";
    *out = nx;
    return FT_OK;
}

void ft_numerics_free(ft_numerics *nx)
{
    if (!nx) return;
    ft_free(nx->mlp);
    ft_free(nx);
}

int ft_numerics_wants(const ft_numerics *nx, uint32_t fuser)
{
    return nx && fuser < nx->n_fusers && nx->mlp[fuser].ok;
}

/* ---- run configurations ------------------------------------------------------------------- */

/* The configuration a choice runs. */
static void make_cfg(const ft_numerics *nx, int32_t recipe, uint32_t plan, const ft_qstate *q,
                     runcfg *c)
{
    memset(c, 0, sizeof *c);
    c->fused = ft_model_plan_fused_mlp(nx->m, plan) ? 1 : 0;
    const ft_recipe_model *rm = ft_model_recipe(nx->m, recipe);
    int cls = q && q->cls >= 0 ? q->cls : (rm ? (int)rm->type : FT_RT_NONE);
    if (!rm || rm->type == FT_RT_NONE) cls = FT_RT_NONE; /* outside autocast: no quantization */
    switch (cls) {
    case FT_RT_DELAYED:
        c->q.fmt = FT_QF_FP8_DELAYED;
        break;
    case FT_RT_CURRENT:
        c->q.fmt = FT_QF_FP8_CURRENT;
        break;
    case FT_RT_MXFP8:
        c->q.fmt = FT_QF_MXFP8;
        break;
    case FT_RT_BLOCK:
        c->q.fmt = FT_QF_FP8_BLOCK;
        break;
    case FT_RT_NVFP4:
        c->q.fmt = FT_QF_NVFP4;
        break;
    default:
        c->q.fmt = FT_QF_NONE;
        break; /* None, CustomRecipe (qfactory unknown) */
    }
    int fmt8 = q && q->cls >= 0 ? q->fp8_format : (rm ? rm->fp8_format : 0);
    c->q.fp8_fwd = fmt8 == 2 ? FT_FP8_E5M2 : FT_FP8_E4M3;
    c->q.fp8_bwd = fmt8 >= 1 ? FT_FP8_E5M2 : FT_FP8_E4M3;
    if (c->q.fmt == FT_QF_NVFP4 && q) {
        c->q.rht = q->rht;
        c->q.sr = q->sr;
    }
    if ((c->q.fmt == FT_QF_NVFP4 || c->q.fmt == FT_QF_MXFP8) && q) c->q.two_d = q->twod;
    c->q.pow2_scales = c->q.fmt == FT_QF_FP8_BLOCK;
}

static int cfg_equal(const runcfg *a, const runcfg *b)
{
    return a->fused == b->fused && a->q.fmt == b->q.fmt && a->q.fp8_fwd == b->q.fp8_fwd &&
           a->q.fp8_bwd == b->q.fp8_bwd && a->q.rht == b->q.rht && a->q.sr == b->q.sr &&
           a->q.two_d == b->q.two_d && a->q.pow2_scales == b->q.pow2_scales;
}

/* Same quantization as far as this call's numbers can tell: a forward-only call never sees the
 * backward-only settings (RHT and SR act on wgrad/dgrad operands; the grad element type). */
static int quant_equal(const runcfg *a, const runcfg *b, int grad)
{
    runcfg x = *a, y = *b;
    x.fused = y.fused;
    if (!grad) {
        x.q.rht = y.q.rht = x.q.sr = y.q.sr = 0;
        x.q.fp8_bwd = y.q.fp8_bwd;
    }
    return cfg_equal(&x, &y);
}

/* ---- the problem of one call -------------------------------------------------------------- */

typedef struct problem {
    ft_mlp m;
    int64_t *splits;
    float *x, *w1, *b1, *w2, *b2, *p, *dy;
    int grad;
    int64_t ny, ndx, ndw1, ndw2;
    double *ry, *rdx, *rdw1, *rdw2; /* float64 reference */
} problem;

/* Approximately N(0, 1): the sum of four 16-bit uniforms from one counter hash. */
static float gauss(uint64_t seed, uint64_t i)
{
    uint64_t h = ft_hash_mix(seed, i);
    double a = (double)(h & 0xFFFF) + (double)(h >> 16 & 0xFFFF) + (double)(h >> 32 & 0xFFFF) +
               (double)(h >> 48);
    return (float)((a * 0x1p-16 - 2.0) * 1.7320508);
}

static float *bf16_vec(int64_t n, float scale, uint64_t seed)
{
    float *v = ft_malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return NULL;
    for (int64_t i = 0; i < n; i++)
        v[i] = ft_bf16_round(gauss(seed, (uint64_t)i) * scale);
    return v;
}

static int64_t round_up(int64_t v, int64_t m)
{
    return (v + m - 1) / m * m;
}

static void problem_free(problem *P)
{
    void *all[] = {P->splits, P->x,  P->w1, P->b1,  P->w2,   P->b2,
                   P->p,      P->dy, P->ry, P->rdx, P->rdw1, P->rdw2};
    for (size_t i = 0; i < FT_ARRAY_LEN(all); i++)
        ft_free(all[i]);
    memset(P, 0, sizeof *P);
}

static int problem_init(const ft_numerics *nx, const mlp_desc *d, const ft_numerics_call *c,
                        problem *P, ft_err *err)
{
    memset(P, 0, sizeof *P);
    const int64_t K = nx->o.shrink;
    const uint32_t G = d->groups;
    int64_t k1 = round_up((d->k1 + K - 1) / K, 32), k2 = round_up((d->k2 + K - 1) / K, 32);
    int64_t n2 = round_up((d->n2 + K - 1) / K, 32);
    int64_t n1 = ft_act_is_glu(d->act.kind) ? 2 * k2 : k2;
    P->splits = ft_malloc(G * sizeof *P->splits);
    if (!P->splits) return ft_err_set(err, FT_ENOMEM, "numerics: no memory");
    int64_t used = 0;
    for (uint32_t g = 0; g < G; g++) {
        P->splits[g] = (c->splits[g] + K - 1) / K;
        used += P->splits[g];
    }
    int64_t t = round_up(used, 128);
    uint64_t wseed = ft_hash_mix(nx->o.seed, (uint64_t)c->fuser);
    uint64_t xseed = ft_hash_mix(wseed, (uint64_t)c->seq);
    P->x = bf16_vec(t * k1, 1.0f, xseed + 1);
    P->w1 = bf16_vec(G * n1 * k1, 1.0f / sqrtf((float)k1), wseed + 2);
    P->b1 = d->bias1 ? bf16_vec(G * n1, 0.1f, wseed + 3) : NULL;
    P->w2 = bf16_vec(G * n2 * k2, 1.0f / sqrtf((float)k2), wseed + 4);
    P->b2 = d->bias2 ? bf16_vec(G * n2, 0.1f, wseed + 5) : NULL;
    P->p = d->scaled ? bf16_vec(t, 1.0f, xseed + 6) : NULL;
    P->dy = bf16_vec(t * n2, 1.0f, xseed + 7);
    if (!P->x || !P->w1 || (d->bias1 && !P->b1) || !P->w2 || (d->bias2 && !P->b2) ||
        (d->scaled && !P->p) || !P->dy)
        goto nomem;
    if (P->p) /* router probabilities in (0, 1) */
        for (int64_t i = 0; i < t; i++)
            P->p[i] = ft_bf16_round(0.5f + 0.45f * tanhf(P->p[i]));
    P->grad = c->f <= d->first + 2;
    ft_mlp m = {.n_groups = G,
                .splits = P->splits,
                .t = t,
                .k1 = k1,
                .n1 = n1,
                .k2 = k2,
                .n2 = n2,
                .act = d->act,
                .scale_bias = d->scale_bias,
                .x = P->x,
                .w1 = P->w1,
                .b1 = P->b1,
                .w2 = P->w2,
                .b2 = P->b2,
                .probs = P->p};
    m.quant.seed = xseed;
    P->m = m;
    P->ny = t * n2, P->ndx = t * k1, P->ndw1 = G * n1 * k1, P->ndw2 = G * n2 * k2;
    P->ry = ft_calloc((size_t)(P->ny > 0 ? P->ny : 1), sizeof(double));
    if (!P->ry) goto nomem;
    if (P->grad) {
        P->rdx = ft_calloc((size_t)(P->ndx > 0 ? P->ndx : 1), sizeof(double));
        P->rdw1 = ft_calloc((size_t)P->ndw1, sizeof(double));
        P->rdw2 = ft_calloc((size_t)P->ndw2, sizeof(double));
        if (!P->rdx || !P->rdw1 || !P->rdw2) goto nomem;
    }
    ft_mlp_ref r = {.y = P->ry, .dx = P->rdx, .dw1 = P->rdw1, .dw2 = P->rdw2};
    return ft_cpu_mlp_ref(&P->m, P->grad ? P->dy : NULL, &r, err);
nomem:
    return ft_err_set(err, FT_ENOMEM,
                      "numerics: no memory for fuser %u seq %lld (a larger --shrink helps)",
                      c->fuser, (long long)c->seq);
}

static void runout_free(runout *o)
{
    ft_free(o->y), ft_free(o->dx), ft_free(o->dw1), ft_free(o->dw2);
    o->y = o->dx = o->dw1 = o->dw2 = NULL;
}

/* Run configuration o->cfg on P. A TE-style refusal from the kernel is kept in o->rc. */
static int run_cfg(ft_numerics *nx, const problem *P, runout *o, ft_err *err)
{
    ft_mlp m = P->m;
    uint64_t seed = m.quant.seed;
    m.path = o->cfg.fused ? FT_MLP_FUSED : FT_MLP_UNFUSED;
    m.quant = o->cfg.q;
    m.quant.seed = seed;
    const int64_t t = m.t, n1 = m.n1;
    float *h = ft_malloc((size_t)(t * n1 > 0 ? t * n1 : 1) * sizeof *h);
    float *z = ft_malloc((size_t)(t * m.k2 > 0 ? t * m.k2 : 1) * sizeof *z);
    o->y = ft_malloc((size_t)(P->ny > 0 ? P->ny : 1) * sizeof *o->y);
    if (P->grad) {
        o->dx = ft_malloc((size_t)(P->ndx > 0 ? P->ndx : 1) * sizeof *o->dx);
        o->dw1 = ft_malloc((size_t)P->ndw1 * sizeof *o->dw1);
        o->dw2 = ft_malloc((size_t)P->ndw2 * sizeof *o->dw2);
    }
    int rc = FT_OK;
    if (!h || !z || !o->y || (P->grad && (!o->dx || !o->dw1 || !o->dw2))) {
        rc = ft_err_set(err, FT_ENOMEM, "numerics: no memory");
        goto done;
    }
    ft_err kerr = {0};
    ft_mlp_fwd f = {h, z, o->y};
    o->rc = ft_cpu_mlp_forward(&m, &f, &kerr);
    if (!o->rc && P->grad) {
        ft_mlp_bwd b = {o->dx, o->dw1, NULL, o->dw2, NULL, NULL};
        o->rc = ft_cpu_mlp_backward(&m, &f, P->dy, &b, &kerr);
    }
    nx->res.mlp_runs++;
    if (o->rc == FT_ENOMEM) {
        rc = ft_err_set(err, FT_ENOMEM, "numerics: %s", ft_err_msg(&kerr));
    } else if (o->rc) {
        ft_strlcpy(o->msg, ft_err_msg(&kerr), sizeof o->msg);
    }
done:
    ft_free(h);
    ft_free(z);
    return rc;
}

static double rel_ff(const float *a, const float *b, int64_t n, double *max_abs)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * b[i];
        if (fabs(d) > *max_abs || d != d) *max_abs = fabs(d);
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static double rel_fd(const float *a, const double *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static double worst(const double *v, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        if (v[i] > m || v[i] != v[i]) m = v[i];
    return m;
}

static double divergence(const problem *P, const runout *a, const runout *b, double *max_abs)
{
    double d[4] = {rel_ff(a->y, b->y, P->ny, max_abs), 0, 0, 0};
    if (P->grad) {
        d[1] = rel_ff(a->dx, b->dx, P->ndx, max_abs);
        d[2] = rel_ff(a->dw1, b->dw1, P->ndw1, max_abs);
        d[3] = rel_ff(a->dw2, b->dw2, P->ndw2, max_abs);
    }
    return worst(d, P->grad ? 4 : 1);
}

static double error_vs_ref(const problem *P, const runout *a)
{
    double e[4] = {rel_fd(a->y, P->ry, P->ny), 0, 0, 0};
    if (P->grad) {
        e[1] = rel_fd(a->dx, P->rdx, P->ndx);
        e[2] = rel_fd(a->dw1, P->rdw1, P->ndw1);
        e[3] = rel_fd(a->dw2, P->rdw2, P->ndw2);
    }
    return worst(e, P->grad ? 4 : 1);
}

static uint64_t nonfinite(const problem *P, const runout *a)
{
    uint64_t n = 0;
    for (int64_t i = 0; i < P->ny; i++)
        n += !isfinite(a->y[i]);
    if (P->grad) {
        for (int64_t i = 0; i < P->ndx; i++)
            n += !isfinite(a->dx[i]);
        for (int64_t i = 0; i < P->ndw1; i++)
            n += !isfinite(a->dw1[i]);
        for (int64_t i = 0; i < P->ndw2; i++)
            n += !isfinite(a->dw2[i]);
    }
    return n;
}

/* ---- one call ----------------------------------------------------------------------------- */

int ft_numerics_run(ft_numerics *nx, const ft_numerics_call *c, ft_err *err)
{
    if (!ft_numerics_wants(nx, c->fuser)) return FT_OK;
    const mlp_desc *d = &nx->mlp[c->fuser];
    const uint32_t np = nx->res.n_policies;
    if (c->n_splits != d->groups || !c->splits)
        return ft_err_set(err, FT_EINVAL,
                          "numerics: call seq %lld of fuser %u has %u splits, "
                          "the fuser has %u groups",
                          (long long)c->seq, c->fuser, c->n_splits, d->groups);
    for (uint32_t g = 0; g < c->n_splits; g++)
        if (c->splits[g] < 0)
            return ft_err_set(err, FT_EINVAL, "numerics: call seq %lld: split %u is negative",
                              (long long)c->seq, g);
    nx->res.calls_seen++;

    /* what each choice would run, and whether TE would raise on it */
    int64_t n_tok = c->n_tokens;
    if (n_tok < 0) {
        n_tok = 0;
        for (uint32_t g = 0; g < c->n_splits; g++)
            n_tok += c->splits[g];
    }
    runcfg fresh_cfg, cfg[FT_NUMERICS_MAX_POLICIES];
    const char *raise[FT_NUMERICS_MAX_POLICIES], *fresh_raise = NULL;
    const int grad = c->f <= d->first + 2;
    make_cfg(nx, c->recipe, c->fresh_plan, c->fresh_q, &fresh_cfg);
    ft_model_run_raises(nx->m, c->fuser, c->recipe, c->fresh_plan, c->fresh_q, n_tok, c->f,
                        &fresh_raise);
    int differs = 0;
    for (uint32_t p = 0; p < np; p++) {
        make_cfg(nx, c->recipe, c->chosen[p].plan, c->chosen[p].q, &cfg[p]);
        raise[p] = NULL;
        ft_model_run_raises(nx->m, c->fuser, c->recipe, c->chosen[p].plan, c->chosen[p].q, n_tok,
                            c->f, &raise[p]);
        differs |= !cfg_equal(&cfg[p], &fresh_cfg) || (raise[p] != NULL) != (fresh_raise != NULL);
    }
    if (nx->o.sample) {
        uint64_t total = nx->n_diff_run + nx->n_plain_run;
        uint64_t plain_cap = nx->o.sample / 4 ? nx->o.sample / 4 : 1;
        if (total >= nx->o.sample || (!differs && nx->n_plain_run >= plain_cap)) return FT_OK;
    }
    *(differs ? &nx->n_diff_run : &nx->n_plain_run) += 1;
    nx->res.calls_run++;

    uint64_t t0 = ft_now_ns();
    problem P;
    runout outs[FT_NUMERICS_MAX_POLICIES + 2];
    uint32_t n_outs = 0, fresh_i = 0, ctl_i = UINT32_MAX, which[FT_NUMERICS_MAX_POLICIES];
    memset(outs, 0, sizeof outs);
    int rc = problem_init(nx, d, c, &P, err);
    if (rc) goto done;

    /* fresh first, then every distinct choice, then the control (other topology, same quant) */
    outs[n_outs++].cfg = fresh_cfg;
    for (uint32_t p = 0; p < np; p++) {
        which[p] = UINT32_MAX;
        if (raise[p]) continue;
        for (uint32_t i = 0; i < n_outs; i++)
            if (cfg_equal(&outs[i].cfg, &cfg[p])) which[p] = i;
        if (which[p] == UINT32_MAX) {
            which[p] = n_outs;
            outs[n_outs++].cfg = cfg[p];
        }
    }
    if (!fresh_raise && (fresh_cfg.q.fmt == FT_QF_MXFP8 || fresh_cfg.q.fmt == FT_QF_NVFP4)) {
        runcfg other = fresh_cfg;
        other.fused = !other.fused;
        ctl_i = UINT32_MAX;
        for (uint32_t i = 0; i < n_outs; i++)
            if (cfg_equal(&outs[i].cfg, &other)) ctl_i = i;
        if (ctl_i == UINT32_MAX) {
            ctl_i = n_outs;
            outs[n_outs++].cfg = other;
        }
    }
    for (uint32_t i = 0; i < n_outs; i++) {
        if (i == fresh_i && fresh_raise) continue;
        if ((rc = run_cfg(nx, &P, &outs[i], err))) goto done;
    }
    const runout *fr = &outs[fresh_i];
    const int fresh_ok = !fresh_raise && !fr->rc;
    if (!fresh_ok) nx->res.fresh_raised++;
    if (fresh_ok) band_add(&nx->res.fresh_err, error_vs_ref(&P, fr));
    if (fresh_ok && ctl_i != UINT32_MAX && !outs[ctl_i].rc) {
        double ma = 0;
        band_add(&nx->res.harmless_band, divergence(&P, &outs[ctl_i], fr, &ma));
    }

    for (uint32_t p = 0; p < np; p++) {
        ft_numerics_policy *pol = &nx->res.pol[p];
        pol->calls++;
        const char *why = raise[p];
        const runout *o = which[p] != UINT32_MAX ? &outs[which[p]] : NULL;
        if (!why && o && o->rc) why = o->msg;
        if (why) {
            if (!pol->raised) ft_strlcpy(pol->raise_text, why, sizeof pol->raise_text);
            pol->raised++;
            pol->raised_stale += fresh_ok;
            continue;
        }
        band_add(&pol->err, error_vs_ref(&P, o));
        pol->nonfinite += nonfinite(&P, o);
        if (!fresh_ok) continue;
        double ma = 0, dv = divergence(&P, o, fr, &ma);
        band_add(&pol->div, dv);
        pol->div_max_abs = ma > pol->div_max_abs ? ma : pol->div_max_abs;
        if (cfg[p].fused == fresh_cfg.fused && quant_equal(&cfg[p], &fresh_cfg, grad)) {
            pol->same++;
        } else if (quant_equal(&cfg[p], &fresh_cfg, grad)) {
            pol->harmless++;
            band_add(&nx->res.harmless_band, dv);
        } else {
            pol->quant++;
            band_add(&nx->res.quant_band, dv);
        }
    }
done:
    for (uint32_t i = 0; i < n_outs; i++)
        runout_free(&outs[i]);
    problem_free(&P);
    nx->res.wall_ns += ft_now_ns() - t0;
    return rc;
}

/* ---- results ------------------------------------------------------------------------------ */

void ft_numerics_get(const ft_numerics *nx, ft_numerics_result *out)
{
    *out = nx->res;
}

static void band_text(FILE *f, const ft_band *b)
{
    if (!b->n)
        fprintf(f, "none measured");
    else
        fprintf(f, "[%.4g, %.4g] mean %.4g over %llu", b->min, b->max, b->sum / (double)b->n,
                (unsigned long long)b->n);
}

static void band_json(FILE *f, const char *name, const ft_band *b)
{
    fprintf(f, "\"%s\":{\"n\":%llu,\"min\":%.6g,\"max\":%.6g,\"mean\":%.6g}", name,
            (unsigned long long)b->n, b->n ? b->min : 0.0, b->n ? b->max : 0.0,
            b->n ? b->sum / (double)b->n : 0.0);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f), fputc(*s, f);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", (unsigned)(unsigned char)*s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

int ft_numerics_report(FILE *f, const ft_numerics_result *r, int json, ft_err *err)
{
    if (json) {
        fprintf(f,
                "{\"calls_seen\":%llu,\"calls_run\":%llu,\"fresh_raised\":%llu,"
                "\"mlp_runs\":%llu,\"seconds\":%.3f,",
                (unsigned long long)r->calls_seen, (unsigned long long)r->calls_run,
                (unsigned long long)r->fresh_raised, (unsigned long long)r->mlp_runs,
                (double)r->wall_ns * 1e-9);
        band_json(f, "fresh_error", &r->fresh_err);
        fputc(',', f);
        band_json(f, "harmless_band", &r->harmless_band);
        fputc(',', f);
        band_json(f, "quant_band", &r->quant_band);
        fprintf(f, ",\"policies\":[");
        for (uint32_t p = 0; p < r->n_policies; p++) {
            const ft_numerics_policy *q = &r->pol[p];
            fprintf(f, "%s{\"policy\":", p ? "," : "");
            json_str(f, q->name);
            fprintf(f,
                    ",\"calls\":%llu,\"same\":%llu,\"harmless\":%llu,\"quant\":%llu,"
                    "\"raised\":%llu,\"raised_stale\":%llu,\"raise_text\":",
                    (unsigned long long)q->calls, (unsigned long long)q->same,
                    (unsigned long long)q->harmless, (unsigned long long)q->quant,
                    (unsigned long long)q->raised, (unsigned long long)q->raised_stale);
            if (q->raised)
                json_str(f, q->raise_text);
            else
                fputs("null", f);
            fputc(',', f);
            band_json(f, "error", &q->err);
            fputc(',', f);
            band_json(f, "divergence", &q->div);
            fprintf(f, ",\"divergence_max_abs\":%.6g,\"nonfinite\":%llu}", q->div_max_abs,
                    (unsigned long long)q->nonfinite);
        }
        fprintf(f, "]}\n");
    } else {
        fprintf(f, "numerics (cpu): %llu of %llu grouped-MLP calls run, %llu MLP runs, %.2f s\n",
                (unsigned long long)r->calls_run, (unsigned long long)r->calls_seen,
                (unsigned long long)r->mlp_runs, (double)r->wall_ns * 1e-9);
        fprintf(f, "  fresh plans vs float64 (rel L2, worst output): ");
        band_text(f, &r->fresh_err);
        fprintf(f, "\n  harmless band (fused vs unfused, same quantization): ");
        band_text(f, &r->harmless_band);
        fprintf(f, "\n  quant band (quantization differs from the fresh plan): ");
        band_text(f, &r->quant_band);
        if (r->fresh_raised)
            fprintf(f, "\n  calls whose fresh plan itself raises: %llu",
                    (unsigned long long)r->fresh_raised);
        fprintf(
            f,
            "\n  (err: vs float64; div: vs the fresh plan; both relative L2, worst of y, dx, dW1, "
            "dW2;\n   quant includes quantizer drift that every policy shares, e.g. a same-type "
            "recipe switch\n   keeps the old quantizers: compare a policy's quant count with "
            "rebuild-always's)");
        fprintf(f, "\n  %-16s %6s %6s %8s %6s %6s %6s %10s %10s %10s %9s\n", "policy", "calls",
                "same", "harmless", "quant", "raised", "stale", "err max", "div max", "max abs",
                "nonfinite");
        for (uint32_t p = 0; p < r->n_policies; p++) {
            const ft_numerics_policy *q = &r->pol[p];
            fprintf(f, "  %-16s %6llu %6llu %8llu %6llu %6llu %6llu %10.4g %10.4g %10.4g %9llu\n",
                    q->name, (unsigned long long)q->calls, (unsigned long long)q->same,
                    (unsigned long long)q->harmless, (unsigned long long)q->quant,
                    (unsigned long long)q->raised, (unsigned long long)q->raised_stale,
                    q->err.n ? q->err.max : 0.0, q->div.n ? q->div.max : 0.0, q->div_max_abs,
                    (unsigned long long)q->nonfinite);
        }
        for (uint32_t p = 0; p < r->n_policies; p++)
            if (r->pol[p].raised)
                fprintf(f, "  %s raised %llu times (%llu where the fresh plan runs): %s\n",
                        r->pol[p].name, (unsigned long long)r->pol[p].raised,
                        (unsigned long long)r->pol[p].raised_stale, r->pol[p].raise_text);
    }
    if (ferror(f)) return ft_err_set(err, FT_EIO, "numerics report: write failed");
    return FT_OK;
}

/* ---- trace driver ------------------------------------------------------------------------- */
/*
 * Drives the replay engine batch by batch with its per-call stream (one JSON line per call and
 * policy: reset flag and plan text) going to a scratch file, and mirrors what each policy's
 * fuser holds: the quantizer state (ft_model_reset on every reset the engine reports) and the
 * plan (plan text -> plan id of this driver's own model, where every cached plan was once a
 * fresh build). This needs nothing from the engine beyond its public per-call stream.
 */

static int read_line(FILE *f, ft_buf *b)
{
    b->len = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF && ch != '\n') {
        uint8_t c8 = (uint8_t)ch;
        if (ft_buf_append(b, &c8, 1)) return FT_ENOMEM;
    }
    if (ch == EOF && b->len == 0) return FT_ECORRUPT;
    uint8_t z = 0;
    if (ft_buf_append(b, &z, 1)) return FT_ENOMEM;
    b->len--;
    return FT_OK;
}

static int plan_id_of(const ft_model *m, const char *text, uint32_t *id)
{
    uint32_t n = ft_model_n_plans(m);
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(ft_model_plan_text(m, i), text)) {
            *id = i;
            return 1;
        }
    return 0;
}

int ft_numerics_replay_trace(ft_trace *t, const ft_replay_opts *ropts,
                             const ft_numerics_opts *nopts, ft_replay_result *rr_out,
                             ft_numerics_result *out, ft_err *err)
{
    ft_err local;
    if (!err) err = &local;
    uint32_t n_fusers = ft_trace_n_fusers(t), n_recipes = ft_trace_n_recipes(t);
    const ft_header *hdr = ft_trace_header(t);
    ft_fuser_def *fusers = ft_calloc(n_fusers ? n_fusers : 1, sizeof *fusers);
    ft_recipe_def *recipes = ft_calloc(n_recipes ? n_recipes : 1, sizeof *recipes);
    ft_replay_result *rr = ft_calloc(1, sizeof *rr);
    ft_qstate *qs = NULL;
    uint32_t *plan_of = NULL;
    ft_replay *eng = NULL;
    ft_model *m = NULL;
    ft_numerics *nx = NULL;
    ft_reader *rd = NULL;
    FILE *pc = NULL;
    ft_buf line = {0};
    const char *names[FT_NUMERICS_MAX_POLICIES];
    ft_numerics_choice ch[FT_NUMERICS_MAX_POLICIES];
    int rc = FT_OK;
    if (!fusers || !recipes || !rr) {
        rc = ft_err_set(err, FT_ENOMEM, "numerics: out of memory");
        goto done;
    }
    for (uint32_t i = 0; i < n_fusers; i++)
        fusers[i] = *ft_trace_fuser(t, i);
    for (uint32_t i = 0; i < n_recipes; i++)
        recipes[i] = *ft_trace_recipe(t, i);
    pc = tmpfile();
    if (!pc) {
        rc = ft_err_set(err, FT_EIO, "numerics: cannot create a scratch file");
        goto done;
    }
    ft_replay_opts ro = ropts ? *ropts : (ft_replay_opts){0};
    ro.per_call = pc;
    ro.explain = NULL;
    if ((rc = ft_replay_new(fusers, n_fusers, recipes, n_recipes, hdr, &ro, &eng, err))) goto done;
    if ((rc = ft_model_new(fusers, n_fusers, recipes, n_recipes, hdr ? hdr->env_json : NULL, ro.env,
                           ro.n_env, &m, err)))
        goto done;
    ft_replay_get(eng, rr);
    const uint32_t np = rr->n_policies;
    if (np > FT_NUMERICS_MAX_POLICIES) {
        rc = ft_err_set(err, FT_ERANGE, "numerics: too many policies (%u)", np);
        goto done;
    }
    for (uint32_t p = 0; p < np; p++)
        names[p] = ft_policy_name(rr->pol[p].policy);
    int64_t ws = hdr && hdr->has_world_size ? hdr->world_size : 1;
    if ((rc = ft_numerics_new(m, fusers, n_fusers, ws, names, np, nopts, &nx, err))) goto done;
    qs = ft_malloc((size_t)np * (n_fusers ? n_fusers : 1) * sizeof *qs);
    plan_of = ft_malloc((size_t)np * (n_fusers ? n_fusers : 1) * sizeof *plan_of);
    if (!qs || !plan_of) {
        rc = ft_err_set(err, FT_ENOMEM, "numerics: out of memory");
        goto done;
    }
    for (size_t i = 0; i < (size_t)np * n_fusers; i++) {
        ft_qstate_init(&qs[i]);
        plan_of[i] = UINT32_MAX;
    }
    if ((rc = ft_reader_open(t, FT_READ_SPLITS, &rd))) {
        ft_err_set(err, rc, "%s", ft_err_msg(ft_trace_error(t)));
        goto done;
    }
    for (;;) {
        const ft_batch *b;
        if ((rc = ft_reader_next(rd, &b))) {
            ft_err_set(err, rc, "%s", ft_err_msg(ft_trace_error(t)));
            goto done;
        }
        if (!b) break;
        rewind(pc);
        if ((rc = ft_replay_batch(eng, b, err))) goto done;
        if (fflush(pc) || fseek(pc, 0, SEEK_SET)) {
            rc = ft_err_set(err, FT_EIO, "numerics: scratch file");
            goto done;
        }
        for (uint32_t i = 0; i < b->n; i++) {
            if (b->kind[i] != FT_REC_CALL) continue;
            const uint32_t u = b->fuser[i];
            const int32_t recipe = b->recipe[i];
            const uint32_t n_ops = fusers[u].n_ops, fl = b->flags[i];
            const uint32_t f = !(fl & FT_CF_GRAD)      ? n_ops
                               : (fl & FT_CF_INPUT_RG) ? 0
                                                       : b->first_rg[i];
            uint32_t fresh;
            if ((rc = ft_model_build(m, u, recipe, f, &fresh, err))) goto done;
            for (uint32_t p = 0; p < np; p++) {
                if ((rc = read_line(pc, &line))) {
                    rc = ft_err_set(err, rc == FT_ENOMEM ? FT_ENOMEM : FT_ECORRUPT,
                                    "numerics: engine per-call stream ended early at seq %lld",
                                    (long long)b->seq[i]);
                    goto done;
                }
                json_error_t je;
                json_t *o = json_loadb((const char *)line.data, line.len, 0, &je);
                json_t *js = o ? json_object_get(o, "seq") : NULL;
                json_t *jr = o ? json_object_get(o, "reset") : NULL;
                json_t *jp = o ? json_object_get(o, "plan") : NULL;
                if (!js || !json_is_integer(js) || json_integer_value(js) != b->seq[i] ||
                    !json_is_boolean(jr) || !json_is_string(jp)) {
                    json_decref(o);
                    rc = ft_err_set(err, FT_ECORRUPT,
                                    "numerics: engine per-call line for seq %lld, policy %s "
                                    "not understood",
                                    (long long)b->seq[i], names[p]);
                    goto done;
                }
                size_t k = (size_t)p * n_fusers + u;
                if (json_is_true(jr)) ft_model_reset(m, &qs[k], recipe);
                if (!plan_id_of(m, json_string_value(jp), &plan_of[k])) {
                    rc = ft_err_set(err, FT_ESTATE,
                                    "numerics: seq %lld, policy %s: plan '%s' was never built "
                                    "fresh",
                                    (long long)b->seq[i], names[p], json_string_value(jp));
                    json_decref(o);
                    goto done;
                }
                json_decref(o);
                ch[p].plan = plan_of[k];
                ch[p].q = &qs[k];
            }
            if (!ft_numerics_wants(nx, u) || !b->splits_off) continue;
            ft_qstate fq;
            ft_model_fresh_qstate(m, recipe, &fq);
            ft_numerics_call c = {.fuser = u,
                                  .recipe = recipe,
                                  .f = f,
                                  .seq = b->seq[i],
                                  .splits = b->splits + b->splits_off[i],
                                  .n_splits = b->splits_off[i + 1] - b->splits_off[i],
                                  .n_tokens = -1,
                                  .fresh_plan = fresh,
                                  .fresh_q = &fq,
                                  .chosen = ch};
            if (c.n_splits == 0) continue; /* a call without split sizes: nothing to run */
            if ((rc = ft_numerics_run(nx, &c, err))) goto done;
        }
        rewind(pc);
    }
    ft_replay_get(eng, rr);
    if (rr_out) *rr_out = *rr;
    ft_numerics_get(nx, out);
done:
    ft_buf_free(&line);
    ft_reader_close(rd);
    if (pc) fclose(pc);
    ft_numerics_free(nx);
    ft_model_free(m);
    ft_replay_free(eng);
    ft_free(qs);
    ft_free(plan_of);
    ft_free(rr);
    ft_free(fusers);
    ft_free(recipes);
    return rc;
}
