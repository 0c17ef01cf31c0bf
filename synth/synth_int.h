/*
 * synth_int.h - private to the synthetic scenario generator: synth_keys.c (keys, scenarios), and
 * the generator's files (synth.c: the driver and set-up; synth_route.c: PRNG and routing;
 * synth_recipes.c: recipe objects and their schedule; synth_pipeline.c: the passes and the
 * records they emit).
 *
 * A scenario is a named set of defaults for one generic Megatron-style training-loop generator;
 * every scenario accepts every key. synth_keys.c holds the key table (name, kind, range,
 * meaning, base default), the scenario table (name, summary, overrides of the base defaults)
 * and the parser that turns a scenario name plus `--set key=value` pairs into a synth_cfg.
 * The generator walks the resolved configuration and emits records into an ft_sink.
 */
#ifndef FT_SYNTH_INT_H
#define FT_SYNTH_INT_H

#include "ft_synth.h"
#include "ft_tefuser.h"

#include <stdint.h>

#define SYNTH_STR_MAX 256 /* longest string value of a key, incl. the terminator */

/* The resolved configuration of one synth run (see the key table in synth_keys.c). */
typedef struct synth_cfg {
    /* model shape */
    int64_t layers;              /* transformer layers (split evenly over pipeline stages) */
    int64_t experts;             /* experts per grouped MLP: GroupedLinear num_groups */
    int64_t tokens;              /* routed tokens per microbatch and MoE layer: sum of m_splits */
    int64_t hidden;              /* model width: fc1.in_features, fc2.out_features */
    int64_t ffn;                 /* expert FFN width: fc1.out = 2*ffn (SwiGLU), fc2.in = ffn */
    int64_t dense_ffn;           /* FFN width of dense layers and of the shared expert */
    int64_t dense_layers;        /* the first N layers use a dense MLP instead of experts */
    int64_t shared_expert;       /* bool: MoE layers also run a dense shared-expert MLP */
    int64_t tp;                  /* tensor-parallel size of the dense MLPs */
    double skew;                 /* Zipf exponent of expert popularity (0 = uniform) */
    double drift;                /* per-step log-normal random walk of expert popularity (sigma) */
    char routing[SYNTH_STR_MAX]; /* zipf | drift | hot | balanced | drop (synth_keys.c) */
    double alpha;                /* gamma shape of balanced/drop per-microbatch weights */
    int64_t hot;                 /* routing=hot: number of hot experts ... */
    double hot_share;            /* ... and the share of tokens they receive */
    double capacity;             /* routing=drop: capacity factor (cap = ceil(cf * tokens / E)) */
    double standalone; /* share of the calls made through standalone te.ops modules (an RMSNorm
                          and a router BasicLinear per layer, called in turn) */
    char standalone_fusers[SYNTH_STR_MAX]; /* transient (TE: OperationFuser([op]) per call, ended
                                              right after it) or persistent (one fuser each) */
    /* loop */
    int64_t steps, microbatches, stages;
    int64_t virtual_stages;    /* model chunks per stage (interleaved 1F1B when > 1) */
    int64_t recompute;         /* bool: full activation recompute */
    int64_t recompute_layers;  /* layers per checkpointed chunk */
    int64_t eval_every;        /* run an eval pass after every N-th step, 0 = never */
    int64_t eval_microbatches; /* microbatches of one eval pass */
    int64_t graphs;            /* bool: CUDA graphs (warm-up and capture, then replays) */
    int64_t graph_warmup;      /* eager warm-up iterations before the capture */
    /* recipes */
    char recipe[SYNTH_STR_MAX];        /* training recipe spec, e.g. "nvfp4:disable_rht=true" */
    char eval_recipe[SYNTH_STR_MAX];   /* "same", "bf16" or a recipe spec */
    char layer_recipes[SYNTH_STR_MAX]; /* comma list of per-layer specs (cycled), "" = global */
    int64_t bf16_first, bf16_last;     /* first/last N layers run with quantization disabled */
    int64_t switch_step;               /* step at which the global recipe becomes ... */
    char switch_recipe[SYNTH_STR_MAX]; /* ... a new object of this spec (-1 = never) */
    int64_t rht_flip_every;            /* flip NVFP4 disable_rht on the same object every N */
    int64_t detour_every;              /* every N steps a detour through another recipe ... */
    int64_t detour_steps;              /* ... lasting this many steps ... */
    char detour_recipe[SYNTH_STR_MAX]; /* ... of this spec; afterwards a new object ... */
    int64_t detour_flip_rht;           /* ... with NVFP4 disable_rht flipped (bool) */
    int64_t bo_every;                  /* change backward_override every N steps ... */
    char bo_values[SYNTH_STR_MAX];     /* ... cycling through these values ... */
    int64_t bo_mutate;                 /* ... on the same object (1) or one object each (0) */
    int64_t amax_every;                /* change DelayedScaling amax_history_len every N ... */
    char amax_lens[SYNTH_STR_MAX];     /* ... cycling through these lengths ... */
    int64_t amax_mutate;               /* ... on the same object (1) or one object each (0) */
    /* frozen layers */
    int64_t frozen_layers;          /* the first N layers are frozen ... */
    char frozen_ops[SYNTH_STR_MAX]; /* ... "all" parameters or only "fc1" (+ attention) ... */
    int64_t unfreeze_step;          /* ... until this step (-1 = never unfrozen) */
    /* header */
    char cc[SYNTH_STR_MAX], cudnn_frontend[SYNTH_STR_MAX], cublaslt[SYNTH_STR_MAX];
    char te_version[SYNTH_STR_MAX];
    int64_t fused_mlp;     /* NVTE_CUTEDSL_FUSED_GROUPED_MLP */
    int64_t disable_wgrad; /* NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP */
    int64_t rank, world_size;
    int64_t stage_only;           /* write only this stage's records (one rank's trace), -1 = all */
    int64_t timestamps;           /* bool: emit ns */
    char captured[SYNTH_STR_MAX]; /* none | te-pre3410 | te-3410: emit rebuilt and fuse_ns */
} synth_cfg;

/* Resolve scenario `name` with overrides into *cfg; *scenario_idx gets its table index.
 * Unknown scenario or key -> FT_ENOTFOUND, bad value -> FT_EINVAL / FT_ERANGE, naming it. */
int synth_cfg_resolve(const char *name, const ft_synth_param *params, uint32_t n_params,
                      synth_cfg *cfg, uint32_t *scenario_idx, ft_err *err);

/* ---- the generator (synth.c, synth_route.c, synth_recipes.c, synth_pipeline.c) ------------ */
/* Everything declared below is private to the generator's files. */
#pragma GCC visibility push(hidden)

/* ---- PRNG: xoshiro256** seeded with splitmix64 (synth_route.c) ---------------------------- */
typedef struct rng {
    uint64_t s[4];
} rng;

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

static inline double rng_unif(rng *r) /* [0, 1) */
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Approximately standard normal: Irwin-Hall sum of four 16-bit uniforms, rescaled. Cheap, smooth
 * enough for routing noise, tails bounded at about 3.5 sigma. */
static inline double rng_normal(rng *r)
{
    uint64_t v = rng_next(r);
    double s = (double)(v & 0xffff) + (double)((v >> 16) & 0xffff) + (double)((v >> 32) & 0xffff) +
               (double)(v >> 48);
    return (s / 65536.0 - 2.0) * 1.7320508075688772;
}

void synth_rng_seed(rng *r, uint64_t seed);

/* ---- recipe objects (synth_recipes.c) ----------------------------------------------------- */
enum { F_BOOL, F_INT, F_ENUM, F_BO, F_FIXED };
#define RF_MAX 16 /* fields per recipe type */
#define RV_MAX 48 /* JSON text of one field value */

enum { RT_DELAYED, RT_CURRENT, RT_MXFP8, RT_BLOCK, RT_NVFP4, RT_CUSTOM, RT_N };
_Static_assert(RT_DELAYED + 1 == FT_RT_DELAYED && RT_CURRENT + 1 == FT_RT_CURRENT &&
                   RT_MXFP8 + 1 == FT_RT_MXFP8 && RT_BLOCK + 1 == FT_RT_BLOCK &&
                   RT_NVFP4 + 1 == FT_RT_NVFP4 && RT_CUSTOM + 1 == FT_RT_CUSTOM,
               "synth's recipe types are the model's, less NoneType");

/* One Python recipe object: a type, an identity and its current attribute values. */
typedef struct robj {
    int type;                  /* RT_* */
    int64_t obj;               /* the identity a capture would record (id(recipe)) */
    int64_t decl;              /* stream id declared for the current attrs, 0 = none yet */
    char vals[RF_MAX][RV_MAX]; /* [n_fields] JSON text per field */
} robj;

/* ---- generator state ---------------------------------------------------------------------- */
enum { FK_GROUPED, FK_DENSE, FK_NORM, FK_ROUTER, FK_N };
#define SA_MAX 20 /* standalone calls of one layer pass (standalone <= 0.9, two fusers a layer) */

typedef struct sfuser {
    int64_t id;       /* stream id (a transient one's: of its latest call) */
    int kind;         /* FK_* */
    int32_t stage;    /* pipeline stage = device */
    int declared;     /* declaration emitted */
    int transient;    /* a standalone op's: a new fuser per call, ended after it */
    char label[64];   /* module path */
    ft_te_cache *cap; /* the captured TE's plan-cache state, NULL unless captured != none */
} sfuser;

typedef struct slayer {
    int32_t stage;
    int moe;           /* grouped MLP (else dense) */
    uint32_t fuser[2]; /* [n_fusers] experts or dense MLP first, then the shared expert */
    uint32_t n_fusers;
    uint32_t sa_fuser[2]; /* the standalone RMSNorm's and router's sfuser (when standalone > 0) */
    double sa_acc;        /* standalone calls owed to the share (Bresenham) */
    uint32_t sa_next;     /* the standalone module whose turn is next: 0 RMSNorm, 1 router */
    double *pop;          /* [experts] routing probabilities (moe); owns the block below */
    double *lam;          /* [experts] expected tokens per microbatch */
    double *sd;           /* [experts] binomial standard deviation of the count */
    double *elam;         /* [experts] exp(-lam), for Poisson inversion when lam < SMALL_MEAN */
    double *aprob;        /* [experts] alias table (Vose): acceptance probability ... */
    uint32_t *alias;      /* [experts] ... and alias */
    uint32_t *order; /* [experts] experts with lam >= SMALL_MEAN first (n_norm), then the rest */
    uint32_t n_norm;
    double sd2sum, lamsum; /* sums of sd^2 and of lam over the first n_norm */
    /* per step */
    int input_rg;                              /* training input requires grad */
    const uint8_t *rg_train[2], *rg_nograd[2]; /* op_rg per fuser */
    int bwd[2];                                /* the training call has f < n: its backward runs */
    const uint8_t *sa_rg;                      /* op_rg of the standalone ops (one op each) */
    int sa_bwd;                                /* their training calls' backward runs */
} slayer;

typedef struct decl {
    int64_t obj, id;
    char *attrs; /* JSON */
} decl;

#define MAX_CYCLE 16 /* values in bo_values / amax_lens */

typedef struct gen {
    synth_cfg c;
    const char *scen;
    ft_sink *sink;
    ft_err *err;
    rng r;           /* routing: popularity, split sizes */
    rng rt;          /* timestamp and fuse_ns noise */
    int64_t seq;     /* next seq */
    int64_t last_ns; /* last timestamp emitted */
    int64_t next_recipe_id, n_obj_made;
    uint32_t n_layers, n_stages, n_fusers;
    uint32_t n_virtual, n_chunks; /* model chunks per stage; chunks = stages * n_virtual */
    slayer *layers;               /* [n_layers] */
    sfuser *fusers;               /* [n_fusers] */
    uint32_t *chunk_lo;   /* [n_chunks+1] first layer of each model chunk (chunk c on stage c%S) */
    char *ops_json[FK_N]; /* per FK_*: canonical op list */
    uint32_t n_ops[FK_N];
    int64_t dur_fwd[FK_N]; /* modelled forward time per FK_*, ns */
    int64_t next_id;       /* next transient fuser's stream id */
    uint8_t *sa_n;         /* [layers][microbatches] standalone calls of the forward (recompute
                              repeats them) */
    int64_t *sa_bwd;       /* [layers][microbatches][SA_MAX] their calls whose backward runs */
    uint8_t *sa_k0;        /* [layers][microbatches] the forward's first standalone module */
    /* recipe objects and declarations */
    robj **objs;
    uint32_t n_objs, cap_objs;
    decl *decls;
    uint32_t n_decls, cap_decls;
    char attrs[RF_MAX * (RV_MAX + 40) + 8]; /* scratch: attrs JSON */
    /* schedule */
    robj *cur;        /* global training recipe (NULL = BF16) */
    robj *switch_obj; /* becomes cur at switch_step */
    robj *detour, *eval_obj;
    int eval_mode; /* 0 same, 1 bf16, 2 eval_obj */
    robj **zoo;    /* [n_zoo] per-layer recipes, NULL entries = BF16 */
    uint32_t n_zoo;
    int64_t detour_until; /* steps < detour_until run under detour */
    char bo_vals[MAX_CYCLE][16];
    uint32_t n_bo, bo_idx;
    robj *bo_cache[MAX_CYCLE];
    int64_t amax_vals[MAX_CYCLE];
    uint32_t n_amax, amax_idx;
    robj *amax_cache[MAX_CYCLE];
    /* per step */
    int64_t *splits;      /* [layers][microbatches][experts] drawn at the forward */
    int64_t *eval_splits; /* [experts] */
    int64_t *bwd_seq;     /* [layers][microbatches][2] call whose plan runs backward, -1 none */
    robj **fwd_rec;       /* [layers][microbatches] recipe object of the forward */
    /* pipeline */
    uint32_t *ops; /* [stages][2*mb] encoded (mb << 1 | backward) */
    uint32_t *n_sops, *idx;
    int64_t *finF, *finB, *free_at; /* [stages*mb], [stages*mb], [stages] */
    int64_t t;                      /* model time at the start of the next step, ns */
    uint32_t *scratch_u32;          /* [2*experts] alias-table work lists */
    int captured;                   /* 0 none, 1 te-pre3410, 2 te-3410 */
    const char *graph_phase;        /* during CUDA-graph warm-up/capture: the phase, else NULL */
    int64_t graph_iter;             /* ... and the iteration, recorded as mb */
    double *scratch_z;              /* [experts] normal deviates of one draw */
    int routing;                    /* R_* */
    double sa_ratio;                /* standalone calls per Sequential call: s / (1 - s) */
    double drift_sigma;             /* per-step popularity walk, 0 = none */
} gen;

/* Routing families (key routing): fixed popularity (zipf, drift, hot) or weights drawn afresh
 * per microbatch (balanced, drop). */
enum { R_ZIPF, R_DRIFT, R_HOT, R_BALANCED, R_DROP };

/* The sink refused what: the error naming it and the seq. */
static inline int synth_sink_fail(gen *g, int rc, const char *what, int64_t seq)
{
    const ft_err *se = g->sink->error_fn ? g->sink->error_fn(g->sink->ctx) : NULL;
    return ft_err_set(g->err, rc, "synth %s: sink rejected %s (seq %lld): %s", g->scen, what,
                      (long long)seq, se ? ft_err_msg(se) : ft_strerror(rc));
}

/* ---- synth_route.c: routing --------------------------------------------------------------- */
/* The tables routing needs, once per process. */
void synth_route_once(void);
/* A new MoE layer's popularity and routing tables (its arrays allocated). */
void synth_route_layer(gen *g, slayer *L);
/* Split sizes of one MoE layer's microbatch under the routing family. */
void synth_route_draw(gen *g, slayer *L, int64_t *out);
/* The router learns: each step every expert's popularity takes a log-normal step. */
void synth_drift_routing(gen *g);

/* ---- synth_recipes.c: recipe objects and what each step runs under -----------------------------
 */
/* The recipe types from tefuser's table, once per process. */
void synth_recipes_once(void);
/* Cross-key checks of the recipe keys and the recipe objects that exist from the start. */
int synth_setup_recipes(gen *g);
/* Declare o's current (obj, attrs) if the stream has not seen it. */
int synth_recipe_declare(gen *g, robj *o);
/* o's backward_override as ft_bo (0 None, 1 high_precision, 2 dequantized), 0 without one. */
int synth_bo_code(const robj *o);
/* o's amax_history_len, 0 unless it is DelayedScaling. */
int64_t synth_hist_len(const robj *o);
/* The recipe of layer l at a training (or eval) step, NULL for BF16. */
robj *synth_train_recipe(const gen *g, uint32_t l, int64_t step);
robj *synth_eval_recipe(const gen *g, uint32_t l, int64_t step);
/* Move the recipe schedule to this step (switches, detours, flips, cycles). */
int synth_schedule_step(gen *g, int64_t step);

/* ---- synth_pipeline.c: the training loop's passes and the records they emit ---------------- */
/* One training (or eval) pass of a step through every pipeline stage. */
int synth_run_pass(gen *g, int64_t step, int eval);
/* CUDA graphs: the warm-up iterations and the capture, at step 0. */
int synth_graph_setup(gen *g, int64_t step);

#pragma GCC visibility pop

#endif /* FT_SYNTH_INT_H */
