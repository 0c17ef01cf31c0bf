/*
 * te_cache.c - TE's plan-cache rule as each ref writes it (docs/fuser-model.md, "The plan
 * cache"): whether OperationFuser.maybe_fuse_ops resets recipe state and whether it runs the
 * fusion passes, per call, for one fuser. Written for clarity, not speed: synth uses it for the
 * captured `rebuilt` flags of the run it writes, and the tests use it as the reference the
 * replay engine's specialised loops must agree with call for call.
 * It also says which ref a captured run had (ft_te_captured_ref), from its header.
 */
#include "tefuser_int.h"

#include <string.h>

void ft_te_cache_init(ft_te_cache *c, ft_te_ref ref)
{
    memset(c, 0, sizeof *c);
    c->ref = ref;
}

int ft_te_cache_call(ft_te_cache *c, int type, int bo, int64_t hist, uint32_t f, int *reset)
{
    /* recipe_type starts as None, which equals no recipe type (not even NoneType): the first
     * call resets. DelayedScaling's amax_history_len joins the reset rule at every ref. */
    const int delayed_change = type == FT_RT_DELAYED && c->hist != hist;
    int rs, build;
    switch (c->ref) {
    case FT_TE_PRE3410: /* one slot keyed by (type, f, bo): a reset is a rebuild */
        rs = build = !c->seen || type != c->type || f != c->f || bo != c->bo || delayed_change;
        break;
    case FT_TE_3410_COMMIT1: /* one slot keyed by (type, bo): f dropped */
        rs = build = !c->seen || type != c->type || bo != c->bo || delayed_change;
        break;
    default: /* FT_TE_3410: reset on (type, bo); a dict of plans keyed by (type, f, bo) */
        rs = !c->seen || type != c->type || bo != c->bo || delayed_change;
        build = 1;
        for (uint32_t i = 0; i < c->n_keys && build; i++)
            build = !(c->keys[i].type == type && c->keys[i].bo == bo && c->keys[i].f == f);
        if (build && c->n_keys < FT_TE_CACHE_KEYS) {
            c->keys[c->n_keys].type = type;
            c->keys[c->n_keys].bo = bo;
            c->keys[c->n_keys++].f = f;
        }
        break;
    }
    if (rs) {
        c->seen = 1;
        c->type = type;
        c->bo = bo;
        c->f = f;
        c->hist = hist;
    }
    if (reset) *reset = rs;
    return build;
}

int ft_te_captured_ref(const char *extra_json, const char *te_version, ft_te_ref *out)
{
    static const struct {
        const char *value;
        ft_te_ref ref;
    } caches[] = {{"single", FT_TE_PRE3410}, {"dict", FT_TE_3410}, {"type", FT_TE_3410_COMMIT1}};
    if (extra_json) {
        json_t *x = json_loads(extra_json, 0, NULL);
        const char *v = json_string_value(json_object_get(x, "fuser_cache"));
        int found = 0;
        for (size_t i = 0; v && !found && i < sizeof caches / sizeof caches[0]; i++)
            if (!strcmp(v, caches[i].value)) {
                *out = caches[i].ref;
                found = 1;
            }
        json_decref(x);
        if (found) return 1;
    }
    if (!te_version || !*te_version) return 0;
    int cmp; /* against the earliest 2.21 release: its first pre-release */
    *out = FT_TE_PRE3410;
    if (strstr(te_version, "3410") ||
        (!ft_version_cmp_str(te_version, "2.21.0.dev0", &cmp) && cmp >= 0))
        *out = FT_TE_3410;
    return 1;
}
