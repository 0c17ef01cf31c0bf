/*
 * ft_numerics.h - numerical replay: for a sampled grouped-MLP call, run the plan and quantizer
 * state each policy chose and the fresh plan (a build from the call's full state), on
 * deterministic inputs seeded by (fuser, seq), with the call's split sizes and the fuser's op
 * dimensions (optionally shrunk), forward and, for grad calls, backward; compare each with a
 * float64 reference and with the fresh plan.
 *
 * Two ways in: an observer of the replay driver (ft_numerics_obs, one of ft_replay_opts.observers
 * of ft_replay_run), which takes every call's decisions from the driver's views and spreads
 * the sampled calls over threads; or, per call, ft_numerics_new once (with the model whose plan
 * ids the caller uses), ft_numerics_wants(), then ft_numerics_run with each policy's chosen plan
 * id and quantizer state.
 * Results: ft_numerics_get / ft_numerics_report. Every figure is independent of the thread
 * count: which calls are sampled is decided in call order, and results are folded in call order.
 *
 * What a call runs, and when TE raises, is the fuser model's (tefuser: ft_model_quantizers,
 * ft_model_run_raises, ft_model_fused_mlp_raises); the numbers are the kernels'. Back ends (one
 * problem API, kernels/ft_kernels.h "numerical replay"): CPU (kernels/cpu: OpenBLAS GEMMs,
 * float32 emulation, float64 reference; calls on a thread pool) or CUDA (kernels/cuda: the
 * inputs are drawn on the device from the same seeds, the float64 reference runs in cuBLAS
 * DGEMM, every configuration runs the bf16 tensor-core fast path, and only figures come back;
 * one thread per device).
 *
 * Several devices (opts.devices): each has its own context (stream, cuBLAS handle, pool and
 * weight cache) and a thread that drives it. A sampled call goes, in call order, to the device
 * with the least work assigned so far (nx_work's FLOPs and elements; ties to the lowest slot),
 * so the assignment is fixed by the calls alone; every call draws its inputs from its own
 * seeds, and results are folded in call order, so the figures are those of one device (of the
 * same model: the kernels are deterministic on one model; another model may choose other cuBLAS
 * algorithms for the reference).
 *
 * What a run means for each comparison of a policy's choice with the fresh plan:
 * - same: same topology and same quantization -> identical numbers (divergence 0);
 * - harmless: topology differs (fused vs unfused), quantization equal -> differences only where
 *   the two paths round to bf16: the "harmless band";
 * - quant: the quantization differs (stale quantizers, e.g. RHT kept after disable_rht) -> the
 *   "quant band", which should sit clearly above the harmless band;
 * - raised: TE would raise running the choice (ft_model_run_raises), or the kernels refuse it.
 * Every sampled call of a fusable recipe also runs a control: the fresh quantization on the
 * other topology, so the harmless band is measured even when no policy is stale (not where TE
 * raises running it: a fused control that ft_model_fused_mlp_raises refuses).
 *
 * GPU time (opts.gpu_time, "GPU time" below) rides on the same pass: the sampled calls'
 * situations are timed on the CUDA back end's own kernels, and every call is summed per policy.
 *
 * Inputs are bf16 values: weights seeded by the fuser (the same parameters across calls), x, dy
 * and probs by (fuser, seq); stochastic rounding seeded by (fuser, seq), the same for every plan
 * of a call (TE's Philox offsets would be too). FP8 delayed scaling runs with scale 1 (its amax
 * history across calls is not modelled here).
 */
#ifndef FT_NUMERICS_H
#define FT_NUMERICS_H

#include "ft_common.h"
#include "ft_replayer.h"
#include "ft_kernels.h"
#include "ft_trace.h"
#include "ft_tefuser.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FT_NUMERICS_MAX_POLICIES 16
#define FT_NUMERICS_MAX_DEVICES  64 /* devices one process drives (--devices) */

typedef enum ft_numerics_backend {
    FT_NUMERICS_CPU = 0, /* ft_cpu_nx_*: kernels/cpu, calls on a thread pool */
    FT_NUMERICS_CUDA = 1 /* ft_cuda_nx_*: kernels/cuda (the plugin), everything on the device */
} ft_numerics_backend;

/* One trace's sampled calls split over the processes of a job (MPI): a process that takes part in
 * a trace replays the whole of it, so that the sampler sees every call and samples what one
 * process does, but runs only its part of the sampled calls: call k of the trace's sampled list
 * (0, 1, ... in call order) where k % mod lies in [lo, hi). mod 0: every sampled call. */
typedef struct ft_numerics_part {
    uint32_t mod, lo, hi;
} ft_numerics_part;

typedef struct ft_numerics_opts {
    uint32_t shrink; /* K >= 1: hidden sizes and split sizes divided by K (rounded up; hidden
                        sizes kept multiples of 32, the token total padded to 128) */
    uint32_t sample; /* 0: every grouped-MLP call; N: at most N calls, in call order: the first
                        call of every situation (grad or not, what the fresh plan and each choice
                        run, which raise), more of one situation up to N/8, calls where no
                        choice differs from the fresh plan at most N/4; and beyond N the first
                        call of each policy's own stale situation, so that every stale policy
                        is measured */
    uint64_t seed;   /* mixed into every input seed */
    ft_numerics_backend backend;
    uint32_t n_threads; /* trace drivers: threads running sampled calls; 0 = one per online core
                           (the CUDA back end: one per device) */
    /* the CUDA back end: the devices to spread the sampled calls over (ids as CUDA numbers them
     * in this process, distinct, each < ft_cuda_device_count()); n_devices 0: every visible one.
     * The CPU back end ignores them (the CLI refuses --devices there). */
    const int *devices;
    uint32_t n_devices;
    FILE *info;         /* trace drivers: before numerics start, one line with the estimate (calls
                           sampled, FLOPs, memory, seconds); NULL: none */
    uint8_t progress;   /* 1: a progress line on info while calls run (the caller checks that
                           info is a terminal) */
    double max_seconds; /* trace drivers: refuse (FT_ERANGE, with what to change) when the
                           estimate exceeds it; 0: no limit. Memory beyond the device's or the
                           host's is always refused. */
    volatile sig_atomic_t *stop; /* non-zero (set by a signal handler): stop after the call in
                                    flight; the results so far are returned (interrupted) */
    uint8_t profile; /* time the phases into ft_numerics_result.phase_ms (CUDA: synchronises
                        the device at every phase change, so the total is slower) */
    /* GPU time (see "GPU time" below; the CUDA back end only): 1 times every distinct
     * situation of the sampled calls on the device's own kernels */
    uint8_t gpu_time;
    uint8_t time_only;    /* with gpu_time: no reference, no comparisons, the timing alone */
    uint32_t time_warmup; /* untimed runs before the timed ones (0: 2) */
    uint32_t time_rounds; /* timed rounds per situation (0: 5; at most FT_NX_MAX_ROUNDS) */
    /* trace drivers: parts[in->index] is the part of each trace of the replay this process runs
     * (NULL: every sampled call of every trace; a trace past n_parts: all of it). The calls run
     * leave their outcomes (ft_numerics_obs_outcomes) for ft_numerics_result_join. Not with GPU
     * time (its sums count every call of a trace). */
    const ft_numerics_part *parts;
    uint32_t n_parts;
} ft_numerics_opts;

typedef struct ft_numerics ft_numerics;

/* For the model's fusers (dense fuser index); policy_names[n_policies] label the results
 * (strings must outlive nx). Fusers without a FC1 -> activation -> FC2 grouped MLP
 * (ft_model_grouped_mlp) are never run. With the CUDA back end and no usable device (or a build
 * without CUDA): FT_ENODEV. */
int ft_numerics_new(const ft_model *m, const char *const *policy_names, uint32_t n_policies,
                    const ft_numerics_opts *opts, ft_numerics **out, ft_err *err);
void ft_numerics_free(ft_numerics *nx);

/* FT_OK when the back end can run here; FT_ENODEV with what to do instead (CUDA without a device
 * or without a CUDA build). Cheap: callers check before other work. */
int ft_numerics_backend_check(ft_numerics_backend be, ft_err *err);
/* The devices of opts.devices for back end be: FT_EINVAL naming an id this process does not see,
 * or one named twice (n 0: every visible device, always valid). */
int ft_numerics_devices_check(ft_numerics_backend be, const int *ids, uint32_t n, ft_err *err);
/* The same for GPU time (opts.gpu_time): FT_ENODEV saying why there is no device to time on. */
int ft_numerics_gputime_check(ft_err *err);

/* Whether the fuser is a grouped MLP the numerics can run (cheap; call before collecting). */
int ft_numerics_wants(const ft_numerics *nx, uint32_t fuser);

typedef struct ft_numerics_choice {
    uint32_t plan;      /* model plan id the policy runs */
    const ft_qstate *q; /* quantizer state it runs with */
} ft_numerics_choice;

typedef struct ft_numerics_call {
    uint32_t fuser;                   /* dense fuser index */
    int32_t recipe;                   /* dense recipe index, -1 = none */
    uint32_t f;                       /* first_op_requiring_backward: f < n_ops runs backward */
    int64_t seq;                      /* call sequence number */
    const int64_t *splits;            /* [n_splits] split sizes (tokens per expert) */
    uint32_t n_splits;                /* must equal the fuser's num_groups */
    int64_t n_tokens;                 /* T if known, else -1 (sum of splits) */
    uint32_t fresh_plan;              /* plan a fresh build gives (the oracle) */
    const ft_qstate *fresh_q;         /* quantizer state of a fresh fuser */
    const ft_numerics_choice *chosen; /* [n_policies], order of ft_numerics_new */
    int64_t step;                     /* GPU time: the call's training step, -1 if unknown */
    uint8_t uncounted;                /* GPU time: outside the replay's filter (not counted) */
} ft_numerics_call;

/* Run one call if it is sampled (FT_OK also when it is skipped), on the calling thread. Errors:
 * FT_EINVAL (splits do not match the fuser), FT_ENOMEM, a CUDA failure. */
int ft_numerics_run(ft_numerics *nx, const ft_numerics_call *c, ft_err *err);

/* ---- results ------------------------------------------------------------------------------ */
typedef struct ft_band {
    uint64_t n;      /* comparisons */
    double min, max; /* relative L2 divergence (max over the call's outputs) */
    double sum;      /* for the mean */
} ft_band;

typedef struct ft_numerics_policy {
    const char *name;
    uint64_t calls;                 /* sampled calls */
    uint64_t same, harmless, quant; /* comparisons by kind (see top) */
    uint64_t raised;                /* choices TE would raise on (fresh plans that do included) */
    uint64_t raised_stale;          /* of those, calls whose fresh plan runs */
    char raise_text[160];           /* the first such message */
    ft_band err;                    /* error vs float64 of the choice's outputs */
    ft_band div;                    /* divergence from the fresh plan (non-raising calls) */
    double div_max_abs;             /* largest absolute element difference from the fresh plan */
    uint64_t nonfinite;             /* NaN/Inf output elements */
} ft_numerics_policy;

/* ---- GPU time (opts.gpu_time) ---------------------------------------------------------------
 * A situation is what one grouped-MLP call runs under one plan: the fuser's problem shape at the
 * call's token count, forward only or forward and backward, the plan's topology (fused or not)
 * and its quantization. Every distinct situation of the sampled calls that TE does not raise on
 * (the fresh plan's and each policy's choice) is timed once per trace on the CUDA back end
 * (ft_cuda_nx_time: warmup untimed runs, then rounds timed ones, on the device's inputs of the
 * first sampled call that has it, after that call's numerics runs when they run). Then every
 * grouped-MLP call the replay counts (its filter's) adds, under each policy, the time of its
 * chosen plan's situation and of its fresh plan's, where both were timed: the sampled calls stand
 * for the unsampled ones of the same situation, whatever their split sizes. Calls whose chosen
 * or fresh plan TE raises on, or with a situation no sampled call timed, are counted apart. */
typedef struct ft_gputime_policy {
    uint64_t calls;        /* counted calls whose chosen and fresh situations were both timed */
    uint64_t stale_calls;  /* of those, calls whose chosen situation is not the fresh one's (a
                              stale plan, or quantizer drift every policy shares) */
    uint64_t raised;       /* counted calls whose chosen plan TE raises on (nothing timed) */
    uint64_t fresh_raised; /* counted calls whose fresh plan TE raises on, the chosen one not */
    uint64_t untimed;      /* counted calls with a situation that was not timed */
    double chosen_ms[FT_NX_MAX_ROUNDS]; /* per round: sum over the timed calls, ms */
    double fresh_ms[FT_NX_MAX_ROUNDS];
} ft_gputime_policy;

typedef struct ft_gputime_result {
    uint8_t on;
    char device[64]; /* the GPU's name */
    uint32_t warmup, rounds;
    uint32_t shrink;         /* the problems' --shrink (1: the trace's own sizes) */
    uint64_t calls;          /* grouped-MLP calls counted */
    uint64_t steps;          /* distinct steps of those calls, summed over the traces */
    uint32_t traces;         /* traces folded in */
    uint32_t traces_no_step; /* of those, traces whose calls record no step (one step each) */
    uint32_t situations;     /* distinct situations met (every trace's, added) */
    uint32_t timed;          /* of those, timed */
    uint32_t refused;        /* of those, refused by the kernels (the first reason: refuse_text) */
    char refuse_text[160];
    unsigned proxies;   /* FT_NX_PROXY_* of the timed situations */
    uint64_t timing_ns; /* host wall time of the timing (device work included) */
    uint32_t n_policies;
    ft_gputime_policy pol[FT_NUMERICS_MAX_POLICIES];
} ft_gputime_result;

/* What the per-step figures are divided by: the steps, a trace without steps counting as one. */
uint64_t ft_gputime_steps(const ft_gputime_result *g);
/* Policy p's milliseconds per step over the rounds: which 0 the chosen plans, 1 the fresh plans,
 * 2 their difference (what stale plans cost); stat 0 the median round, 1 the fastest, 2 the
 * slowest (each round's sum over the calls, divided by ft_gputime_steps). */
double ft_gputime_ms(const ft_gputime_result *g, uint32_t p, int which, int stat);

typedef struct ft_numerics_result {
    uint64_t calls_seen;   /* grouped-MLP calls offered */
    uint64_t calls_run;    /* sampled and run */
    uint64_t fresh_raised; /* calls whose fresh plan itself raises */
    uint64_t mlp_runs;     /* forward(+backward) executions */
    uint64_t device_runs;  /* of those, on the CUDA device */
    uint64_t wall_ns;      /* wall time of the numerics work (threads overlap inside it) */
    ft_numerics_backend backend;
    uint32_t n_threads;        /* threads that ran sampled calls (the largest, after a merge;
                                  CUDA: the devices used) */
    char device[64];           /* CUDA device name, "" on the CPU back end */
    char fallback_text[160];   /* never set now (no configuration falls back to the CPU); the
                                  report still prints it, so it stays until the report drops it */
    uint64_t device_bytes;     /* CUDA: most device memory held (context + pool peak) */
    uint64_t calls_planned;    /* sampled calls the estimate counted (trace drivers) */
    double est_lo_s, est_hi_s; /* the estimate's range of seconds, 0 without an estimate */
    uint8_t interrupted;       /* opts.stop ended the run early: the figures cover calls_run */
    double flops; /* GEMM work done: float64 reference + every run, all sampled calls */
    double phase_ms[FT_NX_PHASES];      /* opts.profile: inputs, reference, quantization, GEMMs,
                                           comparison, other (CPU: runs count as other, threads add) */
    ft_band fresh_err;                  /* error of the fresh plans vs float64 */
    ft_band fresh_err_fmt[FT_QF_COUNT]; /* the same by the fresh plan's quantization format
                                         * (FT_QF_NONE: bf16): what an error of that format is
                                         * expected to be on these calls */
    ft_band harmless_band; /* fused vs unfused, same quantization (controls and policies) */
    ft_band quant_band;    /* different quantization from the fresh plan */
    uint32_t n_policies;
    ft_numerics_policy pol[FT_NUMERICS_MAX_POLICIES];
    uint8_t time_only;    /* opts.time_only: only gt holds figures (the comparisons did not run) */
    ft_gputime_result gt; /* opts.gpu_time */
} ft_numerics_result;

void ft_numerics_get(const ft_numerics *nx, ft_numerics_result *out);

/* Add src into dst (results of the same policy list, e.g. one per rank's trace). */
int ft_numerics_result_merge(ft_numerics_result *dst, const ft_numerics_result *src, ft_err *err);

/* ---- one trace's sampled calls in parts (opts.parts) ---------------------------------------- */
/* What folding one sampled call into a result reads: plain bytes, the same in every process of
 * one build. kind is the comparison's class (private to the fold). */
typedef struct ft_numerics_outcome_choice {
    uint8_t kind;
    double err, div, max_abs;
    uint64_t nonfinite;
    char text[160];
} ft_numerics_outcome_choice;

typedef struct ft_numerics_outcome {
    uint64_t index; /* its place among the trace's sampled calls (ft_numerics_part's k) */
    int64_t seq;
    uint32_t fuser;
    uint8_t fresh_ok, has_ctl;
    int32_t fresh_fmt; /* the fresh plan's quantization format (ft_qfmt) */
    double fresh_err, ctl_div;
    uint64_t runs, device_runs;
    double flops;
    ft_numerics_outcome_choice out[FT_NUMERICS_MAX_POLICIES];
} ft_numerics_outcome;

/* One trace's result from its parts: parts[n_parts] each part's own result of the trace
 * (ft_numerics_obs_traces; policy names as out should carry them), oc[n_oc] the outcomes of every
 * part (any order; sorted here by index, which must be distinct). The outcomes are folded in call
 * order, so out is the result one process running every sampled call gives; the calls offered
 * (which every part must agree on), threads, device, memory, phases, wall time and the
 * interruption come from the parts. FT_EINVAL when the parts do not fit together. */
int ft_numerics_result_join(const ft_numerics_result *parts, uint32_t n_parts,
                            ft_numerics_outcome *oc, uint64_t n_oc, ft_numerics_result *out,
                            ft_err *err);

/* ---- as an observer of the replay driver ---------------------------------------------------- */
/* Every grouped-MLP call of every trace the driver replays is offered to the numerics with each
 * policy's chosen plan and quantizer state, from the batch's view; sampled calls run on
 * opts->n_threads threads in groups while the engine waits. Sampling applies per trace; results
 * add up over traces. An estimating observer (estimate_only = 1) only plans the calls and counts
 * their work (no back end is touched), so it can share a pass with the other consumers of a
 * command: after that pass ft_numerics_obs_check writes the estimate to opts->info and refuses what
 * does not fit (FT_ERANGE, with what to change), and ft_numerics_obs_follow makes the observer that
 * runs the calls in a second pass, knowing the total. */
typedef struct ft_numerics_obs ft_numerics_obs;
int ft_numerics_obs_new(const ft_numerics_opts *opts, int estimate_only, ft_numerics_obs **out,
                        ft_err *err);
/* Put this into ft_replay_opts.observers (valid while the ft_numerics_obs lives). */
const ft_replay_observer *ft_numerics_obs_observer(ft_numerics_obs *o);
/* The estimate: the work counted, timed on this machine (CPU: the call with the most work, run at
 * two small sizes; CUDA: the H200 rates bench/RESULTS.md records), as a range of seconds that
 * the results carry (ft_numerics_result.est_lo_s, est_hi_s). */
int ft_numerics_obs_check(ft_numerics_obs *est, ft_err *err);
/* ft_numerics_obs_check in two halves, for work spread over processes (MPI): the estimate of this
 * process's share (measured, not said, not judged), then, on one process, the estimate of the
 * whole job (the shares added: calls, runs and FLOPs summed, memory and seconds the largest
 * share's, processes counted) said on opts->info and judged (FT_ERANGE). set_estimate gives an
 * estimating observer the whole job's figures (the total its follower's progress counts, the
 * range the results carry). */
typedef struct ft_numerics_estimate {
    uint64_t calls, runs;
    double flops;
    uint64_t mem, cap;  /* memory the calls at once need; the machine's (device's) */
    uint32_t threads;   /* calls at once */
    uint32_t devices;   /* CUDA: the devices shared (0 on the CPU) */
    uint32_t processes; /* shares added (0 or 1: this process alone) */
    int timed;          /* the seconds were estimated (not when the largest call cannot fit) */
    double lo_s, hi_s;  /* the range of seconds */
    char how[200];      /* where the rates come from */
} ft_numerics_estimate;
int ft_numerics_obs_measure(ft_numerics_obs *est, ft_numerics_estimate *out, ft_err *err);
int ft_numerics_estimate_judge(const ft_numerics_estimate *e, const ft_numerics_opts *opts,
                               ft_err *err);
void ft_numerics_obs_set_estimate(ft_numerics_obs *est, const ft_numerics_estimate *e);
int ft_numerics_obs_follow(const ft_numerics_obs *est, ft_numerics_obs **run, ft_err *err);
/* The results of every trace finished so far. */
void ft_numerics_obs_result(const ft_numerics_obs *o, ft_numerics_result *out);
/* Each trace's own results, in the order the traces ran (valid while o lives); their number.
 * Merged in that order (the first copied, ft_numerics_result_merge for the rest) they give the
 * total ft_numerics_obs_result gives. */
uint32_t ft_numerics_obs_traces(const ft_numerics_obs *o, const ft_numerics_result **out);
/* With opts.parts: the outcomes of the calls this process ran of trace t (the order of
 * ft_numerics_obs_traces), in call order; their number. */
uint64_t ft_numerics_obs_outcomes(const ft_numerics_obs *o, uint32_t t,
                                  const ft_numerics_outcome **out);
/* After a running observer's pass that returned rc: its results into out. A pass that opts->stop
 * ended is FT_OK (err cleared), out->interrupted set, the figures those of the calls that ran. */
int ft_numerics_obs_finish(ft_numerics_obs *o, int rc, ft_numerics_result *out, ft_err *err);
void ft_numerics_obs_free(ft_numerics_obs *o);

/* Conveniences: ft_replay_trace / ft_replay_traces with such an observer, after an estimating
 * pass when nopts has an info stream or a time limit (ropts may be NULL; its observers are
 * replaced). rr_out (may be NULL for one trace) receives the replay result. */
int ft_numerics_replay_trace(ft_trace *t, const ft_replay_opts *ropts,
                             const ft_numerics_opts *nopts, ft_replay_result *rr_out,
                             ft_numerics_result *out, ft_err *err);
int ft_numerics_replay_traces(const char *const *paths, uint32_t n_paths,
                              const ft_replay_opts *ropts, const ft_numerics_opts *nopts,
                              ft_replay_result *rr_out, ft_numerics_result *out, ft_err *err);

#ifdef __cplusplus
}
#endif
#endif /* FT_NUMERICS_H */
