/*
 * numerics.c - numerical replay of sampled grouped-MLP calls on the kernels of kernels/ (CPU or
 * CUDA back end; ft_numerics.h).
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
 * from the engine's per-call hook and executes each full queue on a pool of threads.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_hmap.h"
#include "ft_numerics.h"
#include "ft_kernels.h"
#ifdef FT_HAVE_CUDA
#include "ft_kernels_cuda.h"
#endif

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

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

#define SIT_SLOTS 1024 /* distinct situations the sampler tells apart (more: treated as seen) */

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

/* What one policy's choice gave on one call. */
enum { OUT_RAISED = 0, OUT_NOFRESH, OUT_SAME, OUT_HARMLESS, OUT_QUANT };
typedef struct choice_out {
    uint8_t kind;       /* OUT_* (OUT_NOFRESH: ran, but the fresh plan did not) */
    double err, div;    /* vs float64, vs the fresh plan (relative L2, worst output) */
    double max_abs;     /* largest absolute difference from the fresh plan */
    uint64_t nonfinite; /* NaN/Inf output elements */
    char text[160];     /* OUT_RAISED: TE's message */
} choice_out;

/* One sampled call: planned (call order), executed (any thread), folded (call order). */
typedef struct job {
    uint32_t fuser;
    int64_t seq;
    int grad;        /* the call runs the backward */
    int64_t *splits; /* [groups] owned copy of the call's split sizes */
    runcfg fresh_cfg, cfg[FT_NUMERICS_MAX_POLICIES];
    const char *fresh_raise; /* TE's message if the fresh plan raises (model text), else NULL */
    const char *raise[FT_NUMERICS_MAX_POLICIES];
    /* results of execute */
    int rc; /* FT_OK or a failure (err) */
    ft_err err;
    int fresh_ok; /* the fresh plan ran */
    int has_ctl;  /* a fused/unfused control ran */
    double fresh_err, ctl_div;
    uint64_t runs, device_runs;
    char fallback[160]; /* CUDA: first configuration the device declined, and why */
    choice_out out[FT_NUMERICS_MAX_POLICIES];
} job;

struct ft_numerics {
    const ft_model *m;
    ft_numerics_opts o;
    uint32_t n_fusers;
    mlp_desc *mlp;        /* [n_fusers] */
    uint64_t n_diff_run;  /* sampled calls where a choice differed from fresh */
    uint64_t n_plain_run; /* sampled calls where none did */
    ft_hmap sit; /* situation hash -> sampled calls of that situation (at most SIT_SLOTS) */
    uint32_t n_sits;
    pthread_mutex_t gpu_lock; /* one thread at a time on the device */
    ft_numerics_result res;
};

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
    if (opts && opts->backend == FT_NUMERICS_CUDA) {
#ifdef FT_HAVE_CUDA
        if (ft_cuda_device_count() < 1)
            return ft_err_set(err, FT_ENODEV,
                              "numerics cuda: no CUDA device is visible (this build has CUDA, "
                              "but cudaGetDeviceCount finds no device); use --numerics cpu");
        int n_sm = 0, rc = ft_cuda_device_info(device, sizeof device, &n_sm, err);
        if (rc) return rc;
#else
        return ft_err_set(err, FT_ENODEV,
                          "numerics cuda: fusertrace was built without CUDA (nvcc not found "
                          "at build time); use --numerics cpu");
#endif
    }
    ft_numerics *nx = ft_calloc(1, sizeof *nx);
    if (!nx) return ft_err_set(err, FT_ENOMEM, "numerics: no memory");
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

void ft_numerics_free(ft_numerics *nx)
{
    if (!nx) return;
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

static int problem_init(const ft_numerics *nx, const mlp_desc *d, const job *c, problem *P,
                        ft_err *err)
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
    P->grad = c->grad;
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

#ifdef FT_HAVE_CUDA
/* m on the CUDA device through ft_cuda_mlp_forward/backward (device copies of every operand,
 * outputs copied back; padding rows zeroed as the reference leaves them). FT_EUNSUPPORTED or
 * FT_EINVAL: the CUDA back end does not run this configuration (nothing was written). */
static int run_device(ft_numerics *nx, const ft_mlp *m, const problem *P, runout *o, ft_err *err)
{
    enum { SPL, X, W1, B1, W2, B2, PR, DY, H, Z, Y, DX, DW1, DW2, NB };
    const size_t G = m->n_groups, t = (size_t)m->t, f4 = sizeof(float);
    const size_t k1 = (size_t)m->k1, n1 = (size_t)m->n1, k2 = (size_t)m->k2, n2 = (size_t)m->n2;
    const int g = P->grad;
    struct {
        int need;
        const void *src; /* uploaded from */
        float *dst;      /* downloaded to */
        size_t bytes;
        void *d;
    } b[NB] = {
        [SPL] = {1, m->splits, NULL, G * sizeof(int64_t), NULL},
        [X] = {1, m->x, NULL, t * k1 * f4, NULL},
        [W1] = {1, m->w1, NULL, G * n1 * k1 * f4, NULL},
        [B1] = {m->b1 != NULL, m->b1, NULL, G * n1 * f4, NULL},
        [W2] = {1, m->w2, NULL, G * n2 * k2 * f4, NULL},
        [B2] = {m->b2 != NULL, m->b2, NULL, G * n2 * f4, NULL},
        [PR] = {m->probs != NULL, m->probs, NULL, t * f4, NULL},
        [DY] = {g, P->dy, NULL, t * n2 * f4, NULL},
        [H] = {1, NULL, NULL, t * n1 * f4, NULL},
        [Z] = {1, NULL, NULL, t * k2 * f4, NULL},
        [Y] = {1, NULL, o->y, t * n2 * f4, NULL},
        [DX] = {g, NULL, o->dx, t * k1 * f4, NULL},
        [DW1] = {g, NULL, o->dw1, G * n1 * k1 * f4, NULL},
        [DW2] = {g, NULL, o->dw2, G * n2 * k2 * f4, NULL},
    };
    int rc = FT_OK;
    pthread_mutex_lock(&nx->gpu_lock);
    for (int i = 0; i < NB && !rc; i++) {
        if (!b[i].need) continue;
        rc = ft_cuda_malloc(&b[i].d, b[i].bytes, err);
        if (!rc && b[i].src) rc = ft_cuda_h2d(b[i].d, b[i].src, b[i].bytes, err);
        if (!rc && !b[i].src) rc = ft_cuda_memset(b[i].d, 0, b[i].bytes, err);
    }
    if (!rc) {
        ft_mlp dm = *m;
        dm.splits = b[SPL].d, dm.x = b[X].d, dm.w1 = b[W1].d, dm.b1 = b[B1].d;
        dm.w2 = b[W2].d, dm.b2 = b[B2].d, dm.probs = b[PR].d;
        ft_mlp_fwd f = {b[H].d, b[Z].d, b[Y].d};
        rc = ft_cuda_mlp_forward(&dm, &f, NULL, err);
        if (!rc && g) {
            ft_mlp_bwd bw = {b[DX].d, b[DW1].d, NULL, b[DW2].d, NULL, NULL};
            rc = ft_cuda_mlp_backward(&dm, &f, b[DY].d, &bw, NULL, err);
        }
        if (!rc) rc = ft_cuda_sync(err);
        for (int i = 0; i < NB && !rc; i++)
            if (b[i].need && b[i].dst) rc = ft_cuda_d2h(b[i].dst, b[i].d, b[i].bytes, err);
    }
    for (int i = 0; i < NB; i++)
        ft_cuda_free(b[i].d);
    pthread_mutex_unlock(&nx->gpu_lock);
    return rc;
}
#endif

/* Run configuration o->cfg on P: on the device when the CUDA back end is chosen and runs it,
 * else on the CPU reference. */
static int run_cfg(ft_numerics *nx, const problem *P, job *j, runout *o, ft_err *err)
{
    ft_mlp m = P->m;
    uint64_t seed = m.quant.seed;
    m.path = o->cfg.fused ? FT_MLP_FUSED : FT_MLP_UNFUSED;
    m.quant = o->cfg.q;
    m.quant.seed = seed;
    o->y = ft_malloc((size_t)(P->ny > 0 ? P->ny : 1) * sizeof *o->y);
    if (P->grad) {
        o->dx = ft_malloc((size_t)(P->ndx > 0 ? P->ndx : 1) * sizeof *o->dx);
        o->dw1 = ft_malloc((size_t)P->ndw1 * sizeof *o->dw1);
        o->dw2 = ft_malloc((size_t)P->ndw2 * sizeof *o->dw2);
    }
    if (!o->y || (P->grad && (!o->dx || !o->dw1 || !o->dw2)))
        return ft_err_set(err, FT_ENOMEM, "numerics: no memory");
    j->runs++;
#ifdef FT_HAVE_CUDA
    ft_err derr = {0};
    /* A configuration TE rejects (ft_mlp_check, which both back ends start with) raises the
     * same on either: the CPU path below gives that outcome, and it counts as the device's. */
    if (nx->o.backend == FT_NUMERICS_CUDA && ft_mlp_check(&m, P->grad, &derr) != FT_OK) {
        j->device_runs++;
    } else if (nx->o.backend == FT_NUMERICS_CUDA) {
        int rc = run_device(nx, &m, P, o, &derr);
        if (rc == FT_OK) {
            j->device_runs++;
            return FT_OK;
        }
        if (rc != FT_EUNSUPPORTED && rc != FT_EINVAL)
            return ft_err_set(err, rc, "numerics cuda: fuser %u seq %lld: %s", j->fuser,
                              (long long)j->seq, ft_err_msg(&derr));
        if (!j->fallback[0]) ft_strlcpy(j->fallback, ft_err_msg(&derr), sizeof j->fallback);
    }
#else
    (void)nx;
#endif
    return run_cpu(&m, P, o, err);
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

/* ---- one call: plan, execute, fold --------------------------------------------------------- */

static void job_free(job *j)
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
static int plan_call(ft_numerics *nx, const ft_numerics_call *c, job *j, ft_err *err)
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

/* Inputs, reference, every distinct configuration, comparisons: into j only (any thread). */
static void execute_call(ft_numerics *nx, job *j)
{
    const mlp_desc *d = &nx->mlp[j->fuser];
    const uint32_t np = nx->res.n_policies;
    problem P;
    runout outs[FT_NUMERICS_MAX_POLICIES + 2];
    uint32_t n_outs = 0, fresh_i = 0, ctl_i = UINT32_MAX, which[FT_NUMERICS_MAX_POLICIES];
    memset(outs, 0, sizeof outs);
    int rc = problem_init(nx, d, j, &P, &j->err);
    if (rc) goto done;

    /* fresh first, then every distinct choice, then the control (other topology, same quant) */
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
            if (cfg_equal(&outs[i].cfg, &other)) ctl_i = i;
        if (ctl_i == UINT32_MAX) {
            ctl_i = n_outs;
            outs[n_outs++].cfg = other;
        }
    }
    for (uint32_t i = 0; i < n_outs; i++) {
        if (i == fresh_i && j->fresh_raise) continue;
        if ((rc = run_cfg(nx, &P, j, &outs[i], &j->err))) goto done;
    }
    const runout *fr = &outs[fresh_i];
    j->fresh_ok = !j->fresh_raise && !fr->rc;
    if (j->fresh_ok) j->fresh_err = error_vs_ref(&P, fr);
    if (j->fresh_ok && ctl_i != UINT32_MAX && !outs[ctl_i].rc) {
        double ma = 0;
        j->has_ctl = 1;
        j->ctl_div = divergence(&P, &outs[ctl_i], fr, &ma);
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
        co->err = error_vs_ref(&P, o);
        co->nonfinite = nonfinite(&P, o);
        if (!j->fresh_ok) {
            co->kind = OUT_NOFRESH;
            continue;
        }
        co->div = divergence(&P, o, fr, &co->max_abs);
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
} pool;

static void *pool_worker(void *arg)
{
    pool *pl = arg;
    for (;;) {
        unsigned k = atomic_fetch_add(&pl->next, 1u);
        if (k >= pl->n) return NULL;
        execute_call(pl->nx, &pl->jobs[k]);
    }
}

static int run_jobs(ft_numerics *nx, job *jobs, uint32_t n, uint32_t n_threads, ft_err *err)
{
    if (!n) return FT_OK;
    uint64_t t0 = ft_now_ns();
    pool pl = {nx, jobs, n, 0};
    if (n_threads > n) n_threads = n;
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
    for (uint32_t i = 0; i < n; i++) {
        if (!rc) rc = fold_call(nx, &jobs[i], err);
        job_free(&jobs[i]);
    }
    nx->res.wall_ns += ft_now_ns() - t0;
    return rc;
}

/* ---- results ------------------------------------------------------------------------------ */

void ft_numerics_get(const ft_numerics *nx, ft_numerics_result *out)
{
    *out = nx->res;
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

/* ---- the observer of the replay driver ----------------------------------------------------- */
/*
 * The driver calls obs_call for every call and policy, in call order then policy order. The
 * observer keeps each policy's choice (plan id of the engine's model, a copy of its quantizer
 * state) until the last policy of the call, plans the call, and queues it if sampled; a full
 * queue is executed on the thread pool while the engine waits. One ft_numerics lives per trace
 * (obs_begin to obs_end); its results are folded into the observer's total at the end.
 */

struct ft_numerics_obs {
    ft_numerics_opts o;
    ft_numerics *nx; /* the current trace's */
    uint32_t np;
    uint32_t n_threads;
    ft_numerics_choice ch[FT_NUMERICS_MAX_POLICIES];
    ft_qstate q[FT_NUMERICS_MAX_POLICIES]; /* copies: the engine's are valid during the call only */
    const char *names[FT_NUMERICS_MAX_POLICIES];
    job *jobs; /* [cap] queued calls */
    uint32_t n_jobs, cap;
    uint32_t n_traces; /* traces folded into total */
    ft_numerics_result total;
    ft_replay_observer obs;
};

static uint32_t online_cores(void)
{
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    return nc > 0 ? (uint32_t)nc : 1;
}

static int obs_begin(void *ctx, const ft_replay *eng, ft_err *err)
{
    ft_numerics_obs *d = ctx;
    const uint32_t *idx;
    d->np = ft_replay_policies(eng, &idx);
    if (d->np > FT_NUMERICS_MAX_POLICIES)
        return ft_err_set(err, FT_ERANGE, "numerics: too many policies (%u)", d->np);
    for (uint32_t p = 0; p < d->np; p++)
        d->names[p] = ft_policy_name(idx[p]);
    return ft_numerics_new(ft_replay_model(eng), d->names, d->np, &d->o, &d->nx, err);
}

static int obs_call(void *ctx, const ft_replay_call *c, ft_err *err)
{
    ft_numerics_obs *d = ctx;
    if (!ft_numerics_wants(d->nx, c->fuser) || c->slot >= d->np) return FT_OK;
    d->q[c->slot] = *c->q;
    d->ch[c->slot].plan = c->plan;
    d->ch[c->slot].q = &d->q[c->slot];
    if (c->slot + 1 < d->np) return FT_OK;
    if (!c->n_splits) return FT_OK; /* a call without split sizes: nothing to run */
    ft_qstate fq = *c->fresh_q;
    ft_numerics_call nc = {.fuser = c->fuser,
                           .recipe = c->recipe,
                           .f = c->f,
                           .seq = c->seq,
                           .splits = c->splits,
                           .n_splits = c->n_splits,
                           .n_tokens = -1,
                           .fresh_plan = c->fresh,
                           .fresh_q = &fq,
                           .chosen = d->ch};
    int rc = plan_call(d->nx, &nc, &d->jobs[d->n_jobs], err);
    if (rc == 1 && ++d->n_jobs == d->cap) {
        rc = run_jobs(d->nx, d->jobs, d->n_jobs, d->n_threads, err);
        d->n_jobs = 0;
    }
    return rc < 0 ? rc : FT_OK;
}

static int obs_end(void *ctx, const ft_replay *eng, int rc, ft_err *err)
{
    (void)eng;
    ft_numerics_obs *d = ctx;
    if (!rc) rc = run_jobs(d->nx, d->jobs, d->n_jobs, d->n_threads, err);
    for (uint32_t i = rc ? 0 : d->n_jobs; i < d->n_jobs; i++)
        job_free(&d->jobs[i]);
    d->n_jobs = 0;
    if (!rc) {
        ft_numerics_result *nr = ft_malloc(sizeof *nr);
        if (!nr) {
            rc = ft_err_set(err, FT_ENOMEM, "numerics: out of memory");
        } else {
            ft_numerics_get(d->nx, nr);
            if (!d->n_traces++)
                d->total = *nr;
            else
                rc = ft_numerics_result_merge(&d->total, nr, err);
            ft_free(nr);
        }
    }
    ft_numerics_free(d->nx);
    d->nx = NULL;
    return rc;
}

int ft_numerics_obs_new(const ft_numerics_opts *opts, ft_numerics_obs **out, ft_err *err)
{
    *out = NULL;
    ft_numerics_obs *d = ft_calloc(1, sizeof *d);
    if (!d) return ft_err_set(err, FT_ENOMEM, "numerics: out of memory");
    if (opts) d->o = *opts;
    d->n_threads = d->o.n_threads ? d->o.n_threads : online_cores();
    d->cap = d->n_threads * 4 > 16 ? d->n_threads * 4 : 16;
    d->jobs = ft_calloc(d->cap, sizeof *d->jobs);
    if (!d->jobs) {
        ft_free(d);
        return ft_err_set(err, FT_ENOMEM, "numerics: out of memory");
    }
    d->total.backend = d->o.backend;
    d->obs = (ft_replay_observer){.ctx = d,
                                  .needs = FT_OBSERVE_SPLITS,
                                  .begin_fn = obs_begin,
                                  .call_fn = obs_call,
                                  .end_fn = obs_end};
    *out = d;
    return FT_OK;
}

const ft_replay_observer *ft_numerics_obs_observer(ft_numerics_obs *d)
{
    return &d->obs;
}

void ft_numerics_obs_result(const ft_numerics_obs *d, ft_numerics_result *out)
{
    *out = d->total;
}

void ft_numerics_obs_free(ft_numerics_obs *d)
{
    if (!d) return;
    ft_numerics_free(d->nx);
    ft_free(d->jobs);
    ft_free(d);
}

/* ---- whole traces: the driver with this observer ----------------------------------------------
 */
static int with_observer(ft_trace *t, const char *const *paths, uint32_t n_paths,
                         const ft_replay_opts *ropts, const ft_numerics_opts *nopts,
                         ft_replay_result *rr_out, ft_numerics_result *out, ft_err *err)
{
    ft_numerics_obs *o = NULL;
    ft_replay_result *rr = rr_out ? rr_out : ft_malloc(sizeof *rr);
    int rc = rr ? ft_numerics_obs_new(nopts, &o, err)
                : ft_err_set(err, FT_ENOMEM, "numerics: out of memory");
    if (!rc) {
        ft_replay_opts ro = ropts ? *ropts : (ft_replay_opts){0};
        ro.observer = ft_numerics_obs_observer(o);
        rc = t ? ft_replay_trace(t, &ro, rr, err) : ft_replay_traces(paths, n_paths, &ro, rr, err);
    }
    if (!rc) ft_numerics_obs_result(o, out);
    ft_numerics_obs_free(o);
    if (rr != rr_out) ft_free(rr);
    return rc;
}

int ft_numerics_replay_trace(ft_trace *t, const ft_replay_opts *ropts,
                             const ft_numerics_opts *nopts, ft_replay_result *rr_out,
                             ft_numerics_result *out, ft_err *err)
{
    return with_observer(t, NULL, 0, ropts, nopts, rr_out, out, err);
}

int ft_numerics_replay_traces(const char *const *paths, uint32_t n_paths,
                              const ft_replay_opts *ropts, const ft_numerics_opts *nopts,
                              ft_replay_result *rr_out, ft_numerics_result *out, ft_err *err)
{
    memset(out, 0, sizeof *out);
    return with_observer(NULL, paths, n_paths, ropts, nopts, rr_out, out, err);
}
