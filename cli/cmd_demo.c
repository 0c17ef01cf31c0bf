/*
 * cmd_demo.c - `fusertrace demo`: synthesize the `demo` scenario into a temporary trace, replay
 * it under every policy, print the summary table and a plain-language reading, remove the trace.
 */
#define _XOPEN_SOURCE 700
#include "cli.h"
#include "ft_recorder.h"
#include "ft_synth.h"
#include "ft_replay.h"
#include "ft_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fusertrace demo [--seed N] [--json]\n"
            "\nSynthesizes a small MoE training run (the `demo` synth scenario: grouped-MLP\n"
            "layers, activation recompute, evaluation, recipe switches), replays it under every\n"
            "plan-cache policy and explains the result. Nothing is left on disk.\n");
}

int cmd_demo(int argc, char **argv)
{
    uint64_t seed = 1;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return FT_EXIT_OK;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            int64_t v;
            if (ft_parse_i64(argv[++i], &v) || v < 0) {
                fprintf(stderr, "fusertrace demo: --seed wants a non-negative integer\n");
                return FT_EXIT_INPUT;
            }
            seed = (uint64_t)v;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else {
            fprintf(stderr, "fusertrace demo: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return FT_EXIT_INPUT;
        }
    }

    const char *tmp = getenv("TMPDIR");
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/fusertrace-demo-XXXXXX", tmp && *tmp ? tmp : P_tmpdir);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "fusertrace demo: cannot create a temporary directory under %s\n",
                tmp && *tmp ? tmp : P_tmpdir);
        return FT_EXIT_INTERNAL;
    }
    snprintf(path, sizeof path, "%s/demo.ftdb", dir);

    int status = FT_EXIT_OK, rc;
    ft_err err = {0};
    ft_rec *rec = NULL;
    ft_replay_result *res = ft_malloc(sizeof *res);
    if (!res) {
        fprintf(stderr, "fusertrace demo: out of memory\n");
        status = FT_EXIT_INTERNAL;
        goto done;
    }
    rc = ft_rec_open(path, NULL, &rec, &err);
    if (!rc) {
        ft_sink sink;
        ft_rec_sink(rec, &sink);
        rc = ft_synth_run("demo", NULL, 0, seed, &sink, &err);
        if (rc) {
            ft_rec_abort(rec);
        } else if ((rc = ft_rec_close(rec))) {
            ft_err_set(&err, rc, "closing the demo trace failed");
        }
        rec = NULL;
    }
    if (rc) {
        fprintf(stderr, "fusertrace demo: synthesizing the demo trace: %s\n", ft_err_msg(&err));
        status = FT_EXIT_INTERNAL;
        goto done;
    }
    const char *paths[1] = {path};
    rc = ft_replay_traces(paths, 1, NULL, res, &err);
    if (rc) {
        fprintf(stderr, "fusertrace demo: replay: %s\n", ft_err_msg(&err));
        status = cli_exit_code(rc);
        goto done;
    }
    if (json) {
        rc = ft_report_write(stdout, res, NULL, FT_REPORT_JSON, &err);
    } else {
        printf("fusertrace demo: a synthetic MoE training run (seed %llu), replayed under every "
               "plan-cache policy.\n\n",
               (unsigned long long)seed);
        rc = ft_report_write(stdout, res, NULL, FT_REPORT_TEXT, &err);
        if (!rc) {
            printf("\nWhat it means:\n");
            rc = ft_report_reading(stdout, res, &err);
        }
    }
    if (rc) {
        fprintf(stderr, "fusertrace demo: %s\n", ft_err_msg(&err));
        status = FT_EXIT_INTERNAL;
    }
done:
    ft_free(res);
    ft_trace_remove(path);
    rmdir(dir);
    return status;
}
