/*
 * cmd_replay.c - `fusertrace replay TRACE...`: replay traces (one per rank) under plan-cache
 * policies and print one reduced report (text table, JSON or CSV); with --numerics, also run the
 * sampled grouped-MLP calls' chosen and fresh plans (ft_numerics.h) and add the numerics section.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "ft_replayer.h"
#include "ft_report.h"
#include "ft_numerics.h"
#include "ft_tefuser.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Ctrl-C during numerics: stop after the call in flight and print the results so far (a second
 * Ctrl-C ends the process as usual). */
static volatile sig_atomic_t g_stop;

static void on_sigint(int sig)
{
    (void)sig;
    g_stop = 1;
}

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

typedef struct opt_ns {
    double v;
    int set;
} opt_ns;
typedef struct opt_steps {
    int64_t lo, hi;
    int set;
} opt_steps;

typedef struct replay_opts {
    policy_list pol;
    env_list env;
    uint32_t capacity, threads, sample, shrink; /* 0: not given */
    int json, csv, explain, all, timing;
    const char *per_call, *captured, *html, *fuser, *phase;
    int backend; /* index into backends[], -1: no --numerics */
    opt_u64 seed;
    opt_ns build_ns, reset_ns;
    opt_steps steps;
    opt_u64 max_seconds; /* numerics: refuse longer estimates (default 600, 0: no limit) */
} replay_opts;

/* What the fuser model could not take from a trace's capture (ft_model_note_at), on stderr
 * before the report: registered fusions it does not know and registrations that disagree with its
 * own checks as warnings, always; the fields it had to assume as notes, with --explain (the
 * report itself does not list them yet). A trace the model cannot read is left to the replay,
 * which says why. */
static void print_model_notes(ft_trace *t, const char *path, const ft_env_kv *env, uint32_t n_env,
                              int assumed)
{
    const uint32_t nf = ft_trace_n_fusers(t), nr = ft_trace_n_recipes(t);
    ft_fuser_def *fd = ft_calloc(nf ? nf : 1, sizeof *fd);
    ft_recipe_def *rd = ft_calloc(nr ? nr : 1, sizeof *rd);
    ft_model *m = NULL;
    ft_err err = {0};
    if (fd && rd) {
        for (uint32_t i = 0; i < nf; i++)
            fd[i] = *ft_trace_fuser(t, i);
        for (uint32_t i = 0; i < nr; i++)
            rd[i] = *ft_trace_recipe(t, i);
        const ft_header *h = ft_trace_header(t);
        const ft_model_capture cap = {h->env_json,       h->extra_json, h->has_rank,
                                      h->has_world_size, h->rank,       h->world_size};
        if (ft_model_new(fd, nf, rd, nr, &cap, env, n_env, &m, &err)) m = NULL;
    }
    for (uint32_t i = 0; m && i < ft_model_n_notes(m); i++) {
        const ft_model_note *n = ft_model_note_at(m, i);
        if (n->kind == FT_NOTE_ASSUMED && !assumed) continue;
        fprintf(stderr, "%s: %s: %s: %s\n", cli_prog(),
                n->kind == FT_NOTE_ASSUMED ? "note" : "warning", path, n->text);
    }
    ft_model_free(m);
    ft_free(fd);
    ft_free(rd);
}

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

static int parse_ns(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    (void)o;
    opt_ns *n = field;
    if (ft_parse_f64(v, &n->v) || !(n->v >= 0) || n->v > 1e15)
        return ft_err_set(err, FT_EINVAL, "wants a number of ns >= 0, got '%s'", v);
    n->set = 1;
    return FT_OK;
}

static int parse_steps(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    (void)o;
    opt_steps *st = field;
    const char *colon = strchr(v, ':');
    char lo[32] = "", hi[32] = "";
    if (colon && (size_t)(colon - v) < sizeof lo && strlen(colon + 1) < sizeof hi) {
        memcpy(lo, v, (size_t)(colon - v));
        ft_strlcpy(hi, colon + 1, sizeof hi);
    }
    st->lo = 0;
    st->hi = INT64_MAX;
    if (!colon || (lo[0] && ft_parse_i64(lo, &st->lo)) || (hi[0] && ft_parse_i64(hi, &st->hi)) ||
        st->lo < 0 || st->hi < st->lo)
        return ft_err_set(err, FT_EINVAL,
                          "wants A:B (steps A to B, either may be left out), got '%s'", v);
    st->set = 1;
    return FT_OK;
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
    {"env", 0, "K=V",
     "override a key of the trace's env (device_cc, NVTE_*, ...); K= removes it, K=null sets "
     "null; repeatable",
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
     "policy. cuda runs everything on the device (bf16 tensor-core GEMMs on exactly\n"
     "expanded quantized operands, the float64 reference in cuBLAS); no device:\n"
     "exit 3. The text report's policy table prints first; then, on stderr, the\n"
     "estimate of the numerics' work and (on a terminal) progress; Ctrl-C prints\n"
     "the numerics results so far",
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
    {"html", 0, "FILE",
     "also write a self-contained HTML report (charts along the run, breakdowns\n"
     "per fuser label, phase and rank, provenance); the traces then replay one\n"
     "after another",
     cli_parse_str, OFF(html)},
    {"fuser", 0, "GLOB", "count only the calls of fusers whose label matches GLOB", cli_parse_str,
     OFF(fuser)},
    {"phase", 0, "P", "count only the calls of phase P (fwd, recompute, eval, ...)", cli_parse_str,
     OFF(phase)},
    {"steps", 0, "A:B",
     "count only the calls of steps A to B (A: or :B open-ended); with a filter\n"
     "every call is still replayed, so that the cache sees the whole run, and the\n"
     "traces replay one after another",
     parse_steps, OFF(steps)},
    {"build-ns", 0, "NS",
     "TE's cost of a plan build, assumed when the trace has no captured fuse_ns\n"
     "(default 100000: a capture of TE 2.20 recording fuse_ns)",
     parse_ns, OFF(build_ns)},
    {"reset-ns", 0, "NS", "TE's cost of reset_recipe_state alone, assumed (default 0)", parse_ns,
     OFF(reset_ns)},
    {"timing", 0, NULL,
     "add this replayer's own measured times (ns/call, plan-build ns); they vary\n"
     "run to run, so they are off by default",
     cli_parse_flag, OFF(timing)},
    {"max-seconds", 0, "S",
     "refuse numerics estimated to take longer (default 600; 0: no limit);\n"
     "memory beyond the machine's is always refused",
     parse_seed, OFF(max_seconds)},
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

/* The command line, for the HTML report's provenance (Linux: /proc/self/cmdline), or NULL. */
static char *command_line(void)
{
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f) return NULL;
    ft_buf b = {0};
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        if (ft_buf_append(&b, buf, n)) break;
    fclose(f);
    if (ft_buf_append(&b, "", 1)) {
        ft_buf_free(&b);
        return NULL;
    }
    /* the program's own path is machine-specific: "fusertrace" stands for it */
    char *s = (char *)b.data, *first_end = memchr(s, 0, b.len);
    ft_buf out = {0};
    int rc = ft_buf_printf(&out, "fusertrace");
    for (char *p = first_end ? first_end + 1 : s + b.len; !rc && p < s + b.len - 1;
         p += strlen(p) + 1)
        rc = ft_buf_printf(&out, " %s", p);
    ft_buf_free(&b);
    if (rc) {
        ft_buf_free(&out);
        return NULL;
    }
    return (char *)out.data;
}

/* --html or a filter: replay the traces one after another with the report's collector watching
 * (and the numerics after it); with a filter the counts become those of the matching calls; the
 * HTML file is written whole or not at all. */
static int replay_observed(const char *const *paths, uint32_t n_paths, const ft_replay_opts *opts,
                           const ft_report_opts *rep, const ft_report_filter *flt, const char *html,
                           const ft_numerics_result *nres, ft_replay_result *res, ft_err *err)
{
    ft_report_data *d = NULL;
    ft_replay_opts o = *opts;
    int rc = ft_report_data_new(o.policies, o.n_policies, &d, err);
    if (!rc) ft_report_data_filter(d, flt);
    if (!rc && o.explain) {
        o.explain = ft_report_data_explain(d, o.explain);
        if (!o.explain) rc = ft_err_set(err, FT_ENOMEM, "cannot count the --explain causes");
    }
    if (!rc) rc = ft_report_replay(paths, n_paths, &o, d, stderr, res, err);
    if (!rc && (flt->fuser_glob || flt->phase || flt->has_steps))
        ft_report_data_apply_filter(d, res);
    if (!rc && html) {
        cli_out out = {.slot = -1};
        char *command = command_line();
        ft_report_html_opts ho = {.command = command, .title = NULL};
        rc = cli_out_open(&out, html, CLI_OUT_STREAM, 1, err);
        if (!rc) rc = ft_report_html(out.f, res, nres, d, rep, &ho, err);
        rc = cli_out_close(&out, rc, err);
        ft_free(command);
    }
    ft_report_data_free(d);
    return rc;
}

/* "fuser label GLOB, phase P, steps A to B" for the report. */
static void filter_text(const ft_report_filter *flt, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    if (flt->fuser_glob) n += (size_t)snprintf(buf + n, cap - n, "fuser label %s", flt->fuser_glob);
    if (flt->phase && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "%sphase %s", n ? ", " : "", flt->phase);
    if (flt->has_steps && n < cap) {
        if (flt->step_hi == INT64_MAX)
            snprintf(buf + n, cap - n, "%ssteps %lld and later", n ? ", " : "",
                     (long long)flt->step_lo);
        else
            snprintf(buf + n, cap - n, "%ssteps %lld to %lld", n ? ", " : "",
                     (long long)flt->step_lo, (long long)flt->step_hi);
    }
}

static int run(void *opts_v, int n_args, char **args, ft_err *err)
{
    replay_opts *ro = opts_v;
    uint32_t n_paths = (uint32_t)n_args;
    int numerics = ro->backend >= 0;
    if (!numerics && (ro->sample || ro->all || ro->shrink || ro->seed.set || ro->max_seconds.set))
        return cli_usage_error(err, "--sample, --all, --shrink, --seed and --max-seconds go with "
                                    "--numerics cpu|cuda");
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
        if (!(rc = ft_trace_open(args[i], FT_OPEN_READ, &t, err))) {
            pr.n_calls += ft_trace_n_calls(t);
            /* a recording not closed, or a side file ignored: said before the report */
            if (ft_trace_notice(t)) fprintf(stderr, "%s: %s\n", cli_prog(), ft_trace_notice(t));
            print_model_notes(t, args[i], ro->env.kv, ro->env.n, ro->explain);
        }
        ft_trace_close(t);
    }
    /* the back end can run here: said before any output */
    if (!rc && numerics) rc = ft_numerics_backend_check(backends[ro->backend].backend, err);
    if (rc) return rc;
    const char *const *paths = (const char *const *)args;
    /* --env keys the model does not read change nothing: say so */
    for (uint32_t k = 0; k < ro->env.n; k++) {
        if (ft_env_key_is_read(ro->env.kv[k].key)) continue;
        fprintf(stderr,
                "%s: warning: --env %s: the model reads no such key, so it changes nothing; it "
                "reads:",
                cli_prog(), ro->env.kv[k].key);
        const char *key;
        for (uint32_t j = 0; (key = ft_env_read_key(j)); j++)
            fprintf(stderr, "%s %s", j ? "," : "", key);
        fputc('\n', stderr);
    }

    ft_replay_result *res = ft_malloc(sizeof *res);
    ft_numerics_result *nres = ft_malloc(sizeof *nres);
    ft_replay_result *per_trace = n_paths > 1 ? ft_calloc(n_paths, sizeof *per_trace) : NULL;
    int64_t *ranks = ft_calloc(n_paths, sizeof *ranks);
    ft_report_notes *notes = ft_malloc(sizeof *notes);
    cli_out pc = {.slot = -1};
    if (!res || !nres || !ranks || !notes || (n_paths > 1 && !per_trace)) {
        rc = ft_err_set(err, FT_ENOMEM, "out of memory");
        goto done;
    }
    /* one trace per rank, and a warning for traces of different runs */
    if ((rc = ft_report_check_inputs(paths, n_paths, stderr, ranks, err))) goto done;
    if ((rc = ft_report_find_unfused(paths, n_paths, ro->env.kv, ro->env.n, notes, err))) goto done;
    ft_report_filter flt = {.fuser_glob = ro->fuser,
                            .phase = ro->phase,
                            .has_steps = ro->steps.set,
                            .step_lo = ro->steps.lo,
                            .step_hi = ro->steps.hi};
    int filtered = ro->fuser || ro->phase || ro->steps.set;
    char filter_buf[512];
    filter_text(&flt, filter_buf, sizeof filter_buf);
    ft_report_opts rep;
    ft_report_opts_init(&rep);
    rep.timing = ro->timing;
    if (ro->build_ns.set) rep.build_ns = ro->build_ns.v;
    if (ro->reset_ns.set) rep.reset_ns = ro->reset_ns.v;
    rep.filter = filtered ? filter_buf : NULL;
    rep.notes = notes;
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
    if (per_trace && !filtered && !ro->html) {
        /* per-trace (rank) rows */
        o.per_trace = per_trace;
        rep.n_per_trace = n_paths;
        rep.per_trace = per_trace;
        rep.trace_names = paths;
        rep.trace_ranks = ranks;
    }
    ft_numerics_opts no = {.shrink = ro->shrink ? ro->shrink : 1,
                           .sample = ro->all      ? 0
                                     : ro->sample ? ro->sample
                                                  : 64,
                           .seed = ro->seed.set ? ro->seed.v : 1,
                           .n_threads = ro->threads};
    if (numerics) {
        no.backend = backends[ro->backend].backend;
        no.max_seconds = ro->max_seconds.set ? (double)ro->max_seconds.v : 600.0;
        no.info = stderr;
        no.stop = &g_stop;
    }
    /* First the replay (a plain replay takes milliseconds), with per-call and explain output and
     * the report's observers (--html, filters); in text its table and reading print before the
     * numerics start. The numerics replay again with those outputs off. */
    const int observed = ro->html || filtered;
    const int table_first = numerics && format == FT_REPORT_TEXT;
    /* progress only where nothing else writes to the terminal meanwhile; numerics print their
     * own (calls done, rate, time left) */
    int show = cli_progress_wanted() && !(ro->explain && explain == stderr) &&
               !pthread_create(&pr.thread, NULL, progress_main, &pr);
    if (observed)
        rc = replay_observed(paths, n_paths, &o, &rep, &flt, numerics ? NULL : ro->html, NULL, res,
                             err);
    else
        rc = ft_replay_traces(paths, n_paths, &o, res, err);
    if (show) {
        atomic_store(&pr.stop, 1);
        pthread_join(pr.thread, NULL);
        cli_progress_end();
    }
    /* the per-call file complete (or its failure known) before the report is written */
    rc = cli_out_close(&pc, rc, err);
    if (rc) goto done;
    if (ro->explain) fputc('\n', explain);
    if (table_first) {
        rc = ft_report_write_opts(report, res, NULL, format, &rep, err);
        if (!rc) fputc('\n', report);
        if (!rc) rc = ft_report_reading(report, res, err);
        fflush(report);
        if (rc) goto done;
    }
    if (numerics) {
        ft_replay_opts on = o;
        on.per_call = NULL, on.explain = NULL, on.per_trace = NULL;
        no.progress = (uint8_t)cli_progress_wanted();
        struct sigaction sa, old_sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;
        sa.sa_flags = (int)SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_sa);
        ft_replay_result *rn = ft_malloc(sizeof *rn);
        rc = rn ? ft_numerics_replay_traces(paths, n_paths, &on, &no, rn, nres, err)
                : ft_err_set(err, FT_ENOMEM, "out of memory");
        sigaction(SIGINT, &old_sa, NULL);
        if (!rc && nres->interrupted)
            fprintf(stderr,
                    "fusertrace replay: interrupted: numerics of %llu of %llu sampled calls "
                    "below\n",
                    (unsigned long long)nres->calls_run, (unsigned long long)nres->calls_planned);
        /* the HTML holds the numerics too: its charts replay once more (milliseconds) */
        if (!rc && ro->html)
            rc = replay_observed(paths, n_paths, &on, &rep, &flt, ro->html, nres, rn, err);
        ft_free(rn);
        if (rc) goto done;
    }
    if (table_first) {
        fputc('\n', report);
        rc = ft_report_numerics(report, nres, err);
    } else {
        rc = ft_report_write_opts(report, res, numerics ? nres : NULL, format, &rep, err);
        if (!rc && format == FT_REPORT_TEXT) {
            fputc('\n', report);
            rc = ft_report_reading(report, res, err);
        }
    }
    if (!rc && format == FT_REPORT_TEXT) {
        fputc('\n', report);
        rc = ft_report_recommendation(report, res, &rep, err);
    }
done:
    rc = cli_out_close(&pc, rc, err); /* a failed replay leaves no per-call file behind */
    ft_free(res);
    ft_free(nres);
    ft_free(per_trace);
    ft_free(ranks);
    ft_free(notes);
    return rc;
}

const cli_cmd cmd_replay = {
    .name = "replay",
    .synopsis = "TRACE... [--policy LIST|all] [--capacity N] [--env K=V]...\n"
                "                         [--json | --csv] [--per-call FILE] [--explain]\n"
                "                         [--captured POLICY] [--threads N] [--timing]\n"
                "                         [--build-ns NS] [--reset-ns NS] [--html FILE]\n"
                "                         [--fuser GLOB] [--phase P] [--steps A:B]\n"
                "                         [--numerics cpu|cuda [--sample N | --all] [--shrink K]\n"
                "                          [--seed S] [--max-seconds S]]",
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
