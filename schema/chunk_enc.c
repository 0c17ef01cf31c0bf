/*
 * chunk_enc.c - the chunk encoder (layout and rationale: chunk.h). It takes records one at a
 * time, keeps integer columns as 64-bit codes and codes split-size vectors as they arrive
 * (against the dictionary of this chunk's vectors, else as a literal of predicted residuals:
 * chunk_int.h); finish writes the columns in their cheapest layout, checksums and compresses.
 * It refuses a record that would pass the decoder's per-chunk totals (FT_ERANGE: flush first).
 */
#include "chunk_int.h"

#include <string.h>
#include <zstd.h>

static int buf_varint(ft_buf *b, uint64_t v)
{
    int rc = ft_buf_reserve(b, 10);
    if (rc) return rc;
    b->len += varint_put(b->data + b->len, v);
    return FT_OK;
}

/* ---- encoder ------------------------------------------------------------------------------ */
typedef struct oprg_ent {
    size_t off;     /* offset of the entry's bitmap in oprg_dict */
    uint32_t n_ops; /* pattern length */
} oprg_ent;

struct ft_chunk_enc {
    uint64_t *col[N_INTCOL]; /* [cap] codes per column (BWD: per backward record) */
    uint64_t *sid;           /* [cap] SID codes, one per FT_CF_INSTANCE record */
    size_t cap;
    uint32_t n, n_calls, n_bwd, n_sid;
    uint64_t newest; /* SID: stream id of the newest compact instance declared, -1 at first */
    int64_t first_seq;
    uint64_t prev_seq;
    uint64_t prev_phase;
    int64_t prev_step, prev_mb, prev_ns, prev_ntok;
    char **phases; /* [n_phases] owned copies */
    size_t phases_cap;
    uint32_t n_phases;
    ft_buf oprg_dict; /* the OPRGDICT column, built as patterns appear */
    oprg_ent *oprg;   /* [n_oprg] */
    size_t oprg_cap;
    uint32_t n_oprg;
    ft_hmap oprg_map;                /* pattern hash -> index */
    uint32_t last_oprg, last_oprg_n; /* one-entry cache: index and length of the last pattern */
    uint8_t last_oprg_v[64];         /* ... and its values */
    uint8_t *bits;                   /* [bits_cap] scratch bitmap */
    size_t bits_cap;
    sp_state sp;
    int64_t *vals; /* [vals_len] distinct split vectors of this chunk */
    size_t vals_len, vals_cap;
    uint64_t n_split_values; /* split sizes the pending records hold (expanded) */
    uint64_t n_oprg_values;  /* op_rg entries the pending records hold (expanded) */
    ft_buf sp_tags;          /* split section streams, coded as calls arrive: tags (and k) */
    res_out res;             /* ... residual symbols and extra bits */
    ft_buf splits;           /* scratch: the split section */
    ft_buf main;             /* scratch: the main section */
    size_t cuts[4 * FT_CHUNK_N_COLS + 8]; /* frame boundaries in main (see put_intcol) */
    uint32_t n_cuts;
    ft_chunk_obs_fn obs; /* optional symbol observer (benchmarks) */
    void *obs_ctx;
    ZSTD_CCtx *cctx;
};

static void enc_start(ft_chunk_enc *e)
{
    e->n = e->n_calls = e->n_bwd = e->n_sid = 0;
    e->newest = UINT64_MAX;
    e->prev_phase = 0;
    e->prev_step = e->prev_mb = e->prev_ns = e->prev_ntok = 0;
    for (uint32_t i = 0; i < e->n_phases; i++)
        ft_free(e->phases[i]);
    e->n_phases = 0;
    e->oprg_dict.len = 0;
    e->n_oprg = 0;
    e->last_oprg = UINT32_MAX;
    ft_hmap_clear(&e->oprg_map);
    sp_reset(&e->sp);
    e->vals_len = 0;
    e->n_split_values = 0;
    e->n_oprg_values = 0;
    e->sp_tags.len = e->res.sym.len = e->res.bits.len = 0;
    e->res.acc = 0;
    e->res.n = 0;
    e->splits.len = 0;
}

int ft_chunk_enc_new(ft_chunk_enc **out)
{
    *out = NULL;
    ft_chunk_enc *e = ft_calloc(1, sizeof *e);
    if (!e) return FT_ENOMEM;
    e->cctx = ZSTD_createCCtx();
    if (!e->cctx) {
        ft_free(e);
        return FT_ENOMEM;
    }
    enc_start(e);
    *out = e;
    return FT_OK;
}

void ft_chunk_enc_free(ft_chunk_enc *e)
{
    if (!e) return;
    enc_start(e);
    for (int c = 0; c < N_INTCOL; c++)
        ft_free(e->col[c]);
    ft_free(e->sid);
    ft_free(e->phases);
    ft_buf_free(&e->oprg_dict);
    ft_free(e->oprg);
    ft_hmap_free(&e->oprg_map);
    ft_free(e->bits);
    sp_free(&e->sp);
    ft_free(e->vals);
    ft_buf_free(&e->splits);
    ft_buf_free(&e->sp_tags);
    ft_buf_free(&e->res.sym);
    ft_buf_free(&e->res.bits);
    ft_buf_free(&e->main);
    ZSTD_freeCCtx(e->cctx);
    ft_free(e);
}

uint32_t ft_chunk_enc_n_records(const ft_chunk_enc *e)
{
    return e->n;
}

uint64_t ft_chunk_enc_n_split_values(const ft_chunk_enc *e)
{
    return e->n_split_values;
}

void ft_chunk_enc_observe(ft_chunk_enc *e, ft_chunk_obs_fn fn, void *ctx)
{
    e->obs = fn;
    e->obs_ctx = ctx;
}

static int enc_reserve(ft_chunk_enc *e)
{
    if (e->n < e->cap) return FT_OK;
    size_t cap = e->cap ? e->cap * 2 : 1024;
    for (int c = 0; c <= N_INTCOL; c++) {
        uint64_t **col = c < N_INTCOL ? &e->col[c] : &e->sid;
        uint64_t *p = ft_realloc(*col, cap * sizeof *p);
        if (!p) return FT_ENOMEM;
        *col = p;
    }
    e->cap = cap;
    return FT_OK;
}

/* Index of phase in the chunk's dictionary, adding it. FT_ERANGE when full. */
static int enc_phase(ft_chunk_enc *e, const char *phase, uint32_t *idx)
{
    for (uint32_t i = 0; i < e->n_phases; i++)
        if (!strcmp(e->phases[i], phase)) {
            *idx = i;
            return FT_OK;
        }
    if (e->n_phases >= FT_CHUNK_MAX_PHASES) return FT_ERANGE;
    int rc =
        chunk_grow((void **)&e->phases, &e->phases_cap, (size_t)e->n_phases + 1, sizeof(char *));
    if (rc) return rc;
    char *s = ft_strdup(phase);
    if (!s) return FT_ENOMEM;
    e->phases[e->n_phases] = s;
    *idx = e->n_phases++;
    return FT_OK;
}

/* Index of the op_rg pattern in the chunk's dictionary, adding it. */
static int enc_oprg_find(ft_chunk_enc *e, const uint8_t *op_rg, uint32_t n_ops, uint32_t *idx)
{
    size_t nb = (n_ops + 7) / 8;
    int rc = chunk_grow((void **)&e->bits, &e->bits_cap, nb ? nb : 1, 1);
    if (rc) return rc;
    memset(e->bits, 0, nb);
    for (uint32_t i = 0; i < n_ops; i++)
        if (op_rg[i]) e->bits[i / 8] |= (uint8_t)(1u << (i % 8));
    uint64_t h = ft_hash64_seed(e->bits, nb, n_ops);
    uint32_t j = ft_hmap_get(&e->oprg_map, h);
    if (j != UINT32_MAX && e->oprg[j].n_ops == n_ops &&
        !memcmp(e->oprg_dict.data + e->oprg[j].off, e->bits, nb)) {
        *idx = j;
        return FT_OK;
    }
    /* a colliding different pattern simply replaces the map entry; indices stay exact */
    rc = chunk_grow((void **)&e->oprg, &e->oprg_cap, (size_t)e->n_oprg + 1, sizeof *e->oprg);
    if (rc) return rc;
    rc = buf_varint(&e->oprg_dict, n_ops);
    if (rc) return rc;
    size_t off = e->oprg_dict.len;
    rc = ft_buf_append(&e->oprg_dict, e->bits, nb);
    if (rc) return rc;
    rc = ft_hmap_put(&e->oprg_map, h, e->n_oprg);
    if (rc) return rc;
    e->oprg[e->n_oprg].off = off;
    e->oprg[e->n_oprg].n_ops = n_ops;
    *idx = e->n_oprg++;
    return FT_OK;
}

/* enc_oprg_find behind a one-entry cache (consecutive calls mostly repeat a pattern). */
static int enc_oprg(ft_chunk_enc *e, const uint8_t *op_rg, uint32_t n_ops, uint32_t *idx)
{
    if (e->last_oprg < e->n_oprg && e->last_oprg_n == n_ops && n_ops <= sizeof e->last_oprg_v &&
        !memcmp(e->last_oprg_v, op_rg, n_ops)) {
        *idx = e->last_oprg;
        return FT_OK;
    }
    int rc = enc_oprg_find(e, op_rg, n_ops, idx);
    if (rc) return rc;
    if (n_ops <= sizeof e->last_oprg_v) {
        e->last_oprg = *idx;
        e->last_oprg_n = n_ops;
        memcpy(e->last_oprg_v, op_rg, n_ops);
    }
    return FT_OK;
}

static int vec_equal(const int64_t *a, const int64_t *b, uint32_t k)
{
    return k == 0 || !memcmp(a, b, (size_t)k * sizeof *a);
}

/* Code one split vector into the split section (chunk.h, SPLIT SECTION). */
static int enc_splits(ft_chunk_enc *e, uint32_t fuser, int has_mb, int64_t mb, const int64_t *v,
                      uint32_t k, int64_t T)
{
    sp_state *s = &e->sp;
    sp_fuser *f;
    int rc = sp_fuser_get(s, fuser, &f);
    if (rc) return rc;
    uint64_t key = sp_key(fuser, has_mb, mb);
    uint32_t j = ft_hmap_get(&s->key_map, key);
    if (j != UINT32_MAX && s->vecs[j].k == k && vec_equal(e->vals + s->vecs[j].off, v, k)) {
        rc = buf_varint(&e->sp_tags, 0);
        if (e->obs) e->obs(e->obs_ctx, FT_CS_SPLIT_TAG, 0);
        goto done_ref;
    }
    uint64_t h = ft_hash64_seed(v, (size_t)k * sizeof *v, k);
    j = ft_hmap_get(&s->dict_map, h);
    if (j != UINT32_MAX && s->vecs[j].k == k && vec_equal(e->vals + s->vecs[j].off, v, k)) {
        rc = buf_varint(&e->sp_tags, 3 + (uint64_t)(s->n_vecs - 1 - j));
        if (rc) return rc;
        if (e->obs) e->obs(e->obs_ctx, FT_CS_SPLIT_TAG, 3 + (uint64_t)(s->n_vecs - 1 - j));
        rc = ft_hmap_put(&s->key_map, key, j);
        goto done_ref;
    }
    /* literal */
    rc = chunk_grow((void **)&s->vecs, &s->vecs_cap, s->n_vecs + 1, sizeof *s->vecs);
    if (rc) return rc;
    rc = chunk_grow((void **)&e->vals, &e->vals_cap, e->vals_len + k, sizeof *e->vals);
    if (rc) return rc;
    rc = ft_buf_reserve(&e->sp_tags, 20);
    if (!rc) rc = ft_buf_reserve(&e->res.sym, (size_t)k);
    if (!rc) rc = ft_buf_reserve(&e->res.bits, 16 + (size_t)k * 8);
    if (rc) return rc;
    rc = sp_predict(s, f, k, (uint64_t)T);
    if (rc) return rc;
    uint64_t tag = f->has_k && f->last_k == k ? 1 : 2;
    e->sp_tags.len += varint_put(e->sp_tags.data + e->sp_tags.len, tag);
    if (tag == 2) e->sp_tags.len += varint_put(e->sp_tags.data + e->sp_tags.len, k);
    for (uint32_t i = 0; i + 1 < k; i++)
        res_put(&e->res, sp_res(v[i], s->pred[i], f->top));
    if (e->obs) {
        e->obs(e->obs_ctx, FT_CS_SPLIT_TAG, tag);
        if (tag == 2) e->obs(e->obs_ctx, FT_CS_SPLIT_K, k);
        for (uint32_t i = 0; i + 1 < k; i++)
            e->obs(e->obs_ctx, FT_CS_SPLIT_RES, sp_res(v[i], s->pred[i], f->top));
        for (uint32_t i = 0; i < k; i++)
            e->obs(e->obs_ctx, FT_CS_SPLIT_RAW, (uint64_t)v[i]);
    }
    j = (uint32_t)s->n_vecs;
    s->vecs[j].off = e->vals_len;
    s->vecs[j].k = k;
    s->n_vecs++;
    if (k) memcpy(e->vals + e->vals_len, v, (size_t)k * sizeof *v);
    e->vals_len += k;
    rc = ft_hmap_put(&s->dict_map, h, j);
    if (rc) return rc;
    rc = ft_hmap_put(&s->key_map, key, j);
    if (rc) return rc;
    rc = sp_update(s, f, v, k, (uint64_t)T);
done_ref:
    if (rc) return rc;
    f->has_k = 1;
    f->last_k = k;
    e->n_split_values += k;
    return FT_OK;
}

int ft_chunk_enc_call(ft_chunk_enc *e, const ft_call *c, uint32_t fuser, int32_t recipe,
                      int64_t n_tokens)
{
    uint32_t fl = c->flags;
    uint32_t phase = (uint32_t)e->prev_phase, oprg;
    if (e->n_oprg_values + c->n_op_rg > FT_CHUNK_MAX_OPRG_VALUES ||
        ((fl & FT_CF_HAS_SPLITS) && e->n_split_values + c->n_splits > FT_CHUNK_MAX_SPLIT_VALUES))
        return FT_ERANGE; /* the decoder's per-chunk totals: flush first */
    int rc = enc_reserve(e);
    if (rc) return rc;
    if (fl & FT_CF_HAS_PHASE) {
        rc = enc_phase(e, c->phase, &phase);
        if (rc) return rc;
    }
    rc = enc_oprg(e, c->op_rg, c->n_op_rg, &oprg);
    if (rc) return rc;
    if (fl & FT_CF_HAS_SPLITS) {
        rc = enc_splits(e, fuser, (fl & FT_CF_HAS_MB) != 0, c->mb, c->m_splits, c->n_splits,
                        n_tokens);
        if (rc) return rc;
    }
    uint32_t i = e->n;
    if (i == 0) {
        e->first_seq = c->seq;
        e->prev_seq = (uint64_t)c->seq - 1;
    }
    e->col[C_KIND][i] = FT_REC_CALL;
    e->col[C_SEQ][i] = (uint64_t)c->seq - e->prev_seq - 1;
    e->prev_seq = (uint64_t)c->seq;
    e->col[C_FUSER][i] = fuser;
    if (fl & FT_CF_INSTANCE) {
        const uint64_t sid = (uint64_t)c->fuser;
        if (fl & FT_CF_NEW_FUSER) {
            e->sid[e->n_sid++] = zz((int64_t)(sid - e->newest - 1));
            e->newest = sid;
        } else {
            e->sid[e->n_sid++] = zz((int64_t)(e->newest - sid));
        }
    }
    e->col[C_RECIPE][i] = (fl & FT_CF_HAS_RECIPE) ? (uint64_t)recipe + 1 : 0;
    e->col[C_FLAGS][i] = fl;
    e->col[C_DEVICE][i] = zz(c->device);
    e->col[C_OPRG][i] = (uint64_t)oprg + 1;
    e->col[C_STEP][i] = 0;
    if (fl & FT_CF_HAS_STEP) {
        e->col[C_STEP][i] = zz((int64_t)((uint64_t)c->step - (uint64_t)e->prev_step));
        e->prev_step = c->step;
    }
    e->col[C_MB][i] = 0;
    if (fl & FT_CF_HAS_MB) {
        e->col[C_MB][i] = zz((int64_t)((uint64_t)c->mb - (uint64_t)e->prev_mb));
        e->prev_mb = c->mb;
    }
    e->col[C_PHASE][i] = e->prev_phase = phase;
    e->col[C_NS][i] = 0;
    if (fl & FT_CF_HAS_NS) {
        e->col[C_NS][i] = zz((int64_t)((uint64_t)c->ns - (uint64_t)e->prev_ns));
        e->prev_ns = c->ns;
    }
    e->col[C_FUSE_NS][i] = (fl & FT_CF_HAS_FUSE_NS) ? zz(c->fuse_ns) : 0;
    e->col[C_NTOK][i] = 0;
    if (fl & FT_CF_HAS_SPLITS) {
        e->col[C_NTOK][i] = zz((int64_t)((uint64_t)n_tokens - (uint64_t)e->prev_ntok));
        e->prev_ntok = n_tokens;
    }
    e->n_oprg_values += c->n_op_rg;
    e->n++;
    e->n_calls++;
    return FT_OK;
}

int ft_chunk_enc_backward(ft_chunk_enc *e, const ft_backward *b)
{
    int rc = enc_reserve(e);
    if (rc) return rc;
    uint32_t i = e->n;
    if (i == 0) {
        e->first_seq = b->seq;
        e->prev_seq = (uint64_t)b->seq - 1;
    }
    e->col[C_KIND][i] = FT_REC_BACKWARD;
    e->col[C_SEQ][i] = (uint64_t)b->seq - e->prev_seq - 1;
    e->prev_seq = (uint64_t)b->seq;
    e->col[C_FUSER][i] = 0;
    e->col[C_RECIPE][i] = 0;
    e->col[C_FLAGS][i] = b->has_ns ? FT_CF_HAS_NS : 0;
    e->col[C_DEVICE][i] = 0;
    e->col[C_OPRG][i] = 0;
    e->col[C_STEP][i] = 0;
    e->col[C_MB][i] = 0;
    e->col[C_PHASE][i] = e->prev_phase;
    e->col[C_NS][i] = 0;
    if (b->has_ns) {
        e->col[C_NS][i] = zz((int64_t)((uint64_t)b->ns - (uint64_t)e->prev_ns));
        e->prev_ns = b->ns;
    }
    e->col[C_FUSE_NS][i] = 0;
    e->col[C_NTOK][i] = 0;
    e->col[C_BWD][e->n_bwd++] = (uint64_t)b->seq - (uint64_t)b->call - 1;
    e->n++;
    return FT_OK;
}

int ft_chunk_enc_end(ft_chunk_enc *e, int64_t seq, uint32_t fuser, int instance, int64_t sid)
{
    int rc = enc_reserve(e);
    if (rc) return rc;
    uint32_t i = e->n;
    if (i == 0) {
        e->first_seq = seq;
        e->prev_seq = (uint64_t)seq - 1;
    }
    e->col[C_KIND][i] = FT_REC_END;
    e->col[C_SEQ][i] = (uint64_t)seq - e->prev_seq - 1;
    e->prev_seq = (uint64_t)seq;
    e->col[C_FUSER][i] = fuser;
    e->col[C_RECIPE][i] = 0;
    e->col[C_FLAGS][i] = instance ? FT_CF_INSTANCE : 0;
    if (instance) e->sid[e->n_sid++] = zz((int64_t)(e->newest - (uint64_t)sid));
    for (int c = C_DEVICE; c < C_BWD; c++)
        e->col[c][i] = 0;
    e->col[C_PHASE][i] = e->prev_phase;
    e->n++;
    return FT_OK;
}

/* A frame boundary at the current end of main (compress_main starts a zstd frame there). */
static void enc_cut(ft_chunk_enc *e)
{
    if (e->n_cuts < FT_ARRAY_LEN(e->cuts)) e->cuts[e->n_cuts++] = e->main.len;
}

/* Append an integer column in the cheapest of its layouts: runs when they are much smaller,
 * else fixed width (as byte planes when wider than a byte, each plane its own zstd frame so
 * zstd's entropy stage sees one distribution) unless varints are clearly smaller. */
static int put_intcol(ft_chunk_enc *e, const uint64_t *v, uint32_t n)
{
    ft_buf *b = &e->main;
    size_t runs = 0, vsz = 0;
    uint64_t max = 0;
    for (uint32_t i = 0; i < n; i++) {
        max = v[i] > max ? v[i] : max;
        runs += i == 0 || v[i] != v[i - 1];
    }
    uint32_t w = max < 0x100 ? 1 : max < 0x10000 ? 2 : max < 0x100000000ull ? 4 : 8;
    size_t fsz = 2 + (size_t)w * n;
    int mode;
    if (runs * 4 <= n) {
        mode = 1; /* runs average >= 4 values: smaller and faster than the alternatives */
    } else if (w == 1) {
        mode = 2; /* never larger than varints */
    } else {
        for (uint32_t i = 0; i < n; i++)
            vsz += varint_len(v[i]);
        mode = fsz <= vsz * 2 ? 2 : 0;
    }
    /* room: a run takes up to 10 + 4 bytes (n <= FT_CHUNK_MAX_RECORDS) */
    int rc = ft_buf_reserve(b, 2 + (mode == 1 ? runs * 14 : mode == 2 ? fsz : vsz));
    if (rc) return rc;
    uint8_t *p = b->data + b->len;
    *p++ = (uint8_t)mode;
    if (mode == 1) {
        for (uint32_t i = 0; i < n;) {
            uint32_t j = i + 1;
            while (j < n && v[j] == v[i])
                j++;
            p += varint_put(p, v[i]);
            p += varint_put(p, j - i - 1);
            i = j;
        }
    } else if (mode == 2) {
        *p++ = (uint8_t)w;
        if (w == 1) {
            for (uint32_t i = 0; i < n; i++)
                p[i] = (uint8_t)v[i];
            p += n;
        } else { /* mode 3: byte planes */
            p[-2] = 3;
            for (uint32_t k = 0; k < w; k++) {
                b->len = (size_t)(p - b->data);
                enc_cut(e);
                for (uint32_t i = 0; i < n; i++)
                    p[i] = (uint8_t)(v[i] >> (8 * k));
                p += n;
            }
            b->len = (size_t)(p - b->data);
            enc_cut(e);
        }
    } else {
        for (uint32_t i = 0; i < n; i++)
            p += varint_put(p, v[i]);
    }
    b->len = (size_t)(p - b->data);
    return FT_OK;
}

static int compress_into(ZSTD_CCtx *cctx, int level, ft_buf *out, const void *src, size_t n,
                         uint32_t *zlen, ft_err *err)
{
    *zlen = 0;
    if (!n) return FT_OK;
    size_t bound = ZSTD_compressBound(n);
    int rc = ft_buf_reserve(out, bound);
    if (rc) return rc;
    size_t z = ZSTD_compressCCtx(cctx, out->data + out->len, bound, src, n, level);
    if (ZSTD_isError(z))
        return ft_err_set(err, FT_EZSTD, "chunk compression failed: %s", ZSTD_getErrorName(z));
    if (z > UINT32_MAX) return ft_err_set(err, FT_ERANGE, "compressed chunk too large");
    out->len += z;
    *zlen = (uint32_t)z;
    return FT_OK;
}

int ft_chunk_enc_finish(ft_chunk_enc *e, int level, ft_buf *blob, ft_chunk_info *info, ft_err *err)
{
    if (!e->n) return ft_err_set(err, FT_ESTATE, "no pending records to write");
    ft_buf *m = &e->main;
    m->len = 0;
    int rc = ft_buf_reserve(m, FT_CHUNK_MAIN_HDR);
    if (rc) return rc;
    memset(m->data, 0, FT_CHUNK_MAIN_HDR);
    m->len = FT_CHUNK_MAIN_HDR;
    uint32_t col_len[FT_CHUNK_N_COLS];
    e->n_cuts = 0;
    for (int c = 0; c < N_INTCOL; c++) {
        size_t before = m->len;
        uint32_t cnt = c == C_BWD ? e->n_bwd : e->n;
        rc = put_intcol(e, e->col[c], cnt);
        if (rc) return rc;
        col_len[c] = (uint32_t)(m->len - before);
        if (e->obs)
            for (uint32_t i = 0; i < cnt; i++)
                e->obs(e->obs_ctx, (unsigned)c, e->col[c][i]);
    }
    size_t before = m->len;
    for (uint32_t i = 0; i < e->n_phases; i++) {
        size_t len = strlen(e->phases[i]);
        rc = buf_varint(m, len);
        if (!rc) rc = ft_buf_append(m, e->phases[i], len);
        if (rc) return rc;
    }
    col_len[C_PHASES] = (uint32_t)(m->len - before);
    rc = ft_buf_append(m, e->oprg_dict.data, e->oprg_dict.len);
    if (rc) return rc;
    col_len[C_OPRGDICT] = (uint32_t)e->oprg_dict.len;
    if (e->obs) e->obs(e->obs_ctx, FT_CS_DICT_BYTES, m->len - before);
    before = m->len;
    if ((rc = put_intcol(e, e->sid, e->n_sid))) return rc;
    col_len[C_SID] = (uint32_t)(m->len - before);

    /* the split section: header, tag stream, symbols, extra bits (each its own frame) */
    ft_buf *sp = &e->splits;
    sp->len = 0;
    uint64_t n_sym = e->res.sym.len;
    if (e->sp_tags.len) {
        if (e->res.n) { /* the last partial byte */
            rc = ft_buf_reserve(&e->res.bits, 1);
            if (rc) return rc;
            e->res.bits.data[e->res.bits.len++] = (uint8_t)e->res.acc;
            e->res.acc = 0;
            e->res.n = 0;
        }
        if (e->sp_tags.len > FT_CHUNK_MAX_RAW || n_sym > FT_CHUNK_MAX_RAW)
            return ft_err_set(err, FT_ERANGE, "chunk split section too large");
        rc = ft_buf_reserve(sp, 8 + e->sp_tags.len + e->res.sym.len + e->res.bits.len);
        if (rc) return rc;
        put_u32(sp->data, (uint32_t)e->sp_tags.len);
        put_u32(sp->data + 4, (uint32_t)n_sym);
        memcpy(sp->data + 8, e->sp_tags.data, e->sp_tags.len);
        if (e->res.sym.len) /* streams never written have no buffer */
            memcpy(sp->data + 8 + e->sp_tags.len, e->res.sym.data, e->res.sym.len);
        if (e->res.bits.len)
            memcpy(sp->data + 8 + e->sp_tags.len + e->res.sym.len, e->res.bits.data,
                   e->res.bits.len);
        sp->len = 8 + e->sp_tags.len + e->res.sym.len + e->res.bits.len;
    }
    if (m->len > FT_CHUNK_MAX_RAW || e->splits.len > FT_CHUNK_MAX_RAW)
        return ft_err_set(err, FT_ERANGE, "chunk too large (%zu + %zu bytes)", m->len,
                          e->splits.len);
    uint64_t sp_sum = e->splits.len ? ft_hash64(e->splits.data, e->splits.len) : 0;
    uint8_t *h = m->data;
    memcpy(h, "FTC3", 4);
    put_u32(h + 4, e->n);
    put_u32(h + 8, e->n_calls);
    put_u64(h + 12, (uint64_t)e->first_seq);
    put_u32(h + 20, (uint32_t)e->splits.len);
    put_u64(h + 24, sp_sum);
    put_u32(h + 32, e->n_phases);
    put_u32(h + 36, e->n_oprg);
    for (int c = 0; c < FT_CHUNK_N_COLS; c++)
        put_u32(h + 40 + 4 * c, col_len[c]);

    blob->len = 0;
    rc = ft_buf_reserve(blob, FT_CHUNK_STORED_HDR);
    if (rc) return rc;
    blob->len = FT_CHUNK_STORED_HDR;
    uint32_t main_z = 0, sp_z = 0, z;
    size_t lo = 0; /* the header travels with the first piece */
    for (uint32_t i = 0; i <= e->n_cuts; i++) {
        size_t hi = i < e->n_cuts ? e->cuts[i] : m->len;
        if (i < e->n_cuts && hi - lo < MIN_FRAME) continue; /* tiny pieces join the next */
        rc = compress_into(e->cctx, level, blob, m->data + lo, hi - lo, &z, err);
        if (rc) return rc;
        main_z += z;
        lo = hi;
    }
    if (sp->len) {
        size_t cut[4] = {0, 8 + e->sp_tags.len, 8 + e->sp_tags.len + e->res.sym.len, sp->len};
        for (int i = 0; i < 3; i++) {
            rc = compress_into(e->cctx, level, blob, sp->data + cut[i], cut[i + 1] - cut[i], &z,
                               err);
            if (rc) return rc;
            sp_z += z;
        }
    }
    memcpy(blob->data, "FTZ3", 4);
    put_u32(blob->data + 4, (uint32_t)m->len);
    put_u32(blob->data + 8, main_z);
    put_u32(blob->data + 12, (uint32_t)e->splits.len);
    put_u32(blob->data + 16, sp_z);

    info->id = 0;
    info->first_seq = e->first_seq;
    info->n_records = e->n;
    info->n_calls = e->n_calls;
    info->codec = FT_CHUNK_CODEC;
    info->raw_bytes = m->len + e->splits.len;
    info->checksum = ft_hash64(m->data, m->len);
    info->n_ends = e->n - e->n_calls - e->n_bwd;
    enc_start(e);
    return FT_OK;
}
