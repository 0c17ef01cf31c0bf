/*
 * decisions.c - the `decisions` virtual table: the replay's decisions as rows, one per call and
 * policy, read straight out of the views of the replay driver's pull form (ft_replay_cursor) while
 * the query reads:
 *   seq, policy, fuser, label, build, hit, reset, stale (ft_stale_name), plan, fresh_plan,
 *   step, phase (the call's, NULL where not recorded), and the hidden trace argument.
 * A constraint policy = 'NAME' replays only that policy. A seq upper bound stops the replay after
 * the chunk that holds it; a lower bound only filters, since the cache must see every earlier
 * call. One batch's view is held at a time. A new scan of the same cursor (the inner table of a
 * join, once per outer row) whose lower bound is not before the batch held goes on with the
 * replay it has instead of starting over, so `calls c JOIN decisions d ON d.seq = c.seq` with
 * calls outside replays the trace once.
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
    DC_STEP,
    DC_PHASE,
    DC_TRACE
};

static const char decisions_ddl[] =
    "CREATE TABLE x(seq INTEGER, policy TEXT, fuser INTEGER, label TEXT, build INTEGER, "
    "hit INTEGER, reset INTEGER, stale TEXT, plan TEXT, fresh_plan TEXT, step INTEGER, "
    "phase TEXT, trace HIDDEN)";

typedef struct dec_vtab {
    sqlite3_vtab base;
    sqlite3 *db;
    sql_ctx *ctx;
} dec_vtab;

typedef struct dec_cursor {
    sqlite3_vtab_cursor base;
    ft_trace *t;
    const char *path;
    ft_replay_cursor *rc;
    const ft_replay_view *v; /* the current batch's decisions */
    uint32_t j, p;           /* row: call j of v, policy slot p */
    int64_t lo, hi;
    int eof;
    uint32_t pol; /* the policy replayed, or UINT32_MAX for all (the open replay's) */
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
    ft_replay_cursor_close(c->rc);
    c->rc = NULL;
    c->v = NULL;
    c->j = c->p = 0;
}

static int dec_close(sqlite3_vtab_cursor *cur)
{
    dec_cursor *c = (dec_cursor *)cur;
    dec_reset(c);
    sqlite3_free(c);
    return SQLITE_OK;
}

static int dec_fail(dec_cursor *c, int rc, const char *msg)
{
    sqlite3_vtab *vt = c->base.pVtab;
    sqlite3_free(vt->zErrMsg);
    vt->zErrMsg = sqlite3_mprintf("decisions: %s", msg && *msg ? msg : ft_strerror(rc));
    c->eof = 1;
    return rc == FT_ENOMEM ? SQLITE_NOMEM : rc == FT_ECORRUPT ? SQLITE_CORRUPT : SQLITE_ERROR;
}

/* Move to the first row at or after (call j, policy p) whose seq is within the bounds, replaying
 * batches as needed; eof at the end of the trace or past the upper bound. */
static int seek(dec_cursor *c)
{
    for (;;) {
        for (const ft_replay_view *v = c->v; v && c->j < v->n; c->j++, c->p = 0) {
            if (v->seq[c->j] > c->hi) {
                c->eof = 1;
                return SQLITE_OK;
            }
            if (v->seq[c->j] >= c->lo && c->p < v->n_pol) return SQLITE_OK;
        }
        if (c->v && c->v->n && c->v->seq[c->v->n - 1] >= c->hi) {
            c->eof = 1; /* the rest is past the bound: keep the batch for the next scan */
            return SQLITE_OK;
        }
        ft_err err = {0};
        int more;
        c->j = c->p = 0;
        int rc = ft_replay_cursor_next(c->rc, &c->v, &more, &err);
        if (rc) return dec_fail(c, rc, ft_err_msg(&err));
        if (!more) {
            c->eof = 1;
            return SQLITE_OK;
        }
    }
}

/* The first call of v whose seq is >= lo (seqs increase along a view). */
static uint32_t first_at_or_after(const ft_replay_view *v, int64_t lo)
{
    uint32_t a = 0, z = v->n;
    while (a < z) {
        uint32_t m = a + (z - a) / 2;
        if (v->seq[m] < lo)
            a = m + 1;
        else
            z = m;
    }
    return a;
}

static int dec_filter(sqlite3_vtab_cursor *cur, int idx_num, const char *idx_str, int argc,
                      sqlite3_value **argv)
{
    (void)idx_num;
    dec_cursor *c = (dec_cursor *)cur;
    dec_vtab *v = (dec_vtab *)cur->pVtab;
    c->eof = 1; /* the open replay stays, for a scan that can go on with it */
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
    ft_trace *t = NULL;
    const char *tpath = NULL;
    int rc = sql_trace_get(v->ctx, v->db, &v->base, "decisions", path, &t, &tpath);
    if (rc) return rc;
    ft_err err = {0};
    if (c->rc && c->t == t && c->pol == (policy ? pol : UINT32_MAX) && c->v && c->v->n &&
        c->lo >= c->v->seq[0]) { /* go on from the batch held */
        c->path = tpath;
        c->j = first_at_or_after(c->v, c->lo);
        c->p = 0;
        rc = ft_replay_cursor_bound(c->rc, c->hi, &err);
        if (rc) return dec_fail(c, rc, ft_err_msg(&err));
        c->eof = 0;
        return seek(c);
    }
    dec_reset(c);
    c->t = t;
    c->path = tpath;
    c->pol = policy ? pol : UINT32_MAX;
    ft_replay_opts o = {
        .policies = policy ? &pol : NULL, .n_policies = policy ? 1 : 0, .needs = FT_VIEW_DECISIONS};
    rc = ft_replay_cursor_open(c->t, &o, &c->rc, &err);
    if (!rc && c->hi < INT64_MAX) rc = ft_replay_cursor_bound(c->rc, c->hi, &err);
    if (rc) return dec_fail(c, rc, ft_err_msg(&err));
    c->eof = 0;
    return seek(c);
}

static int dec_next(sqlite3_vtab_cursor *cur)
{
    dec_cursor *c = (dec_cursor *)cur;
    c->p++;
    return seek(c);
}

static int dec_eof(sqlite3_vtab_cursor *cur)
{
    return ((dec_cursor *)cur)->eof;
}

static int dec_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *out)
{
    dec_cursor *c = (dec_cursor *)cur;
    *out = c->v->seq[c->j] * FT_MAX_POLICIES + c->v->pol[c->p].policy;
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
    const ft_replay_view *v = c->v;
    const ft_view_policy *vp = &v->pol[c->p];
    const uint32_t j = c->j;
    const ft_fuser_def *fd = ft_replay_fuser(v->engine, v->fuser[j]);
    const ft_model *m = ft_replay_model(v->engine);
    switch (col) {
    case DC_SEQ:
        sqlite3_result_int64(ctx, v->seq[j]);
        break;
    case DC_POLICY:
        text_or_null(ctx, ft_policy_name(vp->policy));
        break;
    case DC_FUSER: /* the stream id: a compact instance's own */
        sqlite3_result_int64(ctx, v->sid[j]);
        break;
    case DC_LABEL:
        text_or_null(ctx, fd->label);
        break;
    case DC_BUILD:
        sqlite3_result_int(ctx, (vp->dec[j] & FT_DEC_BUILD) != 0);
        break;
    case DC_HIT:
        sqlite3_result_int(ctx, !(vp->dec[j] & FT_DEC_BUILD));
        break;
    case DC_RESET:
        sqlite3_result_int(ctx, (vp->dec[j] & FT_DEC_RESET) != 0);
        break;
    case DC_STALE:
        text_or_null(ctx, ft_stale_name((ft_stale)vp->stale[j]));
        break;
    case DC_PLAN:
        text_or_null(ctx, ft_model_plan_text(m, vp->plan[j]));
        break;
    case DC_FRESH:
        text_or_null(ctx, ft_model_plan_text(m, v->fresh[j]));
        break;
    case DC_STEP:
        if (v->step[j] >= 0)
            sqlite3_result_int64(ctx, v->step[j]);
        else
            sqlite3_result_null(ctx);
        break;
    case DC_PHASE:
        text_or_null(ctx, v->phase[j] >= 0 && (uint32_t)v->phase[j] < v->batch->n_phases
                              ? v->batch->phases[v->phase[j]]
                              : NULL);
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
