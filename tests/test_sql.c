/*
 * test_sql.c - SQL over a trace (sql/ft_sql.h, `fusertrace sql`):
 * - every column of `calls` and `backwards` against the records a generator wrote (the
 *   generator, not the reader, is the oracle);
 * - seq constraints decode only the chunks of the slice: ft_reader_next and ft_reader_open are
 *   wrapped at link time (-Wl,--wrap) to count decoded chunks and see the reader's flags;
 * - joins, a named trace, errors (no trace, missing file, damaged chunk);
 * - `decisions` gives the replay engine's counts, per policy and for one policy at a time;
 * - the command: list, CSV and JSON output, a bad query (exit 2 naming it), no side file beside
 *   the trace and its bytes unchanged; the stock sqlite3 shell loading the extension.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_recorder.h"
#include "ft_replayer.h"
#include "ft_sql.h"
#include "test_util.h"

#include <dirent.h>
#include <jansson.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

/* ---- link-time wraps of the reader --------------------------------------------------------- */
int __real_ft_reader_next(ft_reader *r, const ft_batch **out_batch);
int __wrap_ft_reader_next(ft_reader *r, const ft_batch **out_batch);
int __real_ft_reader_open(ft_trace *t, unsigned read_flags, ft_reader **out);
int __wrap_ft_reader_open(ft_trace *t, unsigned read_flags, ft_reader **out);

int __real_ft_replay_cursor_open(ft_trace *t, const ft_replay_opts *opts, ft_replay_cursor **out,
                                 ft_err *err);
int __wrap_ft_replay_cursor_open(ft_trace *t, const ft_replay_opts *opts, ft_replay_cursor **out,
                                 ft_err *err);

static unsigned long n_decoded;  /* batches ft_reader_next handed out */
static unsigned long n_replays;  /* replays ft_replay_cursor_open started */
static unsigned last_open_flags; /* read_flags of the last ft_reader_open */

int __wrap_ft_reader_next(ft_reader *r, const ft_batch **out_batch)
{
    int rc = __real_ft_reader_next(r, out_batch);
    if (!rc && *out_batch) n_decoded++;
    return rc;
}

int __wrap_ft_reader_open(ft_trace *t, unsigned read_flags, ft_reader **out)
{
    last_open_flags = read_flags;
    return __real_ft_reader_open(t, read_flags, out);
}

int __wrap_ft_replay_cursor_open(ft_trace *t, const ft_replay_opts *opts, ft_replay_cursor **out,
                                 ft_err *err)
{
    n_replays++;
    return __real_ft_replay_cursor_open(t, opts, out, err);
}

/* ---- the generated trace ------------------------------------------------------------------- */
enum { N_REC = 1000, CHUNK = 10 };
#define SEQ(k) (2 * (int64_t)(k) + 5)

static int is_bwd(int k)
{
    return k % 5 == 4;
}

/* The call record k (not a backward one): every optional field present on some, absent on
 * others. splits/op_rg point into caller storage. */
static void gen_call(int k, ft_call *c, uint8_t op_rg[2], int64_t splits[4])
{
    memset(c, 0, sizeof *c);
    c->seq = SEQ(k);
    c->fuser = k % 2 ? 11 : 10;
    c->n_op_rg = k % 2 ? 1 : 2;
    for (uint32_t i = 0; i < c->n_op_rg; i++)
        op_rg[i] = (uint8_t)((k >> i) & 1);
    c->op_rg = op_rg;
    uint32_t fl = 0;
    if (k % 3) {
        fl |= FT_CF_HAS_RECIPE;
        c->recipe = 1 + k % 2;
    }
    if (k % 2 == 0) fl |= FT_CF_GRAD;
    if (k % 4 < 2) fl |= FT_CF_INPUT_RG;
    fl |= FT_CF_HAS_STEP;
    c->step = k / 50;
    if (k % 7) {
        fl |= FT_CF_HAS_MB;
        c->mb = k % 8;
    }
    if (k % 3 != 1) {
        fl |= FT_CF_HAS_PHASE;
        c->phase = k % 2 ? "fwd" : "recompute";
    }
    fl |= FT_CF_HAS_NS;
    c->ns = 1000 * (int64_t)k;
    if (k % 6 == 0) {
        fl |= FT_CF_HAS_FUSE_NS;
        c->fuse_ns = 77 + k;
    }
    if (k % 2 == 0) fl |= FT_CF_HAS_REBUILT | (k % 4 == 0 ? FT_CF_REBUILT : 0);
    if (k % 5 == 0) fl |= FT_CF_HAS_GRAPH | (k % 10 == 0 ? FT_CF_GRAPH : 0);
    if (k % 3 != 2) {
        fl |= FT_CF_HAS_SPLITS;
        splits[0] = k % 5;
        splits[1] = 1;
        splits[2] = 0;
        splits[3] = k % 7;
        c->n_splits = 4;
        c->m_splits = splits;
    }
    c->flags = fl;
    c->device = k % 3;
}

static int64_t gen_n_tokens(int k)
{
    return k % 5 + 1 + k % 7;
}

static char dir[1024], trace_path[1200];

static int setup_trace(void **state)
{
    (void)state;
    if (tu_dir_fresh(dir, sizeof dir, "test_sql")) return -1;
    tu_dir_path(trace_path, sizeof trace_path, dir, "t.ftdb");
    ft_rec *r = NULL;
    ft_err err = {0};
    ft_rec_opts o = {.chunk_calls = CHUNK};
    if (ft_rec_open(trace_path, &o, &r, &err)) return -1;
    ft_header h = {.te_version = "2.20", .host = "h", .env_json = "{}", .extra_json = "{}"};
    int rc = ft_rec_header(r, &h);
    if (!rc) rc = ft_rec_fuser(r, 10, "layer.0", "[{\"type\":\"GELU\"},{\"type\":\"Bias\"}]");
    if (!rc) rc = ft_rec_fuser(r, 11, NULL, "[{\"type\":\"GELU\"}]");
    if (!rc) rc = ft_rec_recipe(r, 1, "MXFP8BlockScaling", 100, "{\"fp8_format\":\"E4M3\"}");
    if (!rc) rc = ft_rec_recipe(r, 2, "DelayedScaling", 200, "{\"amax_history_len\":16}");
    for (int k = 0; k < N_REC && !rc; k++) {
        if (is_bwd(k)) {
            ft_backward b = {.seq = SEQ(k), .call = SEQ(k - 1), .has_ns = k % 2, .ns = 5 * k};
            rc = ft_rec_backward(r, &b);
        } else {
            ft_call c;
            uint8_t op_rg[2];
            int64_t splits[4];
            gen_call(k, &c, op_rg, splits);
            rc = ft_rec_call(r, &c);
        }
    }
    if (rc) {
        fprintf(stderr, "test_sql: recording failed: %s\n", ft_err_msg(ft_rec_error(r)));
        ft_rec_abort(r);
        return -1;
    }
    return ft_rec_close(r) ? -1 : 0;
}

static int teardown_trace(void **state)
{
    (void)state;
    return tu_dir_remove(dir);
}

/* ---- an in-process connection -------------------------------------------------------------- */
typedef struct conn {
    ft_trace *t;
    sqlite3 *db;
} conn;

static void conn_open(conn *c, int with_default)
{
    ft_err err = {0};
    assert_int_equal(ft_trace_open(trace_path, FT_OPEN_READ, &c->t, &err), FT_OK);
    assert_int_equal(sqlite3_open(":memory:", &c->db), SQLITE_OK);
    assert_int_equal(ft_sql_register(c->db, with_default ? c->t : NULL, "t.ftdb", &err), FT_OK);
}

static void conn_close(conn *c)
{
    assert_int_equal(sqlite3_close(c->db), SQLITE_OK);
    ft_trace_close(c->t);
}

/* The one integer a query gives. */
static int64_t q_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    int64_t v = sqlite3_column_int64(st, 0);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    return v;
}

static void assert_col_int(sqlite3_stmt *st, int col, int present, int64_t want, int k)
{
    if (!present) {
        if (sqlite3_column_type(st, col) != SQLITE_NULL)
            fail_msg("record %d column %s: want NULL", k, sqlite3_column_name(st, col));
        return;
    }
    if (sqlite3_column_type(st, col) != SQLITE_INTEGER || sqlite3_column_int64(st, col) != want)
        fail_msg("record %d column %s: want %lld, got '%s'", k, sqlite3_column_name(st, col),
                 (long long)want, (const char *)sqlite3_column_text(st, col));
}

static void assert_col_text(sqlite3_stmt *st, int col, const char *want, int k)
{
    const char *got = (const char *)sqlite3_column_text(st, col);
    if (!want != !got || (want && strcmp(want, got)))
        fail_msg("record %d column %s: want '%s', got '%s'", k, sqlite3_column_name(st, col),
                 want ? want : "NULL", got ? got : "NULL");
}

/* ---- tables ---------------------------------------------------------------------------------- */
static void test_sql_calls_rows_match_records(void **state)
{
    (void)state;
    conn c;
    conn_open(&c, 1);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(c.db,
                                        "SELECT seq, fuser, label, ops, recipe, recipe_type, "
                                        "recipe_obj, recipe_attrs, grad, input_rg, op_rg, device, "
                                        "step, mb, phase, ns, fuse_ns, rebuilt, graph, n_tokens, "
                                        "m_splits, chunk, trace FROM calls",
                                        -1, &st, NULL),
                     SQLITE_OK);
    int k = 0, rows = 0;
    char want[128];
    while (sqlite3_step(st) == SQLITE_ROW) {
        while (is_bwd(k))
            k++;
        ft_call g;
        uint8_t op_rg[2];
        int64_t splits[4];
        gen_call(k, &g, op_rg, splits);
        uint32_t fl = g.flags;
        int has_r = (fl & FT_CF_HAS_RECIPE) != 0;
        assert_col_int(st, 0, 1, g.seq, k);
        assert_col_int(st, 1, 1, g.fuser, k);
        assert_col_text(st, 2, g.fuser == 10 ? "layer.0" : NULL, k);
        assert_col_text(st, 3,
                        g.fuser == 10 ? "[{\"type\":\"GELU\"},{\"type\":\"Bias\"}]"
                                      : "[{\"type\":\"GELU\"}]",
                        k);
        assert_col_int(st, 4, has_r, g.recipe, k);
        assert_col_text(st, 5,
                        !has_r          ? NULL
                        : g.recipe == 1 ? "MXFP8BlockScaling"
                                        : "DelayedScaling",
                        k);
        assert_col_int(st, 6, has_r, g.recipe == 1 ? 100 : 200, k);
        assert_col_text(st, 7,
                        !has_r          ? NULL
                        : g.recipe == 1 ? "{\"fp8_format\":\"E4M3\"}"
                                        : "{\"amax_history_len\":16}",
                        k);
        assert_col_int(st, 8, 1, (fl & FT_CF_GRAD) != 0, k);
        assert_col_int(st, 9, 1, (fl & FT_CF_INPUT_RG) != 0, k);
        if (g.n_op_rg == 2)
            snprintf(want, sizeof want, "[%d,%d]", op_rg[0], op_rg[1]);
        else
            snprintf(want, sizeof want, "[%d]", op_rg[0]);
        assert_col_text(st, 10, want, k);
        assert_col_int(st, 11, 1, g.device, k);
        assert_col_int(st, 12, 1, g.step, k);
        assert_col_int(st, 13, fl & FT_CF_HAS_MB, g.mb, k);
        assert_col_text(st, 14, (fl & FT_CF_HAS_PHASE) ? g.phase : NULL, k);
        assert_col_int(st, 15, 1, g.ns, k);
        assert_col_int(st, 16, fl & FT_CF_HAS_FUSE_NS, g.fuse_ns, k);
        assert_col_int(st, 17, fl & FT_CF_HAS_REBUILT, (fl & FT_CF_REBUILT) != 0, k);
        assert_col_int(st, 18, fl & FT_CF_HAS_GRAPH, (fl & FT_CF_GRAPH) != 0, k);
        int has_s = (fl & FT_CF_HAS_SPLITS) != 0;
        assert_col_int(st, 19, has_s, gen_n_tokens(k), k);
        snprintf(want, sizeof want, "[%lld,1,0,%lld]", (long long)splits[0], (long long)splits[3]);
        assert_col_text(st, 20, has_s ? want : NULL, k);
        assert_col_int(st, 21, 1, 1 + k / CHUNK, k); /* chunk row ids count from 1 */
        assert_col_text(st, 22, "t.ftdb", k);
        k++;
        rows++;
    }
    assert_int_equal(sqlite3_finalize(st), SQLITE_OK);
    assert_int_equal(rows, N_REC - N_REC / 5);
    conn_close(&c);
}

static void test_sql_backwards_rows_match_records(void **state)
{
    (void)state;
    conn c;
    conn_open(&c, 1);
    sqlite3_stmt *st = NULL;
    assert_int_equal(
        sqlite3_prepare_v2(c.db, "SELECT seq, call, ns, chunk FROM backwards", -1, &st, NULL),
        SQLITE_OK);
    int k = 4, rows = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        assert_col_int(st, 0, 1, SEQ(k), k);
        assert_col_int(st, 1, 1, SEQ(k - 1), k);
        assert_col_int(st, 2, k % 2, 5 * k, k);
        assert_col_int(st, 3, 1, 1 + k / CHUNK, k);
        k += 5;
        rows++;
    }
    assert_int_equal(sqlite3_finalize(st), SQLITE_OK);
    assert_int_equal(rows, N_REC / 5);
    conn_close(&c);
}

/* Chunks a scan of [lo, hi] must decode: from the chunk holding lo (or the first) to the last
 * chunk starting at or before hi; chunk j starts with record 10j. */
static unsigned long want_chunks(int64_t lo, int64_t hi)
{
    int n_chunks = N_REC / CHUNK;
    if (lo > hi || hi < SEQ(0)) return 0;
    int a = 0, b = 0;
    for (int j = 0; j < n_chunks; j++) {
        if (SEQ(j * CHUNK) <= lo) a = j;
        if (SEQ(j * CHUNK) <= hi) b = j;
    }
    return (unsigned long)(b - a + 1);
}

static void test_sql_seq_constraints_decode_only_their_chunks(void **state)
{
    (void)state;
    static const struct {
        const char *where; /* on calls */
        int64_t lo, hi;    /* the seqs it keeps */
    } cases[] = {
        {"seq BETWEEN 405 AND 464", 405, 464},
        {"seq = 1001", 1001, 1001},
        {"seq = 1002", 1002, 1002}, /* no such seq: still only its chunk */
        {"seq < 40", INT64_MIN, 39},
        {"seq <= 45", INT64_MIN, 45},
        {"seq > 1900", 1901, INT64_MAX},
        {"seq >= 1995", 1995, INT64_MAX},
        {"seq > 100 AND seq < 160 AND seq >= 120", 120, 159},
        {"seq < 60.5 AND seq > 20.5", 21, 60},
        {"seq < 0", INT64_MIN, -1},
        {"seq > 100000", 100001, INT64_MAX},
        {"seq BETWEEN 600 AND 500", 600, 500},
    };
    conn c;
    conn_open(&c, 1);
    char sql[256];
    for (size_t i = 0; i < FT_ARRAY_LEN(cases); i++) {
        int64_t lo = cases[i].lo, hi = cases[i].hi, want = 0;
        for (int k = 0; k < N_REC; k++)
            want += !is_bwd(k) && SEQ(k) >= lo && SEQ(k) <= hi;
        snprintf(sql, sizeof sql, "SELECT count(*) FROM calls WHERE %s", cases[i].where);
        n_decoded = 0;
        int64_t got = q_int(c.db, sql);
        if (got != want) fail_msg("%s: %lld rows, want %lld", sql, (long long)got, (long long)want);
        unsigned long wc = want_chunks(lo, hi);
        if (n_decoded != wc) fail_msg("%s: decoded %lu chunks, want %lu", sql, n_decoded, wc);
    }
    /* the same count without a usable seq constraint reads every chunk */
    n_decoded = 0;
    assert_int_equal(q_int(c.db, "SELECT count(*) FROM calls WHERE seq + 0 BETWEEN 405 AND 464"),
                     q_int(c.db, "SELECT count(*) FROM calls WHERE seq BETWEEN 405 AND 464"));
    assert_true(n_decoded >= N_REC / CHUNK);
    /* a numeric text takes the column's numeric affinity, as SQLite compares it; any other
     * text is left to SQLite: every chunk, the same answer as SQLite's own comparison */
    n_decoded = 0;
    assert_int_equal(q_int(c.db, "SELECT count(*) FROM calls WHERE seq < '40'"),
                     q_int(c.db, "SELECT count(*) FROM calls WHERE seq < 40"));
    assert_int_equal(n_decoded, 2 * want_chunks(INT64_MIN, 39));
    n_decoded = 0;
    int64_t text_n = q_int(c.db, "SELECT count(*) FROM calls WHERE seq < 'x'");
    assert_int_equal(n_decoded, N_REC / CHUNK);
    assert_int_equal(text_n, N_REC - N_REC / 5); /* integers sort before text */
    /* backwards too */
    n_decoded = 0;
    assert_int_equal(q_int(c.db, "SELECT count(*) FROM backwards WHERE seq BETWEEN 405 AND 464"),
                     6);
    assert_int_equal(n_decoded, want_chunks(405, 464));
    conn_close(&c);
}

static void test_sql_splits_decoded_only_when_used(void **state)
{
    (void)state;
    conn c;
    conn_open(&c, 1);
    assert_int_equal(q_int(c.db, "SELECT sum(n_tokens) FROM calls") > 0, 1);
    assert_int_equal(last_open_flags & FT_READ_SPLITS, 0);
    int64_t want = 0, want_n = 0;
    for (int k = 0; k < N_REC; k++) {
        if (is_bwd(k) || k % 3 == 2) continue;
        want += gen_n_tokens(k);
        want_n += 4;
    }
    /* a fresh connection: a cursor reopens its reader when the flags change, but SQLite may
     * keep cursors, so check the flags from a clean start */
    conn_close(&c);
    conn_open(&c, 1);
    assert_int_equal(
        q_int(c.db, "SELECT sum(json_array_length(m_splits)) FROM calls WHERE m_splits NOT NULL"),
        want_n);
    assert_int_equal(last_open_flags & FT_READ_SPLITS, FT_READ_SPLITS);
    assert_int_equal(q_int(c.db, "SELECT sum(j.value) FROM calls, json_each(calls.m_splits) j"),
                     want);
    conn_close(&c);
}

static void test_sql_join_backwards_to_calls(void **state)
{
    (void)state;
    conn c;
    conn_open(&c, 1);
    /* every backward names the call just before it, on the alternating fusers */
    int64_t want10 = 0;
    for (int k = 4; k < N_REC; k += 5)
        want10 += (k - 1) % 2 == 0;
    assert_int_equal(q_int(c.db, "SELECT count(*) FROM backwards b JOIN calls c ON c.seq = b.call "
                                 "WHERE c.fuser = 10"),
                     want10);
    assert_int_equal(q_int(c.db, "SELECT count(*) FROM backwards b JOIN calls c ON c.seq = b.call"),
                     N_REC / 5);
    /* group by the label, fusers joined from nothing but the calls table */
    assert_int_equal(q_int(c.db, "SELECT count(DISTINCT coalesce(label, '-')) FROM calls"), 2);
    conn_close(&c);
}

static void test_sql_named_trace_and_errors(void **state)
{
    (void)state;
    conn c;
    conn_open(&c, 0);
    sqlite3_stmt *st = NULL;
    /* no default trace and an in-memory main database: an error that says what to do */
    assert_int_equal(sqlite3_prepare_v2(c.db, "SELECT count(*) FROM calls", -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ERROR);
    assert_non_null(strstr(sqlite3_errmsg(c.db), "no trace"));
    sqlite3_finalize(st);
    char sql[1400];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM calls('%s') WHERE seq < 100", trace_path);
    int64_t want = 0;
    for (int k = 0; k < N_REC; k++)
        want += !is_bwd(k) && SEQ(k) < 100;
    assert_int_equal(q_int(c.db, sql), want);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM calls WHERE trace = '%s'", trace_path);
    assert_int_equal(q_int(c.db, sql), N_REC - N_REC / 5);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM calls('%s/missing.ftdb')", dir);
    assert_int_equal(sqlite3_prepare_v2(c.db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ERROR);
    assert_non_null(strstr(sqlite3_errmsg(c.db), "missing.ftdb"));
    sqlite3_finalize(st);
    conn_close(&c);
}

static void test_sql_decisions_match_the_replay(void **state)
{
    (void)state;
    conn c;
    conn_open(&c, 1);
    ft_replay_result *res = malloc(sizeof *res);
    assert_non_null(res);
    ft_err err = {0};
    assert_int_equal(ft_replay_trace(c.t, NULL, res, &err), FT_OK);
    char sql[512];
    for (uint32_t p = 0; p < res->n_policies; p++) {
        const ft_policy_result *q = &res->pol[p];
        const char *name = ft_policy_name(q->policy);
        /* one policy asked for: the engine replays only it, with the same decisions */
        snprintf(sql, sizeof sql, "SELECT sum(build) FROM decisions WHERE policy = '%s'", name);
        assert_int_equal(q_int(c.db, sql), q->builds);
        snprintf(sql, sizeof sql, "SELECT sum(reset) FROM decisions WHERE policy = '%s'", name);
        assert_int_equal(q_int(c.db, sql), q->resets);
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM decisions WHERE policy = '%s' AND stale <> 'none'", name);
        assert_int_equal(q_int(c.db, sql), q->calls - q->stale[FT_STALE_NONE]);
        /* all policies at once: the same per policy */
        snprintf(sql, sizeof sql,
                 "SELECT b FROM (SELECT policy, sum(build) AS b FROM decisions GROUP BY policy) "
                 "WHERE policy = '%s'",
                 name);
        assert_int_equal(q_int(c.db, sql), q->builds);
    }
    /* a seq bound: the calls up to it, under every policy */
    int64_t want = 0;
    for (int k = 0; k < N_REC; k++)
        want += !is_bwd(k) && SEQ(k) <= 300;
    assert_int_equal(q_int(c.db, "SELECT count(*) FROM decisions WHERE seq <= 300"),
                     want * (int64_t)res->n_policies);
    assert_int_equal(q_int(c.db, "SELECT count(*) FROM decisions WHERE policy = 'nosuch'"), 0);
    free(res);
    conn_close(&c);
}

/* decisions carries each call's step and phase (NULL where not recorded), and the same replay
 * serves a join's lookups: with calls outside (CROSS JOIN keeps that order), every outer row's
 * `d.seq = c.seq` goes on with the replay held, so the join costs about one replay; a restart
 * per outer row made it quadratic. A seq lookup into calls searches its chunk. */
static void test_sql_decisions_step_phase_and_joins(void **state)
{
    (void)state;
    conn c;
    conn_open(&c, 1);
    int64_t want_step = 0, want_phase = 0, n_calls = 0;
    for (int k = 0; k < N_REC; k++) {
        if (is_bwd(k)) continue;
        n_calls++;
        want_step += k / 50;
        want_phase += k % 3 != 1;
    }
    const int64_t np = q_int(c.db, "SELECT count(DISTINCT policy) FROM decisions");
    assert_true(np > 1);
    assert_int_equal(q_int(c.db, "SELECT sum(step) FROM decisions"), want_step * np);
    assert_int_equal(q_int(c.db, "SELECT count(phase) FROM decisions"), want_phase * np);
    assert_int_equal(q_int(c.db, "SELECT count(*) FROM decisions d JOIN calls c USING (seq) "
                                 "WHERE d.phase IS NOT c.phase OR d.step IS NOT c.step"),
                     0);
    /* the join both ways, and the inner lookups of a CROSS JOIN: the same rows as decisions */
    static const char *const joins[] = {
        "SELECT count(*) FROM calls c CROSS JOIN decisions d ON d.seq = c.seq",
        "SELECT count(*) FROM decisions d CROSS JOIN calls c ON c.seq = d.seq",
        "SELECT count(*) FROM calls c CROSS JOIN decisions d ON d.seq = c.seq AND d.policy = "
        "'te-3410'",
    };
    for (size_t i = 0; i < FT_ARRAY_LEN(joins); i++) {
        n_decoded = 0;
        int64_t got = q_int(c.db, joins[i]);
        assert_int_equal(got, i == 2 ? n_calls : n_calls * np);
        /* one replay (and the calls side) decodes each chunk about once, not once per row */
        if (n_decoded > 4 * (N_REC / CHUNK) + 8)
            fail_msg("%s: %lu chunks decoded for %d chunks", joins[i], n_decoded, N_REC / CHUNK);
    }
    assert_int_equal(q_int(c.db, "SELECT sum(d.build) FROM calls c CROSS JOIN decisions d ON "
                                 "d.seq = c.seq"),
                     q_int(c.db, "SELECT sum(build) FROM decisions"));
    conn_close(&c);
}

/* Every row of a query, each column's type and text, hashed in order. */
static uint64_t q_digest(sqlite3 *db, const char *sql, int64_t *n_rows)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    uint64_t h = 0;
    int rc;
    *n_rows = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ++*n_rows;
        for (int k = 0; k < sqlite3_column_count(st); k++) {
            const int type = sqlite3_column_type(st, k);
            const char *txt = (const char *)sqlite3_column_text(st, k);
            h = ft_hash64_seed(&type, sizeof type, h);
            if (txt) h = ft_hash64_seed(txt, strlen(txt), h);
        }
    }
    if (rc != SQLITE_DONE) fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return h;
}

/* decisions keeps the replay's decisions of a cursor (the store) and serves every rescan from
 * them: a CROSS JOIN with decisions inside, lookups out of seq order and a self-join replay the
 * trace once per cursor. With a memory budget the store does not fit, the rescans replay again
 * (the fallback); the rows are the same either way. */
static void test_sql_decisions_store_serves_rescans(void **state)
{
    (void)state;
    static const struct {
        const char *sql;
        unsigned long replays; /* with the store; 0: not checked */
    } qs[] = {
        {"SELECT c.seq, d.* FROM calls c CROSS JOIN decisions d WHERE c.seq < 40", 1},
        {"SELECT count(*), sum(d.build), sum(c.seq) FROM calls c CROSS JOIN decisions d", 1},
        {"SELECT d.seq, d.policy, d.plan FROM calls c CROSS JOIN decisions d "
         "ON d.seq = 2010 - c.seq",
         1},
        {"SELECT d.*, c.label FROM calls c CROSS JOIN decisions d ON d.seq = c.seq", 1},
        {"SELECT d.*, c.ns FROM decisions d CROSS JOIN calls c ON c.seq = d.seq", 1},
        {"SELECT c.seq, d.* FROM calls c CROSS JOIN decisions d ON d.seq BETWEEN c.seq AND "
         "c.seq + 6 WHERE c.seq > 1500",
         1},
        {"SELECT d.* FROM calls c CROSS JOIN decisions d ON d.seq = 2000 - c.seq AND "
         "d.policy = 'te-3410'",
         1},
        {"SELECT a.seq, a.policy, a.build, b.seq, b.stale FROM decisions a CROSS JOIN "
         "decisions b ON b.seq = 2000 - a.seq AND b.policy = a.policy",
         2},
        {"SELECT * FROM decisions WHERE seq > 700 AND seq <= 900", 1},
        {"SELECT * FROM decisions WHERE policy = 'te-pre3410'", 1},
        {"SELECT a.*, b.* FROM decisions a CROSS JOIN decisions b ON b.seq = a.seq + 2 "
         "WHERE a.policy = 'te-3410' AND b.policy = 'te-pre3410'",
         2},
    };
    conn c;
    conn_open(&c, 1);
    const uint64_t budget = ft_mem_budget();
    for (size_t i = 0; i < FT_ARRAY_LEN(qs); i++) {
        n_replays = 0;
        int64_t n_with, n_without;
        const uint64_t with = q_digest(c.db, qs[i].sql, &n_with);
        const unsigned long replays_with = n_replays;
        assert_int_equal(ft_sql_take_fallback(NULL), 0);
        if (qs[i].replays && replays_with != qs[i].replays)
            fail_msg("%s: %lu replays, want %lu", qs[i].sql, replays_with, qs[i].replays);
        /* a budget the decoders fit in but the store does not: the rescans replay again */
        ft_mem_budget_set(32 << 10);
        n_replays = 0;
        const uint64_t without = q_digest(c.db, qs[i].sql, &n_without);
        const unsigned long replays_without = n_replays;
        ft_mem_budget_set(budget);
        uint64_t share = 0;
        const int fell_back = ft_sql_take_fallback(&share);
        if (i < 3 && (!fell_back || share != 16 << 10))
            fail_msg("%s: the fallback not told (%d, %llu)", qs[i].sql, fell_back,
                     (unsigned long long)share);
        assert_true(n_with > 0);
        assert_int_equal(n_with, n_without);
        if (with != without) fail_msg("%s: rows differ without the store", qs[i].sql);
        if (i < 3 && replays_without <= 2)
            fail_msg("%s: %lu replays without the store", qs[i].sql, replays_without);
    }
    /* a policy's rows out of every policy's replay are those of its own replay */
    int64_t n_one, n_all;
    assert_int_equal(
        q_digest(c.db, "SELECT * FROM decisions WHERE policy = 'te-3410'", &n_one),
        q_digest(c.db, "SELECT * FROM decisions WHERE policy || '' = 'te-3410'", &n_all));
    assert_int_equal(n_one, n_all);
    conn_close(&c);
}

/* The README's `fusertrace sql run.ftdb "..."` examples print a figure in every column on a
 * synthetic trace (a sum over a column the trace does not record would print empty). */
static void test_sql_readme_examples_print_figures(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    size_t len = 0;
    char *readme = tu_read_file(FT_SOURCE_DIR "/README.md", &len);
    assert_non_null(readme);
    char demo[1200], cmd[4000], out[8192];
    tu_dir_path(demo, sizeof demo, dir, "readme-demo.ftdb");
    snprintf(cmd, sizeof cmd, "'%s' synth demo -o '%s' >/dev/null", cli, demo);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    int n = 0;
    static const char prefix[] = "$F sql run.ftdb \"";
    for (char *line = readme; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, prefix, sizeof prefix - 1)) continue;
        const char *q = line + sizeof prefix - 1, *e = strchr(q, '"');
        assert_non_null(e);
        snprintf(cmd, sizeof cmd, "'%s' sql '%s' \"%.*s\"", cli, demo, (int)(e - q), q);
        if (tu_sh(cmd, out, sizeof out)) fail_msg("%s failed:\n%s", cmd, out);
        if (!out[0] || strstr(out, "||") || strstr(out, "|\n") || out[0] == '|')
            fail_msg("%s: an empty column or no row:\n%s", cmd, out);
        n++;
    }
    assert_true(n >= 2);
    free(readme);
}

/* Every allocation of opening a trace and running a query (about 90 to 150 here), failed in
 * turn: an error (or the right answer, when the failure hits something optional), never a crash
 * or a leak. */
static void test_sql_out_of_memory_is_an_error(void **state)
{
    (void)state;
    static const char *const queries[] = {
        "SELECT count(*), sum(json_array_length(m_splits)) FROM calls WHERE seq < 300",
        "SELECT count(*) FROM backwards b JOIN calls c ON c.seq = b.call WHERE b.seq < 200",
        "SELECT sum(build) FROM decisions WHERE policy = 'te-3410' AND seq < 200",
    };
    for (size_t q = 0; q < FT_ARRAY_LEN(queries); q++) {
        /* the answer without failures */
        conn c;
        conn_open(&c, 1);
        int64_t want = q_int(c.db, queries[q]);
        conn_close(&c);
        int n_failed = 0, n_ok = 0;
        for (long n = 0; n < 300; n++) {
            long live = ft_alloc_live();
            ft_trace *t = NULL;
            sqlite3 *db = NULL;
            ft_err err = {0};
            assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
            ft_alloc_fail_after(n);
            int rc = ft_trace_open(trace_path, FT_OPEN_READ, &t, &err);
            if (!rc) rc = ft_sql_register(db, t, "t.ftdb", &err);
            if (!rc) {
                sqlite3_stmt *st = NULL;
                int src = sqlite3_prepare_v2(db, queries[q], -1, &st, NULL);
                if (src == SQLITE_OK) src = sqlite3_step(st);
                if (src == SQLITE_ROW) {
                    assert_int_equal(sqlite3_column_int64(st, 0), want);
                    n_ok++;
                } else {
                    if (src != SQLITE_NOMEM && src != SQLITE_ERROR)
                        fail_msg("%s, allocation %ld failed: status %d (%s)", queries[q], n, src,
                                 sqlite3_errmsg(db));
                    n_failed++;
                }
                sqlite3_finalize(st);
            } else {
                assert_int_equal(rc, FT_ENOMEM);
                n_failed++;
            }
            ft_alloc_fail_after(-1);
            assert_int_equal(sqlite3_close(db), SQLITE_OK);
            ft_trace_close(t);
            assert_int_equal(ft_alloc_live(), live);
        }
        /* the last runs failed nothing: every allocation of the query was tried */
        assert_true(n_ok > 0);
        assert_true(n_failed > 0);
    }
}

/* Copy the trace to name and flip a byte in the middle of its third chunk's data. */
static void make_damaged(char *out, size_t cap, const char *name)
{
    tu_dir_path(out, cap, dir, name);
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", trace_path, out);
    assert_int_equal(system(cmd), 0);
    sqlite3 *s = NULL;
    assert_int_equal(sqlite3_open(out, &s), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(s, "SELECT data FROM chunks WHERE id = 3", -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    int n = sqlite3_column_bytes(q, 0);
    assert_true(n > 8);
    unsigned char *d = malloc((size_t)n);
    assert_non_null(d);
    memcpy(d, sqlite3_column_blob(q, 0), (size_t)n);
    sqlite3_finalize(q);
    d[n / 2] ^= 0x55;
    assert_int_equal(
        sqlite3_prepare_v2(s, "UPDATE chunks SET data = ?1 WHERE id = 3", -1, &q, NULL), SQLITE_OK);
    sqlite3_bind_blob(q, 1, d, n, SQLITE_TRANSIENT);
    assert_int_equal(sqlite3_step(q), SQLITE_DONE);
    sqlite3_finalize(q);
    free(d);
    assert_int_equal(sqlite3_close(s), SQLITE_OK);
}

static void test_sql_damaged_chunk_is_a_corrupt_error(void **state)
{
    (void)state;
    char bad[1400];
    make_damaged(bad, sizeof bad, "bad.ftdb");
    ft_trace *t = NULL;
    ft_err err = {0};
    assert_int_equal(ft_trace_open(bad, FT_OPEN_READ, &t, &err), FT_OK);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
    assert_int_equal(ft_sql_register(db, t, "bad.ftdb", &err), FT_OK);
    /* a slice before the damage reads fine */
    assert_int_equal(q_int(db, "SELECT count(*) FROM calls WHERE seq < 40"), 15);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM calls", -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_CORRUPT);
    assert_non_null(strstr(sqlite3_errmsg(db), "chunk 3"));
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
    ft_trace_close(t);
    /* the command: exit 1 naming the chunk */
    char cmd[4000], out[2048];
    snprintf(cmd, sizeof cmd, "'%s' sql '%s' 'SELECT count(*) FROM calls' 2>&1", tu_cli(), bad);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "chunk 3"));
}

/* ---- the command --------------------------------------------------------------------------- */
/* The names in dir, sorted, space-separated. */
static void listing(char *out, size_t cap)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    assert_true(n >= 0);
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.')
            len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%s", len ? " " : "",
                                    names[i]->d_name);
        free(names[i]);
    }
    free(names);
}

static void test_sql_cli_outputs_and_errors(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char cmd[4000], out[8192], before[4096], after[4096];
    size_t len0 = 0, len1 = 0;
    char *bytes0 = tu_read_file(trace_path, &len0);
    assert_non_null(bytes0);
    listing(before, sizeof before);
    /* list mode: '|' between columns, NULL as empty */
    snprintf(cmd, sizeof cmd,
             "'%s' sql '%s' 'SELECT seq, label, mb, phase FROM calls WHERE seq BETWEEN 5 AND 8'",
             cli, trace_path);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    assert_string_equal(out, "5|layer.0||recompute\n7||1|\n");
    snprintf(cmd, sizeof cmd, "'%s' sql --header '%s' 'SELECT seq FROM calls LIMIT 1'", cli,
             trace_path);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    assert_string_equal(out, "seq\n5\n");
    /* CSV: a header row, quoting where needed */
    snprintf(cmd, sizeof cmd,
             "'%s' sql '%s' --csv \"SELECT seq, op_rg, 'a\\\"b' AS q FROM calls LIMIT 2\"", cli,
             trace_path);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    assert_string_equal(out, "seq,op_rg,q\n5,\"[0,0]\",\"a\"\"b\"\n7,[1],\"a\"\"b\"\n");
    /* JSON: an array of objects, NULL as null, numbers as numbers */
    snprintf(cmd, sizeof cmd,
             "'%s' sql '%s' --json 'SELECT seq, label, fuse_ns FROM calls WHERE seq < 8'", cli,
             trace_path);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    assert_string_equal(out, "[{\"seq\":5,\"label\":\"layer.0\",\"fuse_ns\":77},\n"
                             "{\"seq\":7,\"label\":null,\"fuse_ns\":null}]\n");
    /* the query from stdin, two statements, and the trace's own tables */
    snprintf(cmd, sizeof cmd,
             "printf 'SELECT count(*) FROM backwards;\\n SELECT count(*) FROM fusers;' | "
             "'%s' sql '%s'",
             cli, trace_path);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    assert_string_equal(out, "200\n2\n");
    /* a query from stdin is capped, not buffered whole: 17 MiB of blanks is an input error */
    snprintf(cmd, sizeof cmd, "head -c 17825792 /dev/zero | tr '\\0' ' ' | '%s' sql '%s' 2>&1", cli,
             trace_path);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "the query read from stdin is over 16 MiB"));
    /* a bad query: exit 2 naming the error */
    snprintf(cmd, sizeof cmd, "'%s' sql '%s' 'SELECT nosuch FROM calls' 2>&1", cli, trace_path);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "query error: no such column: nosuch"));
    /* writes are refused: the trace is read-only */
    snprintf(cmd, sizeof cmd, "'%s' sql '%s' 'DELETE FROM meta' 2>&1", cli, trace_path);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "readonly"));
    /* a file that is not a trace, and usage errors */
    snprintf(cmd, sizeof cmd, "'%s' sql '%s/nope.ftdb' 'SELECT 1' 2>&1", cli, dir);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "nope.ftdb"));
    snprintf(cmd, sizeof cmd, "'%s' sql 2>&1", cli);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "'%s' sql '%s' --bogus 2>&1", cli, trace_path);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    /* nothing appeared beside the trace, and its bytes are unchanged */
    listing(after, sizeof after);
    assert_string_equal(before, after);
    char *bytes1 = tu_read_file(trace_path, &len1);
    assert_non_null(bytes1);
    assert_true(len0 == len1 && !memcmp(bytes0, bytes1, len0));
    free(bytes0);
    free(bytes1);
}

static void test_sql_extension_loads_in_sqlite3_shell(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char cmd[8192], ext[2048], out[4096], before[4096], after[4096];
    snprintf(cmd, sizeof cmd, "'%s' sql --extension", cli);
    assert_int_equal(tu_sh(cmd, ext, sizeof ext), 0);
    ext[strcspn(ext, "\n")] = 0;
    assert_true(ext[0] == '/');
    struct stat sb;
    assert_int_equal(stat(ext, &sb), 0);
    if (tu_sh("command -v sqlite3 >/dev/null", NULL, 0) != 0) {
        print_message("sqlite3 shell not installed: skipping its part\n");
        skip();
    }
    /* a sanitizer build's extension needs the sanitizer runtime loaded first */
    char pre[1024];
    snprintf(cmd, sizeof cmd, "ldd '%s' | awk '/libasan/ {print $3; exit}'", ext);
    assert_int_equal(tu_sh(cmd, pre, sizeof pre), 0);
    pre[strcspn(pre, "\n")] = 0;
    char env[1200] = "";
    if (pre[0]) snprintf(env, sizeof env, "LD_PRELOAD='%s' ASAN_OPTIONS=detect_leaks=0 ", pre);
    listing(before, sizeof before);
    /* the trace as the shell's main database; the default read is that file */
    snprintf(cmd, sizeof cmd,
             "%ssqlite3 -readonly '%s' '.load %s' 'SELECT count(*), sum(n_tokens) FROM calls' "
             "'SELECT count(*) FROM backwards WHERE seq BETWEEN 405 AND 464' 2>&1",
             env, trace_path, ext);
    int64_t want_tok = 0;
    for (int k = 0; k < N_REC; k++)
        if (!is_bwd(k) && k % 3 != 2) want_tok += gen_n_tokens(k);
    char want[128];
    snprintf(want, sizeof want, "%d|%lld\n6\n", N_REC - N_REC / 5, (long long)want_tok);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    assert_string_equal(out, want);
    /* an in-memory shell naming the trace */
    snprintf(cmd, sizeof cmd,
             "%ssqlite3 :memory: '.load %s' \"SELECT count(*) FROM calls('%s') WHERE phase = "
             "'fwd'\" 2>&1",
             env, ext, trace_path);
    int64_t want_fwd = 0;
    for (int k = 0; k < N_REC; k++)
        want_fwd += !is_bwd(k) && k % 3 != 1 && k % 2;
    snprintf(want, sizeof want, "%lld\n", (long long)want_fwd);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    assert_string_equal(out, want);
    listing(after, sizeof after);
    assert_string_equal(before, after);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sql_calls_rows_match_records),
        cmocka_unit_test(test_sql_backwards_rows_match_records),
        cmocka_unit_test(test_sql_seq_constraints_decode_only_their_chunks),
        cmocka_unit_test(test_sql_splits_decoded_only_when_used),
        cmocka_unit_test(test_sql_join_backwards_to_calls),
        cmocka_unit_test(test_sql_named_trace_and_errors),
        cmocka_unit_test(test_sql_decisions_match_the_replay),
        cmocka_unit_test(test_sql_decisions_step_phase_and_joins),
        cmocka_unit_test(test_sql_decisions_store_serves_rescans),
        cmocka_unit_test(test_sql_readme_examples_print_figures),
        cmocka_unit_test(test_sql_out_of_memory_is_an_error),
        cmocka_unit_test(test_sql_damaged_chunk_is_a_corrupt_error),
        cmocka_unit_test(test_sql_cli_outputs_and_errors),
        cmocka_unit_test(test_sql_extension_loads_in_sqlite3_shell),
    };
    return cmocka_run_group_tests(tests, setup_trace, teardown_trace);
}
