/*
 * cli.h - the `fusertrace` subcommands. Each is `int cmd_NAME(int argc, char **argv)` with
 * argv[0] the subcommand name; it returns the process exit status:
 *   0 success, 1 a check failed (verify found damage, a comparison differed), 2 bad input or
 *   usage (malformed file, unknown flag), 3 an internal or environment failure (I/O, no device).
 * Only cli/ decides exit codes; libraries return FT_* status codes.
 */
#ifndef FT_CLI_H
#define FT_CLI_H

enum { FT_EXIT_OK = 0, FT_EXIT_CHECK = 1, FT_EXIT_INPUT = 2, FT_EXIT_INTERNAL = 3 };

int cmd_import(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_kernels(int argc, char **argv);
int cmd_demo(int argc, char **argv);

/* Map an FT_* status to an exit code (input errors -> 2, damage -> 1, others -> 3). */
int cli_exit_code(int rc);

#endif
