/*
 * recorder.c - the recording API: checks every record, maps stream ids to dense indices, feeds
 * the chunk encoder and commits one chunk per batch in its own transaction, together with the
 * declarations made since the last one (schema/trace_write.c checkpoints after each commit, so the
 * main file holds it). Everything beyond schema/ft_limits.h is refused here, at record time,
 * with FT_ERANGE naming the field. Not thread-safe: one thread at a time per handle.
 *
 * After an out-of-memory or SQLite failure inside an append, the handle is "broken": every later
 * call returns FT_ESTATE naming the first failure, and close only releases memory. Records
 * rejected by a check (FT_EINVAL, FT_ERANGE) leave the handle usable.
 */
#include "canon.h"
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
    size_t groups_cap;
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
    ft_free(r->groups);
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

int ft_rec_flush(ft_rec *r)
{
    int rc = check_usable(r);
    if (rc) return rc;
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

int ft_rec_close(ft_rec *r)
{
    if (!r) return FT_OK;
    int rc = ft_rec_flush(r);
    if (!rc && (rc = ft_trace_w_finish(r->t))) from_trace(r, rc);
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

int ft_rec_fuser(ft_rec *r, int64_t id, const char *label, const char *ops_json)
{
    int rc = check_usable(r);
    if (rc) return rc;
    char what[64], *ops = NULL;
    size_t n_ops = 0;
    if (id < 0) return ft_err_set(&r->err, FT_ERANGE, "fuser id %" PRId64 " is negative", id);
    snprintf(what, sizeof what, "fuser %" PRId64 " label", id);
    if ((rc = check_text(r, what, label))) return rc;
    snprintf(what, sizeof what, "fuser %" PRId64 " ops", id);
    rc = ft_json_canon(ops_json, FT_CANON_OPLIST, what, &ops, &n_ops, &r->err);
    if (rc) return rc;
    uint32_t groups = 0;
    ft_err ge = {0};
    size_t n = ft_trace_n_fusers(r->t);
    if ((rc = ft_oplist_groups(ops, &groups, &ge))) {
        ft_err_set(&r->err, rc, "fuser %" PRId64 ": field %s", id, ft_err_msg(&ge));
    } else if (n >= r->groups_cap) {
        size_t cap = r->groups_cap ? r->groups_cap * 2 : 64;
        uint32_t *q = ft_realloc(r->groups, cap * sizeof *q);
        if (!q)
            rc = ft_err_set(&r->err, FT_ENOMEM, "out of memory");
        else
            r->groups = q, r->groups_cap = cap;
    }
    int written = 0;
    if (!rc) {
        rc = ft_trace_w_fuser(r->t, id, label, ops, (uint32_t)n_ops, r->n_records);
        written = 1;
    }
    ft_free(ops);
    if (rc) return written ? from_trace(r, rc) : rc;
    r->groups[n] = groups;
    r->n_decls++;
    return FT_OK;
}

int ft_rec_fuser_of(ft_rec *r, int64_t id, const char *label, const char *ops_json, int64_t of)
{
    int rc = ft_rec_fuser(r, id, label, ops_json);
    if (rc) return rc;
    rc = ft_trace_w_fuser_of(r->t, id, of);
    /* a refused link leaves the declaration: said as the declaration's own error */
    return rc ? from_trace(r, rc) : FT_OK;
}

int ft_rec_recipe(ft_rec *r, int64_t id, const char *type, int64_t obj, const char *attrs_json)
{
    int rc = check_usable(r);
    if (rc) return rc;
    if (!type || !*type)
        return ft_err_set(&r->err, FT_EINVAL, "recipe %" PRId64 ": missing type", id);
    if (id < 0) return ft_err_set(&r->err, FT_ERANGE, "recipe id %" PRId64 " is negative", id);
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
    if (ft_chunk_enc_n_records(r->enc) >= r->chunk_records) return ft_rec_flush(r);
    return FT_OK;
}

/* Encode a checked call (fi, ri: its dense fuser and recipe indices). */
static int append_call(ft_rec *r, const ft_call *c, uint32_t fi, int32_t ri, int64_t n_tokens)
{
    int rc;
    if ((c->flags & FT_CF_HAS_SPLITS) &&
        ft_chunk_enc_n_split_values(r->enc) + c->n_splits > FT_CHUNK_MAX_SPLIT_VALUES / 2 &&
        (rc = ft_rec_flush(r)))
        return rc;
    rc = ft_chunk_enc_call(r->enc, c, fi, ri, n_tokens);
    if (rc == FT_ERANGE) { /* a per-chunk dictionary is full: start a new chunk */
        if ((rc = ft_rec_flush(r))) return rc;
        rc = ft_chunk_enc_call(r->enc, c, fi, ri, n_tokens);
    }
    if (rc) return broken(r, rc);
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
    uint32_t fi = ft_trace_fuser_index(r->t, c->fuser);
    if (fi == UINT32_MAX)
        return ft_err_set(&r->err, FT_EINVAL,
                          "call seq %" PRId64 ": field 'fuser': id %" PRId64 " is not declared",
                          c->seq, c->fuser);
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
    if ((rc = append_call(r, c, fi, ri, n_tokens))) return rc;
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
    rc = ft_chunk_enc_backward(r->enc, b);
    if (rc) return broken(r, rc);
    return after_append(r, b->seq);
}

/* ---- pre-validated entries (the JSONL importer) ------------------------------------------- */
int ft_rec_call_prevalidated(ft_rec *r, const ft_call *c)
{
    int rc = check_usable(r);
    if (rc) return rc;
    uint32_t fi = ft_trace_fuser_index(r->t, c->fuser);
    uint32_t ri = c->flags & FT_CF_HAS_RECIPE ? ft_trace_recipe_index(r->t, c->recipe) : 0;
    if (fi == UINT32_MAX || ri == UINT32_MAX) /* a broken promise, not bad input */
        return ft_err_set(&r->err, FT_ESTATE,
                          "call seq %" PRId64 ": pre-validated call names an undeclared id",
                          c->seq);
    int64_t n_tokens = 0;
    if (c->flags & FT_CF_HAS_SPLITS)
        for (uint32_t i = 0; i < c->n_splits; i++)
            n_tokens += c->m_splits[i];
    r->prevalidated = 1;
    int32_t rix = c->flags & FT_CF_HAS_RECIPE ? (int32_t)ri : -1;
    if ((rc = append_call(r, c, fi, rix, n_tokens))) return rc;
    return after_append(r, c->seq);
}

int ft_rec_backward_prevalidated(ft_rec *r, const ft_backward *b)
{
    int rc = check_usable(r);
    if (rc) return rc;
    r->prevalidated = 1;
    rc = ft_chunk_enc_backward(r->enc, b);
    if (rc) return broken(r, rc);
    return after_append(r, b->seq);
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
    out->error_fn = sink_error;
}

void ft_rec_sink_prevalidated(ft_rec *r, ft_sink *out)
{
    ft_rec_sink(r, out);
    out->call_fn = sink_call_pre;
    out->backward_fn = sink_backward_pre;
}
