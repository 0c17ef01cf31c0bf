/*
 * chunk_int.h - private to the chunk coder (chunk_core.c, chunk_enc.c, chunk_dec.c): the column
 * numbering, the byte and varint helpers, the split-vector coder state that the encoder and the
 * decoder keep identically, and the residual code of split sizes (chunk.h documents the format;
 * this is how the code shares it). Not part of any contract.
 *
 * What runs once per record or per value is static inline here (the helpers, the per-fuser
 * lookup, the residual code); what runs once per literal vector or per chunk is in chunk_core.c.
 */
#ifndef FT_CHUNK_INT_H
#define FT_CHUNK_INT_H

#include "chunk.h"
#include "ft_hmap.h"

#include <stdint.h>
#include <string.h>

/* Everything declared here is private to the library: hidden from libfusertrace_rec.so's
 * exported symbols, which stay the ft_* API. */
#pragma GCC visibility push(hidden)

/* The main section's columns, in stored order (chunk.h, MAIN SECTION). */
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
    C_SID, /* codec 3: an integer column of one code per FT_CF_INSTANCE record */
};

/* The main section's header: 40 bytes and a length per column (16 columns up to codec 2, 17
 * from codec 3). */
static inline uint32_t chunk_n_cols(uint32_t codec)
{
    return codec >= 3 ? 17u : 16u;
}

static inline uint32_t chunk_main_hdr(uint32_t codec)
{
    return 40u + 4u * chunk_n_cols(codec);
}

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

/* Grow *p (elements of size sz) to hold at least n; keeps contents. */
static inline int chunk_grow(void **p, size_t *cap, size_t n, size_t sz)
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

void sp_reset(sp_state *s);
void sp_free(sp_state *s);

/* The per-fuser state for this chunk (fresh on first use). */
static inline int sp_fuser_get(sp_state *s, uint32_t fuser, sp_fuser **out)
{
    if (fuser >= s->fs_cap) {
        size_t old = s->fs_cap;
        int rc = chunk_grow((void **)&s->fs, &s->fs_cap, (size_t)fuser + 1, sizeof *s->fs);
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

static inline uint64_t sp_key(uint32_t fuser, int has_mb, int64_t mb)
{
    return ft_hash_mix(((uint64_t)fuser << 1) | (uint64_t)(has_mb != 0), has_mb ? (uint64_t)mb : 0);
}

/* pred[0..k-1] for a vector of k values summing to T (chunk_core.c). */
int sp_predict(sp_state *s, const sp_fuser *f, uint32_t k, uint64_t T);
/* Fold a literal vector v[k] with sum T into the fuser's accumulator (and its top). */
int sp_update(sp_state *s, sp_fuser *f, const int64_t *v, uint32_t k, uint64_t T);

/* ---- residual code (chunk.h, SPLIT SECTION): a symbol byte plus extra bits ---------------- */
/* The codec-2 residual of split size v against pred: 0 when v is the fuser's largest size so far
 * (capacity-clipped routing piles sizes there), else 1 + zz(v - pred). */
static inline uint64_t sp_res(int64_t v, int64_t pred, uint64_t top)
{
    return top && (uint64_t)v == top - 1 ? 0 : 1 + zz(v - pred);
}

/* The two streams the encoder codes residuals into. */
typedef struct res_out {
    ft_buf sym;   /* symbols, one byte each */
    ft_buf bits;  /* extra bits, LSB first */
    uint64_t acc; /* pending extra bits (n of them, n < 8) */
    uint32_t n;
} res_out;

/* Append nb <= 56 bits to the extra-bit stream (room for 8 bytes reserved by the caller). */
static inline void bits_put(res_out *r, uint64_t v, uint32_t nb)
{
    r->acc |= v << r->n; /* bit_n < 8, nb <= 56: fits */
    r->n += nb;
    uint8_t *p = r->bits.data + r->bits.len;
    put_u64(p, r->acc);
    uint32_t nbytes = r->n >> 3;
    r->bits.len += nbytes;
    r->acc = nbytes == 8 ? 0 : r->acc >> (8 * nbytes);
    r->n &= 7;
}

/* Code u: symbol u below 16, else 16 + 4 * (bit length - 5) + the two bits after the leading
 * one, and the bit length - 3 low bits as extra bits. Room: 1 symbol byte, 16 bit bytes. */
static inline void res_put(res_out *r, uint64_t u)
{
    if (u < 16) {
        r->sym.data[r->sym.len++] = (uint8_t)u;
        return;
    }
    uint32_t b = 64 - (uint32_t)__builtin_clzll(u), nb = b - 3;
    r->sym.data[r->sym.len++] = (uint8_t)(16 + 4 * (b - 5) + ((u >> nb) & 3));
    uint64_t extra = nb == 64 ? u : u & ((1ull << nb) - 1);
    if (nb > 56) {
        bits_put(r, extra & 0xffffffffu, 32);
        bits_put(r, extra >> 32, nb - 32);
    } else {
        bits_put(r, extra, nb);
    }
}

/* Per residual symbol: the extra bits it takes and its value without them, [256] each
 * (chunk_core.c; filled on the first call). */
void chunk_res_tables(const uint8_t **nb, const uint64_t **base);

/* The nb (<= 61) extra bits at bit bpos of bits, read 8 bytes at a time (so 16 readable bytes
 * must follow the stream). */
static inline uint64_t res_extra(const uint8_t *bits, uint64_t bpos, uint32_t nb)
{
    if (nb <= 56) return (get_u64(bits + (bpos >> 3)) >> (bpos & 7)) & ((1ull << nb) - 1);
    uint64_t lo = (get_u64(bits + (bpos >> 3)) >> (bpos & 7)) & 0xffffffffu;
    uint64_t b2 = bpos + 32;
    uint64_t hi = (get_u64(bits + (b2 >> 3)) >> (b2 & 7)) & ((1ull << (nb - 32)) - 1);
    return lo | hi << 32;
}

#pragma GCC visibility pop

#endif /* FT_CHUNK_INT_H */
