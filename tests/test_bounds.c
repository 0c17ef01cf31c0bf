/*
 * test_bounds.c - small crafted traces that ask for huge work: numerics with op and split sizes
 * near 2^62 (no wrap, a refusal naming the call, the memory and time limits not bypassed, no
 * signed overflow under UBSan in the fusion gate or the model's grouped-MLP reading); the
 * decoders of every reader of a command under one memory budget (--memory).
 * The traces are made here: the demo exported to the capture format, sizes edited with sed,
 * imported again.
 */
#define _POSIX_C_SOURCE 200809L
#include "test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static char dir[1024], demo_jsonl[1200];

static int setup(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) return 0;
    if (tu_dir_fresh(dir, sizeof dir, "test_bounds")) return -1;
    tu_dir_path(demo_jsonl, sizeof demo_jsonl, dir, "demo.jsonl");
    char cmd[4000];
    snprintf(cmd, sizeof cmd,
             "'%s' synth demo -o '%s/demo.ftdb' >/dev/null && '%s' export '%s/demo.ftdb' -o '%s'",
             cli, dir, cli, dir, demo_jsonl);
    return tu_sh(cmd, NULL, 0) ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    return dir[0] ? tu_dir_remove(dir) : 0;
}

/* dir/NAME.ftdb: the demo with the sed script applied to its capture stream. */
static void crafted(const char *name, const char *sed, char *path, size_t cap)
{
    char cmd[4000];
    snprintf(path, cap, "%s/%s.ftdb", dir, name);
    snprintf(cmd, sizeof cmd,
             "sed -E '%s' '%s' > '%s/%s.jsonl' && '%s' import '%s/%s.jsonl' -o '%s' -f 2>&1", sed,
             demo_jsonl, dir, name, tu_cli(), dir, name, path);
    char out[2048];
    if (tu_sh(cmd, out, sizeof out)) fail_msg("%s: import failed:\n%s", name, out);
}

/* The exit status and stderr of `replay TRACE ARGS`. */
static int replay(const char *trace, const char *args, char *out, size_t cap)
{
    char cmd[4000];
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' %s 2>&1 >/dev/null", tu_cli(), trace, args);
    return tu_sh(cmd, out, cap);
}

/* Hidden sizes of 2^61 and 2^62: the plain replay runs (no signed overflow in the gate's "twice
 * in_features"), numerics refuses naming the call and the size, never a wrapped memory figure. */
static void test_bounds_numerics_huge_hidden_sizes_refused(void **state)
{
    (void)state;
    if (!tu_cli()) skip();
    char t[1200], out[4096];
    /* the second GroupedLinear's in_features 2^62: the gate compares it with 2^63 */
    crafted("in2", "s/\"in_features\":1024/\"in_features\":4611686018427387904/g", t, sizeof t);
    assert_int_equal(replay(t, "", out, sizeof out), 0);
    assert_int_equal(replay(t, "--numerics cpu", out, sizeof out), 0); /* no grouped MLP left */
    /* a consistent grouped MLP of 2^61 x 2^62 */
    crafted("h61",
            "/GroupedLinear/{s/\"in_features\":512/\"in_features\":2305843009213693952/g;"
            "s/\"out_features\":2048/\"out_features\":4611686018427387904/g;"
            "s/\"in_features\":1024/\"in_features\":2305843009213693952/g;"
            "s/\"out_features\":512/\"out_features\":2305843009213693952/g}",
            t, sizeof t);
    assert_int_equal(replay(t, "", out, sizeof out), 0);
    int st = replay(t, "--numerics cpu", out, sizeof out);
    if (st != 2 || !strstr(out, "call seq") || !strstr(out, "in_features (2305843009213693952)") ||
        !strstr(out, "over 2^48"))
        fail_msg("numerics on 2^61 sizes: exit %d, wanted 2 naming the call and size:\n%s", st,
                 out);
}

/* A split of 2^62 tokens (the others as they were: the splits' sum is checked modulo 2^64 by
 * the decoder only), and one of 2^37: refused before anything is allocated; at a --shrink that
 * makes the problem representable the memory limit still refuses, without timing it (a
 * calibration run of a call that does not fit would try to allocate it). */
static void test_bounds_numerics_huge_splits_refused(void **state)
{
    (void)state;
    if (!tu_cli()) skip();
    char t[1200], out[4096];
    crafted("s62", "s/\"m_splits\":\\[[0-9]+,/\"m_splits\":[4611686018427387904,/", t, sizeof t);
    int st = replay(t, "--numerics cpu", out, sizeof out);
    if (st != 2 || !strstr(out, "call seq") || !strstr(out, "token count"))
        fail_msg("a 2^62 split: exit %d, wanted 2 naming the call:\n%s", st, out);
    crafted("s37", "s/\"m_splits\":\\[[0-9]+,/\"m_splits\":[137438953472,/", t, sizeof t);
    st = replay(t, "--numerics cpu", out, sizeof out);
    if (st != 2 || !strstr(out, "over 2^40; use --shrink"))
        fail_msg("a 2^37 split: exit %d, wanted 2 with a --shrink to use:\n%s", st, out);
    st = replay(t, "--numerics cpu --shrink 32 --max-seconds 5", out, sizeof out);
    if (st != 2 || !strstr(out, "too large for this machine") || !strstr(out, "not timed"))
        fail_msg("a 2^37 split at --shrink 32: exit %d, wanted 2, too large, not timed:\n%s", st,
                 out);
    /* --max-seconds 0 lifts the time limit, never the memory one */
    st = replay(t, "--numerics cpu --shrink 32 --max-seconds 0", out, sizeof out);
    assert_int_equal(st, 2);
    assert_non_null(strstr(out, "too large for this machine"));
}

/* Every decoder of a command draws on one budget: a budget that holds one decoder of the demo's
 * chunk runs a query over calls, and refuses (exit 3, naming the chunk and --memory) a self-join
 * that needs two decoders at once; replay likewise; a bad size is a usage error. */
static void test_bounds_decoders_share_one_budget(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char cmd[4000], out[4096];
    static const struct {
        const char *args;
        int status;
        const char *says;
    } cases[] = {
        {"sql '%s/demo.ftdb' --memory 2M 'SELECT count(*) FROM calls'", 0, "3168"},
        {"sql '%s/demo.ftdb' --memory 2M 'SELECT count(*) FROM calls a JOIN calls b USING (seq)'",
         3, "memory budget of 2.1 MB (--memory)"},
        {"sql '%s/demo.ftdb' 'SELECT count(*) FROM calls a JOIN calls b USING (seq)'", 0, "3168"},
        {"sql '%s/demo.ftdb' --memory 0 'SELECT count(*) FROM calls a JOIN calls b USING (seq)'", 0,
         "3168"},
        {"replay '%s/demo.ftdb' --memory 64K", 3, "chunk 1: decoding it takes"},
        {"replay '%s/demo.ftdb' --memory 2Q", 2, "--memory: wants a size"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[1500];
        snprintf(args, sizeof args, cases[i].args, dir);
        snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", cli, args);
        int st = tu_sh(cmd, out, sizeof out);
        if (st != cases[i].status || !strstr(out, cases[i].says))
            fail_msg("%s: exit %d, wanted %d and '%s':\n%s", args, st, cases[i].status,
                     cases[i].says, out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds_numerics_huge_hidden_sizes_refused),
        cmocka_unit_test(test_bounds_numerics_huge_splits_refused),
        cmocka_unit_test(test_bounds_decoders_share_one_budget),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
