/*
 * synth_recipes.c - the generator's recipe objects and their schedule: every dataclass field of
 * TE's recipe table (tefuser) as a new object carries it, objects made from a spec
 * "TYPE[:attr=value...]", mutated in place or cloned into new identities, declared to the sink
 * once per (obj, attrs); which object each layer runs under at each step (BF16 first/last
 * layers, per-layer recipes, switches, detours, disable_rht flips, backward_override and
 * amax_history_len cycles).
 */
#include "synth_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

/* ---- recipe types: every dataclass field of TE's recipe table (tefuser) ------------------- */

typedef struct rfield {
    const char *name;  /* dataclass field, fields sorted by name (canonical JSON) */
    int kind;          /* F_*; F_FIXED cannot be set from a spec */
    const char *def;   /* a new object's value as JSON text */
    const char *enums; /* F_ENUM / F_BO: allowed names, '|'-separated */
    char enums_buf[96];
} rfield;

static struct {
    const char *cls, *alias;
    rfield fields[RF_MAX];
    uint32_t n_fields;
} rtypes[RT_N];
static once_flag rtypes_once = ONCE_FLAG_INIT;

static int rfield_cmp(const void *a, const void *b)
{
    return strcmp(((const rfield *)a)->name, ((const rfield *)b)->name);
}

/* The recipe types as synth writes them, from tefuser's table: a new object's fields (those a
 * capture records for it), sorted by name; the ones its constructor takes can be set in a spec. */
static void rtypes_init(void)
{
    static const char *const aliases[RT_N] = {"delayed", "current", "mxfp8",
                                              "block",   "nvfp4",   "custom"};
    for (int t = 0; t < RT_N; t++) {
        const ft_recipe_type ft = (ft_recipe_type)(t + 1);
        rtypes[t].cls = ft_recipe_type_name(ft);
        rtypes[t].alias = aliases[t];
        uint32_t n = 0;
        for (uint32_t i = 0; i < ft_recipe_n_fields(ft) && n < RF_MAX; i++) {
            ft_recipe_field f;
            if (ft_recipe_field_at(ft, i, &f) || f.derived) continue;
            rfield *r = &rtypes[t].fields[n++];
            r->name = f.name;
            r->def = f.init;
            r->kind = !f.settable                ? F_FIXED
                      : f.kind == FT_RF_BOOL     ? F_BOOL
                      : f.kind == FT_RF_INT      ? F_INT
                      : f.kind == FT_RF_OPT_ENUM ? F_BO
                      : f.values                 ? F_ENUM
                                                 : F_FIXED;
            r->enums = NULL;
            if (f.values && (r->kind == F_ENUM || r->kind == F_BO)) {
                size_t off = 0;
                for (int k = 0; f.values[k]; k++)
                    off += (size_t)snprintf(r->enums_buf + off, sizeof r->enums_buf - off, "%s%s",
                                            k ? "|" : "", f.values[k]);
                r->enums = r->enums_buf;
            }
            /* CustomRecipe's qfactory is a callable the user passes: synth names its own */
            if (t == RT_CUSTOM && !strcmp(f.name, "qfactory")) r->def = "\"synth_qfactory\"";
        }
        rtypes[t].n_fields = n;
        qsort(rtypes[t].fields, n, sizeof *rtypes[t].fields, rfield_cmp);
        for (uint32_t i = 0; i < n; i++) /* the names moved with their fields */
            if (rtypes[t].fields[i].enums)
                rtypes[t].fields[i].enums = rtypes[t].fields[i].enums_buf;
    }
}

/* ---- recipe objects ----------------------------------------------------------------------- */
static int robj_new(gen *g, int type, robj **out)
{
    if (g->n_objs == g->cap_objs) {
        uint32_t cap = g->cap_objs ? 2 * g->cap_objs : 16;
        robj **p = ft_realloc(g->objs, cap * sizeof *p);
        if (!p) return ft_err_set(g->err, FT_ENOMEM, "synth %s: out of memory", g->scen);
        g->objs = p;
        g->cap_objs = cap;
    }
    robj *o = ft_calloc(1, sizeof *o);
    if (!o) return ft_err_set(g->err, FT_ENOMEM, "synth %s: out of memory", g->scen);
    g->objs[g->n_objs++] = o;
    o->type = type;
    /* looks like a CPython id(): 16-byte aligned heap addresses, seed-independent */
    o->obj = INT64_C(0x7f3a5c200000) + g->n_obj_made++ * INT64_C(0x2d0);
    for (uint32_t i = 0; i < rtypes[type].n_fields; i++)
        ft_strlcpy(o->vals[i], rtypes[type].fields[i].def, RV_MAX);
    *out = o;
    return FT_OK;
}

/* A new object (new identity) with o's type and attribute values. */
static int robj_clone(gen *g, const robj *o, robj **out)
{
    int rc = robj_new(g, o->type, out);
    if (rc) return rc;
    memcpy((*out)->vals, o->vals, sizeof o->vals);
    return FT_OK;
}

static int field_find(int type, const char *name)
{
    for (uint32_t i = 0; i < rtypes[type].n_fields; i++)
        if (!strcmp(rtypes[type].fields[i].name, name)) return (int)i;
    return -1;
}

static int enum_has(const char *enums, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = enums; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, v, n)) return 1;
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

/* Set attribute `name` of o from its text form v (as in a spec); the object counts as mutated.
 * `ctx` names the key for messages. */
static int robj_set(gen *g, robj *o, const char *name, const char *v, const char *ctx)
{
    int i = field_find(o->type, name);
    if (i < 0)
        return ft_err_set(g->err, FT_EINVAL, "synth %s: key '%s': %s has no attribute '%s'",
                          g->scen, ctx, rtypes[o->type].cls, name);
    const rfield *f = &rtypes[o->type].fields[i];
    char text[RV_MAX];
    int64_t x;
    switch (f->kind) {
    case F_BOOL:
        if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "True"))
            ft_strlcpy(text, "true", sizeof text);
        else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "False"))
            ft_strlcpy(text, "false", sizeof text);
        else
            goto bad;
        break;
    case F_INT:
        if (ft_parse_i64(v, &x) || x < 0 || x > (INT64_C(1) << 40)) goto bad;
        snprintf(text, sizeof text, "%lld", (long long)x);
        break;
    case F_BO:
        if (!strcmp(v, "none") || !strcmp(v, "null") || !strcmp(v, "None")) {
            ft_strlcpy(text, "null", sizeof text);
            break;
        }
        /* fall through */
    case F_ENUM:
        if (!enum_has(f->enums, v) || strlen(v) + 3 > sizeof text) goto bad;
        snprintf(text, sizeof text, "\"%s\"", v);
        break;
    default:
        if (!strcmp(v, f->def) || (!strcmp(v, "none") && !strcmp(f->def, "null"))) return FT_OK;
        return ft_err_set(g->err, FT_EINVAL,
                          "synth %s: key '%s': %s.%s is fixed at %s in this model", g->scen, ctx,
                          rtypes[o->type].cls, name, f->def);
    }
    if (strcmp(o->vals[i], text)) {
        ft_strlcpy(o->vals[i], text, RV_MAX);
        o->decl = 0;
    }
    return FT_OK;
bad:
    return ft_err_set(g->err, FT_EINVAL, "synth %s: key '%s': bad value '%s' for %s.%s%s%s%s",
                      g->scen, ctx, v, rtypes[o->type].cls, name, f->enums ? " (one of " : "",
                      f->enums ? f->enums : "", f->enums ? ")" : "");
}

/* Parse a recipe spec "TYPE[:attr=value...]" into a new object; bf16/none gives *out = NULL. */
static int robj_from_spec(gen *g, const char *spec, const char *ctx, robj **out)
{
    char buf[SYNTH_STR_MAX];
    ft_strlcpy(buf, spec, sizeof buf);
    char *colon = strchr(buf, ':');
    if (colon) *colon = '\0';
    *out = NULL;
    if (!strcmp(buf, "bf16") || !strcmp(buf, "none")) {
        if (colon)
            return ft_err_set(g->err, FT_EINVAL, "synth %s: key '%s': bf16 takes no attributes",
                              g->scen, ctx);
        return FT_OK;
    }
    int type = -1;
    for (uint32_t t = 0; t < FT_ARRAY_LEN(rtypes); t++)
        if (!strcmp(buf, rtypes[t].alias) || !strcmp(buf, rtypes[t].cls)) type = (int)t;
    if (type < 0)
        return ft_err_set(g->err, FT_EINVAL,
                          "synth %s: key '%s': unknown recipe type '%s' (bf16 delayed current "
                          "mxfp8 block nvfp4 custom)",
                          g->scen, ctx, buf);
    robj *o;
    int rc = robj_new(g, type, &o);
    if (rc) return rc;
    for (char *p = colon ? colon + 1 : NULL; p;) {
        char *next = strchr(p, ':');
        if (next) *next++ = '\0';
        char *eq = strchr(p, '=');
        if (!eq)
            return ft_err_set(g->err, FT_EINVAL, "synth %s: key '%s': '%s' is not attr=value",
                              g->scen, ctx, p);
        *eq = '\0';
        rc = robj_set(g, o, p, eq + 1, ctx);
        if (rc) return rc;
        p = next;
    }
    *out = o;
    return FT_OK;
}

static int robj_is(const robj *o, int type)
{
    return o && o->type == type;
}

static int flip_rht(gen *g, robj *o)
{
    int i = field_find(RT_NVFP4, "disable_rht");
    return robj_set(g, o, "disable_rht", strcmp(o->vals[i], "true") ? "true" : "false",
                    "disable_rht");
}

/* Declare o's current (obj, attrs) if the stream has not seen it. */
int synth_recipe_declare(gen *g, robj *o)
{
    size_t len = 0;
    g->attrs[len++] = '{';
    for (uint32_t i = 0; i < rtypes[o->type].n_fields; i++) {
        int n = snprintf(g->attrs + len, sizeof g->attrs - len, "%s\"%s\":%s", i ? "," : "",
                         rtypes[o->type].fields[i].name, o->vals[i]);
        if (n < 0 || (size_t)n + 2 >= sizeof g->attrs - len) /* sized to fit: a table bug */
            return ft_err_set(g->err, FT_ESTATE, "synth %s: %s attributes overflow", g->scen,
                              rtypes[o->type].cls);
        len += (size_t)n;
    }
    g->attrs[len++] = '}';
    g->attrs[len] = '\0';
    for (uint32_t i = 0; i < g->n_decls; i++)
        if (g->decls[i].obj == o->obj && !strcmp(g->decls[i].attrs, g->attrs)) {
            o->decl = g->decls[i].id;
            return FT_OK;
        }
    if (g->n_decls == g->cap_decls) {
        uint32_t cap = g->cap_decls ? 2 * g->cap_decls : 16;
        decl *p = ft_realloc(g->decls, cap * sizeof *p);
        if (!p) return ft_err_set(g->err, FT_ENOMEM, "synth %s: out of memory", g->scen);
        g->decls = p;
        g->cap_decls = cap;
    }
    char *a = ft_strdup(g->attrs);
    if (!a) return ft_err_set(g->err, FT_ENOMEM, "synth %s: out of memory", g->scen);
    decl *d = &g->decls[g->n_decls++];
    d->obj = o->obj;
    d->id = ++g->next_recipe_id;
    d->attrs = a;
    ft_recipe_def rd = {d->id, rtypes[o->type].cls, o->obj, a};
    int rc = g->sink->recipe_fn(g->sink->ctx, &rd);
    if (rc) return synth_sink_fail(g, rc, "recipe declaration", g->seq);
    o->decl = d->id;
    return FT_OK;
}

int synth_bo_code(const robj *o)
{
    int i = o ? field_find(o->type, "backward_override") : -1;
    if (i < 0) return 0;
    return !strcmp(o->vals[i], "\"high_precision\"") ? 1 : !strcmp(o->vals[i], "null") ? 0 : 2;
}

int64_t synth_hist_len(const robj *o)
{
    int64_t v = 0;
    if (!robj_is(o, RT_DELAYED)) return 0;
    ft_parse_i64(o->vals[field_find(RT_DELAYED, "amax_history_len")], &v);
    return v;
}

/* ---- recipes per layer -------------------------------------------------------------------- */
static int is_bf16_layer(const gen *g, uint32_t l)
{
    return (int64_t)l < g->c.bf16_first || (int64_t)l >= g->c.layers - g->c.bf16_last;
}

robj *synth_train_recipe(const gen *g, uint32_t l, int64_t step)
{
    if (is_bf16_layer(g, l)) return NULL;
    if (g->n_zoo) return g->zoo[l % g->n_zoo];
    return step < g->detour_until ? g->detour : g->cur;
}

robj *synth_eval_recipe(const gen *g, uint32_t l, int64_t step)
{
    if (g->eval_mode == 1 || is_bf16_layer(g, l)) return NULL;
    return g->eval_mode == 2 ? g->eval_obj : synth_train_recipe(g, l, step);
}

/* ---- schedule: what each step runs under -------------------------------------------------- */
static int cycle_reset(gen *g)
{
    memset(g->bo_cache, 0, sizeof g->bo_cache);
    memset(g->amax_cache, 0, sizeof g->amax_cache);
    g->bo_cache[g->bo_idx] = g->cur;
    g->amax_cache[g->amax_idx] = g->cur;
    return FT_OK;
}

int synth_schedule_step(gen *g, int64_t step)
{
    const synth_cfg *c = &g->c;
    int rc;
    if (step == c->switch_step) {
        g->cur = g->switch_obj;
        if (g->cur && c->bo_every && g->cur->type != RT_DELAYED &&
            (rc = robj_set(g, g->cur, "backward_override", g->bo_vals[g->bo_idx], "bo_values")))
            return rc;
        if (robj_is(g->cur, RT_DELAYED) && c->amax_every) {
            char v[32];
            snprintf(v, sizeof v, "%lld", (long long)g->amax_vals[g->amax_idx]);
            if ((rc = robj_set(g, g->cur, "amax_history_len", v, "amax_lens"))) return rc;
        }
        cycle_reset(g);
    }
    if (step == 0) return FT_OK;
    int detour_end = c->detour_every && step == g->detour_until;
    if (detour_end) {
        /* after a detour the program builds a new recipe object (scenario S2, docs/fuser-model.md)
         */
        robj *n;
        if (g->cur) {
            if ((rc = robj_clone(g, g->cur, &n))) return rc;
            if (c->detour_flip_rht && robj_is(n, RT_NVFP4) && (rc = flip_rht(g, n))) return rc;
            g->cur = n;
            cycle_reset(g);
        }
    }
    if (c->detour_every && step % c->detour_every == 0) g->detour_until = step + c->detour_steps;
    /* an object made after a detour starts with its own disable_rht; flips resume later */
    if (c->rht_flip_every && step % c->rht_flip_every == 0 && !detour_end &&
        robj_is(g->cur, RT_NVFP4) && (rc = flip_rht(g, g->cur)))
        return rc;
    if (c->bo_every && step % c->bo_every == 0 && g->cur && g->cur->type != RT_DELAYED) {
        g->bo_idx = (g->bo_idx + 1) % g->n_bo;
        if (c->bo_mutate) {
            rc = robj_set(g, g->cur, "backward_override", g->bo_vals[g->bo_idx], "bo_values");
            if (rc) return rc;
        } else {
            if (!g->bo_cache[g->bo_idx]) {
                robj *n;
                if ((rc = robj_clone(g, g->cur, &n))) return rc;
                rc = robj_set(g, n, "backward_override", g->bo_vals[g->bo_idx], "bo_values");
                if (rc) return rc;
                g->bo_cache[g->bo_idx] = n;
            }
            g->cur = g->bo_cache[g->bo_idx];
        }
    }
    if (c->amax_every && step % c->amax_every == 0 && robj_is(g->cur, RT_DELAYED)) {
        char v[32];
        g->amax_idx = (g->amax_idx + 1) % g->n_amax;
        snprintf(v, sizeof v, "%lld", (long long)g->amax_vals[g->amax_idx]);
        if (c->amax_mutate) {
            if ((rc = robj_set(g, g->cur, "amax_history_len", v, "amax_lens"))) return rc;
        } else {
            if (!g->amax_cache[g->amax_idx]) {
                robj *n;
                if ((rc = robj_clone(g, g->cur, &n))) return rc;
                if ((rc = robj_set(g, n, "amax_history_len", v, "amax_lens"))) return rc;
                g->amax_cache[g->amax_idx] = n;
            }
            g->cur = g->amax_cache[g->amax_idx];
        }
    }
    return FT_OK;
}

/* ---- set-up ------------------------------------------------------------------------------- */
static int parse_cycles(gen *g)
{
    const synth_cfg *c = &g->c;
    char buf[SYNTH_STR_MAX];
    ft_strlcpy(buf, c->bo_values, sizeof buf);
    for (char *p = buf; p;) {
        char *comma = strchr(p, ',');
        if (comma) *comma++ = '\0';
        if (strcmp(p, "none") && strcmp(p, "null") && strcmp(p, "high_precision") &&
            strcmp(p, "dequantized"))
            return ft_err_set(g->err, FT_EINVAL,
                              "synth %s: key 'bo_values': '%s' is not none, high_precision or "
                              "dequantized",
                              g->scen, p);
        if (g->n_bo == MAX_CYCLE)
            return ft_err_set(g->err, FT_EINVAL, "synth %s: key 'bo_values': more than %d values",
                              g->scen, MAX_CYCLE);
        ft_strlcpy(g->bo_vals[g->n_bo++], p, sizeof g->bo_vals[0]);
        p = comma;
    }
    ft_strlcpy(buf, c->amax_lens, sizeof buf);
    for (char *p = buf; p;) {
        char *comma = strchr(p, ',');
        if (comma) *comma++ = '\0';
        int64_t x;
        if (ft_parse_i64(p, &x) || x < 1 || x > (INT64_C(1) << 30))
            return ft_err_set(g->err, FT_EINVAL,
                              "synth %s: key 'amax_lens': '%s' is not a length in [1, 2^30]",
                              g->scen, p);
        if (g->n_amax == MAX_CYCLE)
            return ft_err_set(g->err, FT_EINVAL, "synth %s: key 'amax_lens': more than %d values",
                              g->scen, MAX_CYCLE);
        g->amax_vals[g->n_amax++] = x;
        p = comma;
    }
    return FT_OK;
}

/* Cross-key checks and the recipe objects that exist from the start. */
int synth_setup_recipes(gen *g)
{
    const synth_cfg *c = &g->c;
    int rc;
    if ((rc = parse_cycles(g))) return rc;
    if ((rc = robj_from_spec(g, c->recipe, "recipe", &g->cur))) return rc;
    /* validate the specs used later now, so bad input fails before any record is written */
    if ((rc = robj_from_spec(g, c->switch_recipe, "switch_recipe", &g->switch_obj))) return rc;
    int switch_delayed = c->switch_step >= 0 && robj_is(g->switch_obj, RT_DELAYED);
    int switch_nvfp4 = c->switch_step >= 0 && robj_is(g->switch_obj, RT_NVFP4);
    if ((rc = robj_from_spec(g, c->detour_recipe, "detour_recipe", &g->detour))) return rc;
    if (c->bo_every && (robj_is(g->cur, RT_DELAYED) || switch_delayed))
        return ft_err_set(g->err, FT_EINVAL,
                          "synth %s: key 'bo_every': DelayedScaling requires backward_override "
                          "None; pick another recipe",
                          g->scen);
    if (c->bo_every && g->cur &&
        (rc = robj_set(g, g->cur, "backward_override", g->bo_vals[0], "bo_values")))
        return rc;
    if (c->amax_every && !robj_is(g->cur, RT_DELAYED) && !switch_delayed)
        return ft_err_set(g->err, FT_EINVAL,
                          "synth %s: key 'amax_every': needs a DelayedScaling recipe "
                          "(recipe=delayed)",
                          g->scen);
    if (c->amax_every && robj_is(g->cur, RT_DELAYED)) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)g->amax_vals[0]);
        if ((rc = robj_set(g, g->cur, "amax_history_len", v, "amax_lens"))) return rc;
    }
    if (c->rht_flip_every && !robj_is(g->cur, RT_NVFP4) && !switch_nvfp4)
        return ft_err_set(g->err, FT_EINVAL,
                          "synth %s: key 'rht_flip_every': needs an NVFP4 recipe (recipe=nvfp4)",
                          g->scen);
    if (c->detour_every && c->detour_steps >= c->detour_every)
        return ft_err_set(g->err, FT_EINVAL,
                          "synth %s: key 'detour_steps': %lld must be less than detour_every "
                          "(%lld)",
                          g->scen, (long long)c->detour_steps, (long long)c->detour_every);
    g->detour_until = -1;
    if (!strcmp(c->eval_recipe, "same")) {
        g->eval_mode = 0;
    } else {
        if ((rc = robj_from_spec(g, c->eval_recipe, "eval_recipe", &g->eval_obj))) return rc;
        g->eval_mode = g->eval_obj ? 2 : 1;
    }
    if (c->layer_recipes[0]) {
        char buf[SYNTH_STR_MAX];
        ft_strlcpy(buf, c->layer_recipes, sizeof buf);
        uint32_t n = 1;
        for (const char *p = buf; *p; p++)
            n += *p == ',';
        g->zoo = ft_calloc(n, sizeof *g->zoo);
        if (!g->zoo) return ft_err_set(g->err, FT_ENOMEM, "synth %s: out of memory", g->scen);
        for (char *p = buf; p;) {
            char *comma = strchr(p, ',');
            if (comma) *comma++ = '\0';
            if ((rc = robj_from_spec(g, p, "layer_recipes", &g->zoo[g->n_zoo++]))) return rc;
            p = comma;
        }
    }
    cycle_reset(g);
    return FT_OK;
}

void synth_recipes_once(void)
{
    call_once(&rtypes_once, rtypes_init);
}
