/*
 * cli.h - the `fusertrace` command line: a table of subcommands (main.c), each one file
 * (cmd_NAME.c) that defines a cli_cmd: its synopsis, one table of options and a run function.
 * The parsing (args.c) and the outputs (out_file.c) are shared, so every command treats the
 * same mistake the same way.
 *
 * A run function returns an FT_* status with the detail in err; cli_run (args.c) prints the
 * detail as "fusertrace NAME: DETAIL" and maps the status to the exit code, in one place
 * (cli_exit_code):
 *   0 success;
 *   1 a check failed (verify found damage: FT_ECORRUPT);
 *   2 bad input or usage (a missing, unreadable or malformed input, a directory or `-` where a
 *     file is wanted, an unknown option, a bad value, an output that would overwrite an input);
 *   3 the environment failed (I/O on an output, memory, SQLite, no device);
 *   4 a condition of `replay --fail-on` held (FT_EGATE): the report was written, and the message
 *     names the condition, the policy and the first call it held on.
 * Only cli/ decides exit codes; libraries return FT_* status codes.
 */
#ifndef FT_CLI_H
#define FT_CLI_H

#include "ft_common.h"

#include <stddef.h>
#include <stdio.h>

enum {
    FT_EXIT_OK = 0,
    FT_EXIT_CHECK = 1,
    FT_EXIT_INPUT = 2,
    FT_EXIT_INTERNAL = 3,
    FT_EXIT_GATE = 4
};

/* Map an FT_* status to an exit code (the table above; args.c). */
int cli_exit_code(int rc);

/* ---- options (args.c) ---------------------------------------------------------------------- */
typedef struct cli_opt cli_opt;
/* Store val (NULL for an option without a value) into field. FT_OK, or FT_EINVAL/FT_ERANGE with
 * what was wanted in err ("wants an integer >= 1, got '0'"); the caller names the option. */
typedef int (*cli_parse_fn)(const cli_opt *o, const char *val, void *field, ft_err *err);
struct cli_opt {
    const char *name; /* long name without "--": --NAME VALUE or --NAME=VALUE */
    char short_name;  /* -X VALUE, or 0 */
    const char *arg;  /* the value's name in the help ("N", "FILE"); NULL: takes no value */
    const char *help; /* one or more lines ("\n" between them) */
    cli_parse_fn parse_fn;
    size_t offset; /* where in the command's option struct parse_fn writes */
};

/* The common parsers. */
int cli_parse_flag(const cli_opt *o, const char *val, void *field, ft_err *err);  /* int = 1 */
int cli_parse_str(const cli_opt *o, const char *val, void *field, ft_err *err);   /* const char * */
int cli_parse_count(const cli_opt *o, const char *val, void *field, ft_err *err); /* u32 >= 1 */
int cli_parse_u64(const cli_opt *o, const char *val, void *field, ft_err *err);   /* >= 0 */
/* --memory SIZE (u64 bytes): also sets the decoders' budget (ft_mem_budget_set); the default,
 * set before the options are read, is half the machine's memory. */
int cli_parse_memory(const cli_opt *o, const char *val, void *field, ft_err *err);
#define CLI_MEMORY_HELP                                                                            \
    "the trace decoders' memory budget, shared by every reader of the\n"                           \
    "command (SQL tables, replay threads); K, M, G, T suffixes; default half\n"                    \
    "the machine's memory, 0: no limit"

/* ---- the policy options of replay, sql and diff (policies.c) ------------------------------- */
enum { CLI_MAX_POLICY_FILES = 8 };
typedef struct cli_policy_opts {
    const char *list;                        /* --policy LIST, or NULL */
    const char *files[CLI_MAX_POLICY_FILES]; /* --policies FILE, in the order given */
    uint32_t n_files;
} cli_policy_opts;
/* Option parsers into a cli_policy_opts: --policy (once) and --policies (repeatable). */
int cli_parse_policy_list(const cli_opt *o, const char *val, void *field, ft_err *err);
int cli_parse_policy_file(const cli_opt *o, const char *val, void *field, ft_err *err);
/* Define the files' policies, then read the list: idx[FT_MAX_POLICIES] / *n the policies to
 * replay (the list's, or every built-in, then every user policy defined, ft_policy_parse_list).
 * defs_only (sql, diff, which replay every policy defined): the list only defines user policies
 * and idx is left empty. Mistakes are usage errors naming the option (exit 2). */
int cli_policies_resolve(const cli_policy_opts *p, int defs_only, uint32_t *idx, uint32_t *n,
                         ft_err *err);
/* Whether the list names a built-in policy or all (else the built-ins replay only beside its
 * user policies, for comparison). */
int cli_policies_names_builtin(const cli_policy_opts *p);
/* The built-ins with their specs and the spec vocabulary, for a command's help. */
void cli_policies_help(FILE *f);

/* ---- commands ------------------------------------------------------------------------------ */
enum { CLI_ANY = 0x7fffffff }; /* max_args: no limit */
typedef struct cli_cmd cli_cmd;
struct cli_cmd {
    const char *name;
    const char *synopsis; /* what follows "fusertrace NAME " in the usage line */
    const char *summary;  /* one line in `fusertrace help` */
    const char *about;    /* what `fusertrace help NAME` says above the options */
    const cli_opt *opts;  /* [n_opts]; -h/--help is added to every command */
    size_t n_opts;
    size_t opts_size; /* the option struct's size: zeroed, then init_fn, then the options */
    void (*init_fn)(void *opts); /* defaults, or NULL */
    int min_args, max_args;      /* how many positional arguments */
    /* the command; args are the positional arguments in order */
    int (*run_fn)(void *opts, int n_args, char **args, ft_err *err);
    void (*help_fn)(FILE *f);   /* more help below the options (e.g. the policies), or NULL */
    const cli_cmd *const *subs; /* a command of subcommands (`kernels quantize`), or NULL */
    size_t n_subs;
};
#define CLI_OPTS(type, table)                                                                      \
    .opts = table, .n_opts = FT_ARRAY_LEN(table), .opts_size = sizeof(type)

/* Parse argv[1..argc) for cmd and run it (or print its help); returns the exit status. prog is
 * "fusertrace NAME" for messages. Called by main.c. */
int cli_run(const cli_cmd *cmd, const char *prog, int argc, char **argv);
/* The command's full help (usage, about, options, help_fn). */
void cli_help(FILE *f, const cli_cmd *cmd, const char *prog);

/* For run functions: a usage mistake found after parsing (options that exclude each other, a
 * required option missing). Sets err (FT_EINVAL, exit 2) and has the usage line printed after
 * the message. */
int cli_usage_error(ft_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The name messages start with: "fusertrace NAME" of the running command. */
const char *cli_prog(void);

/* Progress on stderr, only when stderr is a terminal: "\rPROG: TEXT" at most a few times a
 * second; cli_progress_end clears the line. */
int cli_progress_wanted(void);
void cli_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_progress_end(void);

/* ---- inputs and outputs (out_file.c) ------------------------------------------------------- */
enum {
    CLI_PATH_MAX = 4096,
    CLI_IN_TRACE = 0,  /* a trace: a regular file; `-` refused */
    CLI_IN_STREAM = 1, /* a capture stream or other readable file; `-` is stdin */
};
/* Check an input before anything is opened for writing: it exists and is readable, is not a
 * directory (a trace must be a regular file; `-` only for CLI_IN_STREAM), and is remembered so
 * that no output can replace it. FT_EINVAL (exit 2) naming the file, or FT_ENOMEM. */
int cli_in_check(const char *path, int kind, ft_err *err);
/* Forget the inputs checked so far (a new command starts). */
void cli_in_reset(void);

enum {
    CLI_OUT_STREAM = 0,  /* a text file (report, per-call lines): may be replaced; `-` is stdout */
    CLI_OUT_CAPTURE = 1, /* a capture stream: replacing an existing file needs force; `-` ok */
    CLI_OUT_DB = 2,      /* a trace: a regular file only, replacing one needs force */
};
typedef struct cli_out {
    FILE *f;                 /* streams: where to write (the temporary, the device, stdout) */
    const char *name;        /* the output as given, for messages ("stdout" for -) */
    char path[CLI_PATH_MAX]; /* the file renamed over at the end (symlinks resolved), or "" */
    char tmp[CLI_PATH_MAX];  /* the temporary beside path: PATH.tmp-XXXXXX (DB: to create) */
    int slot;                /* signal guard slot, -1 when none */
    int kind;
    int had_target; /* path existed when opened: (dev, ino) below; else it must not
                     * exist at the rename (another writer's output is not replaced) */
    unsigned long long dev, ino;
} cli_out;
/* Open an output, after every input was checked (cli_in_check):
 * - `-` (or /dev/stdout) is stdout; a trace cannot go there;
 * - an output that is one of the inputs (the same file, after links) is refused;
 * - an existing regular file is replaced through a temporary beside it, renamed over it when
 *   complete; a symlink is followed and its target replaced (the link stays); replacing a trace
 *   or a capture needs force (-f);
 * - a FIFO or character device is written in place (it cannot hold a trace).
 * The temporary is removed on SIGINT/SIGTERM/SIGHUP. FT_EINVAL (exit 2) naming the output. */
int cli_out_open(cli_out *o, const char *path, int kind, int force, ft_err *err);
/* Finish an output: flush, sync and close it, then, when rc (the writer's status) is FT_OK,
 * rename the temporary over the target, else remove it (and its SQLite side files). Returns rc,
 * or the flush/close/rename failure (FT_EIO naming the output) that made it fail. Safe to call
 * on an output that was never opened or is already closed. */
int cli_out_close(cli_out *o, int rc, ft_err *err);

/* Check stdout once the command is done: flush it, FT_EIO if anything written to it failed (a
 * full disk); the error state is cleared. */
int cli_stdout_close(ft_err *err);

/* When stdout is a terminal, make it write control characters as visible escapes (\xHH,
 * \uHHHH; newline and tab as they are), so that no string of a trace can drive the terminal
 * (term.c). Once per process, before any output; a no-op for pipes and files. */
void cli_term_stdout(void);

#endif
