/*
 * ft_replayer.h - replay a trace through TransformerEngine's plan cache under several cache-key
 * policies at once, and report what each would do.
 *
 * Policies (DESIGN.md §Policies) are rows of one static table (policy.c): a key function, a
 * recipe-state reset rule and a store (none, single slot, dict with optional LRU capacity). For
 * every call and every chosen policy the engine decides reset or not, hit or build, the plan the
 * call runs, and against the oracle (the plan and quantizer state a fresh build from the call's
 * full state would give, via model.h) whether the plan is stale and with what consequence.
 *
 * One pass over the calls for all policies; memory grows with the number of distinct fusers,
 * recipes and keys, never with the number of calls. Per fuser it is 128 B per policy (its
 * state), 68 B for the oracle's cache, the model's 48 B plus 416 B per basic op (its parsed
 * attributes) plus the op-list JSON the trace holds, and 24 B (plus the map's slot) per plan a dict
 * store keeps: about 2.3 KB for a 3-op fuser under all seven policies, so 10^6 fusers take
 * about 2.3 GB. A fuser has at most FT_LIM_OPS ops (schema/ft_limits.h) and a trace at most
 * FT_LIM_FUSERS fusers, which bounds it. Per-call output (--per-call) and build explanations
 * (--explain) are streamed to files.
 *
 * Layers: ft_replay (one trace's engine; fed batch by batch, usable without a trace file) ->
 * ft_replay_trace (one trace file through ft_reader) -> ft_replay_traces (many files, one thread
 * per trace, reduced into one ft_replay_result); report/ft_report.h prints results.
 */
#ifndef FT_REPLAYER_H
#define FT_REPLAYER_H

#include "ft_common.h"
#include "ft_trace.h"
#include "ft_tefuser.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- policy registry ---------------------------------------------------------------------- */
#define FT_MAX_POLICIES 16

typedef enum ft_store_kind {
    FT_STORE_NONE = 0, /* no plan is kept: every call builds */
    FT_STORE_SINGLE,   /* one plan per fuser */
    FT_STORE_DICT,     /* map key -> plan per fuser, unbounded or LRU with a capacity */
} ft_store_kind;

uint32_t ft_policy_count(void);
const char *ft_policy_name(uint32_t idx);
const char *ft_policy_summary(uint32_t idx); /* one line: key, reset rule, store */
ft_store_kind ft_policy_store(uint32_t idx);
/* Index of policy `name`; FT_ENOTFOUND (with the known names in err) otherwise. */
int ft_policy_find(const char *name, uint32_t *idx, ft_err *err);
/* Parse "all" or a comma-separated list of names into idx[] (at most FT_MAX_POLICIES, no
 * duplicates, registry order kept for "all", given order otherwise). */
int ft_policy_parse_list(const char *list, uint32_t *idx, uint32_t *n, ft_err *err);

/* ---- per-call decisions ------------------------------------------------------------------- */
/* What one policy did on one call (the --per-call line as a struct, plus what the text omits). */
typedef struct ft_replay_call {
    int64_t seq;
    uint32_t fuser;       /* dense fuser index */
    int32_t recipe;       /* dense recipe index, -1 = none */
    uint32_t f;           /* first_op_requiring_backward */
    uint32_t slot;        /* index into ft_replay_result.pol (the policy's position) */
    uint32_t policy;      /* registry index */
    int build, reset;     /* the fusion passes ran / reset_recipe_state ran */
    uint32_t plan, fresh; /* model plan ids: the plan run, the oracle's */
    ft_stale stale;
    const ft_qstate *q; /* the policy's quantizer state after the call (valid during the call) */
    const ft_qstate *fresh_q; /* a fresh fuser's quantizer state under the call's recipe */
    const int64_t *splits;    /* [n_splits] the call's split sizes (observers that ask for them) */
    uint32_t n_splits;        /* 0: none recorded, or not asked for */
    int64_t step;             /* the call's training step, -1 when not recorded */
    const char *phase;        /* its phase ("fwd", "recompute", ...), NULL when not recorded */
} ft_replay_call;

/* ---- observers of the trace driver ---------------------------------------------------------- */
typedef struct ft_replay ft_replay;

/* Something that watches a replay call by call (numerical replay, reports). The driver calls
 * begin_fn once per trace after the engine is built, call_fn for every call and policy (call
 * order, then policy order; the structs are valid during the call only), and end_fn after the
 * trace's last call, also when the replay failed (rc != FT_OK: release only). A nonzero status
 * stops the replay; the observer puts its detail into err. */
enum { FT_OBSERVE_SPLITS = 1u << 0 }; /* calls carry split sizes (the reader decodes them) */
typedef struct ft_replay_observer {
    void *ctx;
    unsigned needs; /* FT_OBSERVE_* */
    int (*begin_fn)(void *ctx, const ft_replay *engine, ft_err *err);
    int (*call_fn)(void *ctx, const ft_replay_call *c, ft_err *err);
    int (*end_fn)(void *ctx, const ft_replay *engine, int rc, ft_err *err);
} ft_replay_observer;

/* ---- options ------------------------------------------------------------------------------ */
typedef struct ft_replay_opts {
    const uint32_t *policies; /* [n_policies] registry indices; NULL/0 = all */
    uint32_t n_policies;
    uint32_t capacity;    /* LRU capacity of dict stores per fuser; 0 = unbounded */
    const ft_env_kv *env; /* [n_env] --env overrides of the trace header's env */
    uint32_t n_env;
    /* the policy whose decisions the captured run made; NULL = from the header: its extra field
     * fuser_cache ("single" | "dict" | "type") if present, else te_version */
    const char *captured;
    FILE *per_call;                     /* one JSON line per call and policy, or NULL */
    FILE *explain;                      /* one line per build naming what changed, or NULL */
    const ft_replay_observer *observer; /* per-call decisions as structs (numerics), or NULL */
    uint32_t n_threads;                 /* ft_replay_traces: 0 = one per online core */
    struct ft_replay_result *per_trace; /* ft_replay_traces: [n_paths] each trace's own result
                                         * (per-rank rows), or NULL */
} ft_replay_opts;

/* ---- results (plain data, mergeable) ------------------------------------------------------ */
#define FT_STEP_BUCKETS    1024 /* per-step counters; bucket width doubles when steps outgrow it */
#define FT_MAX_RAISE_TEXTS 4

typedef struct ft_step_hist {
    int64_t width;                   /* steps per bucket (power of two), 1 initially */
    uint32_t n;                      /* buckets in use: bucket b = steps [b*width, +width) */
    uint64_t calls[FT_STEP_BUCKETS]; /* calls with a step in the bucket */
    uint64_t hits[FT_STEP_BUCKETS];  /* of those, plan-cache hits */
} ft_step_hist;

typedef struct ft_raise_text {
    char text[160]; /* TE's error message for stale plans that raise */
    uint64_t count;
} ft_raise_text;

typedef struct ft_policy_result {
    uint32_t policy;                /* registry index */
    uint64_t calls, builds, hits;   /* builds + hits == calls */
    uint64_t resets;                /* calls on which reset_recipe_state ran */
    uint64_t stale[FT_STALE_COUNT]; /* calls by class; [FT_STALE_NONE] = fresh plan */
    uint64_t qdrift;                /* fresh plan but quantizer state != a fresh one's */
    uint64_t loop_ns;               /* measured: time in this policy's per-call loop */
    uint64_t max_entries;           /* largest number of plans held by one fuser's store */
    uint64_t evictions;             /* LRU evictions */
    uint64_t cap_calls, cap_agree;  /* calls with captured `rebuilt`; agreeing build decisions */
    int64_t first_disagree_seq;     /* -1 if none */
    ft_raise_text raises[FT_MAX_RAISE_TEXTS];
    ft_step_hist steps;
} ft_policy_result;

typedef struct ft_replay_result {
    uint32_t n_traces;
    uint64_t calls, backwards;
    uint64_t n_fusers, n_recipes;          /* summed over traces */
    uint64_t model_builds, model_build_ns; /* real fusion-pass builds made by the model, time */
    uint64_t oracle_ns;                    /* measured: f, fresh plan, fresh qstate per call */
    uint64_t wall_ns;                      /* whole replay incl. decoding */
    /* captured run (calls with `rebuilt` and `fuse_ns`) */
    int captured_policy;                     /* registry index, -1 if unknown / not captured */
    uint64_t cap_build_n, cap_build_fuse_ns; /* captured builds with fuse_ns: count, sum */
    uint64_t cap_hit_n, cap_hit_fuse_ns;     /* captured non-builds with fuse_ns */
    /* calls whose fresh plan itself raises in TE (whatever the policy), by message */
    uint64_t fresh_raises;
    ft_raise_text fresh_raise_texts[FT_MAX_RAISE_TEXTS];
    uint32_t n_policies;
    ft_policy_result pol[FT_MAX_POLICIES];
} ft_replay_result;

void ft_replay_result_init(ft_replay_result *r, const uint32_t *policies, uint32_t n_policies);
/* Add src into dst (same policy list). */
int ft_replay_result_merge(ft_replay_result *dst, const ft_replay_result *src, ft_err *err);

/* ---- one trace's engine, fed batch by batch ----------------------------------------------- */

/* fusers/recipes/header as the trace declares them (strings must outlive the engine); the model
 * is built from them with opts->env. */
int ft_replay_new(const ft_fuser_def *fusers, uint32_t n_fusers, const ft_recipe_def *recipes,
                  uint32_t n_recipes, const ft_header *header, const ft_replay_opts *opts,
                  ft_replay **out, ft_err *err);
/* Replay one batch (records in seq order; backward records are counted and skipped). */
int ft_replay_batch(ft_replay *r, const ft_batch *b, ft_err *err);
/* Copy the results so far into out (initialised by the engine). */
void ft_replay_get(const ft_replay *r, ft_replay_result *out);
/* The engine's fuser model: the plan ids of ft_replay_call are its ids (read it only from the
 * thread that feeds the engine, e.g. inside an observer). */
const ft_model *ft_replay_model(const ft_replay *r);
/* The policies the engine runs, as registry indices in slot order; returns their number. */
uint32_t ft_replay_policies(const ft_replay *r, const uint32_t **idx);
void ft_replay_free(ft_replay *r);

/* ---- trace files (driver.c: the one trace driver) ------------------------------------------- */
/* Replay an open trace; results into out. */
int ft_replay_trace(ft_trace *t, const ft_replay_opts *opts, ft_replay_result *out, ft_err *err);
/* Replay several trace files (one per rank), one thread per trace, reduced into out. With
 * per_call, explain or an observer set, traces run one after another so that the streams stay
 * in order. Errors name the file. */
int ft_replay_traces(const char *const *paths, uint32_t n_paths, const ft_replay_opts *opts,
                     ft_replay_result *out, ft_err *err);
/* The policy whose decisions the captured run made, from the header's te_version: -1 if
 * unknown. Versions that name PR 3410 ("3410") or are >= 2.21 -> te-3410, else te-pre3410. */
int ft_replay_captured_policy(const char *te_version);

#ifdef __cplusplus
}
#endif
#endif /* FT_REPLAYER_H */
