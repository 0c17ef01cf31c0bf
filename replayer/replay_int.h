/*
 * replay_int.h - private to the replay engine (policy.c, cache.c, replay.c): the per-call inputs a
 * policy sees, its per-fuser state, the policy table row, and the integer maps the hot path uses.
 *
 * Hot-path rule: everything a policy needs per call is an integer precomputed per recipe index
 * (rinfo) or per call by the oracle pass (pcall); keys are small dense ids, never strings.
 */
#ifndef FT_REPLAY_INT_H
#define FT_REPLAY_INT_H

#include "ft_replay.h"

#include <stdint.h>

/* Key layout: a policy key is (id << FT_KEY_F_BITS) | f, and a store key prefixes the fuser:
 * (fuser << 40) | key. Limits checked in ft_replay_new. */
#define FT_KEY_F_BITS  16
#define FT_KEY_ID_BITS 24
#define FT_MAX_FUSERS  (1u << 24)
#define FT_NEVER       (-1) /* "recipe_type = None": no call seen yet (TE's initial state) */
#define FT_NO_ENTRY    UINT32_MAX

/* What every policy may read about a recipe index (index recipe + 1; 0 = no recipe). */
typedef struct rinfo {
    uint8_t type;     /* ft_recipe_type */
    uint8_t bo;       /* ft_bo */
    uint8_t delayed;  /* DelayedScaling: amax_history_len changes reset */
    int64_t hist;     /* amax_history_len, 0 unless delayed */
    int32_t tb_id;    /* dense id of (type, backward_override) */
    int32_t hash_id;  /* dense id of the canonical recipe hash (type + every attribute) */
    int32_t obj_id;   /* dense id of the object identity (no recipe: its own id) */
    int32_t objbo_id; /* dense id of (object identity, backward_override) */
    uint32_t fresh_q; /* interned quantizer state of a fresh fuser under this recipe */
} rinfo;

/* One call as the policies see it, from the oracle pass. */
typedef struct pcall {
    uint32_t fuser; /* dense fuser index */
    int32_t recipe; /* dense recipe index, -1 = none */
    uint32_t f;     /* first_op_requiring_backward (spec §1.2) */
    int32_t fa_id;  /* dense id of the fusion-attrs key (only if a policy needs it) */
} pcall;

/* A policy's state for one fuser. */
typedef struct pstate {
    int64_t saved_hist;  /* last_hist */
    uint64_t slot_key;   /* single-slot store: key of the held plan */
    int32_t saved_a;     /* reset-rule component (type/bo id, hash id, object id); FT_NEVER */
    int32_t saved_f;     /* te-pre3410: f of the held plan */
    uint32_t plan;       /* plan the last call ran */
    uint32_t q;          /* interned quantizer state */
    uint32_t head, tail; /* LRU list of this fuser's dict entries, most recent first */
    uint32_t count;      /* dict entries held */
} pstate;

typedef struct policy_def {
    const char *name;
    const char *summary;
    ft_store_kind store;
    int build_on_reset; /* single slot: every reset also rebuilds (te-pre3410, commit1) */
    int needs_fa;       /* reads pcall.fa_id */
    /* Reset rule: compare with and update s's saved components; 1 if reset_recipe_state runs. */
    int (*reset_fn)(pstate *s, const rinfo *ri, const pcall *c);
    /* Cache key within the fuser ((id << FT_KEY_F_BITS) | f, or id alone). */
    uint64_t (*key_fn)(const rinfo *ri, const pcall *c);
} policy_def;

const policy_def *ft_policy_def(uint32_t idx);

/* ---- integer map: uint64 key -> uint32 value, linear probing, backward-shift delete ------ */
typedef struct u64map {
    uint64_t *keys; /* [cap]; UINT64_MAX = empty */
    uint32_t *vals; /* [cap] */
    uint32_t cap;   /* power of two, 0 before the first put */
    uint32_t n;     /* keys held */
} u64map;

static inline uint32_t u64map_slot(uint64_t key, uint32_t cap)
{
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static inline int u64map_get(const u64map *m, uint64_t key, uint32_t *val)
{
    if (!m->cap) return 0;
    for (uint32_t i = u64map_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) {
            *val = m->vals[i];
            return 1;
        }
        if (m->keys[i] == UINT64_MAX) return 0;
    }
}

int u64map_put(u64map *m, uint64_t key, uint32_t val); /* insert or replace; FT_ENOMEM */
void u64map_del(u64map *m, uint64_t key);
void u64map_free(u64map *m);

/* ---- plan store: dict of (fuser, key) -> plan with a per-fuser LRU list ------------------- */
typedef struct store_entry {
    uint64_t key; /* store key (fuser << 40 | policy key) */
    uint32_t plan;
    uint32_t prev, next; /* LRU neighbours within the fuser, FT_NO_ENTRY at the ends */
} store_entry;

typedef struct plan_store {
    u64map index;   /* store key -> entry */
    store_entry *e; /* [n_e] pool */
    uint32_t n_e, cap_e;
    uint32_t free_head; /* free list through .next */
    uint32_t capacity;  /* per fuser; 0 = unbounded (no LRU bookkeeping) */
    uint64_t evictions;
} plan_store;

/* Look up key for fuser state s; on a hit set *plan, refresh LRU order and return 1. */
int store_lookup(plan_store *st, pstate *s, uint64_t key, uint32_t *plan);
/* Insert a freshly built plan (key not present), evicting the fuser's LRU entry at capacity. */
int store_insert(plan_store *st, pstate *s, uint64_t key, uint32_t plan);
void store_free(plan_store *st);

#endif /* FT_REPLAY_INT_H */
