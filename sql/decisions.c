/*
 * decisions.c - the `decisions` virtual table: the replay's decisions as rows, one per call and
 * policy, pulled from the views of the replay driver's pull form (ft_replay_cursor) while the
 * query reads:
 *   seq, policy, fuser, label, build, hit, reset, stale (ft_stale_name), plan, fresh_plan,
 *   step, phase (the call's, NULL where not recorded), and the hidden trace argument.
 * A constraint policy = 'NAME' replays only that policy. A seq upper bound stops the replay after
 * the chunk that holds it; a lower bound only filters, since the cache must see every earlier
 * call.
 *
 * Each batch's view is copied into a compact block as the replay goes (per call its seq, stream
 * id, step, phase, fuser and fresh plan: 36 B; per call and policy its plan, FT_DEC_* bits and
 * stale class: 6 B), and the rows are read from the blocks. A cursor keeps every block from the
 * trace's start (the store) while they fit their share of the memory budget (store_cap: half of
 * ft_mem_budget, or of the machine's memory without one), charged to that budget; so a new scan
 * of the same cursor (the inner table of a join, once per outer row, in any order; a CROSS JOIN
 * without a constraint) is served from the store, and the trace is replayed once per cursor and
 * statement. Past its share the store is given up and only the batch held stays: a new scan
 * whose lower bound is not before that batch goes on with the replay (outer rows in seq order
 * still replay once), any other starts the replay over; ft_sql_take_fallback tells the caller
 * (the CLI says so on stderr).
 */
#include "sql_int.h"

SQLITE_EXTENSION_INIT3

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

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

/* One batch's decisions copied out of its view, the form the rows are served from. */
typedef struct dec_block {
    uint32_t n;      /* calls */
    int64_t *seq;    /* [n] */
    int64_t *sid;    /* [n] the stream id of the call's fuser */
    int64_t *step;   /* [n] -1 when not recorded */
    uint32_t *fuser; /* [n] dense fuser index (ft_replay_fuser) */
    uint32_t *fresh; /* [n] the fresh build's plan id */
    int32_t *phase;  /* [n] index into the cursor's phase names, -1 when not recorded */
    uint32_t *plan;  /* [n_pol * n] slot p's plan ids at p * n */
    uint8_t *dec;    /* [n_pol * n] FT_DEC_* */
    uint8_t *stale;  /* [n_pol * n] ft_stale */
} dec_block;

typedef struct dec_cursor {
    sqlite3_vtab_cursor base;
    ft_trace *t;
    const char *path;
    ft_replay_cursor *rc;
    const ft_replay *engine; /* rc's: fuser labels and plan texts */
    uint32_t pol;            /* the policy replayed, or UINT32_MAX for all (the open replay's) */
    uint32_t n_pol;          /* policy slots of a row */
    uint32_t pol_id[FT_MAX_POLICIES]; /* [n_pol] registry index of each slot */
    dec_block **blocks; /* [n_blocks] from the trace's start while keep, else the last one */
    uint32_t n_blocks, cap_blocks;
    int keep;         /* 1: every block is kept (the store), 0: only the batch held (streaming) */
    int dropped;      /* the store passed its share of the budget and was given up */
    int done;         /* the replay reached the trace's end */
    uint64_t charged; /* bytes of the store charged to the memory budget */
    int64_t bound;    /* the replay's seq bound (ft_replay_cursor_bound), INT64_MAX: none */
    char **phases;    /* [n_phases] phase names the blocks point into */
    uint32_t n_phases, cap_phases;
    uint32_t *phase_slot; /* [cap_slots] open-addressing table: index + 1 into phases, 0 free */
    uint32_t cap_slots;
    uint32_t bi, j, p; /* row: call j of block bi, policy slot p */
    uint32_t p0, p1;   /* the slots a scan shows: [p0, p1) */
    int64_t lo, hi;
    int eof;
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

/* idxNum bit: the policy constraint's value is not known when planning */
enum { IDX_POL_VARIES = 1 };

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
            /* a policy that is no constant (another table's column) changes from scan to scan:
             * replay every policy once and serve each scan its slot */
            sqlite3_value *rhs = NULL;
            if (sqlite3_libversion_number() < 3038000 ||
                sqlite3_vtab_rhs_value(info, k, &rhs) != SQLITE_OK)
                info->idxNum |= IDX_POL_VARIES;
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

static void phases_clear(dec_cursor *c)
{
    for (uint32_t k = 0; k < c->n_phases; k++)
        ft_free(c->phases[k]);
    c->n_phases = 0;
    if (c->phase_slot) memset(c->phase_slot, 0, c->cap_slots * sizeof *c->phase_slot);
}

/* Free the blocks [0, n_blocks - keep_last) and close the gap. */
static void blocks_free(dec_cursor *c, uint32_t keep_last)
{
    const uint32_t n_free = c->n_blocks - keep_last;
    for (uint32_t k = 0; k < n_free; k++)
        ft_free(c->blocks[k]);
    if (keep_last && n_free) memmove(c->blocks, c->blocks + n_free, keep_last * sizeof *c->blocks);
    c->n_blocks = keep_last;
}

static void dec_reset(dec_cursor *c)
{
    ft_replay_cursor_close(c->rc);
    c->rc = NULL;
    c->engine = NULL;
    blocks_free(c, 0);
    ft_free(c->blocks);
    c->blocks = NULL;
    c->cap_blocks = 0;
    phases_clear(c);
    ft_free(c->phases);
    ft_free(c->phase_slot);
    c->phases = NULL;
    c->phase_slot = NULL;
    c->cap_phases = c->cap_slots = 0;
    ft_mem_uncharge(c->charged);
    c->charged = 0;
    c->n_pol = 0;
    c->done = 0;
    c->bi = c->j = c->p = 0;
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

/* The index of phase name s among the cursor's, added when new; *added gets its bytes. */
static int phase_intern(dec_cursor *c, const char *s, int32_t *out, uint64_t *added)
{
    if (2 * (c->n_phases + 1) > c->cap_slots) {
        const uint32_t cap = c->cap_slots ? 2 * c->cap_slots : 16;
        uint32_t *slot = ft_calloc(cap, sizeof *slot);
        if (!slot) return FT_ENOMEM;
        for (uint32_t k = 0; k < c->n_phases; k++) {
            const char *q = c->phases[k];
            uint32_t h = (uint32_t)ft_hash64(q, strlen(q)) & (cap - 1);
            while (slot[h])
                h = (h + 1) & (cap - 1);
            slot[h] = k + 1;
        }
        ft_free(c->phase_slot);
        c->phase_slot = slot;
        c->cap_slots = cap;
    }
    const size_t len = strlen(s);
    uint32_t h = (uint32_t)ft_hash64(s, len) & (c->cap_slots - 1);
    for (; c->phase_slot[h]; h = (h + 1) & (c->cap_slots - 1)) {
        if (!strcmp(c->phases[c->phase_slot[h] - 1], s)) {
            *out = (int32_t)(c->phase_slot[h] - 1);
            return FT_OK;
        }
    }
    if (c->n_phases == c->cap_phases) {
        const uint32_t cap = c->cap_phases ? 2 * c->cap_phases : 8;
        char **p = ft_realloc(c->phases, cap * sizeof *p);
        if (!p) return FT_ENOMEM;
        c->phases = p;
        c->cap_phases = cap;
    }
    if (!(c->phases[c->n_phases] = ft_strndup(s, len))) return FT_ENOMEM;
    c->phase_slot[h] = c->n_phases + 1;
    *out = (int32_t)c->n_phases++;
    *added += len + 1 + sizeof(char *) + 2 * sizeof(uint32_t);
    return FT_OK;
}

/* The store's share when a cursor last gave its store up, 0 when none did (ft_sql_take_fallback) */
static _Atomic uint64_t fell_back;

int ft_sql_take_fallback(uint64_t *share_bytes)
{
    const uint64_t v = atomic_exchange(&fell_back, 0);
    if (share_bytes) *share_bytes = v;
    return v != 0;
}

/* The store's share of the memory budget: half of it (the decoders keep the other half), or half
 * of the machine's memory when no budget is set. */
static uint64_t store_cap(void)
{
    const uint64_t b = ft_mem_budget();
    if (b) return b / 2;
    const long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz / 2 : UINT64_MAX;
}

/* Charge n more bytes of the store; nonzero (nothing charged) when it would pass its share. */
static int store_charge(dec_cursor *c, uint64_t n)
{
    uint64_t held;
    if (ft_mem_charge(n, &held)) return 1;
    if (held + n > store_cap() || c->charged + n > store_cap()) {
        ft_mem_uncharge(n);
        return 1;
    }
    c->charged += n;
    return 0;
}

/* Copy view v (n > 0 calls) into a new block after the ones held: kept with them while the store
 * fits its share of the budget, else the store is given up and only this batch is held. */
static int block_add(dec_cursor *c, const ft_replay_view *v)
{
    const size_t n = v->n, np = v->n_pol;
    const size_t hdr = (sizeof(dec_block) + 7) & ~(size_t)7;
    const size_t bytes =
        hdr + n * (3 * sizeof(int64_t) + 3 * sizeof(uint32_t)) + np * n * (sizeof(uint32_t) + 2);
    if (!c->keep) phases_clear(c); /* streaming: the names of the batch held only */
    if (c->n_blocks == c->cap_blocks) {
        const uint32_t cap = c->cap_blocks ? 2 * c->cap_blocks : 16;
        dec_block **bl = ft_realloc(c->blocks, cap * sizeof *bl);
        if (!bl) return FT_ENOMEM;
        c->blocks = bl;
        c->cap_blocks = cap;
    }
    unsigned char *m = ft_malloc(bytes);
    int32_t *map = v->batch->n_phases ? ft_malloc(v->batch->n_phases * sizeof *map) : NULL;
    if (!m || (v->batch->n_phases && !map)) {
        ft_free(m);
        ft_free(map);
        return FT_ENOMEM;
    }
    for (uint32_t k = 0; k < v->batch->n_phases; k++)
        map[k] = -2;
    dec_block *b = (dec_block *)m;
    b->n = (uint32_t)n;
    b->seq = (int64_t *)(m + hdr);
    b->sid = b->seq + n;
    b->step = b->sid + n;
    b->fuser = (uint32_t *)(b->step + n);
    b->fresh = b->fuser + n;
    b->phase = (int32_t *)(b->fresh + n);
    b->plan = (uint32_t *)(b->phase + n);
    b->dec = (uint8_t *)(b->plan + np * n);
    b->stale = b->dec + np * n;
    memcpy(b->seq, v->seq, n * sizeof *b->seq);
    memcpy(b->sid, v->sid, n * sizeof *b->sid);
    memcpy(b->step, v->step, n * sizeof *b->step);
    memcpy(b->fuser, v->fuser, n * sizeof *b->fuser);
    memcpy(b->fresh, v->fresh, n * sizeof *b->fresh);
    for (uint32_t p = 0; p < np; p++) {
        memcpy(b->plan + p * n, v->pol[p].plan, n * sizeof *b->plan);
        memcpy(b->dec + p * n, v->pol[p].dec, n);
        memcpy(b->stale + p * n, v->pol[p].stale, n);
    }
    uint64_t added = 0;
    int rc = FT_OK;
    for (size_t j = 0; j < n && !rc; j++) {
        const int32_t ph = v->phase[j];
        b->phase[j] = -1;
        if (ph < 0 || (uint32_t)ph >= v->batch->n_phases) continue;
        if (map[ph] == -2) rc = phase_intern(c, v->batch->phases[ph], &map[ph], &added);
        b->phase[j] = map[ph];
    }
    ft_free(map);
    if (rc) {
        ft_free(m);
        return rc;
    }
    if (c->keep && store_charge(c, bytes + added)) { /* past its share: stream from here on */
        c->keep = 0;
        c->dropped = 1;
        ft_mem_uncharge(c->charged);
        c->charged = 0;
    }
    if (!c->keep) blocks_free(c, 0);
    c->blocks[c->n_blocks++] = b;
    c->bi = c->n_blocks - 1;
    c->j = 0;
    c->p = c->p0;
    return FT_OK;
}

/* Move to the first row at or after (call j of block bi, policy p) whose seq is within the
 * bounds, replaying batches as needed; eof at the end of the trace or past the upper bound. */
static int seek(dec_cursor *c)
{
    for (;;) {
        for (; c->bi < c->n_blocks; c->bi++, c->j = 0, c->p = c->p0) {
            const dec_block *b = c->blocks[c->bi];
            for (; c->j < b->n; c->j++, c->p = c->p0) {
                if (b->seq[c->j] > c->hi) {
                    c->eof = 1;
                    return SQLITE_OK;
                }
                if (b->seq[c->j] >= c->lo && c->p < c->p1) return SQLITE_OK;
            }
        }
        const dec_block *last = c->n_blocks ? c->blocks[c->n_blocks - 1] : NULL;
        if (c->done || (last && last->seq[last->n - 1] >= c->hi)) {
            c->eof = 1; /* the rest is past the bound: the replay waits for the next scan */
            return SQLITE_OK;
        }
        ft_err err = {0};
        const ft_replay_view *v;
        int more;
        int rc = ft_replay_cursor_next(c->rc, &v, &more, &err);
        if (rc) return dec_fail(c, rc, ft_err_msg(&err));
        if (!more) {
            c->done = c->bound == INT64_MAX;
            c->eof = 1;
            return SQLITE_OK;
        }
        if (!v->n) continue;
        rc = block_add(c, v);
        if (rc) return dec_fail(c, rc, NULL);
    }
}

/* Position on the first call held whose seq is >= lo (past the blocks held when none is). */
static void locate(dec_cursor *c, int64_t lo)
{
    uint32_t a = 0, z = c->n_blocks;
    while (a < z) {
        uint32_t m = a + (z - a) / 2;
        const dec_block *b = c->blocks[m];
        if (b->seq[b->n - 1] < lo)
            a = m + 1;
        else
            z = m;
    }
    c->bi = a;
    /* seqs increase along a block */
    c->j = a < c->n_blocks ? ft_lower_bound_i64(c->blocks[a]->seq, c->blocks[a]->n, lo) : 0;
    c->p = c->p0;
}

/* Start the replay over for policy pol (UINT32_MAX: all). */
static int replay_open(dec_cursor *c, ft_trace *t, uint32_t pol)
{
    dec_reset(c);
    c->t = t;
    c->pol = pol;
    c->bound = INT64_MAX;
    ft_replay_opts o = {.policies = pol != UINT32_MAX ? &pol : NULL,
                        .n_policies = pol != UINT32_MAX ? 1 : 0,
                        .needs = FT_VIEW_DECISIONS};
    ft_err err = {0};
    int rc = ft_replay_cursor_open(t, &o, &c->rc, &err);
    if (rc) return dec_fail(c, rc, ft_err_msg(&err));
    c->engine = ft_replay_cursor_engine(c->rc);
    const uint32_t *idx;
    c->n_pol = ft_replay_policies(c->engine, &idx);
    memcpy(c->pol_id, idx, c->n_pol * sizeof *idx);
    return SQLITE_OK;
}

/* Show the rows of policy want (UINT32_MAX: all) from the replay held: 0, or 1 when it does not
 * replay that policy. */
static int show_policy(dec_cursor *c, uint32_t want)
{
    if (want == UINT32_MAX || c->pol == want) {
        if (c->pol != want) return 1;
        c->p0 = 0;
        c->p1 = c->n_pol;
        return 0;
    }
    for (uint32_t p = 0; p < c->n_pol; p++) {
        if (c->pol_id[p] == want) {
            c->p0 = p;
            c->p1 = p + 1;
            return 0;
        }
    }
    return 1;
}

/* A scan: served from the store when one is kept (the inner table of a join, rescanned per outer
 * row in any order, and seq lookups out of order replay nothing again); without one, it goes on
 * from the batch held when its lower bound is not before it, else the replay starts over. */
static int dec_filter(sqlite3_vtab_cursor *cur, int idx_num, const char *idx_str, int argc,
                      sqlite3_value **argv)
{
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
    if (!policy) pol = UINT32_MAX;
    ft_trace *t = NULL;
    const char *tpath = NULL;
    int rc = sql_trace_get(v->ctx, v->db, &v->base, "decisions", path, &t, &tpath);
    if (rc) return rc;
    const int same_t = c->rc && c->t == t, usable = same_t && !show_policy(c, pol);
    if (usable && (c->keep || (c->n_blocks && c->lo >= c->blocks[0]->seq[0]))) {
        locate(c, c->lo);
    } else {
        /* the same replay again, or every policy when the policy changes from scan to scan */
        const uint32_t r = usable                                 ? c->pol
                           : same_t || (idx_num & IDX_POL_VARIES) ? UINT32_MAX
                                                                  : pol;
        const int dropped = usable && c->dropped;
        if (dropped) atomic_store(&fell_back, store_cap());
        rc = replay_open(c, t, r);
        if (!rc && show_policy(c, pol)) rc = replay_open(c, t, pol); /* not among all's */
        if (rc) return rc;
        show_policy(c, pol);
        c->keep = !dropped;
        c->dropped = dropped;
    }
    c->path = tpath;
    if (!c->done && c->hi != c->bound) {
        ft_err err = {0};
        rc = ft_replay_cursor_bound(c->rc, c->hi, &err);
        if (rc) return dec_fail(c, rc, ft_err_msg(&err));
        c->bound = c->hi;
    }
    c->eof = 0;
    return seek(c);
}

static int dec_next(sqlite3_vtab_cursor *cur)
{
    dec_cursor *c = (dec_cursor *)cur;
    if (++c->p < c->p1) return SQLITE_OK; /* the same call under the next policy */
    c->p = c->p0;
    c->j++;
    return seek(c);
}

static int dec_eof(sqlite3_vtab_cursor *cur)
{
    return ((dec_cursor *)cur)->eof;
}

static int dec_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *out)
{
    dec_cursor *c = (dec_cursor *)cur;
    *out = c->blocks[c->bi]->seq[c->j] * FT_MAX_POLICIES + c->pol_id[c->p];
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
    const dec_block *b = c->blocks[c->bi];
    const uint32_t j = c->j, pj = c->p * b->n + j;
    const ft_model *m = ft_replay_model(c->engine);
    switch (col) {
    case DC_SEQ:
        sqlite3_result_int64(ctx, b->seq[j]);
        break;
    case DC_POLICY:
        text_or_null(ctx, ft_policy_name(c->pol_id[c->p]));
        break;
    case DC_FUSER: /* the stream id: a compact instance's own */
        sqlite3_result_int64(ctx, b->sid[j]);
        break;
    case DC_LABEL:
        text_or_null(ctx, ft_replay_fuser(c->engine, b->fuser[j])->label);
        break;
    case DC_BUILD:
        sqlite3_result_int(ctx, (b->dec[pj] & FT_DEC_BUILD) != 0);
        break;
    case DC_HIT:
        sqlite3_result_int(ctx, !(b->dec[pj] & FT_DEC_BUILD));
        break;
    case DC_RESET:
        sqlite3_result_int(ctx, (b->dec[pj] & FT_DEC_RESET) != 0);
        break;
    case DC_STALE:
        text_or_null(ctx, ft_stale_name((ft_stale)b->stale[pj]));
        break;
    case DC_PLAN:
        text_or_null(ctx, ft_model_plan_text(m, b->plan[pj]));
        break;
    case DC_FRESH:
        text_or_null(ctx, ft_model_plan_text(m, b->fresh[j]));
        break;
    case DC_STEP:
        if (b->step[j] >= 0)
            sqlite3_result_int64(ctx, b->step[j]);
        else
            sqlite3_result_null(ctx);
        break;
    case DC_PHASE:
        text_or_null(ctx, b->phase[j] >= 0 ? c->phases[b->phase[j]] : NULL);
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
