/*
 * model.c - the fuser model: environment, plan building and interning, the fusion-attrs key,
 * and stale-plan classification (spec/te-fuser.md §1.5, §2.3 run time, §5).
 *
 * A plan is built as TE's _apply_fusions does: the joint pass over the basic ops, then the
 * forward and the backward passes each over the joint result, each validated by
 * _map_to_basic_ops. Its canonical text ("fwd[...] bwd[...]", one entry per unit: a basic op as
 * Class(i), a fused op as FusedClass(lo-hi)) is interned to a dense plan id, so plans of equal
 * topology share an id whatever fuser or boundary built them. Builds are memoised per
 * (fuser, recipe, f).
 *
 * Environment keys (header env; --env overrides; values are strings): device_cc ("10.0", absent:
 * no device, 0.0), cudnn_frontend ("1.27.0", absent: package not installed), cublaslt ("13.4.0"
 * or TE's integer form "130400", absent: 0), world_size (absent: 1),
 * NVTE_CUTEDSL_FUSED_GROUPED_MLP and NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP (Python int(),
 * absent: 0), cudnn_wgrad_wrapper ("0" when grouped_gemm_wgrad_wrapper_sm100 cannot be imported,
 * absent: "1"), and the NVTE_* variables recipe defaults read.
 */
#include "model_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FT_MAX_RULES 32
#define NO_PLAN      UINT32_MAX

/* ---- environment -------------------------------------------------------------------------- */
static const char *const env_names[FT_EA_COUNT] = {
    [FT_EA_DEVICE_CC] = "device_cc",
    [FT_EA_CUDNN_FRONTEND] = "cudnn_frontend",
    [FT_EA_CUBLASLT] = "cublaslt",
    [FT_EA_WORLD_SIZE] = "world_size",
    [FT_EA_CUTEDSL_FUSED_GROUPED_MLP] = "NVTE_CUTEDSL_FUSED_GROUPED_MLP",
    [FT_EA_DISABLE_CUTEDSL_WGRAD] = "NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP",
    [FT_EA_CUDNN_WGRAD_WRAPPER] = "cudnn_wgrad_wrapper",
};

const char *ft_env_attr_name(ft_env_attr a)
{
    return (unsigned)a < FT_EA_COUNT ? env_names[a] : "?";
}

int64_t ft_version_code(int major, int minor, int patch)
{
    return (((int64_t)major * 1000 + minor) * 1000 + patch) * 2;
}

/* PEP 440-ish: up to three numeric components; a pre-release or dev suffix ("rc1", "a0",
 * ".dev0") sorts just below the release, a ".post"/"+local" suffix counts as the release. */
int ft_version_parse(const char *s, int64_t *out)
{
    int64_t part[3] = {0, 0, 0};
    int n = 0;
    const char *p = s;
    while (n < 3 && isdigit((unsigned char)*p)) {
        int64_t v = 0;
        while (isdigit((unsigned char)*p)) {
            v = v * 10 + (*p - '0');
            if (v > 999) return FT_EINVAL;
            p++;
        }
        part[n++] = v;
        if (*p == '.' && isdigit((unsigned char)p[1]) && n < 3)
            p++;
        else
            break;
    }
    if (n == 0) return FT_EINVAL;
    int pre = 0;
    if (*p == '.') p++;
    if (*p && strncmp(p, "post", 4) && *p != '+') pre = 1;
    *out = ft_version_code((int)part[0], (int)part[1], (int)part[2]) - pre;
    return FT_OK;
}

const char *ft_env_str(const ft_env *e, const char *key)
{
    if (!e || !e->obj) return NULL;
    const json_t *v = json_object_get(e->obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Python int(): optional whitespace and sign, decimal digits. */
static int parse_py_int(const char *s, int64_t *out)
{
    char buf[64];
    while (isspace((unsigned char)*s))
        s++;
    size_t n = ft_strlcpy(buf, s, sizeof buf);
    if (n >= sizeof buf) return FT_EINVAL;
    while (n && isspace((unsigned char)buf[n - 1]))
        buf[--n] = '\0';
    return ft_parse_i64(buf[0] == '+' ? buf + 1 : buf, out);
}

static int env_parse(const char *env_json, const ft_env_kv *ov, uint32_t n_ov, ft_env *e,
                     ft_err *err)
{
    memset(e, 0, sizeof *e);
    json_error_t je;
    e->obj = env_json && *env_json ? json_loads(env_json, 0, &je) : json_object();
    if (!e->obj)
        return ft_err_set(err, FT_EINVAL, "trace header env: not valid JSON (%s)", je.text);
    if (!json_is_object(e->obj))
        return ft_err_set(err, FT_EINVAL, "trace header env: not a JSON object");
    for (uint32_t i = 0; i < n_ov; i++) {
        if (!ov[i].key || !*ov[i].key || !ov[i].value)
            return ft_err_set(err, FT_EINVAL, "--env override %u: empty key or value", i);
        if (json_object_set_new(e->obj, ov[i].key, json_string(ov[i].value)))
            return ft_err_set(err, FT_ENOMEM, "--env %s: out of memory", ov[i].key);
    }
    /* values are strings; numbers and bools are taken as their text */
    const char *key;
    json_t *val;
    json_object_foreach(e->obj, key, val)
    {
        if (json_is_string(val) || json_is_null(val)) continue;
        char txt[64];
        if (json_is_integer(val))
            snprintf(txt, sizeof txt, "%lld", (long long)json_integer_value(val));
        else if (json_is_real(val))
            snprintf(txt, sizeof txt, "%.1f", json_real_value(val));
        else if (json_is_boolean(val))
            snprintf(txt, sizeof txt, "%d", json_is_true(val));
        else
            return ft_err_set(err, FT_EINVAL, "env %s: value is not a string", key);
        if (json_object_set_new(e->obj, key, json_string(txt)))
            return ft_err_set(err, FT_ENOMEM, "env %s: out of memory", key);
    }

    const char *s;
    /* device_cc "M.m" -> M*10+m */
    e->v[FT_EA_DEVICE_CC] = 0;
    if ((s = ft_env_str(e, "device_cc"))) {
        char *end;
        long mj = strtol(s, &end, 10), mn = 0;
        if (end == s || mj < 0 || mj > 99) goto bad_cc;
        if (*end == '.') {
            const char *q = end + 1;
            mn = strtol(q, &end, 10);
            if (end == q || mn < 0 || mn > 9) goto bad_cc;
        }
        if (*end) goto bad_cc;
        e->v[FT_EA_DEVICE_CC] = mj * 10 + mn;
    }
    e->v[FT_EA_CUDNN_FRONTEND] = -1;
    if ((s = ft_env_str(e, "cudnn_frontend")) && ft_version_parse(s, &e->v[FT_EA_CUDNN_FRONTEND]))
        return ft_err_set(err, FT_EINVAL,
                          "env cudnn_frontend: '%s' is not a version like \"1.27.0\"", s);
    e->v[FT_EA_CUBLASLT] = 0;
    if ((s = ft_env_str(e, "cublaslt"))) {
        int64_t iv;
        if (!strchr(s, '.') && !ft_parse_i64(s, &iv) && iv >= 10000)
            e->v[FT_EA_CUBLASLT] =
                ft_version_code((int)(iv / 10000), (int)(iv / 100 % 100), (int)(iv % 100));
        else if (ft_version_parse(s, &e->v[FT_EA_CUBLASLT]))
            return ft_err_set(err, FT_EINVAL, "env cublaslt: '%s' is not a version like \"13.4.0\"",
                              s);
    }
    e->v[FT_EA_WORLD_SIZE] = 1;
    if ((s = ft_env_str(e, "world_size")) &&
        (parse_py_int(s, &e->v[FT_EA_WORLD_SIZE]) || e->v[FT_EA_WORLD_SIZE] < 1))
        return ft_err_set(err, FT_EINVAL, "env world_size: '%s' is not an integer >= 1", s);
    static const ft_env_attr int_flags[] = {FT_EA_CUTEDSL_FUSED_GROUPED_MLP,
                                            FT_EA_DISABLE_CUTEDSL_WGRAD};
    for (size_t i = 0; i < FT_ARRAY_LEN(int_flags); i++) {
        ft_env_attr a = int_flags[i];
        e->v[a] = 0;
        /* TE evaluates int(os.environ[...]) at import: a non-integer fails the import */
        if ((s = ft_env_str(e, env_names[a])) && parse_py_int(s, &e->v[a]))
            return ft_err_set(err, FT_EINVAL, "env %s: '%s' is not an integer (TE's int() raises)",
                              env_names[a], s);
    }
    e->v[FT_EA_CUDNN_WGRAD_WRAPPER] = 1;
    if ((s = ft_env_str(e, "cudnn_wgrad_wrapper"))) {
        if (strcmp(s, "0") && strcmp(s, "1"))
            return ft_err_set(err, FT_EINVAL, "env cudnn_wgrad_wrapper: '%s' is not 0 or 1", s);
        e->v[FT_EA_CUDNN_WGRAD_WRAPPER] = s[0] == '1';
    }
    return FT_OK;
bad_cc:
    return ft_err_set(err, FT_EINVAL,
                      "env device_cc: '%s' is not a compute capability like \"10.0\"", s);
}

/* ---- the model ---------------------------------------------------------------------------- */
typedef struct fuser_m {
    int64_t id;
    ft_op *ops; /* [n_ops] */
    uint32_t n_ops;
    uint32_t recipe_reads; /* ft_recipe_read bits in its fusion key */
    uint64_t recipe_bytes; /* the same as a byte mask over ft_recipe_int.reads */
    uint64_t const_key;    /* hash of the op and env attributes in its fusion key */
    char *key_attrs;       /* the key's attribute names, comma separated */
} fuser_m;

typedef struct plan_m {
    char *text;
    uint64_t hash;
    ft_unit *units; /* [n_fwd + n_bwd]: forward units, then backward units (forward order) */
    uint32_t n_fwd, n_bwd;
    uint8_t fused_mlp;
} plan_m;

typedef struct memo_e {
    uint32_t fuser, f, plan; /* plan == NO_PLAN: empty slot */
    int32_t recipe;
} memo_e;

typedef struct errtab {
    char **s;
    uint32_t n, cap;
} errtab;

struct ft_model {
    ft_env env;
    uint8_t registered[FT_MAX_RULES]; /* import-time registration per rule row */
    fuser_m *fusers;
    uint32_t n_fusers;
    ft_recipe_int *recipes;
    uint32_t n_recipes;
    ft_recipe_int none;
    plan_m *plans;
    uint32_t n_plans, cap_plans;
    uint32_t *intern; /* open addressing over plan hash: plan index + 1, 0 = empty */
    uint32_t intern_cap;
    memo_e *memo;
    uint32_t memo_cap, memo_n;
    uint64_t n_built; /* memo misses of ft_model_build that built */
    ft_unit *scratch; /* [3 * max ops] */
    uint32_t scratch_cap;
    errtab *errs;   /* interned run-time error texts (mutable behind a const model) */
    uint8_t *audit; /* tests: set when a gate reads an undeclared attribute */
};

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

static int fuser_key_init(ft_model *m, fuser_m *fz, ft_err *err)
{
    uint32_t rmask = 0, emask = 0;
    uint64_t *opmask = ft_calloc(fz->n_ops ? fz->n_ops : 1, sizeof *opmask);
    if (!opmask) return ft_err_set(err, FT_ENOMEM, "fuser %lld: out of memory", (long long)fz->id);
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
        return ft_err_set(err, FT_ENOMEM, "fuser %lld: out of memory", (long long)fz->id);
    fz->recipe_reads = rmask;
    fz->recipe_bytes = 0;
    for (unsigned a = 0; a < FT_RR_COUNT; a++)
        if (rmask & (1u << a)) fz->recipe_bytes |= 0xffull << (8 * a);
    fz->const_key = h;
    return FT_OK;
}

int ft_model_new(const ft_fuser_def *fusers, uint32_t n_fusers, const ft_recipe_def *recipes,
                 uint32_t n_recipes, const char *env_json, const ft_env_kv *overrides,
                 uint32_t n_overrides, ft_model **out, ft_err *err)
{
    *out = NULL;
    if (ft_n_rules > FT_MAX_RULES)
        return ft_err_set(err, FT_EUNSUPPORTED, "rule table too large (%u rows)", ft_n_rules);
    ft_model *m = ft_calloc(1, sizeof *m);
    if (!m) return ft_err_set(err, FT_ENOMEM, "model: out of memory");
    int rc = env_parse(env_json, overrides, n_overrides, &m->env, err);
    if (rc) goto fail;
    for (uint32_t ri = 0; ri < ft_n_rules; ri++)
        m->registered[ri] = !ft_rules[ri].registered || ft_rules[ri].registered(&m->env);
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
        fuser_m *fz = &m->fusers[i];
        fz->id = fusers[i].id;
        rc = ft_ops_parse(fusers[i].ops_json, fusers[i].id, m->env.v[FT_EA_WORLD_SIZE], &fz->ops,
                          &fz->n_ops, err);
        if (rc) goto fail;
        m->n_fusers = i + 1;
        if (fusers[i].n_ops != fz->n_ops) {
            rc = ft_err_set(err, FT_EINVAL, "fuser %lld: declares %u ops but its ops JSON has %u",
                            (long long)fz->id, fusers[i].n_ops, fz->n_ops);
            goto fail;
        }
        rc = fuser_key_init(m, fz, err);
        if (rc) goto fail;
        if (fz->n_ops > max_ops) max_ops = fz->n_ops;
    }
    for (uint32_t i = 0; i < n_recipes; i++) {
        rc = ft_recipe_parse(&recipes[i], &m->env, &m->recipes[i], err);
        if (rc) goto fail;
        m->n_recipes = i + 1;
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
    m->scratch_cap = 3 * max_ops;
    m->scratch = ft_malloc(m->scratch_cap * sizeof *m->scratch);
    m->intern_cap = 64;
    m->intern = ft_calloc(m->intern_cap, sizeof *m->intern);
    m->memo_cap = 64;
    m->memo = ft_malloc(m->memo_cap * sizeof *m->memo);
    if (!m->scratch || !m->intern || !m->memo) {
        rc = ft_err_set(err, FT_ENOMEM, "model: out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < m->memo_cap; i++)
        m->memo[i].plan = NO_PLAN;
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
    for (uint32_t i = 0; i < m->n_fusers; i++) {
        ft_ops_free(m->fusers[i].ops, m->fusers[i].n_ops);
        ft_free(m->fusers[i].key_attrs);
    }
    /* a fuser whose parse failed half-way owns nothing (ft_ops_parse cleans up) */
    ft_free(m->fusers);
    for (uint32_t i = 0; i < m->n_recipes; i++)
        ft_recipe_int_free(&m->recipes[i]);
    ft_free(m->recipes);
    for (uint32_t i = 0; i < m->n_plans; i++) {
        ft_free(m->plans[i].text);
        ft_free(m->plans[i].units);
    }
    ft_free(m->plans);
    ft_free(m->intern);
    ft_free(m->memo);
    ft_free(m->scratch);
    if (m->errs) {
        for (uint32_t i = 0; i < m->errs->n; i++)
            ft_free(m->errs->s[i]);
        ft_free(m->errs->s);
        ft_free(m->errs);
    }
    ft_free(m);
}

uint32_t ft_model_n_fusers(const ft_model *m)
{
    return m->n_fusers;
}

uint32_t ft_model_n_ops(const ft_model *m, uint32_t fuser)
{
    return fuser < m->n_fusers ? m->fusers[fuser].n_ops : 0;
}

static const ft_recipe_int *recipe_int(const ft_model *m, int32_t recipe)
{
    if (recipe < 0 || (uint32_t)recipe >= m->n_recipes) return &m->none;
    return &m->recipes[recipe];
}

const ft_recipe_model *ft_model_recipe(const ft_model *m, int32_t recipe)
{
    return &recipe_int(m, recipe)->pub;
}

const char *ft_model_recipe_canon(const ft_model *m, int32_t recipe)
{
    const ft_recipe_int *r = recipe_int(m, recipe);
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

static int intern_grow(ft_model *m)
{
    uint32_t cap = m->intern_cap * 2;
    uint32_t *t = ft_calloc(cap, sizeof *t);
    if (!t) return FT_ENOMEM;
    for (uint32_t i = 0; i < m->n_plans; i++) {
        uint32_t s = (uint32_t)m->plans[i].hash & (cap - 1);
        while (t[s])
            s = (s + 1) & (cap - 1);
        t[s] = i + 1;
    }
    ft_free(m->intern);
    m->intern = t;
    m->intern_cap = cap;
    return FT_OK;
}

/* Intern the plan text; copies units on first sight. */
static int plan_intern(ft_model *m, const ft_buf *text, const ft_unit *fwd, uint32_t n_fwd,
                       const ft_unit *bwd, uint32_t n_bwd, uint32_t *id)
{
    uint64_t h = ft_hash64(text->data, text->len);
    uint32_t s = (uint32_t)h & (m->intern_cap - 1);
    while (m->intern[s]) {
        const plan_m *p = &m->plans[m->intern[s] - 1];
        if (p->hash == h && strlen(p->text) == text->len &&
            !memcmp(p->text, text->data, text->len)) {
            *id = m->intern[s] - 1;
            return FT_OK;
        }
        s = (s + 1) & (m->intern_cap - 1);
    }
    if ((m->n_plans + 1) * 2 > m->intern_cap) {
        if (intern_grow(m)) return FT_ENOMEM;
        s = (uint32_t)h & (m->intern_cap - 1);
        while (m->intern[s])
            s = (s + 1) & (m->intern_cap - 1);
    }
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
    m->intern[s] = m->n_plans + 1;
    *id = m->n_plans++;
    return FT_OK;
}

static uint64_t memo_hash(uint32_t fuser, int32_t recipe, uint32_t f)
{
    return ft_hash_mix(ft_hash_mix(fuser, (uint64_t)(int64_t)recipe), f);
}

static memo_e *memo_find(const ft_model *m, uint32_t fuser, int32_t recipe, uint32_t f)
{
    uint32_t s = (uint32_t)memo_hash(fuser, recipe, f) & (m->memo_cap - 1);
    for (;;) {
        memo_e *e = &m->memo[s];
        if (e->plan == NO_PLAN || (e->fuser == fuser && e->recipe == recipe && e->f == f)) return e;
        s = (s + 1) & (m->memo_cap - 1);
    }
}

static int memo_put(ft_model *m, uint32_t fuser, int32_t recipe, uint32_t f, uint32_t plan)
{
    if ((m->memo_n + 1) * 2 > m->memo_cap) {
        uint32_t cap = m->memo_cap * 2;
        memo_e *t = ft_malloc(cap * sizeof *t);
        if (!t) return FT_ENOMEM;
        for (uint32_t i = 0; i < cap; i++)
            t[i].plan = NO_PLAN;
        memo_e *old = m->memo;
        uint32_t old_cap = m->memo_cap;
        m->memo = t;
        m->memo_cap = cap;
        for (uint32_t i = 0; i < old_cap; i++)
            if (old[i].plan != NO_PLAN)
                *memo_find(m, old[i].fuser, old[i].recipe, old[i].f) = old[i];
        ft_free(old);
    }
    memo_e *e = memo_find(m, fuser, recipe, f);
    *e = (memo_e){fuser, f, plan, recipe};
    m->memo_n++;
    return FT_OK;
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
    const fuser_m *fz = &m->fusers[fuser];
    if (f > fz->n_ops)
        return ft_err_set(err, FT_EINVAL, "build: fuser %lld: boundary f=%u exceeds %u ops",
                          (long long)fz->id, f, fz->n_ops);
    memo_e *e = memo_find(m, fuser, recipe, f);
    if (e->plan != NO_PLAN) {
        *plan_id = e->plan;
        return FT_OK;
    }
    /* _apply_fusions: joint, then forward and backward each from the joint list. No fusion
     * function reads f (their signature is func(ops, *, recipe)), so f only keys the memo. */
    uint32_t n = fz->n_ops;
    ft_unit *joint = m->scratch, *fwd = m->scratch + n, *bwd = m->scratch + 2 * n;
    for (uint32_t i = 0; i < n; i++)
        joint[i] = (ft_unit){-1, i, i};
    ft_gate_ctx c = {&m->env, &recipe_int(m, recipe)->pub, fz->ops, NULL, m->audit};
    uint32_t nj = n, nf, nb;
    ft_rules_apply_pass(&c, FT_PASS_JOINT, m->registered, joint, &nj);
    memcpy(fwd, joint, nj * sizeof *joint);
    memcpy(bwd, joint, nj * sizeof *joint);
    nf = nb = nj;
    ft_rules_apply_pass(&c, FT_PASS_FWD, m->registered, fwd, &nf);
    ft_rules_apply_pass(&c, FT_PASS_BWD, m->registered, bwd, &nb);
    int rc = ft_map_to_basic(fwd, nf, fz->ops, n, fz->id, err);
    if (!rc) rc = ft_map_to_basic(bwd, nb, fz->ops, n, fz->id, err);
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
    if (!rc) rc = memo_put(m, fuser, recipe, f, id);
    if (rc)
        return ft_err_set(err, FT_ENOMEM, "build: fuser %lld: out of memory", (long long)fz->id);
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
    const fuser_m *fz = &m->fusers[fuser];
    const ft_recipe_int *r = recipe_int(m, recipe);
    uint64_t h = fz->const_key;
    return ft_hash_mix(h, r->reads & fz->recipe_bytes);
}

const char *ft_model_fusion_key_attrs(const ft_model *m, uint32_t fuser)
{
    return fuser < m->n_fusers ? m->fusers[fuser].key_attrs : "";
}

/* ---- quantizer state ---------------------------------------------------------------------- */
void ft_model_reset(const ft_model *m, ft_qstate *q, int32_t recipe)
{
    ft_qstate_reset(q, &recipe_int(m, recipe)->pub);
}

uint64_t ft_qstate_hash(const ft_qstate *q)
{
    uint64_t h = ft_hash_mix(0x7173u, (uint64_t)(uint8_t)q->cls);
    if (q->cls < 0) return h;
    h = ft_hash_mix(h, (uint64_t)q->rht | (uint64_t)q->sr << 8 | (uint64_t)q->twod << 16 |
                           (uint64_t)q->row_scaled << 24 | (uint64_t)q->four_over_six << 32 |
                           (uint64_t)q->fp8_format << 40);
    h = ft_hash_mix(h, (uint64_t)q->hist_len);
    return ft_hash_mix(h, q->qhash);
}

void ft_model_fresh_qstate(const ft_model *m, int32_t recipe, ft_qstate *q)
{
    ft_qstate_init(q);
    ft_model_reset(m, q, recipe);
}

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

/* What running the forward (then, if f < n, the backward) of plan under recipe r with quantizer
 * state q raises first, or NULL. T = token count (< 0: unknown, taken as non-empty and
 * aligned). */
static const char *run_check(const ft_model *m, const fuser_m *fz, const ft_recipe_model *r,
                             const plan_m *p, const ft_qstate *q, int64_t T, uint32_t f)
{
    const char *bwd_err = NULL;
    int grad = f < fz->n_ops;
    int nonempty = T != 0;
    for (uint32_t u = 0; u < p->n_fwd; u++) {
        const ft_unit *un = &p->units[u];
        if (un->rule >= 0 && ft_rules[un->rule].grouped_mlp) {
            const ft_op *fc1 = &fz->ops[un->lo], *fc2 = &fz->ops[un->hi];
            /* fuser_forward: input reshaped to (T, K1); T % 128 == 0 */
            if (T > 0 && T % 128)
                return errtext(m, "Unsupported input shape for fused grouped MLP",
                               "Unsupported input shape for fused grouped MLP (in_shape=[%lld, "
                               "%lld]).",
                               (long long)T, (long long)fc1->v[FT_OA_IN_FEATURES]);
            if (q->cls == FT_RT_MXFP8) continue;
            if (q->cls != FT_RT_NVFP4) return txt_fused_no_blockq;
            if (fc1->v[FT_OA_NUM_GROUPS] != 1) {
                /* W1, W2 prep: a single grouped weight is group-quantized (G != 1) */
                const char *e = NULL;
                if (fc1->v[FT_OA_SINGLE_GROUPED_WEIGHT]) e = nvfp4_group_quantize_check(q, 1);
                if (!e && fc2->v[FT_OA_SINGLE_GROUPED_WEIGHT]) e = nvfp4_group_quantize_check(q, 1);
                /* FC1 input: tex.group_quantize, checks only for non-empty input */
                if (!e && nonempty) e = nvfp4_group_quantize_check(q, 0);
                if (e) return e;
            }
            /* fused backward: dbias of a plain FC2 bias goes through bgrad_group_quantize */
            if (grad && !bwd_err && fc2->v[FT_OA_BIAS] && !fc2->v[FT_OA_SCALE_BIAS])
                bwd_err = txt_bgrad;
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
    const char *e = run_check(m, &m->fusers[fuser], &recipe_int(m, recipe)->pub, &m->plans[plan], q,
                              n_tokens, f);
    if (text) *text = e;
    return e != NULL;
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

static int fuser_quantizes(const fuser_m *fz)
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
ft_stale ft_model_classify_f(const ft_model *m, uint32_t fuser, int32_t recipe, uint32_t chosen,
                             const ft_qstate *q, uint32_t fresh, int64_t n_tokens, uint32_t f,
                             const char **error_text)
{
    if (error_text) *error_text = NULL;
    if (chosen == fresh || fuser >= m->n_fusers || chosen >= m->n_plans || fresh >= m->n_plans)
        return FT_STALE_NONE;
    const fuser_m *fz = &m->fusers[fuser];
    const ft_recipe_model *r = &recipe_int(m, recipe)->pub;
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

ft_stale ft_model_classify(const ft_model *m, uint32_t fuser, int32_t recipe, uint32_t chosen,
                           const ft_qstate *q, uint32_t fresh, int64_t n_tokens,
                           const char **error_text)
{
    return ft_model_classify_f(m, fuser, recipe, chosen, q, fresh, n_tokens, 0, error_text);
}
