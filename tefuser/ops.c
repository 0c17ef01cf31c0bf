/*
 * ops.c - the basic-op catalog: TE basic-op class names, the attributes a fusion gate or a
 * run-time check reads, with TE's constructor defaults, and the parser of a fuser's op list
 * (docs/fuser-model.md, "Ops"). Op classes the catalog does not know are opaque (FT_OP_OTHER).
 */
#include "tefuser_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- basic-op catalog --------------------------------------------------------------------- */
static const char *const op_names[FT_OP_COUNT] = {
    [FT_OP_GROUPED_LINEAR] = "GroupedLinear",
    [FT_OP_SCALED_SWIGLU] = "ScaledSwiGLU",
    [FT_OP_SCALED_CLAMPED_QGEGLU] = "ScaledClampedQGeGLU",
    [FT_OP_SCALED_SRELU] = "ScaledSReLU",
    [FT_OP_SWIGLU] = "SwiGLU",
    [FT_OP_CLAMPED_SWIGLU] = "ClampedSwiGLU",
    [FT_OP_BASIC_LINEAR] = "BasicLinear",
    [FT_OP_BIAS] = "Bias",
    [FT_OP_GELU] = "GELU",
    [FT_OP_RELU] = "ReLU",
    [FT_OP_SRELU] = "SReLU",
    [FT_OP_GLU] = "GLU",
    [FT_OP_GEGLU] = "GEGLU",
    [FT_OP_QGELU] = "QGELU",
    [FT_OP_QGEGLU] = "QGEGLU",
    [FT_OP_REGLU] = "ReGLU",
    [FT_OP_SREGLU] = "SReGLU",
    [FT_OP_SILU] = "SiLU",
    [FT_OP_IDENTITY] = "Identity",
    [FT_OP_RESHAPE] = "Reshape",
    [FT_OP_CONSTANT_SCALE] = "ConstantScale",
    [FT_OP_DROPOUT] = "Dropout",
    [FT_OP_QUANTIZE] = "Quantize",
    [FT_OP_LAYER_NORM] = "LayerNorm",
    [FT_OP_RMS_NORM] = "RMSNorm",
    [FT_OP_L2_NORMALIZATION] = "L2Normalization",
    [FT_OP_ADD_EXTRA_INPUT] = "AddExtraInput",
    [FT_OP_MAKE_EXTRA_OUTPUT] = "MakeExtraOutput",
    [FT_OP_ALL_GATHER] = "AllGather",
    [FT_OP_ALL_REDUCE] = "AllReduce",
    [FT_OP_REDUCE_SCATTER] = "ReduceScatter",
    [FT_OP_OTHER] = "?",
};

/* ---- op attributes ------------------------------------------------------------------------ */
enum { AK_INT, AK_BOOL, AK_FLOAT, AK_INT_OR_NULL, AK_TP_MODE, AK_DTYPE, AK_UB_OPTIONS, AK_DERIVED };

typedef struct op_attr_spec {
    const char *name; /* JSON key */
    uint8_t kind;
    uint8_t required; /* TE constructor argument without default */
    uint64_t types;   /* op types that have it */
    int64_t dflt;     /* default (ints, bools, enums) */
    double fdflt;     /* default (floats) */
} op_attr_spec;

/* Defaults are TE's constructor defaults; dtype defaults to torch.get_default_dtype()
 * (float32). tensor_parallel_size and process_group_size default to the world size (the default
 * process group), see ft_ops_parse. */
static const op_attr_spec op_attrs[FT_OA_COUNT] = {
    [FT_OA_NUM_GROUPS] = {"num_groups", AK_INT, 1, FT_OPS_GL, 0, 0},
    [FT_OA_IN_FEATURES] = {"in_features", AK_INT, 1, FT_OPS_GL | FT_OPS_BL, 0, 0},
    [FT_OA_OUT_FEATURES] = {"out_features", AK_INT, 1, FT_OPS_GL | FT_OPS_BL, 0, 0},
    [FT_OA_BIAS] = {"bias", AK_BOOL, 0, FT_OPS_GL, 1, 0},
    [FT_OA_SCALE_BIAS] = {"scale_bias", AK_BOOL, 0, FT_OPS_GL, 0, 0},
    [FT_OA_SINGLE_GROUPED_WEIGHT] = {"single_grouped_weight", AK_BOOL, 0, FT_OPS_GL, 0, 0},
    [FT_OA_SINGLE_GROUPED_BIAS] = {"single_grouped_bias", AK_BOOL, 0, FT_OPS_GL, 0, 0},
    [FT_OA_DTYPE] = {"dtype", AK_DTYPE, 0, FT_OPS_GL | FT_OPS_BL, FT_DT_FLOAT32, 0},
    [FT_OA_WEIGHT_RG] = {"weight_requires_grad", AK_BOOL, 0, FT_OPS_GL | FT_OPS_BL, 1, 0},
    [FT_OA_GLU_INTERLEAVE] = {"glu_interleave_size", AK_INT_OR_NULL, 0, FT_OPS_GLU_ACTS, 0, 0},
    [FT_OA_ACT_RECOMPUTE] = {"activation_recompute_in_mlp", AK_BOOL, 0, FT_OPS_SCALED_ACTS, 0, 0},
    [FT_OA_LIMIT] = {"limit", AK_FLOAT, 0, FT_OPS_CLAMPED, 0, 7.0},
    [FT_OA_ALPHA] = {"alpha", AK_FLOAT, 0, FT_OPS_CLAMPED, 0, 1.702},
    [FT_OA_GLU_LINEAR_OFFSET] = {"glu_linear_offset", AK_FLOAT, 0, FT_OPS_CLAMPED, 0, 1.0},
    [FT_OA_TP_MODE] = {"tensor_parallel_mode", AK_TP_MODE, 0, FT_OPS_BL, FT_TP_NONE, 0},
    [FT_OA_TP_SIZE] = {"tensor_parallel_size", AK_INT, 0, FT_OPS_BL, -1, 0},
    [FT_OA_SEQUENCE_PARALLEL] = {"sequence_parallel", AK_BOOL, 0, FT_OPS_BL, 0, 0},
    [FT_OA_USERBUFFERS] = {"userbuffers", AK_UB_OPTIONS, 0, FT_OPS_BL, 0, 0},
    [FT_OA_IN_PLACE] = {"in_place", AK_BOOL, 0, FT_OPS_EXTRA_IO, 0, 0},
    [FT_OA_SCALE] = {"scale", AK_FLOAT, 0, FT_OPB(FT_OP_CONSTANT_SCALE), 0, 1.0},
    [FT_OA_SIZE] = {"size", AK_INT, 0, FT_OPB(FT_OP_BIAS), 0, 0},
    [FT_OA_QUANT_FORWARD] = {"forward", AK_BOOL, 0, FT_OPB(FT_OP_QUANTIZE), 1, 0},
    [FT_OA_QUANT_BACKWARD] = {"backward", AK_BOOL, 0, FT_OPB(FT_OP_QUANTIZE), 0, 0},
    [FT_OA_PROCESS_GROUP_SIZE] = {"process_group_size", AK_INT, 0, FT_OPS_COLLECTIVES, -1, 0},
    [FT_OA_GRAD_OUTPUT_QUANTIZER] = {"grad_output_quantizer", AK_DERIVED, 0, 0, 0, 0},
};

const char *ft_op_attr_name(ft_op_attr a)
{
    return (unsigned)a < FT_OA_COUNT ? op_attrs[a].name : "?";
}

void ft_op_attr_text(const ft_op *op, ft_op_attr a, char *buf, size_t cap)
{
    static const char *const dtypes[] = {"torch.float32", "torch.float16", "torch.bfloat16"};
    static const char *const modes[] = {"None", "'column'", "'row'"};
    const int64_t v = op->v[a];
    switch ((unsigned)a < FT_OA_COUNT ? op_attrs[a].kind : AK_INT) {
    case AK_BOOL:
    case AK_DERIVED:
        snprintf(buf, cap, "%s", v ? "True" : "False");
        break;
    case AK_FLOAT:
        snprintf(buf, cap, "%g", op->f[a]);
        break;
    case AK_INT_OR_NULL:
        if (v)
            snprintf(buf, cap, "%lld", (long long)v);
        else
            snprintf(buf, cap, "None");
        break;
    case AK_TP_MODE:
        snprintf(buf, cap, "%s", (uint64_t)v < 3 ? modes[v] : "?");
        break;
    case AK_DTYPE:
        snprintf(buf, cap, "%s", (uint64_t)v < 3 ? dtypes[v] : "?");
        break;
    case AK_UB_OPTIONS:
        snprintf(buf, cap, "%s", v ? "an options dict" : "None");
        break;
    default:
        snprintf(buf, cap, "%lld", (long long)v);
    }
}

int ft_op_has_attr(const ft_op *op, ft_op_attr a)
{
    return op_attrs[a].kind == AK_DERIVED || (op_attrs[a].types & FT_OPB(op->type)) != 0;
}

uint64_t ft_op_attr_hash(const ft_op *op, ft_op_attr a, uint64_t h)
{
    if (op_attrs[a].kind == AK_FLOAT) {
        double d = op->f[a];
        uint64_t bits;
        if (d == 0) d = 0; /* -0.0 == 0.0 */
        memcpy(&bits, &d, sizeof bits);
        return ft_hash_mix(h, bits);
    }
    return ft_hash_mix(h, (uint64_t)op->v[a]);
}

static int parse_op_attr(const json_t *v, ft_op_attr a, ft_op *op, int64_t fuser_id, uint32_t idx,
                         ft_err *err)
{
    const op_attr_spec *s = &op_attrs[a];
    const char *want = NULL;
    switch (s->kind) {
    case AK_INT:
        if (!json_is_integer(v)) {
            want = "an integer";
            break;
        }
        op->v[a] = json_integer_value(v);
        return FT_OK;
    case AK_BOOL:
        if (!json_is_boolean(v)) {
            want = "a bool";
            break;
        }
        op->v[a] = json_is_true(v);
        return FT_OK;
    case AK_FLOAT:
        if (!json_is_number(v)) {
            want = "a number";
            break;
        }
        op->f[a] = json_number_value(v);
        return FT_OK;
    case AK_INT_OR_NULL:
        if (json_is_null(v)) {
            op->v[a] = 0;
            return FT_OK;
        }
        if (!json_is_integer(v) || json_integer_value(v) <= 0) {
            want = "a positive integer or null";
            break;
        }
        op->v[a] = json_integer_value(v);
        return FT_OK;
    case AK_TP_MODE:
        if (json_is_null(v)) {
            op->v[a] = FT_TP_NONE;
            return FT_OK;
        }
        if (json_is_string(v) && !strcmp(json_string_value(v), "column")) {
            op->v[a] = FT_TP_COLUMN;
            return FT_OK;
        }
        if (json_is_string(v) && !strcmp(json_string_value(v), "row")) {
            op->v[a] = FT_TP_ROW;
            return FT_OK;
        }
        want = "null, \"column\" or \"row\"";
        break;
    case AK_UB_OPTIONS:
        /* TE's userbuffers_options: a dict enables Userbuffers (the gates test `is not None`),
         * null disables them; true/false is the form earlier captures recorded */
        if (json_is_object(v) || json_is_boolean(v) || json_is_null(v)) {
            op->v[a] = json_is_object(v) || json_is_true(v);
            return FT_OK;
        }
        want = "TE's userbuffers_options (an object or null) or a bool";
        break;
    case AK_DTYPE: {
        static const char *const names[] = {"float32", "float16", "bfloat16"};
        const char *t = json_is_string(v) ? json_string_value(v) : NULL;
        if (t && !strncmp(t, "torch.", 6)) t += 6;
        for (int i = 0; t && i < 3; i++)
            if (!strcmp(t, names[i])) {
                op->v[a] = i;
                return FT_OK;
            }
        want = "\"float32\", \"float16\" or \"bfloat16\"";
        break;
    }
    default:
        return FT_OK;
    }
    return ft_err_set(err, FT_EINVAL, "fuser %lld op %u (%s): attribute '%s' must be %s",
                      (long long)fuser_id, idx, op->name, s->name, want);
}

static int parse_one_op(const json_t *jo, int64_t fuser_id, uint32_t idx, int64_t world_size,
                        ft_op *op, ft_err *err)
{
    memset(op, 0, sizeof *op);
    if (!json_is_object(jo))
        return ft_err_set(err, FT_EINVAL, "fuser %lld op %u: not a JSON object",
                          (long long)fuser_id, idx);
    const json_t *jt = json_object_get(jo, "type");
    if (!json_is_string(jt))
        return ft_err_set(err, FT_EINVAL, "fuser %lld op %u: field 'type' missing or not a string",
                          (long long)fuser_id, idx);
    const char *tname = json_string_value(jt);
    op->type = FT_OP_OTHER;
    for (int t = 0; t < FT_OP_OTHER; t++)
        if (!strcmp(tname, op_names[t])) op->type = (uint8_t)t;
    if (op->type == FT_OP_OTHER) {
        op->name = ft_strdup(tname);
        if (!op->name)
            return ft_err_set(err, FT_ENOMEM, "fuser %lld: out of memory", (long long)fuser_id);
    } else {
        op->name = op_names[op->type];
    }
    const json_t *attrs = json_object_get(jo, "attrs");
    if (attrs && !json_is_object(attrs) && !json_is_null(attrs))
        return ft_err_set(err, FT_EINVAL, "fuser %lld op %u (%s): field 'attrs' is not an object",
                          (long long)fuser_id, idx, op->name);
    uint64_t tb = FT_OPB(op->type);
    for (int a = 0; a < FT_OA_COUNT; a++) {
        const op_attr_spec *s = &op_attrs[a];
        op->v[a] = s->dflt;
        op->f[a] = s->fdflt;
        if (!(s->types & tb)) continue;
        const json_t *v = json_is_object(attrs) ? json_object_get(attrs, s->name) : NULL;
        if (!v) {
            if (s->required)
                return ft_err_set(err, FT_EINVAL,
                                  "fuser %lld op %u (%s): missing required attribute '%s'",
                                  (long long)fuser_id, idx, op->name, s->name);
            continue;
        }
        int rc = parse_op_attr(v, (ft_op_attr)a, op, fuser_id, idx, err);
        if (rc) return rc;
        op->given |= 1ull << a;
    }
    op->v_raw_tp_mode = (uint8_t)op->v[FT_OA_TP_MODE];
    if (op->type == FT_OP_GROUPED_LINEAR &&
        (op->v[FT_OA_NUM_GROUPS] <= 0 || op->v[FT_OA_IN_FEATURES] <= 0 ||
         op->v[FT_OA_OUT_FEATURES] <= 0))
        return ft_err_set(err, FT_EINVAL,
                          "fuser %lld op %u (GroupedLinear): num_groups, in_features and "
                          "out_features must be positive",
                          (long long)fuser_id, idx);
    /* GroupedLinear: scale_bias only counts with a bias (TE: _scale_bias = scale_bias and bias) */
    if (!op->v[FT_OA_BIAS]) op->v[FT_OA_SCALE_BIAS] = 0;
    /* BasicLinear._canonicalize_tensor_parallelism: group size is the TP group's (default: the
     * world); a group of one disables tensor parallelism. */
    if (op->type == FT_OP_BASIC_LINEAR) {
        if (op->v[FT_OA_TP_SIZE] < 0)
            op->v[FT_OA_TP_SIZE] = op->v[FT_OA_TP_MODE] == FT_TP_NONE ? 1 : world_size;
        if (op->v[FT_OA_TP_SIZE] <= 0)
            return ft_err_set(err, FT_EINVAL,
                              "fuser %lld op %u (BasicLinear): tensor_parallel_size must be >= 1",
                              (long long)fuser_id, idx);
        if (op->v[FT_OA_TP_SIZE] == 1) {
            op->v[FT_OA_TP_MODE] = FT_TP_NONE;
            op->v[FT_OA_SEQUENCE_PARALLEL] = 0;
        }
    }
    if (tb & FT_OPS_COLLECTIVES) {
        if (op->v[FT_OA_PROCESS_GROUP_SIZE] < 0) op->v[FT_OA_PROCESS_GROUP_SIZE] = world_size;
    } else {
        op->v[FT_OA_PROCESS_GROUP_SIZE] = 0;
    }
    if (!(tb & FT_OPB(FT_OP_BASIC_LINEAR))) op->v[FT_OA_TP_SIZE] = 0;
    /* num_quantizers("backward") > 0: BasicLinear (1), GroupedLinear (G), Quantize(backward) */
    op->v[FT_OA_GRAD_OUTPUT_QUANTIZER] =
        op->type == FT_OP_BASIC_LINEAR || op->type == FT_OP_GROUPED_LINEAR ||
        (op->type == FT_OP_QUANTIZE && op->v[FT_OA_QUANT_BACKWARD]);
    return FT_OK;
}

void ft_ops_free(ft_op *ops, uint32_t n)
{
    if (!ops) return;
    for (uint32_t i = 0; i < n; i++)
        if (ops[i].type == FT_OP_OTHER) ft_free((void *)ops[i].name);
    ft_free(ops);
}

int ft_ops_parse(const char *ops_json, int64_t fuser_id, int64_t world_size, ft_op **out,
                 uint32_t *n_out, ft_err *err)
{
    *out = NULL;
    *n_out = 0;
    json_error_t je;
    json_t *root = json_loads(ops_json ? ops_json : "", 0, &je);
    if (!root)
        return ft_err_set(err, FT_EINVAL, "fuser %lld: field 'ops' is not valid JSON (%s at %d)",
                          (long long)fuser_id, je.text, je.position);
    int rc = FT_OK;
    ft_op *ops = NULL;
    uint32_t n = 0;
    if (!json_is_array(root)) {
        rc = ft_err_set(err, FT_EINVAL, "fuser %lld: field 'ops' is not a JSON array",
                        (long long)fuser_id);
        goto fail;
    }
    size_t cnt = json_array_size(root);
    if (cnt > 1u << 20) {
        rc =
            ft_err_set(err, FT_EINVAL, "fuser %lld: %zu ops is too many", (long long)fuser_id, cnt);
        goto fail;
    }
    ops = ft_calloc(cnt ? cnt : 1, sizeof *ops);
    if (!ops) {
        rc = ft_err_set(err, FT_ENOMEM, "fuser %lld: out of memory", (long long)fuser_id);
        goto fail;
    }
    for (size_t i = 0; i < cnt; i++) {
        rc = parse_one_op(json_array_get(root, i), fuser_id, (uint32_t)i, world_size, &ops[i], err);
        if (rc) goto fail;
    }
    n = (uint32_t)cnt;
    json_decref(root);
    *out = ops;
    *n_out = n;
    return FT_OK;
fail:
    ft_ops_free(ops, ops ? (uint32_t)json_array_size(root) : 0); /* unparsed entries are zero */
    json_decref(root);
    return rc;
}
