/*
 * chunk.c - the columnar chunk coder (layout and rationale: chunk.h). The encoder takes records
 * one at a time, keeps integer columns as 64-bit codes and codes split-size vectors as they
 * arrive; finish writes the columns, checksums and compresses. The decoder checks every length
 * and reference before use: it must survive arbitrary bytes.
 */
#include "chunk.h"
#include "ft_hmap.h"

#include <limits.h>
#include <string.h>
#include <threads.h>
#include <zstd.h>

enum {
    C_KIND,
    C_SEQ,
    C_FUSER,
    C_RECIPE,
    C_FLAGS,
    C_DEVICE,
    C_OPRG,
    C_STEP,
    C_MB,
    C_PHASE,
    C_NS,
    C_FUSE_NS,
    C_NTOK,
    C_BWD,
    N_INTCOL,
    C_PHASES = N_INTCOL,
    C_OPRGDICT,
};

#define CF_ALL       ((1u << 13) - 1u)
#define MIN_FRAME    512 /* main-section pieces smaller than this share the next zstd frame */
#define ACC_LIMIT    (1ull << 31)
#define PRED_T_LIMIT (1ull << 32)

/* ---- little helpers ----------------------------------------------------------------------- */
static inline uint64_t zz(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t unzz(uint64_t u)
{
    return (int64_t)((u >> 1) ^ (~(u & 1) + 1));
}

static inline void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t get_u32(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint32_t v; /* the format is little-endian: a plain load on such hosts */
    memcpy(&v, p, 4);
    return v;
#else
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
#endif
}

static inline uint16_t get_u16(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
#else
    return (uint16_t)(p[0] | p[1] << 8);
#endif
}

static inline uint64_t get_u64(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
#else
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
#endif
}

static inline size_t varint_len(uint64_t v)
{
    return (size_t)(70 - __builtin_clzll(v | 1)) / 7; /* 1..10 */
}

/* Write a varint at p (room for 10 bytes assumed); returns bytes written. */
static inline size_t varint_put(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Read a varint from [*pp, end); 0 on success, -1 if truncated or longer than 64 bits. */
static inline int varint_get(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) {
        *out = *p;
        *pp = p + 1;
        return 0;
    }
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (p >= end) return -1;
        uint8_t b = *p++;
        if (shift == 63 && b > 1) return -1;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *out = v;
            *pp = p;
            return 0;
        }
    }
    return -1;
}

/* varint_put for the common small values without a data-dependent branch (split residuals
 * hover around the 1/2-byte boundary, where a branch mispredicts half the time). */
static inline size_t varint_put_small(uint8_t *p, uint64_t v)
{
    if (v >= 0x4000) return varint_put(p, v);
    uint64_t big = v >= 0x80;
    p[0] = (uint8_t)(v | (big << 7));
    p[1] = (uint8_t)(v >> 7);
    return 1 + (size_t)big;
}

/* varint_get likewise for values of one or two bytes. */
static inline int varint_get_small(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *pp;
    if (end - p >= 2) {
        uint64_t b0 = p[0], b1 = p[1], c0 = b0 >> 7;
        if (!(c0 & (b1 >> 7))) {
            *out = (b0 & 0x7f) | (((b1 & 0x7f) << 7) & (0 - c0));
            *pp = p + 1 + c0;
            return 0;
        }
    }
    return varint_get(pp, end, out);
}

static int buf_varint(ft_buf *b, uint64_t v)
{
    int rc = ft_buf_reserve(b, 10);
    if (rc) return rc;
    b->len += varint_put(b->data + b->len, v);
    return FT_OK;
}

/* Grow *p (elements of size sz) to hold at least n; keeps contents. */
static int grow(void **p, size_t *cap, size_t n, size_t sz)
{
    if (n <= *cap) return FT_OK;
    size_t c = *cap ? *cap : 64;
    while (c < n) {
        if (c > SIZE_MAX / 2 / sz) return FT_ENOMEM;
        c *= 2;
    }
    void *q = ft_realloc(*p, c * sz);
    if (!q) return FT_ENOMEM;
    *p = q;
    *cap = c;
    return FT_OK;
}

/* ---- split-vector coder state (shared by encoder and decoder) ----------------------------- */
typedef struct sp_fuser {
    uint32_t gen;    /* == sp_state.gen when the fields below belong to this chunk */
    uint32_t last_k; /* k of this fuser's previous vector; valid if has_k */
    uint32_t has_k;
    uint64_t top;     /* codec 2: 1 + the largest size of this fuser's literals so far, 0 = none */
    uint32_t acc_k;   /* length of the accumulator, 0 = none */
    uint64_t acc_tot; /* sum of acc[] */
    size_t acc_off;   /* offset of acc[acc_k] in sp_state.acc */
} sp_fuser;

typedef struct sp_vec {
    uint64_t off; /* offset of the values (encoder: in vals; decoder: in the output splits) */
    uint32_t k;
} sp_vec;

typedef struct sp_state {
    sp_fuser *fs; /* [fs_cap] by dense fuser index */
    size_t fs_cap;
    uint32_t gen;
    uint64_t *acc; /* [acc_len] per-fuser accumulators */
    size_t acc_len, acc_cap;
    sp_vec *vecs; /* [n_vecs] distinct vectors in order of first appearance */
    size_t n_vecs, vecs_cap;
    ft_hmap key_map;  /* key(fuser, mb) -> vector index */
    ft_hmap dict_map; /* encoder: content hash -> vector index */
    int64_t *pred;    /* [pred_cap] scratch */
    size_t pred_cap;
} sp_state;

static void sp_reset(sp_state *s)
{
    s->gen++;
    if (s->gen == 0) { /* wrapped: invalidate every entry explicitly */
        for (size_t i = 0; i < s->fs_cap; i++)
            s->fs[i].gen = 0;
        s->gen = 1;
    }
    s->acc_len = 0;
    s->n_vecs = 0;
    ft_hmap_clear(&s->key_map);
    ft_hmap_clear(&s->dict_map);
}

static void sp_free(sp_state *s)
{
    ft_free(s->fs);
    ft_free(s->acc);
    ft_free(s->vecs);
    ft_free(s->pred);
    ft_hmap_free(&s->key_map);
    ft_hmap_free(&s->dict_map);
    memset(s, 0, sizeof *s);
}

/* The per-fuser state for this chunk (fresh on first use). */
static int sp_fuser_get(sp_state *s, uint32_t fuser, sp_fuser **out)
{
    if (fuser >= s->fs_cap) {
        size_t old = s->fs_cap;
        int rc = grow((void **)&s->fs, &s->fs_cap, (size_t)fuser + 1, sizeof *s->fs);
        if (rc) return rc;
        memset(s->fs + old, 0, (s->fs_cap - old) * sizeof *s->fs);
    }
    sp_fuser *f = &s->fs[fuser];
    if (f->gen != s->gen) {
        memset(f, 0, sizeof *f);
        f->gen = s->gen;
    }
    *out = f;
    return FT_OK;
}

static uint64_t sp_key(uint32_t fuser, int has_mb, int64_t mb)
{
    return ft_hash_mix(((uint64_t)fuser << 1) | (uint64_t)(has_mb != 0), has_mb ? (uint64_t)mb : 0);
}

/* pred[0..k-1] for a vector of k values summing to T: T * acc[i] / acc_total in 31-bit fixed
 * point (one division per vector). Encoder and decoder share this exact integer arithmetic. */
static int sp_predict(sp_state *s, const sp_fuser *f, uint32_t k, uint64_t T)
{
    int rc = grow((void **)&s->pred, &s->pred_cap, k ? k : 1, sizeof *s->pred);
    if (rc) return rc;
    if (f->acc_k == k && f->acc_tot > 0 && T <= PRED_T_LIMIT) {
        const uint64_t *acc = s->acc + f->acc_off;
        uint64_t scale = (T << 31) / f->acc_tot; /* acc[i] <= acc_total: no overflow below */
        for (uint32_t i = 0; i < k; i++)
            s->pred[i] = (int64_t)((acc[i] * scale + (1ull << 30)) >> 31);
    } else {
        int64_t p = k ? (int64_t)(T / k) : 0;
        for (uint32_t i = 0; i < k; i++)
            s->pred[i] = p;
    }
    return FT_OK;
}

/* The codec-2 residual of split size v against pred: 0 when v is the fuser's largest size so far
 * (capacity-clipped routing piles sizes there), else 1 + zz(v - pred). */
static inline uint64_t sp_res(int64_t v, int64_t pred, uint64_t top)
{
    return top && (uint64_t)v == top - 1 ? 0 : 1 + zz(v - pred);
}

/* Fold a literal vector v[k] with sum T into the fuser's accumulator (and its top). */
static int sp_update(sp_state *s, sp_fuser *f, const int64_t *v, uint32_t k, uint64_t T)
{
    if (T > PRED_T_LIMIT || k == 0) return FT_OK;
    for (uint32_t i = 0; i < k; i++)
        f->top = (uint64_t)v[i] >= f->top ? (uint64_t)v[i] + 1 : f->top;
    if (f->acc_k != k) {
        int rc = grow((void **)&s->acc, &s->acc_cap, s->acc_len + k, sizeof *s->acc);
        if (rc) return rc;
        f->acc_off = s->acc_len;
        s->acc_len += k;
        f->acc_k = k;
        f->acc_tot = 0;
        memset(s->acc + f->acc_off, 0, (size_t)k * sizeof *s->acc);
    }
    uint64_t *acc = s->acc + f->acc_off;
    for (uint32_t i = 0; i < k; i++)
        acc[i] += (uint64_t)v[i];
    f->acc_tot += T;
    while (f->acc_tot > ACC_LIMIT) {
        f->acc_tot = 0;
        for (uint32_t i = 0; i < k; i++) {
            acc[i] >>= 1;
            f->acc_tot += acc[i];
        }
    }
    return FT_OK;
}

/* ---- encoder ------------------------------------------------------------------------------ */
typedef struct oprg_ent {
    size_t off;     /* offset of the entry's bitmap in oprg_dict */
    uint32_t n_ops; /* pattern length */
} oprg_ent;

struct ft_chunk_enc {
    uint64_t *col[N_INTCOL]; /* [cap] codes per column (BWD: per backward record) */
    size_t cap;
    uint32_t n, n_calls, n_bwd;
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
    ft_buf sp_sym;           /* ... residual symbols, one byte each */
    ft_buf sp_bits;          /* ... residual extra bits, LSB first */
    uint64_t bit_acc;        /* pending extra bits (bit_n of them) */
    uint32_t bit_n;
    ft_buf splits;                        /* scratch: the split section */
    ft_buf main;                          /* scratch: the main section */
    size_t cuts[4 * FT_CHUNK_N_COLS + 8]; /* frame boundaries in main (see put_intcol) */
    uint32_t n_cuts;
    ft_chunk_obs_fn obs; /* optional symbol observer (benchmarks) */
    void *obs_ctx;
    ZSTD_CCtx *cctx;
};

static void enc_start(ft_chunk_enc *e)
{
    e->n = e->n_calls = e->n_bwd = 0;
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
    e->sp_tags.len = e->sp_sym.len = e->sp_bits.len = 0;
    e->bit_acc = 0;
    e->bit_n = 0;
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
    ft_free(e->phases);
    ft_buf_free(&e->oprg_dict);
    ft_free(e->oprg);
    ft_hmap_free(&e->oprg_map);
    ft_free(e->bits);
    sp_free(&e->sp);
    ft_free(e->vals);
    ft_buf_free(&e->splits);
    ft_buf_free(&e->sp_tags);
    ft_buf_free(&e->sp_sym);
    ft_buf_free(&e->sp_bits);
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

/* ---- residual code (chunk.h, SPLIT SECTION): a symbol byte plus extra bits ------------------ */
/* Append nb <= 56 bits to the extra-bit stream (room for 8 bytes reserved by the caller). */
static inline void bits_put(ft_chunk_enc *e, uint64_t v, uint32_t nb)
{
    e->bit_acc |= v << e->bit_n; /* bit_n < 8, nb <= 56: fits */
    e->bit_n += nb;
    uint8_t *p = e->sp_bits.data + e->sp_bits.len;
    put_u64(p, e->bit_acc);
    uint32_t nbytes = e->bit_n >> 3;
    e->sp_bits.len += nbytes;
    e->bit_acc = nbytes == 8 ? 0 : e->bit_acc >> (8 * nbytes);
    e->bit_n &= 7;
}

/* Code u: symbol u below 16, else 16 + 4 * (bit length - 5) + the two bits after the leading
 * one, and the bit length - 3 low bits as extra bits. Room: 1 symbol byte, 16 bit bytes. */
static inline void res_put(ft_chunk_enc *e, uint64_t u)
{
    if (u < 16) {
        e->sp_sym.data[e->sp_sym.len++] = (uint8_t)u;
        return;
    }
    uint32_t b = 64 - (uint32_t)__builtin_clzll(u), nb = b - 3;
    e->sp_sym.data[e->sp_sym.len++] = (uint8_t)(16 + 4 * (b - 5) + ((u >> nb) & 3));
    uint64_t extra = nb == 64 ? u : u & ((1ull << nb) - 1);
    if (nb > 56) {
        bits_put(e, extra & 0xffffffffu, 32);
        bits_put(e, extra >> 32, nb - 32);
    } else {
        bits_put(e, extra, nb);
    }
}

static int enc_reserve(ft_chunk_enc *e)
{
    if (e->n < e->cap) return FT_OK;
    size_t cap = e->cap ? e->cap * 2 : 1024;
    for (int c = 0; c < N_INTCOL; c++) {
        uint64_t *p = ft_realloc(e->col[c], cap * sizeof *p);
        if (!p) return FT_ENOMEM;
        e->col[c] = p;
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
    int rc = grow((void **)&e->phases, &e->phases_cap, (size_t)e->n_phases + 1, sizeof(char *));
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
    int rc = grow((void **)&e->bits, &e->bits_cap, nb ? nb : 1, 1);
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
    rc = grow((void **)&e->oprg, &e->oprg_cap, (size_t)e->n_oprg + 1, sizeof *e->oprg);
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
    rc = grow((void **)&s->vecs, &s->vecs_cap, s->n_vecs + 1, sizeof *s->vecs);
    if (rc) return rc;
    rc = grow((void **)&e->vals, &e->vals_cap, e->vals_len + k, sizeof *e->vals);
    if (rc) return rc;
    rc = ft_buf_reserve(&e->sp_tags, 20);
    if (!rc) rc = ft_buf_reserve(&e->sp_sym, (size_t)k);
    if (!rc) rc = ft_buf_reserve(&e->sp_bits, 16 + (size_t)k * 8);
    if (rc) return rc;
    rc = sp_predict(s, f, k, (uint64_t)T);
    if (rc) return rc;
    uint64_t tag = f->has_k && f->last_k == k ? 1 : 2;
    e->sp_tags.len += varint_put(e->sp_tags.data + e->sp_tags.len, tag);
    if (tag == 2) e->sp_tags.len += varint_put(e->sp_tags.data + e->sp_tags.len, k);
    for (uint32_t i = 0; i + 1 < k; i++)
        res_put(e, sp_res(v[i], s->pred[i], f->top));
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

    /* the split section: header, tag stream, symbols, extra bits (each its own frame) */
    ft_buf *sp = &e->splits;
    sp->len = 0;
    uint64_t n_sym = e->sp_sym.len;
    if (e->sp_tags.len) {
        if (e->bit_n) { /* the last partial byte */
            rc = ft_buf_reserve(&e->sp_bits, 1);
            if (rc) return rc;
            e->sp_bits.data[e->sp_bits.len++] = (uint8_t)e->bit_acc;
            e->bit_acc = 0;
            e->bit_n = 0;
        }
        if (e->sp_tags.len > FT_CHUNK_MAX_RAW || n_sym > FT_CHUNK_MAX_RAW)
            return ft_err_set(err, FT_ERANGE, "chunk split section too large");
        rc = ft_buf_reserve(sp, 8 + e->sp_tags.len + e->sp_sym.len + e->sp_bits.len);
        if (rc) return rc;
        put_u32(sp->data, (uint32_t)e->sp_tags.len);
        put_u32(sp->data + 4, (uint32_t)n_sym);
        memcpy(sp->data + 8, e->sp_tags.data, e->sp_tags.len);
        if (e->sp_sym.len) /* streams never written have no buffer */
            memcpy(sp->data + 8 + e->sp_tags.len, e->sp_sym.data, e->sp_sym.len);
        if (e->sp_bits.len)
            memcpy(sp->data + 8 + e->sp_tags.len + e->sp_sym.len, e->sp_bits.data, e->sp_bits.len);
        sp->len = 8 + e->sp_tags.len + e->sp_sym.len + e->sp_bits.len;
    }
    if (m->len > FT_CHUNK_MAX_RAW || e->splits.len > FT_CHUNK_MAX_RAW)
        return ft_err_set(err, FT_ERANGE, "chunk too large (%zu + %zu bytes)", m->len,
                          e->splits.len);
    uint64_t sp_sum = e->splits.len ? ft_hash64(e->splits.data, e->splits.len) : 0;
    uint8_t *h = m->data;
    memcpy(h, "FTC2", 4);
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
        size_t cut[4] = {0, 8 + e->sp_tags.len, 8 + e->sp_tags.len + e->sp_sym.len, sp->len};
        for (int i = 0; i < 3; i++) {
            rc = compress_into(e->cctx, level, blob, sp->data + cut[i], cut[i + 1] - cut[i], &z,
                               err);
            if (rc) return rc;
            sp_z += z;
        }
    }
    memcpy(blob->data, "FTZ2", 4);
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
    enc_start(e);
    return FT_OK;
}

/* ---- decoder ------------------------------------------------------------------------------ */
uint64_t ft_chunk_main_cap(uint32_t n_records, uint32_t n_calls)
{
    /* header; 14 integer columns of at most a mode byte, a width byte and a 10-byte varint per
     * value; the phase dictionary at its limits; op_rg entries (<= n_calls) of a 10-byte varint
     * plus their bitmaps, which expand to at most FT_CHUNK_MAX_OPRG_VALUES */
    return FT_CHUNK_MAIN_HDR + (uint64_t)N_INTCOL * (2 + 10 * (uint64_t)n_records) +
           (uint64_t)FT_CHUNK_MAX_PHASES * (3 + FT_CHUNK_MAX_PHASE_LEN) + 11 * (uint64_t)n_calls +
           FT_CHUNK_MAX_OPRG_VALUES / 8;
}

uint64_t ft_chunk_splits_cap(uint32_t n_calls)
{
    /* per call a tag and a length (10-byte varints each); per value at most 10 bytes (codec 1
     * varints; codec 2 takes 1 symbol byte + <= 61 extra bits); the stream header */
    uint64_t vals = (uint64_t)n_calls * FT_MAX_SPLITS;
    if (vals > FT_CHUNK_MAX_SPLIT_VALUES) vals = FT_CHUNK_MAX_SPLIT_VALUES;
    return 8 + 20 * (uint64_t)n_calls + 10 * vals;
}

typedef struct dict_ent {
    uint32_t off;      /* offset of the expanded 0/1 pattern in oprg_pat */
    uint32_t n_ops;    /* pattern length */
    uint32_t first_rg; /* first set index, n_ops if none */
} dict_ent;

struct ft_chunk_dec {
    ZSTD_DCtx *dctx;
    uint8_t *main, *spbuf; /* decoded sections */
    size_t main_cap, spbuf_cap;
    uint32_t *kind32, *oprg32; /* [rec_cap] KIND and OPRG codes */
    uint64_t *bwd64;           /* [rec_cap] BWD codes */
    size_t rec_cap;
    /* outputs, [rec_cap] (offset arrays [rec_cap + 1]) */
    uint8_t *kind;
    int64_t *seq, *step, *mb, *ns, *fuse_ns, *bwd_call, *ntok;
    uint32_t *fuser, *flags, *first_rg, *op_rg_off, *splits_off;
    int32_t *recipe, *device, *phase;
    uint8_t *op_rg; /* [op_rg_cap] */
    size_t op_rg_cap;
    int64_t *splits; /* [splits_cap] */
    size_t splits_cap;
    char *phase_arena; /* NUL-terminated phase strings */
    size_t phase_arena_cap;
    const char **phases; /* [phases_cap] */
    size_t phases_cap;
    dict_ent *dict; /* [dict_cap] op_rg patterns */
    size_t dict_cap;
    uint8_t *oprg_pat; /* [oprg_pat_cap] expanded patterns */
    size_t oprg_pat_cap;
    sp_state sp;
};

int ft_chunk_dec_new(ft_chunk_dec **out)
{
    *out = NULL;
    ft_chunk_dec *d = ft_calloc(1, sizeof *d);
    if (!d) return FT_ENOMEM;
    d->dctx = ZSTD_createDCtx();
    if (!d->dctx) {
        ft_free(d);
        return FT_ENOMEM;
    }
    *out = d;
    return FT_OK;
}

void ft_chunk_dec_free(ft_chunk_dec *d)
{
    if (!d) return;
    ZSTD_freeDCtx(d->dctx);
    ft_free(d->main);
    ft_free(d->spbuf);
    ft_free(d->kind32);
    ft_free(d->oprg32);
    ft_free(d->bwd64);
    ft_free(d->kind);
    ft_free(d->seq);
    ft_free(d->step);
    ft_free(d->mb);
    ft_free(d->ns);
    ft_free(d->fuse_ns);
    ft_free(d->bwd_call);
    ft_free(d->ntok);
    ft_free(d->fuser);
    ft_free(d->flags);
    ft_free(d->first_rg);
    ft_free(d->op_rg_off);
    ft_free(d->splits_off);
    ft_free(d->recipe);
    ft_free(d->device);
    ft_free(d->phase);
    ft_free(d->op_rg);
    ft_free(d->splits);
    ft_free(d->phase_arena);
    ft_free(d->phases);
    ft_free(d->dict);
    ft_free(d->oprg_pat);
    sp_free(&d->sp);
    ft_free(d);
}

static int dec_reserve(ft_chunk_dec *d, size_t n)
{
    if (n <= d->rec_cap) return FT_OK;
    size_t cap = d->rec_cap ? d->rec_cap : 1024;
    while (cap < n)
        cap *= 2;
    struct {
        void **p;
        size_t sz;
    } arrs[] = {
        {(void **)&d->kind, 1},       {(void **)&d->seq, 8},      {(void **)&d->step, 8},
        {(void **)&d->mb, 8},         {(void **)&d->ns, 8},       {(void **)&d->fuse_ns, 8},
        {(void **)&d->bwd_call, 8},   {(void **)&d->ntok, 8},     {(void **)&d->fuser, 4},
        {(void **)&d->flags, 4},      {(void **)&d->first_rg, 4}, {(void **)&d->op_rg_off, 4},
        {(void **)&d->splits_off, 4}, {(void **)&d->recipe, 4},   {(void **)&d->device, 4},
        {(void **)&d->phase, 4},      {(void **)&d->kind32, 4},   {(void **)&d->oprg32, 4},
        {(void **)&d->bwd64, 8},
    };
    for (size_t i = 0; i < FT_ARRAY_LEN(arrs); i++) {
        void *q = ft_realloc(*arrs[i].p, (cap + 1) * arrs[i].sz);
        if (!q) return FT_ENOMEM;
        *arrs[i].p = q;
    }
    d->rec_cap = cap;
    return FT_OK;
}

/* Decode an integer column of exactly n values spanning exactly [p, end) into T out[n]
 * (values with a bit of HIGH set are an error). Run fills and fixed-width copies are plain loops
 * the compiler vectorizes. */
/* Layout 3 (byte planes) of an integer column, after its mode byte: its own function so that
 * the layouts of codec 1 below compile as they did. */
#define DEFINE_GET_PLANES(NAME, T)                                                                 \
    static __attribute__((noinline)) int NAME(const uint8_t *p, const uint8_t *end, T *out,        \
                                              uint32_t n)                                          \
    {                                                                                              \
        if (p >= end) return -1;                                                                   \
        uint32_t w = *p++;                                                                         \
        if ((w != 2 && w != 4 && w != 8) || (uint64_t)(end - p) != (uint64_t)w * n) return -1;     \
        const uint8_t *p1 = p + n;                                                                 \
        for (uint32_t i = 0; i < n; i++)                                                           \
            out[i] = (T)(p[i] | (T)p1[i] << 8);                                                    \
        uint8_t big = 0;                                                                           \
        for (uint32_t k = 2; k < w; k++) {                                                         \
            const uint8_t *q = p + (size_t)k * n;                                                  \
            if (k >= sizeof(T)) {                                                                  \
                for (uint32_t i = 0; i < n; i++)                                                   \
                    big |= q[i];                                                                   \
            } else {                                                                               \
                for (uint32_t i = 0; i < n; i++)                                                   \
                    out[i] |= (T)((T)q[i] << (8 * k));                                             \
            }                                                                                      \
        }                                                                                          \
        return big ? -1 : 0;                                                                       \
    }

DEFINE_GET_PLANES(get_planes64, uint64_t)
DEFINE_GET_PLANES(get_planes32, uint32_t)

#define DEFINE_GET_INTCOL(NAME, T, HIGH, PLANES)                                                   \
    static __attribute__((noinline)) int NAME(const uint8_t *p, const uint8_t *end, T *out,        \
                                              uint32_t n)                                          \
    {                                                                                              \
        if (p >= end) return -1;                                                                   \
        uint8_t mode = *p++;                                                                       \
        if (mode == 3) return PLANES(p, end, out, n);                                              \
        uint64_t v, run, big = 0;                                                                  \
        if (mode == 0) {                                                                           \
            for (uint32_t i = 0; i < n; i++) {                                                     \
                if (varint_get(&p, end, &v)) return -1;                                            \
                big |= v & (HIGH);                                                                 \
                out[i] = (T)v;                                                                     \
            }                                                                                      \
        } else if (mode == 1) {                                                                    \
            uint32_t i = 0;                                                                        \
            while (i < n) {                                                                        \
                if (varint_get(&p, end, &v) || varint_get(&p, end, &run)) return -1;               \
                if (run >= (uint64_t)(n - i)) return -1;                                           \
                big |= v & (HIGH);                                                                 \
                T x = (T)v, *o = out + i;                                                          \
                uint32_t len = (uint32_t)run + 1;                                                  \
                for (uint32_t r = 0; r < len; r++)                                                 \
                    o[r] = x;                                                                      \
                i += len;                                                                          \
            }                                                                                      \
        } else if (mode == 2) {                                                                    \
            if (p >= end) return -1;                                                               \
            uint32_t w = *p++;                                                                     \
            if ((w != 1 && w != 2 && w != 4 && w != 8) || (uint64_t)(end - p) != (uint64_t)w * n)  \
                return -1;                                                                         \
            if (w == 1) {                                                                          \
                for (uint32_t i = 0; i < n; i++)                                                   \
                    out[i] = p[i];                                                                 \
            } else if (w == 2) {                                                                   \
                for (uint32_t i = 0; i < n; i++)                                                   \
                    out[i] = get_u16(p + 2 * i);                                                   \
            } else if (w == 4) {                                                                   \
                for (uint32_t i = 0; i < n; i++)                                                   \
                    out[i] = (T)get_u32(p + 4 * i);                                                \
            } else {                                                                               \
                for (uint32_t i = 0; i < n; i++) {                                                 \
                    v = get_u64(p + 8 * i);                                                        \
                    big |= v & (HIGH);                                                             \
                    out[i] = (T)v;                                                                 \
                }                                                                                  \
            }                                                                                      \
            return big ? -1 : 0;                                                                   \
        } else {                                                                                   \
            return -1;                                                                             \
        }                                                                                          \
        return p == end && !big ? 0 : -1;                                                          \
    }

DEFINE_GET_INTCOL(get_intcol64, uint64_t, 0, get_planes64)
DEFINE_GET_INTCOL(get_intcol32, uint32_t, ~(uint64_t)UINT32_MAX, get_planes32)

#define CORRUPT(...) ft_err_set(err, FT_ECORRUPT, __VA_ARGS__)

static __attribute__((noinline)) int dec_dicts(ft_chunk_dec *d, uint64_t id, const uint8_t *ph,
                                               const uint8_t *ph_end, uint32_t n_phases,
                                               const uint8_t *op, const uint8_t *op_end,
                                               uint32_t n_oprg, ft_err *err)
{
    size_t need = (size_t)(ph_end - ph) + n_phases;
    int rc = grow((void **)&d->phase_arena, &d->phase_arena_cap, need ? need : 1, 1);
    if (!rc)
        rc = grow((void **)&d->phases, &d->phases_cap, n_phases ? n_phases : 1, sizeof *d->phases);
    if (rc) return rc;
    size_t apos = 0;
    for (uint32_t i = 0; i < n_phases; i++) {
        uint64_t len;
        if (varint_get(&ph, ph_end, &len) || len > FT_CHUNK_MAX_PHASE_LEN ||
            len > (uint64_t)(ph_end - ph))
            return CORRUPT("chunk %llu: phase dictionary entry %u has a bad length",
                           (unsigned long long)id, i);
        if (memchr(ph, 0, len))
            return CORRUPT("chunk %llu: phase dictionary entry %u holds a NUL byte",
                           (unsigned long long)id, i);
        memcpy(d->phase_arena + apos, ph, len);
        d->phase_arena[apos + len] = '\0';
        ph += len;
        apos += len + 1;
    }
    if (ph != ph_end)
        return CORRUPT("chunk %llu: phase dictionary has trailing bytes", (unsigned long long)id);
    apos = 0;
    for (uint32_t i = 0; i < n_phases; i++) {
        d->phases[i] = d->phase_arena + apos;
        apos += strlen(d->phase_arena + apos) + 1;
    }

    /* the expanded size of every entry, summed and bounded before anything is allocated */
    uint64_t pat_need = 0;
    const uint8_t *q = op;
    for (uint32_t i = 0; i < n_oprg; i++) {
        uint64_t n_ops;
        if (varint_get(&q, op_end, &n_ops) || n_ops > FT_MAX_OPS ||
            (n_ops + 7) / 8 > (uint64_t)(op_end - q))
            return CORRUPT("chunk %llu: op_rg dictionary entry %u has a bad length",
                           (unsigned long long)id, i);
        q += (n_ops + 7) / 8;
        pat_need += n_ops;
    }
    if (pat_need > FT_CHUNK_MAX_OPRG_VALUES)
        return CORRUPT("chunk %llu: op_rg dictionary expands to %llu values, more than %u",
                       (unsigned long long)id, (unsigned long long)pat_need,
                       FT_CHUNK_MAX_OPRG_VALUES);
    rc = grow((void **)&d->oprg_pat, &d->oprg_pat_cap, (size_t)pat_need + 8, 1); /* +8: words */
    if (!rc) rc = grow((void **)&d->dict, &d->dict_cap, (size_t)n_oprg + 1, sizeof *d->dict);
    if (rc) return rc;
    d->dict[0] = (dict_ent){0, 0, 0};
    size_t ppos = 0;
    for (uint32_t i = 0; i < n_oprg; i++) {
        uint64_t n_ops;
        if (varint_get(&op, op_end, &n_ops) || n_ops > FT_MAX_OPS ||
            (n_ops + 7) / 8 > (uint64_t)(op_end - op))
            return CORRUPT("chunk %llu: op_rg dictionary entry %u has a bad length",
                           (unsigned long long)id, i);
        size_t nb = (size_t)(n_ops + 7) / 8;
        if (n_ops % 8 && (op[nb - 1] >> (n_ops % 8)))
            return CORRUPT("chunk %llu: op_rg dictionary entry %u has stray bits",
                           (unsigned long long)id, i);
        dict_ent *de = &d->dict[i + 1];
        de->off = (uint32_t)ppos;
        de->n_ops = (uint32_t)n_ops;
        de->first_rg = (uint32_t)n_ops;
        for (uint32_t b = 0; b < n_ops; b++) {
            uint8_t bit = (op[b / 8] >> (b % 8)) & 1;
            d->oprg_pat[ppos + b] = bit;
            if (bit && de->first_rg == n_ops) de->first_rg = b;
        }
        ppos += n_ops;
        op += nb;
    }
    if (op != op_end)
        return CORRUPT("chunk %llu: op_rg dictionary has trailing bytes", (unsigned long long)id);
    memset(d->oprg_pat + ppos, 0, 8); /* defined bytes for the 8-byte copies */
    return FT_OK;
}

/* A split entry that refers to an earlier vector (tag 0: the last one of the same fuser and
 * microbatch key; tag >= 3: the (tag - 3)-th newest): copied to splits[pos..], checked against
 * the token count, remembered under key. *k = its length, or UINT32_MAX when the entry is a
 * literal (tag 1 or 2), which the caller decodes. Shared by both codecs. */
static int split_ref(ft_chunk_dec *d, sp_state *s, uint64_t tag, uint64_t key, uint64_t T,
                     size_t pos, uint64_t id, uint32_t i, uint32_t *k, ft_err *err)
{
    uint32_t j = UINT32_MAX;
    *k = UINT32_MAX;
    if (tag == 0) {
        j = ft_hmap_get(&s->key_map, key);
        if (j == UINT32_MAX || j >= s->n_vecs)
            return CORRUPT("chunk %llu: record %u: split vector refers to no earlier vector",
                           (unsigned long long)id, i);
    } else if (tag >= 3) {
        if (tag - 3 >= s->n_vecs)
            return CORRUPT("chunk %llu: record %u: split vector reference out of range",
                           (unsigned long long)id, i);
        j = (uint32_t)(s->n_vecs - 1 - (tag - 3));
    }
    if (j == UINT32_MAX) return FT_OK;
    const uint32_t n = s->vecs[j].k;
    if (pos + n > FT_CHUNK_MAX_SPLIT_VALUES)
        return CORRUPT("chunk %llu: more than %u split sizes", (unsigned long long)id,
                       FT_CHUNK_MAX_SPLIT_VALUES);
    int rc = grow((void **)&d->splits, &d->splits_cap, pos + n + 1, sizeof *d->splits);
    if (rc) return rc;
    const int64_t *src = d->splits + s->vecs[j].off;
    uint64_t sum = 0;
    for (uint32_t m = 0; m < n; m++)
        sum += (uint64_t)src[m];
    if (sum != T)
        return CORRUPT("chunk %llu: record %u: split sizes do not sum to the token count",
                       (unsigned long long)id, i);
    memcpy(d->splits + pos, src, (size_t)n * sizeof *src);
    if (tag != 0 && (rc = ft_hmap_put(&s->key_map, key, j))) return rc;
    *k = n;
    return FT_OK;
}

/* The length of a literal split vector: the fuser's last length (tag 1) or a varint from
 * [*p, end) (tag 2), checked against the per-call and per-chunk limits and the token count.
 * Shared by both codecs. */
static int split_len(const sp_fuser *f, uint64_t tag, const uint8_t **p, const uint8_t *end,
                     uint64_t T, size_t pos, uint64_t id, uint32_t i, uint32_t *k, ft_err *err)
{
    if (tag == 1) {
        if (!f->has_k)
            return CORRUPT("chunk %llu: record %u: split length refers to no earlier vector",
                           (unsigned long long)id, i);
        *k = f->last_k;
    } else {
        uint64_t kk;
        if (varint_get(p, end, &kk) || kk > FT_MAX_SPLITS)
            return CORRUPT("chunk %llu: record %u: bad split vector length", (unsigned long long)id,
                           i);
        *k = (uint32_t)kk;
    }
    if (pos + *k > FT_CHUNK_MAX_SPLIT_VALUES)
        return CORRUPT("chunk %llu: more than %u split sizes", (unsigned long long)id,
                       FT_CHUNK_MAX_SPLIT_VALUES);
    if (*k == 0 && T != 0)
        return CORRUPT("chunk %llu: record %u: empty split vector with tokens",
                       (unsigned long long)id, i);
    return FT_OK;
}

/* Decode the split section into splits_off / splits. */
static __attribute__((noinline)) int dec_splits(ft_chunk_dec *d, uint64_t id, const uint8_t *p,
                                                const uint8_t *end, uint32_t n, ft_err *err)
{
    sp_state *s = &d->sp;
    sp_reset(s);
    size_t pos = 0;
    for (uint32_t i = 0; i < n; i++) {
        d->splits_off[i] = (uint32_t)pos;
        if (d->kind[i] != FT_REC_CALL || !(d->flags[i] & FT_CF_HAS_SPLITS)) continue;
        uint32_t fuser = d->fuser[i];
        uint64_t T = (uint64_t)d->ntok[i];
        sp_fuser *f;
        int rc = sp_fuser_get(s, fuser, &f);
        if (rc) return rc;
        uint64_t key = sp_key(fuser, (d->flags[i] & FT_CF_HAS_MB) != 0, d->mb[i]);
        uint64_t tag;
        if (varint_get(&p, end, &tag))
            return CORRUPT("chunk %llu: record %u: split entry truncated", (unsigned long long)id,
                           i);
        uint32_t k;
        if ((rc = split_ref(d, s, tag, key, T, pos, id, i, &k, err))) return rc;
        if (k == UINT32_MAX) {
            if ((rc = split_len(f, tag, &p, end, T, pos, id, i, &k, err))) return rc;
            rc = grow((void **)&d->splits, &d->splits_cap, pos + k + 1, sizeof *d->splits);
            if (!rc) rc = grow((void **)&s->vecs, &s->vecs_cap, s->n_vecs + 1, sizeof *s->vecs);
            if (!rc) rc = sp_predict(s, f, k, T);
            if (rc) return rc;
            int64_t *v = d->splits + pos;
            uint64_t left = T;
            for (uint32_t m = 0; m + 1 < k; m++) {
                uint64_t r;
                if (varint_get_small(&p, end, &r))
                    return CORRUPT("chunk %llu: record %u: split vector truncated",
                                   (unsigned long long)id, i);
                uint64_t x = (uint64_t)s->pred[m] + (uint64_t)unzz(r);
                if (x > left)
                    return CORRUPT("chunk %llu: record %u: split size out of range",
                                   (unsigned long long)id, i);
                v[m] = (int64_t)x;
                left -= x;
            }
            if (k) v[k - 1] = (int64_t)left;
            const uint32_t j = (uint32_t)s->n_vecs++;
            s->vecs[j].off = pos;
            s->vecs[j].k = k;
            rc = ft_hmap_put(&s->key_map, key, j);
            if (!rc) rc = sp_update(s, f, v, k, T);
            if (rc) return rc;
        }
        f->has_k = 1;
        f->last_k = k;
        pos += k;
    }
    d->splits_off[n] = (uint32_t)pos;
    if (p != end)
        return CORRUPT("chunk %llu: split section has trailing bytes", (unsigned long long)id);
    return FT_OK;
}

/* Per residual symbol: extra bits and the value without them (chunk.h, SPLIT SECTION). */
static uint8_t res_nb[256];
static uint64_t res_base[256];
static once_flag res_once = ONCE_FLAG_INIT;

static void res_tables(void)
{
    for (uint32_t sy = 0; sy < 256; sy++) {
        uint32_t t = sy - 16, nb = sy < 16 ? 0 : 2 + (t >> 2);
        res_nb[sy] = (uint8_t)nb;
        res_base[sy] = sy < 16 ? sy : (uint64_t)(4 | (t & 3)) << nb; /* nb <= 61: fits */
    }
}

/* Decode the codec-2 split section [p, end) (chunk.h, SPLIT SECTION) into splits_off / splits.
 * The extra-bit stream is read 8 bytes at a time: the section buffer has 16 zero bytes past end. */
static __attribute__((noinline)) int dec_splits2(ft_chunk_dec *d, uint64_t id, const uint8_t *p,
                                                 const uint8_t *end, uint32_t n, ft_err *err)
{
    sp_state *s = &d->sp;
    sp_reset(s);
    call_once(&res_once, res_tables);
    const uint8_t *tg = p, *tg_end = p, *sym = p, *sym_end = p, *bits = p;
    uint64_t nbits = 0, bpos = 0;
    if (end > p) {
        if (end - p < 8)
            return CORRUPT("chunk %llu: split section truncated", (unsigned long long)id);
        uint64_t tl = get_u32(p), ns = get_u32(p + 4);
        if (tl + ns > (uint64_t)(end - p - 8))
            return CORRUPT("chunk %llu: split section streams overrun it", (unsigned long long)id);
        tg = p + 8;
        tg_end = sym = tg + tl;
        sym_end = bits = sym + ns;
        nbits = (uint64_t)(end - bits) * 8;
    }
    size_t pos = 0;
    for (uint32_t i = 0; i < n; i++) {
        d->splits_off[i] = (uint32_t)pos;
        if (d->kind[i] != FT_REC_CALL || !(d->flags[i] & FT_CF_HAS_SPLITS)) continue;
        uint32_t fuser = d->fuser[i];
        uint64_t T = (uint64_t)d->ntok[i];
        sp_fuser *f;
        int rc = sp_fuser_get(s, fuser, &f);
        if (rc) return rc;
        uint64_t key = sp_key(fuser, (d->flags[i] & FT_CF_HAS_MB) != 0, d->mb[i]);
        uint64_t tag;
        if (varint_get(&tg, tg_end, &tag))
            return CORRUPT("chunk %llu: record %u: split entry truncated", (unsigned long long)id,
                           i);
        uint32_t k;
        if ((rc = split_ref(d, s, tag, key, T, pos, id, i, &k, err))) return rc;
        if (k == UINT32_MAX) {
            if ((rc = split_len(f, tag, &tg, tg_end, T, pos, id, i, &k, err))) return rc;
            if (k > 1 && (uint64_t)(sym_end - sym) < k - 1)
                return CORRUPT("chunk %llu: record %u: split vector truncated",
                               (unsigned long long)id, i);
            rc = grow((void **)&d->splits, &d->splits_cap, pos + k + 1, sizeof *d->splits);
            if (!rc) rc = grow((void **)&s->vecs, &s->vecs_cap, s->n_vecs + 1, sizeof *s->vecs);
            if (!rc) rc = sp_predict(s, f, k, T);
            if (rc) return rc;
            int64_t *v = d->splits + pos;
            uint64_t left = T, bad = 0;
            for (uint32_t m = 0; m + 1 < k; m++) {
                uint32_t sy = sym[m], nb = res_nb[sy];
                if (bpos + nb > nbits)
                    return CORRUPT("chunk %llu: record %u: split vector truncated",
                                   (unsigned long long)id, i);
                uint64_t x;
                if (nb <= 56) {
                    x = (get_u64(bits + (bpos >> 3)) >> (bpos & 7)) & ((1ull << nb) - 1);
                } else {
                    uint64_t lo = (get_u64(bits + (bpos >> 3)) >> (bpos & 7)) & 0xffffffffu;
                    uint64_t b2 = bpos + 32;
                    uint64_t hi =
                        (get_u64(bits + (b2 >> 3)) >> (b2 & 7)) & ((1ull << (nb - 32)) - 1);
                    x = lo | hi << 32;
                }
                bpos += nb;
                uint64_t u = res_base[sy] | x;
                uint64_t xv = u ? (uint64_t)s->pred[m] + (uint64_t)unzz(u - 1)
                                : (f->top ? f->top - 1 : UINT64_MAX);
                bad |= xv > left;
                xv = xv > left ? left : xv;
                v[m] = (int64_t)xv;
                left -= xv;
            }
            if (bad)
                return CORRUPT("chunk %llu: record %u: split size out of range",
                               (unsigned long long)id, i);
            if (k > 1) sym += k - 1;
            if (k) v[k - 1] = (int64_t)left;
            const uint32_t j = (uint32_t)s->n_vecs++;
            s->vecs[j].off = pos;
            s->vecs[j].k = k;
            rc = ft_hmap_put(&s->key_map, key, j);
            if (!rc) rc = sp_update(s, f, v, k, T);
            if (rc) return rc;
        }
        f->has_k = 1;
        f->last_k = k;
        pos += k;
    }
    d->splits_off[n] = (uint32_t)pos;
    if (tg != tg_end || sym != sym_end || (bpos + 7) / 8 != nbits / 8 ||
        (bpos & 7 && bits[bpos >> 3] >> (bpos & 7)))
        return CORRUPT("chunk %llu: split section has trailing bytes", (unsigned long long)id);
    return FT_OK;
}

static int dec_section(ft_chunk_dec *d, uint64_t id, const char *what, uint8_t **dst, size_t *cap,
                       const uint8_t *src, size_t zlen, size_t raw, ft_err *err)
{
    int rc = grow((void **)dst, cap, raw + 16, 1);
    if (rc) return rc;
    memset(*dst + raw, 0, 16); /* defined bytes for readers that load words */
    size_t got = ZSTD_decompressDCtx(d->dctx, *dst, raw, src, zlen);
    if (ZSTD_isError(got))
        return CORRUPT("chunk %llu: %s section does not decompress (%s)", (unsigned long long)id,
                       what, ZSTD_getErrorName(got));
    if (got != raw)
        return CORRUPT("chunk %llu: %s section decodes to %zu bytes, expected %zu",
                       (unsigned long long)id, what, got, raw);
    return FT_OK;
}

int ft_chunk_decode(ft_chunk_dec *d, const ft_chunk_info *info, const void *data, size_t len,
                    const ft_chunk_limits *lim, unsigned read_flags, ft_batch *out, ft_err *err)
{
    unsigned long long id = (unsigned long long)info->id;
    const uint8_t *blob = data;
    memset(out, 0, sizeof *out);
    uint32_t codec = info->codec;
    if (codec != 1 && codec != 2)
        return CORRUPT("chunk %llu: unknown chunk codec %u (this build reads codecs 1 and 2; a "
                       "newer fusertrace may have written it)",
                       id, codec);
    if (len < FT_CHUNK_STORED_HDR || memcmp(blob, codec == 1 ? "FTZ1" : "FTZ2", 4))
        return CORRUPT("chunk %llu: stored data has no codec %u chunk header", id, codec);
    if (info->n_records == 0 || info->n_records > FT_CHUNK_MAX_RECORDS ||
        info->n_calls > info->n_records)
        return CORRUPT("chunk %llu: index row claims %u records (%u calls)", id, info->n_records,
                       info->n_calls);
    uint32_t main_raw = get_u32(blob + 4), main_z = get_u32(blob + 8);
    uint32_t sp_raw = get_u32(blob + 12), sp_z = get_u32(blob + 16);
    if ((uint64_t)FT_CHUNK_STORED_HDR + main_z + sp_z != len)
        return CORRUPT("chunk %llu: stored sizes (%u + %u) do not match the data (%zu bytes)", id,
                       main_z, sp_z, len);
    if (main_raw < FT_CHUNK_MAIN_HDR || main_raw > FT_CHUNK_MAX_RAW || sp_raw > FT_CHUNK_MAX_RAW ||
        (uint64_t)main_raw + sp_raw != info->raw_bytes || (sp_raw == 0) != (sp_z == 0))
        return CORRUPT("chunk %llu: section sizes %u + %u disagree with raw_bytes %llu", id,
                       main_raw, sp_raw, (unsigned long long)info->raw_bytes);
    /* decoded sizes bounded by what this many records can hold, before anything is allocated */
    uint64_t main_cap = ft_chunk_main_cap(info->n_records, info->n_calls);
    uint64_t sp_cap = ft_chunk_splits_cap(info->n_calls);
    if (main_raw > main_cap || sp_raw > sp_cap)
        return CORRUPT("chunk %llu: decoded sections of %u + %u bytes exceed the %llu + %llu a "
                       "chunk of %u records can hold",
                       id, main_raw, sp_raw, (unsigned long long)main_cap,
                       (unsigned long long)sp_cap, info->n_records);
    int rc = dec_section(d, info->id, "main", &d->main, &d->main_cap, blob + FT_CHUNK_STORED_HDR,
                         main_z, main_raw, err);
    if (rc) return rc;
    const uint8_t *m = d->main;
    if (ft_hash64(m, main_raw) != info->checksum)
        return CORRUPT("chunk %llu: checksum mismatch", id);
    uint32_t n = get_u32(m + 4), n_calls = get_u32(m + 8);
    int64_t first_seq = (int64_t)get_u64(m + 12);
    uint64_t sp_sum = get_u64(m + 24);
    uint32_t n_phases = get_u32(m + 32), n_oprg = get_u32(m + 36);
    if (memcmp(m, codec == 1 ? "FTC1" : "FTC2", 4) || n != info->n_records ||
        n_calls != info->n_calls || first_seq != info->first_seq || get_u32(m + 20) != sp_raw ||
        n == 0 || n > FT_CHUNK_MAX_RECORDS || n_calls > n || n_phases > FT_CHUNK_MAX_PHASES ||
        n_oprg > n_calls)
        return CORRUPT("chunk %llu: header disagrees with the chunk index", id);
    const uint8_t *col[FT_CHUNK_N_COLS + 1];
    uint64_t off = FT_CHUNK_MAIN_HDR;
    for (int c = 0; c < FT_CHUNK_N_COLS; c++) {
        col[c] = m + off;
        off += get_u32(m + 40 + 4 * c);
        if (off > main_raw) return CORRUPT("chunk %llu: column %d overruns the chunk", id, c);
    }
    if (off != main_raw) return CORRUPT("chunk %llu: columns do not fill the chunk", id);
    col[FT_CHUNK_N_COLS] = m + off;

    rc = dec_reserve(d, n);
    if (rc) return rc;
    uint32_t n_bwd = n - n_calls;
    /* columns decode straight into the output arrays (or small code arrays), then the passes
     * below undo the codes in place */
    struct {
        int c;
        uint32_t *out32;
        uint64_t *out64;
    } dst[N_INTCOL] = {
        {C_KIND, d->kind32, NULL},           {C_SEQ, NULL, (uint64_t *)d->seq},
        {C_FUSER, d->fuser, NULL},           {C_RECIPE, (uint32_t *)d->recipe, NULL},
        {C_FLAGS, d->flags, NULL},           {C_DEVICE, (uint32_t *)d->device, NULL},
        {C_OPRG, d->oprg32, NULL},           {C_STEP, NULL, (uint64_t *)d->step},
        {C_MB, NULL, (uint64_t *)d->mb},     {C_PHASE, (uint32_t *)d->phase, NULL},
        {C_NS, NULL, (uint64_t *)d->ns},     {C_FUSE_NS, NULL, (uint64_t *)d->fuse_ns},
        {C_NTOK, NULL, (uint64_t *)d->ntok}, {C_BWD, NULL, d->bwd64},
    };
    for (int k = 0; k < N_INTCOL; k++) {
        int c = dst[k].c;
        uint32_t cnt = c == C_BWD ? n_bwd : n;
        int bad_col = (codec == 1 && col[c] < col[c + 1] && col[c][0] == 3) || /* layout 3: v2 */
                      (dst[k].out32 ? get_intcol32(col[c], col[c + 1], dst[k].out32, cnt)
                                    : get_intcol64(col[c], col[c + 1], dst[k].out64, cnt));
        if (bad_col) return CORRUPT("chunk %llu: column %d is malformed", id, c);
    }
    rc = dec_dicts(d, info->id, col[C_PHASES], col[C_PHASES + 1], n_phases, col[C_OPRGDICT],
                   col[C_OPRGDICT + 1], n_oprg, err);
    if (rc) return rc;

    /* kinds and flags */
    uint32_t bad = 0, calls = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t kd = d->kind32[i], fl = d->flags[i];
        bad |= (kd >> 1) | (fl >> 13) | (kd & ((fl & ~(uint32_t)FT_CF_HAS_NS) != 0));
        d->kind[i] = (uint8_t)kd;
        calls += (kd ^ 1) & 1;
    }
    if (bad || calls != n_calls)
        return CORRUPT("chunk %llu: record kinds or flags are invalid", id);

    /* seq: strictly increasing, never past INT64_MAX */
    uint64_t *S = (uint64_t *)d->seq;
    if (S[0] != 0) return CORRUPT("chunk %llu: first record's seq disagrees", id);
    uint64_t room = (uint64_t)INT64_MAX - (uint64_t)first_seq, cur = (uint64_t)first_seq;
    S[0] = cur;
    for (uint32_t i = 1; i < n; i++) {
        uint64_t sd = S[i];
        if (sd >= room) return CORRUPT("chunk %llu: record %u: seq overflows", id, i);
        room -= sd + 1;
        cur += sd + 1;
        S[i] = cur;
    }

    /* references: fuser, recipe, device, phase (backward records hold 0 codes; a record without
     * a phase repeats the previous code, 0 before any, so only HAS_PHASE needs an entry) */
    uint32_t nf = lim->n_fusers, nr = lim->n_recipes, np = n_phases ? n_phases : 1;
    uint32_t *RE = (uint32_t *)d->recipe, *DV = (uint32_t *)d->device, *PH = (uint32_t *)d->phase;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t kd = d->kind32[i], fl = d->flags[i], fu = d->fuser[i], re = RE[i], dv = DV[i];
        uint32_t ph = PH[i];
        bad |= ((fu >= nf) & (kd ^ 1)) | ((fu != 0) & kd) | (re > nr) |
               ((re != 0) != ((fl >> 12) & 1)) | ((dv != 0) & kd) | (ph >= np) |
               (((fl & FT_CF_HAS_PHASE) != 0) & (ph >= n_phases));
        d->recipe[i] = (int32_t)re - 1;
        d->device[i] = (int32_t)((dv >> 1) ^ (~(dv & 1) + 1));
        d->phase[i] = (fl & FT_CF_HAS_PHASE) ? (int32_t)ph : -1;
    }
    if (bad) return CORRUPT("chunk %llu: a fuser, recipe, device or phase is out of range", id);

    /* op_rg: dictionary entry 0 is the empty pattern of backward records */
    size_t oppos = 0;
    if ((rc = grow((void **)&d->op_rg, &d->op_rg_cap, 16, 1))) return rc;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t op = d->oprg32[i];
        if (op > n_oprg) return CORRUPT("chunk %llu: record %u: op_rg index out of range", id, i);
        const dict_ent *de = &d->dict[op];
        uint32_t want = d->kind[i] ? 0 : lim->fuser_n_ops[d->fuser[i]];
        if (de->n_ops != want || (d->kind[i] && op))
            return CORRUPT("chunk %llu: record %u: op_rg pattern does not fit its fuser", id, i);
        if (oppos + de->n_ops + 8 > d->op_rg_cap) { /* +8: room for the word copy below */
            if (oppos + de->n_ops > FT_CHUNK_MAX_OPRG_VALUES)
                return CORRUPT("chunk %llu: too many op_rg values", id);
            rc = grow((void **)&d->op_rg, &d->op_rg_cap, oppos + de->n_ops + 8, 1);
            if (rc) return rc;
        }
        d->op_rg_off[i] = (uint32_t)oppos;
        if (de->n_ops <= 8) /* one 8-byte copy; the bytes past n_ops are overwritten later */
            memcpy(d->op_rg + oppos, d->oprg_pat + de->off, 8);
        else
            memcpy(d->op_rg + oppos, d->oprg_pat + de->off, de->n_ops);
        oppos += de->n_ops;
        d->first_rg[i] = de->first_rg;
    }
    d->op_rg_off[n] = (uint32_t)oppos;

    /* running values: absent fields carry code 0, so plain prefix sums keep the last value */
    uint64_t *ST = (uint64_t *)d->step, *MB = (uint64_t *)d->mb, *NS = (uint64_t *)d->ns;
    uint64_t *FN = (uint64_t *)d->fuse_ns, *NT = (uint64_t *)d->ntok;
    uint64_t step = 0, mb = 0, ns = 0, nt = 0, neg = 0;
    uint32_t n_splits_calls = 0;
    for (uint32_t i = 0; i < n; i++) {
        step += (uint64_t)unzz(ST[i]);
        mb += (uint64_t)unzz(MB[i]);
        ns += (uint64_t)unzz(NS[i]);
        nt += (uint64_t)unzz(NT[i]);
        uint32_t hs = (d->flags[i] >> 6) & 1;
        ST[i] = step;
        MB[i] = mb;
        NS[i] = ns;
        FN[i] = (uint64_t)unzz(FN[i]);
        NT[i] = hs ? nt : 0;
        neg |= (nt >> 63) & hs;
        n_splits_calls += hs;
    }
    if (neg) return CORRUPT("chunk %llu: negative token count", id);

    /* backward -> call */
    uint32_t bwds = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!d->kind[i]) {
            d->bwd_call[i] = -1;
            continue;
        }
        uint64_t bd = d->bwd64[bwds++];
        if (bd >= (uint64_t)d->seq[i] - (uint64_t)INT64_MIN)
            return CORRUPT("chunk %llu: record %u: backward call seq out of range", id, i);
        d->bwd_call[i] = (int64_t)((uint64_t)d->seq[i] - 1 - bd);
    }
    if ((n_splits_calls == 0) != (sp_raw == 0))
        return CORRUPT("chunk %llu: split section disagrees with the records", id);

    out->chunk_id = info->id;
    out->n = n;
    out->kind = d->kind;
    out->seq = d->seq;
    out->fuser = d->fuser;
    out->recipe = d->recipe;
    out->flags = d->flags;
    out->device = d->device;
    out->first_rg = d->first_rg;
    out->op_rg_off = d->op_rg_off;
    out->op_rg = d->op_rg;
    out->step = d->step;
    out->mb = d->mb;
    out->phase = d->phase;
    out->phases = (const char *const *)d->phases;
    out->n_phases = n_phases;
    out->ns = d->ns;
    out->fuse_ns = d->fuse_ns;
    out->bwd_call = d->bwd_call;
    out->n_tokens = d->ntok;
    if (read_flags & FT_READ_SPLITS) {
        if (sp_raw) {
            rc = dec_section(d, info->id, "split", &d->spbuf, &d->spbuf_cap,
                             blob + FT_CHUNK_STORED_HDR + main_z, sp_z, sp_raw, err);
            if (rc) return rc;
            if (ft_hash64(d->spbuf, sp_raw) != sp_sum)
                return CORRUPT("chunk %llu: split section checksum mismatch", id);
            rc = (codec == 1 ? dec_splits : dec_splits2)(d, info->id, d->spbuf, d->spbuf + sp_raw,
                                                         n, err);
        } else {
            static const uint8_t none[1];
            rc = (codec == 1 ? dec_splits : dec_splits2)(d, info->id, none, none, n, err);
        }
        if (rc) return rc;
        if (!d->splits) {
            rc = grow((void **)&d->splits, &d->splits_cap, 1, sizeof *d->splits);
            if (rc) return rc;
        }
        out->splits_off = d->splits_off;
        out->splits = d->splits;
    }
    return FT_OK;
}
