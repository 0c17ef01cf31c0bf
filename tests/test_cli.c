/*
 * test_cli.c - the `fusertrace` command end to end: runs the binary named by the FT_CLI
 * environment variable through posix_spawn (no shell), in a fresh directory under FT_BINARY_DIR,
 * and checks exit statuses, messages and the files left behind.
 *
 * Covered: import/export round trip of every canned stream (multi-chunk, stdin, stdout), import
 * failures (exit 2, message naming line and field, no output and no temporary left, an existing
 * output untouched), usage errors, export of damaged traces (exit 1 naming the chunk or table),
 * info and verify exit codes, replay --numerics (text and JSON sections, usage errors, the CUDA
 * back end's exit 3 without a device); outputs (one that is an input refused and the input
 * intact, -f to replace, symlinks followed, FIFOs and devices written in place, a full device
 * failing, nothing left by a replay that fails mid-way), JSON purity of stdout, one exit status
 * and message per mistake, --version, help CMD, --opt=value and --.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_common.h"
#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <jansson.h>
#include <pthread.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

extern char **environ;

/* ---- fixture: a scratch directory per test ------------------------------------------------ */
typedef struct fx {
    char dir[1024];
    char err[8192];      /* stderr of the last run */
    char paths[4][2048]; /* in_dir results, used in turn */
    int next;
} fx;

/* dir/name; the result stays valid for the next three calls */
static const char *in_dir(fx *f, const char *name)
{
    char *p = f->paths[f->next++ % 4];
    size_t n = strlen(f->dir); /* < sizeof f->dir, well below sizeof f->paths[0] */
    memcpy(p, f->dir, n);
    p[n] = '/';
    ft_strlcpy(p + n + 1, name, sizeof f->paths[0] - n - 1);
    return p;
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    if (!f) return -1;
    snprintf(f->dir, sizeof f->dir, "%s/test_cli.XXXXXX", FT_BINARY_DIR);
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    tu_dir_remove(f->dir);
    free(f);
    return 0;
}

/* Names in the scratch directory, sorted, space-separated (to see what was left behind). */
static void listing(fx *f, char *out, size_t cap)
{
    char names[64][256];
    int n = 0;
    DIR *d = opendir(f->dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) && n < 64)
        if (e->d_name[0] != '.') ft_strlcpy(names[n++], e->d_name, sizeof names[0]);
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort */
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char t[256];
            memcpy(t, names[j], sizeof t);
            memcpy(names[j], names[j - 1], sizeof t);
            memcpy(names[j - 1], t, sizeof t);
        }
    out[0] = '\0';
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len +=
            (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%s", i ? " " : "", names[i]);
}

/* Run `fusertrace ARGS...` (NULL-terminated) with stdin from in_path (or /dev/null) and stdout
 * to out_path (or /dev/null); stderr lands in f->err. Returns the exit status. */
static int run(fx *f, const char *in_path, const char *out_path, ...)
{
    const char *cli = getenv("FT_CLI");
    assert_non_null(cli);
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)cli;
    va_list ap;
    va_start(ap, out_path);
    const char *a;
    while ((a = va_arg(ap, const char *)) && argc < 31)
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;

    char err_path[1400];
    snprintf(err_path, sizeof err_path, "%s/.stderr", f->dir);
    posix_spawn_file_actions_t fa;
    assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
    posix_spawn_file_actions_addopen(&fa, 0, in_path ? in_path : "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path ? out_path : "/dev/null",
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, cli, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    assert_int_equal(rc, 0);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        assert_int_equal(errno, EINTR);

    f->err[0] = '\0';
    FILE *e = fopen(err_path, "r");
    if (e) {
        size_t n = fread(f->err, 1, sizeof f->err - 1, e);
        f->err[n] = '\0';
        fclose(e);
    }
    unlink(err_path);
    if (!WIFEXITED(status)) {
        print_error("%s %s: killed by signal %d; stderr: %s\n", cli, argv[1], WTERMSIG(status),
                    f->err);
        fail();
    }
    return WEXITSTATUS(status);
}

static void put_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Two JSONL files hold the same records (parsed JSON, in order). */
static void assert_same_jsonl(const char *a_path, const char *b_path)
{
    char *a = tu_read_file(a_path, NULL), *b = tu_read_file(b_path, NULL);
    assert_non_null(a);
    assert_non_null(b);
    char name[2100];
    snprintf(name, sizeof name, "%s vs %s", a_path, b_path);
    tu_assert_same_records(name, a, b);
    free(a);
    free(b);
}

#define BAD_STREAM                                                                                 \
    "{\"t\":\"header\",\"format\":\"fusertrace-capture\",\"version\":1}\n"                         \
    "{\"t\":\"fuser\",\"id\":1,\"ops\":[{\"type\":\"GELU\"}]}\n"                                   \
    "{\"t\":\"call\",\"seq\":0,\"fuser\":1,\"recipe\":null,\"grad\":true,\"input_rg\":true,"       \
    "\"op_rg\":[true],\"device\":0}\n"                                                             \
    "{\"t\":\"call\",\"seq\":1,\"fuser\":1,\"recipe\":null,\"grad\":true,\"input_rg\":true,"       \
    "\"op_rg\":[true,false],\"device\":0}\n"

/* ---- import / export ---------------------------------------------------------------------- */
static void test_cli_import_export_round_trip(void **state)
{
    fx *f = *state;
    DIR *d = opendir(FT_SOURCE_DIR "/traces");
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    char src[1024], db[1400], out[1400], out2[1400];
    while ((e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (nl < 7 || strcmp(e->d_name + nl - 6, ".jsonl")) continue;
        snprintf(src, sizeof src, "%s/traces/%s", FT_SOURCE_DIR, e->d_name);
        snprintf(db, sizeof db, "%s/%s.ftdb", f->dir, e->d_name);
        snprintf(out, sizeof out, "%s/%s.out", f->dir, e->d_name);
        snprintf(out2, sizeof out2, "%s/%s.stdout", f->dir, e->d_name);
        /* small chunks so that records cross chunk boundaries */
        int rc = run(f, NULL, NULL, "import", src, "-o", db, "--chunk-calls", "3", NULL);
        if (rc) print_error("import %s: %s\n", e->d_name, f->err);
        assert_int_equal(rc, 0);
        rc = run(f, NULL, NULL, "export", db, "-o", out, NULL);
        if (rc) print_error("export %s: %s\n", e->d_name, f->err);
        assert_int_equal(rc, 0);
        assert_same_jsonl(src, out);
        assert_int_equal(run(f, NULL, out2, "export", db, NULL), 0); /* to stdout */
        assert_same_jsonl(src, out2);
        unlink(db);
        unlink(out);
        unlink(out2);
        n++;
    }
    closedir(d);
    assert_true(n >= 3);
}

static void test_cli_import_stdin(void **state)
{
    fx *f = *state;
    const char *src = FT_SOURCE_DIR "/traces/recompute-rht.jsonl";
    char db[1400], out[1400];
    snprintf(db, sizeof db, "%s/s.ftdb", f->dir);
    snprintf(out, sizeof out, "%s/s.jsonl", f->dir);
    assert_int_equal(run(f, src, NULL, "import", "-", "-o", db, NULL), 0);
    assert_int_equal(run(f, NULL, NULL, "export", db, "-o", "-", NULL), 0);
    assert_int_equal(run(f, NULL, out, "export", db, "-o", "-", NULL), 0);
    assert_same_jsonl(src, out);
}

static void test_cli_import_malformed_leaves_nothing(void **state)
{
    fx *f = *state;
    put_file(in_dir(f, "bad.jsonl"), BAD_STREAM);
    char bad[1400], db[1400];
    snprintf(bad, sizeof bad, "%s/bad.jsonl", f->dir);
    snprintf(db, sizeof db, "%s/out.ftdb", f->dir);
    assert_int_equal(run(f, NULL, NULL, "import", bad, "-o", db, NULL), 2);
    assert_non_null(strstr(f->err, "bad.jsonl:4: field 'op_rg'"));
    char ls[4096];
    listing(f, ls, sizeof ls);
    assert_string_equal(ls, "bad.jsonl"); /* no output, no temporary, no SQLite side file */
    /* from stdin too */
    assert_int_equal(run(f, bad, NULL, "import", "-", "-o", db, NULL), 2);
    assert_non_null(strstr(f->err, "<stdin>:4: field 'op_rg'"));
    listing(f, ls, sizeof ls);
    assert_string_equal(ls, "bad.jsonl");
}

static void test_cli_import_error_keeps_existing_output(void **state)
{
    fx *f = *state;
    char bad[1400], db[1400];
    snprintf(bad, sizeof bad, "%s/bad.jsonl", f->dir);
    snprintf(db, sizeof db, "%s/out.ftdb", f->dir);
    put_file(bad, BAD_STREAM);
    assert_int_equal(
        run(f, NULL, NULL, "import", FT_SOURCE_DIR "/traces/spec-example.jsonl", "-o", db, NULL),
        0);
    size_t len0, len1;
    char *before = tu_read_file(db, &len0);
    assert_int_equal(run(f, NULL, NULL, "import", bad, "-o", db, NULL), 2);
    char *after = tu_read_file(db, &len1);
    assert_non_null(after);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    free(before);
    free(after);
    char ls[4096];
    listing(f, ls, sizeof ls);
    assert_string_equal(ls, "bad.jsonl out.ftdb");
    /* a successful import replaces it, with -f only */
    assert_int_equal(
        run(f, NULL, NULL, "import", FT_SOURCE_DIR "/traces/all-fields.jsonl", "-o", db, NULL), 2);
    assert_non_null(strstr(f->err, "-f (--force)"));
    assert_int_equal(run(f, NULL, NULL, "import", FT_SOURCE_DIR "/traces/all-fields.jsonl", "-o",
                         db, "-f", NULL),
                     0);
    listing(f, ls, sizeof ls);
    assert_string_equal(ls, "bad.jsonl out.ftdb");
}

static void test_cli_import_usage_errors(void **state)
{
    fx *f = *state;
    const char *src = FT_SOURCE_DIR "/traces/spec-example.jsonl";
    assert_int_equal(run(f, NULL, NULL, "import", src, NULL), 2); /* no -o */
    assert_non_null(strstr(f->err, "usage"));
    assert_int_equal(run(f, NULL, NULL, "import", src, "-o", in_dir(f, "x.ftdb"), "--bogus", NULL),
                     2);
    assert_non_null(strstr(f->err, "--bogus"));
    assert_int_equal(
        run(f, NULL, NULL, "import", in_dir(f, "missing.jsonl"), "-o", in_dir(f, "x.ftdb"), NULL),
        2);
    assert_non_null(strstr(f->err, "missing.jsonl"));
    assert_int_equal(run(f, NULL, NULL, "import", src, "-o", "-", NULL), 2);
    assert_int_equal(run(f, NULL, NULL, "import", src, "-o", in_dir(f, "no/such/dir.ftdb"), NULL),
                     2);
    assert_non_null(strstr(f->err, "no/such/dir.ftdb"));
    assert_int_equal(run(f, NULL, NULL, "export", FT_SOURCE_DIR "/traces/spec-example.jsonl", "-o",
                         in_dir(f, "x.jsonl"), NULL),
                     2); /* not a trace */
    assert_int_equal(run(f, NULL, NULL, "import", "--help", NULL), 0);
    assert_int_equal(run(f, NULL, NULL, "export", NULL), 2);
    assert_int_equal(run(f, NULL, NULL, "export", in_dir(f, "missing.ftdb"), NULL), 2);
    assert_int_equal(run(f, NULL, NULL, "no-such-command", NULL), 2);
    char ls[4096];
    listing(f, ls, sizeof ls);
    assert_string_equal(ls, "");
}

static int has_tmp_file(fx *f)
{
    char ls[4096];
    listing(f, ls, sizeof ls);
    return strstr(ls, "out.ftdb.tmp-") != NULL;
}

/* SIGTERM while import waits for more input removes its temporary file. */
static void test_cli_import_signal_leaves_nothing(void **state)
{
    fx *f = *state;
    const char *cli = getenv("FT_CLI");
    int p[2];
    assert_int_equal(pipe(p), 0);
    char a_import[] = "import", a_stdin[] = "-", a_o[] = "-o";
    char *argv[] = {(char *)cli, a_import, a_stdin, a_o, (char *)in_dir(f, "out.ftdb"), NULL};
    posix_spawn_file_actions_t fa;
    assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
    posix_spawn_file_actions_adddup2(&fa, p[0], 0);
    posix_spawn_file_actions_addclose(&fa, p[1]);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, cli, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(p[0]);
    const char *head = "{\"t\":\"header\",\"format\":\"fusertrace-capture\",\"version\":1}\n";
    assert_int_equal(write(p[1], head, strlen(head)), (ssize_t)strlen(head));
    for (int i = 0; i < 500 && !has_tmp_file(f); i++) /* up to 5 s for the recorder to start */
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    assert_true(has_tmp_file(f));
    kill(pid, SIGTERM);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        assert_int_equal(errno, EINTR);
    close(p[1]);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGTERM);
    char ls[4096];
    listing(f, ls, sizeof ls);
    assert_string_equal(ls, "");
}

/* ---- damaged traces ------------------------------------------------------------------------ */
/* Import spec-example into name and damage it with sql (run through the SQLite API). */
static void make_damaged(fx *f, const char *name, int flip_chunk, const char *sql)
{
    char db[1400];
    snprintf(db, sizeof db, "%s/%s", f->dir, name);
    assert_int_equal(
        run(f, NULL, NULL, "import", FT_SOURCE_DIR "/traces/recompute-rht.jsonl", "-o", db, NULL),
        0);
    sqlite3 *s = NULL;
    assert_int_equal(sqlite3_open(db, &s), SQLITE_OK);
    if (flip_chunk) { /* flip one byte in the middle of the first chunk's data */
        sqlite3_stmt *q = NULL;
        assert_int_equal(
            sqlite3_prepare_v2(s, "SELECT id, data FROM chunks ORDER BY id LIMIT 1", -1, &q, NULL),
            SQLITE_OK);
        assert_int_equal(sqlite3_step(q), SQLITE_ROW);
        sqlite3_int64 id = sqlite3_column_int64(q, 0);
        int n = sqlite3_column_bytes(q, 1);
        assert_true(n > 8);
        unsigned char *d = malloc((size_t)n);
        assert_non_null(d);
        memcpy(d, sqlite3_column_blob(q, 1), (size_t)n);
        sqlite3_finalize(q);
        d[n / 2] ^= 0x55;
        assert_int_equal(
            sqlite3_prepare_v2(s, "UPDATE chunks SET data = ?1 WHERE id = ?2", -1, &q, NULL),
            SQLITE_OK);
        sqlite3_bind_blob(q, 1, d, n, SQLITE_TRANSIENT);
        sqlite3_bind_int64(q, 2, id);
        assert_int_equal(sqlite3_step(q), SQLITE_DONE);
        sqlite3_finalize(q);
        free(d);
    }
    if (sql) assert_int_equal(sqlite3_exec(s, sql, NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_close(s), SQLITE_OK);
}

static void test_cli_export_damaged_chunk(void **state)
{
    fx *f = *state;
    make_damaged(f, "d.ftdb", 1, NULL);
    char out[1400];
    snprintf(out, sizeof out, "%s/d.jsonl", f->dir);
    assert_int_equal(run(f, NULL, NULL, "export", in_dir(f, "d.ftdb"), "-o", out, NULL), 1);
    assert_non_null(strstr(f->err, "d.ftdb: chunk"));
    assert_false(exists(out));
    char ls[4096];
    listing(f, ls, sizeof ls);
    assert_string_equal(ls, "d.ftdb");
}

static void test_cli_export_damaged_table(void **state)
{
    fx *f = *state;
    make_damaged(f, "d.ftdb", 0,
                 "UPDATE fusers SET label = 'tampered' WHERE id = (SELECT min(id) FROM fusers)");
    assert_int_equal(run(f, NULL, NULL, "export", in_dir(f, "d.ftdb"), NULL), 1);
    assert_non_null(strstr(f->err, "fusers"));
}

static void test_cli_export_not_a_trace(void **state)
{
    fx *f = *state;
    put_file(in_dir(f, "x.ftdb"), "this is not a database\n");
    assert_int_equal(run(f, NULL, NULL, "export", in_dir(f, "x.ftdb"), NULL), 2);
    assert_non_null(strstr(f->err, "not a fusertrace trace"));
}

/* ---- info / verify ------------------------------------------------------------------------- */
static void test_cli_info_and_verify(void **state)
{
    fx *f = *state;
    const char *db = FT_SOURCE_DIR "/traces/recompute-rht.jsonl";
    char t[1400];
    snprintf(t, sizeof t, "%s/t.ftdb", f->dir);
    assert_int_equal(run(f, NULL, NULL, "import", db, "-o", t, NULL), 0);
    assert_int_equal(run(f, NULL, NULL, "info", t, NULL), 0);
    assert_int_equal(run(f, NULL, NULL, "info", t, "--json", NULL), 0);
    assert_int_equal(run(f, NULL, NULL, "verify", t, NULL), 0);
    make_damaged(f, "d.ftdb", 1, NULL);
    assert_int_equal(run(f, NULL, NULL, "verify", in_dir(f, "d.ftdb"), NULL), 1);
    assert_non_null(strstr(f->err, "chunk"));
    put_file(in_dir(f, "x.ftdb"), "this is not a database\n");
    assert_int_equal(run(f, NULL, NULL, "info", in_dir(f, "x.ftdb"), NULL), 2);
    assert_int_equal(run(f, NULL, NULL, "verify", in_dir(f, "x.ftdb"), NULL), 2);
}

/* ---- replay --numerics ------------------------------------------------------------------- */
static void test_cli_replay_numerics(void **state)
{
    fx *f = *state;
    char t[1400], out[1400];
    snprintf(t, sizeof t, "%s/rs.ftdb", f->dir);
    snprintf(out, sizeof out, "%s/out.txt", f->dir);
    assert_int_equal(run(f, NULL, NULL, "synth", "rht-switch", "--set", "steps=2", "-o", t, NULL),
                     0);

    /* text: the replay summary, then the numerics section with both bands */
    int rc = run(f, NULL, out, "replay", t, "--numerics", "cpu", "--shrink", "8", "--sample", "6",
                 "--threads", "2", NULL);
    if (rc) print_error("stderr: %s\n", f->err);
    assert_int_equal(rc, 0);
    char *text = tu_read_file(out, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "te-3410"));
    const char *sec = strstr(text, "numerics (cpu): ");
    assert_non_null(sec);
    unsigned run_n = 0, seen_n = 0;
    assert_int_equal(sscanf(sec, "numerics (cpu): %u of %u", &run_n, &seen_n), 2);
    assert_true(run_n > 0 && run_n <= 6 && seen_n > run_n);
    assert_non_null(strstr(sec, "harmless band (fused vs unfused, same quantization): ["));
    assert_non_null(strstr(sec, "quant band"));
    assert_non_null(strstr(sec, "rebuild-always"));
    free(text);

    /* JSON: one object holding the replay report and a "numerics" object */
    rc = run(f, NULL, out, "replay", t, "--numerics", "cpu", "--shrink", "16", "--all", "--json",
             "--policy", "te-3410,rebuild-always", NULL);
    assert_int_equal(rc, 0);
    json_error_t je;
    json_t *o = json_load_file(out, 0, &je);
    if (!o) print_error("%s: %s (line %d)\n", out, je.text, je.line);
    assert_non_null(o);
    assert_non_null(json_object_get(o, "policies"));
    json_t *nx = json_object_get(o, "numerics");
    assert_true(json_is_object(nx));
    assert_string_equal(json_string_value(json_object_get(nx, "backend")), "cpu");
    assert_int_equal(json_integer_value(json_object_get(nx, "calls_run")),
                     json_integer_value(json_object_get(nx, "calls_seen")));
    assert_true(json_integer_value(json_object_get(nx, "calls_run")) > 6);
    assert_true(json_is_object(json_object_get(nx, "harmless_band")));
    assert_int_equal(json_array_size(json_object_get(nx, "policies")), 2);
    json_decref(o);

    /* bad values: exit 2 with a message */
    static const char *const bad[][3] = {
        {"--numerics", "gpu", NULL},    {"--numerics", "cpu", "--shrink"}, {"--sample", "4", NULL},
        {"--numerics", "cpu", "--csv"}, {"--numerics", NULL, NULL},
    };
    for (size_t i = 0; i < FT_ARRAY_LEN(bad); i++) {
        rc = run(f, NULL, NULL, "replay", t, bad[i][0], bad[i][1], bad[i][2], NULL);
        if (rc != 2) print_error("case %zu: exit %d, stderr: %s\n", i, rc, f->err);
        assert_int_equal(rc, 2);
        assert_non_null(strstr(f->err, "fusertrace replay:"));
    }
    static const char *const bad_val[][2] = {
        {"--shrink", "0"}, {"--sample", "0"}, {"--sample", "x"}, {"--seed", "-1"}};
    for (size_t i = 0; i < FT_ARRAY_LEN(bad_val); i++) {
        rc = run(f, NULL, NULL, "replay", t, "--numerics", "cpu", bad_val[i][0], bad_val[i][1],
                 NULL);
        if (rc != 2) print_error("case %s %s: exit %d\n", bad_val[i][0], bad_val[i][1], rc);
        assert_int_equal(rc, 2);
        assert_non_null(strstr(f->err, bad_val[i][0]));
    }
    rc = run(f, NULL, NULL, "replay", t, "--numerics", "cpu", "--sample", "3", "--all", NULL);
    assert_int_equal(rc, 2);
}

/* --numerics cuda without a device (or a build without CUDA): exit 3, a message, nothing on
 * stdout; with a device it runs like the CPU path. */
static void test_cli_replay_numerics_cuda(void **state)
{
    fx *f = *state;
    char t[1400], out[1400];
    snprintf(t, sizeof t, "%s/rs.ftdb", f->dir);
    snprintf(out, sizeof out, "%s/out.txt", f->dir);
    assert_int_equal(run(f, NULL, NULL, "synth", "rht-switch", "--set", "steps=2", "-o", t, NULL),
                     0);
    int rc = run(f, NULL, out, "replay", t, "--numerics", "cuda", "--shrink", "8", "--sample", "4",
                 NULL);
    size_t len = 0;
    char *text = tu_read_file(out, &len);
    assert_non_null(text);
    if (rc == 3) {
        print_message("no device: %s", f->err);
        assert_non_null(strstr(f->err, "cuda"));
        assert_non_null(strstr(f->err, "--numerics cpu"));
        assert_int_equal(len, 0);
    } else {
        if (rc) print_error("exit %d, stderr: %s\n", rc, f->err);
        assert_int_equal(rc, 0);
        assert_non_null(strstr(text, "numerics (cuda): "));
        assert_non_null(strstr(text, "MLP runs on the device"));
        assert_non_null(strstr(text, "harmless band"));
    }
    free(text);
}

/* ---- outputs: nothing an input or half-written ----------------------------------------- */
static size_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (size_t)st.st_size;
}

/* A trace of the demo scenario at dir/name. */
static const char *make_trace(fx *f, const char *name)
{
    const char *t = in_dir(f, name);
    int rc = run(f, NULL, NULL, "synth", "rht-switch", "--set", "steps=2", "-o", t, NULL);
    if (rc) print_error("synth: %s\n", f->err);
    assert_int_equal(rc, 0);
    return t;
}

static void test_cli_output_that_is_an_input_is_refused(void **state)
{
    fx *f = *state;
    char t[2048], link[2048], jsonl[2048];
    ft_strlcpy(t, make_trace(f, "t.ftdb"), sizeof t);
    ft_strlcpy(link, in_dir(f, "link.ftdb"), sizeof link);
    ft_strlcpy(jsonl, in_dir(f, "t.jsonl"), sizeof jsonl);
    assert_int_equal(symlink("t.ftdb", link), 0);
    size_t n0;
    char *before = tu_read_file(t, &n0);
    assert_non_null(before);
    static const char *const how[][4] = {
        {"replay", "--per-call", NULL, NULL},
        {"replay", "--numerics", "cpu", "--per-call"},
        {"export", "-o", NULL, NULL},
        {"export", "-f", "-o", NULL},
    };
    for (size_t i = 0; i < FT_ARRAY_LEN(how); i++)
        for (int via_link = 0; via_link < 2; via_link++) {
            const char *argv[8] = {how[i][0], t};
            int n = 2;
            for (int k = 1; k < 4 && how[i][k]; k++)
                argv[n++] = how[i][k];
            argv[n++] = via_link ? link : t;
            int rc = run(f, NULL, NULL, argv[0], argv[1], argv[2], argv[3], argv[4], argv[5], NULL);
            if (rc != 2) print_error("case %zu/%d: exit %d: %s\n", i, via_link, rc, f->err);
            assert_int_equal(rc, 2);
            assert_non_null(strstr(f->err, "is also an input; not overwriting it"));
            size_t n1;
            char *after = tu_read_file(t, &n1);
            assert_non_null(after);
            assert_int_equal(n0, n1);
            assert_memory_equal(before, after, n0);
            free(after);
        }
    free(before);
    /* import onto its own input, and replay of several traces onto the second */
    assert_int_equal(run(f, NULL, NULL, "export", t, "-o", jsonl, NULL), 0);
    size_t nj = file_size(jsonl);
    assert_int_equal(run(f, NULL, NULL, "import", jsonl, "-o", jsonl, "-f", NULL), 2);
    assert_non_null(strstr(f->err, "is also an input"));
    assert_int_equal(file_size(jsonl), nj);
    /* stdout opened onto an input (`replay T >> T`): refused, T untouched */
    {
        int fd = open(t, O_WRONLY | O_APPEND);
        assert_true(fd >= 0);
        const char *cli = getenv("FT_CLI");
        char a_replay[] = "replay", a_info[] = "info";
        char *av[][3] = {{(char *)cli, a_replay, t}, {(char *)cli, a_info, t}};
        for (int k = 0; k < 2; k++) {
            char *argv[] = {av[k][0], av[k][1], av[k][2], NULL};
            posix_spawn_file_actions_t fa;
            assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
            posix_spawn_file_actions_adddup2(&fa, fd, 1);
            posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
            pid_t pid;
            assert_int_equal(posix_spawn(&pid, cli, &fa, NULL, argv, environ), 0);
            posix_spawn_file_actions_destroy(&fa);
            int status;
            while (waitpid(pid, &status, 0) < 0)
                assert_int_equal(errno, EINTR);
            assert_true(WIFEXITED(status));
            assert_int_equal(WEXITSTATUS(status), 2);
        }
        close(fd);
        size_t n1;
        char *after = tu_read_file(t, &n1);
        assert_non_null(after);
        assert_int_equal(n1, n0);
        free(after);
    }
    char t2[2048];
    ft_strlcpy(t2, make_trace(f, "t2.ftdb"), sizeof t2);
    assert_int_equal(run(f, NULL, NULL, "replay", t, t2, "--per-call", t2, NULL), 2);
    assert_true(file_size(t2) > 0);
    assert_int_equal(run(f, NULL, NULL, "verify", t2, NULL), 0);
    char ls[4096];
    listing(f, ls, sizeof ls);
    assert_string_equal(ls, "link.ftdb t.ftdb t.jsonl t2.ftdb");
}

static void test_cli_output_replace_needs_force(void **state)
{
    fx *f = *state;
    char t[2048], out[2048];
    ft_strlcpy(t, make_trace(f, "t.ftdb"), sizeof t);
    ft_strlcpy(out, in_dir(f, "t.jsonl"), sizeof out);
    assert_int_equal(run(f, NULL, NULL, "synth", "rht-switch", "-o", t, NULL), 2);
    assert_non_null(strstr(f->err, "t.ftdb exists; -f (--force) replaces it"));
    assert_int_equal(run(f, NULL, NULL, "synth", "demo", "-o", t, "--force", NULL), 0);
    assert_int_equal(run(f, NULL, NULL, "verify", t, NULL), 0);
    put_file(out, "old\n");
    assert_int_equal(run(f, NULL, NULL, "export", t, "-o", out, NULL), 2);
    assert_non_null(strstr(f->err, "-f (--force)"));
    assert_int_equal(file_size(out), 4);
    assert_int_equal(run(f, NULL, NULL, "synth", "demo", "--jsonl", out, NULL), 2);
    assert_int_equal(run(f, NULL, NULL, "export", t, "-o", out, "-f", NULL), 0);
    assert_true(file_size(out) > 4);
    /* a -wal left beside a trace's name: not replaced without -f (it would be read into the new
     * file), removed with it */
    char wal[2100];
    snprintf(wal, sizeof wal, "%s/n.ftdb-wal", f->dir);
    put_file(wal, "stale");
    assert_int_equal(run(f, NULL, NULL, "import", out, "-o", in_dir(f, "n.ftdb"), NULL), 2);
    assert_non_null(strstr(f->err, "n.ftdb-wal exists"));
    assert_int_equal(run(f, NULL, NULL, "import", out, "-o", in_dir(f, "n.ftdb"), "-f", NULL), 0);
    assert_false(exists(wal));
    assert_int_equal(run(f, NULL, NULL, "verify", in_dir(f, "n.ftdb"), NULL), 0);
}

/* -o onto a symlink replaces the link's target, and the link stays a link. */
static void test_cli_output_symlink_followed(void **state)
{
    fx *f = *state;
    char t[2048], target[2048], link[2048];
    ft_strlcpy(t, make_trace(f, "t.ftdb"), sizeof t);
    ft_strlcpy(target, in_dir(f, "target.jsonl"), sizeof target);
    ft_strlcpy(link, in_dir(f, "link.jsonl"), sizeof link);
    put_file(target, "old\n");
    assert_int_equal(symlink("target.jsonl", link), 0);
    assert_int_equal(run(f, NULL, NULL, "export", t, "-o", link, "-f", NULL), 0);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_true(file_size(target) > 4);
    assert_int_equal(run(f, NULL, NULL, "import", link, "-o", in_dir(f, "back.ftdb"), NULL), 0);
    /* a per-call file through a link, and a link to nowhere */
    assert_int_equal(run(f, NULL, NULL, "replay", t, "--per-call", link, NULL), 0);
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(symlink("missing/x.jsonl", in_dir(f, "dangling")), 0);
    assert_int_equal(run(f, NULL, NULL, "export", t, "-o", in_dir(f, "dangling"), NULL), 2);
    assert_non_null(strstr(f->err, "dangling"));
    char ls[4096];
    listing(f, ls, sizeof ls);
    assert_string_equal(ls, "back.ftdb dangling link.jsonl t.ftdb target.jsonl");
}

typedef struct fifo_reader {
    const char *path;
    char *data;
    size_t n;
} fifo_reader;

static void *read_fifo(void *arg)
{
    fifo_reader *r = arg;
    FILE *p = fopen(r->path, "rb");
    if (!p) return NULL;
    size_t cap = 1 << 16;
    r->data = malloc(cap);
    size_t got;
    while (r->data && (got = fread(r->data + r->n, 1, cap - r->n, p)) > 0) {
        r->n += got;
        if (r->n == cap) r->data = realloc(r->data, cap *= 2);
    }
    fclose(p);
    return NULL;
}

typedef struct fifo_writer {
    const char *path;
    const char *data;
    size_t n;
} fifo_writer;

static void *write_fifo(void *arg)
{
    fifo_writer *w = arg;
    FILE *p = fopen(w->path, "wb");
    if (!p) return NULL;
    fwrite(w->data, 1, w->n, p);
    fclose(p);
    return NULL;
}

/* A FIFO and a character device are written in place, never replaced by a file. */
static void test_cli_output_fifo_and_device_in_place(void **state)
{
    fx *f = *state;
    char t[2048], fifo[2048], ref[2048];
    ft_strlcpy(t, make_trace(f, "t.ftdb"), sizeof t);
    ft_strlcpy(fifo, in_dir(f, "pipe"), sizeof fifo);
    ft_strlcpy(ref, in_dir(f, "ref.jsonl"), sizeof ref);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(run(f, NULL, NULL, "export", t, "-o", ref, NULL), 0);
    static const char *const kinds[] = {"export", "synth", "replay"};
    for (size_t k = 0; k < FT_ARRAY_LEN(kinds); k++) {
        fifo_reader r = {.path = fifo};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, read_fifo, &r), 0);
        int rc = !strcmp(kinds[k], "export") ? run(f, NULL, NULL, "export", t, "-o", fifo, NULL)
                 : !strcmp(kinds[k], "synth")
                     ? run(f, NULL, NULL, "synth", "rht-switch", "--set", "steps=2", "--jsonl",
                           fifo, NULL)
                     : run(f, NULL, NULL, "replay", t, "--per-call", fifo, NULL);
        assert_int_equal(pthread_join(th, NULL), 0);
        if (rc) print_error("%s: %s\n", kinds[k], f->err);
        assert_int_equal(rc, 0);
        struct stat st;
        assert_int_equal(lstat(fifo, &st), 0);
        assert_true(S_ISFIFO(st.st_mode));
        assert_non_null(r.data);
        if (k < 2) { /* the same stream a file gets */
            size_t n;
            char *want = tu_read_file(ref, &n);
            assert_non_null(want);
            assert_int_equal(r.n, n);
            assert_memory_equal(r.data, want, n);
            free(want);
        } else {
            assert_true(r.n > 0 && r.data[0] == '{');
        }
        free(r.data);
    }
    /* a FIFO as import's input: checking it does not disturb its writer */
    {
        size_t n;
        char *stream = tu_read_file(ref, &n);
        assert_non_null(stream);
        fifo_writer w = {.path = fifo, .data = stream, .n = n};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, write_fifo, &w), 0);
        int rc = run(f, NULL, NULL, "import", fifo, "-o", in_dir(f, "from-fifo.ftdb"), NULL);
        assert_int_equal(pthread_join(th, NULL), 0);
        if (rc) print_error("import from a FIFO: %s\n", f->err);
        assert_int_equal(rc, 0);
        free(stream);
        assert_int_equal(run(f, NULL, NULL, "verify", in_dir(f, "from-fifo.ftdb"), NULL), 0);
    }
    assert_int_equal(run(f, NULL, NULL, "export", t, "-o", "/dev/null", NULL), 0);
    struct stat st;
    assert_int_equal(stat("/dev/null", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    /* a trace is a database: never onto a FIFO or stdout */
    assert_int_equal(run(f, NULL, NULL, "import", ref, "-o", fifo, NULL), 2);
    assert_non_null(strstr(f->err, "not a regular file"));
    assert_int_equal(run(f, NULL, NULL, "synth", "demo", "-o", "-", NULL), 2);
    assert_non_null(strstr(f->err, "--jsonl -"));
}

/* Every output checked to the end: a full device fails with exit 3 naming the output. */
static void test_cli_output_full_device(void **state)
{
    fx *f = *state;
    if (!exists("/dev/full")) skip();
    char t[2048];
    ft_strlcpy(t, make_trace(f, "t.ftdb"), sizeof t);
    static const char *const to_stdout[][3] = {
        {"info", NULL, NULL},          {"info", "--json", NULL},   {"verify", NULL, NULL},
        {"replay", NULL, NULL},        {"replay", "--json", NULL}, {"export", NULL, NULL},
        {"replay", "--per-call", "-"},
    };
    for (size_t i = 0; i < FT_ARRAY_LEN(to_stdout); i++) {
        int rc =
            run(f, NULL, "/dev/full", to_stdout[i][0], t, to_stdout[i][1], to_stdout[i][2], NULL);
        if (rc != 3) print_error("%s %s: exit %d: %s\n", to_stdout[i][0], t, rc, f->err);
        assert_int_equal(rc, 3);
        assert_non_null(strstr(f->err, "stdout"));
    }
    assert_int_equal(run(f, NULL, "/dev/full", "--version", NULL), 3);
    assert_int_equal(run(f, NULL, "/dev/full", "help", "replay", NULL), 3);
    assert_int_equal(run(f, NULL, NULL, "export", t, "-o", "/dev/full", NULL), 3);
    assert_non_null(strstr(f->err, "writing /dev/full failed"));
    assert_int_equal(run(f, NULL, NULL, "replay", t, "--per-call", "/dev/full", NULL), 3);
    assert_non_null(strstr(f->err, "/dev/full"));
    assert_int_equal(
        run(f, NULL, NULL, "synth", "rht-switch", "--set", "steps=2", "--jsonl", "/dev/full", NULL),
        3);
    assert_non_null(strstr(f->err, "/dev/full"));
}

/* A replay that fails on a damaged chunk after writing per-call lines leaves no file. */
static void test_cli_replay_damaged_leaves_no_per_call(void **state)
{
    fx *f = *state;
    char db[2048], per_call[2048];
    ft_strlcpy(db, in_dir(f, "d.ftdb"), sizeof db);
    ft_strlcpy(per_call, in_dir(f, "calls.jsonl"), sizeof per_call);
    assert_int_equal(run(f, NULL, NULL, "import", FT_SOURCE_DIR "/traces/recompute-rht.jsonl", "-o",
                         db, "--chunk-calls", "2", NULL),
                     0);
    sqlite3 *s = NULL;
    assert_int_equal(sqlite3_open(db, &s), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(s,
                                        "SELECT id, data, (SELECT count(*) FROM chunks) FROM "
                                        "chunks ORDER BY id DESC LIMIT 1",
                                        -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_true(sqlite3_column_int(q, 2) >= 3); /* the damage is after the first chunks */
    sqlite3_int64 id = sqlite3_column_int64(q, 0);
    int n = sqlite3_column_bytes(q, 1);
    unsigned char *d = malloc((size_t)n);
    assert_non_null(d);
    memcpy(d, sqlite3_column_blob(q, 1), (size_t)n);
    sqlite3_finalize(q);
    d[n / 2] ^= 0x55;
    assert_int_equal(
        sqlite3_prepare_v2(s, "UPDATE chunks SET data = ?1 WHERE id = ?2", -1, &q, NULL),
        SQLITE_OK);
    sqlite3_bind_blob(q, 1, d, n, SQLITE_TRANSIENT);
    sqlite3_bind_int64(q, 2, id);
    assert_int_equal(sqlite3_step(q), SQLITE_DONE);
    sqlite3_finalize(q);
    free(d);
    assert_int_equal(sqlite3_close(s), SQLITE_OK);

    char out[2100];
    snprintf(out, sizeof out, "%s/report.txt", f->dir);
    assert_int_equal(
        run(f, NULL, out, "replay", db, "--per-call", per_call, "--threads", "1", NULL), 1);
    assert_non_null(strstr(f->err, "chunk"));
    assert_false(exists(per_call));
    assert_int_equal(file_size(out), 0);
    unlink(out);
    char ls[4096];
    listing(f, ls, sizeof ls);
    assert_string_equal(ls, "d.ftdb");
}

/* ---- stdout carries only the requested format ------------------------------------------- */
static void test_cli_json_stdout_pure(void **state)
{
    fx *f = *state;
    char t[2048], out[2048];
    ft_strlcpy(t, make_trace(f, "t.ftdb"), sizeof t);
    ft_strlcpy(out, in_dir(f, "out.json"), sizeof out);
    json_error_t je;
    /* --explain --json: one JSON document on stdout, the explain lines on stderr */
    assert_int_equal(run(f, NULL, out, "replay", t, "--explain", "--json", NULL), 0);
    json_t *o = json_load_file(out, 0, &je);
    if (!o) print_error("%s: %s (line %d)\n", out, je.text, je.line);
    assert_non_null(o);
    json_decref(o);
    assert_true(strlen(f->err) > 0);
    assert_int_equal(run(f, NULL, out, "replay", t, "--explain", "--json", "--numerics", "cpu",
                         "--shrink", "16", "--sample", "2", NULL),
                     0);
    assert_non_null(o = json_load_file(out, 0, &je));
    assert_non_null(json_object_get(o, "numerics"));
    json_decref(o);
    /* --per-call -: every stdout line is a JSON object; the text report goes to stderr */
    assert_int_equal(run(f, NULL, out, "replay", t, "--per-call", "-", NULL), 0);
    assert_non_null(strstr(f->err, "policy"));
    char *text = tu_read_file(out, NULL);
    assert_non_null(text);
    int lines = 0;
    for (char *p = text, *eol; *p; p = eol + 1) {
        eol = strchr(p, '\n');
        assert_non_null(eol);
        *eol = '\0';
        json_t *line = json_loads(p, 0, &je);
        if (!line) print_error("line %d is not JSON: %.80s\n", lines + 1, p);
        assert_true(json_is_object(line));
        json_decref(line);
        lines++;
    }
    assert_true(lines > 10);
    free(text);
    assert_int_equal(run(f, NULL, NULL, "replay", t, "--per-call", "-", "--json", NULL), 2);
    assert_non_null(strstr(f->err, "both want stdout"));
    /* info --json is JSON too: an object, or an array of them for several traces */
    assert_int_equal(run(f, NULL, out, "info", t, "--json", NULL), 0);
    assert_non_null(o = json_load_file(out, 0, &je));
    assert_true(json_is_object(o));
    json_decref(o);
    assert_int_equal(run(f, NULL, out, "info", t, t, "--json", NULL), 0);
    assert_non_null(o = json_load_file(out, 0, &je));
    assert_int_equal(json_array_size(o), 2);
    json_decref(o);
}

/* ---- one convention ---------------------------------------------------------------------- */
static void test_cli_same_mistake_same_answer(void **state)
{
    fx *f = *state;
    char t[2048], missing[2048];
    ft_strlcpy(t, make_trace(f, "t.ftdb"), sizeof t);
    ft_strlcpy(missing, in_dir(f, "missing.ftdb"), sizeof missing);
    const char *out = in_dir(f, "o.ftdb");
    /* a missing input, a directory, `-` where a trace is wanted: exit 2 and one message */
    static const char *const cmds[] = {"info", "verify", "export", "replay", "seal"};
    char want[2200];
    for (size_t i = 0; i < FT_ARRAY_LEN(cmds); i++) {
        assert_int_equal(run(f, NULL, NULL, cmds[i], missing, NULL), 2);
        snprintf(want, sizeof want, "fusertrace %s: cannot open %s: No such file or directory",
                 cmds[i], missing);
        assert_non_null(strstr(f->err, want));
        assert_int_equal(run(f, NULL, NULL, cmds[i], f->dir, NULL), 2);
        snprintf(want, sizeof want, "fusertrace %s: %s is a directory", cmds[i], f->dir);
        assert_non_null(strstr(f->err, want));
        assert_int_equal(run(f, NULL, NULL, cmds[i], "-", NULL), 2);
        snprintf(want, sizeof want, "fusertrace %s: -: a trace cannot be read from stdin", cmds[i]);
        assert_non_null(strstr(f->err, want));
        assert_int_equal(run(f, NULL, NULL, cmds[i], t, "--no-such-flag", NULL), 2);
        snprintf(want, sizeof want, "fusertrace %s: unknown option '--no-such-flag'", cmds[i]);
        assert_non_null(strstr(f->err, want));
        assert_non_null(strstr(f->err, "usage: fusertrace"));
    }
    assert_int_equal(run(f, NULL, NULL, "import", missing, "-o", out, NULL), 2);
    assert_non_null(strstr(f->err, "cannot open"));
    assert_int_equal(run(f, NULL, NULL, "import", f->dir, "-o", out, NULL), 2);
    assert_non_null(strstr(f->err, "is a directory"));
    /* bad values */
    assert_int_equal(run(f, NULL, NULL, "replay", t, "--capacity", "0", NULL), 2);
    assert_non_null(strstr(f->err, "--capacity: wants an integer >= 1, got '0'"));
    assert_int_equal(run(f, NULL, NULL, "replay", t, "--threads", "x", NULL), 2);
    assert_non_null(strstr(f->err, "--threads"));
    assert_int_equal(run(f, NULL, NULL, "import", t, "-o", out, "--chunk-calls=0", NULL), 2);
    assert_non_null(strstr(f->err, "--chunk-calls"));
    assert_int_equal(run(f, NULL, NULL, "replay", t, "--policy", "nope", NULL), 2);
    assert_int_equal(run(f, NULL, NULL, "synth", "no-such-scenario", "-o", out, NULL), 2);
    assert_int_equal(run(f, NULL, NULL, "replay", t, "--capacity", NULL), 2);
    assert_non_null(strstr(f->err, "--capacity needs a value"));
    /* --opt=value, -oVALUE and flags that take none */
    assert_int_equal(
        run(f, NULL, NULL, "replay", t, "--policy=te-3410", "--capacity=4", "--threads=1", NULL),
        0);
    assert_int_equal(run(f, NULL, NULL, "replay", t, "--json=yes", NULL), 2);
    assert_non_null(strstr(f->err, "--json takes no value"));
    assert_int_equal(run(f, NULL, NULL, "export", t, "-o-", NULL), 0);
    /* `--` ends the options: what follows is a path even if it starts with '-' */
    assert_int_equal(run(f, NULL, NULL, "info", "--", "--json", NULL), 2);
    assert_non_null(strstr(f->err, "cannot open --json"));
    assert_int_equal(run(f, NULL, NULL, "verify", "--", t, NULL), 0);
    /* several files where several make sense */
    assert_int_equal(run(f, NULL, NULL, "verify", t, t, NULL), 0);
    assert_int_equal(run(f, NULL, NULL, "info", t, t, NULL), 0);
    char ls[4096];
    listing(f, ls, sizeof ls);
    assert_string_equal(ls, "t.ftdb");
}

static void test_cli_version_and_help(void **state)
{
    fx *f = *state;
    char out[2048];
    ft_strlcpy(out, in_dir(f, "out.txt"), sizeof out);
    assert_int_equal(run(f, NULL, out, "--version", NULL), 0);
    char *text = tu_read_file(out, NULL);
    assert_non_null(text);
    assert_true(!strncmp(text, "fusertrace ", 11));
    assert_non_null(strstr(text, "trace format"));
    free(text);
    static const char *const cmds[] = {"demo", "import", "export", "info",   "verify",
                                       "seal", "synth",  "replay", "kernels"};
    for (size_t i = 0; i < FT_ARRAY_LEN(cmds); i++) {
        assert_int_equal(run(f, NULL, out, "help", cmds[i], NULL), 0);
        char *h = tu_read_file(out, NULL);
        assert_non_null(h);
        char want[64];
        snprintf(want, sizeof want, "usage: fusertrace %s", cmds[i]);
        assert_non_null(strstr(h, want));
        free(h);
        /* help CMD and CMD --help say the same */
        assert_int_equal(run(f, NULL, in_dir(f, "out2.txt"), cmds[i], "--help", NULL), 0);
        size_t n1, n2;
        char *a = tu_read_file(out, &n1), *b = tu_read_file(in_dir(f, "out2.txt"), &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(a, b, n1);
        free(a);
        free(b);
    }
    assert_int_equal(run(f, NULL, out, "help", "kernels", "quantize", NULL), 0);
    assert_int_equal(run(f, NULL, out, "help", NULL), 0);
    text = tu_read_file(out, NULL);
    assert_non_null(strstr(text, "replay"));
    assert_non_null(strstr(text, "Exit status"));
    free(text);
    assert_int_equal(run(f, NULL, NULL, "help", "nope", NULL), 2);
    assert_non_null(strstr(f->err, "unknown command 'nope'"));
    assert_int_equal(run(f, NULL, NULL, NULL), 2);
}

/* import says what it did, on stderr, in one line. */
static void test_cli_import_summary(void **state)
{
    fx *f = *state;
    assert_int_equal(run(f, NULL, NULL, "import", FT_SOURCE_DIR "/traces/recompute-rht.jsonl", "-o",
                         in_dir(f, "s.ftdb"), NULL),
                     0);
    const char *s = strstr(f->err, "fusertrace import: ");
    assert_non_null(s);
    assert_non_null(strstr(s, " calls, "));
    assert_non_null(strstr(s, " backward events, "));
    assert_int_equal(strchr(s, '\n')[1], '\0'); /* one line */
}

int main(void)
{
    if (!getenv("FT_CLI")) {
        fprintf(stderr, "test_cli: FT_CLI (path of the fusertrace binary) is not set\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cli_import_export_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_import_stdin, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_import_malformed_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_import_error_keeps_existing_output, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cli_import_usage_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_import_signal_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_export_damaged_chunk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_export_damaged_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_export_not_a_trace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_info_and_verify, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_replay_numerics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_replay_numerics_cuda, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_output_that_is_an_input_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cli_output_replace_needs_force, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_output_symlink_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_output_fifo_and_device_in_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_output_full_device, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_replay_damaged_leaves_no_per_call, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cli_json_stdout_pure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_same_mistake_same_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_version_and_help, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_import_summary, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
