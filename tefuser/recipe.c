/*
 * recipe.c - the six TE recipe types as data (docs/fuser-model.md, "Recipes"), their canonical
 * encoding and hash, and the quantizer-state model ("Quantizer state").
 *
 * A recipe declaration (type, attrs JSON) becomes an ft_recipe_int: every dataclass field of its
 * type, TE's default where the capture is silent (env-derived defaults such as
 * NVTE_NVFP4_DISABLE_RHT come from the trace header's env, as TE evaluates them once at import),
 * a canonical text "Type{field=value,...}" over all fields in table order plus any unknown field
 * (sorted, prefixed '+'), and the 64-bit hash of that text. The key order of the attrs JSON does
 * not matter; an absent field and its default encode the same. Fields whose name starts with
 * '_' are object state, not configuration, and are left out.
 *
 * Limits: field values are type-checked and enum fields checked for membership; TE's
 * cross-field asserts (e.g. DelayedScaling requires backward_override None) are not re-checked,
 * because a recipe mutated after construction is not re-validated by TE either.
 */
#include "tefuser_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* ---- the attribute table ------------------------------------------------------------------ */
enum { RK_BOOL, RK_INT, RK_FLOAT, RK_ENUM, RK_OPT_ENUM, RK_JSON };
enum { ENV_NONE, ENV_EQ1, ENV_STR, ENV_UPPER };
enum {
    F_NONE,
    F_BO,
    F_HIST,
    F_DISABLE_RHT,
    F_DISABLE_SR,
    F_DISABLE_2D,
    F_ROW_SCALED,
    F_4OVER6,
    F_ENABLE_2D,
    F_FP8_FORMAT,
    F_QP_INP,
    F_QP_WEIGHT,
    F_QP_GRAD,
};

static const char *const fmt_fp8[] = {"E4M3", "HYBRID", "E5M2", NULL};
static const char *const fmt_fp4[] = {"E2M1", NULL};
static const char *const bo_names[] = {"high_precision", "dequantized", NULL};
static const char *const scopes_4o6[] = {"none", "weights", "activations", "all", NULL};
static const char *const err_modes[] = {"MAE", "MSE", NULL};

static const char *const fp8_e4m3_hybrid[] = {"E4M3", "HYBRID", NULL};
static const char *const amax_algos[] = {"max", "most_recent", NULL};

/* One dataclass field of a recipe type, in declaration order (the canonical encoding follows
 * it). What the model reads: kind, default, the environment default of the class body, whether
 * RecipeState.create bakes it into quantizers, the ft_recipe_model field it fills. What a new
 * object holds (for synth, through ft_recipe_field_at): its value after __post_init__ as a
 * capture records it, whether the constructor takes it, and which enum values it accepts. */
typedef struct recipe_attr {
    const char *name;
    uint8_t kind;               /* RK_* */
    uint8_t quant;              /* baked into quantizers when RecipeState.create runs */
    uint8_t field;              /* F_*: the ft_recipe_model field it fills */
    const char *dflt;           /* default as canonical JSON text (what an absent value means) */
    const char *env;            /* class-body os.getenv default, or NULL */
    uint8_t env_kind;           /* ENV_* */
    const char *const *allowed; /* enum names (RK_ENUM / RK_OPT_ENUM) a capture may hold */
    const char *init;           /* a new object's value as recorded; NULL: dflt, or not recorded */
    uint8_t ctor;               /* a constructor argument (else fixed by the class) */
    uint8_t derived;            /* set by __post_init__, recorded only when the capture reads it */
    const char *const *ctor_allowed; /* enum values the constructor accepts; NULL: allowed */
} recipe_attr;

#define QP(pow2)  "{\"amax_epsilon\":0.0,\"power_2_scale\":" pow2 "}"
#define MM(split) "{\"use_split_accumulator\":" split "}"

#define BO_ATTR(ctor_)                                                                             \
    {                                                                                              \
        .name = "backward_override", .kind = RK_OPT_ENUM, .field = F_BO, .dflt = "null",           \
        .env = "NVTE_BACKWARD_OVERRIDE", .env_kind = ENV_STR, .allowed = bo_names, .ctor = (ctor_) \
    }
#define DPA_ATTRS(ctor_)                                                                           \
    {.name = "fp8_dpa", .kind = RK_BOOL, .dflt = "false", .ctor = (ctor_)},                        \
    {                                                                                              \
        .name = "fp8_mha", .kind = RK_BOOL, .dflt = "false", .ctor = (ctor_)                       \
    }
#define FP8_FORMAT(dflt_, ctor_)                                                                   \
    {                                                                                              \
        .name = "fp8_format", .kind = RK_ENUM, .quant = 1, .field = F_FP8_FORMAT, .dflt = (dflt_), \
        .allowed = fmt_fp8, .ctor = (ctor_), .ctor_allowed = fp8_e4m3_hybrid                       \
    }
#define FIXED_JSON(name_, init_, quant_)                                                           \
    {                                                                                              \
        .name = (name_), .kind = RK_JSON, .quant = (quant_), .dflt = "null", .init = (init_)       \
    }

static const recipe_attr attrs_delayed[] = {
    {.name = "margin", .kind = RK_INT, .dflt = "0", .ctor = 1},
    FP8_FORMAT("\"HYBRID\"", 1), /* E5M2 alone is illegal */
    {.name = "amax_history_len", .kind = RK_INT, .field = F_HIST, .dflt = "1024", .ctor = 1},
    {.name = "amax_compute_algo",
     .kind = RK_JSON,
     .dflt = "\"max\"",
     .ctor = 1,
     .ctor_allowed = amax_algos},
    FIXED_JSON("scaling_factor_compute_algo", NULL, 0),
    {.name = "reduce_amax", .kind = RK_BOOL, .dflt = "true", .ctor = 1},
    DPA_ATTRS(1),
    BO_ATTR(0), /* DelayedScaling asserts backward_override is None */
};
static const recipe_attr attrs_current[] = {
    {.name = "use_power_2_scales",
     .kind = RK_BOOL,
     .quant = 1,
     .dflt = "false",
     .env = "NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES",
     .env_kind = ENV_EQ1},
    FP8_FORMAT("\"HYBRID\"", 1),
    FIXED_JSON("fp8_quant_fwd_inp", QP("false"), 1),
    FIXED_JSON("fp8_quant_fwd_weight", QP("false"), 1),
    FIXED_JSON("fp8_quant_bwd_grad", QP("false"), 1),
    FIXED_JSON("fp8_gemm_fprop", MM("false"), 0),
    FIXED_JSON("fp8_gemm_dgrad", MM("true"), 0),
    FIXED_JSON("fp8_gemm_wgrad", MM("true"), 0),
    DPA_ATTRS(1),
    BO_ATTR(1),
};
static const recipe_attr attrs_mxfp8[] = {
    {.name = "margin", .kind = RK_INT, .dflt = "0", .ctor = 1},
    FP8_FORMAT("\"E4M3\"", 1),
    DPA_ATTRS(1),
    BO_ATTR(1),
    {.name = "enable_2d_quantization",
     .kind = RK_BOOL,
     .quant = 1,
     .field = F_ENABLE_2D,
     .dflt = "false",
     .ctor = 1},
};
static const recipe_attr attrs_block[] = {
    {.name = "use_f32_scales",
     .kind = RK_BOOL,
     .quant = 1,
     .dflt = "false",
     .env = "NVTE_FP8_BLOCK_SCALING_FP32_SCALES",
     .env_kind = ENV_EQ1},
    FP8_FORMAT("\"E4M3\"", 1),
    FIXED_JSON("fp8_quant_fwd_inp", QP("true"), 1),
    FIXED_JSON("fp8_quant_fwd_weight", QP("true"), 1),
    FIXED_JSON("fp8_quant_bwd_grad", QP("true"), 1),
    {.name = "x_block_scaling_dim", .kind = RK_INT, .quant = 1, .dflt = "1"},
    {.name = "w_block_scaling_dim", .kind = RK_INT, .quant = 1, .dflt = "2"},
    {.name = "grad_block_scaling_dim", .kind = RK_INT, .quant = 1, .dflt = "1"},
    FIXED_JSON("fp8_gemm_fprop", MM("true"), 0),
    FIXED_JSON("fp8_gemm_dgrad", MM("true"), 0),
    FIXED_JSON("fp8_gemm_wgrad", MM("true"), 0),
    DPA_ATTRS(0), /* Float8BlockScaling asserts both False */
    BO_ATTR(1),
};
/* disable_rht/_stochastic_rounding/_2d_quantization are quantizer-relevant through the derived
 * QParams (q_rht, q_sr, q_2d), which the qhash covers directly. */
static const recipe_attr attrs_nvfp4[] = {
    {.name = "disable_rht",
     .kind = RK_BOOL,
     .field = F_DISABLE_RHT,
     .dflt = "false",
     .env = "NVTE_NVFP4_DISABLE_RHT",
     .env_kind = ENV_EQ1,
     .ctor = 1},
    {.name = "disable_stochastic_rounding",
     .kind = RK_BOOL,
     .field = F_DISABLE_SR,
     .dflt = "false",
     .env = "NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING",
     .env_kind = ENV_EQ1,
     .ctor = 1},
    {.name = "disable_2d_quantization",
     .kind = RK_BOOL,
     .field = F_DISABLE_2D,
     .dflt = "false",
     .env = "NVTE_NVFP4_DISABLE_2D_QUANTIZATION",
     .env_kind = ENV_EQ1,
     .ctor = 1},
    {.name = "row_scaled_activation",
     .kind = RK_BOOL,
     .quant = 1,
     .field = F_ROW_SCALED,
     .dflt = "false",
     .env = "NVTE_NVFP4_ROW_SCALED_ACTIVATION",
     .env_kind = ENV_EQ1,
     .ctor = 1},
    {.name = "nvfp4_4over6",
     .kind = RK_ENUM,
     .quant = 1,
     .field = F_4OVER6,
     .dflt = "\"none\"",
     .env = "NVTE_NVFP4_4OVER6",
     .env_kind = ENV_STR,
     .allowed = scopes_4o6,
     .ctor = 1},
    {.name = "nvfp4_4over6_e4m3_use_256",
     .kind = RK_ENUM,
     .quant = 1,
     .dflt = "\"all\"",
     .env = "NVTE_NVFP4_4OVER6_E4M3_USE_256",
     .env_kind = ENV_STR,
     .allowed = scopes_4o6,
     .ctor = 1},
    {.name = "nvfp4_4over6_err_mode",
     .kind = RK_ENUM,
     .quant = 1,
     .dflt = "\"MAE\"",
     .env = "NVTE_NVFP4_4OVER6_ERR_MODE",
     .env_kind = ENV_UPPER,
     .allowed = err_modes,
     .ctor = 1},
    {.name = "fp4_format", .kind = RK_ENUM, .quant = 1, .dflt = "\"E2M1\"", .allowed = fmt_fp4},
    FP8_FORMAT("\"E4M3\"", 0),
    {.name = "fp4_quant_fwd_inp", .kind = RK_JSON, .field = F_QP_INP, .dflt = "null", .derived = 1},
    {.name = "fp4_quant_fwd_weight",
     .kind = RK_JSON,
     .field = F_QP_WEIGHT,
     .dflt = "null",
     .derived = 1},
    {.name = "fp4_quant_bwd_grad",
     .kind = RK_JSON,
     .field = F_QP_GRAD,
     .dflt = "null",
     .derived = 1},
    DPA_ATTRS(1),
    BO_ATTR(1),
};
static const recipe_attr attrs_custom[] = {
    /* a callable the user must pass: no default a capture could record (synth names its own) */
    {.name = "qfactory", .kind = RK_JSON, .quant = 1, .dflt = "null"},
    FP8_FORMAT("\"HYBRID\"", 1),
    DPA_ATTRS(1),
    BO_ATTR(1),
    {.name = "quantization_alignment", .kind = RK_INT, .dflt = "128", .ctor = 1},
};

static const struct {
    const char *name;
    const recipe_attr *attrs;
    size_t n_attrs;
} recipe_types[FT_RT_COUNT] = {
    [FT_RT_NONE] = {"None", NULL, 0},
    [FT_RT_DELAYED] = {"DelayedScaling", attrs_delayed, FT_ARRAY_LEN(attrs_delayed)},
    [FT_RT_CURRENT] = {"Float8CurrentScaling", attrs_current, FT_ARRAY_LEN(attrs_current)},
    [FT_RT_MXFP8] = {"MXFP8BlockScaling", attrs_mxfp8, FT_ARRAY_LEN(attrs_mxfp8)},
    [FT_RT_BLOCK] = {"Float8BlockScaling", attrs_block, FT_ARRAY_LEN(attrs_block)},
    [FT_RT_NVFP4] = {"NVFP4BlockScaling", attrs_nvfp4, FT_ARRAY_LEN(attrs_nvfp4)},
    [FT_RT_CUSTOM] = {"CustomRecipe", attrs_custom, FT_ARRAY_LEN(attrs_custom)},
};

/* The i-th distinct env variable a recipe attribute's default reads (NULL past the last): every
 * recipe attribute's env default, each name once, in table order. */
static const char *recipe_env_key(uint32_t i)
{
    uint32_t k = 0;
    for (int t = 0; t < FT_RT_COUNT; t++)
        for (size_t a = 0; a < recipe_types[t].n_attrs; a++) {
            const char *e = recipe_types[t].attrs[a].env;
            if (!e) continue;
            int seen = 0;
            for (int t2 = 0; t2 <= t && !seen; t2++)
                for (size_t a2 = 0; a2 < (t2 == t ? a : recipe_types[t2].n_attrs) && !seen; a2++)
                    seen = recipe_types[t2].attrs[a2].env &&
                           !strcmp(recipe_types[t2].attrs[a2].env, e);
            if (seen) continue;
            if (k++ == i) return e;
        }
    return NULL;
}

/* The fusion rules' environment (env.c) first, then the recipe defaults'. Here rather than in
 * env.c because the recipe table is here and the environment below it. */
const char *ft_env_read_key(uint32_t i)
{
    if (i < FT_EA_COUNT) return ft_env_attr_name((ft_env_attr)i);
    if (i == FT_EA_COUNT) return ft_env_legacy_wgrad_key();
    return recipe_env_key(i - FT_EA_COUNT - 1);
}

int ft_env_key_is_read(const char *key)
{
    const char *k;
    for (uint32_t i = 0; (k = ft_env_read_key(i)); i++)
        if (!strcmp(k, key)) return 1;
    return 0;
}

const char *ft_recipe_type_name(ft_recipe_type t)
{
    return (unsigned)t < FT_RT_COUNT ? recipe_types[t].name : "?";
}

uint32_t ft_recipe_n_fields(ft_recipe_type t)
{
    return (unsigned)t < FT_RT_COUNT ? (uint32_t)recipe_types[t].n_attrs : 0;
}

int ft_recipe_field_at(ft_recipe_type t, uint32_t i, ft_recipe_field *out)
{
    if (i >= ft_recipe_n_fields(t)) return FT_ERANGE;
    static const uint8_t kinds[] = {
        [RK_BOOL] = FT_RF_BOOL, [RK_INT] = FT_RF_INT,           [RK_FLOAT] = FT_RF_JSON,
        [RK_ENUM] = FT_RF_ENUM, [RK_OPT_ENUM] = FT_RF_OPT_ENUM, [RK_JSON] = FT_RF_JSON};
    const recipe_attr *a = &recipe_types[t].attrs[i];
    *out = (ft_recipe_field){.name = a->name,
                             .kind = (ft_rf_kind)kinds[a->kind],
                             .init = a->init ? a->init : a->dflt,
                             .settable = a->ctor,
                             .derived = a->derived,
                             .values = a->ctor_allowed ? a->ctor_allowed : a->allowed};
    return FT_OK;
}

const char *ft_bo_name(ft_bo bo)
{
    return bo == FT_BO_NONE ? "None" : (unsigned)bo <= 2 ? bo_names[bo - 1] : "?";
}

/* ---- parsing ------------------------------------------------------------------------------ */
static int enum_index(const char *const *names, const char *s)
{
    if (!strncmp(s, "Format.", 7)) s += 7; /* tolerate "Format.E4M3" */
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], s)) return i;
    return -1;
}

/* The value TE's class body would take from the environment, as JSON (new reference), or NULL
 * when the variable is unset. */
static json_t *env_default(const recipe_attr *a, const ft_env *env)
{
    if (!a->env || !env) return NULL;
    const char *s = ft_env_str(env, a->env);
    if (!s) return NULL;
    switch (a->env_kind) {
    case ENV_EQ1:
        return json_boolean(!strcmp(s, "1"));
    case ENV_UPPER: {
        char buf[64];
        size_t n = ft_strlcpy(buf, s, sizeof buf);
        for (size_t i = 0; i < n && i < sizeof buf; i++)
            buf[i] = (char)toupper((unsigned char)buf[i]);
        return json_string(buf);
    }
    default:
        return json_string(s);
    }
}

/* QParams flag from a recorded fp4_quant_* object; -1 when absent. */
static int qparam_flag(const json_t *qp, const char *key)
{
    if (!json_is_object(qp)) return -1;
    const json_t *v = json_object_get(qp, key);
    return json_is_boolean(v) ? json_is_true(v) : -1;
}

static int append_json(ft_buf *b, const json_t *v)
{
    char *t =
        json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    if (!t) return FT_ENOMEM;
    int rc = ft_buf_append(b, t, strlen(t));
    free(t); /* allocated by jansson */
    return rc;
}

/* The canonical texts of one recipe as they are built, and the QParams flags recorded. */
typedef struct parse_acc {
    ft_buf canon;                   /* "Type{field=value,...}" over every field */
    ft_buf qcanon;                  /* "Type{field=value,...}" over the quantization fields */
    int qp_inp, qp_weight, qp_grad; /* recorded fp4_quant_* flags, -1 when absent */
} parse_acc;

/* Index of TE's recipe class name, -1 if it is none of the six. */
static int recipe_type_index(const char *name)
{
    for (int i = 1; i < FT_RT_COUNT; i++)
        if (!strcmp(name, recipe_types[i].name)) return i;
    return -1;
}

/* A class that is not one of TE's six: a user subclass, whose TE base the capture records as
 * attrs.__te_base__ (what recipe.mxfp8(), nvfp4() ... see through issubclass). */
static int subclass_base(const ft_recipe_def *def, const char *own, const json_t *attrs, int *t,
                         ft_err *err)
{
    const json_t *b = attrs ? json_object_get(attrs, FT_RECIPE_BASE_KEY) : NULL;
    if (!b)
        return ft_err_set(err, FT_EINVAL,
                          "recipe %lld: unknown recipe type '%s' (a subclass of a TE recipe "
                          "class names its TE class in attrs.%s)",
                          (long long)def->id, own, FT_RECIPE_BASE_KEY);
    *t = json_is_string(b) ? recipe_type_index(json_string_value(b)) : -1;
    if (*t < 0)
        return ft_err_set(err, FT_EINVAL,
                          "recipe %lld (%s): attribute '%s' must name a TE recipe class "
                          "(DelayedScaling, Float8CurrentScaling, MXFP8BlockScaling, "
                          "Float8BlockScaling, NVFP4BlockScaling, CustomRecipe)",
                          (long long)def->id, own, FT_RECIPE_BASE_KEY);
    return FT_OK;
}

/* def's attrs JSON as an object (new reference) in *attrs, NULL when there is none. */
static int load_attrs(const ft_recipe_def *def, const char *tn, json_t **attrs, ft_err *err)
{
    json_error_t je;
    *attrs = NULL;
    if (!def->attrs_json || !*def->attrs_json) return FT_OK;
    json_t *o = json_loads(def->attrs_json, 0, &je);
    if (!o)
        return ft_err_set(err, FT_EINVAL, "recipe %lld (%s): field 'attrs' is not valid JSON (%s)",
                          (long long)def->id, tn, je.text);
    if (!json_is_object(o)) {
        json_decref(o);
        return ft_err_set(err, FT_EINVAL, "recipe %lld (%s): field 'attrs' is not an object",
                          (long long)def->id, tn);
    }
    *attrs = o;
    return FT_OK;
}

/* Check v against a's kind: *want names what it must be when it is not; *iv gets its integer
 * value (bools 0/1, enums their index, an absent optional enum -1) and *norm (new reference) the
 * enum name as the canonical text spells it. FT_ENOMEM when that cannot be made. */
static int check_kind(const recipe_attr *a, const json_t *v, const char **want, json_t **norm,
                      int64_t *iv)
{
    switch (a->kind) {
    case RK_BOOL:
        if (!json_is_boolean(v)) *want = "a bool";
        *iv = json_is_true(v);
        return FT_OK;
    case RK_INT:
        if (!json_is_integer(v))
            *want = "an integer";
        else
            *iv = json_integer_value(v);
        return FT_OK;
    case RK_FLOAT:
        if (!json_is_number(v)) *want = "a number";
        return FT_OK;
    case RK_OPT_ENUM:
        if (json_is_null(v)) {
            *iv = -1;
            return FT_OK;
        }
        /* fall through */
    case RK_ENUM: {
        int k = json_is_string(v) ? enum_index(a->allowed, json_string_value(v)) : -1;
        if (k < 0 && json_is_string(v) && a->env_kind == ENV_UPPER) {
            char buf[64];
            size_t n = ft_strlcpy(buf, json_string_value(v), sizeof buf);
            for (size_t j = 0; j < n && j < sizeof buf; j++)
                buf[j] = (char)toupper((unsigned char)buf[j]);
            k = enum_index(a->allowed, buf);
        }
        if (k < 0) {
            *want =
                a->kind == RK_OPT_ENUM ? "null or one of its enum names" : "one of its enum names";
            return FT_OK;
        }
        *iv = k;
        *norm = json_string(a->allowed[k]);
        return *norm ? FT_OK : FT_ENOMEM;
    }
    default:
        return FT_OK;
    }
}

/* The modelled recipe field that a takes its value from, if any. */
static void store_field(const recipe_attr *a, const json_t *v, int64_t iv, parse_acc *acc,
                        ft_recipe_int *out)
{
    switch (a->field) {
    case F_BO:
        out->pub.bo = iv < 0 ? FT_BO_NONE : (ft_bo)(iv + 1);
        break;
    case F_HIST:
        out->pub.amax_history_len = iv;
        break;
    case F_DISABLE_RHT:
        out->pub.disable_rht = (uint8_t)iv;
        break;
    case F_DISABLE_SR:
        out->pub.disable_sr = (uint8_t)iv;
        break;
    case F_DISABLE_2D:
        out->pub.disable_2d = (uint8_t)iv;
        break;
    case F_ROW_SCALED:
        out->pub.row_scaled = (uint8_t)iv;
        break;
    case F_4OVER6:
        out->pub.four_over_six = (uint8_t)iv; /* 0 none, 1 weights, 2 activations, 3 all */
        break;
    case F_ENABLE_2D:
        out->pub.enable_2d = (uint8_t)iv;
        break;
    case F_FP8_FORMAT:
        out->pub.fp8_format = (uint8_t)iv;
        break;
    case F_QP_INP:
        acc->qp_inp = qparam_flag(v, "random_hadamard_transform");
        break;
    case F_QP_WEIGHT:
        acc->qp_weight = qparam_flag(v, "fp4_2d_quantization");
        break;
    case F_QP_GRAD:
        acc->qp_grad = qparam_flag(v, "stochastic_rounding");
        break;
    default:
        break;
    }
}

/* Attribute a (the i-th of its type): its value from attrs, the environment or TE's default,
 * checked, appended to the canonical texts and stored into out. */
static int parse_attr(const ft_recipe_def *def, const char *tn, const recipe_attr *a, size_t i,
                      const json_t *attrs, const ft_env *env, parse_acc *acc, ft_recipe_int *out,
                      ft_err *err)
{
    json_t *own = NULL;
    const json_t *v = attrs ? json_object_get(attrs, a->name) : NULL;
    if (!v) v = own = env_default(a, env);
    if (!v) v = own = json_loads(a->dflt, JSON_DECODE_ANY, NULL);
    if (!v) return ft_err_set(err, FT_ENOMEM, "recipe %lld: out of memory", (long long)def->id);
    const char *want = NULL;
    json_t *norm = NULL; /* normalised value for the canonical text */
    int64_t iv = 0;
    int rc = check_kind(a, v, &want, &norm, &iv);
    if (want) {
        char *shown = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        rc = ft_err_set(err, FT_EINVAL, "recipe %lld (%s): attribute '%s' must be %s, got %s",
                        (long long)def->id, tn, a->name, want, shown ? shown : "?");
        free(shown);
        json_decref(own);
        return rc;
    }
    if (!rc) rc = ft_buf_printf(&acc->canon, "%s%s=", i ? "," : "", a->name);
    if (!rc) rc = append_json(&acc->canon, norm ? norm : v);
    if (!rc && a->quant) {
        rc = ft_buf_printf(&acc->qcanon, "%s=", a->name);
        if (!rc) rc = append_json(&acc->qcanon, norm ? norm : v);
        if (!rc) rc = ft_buf_printf(&acc->qcanon, ",");
    }
    if (a->field == F_HIST && iv <= 0 && !rc)
        rc = ft_err_set(err, FT_EINVAL,
                        "recipe %lld (%s): attribute 'amax_history_len' must be >= 1",
                        (long long)def->id, tn);
    store_field(a, v, iv, acc, out);
    json_decref(norm);
    json_decref(own);
    return rc;
}

/* Whether key is an attribute of type t's table or private object state (a leading '_'). */
static int known_key(int t, const char *key)
{
    int known = key[0] == '_'; /* private attributes (e.g. _cached_repr) are state */
    for (size_t i = 0; i < recipe_types[t].n_attrs; i++)
        if (!strcmp(recipe_types[t].attrs[i].name, key)) known = 1;
    return known;
}

/* Fields the table does not know: kept in the canonical text (every attribute counts in the
 * hash) as ",+name=value", sorted by name. */
static int append_unknown(const ft_recipe_def *def, int t, const json_t *attrs, ft_buf *canon,
                          ft_err *err)
{
    size_t n_extra = 0;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)attrs, key, val)
    {
        if (!known_key(t, key)) n_extra++;
    }
    if (!n_extra) return FT_OK;
    const char **keys = ft_calloc(n_extra, sizeof *keys);
    if (!keys) return ft_err_set(err, FT_ENOMEM, "recipe %lld: out of memory", (long long)def->id);
    size_t k = 0;
    json_object_foreach((json_t *)attrs, key, val)
    {
        if (known_key(t, key)) continue;
        size_t j = k++;
        while (j > 0 && strcmp(keys[j - 1], key) > 0) {
            keys[j] = keys[j - 1];
            j--;
        }
        keys[j] = key;
    }
    int rc = FT_OK;
    for (size_t i = 0; i < n_extra && !rc; i++) {
        rc = ft_buf_printf(canon, ",+%s=", keys[i]);
        if (!rc) rc = append_json(canon, json_object_get(attrs, keys[i]));
    }
    ft_free(keys);
    if (rc) return ft_err_set(err, FT_ENOMEM, "recipe %lld: out of memory", (long long)def->id);
    return FT_OK;
}

int ft_recipe_parse(const ft_recipe_def *def, const ft_env *env, ft_recipe_int *out, ft_err *err)
{
    memset(out, 0, sizeof *out);
    out->id = def->id;
    out->pub.obj = def->obj;
    const char *own_name = def->type ? def->type : "(null)";
    int t = recipe_type_index(own_name);
    json_t *attrs = NULL;
    int rc = load_attrs(def, own_name, &attrs, err);
    if (rc) return rc;
    if (t < 0 && (rc = subclass_base(def, own_name, attrs, &t, err))) {
        json_decref(attrs);
        return rc;
    }
    out->pub.type = (ft_recipe_type)t;
    const char *tn = recipe_types[t].name;

    /* the canonical texts start with the recipe's own class: TE keys plans and rebuilds
     * quantizers by it, while its fusion checks and fields are the TE base's */
    parse_acc acc = {.canon = {0}, .qcanon = {0}, .qp_inp = -1, .qp_weight = -1, .qp_grad = -1};
    rc = ft_buf_printf(&acc.canon, "%s{", own_name);
    if (!rc) rc = ft_buf_printf(&acc.qcanon, "%s{", own_name);
    for (size_t i = 0; i < recipe_types[t].n_attrs && !rc; i++)
        rc = parse_attr(def, tn, &recipe_types[t].attrs[i], i, attrs, env, &acc, out, err);
    if (rc) goto fail;
    if (attrs && (rc = append_unknown(def, t, attrs, &acc.canon, err))) goto fail;
    rc = ft_buf_printf(&acc.canon, "}");
    if (rc) goto nomem;

    if (out->pub.type == FT_RT_NVFP4) {
        /* __post_init__: inp RHT = !disable_rht; weight 2D = !disable_2d; grad SR = !disable_sr */
        out->pub.q_rht = (uint8_t)(acc.qp_inp >= 0 ? acc.qp_inp : !out->pub.disable_rht);
        out->pub.q_2d = (uint8_t)(acc.qp_weight >= 0 ? acc.qp_weight : !out->pub.disable_2d);
        out->pub.q_sr = (uint8_t)(acc.qp_grad >= 0 ? acc.qp_grad : !out->pub.disable_sr);
    }
    out->qparams_recorded = acc.qp_inp >= 0 || acc.qp_weight >= 0 || acc.qp_grad >= 0;
    rc = ft_buf_printf(&acc.qcanon, "}");
    if (rc) goto nomem;
    out->canon = ft_strndup((const char *)acc.canon.data, acc.canon.len);
    if (!out->canon) goto nomem;
    out->pub.hash = ft_hash64(acc.canon.data, acc.canon.len);
    out->qbase = ft_hash64(acc.qcanon.data, acc.qcanon.len);
    ft_recipe_set_qflags(out, out->pub.q_rht, out->pub.q_sr, out->pub.q_2d);
    ft_buf_free(&acc.canon);
    ft_buf_free(&acc.qcanon);
    json_decref(attrs);
    return FT_OK;
nomem:
    rc = ft_err_set(err, FT_ENOMEM, "recipe %lld: out of memory", (long long)def->id);
fail:
    ft_buf_free(&acc.canon);
    ft_buf_free(&acc.qcanon);
    json_decref(attrs);
    ft_free(out->canon);
    out->canon = NULL;
    return rc;
}

void ft_recipe_set_qflags(ft_recipe_int *r, uint8_t rht, uint8_t sr, uint8_t twod)
{
    r->pub.q_rht = rht;
    r->pub.q_sr = sr;
    r->pub.q_2d = twod;
    r->pub.qhash = ft_hash_mix(r->qbase, (uint64_t)rht | (uint64_t)sr << 1 | (uint64_t)twod << 2);
}

void ft_recipe_int_free(ft_recipe_int *r)
{
    if (!r) return;
    ft_free(r->canon);
    r->canon = NULL;
}

void ft_recipe_none(ft_recipe_int *out)
{
    memset(out, 0, sizeof *out);
    out->id = -1;
    out->pub.type = FT_RT_NONE;
    out->pub.obj = 0;
    out->pub.hash = ft_hash64("None", 4);
    out->pub.qhash = 0;
}

/* ---- what differs between two recipes ------------------------------------------------------ */
/* One "name=value" field of a canonical text. */
typedef struct canon_field {
    const char *name, *val;
    size_t name_len, val_len;
} canon_field;

/* The field at *p (just after '{' or at a ','), *p moved past it: 1, or 0 at the end. Values are
 * compact JSON: commas inside strings, objects and arrays do not end them. */
static int canon_next(const char **p, canon_field *f)
{
    const char *s = *p;
    if (*s == ',') s++;
    if (!*s || *s == '}') return 0;
    f->name = s;
    while (*s && *s != '=')
        s++;
    if (*s != '=') return 0;
    f->name_len = (size_t)(s - f->name);
    f->val = ++s;
    int depth = 0, in_str = 0;
    for (; *s; s++) {
        if (in_str) {
            if (*s == '\\' && s[1])
                s++;
            else if (*s == '"')
                in_str = 0;
        } else if (*s == '"') {
            in_str = 1;
        } else if (*s == '{' || *s == '[') {
            depth++;
        } else if (*s == '}' || *s == ']') {
            if (!depth) break;
            depth--;
        } else if (*s == ',' && !depth) {
            break;
        }
    }
    f->val_len = (size_t)(s - f->val);
    *p = s;
    return 1;
}

/* A canonical JSON value as Python prints it: True, False, None, 'text'; others as they are. */
static void py_value(const char *v, size_t n, char *buf, size_t cap)
{
    if (n == 4 && !memcmp(v, "true", 4))
        snprintf(buf, cap, "True");
    else if (n == 5 && !memcmp(v, "false", 5))
        snprintf(buf, cap, "False");
    else if (n == 4 && !memcmp(v, "null", 4))
        snprintf(buf, cap, "None");
    else if (n >= 2 && v[0] == '"' && v[n - 1] == '"' && !memchr(v, '\\', n))
        snprintf(buf, cap, "'%.*s'", (int)(n - 2), v + 1);
    else
        snprintf(buf, cap, "%.*s", (int)n, v);
}

/* The recipe's canonical text ("None" for recipe -1). */
static const char *canon_of(const ft_model *m, int32_t recipe)
{
    const ft_recipe_int *r = ft_model_recipe_int(m, recipe);
    return r->canon ? r->canon : "None";
}

void ft_model_recipe_class(const ft_model *m, int32_t recipe, char *buf, size_t cap)
{
    const char *c = canon_of(m, recipe), *brace = strchr(c, '{');
    snprintf(buf, cap, "%.*s", (int)(brace ? (size_t)(brace - c) : strlen(c)), c);
}

static void add_change(ft_recipe_change *out, uint32_t cap, uint32_t *n, const char *name,
                       size_t name_len, const char *from, size_t from_len, const char *to,
                       size_t to_len)
{
    if (*n < cap) {
        ft_recipe_change *c = &out[*n];
        snprintf(c->name, sizeof c->name, "%.*s", (int)name_len, name);
        if (from)
            py_value(from, from_len, c->from, sizeof c->from);
        else
            snprintf(c->from, sizeof c->from, "(absent)");
        if (to)
            py_value(to, to_len, c->to, sizeof c->to);
        else
            snprintf(c->to, sizeof c->to, "(absent)");
    }
    (*n)++;
}

/* Field `name` of canonical text c, or 0. */
static int canon_find(const char *c, const char *name, size_t len, canon_field *out)
{
    const char *p = strchr(c, '{');
    if (!p) return 0;
    p++;
    canon_field f;
    while (canon_next(&p, &f))
        if (f.name_len == len && !memcmp(f.name, name, len)) {
            *out = f;
            return 1;
        }
    return 0;
}

uint32_t ft_model_recipe_diff(const ft_model *m, int32_t a, int32_t b, ft_recipe_change *out,
                              uint32_t cap)
{
    char ca[sizeof out->from], cb[sizeof out->to];
    ft_model_recipe_class(m, a, ca, sizeof ca);
    ft_model_recipe_class(m, b, cb, sizeof cb);
    uint32_t n = 0;
    if (strcmp(ca, cb)) {
        add_change(out, cap, &n, "type", 4, NULL, 0, NULL, 0);
        if (cap) {
            snprintf(out[0].from, sizeof out[0].from, "%s", ca);
            snprintf(out[0].to, sizeof out[0].to, "%s", cb);
        }
        return n;
    }
    const char *ta = canon_of(m, a), *tb = canon_of(m, b);
    const char *p = strchr(ta, '{');
    canon_field f, g;
    for (p = p ? p + 1 : ""; canon_next(&p, &f);) {
        if (!canon_find(tb, f.name, f.name_len, &g))
            add_change(out, cap, &n, f.name, f.name_len, f.val, f.val_len, NULL, 0);
        else if (f.val_len != g.val_len || memcmp(f.val, g.val, f.val_len))
            add_change(out, cap, &n, f.name, f.name_len, f.val, f.val_len, g.val, g.val_len);
    }
    p = strchr(tb, '{');
    for (p = p ? p + 1 : ""; canon_next(&p, &g);)
        if (!canon_find(ta, g.name, g.name_len, &f))
            add_change(out, cap, &n, g.name, g.name_len, NULL, 0, g.val, g.val_len);
    return n;
}
