/*
 * ft_hmap.h - the project's integer map: 64-bit keys (any value) to 32-bit values (any value but
 * UINT32_MAX, which marks an empty slot). Open addressing with linear probing, power-of-two
 * capacity, load <= 1/2, backward-shift deletion, one multiply per hash. The one integer map of
 * the project: whoever needs integer keys uses it. In-memory only: nothing depends on its
 * iteration order.
 */
#ifndef FT_HMAP_H
#define FT_HMAP_H

#include "ft_common.h"

#include <stdint.h>
#include <string.h>

typedef struct ft_hmap {
    uint64_t *keys; /* [cap] */
    uint32_t *vals; /* [cap] UINT32_MAX = empty slot */
    uint32_t cap;   /* power of two, 0 before the first insert */
    uint32_t n;     /* occupied slots */
} ft_hmap;

/* Fibonacci hashing: one multiply (the replay loop looks keys up per call); the keys are ids,
 * packed ids or already-mixed hashes. */
static inline uint32_t ft_hmap_slot(uint64_t key, uint32_t cap)
{
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

/* Value for key, or UINT32_MAX when absent. */
static inline uint32_t ft_hmap_get(const ft_hmap *m, uint64_t key)
{
    if (!m->cap) return UINT32_MAX;
    for (uint32_t i = ft_hmap_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->vals[i] == UINT32_MAX) return UINT32_MAX;
        if (m->keys[i] == key) return m->vals[i];
    }
}

static inline void ft_hmap_clear(ft_hmap *m)
{
    if (m->cap) memset(m->vals, 0xff, (size_t)m->cap * sizeof *m->vals);
    m->n = 0;
}

static inline void ft_hmap_free(ft_hmap *m)
{
    ft_free(m->keys);
    ft_free(m->vals);
    memset(m, 0, sizeof *m);
}

static inline void ft_hmap_put_slot(ft_hmap *m, uint64_t key, uint32_t val)
{
    for (uint32_t i = ft_hmap_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->vals[i] == UINT32_MAX) {
            m->keys[i] = key;
            m->vals[i] = val;
            m->n++;
            return;
        }
        if (m->keys[i] == key) {
            m->vals[i] = val;
            return;
        }
    }
}

/* Insert or replace (val != UINT32_MAX). FT_ENOMEM leaves the map unchanged. */
static inline int ft_hmap_put(ft_hmap *m, uint64_t key, uint32_t val)
{
    if ((uint64_t)(m->n + 1) * 2 > m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 64;
        if (cap < m->cap) return FT_ENOMEM;
        uint64_t *keys = ft_malloc((size_t)cap * sizeof *keys);
        uint32_t *vals = ft_malloc((size_t)cap * sizeof *vals);
        if (!keys || !vals) {
            ft_free(keys);
            ft_free(vals);
            return FT_ENOMEM;
        }
        memset(vals, 0xff, (size_t)cap * sizeof *vals);
        ft_hmap old = *m;
        m->keys = keys;
        m->vals = vals;
        m->cap = cap;
        m->n = 0;
        for (uint32_t i = 0; i < old.cap; i++)
            if (old.vals[i] != UINT32_MAX) ft_hmap_put_slot(m, old.keys[i], old.vals[i]);
        ft_free(old.keys);
        ft_free(old.vals);
    }
    ft_hmap_put_slot(m, key, val);
    return FT_OK;
}

/* Remove key if present, shifting back the keys that probed past its slot. */
static inline void ft_hmap_del(ft_hmap *m, uint64_t key)
{
    if (!m->cap) return;
    const uint32_t mask = m->cap - 1;
    uint32_t i = ft_hmap_slot(key, m->cap);
    while (m->keys[i] != key || m->vals[i] == UINT32_MAX) {
        if (m->vals[i] == UINT32_MAX) return;
        i = (i + 1) & mask;
    }
    for (uint32_t j = (i + 1) & mask; m->vals[j] != UINT32_MAX; j = (j + 1) & mask) {
        const uint32_t home = ft_hmap_slot(m->keys[j], m->cap);
        const int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays) continue;
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        i = j;
    }
    m->vals[i] = UINT32_MAX;
    m->n--;
}

#endif /* FT_HMAP_H */
