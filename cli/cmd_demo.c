/*
 * cmd_demo.c - `fusertrace demo`: synthesize the `demo` scenario into a temporary trace, replay
 * it under every policy, print the summary table and a plain-language reading, remove the trace.
 */
#define _XOPEN_SOURCE 700
#include "cli.h"
#include "ft_recorder.h"
#include "ft_synth.h"
#include "ft_replayer.h"
#include "ft_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct demo_opts {
    uint64_t seed;
    int json;
} demo_opts;

static const cli_opt options[] = {
    {"seed", 0, "N", "the synthetic run's seed (default 1)", cli_parse_u64,
     offsetof(demo_opts, seed)},
    {"json", 0, NULL, "the report as JSON", cli_parse_flag, offsetof(demo_opts, json)},
};

static void init(void *opts)
{
    ((demo_opts *)opts)->seed = 1;
}

static int run(void *opts_v, int n_args, char **args, ft_err *err)
{
    (void)n_args, (void)args;
    const demo_opts *o = opts_v;
    uint64_t seed = o->seed;
    int json = o->json;
    const char *tmp = getenv("TMPDIR");
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/fusertrace-demo-XXXXXX", tmp && *tmp ? tmp : P_tmpdir);
    if (!mkdtemp(dir))
        return ft_err_set(err, FT_EIO, "cannot create a temporary directory under %s",
                          tmp && *tmp ? tmp : P_tmpdir);
    snprintf(path, sizeof path, "%s/demo.ftdb", dir);

    int rc;
    ft_rec *rec = NULL;
    ft_report_causes *causes = NULL;
    ft_replay_result *res = ft_malloc(sizeof *res);
    if (!res) {
        rc = ft_err_set(err, FT_ENOMEM, "out of memory");
        goto done;
    }
    rc = ft_rec_open(path, NULL, &rec, err);
    if (!rc) {
        ft_sink sink;
        ft_rec_sink(rec, &sink);
        rc = ft_synth_run("demo", NULL, 0, seed, &sink, err);
        if (rc) {
            ft_rec_abort(rec);
        } else if ((rc = ft_rec_close(rec))) {
            ft_err_set(err, rc, "closing the demo trace failed");
        }
        rec = NULL;
    }
    if (rc) {
        char msg[FT_ERR_MAX];
        ft_strlcpy(msg, err->msg, sizeof msg);
        /* nothing the user gave can be wrong here: the environment failed */
        rc = ft_err_set(err, FT_EIO, "synthesizing the demo trace: %s", msg);
        goto done;
    }
    const char *paths[1] = {path};
    /* the report says why each policy built and ran stale plans */
    if ((rc = ft_report_causes_new(&causes, err))) goto done;
    const ft_replay_observer *obs[1] = {ft_report_causes_observer(causes)};
    const ft_replay_opts ro = {.observers = obs, .n_observers = 1};
    rc = ft_replay_traces(paths, 1, &ro, res, err);
    if (rc) goto done;
    ft_report_opts rep;
    ft_report_opts_init(&rep);
    rep.causes = causes;
    if (json) {
        rc = ft_report_write_opts(stdout, res, NULL, FT_REPORT_JSON, &rep, err);
    } else {
        printf("fusertrace demo: a synthetic MoE training run (seed %llu), replayed under every "
               "plan-cache policy.\n\n",
               (unsigned long long)seed);
        rc = ft_report_write_opts(stdout, res, NULL, FT_REPORT_TEXT, &rep, err);
        if (!rc) {
            printf("\nWhat it means:\n");
            rc = ft_report_reading(stdout, res, err);
        }
        if (!rc) {
            fputc('\n', stdout);
            rc = ft_report_recommendation(stdout, res, NULL, err);
        }
    }
done:
    ft_report_causes_free(causes);
    ft_free(res);
    ft_trace_remove(path);
    rmdir(dir);
    return rc;
}

const cli_cmd cmd_demo = {
    .name = "demo",
    .synopsis = "[--seed N] [--json]",
    .summary = "synthesize the demo trace and replay it under every policy",
    .about = "Synthesizes a small MoE training run (the `demo` synth scenario: grouped-MLP\n"
             "layers, activation recompute, evaluation, recipe switches), replays it under every\n"
             "plan-cache policy and explains the result (docs/reading-a-report.md). Nothing is\n"
             "left on disk.",
    CLI_OPTS(demo_opts, options),
    .init_fn = init,
    .min_args = 0,
    .max_args = 0,
    .run_fn = run,
};
