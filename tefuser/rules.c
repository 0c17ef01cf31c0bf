/*
 * rules.c - the fusion rules of TransformerEngine 2.20 (PR 3410 head), as data
 * (docs/fuser-model.md, "Fusion rules"; the op catalog they match is ops.c).
 *
 * - Rule table: one row per registered fusion function, in registry order per pass: the joint
 *   pass [fuse_srelu_ops, fuse_ops] (both registered with prepend=True, SReLU last, so first),
 *   four forward and five backward fusions. A row gives the window (op types per slot, optional
 *   slots, the condition for taking an optional op), the gate, and every attribute the gate and
 *   the import-time registration read. Gates read attributes only through rd_*(), which check
 *   the read against the row's declaration when a test asks for the audit.
 * - Passes: each rule scans the unit list greedily left to right the way its TE function does
 *   (FT_SCAN_SLIDE: fixed window, shift by one on a miss, rescan at the window start after a
 *   match; FT_SCAN_CONSUME: an anchor op plus greedily taken optional ops, skipped together on
 *   a miss).
 * Limits: cuDNN frontend wrappers are assumed importable exactly when the frontend version has
 * them (>= 1.23.0; SReLU ones >= 1.24.0); the wgrad wrapper can be declared missing with the env
 * key cudnn_wgrad_wrapper=0. Op classes the catalog does not know are opaque (FT_OP_OTHER).
 */
#include "tefuser_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- attribute reads (audited) ------------------------------------------------------------ */
static void audit(const ft_gate_ctx *c, uint8_t scope, uint8_t slot, uint8_t attr)
{
    if (!c->rule || !c->undeclared) return;
    for (unsigned i = 0; i < c->rule->n_reads; i++) {
        const ft_read *r = &c->rule->reads[i];
        if (r->scope == scope && r->attr == attr && (scope != FT_SCOPE_OP || r->slot == slot))
            return;
    }
    *c->undeclared = 1;
}

static const ft_op *unit_op(const ft_gate_ctx *c, const ft_unit *u)
{
    /* a fused op answers for its last basic op (FusedOperation.get_grad_output_quantizer) */
    return &c->ops[u->hi];
}

/* The why-unfused query notes every read; the last one before a rejection is its cause. */
static void note(const ft_gate_ctx *c, uint8_t scope, uint8_t slot, uint8_t attr, uint32_t op)
{
    if (!c->last) return;
    c->last->set = 1;
    c->last->what = (ft_read){scope, slot, attr};
    c->last->op = op;
}

static int64_t rd_op(const ft_gate_ctx *c, const ft_unit *w, int slot, ft_op_attr a)
{
    audit(c, FT_SCOPE_OP, (uint8_t)slot, (uint8_t)a);
    note(c, FT_SCOPE_OP, (uint8_t)slot, (uint8_t)a, w[slot].hi);
    return unit_op(c, &w[slot])->v[a];
}

static double rd_opf(const ft_gate_ctx *c, const ft_unit *w, int slot, ft_op_attr a)
{
    audit(c, FT_SCOPE_OP, (uint8_t)slot, (uint8_t)a);
    note(c, FT_SCOPE_OP, (uint8_t)slot, (uint8_t)a, w[slot].hi);
    return unit_op(c, &w[slot])->f[a];
}

static int64_t rd_recipe(const ft_gate_ctx *c, ft_recipe_read rr)
{
    audit(c, FT_SCOPE_RECIPE, 0, (uint8_t)rr);
    note(c, FT_SCOPE_RECIPE, 0, (uint8_t)rr, 0);
    return ft_recipe_read_value(c->recipe, rr);
}

static int64_t rd_env(const ft_gate_ctx *c, ft_env_attr a)
{
    audit(c, FT_SCOPE_ENV, 0, (uint8_t)a);
    note(c, FT_SCOPE_ENV, 0, (uint8_t)a, 0);
    return c->env->v[a];
}

static int rd_env_fe_at_least(const ft_gate_ctx *c, const char *min)
{
    audit(c, FT_SCOPE_ENV, 0, FT_EA_CUDNN_FRONTEND);
    note(c, FT_SCOPE_ENV, 0, FT_EA_CUDNN_FRONTEND, 0);
    return ft_env_fe_at_least(c->env, min);
}

/* A gate's check failed on the read just made: reject the window (1), or, when a why-unfused
 * query collects every failing check (c->fails), record the read with what the check needs and
 * go on to the gate's next check (0). */
static int reject(const ft_gate_ctx *c, const char *need)
{
    if (!c->fails) return 1;
    ft_gate_fails *g = c->fails;
    if (c->last && c->last->set && g->n < FT_MAX_GATE_FAILS) {
        g->f[g->n].what = c->last->what;
        g->f[g->n].op = c->last->op;
        g->f[g->n].need = need;
        g->n++;
    }
    return 0;
}

int64_t ft_recipe_read_value(const ft_recipe_model *r, ft_recipe_read rr)
{
    switch (rr) {
    case FT_RR_IS_NONE:
        return r->type == FT_RT_NONE;
    case FT_RR_MXFP8:
        return r->type == FT_RT_MXFP8;
    case FT_RR_NVFP4:
        return r->type == FT_RT_NVFP4;
    case FT_RR_BACKWARD_OVERRIDE:
        return r->bo; /* None recipe: the fusions read None */
    case FT_RR_DISABLE_RHT:
        return r->type == FT_RT_NVFP4 ? r->disable_rht : -1;
    default:
        return -1;
    }
}

const char *ft_recipe_read_name(ft_recipe_read r)
{
    static const char *const names[FT_RR_COUNT] = {"is_none", "mxfp8()", "nvfp4()",
                                                   "backward_override", "disable_rht"};
    return (unsigned)r < FT_RR_COUNT ? names[r] : "?";
}

/* ---- grouped MLP (ops/fused/grouped_mlp.py) ----------------------------------------------- */
static void reg_fail(ft_reg_check *out, uint32_t cap, uint32_t *n, ft_env_attr a, const char *text,
                     const char *need)
{
    if (*n < cap) out[*n] = (ft_reg_check){(uint8_t)a, text, need};
    (*n)++;
}

/* _GroupedMLP_CuTeGEMMBase.is_supported() for the class whose activation kernels are act/dact
 * (GroupedMLP_CuTeGEMMUnary checks FE >= 1.24.0 first): the env flag > 0, SM 10.x, cuDNN FE >=
 * 1.23.0, and `from cudnn import ...` of the activation, its backward, the quant kernel and (unless
 * NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP >= 1) the wgrad kernel. Every check that fails, in
 * TE's order; the imports only when the frontend itself passes (they come with it). */
static uint32_t mlp_fails(const ft_env *env, int srelu, ft_reg_check *out, uint32_t cap)
{
    const ft_env_attr act = srelu ? FT_EA_WRAP_SRELU : FT_EA_WRAP_GLU;
    const ft_env_attr dact = srelu ? FT_EA_WRAP_DSRELU : FT_EA_WRAP_DGLU;
    uint32_t n = 0;
    int fe_ok = 1;
    if (srelu && !ft_env_fe_at_least(env, "1.24.0")) {
        reg_fail(out, cap, &n, FT_EA_CUDNN_FRONTEND,
                 "cudnn_frontend is older than 1.24.0 (the SReLU kernels) or not installed",
                 ">= 1.24.0");
        fe_ok = 0;
    }
    if (env->v[FT_EA_CUTEDSL_FUSED_GROUPED_MLP] <= 0)
        reg_fail(out, cap, &n, FT_EA_CUTEDSL_FUSED_GROUPED_MLP,
                 "env NVTE_CUTEDSL_FUSED_GROUPED_MLP is not set to 1", "1");
    if (env->v[FT_EA_DEVICE_CC] / 10 != 10)
        reg_fail(out, cap, &n, FT_EA_DEVICE_CC, "the device capability (device_cc) is not 10.x",
                 "10.x (SM100)");
    if (fe_ok && !ft_env_fe_at_least(env, "1.23.0")) {
        reg_fail(out, cap, &n, FT_EA_CUDNN_FRONTEND,
                 "cudnn_frontend is older than 1.23.0 (or not installed)", ">= 1.23.0");
        fe_ok = 0;
    }
    if (!fe_ok) return n;
    if (!env->v[act])
        reg_fail(out, cap, &n, act,
                 srelu ? "cudnn.grouped_gemm_srelu_wrapper_sm100 cannot be imported"
                       : "cudnn.grouped_gemm_glu_wrapper_sm100 cannot be imported",
                 "importable");
    if (!env->v[dact])
        reg_fail(out, cap, &n, dact,
                 srelu ? "cudnn.grouped_gemm_dsrelu_wrapper_sm100 cannot be imported"
                       : "cudnn.grouped_gemm_dglu_wrapper_sm100 cannot be imported",
                 "importable");
    if (!env->v[FT_EA_WRAP_QUANT])
        reg_fail(out, cap, &n, FT_EA_WRAP_QUANT,
                 "cudnn.grouped_gemm_quant_wrapper_sm100 cannot be imported", "importable");
    /* grouped_gemm_wgrad_wrapper_sm100 is imported unless wgrad is disabled by env */
    if (env->v[FT_EA_DISABLE_CUTEDSL_WGRAD] < 1 && !env->v[FT_EA_WRAP_WGRAD])
        reg_fail(out, cap, &n, FT_EA_WRAP_WGRAD,
                 "cudnn.grouped_gemm_wgrad_wrapper_sm100 cannot be imported and "
                 "NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP is not 1",
                 "importable (or NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP=1)");
    return n;
}

static const char *glu_unsupported(const ft_env *env)
{
    ft_reg_check c;
    return mlp_fails(env, 0, &c, 1) ? c.text : NULL;
}

static const char *srelu_unsupported(const ft_env *env)
{
    ft_reg_check c;
    return mlp_fails(env, 1, &c, 1) ? c.text : NULL;
}

int ft_grouped_mlp_glu_registered(const ft_env *env)
{
    return glu_unsupported(env) == NULL;
}

int ft_grouped_mlp_srelu_registered(const ft_env *env)
{
    return srelu_unsupported(env) == NULL;
}

static int reg_glu(const ft_env *env)
{
    return ft_grouped_mlp_glu_registered(env);
}

static int reg_srelu(const ft_env *env)
{
    return ft_grouped_mlp_srelu_registered(env);
}

/* fuse_grouped_mlp_ops after the window's types matched: each check reads one value, so that
 * a rejection names the value it failed on. */
static int gate_grouped_mlp(const ft_gate_ctx *c, const ft_unit *w, unsigned present)
{
    (void)present;
    /* 2. recipe is not None and (mxfp8() or nvfp4()) */
    if (rd_recipe(c, FT_RR_IS_NONE)) {
        if (reject(c, "a quantization recipe (MXFP8BlockScaling or NVFP4BlockScaling)")) return 0;
    } else {
        int mx = (int)rd_recipe(c, FT_RR_MXFP8), nv = (int)rd_recipe(c, FT_RR_NVFP4);
        if (!mx && !nv && reject(c, "an MXFP8BlockScaling or NVFP4BlockScaling recipe")) return 0;
        /* 3. NVFP4 fused grouped MLP requires RHT (the plan-time disable_rht check) */
        if (nv && rd_recipe(c, FT_RR_DISABLE_RHT) == 1 &&
            reject(c, "False (the fused NVFP4 kernels need RHT)"))
            return 0;
    }
    uint8_t act = c->ops[w[1].lo].type;
    int glu = act == FT_OP_SCALED_SWIGLU || act == FT_OP_SCALED_CLAMPED_QGEGLU;
    /* 4. ScaledClampedQGeGLU with FE < 1.24 only with the kernel's fixed parameters */
    if (act == FT_OP_SCALED_CLAMPED_QGEGLU && !rd_env_fe_at_least(c, "1.24.0")) {
        if (fabs(rd_opf(c, w, 1, FT_OA_ALPHA) - 1.702) > 0.001 &&
            reject(c, "1.702 (the kernel's own, before cudnn_frontend 1.24.0)"))
            return 0;
        if (fabs(rd_opf(c, w, 1, FT_OA_GLU_LINEAR_OFFSET) - 1.0) > 0.001 &&
            reject(c, "1.0 (the kernel's own, before cudnn_frontend 1.24.0)"))
            return 0;
        if (fabs(rd_opf(c, w, 1, FT_OA_LIMIT) - 7.0) > 0.001 &&
            reject(c, "7.0 (the kernel's own, before cudnn_frontend 1.24.0)"))
            return 0;
    }
    /* 5. validate_grouped_mlp_dims */
    static const char *const m64 = "a multiple of 64";
    if (rd_op(c, w, 0, FT_OA_IN_FEATURES) % 64 && reject(c, m64)) return 0;
    if (rd_op(c, w, 0, FT_OA_OUT_FEATURES) % 64 && reject(c, m64)) return 0;
    const int64_t in2 = rd_op(c, w, 2, FT_OA_IN_FEATURES);
    if (in2 % 64 && reject(c, m64)) return 0;
    if (rd_op(c, w, 2, FT_OA_OUT_FEATURES) % 64 && reject(c, m64)) return 0;
    const int64_t out0 = rd_op(c, w, 0, FT_OA_OUT_FEATURES);
    /* twice in2, compared without forming 2 * in2 (sizes near 2^62 must not wrap) */
    const int twice = out0 % 2 == 0 && out0 / 2 == in2;
    if (!(glu ? twice : out0 == in2) &&
        reject(c, glu ? "twice the second GroupedLinear's in_features"
                      : "the second GroupedLinear's in_features"))
        return 0;
    const int64_t g0 = rd_op(c, w, 0, FT_OA_NUM_GROUPS);
    if (rd_op(c, w, 2, FT_OA_NUM_GROUPS) != g0 && reject(c, "the first GroupedLinear's num_groups"))
        return 0;
    if (glu && rd_op(c, w, 1, FT_OA_GLU_INTERLEAVE) != 32 && reject(c, "32")) return 0;
    return 1;
}

/* ---- Userbuffers linear (ops/fused/userbuffers_{forward,backward}_linear.py) ---------------- */
static int take_ub_linear(const ft_gate_ctx *c, const ft_unit *w, int slot)
{
    return rd_op(c, w, slot, FT_OA_USERBUFFERS) != 0; /* _userbuffers_options is not None */
}

static int take_ub_bias(const ft_gate_ctx *c, const ft_unit *w, int slot)
{
    (void)slot;
    return rd_op(c, w, 0, FT_OA_TP_MODE) != FT_TP_ROW;
}

static int take_ub_rs(const ft_gate_ctx *c, const ft_unit *w, int slot)
{
    (void)slot;
    return rd_op(c, w, 0, FT_OA_TP_MODE) == FT_TP_NONE;
}

static int ub_window_ok(const ft_gate_ctx *c, const ft_unit *w, unsigned present)
{
    if (rd_env(c, FT_EA_WORLD_SIZE) <= 1 && reject(c, "more than 1 (torch.distributed)"))
        return 0; /* distributed initialized, world > 1 */
    int64_t mode = rd_op(c, w, 0, FT_OA_TP_MODE);
    if (!(present & 4u)) {
        if (mode == FT_TP_NONE && reject(c, "'column' or 'row'")) return 0;
        if (rd_op(c, w, 0, FT_OA_TP_SIZE) == 1 && reject(c, "more than 1")) return 0;
        if (mode == FT_TP_ROW && (present & 2u) &&
            reject(c, "'column' (a row-parallel linear takes no bias here)"))
            return 0;
    } else {
        if (mode != FT_TP_NONE && reject(c, "None (before a ReduceScatter)")) return 0;
        if (rd_op(c, w, 2, FT_OA_PROCESS_GROUP_SIZE) == 1 && reject(c, "more than 1")) return 0;
    }
    return 1;
}

static int gate_ub_fwd(const ft_gate_ctx *c, const ft_unit *w, unsigned present)
{
    /* Userbuffers are disabled for backward overrides (the recipe's, None without a recipe) */
    if (rd_recipe(c, FT_RR_BACKWARD_OVERRIDE) != FT_BO_NONE && reject(c, "None")) return 0;
    return ub_window_ok(c, w, present);
}

static int gate_ub_bwd(const ft_gate_ctx *c, const ft_unit *w, unsigned present)
{
    return ub_window_ok(c, w, present);
}

/* ---- forward fusions ---------------------------------------------------------------------- */
static int take_linear_not_row(const ft_gate_ctx *c, const ft_unit *w, int slot)
{
    return rd_op(c, w, slot, FT_OA_TP_MODE) != FT_TP_ROW;
}

static int take_in_place(const ft_gate_ctx *c, const ft_unit *w, int slot)
{
    return rd_op(c, w, slot, FT_OA_IN_PLACE) != 0;
}

static int gate_linear_bias_activation(const ft_gate_ctx *c, const ft_unit *w, unsigned present)
{
    (void)present;
    if (rd_op(c, w, 0, FT_OA_TP_MODE) == FT_TP_ROW && reject(c, "None or 'column'")) return 0;
    int64_t dt = rd_op(c, w, 0, FT_OA_DTYPE); /* linear.weight.dtype in (fp16, bf16) */
    if (dt != FT_DT_FLOAT16 && dt != FT_DT_BFLOAT16 && reject(c, "torch.float16 or torch.bfloat16"))
        return 0;
    return 1;
}

static int gate_linear_scale_add(const ft_gate_ctx *c, const ft_unit *w, unsigned present)
{
    (void)present;
    if (rd_op(c, w, 0, FT_OA_TP_MODE) == FT_TP_ROW && reject(c, "None or 'column'")) return 0;
    if (!rd_op(c, w, 2, FT_OA_IN_PLACE) && reject(c, "True")) return 0;
    return 1;
}

/* ---- backward fusions --------------------------------------------------------------------- */
static int gate_linear_add(const ft_gate_ctx *c, const ft_unit *w, unsigned present)
{
    (void)present;
    if (!rd_op(c, w, 0, FT_OA_IN_PLACE) && reject(c, "True")) return 0;
    if (rd_op(c, w, 1, FT_OA_TP_MODE) == FT_TP_COLUMN && reject(c, "None or 'row'")) return 0;
    return 1;
}

static int gate_linear_scale(const ft_gate_ctx *c, const ft_unit *w, unsigned present)
{
    (void)present;
    if (rd_op(c, w, 0, FT_OA_TP_MODE) == FT_TP_COLUMN && reject(c, "None or 'row'")) return 0;
    return 1;
}

static int gate_activation_bias(const ft_gate_ctx *c, const ft_unit *w, unsigned present)
{
    (void)present;
    if (rd_recipe(c, FT_RR_IS_NONE)) {
        if (reject(c, "a quantization recipe")) return 0;
    } else if (rd_recipe(c, FT_RR_BACKWARD_OVERRIDE) != FT_BO_NONE && reject(c, "None")) {
        return 0;
    }
    /* window[0].get_grad_output_quantizer() is not None at plan time: the op (a fused op: its
     * last basic op) has backward quantizers, which exist whenever the recipe is not None, since
     * maybe_fuse_ops resets recipe state before it builds. */
    if (!rd_op(c, w, 0, FT_OA_GRAD_OUTPUT_QUANTIZER) && reject(c, "True")) return 0;
    return 1;
}

static int gate_add_rmsnorm(const ft_gate_ctx *c, const ft_unit *w, unsigned present)
{
    (void)present;
    if (rd_op(c, w, 0, FT_OA_IN_PLACE) && reject(c, "False")) return 0;
    return 1;
}

/* ---- the rule table ----------------------------------------------------------------------- */
/* n_reads and reads[] from one list, so the count cannot drift */
#define READS(...)                                                                                 \
    .n_reads = (uint8_t)(sizeof((ft_read[]){__VA_ARGS__}) / sizeof(ft_read)), .reads = {__VA_ARGS__}
#define R_RECIPE(a)                                                                                \
    {                                                                                              \
        .scope = FT_SCOPE_RECIPE, .attr = (a)                                                      \
    }
#define R_OP(s, a)                                                                                 \
    {                                                                                              \
        .scope = FT_SCOPE_OP, .slot = (s), .attr = (a)                                             \
    }
#define R_ENV(a)                                                                                   \
    {                                                                                              \
        .scope = FT_SCOPE_ENV, .attr = (a)                                                         \
    }
#define MLP_REG_READS                                                                              \
    R_ENV(FT_EA_CUTEDSL_FUSED_GROUPED_MLP), R_ENV(FT_EA_DEVICE_CC), R_ENV(FT_EA_CUDNN_FRONTEND),   \
        R_ENV(FT_EA_DISABLE_CUTEDSL_WGRAD), R_ENV(FT_EA_WRAP_QUANT), R_ENV(FT_EA_WRAP_WGRAD)
#define MLP_RECIPE_READS                                                                           \
    R_RECIPE(FT_RR_IS_NONE), R_RECIPE(FT_RR_MXFP8), R_RECIPE(FT_RR_NVFP4),                         \
        R_RECIPE(FT_RR_DISABLE_RHT)
#define MLP_DIM_READS                                                                              \
    R_OP(0, FT_OA_IN_FEATURES), R_OP(0, FT_OA_OUT_FEATURES), R_OP(0, FT_OA_NUM_GROUPS),            \
        R_OP(2, FT_OA_IN_FEATURES), R_OP(2, FT_OA_OUT_FEATURES), R_OP(2, FT_OA_NUM_GROUPS)

/* where TE defines them: transformer_engine/pytorch/ops/fused/ */
#define TE_FUSED "transformer_engine.pytorch.ops.fused."

const ft_rule ft_rules[] = {
    /* joint pass: registry order [fuse_srelu_ops, fuse_ops] */
    {.func = "fuse_srelu_ops",
     .te_name = TE_FUSED "grouped_mlp.fuse_srelu_ops",
     .fused = "GroupedMLP_CuTeGEMMUnary",
     .pass = FT_PASS_JOINT,
     .scan = FT_SCAN_SLIDE,
     .n_slots = 3,
     .slots = {{.types = FT_OPS_GL}, {.types = FT_OPB(FT_OP_SCALED_SRELU)}, {.types = FT_OPS_GL}},
     .registered = reg_srelu,
     .gate = gate_grouped_mlp,
     .grouped_mlp = 1,
     READS(MLP_REG_READS, R_ENV(FT_EA_WRAP_SRELU), R_ENV(FT_EA_WRAP_DSRELU), MLP_RECIPE_READS,
           MLP_DIM_READS)},
    {.func = "fuse_ops",
     .te_name = TE_FUSED "grouped_mlp.fuse_ops",
     .fused = "GroupedMLP_CuTeGEMMGLU",
     .pass = FT_PASS_JOINT,
     .scan = FT_SCAN_SLIDE,
     .n_slots = 3,
     .slots = {{.types = FT_OPS_GL},
               {.types = FT_OPB(FT_OP_SCALED_SWIGLU) | FT_OPB(FT_OP_SCALED_CLAMPED_QGEGLU)},
               {.types = FT_OPS_GL}},
     .registered = reg_glu,
     .gate = gate_grouped_mlp,
     .grouped_mlp = 1,
     READS(MLP_REG_READS, R_ENV(FT_EA_WRAP_GLU), R_ENV(FT_EA_WRAP_DGLU), MLP_RECIPE_READS,
           MLP_DIM_READS, R_OP(1, FT_OA_GLU_INTERLEAVE), R_OP(1, FT_OA_LIMIT), R_OP(1, FT_OA_ALPHA),
           R_OP(1, FT_OA_GLU_LINEAR_OFFSET))},
    /* forward pass */
    {.func = "UserbuffersForwardLinear.fuse_forward_ops",
     .te_name = TE_FUSED "userbuffers_forward_linear.UserbuffersForwardLinear.fuse_forward_ops",
     .fused = "UserbuffersForwardLinear",
     .pass = FT_PASS_FWD,
     .scan = FT_SCAN_CONSUME,
     .n_slots = 3,
     .slots = {{.types = FT_OPS_BL, .take = take_ub_linear},
               {.types = FT_OPB(FT_OP_BIAS), .optional = 1, .take = take_ub_bias},
               {.types = FT_OPB(FT_OP_REDUCE_SCATTER), .optional = 1, .take = take_ub_rs}},
     .gate = gate_ub_fwd,
     READS(R_RECIPE(FT_RR_BACKWARD_OVERRIDE), R_ENV(FT_EA_WORLD_SIZE), R_OP(0, FT_OA_USERBUFFERS),
           R_OP(0, FT_OA_TP_MODE), R_OP(0, FT_OA_TP_SIZE), R_OP(2, FT_OA_PROCESS_GROUP_SIZE))},
    {.func = "ForwardLinearBiasAdd.fuse_forward_ops",
     .te_name = TE_FUSED "forward_linear_bias_add.ForwardLinearBiasAdd.fuse_forward_ops",
     .fused = "ForwardLinearBiasAdd",
     .pass = FT_PASS_FWD,
     .scan = FT_SCAN_CONSUME,
     .n_slots = 3,
     .slots = {{.types = FT_OPS_BL, .take = take_linear_not_row},
               {.types = FT_OPB(FT_OP_BIAS), .optional = 1},
               {.types = FT_OPB(FT_OP_ADD_EXTRA_INPUT), .take = take_in_place}},
     READS(R_OP(0, FT_OA_TP_MODE), R_OP(2, FT_OA_IN_PLACE))},
    {.func = "ForwardLinearBiasActivation.fuse_forward_ops",
     .te_name =
         TE_FUSED "forward_linear_bias_activation.ForwardLinearBiasActivation.fuse_forward_ops",
     .fused = "ForwardLinearBiasActivation",
     .pass = FT_PASS_FWD,
     .scan = FT_SCAN_SLIDE,
     .n_slots = 2,
     .slots = {{.types = FT_OPS_BL}, {.types = FT_OPB(FT_OP_BIAS)}},
     .gate = gate_linear_bias_activation,
     READS(R_OP(0, FT_OA_TP_MODE), R_OP(0, FT_OA_DTYPE))},
    {.func = "ForwardLinearScaleAdd.fuse_forward_ops",
     .te_name = TE_FUSED "forward_linear_scale_add.ForwardLinearScaleAdd.fuse_forward_ops",
     .fused = "ForwardLinearScaleAdd",
     .pass = FT_PASS_FWD,
     .scan = FT_SCAN_SLIDE,
     .n_slots = 3,
     .slots = {{.types = FT_OPS_BL},
               {.types = FT_OPB(FT_OP_CONSTANT_SCALE)},
               {.types = FT_OPB(FT_OP_ADD_EXTRA_INPUT)}},
     .gate = gate_linear_scale_add,
     READS(R_OP(0, FT_OA_TP_MODE), R_OP(2, FT_OA_IN_PLACE))},
    /* backward pass (windows in forward order) */
    {.func = "UserbuffersBackwardLinear.fuse_backward_ops",
     .te_name = TE_FUSED "userbuffers_backward_linear.UserbuffersBackwardLinear.fuse_backward_ops",
     .fused = "UserbuffersBackwardLinear",
     .pass = FT_PASS_BWD,
     .scan = FT_SCAN_CONSUME,
     .n_slots = 3,
     .slots = {{.types = FT_OPS_BL, .take = take_ub_linear},
               {.types = FT_OPB(FT_OP_BIAS), .optional = 1, .take = take_ub_bias},
               {.types = FT_OPB(FT_OP_REDUCE_SCATTER), .optional = 1, .take = take_ub_rs}},
     .gate = gate_ub_bwd,
     READS(R_ENV(FT_EA_WORLD_SIZE), R_OP(0, FT_OA_USERBUFFERS), R_OP(0, FT_OA_TP_MODE),
           R_OP(0, FT_OA_TP_SIZE), R_OP(2, FT_OA_PROCESS_GROUP_SIZE))},
    {.func = "BackwardLinearAdd.fuse_backward_ops",
     .te_name = TE_FUSED "backward_linear_add.BackwardLinearAdd.fuse_backward_ops",
     .fused = "BackwardLinearAdd",
     .pass = FT_PASS_BWD,
     .scan = FT_SCAN_SLIDE,
     .n_slots = 2,
     .slots = {{.types = FT_OPB(FT_OP_MAKE_EXTRA_OUTPUT)}, {.types = FT_OPS_BL}},
     .gate = gate_linear_add,
     READS(R_OP(0, FT_OA_IN_PLACE), R_OP(1, FT_OA_TP_MODE))},
    {.func = "BackwardLinearScale.fuse_backward_ops",
     .te_name = TE_FUSED "backward_linear_scale.BackwardLinearScale.fuse_backward_ops",
     .fused = "BackwardLinearScale",
     .pass = FT_PASS_BWD,
     .scan = FT_SCAN_SLIDE,
     .n_slots = 2,
     .slots = {{.types = FT_OPS_BL}, {.types = FT_OPB(FT_OP_CONSTANT_SCALE)}},
     .gate = gate_linear_scale,
     READS(R_OP(0, FT_OA_TP_MODE))},
    {.func = "BackwardActivationBias.fuse_backward_ops",
     .te_name = TE_FUSED "backward_activation_bias.BackwardActivationBias.fuse_backward_ops",
     .fused = "BackwardActivationBias",
     .pass = FT_PASS_BWD,
     .scan = FT_SCAN_SLIDE,
     .n_slots = 3,
     .fuse_from = 1,
     .slots = {{.types = 0},
               {.types = FT_OPB(FT_OP_BIAS)},
               {.types = FT_OPB(FT_OP_GELU) | FT_OPB(FT_OP_RELU)}},
     .gate = gate_activation_bias,
     READS(R_RECIPE(FT_RR_IS_NONE), R_RECIPE(FT_RR_BACKWARD_OVERRIDE),
           R_OP(0, FT_OA_GRAD_OUTPUT_QUANTIZER))},
    {.func = "BackwardAddRMSNorm.fuse_backward_ops",
     .te_name = TE_FUSED "backward_add_rmsnorm.BackwardAddRMSNorm.fuse_backward_ops",
     .fused = "BackwardAddRMSNorm",
     .pass = FT_PASS_BWD,
     .scan = FT_SCAN_SLIDE,
     .n_slots = 2,
     .slots = {{.types = FT_OPB(FT_OP_MAKE_EXTRA_OUTPUT)}, {.types = FT_OPB(FT_OP_RMS_NORM)}},
     .gate = gate_add_rmsnorm,
     READS(R_OP(0, FT_OA_IN_PLACE))},
};
const uint32_t ft_n_rules = (uint32_t)FT_ARRAY_LEN(ft_rules);

/* ---- passes ------------------------------------------------------------------------------- */
static int slot_type_ok(const ft_gate_ctx *c, const ft_slot *s, const ft_unit *u)
{
    if (!s->types) return 1;
    return u->rule < 0 && (s->types & FT_OPB(c->ops[u->lo].type));
}

/* Try the rule's window at units[i]. Returns 1 on a match (fused op written back), else 0 and
 * *next_i is where the scan continues. */
static int try_window(const ft_gate_ctx *c, int16_t rule_idx, ft_unit *units, uint32_t *n,
                      uint32_t i, uint32_t *next_i)
{
    const ft_rule *r = &ft_rules[rule_idx];
    ft_unit w[FT_MAX_SLOTS];
    unsigned present = 0;
    uint32_t k = i;
    int ok = 1;
    for (unsigned s = 0; s < r->n_slots; s++) {
        if (k < *n && slot_type_ok(c, &r->slots[s], &units[k])) {
            w[s] = units[k];
            if (!r->slots[s].take || r->slots[s].take(c, w, (int)s)) {
                present |= 1u << s;
                k++;
                continue;
            }
        }
        w[s] = (ft_unit){-1, 0, 0};
        if (!r->slots[s].optional) {
            ok = 0;
            break;
        }
    }
    if (ok && r->gate) {
        if (c->last) *c->last = (ft_last_read){.gate = 1}; /* what the gate reads, not the takes */
        const uint32_t n_fails = c->fails ? c->fails->n : 0;
        if (!r->gate(c, w, present) || (c->fails && c->fails->n > n_fails)) ok = 0;
    }
    if (!ok) {
        /* SLIDE: shift by one. CONSUME: what the anchor took goes out unfused. */
        *next_i = (r->scan == FT_SCAN_CONSUME && k > i) ? k : i + 1;
        return 0;
    }
    /* replace the covered units [first, k) by one fused unit */
    uint32_t first = i;
    for (unsigned s = 0; s < r->fuse_from; s++)
        if (present & (1u << s)) first++;
    ft_unit fused = {rule_idx, units[first].lo, units[k - 1].hi};
    units[first] = fused;
    uint32_t removed = k - first - 1;
    if (removed) memmove(&units[first + 1], &units[k], (*n - k) * sizeof *units);
    *n -= removed;
    /* SLIDE: the window restarts at its first element (the fused op stays in TE's window);
     * CONSUME: the fused op goes out and the next window starts after it. */
    *next_i = r->scan == FT_SCAN_SLIDE ? i : first + 1;
    return 1;
}

void ft_rules_apply_pass(const ft_gate_ctx *c0, const int16_t *order, uint32_t n_order,
                         ft_unit *units, uint32_t *n)
{
    ft_gate_ctx c = *c0;
    for (uint32_t k = 0; k < n_order; k++) {
        const int16_t ri = order[k];
        c.rule = &ft_rules[ri];
        uint32_t i = 0;
        while (i < *n) {
            uint32_t next = i + 1;
            try_window(&c, ri, units, n, i, &next);
            i = next;
        }
    }
}

int ft_map_to_basic(const ft_unit *units, uint32_t n_units, const ft_op *ops, uint32_t n_ops,
                    int64_t fuser_id, ft_err *err)
{
    uint32_t cursor = 0;
    for (uint32_t u = 0; u < n_units; u++) {
        if (units[u].lo != cursor || units[u].hi < units[u].lo || units[u].hi >= n_ops ||
            (units[u].rule < 0 && units[u].hi != units[u].lo))
            goto mismatch;
        cursor = units[u].hi + 1;
    }
    if (cursor == n_ops) return FT_OK;
mismatch:;
    ft_buf b = {0};
    ft_buf_printf(&b, "fuser %lld: Found mismatch after fusing operations (basic_ops=[",
                  (long long)fuser_id);
    for (uint32_t i = 0; i < n_ops && b.len < FT_ERR_MAX; i++)
        ft_buf_printf(&b, "%s'%s'", i ? ", " : "", ops[i].name);
    ft_buf_printf(&b, "], fused_ops=[");
    for (uint32_t u = 0; u < n_units && b.len < FT_ERR_MAX; u++) {
        const char *nm = units[u].rule >= 0    ? ft_rules[units[u].rule].fused
                         : units[u].lo < n_ops ? ops[units[u].lo].name
                                               : "?";
        ft_buf_printf(&b, "%s'%s'", u ? ", " : "", nm);
    }
    ft_buf_printf(&b, "])");
    int rc = ft_err_set(err, FT_EUNSUPPORTED, "%s", b.data ? (const char *)b.data : "mismatch");
    ft_buf_free(&b);
    return rc;
}

int ft_rule_blocked_at(const ft_gate_ctx *c0, int16_t rule, const ft_unit *units, uint32_t n,
                       uint32_t i, ft_last_read *last)
{
    ft_unit copy[FT_MAX_SLOTS + 1];
    uint32_t k = n - i < FT_MAX_SLOTS ? n - i : FT_MAX_SLOTS, cn = k, next;
    memcpy(copy, units + i, k * sizeof *copy);
    ft_gate_ctx c = *c0;
    c.rule = &ft_rules[rule];
    c.undeclared = NULL;
    c.last = last;
    /* the window's own units only: a match never looks past them */
    *last = (ft_last_read){0};
    const uint32_t n_fails = c.fails ? c.fails->n : 0;
    if (try_window(&c, rule, copy, &cn, 0, &next)) return 0;
    return c.fails ? c.fails->n > n_fails : last->gate && last->set;
}

uint32_t ft_rule_registration_fails(uint32_t rule, const ft_env *env, ft_reg_check *out,
                                    uint32_t cap)
{
    const ft_rule *r = &ft_rules[rule];
    if (r->registered == reg_glu) return mlp_fails(env, 0, out, cap);
    if (r->registered == reg_srelu) return mlp_fails(env, 1, out, cap);
    return 0;
}

const char *ft_rule_unregistered_reason(uint32_t rule, const ft_env *env, char *buf, size_t cap)
{
    const ft_rule *r = &ft_rules[rule];
    const char *why = NULL;
    if (r->registered == reg_glu) why = glu_unsupported(env);
    if (r->registered == reg_srelu) why = srelu_unsupported(env);
    snprintf(buf, cap, "%s is not registered: %s", r->fused,
             why ? why : "TE did not register it (the capture's te_fusions)");
    return buf;
}

int ft_rule_applicable(const ft_rule *r, const ft_op *ops, uint32_t n_ops)
{
    /* every required typed slot's types occur in the fuser (a fused joint op can only fill an
     * untyped slot, and it exists only if the joint rule's own types occur) */
    for (unsigned s = 0; s < r->n_slots; s++) {
        if (r->slots[s].optional || !r->slots[s].types) continue;
        int found = 0;
        for (uint32_t i = 0; i < n_ops && !found; i++)
            if (r->slots[s].types & FT_OPB(ops[i].type)) found = 1;
        if (!found) return 0;
    }
    return 1;
}

/* ---- unfused GroupedLinear path (ops/basic/grouped_linear.py) ----------------------------- */
int ft_grouped_tensor_path_supported(const ft_env *env, const ft_recipe_model *r, int dtype)
{
    if (dtype != FT_DT_BFLOAT16 && dtype != FT_DT_FLOAT16) return 0;
    int64_t cc = env->v[FT_EA_DEVICE_CC]; /* major*10 + minor */
    if (cc < 90 || cc > 110) return 0;
    int64_t lt = env->v[FT_EA_CUBLASLT]; /* tex.get_cublasLt_version(), e.g. 130400 */
    if (lt < 130300) return 0;
    if (cc < 100 && lt < 130400) return 0;
    switch (r->type) {
    case FT_RT_NONE:
        return 1;
    case FT_RT_CUSTOM:
        return 0;
    case FT_RT_CURRENT:
        return cc >= 100 || lt >= 130500;
    case FT_RT_BLOCK:
        return cc < 100 && lt >= 130600;
    case FT_RT_MXFP8:
        return cc >= 100;
    case FT_RT_NVFP4:
        return cc >= 100 && !r->disable_rht && !r->row_scaled;
    default:
        return 0;
    }
}
