/*
 * gputime.c - GPU time (ft_numerics.h, "GPU time"): the situations a trace's grouped-MLP calls
 * run, which sampled call times each (the first that has it, in call order), the calls counted
 * under each policy as pairs of chosen and fresh situations, and the per-policy sums per round
 * that the results hold. The timing itself is the back end's (the table's time entry,
 * ft_cuda_nx_time), run on the sampled call's problem next to its numerics runs.
 *
 * Limits: a situation keys on the fuser's shape and the call's token count, not its split
 * sizes, so its time is that of the first sampled call's routing; at most GT_MAX_SITS situations
 * and GT_MAX_PAIRS pairs per trace are told apart (calls past them count as untimed).
 */
#define _POSIX_C_SOURCE 200809L
#include "numerics_int.h"

#include <stdlib.h>
#include <string.h>

int nx_gt_check_opts(const nx_backend *be, const ft_numerics_opts *o, ft_err *err)
{
    if (o->time_only && !o->gpu_time)
        return ft_err_set(err, FT_EINVAL, "numerics: time_only without gpu_time");
    if (o->time_rounds > FT_NX_MAX_ROUNDS)
        return ft_err_set(err, FT_EINVAL, "numerics: %u timed rounds (at most %d)", o->time_rounds,
                          FT_NX_MAX_ROUNDS);
    if (!be->device || !be->time)
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "GPU time runs on the CUDA back end, not on the %s one", be->name);
    return FT_OK;
}

/* ---- situations and pairs ------------------------------------------------------------------ */

static uint64_t mix_float(uint64_t h, float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return ft_hash_mix(h, u);
}

/* What a call of fuser d with n_tokens tokens runs under configuration c (grad: the backward
 * too; a forward-only call never sees the backward's quantizer settings). */
static uint64_t sit_key(const mlp_desc *d, int64_t n_tokens, int grad, const runcfg *c)
{
    const int g = grad != 0;
    const uint64_t v[] = {d->groups,
                          (uint64_t)d->k1,
                          (uint64_t)d->k2,
                          (uint64_t)d->n2,
                          (uint64_t)d->act.kind,
                          (uint64_t)d->act.interleave,
                          d->bias1,
                          d->bias2,
                          d->scaled,
                          d->scale_bias,
                          (uint64_t)n_tokens,
                          (uint64_t)g,
                          c->fused,
                          (uint64_t)c->q.fmt,
                          (uint64_t)c->q.fp8_fwd,
                          g ? (uint64_t)c->q.fp8_bwd : 0,
                          g ? c->q.rht : 0,
                          g ? c->q.sr : 0,
                          c->q.two_d,
                          c->q.pow2_scales};
    uint64_t h = 0x6a7e11;
    for (size_t i = 0; i < FT_ARRAY_LEN(v); i++)
        h = ft_hash_mix(h, v[i]);
    h = mix_float(h, d->act.limit);
    h = mix_float(h, d->act.alpha);
    return mix_float(h, d->act.offset);
}

/* The index of situation key, added when new; UINT32_MAX when the table is full (or no memory). */
static uint32_t sit_index(gt_state *g, uint64_t key)
{
    uint32_t i = ft_hmap_get(&g->sit_of, key);
    if (i != UINT32_MAX) return i;
    if (g->n_sit >= GT_MAX_SITS) return UINT32_MAX;
    if (g->n_sit == g->cap_sit) {
        const uint32_t cap = g->cap_sit ? g->cap_sit * 2 : 64;
        gt_sit *s = ft_realloc(g->sit, cap * sizeof *s);
        if (!s) return UINT32_MAX;
        g->sit = s;
        g->cap_sit = cap;
    }
    if (ft_hmap_put(&g->sit_of, key, g->n_sit)) return UINT32_MAX;
    memset(&g->sit[g->n_sit], 0, sizeof g->sit[0]);
    return g->n_sit++;
}

/* One more call of policy p with these chosen and fresh situations; nonzero when it cannot be
 * kept (the table is full, or no memory). */
static int pair_add(gt_state *g, uint32_t p, uint32_t chosen, uint32_t fresh)
{
    const uint64_t key = ((uint64_t)p << 48) ^ ((uint64_t)chosen << 24) ^ fresh;
    uint32_t i = ft_hmap_get(&g->pair_of, key);
    if (i == UINT32_MAX) {
        if (g->n_pair >= GT_MAX_PAIRS) return 1;
        if (g->n_pair == g->cap_pair) {
            const uint32_t cap = g->cap_pair ? g->cap_pair * 2 : 64;
            gt_pair *q = ft_realloc(g->pair, cap * sizeof *q);
            if (!q) return 1;
            g->pair = q;
            g->cap_pair = cap;
        }
        if (ft_hmap_put(&g->pair_of, key, g->n_pair)) return 1;
        i = g->n_pair++;
        g->pair[i] = (gt_pair){p, chosen, fresh, 0};
    }
    g->pair[i].n++;
    return 0;
}

/* Situation i, not yet timed nor claimed, is timed by job j. */
static void claim(gt_state *g, job *j, uint32_t i, const runcfg *c)
{
    if (i == UINT32_MAX || g->sit[i].state != GT_SEEN) return;
    g->sit[i].state = GT_CLAIMED;
    j->time_sit[j->n_time] = i;
    j->time_cfg[j->n_time++] = *c;
}

void nx_gt_offer(ft_numerics *nx, const ft_numerics_call *c, job *j, int sampled)
{
    gt_state *g = &nx->gt;
    const mlp_desc *d = &nx->mlp[c->fuser];
    const uint32_t np = nx->res.n_policies;
    int64_t n_tok = c->n_tokens;
    if (n_tok < 0) {
        n_tok = 0;
        for (uint32_t k = 0; k < c->n_splits; k++)
            n_tok += c->splits[k];
    }
    const uint32_t fi =
        j->fresh_raise ? UINT32_MAX : sit_index(g, sit_key(d, n_tok, j->grad, &j->fresh_cfg));
    uint32_t ci[FT_NUMERICS_MAX_POLICIES];
    for (uint32_t p = 0; p < np; p++)
        ci[p] = j->raise[p] ? UINT32_MAX : sit_index(g, sit_key(d, n_tok, j->grad, &j->cfg[p]));
    if (!c->uncounted) {
        g->calls++;
        /* the step set is a counting aid: out of memory, a step goes uncounted */
        if (c->step >= 0) (void)ft_hmap_put(&g->steps, (uint64_t)c->step, 1);
        for (uint32_t p = 0; p < np; p++) {
            if (j->raise[p])
                g->raised[p]++;
            else if (j->fresh_raise)
                g->fresh_raised[p]++;
            else if (ci[p] == UINT32_MAX || fi == UINT32_MAX || pair_add(g, p, ci[p], fi))
                g->lost[p]++;
        }
    }
    if (!sampled) return;
    claim(g, j, fi, &j->fresh_cfg);
    for (uint32_t p = 0; p < np; p++)
        claim(g, j, ci[p], &j->cfg[p]);
}

/* ---- timing and folding -------------------------------------------------------------------- */

int nx_gt_exec(const ft_numerics *nx, ft_nx *ctx, job *j, const problem *P, int set_problem,
               ft_err *err)
{
    if (!j->n_time) return FT_OK;
    const nx_backend *be = nx->be;
    const uint64_t t0 = ft_now_ns();
    int rc = set_problem ? be->problem(ctx, &P->np, err) : FT_OK;
    for (uint32_t k = 0; k < j->n_time && !rc; k++) {
        ft_mlp_quant q = j->time_cfg[k].q;
        q.seed = P->np.xseed;
        rc = be->time(ctx, j->time_cfg[k].fused ? FT_MLP_FUSED : FT_MLP_UNFUSED, &q,
                      nx->o.time_warmup, nx->o.time_rounds, &j->time[k], err);
    }
    j->time_ns += ft_now_ns() - t0;
    return rc;
}

void nx_gt_fold(ft_numerics *nx, const job *j)
{
    gt_state *g = &nx->gt;
    g->timing_ns += j->time_ns;
    for (uint32_t k = 0; k < j->n_time; k++) {
        gt_sit *s = &g->sit[j->time_sit[k]];
        const ft_nx_time *t = &j->time[k];
        if (t->rc || t->n_rounds < 1) {
            s->state = GT_REFUSED;
            ft_strlcpy(s->msg, t->rc ? t->msg : "no round timed", sizeof s->msg);
            continue;
        }
        s->state = GT_TIMED;
        s->proxies = t->proxies;
        s->n_rounds = t->n_rounds;
        memcpy(s->ms, t->ms, sizeof s->ms);
    }
}

void nx_gt_free(gt_state *g)
{
    ft_hmap_free(&g->sit_of);
    ft_hmap_free(&g->pair_of);
    ft_hmap_free(&g->steps);
    ft_free(g->sit);
    ft_free(g->pair);
    memset(g, 0, sizeof *g);
}

/* ---- results ------------------------------------------------------------------------------- */

void nx_gt_get(const ft_numerics *nx, ft_gputime_result *out)
{
    memset(out, 0, sizeof *out);
    if (!nx->o.gpu_time) return;
    const gt_state *g = &nx->gt;
    out->on = 1;
    ft_strlcpy(out->device, nx->res.device, sizeof out->device);
    out->warmup = nx->o.time_warmup;
    out->rounds = nx->o.time_rounds;
    out->shrink = nx->o.shrink;
    out->calls = g->calls;
    out->steps = g->steps.n;
    out->traces = 1;
    out->traces_no_step = g->steps.n == 0;
    out->situations = g->n_sit;
    out->timing_ns = g->timing_ns;
    for (uint32_t i = 0; i < g->n_sit; i++) {
        const gt_sit *s = &g->sit[i];
        if (s->state == GT_TIMED) {
            out->timed++;
            out->proxies |= s->proxies;
        } else if (s->state == GT_REFUSED) {
            if (!out->refused++) ft_strlcpy(out->refuse_text, s->msg, sizeof out->refuse_text);
        }
    }
    out->n_policies = nx->res.n_policies;
    for (uint32_t p = 0; p < out->n_policies; p++) {
        out->pol[p].raised = g->raised[p];
        out->pol[p].fresh_raised = g->fresh_raised[p];
        out->pol[p].untimed = g->lost[p];
    }
    for (uint32_t i = 0; i < g->n_pair; i++) {
        const gt_pair *pr = &g->pair[i];
        ft_gputime_policy *pol = &out->pol[pr->policy];
        const gt_sit *c = &g->sit[pr->chosen], *f = &g->sit[pr->fresh];
        if (c->state != GT_TIMED || f->state != GT_TIMED) {
            pol->untimed += pr->n;
            continue;
        }
        pol->calls += pr->n;
        if (pr->chosen != pr->fresh) pol->stale_calls += pr->n;
        for (uint32_t r = 0; r < out->rounds && r < FT_NX_MAX_ROUNDS; r++) {
            pol->chosen_ms[r] += (double)pr->n * c->ms[r];
            pol->fresh_ms[r] += (double)pr->n * f->ms[r];
        }
    }
}

void nx_gt_merge(ft_gputime_result *dst, const ft_gputime_result *src)
{
    if (!src->on) return;
    if (!dst->on) {
        *dst = *src;
        return;
    }
    if (!dst->device[0]) ft_strlcpy(dst->device, src->device, sizeof dst->device);
    dst->calls += src->calls;
    dst->steps += src->steps;
    dst->traces += src->traces;
    dst->traces_no_step += src->traces_no_step;
    dst->situations += src->situations;
    dst->timed += src->timed;
    if (!dst->refused && src->refused)
        ft_strlcpy(dst->refuse_text, src->refuse_text, sizeof dst->refuse_text);
    dst->refused += src->refused;
    dst->proxies |= src->proxies;
    dst->timing_ns += src->timing_ns;
    for (uint32_t p = 0; p < dst->n_policies && p < src->n_policies; p++) {
        ft_gputime_policy *a = &dst->pol[p];
        const ft_gputime_policy *b = &src->pol[p];
        a->calls += b->calls;
        a->stale_calls += b->stale_calls;
        a->raised += b->raised;
        a->fresh_raised += b->fresh_raised;
        a->untimed += b->untimed;
        for (uint32_t r = 0; r < FT_NX_MAX_ROUNDS; r++) {
            a->chosen_ms[r] += b->chosen_ms[r];
            a->fresh_ms[r] += b->fresh_ms[r];
        }
    }
}

uint64_t ft_gputime_steps(const ft_gputime_result *g)
{
    return g->steps + g->traces_no_step;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ft_gputime_ms(const ft_gputime_result *g, uint32_t p, int which, int stat)
{
    const uint64_t steps = ft_gputime_steps(g);
    const uint32_t n = g->rounds < FT_NX_MAX_ROUNDS ? g->rounds : FT_NX_MAX_ROUNDS;
    if (p >= g->n_policies || !n || !steps) return 0.0;
    double v[FT_NX_MAX_ROUNDS];
    for (uint32_t r = 0; r < n; r++) {
        const double c = g->pol[p].chosen_ms[r], f = g->pol[p].fresh_ms[r];
        v[r] = (which == 0 ? c : which == 1 ? f : c - f) / (double)steps;
    }
    qsort(v, n, sizeof v[0], cmp_double);
    if (stat == 1) return v[0];
    if (stat == 2) return v[n - 1];
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
