/*
 * ft_tefuser.h - the fuser model: what TransformerEngine 2.20's OperationFuser would build for a
 * call, independent of any cache policy (docs/fuser-model.md).
 *
 * - Recipes: the six recipe types with their attributes, a canonical 64-bit hash of (type, every
 *   attribute), and the flags the quantizer-state model needs.
 * - Ops and fusion rules: the basic-op catalog, the registered fusion functions as rows of one
 *   table (pass, window, gate, the attributes the gate reads), the three passes in registry order
 *   with greedy windows, and the map-to-basic-ops validation.
 * - Plans: a built plan is interned; equal topology (same fused ops over the same basic-op index
 *   runs, forward and backward) gives the same plan id, so policies compare plans by id.
 * - Quantizer state: what reset_recipe_state leaves in a fuser's quantizers ("Quantizer state").
 * - Stale classification: what running plan P with quantizer state Q would do, compared with the
 *   fresh plan ("Run-time checks", "Stale plans").
 *
 * The model is immutable after ft_model_new except for the plan intern table, which grows on
 * ft_model_build; builds are memoised by (op-list class, recipe, f), so repeated builds, and the
 * builds of every other fuser with the same ops, are lookups.
 * One model is used by one thread at a time.
 */
#ifndef FT_TEFUSER_H
#define FT_TEFUSER_H

#include "ft_common.h"
#include "ft_decl.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- recipes ------------------------------------------------------------------------------ */
typedef enum ft_recipe_type {
    FT_RT_NONE = 0, /* quantization disabled (recipe null): Python NoneType */
    FT_RT_DELAYED,  /* DelayedScaling */
    FT_RT_CURRENT,  /* Float8CurrentScaling */
    FT_RT_MXFP8,    /* MXFP8BlockScaling */
    FT_RT_BLOCK,    /* Float8BlockScaling */
    FT_RT_NVFP4,    /* NVFP4BlockScaling */
    FT_RT_CUSTOM,   /* CustomRecipe */
    FT_RT_COUNT
} ft_recipe_type;

typedef enum ft_bo { FT_BO_NONE = 0, FT_BO_HIGH_PRECISION, FT_BO_DEQUANTIZED } ft_bo;

/* TE's class name of a recipe type ("None" for FT_RT_NONE), and a backward_override value as
 * Python prints it ("None", "high_precision", "dequantized"). */
const char *ft_recipe_type_name(ft_recipe_type t);
const char *ft_bo_name(ft_bo bo);

/* The dataclass fields of a recipe type (TE's one recipe table, recipe.c), in declaration
 * order, as a new object holds them: for whoever makes recipe objects (synth). */
typedef enum ft_rf_kind {
    FT_RF_BOOL = 0,
    FT_RF_INT,
    FT_RF_ENUM,     /* one of values[] (a JSON string) */
    FT_RF_OPT_ENUM, /* null or one of values[] (backward_override) */
    FT_RF_JSON,     /* any JSON value; values[] lists what the constructor accepts, if it says */
} ft_rf_kind;
typedef struct ft_recipe_field {
    const char *name;
    ft_rf_kind kind;
    const char *init;          /* a new object's value as canonical JSON text, as recorded */
    int settable;              /* a constructor argument (else fixed by the class) */
    int derived;               /* set by __post_init__; a capture records it only if it can */
    const char *const *values; /* enum values the constructor accepts, NULL-terminated, or NULL */
} ft_recipe_field;
/* Number of fields of type t (0 for FT_RT_NONE or an unknown type), and field i of them. */
uint32_t ft_recipe_n_fields(ft_recipe_type t);
int ft_recipe_field_at(ft_recipe_type t, uint32_t i, ft_recipe_field *out);

typedef struct ft_recipe_model {
    ft_recipe_type type; /* TE's recipe class, or a subclass's TE base: what fusion checks see */
    int32_t cls;         /* the recipe's own class, as type(recipe) keys TE's plans: == type for
                            TE's classes, FT_RT_COUNT + k for the k-th distinct subclass */
    ft_bo bo;            /* backward_override */
    int64_t obj;         /* Python object identity (recipe-object policy) */
    int64_t amax_history_len; /* DelayedScaling only, else 0 */
    uint64_t hash;            /* canonical hash of type + every attribute (recipe-hash) */
    /* what the quantizer-state model and run-time checks read */
    uint8_t disable_rht, disable_sr, disable_2d, row_scaled, four_over_six; /* NVFP4 */
    uint8_t enable_2d;                                                      /* MXFP8 */
    uint8_t fp8_format; /* 0 E4M3, 1 HYBRID, 2 E5M2 */
    /* NVFP4 quantizer flags as RecipeState.create bakes them: from the recipe's derived QParams
     * (fp4_quant_fwd_inp/fwd_weight/bwd_grad) when the capture recorded them, else derived from
     * disable_rht / disable_stochastic_rounding / disable_2d_quantization as __post_init__ does */
    uint8_t q_rht, q_sr, q_2d;
    uint64_t qhash; /* hash of every attribute baked into quantizers (qstate comparison) */
} ft_recipe_model;

/* ---- versions (PEP 440, as packaging.version.Version parses and orders them) ------------- */
/* The one place versions are compared (docs/fuser-model.md, "Versions"): cudnn_frontend as TE's
 * `PkgVersion(...) >= PkgVersion("1.23.0")` sees it, and te_version. Release segments of any
 * length up to FT_VERSION_SEGMENTS, an epoch, a/b/rc pre-releases, post and dev releases and a
 * local label; spellings PEP 440 normalises (a leading "v", "alpha", "c", "pre", "rev", "-1" as a
 * post release, "_" and "-" as separators, any case, surrounding spaces) are accepted. */
#define FT_VERSION_SEGMENTS 16
#define FT_VERSION_LOCAL    64
typedef struct ft_version {
    int64_t epoch;                        /* N! before the release, 0 without */
    uint32_t n_release;                   /* release segments given (>= 1) */
    int64_t release[FT_VERSION_SEGMENTS]; /* as given; trailing zeros do not count when compared */
    int8_t pre_kind;                      /* -1 no pre-release, 0 a, 1 b, 2 rc */
    int64_t pre;                          /* pre-release number (0 when implicit) */
    int64_t post;                         /* post-release number, -1 without */
    int64_t dev;                          /* dev-release number, -1 without */
    char local[FT_VERSION_LOCAL];         /* local label, lower case, '.'-separated; "" without */
} ft_version;
/* Parse s; FT_EINVAL when it is not a PEP 440 version (packaging raises InvalidVersion), FT_ERANGE
 * when a number exceeds INT64_MAX, a release has more than FT_VERSION_SEGMENTS segments or the
 * local label more than FT_VERSION_LOCAL - 1 characters. */
int ft_version_parse(const char *s, ft_version *out);
/* < 0, 0, > 0 as a sorts before, equal to, after b (packaging's ordering: 1.0.dev0 < 1.0a1 <
 * 1.0rc1 < 1.0 < 1.0+local < 1.0.post1 = 1.0-1 < 1.0.0.1). */
int ft_version_cmp(const ft_version *a, const ft_version *b);
/* Both strings parsed and compared: FT_OK and *cmp, or the parse error of the first bad one. */
int ft_version_cmp_str(const char *a, const char *b, int *cmp);
/* Normalised text of v (PEP 440's canonical form, e.g. "1!2.0rc1.post2.dev3+ubuntu.1"). */
int ft_version_text(const ft_version *v, char *buf, size_t cap);

/* ---- environment -------------------------------------------------------------------------- */
/* An override of the trace's env (--env KEY=VALUE): value "" removes the key (the model then
 * assumes TE's default, and says so), "null" sets it to JSON null (captured as absent: e.g.
 * cudnn_frontend not installed, no CUDA device), anything else is the value as text. */
typedef struct ft_env_kv {
    const char *key, *value; /* an override, e.g. {"device_cc", "9.0"} */
} ft_env_kv;

/* What the capture's header says that the model reads (docs/capture-format.md, "What the model
 * reads"): the env object, the fields the format does not name (extra_json: te_fusions, the
 * registered fusion passes), and rank / world_size. A NULL capture is an empty header. */
typedef struct ft_model_capture {
    const char *env_json;   /* header env object, or NULL */
    const char *extra_json; /* header fields the format does not name, or NULL */
    int has_rank, has_world_size;
    int64_t rank, world_size;
} ft_model_capture;

/* ---- the model ---------------------------------------------------------------------------- */
typedef struct ft_model ft_model;

/* The env keys the model reads (the header's env and --env): the i-th one, NULL past the last;
 * and whether key is one of them (a key it does not read changes nothing). */
const char *ft_env_read_key(uint32_t i);
int ft_env_key_is_read(const char *key);

/* Build the model of a trace's fusers and recipes. cap is what the header says (may be NULL);
 * overrides (may be NULL) replace env keys (--env KEY=VALUE, see ft_env_kv). Bad ops or attrs
 * JSON, or a header whose env contradicts it -> FT_EINVAL naming the fuser/recipe id and field. */
int ft_model_new(const ft_fuser_def *fusers, uint32_t n_fusers, const ft_recipe_def *recipes,
                 uint32_t n_recipes, const ft_model_capture *cap, const ft_env_kv *overrides,
                 uint32_t n_overrides, ft_model **out, ft_err *err);
void ft_model_free(ft_model *m);

/* World size and rank the model uses: --env, else the header's env, else the header's fields,
 * else 1 and 0. No fusion gate reads the rank; it is kept for reports. */
int64_t ft_model_world_size(const ft_model *m);
int64_t ft_model_rank(const ft_model *m);

/* What the model could not read from the capture and what it did about it, for the reports
 * (one list per model, in a fixed order). */
typedef enum ft_model_note_kind {
    FT_NOTE_ASSUMED = 0,    /* a field the model reads was absent: text says what it assumed */
    FT_NOTE_UNKNOWN_FUSION, /* TE registered a fusion the model does not know (field = its name) */
    FT_NOTE_REGISTRY,       /* the captured registry and the model's own check disagree */
    FT_NOTE_ATTR_CHANGE,    /* a fuser's op attributes changed after its first call */
} ft_model_note_kind;
typedef struct ft_model_note {
    ft_model_note_kind kind;
    const char *field; /* "env.device_cc", "te_fusions", "fuser 3 op 0 tensor_parallel_size", or
                          the unknown fusion's name as TE registered it */
    const char *pass;  /* FT_NOTE_UNKNOWN_FUSION: "forward_backward", "forward" or "backward" */
    const char *text;  /* in words, one sentence without a trailing period */
} ft_model_note;
uint32_t ft_model_n_notes(const ft_model *m);
const ft_model_note *ft_model_note_at(const ft_model *m, uint32_t i); /* NULL past the end */

uint32_t ft_model_n_fusers(const ft_model *m);
/* The fuser index of the first declaration of fuser's OperationFuser instance: itself, or for a
 * redeclaration after its op attributes changed (ft_fuser_def.of) the fuser it continues, which
 * owns the plan cache that TE keeps across the change. */
uint32_t ft_model_fuser_instance(const ft_model *m, uint32_t fuser);
uint32_t ft_model_n_ops(const ft_model *m, uint32_t fuser);
/* The op-list classes: fusers whose ops JSON is the same text share one (parsed once, their
 * fusion key, builds and classifications shared), numbered 0.. in first-declaration order. What
 * the model holds per fuser beyond its class is 16 bytes. */
uint32_t ft_model_n_lists(const ft_model *m);
uint32_t ft_model_fuser_list(const ft_model *m, uint32_t fuser);
/* recipe index -1 gives the FT_RT_NONE model. */
const ft_recipe_model *ft_model_recipe(const ft_model *m, int32_t recipe);
/* Canonical encoding of a recipe (type and every attribute, defaults filled), hashed into
 * ft_recipe_model.hash; recipe -1 gives "None". */
const char *ft_model_recipe_canon(const ft_model *m, int32_t recipe);

/* The recipe's own class, as type(recipe) names it (a subclass's own name, not its TE base's;
 * "None" for recipe -1), into buf[cap]. */
void ft_model_recipe_class(const ft_model *m, int32_t recipe, char *buf, size_t cap);
/* What differs between recipes a and b, attribute by attribute over their canonical encodings
 * (every field, defaults filled, unknown fields too), in field order: each attribute's name and
 * both values as Python prints them (False, None, 'E4M3', 16; "(absent)" for a field one of them
 * lacks). When their classes differ, the one change is the class (name "type"). Returns how many
 * differ; out[] holds the first cap (may be NULL with cap 0). */
typedef struct ft_recipe_change {
    char name[64];
    char from[96], to[96];
} ft_recipe_change;
uint32_t ft_model_recipe_diff(const ft_model *m, int32_t a, int32_t b, ft_recipe_change *out,
                              uint32_t cap);

/* Build (or look up) the plan TE would build for fuser under recipe with boundary f
 * (docs/fuser-model.md, "Building a plan"). *plan_id is an interned id; plans with identical
 * topology share an id; fusers of one op-list class share their builds (memoised by class). A build
 * that TE would reject (mismatch after fusing) is FT_EUNSUPPORTED with a message. */
int ft_model_build(ft_model *m, uint32_t fuser, int32_t recipe, uint32_t f, uint32_t *plan_id,
                   ft_err *err);
/* Builds that ran the fusion passes so far (memo hits of ft_model_build not counted). */
uint64_t ft_model_n_built(const ft_model *m);
/* Canonical plan text, e.g. "fwd[GroupedMLP_CuTeGEMMGLU(0-2)] bwd[GroupedMLP_CuTeGEMMGLU(0-2)]":
 * the forward then the backward op list (both in forward order), comma separated; a basic op
 * is Class(i), a fused op FusedClass(lo-hi) over basic ops lo..hi (FusedClass(i) over one). */
const char *ft_model_plan_text(const ft_model *m, uint32_t plan_id);

/* Why a fusion whose op types the fuser has does not happen under recipe (-1: none): the first
 * such rule (in registry order) that a fresh plan does not apply, and every check that blocks it,
 * in one answer: each failing check of the import-time registration (env: the TE flag, the device
 * capability, the cuDNN frontend, its wrappers' imports), then each failing check of the gate
 * (an op attribute, the recipe, the env), as if the rule were registered, each with the value it
 * read, what it needs and where the value came from (the capture, --env, or a default the model
 * assumed because the capture lacks it). 1 when found, 0 when every rule that could apply does
 * (or none could). */
enum { FT_UNFUSED_MAX_BLOCKS = 12 };
typedef struct ft_unfused_block {
    char what[160];   /* the value read: "env device_cc = '9.0'", "op 1 (ScaledSwiGLU)
                       * glu_interleave_size = 16", "recipe 0 (NVFP4BlockScaling) disable_rht =
                       * True" */
    char need[96];    /* what the check needs: "10.x (SM100)", "32" */
    char source[128]; /* "the capture", "--env", or "assumed: ..." (what TE's default is) */
} ft_unfused_block;
typedef struct ft_unfused_why {
    const char *func;  /* TE fusion function, e.g. "fuse_ops" */
    const char *fused; /* the fused op it would build, e.g. "GroupedMLP_CuTeGEMMGLU" */
    char reason[1024]; /* the blocks in one sentence (cut short if they do not fit) */
    uint32_t n_blocks; /* the registration's failing checks first, then the gate's */
    uint32_t n_registration;
    ft_unfused_block block[FT_UNFUSED_MAX_BLOCKS];
    int env_empty; /* the capture recorded an empty env: every env value is assumed */
} ft_unfused_why;
int ft_model_why_unfused(const ft_model *m, uint32_t fuser, int32_t recipe, ft_unfused_why *out);
/* Whether the plan has a fused grouped MLP (used by classification and reports). */
int ft_model_plan_fused_mlp(const ft_model *m, uint32_t plan_id);
/* Number of distinct plans interned so far. */
uint32_t ft_model_n_plans(const ft_model *m);

/* The grouped MLP a fuser holds: its first GroupedLinear -> activation -> GroupedLinear window
 * with consistent dimensions (what numerical replay runs). */
typedef enum ft_mlp_act {
    FT_MLP_SWIGLU = 0,     /* SwiGLU / ScaledSwiGLU */
    FT_MLP_CLAMPED_QGEGLU, /* ClampedSwiGLU / ScaledClampedQGeGLU */
    FT_MLP_SRELU,          /* SReLU / ScaledSReLU (unary) */
} ft_mlp_act;
typedef struct ft_grouped_mlp {
    uint32_t first;              /* op index of FC1 */
    uint32_t groups;             /* num_groups (experts) */
    int64_t k1, n1, k2, n2;      /* FC1 in/out features, FC2 in/out features */
    uint8_t act;                 /* ft_mlp_act */
    uint8_t scaled;              /* the activation multiplies by routing probabilities */
    uint8_t bias1, bias2;        /* FC1 / FC2 have a bias */
    uint8_t scale_bias;          /* FC2's bias is scaled by the probabilities */
    uint8_t interleave;          /* GLU interleave size (0 or 32) */
    double limit, alpha, offset; /* clamped GLU parameters */
} ft_grouped_mlp;
/* 1 and *out filled when the fuser holds such a window, else 0. */
int ft_model_grouped_mlp(const ft_model *m, uint32_t fuser, ft_grouped_mlp *out);

/* Key of the fusion-attrs policy: a hash of exactly the recipe, op and environment attributes
 * that the fusion rules applicable to this fuser declare they read (derived from the rule table,
 * not hand-written). The boundary f is added by the policy. */
uint64_t ft_model_fusion_key(const ft_model *m, uint32_t fuser, int32_t recipe);
/* The attributes the fusion-attrs key of this fuser is made of, e.g.
 * "recipe.is_none,recipe.mxfp8(),...,op[0].in_features,...,env.device_cc" (for reports). */
const char *ft_model_fusion_key_attrs(const ft_model *m, uint32_t fuser);

/* ---- quantizer state (docs/fuser-model.md, "Quantizer state") ---------------------------- */
/* Compare states with ft_qstate_equal and intern them with ft_qstate_hash only: qhash (every
 * other attribute baked into the quantizers) is part of the state, and fields may be added. */
typedef struct ft_qstate {
    int8_t cls;   /* recipe type the quantizers were built for; -1 = none built yet/reset */
    uint8_t rht;  /* NVFP4: input/grad quantizers with RHT */
    uint8_t sr;   /* NVFP4: grad quantizers with stochastic rounding */
    uint8_t twod; /* NVFP4 2D weight tiles / MXFP8 2D weights */
    uint8_t row_scaled, four_over_six;
    uint8_t fp8_format;
    int64_t hist_len; /* DelayedScaling amax history length in the buffers */
    uint64_t qhash;   /* ft_recipe_model.qhash of the recipe the quantizers were built from */
} ft_qstate;

/* The initial state of a fresh fuser (no quantizers). */
void ft_qstate_init(ft_qstate *q);
/* Apply reset_recipe_state(recipe) to q as TE does: quantizers rebuilt only when none exist, on
 * a class change, or for DelayedScaling (re-made); reset(None) clears them; a same-class switch
 * of a non-delayed recipe keeps the flags baked into the existing quantizers. */
void ft_model_reset(const ft_model *m, ft_qstate *q, int32_t recipe);
/* The quantizer state a brand-new fuser would have after its first reset under recipe. */
void ft_model_fresh_qstate(const ft_model *m, int32_t recipe, ft_qstate *q);
/* 1 if the two states quantize identically (the engine reports quantizer-state drift, e.g. a
 * same-type NVFP4 switch that keeps RHT quantizers, separately from plan staleness). */
int ft_qstate_equal(const ft_qstate *a, const ft_qstate *b);
/* Hash over exactly what ft_qstate_equal compares (equal states hash equal); for interning. */
uint64_t ft_qstate_hash(const ft_qstate *q);

/* The quantizers a call's grouped MLP runs with (what numerical replay emulates): the kind the
 * recipe type means, the FP8 element types its fp8_format means, and the flags the quantizer
 * state holds. */
typedef enum ft_qkind {
    FT_QK_NONE = 0,    /* no quantization: outside autocast (recipe None), or CustomRecipe (its
                          qfactory is unknown) */
    FT_QK_FP8_DELAYED, /* Float8Quantizer with an amax history (DelayedScaling) */
    FT_QK_FP8_CURRENT, /* Float8CurrentScalingQuantizer */
    FT_QK_FP8_BLOCK,   /* Float8BlockQuantizer (Float8BlockScaling): power-of-two scales */
    FT_QK_MXFP8,       /* MXFP8Quantizer */
    FT_QK_NVFP4,       /* NVFP4Quantizer */
} ft_qkind;
typedef struct ft_quantizers {
    ft_qkind kind;
    uint8_t fwd_e5m2;    /* inputs and weights are E5M2 (Format.E5M2), else E4M3 */
    uint8_t bwd_e5m2;    /* gradients are E5M2 (Format.HYBRID or E5M2), else E4M3 */
    uint8_t rht;         /* NVFP4: RHT on the columnwise copies of inputs and gradients */
    uint8_t sr;          /* NVFP4: stochastic rounding of the gradients */
    uint8_t two_d;       /* NVFP4 16x16 / MXFP8 32x32 weight tiles */
    uint8_t pow2_scales; /* scales rounded down to powers of two */
} ft_quantizers;
/* The quantizers of a call under recipe (dense index, -1 none) whose fuser holds state q (may be
 * NULL: none): the kind and fp8_format are those q's quantizers were built for, or the recipe's
 * when q holds none; RHT, SR and 2D are the flags q holds (none without q). Under recipe None the
 * kind is FT_QK_NONE and the element types are still those of q (or of None). */
void ft_model_quantizers(const ft_model *m, int32_t recipe, const ft_qstate *q, ft_quantizers *out);

/* ---- TE's plan cache at each ref (te_cache.c) --------------------------------------------- */
/* first_op_requiring_backward: n_ops when grad is off; under grad 0 when the input requires
 * grad, else the first op whose parameters or extra inputs require grad (first_rg, n_ops if
 * none). A boundary f < n_ops means the backward runs. */
static inline uint32_t ft_te_boundary(uint32_t n_ops, int grad, int input_rg, uint32_t first_rg)
{
    return !grad ? n_ops : input_rg ? 0 : first_rg;
}

typedef enum ft_te_ref {
    FT_TE_PRE3410 = 0,  /* before PR 3410: one plan, keyed by (type, f, backward_override) */
    FT_TE_3410,         /* PR 3410's head: a dict of plans keyed by (type, f, backward_override) */
    FT_TE_3410_COMMIT1, /* PR 3410's first commit: one plan keyed by (type, backward_override) */
} ft_te_ref;

#define FT_TE_CACHE_KEYS 128 /* dict keys kept (7 types x boundaries x 3 overrides in practice) */
/* What one OperationFuser keeps between calls, as far as the cache decisions go. */
typedef struct ft_te_cache {
    ft_te_ref ref;
    int seen;     /* recipe_type is no longer None (a first call happened) */
    int type, bo; /* saved recipe type (ft_recipe_type) and backward_override (ft_bo) */
    uint32_t f;   /* saved boundary (the single-slot refs) */
    int64_t hist; /* saved amax_history_len (DelayedScaling; 0 otherwise) */
    uint32_t n_keys;
    struct {
        int type, bo;
        uint32_t f;
    } keys[FT_TE_CACHE_KEYS]; /* FT_TE_3410: the keys of the cached plans */
} ft_te_cache;

void ft_te_cache_init(ft_te_cache *c, ft_te_ref ref);
/* One maybe_fuse_ops call with recipe type `type` (FT_RT_NONE without a recipe), backward
 * override `bo`, amax_history_len `hist` (0 unless DelayedScaling) and boundary f: *reset (may
 * be NULL) = reset_recipe_state ran; returns 1 when the fusion passes ran (a plan was built). */
int ft_te_cache_call(ft_te_cache *c, int type, int bo, int64_t hist, uint32_t f, int *reset);
/* The ref whose plan cache a captured run had, from its header: the extra field fuser_cache
 * ("single": before PR 3410, "dict": PR 3410's head, "type": its first commit) when present,
 * else te_version (ft_version_parse): a version naming PR 3410 ("3410") or 2.21 and later (its
 * pre-releases included) had PR 3410's head, any other one the cache before it. Returns 0 when
 * neither says (no version), 1 with *out set. extra_json and te_version may be NULL. */
int ft_te_captured_ref(const char *extra_json, const char *te_version, ft_te_ref *out);

/* ---- stale plans -------------------------------------------------------------------------- */
typedef enum ft_stale {
    FT_STALE_NONE = 0, /* chosen plan == fresh plan */
    FT_STALE_HARMLESS, /* differs, same work and numerics */
    FT_STALE_SLOWER,   /* unfused where the fresh plan fuses */
    FT_STALE_QUANT,    /* runs with a quantization different from the fresh plan's */
    FT_STALE_RAISES,   /* TE would raise (see *error_text) */
    FT_STALE_COUNT
} ft_stale;
const char *ft_stale_name(ft_stale s); /* "none", "harmless", "slower", "quant", "raises" */

/* When chosen == fresh the plan is not stale (FT_STALE_NONE), whatever q holds.
 * Classify running `chosen` with quantizer state q under the call's recipe, against `fresh`
 * (built from the call's full state, run with ft_model_fresh_qstate). n_tokens is the call's
 * token count (sum of split sizes; < 0 if unknown); f its boundary: backward-only run-time
 * errors (e.g. NVFP4 plain FC2 bias in the fused backward) count only when f < n_ops.
 * *error_text (may be NULL) receives TE's error message for FT_STALE_RAISES, else NULL. Pure
 * function; memoise in the caller if hot. */
ft_stale ft_model_classify(const ft_model *m, uint32_t fuser, int32_t recipe, uint32_t chosen,
                           const ft_qstate *q, uint32_t fresh, int64_t n_tokens, uint32_t f,
                           const char **error_text);
/* Whether running plan with quantizer state q under recipe raises in TE, stale or not (e.g. the
 * fresh plan itself: an unfused ScaledSReLU(activation_recompute_in_mlp=True)). 1 and *text =
 * TE's message, or 0 and *text = NULL. Texts live as long as the model. */
int ft_model_run_raises(const ft_model *m, uint32_t fuser, int32_t recipe, uint32_t plan,
                        const ft_qstate *q, int64_t n_tokens, uint32_t f, const char **text);
/* What TE's fused grouped MLP (GroupedMLP_CuTeGEMM* over the fuser's grouped-MLP window,
 * ft_model_grouped_mlp) raises when run with quantizer state q on n_tokens tokens (< 0: unknown,
 * taken as non-empty and aligned): its forward's checks (T % 128, quantizers that are neither
 * MXFP8 nor NVFP4, the NVFP4 group quantizes), then, with backward, its backward's (the NVFP4
 * bgrad of a plain FC2 bias). TE's message, or NULL when it runs (and for a fuser without such a
 * window). For a run of the fused topology that no plan of the trace holds (numerical replay's
 * control); ft_model_run_raises applies the same checks to plans. */
const char *ft_model_fused_mlp_raises(const ft_model *m, uint32_t fuser, const ft_qstate *q,
                                      int64_t n_tokens, int backward);

#ifdef __cplusplus
}
#endif
#endif /* FT_TEFUSER_H */
