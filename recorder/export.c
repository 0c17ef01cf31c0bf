/*
 * export.c - ft_trace_export: every record of a trace, in stream order, into a sink, with the
 * header first and each fuser / recipe declaration re-emitted where it stood in the original
 * stream (before the record it preceded), so that export(import(x)) == x record for record.
 */
#include "ft_recorder.h"
#include "ft_trace_write.h"

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

int ft_trace_export(ft_trace *t, ft_sink *sink, ft_err *err)
{
    int rc = sink->header_fn(sink->ctx, ft_trace_header(t));
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
                if ((rc = sink->call_fn(sink->ctx, &c))) rc = sink_failed(sink, rc, "call", err);
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
