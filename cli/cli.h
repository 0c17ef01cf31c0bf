/*
 * cli.h - the `fusertrace` subcommands. Each is `int cmd_NAME(int argc, char **argv)` with
 * argv[0] the subcommand name; it returns the process exit status:
 *   0 success, 1 a check failed (verify found damage, a comparison differed), 2 bad input or
 *   usage (malformed file, unknown flag), 3 an internal or environment failure (I/O, no device).
 * Only cli/ decides exit codes; libraries return FT_* status codes.
 */
#ifndef FT_CLI_H
#define FT_CLI_H

#include "ft_common.h"

#include <stdio.h>

enum { FT_EXIT_OK = 0, FT_EXIT_CHECK = 1, FT_EXIT_INPUT = 2, FT_EXIT_INTERNAL = 3 };

int cmd_import(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_sql(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_kernels(int argc, char **argv);
int cmd_demo(int argc, char **argv);

/* Map an FT_* status to an exit code (input errors -> 2, damage -> 1, others -> 3). */
int cli_exit_code(int rc);

/* ---- outputs written whole or not at all (out_file.c) ------------------------------------ */
enum {
    CLI_PATH_MAX = 4096,
    CLI_OUT_STREAM = 0, /* a file written through o->f; NULL or "-" means stdout */
    CLI_OUT_DB = 1,     /* a trace: only o->tmp is reserved, the caller creates it */
};
typedef struct cli_out {
    FILE *f;                /* where to write (CLI_OUT_STREAM): the temporary, or stdout */
    const char *path;       /* the final path; NULL for stdout */
    char tmp[CLI_PATH_MAX]; /* the temporary beside path: PATH.tmp-XXXXXX */
} cli_out;
/* Reserve a temporary beside path (and open it, for CLI_OUT_STREAM) and guard it against
 * SIGINT/SIGTERM/SIGHUP. FT_EINVAL (path too long, cannot create: most likely a bad -o). */
int cli_out_open(cli_out *o, const char *path, int kind, ft_err *err);
/* Finish an output: flush and close the stream, then, when rc (the writer's status) is FT_OK,
 * rename the temporary over path, else remove it and its SQLite side files. Returns rc, or the
 * flush/close/rename failure (FT_EIO) that made it fail. */
int cli_out_close(cli_out *o, int rc, ft_err *err);

#endif
