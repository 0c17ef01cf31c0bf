/*
 * cmd_synth.c - `fusertrace synth`: write a synthetic training-run trace (synth/).
 *
 *   fusertrace synth SCENARIO [--set key=value ...] [--seed N] (-o OUT.ftdb | --jsonl OUT|-)
 *   fusertrace synth --list [SCENARIO]
 *
 * -o records through the recorder into OUT.ftdb; --jsonl writes capture-jsonl v1 (`-` = stdout).
 * Files are written under a temporary name and renamed into place only when complete (cli_out,
 * out_file.c), so a failed or interrupted run leaves no output behind; replacing an existing
 * file needs -f. A trace cannot go to stdout (`-o -` is refused: use --jsonl -).
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

typedef struct synth_sets {
    ft_synth_param p[MAX_SETS];
    char keys[MAX_SETS][128];
    uint32_t n;
} synth_sets;

typedef struct synth_opts {
    const char *ftdb, *jsonl;
    int force, list;
    uint64_t seed;
    synth_sets sets;
} synth_opts;

static int parse_set(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    (void)o;
    synth_sets *s = field;
    const char *eq = strchr(v, '=');
    if (!eq || eq == v) return ft_err_set(err, FT_EINVAL, "'%s': expected key=value", v);
    if (s->n == MAX_SETS) return ft_err_set(err, FT_EINVAL, "more than %d given", MAX_SETS);
    if ((size_t)(eq - v) >= sizeof s->keys[0])
        return ft_err_set(err, FT_EINVAL, "'%s': key too long", v);
    memcpy(s->keys[s->n], v, (size_t)(eq - v));
    s->keys[s->n][eq - v] = '\0';
    s->p[s->n].key = s->keys[s->n];
    s->p[s->n++].value = eq + 1;
    return FT_OK;
}

static void init(void *opts)
{
    ((synth_opts *)opts)->seed = 1;
}

static const cli_opt options[] = {
    {"output", 'o', "OUT.ftdb", "write a trace", cli_parse_str, offsetof(synth_opts, ftdb)},
    {"jsonl", 0, "OUT|-", "write a capture stream instead (- for stdout)", cli_parse_str,
     offsetof(synth_opts, jsonl)},
    {"force", 'f', NULL, "replace the output if it exists", cli_parse_flag,
     offsetof(synth_opts, force)},
    {"set", 0, "KEY=VALUE", "override a scenario key (repeatable; --list names them)", parse_set,
     offsetof(synth_opts, sets)},
    {"seed", 0, "N", "random seed (default 1): the stream is deterministic per seed", cli_parse_u64,
     offsetof(synth_opts, seed)},
    {"list", 0, NULL, "list the scenarios (or SCENARIO's keys) and exit", cli_parse_flag,
     offsetof(synth_opts, list)},
};

static int list(const char *only, ft_err *err)
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
    if (!found)
        return ft_err_set(err, FT_ENOTFOUND, "unknown scenario '%s' (--list lists them)", only);
    return FT_OK;
}

static int run_ftdb(const char *scen, const ft_synth_param *sets, uint32_t n_sets, uint64_t seed,
                    const char *out, int force, ft_err *err)
{
    cli_out o;
    int rc = cli_out_open(&o, out, CLI_OUT_DB, force, err);
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
    } else if ((rc = ft_rec_close_err(r, err))) {
        char detail[FT_ERR_MAX];
        ft_strlcpy(detail, ft_err_msg(err), sizeof detail);
        ft_err_set(err, rc, "%s: closing the trace failed: %s", out, detail);
    }
    return cli_out_close(&o, rc, err);
}

static int run_jsonl(const char *scen, const ft_synth_param *sets, uint32_t n_sets, uint64_t seed,
                     const char *out, int force, ft_err *err)
{
    cli_out o;
    int rc = cli_out_open(&o, out, CLI_OUT_CAPTURE, force, err);
    if (rc) return rc;
    ft_jsonl_writer *w = NULL;
    rc = ft_jsonl_writer_new(o.f, &w);
    if (rc) {
        ft_err_set(err, rc, "%s: cannot start the JSONL writer", out);
    } else {
        ft_sink sink;
        ft_jsonl_writer_sink(w, &sink);
        rc = ft_synth_run(scen, sets, n_sets, seed, &sink, err);
        if (rc && ferror(o.f)) /* the output failed */
            ft_err_set(err, FT_EIO, "writing %s failed: %s", o.name, strerror(errno));
        ft_jsonl_writer_free(w);
    }
    return cli_out_close(&o, rc, err);
}

static int run(void *opts_v, int n_args, char **args, ft_err *err)
{
    synth_opts *o = opts_v;
    if (o->list) return list(n_args ? args[0] : NULL, err);
    if (!n_args) return cli_usage_error(err, "no scenario named (--list lists them)");
    if (!o->ftdb == !o->jsonl)
        return cli_usage_error(err, "name exactly one output: -o OUT.ftdb or --jsonl OUT");
    if (o->ftdb && !strcmp(o->ftdb, "-"))
        return ft_err_set(err, FT_EINVAL,
                          "-o -: a trace cannot be written to stdout (it is a database file); "
                          "--jsonl - writes the capture stream there");
    return o->ftdb ? run_ftdb(args[0], o->sets.p, o->sets.n, o->seed, o->ftdb, o->force, err)
                   : run_jsonl(args[0], o->sets.p, o->sets.n, o->seed, o->jsonl, o->force, err);
}

const cli_cmd cmd_synth = {
    .name = "synth",
    .synopsis = "SCENARIO [--set KEY=VALUE ...] [--seed N] (-o OUT.ftdb | --jsonl OUT|-) [-f]\n"
                "       fusertrace synth --list [SCENARIO]",
    .summary = "a synthetic training-run trace (--list names the scenarios)",
    .about = "Generates a synthetic training-run call stream, deterministic per seed.",
    CLI_OPTS(synth_opts, options),
    .init_fn = init,
    .min_args = 0,
    .max_args = 1,
    .run_fn = run,
};
