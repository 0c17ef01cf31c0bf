/*
 * cmd_export.c - `fusertrace export IN.ftdb [-o OUT.jsonl]`: a trace back to its capture stream
 * (capture-jsonl v1), record for record.
 *
 * To stdout by default (or `-o -`); to a file through a temporary beside it, renamed over OUT
 * only when complete (cli_out, out_file.c); replacing an existing OUT needs -f. A damaged trace
 * (checksum, decode or reference failure) exits 1 with the message naming the chunk or table;
 * not a trace / wrong version exits 2. On a terminal, progress goes to stderr. An OUT whose name
 * ends in `.zst` is written zstd-compressed (level FT_JSONL_ZSTD_LEVEL, streamed).
 */
#include "cli.h"
#include "ft_recorder.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

typedef struct export_opts {
    const char *out;
    int force;
} export_opts;

static const cli_opt options[] = {
    {"output", 'o', "OUT.jsonl", "where to write (default: stdout, also -)", cli_parse_str,
     offsetof(export_opts, out)},
    {"force", 'f', NULL, "replace OUT if it exists", cli_parse_flag, offsetof(export_opts, force)},
};

/* Name the trace unless the message already starts with its name. */
static int name_trace(const char *in_path, int rc, ft_err *err)
{
    if (rc && strncmp(err->msg, in_path, strlen(in_path))) {
        char msg[FT_ERR_MAX];
        ft_strlcpy(msg, err->msg, sizeof msg);
        ft_err_set(err, rc, "%s: %s", in_path, msg);
    }
    return rc;
}

/* A sink in front of the writer that shows progress. */
typedef struct progress_sink {
    ft_sink inner;
    const char *name;
    uint64_t done, total; /* calls */
} progress_sink;

static int p_header(void *ctx, const ft_header *h)
{
    progress_sink *p = ctx;
    return p->inner.header_fn(p->inner.ctx, h);
}
static int p_fuser(void *ctx, const ft_fuser_def *f)
{
    progress_sink *p = ctx;
    return p->inner.fuser_fn(p->inner.ctx, f);
}
static int p_recipe(void *ctx, const ft_recipe_def *rd)
{
    progress_sink *p = ctx;
    return p->inner.recipe_fn(p->inner.ctx, rd);
}
static int p_call(void *ctx, const ft_call *c)
{
    progress_sink *p = ctx;
    if ((++p->done & 0xffff) == 0 && p->total)
        cli_progress("%s: %.0f%% of %llu calls", p->name,
                     100.0 * (double)p->done / (double)p->total, (unsigned long long)p->total);
    return p->inner.call_fn(p->inner.ctx, c);
}
static int p_backward(void *ctx, const ft_backward *b)
{
    progress_sink *p = ctx;
    return p->inner.backward_fn(p->inner.ctx, b);
}
static int p_end(void *ctx, const ft_fuser_end *e)
{
    progress_sink *p = ctx;
    return p->inner.end_fn ? p->inner.end_fn(p->inner.ctx, e) : FT_OK;
}
static const ft_err *p_error(void *ctx)
{
    progress_sink *p = ctx;
    return p->inner.error_fn ? p->inner.error_fn(p->inner.ctx) : NULL;
}

static int run(void *opts_v, int n_args, char **args, ft_err *err)
{
    export_opts *opts = opts_v;
    (void)n_args;
    const char *in_path = args[0];
    int rc = cli_in_check(in_path, CLI_IN_TRACE, err);
    if (rc) return rc;
    ft_trace *t = NULL;
    if ((rc = ft_trace_open(in_path, FT_OPEN_READ, &t, err))) return name_trace(in_path, rc, err);
    if (ft_trace_notice(t)) fprintf(stderr, "%s: %s\n", cli_prog(), ft_trace_notice(t));

    cli_out out;
    if ((rc = cli_out_open(&out, opts->out, CLI_OUT_CAPTURE, opts->force, err))) {
        ft_trace_close(t);
        return rc;
    }
    ft_jsonl_writer *w = NULL;
    const size_t n = opts->out ? strlen(opts->out) : 0;
    const int zst = n > 4 && !strcmp(opts->out + n - 4, ".zst");
    rc = zst ? ft_jsonl_writer_new_zstd(out.f, 0, &w) : ft_jsonl_writer_new(out.f, &w);
    if (rc) {
        ft_err_set(err, rc, "out of memory");
    } else {
        progress_sink p = {.name = in_path, .total = ft_trace_n_calls(t)};
        ft_jsonl_writer_sink(w, &p.inner);
        ft_sink sink = {&p, p_header, p_fuser, p_recipe, p_call, p_backward, p_error, p_end};
        rc = ft_trace_export(t, &sink, err);
        if (!rc && (rc = ft_jsonl_writer_finish(w)))
            ft_err_set(err, rc, "%s: %s", out.name, ft_err_msg(ft_jsonl_writer_error(w)));
        else if (rc && ferror(out.f)) /* the output failed, not the trace */
            ft_err_set(err, FT_EIO, "writing %s failed: %s", out.name, strerror(errno));
        else
            name_trace(in_path, rc, err);
        ft_jsonl_writer_free(w);
    }
    ft_trace_close(t);
    return cli_out_close(&out, rc, err);
}

const cli_cmd cmd_export = {
    .name = "export",
    .synopsis = "IN.ftdb [-o OUT.jsonl|OUT.jsonl.zst|-] [-f]",
    .summary = "trace -> capture stream (JSONL)",
    .about = "Writes the trace as a capture stream (capture-jsonl v1, docs/capture-format.md),\n"
             "record for record, to stdout by default; zstd-compressed when OUT ends in .zst\n"
             "(import reads it back as it is).",
    CLI_OPTS(export_opts, options),
    .min_args = 1,
    .max_args = 1,
    .run_fn = run,
};
