/*
 * test_recorder.c - the recording API: round trip through the recorder and ft_trace_export,
 * declaration positions, dedup, input checks, the threading contract, a recorder killed with
 * SIGKILL, and allocation-failure injection.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_recorder.h"
#include "ft_synth.h"
#include "stream_gen.h"
#include "test_util.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char tmpdir[256];

static void tmp_path(char *buf, size_t cap, const char *name)
{
    tu_dir_path(buf, cap, tmpdir, name);
}

static int setup_dir(void **state)
{
    (void)state;
    return tu_dir_fresh(tmpdir, sizeof tmpdir, "test_recorder_tmp");
}

static int teardown_dir(void **state)
{
    (void)state;
    return tu_dir_remove(tmpdir);
}

static void record_stream(const char *path, const gen_params *p, const ft_rec_opts *o)
{
    ft_rec *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(path, o, &r, &err), FT_OK);
    ft_sink s;
    ft_rec_sink(r, &s);
    int rc = gen_stream(p, &s);
    if (rc) fail_msg("recording: %s", ft_err_msg(ft_rec_error(r)));
    assert_int_equal(ft_rec_close(r), FT_OK);
}

static void test_recorder_round_trip(void **state)
{
    (void)state;
    char path[400];
    tmp_path(path, sizeof path, "rt.ftdb");
    gen_params p = {7, 4, 32, 3, 5000, 2048, 1};
    ft_rec_opts o = {1000, 0}; /* several chunks */
    record_stream(path, &p, &o);
    digest_sink a, b;
    ft_sink sa, sb;
    digest_sink_init(&a, &sa);
    assert_int_equal(gen_stream(&p, &sa), FT_OK);
    ft_trace *t = NULL;
    ft_err err = {0};
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    digest_sink_init(&b, &sb);
    assert_int_equal(ft_trace_export(t, &sb, &err), FT_OK);
    assert_int_equal(a.n_calls, b.n_calls);
    assert_int_equal(a.n_bwd, b.n_bwd);
    assert_int_equal(a.n_fusers, b.n_fusers);
    assert_int_equal(a.n_recipes, b.n_recipes);
    assert_true(a.h == b.h);
    assert_int_equal(ft_trace_n_calls(t), a.n_calls);
    assert_int_equal(ft_trace_n_backwards(t), a.n_bwd);
    assert_true(ft_trace_n_chunks(t) > 1);
    assert_int_equal(ft_trace_verify(t, &err), FT_OK);
    ft_trace_close(t);
}

static const char *ops3 = "[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":4}},"
                          "{\"type\":\"ScaledSwiGLU\"},{\"type\":\"GroupedLinear\"}]";

static ft_call mk_call(int64_t seq, int64_t fuser, const uint8_t *rg, uint32_t n_rg,
                       const int64_t *sp, uint32_t n_sp)
{
    ft_call c = {0};
    c.seq = seq;
    c.fuser = fuser;
    c.flags = FT_CF_GRAD | (sp ? FT_CF_HAS_SPLITS : 0);
    c.n_op_rg = n_rg;
    c.op_rg = rg;
    c.n_splits = n_sp;
    c.m_splits = sp;
    return c;
}

/* Declarations interleaved with records (and after the last) come back where they stood. */
/* A fuser of 4000 ops: 5000 calls hold 20M op_rg entries, more than one chunk may expand to
 * (FT_CHUNK_MAX_OPRG_VALUES), so the encoder cuts the chunk early and every call reads back. */
static void test_recorder_big_fuser_chunks(void **state)
{
    (void)state;
    enum { N_OPS = 4000, N_CALLS = 5000 };
    char path[600];
    tmp_path(path, sizeof path, "bigfuser.ftdb");
    size_t cap = 32 + 20 * (size_t)N_OPS;
    char *ops = malloc(cap);
    uint8_t *rg = malloc(N_OPS);
    assert_non_null(ops);
    assert_non_null(rg);
    size_t len = 1;
    ops[0] = '[';
    for (int i = 0; i < N_OPS; i++)
        len += (size_t)snprintf(ops + len, cap - len, "%s{\"type\":\"GELU\"}", i ? "," : "");
    snprintf(ops + len, cap - len, "]");
    ft_rec *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(path, NULL, &r, &err), FT_OK);
    assert_int_equal(ft_rec_fuser(r, 1, "big", ops), FT_OK);
    for (int i = 0; i < N_CALLS; i++) {
        for (int k = 0; k < N_OPS; k++)
            rg[k] = (uint8_t)((k + i) % 3 == 0);
        ft_call c = mk_call(i, 1, rg, N_OPS, NULL, 0);
        assert_int_equal(ft_rec_call(r, &c), FT_OK);
    }
    assert_int_equal(ft_rec_close(r), FT_OK);
    ft_trace *t = NULL;
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    assert_true(ft_trace_n_chunks(t) >= 2);
    ft_reader *rd = NULL;
    assert_int_equal(ft_reader_open(t, 0, &rd), FT_OK);
    const ft_batch *b;
    int64_t seen = 0;
    while (ft_reader_next(rd, &b) == FT_OK && b)
        for (uint32_t i = 0; i < b->n; i++, seen++) {
            assert_int_equal(b->seq[i], seen);
            assert_int_equal(b->op_rg_off[i + 1] - b->op_rg_off[i], N_OPS);
            for (int k = 0; k < N_OPS; k += 997)
                assert_int_equal(b->op_rg[b->op_rg_off[i] + (uint32_t)k], (k + seen) % 3 == 0);
        }
    assert_int_equal(seen, N_CALLS);
    ft_reader_close(rd);
    ft_trace_close(t);
    free(ops);
    free(rg);
}

static void test_recorder_declarations_in_place(void **state)
{
    (void)state;
    char path[600];
    tmp_path(path, sizeof path, "decl.ftdb");
    ft_rec *r = NULL;
    ft_err err = {0};
    ft_rec_opts o = {2, 0}; /* tiny chunks: declarations also fall between chunks */
    assert_int_equal(ft_rec_open(path, &o, &r, &err), FT_OK);
    digest_sink a;
    ft_sink rs, as;
    ft_rec_sink(r, &rs);
    digest_sink_init(&a, &as);
    ft_sink *sinks[2] = {&rs, &as};
    uint8_t rg[3] = {1, 0, 1};
    int64_t sp[4] = {1, 2, 3, 4};
    ft_header h = {0};
    h.host = "node7";
    h.env_json = "{\"device_cc\":\"10.0\"}";
    h.extra_json = "{\"custom\":[1,2]}";
    for (int k = 0; k < 2; k++) {
        ft_sink *s = sinks[k];
        ft_fuser_def f1 = {10, "a", ops3, 3, 0, 0}, f2 = {20, NULL, ops3, 3, 0, 0};
        ft_recipe_def r1 = {5, "MXFP8BlockScaling", 1, "{}"},
                      r2 = {6, "NVFP4BlockScaling", 2, "{}"};
        ft_recipe_def r3 = {7, "NVFP4BlockScaling", 2, "{\"disable_rht\":true}"};
        ft_call c;
        ft_backward b = {0};
        assert_int_equal(s->header_fn(s->ctx, &h), FT_OK);
        assert_int_equal(s->fuser_fn(s->ctx, &f1), FT_OK);
        c = mk_call(0, 10, rg, 3, sp, 4);
        assert_int_equal(s->call_fn(s->ctx, &c), FT_OK);
        assert_int_equal(s->recipe_fn(s->ctx, &r1), FT_OK);
        assert_int_equal(s->fuser_fn(s->ctx, &f2), FT_OK);
        assert_int_equal(s->recipe_fn(s->ctx, &r2), FT_OK);
        c = mk_call(3, 20, rg, 3, NULL, 0);
        c.flags |= FT_CF_HAS_RECIPE;
        c.recipe = 6;
        assert_int_equal(s->call_fn(s->ctx, &c), FT_OK);
        b.seq = 4;
        b.call = 0;
        assert_int_equal(s->backward_fn(s->ctx, &b), FT_OK);
        c = mk_call(9, 10, rg, 3, sp, 4);
        assert_int_equal(s->call_fn(s->ctx, &c), FT_OK);
        assert_int_equal(s->recipe_fn(s->ctx, &r3), FT_OK);
    }
    assert_int_equal(ft_rec_close(r), FT_OK);
    ft_trace *t = NULL;
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    assert_string_equal(ft_trace_header(t)->host, "node7");
    assert_string_equal(ft_trace_header(t)->extra_json, "{\"custom\":[1,2]}");
    assert_false(ft_trace_header(t)->has_rank);
    digest_sink b2;
    ft_sink bs;
    digest_sink_init(&b2, &bs);
    assert_int_equal(ft_trace_export(t, &bs, &err), FT_OK);
    assert_true(a.h == b2.h);
    assert_int_equal(b2.n_recipes, 3);
    assert_int_equal(b2.n_fusers, 2);
    assert_int_equal(ft_trace_verify(t, &err), FT_OK);
    ft_trace_close(t);
}

/* Bad records are refused with FT_EINVAL/FT_ERANGE/FT_ESTATE naming the field; the recorder
 * stays usable and the trace holds only the good records. */
static void test_recorder_rejects_bad_records(void **state)
{
    (void)state;
    char path[600];
    tmp_path(path, sizeof path, "bad.ftdb");
    ft_rec *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(path, NULL, &r, &err), FT_OK);
    assert_int_equal(ft_rec_open(path, NULL, &(ft_rec *){NULL}, &err), FT_EINVAL);
    uint8_t rg[3] = {1, 0, 1}, badrg[3] = {1, 2, 0};
    int64_t sp[4] = {1, 2, 3, 4}, neg[4] = {5, -1, 0, 0}, big[4] = {INT64_MAX, 1, 0, 0};
    assert_int_equal(ft_rec_fuser(r, 1, NULL, ops3), FT_OK);
    ft_header h = {0};
    assert_int_equal(ft_rec_header(r, &h), FT_ESTATE); /* header after a declaration */
    assert_int_equal(ft_rec_recipe(r, 1, "MXFP8BlockScaling", 9, "{}"), FT_OK);
    ft_call c = mk_call(10, 1, rg, 3, sp, 4);
    assert_int_equal(ft_rec_call(r, &c), FT_OK);
    c.seq = 10;
    assert_int_equal(ft_rec_call(r, &c), FT_EINVAL); /* seq not increasing */
    assert_non_null(strstr(ft_rec_error(r)->msg, "does not increase"));
    c = mk_call(11, 2, rg, 3, sp, 4);
    assert_int_equal(ft_rec_call(r, &c), FT_EINVAL);
    assert_non_null(strstr(ft_rec_error(r)->msg, "'fuser'"));
    c = mk_call(11, 1, rg, 3, sp, 4);
    c.flags |= FT_CF_HAS_RECIPE;
    c.recipe = 3;
    assert_int_equal(ft_rec_call(r, &c), FT_EINVAL);
    assert_non_null(strstr(ft_rec_error(r)->msg, "'recipe'"));
    c = mk_call(11, 1, rg, 2, sp, 4);
    assert_int_equal(ft_rec_call(r, &c), FT_EINVAL);
    assert_non_null(strstr(ft_rec_error(r)->msg, "'op_rg'"));
    c = mk_call(11, 1, badrg, 3, sp, 4);
    assert_int_equal(ft_rec_call(r, &c), FT_EINVAL);
    c = mk_call(11, 1, rg, 3, sp, 2); /* fuser 1's num_groups is 4 */
    assert_int_equal(ft_rec_call(r, &c), FT_EINVAL);
    assert_non_null(strstr(ft_rec_error(r)->msg, "num_groups"));
    c = mk_call(11, 1, rg, 3, neg, 4);
    assert_int_equal(ft_rec_call(r, &c), FT_EINVAL);
    assert_non_null(strstr(ft_rec_error(r)->msg, "negative"));
    c = mk_call(11, 1, rg, 3, big, 4);
    assert_int_equal(ft_rec_call(r, &c), FT_ERANGE);
    c = mk_call(11, 1, rg, 3, sp, 4);
    c.flags |= 1u << 20;
    assert_int_equal(ft_rec_call(r, &c), FT_EINVAL);
    c = mk_call(11, 1, rg, 3, sp, 4);
    c.flags |= FT_CF_HAS_PHASE;
    c.phase = NULL;
    assert_int_equal(ft_rec_call(r, &c), FT_EINVAL);
    ft_backward b = {12, 11, 0, 0};
    assert_int_equal(ft_rec_backward(r, &b), FT_EINVAL); /* 11 is not a call */
    assert_non_null(strstr(ft_rec_error(r)->msg, "'call'"));
    b.call = 12;
    assert_int_equal(ft_rec_backward(r, &b), FT_EINVAL);
    b.call = 10;
    assert_int_equal(ft_rec_backward(r, &b), FT_OK);
    /* still usable */
    assert_int_equal(
        ft_rec_call_flat(r, 20, 1, 1, FT_CF_HAS_RECIPE, 3, 3, rg, -1, NULL, 0, 0, "fwd", 0, 0),
        FT_OK);
    assert_int_equal(ft_rec_call_flat(r, 21, 1, 0, FT_CF_HAS_MB, 0, 3, rg, 4, sp, 0, 2, NULL, 0, 0),
                     FT_OK);
    assert_int_equal(ft_rec_close(r), FT_OK);
    ft_trace *t = NULL;
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    assert_int_equal(ft_trace_n_calls(t), 3);
    assert_int_equal(ft_trace_n_backwards(t), 1);
    ft_reader *rd = NULL;
    const ft_batch *bt;
    assert_int_equal(ft_reader_open(t, FT_READ_SPLITS, &rd), FT_OK);
    assert_int_equal(ft_reader_next(rd, &bt), FT_OK);
    assert_non_null(bt);
    ft_call got;
    ft_batch_call(t, bt, 2, &got);
    assert_int_equal(got.seq, 20);
    assert_int_equal(got.device, 3);
    assert_string_equal(got.phase, "fwd");
    assert_int_equal(got.flags & FT_CF_HAS_SPLITS, 0);
    ft_batch_call(t, bt, 3, &got);
    assert_int_equal(got.n_splits, 4);
    assert_int_equal(got.m_splits[3], 4);
    assert_int_equal(got.mb, 2);
    assert_null(got.phase);
    ft_reader_close(rd);
    ft_trace_close(t);
}

/* Threading contract: one thread per handle; two handles on two files from two threads. */
typedef struct thread_job {
    char path[600];
    gen_params p;
    int rc;
} thread_job;

static void *record_thread(void *arg)
{
    thread_job *j = arg;
    ft_rec *r = NULL;
    ft_err err = {0};
    ft_rec_opts o = {700, 0};
    j->rc = ft_rec_open(j->path, &o, &r, &err);
    if (j->rc) return NULL;
    ft_sink s;
    ft_rec_sink(r, &s);
    j->rc = gen_stream(&j->p, &s);
    int rc = ft_rec_close(r);
    if (!j->rc) j->rc = rc;
    return NULL;
}

static void test_recorder_two_threads_two_files(void **state)
{
    (void)state;
    thread_job jobs[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        tmp_path(jobs[i].path, sizeof jobs[i].path, i ? "thread1.ftdb" : "thread0.ftdb");
        jobs[i].p = (gen_params){100 + (uint64_t)i, 3, 16, 2, 4000, 512, 1};
        assert_int_equal(pthread_create(&th[i], NULL, record_thread, &jobs[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(jobs[i].rc, FT_OK);
        digest_sink a, b;
        ft_sink sa, sb;
        digest_sink_init(&a, &sa);
        assert_int_equal(gen_stream(&jobs[i].p, &sa), FT_OK);
        ft_trace *t = NULL;
        ft_err err = {0};
        assert_int_equal(ft_trace_open(jobs[i].path, FT_OPEN_READ, &t, &err), FT_OK);
        digest_sink_init(&b, &sb);
        assert_int_equal(ft_trace_export(t, &sb, &err), FT_OK);
        assert_true(a.h == b.h);
        ft_trace_close(t);
    }
}

/* A recorder killed with SIGKILL leaves every committed chunk intact and a trace that verifies. */
static void test_recorder_sigkill_keeps_committed_chunks(void **state)
{
    (void)state;
    char path[600];
    tmp_path(path, sizeof path, "killed.ftdb");
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    const uint32_t chunk = 500;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* child: record forever, report each committed chunk */
        close(fds[0]);
        ft_rec *r = NULL;
        ft_err err = {0};
        ft_rec_opts o = {chunk, 0};
        if (ft_rec_open(path, &o, &r, &err)) _exit(1);
        uint64_t n = 0;
        if (ft_rec_fuser(r, 1, "l", ops3)) _exit(2);
        /* ft_rec_call commits a chunk every `chunk` calls: report each commit */
        for (;;) {
            uint8_t rg[3] = {1, 0, 1};
            int64_t sp[4] = {1, 2, 3, (int64_t)n % 7};
            ft_call c = mk_call((int64_t)n, 1, rg, 3, sp, 4);
            if (ft_rec_call(r, &c)) _exit(3);
            n++;
            if (n % chunk == 0) {
                char one = 'c';
                if (write(fds[1], &one, 1) != 1) _exit(4);
            }
        }
    }
    close(fds[1]);
    char buf;
    int reported = 0;
    while (reported < 5 && read(fds[0], &buf, 1) == 1)
        reported++;
    assert_int_equal(reported, 5);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    close(fds[0]);
    assert_true(WIFSIGNALED(st));
    ft_trace *t = NULL;
    ft_err err = {0};
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    uint64_t n = ft_trace_n_calls(t);
    assert_true(n >= 5 * chunk);
    assert_int_equal(n % chunk, 0);
    assert_string_equal(ft_trace_meta(t, "state"), "recording");
    assert_int_equal(ft_trace_verify(t, &err), FT_OK);
    /* every committed record is there, in order */
    ft_reader *rd = NULL;
    const ft_batch *b;
    int64_t expect = 0;
    assert_int_equal(ft_reader_open(t, FT_READ_SPLITS, &rd), FT_OK);
    while (ft_reader_next(rd, &b) == FT_OK && b)
        for (uint32_t i = 0; i < b->n; i++)
            assert_true(b->seq[i] == expect++);
    assert_int_equal((uint64_t)expect, n);
    ft_reader_close(rd);
    ft_trace_close(t);
}

/* Allocation failure at every point of the recording path: a clean error, no crash, no leak. */
static void test_recorder_alloc_failures(void **state)
{
    (void)state;
    char path[600];
    gen_params p = {3, 2, 8, 2, 300, 256, 1};
    ft_rec_opts o = {100, 0};
    long base = ft_alloc_live();
    int succeeded = 0;
    for (long n = 0; n < 100000 && !succeeded; n++) {
        tmp_path(path, sizeof path, "alloc.ftdb");
        ft_alloc_fail_after(n);
        ft_rec *r = NULL;
        ft_err err = {0};
        int rc = ft_rec_open(path, &o, &r, &err);
        if (rc == FT_OK) {
            ft_sink s;
            ft_rec_sink(r, &s);
            rc = gen_stream(&p, &s);
            if (rc) {
                assert_true(rc == FT_ENOMEM || rc == FT_ESTATE);
                ft_rec_abort(r);
            } else {
                rc = ft_rec_close(r);
            }
        } else {
            assert_true(rc == FT_ENOMEM);
            assert_null(r);
        }
        ft_alloc_fail_after(-1);
        assert_int_equal(ft_alloc_live(), base);
        if (rc == FT_OK) {
            succeeded = 1;
            ft_trace *t = NULL;
            assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
            assert_int_equal(ft_trace_n_calls(t), 300);
            ft_trace_close(t);
        }
    }
    assert_true(succeeded);
    /* the reader too */
    tmp_path(path, sizeof path, "alloc_read.ftdb");
    record_stream(path, &p, &o);
    succeeded = 0;
    for (long n = 0; n < 100000 && !succeeded; n++) {
        ft_err err = {0};
        ft_trace *t = NULL;
        ft_alloc_fail_after(n);
        int rc = ft_trace_open(path, FT_OPEN_READ, &t, &err);
        if (!rc) {
            digest_sink d;
            ft_sink s;
            digest_sink_init(&d, &s);
            rc = ft_trace_export(t, &s, &err);
            ft_trace_close(t);
        }
        ft_alloc_fail_after(-1);
        assert_true(rc == FT_OK || rc == FT_ENOMEM);
        assert_int_equal(ft_alloc_live(), base);
        succeeded = rc == FT_OK;
    }
    assert_true(succeeded);
}

/* The synth scenarios through the recorder and back. */
static void test_recorder_synth_round_trip(void **state)
{
    (void)state;
    for (uint32_t i = 0; i < ft_synth_n_scenarios(); i++) {
        const char *name = ft_synth_scenario_at(i)->name;
        ft_synth_param sp[] = {{"steps", "3"}};
        char path[600];
        tmp_path(path, sizeof path, "synth.ftdb");
        ft_rec *r = NULL;
        ft_err err = {0};
        ft_rec_opts o = {1500, 0};
        assert_int_equal(ft_rec_open(path, &o, &r, &err), FT_OK);
        ft_sink s;
        ft_rec_sink(r, &s);
        int rc = ft_synth_run(name, sp, 1, 9, &s, &err);
        if (rc) fail_msg("%s: %s", name, ft_err_msg(&err));
        assert_int_equal(ft_rec_close(r), FT_OK);
        digest_sink a, b;
        ft_sink sa, sb;
        digest_sink_init(&a, &sa);
        assert_int_equal(ft_synth_run(name, sp, 1, 9, &sa, &err), FT_OK);
        ft_trace *t = NULL;
        assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
        digest_sink_init(&b, &sb);
        assert_int_equal(ft_trace_export(t, &sb, &err), FT_OK);
        if (a.h != b.h) fail_msg("scenario %s does not round-trip", name);
        assert_int_equal(a.n_calls, b.n_calls);
        assert_int_equal(ft_trace_verify(t, &err), FT_OK);
        ft_trace_close(t);
    }
}

/* A trace can be read while it is being recorded: a reader sees every committed chunk and a
 * consistent digest (each commit rewrites it in the same transaction). */
static void test_recorder_live_reader(void **state)
{
    (void)state;
    char path[600];
    tmp_path(path, sizeof path, "live.ftdb");
    ft_rec *r = NULL;
    ft_err err = {0};
    ft_rec_opts o = {100, 0};
    assert_int_equal(ft_rec_open(path, &o, &r, &err), FT_OK);
    assert_int_equal(ft_rec_fuser(r, 1, "l", ops3), FT_OK);
    uint8_t rg[3] = {1, 0, 1};
    int64_t sp[4] = {1, 2, 3, 4};
    for (int64_t i = 0; i < 250; i++) {
        ft_call c = mk_call(i, 1, rg, 3, sp, 4);
        assert_int_equal(ft_rec_call(r, &c), FT_OK);
    }
    ft_trace *t = NULL;
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    assert_int_equal(ft_trace_n_calls(t), 200); /* two committed chunks; 50 pending */
    assert_string_equal(ft_trace_meta(t, "state"), "recording");
    assert_int_equal(ft_trace_verify(t, &err), FT_OK);
    ft_trace_close(t);
    assert_int_equal(ft_rec_flush(r), FT_OK);
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    assert_int_equal(ft_trace_n_calls(t), 250);
    ft_trace_close(t);
    assert_int_equal(ft_rec_close(r), FT_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recorder_round_trip),
        cmocka_unit_test(test_recorder_declarations_in_place),
        cmocka_unit_test(test_recorder_big_fuser_chunks),
        cmocka_unit_test(test_recorder_rejects_bad_records),
        cmocka_unit_test(test_recorder_two_threads_two_files),
        cmocka_unit_test(test_recorder_sigkill_keeps_committed_chunks),
        cmocka_unit_test(test_recorder_alloc_failures),
        cmocka_unit_test(test_recorder_synth_round_trip),
        cmocka_unit_test(test_recorder_live_reader),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
