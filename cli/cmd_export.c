/*
 * cmd_export.c - `fusertrace export IN.ftdb [-o OUT.jsonl]`: a trace back to its capture stream
 * (capture-jsonl v1), record for record.
 *
 * To stdout by default (or `-o -`); to a file through a temporary name in its directory, renamed
 * over OUT only when complete (cli_out, out_file.c). An OUT whose name ends in `.zst` is written
 * zstd-compressed (level FT_JSONL_ZSTD_LEVEL, streamed); `import` reads it back as it is. A damaged
 * trace (checksum, decode or reference failure) exits 1 with the message naming the chunk or table;
 * not a trace / wrong version exits 2.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "ft_recorder.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: fusertrace export IN.ftdb [-o OUT.jsonl|OUT.jsonl.zst|-]\n"
               "  Write the trace as a capture stream (capture-jsonl v1), to stdout by default;\n"
               "  zstd-compressed when OUT ends in .zst.\n");
}

/* Print the error, naming the trace unless the message already starts with its name. */
static void report(const char *in_path, const ft_err *err)
{
    const char *msg = ft_err_msg(err);
    if (!strncmp(msg, in_path, strlen(in_path)))
        fprintf(stderr, "fusertrace export: %s\n", msg);
    else
        fprintf(stderr, "fusertrace export: %s: %s\n", in_path, msg);
}

int cmd_export(int argc, char **argv)
{
    const char *in_path = NULL, *out_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return FT_EXIT_OK;
        } else if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (++i == argc) goto bad_usage;
            out_path = argv[i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "fusertrace export: unknown option '%s'\n", argv[i]);
            goto bad_usage;
        } else if (!in_path) {
            in_path = argv[i];
        } else {
            fprintf(stderr, "fusertrace export: more than one input ('%s')\n", argv[i]);
            goto bad_usage;
        }
    }
    if (!in_path) goto bad_usage;
    if (access(in_path, R_OK)) {
        fprintf(stderr, "fusertrace export: cannot open %s: %s\n", in_path, strerror(errno));
        return FT_EXIT_INPUT;
    }

    ft_err err = {0, ""};
    ft_trace *t = NULL;
    int rc = ft_trace_open(in_path, FT_OPEN_READ, &t, &err);
    if (rc) {
        report(in_path, &err);
        return cli_exit_code(rc);
    }

    cli_out out;
    rc = cli_out_open(&out, out_path, CLI_OUT_STREAM, &err);
    if (rc) {
        fprintf(stderr, "fusertrace export: %s\n", ft_err_msg(&err));
        ft_trace_close(t);
        return cli_exit_code(rc); /* most likely a bad -o */
    }

    ft_jsonl_writer *w = NULL;
    size_t n = out_path ? strlen(out_path) : 0;
    int zst = n > 4 && !strcmp(out_path + n - 4, ".zst");
    rc = zst ? ft_jsonl_writer_new_zstd(out.f, 0, &w) : ft_jsonl_writer_new(out.f, &w);
    if (rc) {
        ft_err_set(&err, rc, "out of memory");
    } else {
        ft_sink sink;
        ft_jsonl_writer_sink(w, &sink);
        rc = ft_trace_export(t, &sink, &err);
        if (!rc && (rc = ft_jsonl_writer_finish(w)))
            ft_err_set(&err, rc, "%s: %s", out_path, ft_err_msg(ft_jsonl_writer_error(w)));
        ft_jsonl_writer_free(w);
    }
    ft_trace_close(t);

    rc = cli_out_close(&out, rc, &err);
    if (rc) {
        report(in_path, &err);
        return cli_exit_code(rc);
    }
    return FT_EXIT_OK;

bad_usage:
    usage(stderr);
    return FT_EXIT_INPUT;
}
