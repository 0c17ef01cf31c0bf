/*
 * test_tefuser.c - the fuser model (tefuser/ft_tefuser.h): fusion gates, passes, map-to-basic,
 * plan interning, recipes and their hash, the quantizer-state model, stale classification, the
 * fusion-attrs key, and errors on bad ops/attrs JSON.
 */
#define _POSIX_C_SOURCE 200809L
#include "fuzz/fuzz_model.c"
#include "ft_tefuser.h"
#include "tefuser_int.h"
#include "test_util.h"

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
        fz[nf] = (ft_fuser_def){100 + nf, NULL, ops[nf], (uint32_t)json_array_size(a), 0, 0};
        json_decref(a);
    }
    for (; recipes && recipes[nr].type; nr++)
        rc[nr] = (ft_recipe_def){200 + nr, recipes[nr].type, 7000 + nr, recipes[nr].attrs};
    ft_model *m = NULL;
    ft_err err = {0};
    int r = ft_model_new(fz, nf, rc, nr, &(ft_model_capture){.env_json = env}, ov, n_ov, &m, &err);
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
    {"BAB X = joint grouped MLP (its FC2's quantizer)",
     "[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":4,\"in_features\":64,"
     "\"out_features\":256}},{\"type\":\"ScaledSwiGLU\",\"attrs\":{\"glu_interleave_size\":32}},"
     "{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":4,\"in_features\":128,"
     "\"out_features\":64}}," BIAS ",{\"type\":\"GELU\"}]",
     "MXFP8BlockScaling", "{}", ENV_SM100,
     "fwd[GroupedMLP_CuTeGEMMGLU(0-2),Bias(3),GELU(4)] "
     "bwd[GroupedMLP_CuTeGEMMGLU(0-2),BackwardActivationBias(3-4)]"},
    {"BAB chained: a fused BAB op is no X",
     "[" BLIN("") "," BIAS ",{\"type\":\"GELU\"}," BIAS ",{\"type\":\"GELU\"}]",
     "MXFP8BlockScaling", "{}", ENV_W1,
     "fwd[BasicLinear(0),Bias(1),GELU(2),Bias(3),GELU(4)] "
     "bwd[BasicLinear(0),BackwardActivationBias(1-2),Bias(3),GELU(4)]"},
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

/* ---- recipes: canonical encoding and hash ------------------------------------------------- */
typedef struct attr_variant {
    const char *type, *name, *value; /* value differs from the default */
} attr_variant;

static const attr_variant variants[] = {
    {"DelayedScaling", "margin", "1"},
    {"DelayedScaling", "fp8_format", "\"E4M3\""},
    {"DelayedScaling", "amax_history_len", "16"},
    {"DelayedScaling", "amax_compute_algo", "\"most_recent\""},
    {"DelayedScaling", "scaling_factor_compute_algo", "\"my_fn\""},
    {"DelayedScaling", "reduce_amax", "false"},
    {"DelayedScaling", "fp8_dpa", "true"},
    {"DelayedScaling", "fp8_mha", "true"},
    {"DelayedScaling", "backward_override", "\"high_precision\""},
    {"Float8CurrentScaling", "use_power_2_scales", "true"},
    {"Float8CurrentScaling", "fp8_format", "\"E4M3\""},
    {"Float8CurrentScaling", "fp8_quant_fwd_inp", "{\"power_2_scale\":true}"},
    {"Float8CurrentScaling", "fp8_quant_fwd_weight", "{\"amax_epsilon\":0.5}"},
    {"Float8CurrentScaling", "fp8_quant_bwd_grad", "{\"power_2_scale\":true}"},
    {"Float8CurrentScaling", "fp8_gemm_fprop", "{\"use_split_accumulator\":true}"},
    {"Float8CurrentScaling", "fp8_gemm_dgrad", "{\"use_split_accumulator\":false}"},
    {"Float8CurrentScaling", "fp8_gemm_wgrad", "{\"use_split_accumulator\":false}"},
    {"Float8CurrentScaling", "fp8_dpa", "true"},
    {"Float8CurrentScaling", "fp8_mha", "true"},
    {"Float8CurrentScaling", "backward_override", "\"dequantized\""},
    {"MXFP8BlockScaling", "margin", "2"},
    {"MXFP8BlockScaling", "fp8_format", "\"HYBRID\""},
    {"MXFP8BlockScaling", "fp8_dpa", "true"},
    {"MXFP8BlockScaling", "fp8_mha", "true"},
    {"MXFP8BlockScaling", "backward_override", "\"high_precision\""},
    {"MXFP8BlockScaling", "enable_2d_quantization", "true"},
    {"Float8BlockScaling", "use_f32_scales", "true"},
    {"Float8BlockScaling", "fp8_format", "\"HYBRID\""},
    {"Float8BlockScaling", "fp8_quant_fwd_inp", "{\"power_2_scale\":false}"},
    {"Float8BlockScaling", "fp8_quant_fwd_weight", "{\"power_2_scale\":false}"},
    {"Float8BlockScaling", "fp8_quant_bwd_grad", "{\"power_2_scale\":false}"},
    {"Float8BlockScaling", "x_block_scaling_dim", "2"},
    {"Float8BlockScaling", "w_block_scaling_dim", "1"},
    {"Float8BlockScaling", "grad_block_scaling_dim", "2"},
    {"Float8BlockScaling", "fp8_gemm_fprop", "{\"use_split_accumulator\":true}"},
    {"Float8BlockScaling", "fp8_gemm_dgrad", "{\"use_split_accumulator\":true}"},
    {"Float8BlockScaling", "fp8_gemm_wgrad", "{\"use_split_accumulator\":true}"},
    {"Float8BlockScaling", "fp8_dpa", "true"},
    {"Float8BlockScaling", "fp8_mha", "true"},
    {"Float8BlockScaling", "backward_override", "\"dequantized\""},
    {"NVFP4BlockScaling", "disable_rht", "true"},
    {"NVFP4BlockScaling", "disable_stochastic_rounding", "true"},
    {"NVFP4BlockScaling", "disable_2d_quantization", "true"},
    {"NVFP4BlockScaling", "row_scaled_activation", "true"},
    {"NVFP4BlockScaling", "nvfp4_4over6", "\"weights\""},
    {"NVFP4BlockScaling", "nvfp4_4over6_e4m3_use_256", "\"none\""},
    {"NVFP4BlockScaling", "nvfp4_4over6_err_mode", "\"MSE\""},
    {"NVFP4BlockScaling", "fp4_format", NULL}, /* E2M1 is its only value */
    {"NVFP4BlockScaling", "fp8_format", "\"HYBRID\""},
    {"NVFP4BlockScaling", "fp4_quant_fwd_inp", "{\"random_hadamard_transform\":true}"},
    {"NVFP4BlockScaling", "fp4_quant_fwd_weight", "{\"fp4_2d_quantization\":true}"},
    {"NVFP4BlockScaling", "fp4_quant_bwd_grad", "{\"stochastic_rounding\":true}"},
    {"NVFP4BlockScaling", "fp8_dpa", "true"},
    {"NVFP4BlockScaling", "fp8_mha", "true"},
    {"NVFP4BlockScaling", "backward_override", "\"high_precision\""},
    {"CustomRecipe", "qfactory", "\"my_factory\""},
    {"CustomRecipe", "fp8_format", "\"E4M3\""},
    {"CustomRecipe", "fp8_dpa", "true"},
    {"CustomRecipe", "fp8_mha", "true"},
    {"CustomRecipe", "backward_override", "\"high_precision\""},
    {"CustomRecipe", "quantization_alignment", "64"},
};

static const char *const recipe_type_names[] = {"DelayedScaling",    "Float8CurrentScaling",
                                                "MXFP8BlockScaling", "Float8BlockScaling",
                                                "NVFP4BlockScaling", "CustomRecipe"};

static void test_recipe_hash_every_attribute_counts(void **state)
{
    (void)state;
    for (size_t t = 0; t < FT_ARRAY_LEN(recipe_type_names); t++) {
        const char *tn = recipe_type_names[t];
        rdef rs[2] = {{tn, "{}"}, {0}};
        ft_model *base = mk(NULL, rs, NULL, NULL, 0);
        uint64_t h0 = ft_model_recipe(base, 0)->hash;
        /* every field in the canonical encoding has a variant here (the list cannot fall behind
         * the recipe table) */
        const char *canon = ft_model_recipe_canon(base, 0);
        assert_true(strncmp(canon, tn, strlen(tn)) == 0);
        const char *p = strchr(canon, '{');
        while (p && *p && *p != '}') {
            p++;
            const char *eq = strchr(p, '=');
            assert_non_null(eq);
            char name[64];
            size_t n = (size_t)(eq - p) < sizeof name - 1 ? (size_t)(eq - p) : sizeof name - 1;
            memcpy(name, p, n);
            name[n] = '\0';
            int covered = 0;
            for (size_t v = 0; v < FT_ARRAY_LEN(variants); v++)
                if (!strcmp(variants[v].type, tn) && !strcmp(variants[v].name, name)) covered = 1;
            if (!covered) fail_msg("%s.%s has no hash-sensitivity variant", tn, name);
            /* skip the value (no value in the table contains ",name=" ) */
            int depth = 0;
            p = eq + 1;
            for (; *p; p++) {
                if (*p == '{' || *p == '[')
                    depth++;
                else if ((*p == '}' || *p == ']') && depth)
                    depth--;
                else if ((*p == ',' || *p == '}') && !depth)
                    break;
            }
        }
        for (size_t v = 0; v < FT_ARRAY_LEN(variants); v++) {
            if (strcmp(variants[v].type, tn) || !variants[v].value) continue;
            char attrs[256];
            snprintf(attrs, sizeof attrs, "{\"%s\":%s}", variants[v].name, variants[v].value);
            rdef r2[2] = {{tn, attrs}, {0}};
            ft_model *m = mk(NULL, r2, NULL, NULL, 0);
            if (ft_model_recipe(m, 0)->hash == h0)
                fail_msg("%s: changing %s does not change the hash", tn, variants[v].name);
            ft_model_free(m);
        }
        /* an unknown field counts too */
        rdef r3[2] = {{tn, "{\"some_future_field\":3}"}, {0}};
        ft_model *m3 = mk(NULL, r3, NULL, NULL, 0);
        assert_true(ft_model_recipe(m3, 0)->hash != h0);
        ft_model_free(m3);
        ft_model_free(base);
    }
}

static void test_recipe_hash_canonical(void **state)
{
    (void)state;
    rdef rs[] = {
        {"NVFP4BlockScaling", "{\"disable_rht\":true,\"backward_override\":null,\"x\":[1,2]}"},
        {"NVFP4BlockScaling", "{\"x\":[1,2],\"backward_override\":null,\"disable_rht\":true}"},
        {"NVFP4BlockScaling", "{\"disable_rht\":true,\"x\":[1,2],\"fp4_format\":\"E2M1\"}"},
        {"NVFP4BlockScaling", "{\"disable_rht\":true,\"x\":[2,1]}"},
        {"MXFP8BlockScaling", "{\"fp8_format\":\"E4M3\"}"},
        {"MXFP8BlockScaling", "{\"fp8_format\":\"Format.E4M3\"}"},
        {"MXFP8BlockScaling", "{}"},
        {"Float8BlockScaling", "{}"},
        {0},
    };
    ft_model *m = mk(NULL, rs, NULL, NULL, 0);
    /* key order and explicit defaults do not matter; values and types do */
    assert_true(ft_model_recipe(m, 0)->hash == ft_model_recipe(m, 1)->hash);
    assert_true(ft_model_recipe(m, 0)->hash == ft_model_recipe(m, 2)->hash);
    assert_true(ft_model_recipe(m, 0)->hash != ft_model_recipe(m, 3)->hash);
    assert_true(ft_model_recipe(m, 4)->hash == ft_model_recipe(m, 5)->hash);
    assert_true(ft_model_recipe(m, 4)->hash == ft_model_recipe(m, 6)->hash);
    assert_true(ft_model_recipe(m, 6)->hash != ft_model_recipe(m, 7)->hash);
    assert_true(ft_model_recipe(m, -1)->hash != ft_model_recipe(m, 6)->hash);
    assert_string_equal(ft_model_recipe_canon(m, -1), "None");
    assert_int_equal(ft_model_recipe(m, -1)->type, FT_RT_NONE);
    /* the model fields */
    const ft_recipe_model *r = ft_model_recipe(m, 0);
    assert_int_equal(r->type, FT_RT_NVFP4);
    assert_int_equal(r->obj, 7000);
    assert_int_equal(r->disable_rht, 1);
    assert_int_equal(r->q_rht, 0);
    assert_int_equal(r->q_sr, 1);
    assert_int_equal(r->q_2d, 1);
    assert_int_equal(r->bo, FT_BO_NONE);
    ft_model_free(m);
}

static void test_recipe_env_defaults_and_qparams(void **state)
{
    (void)state;
    rdef rs[] = {
        {"NVFP4BlockScaling", "{}"},
        {"NVFP4BlockScaling", "{\"disable_rht\":false}"},
        /* mutated after construction: disable_rht now true, QParams still RHT */
        {"NVFP4BlockScaling",
         "{\"disable_rht\":true,\"fp4_quant_fwd_inp\":{\"random_hadamard_transform\":true}}"},
        {"DelayedScaling", "{}"},
        {"MXFP8BlockScaling", "{}"},
        {0},
    };
    ft_model *m = mk(NULL, rs,
                     "{\"NVTE_NVFP4_DISABLE_RHT\":\"1\",\"NVTE_BACKWARD_OVERRIDE\":"
                     "\"dequantized\"}",
                     NULL, 0);
    assert_int_equal(ft_model_recipe(m, 0)->disable_rht, 1); /* class-body env default */
    assert_int_equal(ft_model_recipe(m, 0)->q_rht, 0);
    assert_int_equal(ft_model_recipe(m, 0)->bo, FT_BO_DEQUANTIZED);
    assert_int_equal(ft_model_recipe(m, 1)->disable_rht, 0);
    assert_int_equal(ft_model_recipe(m, 1)->q_rht, 1);
    assert_int_equal(ft_model_recipe(m, 2)->disable_rht, 1);
    assert_int_equal(ft_model_recipe(m, 2)->q_rht, 1);
    assert_int_equal(ft_model_recipe(m, 3)->amax_history_len, 1024);
    assert_int_equal(ft_model_recipe(m, 3)->fp8_format, 1); /* HYBRID */
    assert_int_equal(ft_model_recipe(m, 4)->fp8_format, 0); /* E4M3 */
    ft_model_free(m);
}

/* ---- quantizer state ---------------------------------------------------------------------- */
static void test_qstate_reset_rules(void **state)
{
    (void)state;
    rdef rs[] = {
        {"NVFP4BlockScaling", "{\"disable_rht\":false}"},                          /* 0 R1 */
        {"NVFP4BlockScaling", "{\"disable_rht\":true}"},                           /* 1 R2 */
        {"MXFP8BlockScaling", "{}"},                                               /* 2 M */
        {"DelayedScaling", "{\"amax_history_len\":16,\"fp8_format\":\"HYBRID\"}"}, /* 3 */
        {"DelayedScaling", "{\"amax_history_len\":32,\"fp8_format\":\"E4M3\"}"},   /* 4 */
        {"MXFP8BlockScaling", "{\"enable_2d_quantization\":true}"},                /* 5 */
        {0},
    };
    ft_model *m = mk(NULL, rs, NULL, NULL, 0);
    ft_qstate q, f1, f2;
    ft_qstate_init(&q);
    assert_int_equal(q.cls, -1);
    ft_model_fresh_qstate(m, 0, &f1);
    ft_model_fresh_qstate(m, 1, &f2);
    assert_int_equal(f1.cls, FT_RT_NVFP4);
    assert_int_equal(f1.rht, 1);
    assert_int_equal(f1.sr, 1);
    assert_int_equal(f1.twod, 1);
    assert_int_equal(f2.rht, 0);
    assert_false(ft_qstate_equal(&f1, &f2));
    /* first reset builds */
    ft_model_reset(m, &q, 0);
    assert_true(ft_qstate_equal(&q, &f1));
    /* same class: kept (S1, S3) */
    ft_model_reset(m, &q, 1);
    assert_true(ft_qstate_equal(&q, &f1));
    assert_int_equal(q.rht, 1);
    /* class change: rebuilt (S2) */
    ft_model_reset(m, &q, 2);
    assert_int_equal(q.cls, FT_RT_MXFP8);
    ft_model_reset(m, &q, 1);
    assert_true(ft_qstate_equal(&q, &f2));
    /* reset(None) clears, the next reset rebuilds (S2') */
    ft_model_reset(m, &q, 0);
    assert_int_equal(q.rht, 0); /* still Q(R2): same class */
    ft_model_reset(m, &q, -1);
    assert_int_equal(q.cls, -1);
    ft_model_reset(m, &q, 0);
    assert_true(ft_qstate_equal(&q, &f1));
    /* DelayedScaling: the history follows, the fp8 dtype baked at creation does not */
    ft_model_reset(m, &q, 3);
    assert_int_equal(q.hist_len, 16);
    assert_int_equal(q.fp8_format, 1);
    ft_model_reset(m, &q, 4);
    assert_int_equal(q.hist_len, 32);
    assert_int_equal(q.fp8_format, 1);
    ft_qstate d4;
    ft_model_fresh_qstate(m, 4, &d4);
    assert_false(ft_qstate_equal(&q, &d4));
    /* MXFP8 2D is baked too */
    ft_model_reset(m, &q, 2);
    ft_model_reset(m, &q, 5);
    assert_int_equal(q.twod, 0);
    ft_qstate m5;
    ft_model_fresh_qstate(m, 5, &m5);
    assert_int_equal(m5.twod, 1);
    assert_false(ft_qstate_equal(&q, &m5));
    ft_qstate none1, none2;
    ft_model_fresh_qstate(m, -1, &none1);
    ft_qstate_init(&none2);
    assert_true(ft_qstate_equal(&none1, &none2));
    ft_model_free(m);
}

/* ---- the disable_rht scenarios at the model level ----------------------------------------------
 */
/* TE's reset decisions: OLD (pre-3410) resets when (type, f, bo) or the delayed history changes,
 * NEW (3410) when (type, bo) or the history changes. Plans come from the policy's cache; here
 * a tiny NEW cache keyed by (type, f, bo) and OLD's single slot. */
typedef struct te_sim {
    int new_algo;
    int has_prev;
    ft_recipe_type prev_type;
    ft_bo prev_bo;
    uint32_t prev_f;
    int64_t last_hist;
    ft_qstate q;
    uint32_t slot_plan;
    struct {
        ft_recipe_type t;
        uint32_t f;
        ft_bo bo;
        uint32_t plan;
    } cache[16];
    int n_cache;
} te_sim;

static uint32_t te_call(te_sim *s, ft_model *m, uint32_t fuser, int32_t recipe, uint32_t f)
{
    const ft_recipe_model *r = ft_model_recipe(m, recipe);
    int reset = !s->has_prev || r->type != s->prev_type || r->bo != s->prev_bo ||
                (!s->new_algo && f != s->prev_f) ||
                (r->type == FT_RT_DELAYED && r->amax_history_len != s->last_hist);
    if (reset) ft_model_reset(m, &s->q, recipe);
    if (!s->new_algo) {
        if (reset) s->slot_plan = plan_id(m, fuser, recipe, f);
    } else {
        int hit = -1;
        for (int i = 0; i < s->n_cache; i++)
            if (s->cache[i].t == r->type && s->cache[i].f == f && s->cache[i].bo == r->bo) hit = i;
        if (hit < 0) {
            hit = s->n_cache++;
            s->cache[hit].t = r->type;
            s->cache[hit].f = f;
            s->cache[hit].bo = r->bo;
            s->cache[hit].plan = plan_id(m, fuser, recipe, f);
        }
        s->slot_plan = s->cache[hit].plan;
    }
    if (reset) {
        s->prev_type = r->type;
        s->prev_bo = r->bo;
        s->last_hist = r->type == FT_RT_DELAYED ? r->amax_history_len : 0;
    }
    s->prev_f = f;
    s->has_prev = 1;
    return s->slot_plan;
}

/* classify the call just made */
static ft_stale te_stale(te_sim *s, ft_model *m, uint32_t fuser, int32_t recipe, uint32_t f,
                         int64_t T, const char **text)
{
    uint32_t fresh = plan_id(m, fuser, recipe, f);
    return ft_model_classify(m, fuser, recipe, s->slot_plan, &s->q, fresh, T, f, text);
}

enum { R1 = 0, R2 = 1, RM = 2 };
static const rdef scen_recipes[] = {
    {"NVFP4BlockScaling", "{\"disable_rht\":false}"},
    {"NVFP4BlockScaling", "{\"disable_rht\":true}"},
    {"MXFP8BlockScaling", "{}"},
    {0},
};

static ft_model *scen_model(int G, const char *act, const char *act_attrs, const char *fc_extra)
{
    static char ops[1024];
    int srelu = !strcmp(act, "ScaledSReLU");
    mlp_ops(act, act_attrs, G, 64, srelu ? 128 : 256, 128, 64, fc_extra, ops, sizeof ops);
    const char *fz[] = {ops, NULL};
    return mk(fz, scen_recipes, ENV_SM100, NULL, 0);
}

static void test_scenario_s1_same_type_switch_quant(void **state)
{
    (void)state;
    ft_model *m = scen_model(4, "ScaledSwiGLU", GLU_OK_ATTRS, "");
    for (int algo = 0; algo < 2; algo++) {
        te_sim s = {.new_algo = algo};
        ft_qstate_init(&s.q);
        te_call(&s, m, 0, R1, 0);
        assert_int_equal(te_stale(&s, m, 0, R1, 0, 256, NULL), FT_STALE_NONE);
        te_call(&s, m, 0, R2, 0);
        assert_true(ft_model_plan_fused_mlp(m, s.slot_plan)); /* sticky fused plan */
        assert_int_equal(s.q.rht, 1);                         /* sticky Q(R1) */
        const char *t = NULL;
        assert_int_equal(te_stale(&s, m, 0, R2, 0, 256, &t), FT_STALE_QUANT);
        assert_null(t);
        /* T % 128 != 0 in the stale fused op raises */
        assert_int_equal(te_stale(&s, m, 0, R2, 0, 200, &t), FT_STALE_RAISES);
        assert_string_equal(t,
                            "Unsupported input shape for fused grouped MLP (in_shape=[200, 64]).");
    }
    ft_model_free(m);
}

static void test_scenario_s2_raises_on_multi_group(void **state)
{
    (void)state;
    ft_model *m = scen_model(4, "ScaledSwiGLU", GLU_OK_ATTRS, "");
    /* S2 and S2' (through None) */
    for (int via_none = 0; via_none < 2; via_none++) {
        te_sim s = {.new_algo = 1};
        ft_qstate_init(&s.q);
        te_call(&s, m, 0, R1, 0);
        te_call(&s, m, 0, via_none ? -1 : RM, 0);
        te_call(&s, m, 0, R2, 0);
        assert_int_equal(s.q.cls, FT_RT_NVFP4);
        assert_int_equal(s.q.rht, 0);                         /* Q(R2) rebuilt */
        assert_true(ft_model_plan_fused_mlp(m, s.slot_plan)); /* stale fused plan from R1 */
        const char *t = NULL;
        assert_int_equal(te_stale(&s, m, 0, R2, 0, 256, &t), FT_STALE_RAISES);
        assert_string_equal(t, "graph safe grouped quant kernel for non-RHT path is not ready yet");
        /* T == 0: group_quantize returns early, no error; same quantizers as fresh */
        assert_int_equal(te_stale(&s, m, 0, R2, 0, 0, &t), FT_STALE_HARMLESS);
        assert_null(t);
    }
    /* OLD rebuilds: no stale plan */
    te_sim o = {.new_algo = 0};
    ft_qstate_init(&o.q);
    te_call(&o, m, 0, R1, 0);
    te_call(&o, m, 0, RM, 0);
    te_call(&o, m, 0, R2, 0);
    assert_false(ft_model_plan_fused_mlp(m, o.slot_plan));
    assert_int_equal(te_stale(&o, m, 0, R2, 0, 256, NULL), FT_STALE_NONE);
    ft_model_free(m);
}

static void test_scenario_s2_single_group_runs(void **state)
{
    (void)state;
    ft_model *m = scen_model(1, "ScaledSwiGLU", GLU_OK_ATTRS, "");
    te_sim s = {.new_algo = 1};
    ft_qstate_init(&s.q);
    te_call(&s, m, 0, R1, 0);
    te_call(&s, m, 0, RM, 0);
    te_call(&s, m, 0, R2, 0);
    const char *t = NULL;
    assert_int_equal(te_stale(&s, m, 0, R2, 0, 256, &t), FT_STALE_HARMLESS);
    assert_null(t);
    ft_model_free(m);
    /* ... except a plain FC2 bias, which raises in the fused backward (not without grad) */
    m = scen_model(1, "ScaledSwiGLU", GLU_OK_ATTRS, ",\"bias\":true");
    te_sim b = {.new_algo = 1};
    ft_qstate_init(&b.q);
    te_call(&b, m, 0, R1, 0);
    te_call(&b, m, 0, RM, 0);
    te_call(&b, m, 0, R2, 0);
    assert_int_equal(te_stale(&b, m, 0, R2, 0, 256, &t), FT_STALE_RAISES);
    assert_string_equal(t, "bgrad_group_quantize: only MXFP8 and FP8 block-scaling quantizers are "
                           "supported.");
    assert_int_equal(
        ft_model_classify(m, 0, R2, b.slot_plan, &b.q, plan_id(m, 0, R2, 3), 256, 3, &t),
        FT_STALE_HARMLESS);
    ft_model_free(m);
    /* scale_bias is not a plain bias */
    m = scen_model(1, "ScaledSwiGLU", GLU_OK_ATTRS, ",\"bias\":true,\"scale_bias\":true");
    te_sim c = {.new_algo = 1};
    ft_qstate_init(&c.q);
    te_call(&c, m, 0, R1, 0);
    te_call(&c, m, 0, RM, 0);
    te_call(&c, m, 0, R2, 0);
    assert_int_equal(te_stale(&c, m, 0, R2, 0, 256, &t), FT_STALE_HARMLESS);
    ft_model_free(m);
}

static void test_scenario_s2_single_grouped_weight_2d(void **state)
{
    (void)state;
    ft_model *m = scen_model(4, "ScaledSwiGLU", GLU_OK_ATTRS, ",\"single_grouped_weight\":true");
    te_sim s = {.new_algo = 1};
    ft_qstate_init(&s.q);
    te_call(&s, m, 0, R1, 0);
    te_call(&s, m, 0, RM, 0);
    te_call(&s, m, 0, R2, 0);
    const char *t = NULL;
    /* the weight group-quantize fails first (2D on by default), even for T == 0 */
    assert_int_equal(te_stale(&s, m, 0, R2, 0, 0, &t), FT_STALE_RAISES);
    assert_string_equal(t, "2D scaling grouped quant kernel is not ready yet");
    ft_model_free(m);
}

static void test_scenario_s3_same_type_grad_switch(void **state)
{
    (void)state;
    ft_model *m = scen_model(4, "ScaledSwiGLU", GLU_OK_ATTRS, "");
    const uint32_t n = 3;
    /* NEW: step 2 builds unfused under R2 (fresh), step 3 hits the fused R1 plan with Q(R1) */
    te_sim s = {.new_algo = 1};
    ft_qstate_init(&s.q);
    te_call(&s, m, 0, R1, 0);
    te_call(&s, m, 0, R2, n);
    assert_false(ft_model_plan_fused_mlp(m, s.slot_plan));
    assert_int_equal(te_stale(&s, m, 0, R2, n, 256, NULL), FT_STALE_NONE);
    ft_qstate fq;
    ft_model_fresh_qstate(m, R2, &fq);
    assert_false(ft_qstate_equal(&s.q, &fq)); /* quantizer drift: RHT kept under R2 */
    te_call(&s, m, 0, R2, 0);
    assert_true(ft_model_plan_fused_mlp(m, s.slot_plan));
    assert_int_equal(te_stale(&s, m, 0, R2, 0, 256, NULL), FT_STALE_QUANT);
    /* OLD: every step rebuilds and resets, same-type reset keeps Q(R1); plans are fresh */
    te_sim o = {.new_algo = 0};
    ft_qstate_init(&o.q);
    te_call(&o, m, 0, R1, 0);
    te_call(&o, m, 0, R2, n);
    te_call(&o, m, 0, R2, 0);
    assert_false(ft_model_plan_fused_mlp(m, o.slot_plan));
    assert_int_equal(te_stale(&o, m, 0, R2, 0, 256, NULL), FT_STALE_NONE);
    assert_int_equal(o.q.rht, 1);
    /* the unfused GroupedLinear under R2 takes the split-quantize path: no raise */
    assert_int_equal(ft_model_run_raises(m, 0, R2, o.slot_plan, &o.q, 256, 0, NULL), 0);
    ft_model_free(m);
}

static void test_scenario_s4_stale_unfused(void **state)
{
    (void)state;
    ft_model *m = scen_model(4, "ScaledSwiGLU", GLU_OK_ATTRS, "");
    te_sim s = {.new_algo = 1};
    ft_qstate_init(&s.q);
    te_call(&s, m, 0, R2, 0);
    te_call(&s, m, 0, RM, 0);
    te_call(&s, m, 0, R1, 0);
    assert_int_equal(s.q.rht, 1); /* Q(R1) rebuilt after MXFP8 */
    assert_false(ft_model_plan_fused_mlp(m, s.slot_plan));
    assert_int_equal(te_stale(&s, m, 0, R1, 0, 256, NULL), FT_STALE_SLOWER);
    te_sim o = {.new_algo = 0};
    ft_qstate_init(&o.q);
    te_call(&o, m, 0, R2, 0);
    te_call(&o, m, 0, RM, 0);
    te_call(&o, m, 0, R1, 0);
    assert_true(ft_model_plan_fused_mlp(m, o.slot_plan));
    ft_model_free(m);

    /* SReLU with activation_recompute_in_mlp: the unfused op raises, at step 3 (stale) and at
     * step 1 (fresh unfused plan, both algorithms) */
    m = scen_model(4, "ScaledSReLU", "\"activation_recompute_in_mlp\":true", "");
    te_sim r = {.new_algo = 1};
    ft_qstate_init(&r.q);
    te_call(&r, m, 0, R2, 0);
    const char *t = NULL;
    assert_int_equal(ft_model_run_raises(m, 0, R2, r.slot_plan, &r.q, 256, 0, &t), 1);
    assert_string_equal(t, "ScaledSReLU(activation_recompute_in_mlp=True) requires the fused "
                           "grouped MLP path.");
    te_call(&r, m, 0, RM, 0);
    assert_int_equal(ft_model_run_raises(m, 0, RM, r.slot_plan, &r.q, 256, 0, &t), 0);
    te_call(&r, m, 0, R1, 0);
    assert_int_equal(te_stale(&r, m, 0, R1, 0, 256, &t), FT_STALE_RAISES);
    assert_string_equal(t, "ScaledSReLU(activation_recompute_in_mlp=True) requires the fused "
                           "grouped MLP path.");
    ft_model_free(m);
}

/* The unfused NVFP4 grouped-tensor path with quantizers that lost RHT raises too (R2 -> R1 with
 * no reset: Q(R2) kept, R1 selects the graph-safe path). */
static void test_classify_unfused_grouped_tensor_path_non_rht(void **state)
{
    (void)state;
    ft_model *m = scen_model(4, "ScaledSwiGLU", GLU_OK_ATTRS, "");
    te_sim s = {.new_algo = 1};
    ft_qstate_init(&s.q);
    te_call(&s, m, 0, R2, 0);
    te_call(&s, m, 0, R1, 0);
    assert_int_equal(s.q.rht, 0);
    const char *t = NULL;
    assert_int_equal(te_stale(&s, m, 0, R1, 0, 256, &t), FT_STALE_RAISES);
    assert_string_equal(t, "graph safe grouped quant kernel for non-RHT path is not ready yet");
    /* without a device path (cuBLASLt too old) it is the split-quantize path: slower only,
     * though with different quantizers than fresh: quant */
    ft_model_free(m);
    static char ops[1024];
    mlp_ops("ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, "", ops, sizeof ops);
    const char *fz[] = {ops, NULL};
    m = mk(fz, scen_recipes,
           "{\"device_cc\":\"10.0\",\"cudnn_frontend\":\"1.27.0\",\"cublaslt\":\"13.2.0\","
           "\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\"}",
           NULL, 0);
    te_sim u = {.new_algo = 1};
    ft_qstate_init(&u.q);
    te_call(&u, m, 0, R2, 0);
    te_call(&u, m, 0, R1, 0);
    assert_int_equal(te_stale(&u, m, 0, R1, 0, 256, &t), FT_STALE_QUANT);
    ft_model_free(m);
}

static void test_classify_extra_fusions(void **state)
{
    (void)state;
    /* a backward-override switch on one object: the UB forward fusion of the no-override plan
     * bypasses the override (quant); the other way round the plan is slower */
    const char *fz[] = {"[" BLIN(",\"userbuffers\":true,\"tensor_parallel_mode\":\"column\"") "]",
                        NULL};
    rdef rs[] = {{"MXFP8BlockScaling", "{}"},
                 {"MXFP8BlockScaling", "{\"backward_override\":\"high_precision\"}"},
                 {0}};
    ft_model *m = mk(fz, rs, ENV_W4, NULL, 0);
    uint32_t p0 = plan_id(m, 0, 0, 0), p1 = plan_id(m, 0, 1, 0);
    assert_int_not_equal(p0, p1);
    ft_qstate q;
    ft_model_fresh_qstate(m, 0, &q);
    assert_int_equal(ft_model_classify(m, 0, 1, p0, &q, p1, 64, 0, NULL), FT_STALE_QUANT);
    assert_int_equal(ft_model_classify(m, 0, 0, p1, &q, p0, 64, 0, NULL), FT_STALE_SLOWER);
    assert_int_equal(ft_model_classify(m, 0, 0, p0, &q, p0, 64, 0, NULL), FT_STALE_NONE);
    assert_string_equal(ft_stale_name(FT_STALE_QUANT), "quant");
    assert_string_equal(ft_stale_name(FT_STALE_RAISES), "raises");
    assert_string_equal(ft_stale_name(FT_STALE_NONE), "none");
    ft_model_free(m);
}

/* ---- fusion-attrs key --------------------------------------------------------------------- */
/* xorshift64*: reproducible from the printed seed */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

static const char *pick(uint64_t *s, const char *const *v, size_t n)
{
    return v[rng_next(s) % n];
}

#define N_ENVS    12
#define N_RECIPES 24
#define MAX_POOL  10

/* Pool of fusers exercising every rule. */
static const char *const key_pool[] = {
    "[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":4,\"in_features\":64,\"out_features\":"
    "256}},{\"type\":\"ScaledSwiGLU\",\"attrs\":{\"glu_interleave_size\":32}},{\"type\":"
    "\"GroupedLinear\",\"attrs\":{\"num_groups\":4,\"in_features\":128,\"out_features\":64}}]",
    "[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":4,\"in_features\":64,\"out_features\":"
    "256}},{\"type\":\"ScaledClampedQGeGLU\",\"attrs\":{\"glu_interleave_size\":32,\"limit\":6.0}},"
    "{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":4,\"in_features\":128,"
    "\"out_features\":64}},{\"type\":\"Bias\"},{\"type\":\"GELU\"}]",
    "[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":2,\"in_features\":64,\"out_features\":"
    "128}},{\"type\":\"ScaledSReLU\"},{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":2,"
    "\"in_features\":128,\"out_features\":256}},{\"type\":\"ScaledSwiGLU\",\"attrs\":{"
    "\"glu_interleave_size\":32}},{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":2,"
    "\"in_features\":128,\"out_features\":64}}]",
    "[" BLIN(",\"dtype\":\"bfloat16\"") "," BIAS ",{\"type\":\"GELU\"}," SCALE "," ADD("true") "]",
    "[" BLIN(",\"userbuffers\":true,\"tensor_parallel_mode\":\"column\"") "," BIAS "," RS "]",
    "[" BLIN(",\"userbuffers\":true") "," BIAS "," RS "," MEO("true") "," BLIN("") "]",
    "[" MEO("false") ",{\"type\":\"RMSNorm\"}," BLIN("") "," BIAS ",{\"type\":\"ReLU\"}]",
    "[{\"type\":\"Quantize\",\"attrs\":{\"backward\":true}}," BIAS ",{\"type\":\"GELU\"}]",
    "[{\"type\":\"Identity\"},{\"type\":\"Reshape\"}]",
    NULL,
};

static void test_fusion_key_equal_keys_equal_plans(void **state)
{
    (void)state;
    uint64_t seed = (uint64_t)time(NULL) ^ 0x9e3779b97f4a7c15ull;
    const char *env_seed = getenv("FT_TEST_SEED");
    if (env_seed) seed = strtoull(env_seed, NULL, 0);
    printf("test_fusion_key_equal_keys_equal_plans: seed=0x%llx (FT_TEST_SEED to repeat)\n",
           (unsigned long long)seed);
    uint64_t s = seed | 1;
    static const char *const ccs[] = {"9.0", "10.0", "10.3", "12.0"};
    static const char *const fes[] = {"1.22.0", "1.23.0", "1.24.0", "1.27.0"};
    static const char *const flags[] = {"0", "1", "2"};
    static const char *const worlds[] = {"1", "2", "8"};
    static const char *const types[] = {"MXFP8BlockScaling",
                                        "NVFP4BlockScaling",
                                        "DelayedScaling",
                                        "Float8CurrentScaling",
                                        "Float8BlockScaling",
                                        "CustomRecipe",
                                        NULL};
    static const char *const bos[] = {"null", "\"high_precision\"", "\"dequantized\""};
    static const char *const bools[] = {"false", "true"};
    const size_t n_pool = FT_ARRAY_LEN(key_pool) - 1;
    size_t total = N_ENVS * (N_RECIPES + 1) * n_pool;
    uint64_t *keys = calloc(total, sizeof *keys);
    char **texts = calloc(total, sizeof *texts);
    assert_non_null(keys);
    assert_non_null(texts);
    uint8_t undeclared = 0;
    for (int e = 0; e < N_ENVS; e++) {
        char env[512];
        snprintf(env, sizeof env,
                 "{\"device_cc\":\"%s\",\"cudnn_frontend\":\"%s\",\"cublaslt\":\"13.4.0\","
                 "\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"%s\",\"world_size\":\"%s\"}",
                 pick(&s, ccs, 4), pick(&s, fes, 4), pick(&s, flags, 3), pick(&s, worlds, 3));
        static char attrs[N_RECIPES][256];
        rdef rs[N_RECIPES + 1];
        for (int r = 0; r < N_RECIPES; r++) {
            const char *t = types[rng_next(&s) % 6];
            const char *bo = strcmp(t, "DelayedScaling") ? pick(&s, bos, 3) : "null";
            if (!strcmp(t, "NVFP4BlockScaling"))
                snprintf(attrs[r], sizeof attrs[r],
                         "{\"disable_rht\":%s,\"backward_override\":%s,"
                         "\"disable_stochastic_rounding\":%s}",
                         pick(&s, bools, 2), bo, pick(&s, bools, 2));
            else
                snprintf(attrs[r], sizeof attrs[r], "{\"backward_override\":%s,\"fp8_dpa\":%s}", bo,
                         pick(&s, bools, 2));
            rs[r] = (rdef){t, attrs[r]};
        }
        rs[N_RECIPES] = (rdef){0};
        ft_model *m = mk(key_pool, rs, env, NULL, 0);
        ft_model_set_audit(m, &undeclared);
        for (int r = -1; r < N_RECIPES; r++)
            for (size_t f = 0; f < n_pool; f++) {
                size_t i = ((size_t)e * (N_RECIPES + 1) + (size_t)(r + 1)) * n_pool + f;
                keys[i] = ft_model_fusion_key(m, (uint32_t)f, r);
                texts[i] = ft_strdup(plan(m, (uint32_t)f, r, 0));
                assert_non_null(texts[i]);
            }
        ft_model_free(m);
    }
    assert_int_equal(undeclared, 0); /* every gate read was declared by its rule */
    /* equal keys (same fuser, any env and recipe) => equal plans */
    size_t pairs_equal_key = 0, distinct_plans = 0;
    for (size_t f = 0; f < n_pool; f++)
        for (size_t a = f; a < total; a += n_pool)
            for (size_t b = a + n_pool; b < total; b += n_pool) {
                if (keys[a] != keys[b]) {
                    distinct_plans += strcmp(texts[a], texts[b]) != 0;
                    continue;
                }
                pairs_equal_key++;
                if (strcmp(texts[a], texts[b]))
                    fail_msg("seed 0x%llx fuser %zu: equal fusion keys, different plans:\n %s\n %s",
                             (unsigned long long)seed, f, texts[a], texts[b]);
            }
    assert_true(pairs_equal_key > 0);
    assert_true(distinct_plans > 0);
    for (size_t i = 0; i < total; i++)
        ft_free(texts[i]);
    free(texts);
    free(keys);
}

/* The key holds only what the applicable rules read. */
static void test_fusion_key_minimal(void **state)
{
    (void)state;
    char mlp[1024];
    mlp_ops("ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, "", mlp, sizeof mlp);
    const char *fz[] = {mlp, "[{\"type\":\"Identity\"}]",
                        "[" BLIN("") "," BIAS ",{\"type\":\"GELU\"}]", NULL};
    rdef rs[] = {
        {"NVFP4BlockScaling", "{\"disable_rht\":false}"},
        {"NVFP4BlockScaling", "{\"disable_rht\":true}"},
        {"NVFP4BlockScaling", "{\"disable_rht\":false,\"disable_stochastic_rounding\":true}"},
        {"MXFP8BlockScaling", "{}"},
        {"MXFP8BlockScaling", "{\"margin\":3}"},
        {"Float8CurrentScaling", "{}"},
        {"Float8CurrentScaling", "{\"backward_override\":\"high_precision\"}"},
        {0}};
    ft_model *m = mk(fz, rs, ENV_SM100, NULL, 0);
    /* grouped MLP: disable_rht matters, SR and margin do not */
    assert_true(ft_model_fusion_key(m, 0, 0) != ft_model_fusion_key(m, 0, 1));
    assert_true(ft_model_fusion_key(m, 0, 0) == ft_model_fusion_key(m, 0, 2));
    assert_true(ft_model_fusion_key(m, 0, 3) == ft_model_fusion_key(m, 0, 4));
    assert_true(ft_model_fusion_key(m, 0, 3) != ft_model_fusion_key(m, 0, 0));
    assert_string_equal(ft_model_fusion_key_attrs(m, 0),
                        "recipe.is_none,recipe.mxfp8(),recipe.nvfp4(),recipe.disable_rht,"
                        "op[0].num_groups,op[0].in_features,op[0].out_features,"
                        "op[1].glu_interleave_size,op[2].num_groups,op[2].in_features,"
                        "op[2].out_features,env.device_cc,env.cudnn_frontend,"
                        "env.NVTE_CUTEDSL_FUSED_GROUPED_MLP,"
                        "env.NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP,"
                        "env.cudnn.grouped_gemm_glu_wrapper_sm100,"
                        "env.cudnn.grouped_gemm_dglu_wrapper_sm100,"
                        "env.cudnn.grouped_gemm_quant_wrapper_sm100,"
                        "env.cudnn.grouped_gemm_wgrad_wrapper_sm100");
    /* no applicable rule: one key for every recipe, None included */
    for (int r = -1; r < 7; r++)
        assert_true(ft_model_fusion_key(m, 1, r) == ft_model_fusion_key(m, 1, -1));
    assert_string_equal(ft_model_fusion_key_attrs(m, 1), "");
    /* activation-bias: recipe None and the override matter, the recipe type does not */
    assert_true(ft_model_fusion_key(m, 2, 3) == ft_model_fusion_key(m, 2, 5));
    assert_true(ft_model_fusion_key(m, 2, 5) != ft_model_fusion_key(m, 2, 6));
    assert_true(ft_model_fusion_key(m, 2, 5) != ft_model_fusion_key(m, 2, -1));
    ft_model_free(m);
    /* unregistered grouped MLP (flag off): the MLP fuser's key ignores the recipe entirely */
    m = mk(fz, rs, "{\"device_cc\":\"10.0\",\"cudnn_frontend\":\"1.27.0\"}", NULL, 0);
    for (int r = -1; r < 7; r++)
        assert_true(ft_model_fusion_key(m, 0, r) == ft_model_fusion_key(m, 0, -1));
    ft_model_free(m);
}

/* ---- environment, overrides and bad input ------------------------------------------------- */
static void test_env_overrides(void **state)
{
    (void)state;
    char mlp[1024];
    mlp_ops("ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, "", mlp, sizeof mlp);
    const char *fz[] = {mlp, NULL};
    rdef rs[] = {{"MXFP8BlockScaling", "{}"}, {0}};
    ft_env_kv off[] = {{"NVTE_CUTEDSL_FUSED_GROUPED_MLP", "0"}};
    ft_model *m = mk(fz, rs, ENV_SM100, off, 1);
    assert_false(fused_mlp(m, 0, 0));
    ft_model_free(m);
    ft_env_kv on[] = {{"device_cc", "10.0"},
                      {"cudnn_frontend", "1.24.0"},
                      {"NVTE_CUTEDSL_FUSED_GROUPED_MLP", " +1 "}};
    m = mk(fz, rs, NULL, on, 3);
    assert_true(fused_mlp(m, 0, 0));
    ft_model_free(m);
    /* numbers in env are taken as text; cuBLASLt in TE's integer form */
    m = mk(
        fz, rs,
        "{\"device_cc\":\"10.0\",\"cudnn_frontend\":\"1.27.0\",\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":"
        "1,\"cublaslt\":\"130400\",\"world_size\":2}",
        NULL, 0);
    assert_true(fused_mlp(m, 0, 0));
    ft_model_free(m);
}

static void expect_model_error(const char *ops, const char *rtype, const char *rattrs,
                               const char *env, const char *const *needles)
{
    ft_fuser_def fz = {42, NULL, ops, 0, 0, 0};
    if (ops) {
        json_t *a = json_loads(ops, 0, NULL);
        fz.n_ops = a && json_is_array(a) ? (uint32_t)json_array_size(a) : 0;
        json_decref(a);
    }
    ft_recipe_def rc = {17, rtype, 1, rattrs};
    ft_model *m = (ft_model *)1;
    ft_err err = {0};
    long live = ft_alloc_live();
    int r = ft_model_new(ops ? &fz : NULL, ops ? 1 : 0, rtype ? &rc : NULL, rtype ? 1 : 0,
                         &(ft_model_capture){.env_json = env}, NULL, 0, &m, &err);
    assert_int_equal(r, FT_EINVAL);
    assert_null(m);
    assert_int_equal(ft_alloc_live(), live);
    for (int i = 0; needles[i]; i++)
        if (!strstr(ft_err_msg(&err), needles[i]))
            fail_msg("error '%s' lacks '%s'", ft_err_msg(&err), needles[i]);
}

static void test_bad_input_errors_name_id_and_field(void **state)
{
    (void)state;
    expect_model_error("[{", NULL, NULL, NULL, (const char *const[]){"fuser 42", "'ops'", NULL});
    expect_model_error("{}", NULL, NULL, NULL,
                       (const char *const[]){"fuser 42", "not a JSON array", NULL});
    expect_model_error("[3]", NULL, NULL, NULL, (const char *const[]){"fuser 42 op 0", NULL});
    expect_model_error("[{\"attrs\":{}}]", NULL, NULL, NULL,
                       (const char *const[]){"fuser 42 op 0", "'type'", NULL});
    expect_model_error("[{\"type\":\"Bias\",\"attrs\":[]}]", NULL, NULL, NULL,
                       (const char *const[]){"fuser 42 op 0 (Bias)", "'attrs'", NULL});
    expect_model_error(
        "[{\"type\":\"Identity\"},{\"type\":\"GroupedLinear\",\"attrs\":{"
        "\"num_groups\":\"4\",\"in_features\":64,\"out_features\":64}}]",
        NULL, NULL, NULL,
        (const char *const[]){"fuser 42 op 1 (GroupedLinear)", "'num_groups'", "integer", NULL});
    expect_model_error("[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":4,\"in_features\":"
                       "64}}]",
                       NULL, NULL, NULL,
                       (const char *const[]){"fuser 42 op 0", "missing", "'out_features'", NULL});
    expect_model_error("[{\"type\":\"BasicLinear\",\"attrs\":{\"in_features\":64,\"out_features\":"
                       "64,\"tensor_parallel_mode\":\"diagonal\"}}]",
                       NULL, NULL, NULL, (const char *const[]){"'tensor_parallel_mode'", NULL});
    expect_model_error("[{\"type\":\"BasicLinear\",\"attrs\":{\"in_features\":64,\"out_features\":"
                       "64,\"dtype\":\"int8\"}}]",
                       NULL, NULL, NULL, (const char *const[]){"'dtype'", NULL});
    expect_model_error("[{\"type\":\"ScaledSwiGLU\",\"attrs\":{\"glu_interleave_size\":-2}}]", NULL,
                       NULL, NULL, (const char *const[]){"'glu_interleave_size'", NULL});
    expect_model_error(NULL, "FancyScaling", "{}", NULL,
                       (const char *const[]){"recipe 17", "FancyScaling", NULL});
    expect_model_error(
        NULL, "NVFP4BlockScaling", "{\"disable_rht\":\"yes\"}", NULL,
        (const char *const[]){"recipe 17 (NVFP4BlockScaling)", "'disable_rht'", "bool", NULL});
    expect_model_error(NULL, "MXFP8BlockScaling", "{\"fp8_format\":\"E3M4\"}", NULL,
                       (const char *const[]){"recipe 17", "'fp8_format'", "E3M4", NULL});
    expect_model_error(NULL, "MXFP8BlockScaling", "{\"backward_override\":\"fast\"}", NULL,
                       (const char *const[]){"recipe 17", "'backward_override'", NULL});
    expect_model_error(NULL, "DelayedScaling", "{\"amax_history_len\":0}", NULL,
                       (const char *const[]){"recipe 17", "'amax_history_len'", NULL});
    expect_model_error(NULL, "DelayedScaling", "[1]", NULL,
                       (const char *const[]){"recipe 17", "'attrs'", NULL});
    expect_model_error(NULL, "DelayedScaling", "{\"margin\":", NULL,
                       (const char *const[]){"recipe 17", "'attrs'", "JSON", NULL});
    expect_model_error(NULL, NULL, NULL, "{\"device_cc\":\"ten\"}",
                       (const char *const[]){"device_cc", "ten", NULL});
    expect_model_error(NULL, NULL, NULL, "{\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"yes\"}",
                       (const char *const[]){"NVTE_CUTEDSL_FUSED_GROUPED_MLP", NULL});
    expect_model_error(NULL, NULL, NULL, "{\"cudnn_frontend\":\"latest\"}",
                       (const char *const[]){"cudnn_frontend", NULL});
    expect_model_error(NULL, NULL, NULL, "[]", (const char *const[]){"env", NULL});
    /* declared op count disagrees with the JSON */
    ft_fuser_def fz = {42, NULL, "[{\"type\":\"Identity\"}]", 2, 0, 0};
    ft_model *m = NULL;
    ft_err err = {0};
    assert_int_equal(ft_model_new(&fz, 1, NULL, 0, NULL, NULL, 0, &m, &err), FT_EINVAL);
    assert_non_null(strstr(ft_err_msg(&err), "fuser 42"));
}

static void test_unknown_op_type_is_opaque(void **state)
{
    (void)state;
    const char *fz[] = {"[" BLIN("") ",{\"type\":\"MyCustomOp\",\"attrs\":{\"x\":1}}," BIAS "]",
                        NULL};
    ft_model *m = mk(fz, NULL, NULL, NULL, 0);
    assert_string_equal(
        plan(m, 0, -1, 0),
        "fwd[BasicLinear(0),MyCustomOp(1),Bias(2)] bwd[BasicLinear(0),MyCustomOp(1),"
        "Bias(2)]");
    ft_model_free(m);
}

/* Every allocation failure is an FT_ENOMEM (or a clean success), never a crash or a leak. */
static void test_model_alloc_failures(void **state)
{
    (void)state;
    char mlp[1024];
    mlp_ops("ScaledSwiGLU", GLU_OK_ATTRS, 4, 64, 256, 128, 64, "", mlp, sizeof mlp);
    ft_fuser_def fz[2] = {{1, NULL, mlp, 3, 0, 0},
                          {2, NULL, "[{\"type\":\"MyOp\"},{\"type\":\"Identity\"}]", 2, 0, 0}};
    ft_recipe_def rc[2] = {{1, "NVFP4BlockScaling", 1, "{\"x\":1,\"a\":2}"},
                           {2, "MXFP8BlockScaling", 2, "{}"}};
    long live = ft_alloc_live();
    int succeeded = 0;
    for (long n = 0; n < 400 && !succeeded; n++) {
        ft_alloc_fail_after(n);
        ft_model *m = NULL;
        ft_err err = {0};
        int r = ft_model_new(fz, 2, rc, 2, &(ft_model_capture){.env_json = ENV_SM100}, NULL, 0, &m,
                             &err);
        if (r == FT_OK) {
            uint32_t id;
            int ok = 1;
            for (int i = 0; i < 40 && ok; i++) {
                r = ft_model_build(m, (uint32_t)(i % 2), i % 3 - 1, (uint32_t)(i % 3), &id, &err);
                if (r) {
                    assert_int_equal(r, FT_ENOMEM);
                    ok = 0;
                }
            }
            ft_qstate q;
            ft_model_fresh_qstate(m, 0, &q);
            const char *t = NULL;
            (void)ft_model_classify(m, 0, 1, 0, &q, 1, 100, 0, &t);
            succeeded = ok;
            ft_model_free(m);
        } else {
            assert_int_equal(r, FT_ENOMEM);
        }
        ft_alloc_fail_after(-1);
        assert_int_equal(ft_alloc_live(), live);
    }
    assert_true(succeeded);
}

/* NVFP4 QParams are derived at construction: a mutated object (same obj, new attrs) keeps the
 * quantizer flags of its first declaration, while the fusion gate reads the new disable_rht. */
static void test_recipe_mutated_object_keeps_qparams(void **state)
{
    (void)state;
    ft_recipe_def rc[] = {
        {1, "NVFP4BlockScaling", 55, "{\"disable_rht\":false}"},
        {2, "NVFP4BlockScaling", 55, "{\"disable_rht\":true}"},
        {3, "NVFP4BlockScaling", 66, "{\"disable_rht\":true}"},
        {4, "NVFP4BlockScaling", 66, "{\"disable_rht\":true,\"_cached_repr\":\"x\"}"},
    };
    ft_model *m = NULL;
    ft_err err = {0};
    assert_int_equal(ft_model_new(NULL, 0, rc, 4, NULL, NULL, 0, &m, &err), FT_OK);
    assert_int_equal(ft_model_recipe(m, 1)->disable_rht, 1);
    assert_int_equal(ft_model_recipe(m, 1)->q_rht, 1);
    assert_int_equal(ft_model_recipe(m, 2)->q_rht, 0);
    ft_qstate a, b;
    ft_model_fresh_qstate(m, 0, &a);
    ft_model_fresh_qstate(m, 1, &b);
    assert_true(ft_qstate_equal(&a, &b));
    assert_true(ft_qstate_hash(&a) == ft_qstate_hash(&b));
    ft_model_fresh_qstate(m, 2, &b);
    assert_false(ft_qstate_equal(&a, &b));
    assert_true(ft_qstate_hash(&a) != ft_qstate_hash(&b));
    /* the recipe hash sees the mutation; private state such as _cached_repr does not count */
    assert_true(ft_model_recipe(m, 0)->hash != ft_model_recipe(m, 1)->hash);
    assert_true(ft_model_recipe(m, 2)->hash == ft_model_recipe(m, 3)->hash);
    ft_model_free(m);
}

/* The fuzz corpus (tests/fuzz/corpus/model) replayed: FT_OK or FT_EINVAL, no leak. */
static void test_fuzz_model_corpus(void **state)
{
    (void)state;
    assert_true(tu_replay_corpus("model", fuzz_model_run) >= 5);
}

int tefuser_capture_run(void); /* test_tefuser_capture.c */

/* What differs between two recipes, attribute by attribute, as Python prints the values; a
 * subclass's own class name; another class is one change. */
static void test_recipe_diff_names_attributes_and_values(void **state)
{
    (void)state;
    static const rdef rs[] = {
        {"NVFP4BlockScaling", "{\"disable_rht\":false}"},
        {"NVFP4BlockScaling", "{\"disable_rht\":true,\"backward_override\":\"dequantized\"}"},
        {"MXFP8BlockScaling", "{}"},
        {"MyNVFP4", "{\"__te_base__\":\"NVFP4BlockScaling\",\"disable_rht\":false}"},
        {"DelayedScaling", "{\"amax_history_len\":16}"},
        {"DelayedScaling", "{\"amax_history_len\":1024,\"extra_knob\":3}"},
        {NULL, NULL}};
    ft_model *m = mk(NULL, rs, ENV_SM100, NULL, 0);
    ft_recipe_change ch[8];
    assert_int_equal(ft_model_recipe_diff(m, 0, 1, ch, 8), 2);
    /* the table's field order */
    assert_string_equal(ch[0].name, "disable_rht");
    assert_string_equal(ch[0].from, "False");
    assert_string_equal(ch[0].to, "True");
    assert_string_equal(ch[1].name, "backward_override");
    assert_string_equal(ch[1].from, "None");
    assert_string_equal(ch[1].to, "'dequantized'");
    assert_int_equal(ft_model_recipe_diff(m, 0, 0, ch, 8), 0);
    assert_int_equal(ft_model_recipe_diff(m, 1, 0, NULL, 0), 2);
    assert_int_equal(ft_model_recipe_diff(m, 0, 2, ch, 8), 1);
    assert_string_equal(ch[0].name, "type");
    assert_string_equal(ch[0].from, "NVFP4BlockScaling");
    assert_string_equal(ch[0].to, "MXFP8BlockScaling");
    char cls[64];
    ft_model_recipe_class(m, 3, cls, sizeof cls);
    assert_string_equal(cls, "MyNVFP4");
    ft_model_recipe_class(m, -1, cls, sizeof cls);
    assert_string_equal(cls, "None");
    assert_int_equal(ft_model_recipe_diff(m, 0, 3, ch, 8), 1); /* the subclass is its own class */
    assert_string_equal(ch[0].to, "MyNVFP4");
    assert_int_equal(ft_model_recipe_diff(m, 4, 5, ch, 8), 2);
    assert_string_equal(ch[0].name, "amax_history_len");
    assert_string_equal(ch[0].from, "16");
    assert_string_equal(ch[0].to, "1024");
    assert_string_equal(ch[1].name, "+extra_knob"); /* a field TE's table does not know */
    assert_string_equal(ch[1].from, "(absent)");
    assert_string_equal(ch[1].to, "3");
    assert_int_equal(ft_model_recipe_diff(m, -1, 2, ch, 8), 1);
    assert_string_equal(ch[0].from, "None");
    ft_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recipe_diff_names_attributes_and_values),
        cmocka_unit_test(test_gate_grouped_mlp_fuses_mxfp8_and_nvfp4_rht),
        cmocka_unit_test(test_gate_grouped_mlp_each_condition_flips),
        cmocka_unit_test(test_gate_grouped_mlp_registry_order),
        cmocka_unit_test(test_gate_fwd_bwd_rules_each_condition_flips),
        cmocka_unit_test(test_map_to_basic_rejects_mismatch),
        cmocka_unit_test(test_plan_interning_shares_ids),
        cmocka_unit_test(test_recipe_hash_every_attribute_counts),
        cmocka_unit_test(test_recipe_hash_canonical),
        cmocka_unit_test(test_recipe_env_defaults_and_qparams),
        cmocka_unit_test(test_recipe_mutated_object_keeps_qparams),
        cmocka_unit_test(test_qstate_reset_rules),
        cmocka_unit_test(test_scenario_s1_same_type_switch_quant),
        cmocka_unit_test(test_scenario_s2_raises_on_multi_group),
        cmocka_unit_test(test_scenario_s2_single_group_runs),
        cmocka_unit_test(test_scenario_s2_single_grouped_weight_2d),
        cmocka_unit_test(test_scenario_s3_same_type_grad_switch),
        cmocka_unit_test(test_scenario_s4_stale_unfused),
        cmocka_unit_test(test_classify_unfused_grouped_tensor_path_non_rht),
        cmocka_unit_test(test_classify_extra_fusions),
        cmocka_unit_test(test_fusion_key_equal_keys_equal_plans),
        cmocka_unit_test(test_fusion_key_minimal),
        cmocka_unit_test(test_env_overrides),
        cmocka_unit_test(test_bad_input_errors_name_id_and_field),
        cmocka_unit_test(test_unknown_op_type_is_opaque),
        cmocka_unit_test(test_model_alloc_failures),
        cmocka_unit_test(test_fuzz_model_corpus),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return failed + tefuser_capture_run();
}
