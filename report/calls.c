/*
 * calls.c - the writers over the replay's view, one line per decision: `--per-call` JSON lines
 * (one per call and policy) and `--explain` lines (one per build, naming what changed since the
 * fuser's previous call, from the view's FT_WHY_* bits; one per stale hit, naming what changed
 * since the build whose plan it runs), in call order, then policy order. The words are
 * causes.c's. An observer of the replay driver; it reads the view and the engine's model, and
 * only formats. Under a filter the --explain lines cover the counted calls.
 */
#include "report_int.h"

#include <string.h>

struct ft_report_calls {
    FILE *per_call, *explain; /* either may be NULL */
    ft_buf esc;               /* scratch: a per-call line's escaped plan text */
    ft_replay_observer obs;
};

/* "[explain] POLICY seq=N fuser=F (label): build because A -> B, C -> D" for a build, and
 * "[explain] POLICY seq=N fuser=F (label): reset, no build: stale (CLASS): runs the plan built at
 * seq M; since then A -> B" for a stale hit (what the key did not hold). */
static void explain_line(ft_report_calls *w, const ft_replay_view *v, uint32_t j, uint32_t p)
{
    FILE *o = w->explain;
    const ft_view_policy *vp = &v->pol[p];
    const ft_fuser_def *fd = ft_replay_fuser(v->engine, v->fuser[j]);
    const ft_model *m = ft_replay_model(v->engine);
    const int build = (vp->dec[j] & FT_DEC_BUILD) != 0, reset = (vp->dec[j] & FT_DEC_RESET) != 0;
    w->esc.len = 0;
    if (build) {
        const unsigned why = vp->why[j];
        report_change_text(&w->esc, m, v->fuser[j], why, v->prev_recipe[j], v->prev_f[j],
                           v->recipe[j], v->f[j], 1, NULL, NULL);
    } else {
        const unsigned bits =
            report_diff_bits(m, vp->src_recipe[j], vp->src_f[j], v->recipe[j], v->f[j]);
        report_change_text(&w->esc, m, v->fuser[j], bits, vp->src_recipe[j], vp->src_f[j],
                           v->recipe[j], v->f[j], 1, NULL, NULL);
    }
    fprintf(o, "[explain] %s seq=%lld fuser=%lld", ft_policy_name(vp->policy), (long long)v->seq[j],
            (long long)v->sid[j]);
    if (fd->label) fprintf(o, " (%s)", fd->label);
    if (build)
        fprintf(o, ": %s because %.*s\n", reset ? "reset+build" : "build", (int)w->esc.len,
                w->esc.data ? (const char *)w->esc.data : "");
    else
        fprintf(o,
                ": %s: stale (%s): runs the plan built at seq %lld; since then %.*s, which its "
                "key does not hold\n",
                reset ? "reset, no build" : "no build",
                ft_report_stale_label((ft_stale)vp->stale[j]), (long long)vp->src_seq[j],
                (int)w->esc.len, w->esc.data ? (const char *)w->esc.data : "");
}

/* {"seq":N,"fuser":F,"policy":"P","build":B,"reset":R,"plan":"...","stale":"S"} */
static int per_call_line(ft_report_calls *w, const ft_replay_view *v, uint32_t j, uint32_t p,
                         ft_err *err)
{
    const ft_view_policy *vp = &v->pol[p];
    const char *plan = ft_model_plan_text(ft_replay_model(v->engine), vp->plan[j]);
    w->esc.len = 0;
    if (ft_buf_json_str(&w->esc, plan ? plan : "", plan ? strlen(plan) : 0))
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    FILE *o = w->per_call;
    fprintf(o,
            "{\"seq\":%lld,\"fuser\":%lld,\"policy\":\"%s\",\"build\":%s,\"reset\":%s,"
            "\"plan\":",
            (long long)v->seq[j], (long long)v->sid[j], ft_policy_name(vp->policy),
            vp->dec[j] & FT_DEC_BUILD ? "true" : "false",
            vp->dec[j] & FT_DEC_RESET ? "true" : "false");
    fwrite(w->esc.data, 1, w->esc.len, o);
    fprintf(o, ",\"stale\":\"%s\"}\n", ft_stale_name((ft_stale)vp->stale[j]));
    return FT_OK;
}

static int calls_batch(void *ctx, const ft_replay_view *v, ft_err *err)
{
    ft_report_calls *w = ctx;
    for (uint32_t j = 0; j < v->n; j++)
        for (uint32_t p = 0; p < v->n_pol; p++) {
            const int stale_hit =
                !(v->pol[p].dec[j] & FT_DEC_BUILD) && v->pol[p].stale[j] != FT_STALE_NONE;
            if (w->explain && ((v->pol[p].dec[j] & FT_DEC_BUILD) || stale_hit) &&
                (!v->match || v->match[j]))
                explain_line(w, v, j, p);
            int rc = w->per_call ? per_call_line(w, v, j, p, err) : FT_OK;
            if (rc) return rc;
        }
    return FT_OK;
}

int ft_report_calls_new(FILE *per_call, FILE *explain, ft_report_calls **out, ft_err *err)
{
    *out = NULL;
    ft_report_calls *w = ft_calloc(1, sizeof *w);
    if (!w) return ft_err_set(err, FT_ENOMEM, "out of memory");
    w->per_call = per_call;
    w->explain = explain;
    w->obs = (ft_replay_observer){
        .ctx = w, .needs = explain ? FT_VIEW_CAUSES : FT_VIEW_DECISIONS, .batch_fn = calls_batch};
    *out = w;
    return FT_OK;
}

const ft_replay_observer *ft_report_calls_observer(ft_report_calls *w)
{
    return &w->obs;
}

void ft_report_calls_free(ft_report_calls *w)
{
    if (!w) return;
    ft_buf_free(&w->esc);
    ft_free(w);
}
