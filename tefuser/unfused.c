/*
 * unfused.c - why a fusion does not happen (ft_model_why_unfused): for the first rule whose op
 * types a fuser has but that a fresh plan does not apply, every check that blocks it in one
 * answer: the import-time registration's failing checks (rules.c, ft_rule_registration_fails)
 * and the gate's, evaluated as if the rule were registered with the gate going on past each
 * failing check (ft_gate_ctx.fails), each with the value it read, what it needs, and where the
 * value came from: the capture, --env, or a default the model assumed (the env's sources,
 * env.c; the op attributes the capture recorded, ops.c).
 *
 * Limits: the first such rule only (registry order); at most FT_UNFUSED_MAX_BLOCKS checks; a
 * gate check that depends on an earlier one (the recipe's kind after "no recipe") is skipped
 * where the earlier one failed.
 */
#include "tefuser_int.h"

#include <stdio.h>
#include <string.h>

/* ---- one block: the value read, what the check needs, where the value came from ---------- */
static ft_unfused_block *next_block(ft_unfused_why *w)
{
    if (w->n_blocks >= FT_UNFUSED_MAX_BLOCKS) return NULL;
    ft_unfused_block *b = &w->block[w->n_blocks++];
    memset(b, 0, sizeof *b);
    return b;
}

static void env_source(const ft_env *e, ft_env_attr a, char *buf, size_t cap)
{
    if (e->src[a] == FT_ENV_OVERRIDE)
        snprintf(buf, cap, "--env");
    else if (e->src[a] == FT_ENV_CAPTURED)
        snprintf(buf, cap, "the capture");
    else
        snprintf(buf, cap, "assumed: %s; %s", ft_env_default_text(a),
                 e->ov[a] ? "--env removed it" : "the capture does not record it");
}

/* "env device_cc = '9.0'", "env cudnn_frontend = None", "env NVTE_... absent": a string is
 * quoted, null is None, and a missing key is said to be missing, never "= 0". */
static void env_block(ft_unfused_why *w, const ft_env *e, ft_env_attr a, const char *need)
{
    ft_unfused_block *b = next_block(w);
    if (!b) return;
    const char *name = ft_env_attr_name(a);
    const json_t *v = e->obj ? json_object_get(e->obj, name) : NULL;
    if (a == FT_EA_WRAP_WGRAD && !v && e->legacy_wgrad)
        v = json_object_get(e->obj, ft_env_legacy_wgrad_key());
    if (a >= FT_EA_WRAP_GLU && a <= FT_EA_WRAP_WGRAD) {
        char raw[64] = "";
        if (v && json_is_string(v))
            snprintf(raw, sizeof raw, " (env value '%s')", json_string_value(v));
        else if (v && json_is_null(v))
            snprintf(raw, sizeof raw, " (env value None)");
        snprintf(b->what, sizeof b->what, "%s cannot be imported%s", name, raw);
    } else if (!v)
        snprintf(b->what, sizeof b->what, "env %s absent", name);
    else if (json_is_null(v))
        snprintf(b->what, sizeof b->what, "env %s = None", name);
    else if (json_is_string(v))
        snprintf(b->what, sizeof b->what, "env %s = '%s'", name, json_string_value(v));
    else
        snprintf(b->what, sizeof b->what, "env %s = %s", name, json_is_true(v) ? "True" : "?");
    snprintf(b->need, sizeof b->need, "%s", need);
    env_source(e, a, b->source, sizeof b->source);
}

static void op_block(ft_unfused_why *w, const ft_op *ops, uint32_t n_ops, uint32_t op, ft_op_attr a,
                     const char *need)
{
    ft_unfused_block *b = next_block(w);
    if (!b) return;
    const ft_op *o = &ops[op < n_ops ? op : 0];
    char val[64];
    if (!ft_op_has_attr(o, a)) {
        snprintf(b->what, sizeof b->what, "op %u (%s) has no attribute %s", op, o->name,
                 ft_op_attr_name(a));
    } else {
        ft_op_attr_text(o, a, val, sizeof val);
        snprintf(b->what, sizeof b->what, "op %u (%s) %s = %s", op, o->name, ft_op_attr_name(a),
                 val);
    }
    snprintf(b->need, sizeof b->need, "%s", need);
    if (a == FT_OA_GRAD_OUTPUT_QUANTIZER)
        snprintf(b->source, sizeof b->source, "derived from the op and the recipe");
    else if (o->given >> a & 1)
        snprintf(b->source, sizeof b->source, "the capture");
    else
        snprintf(b->source, sizeof b->source,
                 "assumed: TE's constructor default; the capture does not record it");
}

static void recipe_block(ft_unfused_why *w, const ft_model *m, int32_t recipe,
                         const ft_recipe_model *r, ft_recipe_read rr, const char *need)
{
    ft_unfused_block *b = next_block(w);
    if (!b) return;
    char cls[96];
    ft_model_recipe_class(m, recipe, cls, sizeof cls);
    const int64_t v = ft_recipe_read_value(r, rr);
    if (recipe < 0)
        snprintf(b->what, sizeof b->what, "no recipe (quantization off)");
    else if (rr == FT_RR_BACKWARD_OVERRIDE)
        snprintf(b->what, sizeof b->what, "recipe %s backward_override = %s", cls,
                 v == FT_BO_NONE             ? "None"
                 : v == FT_BO_HIGH_PRECISION ? "'high_precision'"
                                             : "'dequantized'");
    else if (rr == FT_RR_DISABLE_RHT && v < 0)
        snprintf(b->what, sizeof b->what, "recipe %s has no disable_rht", cls);
    else
        snprintf(b->what, sizeof b->what, "recipe %s %s = %s", cls, ft_recipe_read_name(rr),
                 v ? "True" : "False");
    snprintf(b->need, sizeof b->need, "%s", need);
    snprintf(b->source, sizeof b->source, "the capture's recipe");
}

/* ---- the query ------------------------------------------------------------------------------ */
/* The gate of rule ri over the window at units[i], with every failing check recorded. */
static void gate_blocks(const ft_model *m, const oplist_m *fz, int32_t recipe, uint32_t ri,
                        const ft_gate_ctx *c0, const ft_unit *before, uint32_t nb,
                        ft_unfused_why *w, uint32_t *lo, uint32_t *hi)
{
    const ft_rule *rule = &ft_rules[ri];
    const ft_recipe_model *r = c0->recipe;
    for (uint32_t i = 0; i < nb; i++) {
        ft_gate_fails fails = {0};
        ft_gate_ctx c = *c0;
        c.fails = &fails;
        ft_last_read lr;
        if (!ft_rule_blocked_at(&c, (int16_t)ri, before, nb, i, &lr)) continue;
        const uint32_t last_u = i + rule->n_slots - 1 < nb ? i + rule->n_slots - 1 : nb - 1;
        *lo = before[i].lo;
        *hi = before[last_u].hi;
        for (uint32_t k = 0; k < fails.n; k++) {
            const ft_read *rd = &fails.f[k].what;
            if (rd->scope == FT_SCOPE_OP)
                op_block(w, fz->ops, fz->n_ops, fails.f[k].op, (ft_op_attr)rd->attr,
                         fails.f[k].need);
            else if (rd->scope == FT_SCOPE_RECIPE)
                recipe_block(w, m, recipe, r, (ft_recipe_read)rd->attr, fails.f[k].need);
            else
                env_block(w, &m->env, (ft_env_attr)rd->attr, fails.f[k].need);
        }
        return;
    }
}

/* The blocks in one sentence: "not registered: A (needs X; from S); the fuse_ops gate, ops
 * 0-2: B (needs Y; from T)". */
static void reason_text(ft_unfused_why *w, const ft_rule *rule, uint32_t lo, uint32_t hi)
{
    size_t n = 0;
    const size_t cap = sizeof w->reason;
    for (uint32_t k = 0; k < w->n_blocks && n < cap; k++) {
        const ft_unfused_block *b = &w->block[k];
        const char *head = "";
        char gate[160] = "";
        if (k == 0 && w->n_registration)
            head = "not registered: ";
        else if (k == w->n_registration) {
            snprintf(gate, sizeof gate, "the %s gate, ops %u-%u: ", rule->func, lo, hi);
            head = gate;
        }
        n += (size_t)snprintf(w->reason + n, cap - n, "%s%s%s (needs %s; %s%s)", k ? "; " : "",
                              head, b->what, b->need,
                              strncmp(b->source, "assumed", 7) ? "from " : "", b->source);
    }
}

int ft_model_why_unfused(const ft_model *m, uint32_t fuser, int32_t recipe, ft_unfused_why *out)
{
    memset(out, 0, sizeof *out);
    if (fuser >= m->n_fusers || recipe < -1 || (recipe >= 0 && (uint32_t)recipe >= m->n_recipes))
        return 0;
    const oplist_m *fz = ft_model_list(m, fuser);
    const ft_recipe_model *r = &ft_model_recipe_int(m, recipe)->pub;
    const uint32_t n = fz->n_ops;
    ft_unit *units = ft_malloc((size_t)(n ? n : 1) * 2 * sizeof *units);
    if (!units) return 0;
    ft_unit *joint = units, *after = units + n;
    for (uint32_t i = 0; i < n; i++)
        joint[i] = (ft_unit){-1, i, i};
    ft_gate_ctx c = {&m->env, r, fz->ops, NULL, NULL, NULL, NULL};
    uint32_t nj = n;
    ft_rules_apply_pass(&c, m->order[FT_PASS_JOINT], m->n_order[FT_PASS_JOINT], joint, &nj);
    int found = 0;
    for (uint32_t ri = 0; ri < ft_n_rules && !found; ri++) {
        const ft_rule *rule = &ft_rules[ri];
        if (!ft_rule_applicable(rule, fz->ops, n)) continue;
        /* the units this rule's pass sees, and whether the pass applies it */
        uint32_t na = nj;
        memcpy(after, joint, nj * sizeof *joint);
        const int pass = m->rule_pass[ri] >= 0 ? m->rule_pass[ri] : rule->pass;
        if (pass != FT_PASS_JOINT)
            ft_rules_apply_pass(&c, m->order[pass], m->n_order[pass], after, &na);
        int applied = 0;
        for (uint32_t u = 0; u < na && !applied; u++)
            applied = after[u].rule == (int16_t)ri;
        if (applied) continue;
        uint32_t lo = 0, hi = n ? n - 1 : 0;
        if (!m->registered[ri]) {
            ft_reg_check fails[FT_UNFUSED_MAX_BLOCKS];
            const uint32_t nf =
                ft_rule_registration_fails(ri, &m->env, fails, FT_UNFUSED_MAX_BLOCKS);
            for (uint32_t k = 0; k < nf && k < FT_UNFUSED_MAX_BLOCKS; k++)
                env_block(out, &m->env, (ft_env_attr)fails[k].attr, fails[k].need);
            if (!nf) {
                ft_unfused_block *b = next_block(out);
                snprintf(b->what, sizeof b->what, "%s absent from TE's registered fusions",
                         rule->func);
                snprintf(b->need, sizeof b->need, "registered");
                snprintf(b->source, sizeof b->source, "the capture's te_fusions");
            }
            out->n_registration = out->n_blocks;
        }
        /* the rule's window over the units before its own pass ran, as if it were registered */
        const ft_unit *before = pass == FT_PASS_JOINT ? after : joint;
        gate_blocks(m, fz, recipe, ri, &c, before, pass == FT_PASS_JOINT ? na : nj, out, &lo, &hi);
        if (out->n_blocks) {
            found = 1;
            out->func = rule->func;
            out->fused = rule->fused;
            out->env_empty = m->env.captured_empty;
            reason_text(out, rule, lo, hi);
        }
    }
    ft_free(units);
    return found;
}
