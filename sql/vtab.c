/*
 * vtab.c - the `calls` and `backwards` virtual tables (ft_sql.h): one module per table over the
 * trace's streaming reader.
 *
 * Compiled twice: into the static ft_sql (with SQLITE_CORE, calling SQLite directly) for the
 * CLI, and into the loadable extension (without it, calling SQLite through the host's API table,
 * sqlite3ext.h). The traces themselves are read through ft_trace.h on their own read-only
 * connections.
 *
 * Planning: the hidden column `trace` is the table-valued-function argument; usable seq
 * constraints are handed to xFilter (idxStr holds one letter per argument: T trace, E =, L <,
 * M <=, G >, H >=) and narrowed to a chunk range with ft_trace_seq_chunks. SQLite still checks
 * the constraints itself (they are not omitted), so a bound only has to be conservative: a
 * non-numeric right-hand side simply reads every chunk.
 */
#include "sql_int.h"

SQLITE_EXTENSION_INIT3

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ---- the traces a connection has opened --------------------------------------------------- */
static void ctx_release(void *p)
{
    sql_ctx *c = p;
    if (--c->refs) return;
    for (sql_trace *s = c->open, *n; s; s = n) {
        n = s->next;
        ft_trace_close(s->t);
        ft_free(s->path);
        ft_free(s);
    }
    ft_free(c->dflt_name);
    ft_free(c);
}

/* ---- tables -------------------------------------------------------------------------------- */
enum {
    CC_SEQ,
    CC_FUSER,
    CC_LABEL,
    CC_OPS,
    CC_RECIPE,
    CC_RTYPE,
    CC_ROBJ,
    CC_RATTRS,
    CC_GRAD,
    CC_INPUT_RG,
    CC_OP_RG,
    CC_DEVICE,
    CC_STEP,
    CC_MB,
    CC_PHASE,
    CC_NS,
    CC_FUSE_NS,
    CC_REBUILT,
    CC_GRAPH,
    CC_N_TOKENS,
    CC_M_SPLITS,
    CC_CHUNK,
    CC_TRACE, /* hidden: the table-valued-function argument */
};
enum { BC_SEQ, BC_CALL, BC_NS, BC_CHUNK, BC_TRACE };

static const char calls_ddl[] =
    "CREATE TABLE x(seq INTEGER, fuser INTEGER, label TEXT, ops TEXT, recipe INTEGER, "
    "recipe_type TEXT, recipe_obj INTEGER, recipe_attrs TEXT, grad INTEGER, input_rg INTEGER, "
    "op_rg TEXT, device INTEGER, step INTEGER, mb INTEGER, phase TEXT, ns INTEGER, "
    "fuse_ns INTEGER, rebuilt INTEGER, graph INTEGER, n_tokens INTEGER, m_splits TEXT, "
    "chunk INTEGER, trace HIDDEN)";
static const char backwards_ddl[] =
    "CREATE TABLE x(seq INTEGER, call INTEGER, ns INTEGER, chunk INTEGER, trace HIDDEN)";

typedef struct sql_vtab {
    sqlite3_vtab base;
    sqlite3 *db;
    sql_ctx *ctx;
    int kind;    /* FT_REC_CALL or FT_REC_BACKWARD: the records this table shows */
    int col_seq; /* column numbers of seq and the hidden trace argument */
    int col_trace;
    int col_splits; /* m_splits, or -1 */
} sql_vtab;

typedef struct sql_cursor {
    sqlite3_vtab_cursor base;
    ft_trace *t;      /* the trace being read (owned by the context) */
    const char *path; /* its name, for the hidden column */
    ft_reader *r;
    unsigned rflags;   /* FT_READ_* the reader was opened with */
    const ft_batch *b; /* decoded chunk, or NULL */
    uint64_t bpos;     /* chunk position of b */
    uint64_t end;      /* one past the last chunk to read */
    uint32_t i;        /* current record of b */
    int64_t lo, hi;    /* seq bounds (inclusive) */
    int eof;
    int have_call; /* call holds record i */
    ft_call call;
    ft_buf json; /* scratch for op_rg / m_splits */
} sql_cursor;

int sql_vtab_err(sqlite3_vtab *vt, int rc, const char *fmt, const char *detail)
{
    sqlite3_free(vt->zErrMsg);
    vt->zErrMsg = sqlite3_mprintf(fmt, detail);
    return rc;
}

static int connect_common(sqlite3 *db, void *aux, sqlite3_vtab **out, char **errmsg, int kind)
{
    (void)errmsg;
    int rc = sqlite3_declare_vtab(db, kind == FT_REC_CALL ? calls_ddl : backwards_ddl);
    if (rc != SQLITE_OK) return rc;
    sql_vtab *v = sqlite3_malloc(sizeof *v);
    if (!v) return SQLITE_NOMEM;
    memset(v, 0, sizeof *v);
    v->db = db;
    v->ctx = aux;
    v->kind = kind;
    v->col_seq = kind == FT_REC_CALL ? CC_SEQ : BC_SEQ;
    v->col_trace = kind == FT_REC_CALL ? CC_TRACE : BC_TRACE;
    v->col_splits = kind == FT_REC_CALL ? CC_M_SPLITS : -1;
    sqlite3_vtab_config(db, SQLITE_VTAB_INNOCUOUS);
    *out = &v->base;
    return SQLITE_OK;
}

static int calls_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                         sqlite3_vtab **out, char **errmsg)
{
    (void)argc;
    (void)argv;
    return connect_common(db, aux, out, errmsg, FT_REC_CALL);
}

static int backwards_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                             sqlite3_vtab **out, char **errmsg)
{
    (void)argc;
    (void)argv;
    return connect_common(db, aux, out, errmsg, FT_REC_BACKWARD);
}

static int vt_disconnect(sqlite3_vtab *vt)
{
    sqlite3_free(vt);
    return SQLITE_OK;
}

/* idxNum bit: the reader must decode split sizes */
enum { IDX_SPLITS = 1 };

static int vt_best_index(sqlite3_vtab *vt, sqlite3_index_info *info)
{
    sql_vtab *v = (sql_vtab *)vt;
    char ops[16];
    int n_args = 0, have_eq = 0, have_lo = 0, have_hi = 0;
    /* the trace argument first, so that it is argv[0] when present */
    for (int k = 0; k < info->nConstraint; k++) {
        const struct sqlite3_index_constraint *c = &info->aConstraint[k];
        if (c->iColumn != v->col_trace) continue;
        if (c->op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
        /* an unusable trace argument: this plan cannot run, make SQLite pick another order */
        if (!c->usable) return SQLITE_CONSTRAINT;
        if (n_args) continue; /* trace given twice: SQLite checks the second */
        info->aConstraintUsage[k].argvIndex = ++n_args;
        info->aConstraintUsage[k].omit = 1;
        ops[0] = 'T';
    }
    for (int k = 0; k < info->nConstraint && n_args < (int)sizeof ops - 1; k++) {
        const struct sqlite3_index_constraint *c = &info->aConstraint[k];
        if (c->iColumn != v->col_seq || !c->usable) continue;
        char op;
        switch (c->op) {
        case SQLITE_INDEX_CONSTRAINT_EQ:
            op = 'E';
            have_eq = 1;
            break;
        case SQLITE_INDEX_CONSTRAINT_LT:
            op = 'L';
            have_hi = 1;
            break;
        case SQLITE_INDEX_CONSTRAINT_LE:
            op = 'M';
            have_hi = 1;
            break;
        case SQLITE_INDEX_CONSTRAINT_GT:
            op = 'G';
            have_lo = 1;
            break;
        case SQLITE_INDEX_CONSTRAINT_GE:
            op = 'H';
            have_lo = 1;
            break;
        default:
            continue;
        }
        ops[n_args] = op;
        info->aConstraintUsage[k].argvIndex = ++n_args;
    }
    ops[n_args] = 0;
    info->idxStr = sqlite3_mprintf("%s", ops);
    if (!info->idxStr) return SQLITE_NOMEM;
    info->needToFreeIdxStr = 1;
    info->idxNum = v->col_splits >= 0 && v->col_splits < 63 &&
                           (info->colUsed & ((sqlite3_uint64)1 << v->col_splits))
                       ? IDX_SPLITS
                       : 0;
    /* rows come out in seq order */
    if (info->nOrderBy == 1 && info->aOrderBy[0].iColumn == v->col_seq && !info->aOrderBy[0].desc)
        info->orderByConsumed = 1;
    double rows = 1e6;
    if (have_eq)
        rows = 10;
    else if (have_lo && have_hi)
        rows = 1e4;
    else if (have_lo || have_hi)
        rows = 5e5;
    info->estimatedRows = (sqlite3_int64)rows;
    info->estimatedCost = rows;
    return SQLITE_OK;
}

static int vt_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out)
{
    (void)vt;
    sql_cursor *c = sqlite3_malloc(sizeof *c);
    if (!c) return SQLITE_NOMEM;
    memset(c, 0, sizeof *c);
    c->eof = 1;
    *out = &c->base;
    return SQLITE_OK;
}

static int vt_close(sqlite3_vtab_cursor *cur)
{
    sql_cursor *c = (sql_cursor *)cur;
    ft_reader_close(c->r);
    ft_buf_free(&c->json);
    sqlite3_free(c);
    return SQLITE_OK;
}

/* Whether the file starts with a SQLite header carrying the trace's application_id. */
static int is_trace_file(const char *path)
{
    uint8_t h[72];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    uint32_t app = (uint32_t)h[68] << 24 | (uint32_t)h[69] << 16 | (uint32_t)h[70] << 8 | h[71];
    return n == sizeof h && !memcmp(h, "SQLite format 3", 16) && app == FT_APPLICATION_ID;
}

static int side_file(const char *path, const char *suffix)
{
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof p, "%s%s", path, suffix);
    return !stat(p, &sb) && (sb.st_size > 0 || !strcmp(suffix, "-journal"));
}

int sql_guard_main(sqlite3 *db, ft_err *err)
{
    const char *main = sqlite3_db_filename(db, "main");
    if (!main || !*main || !is_trace_file(main)) return FT_OK;
    int immutable = sqlite3_uri_boolean(main, "immutable", 0);
    if (!immutable) {
        sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
        const char *side = side_file(main, "-journal") ? "-journal"
                           : side_file(main, "-wal")   ? "-wal"
                                                       : NULL;
        if (side)
            return ft_err_set(err, FT_EINVAL,
                              "%s: a %s is beside it and it was not opened immutable, so SQLite "
                              "applies that file to what this connection reads (and may write "
                              "it into the trace); open the trace as sqlite3 -readonly "
                              "'file:%s?immutable=1'",
                              main, side, main);
    }
    ft_trace *t = NULL;
    int rc = ft_trace_open(main, FT_OPEN_READ, &t, err);
    if (!rc) rc = ft_trace_check_schema(t, err);
    ft_trace_close(t);
    return rc;
}

int sql_trace_get(sql_ctx *ctx, sqlite3 *db, sqlite3_vtab *vt, const char *table, const char *path,
                  ft_trace **out, const char **name)
{
    if (!path && ctx->dflt) {
        *out = ctx->dflt;
        *name = ctx->dflt_name;
        return SQLITE_OK;
    }
    int is_main = 0;
    if (!path) {
        path = sqlite3_db_filename(db, "main");
        if (!path || !*path)
            return sql_vtab_err(
                vt, SQLITE_ERROR,
                "%s: no trace: name one, e.g. calls('run.ftdb'), or open a trace as "
                "the main database",
                table);
        is_main = 1;
    }
    for (sql_trace *s = ctx->open; s; s = s->next)
        if (!strcmp(s->path, path)) {
            *out = s->t;
            *name = s->path;
            return SQLITE_OK;
        }
    ft_err gerr = {0};
    int grc = is_main ? sql_guard_main(db, &gerr) : FT_OK;
    if (grc)
        return sql_vtab_err(vt, grc == FT_ENOMEM ? SQLITE_NOMEM : SQLITE_ERROR, "%s",
                            ft_err_msg(&gerr));
    sql_trace *s = ft_calloc(1, sizeof *s);
    if (!s || !(s->path = ft_strdup(path))) {
        ft_free(s);
        return SQLITE_NOMEM;
    }
    ft_err err = {0};
    int rc = ft_trace_open(path, FT_OPEN_READ, &s->t, &err);
    if (rc) {
        ft_free(s->path);
        ft_free(s);
        return sql_vtab_err(vt, rc == FT_ENOMEM ? SQLITE_NOMEM : SQLITE_ERROR, "%s",
                            ft_err_msg(&err));
    }
    s->next = ctx->open;
    ctx->open = s;
    *out = s->t;
    *name = s->path;
    return SQLITE_OK;
}

static int reader_fail(sql_cursor *c, int rc)
{
    sqlite3_vtab *vt = c->base.pVtab;
    const ft_err *e = ft_trace_error(c->t);
    sql_vtab_err(vt, 0, "%s", e && e->msg[0] ? e->msg : ft_strerror(rc));
    c->b = NULL;
    c->eof = 1;
    return rc == FT_ENOMEM ? SQLITE_NOMEM : rc == FT_ECORRUPT ? SQLITE_CORRUPT : SQLITE_ERROR;
}

/* Make chunk position pos the current batch (decoding it unless it already is). */
static int load_chunk(sql_cursor *c, uint64_t pos)
{
    if (c->b && c->bpos == pos) return SQLITE_OK;
    c->b = NULL;
    int rc = ft_reader_range(c->r, pos, 1);
    if (!rc) rc = ft_reader_next(c->r, &c->b);
    if (rc) return reader_fail(c, rc);
    if (!c->b) return reader_fail(c, FT_ECORRUPT);
    c->bpos = pos;
    return SQLITE_OK;
}

/* Move to the first record at or after (bpos, i) of the table's kind within [lo, hi]. */
static int settle(sql_cursor *c)
{
    sql_vtab *v = (sql_vtab *)c->base.pVtab;
    c->have_call = 0;
    while (!c->eof) {
        if (c->i >= c->b->n) {
            if (c->bpos + 1 >= c->end) {
                c->eof = 1;
                break;
            }
            int rc = load_chunk(c, c->bpos + 1);
            if (rc) return rc;
            c->i = 0;
            continue;
        }
        int64_t seq = c->b->seq[c->i];
        if (seq > c->hi) {
            c->eof = 1;
            break;
        }
        if (seq >= c->lo && c->b->kind[c->i] == v->kind) break;
        c->i++;
    }
    return SQLITE_OK;
}

/* Narrow [lo, hi] by `seq OP value`; a non-numeric value leaves the bounds as they are. */
void sql_narrow(int64_t *lo, int64_t *hi, char op, sqlite3_value *val)
{
    int type = sqlite3_value_numeric_type(val);
    int64_t lo_v, hi_v; /* the integers value lies between (clamped to int64) */
    int exact = 0;      /* value is that integer */
    if (type == SQLITE_INTEGER) {
        lo_v = hi_v = sqlite3_value_int64(val);
        exact = 1;
    } else if (type == SQLITE_FLOAT) {
        double d = sqlite3_value_double(val);
        if (isnan(d)) return;
        /* every double in [-2^63, 2^63) converts exactly once integral; beyond, the value lies
         * past every int64, and the clamped bound is conservative (SQLite still compares) */
        const double two63 = 9223372036854775808.0;
        double f = floor(d), e = ceil(d);
        lo_v = f >= two63 ? INT64_MAX : f < -two63 ? INT64_MIN : (int64_t)f;
        hi_v = e >= two63 ? INT64_MAX : e < -two63 ? INT64_MIN : (int64_t)e;
        exact = f == e && d < two63 && d >= -two63;
    } else {
        return;
    }
    switch (op) {
    case 'E':
        if (lo_v > *lo) *lo = lo_v;
        if (hi_v < *hi) *hi = hi_v;
        break;
    case 'L': /* seq < v: seq <= v - 1 when v is an integer, <= floor(v) otherwise */
        if (exact && hi_v > INT64_MIN)
            hi_v--;
        else
            hi_v = lo_v;
        if (hi_v < *hi) *hi = hi_v;
        break;
    case 'M':
        if (lo_v < *hi) *hi = lo_v;
        break;
    case 'G':
        if (exact && lo_v < INT64_MAX)
            lo_v++;
        else
            lo_v = hi_v;
        if (lo_v > *lo) *lo = lo_v;
        break;
    case 'H':
        if (hi_v > *lo) *lo = hi_v;
        break;
    }
}

static int vt_filter(sqlite3_vtab_cursor *cur, int idx_num, const char *idx_str, int argc,
                     sqlite3_value **argv)
{
    sql_cursor *c = (sql_cursor *)cur;
    sql_vtab *v = (sql_vtab *)cur->pVtab;
    const char *path = NULL;
    c->eof = 1;
    c->lo = INT64_MIN;
    c->hi = INT64_MAX;
    for (int k = 0; k < argc && idx_str && idx_str[k]; k++) {
        if (idx_str[k] == 'T') {
            path = (const char *)sqlite3_value_text(argv[k]);
            if (!path) return SQLITE_OK; /* trace = NULL matches nothing */
        } else {
            sql_narrow(&c->lo, &c->hi, idx_str[k], argv[k]);
        }
    }
    ft_trace *t;
    int rc = sql_trace_get(v->ctx, v->db, &v->base, v->kind == FT_REC_CALL ? "calls" : "backwards",
                           path, &t, &c->path);
    if (rc) return rc;
    unsigned flags = (idx_num & IDX_SPLITS) ? FT_READ_SPLITS : FT_READ_CHECK_SPLITS;
    if (c->r && (c->t != t || c->rflags != flags)) {
        ft_reader_close(c->r);
        c->r = NULL;
        c->b = NULL;
    }
    c->t = t;
    if (!c->r) {
        if ((rc = ft_reader_open(t, flags, &c->r))) return reader_fail(c, rc);
        c->rflags = flags;
    }
    uint64_t first, n;
    ft_trace_seq_chunks(t, c->lo, c->hi, &first, &n);
    if (!n) return SQLITE_OK;
    c->end = first + n;
    c->eof = 0;
    if ((rc = load_chunk(c, first))) return rc;
    /* the first record whose seq is >= lo (a chunk's seqs strictly increase: the decoder makes
     * them so): a lookup per outer row of a join (`seq = c.seq`) costs a search, not a scan of
     * the chunk held since the last one */
    c->i = ft_lower_bound_i64(c->b->seq, c->b->n, c->lo);
    return settle(c);
}

static int vt_next(sqlite3_vtab_cursor *cur)
{
    sql_cursor *c = (sql_cursor *)cur;
    c->i++;
    return settle(c);
}

static int vt_eof(sqlite3_vtab_cursor *cur)
{
    return ((sql_cursor *)cur)->eof;
}

static int vt_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *out)
{
    sql_cursor *c = (sql_cursor *)cur;
    *out = c->b->seq[c->i];
    return SQLITE_OK;
}

/* ---- column values ------------------------------------------------------------------------- */
static void result_opt_int(sqlite3_context *ctx, int present, int64_t v)
{
    if (present)
        sqlite3_result_int64(ctx, v);
    else
        sqlite3_result_null(ctx);
}

static void result_text(sqlite3_context *ctx, const char *s)
{
    if (s)
        sqlite3_result_text(ctx, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_result_null(ctx);
}

/* A JSON array of n integers (bytes when u8, else int64) as the result. */
static void result_json_array(sql_cursor *c, sqlite3_context *ctx, const uint8_t *u8,
                              const int64_t *i64, uint32_t n)
{
    c->json.len = 0;
    int rc = ft_buf_append(&c->json, "[", 1);
    for (uint32_t k = 0; k < n && !rc; k++)
        rc = ft_buf_printf(&c->json, "%s%lld", k ? "," : "",
                           (long long)(u8 ? (int64_t)u8[k] : i64[k]));
    if (!rc) rc = ft_buf_append(&c->json, "]", 1);
    if (rc) {
        sqlite3_result_error_nomem(ctx);
        return;
    }
    sqlite3_result_text(ctx, (const char *)c->json.data, (int)c->json.len, SQLITE_TRANSIENT);
}

static int calls_column(sql_cursor *c, sqlite3_context *ctx, int col)
{
    const ft_batch *b = c->b;
    uint32_t i = c->i;
    if (!c->have_call) {
        ft_batch_call(c->t, b, i, &c->call);
        c->have_call = 1;
    }
    const ft_call *k = &c->call;
    uint32_t fl = k->flags;
    const ft_fuser_def *fd = ft_trace_fuser(c->t, b->fuser[i]);
    const ft_recipe_def *rd =
        b->recipe[i] >= 0 ? ft_trace_recipe(c->t, (uint32_t)b->recipe[i]) : NULL;
    switch (col) {
    case CC_SEQ:
        sqlite3_result_int64(ctx, k->seq);
        break;
    case CC_FUSER: /* the stream id: a compact instance's own (ft_batch_call) */
        sqlite3_result_int64(ctx, k->fuser);
        break;
    case CC_LABEL:
        result_text(ctx, fd->label);
        break;
    case CC_OPS:
        result_text(ctx, fd->ops_json);
        break;
    case CC_RECIPE:
        result_opt_int(ctx, rd != NULL, rd ? rd->id : 0);
        break;
    case CC_RTYPE:
        result_text(ctx, rd ? rd->type : NULL);
        break;
    case CC_ROBJ:
        result_opt_int(ctx, rd != NULL, rd ? rd->obj : 0);
        break;
    case CC_RATTRS:
        result_text(ctx, rd ? rd->attrs_json : NULL);
        break;
    case CC_GRAD:
        sqlite3_result_int(ctx, (fl & FT_CF_GRAD) != 0);
        break;
    case CC_INPUT_RG:
        sqlite3_result_int(ctx, (fl & FT_CF_INPUT_RG) != 0);
        break;
    case CC_OP_RG:
        result_json_array(c, ctx, k->op_rg, NULL, k->n_op_rg);
        break;
    case CC_DEVICE:
        sqlite3_result_int(ctx, k->device);
        break;
    case CC_STEP:
        result_opt_int(ctx, fl & FT_CF_HAS_STEP, k->step);
        break;
    case CC_MB:
        result_opt_int(ctx, fl & FT_CF_HAS_MB, k->mb);
        break;
    case CC_PHASE:
        result_text(ctx, (fl & FT_CF_HAS_PHASE) ? k->phase : NULL);
        break;
    case CC_NS:
        result_opt_int(ctx, fl & FT_CF_HAS_NS, k->ns);
        break;
    case CC_FUSE_NS:
        result_opt_int(ctx, fl & FT_CF_HAS_FUSE_NS, k->fuse_ns);
        break;
    case CC_REBUILT:
        result_opt_int(ctx, fl & FT_CF_HAS_REBUILT, (fl & FT_CF_REBUILT) != 0);
        break;
    case CC_GRAPH:
        result_opt_int(ctx, fl & FT_CF_HAS_GRAPH, (fl & FT_CF_GRAPH) != 0);
        break;
    case CC_N_TOKENS:
        result_opt_int(ctx, fl & FT_CF_HAS_SPLITS, b->n_tokens[i]);
        break;
    case CC_M_SPLITS:
        if (!(fl & FT_CF_HAS_SPLITS))
            sqlite3_result_null(ctx);
        else if (!b->splits) /* the plan said the query does not read it */
            sqlite3_result_null(ctx);
        else
            result_json_array(c, ctx, NULL, k->m_splits, k->n_splits);
        break;
    case CC_CHUNK:
        sqlite3_result_int64(ctx, (int64_t)b->chunk_id);
        break;
    case CC_TRACE:
        result_text(ctx, c->path);
        break;
    default:
        sqlite3_result_null(ctx);
    }
    return SQLITE_OK;
}

static int backwards_column(sql_cursor *c, sqlite3_context *ctx, int col)
{
    ft_backward bw;
    ft_batch_backward(c->b, c->i, &bw);
    switch (col) {
    case BC_SEQ:
        sqlite3_result_int64(ctx, bw.seq);
        break;
    case BC_CALL:
        sqlite3_result_int64(ctx, bw.call);
        break;
    case BC_NS:
        result_opt_int(ctx, bw.has_ns, bw.ns);
        break;
    case BC_CHUNK:
        sqlite3_result_int64(ctx, (int64_t)c->b->chunk_id);
        break;
    case BC_TRACE:
        result_text(ctx, c->path);
        break;
    default:
        sqlite3_result_null(ctx);
    }
    return SQLITE_OK;
}

static int vt_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col)
{
    sql_cursor *c = (sql_cursor *)cur;
    sql_vtab *v = (sql_vtab *)cur->pVtab;
    return v->kind == FT_REC_CALL ? calls_column(c, ctx, col) : backwards_column(c, ctx, col);
}

/* ---- registration -------------------------------------------------------------------------- */
static const sqlite3_module calls_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only: no CREATE VIRTUAL TABLE */
    .xConnect = calls_connect,
    .xBestIndex = vt_best_index,
    .xDisconnect = vt_disconnect,
    .xDestroy = vt_disconnect,
    .xOpen = vt_open,
    .xClose = vt_close,
    .xFilter = vt_filter,
    .xNext = vt_next,
    .xEof = vt_eof,
    .xColumn = vt_column,
    .xRowid = vt_rowid,
};

static const sqlite3_module backwards_module = {
    .iVersion = 0,
    .xCreate = NULL,
    .xConnect = backwards_connect,
    .xBestIndex = vt_best_index,
    .xDisconnect = vt_disconnect,
    .xDestroy = vt_disconnect,
    .xOpen = vt_open,
    .xClose = vt_close,
    .xFilter = vt_filter,
    .xNext = vt_next,
    .xEof = vt_eof,
    .xColumn = vt_column,
    .xRowid = vt_rowid,
};

int ft_sql_register(sqlite3 *db, ft_trace *default_trace, const char *default_name, ft_err *err)
{
    sql_ctx *ctx = ft_calloc(1, sizeof *ctx);
    if (!ctx || !(ctx->dflt_name = ft_strdup(default_name ? default_name : ""))) {
        ft_free(ctx);
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    ctx->dflt = default_trace;
    ctx->refs = 3;
    /* on failure SQLite calls the destructor itself */
    int rc = sqlite3_create_module_v2(db, "calls", &calls_module, ctx, ctx_release);
    if (rc != SQLITE_OK) {
        ctx_release(ctx); /* the other two references */
        ctx_release(ctx);
        return ft_err_set(err, rc == SQLITE_NOMEM ? FT_ENOMEM : FT_ESQL,
                          "registering the calls table: %s", sqlite3_errmsg(db));
    }
    rc = sqlite3_create_module_v2(db, "backwards", &backwards_module, ctx, ctx_release);
    if (rc != SQLITE_OK) {
        ctx_release(ctx); /* the third reference */
        return ft_err_set(err, rc == SQLITE_NOMEM ? FT_ENOMEM : FT_ESQL,
                          "registering the backwards table: %s", sqlite3_errmsg(db));
    }
    rc = sqlite3_create_module_v2(db, "decisions", &sql_decisions_module, ctx, ctx_release);
    if (rc != SQLITE_OK)
        return ft_err_set(err, rc == SQLITE_NOMEM ? FT_ENOMEM : FT_ESQL,
                          "registering the decisions table: %s", sqlite3_errmsg(db));
    return FT_OK;
}
