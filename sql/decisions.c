/*
 * decisions.c - the `decisions` virtual table: the replay's decisions as rows, one per call and
 * policy, made by running the replay engine (ft_replayer.h) over the trace while the query reads:
 *   seq, policy, fuser, label, build, hit, reset, stale (ft_stale_name), plan, fresh_plan,
 *   and the hidden trace argument.
 * A constraint policy = 'NAME' replays only that policy. A seq upper bound stops the replay after
 * it; a lower bound only filters, since the cache must see every earlier call.
 */
#include "sql_int.h"

SQLITE_EXTENSION_INIT3

#include <string.h>

enum {
    DC_SEQ,
    DC_POLICY,
    DC_FUSER,
    DC_LABEL,
    DC_BUILD,
    DC_HIT,
    DC_RESET,
    DC_STALE,
    DC_PLAN,
    DC_FRESH,
    DC_TRACE
};

static const char decisions_ddl[] =
    "CREATE TABLE x(seq INTEGER, policy TEXT, fuser INTEGER, label TEXT, build INTEGER, "
    "hit INTEGER, reset INTEGER, stale TEXT, plan TEXT, fresh_plan TEXT, trace HIDDEN)";

typedef struct dec_row {
    int64_t seq;
    uint32_t policy, fuser, plan, fresh;
    uint8_t build, reset, stale;
} dec_row;

typedef struct dec_vtab {
    sqlite3_vtab base;
    sqlite3 *db;
    sql_ctx *ctx;
} dec_vtab;

typedef struct dec_cursor {
    sqlite3_vtab_cursor base;
    ft_trace *t;
    const char *path;
    ft_reader *r;
    ft_replay *eng;
    ft_fuser_def *fusers;
    ft_recipe_def *recipes;
    dec_row *rows; /* the current batch's decisions */
    size_t n_rows, cap_rows, i;
    int64_t lo, hi;
    int eof, oom;
    ft_replay_observer obs;
} dec_cursor;

static int dec_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                       sqlite3_vtab **out, char **errmsg)
{
    (void)argc;
    (void)argv;
    (void)errmsg;
    int rc = sqlite3_declare_vtab(db, decisions_ddl);
    if (rc != SQLITE_OK) return rc;
    dec_vtab *v = sqlite3_malloc(sizeof *v);
    if (!v) return SQLITE_NOMEM;
    memset(v, 0, sizeof *v);
    v->db = db;
    v->ctx = aux;
    sqlite3_vtab_config(db, SQLITE_VTAB_INNOCUOUS);
    *out = &v->base;
    return SQLITE_OK;
}

static int dec_disconnect(sqlite3_vtab *vt)
{
    sqlite3_free(vt);
    return SQLITE_OK;
}

static int dec_best_index(sqlite3_vtab *vt, sqlite3_index_info *info)
{
    (void)vt;
    char ops[16];
    int n = 0, have_pol = 0;
    for (int k = 0; k < info->nConstraint; k++) {
        const struct sqlite3_index_constraint *c = &info->aConstraint[k];
        if (c->iColumn != DC_TRACE || c->op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
        if (!c->usable) return SQLITE_CONSTRAINT;
        if (n) continue;
        info->aConstraintUsage[k].argvIndex = ++n;
        info->aConstraintUsage[k].omit = 1;
        ops[0] = 'T';
    }
    for (int k = 0; k < info->nConstraint && n < (int)sizeof ops - 1; k++) {
        const struct sqlite3_index_constraint *c = &info->aConstraint[k];
        if (!c->usable) continue;
        char op = 0;
        if (c->iColumn == DC_POLICY && c->op == SQLITE_INDEX_CONSTRAINT_EQ && !have_pol) {
            op = 'P';
            have_pol = 1;
        } else if (c->iColumn == DC_SEQ) {
            switch (c->op) {
            case SQLITE_INDEX_CONSTRAINT_EQ:
                op = 'E';
                break;
            case SQLITE_INDEX_CONSTRAINT_LT:
                op = 'L';
                break;
            case SQLITE_INDEX_CONSTRAINT_LE:
                op = 'M';
                break;
            case SQLITE_INDEX_CONSTRAINT_GT:
                op = 'G';
                break;
            case SQLITE_INDEX_CONSTRAINT_GE:
                op = 'H';
                break;
            }
        }
        if (!op) continue;
        ops[n] = op;
        info->aConstraintUsage[k].argvIndex = ++n;
    }
    ops[n] = 0;
    info->idxStr = sqlite3_mprintf("%s", ops);
    if (!info->idxStr) return SQLITE_NOMEM;
    info->needToFreeIdxStr = 1;
    info->estimatedCost = have_pol ? 1e6 : 7e6;
    info->estimatedRows = have_pol ? 1000000 : 7000000;
    return SQLITE_OK;
}

static int dec_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out)
{
    (void)vt;
    dec_cursor *c = sqlite3_malloc(sizeof *c);
    if (!c) return SQLITE_NOMEM;
    memset(c, 0, sizeof *c);
    c->eof = 1;
    *out = &c->base;
    return SQLITE_OK;
}

static void dec_reset(dec_cursor *c)
{
    ft_replay_free(c->eng);
    ft_reader_close(c->r);
    ft_free(c->fusers);
    ft_free(c->recipes);
    c->eng = NULL;
    c->r = NULL;
    c->fusers = NULL;
    c->recipes = NULL;
    c->n_rows = c->i = 0;
}

static int dec_close(sqlite3_vtab_cursor *cur)
{
    dec_cursor *c = (dec_cursor *)cur;
    dec_reset(c);
    ft_free(c->rows);
    sqlite3_free(c);
    return SQLITE_OK;
}

static int on_call(void *ctx, const ft_replay_call *k, ft_err *err)
{
    (void)err;
    dec_cursor *c = ctx;
    if (k->seq < c->lo || k->seq > c->hi) return FT_OK;
    if (c->n_rows == c->cap_rows) {
        size_t cap = c->cap_rows ? 2 * c->cap_rows : 1024;
        dec_row *p = ft_realloc(c->rows, cap * sizeof *p);
        if (!p) {
            c->oom = 1;
            return FT_ENOMEM;
        }
        c->rows = p;
        c->cap_rows = cap;
    }
    c->rows[c->n_rows++] =
        (dec_row){k->seq,   k->policy,         k->fuser,          k->plan,
                  k->fresh, (uint8_t)k->build, (uint8_t)k->reset, (uint8_t)k->stale};
    return FT_OK;
}

static int dec_fail(dec_cursor *c, int rc, const char *msg)
{
    sqlite3_vtab *vt = c->base.pVtab;
    sqlite3_free(vt->zErrMsg);
    vt->zErrMsg = sqlite3_mprintf("decisions: %s", msg && *msg ? msg : ft_strerror(rc));
    c->eof = 1;
    return rc == FT_ENOMEM ? SQLITE_NOMEM : rc == FT_ECORRUPT ? SQLITE_CORRUPT : SQLITE_ERROR;
}

/* Replay batches until some decisions are buffered or the trace (or the seq bound) ends. */
static int fill(dec_cursor *c)
{
    c->n_rows = c->i = 0;
    while (!c->n_rows) {
        const ft_batch *b;
        int rc = ft_reader_next(c->r, &b);
        if (rc) return dec_fail(c, rc, ft_err_msg(ft_trace_error(c->t)));
        if (!b || b->seq[0] > c->hi) {
            c->eof = 1;
            return SQLITE_OK;
        }
        ft_err err = {0};
        if ((rc = ft_replay_batch(c->eng, b, &err))) return dec_fail(c, rc, ft_err_msg(&err));
    }
    return SQLITE_OK;
}

static int dec_filter(sqlite3_vtab_cursor *cur, int idx_num, const char *idx_str, int argc,
                      sqlite3_value **argv)
{
    (void)idx_num;
    dec_cursor *c = (dec_cursor *)cur;
    dec_vtab *v = (dec_vtab *)cur->pVtab;
    dec_reset(c);
    c->eof = 1;
    c->lo = INT64_MIN;
    c->hi = INT64_MAX;
    const char *path = NULL, *policy = NULL;
    for (int k = 0; k < argc && idx_str && idx_str[k]; k++) {
        if (idx_str[k] == 'T') {
            if (!(path = (const char *)sqlite3_value_text(argv[k]))) return SQLITE_OK;
        } else if (idx_str[k] == 'P') {
            if (!(policy = (const char *)sqlite3_value_text(argv[k]))) return SQLITE_OK;
        } else {
            sql_narrow(&c->lo, &c->hi, idx_str[k], argv[k]);
        }
    }
    uint32_t pol = 0;
    if (policy && ft_policy_find(policy, &pol, NULL)) return SQLITE_OK; /* no such policy */
    int rc = sql_trace_get(v->ctx, v->db, &v->base, "decisions", path, &c->t, &c->path);
    if (rc) return rc;
    uint32_t nf = ft_trace_n_fusers(c->t), nr = ft_trace_n_recipes(c->t);
    c->fusers = ft_calloc(nf ? nf : 1, sizeof *c->fusers);
    c->recipes = ft_calloc(nr ? nr : 1, sizeof *c->recipes);
    if (!c->fusers || !c->recipes) return SQLITE_NOMEM;
    for (uint32_t i = 0; i < nf; i++)
        c->fusers[i] = *ft_trace_fuser(c->t, i);
    for (uint32_t i = 0; i < nr; i++)
        c->recipes[i] = *ft_trace_recipe(c->t, i);
    c->obs = (ft_replay_observer){.ctx = c, .call_fn = on_call};
    ft_replay_opts o = {
        .policies = policy ? &pol : NULL, .n_policies = policy ? 1 : 0, .observer = &c->obs};
    ft_err err = {0};
    rc = ft_replay_new(c->fusers, nf, c->recipes, nr, ft_trace_header(c->t), &o, &c->eng, &err);
    if (rc) return dec_fail(c, rc, ft_err_msg(&err));
    if ((rc = ft_reader_open(c->t, 0, &c->r))) return dec_fail(c, rc, "out of memory");
    c->eof = 0;
    return fill(c);
}

static int dec_next(sqlite3_vtab_cursor *cur)
{
    dec_cursor *c = (dec_cursor *)cur;
    if (++c->i < c->n_rows) return SQLITE_OK;
    return fill(c);
}

static int dec_eof(sqlite3_vtab_cursor *cur)
{
    return ((dec_cursor *)cur)->eof;
}

static int dec_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *out)
{
    dec_cursor *c = (dec_cursor *)cur;
    *out = c->rows[c->i].seq * FT_MAX_POLICIES + c->rows[c->i].policy;
    return SQLITE_OK;
}

static void text_or_null(sqlite3_context *ctx, const char *s)
{
    if (s)
        sqlite3_result_text(ctx, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_result_null(ctx);
}

static int dec_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col)
{
    dec_cursor *c = (dec_cursor *)cur;
    const dec_row *w = &c->rows[c->i];
    const ft_model *m = ft_replay_model(c->eng);
    switch (col) {
    case DC_SEQ:
        sqlite3_result_int64(ctx, w->seq);
        break;
    case DC_POLICY:
        text_or_null(ctx, ft_policy_name(w->policy));
        break;
    case DC_FUSER:
        sqlite3_result_int64(ctx, c->fusers[w->fuser].id);
        break;
    case DC_LABEL:
        text_or_null(ctx, c->fusers[w->fuser].label);
        break;
    case DC_BUILD:
        sqlite3_result_int(ctx, w->build);
        break;
    case DC_HIT:
        sqlite3_result_int(ctx, !w->build);
        break;
    case DC_RESET:
        sqlite3_result_int(ctx, w->reset);
        break;
    case DC_STALE:
        text_or_null(ctx, ft_stale_name((ft_stale)w->stale));
        break;
    case DC_PLAN:
        text_or_null(ctx, ft_model_plan_text(m, w->plan));
        break;
    case DC_FRESH:
        text_or_null(ctx, ft_model_plan_text(m, w->fresh));
        break;
    case DC_TRACE:
        text_or_null(ctx, c->path);
        break;
    default:
        sqlite3_result_null(ctx);
    }
    return SQLITE_OK;
}

const sqlite3_module sql_decisions_module = {
    .iVersion = 0,
    .xCreate = NULL,
    .xConnect = dec_connect,
    .xBestIndex = dec_best_index,
    .xDisconnect = dec_disconnect,
    .xDestroy = dec_disconnect,
    .xOpen = dec_open,
    .xClose = dec_close,
    .xFilter = dec_filter,
    .xNext = dec_next,
    .xEof = dec_eof,
    .xColumn = dec_column,
    .xRowid = dec_rowid,
};
