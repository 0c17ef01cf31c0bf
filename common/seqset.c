/*
 * seqset.c - ft_seqset (ft_seqset.h): strictly increasing int64 values as delta varints in
 * blocks, with a ring of the most recent values.
 */
#include "ft_seqset.h"

#include <string.h>

int ft_seqset_add(ft_seqset *s, int64_t v)
{
    if (!s->n_blk || s->in_last == FT_SEQSET_BLOCK) {
        if (s->n_blk == s->cap) {
            size_t nc = s->cap ? s->cap * 2 : 64;
            ft_seqset_block *q = ft_realloc(s->blk, nc * sizeof *q);
            if (!q) return FT_ENOMEM;
            s->blk = q;
            s->cap = nc;
        }
        s->blk[s->n_blk++] = (ft_seqset_block){v, s->bytes.len};
        s->in_last = 1;
    } else {
        uint8_t tmp[10];
        size_t n = 0;
        uint64_t d = (uint64_t)v - (uint64_t)s->last;
        while (d >= 0x80) {
            tmp[n++] = (uint8_t)(d | 0x80);
            d >>= 7;
        }
        tmp[n++] = (uint8_t)d;
        int rc = ft_buf_append(&s->bytes, tmp, n);
        if (rc) return rc;
        s->in_last++;
    }
    s->last = v;
    s->recent[s->n++ & (FT_SEQSET_RECENT - 1)] = v;
    return FT_OK;
}

int ft_seqset_has(const ft_seqset *s, int64_t v)
{
    if (!s->n_blk || v < s->blk[0].first || v > s->last) return 0;
    uint64_t n_recent = s->n < FT_SEQSET_RECENT ? s->n : FT_SEQSET_RECENT;
    uint64_t lo_i = s->n - n_recent; /* logical indices [lo_i, n) are in the ring */
    if (v >= s->recent[lo_i & (FT_SEQSET_RECENT - 1)]) {
        uint64_t lo = lo_i, hi = s->n;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            int64_t x = s->recent[mid & (FT_SEQSET_RECENT - 1)];
            if (x == v) return 1;
            if (x < v)
                lo = mid + 1;
            else
                hi = mid;
        }
        return 0;
    }
    size_t lo = 0, hi = s->n_blk; /* the last block with first <= v */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (s->blk[mid].first <= v)
            lo = mid;
        else
            hi = mid;
    }
    int64_t x = s->blk[lo].first;
    size_t p = s->blk[lo].off, end = lo + 1 < s->n_blk ? s->blk[lo + 1].off : s->bytes.len;
    while (x < v && p < end) {
        uint64_t d = 0;
        for (int sh = 0; p < end && sh < 64; sh += 7) {
            uint8_t b = s->bytes.data[p++];
            d |= (uint64_t)(b & 0x7f) << sh;
            if (b < 0x80) break;
        }
        x = (int64_t)((uint64_t)x + d);
    }
    return x == v;
}

void ft_seqset_free(ft_seqset *s)
{
    ft_buf_free(&s->bytes);
    ft_free(s->blk);
    memset(s, 0, sizeof *s);
}
