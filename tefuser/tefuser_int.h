/*
 * tefuser_int.h - private types of the fuser model (every .c file of tefuser/); not a contract.
 *
 * The model is three tables and the code that walks them:
 * - the basic-op catalog and op attribute table (ops.c): what a fuser's ops JSON may say;
 * - the recipe attribute table (recipe.c): every dataclass field of the six recipe types, its
 *   default, and whether it is baked into quantizers;
 * - the fusion rule table (rules.c): one row per registered TE fusion function, in registry
 *   order, with its pass, window, gate and the attributes the gate reads.
 * Everything a gate reads must be declared in its row: the fusion-attrs key is derived from the
 * declarations (plan.c), and tests check that equal keys give equal plans.
 */
#ifndef FT_TEFUSER_INT_H
#define FT_TEFUSER_INT_H

#include "ft_hmap.h"
#include "ft_tefuser.h"

#include <jansson.h>

/* ---- basic-op catalog --------------------------------------------------------------------- */
typedef enum ft_op_type {
    FT_OP_GROUPED_LINEAR = 0,
    FT_OP_SCALED_SWIGLU,
    FT_OP_SCALED_CLAMPED_QGEGLU,
    FT_OP_SCALED_SRELU,
    FT_OP_SWIGLU,
    FT_OP_CLAMPED_SWIGLU,
    FT_OP_BASIC_LINEAR,
    FT_OP_BIAS,
    FT_OP_GELU,
    FT_OP_RELU,
    FT_OP_SRELU,
    FT_OP_GLU,
    FT_OP_GEGLU,
    FT_OP_QGELU,
    FT_OP_QGEGLU,
    FT_OP_REGLU,
    FT_OP_SREGLU,
    FT_OP_SILU,
    FT_OP_IDENTITY,
    FT_OP_RESHAPE,
    FT_OP_CONSTANT_SCALE,
    FT_OP_DROPOUT,
    FT_OP_QUANTIZE,
    FT_OP_LAYER_NORM,
    FT_OP_RMS_NORM,
    FT_OP_L2_NORMALIZATION,
    FT_OP_ADD_EXTRA_INPUT,
    FT_OP_MAKE_EXTRA_OUTPUT,
    FT_OP_ALL_GATHER,
    FT_OP_ALL_REDUCE,
    FT_OP_REDUCE_SCATTER,
    FT_OP_OTHER, /* a class the catalog does not know: opaque, no rule matches it */
    FT_OP_COUNT
} ft_op_type;

#define FT_OPB(t) (1ull << (t))
/* Op type groups the rule windows and checks match on. */
#define FT_OPS_GL FT_OPB(FT_OP_GROUPED_LINEAR)
#define FT_OPS_BL FT_OPB(FT_OP_BASIC_LINEAR)
#define FT_OPS_SCALED_ACTS                                                                         \
    (FT_OPB(FT_OP_SCALED_SWIGLU) | FT_OPB(FT_OP_SCALED_CLAMPED_QGEGLU) | FT_OPB(FT_OP_SCALED_SRELU))
#define FT_OPS_GLU_ACTS                                                                            \
    (FT_OPB(FT_OP_SCALED_SWIGLU) | FT_OPB(FT_OP_SCALED_CLAMPED_QGEGLU) | FT_OPB(FT_OP_SWIGLU) |    \
     FT_OPB(FT_OP_CLAMPED_SWIGLU))
#define FT_OPS_CLAMPED (FT_OPB(FT_OP_SCALED_CLAMPED_QGEGLU) | FT_OPB(FT_OP_CLAMPED_SWIGLU))
#define FT_OPS_COLLECTIVES                                                                         \
    (FT_OPB(FT_OP_ALL_GATHER) | FT_OPB(FT_OP_ALL_REDUCE) | FT_OPB(FT_OP_REDUCE_SCATTER))
#define FT_OPS_EXTRA_IO (FT_OPB(FT_OP_ADD_EXTRA_INPUT) | FT_OPB(FT_OP_MAKE_EXTRA_OUTPUT))

/* Op attribute ids (index into the op attribute table in rules.c). */
typedef enum ft_op_attr {
    FT_OA_NUM_GROUPS = 0,
    FT_OA_IN_FEATURES,
    FT_OA_OUT_FEATURES,
    FT_OA_BIAS,
    FT_OA_SCALE_BIAS,
    FT_OA_SINGLE_GROUPED_WEIGHT,
    FT_OA_SINGLE_GROUPED_BIAS,
    FT_OA_DTYPE,
    FT_OA_WEIGHT_RG,
    FT_OA_GLU_INTERLEAVE,
    FT_OA_ACT_RECOMPUTE,
    FT_OA_LIMIT,
    FT_OA_ALPHA,
    FT_OA_GLU_LINEAR_OFFSET,
    FT_OA_TP_MODE,
    FT_OA_TP_SIZE,
    FT_OA_SEQUENCE_PARALLEL,
    FT_OA_USERBUFFERS,
    FT_OA_IN_PLACE,
    FT_OA_SCALE,
    FT_OA_SIZE,
    FT_OA_QUANT_FORWARD,
    FT_OA_QUANT_BACKWARD,
    FT_OA_PROCESS_GROUP_SIZE,
    FT_OA_GRAD_OUTPUT_QUANTIZER, /* derived: the op owns a grad-output quantizer (type, backward) */
    FT_OA_COUNT
} ft_op_attr;

enum { FT_TP_NONE = 0, FT_TP_COLUMN = 1, FT_TP_ROW = 2 };
enum { FT_DT_FLOAT32 = 0, FT_DT_FLOAT16 = 1, FT_DT_BFLOAT16 = 2 };

/* One basic op with its attributes (TE defaults where the JSON is silent). */
typedef struct ft_op {
    uint8_t type;           /* ft_op_type */
    uint8_t v_raw_tp_mode;  /* BasicLinear: the TP mode as recorded, before canonicalisation */
    uint64_t given;         /* bit a: attribute a was in the capture (else TE's default) */
    int64_t v[FT_OA_COUNT]; /* integer/bool/enum attributes by ft_op_attr; floats in f[] */
    double f[FT_OA_COUNT];  /* float attributes (limit, alpha, offset, scale) */
    const char *name;       /* class name (catalog string, or owned copy for FT_OP_OTHER) */
} ft_op;

/* Parse one fuser's ops JSON into ops[]; errors name the fuser id, op index and field. */
int ft_ops_parse(const char *ops_json, int64_t fuser_id, int64_t world_size, ft_op **out,
                 uint32_t *n_out, ft_err *err);
void ft_ops_free(ft_op *ops, uint32_t n);
/* Canonical bytes of one op attribute (for the fusion key). */
uint64_t ft_op_attr_hash(const ft_op *op, ft_op_attr a, uint64_t h);
const char *ft_op_attr_name(ft_op_attr a);
/* The attribute's value as Python prints it (16, True, None, 'column', torch.bfloat16). */
void ft_op_attr_text(const ft_op *op, ft_op_attr a, char *buf, size_t cap);
/* Whether ops of this type have the attribute (others hold a constant default). */
int ft_op_has_attr(const ft_op *op, ft_op_attr a);

/* ---- environment -------------------------------------------------------------------------- */
typedef enum ft_env_attr {
    FT_EA_DEVICE_CC = 0,
    FT_EA_CUDNN_FRONTEND,
    FT_EA_CUBLASLT,
    FT_EA_WORLD_SIZE,
    FT_EA_RANK,
    FT_EA_CUTEDSL_FUSED_GROUPED_MLP,
    FT_EA_DISABLE_CUTEDSL_WGRAD,
    /* `from cudnn import NAME` succeeds (the grouped-MLP is_supported() imports) */
    FT_EA_WRAP_GLU,
    FT_EA_WRAP_DGLU,
    FT_EA_WRAP_SRELU,
    FT_EA_WRAP_DSRELU,
    FT_EA_WRAP_QUANT,
    FT_EA_WRAP_WGRAD,
    FT_EA_COUNT
} ft_env_attr;
_Static_assert(FT_EA_COUNT <= 32, "env reads are a 32-bit mask");

/* Where an env value came from. */
enum { FT_ENV_ASSUMED = 0, FT_ENV_CAPTURED, FT_ENV_OVERRIDE };

typedef struct ft_env {
    int64_t v[FT_EA_COUNT];   /* parsed: cc as major*10+minor, cublaslt as TE's integer, ints,
                                 imports 0/1; cudnn_frontend a hash of fe (-1: not installed) */
    uint8_t src[FT_EA_COUNT]; /* FT_ENV_*: absent (TE's default assumed), captured, --env */
    uint8_t ov[FT_EA_COUNT];  /* an --env override named the key (set or removed it) */
    uint8_t legacy_wgrad;     /* the wrapper came from the old key cudnn_wgrad_wrapper */
    uint8_t captured_empty;   /* the capture's env object was absent or empty */
    ft_version fe;            /* cudnn_frontend, when installed */
    json_t *obj;              /* the whole env object (overrides applied, values as text) */
} ft_env;

const char *ft_env_attr_name(ft_env_attr a);
/* cudnn_frontend installed and >= min (TE: PkgVersion(version) >= PkgVersion(min)). */
int ft_env_fe_at_least(const ft_env *e, const char *min);
/* The earlier fusertrace name of the wgrad wrapper key, still read ("cudnn_wgrad_wrapper"). */
const char *ft_env_legacy_wgrad_key(void);
/* What the model assumes for an env value the capture lacks, in words (capture.c). */
const char *ft_env_default_text(ft_env_attr a);
/* Env string value of key (NULL if absent or null). */
const char *ft_env_str(const ft_env *e, const char *key);

/* ---- recipes ------------------------------------------------------------------------------ */
/* The attrs key under which a capture names a recipe subclass's TE class. */
#define FT_RECIPE_BASE_KEY "__te_base__"

typedef struct ft_recipe_int {
    ft_recipe_model pub; /* what the engine reads */
    int64_t id;          /* declared id */
    char *canon;         /* canonical encoding: Type{attr=value,...} with defaults filled */
    uint64_t qbase;      /* hash of the quantizer-baked attributes other than the QParams flags */
    uint8_t qparams_recorded; /* the capture recorded fp4_quant_* (else derived, recipe.c) */
    uint64_t reads;           /* ft_recipe_read_value + 1 of every ft_recipe_read, one byte each */
} ft_recipe_int;
/* Set the NVFP4 QParams flags and the qhash that covers them. */
void ft_recipe_set_qflags(ft_recipe_int *r, uint8_t rht, uint8_t sr, uint8_t twod);

int ft_recipe_parse(const ft_recipe_def *def, const ft_env *env, ft_recipe_int *out, ft_err *err);
void ft_recipe_int_free(ft_recipe_int *r);
void ft_recipe_none(ft_recipe_int *out); /* the NoneType recipe (quantization disabled) */
/* reset_recipe_state(r) applied to q (see recipe.c). */
void ft_qstate_reset(ft_qstate *q, const ft_recipe_model *r);

/* ---- fusion rules ------------------------------------------------------------------------- */
typedef enum ft_pass { FT_PASS_JOINT = 0, FT_PASS_FWD, FT_PASS_BWD, FT_PASS_COUNT } ft_pass;

/* What a gate may read, declared per rule. Recipe reads are the exact recipe expressions TE's
 * fusion functions evaluate; absent attributes (e.g. disable_rht of an MXFP8 recipe) hash as
 * "absent". */
typedef enum ft_recipe_read {
    FT_RR_IS_NONE = 0,       /* recipe is None */
    FT_RR_MXFP8,             /* recipe.mxfp8() */
    FT_RR_NVFP4,             /* recipe.nvfp4() */
    FT_RR_BACKWARD_OVERRIDE, /* recipe.backward_override */
    FT_RR_DISABLE_RHT,       /* recipe.disable_rht (NVFP4 only) */
    FT_RR_COUNT
} ft_recipe_read;
const char *ft_recipe_read_name(ft_recipe_read r);

enum { FT_SCOPE_RECIPE = 0, FT_SCOPE_OP = 1, FT_SCOPE_ENV = 2 };
typedef struct ft_read {
    uint8_t scope; /* FT_SCOPE_* */
    uint8_t slot;  /* window slot for FT_SCOPE_OP */
    uint8_t attr;  /* ft_recipe_read / ft_op_attr / ft_env_attr */
} ft_read;

/* A unit of a plan: one basic op (rule < 0) or a fused op covering basic ops [lo, hi]. */
typedef struct ft_unit {
    int16_t rule; /* index into the rule table, -1 for a basic op */
    uint32_t lo, hi;
} ft_unit;

struct ft_rule;
typedef struct ft_gate_ctx {
    const ft_env *env;
    const ft_recipe_model *recipe;
    const ft_op *ops; /* the fuser's basic ops */
    /* read audit (tests): while a rule runs, a read it did not declare sets *undeclared */
    const struct ft_rule *rule;
    uint8_t *undeclared;
    /* why-unfused query (ft_model_why_unfused): the last read of a take or gate, or NULL */
    struct ft_last_read *last;
    /* and, when set, every failing check of a gate, which then goes on to its next check */
    struct ft_gate_fails *fails;
} ft_gate_ctx;

/* The last attribute a take condition or gate read, and where. */
typedef struct ft_last_read {
    int gate; /* the gate ran (the op types and take conditions matched) */
    int set;  /* and read what */
    ft_read what;
    uint32_t op; /* basic op index, for FT_SCOPE_OP */
} ft_last_read;

/* The failing checks of the gates a why-unfused query ran: the read each failed on, and what the
 * check needs ("a multiple of 64"). */
enum { FT_MAX_GATE_FAILS = 16 };
typedef struct ft_gate_fails {
    uint32_t n;
    struct {
        ft_read what;
        uint32_t op;
        const char *need;
    } f[FT_MAX_GATE_FAILS];
} ft_gate_fails;

/* Window slot: op types (0 = any unit, basic or fused), optional, extra take condition. The
 * condition sees the window filled so far (w[0..slot-1]) and the candidate in w[slot]. */
typedef int (*ft_take_fn)(const ft_gate_ctx *c, const struct ft_unit *w, int slot);
typedef struct ft_slot {
    uint64_t types; /* FT_OPB mask; 0 = any unit */
    uint8_t optional;
    ft_take_fn take; /* NULL: the type is enough */
} ft_slot;

enum {
    FT_SCAN_SLIDE = 0, /* fixed window; miss -> shift by one; match -> rescan at the window start */
    FT_SCAN_CONSUME,   /* anchor + greedy optional slots; miss -> skip what was taken */
};

#define FT_MAX_SLOTS 3
#define FT_MAX_READS 24
typedef int (*ft_gate_fn)(const ft_gate_ctx *c, const ft_unit *w, unsigned present);
typedef int (*ft_registered_fn)(const ft_env *env);

typedef struct ft_rule {
    const char *func;    /* TE fusion function's qualname, e.g. "fuse_ops" */
    const char *te_name; /* its full dotted name, as OperationFuser's registry holds it */
    const char *fused;   /* FusedOperation class it builds */
    uint8_t pass;        /* ft_pass */
    uint8_t scan;        /* FT_SCAN_* */
    uint8_t n_slots;
    uint8_t fuse_from; /* first slot the fused op covers (BackwardActivationBias: 1) */
    ft_slot slots[FT_MAX_SLOTS];
    ft_registered_fn registered; /* import-time registration; NULL = always */
    ft_gate_fn gate;             /* plan-time gate on a type-matched window; NULL = accept */
    uint8_t grouped_mlp;         /* builds the joint grouped-MLP op */
    uint8_t n_reads;
    ft_read reads[FT_MAX_READS]; /* every attribute registered() and gate() read */
} ft_rule;

extern const ft_rule ft_rules[];
extern const uint32_t ft_n_rules;

/* Apply one pass: the rule rows in order[0..n_order-1] (the registry's order for the pass), each
 * once over the whole unit list. *n is updated; the array never grows. */
void ft_rules_apply_pass(const ft_gate_ctx *c, const int16_t *order, uint32_t n_order,
                         ft_unit *units, uint32_t *n);
/* _map_to_basic_ops: units must cover 0..n_ops-1 contiguously, in order, without overlap.
 * FT_EUNSUPPORTED with TE's message otherwise. */
int ft_map_to_basic(const ft_unit *units, uint32_t n_units, const ft_op *ops, uint32_t n_ops,
                    int64_t fuser_id, ft_err *err);
/* Whether rule's window, tried at units[i], matches in op types and take conditions but its
 * gate rejects it: 1 and *last = the attribute the gate read last (the failing condition), else
 * 0. units are not changed. */
int ft_rule_blocked_at(const ft_gate_ctx *c, int16_t rule, const ft_unit *units, uint32_t n,
                       uint32_t i, ft_last_read *last);
/* A failing check of a rule's import-time registration: the env value it reads, TE's reason in
 * words, and what the check needs. */
typedef struct ft_reg_check {
    uint8_t attr;     /* ft_env_attr */
    const char *text; /* "the device capability (device_cc) is not 10.x" */
    const char *need; /* "10.x (SM100)" */
} ft_reg_check;
/* Every check of rule's registration that fails under env, in TE's order (the first is why TE
 * does not register it): their number, the first cap into out. */
uint32_t ft_rule_registration_fails(uint32_t rule, const ft_env *env, ft_reg_check *out,
                                    uint32_t cap);
/* Why rule is not registered under env, in words ("device_cc 9.0 is not 10.x", ...). */
const char *ft_rule_unregistered_reason(uint32_t rule, const ft_env *env, char *buf, size_t cap);
/* Whether the rule's window could match somewhere in ops (type compatibility only). */
int ft_rule_applicable(const ft_rule *r, const ft_op *ops, uint32_t n_ops);
/* Unfused GroupedLinear path choice (is_op_fuser_grouped_tensor_path_supported). */
int ft_grouped_tensor_path_supported(const ft_env *env, const ft_recipe_model *r, int dtype);
/* Grouped-MLP registration (is_supported), exposed for tests. */
int ft_grouped_mlp_glu_registered(const ft_env *env);
int ft_grouped_mlp_srelu_registered(const ft_env *env);

/* Tests: make every later build audit its gates' reads against the rule declarations; a read
 * that a rule did not declare sets *flag. NULL turns the audit off. */
struct ft_model;
void ft_model_set_audit(struct ft_model *m, uint8_t *flag);

/* Value of a declared recipe read, as hashed into the fusion key (-1 = absent). */
int64_t ft_recipe_read_value(const ft_recipe_model *r, ft_recipe_read rr);

/* ---- the model's own state (plan.c builds it; classify.c and qstate.c read it) ------------ */
int ft_env_parse(const ft_model_capture *cap, const ft_env_kv *ov, uint32_t n_ov, ft_env *e,
                 ft_err *err);

#define FT_MAX_RULES 32
#define FT_MAX_ORDER 32 /* known fusion functions registered per pass (repeats count) */

/* One report note with its text (capture.c). */
typedef struct note_m {
    ft_model_note pub;
    char field[160];
    char text[400];
} note_m;

/* capture.c: the registry (order, registered, rule_pass) from the header's te_fusions or TE's
 * own registration; the notes, once the fusers are parsed. */
int ft_model_registry_init(ft_model *m, const ft_model_capture *cap, ft_err *err);
int ft_model_notes_init(ft_model *m, ft_err *err);
int ft_model_note_add(ft_model *m, ft_model_note_kind kind, const char *field, const char *pass,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
const char *ft_pass_key(ft_pass p);

/* One distinct op list (an op-list class): everything the model knows that depends only on the
 * ops, parsed and derived once however many fusers share the list. */
typedef struct oplist_m {
    const char *json; /* the ops JSON it was parsed from (the first fuser's; borrowed) */
    uint64_t hash;    /* ft_hash64 of json */
    ft_op *ops;       /* [n_ops] */
    uint32_t n_ops;
    uint32_t n_fusers;     /* declared fusers with this op list */
    uint32_t recipe_reads; /* ft_recipe_read bits in its fusion key */
    uint64_t recipe_bytes; /* the same as a byte mask over ft_recipe_int.reads */
    uint64_t const_key;    /* hash of the op and env attributes in its fusion key */
    char *key_attrs;       /* the key's attribute names, comma separated */
} oplist_m;

/* One declared fuser: 16 bytes, the rest is its op list's. */
typedef struct fuser_m {
    int64_t id;
    uint32_t inst; /* index of the instance's first declaration (itself unless of is given) */
    uint32_t cls;  /* its op list (m->lists) */
} fuser_m;

typedef struct plan_m {
    char *text;
    uint64_t hash;
    ft_unit *units; /* [n_fwd + n_bwd]: forward units, then backward units (forward order) */
    uint32_t n_fwd, n_bwd;
    uint8_t fused_mlp;
} plan_m;

typedef struct errtab {
    char **s;
    uint32_t n, cap;
} errtab;

struct ft_model {
    ft_env env;
    uint8_t registered[FT_MAX_RULES];           /* the row is registered in some pass */
    int8_t rule_pass[FT_MAX_RULES];             /* the pass it is applied in first, -1 if none */
    int16_t order[FT_PASS_COUNT][FT_MAX_ORDER]; /* per pass: rule rows in registry order */
    uint8_t n_order[FT_PASS_COUNT];
    uint8_t registry; /* the capture recorded te_fusions */
    note_m *notes;    /* [n_notes] for the reports */
    uint32_t n_notes, cap_notes;
    fuser_m *fusers;
    uint32_t n_fusers;
    oplist_m *lists;             /* [n_lists] the distinct op lists, in first-declaration order */
    uint32_t n_lists, cap_lists; /* grown as distinct lists appear, not one per fuser */
    ft_hmap list_by_ptr;  /* ops JSON pointer -> list (a trace shares one string per op list) */
    ft_hmap list_by_hash; /* ft_hash64 of the ops JSON -> first list with that hash */
    ft_recipe_int *recipes;
    uint32_t n_recipes;
    ft_recipe_int none;
    plan_m *plans;
    uint32_t n_plans, cap_plans;
    ft_hmap intern;   /* plan text hash -> index of the first plan with that hash */
    ft_hmap memo;     /* (op list, recipe + 1, f) -> plan id of the build */
    uint64_t n_built; /* memo misses of ft_model_build that built */
    ft_unit *scratch; /* [3 * max ops] */
    uint32_t scratch_cap;
    errtab *errs;   /* interned run-time error texts (mutable behind a const model) */
    uint8_t *audit; /* tests: set when a gate reads an undeclared attribute */
};

/* The op list of a declared fuser (fuser < m->n_fusers). */
static inline const oplist_m *ft_model_list(const ft_model *m, uint32_t fuser)
{
    return &m->lists[m->fusers[fuser].cls];
}

static inline const ft_recipe_int *ft_model_recipe_int(const ft_model *m, int32_t recipe)
{
    if (recipe < 0 || (uint32_t)recipe >= m->n_recipes) return &m->none;
    return &m->recipes[recipe];
}

#endif /* FT_TEFUSER_INT_H */
