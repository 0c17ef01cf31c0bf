/*
 * jsonl_writer.c - the ft_jsonl_writer sink: writes each record it receives as one capture-jsonl
 * v1 line (docs/capture-format.md), in the order given.
 *
 * Optional fields are written only when present, so that export(import(x)) gives back x record
 * for record (key order and whitespace aside). The JSON texts held by records (ops, recipe attrs,
 * env, extra header fields) are written as they are: they are canonical JSON made by the importer
 * or the recorder. One limit: an `env` that is present but empty is indistinguishable from an
 * absent one in ft_header and is written as absent.
 *
 * A line is built in a buffer and written with one fwrite; a short write is FT_EIO. The caller
 * flushes/closes the FILE and checks it (stdio may still hold the last lines).
 *
 * A compressing writer (ft_jsonl_writer_new_zstd) gathers lines into ZSTD_CStreamInSize() bytes
 * and compresses them with ZSTD_compressStream2 into one frame with a content checksum, writing
 * each compressed block as it comes; ft_jsonl_writer_finish ends the frame.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_recorder.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <zstd.h>

struct ft_jsonl_writer {
    FILE *f;
    ft_buf line; /* the record being built */
    ft_err err;
    /* compressing writer only */
    ZSTD_CCtx *cz;
    ft_buf pend;   /* lines not yet compressed */
    size_t chunk;  /* compress when pend holds this many bytes */
    uint8_t *zout; /* [zcap] compressed bytes */
    size_t zcap;
};

/* ---- building a line ------------------------------------------------------------------- */
static void put(ft_buf *b, const char *s, size_t n)
{
    memcpy(b->data + b->len, s, n);
    b->len += n;
}

/* Room for n more bytes; everything below writes only after reserving. */
static int room(ft_jsonl_writer *w, size_t n)
{
    if (ft_buf_reserve(&w->line, n)) return ft_err_set(&w->err, FT_ENOMEM, "out of memory");
    return FT_OK;
}

static int lit(ft_jsonl_writer *w, const char *s)
{
    size_t n = strlen(s);
    int rc = room(w, n);
    if (!rc) put(&w->line, s, n);
    return rc;
}

static int i64(ft_jsonl_writer *w, int64_t v)
{
    char tmp[24];
    size_t n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[sizeof tmp - 1 - n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) tmp[sizeof tmp - 1 - n++] = '-';
    int rc = room(w, n);
    if (!rc) put(&w->line, tmp + sizeof tmp - n, n);
    return rc;
}

/* A JSON string literal. */
static int str(ft_jsonl_writer *w, const char *s)
{
    if (ft_buf_json_str(&w->line, s, strlen(s)))
        return ft_err_set(&w->err, FT_ENOMEM, "out of memory");
    return FT_OK;
}

/* ,"key":  */
static int key(ft_jsonl_writer *w, const char *k)
{
    size_t n = strlen(k);
    int rc = room(w, n + 4);
    if (rc) return rc;
    put(&w->line, ",\"", 2);
    put(&w->line, k, n);
    put(&w->line, "\":", 2);
    return FT_OK;
}

static int kv_i64(ft_jsonl_writer *w, const char *k, int64_t v)
{
    int rc = key(w, k);
    return rc ? rc : i64(w, v);
}

static int kv_str(ft_jsonl_writer *w, const char *k, const char *v)
{
    int rc = key(w, k);
    return rc ? rc : str(w, v);
}

static int kv_bool(ft_jsonl_writer *w, const char *k, int v)
{
    int rc = key(w, k);
    return rc ? rc : lit(w, v ? "true" : "false");
}

/* Start a record line: {"t":"TYPE" */
static int begin(ft_jsonl_writer *w, const char *type)
{
    w->line.len = 0;
    int rc = lit(w, "{\"t\":");
    return rc ? rc : str(w, type);
}

static int write_out(ft_jsonl_writer *w, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, w->f) != n)
        return ft_err_set(&w->err, FT_EIO, "write failed: %s", strerror(errno));
    return FT_OK;
}

/* Compress pend (all of it) and write what comes out; mode ZSTD_e_end also ends the frame. */
static int compress_pending(ft_jsonl_writer *w, ZSTD_EndDirective mode)
{
    ZSTD_inBuffer in = {w->pend.data, w->pend.len, 0};
    for (;;) {
        ZSTD_outBuffer out = {w->zout, w->zcap, 0};
        size_t left = ZSTD_compressStream2(w->cz, &out, &in, mode);
        if (ZSTD_isError(left))
            return ft_err_set(&w->err, FT_EIO, "zstd: %s", ZSTD_getErrorName(left));
        int rc = write_out(w, w->zout, out.pos);
        if (rc) return rc;
        if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size) break;
    }
    w->pend.len = 0;
    return FT_OK;
}

/* Close the record and write it out. */
static int end(ft_jsonl_writer *w)
{
    int rc = lit(w, "}\n");
    if (rc) return rc;
    if (!w->cz) return write_out(w, w->line.data, w->line.len);
    if (ft_buf_append(&w->pend, w->line.data, w->line.len))
        return ft_err_set(&w->err, FT_ENOMEM, "out of memory");
    return w->pend.len >= w->chunk ? compress_pending(w, ZSTD_e_continue) : FT_OK;
}

/* ---- records --------------------------------------------------------------------------- */
static int w_header(void *ctx, const ft_header *h)
{
    ft_jsonl_writer *w = ctx;
    int rc = begin(w, "header");
    if (!rc) rc = kv_str(w, "format", "fusertrace-capture");
    if (!rc) rc = kv_i64(w, "version", 1);
    if (!rc && h->te_version) rc = kv_str(w, "te_version", h->te_version);
    if (!rc && h->torch_version) rc = kv_str(w, "torch_version", h->torch_version);
    if (!rc && h->host) rc = kv_str(w, "host", h->host);
    if (!rc && h->has_rank) rc = kv_i64(w, "rank", h->rank);
    if (!rc && h->has_world_size) rc = kv_i64(w, "world_size", h->world_size);
    if (!rc && h->started_at) rc = kv_str(w, "started_at", h->started_at);
    if (!rc && h->env_json && strcmp(h->env_json, "{}")) {
        rc = key(w, "env");
        if (!rc) rc = lit(w, h->env_json);
    }
    /* extra header fields: splice the members of the extra_json object */
    if (!rc && h->extra_json) {
        const char *s = h->extra_json;
        size_t n = strlen(s);
        while (n && (s[n - 1] == ' ' || s[n - 1] == '\n'))
            n--;
        while (n && (*s == ' ' || *s == '\n'))
            s++, n--;
        if (n < 2 || s[0] != '{' || s[n - 1] != '}')
            return ft_err_set(&w->err, FT_EINVAL, "header: extra fields are not a JSON object");
        s++;
        n -= 2;
        int empty = 1;
        for (size_t i = 0; i < n; i++)
            if (s[i] != ' ' && s[i] != '\n' && s[i] != '\t') empty = 0;
        if (!empty) {
            rc = room(w, n + 1);
            if (!rc) {
                put(&w->line, ",", 1);
                put(&w->line, s, n);
            }
        }
    }
    return rc ? rc : end(w);
}

static int w_fuser(void *ctx, const ft_fuser_def *f)
{
    ft_jsonl_writer *w = ctx;
    int rc = begin(w, "fuser");
    if (!rc) rc = kv_i64(w, "id", f->id);
    if (!rc && f->label) rc = kv_str(w, "label", f->label);
    if (!rc && f->has_of) rc = kv_i64(w, "of", f->of);
    if (!rc) rc = key(w, "ops");
    if (!rc) rc = lit(w, f->ops_json ? f->ops_json : "[]");
    return rc ? rc : end(w);
}

static int w_recipe(void *ctx, const ft_recipe_def *r)
{
    ft_jsonl_writer *w = ctx;
    int rc = begin(w, "recipe");
    if (!rc) rc = kv_i64(w, "id", r->id);
    if (!rc) rc = kv_str(w, "type", r->type ? r->type : "");
    if (!rc) rc = kv_i64(w, "obj", r->obj);
    if (!rc) rc = key(w, "attrs");
    if (!rc) rc = lit(w, r->attrs_json ? r->attrs_json : "{}");
    return rc ? rc : end(w);
}

static int w_call(void *ctx, const ft_call *c)
{
    ft_jsonl_writer *w = ctx;
    uint32_t fl = c->flags;
    int rc = begin(w, "call");
    if (!rc) rc = kv_i64(w, "seq", c->seq);
    if (!rc) rc = kv_i64(w, "fuser", c->fuser);
    if (!rc) {
        if (fl & FT_CF_HAS_RECIPE)
            rc = kv_i64(w, "recipe", c->recipe);
        else if (!(rc = key(w, "recipe")))
            rc = lit(w, "null");
    }
    if (!rc) rc = kv_bool(w, "grad", fl & FT_CF_GRAD);
    if (!rc) rc = kv_bool(w, "input_rg", fl & FT_CF_INPUT_RG);
    if (!rc) rc = key(w, "op_rg");
    if (!rc) rc = room(w, 2 + (size_t)c->n_op_rg * 6);
    if (!rc) {
        put(&w->line, "[", 1);
        for (uint32_t i = 0; i < c->n_op_rg; i++) {
            if (i) put(&w->line, ",", 1);
            if (c->op_rg[i])
                put(&w->line, "true", 4);
            else
                put(&w->line, "false", 5);
        }
        put(&w->line, "]", 1);
    }
    if (!rc) rc = kv_i64(w, "device", c->device);
    if (!rc && (fl & FT_CF_HAS_SPLITS)) {
        rc = key(w, "m_splits");
        if (!rc) rc = lit(w, "[");
        for (uint32_t i = 0; !rc && i < c->n_splits; i++) {
            if (i) rc = lit(w, ",");
            if (!rc) rc = i64(w, c->m_splits[i]);
        }
        if (!rc) rc = lit(w, "]");
    }
    if (!rc && (fl & FT_CF_HAS_STEP)) rc = kv_i64(w, "step", c->step);
    if (!rc && (fl & FT_CF_HAS_MB)) rc = kv_i64(w, "mb", c->mb);
    if (!rc && (fl & FT_CF_HAS_PHASE)) rc = kv_str(w, "phase", c->phase ? c->phase : "");
    if (!rc && (fl & FT_CF_HAS_GRAPH)) rc = kv_bool(w, "graph", fl & FT_CF_GRAPH);
    if (!rc && (fl & FT_CF_HAS_NS)) rc = kv_i64(w, "ns", c->ns);
    if (!rc && (fl & FT_CF_HAS_FUSE_NS)) rc = kv_i64(w, "fuse_ns", c->fuse_ns);
    if (!rc && (fl & FT_CF_HAS_REBUILT)) rc = kv_bool(w, "rebuilt", fl & FT_CF_REBUILT);
    return rc ? rc : end(w);
}

static int w_backward(void *ctx, const ft_backward *b)
{
    ft_jsonl_writer *w = ctx;
    int rc = begin(w, "backward");
    if (!rc) rc = kv_i64(w, "seq", b->seq);
    if (!rc) rc = kv_i64(w, "call", b->call);
    if (!rc && b->has_ns) rc = kv_i64(w, "ns", b->ns);
    return rc ? rc : end(w);
}

static int w_end(void *ctx, const ft_fuser_end *e)
{
    ft_jsonl_writer *w = ctx;
    int rc = begin(w, "fuser_end");
    if (!rc) rc = kv_i64(w, "seq", e->seq);
    if (!rc) rc = kv_i64(w, "fuser", e->fuser);
    return rc ? rc : end(w);
}

static const ft_err *w_error(void *ctx)
{
    ft_jsonl_writer *w = ctx;
    return &w->err;
}

/* ---- public ------------------------------------------------------------------------------ */
int ft_jsonl_writer_new(FILE *f, ft_jsonl_writer **out)
{
    *out = NULL;
    if (!f) return FT_EINVAL;
    ft_jsonl_writer *w = ft_calloc(1, sizeof *w);
    if (!w) return FT_ENOMEM;
    w->f = f;
    *out = w;
    return FT_OK;
}

int ft_jsonl_writer_new_zstd(FILE *f, int zstd_level, ft_jsonl_writer **out)
{
    *out = NULL;
    if (!zstd_level) zstd_level = FT_JSONL_ZSTD_LEVEL;
    if (zstd_level < 1 || zstd_level > ZSTD_maxCLevel()) return FT_EINVAL;
    ft_jsonl_writer *w = NULL;
    int rc = ft_jsonl_writer_new(f, &w);
    if (rc) return rc;
    w->cz = ZSTD_createCCtx();
    w->chunk = ZSTD_CStreamInSize();
    w->zcap = ZSTD_CStreamOutSize();
    w->zout = ft_malloc(w->zcap);
    if (!w->cz || !w->zout || ft_buf_reserve(&w->pend, w->chunk + 4096)) {
        ft_jsonl_writer_free(w);
        return FT_ENOMEM;
    }
    if (ZSTD_isError(ZSTD_CCtx_setParameter(w->cz, ZSTD_c_compressionLevel, zstd_level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(w->cz, ZSTD_c_checksumFlag, 1))) {
        ft_jsonl_writer_free(w);
        return FT_EINVAL;
    }
    *out = w;
    return FT_OK;
}

int ft_jsonl_writer_finish(ft_jsonl_writer *w)
{
    if (!w->cz) return FT_OK;
    if (w->err.rc) return w->err.rc; /* a failed write left the frame unusable */
    return compress_pending(w, ZSTD_e_end);
}

const ft_err *ft_jsonl_writer_error(const ft_jsonl_writer *w)
{
    return &w->err;
}

void ft_jsonl_writer_sink(ft_jsonl_writer *w, ft_sink *out)
{
    memset(out, 0, sizeof *out);
    out->ctx = w;
    out->header_fn = w_header;
    out->fuser_fn = w_fuser;
    out->recipe_fn = w_recipe;
    out->call_fn = w_call;
    out->backward_fn = w_backward;
    out->end_fn = w_end;
    out->error_fn = w_error;
}

void ft_jsonl_writer_free(ft_jsonl_writer *w)
{
    if (!w) return;
    ft_buf_free(&w->line);
    ft_buf_free(&w->pend);
    ZSTD_freeCCtx(w->cz);
    ft_free(w->zout);
    ft_free(w);
}
