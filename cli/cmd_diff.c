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

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

static const char *const stale_keys[] = {"harmless", "slower", "quant", "raises"};

/* A count of the report: an integer >= 0, else an error naming the file, policy and field. */
static int need_count(const char *path, const char *pol, json_t *o, const char *key, ft_err *err)
{
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v) && json_integer_value(v) >= 0) return FT_OK;
    return ft_err_set(err, FT_EINVAL, "%s: %s%s%s\"%s\" is %s", path, pol ? "policy '" : "",
                      pol ? pol : "", pol ? "': " : "", key,
                      !v                  ? "absent"
                      : json_is_number(v) ? "not a count (an integer >= 0)"
                                          : "not a number");
}

/* A replay report of FT_REPORT_VERSION with every figure diff reads; by_name gets each policy
 * under its name (a name twice is an error). */
static int check_report(const char *path, json_t *doc, json_t *by_name, ft_err *err)
{
    json_t *ver = json_object_get(doc, "report_version");
    if (!json_is_integer(ver))
        return ft_err_set(err, FT_EINVAL,
                          "%s: not a replay report of this fusertrace (no \"report_version\"; save "
                          "it again with replay --json)",
                          path);
    if (json_integer_value(ver) != FT_REPORT_VERSION)
        return ft_err_set(err, FT_EINVAL, "%s: report_version %lld; this fusertrace reads %d", path,
                          (long long)json_integer_value(ver), FT_REPORT_VERSION);
    int rc = need_count(path, NULL, doc, "calls", err);
    if (rc) return rc;
    json_t *pols = json_object_get(doc, "policies");
    if (!json_is_array(pols))
        return ft_err_set(err, FT_EINVAL, "%s: \"policies\" is %s", path,
                          pols ? "not an array" : "absent");
    size_t i;
    json_t *p;
    json_array_foreach(pols, i, p)
    {
        const char *name = json_string_value(json_object_get(p, "policy"));
        if (!json_is_object(p) || !name || !*name)
            return ft_err_set(err, FT_EINVAL, "%s: policies[%zu] has no \"policy\" name", path, i);
        if (json_object_get(by_name, name))
            return ft_err_set(err, FT_EINVAL, "%s: policy '%s' appears twice", path, name);
        static const char *const counts[] = {"builds", "resets"};
        for (size_t k = 0; k < FT_ARRAY_LEN(counts); k++)
            if ((rc = need_count(path, name, p, counts[k], err))) return rc;
        json_t *st = json_object_get(p, "stale");
        if (!json_is_object(st))
            return ft_err_set(err, FT_EINVAL, "%s: policy '%s': \"stale\" is %s", path, name,
                              st ? "not an object" : "absent");
        for (size_t k = 0; k < FT_ARRAY_LEN(stale_keys); k++)
            if ((rc = need_count(path, name, st, stale_keys[k], err))) return rc;
        json_t *fw = json_object_get(p, "framework_ns");
        if (!json_is_number(fw) || !(json_number_value(fw) >= 0))
            return ft_err_set(err, FT_EINVAL, "%s: policy '%s': \"framework_ns\" is %s", path, name,
                              !fw ? "absent" : "not a number >= 0");
        if (json_object_set(by_name, name, p)) return ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    return FT_OK;
}

/* A trace replayed under every policy, through the same JSON form as a saved report. */
static json_t *replay_side(const char *path, const ft_report_opts *ro, ft_err *err, int *status)
{
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

/* The report of path (`-`: stdin): parsed when it is JSON, else replayed as a trace. The input
 * is read once from its start, never rewound, so a pipe (`<(fusertrace replay --json T)`) works;
 * a trace must be a regular file. */
static json_t *load_side(const char *path, const ft_report_opts *ro, ft_err *err, int *status)
{
    if ((*status = cli_in_check(path, CLI_IN_STREAM, err))) return NULL;
    int is_stdin = !strcmp(path, "-");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        *status = ft_err_set(err, FT_EINVAL, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    int regular = !fstat(fileno(f), &st) && S_ISREG(st.st_mode);
    int c;
    while ((c = fgetc(f)) == ' ' || c == '\n' || c == '\t' || c == '\r') {
    }
    if (c == '{') {
        /* the rest in blocks (jansson's own FILE reader takes a byte at a time) */
        ft_buf b = {0};
        char blk[1 << 16];
        size_t got;
        int rc = ft_buf_append(&b, "{", 1);
        while (!rc && (got = fread(blk, 1, sizeof blk, f)) > 0)
            rc = ft_buf_append(&b, blk, got);
        if (!rc && ferror(f))
            rc = ft_err_set(err, FT_EIO, "%s: read failed: %s", path, strerror(errno));
        else if (rc)
            rc = ft_err_set(err, FT_ENOMEM, "%s: out of memory", path);
        if (!is_stdin) fclose(f);
        json_error_t je;
        json_t *doc =
            rc ? NULL : json_loadb((const char *)b.data, b.len, JSON_REJECT_DUPLICATES, &je);
        ft_buf_free(&b);
        if (rc) {
            *status = rc;
            return NULL;
        }
        if (!doc) {
            *status = ft_err_set(err, FT_EINVAL, "%s:%d: not a replay report (%s)", path, je.line,
                                 je.text);
            return NULL;
        }
        return doc;
    }
    if (!is_stdin) fclose(f);
    if (!regular) {
        *status =
            ft_err_set(err, FT_EINVAL, "%s: %s, and a trace must be a regular file (a database)",
                       path, c == EOF ? "empty" : "not a JSON report");
        return NULL;
    }
    return replay_side(path, ro, err, status);
}

static double num(json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

/* One figure of a checked policy: builds, resets, a stale class, or framework_ns. */
static double diff_figure(json_t *p, int k)
{
    if (!p) return 0;
    if (k == 0) return num(p, "builds");
    if (k == 1) return num(p, "resets");
    if (k < 6) return num(json_object_get(p, "stale"), stale_keys[k - 2]);
    return num(p, "framework_ns") / 1e6;
}

/* The JSON output is written as it goes, not built as a document first. */
static void put_str(const char *s)
{
    ft_buf b = {0};
    if (ft_buf_json_str(&b, s, strlen(s)) || fwrite(b.data, 1, b.len, stdout) != b.len)
        fputs("null", stdout); /* out of memory; a failed write shows at the close */
    ft_buf_free(&b);
}

/* A real as JSON's reals are written (always with a point or an exponent), or null. */
static void put_real(const double *v)
{
    if (!v || !isfinite(*v)) {
        fputs("null", stdout);
        return;
    }
    char t[64];
    snprintf(t, sizeof t, "%.17g", *v);
    fputs(t, stdout);
    if (!strpbrk(t, ".e")) fputs(".0", stdout);
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
    json_t *doc[2] = {NULL, NULL}, *by_name[2] = {json_object(), json_object()};
    json_t *names = json_array();
    uint32_t no_idx[FT_MAX_POLICIES], no_n;
    int status =
        by_name[0] && by_name[1] && names ? FT_OK : ft_err_set(err, FT_ENOMEM, "out of memory");
    if (!status) status = cli_policies_resolve(&dop->pol, 1, no_idx, &no_n, err);
    for (int s = 0; s < 2 && !status; s++)
        if ((doc[s] = load_side(side[s], &ro, err, &status)))
            status = check_report(side[s], doc[s], by_name[s], err);
    if (status) goto done;
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
    /* policies in A's order, then those only in B: a hash lookup each, linear in the policies */
    for (int s = 0; s < 2; s++) {
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(doc[s], "policies"), i, p)
        {
            json_t *n = json_object_get(p, "policy");
            if (s && json_object_get(by_name[0], json_string_value(n))) continue;
            json_array_append(names, n);
        }
    }
    if (as_json) {
        fputs("{\n \"a\": ", stdout);
        put_str(side[0]);
        fputs(",\n \"b\": ", stdout);
        put_str(side[1]);
        fputs(",\n \"policies\": [", stdout);
    } else {
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
        json_t *pa = json_object_get(by_name[0], name), *pb = json_object_get(by_name[1], name);
        if (as_json) {
            fputs(i ? ",\n  {\n   \"policy\": " : "\n  {\n   \"policy\": ", stdout);
            put_str(name);
        } else {
            printf("\n%s%s\n", name, !pa ? " (only in B)" : !pb ? " (only in A)" : "");
        }
        for (size_t k = 0; k < FT_ARRAY_LEN(what); k++) {
            double a = diff_figure(pa, (int)k), b = diff_figure(pb, (int)k);
            if (as_json) {
                printf(",\n   \"%s\": {\"a\": ", keys[k]);
                put_real(pa ? &a : NULL);
                fputs(", \"b\": ", stdout);
                put_real(pb ? &b : NULL);
                fputs(", \"delta\": ", stdout);
                double d = b - a;
                put_real(pa && pb ? &d : NULL);
                fputc('}', stdout);
                continue;
            }
            if (k < 6 && !a && !b) continue; /* quiet rows stay out of the text */
            if (k == 6)
                printf("  %-40s %14.3f %14.3f %+14.3f\n", what[k], a, b, b - a);
            else
                printf("  %-40s %14.0f %14.0f %+14.0f\n", what[k], a, b, b - a);
        }
        if (as_json) fputs("\n  }", stdout);
    }
    if (as_json) fputs(i ? "\n ]\n}\n" : "]\n}\n", stdout);
    status = cli_stdout_close(err);
done:
    json_decref(names);
    for (int s = 0; s < 2; s++) {
        json_decref(by_name[s]);
        json_decref(doc[s]);
    }
    return status;
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
