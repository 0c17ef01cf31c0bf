/*
 * gate.c - the CI gate of `replay --fail-on CONDITION`: an observer of the replay driver that
 * watches every policy's decisions call by call and keeps, per condition and policy, the first
 * call on which the condition held.
 *
 * Conditions (ft_report_gate_parse): stale (a stale plan of any class), raises (a stale plan
 * that raises in TE), builds>N (more than N builds under the policy, over every trace),
 * builds-per-fuser>N (more than N builds of one fuser), rebuilds-per-step>N (more than N
 * rebuilds within one training step of one trace; a rebuild is a build for a recipe and boundary
 * f the fuser had already built for under the policy: a plan the cache held once and lost). Only
 * the calls the replay's filter counts are counted (ft_replay_filter). Memory: 4 bytes per fuser
 * and policy of the trace being replayed, one map entry per (policy, fuser, recipe, f) built and
 * per (step, policy) with a rebuild.
 */
#include "report_int.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *word;
    int kind;
    int has_n;
} words[] = {{"stale", FT_GATE_STALE, 0},
             {"raises", FT_GATE_RAISES, 0},
             {"builds", FT_GATE_BUILDS, 1},
             {"builds-per-fuser", FT_GATE_FUSER_BUILDS, 1},
             {"rebuilds-per-step", FT_GATE_STEP_REBUILDS, 1}};

#define GATE_WORDS "stale, raises, builds>N, builds-per-fuser>N, rebuilds-per-step>N"

int ft_report_gate_parse(const char *text, ft_gate_cond *out, ft_err *err)
{
    memset(out, 0, sizeof *out);
    const char *gt = strchr(text, '>');
    const size_t wl = gt ? (size_t)(gt - text) : strlen(text);
    for (size_t i = 0; i < FT_ARRAY_LEN(words); i++) {
        if (strlen(words[i].word) != wl || strncmp(text, words[i].word, wl)) continue;
        out->kind = words[i].kind;
        if (!words[i].has_n && gt)
            return ft_err_set(err, FT_EINVAL,
                              "'%s': %s takes no threshold; conditions: " GATE_WORDS, text,
                              words[i].word);
        if (words[i].has_n) {
            int64_t n;
            if (!gt || ft_parse_i64(gt + 1, &n) || n < 0)
                return ft_err_set(
                    err, FT_EINVAL,
                    "'%s': %s wants a threshold, %s>N with N >= 0; conditions: " GATE_WORDS, text,
                    words[i].word, words[i].word);
            out->n = (uint64_t)n;
        }
        snprintf(out->text, sizeof out->text, "%s", text);
        return FT_OK;
    }
    return ft_err_set(err, FT_EINVAL, "unknown condition '%s'; conditions: " GATE_WORDS, text);
}

struct ft_report_gate {
    ft_gate_cond cond[FT_GATE_MAX];
    uint32_t n_cond;
    uint32_t n_pol;
    uint32_t pol[FT_MAX_POLICIES];
    int watch_all;
    uint32_t watch[FT_MAX_POLICIES], n_watch; /* registry indices watched (unless watch_all) */
    uint8_t watched[FT_MAX_POLICIES];         /* per slot of the trace being replayed */
    /* the first hit per condition and policy slot; seq < 0: none yet */
    ft_gate_hit hit[FT_GATE_MAX][FT_MAX_POLICIES];
    uint64_t builds[FT_MAX_POLICIES]; /* over every trace */
    /* the trace being replayed */
    uint32_t trace, n_fusers;
    const char *path;
    uint32_t *fuser_builds;         /* [n_fusers * n_pol] */
    ft_hmap built[FT_MAX_POLICIES]; /* per slot: (fuser, recipe, f) a build was made for */
    ft_hmap step_rebuilds;          /* step * FT_MAX_POLICIES + slot -> rebuilds */
    int any_step, wants_steps;
    ft_replay_observer obs;
};

static void hold(ft_report_gate *g, uint32_t c, uint32_t p, const ft_replay_view *v, uint32_t j,
                 uint64_t count)
{
    ft_gate_hit *h = &g->hit[c][p];
    if (h->held) return;
    const ft_fuser_def *fd = ft_replay_fuser(v->engine, v->fuser[j]);
    *h = (ft_gate_hit){.held = 1,
                       .policy = v->pol[p].policy,
                       .trace = g->trace,
                       .path = g->path,
                       .seq = v->seq[j],
                       .fuser_id = fd ? fd->id : -1,
                       .step = v->step[j],
                       .stale = v->pol[p].stale[j],
                       .count = count};
    if (fd && fd->label) snprintf(h->label, sizeof h->label, "%s", fd->label);
}

static int gate_begin(void *ctx, const ft_replay_input *in, const ft_replay *engine, ft_err *err)
{
    ft_report_gate *g = ctx;
    const uint32_t *idx;
    g->n_pol = ft_replay_policies(engine, &idx);
    memcpy(g->pol, idx, g->n_pol * sizeof *idx);
    for (uint32_t p = 0; p < g->n_pol; p++) {
        g->watched[p] = (uint8_t)g->watch_all;
        for (uint32_t k = 0; k < g->n_watch; k++)
            g->watched[p] |= g->watch[k] == idx[p];
    }
    g->trace = in->index;
    g->path = in->path;
    g->n_fusers = ft_trace_n_fusers(in->trace);
    ft_free(g->fuser_builds);
    g->fuser_builds =
        ft_calloc((size_t)(g->n_fusers ? g->n_fusers : 1) * g->n_pol, sizeof *g->fuser_builds);
    ft_hmap_clear(&g->step_rebuilds);
    for (uint32_t p = 0; p < FT_MAX_POLICIES; p++)
        ft_hmap_clear(&g->built[p]);
    if (!g->fuser_builds) return ft_err_set(err, FT_ENOMEM, "out of memory");
    return FT_OK;
}

/* One build of call j under policy slot p: the build conditions. */
static int on_build(ft_report_gate *g, const ft_replay_view *v, uint32_t j, uint32_t p)
{
    uint32_t *fb = &g->fuser_builds[(size_t)v->fuser[j] * g->n_pol + p];
    (*fb)++;
    g->builds[p]++;
    uint64_t in_step = 0;
    if (g->wants_steps && v->step[j] >= 0) {
        /* a rebuild: a build for a (recipe, f) the fuser had built for before (fuser < 2^24,
         * recipe + 1 < 2^24, f < 2^16: the replayer's limits) */
        const uint64_t in_key =
            (uint64_t)v->fuser[j] << 40 | (uint64_t)(uint32_t)(v->recipe[j] + 1) << 16 | v->f[j];
        if (ft_hmap_get(&g->built[p], in_key) == UINT32_MAX) {
            if (ft_hmap_put(&g->built[p], in_key, 1)) return FT_ENOMEM;
        } else {
            const uint64_t key = (uint64_t)v->step[j] * FT_MAX_POLICIES + p;
            const uint32_t got = ft_hmap_get(&g->step_rebuilds, key);
            in_step = got == UINT32_MAX ? 1 : (uint64_t)got + 1;
            if (in_step < UINT32_MAX - 1 && ft_hmap_put(&g->step_rebuilds, key, (uint32_t)in_step))
                return FT_ENOMEM;
        }
    }
    for (uint32_t c = 0; c < g->n_cond; c++) {
        const ft_gate_cond *k = &g->cond[c];
        if (k->kind == FT_GATE_BUILDS && g->builds[p] > k->n) hold(g, c, p, v, j, g->builds[p]);
        if (k->kind == FT_GATE_FUSER_BUILDS && *fb > k->n) hold(g, c, p, v, j, *fb);
        if (k->kind == FT_GATE_STEP_REBUILDS && in_step > k->n) hold(g, c, p, v, j, in_step);
    }
    return FT_OK;
}

static int gate_batch(void *ctx, const ft_replay_view *v, ft_err *err)
{
    ft_report_gate *g = ctx;
    for (uint32_t j = 0; j < v->n; j++) {
        if (v->match && !v->match[j]) continue;
        if (v->step[j] >= 0) g->any_step = 1;
        for (uint32_t p = 0; p < v->n_pol; p++) {
            const ft_view_policy *vp = &v->pol[p];
            if (!g->watched[p]) continue;
            if (vp->stale[j] != FT_STALE_NONE)
                for (uint32_t c = 0; c < g->n_cond; c++)
                    if (g->cond[c].kind == FT_GATE_STALE ||
                        (g->cond[c].kind == FT_GATE_RAISES && vp->stale[j] == FT_STALE_RAISES))
                        hold(g, c, p, v, j, 1);
            if ((vp->dec[j] & FT_DEC_BUILD) && on_build(g, v, j, p))
                return ft_err_set(err, FT_ENOMEM, "out of memory");
        }
    }
    return FT_OK;
}

int ft_report_gate_new(const ft_gate_cond *conds, uint32_t n, const uint32_t *watch,
                       uint32_t n_watch, ft_report_gate **out, ft_err *err)
{
    *out = NULL;
    if (n > FT_GATE_MAX || n_watch > FT_MAX_POLICIES)
        return ft_err_set(err, FT_EINVAL, "more than %d --fail-on conditions", FT_GATE_MAX);
    ft_report_gate *g = ft_calloc(1, sizeof *g);
    if (!g) return ft_err_set(err, FT_ENOMEM, "out of memory");
    g->watch_all = watch == NULL;
    if (watch) memcpy(g->watch, watch, n_watch * sizeof *watch);
    g->n_watch = n_watch;
    memcpy(g->cond, conds, n * sizeof *conds);
    g->n_cond = n;
    for (uint32_t c = 0; c < n; c++)
        g->wants_steps |= conds[c].kind == FT_GATE_STEP_REBUILDS;
    g->obs = (ft_replay_observer){
        .ctx = g, .needs = FT_VIEW_DECISIONS, .begin_fn = gate_begin, .batch_fn = gate_batch};
    *out = g;
    return FT_OK;
}

const ft_replay_observer *ft_report_gate_observer(ft_report_gate *g)
{
    return &g->obs;
}

int ft_report_gate_verdict(const ft_report_gate *g, FILE *f, const char *prog, ft_err *err)
{
    uint32_t n_held = 0;
    for (uint32_t c = 0; c < g->n_cond; c++) {
        int held = 0;
        const ft_gate_cond *k = &g->cond[c];
        if (k->kind == FT_GATE_STEP_REBUILDS && !g->any_step)
            return ft_err_set(err, FT_EINVAL,
                              "--fail-on %s: the trace%s record no training step, so a step's "
                              "rebuilds cannot be counted",
                              k->text, g->trace ? "s" : "");
        for (uint32_t p = 0; p < g->n_pol; p++) {
            const ft_gate_hit *h = &g->hit[c][p];
            if (!h->held) continue;
            n_held += !held++;
            fprintf(f, "%s: --fail-on %s held under %s: first on seq %lld of %s (fuser %lld", prog,
                    k->text, ft_policy_name(h->policy), (long long)h->seq,
                    h->path ? h->path : "the trace", (long long)h->fuser_id);
            if (h->label[0]) fprintf(f, " '%s'", h->label);
            if (h->step >= 0) fprintf(f, ", step %lld", (long long)h->step);
            fprintf(f, "): ");
            switch (k->kind) {
            case FT_GATE_STALE:
            case FT_GATE_RAISES:
                fprintf(f, "a stale plan that %s",
                        h->stale == FT_STALE_RAISES   ? "raises in TE"
                        : h->stale == FT_STALE_QUANT  ? "quantizes otherwise"
                        : h->stale == FT_STALE_SLOWER ? "runs slower (unfused)"
                                                      : "fuses otherwise, same quantization");
                break;
            case FT_GATE_BUILDS:
                fprintf(f, "build %llu in all", (unsigned long long)h->count);
                break;
            case FT_GATE_FUSER_BUILDS:
                fprintf(f, "this fuser's build %llu", (unsigned long long)h->count);
                break;
            default:
                fprintf(f, "rebuild %llu in this step", (unsigned long long)h->count);
                break;
            }
            fputc('\n', f);
        }
    }
    if (!n_held) return FT_OK;
    return ft_err_set(err, FT_EGATE, "%u --fail-on condition%s held (exit status 4)", n_held,
                      n_held == 1 ? "" : "s");
}

void ft_report_gate_free(ft_report_gate *g)
{
    if (!g) return;
    ft_free(g->fuser_builds);
    ft_hmap_free(&g->step_rebuilds);
    for (uint32_t p = 0; p < FT_MAX_POLICIES; p++)
        ft_hmap_free(&g->built[p]);
    ft_free(g);
}
