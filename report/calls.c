/*
 * calls.c - the writers over the replay's view, one line per decision: `--per-call` JSON lines
 * (one per call and policy) and `--explain` lines (one per build, naming what changed since the
 * fuser's previous call, from the view's FT_WHY_* bits), in call order, then policy order. An
 * observer of the replay driver; it reads the view and the engine's model, and only formats.
 */
#include "report_int.h"

#include <string.h>

struct ft_report_calls {
    FILE *per_call, *explain; /* either may be NULL */
    ft_buf esc;               /* scratch: a per-call line's escaped plan text */
    ft_replay_observer obs;
};

const char *report_cause_name(unsigned bit)
{
    switch (bit) {
    case FT_WHY_FIRST:
        return "first sight of this fuser";
    case FT_WHY_TYPE:
        return "recipe type";
    case FT_WHY_F:
        return "f";
    case FT_WHY_BO:
        return "backward_override";
    case FT_WHY_HIST:
        return "amax_history_len";
    case FT_WHY_ATTRS:
        return "recipe attrs";
    case FT_WHY_OBJECT:
        return "recipe object";
    case FT_WHY_NOT_CACHED:
        return "nothing changed since the fuser's previous call";
    default:
        return "?";
    }
}

/* "[explain] POLICY seq=N fuser=F (label): build because A -> B, C -> D" */
static void explain_line(FILE *o, const ft_replay_view *v, uint32_t j, uint32_t p)
{
    const ft_view_policy *vp = &v->pol[p];
    const ft_fuser_def *fd = ft_replay_fuser(v->engine, v->fuser[j]);
    const unsigned why = vp->why[j];
    fprintf(o, "[explain] %s seq=%lld fuser=%lld", ft_policy_name(vp->policy), (long long)v->seq[j],
            (long long)v->sid[j]);
    if (fd->label) fprintf(o, " (%s)", fd->label);
    fprintf(o, ": %s because ", vp->dec[j] & FT_DEC_RESET ? "reset+build" : "build");
    if (why & FT_WHY_FIRST) {
        fprintf(o, "%s\n", report_cause_name(FT_WHY_FIRST));
        return;
    }
    const ft_model *m = ft_replay_model(v->engine);
    const ft_recipe_model *a = ft_model_recipe(m, v->prev_recipe[j]);
    const ft_recipe_model *c = ft_model_recipe(m, v->recipe[j]);
    const char *sep = "";
    if (why & FT_WHY_TYPE) {
        fprintf(o, "recipe type %s -> %s", ft_recipe_type_name(a->type),
                ft_recipe_type_name(c->type));
        sep = ", ";
    }
    if (why & FT_WHY_F) {
        fprintf(o, "%sf %u -> %u", sep, v->prev_f[j], v->f[j]);
        sep = ", ";
    }
    if (why & FT_WHY_BO) {
        fprintf(o, "%sbackward_override %s -> %s", sep, ft_bo_name(a->bo), ft_bo_name(c->bo));
        sep = ", ";
    }
    if (why & FT_WHY_HIST) {
        fprintf(o, "%samax_history_len %lld -> %lld", sep, (long long)a->amax_history_len,
                (long long)c->amax_history_len);
        sep = ", ";
    }
    if (why & FT_WHY_ATTRS) {
        fprintf(o, "%srecipe attrs (same type, other attribute values)", sep);
        sep = ", ";
    }
    if (why & FT_WHY_OBJECT) fprintf(o, "%srecipe object (same attributes, another object)", sep);
    if (why & FT_WHY_NOT_CACHED)
        fprintf(o, "%s (key not cached)", report_cause_name(FT_WHY_NOT_CACHED));
    fputc('\n', o);
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
            if (w->explain && (v->pol[p].dec[j] & FT_DEC_BUILD)) explain_line(w->explain, v, j, p);
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
