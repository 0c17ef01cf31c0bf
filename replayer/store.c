/*
 * store.c - the plan stores of the replay engine (the index is an ft_hmap).
 *
 * plan_store: the dict store of a policy: one map over (owner, key) for all owners, entries in a
 * pool, and per owner a doubly linked list (replayer_int.h, "plan stores"). The owner is a fuser
 * (FT_STORE_DICT: TE's per-instance dict) or an op-list class (FT_STORE_SHARED: plans kept across
 * fusers, the what-if of docs/fuser-model.md). The list is in LRU order only when a capacity is
 * set (TE's dict is unbounded; --capacity N simulates an LRU-bounded variant); it always holds the
 * owner's entries, so that a fuser that ended gives its entries back (store_drop).
 */
#include "replayer_int.h"

#include <string.h>

/* ---- plan store ---------------------------------------------------------------------------- */
static void lru_unlink(plan_store *st, store_list *s, uint32_t i)
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

static void lru_push_front(plan_store *st, store_list *s, uint32_t i)
{
    store_entry *e = &st->e[i];
    e->prev = FT_NO_ENTRY;
    e->next = s->head;
    if (s->head != FT_NO_ENTRY) st->e[s->head].prev = i;
    s->head = i;
    if (s->tail == FT_NO_ENTRY) s->tail = i;
}

int store_lookup(plan_store *st, store_list *s, uint64_t key, uint32_t *plan)
{
    const uint32_t i = ft_hmap_get(&st->index, key);
    if (i == UINT32_MAX) return 0;
    *plan = st->e[i].plan;
    if (st->capacity && s->head != i) {
        lru_unlink(st, s, i);
        lru_push_front(st, s, i);
    }
    return 1;
}

int store_insert(plan_store *st, store_list *s, uint64_t key, uint32_t plan)
{
    uint32_t i;
    if (st->capacity && s->count >= st->capacity) {
        /* evict the least recently used plan of this fuser and reuse its entry */
        i = s->tail;
        lru_unlink(st, s, i);
        ft_hmap_del(&st->index, st->e[i].key);
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
    int rc = ft_hmap_put(&st->index, key, i);
    if (rc) {
        st->e[i].next = st->free_head;
        st->free_head = i;
        return rc;
    }
    st->e[i].key = key;
    st->e[i].plan = plan;
    lru_push_front(st, s, i);
    s->count++;
    return FT_OK;
}

void store_drop(plan_store *st, store_list *s)
{
    for (uint32_t i = s->head; i != FT_NO_ENTRY;) {
        const uint32_t next = st->e[i].next;
        ft_hmap_del(&st->index, st->e[i].key);
        st->e[i].next = st->free_head;
        st->free_head = i;
        i = next;
    }
    s->head = s->tail = FT_NO_ENTRY;
    s->count = 0;
}

void store_free(plan_store *st)
{
    ft_hmap_free(&st->index);
    ft_free(st->e);
    ft_free(st->lists);
    memset(st, 0, sizeof *st);
}
