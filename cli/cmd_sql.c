/*
 * cmd_sql.c - `fusertrace sql TRACE [QUERY]`: run SQL over a trace with the `calls`,
 * `backwards` and `decisions` tables (sql/ft_sql.h) and the trace's own small tables (meta, fusers,
 * recipes, oplists); `fusertrace sql --extension` prints where the loadable extension is, for the
 * stock sqlite3 shell's `.load`.
 *
 * The trace is opened read-only; a complete trace is opened immutable, so that no side file
 * appears beside it. Output is the sqlite3 shell's list mode (columns joined by '|', NULL empty),
 * or CSV with a header row, or a JSON array of objects per statement.
 */
#define _XOPEN_SOURCE 700
#include "cli.h"
#include "ft_sql.h"
#include "ft_trace.h"

#include <jansson.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { OUT_LIST, OUT_CSV, OUT_JSON };

typedef struct sql_args {
    const char *trace, *query;
    int format, header, extension;
} sql_args;

static void usage(FILE *f)
{
    fprintf(f, "usage: fusertrace sql TRACE [QUERY] [--csv | --json] [--header]\n"
               "       fusertrace sql --extension\n"
               "\n"
               "Runs QUERY (or the SQL read from stdin) over TRACE, opened read-only. Tables:\n"
               "  calls      one row per call: seq, fuser, label, ops, recipe, recipe_type,\n"
               "             recipe_obj, recipe_attrs, grad, input_rg, op_rg, device, step, mb,\n"
               "             phase, ns, fuse_ns, rebuilt, graph, n_tokens, m_splits, chunk\n"
               "  backwards  one row per backward record: seq, call, ns, chunk\n"
               "  decisions  one row per call and policy, replayed as the query reads: seq,\n"
               "             policy, fuser, label, build, hit, reset, stale, plan, fresh_plan\n"
               "             (policy = 'NAME' replays one policy only)\n"
               "  meta, fusers, recipes, oplists: the trace's own tables\n"
               "JSON columns (ops, recipe_attrs, op_rg, m_splits) work with json_extract(); a\n"
               "constraint on seq reads only the chunks that hold the slice; calls('OTHER.ftdb')\n"
               "reads another trace.\n"
               "  --csv          CSV with a header row\n"
               "  --json         a JSON array of row objects per statement\n"
               "  --header       list mode: a first line of column names\n"
               "  --extension    print the path of libfusertrace_sql.so, the same tables as a\n"
               "                 SQLite extension: sqlite3 TRACE '.load PATH' 'SELECT ...'\n"
               "Exit: 0 done, 1 the trace is damaged, 2 bad usage, trace or query (named),\n"
               "3 I/O failure.\n");
}

/* Flags anywhere; the first word is the trace, the second the query. 0, or an exit status. */
static int parse_args(int argc, char **argv, sql_args *a)
{
    memset(a, 0, sizeof *a);
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            usage(stdout);
            return -1;
        } else if (!strcmp(s, "--csv")) {
            a->format = OUT_CSV;
        } else if (!strcmp(s, "--json")) {
            a->format = OUT_JSON;
        } else if (!strcmp(s, "--header")) {
            a->header = 1;
        } else if (!strcmp(s, "--extension")) {
            a->extension = 1;
        } else if (s[0] == '-' && s[1]) {
            fprintf(stderr, "fusertrace sql: unknown option '%s'\n", s);
            usage(stderr);
            return FT_EXIT_INPUT;
        } else if (n_pos < 2) {
            *(n_pos++ ? &a->query : &a->trace) = s;
        } else {
            fprintf(stderr,
                    "fusertrace sql: one trace and one query (quote the query), got '%s' "
                    "too\n",
                    s);
            return FT_EXIT_INPUT;
        }
    }
    if (a->extension ? n_pos != 0 : n_pos == 0) {
        fprintf(stderr, a->extension ? "fusertrace sql: --extension takes no trace or query\n"
                                     : "fusertrace sql: no trace given\n");
        usage(stderr);
        return FT_EXIT_INPUT;
    }
    return 0;
}

/* ---- --extension --------------------------------------------------------------------------- */
static int print_extension(void)
{
    static const char *const where[] = {"", "/../sql", "/../lib/fusertrace", "/../lib"};
    char exe[PATH_MAX], cand[PATH_MAX + 64], real[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "fusertrace sql: cannot find this program's own path\n");
        return FT_EXIT_INTERNAL;
    }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    for (size_t i = 0; i < FT_ARRAY_LEN(where); i++) {
        snprintf(cand, sizeof cand, "%s%s/%s", exe, where[i], FT_SQL_EXTENSION_FILE);
        if (!access(cand, R_OK) && realpath(cand, real)) {
            printf("%s\n", real);
            return FT_EXIT_OK;
        }
    }
    fprintf(stderr,
            "fusertrace sql: %s is not beside %s, nor in ../sql, ../lib/fusertrace or "
            "../lib from there\n",
            FT_SQL_EXTENSION_FILE, exe);
    return FT_EXIT_INTERNAL;
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
    for (; *s; s++) {
        if (*s == '"') putchar('"');
        putchar(*s);
    }
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

static int step_exit(int rc)
{
    switch (rc) {
    case SQLITE_CORRUPT:
        return FT_EXIT_CHECK;
    case SQLITE_NOMEM:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
        return FT_EXIT_INTERNAL;
    default:
        return FT_EXIT_INPUT;
    }
}

/* Run every statement of sql in turn. */
static int run_sql(sqlite3 *db, const char *sql, const sql_args *a)
{
    const char *tail = sql;
    while (tail && *tail) {
        sqlite3_stmt *st = NULL;
        const char *start = tail;
        int rc = sqlite3_prepare_v2(db, start, -1, &st, &tail);
        if (rc != SQLITE_OK) {
            int off = sqlite3_error_offset(db);
            fprintf(stderr, "fusertrace sql: query error: %s", sqlite3_errmsg(db));
            if (off >= 0) fprintf(stderr, " (at character %d of the statement)", off + 1);
            fprintf(stderr, "\n");
            return FT_EXIT_INPUT;
        }
        if (!st) continue; /* whitespace or a comment */
        long row = 0;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            if (!row && (a->format == OUT_CSV || (a->format == OUT_LIST && a->header)))
                print_header(st, a->format);
            if (print_row(st, a->format, row++)) {
                sqlite3_finalize(st);
                fprintf(stderr, "fusertrace sql: out of memory writing a row\n");
                return FT_EXIT_INTERNAL;
            }
        }
        if (a->format == OUT_JSON && sqlite3_column_count(st)) fputs(row ? "]\n" : "[]\n", stdout);
        if (rc != SQLITE_DONE) {
            fprintf(stderr, "fusertrace sql: query error: %s\n", sqlite3_errmsg(db));
            sqlite3_finalize(st);
            return step_exit(sqlite3_errcode(db) & 0xff);
        }
        sqlite3_finalize(st);
    }
    return FT_EXIT_OK;
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

static char *read_stdin(void)
{
    ft_buf b = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
        if (ft_buf_append(&b, chunk, n)) {
            ft_buf_free(&b);
            return NULL;
        }
    if (ferror(stdin) || ft_buf_append(&b, "", 1)) {
        ft_buf_free(&b);
        return NULL;
    }
    return (char *)b.data;
}

int cmd_sql(int argc, char **argv)
{
    sql_args a;
    int status = parse_args(argc, argv, &a);
    if (status) return status < 0 ? FT_EXIT_OK : status;
    if (a.extension) return print_extension();
    ft_trace *t = NULL;
    sqlite3 *db = NULL;
    char *stdin_sql = NULL;
    ft_buf uri = {0};
    ft_err err = {0};
    int rc = ft_trace_open(a.trace, FT_OPEN_READ, &t, &err);
    if (rc) {
        fprintf(stderr, "fusertrace sql: %s\n", ft_err_msg(&err));
        return rc == FT_EIO ? FT_EXIT_INPUT : cli_exit_code(rc);
    }
    const char *state = ft_trace_meta(t, "state");
    if (file_uri(&uri, a.trace, state && !strcmp(state, "complete"))) {
        status = FT_EXIT_INTERNAL;
        goto done;
    }
    rc = sqlite3_open_v2((const char *)uri.data, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    if (rc != SQLITE_OK) {
        fprintf(stderr, "fusertrace sql: %s: cannot open: %s\n", a.trace,
                db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        status = FT_EXIT_INTERNAL;
        goto done;
    }
    if ((rc = ft_sql_register(db, t, a.trace, &err))) {
        fprintf(stderr, "fusertrace sql: %s\n", ft_err_msg(&err));
        status = FT_EXIT_INTERNAL;
        goto done;
    }
    const char *sql = a.query;
    if (!sql) {
        if (!(stdin_sql = read_stdin())) {
            fprintf(stderr, "fusertrace sql: cannot read the query from stdin\n");
            status = FT_EXIT_INTERNAL;
            goto done;
        }
        sql = stdin_sql;
    }
    status = run_sql(db, sql, &a);
    if (fflush(stdout) || ferror(stdout)) {
        fprintf(stderr, "fusertrace sql: writing the output failed\n");
        status = FT_EXIT_INTERNAL;
    }
done:
    sqlite3_close(db);
    ft_trace_close(t);
    ft_buf_free(&uri);
    ft_free(stdin_sql);
    return status;
}
