/*
 * recorder.c - the recording API: checks every record, maps stream ids to dense indices, feeds
 * the chunk encoder and commits one chunk per batch in its own transaction, together with the
 * declarations made since the last one (schema/trace_write.c checkpoints after each commit, so the
 * main file holds it). Everything beyond schema/ft_limits.h is refused here, at record time,
 * with FT_ERANGE naming the field. Not thread-safe: one thread at a time per handle.
 *
 * Compact instances (docs/trace-file.md): a fuser declaration that repeats the label and op list
 * of an earlier fusers row (its template) is held back; when the next thing recorded is a call
 * to it, the call carries the declaration (FT_CF_NEW_FUSER, its stream id in the chunk) and the
 * fuser gets no row: TE's transient OperationFuser([op]) per call of a standalone op then costs
 * its call and its end, a few bits each. Anything else first writes the held declaration as a
 * row, where it stood. Memory: per row about 40 bytes, per live compact instance about 24, per
 * compact instance ever declared about 1 byte (their ids, checked for uniqueness).
 *
 * After an out-of-memory or SQLite failure inside an append, the handle is "broken": every later
 * call returns FT_ESTATE naming the first failure, and close only releases memory. Records
 * rejected by a check (FT_EINVAL, FT_ERANGE) leave the handle usable.
 */
#include "canon.h"
#include "ft_hmap.h"
#include "ft_limits.h"
#include "ft_recorder.h"
#include "ft_seqset.h"
#include "ft_trace_write.h"

#include <inttypes.h>
#include <string.h>

#define DEFAULT_CHUNK_RECORDS 65536u
#define DEFAULT_ZSTD_LEVEL    2
#define CF_ALL                ((1u << 13) - 1u)
struct ft_rec {
    ft_trace *t;
    ft_chunk_enc *enc;
    ft_err err;
    ft_buf blob;            /* the chunk being written */
    uint32_t chunk_records; /* records per chunk */
    int level;              /* zstd level */
    int have_header;
    int broken;         /* a failure left the handle unusable */
    uint64_t n_records; /* records appended so far */
    uint64_t n_decls;   /* declarations so far */
    int has_last;
    int64_t last_seq;
    ft_seqset calls;  /* seqs of the calls appended through the checked entries */
    int prevalidated; /* records came through the pre-validated entries */
    uint32_t *groups; /* [n_fusers] num_groups every m_splits of the fuser has, 0 if unchecked */
    uint32_t *root;   /* [n_fusers] the row of its instance's first declaration (capture "of") */
    uint8_t *ended;   /* [n_fusers] the row's instance has ended (by its root) */
    size_t groups_cap;
    /* compact instances */
    ft_hmap tmpl;    /* hash of (label, ops) -> the first row without "of" that has them */
    int pending;     /* a declaration that repeats a template waits for the next record */
    int64_t pend_id; /* its stream id, template row and position */
    uint32_t pend_tmpl;
    uint64_t pend_pos;
    /* declarations seen before, by their text as given: the same label and ops text again needs
     * no JSON work (a capture hook re-declares the same op list per transient fuser) */
    struct decl_seen {
        uint64_t hash;     /* of (label, ops text), 0 = empty */
        char *label, *ops; /* as given */
        uint32_t row;      /* the row holding their canonical form */
    } seen[8];
    uint32_t seen_next;
    ft_hmap live;    /* stream id of a live compact instance -> its template row */
    ft_seqset inst;  /* the stream ids of every compact instance, increasing */
    uint64_t n_inst; /* compact instances declared */
    uint64_t n_ends; /* fuser ends recorded */
};

/* ---- what the capture stream can carry ---------------------------------------------------- */
static int check_text(ft_rec *r, const char *what, const char *s)
{
    long at = s ? ft_utf8_bad_at(s) : -1;
    if (at >= 0) return ft_err_set(&r->err, FT_EINVAL, "%s: invalid UTF-8 at byte %ld", what, at);
    return FT_OK;
}

/* A value the capture stream requires to be >= 0 (so that export can be re-imported). */
static int check_nonneg(ft_rec *r, int64_t seq, const char *field, int64_t v)
{
    if (v < 0)
        return ft_err_set(&r->err, FT_ERANGE,
                          "call seq %" PRId64 ": field '%s': %" PRId64 " is negative", seq, field,
                          v);
    return FT_OK;
}

/* ---- open / close ------------------------------------------------------------------------- */
int ft_rec_open(const char *path, const ft_rec_opts *opts, ft_rec **out, ft_err *err)
{
    *out = NULL;
    ft_rec *r = ft_calloc(1, sizeof *r);
    if (!r) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", path ? path : "(null)");
    r->chunk_records = DEFAULT_CHUNK_RECORDS;
    r->level = DEFAULT_ZSTD_LEVEL;
    if (opts && opts->chunk_calls) {
        if (opts->chunk_calls > FT_CHUNK_MAX_RECORDS) {
            ft_free(r);
            return ft_err_set(err, FT_ERANGE, "chunk_calls %u exceeds %u", opts->chunk_calls,
                              FT_CHUNK_MAX_RECORDS);
        }
        r->chunk_records = opts->chunk_calls;
    }
    if (opts && opts->zstd_level) {
        if (opts->zstd_level < -7 || opts->zstd_level > 22) {
            ft_free(r);
            return ft_err_set(err, FT_ERANGE, "zstd level %d outside -7..22", opts->zstd_level);
        }
        r->level = opts->zstd_level;
    }
    int rc = ft_chunk_enc_new(&r->enc);
    if (rc) {
        ft_free(r);
        return ft_err_set(err, rc, "%s: out of memory", path ? path : "(null)");
    }
    rc = ft_trace_open(path, FT_OPEN_CREATE, &r->t, err);
    if (rc) {
        ft_chunk_enc_free(r->enc);
        ft_free(r);
        return rc;
    }
    *out = r;
    return FT_OK;
}

static void rec_free(ft_rec *r)
{
    ft_trace_close(r->t);
    ft_chunk_enc_free(r->enc);
    ft_buf_free(&r->blob);
    ft_seqset_free(&r->calls);
    ft_seqset_free(&r->inst);
    ft_hmap_free(&r->tmpl);
    ft_hmap_free(&r->live);
    ft_free(r->groups);
    ft_free(r->root);
    ft_free(r->ended);
    for (size_t k = 0; k < FT_ARRAY_LEN(r->seen); k++) {
        ft_free(r->seen[k].label);
        ft_free(r->seen[k].ops);
    }
    ft_free(r);
}

const ft_err *ft_rec_error(const ft_rec *r)
{
    return &r->err;
}

/* Copy the trace's detail into the recorder's error. */
static int from_trace(ft_rec *r, int rc)
{
    r->err = *ft_trace_error(r->t);
    if (r->err.rc != rc) r->err.rc = rc;
    return rc;
}

static int broken(ft_rec *r, int rc)
{
    r->broken = 1;
    if (rc == FT_ENOMEM && r->err.rc != FT_ENOMEM) ft_err_set(&r->err, rc, "out of memory");
    return rc;
}

static int check_usable(ft_rec *r)
{
    if (r->broken)
        return ft_err_set(&r->err, FT_ESTATE, "recorder failed earlier; no more records accepted");
    return FT_OK;
}

static int materialize(ft_rec *r);

/* Commit the pending chunk (a held declaration stays held: its call may be next). */
static int flush_chunk(ft_rec *r)
{
    int rc;
    if (!ft_chunk_enc_n_records(r->enc)) {
        /* declarations alone: commit them, so that a flush makes them durable too */
        if ((rc = ft_trace_w_commit(r->t))) return broken(r, from_trace(r, rc));
        return FT_OK;
    }
    ft_chunk_info info;
    rc = ft_chunk_enc_finish(r->enc, r->level, &r->blob, &info, &r->err);
    if (rc) return broken(r, rc);
    rc = ft_trace_w_chunk(r->t, &info, r->blob.data, r->blob.len);
    if (rc) return broken(r, from_trace(r, rc));
    return FT_OK;
}

int ft_rec_flush(ft_rec *r)
{
    int rc = check_usable(r);
    if (!rc) rc = materialize(r);
    return rc ? rc : flush_chunk(r);
}

int ft_rec_close(ft_rec *r)
{
    if (!r) return FT_OK;
    int rc = ft_rec_flush(r);
    if (!rc && (rc = ft_trace_w_finish(r->t))) from_trace(r, rc);
    rec_free(r);
    return rc;
}

int ft_rec_close_err(ft_rec *r, ft_err *err)
{
    if (!r) return FT_OK;
    int rc = ft_rec_flush(r);
    if (!rc && (rc = ft_trace_w_finish(r->t))) from_trace(r, rc);
    if (rc && err) *err = r->err;
    rec_free(r);
    return rc;
}

void ft_rec_abort(ft_rec *r)
{
    if (r) rec_free(r);
}

/* ---- declarations ------------------------------------------------------------------------- */
int ft_rec_header(ft_rec *r, const ft_header *h)
{
    int rc = check_usable(r);
    if (rc) return rc;
    if (r->have_header || r->n_decls || r->n_records)
        return ft_err_set(&r->err, FT_ESTATE, "header must come first and only once");
    if ((h->has_rank && (h->rank < 0 || h->rank > INT32_MAX)) ||
        (h->has_world_size && (h->world_size < 1 || h->world_size > INT32_MAX)) ||
        (h->has_rank && h->has_world_size && h->rank >= h->world_size))
        return ft_err_set(&r->err, FT_ERANGE,
                          "header: rank or world_size out of range (0 <= rank < world_size)");
    if ((rc = check_text(r, "header te_version", h->te_version)) ||
        (rc = check_text(r, "header torch_version", h->torch_version)) ||
        (rc = check_text(r, "header host", h->host)) ||
        (rc = check_text(r, "header started_at", h->started_at)))
        return rc;
    char *env = NULL, *extra = NULL;
    rc = ft_json_canon(h->env_json ? h->env_json : "{}", FT_CANON_OBJECT, "header env", &env, NULL,
                       &r->err);
    if (!rc)
        rc = ft_json_canon(h->extra_json ? h->extra_json : "{}", FT_CANON_OBJECT, "header extra",
                           &extra, NULL, &r->err);
    if (!rc) rc = ft_json_header_ok(env, extra, &r->err);
    if (!rc) {
        ft_header c = *h;
        c.env_json = env;
        c.extra_json = extra;
        rc = ft_trace_w_header(r->t, &c);
        if (rc) from_trace(r, rc);
    }
    ft_free(env);
    ft_free(extra);
    if (!rc) r->have_header = 1;
    return rc;
}

/* The template map's key of a (label, ops) pair. */
static uint64_t tmpl_key(const char *label, const char *ops)
{
    uint64_t h = ft_hash64(ops, strlen(ops));
    return label ? ft_hash_mix(h, ft_hash64(label, strlen(label))) : ft_hash_mix(h, 0x6c6162656cu);
}

/* The template row of (label, ops) (canonical ops), UINT32_MAX if none. */
static uint32_t tmpl_find(const ft_rec *r, const char *label, const char *ops)
{
    const uint32_t i = ft_hmap_get(&r->tmpl, tmpl_key(label, ops));
    if (i == UINT32_MAX) return i;
    const ft_fuser_def *f = ft_trace_fuser(r->t, i);
    if ((f->label == NULL) != (label == NULL) || (label && strcmp(f->label, label)) ||
        strcmp(f->ops_json, ops))
        return UINT32_MAX; /* a 64-bit collision: the declaration gets a row of its own */
    return i;
}

/* Whether stream id `id` names any fuser declared so far (rows, compact instances, pending). */
static int id_declared(const ft_rec *r, int64_t id)
{
    return ft_trace_fuser_index(r->t, id) != UINT32_MAX ||
           ft_hmap_get(&r->live, (uint64_t)id) != UINT32_MAX ||
           (r->n_inst && ft_seqset_has(&r->inst, id)) || (r->pending && r->pend_id == id);
}

/* Grow the per-row arrays to hold row n. */
static int rows_reserve(ft_rec *r, size_t n)
{
    if (n < r->groups_cap) return FT_OK;
    size_t cap = r->groups_cap ? r->groups_cap * 2 : 64;
    uint32_t *g = ft_realloc(r->groups, cap * sizeof *g);
    if (g) r->groups = g;
    uint32_t *ro = g ? ft_realloc(r->root, cap * sizeof *ro) : NULL;
    if (ro) r->root = ro;
    uint8_t *e = ro ? ft_realloc(r->ended, cap) : NULL;
    if (!e) return ft_err_set(&r->err, FT_ENOMEM, "out of memory");
    r->ended = e;
    r->groups_cap = cap;
    return FT_OK;
}

/* Write a fusers row for stream id `id` (canonical ops), declared `pos` records in. */
static int write_row(ft_rec *r, int64_t id, const char *label, const char *ops, uint32_t n_ops,
                     uint32_t groups, uint64_t pos)
{
    const size_t n = ft_trace_n_fusers(r->t);
    int rc = rows_reserve(r, n);
    if (rc) return rc;
    if ((rc = ft_trace_w_fuser(r->t, id, label, ops, n_ops, pos))) return from_trace(r, rc);
    r->groups[n] = groups;
    r->root[n] = (uint32_t)n;
    r->ended[n] = 0;
    r->n_decls++;
    return FT_OK;
}

/* The held declaration as the row it would have been (something other than its call came). */
static int materialize(ft_rec *r)
{
    if (!r->pending) return FT_OK;
    r->pending = 0;
    const ft_fuser_def *f = ft_trace_fuser(r->t, r->pend_tmpl);
    int rc = write_row(r, r->pend_id, f->label, f->ops_json, f->n_ops, r->groups[r->pend_tmpl],
                       r->pend_pos);
    return rc == FT_ENOMEM ? broken(r, rc) : rc;
}

/* Declare `id` with canonical ops: held as a compact instance when it repeats a template (and
 * compact is allowed), else a row (registered as the template of its label and ops). */
static int declare(ft_rec *r, int64_t id, const char *label, const char *ops, uint32_t n_ops,
                   uint32_t groups, int compact)
{
    if (id_declared(r, id))
        return ft_err_set(&r->err, FT_EINVAL, "fuser id %" PRId64 " is already declared", id);
    int rc = materialize(r);
    if (rc) return rc;
    const uint32_t t = tmpl_find(r, label, ops);
    /* compact ids increase, so that the set of them stays one ordered list */
    if (compact && t != UINT32_MAX && (!r->n_inst || id > r->inst.last)) {
        r->pending = 1;
        r->pend_id = id;
        r->pend_tmpl = t;
        r->pend_pos = r->n_records;
        return FT_OK;
    }
    const uint32_t row = ft_trace_n_fusers(r->t);
    if ((rc = write_row(r, id, label, ops, n_ops, groups, r->n_records))) return rc;
    if (compact && t == UINT32_MAX && ft_hmap_get(&r->tmpl, tmpl_key(label, ops)) == UINT32_MAX &&
        ft_hmap_put(&r->tmpl, tmpl_key(label, ops), row))
        return broken(r, FT_ENOMEM);
    return FT_OK;
}

static uint64_t seen_key(const char *label, const char *ops_json)
{
    return tmpl_key(label, ops_json) | 1; /* never 0, the empty entry's */
}

/* The row whose label and ops were declared before with exactly this text, UINT32_MAX if none
 * is remembered. */
static uint32_t seen_find(const ft_rec *r, const char *label, const char *ops_json)
{
    const uint64_t h = seen_key(label, ops_json);
    for (size_t k = 0; k < FT_ARRAY_LEN(r->seen); k++) {
        const struct decl_seen *e = &r->seen[k];
        if (e->hash == h && (!e->label) == (!label) && (!label || !strcmp(e->label, label)) &&
            !strcmp(e->ops, ops_json))
            return e->row;
    }
    return UINT32_MAX;
}

/* Remember that (label, ops text) canonicalises to the fields of row (an optimisation: a failed
 * copy forgets it). */
static void seen_put(ft_rec *r, const char *label, const char *ops_json, uint32_t row)
{
    struct decl_seen *e = &r->seen[r->seen_next];
    char *l = label ? ft_strdup(label) : NULL, *o = ft_strdup(ops_json);
    if ((label && !l) || !o) {
        ft_free(l);
        ft_free(o);
        return;
    }
    ft_free(e->label);
    ft_free(e->ops);
    *e = (struct decl_seen){seen_key(label, ops_json), l, o, row};
    r->seen_next = (r->seen_next + 1) % (uint32_t)FT_ARRAY_LEN(r->seen);
}

/* Check and canonicalise a declaration's fields, then declare it. */
static int fuser_decl(ft_rec *r, int64_t id, const char *label, const char *ops_json, int compact)
{
    int rc = check_usable(r);
    if (rc) return rc;
    char what[64], *ops = NULL;
    size_t n_ops = 0;
    if (id < 0) return ft_err_set(&r->err, FT_ERANGE, "fuser id %" PRId64 " is negative", id);
    const uint32_t same = compact && ops_json ? seen_find(r, label, ops_json) : UINT32_MAX;
    if (same != UINT32_MAX) { /* the same text as a declaration checked before */
        const ft_fuser_def *f = ft_trace_fuser(r->t, same);
        return declare(r, id, f->label, f->ops_json, f->n_ops, r->groups[same], 1);
    }
    snprintf(what, sizeof what, "fuser %" PRId64 " label", id);
    if ((rc = check_text(r, what, label))) return rc;
    snprintf(what, sizeof what, "fuser %" PRId64 " ops", id);
    rc = ft_json_canon(ops_json, FT_CANON_OPLIST, what, &ops, &n_ops, &r->err);
    if (rc) return rc;
    uint32_t groups = 0;
    ft_err ge = {0};
    if ((rc = ft_oplist_groups(ops, &groups, &ge))) {
        ft_err_set(&r->err, rc, "fuser %" PRId64 ": field %s", id, ft_err_msg(&ge));
    } else if (!(rc = declare(r, id, label, ops, (uint32_t)n_ops, groups, compact)) && compact) {
        const uint32_t t = tmpl_find(r, label, ops); /* the row its label and ops now have */
        if (t != UINT32_MAX) seen_put(r, label, ops_json, t);
    }
    ft_free(ops);
    return rc;
}

int ft_rec_fuser(ft_rec *r, int64_t id, const char *label, const char *ops_json)
{
    return fuser_decl(r, id, label, ops_json, 1);
}

/* The row a declared stream id names: a row's own, or a live compact instance's template
 * (*instance set); UINT32_MAX with the error set ("WHAT: field 'FIELD': ...") when it names none
 * that lives. */
static uint32_t resolve(ft_rec *r, int64_t id, int *instance, const char *what, const char *field)
{
    *instance = 0;
    uint32_t fi = ft_trace_fuser_index(r->t, id);
    if (fi != UINT32_MAX) {
        if (!r->ended[r->root[fi]]) return fi;
    } else if ((fi = ft_hmap_get(&r->live, (uint64_t)id)) != UINT32_MAX) {
        *instance = 1;
        return fi;
    }
    const int gone = fi != UINT32_MAX || (r->n_inst && ft_seqset_has(&r->inst, id));
    ft_err_set(&r->err, FT_EINVAL, "%s: field '%s': fuser %" PRId64 " %s", what, field, id,
               gone ? "has ended" : "is not declared");
    return UINT32_MAX;
}

int ft_rec_fuser_like(ft_rec *r, int64_t id, int64_t like)
{
    int rc = check_usable(r);
    if (rc) return rc;
    if (id < 0) return ft_err_set(&r->err, FT_ERANGE, "fuser id %" PRId64 " is negative", id);
    uint32_t src = UINT32_MAX;
    int inst = 0;
    char what[48];
    snprintf(what, sizeof what, "fuser %" PRId64, id);
    /* the fields of a declaration, ended or not: a row's own, a live compact instance's template */
    if (r->pending && r->pend_id == like)
        src = r->pend_tmpl;
    else if ((src = ft_trace_fuser_index(r->t, like)) == UINT32_MAX &&
             (src = resolve(r, like, &inst, what, "like")) == UINT32_MAX)
        return FT_EINVAL;
    const ft_fuser_def *f = ft_trace_fuser(r->t, src);
    return declare(r, id, f->label, f->ops_json, f->n_ops, r->groups[src], 1);
}

int ft_rec_fuser_of(ft_rec *r, int64_t id, const char *label, const char *ops_json, int64_t of)
{
    int rc = check_usable(r);
    if (rc) return rc;
    if (r->pending && r->pend_id == of && (rc = materialize(r))) return rc;
    if (ft_hmap_get(&r->live, (uint64_t)of) != UINT32_MAX)
        return ft_err_set(&r->err, FT_EUNSUPPORTED,
                          "fuser %" PRId64 ": field 'of': fuser %" PRId64 " is a compact instance "
                          "(it repeats an earlier fuser's label and ops and was declared right "
                          "before its first call), which this trace format cannot continue",
                          id, of);
    const uint32_t j = ft_trace_fuser_index(r->t, of);
    if (j != UINT32_MAX && r->ended[r->root[j]])
        return ft_err_set(&r->err, FT_EINVAL,
                          "fuser %" PRId64 ": field 'of': fuser %" PRId64 " has ended", id, of);
    if ((rc = fuser_decl(r, id, label, ops_json, 0))) return rc;
    rc = ft_trace_w_fuser_of(r->t, id, of);
    /* a refused link leaves the declaration: said as the declaration's own error */
    if (rc) return from_trace(r, rc);
    const uint32_t i = ft_trace_fuser_index(r->t, id);
    r->root[i] = r->root[j];
    return FT_OK;
}

int ft_rec_recipe(ft_rec *r, int64_t id, const char *type, int64_t obj, const char *attrs_json)
{
    int rc = check_usable(r);
    if (rc) return rc;
    if (!type || !*type)
        return ft_err_set(&r->err, FT_EINVAL, "recipe %" PRId64 ": missing type", id);
    if (id < 0) return ft_err_set(&r->err, FT_ERANGE, "recipe id %" PRId64 " is negative", id);
    if ((rc = materialize(r))) return rc;
    char what[64], *attrs = NULL;
    snprintf(what, sizeof what, "recipe %" PRId64 " type", id);
    if ((rc = check_text(r, what, type))) return rc;
    snprintf(what, sizeof what, "recipe %" PRId64 " attrs", id);
    rc = ft_json_canon(attrs_json, FT_CANON_OBJECT, what, &attrs, NULL, &r->err);
    if (rc) return rc;
    rc = ft_trace_w_recipe(r->t, id, type, obj, attrs, r->n_records);
    ft_free(attrs);
    if (rc) return from_trace(r, rc);
    r->n_decls++;
    return FT_OK;
}

/* ---- records ------------------------------------------------------------------------------ */
static int check_seq(ft_rec *r, int64_t seq)
{
    if (r->has_last && seq <= r->last_seq)
        return ft_err_set(&r->err, FT_EINVAL,
                          "seq %" PRId64 " does not increase (previous %" PRId64 ")", seq,
                          r->last_seq);
    return FT_OK;
}

static int after_append(ft_rec *r, int64_t seq)
{
    r->has_last = 1;
    r->last_seq = seq;
    r->n_records++;
    if (ft_chunk_enc_n_records(r->enc) >= r->chunk_records) return flush_chunk(r);
    return FT_OK;
}

/* The row and instance bits of the fuser a call names: its held declaration (a new compact
 * instance: FT_CF_INSTANCE | FT_CF_NEW_FUSER), a live compact instance or a row; a held
 * declaration the call does not name becomes its row first. */
static int call_fuser(ft_rec *r, const ft_call *c, uint32_t *fi, uint32_t *bits)
{
    *bits = 0;
    if (r->pending && r->pend_id == c->fuser) {
        *fi = r->pend_tmpl;
        *bits = FT_CF_INSTANCE | FT_CF_NEW_FUSER;
        return FT_OK;
    }
    int rc = materialize(r), inst;
    if (rc) return rc;
    char what[48];
    snprintf(what, sizeof what, "call seq %" PRId64, c->seq);
    if ((*fi = resolve(r, c->fuser, &inst, what, "fuser")) == UINT32_MAX) return FT_EINVAL;
    if (inst) *bits = FT_CF_INSTANCE;
    return FT_OK;
}

/* Encode a checked call (fi, ri: its dense fuser and recipe indices; bits: call_fuser's). */
static int append_call(ft_rec *r, const ft_call *call, uint32_t fi, int32_t ri, int64_t n_tokens,
                       uint32_t bits)
{
    ft_call cc = *call, *c = &cc;
    cc.flags |= bits;
    int rc;
    if ((c->flags & FT_CF_HAS_SPLITS) &&
        ft_chunk_enc_n_split_values(r->enc) + c->n_splits > FT_CHUNK_MAX_SPLIT_VALUES / 2 &&
        (rc = flush_chunk(r)))
        return rc;
    rc = ft_chunk_enc_call(r->enc, c, fi, ri, n_tokens);
    if (rc == FT_ERANGE) { /* a per-chunk dictionary is full: start a new chunk */
        if ((rc = flush_chunk(r))) return rc;
        rc = ft_chunk_enc_call(r->enc, c, fi, ri, n_tokens);
    }
    if (rc) return broken(r, rc);
    if (bits & FT_CF_NEW_FUSER) { /* the held declaration is this compact instance now */
        r->pending = 0;
        if (ft_hmap_put(&r->live, (uint64_t)c->fuser, fi) || ft_seqset_add(&r->inst, c->fuser))
            return broken(r, FT_ENOMEM);
        r->n_inst++;
    }
    return FT_OK;
}

int ft_rec_call(ft_rec *r, const ft_call *c)
{
    int rc = check_usable(r);
    if (rc) return rc;
    if ((rc = check_seq(r, c->seq))) return rc;
    uint32_t fl = c->flags;
    if (fl & ~CF_ALL)
        return ft_err_set(&r->err, FT_EINVAL, "call seq %" PRId64 ": unknown flag bits 0x%x",
                          c->seq, fl & ~CF_ALL);
    if ((rc = check_nonneg(r, c->seq, "seq", c->seq)) ||
        (rc = check_nonneg(r, c->seq, "device", c->device)) ||
        ((fl & FT_CF_HAS_STEP) && (rc = check_nonneg(r, c->seq, "step", c->step))) ||
        ((fl & FT_CF_HAS_MB) && (rc = check_nonneg(r, c->seq, "mb", c->mb))) ||
        ((fl & FT_CF_HAS_NS) && (rc = check_nonneg(r, c->seq, "ns", c->ns))) ||
        ((fl & FT_CF_HAS_FUSE_NS) && (rc = check_nonneg(r, c->seq, "fuse_ns", c->fuse_ns))))
        return rc;
    uint32_t fi, bits;
    if ((rc = call_fuser(r, c, &fi, &bits))) return rc;
    int32_t ri = -1;
    if (fl & FT_CF_HAS_RECIPE) {
        uint32_t x = ft_trace_recipe_index(r->t, c->recipe);
        if (x == UINT32_MAX)
            return ft_err_set(&r->err, FT_EINVAL,
                              "call seq %" PRId64 ": field 'recipe': id %" PRId64
                              " is not declared",
                              c->seq, c->recipe);
        ri = (int32_t)x;
    }
    const ft_fuser_def *f = ft_trace_fuser(r->t, fi);
    if (c->n_op_rg != f->n_ops)
        return ft_err_set(&r->err, FT_EINVAL,
                          "call seq %" PRId64 ": field 'op_rg': %u entries, fuser %" PRId64
                          " has %u ops",
                          c->seq, c->n_op_rg, c->fuser, f->n_ops);
    if (c->n_op_rg && !c->op_rg)
        return ft_err_set(&r->err, FT_EINVAL, "call seq %" PRId64 ": op_rg is NULL", c->seq);
    for (uint32_t i = 0; i < c->n_op_rg; i++)
        if (c->op_rg[i] > 1)
            return ft_err_set(&r->err, FT_EINVAL,
                              "call seq %" PRId64 ": field 'op_rg': entry %u is not 0/1", c->seq,
                              i);
    int64_t n_tokens = 0;
    if ((fl & FT_CF_HAS_SPLITS) && r->groups[fi] && c->n_splits != r->groups[fi])
        return ft_err_set(&r->err, FT_EINVAL,
                          "call seq %" PRId64 ": field 'm_splits': %u entries, fuser %" PRId64
                          " has num_groups %u",
                          c->seq, c->n_splits, c->fuser, r->groups[fi]);
    if (fl & FT_CF_HAS_SPLITS) {
        if (c->n_splits > FT_LIM_SPLITS)
            return ft_err_set(&r->err, FT_ERANGE,
                              "call seq %" PRId64 ": field 'm_splits': %u groups (limit %d)",
                              c->seq, c->n_splits, FT_LIM_SPLITS);
        if (c->n_splits && !c->m_splits)
            return ft_err_set(&r->err, FT_EINVAL, "call seq %" PRId64 ": m_splits is NULL", c->seq);
        for (uint32_t i = 0; i < c->n_splits; i++) {
            int64_t v = c->m_splits[i];
            if (v < 0)
                return ft_err_set(&r->err, FT_EINVAL,
                                  "call seq %" PRId64 ": field 'm_splits': entry %u is negative",
                                  c->seq, i);
            if (v > INT64_MAX - n_tokens)
                return ft_err_set(&r->err, FT_ERANGE,
                                  "call seq %" PRId64 ": field 'm_splits': sum overflows", c->seq);
            n_tokens += v;
        }
    }
    if (fl & FT_CF_HAS_PHASE) {
        if (!c->phase)
            return ft_err_set(&r->err, FT_EINVAL, "call seq %" PRId64 ": phase is NULL", c->seq);
        if (strlen(c->phase) > FT_LIM_PHASE_BYTES)
            return ft_err_set(&r->err, FT_ERANGE,
                              "call seq %" PRId64 ": field 'phase': longer than %d bytes", c->seq,
                              FT_LIM_PHASE_BYTES);
        char what[64];
        snprintf(what, sizeof what, "call seq %" PRId64 ": field 'phase'", c->seq);
        if ((rc = check_text(r, what, c->phase))) return rc;
    }
    if ((rc = append_call(r, c, fi, ri, n_tokens, bits))) return rc;
    if ((rc = ft_seqset_add(&r->calls, c->seq))) return broken(r, rc);
    return after_append(r, c->seq);
}

int ft_rec_backward(ft_rec *r, const ft_backward *b)
{
    int rc = check_usable(r);
    if (rc) return rc;
    if ((rc = check_seq(r, b->seq))) return rc;
    if ((rc = check_nonneg(r, b->seq, "seq", b->seq)) ||
        (b->has_ns && (rc = check_nonneg(r, b->seq, "ns", b->ns))))
        return rc;
    if (r->prevalidated)
        return ft_err_set(&r->err, FT_ESTATE,
                          "backward seq %" PRId64 ": earlier calls came through the pre-validated "
                          "entries; the recorder cannot check this reference",
                          b->seq);
    if (b->call >= b->seq || !ft_seqset_has(&r->calls, b->call))
        return ft_err_set(&r->err, FT_EINVAL,
                          "backward seq %" PRId64 ": field 'call': %" PRId64
                          " is not the seq of an earlier call",
                          b->seq, b->call);
    if ((rc = materialize(r))) return rc;
    rc = ft_chunk_enc_backward(r->enc, b);
    if (rc) return broken(r, rc);
    return after_append(r, b->seq);
}

/* ---- pre-validated entries (the JSONL importer) ------------------------------------------- */
int ft_rec_call_prevalidated(ft_rec *r, const ft_call *c)
{
    int rc = check_usable(r);
    if (rc) return rc;
    uint32_t fi, bits;
    uint32_t ri = c->flags & FT_CF_HAS_RECIPE ? ft_trace_recipe_index(r->t, c->recipe) : 0;
    if (call_fuser(r, c, &fi, &bits) || ri == UINT32_MAX) /* a broken promise, not bad input */
        return ft_err_set(&r->err, FT_ESTATE,
                          "call seq %" PRId64 ": pre-validated call names an undeclared id",
                          c->seq);
    int64_t n_tokens = 0;
    if (c->flags & FT_CF_HAS_SPLITS)
        for (uint32_t i = 0; i < c->n_splits; i++)
            n_tokens += c->m_splits[i];
    r->prevalidated = 1;
    int32_t rix = c->flags & FT_CF_HAS_RECIPE ? (int32_t)ri : -1;
    if ((rc = append_call(r, c, fi, rix, n_tokens, bits))) return rc;
    return after_append(r, c->seq);
}

int ft_rec_backward_prevalidated(ft_rec *r, const ft_backward *b)
{
    int rc = check_usable(r);
    if (rc) return rc;
    r->prevalidated = 1;
    if ((rc = materialize(r))) return rc;
    rc = ft_chunk_enc_backward(r->enc, b);
    if (rc) return broken(r, rc);
    return after_append(r, b->seq);
}

int ft_rec_fuser_end(ft_rec *r, const ft_fuser_end *e)
{
    int rc = check_usable(r);
    if (rc) return rc;
    if ((rc = check_seq(r, e->seq)) || (rc = check_nonneg(r, e->seq, "seq", e->seq))) return rc;
    if ((rc = materialize(r))) return rc; /* a fuser that ends before its first call: a row */
    char what[48];
    snprintf(what, sizeof what, "fuser_end seq %" PRId64, e->seq);
    int inst;
    const uint32_t fi = resolve(r, e->fuser, &inst, what, "fuser");
    if (fi == UINT32_MAX) return FT_EINVAL;
    if ((rc = ft_chunk_enc_end(r->enc, e->seq, fi, inst, e->fuser))) return broken(r, rc);
    if (inst)
        ft_hmap_del(&r->live, (uint64_t)e->fuser);
    else
        r->ended[r->root[fi]] = 1;
    r->n_ends++;
    return after_append(r, e->seq);
}

int ft_rec_call_flat(ft_rec *r, int64_t seq, int64_t fuser, int64_t recipe, uint32_t flags,
                     int32_t device, uint32_t n_op_rg, const uint8_t *op_rg, int32_t n_splits,
                     const int64_t *m_splits, int64_t step, int64_t mb, const char *phase,
                     int64_t ns, int64_t fuse_ns)
{
    ft_call c = {0};
    c.seq = seq;
    c.fuser = fuser;
    c.recipe = recipe;
    c.flags = flags & ~(uint32_t)(FT_CF_HAS_SPLITS | FT_CF_HAS_PHASE);
    c.device = device;
    c.n_op_rg = n_op_rg;
    c.op_rg = op_rg;
    if (n_splits >= 0) {
        c.flags |= FT_CF_HAS_SPLITS;
        c.n_splits = (uint32_t)n_splits;
        c.m_splits = m_splits;
    }
    c.step = step;
    c.mb = mb;
    if (phase) {
        c.flags |= FT_CF_HAS_PHASE;
        c.phase = phase;
    }
    c.ns = ns;
    c.fuse_ns = fuse_ns;
    return ft_rec_call(r, &c);
}

/* ---- sink --------------------------------------------------------------------------------- */
static int sink_header(void *ctx, const ft_header *h)
{
    return ft_rec_header(ctx, h);
}

static int sink_fuser(void *ctx, const ft_fuser_def *f)
{
    if (f->has_of) return ft_rec_fuser_of(ctx, f->id, f->label, f->ops_json, f->of);
    return ft_rec_fuser(ctx, f->id, f->label, f->ops_json);
}

static int sink_recipe(void *ctx, const ft_recipe_def *rd)
{
    return ft_rec_recipe(ctx, rd->id, rd->type, rd->obj, rd->attrs_json);
}

static int sink_call(void *ctx, const ft_call *c)
{
    return ft_rec_call(ctx, c);
}

static int sink_backward(void *ctx, const ft_backward *b)
{
    return ft_rec_backward(ctx, b);
}

static int sink_end(void *ctx, const ft_fuser_end *e)
{
    return ft_rec_fuser_end(ctx, e);
}

static int sink_call_pre(void *ctx, const ft_call *c)
{
    return ft_rec_call_prevalidated(ctx, c);
}

static int sink_backward_pre(void *ctx, const ft_backward *b)
{
    return ft_rec_backward_prevalidated(ctx, b);
}

static const ft_err *sink_error(void *ctx)
{
    return ft_rec_error(ctx);
}

void ft_rec_sink(ft_rec *r, ft_sink *out)
{
    out->ctx = r;
    out->header_fn = sink_header;
    out->fuser_fn = sink_fuser;
    out->recipe_fn = sink_recipe;
    out->call_fn = sink_call;
    out->backward_fn = sink_backward;
    out->end_fn = sink_end;
    out->error_fn = sink_error;
}

void ft_rec_sink_prevalidated(ft_rec *r, ft_sink *out)
{
    ft_rec_sink(r, out);
    out->call_fn = sink_call_pre;
    out->backward_fn = sink_backward_pre;
}
