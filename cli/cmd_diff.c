/*
 * cmd_diff.c - `fusertrace diff A B`: two traces, or two saved JSON reports (`replay --json`), side
 * by side per policy: builds, resets, stale calls by class, framework time; for before/after a TE
 * upgrade or a recipe change. A trace is replayed under every policy first, and both sides go
 * through the same JSON form, so a trace and a saved report compare too.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "ft_replayer.h"
#include "ft_report.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct diff_opts {
    int json;
    double build_ns, reset_ns; /* < 0: the default */
    cli_policy_opts pol;       /* user policies a trace is replayed under too */
} diff_opts;

static int parse_ns(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    (void)o;
    double *d = field;
    if (ft_parse_f64(v, d) || !(*d >= 0) || *d > 1e15)
        return ft_err_set(err, FT_EINVAL, "wants a number of ns >= 0, got '%s'", v);
    return FT_OK;
}

static void init(void *opts)
{
    diff_opts *o = opts;
    o->build_ns = o->reset_ns = -1;
}

#define OFF(f) offsetof(diff_opts, f)
static const cli_opt options[] = {
    {"json", 0, NULL, "the comparison as one JSON document", cli_parse_flag, OFF(json)},
    {"build-ns", 0, "NS",
     "assumed TE cost per build, for traces without captured fuse_ns (as\n"
     "for replay; saved reports keep the figures they hold)",
     parse_ns, OFF(build_ns)},
    {"reset-ns", 0, "NS", "assumed TE cost per reset, likewise", parse_ns, OFF(reset_ns)},
    {"policy", 0, "DEFS",
     "define user policies NAME=SPEC, comma-separated (docs/policies.md): a\n"
     "trace is replayed under them too",
     cli_parse_policy_list, OFF(pol)},
    {"policies", 0, "FILE", "define the user policies of a JSON file, likewise; repeatable",
     cli_parse_policy_file, OFF(pol)},
};
#undef OFF

/* The report of path as JSON: parsed when it is one, else replayed as a trace. */
static json_t *load_side(const char *path, const ft_report_opts *ro, ft_err *err, int *status)
{
    if ((*status = cli_in_check(path, CLI_IN_STREAM, err))) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        *status = ft_err_set(err, FT_EINVAL, "%s: cannot open", path);
        return NULL;
    }
    int c;
    while ((c = fgetc(f)) == ' ' || c == '\n' || c == '\t' || c == '\r') {
    }
    if (c == '{') {
        rewind(f);
        json_error_t je;
        json_t *doc = json_loadf(f, 0, &je);
        fclose(f);
        if (!doc || !json_is_array(json_object_get(doc, "policies"))) {
            *status = ft_err_set(err, FT_EINVAL, "%s:%d: not a replay report (%s)", path, je.line,
                                 doc ? "no \"policies\" array" : je.text);
            json_decref(doc);
            return NULL;
        }
        return doc;
    }
    fclose(f);
    ft_replay_result *res = ft_malloc(sizeof *res);
    if (!res) {
        *status = ft_err_set(err, FT_ENOMEM, "out of memory");
        return NULL;
    }
    const char *paths[1] = {path};
    int rc = ft_replay_traces(paths, 1, NULL, res, err);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = rc ? NULL : open_memstream(&buf, &len);
    if (!rc && !m) rc = ft_err_set(err, FT_ENOMEM, "out of memory");
    if (!rc) rc = ft_report_write_opts(m, res, NULL, FT_REPORT_JSON, ro, err);
    if (m) fclose(m);
    ft_free(res);
    json_t *doc = rc ? NULL : json_loadb(buf, len, 0, NULL);
    free(buf);
    if (rc) *status = rc;
    if (!rc && !doc)
        *status = ft_err_set(err, FT_ESTATE, "%s: the replay report does not parse", path);
    return doc;
}

static json_t *find_policy(json_t *doc, const char *name)
{
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(doc, "policies"), i, p)
    {
        const char *n = json_string_value(json_object_get(p, "policy"));
        if (n && !strcmp(n, name)) return p;
    }
    return NULL;
}

static double num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

static const char *const stale_keys[] = {"harmless", "slower", "quant", "raises"};

/* One figure of a policy: builds, resets, a stale class, or framework_ns. */
static double figure(json_t *p, int k)
{
    if (!p) return 0;
    if (k == 0) return num(p, "builds");
    if (k == 1) return num(p, "resets");
    if (k < 6) return num(json_object_get(p, "stale"), stale_keys[k - 2]);
    return num(p, "framework_ns") / 1e6;
}

static int run(void *opts_v, int n_args, char **args, ft_err *err)
{
    (void)n_args;
    diff_opts *dop = opts_v;
    const char *side[2] = {args[0], args[1]};
    int as_json = dop->json;
    ft_report_opts ro;
    ft_report_opts_init(&ro);
    if (dop->build_ns >= 0) ro.build_ns = dop->build_ns;
    if (dop->reset_ns >= 0) ro.reset_ns = dop->reset_ns;
    json_t *doc[2] = {NULL, NULL};
    uint32_t no_idx[FT_MAX_POLICIES], no_n;
    int status = cli_policies_resolve(&dop->pol, 1, no_idx, &no_n, err);
    if (status) return status;
    for (int s = 0; s < 2; s++)
        if (!(doc[s] = load_side(side[s], &ro, err, &status))) {
            json_decref(doc[0]);
            return status;
        }
    static const char *const what[] = {"builds",
                                       "resets",
                                       "stale: other fusion, same quantization",
                                       "stale: slower (unfused)",
                                       "stale: other quantization",
                                       "stale: raises in TE",
                                       "framework ms"};
    static const char *const keys[] = {"builds",       "resets",      "stale_harmless",
                                       "stale_slower", "stale_quant", "stale_raises",
                                       "framework_ms"};
    /* policies in A's order, then those only in B */
    json_t *names = json_array();
    for (int s = 0; s < 2; s++) {
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(doc[s], "policies"), i, p)
        {
            json_t *n = json_object_get(p, "policy");
            if (!json_is_string(n)) continue;
            int seen = 0;
            size_t j;
            json_t *q;
            json_array_foreach(names, j, q) seen |= json_equal(q, n);
            if (!seen) json_array_append(names, n);
        }
    }
    json_t *out = json_object(), *rows = json_array();
    if (!as_json) {
        printf("fusertrace diff: A = %s, B = %s\n", side[0], side[1]);
        for (int s = 0; s < 2; s++) {
            const char *basis =
                json_string_value(json_object_get(json_object_get(doc[s], "framework"), "basis"));
            printf("  %s: %.0f calls, framework time %s\n", s ? "B" : "A", num(doc[s], "calls"),
                   basis ? basis : "(not in this report)");
        }
    }
    size_t i;
    json_t *n;
    json_array_foreach(names, i, n)
    {
        const char *name = json_string_value(n);
        json_t *pa = find_policy(doc[0], name), *pb = find_policy(doc[1], name);
        json_t *row = json_object();
        json_object_set_new(row, "policy", json_string(name));
        if (!as_json) printf("\n%s%s\n", name, !pa ? " (only in B)" : !pb ? " (only in A)" : "");
        for (size_t k = 0; k < FT_ARRAY_LEN(what); k++) {
            double a = figure(pa, (int)k), b = figure(pb, (int)k);
            json_t *cell = json_object();
            json_object_set_new(cell, "a", pa ? json_real(a) : json_null());
            json_object_set_new(cell, "b", pb ? json_real(b) : json_null());
            json_object_set_new(cell, "delta", pa && pb ? json_real(b - a) : json_null());
            json_object_set_new(row, keys[k], cell);
            if (as_json) continue;
            if (k < 6 && !a && !b) continue; /* quiet rows stay out of the text */
            if (k == 6)
                printf("  %-40s %14.3f %14.3f %+14.3f\n", what[k], a, b, b - a);
            else
                printf("  %-40s %14.0f %14.0f %+14.0f\n", what[k], a, b, b - a);
        }
        json_array_append_new(rows, row);
    }
    if (as_json) {
        json_object_set_new(out, "a", json_string(side[0]));
        json_object_set_new(out, "b", json_string(side[1]));
        json_object_set_new(out, "policies", rows);
        rows = NULL;
        json_dumpf(out, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
        fputc('\n', stdout);
    }
    json_decref(rows);
    json_decref(out);
    json_decref(names);
    json_decref(doc[0]);
    json_decref(doc[1]);
    return cli_stdout_close(err);
}

const cli_cmd cmd_diff = {
    .name = "diff",
    .synopsis = "A B [--json] [--build-ns NS] [--reset-ns NS] [--policy DEFS] [--policies FILE]...",
    .summary = "two traces or saved reports side by side",
    .about =
        "A and B are traces or saved reports (replay --json); prints, per policy, the builds,\n"
        "resets, stale calls by class and framework time of both and B - A: for before and\n"
        "after a TE upgrade or a recipe change.",
    CLI_OPTS(diff_opts, options),
    .init_fn = init,
    .min_args = 2,
    .max_args = 2,
    .run_fn = run,
};
