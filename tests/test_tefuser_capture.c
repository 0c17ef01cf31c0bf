/*
 * test_tefuser_capture.c - part of test_tefuser: what the fuser model reads from a capture
 * (docs/fuser-model.md, "What the capture decides"): PEP 440 versions, typed env values and
 * --env removal, world size and rank from the header, TE's userbuffers_options, TP and group
 * sizes, the registered fusion passes (te_fusions) and the notes on what the model assumed.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_tefuser.h"
#include "tefuser_int.h"
#include "test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

int tefuser_capture_run(void);

/* ---- helpers ------------------------------------------------------------------------------ */
#define LIN(extra)                                                                                 \
    "{\"type\":\"BasicLinear\",\"attrs\":{\"in_features\":64,\"out_features\":64" extra "}}"
#define BIAS_OP "{\"type\":\"Bias\",\"attrs\":{\"size\":64}}"
#define ADD_IP  "{\"type\":\"AddExtraInput\",\"attrs\":{\"in_place\":true}}"
#define UB_COL  LIN(",\"tensor_parallel_mode\":\"column\",\"userbuffers\":{\"comm_name\":\"qkv\"}")
#define UB_PLAN "fwd[UserbuffersForwardLinear(0-1)] bwd[UserbuffersBackwardLinear(0-1)]"
#define NO_UB   "fwd[BasicLinear(0),Bias(1)] bwd[BasicLinear(0),Bias(1)]"
#define MLP_OPS                                                                                    \
    "[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":4,\"in_features\":64,"                 \
    "\"out_features\":256}},{\"type\":\"ScaledSwiGLU\",\"attrs\":{\"glu_interleave_size\":32}},"   \
    "{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":4,\"in_features\":128,"                 \
    "\"out_features\":64}}]"
#define MLP_FUSED "fwd[GroupedMLP_CuTeGEMMGLU(0-2)] bwd[GroupedMLP_CuTeGEMMGLU(0-2)]"
#define MLP_PLAIN                                                                                  \
    "fwd[GroupedLinear(0),ScaledSwiGLU(1),GroupedLinear(2)] "                                      \
    "bwd[GroupedLinear(0),ScaledSwiGLU(1),GroupedLinear(2)]"
#define SM100                                                                                      \
    "{\"device_cc\":\"10.0\",\"cudnn_frontend\":\"1.27.0\",\"cublaslt\":\"13.4.0\","               \
    "\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\"}"

/* One fuser of ops under a capture; the model or NULL with the error in *err. */
static ft_model *model_of(const char *ops, const char *rtype, const ft_model_capture *cap,
                          const ft_env_kv *ov, uint32_t n_ov, ft_err *err)
{
    json_t *a = json_loads(ops, 0, NULL);
    assert_non_null(a);
    ft_fuser_def fz = {7, NULL, ops, (uint32_t)json_array_size(a), 0, 0};
    json_decref(a);
    ft_recipe_def rd = {1, rtype ? rtype : "", 11, "{}"};
    ft_model *m = NULL;
    ft_err_clear(err);
    if (ft_model_new(&fz, 1, rtype ? &rd : NULL, rtype ? 1 : 0, cap, ov, n_ov, &m, err))
        return NULL;
    return m;
}

static ft_model *must(const char *ops, const char *rtype, const ft_model_capture *cap,
                      const ft_env_kv *ov, uint32_t n_ov)
{
    ft_err err;
    ft_model *m = model_of(ops, rtype, cap, ov, n_ov, &err);
    if (!m) fail_msg("ft_model_new: %s", ft_err_msg(&err));
    return m;
}

static const char *plan0(ft_model *m, int32_t recipe)
{
    uint32_t id;
    ft_err err = {0};
    if (ft_model_build(m, 0, recipe, 0, &id, &err)) fail_msg("build: %s", ft_err_msg(&err));
    return ft_model_plan_text(m, id);
}

/* The first note of kind whose field is field (NULL: any field), or NULL. */
static const ft_model_note *note_of(const ft_model *m, ft_model_note_kind kind, const char *field)
{
    for (uint32_t i = 0; i < ft_model_n_notes(m); i++) {
        const ft_model_note *n = ft_model_note_at(m, i);
        if (n->kind == kind && (!field || !strcmp(n->field, field))) return n;
    }
    return NULL;
}

static void expect_error(const char *ops, const ft_model_capture *cap, const ft_env_kv *ov,
                         uint32_t n_ov, const char *needle)
{
    ft_err err;
    long live = ft_alloc_live();
    ft_model *m = model_of(ops, NULL, cap, ov, n_ov, &err);
    assert_null(m);
    assert_int_equal(err.rc, FT_EINVAL);
    if (!strstr(err.msg, needle)) fail_msg("'%s' lacks '%s'", err.msg, needle);
    assert_int_equal(ft_alloc_live(), live);
}

/* ---- versions ----------------------------------------------------------------------------- */
/* PEP 440's own ordering example, extended with the cases TE meets. */
static void test_version_pep440_order(void **state)
{
    (void)state;
    static const char *const sorted[] = {
        "1.0.dev456",    "1.0a1",         "1.0a2.dev456", "1.0a12.dev456",
        "1.0a12",        "1.0b1.dev456",  "1.0b2",        "1.0b2.post345.dev456",
        "1.0b2.post345", "1.0rc1.dev456", "1.0rc1",       "1.0",
        "1.0+abc.5",     "1.0+abc.7",     "1.0+5",        "1.0.post456.dev34",
        "1.0.post456",   "1.0.15",        "1.1.dev1",     "1.23.0",
        "1.23.0+local",  "1.23.0-1",      "1.23.0.1",     "1.24.0rc1",
        "1.24.0",        "2.20.0.dev0",   "2.20.0",       "2.21",
        "1!0.1"};
    const size_t n = sizeof sorted / sizeof *sorted;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            int c;
            assert_int_equal(ft_version_cmp_str(sorted[i], sorted[j], &c), FT_OK);
            int want = (i > j) - (i < j);
            if ((c > 0) - (c < 0) != want)
                fail_msg("%s vs %s: got %d, want %d", sorted[i], sorted[j], c, want);
        }
}

static void test_version_pep440_spellings(void **state)
{
    (void)state;
    static const char *const same[][2] = {{"1.0", "1.0.0.0"},
                                          {"1.0-1", "1.0.post1"},
                                          {"1.0-r1", "1.0.post1"},
                                          {"1.0rev1", "1.0.post1"},
                                          {"1.0.post", "1.0.post0"},
                                          {"1.0alpha1", "1.0a1"},
                                          {"1.0.a.1", "1.0a1"},
                                          {"1.0-beta_2", "1.0b2"},
                                          {"1.0c1", "1.0rc1"},
                                          {"1.0pre1", "1.0rc1"},
                                          {"1.0preview1", "1.0rc1"},
                                          {"1.0rc", "1.0rc0"},
                                          {"v1.0", "1.0"},
                                          {" 1.0\t", "1.0"},
                                          {"1.0.DEV0", "1.0.dev0"},
                                          {"1.0dev", "1.0.dev0"},
                                          {"1.0+Ubuntu-1", "1.0+ubuntu.1"},
                                          {"1.0+01", "1.0+1"},
                                          {"0!1.0", "1.0"},
                                          {"1.0a.", "1.0a0"},
                                          {"1.0-dev1", "1.0.dev1"}};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        int c = 9;
        int rc = ft_version_cmp_str(same[i][0], same[i][1], &c);
        if (rc || c) fail_msg("'%s' vs '%s': rc %d cmp %d", same[i][0], same[i][1], rc, c);
    }
    static const char *const bad[] = {"",         "abc",    "1.0-",   "1..0",    "1.0+",
                                      "1.0+a..b", "1.2ca1", "1@2",    "1.0a1b1", ".1",
                                      "1.0 x",    "1!",     "1.0+a+b"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ft_version v;
        if (ft_version_parse(bad[i], &v) != FT_EINVAL) fail_msg("'%s' accepted", bad[i]);
    }
    ft_version v;
    assert_int_equal(ft_version_parse("1.2.3.4.5.6.7.8.9.10.11.12.13.14.15.16.17", &v), FT_ERANGE);
    assert_int_equal(ft_version_parse("1.99999999999999999999", &v), FT_ERANGE);
    assert_int_equal(ft_version_parse("1.2.3.4.5.6.7.8.9.10.11.12.13.14.15.16", &v), FT_OK);
    char txt[80];
    assert_int_equal(ft_version_parse("1!2.0-RC1-post2.DEV3+Ubuntu_1", &v), FT_OK);
    assert_int_equal(ft_version_text(&v, txt, sizeof txt), FT_OK);
    assert_string_equal(txt, "1!2.0rc1.post2.dev3+ubuntu.1");
    assert_int_equal(ft_version_text(&v, txt, 5), FT_ERANGE);
}

/* The frontend thresholds of the grouped-MLP gates compare as PEP 440 does. */
static void test_version_gates_frontend(void **state)
{
    (void)state;
    static const struct {
        const char *fe;
        int glu;
    } cases[] = {{"1.23.0", 1},      {"1.23", 1},        {"1.23.0.1", 1},
                 {"1.23.0-1", 1},    {"1.23.0+cu12", 1}, {"1.23.0rc1", 0},
                 {"1.23.0.dev0", 0}, {"1.22.99", 0},     {"1!0.1", 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char env[256];
        snprintf(env, sizeof env,
                 "{\"device_cc\":10.0,\"cudnn_frontend\":\"%s\","
                 "\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":1}",
                 cases[i].fe);
        ft_model *m =
            must(MLP_OPS, "MXFP8BlockScaling", &(ft_model_capture){.env_json = env}, NULL, 0);
        if (strcmp(plan0(m, 0), cases[i].glu ? MLP_FUSED : MLP_PLAIN))
            fail_msg("cudnn_frontend %s: %s", cases[i].fe, plan0(m, 0));
        ft_model_free(m);
    }
    /* TE's PkgVersion raises on a version it cannot parse: the import fails */
    expect_error(MLP_OPS, &(ft_model_capture){.env_json = "{\"cudnn_frontend\":\"1.x\"}"}, NULL, 0,
                 "env cudnn_frontend: '1.x' is not a PEP 440 version");
}

/* ---- env values --------------------------------------------------------------------------- */
/* Numbers, strings and null; --env KEY= removes a key and KEY=null sets null. */
static void test_env_numbers_strings_null(void **state)
{
    (void)state;
    const char *num = "{\"device_cc\":10.0,\"cudnn_frontend\":\"1.27.0\","
                      "\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":1,\"cublaslt\":130400}";
    ft_model *m = must(MLP_OPS, "MXFP8BlockScaling", &(ft_model_capture){.env_json = num}, NULL, 0);
    assert_string_equal(plan0(m, 0), MLP_FUSED);
    ft_model_free(m);
    /* null cudnn_frontend: captured as not installed, so not assumed */
    const char *none = "{\"device_cc\":\"10.0\",\"cudnn_frontend\":null,"
                       "\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\"}";
    m = must(MLP_OPS, "MXFP8BlockScaling", &(ft_model_capture){.env_json = none}, NULL, 0);
    assert_string_equal(plan0(m, 0), MLP_PLAIN);
    assert_null(note_of(m, FT_NOTE_ASSUMED, "env.cudnn_frontend"));
    ft_model_free(m);
    /* --env cudnn_frontend= : what if it were not installed; now assumed, and said */
    ft_env_kv rm[] = {{"cudnn_frontend", ""}};
    m = must(MLP_OPS, "MXFP8BlockScaling", &(ft_model_capture){.env_json = SM100}, rm, 1);
    assert_string_equal(plan0(m, 0), MLP_PLAIN);
    const ft_model_note *n = note_of(m, FT_NOTE_ASSUMED, "env.cudnn_frontend");
    assert_non_null(n);
    assert_non_null(strstr(n->text, "not installed"));
    ft_model_free(m);
    ft_env_kv nul[] = {{"cudnn_frontend", "null"}};
    m = must(MLP_OPS, "MXFP8BlockScaling", &(ft_model_capture){.env_json = SM100}, nul, 1);
    assert_string_equal(plan0(m, 0), MLP_PLAIN);
    assert_null(note_of(m, FT_NOTE_ASSUMED, "env.cudnn_frontend"));
    ft_model_free(m);
    /* removing a key that is not there is fine; numbers as --env text too */
    ft_env_kv more[] = {{"NVTE_NOT_THERE", ""}, {"device_cc", "10"}};
    m = must(MLP_OPS, "MXFP8BlockScaling", &(ft_model_capture){.env_json = SM100}, more, 2);
    assert_string_equal(plan0(m, 0), MLP_FUSED);
    ft_model_free(m);
    /* objects and arrays are not env values */
    expect_error("[]", &(ft_model_capture){.env_json = "{\"device_cc\":[10,0]}"}, NULL, 0,
                 "env device_cc: value is not a string, number or null");
    expect_error("[]", &(ft_model_capture){.env_json = "{\"world_size\":2.5}"}, NULL, 0,
                 "env world_size: '2.5' is not an integer >= 1");
}

/* ---- world size, rank, TP and group sizes ------------------------------------------------- */
static void test_world_size_from_header(void **state)
{
    (void)state;
    const char *ops = "[" UB_COL "," BIAS_OP "]";
    const ft_model_capture tp8 = {
        .env_json = "{}", .has_world_size = 1, .world_size = 8, .has_rank = 1, .rank = 3};
    ft_model *m = must(ops, NULL, &tp8, NULL, 0);
    assert_int_equal(ft_model_world_size(m), 8);
    assert_int_equal(ft_model_rank(m), 3);
    assert_string_equal(plan0(m, -1), UB_PLAN);
    assert_null(note_of(m, FT_NOTE_ASSUMED, "env.world_size"));
    /* the linear's TP size is not recorded: the world's, and the model says so */
    const ft_model_note *n = note_of(m, FT_NOTE_ASSUMED, "op attribute tensor_parallel_size");
    assert_non_null(n);
    assert_non_null(strstr(n->text, "world size 8"));
    ft_model_free(m);
    /* --env overrides the header */
    ft_env_kv one[] = {{"world_size", "1"}};
    m = must(ops, NULL, &tp8, one, 1);
    assert_string_equal(plan0(m, -1), NO_UB);
    ft_model_free(m);
    /* no world size anywhere: 1, assumed and said */
    m = must(ops, NULL, NULL, NULL, 0);
    assert_string_equal(plan0(m, -1), NO_UB);
    assert_non_null(note_of(m, FT_NOTE_ASSUMED, "env.world_size"));
    ft_model_free(m);
    /* env world_size null: distributed not initialized */
    m = must(ops, NULL, &(ft_model_capture){.env_json = "{\"world_size\":null}"}, NULL, 0);
    assert_string_equal(plan0(m, -1), NO_UB);
    ft_model_free(m);
    /* a capture that says two things */
    const ft_model_capture both = {
        .env_json = "{\"world_size\":4}", .has_world_size = 1, .world_size = 8};
    expect_error(ops, &both, NULL, 0, "env world_size 4 contradicts the header's world_size 8");
    ft_env_kv four[] = {{"world_size", "4"}};
    m = must(ops, NULL, &both, four, 1); /* an override is a what-if, not a contradiction */
    assert_int_equal(ft_model_world_size(m), 4);
    ft_model_free(m);
}

static void test_tp_and_group_sizes(void **state)
{
    (void)state;
    const ft_model_capture w8 = {.has_world_size = 1, .world_size = 8};
    /* a recorded TP group of one disables TP whatever the world (_canonicalize_tensor_parallelism)
     */
    ft_model *m = must("[" LIN(",\"tensor_parallel_mode\":\"column\",\"tensor_parallel_size\":1,"
                               "\"userbuffers\":{}") "," BIAS_OP "]",
                       NULL, &w8, NULL, 0);
    assert_string_equal(plan0(m, -1), NO_UB);
    assert_null(note_of(m, FT_NOTE_ASSUMED, "op attribute tensor_parallel_size"));
    ft_model_free(m);
    /* ReduceScatter's group: recorded, or the world */
    const char *rs =
        "[" LIN(",\"userbuffers\":{\"comm_name\":\"proj\"}") "," BIAS_OP
                                                             ",{\"type\":\"ReduceScatter\"}]";
    m = must(rs, NULL, &w8, NULL, 0);
    assert_string_equal(plan0(m, -1),
                        "fwd[UserbuffersForwardLinear(0-2)] bwd[UserbuffersBackwardLinear(0-2)]");
    assert_non_null(note_of(m, FT_NOTE_ASSUMED, "op attribute process_group_size"));
    ft_model_free(m);
    m = must("[" LIN(",\"userbuffers\":{}") ",{\"type\":\"ReduceScatter\",\"attrs\":"
                                            "{\"process_group_size\":1}}]",
             NULL, &w8, NULL, 0);
    assert_string_equal(plan0(m, -1), "fwd[BasicLinear(0),ReduceScatter(1)] "
                                      "bwd[BasicLinear(0),ReduceScatter(1)]");
    ft_model_free(m);
}

/* userbuffers: TE's userbuffers_options (a dict enables, None disables), or the old bool. */
static void test_userbuffers_options(void **state)
{
    (void)state;
    static const struct {
        const char *ub;
        int on;
    } cases[] = {{"{\"comm_name\":\"qkv\"}", 1}, {"{}", 1}, {"null", 0}, {"true", 1}, {"false", 0}};
    const ft_model_capture w4 = {.has_world_size = 1, .world_size = 4};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char ops[512];
        snprintf(ops, sizeof ops,
                 "[{\"type\":\"BasicLinear\",\"attrs\":{\"in_features\":64,\"out_features\":64,"
                 "\"tensor_parallel_mode\":\"column\",\"userbuffers\":%s}}," BIAS_OP "]",
                 cases[i].ub);
        ft_model *m = must(ops, NULL, &w4, NULL, 0);
        if (strcmp(plan0(m, -1), cases[i].on ? UB_PLAN : NO_UB))
            fail_msg("userbuffers %s: %s", cases[i].ub, plan0(m, -1));
        ft_model_free(m);
    }
    expect_error("[" LIN(",\"userbuffers\":\"yes\"") "]", &w4, NULL, 0,
                 "attribute 'userbuffers' must be TE's userbuffers_options (an object or null) or "
                 "a bool");
}

/* ---- the registry ------------------------------------------------------------------------- */
#define FWD4                                                                                       \
    "\"transformer_engine.pytorch.ops.fused.userbuffers_forward_linear.UserbuffersForwardLinear."  \
    "fuse_forward_ops\",\"transformer_engine.pytorch.ops.fused.forward_linear_bias_add."           \
    "ForwardLinearBiasAdd.fuse_forward_ops\",\"transformer_engine.pytorch.ops.fused.forward_"      \
    "linear_bias_activation.ForwardLinearBiasActivation.fuse_forward_ops\",\"transformer_engine."  \
    "pytorch.ops.fused.forward_linear_scale_add.ForwardLinearScaleAdd.fuse_forward_ops\""
#define BWD5                                                                                       \
    "\"UserbuffersBackwardLinear.fuse_backward_ops\",\"BackwardLinearAdd.fuse_backward_ops\","     \
    "\"BackwardLinearScale.fuse_backward_ops\",\"BackwardActivationBias.fuse_backward_ops\","      \
    "\"BackwardAddRMSNorm.fuse_backward_ops\""

static void test_registry_order_and_presence(void **state)
{
    (void)state;
    const char *ops = "[" LIN(",\"dtype\":\"bfloat16\"") "," BIAS_OP "," ADD_IP "]";
    /* TE's order: ForwardLinearBiasAdd before ForwardLinearBiasActivation */
    ft_model_capture c = {.extra_json =
                              "{\"te_fusions\":{\"forward_backward\":[],\"forward\":[" FWD4
                              "],\"backward\":[" BWD5 "]}}",
                          .has_world_size = 1,
                          .world_size = 1};
    ft_model *m = must(ops, NULL, &c, NULL, 0);
    assert_string_equal(plan0(m, -1), "fwd[ForwardLinearBiasAdd(0-2)] "
                                      "bwd[BasicLinear(0),Bias(1),AddExtraInput(2)]");
    assert_int_equal(ft_model_n_notes(m), 0);
    ft_model_free(m);
    /* the order the capture recorded decides */
    c.extra_json = "{\"te_fusions\":{\"forward_backward\":[],\"forward\":[\"ForwardLinearBias"
                   "Activation.fuse_forward_ops\",\"ForwardLinearBiasAdd.fuse_forward_ops\"],"
                   "\"backward\":[]}}";
    m = must(ops, NULL, &c, NULL, 0);
    assert_string_equal(plan0(m, -1), "fwd[ForwardLinearBiasActivation(0-1),AddExtraInput(2)] "
                                      "bwd[BasicLinear(0),Bias(1),AddExtraInput(2)]");
    ft_model_free(m);
    /* a fusion TE did not register is not applied; one the model does not know is named */
    c.extra_json = "{\"te_fusions\":{\"forward_backward\":[],\"forward\":[\"mypkg.fusions."
                   "fuse_my_linear\"],\"backward\":[]}}";
    m = must(ops, NULL, &c, NULL, 0);
    assert_string_equal(plan0(m, -1), "fwd[BasicLinear(0),Bias(1),AddExtraInput(2)] "
                                      "bwd[BasicLinear(0),Bias(1),AddExtraInput(2)]");
    const ft_model_note *n = note_of(m, FT_NOTE_UNKNOWN_FUSION, "mypkg.fusions.fuse_my_linear");
    assert_non_null(n);
    assert_string_equal(n->pass, "forward");
    assert_string_equal(n->text, "the model does not know fusion mypkg.fusions.fuse_my_linear "
                                 "that TE registered; plans of fusers it could match may differ");
    ft_model_free(m);
}

/* The grouped-MLP registration: captured, re-decided by an --env override of what it reads. */
static void test_registry_grouped_mlp(void **state)
{
    (void)state;
    /* TE registered fuse_ops on a device the env calls 9.0: the capture wins, and it is said */
    ft_model_capture c = {.env_json = "{\"device_cc\":\"9.0\",\"cudnn_frontend\":\"1.27.0\","
                                      "\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\"}",
                          .extra_json = "{\"te_fusions\":{\"forward_backward\":[\"transformer_"
                                        "engine.pytorch.ops.fused.grouped_mlp.fuse_ops\"],"
                                        "\"forward\":[],\"backward\":[]}}"};
    ft_model *m = must(MLP_OPS, "MXFP8BlockScaling", &c, NULL, 0);
    assert_string_equal(plan0(m, 0), MLP_FUSED);
    const ft_model_note *n = note_of(m, FT_NOTE_REGISTRY, NULL);
    assert_non_null(n);
    assert_non_null(strstr(n->text, "device capability"));
    ft_model_free(m);
    /* a what-if on a key the check reads re-decides the row */
    c.env_json = SM100;
    ft_env_kv cc9[] = {{"device_cc", "9.0"}};
    m = must(MLP_OPS, "MXFP8BlockScaling", &c, cc9, 1);
    assert_string_equal(plan0(m, 0), MLP_PLAIN);
    assert_non_null(note_of(m, FT_NOTE_REGISTRY, NULL));
    ft_model_free(m);
    /* and an override may register what the run did not */
    c.extra_json = "{\"te_fusions\":{\"forward_backward\":[],\"forward\":[],\"backward\":[]}}";
    c.env_json = "{\"device_cc\":\"10.0\",\"cudnn_frontend\":\"1.27.0\"}";
    ft_env_kv on[] = {{"NVTE_CUTEDSL_FUSED_GROUPED_MLP", "1"}};
    m = must(MLP_OPS, "MXFP8BlockScaling", &c, on, 1);
    assert_string_equal(plan0(m, 0), MLP_FUSED);
    ft_model_free(m);
    /* a captured wrapper import failure blocks the registration without a registry */
    ft_model_capture w = {.env_json = "{\"device_cc\":\"10.0\",\"cudnn_frontend\":\"1.27.0\","
                                      "\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\","
                                      "\"cudnn.grouped_gemm_dglu_wrapper_sm100\":0}"};
    m = must(MLP_OPS, "MXFP8BlockScaling", &w, NULL, 0);
    assert_string_equal(plan0(m, 0), MLP_PLAIN);
    ft_unfused_why why;
    assert_int_equal(ft_model_why_unfused(m, 0, 0, &why), 1);
    assert_int_equal(why.n_registration, 1);
    assert_string_equal(why.block[0].what,
                        "cudnn.grouped_gemm_dglu_wrapper_sm100 cannot be imported (env value '0')");
    assert_string_equal(why.block[0].need, "importable");
    assert_string_equal(why.block[0].source, "the capture");
    ft_model_free(m);
}

static void test_registry_bad_shapes(void **state)
{
    (void)state;
    static const struct {
        const char *extra, *needle;
    } cases[] = {
        {"{\"te_fusions\":[]}", "te_fusions: not a JSON object"},
        {"{\"te_fusions\":{\"forward\":[],\"backward\":[]}}",
         "te_fusions.forward_backward: missing"},
        {"{\"te_fusions\":{\"forward_backward\":[],\"forward\":{},\"backward\":[]}}",
         "te_fusions.forward: not an array"},
        {"{\"te_fusions\":{\"forward_backward\":[],\"forward\":[1],\"backward\":[]}}",
         "te_fusions.forward[0]: not a function name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect_error("[]", &(ft_model_capture){.extra_json = cases[i].extra}, NULL, 0,
                     cases[i].needle);
}

/* What the model assumed is listed when it matters, and nothing when the capture is complete. */
static void test_notes_assumed(void **state)
{
    (void)state;
    ft_model *m = must(MLP_OPS, "MXFP8BlockScaling", NULL, NULL, 0);
    static const char *const fields[] = {"te_fusions", "env.device_cc", "env.cudnn_frontend",
                                         "env.cublaslt", "env.NVTE_CUTEDSL_FUSED_GROUPED_MLP"};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        if (!note_of(m, FT_NOTE_ASSUMED, fields[i])) fail_msg("no note on %s", fields[i]);
    ft_model_free(m);
    /* a fuser no rule could match reads nothing */
    m = must("[{\"type\":\"Identity\"}]", NULL, NULL, NULL, 0);
    assert_int_equal(ft_model_n_notes(m), 0);
    ft_model_free(m);
    /* everything recorded */
    const ft_model_capture full = {
        .env_json = "{\"device_cc\":\"10.0\",\"cudnn_frontend\":\"1.27.0\",\"cublaslt\":\"13.4.0\","
                    "\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\","
                    "\"NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP\":\"0\"}",
        .extra_json = "{\"te_fusions\":{\"forward_backward\":[\"fuse_srelu_ops\",\"fuse_ops\"],"
                      "\"forward\":[],"
                      "\"backward\":[]}}",
        .has_world_size = 1,
        .world_size = 1};
    m = must(MLP_OPS, "MXFP8BlockScaling", &full, NULL, 0);
    assert_string_equal(plan0(m, 0), MLP_FUSED);
    for (uint32_t i = 0; i < ft_model_n_notes(m); i++)
        fail_msg("unexpected note %s: %s", ft_model_note_at(m, i)->field,
                 ft_model_note_at(m, i)->text);
    assert_null(ft_model_note_at(m, 0));
    ft_model_free(m);
}

/* A user subclass of a TE recipe: TE's issubclass checks see its base, type(recipe) keys by the
 * subclass itself. */
static void test_recipe_subclass(void **state)
{
    (void)state;
    json_t *a = json_loads(MLP_OPS, 0, NULL);
    ft_fuser_def fz = {1, NULL, MLP_OPS, (uint32_t)json_array_size(a), 0, 0};
    json_decref(a);
    ft_recipe_def rd[] = {
        {1, "MyMXFP8", 10, "{\"__te_base__\":\"MXFP8BlockScaling\",\"tag\":\"a\"}"},
        {2, "MXFP8BlockScaling", 11, "{}"},
        {3, "MyNVFP4", 12, "{\"__te_base__\":\"NVFP4BlockScaling\",\"disable_rht\":true}"},
        {4, "MyMXFP8", 13, "{\"__te_base__\":\"MXFP8BlockScaling\",\"tag\":\"b\"}"},
        {5, "MyMXFP8", 10, "{\"__te_base__\":\"MXFP8BlockScaling\"}"},
    };
    ft_model *m = NULL;
    ft_err err = {0};
    if (ft_model_new(&fz, 1, rd, 5, &(ft_model_capture){.env_json = SM100}, NULL, 0, &m, &err))
        fail_msg("%s", ft_err_msg(&err));
    assert_int_equal(ft_model_recipe(m, 0)->type, FT_RT_MXFP8);
    assert_string_equal(plan0(m, 0), MLP_FUSED); /* recipe.mxfp8() is true for the subclass */
    assert_string_equal(plan0(m, 2), MLP_PLAIN); /* and NVFP4's disable_rht gate applies */
    assert_int_equal(ft_model_recipe(m, 1)->cls, FT_RT_MXFP8);
    assert_true(ft_model_recipe(m, 0)->cls >= FT_RT_COUNT);
    assert_int_equal(ft_model_recipe(m, 3)->cls, ft_model_recipe(m, 0)->cls);
    assert_int_equal(ft_model_recipe(m, 4)->cls, ft_model_recipe(m, 0)->cls);
    assert_true(ft_model_recipe(m, 2)->cls >= FT_RT_COUNT);
    assert_true(ft_model_recipe(m, 2)->cls != ft_model_recipe(m, 0)->cls);
    /* its own class in the canonical text and hash, not the base's */
    assert_true(ft_model_recipe(m, 4)->hash != ft_model_recipe(m, 1)->hash);
    assert_true(!strncmp(ft_model_recipe_canon(m, 4), "MyMXFP8{", 8));
    ft_model_free(m);
    static const struct {
        const char *type, *attrs, *needle;
    } bad[] = {{"MyRecipe", "{}", "unknown recipe type 'MyRecipe' (a subclass of a TE recipe"},
               {"MyRecipe", "{\"__te_base__\":\"Recipe\"}", "attribute '__te_base__' must name"},
               {"MyRecipe", "{\"__te_base__\":3}", "attribute '__te_base__' must name"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ft_recipe_def r = {9, bad[i].type, 1, bad[i].attrs};
        long live = ft_alloc_live();
        assert_int_equal(ft_model_new(&fz, 1, &r, 1, NULL, NULL, 0, &m, &err), FT_EINVAL);
        if (!strstr(err.msg, bad[i].needle)) fail_msg("'%s' lacks '%s'", err.msg, bad[i].needle);
        assert_int_equal(ft_alloc_live(), live);
    }
}

/* A fuser redeclared after its op attributes changed (of) is the same instance; what changed
 * is noted, with whether a rule reads it; a redeclaration must keep the op classes. */
static void test_fuser_redeclared_after_attr_change(void **state)
{
    (void)state;
    const char *a =
        "[" LIN(",\"tensor_parallel_mode\":\"column\",\"dtype\":\"bfloat16\"") "," BIAS_OP "]";
    const char *b = "[" LIN(",\"tensor_parallel_mode\":\"column\",\"dtype\":\"bfloat16\","
                            "\"userbuffers\":{\"comm_name\":\"qkv\"}") "," BIAS_OP "]";
    const char *c = "[" LIN(
        ",\"tensor_parallel_mode\":\"column\",\"dtype\":\"bfloat16\"") ","
                                                                       "{\"type\":\"Bias\","
                                                                       "\"attrs\":{\"size\":32}}]";
    ft_fuser_def fz[] = {{1, "qkv", a, 2, 0, 0},
                         {2, "qkv", b, 2, 1, 1},
                         {3, "qkv", c, 2, 1, 2},
                         {4, "other", a, 2, 0, 0}};
    const ft_model_capture w4 = {.has_world_size = 1, .world_size = 4};
    ft_model *m = NULL;
    ft_err err = {0};
    if (ft_model_new(fz, 4, NULL, 0, &w4, NULL, 0, &m, &err)) fail_msg("%s", ft_err_msg(&err));
    assert_int_equal(ft_model_fuser_instance(m, 0), 0);
    assert_int_equal(ft_model_fuser_instance(m, 1), 0);
    assert_int_equal(ft_model_fuser_instance(m, 2), 0); /* a chain: the first declaration */
    assert_int_equal(ft_model_fuser_instance(m, 3), 3);
    const ft_model_note *n = note_of(m, FT_NOTE_ATTR_CHANGE, "fuser 2");
    assert_non_null(n);
    assert_non_null(strstr(n->text, "(op 0 userbuffers)"));
    assert_non_null(strstr(n->text, "TE sees them only when it builds a plan again"));
    n = note_of(m, FT_NOTE_ATTR_CHANGE, "fuser 3"); /* userbuffers back to null, and Bias size */
    assert_non_null(n);
    assert_non_null(strstr(n->text, "op 0 userbuffers, op 1 size"));
    ft_model_free(m);
    /* only an attribute no rule reads */
    ft_fuser_def fy[] = {{1, NULL, a, 2, 0, 0}, {2, NULL, c, 2, 1, 1}};
    m = NULL;
    if (ft_model_new(fy, 2, NULL, 0, &w4, NULL, 0, &m, &err)) fail_msg("%s", ft_err_msg(&err));
    n = note_of(m, FT_NOTE_ATTR_CHANGE, "fuser 2");
    assert_non_null(n);
    assert_non_null(strstr(n->text, "no fusion rule of this fuser reads them"));
    ft_model_free(m);
    /* errors: an undeclared or later fuser, other op classes */
    const char *other = "[" LIN("") ",{\"type\":\"GELU\"}]";
    static const struct {
        int64_t of;
        int second_other;
        const char *needle;
    } bad[] = {{9, 0, "field 'of': fuser 9 is not declared before"},
               {2, 0, "field 'of': fuser 2 is not declared before"},
               {1, 1, "op 1 is GELU where fuser 1 has Bias"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ft_fuser_def fx[] = {{1, NULL, a, 2, 0, 0},
                             {2, NULL, bad[i].second_other ? other : b, 2, 1, bad[i].of}};
        long live = ft_alloc_live();
        assert_int_equal(ft_model_new(fx, 2, NULL, 0, NULL, NULL, 0, &m, &err), FT_EINVAL);
        if (!strstr(err.msg, bad[i].needle)) fail_msg("'%s' lacks '%s'", err.msg, bad[i].needle);
        assert_int_equal(ft_alloc_live(), live);
    }
}

/* ---- the done-when case: a TP-8 Userbuffers capture, replayed without any --env ----------- */
/* traces/tp8-userbuffers.jsonl as the replayer reads it: its header (world_size 8 and rank 3 in
 * the header only, te_fusions as the hook records them) and its fusers and recipes. The plans are
 * the ones TE's own fusion functions build for these ops (tefuser/te_diff/te_fusion_diff.py
 * --trace checks them against a TE checkout). */
static void test_tp8_userbuffers_capture(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/traces/tp8-userbuffers.jsonl", FT_SOURCE_DIR);
    size_t len;
    char *text = tu_read_file(path, &len);
    assert_non_null(text);
    json_t *hdr = NULL, *recs[64];
    ft_fuser_def fz[8];
    ft_recipe_def rd[8];
    char *dumps[32];
    uint32_t nf = 0, nr = 0, nd = 0, nrec = 0;
    for (char *line = strtok(text, "\n"); line && nrec < 64; line = strtok(NULL, "\n")) {
        json_t *o = json_loads(line, 0, NULL);
        assert_non_null(o);
        recs[nrec++] = o;
        const char *t = json_string_value(json_object_get(o, "t"));
        if (!strcmp(t, "header")) hdr = o;
        if (!strcmp(t, "fuser") && nf < 8) {
            const json_t *ops = json_object_get(o, "ops");
            dumps[nd] = json_dumps(ops, JSON_COMPACT | JSON_SORT_KEYS);
            fz[nf++] = (ft_fuser_def){json_integer_value(json_object_get(o, "id")),
                                      json_string_value(json_object_get(o, "label")),
                                      dumps[nd++],
                                      (uint32_t)json_array_size(ops),
                                      0,
                                      0};
        }
        if (!strcmp(t, "recipe") && nr < 8) {
            dumps[nd] = json_dumps(json_object_get(o, "attrs"), JSON_COMPACT | JSON_SORT_KEYS);
            rd[nr++] = (ft_recipe_def){json_integer_value(json_object_get(o, "id")),
                                       json_string_value(json_object_get(o, "type")),
                                       json_integer_value(json_object_get(o, "obj")), dumps[nd++]};
        }
    }
    assert_non_null(hdr);
    /* the header as the importer splits it: env, and the fields the format does not name */
    json_t *extra = json_object();
    json_object_set(extra, "te_fusions", json_object_get(hdr, "te_fusions"));
    dumps[nd++] = json_dumps(json_object_get(hdr, "env"), JSON_COMPACT | JSON_SORT_KEYS);
    dumps[nd++] = json_dumps(extra, JSON_COMPACT | JSON_SORT_KEYS);
    const ft_model_capture cap = {dumps[nd - 2],
                                  dumps[nd - 1],
                                  1,
                                  1,
                                  json_integer_value(json_object_get(hdr, "rank")),
                                  json_integer_value(json_object_get(hdr, "world_size"))};
    ft_model *m = NULL;
    ft_err err = {0};
    if (ft_model_new(fz, nf, rd, nr, &cap, NULL, 0, &m, &err))
        fail_msg("ft_model_new: %s", ft_err_msg(&err));
    assert_int_equal(ft_model_world_size(m), 8);
    assert_int_equal(ft_model_rank(m), 3);
    /* [fuser][recipe: none, MXFP8, current scaling with backward_override high_precision] */
    static const char *const want[5][3] = {
        {"fwd[UserbuffersForwardLinear(0-1)] bwd[UserbuffersBackwardLinear(0-1)]",
         "fwd[UserbuffersForwardLinear(0-1)] bwd[UserbuffersBackwardLinear(0-1)]",
         "fwd[ForwardLinearBiasActivation(0-1)] bwd[UserbuffersBackwardLinear(0-1)]"},
        {"fwd[UserbuffersForwardLinear(0),Bias(1)] bwd[UserbuffersBackwardLinear(0),Bias(1)]",
         "fwd[UserbuffersForwardLinear(0),Bias(1)] bwd[UserbuffersBackwardLinear(0),Bias(1)]",
         "fwd[BasicLinear(0),Bias(1)] bwd[UserbuffersBackwardLinear(0),Bias(1)]"},
        {"fwd[UserbuffersForwardLinear(0-2)] bwd[UserbuffersBackwardLinear(0-2)]",
         "fwd[UserbuffersForwardLinear(0-2)] bwd[UserbuffersBackwardLinear(0-2)]",
         "fwd[ForwardLinearBiasActivation(0-1),ReduceScatter(2)] "
         "bwd[UserbuffersBackwardLinear(0-2)]"},
        {"fwd[ForwardLinearBiasActivation(0-1),GELU(2)] bwd[BasicLinear(0),Bias(1),GELU(2)]",
         "fwd[ForwardLinearBiasActivation(0-1),GELU(2)] "
         "bwd[BasicLinear(0),BackwardActivationBias(1-2)]",
         "fwd[ForwardLinearBiasActivation(0-1),GELU(2)] bwd[BasicLinear(0),Bias(1),GELU(2)]"},
        {"fwd[MakeExtraOutput(0),BasicLinear(1),AddExtraInput(2)] "
         "bwd[BackwardLinearAdd(0-1),AddExtraInput(2)]",
         "fwd[MakeExtraOutput(0),BasicLinear(1),AddExtraInput(2)] "
         "bwd[BackwardLinearAdd(0-1),AddExtraInput(2)]",
         "fwd[MakeExtraOutput(0),BasicLinear(1),AddExtraInput(2)] "
         "bwd[BackwardLinearAdd(0-1),AddExtraInput(2)]"},
    };
    assert_int_equal(nf, 5);
    for (uint32_t u = 0; u < nf; u++)
        for (int32_t r = -1; r < 2; r++) {
            uint32_t id;
            if (ft_model_build(m, u, r, 0, &id, &err)) fail_msg("build: %s", ft_err_msg(&err));
            if (strcmp(ft_model_plan_text(m, id), want[u][r + 1]))
                fail_msg("fuser %u recipe %d: %s", u, r, ft_model_plan_text(m, id));
        }
    /* the capture records everything the model reads about these fusers */
    for (uint32_t i = 0; i < ft_model_n_notes(m); i++)
        fail_msg("unexpected note %s: %s", ft_model_note_at(m, i)->field,
                 ft_model_note_at(m, i)->text);
    ft_model_free(m);
    for (uint32_t i = 0; i < nd; i++)
        free(dumps[i]);
    for (uint32_t i = 0; i < nrec; i++)
        json_decref(recs[i]);
    json_decref(extra);
    free(text);
}

int tefuser_capture_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_pep440_order),
        cmocka_unit_test(test_version_pep440_spellings),
        cmocka_unit_test(test_version_gates_frontend),
        cmocka_unit_test(test_env_numbers_strings_null),
        cmocka_unit_test(test_world_size_from_header),
        cmocka_unit_test(test_tp_and_group_sizes),
        cmocka_unit_test(test_userbuffers_options),
        cmocka_unit_test(test_registry_order_and_presence),
        cmocka_unit_test(test_registry_grouped_mlp),
        cmocka_unit_test(test_registry_bad_shapes),
        cmocka_unit_test(test_notes_assumed),
        cmocka_unit_test(test_recipe_subclass),
        cmocka_unit_test(test_fuser_redeclared_after_attr_change),
        cmocka_unit_test(test_tp8_userbuffers_capture),
    };
    return cmocka_run_group_tests_name("tefuser_capture", tests, NULL, NULL);
}
