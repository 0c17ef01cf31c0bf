/*
 * cmd_replay.c - `fusertrace replay TRACE...`: replay traces (one per rank) under plan-cache
 * policies and print one reduced report (text table, JSON or CSV); with --numerics, also run the
 * sampled grouped-MLP calls' chosen and fresh plans (ft_numerics.h) and add the numerics section.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "ft_replay.h"
#include "ft_report.h"
#include "ft_numerics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The back ends of numerical replay, by name: where the CUDA back end is chosen (and where a
 * back end loaded on demand would be looked up). */
static const struct {
    const char *name;
    ft_numerics_backend backend;
} backends[] = {{"cpu", FT_NUMERICS_CPU}, {"cuda", FT_NUMERICS_CUDA}};

enum { MAX_ENV = 256 };
typedef struct env_list {
    ft_env_kv kv[MAX_ENV];
    char keys[MAX_ENV][128];
    uint32_t n;
} env_list;
typedef struct policy_list {
    uint32_t idx[FT_MAX_POLICIES];
    uint32_t n;
} policy_list;
typedef struct opt_u64 {
    uint64_t v;
    int set;
} opt_u64;

typedef struct replay_opts {
    policy_list pol;
    env_list env;
    uint32_t capacity, threads, sample, shrink; /* 0: not given */
    int json, csv, explain, all;
    const char *per_call, *captured;
    int backend; /* index into backends[], -1: no --numerics */
    opt_u64 seed;
} replay_opts;

static int parse_policies(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    (void)o;
    policy_list *p = field;
    return ft_policy_parse_list(v, p->idx, &p->n, err);
}

static int parse_env(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    (void)o;
    env_list *e = field;
    const char *eq = strchr(v, '=');
    if (!eq || eq == v) return ft_err_set(err, FT_EINVAL, "wants KEY=VALUE, got '%s'", v);
    if (e->n == MAX_ENV) return ft_err_set(err, FT_EINVAL, "more than %d given", MAX_ENV);
    if ((size_t)(eq - v) >= sizeof e->keys[0])
        return ft_err_set(err, FT_EINVAL, "'%s': key too long", v);
    memcpy(e->keys[e->n], v, (size_t)(eq - v));
    e->keys[e->n][eq - v] = '\0';
    e->kv[e->n].key = e->keys[e->n];
    e->kv[e->n++].value = eq + 1;
    return FT_OK;
}

static int parse_captured(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    (void)o;
    uint32_t idx;
    int rc = ft_policy_find(v, &idx, err);
    if (!rc) *(const char **)field = v;
    return rc;
}

static int parse_backend(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    (void)o;
    for (size_t i = 0; i < FT_ARRAY_LEN(backends); i++)
        if (!strcmp(v, backends[i].name)) {
            *(int *)field = (int)i;
            return FT_OK;
        }
    return ft_err_set(err, FT_EINVAL, "wants cpu or cuda, got '%s'", v);
}

static int parse_seed(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    opt_u64 *s = field;
    s->set = 1;
    return cli_parse_u64(o, v, &s->v, err);
}

static void init(void *opts)
{
    ((replay_opts *)opts)->backend = -1;
}

#define OFF(f) offsetof(replay_opts, f)
static const cli_opt options[] = {
    {"policy", 0, "LIST", "comma-separated policies, or all (default)", parse_policies, OFF(pol)},
    {"capacity", 0, "N", "LRU capacity (N >= 1) of dict stores per fuser (default unbounded)",
     cli_parse_count, OFF(capacity)},
    {"env", 0, "K=V", "override a key of the trace's env (device_cc, NVTE_*, ...); repeatable",
     parse_env, OFF(env)},
    {"json", 0, NULL, "the report as JSON", cli_parse_flag, OFF(json)},
    {"csv", 0, NULL, "the report as CSV (summary and per-step rows)", cli_parse_flag, OFF(csv)},
    {"per-call", 0, "FILE",
     "one JSON line per call and policy; - for stdout, where the text\n"
     "report then goes to stderr",
     cli_parse_str, OFF(per_call)},
    {"explain", 0, NULL,
     "for every build, name the key component that changed (on stdout\n"
     "with the text report, else on stderr)",
     cli_parse_flag, OFF(explain)},
    {"captured", 0, "POLICY",
     "the policy the captured run used (default: the header's\n"
     "fuser_cache field, else its te_version)",
     parse_captured, OFF(captured)},
    {"threads", 0, "N",
     "worker threads, one trace each (default: one per core); with\n"
     "--numerics, threads running sampled calls (results do not depend on it)",
     cli_parse_count, OFF(threads)},
    {"numerics", 0, "cpu|cuda",
     "numerical replay: for sampled grouped-MLP calls, run every policy's chosen\n"
     "plan and quantizer state and the fresh plan (forward, and backward for grad\n"
     "calls) against a float64 reference; reports the harmless and quant bands per\n"
     "policy. cuda runs what the CUDA back end supports on the device, the rest on\n"
     "the CPU reference (the report counts both); no device: exit 3",
     parse_backend, OFF(backend)},
    {"sample", 0, "N",
     "at most N calls per trace (default 64), in call order: the first call\n"
     "of every situation, then more of each up to N/8",
     cli_parse_count, OFF(sample)},
    {"all", 0, NULL, "every grouped-MLP call", cli_parse_flag, OFF(all)},
    {"shrink", 0, "K",
     "divide hidden sizes and split sizes by K (default 1: the real sizes,\n"
     "slow on the CPU for large models; 8 or 16 for a quick look)",
     cli_parse_count, OFF(shrink)},
    {"seed", 0, "S", "numerics input seed (default 1)", parse_seed, OFF(seed)},
};
#undef OFF

/* Progress on a terminal while the library replays: a line that says the run is alive once it
 * has taken a second (the engine has no progress hook; it reports when done). */
typedef struct progress {
    pthread_t thread;
    atomic_int stop;
    uint32_t n_traces;
    uint64_t n_calls;
    int numerics;
} progress;

static void *progress_main(void *arg)
{
    progress *p = arg;
    struct timespec t0, now, tick = {0, 100000000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!atomic_load(&p->stop)) {
        nanosleep(&tick, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        double s = (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec);
        cli_progress("%s %u trace%s, %llu calls: %.0f s", p->numerics ? "numerics on" : "replaying",
                     p->n_traces, p->n_traces == 1 ? "" : "s", (unsigned long long)p->n_calls, s);
    }
    return NULL;
}

static void help_policies(FILE *f)
{
    fprintf(f, "\npolicies:\n");
    for (uint32_t i = 0; i < ft_policy_count(); i++)
        fprintf(f, "  %-16s %s\n", ft_policy_name(i), ft_policy_summary(i));
}

static int run(void *opts_v, int n_args, char **args, ft_err *err)
{
    replay_opts *ro = opts_v;
    uint32_t n_paths = (uint32_t)n_args;
    int numerics = ro->backend >= 0;
    if (!numerics && (ro->sample || ro->all || ro->shrink || ro->seed.set))
        return cli_usage_error(err,
                               "--sample, --all, --shrink and --seed go with --numerics cpu|cuda");
    if (ro->sample && ro->all) return cli_usage_error(err, "--sample and --all exclude each other");
    if (ro->json && ro->csv) return cli_usage_error(err, "--json and --csv exclude each other");
    if (numerics && ro->csv)
        return cli_usage_error(err, "--numerics has no CSV form (use --json or text)");
    int per_call_stdout =
        ro->per_call && (!strcmp(ro->per_call, "-") || !strcmp(ro->per_call, "/dev/stdout"));
    if (per_call_stdout && (ro->json || ro->csv))
        return cli_usage_error(
            err, "--per-call - and --%s both want stdout; name a file for one of them",
            ro->json ? "json" : "csv");
    int format = ro->json ? FT_REPORT_JSON : ro->csv ? FT_REPORT_CSV : FT_REPORT_TEXT;
    /* stdout carries only the requested format: the report, or the per-call lines */
    FILE *report = per_call_stdout ? stderr : stdout;
    FILE *explain = format == FT_REPORT_TEXT ? report : stderr;

    /* every input checked and opened before any output exists */
    int rc = FT_OK;
    for (uint32_t i = 0; i < n_paths && !rc; i++)
        rc = cli_in_check(args[i], CLI_IN_TRACE, err);
    progress pr = {.n_traces = n_paths, .numerics = numerics};
    for (uint32_t i = 0; i < n_paths && !rc; i++) {
        ft_trace *t = NULL;
        if (!(rc = ft_trace_open(args[i], FT_OPEN_READ, &t, err)))
            pr.n_calls += ft_trace_n_calls(t);
        ft_trace_close(t);
    }
    if (rc) return rc;

    ft_replay_result *res = ft_malloc(sizeof *res);
    ft_numerics_result *nres = ft_malloc(sizeof *nres);
    cli_out pc = {.slot = -1};
    if (!res || !nres) {
        rc = ft_err_set(err, FT_ENOMEM, "out of memory");
        goto done;
    }
    if (ro->per_call && (rc = cli_out_open(&pc, ro->per_call, CLI_OUT_STREAM, 1, err))) goto done;

    ft_replay_opts o = {
        .policies = ro->pol.n ? ro->pol.idx : NULL,
        .n_policies = ro->pol.n,
        .capacity = ro->capacity,
        .env = ro->env.kv,
        .n_env = ro->env.n,
        .captured = ro->captured,
        .per_call = ro->per_call ? pc.f : NULL,
        .explain = ro->explain ? explain : NULL,
        .n_threads = ro->threads,
    };
    ft_numerics_opts no = {.shrink = ro->shrink ? ro->shrink : 1,
                           .sample = ro->all      ? 0
                                     : ro->sample ? ro->sample
                                                  : 64,
                           .seed = ro->seed.set ? ro->seed.v : 1,
                           .n_threads = ro->threads};
    if (numerics) no.backend = backends[ro->backend].backend;
    const char *const *paths = (const char *const *)args;
    /* progress only where nothing else writes to the terminal meanwhile */
    int show = cli_progress_wanted() && !(ro->explain && explain == stderr) &&
               !pthread_create(&pr.thread, NULL, progress_main, &pr);
    rc = numerics ? ft_numerics_replay_traces(paths, n_paths, &o, &no, res, nres, err)
                  : ft_replay_traces(paths, n_paths, &o, res, err);
    if (show) {
        atomic_store(&pr.stop, 1);
        pthread_join(pr.thread, NULL);
        cli_progress_end();
    }
    /* the per-call file complete (or its failure known) before the report is written */
    rc = cli_out_close(&pc, rc, err);
    if (rc) goto done;
    if (ro->explain) fputc('\n', explain);
    rc = ft_report_write(report, res, numerics ? nres : NULL, format, err);
    if (!rc && format == FT_REPORT_TEXT) {
        fputc('\n', report);
        rc = ft_report_reading(report, res, err);
    }
done:
    rc = cli_out_close(&pc, rc, err); /* a failed replay leaves no per-call file behind */
    ft_free(res);
    ft_free(nres);
    return rc;
}

const cli_cmd cmd_replay = {
    .name = "replay",
    .synopsis = "TRACE... [--policy LIST|all] [--capacity N] [--env K=V]...\n"
                "                         [--json | --csv] [--per-call FILE] [--explain]\n"
                "                         [--captured POLICY] [--threads N]\n"
                "                         [--numerics cpu|cuda [--sample N | --all] [--shrink K]\n"
                "                          [--seed S]]",
    .summary = "replay traces under plan-cache policies",
    .about = "Replays every call of the traces (one per rank, reduced into one report) through a\n"
             "model of TransformerEngine's fusion-plan cache under each policy, in one pass.\n"
             "docs/reading-a-report.md explains every column and line of the report.",
    CLI_OPTS(replay_opts, options),
    .init_fn = init,
    .min_args = 1,
    .max_args = CLI_ANY,
    .run_fn = run,
    .help_fn = help_policies,
};
