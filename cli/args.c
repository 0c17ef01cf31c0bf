/*
 * args.c - one option parser for every subcommand: a command's options are rows of its cli_opt
 * table, found by name; nothing here knows a command. cli_run runs the command and turns its
 * status into the exit code (cli_exit_code, the one mapping).
 *
 * Accepted forms: --name VALUE, --name=VALUE, -x VALUE, -xVALUE, flags as --name or -x, -h and
 * --help everywhere, `--` ending the options (what follows is positional even if it starts
 * with '-'), and `-` as a positional argument (stdin or stdout where the command allows it).
 * Options and positional arguments may come in any order. Every mistake exits 2 with a message
 * naming the option and the usage line.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *prog_name = "fusertrace";

const char *cli_prog(void)
{
    return prog_name;
}

/* ---- exit codes ---------------------------------------------------------------------------- */
/* The one mapping from FT_* statuses to exit codes (cli.h). */
int cli_exit_code(int rc)
{
    switch (rc) {
    case FT_OK:
        return FT_EXIT_OK;
    case FT_ECORRUPT:
        return FT_EXIT_CHECK;
    case FT_EINVAL:
    case FT_ERANGE:
    case FT_ENOTFOUND:
    case FT_ENOTTRACE:
    case FT_EVERSION:
    case FT_EUNSUPPORTED:
        return FT_EXIT_INPUT;
    case FT_EGATE:
        return FT_EXIT_GATE;
    default: /* FT_EIO, FT_ENOMEM, FT_ESQL, FT_EZSTD, FT_ESTATE, FT_ENODEV, FT_ECUDA */
        return FT_EXIT_INTERNAL;
    }
}

/* ---- the common parsers -------------------------------------------------------------------- */
int cli_parse_flag(const cli_opt *o, const char *val, void *field, ft_err *err)
{
    (void)o, (void)val, (void)err;
    *(int *)field = 1;
    return FT_OK;
}

int cli_parse_str(const cli_opt *o, const char *val, void *field, ft_err *err)
{
    (void)o;
    if (!*val) return ft_err_set(err, FT_EINVAL, "wants a value, got ''");
    *(const char **)field = val;
    return FT_OK;
}

int cli_parse_count(const cli_opt *o, const char *val, void *field, ft_err *err)
{
    (void)o;
    int64_t v;
    if (ft_parse_i64(val, &v) || v < 1 || (uint64_t)v > UINT32_MAX)
        return ft_err_set(err, FT_EINVAL, "wants an integer >= 1, got '%s'", val);
    *(uint32_t *)field = (uint32_t)v;
    return FT_OK;
}

int cli_parse_u64(const cli_opt *o, const char *val, void *field, ft_err *err)
{
    (void)o;
    /* ft_parse_i64 stops at 2^63; seeds may use the whole range */
    char *end;
    errno = 0;
    unsigned long long v = val[0] >= '0' && val[0] <= '9' ? strtoull(val, &end, 10) : 0;
    if (!(val[0] >= '0' && val[0] <= '9') || errno || *end)
        return ft_err_set(err, FT_EINVAL, "wants an integer in [0, 2^64), got '%s'", val);
    *(uint64_t *)field = (uint64_t)v;
    return FT_OK;
}

int cli_parse_memory(const cli_opt *o, const char *val, void *field, ft_err *err)
{
    (void)o;
    char *end;
    errno = 0;
    unsigned long long v = val[0] >= '0' && val[0] <= '9' ? strtoull(val, &end, 10) : 0;
    unsigned shift = 0;
    if (val[0] >= '0' && val[0] <= '9' && !errno && *end && !end[1]) {
        const char *units = "KMGT", *u = strchr(units, *end == 'k' ? 'K' : *end);
        if (u && *u) {
            shift = 10 * (unsigned)(u - units + 1);
            end++;
        }
    }
    if (!(val[0] >= '0' && val[0] <= '9') || errno || *end || (shift && v > (~0ull >> shift)))
        return ft_err_set(err, FT_EINVAL,
                          "wants a size in bytes, with K, M, G or T for KiB to TiB (0: no "
                          "limit), got '%s'",
                          val);
    *(uint64_t *)field = (uint64_t)v << shift;
    ft_mem_budget_set((uint64_t)v << shift);
    return FT_OK;
}

/* The default memory budget of the trace decoders: half the machine's memory. */
static void default_memory_budget(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    ft_mem_budget_set(pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz / 2 : 0);
}

/* ---- help ---------------------------------------------------------------------------------- */
static void usage_line(FILE *f, const cli_cmd *cmd, const char *prog)
{
    fprintf(f, "usage: %s%s%s\n", prog, cmd->synopsis && *cmd->synopsis ? " " : "",
            cmd->synopsis ? cmd->synopsis : "");
}

static void option_row(FILE *f, char short_name, const char *name, const char *arg,
                       const char *help)
{
    char head[64];
    snprintf(head, sizeof head, "%c%c%s--%s%s%s", short_name ? '-' : ' ',
             short_name ? short_name : ' ', short_name ? ", " : "  ", name, arg ? " " : "",
             arg ? arg : "");
    fprintf(f, "  %-24s", head);
    if (strlen(head) > 24) fprintf(f, "\n  %-24s", "");
    for (const char *p = help; *p;) { /* continuation lines indented under the first */
        const char *eol = strchr(p, '\n');
        int len = eol ? (int)(eol - p) : (int)strlen(p);
        fprintf(f, " %.*s\n", len, p);
        p += len + (eol != NULL);
        if (*p) fprintf(f, "  %-24s", "");
    }
}

void cli_help(FILE *f, const cli_cmd *cmd, const char *prog)
{
    usage_line(f, cmd, prog);
    if (cmd->about) fprintf(f, "\n%s\n", cmd->about);
    if (cmd->n_subs) {
        fprintf(f, "\nsubcommands:\n");
        for (size_t i = 0; i < cmd->n_subs; i++)
            fprintf(f, "  %-24s %s\n", cmd->subs[i]->name, cmd->subs[i]->summary);
    }
    fprintf(f, "\noptions:\n");
    for (size_t i = 0; i < cmd->n_opts; i++) {
        const cli_opt *o = &cmd->opts[i];
        option_row(f, o->short_name, o->name, o->arg, o->help);
    }
    option_row(f, 'h', "help", NULL, "this help");
    if (cmd->help_fn) cmd->help_fn(f);
}

/* ---- parsing ------------------------------------------------------------------------------- */
static const cli_opt *find_long(const cli_cmd *cmd, const char *name, size_t len)
{
    for (size_t i = 0; i < cmd->n_opts; i++)
        if (strlen(cmd->opts[i].name) == len && !strncmp(cmd->opts[i].name, name, len))
            return &cmd->opts[i];
    return NULL;
}

static const cli_opt *find_short(const cli_cmd *cmd, char c)
{
    for (size_t i = 0; i < cmd->n_opts; i++)
        if (cmd->opts[i].short_name == c) return &cmd->opts[i];
    return NULL;
}

static int usage_wanted;

int cli_usage_error(ft_err *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char msg[FT_ERR_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    usage_wanted = 1;
    return ft_err_set(err, FT_EINVAL, "%s", msg);
}

/* A usage mistake: the message, the usage line and where the help is; exit 2. */
static int usage_error(const cli_cmd *cmd, const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int usage_error(const cli_cmd *cmd, const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    usage_line(stderr, cmd, prog);
    fprintf(stderr, "(`fusertrace help %s` describes every option)\n", cmd->name);
    return FT_EXIT_INPUT;
}

int cli_run(const cli_cmd *cmd, const char *prog, int argc, char **argv)
{
    if (cmd->n_subs) { /* `kernels quantize ...` */
        if (argc >= 2 && argv[1][0] != '-')
            for (size_t i = 0; i < cmd->n_subs; i++)
                if (!strcmp(argv[1], cmd->subs[i]->name)) {
                    char sub_prog[128];
                    snprintf(sub_prog, sizeof sub_prog, "%s %s", prog, cmd->subs[i]->name);
                    return cli_run(cmd->subs[i], sub_prog, argc - 1, argv + 1);
                }
        if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            cli_help(stdout, cmd, prog);
            ft_err out_err = {0};
            if (!cli_stdout_close(&out_err)) return FT_EXIT_OK;
            fprintf(stderr, "%s: %s\n", prog, ft_err_msg(&out_err));
            return cli_exit_code(out_err.rc);
        }
        return usage_error(cmd, prog, argc >= 2 ? "unknown subcommand '%s'" : "no subcommand%s",
                           argc >= 2 ? argv[1] : "");
    }
    static char static_prog[128];
    ft_strlcpy(static_prog, prog, sizeof static_prog);
    usage_wanted = 0;
    cli_in_reset();
    default_memory_budget();
    prog_name = static_prog;

    void *opts = NULL;
    char **args = ft_calloc((size_t)argc + 1, sizeof *args);
    if (cmd->opts_size) opts = ft_calloc(1, cmd->opts_size);
    if (!args || (cmd->opts_size && !opts)) {
        ft_free(args);
        ft_free(opts);
        fprintf(stderr, "%s: out of memory\n", prog);
        return FT_EXIT_INTERNAL;
    }
    if (cmd->init_fn) cmd->init_fn(opts);
    int n_args = 0, status = FT_EXIT_OK, options_done = 0;
    ft_err err = {0};
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (options_done || a[0] != '-' || !a[1]) { /* positional, `-` included */
            args[n_args++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            options_done = 1;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cli_help(stdout, cmd, prog);
            goto done;
        }
        const cli_opt *o;
        const char *val = NULL; /* a value attached to the option: --x=V, -xV */
        char shown[80];         /* the option as the user wrote it */
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
            o = find_long(cmd, a + 2, len);
            snprintf(shown, sizeof shown, "--%.*s", (int)len, a + 2);
            if (eq) val = eq + 1;
        } else {
            o = find_short(cmd, a[1]);
            snprintf(shown, sizeof shown, "-%c", a[1]);
            if (a[2]) val = a + 2;
        }
        if (!o) {
            status = usage_error(cmd, prog, "unknown option '%s'", shown);
            goto done;
        }
        if (!o->arg && val) {
            status = usage_error(cmd, prog, "%s takes no value (got '%s')", shown, val);
            goto done;
        }
        if (o->arg && !val) {
            if (i + 1 == argc) {
                status = usage_error(cmd, prog, "%s needs a value (%s)", shown, o->arg);
                goto done;
            }
            val = argv[++i];
        }
        int rc = o->parse_fn(o, val, (char *)opts + o->offset, &err);
        if (rc) {
            status = usage_error(cmd, prog, "%s: %s", shown, ft_err_msg(&err));
            goto done;
        }
    }
    if (n_args < cmd->min_args) { /* named as the synopsis names it: "missing TRACE" */
        const char *syn = cmd->synopsis ? cmd->synopsis : "";
        int len = (int)strcspn(syn, " \n");
        if (len > 3 && !strncmp(syn + len - 3, "...", 3)) len -= 3;
        if (len)
            status = usage_error(cmd, prog, "missing %.*s", len, syn);
        else
            status = usage_error(cmd, prog, "too few arguments");
        goto done;
    }
    if (n_args > cmd->max_args) {
        status = usage_error(cmd, prog, "unexpected argument '%s'", args[cmd->max_args]);
        goto done;
    }
    err = (ft_err){0};
    int rc = cmd->run_fn(opts, n_args, args, &err);
    cli_progress_end();
    if (rc && usage_wanted)
        status = usage_error(cmd, prog, "%s", err.msg);
    else if (rc && err.msg[0])
        fprintf(stderr, "%s: %s\n", prog, err.msg);
    if (!usage_wanted) status = cli_exit_code(rc);
done:;
    /* what went to stdout must have arrived: a full disk or a closed pipe is an error */
    ft_err out_err = {0};
    if (cli_stdout_close(&out_err)) {
        fprintf(stderr, "%s: %s\n", prog, ft_err_msg(&out_err));
        if (status == FT_EXIT_OK) status = cli_exit_code(out_err.rc);
    }
    ft_free(args);
    ft_free(opts);
    return status;
}

/* ---- progress ------------------------------------------------------------------------------ */
static int progress_state = -1; /* -1 unknown, 0 off, 1 on */
static int progress_shown;
static double progress_last;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cli_progress_wanted(void)
{
    if (progress_state < 0) {
        progress_state = isatty(STDERR_FILENO) ? 1 : 0;
        progress_last = now_s(); /* nothing in the first second */
    }
    return progress_state;
}

void cli_progress(const char *fmt, ...)
{
    if (!cli_progress_wanted()) return;
    double t = now_s();
    if (t - progress_last < 0.25 + 0.75 * !progress_shown) return;
    progress_last = t;
    char line[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\r%s: %s\033[K", prog_name, line);
    progress_shown = 1;
}

void cli_progress_end(void)
{
    if (progress_shown) fputs("\r\033[K", stderr);
    progress_shown = 0;
}
