/*
 * replayer_int.h - private to the replayer (policy.c, policy_spec.c, store.c, engine.c, slots.c,
 * driver.c, result.c): the per-call inputs a policy sees, its per-fuser state, the policy table
 * row, a user policy's spec and per-engine ids, and the integer maps the hot path uses.
 *
 * Hot-path rule: everything a policy needs per call is an integer precomputed per recipe index
 * (rinfo) or per call by the oracle pass (pcall); keys are small dense ids, never strings.
 */
#ifndef FT_REPLAYER_INT_H
#define FT_REPLAYER_INT_H

#include "ft_hmap.h"
#include "ft_replayer.h"

#include <stdint.h>

/* Key layout: a policy key is (id << FT_KEY_F_BITS) | f, and a store key prefixes the fuser:
 * (fuser << 40) | key. Limits checked in ft_replay_new. */
#define FT_KEY_F_BITS  16
#define FT_KEY_ID_BITS 24
#define FT_MAX_FUSERS  (1u << 24)
#define FT_MAX_SLOTS   (1u << 24) /* fuser states alive at once (a dict store key prefixes one) */
#define FT_NEVER       (-1)       /* "recipe_type = None": no call seen yet (TE's initial state) */
#define FT_NO_ENTRY    UINT32_MAX
#define FT_SLOT_ENDED  (UINT32_MAX - 1) /* row_slot: the instance ended */
#define FT_NO_SB       0xffffu          /* ccall.sb: no step bucket */

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

/* One call of the current batch after the oracle pass (32 bytes: one stream for the loops). */
typedef struct ccall {
    uint32_t fuser;     /* dense fuser index of its declaration (a compact instance's template) */
    uint32_t slot;      /* the instance's state (slots.c) */
    int32_t recipe;     /* dense recipe index, -1 = none */
    uint32_t fresh;     /* oracle plan */
    int32_t fa;         /* fusion-attrs id (0 unless a policy needs it) */
    uint32_t i;         /* position in the batch */
    uint16_t f;         /* boundary (< 2^16 - 1: ft_replay_new checks op counts) */
    uint16_t sb;        /* step bucket, FT_NO_SB when the call has no step */
    uint8_t tok;        /* token class | (backward runs) << 2 */
    uint8_t cap;        /* captured: 1 = has `rebuilt`, 2 = rebuilt */
    uint8_t match;      /* the call passes the filter (1 when there is none) */
    uint8_t fresh_slot; /* the instance's first call: every policy starts its state here */
} ccall;
_Static_assert(sizeof(ccall) == 32, "ccall is 32 bytes");

/* One call as the policies see it, from the oracle pass. */
typedef struct pcall {
    uint32_t fuser; /* dense fuser index */
    int32_t recipe; /* dense recipe index, -1 = none */
    uint32_t f;     /* first_op_requiring_backward (ft_te_boundary) */
    int32_t fa_id;  /* dense id of the fusion-attrs key (only if a policy needs it) */
    uint32_t kid;   /* user policies: dense id of the key's fields other than f */
    int32_t rid;    /* user policies: dense id of the reset rule's fields other than f */
} pcall;

/* The last stale classification a fuser's policy state saw (front of the class memo). */
typedef struct class_cache {
    uint32_t plan, fresh, q;
    int32_t recipe;
    uint8_t tok, stale;
    uint32_t memo; /* its class_memo entry */
} class_cache;

/* The plans a store holds for one owner (a fuser's dict, or one op-list class's shared dict): a
 * doubly linked list through store_entry, most recently used first. */
typedef struct store_list {
    uint32_t head, tail; /* FT_NO_ENTRY when empty */
    uint32_t count;      /* entries held */
} store_list;

/* A policy's state for one fuser. */
typedef struct pstate {
    int64_t saved_hist; /* last_hist */
    uint64_t slot_key;  /* single-slot store: key of the held plan */
    int32_t saved_a;    /* reset-rule component (type/bo id, hash id, object id); FT_NEVER */
    int32_t saved_f;    /* te-pre3410: f of the held plan */
    uint32_t plan;      /* plan the last call ran */
    uint32_t q;         /* interned quantizer state */
    store_list lst;     /* this fuser's dict entries (FT_STORE_DICT) */
    uint8_t mru_in[2];  /* FT_STORE_DICT: mru_key[k] is in the store too (else only here) */
    /* front caches of the hot path */
    uint64_t mru_key[2]; /* unbounded dict store: the two most recent keys and their plans */
    uint32_t mru_plan[2];
    class_cache cc[2];   /* last stale classification, by whether the backward runs */
    uint32_t last_fuser; /* the fuser of the instance that last used this state (class_cache) */
    uint32_t grp;        /* the instance's label group (index into policy_run.gbuilds) */
} pstate;
_Static_assert(sizeof(pstate) == 128, "pstate is indexed by a shift");

typedef int (*policy_loop_fn)(ft_replay *r, uint32_t p, const ft_batch *b, ft_err *err);

/* ---- a policy as a spec (policy_spec.c, docs/policies.md) ----------------------------------- */
/* The fields a key or a reset rule is made of. Per recipe: type, object, hash, attr:NAME, bo,
 * hist, env:KEY (the trace's env, so constant within a replay); per fuser and recipe: fusion;
 * per fuser: ops; per call: f, device. */
enum {
    SF_TYPE = 0,
    SF_OBJECT,
    SF_HASH,
    SF_ATTR,
    SF_FUSION,
    SF_F,
    SF_BO,
    SF_HIST,
    SF_DEVICE,
    SF_ENV,
    SF_OPS,
    SF_COUNT
};
#define FT_SPEC_MAX_TERMS 16 /* fields in one key or reset rule */
#define FT_SPEC_NAME_MAX  64 /* a policy name, an attribute or env key name, with its NUL */
#define FT_SPEC_TEXT_MAX  640

typedef struct spec_term {
    uint8_t field;               /* SF_* */
    char name[FT_SPEC_NAME_MAX]; /* attr:NAME, env:KEY; "" otherwise */
} spec_term;

typedef struct spec_fields {
    uint32_t n;
    uint32_t bits; /* 1u << SF_* of every term */
    spec_term t[FT_SPEC_MAX_TERMS];
} spec_fields;

enum { SPEC_RESET_FIELDS = 0, SPEC_RESET_ALWAYS };

typedef struct policy_spec {
    spec_fields key;
    spec_fields reset;      /* SPEC_RESET_FIELDS: reset when any of them changes */
    uint8_t reset_rule;     /* SPEC_RESET_* */
    uint8_t store;          /* ft_store_kind (FT_STORE_SHARED: the replayer's shared store) */
    uint8_t build_on_reset; /* every reset builds (and replaces the key's plan) */
    uint32_t capacity;      /* lru:N, shared-lru:N; 0 = unbounded (--capacity applies) */
} policy_spec;

/* A policy's row: what the engine and the reports read. A built-in's reset rule, key and store
 * are the arguments its loop was instantiated with (POLICIES in policy.c), and its spec says the
 * same in the vocabulary of docs/policies.md (the tests prove they decide alike); a user policy's
 * row points at its parsed spec, and its loop interprets it. */
typedef struct policy_def {
    const char *name;
    const char *summary;     /* one line: key, reset rule, store */
    const char *note;        /* the reports' note ("historical: ...", "baseline: ..."), or NULL */
    const char *label;       /* "baseline", "historical", "what-if", "user-defined", or NULL */
    const char *spec;        /* the policy in the spec vocabulary: "KEY;store=...;reset=..." */
    int te_ref;              /* the ft_te_ref whose plan cache it reproduces, -1 none */
    int needs_fa;            /* reads pcall.fa_id */
    ft_store_kind store;     /* where its plans live */
    const policy_spec *user; /* a user policy's spec; NULL for a built-in */
    /* The per-batch loop, specialised for this policy's reset rule, key and store. */
    policy_loop_fn loop_fn;
} policy_def;

#define FT_QDIRECT 64 /* quantizer states with a direct transition row */

const policy_def *ft_policy_def(uint32_t idx);
/* The built-ins' rows (policy.c) and the user policies' (policy_spec.c). */
uint32_t policy_n_builtin(void);
uint32_t spec_n_user(void);
const policy_def *spec_user_def(uint32_t i);
/* Parse the spec text after "NAME=" into *out (errors name the clause and list the vocabulary). */
int spec_parse(const char *text, size_t len, policy_spec *out, ft_err *err);

/* ---- results (result.c) -------------------------------------------------------------------- */
/* Halve a step histogram's resolution: bucket b takes buckets 2b and 2b+1. */
void replay_step_fold(ft_step_hist *s);
/* Count text (TE's error message) among the few kept texts. */
void replay_add_raise_text(ft_raise_text *t, const char *text, uint64_t count);

/* ---- plan stores (store.c) ------------------------------------------------------------------
 * One map from store key to plan per policy, entries in a pool, each on its owner's list:
 *   FT_STORE_DICT    owner = the fuser: key (fuser state << 40 | policy key);
 *   FT_STORE_SHARED  owner = the fuser's op-list class: key (class << 40 | policy key), so that
 *                    every fuser with the same ops (TE's transient OperationFuser([op]) per call
 *                    of a standalone op) finds the plans the others built.
 * With a capacity the owner's list is kept in LRU order and its least recently used entry is
 * evicted; without one, lookups leave the order alone (the list serves store_drop only). */
typedef struct store_entry {
    uint64_t key; /* store key (owner << 40 | policy key) */
    uint32_t plan;
    uint32_t prev, next; /* neighbours within the owner's list, FT_NO_ENTRY at the ends */
} store_entry;

typedef struct plan_store {
    ft_hmap index;  /* store key -> entry */
    store_entry *e; /* [n_e] pool */
    uint32_t n_e, cap_e;
    uint32_t free_head; /* free list through .next */
    uint32_t capacity;  /* per owner; 0 = unbounded */
    uint64_t evictions;
    store_list *lists; /* FT_STORE_SHARED: [n_lists] one list per op-list class */
    uint32_t n_lists;
} plan_store;

/* Look up key on owner list l; on a hit set *plan, refresh LRU order and return 1. */
int store_lookup(plan_store *st, store_list *l, uint64_t key, uint32_t *plan);
/* Insert a freshly built plan (key not present), evicting l's LRU entry at capacity. */
int store_insert(plan_store *st, store_list *l, uint64_t key, uint32_t plan);
/* Store plan under key on owner list l, replacing the plan held there or inserting it (a build
 * on reset). */
int store_put(plan_store *st, store_list *l, uint64_t key, uint32_t plan);
/* Remove every entry of owner list l (a fuser that ended: its state is reused). */
void store_drop(plan_store *st, store_list *l);
void store_free(plan_store *st);

/* ---- engine state (engine.c owns it; the policy loops in policy.c read it) ------------------ */
typedef struct oracle_mru {
    int32_t recipe[2]; /* two recent (recipe, f) of this fuser and their plans; -2 = empty */
    uint32_t f[2];
    uint32_t plan[2];
    int32_t fa_recipe; /* last recipe whose fusion-attrs id is in fa_id; -2 = none */
    int32_t fa_id;
    uint8_t spare[9];
    uint8_t victim; /* the slot a miss replaces (the one not used last) */
    uint32_t n_ops; /* the op list's op count */
    int8_t raises[2]
                 [8]; /* per MRU slot and token byte: the fresh plan raises (1), not (0), ? (-1) */
} oracle_mru;
_Static_assert(sizeof(oracle_mru) == 64, "oracle_mru is indexed by a shift");

/* What the engine keeps per live fuser instance beyond the policies' pstates (slots.c). */
typedef struct slot_info {
    uint32_t row;        /* the fusers row it was declared as (a compact instance's template) */
    uint32_t grp;        /* its label group's stats (ft_replay.gstat) */
    int32_t prev_recipe; /* previous call's recipe and f (causes); prev_seen 0 = first sight */
    uint32_t prev_f;
    uint32_t prev_fuser; /* the declaration (fusers row) that made it: another after an `of` */
    uint8_t prev_seen;
} slot_info;

/* One label group (fusers that share a label and an op list): what the reports group transient
 * fusers by (a group of two or more instances). */
typedef struct group_stat {
    uint32_t row;           /* its first instance's fusers row (label) */
    uint64_t fusers, calls; /* instances called, their calls (counted) */
} group_stat;

typedef struct class_memo {
    uint32_t fuser, chosen, q, fresh; /* fuser: the op-list class */
    int32_t recipe;
    int tok_class;
    ft_stale stale;
    const char *text;                /* TE's error text (model-owned) */
    uint64_t count[FT_MAX_POLICIES]; /* calls per policy slot that hit this entry */
} class_memo;

/* ---- a user policy in one engine (policy_spec.c) -------------------------------------------- */
/* The front cache of a user policy's per-call ids, per fuser: its last (recipe, device). */
typedef struct user_ids {
    int32_t recipe; /* -2: none yet */
    int32_t dev;
    uint32_t kid;
    int32_t rid;
} user_ids;

/* What the interpreted loop reads: per-recipe ids of the spec's per-recipe fields, and, when the
 * key or the reset rule reads fusion, device or ops, their combinations interned per call (a
 * front cache per fuser, two exact integer maps behind it). No strings per call. */
typedef struct user_run {
    int32_t *rk, *rr;         /* [n_recipes + 1] key's / reset's per-recipe fields, dense ids */
    user_ids *cache;          /* [n_fusers] (percall only) */
    ft_hmap kmap[2], rmap[2]; /* (id, fusion) -> id, then (id, device, ops) -> id */
    uint8_t key_f, reset_f;   /* f is in the key / the reset rule */
    uint8_t reset_always;
    uint8_t percall; /* some field is per call beyond f (fusion, device, ops) and is combined
                      * with others; a key of fusion (and f) alone is not (key_fa then says so) */
    uint8_t key_fa, key_dev, key_ops; /* which of them the key reads */
    uint8_t reset_fa, reset_dev, reset_ops;
} user_run;

typedef struct policy_run {
    const policy_def *def;
    uint32_t idx;      /* registry index */
    pstate *st;        /* [cap_slots] per live fuser instance */
    plan_store store;  /* dict policies */
    uint64_t *gbuilds; /* [cap_gstat] builds per label group */
    ft_policy_result res;
    user_run u;             /* user policies only */
    uint8_t store_kind;     /* user policies: ft_store_kind */
    uint8_t build_on_reset; /* user policies */
} policy_run;

struct ft_replay {
    ft_model *model;
    const ft_fuser_def *fusers;
    const ft_recipe_def *recipes;
    uint32_t n_fusers, n_recipes;
    uint32_t *n_ops; /* [n_fusers] */
    uint32_t *inst;  /* [n_fusers] the fuser whose plan-cache state a fuser uses: itself, or the
                        first declaration of its instance when its op attributes changed */
    uint32_t *cls;   /* [n_fusers] its op-list class (ft_model_fuser_list) */
    uint32_t n_lists;
    rinfo *ri;       /* [n_recipes + 1], index recipe + 1 */
    oracle_mru *mru; /* [n_lists] the fresh plans of each op-list class */
    /* live fuser instances (slots.c): a slot each, allocated at its first call and given back
     * after its end, so memory follows the fusers alive, not those declared */
    uint32_t *row_slot; /* [n_fusers] by instance (inst): its slot, FT_NO_ENTRY before its
                           first call, FT_SLOT_ENDED after its end */
    uint32_t *row_grp;  /* [n_fusers] its label group */
    uint32_t *grp_stat; /* [n_groups] index into gstat, FT_NO_ENTRY until a call */
    uint32_t n_groups;
    group_stat *gstat; /* [n_gstat] the groups that have calls */
    uint32_t n_gstat, cap_gstat;
    slot_info *slot;             /* [cap_slots] */
    uint32_t n_slots, cap_slots; /* slots ever handed out (high water), allocated */
    uint32_t *free_slots;        /* [n_free] given back */
    uint32_t n_free, cap_free;
    struct slot_end {
        uint32_t pos;  /* calls of the batch before the end */
        uint32_t slot; /* the ended instance's */
    } * ending;        /* [n_ending] the batch's fuser ends, in order: each policy loop gives
                          the slot's dict entries back at pos (the slot may serve a later call) */
    uint32_t n_ending, cap_ending;
    ft_hmap inst_slot; /* stream id of a live compact instance -> slot */
    int64_t last_sid;  /* front cache of inst_slot: the last compact instance named */
    uint32_t last_sid_slot;
    uint64_t n_compact;        /* compact instances declared so far */
    uint64_t n_live, max_live; /* instances alive (called, not ended), the most at once */
    /* memo tables */
    ft_hmap fa_memo; /* (fuser, recipe) -> fusion-attrs id */
    ft_hmap fa_ids;  /* fusion key hash -> dense id */
    ft_hmap q_index; /* qstate hash -> interned id */
    ft_qstate *qs;   /* [n_qs] interned quantizer states */
    uint32_t n_qs, cap_qs;
    ft_hmap q_trans;    /* (q, recipe) -> q after reset_recipe_state(recipe) */
    uint32_t *q_direct; /* [n_qdirect * (n_recipes + 1)] the same for q < n_qdirect */
    uint32_t n_qdirect; /* <= FT_QDIRECT, fewer when there are very many recipes */
    ft_hmap q_equal;    /* (q, q') -> ft_qstate_equal + 1 */
    uint64_t q_eq_known[64], q_eq_val[64]; /* the same as bits, for states < 64 */
    ft_hmap c_index;                       /* hash of class_memo key -> entry */
    class_memo *cm;
    uint32_t n_cm, cap_cm;
    int64_t tok_rep[4]; /* a representative token count per token class, -2 = unset */
    const char *fresh_texts[FT_MAX_RAISE_TEXTS]; /* TE's errors of fresh plans (model-owned) */
    uint64_t fresh_counts[FT_MAX_RAISE_TEXTS];
    int needs_fa;
    /* policies */
    uint32_t n_pol;
    uint32_t pol_idx[FT_MAX_POLICIES]; /* registry index per slot (ft_replay_policies) */
    policy_run pol[FT_MAX_POLICIES];
    /* per-batch scratch, compacted: entry j is the j-th call of the batch (backward records
     * dropped), at batch position cc[j].i */
    uint32_t cap_batch;
    uint32_t n_calls;        /* calls in the current batch */
    int any_cap;             /* some call of the batch carries a captured `rebuilt` */
    ccall *cc;               /* [cap_batch] the batch's calls */
    int64_t step_width;      /* steps per bucket, shared by every histogram */
    ft_step_hist step_calls; /* calls per step bucket (the same for every policy) */
    /* the filter: only matching calls are counted (ft_replay_filter) */
    int filt;
    ft_replay_filter filter; /* the caller's strings */
    uint8_t *fuser_ok;       /* [n_fusers] the label glob matches (1 without a glob) */
    uint8_t *phase_ok;       /* [cap_phases] the batch's phases: the filter's phase */
    uint32_t cap_phases;
    /* the view (ft_replay_view), recorded only when some consumer asked (rec_on) */
    unsigned needs; /* FT_VIEW_* */
    int rec_on;     /* per-call records: needs has anything */
    int causes;     /* FT_VIEW_CAUSES */
    ft_replay_view view;
    uint8_t *rec;       /* [n_pol * cap_batch] per policy and call: FT_DEC_* */
    uint32_t *rec_plan; /* [n_pol * cap_batch] */
    uint8_t *rec_stale; /* [n_pol * cap_batch] */
    uint32_t *rec_q;    /* [n_pol * cap_batch] interned quantizer state after the call */
    uint16_t *rec_why;  /* [n_pol * cap_batch] FT_WHY_* of builds (causes) */
    uint32_t *v_row, *v_fuser, *v_f, *v_fresh, *v_fresh_q; /* [cap_batch] call columns */
    int32_t *v_recipe, *v_phase;
    int64_t *v_seq, *v_sid, *v_step, *v_ntok;
    uint8_t *v_match;
    uint32_t *v_soff;  /* [cap_batch + 1] split offsets */
    int32_t *prev_r;   /* [cap_batch] causes: previous recipe of the fuser, -2 first sight */
    uint32_t *prev_f;  /* [cap_batch] */
    uint16_t *changed; /* [cap_batch] FT_WHY_FIRST .. FT_WHY_OBJECT, FT_WHY_OPS */
    uint8_t *fraise;   /* [cap_batch] the call's fresh plan raises: no plan is stale on it (the
                        * view's fresh_raises; read by the loops only where a plan raises) */
    /* causes: the key each policy's call used ((instance << 40) | key), and per policy the last
     * build under each key (src_map: key -> index into src) */
    uint64_t *rec_key; /* [n_pol * cap_batch] */
    int32_t *src_r;    /* [n_pol * cap_batch] the view's src_recipe, src_f, src_seq */
    uint32_t *src_f;
    int64_t *src_seq;
    ft_hmap src_map[FT_MAX_POLICIES];
    struct src_build {
        int32_t recipe;
        uint32_t f;
        int64_t seq;
    } * src;
    uint32_t n_src, cap_src;
    /* results */
    ft_replay_result base; /* non-policy fields */
};

/* A user policy's setup in an engine and its release (policy_spec.c); the slow path of its ids. */
int user_run_init(ft_replay *r, policy_run *pr, const ft_replay_opts *opts, ft_err *err);
void user_run_free(policy_run *pr);
int user_ids_slow(ft_replay *r, policy_run *pr, const pcall *c, int32_t dev, user_ids *out);

/* ---- fuser instances (slots.c) ------------------------------------------------------------ */
int slots_setup(ft_replay *r, ft_err *err);
void slots_free(ft_replay *r);
/* The slot of the fuser that record i (a call or an end) names, made at an instance's first
 * call; FT_ECORRUPT naming the chunk and seq when it names none that is alive. An end of a row
 * never called has none (FT_NO_ENTRY). */
int slot_lookup_slow(ft_replay *r, const ft_batch *b, uint32_t i, uint32_t *out, uint8_t *fresh,
                     ft_err *err);
/* The same for a call, into cj->slot and cj->fresh_slot (the instance's first call). */
static inline int slot_for_call(ft_replay *r, const ft_batch *b, uint32_t i, uint32_t u,
                                uint32_t fl, ccall *cj, ft_err *err)
{
    cj->fresh_slot = 0;
    if (!(fl & FT_CF_INSTANCE)) {
        const uint32_t s = r->row_slot[r->inst[u]];
        if (s < FT_SLOT_ENDED) {
            cj->slot = s;
            return FT_OK;
        }
    } else if (!(fl & FT_CF_NEW_FUSER) && r->last_sid_slot != FT_NO_ENTRY && b->sid &&
               b->sid[i] == r->last_sid) {
        cj->slot = r->last_sid_slot;
        return FT_OK;
    }
    return slot_lookup_slow(r, b, i, &cj->slot, &cj->fresh_slot, err);
}
/* Record i, after j calls of the batch, is a fuser end: the instance is dead from now on and its
 * slot free for the next instance; the policy loops drop its entries at j (ft_replay.ending). */
int slot_end(ft_replay *r, const ft_batch *b, uint32_t i, uint32_t j, ft_err *err);
/* Every policy's state of a new instance, as TE's new fuser (the policy loop calls it at the
 * instance's first call, so that a slot reused within a batch serves each in turn). */
static inline void pstate_init(pstate *s, uint32_t grp)
{
    memset(s, 0, sizeof *s);
    s->saved_a = FT_NEVER;
    s->plan = FT_NO_ENTRY;
    s->slot_key = UINT64_MAX;
    s->lst = (store_list){FT_NO_ENTRY, FT_NO_ENTRY, 0};
    s->mru_key[0] = s->mru_key[1] = UINT64_MAX;
    s->cc[0].plan = s->cc[1].plan = FT_NO_ENTRY;
    s->last_fuser = FT_NO_ENTRY;
    s->grp = grp;
}
/* The transient groups (two or more instances of one label and op list) into out. */
void slots_groups_result(const ft_replay *r, ft_replay_result *out);

/* Slow paths of the loop, in engine.c. */
int replay_q_reset_slow(ft_replay *r, uint32_t q, int32_t recipe, uint32_t *out);
int replay_q_equal(ft_replay *r, uint32_t a, uint32_t b);
const class_memo *replay_classify(ft_replay *r, uint32_t fuser, int32_t recipe, uint32_t chosen,
                                  uint32_t q, uint32_t fresh, int tok_class, int64_t n_tokens,
                                  int *rc);

/* ---- a user policy's key and reset rule, per call ------------------------------------------ */
/* What the loop reads of a user policy, copied into a local once per batch: the per-call stores
 * (uint8_t view columns among them) could alias the run's fields, so reading these through pr
 * would reload them on every call. */
typedef struct user_fast {
    const int32_t *rk, *rr; /* user_run's */
    user_ids *cache;
    uint8_t percall, key_fa, uses_dev, reset_always, reset_f, key_f;
} user_fast;

static inline user_fast user_fast_of(const policy_run *pr)
{
    const user_run *u = &pr->u;
    return (user_fast){.rk = u->rk,
                       .rr = u->rr,
                       .cache = u->cache,
                       .percall = u->percall,
                       .key_fa = u->key_fa,
                       .uses_dev = (uint8_t)(u->key_dev | u->reset_dev),
                       .reset_always = u->reset_always,
                       .reset_f = u->reset_f,
                       .key_f = u->key_f};
}

/* The call's ids under a user policy: per recipe from the tables, else from the fuser's front
 * cache, else interned (user_ids_slow). */
static inline __attribute__((always_inline)) int user_ids_of(ft_replay *r, policy_run *pr,
                                                             const user_fast *U, const ft_batch *b,
                                                             uint32_t i, pcall *c)
{
    if (!U->percall) {
        /* a key of fusion alone is the oracle's fusion-attrs id itself */
        c->kid = U->key_fa ? (uint32_t)c->fa_id : (uint32_t)U->rk[c->recipe + 1];
        c->rid = U->rr[c->recipe + 1];
        return FT_OK;
    }
    const int32_t dev = U->uses_dev ? b->device[i] : 0;
    user_ids *k = &U->cache[c->fuser];
    if (k->recipe != c->recipe || k->dev != dev) {
        int rc = user_ids_slow(r, pr, c, dev, k);
        if (rc) return rc;
    }
    c->kid = k->kid;
    c->rid = k->rid;
    return FT_OK;
}

/* Reset when any of the rule's fields differs from the last reset's (the first call always:
 * saved_a starts as FT_NEVER, TE's recipe_type None). */
static inline int user_reset(const user_fast *U, pstate *s, const pcall *c)
{
    if (U->reset_always) return 1;
    if (s->saved_a == c->rid && (!U->reset_f || s->saved_f == (int32_t)c->f)) return 0;
    s->saved_a = c->rid;
    s->saved_f = (int32_t)c->f;
    return 1;
}

static inline uint64_t user_key(const user_fast *U, const pcall *c)
{
    return ((uint64_t)c->kid << FT_KEY_F_BITS) | (U->key_f ? c->f : 0u);
}

/* ---- the per-policy loop over one batch ------------------------------------------------------ */
/* Instantiated per policy row with its functions as constants (LOOP in policy.c), so the reset
 * rule and key are inlined, and per (rec, filt): with per-call recording on (the view), with a
 * filter (only matching calls are counted; raise texts and captured agreement are not). A user
 * policy's loop (user = 1, policy_spec.c) reads its key, reset rule and store from its run
 * instead. Per call: reset rule -> quantizer-state transition -> store -> staleness against the
 * oracle -> counters. The per-policy step histogram counts builds per bucket here
 * (res.steps.hits); ft_replay_get turns them into hits with the shared call counts. */
static inline __attribute__((always_inline)) int
policy_loop(ft_replay *r, uint32_t p, const ft_batch *b, ft_err *err,
            int (*reset_fn)(pstate *, const rinfo *, const pcall *),
            uint64_t (*key_fn)(const rinfo *, const pcall *), ft_store_kind store,
            int build_on_reset, int rec, int filt, int user)
{
    policy_run *pr = &r->pol[p];
    ft_policy_result *res = &pr->res;
    const uint32_t n = r->n_calls, nr1 = r->n_recipes + 1, n_qdirect = r->n_qdirect;
    const ccall *CC = r->cc;
    const uint32_t *q_direct = r->q_direct;
    const rinfo *RI = r->ri;
    const uint32_t *CLS = r->cls;
    pstate *ST = pr->st;
    uint64_t *GB = pr->gbuilds;
    uint64_t *step_builds = res->steps.hits;
    const int lru = pr->store.capacity != 0;
    /* the MRU front cache only when unbounded, and not where another fuser's build on reset can
     * replace a shared plan behind this fuser's back */
    const int mru = !lru && !(build_on_reset && store == FT_STORE_SHARED);
    const int any_cap = r->any_cap;
    const user_fast U = user ? user_fast_of(pr) : (user_fast){0};
    uint64_t resets = 0, builds = 0, qdrift = 0, stale_n[FT_STALE_COUNT] = {0};
    int rc = FT_OK;
    const struct slot_end *END = r->ending;
    uint32_t e = 0, next_end = r->n_ending ? END[0].pos : UINT32_MAX;
    for (uint32_t j = 0; j < n; j++) {
        for (; next_end == j; next_end = ++e < r->n_ending ? END[e].pos : UINT32_MAX)
            if (store == FT_STORE_DICT) store_drop(&pr->store, &ST[END[e].slot].lst);
        const ccall *cj = &CC[j];
        const uint32_t u = cj->fuser;
        pcall c = {u, cj->recipe, cj->f, cj->fa, 0, 0};
        if (user && (rc = user_ids_of(r, pr, &U, b, cj->i, &c))) goto fail;
        const rinfo *ri = &RI[c.recipe + 1];
        /* one OperationFuser, one state: a redeclaration after an op attribute change keeps it */
        const uint32_t inst = cj->slot;
        pstate *s = &ST[inst];
        if (cj->fresh_slot) pstate_init(s, r->grp_stat[r->row_grp[u]]);
        if (s->last_fuser != u) { /* the cached classification is of the other declaration */
            s->last_fuser = u;
            s->cc[0].plan = s->cc[1].plan = FT_NO_ENTRY;
        }
        const uint32_t fresh = cj->fresh;
        uint32_t plan = fresh;
        uint64_t key_used = 0; /* the store key, for the view's causes */
        int build;
        const int reset = user ? user_reset(&U, s, &c) : reset_fn(s, ri, &c);
        const unsigned counted = filt ? cj->match : 1u;
        if (reset) {
            uint32_t nq = FT_NO_ENTRY;
            if (s->q < n_qdirect) nq = q_direct[s->q * nr1 + (uint32_t)(c.recipe + 1)];
            if (nq == FT_NO_ENTRY && (rc = replay_q_reset_slow(r, s->q, c.recipe, &nq))) goto fail;
            s->q = nq;
            resets += counted;
        }
        if (store == FT_STORE_NONE) {
            build = 1;
        } else if (store == FT_STORE_SINGLE) {
            const uint64_t key = user ? user_key(&U, &c) : key_fn(ri, &c);
            key_used = ((uint64_t)inst << 40) | key;
            build = (build_on_reset && reset) || key != s->slot_key;
            if (build)
                s->slot_key = key;
            else
                plan = s->plan;
        } else {
            /* dict: the instance's own; shared: its op-list class's, whoever built it */
            const uint64_t owner = store == FT_STORE_SHARED ? CLS[u] : inst;
            const uint64_t key = (owner << 40) | (user ? user_key(&U, &c) : key_fn(ri, &c));
            key_used = key;
            store_list *l = store == FT_STORE_SHARED ? &pr->store.lists[owner] : &s->lst;
            /* unbounded dict: a key built goes into the store only when it falls out of the
             * two-entry front cache (so a fuser called once costs the store nothing); the
             * shared store and LRU stores hold every key at once. A build on reset (user
             * policies: build=reset) replaces the key's plan wherever it is held. */
            const int lazy = store == FT_STORE_DICT && !lru;
            const int force = build_on_reset && reset;
            if (mru && key == s->mru_key[0]) {
                plan = s->mru_plan[0];
                build = 0;
                if (force) {
                    build = 1;
                    plan = s->mru_plan[0] = fresh;
                    if (s->mru_in[0] && (rc = store_put(&pr->store, l, key, fresh))) goto fail;
                }
            } else {
                uint8_t in = 1; /* the key is in the store */
                if (mru && key == s->mru_key[1]) {
                    plan = s->mru_plan[1];
                    build = 0;
                    in = s->mru_in[1];
                    if (force) {
                        build = 1;
                        plan = fresh;
                        if (in && (rc = store_put(&pr->store, l, key, fresh))) goto fail;
                    }
                } else {
                    build = !store_lookup(&pr->store, l, key, &plan);
                    if (!build && force) {
                        build = 1;
                        plan = fresh;
                        if ((rc = store_put(&pr->store, l, key, fresh))) goto fail;
                    } else if (build && lazy) {
                        in = 0;
                        l->count++;
                        plan = fresh;
                    } else if (build) {
                        if ((rc = store_insert(&pr->store, l, key, fresh))) goto fail;
                        plan = fresh;
                    }
                    if (build && l->count > res->max_entries) res->max_entries = l->count;
                    if (lazy && s->mru_key[1] != UINT64_MAX && !s->mru_in[1]) {
                        /* the entry that falls out of the front cache */
                        l->count--; /* store_insert counts it again */
                        if ((rc = store_insert(&pr->store, l, s->mru_key[1], s->mru_plan[1])))
                            goto fail;
                    }
                }
                if (mru) {
                    s->mru_key[1] = s->mru_key[0];
                    s->mru_plan[1] = s->mru_plan[0];
                    s->mru_in[1] = s->mru_in[0];
                    s->mru_key[0] = key;
                    s->mru_plan[0] = plan;
                    s->mru_in[0] = in;
                }
            }
        }
        s->plan = plan;
        if (build) {
            builds += counted;
            GB[s->grp] += counted;
            if (cj->sb != FT_NO_SB) step_builds[cj->sb]++; /* no bucket when not counted */
        }
        uint32_t stale = FT_STALE_NONE;
        if (plan != fresh) {
            const uint8_t tok = cj->tok;
            class_cache *cc = &s->cc[tok >> 2];
            if (cc->plan == plan && cc->fresh == fresh && cc->q == s->q && cc->recipe == c.recipe &&
                cc->tok == tok) {
                stale = cc->stale;
            } else {
                const class_memo *cm = replay_classify(r, u, c.recipe, plan, s->q, fresh, tok,
                                                       b->n_tokens[cj->i], &rc);
                if (!cm) goto fail;
                stale = (uint32_t)cm->stale;
                cc->plan = plan;
                cc->fresh = fresh;
                cc->q = s->q;
                cc->recipe = c.recipe;
                cc->tok = tok;
                cc->stale = (uint8_t)stale;
                cc->memo = (uint32_t)(cm - r->cm);
            }
            /* the fresh build raises too: the plan does what a fresh one would (not stale) */
            if (stale == FT_STALE_RAISES && r->fraise[j]) stale = FT_STALE_NONE;
            if (!filt && stale == FT_STALE_RAISES) r->cm[cc->memo].count[p]++;
        } else if (s->q != ri->fresh_q) {
            const uint32_t a = s->q, fq = ri->fresh_q;
            int eq;
            if (a < 64 && fq < 64 && (r->q_eq_known[a] >> fq & 1))
                eq = (int)(r->q_eq_val[a] >> fq & 1);
            else
                eq = replay_q_equal(r, a, fq);
            qdrift += (uint64_t)(eq ? 0u : counted);
        }
        stale_n[stale] += counted;
        if (!filt && any_cap && cj->cap) {
            const int agree = (cj->cap >> 1) == build;
            res->cap_calls++;
            res->cap_agree += (uint64_t)agree;
            if (!agree && res->first_disagree_seq < 0) res->first_disagree_seq = b->seq[cj->i];
        }
        if (rec) {
            const size_t k = (size_t)p * r->cap_batch + j;
            r->rec[k] = (uint8_t)(build * FT_DEC_BUILD | reset * FT_DEC_RESET);
            r->rec_plan[k] = plan;
            r->rec_stale[k] = (uint8_t)stale;
            r->rec_q[k] = s->q;
            if (r->causes) r->rec_key[k] = key_used;
        }
    }
    /* the ends after the batch's last call */
    for (; e < r->n_ending; e++)
        if (store == FT_STORE_DICT) store_drop(&pr->store, &ST[END[e].slot].lst);
    rc = FT_OK;
fail:
    res->resets += resets;
    res->builds += builds;
    res->qdrift += qdrift;
    for (int k = 0; k < FT_STALE_COUNT; k++)
        res->stale[k] += stale_n[k];
    if (!rc) return FT_OK;
    if (rc == FT_ENOMEM) return ft_err_set(err, rc, "replay: out of memory");
    return ft_err_set(err, rc,
                      "replay: policy %s: more than %u distinct keys in one trace, or a device "
                      "index beyond 16 bits",
                      pr->def->name, (1u << FT_KEY_ID_BITS) - 1);
}

#endif /* FT_REPLAYER_INT_H */
