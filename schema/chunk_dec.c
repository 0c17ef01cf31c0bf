/*
 * chunk_dec.c - the chunk decoder (layout: chunk.h). It must survive arbitrary bytes: every
 * length and reference is checked before use, every decoded size bounded before allocation
 * (ft_chunk_main_cap, ft_chunk_splits_cap), and FT_ECORRUPT names the chunk and what is wrong.
 * Columns decode straight into the output arrays; a few passes then undo the codes in place and
 * check every value. Split sizes (FT_READ_SPLITS) are decompressed and decoded only on request.
 */
#include "chunk_int.h"

#include <limits.h>
#include <string.h>
#include <zstd.h>

/* ---- decoder ------------------------------------------------------------------------------ */
uint64_t ft_chunk_main_cap(uint32_t n_records, uint32_t n_calls)
{
    /* header; 15 integer columns (SID included) of at most a mode byte, a width byte and a
     * 10-byte varint per value; the phase dictionary at its limits; op_rg entries (<= n_calls) of
     * a 10-byte varint plus their bitmaps, which expand to at most FT_CHUNK_MAX_OPRG_VALUES */
    return FT_CHUNK_MAIN_HDR + (uint64_t)(N_INTCOL + 1) * (2 + 10 * (uint64_t)n_records) +
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
    uint64_t charged;      /* bytes charged to the memory budget (ft_mem_charge) */
    uint8_t *main, *spbuf; /* decoded sections */
    size_t main_cap, spbuf_cap;
    uint32_t *kind32, *oprg32; /* [rec_cap] KIND and OPRG codes */
    uint64_t *bwd64;           /* [rec_cap] BWD codes */
    uint64_t *sid64;           /* [rec_cap] SID codes */
    size_t rec_cap;
    /* outputs, [rec_cap] (offset arrays [rec_cap + 1]) */
    uint8_t *kind;
    int64_t *seq, *step, *mb, *ns, *fuse_ns, *bwd_call, *ntok, *sid;
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
    ft_mem_uncharge(d->charged);
    ZSTD_freeDCtx(d->dctx);
    ft_free(d->main);
    ft_free(d->spbuf);
    ft_free(d->kind32);
    ft_free(d->oprg32);
    ft_free(d->bwd64);
    ft_free(d->sid64);
    ft_free(d->sid);
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
        {(void **)&d->bwd64, 8},      {(void **)&d->sid64, 8},    {(void **)&d->sid, 8},
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
    int rc = chunk_grow((void **)&d->phase_arena, &d->phase_arena_cap, need ? need : 1, 1);
    if (!rc)
        rc = chunk_grow((void **)&d->phases, &d->phases_cap, n_phases ? n_phases : 1,
                        sizeof *d->phases);
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
    rc = chunk_grow((void **)&d->oprg_pat, &d->oprg_pat_cap, (size_t)pat_need + 8,
                    1); /* +8: words */
    if (!rc) rc = chunk_grow((void **)&d->dict, &d->dict_cap, (size_t)n_oprg + 1, sizeof *d->dict);
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
    int rc = chunk_grow((void **)&d->splits, &d->splits_cap, pos + n + 1, sizeof *d->splits);
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
            rc = chunk_grow((void **)&d->splits, &d->splits_cap, pos + k + 1, sizeof *d->splits);
            if (!rc)
                rc = chunk_grow((void **)&s->vecs, &s->vecs_cap, s->n_vecs + 1, sizeof *s->vecs);
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

/* Decode the codec-2 split section [p, end) (chunk.h, SPLIT SECTION) into splits_off / splits.
 * The extra-bit stream is read 8 bytes at a time: the section buffer has 16 zero bytes past end. */
static __attribute__((noinline)) int dec_splits2(ft_chunk_dec *d, uint64_t id, const uint8_t *p,
                                                 const uint8_t *end, uint32_t n, ft_err *err)
{
    sp_state *s = &d->sp;
    sp_reset(s);
    const uint8_t *res_nb;
    const uint64_t *res_base;
    chunk_res_tables(&res_nb, &res_base);
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
            rc = chunk_grow((void **)&d->splits, &d->splits_cap, pos + k + 1, sizeof *d->splits);
            if (!rc)
                rc = chunk_grow((void **)&s->vecs, &s->vecs_cap, s->n_vecs + 1, sizeof *s->vecs);
            if (!rc) rc = sp_predict(s, f, k, T);
            if (rc) return rc;
            int64_t *v = d->splits + pos;
            uint64_t left = T, bad = 0;
            for (uint32_t m = 0; m + 1 < k; m++) {
                uint32_t sy = sym[m], nb = res_nb[sy];
                if (bpos + nb > nbits)
                    return CORRUPT("chunk %llu: record %u: split vector truncated",
                                   (unsigned long long)id, i);
                uint64_t x = res_extra(bits, bpos, nb);
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
    int rc = chunk_grow((void **)dst, cap, raw + 16, 1);
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

/* ---- one chunk ---------------------------------------------------------------------------- */
/* What the stored header and the main section's header say, each checked before it is used. */
typedef struct chunk_hdr {
    unsigned long long id;                   /* the chunk id, for messages */
    uint32_t codec;                          /* 1, 2 or 3 */
    uint32_t main_raw, main_z;               /* main section: decoded and stored bytes */
    uint32_t sp_raw, sp_z;                   /* split section: decoded and stored bytes */
    uint32_t n, n_calls, n_bwd, n_sid;       /* records, calls, backward, instance records */
    uint32_t n_phases, n_oprg;               /* dictionary entries */
    int64_t first_seq;                       /* seq of the first record */
    uint64_t sp_sum;                         /* XXH3-64 of the decoded split section */
    const uint8_t *col[FT_CHUNK_N_COLS + 1]; /* start of each column in the main section, its end */
} chunk_hdr;

/* The stored header against the index row and the data's length, and the decoded sizes against
 * what this many records can hold, before anything is allocated. */
static int check_stored(const ft_chunk_info *info, const uint8_t *blob, size_t len, chunk_hdr *h,
                        ft_err *err)
{
    unsigned long long id = h->id;
    uint32_t codec = info->codec;
    static const char *const zmagic[] = {"", "FTZ1", "FTZ2", "FTZ3"};
    if (codec < 1 || codec > 3)
        return CORRUPT("chunk %llu: unknown chunk codec %u (this build reads codecs 1 to 3; a "
                       "newer fusertrace may have written it)",
                       id, codec);
    if (len < FT_CHUNK_STORED_HDR || memcmp(blob, zmagic[codec], 4))
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
    if (main_raw < chunk_main_hdr(codec) || main_raw > FT_CHUNK_MAX_RAW ||
        sp_raw > FT_CHUNK_MAX_RAW || (uint64_t)main_raw + sp_raw != info->raw_bytes ||
        (sp_raw == 0) != (sp_z == 0))
        return CORRUPT("chunk %llu: section sizes %u + %u disagree with raw_bytes %llu", id,
                       main_raw, sp_raw, (unsigned long long)info->raw_bytes);
    uint64_t main_cap = ft_chunk_main_cap(info->n_records, info->n_calls);
    uint64_t sp_cap = ft_chunk_splits_cap(info->n_calls);
    if (main_raw > main_cap || sp_raw > sp_cap)
        return CORRUPT("chunk %llu: decoded sections of %u + %u bytes exceed the %llu + %llu a "
                       "chunk of %u records can hold",
                       id, main_raw, sp_raw, (unsigned long long)main_cap,
                       (unsigned long long)sp_cap, info->n_records);
    h->codec = codec;
    h->main_raw = main_raw;
    h->main_z = main_z;
    h->sp_raw = sp_raw;
    h->sp_z = sp_z;
    return FT_OK;
}

/* The main section decompressed into d->main and checked: its checksum, its header against the
 * index row, and the column lengths against the section. */
static int read_main(ft_chunk_dec *d, const ft_chunk_info *info, const uint8_t *blob, chunk_hdr *h,
                     ft_err *err)
{
    unsigned long long id = h->id;
    int rc = dec_section(d, info->id, "main", &d->main, &d->main_cap, blob + FT_CHUNK_STORED_HDR,
                         h->main_z, h->main_raw, err);
    if (rc) return rc;
    const uint8_t *m = d->main;
    if (ft_hash64(m, h->main_raw) != info->checksum)
        return CORRUPT("chunk %llu: checksum mismatch", id);
    uint32_t n = get_u32(m + 4), n_calls = get_u32(m + 8);
    int64_t first_seq = (int64_t)get_u64(m + 12);
    uint32_t n_phases = get_u32(m + 32), n_oprg = get_u32(m + 36);
    static const char *const cmagic[] = {"", "FTC1", "FTC2", "FTC3"};
    if (memcmp(m, cmagic[h->codec], 4) || n != info->n_records || n_calls != info->n_calls ||
        first_seq != info->first_seq || get_u32(m + 20) != h->sp_raw || n == 0 ||
        n > FT_CHUNK_MAX_RECORDS || n_calls > n || n_phases > FT_CHUNK_MAX_PHASES ||
        n_oprg > n_calls)
        return CORRUPT("chunk %llu: header disagrees with the chunk index", id);
    const int n_cols = (int)chunk_n_cols(h->codec);
    uint64_t off = chunk_main_hdr(h->codec);
    for (int c = 0; c < n_cols; c++) {
        h->col[c] = m + off;
        off += get_u32(m + 40 + 4 * c);
        if (off > h->main_raw) return CORRUPT("chunk %llu: column %d overruns the chunk", id, c);
    }
    if (off != h->main_raw) return CORRUPT("chunk %llu: columns do not fill the chunk", id);
    for (int c = n_cols; c <= FT_CHUNK_N_COLS; c++)
        h->col[c] = m + off; /* codecs 1 and 2: no SID column */
    h->n = n;
    h->n_calls = n_calls;
    h->n_bwd = n - n_calls; /* until the kinds are read (codec 3 has ends too) */
    h->first_seq = first_seq;
    h->sp_sum = get_u64(m + 24);
    h->n_phases = n_phases;
    h->n_oprg = n_oprg;
    return FT_OK;
}

/* The columns decoded straight into the output arrays (or small code arrays), which the passes
 * below then undo in place, and the two dictionaries. */
static int dec_columns(ft_chunk_dec *d, chunk_hdr *h, ft_err *err)
{
    int rc = dec_reserve(d, h->n);
    if (rc) return rc;
    const struct {
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
    const uint8_t *const *col = h->col;
    for (int k = 0; k < N_INTCOL; k++) {
        int c = dst[k].c;
        uint32_t cnt = c == C_BWD ? h->n_bwd : h->n;
        int bad_col = (h->codec == 1 && col[c] < col[c + 1] && col[c][0] == 3) || /* layout 3: v2 */
                      (dst[k].out32 ? get_intcol32(col[c], col[c + 1], dst[k].out32, cnt)
                                    : get_intcol64(col[c], col[c + 1], dst[k].out64, cnt));
        if (bad_col) return CORRUPT("chunk %llu: column %d is malformed", h->id, c);
        if (c == C_FLAGS && h->codec >= 3) {
            /* KIND and FLAGS are in: the ends and the instance records size BWD and SID */
            uint32_t n_bwd = 0, n_sid = 0;
            for (uint32_t i = 0; i < h->n; i++) {
                n_bwd += d->kind32[i] == FT_REC_BACKWARD;
                n_sid += (d->flags[i] >> 13) & 1;
            }
            h->n_bwd = n_bwd;
            h->n_sid = n_sid;
        }
    }
    if (h->codec >= 3 && get_intcol64(col[C_SID], col[C_SID + 1], d->sid64, h->n_sid))
        return CORRUPT("chunk %llu: column %d is malformed", h->id, C_SID);
    return dec_dicts(d, h->id, col[C_PHASES], col[C_PHASES + 1], h->n_phases, col[C_OPRGDICT],
                     col[C_OPRGDICT + 1], h->n_oprg, err);
}

/* Kinds and flags; seq strictly increasing, never past INT64_MAX. */
static int dec_kinds_seq(ft_chunk_dec *d, const chunk_hdr *h, ft_err *err)
{
    const uint32_t n = h->n;
    uint32_t bad = 0, calls = 0;
    if (h->codec < 3) {
        for (uint32_t i = 0; i < n; i++) {
            uint32_t kd = d->kind32[i], fl = d->flags[i];
            bad |= (kd >> 1) | (fl >> 13) | (kd & ((fl & ~(uint32_t)FT_CF_HAS_NS) != 0));
            d->kind[i] = (uint8_t)kd;
            calls += (kd ^ 1) & 1;
        }
    } else {
        /* calls: bits 0..14, FT_CF_NEW_FUSER only with FT_CF_INSTANCE; backward records at most
         * FT_CF_HAS_NS; ends at most FT_CF_INSTANCE */
        for (uint32_t i = 0; i < n; i++) {
            uint32_t kd = d->kind32[i], fl = d->flags[i];
            const uint32_t allowed = kd == FT_REC_CALL       ? (1u << 15) - 1u
                                     : kd == FT_REC_BACKWARD ? (uint32_t)FT_CF_HAS_NS
                                                             : (uint32_t)FT_CF_INSTANCE;
            bad |= (kd > FT_REC_END) | ((fl & ~allowed) != 0) |
                   ((fl & FT_CF_NEW_FUSER) && !(fl & FT_CF_INSTANCE));
            d->kind[i] = (uint8_t)kd;
            calls += kd == FT_REC_CALL;
        }
    }
    if (bad || calls != h->n_calls)
        return CORRUPT("chunk %llu: record kinds or flags are invalid", h->id);

    uint64_t *S = (uint64_t *)d->seq;
    if (S[0] != 0) return CORRUPT("chunk %llu: first record's seq disagrees", h->id);
    uint64_t room = (uint64_t)INT64_MAX - (uint64_t)h->first_seq, cur = (uint64_t)h->first_seq;
    S[0] = cur;
    for (uint32_t i = 1; i < n; i++) {
        uint64_t sd = S[i];
        if (sd >= room) return CORRUPT("chunk %llu: record %u: seq overflows", h->id, i);
        room -= sd + 1;
        cur += sd + 1;
        S[i] = cur;
    }
    return FT_OK;
}

/* References: fuser, recipe, device, phase (backward records hold 0 codes; a record without a
 * phase repeats the previous code, 0 before any, so only HAS_PHASE needs an entry); then op_rg,
 * whose dictionary entry 0 is the empty pattern of backward records. */
static int dec_refs(ft_chunk_dec *d, const chunk_hdr *h, const ft_chunk_limits *lim, ft_err *err)
{
    const uint32_t n = h->n, n_phases = h->n_phases;
    uint32_t nf = lim->n_fusers, nr = lim->n_recipes, np = n_phases ? n_phases : 1, bad = 0;
    uint32_t *RE = (uint32_t *)d->recipe, *DV = (uint32_t *)d->device, *PH = (uint32_t *)d->phase;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t kd = d->kind32[i], fl = d->flags[i], fu = d->fuser[i], re = RE[i], dv = DV[i];
        uint32_t ph = PH[i], bwd = kd == FT_REC_BACKWARD;
        bad |= ((fu >= nf) & !bwd) | ((fu != 0) & bwd) | (re > nr) |
               ((re != 0) != ((fl >> 12) & 1)) | ((dv != 0) & (kd != 0)) | (ph >= np) |
               (((fl & FT_CF_HAS_PHASE) != 0) & (ph >= n_phases));
        d->recipe[i] = (int32_t)re - 1;
        d->device[i] = (int32_t)((dv >> 1) ^ (~(dv & 1) + 1));
        d->phase[i] = (fl & FT_CF_HAS_PHASE) ? (int32_t)ph : -1;
    }
    if (bad) return CORRUPT("chunk %llu: a fuser, recipe, device or phase is out of range", h->id);

    size_t oppos = 0;
    int rc = chunk_grow((void **)&d->op_rg, &d->op_rg_cap, 16, 1);
    if (rc) return rc;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t op = d->oprg32[i];
        if (op > h->n_oprg)
            return CORRUPT("chunk %llu: record %u: op_rg index out of range", h->id, i);
        const dict_ent *de = &d->dict[op];
        uint32_t want = d->kind[i] ? 0 : lim->fuser_n_ops[d->fuser[i]];
        if (de->n_ops != want || (d->kind[i] && op))
            return CORRUPT("chunk %llu: record %u: op_rg pattern does not fit its fuser", h->id, i);
        if (oppos + de->n_ops + 8 > d->op_rg_cap) { /* +8: room for the word copy below */
            if (oppos + de->n_ops > FT_CHUNK_MAX_OPRG_VALUES)
                return CORRUPT("chunk %llu: too many op_rg values", h->id);
            rc = chunk_grow((void **)&d->op_rg, &d->op_rg_cap, oppos + de->n_ops + 8, 1);
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
    return FT_OK;
}

/* Running values (absent fields carry code 0, so plain prefix sums keep the last value), then
 * each backward record's call seq; the split section must be there exactly when a call has
 * split sizes. */
static int dec_running(ft_chunk_dec *d, const chunk_hdr *h, ft_err *err)
{
    const uint32_t n = h->n;
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
    if (neg) return CORRUPT("chunk %llu: negative token count", h->id);

    uint32_t bwds = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (d->kind[i] != FT_REC_BACKWARD) {
            d->bwd_call[i] = -1;
            continue;
        }
        uint64_t bd = d->bwd64[bwds++];
        if (bd >= (uint64_t)d->seq[i] - (uint64_t)INT64_MIN)
            return CORRUPT("chunk %llu: record %u: backward call seq out of range", h->id, i);
        d->bwd_call[i] = (int64_t)((uint64_t)d->seq[i] - 1 - bd);
    }
    if ((n_splits_calls == 0) != (h->sp_raw == 0))
        return CORRUPT("chunk %llu: split section disagrees with the records", h->id);
    return FT_OK;
}

/* Every call's and end's fuser stream id: a compact instance's from the SID column (chunk.h),
 * any other's from its fusers row. */
static void dec_sids(ft_chunk_dec *d, const chunk_hdr *h, const ft_chunk_limits *lim)
{
    const int64_t *FS = lim->fuser_sid;
    uint64_t newest = UINT64_MAX;
    uint32_t k = 0;
    for (uint32_t i = 0; i < h->n; i++) {
        const uint32_t fl = d->flags[i];
        if (d->kind[i] == FT_REC_BACKWARD) {
            d->sid[i] = 0;
        } else if (!(fl & FT_CF_INSTANCE)) {
            d->sid[i] = FS ? FS[d->fuser[i]] : 0;
        } else if (fl & FT_CF_NEW_FUSER) {
            newest += 1 + (uint64_t)unzz(d->sid64[k++]);
            d->sid[i] = (int64_t)newest;
        } else {
            d->sid[i] = (int64_t)(newest - (uint64_t)unzz(d->sid64[k++]));
        }
    }
}

/* The decoded columns as the batch (arrays owned by d). */
static void fill_batch(const ft_chunk_dec *d, const ft_chunk_info *info, const chunk_hdr *h,
                       ft_batch *out)
{
    out->chunk_id = info->id;
    out->n = h->n;
    out->kind = d->kind;
    out->seq = d->seq;
    out->fuser = d->fuser;
    out->sid = d->sid;
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
    out->n_phases = h->n_phases;
    out->ns = d->ns;
    out->fuse_ns = d->fuse_ns;
    out->bwd_call = d->bwd_call;
    out->n_tokens = d->ntok;
}

/* The split section decompressed, checked against its checksum and decoded into the batch. */
static int read_splits(ft_chunk_dec *d, const ft_chunk_info *info, const uint8_t *blob,
                       const chunk_hdr *h, ft_batch *out, ft_err *err)
{
    int rc;
    if (h->sp_raw) {
        rc = dec_section(d, info->id, "split", &d->spbuf, &d->spbuf_cap,
                         blob + FT_CHUNK_STORED_HDR + h->main_z, h->sp_z, h->sp_raw, err);
        if (rc) return rc;
        if (ft_hash64(d->spbuf, h->sp_raw) != h->sp_sum)
            return CORRUPT("chunk %llu: split section checksum mismatch", h->id);
        rc = (h->codec == 1 ? dec_splits : dec_splits2)(d, info->id, d->spbuf, d->spbuf + h->sp_raw,
                                                        h->n, err);
    } else {
        static const uint8_t none[1];
        rc = (h->codec == 1 ? dec_splits : dec_splits2)(d, info->id, none, none, h->n, err);
    }
    if (rc) return rc;
    if (!d->splits) {
        rc = chunk_grow((void **)&d->splits, &d->splits_cap, 1, sizeof *d->splits);
        if (rc) return rc;
    }
    out->splits_off = d->splits_off;
    out->splits = d->splits;
    return FT_OK;
}

/* Charge the memory budget for what decoding the chunk makes d hold (a decoder keeps its
 * largest chunk's buffers): its decoded sections twice (the buffers grow by doubling) and 256
 * bytes per record (about 120 in the record columns, the rest op_rg, splits and phases). */
static int charge(ft_chunk_dec *d, const ft_chunk_info *info, const chunk_hdr *h,
                  unsigned read_flags, ft_err *err)
{
    const uint64_t sections =
        h->main_raw + ((read_flags & (FT_READ_SPLITS | FT_READ_CHECK_SPLITS)) ? h->sp_raw : 0);
    const uint64_t need = 2 * sections + 256 * (uint64_t)info->n_records;
    if (need <= d->charged) return FT_OK;
    uint64_t held = 0;
    if (ft_mem_charge(need - d->charged, &held))
        return ft_err_set(err, FT_ENOMEM,
                          "chunk %llu: decoding it takes %.1f MB more, and the trace readers hold "
                          "%.1f MB of the memory budget of %.1f MB (--memory)",
                          h->id, (double)(need - d->charged) / 1e6, (double)held / 1e6,
                          (double)ft_mem_budget() / 1e6);
    d->charged = need;
    return FT_OK;
}

int ft_chunk_decode(ft_chunk_dec *d, const ft_chunk_info *info, const void *data, size_t len,
                    const ft_chunk_limits *lim, unsigned read_flags, ft_batch *out, ft_err *err)
{
    const uint8_t *blob = data;
    chunk_hdr h = {.id = (unsigned long long)info->id};
    memset(out, 0, sizeof *out);
    int rc = check_stored(info, blob, len, &h, err);
    if (!rc) rc = charge(d, info, &h, read_flags, err);
    if (!rc) rc = read_main(d, info, blob, &h, err);
    if (!rc) rc = dec_columns(d, &h, err);
    if (!rc) rc = dec_kinds_seq(d, &h, err);
    if (!rc) rc = dec_refs(d, &h, lim, err);
    if (!rc) rc = dec_running(d, &h, err);
    if (rc) return rc;
    dec_sids(d, &h, lim);
    fill_batch(d, info, &h, out);
    if (read_flags & FT_READ_SPLITS) return read_splits(d, info, blob, &h, out, err);
    if ((read_flags & FT_READ_CHECK_SPLITS) && h.sp_raw) { /* the bytes checked, not decoded */
        rc = dec_section(d, info->id, "split", &d->spbuf, &d->spbuf_cap,
                         blob + FT_CHUNK_STORED_HDR + h.main_z, h.sp_z, h.sp_raw, err);
        if (!rc && ft_hash64(d->spbuf, h.sp_raw) != h.sp_sum)
            rc = CORRUPT("chunk %llu: split section checksum mismatch", h.id);
    }
    return rc;
}
