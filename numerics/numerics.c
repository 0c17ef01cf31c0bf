/*
 * numerics.c - numerical replay of sampled grouped-MLP calls (ft_numerics.h) on the CPU kernels
 * or on the device (ft_cuda_nx).
 *
 * Per call: derive each choice's run configuration (topology from the plan, quantization from the
 * quantizer state and the call's recipe), run every distinct configuration once on the same
 * inputs, run a float64 reference, and fold the comparisons into per-policy figures and the two
 * bands. Limits: FP8 delayed scaling runs with scale 1; CustomRecipe quantizers run unquantized;
 * only the FC1 -> activation -> FC2 window is run (other ops of the fuser are ignored).
 *
 * A call goes through three phases: plan (call order, reads the model: configurations, raises,
 * the sampling decision), execute (touches nothing shared: inputs, reference, runs, comparisons;
 * any thread) and fold (call order, into the results). The trace driver queues planned calls
 * from the engine's per-call hook and executes each full queue on a pool of threads. With an info
 * stream or a time limit it first runs a dry pass (plans only) to estimate the work, prints it
 * and refuses what does not fit; a stop flag (Ctrl-C) ends it with the results so far.
 */
#define _POSIX_C_SOURCE 200809L
#include "numerics_int.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

/* ---- per-fuser MLP description ------------------------------------------------------------ */

static void band_add(ft_band *b, double v)
{
    if (!b->n || v < b->min) b->min = v;
    if (!b->n || v > b->max) b->max = v;
    b->n++;
    b->sum += v;
}

/* The model's grouped-MLP window of a fuser, as the kernels take it. */
static void mlp_from_model(const ft_model *m, uint32_t fuser, mlp_desc *d)
{
    memset(d, 0, sizeof *d);
    ft_grouped_mlp g;
    if (!ft_model_grouped_mlp(m, fuser, &g)) return;
    static const ft_act_kind kinds[] = {[FT_MLP_SWIGLU] = FT_ACT_SWIGLU,
                                        [FT_MLP_CLAMPED_QGEGLU] = FT_ACT_CLAMPED_QGEGLU,
                                        [FT_MLP_SRELU] = FT_ACT_SRELU};
    d->ok = 1;
    d->scaled = g.scaled;
    d->bias1 = g.bias1;
    d->bias2 = g.bias2;
    d->scale_bias = g.scale_bias;
    d->first = g.first;
    d->groups = g.groups;
    d->k1 = g.k1, d->k2 = g.k2, d->n2 = g.n2;
    d->act = (ft_act){kinds[g.act], g.interleave, 0, 0, 0};
    if (g.act == FT_MLP_CLAMPED_QGEGLU) {
        d->act.limit = (float)g.limit;
        d->act.alpha = (float)g.alpha;
        d->act.offset = (float)g.offset;
    }
}

int ft_numerics_new(const ft_model *m, const char *const *policy_names, uint32_t n_policies,
                    const ft_numerics_opts *opts, ft_numerics **out, ft_err *err)
{
    *out = NULL;
    if (!m) return ft_err_set(err, FT_EINVAL, "numerics: no model");
    const uint32_t n_fusers = ft_model_n_fusers(m);
    if (n_policies > FT_NUMERICS_MAX_POLICIES)
        return ft_err_set(err, FT_ERANGE, "numerics: %u policies (at most %d)", n_policies,
                          FT_NUMERICS_MAX_POLICIES);
    if (opts && opts->backend != FT_NUMERICS_CPU && opts->backend != FT_NUMERICS_CUDA)
        return ft_err_set(err, FT_EINVAL, "numerics: unknown back end %d", (int)opts->backend);
    char device[64] = "";
    ft_cuda_nx *dev = NULL;
    if (opts && opts->backend == FT_NUMERICS_CUDA) {
        ft_err derr = {0};
        int rc = ft_cuda_nx_new(&dev, &derr);
        if (rc == FT_ENODEV)
            return ft_err_set(err, FT_ENODEV, "numerics cuda: %s; use --numerics cpu",
                              ft_err_msg(&derr));
        if (rc) return ft_err_set(err, rc, "numerics cuda: %s", ft_err_msg(&derr));
        int n_sm = 0;
        rc = ft_cuda_device_info(device, sizeof device, &n_sm, err);
        if (rc) {
            ft_cuda_nx_free(dev);
            return rc;
        }
    }
    ft_numerics *nx = ft_calloc(1, sizeof *nx);
    if (!nx) {
        ft_cuda_nx_free(dev);
        return ft_err_set(err, FT_ENOMEM, "numerics: no memory");
    }
    nx->dev = dev;
    if (dev && opts && opts->profile) ft_cuda_nx_profile(dev, 1, NULL);
    nx->m = m;
    if (opts) nx->o = *opts;
    if (nx->o.shrink < 1) nx->o.shrink = 1;
    nx->n_fusers = n_fusers;
    pthread_mutex_init(&nx->gpu_lock, NULL);
    nx->res.backend = nx->o.backend;
    nx->res.n_threads = 1;
    ft_strlcpy(nx->res.device, device, sizeof nx->res.device);
    nx->mlp = ft_calloc(n_fusers ? n_fusers : 1, sizeof *nx->mlp);
    if (!nx->mlp) {
        ft_numerics_free(nx);
        return ft_err_set(err, FT_ENOMEM, "numerics: no memory");
    }
    for (uint32_t i = 0; i < n_fusers; i++)
        mlp_from_model(m, i, &nx->mlp[i]);
    nx->res.n_policies = n_policies;
    for (uint32_t p = 0; p < n_policies; p++)
        nx->res.pol[p].name = policy_names ? policy_names[p] : "?";
    *out = nx;
    return FT_OK;
}

int ft_numerics_backend_check(ft_numerics_backend be, ft_err *err)
{
    if (be != FT_NUMERICS_CUDA || ft_cuda_device_count() >= 1) return FT_OK;
    ft_cuda_nx *dev = NULL;
    ft_err derr = {0};
    int rc = ft_cuda_nx_new(&dev, &derr); /* says why: no CUDA build, or no device */
    ft_cuda_nx_free(dev);
    return ft_err_set(err, FT_ENODEV, "numerics cuda: %s; use --numerics cpu",
                      rc ? ft_err_msg(&derr) : "no CUDA device");
}

void ft_numerics_free(ft_numerics *nx)
{
    if (!nx) return;
    ft_cuda_nx_free(nx->dev);
    pthread_mutex_destroy(&nx->gpu_lock);
    ft_hmap_free(&nx->sit);
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

static float *bf16_vec(int64_t n, float scale, uint64_t seed)
{
    float *v = ft_malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return NULL;
    for (int64_t i = 0; i < n; i++)
        v[i] = ft_bf16_round(ft_nx_gauss(seed, (uint64_t)i) * scale);
    return v;
}

static int64_t round_up(int64_t v, int64_t m)
{
    return (v + m - 1) / m * m;
}

void problem_free(problem *P)
{
    void *all[] = {P->splits, P->x,  P->w1, P->b1,  P->w2,   P->b2,
                   P->p,      P->dy, P->ry, P->rdx, P->rdw1, P->rdw2};
    for (size_t i = 0; i < FT_ARRAY_LEN(all); i++)
        ft_free(all[i]);
    memset(P, 0, sizeof *P);
}

/* Shapes, splits and seeds of the call (the inputs are drawn by problem_inputs or the device). */
int problem_shape(const ft_numerics *nx, const mlp_desc *d, const job *c, problem *P, ft_err *err)
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
    P->grad = c->grad;
    ft_mlp m = {.n_groups = G,
                .splits = P->splits,
                .t = t,
                .k1 = k1,
                .n1 = n1,
                .k2 = k2,
                .n2 = n2,
                .act = d->act,
                .scale_bias = d->scale_bias};
    m.quant.seed = xseed;
    P->m = m;
    P->ny = t * n2, P->ndx = t * k1, P->ndw1 = G * n1 * k1, P->ndw2 = G * n2 * k2;
    ft_nx_problem np = {.n_groups = G,
                        .splits = P->splits,
                        .t = t,
                        .k1 = k1,
                        .n1 = n1,
                        .k2 = k2,
                        .n2 = n2,
                        .act = d->act,
                        .bias1 = d->bias1,
                        .bias2 = d->bias2,
                        .scaled = d->scaled,
                        .scale_bias = d->scale_bias,
                        .grad = (uint8_t)(c->grad != 0),
                        .wseed = wseed,
                        .xseed = xseed,
                        .w1_scale = 1.0f / sqrtf((float)k1),
                        .w2_scale = 1.0f / sqrtf((float)k2)};
    P->np = np;
    return FT_OK;
}

/* Host inputs (the streams ft_nx_problem documents) and the float64 reference. */
static int problem_inputs(const mlp_desc *d, const job *c, problem *P, ft_err *err)
{
    const ft_nx_problem *np = &P->np;
    const int64_t t = np->t, k1 = np->k1, n1 = np->n1, k2 = np->k2, n2 = np->n2;
    const int64_t G = np->n_groups;
    P->x = bf16_vec(t * k1, 1.0f, np->xseed + 1);
    P->w1 = bf16_vec(G * n1 * k1, np->w1_scale, np->wseed + 2);
    P->b1 = d->bias1 ? bf16_vec(G * n1, 0.1f, np->wseed + 3) : NULL;
    P->w2 = bf16_vec(G * n2 * k2, np->w2_scale, np->wseed + 4);
    P->b2 = d->bias2 ? bf16_vec(G * n2, 0.1f, np->wseed + 5) : NULL;
    P->p = d->scaled ? bf16_vec(t, 1.0f, np->xseed + 6) : NULL;
    P->dy = bf16_vec(t * n2, 1.0f, np->xseed + 7);
    if (!P->x || !P->w1 || (d->bias1 && !P->b1) || !P->w2 || (d->bias2 && !P->b2) ||
        (d->scaled && !P->p) || !P->dy)
        goto nomem;
    if (P->p) /* router probabilities in (0, 1) */
        for (int64_t i = 0; i < t; i++)
            P->p[i] = ft_bf16_round(0.5f + 0.45f * tanhf(P->p[i]));
    P->m.x = P->x, P->m.w1 = P->w1, P->m.b1 = P->b1, P->m.w2 = P->w2, P->m.b2 = P->b2;
    P->m.probs = P->p;
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

/* The CPU reference on m; a TE-style refusal from the kernel is kept in o->rc. */
static int run_cpu(const ft_mlp *m, const problem *P, runout *o, ft_err *err)
{
    const int64_t t = m->t;
    float *h = ft_malloc((size_t)(t * m->n1 > 0 ? t * m->n1 : 1) * sizeof *h);
    float *z = ft_malloc((size_t)(t * m->k2 > 0 ? t * m->k2 : 1) * sizeof *z);
    int rc = FT_OK;
    if (!h || !z) {
        rc = ft_err_set(err, FT_ENOMEM, "numerics: no memory");
        goto done;
    }
    ft_err kerr = {0};
    ft_mlp_fwd f = {h, z, o->y};
    o->rc = ft_cpu_mlp_forward(m, &f, &kerr);
    if (!o->rc && P->grad) {
        ft_mlp_bwd b = {o->dx, o->dw1, NULL, o->dw2, NULL, NULL};
        o->rc = ft_cpu_mlp_backward(m, &f, P->dy, &b, &kerr);
    }
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

/* The configuration as the kernels take it. */
static void cfg_mlp(const problem *P, const runcfg *c, ft_mlp_path *path, ft_mlp_quant *q)
{
    *path = c->fused ? FT_MLP_FUSED : FT_MLP_UNFUSED;
    *q = c->q;
    q->seed = P->m.quant.seed;
}

/* CPU back end: host inputs and reference, every run, then the comparisons. outs[0] is the fresh
 * plan (not run when skip0). */
static int exec_cpu(const mlp_desc *d, job *j, problem *P, runout *outs, uint32_t n_outs, int skip0,
                    ft_err *err)
{
    double rf = 0, uf = 0;
    ft_nx_flops(&P->np, &rf, &uf);
    uint64_t t0 = ft_now_ns();
    int rc = problem_inputs(d, j, P, err);
    uint64_t t1 = ft_now_ns();
    j->phase_ms[1] += (double)(t1 - t0) * 1e-6; /* inputs and reference */
    j->flops += rf;
    for (uint32_t i = 0; i < n_outs && !rc; i++) {
        if (i == 0 && skip0) continue;
        runout *o = &outs[i];
        ft_mlp m = P->m;
        cfg_mlp(P, &o->cfg, &m.path, &m.quant);
        o->y = ft_malloc((size_t)(P->ny > 0 ? P->ny : 1) * sizeof *o->y);
        if (P->grad) {
            o->dx = ft_malloc((size_t)(P->ndx > 0 ? P->ndx : 1) * sizeof *o->dx);
            o->dw1 = ft_malloc((size_t)P->ndw1 * sizeof *o->dw1);
            o->dw2 = ft_malloc((size_t)P->ndw2 * sizeof *o->dw2);
        }
        if (!o->y || (P->grad && (!o->dx || !o->dw1 || !o->dw2)))
            return ft_err_set(err, FT_ENOMEM, "numerics: no memory");
        j->runs++;
        uint64_t r0 = ft_now_ns();
        if ((rc = run_cpu(&m, P, o, err))) break;
        uint64_t r1 = ft_now_ns();
        j->phase_ms[5] += (double)(r1 - r0) * 1e-6;
        if (o->rc) continue;
        j->flops += uf;
        o->err = error_vs_ref(P, o);
        o->nonfinite = nonfinite(P, o);
        j->phase_ms[4] += (double)(ft_now_ns() - r1) * 1e-6;
    }
    uint64_t c0 = ft_now_ns();
    const int base = !rc && !skip0 && !outs[0].rc;
    for (uint32_t i = 1; i < n_outs && base; i++)
        if (!outs[i].rc) outs[i].div = divergence(P, &outs[i], &outs[0], &outs[i].max_abs);
    j->phase_ms[4] += (double)(ft_now_ns() - c0) * 1e-6;
    return rc;
}

/* CUDA back end: everything on the device (inputs from the seeds, the float64 reference, the
 * runs, the comparisons); one copy of the figures comes back. */
static int exec_cuda(ft_numerics *nx, job *j, problem *P, runout *outs, uint32_t n_outs, int skip0,
                     ft_err *err)
{
    uint64_t need = 0, free_b = 0, total_b = 0;
    ft_nx_bytes(&P->np, &need);
    int rc = FT_OK;
    pthread_mutex_lock(&nx->gpu_lock);
    ft_err derr = {0};
    if (ft_cuda_mem_info(&free_b, &total_b, &derr) == FT_OK && need > total_b / 10 * 9) {
        rc = ft_err_set(err, FT_ENOMEM,
                        "numerics cuda: fuser %u seq %lld needs about %.1f GB of device memory, "
                        "the device has %.1f GB; a larger --shrink helps",
                        j->fuser, (long long)j->seq, (double)need * 1e-9, (double)total_b * 1e-9);
        goto done;
    }
    if ((rc = ft_cuda_nx_problem(nx->dev, &P->np, &derr))) goto fail;
    double rf = 0, uf = 0;
    ft_nx_flops(&P->np, &rf, &uf);
    j->flops += rf;
    uint32_t slot[FT_NUMERICS_MAX_POLICIES + 2], n_slots = 0;
    for (uint32_t i = 0; i < n_outs; i++) {
        slot[i] = UINT32_MAX;
        if (i == 0 && skip0) continue;
        ft_mlp_path path;
        ft_mlp_quant q;
        cfg_mlp(P, &outs[i].cfg, &path, &q);
        if ((rc = ft_cuda_nx_run(nx->dev, path, &q, i == 0 ? FT_NX_BASE : 0, &derr))) goto fail;
        slot[i] = n_slots++;
        j->runs++;
        j->device_runs++;
    }
    ft_nx_figs figs[FT_NUMERICS_MAX_POLICIES + 2];
    if ((rc = ft_cuda_nx_collect(nx->dev, figs, n_slots, &derr))) goto fail;
    for (uint32_t i = 0; i < n_outs; i++) {
        if (slot[i] == UINT32_MAX) continue;
        const ft_nx_figs *f = &figs[slot[i]];
        runout *o = &outs[i];
        if (!f->rc) j->flops += uf;
        o->rc = f->rc;
        ft_strlcpy(o->msg, f->msg, sizeof o->msg);
        o->err = f->err;
        o->nonfinite = f->nonfinite;
        o->div = f->has_base ? f->div : 0.0;
        o->max_abs = f->has_base ? f->div_max_abs : 0.0;
    }
    goto done;
fail:
    ft_err_set(err, rc, "numerics cuda: fuser %u seq %lld: %s", j->fuser, (long long)j->seq,
               ft_err_msg(&derr));
done:
    pthread_mutex_unlock(&nx->gpu_lock);
    return rc;
}

/* ---- one call: plan, execute, fold --------------------------------------------------------- */

void job_free(job *j)
{
    ft_free(j->splits);
    j->splits = NULL;
}

static uint64_t cfg_hash(uint64_t h, const runcfg *c, int raises)
{
    const uint64_t v[] = {
        c->fused, (uint64_t)c->q.fmt, (uint64_t)c->q.fp8_fwd, (uint64_t)c->q.fp8_bwd, c->q.rht,
        c->q.sr,  c->q.two_d,         c->q.pow2_scales,       (uint64_t)raises};
    for (size_t i = 0; i < FT_ARRAY_LEN(v); i++)
        h = ft_hash_mix(h, v[i]);
    return h;
}

/* --sample N, in call order: a call is a "situation" (backward or not, what the fresh plan and
 * every choice run, which of them raise). The first call of every situation is taken, then more
 * of the same situation up to N/8 each, calls where no choice differs from the fresh plan at most
 * N/4 in all, N in all. So rare situations (a stale plan that raises) are not crowded out by
 * common ones. */
static int sample_call(ft_numerics *nx, const job *j, uint32_t np, int differs)
{
    const uint64_t n = nx->o.sample;
    if (nx->n_diff_run + nx->n_plain_run >= n) return 0;
    uint64_t h =
        cfg_hash(ft_hash_mix(0x5a17u, (uint64_t)j->grad), &j->fresh_cfg, j->fresh_raise != NULL);
    for (uint32_t p = 0; p < np; p++)
        h = cfg_hash(h, &j->cfg[p], j->raise[p] != NULL);
    uint32_t seen = ft_hmap_get(&nx->sit, h);
    if (seen == UINT32_MAX) {                 /* first of its kind */
        if (nx->sit.n >= SIT_SLOTS) return 0; /* too many kinds: an unseen one counts as seen */
        seen = 0;
    } else {
        const uint64_t per = n / 8 ? n / 8 : 1, plain_cap = n / 4 ? n / 4 : 1;
        if (seen >= per || (!differs && nx->n_plain_run >= plain_cap)) return 0;
    }
    /* the memo is a sampling aid: out of memory, the call is not sampled */
    if (ft_hmap_put(&nx->sit, h, seen + 1)) return 0;
    nx->n_sits += !seen;
    return 1;
}

/* Decide what every choice runs and whether the call is sampled (call order; reads the model).
 * 1: sampled, j filled; 0: not sampled; < 0: an error. */
int plan_call(ft_numerics *nx, const ft_numerics_call *c, job *j, ft_err *err)
{
    if (!ft_numerics_wants(nx, c->fuser)) return 0;
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

    int64_t n_tok = c->n_tokens;
    if (n_tok < 0) {
        n_tok = 0;
        for (uint32_t g = 0; g < c->n_splits; g++)
            n_tok += c->splits[g];
    }
    memset(j, 0, sizeof *j);
    j->fuser = c->fuser;
    j->seq = c->seq;
    j->grad = c->f <= d->first + 2;
    make_cfg(nx, c->recipe, c->fresh_plan, c->fresh_q, &j->fresh_cfg);
    ft_model_run_raises(nx->m, c->fuser, c->recipe, c->fresh_plan, c->fresh_q, n_tok, c->f,
                        &j->fresh_raise);
    int differs = 0;
    for (uint32_t p = 0; p < np; p++) {
        make_cfg(nx, c->recipe, c->chosen[p].plan, c->chosen[p].q, &j->cfg[p]);
        ft_model_run_raises(nx->m, c->fuser, c->recipe, c->chosen[p].plan, c->chosen[p].q, n_tok,
                            c->f, &j->raise[p]);
        differs |= !cfg_equal(&j->cfg[p], &j->fresh_cfg) ||
                   (j->raise[p] != NULL) != (j->fresh_raise != NULL);
    }
    if (nx->o.sample && !sample_call(nx, j, np, differs)) return 0;
    *(differs ? &nx->n_diff_run : &nx->n_plain_run) += 1;
    j->splits = ft_malloc(d->groups * sizeof *j->splits);
    if (!j->splits) return ft_err_set(err, FT_ENOMEM, "numerics: no memory");
    memcpy(j->splits, c->splits, d->groups * sizeof *j->splits);
    return 1;
}

/* The runs of a call: the fresh plan first (outs[0], not run when it raises), then every
 * distinct choice that does not raise (which[p]: its run, UINT32_MAX if it raises), then the
 * control: the fresh quantization on the other topology (*ctl_i; UINT32_MAX: none). */
uint32_t list_outs(const job *j, uint32_t np, runout *outs, uint32_t *which, uint32_t *ctl_i)
{
    uint32_t n_outs = 0;
    *ctl_i = UINT32_MAX;
    outs[n_outs++].cfg = j->fresh_cfg;
    for (uint32_t p = 0; p < np; p++) {
        which[p] = UINT32_MAX;
        if (j->raise[p]) continue;
        for (uint32_t i = 0; i < n_outs; i++)
            if (cfg_equal(&outs[i].cfg, &j->cfg[p])) which[p] = i;
        if (which[p] == UINT32_MAX) {
            which[p] = n_outs;
            outs[n_outs++].cfg = j->cfg[p];
        }
    }
    const runcfg *fc = &j->fresh_cfg;
    if (!j->fresh_raise && (fc->q.fmt == FT_QF_MXFP8 || fc->q.fmt == FT_QF_NVFP4)) {
        runcfg other = *fc;
        other.fused = !other.fused;
        for (uint32_t i = 0; i < n_outs; i++)
            if (cfg_equal(&outs[i].cfg, &other)) *ctl_i = i;
        if (*ctl_i == UINT32_MAX) {
            *ctl_i = n_outs;
            outs[n_outs++].cfg = other;
        }
    }
    return n_outs;
}

/* Inputs, reference, every distinct configuration, comparisons: into j only (any thread). */
static void execute_call(ft_numerics *nx, job *j)
{
    const mlp_desc *d = &nx->mlp[j->fuser];
    const uint32_t np = nx->res.n_policies;
    problem P;
    runout outs[FT_NUMERICS_MAX_POLICIES + 2];
    uint32_t n_outs = 0, fresh_i = 0, ctl_i = UINT32_MAX, which[FT_NUMERICS_MAX_POLICIES];
    memset(outs, 0, sizeof outs);
    int rc = problem_shape(nx, d, j, &P, &j->err);
    if (rc) goto done;

    n_outs = list_outs(j, np, outs, which, &ctl_i);
    const runcfg *fc = &j->fresh_cfg;
    const int skip0 = j->fresh_raise != NULL;
    if (nx->o.backend == FT_NUMERICS_CUDA)
        rc = exec_cuda(nx, j, &P, outs, n_outs, skip0, &j->err);
    else
        rc = exec_cpu(d, j, &P, outs, n_outs, skip0, &j->err);
    if (rc) goto done;
    const runout *fr = &outs[fresh_i];
    j->fresh_ok = !j->fresh_raise && !fr->rc;
    if (j->fresh_ok) j->fresh_err = fr->err;
    if (j->fresh_ok && ctl_i != UINT32_MAX && !outs[ctl_i].rc) {
        j->has_ctl = 1;
        j->ctl_div = outs[ctl_i].div;
    }
    for (uint32_t p = 0; p < np; p++) {
        choice_out *co = &j->out[p];
        const char *why = j->raise[p];
        const runout *o = which[p] != UINT32_MAX ? &outs[which[p]] : NULL;
        if (!why && o && o->rc) why = o->msg;
        if (why) {
            co->kind = OUT_RAISED;
            ft_strlcpy(co->text, why, sizeof co->text);
            continue;
        }
        co->err = o->err;
        co->nonfinite = o->nonfinite;
        if (!j->fresh_ok) {
            co->kind = OUT_NOFRESH;
            continue;
        }
        co->div = o->div;
        co->max_abs = o->max_abs;
        if (!quant_equal(&j->cfg[p], fc, j->grad))
            co->kind = OUT_QUANT;
        else
            co->kind = j->cfg[p].fused == fc->fused ? OUT_SAME : OUT_HARMLESS;
    }
done:
    j->rc = rc;
    for (uint32_t i = 0; i < n_outs; i++)
        runout_free(&outs[i]);
    problem_free(&P);
}

/* Add an executed call into the results (call order). */
static int fold_call(ft_numerics *nx, const job *j, ft_err *err)
{
    if (j->rc) return ft_err_set(err, j->rc, "%s", ft_err_msg(&j->err));
    ft_numerics_result *r = &nx->res;
    r->calls_run++;
    r->mlp_runs += j->runs;
    r->device_runs += j->device_runs;
    r->flops += j->flops;
    for (int k = 0; k < FT_NX_PHASES; k++)
        r->phase_ms[k] += j->phase_ms[k];
    if (j->fallback[0] && !r->fallback_text[0])
        ft_strlcpy(r->fallback_text, j->fallback, sizeof r->fallback_text);
    if (!j->fresh_ok) r->fresh_raised++;
    if (j->fresh_ok) band_add(&r->fresh_err, j->fresh_err);
    if (j->has_ctl) band_add(&r->harmless_band, j->ctl_div);
    for (uint32_t p = 0; p < r->n_policies; p++) {
        ft_numerics_policy *pol = &r->pol[p];
        const choice_out *co = &j->out[p];
        pol->calls++;
        if (co->kind == OUT_RAISED) {
            if (!pol->raised) ft_strlcpy(pol->raise_text, co->text, sizeof pol->raise_text);
            pol->raised++;
            pol->raised_stale += j->fresh_ok;
            continue;
        }
        band_add(&pol->err, co->err);
        pol->nonfinite += co->nonfinite;
        if (co->kind == OUT_NOFRESH) continue;
        band_add(&pol->div, co->div);
        pol->div_max_abs = co->max_abs > pol->div_max_abs ? co->max_abs : pol->div_max_abs;
        if (co->kind == OUT_SAME) {
            pol->same++;
        } else if (co->kind == OUT_HARMLESS) {
            pol->harmless++;
            band_add(&r->harmless_band, co->div);
        } else {
            pol->quant++;
            band_add(&r->quant_band, co->div);
        }
    }
    return FT_OK;
}

int ft_numerics_run(ft_numerics *nx, const ft_numerics_call *c, ft_err *err)
{
    job *j = ft_malloc(sizeof *j);
    if (!j) return ft_err_set(err, FT_ENOMEM, "numerics: no memory");
    int rc = plan_call(nx, c, j, err);
    if (rc == 1) {
        uint64_t t0 = ft_now_ns();
        execute_call(nx, j);
        rc = fold_call(nx, j, err);
        job_free(j);
        nx->res.wall_ns += ft_now_ns() - t0;
    }
    ft_free(j);
    return rc < 0 ? rc : FT_OK;
}

/* Execute jobs[0..n) on up to n_threads threads, then fold them in order. */
typedef struct pool {
    ft_numerics *nx;
    job *jobs;
    uint32_t n;
    atomic_uint next;
    atomic_uint done;
    pthread_t main;
} pool;

/* The progress line (opts.progress): calls done of the estimate's total, rate, time left. */
static void progress_line(ft_numerics *nx, uint64_t done)
{
    if (!nx->o.info || !nx->o.progress) return;
    const double s = (double)(ft_now_ns() - nx->t_start) * 1e-9;
    const double rate = s > 0 ? (double)done / s : 0;
    const uint64_t total = nx->planned > done ? nx->planned : done;
    fprintf(nx->o.info, "\rnumerics: %llu of %llu sampled calls, %.2f calls/s, %.0f s left   ",
            (unsigned long long)done, (unsigned long long)total, rate,
            rate > 0 ? (double)(total - done) / rate : 0.0);
    fflush(nx->o.info);
}

static void *pool_worker(void *arg)
{
    pool *pl = arg;
    for (;;) {
        if (pl->nx->o.stop && *pl->nx->o.stop) return NULL;
        unsigned k = atomic_fetch_add(&pl->next, 1u);
        if (k >= pl->n) return NULL;
        execute_call(pl->nx, &pl->jobs[k]);
        unsigned d = atomic_fetch_add(&pl->done, 1u) + 1;
        if (pthread_equal(pthread_self(), pl->main))
            progress_line(pl->nx, pl->nx->res.calls_run + d);
    }
}

int run_jobs(ft_numerics *nx, job *jobs, uint32_t n, uint32_t n_threads, ft_err *err)
{
    if (!n) return FT_OK;
    uint64_t t0 = ft_now_ns();
    pool pl = {nx, jobs, n, 0, 0, pthread_self()};
    if (n_threads > n) n_threads = n;
    /* the cores are shared between the threads here and BLAS's own threads inside each call */
    if (nx->o.backend == FT_NUMERICS_CPU) {
        uint32_t per = online_cores() / (n_threads ? n_threads : 1);
        ft_cpu_blas_threads(per > 1 ? (int)per : 1);
    }
    pthread_t th[64];
    uint32_t started = 0;
    if (n_threads > FT_ARRAY_LEN(th)) n_threads = FT_ARRAY_LEN(th);
    for (; n_threads > 1 && started < n_threads - 1; started++)
        if (pthread_create(&th[started], NULL, pool_worker, &pl)) break;
    pool_worker(&pl); /* this thread works too */
    for (uint32_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (started + 1 > nx->res.n_threads) nx->res.n_threads = started + 1;
    int rc = FT_OK;
    /* folded in call order up to the first call not executed (a stop) */
    const uint32_t picked = atomic_load(&pl.next), ran = picked < n ? picked : n;
    for (uint32_t i = 0; i < n; i++) {
        if (!rc && i < ran) rc = fold_call(nx, &jobs[i], err);
        job_free(&jobs[i]);
    }
    if (ran < n) nx->res.interrupted = 1;
    nx->res.wall_ns += ft_now_ns() - t0;
    progress_line(nx, nx->res.calls_run);
    return rc;
}

/* ---- results ------------------------------------------------------------------------------ */

void ft_numerics_get(const ft_numerics *nx, ft_numerics_result *out)
{
    *out = nx->res;
    if (nx->dev && nx->o.profile) ft_cuda_nx_profile(nx->dev, -1, out->phase_ms);
    if (nx->dev) {
        uint64_t held = 0, peak = 0;
        ft_err e = {0};
        if (ft_cuda_nx_memory(nx->dev, &held, &peak, &e) == FT_OK) out->device_bytes = held + peak;
    }
}

static void band_merge(ft_band *dst, const ft_band *src)
{
    if (!src->n) return;
    if (!dst->n || src->min < dst->min) dst->min = src->min;
    if (!dst->n || src->max > dst->max) dst->max = src->max;
    dst->n += src->n;
    dst->sum += src->sum;
}

int ft_numerics_result_merge(ft_numerics_result *dst, const ft_numerics_result *src, ft_err *err)
{
    if (dst->n_policies != src->n_policies)
        return ft_err_set(err, FT_EINVAL, "numerics: merging results of %u and %u policies",
                          dst->n_policies, src->n_policies);
    dst->calls_seen += src->calls_seen;
    dst->calls_run += src->calls_run;
    dst->fresh_raised += src->fresh_raised;
    dst->mlp_runs += src->mlp_runs;
    dst->device_runs += src->device_runs;
    dst->wall_ns += src->wall_ns;
    dst->flops += src->flops;
    dst->calls_planned += src->calls_planned;
    dst->interrupted |= src->interrupted;
    if (src->device_bytes > dst->device_bytes) dst->device_bytes = src->device_bytes;
    for (int k = 0; k < FT_NX_PHASES; k++)
        dst->phase_ms[k] += src->phase_ms[k];
    if (src->n_threads > dst->n_threads) dst->n_threads = src->n_threads;
    if (!dst->device[0]) ft_strlcpy(dst->device, src->device, sizeof dst->device);
    if (!dst->fallback_text[0])
        ft_strlcpy(dst->fallback_text, src->fallback_text, sizeof dst->fallback_text);
    band_merge(&dst->fresh_err, &src->fresh_err);
    band_merge(&dst->harmless_band, &src->harmless_band);
    band_merge(&dst->quant_band, &src->quant_band);
    for (uint32_t p = 0; p < dst->n_policies; p++) {
        ft_numerics_policy *a = &dst->pol[p];
        const ft_numerics_policy *b = &src->pol[p];
        if (!a->raised && b->raised) ft_strlcpy(a->raise_text, b->raise_text, sizeof a->raise_text);
        a->calls += b->calls;
        a->same += b->same;
        a->harmless += b->harmless;
        a->quant += b->quant;
        a->raised += b->raised;
        a->raised_stale += b->raised_stale;
        band_merge(&a->err, &b->err);
        band_merge(&a->div, &b->div);
        if (b->div_max_abs > a->div_max_abs) a->div_max_abs = b->div_max_abs;
        a->nonfinite += b->nonfinite;
    }
    return FT_OK;
}
