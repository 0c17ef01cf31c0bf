/*
 * cmd_synth.c - `fusertrace synth`: write a synthetic training-run trace (synth/).
 *
 *   fusertrace synth SCENARIO [--set key=value ...] [--seed N] (-o OUT.ftdb | --jsonl OUT|-)
 *   fusertrace synth --list [SCENARIO]
 *
 * -o records through the recorder into OUT.ftdb; --jsonl writes capture-jsonl v1 (`-` = stdout).
 * Files are written under a temporary name and renamed into place only when complete (cli_out,
 * out_file.c), so a failed or interrupted run leaves no output behind. Exit status: 0 ok, 2 unknown
 * scenario/key or bad value or usage, 3 I/O or other failures.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "ft_recorder.h"
#include "ft_synth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SETS 256

static void usage(FILE *f)
{
    fprintf(f, "usage: fusertrace synth SCENARIO [--set key=value ...] [--seed N] "
               "(-o OUT.ftdb | --jsonl OUT|-)\n"
               "       fusertrace synth --list [SCENARIO]\n"
               "Generates a synthetic training-run call stream, deterministic per seed "
               "(default 1).\n");
}

static int list(const char *only)
{
    int found = 0;
    for (uint32_t i = 0; i < ft_synth_n_scenarios(); i++) {
        const ft_synth_scenario *s = ft_synth_scenario_at(i);
        if (only && strcmp(only, s->name)) continue;
        found = 1;
        printf("%s\n  %s\n  keys (key=default: meaning):\n", s->name, s->summary);
        for (const char *p = s->keys; *p;) {
            const char *eol = strchr(p, '\n');
            int len = eol ? (int)(eol - p) : (int)strlen(p);
            printf("    %.*s\n", len, p);
            p += len + (eol != NULL);
        }
        printf("\n");
    }
    if (!found) {
        fprintf(stderr, "fusertrace synth: unknown scenario '%s'\n", only);
        return FT_EXIT_INPUT;
    }
    if (fflush(stdout) || ferror(stdout)) {
        fprintf(stderr, "fusertrace synth: writing the list failed: %s\n", strerror(errno));
        return FT_EXIT_INTERNAL;
    }
    return FT_EXIT_OK;
}

static int parse_seed(const char *s, uint64_t *out)
{
    if (!s || !*s || *s < '0' || *s > '9') return FT_EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return FT_EINVAL;
    *out = (uint64_t)v;
    return FT_OK;
}

static int run_ftdb(const char *scen, const ft_synth_param *sets, uint32_t n_sets, uint64_t seed,
                    const char *out, ft_err *err)
{
    cli_out o;
    int rc = cli_out_open(&o, out, CLI_OUT_DB, err);
    if (rc) return rc;
    ft_rec *r;
    rc = ft_rec_open(o.tmp, NULL, &r, err);
    if (rc) return cli_out_close(&o, rc, err);
    ft_sink sink;
    ft_rec_sink(r, &sink);
    rc = ft_synth_run(scen, sets, n_sets, seed, &sink, err);
    if (rc) {
        ft_rec_abort(r);
    } else if ((rc = ft_rec_flush(r))) { /* r, and so its error detail, is gone after close */
        ft_err_set(err, rc, "%s: %s", out, ft_err_msg(ft_rec_error(r)));
        ft_rec_abort(r);
    } else if ((rc = ft_rec_close(r))) {
        ft_err_set(err, rc, "%s: closing the trace failed: %s", out, ft_strerror(rc));
    }
    if (!rc)
        ft_trace_remove(
            out); /* a stale WAL beside an old OUT would be replayed into the new file */
    return cli_out_close(&o, rc, err);
}

static int run_jsonl(const char *scen, const ft_synth_param *sets, uint32_t n_sets, uint64_t seed,
                     const char *out, ft_err *err)
{
    cli_out o;
    int rc = cli_out_open(&o, out, CLI_OUT_STREAM, err);
    if (rc) return rc;
    ft_jsonl_writer *w = NULL;
    rc = ft_jsonl_writer_new(o.f, &w);
    if (rc) {
        ft_err_set(err, rc, "%s: cannot start the JSONL writer", out);
    } else {
        ft_sink sink;
        ft_jsonl_writer_sink(w, &sink);
        rc = ft_synth_run(scen, sets, n_sets, seed, &sink, err);
        ft_jsonl_writer_free(w);
    }
    return cli_out_close(&o, rc, err);
}

int cmd_synth(int argc, char **argv)
{
    const char *scen = NULL, *ftdb = NULL, *jsonl = NULL;
    ft_synth_param sets[MAX_SETS];
    uint32_t n_sets = 0;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_arg = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return FT_EXIT_OK;
        } else if (!strcmp(a, "--list")) {
            if (i + 2 < argc) {
                fprintf(stderr, "fusertrace synth: --list takes at most one scenario\n");
                return FT_EXIT_INPUT;
            }
            return list(has_arg ? argv[i + 1] : NULL);
        } else if (!strcmp(a, "--set") || !strcmp(a, "--seed") || !strcmp(a, "-o") ||
                   !strcmp(a, "--jsonl")) {
            if (!has_arg) {
                fprintf(stderr, "fusertrace synth: %s needs a value\n", a);
                return FT_EXIT_INPUT;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--set")) {
                char *eq = strchr(v, '=');
                if (!eq || eq == v) {
                    fprintf(stderr, "fusertrace synth: --set '%s': expected key=value\n", v);
                    return FT_EXIT_INPUT;
                }
                if (n_sets == MAX_SETS) {
                    fprintf(stderr, "fusertrace synth: more than %d --set\n", MAX_SETS);
                    return FT_EXIT_INPUT;
                }
                *eq = '\0'; /* argv strings are ours to modify */
                sets[n_sets].key = v;
                sets[n_sets++].value = eq + 1;
            } else if (!strcmp(a, "--seed")) {
                if (parse_seed(v, &seed)) {
                    fprintf(stderr,
                            "fusertrace synth: --seed '%s': expected an integer in [0, 2^64)\n", v);
                    return FT_EXIT_INPUT;
                }
            } else if (!strcmp(a, "-o")) {
                ftdb = v;
            } else {
                jsonl = v;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "fusertrace synth: unknown option '%s'\n", a);
            usage(stderr);
            return FT_EXIT_INPUT;
        } else if (!scen) {
            scen = a;
        } else {
            fprintf(stderr, "fusertrace synth: unexpected argument '%s'\n", a);
            return FT_EXIT_INPUT;
        }
    }
    if (!scen || (!ftdb == !jsonl)) {
        fprintf(stderr, "fusertrace synth: %s\n",
                !scen ? "no scenario named (--list lists them)"
                      : "name exactly one output: -o OUT.ftdb or --jsonl OUT");
        usage(stderr);
        return FT_EXIT_INPUT;
    }
    ft_err err = {0};
    int rc = ftdb ? run_ftdb(scen, sets, n_sets, seed, ftdb, &err)
                  : run_jsonl(scen, sets, n_sets, seed, jsonl, &err);
    if (rc) {
        fprintf(stderr, "fusertrace: %s\n", ft_err_msg(&err));
        return cli_exit_code(rc);
    }
    return FT_EXIT_OK;
}
