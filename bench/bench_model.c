/*
 * bench_model.c - cost of the fuser model's per-call operations (tefuser/ft_tefuser.h), each next
 * to a baseline measured in the same run: reading the precomputed recipe hash (what the
 * recipe-hash policy's key costs) and a memoised build (a plan lookup).
 *
 * Shapes: 4096 fusers of a 5-op grouped MLP with bias+GELU tail (all rules applicable), 8
 * recipes (MXFP8, NVFP4 with/without RHT, current scaling, overrides), SM100 environment.
 * Usage: bench_model [iterations, default 2000000]
 */
#include "ft_tefuser.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_FUSERS  4096
#define N_RECIPES 8

static volatile uint64_t sink;

int main(int argc, char **argv)
{
    long iters = argc > 1 ? strtol(argv[1], NULL, 10) : 2000000;
    if (iters <= 0) iters = 2000000;
    static char ops[N_FUSERS][768];
    static ft_fuser_def fz[N_FUSERS];
    for (int i = 0; i < N_FUSERS; i++) {
        /* distinct op lists: vary the group count and widths so no two fusers share a key */
        int g = 1 + i % 16, k = 64 * (1 + (i / 16) % 16);
        snprintf(ops[i], sizeof ops[i],
                 "[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":%d,\"in_features\":%d,"
                 "\"out_features\":256,\"dtype\":\"bfloat16\"}},{\"type\":\"ScaledSwiGLU\","
                 "\"attrs\":{\"glu_interleave_size\":32}},{\"type\":\"GroupedLinear\",\"attrs\":{"
                 "\"num_groups\":%d,\"in_features\":128,\"out_features\":%d}},{\"type\":\"Bias\"},"
                 "{\"type\":\"GELU\"}]",
                 g, k, g, k);
        fz[i] = (ft_fuser_def){i, NULL, ops[i], 5, 0, 0};
    }
    static const char *const rt[N_RECIPES][2] = {
        {"MXFP8BlockScaling", "{}"},
        {"NVFP4BlockScaling", "{\"disable_rht\":false}"},
        {"NVFP4BlockScaling", "{\"disable_rht\":true}"},
        {"Float8CurrentScaling", "{}"},
        {"MXFP8BlockScaling", "{\"backward_override\":\"high_precision\"}"},
        {"NVFP4BlockScaling", "{\"disable_stochastic_rounding\":true}"},
        {"DelayedScaling", "{\"amax_history_len\":16}"},
        {"CustomRecipe", "{}"},
    };
    ft_recipe_def rc[N_RECIPES];
    for (int i = 0; i < N_RECIPES; i++)
        rc[i] = (ft_recipe_def){i, rt[i][0], 100 + i, rt[i][1]};
    ft_model *m = NULL;
    ft_err err = {0};
    uint64_t t0 = ft_now_ns();
    if (ft_model_new(
            fz, N_FUSERS, rc, N_RECIPES,
            &(ft_model_capture){
                .env_json =
                    "{\"device_cc\":\"10.0\",\"cudnn_frontend\":\"1.27.0\",\"cublaslt\":\"13.4.0\","
                    "\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\"}"},
            NULL, 0, &m, &err)) {
        fprintf(stderr, "bench_model: %s\n", ft_err_msg(&err));
        return 1;
    }
    double new_ns = (double)(ft_now_ns() - t0) / N_FUSERS;

    /* first builds: every (fuser, recipe) pair once, f = 0 (passes + map + text + intern) */
    t0 = ft_now_ns();
    uint32_t id = 0;
    for (int r = -1; r < N_RECIPES; r++)
        for (uint32_t u = 0; u < N_FUSERS; u++)
            if (ft_model_build(m, u, r, 0, &id, &err)) {
                fprintf(stderr, "bench_model: %s\n", ft_err_msg(&err));
                return 1;
            }
    double build_ns = (double)(ft_now_ns() - t0) / (N_FUSERS * (N_RECIPES + 1));

    /* baseline: the recipe-hash key (a precomputed field) */
    t0 = ft_now_ns();
    uint64_t acc = 0;
    for (long i = 0; i < iters; i++)
        acc += ft_model_recipe(m, (int32_t)(i & 7))->hash ^ (uint64_t)(i % N_FUSERS);
    sink = acc;
    double base_ns = (double)(ft_now_ns() - t0) / (double)iters;

    t0 = ft_now_ns();
    for (long i = 0; i < iters; i++)
        acc += ft_model_fusion_key(m, (uint32_t)(i % N_FUSERS), (int32_t)(i & 7));
    sink = acc;
    double key_ns = (double)(ft_now_ns() - t0) / (double)iters;

    t0 = ft_now_ns();
    for (long i = 0; i < iters; i++) {
        ft_model_build(m, (uint32_t)(i % N_FUSERS), (int32_t)(i & 7), 0, &id, &err);
        acc += id;
    }
    sink = acc;
    double hit_ns = (double)(ft_now_ns() - t0) / (double)iters;

    /* classification of a stale pair (fused R1 plan with RHT quantizers under R2) and reset */
    uint32_t fused = 0, unfused = 0;
    ft_model_build(m, 0, 1, 0, &fused, &err);
    ft_model_build(m, 0, 2, 0, &unfused, &err);
    ft_qstate q;
    ft_model_fresh_qstate(m, 1, &q);
    t0 = ft_now_ns();
    long n_cls = iters / 10 > 0 ? iters / 10 : 1;
    for (long i = 0; i < n_cls; i++)
        acc +=
            (uint64_t)ft_model_classify(m, 0, 2, fused, &q, unfused, 256 + (i & 1) * 64, 0, NULL);
    sink = acc;
    double cls_ns = (double)(ft_now_ns() - t0) / (double)n_cls;

    t0 = ft_now_ns();
    for (long i = 0; i < iters; i++) {
        ft_model_reset(m, &q, (int32_t)(i & 7) - (int32_t)((i >> 3) & 1));
        acc += (uint64_t)q.cls;
    }
    sink = acc;
    double reset_ns = (double)(ft_now_ns() - t0) / (double)iters;

    printf("bench_model: %d fusers x %d recipes (+None), %ld iterations, %u distinct plans\n",
           N_FUSERS, N_RECIPES, iters, ft_model_n_plans(m));
    printf("  baseline recipe-hash key read   %8.2f ns/call\n", base_ns);
    printf("  fusion-attrs key                %8.2f ns/call  (%.2fx baseline)\n", key_ns,
           key_ns / base_ns);
    printf("  build, memoised (lookup)        %8.2f ns/call  (%.2fx baseline)\n", hit_ns,
           hit_ns / base_ns);
    printf("  build, first time (passes)      %8.2f ns/call  (%.1fx lookup)\n", build_ns,
           build_ns / hit_ns);
    printf("  classify stale pair             %8.2f ns/call  (%.1fx lookup)\n", cls_ns,
           cls_ns / hit_ns);
    printf("  reset_recipe_state model        %8.2f ns/call  (%.2fx baseline)\n", reset_ns,
           reset_ns / base_ns);
    printf("  model setup (ops/recipes parse) %8.2f ns/fuser\n", new_ns);
    ft_model_free(m);
    return 0;
}
