/*
 * test_replayer.c - the fuser model (replayer/model.h): fusion gates, passes, map-to-basic,
 * plan interning, recipes and their hash, the quantizer-state model, stale classification, the
 * fusion-attrs key, and errors on bad ops/attrs JSON.
 */
#include "model.h"
#include "model_int.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

/* ---- helpers ------------------------------------------------------------------------------ */
#define ENV_SM100                                                                                  \
    "{\"device_cc\":\"10.0\",\"cudnn_frontend\":\"1.27.0\",\"cublaslt\":\"13.4.0\","               \
    "\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\"}"

typedef struct rdef {
    const char *type, *attrs;
} rdef;

/* A model over fuser op lists and recipes (NULL-terminated arrays); asserts success. */
static ft_model *mk(const char *const *ops, const rdef *recipes, const char *env,
                    const ft_env_kv *ov, uint32_t n_ov)
{
    ft_fuser_def fz[16];
    ft_recipe_def rc[32];
    uint32_t nf = 0, nr = 0;
    for (; ops && ops[nf]; nf++) {
        json_t *a = json_loads(ops[nf], 0, NULL);
        assert_non_null(a);
        fz[nf] = (ft_fuser_def){100 + nf, NULL, ops[nf], (uint32_t)json_array_size(a)};
        json_decref(a);
    }
    for (; recipes && recipes[nr].type; nr++)
        rc[nr] = (ft_recipe_def){200 + nr, recipes[nr].type, 7000 + nr, recipes[nr].attrs};
    ft_model *m = NULL;
    ft_err err = {0};
    int r = ft_model_new(fz, nf, rc, nr, env, ov, n_ov, &m, &err);
    if (r) fail_msg("ft_model_new: %s", ft_err_msg(&err));
    return m;
}

static const char *plan(ft_model *m, uint32_t fuser, int32_t recipe, uint32_t f)
{
    uint32_t id = 0;
    ft_err err = {0};
    int r = ft_model_build(m, fuser, recipe, f, &id, &err);
    if (r) fail_msg("build: %s", ft_err_msg(&err));
    return ft_model_plan_text(m, id);
}

static uint32_t plan_id(ft_model *m, uint32_t fuser, int32_t recipe, uint32_t f)
{
    uint32_t id = 0;
    ft_err err = {0};
    int r = ft_model_build(m, fuser, recipe, f, &id, &err);
    if (r) fail_msg("build: %s", ft_err_msg(&err));
    return id;
}

static int fused_mlp(ft_model *m, uint32_t fuser, int32_t recipe)
{
    return ft_model_plan_fused_mlp(m, plan_id(m, fuser, recipe, 0));
}

/* grouped MLP op lists */
static char *mlp_ops(const char *act_type, const char *act_attrs, int G, int k1, int n1, int k2,
                     int n2, const char *fc_extra, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":%d,\"in_features\":%d,"
             "\"out_features\":%d,\"bias\":false,\"dtype\":\"bfloat16\"%s}},"
             "{\"type\":\"%s\",\"attrs\":{%s}},"
             "{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":%d,\"in_features\":%d,"
             "\"out_features\":%d,\"bias\":false,\"dtype\":\"bfloat16\"%s}}]",
             G, k1, n1, fc_extra, act_type, act_attrs, G, k2, n2, fc_extra);
    return buf;
}

#define GLU_OK_ATTRS "\"glu_interleave_size\":32"
static const char *const FUSED_GLU =
    "fwd[GroupedMLP_CuTeGEMMGLU(0-2)] bwd[GroupedMLP_CuTeGEMMGLU(0-2)]";
static const char *const UNFUSED3 =
    "fwd[GroupedLinear(0),ScaledSwiGLU(1),GroupedLinear(2)] bwd[GroupedLinear(0),ScaledSwiGLU(1),"
    "GroupedLinear(2)]";

/* ---- grouped MLP gates -------------------------------------------------------------------- */
static void test_gate_grouped_mlp_fuses_mxfp8_and_nvfp4_rht(void **state)
{
    (void)state;
    char ops[1024];
    const char *fz[] = {
        mlp_ops("ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, "", ops, sizeof ops), NULL};
    rdef rs[] = {
        {"MXFP8BlockScaling", "{}"}, {"NVFP4BlockScaling", "{\"disable_rht\":false}"}, {0}};
    ft_model *m = mk(fz, rs, ENV_SM100, NULL, 0);
    assert_string_equal(plan(m, 0, 0, 0), FUSED_GLU);
    assert_string_equal(plan(m, 0, 1, 0), FUSED_GLU);
    assert_string_equal(plan(m, 0, -1, 0), UNFUSED3);
    assert_true(ft_model_plan_fused_mlp(m, plan_id(m, 0, 0, 0)));
    assert_false(ft_model_plan_fused_mlp(m, plan_id(m, 0, -1, 0)));
    ft_model_free(m);
}

/* Each row changes one condition of a fusing configuration; the decision must flip. */
typedef struct gate_case {
    const char *name;
    const char *act, *act_attrs;
    int G, k1, n1, k2, n2;
    int g2; /* FC2 groups (0: same as G) */
    const char *rtype, *rattrs;
    const char *env;
    int fused;
} gate_case;

#define ENV_FE(v)                                                                                  \
    "{\"device_cc\":\"10.0\",\"cudnn_frontend\":\"" v "\",\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":"     \
                                                      "\"1\"}"

static const gate_case mlp_cases[] = {
    {"base mxfp8", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "MXFP8BlockScaling", "{}",
     ENV_SM100, 1},
    {"recipe None", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, NULL, NULL, ENV_SM100, 0},
    {"delayed", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "DelayedScaling", "{}",
     ENV_SM100, 0},
    {"current", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "Float8CurrentScaling", "{}",
     ENV_SM100, 0},
    {"fp8 block", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "Float8BlockScaling", "{}",
     ENV_SM100, 0},
    {"custom", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "CustomRecipe", "{}",
     ENV_SM100, 0},
    {"nvfp4 rht", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "NVFP4BlockScaling",
     "{\"disable_rht\":false}", ENV_SM100, 1},
    {"nvfp4 disable_rht", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "NVFP4BlockScaling",
     "{\"disable_rht\":true}", ENV_SM100, 0},
    {"interleave 16", "ScaledSwiGLU", "\"glu_interleave_size\":16", 4, 64, 256, 128, 64, 0,
     "MXFP8BlockScaling", "{}", ENV_SM100, 0},
    {"interleave None", "ScaledSwiGLU", "\"glu_interleave_size\":null", 4, 64, 256, 128, 64, 0,
     "MXFP8BlockScaling", "{}", ENV_SM100, 0},
    {"fc1.in %64", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 96, 256, 128, 64, 0, "MXFP8BlockScaling", "{}",
     ENV_SM100, 0},
    {"fc1.out %64", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 288, 144, 64, 0, "MXFP8BlockScaling", "{}",
     ENV_SM100, 0},
    {"fc2.out %64", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 96, 0, "MXFP8BlockScaling", "{}",
     ENV_SM100, 0},
    {"fc1.out != 2 fc2.in", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 256, 64, 0,
     "MXFP8BlockScaling", "{}", ENV_SM100, 0},
    {"groups differ", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 8, "MXFP8BlockScaling",
     "{}", ENV_SM100, 0},
    {"env flag 0", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "MXFP8BlockScaling", "{}",
     "{\"device_cc\":\"10.0\",\"cudnn_frontend\":\"1.27.0\"}", 0},
    {"sm 9.0", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "MXFP8BlockScaling", "{}",
     "{\"device_cc\":\"9.0\",\"cudnn_frontend\":\"1.27.0\",\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":"
     "\"1\"}",
     0},
    {"sm 12.0", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "MXFP8BlockScaling", "{}",
     "{\"device_cc\":\"12.0\",\"cudnn_frontend\":\"1.27.0\",\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":"
     "\"1\"}",
     0},
    {"sm 10.3", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "MXFP8BlockScaling", "{}",
     "{\"device_cc\":\"10.3\",\"cudnn_frontend\":\"1.27.0\",\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":"
     "\"1\"}",
     1},
    {"fe 1.22", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "MXFP8BlockScaling", "{}",
     ENV_FE("1.22.9"), 0},
    {"fe 1.23.0rc1", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "MXFP8BlockScaling",
     "{}", ENV_FE("1.23.0rc1"), 0},
    {"fe 1.23", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "MXFP8BlockScaling", "{}",
     ENV_FE("1.23.0"), 1},
    {"fe absent", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "MXFP8BlockScaling", "{}",
     "{\"device_cc\":\"10.0\",\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\"}", 0},
    {"no wgrad wrapper", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "MXFP8BlockScaling",
     "{}",
     "{\"device_cc\":\"10.0\",\"cudnn_frontend\":\"1.27.0\",\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":"
     "\"1\",\"cudnn_wgrad_wrapper\":\"0\"}",
     0},
    {"no wgrad wrapper, wgrad disabled", "ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0,
     "MXFP8BlockScaling", "{}",
     "{\"device_cc\":\"10.0\",\"cudnn_frontend\":\"1.27.0\",\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":"
     "\"1\",\"cudnn_wgrad_wrapper\":\"0\",\"NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP\":\"1\"}",
     1},
    {"qgeglu default params fe 1.23", "ScaledClampedQGeGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0,
     "MXFP8BlockScaling", "{}", ENV_FE("1.23.0"), 1},
    {"qgeglu limit 6 fe 1.23", "ScaledClampedQGeGLU", GLU_OK_ATTRS ",\"limit\":6.0", 4, 64, 256,
     128, 64, 0, "MXFP8BlockScaling", "{}", ENV_FE("1.23.0"), 0},
    {"qgeglu alpha 1.5 fe 1.23", "ScaledClampedQGeGLU", GLU_OK_ATTRS ",\"alpha\":1.5", 4, 64, 256,
     128, 64, 0, "MXFP8BlockScaling", "{}", ENV_FE("1.23.0"), 0},
    {"qgeglu offset 0 fe 1.23", "ScaledClampedQGeGLU", GLU_OK_ATTRS ",\"glu_linear_offset\":0.0", 4,
     64, 256, 128, 64, 0, "MXFP8BlockScaling", "{}", ENV_FE("1.23.0"), 0},
    {"qgeglu alpha within 1e-3 fe 1.23", "ScaledClampedQGeGLU", GLU_OK_ATTRS ",\"alpha\":1.7025", 4,
     64, 256, 128, 64, 0, "MXFP8BlockScaling", "{}", ENV_FE("1.23.0"), 1},
    {"qgeglu limit 6 fe 1.24", "ScaledClampedQGeGLU", GLU_OK_ATTRS ",\"limit\":6.0", 4, 64, 256,
     128, 64, 0, "MXFP8BlockScaling", "{}", ENV_FE("1.24.0"), 1},
    {"srelu fe 1.24", "ScaledSReLU", "", 4, 64, 128, 128, 64, 0, "MXFP8BlockScaling", "{}",
     ENV_FE("1.24.0"), 1},
    {"srelu fe 1.23", "ScaledSReLU", "", 4, 64, 128, 128, 64, 0, "MXFP8BlockScaling", "{}",
     ENV_FE("1.23.0"), 0},
    {"srelu fc1.out != fc2.in", "ScaledSReLU", "", 4, 64, 256, 128, 64, 0, "MXFP8BlockScaling",
     "{}", ENV_FE("1.24.0"), 0},
    {"srelu nvfp4 disable_rht", "ScaledSReLU", "", 4, 64, 128, 128, 64, 0, "NVFP4BlockScaling",
     "{\"disable_rht\":true}", ENV_FE("1.24.0"), 0},
    {"plain SwiGLU never", "SwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, 0, "MXFP8BlockScaling",
     "{}", ENV_SM100, 0},
    {"single group", "ScaledSwiGLU", GLU_OK_ATTRS, 1, 64, 256, 128, 64, 0, "MXFP8BlockScaling",
     "{}", ENV_SM100, 1},
};

static void test_gate_grouped_mlp_each_condition_flips(void **state)
{
    (void)state;
    for (size_t i = 0; i < FT_ARRAY_LEN(mlp_cases); i++) {
        const gate_case *gc = &mlp_cases[i];
        char ops[1024];
        mlp_ops(gc->act, gc->act_attrs, gc->G, gc->k1, gc->n1, gc->k2, gc->n2, "", ops, sizeof ops);
        if (gc->g2) {
            /* rewrite FC2's group count */
            char *p = strrchr(ops, '{');
            p = strstr(strstr(ops, "\"type\":\"GroupedLinear\"") + 10, "GroupedLinear");
            p = strstr(p, "\"num_groups\":");
            char tail[1024];
            char *after = strchr(p, ',');
            ft_strlcpy(tail, after, sizeof tail);
            snprintf(p, sizeof ops - (size_t)(p - ops), "\"num_groups\":%d%s", gc->g2, tail);
        }
        const char *fz[] = {ops, NULL};
        rdef rs[] = {{gc->rtype, gc->rattrs}, {0}};
        ft_model *m = mk(fz, gc->rtype ? rs : NULL, gc->env, NULL, 0);
        int got = fused_mlp(m, 0, gc->rtype ? 0 : -1);
        if (got != gc->fused)
            fail_msg("case '%s': fused=%d, expected %d (plan %s)", gc->name, got, gc->fused,
                     plan(m, 0, gc->rtype ? 0 : -1, 0));
        ft_model_free(m);
    }
}

/* Registry order [fuse_srelu_ops, fuse_ops]: on overlapping windows the SReLU fusion wins. */
static void test_gate_grouped_mlp_registry_order(void **state)
{
    (void)state;
    const char *ops =
        "[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":2,\"in_features\":64,"
        "\"out_features\":128}},{\"type\":\"ScaledSReLU\"},"
        "{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":2,\"in_features\":128,"
        "\"out_features\":256}},{\"type\":\"ScaledSwiGLU\",\"attrs\":{\"glu_interleave_size\":32}},"
        "{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":2,\"in_features\":128,"
        "\"out_features\":64}}]";
    const char *fz[] = {ops, NULL};
    rdef rs[] = {{"MXFP8BlockScaling", "{}"}, {0}};
    ft_model *m = mk(fz, rs, ENV_SM100, NULL, 0);
    assert_string_equal(plan(m, 0, 0, 0),
                        "fwd[GroupedMLP_CuTeGEMMUnary(0-2),ScaledSwiGLU(3),GroupedLinear(4)] "
                        "bwd[GroupedMLP_CuTeGEMMUnary(0-2),ScaledSwiGLU(3),GroupedLinear(4)]");
    ft_model_free(m);
    /* without SReLU support (FE 1.23) the GLU window fuses instead */
    m = mk(fz, rs, ENV_FE("1.23.0"), NULL, 0);
    assert_string_equal(plan(m, 0, 0, 0),
                        "fwd[GroupedLinear(0),ScaledSReLU(1),GroupedMLP_CuTeGEMMGLU(2-4)] "
                        "bwd[GroupedLinear(0),ScaledSReLU(1),GroupedMLP_CuTeGEMMGLU(2-4)]");
    ft_model_free(m);
}

/* ---- forward and backward fusion gates ---------------------------------------------------- */
typedef struct rule_case {
    const char *name;
    const char *ops;
    const char *rtype, *rattrs; /* NULL: recipe None */
    const char *env;
    const char *expect; /* plan text */
} rule_case;

#define BLIN(extra)                                                                                \
    "{\"type\":\"BasicLinear\",\"attrs\":{\"in_features\":64,\"out_features\":64" extra "}}"
#define BIAS    "{\"type\":\"Bias\",\"attrs\":{\"size\":64}}"
#define ADD(ip) "{\"type\":\"AddExtraInput\",\"attrs\":{\"in_place\":" ip "}}"
#define MEO(ip) "{\"type\":\"MakeExtraOutput\",\"attrs\":{\"in_place\":" ip "}}"
#define SCALE   "{\"type\":\"ConstantScale\",\"attrs\":{\"scale\":0.5}}"
#define RS      "{\"type\":\"ReduceScatter\"}"
#define ENV_W1  "{}"
#define ENV_W4  "{\"world_size\":\"4\"}"

static const rule_case rule_cases[] = {
    /* ForwardLinearBiasAdd: BasicLinear [, Bias], AddExtraInput(in_place) ; TP mode != row */
    {"FLBA fuses", "[" BLIN("") "," BIAS "," ADD("true") "]", NULL, NULL, ENV_W1,
     "fwd[ForwardLinearBiasAdd(0-2)] bwd[BasicLinear(0),Bias(1),AddExtraInput(2)]"},
    {"FLBA no bias", "[" BLIN("") "," ADD("true") "]", NULL, NULL, ENV_W1,
     "fwd[ForwardLinearBiasAdd(0-1)] bwd[BasicLinear(0),AddExtraInput(1)]"},
    {"FLBA not in place", "[" BLIN("") "," BIAS "," ADD("false") "]", NULL, NULL, ENV_W1,
     "fwd[BasicLinear(0),Bias(1),AddExtraInput(2)] bwd[BasicLinear(0),Bias(1),AddExtraInput(2)]"},
    {"FLBA row TP", "[" BLIN(",\"tensor_parallel_mode\":\"row\"") "," ADD("true") "]", NULL, NULL,
     ENV_W4, "fwd[BasicLinear(0),AddExtraInput(1)] bwd[BasicLinear(0),AddExtraInput(1)]"},
    {"FLBA row TP of size 1 is no TP",
     "[" BLIN(",\"tensor_parallel_mode\":\"row\"") "," ADD("true") "]", NULL, NULL, ENV_W1,
     "fwd[ForwardLinearBiasAdd(0-1)] bwd[BasicLinear(0),AddExtraInput(1)]"},
    /* ForwardLinearBiasActivation: BasicLinear, Bias ; TP != row, weight dtype fp16/bf16 */
    {"FLBAct bf16", "[" BLIN(",\"dtype\":\"bfloat16\"") "," BIAS "]", NULL, NULL, ENV_W1,
     "fwd[ForwardLinearBiasActivation(0-1)] bwd[BasicLinear(0),Bias(1)]"},
    {"FLBAct fp16", "[" BLIN(",\"dtype\":\"float16\"") "," BIAS "]", NULL, NULL, ENV_W1,
     "fwd[ForwardLinearBiasActivation(0-1)] bwd[BasicLinear(0),Bias(1)]"},
    {"FLBAct fp32", "[" BLIN(",\"dtype\":\"float32\"") "," BIAS "]", NULL, NULL, ENV_W1,
     "fwd[BasicLinear(0),Bias(1)] bwd[BasicLinear(0),Bias(1)]"},
    {"FLBAct default dtype fp32", "[" BLIN("") "," BIAS "]", NULL, NULL, ENV_W1,
     "fwd[BasicLinear(0),Bias(1)] bwd[BasicLinear(0),Bias(1)]"},
    {"FLBAct row TP",
     "[" BLIN(",\"dtype\":\"bfloat16\",\"tensor_parallel_mode\":\"row\"") "," BIAS "]", NULL, NULL,
     ENV_W4, "fwd[BasicLinear(0),Bias(1)] bwd[BasicLinear(0),Bias(1)]"},
    /* ForwardLinearScaleAdd: BasicLinear, ConstantScale, AddExtraInput(in_place) ; TP != row */
    {"FLSA fuses", "[" BLIN("") "," SCALE "," ADD("true") "]", NULL, NULL, ENV_W1,
     "fwd[ForwardLinearScaleAdd(0-2)] bwd[BackwardLinearScale(0-1),AddExtraInput(2)]"},
    {"FLSA not in place", "[" BLIN("") "," SCALE "," ADD("false") "]", NULL, NULL, ENV_W1,
     "fwd[BasicLinear(0),ConstantScale(1),AddExtraInput(2)] "
     "bwd[BackwardLinearScale(0-1),AddExtraInput(2)]"},
    {"FLSA row TP", "[" BLIN(",\"tensor_parallel_mode\":\"row\"") "," SCALE "," ADD("true") "]",
     NULL, NULL, ENV_W4,
     "fwd[BasicLinear(0),ConstantScale(1),AddExtraInput(2)] "
     "bwd[BackwardLinearScale(0-1),AddExtraInput(2)]"},
    /* BackwardLinearScale: TP != column */
    {"BLS column TP", "[" BLIN(",\"tensor_parallel_mode\":\"column\"") "," SCALE "]", NULL, NULL,
     ENV_W4, "fwd[BasicLinear(0),ConstantScale(1)] bwd[BasicLinear(0),ConstantScale(1)]"},
    {"BLS row TP", "[" BLIN(",\"tensor_parallel_mode\":\"row\"") "," SCALE "]", NULL, NULL, ENV_W4,
     "fwd[BasicLinear(0),ConstantScale(1)] bwd[BackwardLinearScale(0-1)]"},
    /* BackwardLinearAdd: MakeExtraOutput(in_place), BasicLinear ; TP != column */
    {"BLA fuses", "[" MEO("true") "," BLIN("") "]", NULL, NULL, ENV_W1,
     "fwd[MakeExtraOutput(0),BasicLinear(1)] bwd[BackwardLinearAdd(0-1)]"},
    {"BLA not in place", "[" MEO("false") "," BLIN("") "]", NULL, NULL, ENV_W1,
     "fwd[MakeExtraOutput(0),BasicLinear(1)] bwd[MakeExtraOutput(0),BasicLinear(1)]"},
    {"BLA column TP", "[" MEO("true") "," BLIN(",\"tensor_parallel_mode\":\"column\"") "]", NULL,
     NULL, ENV_W4, "fwd[MakeExtraOutput(0),BasicLinear(1)] bwd[MakeExtraOutput(0),BasicLinear(1)]"},
    /* BackwardAddRMSNorm: MakeExtraOutput(not in place), RMSNorm */
    {"BARMS fuses", "[" MEO("false") ",{\"type\":\"RMSNorm\"}]", NULL, NULL, ENV_W1,
     "fwd[MakeExtraOutput(0),RMSNorm(1)] bwd[BackwardAddRMSNorm(0-1)]"},
    {"BARMS in place", "[" MEO("true") ",{\"type\":\"RMSNorm\"}]", NULL, NULL, ENV_W1,
     "fwd[MakeExtraOutput(0),RMSNorm(1)] bwd[MakeExtraOutput(0),RMSNorm(1)]"},
    {"BARMS LayerNorm no", "[" MEO("false") ",{\"type\":\"LayerNorm\"}]", NULL, NULL, ENV_W1,
     "fwd[MakeExtraOutput(0),LayerNorm(1)] bwd[MakeExtraOutput(0),LayerNorm(1)]"},
    /* BackwardActivationBias: X, Bias, {GELU, ReLU}; recipe not None, no override, X has a
     * grad-output quantizer */
    {"BAB fuses", "[" BLIN("") "," BIAS ",{\"type\":\"GELU\"}]", "Float8CurrentScaling", "{}",
     ENV_W1, "fwd[BasicLinear(0),Bias(1),GELU(2)] bwd[BasicLinear(0),BackwardActivationBias(1-2)]"},
    {"BAB relu", "[" BLIN("") "," BIAS ",{\"type\":\"ReLU\"}]", "DelayedScaling", "{}", ENV_W1,
     "fwd[BasicLinear(0),Bias(1),ReLU(2)] bwd[BasicLinear(0),BackwardActivationBias(1-2)]"},
    {"BAB srelu no", "[" BLIN("") "," BIAS ",{\"type\":\"SReLU\"}]", "DelayedScaling", "{}", ENV_W1,
     "fwd[BasicLinear(0),Bias(1),SReLU(2)] bwd[BasicLinear(0),Bias(1),SReLU(2)]"},
    {"BAB recipe None", "[" BLIN("") "," BIAS ",{\"type\":\"GELU\"}]", NULL, NULL, ENV_W1,
     "fwd[BasicLinear(0),Bias(1),GELU(2)] bwd[BasicLinear(0),Bias(1),GELU(2)]"},
    {"BAB override", "[" BLIN("") "," BIAS ",{\"type\":\"GELU\"}]", "Float8CurrentScaling",
     "{\"backward_override\":\"high_precision\"}", ENV_W1,
     "fwd[BasicLinear(0),Bias(1),GELU(2)] bwd[BasicLinear(0),Bias(1),GELU(2)]"},
    {"BAB X without quantizer", "[{\"type\":\"Identity\"}," BIAS ",{\"type\":\"GELU\"}]",
     "Float8CurrentScaling", "{}", ENV_W1,
     "fwd[Identity(0),Bias(1),GELU(2)] bwd[Identity(0),Bias(1),GELU(2)]"},
    {"BAB X = Quantize(backward)",
     "[{\"type\":\"Quantize\",\"attrs\":{\"backward\":true}}," BIAS ",{\"type\":\"GELU\"}]",
     "Float8CurrentScaling", "{}", ENV_W1,
     "fwd[Quantize(0),Bias(1),GELU(2)] bwd[Quantize(0),BackwardActivationBias(1-2)]"},
    {"BAB X = Quantize(forward only)", "[{\"type\":\"Quantize\"}," BIAS ",{\"type\":\"GELU\"}]",
     "Float8CurrentScaling", "{}", ENV_W1,
     "fwd[Quantize(0),Bias(1),GELU(2)] bwd[Quantize(0),Bias(1),GELU(2)]"},
    /* Userbuffers: world > 1, userbuffers, TP rules; forward also needs no backward override */
    {"UB column",
     "[" BLIN(",\"userbuffers\":true,\"tensor_parallel_mode\":\"column\"") "," BIAS "]", NULL, NULL,
     ENV_W4, "fwd[UserbuffersForwardLinear(0-1)] bwd[UserbuffersBackwardLinear(0-1)]"},
    {"UB world 1",
     "[" BLIN(",\"userbuffers\":true,\"tensor_parallel_mode\":\"column\"") "," BIAS "]", NULL, NULL,
     ENV_W1, "fwd[BasicLinear(0),Bias(1)] bwd[BasicLinear(0),Bias(1)]"},
    {"UB off", "[" BLIN(",\"tensor_parallel_mode\":\"column\"") "," BIAS "]", NULL, NULL, ENV_W4,
     "fwd[BasicLinear(0),Bias(1)] bwd[BasicLinear(0),Bias(1)]"},
    {"UB row takes no bias",
     "[" BLIN(",\"userbuffers\":true,\"tensor_parallel_mode\":\"row\"") "," BIAS "]", NULL, NULL,
     ENV_W4, "fwd[UserbuffersForwardLinear(0),Bias(1)] bwd[UserbuffersBackwardLinear(0),Bias(1)]"},
    {"UB no TP no RS", "[" BLIN(",\"userbuffers\":true") "," BIAS "]", NULL, NULL, ENV_W4,
     "fwd[BasicLinear(0),Bias(1)] bwd[BasicLinear(0),Bias(1)]"},
    {"UB no TP with RS", "[" BLIN(",\"userbuffers\":true") "," BIAS "," RS "]", NULL, NULL, ENV_W4,
     "fwd[UserbuffersForwardLinear(0-2)] bwd[UserbuffersBackwardLinear(0-2)]"},
    {"UB RS group of 1",
     "[" BLIN(",\"userbuffers\":true") ",{\"type\":\"ReduceScatter\",\"attrs\":{\"process_group_"
                                       "size\":1}}]",
     NULL, NULL, ENV_W4,
     "fwd[BasicLinear(0),ReduceScatter(1)] bwd[BasicLinear(0),ReduceScatter(1)]"},
    {"UB TP size 1 of 4",
     "[" BLIN(",\"userbuffers\":true,\"tensor_parallel_mode\":\"column\",\"tensor_parallel_size\":"
              "1") "]",
     NULL, NULL, ENV_W4, "fwd[BasicLinear(0)] bwd[BasicLinear(0)]"},
    {"UB fwd override", "[" BLIN(",\"userbuffers\":true,\"tensor_parallel_mode\":\"column\"") "]",
     "MXFP8BlockScaling", "{\"backward_override\":\"dequantized\"}", ENV_W4,
     "fwd[BasicLinear(0)] bwd[UserbuffersBackwardLinear(0)]"},
    {"UB fwd no override",
     "[" BLIN(",\"userbuffers\":true,\"tensor_parallel_mode\":\"column\"") "]", "MXFP8BlockScaling",
     "{\"backward_override\":null}", ENV_W4,
     "fwd[UserbuffersForwardLinear(0)] bwd[UserbuffersBackwardLinear(0)]"},
    /* UB registered before FLBA: it takes the linear first */
    {"UB before FLBA",
     "[" BLIN(",\"userbuffers\":true,\"tensor_parallel_mode\":\"column\"") "," BIAS
                                                                           "," ADD("true") "]",
     NULL, NULL, ENV_W4,
     "fwd[UserbuffersForwardLinear(0-1),AddExtraInput(2)] "
     "bwd[UserbuffersBackwardLinear(0-1),AddExtraInput(2)]"},
};

static void test_gate_fwd_bwd_rules_each_condition_flips(void **state)
{
    (void)state;
    for (size_t i = 0; i < FT_ARRAY_LEN(rule_cases); i++) {
        const rule_case *rc = &rule_cases[i];
        const char *fz[] = {rc->ops, NULL};
        rdef rs[] = {{rc->rtype, rc->rattrs}, {0}};
        ft_model *m = mk(fz, rc->rtype ? rs : NULL, rc->env, NULL, 0);
        const char *got = plan(m, 0, rc->rtype ? 0 : -1, 0);
        if (strcmp(got, rc->expect))
            fail_msg("case '%s':\n got    %s\n expect %s", rc->name, got, rc->expect);
        ft_model_free(m);
    }
}

/* ---- map-to-basic, interning -------------------------------------------------------------- */
static void test_map_to_basic_rejects_mismatch(void **state)
{
    (void)state;
    ft_op ops[3];
    memset(ops, 0, sizeof ops);
    for (int i = 0; i < 3; i++)
        ops[i].name = "Identity";
    ft_err err = {0};
    ft_unit ok[] = {{-1, 0, 0}, {0, 1, 2}};
    assert_int_equal(ft_map_to_basic(ok, 2, ops, 3, 5, &err), FT_OK);
    ft_unit gap[] = {{-1, 0, 0}, {-1, 2, 2}};
    assert_int_equal(ft_map_to_basic(gap, 2, ops, 3, 5, &err), FT_EUNSUPPORTED);
    assert_non_null(strstr(ft_err_msg(&err), "Found mismatch after fusing operations"));
    assert_non_null(strstr(ft_err_msg(&err), "fuser 5"));
    ft_unit overlap[] = {{0, 0, 1}, {-1, 1, 1}, {-1, 2, 2}};
    assert_int_equal(ft_map_to_basic(overlap, 3, ops, 3, 5, &err), FT_EUNSUPPORTED);
    ft_unit short_[] = {{-1, 0, 0}, {-1, 1, 1}};
    assert_int_equal(ft_map_to_basic(short_, 2, ops, 3, 5, &err), FT_EUNSUPPORTED);
    ft_unit order[] = {{-1, 1, 1}, {-1, 0, 0}, {-1, 2, 2}};
    assert_int_equal(ft_map_to_basic(order, 3, ops, 3, 5, &err), FT_EUNSUPPORTED);
    ft_unit wide_basic[] = {{-1, 0, 2}};
    assert_int_equal(ft_map_to_basic(wide_basic, 1, ops, 3, 5, &err), FT_EUNSUPPORTED);
    ft_unit past[] = {{-1, 0, 0}, {-1, 1, 1}, {0, 2, 3}};
    assert_int_equal(ft_map_to_basic(past, 3, ops, 3, 5, &err), FT_EUNSUPPORTED);
}

static void test_plan_interning_shares_ids(void **state)
{
    (void)state;
    char a[1024], b[1024];
    mlp_ops("ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, "", a, sizeof a);
    mlp_ops("ScaledSwiGLU", GLU_OK_ATTRS, 8, 128, 512, 256, 128, "", b, sizeof b);
    const char *fz[] = {a, b, "[{\"type\":\"Identity\"}]", NULL};
    rdef rs[] = {{"MXFP8BlockScaling", "{}"}, {"MXFP8BlockScaling", "{\"margin\":1}"}, {0}};
    ft_model *m = mk(fz, rs, ENV_SM100, NULL, 0);
    uint32_t p00 = plan_id(m, 0, 0, 0), p03 = plan_id(m, 0, 0, 3);
    assert_int_equal(p00, p03);                 /* grad and no-grad plans are the same topology */
    assert_int_equal(plan_id(m, 1, 0, 0), p00); /* same topology from another fuser */
    assert_int_equal(plan_id(m, 0, 1, 1), p00); /* another recipe, same topology */
    uint32_t un = plan_id(m, 0, -1, 0);
    assert_int_not_equal(un, p00);
    assert_int_equal(plan_id(m, 1, -1, 3), un);
    uint32_t id = plan_id(m, 2, 0, 1);
    assert_string_equal(ft_model_plan_text(m, id), "fwd[Identity(0)] bwd[Identity(0)]");
    assert_int_equal(ft_model_n_plans(m), 3);
    /* repeated builds are lookups */
    for (int i = 0; i < 100; i++)
        assert_int_equal(plan_id(m, i % 2, 0, (uint32_t)(i % 4)), p00);
    assert_int_equal(ft_model_n_plans(m), 3);
    /* out-of-range arguments */
    ft_err err = {0};
    assert_int_equal(ft_model_build(m, 3, 0, 0, &id, &err), FT_EINVAL);
    assert_int_equal(ft_model_build(m, 0, 2, 0, &id, &err), FT_EINVAL);
    assert_int_equal(ft_model_build(m, 0, 0, 4, &id, &err), FT_EINVAL);
    assert_null(ft_model_plan_text(m, 99));
    ft_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gate_grouped_mlp_fuses_mxfp8_and_nvfp4_rht),
        cmocka_unit_test(test_gate_grouped_mlp_each_condition_flips),
        cmocka_unit_test(test_gate_grouped_mlp_registry_order),
        cmocka_unit_test(test_gate_fwd_bwd_rules_each_condition_flips),
        cmocka_unit_test(test_map_to_basic_rejects_mismatch),
        cmocka_unit_test(test_plan_interning_shares_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
