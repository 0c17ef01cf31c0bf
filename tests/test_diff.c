/*
 * test_diff.c - `fusertrace diff` on saved reports: only a report of the report_version it knows,
 * with every figure it reads (an absent or non-numeric one names the file, policy and field);
 * each input read once (a FIFO, stdin); linear in the number of policies. test_report.c compares
 * traces and reports.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_replayer.h"
#include "ft_report.h"
#include "test_util.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

static void assert_has(const char *text, const char *want)
{
    if (!strstr(text, want)) fail_msg("missing \"%s\" in:\n%s", want, text);
}

static json_t *sh_json(const char *cmd)
{
    ft_buf b = {0};
    assert_int_equal(tu_sh_buf(cmd, &b), 0);
    json_t *doc = json_loadb((const char *)b.data, b.len, 0, NULL);
    if (!doc) fail_msg("%s: not JSON:\n%s", cmd, b.data);
    ft_buf_free(&b);
    return doc;
}

/* A saved report with one change, written to path; field NULL removes the key. */
static void write_changed(const char *saved, const char *path, const char *pol, const char *field,
                          json_t *value)
{
    json_t *doc = json_load_file(saved, 0, NULL);
    assert_non_null(doc);
    json_t *where = doc;
    if (pol) {
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(doc, "policies"), i, p)
        {
            if (!strcmp(json_string_value(json_object_get(p, "policy")), pol)) where = p;
        }
        assert_true(where != doc);
    }
    if (value)
        json_object_set_new(where, field, value);
    else
        json_object_del(where, field);
    assert_int_equal(json_dump_file(doc, path, 0), 0);
    json_decref(doc);
}

/* diff takes only a report of the version it knows, with every figure it reads (absent or
 * non-numeric figures name the file, policy and field), and reads each input once: a pipe or
 * stdin works. */
static void test_diff_checks_figures_and_reads_pipes(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char dir[1024], a[1200], saved[1200], bad[1200], cmd[8000], out[4096];
    assert_int_equal(tu_dir_fresh(dir, sizeof dir, "test_diff_checks"), 0);
    tu_dir_path(a, sizeof a, dir, "a.ftdb");
    tu_dir_path(saved, sizeof saved, dir, "a.json");
    tu_dir_path(bad, sizeof bad, dir, "bad.json");
    snprintf(cmd, sizeof cmd,
             "'%s' synth demo -o '%s' >/dev/null && '%s' replay '%s' --json > '%s'", cli, a, cli, a,
             saved);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    json_t *doc = json_load_file(saved, 0, NULL);
    assert_non_null(doc);
    assert_int_equal(json_integer_value(json_object_get(doc, "report_version")), FT_REPORT_VERSION);
    const char *pol = json_string_value(
        json_object_get(json_array_get(json_object_get(doc, "policies"), 1), "policy"));
    assert_non_null(pol);
    char polname[128];
    snprintf(polname, sizeof polname, "%s", pol);
    json_decref(doc);
    static const struct {
        const char *field; /* in the policy; "report_version" and "calls" at the top */
        int top, stale;
        json_t *(*value)(void);
        const char *says;
    } cases[] = {
        {"builds", 0, 0, NULL, "\"builds\" is absent"},
        {"resets", 0, 0, json_null, "\"resets\" is not a number"},
        {"raises", 0, 1, NULL, "\"raises\" is absent"},
        {"framework_ns", 0, 0, json_true, "\"framework_ns\" is not a number"},
        {"report_version", 1, 0, NULL, "no \"report_version\""},
        {"calls", 1, 0, json_null, "\"calls\" is not a number"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (cases[c].stale) {
            json_t *d = json_load_file(saved, 0, NULL);
            size_t i;
            json_t *p;
            json_array_foreach(json_object_get(d, "policies"), i, p)
            {
                if (!strcmp(json_string_value(json_object_get(p, "policy")), polname))
                    json_object_del(json_object_get(p, "stale"), cases[c].field);
            }
            assert_int_equal(json_dump_file(d, bad, 0), 0);
            json_decref(d);
        } else {
            write_changed(saved, bad, cases[c].top ? NULL : polname, cases[c].field,
                          cases[c].value ? cases[c].value() : NULL);
        }
        snprintf(cmd, sizeof cmd, "'%s' diff '%s' '%s' 2>&1", cli, saved, bad);
        int st = tu_sh(cmd, out, sizeof out);
        if (st != 2 || !strstr(out, cases[c].says) || !strstr(out, "bad.json") ||
            (!cases[c].top && !strstr(out, polname)))
            fail_msg("%s: exit %d, wanted 2 and '%s' naming the file and policy:\n%s",
                     cases[c].field, st, cases[c].says, out);
    }
    /* another report version: refused, saying which */
    write_changed(saved, bad, NULL, "report_version", json_integer(FT_REPORT_VERSION + 1));
    snprintf(cmd, sizeof cmd, "'%s' diff '%s' '%s' 2>&1", cli, bad, saved);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    assert_has(out, "report_version");
    /* a pipe and stdin, each read once */
    snprintf(cmd, sizeof cmd,
             "rm -f '%s/p' && mkfifo '%s/p' && ('%s' replay '%s' --json > '%s/p' &) && "
             "'%s' diff '%s/p' '%s' --json",
             dir, dir, cli, a, dir, cli, dir, saved);
    doc = sh_json(cmd);
    assert_int_equal(json_array_size(json_object_get(doc, "policies")), ft_policy_count());
    json_decref(doc);
    snprintf(cmd, sizeof cmd, "cat '%s' | '%s' diff - '%s' --json", saved, cli, a);
    doc = sh_json(cmd);
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(doc, "policies"), i, row)
    {
        assert_true(json_real_value(json_object_get(json_object_get(row, "builds"), "delta")) ==
                    0.0);
    }
    assert_int_equal(json_array_size(json_object_get(doc, "policies")), ft_policy_count());
    json_decref(doc);
    /* a pipe that is not JSON cannot be a trace */
    snprintf(cmd, sizeof cmd, "echo x | '%s' diff - '%s' 2>&1", cli, saved);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    assert_has(out, "regular file");
    assert_int_equal(tu_dir_remove(dir), 0);
}

/* diff is linear in the policies: two reports of 40,000 names each (20,000 shared) in well under
 * a second each way (a quadratic merge took minutes). */
static void test_diff_many_policies_is_fast(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char dir[1024], pa[1200], pb[1200], cmd[4000], out[512];
    assert_int_equal(tu_dir_fresh(dir, sizeof dir, "test_diff_many"), 0);
    tu_dir_path(pa, sizeof pa, dir, "a.json");
    tu_dir_path(pb, sizeof pb, dir, "b.json");
    enum { N = 40000 };
    for (int s = 0; s < 2; s++) {
        json_t *doc = json_object(), *pols = json_array();
        json_object_set_new(doc, "report_version", json_integer(FT_REPORT_VERSION));
        json_object_set_new(doc, "calls", json_integer(1));
        for (int i = 0; i < N; i++) {
            char name[32];
            snprintf(name, sizeof name, "p%d", i + s * N / 2);
            json_t *p = json_object(), *st = json_object();
            json_object_set_new(p, "policy", json_string(name));
            json_object_set_new(p, "builds", json_integer(i));
            json_object_set_new(p, "resets", json_integer(0));
            json_object_set_new(st, "harmless", json_integer(0));
            json_object_set_new(st, "slower", json_integer(0));
            json_object_set_new(st, "quant", json_integer(0));
            json_object_set_new(st, "raises", json_integer(s));
            json_object_set_new(p, "stale", st);
            json_object_set_new(p, "framework_ns", json_real(1.0));
            json_array_append_new(pols, p);
        }
        json_object_set_new(doc, "policies", pols);
        assert_int_equal(json_dump_file(doc, s ? pb : pa, 0), 0);
        json_decref(doc);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    snprintf(cmd, sizeof cmd, "'%s' diff '%s' '%s' --json | grep -c '\"policy\"'", cli, pa, pb);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    print_message("diff of 2 x %d policies: %.2f s\n", N, s);
    assert_int_equal(strtol(out, NULL, 10), N + N / 2);
    assert_true(s < 10.0); /* well under a second unsanitized; ASan and a shared machine vary */
    assert_int_equal(tu_dir_remove(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff_checks_figures_and_reads_pipes),
        cmocka_unit_test(test_diff_many_policies_is_fast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
