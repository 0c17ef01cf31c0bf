/*
 * ft_replayer.h - replay a trace through TransformerEngine's plan cache under several cache-key
 * policies at once: what each would decide, as mergeable counts and as a per-batch view.
 *
 * Policies are rows of one static table (policy.c): a key function, a recipe-state reset rule, a
 * store (none, single slot, dict with optional LRU capacity), and what reports say of it. For
 * every call and every chosen policy the engine decides reset or not, hit or build, the plan the
 * call runs, and against the oracle (the plan and quantizer state a fresh build from the call's
 * full state would give: tefuser's model, ft_tefuser.h) whether the plan is stale and with what
 * consequence.
 *
 * The engine produces; it never prints. Its output is the counts (ft_replay_result) and, after
 * each batch, one read-only view of the batch's decisions as columns (ft_replay_view), filled
 * only with what some consumer asked for (FT_VIEW_*): a replay nobody watches records nothing per
 * call. Writers (report/: per-call JSON, --explain, the HTML collector) and observers (numerics)
 * read the view; SQL pulls it. Filters are a call predicate the engine's counters apply
 * (ft_replay_filter): every call is replayed, only the matching ones are counted.
 *
 * One pass over the calls for all policies; memory grows with the number of distinct fusers,
 * recipes and keys, never with the number of calls. Per fuser it is 128 B per policy (its
 * state), 68 B for the oracle's cache, the model's 48 B plus 416 B per basic op (its parsed
 * attributes) plus the op-list JSON the trace holds, and 24 B (plus the map's slot) per plan a dict
 * store keeps: about 2.3 KB for a 3-op fuser under all seven policies, so 10^6 fusers take
 * about 2.3 GB. A fuser has at most FT_LIM_OPS ops (schema/ft_limits.h) and a trace at most
 * FT_LIM_FUSERS fusers, which bounds it. A view holds one batch (one chunk) of columns.
 *
 * Layers: ft_replay (one trace's engine, fed batch by batch; usable without a trace file) ->
 * ft_replay_cursor (the driver's pull form: one open trace through ft_reader, one view per next)
 * -> ft_replay_run (its push form, a loop over the pull form: every trace of an ft_replay_set,
 * each view handed to every observer, one thread per trace when nothing observes, reduced into
 * one ft_replay_result). report/ft_report.h formats results and views.
 */
#ifndef FT_REPLAYER_H
#define FT_REPLAYER_H

#include "ft_common.h"
#include "ft_trace.h"
#include "ft_tefuser.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- policy registry ---------------------------------------------------------------------- */
#define FT_MAX_POLICIES 16

typedef enum ft_store_kind {
    FT_STORE_NONE = 0, /* no plan is kept: every call builds */
    FT_STORE_SINGLE,   /* one plan per fuser */
    FT_STORE_DICT,     /* map key -> plan per fuser, unbounded or LRU with a capacity */
    FT_STORE_SHARED,   /* map key -> plan per op-list class, shared by every fuser with the same
                        * ops (the op-list signature: its canonical ops JSON), unbounded or LRU
                        * with a capacity per class; each fuser keeps its own recipe state */
} ft_store_kind;

uint32_t ft_policy_count(void);
const char *ft_policy_name(uint32_t idx);
const char *ft_policy_summary(uint32_t idx); /* one line: key, reset rule, store */
/* What reports say of a policy that is not a candidate like the others ("historical: ...",
 * "baseline: ..."), or NULL. */
const char *ft_policy_note(uint32_t idx);
/* Index of policy `name`; FT_ENOTFOUND (with the known names in err) otherwise. */
int ft_policy_find(const char *name, uint32_t *idx, ft_err *err);
/* Parse a comma-separated list into idx[] (at most FT_MAX_POLICIES, no duplicates, in the given
 * order): names, "all" (every policy defined so far, registry order) and definitions NAME=SPEC
 * (ft_policy_define). A list that names no built-in replays its user policies after every
 * built-in. */
int ft_policy_parse_list(const char *list, uint32_t *idx, uint32_t *n, ft_err *err);
/* The policy that reproduces TE's plan cache at ref (its row says so), -1 if none does. */
int ft_policy_of_te_ref(ft_te_ref ref);

/* ---- policies as specs (policy_spec.c, docs/policies.md) ---------------------------------- */
/* A policy is also a short spec, "NAME=KEY[;store=STORE][;reset=RESET][;build=key|reset]": the
 * key's fields joined by '+' (type, object, hash, attr:NAME, fusion, f, bo, hist, device,
 * env:KEY, ops, or none), the store (none, single, dict, lru:N; default dict), the reset rule
 * (always, key, te:pre3410, te:3410, te:3410-commit1, or fields joined by '+'; default te:3410)
 * and whether every reset builds. Every built-in carries its spec (ft_policy_spec); a user
 * policy defined from one joins the registry after the built-ins, found by name like them, and
 * replays through an interpreted loop that reads only integer ids per call. The registry holds
 * at most FT_MAX_POLICIES policies, built-ins included, so all of them can replay at once. It
 * is process-wide and not locked: define before any replay starts. */
uint32_t ft_policy_builtin_count(void);
/* "baseline", "historical", "user-defined", or NULL (a candidate like the others). */
const char *ft_policy_label(uint32_t idx);
/* The policy in the spec vocabulary, without "NAME=" (a user policy's canonical form). */
const char *ft_policy_spec(uint32_t idx);
/* The vocabulary in a few lines (for help and error messages). */
const char *ft_policy_vocabulary(void);
/* The recipe attributes attr:NAME can name, "a, b, ..." into buf[cap]; with near (may be NULL)
 * only those within two edits of it. */
void ft_policy_attr_names(char *buf, size_t cap, const char *near);
/* Define a user policy from "NAME=SPEC" (*idx: its registry index). The same definition again
 * gives the same index; another one under a taken name, a built-in's name or a bad spec is
 * FT_EINVAL naming the clause and listing the vocabulary; one too many FT_ERANGE. */
int ft_policy_define(const char *def, uint32_t *idx, ft_err *err);
/* Define every policy of a JSON document (text[len], source names it in errors): {"policies":
 * [...]} or an array; each policy {"name", "spec"} or {"name", "key", "store", "reset",
 * "build"} (key and reset as a '+'-joined string or an array of fields). idx[FT_MAX_POLICIES]
 * gets their indices, *n their number. Errors name the source, the entry and the field. */
int ft_policy_define_json(const char *text, size_t len, const char *source, uint32_t *idx,
                          uint32_t *n, ft_err *err);
/* Forget every user policy (their indices become free again). */
void ft_policy_forget_user(void);

/* ---- the decisions view --------------------------------------------------------------------- */
typedef struct ft_replay ft_replay;

/* What a consumer asks of the views (ft_replay_opts.needs, ft_replay_observer.needs). With none
 * a batch records nothing per call and gives no view (the counts' hot path); any of them gives
 * the call columns and every policy's decisions, and the two others add their columns. */
enum {
    FT_VIEW_DECISIONS = 1u << 0, /* the call columns and every policy's dec, plan, stale, q */
    FT_VIEW_SPLITS = 1u << 1,    /* the calls' split sizes (the reader decodes them) */
    FT_VIEW_CAUSES = 1u << 2,    /* why each build happened, and the fuser's previous call */
};

/* A policy's decision on a call. */
enum { FT_DEC_BUILD = 1u << 0, FT_DEC_RESET = 1u << 1 };

/* Why a policy built: what differs from the fuser's previous call (several may hold, in this
 * order), or that nothing did. Computed from the recipes' replay attributes and the boundary. */
enum {
    FT_WHY_FIRST = 1u << 0,      /* the fuser's first call */
    FT_WHY_TYPE = 1u << 1,       /* recipe type */
    FT_WHY_F = 1u << 2,          /* f, the first op requiring backward (grad mode) */
    FT_WHY_BO = 1u << 3,         /* backward_override */
    FT_WHY_HIST = 1u << 4,       /* DelayedScaling amax_history_len, same type */
    FT_WHY_ATTRS = 1u << 5,      /* other attribute values: same type, override and history */
    FT_WHY_OBJECT = 1u << 6,     /* another recipe object with the same attributes */
    FT_WHY_NOT_CACHED = 1u << 7, /* nothing changed: the key was not in the store (never
                                  * stored under this policy's key, or evicted) */
    FT_WHY_OPS = 1u << 8,        /* the fuser was redeclared with other op attributes (its
                                  * `of`): the previous call was the earlier declaration's */
};
#define FT_WHY_COUNT 9

/* One policy's columns of a view, [n] each. */
typedef struct ft_view_policy {
    uint32_t policy;      /* registry index */
    const uint8_t *dec;   /* FT_DEC_* */
    const uint32_t *plan; /* model plan id the call runs (ft_replay_model) */
    const uint8_t *stale; /* ft_stale against the fresh plan */
    const uint32_t *q;    /* quantizer-state id after the call (ft_replay_qstate) */
    const uint16_t *why;  /* FT_WHY_* where dec has FT_DEC_BUILD, else 0 (FT_VIEW_CAUSES; NULL
                           * otherwise) */
    /* FT_VIEW_CAUSES (NULL otherwise): the build whose plan the call runs, i.e. the call itself
     * when it builds, else the last build under the key it hit: its recipe, f and seq */
    const int32_t *src_recipe;
    const uint32_t *src_f;
    const int64_t *src_seq;
} ft_view_policy;

/* One batch's decisions, valid until the engine's next batch (read-only). Call j of the view is
 * record row[j] of the batch; backward records are not in it. */
typedef struct ft_replay_view {
    const ft_replay *engine; /* model, quantizer states, fusers (ft_replay_* below) */
    const ft_batch *batch;   /* the decoded chunk, for its other columns (device, mb, ns, ...) */
    uint32_t n;              /* calls */
    /* call columns, [n] each */
    const uint32_t *row;     /* position in batch */
    const int64_t *seq;      /* call sequence number */
    const uint32_t *fuser;   /* dense fuser index of its declaration (ft_replay_fuser: label,
                              * ops; a compact instance's template) */
    const int64_t *sid;      /* stream id of the call's fuser (the instance's own) */
    const int32_t *recipe;   /* dense recipe index, -1 = none */
    const int64_t *step;     /* training step, -1 when not recorded */
    const int32_t *phase;    /* index into batch->phases, -1 when not recorded */
    const uint32_t *f;       /* first_op_requiring_backward (ft_te_boundary) */
    const uint32_t *fresh;   /* the plan a fresh build gives (the oracle) */
    const uint32_t *fresh_q; /* quantizer-state id of a fresh fuser under the call's recipe */
    const int64_t *n_tokens; /* T, the split sizes' sum (the decoder checked it; 0 if none) */
    const uint8_t *match;    /* 1: the call passes ft_replay_opts.filter and is counted; NULL
                              * when there is no filter (every call is) */
    /* FT_VIEW_SPLITS: call j's split sizes are splits[splits_off[j] .. splits_off[j + 1]), each
     * >= 0 and summing to n_tokens[j] (checked once, by the decoder); NULL otherwise */
    const uint32_t *splits_off; /* [n + 1] */
    const int64_t *splits;
    /* FT_VIEW_CAUSES (NULL otherwise): the previous call of the fuser's OperationFuser (a
     * redeclaration continues the declaration it names with `of`), and what differs from it */
    const int32_t *prev_recipe; /* its recipe, -2 = none before (first sight) */
    const uint32_t *prev_f;     /* its f */
    const uint16_t *changed;    /* FT_WHY_FIRST .. FT_WHY_OBJECT, FT_WHY_OPS */
    /* 1: the call's fresh plan itself raises in TE, whatever the policy (such a call is never
     * stale: the fresh build would raise too) */
    const uint8_t *fresh_raises;
    uint32_t n_pol;
    ft_view_policy pol[FT_MAX_POLICIES]; /* slot order (ft_replay_result.pol) */
} ft_replay_view;

/* The engine behind a view (read them only from the thread that feeds the engine, e.g. inside an
 * observer): its fuser model (plan ids are its ids), the policies as registry indices in slot
 * order (returns their number), an interned quantizer state, a fuser as the trace declares it. */
const ft_model *ft_replay_model(const ft_replay *r);
uint32_t ft_replay_policies(const ft_replay *r, const uint32_t **idx);
const ft_qstate *ft_replay_qstate(const ft_replay *r, uint32_t id);
const ft_fuser_def *ft_replay_fuser(const ft_replay *r, uint32_t fuser);

/* ---- observers of the push driver ----------------------------------------------------------- */
/* The trace an observer is about to see. */
typedef struct ft_replay_input {
    uint32_t index;   /* position among the driver's traces */
    const char *path; /* as given; NULL for a trace handed in open (ft_replay_trace) */
    ft_trace *trace;  /* its header, fusers and recipes (read them, do not read its chunks) */
} ft_replay_input;

/* Something that watches a replay batch by batch (numerics, report writers). The driver calls
 * begin_fn once per trace after the engine is built, batch_fn with every batch's view (in trace
 * order, then call order), and end_fn after the trace's last batch, also when the replay failed
 * (rc != FT_OK: release only). A nonzero status stops the replay; the observer puts its detail
 * into err. Any function may be NULL. */
typedef struct ft_replay_observer {
    void *ctx;
    unsigned needs; /* FT_VIEW_* */
    int (*begin_fn)(void *ctx, const ft_replay_input *in, const ft_replay *engine, ft_err *err);
    int (*batch_fn)(void *ctx, const ft_replay_view *v, ft_err *err);
    int (*end_fn)(void *ctx, const ft_replay *engine, int rc, ft_err *err);
} ft_replay_observer;

/* ---- options ------------------------------------------------------------------------------ */
/* Which calls the counts cover (--fuser, --phase, --steps). Every call is still replayed, so the
 * cache sees the whole run; the results hold the matching calls' counts (calls, builds, hits,
 * resets, stale classes, qdrift, steps, the calls whose fresh plan raises). TE's raise texts of
 * stale plans and the captured agreement are left out under a filter; the backward records and
 * the captured fuse_ns totals cover the whole trace. */
typedef struct ft_replay_filter {
    const char *fuser_glob; /* fnmatch pattern on the fuser's label, or NULL */
    const char *phase;      /* or NULL */
    int has_steps;          /* steps [step_lo, step_hi] only (calls without a step are out) */
    int64_t step_lo, step_hi;
} ft_replay_filter;

typedef struct ft_replay_opts {
    const uint32_t *policies; /* [n_policies] registry indices; NULL/0 = all */
    uint32_t n_policies;
    uint32_t capacity;    /* LRU capacity of dict stores per fuser; 0 = unbounded */
    const ft_env_kv *env; /* [n_env] --env overrides of the trace header's env */
    uint32_t n_env;
    /* the policy whose decisions the captured run made; NULL = from the header (tefuser's
     * ft_te_captured_ref: its fuser_cache field, else te_version) */
    const char *captured;
    unsigned needs;                 /* FT_VIEW_*: what views carry (the push driver adds its
                                     * observers' needs) */
    const ft_replay_filter *filter; /* count only matching calls, or NULL */
    const ft_replay_observer *const *observers; /* [n_observers] the push driver's, in order */
    uint32_t n_observers;
    uint32_t n_threads;                 /* push driver: 0 = one per online core */
    struct ft_replay_result *per_trace; /* push driver: [n traces] each trace's own result
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
    uint64_t stale[FT_STALE_COUNT]; /* calls by class; [FT_STALE_NONE] = fresh plan, or a plan
                                     * that does what the fresh one does (both raise) */
    uint64_t qdrift;                /* fresh plan but quantizer state != a fresh one's */
    uint64_t loop_ns;               /* measured: time in this policy's per-call loop */
    uint64_t max_entries;           /* largest number of plans held by one fuser's store */
    uint64_t evictions;             /* LRU evictions */
    uint64_t cap_calls, cap_agree;  /* calls with captured `rebuilt`; agreeing build decisions */
    uint64_t transient_builds;      /* builds of transient fusers (ft_replay_result.transient) */
    int64_t first_disagree_seq;     /* -1 if none */
    ft_raise_text raises[FT_MAX_RAISE_TEXTS];
    ft_step_hist steps;
} ft_policy_result;

/* Transient fusers: instances that share their label and op list with another instance of the same
 * trace, as TE's transient OperationFuser([op]) per call of a standalone op does (a model's
 * persistent fusers have one instance per label), counted per label: "model.norm x 250,000". */
#define FT_TRANSIENT_GROUPS 8
typedef struct ft_transient_group {
    char label[96];                   /* the label ("" for fusers without one), cut at 95 bytes */
    uint64_t fusers, calls;           /* instances called; their calls (the filter's) */
    uint64_t builds[FT_MAX_POLICIES]; /* their builds, per policy slot */
} ft_transient_group;

typedef struct ft_replay_result {
    uint32_t n_traces;
    uint64_t calls, backwards;
    uint64_t n_fusers, n_recipes; /* summed over traces */
    uint64_t fusers_alive_max;    /* the most fuser instances alive at once (their state is the
                                   * replay's memory; not in the reports), summed over traces */
    uint64_t model_builds, model_build_ns; /* real fusion-pass builds made by the model, time */
    uint64_t oracle_ns;                    /* measured: f, fresh plan, fresh qstate per call */
    uint64_t wall_ns;                      /* whole replay incl. decoding */
    /* captured run (calls with `rebuilt` and `fuse_ns`) */
    int captured_policy;                     /* registry index, -1 if unknown / not captured */
    uint64_t cap_build_n, cap_build_fuse_ns; /* captured builds with fuse_ns: count, sum */
    uint64_t cap_hit_n, cap_hit_fuse_ns;     /* captured non-builds with fuse_ns */
    /* calls whose fresh plan itself raises in TE (whatever the policy), by message: they raise
     * under every policy, so no policy's stale classes count them */
    uint64_t fresh_raises;
    ft_raise_text fresh_raise_texts[FT_MAX_RAISE_TEXTS];
    /* transient fusers (above): in all, and the labels with the most instances, most first (the
     * others are counted in the totals only) */
    uint64_t transient_groups, transient_fusers, transient_calls;
    uint32_t n_transient;
    ft_transient_group transient[FT_TRANSIENT_GROUPS];
    uint32_t n_policies;
    ft_policy_result pol[FT_MAX_POLICIES];
} ft_replay_result;

void ft_replay_result_init(ft_replay_result *r, const uint32_t *policies, uint32_t n_policies);
/* Add src into dst (same policy list). */
int ft_replay_result_merge(ft_replay_result *dst, const ft_replay_result *src, ft_err *err);

/* ---- one trace's engine, fed batch by batch ----------------------------------------------- */
/* fusers/recipes/header as the trace declares them (strings must outlive the engine); the model
 * is built from them with opts->env. opts->observers are the driver's: the engine ignores them. */
int ft_replay_new(const ft_fuser_def *fusers, uint32_t n_fusers, const ft_recipe_def *recipes,
                  uint32_t n_recipes, const ft_header *header, const ft_replay_opts *opts,
                  ft_replay **out, ft_err *err);
/* Replay one batch (records in seq order; backward records are counted and skipped). *view (view
 * may be NULL) is the batch's view when opts->needs asked for one, else NULL. The driver's: read
 * traces through ft_replay_cursor or ft_replay_run instead. */
int ft_replay_batch(ft_replay *r, const ft_batch *b, const ft_replay_view **view, ft_err *err);
/* Copy the results so far into out (initialised by the engine). */
void ft_replay_get(const ft_replay *r, ft_replay_result *out);
void ft_replay_free(ft_replay *r);

/* ---- the driver, pull form: one open trace, a view per batch ------------------------------ */
typedef struct ft_replay_cursor ft_replay_cursor;
/* opts->needs says what the views carry (FT_VIEW_DECISIONS at least, for a view); observers are
 * ignored. t must outlive the cursor. */
int ft_replay_cursor_open(ft_trace *t, const ft_replay_opts *opts, ft_replay_cursor **out,
                          ft_err *err);
/* Replay only the chunks that can hold seqs <= seq_hi. Called again between batches it moves the
 * bound and the replay goes on from where it is (SQL's decisions under a join: one replay serves
 * the lookups of every outer row in seq order). */
int ft_replay_cursor_bound(ft_replay_cursor *c, int64_t seq_hi, ft_err *err);
/* Decode and replay the next batch: *view is its view (NULL without FT_VIEW_DECISIONS), valid
 * until the next call; *more is 0 at the end of the trace. Errors name the chunk. */
int ft_replay_cursor_next(ft_replay_cursor *c, const ft_replay_view **view, int *more, ft_err *err);
const ft_replay *ft_replay_cursor_engine(const ft_replay_cursor *c);
/* The results of the batches so far (wall_ns from the open). */
void ft_replay_cursor_result(const ft_replay_cursor *c, ft_replay_result *out);
void ft_replay_cursor_close(ft_replay_cursor *c);

/* ---- the driver, push form: traces opened once, observers fed every view ------------------ */
/* The traces of one command, each opened once (read-only) and kept open for every pass over
 * them (one file descriptor each). Errors name the file. */
typedef struct ft_replay_set ft_replay_set;
int ft_replay_set_open(const char *const *paths, uint32_t n_paths, ft_replay_set **out,
                       ft_err *err);
uint32_t ft_replay_set_count(const ft_replay_set *s);
ft_trace *ft_replay_set_trace(const ft_replay_set *s, uint32_t k);
const char *ft_replay_set_path(const ft_replay_set *s, uint32_t k);
void ft_replay_set_close(ft_replay_set *s);

/* Replay every trace of s into out (reduced); per trace, the observers see begin, every view, end.
 * With observers the traces run one after another, in order; without, on opts->n_threads
 * threads. Errors name the file. */
int ft_replay_run(const ft_replay_set *s, const ft_replay_opts *opts, ft_replay_result *out,
                  ft_err *err);
/* The same for one open trace, and for trace files opened and closed here. */
int ft_replay_trace(ft_trace *t, const ft_replay_opts *opts, ft_replay_result *out, ft_err *err);
int ft_replay_traces(const char *const *paths, uint32_t n_paths, const ft_replay_opts *opts,
                     ft_replay_result *out, ft_err *err);

#ifdef __cplusplus
}
#endif
#endif /* FT_REPLAYER_H */
