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

static void usage(FILE *f)
{
    fprintf(f, "usage: fusertrace verify TRACE\n"
               "  checks the schema, the small-table digests, every chunk's checksum and\n"
               "  decoding, seq order and every reference; exit 0 sound, 1 damaged,\n"
               "  2 not a trace / newer format / usage\n");
}

static int exit_for(int rc)
{
    return cli_exit_code(rc); /* the same mapping as every reader */
}

int cmd_verify(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return FT_EXIT_OK;
    }
    if (argc != 2 || argv[1][0] == '-') {
        usage(stderr);
        return FT_EXIT_INPUT;
    }
    ft_trace *t = NULL;
    ft_err err = {0};
    int rc = ft_trace_open(argv[1], FT_OPEN_READ, &t, &err);
    if (rc) {
        fprintf(stderr, "fusertrace verify: %s\n", ft_err_msg(&err));
        return exit_for(rc);
    }
    if (ft_trace_notice(t)) fprintf(stderr, "fusertrace verify: %s\n", ft_trace_notice(t));
    rc = ft_trace_verify(t, &err);
    if (!rc) rc = ft_trace_check_json(t, &err); /* what verifies exports and imports again */
    if (rc) {
        fprintf(stderr, "fusertrace verify: %s\n", ft_err_msg(&err));
    } else {
        printf("%s: ok (%llu calls, %llu backward events, %llu chunks, %u fusers, %u recipes)\n",
               argv[1], (unsigned long long)ft_trace_n_calls(t),
               (unsigned long long)ft_trace_n_backwards(t),
               (unsigned long long)ft_trace_n_chunks(t), ft_trace_n_fusers(t),
               ft_trace_n_recipes(t));
    }
    ft_trace_close(t);
    return exit_for(rc);
}
