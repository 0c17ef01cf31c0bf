/*
 * main.c - the `fusertrace` command: a table of subcommands, each a thin layer over the
 * libraries (cli/cmd_*.c).
 */
#include "cli.h"
#include "ft_common.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*run_fn)(int argc, char **argv);
    const char *usage;
} commands[] = {
    {"demo", cmd_demo,
     "demo                       synthesize the demo trace and replay it under every policy"},
    {"import", cmd_import, "import IN.jsonl -o OUT.ftdb  capture stream (JSONL) -> trace"},
    {"export", cmd_export, "export IN.ftdb [-o OUT.jsonl] trace -> capture stream"},
    {"info", cmd_info, "info TRACE [--json]          what a trace holds"},
    {"verify", cmd_verify,
     "verify TRACE                 check schema, checksums, chunks, references"},
    {"synth", cmd_synth, "synth SCENARIO [...] -o OUT  synthetic training-run trace (--list)"},
    {"replay", cmd_replay, "replay TRACE... [...]        replay under plan-cache policies"},
    {"diff", cmd_diff, "diff A B [--json]            two traces or saved reports side by side"},
    {"sql", cmd_sql, "sql TRACE [QUERY] [...]      SQL over a trace's calls (--extension)"},
    {"kernels", cmd_kernels, "kernels quantize [...]       grouped-MLP kernels and quantizers"},
};

int cli_exit_code(int rc)
{
    switch (rc) {
    case FT_OK:
        return FT_EXIT_OK;
    case FT_EINVAL:
    case FT_ERANGE:
    case FT_ENOTFOUND:
    case FT_ENOTTRACE:
    case FT_EVERSION:
        return FT_EXIT_INPUT;
    case FT_ECORRUPT:
        return FT_EXIT_CHECK;
    default:
        return FT_EXIT_INTERNAL;
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: fusertrace COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < FT_ARRAY_LEN(commands); i++)
        fprintf(f, "  %s\n", commands[i].usage);
    fprintf(f, "\n`fusertrace COMMAND --help` describes each command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return FT_EXIT_INPUT;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return FT_EXIT_OK;
    }
    for (size_t i = 0; i < FT_ARRAY_LEN(commands); i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run_fn(argc - 1, argv + 1);
    fprintf(stderr, "fusertrace: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return FT_EXIT_INPUT;
}
