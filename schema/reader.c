/*
 * reader.c - the streaming reader: one chunk at a time, fetched from the chunks table and
 * decoded column by column into reusable arrays (no allocation per record), plus the record
 * views over a batch. A chunk whose records reach into the next chunk's seq range is damage
 * for every reader, as for verify.
 */
#include "trace_int.h"

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

struct ft_reader {
    ft_trace *t;
    unsigned flags;    /* FT_READ_* */
    uint64_t pos, end; /* next chunk position, one past the last */
    ft_chunk_dec *dec;
    sqlite3_blob *blob; /* open on chunks.data, moved from row to row */
    uint8_t *buf;       /* [cap] the stored chunk being decoded */
    size_t cap;
    ft_batch batch;
};

/* Make the trace's error name the file, once (the decoder names only the chunk). */
static int name_file(ft_trace *t, int rc)
{
    ft_err *e = ft_trace_err(t);
    const char *p = ft_trace_path(t);
    size_t n = strlen(p);
    if (strncmp(e->msg, p, n) || e->msg[n] != ':') {
        char msg[FT_ERR_MAX];
        ft_strlcpy(msg, ft_err_msg(e), sizeof msg);
        ft_err_set(e, rc, "%s: %s", p, msg);
    }
    e->rc = rc;
    return rc;
}

int ft_reader_open(ft_trace *t, unsigned read_flags, ft_reader **out)
{
    *out = NULL;
    ft_reader *r = ft_calloc(1, sizeof *r);
    if (!r) return ft_err_set(ft_trace_err(t), FT_ENOMEM, "out of memory");
    r->t = t;
    r->flags = read_flags;
    r->end = ft_trace_n_chunks(t);
    int rc = ft_chunk_dec_new(&r->dec);
    if (rc) {
        ft_free(r);
        return ft_err_set(ft_trace_err(t), rc, "out of memory");
    }
    *out = r;
    return FT_OK;
}

uint64_t ft_reader_pos(const ft_reader *r)
{
    return r->pos;
}

int ft_reader_range(ft_reader *r, uint64_t first_chunk, uint64_t n_chunks)
{
    uint64_t total = ft_trace_n_chunks(r->t);
    if (first_chunk > total || n_chunks > total - first_chunk)
        return ft_err_set(ft_trace_err(r->t), FT_ERANGE,
                          "chunk range %llu+%llu outside the trace's %llu chunks",
                          (unsigned long long)first_chunk, (unsigned long long)n_chunks,
                          (unsigned long long)total);
    r->pos = first_chunk;
    r->end = first_chunk + n_chunks;
    return FT_OK;
}

/* First chunk position whose first seq is > seq (binary search over the chunk index). */
static uint64_t chunks_after(const ft_trace *t, int64_t seq)
{
    uint64_t a = 0, b = ft_trace_n_chunks(t);
    while (a < b) {
        uint64_t m = a + (b - a) / 2;
        if (ft_trace_chunk(t, m)->first_seq > seq)
            b = m;
        else
            a = m + 1;
    }
    return a;
}

void ft_trace_seq_chunks(const ft_trace *t, int64_t lo, int64_t hi, uint64_t *first, uint64_t *n)
{
    *first = 0;
    *n = 0;
    if (lo > hi || !ft_trace_n_chunks(t)) return;
    uint64_t a = chunks_after(t, lo), b = chunks_after(t, hi);
    if (a) a--; /* the chunk holding lo starts at or before it */
    *first = a;
    *n = b > a ? b - a : 0;
}

int ft_reader_next(ft_reader *r, const ft_batch **out_batch)
{
    *out_batch = NULL;
    if (r->pos >= r->end) return FT_OK;
    const ft_chunk_info *ci = ft_trace_chunk(r->t, r->pos);
    ft_err *err = ft_trace_err(r->t);
    sqlite3 *db = ft_trace_db(r->t);
    /* read the stored bytes straight into a reused buffer (no per-chunk allocation) */
    int rc = r->blob
                 ? sqlite3_blob_reopen(r->blob, (int64_t)ci->id)
                 : sqlite3_blob_open(db, "main", "chunks", "data", (int64_t)ci->id, 0, &r->blob);
    if (rc != SQLITE_OK) {
        int missing = rc == SQLITE_ERROR;
        int st = missing ? FT_ECORRUPT : ft_sql_status(rc);
        ft_err_set(err, st, "%s: chunk %llu %s: %s", ft_trace_path(r->t),
                   (unsigned long long)ci->id,
                   missing             ? "is missing"
                   : st == FT_ECORRUPT ? "is damaged"
                                       : "cannot be read",
                   sqlite3_errmsg(db));
        sqlite3_blob_close(r->blob); /* a failed reopen leaves the handle unusable */
        r->blob = NULL;
        return st;
    }
    size_t len = (size_t)sqlite3_blob_bytes(r->blob);
    if (len > r->cap) {
        uint8_t *q = ft_realloc(r->buf, len);
        if (!q)
            return ft_err_set(err, FT_ENOMEM, "%s: out of memory reading chunk %llu",
                              ft_trace_path(r->t), (unsigned long long)ci->id);
        r->buf = q;
        r->cap = len;
    }
    if (len && (rc = sqlite3_blob_read(r->blob, r->buf, (int)len, 0)) != SQLITE_OK)
        return ft_err_set(err, ft_sql_status(rc), "%s: reading chunk %llu: %s", ft_trace_path(r->t),
                          (unsigned long long)ci->id, sqlite3_errmsg(db));
    rc = ft_chunk_decode(r->dec, ci, len ? r->buf : (const uint8_t *)"", len, ft_trace_limits(r->t),
                         r->flags, &r->batch, err);
    if (rc) {
        if (rc == FT_ENOMEM && !strstr(err->msg, "(--memory)")) /* not the budget's refusal */
            ft_err_set(err, rc, "out of memory decoding chunk %llu", (unsigned long long)ci->id);
        return name_file(r->t, rc);
    }
    /* chunks hold ascending, disjoint seq ranges (the index's first seqs ascend, checked at the
     * open): this chunk's last record comes before the next chunk's first, as verify says */
    if (r->pos + 1 < ft_trace_n_chunks(r->t) && r->batch.n) {
        const ft_chunk_info *nx = ft_trace_chunk(r->t, r->pos + 1);
        int64_t last = r->batch.seq[r->batch.n - 1];
        if (last >= nx->first_seq)
            return ft_err_set(err, FT_ECORRUPT, "%s: chunk %llu: seq %lld does not follow %lld",
                              ft_trace_path(r->t), (unsigned long long)nx->id,
                              (long long)nx->first_seq, (long long)last);
    }
    r->pos++;
    *out_batch = &r->batch;
    return FT_OK;
}

void ft_reader_close(ft_reader *r)
{
    if (!r) return;
    sqlite3_blob_close(r->blob);
    ft_free(r->buf);
    ft_chunk_dec_free(r->dec);
    ft_free(r);
}

void ft_batch_call(const ft_trace *t, const ft_batch *b, uint32_t i, ft_call *out)
{
    memset(out, 0, sizeof *out);
    uint32_t fl = b->flags[i];
    out->seq = b->seq[i];
    out->fuser = b->sid ? b->sid[i] : ft_trace_fuser(t, b->fuser[i])->id;
    out->recipe = b->recipe[i] >= 0 ? ft_trace_recipe(t, (uint32_t)b->recipe[i])->id : 0;
    out->flags = fl & FT_CF_CALL_BITS; /* the instance bits are the stored form's */
    out->device = b->device[i];
    out->n_op_rg = b->op_rg_off[i + 1] - b->op_rg_off[i];
    out->op_rg = b->op_rg + b->op_rg_off[i];
    if ((fl & FT_CF_HAS_SPLITS) && b->splits) {
        out->n_splits = b->splits_off[i + 1] - b->splits_off[i];
        out->m_splits = b->splits + b->splits_off[i];
    }
    out->step = b->step[i];
    out->mb = b->mb[i];
    out->phase = b->phase[i] >= 0 ? b->phases[b->phase[i]] : NULL;
    out->ns = b->ns[i];
    out->fuse_ns = b->fuse_ns[i];
}

void ft_batch_backward(const ft_batch *b, uint32_t i, ft_backward *out)
{
    out->seq = b->seq[i];
    out->call = b->bwd_call[i];
    out->has_ns = (b->flags[i] & FT_CF_HAS_NS) != 0;
    out->ns = b->ns[i];
}

void ft_batch_fuser_end(const ft_batch *b, uint32_t i, ft_fuser_end *out)
{
    out->seq = b->seq[i];
    out->fuser = b->sid[i];
}
