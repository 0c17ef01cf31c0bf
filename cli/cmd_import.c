/*
 * cmd_import.c - `fusertrace import IN.jsonl -o OUT.ftdb`: a capture-jsonl v1 stream (`-` for
 * stdin) into a new trace.
 *
 * The trace is recorded under a temporary name in the output's directory and renamed over OUT
 * only when complete, so OUT is never half-written: on any error the temporary file (and its
 * SQLite side files) is removed, the message (naming the line and field) printed, and the exit
 * status is 2 for bad input (3 for an I/O or SQLite failure, per cli.h). SIGINT, SIGTERM and
 * SIGHUP remove the temporary too (cli_out, out_file.c); only SIGKILL (or a crash) can leave
 * `OUT.tmp-XXXXXX` behind, and never a partial OUT.
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
    fprintf(f, "usage: fusertrace import IN.jsonl|IN.jsonl.zst|- -o OUT.ftdb [--chunk-calls N]\n"
               "  Read a capture stream (capture-jsonl v1, plain or zstd-compressed; - for stdin)\n"
               "  into a new trace.\n"
               "  OUT is replaced only when the whole stream imported; on any error nothing is\n"
               "  left behind. --chunk-calls N: records per chunk (default 65536).\n");
}

int cmd_import(int argc, char **argv)
{
    const char *in_path = NULL, *out_path = NULL;
    ft_rec_opts opts = {0, 0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return FT_EXIT_OK;
        } else if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (++i == argc) goto bad_usage;
            out_path = argv[i];
        } else if (!strcmp(argv[i], "--chunk-calls")) {
            int64_t v;
            if (++i == argc || ft_parse_i64(argv[i], &v) || v < 1 || v > UINT32_MAX) {
                fprintf(stderr, "fusertrace import: --chunk-calls needs a count >= 1\n");
                return FT_EXIT_INPUT;
            }
            opts.chunk_calls = (uint32_t)v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "fusertrace import: unknown option '%s'\n", argv[i]);
            goto bad_usage;
        } else if (!in_path) {
            in_path = argv[i];
        } else {
            fprintf(stderr, "fusertrace import: more than one input ('%s')\n", argv[i]);
            goto bad_usage;
        }
    }
    if (!in_path || !out_path) goto bad_usage;
    if (!strcmp(out_path, "-")) {
        fprintf(stderr, "fusertrace import: the output must be a file (a trace is a database)\n");
        return FT_EXIT_INPUT;
    }
    char side[4096];
    snprintf(side, sizeof side, "%s-wal", out_path);
    if (!access(side, F_OK)) {
        fprintf(stderr,
                "fusertrace import: %s exists: %s is open or was not closed cleanly; not "
                "replacing it\n",
                side, out_path);
        return FT_EXIT_INPUT;
    }

    FILE *in = stdin;
    const char *name = "<stdin>";
    if (strcmp(in_path, "-")) {
        in = fopen(in_path, "rb");
        if (!in) {
            fprintf(stderr, "fusertrace import: cannot open %s: %s\n", in_path, strerror(errno));
            return FT_EXIT_INPUT;
        }
        name = in_path;
    }

    /* a fresh temporary name beside OUT, renamed over it only when the import is complete */
    ft_err err = {0, ""};
    cli_out out;
    int rc = cli_out_open(&out, out_path, CLI_OUT_DB, &err);
    if (rc) {
        fprintf(stderr, "fusertrace import: %s\n", ft_err_msg(&err));
        if (in != stdin) fclose(in);
        return cli_exit_code(rc);
    }
    ft_rec *rec = NULL;
    rc = ft_rec_open(out.tmp, &opts, &rec, &err);
    if (rc) {
        fprintf(stderr, "fusertrace import: %s\n", ft_err_msg(&err));
        cli_out_close(&out, rc, &err);
        if (in != stdin) fclose(in);
        return cli_exit_code(rc) == FT_EXIT_OK ? FT_EXIT_INTERNAL : cli_exit_code(rc);
    }
    ft_sink sink;
    ft_rec_sink_prevalidated(rec, &sink); /* the importer checks every record */
    rc = ft_jsonl_import(in, name, &sink, stderr, &err);
    if (in != stdin) fclose(in);
    if (rc) {
        ft_rec_abort(rec);
    } else {
        /* flush first: on failure the handle still holds the detail */
        rc = ft_rec_flush(rec);
        if (rc) {
            ft_err_set(&err, rc, "%s: %s", out_path, ft_err_msg(ft_rec_error(rec)));
            ft_rec_abort(rec);
        } else if ((rc = ft_rec_close(rec))) {
            ft_err_set(&err, rc, "%s: closing the trace failed: %s", out_path, ft_strerror(rc));
        }
    }
    rc = cli_out_close(&out, rc, &err);
    if (rc) {
        fprintf(stderr, "fusertrace import: %s\n", ft_err_msg(&err));
        return cli_exit_code(rc);
    }
    return FT_EXIT_OK;

bad_usage:
    usage(stderr);
    return FT_EXIT_INPUT;
}
