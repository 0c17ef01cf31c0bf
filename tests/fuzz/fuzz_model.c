/*
 * fuzz_model.c - libFuzzer target for the fuser model's inputs (tefuser/ft_tefuser.h): the header's
 * env JSON, a recipe declaration and a fuser's ops JSON.
 *
 * Input: up to four '\n'-separated parts: env JSON, recipe type, recipe attrs JSON, ops JSON
 * (the rest). The model is built; when that succeeds, every (recipe, f) plan is built and every
 * pair of plans is classified under every quantizer state reachable by resets. The only
 * acceptable statuses are FT_OK and FT_EINVAL; anything else (and any crash or leak) is a bug.
 *
 * Build with clang: tests/fuzz/build.sh (not part of the normal build); tests/fuzz/README.md says
 * how to run it. The corpus in tests/fuzz/corpus/model/ is replayed as an ordinary test by
 * tests/test_tefuser.c, which includes this file and calls fuzz_model_run().
 */
#include "ft_tefuser.h"

#include <jansson.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int fuzz_model_run(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int fuzz_model_run(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf) return FT_ENOMEM;
    memcpy(buf, data, size);
    buf[size] = '\0';
    if (memchr(buf, '\0', size)) { /* JSON text has no NUL; keep strings well formed */
        free(buf);
        return FT_EINVAL;
    }
    char *part[4] = {buf, NULL, NULL, NULL};
    for (int i = 1; i < 4; i++) {
        char *nl = part[i - 1] ? strchr(part[i - 1], '\n') : NULL;
        if (!nl) break;
        *nl = '\0';
        part[i] = nl + 1;
    }
    const char *env = part[0];
    const char *rtype = part[1] ? part[1] : "MXFP8BlockScaling";
    const char *rattrs = part[2] ? part[2] : "{}";
    const char *ops = part[3] ? part[3] : "[]";
    /* the declared op count is the JSON array's length (what the trace stores) */
    uint32_t n_ops = 0;
    json_t *arr = json_loads(ops, 0, NULL);
    if (json_is_array(arr)) n_ops = (uint32_t)json_array_size(arr);
    json_decref(arr);
    ft_fuser_def fz = {1, NULL, ops, n_ops, 0, 0};
    ft_recipe_def rc[2] = {{1, rtype, 10, rattrs}, {2, "NVFP4BlockScaling", 10, "{}"}};
    ft_env_kv ov[1] = {{"world_size", "2"}};
    ft_model *m = NULL;
    ft_err err = {0, ""};
    int rc_new = ft_model_new(&fz, 1, rc, 2, &(ft_model_capture){.env_json = env}, ov,
                              (uint32_t)(size & 1), &m, &err);
    if (rc_new == FT_OK) {
        uint32_t plans[3][3];
        uint32_t n = ft_model_n_ops(m, 0);
        uint32_t fs[3] = {0, n / 2, n};
        for (int r = -1; r < 2; r++)
            for (int k = 0; k < 3; k++) {
                int b = ft_model_build(m, 0, r, fs[k], &plans[r + 1][k], &err);
                if (b != FT_OK) abort(); /* a valid model always builds */
                (void)ft_model_plan_text(m, plans[r + 1][k]);
                (void)ft_model_fusion_key(m, 0, r);
            }
        ft_qstate q;
        ft_qstate_init(&q);
        for (int step = 0; step < 6; step++) {
            int32_t r = (int32_t)(step % 3) - 1;
            ft_model_reset(m, &q, r);
            for (int a = 0; a < 3; a++)
                for (int c = 0; c < 3; c++) {
                    const char *t = NULL;
                    ft_stale s = ft_model_classify(m, 0, r, plans[a][0], &q, plans[c][0],
                                                   (int64_t)step * 100 - 100, fs[step % 3], &t);
                    if ((unsigned)s >= FT_STALE_COUNT || ((s == FT_STALE_RAISES) != (t != NULL)))
                        abort();
                }
        }
        ft_model_free(m);
    }
    free(buf);
    return rc_new;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int rc = fuzz_model_run(data, size);
    if (rc != FT_OK && rc != FT_EINVAL && rc != FT_ENOMEM) abort();
    return 0;
}
