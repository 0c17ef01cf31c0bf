/*
 * main.c - the `fusertrace` command: the table of subcommands (each defined in cli/cmd_NAME.c as
 * `const cli_cmd cmd_NAME`), `help [CMD]` and `--version`. Adding a subcommand is its file plus
 * one row of COMMANDS.
 */
#include "cli.h"
#include "par.h"
#include "ft_trace.h"

#include <stdio.h>
#include <string.h>

#ifndef FT_VERSION
#define FT_VERSION "unknown"
#endif

/* The subcommands, in the order `fusertrace help` lists them. */
#define COMMANDS(X)                                                                                \
    X(demo)                                                                                        \
    X(import) X(export) X(info) X(verify) X(seal) X(synth) X(replay) X(diff) X(sql) X(kernels)

#define DECLARE(name) extern const cli_cmd cmd_##name;
COMMANDS(DECLARE)
#define ROW(name) &cmd_##name,
static const cli_cmd *const commands[] = {COMMANDS(ROW)};

static void usage(FILE *f)
{
    fprintf(f, "usage: fusertrace COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < FT_ARRAY_LEN(commands); i++)
        fprintf(f, "  %-9s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f, "\n`fusertrace help COMMAND` (or `fusertrace COMMAND --help`) describes a command;\n"
               "`fusertrace --version` prints the version.\n"
               "Exit status: 0 success, 1 a check failed (damage found), 2 bad input or usage,\n"
               "3 the environment failed (I/O, memory, no device), 4 a replay --fail-on\n"
               "condition held.\n");
}

static const cli_cmd *find(const char *name)
{
    for (size_t i = 0; i < FT_ARRAY_LEN(commands); i++)
        if (!strcmp(name, commands[i]->name)) return commands[i];
    return NULL;
}

/* Only for the top-level texts; commands check stdout through cli_run. */
static int finish(int status)
{
    ft_err err = {0};
    if (cli_stdout_close(&err)) {
        fprintf(stderr, "fusertrace: %s\n", ft_err_msg(&err));
        if (!status) status = cli_exit_code(err.rc);
    }
    return status;
}

#ifdef main /* the fuzz target renames main to call it (tests/fuzz/CMakeLists.txt) */
int main(int argc, char **argv);
#endif

int main(int argc, char **argv)
{
    cli_term_stdout();
    if (argc < 2) {
        usage(stderr);
        return FT_EXIT_INPUT;
    }
    const char *a = argv[1];
    if (!strcmp(a, "--help") || !strcmp(a, "-h") || (!strcmp(a, "help") && argc == 2)) {
        usage(stdout);
        return finish(FT_EXIT_OK);
    }
    if (!strcmp(a, "--version") || !strcmp(a, "version")) {
        printf("fusertrace %s (trace format %d, capture-jsonl 1)\n", FT_VERSION, FT_FORMAT_VERSION);
        return finish(FT_EXIT_OK);
    }
    if (!strcmp(a, "help")) { /* help CMD [SUB] */
        const cli_cmd *c = find(argv[2]);
        if (!c) {
            fprintf(stderr, "fusertrace help: unknown command '%s'\n", argv[2]);
            usage(stderr);
            return FT_EXIT_INPUT;
        }
        char prog[128];
        snprintf(prog, sizeof prog, "fusertrace %s", c->name);
        if (argc > 3) {
            for (size_t i = 0; i < c->n_subs; i++)
                if (!strcmp(argv[3], c->subs[i]->name)) {
                    snprintf(prog, sizeof prog, "fusertrace %s %s", c->name, c->subs[i]->name);
                    cli_help(stdout, c->subs[i], prog);
                    return finish(FT_EXIT_OK);
                }
            fprintf(stderr, "fusertrace help: %s has no subcommand '%s'\n", c->name, argv[3]);
            return FT_EXIT_INPUT;
        }
        cli_help(stdout, c, prog);
        return finish(FT_EXIT_OK);
    }
    const cli_cmd *c = find(a);
    if (!c) {
        fprintf(stderr, "fusertrace: unknown command '%s'\n", a);
        usage(stderr);
        return FT_EXIT_INPUT;
    }
    char prog[128];
    snprintf(prog, sizeof prog, "fusertrace %s", c->name);
    /* replay spreads its traces over the processes of an MPI job (cli/par.c) */
    if (!strcmp(c->name, "replay") && cli_par_start(&argc, &argv)) return FT_EXIT_INTERNAL;
    return cli_par_end(cli_run(c, prog, argc - 1, argv + 1));
}
