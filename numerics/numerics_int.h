/*
 * numerics_int.h - private types and functions of numerics/ (ft_numerics.h), shared by its files:
 * numerics.c (planning a call, executing it, folding its results) and observe.c (the observer of
 * the replay driver, whole traces). Not part of the module's contract.
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

#define SIT_SLOTS 1024 /* distinct situations the sampler tells apart (more: treated as seen) */

/* One configuration to run: topology + quantization. */
typedef struct runcfg {
    uint8_t fused;
    ft_mlp_quant q;
} runcfg;

typedef struct runout { /* one configuration's run on the current call */
    runcfg cfg;
    int rc;                    /* FT_OK, or the kernel's FT_EUNSUPPORTED/FT_EINVAL */
    char msg[160];             /* kernel message when rc != FT_OK */
    float *y, *dx, *dw1, *dw2; /* CPU back end: the outputs */
    /* figures (both back ends): vs float64, vs the fresh plan's run (0 for the fresh run) */
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
    double flops;
    double phase_ms[FT_NX_PHASES]; /* CPU back end, opts.profile */
    char fallback[160];            /* CUDA: first configuration the device declined, and why */
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
    ft_cuda_nx *dev;          /* CUDA back end: the device context */
    uint64_t planned;         /* sampled calls the estimate counted (progress line) */
    uint64_t t_start;         /* numerics start (progress line) */
    ft_numerics_result res;
};

/* ---- the problem of one call -------------------------------------------------------------- */

typedef struct problem {
    ft_mlp m;
    ft_nx_problem np; /* the same problem for the device (shapes, seeds; no arrays) */
    int64_t *splits;
    float *x, *w1, *b1, *w2, *b2, *p, *dy;
    int grad;
    int64_t ny, ndx, ndw1, ndw2;
    double *ry, *rdx, *rdw1, *rdw2; /* float64 reference */
} problem;

/* ---- functions of numerics.c used by observe.c, and back ---------------------------------- */

/* Decide what every choice runs and whether the call is sampled (call order; reads the model).
 * 1: sampled, j filled; 0: not sampled; < 0: an error. */
int plan_call(ft_numerics *nx, const ft_numerics_call *c, job *j, ft_err *err);
void job_free(job *j);
/* Shapes, splits and seeds of the call (the inputs are drawn by problem_inputs or the device). */
int problem_shape(const ft_numerics *nx, const mlp_desc *d, const job *c, problem *P, ft_err *err);
void problem_free(problem *P);
/* The runs of a call: the fresh plan first, then every distinct choice that does not raise, then
 * the control (see numerics.c). */
uint32_t list_outs(const job *j, uint32_t np, runout *outs, uint32_t *which, uint32_t *ctl_i);
/* Execute jobs[0..n) on up to n_threads threads, then fold them in order. */
int run_jobs(ft_numerics *nx, job *jobs, uint32_t n, uint32_t n_threads, ft_err *err);
/* Online cores of this machine (at least 1). */
uint32_t online_cores(void);

#endif /* FT_NUMERICS_INT_H */
