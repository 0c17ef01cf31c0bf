/*
 * cmd_export.c - `fusertrace export IN.ftdb [-o OUT.jsonl]`: a trace back to its capture stream
 * (capture-jsonl v1), record for record.
 *
 * To stdout by default (or `-o -`); to a file through a temporary name in its directory, renamed
 * over OUT only when complete. A damaged trace (checksum, decode or reference failure) exits 1
 * with the message naming the chunk or table; not a trace / wrong version exits 2.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "ft_recorder.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: fusertrace export IN.ftdb [-o OUT.jsonl|-]\n"
               "  Write the trace as a capture stream (capture-jsonl v1), to stdout by default.\n");
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
    if (out_path && !strcmp(out_path, "-")) out_path = NULL;
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

    FILE *out = stdout;
    char tmp[4096] = "";
    if (out_path) {
        if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", out_path) >= sizeof tmp) {
            fprintf(stderr, "fusertrace export: output path too long\n");
            ft_trace_close(t);
            return FT_EXIT_INPUT;
        }
        int fd = mkstemp(tmp);
        if (fd >= 0) { /* mkstemp makes it 0600; give it the mode a plain create would */
            mode_t mask = umask(0);
            umask(mask);
            fchmod(fd, 0666 & ~mask);
        }
        out = fd < 0 ? NULL : fdopen(fd, "w");
        if (!out) {
            fprintf(stderr, "fusertrace export: cannot create a file beside %s: %s\n", out_path,
                    strerror(errno));
            if (fd >= 0) {
                close(fd);
                unlink(tmp);
            }
            ft_trace_close(t);
            return FT_EXIT_INPUT; /* most likely a bad -o */
        }
    }

    ft_jsonl_writer *w = NULL;
    rc = ft_jsonl_writer_new(out, &w);
    if (rc) {
        ft_err_set(&err, rc, "out of memory");
    } else {
        ft_sink sink;
        ft_jsonl_writer_sink(w, &sink);
        rc = ft_trace_export(t, &sink, &err);
        ft_jsonl_writer_free(w);
    }
    ft_trace_close(t);

    /* what stdio still holds must reach the file too */
    if (!rc && (fflush(out) || ferror(out)))
        rc = ft_err_set(&err, FT_EIO, "writing %s failed: %s", out_path ? out_path : "stdout",
                        strerror(errno));
    if (out_path) {
        if (fclose(out) && !rc)
            rc = ft_err_set(&err, FT_EIO, "writing %s failed: %s", out_path, strerror(errno));
        if (!rc && rename(tmp, out_path))
            rc = ft_err_set(&err, FT_EIO, "cannot rename %s to %s: %s", tmp, out_path,
                            strerror(errno));
        if (rc) unlink(tmp);
    }
    if (rc) {
        report(in_path, &err);
        return cli_exit_code(rc);
    }
    return FT_EXIT_OK;

bad_usage:
    usage(stderr);
    return FT_EXIT_INPUT;
}
