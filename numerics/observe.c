/*
 * observe.c - numerical replay as an observer of the replay driver (ft_numerics_obs), and the
 * whole-trace conveniences around it (ft_numerics_replay_trace(s)): the dry pass that estimates
 * the work, the estimate line and its refusal, and the real pass.
 */
#define _POSIX_C_SOURCE 200809L
#include "numerics_int.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

/* ---- the observer of the replay driver ----------------------------------------------------- */

typedef struct estimate {
    uint64_t calls, runs;
    double flops, elems; /* nx_work of every sampled call */
    uint64_t max_bytes;  /* the largest call's memory (device, or host per thread) */
    double lo_s, hi_s;   /* the range check_estimate gave */
    /* the call with the most work, kept to time on this machine (the calibration) */
    int have_rep;
    double rep_flops;
    uint32_t rep_np;
    mlp_desc rep_d;
    job rep; /* its splits owned; raise texts replaced by a placeholder */
} estimate;

static void estimate_free(estimate *e)
{
    if (e->have_rep) nx_job_free(&e->rep);
    e->have_rep = 0;
}

/* Keep j as the representative call (its model's texts do not outlive the trace). */
static int keep_rep(estimate *e, const ft_numerics *nx, uint32_t np, const job *j, double flops)
{
    static const char raises[] = "raises";
    int64_t *splits = ft_malloc(nx->mlp[j->fuser].groups * sizeof *splits);
    if (!splits) return FT_ENOMEM;
    memcpy(splits, j->splits, nx->mlp[j->fuser].groups * sizeof *splits);
    estimate_free(e);
    e->rep = *j;
    e->rep.splits = splits;
    e->rep.fresh_raise = j->fresh_raise ? raises : NULL;
    e->rep.ctl_raise = j->ctl_raise ? raises : NULL;
    for (uint32_t p = 0; p < np; p++)
        e->rep.raise[p] = j->raise[p] ? raises : NULL;
    e->rep_d = nx->mlp[j->fuser];
    e->rep_np = np;
    e->rep_flops = flops;
    e->have_rep = 1;
    return FT_OK;
}

/* Add a planned call's work to the estimate (dry run) and drop the job. */
static int estimate_job(ft_numerics *nx, uint32_t np, job *j, estimate *e, ft_err *err)
{
    problem P;
    runout outs[FT_NUMERICS_MAX_POLICIES + 2];
    uint32_t which[FT_NUMERICS_MAX_POLICIES], ctl_i;
    memset(outs, 0, sizeof outs);
    int rc = nx_problem_shape(nx, &nx->mlp[j->fuser], j, &P, err);
    if (!rc) {
        uint32_t n_outs = nx_list_outs(j, np, outs, which, &ctl_i);
        uint32_t runs = n_outs - (j->fresh_raise != NULL);
        double fl = 0, el = 0;
        uint64_t b = 0;
        nx_work(&P.np, runs, &fl, &el);
        ft_nx_bytes(&P.np, &b);
        e->calls++;
        e->runs += runs;
        e->flops += fl;
        e->elems += el;
        if (b > e->max_bytes) e->max_bytes = b;
        if ((!e->have_rep || fl > e->rep_flops) && keep_rep(e, nx, np, j, fl))
            rc = ft_err_set(err, FT_ENOMEM, "numerics: out of memory");
    }
    nx_problem_free(&P);
    nx_job_free(j);
    return rc;
}
/*
 * The driver hands obs_batch every batch's view. Per call of a grouped-MLP fuser the observer takes
 * each policy's choice from the view's columns (plan id of the engine's model, its quantizer
 * state, valid for the batch), plans the call, and queues it if sampled; a full queue is executed
 * on the thread pool while the engine waits. One ft_numerics lives per trace (obs_begin to
 * obs_end); its results are folded into the observer's total at the end.
 */

struct ft_numerics_obs {
    ft_numerics_opts o;
    ft_numerics *nx; /* the current trace's */
    uint32_t np;
    uint32_t n_threads;
    ft_numerics_choice ch[FT_NUMERICS_MAX_POLICIES];
    const char *names[FT_NUMERICS_MAX_POLICIES];
    job *jobs; /* [cap] queued calls */
    uint32_t n_jobs, cap;
    uint32_t n_traces;          /* traces folded into total */
    ft_numerics_result *traces; /* [n_traces] each one's own (cap_traces allocated) */
    uint32_t cap_traces;
    /* opts.parts: the current trace's part, its sampled calls so far, and each trace's outcomes
     * ([n_traces], as traces) */
    ft_numerics_part part;
    uint64_t n_sampled;
    struct oc_list {
        ft_numerics_outcome *v;
        uint64_t n;
    } * oc;
    ft_numerics_result total;
    ft_replay_observer obs;
    int dry;          /* estimate only: plan the calls, count their work, run nothing */
    estimate est;     /* dry: the work counted; else the estimate the run was started with */
    int stopped;      /* opts.stop was seen */
    uint64_t t_start; /* for the progress line */
};

static int obs_begin(void *ctx, const ft_replay_input *in, const ft_replay *eng, ft_err *err)
{
    ft_numerics_obs *d = ctx;
    const uint32_t *idx;
    d->part = (ft_numerics_part){0, 0, 0};
    d->n_sampled = 0;
    if (d->o.parts && in->index < d->o.n_parts) {
        d->part = d->o.parts[in->index];
        if (d->part.mod && (d->part.lo >= d->part.hi || d->part.hi > d->part.mod))
            return ft_err_set(err, FT_EINVAL, "numerics: part [%u, %u) of %u", d->part.lo,
                              d->part.hi, d->part.mod);
    }
    d->np = ft_replay_policies(eng, &idx);
    if (d->np > FT_NUMERICS_MAX_POLICIES)
        return ft_err_set(err, FT_ERANGE, "numerics: too many policies (%u)", d->np);
    for (uint32_t p = 0; p < d->np; p++)
        d->names[p] = ft_policy_name(idx[p]);
    ft_numerics_opts no = d->o;
    if (d->dry) /* plans only: no device, no timing */
        no.backend = FT_NUMERICS_CPU, no.profile = 0, no.gpu_time = no.time_only = 0;
    int rc = ft_numerics_new(ft_replay_model(eng), d->names, d->np, &no, &d->nx, err);
    if (!rc) {
        d->nx->planned = d->est.calls;
        d->nx->t_start = d->t_start;
        d->nx->res.calls_planned = d->dry ? 0 : d->est.calls;
    }
    return rc;
}

/* Call j of the view: plan it, and queue it (or count its work) if sampled. */
static int obs_one(ft_numerics_obs *d, const ft_replay_view *v, uint32_t j, ft_err *err)
{
    const uint32_t s0 = v->splits_off[j], n_splits = v->splits_off[j + 1] - s0;
    if (!n_splits) return FT_OK; /* a call without split sizes: nothing to run */
    for (uint32_t p = 0; p < d->np; p++) {
        d->ch[p].plan = v->pol[p].plan[j];
        d->ch[p].q = ft_replay_qstate(v->engine, v->pol[p].q[j]);
    }
    /* the split sizes were checked (each >= 0) and summed into n_tokens once, by the decoder */
    ft_numerics_call nc = {.fuser = v->fuser[j],
                           .recipe = v->recipe[j],
                           .f = v->f[j],
                           .seq = v->seq[j],
                           .splits = v->splits + s0,
                           .n_splits = n_splits,
                           .n_tokens = v->n_tokens[j],
                           .fresh_plan = v->fresh[j],
                           .fresh_q = ft_replay_qstate(v->engine, v->fresh_q[j]),
                           .chosen = d->ch,
                           .step = v->step[j],
                           .uncounted = (uint8_t)(v->match && !v->match[j])};
    int rc = nx_plan_call(d->nx, &nc, &d->jobs[d->n_jobs], err);
    if (rc == 1) { /* sampled: this process's part of the trace runs it, or nobody here */
        const uint64_t k = d->n_sampled++;
        const ft_numerics_part *pt = &d->part;
        d->jobs[d->n_jobs].index = k;
        if (pt->mod && (k % pt->mod < pt->lo || k % pt->mod >= pt->hi)) {
            nx_job_free(&d->jobs[d->n_jobs]);
            return FT_OK;
        }
    }
    if (rc == 1 && d->dry) {
        rc = estimate_job(d->nx, d->np, &d->jobs[d->n_jobs], &d->est, err);
    } else if (rc == 1 && ++d->n_jobs == d->cap) {
        rc = nx_run_jobs(d->nx, d->jobs, d->n_jobs, d->n_threads, err);
        d->n_jobs = 0;
        if (!rc && d->nx->res.interrupted) {
            d->stopped = 1;
            return ft_err_set(err, FT_ESTATE, "numerics: stopped");
        }
    }
    return rc < 0 ? rc : FT_OK;
}

static int obs_batch(void *ctx, const ft_replay_view *v, ft_err *err)
{
    ft_numerics_obs *d = ctx;
    if (v->n_pol != d->np || !v->splits_off)
        return ft_err_set(err, FT_ESTATE, "numerics: the replay's views carry no split sizes");
    for (uint32_t j = 0; j < v->n; j++) {
        if (d->o.stop && *d->o.stop) {
            d->stopped = 1;
            return ft_err_set(err, FT_ESTATE, "numerics: stopped"); /* ends the replay */
        }
        if (!ft_numerics_wants(d->nx, v->fuser[j])) continue;
        int rc = obs_one(d, v, j, err);
        if (rc) return rc;
    }
    return FT_OK;
}

static int obs_end(void *ctx, const ft_replay *eng, int rc, ft_err *err)
{
    (void)eng;
    ft_numerics_obs *d = ctx;
    if (d->stopped) { /* Ctrl-C: the calls that ran are the result; queued ones are dropped */
        rc = FT_OK;
        ft_err_clear(err);
        for (uint32_t i = 0; i < d->n_jobs; i++)
            nx_job_free(&d->jobs[i]);
        d->n_jobs = 0;
        if (d->nx) d->nx->res.interrupted = 1;
    }
    if (!rc) rc = nx_run_jobs(d->nx, d->jobs, d->n_jobs, d->n_threads, err);
    for (uint32_t i = rc ? 0 : d->n_jobs; i < d->n_jobs; i++)
        nx_job_free(&d->jobs[i]);
    d->n_jobs = 0;
    if (d->o.info && d->o.progress && !d->dry && !rc) fputc('\n', d->o.info);
    if (!rc) {
        ft_numerics_result *nr = ft_malloc(sizeof *nr);
        if (!nr) {
            rc = ft_err_set(err, FT_ENOMEM, "numerics: out of memory");
        } else {
            ft_numerics_get(d->nx, nr);
            if (d->n_traces == d->cap_traces) {
                const uint32_t cap = d->cap_traces ? 2 * d->cap_traces : 4;
                ft_numerics_result *t = ft_realloc(d->traces, cap * sizeof *t);
                if (t) d->traces = t;
                struct oc_list *l = t ? ft_realloc(d->oc, cap * sizeof *l) : NULL;
                if (l) d->oc = l, d->cap_traces = cap;
            }
            if (d->n_traces == d->cap_traces) {
                rc = ft_err_set(err, FT_ENOMEM, "numerics: out of memory");
            } else {
                /* the outcomes move from the trace's numerics to the observer */
                d->oc[d->n_traces] = (struct oc_list){d->nx->oc, d->nx->n_oc};
                d->nx->oc = NULL;
                d->nx->n_oc = d->nx->cap_oc = 0;
                d->traces[d->n_traces] = *nr;
                if (!d->n_traces++)
                    d->total = *nr;
                else
                    rc = ft_numerics_result_merge(&d->total, nr, err);
            }
            ft_free(nr);
        }
    }
    ft_numerics_free(d->nx);
    d->nx = NULL;
    return rc;
}

int ft_numerics_obs_new(const ft_numerics_opts *opts, int estimate_only, ft_numerics_obs **out,
                        ft_err *err)
{
    *out = NULL;
    ft_numerics_obs *d = ft_calloc(1, sizeof *d);
    if (!d) return ft_err_set(err, FT_ENOMEM, "numerics: out of memory");
    if (opts) d->o = *opts;
    d->n_threads = d->o.n_threads ? d->o.n_threads : nx_online_cores();
    d->cap = d->n_threads * 4 > 16 ? d->n_threads * 4 : 16;
    if (d->o.backend == FT_NUMERICS_CUDA && !estimate_only) {
        /* a thread per device, and enough calls queued that each has several between the waits
         * for the slowest */
        d->n_threads = nx_devices_used(&d->o);
        d->cap = d->n_threads * 8 > 16 ? d->n_threads * 8 : 16;
    }
    d->jobs = ft_calloc(d->cap, sizeof *d->jobs);
    if (!d->jobs) {
        ft_free(d);
        return ft_err_set(err, FT_ENOMEM, "numerics: out of memory");
    }
    d->total.backend = d->o.backend;
    d->dry = estimate_only != 0;
    d->t_start = ft_now_ns();
    d->obs = (ft_replay_observer){.ctx = d,
                                  .needs = FT_VIEW_DECISIONS | FT_VIEW_SPLITS,
                                  .begin_fn = obs_begin,
                                  .batch_fn = obs_batch,
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

uint32_t ft_numerics_obs_traces(const ft_numerics_obs *d, const ft_numerics_result **out)
{
    *out = d->traces;
    return d->n_traces;
}

uint64_t ft_numerics_obs_outcomes(const ft_numerics_obs *d, uint32_t t,
                                  const ft_numerics_outcome **out)
{
    *out = t < d->n_traces ? d->oc[t].v : NULL;
    return t < d->n_traces ? d->oc[t].n : 0;
}

void ft_numerics_obs_free(ft_numerics_obs *d)
{
    if (!d) return;
    for (uint32_t t = 0; t < d->n_traces; t++)
        ft_free(d->oc[t].v);
    ft_free(d->oc);
    ft_free(d->traces);
    estimate_free(&d->est);
    ft_numerics_free(d->nx);
    ft_free(d->jobs);
    ft_free(d);
}

/* ---- whole traces: the driver with this observer ----------------------------------------------
 */
/* What the estimate's work costs: seconds per FLOP and per element (nx_work), fixed seconds, and
 * the factors by which the wall time may fall short of or exceed it. */
typedef struct rates {
    double per_flop, per_elem, fixed;
    double lo, hi;
    char how[200]; /* where the rates come from, for the estimate line */
} rates;

/* The CPU back end: the call with the most work timed on this machine now, on one thread, at two
 * sizes (itself, or the shrink that brings it under 10^9 FLOPs, about 0.1 to 0.5 s; and twice
 * that shrink), fitted as seconds = a FLOPs + b elements; calls run on thr threads at once, each
 * at up to cores/thr BLAS threads. */
static int cpu_rates(const estimate *e, const ft_numerics_opts *no, uint32_t thr, rates *r,
                     ft_err *err)
{
    uint32_t k = no->shrink ? no->shrink : 1;
    for (double f = e->rep_flops; f > 1e9 && k < (1u << 20); f /= 8)
        k *= 2;
    double t1, f1, e1, t2, f2, e2;
    int rc = nx_time_call(no, &e->rep_d, &e->rep, e->rep_np, k, 2, &t1, &f1, &e1, err);
    if (!rc) rc = nx_time_call(no, &e->rep_d, &e->rep, e->rep_np, 2 * k, 3, &t2, &f2, &e2, err);
    if (rc) return rc;
    const double det = f1 * e2 - f2 * e1;
    double a = det != 0 ? (t1 * e2 - t2 * e1) / det : -1,
           b = det != 0 ? (f1 * t2 - f2 * t1) / det : -1;
    if (!(a >= 0) || !(b >= 0)) { /* the two sizes do not tell the parts apart: the larger one */
        a = t1 / (f1 > 0 ? f1 : 1);
        b = 0;
    }
    const uint32_t cores = nx_online_cores(), per = cores / (thr ? thr : 1);
    *r = (rates){.per_flop = a / thr, .per_elem = b / thr, .fixed = 0};
    /* threads share the memory bus (and, here, other work); BLAS threads speed the GEMMs of calls
     * that have cores to spare */
    r->lo = 0.8 / (per > 1 ? (double)per : 1.0);
    r->hi = thr > 1 ? 1.25 / 0.6 : 1.25;
    snprintf(r->how, sizeof r->how,
             "timed here now: %.2g GFLOP/s and %.2g ns per element on one core; %u thread%s",
             a > 0 ? 1e-9 / a : 0.0, b * 1e9, thr, thr == 1 ? "" : "s");
    return FT_OK;
}

/* The CUDA back end: the rates of bench/RESULTS.md's H200 runs (issue 10, five model sizes):
 * seconds = FLOPs / 271 TFLOP/s + 1.04e-11 s per element, within 0.86-1.15x of the five, plus
 * about a second to start the device; n_dev devices share the work. Not timed on the device the
 * estimate runs on. */
static void cuda_rates(rates *r, uint32_t n_dev)
{
    const double n = n_dev ? (double)n_dev : 1.0;
    *r = (rates){
        .per_flop = 1.0 / 271e12 / n, .per_elem = 1.04e-11 / n, .fixed = 1.0, .lo = 0.6, .hi = 1.6};
    snprintf(r->how, sizeof r->how,
             "at the rates bench/RESULTS.md records for an H200, not timed on this device%s",
             n_dev > 1 ? "; shared by the devices" : "");
}

/* The estimate of the work counted in e: its memory against the machine's, its seconds (timed
 * here on the CPU back end, the recorded rates on the CUDA one) as a range. */
static int measure_estimate(estimate *e, const ft_numerics_opts *no, ft_numerics_estimate *out,
                            ft_err *err)
{
    const int cuda = no->backend == FT_NUMERICS_CUDA;
    uint64_t cap = 0;
    if (cuda) { /* the first device's (the devices of one node are of one model) */
        ft_err derr = {0};
        if (!no->n_devices || !ft_cuda_set_device(no->devices[0], &derr))
            ft_cuda_mem_info(NULL, &cap, &derr);
    } else {
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        cap = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
    }
    uint32_t thr = cuda ? 1 : (no->n_threads ? no->n_threads : nx_online_cores());
    if (thr > e->calls && e->calls) thr = (uint32_t)e->calls;
    if (!thr) thr = 1;
    const uint64_t mem = e->max_bytes > UINT64_MAX / thr ? UINT64_MAX : e->max_bytes * thr;
    const int over_mem = cap && mem > cap / 10 * 9;
    rates rt = {.lo = 1, .hi = 1};
    int rc = FT_OK;
    const uint32_t n_dev = nx_devices_used(no);
    if (cuda)
        cuda_rates(&rt, n_dev);
    else if (e->have_rep && !over_mem && (rc = cpu_rates(e, no, thr, &rt, err)))
        return rc; /* what does not fit is not timed either: the calibration runs a call */
    const double secs = e->calls ? rt.per_flop * e->flops + rt.per_elem * e->elems + rt.fixed : 0;
    *out = (ft_numerics_estimate){.calls = e->calls,
                                  .runs = e->runs,
                                  .flops = e->flops,
                                  .mem = mem,
                                  .cap = cap,
                                  .threads = thr,
                                  .devices = cuda ? n_dev : 0,
                                  .timed = cuda || !over_mem || !e->have_rep,
                                  .lo_s = secs * rt.lo,
                                  .hi_s = secs * rt.hi};
    ft_strlcpy(out->how,
               rt.how[0]    ? rt.how
               : out->timed ? "no call to run"
                            : "no call timed",
               sizeof out->how);
    e->lo_s = out->lo_s;
    e->hi_s = out->hi_s;
    return FT_OK;
}

int ft_numerics_estimate_judge(const ft_numerics_estimate *e, const ft_numerics_opts *no,
                               ft_err *err)
{
    const int cuda = no->backend == FT_NUMERICS_CUDA;
    const double lo = e->lo_s, hi = e->hi_s, mid = sqrt(lo * hi);
    const uint64_t mem = e->mem, cap = e->cap;
    const uint32_t thr = e->threads;
    const int timed = e->timed;
    char dev_text[64] = "";
    if (cuda && e->devices > 1) snprintf(dev_text, sizeof dev_text, ", %u devices", e->devices);
    if (e->processes > 1)
        snprintf(dev_text + strlen(dev_text), sizeof dev_text - strlen(dev_text), ", %u processes",
                 e->processes);
    char when[96] = "not timed: the largest call does not fit";
    if (timed) snprintf(when, sizeof when, "estimated %.0f to %.0f s", floor(lo), ceil(hi));
    if (no->info)
        fprintf(no->info,
                "numerics (%s%s): %llu sampled calls, %llu runs, about %.3g TFLOP and %.2f GB of "
                "%s memory at most; %s (%s)\n",
                cuda ? "cuda" : "cpu", dev_text, (unsigned long long)e->calls,
                (unsigned long long)e->runs, e->flops * 1e-12, (double)mem * 1e-9,
                cuda ? "device" : "host", when, e->how);
    const int over_mem = cap && mem > cap / 10 * 9;
    /* not "mid > limit": an estimate that is not a number is not under the limit either */
    const int over_time = no->max_seconds > 0 && !(mid <= no->max_seconds);
    if (!over_mem && !over_time) return FT_OK;
    /* the shrink that fits (work ~ K^3, memory ~ K^2), the sample that fits, the GPU */
    uint32_t k = no->shrink ? no->shrink : 1, k2 = k;
    double f = 1.0;
    while (((over_time && mid / (f * f * f) > no->max_seconds) ||
            (over_mem && (double)mem / (f * f) > (double)cap * 0.9)) &&
           k2 < (1u << 20)) {
        k2 *= 2;
        f = (double)k2 / k;
    }
    const double fit = over_time ? (double)e->calls * no->max_seconds / mid : 0;
    uint64_t n = fit >= 1 && fit < 1e18 ? (uint64_t)fit : 0;
    char alt[64] = "", sug[64] = "";
    if (!cuda) ft_strlcpy(alt, ", or --numerics cuda", sizeof alt);
    if (n >= 1) snprintf(sug, sizeof sug, ", --sample %llu", (unsigned long long)n);
    if (timed)
        snprintf(when, sizeof when, "about %.0f to %.0f s", floor(lo), ceil(hi));
    else
        ft_strlcpy(when, "not timed", sizeof when);
    return ft_err_set(err, FT_ERANGE,
                      "numerics: %s (%.2f GB of %s memory for %u call%s at once, %.2f GB there; "
                      "%s, limit %.0f s): use --shrink %u%s%s",
                      over_mem ? "too large for this machine" : "too slow", (double)mem * 1e-9,
                      cuda ? "device" : "host", thr, thr == 1 ? "" : "s", (double)cap * 1e-9, when,
                      no->max_seconds, k2, sug, alt);
}

int ft_numerics_obs_measure(ft_numerics_obs *est, ft_numerics_estimate *out, ft_err *err)
{
    return measure_estimate(&est->est, &est->o, out, err);
}

void ft_numerics_obs_set_estimate(ft_numerics_obs *est, const ft_numerics_estimate *e)
{
    est->est.calls = e->calls;
    est->est.lo_s = e->lo_s;
    est->est.hi_s = e->hi_s;
}

int ft_numerics_obs_check(ft_numerics_obs *est, ft_err *err)
{
    ft_numerics_estimate e;
    int rc = measure_estimate(&est->est, &est->o, &e, err);
    return rc ? rc : ft_numerics_estimate_judge(&e, &est->o, err);
}

int ft_numerics_obs_follow(const ft_numerics_obs *est, ft_numerics_obs **run, ft_err *err)
{
    int rc = ft_numerics_obs_new(&est->o, 0, run, err);
    if (!rc) {
        (*run)->est = est->est;
        (*run)->est.have_rep = 0; /* the estimating observer owns the representative call */
    }
    return rc;
}

int ft_numerics_obs_finish(ft_numerics_obs *o, int rc, ft_numerics_result *out, ft_err *err)
{
    if (rc && o->stopped) { /* Ctrl-C: what ran */
        rc = FT_OK;
        ft_err_clear(err);
        if (!o->n_traces) o->total.interrupted = 1;
    }
    if (rc) return rc;
    ft_numerics_obs_result(o, out);
    out->calls_planned = o->est.calls;
    out->est_lo_s = o->est.lo_s;
    out->est_hi_s = o->est.hi_s;
    if (o->stopped) out->interrupted = 1;
    return FT_OK;
}

/* The replay driver over t (or every trace of set) with o as its one observer. */
static int pass(ft_trace *t, const ft_replay_set *set, const ft_replay_opts *ropts,
                ft_numerics_obs *o, ft_replay_result *rr, ft_err *err)
{
    ft_replay_opts ro = *ropts;
    const ft_replay_observer *obs[1] = {ft_numerics_obs_observer(o)};
    ro.observers = obs;
    ro.n_observers = 1;
    return t ? ft_replay_trace(t, &ro, rr, err) : ft_replay_run(set, &ro, rr, err);
}

static int with_observer(ft_trace *t, const ft_replay_set *set, const ft_replay_opts *ropts,
                         const ft_numerics_opts *nopts, ft_replay_result *rr_out,
                         ft_numerics_result *out, ft_err *err)
{
    ft_numerics_obs *est = NULL, *run = NULL;
    ft_replay_result *rr = rr_out ? rr_out : ft_malloc(sizeof *rr);
    const ft_replay_opts ro = ropts ? *ropts : (ft_replay_opts){0};
    /* with an info stream or a time limit, an estimate pass first (plans only: the replay's
     * milliseconds); the run starts afresh, knowing the total */
    const int estimating = nopts && (nopts->info || nopts->max_seconds > 0);
    int rc = rr ? FT_OK : ft_err_set(err, FT_ENOMEM, "numerics: out of memory");
    if (!rc && estimating) {
        rc = ft_numerics_obs_new(nopts, 1, &est, err);
        if (!rc) rc = pass(t, set, &ro, est, rr, err);
        if (!rc) rc = ft_numerics_obs_check(est, err);
        if (!rc) rc = ft_numerics_obs_follow(est, &run, err);
    } else if (!rc) {
        rc = ft_numerics_obs_new(nopts, 0, &run, err);
    }
    if (!rc) {
        rc = ft_numerics_obs_finish(run, pass(t, set, &ro, run, rr, err), out, err);
        if (!rc && run->stopped) ft_replay_result_init(rr, ro.policies, ro.n_policies);
    }
    ft_numerics_obs_free(est);
    ft_numerics_obs_free(run);
    if (rr != rr_out) ft_free(rr);
    return rc;
}

int ft_numerics_replay_trace(ft_trace *t, const ft_replay_opts *ropts,
                             const ft_numerics_opts *nopts, ft_replay_result *rr_out,
                             ft_numerics_result *out, ft_err *err)
{
    return with_observer(t, NULL, ropts, nopts, rr_out, out, err);
}

int ft_numerics_replay_traces(const char *const *paths, uint32_t n_paths,
                              const ft_replay_opts *ropts, const ft_numerics_opts *nopts,
                              ft_replay_result *rr_out, ft_numerics_result *out, ft_err *err)
{
    memset(out, 0, sizeof *out);
    ft_replay_set *set = NULL;
    int rc = ft_replay_set_open(paths, n_paths, &set, err);
    if (!rc) rc = with_observer(NULL, set, ropts, nopts, rr_out, out, err);
    ft_replay_set_close(set);
    return rc;
}
