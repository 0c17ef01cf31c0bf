/*
 * numerics_int.h - private types and functions of numerics/ (ft_numerics.h), shared by its files:
 * plan.c (what a sampled call runs, the sampling decision), backend.c (the table of back ends),
 * exec.c (executing planned calls on a back end, folding their figures), gputime.c (the
 * situations GPU time times and the per-policy sums over the calls) and observe.c (the observer
 * of the replay driver, whole traces). Not part of the module's contract.
 *
 * A call goes through three phases: plan (call order, reads the model: configurations, raises,
 * the sampling decision), execute (touches nothing shared but the device context: the back end
 * draws the inputs, runs the reference and every configuration, and compares; any thread) and
 * fold (call order, into the results).
 */
#ifndef FT_NUMERICS_INT_H
#define FT_NUMERICS_INT_H

#include "ft_hmap.h"
#include "ft_numerics.h"
#include "ft_kernels.h"

#include <pthread.h>

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

/* The largest call numerics runs (plan.c's check_size): a token count or hidden size up to
 * 2^NX_MAX_SIZE_LOG2, and a problem (activations and weights after --shrink) of up to
 * 2^NX_MAX_ELEMS_LOG2 elements (2 TB in bf16; the largest MoE layer of today is about 2^33). */
#define NX_MAX_SIZE_LOG2  48
#define NX_MAX_SIZE       ((uint64_t)1 << NX_MAX_SIZE_LOG2)
#define NX_MAX_ELEMS_LOG2 40
#define NX_MAX_ELEMS      ((uint64_t)1 << NX_MAX_ELEMS_LOG2)
#define SIT_SLOTS         1024 /* distinct situations the sampler tells apart (more: treated as seen) */

/* One configuration to run: topology + quantization. */
typedef struct runcfg {
    uint8_t fused;
    ft_mlp_quant q;
} runcfg;

typedef struct runout { /* one configuration's run on the current call */
    runcfg cfg;
    const char *raise; /* TE raises running it (the fuser model says so before the run) */
    int rc;            /* FT_OK, or the refusal (TE's, or the kernel's FT_EUNSUPPORTED/FT_EINVAL) */
    char msg[160];     /* why, when rc != FT_OK */
    /* figures: vs float64, vs the fresh plan's run (0 for the fresh run) */
    double err, div, max_abs;
    uint64_t nonfinite;
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
    uint64_t index;  /* its place among the trace's sampled calls (opts.parts) */
    int grad;        /* the call runs the backward */
    int64_t *splits; /* [groups] owned copy of the call's split sizes */
    runcfg fresh_cfg, cfg[FT_NUMERICS_MAX_POLICIES];
    const char *fresh_raise; /* TE's message if the fresh plan raises (model text), else NULL */
    const char *raise[FT_NUMERICS_MAX_POLICIES];
    const char *ctl_raise; /* TE's message if the control (fused) raises, else NULL */
    /* results of execute */
    int rc; /* FT_OK or a failure (err) */
    ft_err err;
    int fresh_ok; /* the fresh plan ran */
    int has_ctl;  /* a fused/unfused control ran */
    double fresh_err, ctl_div;
    uint64_t runs, device_runs;
    double flops;
    double phase_ms[FT_NX_PHASES]; /* opts.profile, back ends with a context per call */
    choice_out out[FT_NUMERICS_MAX_POLICIES];
    /* GPU time: the situations this call times (claimed when it was planned), and their times */
    uint32_t n_time;
    uint32_t time_sit[FT_NUMERICS_MAX_POLICIES + 1]; /* situation index (gt_state.sit) */
    runcfg time_cfg[FT_NUMERICS_MAX_POLICIES + 1];
    ft_nx_time time[FT_NUMERICS_MAX_POLICIES + 1];
    uint64_t time_ns; /* wall time of the timing */
    uint32_t slot;    /* device back ends: the device slot that executes it (nx_run_jobs) */
    uint8_t executed; /* execute_call ran on it */
} job;

/* ---- the back ends ------------------------------------------------------------------------ */

/* One row per back end: the numerics problem of kernels/ (ft_kernels.h, "numerical replay") and
 * what numerics needs to know around it. */
typedef struct nx_backend {
    const char *name; /* "cpu", "cuda": in messages */
    /* 1: a device: one context for all calls, one call at a time, runs count as device runs;
     * 0: a context per call, calls on any number of threads */
    uint8_t device;
    int (*open)(ft_nx **out, ft_err *err);
    void (*close)(ft_nx *nx);
    int (*problem)(ft_nx *nx, const ft_nx_problem *p, ft_err *err);
    int (*run)(ft_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, unsigned flags, ft_err *err);
    int (*collect)(ft_nx *nx, ft_nx_figs *figs, uint32_t n, ft_err *err);
    int (*memory)(ft_nx *nx, uint64_t *held, uint64_t *pool_peak, ft_err *err);
    void (*profile)(ft_nx *nx, int on, double ms[FT_NX_PHASES]);
    /* devices only (NULL otherwise): how many, the current one's name, its memory; a context on
     * device d (NULL: open's, on the current device) and the calling thread's device set to d
     * (NULL: nothing to set) */
    int (*n_devices)(void);
    int (*open_on)(int device, ft_nx **out, ft_err *err);
    int (*set_device)(int device, ft_err *err);
    int (*device_info)(char *name, size_t cap, int *n_sm, ft_err *err);
    int (*mem_info)(uint64_t *free_b, uint64_t *total_b, ft_err *err);
    /* GPU time: one configuration's training step timed (back ends that cannot: FT_EUNSUPPORTED) */
    int (*time)(ft_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, uint32_t warmup,
                uint32_t rounds, ft_nx_time *out, ft_err *err);
} nx_backend;

/* ---- GPU time (gputime.c) ------------------------------------------------------------------ */

enum { GT_SEEN = 0, GT_CLAIMED, GT_TIMED, GT_REFUSED };
#define GT_MAX_SITS  4096  /* distinct situations per trace (more: their calls count as untimed) */
#define GT_MAX_PAIRS 65536 /* distinct (policy, chosen, fresh) situations per trace (likewise) */

typedef struct gt_sit { /* one situation: what a call runs under one plan */
    uint8_t state;      /* GT_* */
    unsigned proxies;   /* FT_NX_PROXY_* its timing needed */
    uint32_t n_rounds;
    double ms[FT_NX_MAX_ROUNDS];
    char msg[160]; /* GT_REFUSED: why */
} gt_sit;

typedef struct gt_pair { /* calls of one policy with the same chosen and fresh situations */
    uint32_t policy, chosen, fresh;
    uint64_t n;
} gt_pair;

typedef struct gt_state {
    ft_hmap sit_of;  /* situation key -> index into sit */
    ft_hmap pair_of; /* pair key -> index into pair */
    ft_hmap steps;   /* the counted calls' steps */
    gt_sit *sit;
    uint32_t n_sit, cap_sit;
    gt_pair *pair;
    uint32_t n_pair, cap_pair;
    uint64_t calls, timing_ns;
    uint64_t raised[FT_NUMERICS_MAX_POLICIES], fresh_raised[FT_NUMERICS_MAX_POLICIES];
    uint64_t lost[FT_NUMERICS_MAX_POLICIES]; /* calls past the tables' limits (untimed) */
} gt_state;

/* The row of be, or NULL for an unknown back end. */
const nx_backend *nx_backend_of(ft_numerics_backend be);
/* The devices o's calls are spread over (a device back end: o->devices' count, else every
 * visible device; 1 otherwise). */
uint32_t nx_devices_used(const ft_numerics_opts *o);

/* One device of a device back end: its context (its own stream and weight cache), the lock that
 * keeps one thread at a time on it, and the work assigned to it so far (nx_work's FLOPs plus
 * elements), which the next call's assignment reads. */
typedef struct nx_slot {
    int device;    /* the device's id (--devices) */
    ft_nx *ctx;    /* its context */
    double load;   /* estimated work assigned so far */
    uint64_t jobs; /* calls assigned so far */
    pthread_mutex_t lock;
} nx_slot;

struct ft_numerics {
    const ft_model *m;
    ft_numerics_opts o;
    const nx_backend *be;
    uint32_t n_fusers;
    mlp_desc *mlp;        /* [n_fusers] */
    uint64_t n_diff_run;  /* sampled calls where a choice differed from fresh */
    uint64_t n_plain_run; /* sampled calls where none did */
    ft_hmap sit;     /* situation hash -> sampled calls of that situation (at most SIT_SLOTS) */
    ft_hmap pol_sit; /* a policy's stale situation (its choice against the fresh plan) sampled */
    uint32_t n_sits;
    nx_slot slot[FT_NUMERICS_MAX_DEVICES]; /* a device back end: one per device used */
    uint32_t n_slots;                      /* 0 on the CPU back end */
    uint64_t planned;                      /* sampled calls the estimate counted (progress line) */
    uint64_t t_start;                      /* numerics start (progress line) */
    gt_state gt;                           /* opts.gpu_time */
    ft_numerics_outcome *oc;               /* opts.parts: the outcomes folded, in call order */
    uint64_t n_oc, cap_oc;
    ft_numerics_result res;
};

/* ---- the problem of one call -------------------------------------------------------------- */

typedef struct problem {
    ft_nx_problem np; /* shapes, splits and seeds, as both back ends take them */
    int64_t *splits;  /* [n_groups] the shrunk split sizes (np.splits) */
} problem;

/* ---- functions shared between the files --------------------------------------------------- */

/* plan.c: decide what every choice runs and whether the call is sampled (call order; reads the
 * model). 1: sampled, j filled; 0: not sampled; < 0: an error. */
int nx_plan_call(ft_numerics *nx, const ft_numerics_call *c, job *j, ft_err *err);
void nx_job_free(job *j);
/* Shapes, splits and seeds of the call (the back end draws the inputs from them). */
int nx_problem_shape(const ft_numerics *nx, const mlp_desc *d, const job *c, problem *P,
                     ft_err *err);
void nx_problem_free(problem *P);
/* The runs of a call: the fresh plan first, then every distinct choice that does not raise, then
 * the control (see plan.c). */
uint32_t nx_list_outs(const job *j, uint32_t np, runout *outs, uint32_t *which, uint32_t *ctl_i);
int nx_cfg_equal(const runcfg *a, const runcfg *b);
/* Same quantization as far as the call's numbers can tell (grad: it runs the backward). */
int nx_quant_equal(const runcfg *a, const runcfg *b, int grad);

/* gputime.c: opts' GPU time settings against back end be (FT_EINVAL, FT_EUNSUPPORTED). */
int nx_gt_check_opts(const nx_backend *be, const ft_numerics_opts *o, ft_err *err);
/* gputime.c: a planned call (its choices' configurations in j; sampled: it runs) counted into
 * the situations and pairs, and, sampled, the situations it is the first to time claimed into
 * j (call order). */
void nx_gt_offer(ft_numerics *nx, const ft_numerics_call *c, job *j, int sampled);
/* gputime.c: j's claimed situations timed on the back end's context (the problem P set there
 * already unless set_problem; any thread, under the device's lock). */
int nx_gt_exec(const ft_numerics *nx, ft_nx *ctx, job *j, const problem *P, int set_problem,
               ft_err *err);
/* gputime.c: j's times into the situations (call order); the results; merging; freeing. */
void nx_gt_fold(ft_numerics *nx, const job *j);
void nx_gt_get(const ft_numerics *nx, ft_gputime_result *out);
void nx_gt_merge(ft_gputime_result *dst, const ft_gputime_result *src);
void nx_gt_free(gt_state *g);
/* plan.c: the work of a problem run `runs` times besides its reference, as the estimate counts
 * it: FLOPs (ft_nx_flops) and elements touched (activations and weights, each run and the
 * reference; three times for a backward, as the FLOPs are). */
void nx_work(const ft_nx_problem *p, uint32_t runs, double *flops, double *elems);

/* exec.c: time one planned call (d, j: a copy whose splits it owns, np policies) on the CPU back
 * end at shrink K on this thread, best of reps: *secs, and its work (nx_work). The estimate's
 * calibration. */
int nx_time_call(const ft_numerics_opts *o, const mlp_desc *d, const job *j, uint32_t np,
                 uint32_t shrink, int reps, double *secs, double *flops, double *elems,
                 ft_err *err);

/* plan.c: device ids for back end be: each below its device count, none twice (FT_EINVAL). */
int nx_devices_check(const nx_backend *be, const int *ids, uint32_t n, ft_err *err);

/* exec.c: execute jobs[0..n) on up to n_threads threads (a device back end: one per device, each
 * job on the device nx_assign gave it), then fold them in order. */
int nx_run_jobs(ft_numerics *nx, job *jobs, uint32_t n, uint32_t n_threads, ft_err *err);
/* exec.c: online cores of this machine (at least 1). */
uint32_t nx_online_cores(void);

#endif /* FT_NUMERICS_INT_H */
