/*
 * export.c - ft_trace_export: every record of a trace, in stream order, into a sink, with the
 * header first and each fuser / recipe declaration re-emitted where it stood in the original
 * stream (before the record it preceded; a compact instance's right before the call that
 * carries it), so that export(import(x)) == x record for record.
 */
#include "canon.h"
#include "ft_hmap.h"
#include "ft_recorder.h"
#include "ft_trace_write.h"

#include <string.h>

typedef struct decl_cursor {
    uint32_t fi, ri; /* next fuser / recipe to emit */
} decl_cursor;

static int sink_failed(ft_sink *sink, int rc, const char *what, ft_err *err)
{
    const ft_err *e = sink->error_fn ? sink->error_fn(sink->ctx) : NULL;
    return ft_err_set(err, rc, "export: %s: %s", what, e ? ft_err_msg(e) : ft_strerror(rc));
}

/* Emit every declaration that stood before record number k. */
static int emit_decls(ft_trace *t, ft_sink *sink, decl_cursor *c, uint64_t k, ft_err *err)
{
    uint32_t nf = ft_trace_n_fusers(t), nr = ft_trace_n_recipes(t);
    for (;;) {
        uint64_t fpos = UINT64_MAX, fno = UINT64_MAX, rpos = UINT64_MAX, rno = UINT64_MAX;
        if (c->fi < nf) ft_trace_fuser_decl(t, c->fi, &fpos, &fno);
        if (c->ri < nr) ft_trace_recipe_decl(t, c->ri, &rpos, &rno);
        int fuser_next = c->fi < nf && (c->ri >= nr || fno < rno);
        uint64_t pos = fuser_next ? fpos : rpos;
        if ((c->fi >= nf && c->ri >= nr) || pos > k) return FT_OK;
        int rc;
        if (fuser_next) {
            rc = sink->fuser_fn(sink->ctx, ft_trace_fuser(t, c->fi++));
            if (rc) return sink_failed(sink, rc, "fuser", err);
        } else {
            rc = sink->recipe_fn(sink->ctx, ft_trace_recipe(t, c->ri++));
            if (rc) return sink_failed(sink, rc, "recipe", err);
        }
    }
}

/* text must be what the recorder's canonical form of it is (and, for an op list, of n ops). */
static int check_canon(ft_trace *t, const char *table, uint32_t row, const char *text, int kind,
                       int64_t n_want, ft_err *err)
{
    char *c = NULL;
    size_t n = 0;
    ft_err e = {0};
    int rc = ft_json_canon(text, kind, "value", &c, &n, &e);
    if (rc == FT_ENOMEM) return ft_err_set(err, rc, "%s: out of memory", ft_trace_path(t));
    int same = !rc && !strcmp(c, text) && (n_want < 0 || (int64_t)n == n_want);
    ft_free(c);
    if (!same)
        return ft_err_set(err, FT_ECORRUPT,
                          "%s: table %s: row %u: its JSON is not what the recorder writes (%s)",
                          ft_trace_path(t), table, row, rc ? ft_err_msg(&e) : "not canonical");
    return FT_OK;
}

/* Every op list as the capture stream requires (ft_oplist_groups), and every call's m_splits
 * of the length its fuser's num_groups says (one pass over the chunks, only when some fuser has
 * a num_groups). */
static int check_groups(ft_trace *t, ft_err *err)
{
    uint32_t nf = ft_trace_n_fusers(t), any = 0;
    uint32_t *g = ft_calloc(nf ? nf : 1, sizeof *g);
    if (!g) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", ft_trace_path(t));
    int rc = FT_OK;
    for (uint32_t i = 0; i < nf && !rc; i++) {
        ft_err e = {0};
        if (i && ft_trace_fuser(t, i)->ops_json == ft_trace_fuser(t, i - 1)->ops_json) {
            g[i] = g[i - 1];
        } else if ((rc = ft_oplist_groups(ft_trace_fuser(t, i)->ops_json, &g[i], &e))) {
            rc = ft_err_set(err, rc == FT_ENOMEM ? rc : FT_ECORRUPT, "%s: table fusers: row %u: %s",
                            ft_trace_path(t), i + 1, ft_err_msg(&e));
        }
        any |= g[i];
    }
    ft_reader *r = NULL;
    if (!rc && any && (rc = ft_reader_open(t, FT_READ_SPLITS, &r))) *err = *ft_trace_error(t);
    while (!rc && any) {
        const ft_batch *b;
        if ((rc = ft_reader_next(r, &b))) {
            *err = *ft_trace_error(t);
            break;
        }
        if (!b) break;
        for (uint32_t i = 0; i < b->n && !rc; i++) {
            uint32_t want = b->kind[i] == FT_REC_CALL ? g[b->fuser[i]] : 0;
            uint32_t have = b->splits_off[i + 1] - b->splits_off[i];
            if (want && (b->flags[i] & FT_CF_HAS_SPLITS) && have != want)
                rc = ft_err_set(err, FT_ECORRUPT,
                                "%s: chunk %llu: call seq %lld: m_splits has %u entries, its "
                                "fuser's num_groups is %u",
                                ft_trace_path(t), (unsigned long long)b->chunk_id,
                                (long long)b->seq[i], have, want);
        }
    }
    ft_reader_close(r);
    ft_free(g);
    return rc;
}

int ft_trace_check_json(ft_trace *t, ft_err *err)
{
    const ft_header *h = ft_trace_header(t);
    int rc = check_canon(t, "meta", 0, h->env_json, FT_CANON_OBJECT, -1, err);
    if (!rc) rc = check_canon(t, "meta", 0, h->extra_json, FT_CANON_OBJECT, -1, err);
    ft_err e = {0};
    if (!rc && (rc = ft_json_header_ok(h->env_json, h->extra_json, &e)))
        rc = ft_err_set(err, rc == FT_ENOMEM ? rc : FT_ECORRUPT, "%s: table meta: %s",
                        ft_trace_path(t), ft_err_msg(&e));
    ft_hmap seen = {0}; /* op list texts checked (fusers of one op list share the text) */
    for (uint32_t i = 0; !rc && i < ft_trace_n_fusers(t); i++) {
        const ft_fuser_def *f = ft_trace_fuser(t, i);
        uint64_t key = (uint64_t)(uintptr_t)f->ops_json;
        if (ft_hmap_get(&seen, key) != UINT32_MAX) continue;
        if (ft_hmap_put(&seen, key, i))
            rc = ft_err_set(err, FT_ENOMEM, "%s: out of memory", ft_trace_path(t));
        else
            rc = check_canon(t, "oplists", i + 1, f->ops_json, FT_CANON_OPLIST, f->n_ops, err);
    }
    ft_hmap_free(&seen);
    for (uint32_t i = 0; !rc && i < ft_trace_n_recipes(t); i++)
        rc = check_canon(t, "recipes", i + 1, ft_trace_recipe(t, i)->attrs_json, FT_CANON_OBJECT,
                         -1, err);
    if (!rc) rc = check_groups(t, err);
    return rc;
}

int ft_trace_export(ft_trace *t, ft_sink *sink, ft_err *err)
{
    ft_err local;
    if (!err) err = &local;
    int rc = ft_trace_check_json(t, err);
    if (rc) return rc;
    rc = sink->header_fn(sink->ctx, ft_trace_header(t));
    if (rc) return sink_failed(sink, rc, "header", err);
    ft_reader *r = NULL;
    if ((rc = ft_reader_open(t, FT_READ_SPLITS, &r))) {
        if (err) *err = *ft_trace_error(t);
        return rc;
    }
    decl_cursor cur = {0, 0};
    uint64_t k = 0;
    for (;;) {
        const ft_batch *b;
        if ((rc = ft_reader_next(r, &b))) {
            if (err) *err = *ft_trace_error(t);
            break;
        }
        if (!b) break;
        for (uint32_t i = 0; i < b->n && !rc; i++, k++) {
            if ((rc = emit_decls(t, sink, &cur, k, err))) break;
            if (b->kind[i] == FT_REC_CALL) {
                ft_call c;
                ft_batch_call(t, b, i, &c);
                if (b->flags[i] & FT_CF_NEW_FUSER) { /* its declaration: the template's fields */
                    ft_fuser_def f = *ft_trace_fuser(t, b->fuser[i]);
                    f.id = b->sid[i];
                    f.has_of = 0;
                    f.of = 0;
                    if ((rc = sink->fuser_fn(sink->ctx, &f))) {
                        rc = sink_failed(sink, rc, "fuser", err);
                        break;
                    }
                }
                if ((rc = sink->call_fn(sink->ctx, &c))) rc = sink_failed(sink, rc, "call", err);
            } else if (b->kind[i] == FT_REC_END) {
                ft_fuser_end e;
                ft_batch_fuser_end(b, i, &e);
                if (sink->end_fn && (rc = sink->end_fn(sink->ctx, &e)))
                    rc = sink_failed(sink, rc, "fuser_end", err);
            } else {
                ft_backward bw;
                ft_batch_backward(b, i, &bw);
                if ((rc = sink->backward_fn(sink->ctx, &bw)))
                    rc = sink_failed(sink, rc, "backward", err);
            }
        }
        if (rc) break;
    }
    if (!rc) rc = emit_decls(t, sink, &cur, UINT64_MAX, err);
    ft_reader_close(r);
    return rc;
}
