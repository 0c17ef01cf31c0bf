/*
 * cmd_replay.c - `fusertrace replay TRACE...`: replay traces (one per rank) under plan-cache
 * policies and print one reduced report (text table, JSON or CSV); with --numerics, also run the
 * sampled grouped-MLP calls' chosen and fresh plans (ft_numerics.h) and add the numerics section;
 * with --gpu-time, time every situation of the sampled calls on the device's own kernels and add
 * the GPU time section (with or without --numerics, on the same sampled calls).
 * Each trace is opened once; one pass of the replay driver serves every consumer (the counts,
 * --per-call and --explain, the HTML collector, the numerics' estimate), and --numerics makes a
 * second one that runs the sampled calls.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "par.h"
#include "ft_replayer.h"
#include "ft_report.h"
#include "ft_numerics.h"
#include "ft_tefuser.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
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

typedef struct dev_list {
    int id[FT_NUMERICS_MAX_DEVICES];
    uint32_t n;
} dev_list;

typedef struct gate_list {
    ft_gate_cond c[FT_GATE_MAX];
    uint32_t n;
} gate_list;

typedef struct replay_opts {
    cli_policy_opts pol;
    gate_list fail_on;
    const char *timeline;
    env_list env;
    uint32_t capacity, threads, sample, shrink; /* 0: not given */
    int json, csv, explain, all, timing, gpu_time;
    const char *per_call, *captured, *html, *fuser, *phase;
    int backend; /* index into backends[], -1: no --numerics */
    opt_u64 seed;
    opt_ns build_ns, reset_ns;
    opt_steps steps;
    opt_u64 max_seconds; /* numerics: refuse longer estimates (default 600, 0: no limit) */
    dev_list devices;    /* --devices: the CUDA devices (none: every visible one) */
    uint64_t memory;     /* --memory: the decoders' budget, bytes (set by its parser) */
} replay_opts;

/* What the fuser model could not take from a trace's capture (ft_model_note_at), on stderr
 * before the report: registered fusions it does not know and registrations that disagree with its
 * own checks as warnings, always; the fields it had to assume as notes, with --explain. The
 * report lists every note (ft_report_notes.model). A trace the model cannot read is left to the
 * replay, which says why. */
static void print_model_notes(const ft_trace *t, const char *path, const ft_env_kv *env,
                              uint32_t n_env, int assumed)
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

/* --fail-on A,B (repeatable). */
static int parse_fail_on(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    (void)o;
    gate_list *g = field;
    for (const char *p = v;;) {
        const char *end = strchr(p, ',');
        char one[64];
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len >= sizeof one) return ft_err_set(err, FT_EINVAL, "'%.*s...': too long", 20, p);
        memcpy(one, p, len);
        one[len] = '\0';
        if (g->n == FT_GATE_MAX)
            return ft_err_set(err, FT_EINVAL, "more than %d conditions", FT_GATE_MAX);
        int rc = ft_report_gate_parse(one, &g->c[g->n], err);
        if (rc) return rc;
        g->n++;
        if (!end) return FT_OK;
        p = end + 1;
    }
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

/* --devices 0,1,... (distinct ids; whether this process sees them is checked with the inputs). */
static int parse_devices(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    (void)o;
    dev_list *d = field;
    d->n = 0;
    for (const char *p = v;;) {
        char *end = NULL;
        errno = 0;
        const long id = strtol(p, &end, 10);
        if (end == p || errno || id < 0 || id > 4096 || (*end && *end != ','))
            return ft_err_set(err, FT_EINVAL, "wants device ids like 0,1,2, got '%s'", v);
        if (d->n == FT_NUMERICS_MAX_DEVICES)
            return ft_err_set(err, FT_EINVAL, "more than %d devices", FT_NUMERICS_MAX_DEVICES);
        for (uint32_t k = 0; k < d->n; k++)
            if (d->id[k] == (int)id)
                return ft_err_set(err, FT_EINVAL, "device %ld named twice in '%s'", id, v);
        d->id[d->n++] = (int)id;
        if (!*end) return FT_OK;
        p = end + 1;
    }
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
    {"policy", 0, "LIST",
     "comma-separated policies: names, all (the default), and user policies\n"
     "NAME=SPEC (docs/policies.md; below); user policies alone replay beside every\n"
     "built-in",
     cli_parse_policy_list, OFF(pol)},
    {"policies", 0, "FILE",
     "define the user policies of a JSON file (docs/policies.md); they replay\n"
     "after --policy's; repeatable",
     cli_parse_policy_file, OFF(pol)},
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
     "for every build, name what changed since the fuser's previous call, and\n"
     "for every stale hit what changed since its plan was built (on stdout with\n"
     "the text report, else on stderr)",
     cli_parse_flag, OFF(explain)},
    {"captured", 0, "POLICY",
     "the policy the captured run used (default: the header's\n"
     "fuser_cache field, else its te_version)",
     cli_parse_str, OFF(captured)},
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
    {"gpu-time", 0, NULL,
     "time every situation (plan, shapes, quantization) of the sampled calls on\n"
     "fusertrace's own CUDA kernels, forward and backward as the plan runs it\n"
     "(fused FC1 epilogue, or GEMM, activation and quantize kernels), and report per\n"
     "policy GPU ms per step of the chosen and the fresh plans and what stale plans\n"
     "cost; with or without --numerics (then cuda); no device: exit 3",
     cli_parse_flag, OFF(gpu_time)},
    {"devices", 0, "LIST",
     "CUDA devices for the sampled calls, e.g. 0,1,2,3 (default: every visible\n"
     "one); the figures do not depend on how many",
     parse_devices, OFF(devices)},
    {"sample", 0, "N",
     "at most N calls per trace (default 64), in call order: the first call\n"
     "of every situation, then more of each up to N/8; beyond N, the first call\n"
     "of each policy's own stale situation (every stale policy is measured)",
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
     "after another; - for stdout, where the text report then goes to stderr",
     cli_parse_str, OFF(html)},
    {"fuser", 0, "GLOB", "count only the calls of fusers whose label matches GLOB", cli_parse_str,
     OFF(fuser)},
    {"phase", 0, "P", "count only the calls of phase P (fwd, recompute, eval, ...)", cli_parse_str,
     OFF(phase)},
    {"steps", 0, "A:B",
     "count only the calls of steps A to B (A: or :B open-ended); with a filter\n"
     "every call is still replayed, so that the cache sees the whole run",
     parse_steps, OFF(steps)},
    {"build-ns", 0, "NS",
     "TE's cost of a plan build, assumed when the trace has no captured fuse_ns\n"
     "(default 100000: a capture of TE 2.20 recording fuse_ns)",
     parse_ns, OFF(build_ns)},
    {"reset-ns", 0, "NS", "TE's cost of reset_recipe_state alone, assumed (default 0)", parse_ns,
     OFF(reset_ns)},
    {"fail-on", 0, "COND",
     "exit with status 4 when COND holds under a chosen policy (after the\n"
     "report; the message names the condition, the policy and the first call):\n"
     "stale, raises, builds>N, builds-per-fuser>N, rebuilds-per-step>N;\n"
     "comma-separated or repeated. The chosen policies are the replayed ones,\n"
     "but the user policies alone when --policy names no built-in",
     parse_fail_on, OFF(fail_on)},
    {"timeline", 0, "FILE",
     "also write the run as a Chrome trace event file (Perfetto, chrome://tracing):\n"
     "a process per rank, a track per fuser, each call a slice, builds, resets\n"
     "and stale plans as instant events per policy, steps and cumulative builds\n"
     "as counters; the traces then replay one after another",
     cli_parse_str, OFF(timeline)},
    {"memory", 0, "SIZE", CLI_MEMORY_HELP, cli_parse_memory, OFF(memory)},
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

/* "fuser label GLOB, phase P, steps A to B" for the report. */
static void filter_text(const ft_replay_filter *flt, char *buf, size_t cap)
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

/* One replay command: its inputs (each trace opened once), options, outputs and the consumers
 * of its passes over the traces (one pass; with --numerics a second one after the estimate). */
typedef struct replay_cmd {
    const replay_opts *ro;
    uint32_t pol[FT_MAX_POLICIES]; /* the policies replayed, registry indices */
    uint32_t n_pol;
    const char *const *paths;
    uint32_t n_paths;
    ft_replay_set *set; /* the traces this process replays (all, but in an MPI job) */
    /* an MPI job of np processes (cli/par.c): this one is me; it replays traces own[n_own]
     * (cli_par_share), running part[k] of own[k]'s sampled numerics calls and counting the
     * decisions of those whose first process it is; process 0 also opens every trace, all, for
     * the checks and the report, and alone writes it */
    int np, me;
    uint32_t *own, n_own;
    ft_numerics_part *part;
    const char **own_paths;
    ft_replay_set *all;
    ft_replay_result *own_res;    /* [n_own] each own trace's result */
    ft_report_causes *causes_all; /* process 0: every trace's causes */
    ft_numerics_estimate job_est; /* the whole job's estimate */
    int format, numerics, filtered;
    int gpu_time, nx_pass;  /* --gpu-time; a numerics pass runs (--numerics or --gpu-time) */
    FILE *report, *explain; /* the text report's stream; --explain's */
    ft_replay_filter flt;
    char filter_buf[512];
    ft_report_opts rep;
    ft_replay_opts o;
    ft_numerics_opts no;
    ft_replay_result *res, *per_trace;
    ft_numerics_result *nres;
    int64_t *ranks;
    ft_report_notes *notes;
    cli_out pc;               /* --per-call */
    ft_report_calls *calls;   /* --per-call and --explain lines */
    ft_report_causes *causes; /* why plans were built and went stale (text, JSON, HTML) */
    ft_report_data *data;     /* --html */
    ft_report_prov *prov;     /* --json: the inputs' identity */
    ft_numerics_obs *est;     /* --numerics: the estimate, in the first pass */
    ft_report_gate *gate;     /* --fail-on */
    cli_out tl;               /* --timeline */
    ft_report_timeline *timeline;
    const ft_replay_observer *obs[6];
} replay_cmd;

/* Whether an output name means stdout. */
static int is_stdout(const char *name)
{
    return name && (!strcmp(name, "-") || !strcmp(name, "/dev/stdout"));
}

static int check_usage(const replay_opts *ro, ft_err *err)
{
    const int numerics = ro->backend >= 0;
    if (!numerics && !ro->gpu_time && (ro->sample || ro->all || ro->shrink || ro->seed.set))
        return cli_usage_error(err, "--sample, --all, --shrink and --seed go with --numerics "
                                    "cpu|cuda or --gpu-time");
    const int on_device =
        (numerics && backends[ro->backend].backend == FT_NUMERICS_CUDA) || ro->gpu_time;
    if (ro->devices.n && !on_device)
        return cli_usage_error(err, "--devices goes with --numerics cuda or --gpu-time (the CPU "
                                    "back end runs on this machine's cores: --threads)");
    if (!numerics && ro->max_seconds.set)
        return cli_usage_error(err, "--max-seconds goes with --numerics cpu|cuda");
    if (ro->gpu_time && numerics && backends[ro->backend].backend != FT_NUMERICS_CUDA)
        return cli_usage_error(err, "--gpu-time runs on the device: it goes with --numerics cuda "
                                    "or without --numerics");
    if (ro->gpu_time && ro->csv)
        return cli_usage_error(err, "--gpu-time has no CSV form (use --json or text)");
    if (ro->sample && ro->all) return cli_usage_error(err, "--sample and --all exclude each other");
    if (ro->json && ro->csv) return cli_usage_error(err, "--json and --csv exclude each other");
    if (numerics && ro->csv)
        return cli_usage_error(err, "--numerics has no CSV form (use --json or text)");
    const int per_call_stdout = is_stdout(ro->per_call), html_stdout = is_stdout(ro->html);
    if (per_call_stdout && (ro->json || ro->csv))
        return cli_usage_error(
            err, "--per-call - and --%s both want stdout; name a file for one of them",
            ro->json ? "json" : "csv");
    if (html_stdout && (ro->json || ro->csv || per_call_stdout))
        return cli_usage_error(err,
                               "--html - and --%s both want stdout; name a file for one of them",
                               ro->json  ? "json"
                               : ro->csv ? "csv"
                                         : "per-call -");
    return FT_OK;
}

/* Every input checked and opened (once: the set serves every pass) before any output exists;
 * what the traces and --env say that the report does not, on stderr. */
static int open_inputs(replay_cmd *c, uint64_t *n_calls, ft_err *err)
{
    const replay_opts *ro = c->ro;
    int rc = FT_OK;
    /* in an MPI job, process 0 checks every trace (and opens them all into c->all), the others
     * their own */
    const int every = c->me == 0;
    for (uint32_t i = 0; every && i < c->n_paths && !rc; i++)
        rc = cli_in_check(c->paths[i], CLI_IN_TRACE, err);
    for (uint32_t k = 0; !every && k < c->n_own && !rc; k++)
        rc = cli_in_check(c->own_paths[k], CLI_IN_TRACE, err);
    if (!rc && c->np > 1) {
        if (every) rc = ft_replay_set_open(c->paths, c->n_paths, &c->all, err);
        if (!rc && c->n_own) rc = ft_replay_set_open(c->own_paths, c->n_own, &c->set, err);
    } else if (!rc) {
        rc = ft_replay_set_open(c->paths, c->n_paths, &c->set, err);
    }
    ft_replay_set *every_set = c->all ? c->all : c->set;
    for (uint32_t i = 0; !rc && every && i < c->n_paths; i++) {
        const ft_trace *t = ft_replay_set_trace(every_set, i);
        *n_calls += ft_trace_n_calls(t);
        /* a recording not closed, or a side file ignored: said before the report */
        if (ft_trace_notice(t)) fprintf(stderr, "%s: %s\n", cli_prog(), ft_trace_notice(t));
        print_model_notes(t, c->paths[i], ro->env.kv, ro->env.n, ro->explain);
    }
    /* the back end can run here: said before any output */
    if (!rc && c->numerics) rc = ft_numerics_backend_check(backends[ro->backend].backend, err);
    if (!rc && c->gpu_time) rc = ft_numerics_gputime_check(err);
    if (!rc && ro->devices.n)
        rc = ft_numerics_devices_check(FT_NUMERICS_CUDA, ro->devices.id, ro->devices.n, err);
    if (rc) return rc;
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
    return FT_OK;
}

/* The checks of several traces, why nothing fuses, and the options of the report, the replay
 * and the numerics; the --per-call output opened. */
static int setup(replay_cmd *c, ft_err *err)
{
    const replay_opts *ro = c->ro;
    c->res = ft_malloc(sizeof *c->res);
    c->nres = ft_malloc(sizeof *c->nres);
    c->per_trace = c->n_paths > 1 ? ft_calloc(c->n_paths, sizeof *c->per_trace) : NULL;
    c->ranks = ft_calloc(c->n_paths, sizeof *c->ranks);
    c->notes = ft_malloc(sizeof *c->notes);
    if (!c->res || !c->nres || !c->ranks || !c->notes || (c->n_paths > 1 && !c->per_trace))
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    /* one trace per rank, and a warning for traces of different runs (process 0 of an MPI job
     * alone: it writes the report) */
    ft_replay_set *every = c->all ? c->all : c->set;
    memset(c->notes, 0, sizeof *c->notes);
    int rc = c->me ? FT_OK : ft_report_check_inputs(every, stderr, c->ranks, err);
    if (!rc && !c->me) rc = ft_report_find_unfused(every, ro->env.kv, ro->env.n, c->notes, err);
    if (rc) return rc;
    c->flt = (ft_replay_filter){.fuser_glob = ro->fuser,
                                .phase = ro->phase,
                                .has_steps = ro->steps.set,
                                .step_lo = ro->steps.lo,
                                .step_hi = ro->steps.hi};
    c->filtered = ro->fuser || ro->phase || ro->steps.set;
    filter_text(&c->flt, c->filter_buf, sizeof c->filter_buf);
    ft_report_opts_init(&c->rep);
    c->rep.timing = ro->timing;
    if (ro->build_ns.set) c->rep.build_ns = ro->build_ns.v;
    if (ro->reset_ns.set) c->rep.reset_ns = ro->reset_ns.v;
    c->rep.filter = c->filtered ? c->filter_buf : NULL;
    c->rep.notes = c->notes;
    if (c->format == FT_REPORT_JSON && !c->me) {
        char *command = command_line();
        rc = ft_report_prov_new(every, command, &c->prov, err);
        ft_free(command);
        if (rc) return rc;
        c->rep.prov = c->prov;
    }
    if (ro->per_call && (rc = cli_out_open(&c->pc, ro->per_call, CLI_OUT_STREAM, 1, err)))
        return rc;
    if (ro->timeline && (rc = cli_out_open(&c->tl, ro->timeline, CLI_OUT_STREAM, 1, err)))
        return rc;
    c->o = (ft_replay_opts){.policies = c->pol,
                            .n_policies = c->n_pol,
                            .capacity = ro->capacity,
                            .env = ro->env.kv,
                            .n_env = ro->env.n,
                            .captured = ro->captured,
                            .filter = c->filtered ? &c->flt : NULL,
                            .n_threads = ro->threads};
    if (c->np > 1) { /* each own trace's result, for process 0 */
        c->own_res = ft_calloc(c->n_own ? c->n_own : 1, sizeof *c->own_res);
        if (!c->own_res) return ft_err_set(err, FT_ENOMEM, "out of memory");
        c->o.per_trace = c->own_res;
    }
    if (c->per_trace && !c->filtered && !ro->html) {
        /* per-trace (rank) rows */
        if (c->np == 1) c->o.per_trace = c->per_trace;
        c->rep.n_per_trace = c->n_paths;
        c->rep.per_trace = c->per_trace;
        c->rep.trace_names = c->paths;
        c->rep.trace_ranks = c->ranks;
    }
    c->no = (ft_numerics_opts){.shrink = ro->shrink ? ro->shrink : 1,
                               .sample = ro->all      ? 0
                                         : ro->sample ? ro->sample
                                                      : 64,
                               .seed = ro->seed.set ? ro->seed.v : 1,
                               .n_threads = ro->threads,
                               .devices = ro->devices.id,
                               .n_devices = ro->devices.n};
    if (c->numerics) {
        c->no.backend = backends[ro->backend].backend;
        c->no.max_seconds = ro->max_seconds.set ? (double)ro->max_seconds.v : 600.0;
        if (c->np > 1) { /* this process's part of each of its traces' sampled calls */
            c->no.parts = c->part;
            c->no.n_parts = c->n_own;
        }
    }
    if (c->gpu_time) {
        c->no.backend = FT_NUMERICS_CUDA;
        c->no.gpu_time = 1;
        c->no.time_only = (uint8_t)!c->numerics;
    }
    if (c->nx_pass) {
        c->no.info = stderr;
        c->no.stop = &g_stop;
        c->no.progress = (uint8_t)cli_progress_wanted();
    }
    return FT_OK;
}

/* The one pass that serves every consumer but the numerics' runs: the counts (with the filter),
 * the --per-call and --explain lines, what the HTML draws, the numerics' estimate. */
static int first_pass(replay_cmd *c, progress *pr, ft_err *err)
{
    const replay_opts *ro = c->ro;
    uint32_t n_obs = 0;
    int rc = FT_OK;
    if (ro->per_call || ro->explain) {
        rc = ft_report_calls_new(ro->per_call ? c->pc.f : NULL, ro->explain ? c->explain : NULL,
                                 &c->calls, err);
        if (!rc) c->obs[n_obs++] = ft_report_calls_observer(c->calls);
    }
    if (!rc && c->format != FT_REPORT_CSV) {
        rc = ft_report_causes_new(&c->causes, err);
        if (!rc) c->obs[n_obs++] = ft_report_causes_observer(c->causes);
        if (!rc && c->np > 1) ft_report_causes_keep(c->causes); /* packed for process 0 */
        c->rep.causes = c->causes;
    }
    if (!rc && ro->html) {
        rc = ft_report_data_new(c->o.policies, c->o.n_policies, &c->data, err);
        if (!rc) c->obs[n_obs++] = ft_report_data_observer(c->data);
    }
    if (!rc && c->numerics) {
        rc = ft_numerics_obs_new(&c->no, 1, &c->est, err);
        if (!rc) c->obs[n_obs++] = ft_numerics_obs_observer(c->est);
    }
    if (!rc && ro->fail_on.n) {
        /* the policies chosen: the user policies alone when the built-ins replay only beside
         * them for comparison (the --policy list names none) */
        uint32_t watch[FT_MAX_POLICIES], n_watch = 0;
        const int builtins = cli_policies_names_builtin(&ro->pol);
        for (uint32_t p = 0; p < c->n_pol; p++)
            if (c->pol[p] >= ft_policy_builtin_count()) watch[n_watch++] = c->pol[p];
        const int all = !n_watch || builtins;
        rc = ft_report_gate_new(ro->fail_on.c, ro->fail_on.n, all ? NULL : watch, n_watch, &c->gate,
                                err);
        if (!rc) c->obs[n_obs++] = ft_report_gate_observer(c->gate);
    }
    if (!rc && ro->timeline) {
        rc = ft_report_timeline_new(c->tl.f, c->tl.name, &c->timeline, err);
        if (!rc) c->obs[n_obs++] = ft_report_timeline_observer(c->timeline);
    }
    if (rc) return rc;
    ft_replay_opts o = c->o;
    o.observers = c->obs;
    o.n_observers = n_obs;
    /* progress only where nothing else writes to the terminal meanwhile; numerics print their
     * own (calls done, rate, time left) */
    int show = cli_progress_wanted() && !(ro->explain && c->explain == stderr) &&
               !pthread_create(&pr->thread, NULL, progress_main, pr);
    if (c->set)
        rc = ft_replay_run(c->set, &o, c->res, err);
    else /* an MPI process with no trace of its own */
        ft_replay_result_init(c->res, c->pol, c->n_pol);
    if (show) {
        atomic_store(&pr->stop, 1);
        pthread_join(pr->thread, NULL);
        cli_progress_end();
    }
    /* the per-call file and the timeline complete (or their failure known) before the report
     * is written */
    if (!rc && c->timeline) rc = ft_report_timeline_finish(c->timeline, err);
    rc = cli_out_close(&c->tl, rc, err);
    rc = cli_out_close(&c->pc, rc, err);
    if (!rc && ro->explain) fputc('\n', c->explain);
    return rc;
}

/* ---- an MPI job (cli/par.c) ---------------------------------------------------------------- */

/* What one process of an MPI job cannot do: the outputs that follow every call of every trace in
 * order (process 0 writes the report alone, from the processes' results). */
static int par_usage(const replay_opts *ro, ft_err *err)
{
    const char *what = ro->per_call    ? "--per-call"
                       : ro->explain   ? "--explain"
                       : ro->html      ? "--html"
                       : ro->timeline  ? "--timeline"
                       : ro->fail_on.n ? "--fail-on"
                       : ro->gpu_time  ? "--gpu-time"
                                       : NULL;
    if (!what) return FT_OK;
    return cli_usage_error(err,
                           "%s is not split over MPI processes (this job has %d): run it in one "
                           "process",
                           what, cli_par_size());
}

/* The trace shares of this process. */
static int par_share(replay_cmd *c, ft_err *err)
{
    c->np = cli_par_size();
    c->me = cli_par_rank();
    if (c->np < 2) return FT_OK;
    c->own = ft_calloc(c->n_paths, sizeof *c->own);
    c->part = ft_calloc(c->n_paths, sizeof *c->part);
    c->own_paths = ft_calloc(c->n_paths, sizeof *c->own_paths);
    if (!c->own || !c->part || !c->own_paths) return ft_err_set(err, FT_ENOMEM, "out of memory");
    /* with numerics, the sampled calls of a trace are split too */
    c->n_own = cli_par_share(c->n_paths, c->numerics, c->own, c->part);
    for (uint32_t k = 0; k < c->n_own; k++)
        c->own_paths[k] = c->paths[c->own[k]];
    return FT_OK;
}

/* After the first pass: every trace's result and causes on process 0, merged in trace order. */
static int par_replay(replay_cmd *c, int rc, ft_err *err)
{
    rc = cli_par_agree(rc, err);
    if (rc) return rc;
    ft_replay_result *per = c->o.per_trace == c->own_res && c->rep.per_trace ? c->per_trace : NULL;
    rc = cli_par_reduce_replay(c->n_paths, c->own, c->part, c->n_own, c->own_res, c->causes, c->pol,
                               c->n_pol, c->res, per, c->causes ? &c->causes_all : NULL, err);
    if (!rc && c->causes_all) c->rep.causes = c->causes_all;
    return rc;
}

/* The estimate of every process's share, said and judged by process 0 for the whole job. */
static int par_estimate(replay_cmd *c, ft_err *err)
{
    ft_numerics_estimate e;
    memset(&e, 0, sizeof e);
    int rc = cli_par_agree(ft_numerics_obs_measure(c->est, &e, err), err);
    const uint64_t own_calls = e.calls;
    if (!rc) rc = cli_par_reduce_estimate(&e, err);
    if (!rc && !c->me) rc = ft_numerics_estimate_judge(&e, &c->no, err);
    rc = cli_par_agree(rc, err);
    ft_numerics_estimate mine = e; /* the job's range; this process's calls for its progress */
    mine.calls = own_calls;
    if (!rc) ft_numerics_obs_set_estimate(c->est, &mine);
    c->job_est = e;
    return rc;
}

/* After the numerics pass: every trace's numerics on process 0, joined in call order and merged
 * in trace order. */
static int par_numerics(replay_cmd *c, const ft_numerics_obs *run, int rc, ft_err *err)
{
    rc = cli_par_agree(rc, err);
    if (rc) return rc;
    ft_numerics_result *mine = ft_calloc(1, sizeof *mine);
    if (mine && run && c->set) ft_numerics_obs_result(run, mine);
    cli_par_note_share(c->n_own, mine ? mine->calls_run : 0);
    ft_free(mine);
    const uint8_t stopped = c->nres->interrupted;
    rc = cli_par_reduce_numerics(c->n_paths, c->own, c->n_own, c->set ? run : NULL, c->pol,
                                 c->n_pol, c->nres, err);
    c->nres->interrupted |= stopped;
    c->nres->calls_planned = c->job_est.calls;
    c->nres->est_lo_s = c->job_est.lo_s;
    c->nres->est_hi_s = c->job_est.hi_s;
    return rc;
}

/* The numerics' own pass: the estimate said and checked, then the sampled calls run (GPU time
 * alone: no estimate, the calls timed); Ctrl-C stops it with the results so far. The filter
 * stays: GPU time counts the calls it matches. */
static int numerics_pass(replay_cmd *c, ft_err *err)
{
    ft_numerics_obs *run = NULL;
    int rc = FT_OK;
    if (c->numerics && c->np > 1) {
        rc = par_estimate(c, err);
        if (!rc) rc = ft_numerics_obs_follow(c->est, &run, err);
    } else if (c->numerics) {
        rc = ft_numerics_obs_check(c->est, err);
        if (!rc) rc = ft_numerics_obs_follow(c->est, &run, err);
    } else {
        rc = ft_numerics_obs_new(&c->no, 0, &run, err);
    }
    ft_replay_result *rn = rc ? NULL : ft_malloc(sizeof *rn);
    if (!rc && !rn) rc = ft_err_set(err, FT_ENOMEM, "out of memory");
    if (!rc && !c->set) { /* an MPI process with no trace of its own */
        memset(c->nres, 0, sizeof *c->nres);
    } else if (!rc) {
        const ft_replay_observer *obs[1] = {ft_numerics_obs_observer(run)};
        ft_replay_opts on = c->o;
        on.per_trace = NULL;
        on.observers = obs;
        on.n_observers = 1;
        struct sigaction sa, old_sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;
        sa.sa_flags = (int)SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_sa);
        rc = ft_numerics_obs_finish(run, ft_replay_run(c->set, &on, rn, err), c->nres, err);
        sigaction(SIGINT, &old_sa, NULL);
    }
    if (c->np > 1) rc = par_numerics(c, run, rc, err);
    if (!rc && c->nres->interrupted)
        fprintf(stderr,
                "fusertrace replay: interrupted: numerics of %llu of %llu sampled calls below\n",
                (unsigned long long)c->nres->calls_run, (unsigned long long)c->nres->calls_planned);
    ft_free(rn);
    ft_numerics_obs_free(run);
    return rc;
}

/* The HTML file, written whole or not at all. */
static int write_html(replay_cmd *c, ft_err *err)
{
    cli_out out = {.slot = -1};
    char *command = command_line();
    ft_report_html_opts ho = {.command = command, .title = NULL};
    int rc = cli_out_open(&out, c->ro->html, CLI_OUT_STREAM, 1, err);
    if (!rc)
        rc = ft_report_html(out.f, c->res, c->nx_pass ? c->nres : NULL, c->data, &c->rep, &ho, err);
    rc = cli_out_close(&out, rc, err);
    ft_free(command);
    return rc;
}

/* The replay, then (text) its table and reading before the numerics start, the numerics, the
 * HTML, the report. */
static int replay_and_report(replay_cmd *c, progress *pr, ft_err *err)
{
    const int table_first = c->nx_pass && c->format == FT_REPORT_TEXT;
    int rc = first_pass(c, pr, err);
    if (c->np > 1) rc = par_replay(c, rc, err);
    if (!rc && table_first && !c->me) {
        rc = ft_report_write_opts(c->report, c->res, NULL, c->format, &c->rep, err);
        if (!rc) fputc('\n', c->report);
        if (!rc) rc = ft_report_reading(c->report, c->res, err);
        fflush(c->report);
    }
    if (!rc && c->nx_pass) rc = numerics_pass(c, err);
    if (rc || c->me) return rc; /* process 0 of an MPI job alone writes */
    if (c->ro->html) rc = write_html(c, err);
    if (rc) return rc;
    if (table_first) {
        if (c->numerics) fputc('\n', c->report);
        if (c->numerics) rc = ft_report_numerics(c->report, c->nres, err);
        if (!rc && c->gpu_time) fputc('\n', c->report);
        if (!rc && c->gpu_time) rc = ft_report_gputime(c->report, c->nres, err);
    } else {
        rc = ft_report_write_opts(c->report, c->res, c->nx_pass ? c->nres : NULL, c->format,
                                  &c->rep, err);
        if (!rc && c->format == FT_REPORT_TEXT) {
            fputc('\n', c->report);
            rc = ft_report_reading(c->report, c->res, err);
        }
    }
    if (!rc && c->format == FT_REPORT_TEXT) {
        fputc('\n', c->report);
        rc = ft_report_recommendation(c->report, c->res, &c->rep, err);
    }
    if (!rc && c->gate) {
        fflush(c->report);
        rc = ft_report_gate_verdict(c->gate, stderr, cli_prog(), err);
    }
    return rc;
}

static int run(void *opts_v, int n_args, char **args, ft_err *err)
{
    const replay_opts *ro = opts_v;
    int rc = check_usage(ro, err);
    if (rc) return rc;
    replay_cmd c = {.ro = ro,
                    .paths = (const char *const *)args,
                    .n_paths = (uint32_t)n_args,
                    .numerics = ro->backend >= 0,
                    .gpu_time = ro->gpu_time,
                    .nx_pass = ro->backend >= 0 || ro->gpu_time,
                    .pc = {.slot = -1},
                    .tl = {.slot = -1},
                    .np = 1};
    c.format = ro->json ? FT_REPORT_JSON : ro->csv ? FT_REPORT_CSV : FT_REPORT_TEXT;
    /* stdout carries only the requested format: the report, the per-call lines or the HTML
     * (then the text report goes to stderr) */
    c.report = is_stdout(ro->per_call) || is_stdout(ro->html) ? stderr : stdout;
    c.explain = c.format == FT_REPORT_TEXT ? c.report : stderr;
    progress pr = {.n_traces = c.n_paths, .numerics = c.nx_pass};
    rc = cli_policies_resolve(&ro->pol, 0, c.pol, &c.n_pol, err);
    uint32_t cap_idx;
    if (!rc && ro->captured && (rc = ft_policy_find(ro->captured, &cap_idx, err))) {
        char detail[FT_ERR_MAX];
        ft_strlcpy(detail, ft_err_msg(err), sizeof detail);
        rc = cli_usage_error(err, "--captured: %s", detail);
    }
    if (!rc && cli_par_size() > 1) rc = par_usage(ro, err);
    if (!rc) rc = par_share(&c, err);
    /* in an MPI job every process reaches each agreement, failed or not (cli/par.c) */
    if (!rc || c.np > 1) rc = cli_par_agree(rc ? rc : open_inputs(&c, &pr.n_calls, err), err);
    if (!rc || c.np > 1) rc = cli_par_agree(rc ? rc : setup(&c, err), err);
    if (!rc) rc = replay_and_report(&c, &pr, err);
    rc = cli_out_close(&c.pc, rc, err); /* a failed replay leaves no per-call file behind */
    rc = cli_out_close(&c.tl, rc, err);
    ft_report_calls_free(c.calls);
    ft_report_gate_free(c.gate);
    ft_report_timeline_free(c.timeline);
    ft_report_causes_free(c.causes);
    ft_report_data_free(c.data);
    ft_report_prov_free(c.prov);
    ft_numerics_obs_free(c.est);
    ft_replay_set_close(c.set);
    ft_replay_set_close(c.all);
    ft_report_causes_free(c.causes_all);
    ft_free(c.own);
    ft_free(c.part);
    ft_free(c.own_paths);
    ft_free(c.own_res);
    ft_free(c.res);
    ft_free(c.nres);
    ft_free(c.per_trace);
    ft_free(c.ranks);
    ft_free(c.notes);
    return rc;
}

const cli_cmd cmd_replay = {
    .name = "replay",
    .synopsis = "TRACE... [--policy LIST|all] [--policies FILE]... [--capacity N]\n"
                "                         [--env K=V]...\n"
                "                         [--json | --csv] [--per-call FILE] [--explain]\n"
                "                         [--captured POLICY] [--threads N] [--timing]\n"
                "                         [--build-ns NS] [--reset-ns NS] [--html FILE]\n"
                "                         [--fuser GLOB] [--phase P] [--steps A:B]\n"
                "                         [--fail-on COND]... [--timeline FILE]\n"
                "                         [--numerics cpu|cuda] [--gpu-time] [--sample N | --all]\n"
                "                         [--shrink K] [--seed S] [--max-seconds S]\n"
                "                         [--devices LIST]",
    .summary = "replay traces under plan-cache policies",
    .about = "Replays every call of the traces (one per rank, reduced into one report) through a\n"
             "model of TransformerEngine's fusion-plan cache under each policy, in one pass.\n"
             "docs/reading-a-report.md explains every column and line of the report.",
    CLI_OPTS(replay_opts, options),
    .init_fn = init,
    .min_args = 1,
    .max_args = CLI_ANY,
    .run_fn = run,
    .help_fn = cli_policies_help,
};
