/*
 * api.c - fusertrace.h over the engine: the trace opened once (ft_replay_set), replayed by the
 * push driver with one observer that keeps each call's decisions when asked, the counts taken
 * from the reduced result. Plan texts are interned here (the engine's model lives only while
 * the replay runs), fuser labels are the open trace's.
 */
#include "fusertrace.h"
#include "ft_hmap.h"
#include "ft_replayer.h"

#include <stdio.h>
#include <string.h>

#ifndef FT_TOOL_VERSION
#define FT_TOOL_VERSION "unknown"
#endif

enum { API_MAX_ENV = 256 };

struct fusertrace_replay {
    ft_replay_set *set;
    ft_replay_result res;
    int keep;
    /* the decisions, call i and policy slot p at [i * n_pol + p] */
    uint32_t n_pol;
    uint64_t n, cap;
    int64_t *seq, *step;
    uint32_t *fuser; /* [cap] dense fuser index */
    uint8_t *dec;    /* [cap * n_pol] FT_DEC_* */
    uint8_t *stale;  /* [cap * n_pol] ft_stale */
    uint32_t *plan;  /* [cap * n_pol] index into plans */
    char **plans;    /* interned plan texts */
    uint32_t n_plans, cap_plans;
    ft_hmap plan_of; /* the engine's plan id -> index into plans */
    ft_replay_observer obs;
    ft_env_kv kv[API_MAX_ENV]; /* the env overrides, keys copied */
    char keys[API_MAX_ENV][128];
};

const char *fusertrace_version(void)
{
    return FT_TOOL_VERSION;
}

int fusertrace_api_version(void)
{
    return FUSERTRACE_API_VERSION;
}

/* ---- keeping the decisions ------------------------------------------------------------------ */
static int grow(fusertrace_replay *r, uint64_t need)
{
    if (need <= r->cap) return FT_OK;
    uint64_t cap = r->cap ? r->cap : 1024;
    while (cap < need)
        cap *= 2;
    const size_t np = r->n_pol ? r->n_pol : 1;
    int64_t *seq = ft_realloc(r->seq, cap * sizeof *seq);
    if (seq) r->seq = seq;
    int64_t *step = ft_realloc(r->step, cap * sizeof *step);
    if (step) r->step = step;
    uint32_t *fuser = ft_realloc(r->fuser, cap * sizeof *fuser);
    if (fuser) r->fuser = fuser;
    uint8_t *dec = ft_realloc(r->dec, cap * np);
    if (dec) r->dec = dec;
    uint8_t *stale = ft_realloc(r->stale, cap * np);
    if (stale) r->stale = stale;
    uint32_t *plan = ft_realloc(r->plan, cap * np * sizeof *plan);
    if (plan) r->plan = plan;
    if (!seq || !step || !fuser || !dec || !stale || !plan) return FT_ENOMEM;
    r->cap = cap;
    return FT_OK;
}

/* The index of the engine's plan id in r->plans, its text copied once. */
static int plan_index(fusertrace_replay *r, const ft_model *m, uint32_t id, uint32_t *out)
{
    uint32_t got = ft_hmap_get(&r->plan_of, id);
    if (got != UINT32_MAX) {
        *out = got;
        return FT_OK;
    }
    if (r->n_plans == r->cap_plans) {
        uint32_t cap = r->cap_plans ? 2 * r->cap_plans : 16;
        char **np = ft_realloc(r->plans, cap * sizeof *np);
        if (!np) return FT_ENOMEM;
        r->plans = np;
        r->cap_plans = cap;
    }
    const char *t = ft_model_plan_text(m, id);
    char *copy = ft_strdup(t ? t : "");
    if (!copy) return FT_ENOMEM;
    r->plans[r->n_plans] = copy;
    *out = r->n_plans++;
    return ft_hmap_put(&r->plan_of, id, *out);
}

static int keep_batch(void *ctx, const ft_replay_view *v, ft_err *err)
{
    fusertrace_replay *r = ctx;
    const ft_model *m = ft_replay_model(v->engine);
    if (grow(r, r->n + v->n)) return ft_err_set(err, FT_ENOMEM, "out of memory");
    for (uint32_t j = 0; j < v->n; j++, r->n++) {
        r->seq[r->n] = v->seq[j];
        r->step[r->n] = v->step[j];
        r->fuser[r->n] = v->fuser[j];
        for (uint32_t p = 0; p < r->n_pol && p < v->n_pol; p++) {
            const size_t k = (size_t)r->n * r->n_pol + p;
            r->dec[k] = v->pol[p].dec[j];
            r->stale[k] = v->pol[p].stale[j];
            if (plan_index(r, m, v->pol[p].plan[j], &r->plan[k]))
                return ft_err_set(err, FT_ENOMEM, "out of memory");
        }
    }
    return FT_OK;
}

/* ---- opening ----------------------------------------------------------------------------------
 */
/* "KEY=VALUE" overrides into kv[] (keys copied into keys[], which must outlive the replay). */
static int parse_env(const char *const *env, ft_env_kv *kv, char (*keys)[128], uint32_t *n,
                     ft_err *err)
{
    *n = 0;
    for (uint32_t i = 0; env && env[i]; i++) {
        const char *eq = strchr(env[i], '=');
        if (!eq || eq == env[i])
            return ft_err_set(err, FT_EINVAL, "env override '%s': wants KEY=VALUE", env[i]);
        if (*n == API_MAX_ENV || (size_t)(eq - env[i]) >= sizeof keys[0])
            return ft_err_set(err, FT_EINVAL, "env override '%s': too many or too long", env[i]);
        memcpy(keys[*n], env[i], (size_t)(eq - env[i]));
        keys[*n][eq - env[i]] = 0;
        kv[*n] = (ft_env_kv){keys[*n], eq + 1};
        (*n)++;
    }
    return FT_OK;
}

static int replay_into(fusertrace_replay *r, const char *path, const fusertrace_options *o,
                       ft_err *err)
{
    uint32_t pol[FT_MAX_POLICIES], n_pol = 0, n_env = 0;
    int rc = ft_policy_parse_list(o->policies ? o->policies : "all", pol, &n_pol, err);
    if (!rc) rc = parse_env(o->env, r->kv, r->keys, &n_env, err);
    if (!rc) rc = ft_replay_set_open(&path, 1, &r->set, err);
    if (rc) return rc;
    r->n_pol = n_pol;
    r->keep = o->keep_decisions != 0;
    r->obs = (ft_replay_observer){.ctx = r, .needs = FT_VIEW_DECISIONS, .batch_fn = keep_batch};
    const ft_replay_observer *obs[1] = {&r->obs};
    const ft_replay_opts ro = {.policies = pol,
                               .n_policies = n_pol,
                               .capacity = o->capacity,
                               .env = r->kv,
                               .n_env = n_env,
                               .observers = r->keep ? obs : NULL,
                               .n_observers = r->keep ? 1 : 0};
    return ft_replay_run(r->set, &ro, &r->res, err);
}

int fusertrace_replay_open(const char *path, const fusertrace_options *opts,
                           fusertrace_replay **out, char *err_buf, size_t err_cap)
{
    static const fusertrace_options defaults = {0};
    ft_err err = {0};
    int rc = FT_OK;
    *out = NULL;
    fusertrace_replay *r = path ? ft_calloc(1, sizeof *r) : NULL;
    if (!path)
        rc = ft_err_set(&err, FT_EINVAL, "no trace path");
    else if (!r)
        rc = ft_err_set(&err, FT_ENOMEM, "out of memory");
    else
        rc = replay_into(r, path, opts ? opts : &defaults, &err);
    if (rc) {
        if (err_buf && err_cap) snprintf(err_buf, err_cap, "%s", ft_err_msg(&err));
        fusertrace_replay_close(r);
        return rc;
    }
    if (err_buf && err_cap) err_buf[0] = 0;
    *out = r;
    return FT_OK;
}

void fusertrace_replay_close(fusertrace_replay *r)
{
    if (!r) return;
    for (uint32_t i = 0; i < r->n_plans; i++)
        ft_free(r->plans[i]);
    ft_free(r->plans);
    ft_hmap_free(&r->plan_of);
    ft_free(r->seq);
    ft_free(r->step);
    ft_free(r->fuser);
    ft_free(r->dec);
    ft_free(r->stale);
    ft_free(r->plan);
    ft_replay_set_close(r->set);
    ft_free(r);
}

/* ---- reading ----------------------------------------------------------------------------------
 */
uint64_t fusertrace_replay_n_calls(const fusertrace_replay *r)
{
    return r->res.calls;
}

uint32_t fusertrace_replay_n_policies(const fusertrace_replay *r)
{
    return r->res.n_policies;
}

const char *fusertrace_replay_policy(const fusertrace_replay *r, uint32_t i)
{
    return i < r->res.n_policies ? ft_policy_name(r->res.pol[i].policy) : NULL;
}

const char *fusertrace_replay_captured_policy(const fusertrace_replay *r)
{
    return r->res.captured_policy >= 0 ? ft_policy_name((uint32_t)r->res.captured_policy) : NULL;
}

/* The slot of policy `name` in the result, or -1. */
static int slot_of(const fusertrace_replay *r, const char *name)
{
    for (uint32_t p = 0; name && p < r->res.n_policies; p++)
        if (!strcmp(ft_policy_name(r->res.pol[p].policy), name)) return (int)p;
    return -1;
}

int fusertrace_replay_counts(const fusertrace_replay *r, const char *policy, fusertrace_counts *out)
{
    const int p = slot_of(r, policy);
    if (p < 0) return FUSERTRACE_ENOTFOUND;
    const ft_policy_result *q = &r->res.pol[p];
    *out = (fusertrace_counts){.calls = q->calls,
                               .builds = q->builds,
                               .hits = q->hits,
                               .resets = q->resets,
                               .stale_harmless = q->stale[FT_STALE_HARMLESS],
                               .stale_slower = q->stale[FT_STALE_SLOWER],
                               .stale_quant = q->stale[FT_STALE_QUANT],
                               .stale_raises = q->stale[FT_STALE_RAISES],
                               .qdrift = q->qdrift,
                               .fresh_raises = r->res.fresh_raises};
    return FUSERTRACE_OK;
}

int fusertrace_replay_decision(const fusertrace_replay *r, const char *policy, uint64_t i,
                               fusertrace_decision *out)
{
    if (!r->keep) return FUSERTRACE_EINVAL;
    const int p = slot_of(r, policy);
    if (p < 0 || i >= r->n) return FUSERTRACE_ENOTFOUND;
    const size_t k = (size_t)i * r->n_pol + (uint32_t)p;
    const ft_fuser_def *fd = ft_trace_fuser(ft_replay_set_trace(r->set, 0), r->fuser[i]);
    *out = (fusertrace_decision){.seq = r->seq[i],
                                 .fuser = fd ? fd->id : -1,
                                 .label = fd ? fd->label : NULL,
                                 .step = r->step[i],
                                 .built = (r->dec[k] & FT_DEC_BUILD) != 0,
                                 .reset = (r->dec[k] & FT_DEC_RESET) != 0,
                                 .stale = ft_stale_name((ft_stale)r->stale[k]),
                                 .plan = r->plans[r->plan[k]]};
    return FUSERTRACE_OK;
}
