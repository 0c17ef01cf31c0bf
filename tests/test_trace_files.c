/*
 * test_trace_files.c - the trace file against its side files, kills, extreme values and scale:
 * a foreign -wal beside a closed trace changes nothing and readers create no file; a recording
 * killed with SIGKILL leaves a main file that holds every committed chunk (a copy of it alone
 * included), which `seal` finishes; a close killed at any moment leaves no hot journal; a
 * damaged -wal is reported, not trimmed; the limits of ft_limits.h hold at record time and
 * round-trip; `info` stays exact and fast (10^5 phases, 5000 op lists, values at the ends of
 * int64); readers exit by cause; the shipped traces' reports run (under UBSan in the ASan pass).
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_limits.h"
#include "ft_recorder.h"
#include "ft_trace.h"
#include "test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#if defined(__SANITIZE_ADDRESS__)
#define SLOW 10 /* the sanitizer build runs about this much slower */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLOW 10
#endif
#endif
#ifndef SLOW
#define SLOW 1
#endif

static char tmpdir[256];

static int setup_dir(void **state)
{
    (void)state;
    return tu_dir_fresh(tmpdir, sizeof tmpdir, "test_trace_files_tmp");
}

static int teardown_dir(void **state)
{
    (void)state;
    return tu_dir_remove(tmpdir);
}

static void tmp_path(char *buf, size_t cap, const char *name)
{
    tu_dir_path(buf, cap, tmpdir, name);
}

/* Names in tmpdir, sorted, as one string. */
static void listing(char *out, size_t cap)
{
    char names[64][128];
    int n = 0;
    DIR *d = opendir(tmpdir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) && n < 64)
        if (e->d_name[0] != '.') ft_strlcpy(names[n++], e->d_name, sizeof names[0]);
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char t[128];
            memcpy(t, names[j], sizeof t);
            memcpy(names[j], names[j - 1], sizeof t);
            memcpy(names[j - 1], t, sizeof t);
        }
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        strncat(out, names[i], cap - strlen(out) - 2);
        strncat(out, " ", cap - strlen(out) - 1);
    }
}

static const char *ops1 = "[{\"type\":\"BasicLinear\"}]";

/* One call of fuser 1 (one op) with seq, a split vector of n_splits values v, and ns. */
static int call1(ft_rec *r, int64_t seq, int64_t ns)
{
    static const uint8_t rg[1] = {1};
    static const int64_t splits[4] = {5, 0, 7, 1};
    return ft_rec_call_flat(r, seq, 1, 0, FT_CF_GRAD | FT_CF_HAS_NS, 0, 1, rg, 4, splits, 0, 0,
                            "fwd", ns, 0);
}

/* Open a recorder on path with chunks of `chunk` records, fuser 1 declared. */
static ft_rec *rec_start(const char *path, uint32_t chunk)
{
    ft_rec_opts o = {chunk, 0};
    ft_rec *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(path, &o, &r, &err), FT_OK);
    assert_int_equal(ft_rec_fuser(r, 1, "layer", ops1), FT_OK);
    return r;
}

static uint64_t calls_in(const char *path, int *rc_out, const char **notice_has)
{
    ft_trace *t = NULL;
    ft_err err = {0};
    int rc = ft_trace_open(path, FT_OPEN_READ, &t, &err);
    if (rc_out) *rc_out = rc;
    if (rc) return 0;
    uint64_t n = ft_trace_n_calls(t);
    if (notice_has) {
        const char *no = ft_trace_notice(t);
        if (*notice_has) {
            assert_non_null(no);
            if (!strstr(no, *notice_has)) fail_msg("notice '%s' lacks '%s'", no, *notice_has);
        } else if (no) {
            fail_msg("unexpected notice '%s'", no);
        }
    }
    ft_err verr = {0};
    int vrc = ft_trace_verify(t, &verr);
    if (vrc) fail_msg("%s: verify: %s", path, ft_err_msg(&verr));
    ft_trace_close(t);
    return n;
}

/* A recorder in a child process, killed with SIGKILL after committing `chunks` chunks of 100
 * calls (and, with in_close, once it has entered ft_rec_close, after delay_us). */
static void record_and_kill(const char *path, int chunks, int in_close, long delay_us)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        ft_rec *r = rec_start(path, 100);
        for (int i = 0; i < chunks * 100; i++)
            if (call1(r, i + 1, 1000 + i)) _exit(2);
        if (write(fds[1], "x", 1) != 1) _exit(3);
        if (in_close) {
            ft_rec_close(r);
            _exit(0);
        }
        for (;;)
            pause();
    }
    close(fds[1]);
    char c;
    assert_int_equal(read(fds[0], &c, 1), 1);
    close(fds[0]);
    if (delay_us) {
        struct timespec ts = {0, delay_us * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
}

/* ---- side files --------------------------------------------------------------------------- */
/* Another database's valid -wal beside a closed trace: every reader ignores it. */
static void test_foreign_wal_ignored(void **state)
{
    (void)state;
    char a[600], other[600], wal_a[700], wal_o[700], before[4096], after[4096];
    tmp_path(a, sizeof a, "closed.ftdb");
    tmp_path(other, sizeof other, "other.ftdb");
    ft_rec *r = rec_start(a, 100);
    for (int i = 0; i < 250; i++)
        assert_int_equal(call1(r, i + 1, i), FT_OK);
    assert_int_equal(ft_rec_close(r), FT_OK);
    assert_false(tu_exists(a, "-wal") || tu_exists(a, "-shm") || tu_exists(a, "-journal"));
    /* a WAL holding other content for a database of the same layout */
    tu_copy_file(a, other);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(other, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; "
                                  "DELETE FROM chunks WHERE id > 1; "
                                  "UPDATE meta SET value='other' WHERE key='state'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    snprintf(wal_o, sizeof wal_o, "%s-wal", other);
    snprintf(wal_a, sizeof wal_a, "%s-wal", a);
    tu_copy_file(wal_o, wal_a); /* while the connection holds it: a valid, committed WAL */
    sqlite3_close(db);
    listing(before, sizeof before);
    const char *want = "ignored the -wal";
    assert_int_equal(calls_in(a, NULL, &want), 250);
    listing(after, sizeof after);
    assert_string_equal(before, after); /* no -shm, nothing created */
    /* the CLI readers agree */
    const char *cli = tu_cli();
    if (!cli) return;
    char cmd[2000], out[8192];
    snprintf(cmd, sizeof cmd, "%s info '%s' --json 2>/dev/null", cli, a);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "\"calls\": 250,"));
    snprintf(cmd, sizeof cmd, "%s verify '%s' 2>&1", cli, a);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "250 calls"));
    listing(after, sizeof after);
    assert_string_equal(before, after);
}

/* A recording killed with SIGKILL: the main file alone holds every committed chunk; the trace
 * with its side files reads the same without creating any; seal finishes it. */
static void test_killed_recording_copy_and_seal(void **state)
{
    (void)state;
    char p[600], cp[600], before[4096], after[4096];
    tmp_path(p, sizeof p, "killed.ftdb");
    tmp_path(cp, sizeof cp, "killed-copy.ftdb");
    record_and_kill(p, 5, 0, 0);
    assert_true(tu_exists(p, "-wal"));
    tu_copy_file(p, cp); /* as scp would: the main file only */
    const char *nc = "was not closed";
    assert_int_equal(calls_in(cp, NULL, &nc), 500);
    listing(before, sizeof before);
    assert_int_equal(calls_in(p, NULL, &nc), 500);
    listing(after, sizeof after);
    assert_string_equal(before, after);
    ft_seal_info si;
    ft_err err = {0};
    assert_int_equal(ft_trace_seal(p, 0, &si, &err), FT_OK);
    assert_false(si.was_closed);
    assert_int_equal(si.n_calls, 500);
    assert_false(tu_exists(p, "-wal") || tu_exists(p, "-shm") || tu_exists(p, "-journal"));
    const char *none = NULL;
    assert_int_equal(calls_in(p, NULL, &none), 500);
    ft_trace *t = NULL;
    assert_int_equal(ft_trace_open(p, FT_OPEN_READ, &t, &err), FT_OK);
    assert_string_equal(ft_trace_meta(t, "state"), "recovered");
    ft_trace_close(t);
    /* sealing again: already closed */
    assert_int_equal(ft_trace_seal(p, 0, &si, &err), FT_OK);
    assert_true(si.was_closed);
    /* the copy of the main file seals too */
    assert_int_equal(ft_trace_seal(cp, 0, &si, &err), FT_OK);
    assert_int_equal(si.n_calls, 500);
}

/* A trace read while it is being recorded (here in the same process, whose POSIX locks a reader
 * must not drop): read with its WAL, said to be not closed, and the recording goes on. */
static void test_live_read(void **state)
{
    (void)state;
    char p[600];
    tmp_path(p, sizeof p, "live.ftdb");
    ft_rec *r = rec_start(p, 100);
    for (int i = 0; i < 250; i++)
        assert_int_equal(call1(r, i + 1, i), FT_OK);
    const char *nc = "read with the -wal";
    assert_int_equal(calls_in(p, NULL, &nc), 200); /* two chunks committed, one pending */
    for (int i = 250; i < 420; i++)
        assert_int_equal(call1(r, i + 1, i), FT_OK);
    assert_int_equal(calls_in(p, NULL, &nc), 400);
    assert_int_equal(ft_rec_close(r), FT_OK);
    const char *none = NULL;
    assert_int_equal(calls_in(p, NULL, &none), 420);
    assert_false(tu_exists(p, "-wal") || tu_exists(p, "-shm") || tu_exists(p, "-journal"));
}

/* A close killed at any moment leaves every call and never a journal. The trace reads as it is,
 * unless the kill cut the close's own last write to the -wal in the middle of a frame: that is
 * reported as a damaged -wal (a cut frame is never dropped silently), and `seal --force` then
 * gives back every committed call. */
static void test_killed_close(void **state)
{
    (void)state;
    int closed = 0, open_left = 0, cut = 0;
    for (int k = 0; k < 40; k++) {
        char p[600];
        char name[64];
        snprintf(name, sizeof name, "kc%d.ftdb", k);
        tmp_path(p, sizeof p, name);
        record_and_kill(p, 3, 1, (long)k * 150);
        assert_false(tu_exists(p, "-journal"));
        ft_trace *t0 = NULL;
        ft_err err0 = {0};
        int rc = ft_trace_open(p, FT_OPEN_READ, &t0, &err0);
        ft_trace_close(t0);
        if (rc == FT_ECORRUPT && strstr(err0.msg, "-wal: damaged") && strstr(err0.msg, "cut")) {
            ft_seal_info si0;
            assert_int_equal(ft_trace_seal(p, 1, &si0, &err0), FT_OK);
            assert_int_equal(si0.n_calls, 300);
            cut++;
        } else if (rc) {
            fail_msg("%s: %s", p, ft_err_msg(&err0));
        }
        uint64_t n = calls_in(p, &rc, NULL);
        assert_int_equal(rc, FT_OK);
        assert_int_equal(n, 300);
        ft_trace *t = NULL;
        ft_err err = {0};
        assert_int_equal(ft_trace_open(p, FT_OPEN_READ, &t, &err), FT_OK);
        int done = !strcmp(ft_trace_meta(t, "state"), "complete");
        ft_trace_close(t);
        closed += done;
        open_left += !done;
        ft_seal_info si;
        assert_int_equal(ft_trace_seal(p, 0, &si, &err), FT_OK);
        assert_int_equal(si.n_calls, 300);
        assert_false(tu_exists(p, "-journal") || tu_exists(p, "-wal"));
    }
    print_message("killed close: %d closed, %d not yet, %d with the last -wal frame cut\n", closed,
                  open_left, cut);
}

/* The last commits in a damaged -wal are reported, not dropped silently. */
static void test_damaged_wal_reported(void **state)
{
    (void)state;
    char p[600], wal[700];
    tmp_path(p, sizeof p, "badwal.ftdb");
    record_and_kill(p, 2, 0, 0);
    snprintf(wal, sizeof wal, "%s-wal", p);
    /* flip a byte in the page of the first frame of the current WAL generation */
    int fd = open(wal, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, 32 + 24 + 100), 1);
    b ^= 0x40;
    assert_int_equal(pwrite(fd, &b, 1, 32 + 24 + 100), 1);
    close(fd);
    ft_trace *t = NULL;
    ft_err err = {0};
    assert_int_equal(ft_trace_open(p, FT_OPEN_READ, &t, &err), FT_ECORRUPT);
    assert_non_null(strstr(err.msg, "-wal: damaged"));
    ft_seal_info si;
    assert_int_equal(ft_trace_seal(p, 0, &si, &err), FT_ECORRUPT);
    assert_int_equal(ft_trace_seal(p, 1, &si, &err), FT_OK);
    assert_true(si.wal_damaged);
    int rc;
    calls_in(p, &rc, NULL);
    assert_int_equal(rc, FT_OK);
}

/* A stale -journal or -wal beside a new trace's name is refused, not applied to it. */
static void test_stale_side_file_refused(void **state)
{
    (void)state;
    char p[600], j[700];
    tmp_path(p, sizeof p, "stale.ftdb");
    snprintf(j, sizeof j, "%s-journal", p);
    FILE *f = fopen(j, "w");
    assert_non_null(f);
    fclose(f);
    ft_rec *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(p, NULL, &r, &err), FT_EINVAL);
    assert_non_null(strstr(err.msg, "-journal"));
    assert_false(tu_exists(p, ""));
    unlink(j);
}

/* A recording that runs out of room (here a file size limit: the same short writes as a full
 * disk) fails naming the file and the step, and the trace keeps what was committed. */
static void test_out_of_room_names_file(void **state)
{
    (void)state;
    char p[600];
    tmp_path(p, sizeof p, "full.ftdb");
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {96 * 1024, 96 * 1024};
        setrlimit(RLIMIT_FSIZE, &rl);
        ft_rec *r = rec_start(p, 100);
        int rc = FT_OK;
        char msg[FT_ERR_MAX] = "";
        for (int i = 0; i < 200000 && !rc; i++)
            if ((rc = call1(r, i + 1, i))) ft_strlcpy(msg, ft_err_msg(ft_rec_error(r)), sizeof msg);
        if (!rc && (rc = ft_rec_close(r)))
            ft_strlcpy(msg, "close failed", sizeof msg);
        else if (rc)
            ft_rec_abort(r);
        if (write(fds[1], msg, strlen(msg) + 1) < 0) _exit(3);
        _exit(rc ? 1 : 0);
    }
    close(fds[1]);
    char msg[FT_ERR_MAX + 1] = "";
    ssize_t n = read(fds[0], msg, FT_ERR_MAX);
    close(fds[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 1);
    assert_true(n > 0);
    print_message("out of room: %s (-wal %d, -shm %d)\n", msg, tu_exists(p, "-wal"),
                  tu_exists(p, "-shm"));
    assert_non_null(strstr(msg, p));
    assert_non_null(strstr(msg, "chunk"));
    /* the failed commit left a cut frame at the end of the -wal: reported, not dropped silently;
     * seal --force keeps every chunk committed before it */
    int rc;
    ft_trace *t = NULL;
    ft_err err = {0};
    rc = ft_trace_open(p, FT_OPEN_READ, &t, &err);
    if (rc) {
        assert_int_equal(rc, FT_ECORRUPT);
        assert_non_null(strstr(err.msg, "-wal: damaged"));
        ft_seal_info si;
        assert_int_equal(ft_trace_seal(p, 1, &si, &err), FT_OK);
    } else {
        ft_trace_close(t);
    }
    uint64_t calls = calls_in(p, &rc, NULL);
    assert_int_equal(rc, FT_OK);
    assert_true(calls > 0 && calls % 100 == 0);
}

/* ---- limits ------------------------------------------------------------------------------- */
static char *ops_of(uint32_t n)
{
    ft_buf b = {0};
    ft_buf_printf(&b, "[");
    for (uint32_t i = 0; i < n; i++)
        ft_buf_printf(&b, "%s{\"type\":\"GELU\",\"attrs\":{}}", i ? "," : "");
    ft_buf_printf(&b, "]");
    ft_buf_append(&b, "", 1);
    return (char *)b.data;
}

/* What the recorder accepts at the limits verifies, exports, imports and replays; one past
 * them is refused at record time, naming the field. */
static void test_limits_round_trip(void **state)
{
    (void)state;
    char p[600], jl[600], back[600];
    tmp_path(p, sizeof p, "limits.ftdb");
    tmp_path(jl, sizeof jl, "limits.jsonl");
    tmp_path(back, sizeof back, "limits-back.ftdb");
    ft_rec *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(p, NULL, &r, &err), FT_OK);
    char *big = ops_of(FT_LIM_OPS), *over = ops_of(FT_LIM_OPS + 1);
    char *label = malloc(FT_LIM_LABEL_BYTES + 2);
    memset(label, 'L', FT_LIM_LABEL_BYTES + 1);
    label[0] = '\t'; /* one byte that export escapes */
    label[FT_LIM_LABEL_BYTES] = '\0';
    assert_int_equal(ft_rec_fuser(r, 1, label, big), FT_OK);
    assert_int_equal(ft_rec_fuser(r, 2, NULL, over), FT_ERANGE);
    assert_non_null(strstr(ft_err_msg(ft_rec_error(r)), "ops"));
    label[FT_LIM_LABEL_BYTES] = 'L';
    label[FT_LIM_LABEL_BYTES + 1] = '\0';
    assert_int_equal(ft_rec_fuser(r, 3, label, ops1), FT_ERANGE);
    assert_non_null(strstr(ft_err_msg(ft_rec_error(r)), "label"));
    assert_int_equal(ft_rec_fuser(r, 4, NULL, "[{\"type\":\"GELU\",\"attrs\":{}}]"), FT_OK);
    uint8_t *rg = calloc(FT_LIM_OPS, 1);
    rg[7] = 1;
    int64_t *splits = malloc(sizeof(int64_t) * (FT_LIM_SPLITS + 1));
    for (int i = 0; i < FT_LIM_SPLITS + 1; i++)
        splits[i] = 1000000000 + i; /* 10 digits each: the call line stays under 1 MB */
    assert_int_equal(ft_rec_call_flat(r, 1, 1, 0, FT_CF_GRAD, 0, FT_LIM_OPS, rg, FT_LIM_SPLITS,
                                      splits, 0, 0, NULL, 0, 0),
                     FT_OK);
    assert_int_equal(ft_rec_call_flat(r, 2, 1, 0, 0, 0, FT_LIM_OPS, rg, FT_LIM_SPLITS + 1, splits,
                                      0, 0, NULL, 0, 0),
                     FT_ERANGE);
    char phase[FT_LIM_PHASE_BYTES + 2];
    memset(phase, 'p', sizeof phase);
    phase[FT_LIM_PHASE_BYTES] = '\0';
    assert_int_equal(ft_rec_call_flat(r, 3, 4, 0, 0, 0, 1, rg, -1, NULL, 0, 0, phase, 0, 0), FT_OK);
    phase[FT_LIM_PHASE_BYTES] = 'p';
    phase[FT_LIM_PHASE_BYTES + 1] = '\0';
    assert_int_equal(ft_rec_call_flat(r, 4, 4, 0, 0, 0, 1, rg, -1, NULL, 0, 0, phase, 0, 0),
                     FT_ERANGE);
    assert_int_equal(ft_rec_close(r), FT_OK);
    free(big);
    free(over);
    free(label);
    free(rg);
    free(splits);
    const char *none = NULL;
    assert_int_equal(calls_in(p, NULL, &none), 2);
    const char *cli = tu_cli();
    if (!cli) return;
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s export '%s' -o '%s' && %s import '%s' -o '%s' && %s verify '%s'",
             cli, p, jl, cli, jl, back, cli, back);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    /* the 4096-op fuser replays (not an environment failure) */
    snprintf(cmd, sizeof cmd, "%s replay '%s' >/dev/null", cli, back);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
}

/* A table beyond the limits (not written by any recorder) is damage for every reader. */
static void test_over_limit_table_is_damage(void **state)
{
    (void)state;
    char p[600];
    tmp_path(p, sizeof p, "overlimit.ftdb");
    ft_rec *r = rec_start(p, 100);
    assert_int_equal(call1(r, 1, 1), FT_OK);
    assert_int_equal(ft_rec_close(r), FT_OK);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "UPDATE oplists SET n_ops = 65535", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    int rc;
    calls_in(p, &rc, NULL);
    assert_int_equal(rc, FT_ECORRUPT);
}

/* ---- info: exact, linear, no overflow ----------------------------------------------------- */
static void test_info_extreme_values(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char p[600];
    tmp_path(p, sizeof p, "extreme.ftdb");
    ft_rec *r = rec_start(p, 100);
    static const uint8_t rg[1] = {0};
    int64_t big[1] = {INT64_MAX};
    uint32_t fl = FT_CF_HAS_NS | FT_CF_HAS_FUSE_NS | FT_CF_HAS_STEP;
    assert_int_equal(ft_rec_call_flat(r, 1, 1, 0, fl, 0, 1, rg, 1, big, 0, 0, NULL, 0, INT64_MAX),
                     FT_OK);
    assert_int_equal(ft_rec_call_flat(r, 2, 1, 0, fl, 0, 1, rg, 1, big, INT64_MAX, 0, NULL,
                                      INT64_MAX, INT64_MAX),
                     FT_OK);
    assert_int_equal(ft_rec_close(r), FT_OK);
    char cmd[1200];
    ft_buf out = {0};
    snprintf(cmd, sizeof cmd, "%s info '%s' --json", cli, p);
    assert_int_equal(tu_sh_buf(cmd, &out), 0);
    json_t *j = json_loads((const char *)out.data, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "tokens")), "18446744073709551614");
    json_t *fz = json_object_get(j, "fuse_time");
    assert_string_equal(json_string_value(json_object_get(fz, "total_ns")), "18446744073709551614");
    assert_true(json_real_value(json_object_get(fz, "mean_ns")) > 9.2e18);
    json_t *ts = json_object_get(j, "time_span");
    assert_true(json_real_value(json_object_get(ts, "seconds")) > 9.2e9);
    json_decref(j);
    ft_buf_free(&out);
    snprintf(cmd, sizeof cmd, "%s info '%s'", cli, p);
    assert_int_equal(tu_sh_buf(cmd, &out), 0);
    assert_non_null(strstr((const char *)out.data, "18446744073709551614 tokens"));
    ft_buf_free(&out);
}

/* CPU seconds of this process and of its waited-for children (the shell and the CLI): a
 * machine busy with other work does not make the limits below flaky. */
static double cpu_s(void)
{
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    getrusage(RUSAGE_CHILDREN, &b);
    return (double)(a.ru_utime.tv_sec + a.ru_stime.tv_sec + b.ru_utime.tv_sec + b.ru_stime.tv_sec) +
           1e-6 * (double)(a.ru_utime.tv_usec + a.ru_stime.tv_usec + b.ru_utime.tv_usec +
                           b.ru_stime.tv_usec);
}

/* 10^5 distinct phases and 5000 op lists: every one listed, within a second. */
static void test_info_at_scale(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char p[600];
    tmp_path(p, sizeof p, "scale.ftdb");
    ft_rec *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(p, NULL, &r, &err), FT_OK);
    enum { N_OPLISTS = 5000, N_PHASES = 100000 };
    for (int i = 0; i < N_OPLISTS; i++) {
        char ops[128];
        snprintf(ops, sizeof ops, "[{\"type\":\"BasicLinear\",\"attrs\":{\"k\":%d}}]", i);
        assert_int_equal(ft_rec_fuser(r, i + 1, NULL, ops), FT_OK);
    }
    static const uint8_t rg[1] = {0};
    for (int i = 0; i < N_PHASES; i++) {
        char ph[32];
        snprintf(ph, sizeof ph, "phase-%d", i);
        assert_int_equal(
            ft_rec_call_flat(r, i + 1, i % N_OPLISTS + 1, 0, 0, 0, 1, rg, -1, NULL, 0, 0, ph, 0, 0),
            FT_OK);
    }
    assert_int_equal(ft_rec_close(r), FT_OK);
    char cmd[1200];
    ft_buf out = {0};
    snprintf(cmd, sizeof cmd, "%s info '%s' --json", cli, p);
    double t0 = cpu_s();
    assert_int_equal(tu_sh_buf(cmd, &out), 0);
    double dt = cpu_s() - t0;
    print_message("info on %d phases, %d op lists: %.3f s of CPU\n", N_PHASES, N_OPLISTS, dt);
    assert_true(dt < 1.0 * SLOW);
    json_t *j = json_loads((const char *)out.data, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_object_size(json_object_get(j, "phases")), N_PHASES);
    assert_int_equal(json_array_size(json_object_get(j, "op_lists")), N_OPLISTS);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(j, "phases"), "phase-99999")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "phases"), "phase-7")),
                     1);
    json_decref(j);
    ft_buf_free(&out);
}

/* Declarations ride in the chunk transactions: 10^5 fusers record in well under a second. */
static void test_many_fusers_fast(void **state)
{
    (void)state;
    char p[600];
    tmp_path(p, sizeof p, "fusers.ftdb");
    ft_rec *r = NULL;
    ft_err err = {0};
    double t0 = cpu_s();
    assert_int_equal(ft_rec_open(p, NULL, &r, &err), FT_OK);
    for (int i = 0; i < 100000; i++)
        assert_int_equal(ft_rec_fuser(r, i + 1, "f", ops1), FT_OK);
    assert_int_equal(ft_rec_close(r), FT_OK);
    double dt = cpu_s() - t0;
    print_message("10^5 fusers recorded in %.3f s of CPU\n", dt);
    assert_true(dt < 2.0 * SLOW);
    ft_trace *t = NULL;
    assert_int_equal(ft_trace_open(p, FT_OPEN_READ, &t, &err), FT_OK);
    assert_int_equal(ft_trace_n_fusers(t), 100000);
    ft_trace_close(t);
}

/* ---- exit statuses by cause --------------------------------------------------------------- */
/* Small traces small: a finished trace of at most 1 MiB is rewritten with 512-byte pages at close
 * (a page per table and index is most of a small trace), in rollback mode, and still verifies. */
static void test_small_trace_small(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char p[600], cmd[1600], out[512];
    tmp_path(p, sizeof p, "small.ftdb");
    snprintf(cmd, sizeof cmd, "%s synth demo --set steps=5 --set microbatches=2 -o '%s' >/dev/null",
             cli, p);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    size_t n;
    char *d = tu_read_file(p, &n);
    assert_non_null(d);
    print_message("264-call trace: %zu bytes, page size %u\n", n,
                  (unsigned)((uint8_t)d[16] << 8 | (uint8_t)d[17]));
    assert_true(n <= 16384);                        /* 40960 with 4096-byte pages */
    assert_true((uint8_t)d[16] == 2 && d[17] == 0); /* 512-byte pages */
    assert_true(d[18] == 1 && d[19] == 1);          /* rollback mode: a closed trace */
    free(d);
    snprintf(cmd, sizeof cmd, "%s verify '%s'", cli, p);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "ls '%s'* 2>/dev/null | grep -c small-", p);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 1); /* grep found no copy left beside it */
    remove(p);
}

static void test_reader_exit_statuses(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char p[600], cut[600], cmd[1600];
    tmp_path(p, sizeof p, "whole.ftdb");
    tmp_path(cut, sizeof cut, "cut.ftdb");
    snprintf(cmd, sizeof cmd, "%s synth demo -o '%s' >/dev/null", cli, p);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    size_t n;
    char *d = tu_read_file(p, &n);
    FILE *f = fopen(cut, "wb");
    assert_int_equal(fwrite(d, 1, n / 2, f), n / 2);
    fclose(f);
    free(d);
    static const char *const readers[] = {"verify %s", "info %s", "info %s --json",
                                          "export %s -o -", "replay %s"};
    for (size_t i = 0; i < sizeof readers / sizeof *readers; i++) {
        char sub[700];
        struct {
            const char *path;
            int want;
        } cases[] = {{cut, 1}, {"/nonexistent/x.ftdb", 2}, {tmpdir, 2}};
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            snprintf(sub, sizeof sub, readers[i], cases[c].path);
            snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>&1", cli, sub);
            int rc = tu_sh(cmd, NULL, 0);
            if (rc != cases[c].want) fail_msg("'%s': exit %d, want %d", sub, rc, cases[c].want);
        }
    }
}

/* Damage anywhere past the header is damage to every reader: exit 1 (or 2 when the file no
 * longer says trace, 0 when the bytes were in unused space), never 3 (environment). */
static void test_random_damage_exit_statuses(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char p[600], d[600], cmd[2000];
    tmp_path(p, sizeof p, "dmg-src.ftdb");
    tmp_path(d, sizeof d, "dmg.ftdb");
    snprintf(cmd, sizeof cmd, "%s synth demo --set steps=2 -o '%s' >/dev/null", cli, p);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    size_t n;
    char *orig = tu_read_file(p, &n);
    assert_non_null(orig);
    uint64_t g = 0x9e3779b97f4a7c15ull;
    static const char *const readers[] = {"verify", "info", "export", "replay"};
    int counts[4] = {0};
    for (int k = 0; k < 24; k++) {
        g ^= g << 13;
        g ^= g >> 7;
        g ^= g << 17;
        /* four bytes flipped at once, anywhere after the first 100 (the SQLite header) */
        size_t at[4];
        char save[4];
        for (int q = 0; q < 4; q++) {
            g ^= g << 13;
            g ^= g >> 7;
            g ^= g << 17;
            at[q] = 100 + (size_t)(g % (n - 100));
            save[q] = orig[at[q]];
            orig[at[q]] = (char)(orig[at[q]] ^ (char)(1 + (g >> 40) % 255));
        }
        FILE *f = fopen(d, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(orig, 1, n, f), n);
        for (int q = 3; q >= 0; q--)
            orig[at[q]] = save[q];
        fclose(f);
        for (size_t r = 0; r < 4; r++) {
            snprintf(cmd, sizeof cmd, "%s %s '%s' %s >/dev/null 2>&1", cli, readers[r], d,
                     r == 2 ? "-o -" : "");
            int rc = tu_sh(cmd, NULL, 0);
            if (rc < 0 || rc > 2)
                fail_msg("%s after flips at bytes %zu, %zu, %zu, %zu: exit %d", readers[r], at[0],
                         at[1], at[2], at[3], rc);
            counts[rc]++;
        }
    }
    print_message("random damage: exit 0 %d, 1 %d, 2 %d\n", counts[0], counts[1], counts[2]);
    free(orig);
}

/* The shipped capture streams' reports and info run clean (under UBSan in the ASan pass). */
static void test_shipped_traces_reports(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    DIR *dir = opendir(FT_SOURCE_DIR "/traces");
    assert_non_null(dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(dir))) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".jsonl")) continue;
        char db[600], cmd[8192];
        tmp_path(db, sizeof db, "shipped.ftdb");
        snprintf(cmd, sizeof cmd,
                 "%s import '%s/traces/%s' -o '%s' 2>/dev/null && %s replay '%s' --json "
                 ">/dev/null && %s replay '%s' --csv >/dev/null && %s info '%s' --json >/dev/null "
                 "&& %s info '%s' >/dev/null",
                 cli, FT_SOURCE_DIR, e->d_name, db, cli, db, cli, db, cli, db, cli, db);
        int rc = tu_sh(cmd, NULL, 0);
        if (rc) fail_msg("traces/%s: exit %d", e->d_name, rc);
        unlink(db);
        n++;
    }
    closedir(dir);
    assert_true(n >= 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_foreign_wal_ignored),
        cmocka_unit_test(test_killed_recording_copy_and_seal),
        cmocka_unit_test(test_live_read),
        cmocka_unit_test(test_killed_close),
        cmocka_unit_test(test_damaged_wal_reported),
        cmocka_unit_test(test_stale_side_file_refused),
        cmocka_unit_test(test_out_of_room_names_file),
        cmocka_unit_test(test_limits_round_trip),
        cmocka_unit_test(test_over_limit_table_is_damage),
        cmocka_unit_test(test_info_extreme_values),
        cmocka_unit_test(test_info_at_scale),
        cmocka_unit_test(test_many_fusers_fast),
        cmocka_unit_test(test_small_trace_small),
        cmocka_unit_test(test_reader_exit_statuses),
        cmocka_unit_test(test_random_damage_exit_statuses),
        cmocka_unit_test(test_shipped_traces_reports),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
