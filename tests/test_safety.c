/*
 * test_safety.c - what no command may do to a trace or an output, whatever lies beside it:
 * `seal` never changes a closed trace (a stale -wal of its own, another database's -wal or hot
 * -journal beside it), and refuses a plain SQLite database before touching it; `sql` and the
 * extension read a closed trace alone and create nothing beside it; the temporary-file sweeper
 * removes only what a dead fusertrace of this host wrote; the side files of a removed trace go
 * with it; two writers of one output do not lose one silently. Every crafted file is made by
 * the test.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_recorder.h"
#include "ft_trace.h"
#include "test_util.h"
#include "trace_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static char tmpdir[256];

static int setup_dir(void **state)
{
    (void)state;
    return tu_dir_fresh(tmpdir, sizeof tmpdir, "test_safety_tmp");
}

static int teardown_dir(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "umount '%s/full' 2>/dev/null; true", tmpdir);
    tu_sh(cmd, NULL, 0);
    return tu_dir_remove(tmpdir);
}

static void tmp_path(char *buf, size_t cap, const char *name)
{
    tu_dir_path(buf, cap, tmpdir, name);
}

/* The file's bytes equal `want` (of n bytes). */
static void assert_same_bytes(const char *path, const char *want, size_t n)
{
    size_t m;
    char *d = tu_read_file(path, &m);
    assert_non_null(d);
    if (m != n || memcmp(d, want, n)) fail_msg("%s changed (%zu bytes, was %zu)", path, m, n);
    free(d);
}

static const char *ops1 = "[{\"type\":\"BasicLinear\",\"attrs\":{\"in_features\":64,"
                          "\"out_features\":64,\"bias\":false,\"dtype\":\"bfloat16\"}}]";

static int call1(ft_rec *r, int64_t seq)
{
    static const uint8_t rg[1] = {1};
    static const int64_t splits[2] = {3, 4};
    return ft_rec_call_flat(r, seq, 1, 0, FT_CF_GRAD | FT_CF_HAS_NS, 0, 1, rg, 2, splits, 0, 0,
                            "fwd", seq * 10, 0);
}

/* A closed trace of n calls in chunks of 100; with snap (not NULL), a copy of its -wal taken
 * after the first 250 calls (a stale snapshot of its own -wal). */
static void record(const char *path, int n, const char *snap)
{
    ft_rec_opts o = {100, 0};
    ft_rec *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(path, &o, &r, &err), FT_OK);
    assert_int_equal(ft_rec_fuser(r, 1, "layer", ops1), FT_OK);
    for (int i = 0; i < n; i++) {
        assert_int_equal(call1(r, i + 1), FT_OK);
        if (snap && i == 249) {
            char wal[700];
            snprintf(wal, sizeof wal, "%s-wal", path);
            tu_copy_file(wal, snap);
        }
    }
    assert_int_equal(ft_rec_close(r), FT_OK);
    assert_false(tu_exists(path, "-wal") || tu_exists(path, "-journal") || tu_exists(path, "-shm"));
}

static uint64_t calls_of(const char *path)
{
    ft_trace *t = NULL;
    ft_err err = {0};
    if (ft_trace_open(path, FT_OPEN_READ, &t, &err)) fail_msg("%s", ft_err_msg(&err));
    uint64_t n = ft_trace_n_calls(t);
    ft_err verr = {0};
    if (ft_trace_verify(t, &verr)) fail_msg("verify: %s", ft_err_msg(&verr));
    ft_trace_close(t);
    return n;
}

/* A valid, committed -wal of a plain 4096-byte-page database (not a trace), at wal_out, and
 * (main_out not NULL) its main file as it was then, without those commits; the database itself
 * stays at db. */
static void wal_db(const char *db, const char *main_out, const char *wal_out)
{
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h,
                                  "PRAGMA page_size=4096; PRAGMA journal_mode=WAL; "
                                  "PRAGMA wal_autocheckpoint=0; CREATE TABLE x(v); "
                                  "INSERT INTO x SELECT randomblob(3000) FROM "
                                  "(WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 "
                                  "FROM c WHERE i<40) SELECT i FROM c)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    char w[700];
    snprintf(w, sizeof w, "%s-wal", db);
    tu_copy_file(w, wal_out); /* while the connection holds it */
    if (main_out) tu_copy_file(db, main_out);
    sqlite3_close(h);
}

static void foreign_wal(const char *db, const char *wal_out)
{
    wal_db(db, NULL, wal_out);
}

/* A hot -journal of another database (a writer killed inside a transaction that spilled pages
 * into its file), at journal_out. */
static void foreign_journal(const char *db, const char *journal_out)
{
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h,
                                  "PRAGMA page_size=512; PRAGMA journal_mode=DELETE; "
                                  "CREATE TABLE x(v); INSERT INTO x SELECT randomblob(400) FROM "
                                  "(WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 "
                                  "FROM c WHERE i<200) SELECT i FROM c)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(h);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        sqlite3 *c = NULL;
        if (sqlite3_open(db, &c) ||
            sqlite3_exec(c, "PRAGMA cache_size=2; BEGIN; UPDATE x SET v=zeroblob(400);", NULL, NULL,
                         NULL))
            _exit(1);
        _exit(0); /* killed inside the transaction: the journal stays, hot */
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char j[700];
    snprintf(j, sizeof j, "%s-journal", db);
    assert_true(tu_exists(db, "-journal"));
    tu_copy_file(j, journal_out);
}

/* seal on `trace` with `side` beside it (as SUFFIX): exit 0, the trace byte for byte as it
 * was, the side file still there, the message says it was not applied. */
static void seal_leaves_it(const char *trace, const char *suffix, int n_calls)
{
    size_t n;
    char *before = tu_read_file(trace, &n);
    assert_non_null(before);
    const char *cli = tu_cli();
    if (cli) {
        char cmd[2000], out[4096];
        snprintf(cmd, sizeof cmd, "%s seal '%s' 2>&1", cli, trace);
        int st = tu_sh(cmd, out, sizeof out);
        assert_same_bytes(trace, before, n);
        if (st || !strstr(out, "already closed") || !strstr(out, "neither applied nor removed"))
            fail_msg("seal exit %d: %s", st, out);
    }
    ft_seal_info si;
    ft_err err = {0};
    assert_int_equal(ft_trace_seal(trace, 0, &si, &err), FT_OK);
    assert_true(si.was_closed);
    assert_true(!strcmp(suffix, "-wal") ? si.ignored_wal : si.ignored_journal);
    assert_same_bytes(trace, before, n);
    assert_true(tu_exists(trace, suffix));
    /* the readers read the same trace */
    assert_int_equal(calls_of(trace), n_calls);
    assert_same_bytes(trace, before, n);
    free(before);
}

/* ---- seal ---------------------------------------------------------------------------------- */
static void test_seal_stale_own_wal(void **state)
{
    (void)state;
    char p[600], snap[600], wal[700];
    tmp_path(p, sizeof p, "own.ftdb");
    tmp_path(snap, sizeof snap, "own.snap");
    record(p, 1000, snap);
    snprintf(wal, sizeof wal, "%s-wal", p);
    tu_copy_file(snap, wal);
    seal_leaves_it(p, "-wal", 1000);
}

static void test_seal_foreign_wal(void **state)
{
    (void)state;
    char p[600], other[600], wal[700];
    tmp_path(p, sizeof p, "fw.ftdb"); /* small: 512-byte pages, the -wal's are 4096 */
    tmp_path(other, sizeof other, "fw-other.db");
    record(p, 300, NULL);
    snprintf(wal, sizeof wal, "%s-wal", p);
    foreign_wal(other, wal);
    seal_leaves_it(p, "-wal", 300);
}

static void test_seal_foreign_journal(void **state)
{
    (void)state;
    char p[600], other[600], j[700];
    tmp_path(p, sizeof p, "fj.ftdb");
    tmp_path(other, sizeof other, "fj-other.db");
    record(p, 300, NULL);
    snprintf(j, sizeof j, "%s-journal", p);
    foreign_journal(other, j);
    seal_leaves_it(p, "-journal", 300);
}

/* A plain SQLite database with a -wal of commits not yet in its main file: seal refuses it as
 * not a trace, and neither the file nor its -wal changes. */
static void test_seal_plain_db_untouched(void **state)
{
    (void)state;
    char db[600], cp[600], cwal[700];
    tmp_path(db, sizeof db, "plain.db");
    tmp_path(cp, sizeof cp, "plain-copy.db");
    snprintf(cwal, sizeof cwal, "%s-wal", cp);
    wal_db(db, cp, cwal);
    size_t n, nw;
    char *before = tu_read_file(cp, &n), *wbefore = tu_read_file(cwal, &nw);
    const char *cli = tu_cli();
    if (!cli) skip();
    char cmd[2000], out[4096];
    snprintf(cmd, sizeof cmd, "%s seal '%s' 2>&1", cli, cp);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "not a fusertrace trace"));
    assert_same_bytes(cp, before, n);
    assert_same_bytes(cwal, wbefore, nw);
    free(before);
    free(wbefore);
}

/* ---- sql and the extension ------------------------------------------------------------------ */
/* Names in tmpdir, sorted, as one string. */
static void listing(char *out, size_t cap)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | sort | tr '\\n' ' '", tmpdir);
    assert_int_equal(tu_sh(cmd, out, cap), 0);
}

/* A recording killed after 250 calls in chunks of 100, then sealed: state 'recovered'. */
static void recovered_trace(const char *path)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ft_rec_opts o = {100, 0};
        ft_rec *r = NULL;
        ft_err err = {0};
        if (ft_rec_open(path, &o, &r, &err) || ft_rec_fuser(r, 1, "layer", ops1)) _exit(1);
        for (int i = 0; i < 250; i++)
            if (call1(r, i + 1)) _exit(1);
        _exit(0); /* killed: never closed */
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ft_seal_info si;
    ft_err err = {0};
    assert_int_equal(ft_trace_seal(path, 0, &si, &err), FT_OK);
    assert_false(si.was_closed);
}

/* Another trace's committed -wal (same page size: a copy of path, changed in WAL mode) at
 * wal_out. */
static void sibling_wal(const char *path, const char *copy, const char *wal_out)
{
    tu_copy_file(path, copy);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(copy, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; "
                                  "DELETE FROM chunks WHERE id > 1; "
                                  "UPDATE meta SET value='other' WHERE key='state'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    char w[700];
    snprintf(w, sizeof w, "%s-wal", copy);
    tu_copy_file(w, wal_out);
    sqlite3_close(db);
}

/* `sql` on a sealed ('recovered') trace reads it alone, whatever -wal lies beside it, and
 * creates no file beside it. */
static void test_sql_sealed_ignores_foreign_wal(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char p[600], cp[600], wal[700], before[4096], after[4096], cmd[2000], out[4096];
    tmp_path(p, sizeof p, "rec.ftdb");
    tmp_path(cp, sizeof cp, "rec-copy.ftdb");
    recovered_trace(p);
    snprintf(wal, sizeof wal, "%s-wal", p);
    sibling_wal(p, cp, wal);
    listing(before, sizeof before);
    snprintf(cmd, sizeof cmd,
             "%s sql '%s' \"SELECT value FROM meta WHERE key='state'; SELECT count(*) FROM "
             "chunks; SELECT count(*) FROM calls\" 2>/dev/null",
             cli, p);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    assert_string_equal(out, "recovered\n2\n200\n"); /* the last 50 calls were never committed */
    listing(after, sizeof after);
    assert_string_equal(before, after);
}

/* The path of the SQL extension into ext, and the environment the stock shell needs to load it
 * into env (a sanitizer build's extension needs the sanitizer runtime loaded first). */
static void extension(char *ext, size_t cap, char *env, size_t env_cap)
{
    char cmd[2000], pre[1024];
    snprintf(cmd, sizeof cmd, "%s sql --extension", tu_cli());
    assert_int_equal(tu_sh(cmd, ext, cap), 0);
    ext[strcspn(ext, "\n")] = '\0';
    snprintf(cmd, sizeof cmd, "ldd '%s' | awk '/libasan/ {print $3; exit}'", ext);
    assert_int_equal(tu_sh(cmd, pre, sizeof pre), 0);
    pre[strcspn(pre, "\n")] = '\0';
    env[0] = '\0';
    if (pre[0]) snprintf(env, env_cap, "LD_PRELOAD='%s' ASAN_OPTIONS=detect_leaks=0 ", pre);
}

/* The stock sqlite3 shell with a stale -wal beside a closed trace: the extension refuses the
 * trace it was not given immutable (and the shell's exit writes nothing into it); the README's
 * immutable, read-only way reads it and changes nothing. */
static void test_extension_refuses_side_files(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli || tu_sh("command -v sqlite3 >/dev/null", NULL, 0)) skip();
    char ext[1024], env[1200], p[600], snap[600], wal[700], cmd[4000], out[4096];
    extension(ext, sizeof ext, env, sizeof env);
    tmp_path(p, sizeof p, "shell.ftdb");
    tmp_path(snap, sizeof snap, "shell.snap");
    record(p, 1000, snap);
    snprintf(wal, sizeof wal, "%s-wal", p);
    tu_copy_file(snap, wal);
    size_t n;
    char *before = tu_read_file(p, &n);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %ssqlite3 shell.ftdb '.load %s' 'SELECT count(*) FROM calls' 2>&1", tmpdir,
             env, ext);
    tu_sh(cmd, out, sizeof out);
    if (!strstr(out, "immutable=1")) fail_msg("the shell said: %s", out);
    assert_same_bytes(p, before, n);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %ssqlite3 -readonly 'file:shell.ftdb?immutable=1' '.load %s' "
             "'SELECT count(*) FROM calls' 2>&1",
             tmpdir, env, ext);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    assert_string_equal(out, "1000\n");
    assert_same_bytes(p, before, n);
    free(before);
}

/* A trace that defines a view named `calls` (or anything else trace.sql does not) is refused
 * by `sql` and the extension with verify's message, instead of the view standing in for the
 * table. */
static void test_sql_refuses_shadowing_view(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char p[600], cmd[4000], out[4096], vout[4096];
    tmp_path(p, sizeof p, "view.ftdb");
    record(p, 300, NULL);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE VIEW calls AS SELECT 7 AS seq", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    snprintf(cmd, sizeof cmd, "%s verify '%s' 2>&1 >/dev/null", cli, p);
    assert_int_equal(tu_sh(cmd, vout, sizeof vout), 1);
    const char *why = strstr(vout, "schema differs");
    assert_non_null(why);
    snprintf(cmd, sizeof cmd, "%s sql '%s' 'SELECT count(*) FROM calls' 2>&1", cli, p);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 1);
    if (!strstr(out, why)) fail_msg("sql said: %s", out);
    if (tu_sh("command -v sqlite3 >/dev/null", NULL, 0)) return;
    char ext[1024], env[1200];
    extension(ext, sizeof ext, env, sizeof env);
    snprintf(
        cmd, sizeof cmd,
        "%ssqlite3 -readonly 'file:%s?immutable=1' '.load %s' 'SELECT count(*) FROM calls' 2>&1",
        env, p, ext);
    tu_sh(cmd, out, sizeof out);
    if (!strstr(out, why)) fail_msg("the shell said: %s", out);
}

/* seq bounds from doubles at the top of int64 are exact: 9.21e18 is the integer it names, and
 * only values past 2^63 clamp (and then keep every row SQLite's own comparison keeps). */
static void test_sql_seq_bounds_big_doubles(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char p[600], cmd[2000], out[4096];
    tmp_path(p, sizeof p, "big.ftdb");
    ft_rec_opts o = {100, 0};
    ft_rec *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(p, &o, &r, &err), FT_OK);
    assert_int_equal(ft_rec_fuser(r, 1, "layer", ops1), FT_OK);
    static const uint8_t rg[1] = {1};
    const int64_t seqs[4] = {1, 2, INT64_C(9210000000000000000), INT64_MAX};
    for (int i = 0; i < 4; i++)
        assert_int_equal(
            ft_rec_call_flat(r, seqs[i], 1, 0, FT_CF_GRAD, 0, 1, rg, 0, NULL, 0, 0, NULL, 0, 0),
            FT_OK);
    assert_int_equal(ft_rec_close(r), FT_OK);
    static const struct {
        const char *where, *count;
    } q[] = {
        {"seq = 9.21e18", "1"}, {"seq >= 9.21e18", "2"},
        {"seq < 9.21e18", "2"}, {"seq <= 9.21e18", "3"},
        {"seq > 9.21e18", "1"}, {"seq < 1e19", "4"},
        {"seq <= 1e19", "4"},   {"seq > 1e19", "0"},
        {"seq > -1e19", "4"},   {"seq = 9.2233720368547758e18", "0"},
    };
    for (size_t k = 0; k < sizeof q / sizeof q[0]; k++) {
        snprintf(cmd, sizeof cmd, "%s sql '%s' 'SELECT count(*) FROM calls WHERE %s' 2>&1", cli, p,
                 q[k].where);
        assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
        out[strcspn(out, "\n")] = '\0';
        if (strcmp(out, q[k].count)) fail_msg("%s: %s rows, want %s", q[k].where, out, q[k].count);
    }
}

/* ---- a trace cut while it is read ----------------------------------------------------------- */
/* The file truncated between two chunks of a read: an error naming the trace, not SIGBUS. */
static void test_truncated_while_read(void **state)
{
    (void)state;
    char p[600];
    tmp_path(p, sizeof p, "cut.ftdb");
    ft_rec_opts o = {500, 1};
    ft_rec *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(p, &o, &r, &err), FT_OK);
    assert_int_equal(ft_rec_fuser(r, 1, "layer", ops1), FT_OK);
    static const uint8_t rg[1] = {1};
    uint64_t x = 88172645463325252ull; /* xorshift: values that do not compress */
    for (int i = 0; i < 40000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int64_t sp[3] = {(int64_t)(x >> 40), (int64_t)(x & 0xffff), (int64_t)((x >> 20) & 0xfff)};
        assert_int_equal(ft_rec_call_flat(r, i + 1, 1, 0, FT_CF_GRAD | FT_CF_HAS_NS, 0, 1, rg, 3,
                                          sp, 0, 0, NULL, (int64_t)(x >> 2), 0),
                         FT_OK);
    }
    assert_int_equal(ft_rec_close(r), FT_OK);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    assert_true(sb.st_size > 4 * 65536);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGBUS, SIG_DFL); /* not CMocka's handler: the parent sees the signal */
        signal(SIGSEGV, SIG_DFL);
        ft_trace *t = NULL;
        ft_reader *rd = NULL;
        const ft_batch *b = NULL;
        if (ft_trace_open(p, FT_OPEN_READ, &t, &err) || ft_reader_open(t, FT_READ_SPLITS, &rd) ||
            ft_reader_next(rd, &b) || !b)
            _exit(3);
        if (truncate(p, sb.st_size / 3)) _exit(4);
        int rc;
        while (!(rc = ft_reader_next(rd, &b)) && b)
            ;
        _exit(rc ? 0 : 5); /* an error, as it must be */
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (WIFSIGNALED(st)) fail_msg("the reader died of signal %d", WTERMSIG(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- outputs: the sweeper and concurrent writers --------------------------------------------- */
/* The name of a file in tmpdir starting with prefix, into out; 0 when there is none. */
static int find_prefixed(const char *prefix, char *out, size_t cap)
{
    DIR *d = opendir(tmpdir);
    assert_non_null(d);
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix)) && !strstr(e->d_name, "-wal") &&
            !strstr(e->d_name, "-shm") && !strstr(e->d_name, "-journal"))
            found = (int)ft_strlcpy(out, e->d_name, cap) < (int)cap;
    closedir(d);
    return found;
}

/* `fusertrace import - -o tmpdir/target` waiting on a pipe (write end in *wfd) once its
 * temporary exists; that temporary's name in tmp_name. */
static pid_t import_waiting(const char *target, int *wfd, char *tmp_name, size_t cap)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    char out[700], prefix[200];
    snprintf(out, sizeof out, "%s/%s", tmpdir, target);
    snprintf(prefix, sizeof prefix, "%s.tmp-", target);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[0], 0);
        close(fds[0]);
        close(fds[1]);
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 2);
        execl(tu_cli(), tu_cli(), "import", "-", "-o", out, (char *)NULL);
        _exit(127);
    }
    close(fds[0]);
    const char *head = "{\"t\":\"header\",\"format\":\"fusertrace-capture\",\"version\":1}\n";
    assert_int_equal(write(fds[1], head, strlen(head)), (ssize_t)strlen(head));
    int seen = 0;
    for (int i = 0; i < 500 && !(seen = find_prefixed(prefix, tmp_name, cap)); i++)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    assert_true(seen);
    *wfd = fds[1];
    return pid;
}

static pid_t dead_pid(void)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (!pid) _exit(0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    return pid;
}

static void touch(const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    int fd = open(p, O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    close(fd);
}

static int in_dir(const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    return !access(p, F_OK);
}

/* The sweeper removes what a killed fusertrace of this host wrote beside the target, and only
 * that: not a user's look-alike, not a name with a sign, a space or a leading zero, not another
 * host's or PID namespace's temporary, not a live process's. */
static void test_sweeper_removes_only_its_own(void **state)
{
    (void)state;
    if (!tu_cli()) skip();
    char tmp[300], id[17], name[16][200];
    int wfd;
    pid_t pid = import_waiting("s.ftdb", &wfd, tmp, sizeof tmp);
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    close(wfd);
    assert_true(strlen(tmp) > strlen("s.ftdb.tmp-") + 16);
    memcpy(id, tmp + strlen("s.ftdb.tmp-"), 16);
    id[16] = '\0';
    long dead = (long)dead_pid();
    const char *other_host =
        strcmp(id, "0123456789abcdef") ? "0123456789abcdef" : "fedcba9876543210";
    int n = 0;
    snprintf(name[n++], sizeof name[0], "s.ftdb.tmp-%s-%ld-abc123", id, dead);     /* ours */
    snprintf(name[n++], sizeof name[0], "s.ftdb.tmp-%s-%ld-abc123-wal", id, dead); /* ours */
    const int n_ours = n;
    snprintf(name[n++], sizeof name[0], "s.ftdb.tmp-%ld-notes", dead);  /* a user's */
    snprintf(name[n++], sizeof name[0], "s.ftdb.tmp-%ld-abcdef", dead); /* no host */
    snprintf(name[n++], sizeof name[0], "s.ftdb.tmp-%s-%ld-abc123-notes", id, dead);
    snprintf(name[n++], sizeof name[0], "s.ftdb.tmp-%s-+%ld-abc123", id, dead);
    snprintf(name[n++], sizeof name[0], "s.ftdb.tmp-%s- %ld-abc123", id, dead);
    snprintf(name[n++], sizeof name[0], "s.ftdb.tmp-%s-0%ld-abc123", id, dead);
    snprintf(name[n++], sizeof name[0], "s.ftdb.tmp-%s-%ld-abc12", id, dead);
    snprintf(name[n++], sizeof name[0], "s.ftdb.tmp-%s-%ld-abc123", other_host, dead);
    snprintf(name[n++], sizeof name[0], "s.ftdb.tmp-%s-%ld-abc123", id, (long)getpid());
    for (int i = 0; i < n; i++)
        touch(name[i]);
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "%s import '%s/traces/recompute-rht.jsonl' -o '%s/s.ftdb' 2>&1",
             tu_cli(), FT_SOURCE_DIR, tmpdir);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    assert_false(in_dir(tmp)); /* the killed import's own temporary */
    for (int i = 0; i < n; i++)
        if (in_dir(name[i]) != (i >= n_ours))
            fail_msg("%s was %s", name[i], i >= n_ours ? "removed" : "left");
}

/* Two imports onto one new output at once: the one that finishes second fails naming the
 * output, and the first one's output stays whole. */
static void test_concurrent_writers_one_output(void **state)
{
    (void)state;
    if (!tu_cli()) skip();
    char tmp[300], cmd[2000], out[4096];
    int wfd;
    pid_t slow = import_waiting("c.ftdb", &wfd, tmp, sizeof tmp);
    snprintf(cmd, sizeof cmd, "%s import '%s/traces/recompute-rht.jsonl' -o '%s/c.ftdb' 2>&1",
             tu_cli(), FT_SOURCE_DIR, tmpdir);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    char c[700];
    snprintf(c, sizeof c, "%s/c.ftdb", tmpdir);
    uint64_t n_first = calls_of(c);
    close(wfd); /* the slow one's input ends: a valid stream with no call */
    int st;
    assert_int_equal(waitpid(slow, &st, 0), slow);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 3);
    assert_int_equal(calls_of(c), n_first);
    assert_true(n_first > 0);
    assert_false(in_dir(tmp));
    (void)out;
}

/* ---- a close killed while it compacts a small trace ------------------------------------------ */
/* SIGKILL at 60 moments inside ft_rec_close of a small trace: every call is there, no partial
 * copy (PATH.small-PID) is ever left beside it, and once seal finished the trace no copy at
 * all. */
static void test_killed_close_leaves_no_copy(void **state)
{
    (void)state;
    int left = 0;
    for (int k = 0; k < 60; k++) {
        char p[600], name[64];
        snprintf(name, sizeof name, "kc%d.ftdb", k);
        tmp_path(p, sizeof p, name);
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            ft_rec_opts o = {100, 0};
            ft_rec *r = NULL;
            ft_err err = {0};
            if (ft_rec_open(p, &o, &r, &err) || ft_rec_fuser(r, 1, "layer", ops1)) _exit(2);
            for (int i = 0; i < 300; i++)
                if (call1(r, i + 1)) _exit(2);
            if (write(fds[1], "x", 1) != 1) _exit(3);
            ft_rec_close(r);
            for (;;)
                pause();
        }
        close(fds[1]);
        char c;
        assert_int_equal(read(fds[0], &c, 1), 1);
        close(fds[0]);
        nanosleep(&(struct timespec){0, (long)k * 100000}, NULL);
        kill(pid, SIGKILL);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        char cmd[1000], out[4096];
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && for f in %s.small-*; do [ -e \"$f\" ] && "
                 "sqlite3 \"file:$f?immutable=1\" 'PRAGMA quick_check' 2>&1; done; true",
                 tmpdir, name);
        tu_sh(cmd, out, sizeof out);
        if (out[0] && strcmp(out, "ok\n")) fail_msg("kill %d: a partial copy: %s", k, out);
        ft_seal_info si;
        ft_err err = {0};
        assert_int_equal(ft_trace_seal(p, 1, &si, &err), FT_OK);
        assert_int_equal(si.n_calls, 300);
        snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c '^%s\\.small-' || true", tmpdir, name);
        tu_sh(cmd, out, sizeof out);
        left += strtol(out, NULL, 10) != 0;
        ft_trace_remove(p);
    }
    assert_int_equal(left, 0);
}

/* ---- chunks whose seq ranges overlap --------------------------------------------------------- */
/* A trace of 100 calls with a second chunk copied in from a trace of seqs 51..150 (its checksum
 * valid, the digests rewritten): every reader refuses it with verify's message. */
static void test_overlapping_chunks_refused(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char a[600], b[600];
    tmp_path(a, sizeof a, "ov.ftdb");
    tmp_path(b, sizeof b, "ov-b.ftdb");
    ft_rec_opts o = {100, 0};
    const char *paths[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        ft_rec *r = NULL;
        ft_err err = {0};
        assert_int_equal(ft_rec_open(paths[k], &o, &r, &err), FT_OK);
        assert_int_equal(ft_rec_fuser(r, 1, "layer", ops1), FT_OK);
        for (int i = 0; i < 100; i++)
            assert_int_equal(call1(r, k * 50 + i + 1), FT_OK);
        assert_int_equal(ft_rec_close(r), FT_OK);
    }
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(a, &db), SQLITE_OK);
    char *q = sqlite3_mprintf("ATTACH %Q AS b; INSERT INTO chunks SELECT 2, first_seq, n_records, "
                              "n_calls, codec, raw_bytes, checksum, data FROM b.chunks; DETACH b",
                              b);
    assert_int_equal(sqlite3_exec(db, q, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_free(q);
    sqlite3_close(db);
    ft_err err = {0};
    assert_int_equal(ft_trace_redigest(a, &err), FT_OK);
    const char *want = "chunk 2: seq 51 does not follow 100";
    static const char *const cmds[] = {
        "verify '%s'",
        "info '%s'",
        "replay '%s'",
        "sql '%s' 'SELECT count(*) FROM calls'",
        "export '%s' -o '%s.jsonl'",
    };
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
        char c[1500], cmd[2000], out[4096];
        snprintf(c, sizeof c, cmds[k], a, a);
        snprintf(cmd, sizeof cmd, "%s %s 2>&1 >/dev/null", cli, c);
        int st = tu_sh(cmd, out, sizeof out);
        if (st != 1 || !strstr(out, want)) fail_msg("%s: exit %d: %s", c, st, out);
    }
}

/* ---- trace strings on a terminal --------------------------------------------------------------
 */
/* Escape sequences in te_version, host and a label reach a terminal as visible text from info,
 * replay --explain and sql (run under script(1), which gives them a terminal), and a pipe gets
 * the bytes as they are. */
static void test_terminal_output_escaped(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli || tu_sh("command -v script >/dev/null", NULL, 0)) skip();
    char p[600], src[600], cmd[4000];
    tmp_path(p, sizeof p, "esc.ftdb");
    tmp_path(src, sizeof src, "esc.jsonl");
    snprintf(
        cmd, sizeof cmd,
        "sed -e '1s/\"te_version\":\"2.20.2\"/\"te_version\":\"2.20\\\\u001b]0;pwned\\\\u0007\","
        "\"host\":\"h\\\\u001b[2Jx\"/' -e '2s/\"label\":\"[^\"]*\"/\"label\":"
        "\"L\\\\u001b[31mred\\\\u009b\"/' '%s/traces/recompute-rht.jsonl' > '%s' && "
        "%s import '%s' -o '%s' 2>/dev/null",
        FT_SOURCE_DIR, src, cli, src, p);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    static const char *const cmds[] = {"info '%s'", "replay '%s' --explain --policy te-3410",
                                       "sql '%s' 'SELECT label FROM fusers'"};
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
        char c[1500];
        snprintf(c, sizeof c, cmds[k], p);
        ft_buf out = {0};
        snprintf(cmd, sizeof cmd, "script -qec \"%s %s 2>/dev/null\" /dev/null", cli, c);
        tu_sh_buf(cmd, &out);
        const char *o = (const char *)out.data;
        if (memchr(o, 0x1b, out.len) || strstr(o, "\xc2\x9b")) fail_msg("%s: raw escapes", c);
        if (!strstr(o, k == 0 ? "\\x1b]0;pwned\\x07" : "L\\x1b[31mred\\u009b"))
            fail_msg("%s: %s", c, o);
        ft_buf_free(&out);
        /* a pipe: the bytes as they are */
        snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", cli, c);
        tu_sh_buf(cmd, &out);
        assert_non_null(memchr(out.data, 0x1b, out.len));
        ft_buf_free(&out);
    }
}

/* ---- messages that name the cause ----------------------------------------------------------- */
/* A small tmpfs at dir (size in KiB); 0 when this machine does not allow it (not root). */
static int mount_small(const char *dir, int kib)
{
    char cmd[3000];
    snprintf(cmd, sizeof cmd,
             "(umount '%s' 2>/dev/null; mkdir -p '%s' && mount -t tmpfs -o size=%dk tmpfs '%s') "
             ">/dev/null 2>&1",
             dir, dir, kib, dir);
    return tu_sh(cmd, NULL, 0) == 0;
}

/* A full disk while import closes its trace, and under --html, says "No space left on device"
 * and leaves nothing behind. */
static void test_full_disk_named(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char full[600], src[600], trace[600], cmd[3000], out[4096];
    tmp_path(full, sizeof full, "full");
    tmp_path(src, sizeof src, "full.jsonl");
    tmp_path(trace, sizeof trace, "full.ftdb");
    if (!mount_small(full, 64)) skip();
    snprintf(cmd, sizeof cmd,
             "%s synth rht-switch --set experts=8 --seed 7 -o '%s' 2>/dev/null && "
             "%s export '%s' -o '%s'",
             cli, trace, cli, trace, src);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    int at_close = 0, failed = 0;
    for (int kib = 64; kib <= 256; kib += 8) {
        assert_true(mount_small(full, kib));
        snprintf(cmd, sizeof cmd, "%s import '%s' -o '%s/x.ftdb' 2>&1", cli, src, full);
        tu_sh(cmd, out, sizeof out);
        if (strstr(out, " backward events, ")) continue; /* it fit */
        failed++;
        if (!strstr(out, "No space left on device")) fail_msg("%d KiB: %s", kib, out);
        char ls[1000];
        snprintf(cmd, sizeof cmd, "ls -A '%s'", full);
        assert_int_equal(tu_sh(cmd, ls, sizeof ls), 0);
        if (ls[0]) fail_msg("%d KiB: left behind: %s", kib, ls);
        at_close += strstr(out, "closing the trace failed") != NULL;
    }
    assert_true(failed > 0);
    assert_true(at_close > 0);
    assert_true(mount_small(full, 16));
    snprintf(cmd, sizeof cmd, "%s replay '%s' --html '%s/r.html' 2>&1 >/dev/null", cli, trace,
             full);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 3);
    if (!strstr(out, "writing the HTML report failed: No space left on device"))
        fail_msg("replay --html said: %s", out);
    snprintf(cmd, sizeof cmd, "umount '%s'", full);
    tu_sh(cmd, NULL, 0);
}

/* A zstd frame with a window over 128 MiB: refused with the way to recompress it. */
static void test_zstd_window_hint(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli || tu_sh("command -v zstd >/dev/null", NULL, 0)) skip();
    char z[600], cmd[3000], out[4096];
    tmp_path(z, sizeof z, "long.jsonl.zst");
    snprintf(cmd, sizeof cmd, "cat '%s/traces/recompute-rht.jsonl' | zstd -q --long=30 -c > '%s'",
             FT_SOURCE_DIR, z);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    snprintf(cmd, sizeof cmd, "%s import '%s' -o '%s.ftdb' 2>&1", cli, z, z);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    if (!strstr(out, "window over 128 MiB") || !strstr(out, "without --long"))
        fail_msg("import said: %s", out);
}

/* ---- a damaged split section ------------------------------------------------------------------
 */
/* The last byte of chunk 2's stored data (inside its split frames) flipped: info, replay and
 * sql, which need no split sizes there, exit 1 with verify's message. */
static void test_damaged_split_section_refused(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char p[600];
    tmp_path(p, sizeof p, "split.ftdb");
    record(p, 300, NULL);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    sqlite3_blob *b = NULL;
    assert_int_equal(sqlite3_blob_open(db, "main", "chunks", "data", 2, 1, &b), SQLITE_OK);
    int n = sqlite3_blob_bytes(b);
    uint8_t last;
    assert_int_equal(sqlite3_blob_read(b, &last, 1, n - 1), SQLITE_OK);
    last ^= 0x55;
    assert_int_equal(sqlite3_blob_write(b, &last, 1, n - 1), SQLITE_OK);
    sqlite3_blob_close(b);
    sqlite3_close(db);
    char cmd[2000], vout[4096], out[4096];
    snprintf(cmd, sizeof cmd, "%s verify '%s' 2>&1 >/dev/null", cli, p);
    assert_int_equal(tu_sh(cmd, vout, sizeof vout), 1);
    const char *why = strstr(vout, "chunk 2");
    if (!why || !strstr(why, "split")) fail_msg("verify said: %s", vout);
    vout[strcspn(vout, "\n")] = '\0';
    static const char *const cmds[] = {"info '%s'", "replay '%s'", "replay '%s' --json",
                                       "sql '%s' 'SELECT count(*) FROM calls'"};
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
        char c[1500];
        snprintf(c, sizeof c, cmds[k], p);
        snprintf(cmd, sizeof cmd, "%s %s 2>&1 >/dev/null", cli, c);
        int st = tu_sh(cmd, out, sizeof out);
        if (st != 1 || !strstr(out, why)) fail_msg("%s: exit %d: %s", c, st, out);
    }
}

/* ---- removing a trace ----------------------------------------------------------------------- */
static void test_trace_remove_side_files(void **state)
{
    (void)state;
    char p[600];
    tmp_path(p, sizeof p, "rm.ftdb");
    static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
    for (int i = 0; i < 4; i++) {
        char f[700];
        snprintf(f, sizeof f, "%s%s", p, suffix[i]);
        int fd = open(f, O_CREAT | O_WRONLY, 0644);
        assert_true(fd >= 0);
        close(fd);
    }
    ft_trace_remove(p);
    for (int i = 0; i < 4; i++)
        if (tu_exists(p, suffix[i])) fail_msg("%s%s is left", p, suffix[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seal_stale_own_wal),
        cmocka_unit_test(test_seal_foreign_wal),
        cmocka_unit_test(test_seal_foreign_journal),
        cmocka_unit_test(test_seal_plain_db_untouched),
        cmocka_unit_test(test_sql_sealed_ignores_foreign_wal),
        cmocka_unit_test(test_extension_refuses_side_files),
        cmocka_unit_test(test_sql_refuses_shadowing_view),
        cmocka_unit_test(test_sql_seq_bounds_big_doubles),
        cmocka_unit_test(test_trace_remove_side_files),
        cmocka_unit_test(test_truncated_while_read),
        cmocka_unit_test(test_overlapping_chunks_refused),
        cmocka_unit_test(test_terminal_output_escaped),
        cmocka_unit_test(test_full_disk_named),
        cmocka_unit_test(test_zstd_window_hint),
        cmocka_unit_test(test_damaged_split_section_refused),
        cmocka_unit_test(test_killed_close_leaves_no_copy),
        cmocka_unit_test(test_sweeper_removes_only_its_own),
        cmocka_unit_test(test_concurrent_writers_one_output),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
