/*
 * plan.c - the planning half of numerical replay (ft_numerics.h): the numerics of a model
 * (ft_numerics_new: which fusers hold a grouped MLP, which back end runs them), and for each
 * offered call, in call order, what every policy's choice and the fresh plan run (topology from
 * the plan, quantizers from tefuser's reading of the recipe and the quantizer state), which of
 * them TE raises on (tefuser), whether the call is sampled, and the shapes and seeds of its
 * problem. Limits: only the FC1 -> activation -> FC2 window is run (other ops of the fuser are
 * ignored); CustomRecipe quantizers run unquantized; FP8 delayed scaling runs with scale 1.
 */
#define _POSIX_C_SOURCE 200809L
#include "numerics_int.h"

#include <math.h>
#include <string.h>

/* ---- the numerics of a model -------------------------------------------------------------- */

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

/* A device back end's context on device `device` and the device's name. */
static int open_device(const nx_backend *be, int device, int profile, ft_nx **dev, char *name,
                       size_t cap, ft_err *err)
{
    ft_err derr = {0};
    int rc = be->open_on ? be->open_on(device, dev, &derr) : be->open(dev, &derr);
    if (rc == FT_ENODEV)
        return ft_err_set(err, FT_ENODEV, "numerics %s: %s; use --numerics cpu", be->name,
                          ft_err_msg(&derr));
    if (rc)
        return ft_err_set(err, rc, "numerics %s: device %d: %s", be->name, device,
                          ft_err_msg(&derr));
    int n_sm = 0;
    rc = be->set_device ? be->set_device(device, err) : FT_OK;
    if (!rc) rc = be->device_info(name, cap, &n_sm, err);
    if (rc) {
        be->close(*dev);
        *dev = NULL;
        return rc;
    }
    if (profile) be->profile(*dev, 1, NULL);
    return FT_OK;
}

int nx_devices_check(const nx_backend *be, const int *ids, uint32_t n, ft_err *err)
{
    const int seen = be->n_devices ? be->n_devices() : 0;
    if (n > FT_NUMERICS_MAX_DEVICES)
        return ft_err_set(err, FT_EINVAL, "numerics %s: %u devices named (at most %d)", be->name, n,
                          FT_NUMERICS_MAX_DEVICES);
    for (uint32_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= seen)
            return ft_err_set(err, FT_EINVAL,
                              "numerics %s: --devices names device %d, but this process sees %d "
                              "CUDA device%s%s (CUDA_VISIBLE_DEVICES renumbers them from 0)",
                              be->name, ids[i], seen, seen == 1 ? "" : "s",
                              seen > 1    ? ", 0 to the last"
                              : seen == 1 ? ", device 0"
                                          : "");
        for (uint32_t k = 0; k < i; k++)
            if (ids[k] == ids[i])
                return ft_err_set(err, FT_EINVAL, "numerics %s: --devices names device %d twice",
                                  be->name, ids[i]);
    }
    return FT_OK;
}

/* (here rather than in backend.c: the tests replace nx_backend_of at link time, which reaches
 * only calls from other files) */
uint32_t nx_devices_used(const ft_numerics_opts *o)
{
    const nx_backend *b = nx_backend_of(o->backend);
    if (!b || !b->device) return 1;
    if (o->n_devices) return o->n_devices;
    const int n = b->n_devices ? b->n_devices() : 0;
    return n < 1 ? 1 : n > FT_NUMERICS_MAX_DEVICES ? FT_NUMERICS_MAX_DEVICES : (uint32_t)n;
}

int ft_numerics_devices_check(ft_numerics_backend be, const int *ids, uint32_t n, ft_err *err)
{
    const nx_backend *b = nx_backend_of(be);
    if (!b) return ft_err_set(err, FT_EINVAL, "numerics: unknown back end %d", (int)be);
    return b->device && n ? nx_devices_check(b, ids, n, err) : FT_OK;
}

/* The devices of opts (every visible one when it names none), each with its context. */
static int open_slots(ft_numerics *nx, const ft_numerics_opts *o, char *name, size_t cap,
                      ft_err *err)
{
    const nx_backend *be = nx->be;
    int ids[FT_NUMERICS_MAX_DEVICES];
    uint32_t n = o->n_devices;
    int rc = FT_OK;
    if (n) {
        if ((rc = nx_devices_check(be, o->devices, n, err))) return rc;
        memcpy(ids, o->devices, n * sizeof *ids);
    } else {
        const int seen = be->n_devices ? be->n_devices() : 0;
        n = seen < 1                         ? 1
            : seen > FT_NUMERICS_MAX_DEVICES ? FT_NUMERICS_MAX_DEVICES
                                             : (uint32_t)seen;
        for (uint32_t i = 0; i < n; i++)
            ids[i] = (int)i;
    }
    for (uint32_t i = 0; i < n && !rc; i++) {
        nx_slot *s = &nx->slot[i];
        char other[64];
        s->device = ids[i];
        rc = open_device(be, ids[i], o->profile, &s->ctx, i ? other : name, i ? sizeof other : cap,
                         err);
        if (rc) break;
        pthread_mutex_init(&s->lock, NULL);
        nx->n_slots = i + 1;
    }
    return rc;
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
    const nx_backend *be = nx_backend_of(opts ? opts->backend : FT_NUMERICS_CPU);
    if (!be) return ft_err_set(err, FT_EINVAL, "numerics: unknown back end %d", (int)opts->backend);
    if (opts && (opts->gpu_time || opts->time_only)) {
        int rc = nx_gt_check_opts(be, opts, err);
        if (rc) return rc;
    }
    if (opts && opts->parts && opts->gpu_time)
        return ft_err_set(err, FT_EINVAL, "numerics: GPU time is not split into parts");
    char device[64] = "";
    ft_numerics *nx = ft_calloc(1, sizeof *nx);
    if (!nx) return ft_err_set(err, FT_ENOMEM, "numerics: no memory");
    nx->be = be;
    if (be->device) {
        int rc = open_slots(nx, opts, device, sizeof device, err);
        if (rc) {
            ft_numerics_free(nx);
            return rc;
        }
    }
    nx->m = m;
    if (opts) nx->o = *opts;
    if (nx->o.shrink < 1) nx->o.shrink = 1;
    if (!nx->o.time_warmup) nx->o.time_warmup = 2;
    if (!nx->o.time_rounds) nx->o.time_rounds = 5;
    nx->n_fusers = n_fusers;
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
    for (uint32_t i = 0; i < nx->n_slots; i++) {
        nx->be->close(nx->slot[i].ctx);
        pthread_mutex_destroy(&nx->slot[i].lock);
    }
    ft_hmap_free(&nx->sit);
    nx_gt_free(&nx->gt);
    ft_hmap_free(&nx->pol_sit);
    ft_free(nx->mlp);
    ft_free(nx->oc);
    ft_free(nx);
}

int ft_numerics_wants(const ft_numerics *nx, uint32_t fuser)
{
    return nx && fuser < nx->n_fusers && nx->mlp[fuser].ok;
}

/* ---- run configurations ------------------------------------------------------------------- */

/* The configuration a choice runs: the plan's topology, and the quantizers tefuser says the
 * recipe and the quantizer state mean, in the kernels' terms. */
static void make_cfg(const ft_numerics *nx, int32_t recipe, uint32_t plan, const ft_qstate *q,
                     runcfg *c)
{
    static const ft_qfmt fmts[] = {[FT_QK_NONE] = FT_QF_NONE,
                                   [FT_QK_FP8_DELAYED] = FT_QF_FP8_DELAYED,
                                   [FT_QK_FP8_CURRENT] = FT_QF_FP8_CURRENT,
                                   [FT_QK_FP8_BLOCK] = FT_QF_FP8_BLOCK,
                                   [FT_QK_MXFP8] = FT_QF_MXFP8,
                                   [FT_QK_NVFP4] = FT_QF_NVFP4};
    ft_quantizers z;
    ft_model_quantizers(nx->m, recipe, q, &z);
    memset(c, 0, sizeof *c);
    c->fused = ft_model_plan_fused_mlp(nx->m, plan) ? 1 : 0;
    c->q.fmt = fmts[z.kind];
    c->q.fp8_fwd = z.fwd_e5m2 ? FT_FP8_E5M2 : FT_FP8_E4M3;
    c->q.fp8_bwd = z.bwd_e5m2 ? FT_FP8_E5M2 : FT_FP8_E4M3;
    c->q.rht = z.rht;
    c->q.sr = z.sr;
    c->q.two_d = z.two_d;
    c->q.pow2_scales = z.pow2_scales;
}

int nx_cfg_equal(const runcfg *a, const runcfg *b)
{
    return a->fused == b->fused && a->q.fmt == b->q.fmt && a->q.fp8_fwd == b->q.fp8_fwd &&
           a->q.fp8_bwd == b->q.fp8_bwd && a->q.rht == b->q.rht && a->q.sr == b->q.sr &&
           a->q.two_d == b->q.two_d && a->q.pow2_scales == b->q.pow2_scales;
}

/* A forward-only call never sees the backward-only settings (RHT and SR act on wgrad/dgrad
 * operands; the grad element type). */
int nx_quant_equal(const runcfg *a, const runcfg *b, int grad)
{
    runcfg x = *a, y = *b;
    x.fused = y.fused;
    if (!grad) {
        x.q.rht = y.q.rht = x.q.sr = y.q.sr = 0;
        x.q.fp8_bwd = y.q.fp8_bwd;
    }
    return nx_cfg_equal(&x, &y);
}

/* ---- the problem of one call -------------------------------------------------------------- */

static int64_t round_up(int64_t v, int64_t m)
{
    return (v + m - 1) / m * m;
}

/* Split sizes divided by the shrink factor K, rounded up. */
static int64_t shrink_split(int64_t s, int64_t K)
{
    return (s + K - 1) / K;
}

/* The token rows a call's problem has: its shrunk splits' sum padded to 128. */
static int64_t problem_tokens(const ft_numerics *nx, const int64_t *splits, uint32_t n)
{
    int64_t used = 0;
    for (uint32_t g = 0; g < n; g++)
        used += shrink_split(splits[g], nx->o.shrink);
    return round_up(used, 128);
}

void nx_problem_free(problem *P)
{
    ft_free(P->splits);
    memset(P, 0, sizeof *P);
}

int nx_problem_shape(const ft_numerics *nx, const mlp_desc *d, const job *c, problem *P,
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
    for (uint32_t g = 0; g < G; g++)
        P->splits[g] = shrink_split(c->splits[g], K);
    uint64_t wseed = ft_hash_mix(nx->o.seed, (uint64_t)c->fuser);
    ft_nx_problem np = {.n_groups = G,
                        .splits = P->splits,
                        .t = problem_tokens(nx, c->splits, G),
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
                        .xseed = ft_hash_mix(wseed, (uint64_t)c->seq),
                        .w1_scale = 1.0f / sqrtf((float)k1),
                        .w2_scale = 1.0f / sqrtf((float)k2)};
    P->np = np;
    return FT_OK;
}

void nx_work(const ft_nx_problem *p, uint32_t runs, double *flops, double *elems)
{
    double rf = 0, uf = 0;
    ft_nx_flops(p, &rf, &uf);
    const double act = (double)p->t * (double)(p->k1 + p->n1 + p->k2 + p->n2);
    const double w = (double)p->n_groups * ((double)p->k1 * p->n1 + (double)p->k2 * p->n2);
    *flops = rf + uf * runs;
    *elems = (act + w) * (1.0 + runs) * (p->grad ? 3.0 : 1.0);
}

/* ---- planning a call ---------------------------------------------------------------------- */

void nx_job_free(job *j)
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

/* Whether policy p's choice differs from the fresh plan on the call: another configuration, or
 * one raises where the other runs (two that raise do the same: the call is not stale). */
static int choice_differs(const job *j, uint32_t p)
{
    return !nx_cfg_equal(&j->cfg[p], &j->fresh_cfg) ||
           (j->raise[p] != NULL) != (j->fresh_raise != NULL);
}

/* A stale situation of some policy that no sampled call had yet: 1, and with mark each such
 * situation of the call recorded as sampled. */
static int new_stale_situation(ft_numerics *nx, const job *j, uint32_t np, uint64_t base, int mark)
{
    int any = 0;
    for (uint32_t p = 0; p < np; p++) {
        if (!choice_differs(j, p)) continue;
        const uint64_t h =
            cfg_hash(ft_hash_mix(base, (uint64_t)p + 1), &j->cfg[p], j->raise[p] != NULL);
        if (ft_hmap_get(&nx->pol_sit, h) != UINT32_MAX) continue;
        if (!mark) {
            if (nx->pol_sit.n < SIT_SLOTS) return 1;
            continue;
        }
        any = 1;
        (void)ft_hmap_put(&nx->pol_sit, h, 1); /* a sampling aid: out of memory, taken again */
    }
    return any;
}

/* --sample N, in call order: a call is a "situation" (backward or not, what the fresh plan and
 * every choice run, which of them raise). The first call of every situation is taken, then more
 * of the same situation up to N/8 each, calls where no choice differs from the fresh plan at most
 * N/4 in all, N in all. So rare situations (a stale plan that raises) are not crowded out by
 * common ones. Beyond N, the first call of each policy's own stale situation (what that policy's
 * choice runs against the fresh plan) is taken too, so that every policy the replay finds stale
 * is measured. */
static int sample_call(ft_numerics *nx, const job *j, uint32_t np, int differs)
{
    const uint64_t n = nx->o.sample;
    const uint64_t base =
        cfg_hash(ft_hash_mix(0x5a17u, (uint64_t)j->grad), &j->fresh_cfg, j->fresh_raise != NULL);
    const int stale_new = differs && new_stale_situation(nx, j, np, base, 0);
    int take = nx->n_diff_run + nx->n_plain_run < n;
    uint64_t h = base;
    for (uint32_t p = 0; p < np; p++)
        h = cfg_hash(h, &j->cfg[p], j->raise[p] != NULL);
    uint32_t seen = ft_hmap_get(&nx->sit, h);
    if (take && seen == UINT32_MAX) {         /* first of its kind */
        if (nx->sit.n >= SIT_SLOTS) take = 0; /* too many kinds: an unseen one counts as seen */
        seen = 0;
    } else if (take) {
        const uint64_t per = n / 8 ? n / 8 : 1, plain_cap = n / 4 ? n / 4 : 1;
        if (seen >= per || (!differs && nx->n_plain_run >= plain_cap)) take = 0;
    }
    if (!take && !stale_new) return 0;
    if (seen == UINT32_MAX) seen = 0;
    /* the memos are sampling aids: out of memory, the call is not sampled */
    if (ft_hmap_put(&nx->sit, h, seen + 1)) return 0;
    nx->n_sits += !seen;
    if (differs) new_stale_situation(nx, j, np, base, 1);
    return 1;
}

/* Whether TE raises running the control (the fresh quantizers on the other topology) on the
 * call's problem: only the fused topology has run-time checks (tefuser). */
static const char *control_raises(const ft_numerics *nx, const ft_numerics_call *c, const job *j)
{
    const runcfg *fc = &j->fresh_cfg;
    if (j->fresh_raise || fc->fused || (fc->q.fmt != FT_QF_MXFP8 && fc->q.fmt != FT_QF_NVFP4))
        return NULL;
    ft_qstate none;
    ft_qstate_init(&none);
    return ft_model_fused_mlp_raises(nx->m, c->fuser, c->fresh_q ? c->fresh_q : &none,
                                     problem_tokens(nx, c->splits, c->n_splits), j->grad);
}

/* The elements of a call's problem at shrink K (activations and weights), in double: no size
 * a trace holds can wrap it. */
static double problem_elems(const mlp_desc *d, const ft_numerics_call *c, double K)
{
    double t = 0;
    for (uint32_t g = 0; g < c->n_splits; g++)
        t += ceil((double)c->splits[g] / K);
    t = ceil(t / 128) * 128;
    const double k1 = ceil((double)d->k1 / K), k2 = ceil((double)d->k2 / K),
                 n2 = ceil((double)d->n2 / K), n1 = ft_act_is_glu(d->act.kind) ? 2 * k2 : k2;
    return t * (k1 + n1 + k2 + n2) + (double)d->groups * (k1 * n1 + k2 * n2);
}

/* A call is refused (FT_ERANGE, naming it) where its sizes pass NX_MAX_SIZE or its problem at
 * the --shrink given passes NX_MAX_ELEMS, so no later product of its sizes can wrap (the
 * decoder's check that the splits sum to the token count is modulo 2^64) and nothing tries to
 * allocate what no machine has. */
static int check_size(const ft_numerics *nx, const mlp_desc *d, const ft_numerics_call *c,
                      ft_err *err)
{
    double tokens = 0;
    for (uint32_t g = 0; g < c->n_splits; g++)
        tokens += (double)c->splits[g];
    const double dims[] = {tokens, (double)d->k1, (double)d->k2, (double)d->n2};
    static const char *const what[] = {"token count", "FC1 in_features", "FC2 in_features",
                                       "FC2 out_features"};
    for (size_t i = 0; i < FT_ARRAY_LEN(dims); i++)
        if (dims[i] > (double)NX_MAX_SIZE)
            return ft_err_set(err, FT_ERANGE,
                              "numerics: call seq %lld of fuser %u: its %s (%.0f) is over 2^%d; "
                              "no machine runs it (leave --numerics off for this trace)",
                              (long long)c->seq, c->fuser, what[i], dims[i], NX_MAX_SIZE_LOG2);
    const double K = (double)nx->o.shrink;
    const double el = problem_elems(d, c, K);
    if (el <= (double)NX_MAX_ELEMS) return FT_OK;
    uint64_t k2 = nx->o.shrink;
    while (k2 < ((uint64_t)1 << 31) && problem_elems(d, c, (double)k2) > (double)NX_MAX_ELEMS)
        k2 *= 2;
    return ft_err_set(err, FT_ERANGE,
                      "numerics: call seq %lld of fuser %u: its problem at --shrink %u has %.3g "
                      "elements, over 2^%d; use --shrink %llu",
                      (long long)c->seq, c->fuser, nx->o.shrink, el, NX_MAX_ELEMS_LOG2,
                      (unsigned long long)k2);
}

int nx_plan_call(ft_numerics *nx, const ft_numerics_call *c, job *j, ft_err *err)
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
    int rc = check_size(nx, d, c, err);
    if (rc) return rc;
    nx->res.calls_seen++;

    int64_t n_tok = c->n_tokens;
    if (n_tok < 0) { /* check_size bounded the sum */
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
        differs |= choice_differs(j, p);
    }
    const int sampled = !nx->o.sample || sample_call(nx, j, np, differs);
    if (nx->o.gpu_time) nx_gt_offer(nx, c, j, sampled);
    if (!sampled) return 0;
    *(differs ? &nx->n_diff_run : &nx->n_plain_run) += 1;
    j->ctl_raise = control_raises(nx, c, j);
    j->splits = ft_malloc(d->groups * sizeof *j->splits);
    if (!j->splits) return ft_err_set(err, FT_ENOMEM, "numerics: no memory");
    memcpy(j->splits, c->splits, d->groups * sizeof *j->splits);
    return 1;
}

/* The runs of a call: the fresh plan first (outs[0], not run when it raises), then every
 * distinct choice that does not raise (which[p]: its run, UINT32_MAX if it raises), then the
 * control: the fresh quantization on the other topology (*ctl_i; UINT32_MAX: none), which is not
 * run where TE raises (it still counts as a run). */
uint32_t nx_list_outs(const job *j, uint32_t np, runout *outs, uint32_t *which, uint32_t *ctl_i)
{
    uint32_t n_outs = 0;
    *ctl_i = UINT32_MAX;
    outs[n_outs++].cfg = j->fresh_cfg;
    for (uint32_t p = 0; p < np; p++) {
        which[p] = UINT32_MAX;
        if (j->raise[p]) continue;
        for (uint32_t i = 0; i < n_outs; i++)
            if (nx_cfg_equal(&outs[i].cfg, &j->cfg[p])) which[p] = i;
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
            if (nx_cfg_equal(&outs[i].cfg, &other)) *ctl_i = i;
        if (*ctl_i == UINT32_MAX) {
            *ctl_i = n_outs;
            outs[n_outs].raise = j->ctl_raise;
            outs[n_outs++].cfg = other;
        }
    }
    return n_outs;
}
