/*
 * exec.c - the execution half of numerical replay (ft_numerics.h): a planned call's runs on the
 * back end of the table (backend.c), what each policy's choice gave, and the folding of executed
 * calls into the results, in call order; the thread pool the trace driver executes queued calls
 * on (a device back end runs one call at a time); merging results of several traces.
 *
 * Every figure is independent of the thread count: calls are executed into their own job and
 * folded in call order.
 */
#define _POSIX_C_SOURCE 200809L
#include "numerics_int.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- one call on the back end ------------------------------------------------------------- */

/* The configuration as the kernels take it. */
static void cfg_mlp(const problem *P, const runcfg *c, ft_mlp_path *path, ft_mlp_quant *q)
{
    *path = c->fused ? FT_MLP_FUSED : FT_MLP_UNFUSED;
    *q = c->q;
    q->seed = P->np.xseed;
}

/* Device back ends: refuse a problem the device cannot hold (FT_ENOMEM, with what to change). */
static int fits_device(const ft_numerics *nx, const job *j, const problem *P, ft_err *err)
{
    uint64_t need = 0, free_b = 0, total_b = 0, timing = 0;
    if (!nx->o.time_only) ft_nx_bytes(&P->np, &need);
    if (j->n_time) ft_nx_time_bytes(&P->np, &timing);
    need += timing;
    ft_err derr = {0};
    if (nx->be->mem_info(&free_b, &total_b, &derr) != FT_OK || need <= total_b / 10 * 9)
        return FT_OK;
    return ft_err_set(err, FT_ENOMEM,
                      "numerics %s: fuser %u seq %lld needs about %.1f GB of device memory, the "
                      "device has %.1f GB; a larger --shrink helps",
                      nx->be->name, j->fuser, (long long)j->seq, (double)need * 1e-9,
                      (double)total_b * 1e-9);
}

/* The problem (inputs, reference) and every configuration of outs on the back end: outs[0] is the
 * fresh plan (the base of the comparisons; not run when skip0); a run TE raises on (raise) is
 * counted and not run. Figures into outs, work into j. */
static int run_outs(const nx_backend *be, ft_nx *ctx, job *j, const problem *P, runout *outs,
                    uint32_t n_outs, int skip0, ft_err *err)
{
    double rf = 0, uf = 0;
    ft_nx_flops(&P->np, &rf, &uf);
    int rc = be->problem(ctx, &P->np, err);
    if (rc) return rc;
    j->flops += rf;
    uint32_t slot[FT_NUMERICS_MAX_POLICIES + 2], n_slots = 0;
    for (uint32_t i = 0; i < n_outs; i++) {
        slot[i] = UINT32_MAX;
        if (i == 0 && skip0) continue;
        j->runs++;
        j->device_runs += be->device;
        runout *o = &outs[i];
        if (o->raise) {
            o->rc = FT_EUNSUPPORTED;
            ft_strlcpy(o->msg, o->raise, sizeof o->msg);
            continue;
        }
        ft_mlp_path path;
        ft_mlp_quant q;
        cfg_mlp(P, &o->cfg, &path, &q);
        if ((rc = be->run(ctx, path, &q, i == 0 ? FT_NX_BASE : 0, err))) return rc;
        slot[i] = n_slots++;
    }
    ft_nx_figs figs[FT_NUMERICS_MAX_POLICIES + 2];
    if ((rc = be->collect(ctx, figs, n_slots, err))) return rc;
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
    return FT_OK;
}

/* run_outs on the context of the call's device (one call at a time there), or on a context of
 * this call's own. */
static int exec_runs(ft_numerics *nx, job *j, const problem *P, runout *outs, uint32_t n_outs,
                     int skip0, ft_err *err)
{
    const nx_backend *be = nx->be;
    nx_slot *s = be->device ? &nx->slot[j->slot < nx->n_slots ? j->slot : 0] : NULL;
    ft_nx *ctx = s ? s->ctx : NULL;
    ft_err derr = {0};
    int rc = FT_OK;
    if (s) {
        pthread_mutex_lock(&s->lock);
        if (be->set_device && (rc = be->set_device(s->device, &derr))) goto fail;
        if ((rc = fits_device(nx, j, P, err))) goto done;
    } else {
        if ((rc = be->open(&ctx, &derr))) goto fail;
        if (nx->o.profile) be->profile(ctx, 1, NULL);
    }
    rc = nx->o.time_only ? FT_OK : run_outs(be, ctx, j, P, outs, n_outs, skip0, &derr);
    if (!rc) rc = nx_gt_exec(nx, ctx, j, P, nx->o.time_only, &derr);
    if (!rc) goto done;
fail:
    ft_err_set(err, rc, "numerics %s: fuser %u seq %lld: %s", be->name, j->fuser, (long long)j->seq,
               ft_err_msg(&derr));
done:
    if (s) {
        pthread_mutex_unlock(&s->lock);
    } else if (ctx) {
        if (nx->o.profile) {
            double ms[FT_NX_PHASES];
            be->profile(ctx, -1, ms);
            for (int k = 0; k < FT_NX_PHASES; k++)
                j->phase_ms[k] += ms[k];
        }
        be->close(ctx);
    }
    return rc;
}

/* The problem, every distinct configuration, what each choice gave: into j only (any thread). */
static void execute_call(ft_numerics *nx, job *j)
{
    const mlp_desc *d = &nx->mlp[j->fuser];
    const uint32_t np = nx->res.n_policies;
    problem P;
    runout outs[FT_NUMERICS_MAX_POLICIES + 2];
    uint32_t n_outs = 0, fresh_i = 0, ctl_i = UINT32_MAX, which[FT_NUMERICS_MAX_POLICIES];
    memset(outs, 0, sizeof outs);
    memset(&P, 0, sizeof P);
    int rc = FT_OK;
    if (nx->o.time_only && !j->n_time) goto done; /* nothing to time on this call */
    rc = nx_problem_shape(nx, d, j, &P, &j->err);
    if (rc) goto done;
    if (nx->o.time_only) { /* the inputs and the timing alone */
        P.np.inputs_only = 1;
        rc = exec_runs(nx, j, &P, outs, 0, 0, &j->err);
        goto done;
    }

    n_outs = nx_list_outs(j, np, outs, which, &ctl_i);
    const runcfg *fc = &j->fresh_cfg;
    const int skip0 = j->fresh_raise != NULL;
    rc = exec_runs(nx, j, &P, outs, n_outs, skip0, &j->err);
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
        if (!nx_quant_equal(&j->cfg[p], fc, j->grad))
            co->kind = OUT_QUANT;
        else
            co->kind = j->cfg[p].fused == fc->fused ? OUT_SAME : OUT_HARMLESS;
    }
done:
    j->rc = rc;
    j->executed = 1;
    nx_problem_free(&P);
}

/* ---- the estimate's calibration ----------------------------------------------------------- */
int nx_time_call(const ft_numerics_opts *o, const mlp_desc *d, const job *j, uint32_t np,
                 uint32_t shrink, int reps, double *secs, double *flops, double *elems, ft_err *err)
{
    ft_numerics tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.o = *o;
    tmp.o.shrink = shrink;
    tmp.be = nx_backend_of(FT_NUMERICS_CPU);
    problem P;
    int rc = nx_problem_shape(&tmp, d, j, &P, err);
    if (rc) return rc;
    runout outs[FT_NUMERICS_MAX_POLICIES + 2];
    uint32_t which[FT_NUMERICS_MAX_POLICIES], ctl_i;
    memset(outs, 0, sizeof outs);
    const uint32_t n_outs = nx_list_outs(j, np, outs, which, &ctl_i);
    const int skip0 = j->fresh_raise != NULL;
    nx_work(&P.np, n_outs - (uint32_t)skip0, flops, elems);
    *secs = 0;
    ft_cpu_blas_threads(1);
    for (int r = 0; r < reps && !rc; r++) {
        job scratch = *j;
        ft_nx *ctx = NULL;
        ft_err derr = {0};
        const uint64_t t0 = ft_now_ns();
        rc = tmp.be->open(&ctx, &derr);
        if (!rc) rc = run_outs(tmp.be, ctx, &scratch, &P, outs, n_outs, skip0, &derr);
        if (ctx) tmp.be->close(ctx);
        const double s = (double)(ft_now_ns() - t0) * 1e-9;
        if (!rc && (!r || s < *secs)) *secs = s;
        if (rc) ft_err_set(err, rc, "numerics: the estimate's calibration: %s", ft_err_msg(&derr));
    }
    nx_problem_free(&P);
    return rc;
}

/* ---- folding ------------------------------------------------------------------------------ */

static void band_add(ft_band *b, double v)
{
    if (!b->n || v < b->min) b->min = v;
    if (!b->n || v > b->max) b->max = v;
    b->n++;
    b->sum += v;
}

/* What folding j reads (zeroed first: the bytes may travel to another process). */
static void outcome_of(const job *j, uint32_t np, ft_numerics_outcome *o)
{
    memset(o, 0, sizeof *o);
    o->index = j->index;
    o->seq = j->seq;
    o->fuser = j->fuser;
    o->fresh_ok = (uint8_t)(j->fresh_ok != 0);
    o->has_ctl = (uint8_t)(j->has_ctl != 0);
    o->fresh_fmt = (int32_t)j->fresh_cfg.q.fmt;
    o->fresh_err = j->fresh_err;
    o->ctl_div = j->ctl_div;
    o->runs = j->runs;
    o->device_runs = j->device_runs;
    o->flops = j->flops;
    for (uint32_t p = 0; p < np; p++) {
        const choice_out *co = &j->out[p];
        ft_numerics_outcome_choice *x = &o->out[p];
        x->kind = co->kind;
        x->err = co->err;
        x->div = co->div;
        x->max_abs = co->max_abs;
        x->nonfinite = co->nonfinite;
        ft_strlcpy(x->text, co->text, sizeof x->text);
    }
}

/* Add one call's outcome into r (call order): its runs, bands and each policy's comparison. */
static void fold_outcome(ft_numerics_result *r, const ft_numerics_outcome *o)
{
    r->calls_run++;
    r->mlp_runs += o->runs;
    r->device_runs += o->device_runs;
    r->flops += o->flops;
    if (!o->fresh_ok) r->fresh_raised++;
    if (o->fresh_ok) band_add(&r->fresh_err, o->fresh_err);
    if (o->fresh_ok && o->fresh_fmt >= 0 && o->fresh_fmt < FT_QF_COUNT)
        band_add(&r->fresh_err_fmt[o->fresh_fmt], o->fresh_err);
    if (o->has_ctl) band_add(&r->harmless_band, o->ctl_div);
    for (uint32_t p = 0; p < r->n_policies && p < FT_NUMERICS_MAX_POLICIES; p++) {
        ft_numerics_policy *pol = &r->pol[p];
        const ft_numerics_outcome_choice *co = &o->out[p];
        pol->calls++;
        if (co->kind == OUT_RAISED) {
            if (!pol->raised) ft_strlcpy(pol->raise_text, co->text, sizeof pol->raise_text);
            pol->raised++;
            pol->raised_stale += o->fresh_ok;
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
}

/* Add an executed call into the results (call order); with opts.parts, its outcome kept. */
static int fold_call(ft_numerics *nx, const job *j, ft_err *err)
{
    if (j->rc) return ft_err_set(err, j->rc, "%s", ft_err_msg(&j->err));
    ft_numerics_result *r = &nx->res;
    if (nx->o.gpu_time) nx_gt_fold(nx, j);
    if (nx->o.time_only) { /* no runs, nothing compared */
        r->calls_run++;
        return FT_OK;
    }
    for (int k = 0; k < FT_NX_PHASES; k++)
        r->phase_ms[k] += j->phase_ms[k];
    ft_numerics_outcome one, *o = &one;
    if (nx->o.parts) {
        if (nx->n_oc == nx->cap_oc) {
            const uint64_t cap = nx->cap_oc ? 2 * nx->cap_oc : 16;
            ft_numerics_outcome *v =
                cap <= SIZE_MAX / sizeof *v ? ft_realloc(nx->oc, (size_t)cap * sizeof *v) : NULL;
            if (!v) return ft_err_set(err, FT_ENOMEM, "numerics: out of memory");
            nx->oc = v, nx->cap_oc = cap;
        }
        o = &nx->oc[nx->n_oc++];
    }
    outcome_of(j, r->n_policies, o);
    fold_outcome(r, o);
    return FT_OK;
}

static int by_index(const void *a, const void *b)
{
    const uint64_t x = ((const ft_numerics_outcome *)a)->index,
                   y = ((const ft_numerics_outcome *)b)->index;
    return x < y ? -1 : x > y;
}

int ft_numerics_result_join(const ft_numerics_result *parts, uint32_t n_parts,
                            ft_numerics_outcome *oc, uint64_t n_oc, ft_numerics_result *out,
                            ft_err *err)
{
    if (!n_parts) return ft_err_set(err, FT_EINVAL, "numerics: a trace of no parts");
    const ft_numerics_result *p0 = &parts[0];
    if (p0->n_policies > FT_NUMERICS_MAX_POLICIES)
        return ft_err_set(err, FT_EINVAL, "numerics: a part of %u policies", p0->n_policies);
    memset(out, 0, sizeof *out);
    out->backend = p0->backend;
    out->n_policies = p0->n_policies;
    out->calls_seen = p0->calls_seen;
    out->calls_planned = p0->calls_planned;
    out->time_only = p0->time_only;
    out->gt = p0->gt;
    for (uint32_t p = 0; p < p0->n_policies; p++)
        out->pol[p].name = p0->pol[p].name;
    for (uint32_t i = 0; i < n_parts; i++) {
        const ft_numerics_result *x = &parts[i];
        /* every part replays the whole trace and offers every call, unless a stop ended it */
        const int stopped = x->interrupted || p0->interrupted;
        if (x->n_policies != p0->n_policies || (x->calls_seen != p0->calls_seen && !stopped) ||
            x->backend != p0->backend)
            return ft_err_set(err, FT_EINVAL,
                              "numerics: the parts of a trace disagree (%llu and %llu calls "
                              "offered, %u and %u policies)",
                              (unsigned long long)p0->calls_seen, (unsigned long long)x->calls_seen,
                              p0->n_policies, x->n_policies);
        if (x->calls_seen > out->calls_seen) out->calls_seen = x->calls_seen;
        if (x->n_threads > out->n_threads) out->n_threads = x->n_threads;
        if (x->wall_ns > out->wall_ns) out->wall_ns = x->wall_ns; /* the parts ran at once */
        if (x->device_bytes > out->device_bytes) out->device_bytes = x->device_bytes;
        if (!out->device[0]) ft_strlcpy(out->device, x->device, sizeof out->device);
        out->interrupted |= x->interrupted;
        for (int k = 0; k < FT_NX_PHASES; k++)
            out->phase_ms[k] += x->phase_ms[k];
    }
    if (n_oc > 1) qsort(oc, (size_t)n_oc, sizeof *oc, by_index);
    for (uint64_t k = 0; k < n_oc; k++) {
        if (k && oc[k].index == oc[k - 1].index)
            return ft_err_set(err, FT_EINVAL, "numerics: sampled call %llu of a trace ran twice",
                              (unsigned long long)oc[k].index);
        fold_outcome(out, &oc[k]);
    }
    return FT_OK;
}

int ft_numerics_run(ft_numerics *nx, const ft_numerics_call *c, ft_err *err)
{
    job *j = ft_malloc(sizeof *j);
    if (!j) return ft_err_set(err, FT_ENOMEM, "numerics: no memory");
    int rc = nx_plan_call(nx, c, j, err);
    if (rc == 1) {
        uint64_t t0 = ft_now_ns();
        execute_call(nx, j);
        rc = fold_call(nx, j, err);
        nx_job_free(j);
        nx->res.wall_ns += ft_now_ns() - t0;
    }
    ft_free(j);
    return rc < 0 ? rc : FT_OK;
}

uint32_t nx_online_cores(void)
{
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    return nc > 0 ? (uint32_t)nc : 1;
}

/* The thread pool of nx_run_jobs: workers take the next job until none is left (or a stop); on
 * a device back end, each device's worker takes the jobs assigned to it, in call order. */
typedef struct pool {
    ft_numerics *nx;
    job *jobs;
    uint32_t n;
    atomic_uint next;
    atomic_uint done;
    pthread_t main;
} pool;

typedef struct worker {
    pool *pl;
    int slot; /* the device slot it drives; -1: any job (the CPU back end) */
} worker;

/* The progress line (opts.progress): calls done of the estimate's total (on every device), rate,
 * time left. */
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

/* The next job of worker w, or NULL when none is left. */
static job *next_job(worker *w, uint32_t *cursor)
{
    pool *pl = w->pl;
    if (w->slot < 0) {
        unsigned k = atomic_fetch_add(&pl->next, 1u);
        return k < pl->n ? &pl->jobs[k] : NULL;
    }
    while (*cursor < pl->n && pl->jobs[*cursor].slot != (uint32_t)w->slot)
        (*cursor)++;
    return *cursor < pl->n ? &pl->jobs[(*cursor)++] : NULL;
}

static void *pool_worker(void *arg)
{
    worker *w = arg;
    pool *pl = w->pl;
    uint32_t cursor = 0;
    for (;;) {
        if (pl->nx->o.stop && *pl->nx->o.stop) return NULL;
        job *j = next_job(w, &cursor);
        if (!j) return NULL;
        execute_call(pl->nx, j);
        unsigned d = atomic_fetch_add(&pl->done, 1u) + 1;
        if (pthread_equal(pthread_self(), pl->main))
            progress_line(pl->nx, pl->nx->res.calls_run + d);
    }
}

/* Device back ends: each job, in call order, to the device slot with the least work assigned so
 * far (ties to the lowest slot). The work is the estimate's (nx_work: FLOPs plus elements). */
static int assign_jobs(ft_numerics *nx, job *jobs, uint32_t n, ft_err *err)
{
    for (uint32_t i = 0; i < n; i++) {
        job *j = &jobs[i];
        uint32_t best = 0;
        for (uint32_t s = 1; s < nx->n_slots; s++)
            if (nx->slot[s].load < nx->slot[best].load) best = s;
        j->slot = best;
        nx->slot[best].jobs++;
        if (nx->n_slots < 2) continue;
        problem P;
        runout outs[FT_NUMERICS_MAX_POLICIES + 2];
        uint32_t which[FT_NUMERICS_MAX_POLICIES], ctl_i;
        memset(outs, 0, sizeof outs);
        int rc = nx_problem_shape(nx, &nx->mlp[j->fuser], j, &P, err);
        if (rc) return rc;
        const uint32_t n_outs = nx_list_outs(j, nx->res.n_policies, outs, which, &ctl_i);
        double fl = 0, el = 0;
        nx_work(&P.np, n_outs - (j->fresh_raise != NULL), &fl, &el);
        /* an element costs about what 40 FLOPs do on the device (the estimate's rates) */
        nx->slot[best].load += fl + 40.0 * el;
        nx_problem_free(&P);
    }
    return FT_OK;
}

int nx_run_jobs(ft_numerics *nx, job *jobs, uint32_t n, uint32_t n_threads, ft_err *err)
{
    if (!n) return FT_OK;
    uint64_t t0 = ft_now_ns();
    pool pl = {nx, jobs, n, 0, 0, pthread_self()};
    const int devices = nx->be->device && nx->n_slots > 0;
    int rc = FT_OK;
    if (devices) {
        n_threads = nx->n_slots;
        if ((rc = assign_jobs(nx, jobs, n, err))) goto fold;
    } else if (n_threads > n) {
        n_threads = n;
    }
    /* the cores are shared between the threads here and BLAS's own threads inside each call */
    if (nx->o.backend == FT_NUMERICS_CPU) {
        uint32_t per = nx_online_cores() / (n_threads ? n_threads : 1);
        ft_cpu_blas_threads(per > 1 ? (int)per : 1);
    }
    pthread_t th[FT_NUMERICS_MAX_DEVICES];
    worker w[FT_NUMERICS_MAX_DEVICES];
    uint32_t started = 0;
    if (n_threads > FT_ARRAY_LEN(th)) n_threads = FT_ARRAY_LEN(th);
    for (uint32_t i = 0; i < n_threads; i++)
        w[i] = (worker){&pl, devices ? (int)i : -1};
    /* workers 1.. on threads of their own; worker 0 on this thread (the progress line's) */
    for (; n_threads > 1 && started < n_threads - 1; started++)
        if (pthread_create(&th[started], NULL, pool_worker, &w[started + 1])) break;
    if (devices) /* a device whose thread did not start: its jobs run here, after device 0's */
        for (uint32_t i = 0; i < n; i++)
            if (jobs[i].slot > started) jobs[i].slot = 0;
    pool_worker(&w[0]);
    for (uint32_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (started + 1 > nx->res.n_threads) nx->res.n_threads = started + 1;
fold:;
    /* folded in call order up to the first call not executed (a stop) */
    uint32_t ran = 0;
    while (ran < n && jobs[ran].executed)
        ran++;
    for (uint32_t i = 0; i < n; i++) {
        if (!rc && i < ran) rc = fold_call(nx, &jobs[i], err);
        nx_job_free(&jobs[i]);
    }
    if (ran < n && !rc) nx->res.interrupted = 1;
    nx->res.wall_ns += ft_now_ns() - t0;
    progress_line(nx, nx->res.calls_run);
    return rc;
}

/* ---- results ------------------------------------------------------------------------------ */

void ft_numerics_get(const ft_numerics *nx, ft_numerics_result *out)
{
    *out = nx->res;
    out->time_only = nx->o.time_only;
    nx_gt_get(nx, &out->gt);
    /* devices: the phases added over them, the memory of the one that held the most */
    for (uint32_t i = 0; i < nx->n_slots; i++) {
        const nx_slot *s = &nx->slot[i];
        ft_err e = {0};
        if (nx->be->set_device && nx->be->set_device(s->device, &e)) continue;
        if (nx->o.profile) {
            double ms[FT_NX_PHASES];
            nx->be->profile(s->ctx, -1, ms);
            for (int k = 0; k < FT_NX_PHASES; k++)
                out->phase_ms[k] = (i ? out->phase_ms[k] : 0.0) + ms[k];
        }
        uint64_t held = 0, peak = 0;
        if (nx->be->memory(s->ctx, &held, &peak, &e) == FT_OK && held + peak > out->device_bytes)
            out->device_bytes = held + peak;
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
    dst->time_only |= src->time_only;
    nx_gt_merge(&dst->gt, &src->gt);
    if (src->device_bytes > dst->device_bytes) dst->device_bytes = src->device_bytes;
    for (int k = 0; k < FT_NX_PHASES; k++)
        dst->phase_ms[k] += src->phase_ms[k];
    if (src->n_threads > dst->n_threads) dst->n_threads = src->n_threads;
    if (!dst->device[0]) ft_strlcpy(dst->device, src->device, sizeof dst->device);
    if (!dst->fallback_text[0])
        ft_strlcpy(dst->fallback_text, src->fallback_text, sizeof dst->fallback_text);
    band_merge(&dst->fresh_err, &src->fresh_err);
    for (int k = 0; k < FT_QF_COUNT; k++)
        band_merge(&dst->fresh_err_fmt[k], &src->fresh_err_fmt[k]);
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
