/*
 * test_transient.c - transient fusers (TE's OperationFuser([op]) per call of a standalone op) and
 * fuser ends, end to end: the trace stores a fuser that repeats an earlier one's label and ops as
 * a compact instance, ends are recorded, imported, exported, verified, and the replay drops an
 * instance's state at its end without changing any figure: a trace with ends gives the same
 * reports and per-call decisions, byte for byte, as the same trace without them (every canned
 * trace with ends added after each instance's last call, and synth's moe-standalone with its ends
 * dropped), while holding only the instances alive. Also: what the recorder and the importer
 * refuse, what verify and the engine refuse in a crafted trace, the shared-oplist what-if, and the
 * memory of declared fusers that are never called or share one long op list.
 */
#define _GNU_SOURCE
#include "ft_hmap.h"
#include "ft_recorder.h"
#include "ft_replayer.h"
#include "ft_report.h"
#include "ft_synth.h"
#include "ft_trace_write.h"
#include "test_util.h"

#include <dirent.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[512];

static int setup(void **state)
{
    (void)state;
    return tu_dir_fresh(dir, sizeof dir, "test_transient");
}

static int teardown(void **state)
{
    (void)state;
    return tu_dir_remove(dir);
}

/* ---- sinks that rewrite a stream ------------------------------------------------------------ */
/* Forwards to down: every seq doubled (so that a fuser end fits after any record), and with
 * ends on, a fuser_end right after the last call of each instance (last[] from a first pass:
 * the instance's root id -> its last call seq). */
typedef struct rewrite {
    ft_sink down;
    int ends;      /* add ends */
    int drop_ends; /* drop the stream's own ends */
    ft_hmap root;  /* id of a declaration with "of" -> index into roots */
    int64_t roots[256];
    uint32_t n_roots;
    ft_hmap last; /* root id -> last call seq (first pass) */
    int pass;     /* 0: find the last calls, 1: forward */
} rewrite;

static int64_t rw_root(const rewrite *w, int64_t id)
{
    const uint32_t k = ft_hmap_get(&w->root, (uint64_t)id);
    return k == UINT32_MAX ? id : w->roots[k];
}

static int rw_header(void *ctx, const ft_header *h)
{
    rewrite *w = ctx;
    return w->pass ? w->down.header_fn(w->down.ctx, h) : FT_OK;
}

static int rw_fuser(void *ctx, const ft_fuser_def *f)
{
    rewrite *w = ctx;
    if (f->has_of && ft_hmap_get(&w->root, (uint64_t)f->id) == UINT32_MAX) {
        assert_true(w->n_roots < 256);
        w->roots[w->n_roots] = rw_root(w, f->of);
        assert_int_equal(ft_hmap_put(&w->root, (uint64_t)f->id, w->n_roots++), FT_OK);
    }
    return w->pass ? w->down.fuser_fn(w->down.ctx, f) : FT_OK;
}

static int rw_recipe(void *ctx, const ft_recipe_def *r)
{
    rewrite *w = ctx;
    return w->pass ? w->down.recipe_fn(w->down.ctx, r) : FT_OK;
}

static int rw_call(void *ctx, const ft_call *c)
{
    rewrite *w = ctx;
    const int64_t root = rw_root(w, c->fuser);
    if (!w->pass) {
        /* seqs fit in 32 bits in these streams: the map keeps them as values */
        assert_true(c->seq >= 0 && c->seq < (INT64_C(1) << 31));
        return ft_hmap_put(&w->last, (uint64_t)root, (uint32_t)c->seq);
    }
    ft_call d = *c;
    d.seq = 2 * c->seq;
    int rc = w->down.call_fn(w->down.ctx, &d);
    if (!rc && w->ends && ft_hmap_get(&w->last, (uint64_t)root) == (uint32_t)c->seq) {
        const ft_fuser_end e = {d.seq + 1, c->fuser}; /* the instance's latest declaration */
        rc = w->down.end_fn(w->down.ctx, &e);
    }
    return rc;
}

static int rw_backward(void *ctx, const ft_backward *b)
{
    rewrite *w = ctx;
    if (!w->pass) return FT_OK;
    ft_backward d = *b;
    d.seq = 2 * b->seq;
    d.call = 2 * b->call;
    return w->down.backward_fn(w->down.ctx, &d);
}

static int rw_end(void *ctx, const ft_fuser_end *e)
{
    rewrite *w = ctx;
    if (!w->pass || w->drop_ends) return FT_OK;
    ft_fuser_end d = {2 * e->seq, e->fuser};
    return w->down.end_fn(w->down.ctx, &d);
}

static const ft_err *rw_error(void *ctx)
{
    rewrite *w = ctx;
    return w->down.error_fn ? w->down.error_fn(w->down.ctx) : NULL;
}

static void rw_sink(rewrite *w, ft_sink *s)
{
    *s = (ft_sink){w, rw_header, rw_fuser, rw_recipe, rw_call, rw_backward, rw_error, rw_end};
}

/* Import stream (a JSONL file) through a rewrite into a new trace at path. */
static void record_rewritten(const char *stream, const char *path, int ends, uint32_t chunk)
{
    rewrite w;
    memset(&w, 0, sizeof w);
    w.ends = ends;
    w.drop_ends = 1; /* a stream's own ends (transient-standalone.jsonl): the rewrite's instead */
    ft_sink s;
    rw_sink(&w, &s);
    ft_err err = {0};
    for (w.pass = 0; w.pass < 2; w.pass++) {
        ft_rec *rec = NULL;
        if (w.pass) {
            remove(path);
            ft_rec_opts ro = {chunk, 0};
            assert_int_equal(ft_rec_open(path, &ro, &rec, &err), FT_OK);
            ft_rec_sink(rec, &w.down);
        }
        FILE *f = fopen(stream, "rb");
        assert_non_null(f);
        int rc = ft_jsonl_import(f, stream, &s, NULL, &err);
        fclose(f);
        if (rc) fail_msg("%s: %s", stream, ft_err_msg(&err));
        if (rec) assert_int_equal(ft_rec_close(rec), FT_OK);
        if (!w.pass) { /* the second pass declares them again */
            ft_hmap_free(&w.root);
            w.n_roots = 0;
        }
    }
    ft_hmap_free(&w.root);
    ft_hmap_free(&w.last);
}

/* ---- a replay's whole output ---------------------------------------------------------------- */
/* Everything a replay of path writes (text and JSON reports, the per-call and explain lines), in
 * one malloc'd string; *res gets the result. */
static char *replay_all(const char *path, uint32_t capacity, const ft_replay_filter *filter,
                        ft_replay_result *res)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    assert_non_null(f);
    ft_report_calls *w = NULL;
    ft_err err = {0};
    assert_int_equal(ft_report_calls_new(f, f, &w, &err), FT_OK);
    const ft_replay_observer *obs[1] = {ft_report_calls_observer(w)};
    ft_replay_opts o = {0};
    o.capacity = capacity;
    o.filter = filter;
    o.observers = obs;
    o.n_observers = 1;
    const char *paths[1] = {path};
    int rc = ft_replay_traces(paths, 1, &o, res, &err);
    if (rc) fail_msg("replay %s: %s", path, ft_err_msg(&err));
    ft_report_opts ro;
    ft_report_opts_init(&ro);
    assert_int_equal(ft_report_write_opts(f, res, NULL, FT_REPORT_TEXT, &ro, &err), FT_OK);
    assert_int_equal(ft_report_write_opts(f, res, NULL, FT_REPORT_JSON, &ro, &err), FT_OK);
    assert_int_equal(ft_report_recommendation(f, res, &ro, &err), FT_OK);
    ft_report_calls_free(w);
    fclose(f);
    return out;
}

static void assert_same_output(const char *what, const char *a, const char *b)
{
    if (strcmp(a, b)) {
        size_t i = 0;
        while (a[i] && a[i] == b[i])
            i++;
        fail_msg("%s: outputs differ at byte %zu: ...%.80s... vs ...%.80s...", what, i,
                 a + (i > 20 ? i - 20 : 0), b + (i > 20 ? i - 20 : 0));
    }
}

/* ---- ends change no figure ------------------------------------------------------------------ */
/* Every canned trace, seqs doubled and its own ends dropped, against the same with a fuser end
 * after each instance's last call (in chunks of 3 records too, so that ends, declarations and their
 * calls cross chunks): the same reports and per-call lines, byte for byte; the engine holds fewer
 * instances. */
static void test_ends_change_no_canned_report(void **state)
{
    (void)state;
    DIR *d = opendir(FT_SOURCE_DIR "/traces");
    assert_non_null(d);
    struct dirent *e;
    int checked = 0;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 7 || strcmp(e->d_name + n - 6, ".jsonl")) continue;
        char stream[1024], a[1024], b[1024], c[1024];
        snprintf(stream, sizeof stream, "%s/traces/%s", FT_SOURCE_DIR, e->d_name);
        tu_dir_path(a, sizeof a, dir, "no_ends.ftdb");
        tu_dir_path(b, sizeof b, dir, "ends.ftdb");
        tu_dir_path(c, sizeof c, dir, "ends_small.ftdb");
        record_rewritten(stream, a, 0, 0);
        record_rewritten(stream, b, 1, 0);
        record_rewritten(stream, c, 1, 3);
        ft_replay_result ra, rb, rc;
        char *oa = replay_all(a, 0, NULL, &ra), *ob = replay_all(b, 0, NULL, &rb),
             *oc = replay_all(c, 0, NULL, &rc);
        assert_same_output(e->d_name, oa, ob);
        assert_same_output(e->d_name, oa, oc);
        assert_true(rb.fusers_alive_max <= ra.fusers_alive_max);
        free(oa);
        free(ob);
        free(oc);
        /* LRU stores drop an ended instance's entries too */
        oa = replay_all(a, 1, NULL, &ra);
        ob = replay_all(c, 1, NULL, &rb);
        assert_same_output(e->d_name, oa, ob);
        free(oa);
        free(ob);
        checked++;
    }
    closedir(d);
    assert_true(checked >= 10);
}

/* Synth's moe-standalone (a transient fuser per standalone call, ended right after it) against
 * the same stream with its ends dropped: the same output, in big and in small chunks, with and
 * without a filter; with ends the engine holds a handful of instances, without them all. */
static void test_ends_change_no_synth_report(void **state)
{
    (void)state;
    char jsonl[1024], a[1024], b[1024], c[1024];
    tu_dir_path(jsonl, sizeof jsonl, dir, "ms.jsonl");
    tu_dir_path(a, sizeof a, dir, "ms_no_ends.ftdb");
    tu_dir_path(b, sizeof b, dir, "ms_ends.ftdb");
    tu_dir_path(c, sizeof c, dir, "ms_ends_small.ftdb");
    FILE *f = fopen(jsonl, "wb");
    assert_non_null(f);
    ft_jsonl_writer *jw = NULL;
    assert_int_equal(ft_jsonl_writer_new(f, &jw), FT_OK);
    ft_sink js;
    ft_jsonl_writer_sink(jw, &js);
    ft_err err = {0};
    ft_synth_param p[] = {{"steps", "6"}, {"standalone", "0.4"}, {"captured", "te-3410"}};
    assert_int_equal(ft_synth_run("moe-standalone", p, 3, 7, &js, &err), FT_OK);
    assert_int_equal(ft_jsonl_writer_finish(jw), FT_OK);
    ft_jsonl_writer_free(jw);
    fclose(f);
    /* the stream's own ends kept (b, c) or dropped (a); seqs doubled in all three */
    for (int k = 0; k < 3; k++) {
        rewrite w;
        memset(&w, 0, sizeof w);
        w.pass = 1;
        w.drop_ends = k == 0;
        ft_sink s;
        rw_sink(&w, &s);
        const char *path = k == 0 ? a : k == 1 ? b : c;
        remove(path);
        ft_rec *rec = NULL;
        ft_rec_opts ro = {k == 2 ? 5u : 0u, 0};
        assert_int_equal(ft_rec_open(path, &ro, &rec, &err), FT_OK);
        ft_rec_sink(rec, &w.down);
        FILE *in = fopen(jsonl, "rb");
        assert_non_null(in);
        int rc = ft_jsonl_import(in, jsonl, &s, NULL, &err);
        fclose(in);
        if (rc) fail_msg("%s", ft_err_msg(&err));
        assert_int_equal(ft_rec_close(rec), FT_OK);
        ft_trace *t;
        assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
        rc = ft_trace_verify(t, &err);
        if (rc) fail_msg("verify %s: %s", path, ft_err_msg(&err));
        assert_int_equal(ft_trace_n_fuser_ends(t) != 0, k != 0);
        ft_trace_close(t);
    }
    ft_replay_filter filt = {"*layers.1*", NULL, 0, 0, 0};
    for (int fk = 0; fk < 2; fk++) {
        ft_replay_result ra, rb, rc;
        char *oa = replay_all(a, 0, fk ? &filt : NULL, &ra);
        char *ob = replay_all(b, 0, fk ? &filt : NULL, &rb);
        char *oc = replay_all(c, 0, fk ? &filt : NULL, &rc);
        assert_same_output("moe-standalone", oa, ob);
        assert_same_output("moe-standalone (chunks of 5)", oa, oc);
        /* transient fusers everywhere: every instance but the persistent 8 + 8 templates */
        assert_true(ra.transient_fusers > 100);
        assert_true(rb.fusers_alive_max < 40);
        assert_true(ra.fusers_alive_max > ra.transient_fusers / 2);
        free(oa);
        free(ob);
        free(oc);
    }
}

/* ---- the trace stores transient fusers compactly ------------------------------------------- */
static void rec_header(ft_rec *r)
{
    ft_header h = {0};
    h.te_version = "2.20.2";
    assert_int_equal(ft_rec_header(r, &h), FT_OK);
}

static const char *NORM = "[{\"type\":\"RMSNorm\",\"attrs\":{}}]";
static const uint8_t RG1[1] = {1};

static ft_call norm_call(int64_t seq, int64_t fuser)
{
    ft_call c;
    memset(&c, 0, sizeof c);
    c.seq = seq;
    c.fuser = fuser;
    c.flags = FT_CF_GRAD | FT_CF_INPUT_RG;
    c.n_op_rg = 1;
    c.op_rg = RG1;
    return c;
}

/* A fuser that repeats a row's label and ops right before its call takes no row; anything
 * between them (a recipe declaration, a backward record, an end, another call) leaves it a row;
 * export gives every declaration back where it stood. */
static void test_compact_instances(void **state)
{
    (void)state;
    char path[1024], js[1024];
    tu_dir_path(path, sizeof path, dir, "compact.ftdb");
    tu_dir_path(js, sizeof js, dir, "compact.jsonl");
    ft_rec *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(path, NULL, &r, &err), FT_OK);
    rec_header(r);
    int64_t seq = 0, id = 1;
    ft_call c;
    assert_int_equal(ft_rec_fuser(r, id, "m.norm", NORM), FT_OK); /* the template: a row */
    c = norm_call(seq++, id);
    assert_int_equal(ft_rec_call(r, &c), FT_OK);
    for (int i = 0; i < 100; i++) { /* 100 compact instances */
        id++;
        assert_int_equal(i % 2 ? ft_rec_fuser(r, id, "m.norm", NORM) : ft_rec_fuser_like(r, id, 1),
                         FT_OK);
        c = norm_call(seq++, id);
        assert_int_equal(ft_rec_call(r, &c), FT_OK);
        ft_fuser_end e = {seq++, id};
        assert_int_equal(ft_rec_fuser_end(r, &e), FT_OK);
    }
    /* a recipe declared between: a row */
    assert_int_equal(ft_rec_fuser(r, ++id, "m.norm", NORM), FT_OK);
    assert_int_equal(ft_rec_recipe(r, 1, "MXFP8BlockScaling", 9, "{}"), FT_OK);
    c = norm_call(seq++, id);
    assert_int_equal(ft_rec_call(r, &c), FT_OK);
    /* a backward between: a row */
    assert_int_equal(ft_rec_fuser(r, ++id, "m.norm", NORM), FT_OK);
    ft_backward b = {seq++, 0, 0, 0};
    assert_int_equal(ft_rec_backward(r, &b), FT_OK);
    c = norm_call(seq++, id);
    assert_int_equal(ft_rec_call(r, &c), FT_OK);
    /* ended before any call: a row, and its end */
    assert_int_equal(ft_rec_fuser(r, ++id, "m.norm", NORM), FT_OK);
    ft_fuser_end e0 = {seq++, id};
    assert_int_equal(ft_rec_fuser_end(r, &e0), FT_OK);
    /* another label: a row of its own (a new template) */
    assert_int_equal(ft_rec_fuser(r, ++id, "m.other", NORM), FT_OK);
    c = norm_call(seq++, id);
    assert_int_equal(ft_rec_call(r, &c), FT_OK);
    /* a compact instance called twice, in two chunks */
    assert_int_equal(ft_rec_fuser_like(r, ++id, 1), FT_OK);
    c = norm_call(seq++, id);
    assert_int_equal(ft_rec_call(r, &c), FT_OK);
    assert_int_equal(ft_rec_flush(r), FT_OK);
    c = norm_call(seq++, id);
    assert_int_equal(ft_rec_call(r, &c), FT_OK);
    assert_int_equal(ft_rec_close(r), FT_OK);

    ft_trace *t;
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    assert_int_equal(ft_trace_n_fusers(t), 5); /* template, recipe-between, backward-between,
                                                  ended-early, m.other */
    assert_int_equal(ft_trace_n_fuser_ends(t), 101);
    assert_int_equal(ft_trace_n_backwards(t), 1);
    assert_int_equal(ft_trace_verify(t, &err), FT_OK);
    /* export, import, export: the same records */
    FILE *f = fopen(js, "wb");
    ft_jsonl_writer *w = NULL;
    assert_int_equal(ft_jsonl_writer_new(f, &w), FT_OK);
    ft_sink ws;
    ft_jsonl_writer_sink(w, &ws);
    assert_int_equal(ft_trace_export(t, &ws, &err), FT_OK);
    ft_jsonl_writer_free(w);
    fclose(f);
    ft_replay_result res;
    assert_int_equal(ft_replay_trace(t, NULL, &res, &err), FT_OK);
    assert_int_equal(res.n_fusers, 106); /* 5 rows + 101 compact instances */
    assert_int_equal(res.transient_groups, 1);
    assert_int_equal(res.n_transient, 1);
    assert_string_equal(res.transient[0].label, "m.norm");
    assert_int_equal(res.transient[0].fusers, 104); /* the ended-early one was never called */
    ft_trace_close(t);
    char *text = tu_read_file(js, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "{\"t\":\"fuser_end\",\"seq\":2,\"fuser\":2}"));
    char path2[1024];
    tu_dir_path(path2, sizeof path2, dir, "compact2.ftdb");
    char cmd[4096], out[256];
    if (tu_cli()) {
        snprintf(cmd, sizeof cmd, "'%s' import '%s' -o '%s' 2>&1 && '%s' export '%s' 2>&1",
                 tu_cli(), js, path2, tu_cli(), path2);
        ft_buf again = {0};
        assert_int_equal(tu_sh_buf(cmd, &again), 0);
        const char *nl = strchr((const char *)again.data, '\n'); /* import's summary line */
        assert_non_null(nl);
        tu_assert_same_records("compact", text, nl + 1);
        ft_buf_free(&again);
        (void)out;
    }
    free(text);
}

/* Calls and ends of fusers that ended or were never declared, ids reused, "of" a compact
 * instance: refused by the recorder and by the importer, each naming what is wrong. */
static void test_refused_lifetimes(void **state)
{
    (void)state;
    char path[1024];
    tu_dir_path(path, sizeof path, dir, "refused.ftdb");
    ft_rec *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(path, NULL, &r, &err), FT_OK);
    rec_header(r);
    assert_int_equal(ft_rec_fuser(r, 1, "a", NORM), FT_OK);
    ft_call c = norm_call(0, 1);
    assert_int_equal(ft_rec_call(r, &c), FT_OK);
    assert_int_equal(ft_rec_fuser_like(r, 2, 1), FT_OK);
    c = norm_call(1, 2);
    assert_int_equal(ft_rec_call(r, &c), FT_OK);
    /* of a compact instance */
    assert_int_equal(ft_rec_fuser_of(r, 3, "a", NORM, 2), FT_EUNSUPPORTED);
    assert_non_null(strstr(ft_rec_error(r)->msg, "compact instance"));
    ft_fuser_end e = {2, 2};
    assert_int_equal(ft_rec_fuser_end(r, &e), FT_OK);
    c = norm_call(3, 2);
    assert_int_equal(ft_rec_call(r, &c), FT_EINVAL);
    assert_non_null(strstr(ft_rec_error(r)->msg, "fuser 2 has ended"));
    e = (ft_fuser_end){3, 2};
    assert_int_equal(ft_rec_fuser_end(r, &e), FT_EINVAL);
    assert_non_null(strstr(ft_rec_error(r)->msg, "has ended"));
    e = (ft_fuser_end){3, 9};
    assert_int_equal(ft_rec_fuser_end(r, &e), FT_EINVAL);
    assert_non_null(strstr(ft_rec_error(r)->msg, "fuser 9 is not declared"));
    assert_int_equal(ft_rec_fuser(r, 2, "a", NORM), FT_EINVAL); /* an ended compact id */
    assert_non_null(strstr(ft_rec_error(r)->msg, "already declared"));
    assert_int_equal(ft_rec_fuser_like(r, 4, 77), FT_EINVAL);
    /* a row's end ends the instance: its "of" continuation too */
    assert_int_equal(ft_rec_fuser(r, 5, "b", NORM), FT_OK);
    assert_int_equal(ft_rec_fuser_of(r, 6, "b", "[{\"type\":\"RMSNorm\",\"attrs\":{\"x\":1}}]", 5),
                     FT_OK);
    c = norm_call(4, 6);
    assert_int_equal(ft_rec_call(r, &c), FT_OK);
    e = (ft_fuser_end){5, 6};
    assert_int_equal(ft_rec_fuser_end(r, &e), FT_OK);
    c = norm_call(6, 5);
    assert_int_equal(ft_rec_call(r, &c), FT_EINVAL);
    assert_non_null(strstr(ft_rec_error(r)->msg, "fuser 5 has ended"));
    assert_int_equal(ft_rec_close(r), FT_OK);

    /* the importer: the same mistakes in a stream, with the line named */
    static const char *const bad[][2] = {
        {"{\"t\":\"fuser_end\",\"seq\":1,\"fuser\":3}", "fuser 3 is not declared"},
        {"{\"t\":\"fuser_end\",\"seq\":1,\"fuser\":1}\n{\"t\":\"call\",\"seq\":2,\"fuser\":1,"
         "\"recipe\":null,\"grad\":true,\"input_rg\":true,\"op_rg\":[true],\"device\":0}",
         ":5: field 'fuser': fuser 1 has ended"},
        {"{\"t\":\"fuser_end\",\"seq\":1,\"fuser\":1}\n{\"t\":\"fuser_end\",\"seq\":2,\"fuser\":1}",
         ":5: field 'fuser': fuser 1 has ended"},
        {"{\"t\":\"fuser_end\",\"seq\":0,\"fuser\":1}", "does not increase"},
        {"{\"t\":\"fuser_end\",\"seq\":1}", "field 'fuser': missing"},
        {"{\"t\":\"fuser_end\",\"seq\":1,\"fuser\":1}\n{\"t\":\"fuser\",\"id\":1,\"ops\":[{"
         "\"type\":"
         "\"RMSNorm\"}]}",
         "fuser 1 is already declared"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "{\"t\":\"header\",\"format\":\"fusertrace-capture\",\"version\":1}\n"
                 "{\"t\":\"fuser\",\"id\":1,\"ops\":[{\"type\":\"RMSNorm\"}]}\n"
                 "{\"t\":\"call\",\"seq\":0,\"fuser\":1,\"recipe\":null,\"grad\":true,"
                 "\"input_rg\":true,\"op_rg\":[true],\"device\":0}\n%s\n",
                 bad[k][0]);
        for (unsigned fast = 0; fast < 2; fast++) {
            FILE *f = fmemopen(text, strlen(text), "rb");
            ft_sink s = {0};
            s.header_fn = NULL;
            err = (ft_err){0};
            int rc =
                ft_jsonl_import_ex(f, "s.jsonl", &s, NULL, fast ? 0 : FT_JSONL_NO_FAST_PATH, &err);
            fclose(f);
            assert_int_equal(rc, FT_EINVAL);
            if (!strstr(err.msg, bad[k][1])) fail_msg("case %zu: %s", k, err.msg);
        }
    }
}

/* A crafted trace whose chunk calls a compact instance after its end: verify names it, the
 * replay refuses it (a damaged trace never gives a silently different answer). */
static void test_crafted_call_after_end(void **state)
{
    (void)state;
    char path[1024];
    tu_dir_path(path, sizeof path, dir, "crafted.ftdb");
    remove(path);
    ft_trace *t = NULL;
    ft_err err = {0};
    assert_int_equal(ft_trace_open(path, FT_OPEN_CREATE, &t, &err), FT_OK);
    ft_header h = {0};
    h.env_json = h.extra_json = "{}";
    assert_int_equal(ft_trace_w_header(t, &h), FT_OK);
    assert_int_equal(ft_trace_w_fuser(t, 1, "m", "[{\"attrs\":{},\"type\":\"RMSNorm\"}]", 1, 0),
                     FT_OK);
    ft_chunk_enc *e = NULL;
    assert_int_equal(ft_chunk_enc_new(&e), FT_OK);
    ft_call c = norm_call(0, 1);
    assert_int_equal(ft_chunk_enc_call(e, &c, 0, -1, 0), FT_OK);
    c = norm_call(1, 2); /* compact instance 2 of row 0 */
    c.flags |= FT_CF_INSTANCE | FT_CF_NEW_FUSER;
    assert_int_equal(ft_chunk_enc_call(e, &c, 0, -1, 0), FT_OK);
    assert_int_equal(ft_chunk_enc_end(e, 2, 0, 1, 2), FT_OK);
    c = norm_call(3, 2); /* after its end */
    c.flags |= FT_CF_INSTANCE;
    assert_int_equal(ft_chunk_enc_call(e, &c, 0, -1, 0), FT_OK);
    ft_buf blob = {0};
    ft_chunk_info info;
    assert_int_equal(ft_chunk_enc_finish(e, 1, &blob, &info, &err), FT_OK);
    assert_int_equal(info.n_ends, 1);
    assert_int_equal(ft_trace_w_chunk(t, &info, blob.data, blob.len), FT_OK);
    assert_int_equal(ft_trace_w_finish(t), FT_OK);
    ft_trace_close(t);
    ft_chunk_enc_free(e);
    ft_buf_free(&blob);
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    assert_int_equal(ft_trace_verify(t, &err), FT_ECORRUPT);
    assert_non_null(strstr(err.msg, "call seq 3 (fuser 2) names a compact instance that is not "
                                    "alive"));
    ft_replay_result res;
    assert_int_equal(ft_replay_trace(t, NULL, &res, &err), FT_ECORRUPT);
    assert_non_null(strstr(err.msg, "call seq 3: fuser 2 is not alive"));
    ft_trace_close(t);
}

/* ---- the what-if and the reports ------------------------------------------------------------ */
/* moe-standalone: every transient fuser builds under every per-fuser policy; shared-oplist builds
 * once per op list and key, and is stale exactly where te-3410 is; the reports group the
 * transient fusers by label and the recommendation says that no per-fuser key saves them. */
static void test_shared_oplist_and_reports(void **state)
{
    (void)state;
    char path[1024];
    tu_dir_path(path, sizeof path, dir, "shared.ftdb");
    remove(path);
    ft_rec *rec = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(path, NULL, &rec, &err), FT_OK);
    ft_sink s;
    ft_rec_sink(rec, &s);
    ft_synth_param p[] = {
        {"steps", "4"}, {"standalone", "0.8"}, {"recipe", "nvfp4"}, {"detour_recipe", "mxfp8"}};
    assert_int_equal(ft_synth_run("moe-standalone", p, 4, 3, &s, &err), FT_OK);
    assert_int_equal(ft_rec_close(rec), FT_OK);
    ft_replay_result res;
    char *out = replay_all(path, 0, NULL, &res);
    uint32_t k3410 = UINT32_MAX, ksh = UINT32_MAX;
    for (uint32_t q = 0; q < res.n_policies; q++) {
        if (!strcmp(ft_policy_name(res.pol[q].policy), "te-3410")) k3410 = q;
        if (!strcmp(ft_policy_name(res.pol[q].policy), "shared-oplist")) ksh = q;
    }
    assert_true(k3410 != UINT32_MAX && ksh != UINT32_MAX);
    const ft_policy_result *te = &res.pol[k3410], *sh = &res.pol[ksh];
    /* a transient fuser is called once (and again at its recompute, as a new fuser) */
    assert_true(te->transient_builds >= res.transient_fusers);
    assert_true(sh->transient_builds < res.transient_fusers / 10);
    assert_true(sh->builds < te->builds);
    assert_int_equal(sh->resets, te->resets); /* the recipe state stays per fuser */
    assert_true(res.transient_groups >= 8);   /* 4 layers x (norm, router) */
    assert_int_equal(res.n_transient, FT_TRANSIENT_GROUPS);
    assert_non_null(strstr(out, "what-if"));
    assert_non_null(strstr(out, "\"transient\""));
    assert_non_null(strstr(out, "decoder.layers.0.input_layernorm x "));
    assert_non_null(strstr(out, "no per-fuser cache key can save"));
    /* the JSON recommendation says it too, with shared-oplist's figure */
    const char *js = strstr(out, "\"recommendation\"");
    assert_non_null(js);
    assert_non_null(strstr(js, "\"shared_oplist_builds\""));
    free(out);
}

/* ---- memory of declared fusers -------------------------------------------------------------- */
static size_t heap_used(void)
{
#ifdef __GLIBC__
    return mallinfo2().uordblks;
#else
    return 0;
#endif
}

/* 5,000 fusers sharing one 4,096-op list cost one parse, not 5,000 (issue 22 item 12: 6 GB), and
 * 10^5 fusers declared but never called cost the engine and model a few dozen bytes each (1.6 KB
 * each before). */
static void test_declared_fusers_memory(void **state)
{
    (void)state;
    ft_buf ops = {0};
    assert_int_equal(ft_buf_printf(&ops, "["), FT_OK);
    for (int i = 0; i < 4096; i++)
        assert_int_equal(ft_buf_printf(&ops,
                                       "%s{\"attrs\":{\"in_features\":64,\"out_features\":64},"
                                       "\"type\":\"BasicLinear\"}",
                                       i ? "," : ""),
                         FT_OK);
    assert_int_equal(ft_buf_printf(&ops, "]"), FT_OK);
    assert_int_equal(ft_buf_append(&ops, "", 1), FT_OK);
    enum { N_SHARED = 5000, N_IDLE = 100000 };
    ft_fuser_def *f = calloc(N_IDLE, sizeof *f);
    assert_non_null(f);
    for (uint32_t i = 0; i < N_SHARED; i++)
        f[i] = (ft_fuser_def){i + 1, NULL, (const char *)ops.data, 4096, 0, 0};
    const size_t h0 = heap_used();
    ft_replay *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_replay_new(f, N_SHARED, NULL, 0, NULL, NULL, &r, &err), FT_OK);
    const size_t shared = heap_used() - h0;
    ft_replay_free(r);
    printf("  5000 fusers x one 4096-op list: %.1f MB in the engine and model\n",
           (double)shared / 1e6);
    if (h0) assert_true(shared < 64u << 20);
    static const char *small = "[{\"attrs\":{},\"type\":\"RMSNorm\"}]";
    for (uint32_t i = 0; i < N_IDLE; i++)
        f[i] = (ft_fuser_def){i + 1, NULL, small, 1, 0, 0};
    const size_t h1 = heap_used();
    assert_int_equal(ft_replay_new(f, N_IDLE, NULL, 0, NULL, NULL, &r, &err), FT_OK);
    const size_t idle = heap_used() - h1;
    ft_replay_free(r);
    printf("  %d declared fusers never called: %.1f bytes each in the engine and model\n", N_IDLE,
           (double)idle / N_IDLE);
    if (h1) assert_true(idle / N_IDLE < 64);
    free(f);
    ft_buf_free(&ops);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ends_change_no_canned_report),
        cmocka_unit_test(test_ends_change_no_synth_report),
        cmocka_unit_test(test_compact_instances),
        cmocka_unit_test(test_refused_lifetimes),
        cmocka_unit_test(test_crafted_call_after_end),
        cmocka_unit_test(test_shared_oplist_and_reports),
        cmocka_unit_test(test_declared_fusers_memory),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
