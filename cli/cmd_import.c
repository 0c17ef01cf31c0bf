/*
 * cmd_import.c - `fusertrace import IN.jsonl -o OUT.ftdb`: a capture-jsonl v1 stream (`-` for
 * stdin) into a new trace.
 *
 * The trace is recorded under a temporary name beside OUT and renamed over it only when complete
 * (cli_out, out_file.c), so OUT is never half-written: on any error the temporary (and its SQLite
 * side files) is removed and the message names the line and field. Replacing an existing OUT
 * needs -f. On a terminal, progress (bytes read) goes to stderr; a one-line summary follows
 * every successful import.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "ft_recorder.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef struct import_opts {
    const char *out;
    int force;
    uint32_t chunk_calls;
} import_opts;

static const cli_opt options[] = {
    {"output", 'o', "OUT.ftdb", "the trace to write (required)", cli_parse_str,
     offsetof(import_opts, out)},
    {"force", 'f', NULL, "replace OUT if it exists", cli_parse_flag, offsetof(import_opts, force)},
    {"chunk-calls", 0, "N", "records per chunk (default 65536)", cli_parse_count,
     offsetof(import_opts, chunk_calls)},
};

/* A sink in front of the recorder that counts what passes and shows progress. */
typedef struct counting {
    ft_sink inner;
    FILE *in;
    const char *name;
    double in_bytes; /* the input's size, 0 when unknown (stdin) */
    uint64_t calls, backwards, fusers, recipes;
} counting;

static void progress(counting *c)
{
    if (!cli_progress_wanted()) return;
    off_t at = ftello(c->in);
    if (c->in_bytes > 0 && at >= 0)
        cli_progress("%s: %.0f%% (%llu calls)", c->name, 100.0 * (double)at / c->in_bytes,
                     (unsigned long long)c->calls);
    else
        cli_progress("%s: %llu calls", c->name, (unsigned long long)c->calls);
}

static int c_header(void *ctx, const ft_header *h)
{
    counting *c = ctx;
    return c->inner.header_fn(c->inner.ctx, h);
}
static int c_fuser(void *ctx, const ft_fuser_def *f)
{
    counting *c = ctx;
    c->fusers++;
    return c->inner.fuser_fn(c->inner.ctx, f);
}
static int c_recipe(void *ctx, const ft_recipe_def *rd)
{
    counting *c = ctx;
    c->recipes++;
    return c->inner.recipe_fn(c->inner.ctx, rd);
}
static int c_call(void *ctx, const ft_call *call)
{
    counting *c = ctx;
    if ((++c->calls & 0xffff) == 0) progress(c);
    return c->inner.call_fn(c->inner.ctx, call);
}
static int c_backward(void *ctx, const ft_backward *b)
{
    counting *c = ctx;
    c->backwards++;
    return c->inner.backward_fn(c->inner.ctx, b);
}
static int c_end(void *ctx, const ft_fuser_end *e)
{
    counting *c = ctx;
    return c->inner.end_fn ? c->inner.end_fn(c->inner.ctx, e) : FT_OK;
}
static const ft_err *c_error(void *ctx)
{
    counting *c = ctx;
    return c->inner.error_fn ? c->inner.error_fn(c->inner.ctx) : NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int run(void *opts_v, int n_args, char **args, ft_err *err)
{
    import_opts *opts = opts_v;
    (void)n_args;
    const char *in_path = args[0];
    if (!opts->out) return cli_usage_error(err, "-o OUT.ftdb is required");
    int rc = cli_in_check(in_path, CLI_IN_STREAM, err);
    if (rc) return rc;
    FILE *in = stdin;
    const char *name = "<stdin>";
    if (strcmp(in_path, "-")) {
        if (!(in = fopen(in_path, "rb")))
            return ft_err_set(err, FT_EINVAL, "cannot open %s: %s", in_path, strerror(errno));
        name = in_path;
    }
    double t0 = now_s();
    cli_out out;
    rc = cli_out_open(&out, opts->out, CLI_OUT_DB, opts->force, err);
    if (rc) goto done;
    ft_rec_opts ro = {.chunk_calls = opts->chunk_calls};
    ft_rec *rec = NULL;
    if ((rc = ft_rec_open(out.tmp, &ro, &rec, err))) {
        cli_out_close(&out, rc, err);
        goto done;
    }
    counting c = {.in = in, .name = name};
    struct stat st;
    if (in != stdin && !fstat(fileno(in), &st) && S_ISREG(st.st_mode))
        c.in_bytes = (double)st.st_size;
    ft_rec_sink_prevalidated(rec, &c.inner); /* the importer checks every record */
    ft_sink sink = {&c, c_header, c_fuser, c_recipe, c_call, c_backward, c_error, c_end};
    rc = ft_jsonl_import(in, name, &sink, stderr, err);
    cli_progress_end();
    if (rc) {
        ft_rec_abort(rec);
    } else if ((rc = ft_rec_flush(rec))) { /* flush first: on failure the handle has the detail */
        ft_err_set(err, rc, "%s: %s", opts->out, ft_err_msg(ft_rec_error(rec)));
        ft_rec_abort(rec);
    } else if ((rc = ft_rec_close_err(rec, err))) {
        char detail[FT_ERR_MAX];
        ft_strlcpy(detail, ft_err_msg(err), sizeof detail);
        ft_err_set(err, rc, "%s: closing the trace failed: %s", opts->out, detail);
    }
    rc = cli_out_close(&out, rc, err);
    if (!rc)
        fprintf(stderr,
                "fusertrace import: %s: %llu calls, %llu backward events, %llu fusers, %llu "
                "recipe states in %.1f s\n",
                opts->out, (unsigned long long)c.calls, (unsigned long long)c.backwards,
                (unsigned long long)c.fusers, (unsigned long long)c.recipes, now_s() - t0);
done:
    if (in != stdin) fclose(in);
    return rc;
}

const cli_cmd cmd_import = {
    .name = "import",
    .synopsis = "IN.jsonl|IN.jsonl.zst|- -o OUT.ftdb [-f] [--chunk-calls N]",
    .summary = "capture stream (JSONL) -> trace",
    .about = "Reads a capture stream (capture-jsonl v1, docs/capture-format.md; plain or\n"
             "zstd-compressed; - for stdin) into\n"
             "a new trace. OUT is written only when the whole stream imported; on any error\n"
             "nothing is left behind and the message names the line and field.",
    CLI_OPTS(import_opts, options),
    .min_args = 1,
    .max_args = 1,
    .run_fn = run,
};
