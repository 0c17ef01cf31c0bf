/*
 * synth.c - synthetic training-run call streams for what-if studies (`fusertrace synth`).
 *
 * One generic generator models a Megatron-style MoE training loop as TransformerEngine's
 * OperationFuser sees it (docs/fuser-model.md, "Call patterns"): L layers, each with its own fusers
 * (grouped MLP `GroupedLinear, ScaledSwiGLU, GroupedLinear`, and a dense `BasicLinear, Bias, GELU,
 * BasicLinear, Bias` for dense layers and shared experts); steps of microbatches over pipeline
 * stages with the 1F1B schedule, plain or interleaved over virtual stages (device = stage); full
 * activation recompute (no_grad forward, then in the backward the recompute with grad under the
 * same recipe object and split sizes, then its backward); eval passes; frozen layers; recipe
 * schedules (BF16 first/last layers, per-layer recipes, global switches, NVFP4 disable_rht mutated
 * in place or changed across a detour, backward_override and amax_history_len changes). Scenarios
 * (synth_keys.c) are rows of defaults for it.
 *
 * Records go to an ft_sink in stream order: header, then each fuser and recipe declaration right
 * before its first use, calls and backward records with one strictly increasing seq. Output is a
 * pure function of (scenario, keys, seed): the generator has its own PRNGs (xoshiro256** seeded by
 * splitmix64; one stream for routing, one for timestamp noise) and reads no clock. The seed moves
 * expert popularity, split sizes and timestamp noise; structure (which calls and backward
 * records, recipes, order) depends on the keys only, because the pipeline order comes from a
 * noise-free timing model.
 *
 * Routing (key routing): zipf, a fixed per-layer Zipf(skew) popularity with lognormal noise over a
 * random permutation of the experts; drift, the same popularity taking a lognormal step per
 * training step; hot, `hot` experts sharing hot_share of the tokens; balanced, per microbatch
 * fresh gamma(alpha) expert weights normalized (a Dirichlet draw around uniform, as under an
 * auxiliary load-balancing loss; alpha=0.5 leaves about 6% of 32 experts empty at 4096 tokens);
 * drop, balanced with every count clipped to ceil(capacity * tokens / experts), the rest dropped.
 * The recompute of a checkpointed forward repeats its forward's vector in every family.
 *
 * Limits: one stream holds every pipeline stage (one process would record one stage per rank);
 * pipeline stages interleave at the granularity of one stage's forward or backward of one
 * microbatch, ordered by a simple timing model; routed token counts are constant per microbatch
 * (before routing=drop drops tokens);
 * split sizes are multinomial-like rather than exact multinomial draws (per expert a Poisson
 * count for small means or a rounded normal with the binomial variance, then the surplus or
 * deficit moved token by token to experts picked by popularity), exact in their sum;
 * `fuse_ns`/`rebuilt` are emitted only with captured=te-pre3410|te-3410, where rebuilt follows
 * TE's plan-cache rule (tefuser/te_cache.c) exactly and fuse_ns is a modelled figure, not a
 * measurement.
 */
#include "ft_tefuser.h"
#include "synth_int.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>

/* ---- PRNG: xoshiro256** seeded with splitmix64 --------------------------------------------- */
typedef struct rng {
    uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rng_seed(rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

static inline double rng_unif(rng *r) /* [0, 1) */
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Approximately standard normal: Irwin-Hall sum of four 16-bit uniforms, rescaled. Cheap, smooth
 * enough for routing noise, tails bounded at about 3.5 sigma. */
static inline double rng_normal(rng *r)
{
    uint64_t v = rng_next(r);
    double s = (double)(v & 0xffff) + (double)((v >> 16) & 0xffff) + (double)((v >> 32) & 0xffff) +
               (double)(v >> 48);
    return (s / 65536.0 - 2.0) * 1.7320508075688772;
}

/* ---- exp/log in plain IEEE arithmetic ------------------------------------------------------
 * libm's exp/pow may differ in the last bit between C libraries; these use only +, -, *, / and
 * the exact ldexp/frexp, so a seed gives the same splits on every IEEE-754 platform (C11 without
 * extensions does not contract a*b+c into an FMA). Accuracy ~1e-15 relative, plenty here. */
static double det_exp(double x)
{
    if (x < -700.0) return 0.0;
    if (x > 700.0) x = 700.0;
    double kf = x * 1.4426950408889634;
    int k = (int)(kf < 0.0 ? kf - 0.5 : kf + 0.5);
    double r =
        (x - (double)k * 6.93147180369123816490e-01) - (double)k * 1.90821492927058770002e-10;
    double term = 1.0, sum = 1.0; /* |r| <= 0.35: 14 Taylor terms */
    for (int i = 1; i <= 14; i++) {
        term *= r / (double)i;
        sum += term;
    }
    return ldexp(sum, k);
}

static double det_log(double x) /* x > 0 */
{
    int e;
    double m = frexp(x, &e); /* x = m * 2^e, m in [0.5, 1) */
    if (m < 0.70710678118654752) {
        m *= 2.0;
        e--;
    }
    double t = (m - 1.0) / (m + 1.0), t2 = t * t, term = t, sum = 0.0; /* |t| <= 0.172 */
    for (int i = 1; i <= 23; i += 2) {
        sum += term / (double)i;
        term *= t2;
    }
    return 2.0 * sum + (double)e * 0.69314718055994530942;
}

/* ---- recipe objects: every dataclass field of TE's recipe table (tefuser) ------------------- */
enum { F_BOOL, F_INT, F_ENUM, F_BO, F_FIXED };
#define RF_MAX 16 /* fields per recipe type */
#define RV_MAX 48 /* JSON text of one field value */

typedef struct rfield {
    const char *name;  /* dataclass field, fields sorted by name (canonical JSON) */
    int kind;          /* F_*; F_FIXED cannot be set from a spec */
    const char *def;   /* a new object's value as JSON text */
    const char *enums; /* F_ENUM / F_BO: allowed names, '|'-separated */
    char enums_buf[96];
} rfield;

enum { RT_DELAYED, RT_CURRENT, RT_MXFP8, RT_BLOCK, RT_NVFP4, RT_CUSTOM, RT_N };
_Static_assert(RT_DELAYED + 1 == FT_RT_DELAYED && RT_CURRENT + 1 == FT_RT_CURRENT &&
                   RT_MXFP8 + 1 == FT_RT_MXFP8 && RT_BLOCK + 1 == FT_RT_BLOCK &&
                   RT_NVFP4 + 1 == FT_RT_NVFP4 && RT_CUSTOM + 1 == FT_RT_CUSTOM,
               "synth's recipe types are the model's, less NoneType");
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

/* One Python recipe object: a type, an identity and its current attribute values. */
typedef struct robj {
    int type;                  /* RT_* */
    int64_t obj;               /* the identity a capture would record (id(recipe)) */
    int64_t decl;              /* stream id declared for the current attrs, 0 = none yet */
    char vals[RF_MAX][RV_MAX]; /* [n_fields] JSON text per field */
} robj;

/* ---- generator state ---------------------------------------------------------------------- */
enum { FK_GROUPED, FK_DENSE };

typedef struct sfuser {
    int64_t id;       /* stream id */
    int kind;         /* FK_* */
    int32_t stage;    /* pipeline stage = device */
    int declared;     /* declaration emitted */
    char label[64];   /* module path */
    ft_te_cache *cap; /* the captured TE's plan-cache state, NULL unless captured != none */
} sfuser;

typedef struct slayer {
    int32_t stage;
    int moe;           /* grouped MLP (else dense) */
    uint32_t fuser[2]; /* [n_fusers] experts or dense MLP first, then the shared expert */
    uint32_t n_fusers;
    double *pop;     /* [experts] routing probabilities (moe); owns the block below */
    double *lam;     /* [experts] expected tokens per microbatch */
    double *sd;      /* [experts] binomial standard deviation of the count */
    double *elam;    /* [experts] exp(-lam), for Poisson inversion when lam < SMALL_MEAN */
    double *aprob;   /* [experts] alias table (Vose): acceptance probability ... */
    uint32_t *alias; /* [experts] ... and alias */
    uint32_t *order; /* [experts] experts with lam >= SMALL_MEAN first (n_norm), then the rest */
    uint32_t n_norm;
    double sd2sum, lamsum; /* sums of sd^2 and of lam over the first n_norm */
    /* per step */
    int input_rg;                              /* training input requires grad */
    const uint8_t *rg_train[2], *rg_nograd[2]; /* op_rg per fuser */
    int bwd[2];                                /* the training call has f < n: its backward runs */
} slayer;

typedef struct decl {
    int64_t obj, id;
    char *attrs; /* JSON */
} decl;

#define MAX_CYCLE 16 /* values in bo_values / amax_lens */

typedef struct gen {
    synth_cfg c;
    const char *scen;
    ft_sink *sink;
    ft_err *err;
    rng r;           /* routing: popularity, split sizes */
    rng rt;          /* timestamp and fuse_ns noise */
    int64_t seq;     /* next seq */
    int64_t last_ns; /* last timestamp emitted */
    int64_t next_recipe_id, n_obj_made;
    uint32_t n_layers, n_stages, n_fusers;
    uint32_t n_virtual, n_chunks; /* model chunks per stage; chunks = stages * n_virtual */
    slayer *layers;               /* [n_layers] */
    sfuser *fusers;               /* [n_fusers] */
    uint32_t *chunk_lo; /* [n_chunks+1] first layer of each model chunk (chunk c on stage c%S) */
    char *ops_json[2];  /* per FK_*: canonical op list */
    uint32_t n_ops[2];
    int64_t dur_fwd[2]; /* modelled forward time per FK_*, ns */
    /* recipe objects and declarations */
    robj **objs;
    uint32_t n_objs, cap_objs;
    decl *decls;
    uint32_t n_decls, cap_decls;
    char attrs[RF_MAX * (RV_MAX + 40) + 8]; /* scratch: attrs JSON */
    /* schedule */
    robj *cur;        /* global training recipe (NULL = BF16) */
    robj *switch_obj; /* becomes cur at switch_step */
    robj *detour, *eval_obj;
    int eval_mode; /* 0 same, 1 bf16, 2 eval_obj */
    robj **zoo;    /* [n_zoo] per-layer recipes, NULL entries = BF16 */
    uint32_t n_zoo;
    int64_t detour_until; /* steps < detour_until run under detour */
    char bo_vals[MAX_CYCLE][16];
    uint32_t n_bo, bo_idx;
    robj *bo_cache[MAX_CYCLE];
    int64_t amax_vals[MAX_CYCLE];
    uint32_t n_amax, amax_idx;
    robj *amax_cache[MAX_CYCLE];
    /* per step */
    int64_t *splits;      /* [layers][microbatches][experts] drawn at the forward */
    int64_t *eval_splits; /* [experts] */
    int64_t *bwd_seq;     /* [layers][microbatches][2] call whose plan runs backward, -1 none */
    robj **fwd_rec;       /* [layers][microbatches] recipe object of the forward */
    /* pipeline */
    uint32_t *ops; /* [stages][2*mb] encoded (mb << 1 | backward) */
    uint32_t *n_sops, *idx;
    int64_t *finF, *finB, *free_at; /* [stages*mb], [stages*mb], [stages] */
    int64_t t;                      /* model time at the start of the next step, ns */
    uint32_t *scratch_u32;          /* [2*experts] alias-table work lists */
    int captured;                   /* 0 none, 1 te-pre3410, 2 te-3410 */
    const char *graph_phase;        /* during CUDA-graph warm-up/capture: the phase, else NULL */
    int64_t graph_iter;             /* ... and the iteration, recorded as mb */
    double *scratch_z;              /* [experts] normal deviates of one draw */
    int routing;                    /* R_* */
    double drift_sigma;             /* per-step popularity walk, 0 = none */
} gen;

/* Routing families (key routing): fixed popularity (zipf, drift, hot) or weights drawn afresh
 * per microbatch (balanced, drop). */
enum { R_ZIPF, R_DRIFT, R_HOT, R_BALANCED, R_DROP };
static const char *const routing_names[] = {"zipf", "drift", "hot", "balanced", "drop"};

static const uint8_t RG_ONE[5] = {1, 1, 1, 1, 1}, RG_ZERO[5] = {0, 0, 0, 0, 0};
static const uint8_t RG_G_NOGRAD[3] = {1, 0, 1}; /* params need grad, probs computed no_grad */
static const uint8_t RG_G_FC1[3] = {0, 1, 1};    /* fc1 frozen */
static const uint8_t RG_G_FC1_NG[3] = {0, 0, 1};
static const uint8_t RG_D_TRAIN[5] = {1, 1, 0, 1, 1}; /* GELU has no parameter */
static const uint8_t RG_D_FC1[5] = {0, 0, 0, 1, 1};

/* ---- errors ------------------------------------------------------------------------------- */
static int sink_fail(gen *g, int rc, const char *what, int64_t seq)
{
    const ft_err *se = g->sink->error_fn ? g->sink->error_fn(g->sink->ctx) : NULL;
    return ft_err_set(g->err, rc, "synth %s: sink rejected %s (seq %lld): %s", g->scen, what,
                      (long long)seq, se ? ft_err_msg(se) : ft_strerror(rc));
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
static int recipe_declare(gen *g, robj *o)
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
    if (rc) return sink_fail(g, rc, "recipe declaration", g->seq);
    o->decl = d->id;
    return FT_OK;
}

/* ---- records ------------------------------------------------------------------------------ */
static int64_t stamp(gen *g, int64_t t)
{
    if (t <= g->last_ns) t = g->last_ns + 1;
    g->last_ns = t;
    return t;
}

/* d with +-5% noise from the timing stream (never the routing stream, so that the timestamps
 * and captured keys do not move split sizes). */
static int64_t jitter(gen *g, int64_t d)
{
    return d + (int64_t)((double)d * 0.1 * (rng_unif(&g->rt) - 0.5));
}

static int bo_code(const robj *o)
{
    int i = o ? field_find(o->type, "backward_override") : -1;
    if (i < 0) return 0;
    return !strcmp(o->vals[i], "\"high_precision\"") ? 1 : !strcmp(o->vals[i], "null") ? 0 : 2;
}

static int64_t hist_len(const robj *o)
{
    int64_t v = 0;
    if (!robj_is(o, RT_DELAYED)) return 0;
    ft_parse_i64(o->vals[field_find(RT_DELAYED, "amax_history_len")], &v);
    return v;
}

/* Whether the captured TE version built a plan for this call, and a modelled fuse_ns: a
 * dict/slot hit costs a few microseconds of Python, a reset_recipe_state sweep and a plan build
 * cost per basic op (figures of the order issue #2897 profiles; not measurements). */
static int captured_rebuilt(gen *g, sfuser *f, const robj *rec, int grad, int input_rg,
                            const uint8_t *op_rg, int64_t *fuse_ns)
{
    uint32_t n = g->n_ops[f->kind], first_rg = n;
    for (uint32_t i = 0; i < n && first_rg == n; i++)
        if (op_rg[i]) first_rg = i;
    const uint32_t fb = ft_te_boundary(n, grad, input_rg, first_rg);
    /* synth's RT_* are ft_recipe_type - 1 (FT_RT_NONE = 0 is no recipe); bo codes are ft_bo */
    const int type = rec ? rec->type + 1 : FT_RT_NONE;
    int reset;
    int build = ft_te_cache_call(f->cap, type, bo_code(rec), hist_len(rec), fb, &reset);
    *fuse_ns = 4000 + (reset ? 30000 * (int64_t)n : 0) + (build ? 150000 + 20000 * (int64_t)n : 0);
    return build;
}

static int emit_call(gen *g, uint32_t fi, robj *rec, int grad, int input_rg, const uint8_t *op_rg,
                     const int64_t *splits, int64_t step, int64_t mb, const char *phase, int64_t *t,
                     int64_t *seq_out)
{
    sfuser *f = &g->fusers[fi];
    int rc, keep = g->c.stage_only < 0 || f->stage == g->c.stage_only;
    if (keep && !f->declared) {
        ft_fuser_def fd = {f->id, f->label, g->ops_json[f->kind], g->n_ops[f->kind]};
        rc = g->sink->fuser_fn(g->sink->ctx, &fd);
        if (rc) return sink_fail(g, rc, "fuser declaration", g->seq);
        f->declared = 1;
    }
    if (keep && rec && !rec->decl && (rc = recipe_declare(g, rec))) return rc;
    ft_call c;
    c.seq = g->seq++;
    c.fuser = f->id;
    c.recipe = rec ? rec->decl : 0;
    c.flags = FT_CF_HAS_STEP | FT_CF_HAS_MB | FT_CF_HAS_PHASE;
    if (grad) c.flags |= FT_CF_GRAD;
    if (input_rg) c.flags |= FT_CF_INPUT_RG;
    if (rec) c.flags |= FT_CF_HAS_RECIPE;
    if (g->c.graphs) c.flags |= FT_CF_HAS_GRAPH | (g->graph_phase ? FT_CF_GRAPH : 0u);
    c.device = f->stage;
    c.n_op_rg = g->n_ops[f->kind];
    c.op_rg = op_rg;
    c.n_splits = 0;
    c.m_splits = NULL;
    if (splits) {
        c.flags |= FT_CF_HAS_SPLITS;
        c.n_splits = (uint32_t)g->c.experts;
        c.m_splits = splits;
    }
    c.step = step;
    c.mb = mb;
    c.phase = phase;
    c.ns = 0;
    c.fuse_ns = 0;
    int64_t fuse = 0; /* model time of the fusion decision, noise-free */
    if (f->cap) {
        c.flags |= FT_CF_HAS_REBUILT | FT_CF_HAS_FUSE_NS;
        if (captured_rebuilt(g, f, rec, grad, input_rg, op_rg, &fuse)) c.flags |= FT_CF_REBUILT;
        c.fuse_ns = jitter(g, fuse);
    }
    if (g->c.timestamps) {
        c.flags |= FT_CF_HAS_NS;
        c.ns = stamp(g, *t + jitter(g, g->dur_fwd[f->kind] / 10));
    }
    *t += g->dur_fwd[f->kind] + fuse;
    /* another rank's stage: numbered, timed and modelled as in the full stream, not written */
    if (keep && (rc = g->sink->call_fn(g->sink->ctx, &c))) return sink_fail(g, rc, "call", c.seq);
    if (seq_out) *seq_out = c.seq;
    return FT_OK;
}

static int emit_backward(gen *g, int64_t call, const sfuser *f, int64_t *t)
{
    int kind = f->kind;
    ft_backward b;
    b.seq = g->seq++;
    b.call = call;
    b.has_ns = g->c.timestamps != 0;
    b.ns = b.has_ns ? stamp(g, *t + jitter(g, g->dur_fwd[kind] / 5)) : 0;
    *t += 2 * g->dur_fwd[kind];
    if (g->c.stage_only >= 0 && f->stage != g->c.stage_only) return FT_OK;
    int rc = g->sink->backward_fn(g->sink->ctx, &b);
    if (rc) return sink_fail(g, rc, "backward", b.seq);
    return FT_OK;
}

#define SMALL_MEAN 6.0
static double inv_k[256]; /* 1/k, filled by init_inv_k */
static once_flag inv_k_once = ONCE_FLAG_INIT;

static void init_inv_k(void)
{
    inv_k[0] = 0.0;
    for (int k = 1; k < 256; k++)
        inv_k[k] = 1.0 / (double)k;
}

/* An expert picked with probability pop[e] in O(1). */
static inline uint32_t alias_pick(gen *g, const slayer *L)
{
    uint64_t u = rng_next(&g->r);
    uint32_t e = (uint32_t)(((u >> 32) * (uint64_t)g->c.experts) >> 32);
    return (double)(u & 0xffffffffu) * 0x1.0p-32 < L->aprob[e] ? e : L->alias[e];
}

/* Split sizes of one microbatch. Experts expecting few tokens get a Poisson count; the others
 * a normal count with the binomial variance, conditioned on the total (the deviates are projected
 * onto the hyperplane where the counts sum to the tokens left), so only the rounding residue is
 * moved token by token to experts picked by popularity. Every entry >= 0, sum == tokens. */
static void draw_splits(gen *g, const slayer *L, int64_t *out)
{
    uint32_t E = (uint32_t)g->c.experts;
    double *z = g->scratch_z, acc = 0.0;
    int64_t sum = 0;
    for (uint32_t i = L->n_norm; i < E; i++) {
        uint32_t e = L->order[i];
        double u = rng_unif(&g->r), lam = L->lam[e], p = L->elam[e], cdf = p;
        int64_t k = 0;
        while (u > cdf && k < 255) {
            k++;
            p *= lam * inv_k[k];
            cdf += p;
        }
        out[e] = k;
        sum += k;
    }
    for (uint32_t i = 0; i < L->n_norm; i++) {
        z[i] = rng_normal(&g->r);
        acc += L->sd[L->order[i]] * z[i];
    }
    if (L->n_norm) {
        double c = L->sd2sum > 0.0 ? ((double)(g->c.tokens - sum) - L->lamsum - acc) / L->sd2sum
                                   : 0.0; /* one expert takes everything: no spread */
        for (uint32_t i = 0; i < L->n_norm; i++) {
            uint32_t e = L->order[i];
            double x = L->lam[e] + L->sd[e] * (z[i] + L->sd[e] * c) + 0.5;
            int64_t k = x < 1.0 ? 0 : x > (double)g->c.tokens ? g->c.tokens : (int64_t)x;
            out[e] = k;
            sum += k;
        }
    }
    int64_t d = g->c.tokens - sum;
    if (d > (int64_t)E || d < -(int64_t)E) { /* large imbalance: move most of it pro rata */
        for (uint32_t e = 0; e < E; e++) {
            int64_t adj = (int64_t)((double)d * L->pop[e]);
            if (out[e] + adj < 0) adj = -out[e];
            out[e] += adj;
            sum += adj;
        }
        d = g->c.tokens - sum;
    }
    for (uint32_t miss = 0; d != 0;) {
        uint32_t e = alias_pick(g, L);
        if (d > 0) {
            out[e]++;
            d--;
        } else if (out[e] > 0) {
            out[e]--;
            d++;
        } else if (++miss > 64 * E) { /* only improbable experts hold tokens: take from any */
            for (e = 0; e < E && d < 0; e++)
                while (out[e] > 0 && d < 0) {
                    out[e]--;
                    d++;
                }
        }
    }
}

static void route_tables(gen *g, slayer *L);

/* Gamma(a) deviate, a > 0 (Marsaglia-Tsang; for a < 1 boosted by U^(1/a)), from the routing
 * stream, in the deterministic exp/log. */
static double rng_gamma(rng *r, double a)
{
    double boost = 1.0;
    if (a < 1.0) {
        double u = rng_unif(r);
        boost = u > 0.0 ? det_exp(det_log(u) / a) : 0.0;
        a += 1.0;
    }
    double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = rng_normal(r), v = 1.0 + c * x;
        if (v <= 0.0) continue;
        v = v * v * v;
        double u = rng_unif(r);
        if (u > 0.0 && det_log(u) < 0.5 * x * x + d - d * v + d * det_log(v)) return d * v * boost;
    }
}

/* Split sizes of one MoE layer's microbatch under the routing family. balanced and drop draw
 * the experts' weights afresh (gamma(alpha), normalized: a Dirichlet draw around uniform, as an
 * auxiliary load-balancing loss keeps the router), then the counts as draw_splits does; drop then
 * clips every count to the capacity, the clipped tokens being dropped (the sum falls short). */
static void route_draw(gen *g, slayer *L, int64_t *out)
{
    uint32_t E = (uint32_t)g->c.experts;
    if (g->routing == R_BALANCED || g->routing == R_DROP) {
        double sum = 0.0;
        for (uint32_t e = 0; e < E; e++) {
            L->pop[e] = rng_gamma(&g->r, g->c.alpha);
            sum += L->pop[e];
        }
        for (uint32_t e = 0; e < E; e++)
            L->pop[e] = sum > 0.0 ? L->pop[e] / sum : 1.0 / (double)E;
        route_tables(g, L);
    }
    draw_splits(g, L, out);
    if (g->routing == R_DROP) {
        double capf = g->c.capacity * (double)g->c.tokens / (double)E;
        int64_t cap = (int64_t)capf;
        if ((double)cap < capf) cap++;
        for (uint32_t e = 0; e < E; e++)
            if (out[e] > cap) out[e] = cap;
    }
}

/* Routing tables of one MoE layer from its popularity: per-expert moments and the alias table. */
static void route_tables(gen *g, slayer *L)
{
    uint32_t E = (uint32_t)g->c.experts;
    double T = (double)g->c.tokens;
    for (uint32_t e = 0; e < E; e++) {
        double p = L->pop[e];
        L->lam[e] = T * p;
        L->sd[e] = sqrt(T * p * (1.0 - p));
        L->elam[e] = L->lam[e] < SMALL_MEAN ? det_exp(-L->lam[e]) : 0.0;
    }
    L->n_norm = 0;
    L->sd2sum = L->lamsum = 0.0;
    for (uint32_t e = 0; e < E; e++)
        if (L->lam[e] >= SMALL_MEAN) {
            L->order[L->n_norm++] = e;
            L->sd2sum += L->sd[e] * L->sd[e];
            L->lamsum += L->lam[e];
        }
    for (uint32_t e = 0, i = L->n_norm; e < E; e++)
        if (L->lam[e] < SMALL_MEAN) L->order[i++] = e;
    /* Vose: scaled probabilities split into small (< 1) and large (>= 1) work lists */
    uint32_t *small = g->scratch_u32, *large = g->scratch_u32 + E, ns = 0, nl = 0;
    for (uint32_t e = 0; e < E; e++) {
        L->aprob[e] = L->pop[e] * (double)E;
        L->alias[e] = e;
        if (L->aprob[e] < 1.0)
            small[ns++] = e;
        else
            large[nl++] = e;
    }
    while (ns && nl) {
        uint32_t s = small[--ns], l = large[nl - 1];
        L->alias[s] = l;
        L->aprob[l] -= 1.0 - L->aprob[s];
        if (L->aprob[l] < 1.0) {
            nl--;
            small[ns++] = l;
        }
    }
    while (nl)
        L->aprob[large[--nl]] = 1.0;
    while (ns)
        L->aprob[small[--ns]] = 1.0;
}

/* ---- recipes per layer -------------------------------------------------------------------- */
static int is_bf16_layer(const gen *g, uint32_t l)
{
    return (int64_t)l < g->c.bf16_first || (int64_t)l >= g->c.layers - g->c.bf16_last;
}

static robj *train_recipe(const gen *g, uint32_t l, int64_t step)
{
    if (is_bf16_layer(g, l)) return NULL;
    if (g->n_zoo) return g->zoo[l % g->n_zoo];
    return step < g->detour_until ? g->detour : g->cur;
}

static robj *eval_recipe(const gen *g, uint32_t l, int64_t step)
{
    if (g->eval_mode == 1 || is_bf16_layer(g, l)) return NULL;
    return g->eval_mode == 2 ? g->eval_obj : train_recipe(g, l, step);
}

/* ---- one stage's forward / backward of one microbatch ------------------------------------- */
static int chunk_forward(gen *g, uint32_t ch, uint32_t m, int64_t step, int eval, int64_t *t)
{
    int grad = !eval && !g->c.recompute;
    const char *phase = eval ? "eval" : g->graph_phase ? g->graph_phase : "fwd";
    int64_t mb = g->graph_phase ? g->graph_iter : (int64_t)m;
    uint32_t M = (uint32_t)g->c.microbatches, E = (uint32_t)g->c.experts;
    for (uint32_t l = g->chunk_lo[ch]; l < g->chunk_lo[ch + 1]; l++) {
        slayer *L = &g->layers[l];
        robj *rec = eval ? eval_recipe(g, l, step) : train_recipe(g, l, step);
        if (!eval) g->fwd_rec[(size_t)l * M + m] = rec;
        for (uint32_t k = 0; k < L->n_fusers; k++) {
            const int64_t *sp = NULL;
            if (L->moe && k == 0) {
                int64_t *dst = eval ? g->eval_splits : g->splits + ((size_t)l * M + m) * E;
                route_draw(g, L, dst);
                sp = dst;
            }
            int64_t seq;
            int rc =
                emit_call(g, L->fuser[k], rec, grad, grad && L->input_rg,
                          grad ? L->rg_train[k] : L->rg_nograd[k], sp, step, mb, phase, t, &seq);
            if (rc) return rc;
            if (!eval) g->bwd_seq[((size_t)l * M + m) * 2 + k] = grad && L->bwd[k] ? seq : -1;
        }
    }
    return FT_OK;
}

static int layer_backward(gen *g, uint32_t l, uint32_t m, int64_t *t)
{
    slayer *L = &g->layers[l];
    for (uint32_t k = L->n_fusers; k-- > 0;) {
        int64_t call = g->bwd_seq[((size_t)l * g->c.microbatches + m) * 2 + k];
        if (call < 0) continue;
        int rc = emit_backward(g, call, &g->fusers[L->fuser[k]], t);
        if (rc) return rc;
    }
    return FT_OK;
}

static int chunk_backward(gen *g, uint32_t ch, uint32_t m, int64_t step, int64_t *t)
{
    uint32_t lo = g->chunk_lo[ch], hi = g->chunk_lo[ch + 1], M = (uint32_t)g->c.microbatches;
    uint32_t E = (uint32_t)g->c.experts;
    int rc;
    if (!g->c.recompute) {
        for (uint32_t l = hi; l-- > lo;)
            if ((rc = layer_backward(g, l, m, t))) return rc;
        return FT_OK;
    }
    /* checkpointed chunks of recompute_layers layers from the stage's first layer, in reverse:
     * a chunk whose layers need no grad has no backward, so it is not recomputed either */
    uint32_t rl = (uint32_t)g->c.recompute_layers;
    uint32_t n_chunks = (hi - lo + rl - 1) / rl;
    for (uint32_t ci = n_chunks; ci-- > 0;) {
        uint32_t clo = lo + ci * rl, chi = clo + rl < hi ? clo + rl : hi;
        int any = 0;
        for (uint32_t l = clo; l < chi; l++)
            for (uint32_t k = 0; k < g->layers[l].n_fusers; k++)
                any |= g->layers[l].bwd[k];
        if (!any) continue;
        for (uint32_t l = clo; l < chi; l++) {
            slayer *L = &g->layers[l];
            robj *rec = g->fwd_rec[(size_t)l * M + m]; /* the forward's object */
            for (uint32_t k = 0; k < L->n_fusers; k++) {
                const int64_t *sp = L->moe && k == 0 ? g->splits + ((size_t)l * M + m) * E : NULL;
                int64_t seq;
                rc = emit_call(g, L->fuser[k], rec, 1, L->input_rg, L->rg_train[k], sp, step, m,
                               "recompute", t, &seq);
                if (rc) return rc;
                g->bwd_seq[((size_t)l * M + m) * 2 + k] = L->bwd[k] ? seq : -1;
            }
        }
        for (uint32_t l = chi; l-- > clo;)
            if ((rc = layer_backward(g, l, m, t))) return rc;
    }
    return FT_OK;
}

/* ---- pipeline: 1F1B per stage, stages interleaved by a timing model ------------------------ */
#define OP(m, v, bwd) (((uint32_t)(m) << 7) | ((uint32_t)(v) << 1) | (uint32_t)(bwd))
#define OP_MB(op)     ((op) >> 7)
#define OP_V(op)      (((op) >> 1) & 63u)
#define OP_BWD(op)    ((op)&1u)

/* The k-th forward (or backward) of one stage in Megatron's interleaved order: microbatches in
 * groups of S, each group through every model chunk (backward: chunks in reverse). */
static uint32_t interleaved_op(uint32_t k, uint32_t S, uint32_t V, uint32_t M, int bwd)
{
    uint32_t group = k / (S * V), in = k % (S * V), g0 = group * S;
    uint32_t width = M - g0 < S ? M - g0 : S; /* a ragged last group when S does not divide M */
    uint32_t v = in / width, m = g0 + in % width;
    return OP(m, bwd ? V - 1 - v : v, bwd);
}

/* One stage's schedule of a pass: Megatron 1F1B (V == 1: S-s-1 warm-up forwards; interleaved:
 * 2(S-s-1) + (V-1)S), steady one-forward-one-backward, cool-down backwards; eval is forwards. */
static uint32_t stage_ops(uint32_t s, uint32_t S, uint32_t V, uint32_t M, int eval, uint32_t *o)
{
    uint32_t total = M * V, n = 0, w;
    if (eval) {
        for (uint32_t k = 0; k < total; k++)
            o[n++] = interleaved_op(k, S, V, M, 0);
        return n;
    }
    if (V == 1)
        w = S - s - 1;
    else
        w = M == S ? total : 2 * (S - s - 1) + (V - 1) * S;
    if (w > total) w = total;
    for (uint32_t k = 0; k < w; k++)
        o[n++] = interleaved_op(k, S, V, M, 0);
    for (uint32_t k = 0; k < total - w; k++) {
        o[n++] = interleaved_op(w + k, S, V, M, 0);
        o[n++] = interleaved_op(k, S, V, M, 1);
    }
    for (uint32_t k = total - w; k < total; k++)
        o[n++] = interleaved_op(k, S, V, M, 1);
    return n;
}

static int run_pass(gen *g, int64_t step, int eval)
{
    uint32_t S = g->n_stages, V = g->n_virtual, C = g->n_chunks;
    uint32_t M = (uint32_t)(eval ? g->c.eval_microbatches : g->c.microbatches);
    uint32_t cap = 2 * V *
                   (uint32_t)(g->c.microbatches > g->c.eval_microbatches ? g->c.microbatches
                                                                         : g->c.eval_microbatches);
    uint32_t total = 0;
    for (uint32_t s = 0; s < S; s++) {
        g->n_sops[s] = stage_ops(s, S, V, M, eval, g->ops + (size_t)s * cap);
        g->idx[s] = 0;
        g->free_at[s] = g->t;
        total += g->n_sops[s];
    }
    for (size_t i = 0; i < (size_t)C * M; i++)
        g->finF[i] = g->finB[i] = -1;
    int64_t end = g->t;
    for (uint32_t done = 0; done < total; done++) {
        int best = -1;
        int64_t best_start = 0;
        for (uint32_t s = 0; s < S; s++) {
            if (g->idx[s] == g->n_sops[s]) continue;
            uint32_t op = g->ops[(size_t)s * cap + g->idx[s]], m = OP_MB(op);
            uint32_t ch = OP_V(op) * S + s;
            int64_t dep;
            if (!OP_BWD(op))
                dep = ch == 0 ? g->t : g->finF[(size_t)(ch - 1) * M + m];
            else
                dep = ch + 1 == C ? g->finF[(size_t)ch * M + m] : g->finB[(size_t)(ch + 1) * M + m];
            if (dep < 0) continue;
            int64_t start = dep > g->free_at[s] ? dep : g->free_at[s];
            if (best < 0 || start < best_start) {
                best = (int)s;
                best_start = start;
            }
        }
        if (best < 0) /* a 1F1B schedule cannot deadlock; this is a bug, not bad input */
            return ft_err_set(g->err, FT_ESTATE, "synth %s: pipeline schedule stalled at step %lld",
                              g->scen, (long long)step);
        uint32_t s = (uint32_t)best, op = g->ops[(size_t)s * cap + g->idx[s]], m = OP_MB(op);
        uint32_t ch = OP_V(op) * S + s;
        int64_t t = best_start;
        int rc = OP_BWD(op) ? chunk_backward(g, ch, m, step, &t)
                            : chunk_forward(g, ch, m, step, eval, &t);
        if (rc) return rc;
        if (t == best_start) t++; /* a stage with nothing to do still takes a tick */
        (OP_BWD(op) ? g->finB : g->finF)[(size_t)ch * M + m] = t;
        g->free_at[s] = t;
        g->idx[s]++;
        if (t > end) end = t;
    }
    g->t = end + 200000; /* optimizer step / eval turnaround */
    return FT_OK;
}

/* CUDA graphs (docs/fuser-model.md, "Call patterns"; make_graphed_callables): eager warm-up
 * iterations and one capture run forward and backward with grad through the fuser, flagged graph;
 * stages one after another. */
static int graph_setup(gen *g, int64_t step)
{
    int64_t t = g->t;
    int rc = FT_OK;
    for (int64_t it = 0; it <= g->c.graph_warmup && !rc; it++) {
        g->graph_phase = it < g->c.graph_warmup ? "graph-warmup" : "graph-capture";
        g->graph_iter = it;
        for (uint32_t ch = 0; ch < g->n_chunks && !rc; ch++)
            rc = chunk_forward(g, ch, 0, step, 0, &t);
        for (uint32_t ch = g->n_chunks; ch-- > 0 && !rc;)
            rc = chunk_backward(g, ch, 0, step, &t);
    }
    g->graph_phase = NULL;
    g->t = t + 200000;
    return rc;
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

static int schedule_step(gen *g, int64_t step)
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

/* The router learns: each step every expert's popularity takes a log-normal step. */
static void drift_routing(gen *g)
{
    uint32_t E = (uint32_t)g->c.experts;
    for (uint32_t l = 0; l < g->n_layers; l++) {
        slayer *L = &g->layers[l];
        if (!L->moe) continue;
        double sum = 0.0;
        for (uint32_t e = 0; e < E; e++) {
            L->pop[e] *= det_exp(g->drift_sigma * rng_normal(&g->r));
            sum += L->pop[e];
        }
        for (uint32_t e = 0; e < E; e++)
            L->pop[e] /= sum;
        route_tables(g, L);
    }
}

/* Per-layer requires_grad state for this step: frozen layers, the boundary inputs. */
static void grad_state(gen *g, int64_t step)
{
    const synth_cfg *c = &g->c;
    int fc1 = !strcmp(c->frozen_ops, "fc1");
    int before = 0; /* some earlier layer holds a trainable parameter */
    for (uint32_t l = 0; l < g->n_layers; l++) {
        slayer *L = &g->layers[l];
        int frozen =
            (int64_t)l < c->frozen_layers && (c->unfreeze_step < 0 || step < c->unfreeze_step);
        L->input_rg = before;
        int any = 0;
        for (uint32_t k = 0; k < L->n_fusers; k++) {
            int grouped = g->fusers[L->fuser[k]].kind == FK_GROUPED;
            if (!frozen) {
                L->rg_train[k] = grouped ? RG_ONE : RG_D_TRAIN;
                L->rg_nograd[k] = grouped ? RG_G_NOGRAD : RG_D_TRAIN;
            } else if (fc1) {
                L->rg_train[k] = grouped ? RG_G_FC1 : RG_D_FC1;
                L->rg_nograd[k] = grouped ? RG_G_FC1_NG : RG_D_FC1;
            } else {
                L->rg_train[k] = L->rg_nograd[k] = RG_ZERO;
            }
            int op_any = 0;
            for (uint32_t i = 0; i < g->n_ops[g->fusers[L->fuser[k]].kind]; i++)
                op_any |= L->rg_train[k][i];
            L->bwd[k] = L->input_rg || op_any; /* f < n under grad (ft_te_boundary) */
            any |= op_any;
        }
        before |= any;
    }
}

/* ---- set-up ------------------------------------------------------------------------------- */
static int version_ok(const char *v)
{
    if (!*v) return 0;
    for (const char *p = v; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              *p == '.' || *p == '+' || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

static int build_ops(gen *g)
{
    const synth_cfg *c = &g->c;
    ft_buf b = {0};
    int rc = ft_buf_printf(
        &b,
        "[{\"attrs\":{\"bias\":false,\"dtype\":\"bfloat16\",\"in_features\":%lld,"
        "\"num_groups\":%lld,\"out_features\":%lld,\"scale_bias\":false,"
        "\"single_grouped_weight\":false},\"type\":\"GroupedLinear\"},"
        "{\"attrs\":{\"activation_recompute_in_mlp\":false,\"glu_interleave_size\":32},"
        "\"type\":\"ScaledSwiGLU\"},"
        "{\"attrs\":{\"bias\":false,\"dtype\":\"bfloat16\",\"in_features\":%lld,"
        "\"num_groups\":%lld,\"out_features\":%lld,\"scale_bias\":false,"
        "\"single_grouped_weight\":false},\"type\":\"GroupedLinear\"}]",
        (long long)c->hidden, (long long)c->experts, (long long)(2 * c->ffn), (long long)c->ffn,
        (long long)c->experts, (long long)c->hidden);
    rc = rc ? rc : ft_buf_append(&b, "", 1);
    if (rc) goto oom;
    g->ops_json[FK_GROUPED] = (char *)b.data;
    g->n_ops[FK_GROUPED] = 3;
    memset(&b, 0, sizeof b);
    int tp = c->tp > 1;
    long long f_local = (long long)(c->dense_ffn / c->tp);
    rc = ft_buf_printf(
        &b,
        "[{\"attrs\":{\"dtype\":\"bfloat16\",\"in_features\":%lld,\"out_features\":%lld,"
        "\"sequence_parallel\":false,\"tensor_parallel_mode\":%s,\"tensor_parallel_size\":%lld,"
        "\"userbuffers\":false},\"type\":\"BasicLinear\"},"
        "{\"attrs\":{\"size\":%lld},\"type\":\"Bias\"},"
        "{\"attrs\":{},\"type\":\"GELU\"},"
        "{\"attrs\":{\"dtype\":\"bfloat16\",\"in_features\":%lld,\"out_features\":%lld,"
        "\"sequence_parallel\":false,\"tensor_parallel_mode\":%s,\"tensor_parallel_size\":%lld,"
        "\"userbuffers\":false},\"type\":\"BasicLinear\"},"
        "{\"attrs\":{\"size\":%lld},\"type\":\"Bias\"}]",
        (long long)c->hidden, f_local, tp ? "\"column\"" : "null", (long long)c->tp, f_local,
        f_local, (long long)c->hidden, tp ? "\"row\"" : "null", (long long)c->tp,
        (long long)c->hidden);
    rc = rc ? rc : ft_buf_append(&b, "", 1);
    if (rc) goto oom;
    g->ops_json[FK_DENSE] = (char *)b.data;
    g->n_ops[FK_DENSE] = 5;
    /* modelled durations: about 1 PFLOP/s plus 20 us of framework and launch overhead */
    g->dur_fwd[FK_GROUPED] =
        20000 + (int64_t)(6.0 * (double)c->tokens * (double)c->hidden * (double)c->ffn / 1e6);
    g->dur_fwd[FK_DENSE] = 20000 + (int64_t)(4.0 * (double)c->tokens * (double)c->hidden *
                                             (double)c->dense_ffn / (double)c->tp / 1e6);
    return FT_OK;
oom:
    ft_buf_free(&b);
    return ft_err_set(g->err, FT_ENOMEM, "synth %s: out of memory", g->scen);
}

static int build_model(gen *g)
{
    const synth_cfg *c = &g->c;
    uint32_t L = g->n_layers, S = g->n_stages, C = g->n_chunks, E = (uint32_t)c->experts;
    g->layers = ft_calloc(L, sizeof *g->layers);
    g->fusers = ft_calloc(2 * (size_t)L, sizeof *g->fusers);
    g->chunk_lo = ft_calloc(C + 1, sizeof *g->chunk_lo);
    g->scratch_u32 = ft_malloc(2 * (size_t)E * sizeof *g->scratch_u32);
    g->scratch_z = ft_malloc((size_t)E * sizeof *g->scratch_z);
    if (!g->layers || !g->fusers || !g->chunk_lo || !g->scratch_u32 || !g->scratch_z) goto oom;
    /* model chunks get L/C layers each, the first L%C one more; chunk c runs on stage c % S */
    for (uint32_t ch = 0, l = 0; ch < C; ch++) {
        g->chunk_lo[ch] = l;
        l += L / C + (ch < L % C);
        g->chunk_lo[ch + 1] = l;
    }
    for (uint32_t ch = 0; ch < C; ch++)
        for (uint32_t l = g->chunk_lo[ch]; l < g->chunk_lo[ch + 1]; l++)
            g->layers[l].stage = (int32_t)(ch % S);
    for (uint32_t l = 0; l < L; l++) {
        slayer *ly = &g->layers[l];
        ly->moe = (int64_t)l >= c->dense_layers;
        uint32_t want = ly->moe ? (c->shared_expert ? 2 : 1) : 1;
        for (uint32_t k = 0; k < want; k++) {
            sfuser *f = &g->fusers[g->n_fusers];
            f->id = g->n_fusers + 1;
            f->kind = ly->moe && k == 0 ? FK_GROUPED : FK_DENSE;
            f->stage = ly->stage;
            if (g->captured) {
                if (!(f->cap = ft_malloc(sizeof *f->cap))) goto oom;
                ft_te_cache_init(f->cap, g->captured == 1 ? FT_TE_PRE3410 : FT_TE_3410);
            }
            snprintf(f->label, sizeof f->label, "decoder.layers.%u.mlp%s", l,
                     !ly->moe ? ""
                     : k == 0 ? ".experts"
                              : ".shared_experts");
            ly->fuser[k] = g->n_fusers++;
        }
        ly->n_fusers = want;
        if (!ly->moe) continue;
        /* popularity: Zipf over a random permutation, with per-expert lognormal noise (hot: the
         * first `hot` experts share hot_share, the others the rest, same noise and permutation;
         * balanced/drop start uniform and redraw per microbatch) */
        ly->pop = ft_malloc(E * (5 * sizeof(double) + 2 * sizeof(uint32_t)));
        if (!ly->pop) goto oom;
        ly->lam = ly->pop + E;
        ly->sd = ly->lam + E;
        ly->elam = ly->sd + E;
        ly->aprob = ly->elam + E;
        ly->alias = (uint32_t *)(ly->aprob + E);
        ly->order = ly->alias + E;
        double sum = 0.0;
        for (uint32_t e = 0; e < E; e++) {
            double base = -c->skew * det_log((double)(e + 1));
            if (g->routing == R_HOT) {
                double share = (int64_t)e < c->hot ? c->hot_share / (double)c->hot
                                                   : (1.0 - c->hot_share) / (double)(E - c->hot);
                base = det_log(share > 1e-12 ? share : 1e-12);
            }
            ly->pop[e] = g->routing >= R_BALANCED ? 1.0 : det_exp(base + 0.25 * rng_normal(&g->r));
            sum += ly->pop[e];
        }
        for (uint32_t e = E; e > 1; e--) {
            uint32_t j = (uint32_t)(rng_next(&g->r) % e);
            double tmp = ly->pop[e - 1];
            ly->pop[e - 1] = ly->pop[j];
            ly->pop[j] = tmp;
        }
        for (uint32_t e = 0; e < E; e++)
            ly->pop[e] /= sum;
        route_tables(g, ly);
    }
    size_t M = (size_t)c->microbatches,
           cap = 2 * (size_t)g->n_virtual *
                 (size_t)(c->microbatches > c->eval_microbatches ? c->microbatches
                                                                 : c->eval_microbatches);
    size_t EM =
        (size_t)(c->microbatches > c->eval_microbatches ? c->microbatches : c->eval_microbatches);
    g->splits = ft_malloc((size_t)L * M * E * sizeof *g->splits);
    g->eval_splits = ft_malloc(E * sizeof *g->eval_splits);
    g->bwd_seq = ft_malloc((size_t)L * M * 2 * sizeof *g->bwd_seq);
    g->fwd_rec = ft_calloc((size_t)L * M, sizeof *g->fwd_rec);
    g->ops = ft_malloc((size_t)S * cap * sizeof *g->ops);
    g->n_sops = ft_malloc(S * sizeof *g->n_sops);
    g->idx = ft_malloc(S * sizeof *g->idx);
    g->finF = ft_malloc((size_t)C * EM * sizeof *g->finF);
    g->finB = ft_malloc((size_t)C * EM * sizeof *g->finB);
    g->free_at = ft_malloc(S * sizeof *g->free_at);
    if (!g->splits || !g->eval_splits || !g->bwd_seq || !g->fwd_rec || !g->ops || !g->n_sops ||
        !g->idx || !g->finF || !g->finB || !g->free_at)
        goto oom;
    return build_ops(g);
oom:
    return ft_err_set(g->err, FT_ENOMEM, "synth %s: out of memory", g->scen);
}

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
static int setup_recipes(gen *g)
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

static int check_cfg(gen *g)
{
    const synth_cfg *c = &g->c;
    const struct {
        int bad;
        const char *key, *why;
    } rules[] = {
        {c->stages * c->virtual_stages > c->layers, "virtual_stages",
         "times stages must not exceed layers"},
        {c->graphs && c->recompute, "graphs", "cannot be combined with recompute"},
        {c->stage_only >= c->stages, "stage_only", "must be below stages"},
        {c->dense_ffn % c->tp != 0, "tp", "must divide dense_ffn"},
        {strcmp(c->frozen_ops, "all") && strcmp(c->frozen_ops, "fc1"), "frozen_ops",
         "must be all or fc1"},
        {strcmp(c->captured, "none") && strcmp(c->captured, "te-pre3410") &&
             strcmp(c->captured, "te-3410"),
         "captured", "must be none, te-pre3410 or te-3410"},
    };
    for (size_t i = 0; i < FT_ARRAY_LEN(rules); i++)
        if (rules[i].bad)
            return ft_err_set(g->err, FT_EINVAL, "synth %s: key '%s' %s", g->scen, rules[i].key,
                              rules[i].why);
    g->captured = !strcmp(c->captured, "te-pre3410") ? 1 : !strcmp(c->captured, "te-3410") ? 2 : 0;
    g->routing = -1;
    for (int i = 0; i < (int)FT_ARRAY_LEN(routing_names); i++)
        if (!strcmp(c->routing, routing_names[i])) g->routing = i;
    if (g->routing < 0)
        return ft_err_set(g->err, FT_EINVAL,
                          "synth %s: key 'routing' must be zipf, drift, hot, balanced or drop",
                          g->scen);
    if (g->routing >= R_BALANCED && !(c->alpha > 0.0))
        return ft_err_set(g->err, FT_EINVAL, "synth %s: key 'alpha' must be > 0 for routing=%s",
                          g->scen, c->routing);
    if (g->routing == R_DROP && !(c->capacity > 0.0))
        return ft_err_set(g->err, FT_EINVAL,
                          "synth %s: key 'capacity' must be > 0 for routing=drop", g->scen);
    if (g->routing == R_HOT && c->hot >= c->experts)
        return ft_err_set(g->err, FT_EINVAL,
                          "synth %s: key 'hot' must be below 'experts' (%lld) for routing=hot",
                          g->scen, (long long)c->experts);
    g->drift_sigma = g->routing == R_DRIFT && c->drift == 0.0 ? 0.1 : c->drift;
    const struct {
        const char *key, *v;
    } vers[] = {{"cc", c->cc},
                {"cudnn_frontend", c->cudnn_frontend},
                {"cublaslt", c->cublaslt},
                {"te_version", c->te_version}};
    for (size_t i = 0; i < FT_ARRAY_LEN(vers); i++)
        if (!version_ok(vers[i].v))
            return ft_err_set(g->err, FT_EINVAL,
                              "synth %s: key '%s': '%s' is not a version (digits, letters, . + _ "
                              "-)",
                              g->scen, vers[i].key, vers[i].v);
    double cells =
        (double)c->layers *
        (double)(c->microbatches > c->eval_microbatches ? c->microbatches : c->eval_microbatches) *
        (double)c->experts;
    if (cells > (double)(INT64_C(1) << 26))
        return ft_err_set(g->err, FT_ERANGE,
                          "synth %s: keys 'layers' x 'microbatches' x 'experts' = %.0f exceeds "
                          "2^26 split cells",
                          g->scen, cells);
    return FT_OK;
}

static int emit_header(gen *g, const ft_synth_param *params, uint32_t n_params, uint64_t seed)
{
    const synth_cfg *c = &g->c;
    int64_t ws = c->world_size ? c->world_size : c->stages;
    char env[1024], extra[1024];
    snprintf(env, sizeof env,
             "{\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"%lld\","
             "\"NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP\":\"%lld\",\"cublaslt\":\"%s\","
             "\"cudnn_frontend\":\"%s\",\"device_cc\":\"%s\",\"world_size\":\"%lld\"}",
             (long long)c->fused_mlp, (long long)c->disable_wgrad, c->cublaslt, c->cudnn_frontend,
             c->cc, (long long)ws);
    /* provenance: the scenario, seed and the keys set (values as resolved, so JSON-safe) */
    ft_buf set = {0};
    int rc = ft_buf_append(&set, "", 1);
    for (uint32_t i = 0; i < n_params && !rc; i++) {
        set.len--; /* drop the terminator */
        const char *v = params[i].value;
        rc = ft_buf_printf(&set, "%s%s=%s", i ? " " : "", params[i].key, v);
        rc = rc ? rc : ft_buf_append(&set, "", 1);
    }
    if (rc) {
        ft_buf_free(&set);
        return ft_err_set(g->err, FT_ENOMEM, "synth %s: out of memory", g->scen);
    }
    /* values were validated by synth_cfg_resolve; numeric ones may hold only what strtoll and
     * strtod accept, so drop anything that would need escaping */
    for (size_t i = 0; i < set.len; i++)
        if (set.data[i] &&
            (set.data[i] < 0x20 || set.data[i] > 0x7e || set.data[i] == '"' || set.data[i] == '\\'))
            set.data[i] = '?';
    int n = snprintf(extra, sizeof extra,
                     n_params ? "{\"synth_scenario\":\"%s\",\"synth_seed\":\"%llu\","
                                "\"synth_set\":\"%s\"}"
                              : "{\"synth_scenario\":\"%s\",\"synth_seed\":\"%llu\"}",
                     g->scen, (unsigned long long)seed, (const char *)set.data);
    if (n < 0 || (size_t)n >= sizeof extra)
        snprintf(extra, sizeof extra, "{\"synth_scenario\":\"%s\",\"synth_seed\":\"%llu\"}",
                 g->scen, (unsigned long long)seed);
    ft_buf_free(&set);
    ft_header h;
    memset(&h, 0, sizeof h);
    h.te_version = c->te_version;
    h.has_rank = h.has_world_size = 1;
    h.rank = c->rank >= 0 ? c->rank : c->stage_only >= 0 ? c->stage_only : 0;
    h.world_size = ws;
    h.env_json = env;
    h.extra_json = extra;
    rc = g->sink->header_fn(g->sink->ctx, &h);
    if (rc) return sink_fail(g, rc, "header", 0);
    return FT_OK;
}

static void gen_free(gen *g)
{
    if (g->layers)
        for (uint32_t l = 0; l < g->n_layers; l++)
            ft_free(g->layers[l].pop);
    ft_free(g->layers);
    for (uint32_t i = 0; g->fusers && i < g->n_fusers; i++)
        ft_free(g->fusers[i].cap);
    ft_free(g->fusers);
    ft_free(g->chunk_lo);
    ft_free(g->scratch_u32);
    ft_free(g->scratch_z);
    ft_free(g->ops_json[0]);
    ft_free(g->ops_json[1]);
    for (uint32_t i = 0; i < g->n_objs; i++)
        ft_free(g->objs[i]);
    ft_free(g->objs);
    for (uint32_t i = 0; i < g->n_decls; i++)
        ft_free(g->decls[i].attrs);
    ft_free(g->decls);
    ft_free(g->zoo);
    ft_free(g->splits);
    ft_free(g->eval_splits);
    ft_free(g->bwd_seq);
    ft_free(g->fwd_rec);
    ft_free(g->ops);
    ft_free(g->n_sops);
    ft_free(g->idx);
    ft_free(g->finF);
    ft_free(g->finB);
    ft_free(g->free_at);
}

/* ---- public ------------------------------------------------------------------------------- */
int ft_synth_run(const char *name, const ft_synth_param *params, uint32_t n_params, uint64_t seed,
                 ft_sink *sink, ft_err *err)
{
    if (!sink || !sink->header_fn || !sink->fuser_fn || !sink->recipe_fn || !sink->call_fn ||
        !sink->backward_fn)
        return ft_err_set(err, FT_EINVAL, "synth: incomplete sink");
    gen *g = ft_calloc(1, sizeof *g);
    if (!g) return ft_err_set(err, FT_ENOMEM, "synth: out of memory");
    uint32_t si;
    int rc = synth_cfg_resolve(name, params, n_params, &g->c, &si, err);
    if (rc) goto done;
    g->scen = ft_synth_scenario_at(si)->name;
    g->sink = sink;
    g->err = err;
    g->n_layers = (uint32_t)g->c.layers;
    g->n_stages = (uint32_t)g->c.stages;
    g->n_virtual = (uint32_t)g->c.virtual_stages;
    g->n_chunks = g->n_stages * g->n_virtual;
    rng_seed(&g->r, seed);
    rng_seed(&g->rt, seed ^ 0x5eed7153a11d0c5ull);
    call_once(&inv_k_once, init_inv_k);
    call_once(&rtypes_once, rtypes_init);
    if ((rc = check_cfg(g)) || (rc = setup_recipes(g)) || (rc = build_model(g))) goto done;
    if ((rc = emit_header(g, params, n_params, seed))) goto done;
    g->t = INT64_C(1000000000); /* 1 s after the capture clock's origin */
    for (int64_t step = 0; step < g->c.steps; step++) {
        if ((rc = schedule_step(g, step))) goto done;
        grad_state(g, step);
        if (g->drift_sigma > 0.0 && step > 0) drift_routing(g);
        if (g->c.graphs ? step == 0 && (rc = graph_setup(g, step)) : (rc = run_pass(g, step, 0)))
            goto done;
        if (g->c.eval_every && (step + 1) % g->c.eval_every == 0 && (rc = run_pass(g, step, 1)))
            goto done;
    }
done:
    gen_free(g);
    ft_free(g);
    return rc;
}
