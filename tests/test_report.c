/*
 * test_report.c - the report module (report/ft_report.h):
 * - the recommendation: fewest builds among never-stale policies, ties named, historical and
 *   baseline policies labelled, savings against the captured run's policy, no "N instead of N";
 * - framework time: captured fuse_ns when present, else builds x build_ns + resets x reset_ns,
 *   labelled assumed;
 * - stale classes under their long names in text, short keys in JSON;
 * - reproducibility: two runs of `replay` give the same text, JSON and CSV bytes, and the
 *   replayer's own ns/call appears only with --timing.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_report.h"
#include "test_util.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static json_t *sh_json(const char *cmd);

/* ---- a hand-made result --------------------------------------------------------------------- */
typedef struct pol_spec {
    const char *name;
    uint64_t builds, resets, raises, quant;
} pol_spec;

static ft_replay_result *make_result(const pol_spec *ps, uint32_t n, const char *captured)
{
    uint32_t idx[FT_MAX_POLICIES];
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(ft_policy_find(ps[i].name, &idx[i], NULL), FT_OK);
    ft_replay_result *r = malloc(sizeof *r);
    assert_non_null(r);
    ft_replay_result_init(r, idx, n);
    r->n_traces = 1;
    r->calls = 1000;
    for (uint32_t i = 0; i < n; i++) {
        ft_policy_result *q = &r->pol[i];
        q->calls = 1000;
        q->builds = ps[i].builds;
        q->hits = q->calls - q->builds;
        q->resets = ps[i].resets;
        q->stale[FT_STALE_RAISES] = ps[i].raises;
        q->stale[FT_STALE_QUANT] = ps[i].quant;
        q->stale[FT_STALE_NONE] = q->calls - ps[i].raises - ps[i].quant;
        if (ps[i].raises) {
            snprintf(q->raises[0].text, sizeof q->raises[0].text, "boom");
            q->raises[0].count = ps[i].raises;
        }
    }
    if (captured) {
        uint32_t c;
        assert_int_equal(ft_policy_find(captured, &c, NULL), FT_OK);
        r->captured_policy = (int)c;
    }
    return r;
}

/* What fn writes, as a malloc'd string. */
static char *capture_text(int (*fn)(FILE *, const ft_replay_result *, const ft_report_opts *,
                                    ft_err *),
                          const ft_replay_result *r, const ft_report_opts *o)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    ft_err err = {0};
    assert_int_equal(fn(f, r, o, &err), FT_OK);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static int reading_fn(FILE *f, const ft_replay_result *r, const ft_report_opts *o, ft_err *err)
{
    (void)o;
    return ft_report_reading(f, r, err);
}

static int text_fn(FILE *f, const ft_replay_result *r, const ft_report_opts *o, ft_err *err)
{
    return ft_report_write_opts(f, r, NULL, FT_REPORT_TEXT, o, err);
}

static int json_fn(FILE *f, const ft_replay_result *r, const ft_report_opts *o, ft_err *err)
{
    return ft_report_write_opts(f, r, NULL, FT_REPORT_JSON, o, err);
}

static void assert_has(const char *text, const char *want)
{
    if (!strstr(text, want)) fail_msg("missing \"%s\" in:\n%s", want, text);
}

static void assert_lacks(const char *text, const char *bad)
{
    if (strstr(text, bad)) fail_msg("unexpected \"%s\" in:\n%s", bad, text);
}

/* ---- recommendation ------------------------------------------------------------------------- */
static void test_report_recommendation_names_ties_and_savings(void **state)
{
    (void)state;
    const pol_spec ps[] = {
        {"te-pre3410", 900, 900, 0, 0},    {"te-3410", 40, 44, 336, 0},
        {"te-3410-commit1", 40, 44, 0, 0}, {"recipe-hash", 56, 44, 0, 0},
        {"fusion-attrs", 40, 44, 0, 0},    {"recipe-object", 70, 44, 0, 5},
    };
    ft_replay_result *r = make_result(ps, FT_ARRAY_LEN(ps), "te-pre3410");
    ft_recommend rec;
    ft_report_recommend(r, &rec);
    /* fusion-attrs and te-3410-commit1 tie on builds, but the historical one is not a policy TE
     * could adopt: it is not drawn (issue 21) */
    assert_int_equal(rec.n_best, 1);
    assert_string_equal(ft_policy_name(r->pol[rec.best[0]].policy), "fusion-attrs");
    assert_int_equal(rec.captured, 0);
    char *t = capture_text(ft_report_recommendation, r, NULL);
    assert_has(t, "- Use fusion-attrs: the fewest plan builds (40) among the policies TE could "
                  "adopt that never ran a stale plan.\n");
    assert_lacks(t, "Tied with it");
    /* savings against the captured run's policy, framework time at the assumed 100 us/build */
    assert_has(t, "Against te-pre3410, the policy of the captured run: 860 fewer plan builds (40 "
                  "instead of 900), 856 fewer recipe-state resets (44 instead of 900), and 86.000 "
                  "ms less framework time (assumed cost per build and reset)");
    /* what the others would have done, stale classes in words */
    assert_has(t, "te-3410: 40 builds, but a stale plan on 336 calls: raises in TE on 336 "
                  "(\"boom\").");
    assert_has(t,
               "recipe-object: 70 builds, but a stale plan on 5 calls: other quantization on 5.");
    assert_has(t, "recipe-hash: 56 builds, never stale, but 16 more builds than fusion-attrs.");
    assert_has(t, "te-3410-commit1 (historical: PR 3410's first commit, never released): 40 "
                  "builds, never stale: as few builds, but not a policy TE could adopt.");
    free(t);
    free(r);
}

static void test_report_recommendation_draws_from_policies_te_could_adopt(void **state)
{
    (void)state;
    /* the historical policy builds least and is never stale: still not recommended; the baseline
     * neither, in text, JSON and CSV */
    const pol_spec ps[] = {{"rebuild-always", 1000, 1000, 0, 0},
                           {"te-3410", 6, 3, 0, 0},
                           {"te-3410-commit1", 3, 3, 0, 0},
                           {"fusion-attrs", 6, 3, 0, 0}};
    ft_replay_result *r = make_result(ps, FT_ARRAY_LEN(ps), NULL);
    char *t = capture_text(ft_report_recommendation, r, NULL);
    assert_has(t,
               "- Use te-3410: the fewest plan builds (6) among the policies TE could adopt that "
               "never ran a stale plan. Tied with it: fusion-attrs.");
    assert_has(t, "  - te-3410-commit1 (historical: PR 3410's first commit, never released): 3 "
                  "builds, never stale and 3 fewer builds than te-3410, but not a policy TE could "
                  "adopt.");
    assert_has(t, "  - rebuild-always (baseline: no plan cache): 1000 builds, never stale, but 994 "
                  "more builds than te-3410.");
    assert_has(t, "The captured run's policy is unknown");
    free(t);
    t = capture_text(json_fn, r, NULL);
    json_t *doc = json_loads(t, 0, NULL);
    assert_non_null(doc);
    json_t *best = json_object_get(json_object_get(doc, "recommendation"), "policies");
    assert_int_equal(json_array_size(best), 2);
    assert_string_equal(json_string_value(json_array_get(best, 0)), "te-3410");
    assert_string_equal(json_string_value(json_array_get(best, 1)), "fusion-attrs");
    json_decref(doc);
    free(t);
    /* only non-adoptable policies replayed: no recommendation, and why */
    free(r);
    const pol_spec only[] = {{"rebuild-always", 1000, 1000, 0, 0}, {"te-3410-commit1", 3, 3, 0, 0}};
    r = make_result(only, FT_ARRAY_LEN(only), NULL);
    ft_recommend rec;
    ft_report_recommend(r, &rec);
    assert_int_equal(rec.n_best, 0);
    t = capture_text(ft_report_recommendation, r, NULL);
    assert_has(t, "None of the replayed policies is one TE could adopt");
    free(t);
    free(r);
}

static void test_report_recommendation_when_captured_is_best(void **state)
{
    (void)state;
    const pol_spec ps[] = {{"te-3410", 6, 3, 0, 0}, {"recipe-hash", 8, 3, 0, 0}};
    ft_replay_result *r = make_result(ps, FT_ARRAY_LEN(ps), "te-3410");
    char *t = capture_text(ft_report_recommendation, r, NULL);
    assert_has(t, "The captured run used te-3410, which is already as good: nothing to change.");
    free(t);
    /* every policy stale: no recommendation, but a reason */
    const pol_spec bad[] = {{"te-3410", 6, 3, 1, 0}, {"recipe-hash", 8, 3, 0, 2}};
    free(r);
    r = make_result(bad, FT_ARRAY_LEN(bad), "te-3410");
    ft_recommend rec;
    ft_report_recommend(r, &rec);
    assert_int_equal(rec.n_best, 0);
    t = capture_text(ft_report_recommendation, r, NULL);
    assert_has(t, "Every replayed policy that TE could adopt ran a stale plan");
    free(t);
    free(r);
}

static void test_report_reading_says_as_many_not_n_instead_of_n(void **state)
{
    (void)state;
    const pol_spec ps[] = {{"te-pre3410", 6, 6, 0, 0}, {"te-3410", 6, 6, 0, 0}};
    ft_replay_result *r = make_result(ps, FT_ARRAY_LEN(ps), NULL);
    char *t = capture_text(reading_fn, r, NULL);
    assert_has(t, "as many plan builds (6) and as many recipe-state resets (6)");
    assert_lacks(t, "6 instead of 6");
    free(t);
    free(r);
}

/* ---- framework time and names ---------------------------------------------------------------- */
static void test_report_framework_time_assumed_or_captured(void **state)
{
    (void)state;
    const pol_spec ps[] = {{"te-pre3410", 10, 12, 0, 0}, {"te-3410", 2, 3, 0, 0}};
    ft_replay_result *r = make_result(ps, FT_ARRAY_LEN(ps), NULL);
    ft_report_opts o;
    ft_report_opts_init(&o);
    int assumed = 0;
    assert_true(ft_report_framework_ns(r, &r->pol[0], &o, &assumed) ==
                10 * FT_REPORT_BUILD_NS + 12 * FT_REPORT_RESET_NS);
    assert_int_equal(assumed, 1);
    o.build_ns = 1000;
    o.reset_ns = 10;
    assert_true(ft_report_framework_ns(r, &r->pol[1], &o, NULL) == 2 * 1000.0 + 3 * 10.0);
    char *t = capture_text(text_fn, r, &o);
    assert_has(t, "ASSUMED (the trace has no captured fuse_ns): 1000 ns per build and 10 ns per "
                  "reset");
    assert_has(t, "framework-ms*");
    /* the long names of the stale classes, and no replayer timing by default */
    assert_has(t, "other fusion, same quantization");
    assert_has(t, "slower (unfused)");
    assert_has(t, "other quantization");
    assert_lacks(t, "ns/call");
    free(t);
    char *j = capture_text(json_fn, r, &o);
    json_t *doc = json_loads(j, 0, NULL);
    assert_non_null(doc);
    json_t *fw = json_object_get(doc, "framework");
    assert_string_equal(json_string_value(json_object_get(fw, "basis")), "assumed");
    json_t *p1 = json_array_get(json_object_get(doc, "policies"), 1);
    assert_true(json_real_value(json_object_get(p1, "framework_ns")) == 2030.0);
    assert_null(json_object_get(p1, "ns_per_call"));
    /* short keys stay, with their long labels beside them */
    assert_non_null(json_object_get(json_object_get(p1, "stale"), "harmless"));
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(doc, "stale_classes"), "harmless"), "label")),
        "other fusion, same quantization");
    json_decref(doc);
    free(j);
    /* captured fuse_ns: modeled from it, not assumed */
    r->cap_build_n = 4;
    r->cap_build_fuse_ns = 4 * 50000;
    assert_true(ft_report_framework_ns(r, &r->pol[0], &o, &assumed) == 10 * 50000.0);
    assert_int_equal(assumed, 0);
    free(r);
}

/* ---- the command: reproducible bytes ------------------------------------------------------- */
static void test_report_replay_output_is_reproducible(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char dir[1024], trace[1200], trace1[1200], cmd[4000];
    assert_int_equal(tu_dir_fresh(dir, sizeof dir, "test_report"), 0);
    tu_dir_path(trace, sizeof trace, dir, "rank0.ftdb");
    tu_dir_path(trace1, sizeof trace1, dir, "rank1.ftdb");
    /* two ranks, so that the reduction over traces (threads) is covered too */
    snprintf(cmd, sizeof cmd,
             "'%s' synth demo --set stages=2 --set stage_only=0 -o '%s' >/dev/null && '%s' synth "
             "demo --set stages=2 --set stage_only=1 -o '%s' >/dev/null",
             cli, trace, cli, trace1);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    static const char *const formats[] = {"", "--json", "--csv"};
    for (size_t i = 0; i < FT_ARRAY_LEN(formats); i++) {
        ft_buf a = {0}, b = {0};
        /* different thread counts too: the result must not depend on them */
        snprintf(cmd, sizeof cmd, "'%s' replay '%s' '%s' %s --threads 1", cli, trace, trace1,
                 formats[i]);
        assert_int_equal(tu_sh_buf(cmd, &a), 0);
        snprintf(cmd, sizeof cmd, "'%s' replay '%s' '%s' %s --threads 2", cli, trace, trace1,
                 formats[i]);
        assert_int_equal(tu_sh_buf(cmd, &b), 0);
        assert_true(a.len > 100);
        if (i == 1) {
            /* the JSON's provenance names the command, which differs in --threads: the rest is
             * the same, and its inputs are too */
            json_t *ja = json_loadb((const char *)a.data, a.len, 0, NULL);
            json_t *jb = json_loadb((const char *)b.data, b.len, 0, NULL);
            assert_non_null(ja);
            assert_non_null(jb);
            assert_has(
                json_string_value(json_object_get(json_object_get(ja, "provenance"), "command")),
                "--threads 1");
            json_object_del(json_object_get(ja, "provenance"), "command");
            json_object_del(json_object_get(jb, "provenance"), "command");
            if (!json_equal(ja, jb))
                fail_msg("replay --json differs between two runs:\n%s\n----\n%s", a.data, b.data);
            json_decref(ja);
            json_decref(jb);
        } else if (a.len != b.len || memcmp(a.data, b.data, a.len)) {
            fail_msg("replay %s differs between two runs:\n%s\n----\n%s", formats[i], a.data,
                     b.data);
        }
        assert_lacks((const char *)a.data, "ns/call");
        assert_lacks((const char *)a.data, "ns_per_call");
        ft_buf_free(&a);
        ft_buf_free(&b);
    }
    /* per-trace rows: one per rank, adding up to the totals */
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' '%s' --json", cli, trace, trace1);
    json_t *doc = sh_json(cmd);
    json_t *pt = json_object_get(doc, "per_trace");
    assert_int_equal(json_array_size(pt), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(pt, 1), "rank")), 1);
    size_t pi;
    json_t *pol;
    json_array_foreach(json_object_get(doc, "policies"), pi, pol)
    {
        json_int_t sum = 0;
        for (size_t k = 0; k < 2; k++)
            sum += json_integer_value(json_object_get(
                json_array_get(json_object_get(json_array_get(pt, k), "policies"), pi), "builds"));
        assert_int_equal(sum, json_integer_value(json_object_get(pol, "builds")));
    }
    json_decref(doc);
    ft_buf rows = {0};
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' '%s'", cli, trace, trace1);
    assert_int_equal(tu_sh_buf(cmd, &rows), 0);
    assert_has((const char *)rows.data, "per trace (rank)");
    assert_has((const char *)rows.data, "\n1      rank1.ftdb");
    ft_buf_free(&rows);
    /* --timing brings the replayer's own figures back */
    ft_buf t = {0};
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --timing", cli, trace);
    assert_int_equal(tu_sh_buf(cmd, &t), 0);
    assert_has((const char *)t.data, "ns/call");
    ft_buf_free(&t);
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --build-ns -1 2>&1", cli, trace);
    assert_int_equal(tu_sh(cmd, NULL, 0), 2);
    assert_int_equal(tu_dir_remove(dir), 0);
}

/* ---- HTML --------------------------------------------------------------------------------------
 */
static int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* Chromium's verdict on an HTML file: the page's check script writes it into <html
 * data-ft-check> once the page is laid out ("" when chromium did not run). */
static void chromium_status(const char *dir, const char *html, char *out, size_t cap)
{
    char cmd[4000], dom[1 << 16];
    snprintf(cmd, sizeof cmd,
             "HOME='%s' chromium --headless --disable-gpu --no-sandbox --user-data-dir='%s/chr' "
             "--window-size=1100,900 --dump-dom 'file://%s' 2>/dev/null",
             dir, dir, html);
    out[0] = 0;
    if (tu_sh(cmd, dom, sizeof dom) != 0) return;
    const char *m = strstr(dom, "data-ft-check=\"");
    if (!m) return;
    m += strlen("data-ft-check=\"");
    size_t n = strcspn(m, "\"");
    snprintf(out, cap, "%.*s", (int)n, m);
}

/* A screenshot of the rendered page (PNG), kept beside the test's files for a person to look
 * at; its size, or 0 when chromium wrote none. */
static long chromium_screenshot(const char *dir, const char *html, const char *png)
{
    char cmd[4000];
    snprintf(cmd, sizeof cmd,
             "HOME='%s' chromium --headless --disable-gpu --no-sandbox --user-data-dir='%s/chr' "
             "--hide-scrollbars --window-size=1100,3000 --screenshot='%s' 'file://%s' "
             ">/dev/null 2>&1",
             dir, dir, png, html);
    if (tu_sh(cmd, NULL, 0) != 0) return 0;
    size_t len = 0;
    char *b = tu_read_file(png, &len);
    long got = b && len > 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8) ? (long)len : 0;
    free(b);
    return got;
}

/* page with `inject` put right after <body> (or, with after_svg, inside the first chart), as
 * bad.html; the check's verdict on it. */
static void verdict_of_broken(const char *dir, const char *page, const char *inject, int in_chart,
                              char *status, size_t cap)
{
    char bad[1200];
    tu_dir_path(bad, sizeof bad, dir, "bad.html");
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    const char *at = in_chart ? strstr(page, "<svg class=\"chart\"") : strstr(page, "<body>");
    assert_non_null(at);
    at = strchr(at, '>') + 1;
    fwrite(page, 1, (size_t)(at - page), f);
    fputs(inject, f);
    fputs(at, f);
    fclose(f);
    chromium_status(dir, bad, status, cap);
}

static void test_report_html_is_self_contained_and_renders(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char dir[1024], r0[1200], r1[1200], html[1200], png[1200], cmd[8000];
    assert_int_equal(tu_dir_fresh(dir, sizeof dir, "test_report_html"), 0);
    tu_dir_path(r0, sizeof r0, dir, "rank0.ftdb");
    tu_dir_path(r1, sizeof r1, dir, "rank1.ftdb");
    tu_dir_path(html, sizeof html, dir, "report.html");
    /* the screenshots stay in the build folder after the test, for a person to look at */
    snprintf(png, sizeof png, "%s/test_report_html.png", FT_BINARY_DIR);
    /* two ranks of one pipeline run */
    snprintf(cmd, sizeof cmd,
             "'%s' synth demo --set stages=2 --set stage_only=0 -o '%s' >/dev/null && '%s' synth "
             "demo --set stages=2 --set stage_only=1 -o '%s' >/dev/null",
             cli, r0, cli, r1);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' '%s' --explain --html '%s' >/dev/null 2>&1", cli,
             r0, r1, html);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    size_t len = 0;
    char *page = tu_read_file(html, &len);
    assert_non_null(page);
    /* self-contained: nothing to fetch (the SVG namespace is a name, not a fetch) */
    assert_int_equal(count_of(page, "http://") - count_of(page, "http://www.w3.org/2000/svg"), 0);
    assert_int_equal(count_of(page, "https://"), 0);
    assert_int_equal(count_of(page, " src="), 0);
    assert_int_equal(count_of(page, "<link"), 0);
    assert_has(page, "@media print");
    /* the sections: recommendation, summary, charts, breakdowns, causes, provenance */
    assert_has(page, "<h2>Recommendation</h2>");
    assert_has(page, "Use fusion-attrs");
    assert_has(page, "id=\"chart-builds\"");
    assert_has(page, "id=\"chart-resets\"");
    assert_has(page, "id=\"chart-hits\"");
    assert_has(page, "id=\"chart-stale-");
    assert_has(page, "id=\"chart-time\"");
    assert_has(page, "decoder.layers.0.mlp.experts");
    assert_has(page, ">recompute</td>");
    assert_has(page, "rank0.ftdb");
    assert_has(page, "rank1.ftdb");
    assert_has(page, "Why plans were built and went stale");
    assert_has(page, "XXH3-64");
    assert_has(page, "fusertrace 0.");
    assert_has(page, "other fusion, same quantization");
    /* issue 21: no test marker in the page; legends are HTML (never cut by the chart's frame);
     * coinciding lines are said; severity colours: harmless is not the colour of raises */
    assert_lacks(page, "ft-charts-ok");
    assert_lacks(page, "ft-status");
    assert_has(page, "<figcaption class=\"lgd\">");
    assert_has(page, "share this line)");
    int n_charts = count_of(page, "<svg class=\"chart\"");
    assert_true(n_charts >= 5);
    /* headless Chromium: the page's own check of what it rendered passes, with every chart */
    if (tu_sh("command -v chromium >/dev/null 2>&1", NULL, 0) != 0) {
        free(page);
        assert_int_equal(tu_dir_remove(dir), 0);
        print_message("chromium not installed: skipping the rendering check\n");
        skip();
    }
    char status[512], want[64];
    chromium_status(dir, html, status, sizeof status);
    snprintf(want, sizeof want, "ok %d", n_charts);
    assert_string_equal(status, want);
    long shot = chromium_screenshot(dir, html, png);
    print_message("screenshot of the report: %s (%ld bytes)\n", png, shot);
    assert_true(shot > 20000);
    /* the check can fail, on each property it checks */
    static const struct {
        const char *inject;
        int in_chart;
        const char *want;
    } broken[] = {
        {"<script>no_such_function();</script>", 0, "script errors"},
        {"<svg class=\"chart\" viewBox=\"0 0 10 10\"></svg>", 0, ": empty"},
        {"<text x=\"700\" y=\"20\">a legend that runs past the frame</text>", 1,
         "text outside the chart"},
        {"<text class=\"tk tx\" x=\"300\" y=\"280\">0.5</text>", 1, "on whole numbers"},
        {"<span class=\"sw\" data-policy=\"te-3410\" style=\"background:#ff00ff\"></span>", 0,
         "policy te-3410: 2 colours"},
        {"<span class=\"sw\" data-class=\"harmless\" style=\"background:#d73027\"></span>", 0,
         "harmless in the colour of raises"},
    };
    for (size_t k = 0; k < FT_ARRAY_LEN(broken); k++) {
        verdict_of_broken(dir, page, broken[k].inject, broken[k].in_chart, status, sizeof status);
        if (strncmp(status, "bad: ", 5) || !strstr(status, broken[k].want))
            fail_msg("broken page %zu: verdict \"%s\", wanted \"%s\"", k, status, broken[k].want);
    }
    /* a line drawn twice with the same dashes hides the other */
    const char *ln = strstr(page, "<path class=\"ln\"");
    assert_non_null(ln);
    char twice[4096];
    snprintf(twice, sizeof twice, "%.*s", (int)(strstr(ln, "</path>") + 7 - ln), ln);
    char *dp = strstr(twice, "data-policy=\"");
    assert_non_null(dp);
    memcpy(dp + strlen("data-policy=\""), "X", 1); /* another name, the same line */
    verdict_of_broken(dir, page, twice, 1, status, sizeof status);
    assert_non_null(strstr(status, " hides "));
    free(page);
    /* with --numerics: the bands as a table and a chart, each format's fresh error as the
     * reference, no zero minimum drawn as a bar; the causes stay (issue 21) */
    snprintf(cmd, sizeof cmd,
             "'%s' replay '%s' --explain --numerics cpu --shrink 16 --sample 8 --html '%s' "
             ">/dev/null 2>&1",
             cli, r0, html);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    page = tu_read_file(html, &len);
    assert_non_null(page);
    assert_has(page, "<h2>Numerics</h2>");
    assert_has(page, "id=\"chart-bands\"");
    assert_has(page, "harmless band (other fusion, same quantization)");
    assert_has(page, "fresh plans vs float64, NVFP4");
    assert_has(page, "identical to the fresh plan");
    assert_has(page, "Why plans were built and went stale");
    n_charts = count_of(page, "<svg class=\"chart\"");
    chromium_status(dir, html, status, sizeof status);
    snprintf(want, sizeof want, "ok %d", n_charts);
    assert_string_equal(status, want);
    snprintf(png, sizeof png, "%s/test_report_html_numerics.png", FT_BINARY_DIR);
    shot = chromium_screenshot(dir, html, png);
    print_message("screenshot of the numerics report: %s (%ld bytes)\n", png, shot);
    assert_true(shot > 20000);
    free(page);
    /* --html -: stdout holds the page alone, the text report goes to stderr */
    char out_html[1200], out_err[1200];
    tu_dir_path(out_html, sizeof out_html, dir, "stdout.html");
    tu_dir_path(out_err, sizeof out_err, dir, "stderr.txt");
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --html - >'%s' 2>'%s'", cli, r0, out_html, out_err);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    page = tu_read_file(out_html, &len);
    assert_non_null(page);
    assert_true(!strncmp(page, "<!DOCTYPE html>", 15));
    assert_true(len > 8 && !strcmp(page + len - 8, "</html>\n"));
    assert_lacks(page, "Recommendation:\n");
    free(page);
    page = tu_read_file(out_err, &len);
    assert_non_null(page);
    assert_has(page, "Recommendation:\n");
    free(page);
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --html - --json >/dev/null 2>&1", cli, r0);
    assert_int_equal(tu_sh(cmd, NULL, 0), 2);
    assert_int_equal(tu_dir_remove(dir), 0);
}

static void test_report_inputs_one_rank_each(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char dir[1024], r0[1200], r1[1200], cmd[8000], out[4096];
    assert_int_equal(tu_dir_fresh(dir, sizeof dir, "test_report_ranks"), 0);
    tu_dir_path(r0, sizeof r0, dir, "a.ftdb");
    tu_dir_path(r1, sizeof r1, dir, "b.ftdb");
    /* the same rank twice: an error naming both files */
    snprintf(cmd, sizeof cmd,
             "'%s' synth demo -o '%s' >/dev/null && '%s' synth demo --seed 2 -o '%s' >/dev/null",
             cli, r0, cli, r1);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' '%s' 2>&1", cli, r0, r1);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    assert_has(out, "a.ftdb and ");
    assert_has(out, "b.ftdb are both rank 0");
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' '%s' --html '%s/x.html' 2>&1", cli, r0, r1, dir);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "test -e '%s/x.html'", dir);
    assert_int_not_equal(tu_sh(cmd, NULL, 0), 0); /* no half-written report */
    /* two ranks of what look like different runs (another TE version): a warning, and a report */
    char c0[1200], c1[1200];
    tu_dir_path(c0, sizeof c0, dir, "c0.ftdb");
    tu_dir_path(c1, sizeof c1, dir, "c1.ftdb");
    snprintf(cmd, sizeof cmd,
             "sed '1s/\"rank\":0,\"world_size\":1/\"rank\":0,\"world_size\":2/' "
             "'%s/traces/rht-round-trips.jsonl' | '%s' import - -o '%s' && sed "
             "'1s/\"te_version\":\"2.20.2\",\"rank\":0,\"world_size\":1/\"te_version\":"
             "\"2.21.0\",\"rank\":1,\"world_size\":2/' '%s/traces/rht-round-trips.jsonl' | "
             "'%s' import - -o '%s'",
             FT_SOURCE_DIR, cli, c0, FT_SOURCE_DIR, cli, c1);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' '%s' 2>&1 >/dev/null", cli, c0, c1);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    assert_has(out, "warning: ");
    assert_has(out, "look like different runs: TE version '2.20.2' and '2.21.0'");
    /* two ranks of one multi-node run: other hosts, start stamps seconds apart: no warning */
    unlink(c0);
    unlink(c1);
    snprintf(
        cmd, sizeof cmd,
        "for r in 0 1; do sed \"1s/\\\"rank\\\":0,\\\"world_size\\\":1/\\\"host\\\":\\\"node$r\\\","
        "\\\"started_at\\\":\\\"2026-12-01T10:00:0${r}Z\\\",\\\"rank\\\":$r,"
        "\\\"world_size\\\":2/\" '%s/traces/rht-round-trips.jsonl' | '%s' import - -o "
        "'%s/c'$r.ftdb || exit 1; done",
        FT_SOURCE_DIR, cli, dir);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' '%s' 2>&1 >/dev/null", cli, c0, c1);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    assert_string_equal(out, "");
    assert_int_equal(tu_dir_remove(dir), 0);
}

/* ---- diff
 * ---------------------------------------------------------------------------------------- */
static json_t *sh_json(const char *cmd)
{
    ft_buf b = {0};
    assert_int_equal(tu_sh_buf(cmd, &b), 0);
    json_t *doc = json_loadb((const char *)b.data, b.len, 0, NULL);
    if (!doc) fail_msg("%s: not JSON:\n%s", cmd, b.data);
    ft_buf_free(&b);
    return doc;
}

static void test_report_diff_traces_and_saved_reports(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char dir[1024], a[1200], b[1200], saved[1200], cmd[8000], out[4096];
    assert_int_equal(tu_dir_fresh(dir, sizeof dir, "test_report_diff"), 0);
    tu_dir_path(a, sizeof a, dir, "a.ftdb");
    tu_dir_path(b, sizeof b, dir, "b.ftdb");
    tu_dir_path(saved, sizeof saved, dir, "a.json");
    snprintf(cmd, sizeof cmd,
             "'%s' synth demo -o '%s' >/dev/null && '%s' synth rht-switch -o '%s' >/dev/null && "
             "'%s' replay '%s' --json > '%s'",
             cli, a, cli, b, cli, a, saved);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    /* a trace against its own saved report: nothing differs */
    snprintf(cmd, sizeof cmd, "'%s' diff '%s' '%s' --json", cli, a, saved);
    json_t *d = sh_json(cmd);
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(d, "policies"), i, row)
    {
        const char *k;
        json_t *cell;
        json_object_foreach(row, k, cell)
        {
            if (!json_is_object(cell)) continue;
            assert_true(json_real_value(json_object_get(cell, "delta")) == 0.0);
        }
    }
    assert_int_equal(json_array_size(json_object_get(d, "policies")), ft_policy_count());
    json_decref(d);
    /* two traces: each side is what replay reports for it */
    snprintf(cmd, sizeof cmd, "'%s' diff '%s' '%s' --json", cli, saved, b);
    d = sh_json(cmd);
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --json", cli, b);
    json_t *rb = sh_json(cmd), *ra = json_load_file(saved, 0, NULL);
    assert_non_null(ra);
    json_array_foreach(json_object_get(d, "policies"), i, row)
    {
        json_t *pa = json_array_get(json_object_get(ra, "policies"), i);
        json_t *pb = json_array_get(json_object_get(rb, "policies"), i);
        assert_string_equal(json_string_value(json_object_get(row, "policy")),
                            json_string_value(json_object_get(pb, "policy")));
        json_t *c = json_object_get(row, "builds");
        double wa = (double)json_integer_value(json_object_get(pa, "builds"));
        double wb = (double)json_integer_value(json_object_get(pb, "builds"));
        assert_true(json_real_value(json_object_get(c, "a")) == wa);
        assert_true(json_real_value(json_object_get(c, "b")) == wb);
        assert_true(json_real_value(json_object_get(c, "delta")) == wb - wa);
        c = json_object_get(row, "stale_raises");
        assert_true(
            json_real_value(json_object_get(c, "b")) ==
            (double)json_integer_value(json_object_get(json_object_get(pb, "stale"), "raises")));
    }
    json_decref(d);
    json_decref(ra);
    json_decref(rb);
    /* text names the classes in words; bad input: exit 2 naming the file */
    snprintf(cmd, sizeof cmd, "'%s' diff '%s' '%s'", cli, a, b);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    assert_has(out, "stale: raises in TE");
    snprintf(cmd, sizeof cmd,
             "echo '{\"x\":1}' > '%s/bad.json' && '%s' diff '%s' '%s/bad.json' 2>&1", dir, cli, a,
             dir);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    assert_has(out, "bad.json");
    assert_int_equal(tu_dir_remove(dir), 0);
}

/* ---- filters ------------------------------------------------------------------------------------
 */
/* builds[p], resets[p], calls[p] of a replay --json run. */
static void policy_counts(const char *cmd, double *builds, double *resets, double *calls)
{
    json_t *doc = sh_json(cmd);
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(doc, "policies"), i, p)
    {
        builds[i] += (double)json_integer_value(json_object_get(p, "builds"));
        resets[i] += (double)json_integer_value(json_object_get(p, "resets"));
        calls[i] += (double)json_integer_value(json_object_get(p, "calls"));
    }
    json_decref(doc);
}

static void test_report_filters_partition_the_counts(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char dir[1024], t[1200], cmd[8000];
    assert_int_equal(tu_dir_fresh(dir, sizeof dir, "test_report_filter"), 0);
    tu_dir_path(t, sizeof t, dir, "demo.ftdb");
    snprintf(cmd, sizeof cmd, "'%s' synth demo -o '%s' >/dev/null", cli, t);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    enum { NP = FT_MAX_POLICIES };
    double all_b[NP] = {0}, all_r[NP] = {0}, all_c[NP] = {0};
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --json", cli, t);
    policy_counts(cmd, all_b, all_r, all_c);
    /* the phases, the two label families and two step ranges each partition the calls: their
     * counts add up to the unfiltered ones, policy by policy */
    static const char *const parts[][3] = {
        {"--phase fwd", "--phase recompute", "--phase eval"},
        {"--fuser '*.experts'", "--fuser '*.shared_experts'", NULL},
        {"--steps 0:7", "--steps 8:", NULL},
    };
    for (size_t k = 0; k < FT_ARRAY_LEN(parts); k++) {
        double b[NP] = {0}, r[NP] = {0}, c[NP] = {0};
        for (int j = 0; j < 3 && parts[k][j]; j++) {
            snprintf(cmd, sizeof cmd, "'%s' replay '%s' --json %s", cli, t, parts[k][j]);
            policy_counts(cmd, b, r, c);
        }
        for (uint32_t p = 0; p < ft_policy_count(); p++) {
            if (c[p] != all_c[p] || b[p] != all_b[p] || r[p] != all_r[p])
                fail_msg("%s ...: policy %u: %g calls %g builds %g resets, unfiltered %g %g %g",
                         parts[k][0], p, c[p], b[p], r[p], all_c[p], all_b[p], all_r[p]);
        }
    }
    /* a filter is said, and a phase that no call has counts nothing */
    ft_buf out = {0};
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --phase nosuch", cli, t);
    assert_int_equal(tu_sh_buf(cmd, &out), 0);
    assert_has((const char *)out.data, "counted: only the calls with phase nosuch");
    assert_has((const char *)out.data, ", 0 calls,");
    ft_buf_free(&out);
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --steps 9:3 2>&1", cli, t);
    assert_int_equal(tu_sh(cmd, NULL, 0), 2);
    /* --env: a key the model does not read is a warning that lists the ones it reads */
    char err[4096];
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --env foo=bar 2>&1 >/dev/null", cli, t);
    assert_int_equal(tu_sh(cmd, err, sizeof err), 0);
    assert_has(err, "warning: --env foo: the model reads no such key");
    assert_has(err, "device_cc");
    assert_has(err, "NVTE_NVFP4_DISABLE_RHT");
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --env device_cc=9.0 2>&1 >/dev/null", cli, t);
    assert_int_equal(tu_sh(cmd, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_int_equal(tu_dir_remove(dir), 0);
}

/* ---- the builds' causes ---------------------------------------------------------------------- */
/* From the HTML's causes table: per policy slot, the calls of its build rows and of its stale-hit
 * rows. */
static void html_cause_sums(const char *page, long *builds, long *stale)
{
    const char *sec = strstr(page, "<section id=\"explain\">");
    assert_non_null(sec);
    const char *end = strstr(sec, "</section>");
    int p = -1;
    for (const char *tr = strstr(sec, "<tr><td class=\"pol\">"); tr && tr < end;
         tr = strstr(tr + 1, "<tr><td class=\"pol\">")) {
        const char *td2 = strstr(tr, "</td><td>"),
                   *what = td2 ? strstr(td2, "<td class=\"pol\">") : NULL;
        assert_non_null(what);
        if (strncmp(tr + strlen("<tr><td class=\"pol\">"), "</td>", 5))
            p++; /* a policy's first row */
        const long n = strtol(td2 + strlen("</td><td>"), NULL, 10);
        if (!strncmp(what + strlen("<td class=\"pol\">"), "builds", 6))
            builds[p] += n;
        else
            stale[p] += n;
    }
}

/* The HTML report counts the causes the --explain lines name, from the same view, also when
 * --numerics runs in the same command (issue 21): per policy, the build rows add up to its
 * explain build lines and to its builds, the stale-hit rows to its stale explain lines. */
static void test_report_causes_match_explain_lines(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char dir[1024], t[1200], html[1200], cmd[8000];
    assert_int_equal(tu_dir_fresh(dir, sizeof dir, "test_report_causes"), 0);
    tu_dir_path(t, sizeof t, dir, "demo.ftdb");
    tu_dir_path(html, sizeof html, dir, "r.html");
    snprintf(cmd, sizeof cmd, "'%s' synth demo -o '%s' >/dev/null", cli, t);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    snprintf(cmd, sizeof cmd,
             "'%s' replay '%s' --explain --numerics cpu --shrink 16 --sample 4 --html '%s' "
             "2>/dev/null",
             cli, t, html);
    ft_buf out = {0};
    assert_int_equal(tu_sh_buf(cmd, &out), 0);
    assert_int_equal(ft_buf_append(&out, "", 1), FT_OK);
    size_t len = 0;
    char *page = tu_read_file(html, &len);
    assert_non_null(page);
    assert_has(page, "<h2>Numerics</h2>");
    long builds[FT_MAX_POLICIES] = {0}, stale[FT_MAX_POLICIES] = {0};
    html_cause_sums(page, builds, stale);
    for (uint32_t p = 0; p < ft_policy_count(); p++) {
        char pfx[64];
        snprintf(pfx, sizeof pfx, "[explain] %s seq=", ft_policy_name(p));
        long lb = 0, ls = 0;
        for (const char *l = strstr((const char *)out.data, pfx); l; l = strstr(l + 1, pfx)) {
            const char *eol = strchr(l, '\n'), *b = strstr(l, "build because "),
                       *st = strstr(l, ": stale (");
            lb += b && (!eol || b < eol);
            ls += st && (!eol || st < eol);
        }
        if (lb != builds[p] || ls != stale[p])
            fail_msg("%s: %ld/%ld explain build/stale lines, HTML rows %ld/%ld", ft_policy_name(p),
                     lb, ls, builds[p], stale[p]);
    }
    assert_int_equal(stale[2], 336); /* te-3410: PR 3410's stale hits */
    assert_has(page, "<td class=\"pol\">disable_rht False -&gt; True</td>");
    ft_free(page);
    ft_buf_free(&out);
    assert_int_equal(tu_dir_remove(dir), 0);
}

/* Cause totals per policy (issue 21): the builds by what changed since the fuser's previous call
 * and the stale hits by what changed since their plan's build, with attribute names and values,
 * in text and JSON; they add up to the builds and stale calls; --explain names stale hits too. */
static void test_report_cause_totals_and_stale_hits_explained(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char dir[1024], t[1200], cmd[8000];
    assert_int_equal(tu_dir_fresh(dir, sizeof dir, "test_report_totals"), 0);
    tu_dir_path(t, sizeof t, dir, "demo.ftdb");
    snprintf(cmd, sizeof cmd, "'%s' synth demo -o '%s' >/dev/null", cli, t);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' 2>/dev/null", cli, t);
    ft_buf out = {0};
    assert_int_equal(tu_sh_buf(cmd, &out), 0);
    const char *text = (const char *)out.data;
    assert_has(text, "why plans were built (what changed since the fuser's previous call)");
    assert_has(text, "  te-pre3410            1536 builds: grad mode on (recompute 1536)\n");
    assert_has(text, "  te-3410                336 stale hits (raises in TE): disable_rht False -> "
                     "True (fwd 160, recompute 160, eval 16)\n");
    assert_lacks(text, "recipe attrs");
    ft_buf_free(&out);
    /* JSON: every build and every stale call has one cause row */
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --json 2>/dev/null", cli, t);
    json_t *doc = sh_json(cmd);
    json_t *pols = json_object_get(doc, "policies");
    assert_int_equal(json_array_size(pols), ft_policy_count());
    int checked_3410 = 0;
    for (size_t i = 0; i < json_array_size(pols); i++) {
        json_t *p = json_array_get(pols, i), *c = json_object_get(p, "causes");
        assert_non_null(c);
        json_int_t builds = 0, stale = 0, n_stale = 0;
        for (size_t k = 0; k < json_array_size(json_object_get(c, "builds")); k++)
            builds += json_integer_value(
                json_object_get(json_array_get(json_object_get(c, "builds"), k), "calls"));
        for (size_t k = 0; k < json_array_size(json_object_get(c, "stale_hits")); k++)
            stale += json_integer_value(
                json_object_get(json_array_get(json_object_get(c, "stale_hits"), k), "calls"));
        const char *cls[] = {"harmless", "slower", "quant", "raises"};
        for (size_t k = 0; k < 4; k++)
            n_stale += json_integer_value(json_object_get(json_object_get(p, "stale"), cls[k]));
        assert_int_equal(builds, json_integer_value(json_object_get(p, "builds")));
        assert_int_equal(stale, n_stale);
        if (strcmp(json_string_value(json_object_get(p, "policy")), "te-3410")) continue;
        json_t *hit = json_array_get(json_object_get(c, "stale_hits"), 0);
        assert_string_equal(json_string_value(json_object_get(hit, "class")), "raises");
        json_t *ch = json_array_get(json_object_get(hit, "changes"), 0);
        assert_string_equal(json_string_value(json_object_get(ch, "attribute")), "disable_rht");
        assert_string_equal(json_string_value(json_object_get(ch, "from")), "False");
        assert_string_equal(json_string_value(json_object_get(ch, "to")), "True");
        checked_3410 = 1;
    }
    assert_true(checked_3410);
    json_decref(doc);
    /* --explain: the stale hit of PR 3410 (reset, no build, the disable_rht=False plan) */
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --policy te-3410 --explain 2>/dev/null", cli, t);
    assert_int_equal(tu_sh_buf(cmd, &out), 0);
    text = (const char *)out.data;
    assert_has(text, "[explain] te-3410 seq=2042 fuser=3 (decoder.layers.1.mlp.experts): reset, no "
                     "build: stale (raises in TE): runs the plan built at seq 2; since then "
                     "disable_rht False -> True, which its key does not hold\n");
    assert_int_equal(count_of(text, ": stale (raises in TE)"), 336);
    ft_buf_free(&out);
    assert_int_equal(tu_dir_remove(dir), 0);
}

/* The JSON report carries its provenance as the HTML does (issue 21): the tool, the command, each
 * input's path, size and digest (the HTML's), and the options. */
static void test_report_json_has_provenance(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char dir[1024], t[1200], html[1200], cmd[8000];
    assert_int_equal(tu_dir_fresh(dir, sizeof dir, "test_report_prov"), 0);
    tu_dir_path(t, sizeof t, dir, "demo.ftdb");
    tu_dir_path(html, sizeof html, dir, "r.html");
    snprintf(cmd, sizeof cmd, "'%s' synth demo -o '%s' >/dev/null", cli, t);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --json --html '%s' --build-ns 5000 2>/dev/null",
             cli, t, html);
    json_t *doc = sh_json(cmd);
    json_t *prov = json_object_get(doc, "provenance");
    assert_non_null(prov);
    assert_has(json_string_value(json_object_get(prov, "tool")), "fusertrace 0.");
    assert_has(json_string_value(json_object_get(prov, "command")), "replay");
    assert_has(json_string_value(json_object_get(prov, "command")), "--build-ns 5000");
    json_t *in = json_array_get(json_object_get(prov, "inputs"), 0);
    assert_string_equal(json_string_value(json_object_get(in, "path")), t);
    size_t len = 0;
    char *bytes = tu_read_file(t, &len);
    assert_non_null(bytes);
    free(bytes);
    assert_int_equal(json_integer_value(json_object_get(in, "bytes")), (json_int_t)len);
    assert_int_equal(json_integer_value(json_object_get(in, "calls")), 3168);
    char *page = tu_read_file(html, &len);
    assert_non_null(page);
    char code[64];
    snprintf(code, sizeof code, "<code>%s</code>",
             json_string_value(json_object_get(in, "xxh3_64")));
    assert_has(page, code); /* the HTML's digest of the same file */
    free(page);
    json_t *opt = json_object_get(prov, "options");
    assert_int_equal(json_array_size(json_object_get(opt, "policies")), ft_policy_count());
    assert_true(json_real_value(json_object_get(opt, "build_ns")) == 5000.0);
    json_decref(doc);
    assert_int_equal(tu_dir_remove(dir), 0);
}

/* ---- why nothing fuses ----------------------------------------------------------------------- */
static const char env_sm100[] = "{\"device_cc\":\"10.0\",\"cudnn_frontend\":\"1.27.0\","
                                "\"cublaslt\":\"13.4.0\",\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\"}";

/* A grouped-MLP fuser (GroupedLinear, ScaledSwiGLU, GroupedLinear) with fc2 out_features n2 and
 * the activation's glu_interleave_size il, under MXFP8. */
static ft_model *mlp_model(int n2, int il, const char *env)
{
    char ops[1024];
    snprintf(ops, sizeof ops,
             "[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":8,\"in_features\":%d,"
             "\"out_features\":256,\"bias\":false,\"dtype\":\"bfloat16\"}},"
             "{\"type\":\"ScaledSwiGLU\",\"attrs\":{\"glu_interleave_size\":%d}},"
             "{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":8,\"in_features\":128,"
             "\"out_features\":%d,\"bias\":false,\"dtype\":\"bfloat16\"}}]",
             n2, il, n2);
    ft_fuser_def fd = {.id = 7, .label = "layers.0.mlp", .ops_json = ops, .n_ops = 3};
    ft_recipe_def rd = {.id = 1, .type = "MXFP8BlockScaling", .obj = 1, .attrs_json = "{}"};
    ft_model *m = NULL;
    ft_err err = {0};
    if (ft_model_new(&fd, 1, &rd, 1, &(ft_model_capture){.env_json = env}, NULL, 0, &m, &err))
        fail_msg("model: %s", ft_err_msg(&err));
    return m;
}

static void test_report_why_unfused_names_the_gate(void **state)
{
    (void)state;
    ft_unfused_why w;
    /* everything right: it fuses, nothing to say */
    ft_model *m = mlp_model(64, 32, env_sm100);
    assert_int_equal(ft_model_why_unfused(m, 0, 0, &w), 0);
    /* no recipe: the gate's recipe read */
    assert_int_equal(ft_model_why_unfused(m, 0, -1, &w), 1);
    assert_string_equal(w.func, "fuse_ops");
    assert_string_equal(w.fused, "GroupedMLP_CuTeGEMMGLU");
    assert_has(w.reason, "the fuse_ops gate, ops 0-2: no recipe (quantization off)");
    ft_model_free(m);
    /* a wrong op attribute: the interleave size, and where the value came from */
    m = mlp_model(64, 16, env_sm100);
    assert_int_equal(ft_model_why_unfused(m, 0, 0, &w), 1);
    assert_int_equal(w.n_blocks, 1);
    assert_string_equal(w.block[0].what, "op 1 (ScaledSwiGLU) glu_interleave_size = 16");
    assert_string_equal(w.block[0].need, "32");
    assert_string_equal(w.block[0].source, "the capture");
    ft_model_free(m);
    /* a dimension the kernel cannot take */
    m = mlp_model(100, 32, env_sm100);
    assert_int_equal(ft_model_why_unfused(m, 0, 0, &w), 1);
    assert_has(w.reason, "op 2 (GroupedLinear) out_features = 100 (needs a multiple of 64");
    ft_model_free(m);
    /* the device capability: not registered at all */
    m = mlp_model(64, 32,
                  "{\"device_cc\":\"9.0\",\"cudnn_frontend\":\"1.27.0\","
                  "\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\"}");
    assert_int_equal(ft_model_why_unfused(m, 0, 0, &w), 1);
    assert_has(w.reason, "not registered: env device_cc = '9.0' (needs 10.x (SM100); from the "
                         "capture)");
    ft_model_free(m);
    /* issue 21: a capture blocked by the NVTE flag, the device, the cuDNN frontend and
     * glu_interleave_size: all four in one answer, each with its value and source */
    ft_env_kv ov[] = {{"device_cc", "9.0"}};
    char ops[1024];
    snprintf(ops, sizeof ops,
             "[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":8,\"in_features\":64,"
             "\"out_features\":256,\"bias\":false,\"dtype\":\"bfloat16\"}},"
             "{\"type\":\"ScaledSwiGLU\",\"attrs\":{\"glu_interleave_size\":16}},"
             "{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":8,\"in_features\":128,"
             "\"out_features\":64,\"bias\":false,\"dtype\":\"bfloat16\"}}]");
    ft_fuser_def f1 = {.id = 7, .label = "layers.0.mlp", .ops_json = ops, .n_ops = 3};
    ft_recipe_def rd = {.id = 1, .type = "MXFP8BlockScaling", .obj = 1, .attrs_json = "{}"};
    ft_err err = {0};
    assert_int_equal(ft_model_new(&f1, 1, &rd, 1,
                                  &(ft_model_capture){.env_json = "{\"cudnn_frontend\":null}"}, ov,
                                  1, &m, &err),
                     FT_OK);
    assert_int_equal(ft_model_why_unfused(m, 0, 0, &w), 1);
    assert_int_equal(w.n_registration, 3);
    assert_int_equal(w.n_blocks, 4);
    assert_string_equal(w.block[0].what, "env NVTE_CUTEDSL_FUSED_GROUPED_MLP absent");
    assert_has(w.block[0].source, "assumed: unset (TE's default \"0\")");
    assert_string_equal(w.block[1].what, "env device_cc = '9.0'");
    assert_string_equal(w.block[1].source, "--env");
    assert_string_equal(w.block[2].what, "env cudnn_frontend = None");
    assert_string_equal(w.block[2].source, "the capture");
    assert_string_equal(w.block[3].what, "op 1 (ScaledSwiGLU) glu_interleave_size = 16");
    assert_false(w.env_empty);
    assert_lacks(w.reason, "= 0");
    ft_model_free(m);
    /* an empty captured env is said, and nothing absent reads "= 0" */
    m = mlp_model(64, 32, "{}");
    assert_int_equal(ft_model_why_unfused(m, 0, 0, &w), 1);
    assert_true(w.env_empty);
    assert_has(w.reason, "env device_cc absent (needs 10.x (SM100); assumed: no CUDA device");
    assert_lacks(w.reason, "= 0");
    ft_model_free(m);
    /* the report says it, for a run whose grouped MLPs never fuse, and not for one where they do */
    const char *cli = tu_cli();
    if (!cli) return;
    char dir[1024], t[1200], cmd[4000];
    ft_buf out = {0};
    assert_int_equal(tu_dir_fresh(dir, sizeof dir, "test_report_unfused"), 0);
    tu_dir_path(t, sizeof t, dir, "nf.ftdb");
    snprintf(cmd, sizeof cmd,
             "'%s' synth demo --set hidden=100 -o '%s' >/dev/null && '%s' replay '%s'", cli, t, cli,
             t);
    assert_int_equal(tu_sh_buf(cmd, &out), 0);
    assert_has((const char *)out.data, "Why nothing fuses: GroupedMLP_CuTeGEMMGLU never forms in 6 "
                                       "fusers (e.g. decoder.layers.0.mlp.experts)");
    /* both dimensions that block it, in one run */
    assert_has((const char *)out.data,
               "  - its gate: op 0 (GroupedLinear) in_features = 100, needs "
               "a multiple of 64 (from the capture)\n");
    assert_has((const char *)out.data, "  - its gate: op 2 (GroupedLinear) out_features = 100, "
                                       "needs a multiple of 64 (from the capture)\n");
    ft_buf_free(&out);
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --json", cli, t);
    json_t *doc = sh_json(cmd);
    assert_int_equal(json_array_size(json_object_get(doc, "unfused")), 1);
    json_decref(doc);
    snprintf(cmd, sizeof cmd, "'%s' synth demo -o '%s.ok' >/dev/null && '%s' replay '%s.ok'", cli,
             t, cli, t);
    assert_int_equal(tu_sh_buf(cmd, &out), 0);
    assert_lacks((const char *)out.data, "Why nothing fuses");
    ft_buf_free(&out);
    assert_int_equal(tu_dir_remove(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_recommendation_names_ties_and_savings),
        cmocka_unit_test(test_report_recommendation_draws_from_policies_te_could_adopt),
        cmocka_unit_test(test_report_recommendation_when_captured_is_best),
        cmocka_unit_test(test_report_reading_says_as_many_not_n_instead_of_n),
        cmocka_unit_test(test_report_framework_time_assumed_or_captured),
        cmocka_unit_test(test_report_replay_output_is_reproducible),
        cmocka_unit_test(test_report_html_is_self_contained_and_renders),
        cmocka_unit_test(test_report_inputs_one_rank_each),
        cmocka_unit_test(test_report_diff_traces_and_saved_reports),
        cmocka_unit_test(test_report_filters_partition_the_counts),
        cmocka_unit_test(test_report_causes_match_explain_lines),
        cmocka_unit_test(test_report_json_has_provenance),
        cmocka_unit_test(test_report_cause_totals_and_stale_hits_explained),
        cmocka_unit_test(test_report_why_unfused_names_the_gate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
