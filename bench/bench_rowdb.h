/*
 * bench_rowdb.h - shared by bench_recorder and bench_size: a sink that keeps a record stream in
 * memory (so timing excludes generation), and the row-per-call SQLite baseline (one table, one
 * INSERT per record inside one transaction, WAL; op_rg and m_splits as BLOBs of their raw
 * bytes, optional fields as NULL).
 */
#ifndef FT_BENCH_ROWDB_H
#define FT_BENCH_ROWDB_H

#define _POSIX_C_SOURCE 200809L
#include "bench_util.h"
#include "ft_recorder.h"
#include "ft_synth.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- in-memory stream --------------------------------------------------------------------- */
typedef struct mem_rec {
    int kind; /* FT_REC_CALL / FT_REC_BACKWARD / 2 fuser / 3 recipe / 4 header */
    union {   /* compact, so replaying touches little memory besides the payloads */
        ft_call c;
        ft_backward b;
        ft_fuser_def f;
        ft_recipe_def r;
        ft_header *h;
    } u;
} mem_rec;

typedef struct mem_stream {
    mem_rec *v;
    size_t n, cap;
    uint64_t n_calls, n_bwd;
    uint64_t limit_calls; /* stop accepting calls beyond this (0 = no limit) */
} mem_stream;

/* Record payloads (op_rg, split sizes, phases) are bump-allocated in stream order, so a replay
 * reads memory sequentially like a producer handing over fresh data would. */
static char *arena_cur, *arena_end;

static char *dupn(const void *p, size_t n)
{
    size_t need = (n + 15) & ~(size_t)15;
    if (!need) need = 16;
    if (!arena_cur || (size_t)(arena_end - arena_cur) < need) {
        size_t cap = need > (64u << 20) ? need : (64u << 20);
        arena_cur = malloc(cap); /* never freed: the benchmark exits */
        if (!arena_cur) {
            fprintf(stderr, "out of memory\n");
            exit(3);
        }
        arena_end = arena_cur + cap;
    }
    char *d = arena_cur;
    arena_cur += need;
    if (n) memcpy(d, p, n);
    return d;
}

static char *dups(const char *s)
{
    return s ? dupn(s, strlen(s) + 1) : NULL;
}

static mem_rec *ms_push(mem_stream *m)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 4096;
        m->v = realloc(m->v, m->cap * sizeof *m->v);
        if (!m->v) {
            fprintf(stderr, "out of memory\n");
            exit(3);
        }
    }
    mem_rec *r = &m->v[m->n++];
    memset(r, 0, sizeof *r);
    return r;
}

static int ms_header(void *ctx, const ft_header *h)
{
    mem_rec *r = ms_push(ctx);
    r->kind = 4;
    ft_header *c = malloc(sizeof *c);
    if (!c) return FT_ENOMEM;
    *c = *h;
    c->te_version = dups(h->te_version);
    c->torch_version = dups(h->torch_version);
    c->host = dups(h->host);
    c->started_at = dups(h->started_at);
    c->env_json = dups(h->env_json);
    c->extra_json = dups(h->extra_json);
    r->u.h = c;
    return FT_OK;
}

static int ms_fuser(void *ctx, const ft_fuser_def *f)
{
    mem_rec *r = ms_push(ctx);
    r->kind = 2;
    r->u.f = *f;
    r->u.f.label = dups(f->label);
    r->u.f.ops_json = dups(f->ops_json);
    return FT_OK;
}

static int ms_recipe(void *ctx, const ft_recipe_def *d)
{
    mem_rec *r = ms_push(ctx);
    r->kind = 3;
    r->u.r = *d;
    r->u.r.type = dups(d->type);
    r->u.r.attrs_json = dups(d->attrs_json);
    return FT_OK;
}

static int ms_call(void *ctx, const ft_call *c)
{
    mem_stream *m = ctx;
    if (m->limit_calls && m->n_calls >= m->limit_calls) return FT_ERANGE; /* enough */
    mem_rec *r = ms_push(m);
    r->kind = FT_REC_CALL;
    r->u.c = *c;
    r->u.c.op_rg = (const uint8_t *)dupn(c->op_rg, c->n_op_rg);
    r->u.c.m_splits = (const int64_t *)dupn(c->m_splits, c->n_splits * sizeof(int64_t));
    r->u.c.phase = c->phase ? dups(c->phase) : NULL;
    m->n_calls++;
    return FT_OK;
}

static int ms_backward(void *ctx, const ft_backward *b)
{
    mem_stream *m = ctx;
    mem_rec *r = ms_push(m);
    r->kind = FT_REC_BACKWARD;
    r->u.b = *b;
    m->n_bwd++;
    return FT_OK;
}

static void mem_stream_sink(mem_stream *m, ft_sink *s)
{
    memset(s, 0, sizeof *s);
    s->ctx = m;
    s->header_fn = ms_header;
    s->fuser_fn = ms_fuser;
    s->recipe_fn = ms_recipe;
    s->call_fn = ms_call;
    s->backward_fn = ms_backward;
    s->end_fn = NULL; /* the benchmarks' streams have no fuser ends */
}

/* Feed the stream into a sink. */
static int mem_stream_play(const mem_stream *m, ft_sink *s)
{
    int rc = FT_OK;
    for (size_t i = 0; i < m->n && !rc; i++) {
        const mem_rec *r = &m->v[i];
        switch (r->kind) {
        case FT_REC_CALL:
            rc = s->call_fn(s->ctx, &r->u.c);
            break;
        case FT_REC_BACKWARD:
            rc = s->backward_fn(s->ctx, &r->u.b);
            break;
        case 2:
            rc = s->fuser_fn(s->ctx, &r->u.f);
            break;
        case 3:
            rc = s->recipe_fn(s->ctx, &r->u.r);
            break;
        default:
            rc = s->header_fn(s->ctx, r->u.h);
            break;
        }
    }
    return rc;
}

/* A synth scenario into memory (calls beyond limit_calls are cut off). */
static int mem_stream_synth(mem_stream *m, const char *scenario, const ft_synth_param *p,
                            uint32_t n_p, uint64_t limit_calls)
{
    ft_sink s;
    ft_err err = {0};
    memset(m, 0, sizeof *m);
    m->limit_calls = limit_calls;
    mem_stream_sink(m, &s);
    int rc = ft_synth_run(scenario, p, n_p, 1, &s, &err);
    if (rc == FT_ERANGE && m->n_calls == limit_calls) rc = FT_OK;
    if (rc) fprintf(stderr, "synth: %s\n", ft_err_msg(&err));
    return rc;
}

/* ---- row-per-call SQLite baseline --------------------------------------------------------- */
typedef struct rowdb {
    sqlite3 *db;
    sqlite3_stmt *call, *bwd;
} rowdb;

static int rowdb_open(rowdb *r, const char *path)
{
    memset(r, 0, sizeof *r);
    ft_trace_remove(path);
    if (sqlite3_open(path, &r->db) != SQLITE_OK) return -1;
    const char *ddl = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                      "CREATE TABLE calls(seq INTEGER PRIMARY KEY, kind INTEGER, fuser INTEGER,"
                      " recipe INTEGER, flags INTEGER, device INTEGER, op_rg BLOB, m_splits BLOB,"
                      " step INTEGER, mb INTEGER, phase TEXT, ns INTEGER, fuse_ns INTEGER,"
                      " call INTEGER); BEGIN;";
    if (sqlite3_exec(r->db, ddl, NULL, NULL, NULL) != SQLITE_OK) return -1;
    if (sqlite3_prepare_v2(r->db,
                           "INSERT INTO calls(seq, kind, fuser, recipe, flags, device, op_rg, "
                           "m_splits, step, mb, phase, ns, fuse_ns) VALUES "
                           "(?,0,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &r->call, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_prepare_v2(r->db, "INSERT INTO calls(seq, kind, call, ns) VALUES (?,1,?,?)", -1,
                           &r->bwd, NULL) != SQLITE_OK)
        return -1;
    return 0;
}

static int rowdb_call(void *ctx, const ft_call *c)
{
    rowdb *r = ctx;
    sqlite3_stmt *s = r->call;
    uint32_t f = c->flags;
    sqlite3_bind_int64(s, 1, c->seq);
    sqlite3_bind_int64(s, 2, c->fuser);
    if (f & FT_CF_HAS_RECIPE)
        sqlite3_bind_int64(s, 3, c->recipe);
    else
        sqlite3_bind_null(s, 3);
    sqlite3_bind_int64(s, 4, f);
    sqlite3_bind_int64(s, 5, c->device);
    sqlite3_bind_blob(s, 6, c->op_rg, (int)c->n_op_rg, SQLITE_STATIC);
    if (f & FT_CF_HAS_SPLITS)
        sqlite3_bind_blob(s, 7, c->m_splits, (int)(c->n_splits * sizeof(int64_t)), SQLITE_STATIC);
    else
        sqlite3_bind_null(s, 7);
    (f & FT_CF_HAS_STEP) ? sqlite3_bind_int64(s, 8, c->step) : sqlite3_bind_null(s, 8);
    (f & FT_CF_HAS_MB) ? sqlite3_bind_int64(s, 9, c->mb) : sqlite3_bind_null(s, 9);
    (f & FT_CF_HAS_PHASE) ? sqlite3_bind_text(s, 10, c->phase, -1, SQLITE_STATIC)
                          : sqlite3_bind_null(s, 10);
    (f & FT_CF_HAS_NS) ? sqlite3_bind_int64(s, 11, c->ns) : sqlite3_bind_null(s, 11);
    (f & FT_CF_HAS_FUSE_NS) ? sqlite3_bind_int64(s, 12, c->fuse_ns) : sqlite3_bind_null(s, 12);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? FT_OK : FT_ESQL;
}

static int rowdb_backward(void *ctx, const ft_backward *b)
{
    rowdb *r = ctx;
    sqlite3_bind_int64(r->bwd, 1, b->seq);
    sqlite3_bind_int64(r->bwd, 2, b->call);
    b->has_ns ? sqlite3_bind_int64(r->bwd, 3, b->ns) : sqlite3_bind_null(r->bwd, 3);
    int rc = sqlite3_step(r->bwd);
    sqlite3_reset(r->bwd);
    return rc == SQLITE_DONE ? FT_OK : FT_ESQL;
}

static int rowdb_ignore_f(void *ctx, const ft_fuser_def *f)
{
    (void)ctx;
    (void)f;
    return FT_OK;
}

static int rowdb_ignore_r(void *ctx, const ft_recipe_def *d)
{
    (void)ctx;
    (void)d;
    return FT_OK;
}

static int rowdb_ignore_h(void *ctx, const ft_header *h)
{
    (void)ctx;
    (void)h;
    return FT_OK;
}

static void rowdb_sink(rowdb *r, ft_sink *s)
{
    memset(s, 0, sizeof *s);
    s->ctx = r;
    s->header_fn = rowdb_ignore_h;
    s->fuser_fn = rowdb_ignore_f;
    s->recipe_fn = rowdb_ignore_r;
    s->call_fn = rowdb_call;
    s->backward_fn = rowdb_backward;
    s->end_fn = NULL;
}

static int rowdb_close(rowdb *r)
{
    int rc = sqlite3_exec(r->db,
                          "COMMIT; PRAGMA wal_checkpoint(TRUNCATE); "
                          "PRAGMA journal_mode=DELETE;",
                          NULL, NULL, NULL);
    sqlite3_finalize(r->call);
    sqlite3_finalize(r->bwd);
    sqlite3_close(r->db);
    return rc == SQLITE_OK ? 0 : -1;
}

#endif /* FT_BENCH_ROWDB_H */
