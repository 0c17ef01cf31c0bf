/*
 * plan.c - the fuser model proper: fusers and recipes parsed once, plans built as TE's
 * _apply_fusions does, interned and memoised, and the fusion-attrs key (docs/fuser-model.md).
 *
 * A plan is built as TE's _apply_fusions does: the joint pass over the basic ops, then the
 * forward and the backward passes each over the joint result, each validated by
 * _map_to_basic_ops. Its canonical text ("fwd[...] bwd[...]", one entry per unit: a basic op as
 * Class(i), a fused op as FusedClass(lo-hi)) is interned to a dense plan id, so plans of equal
 * topology share an id whatever fuser or boundary built them. Builds are memoised per
 * (fuser, recipe, f).
 */
#include "tefuser_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the model ---------------------------------------------------------------------------- */
void ft_model_set_audit(ft_model *m, uint8_t *flag)
{
    m->audit = flag;
}

/* Every recipe read value (-1..2) + 1 in its own byte: the fusion key hashes the bytes of the
 * reads a fuser's rules declare in one mix. */
_Static_assert(FT_RR_COUNT <= 8, "recipe reads are packed one byte each");
static uint64_t recipe_reads_packed(const ft_recipe_model *r)
{
    uint64_t v = 0;
    for (unsigned a = 0; a < FT_RR_COUNT; a++)
        v |= ((uint64_t)(ft_recipe_read_value(r, (ft_recipe_read)a) + 1) & 0xff) << (8 * a);
    return v;
}

static int list_key_init(ft_model *m, oplist_m *fz, int64_t fuser_id, ft_err *err)
{
    uint32_t rmask = 0, emask = 0;
    uint64_t *opmask = ft_calloc(fz->n_ops ? fz->n_ops : 1, sizeof *opmask);
    if (!opmask)
        return ft_err_set(err, FT_ENOMEM, "fuser %lld: out of memory", (long long)fuser_id);
    for (uint32_t ri = 0; ri < ft_n_rules; ri++) {
        const ft_rule *r = &ft_rules[ri];
        if (!m->registered[ri] || !ft_rule_applicable(r, fz->ops, fz->n_ops)) continue;
        for (unsigned k = 0; k < r->n_reads; k++) {
            const ft_read *rd = &r->reads[k];
            if (rd->scope == FT_SCOPE_RECIPE)
                rmask |= 1u << rd->attr;
            else if (rd->scope == FT_SCOPE_ENV)
                emask |= 1u << rd->attr;
            else
                for (uint32_t i = 0; i < fz->n_ops; i++) {
                    uint64_t types = r->slots[rd->slot].types;
                    if ((!types || (types & FT_OPB(fz->ops[i].type))) &&
                        ft_op_has_attr(&fz->ops[i], (ft_op_attr)rd->attr))
                        opmask[i] |= 1ull << rd->attr;
                }
        }
    }
    ft_buf b = {0};
    uint64_t h = ft_hash64("fusion-attrs", 12);
    h = ft_hash_mix(h, rmask);
    int rc = FT_OK;
    for (unsigned a = 0; a < FT_RR_COUNT && !rc; a++)
        if (rmask & (1u << a))
            rc = ft_buf_printf(&b, "%srecipe.%s", b.len ? "," : "", ft_recipe_read_name(a));
    for (uint32_t i = 0; i < fz->n_ops && !rc; i++)
        for (unsigned a = 0; a < FT_OA_COUNT && !rc; a++)
            if (opmask[i] & (1ull << a)) {
                h = ft_hash_mix(ft_hash_mix(h, i), a);
                h = ft_op_attr_hash(&fz->ops[i], (ft_op_attr)a, h);
                rc = ft_buf_printf(&b, "%sop[%u].%s", b.len ? "," : "", i,
                                   ft_op_attr_name((ft_op_attr)a));
            }
    for (unsigned a = 0; a < FT_EA_COUNT && !rc; a++)
        if (emask & (1u << a)) {
            h = ft_hash_mix(ft_hash_mix(h, 0xe000u + a), (uint64_t)m->env.v[a]);
            rc = ft_buf_printf(&b, "%senv.%s", b.len ? "," : "", ft_env_attr_name(a));
        }
    ft_free(opmask);
    if (!rc) fz->key_attrs = ft_strndup(b.data ? (const char *)b.data : "", b.len);
    ft_buf_free(&b);
    if (rc || !fz->key_attrs)
        return ft_err_set(err, FT_ENOMEM, "fuser %lld: out of memory", (long long)fuser_id);
    fz->recipe_reads = rmask;
    fz->recipe_bytes = 0;
    for (unsigned a = 0; a < FT_RR_COUNT; a++)
        if (rmask & (1u << a)) fz->recipe_bytes |= 0xffull << (8 * a);
    fz->const_key = h;
    return FT_OK;
}

/* The op list of a fuser declaration: the one parsed for the same JSON string (a trace shares one
 * per op list) or the same JSON text, else a new one, parsed and keyed here. */
static int fuser_list(ft_model *m, const ft_fuser_def *def, uint32_t *out, ft_err *err)
{
    const uint64_t ptr = (uint64_t)(uintptr_t)def->ops_json;
    uint32_t got = ft_hmap_get(&m->list_by_ptr, ptr);
    if (got != UINT32_MAX) {
        *out = got;
        m->lists[got].n_fusers++;
        return FT_OK;
    }
    const uint64_t h = ft_hash64(def->ops_json, strlen(def->ops_json));
    got = ft_hmap_get(&m->list_by_hash, h);
    /* a hash collision between two texts leaves the second unshared: correct, only slower */
    if (got == UINT32_MAX || strcmp(m->lists[got].json, def->ops_json)) {
        if (m->n_lists == m->cap_lists) {
            uint32_t cap = m->cap_lists ? 2 * m->cap_lists : 16;
            oplist_m *nl = ft_realloc(m->lists, cap * sizeof *nl);
            if (!nl) return ft_err_set(err, FT_ENOMEM, "model: out of memory");
            memset(nl + m->cap_lists, 0, (cap - m->cap_lists) * sizeof *nl);
            m->lists = nl;
            m->cap_lists = cap;
        }
        oplist_m *ol = &m->lists[m->n_lists];
        ol->json = def->ops_json;
        ol->hash = h;
        int rc = ft_ops_parse(def->ops_json, def->id, m->env.v[FT_EA_WORLD_SIZE], &ol->ops,
                              &ol->n_ops, err);
        if (rc) return rc;
        got = m->n_lists++;
        if ((rc = list_key_init(m, ol, def->id, err))) return rc;
        if (ft_hmap_get(&m->list_by_hash, h) == UINT32_MAX && ft_hmap_put(&m->list_by_hash, h, got))
            return ft_err_set(err, FT_ENOMEM, "model: out of memory");
    }
    if (ft_hmap_put(&m->list_by_ptr, ptr, got))
        return ft_err_set(err, FT_ENOMEM, "model: out of memory");
    m->lists[got].n_fusers++;
    *out = got;
    return FT_OK;
}

/* A redeclaration of an instance (of): the fuser it continues, the same op classes, and a note
 * on what changed (docs/fuser-model.md, "Op attributes changed after a call"). */
static int fuser_instance_init(ft_model *m, const ft_fuser_def *defs, uint32_t i, ft_err *err)
{
    fuser_m *fu = &m->fusers[i];
    const oplist_m *fz = &m->lists[fu->cls];
    fu->inst = i;
    if (!defs[i].has_of) return FT_OK;
    uint32_t j = 0;
    while (j < i && m->fusers[j].id != defs[i].of)
        j++;
    if (j == i)
        return ft_err_set(err, FT_EINVAL,
                          "fuser %lld: field 'of': fuser %lld is not declared before",
                          (long long)fu->id, (long long)defs[i].of);
    const fuser_m *pu = &m->fusers[j];
    const oplist_m *prev = &m->lists[pu->cls];
    if (prev->n_ops != fz->n_ops)
        return ft_err_set(err, FT_EINVAL,
                          "fuser %lld: field 'of': has %u ops, fuser %lld %u (an instance keeps "
                          "its ops)",
                          (long long)fu->id, fz->n_ops, (long long)pu->id, prev->n_ops);
    for (uint32_t k = 0; k < fz->n_ops; k++)
        if (strcmp(fz->ops[k].name, prev->ops[k].name))
            return ft_err_set(err, FT_EINVAL,
                              "fuser %lld: field 'of': op %u is %s where fuser %lld has %s (an "
                              "instance keeps its op classes; only their attributes change)",
                              (long long)fu->id, k, fz->ops[k].name, (long long)pu->id,
                              prev->ops[k].name);
    fu->inst = pu->inst;
    /* what changed, and whether a fusion rule of this fuser reads it */
    char what[240] = "";
    size_t o = 0;
    int read = 0;
    for (uint32_t k = 0; k < fz->n_ops && o < sizeof what; k++)
        for (int a = 0; a < FT_OA_COUNT && o < sizeof what; a++) {
            const ft_op *x = &prev->ops[k], *y = &fz->ops[k];
            if (!ft_op_has_attr(y, (ft_op_attr)a) ||
                (x->v[a] == y->v[a] && !memcmp(&x->f[a], &y->f[a], sizeof x->f[a])))
                continue;
            char needle[64]; /* in this fuser's fusion key: a rule reads it */
            snprintf(needle, sizeof needle, "op[%u].%s", k, ft_op_attr_name((ft_op_attr)a));
            const size_t nl = strlen(needle);
            for (const char *h = fz->key_attrs; (h = strstr(h, needle)); h += nl)
                read |= h[nl] == ',' || !h[nl];
            o += (size_t)snprintf(what + o, sizeof what - o, "%sop %u %s", o ? ", " : "", k,
                                  ft_op_attr_name((ft_op_attr)a));
        }
    char field[64];
    snprintf(field, sizeof field, "fuser %lld", (long long)fu->id);
    int rc;
    if (!what[0])
        rc = ft_model_note_add(m, FT_NOTE_ATTR_CHANGE, field, NULL,
                               "fuser %lld continues fuser %lld with no attribute the model reads "
                               "changed",
                               (long long)fu->id, (long long)pu->id);
    else
        rc = ft_model_note_add(
            m, FT_NOTE_ATTR_CHANGE, field, NULL,
            "fuser %lld continues fuser %lld after its op attributes changed (%s)%s",
            (long long)fu->id, (long long)pu->id, what,
            read
                ? ": TE sees them only when it builds a plan again (before PR 3410 at the next "
                  "key change, at PR 3410's head never for keys it has cached); until then it runs "
                  "the plan built before the change, which the replay counts as stale where the "
                  "plans differ"
                : ": no fusion rule of this fuser reads them, so the plans stay the same");
    return rc ? ft_err_set(err, rc, "model: out of memory") : FT_OK;
}

int ft_model_new(const ft_fuser_def *fusers, uint32_t n_fusers, const ft_recipe_def *recipes,
                 uint32_t n_recipes, const ft_model_capture *cap, const ft_env_kv *overrides,
                 uint32_t n_overrides, ft_model **out, ft_err *err)
{
    *out = NULL;
    if (ft_n_rules > FT_MAX_RULES)
        return ft_err_set(err, FT_EUNSUPPORTED, "rule table too large (%u rows)", ft_n_rules);
    ft_model *m = ft_calloc(1, sizeof *m);
    if (!m) return ft_err_set(err, FT_ENOMEM, "model: out of memory");
    int rc = ft_env_parse(cap, overrides, n_overrides, &m->env, err);
    if (!rc) rc = ft_model_registry_init(m, cap, err);
    if (rc) goto fail;
    ft_recipe_none(&m->none);
    m->none.reads = recipe_reads_packed(&m->none.pub);

    m->errs = ft_calloc(1, sizeof *m->errs);
    m->fusers = ft_calloc(n_fusers ? n_fusers : 1, sizeof *m->fusers);
    m->recipes = ft_calloc(n_recipes ? n_recipes : 1, sizeof *m->recipes);
    if (!m->errs || !m->fusers || !m->recipes) {
        rc = ft_err_set(err, FT_ENOMEM, "model: out of memory");
        goto fail;
    }
    uint32_t max_ops = 1;
    for (uint32_t i = 0; i < n_fusers; i++) {
        fuser_m *fu = &m->fusers[i];
        fu->id = fusers[i].id;
        if ((rc = fuser_list(m, &fusers[i], &fu->cls, err))) goto fail;
        m->n_fusers = i + 1;
        const oplist_m *fz = &m->lists[fu->cls];
        if (fusers[i].n_ops != fz->n_ops) {
            rc = ft_err_set(err, FT_EINVAL, "fuser %lld: declares %u ops but its ops JSON has %u",
                            (long long)fu->id, fusers[i].n_ops, fz->n_ops);
            goto fail;
        }
        if ((rc = fuser_instance_init(m, fusers, i, err))) goto fail;
        if (fz->n_ops > max_ops) max_ops = fz->n_ops;
    }
    for (uint32_t i = 0; i < n_recipes; i++) {
        rc = ft_recipe_parse(&recipes[i], &m->env, &m->recipes[i], err);
        if (rc) goto fail;
        m->n_recipes = i + 1;
        /* type(recipe): TE's own classes are their type; each subclass name its own class */
        ft_recipe_int *rn = &m->recipes[i];
        rn->pub.cls = (int32_t)rn->pub.type;
        if (strcmp(recipes[i].type, ft_recipe_type_name(rn->pub.type))) {
            int32_t next = FT_RT_COUNT, same = -1;
            for (uint32_t j = 0; j < i && same < 0; j++) {
                const int32_t cj = m->recipes[j].pub.cls;
                if (cj < FT_RT_COUNT) continue;
                if (!strcmp(recipes[j].type, recipes[i].type)) same = cj;
                if (cj >= next) next = cj + 1;
            }
            rn->pub.cls = same >= 0 ? same : next;
        }
        /* NVFP4 QParams are derived once, in __post_init__: a later declaration of the same
         * object (mutated attributes, capture-jsonl "obj") keeps the flags of its first one. */
        ft_recipe_int *ri = &m->recipes[i];
        ri->reads = recipe_reads_packed(&ri->pub);
        if (ri->pub.type != FT_RT_NVFP4 || ri->qparams_recorded) continue;
        for (uint32_t j = 0; j < i; j++) {
            const ft_recipe_int *rj = &m->recipes[j];
            if (rj->pub.obj == ri->pub.obj && rj->pub.type == FT_RT_NVFP4) {
                ft_recipe_set_qflags(ri, rj->pub.q_rht, rj->pub.q_sr, rj->pub.q_2d);
                break;
            }
        }
    }
    if ((rc = ft_model_notes_init(m, err))) goto fail;
    m->scratch_cap = 3 * max_ops;
    m->scratch = ft_malloc(m->scratch_cap * sizeof *m->scratch);
    if (!m->scratch) {
        rc = ft_err_set(err, FT_ENOMEM, "model: out of memory");
        goto fail;
    }
    *out = m;
    return FT_OK;
fail:
    ft_model_free(m);
    return rc;
}

void ft_model_free(ft_model *m)
{
    if (!m) return;
    json_decref(m->env.obj);
    for (uint32_t i = 0; i < m->n_lists; i++) {
        ft_ops_free(m->lists[i].ops, m->lists[i].n_ops);
        ft_free(m->lists[i].key_attrs);
    }
    /* a list whose parse failed half-way owns nothing (ft_ops_parse cleans up) */
    ft_free(m->lists);
    ft_free(m->fusers);
    ft_hmap_free(&m->list_by_ptr);
    ft_hmap_free(&m->list_by_hash);
    for (uint32_t i = 0; i < m->n_recipes; i++)
        ft_recipe_int_free(&m->recipes[i]);
    ft_free(m->recipes);
    for (uint32_t i = 0; i < m->n_plans; i++) {
        ft_free(m->plans[i].text);
        ft_free(m->plans[i].units);
    }
    ft_free(m->plans);
    ft_hmap_free(&m->intern);
    ft_hmap_free(&m->memo);
    ft_free(m->scratch);
    ft_free(m->notes);
    if (m->errs) {
        for (uint32_t i = 0; i < m->errs->n; i++)
            ft_free(m->errs->s[i]);
        ft_free(m->errs->s);
        ft_free(m->errs);
    }
    ft_free(m);
}

int64_t ft_model_world_size(const ft_model *m)
{
    return m->env.v[FT_EA_WORLD_SIZE];
}

int64_t ft_model_rank(const ft_model *m)
{
    return m->env.v[FT_EA_RANK];
}

uint32_t ft_model_fuser_instance(const ft_model *m, uint32_t fuser)
{
    return fuser < m->n_fusers ? m->fusers[fuser].inst : fuser;
}

uint32_t ft_model_n_fusers(const ft_model *m)
{
    return m->n_fusers;
}

uint32_t ft_model_n_ops(const ft_model *m, uint32_t fuser)
{
    return fuser < m->n_fusers ? ft_model_list(m, fuser)->n_ops : 0;
}

uint32_t ft_model_n_lists(const ft_model *m)
{
    return m->n_lists;
}

uint32_t ft_model_fuser_list(const ft_model *m, uint32_t fuser)
{
    return fuser < m->n_fusers ? m->fusers[fuser].cls : 0;
}

const ft_recipe_model *ft_model_recipe(const ft_model *m, int32_t recipe)
{
    return &ft_model_recipe_int(m, recipe)->pub;
}

const char *ft_model_recipe_canon(const ft_model *m, int32_t recipe)
{
    const ft_recipe_int *r = ft_model_recipe_int(m, recipe);
    return r->canon ? r->canon : "None";
}

uint32_t ft_model_n_plans(const ft_model *m)
{
    return m->n_plans;
}

/* ---- plans -------------------------------------------------------------------------------- */
static int units_text(ft_buf *b, const ft_unit *u, uint32_t n, const ft_op *ops)
{
    int rc = FT_OK;
    for (uint32_t i = 0; i < n && !rc; i++) {
        if (u[i].rule < 0)
            rc = ft_buf_printf(b, "%s%s(%u)", i ? "," : "", ops[u[i].lo].name, u[i].lo);
        else if (u[i].lo == u[i].hi)
            rc = ft_buf_printf(b, "%s%s(%u)", i ? "," : "", ft_rules[u[i].rule].fused, u[i].lo);
        else
            rc = ft_buf_printf(b, "%s%s(%u-%u)", i ? "," : "", ft_rules[u[i].rule].fused, u[i].lo,
                               u[i].hi);
    }
    return rc;
}

/* Intern the plan text; copies units on first sight. */
static int plan_intern(ft_model *m, const ft_buf *text, const ft_unit *fwd, uint32_t n_fwd,
                       const ft_unit *bwd, uint32_t n_bwd, uint32_t *id)
{
    uint64_t h = ft_hash64(text->data, text->len);
    /* the map holds the first plan of each text hash; a colliding text comes later in plans[] */
    const uint32_t first = ft_hmap_get(&m->intern, h);
    for (uint32_t i = first; first != UINT32_MAX && i < m->n_plans; i++) {
        const plan_m *p = &m->plans[i];
        if (p->hash == h && strlen(p->text) == text->len &&
            !memcmp(p->text, text->data, text->len)) {
            *id = i;
            return FT_OK;
        }
    }
    if (first == UINT32_MAX && ft_hmap_put(&m->intern, h, m->n_plans)) return FT_ENOMEM;
    if (m->n_plans == m->cap_plans) {
        uint32_t cap = m->cap_plans ? m->cap_plans * 2 : 16;
        plan_m *np = ft_realloc(m->plans, cap * sizeof *np);
        if (!np) return FT_ENOMEM;
        m->plans = np;
        m->cap_plans = cap;
    }
    plan_m *p = &m->plans[m->n_plans];
    memset(p, 0, sizeof *p);
    p->text = ft_strndup((const char *)text->data, text->len);
    p->units = ft_malloc((n_fwd + n_bwd ? n_fwd + n_bwd : 1) * sizeof *p->units);
    if (!p->text || !p->units) {
        ft_free(p->text);
        ft_free(p->units);
        return FT_ENOMEM;
    }
    memcpy(p->units, fwd, n_fwd * sizeof *fwd);
    memcpy(p->units + n_fwd, bwd, n_bwd * sizeof *bwd);
    p->n_fwd = n_fwd;
    p->n_bwd = n_bwd;
    p->hash = h;
    for (uint32_t i = 0; i < n_fwd + n_bwd; i++)
        if (p->units[i].rule >= 0 && ft_rules[p->units[i].rule].grouped_mlp) p->fused_mlp = 1;
    *id = m->n_plans++;
    return FT_OK;
}

/* Memo key of a build: (op list, recipe + 1, f) packed into 24 + 24 + 16 bits; builds outside
 * those ranges are not memoised (UINT64_MAX). Every fuser of an op list shares its builds: the
 * fusion passes read the ops, the recipe and the env, never the fuser. */
static uint64_t memo_key(uint32_t list, int32_t recipe, uint32_t f)
{
    const uint64_t r1 = (uint64_t)(int64_t)recipe + 1;
    if (list >= (1u << 24) || r1 >= (1u << 24) || f >= (1u << 16)) return UINT64_MAX;
    return (uint64_t)list << 40 | r1 << 16 | f;
}

int ft_model_build(ft_model *m, uint32_t fuser, int32_t recipe, uint32_t f, uint32_t *plan_id,
                   ft_err *err)
{
    if (fuser >= m->n_fusers)
        return ft_err_set(err, FT_EINVAL, "build: fuser index %u out of range (%u fusers)", fuser,
                          m->n_fusers);
    if (recipe < -1 || (recipe >= 0 && (uint32_t)recipe >= m->n_recipes))
        return ft_err_set(err, FT_EINVAL, "build: recipe index %d out of range (%u recipes)",
                          recipe, m->n_recipes);
    const fuser_m *fu = &m->fusers[fuser];
    const oplist_m *fz = &m->lists[fu->cls];
    if (f > fz->n_ops)
        return ft_err_set(err, FT_EINVAL, "build: fuser %lld: boundary f=%u exceeds %u ops",
                          (long long)fu->id, f, fz->n_ops);
    const uint64_t key = memo_key(fu->cls, recipe, f);
    const uint32_t memo = key == UINT64_MAX ? UINT32_MAX : ft_hmap_get(&m->memo, key);
    if (memo != UINT32_MAX) {
        *plan_id = memo;
        return FT_OK;
    }
    /* _apply_fusions: joint, then forward and backward each from the joint list. No fusion
     * function reads f (their signature is func(ops, *, recipe)), so f only keys the memo. */
    uint32_t n = fz->n_ops;
    ft_unit *joint = m->scratch, *fwd = m->scratch + n, *bwd = m->scratch + 2 * n;
    for (uint32_t i = 0; i < n; i++)
        joint[i] = (ft_unit){-1, i, i};
    ft_gate_ctx c = {&m->env, &ft_model_recipe_int(m, recipe)->pub, fz->ops, NULL, m->audit, NULL,
                     NULL};
    uint32_t nj = n, nf, nb;
    ft_rules_apply_pass(&c, m->order[FT_PASS_JOINT], m->n_order[FT_PASS_JOINT], joint, &nj);
    memcpy(fwd, joint, nj * sizeof *joint);
    memcpy(bwd, joint, nj * sizeof *joint);
    nf = nb = nj;
    ft_rules_apply_pass(&c, m->order[FT_PASS_FWD], m->n_order[FT_PASS_FWD], fwd, &nf);
    ft_rules_apply_pass(&c, m->order[FT_PASS_BWD], m->n_order[FT_PASS_BWD], bwd, &nb);
    int rc = ft_map_to_basic(fwd, nf, fz->ops, n, fu->id, err);
    if (!rc) rc = ft_map_to_basic(bwd, nb, fz->ops, n, fu->id, err);
    if (rc) return rc;
    ft_buf text = {0};
    rc = ft_buf_printf(&text, "fwd[");
    if (!rc) rc = units_text(&text, fwd, nf, fz->ops);
    if (!rc) rc = ft_buf_printf(&text, "] bwd[");
    if (!rc) rc = units_text(&text, bwd, nb, fz->ops);
    if (!rc) rc = ft_buf_printf(&text, "]");
    uint32_t id = 0;
    if (!rc) rc = plan_intern(m, &text, fwd, nf, bwd, nb, &id);
    ft_buf_free(&text);
    if (!rc && key != UINT64_MAX) rc = ft_hmap_put(&m->memo, key, id);
    if (rc)
        return ft_err_set(err, FT_ENOMEM, "build: fuser %lld: out of memory", (long long)fu->id);
    m->n_built++;
    *plan_id = id;
    return FT_OK;
}

uint64_t ft_model_n_built(const ft_model *m)
{
    return m->n_built;
}

const char *ft_model_plan_text(const ft_model *m, uint32_t plan_id)
{
    return plan_id < m->n_plans ? m->plans[plan_id].text : NULL;
}

int ft_model_plan_fused_mlp(const ft_model *m, uint32_t plan_id)
{
    return plan_id < m->n_plans ? m->plans[plan_id].fused_mlp : 0;
}

/* ---- fusion-attrs key --------------------------------------------------------------------- */
uint64_t ft_model_fusion_key(const ft_model *m, uint32_t fuser, int32_t recipe)
{
    if (fuser >= m->n_fusers) return 0;
    const oplist_m *fz = ft_model_list(m, fuser);
    const ft_recipe_int *r = ft_model_recipe_int(m, recipe);
    uint64_t h = fz->const_key;
    return ft_hash_mix(h, r->reads & fz->recipe_bytes);
}

const char *ft_model_fusion_key_attrs(const ft_model *m, uint32_t fuser)
{
    return fuser < m->n_fusers ? ft_model_list(m, fuser)->key_attrs : "";
}

/* ---- the grouped MLP a fuser holds -------------------------------------------------------- */
int ft_model_grouped_mlp(const ft_model *m, uint32_t fuser, ft_grouped_mlp *d)
{
    memset(d, 0, sizeof *d);
    if (fuser >= m->n_fusers) return 0;
    const ft_op *ops = ft_model_list(m, fuser)->ops;
    const uint32_t n = ft_model_list(m, fuser)->n_ops;
    for (uint32_t i = 0; i + 2 < n; i++) {
        const ft_op *a = &ops[i], *b = &ops[i + 1], *c = &ops[i + 2];
        if (a->type != FT_OP_GROUPED_LINEAR || c->type != FT_OP_GROUPED_LINEAR) continue;
        int scaled = 0, act;
        switch (b->type) {
        case FT_OP_SCALED_SWIGLU:
            scaled = 1; /* fall through */
        case FT_OP_SWIGLU:
            act = FT_MLP_SWIGLU;
            break;
        case FT_OP_SCALED_CLAMPED_QGEGLU:
            scaled = 1; /* fall through */
        case FT_OP_CLAMPED_SWIGLU:
            act = FT_MLP_CLAMPED_QGEGLU;
            break;
        case FT_OP_SCALED_SRELU:
            scaled = 1; /* fall through */
        case FT_OP_SRELU:
            act = FT_MLP_SRELU;
            break;
        default:
            continue;
        }
        const int glu = act != FT_MLP_SRELU;
        int64_t k1 = a->v[FT_OA_IN_FEATURES], n1 = a->v[FT_OA_OUT_FEATURES];
        int64_t k2 = c->v[FT_OA_IN_FEATURES], n2 = c->v[FT_OA_OUT_FEATURES];
        int64_t G = a->v[FT_OA_NUM_GROUPS];
        if (k1 < 1 || k2 < 1 || n2 < 1 || (glu && k2 > INT64_MAX / 2) ||
            n1 != (glu ? 2 * k2 : k2) || G < 1 || G != c->v[FT_OA_NUM_GROUPS] || G > (1 << 20))
            continue;
        d->first = i;
        d->groups = (uint32_t)G;
        d->k1 = k1, d->n1 = n1, d->k2 = k2, d->n2 = n2;
        d->act = (uint8_t)act;
        d->scaled = (uint8_t)scaled;
        d->bias1 = a->v[FT_OA_BIAS] != 0;
        d->bias2 = c->v[FT_OA_BIAS] != 0;
        d->scale_bias = d->bias2 && c->v[FT_OA_SCALE_BIAS] != 0 && scaled;
        if (glu) d->interleave = b->v[FT_OA_GLU_INTERLEAVE] == 32 ? 32 : 0;
        if (act == FT_MLP_CLAMPED_QGEGLU) {
            d->limit = b->f[FT_OA_LIMIT];
            d->alpha = b->f[FT_OA_ALPHA];
            d->offset = b->f[FT_OA_GLU_LINEAR_OFFSET];
        }
        return 1;
    }
    return 0;
}
