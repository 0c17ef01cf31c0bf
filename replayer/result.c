/*
 * result.c - replay results as plain, mergeable data: initialisation, the per-step histograms
 * (fixed bucket count, the width doubling as steps outgrow it), TE's error texts with counts,
 * and the merge of one trace's result into another's.
 */
#include "replayer_int.h"

#include <string.h>

void replay_step_fold(ft_step_hist *s)
{
    /* halve the resolution: bucket b takes buckets 2b and 2b+1 */
    uint32_t n = (s->n + 1) / 2;
    for (uint32_t b = 0; b < n; b++) {
        uint64_t c = s->calls[2 * b], h = s->hits[2 * b];
        if (2 * b + 1 < s->n) {
            c += s->calls[2 * b + 1];
            h += s->hits[2 * b + 1];
        }
        s->calls[b] = c;
        s->hits[b] = h;
    }
    for (uint32_t b = n; b < s->n; b++)
        s->calls[b] = s->hits[b] = 0;
    s->n = n;
    s->width *= 2;
}

static void step_add(ft_step_hist *s, int64_t step, uint64_t calls, uint64_t hits)
{
    if (step < 0) return;
    int64_t b = step / s->width;
    while (b >= FT_STEP_BUCKETS) {
        replay_step_fold(s);
        b = step / s->width;
    }
    if ((uint32_t)b >= s->n) s->n = (uint32_t)b + 1;
    s->calls[b] += calls;
    s->hits[b] += hits;
}

void ft_replay_result_init(ft_replay_result *r, const uint32_t *policies, uint32_t n_policies)
{
    memset(r, 0, sizeof *r);
    r->captured_policy = -1;
    if (!policies || !n_policies) n_policies = ft_policy_count();
    if (n_policies > FT_MAX_POLICIES) n_policies = FT_MAX_POLICIES;
    r->n_policies = n_policies;
    for (uint32_t p = 0; p < n_policies; p++) {
        r->pol[p].policy = policies && n_policies ? policies[p] : p;
        r->pol[p].first_disagree_seq = -1;
        r->pol[p].steps.width = 1;
    }
}

void replay_add_raise_text(ft_raise_text *t, const char *text, uint64_t count)
{
    if (!text) text = "(no message)";
    for (int i = 0; i < FT_MAX_RAISE_TEXTS; i++) {
        if (t[i].count && !strncmp(t[i].text, text, sizeof t[i].text - 1)) {
            t[i].count += count;
            return;
        }
        if (!t[i].count) {
            ft_strlcpy(t[i].text, text, sizeof t[i].text);
            t[i].count = count;
            return;
        }
    }
}

/* Transient groups (decided per trace) merged by label; a label past the table's room is in the
 * totals only. Kept in order of instances, most first. */
static void merge_transient(ft_replay_result *dst, const ft_replay_result *src)
{
    dst->transient_groups += src->transient_groups;
    dst->transient_fusers += src->transient_fusers;
    dst->transient_calls += src->transient_calls;
    for (uint32_t g = 0; g < src->n_transient; g++) {
        const ft_transient_group *s = &src->transient[g];
        uint32_t k = 0;
        while (k < dst->n_transient && strcmp(dst->transient[k].label, s->label))
            k++;
        if (k == dst->n_transient) {
            if (k == FT_TRANSIENT_GROUPS) continue;
            dst->transient[dst->n_transient++] = *s;
        } else {
            ft_transient_group *d = &dst->transient[k];
            d->fusers += s->fusers;
            d->calls += s->calls;
            for (uint32_t p = 0; p < dst->n_policies; p++)
                d->builds[p] += s->builds[p];
        }
        for (; k > 0 && dst->transient[k - 1].fusers < dst->transient[k].fusers; k--) {
            const ft_transient_group t = dst->transient[k];
            dst->transient[k] = dst->transient[k - 1];
            dst->transient[k - 1] = t;
        }
    }
}

int ft_replay_result_merge(ft_replay_result *dst, const ft_replay_result *src, ft_err *err)
{
    if (dst->n_policies != src->n_policies)
        return ft_err_set(err, FT_EINVAL, "merging results of different policy lists");
    for (uint32_t p = 0; p < dst->n_policies; p++)
        if (dst->pol[p].policy != src->pol[p].policy)
            return ft_err_set(err, FT_EINVAL, "merging results of different policy lists");
    dst->n_traces += src->n_traces;
    dst->calls += src->calls;
    dst->backwards += src->backwards;
    dst->n_fusers += src->n_fusers;
    dst->fusers_alive_max += src->fusers_alive_max;
    dst->n_recipes += src->n_recipes;
    dst->model_builds += src->model_builds;
    dst->model_build_ns += src->model_build_ns;
    dst->oracle_ns += src->oracle_ns;
    dst->wall_ns += src->wall_ns; /* summed; ft_replay_run overwrites with elapsed time */
    if (dst->captured_policy < 0) dst->captured_policy = src->captured_policy;
    dst->cap_build_n += src->cap_build_n;
    dst->cap_build_fuse_ns += src->cap_build_fuse_ns;
    dst->cap_hit_n += src->cap_hit_n;
    dst->cap_hit_fuse_ns += src->cap_hit_fuse_ns;
    dst->fresh_raises += src->fresh_raises;
    for (int i = 0; i < FT_MAX_RAISE_TEXTS; i++)
        if (src->fresh_raise_texts[i].count)
            replay_add_raise_text(dst->fresh_raise_texts, src->fresh_raise_texts[i].text,
                                  src->fresh_raise_texts[i].count);
    for (uint32_t p = 0; p < dst->n_policies; p++) {
        ft_policy_result *d = &dst->pol[p];
        const ft_policy_result *s = &src->pol[p];
        d->calls += s->calls;
        d->builds += s->builds;
        d->hits += s->hits;
        d->resets += s->resets;
        for (int k = 0; k < FT_STALE_COUNT; k++)
            d->stale[k] += s->stale[k];
        d->qdrift += s->qdrift;
        d->loop_ns += s->loop_ns;
        if (s->max_entries > d->max_entries) d->max_entries = s->max_entries;
        d->evictions += s->evictions;
        d->cap_calls += s->cap_calls;
        d->cap_agree += s->cap_agree;
        d->transient_builds += s->transient_builds;
        if (d->first_disagree_seq < 0) d->first_disagree_seq = s->first_disagree_seq;
        for (int i = 0; i < FT_MAX_RAISE_TEXTS; i++)
            if (s->raises[i].count)
                replay_add_raise_text(d->raises, s->raises[i].text, s->raises[i].count);
        /* steps: bring both to the coarser width, then add */
        ft_step_hist sh = s->steps;
        while (sh.width < d->steps.width)
            replay_step_fold(&sh);
        while (d->steps.width < sh.width)
            replay_step_fold(&d->steps);
        for (uint32_t b = 0; b < sh.n; b++)
            if (sh.calls[b]) step_add(&d->steps, (int64_t)b * sh.width, sh.calls[b], sh.hits[b]);
    }
    merge_transient(dst, src);
    return FT_OK;
}
