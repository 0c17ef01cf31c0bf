/*
 * cmd_seal.c - `fusertrace seal TRACE [--force]`: finish a trace whose recording was not closed
 * (the process was killed, the machine stopped): fold a leftover -wal into the main file, mark
 * it state 'recovered' and leave one self-contained file, as a close would have. A trace already
 * closed (read from its main file alone) is left byte for byte as it is, whatever lies beside
 * it: a -wal or -journal there is neither applied nor removed, and the message says so. A
 * damaged -wal is refused (exit 1) unless --force, which keeps the commits before the damage.
 * Exit 2: missing, not a trace, a side file that does not belong to a trace whose close was
 * cut short, usage; 3: another process has the trace open, or an I/O failure.
 */
#include "cli.h"
#include "ft_trace.h"

#include <inttypes.h>
#include <stdio.h>

typedef struct seal_opts {
    int force;
} seal_opts;

static const cli_opt options[] = {
    {"force", 'f', NULL, "keep what comes before a damaged -wal frame and drop the rest",
     cli_parse_flag, offsetof(seal_opts, force)},
};

static int run(void *opts_v, int n_args, char **args, ft_err *err)
{
    (void)n_args;
    const seal_opts *o = opts_v;
    const char *path = args[0];
    int rc = cli_in_check(path, CLI_IN_TRACE, err);
    if (rc) return rc;
    ft_seal_info si;
    if ((rc = ft_trace_seal(path, o->force, &si, err))) return rc; /* FT_ESTATE (open): exit 3 */
    if (si.was_closed) {
        printf("%s: already closed (%" PRIu64 " calls, %" PRIu64 " backward events, %" PRIu64
               " chunks)\n",
               path, si.n_calls, si.n_backwards, si.n_chunks);
        if (si.ignored_wal || si.ignored_journal)
            fprintf(stderr,
                    "%s: %s: left as it is, and the %s%s beside it neither applied nor removed: "
                    "a closed trace needs no side file, and plain SQLite (sqlite3 %s) would apply "
                    "it; remove it, or open the trace as file:%s?immutable=1\n",
                    cli_prog(), path, path, si.ignored_journal ? "-journal" : "-wal", path, path);
    } else
        printf("%s: sealed: %" PRIu64 " calls, %" PRIu64 " backward events in %" PRIu64
               " chunks (%" PRIu64 " commits folded in from the -wal%s); state 'recovered'\n",
               path, si.n_calls, si.n_backwards, si.n_chunks, si.wal_commits,
               si.wal_damaged ? ", the damaged rest dropped" : "");
    return FT_OK;
}

const cli_cmd cmd_seal = {
    .name = "seal",
    .synopsis = "TRACE [-f]",
    .summary = "finish a trace whose recording was not closed",
    .about = "Folds the -wal left beside a trace whose recording was not closed (killed, or the\n"
             "machine stopped) into the main file, marks it recovered and leaves one\n"
             "self-contained file, as a close would have. A trace already closed is left byte for\n"
             "byte as it is: a -wal or -journal beside it is neither applied nor removed. A\n"
             "damaged -wal is refused (exit 1) unless -f.",
    CLI_OPTS(seal_opts, options),
    .min_args = 1,
    .max_args = 1,
    .run_fn = run,
};
