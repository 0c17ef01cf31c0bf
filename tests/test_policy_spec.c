/*
 * test_policy_spec.c - policies as specs (replayer/policy_spec.c, docs/policies.md).
 *
 * - Equivalence: every built-in policy's spec (its row's, ft_policy_spec), defined as a user
 *   policy, decides every call as the built-in's C functions do: build and reset, the plan, the
 *   stale class and the quantizer state, per call, and every count; on every canned trace in
 *   traces/ and on synth runs of every scenario (two seeds, default keys), unbounded and with
 *   --capacity 2 (the user spec then says lru:2 where the built-in's dict takes the capacity; a
 *   shared store takes it in both).
 * - The parser: the vocabulary, the defaults, canonical forms, and errors that name the clause
 *   and list the vocabulary; the JSON form; the registry's bounds and names.
 * - What a user policy decides on a trace built for it (the three worked examples of
 *   docs/policies.md on synth rht-switch).
 * - The command line: a user policy in every output, --fail-on, --timeline (the trace event
 *   format's rules and the replay's counts); the fuzz corpus of specs (tests/fuzz/fuzz_policy.c).
 */
#define _POSIX_C_SOURCE 200809L
#define FT_FUZZ_REPLAY  1
#include "fuzz/fuzz_policy.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ft_recorder.h"
#include "ft_replayer.h"
#include "ft_synth.h"
#include "test_util.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int teardown(void **state)
{
    (void)state;
    ft_policy_forget_user();
    return 0;
}

/* ---- traces -----------------------------------------------------------------------------------
 */
static void trace_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/test_policy_spec_%s_%ld.ftdb", FT_BINARY_DIR, name, (long)getpid());
    remove(out);
}

/* traces/NAME.jsonl into a trace file; 0 when the model refuses the stream (none today). */
static void import_canned(const char *file, char *out, size_t cap)
{
    char src[1024];
    snprintf(src, sizeof src, "%s/traces/%s", FT_SOURCE_DIR, file);
    trace_path(out, cap, file);
    FILE *in = fopen(src, "r");
    assert_non_null(in);
    ft_rec *rec = NULL;
    ft_err err = {0};
    ft_rec_opts ro = {7, 0}; /* small chunks: many batches */
    assert_int_equal(ft_rec_open(out, &ro, &rec, &err), FT_OK);
    ft_sink sink;
    ft_rec_sink(rec, &sink);
    int rc = ft_jsonl_import(in, src, &sink, NULL, &err);
    fclose(in);
    if (rc) fail_msg("%s: %s", src, ft_err_msg(&err));
    assert_int_equal(ft_rec_close(rec), FT_OK);
}

static void synth_trace(const char *scenario, uint64_t seed, char *out, size_t cap)
{
    char name[128];
    snprintf(name, sizeof name, "%s_%llu", scenario, (unsigned long long)seed);
    trace_path(out, cap, name);
    ft_rec *rec = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(out, NULL, &rec, &err), FT_OK);
    ft_sink sink;
    ft_rec_sink(rec, &sink);
    int rc = ft_synth_run(scenario, NULL, 0, seed, &sink, &err);
    if (rc)
        fail_msg("synth %s seed %llu: %s", scenario, (unsigned long long)seed, ft_err_msg(&err));
    assert_int_equal(ft_rec_close(rec), FT_OK);
}

/* ---- equivalence ------------------------------------------------------------------------------
 */
/* Replay path under the built-ins and their specs as user policies (slot k + n_b is built-in k's
 * spec) and compare every call's decisions and every count; returns the calls compared. */
static uint64_t compare_on(const char *path, const uint32_t *pol, uint32_t n_b, uint32_t capacity)
{
    ft_trace *t = NULL;
    ft_err err = {0};
    if (ft_trace_open(path, FT_OPEN_READ, &t, &err)) fail_msg("%s: %s", path, ft_err_msg(&err));
    ft_replay_opts o = {
        .policies = pol, .n_policies = 2 * n_b, .capacity = capacity, .needs = FT_VIEW_DECISIONS};
    ft_replay_cursor *c = NULL;
    if (ft_replay_cursor_open(t, &o, &c, &err)) fail_msg("%s: %s", path, ft_err_msg(&err));
    uint64_t calls = 0;
    for (int more = 1; more;) {
        const ft_replay_view *v = NULL;
        if (ft_replay_cursor_next(c, &v, &more, &err)) fail_msg("%s: %s", path, ft_err_msg(&err));
        if (!more) break;
        for (uint32_t k = 0; k < n_b; k++) {
            const ft_view_policy *a = &v->pol[k], *b = &v->pol[k + n_b];
            for (uint32_t j = 0; j < v->n; j++)
                if (a->dec[j] != b->dec[j] || a->plan[j] != b->plan[j] ||
                    a->stale[j] != b->stale[j] || a->q[j] != b->q[j])
                    fail_msg("%s (capacity %u): seq %lld: %s decides build/reset %u plan %u stale "
                             "%u q %u, its spec '%s' %u %u %u %u",
                             path, capacity, (long long)v->seq[j], ft_policy_name(a->policy),
                             a->dec[j], a->plan[j], a->stale[j], a->q[j], ft_policy_spec(b->policy),
                             b->dec[j], b->plan[j], b->stale[j], b->q[j]);
        }
        calls += v->n;
    }
    ft_replay_result res;
    ft_replay_cursor_result(c, &res);
    for (uint32_t k = 0; k < n_b; k++) {
        const ft_policy_result *a = &res.pol[k], *b = &res.pol[k + n_b];
        assert_int_equal(a->calls, b->calls);
        assert_int_equal(a->builds, b->builds);
        assert_int_equal(a->resets, b->resets);
        assert_int_equal(a->qdrift, b->qdrift);
        assert_int_equal(a->max_entries, b->max_entries);
        assert_int_equal(a->evictions, b->evictions);
        assert_int_equal(a->cap_agree, b->cap_agree);
        for (int s = 0; s < FT_STALE_COUNT; s++)
            assert_int_equal(a->stale[s], b->stale[s]);
        for (int s = 0; s < FT_MAX_RAISE_TEXTS; s++)
            assert_int_equal(a->raises[s].count, b->raises[s].count);
    }
    ft_replay_cursor_close(c);
    ft_trace_close(t);
    return calls;
}

/* The built-ins, then each one's spec as a user policy ("spec-NAME"); with capacity, dict specs
 * say lru:capacity. */
static uint32_t define_specs(uint32_t *pol, uint32_t capacity)
{
    const uint32_t n_b = ft_policy_builtin_count();
    assert_true(2 * n_b <= FT_MAX_POLICIES);
    ft_policy_forget_user();
    for (uint32_t k = 0; k < n_b; k++) {
        char def[512], spec[400];
        ft_strlcpy(spec, ft_policy_spec(k), sizeof spec);
        char *d = strstr(spec, "store=dict");
        if (capacity && d) {
            char rest[400];
            ft_strlcpy(rest, d + strlen("store=dict"), sizeof rest);
            snprintf(d, sizeof spec - (size_t)(d - spec), "store=lru:%u%s", capacity, rest);
        }
        snprintf(def, sizeof def, "spec-%s=%s", ft_policy_name(k), spec);
        ft_err err = {0};
        pol[k] = k;
        if (ft_policy_define(def, &pol[k + n_b], &err)) fail_msg("%s: %s", def, ft_err_msg(&err));
        assert_string_equal(ft_policy_label(pol[k + n_b]), "user-defined");
    }
    return n_b;
}

static uint64_t compare_both(const char *path)
{
    uint32_t pol[FT_MAX_POLICIES];
    uint32_t n_b = define_specs(pol, 0);
    uint64_t calls = compare_on(path, pol, n_b, 0);
    n_b = define_specs(pol, 2);
    compare_on(path, pol, n_b, 2);
    return calls;
}

static void test_builtin_specs_match_on_canned_traces(void **state)
{
    (void)state;
    DIR *d = opendir(FT_SOURCE_DIR "/traces");
    assert_non_null(d);
    struct dirent *de;
    int n = 0;
    uint64_t calls = 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 7 || strcmp(de->d_name + len - 6, ".jsonl")) continue;
        char path[1024];
        import_canned(de->d_name, path, sizeof path);
        calls += compare_both(path);
        ft_trace_remove(path);
        n++;
    }
    closedir(d);
    assert_true(n >= 12); /* every canned trace: none is skipped */
    assert_true(calls > 100);
    printf("# %d canned traces, %llu calls: every built-in's spec decides as it does\n", n,
           (unsigned long long)calls);
}

static void test_builtin_specs_match_on_every_synth_scenario(void **state)
{
    (void)state;
    const uint32_t n_sc = ft_synth_n_scenarios();
    assert_true(n_sc > 0);
    uint64_t calls = 0;
    for (uint32_t i = 0; i < n_sc; i++)
        for (uint64_t seed = 1; seed <= 2; seed++) {
            char path[1024];
            synth_trace(ft_synth_scenario_at(i)->name, seed, path, sizeof path);
            uint64_t c = compare_both(path);
            assert_true(c > 0);
            calls += c;
            ft_trace_remove(path);
        }
    printf("# %u synth scenarios x 2 seeds, %llu calls: every built-in's spec decides as it does\n",
           n_sc, (unsigned long long)calls);
}

/* ---- the parser --------------------------------------------------------------------------------
 */
static void expect_error(const char *def, const char *want1, const char *want2)
{
    uint32_t idx;
    ft_err err = {0};
    int rc = ft_policy_define(def, &idx, &err);
    if (rc == FT_OK) fail_msg("'%s' was accepted", def);
    if (!strstr(err.msg, want1) || (want2 && !strstr(err.msg, want2)))
        fail_msg("'%s': message '%s' lacks '%s' or '%s'", def, err.msg, want1, want2 ? want2 : "");
}

static void test_spec_parse_forms_and_errors(void **state)
{
    (void)state;
    uint32_t idx, again;
    ft_err err = {0};
    /* the form: key first, defaults for the rest */
    assert_int_equal(ft_policy_define("mine=type+f+bo+attr:disable_rht;store=dict", &idx, &err),
                     FT_OK);
    assert_int_equal(idx, ft_policy_builtin_count());
    assert_string_equal(ft_policy_name(idx), "mine");
    assert_string_equal(ft_policy_spec(idx), "type+f+bo+attr:disable_rht;store=dict;reset=te:3410");
    assert_string_equal(ft_policy_label(idx), "user-defined");
    assert_null(ft_policy_note(idx));
    assert_non_null(strstr(ft_policy_summary(idx), "reset when (type+bo+hist) changes (te:3410)"));
    /* found by name like a built-in, the same definition again is the same policy */
    assert_int_equal(ft_policy_find("mine", &again, &err), FT_OK);
    assert_int_equal(again, idx);
    assert_int_equal(
        ft_policy_define("mine = key=type+f+bo+attr:disable_rht ; store = dict", &again, &err),
        FT_OK);
    assert_int_equal(again, idx);
    assert_int_equal(ft_policy_count(), ft_policy_builtin_count() + 1);
    /* every clause */
    assert_int_equal(
        ft_policy_define("b=key=none;store=lru:4;reset=always;build=reset", &idx, &err), FT_OK);
    assert_string_equal(ft_policy_spec(idx), "none;store=lru:4;reset=always;build=reset");
    assert_int_equal(ft_policy_define("c=fusion+device+ops+env:NVTE_X+object;store=single;"
                                      "reset=key",
                                      &idx, &err),
                     FT_OK);
    assert_string_equal(ft_policy_spec(idx),
                        "fusion+device+ops+env:NVTE_X+object;store=single;reset=key");
    assert_int_equal(
        ft_policy_define("d=hash;reset= hist + bo+attr:fp8_format ;store=none", &idx, &err), FT_OK);
    assert_string_equal(ft_policy_spec(idx), "hash;store=none;reset=hist+bo+attr:fp8_format");
    assert_int_equal(ft_policy_define("e=type+f+bo;store=shared-lru:3", &idx, &err), FT_OK);
    assert_string_equal(ft_policy_spec(idx), "type+f+bo;store=shared-lru:3;reset=te:3410");
    assert_non_null(strstr(ft_policy_summary(idx), "shared by op list, LRU of 3"));
    /* errors name the clause or field and list the vocabulary */
    expect_error("x=typo+f", "unknown key field 'typo'", "type, object, hash, attr:NAME");
    expect_error("x=type;reset=sometimes", "unknown reset field 'sometimes'", "te:pre3410");
    expect_error("x=type;reset=te:2.19", "unknown TE ref", "te:3410-commit1");
    expect_error("x=type;store=box", "unknown store 'box'", "lru:N");
    expect_error("x=type;store=lru:0", "lru:N wants N", NULL);
    expect_error("x=type;store=shared-lru:x", "shared-lru:N wants N", "per op list");
    expect_error("x=type;colour=red", "unknown clause 'colour=red'", "store=STORE");
    expect_error("x=type+attr:disable_rth", "no recipe type has an attribute 'disable_rth'",
                 "did you mean disable_rht?");
    expect_error("x=type+f+type", "field 'type' given twice", NULL);
    expect_error("x=type;store=dict;store=single", "store given twice", NULL);
    expect_error("x=type;build=often", "build 'often'", "reset");
    expect_error("x=store=dict", "no key", "fields joined by +");
    expect_error("x=", "no key", NULL);
    expect_error("x=none;reset=key", "reset=key with key none", NULL);
    expect_error("x=type;reset=none", "reset 'none'", "always");
    expect_error("x=type;;store=dict", "empty clause", NULL);
    expect_error("justaname", "has no '='", "NAME=KEY");
    expect_error("te-3410=type", "'te-3410' is a built-in", NULL);
    expect_error("all=type", "'all' is not a policy name", NULL);
    expect_error("a b=type", "cannot be in a policy name", NULL);
    expect_error("mine=type", "already defined as", "attr:disable_rht");
    expect_error("x=attr:", "wants a name", NULL);
    /* the registry is bounded: every policy can replay at once */
    char def[64];
    uint32_t n_user = ft_policy_count() - ft_policy_builtin_count();
    for (uint32_t k = n_user; k < FT_MAX_POLICIES - ft_policy_builtin_count(); k++) {
        snprintf(def, sizeof def, "p%u=type+f;store=lru:%u", k, k + 1);
        assert_int_equal(ft_policy_define(def, &idx, &err), FT_OK);
    }
    assert_int_equal(ft_policy_count(), FT_MAX_POLICIES);
    assert_int_equal(ft_policy_define("one-more=type", &idx, &err), FT_ERANGE);
    assert_non_null(strstr(err.msg, "at most"));
    ft_policy_forget_user();
    assert_int_equal(ft_policy_count(), ft_policy_builtin_count());
    assert_int_equal(ft_policy_find("mine", &idx, &err), FT_ENOTFOUND);
}

static void test_spec_lists_and_json(void **state)
{
    (void)state;
    uint32_t idx[FT_MAX_POLICIES], n, nb = ft_policy_builtin_count();
    ft_err err = {0};
    /* a list of definitions alone replays beside every built-in */
    assert_int_equal(
        ft_policy_parse_list("mine=type+f+bo+attr:disable_rht;store=dict", idx, &n, &err), FT_OK);
    assert_int_equal(n, nb + 1);
    assert_string_equal(ft_policy_name(idx[nb]), "mine");
    /* with a built-in named, only what is named */
    assert_int_equal(ft_policy_parse_list("te-3410,mine", idx, &n, &err), FT_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ft_policy_parse_list("all", idx, &n, &err), FT_OK);
    assert_int_equal(n, nb + 1);
    assert_int_equal(ft_policy_parse_list("mine,te-3410,mine", idx, &n, &err), FT_EINVAL);
    assert_non_null(strstr(err.msg, "given twice"));
    assert_int_equal(ft_policy_parse_list("nope", idx, &n, &err), FT_ENOTFOUND);
    assert_non_null(strstr(err.msg, "mine"));
    assert_non_null(strstr(err.msg, "define one"));

    /* JSON: spec strings, or the clauses as members (arrays of fields) */
    const char *doc =
        "{\"policies\": [{\"name\": \"j1\", \"spec\": \"hash+f;reset=hash\"},"
        " {\"name\": \"j2\", \"key\": [\"type\", \"attr:disable_rht\"],"
        "  \"store\": \"lru:2\", \"reset\": [\"type\", \"bo\"], \"build\": \"reset\"}]}";
    assert_int_equal(ft_policy_define_json(doc, strlen(doc), "p.json", idx, &n, &err), FT_OK);
    assert_int_equal(n, 2);
    assert_string_equal(ft_policy_spec(idx[0]), "hash+f;store=dict;reset=hash");
    assert_string_equal(ft_policy_spec(idx[1]),
                        "type+attr:disable_rht;store=lru:2;reset=type+bo;build=reset");
    static const struct {
        const char *doc, *want;
    } bad[] = {
        {"{\"policies\": [", "p.json:1: not valid JSON"},
        {"{\"rules\": []}", "wants {\"policies\": [...]}"},
        {"[]", "no policy in it"},
        {"[{\"name\": \"k\"}]", "policies[0] (k): \"key\" is missing"},
        {"[{\"name\": \"k\", \"key\": \"type\", \"colour\": 1}]", "unknown member \"colour\""},
        {"[{\"name\": \"k\", \"key\": 3}]", "\"key\" wants a string or an array"},
        {"[{\"key\": \"type\"}]", "policies[0]: \"name\" is missing"},
        {"[{\"name\": \"k\", \"spec\": \"type\", \"store\": \"dict\"}]", "goes alone"},
        {"[{\"name\": \"k\", \"key\": [\"type\", \"fx\"]}]",
         "policies[0] (k): policy spec 'k=key=type+fx': unknown key field 'fx'"},
    };
    for (size_t i = 0; i < FT_ARRAY_LEN(bad); i++) {
        assert_int_not_equal(
            ft_policy_define_json(bad[i].doc, strlen(bad[i].doc), "p.json", idx, &n, &err), FT_OK);
        if (!strstr(err.msg, bad[i].want))
            fail_msg("'%s': message '%s' lacks '%s'", bad[i].doc, err.msg, bad[i].want);
    }
}

/* ---- user policies decide ----------------------------------------------------------------------
 */
/* The worked examples of docs/policies.md on synth rht-switch: a type key restores the fused plan
 * after the MXFP8 detour and raises; adding disable_rht, hashing the object or keeping two plans
 * per fuser in an LRU changes that, as the doc says. */
static void test_worked_examples_on_rht_switch(void **state)
{
    (void)state;
    char path[1024];
    synth_trace("rht-switch", 7, path, sizeof path);
    uint32_t idx[FT_MAX_POLICIES], n;
    ft_err err = {0};
    assert_int_equal(ft_policy_parse_list("te-3410,fusion-attrs,"
                                          "type-rht=type+f+bo+attr:disable_rht;store=dict,"
                                          "hashed=hash+f+bo;store=dict;reset=hash,"
                                          "type-lru2=type+f+bo;store=lru:2",
                                          idx, &n, &err),
                     FT_OK);
    assert_int_equal(n, 5);
    ft_replay_result res;
    const char *paths[1] = {path};
    ft_replay_opts o = {.policies = idx, .n_policies = n};
    assert_int_equal(ft_replay_traces(paths, 1, &o, &res, &err), FT_OK);
    const ft_policy_result *te = &res.pol[0], *fa = &res.pol[1], *rht = &res.pol[2],
                           *hashed = &res.pol[3], *lru = &res.pol[4];
    assert_true(te->stale[FT_STALE_RAISES] > 0); /* the scenario's point */
    assert_int_equal(fa->calls - fa->stale[FT_STALE_NONE], 0);
    /* keying on disable_rht removes every stale plan, for more builds than the type key */
    assert_int_equal(rht->calls - rht->stale[FT_STALE_NONE], 0);
    assert_true(rht->builds > te->builds);
    /* the hashed object with a reset on the hash: never stale */
    assert_int_equal(hashed->calls - hashed->stale[FT_STALE_NONE], 0);
    /* an LRU of two plans per fuser under a type key evicts: the NVFP4 plans do not survive the
     * MXFP8 detour, so nothing raises, but other stale plans (other fusion) stay */
    assert_int_equal(lru->stale[FT_STALE_RAISES], 0);
    assert_true(lru->calls - lru->stale[FT_STALE_NONE] > 0);
    assert_int_equal(lru->max_entries, 2);
    assert_true(lru->evictions > 0);
    assert_true(lru->builds > te->builds);
    ft_trace_remove(path);
}

/* ---- build=reset on a dict and on the shared store ----------------------------------------------
 */
/* No built-in builds on every reset with a dict, so its reference is written out here: with the
 * key (type, f, bo) and a reset when the recipe hash changes (recipe-hash's rule, so that a
 * same-type switch such as disable_rht resets with its key held), a call builds when it resets or
 * its key is not held, a build puts the fresh plan under the key (replacing what was there), and a
 * hit runs the held plan.
 * Checked call by call for a per-fuser dict and for the shared store (the key's owner is the
 * op-list class), on traces whose fusers never end. */
typedef struct ref_entry {
    uint32_t owner, f;
    int type, bo;
    uint32_t plan;
} ref_entry;

/* Returns how many forced builds replaced a held plan by another one. */
static uint64_t check_build_on_reset(const char *path)
{
    uint32_t idx[FT_MAX_POLICIES], n;
    ft_err err = {0};
    assert_int_equal(ft_policy_parse_list("recipe-hash,bor-dict=type+f+bo;store=dict;reset=hash;"
                                          "build=reset,bor-shared=type+f+bo;store=shared;"
                                          "reset=hash;build=reset",
                                          idx, &n, &err),
                     FT_OK);
    assert_int_equal(n, 3);
    ft_trace *t = NULL;
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    ft_replay_opts o = {.policies = idx, .n_policies = n, .needs = FT_VIEW_DECISIONS};
    ft_replay_cursor *c = NULL;
    assert_int_equal(ft_replay_cursor_open(t, &o, &c, &err), FT_OK);
    static ref_entry ref[2][4096];
    uint32_t n_ref[2] = {0, 0};
    uint64_t forced = 0, replaced = 0;
    for (int more = 1; more;) {
        const ft_replay_view *v = NULL;
        assert_int_equal(ft_replay_cursor_next(c, &v, &more, &err), FT_OK);
        if (!more) break;
        const ft_model *m = ft_replay_model(v->engine);
        for (uint32_t j = 0; j < v->n; j++) {
            const ft_recipe_model *rm = ft_model_recipe(m, v->recipe[j]);
            const uint8_t te = v->pol[0].dec[j];
            for (int k = 0; k < 2; k++) {
                const ft_view_policy *vp = &v->pol[1 + k];
                const uint32_t owner = k ? ft_model_fuser_list(m, v->fuser[j]) : v->fuser[j];
                /* the reset rule: the same resets as recipe-hash */
                assert_int_equal(vp->dec[j] & FT_DEC_RESET, te & FT_DEC_RESET);
                ref_entry *e = NULL;
                for (uint32_t q = 0; q < n_ref[k] && !e; q++)
                    if (ref[k][q].owner == owner && ref[k][q].f == v->f[j] &&
                        ref[k][q].type == (int)rm->type && ref[k][q].bo == (int)rm->bo)
                        e = &ref[k][q];
                const int build = (te & FT_DEC_RESET) || !e;
                const int held = e != NULL;
                forced += (uint64_t)((te & FT_DEC_RESET) && held);
                if (!e) {
                    assert_true(n_ref[k] < 4096);
                    e = &ref[k][n_ref[k]++];
                    *e = (ref_entry){owner, v->f[j], (int)rm->type, (int)rm->bo, 0};
                }
                if (build && held && e->plan != v->fresh[j]) replaced++;
                if (build) e->plan = v->fresh[j];
                if (!!(vp->dec[j] & FT_DEC_BUILD) != build || vp->plan[j] != e->plan)
                    fail_msg("%s seq %lld, %s: build %d plan %u, the reference %d %u", path,
                             (long long)v->seq[j], ft_policy_name(vp->policy),
                             !!(vp->dec[j] & FT_DEC_BUILD), vp->plan[j], build, e->plan);
            }
        }
    }
    assert_true(forced > 0); /* some reset found its key held: the plan was rebuilt */
    ft_replay_cursor_close(c);
    ft_trace_close(t);
    ft_policy_forget_user();
    return replaced;
}

/* A fuser whose calls take every path of a build on reset: the key at the front cache's first
 * entry, at its second, and only in the store (the unbounded dict keeps two keys in front and
 * stores the rest), each with a plan to replace (NVFP4 with and without disable_rht). */
static void record_force_paths(const char *path)
{
    static const char *mlp =
        "[{\"attrs\":{\"bias\":false,\"dtype\":\"bfloat16\",\"in_features\":64,"
        "\"num_groups\":4,\"out_features\":256},\"type\":\"GroupedLinear\"},{\"attrs\":"
        "{\"glu_interleave_size\":32},\"type\":\"ScaledSwiGLU\"},{\"attrs\":{\"bias\":false,"
        "\"dtype\":\"bfloat16\",\"in_features\":128,\"num_groups\":4,\"out_features\":64},"
        "\"type\":\"GroupedLinear\"}]";
    ft_rec *rec = NULL;
    ft_err err = {0};
    remove(path);
    assert_int_equal(ft_rec_open(path, NULL, &rec, &err), FT_OK);
    ft_header h = {0};
    h.te_version = "2.20.2";
    h.env_json = "{\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\",\"cudnn_frontend\":\"1.27.0\","
                 "\"device_cc\":\"10.0\"}";
    h.extra_json = "{}";
    assert_int_equal(ft_rec_header(rec, &h), FT_OK);
    assert_int_equal(ft_rec_fuser(rec, 1, "mlp", mlp), FT_OK);
    assert_int_equal(ft_rec_recipe(rec, 1, "NVFP4BlockScaling", 11, "{\"disable_rht\":false}"),
                     FT_OK);
    assert_int_equal(ft_rec_recipe(rec, 2, "NVFP4BlockScaling", 12, "{\"disable_rht\":true}"),
                     FT_OK);
    assert_int_equal(ft_rec_recipe(rec, 3, "MXFP8BlockScaling", 13, "{}"), FT_OK);
    /* (recipe, grad): R1 R1 R2 R2 | R2n | R1 (front's second) R1n | M Mn | R2 (store) R2 R1n ... */
    static const int sched[][2] = {{1, 1}, {1, 1}, {2, 1}, {2, 1}, {2, 0}, {1, 1}, {1, 0},
                                   {3, 1}, {3, 0}, {2, 1}, {2, 1}, {1, 0}, {1, 1}, {2, 0},
                                   {3, 1}, {1, 0}, {2, 1}, {1, 1}, {1, 1}, {3, 0}};
    uint8_t rg[3] = {1, 0, 1};
    int64_t splits[4] = {32, 32, 32, 32};
    /* then 400 calls of a fixed pseudo-random walk over the three recipes and grad mode */
    uint64_t lcg = 7;
    for (size_t i = 0; i < FT_ARRAY_LEN(sched) + 400; i++) {
        int recipe = 0, grad = 0;
        if (i < FT_ARRAY_LEN(sched)) {
            recipe = sched[i][0];
            grad = sched[i][1];
        } else {
            lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
            recipe = 1 + (int)((lcg >> 33) % 3);
            grad = (int)((lcg >> 40) & 1);
        }
        ft_call c = {0};
        c.seq = (int64_t)i;
        c.fuser = 1;
        c.recipe = recipe;
        c.flags = FT_CF_HAS_RECIPE | FT_CF_INPUT_RG | FT_CF_HAS_SPLITS | FT_CF_HAS_STEP |
                  (grad ? FT_CF_GRAD : 0);
        c.n_op_rg = 3;
        c.op_rg = rg;
        c.n_splits = 4;
        c.m_splits = splits;
        c.step = (int64_t)i / 4;
        assert_int_equal(ft_rec_call(rec, &c), FT_OK);
    }
    assert_int_equal(ft_rec_close(rec), FT_OK);
}

static void test_build_on_reset_replaces_plans(void **state)
{
    (void)state;
    char crafted[1024];
    trace_path(crafted, sizeof crafted, "force_paths");
    record_force_paths(crafted);
    assert_true(check_build_on_reset(crafted) >= 3); /* every path replaced a plan */
    ft_trace_remove(crafted);
    static const char *const scenarios[] = {"rht-switch", "demo", "recipe-zoo",
                                            "backward-override"};
    uint64_t replaced = 0;
    for (size_t i = 0; i < FT_ARRAY_LEN(scenarios); i++) {
        char path[1024];
        synth_trace(scenarios[i], 3, path, sizeof path);
        replaced += check_build_on_reset(path);
        ft_trace_remove(path);
    }
    assert_true(replaced > 0); /* held plans replaced by other ones (rht-switch: 20 times) */
}

/* ---- the command line ----------------------------------------------------------------------- */
/* `fusertrace ARGS` (2>&1 unless the args redirect); output into *out (ft_malloc'd). */
static int cli(const char *args, char **out)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s", FT_BINARY_DIR, tu_cli(), args);
    ft_buf b = {0};
    int rc = tu_sh_buf(cmd, &b);
    *out = b.data ? (char *)b.data : ft_strdup("");
    return rc;
}

/* Remove the files the command-line tests wrote into FT_BINARY_DIR. */
static void cleanup_cli_files(void)
{
    tu_sh("cd '" FT_BINARY_DIR "' && rm -f tps_*.ftdb tps_*.json tps.html", NULL, 0);
}

static void expect_cli(const char *args, int status, const char *want)
{
    char *out = NULL;
    int rc = cli(args, &out);
    if (rc != status || (want && !strstr(out, want)))
        fail_msg("fusertrace %s: exit %d (want %d), output lacks '%s':\n%s", args, rc, status,
                 want ? want : "", out);
    ft_free(out);
}

#define MINE "'mine=type+f+bo+attr:disable_rht;store=dict'"

/* The command on the demo trace and on synth rht-switch; the user policy in every
 * output: text (beside the built-ins, labelled in the recommendation), JSON, CSV, HTML,
 * --per-call, diff, SQL's decisions, a JSON policy file; bad specs exit 2 naming the field. */
static void test_cli_user_policy_everywhere(void **state)
{
    (void)state;
    if (!tu_cli()) skip();
    expect_cli("synth demo -o tps_demo.ftdb -f 2>&1", 0, NULL);
    expect_cli("synth rht-switch -o tps_rht.ftdb -f 2>&1", 0, NULL);
    static const char *const traces[] = {"tps_demo.ftdb", "tps_rht.ftdb"};
    char args[2048];
    for (int k = 0; k < 2; k++) {
        char *out = NULL;
        snprintf(args, sizeof args, "replay %s --policy " MINE " 2>&1", traces[k]);
        assert_int_equal(cli(args, &out), 0);
        /* a row beside every built-in, and named with its label in the recommendation */
        for (uint32_t i = 0; i < ft_policy_builtin_count(); i++) {
            char row[80];
            snprintf(row, sizeof row, "\n%-16s ", ft_policy_name(i));
            if (!strstr(out, row)) fail_msg("%s: no row for %s:\n%s", traces[k], row + 1, out);
        }
        assert_non_null(strstr(out, "\nmine  "));
        assert_non_null(strstr(out, "mine (user-defined)"));
        ft_free(out);
    }
    expect_cli("replay tps_rht.ftdb --policy " MINE " --json 2>&1", 0,
               "\"policy\": \"mine\",\n   \"summary\": \"user-defined: key "
               "(type+f+bo+attr:disable_rht); reset when (type+bo+hist) changes (te:3410); "
               "dict\",\n   \"label\": \"user-defined\",\n   \"spec\": "
               "\"type+f+bo+attr:disable_rht;store=dict;reset=te:3410\"");
    expect_cli("replay tps_rht.ftdb --policy " MINE " --csv 2>&1", 0, "\nsummary,mine,,,768,48,");
    expect_cli("replay tps_rht.ftdb --policy " MINE " --html tps.html >/dev/null 2>&1 && "
               "grep -c 'user-defined: key (type+f+bo+attr:disable_rht)' tps.html",
               0, "1");
    expect_cli("replay tps_rht.ftdb --policy te-3410," MINE " --per-call - 2>/dev/null | "
               "grep -c '\"policy\":\"mine\"'",
               0, "768");
    expect_cli("diff tps_rht.ftdb tps_rht.ftdb --policy " MINE " 2>&1", 0,
               "\nmine\n  builds                                               48             48");
    expect_cli("sql tps_rht.ftdb --policy " MINE " \"SELECT count(*), sum(build), "
               "sum(stale <> 'none') FROM decisions WHERE policy = 'mine'\" 2>&1",
               0, "768|48|0");
    /* numerics run the user policy's chosen plans like the built-ins' (--sample 4, and the first
     * call of te-3410's stale situations: 6) */
    expect_cli("replay tps_rht.ftdb --policy te-3410," MINE
               " --numerics cpu --shrink 16 --sample 4 --threads 1 2>&1",
               0, "\n  mine                  6      6 ");
    /* a policy file, and a list that names a policy the file defines */
    FILE *f = fopen(FT_BINARY_DIR "/tps_policies.json", "w");
    assert_non_null(f);
    fputs("{\"policies\": [{\"name\": \"lru2\", \"key\": [\"type\", \"f\", \"bo\"], \"store\": "
          "\"lru:2\"}]}\n",
          f);
    assert_int_equal(fclose(f), 0);
    expect_cli("replay tps_rht.ftdb --policies tps_policies.json --policy te-3410,lru2 2>&1", 0,
               "\nlru2                   768        80 ");
    expect_cli("replay tps_rht.ftdb --policies tps_policies.json --csv 2>&1", 0,
               "\nsummary,lru2,,,768,80,");
    /* mistakes: exit 2, the message names the field and lists the vocabulary */
    expect_cli("replay tps_rht.ftdb --policy 'x=type+colour' 2>&1", 2,
               "--policy: policy spec 'x=type+colour': unknown key field 'colour'; key fields: "
               "type, object, hash, attr:NAME, fusion, f, bo, hist, device, env:KEY, ops");
    expect_cli("replay tps_rht.ftdb --policy 'x=type;store=lru:0' 2>&1", 2, "lru:N wants N");
    expect_cli("replay tps_rht.ftdb --policies nope.json 2>&1", 2,
               "--policies: cannot open nope.json");
    expect_cli("sql tps_rht.ftdb --policy te-3410 'SELECT 1' 2>&1", 2,
               "--policy here only defines user policies");
    expect_cli("replay --help", 0, "type+f+bo;store=dict;reset=te:3410");
    cleanup_cli_files();
}

/* First seq on which policy name ran a stale plan, by the library (-1: none). */
static int64_t first_stale(const char *path, const char *name)
{
    ft_trace *t = NULL;
    ft_err err = {0};
    uint32_t idx;
    assert_int_equal(ft_policy_find(name, &idx, &err), FT_OK);
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    ft_replay_opts o = {.policies = &idx, .n_policies = 1, .needs = FT_VIEW_DECISIONS};
    ft_replay_cursor *c = NULL;
    assert_int_equal(ft_replay_cursor_open(t, &o, &c, &err), FT_OK);
    int64_t first = -1;
    for (int more = 1; more && first < 0;) {
        const ft_replay_view *v = NULL;
        assert_int_equal(ft_replay_cursor_next(c, &v, &more, &err), FT_OK);
        for (uint32_t j = 0; more && j < v->n && first < 0; j++)
            if (v->pol[0].stale[j] != FT_STALE_NONE) first = v->seq[j];
    }
    ft_replay_cursor_close(c);
    ft_trace_close(t);
    return first;
}

/* The CI gate: exit 4 with a message naming the condition, the policy and the first call; 0
 * when it does not hold; thresholds at the edge; usage mistakes exit 2. */
static void test_cli_fail_on(void **state)
{
    (void)state;
    if (!tu_cli()) skip();
    expect_cli("synth rht-switch -o tps_gate.ftdb -f 2>&1", 0, NULL);
    const int64_t seq = first_stale(FT_BINARY_DIR "/tps_gate.ftdb", "te-3410");
    assert_true(seq > 0);
    char want[256];
    snprintf(want, sizeof want,
             "--fail-on stale held under te-3410: first on seq %lld of "
             "tps_gate.ftdb (fuser ",
             (long long)seq);
    expect_cli("replay tps_gate.ftdb --fail-on stale --policy te-3410 2>&1 >/dev/null", 4, want);
    expect_cli("replay tps_gate.ftdb --fail-on stale --policy fusion-attrs 2>&1", 0, NULL);
    /* user policies alone are the chosen ones: the built-ins beside them are not watched */
    expect_cli("replay tps_gate.ftdb --fail-on stale --policy " MINE " 2>&1", 0, NULL);
    expect_cli("replay tps_gate.ftdb --fail-on stale --policy 'lru2=type+f+bo;store=lru:2' 2>&1 "
               ">/dev/null",
               4, "--fail-on stale held under lru2:");
    expect_cli("replay tps_gate.ftdb --fail-on stale --policy all," MINE " 2>&1 >/dev/null", 4,
               "held under te-3410:");
    /* the report is still written in full before the verdict */
    expect_cli("replay tps_gate.ftdb --fail-on raises --policy te-3410 --json 2>/dev/null", 4,
               "\"policy\": \"te-3410\"");
    expect_cli("replay tps_gate.ftdb --fail-on raises --policy te-3410 2>&1 >/dev/null", 4,
               "a stale plan that raises in TE");
    /* te-3410 builds 32 plans here (the golden of test_worked_examples_on_rht_switch) */
    expect_cli("replay tps_gate.ftdb --fail-on 'builds>31' --policy te-3410 2>&1 >/dev/null", 4,
               "): build 32 in all");
    expect_cli("replay tps_gate.ftdb --fail-on 'builds>32' --policy te-3410 2>&1", 0, NULL);
    expect_cli("replay tps_gate.ftdb --fail-on 'builds-per-fuser>0' --policy te-3410 2>&1 "
               ">/dev/null",
               4, "this fuser's build 1");
    /* te-pre3410 rebuilds on every grad flip of the recompute; te-3410 keeps both plans */
    expect_cli("replay tps_gate.ftdb --fail-on 'rebuilds-per-step>0' --policy te-pre3410 2>&1 "
               ">/dev/null",
               4, "rebuild 1 in this step");
    expect_cli("replay tps_gate.ftdb --fail-on 'rebuilds-per-step>0' --policy te-3410 2>&1", 0,
               NULL);
    expect_cli("replay tps_gate.ftdb --fail-on stale,raises --fail-on 'builds>0' --policy "
               "te-3410 2>&1 >/dev/null",
               4, "3 --fail-on conditions held (exit status 4)");
    expect_cli("replay tps_gate.ftdb --fail-on sometimes 2>&1", 2,
               "unknown condition 'sometimes'; conditions: stale, raises, builds>N");
    expect_cli("replay tps_gate.ftdb --fail-on 'builds' 2>&1", 2, "builds wants a threshold");
    expect_cli("replay tps_gate.ftdb --fail-on 'stale>3' 2>&1", 2, "takes no threshold");
    /* a trace without steps cannot answer rebuilds-per-step */
    char src[1024];
    snprintf(src, sizeof src,
             "import %s/traces/te-pr3410-grad-toggle.jsonl -o tps_nostep.ftdb -f 2>&1",
             FT_SOURCE_DIR);
    expect_cli(src, 0, NULL);
    expect_cli("replay tps_nostep.ftdb --fail-on 'rebuilds-per-step>0' 2>&1", 2,
               "record no training step");
    cleanup_cli_files();
}

/* ---- the timeline -----------------------------------------------------------------------------
 */
typedef struct tl_slice {
    int64_t pid, tid;
    double ts, dur;
} tl_slice;

static int by_track(const void *a, const void *b)
{
    const tl_slice *x = a, *y = b;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* The file against the trace event format's rules: an object with a traceEvents array; every
 * event an object with ph (X, i, C or M here), integer pid and tid and a string name; X, i, C
 * with a numeric ts; X with dur >= 0, and no two slices of one track overlapping (Perfetto
 * nests slices by time); i with scope s in g/p/t; C with numeric args; M naming a process or
 * thread with args. Returns the parsed document. */
static json_t *check_trace_events(const char *path)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc) fail_msg("%s:%d: %s", path, je.line, je.text);
    assert_true(json_is_object(doc));
    const char *unit = json_string_value(json_object_get(doc, "displayTimeUnit"));
    assert_true(!unit || !strcmp(unit, "ns") || !strcmp(unit, "ms"));
    json_t *ev = json_object_get(doc, "traceEvents");
    assert_true(json_is_array(ev));
    tl_slice *sl = ft_calloc(json_array_size(ev) + 1, sizeof *sl);
    size_t n_sl = 0, i;
    json_t *e;
    json_array_foreach(ev, i, e)
    {
        assert_true(json_is_object(e));
        const char *ph = json_string_value(json_object_get(e, "ph"));
        assert_non_null(ph);
        assert_true(json_is_integer(json_object_get(e, "pid")));
        assert_true(json_is_integer(json_object_get(e, "tid")));
        assert_true(json_is_string(json_object_get(e, "name")));
        json_t *args = json_object_get(e, "args");
        assert_true(!args || json_is_object(args));
        if (strcmp(ph, "M")) assert_true(json_is_number(json_object_get(e, "ts")));
        if (!strcmp(ph, "X")) {
            json_t *dur = json_object_get(e, "dur");
            assert_true(json_is_number(dur) && json_number_value(dur) >= 0);
            sl[n_sl++] =
                (tl_slice){json_integer_value(json_object_get(e, "pid")),
                           json_integer_value(json_object_get(e, "tid")),
                           json_number_value(json_object_get(e, "ts")), json_number_value(dur)};
        } else if (!strcmp(ph, "i")) {
            const char *sc = json_string_value(json_object_get(e, "s"));
            assert_true(sc && (!strcmp(sc, "t") || !strcmp(sc, "p") || !strcmp(sc, "g")));
        } else if (!strcmp(ph, "C")) {
            assert_non_null(args);
            const char *k;
            json_t *v;
            json_object_foreach(args, k, v) assert_true(json_is_number(v));
        } else if (!strcmp(ph, "M")) {
            const char *nm = json_string_value(json_object_get(e, "name"));
            assert_non_null(args);
            assert_true(!strcmp(nm, "process_name") || !strcmp(nm, "thread_name") ||
                        !strcmp(nm, "process_sort_index") || !strcmp(nm, "thread_sort_index") ||
                        !strcmp(nm, "process_labels"));
        } else {
            fail_msg("%s: event %zu has phase '%s'", path, i, ph);
        }
    }
    qsort(sl, n_sl, sizeof *sl, by_track);
    for (size_t k = 1; k < n_sl; k++)
        if (sl[k].pid == sl[k - 1].pid && sl[k].tid == sl[k - 1].tid &&
            sl[k].ts < sl[k - 1].ts + sl[k - 1].dur - 1e-9)
            fail_msg("%s: slices overlap on pid %lld tid %lld at ts %.3f", path,
                     (long long)sl[k].pid, (long long)sl[k].tid, sl[k].ts);
    ft_free(sl);
    return doc;
}

/* Count the events of pid whose name is exactly name (NULL: every X). */
static uint64_t count_events(json_t *doc, int64_t pid, const char *ph, const char *name)
{
    uint64_t n = 0;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(doc, "traceEvents"), i, e)
    {
        if (json_integer_value(json_object_get(e, "pid")) != pid) continue;
        if (strcmp(json_string_value(json_object_get(e, "ph")), ph)) continue;
        if (name && strcmp(json_string_value(json_object_get(e, "name")), name)) continue;
        n++;
    }
    return n;
}

/* Two ranks of a pipelined demo run on one timeline: a process per rank, every call a slice,
 * every build, reset and stale plan of every policy an instant event, the cumulative builds
 * counter ending at each policy's builds, a named track per fuser. */
static void test_cli_timeline(void **state)
{
    (void)state;
    if (!tu_cli()) skip();
    expect_cli("synth demo --set stages=2 --set stage_only=0 -o tps_r0.ftdb -f 2>&1", 0, NULL);
    expect_cli("synth demo --set stages=2 --set stage_only=1 -o tps_r1.ftdb -f 2>&1", 0, NULL);
    expect_cli("replay tps_r0.ftdb tps_r1.ftdb --policy te-3410,te-pre3410," MINE
               " --timeline tps_timeline.json 2>&1",
               0, "mine (user-defined)");
    json_t *doc = check_trace_events(FT_BINARY_DIR "/tps_timeline.json");
    /* the same replay by the library, per trace */
    uint32_t idx[FT_MAX_POLICIES], n;
    ft_err err = {0};
    assert_int_equal(ft_policy_parse_list("te-3410,te-pre3410,mine=type+f+bo+attr:disable_rht;"
                                          "store=dict",
                                          idx, &n, &err),
                     FT_OK);
    const char *paths[2] = {FT_BINARY_DIR "/tps_r0.ftdb", FT_BINARY_DIR "/tps_r1.ftdb"};
    ft_replay_result all, per[2];
    ft_replay_opts o = {.policies = idx, .n_policies = n, .per_trace = per};
    assert_int_equal(ft_replay_traces(paths, 2, &o, &all, &err), FT_OK);
    for (int64_t rank = 0; rank < 2; rank++) {
        const ft_replay_result *r = &per[rank];
        assert_true(r->calls > 0);
        assert_int_equal(count_events(doc, rank, "M", "process_name"), 1);
        assert_int_equal(count_events(doc, rank, "X", "call"), r->calls);
        assert_int_equal(count_events(doc, rank, "M", "thread_name"), r->n_fusers);
        for (uint32_t p = 0; p < r->n_policies; p++) {
            const ft_policy_result *q = &r->pol[p];
            char name[128];
            snprintf(name, sizeof name, "build %s", ft_policy_name(q->policy));
            assert_int_equal(count_events(doc, rank, "i", name), q->builds);
            snprintf(name, sizeof name, "reset %s", ft_policy_name(q->policy));
            assert_int_equal(count_events(doc, rank, "i", name), q->resets);
            snprintf(name, sizeof name, "stale %s", ft_policy_name(q->policy));
            assert_int_equal(count_events(doc, rank, "i", name),
                             q->calls - q->stale[FT_STALE_NONE]);
        }
        /* the last "builds" counter of the rank holds every policy's total */
        json_t *last = NULL, *e;
        size_t i;
        json_array_foreach(json_object_get(doc, "traceEvents"), i, e)
        {
            if (json_integer_value(json_object_get(e, "pid")) == rank &&
                !strcmp(json_string_value(json_object_get(e, "name")), "builds"))
                last = json_object_get(e, "args");
        }
        assert_non_null(last);
        for (uint32_t p = 0; p < r->n_policies; p++)
            assert_int_equal(
                json_integer_value(json_object_get(last, ft_policy_name(r->pol[p].policy))),
                r->pol[p].builds);
        assert_true(count_events(doc, rank, "C", "step") >= 16);
    }
    json_decref(doc);
    /* a write failure is an error, and no half-written file is left */
    expect_cli("replay tps_r0.ftdb --timeline /dev/full 2>&1", 3,
               "writing the timeline /dev/full failed");
    cleanup_cli_files();
}

/* The fuzz target's corpus: every input defines or is refused with a message, and what defines
 * replays (tests/fuzz/policy.status says which). */
static void test_fuzz_policy_corpus(void **state)
{
    (void)state;
    assert_true(tu_replay_corpus("policy", fuzz_policy_run) >= 9);
}

/* Every allocation of a replay with user policies (their ids, front caches, interned
 * combinations, the shared store) may fail: FT_ENOMEM, nothing left behind, and the replay runs
 * once they stop failing. */
static void test_user_policy_alloc_failures_leak_nothing(void **state)
{
    (void)state;
    uint32_t idx[FT_MAX_POLICIES], n;
    ft_err err = {0};
    assert_int_equal(ft_policy_parse_list("a=fusion+device+ops+f;store=dict;reset=type+bo+hist+"
                                          "device,b=type+attr:disable_rht;store=shared-lru:1;"
                                          "build=reset,c=hash+f;store=single;reset=key",
                                          idx, &n, &err),
                     FT_OK);
    const long live0 = ft_alloc_live();
    int ok = 0, failed = 0;
    for (long k = 0; k < 2000 && !ok; k++) {
        ft_alloc_fail_after(k);
        int rc = fuzz_policy_replay(2, &err);
        ft_alloc_fail_after(-1);
        if (rc != FT_OK && rc != FT_ENOMEM)
            fail_msg("allocation %ld: status %d: %s", k, rc, err.msg);
        assert_int_equal(ft_alloc_live(), live0);
        ok = rc == FT_OK;
        failed += !ok;
    }
    assert_true(ok);
    assert_true(failed > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_builtin_specs_match_on_canned_traces, teardown),
        cmocka_unit_test_teardown(test_builtin_specs_match_on_every_synth_scenario, teardown),
        cmocka_unit_test_teardown(test_spec_parse_forms_and_errors, teardown),
        cmocka_unit_test_teardown(test_spec_lists_and_json, teardown),
        cmocka_unit_test_teardown(test_worked_examples_on_rht_switch, teardown),
        cmocka_unit_test_teardown(test_build_on_reset_replaces_plans, teardown),
        cmocka_unit_test_teardown(test_cli_user_policy_everywhere, teardown),
        cmocka_unit_test_teardown(test_cli_fail_on, teardown),
        cmocka_unit_test_teardown(test_cli_timeline, teardown),
        cmocka_unit_test_teardown(test_fuzz_policy_corpus, teardown),
        cmocka_unit_test_teardown(test_user_policy_alloc_failures_leak_nothing, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
