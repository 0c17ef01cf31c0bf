/*
 * cmd_seal.c - `fusertrace seal TRACE [--force]`: finish a trace whose recording was not closed
 * (the process was killed, the machine stopped): fold a leftover -wal into the main file, mark
 * it state 'recovered' and leave one self-contained file, as a close would have. A trace already
 * closed is left as it is. A damaged -wal is refused (exit 1) unless --force, which keeps the
 * commits before the damage. Exit 2: missing, not a trace, usage; 3: another process has the
 * trace open, or an I/O failure.
 */
#include "cli.h"
#include "ft_trace.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: fusertrace seal TRACE [--force]\n"
               "  finish a trace whose recording was not closed: fold the -wal beside it in,\n"
               "  mark it recovered, leave one self-contained file; --force keeps what comes\n"
               "  before a damaged -wal frame and drops the rest\n");
}

int cmd_seal(int argc, char **argv)
{
    const char *path = NULL;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f")) {
            force = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return FT_EXIT_OK;
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "fusertrace seal: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return FT_EXIT_INPUT;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        usage(stderr);
        return FT_EXIT_INPUT;
    }
    ft_seal_info si;
    ft_err err = {0};
    int rc = ft_trace_seal(path, force, &si, &err);
    if (rc) {
        fprintf(stderr, "fusertrace seal: %s\n", ft_err_msg(&err));
        return rc == FT_ESTATE ? FT_EXIT_INTERNAL : cli_exit_code(rc);
    }
    if (si.was_closed)
        printf("%s: already closed (%" PRIu64 " calls, %" PRIu64 " backward events, %" PRIu64
               " chunks)\n",
               path, si.n_calls, si.n_backwards, si.n_chunks);
    else
        printf("%s: sealed: %" PRIu64 " calls, %" PRIu64 " backward events in %" PRIu64
               " chunks (%" PRIu64 " commits folded in from the -wal%s); state 'recovered'\n",
               path, si.n_calls, si.n_backwards, si.n_chunks, si.wal_commits,
               si.wal_damaged ? ", the damaged rest dropped" : "");
    return FT_EXIT_OK;
}
