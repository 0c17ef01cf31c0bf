/*
 * engine.c - the replay engine: one pass over a batch of calls for every chosen policy (the
 * trace driver that feeds it is driver.c).
 *
 * Per batch (one decoded chunk):
 *   1. oracle pass: per call the boundary f (docs/fuser-model.md), the fresh plan (ft_model_build,
 *      which memoises by (fuser, recipe, f), with a two-entry cache per fuser in front), the
 *      fresh quantizer state, and the fusion-attrs key id when a policy reads it;
 *   2. one loop per policy over the batch: reset rule, store lookup or build, staleness against
 *      the oracle (classification memoised by (fuser, recipe, plan, qstate, fresh, token class)),
 *      counters. Each loop is timed as a whole, so the figure is ns per call of key + lookup;
 *   3. if some consumer asked (ft_replay_opts.needs), the batch's view: the call columns, every
 *      policy's decisions recorded by its loop, and why each build happened (FT_WHY_*).
 * The engine never prints: writers and observers read the view (driver.c hands it to them).
 * Everything per call is integer work on precomputed ids; memory grows with distinct fusers,
 * recipes, keys and quantizer states, never with the number of calls.
 *
 * Limits: < 2^24 fusers and recipes, < 65535 ops per fuser (FT_EUNSUPPORTED otherwise).
 */
#define _POSIX_C_SOURCE 200809L
#include "replayer_int.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ------------------------------------------------------------------------ */
/* dense id of a 64-bit value through map m (ids 0.. in first-seen order) */
static int dense_id(ft_hmap *m, uint64_t v, int32_t *id)
{
    uint32_t got = ft_hmap_get(m, v);
    if (got != UINT32_MAX) {
        *id = (int32_t)got;
        return FT_OK;
    }
    got = m->n;
    int rc = ft_hmap_put(m, v, got);
    *id = (int32_t)got;
    return rc;
}

static int q_intern(ft_replay *r, const ft_qstate *q, uint32_t *id)
{
    uint64_t h = ft_qstate_hash(q);
    uint32_t got = ft_hmap_get(&r->q_index, h);
    if (got != UINT32_MAX && ft_qstate_equal(&r->qs[got], q)) {
        *id = got;
        return FT_OK;
    }
    /* a 64-bit collision between different states is not expected; fall back to a scan */
    for (uint32_t i = 0; i < r->n_qs; i++)
        if (ft_qstate_equal(&r->qs[i], q)) {
            *id = i;
            return FT_OK;
        }
    if (r->n_qs == r->cap_qs) {
        uint32_t ncap = r->cap_qs ? r->cap_qs * 2 : 16;
        ft_qstate *nq = ft_realloc(r->qs, (size_t)ncap * sizeof *nq);
        if (!nq) return FT_ENOMEM;
        r->qs = nq;
        r->cap_qs = ncap;
    }
    r->qs[r->n_qs] = *q;
    *id = r->n_qs++;
    return ft_hmap_put(&r->q_index, h, *id);
}

/* reset_recipe_state(recipe) applied to interned state q (the loop reads q_direct first) */
int replay_q_reset_slow(ft_replay *r, uint32_t q, int32_t recipe, uint32_t *out)
{
    uint64_t key = ((uint64_t)q << 32) | (uint32_t)(recipe + 1);
    int rc = FT_OK;
    if ((*out = ft_hmap_get(&r->q_trans, key)) == UINT32_MAX) {
        ft_qstate s = r->qs[q];
        ft_model_reset(r->model, &s, recipe);
        rc = q_intern(r, &s, out);
        if (!rc) rc = ft_hmap_put(&r->q_trans, key, *out);
    }
    if (!rc && q < r->n_qdirect)
        r->q_direct[(size_t)q * (r->n_recipes + 1) + (uint32_t)(recipe + 1)] = *out;
    return rc;
}

int replay_q_equal(ft_replay *r, uint32_t a, uint32_t b)
{
    if (a == b) return 1;
    uint64_t key = ((uint64_t)a << 32) | b;
    const uint32_t got = ft_hmap_get(&r->q_equal, key);
    if (got != UINT32_MAX) return (int)got;
    int eq = ft_qstate_equal(&r->qs[a], &r->qs[b]) ? 1 : 0;
    (void)ft_hmap_put(&r->q_equal, key, (uint32_t)eq); /* the memo is an optimisation */
    if (a < 64 && b < 64) {
        r->q_eq_known[a] |= 1ull << b;
        r->q_eq_val[a] |= (uint64_t)eq << b;
    }
    return eq;
}

/* Token classes that the run-time checks distinguish: unknown, none, whole 128-row tiles, other.
 * Classification runs with the first token count seen in the class (TE's messages that quote T
 * quote that one). */
static int token_class(uint32_t flags, int64_t n_tokens)
{
    if (!(flags & FT_CF_HAS_SPLITS)) return 0;
    if (n_tokens == 0) return 1;
    return n_tokens % 128 == 0 ? 2 : 3;
}

const class_memo *replay_classify(ft_replay *r, uint32_t fuser, int32_t recipe, uint32_t chosen,
                                  uint32_t q, uint32_t fresh, int tok_class, int64_t n_tokens,
                                  int *rc)
{
    /* by op-list class: every fuser with the same ops classifies alike */
    const uint32_t cls = r->cls[fuser];
    uint64_t h =
        ft_hash_mix(ft_hash_mix(cls, (uint64_t)(uint32_t)recipe), ((uint64_t)chosen << 32) | fresh);
    h = ft_hash_mix(h, ((uint64_t)q << 8) | (uint64_t)tok_class);
    const uint32_t got = ft_hmap_get(&r->c_index, h);
    *rc = FT_OK;
    if (got != UINT32_MAX) {
        class_memo *c = &r->cm[got];
        if (c->fuser == cls && c->recipe == recipe && c->chosen == chosen && c->q == q &&
            c->fresh == fresh && c->tok_class == tok_class)
            return c;
    }
    if (r->n_cm == r->cap_cm) {
        uint32_t ncap = r->cap_cm ? r->cap_cm * 2 : 16;
        class_memo *nc = ft_realloc(r->cm, (size_t)ncap * sizeof *nc);
        if (!nc) {
            *rc = FT_ENOMEM;
            return NULL;
        }
        r->cm = nc;
        r->cap_cm = ncap;
    }
    class_memo *c = &r->cm[r->n_cm];
    memset(c, 0, sizeof *c);
    c->fuser = cls;
    c->recipe = recipe;
    c->chosen = chosen;
    c->q = q;
    c->fresh = fresh;
    c->tok_class = tok_class;
    if (r->tok_rep[tok_class & 3] == -2) r->tok_rep[tok_class & 3] = n_tokens;
    /* tok_class = token class | (backward runs) << 2; the model reads f only as f < n_ops */
    c->stale = ft_model_classify(r->model, fuser, recipe, chosen, &r->qs[q], fresh,
                                 r->tok_rep[tok_class & 3], tok_class >> 2 ? 0 : r->n_ops[fuser],
                                 &c->text);
    if ((unsigned)c->stale >= FT_STALE_COUNT) c->stale = FT_STALE_HARMLESS;
    *rc = ft_hmap_put(&r->c_index, h, r->n_cm);
    r->n_cm++;
    return c;
}

/* ---- engine lifecycle ----------------------------------------------------------------------- */
void ft_replay_free(ft_replay *r)
{
    if (!r) return;
    slots_free(r);
    ft_model_free(r->model);
    ft_free(r->n_ops);
    ft_free(r->inst);
    ft_free(r->cls);
    ft_free(r->ri);
    ft_free(r->mru);
    ft_hmap_free(&r->fa_memo);
    ft_hmap_free(&r->fa_ids);
    ft_hmap_free(&r->q_index);
    ft_hmap_free(&r->q_trans);
    ft_hmap_free(&r->q_equal);
    ft_hmap_free(&r->c_index);
    ft_free(r->qs);
    ft_free(r->cm);
    for (uint32_t p = 0; p < r->n_pol; p++) {
        ft_free(r->pol[p].st);
        store_free(&r->pol[p].store);
        user_run_free(&r->pol[p]);
    }
    ft_free(r->cc);
    ft_free(r->q_direct);
    ft_free(r->fuser_ok);
    ft_free(r->phase_ok);
    ft_free(r->rec);
    ft_free(r->rec_plan);
    ft_free(r->rec_q);
    ft_free(r->rec_stale);
    ft_free(r->rec_why);
    ft_free(r->v_row);
    ft_free(r->v_fuser);
    ft_free(r->v_f);
    ft_free(r->v_fresh);
    ft_free(r->v_fresh_q);
    ft_free(r->v_recipe);
    ft_free(r->v_phase);
    ft_free(r->v_seq);
    ft_free(r->v_sid);
    ft_free(r->v_step);
    ft_free(r->v_ntok);
    ft_free(r->v_match);
    ft_free(r->v_soff);
    ft_free(r->prev_r);
    ft_free(r->prev_f);
    ft_free(r->changed);
    ft_free(r->fraise);
    ft_free(r->rec_key);
    ft_free(r->src_r);
    ft_free(r->src_f);
    ft_free(r->src_seq);
    ft_free(r->src);
    for (uint32_t p = 0; p < FT_MAX_POLICIES; p++)
        ft_hmap_free(&r->src_map[p]);
    ft_free(r);
}

static int setup_recipes(ft_replay *r, ft_err *err)
{
    ft_hmap hashes = {0}, objs = {0}, objbos = {0};
    int rc = FT_OK;
    uint32_t q0;
    ft_qstate q;
    ft_qstate_init(&q);
    rc = q_intern(r, &q, &q0); /* id 0: a fresh fuser's state */
    for (int32_t i = -1; !rc && i < (int32_t)r->n_recipes; i++) {
        const ft_recipe_model *m = ft_model_recipe(r->model, i);
        rinfo *ri = &r->ri[i + 1];
        if (!m) {
            rc = ft_err_set(err, FT_EINVAL, "model has no recipe %d", i);
            break;
        }
        if ((unsigned)m->type >= FT_RT_COUNT || (unsigned)m->bo > FT_BO_DEQUANTIZED) {
            rc = ft_err_set(err, FT_EINVAL, "recipe %d: bad type or backward_override", i);
            break;
        }
        ri->type = (uint8_t)m->type;
        ri->bo = (uint8_t)m->bo;
        ri->delayed = m->type == FT_RT_DELAYED;
        ri->hist = ri->delayed ? m->amax_history_len : 0;
        ri->tb_id = (int32_t)(m->cls * 3 + m->bo); /* type(recipe): a subclass is its own */
        rc = dense_id(&hashes, m->hash, &ri->hash_id);
        if (!rc && i < 0) {
            ri->obj_id = 0;
            ri->objbo_id = 0;
        } else if (!rc) {
            /* ids from 1: 0 is "no recipe" */
            rc = dense_id(&objs, (uint64_t)m->obj, &ri->obj_id);
            ri->obj_id++;
            if (!rc) rc = dense_id(&objbos, ft_hash_mix((uint64_t)m->obj, m->bo), &ri->objbo_id);
            ri->objbo_id++;
        }
        if (!rc) {
            ft_model_fresh_qstate(r->model, i, &q);
            rc = q_intern(r, &q, &ri->fresh_q);
        }
    }
    ft_hmap_free(&hashes);
    ft_hmap_free(&objs);
    ft_hmap_free(&objbos);
    if (rc && !err->rc) ft_err_set(err, rc, "replay setup: %s", ft_strerror(rc));
    return rc;
}

/* The captured run's policy: the one whose row reproduces the TE ref the header names (tefuser
 * reads the header's fuser_cache and te_version). */
static int captured_from_header(const ft_header *h)
{
    ft_te_ref ref;
    if (!h || !ft_te_captured_ref(h->extra_json, h->te_version, &ref)) return -1;
    return ft_policy_of_te_ref(ref);
}

int ft_replay_new(const ft_fuser_def *fusers, uint32_t n_fusers, const ft_recipe_def *recipes,
                  uint32_t n_recipes, const ft_header *header, const ft_replay_opts *opts,
                  ft_replay **out, ft_err *err)
{
    static const ft_replay_opts no_opts = {0};
    ft_err local;
    int rc;
    if (!err) err = &local;
    ft_err_clear(err);
    *out = NULL;
    if (!opts) opts = &no_opts;
    if (n_fusers >= FT_MAX_FUSERS || n_recipes >= (1u << FT_KEY_ID_BITS) - 2)
        return ft_err_set(err, FT_EUNSUPPORTED, "trace has %u fusers and %u recipes; at most %u",
                          n_fusers, n_recipes, FT_MAX_FUSERS - 1);
    ft_replay *r = ft_calloc(1, sizeof *r);
    if (!r) return ft_err_set(err, FT_ENOMEM, "replay: out of memory");
    r->fusers = fusers;
    r->recipes = recipes;
    r->n_fusers = n_fusers;
    r->n_recipes = n_recipes;
    r->needs = opts->needs;
    r->rec_on = opts->needs != 0;
    r->causes = (opts->needs & FT_VIEW_CAUSES) != 0;
    r->filt = opts->filter != NULL;
    if (opts->filter) r->filter = *opts->filter;
    for (int k = 0; k < 4; k++)
        r->tok_rep[k] = -2;
    r->tok_rep[0] = -1;
    r->tok_rep[1] = 0;

    /* what the header says that the model reads (env, te_fusions, rank, world_size) */
    ft_model_capture mcap = {0};
    if (header)
        mcap = (ft_model_capture){header->env_json,       header->extra_json, header->has_rank,
                                  header->has_world_size, header->rank,       header->world_size};
    rc = ft_model_new(fusers, n_fusers, recipes, n_recipes, &mcap, opts->env, opts->n_env,
                      &r->model, err);
    if (rc) {
        if (!err->msg[0]) ft_err_set(err, rc, "building the fuser model: %s", ft_strerror(rc));
        goto fail;
    }
    r->n_ops = ft_calloc(n_fusers ? n_fusers : 1, sizeof *r->n_ops);
    r->inst = ft_calloc(n_fusers ? n_fusers : 1, sizeof *r->inst);
    r->cls = ft_calloc(n_fusers ? n_fusers : 1, sizeof *r->cls);
    r->ri = ft_calloc(n_recipes + 1, sizeof *r->ri);
    r->n_lists = ft_model_n_lists(r->model);
    r->mru = ft_calloc(r->n_lists ? r->n_lists : 1, sizeof *r->mru);
    r->fuser_ok = ft_calloc(n_fusers ? n_fusers : 1, 1);
    if (!r->n_ops || !r->inst || !r->cls || !r->ri || !r->mru || !r->fuser_ok) goto nomem;
    for (uint32_t u = 0; u < n_fusers; u++) {
        const char *glob = r->filter.fuser_glob, *label = fusers[u].label;
        r->fuser_ok[u] = !glob || (label && !fnmatch(glob, label, 0));
        r->n_ops[u] = ft_model_n_ops(r->model, u);
        r->inst[u] = ft_model_fuser_instance(r->model, u);
        r->cls[u] = ft_model_fuser_list(r->model, u);
        if (r->n_ops[u] >= (1u << FT_KEY_F_BITS) - 1) {
            rc = ft_err_set(err, FT_EUNSUPPORTED, "fuser %lld has %u ops; at most %u",
                            (long long)fusers[u].id, r->n_ops[u], (1u << FT_KEY_F_BITS) - 2);
            goto fail;
        }
        oracle_mru *m = &r->mru[r->cls[u]];
        m->recipe[0] = m->recipe[1] = -2;
        m->n_ops = r->n_ops[u];
        memset(m->raises, -1, sizeof m->raises);
        m->fa_recipe = -2;
    }
    r->n_qdirect = FT_QDIRECT;
    while (r->n_qdirect > 1 && (size_t)r->n_qdirect * (n_recipes + 1) > (1u << 22))
        r->n_qdirect /= 2;
    r->q_direct = ft_malloc((size_t)r->n_qdirect * (n_recipes + 1) * sizeof *r->q_direct);
    if (!r->q_direct) goto nomem;
    memset(r->q_direct, 0xff, (size_t)r->n_qdirect * (n_recipes + 1) * sizeof *r->q_direct);
    r->step_width = 1;
    r->step_calls.width = 1;
    rc = setup_recipes(r, err);
    if (rc) goto fail;

    ft_replay_result_init(&r->base, opts->policies, opts->n_policies);
    r->n_pol = r->base.n_policies;
    for (uint32_t p = 0; p < r->n_pol; p++) {
        policy_run *pr = &r->pol[p];
        pr->idx = r->base.pol[p].policy;
        r->pol_idx[p] = pr->idx;
        pr->def = ft_policy_def(pr->idx);
        if (!pr->def) {
            rc = ft_err_set(err, FT_ENOTFOUND, "no policy with index %u", pr->idx);
            goto fail;
        }
        pr->res = r->base.pol[p];
        pr->store.free_head = FT_NO_ENTRY;
        pr->store.capacity = opts->capacity;
        if (pr->def->store == FT_STORE_SHARED) {
            const uint32_t nl = ft_model_n_lists(r->model);
            pr->store.lists = ft_malloc((nl ? nl : 1) * sizeof *pr->store.lists);
            if (!pr->store.lists) goto nomem;
            pr->store.n_lists = nl;
            for (uint32_t k = 0; k < nl; k++)
                pr->store.lists[k] = (store_list){FT_NO_ENTRY, FT_NO_ENTRY, 0};
        }
        if (pr->def->needs_fa) r->needs_fa = 1;
        if (pr->def->user && (rc = user_run_init(r, pr, opts, err))) goto fail;
    }
    if ((rc = slots_setup(r, err))) goto fail;
    r->base.n_traces = 1;
    r->base.n_fusers = n_fusers;
    r->base.n_recipes = n_recipes;
    if (opts->captured) {
        uint32_t cap;
        rc = ft_policy_find(opts->captured, &cap, err);
        if (rc) goto fail;
        r->base.captured_policy = (int)cap;
    } else {
        r->base.captured_policy = captured_from_header(header);
    }
    *out = r;
    return FT_OK;
nomem:
    rc = ft_err_set(err, FT_ENOMEM, "replay: out of memory");
fail:
    ft_replay_free(r);
    return rc;
}

#define GROW(field, cap)                                                                           \
    do {                                                                                           \
        void *np_ = ft_realloc(r->field, (size_t)(cap) * sizeof *r->field);                        \
        if (!np_) return FT_ENOMEM;                                                                \
        r->field = np_;                                                                            \
    } while (0)

static int ensure_scratch(ft_replay *r, uint32_t n)
{
    if (n <= r->cap_batch) return FT_OK;
    uint32_t cap = r->cap_batch ? r->cap_batch : 1024;
    while (cap < n)
        cap *= 2;
    GROW(cc, cap);
    GROW(fraise, cap);
    if (r->rec_on) {
        GROW(rec, (size_t)r->n_pol * cap);
        GROW(rec_q, (size_t)r->n_pol * cap);
        GROW(rec_plan, (size_t)r->n_pol * cap);
        GROW(rec_stale, (size_t)r->n_pol * cap);
        GROW(v_row, cap);
        GROW(v_fuser, cap);
        GROW(v_f, cap);
        GROW(v_fresh, cap);
        GROW(v_fresh_q, cap);
        GROW(v_recipe, cap);
        GROW(v_phase, cap);
        GROW(v_seq, cap);
        GROW(v_sid, cap);
        GROW(v_step, cap);
        GROW(v_ntok, cap);
        GROW(v_match, cap);
        GROW(v_soff, (size_t)cap + 1);
    }
    if (r->causes) {
        GROW(rec_why, (size_t)r->n_pol * cap);
        GROW(prev_r, cap);
        GROW(prev_f, cap);
        GROW(changed, cap);
        GROW(rec_key, (size_t)r->n_pol * cap);
        GROW(src_r, (size_t)r->n_pol * cap);
        GROW(src_f, (size_t)r->n_pol * cap);
        GROW(src_seq, (size_t)r->n_pol * cap);
    }
    r->cap_batch = cap;
    return FT_OK;
}
#undef GROW

/* ---- oracle pass ---------------------------------------------------------------------------- */
/* Fill MRU slot `victim` of fuser u's op-list class with the fresh plan of (recipe, f), from
 * the model (which memoises its builds; only the calls that really built count and are timed as
 * builds). sid names the calling fuser in messages. */
static int fresh_plan_miss(ft_replay *r, oracle_mru *m, uint32_t u, int32_t recipe, uint32_t f,
                           int64_t seq, int64_t sid, ft_err *err)
{
    const int k = m->victim;
    uint32_t plan;
    const uint64_t built = ft_model_n_built(r->model), t0 = ft_now_ns();
    int rc = ft_model_build(r->model, u, recipe, f, &plan, err);
    if (ft_model_n_built(r->model) != built || rc) {
        r->base.model_build_ns += ft_now_ns() - t0;
        r->base.model_builds++;
    }
    if (rc) {
        char msg[FT_ERR_MAX];
        ft_strlcpy(msg, ft_err_msg(err), sizeof msg);
        return ft_err_set(err, rc, "seq %lld, fuser %lld: plan build failed: %s", (long long)seq,
                          (long long)sid, msg);
    }
    m->recipe[k] = recipe;
    m->f[k] = f;
    m->plan[k] = plan;
    memset(m->raises[k], -1, sizeof m->raises[k]);
    return FT_OK;
}

/* Whether the call's fresh plan itself raises in TE (policy-independent: e.g. an unfused
 * ScaledSReLU with activation_recompute_in_mlp, a fused plan with T % 128 != 0): 1 if it does,
 * counted by message when count is set (the call is counted). MRU slot k of the fuser holds the
 * call's (recipe, f). */
static int fresh_raise(ft_replay *r, oracle_mru *m, int k, uint32_t u, int32_t recipe, uint32_t f,
                       uint8_t tok, int64_t n_tokens, int count)
{
    int8_t *known = &m->raises[k][tok & 7];
    const char *text = NULL;
    if (*known == 0) return 0;
    ft_qstate q = r->qs[r->ri[recipe + 1].fresh_q];
    const int raises =
        ft_model_run_raises(r->model, u, recipe, m->plan[k], &q, n_tokens, f, &text) != 0;
    *known = (int8_t)raises;
    if (!raises || !count) return raises;
    r->base.fresh_raises++;
    for (int t = 0; t < FT_MAX_RAISE_TEXTS; t++) {
        if (r->fresh_texts[t] == text || !r->fresh_texts[t]) {
            r->fresh_texts[t] = text;
            r->fresh_counts[t]++;
            break;
        }
    }
    return 1;
}

static int fa_id(ft_replay *r, uint32_t u, int32_t recipe, int32_t *id)
{
    oracle_mru *m = &r->mru[r->cls[u]];
    if (m->fa_recipe == recipe) {
        *id = m->fa_id;
        return FT_OK;
    }
    uint64_t key = ((uint64_t)r->cls[u] << 40) | (uint32_t)(recipe + 1);
    const uint32_t got = ft_hmap_get(&r->fa_memo, key);
    if (got != UINT32_MAX) {
        *id = (int32_t)got;
    } else {
        int rc = dense_id(&r->fa_ids, ft_model_fusion_key(r->model, u, recipe), id);
        if (!rc) rc = ft_hmap_put(&r->fa_memo, key, (uint32_t)*id);
        if (rc) return rc;
    }
    m->fa_recipe = recipe;
    m->fa_id = *id;
    return FT_OK;
}

/* Halve the step resolution of every histogram (and of the buckets already assigned to the first
 * n_done calls of the batch) until `step` fits. Rare: log2(steps / FT_STEP_BUCKETS) times. */
static void step_widen(ft_replay *r, int64_t step, uint32_t n_done, uint32_t max_sb)
{
    /* buckets counted so far in this batch are in use too */
    if (max_sb > r->step_calls.n) r->step_calls.n = max_sb;
    for (uint32_t p = 0; p < r->n_pol; p++)
        if (max_sb > r->pol[p].res.steps.n) r->pol[p].res.steps.n = max_sb;
    while (step / r->step_width >= FT_STEP_BUCKETS) {
        for (uint32_t p = 0; p < r->n_pol; p++)
            replay_step_fold(&r->pol[p].res.steps);
        replay_step_fold(&r->step_calls);
        r->step_width *= 2;
        for (uint32_t k = 0; k < n_done; k++)
            if (r->cc[k].sb != FT_NO_SB) r->cc[k].sb /= 2;
    }
}

/* Whether record i passes the filter (ft_replay_filter; phase_ok holds the batch's phases). */
static int call_matches(const ft_replay *r, const ft_batch *b, uint32_t i, uint32_t u)
{
    const uint32_t fl = b->flags[i];
    if (!r->fuser_ok[u]) return 0;
    if (r->filter.phase && !((fl & FT_CF_HAS_PHASE) && b->phase[i] >= 0 &&
                             (uint32_t)b->phase[i] < b->n_phases && r->phase_ok[b->phase[i]]))
        return 0;
    if (r->filter.has_steps) {
        const int64_t step = (fl & FT_CF_HAS_STEP) ? b->step[i] : -1;
        if (step < r->filter.step_lo || step > r->filter.step_hi) return 0;
    }
    return 1;
}

static int filter_phases(ft_replay *r, const ft_batch *b)
{
    if (!r->filt || !r->filter.phase) return FT_OK;
    if (b->n_phases > r->cap_phases) {
        uint8_t *np = ft_realloc(r->phase_ok, b->n_phases);
        if (!np) return FT_ENOMEM;
        r->phase_ok = np;
        r->cap_phases = b->n_phases;
    }
    for (uint32_t k = 0; k < b->n_phases; k++)
        r->phase_ok[k] = b->phases[k] && !strcmp(b->phases[k], r->filter.phase);
    return FT_OK;
}

/* Instantiated with and without a filter (filt is a constant), so that a replay without one
 * runs the plain loop. */
static inline __attribute__((always_inline)) int oracle_pass(ft_replay *r, const ft_batch *b,
                                                             ft_err *err, const int filt)
{
    const int needs_fa = r->needs_fa;
    const uint32_t n = b->n, n_fusers = r->n_fusers, n_recipes1 = r->n_recipes + 1;
    int shift = 0; /* step_width is a power of two: buckets by shift, not division */
    while ((INT64_C(1) << shift) < r->step_width)
        shift++;
    const uint8_t *K = b->kind;
    const uint32_t *BU = b->fuser, *FL = b->flags, *FRG = b->first_rg, *CLS = r->cls;
    const int32_t *BR = b->recipe;
    const int64_t *STEP = b->step, *TOKENS = b->n_tokens;
    ccall *CC = r->cc;
    uint64_t *step_calls = r->step_calls.calls;
    oracle_mru *mru = r->mru;
    uint32_t j = 0, max_sb = 0, any_cap = 0, counted = 0, n_bwd = 0;
    r->n_ending = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (K[i] != FT_REC_CALL) {
            int rc;
            if (K[i] == FT_REC_BACKWARD)
                n_bwd++;
            else if (BU[i] >= n_fusers)
                return ft_err_set(err, FT_ECORRUPT, "chunk %llu, seq %lld: fuser %u out of range",
                                  (unsigned long long)b->chunk_id, (long long)b->seq[i], BU[i]);
            else if ((rc = slot_end(r, b, i, j, err)))
                return rc;
            continue;
        }
        const uint32_t u = BU[i], fl = FL[i];
        const int32_t recipe = BR[i];
        if (u >= n_fusers || (uint32_t)(recipe + 1) >= n_recipes1) goto bad;
        oracle_mru *m = &mru[CLS[u]];
        const uint32_t f = ft_te_boundary(m->n_ops, fl & FT_CF_GRAD, fl & FT_CF_INPUT_RG, FRG[i]);
        if (f > m->n_ops) goto bad;
        int rc;
        ccall *cj = &CC[j];
        if ((rc = slot_for_call(r, b, i, u, fl, cj, err))) return rc;
        cj->i = i;
        cj->fuser = u;
        cj->recipe = recipe;
        cj->f = (uint16_t)f;
        cj->match = (uint8_t)(!filt || call_matches(r, b, i, u));
        if (filt) counted += cj->match;
        r->gstat[r->slot[cj->slot].grp].calls += cj->match;
        int k = m->recipe[0] == recipe && m->f[0] == f   ? 0
                : m->recipe[1] == recipe && m->f[1] == f ? 1
                                                         : -1;
        if (k < 0) {
            const int64_t sid = b->sid ? b->sid[i] : r->fusers[u].id;
            if ((rc = fresh_plan_miss(r, m, u, recipe, f, b->seq[i], sid, err))) return rc;
            k = m->victim;
        }
        m->victim = (uint8_t)(k ^ 1);
        cj->fresh = m->plan[k];
        cj->fa = 0;
        if (needs_fa) {
            if (m->fa_recipe == recipe)
                cj->fa = m->fa_id;
            else if ((rc = fa_id(r, u, recipe, &cj->fa)))
                return ft_err_set(err, rc, "replay: out of memory");
        }
        cj->tok = (uint8_t)(token_class(fl, TOKENS[i]) | (f < m->n_ops) << 2);
        /* the fresh plan's raise, counted for the calls the filter matches */
        r->fraise[j] = m->raises[k][cj->tok] &&
                       fresh_raise(r, m, k, u, recipe, f, cj->tok, TOKENS[i], !filt || cj->match);
        cj->cap = (uint8_t)((fl & FT_CF_HAS_REBUILT) >> 5 | (fl & FT_CF_REBUILT) >> 2);
        any_cap |= cj->cap;
        if ((fl & FT_CF_HAS_REBUILT) && (fl & FT_CF_HAS_FUSE_NS) && b->fuse_ns[i] >= 0) {
            if (fl & FT_CF_REBUILT) {
                r->base.cap_build_n++;
                r->base.cap_build_fuse_ns += (uint64_t)b->fuse_ns[i];
            } else {
                r->base.cap_hit_n++;
                r->base.cap_hit_fuse_ns += (uint64_t)b->fuse_ns[i];
            }
        }
        cj->sb = FT_NO_SB;
        if ((fl & FT_CF_HAS_STEP) && STEP[i] >= 0 && cj->match) {
            if ((STEP[i] >> shift) >= FT_STEP_BUCKETS) {
                step_widen(r, STEP[i], j, max_sb);
                while ((INT64_C(1) << shift) < r->step_width)
                    shift++;
                max_sb = r->step_calls.n;
            }
            const uint32_t sb = (uint32_t)(STEP[i] >> shift);
            cj->sb = (uint16_t)sb;
            step_calls[sb]++;
            if (sb + 1 > max_sb) max_sb = sb + 1;
        }
        j++;
        continue;
    bad:
        return ft_err_set(err, FT_ECORRUPT,
                          "chunk %llu, seq %lld: fuser %u / recipe %d / first_rg %u out of range",
                          (unsigned long long)b->chunk_id, (long long)b->seq[i], u, recipe, FRG[i]);
    }
    if (max_sb > r->step_calls.n) r->step_calls.n = max_sb;
    for (uint32_t p = 0; p < r->n_pol; p++)
        if (max_sb > r->pol[p].res.steps.n) r->pol[p].res.steps.n = max_sb;
    r->n_calls = j;
    r->any_cap = any_cap != 0;
    r->base.calls += filt ? counted : j;
    r->base.backwards += n_bwd;
    return FT_OK;
}

static int oracle_plain(ft_replay *r, const ft_batch *b, ft_err *err)
{
    return oracle_pass(r, b, err, 0);
}

static int oracle_filtered(ft_replay *r, const ft_batch *b, ft_err *err)
{
    return oracle_pass(r, b, err, 1);
}

/* ---- the view ------------------------------------------------------------------------------ */
/* What differs between the fuser's previous call (recipe pr, boundary pf) and this one. */
static uint16_t changes(const ft_replay *r, int32_t pr, uint32_t pf, int32_t recipe, uint32_t f)
{
    if (pr == -2) return FT_WHY_FIRST;
    const rinfo *a = &r->ri[pr + 1], *c = &r->ri[recipe + 1];
    unsigned w = 0;
    if (a->type != c->type) w |= FT_WHY_TYPE;
    if (pf != f) w |= FT_WHY_F;
    if (a->bo != c->bo) w |= FT_WHY_BO;
    if (a->type == c->type && a->hist != c->hist) w |= FT_WHY_HIST;
    if (a->type == c->type && a->bo == c->bo && a->hist == c->hist && a->hash_id != c->hash_id)
        w |= FT_WHY_ATTRS;
    if (a->hash_id == c->hash_id && a->obj_id != c->obj_id) w |= FT_WHY_OBJECT;
    return (uint16_t)w;
}

/* The build whose plan each call of policy slot p runs: the call itself when it builds, else the
 * last build under the key it hit (src_map[p]: store key -> entry of src). */
static int fill_sources(ft_replay *r, uint32_t p)
{
    const uint32_t n = r->n_calls;
    const size_t o = (size_t)p * r->cap_batch;
    const uint8_t *dec = r->rec + o;
    const uint64_t *key = r->rec_key + o;
    ft_hmap *map = &r->src_map[p];
    for (uint32_t j = 0; j < n; j++) {
        const ccall *cj = &r->cc[j];
        const int64_t seq = r->v_seq[j];
        if (dec[j] & FT_DEC_BUILD) {
            r->src_r[o + j] = cj->recipe;
            r->src_f[o + j] = cj->f;
            r->src_seq[o + j] = seq;
            uint32_t e = ft_hmap_get(map, key[j]);
            if (e == UINT32_MAX) {
                if (r->n_src == r->cap_src) {
                    uint32_t cap = r->cap_src ? 2 * r->cap_src : 64;
                    struct src_build *ns = ft_realloc(r->src, (size_t)cap * sizeof *ns);
                    if (!ns) return FT_ENOMEM;
                    r->src = ns;
                    r->cap_src = cap;
                }
                e = r->n_src++;
                if (ft_hmap_put(map, key[j], e)) return FT_ENOMEM;
            }
            r->src[e] = (struct src_build){cj->recipe, cj->f, seq};
        } else {
            const uint32_t e = ft_hmap_get(map, key[j]);
            /* a hit follows a build under its key in this replay */
            const struct src_build b =
                e != UINT32_MAX ? r->src[e] : (struct src_build){cj->recipe, cj->f, seq};
            r->src_r[o + j] = b.recipe;
            r->src_f[o + j] = b.f;
            r->src_seq[o + j] = b.seq;
        }
    }
    return FT_OK;
}

/* What changed per call since the previous call of its OperationFuser, why each build happened,
 * and the builds whose plans the calls run (call order: the previous call is the one before it
 * in the trace). */
static int fill_causes(ft_replay *r)
{
    const uint32_t n = r->n_calls, cap = r->cap_batch;
    for (uint32_t j = 0; j < n; j++) {
        const ccall *cj = &r->cc[j];
        slot_info *m = &r->slot[cj->slot];
        if (cj->fresh_slot) m->prev_seen = 0; /* a slot reused within the batch */
        r->prev_r[j] = m->prev_seen ? m->prev_recipe : -2;
        r->prev_f[j] = m->prev_f;
        uint16_t w = changes(r, r->prev_r[j], m->prev_f, cj->recipe, cj->f);
        if (m->prev_seen && m->prev_fuser != cj->fuser) w |= FT_WHY_OPS;
        r->changed[j] = w;
        m->prev_seen = 1;
        m->prev_recipe = cj->recipe;
        m->prev_f = cj->f;
        m->prev_fuser = cj->fuser;
    }
    for (uint32_t p = 0; p < r->n_pol; p++) {
        const uint8_t *dec = r->rec + (size_t)p * cap;
        uint16_t *why = r->rec_why + (size_t)p * cap;
        for (uint32_t j = 0; j < n; j++)
            why[j] = !(dec[j] & FT_DEC_BUILD) ? 0
                     : r->changed[j]          ? r->changed[j]
                                              : (uint16_t)FT_WHY_NOT_CACHED;
        if (fill_sources(r, p)) return FT_ENOMEM;
    }
    return FT_OK;
}

/* The batch's call columns, and with causes what changed per call and why each build happened. */
static int fill_view(ft_replay *r, const ft_batch *b)
{
    const uint32_t n = r->n_calls, cap = r->cap_batch;
    ft_replay_view *v = &r->view;
    for (uint32_t j = 0; j < n; j++) {
        const ccall *cj = &r->cc[j];
        const uint32_t i = cj->i, fl = b->flags[i];
        r->v_row[j] = i;
        r->v_seq[j] = b->seq[i];
        r->v_fuser[j] = cj->fuser;
        r->v_sid[j] = b->sid ? b->sid[i] : r->fusers[cj->fuser].id;
        r->v_recipe[j] = cj->recipe;
        r->v_step[j] = (fl & FT_CF_HAS_STEP) ? b->step[i] : -1;
        r->v_phase[j] = (fl & FT_CF_HAS_PHASE) && b->phase[i] >= 0 ? b->phase[i] : -1;
        r->v_f[j] = cj->f;
        r->v_fresh[j] = cj->fresh;
        r->v_fresh_q[j] = r->ri[cj->recipe + 1].fresh_q;
        r->v_ntok[j] = b->n_tokens[i];
        r->v_match[j] = cj->match;
        if (b->splits_off) r->v_soff[j] = b->splits_off[i];
    }
    /* backward records hold no split sizes: the calls' ranges are contiguous */
    if (b->splits_off) r->v_soff[n] = b->splits_off[b->n];
    if (r->causes && fill_causes(r)) return FT_ENOMEM;
    *v = (ft_replay_view){.engine = r,
                          .batch = b,
                          .n = n,
                          .row = r->v_row,
                          .seq = r->v_seq,
                          .fuser = r->v_fuser,
                          .sid = r->v_sid,
                          .recipe = r->v_recipe,
                          .step = r->v_step,
                          .phase = r->v_phase,
                          .f = r->v_f,
                          .fresh = r->v_fresh,
                          .fresh_q = r->v_fresh_q,
                          .n_tokens = r->v_ntok,
                          .match = r->filt ? r->v_match : NULL,
                          .splits_off = b->splits_off ? r->v_soff : NULL,
                          .splits = b->splits_off ? b->splits : NULL,
                          .prev_recipe = r->causes ? r->prev_r : NULL,
                          .prev_f = r->causes ? r->prev_f : NULL,
                          .changed = r->causes ? r->changed : NULL,
                          .fresh_raises = r->fraise,
                          .n_pol = r->n_pol};
    for (uint32_t p = 0; p < r->n_pol; p++) {
        const size_t o = (size_t)p * cap;
        v->pol[p] = (ft_view_policy){.policy = r->pol[p].idx,
                                     .dec = r->rec + o,
                                     .plan = r->rec_plan + o,
                                     .stale = r->rec_stale + o,
                                     .q = r->rec_q + o,
                                     .why = r->causes ? r->rec_why + o : NULL,
                                     .src_recipe = r->causes ? r->src_r + o : NULL,
                                     .src_f = r->causes ? r->src_f + o : NULL,
                                     .src_seq = r->causes ? r->src_seq + o : NULL};
    }
    return FT_OK;
}

int ft_replay_batch(ft_replay *r, const ft_batch *b, const ft_replay_view **view, ft_err *err)
{
    ft_err local;
    if (!err) err = &local;
    if (view) *view = NULL;
    int rc = ensure_scratch(r, b->n);
    if (!rc) rc = filter_phases(r, b);
    if (rc) return ft_err_set(err, rc, "replay: out of memory");
    uint64_t t0 = ft_now_ns();
    rc = r->filt ? oracle_filtered(r, b, err) : oracle_plain(r, b, err);
    if (rc) return rc;
    uint64_t t1 = ft_now_ns();
    r->base.oracle_ns += t1 - t0;
    for (uint32_t p = 0; p < r->n_pol; p++) {
        rc = r->pol[p].def->loop_fn(r, p, b, err);
        if (rc) return rc;
        uint64_t t2 = ft_now_ns();
        r->pol[p].res.loop_ns += t2 - t1;
        t1 = t2;
    }
    if (r->rec_on) {
        if (fill_view(r, b)) return ft_err_set(err, FT_ENOMEM, "replay: out of memory");
        if (view) *view = &r->view;
    }
    return FT_OK;
}

const ft_qstate *ft_replay_qstate(const ft_replay *r, uint32_t id)
{
    return id < r->n_qs ? &r->qs[id] : NULL;
}

const ft_fuser_def *ft_replay_fuser(const ft_replay *r, uint32_t fuser)
{
    return fuser < r->n_fusers ? &r->fusers[fuser] : NULL;
}

const ft_model *ft_replay_model(const ft_replay *r)
{
    return r->model;
}

uint32_t ft_replay_policies(const ft_replay *r, const uint32_t **idx)
{
    *idx = r->pol_idx;
    return r->n_pol;
}

void ft_replay_get(const ft_replay *r, ft_replay_result *out)
{
    *out = r->base;
    out->n_fusers = r->n_fusers + r->n_compact;
    out->fusers_alive_max = r->max_live;
    for (int k = 0; k < FT_MAX_RAISE_TEXTS; k++)
        if (r->fresh_counts[k])
            replay_add_raise_text(out->fresh_raise_texts, r->fresh_texts[k], r->fresh_counts[k]);
    for (uint32_t p = 0; p < r->n_pol; p++) {
        ft_policy_result *d = &out->pol[p];
        *d = r->pol[p].res;
        d->calls = 0;
        for (int k = 0; k < FT_STALE_COUNT; k++)
            d->calls += d->stale[k];
        d->hits = d->calls - d->builds;
        d->evictions = r->pol[p].store.evictions;
        /* the loop counted builds per step bucket; hits = calls - builds */
        for (uint32_t k = 0; k < d->steps.n; k++) {
            d->steps.calls[k] = r->step_calls.calls[k];
            d->steps.hits[k] = r->step_calls.calls[k] - d->steps.hits[k];
        }
        for (uint32_t c = 0; c < r->n_cm; c++)
            if (r->cm[c].stale == FT_STALE_RAISES && r->cm[c].count[p])
                replay_add_raise_text(d->raises, r->cm[c].text, r->cm[c].count[p]);
    }
    slots_groups_result(r, out);
}
