/*
 * policy.c - the policy registry: one row per plan-cache policy (README, "The policies").
 *
 * A policy is a reset rule (when reset_recipe_state runs), a key function and a store, plus what
 * the reports say of it: a one-line summary, a note for the policies that are not candidates
 * like the others (historical, baseline), and the TE ref whose plan cache it reproduces (the
 * captured run's policy is found through it). The rules
 * for te-pre3410 and te-3410 follow TE's OperationFuser.maybe_fuse_ops exactly
 * (docs/fuser-model.md, "The plan cache"): the initial recipe_type is None (FT_NEVER), which
 * differs from NoneType (no recipe, FT_RT_NONE), so every fuser resets on its first call;
 * DelayedScaling's amax_history_len joins the reset rule. Adding a policy: write its reset and key
 * functions and one line in POLICIES below, then regenerate the goldens (traces/README.md: they
 * are matched by policy name, so the other policies' lines stay as they are) and the demo tables
 * of the docs (tests/test_docs_demo.sh --fix).
 */
#include "replayer_int.h"

#include <stdio.h>
#include <string.h>

/* ---- keys ---------------------------------------------------------------------------------- */
static inline uint64_t with_f(int32_t id, uint32_t f)
{
    return ((uint64_t)(uint32_t)id << FT_KEY_F_BITS) | f;
}

static uint64_t key_none(const rinfo *ri, const pcall *c)
{
    (void)ri;
    (void)c;
    return 0;
}

/* (type(recipe), f, backward_override) */
static uint64_t key_type_f_bo(const rinfo *ri, const pcall *c)
{
    return with_f(ri->tb_id, c->f);
}

/* (type(recipe), backward_override): PR 3410's first commit dropped f */
static uint64_t key_type_bo(const rinfo *ri, const pcall *c)
{
    (void)c;
    return (uint64_t)(uint32_t)ri->tb_id << FT_KEY_F_BITS;
}

/* (hash of type and every attribute, f) */
static uint64_t key_hash_f(const rinfo *ri, const pcall *c)
{
    return with_f(ri->hash_id, c->f);
}

/* (object identity, f, backward_override) */
static uint64_t key_obj_f_bo(const rinfo *ri, const pcall *c)
{
    return with_f(ri->objbo_id, c->f);
}

/* (the attributes the fusion rules read, f) */
static uint64_t key_fusion_attrs_f(const rinfo *ri, const pcall *c)
{
    (void)ri;
    return with_f(c->fa_id, c->f);
}

/* ---- reset rules --------------------------------------------------------------------------- */
static int hist_changed(const pstate *s, const rinfo *ri)
{
    return ri->delayed && s->saved_hist != ri->hist;
}

static int reset_always(pstate *s, const rinfo *ri, const pcall *c)
{
    (void)c;
    s->saved_a = ri->tb_id;
    s->saved_hist = ri->hist;
    return 1;
}

/* OLD: reset when (type, f, bo) or the delayed history length changes. */
static int reset_te_pre3410(pstate *s, const rinfo *ri, const pcall *c)
{
    if (s->saved_a == ri->tb_id && s->saved_f == (int32_t)c->f && !hist_changed(s, ri)) return 0;
    s->saved_a = ri->tb_id;
    s->saved_f = (int32_t)c->f;
    s->saved_hist = ri->hist;
    return 1;
}

/* NEW and commit 1: reset when (type, bo) or the delayed history length changes. */
static int reset_type_bo(pstate *s, const rinfo *ri, const pcall *c)
{
    (void)c;
    if (s->saved_a == ri->tb_id && !hist_changed(s, ri)) return 0;
    s->saved_a = ri->tb_id;
    s->saved_hist = ri->hist;
    return 1;
}

/* recipe-hash, fusion-attrs: reset when the recipe's full hash changes. */
static int reset_hash(pstate *s, const rinfo *ri, const pcall *c)
{
    (void)c;
    if (s->saved_a == ri->hash_id) return 0;
    s->saved_a = ri->hash_id;
    s->saved_hist = ri->hist;
    return 1;
}

/* recipe-object: reset when the object identity changes. */
static int reset_obj(pstate *s, const rinfo *ri, const pcall *c)
{
    (void)c;
    if (s->saved_a == ri->obj_id) return 0;
    s->saved_a = ri->obj_id;
    s->saved_hist = ri->hist;
    return 1;
}

/* ---- the registry: one line per policy ------------------------------------------------------
 * id, name, reset rule, key, store, build on every reset (single slot), reads the fusion-attrs
 * id, the TE ref it reproduces (NO_REF: none), the reports' note (NULL: none), summary. Each line
 * instantiates the engine's loop with its functions inlined (LOOP) and is one row of the table
 * (ROW). */
#define NO_REF (-1)
#define POLICIES(X)                                                                                \
    X(rebuild_always, "rebuild-always", reset_always, key_none, FT_STORE_NONE, 1, 0, NO_REF,       \
      "baseline: no plan cache", "no key; reset and build on every call; no store")                \
    X(te_pre3410, "te-pre3410", reset_te_pre3410, key_type_f_bo, FT_STORE_SINGLE, 1, 0,            \
      FT_TE_PRE3410, NULL,                                                                         \
      "TE before PR 3410: key (type, f, bo); reset+build when it or amax_history_len changes; "    \
      "single slot")                                                                               \
    X(te_3410, "te-3410", reset_type_bo, key_type_f_bo, FT_STORE_DICT, 0, 0, FT_TE_3410, NULL,     \
      "TE PR 3410: key (type, f, bo); reset when (type, bo) or amax_history_len changes; dict")    \
    X(te_3410_commit1, "te-3410-commit1", reset_type_bo, key_type_bo, FT_STORE_SINGLE, 1, 0,       \
      FT_TE_3410_COMMIT1, "historical: PR 3410's first commit, never released",                    \
      "PR 3410 first commit: key (type, bo); reset+build when it or amax_history_len changes; "    \
      "single slot")                                                                               \
    X(recipe_hash, "recipe-hash", reset_hash, key_hash_f, FT_STORE_DICT, 0, 0, NO_REF, NULL,       \
      "key (hash of type and every recipe attribute, f); reset when the hash changes; dict")       \
    X(recipe_object, "recipe-object", reset_obj, key_obj_f_bo, FT_STORE_DICT, 0, 0, NO_REF, NULL,  \
      "key (recipe object identity, f, bo); reset when the identity changes; dict")                \
    X(fusion_attrs, "fusion-attrs", reset_hash, key_fusion_attrs_f, FT_STORE_DICT, 0, 1, NO_REF,   \
      NULL,                                                                                        \
      "key (exactly the recipe/op/env attributes the fusion rules read, f); reset when the "       \
      "recipe hash changes; dict")                                                                 \
    X(shared_oplist, "shared-oplist", reset_type_bo, key_type_f_bo, FT_STORE_SHARED, 0, 0, NO_REF, \
      "what-if: plans kept across fusers by op-list signature, which no TE does",                  \
      "key (op-list signature, type, f, bo): one dict per op list, shared by every fuser with "    \
      "those ops; each fuser resets when (type, bo) or amax_history_len changes")

/* The loop, specialised by whether the batch records a view (rec) and whether a filter decides
 * which calls count (filt). */
#define LOOP(id, name_, reset, key, store_, build_on_reset, reads_fa, ref_, note_, summary_)       \
    static int loop_##id(ft_replay *r, uint32_t p, const ft_batch *b, ft_err *err)                 \
    {                                                                                              \
        if (r->rec_on && r->filt)                                                                  \
            return policy_loop(r, p, b, err, reset, key, store_, build_on_reset, 1, 1);            \
        if (r->rec_on) return policy_loop(r, p, b, err, reset, key, store_, build_on_reset, 1, 0); \
        if (r->filt) return policy_loop(r, p, b, err, reset, key, store_, build_on_reset, 0, 1);   \
        return policy_loop(r, p, b, err, reset, key, store_, build_on_reset, 0, 0);                \
    }
POLICIES(LOOP)

#define ROW(id, name_, reset, key, store_, build_on_reset, reads_fa, ref_, note_, summary_)        \
    {.name = name_,                                                                                \
     .summary = summary_,                                                                          \
     .note = note_,                                                                                \
     .te_ref = ref_,                                                                               \
     .needs_fa = reads_fa,                                                                         \
     .store = store_,                                                                              \
     .loop_fn = loop_##id},
static const policy_def policies[] = {POLICIES(ROW)};

const policy_def *ft_policy_def(uint32_t idx)
{
    return idx < FT_ARRAY_LEN(policies) ? &policies[idx] : NULL;
}

uint32_t ft_policy_count(void)
{
    return (uint32_t)FT_ARRAY_LEN(policies);
}

const char *ft_policy_name(uint32_t idx)
{
    return idx < FT_ARRAY_LEN(policies) ? policies[idx].name : NULL;
}

const char *ft_policy_summary(uint32_t idx)
{
    return idx < FT_ARRAY_LEN(policies) ? policies[idx].summary : NULL;
}

const char *ft_policy_note(uint32_t idx)
{
    return idx < FT_ARRAY_LEN(policies) ? policies[idx].note : NULL;
}

int ft_policy_of_te_ref(ft_te_ref ref)
{
    for (uint32_t i = 0; i < FT_ARRAY_LEN(policies); i++)
        if (policies[i].te_ref == (int)ref) return (int)i;
    return -1;
}

static int find_n(const char *name, size_t len, uint32_t *idx)
{
    for (uint32_t i = 0; i < FT_ARRAY_LEN(policies); i++)
        if (strlen(policies[i].name) == len && !strncmp(policies[i].name, name, len)) {
            *idx = i;
            return 1;
        }
    return 0;
}

static int not_found(const char *name, size_t len, ft_err *err)
{
    char known[256];
    size_t off = 0;
    known[0] = '\0';
    for (uint32_t i = 0; i < FT_ARRAY_LEN(policies) && off < sizeof known; i++)
        off += (size_t)snprintf(known + off, sizeof known - off, "%s%s", i ? ", " : "",
                                policies[i].name);
    return ft_err_set(err, FT_ENOTFOUND, "unknown policy '%.*s' (known: %s, or all)", (int)len,
                      name, known);
}

int ft_policy_find(const char *name, uint32_t *idx, ft_err *err)
{
    if (find_n(name, strlen(name), idx)) return FT_OK;
    return not_found(name, strlen(name), err);
}

int ft_policy_parse_list(const char *list, uint32_t *idx, uint32_t *n, ft_err *err)
{
    *n = 0;
    if (!strcmp(list, "all")) {
        for (uint32_t i = 0; i < FT_ARRAY_LEN(policies); i++)
            idx[(*n)++] = i;
        return FT_OK;
    }
    const char *p = list;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        uint32_t k;
        if (!len) return ft_err_set(err, FT_EINVAL, "empty policy name in '%s'", list);
        if (!find_n(p, len, &k)) return not_found(p, len, err);
        for (uint32_t j = 0; j < *n; j++)
            if (idx[j] == k)
                return ft_err_set(err, FT_EINVAL, "policy '%.*s' given twice", (int)len, p);
        if (*n >= FT_MAX_POLICIES) return ft_err_set(err, FT_ERANGE, "too many policies");
        idx[(*n)++] = k;
        if (!end) break;
        p = end + 1;
    }
    return FT_OK;
}
