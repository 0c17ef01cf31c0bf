/*
 * classify.c - TE's run-time checks and the classification of a stale plan by its consequence
 * (docs/fuser-model.md, "Stale plans"): what running plan P with quantizer state Q under the
 * call's recipe would do, compared with the fresh plan.
 */
#include "tefuser_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- run-time checks and stale classification --------------------------------------------- */
const char *ft_stale_name(ft_stale s)
{
    static const char *const names[FT_STALE_COUNT] = {"none", "harmless", "slower", "quant",
                                                      "raises"};
    return (unsigned)s < FT_STALE_COUNT ? names[s] : "?";
}

static const char txt_non_rht[] =
    "graph safe grouped quant kernel for non-RHT path is not ready yet";
static const char txt_2d[] = "2D scaling grouped quant kernel is not ready yet";
static const char txt_4over6[] =
    "NVFP4 4over6 quantization is not supported for grouped quantization.";
static const char txt_bgrad[] =
    "bgrad_group_quantize: only MXFP8 and FP8 block-scaling quantizers are supported.";
static const char txt_single_grouped[] =
    "Single grouped parameters require the native grouped-tensor GroupedLinear path, which is "
    "unavailable for the current device, dtype, or quantization recipe. Disable "
    "single_grouped_weight/single_grouped_bias or use a supported grouped-tensor configuration.";
/* Not a TE message: TE has no check for this case (a fused grouped MLP run with quantizers that
 * are neither MXFP8 nor NVFP4, or none); the cuDNN kernels cannot consume them. */
static const char txt_fused_no_blockq[] =
    "fusertrace: fused grouped MLP run without MXFP8/NVFP4 quantizers (no TE check; the fused "
    "kernels require MXFP8 or NVFP4 data)";

/* Interned formatted text; a static fallback when memory runs out. */
static const char *errtext(const ft_model *m, const char *fallback, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static const char *errtext(const ft_model *m, const char *fallback, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    errtab *t = m->errs;
    for (uint32_t i = 0; i < t->n; i++)
        if (!strcmp(t->s[i], buf)) return t->s[i];
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 8;
        char **ns = ft_realloc(t->s, cap * sizeof *ns);
        if (!ns) return fallback;
        t->s = ns;
        t->cap = cap;
    }
    char *s = ft_strdup(buf);
    if (!s) return fallback;
    t->s[t->n++] = s;
    return s;
}

/* group_quantize_nvfp4_impl's checks, in its order, for a quantizer of this role. */
static const char *nvfp4_group_quantize_check(const ft_qstate *q, int weight)
{
    int twod = weight ? q->twod : 0; /* 2D: weight quantizers only */
    int scope = weight ? (q->four_over_six == 1 || q->four_over_six == 3)
                       : (q->four_over_six == 2 || q->four_over_six == 3);
    int rht = weight ? 0 : q->rht; /* RHT: never for weights */
    if (twod) return txt_2d;
    if (scope) return txt_4over6;
    if (!rht) return txt_non_rht;
    return NULL;
}

/* The fused grouped MLP over fc1 .. fc2 run with quantizer state q on T tokens (< 0: unknown,
 * taken as non-empty and aligned): what its forward raises first, or NULL. */
static const char *fused_mlp_forward(const ft_model *m, const ft_op *fc1, const ft_op *fc2,
                                     const ft_qstate *q, int64_t T)
{
    /* fuser_forward: input reshaped to (T, K1); T % 128 == 0 */
    if (T > 0 && T % 128)
        return errtext(m, "Unsupported input shape for fused grouped MLP",
                       "Unsupported input shape for fused grouped MLP (in_shape=[%lld, %lld]).",
                       (long long)T, (long long)fc1->v[FT_OA_IN_FEATURES]);
    if (q->cls == FT_RT_MXFP8) return NULL;
    if (q->cls != FT_RT_NVFP4) return txt_fused_no_blockq;
    if (fc1->v[FT_OA_NUM_GROUPS] != 1) {
        /* W1, W2 prep: a single grouped weight is group-quantized (G != 1) */
        const char *e = NULL;
        if (fc1->v[FT_OA_SINGLE_GROUPED_WEIGHT]) e = nvfp4_group_quantize_check(q, 1);
        if (!e && fc2->v[FT_OA_SINGLE_GROUPED_WEIGHT]) e = nvfp4_group_quantize_check(q, 1);
        /* FC1 input: tex.group_quantize, checks only for non-empty input */
        if (!e && T != 0) e = nvfp4_group_quantize_check(q, 0);
        if (e) return e;
    }
    return NULL;
}

/* What its backward raises (after a forward that ran): the dbias of a plain FC2 bias goes
 * through bgrad_group_quantize, which takes no NVFP4 quantizer. */
static const char *fused_mlp_backward(const ft_op *fc2, const ft_qstate *q)
{
    return q->cls == FT_RT_NVFP4 && fc2->v[FT_OA_BIAS] && !fc2->v[FT_OA_SCALE_BIAS] ? txt_bgrad
                                                                                    : NULL;
}

/* What running the forward (then, if f < n, the backward) of plan under recipe r with quantizer
 * state q raises first, or NULL. T = token count (< 0: unknown, taken as non-empty and
 * aligned). */
static const char *run_check(const ft_model *m, const oplist_m *fz, const ft_recipe_model *r,
                             const plan_m *p, const ft_qstate *q, int64_t T, uint32_t f)
{
    const char *bwd_err = NULL;
    int grad = f < fz->n_ops;
    int nonempty = T != 0;
    for (uint32_t u = 0; u < p->n_fwd; u++) {
        const ft_unit *un = &p->units[u];
        if (un->rule >= 0 && ft_rules[un->rule].grouped_mlp) {
            const ft_op *fc1 = &fz->ops[un->lo], *fc2 = &fz->ops[un->hi];
            const char *e = fused_mlp_forward(m, fc1, fc2, q, T);
            if (e) return e;
            if (grad && !bwd_err) bwd_err = fused_mlp_backward(fc2, q);
            continue;
        }
        if (un->rule >= 0) continue; /* other fused ops have no modelled run-time checks */
        const ft_op *op = &fz->ops[un->lo];
        switch (op->type) {
        case FT_OP_SCALED_SWIGLU:
        case FT_OP_SCALED_CLAMPED_QGEGLU:
        case FT_OP_SCALED_SRELU:
            if (op->v[FT_OA_ACT_RECOMPUTE])
                return errtext(m,
                               "activation_recompute_in_mlp=True requires the fused grouped MLP "
                               "path.",
                               "%s(activation_recompute_in_mlp=True) requires the fused grouped "
                               "MLP path.",
                               op->name);
            break;
        case FT_OP_GROUPED_LINEAR: {
            int gt = ft_grouped_tensor_path_supported(&m->env, r, (int)op->v[FT_OA_DTYPE]);
            if ((op->v[FT_OA_SINGLE_GROUPED_WEIGHT] || op->v[FT_OA_SINGLE_GROUPED_BIAS]) && !gt)
                return txt_single_grouped;
            if (gt && r->type != FT_RT_NONE && q->cls == FT_RT_NVFP4) {
                const char *e = nonempty ? nvfp4_group_quantize_check(q, 0) : NULL;
                if (!e && op->v[FT_OA_SINGLE_GROUPED_WEIGHT]) e = nvfp4_group_quantize_check(q, 1);
                if (e) return e;
            }
            break;
        }
        default:
            break;
        }
    }
    return bwd_err;
}

int ft_model_run_raises(const ft_model *m, uint32_t fuser, int32_t recipe, uint32_t plan,
                        const ft_qstate *q, int64_t n_tokens, uint32_t f, const char **text)
{
    if (text) *text = NULL;
    if (fuser >= m->n_fusers || plan >= m->n_plans) return 0;
    const char *e = run_check(m, ft_model_list(m, fuser), &ft_model_recipe_int(m, recipe)->pub,
                              &m->plans[plan], q, n_tokens, f);
    if (text) *text = e;
    return e != NULL;
}

const char *ft_model_fused_mlp_raises(const ft_model *m, uint32_t fuser, const ft_qstate *q,
                                      int64_t n_tokens, int backward)
{
    ft_grouped_mlp g;
    if (!ft_model_grouped_mlp(m, fuser, &g)) return NULL;
    const ft_op *fc1 = &ft_model_list(m, fuser)->ops[g.first];
    const ft_op *fc2 = &ft_model_list(m, fuser)->ops[g.first + 2];
    const char *e = fused_mlp_forward(m, fc1, fc2, q, n_tokens);
    if (!e && backward) e = fused_mlp_backward(fc2, q);
    return e;
}

/* Rule instance (rule, lo) of plan p at basic op i in the forward (pass 0) or backward units. */
static int has_instance(const plan_m *p, int16_t rule, uint32_t lo, uint32_t hi)
{
    for (uint32_t i = 0; i < p->n_fwd + p->n_bwd; i++)
        if (p->units[i].rule == rule && p->units[i].lo == lo && p->units[i].hi == hi) return 1;
    return 0;
}

static int rule_reads_bo(int16_t rule)
{
    const ft_rule *r = &ft_rules[rule];
    for (unsigned k = 0; k < r->n_reads; k++)
        if (r->reads[k].scope == FT_SCOPE_RECIPE && r->reads[k].attr == FT_RR_BACKWARD_OVERRIDE)
            return 1;
    return 0;
}

static int fuser_quantizes(const oplist_m *fz)
{
    for (uint32_t i = 0; i < fz->n_ops; i++)
        if (fz->ops[i].v[FT_OA_GRAD_OUTPUT_QUANTIZER] ||
            (fz->ops[i].type == FT_OP_QUANTIZE && fz->ops[i].v[FT_OA_QUANT_FORWARD]))
            return 1;
    return 0;
}

/* Classification (the chosen plan differs from the fresh one):
 * - raises: running the chosen plan with q raises in TE (run_check);
 * - quant: it runs, and the quantization differs from the fresh run's: the quantizers q differ
 *   from the fresh state (e.g. fused with RHT quantizers where the fresh plan is unfused
 *   non-RHT), or the chosen plan has a fusion whose gate now rejects it because of
 *   backward_override (Userbuffers / activation-bias fusions bypass the override);
 * - slower: the fresh plan has a fusion the chosen one lacks (unfused where fused is possible);
 * - harmless: the chosen plan only has extra fusions doing the same work (e.g. a fused grouped
 *   MLP with single-group NVFP4 non-RHT quantizers, which TE runs with tex.quantize).
 * The most severe applicable class wins. */
ft_stale ft_model_classify(const ft_model *m, uint32_t fuser, int32_t recipe, uint32_t chosen,
                           const ft_qstate *q, uint32_t fresh, int64_t n_tokens, uint32_t f,
                           const char **error_text)
{
    if (error_text) *error_text = NULL;
    if (chosen == fresh || fuser >= m->n_fusers || chosen >= m->n_plans || fresh >= m->n_plans)
        return FT_STALE_NONE;
    const oplist_m *fz = ft_model_list(m, fuser);
    const ft_recipe_model *r = &ft_model_recipe_int(m, recipe)->pub;
    const plan_m *pc = &m->plans[chosen], *pf = &m->plans[fresh];
    const char *e = run_check(m, fz, r, pc, q, n_tokens, f);
    if (e) {
        if (error_text) *error_text = e;
        return FT_STALE_RAISES;
    }
    ft_stale cls = FT_STALE_HARMLESS;
    ft_qstate fq;
    ft_model_fresh_qstate(m, recipe, &fq);
    if (r->type != FT_RT_NONE && fuser_quantizes(fz) && !ft_qstate_equal(q, &fq))
        cls = FT_STALE_QUANT;
    for (uint32_t i = 0; i < pc->n_fwd + pc->n_bwd; i++) {
        const ft_unit *u = &pc->units[i];
        if (u->rule < 0 || has_instance(pf, u->rule, u->lo, u->hi)) continue;
        if (rule_reads_bo(u->rule) && r->bo != FT_BO_NONE) cls = FT_STALE_QUANT;
    }
    if (cls < FT_STALE_SLOWER)
        for (uint32_t i = 0; i < pf->n_fwd + pf->n_bwd; i++) {
            const ft_unit *u = &pf->units[i];
            if (u->rule >= 0 && !has_instance(pc, u->rule, u->lo, u->hi)) cls = FT_STALE_SLOWER;
        }
    return cls;
}
