/*
 * fuzz_policy.c - libFuzzer target for policy specs (replayer/policy_spec.c): the text form
 * NAME=SPEC (a comma-separated list, as --policy takes it) and the JSON file form (--policies).
 *
 * Input: a first byte whose low bit chooses the form (0: the list, 1: JSON), then the text. What
 * defines replays a fixed small batch (two fusers, three recipes, grad flips, a recipe switch,
 * two devices) under every policy of the registry with the per-call view and causes recorded,
 * and checks the counts (builds + hits == calls). The only acceptable statuses are FT_OK and
 * FT_EINVAL (a definition refused: a bad spec, or more policies than the registry holds); any
 * other, a crash or a leak is a bug. The user policies are forgotten after every input.
 *
 * Build with clang: tests/fuzz/build.sh; tests/fuzz/README.md says how to run it. The corpus in
 * tests/fuzz/corpus/policy/ is replayed as an ordinary test by tests/test_policy_spec.c, which
 * includes this file and calls fuzz_policy_run().
 */
#include "ft_replayer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int fuzz_policy_run(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CALLS 24

static const char MLP[] =
    "[{\"attrs\":{\"bias\":false,\"dtype\":\"bfloat16\",\"in_features\":64,\"num_groups\":4,"
    "\"out_features\":256},\"type\":\"GroupedLinear\"},{\"attrs\":{\"glu_interleave_size\":32},"
    "\"type\":\"ScaledSwiGLU\"},{\"attrs\":{\"bias\":false,\"dtype\":\"bfloat16\","
    "\"in_features\":128,\"num_groups\":4,\"out_features\":64},\"type\":\"GroupedLinear\"}]";
static const char DENSE[] = "[{\"attrs\":{\"in_features\":64,\"out_features\":64},\"type\":"
                            "\"BasicLinear\"},{\"attrs\":{\"size\":64},\"type\":\"Bias\"}]";

/* Replay the fixed batch under every policy defined, with the view and causes on and the given
 * LRU capacity: FT_OK, or the engine's status (the allocation-failure test makes it fail). The
 * counts are checked: abort() when builds + hits is not every call. */
static int fuzz_policy_replay(uint32_t capacity, ft_err *err)
{
    const ft_fuser_def fusers[2] = {{1, "mlp", MLP, 3, 0, 0}, {2, "dense", DENSE, 2, 0, 0}};
    const ft_recipe_def recipes[3] = {
        {1, "NVFP4BlockScaling", 7, "{\"disable_rht\":false}"},
        {2, "NVFP4BlockScaling", 7, "{\"disable_rht\":true}"},
        {3, "MXFP8BlockScaling", 8, "{}"},
    };
    const ft_header hdr = {.te_version = "2.20.2",
                           .env_json = "{\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\","
                                       "\"cudnn_frontend\":\"1.27.0\",\"device_cc\":\"10.0\"}"};
    uint8_t kind[FZ_CALLS], op_rg[FZ_CALLS * 3];
    int64_t seq[FZ_CALLS], step[FZ_CALLS], zero[FZ_CALLS], tok[FZ_CALLS];
    uint32_t fuser[FZ_CALLS], flags[FZ_CALLS], first_rg[FZ_CALLS], rg_off[FZ_CALLS + 1];
    int32_t recipe[FZ_CALLS], device[FZ_CALLS], phase[FZ_CALLS];
    static const int32_t schedule[FZ_CALLS] = {0, 0, 0, 0, 1, 1, 2, 2, 0, 0, -1, -1,
                                               1, 1, 2, 2, 0, 0, 1, 1, 0, 0, 2,  2};
    rg_off[0] = 0;
    for (uint32_t i = 0; i < FZ_CALLS; i++) {
        kind[i] = FT_REC_CALL;
        seq[i] = i;
        fuser[i] = (i / 2) % 2;
        recipe[i] = schedule[i];
        device[i] = (int32_t)(i / 12);
        step[i] = i / 4;
        zero[i] = 0;
        tok[i] = fuser[i] ? 0 : 128;
        phase[i] = -1;
        flags[i] = FT_CF_INPUT_RG | FT_CF_HAS_STEP | (i % 2 ? FT_CF_GRAD : 0) |
                   (recipe[i] >= 0 ? FT_CF_HAS_RECIPE : 0) | (fuser[i] ? 0 : FT_CF_HAS_SPLITS);
        const uint32_t n_ops = fuser[i] ? 2 : 3;
        first_rg[i] = n_ops;
        rg_off[i + 1] = rg_off[i] + n_ops;
        memset(op_rg + rg_off[i], 0, n_ops);
    }
    const ft_batch b = {.chunk_id = 1,
                        .n = FZ_CALLS,
                        .kind = kind,
                        .seq = seq,
                        .fuser = fuser,
                        .recipe = recipe,
                        .flags = flags,
                        .device = device,
                        .first_rg = first_rg,
                        .op_rg_off = rg_off,
                        .op_rg = op_rg,
                        .step = step,
                        .mb = zero,
                        .phase = phase,
                        .ns = zero,
                        .fuse_ns = zero,
                        .bwd_call = zero,
                        .n_tokens = tok};
    ft_replay_opts o = {.needs = FT_VIEW_CAUSES, .capacity = capacity};
    ft_replay *r = NULL;
    int rc = ft_replay_new(fusers, 2, recipes, 3, &hdr, &o, &r, err);
    const ft_replay_view *v = NULL;
    if (!rc) rc = ft_replay_batch(r, &b, &v, err);
    if (!rc) {
        static ft_replay_result res;
        if (!v || v->n != FZ_CALLS) abort();
        ft_replay_get(r, &res);
        for (uint32_t p = 0; p < res.n_policies; p++)
            if (res.pol[p].builds + res.pol[p].hits != FZ_CALLS) abort();
    }
    ft_replay_free(r);
    return rc;
}

static int replay_fixed(void)
{
    ft_err err = {0, ""};
    for (uint32_t capacity = 0; capacity < 3; capacity += 2)
        if (fuzz_policy_replay(capacity, &err)) abort(); /* what defines replays */
    return FT_OK;
}

int fuzz_policy_run(const uint8_t *data, size_t size)
{
    if (size < 1) return FT_EINVAL;
    char *buf = malloc(size);
    if (!buf) return FT_ENOMEM;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    int rc;
    ft_err err = {0, ""};
    if (data[0] & 1) {
        uint32_t idx[FT_MAX_POLICIES], n;
        rc = ft_policy_define_json(buf, size - 1, "fuzz.json", idx, &n, &err);
    } else if (!buf[0] || memchr(data + 1, '\0', size - 1)) {
        rc = ft_err_set(&err, FT_EINVAL, "empty, or a NUL inside"); /* no command-line word */
    } else {
        uint32_t idx[FT_MAX_POLICIES], n;
        rc = ft_policy_parse_list(buf, idx, &n, &err);
    }
    if (rc == FT_ERANGE || rc == FT_ENOTFOUND) rc = FT_EINVAL; /* refused, with a message */
    if (rc == FT_EINVAL && !err.msg[0]) abort();               /* every refusal says why */
    if (rc == FT_OK) rc = replay_fixed();
    ft_policy_forget_user();
    free(buf);
    return rc;
}

#ifndef FT_FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int rc = fuzz_policy_run(data, size);
    if (rc != FT_OK && rc != FT_EINVAL && rc != FT_ENOMEM) abort();
    return 0;
}
#endif
