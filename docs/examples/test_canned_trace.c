/*
 * test_canned_trace.c - an example CMocka test on a canned trace, written against the installed
 * fusertrace C API (fusertrace.h, libfusertrace.so) the way a TE developer would pin down what the
 * plan cache does on a workload: replay a trace under the policies of interest, assert the
 * builds, resets and stale calls of each, and the decision on particular calls.
 *
 * The trace is TE PR 3410's own grad-mode test as a capture (traces/te-pr3410-grad-toggle.jsonl:
 * one Identity op whose input requires grad, no recipe, grad off, on, off, on).
 *
 *   fusertrace import traces/te-pr3410-grad-toggle.jsonl -o grad-toggle.ftdb
 *   cc -std=c11 test_canned_trace.c $(pkg-config --cflags --libs fusertrace cmocka) -o t
 *   ./t grad-toggle.ftdb
 *
 * (tests/install/test_install.sh builds and runs it against a temporary installed prefix.)
 */
#include <fusertrace.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static const char *trace_path;

/* The replay every test reads: three policies, with each call's decisions kept. */
static int replay_setup(void **state)
{
    static const char *const no_env[] = {NULL};
    fusertrace_options o = {
        .policies = "te-pre3410,te-3410,te-3410-commit1", .keep_decisions = 1, .env = no_env};
    fusertrace_replay *r = NULL;
    char err[512];
    if (fusertrace_replay_open(trace_path, &o, &r, err, sizeof err)) {
        print_error("%s\n", err);
        return -1;
    }
    *state = r;
    return 0;
}

static int replay_teardown(void **state)
{
    fusertrace_replay_close(*state);
    return 0;
}

/* Before PR 3410 every grad toggle rebuilds; at its head the dictionary keeps both plans; its
 * first commit dropped f from the key and builds once. None runs a stale plan here. */
static void test_builds_per_policy(void **state)
{
    const fusertrace_replay *r = *state;
    assert_int_equal(fusertrace_replay_n_calls(r), 4);
    assert_int_equal(fusertrace_replay_n_policies(r), 3);
    static const struct {
        const char *policy;
        uint64_t builds, resets;
    } want[] = {{"te-pre3410", 4, 4}, {"te-3410", 2, 1}, {"te-3410-commit1", 1, 1}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        fusertrace_counts c;
        assert_int_equal(fusertrace_replay_counts(r, want[i].policy, &c), FUSERTRACE_OK);
        assert_int_equal(c.calls, 4);
        assert_int_equal(c.builds, want[i].builds);
        assert_int_equal(c.hits, 4 - want[i].builds);
        assert_int_equal(c.resets, want[i].resets);
        assert_int_equal(c.stale_harmless + c.stale_slower + c.stale_quant + c.stale_raises, 0);
    }
}

/* Call by call: PR 3410 builds on the first grad-off and grad-on calls and then hits. */
static void test_decisions_per_call(void **state)
{
    const fusertrace_replay *r = *state;
    static const int built[4] = {1, 1, 0, 0};
    for (uint64_t i = 0; i < 4; i++) {
        fusertrace_decision d;
        assert_int_equal(fusertrace_replay_decision(r, "te-3410", i, &d), FUSERTRACE_OK);
        assert_int_equal(d.seq, (int64_t)i);
        assert_string_equal(d.label, "identity");
        assert_int_equal(d.built, built[i]);
        assert_string_equal(d.stale, "none");
        assert_non_null(strstr(d.plan, "Identity(0)"));
    }
    fusertrace_decision d;
    assert_int_equal(fusertrace_replay_decision(r, "te-3410", 4, &d), FUSERTRACE_ENOTFOUND);
    assert_int_equal(fusertrace_replay_decision(r, "recipe-hash", 0, &d), FUSERTRACE_ENOTFOUND);
}

/* Mistakes are errors with a message, never a crash. */
static void test_errors_name_what_is_wrong(void **state)
{
    (void)state;
    fusertrace_replay *r = NULL;
    char err[512];
    fusertrace_options o = {.policies = "no-such-policy"};
    assert_int_equal(fusertrace_replay_open(trace_path, &o, &r, err, sizeof err),
                     FUSERTRACE_ENOTFOUND);
    assert_null(r);
    assert_non_null(strstr(err, "no-such-policy"));
    assert_true(fusertrace_replay_open("/no/such/trace.ftdb", NULL, &r, err, sizeof err) < 0);
    assert_non_null(strstr(err, "/no/such/trace.ftdb"));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        print_error("usage: %s TRACE.ftdb\n", argv[0]);
        return 2;
    }
    trace_path = argv[1];
    assert_int_equal(fusertrace_api_version(), FUSERTRACE_API_VERSION);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builds_per_policy),
        cmocka_unit_test(test_decisions_per_call),
        cmocka_unit_test(test_errors_name_what_is_wrong),
    };
    return cmocka_run_group_tests(tests, replay_setup, replay_teardown);
}
