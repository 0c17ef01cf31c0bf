/*
 * cmd_sql.c - `fusertrace sql TRACE [QUERY]`: run SQL over a trace with the `calls`,
 * `backwards` and `decisions` tables (sql/ft_sql.h) and the trace's own small tables (meta, fusers,
 * recipes, oplists); `fusertrace sql --extension` prints where the loadable extension is, for the
 * stock sqlite3 shell's `.load`.
 *
 * The trace is opened read-only, as every reader opens it (ft_trace.h): a trace read from its
 * main file alone (every closed one) is opened immutable, so that no side file beside it is
 * read and none appears; a trace whose schema is not trace.sql's (a view named `calls`) is
 * refused as verify refuses it, since its objects would stand in for the tables. Output is the
 * sqlite3 shell's list mode (columns joined by '|', NULL empty), or CSV with a header row, or a
 * JSON array of objects per statement.
 */
#define _XOPEN_SOURCE 700
#include "cli.h"
#include "ft_replayer.h"
#include "ft_sql.h"
#include "ft_trace.h"

#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { OUT_LIST, OUT_CSV, OUT_JSON };

typedef struct sql_opts {
    int csv, json, header, extension;
    cli_policy_opts pol; /* user policies the decisions table replays too */
    uint64_t memory;     /* --memory: the decoders' budget, bytes (set by its parser) */
} sql_opts;

#define OFF(f) offsetof(sql_opts, f)
static const cli_opt options[] = {
    {"csv", 0, NULL, "CSV with a header row", cli_parse_flag, OFF(csv)},
    {"json", 0, NULL, "a JSON array of row objects per statement", cli_parse_flag, OFF(json)},
    {"header", 0, NULL, "list mode: a first line of column names", cli_parse_flag, OFF(header)},
    {"extension", 0, NULL,
     "print the path of libfusertrace_sql.so, the same tables as a SQLite\n"
     "extension: sqlite3 -readonly 'file:TRACE?immutable=1' '.load PATH' 'SELECT ...'",
     cli_parse_flag, OFF(extension)},
    {"policy", 0, "DEFS",
     "define user policies NAME=SPEC, comma-separated (docs/policies.md): the\n"
     "decisions table replays them beside the built-ins",
     cli_parse_policy_list, OFF(pol)},
    {"policies", 0, "FILE", "define the user policies of a JSON file, likewise; repeatable",
     cli_parse_policy_file, OFF(pol)},
    {"memory", 0, "SIZE", CLI_MEMORY_HELP, cli_parse_memory, OFF(memory)},
};
#undef OFF

/* ---- --extension --------------------------------------------------------------------------- */
static int print_extension(ft_err *err)
{
#ifndef FT_INSTALL_LIBDIR
#define FT_INSTALL_LIBDIR "lib"
#endif
    /* beside the command (a build), the build's sql/, and the installed library folder */
    static const char *const where[] = {"", "/../sql", ("/../" FT_INSTALL_LIBDIR),
                                        "/../lib/fusertrace", "/../lib"};
    char exe[PATH_MAX], cand[PATH_MAX + 64], real[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return ft_err_set(err, FT_EIO, "cannot find this program's own path");
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    for (size_t i = 0; i < FT_ARRAY_LEN(where); i++) {
        snprintf(cand, sizeof cand, "%s%s/%s", exe, where[i], FT_SQL_EXTENSION_FILE);
        if (!access(cand, R_OK) && realpath(cand, real)) {
            printf("%s\n", real);
            return FT_OK;
        }
    }
    return ft_err_set(err, FT_EIO,
                      "%s is not beside %s, nor in ../sql, ../" FT_INSTALL_LIBDIR
                      ", ../lib/fusertrace or ../lib from there",
                      FT_SQL_EXTENSION_FILE, exe);
}

/* ---- output -------------------------------------------------------------------------------- */
static void csv_field(const char *s)
{
    if (!s) return;
    if (!strpbrk(s, ",\"\r\n") && s[0] != ' ' && (!s[0] || s[strlen(s) - 1] != ' ')) {
        fputs(s, stdout);
        return;
    }
    putchar('"');
    for (const char *q; (q = strchr(s, '"')); s = q + 1) { /* runs between quotes, not bytes */
        fwrite(s, 1, (size_t)(q - s) + 1, stdout);
        putchar('"');
    }
    fputs(s, stdout);
    putchar('"');
}

static json_t *json_value(sqlite3_stmt *st, int k)
{
    switch (sqlite3_column_type(st, k)) {
    case SQLITE_INTEGER:
        return json_integer((json_int_t)sqlite3_column_int64(st, k));
    case SQLITE_FLOAT:
        return json_real(sqlite3_column_double(st, k));
    case SQLITE_NULL:
        return json_null();
    default: {
        const char *s = (const char *)sqlite3_column_text(st, k);
        int len = sqlite3_column_bytes(st, k);
        json_t *v = s ? json_stringn(s, (size_t)len) : json_null();
        if (v) return v;
        /* not UTF-8 (a blob): hex digits */
        const unsigned char *p = sqlite3_column_blob(st, k);
        len = sqlite3_column_bytes(st, k);
        char *hex = malloc((size_t)len * 2 + 1);
        if (!hex) return NULL;
        for (int i = 0; i < len; i++)
            snprintf(hex + 2 * i, 3, "%02x", p[i]);
        hex[2 * len] = 0;
        v = json_string(hex);
        free(hex);
        return v;
    }
    }
}

/* One row in the chosen format; FT_OK or FT_ENOMEM. */
static int print_row(sqlite3_stmt *st, int format, long row)
{
    int n = sqlite3_column_count(st);
    if (format == OUT_JSON) {
        json_t *o = json_object();
        if (!o) return FT_ENOMEM;
        for (int k = 0; k < n; k++) {
            json_t *v = json_value(st, k);
            if (!v || json_object_set_new(o, sqlite3_column_name(st, k), v)) {
                json_decref(o);
                return FT_ENOMEM;
            }
        }
        fputs(row ? ",\n" : "[", stdout);
        int rc =
            json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
        json_decref(o);
        return rc ? FT_EIO : FT_OK;
    }
    for (int k = 0; k < n; k++) {
        const char *s = (const char *)sqlite3_column_text(st, k);
        if (k) putchar(format == OUT_CSV ? ',' : '|');
        if (format == OUT_CSV)
            csv_field(s);
        else if (s)
            fputs(s, stdout);
    }
    putchar('\n');
    return FT_OK;
}

static void print_header(sqlite3_stmt *st, int format)
{
    int n = sqlite3_column_count(st);
    for (int k = 0; k < n; k++) {
        if (k) putchar(format == OUT_CSV ? ',' : '|');
        if (format == OUT_CSV)
            csv_field(sqlite3_column_name(st, k));
        else
            fputs(sqlite3_column_name(st, k), stdout);
    }
    putchar('\n');
}

/* The FT_* status of an SQLite failure while a statement runs: damage (exit 1), the environment
 * (exit 3), else the query or its input (exit 2). */
static int step_status(int rc)
{
    switch (rc) {
    case SQLITE_CORRUPT:
        return FT_ECORRUPT;
    case SQLITE_NOMEM:
        return FT_ENOMEM;
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
        return FT_EIO;
    default:
        return FT_EINVAL;
    }
}

/* Run every statement of sql in turn. */
static int run_sql(sqlite3 *db, const char *sql, int format, int header, ft_err *err)
{
    const char *tail = sql;
    while (tail && *tail) {
        sqlite3_stmt *st = NULL;
        const char *start = tail;
        int rc = sqlite3_prepare_v2(db, start, -1, &st, &tail);
        if (rc != SQLITE_OK) {
            int off = sqlite3_error_offset(db);
            if (off >= 0)
                return ft_err_set(err, FT_EINVAL,
                                  "query error: %s (at character %d of the statement)",
                                  sqlite3_errmsg(db), off + 1);
            return ft_err_set(err, FT_EINVAL, "query error: %s", sqlite3_errmsg(db));
        }
        if (!st) continue; /* whitespace or a comment */
        long row = 0;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            if (!row && (format == OUT_CSV || (format == OUT_LIST && header)))
                print_header(st, format);
            if (print_row(st, format, row++)) {
                sqlite3_finalize(st);
                return ft_err_set(err, FT_ENOMEM, "out of memory writing a row");
            }
        }
        if (format == OUT_JSON && sqlite3_column_count(st)) fputs(row ? "]\n" : "[]\n", stdout);
        if (rc != SQLITE_DONE) {
            rc = ft_err_set(err, step_status(sqlite3_errcode(db) & 0xff), "query error: %s",
                            sqlite3_errmsg(db));
            sqlite3_finalize(st);
            return rc;
        }
        sqlite3_finalize(st);
    }
    return FT_OK;
}

/* ---- the command --------------------------------------------------------------------------- */
/* "file:" URI of path: every byte outside the unreserved set and '/' percent-encoded. */
static int file_uri(ft_buf *b, const char *path, int immutable)
{
    int rc = ft_buf_append(b, "file:", 5);
    for (const unsigned char *p = (const unsigned char *)path; *p && !rc; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("/-._~", *p))
            rc = ft_buf_append(b, p, 1);
        else
            rc = ft_buf_printf(b, "%%%02X", *p);
    }
    if (!rc) rc = ft_buf_printf(b, "?%s", immutable ? "immutable=1" : "mode=ro");
    if (!rc) rc = ft_buf_append(b, "", 1);
    return rc;
}

/* The most SQL read from stdin: a query is read whole before it runs, so it is capped rather
 * than buffered without end. */
enum { STDIN_SQL_MAX = 16 << 20 };

/* The query on stdin, NUL-terminated, into *out; FT_EINVAL past STDIN_SQL_MAX. */
static int read_stdin(char **out, ft_err *err)
{
    ft_buf b = {0};
    char chunk[4096];
    size_t n;
    *out = NULL;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) {
        if (b.len + n > STDIN_SQL_MAX) {
            ft_buf_free(&b);
            return ft_err_set(err, FT_EINVAL,
                              "-: the query read from stdin is over %d MiB; that is not a query",
                              STDIN_SQL_MAX >> 20);
        }
        if (ft_buf_append(&b, chunk, n)) {
            ft_buf_free(&b);
            return ft_err_set(err, FT_ENOMEM, "out of memory reading the query from stdin");
        }
    }
    if (ferror(stdin)) {
        ft_buf_free(&b);
        return ft_err_set(err, FT_EIO, "cannot read the query from stdin: %s", strerror(errno));
    }
    if (ft_buf_append(&b, "", 1)) {
        ft_buf_free(&b);
        return ft_err_set(err, FT_ENOMEM, "out of memory reading the query from stdin");
    }
    *out = (char *)b.data;
    return FT_OK;
}

static int run(void *opts_v, int n_args, char **args, ft_err *err)
{
    sql_opts *a = opts_v;
    if (a->extension) {
        if (n_args) return cli_usage_error(err, "--extension takes no trace or query");
        return print_extension(err);
    }
    if (!n_args) return cli_usage_error(err, "no trace given");
    if (a->csv && a->json) return cli_usage_error(err, "--csv and --json exclude each other");
    uint32_t no_idx[FT_MAX_POLICIES], no_n;
    int prc = cli_policies_resolve(&a->pol, 1, no_idx, &no_n, err);
    if (prc) return prc;
    const char *trace = args[0], *query = n_args > 1 ? args[1] : NULL;
    int format = a->csv ? OUT_CSV : a->json ? OUT_JSON : OUT_LIST;
    ft_trace *t = NULL;
    sqlite3 *db = NULL;
    char *stdin_sql = NULL;
    ft_buf uri = {0};
    int rc = cli_in_check(trace, CLI_IN_TRACE, err);
    if (!rc) rc = ft_trace_open(trace, FT_OPEN_READ, &t, err);
    if (rc) return rc;
    if ((rc = ft_trace_check_schema(t, err))) goto done;
    if (file_uri(&uri, trace, !ft_trace_wal_read(t))) {
        rc = ft_err_set(err, FT_ENOMEM, "out of memory");
        goto done;
    }
    int src =
        sqlite3_open_v2((const char *)uri.data, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    if (src != SQLITE_OK) {
        rc = ft_err_set(err, FT_ESQL, "%s: cannot open: %s", trace,
                        db ? sqlite3_errmsg(db) : sqlite3_errstr(src));
        goto done;
    }
    if ((rc = ft_sql_register(db, t, trace, err))) goto done;
    const char *sql = query;
    if (!sql) {
        if ((rc = read_stdin(&stdin_sql, err))) goto done;
        sql = stdin_sql;
    }
    rc = run_sql(db, sql, format, a->header, err);
    uint64_t share;
    if (ft_sql_take_fallback(&share))
        fprintf(stderr,
                "fusertrace sql: note: the decisions replayed took more than their share of the "
                "memory budget (%.1f MiB, half of it; --memory sets the budget), so each rescan "
                "of decisions replayed the trace again\n",
                (double)share / (1 << 20));
    if (!rc) rc = cli_stdout_close(err);
done:
    sqlite3_close(db);
    ft_trace_close(t);
    ft_buf_free(&uri);
    ft_free(stdin_sql);
    return rc;
}

const cli_cmd cmd_sql = {
    .name = "sql",
    .synopsis = "TRACE [QUERY] [--csv | --json] [--header] [--policy DEFS]\n"
                "       [--policies FILE]...\n"
                "       fusertrace sql --extension",
    .summary = "SQL over a trace's calls and the replay's decisions",
    .about = "Runs QUERY (or the SQL read from stdin) over TRACE, opened read-only. Tables:\n"
             "  calls      one row per call: seq, fuser, label, ops, recipe, recipe_type,\n"
             "             recipe_obj, recipe_attrs, grad, input_rg, op_rg, device, step, mb,\n"
             "             phase, ns, fuse_ns, rebuilt, graph, n_tokens, m_splits, chunk\n"
             "  backwards  one row per backward record: seq, call, ns, chunk\n"
             "  decisions  one row per call and policy, replayed as the query reads: seq,\n"
             "             policy, fuser, label, build, hit, reset, stale, plan, fresh_plan,\n"
             "             step, phase\n"
             "             (policy = 'NAME' replays one policy only)\n"
             "  meta, fusers, recipes, oplists: the trace's own tables\n"
             "JSON columns (ops, recipe_attrs, op_rg, m_splits) work with json_extract(); a\n"
             "constraint on seq reads only the chunks that hold the slice; calls('OTHER.ftdb')\n"
             "reads another trace. Output: the sqlite3 shell's list mode (columns joined by\n"
             "'|', NULL empty). A bad query is exit 2, a damaged trace exit 1.",
    CLI_OPTS(sql_opts, options),
    .min_args = 0,
    .max_args = 2,
    .run_fn = run,
};
