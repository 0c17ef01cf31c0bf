/*
 * chunk_core.c - what the chunk encoder and decoder share (chunk_int.h): the split-vector
 * coder's state, its prediction and accumulators, which both sides must compute with exactly the
 * same integer arithmetic, and the residual symbol tables.
 */
#include "chunk_int.h"

#include <threads.h>

/* ---- split-vector coder state ------------------------------------------------------------- */
void sp_reset(sp_state *s)
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

void sp_free(sp_state *s)
{
    ft_free(s->fs);
    ft_free(s->acc);
    ft_free(s->vecs);
    ft_free(s->pred);
    ft_hmap_free(&s->key_map);
    ft_hmap_free(&s->dict_map);
    memset(s, 0, sizeof *s);
}

/* pred[0..k-1] for a vector of k values summing to T: T * acc[i] / acc_total in 31-bit fixed
 * point (one division per vector). Encoder and decoder share this exact integer arithmetic. */
int sp_predict(sp_state *s, const sp_fuser *f, uint32_t k, uint64_t T)
{
    int rc = chunk_grow((void **)&s->pred, &s->pred_cap, k ? k : 1, sizeof *s->pred);
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

/* Fold a literal vector v[k] with sum T into the fuser's accumulator (and its top). */
int sp_update(sp_state *s, sp_fuser *f, const int64_t *v, uint32_t k, uint64_t T)
{
    if (T > PRED_T_LIMIT || k == 0) return FT_OK;
    for (uint32_t i = 0; i < k; i++)
        f->top = (uint64_t)v[i] >= f->top ? (uint64_t)v[i] + 1 : f->top;
    if (f->acc_k != k) {
        int rc = chunk_grow((void **)&s->acc, &s->acc_cap, s->acc_len + k, sizeof *s->acc);
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

/* ---- residual symbols --------------------------------------------------------------------- */
/* Per residual symbol: extra bits and the value without them (chunk.h, SPLIT SECTION). */
static uint8_t res_nb[256];
static uint64_t res_base[256];
static once_flag res_once = ONCE_FLAG_INIT;

static void res_fill(void)
{
    for (uint32_t sy = 0; sy < 256; sy++) {
        uint32_t t = sy - 16, nb = sy < 16 ? 0 : 2 + (t >> 2);
        res_nb[sy] = (uint8_t)nb;
        res_base[sy] = sy < 16 ? sy : (uint64_t)(4 | (t & 3)) << nb; /* nb <= 61: fits */
    }
}

void chunk_res_tables(const uint8_t **nb, const uint64_t **base)
{
    call_once(&res_once, res_fill);
    *nb = res_nb;
    *base = res_base;
}
