/*
 * slots.c - the replay engine's fuser instances: which fuser state (slot) a call or a fuser end
 * names, slots handed out at an instance's first call and given back after its end, and the label
 * groups the reports gather transient fusers in.
 *
 * An instance is a fusers row (with the rows that continue it through "of", ft_replay.inst) or a
 * compact instance (FT_CF_INSTANCE: named by its stream id, declared by the call that carries
 * FT_CF_NEW_FUSER). Its slot holds every policy's pstate and the causes' previous call. A row
 * costs 12 bytes until its first call (row_slot, row_grp, the model's 16), so declared fusers that
 * are never called cost almost nothing; a slot costs 128 bytes per policy plus 20. A fuser end
 * proves the instance is never called again (the trace's writer and verify refuse a later record
 * naming it, and so does the engine): its slot is free for the next instance at once. The passes
 * over a batch follow the calls in order: the oracle pass hands the slot out again, and each
 * policy loop drops the ended instance's dict entries where the end stood and starts the new
 * instance's state at its first call (ccall.fresh_slot), so slots never outnumber the instances
 * alive at one time. A trace without ends keeps every instance it called.
 *
 * A label group is one (label, op-list class) pair: TE's transient OperationFuser([op]) per call of
 * a standalone op makes many instances of one group, a model's persistent fusers one each.
 */
#include "replayer_int.h"

#include <string.h>

/* ---- setup --------------------------------------------------------------------------------- */
int slots_setup(ft_replay *r, ft_err *err)
{
    const uint32_t nf = r->n_fusers ? r->n_fusers : 1;
    r->row_slot = ft_malloc(nf * sizeof *r->row_slot);
    r->row_grp = ft_malloc(nf * sizeof *r->row_grp);
    if (!r->row_slot || !r->row_grp) return ft_err_set(err, FT_ENOMEM, "replay: out of memory");
    memset(r->row_slot, 0xff, nf * sizeof *r->row_slot);
    /* groups: rows with the same label and op list, numbered in first-declaration order */
    ft_hmap by_key = {0};
    int rc = FT_OK;
    uint32_t n = 0;
    for (uint32_t u = 0; u < r->n_fusers && !rc; u++) {
        const char *l = r->fusers[u].label;
        const uint64_t key = ft_hash_mix(l ? ft_hash64(l, strlen(l)) : 0x6e6f6e65u, r->cls[u]);
        const uint32_t f = ft_hmap_get(&by_key, key); /* the group's first row */
        uint32_t g = UINT32_MAX;
        if (f != UINT32_MAX) { /* the same label text? (else a 64-bit collision: its own group) */
            const char *fl = r->fusers[f].label;
            if ((!fl) == (!l) && (!l || !strcmp(fl, l)) && r->cls[f] == r->cls[u])
                g = r->row_grp[f];
        }
        if (g == UINT32_MAX) {
            g = n++;
            if (f == UINT32_MAX) rc = ft_hmap_put(&by_key, key, u);
        }
        r->row_grp[u] = g;
    }
    ft_hmap_free(&by_key);
    if (rc) return ft_err_set(err, rc, "replay: out of memory");
    r->n_groups = n;
    r->grp_stat = ft_malloc((n ? n : 1) * sizeof *r->grp_stat);
    if (!r->grp_stat) return ft_err_set(err, FT_ENOMEM, "replay: out of memory");
    memset(r->grp_stat, 0xff, (n ? n : 1) * sizeof *r->grp_stat);
    r->last_sid_slot = FT_NO_ENTRY;
    return FT_OK;
}

void slots_free(ft_replay *r)
{
    ft_free(r->row_slot);
    ft_free(r->row_grp);
    ft_free(r->grp_stat);
    ft_free(r->gstat);
    ft_free(r->slot);
    ft_free(r->free_slots);
    ft_free(r->ending);
    ft_hmap_free(&r->inst_slot);
    for (uint32_t p = 0; p < r->n_pol; p++)
        ft_free(r->pol[p].gbuilds);
}

/* ---- label groups -------------------------------------------------------------------------- */
/* The stats index of row u's group, given one at the group's first call. */
static int group_of(ft_replay *r, uint32_t u, uint32_t *out)
{
    const uint32_t g = r->row_grp[u];
    if (r->grp_stat[g] != FT_NO_ENTRY) {
        *out = r->grp_stat[g];
        return FT_OK;
    }
    if (r->n_gstat == r->cap_gstat) {
        const uint32_t cap = r->cap_gstat ? r->cap_gstat * 2 : 64;
        group_stat *q = ft_realloc(r->gstat, cap * sizeof *q);
        if (!q) return FT_ENOMEM;
        r->gstat = q;
        for (uint32_t p = 0; p < r->n_pol; p++) {
            uint64_t *b = ft_realloc(r->pol[p].gbuilds, cap * sizeof *b);
            if (!b) return FT_ENOMEM;
            r->pol[p].gbuilds = b;
        }
        r->cap_gstat = cap;
    }
    const uint32_t k = r->n_gstat++;
    r->gstat[k] = (group_stat){u, 0, 0};
    for (uint32_t p = 0; p < r->n_pol; p++)
        r->pol[p].gbuilds[k] = 0;
    r->grp_stat[g] = k;
    *out = k;
    return FT_OK;
}

/* ---- slots --------------------------------------------------------------------------------- */
/* A fresh slot for an instance declared as row u (every policy's state as TE's new fuser). */
static int slot_new(ft_replay *r, uint32_t u, uint32_t *out)
{
    uint32_t grp, s;
    if (group_of(r, u, &grp)) return FT_ENOMEM;
    if (r->n_free) {
        s = r->free_slots[--r->n_free];
    } else {
        if (r->n_slots == r->cap_slots) {
            if (r->cap_slots >= FT_MAX_SLOTS) return FT_EUNSUPPORTED;
            const uint32_t cap = r->cap_slots ? r->cap_slots * 2 : 64;
            slot_info *q = ft_realloc(r->slot, cap * sizeof *q);
            if (!q) return FT_ENOMEM;
            r->slot = q;
            for (uint32_t p = 0; p < r->n_pol; p++) {
                pstate *st = ft_realloc(r->pol[p].st, cap * sizeof *st);
                if (!st) return FT_ENOMEM;
                r->pol[p].st = st;
            }
            r->cap_slots = cap;
        }
        s = r->n_slots++;
    }
    r->slot[s] = (slot_info){u, grp, 0, 0, u, 0}; /* the policies' pstates: at its first call */
    r->gstat[grp].fusers++;
    if (++r->n_live > r->max_live) r->max_live = r->n_live;
    *out = s;
    return FT_OK;
}

static int slot_fail(const ft_batch *b, uint32_t i, int rc, ft_err *err)
{
    const char *what = b->kind[i] == FT_REC_END ? "fuser_end" : "call";
    if (rc == FT_ENOMEM) return ft_err_set(err, rc, "replay: out of memory");
    if (rc == FT_EUNSUPPORTED)
        return ft_err_set(err, rc, "chunk %llu, %s seq %lld: more than %u fusers alive at once",
                          (unsigned long long)b->chunk_id, what, (long long)b->seq[i],
                          FT_MAX_SLOTS);
    return ft_err_set(err, FT_ECORRUPT,
                      "chunk %llu, %s seq %lld: fuser %lld is not alive (not declared, or it "
                      "ended)",
                      (unsigned long long)b->chunk_id, what, (long long)b->seq[i],
                      b->sid ? (long long)b->sid[i] : -1LL);
}

int slot_lookup_slow(ft_replay *r, const ft_batch *b, uint32_t i, uint32_t *out, uint8_t *fresh,
                     ft_err *err)
{
    const uint32_t u = b->fuser[i], fl = b->flags[i];
    int rc = FT_OK;
    *fresh = 0;
    if (!(fl & FT_CF_INSTANCE)) {
        const uint32_t root = r->inst[u];
        if (r->row_slot[root] == FT_SLOT_ENDED || b->kind[i] == FT_REC_END) {
            if (r->row_slot[root] < FT_SLOT_ENDED) {
                *out = r->row_slot[root];
                return FT_OK;
            }
            /* an end of a row never called: nothing to give back */
            if (b->kind[i] == FT_REC_END && r->row_slot[root] == FT_NO_ENTRY) {
                *out = FT_NO_ENTRY;
                return FT_OK;
            }
            return slot_fail(b, i, FT_ECORRUPT, err);
        }
        if ((rc = slot_new(r, u, out))) return slot_fail(b, i, rc, err);
        r->row_slot[root] = *out;
        *fresh = 1;
        return FT_OK;
    }
    if (!b->sid) return slot_fail(b, i, FT_ECORRUPT, err); /* a batch made without stream ids */
    const int64_t sid = b->sid[i];
    if ((fl & FT_CF_NEW_FUSER) && b->kind[i] == FT_REC_CALL) {
        if (ft_hmap_get(&r->inst_slot, (uint64_t)sid) != UINT32_MAX)
            return slot_fail(b, i, FT_ECORRUPT, err);
        if ((rc = slot_new(r, u, out))) return slot_fail(b, i, rc, err);
        if (ft_hmap_put(&r->inst_slot, (uint64_t)sid, *out)) return slot_fail(b, i, FT_ENOMEM, err);
        r->n_compact++;
        *fresh = 1;
    } else if ((*out = ft_hmap_get(&r->inst_slot, (uint64_t)sid)) == UINT32_MAX) {
        return slot_fail(b, i, FT_ECORRUPT, err);
    }
    r->last_sid = sid;
    r->last_sid_slot = *out;
    return FT_OK;
}

int slot_end(ft_replay *r, const ft_batch *b, uint32_t i, uint32_t j, ft_err *err)
{
    uint32_t s;
    uint8_t fresh;
    int rc = slot_lookup_slow(r, b, i, &s, &fresh, err);
    if (rc) return rc;
    if (b->flags[i] & FT_CF_INSTANCE) {
        ft_hmap_del(&r->inst_slot, (uint64_t)b->sid[i]);
        if (r->last_sid_slot == s) r->last_sid_slot = FT_NO_ENTRY;
    } else {
        r->row_slot[r->inst[b->fuser[i]]] = FT_SLOT_ENDED;
    }
    if (s == FT_NO_ENTRY) return FT_OK;
    if (r->n_ending == r->cap_ending) {
        const uint32_t cap = r->cap_ending ? r->cap_ending * 2 : 256;
        struct slot_end *q = ft_realloc(r->ending, cap * sizeof *q);
        if (!q) return ft_err_set(err, FT_ENOMEM, "replay: out of memory");
        r->ending = q;
        r->cap_ending = cap;
    }
    if (r->n_free == r->cap_free) {
        const uint32_t cap = r->cap_free ? r->cap_free * 2 : 256;
        uint32_t *q = ft_realloc(r->free_slots, cap * sizeof *q);
        if (!q) return ft_err_set(err, FT_ENOMEM, "replay: out of memory");
        r->free_slots = q;
        r->cap_free = cap;
    }
    r->ending[r->n_ending++] = (struct slot_end){j, s};
    r->free_slots[r->n_free++] = s;
    r->n_live--;
    return FT_OK;
}

/* ---- the reports' transient groups ---------------------------------------------------------- */
/* Of every group with two or more instances: the totals into out, and the groups with the most
 * instances (ties: the first called) into out->transient. */
void slots_groups_result(const ft_replay *r, ft_replay_result *out)
{
    out->transient_fusers = out->transient_calls = out->transient_groups = 0;
    out->n_transient = 0;
    for (uint32_t p = 0; p < r->n_pol; p++)
        out->pol[p].transient_builds = 0;
    for (uint32_t k = 0; k < r->n_gstat; k++) {
        const group_stat *g = &r->gstat[k];
        if (g->fusers < 2) continue;
        out->transient_groups++;
        out->transient_fusers += g->fusers;
        out->transient_calls += g->calls;
        for (uint32_t p = 0; p < r->n_pol; p++)
            out->pol[p].transient_builds += r->pol[p].gbuilds[k];
        uint32_t at = out->n_transient;
        while (at > 0 && out->transient[at - 1].fusers < g->fusers)
            at--;
        if (at >= FT_TRANSIENT_GROUPS) continue;
        if (out->n_transient < FT_TRANSIENT_GROUPS) out->n_transient++;
        memmove(&out->transient[at + 1], &out->transient[at],
                (out->n_transient - 1 - at) * sizeof out->transient[0]);
        ft_transient_group *t = &out->transient[at];
        memset(t, 0, sizeof *t);
        const char *l = r->fusers[g->row].label;
        ft_strlcpy(t->label, l ? l : "", sizeof t->label);
        t->fusers = g->fusers;
        t->calls = g->calls;
        for (uint32_t p = 0; p < r->n_pol; p++)
            t->builds[p] = r->pol[p].gbuilds[k];
    }
}
