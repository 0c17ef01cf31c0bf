/*
 * test_api.c - the C API for tests on canned traces (api/fusertrace.h), built from its source
 * into this binary so that the sanitizers and the failing allocator see it (the installed shared
 * library is exercised by tests/install/test_install.sh with docs/examples/test_canned_trace.c):
 * - its counts are the engine's, on every canned trace with a golden file;
 * - per-call decisions are the view's, in call order, with plan texts, labels and steps;
 * - env overrides and LRU capacity reach the engine; bad arguments are errors with a message;
 * - an allocation failing anywhere gives FT_ENOMEM and leaks nothing.
 */
#define _POSIX_C_SOURCE 200809L
#include "fusertrace.h"
#include "ft_recorder.h"
#include "ft_replayer.h"
#include "test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* traces/NAME.jsonl imported into a trace in FT_BINARY_DIR; its path into out. */
static void import_trace(const char *name, char *out, size_t cap)
{
    char src[1024];
    snprintf(src, sizeof src, "%s/traces/%s.jsonl", FT_SOURCE_DIR, name);
    snprintf(out, cap, "%s/test_api_%s_%ld.ftdb", FT_BINARY_DIR, name, (long)getpid());
    remove(out);
    FILE *in = fopen(src, "r");
    assert_non_null(in);
    ft_rec *rec = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(out, NULL, &rec, &err), FT_OK);
    ft_sink sink;
    ft_rec_sink(rec, &sink);
    int rc = ft_jsonl_import(in, src, &sink, NULL, &err);
    fclose(in);
    if (rc) fail_msg("%s: %s", src, ft_err_msg(&err));
    assert_int_equal(ft_rec_close(rec), FT_OK);
}

/* The API's counts against the engine's own replay of the same trace, every policy. */
static void check_against_engine(const char *path)
{
    ft_replay_result *res = ft_malloc(sizeof *res);
    assert_non_null(res);
    ft_err err = {0};
    const char *paths[1] = {path};
    assert_int_equal(ft_replay_traces(paths, 1, NULL, res, &err), FT_OK);
    fusertrace_replay *r = NULL;
    char msg[512];
    assert_int_equal(fusertrace_replay_open(path, NULL, &r, msg, sizeof msg), FUSERTRACE_OK);
    assert_int_equal(fusertrace_replay_n_calls(r), res->calls);
    assert_int_equal(fusertrace_replay_n_policies(r), ft_policy_count());
    for (uint32_t p = 0; p < res->n_policies; p++) {
        const ft_policy_result *q = &res->pol[p];
        fusertrace_counts c;
        assert_string_equal(fusertrace_replay_policy(r, p), ft_policy_name(q->policy));
        assert_int_equal(fusertrace_replay_counts(r, ft_policy_name(q->policy), &c), FT_OK);
        assert_int_equal(c.builds, q->builds);
        assert_int_equal(c.resets, q->resets);
        assert_int_equal(c.hits, q->hits);
        assert_int_equal(c.stale_harmless, q->stale[FT_STALE_HARMLESS]);
        assert_int_equal(c.stale_slower, q->stale[FT_STALE_SLOWER]);
        assert_int_equal(c.stale_quant, q->stale[FT_STALE_QUANT]);
        assert_int_equal(c.stale_raises, q->stale[FT_STALE_RAISES]);
        assert_int_equal(c.qdrift, q->qdrift);
        assert_int_equal(c.fresh_raises, res->fresh_raises);
    }
    fusertrace_decision d;
    assert_int_equal(fusertrace_replay_decision(r, "te-3410", 0, &d), FUSERTRACE_EINVAL);
    fusertrace_replay_close(r);
    ft_free(res);
}

static void test_api_counts_are_the_engines(void **state)
{
    (void)state;
    static const char *const names[] = {"recompute-rht", "rht-round-trips", "op-attr-change",
                                        "te-pr3410-grad-toggle", "delayed-and-override"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1200];
        import_trace(names[i], path, sizeof path);
        check_against_engine(path);
        remove(path);
    }
    assert_string_equal(fusertrace_version(), FT_VERSION_TEXT);
    assert_int_equal(fusertrace_api_version(), FUSERTRACE_API_VERSION);
}

/* Decisions per call: the same bits, classes and plan ids as the engine's view. */
typedef struct view_log {
    uint64_t n;
    uint8_t dec[4096];
    uint8_t stale[4096];
} view_log;

static int log_batch(void *ctx, const ft_replay_view *v, ft_err *err)
{
    (void)err;
    view_log *w = ctx;
    for (uint32_t j = 0; j < v->n && w->n < 4096; j++, w->n++) {
        w->dec[w->n] = v->pol[0].dec[j];
        w->stale[w->n] = v->pol[0].stale[j];
    }
    return FT_OK;
}

static void test_api_decisions_are_the_views(void **state)
{
    (void)state;
    char path[1200];
    import_trace("rht-round-trips", path, sizeof path);
    static view_log w;
    memset(&w, 0, sizeof w);
    uint32_t idx;
    assert_int_equal(ft_policy_find("te-3410", &idx, NULL), FT_OK);
    const ft_replay_observer obs = {.ctx = &w, .needs = FT_VIEW_DECISIONS, .batch_fn = log_batch};
    const ft_replay_observer *one[1] = {&obs};
    ft_replay_opts o = {.policies = &idx, .n_policies = 1, .observers = one, .n_observers = 1};
    ft_replay_result *res = ft_malloc(sizeof *res);
    assert_non_null(res);
    ft_err err = {0};
    const char *paths[1] = {path};
    assert_int_equal(ft_replay_traces(paths, 1, &o, res, &err), FT_OK);
    ft_free(res);
    fusertrace_options fo = {.policies = "fusion-attrs,te-3410", .keep_decisions = 1};
    fusertrace_replay *r = NULL;
    assert_int_equal(fusertrace_replay_open(path, &fo, &r, NULL, 0), FUSERTRACE_OK);
    assert_int_equal(fusertrace_replay_n_calls(r), w.n);
    assert_string_equal(fusertrace_replay_policy(r, 1), "te-3410");
    assert_null(fusertrace_replay_policy(r, 2));
    uint64_t stale = 0;
    for (uint64_t i = 0; i < w.n; i++) {
        fusertrace_decision d;
        assert_int_equal(fusertrace_replay_decision(r, "te-3410", i, &d), FUSERTRACE_OK);
        assert_int_equal(d.built, (w.dec[i] & FT_DEC_BUILD) != 0);
        assert_int_equal(d.reset, (w.dec[i] & FT_DEC_RESET) != 0);
        assert_string_equal(d.stale, ft_stale_name((ft_stale)w.stale[i]));
        assert_true(strstr(d.plan, "fwd[") == d.plan);
        stale += w.stale[i] != FT_STALE_NONE;
    }
    fusertrace_counts c;
    assert_int_equal(fusertrace_replay_counts(r, "te-3410", &c), FUSERTRACE_OK);
    assert_int_equal(c.stale_harmless + c.stale_slower + c.stale_quant + c.stale_raises, stale);
    assert_true(stale > 0); /* the disable_rht round trips restore stale plans under te-3410 */
    fusertrace_replay_close(r);
    remove(path);
}

/* --env and --capacity as the CLI has them; bad arguments name what is wrong. */
static void test_api_options_and_errors(void **state)
{
    (void)state;
    char path[1200], msg[512];
    import_trace("recompute-mxfp8", path, sizeof path);
    fusertrace_replay *r = NULL;
    /* on an SM90 device the grouped MLP does not fuse: no plan has it */
    const char *const env[] = {"device_cc=9.0", NULL};
    fusertrace_options o = {.policies = "te-3410", .keep_decisions = 1, .env = env};
    assert_int_equal(fusertrace_replay_open(path, &o, &r, msg, sizeof msg), FUSERTRACE_OK);
    for (uint64_t i = 0; i < fusertrace_replay_n_calls(r); i++) {
        fusertrace_decision d;
        assert_int_equal(fusertrace_replay_decision(r, "te-3410", i, &d), FUSERTRACE_OK);
        assert_null(strstr(d.plan, "GroupedMLP"));
    }
    fusertrace_replay_close(r);
    fusertrace_options cap = {.policies = "te-3410", .capacity = 1};
    assert_int_equal(fusertrace_replay_open(path, &cap, &r, msg, sizeof msg), FUSERTRACE_OK);
    fusertrace_counts c1;
    assert_int_equal(fusertrace_replay_counts(r, "te-3410", &c1), FUSERTRACE_OK);
    fusertrace_replay_close(r);
    assert_int_equal(fusertrace_replay_open(path, &(fusertrace_options){.policies = "te-3410"}, &r,
                                            msg, sizeof msg),
                     FUSERTRACE_OK);
    fusertrace_counts c0;
    assert_int_equal(fusertrace_replay_counts(r, "te-3410", &c0), FUSERTRACE_OK);
    assert_int_equal(fusertrace_replay_counts(r, "recipe-hash", &c0), FUSERTRACE_ENOTFOUND);
    assert_int_equal(fusertrace_replay_counts(r, "te-3410", &c0), FUSERTRACE_OK);
    fusertrace_replay_close(r);
    assert_true(c1.builds > c0.builds); /* one plan per fuser: the grad toggles evict */
    const char *const bad_env[] = {"novalue", NULL};
    o.env = bad_env;
    assert_int_equal(fusertrace_replay_open(path, &o, &r, msg, sizeof msg), FUSERTRACE_EINVAL);
    assert_non_null(strstr(msg, "novalue"));
    assert_null(r);
    assert_int_equal(fusertrace_replay_open(NULL, NULL, &r, msg, sizeof msg), FUSERTRACE_EINVAL);
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/traces", FT_SOURCE_DIR);
    assert_true(fusertrace_replay_open(dir, NULL, &r, msg, sizeof msg) < 0);
    assert_non_null(strstr(msg, "traces"));
    remove(path);
}

static void test_api_alloc_failures_leak_nothing(void **state)
{
    (void)state;
    char path[1200];
    import_trace("rht-round-trips", path, sizeof path);
    int ran = 0, failed = 0;
    for (long n = 0; n < 5000 && !ran; n++) {
        fusertrace_options o = {.policies = "all", .keep_decisions = 1};
        fusertrace_replay *r = NULL;
        char msg[256];
        ft_alloc_fail_after(n);
        int rc = fusertrace_replay_open(path, &o, &r, msg, sizeof msg);
        ft_alloc_fail_after(-1);
        if (rc && rc != FUSERTRACE_ENOMEM && rc != FT_ESQL && rc != FT_EIO)
            fail_msg("fail after %ld: %d %s", n, rc, msg);
        failed += rc != 0;
        ran = rc == 0;
        if (r) {
            fusertrace_decision d;
            assert_int_equal(fusertrace_replay_decision(r, "te-3410", 0, &d), FUSERTRACE_OK);
        }
        fusertrace_replay_close(r);
    }
    assert_true(ran && failed > 10);
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_counts_are_the_engines),
        cmocka_unit_test(test_api_decisions_are_the_views),
        cmocka_unit_test(test_api_options_and_errors),
        cmocka_unit_test(test_api_alloc_failures_leak_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
