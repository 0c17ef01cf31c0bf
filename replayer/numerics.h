/*
 * numerics.h - numerical replay (DESIGN.md §Numerics): for a sampled grouped-MLP call, run the
 * plan and quantizer state each policy chose and the fresh plan (a build from the call's full
 * state), on deterministic inputs seeded by (fuser, seq), with the call's split sizes and the
 * fuser's op dimensions (optionally shrunk), forward and, for grad calls, backward; compare each
 * with a float64 reference and with the fresh plan. CPU back end (kernels/cpu).
 *
 * How the engine uses it: ft_numerics_new once per trace (after the model), then for every call
 * ft_numerics_wants(); when it says yes, collect each policy's chosen plan id and quantizer state
 * for that call and pass them to ft_numerics_run. Results: ft_numerics_get / ft_numerics_report.
 *
 * What a run means for each comparison of a policy's choice with the fresh plan:
 * - same: same topology and same quantization -> identical numbers (divergence 0);
 * - harmless: topology differs (fused vs unfused), quantization equal -> differences only where
 *   the two paths round to bf16: the "harmless band";
 * - quant: the quantization differs (stale quantizers, e.g. RHT kept after disable_rht) -> the
 *   "quant band", which should sit clearly above the harmless band;
 * - raised: TE would raise running the choice (ft_model_run_raises, or the kernel's own check).
 * Every sampled call of a fusable recipe also runs a control: the fresh quantization on the
 * other topology, so the harmless band is measured even when no policy is stale.
 *
 * Inputs are bf16 values: weights seeded by the fuser (the same parameters across calls), x, dy
 * and probs by (fuser, seq); stochastic rounding seeded by (fuser, seq), the same for every plan
 * of a call (TE's Philox offsets would be too). FP8 delayed scaling runs with scale 1 (its amax
 * history across calls is not modelled here).
 */
#ifndef FT_NUMERICS_H
#define FT_NUMERICS_H

#include "ft_common.h"
#include "ft_trace.h"
#include "ft_replay.h"
#include "model.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FT_NUMERICS_MAX_POLICIES 16

typedef struct ft_numerics_opts {
    uint32_t shrink; /* K >= 1: hidden sizes and split sizes divided by K (rounded up; hidden
                        sizes kept multiples of 32, the token total padded to 128) */
    uint32_t sample; /* 0: every grouped-MLP call; N: at most N calls, calls where some policy's
                        choice differs from the fresh plan first, plus up to N/4 others */
    uint64_t seed;   /* mixed into every input seed */
} ft_numerics_opts;

typedef struct ft_numerics ft_numerics;

/* fusers[] as the model was built from (same order = dense fuser index); world_size as the
 * trace's env says (1 if unknown). policy_names[n_policies] label the results (strings must
 * outlive nx). Fusers that are not FC1 -> activation -> FC2 grouped MLPs are never run. */
int ft_numerics_new(const ft_model *m, const ft_fuser_def *fusers, uint32_t n_fusers,
                    int64_t world_size, const char *const *policy_names, uint32_t n_policies,
                    const ft_numerics_opts *opts, ft_numerics **out, ft_err *err);
void ft_numerics_free(ft_numerics *nx);

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
} ft_numerics_call;

/* Run one call if it is sampled (FT_OK also when it is skipped). Errors: FT_EINVAL (splits do
 * not match the fuser), FT_ENOMEM. */
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

typedef struct ft_numerics_result {
    uint64_t calls_seen;   /* grouped-MLP calls offered */
    uint64_t calls_run;    /* sampled and run */
    uint64_t fresh_raised; /* calls whose fresh plan itself raises */
    uint64_t mlp_runs;     /* forward(+backward) executions */
    uint64_t wall_ns;      /* time inside ft_numerics_run */
    ft_band fresh_err;     /* error of the fresh plans vs float64 */
    ft_band harmless_band; /* fused vs unfused, same quantization (controls and policies) */
    ft_band quant_band;    /* different quantization from the fresh plan */
    uint32_t n_policies;
    ft_numerics_policy pol[FT_NUMERICS_MAX_POLICIES];
} ft_numerics_result;

void ft_numerics_get(const ft_numerics *nx, ft_numerics_result *out);

/* Replay a whole trace with numerics: the engine runs with ropts (its per-call stream is taken
 * over; explain is ignored) and every grouped-MLP call it sees is offered to ft_numerics_run with
 * each policy's chosen plan and quantizer state (mirrored from the engine's per-call reset flags
 * and plans). rr_out (may be NULL) receives the ordinary replay result. One trace, one thread. */
int ft_numerics_replay_trace(ft_trace *t, const ft_replay_opts *ropts,
                             const ft_numerics_opts *nopts, ft_replay_result *rr_out,
                             ft_numerics_result *out, ft_err *err);
/* Text (json = 0) or one JSON object (json = 1). */
int ft_numerics_report(FILE *f, const ft_numerics_result *r, int json, ft_err *err);

#ifdef __cplusplus
}
#endif
#endif /* FT_NUMERICS_H */
