/*
 * cache.c - the integer map and the plan stores of the replay engine.
 *
 * u64map: open addressing with linear probing over 64-bit integer keys (UINT64_MAX marks an
 * empty slot), load factor <= 1/2, backward-shift deletion so lookups never see tombstones.
 * plan_store: the dict store of a policy: one map over (fuser, key) for all fusers, entries in a
 * pool, and per fuser a doubly linked LRU list kept only when a capacity is set (TE's dict is
 * unbounded; --capacity N simulates an LRU-bounded variant).
 */
#include "replay_int.h"

#include <string.h>

/* ---- u64map -------------------------------------------------------------------------------- */
static int u64map_grow(u64map *m)
{
    uint32_t ncap = m->cap ? m->cap * 2 : 16;
    if (ncap < m->cap) return FT_ENOMEM;
    uint64_t *keys = ft_malloc((size_t)ncap * sizeof *keys);
    uint32_t *vals = ft_malloc((size_t)ncap * sizeof *vals);
    if (!keys || !vals) {
        ft_free(keys);
        ft_free(vals);
        return FT_ENOMEM;
    }
    memset(keys, 0xff, (size_t)ncap * sizeof *keys);
    for (uint32_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == UINT64_MAX) continue;
        uint32_t j = u64map_slot(m->keys[i], ncap);
        while (keys[j] != UINT64_MAX)
            j = (j + 1) & (ncap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    ft_free(m->keys);
    ft_free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = ncap;
    return FT_OK;
}

int u64map_put(u64map *m, uint64_t key, uint32_t val)
{
    if ((uint64_t)(m->n + 1) * 2 > m->cap) {
        int rc = u64map_grow(m);
        if (rc) return rc;
    }
    uint32_t i = u64map_slot(key, m->cap);
    while (m->keys[i] != UINT64_MAX && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    if (m->keys[i] == UINT64_MAX) m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return FT_OK;
}

void u64map_del(u64map *m, uint64_t key)
{
    if (!m->cap) return;
    uint32_t mask = m->cap - 1, i = u64map_slot(key, m->cap);
    while (m->keys[i] != key) {
        if (m->keys[i] == UINT64_MAX) return;
        i = (i + 1) & mask;
    }
    /* shift back every following key whose home slot is not in (i, j] */
    for (uint32_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        if (m->keys[j] == UINT64_MAX) break;
        uint32_t home = u64map_slot(m->keys[j], m->cap);
        int in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (in_range) continue;
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        i = j;
    }
    m->keys[i] = UINT64_MAX;
    m->n--;
}

void u64map_free(u64map *m)
{
    ft_free(m->keys);
    ft_free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- plan store ---------------------------------------------------------------------------- */
static void lru_unlink(plan_store *st, pstate *s, uint32_t i)
{
    store_entry *e = &st->e[i];
    if (e->prev != FT_NO_ENTRY)
        st->e[e->prev].next = e->next;
    else
        s->head = e->next;
    if (e->next != FT_NO_ENTRY)
        st->e[e->next].prev = e->prev;
    else
        s->tail = e->prev;
}

static void lru_push_front(plan_store *st, pstate *s, uint32_t i)
{
    store_entry *e = &st->e[i];
    e->prev = FT_NO_ENTRY;
    e->next = s->head;
    if (s->head != FT_NO_ENTRY) st->e[s->head].prev = i;
    s->head = i;
    if (s->tail == FT_NO_ENTRY) s->tail = i;
}

int store_lookup(plan_store *st, pstate *s, uint64_t key, uint32_t *plan)
{
    uint32_t i;
    if (!u64map_get(&st->index, key, &i)) return 0;
    *plan = st->e[i].plan;
    if (st->capacity && s->head != i) {
        lru_unlink(st, s, i);
        lru_push_front(st, s, i);
    }
    return 1;
}

int store_insert(plan_store *st, pstate *s, uint64_t key, uint32_t plan)
{
    uint32_t i;
    if (st->capacity && s->count >= st->capacity) {
        /* evict the least recently used plan of this fuser and reuse its entry */
        i = s->tail;
        lru_unlink(st, s, i);
        u64map_del(&st->index, st->e[i].key);
        s->count--;
        st->evictions++;
    } else if (st->free_head != FT_NO_ENTRY) {
        i = st->free_head;
        st->free_head = st->e[i].next;
    } else {
        if (st->n_e == st->cap_e) {
            uint32_t ncap = st->cap_e ? st->cap_e * 2 : 64;
            store_entry *ne = ft_realloc(st->e, (size_t)ncap * sizeof *ne);
            if (!ne) return FT_ENOMEM;
            st->e = ne;
            st->cap_e = ncap;
        }
        i = st->n_e++;
    }
    int rc = u64map_put(&st->index, key, i);
    if (rc) {
        st->e[i].next = st->free_head;
        st->free_head = i;
        return rc;
    }
    st->e[i].key = key;
    st->e[i].plan = plan;
    if (st->capacity) lru_push_front(st, s, i);
    s->count++;
    return FT_OK;
}

void store_free(plan_store *st)
{
    u64map_free(&st->index);
    ft_free(st->e);
    memset(st, 0, sizeof *st);
}
