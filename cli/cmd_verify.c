/*
 * cmd_verify.c - `fusertrace verify TRACE`: open the trace (identity, version, small-table
 * digests) and run the full check (SQLite structure, schema, every chunk decoded with its
 * checksums, every reference). Exit 0 when sound, 1 naming the first problem (damage: a cut or
 * damaged file, a damaged -wal beside a trace not closed, a table beyond the format's limits),
 * 2 when the file is missing, not a trace (or of a newer format) or the usage is wrong, 3 on an
 * environment failure (I/O, memory). How the trace was read (not closed, a side file ignored)
 * goes to stderr.
 */
#include "cli.h"
#include "ft_recorder.h"
#include "ft_trace.h"

#include <stdio.h>
#include <string.h>

/* One trace: FT_OK, or the status with its message printed. */
static int verify_one(const char *path)
{
    ft_trace *t = NULL;
    ft_err err = {0};
    int rc = cli_in_check(path, CLI_IN_TRACE, &err);
    if (!rc && !(rc = ft_trace_open(path, FT_OPEN_READ, &t, &err))) {
        if (ft_trace_notice(t)) fprintf(stderr, "%s: %s\n", cli_prog(), ft_trace_notice(t));
        rc = ft_trace_verify(t, &err);
        if (!rc) rc = ft_trace_check_json(t, &err); /* what verifies exports and imports again */
    }
    if (rc) {
        fprintf(stderr, "%s: %s\n", cli_prog(), ft_err_msg(&err));
    } else {
        printf("%s: ok (%llu calls, %llu backward events, ", path,
               (unsigned long long)ft_trace_n_calls(t),
               (unsigned long long)ft_trace_n_backwards(t));
        if (ft_trace_n_fuser_ends(t))
            printf("%llu fuser ends, ", (unsigned long long)ft_trace_n_fuser_ends(t));
        printf("%llu chunks, %u fusers, %u recipes)\n", (unsigned long long)ft_trace_n_chunks(t),
               ft_trace_n_fusers(t), ft_trace_n_recipes(t));
    }
    ft_trace_close(t);
    return rc;
}

/* Every trace in turn; the status of the worst failure (its message printed). */
static int run(void *opts_v, int n_args, char **args, ft_err *err)
{
    (void)opts_v, (void)err;
    int worst = FT_OK;
    for (int i = 0; i < n_args; i++) {
        int rc = verify_one(args[i]);
        if (cli_exit_code(rc) > cli_exit_code(worst)) worst = rc;
    }
    return worst;
}

const cli_cmd cmd_verify = {
    .name = "verify",
    .synopsis = "TRACE...",
    .summary = "check schema, checksums, chunks, references",
    .about = "Checks each trace: the schema, the small-table digests, every chunk's checksum and\n"
             "decoding, seq order and every reference. Exit 0 when all are sound, 1 when one is\n"
             "damaged, 2 when one is not a trace (or of a newer format) or the usage is wrong.",
    .min_args = 1,
    .max_args = CLI_ANY,
    .run_fn = run,
};
